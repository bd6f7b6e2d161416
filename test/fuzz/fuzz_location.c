/*-------------------------------------------------------------------------
 *
 * fuzz_location.c
 *	  libFuzzer target for the location rule of src/io/storage/location.c.
 *
 * The input is "path" or "path\nrelative_root".  For every input:
 *	- io_location_canonical either fails with IO_ERR_INVALID_ARGUMENT or
 *	  returns a form starting with "s3://", "abfs://" (Azure: with a
 *	  container and a lower-case host), "gs://" or "/" that contains no
 *	  "." or ".." segment and is its own canonical form (idempotent);
 *	- when the root is canonical too, io_location_under(path, root)
 *	  implies that the path starts with the root (trailing slashes
 *	  removed) followed by '/', and nothing is under itself.
 *	- io_webhook_origin (src/io/http/webhook_post.c: what a message may name of a
 *	  webhook URL, which is a secret) of the path either refuses it or
 *	  gives "http://" or "https://" and a host part with no user info,
 *	  path, query or fragment in it, taken from the URL itself.
 * Any violation aborts; ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-location (this file with every .c file of src/io).
 * Seed corpus: test/fuzz/corpus/location/.
 *
 * test/fuzz/fuzz_location.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* True when a '/'-separated segment of s is "." or "..". */
static int
has_dot_segment(const char *s)
{
	const char *p = s;

	for (;;)
	{
		const char *e = strchr(p, '/');
		size_t		n = e ? (size_t) (e - p) : strlen(p);

		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 1;
		if (e == NULL)
			return 0;
		p = e + 1;
	}
}

/* Check the canonical form's properties; returns it or NULL (refused). */
static char *
check_canonical(const char *path, const char *root)
{
	char	   *c = NULL;
	char	   *again = NULL;
	TmsError	err;

	if (io_location_canonical(path, root, &c, &err) != 0)
	{
		if (c != NULL || (err.code != IO_ERR_INVALID_ARGUMENT &&
						  err.code != IO_ERR_OUT_OF_MEMORY))
			abort();
		return NULL;
	}
	if (strncmp(c, "s3://", 5) != 0 && strncmp(c, "abfs://", 7) != 0 &&
		strncmp(c, "gs://", 5) != 0 && c[0] != '/')
		abort();
	if (strncmp(c, "abfs://", 7) == 0)
	{
		const char *at = strchr(c + 7, '@');
		const char *slash = strchr(c + 7, '/');

		/* a container, then the host, in lower case */
		if (at == NULL || at == c + 7 || (slash != NULL && slash < at))
			abort();
		for (const char *h = at + 1; *h && *h != '/'; h++)
			if (*h >= 'A' && *h <= 'Z')
				abort();
	}
	if (has_dot_segment(c))
		abort();
	if (io_location_canonical(c, NULL, &again, &err) != 0 || strcmp(again, c) != 0)
		abort();
	io_free(again);
	return c;
}

/* The origin of a webhook URL names no more of it than its host. */
static void
check_origin(const char *url)
{
	char		origin[256];
	const char *host;
	size_t		scheme;

	if (!io_webhook_origin(url, origin, sizeof(origin)))
	{
		const char *after = strncmp(url, "http://", 7) == 0 ? url + 7 :
		strncmp(url, "https://", 8) == 0 ? url + 8 : NULL;

		/* refused although a host came first */
		if (after != NULL && strchr(url, '@') == NULL && *after != '\0' &&
			strchr("/?#", *after) == NULL)
			abort();
		return;
	}
	if (strncmp(origin, "http://", 7) == 0)
		scheme = 7;
	else if (strncmp(origin, "https://", 8) == 0)
		scheme = 8;
	else
		abort();
	if (strncmp(url, origin, scheme) != 0)
		abort();
	host = origin + scheme;
	if (*host == '\0' || strpbrk(host, "@/?#") != NULL)
		abort();
	/* the host part is the URL's, truncated at most */
	if (strstr(url, host) == NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *buf = io_malloc(size + 1);
	char	   *nl;
	const char *root = NULL;
	char	   *cpath,
			   *croot;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	nl = strchr(buf, '\n');
	if (nl != NULL)
	{
		*nl = '\0';
		root = nl + 1;
	}
	cpath = check_canonical(buf, root);
	croot = root ? check_canonical(root, NULL) : NULL;
	if (cpath != NULL)
	{
		if (io_location_under(cpath, cpath))
			abort();
		if (croot != NULL && io_location_under(cpath, croot))
		{
			size_t		n = strlen(croot);

			while (n > 0 && croot[n - 1] == '/')
				n--;
			if (strncmp(cpath, croot, n) != 0 || cpath[n] != '/')
				abort();
			/* something other than slashes lies below the root */
			if (cpath[n + strspn(cpath + n, "/")] == '\0')
				abort();
		}
	}
	check_origin(buf);
	/* under() on raw input must not crash either */
	(void) io_location_under(buf, root ? root : "/");
	io_free(cpath);
	io_free(croot);
	io_free(buf);
	return 0;
}
