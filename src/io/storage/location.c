/*-------------------------------------------------------------------------
 *
 * location.c
 *		The one rule of tms for storage locations: which strings name a
 *		file or object, their canonical form, and when one location lies
 *		below another.
 *
 * Every path tms reads, lists, writes or deletes goes through
 * io_location_canonical (io_uri_parse calls it; the IoFileIO over storage
 * calls it with the table's relative root), and every containment check
 * (purge "is this file under the table location", local roots) uses
 * io_location_under on canonical forms.  There is no second copy of these
 * rules anywhere, in io or on the PostgreSQL side.
 *
 * Rules:
 *	- nothing is ever decoded: a percent sign is a literal character, so
 *	  "%2e%2e" is a name, not "..", and it is sent to S3 as "%252e%252e";
 *	- a "." or ".." segment is refused wherever it appears (never
 *	  resolved), in S3 keys and buckets as in file paths;
 *	- only s3:// s3a:// s3n://, Azure (abfs:// abfss:// wasb:// wasbs://),
 *	  gs:// (Google Cloud Storage) and file locations exist; any other
 *	  scheme is refused;
 *	- the four Azure schemes name the same objects, and so do an
 *	  account's ".dfs." and ".blob." hosts (Iceberg's ADLSLocation: the
 *	  account, the container and the path make the object): all become
 *	  "abfs://container@account.dfs.<domain>/path", the host in lower
 *	  case (a host that is a bare account name gets ".dfs.core.windows.net");
 *	- the output is a pure function of the input (no file system access).
 *
 * src/io/storage/location.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io_int.h"

/* Longest bucket name S3 (or any S3-compatible store) accepts, with margin. */
#define BUCKET_MAX 255

/* Longest GCS bucket name (with dots; 63 without). */
#define GCS_BUCKET_MAX 222

/* Report why path is not a location; returns -1. */
static int
refuse(TmsError *err, const char *path, const char *why)
{
	return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
						 "invalid location \"%.300s\": %s", path ? path : "", why);
}

/* True when s[0..n) is "." or "..". */
static bool
is_dot_segment(const char *s, size_t n)
{
	return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* True when any '/'-separated segment of s[0..len) is "." or "..". */
static bool
has_dot_segment(const char *s, size_t len)
{
	size_t		start = 0,
				i;

	for (i = 0; i <= len; i++)
	{
		if (i == len || s[i] == '/')
		{
			if (is_dot_segment(s + start, i - start))
				return true;
			start = i + 1;
		}
	}
	return false;
}

/*
 * Length of an RFC 3986 scheme followed by ':' at the start of s, or 0:
 * ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
 */
static size_t
scheme_len(const char *s)
{
	size_t		i = 0;

	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return 0;
	for (i = 1; s[i] != '\0'; i++)
	{
		char		c = s[i];

		if (c == ':')
			return i;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))
			return 0;
	}
	return 0;
}

/* Copy s with every run of slashes reduced to one; malloc'd or NULL. */
static char *
squeeze_dup(const char *a, const char *b, const char *c)
{
	size_t		n = strlen(a) + strlen(b) + strlen(c);
	char	   *r = io_malloc(n + 1);
	char	   *w = r;
	const char *parts[3];
	int			k;

	if (r == NULL)
		return NULL;
	parts[0] = a;
	parts[1] = b;
	parts[2] = c;
	for (k = 0; k < 3; k++)
	{
		const char *p;

		for (p = parts[k]; *p; p++)
		{
			if (*p == '/' && w > r && w[-1] == '/')
				continue;
			*w++ = *p;
		}
	}
	*w = '\0';
	return r;
}

/* The canonical form of an S3 location; rest follows "scheme://". */
static int
canonical_s3(const char *path, const char *rest, char **out, TmsError *err)
{
	const char *slash = strchr(rest, '/');
	size_t		blen = slash ? (size_t) (slash - rest) : strlen(rest);
	size_t		i;
	char	   *r;

	if (blen == 0)
		return refuse(err, path, "the S3 bucket name is empty");
	if (blen > BUCKET_MAX)
		return refuse(err, path, "the S3 bucket name is too long");
	for (i = 0; i < blen; i++)
	{
		char		c = rest[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			return refuse(err, path, "the S3 bucket name contains a character other than letters, digits, '.', '-' and '_'");
	}
	if (has_dot_segment(rest, strlen(rest)))
		return refuse(err, path, "it contains a \".\" or \"..\" segment");
	r = io_malloc(5 + strlen(rest) + 1);
	if (r == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	memcpy(r, "s3://", 5);
	strcpy(r + 5, rest);
	*out = r;
	return 0;
}

/* Is c a lower-case letter or a digit? */
static bool
is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/*
 * The canonical form of an Azure location; rest follows "scheme://":
 * "container@host[/path]".  The container is of 3 to 63 lower-case
 * letters, digits and '-' (a leading '$' for $root, $web); the host is the
 * account's, of letters, digits, '-' and '.', its first label the
 * account name (3 to 24 letters and digits).
 */
static int
canonical_azure(const char *path, const char *rest, char **out, TmsError *err)
{
	const char *slash = strchr(rest, '/');
	size_t		alen = slash ? (size_t) (slash - rest) : strlen(rest);
	const char *at = memchr(rest, '@', alen);
	const char *host;
	size_t		clen,
				hlen,
				acct,
				i;
	IoStrBuf	sb;

	if (at == NULL)
		return refuse(err, path, "an Azure location names its container: abfss://container@account.dfs.core.windows.net/path");
	clen = (size_t) (at - rest);
	host = at + 1;
	hlen = alen - clen - 1;
	if (clen < 3 || clen > 63)
		return refuse(err, path, "the Azure container name is not 3 to 63 characters long");
	for (i = 0; i < clen; i++)
		if (!(is_lower_alnum(rest[i]) || rest[i] == '-' || (i == 0 && rest[i] == '$')))
			return refuse(err, path, "the Azure container name contains a character other than lower-case letters, digits and '-'");
	if (hlen == 0 || hlen > BUCKET_MAX)
		return refuse(err, path, "the Azure account host is empty or too long");
	for (i = 0; i < hlen; i++)
	{
		char		c = host[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '-'))
			return refuse(err, path, "the Azure account host contains a character other than letters, digits, '.' and '-'");
	}
	for (acct = 0; acct < hlen && host[acct] != '.'; acct++)
		if (host[acct] == '-')
			return refuse(err, path, "the Azure account name contains a character other than letters and digits");
	if (acct < 3 || acct > 24)
		return refuse(err, path, "the Azure account name is not 3 to 24 letters and digits");
	if (acct == hlen - 1)
		return refuse(err, path, "the Azure account host ends in '.'");
	if (slash != NULL && has_dot_segment(slash + 1, strlen(slash + 1)))
		return refuse(err, path, "it contains a \".\" or \"..\" segment");
	io_sb_init(&sb);
	io_sb_puts(&sb, "abfs://");
	io_sb_append(&sb, rest, clen + 1);
	for (i = 0; i < acct; i++)
		io_sb_putc(&sb, (char) tolower((unsigned char) host[i]));
	if (acct == hlen)
		io_sb_puts(&sb, ".dfs.core.windows.net");
	else if (hlen - acct > 6 && strncasecmp(host + acct, ".blob.", 6) == 0)
	{
		io_sb_puts(&sb, ".dfs.");
		for (i = acct + 6; i < hlen; i++)
			io_sb_putc(&sb, (char) tolower((unsigned char) host[i]));
	}
	else
		for (i = acct; i < hlen; i++)
			io_sb_putc(&sb, (char) tolower((unsigned char) host[i]));
	if (slash != NULL)
		io_sb_puts(&sb, slash);
	if (sb.oom)
	{
		io_sb_free(&sb);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	*out = io_sb_steal(&sb);
	return 0;
}

/* Is the scheme of sl characters at path one of Azure's? */
static bool
azure_scheme(const char *path, size_t sl)
{
	return (sl == 4 && (strncasecmp(path, "abfs", 4) == 0 ||
						strncasecmp(path, "wasb", 4) == 0)) ||
		(sl == 5 && (strncasecmp(path, "abfss", 5) == 0 ||
					 strncasecmp(path, "wasbs", 5) == 0));
}

/*
 * The canonical form of a Google Cloud Storage location; rest follows
 * "gs://".  Bucket names are 3 to 222 lowercase letters, digits, '-', '_'
 * and '.' (https://cloud.google.com/storage/docs/buckets#naming).
 */
static int
canonical_gs(const char *path, const char *rest, char **out, TmsError *err)
{
	const char *slash = strchr(rest, '/');
	size_t		blen = slash ? (size_t) (slash - rest) : strlen(rest);
	size_t		i;
	char	   *r;

	if (blen == 0)
		return refuse(err, path, "the GCS bucket name is empty");
	if (blen < 3 || blen > GCS_BUCKET_MAX)
		return refuse(err, path, "the GCS bucket name must have 3 to 222 characters");
	for (i = 0; i < blen; i++)
	{
		char		c = rest[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == '-' || c == '_'))
			return refuse(err, path, "the GCS bucket name contains a character other than lowercase letters, digits, '.', '-' and '_'");
	}
	if (has_dot_segment(rest, strlen(rest)))
		return refuse(err, path, "it contains a \".\" or \"..\" segment");
	r = io_malloc(5 + strlen(rest) + 1);
	if (r == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	memcpy(r, "gs://", 5);
	strcpy(r + 5, rest);
	*out = r;
	return 0;
}

/*
 * See io.h.  The forms, in the order they are tried:
 *	s3:// s3a:// s3n:// (any case)		S3, "s3://bucket/key"
 *	abfs[s]:// wasb[s]:// (any case)	Azure, "abfs://container@host/key"
 *	gs:// (any case)					GCS, "gs://bucket/key"
 *	file:// + "/abs"					absolute ("file:///abs")
 *	file://localhost[/abs]				absolute
 *	file://host/rest					relative "host/rest" (old local writers)
 *	file:/abs							absolute
 *	file:rest							relative
 *	/abs								absolute
 *	scheme:...							refused
 *	rest ("a/b", "./a/b")				relative
 */
int
io_location_canonical(const char *path, const char *relative_root, char **out,
					  TmsError *err)
{
	const char *abs = NULL;
	const char *rel = NULL;
	size_t		sl;
	char	   *r;

	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return refuse(err, path, "the location is empty");
	sl = scheme_len(path);
	if (sl > 0 && path[sl + 1] == '/' && path[sl + 2] == '/' &&
		((sl == 2 && strncasecmp(path, "s3", 2) == 0) ||
		 (sl == 3 && (strncasecmp(path, "s3a", 3) == 0 ||
					  strncasecmp(path, "s3n", 3) == 0))))
		return canonical_s3(path, path + sl + 3, out, err);
	if (sl > 0 && path[sl + 1] == '/' && path[sl + 2] == '/' && azure_scheme(path, sl))
		return canonical_azure(path, path + sl + 3, out, err);
	if (sl == 2 && path[3] == '/' && path[4] == '/' && strncasecmp(path, "gs", 2) == 0)
		return canonical_gs(path, path + 5, out, err);
	if (sl == 4 && strncasecmp(path, "file", 4) == 0)
	{
		const char *p = path + 5;

		if (p[0] == '/' && p[1] == '/')
		{
			const char *auth = p + 2;
			const char *end = strchr(auth, '/');
			size_t		alen = end ? (size_t) (end - auth) : strlen(auth);

			if (alen == 0 && auth[0] == '\0')
				return refuse(err, path, "the location names no file");
			if (alen == 0)
				abs = auth;		/* file:///abs */
			else if (alen == 9 && strncasecmp(auth, "localhost", 9) == 0)
				abs = end ? end : "/";
			else
				rel = auth;		/* file://host/rest: relative "host/rest" */
		}
		else if (p[0] == '/')
			abs = p;
		else
			rel = p;
	}
	else if (path[0] == '/')
		abs = path;
	else if (sl > 0)
		return refuse(err, path, "only s3://, s3a://, s3n://, abfs[s]://, wasb[s]://, gs:// and file locations are supported");
	else
		rel = path;

	if (rel != NULL)
	{
		char	   *root;
		TmsError	rerr;

		while (rel[0] == '.' && rel[1] == '/')
		{
			rel += 2;
			while (rel[0] == '/')
				rel++;
		}
		if (rel[0] == '\0')
			return refuse(err, path, "the relative location names no file");
		if (relative_root == NULL || relative_root[0] == '\0')
			return refuse(err, path, "the location is relative and there is no root to resolve it against");
		if (io_location_canonical(relative_root, NULL, &root, &rerr) != 0)
		{
			if (rerr.code == IO_ERR_OUT_OF_MEMORY)
				return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			return refuse(err, path, "the location is relative and its root is not an absolute directory");
		}
		if (root[0] != '/')
		{
			io_free(root);
			return refuse(err, path, "the location is relative and its root is not an absolute directory");
		}
		r = squeeze_dup(root, "/", rel);
		io_free(root);
	}
	else
		r = squeeze_dup(abs, "", "");
	if (r == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (has_dot_segment(r, strlen(r)))
	{
		io_free(r);
		return refuse(err, path, "it contains a \".\" or \"..\" segment");
	}
	*out = r;
	return 0;
}

/* See io.h. */
bool
io_location_under(const char *path, const char *root)
{
	size_t		n;

	if (path == NULL || root == NULL)
		return false;
	n = strlen(root);
	while (n > 0 && root[n - 1] == '/')
		n--;

	/*
	 * a canonical root: "/..." ("/" itself included), "s3://bucket...",
	 * "abfs://container@host..." or "gs://bucket..."
	 */
	if (!(root[0] == '/' ||
		  (strncmp(root, "s3://", 5) == 0 && n > 5 && root[5] != '/') ||
		  (strncmp(root, "abfs://", 7) == 0 && n > 7 && root[7] != '/') ||
		  (strncmp(root, "gs://", 5) == 0 && n > 5 && root[5] != '/')))
		return false;
	if (has_dot_segment(path, strlen(path)) || has_dot_segment(root, n))
		return false;
	if (strncmp(path, root, n) != 0 || path[n] != '/')
		return false;
	/* strictly below: something other than slashes follows */
	return path[n + strspn(path + n, "/")] != '\0';
}
