/*-------------------------------------------------------------------------
 *
 * storage.c
 *		Object storage: local files (file:// URIs and absolute paths),
 *		confined to the configured allowed roots and never through a
 *		symbolic link, and S3 (s3://, s3a://, s3n://) over the HTTP core
 *		with SigV4 signing.  Every location goes through the location rule
 *		(location.c) first.
 *
 * S3 requests are signed for service "s3" with single URI encoding, no
 * path normalisation and the payload's sha256 in x-amz-content-sha256
 * (signed).  The object key is encoded once with RFC 3986 rules, which
 * makes the wire path its own canonical form.  Addressing is path style
 * ("endpoint/bucket/key") or virtual host ("bucket.endpoint/key"); by
 * default path style when a custom endpoint is configured and virtual
 * host on AWS (path style for bucket names with dots).
 *
 * Listing uses ListObjectsV2 with continuation tokens; deletion uses
 * DeleteObjects with up to 1000 keys per request, a Content-MD5 header
 * (required by AWS, ignored by s3rver), and reports every key's outcome.
 * The building and signing of a request, the DeleteObjects body and the
 * reader of its answer are shared with the bulk deleter (delete.c), which
 * runs several such requests at once (io_int.h).
 *
 * src/io/storage.c
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "io_int.h"

#define S3_DELETE_BATCH IO_S3_DELETE_MAX_KEYS

struct IoStorage
{
	char	   *endpoint;		/* scheme://host[:port][/base], no trailing / */
	char	   *region;
	int			path_style;
	char	   *access_key_id;
	char	   *secret_access_key;
	char	   *session_token;
	bool		vended;			/* the credentials are a catalog's */
	int64_t		expire_ms;		/* their expiry, Unix ms; 0: unknown */
	int64_t		received_ms;	/* when they were set, Unix ms */
	IoRefreshFn refresh;
	void	   *refresh_arg;
	void		(*refresh_free) (void *);
	int			refreshes;
	int			list_page_size;
	char	  **local_roots;	/* canonical absolute directories */
	size_t		nlocal_roots;
	IoHttpOptions http;
};

/* ----------------------------------------------------------------
 * URIs
 * ----------------------------------------------------------------
 */

void
io_uri_free(IoParsedUri *uri)
{
	if (uri == NULL)
		return;
	free(uri->bucket);
	free(uri->path);
	uri->bucket = NULL;
	uri->path = NULL;
}

/*
 * Parse a storage URI (see io.h): the canonical form of location.c, split
 * into bucket and key for S3.  S3 URIs need a bucket; the key may be empty
 * (a bucket-wide prefix).  Relative locations are refused here: callers
 * that have a relative root canonicalise first.
 */
int
io_uri_parse(const char *uri, IoParsedUri *out, IoError *err)
{
	char	   *c;

	memset(out, 0, sizeof(*out));
	if (io_location_canonical(uri, NULL, &c, err) != 0)
		return -1;
	if (strncmp(c, "s3://", 5) == 0)
	{
		const char *rest = c + 5;
		const char *slash = strchr(rest, '/');
		size_t		blen = slash ? (size_t) (slash - rest) : strlen(rest);

		out->scheme = IO_URI_S3;
		out->bucket = io_strndup(rest, blen);
		out->path = io_strdup(slash ? slash + 1 : "");
		free(c);
	}
	else
	{
		out->scheme = IO_URI_FILE;
		out->path = c;
	}
	if (out->path == NULL || (out->scheme == IO_URI_S3 && out->bucket == NULL))
	{
		io_uri_free(out);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	return 0;
}

/* The scheme prefix of uri ("s3a://") for building listing results. */
static size_t
uri_scheme_len(const char *uri)
{
	const char *p = strstr(uri, "://");

	return p ? (size_t) (p - uri) + 3 : 0;
}

/* ----------------------------------------------------------------
 * Handle
 * ----------------------------------------------------------------
 */


IoStorage *
io_storage_create(const IoStorageConfig *cfg, IoError *err)
{
	IoStorage  *st = calloc(1, sizeof(IoStorage));

	if (st == NULL)
	{
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	if (cfg->s3_endpoint != NULL && cfg->s3_endpoint[0] != '\0')
	{
		size_t		n = strlen(cfg->s3_endpoint);

		if (strncmp(cfg->s3_endpoint, "http://", 7) != 0 &&
			strncmp(cfg->s3_endpoint, "https://", 8) != 0)
		{
			free(st);
			io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
						 "invalid S3 endpoint \"%s\": must start with http:// or https://",
						 cfg->s3_endpoint);
			return NULL;
		}
		while (n > 0 && cfg->s3_endpoint[n - 1] == '/')
			n--;
		st->endpoint = io_strndup(cfg->s3_endpoint, n);
	}
	/* the region goes into a host name and into the signature's scope */
	if (cfg->s3_region != NULL && cfg->s3_region[0] != '\0' &&
		!io_sigv4_scope_valid(cfg->s3_region))
	{
		io_storage_free(st);
		io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
					 "invalid S3 region \"%.100s\": only letters, digits, '-', '_' and '.' are allowed",
					 cfg->s3_region);
		return NULL;
	}
	st->region = io_strdup(cfg->s3_region && cfg->s3_region[0] ? cfg->s3_region : "us-east-1");
	st->path_style = cfg->s3_path_style;
	st->list_page_size = cfg->s3_list_page_size > 0 && cfg->s3_list_page_size <= 1000 ?
		cfg->s3_list_page_size : 1000;
	st->access_key_id = io_strdup(cfg->s3_access_key_id);
	st->secret_access_key = io_strdup(cfg->s3_secret_access_key);
	st->session_token = io_strdup(cfg->s3_session_token);
	st->vended = cfg->s3_credentials_vended;
	st->expire_ms = cfg->s3_credentials_expire_ms;
	st->received_ms = io_wall_ms();
	st->http = cfg->http;
	st->http.ca_file = NULL;
	st->http.ca_path = NULL;
	if (cfg->nlocal_roots > 0)
	{
		size_t		i;

		st->local_roots = calloc(cfg->nlocal_roots, sizeof(char *));
		if (st->local_roots == NULL)
		{
			io_storage_free(st);
			io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			return NULL;
		}
		for (i = 0; i < cfg->nlocal_roots; i++)
		{
			const char *r = cfg->local_roots[i];

			if (r == NULL || r[0] != '/' ||
				io_location_canonical(r, NULL, &st->local_roots[i], err) != 0)
			{
				io_storage_free(st);
				if (r == NULL || r[0] != '/' || err->code == IO_ERR_INVALID_ARGUMENT)
					io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
								 "invalid allowed location \"%.300s\": it must be an absolute directory without \".\" or \"..\" segments",
								 r ? r : "");
				return NULL;
			}
			st->nlocal_roots++;
		}
	}
	if (st->region == NULL ||
		(cfg->s3_access_key_id && st->access_key_id == NULL) ||
		(cfg->s3_secret_access_key && st->secret_access_key == NULL) ||
		(cfg->s3_session_token && st->session_token == NULL))
	{
		io_storage_free(st);
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	return st;
}

void
io_storage_config_get(const IoStorage *st, IoStorageConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->s3_endpoint = st->endpoint;
	cfg->s3_region = st->region;
	cfg->s3_path_style = st->path_style;
	cfg->s3_access_key_id = st->access_key_id;
	cfg->s3_secret_access_key = st->secret_access_key;
	cfg->s3_session_token = st->session_token;
	cfg->s3_list_page_size = st->list_page_size;
	cfg->local_roots = (const char *const *) st->local_roots;
	cfg->nlocal_roots = st->nlocal_roots;
	cfg->http = st->http;
}

/* Free the handle; secrets are wiped first. */
void
io_storage_free(IoStorage *st)
{
	if (st == NULL)
		return;
	if (st->secret_access_key)
		memset(st->secret_access_key, 0, strlen(st->secret_access_key));
	if (st->session_token)
		memset(st->session_token, 0, strlen(st->session_token));
	if (st->refresh_free != NULL)
		st->refresh_free(st->refresh_arg);
	free(st->endpoint);
	free(st->region);
	free(st->access_key_id);
	free(st->secret_access_key);
	free(st->session_token);
	for (size_t i = 0; i < st->nlocal_roots; i++)
		free(st->local_roots[i]);
	free(st->local_roots);
	free(st);
}

/* See io_int.h. */
const IoHttpOptions *
io_storage_http(const IoStorage *st)
{
	return &st->http;
}

/* See io.h. */
int
io_storage_target(IoStorage *st, const char *uri, char *buf, size_t size)
{
	IoParsedUri u;
	IoError		err;
	int			n;

	if (io_uri_parse(uri, &u, &err) != 0)
		return -1;
	if (u.scheme != IO_URI_S3)
		n = -1;
	else if (st->endpoint != NULL)
		n = snprintf(buf, size, "%s/%s", st->endpoint, u.bucket);
	else
		n = snprintf(buf, size, "https://s3.%s.amazonaws.com/%s", st->region, u.bucket);
	io_uri_free(&u);
	return n < 0 || (size_t) n >= size ? -1 : 0;
}

void
io_buffer_free(IoBuffer *buf)
{
	if (buf == NULL)
		return;
	free(buf->data);
	buf->data = NULL;
	buf->len = 0;
}

/*
 * Apply vended properties (see io.h).  Two passes: first find out whether
 * the catalog vended a complete pair of credentials, then apply.
 */
void
io_storage_config_apply(IoStorageConfig *cfg, const IoKeyValue *kv, size_t n,
						bool allow_vended_endpoint)
{
	const char *key_id = NULL,
			   *secret = NULL,
			   *token = NULL,
			   *endpoint = NULL,
			   *expires = NULL;
	size_t		i;

	for (i = 0; i < n; i++)
	{
		const char *k = kv[i].key;
		const char *v = kv[i].value;

		if (k == NULL || v == NULL)
			continue;
		if (strcmp(k, "s3.access-key-id") == 0)
			key_id = v;
		else if (strcmp(k, "s3.secret-access-key") == 0)
			secret = v;
		else if (strcmp(k, "s3.session-token") == 0)
			token = v;
		else if (strcmp(k, "s3.endpoint") == 0)
			endpoint = v;
		else if (strcmp(k, "s3.session-token-expires-at-ms") == 0)
			expires = v;
		else if ((strcmp(k, "client.region") == 0 || strcmp(k, "s3.region") == 0) &&
				 io_sigv4_scope_valid(v))
			cfg->s3_region = v;
		else if (strcmp(k, "s3.path-style-access") == 0)
			cfg->s3_path_style = strcasecmp(v, "true") == 0 ? 1 : 0;
	}
	if (key_id == NULL || key_id[0] == '\0' || secret == NULL || secret[0] == '\0')
		return;					/* the mapping's credentials, the server's endpoint */
	cfg->s3_access_key_id = key_id;
	cfg->s3_secret_access_key = secret;
	/* never pair the vended key with the mapping's session token */
	cfg->s3_session_token = token != NULL && token[0] != '\0' ? token : NULL;
	cfg->s3_credentials_vended = true;
	cfg->s3_credentials_expire_ms = expires ? strtoll(expires, NULL, 10) : 0;
	if (cfg->s3_credentials_expire_ms < 0)
		cfg->s3_credentials_expire_ms = 0;
	if (endpoint != NULL && endpoint[0] != '\0' && allow_vended_endpoint)
		cfg->s3_endpoint = endpoint;
}

/* ----------------------------------------------------------------
 * Vended credentials that expire (io.h, io_storage_set_refresh)
 * ----------------------------------------------------------------
 */

/* Credentials are refreshed this long before they expire, at most. */
#define REFRESH_MARGIN_MAX_MS	(5 * 60 * 1000)

/* See io.h. */
void
io_storage_set_refresh(IoStorage *st, IoRefreshFn fn, void *arg, void (*free_arg) (void *))
{
	if (st->refresh_free != NULL)
		st->refresh_free(st->refresh_arg);
	st->refresh = st->vended ? fn : NULL;
	st->refresh_arg = st->vended ? arg : NULL;
	st->refresh_free = st->vended ? free_arg : NULL;
	if (!st->vended && free_arg != NULL)
		free_arg(arg);
}

/* See io.h. */
bool
io_storage_refreshable(const IoStorage *st)
{
	return st->refresh != NULL;
}

/* See io.h. */
int
io_storage_refresh_count(const IoStorage *st)
{
	return st->refreshes;
}

/* See io.h. */
int64_t
io_storage_credentials_expire_ms(const IoStorage *st)
{
	return st->expire_ms;
}

/* See io.h. */
int
io_storage_refresh(IoStorage *st, IoError *err)
{
	IoTableCredentials c;
	IoStorageConfig cfg;
	char	   *key_id,
			   *secret,
			   *token;

	if (st->refresh == NULL)
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
							"the storage credentials cannot be refreshed");
	memset(&c, 0, sizeof(c));
	if (st->refresh(st->refresh_arg, &c, err) != 0)
		return -1;
	memset(&cfg, 0, sizeof(cfg));
	io_storage_config_apply(&cfg, c.config, c.nconfig, false);
	if (!cfg.s3_credentials_vended)
	{
		io_table_credentials_free(&c);
		return io_set_error(err, IO_ERR_PROTOCOL, 0,
							"the catalog vended no storage credentials (an access key id and a secret) to refresh them with");
	}
	key_id = io_strdup(cfg.s3_access_key_id);
	secret = io_strdup(cfg.s3_secret_access_key);
	token = cfg.s3_session_token ? io_strdup(cfg.s3_session_token) : NULL;
	if (key_id == NULL || secret == NULL || (cfg.s3_session_token && token == NULL))
	{
		free(key_id);
		io_wipe_free(secret);
		io_wipe_free(token);
		io_table_credentials_free(&c);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	free(st->access_key_id);
	io_wipe_free(st->secret_access_key);
	io_wipe_free(st->session_token);
	st->access_key_id = key_id;
	st->secret_access_key = secret;
	st->session_token = token;
	st->expire_ms = cfg.s3_credentials_expire_ms;
	st->received_ms = io_wall_ms();
	st->refreshes++;
	io_table_credentials_free(&c);
	return 0;
}

/* See io_int.h. */
void
io_storage_refresh_if_due(IoStorage *st)
{
	int64_t		now,
				margin;
	IoError		err;

	if (st->refresh == NULL || st->expire_ms <= 0)
		return;
	now = io_wall_ms();
	margin = (st->expire_ms - st->received_ms) / 4;
	if (margin > REFRESH_MARGIN_MAX_MS)
		margin = REFRESH_MARGIN_MAX_MS;
	if (margin < 0)
		margin = 0;
	if (now >= st->expire_ms - margin)
		(void) io_storage_refresh(st, &err);
}

/* See io_int.h. */
bool
io_s3_credentials_refused(long status, const char *s3code)
{
	return status == 403 ||
		(s3code != NULL && (strcmp(s3code, "ExpiredToken") == 0 ||
							strcmp(s3code, "InvalidToken") == 0 ||
							strcmp(s3code, "TokenRefreshRequired") == 0));
}

/* ----------------------------------------------------------------
 * Local files, confined
 *
 * A local path is served only when its canonical form lies strictly below
 * one of the configured roots (io_location_under); otherwise, and when no
 * root is configured, the answer is IO_ERR_FORBIDDEN with one message
 * that is the same whether the file exists or not.  The root is resolved
 * once per access with realpath() (an administrator may configure a root
 * through a symlink); below it, the path is walked component by component
 * with openat(O_NOFOLLOW | O_DIRECTORY), the final component opened with
 * O_NOFOLLOW or removed with unlinkat() on its parent, so a symbolic link
 * at any depth below the root is never followed.  Listing neither reports
 * nor enters symbolic links.
 * ----------------------------------------------------------------
 */

/* Deepest directory tree a local listing descends into. */
#define LOCAL_LIST_MAX_DEPTH 64

static int
file_error(IoError *err, const char *op, const char *path, int e)
{
	return io_set_error(err, e == ENOENT || e == ENOTDIR ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE,
						0, "could not %s file \"%.300s\": %s", op, path, strerror(e));
}

/* The one answer for a path outside every allowed root. */
static int
outside_error(IoError *err, const char *uri)
{
	return io_set_error(err, IO_ERR_FORBIDDEN, 0,
						"path \"%.300s\" is outside the allowed locations", uri);
}

/* A symbolic link met below a root. */
static int
symlink_error(IoError *err, const char *uri)
{
	return io_set_error(err, IO_ERR_FORBIDDEN, 0,
						"path \"%.300s\" leads through a symbolic link, which is never followed",
						uri);
}

/* Is name in directory dfd a symbolic link (without following it)? */
static bool
is_symlink_at(int dfd, const char *name)
{
	struct stat sb;

	return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode);
}

/* Where a confined walk ended: an open directory and what is left in it. */
typedef struct LocalWalk
{
	int			dirfd;			/* -1 until opened */
	char	   *copy;			/* malloc'd relative path, split in place */
	const char *last;			/* final component, NULL for a whole walk */
} LocalWalk;

static void
local_walk_end(LocalWalk *w)
{
	if (w->dirfd >= 0)
		close(w->dirfd);
	free(w->copy);
	w->dirfd = -1;
	w->copy = NULL;
	w->last = NULL;
}

/*
 * Open the directory holding path's final component (whole: the directory
 * path itself), walking from the allowed root that contains path without
 * following any symbolic link.  create makes missing directories.  uri is
 * the caller's spelling, for messages.  Returns 0 with *w to end with
 * local_walk_end, or -1 with *err (FORBIDDEN outside the roots or through
 * a symbolic link, NOT_FOUND for a missing directory).
 */
static int
local_walk(IoStorage *st, const char *uri, const char *path, bool create,
		   bool whole, LocalWalk *w, IoError *err)
{
	const char *root = NULL;
	size_t		rlen = 0,
				i;
	char	   *resolved;
	char	   *comp;
	char	   *slash;

	w->dirfd = -1;
	w->copy = NULL;
	w->last = NULL;
	/* the longest root containing the path: the administrator's choice */
	for (i = 0; i < st->nlocal_roots; i++)
	{
		size_t		n = strlen(st->local_roots[i]);

		while (n > 1 && st->local_roots[i][n - 1] == '/')
			n--;
		if (io_location_under(path, st->local_roots[i]) && n >= rlen)
		{
			root = st->local_roots[i];
			rlen = n;
		}
	}
	if (root == NULL)
		return outside_error(err, uri);
	comp = (char *) path + (rlen == 1 ? 1 : rlen + 1);	/* "/" root: rlen 1 */
	w->copy = io_strdup(comp);
	if (w->copy == NULL)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	resolved = realpath(root, NULL);
	if (resolved == NULL)
	{
		int			e = errno;

		local_walk_end(w);
		if (e == ENOMEM)
			return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return io_set_error(err, e == ENOENT ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE, 0,
							"could not open allowed location \"%.300s\": %s",
							root, strerror(e));
	}
	w->dirfd = open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(resolved);
	if (w->dirfd < 0)
	{
		int			e = errno;

		local_walk_end(w);
		return io_set_error(err, e == ENOENT ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE, 0,
							"could not open allowed location \"%.300s\": %s",
							root, strerror(e));
	}
	comp = w->copy;
	for (;;)
	{
		int			fd;

		slash = strchr(comp, '/');
		if (slash != NULL)
			*slash = '\0';
		if (slash == NULL && !whole)
		{
			if (comp[0] == '\0')
			{
				local_walk_end(w);
				return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
									"path \"%.300s\" names a directory, not a file", uri);
			}
			w->last = comp;
			return 0;
		}
		if (comp[0] == '\0')	/* a trailing slash of a whole walk */
			return 0;
		fd = openat(w->dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create)
		{
			if (mkdirat(w->dirfd, comp, 0777) != 0 && errno != EEXIST)
			{
				int			e = errno;

				local_walk_end(w);
				return file_error(err, "create directory for", uri, e);
			}
			fd = openat(w->dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0)
		{
			int			e = errno;
			bool		link = (e == ELOOP || e == ENOTDIR) && is_symlink_at(w->dirfd, comp);

			local_walk_end(w);
			if (link)
				return symlink_error(err, uri);
			return file_error(err, "open", uri, e);
		}
		close(w->dirfd);
		w->dirfd = fd;
		if (slash == NULL)
			return 0;
		comp = slash + 1;
	}
}

/* Open the final component of a walk for reading, never through a link. */
static int
local_open_file(const LocalWalk *w, const char *uri, struct stat *sb, IoError *err)
{
	int			fd = openat(w->dirfd, w->last,
							O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
	{
		int			e = errno;

		if (e == ELOOP)
			return symlink_error(err, uri);
		return file_error(err, "open", uri, e);
	}
	if (fstat(fd, sb) != 0)
	{
		int			e = errno;

		close(fd);
		return file_error(err, "stat", uri, e);
	}
	if (!S_ISREG(sb->st_mode))
	{
		close(fd);
		return io_set_error(err, IO_ERR_STORAGE, 0,
							"\"%.300s\" is not a regular file", uri);
	}
	return fd;
}

static int
file_read(IoStorage *st, const char *uri, const char *path, uint64_t offset,
		  uint64_t len, IoBuffer *out, size_t cap, IoError *err)
{
	LocalWalk	w;
	struct stat stbuf;
	uint64_t	want;
	size_t		got = 0;
	int			fd;

	if (local_walk(st, uri, path, false, false, &w, err) != 0)
		return -1;
	fd = local_open_file(&w, uri, &stbuf, err);
	local_walk_end(&w);
	if (fd < 0)
		return -1;
	want = (offset >= (uint64_t) stbuf.st_size) ? 0 : (uint64_t) stbuf.st_size - offset;
	if (len > 0 && len < want)
		want = len;
	if (want > cap)
	{
		close(fd);
		return io_set_error(err, IO_ERR_TOO_LARGE, 0,
							"read of %llu bytes from \"%.300s\" exceeds the limit of %zu bytes",
							(unsigned long long) want, uri, cap);
	}
	out->data = malloc((size_t) want + 1);
	if (out->data == NULL)
	{
		close(fd);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	while (got < want)
	{
		ssize_t		r = pread(fd, out->data + got, (size_t) want - got, (off_t) (offset + got));

		if (r < 0)
		{
			int			e = errno;

			if (e == EINTR)
				continue;
			close(fd);
			io_buffer_free(out);
			return file_error(err, "read", uri, e);
		}
		if (r == 0)
			break;
		got += (size_t) r;
	}
	close(fd);
	out->data[got] = '\0';
	out->len = got;
	return 0;
}

static int
file_size(IoStorage *st, const char *uri, const char *path, uint64_t *size,
		  IoError *err)
{
	LocalWalk	w;
	struct stat stbuf;
	int			rc = 0;

	if (local_walk(st, uri, path, false, false, &w, err) != 0)
		return -1;
	if (fstatat(w.dirfd, w.last, &stbuf, AT_SYMLINK_NOFOLLOW) != 0)
		rc = file_error(err, "stat", uri, errno);
	else if (S_ISLNK(stbuf.st_mode))
		rc = symlink_error(err, uri);
	else if (!S_ISREG(stbuf.st_mode))
		rc = io_set_error(err, IO_ERR_STORAGE, 0, "\"%.300s\" is not a regular file", uri);
	else
		*size = (uint64_t) stbuf.st_size;
	local_walk_end(&w);
	return rc;
}

/*
 * Write atomically: a temporary file in the same directory, then renameat
 * over the final name (which replaces a symbolic link there, never its
 * target).  Missing directories below the root are created.
 */
static int
file_write(IoStorage *st, const char *uri, const char *path, const void *data,
		   size_t len, IoError *err)
{
	LocalWalk	w;
	IoStrBuf	tmp;
	int			fd;
	size_t		done = 0;

	if (local_walk(st, uri, path, true, false, &w, err) != 0)
		return -1;
	io_sb_init(&tmp);
	io_sb_printf(&tmp, "%s.tms-tmp-%ld", w.last, (long) getpid());
	if (tmp.oom)
	{
		io_sb_free(&tmp);
		local_walk_end(&w);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	fd = openat(w.dirfd, tmp.data,
				O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0)
	{
		int			e = errno;

		file_error(err, "create", uri, e);
		goto fail;
	}
	while (done < len)
	{
		ssize_t		wr = write(fd, (const char *) data + done, len - done);

		if (wr < 0)
		{
			int			e = errno;

			if (e == EINTR)
				continue;
			close(fd);
			unlinkat(w.dirfd, tmp.data, 0);
			file_error(err, "write", uri, e);
			goto fail;
		}
		done += (size_t) wr;
	}
	if (fsync(fd) != 0 || close(fd) != 0)
	{
		int			e = errno;

		unlinkat(w.dirfd, tmp.data, 0);
		file_error(err, "write", uri, e);
		goto fail;
	}
	if (renameat(w.dirfd, tmp.data, w.dirfd, w.last) != 0)
	{
		int			e = errno;

		unlinkat(w.dirfd, tmp.data, 0);
		file_error(err, "rename", uri, e);
		goto fail;
	}
	io_sb_free(&tmp);
	local_walk_end(&w);
	return 0;

fail:
	io_sb_free(&tmp);
	local_walk_end(&w);
	return -1;
}

/*
 * The directory of the previous local delete of one io_storage_delete
 * call, kept open: the files of a table lie in few directories, and a
 * purge deletes them a batch at a time, so most deletes skip the walk
 * (about a dozen system calls) and only unlinkat in a directory a walk
 * has already reached without following any link.  Kept for one call
 * only, so a directory swapped for a link between two batches is met by
 * the next walk.
 */
typedef struct LocalDirCache
{
	char	   *dir;			/* the parent's path, as the walk's input */
	int			fd;				/* -1: none */
} LocalDirCache;

static void
local_dir_cache_end(LocalDirCache *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->dir);
	c->fd = -1;
	c->dir = NULL;
}

/* Report errno e of a local delete in *r. */
static void
delete_errno(IoDeleteResult *r, int e)
{
	snprintf(r->code, sizeof(r->code), "errno %d", e);
	snprintf(r->message, sizeof(r->message), "%s", strerror(e));
}

/*
 * Delete one local file: unlinkat on its parent directory, so a symbolic
 * link as the final component is removed itself, never its target.  A
 * missing file is deleted.  Fills *r; the parent stays open in *cache.
 */
static void
file_delete(IoStorage *st, const char *uri, const char *path,
			LocalDirCache *cache, IoDeleteResult *r)
{
	LocalWalk	w;
	IoError		err;
	const char *slash = strrchr(path, '/');
	const char *name = slash != NULL ? slash + 1 : path;

	/* the same directory as the previous file: a plain name in it */
	if (cache->fd >= 0 && slash != NULL &&
		strlen(cache->dir) == (size_t) (slash - path) &&
		strncmp(cache->dir, path, slash - path) == 0 &&
		name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
	{
		if (unlinkat(cache->fd, name, 0) == 0 || errno == ENOENT)
			r->deleted = true;
		else
			delete_errno(r, errno);
		return;
	}

	if (local_walk(st, uri, path, false, false, &w, &err) != 0)
	{
		if (err.code == IO_ERR_NOT_FOUND)
			r->deleted = true;	/* a missing directory: the file is gone */
		else
		{
			snprintf(r->code, sizeof(r->code), "%s",
					 err.code == IO_ERR_FORBIDDEN ? "AccessDenied" : "InvalidLocation");
			snprintf(r->message, sizeof(r->message), "%.255s", err.message);
		}
		return;
	}
	if (unlinkat(w.dirfd, w.last, 0) == 0 || errno == ENOENT)
		r->deleted = true;
	else
		delete_errno(r, errno);

	/* keep the parent for the next file; no cache if out of memory */
	local_dir_cache_end(cache);
	if (slash != NULL &&
		(cache->dir = malloc(slash - path + 1)) != NULL)
	{
		memcpy(cache->dir, path, slash - path);
		cache->dir[slash - path] = '\0';
		cache->fd = w.dirfd;
		w.dirfd = -1;
	}
	local_walk_end(&w);
}

/*
 * Recursive listing of the directory dfd (taken over and closed); rel is
 * the path below the listed prefix ("" at the top), reported as
 * uri_prefix + rel + "/" + name.  Symbolic links are skipped.
 */
static int
file_list_fd(int dfd, IoStrBuf *rel, const char *uri_prefix, IoListFn fn,
			 void *arg, const IoHttpOptions *http, int depth, int *stopped,
			 IoError *err)
{
	DIR		   *d = fdopendir(dfd);
	struct dirent *de;
	size_t		base = rel->len;
	int			rc = 0;

	if (d == NULL)
	{
		int			e = errno;

		close(dfd);
		return file_error(err, "open directory", uri_prefix, e);
	}
	if (depth > LOCAL_LIST_MAX_DEPTH)
	{
		closedir(d);
		return io_set_error(err, IO_ERR_STORAGE, 0,
							"directory tree below \"%.300s\" is deeper than %d levels",
							uri_prefix, LOCAL_LIST_MAX_DEPTH);
	}
	while (rc == 0 && !*stopped && (de = readdir(d)) != NULL)
	{
		struct stat stbuf;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (http->interrupted && http->interrupted(http->interrupt_arg))
		{
			rc = io_set_error(err, IO_ERR_INTERRUPTED, 0, "listing interrupted");
			break;
		}
		rel->len = base;
		if (rel->data)
			rel->data[base] = '\0';
		io_sb_putc(rel, '/');
		io_sb_puts(rel, de->d_name);
		if (rel->oom)
		{
			rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &stbuf, AT_SYMLINK_NOFOLLOW) != 0)
		{
			if (errno == ENOENT)
				continue;		/* removed meanwhile */
			rc = file_error(err, "stat", rel->data, errno);
			break;
		}
		if (S_ISDIR(stbuf.st_mode))
		{
			int			cfd = openat(dirfd(d), de->d_name,
									 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (cfd < 0)
			{
				if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
					continue;	/* removed or replaced meanwhile */
				rc = file_error(err, "open directory", rel->data, errno);
				break;
			}
			rc = file_list_fd(cfd, rel, uri_prefix, fn, arg, http, depth + 1,
							  stopped, err);
		}
		else if (S_ISREG(stbuf.st_mode))
		{
			IoStrBuf	uri;
			IoObjectInfo info;

			io_sb_init(&uri);
			io_sb_puts(&uri, uri_prefix);
			io_sb_puts(&uri, rel->data);
			if (uri.oom)
			{
				rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
				break;
			}
			info.uri = uri.data;
			info.size = (uint64_t) stbuf.st_size;
			info.mtime = (int64_t) stbuf.st_mtime;
			if (fn(arg, &info) != 0)
				*stopped = 1;
			io_sb_free(&uri);
		}
	}
	closedir(d);
	rel->len = base;
	if (rel->data)
		rel->data[base] = '\0';
	return rc;
}

/*
 * List every regular file below the directory path; a missing directory
 * lists nothing.  Children are reported as the caller's prefix (trailing
 * slashes removed) + "/" + their path below it.
 */
static int
file_list(IoStorage *st, const char *prefix, const char *path, IoListFn fn,
		  void *arg, IoError *err)
{
	LocalWalk	w;
	IoHttpOptions opt;
	IoStrBuf	rel;
	char	   *up;
	size_t		ulen = strlen(prefix);
	int			stopped = 0;
	int			rc;

	if (local_walk(st, prefix, path, false, true, &w, err) != 0)
	{
		if (err->code != IO_ERR_NOT_FOUND)
			return -1;
		io_error_clear(err);	/* nothing under a missing prefix */
		return 0;
	}
	while (ulen > 1 && prefix[ulen - 1] == '/')
		ulen--;
	up = io_strndup(prefix, ulen);
	if (up == NULL)
	{
		local_walk_end(&w);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	io_http_options_resolve(&st->http, &opt);
	io_sb_init(&rel);
	rc = file_list_fd(w.dirfd, &rel, up, fn, arg, &opt, 0, &stopped, err);
	w.dirfd = -1;				/* taken over by file_list_fd */
	local_walk_end(&w);
	io_sb_free(&rel);
	free(up);
	return rc;
}

/* ----------------------------------------------------------------
 * S3
 * ----------------------------------------------------------------
 */

/* Split "scheme://host[:port][/base]" of the endpoint. */
static void
split_endpoint(const char *endpoint, const char **scheme_end,
			   const char **host, size_t *host_len, const char **base)
{
	const char *h = strstr(endpoint, "://") + 3;
	const char *slash = strchr(h, '/');

	*scheme_end = h;
	*host = h;
	*host_len = slash ? (size_t) (slash - h) : strlen(h);
	*base = slash ? slash : "";
}

/*
 * Build the URL, Host header value and wire path of a request for
 * bucket/key.  All outputs malloc'd.
 */
static int
s3_target(IoStorage *st, const char *bucket, const char *key,
		  char **url, char **host, char **wire_path, IoError *err)
{
	IoStrBuf	u,
				h,
				p;
	char	   *ekey = io_uri_encode(key ? key : "", key ? strlen(key) : 0, true);
	bool		path_style;

	if (ekey == NULL)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	path_style = st->path_style == 1 ||
		(st->path_style < 0 && (st->endpoint != NULL || strchr(bucket, '.') != NULL));
	io_sb_init(&u);
	io_sb_init(&h);
	io_sb_init(&p);
	if (st->endpoint != NULL)
	{
		const char *scheme_end,
				   *hp,
				   *base;
		size_t		hlen;

		split_endpoint(st->endpoint, &scheme_end, &hp, &hlen, &base);
		if (path_style)
			io_sb_append(&h, hp, hlen);
		else
			io_sb_printf(&h, "%s.%.*s", bucket, (int) hlen, hp);
		io_sb_puts(&p, base);
		if (path_style)
			io_sb_printf(&p, "/%s", bucket);
		if (!path_style || ekey[0] != '\0')
			io_sb_printf(&p, "/%s", ekey);
		io_sb_append(&u, st->endpoint, (size_t) (scheme_end - st->endpoint));
	}
	else
	{
		if (path_style)
			io_sb_printf(&h, "s3.%s.amazonaws.com", st->region);
		else
			io_sb_printf(&h, "%s.s3.%s.amazonaws.com", bucket, st->region);
		if (path_style)
			io_sb_printf(&p, "/%s", bucket);
		if (!path_style || ekey[0] != '\0')
			io_sb_printf(&p, "/%s", ekey);
		io_sb_puts(&u, "https://");
	}
	free(ekey);
	io_sb_puts(&u, h.data ? h.data : "");
	io_sb_puts(&u, p.data ? p.data : "/");
	if (u.oom || h.oom || p.oom)
	{
		io_sb_free(&u);
		io_sb_free(&h);
		io_sb_free(&p);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	*url = io_sb_steal(&u);
	*host = io_sb_steal(&h);
	*wire_path = io_sb_steal(&p);
	return 0;
}

/* See io_int.h: wipe and free what io_s3_request_build made. */
void
io_s3_request_free(IoS3Request *r)
{
	for (size_t i = 0; i < r->nlines; i++)
	{
		/* lines carry the signature and maybe the token: wipe them */
		if (r->lines[i])
			memset(r->lines[i], 0, strlen(r->lines[i]));
		free(r->lines[i]);
	}
	free(r->url);
	memset(r, 0, sizeof(*r));
}

/*
 * See io_int.h: build one signed S3 request.  query is the raw (already
 * encoded) query or NULL; extra headers are signed too.
 */
int
io_s3_request_build(IoStorage *st, const char *method, const char *bucket,
					const char *key, const char *query, const IoHeader *extra,
					size_t nextra, const void *body, size_t body_len,
					IoS3Request *r, IoError *err)
{
	char	   *url = NULL,
			   *host = NULL,
			   *wire = NULL;
	char		payload_hash[65];
	char		amz_date[17];
	IoHeader	hdrs[8];
	size_t		nh = 0,
				i;
	IoSigV4Input in;
	IoSigV4Output out;
	IoStrBuf	full_url;
	int			rc = -1;

	memset(&out, 0, sizeof(out));
	memset(r, 0, sizeof(*r));
	if (s3_target(st, bucket, key, &url, &host, &wire, err) != 0)
		return -1;
	io_sha256_hex(body ? body : "", body ? body_len : 0, payload_hash);
	io_amz_date(time(NULL), amz_date);

	hdrs[nh].name = "host";
	hdrs[nh++].value = host;
	for (i = 0; i < nextra && nh < 8; i++)
		hdrs[nh++] = extra[i];

	io_sb_init(&full_url);
	io_sb_puts(&full_url, url);
	if (query != NULL && query[0] != '\0')
		io_sb_printf(&full_url, "?%s", query);

	if (st->access_key_id != NULL && st->secret_access_key != NULL)
	{
		memset(&in, 0, sizeof(in));
		in.method = method;
		in.path = wire;
		in.query = query;
		in.headers = hdrs;
		in.nheaders = nh;
		in.payload_hash = payload_hash;
		in.access_key_id = st->access_key_id;
		in.secret_access_key = st->secret_access_key;
		in.session_token = st->session_token;
		in.region = st->region;
		in.service = "s3";
		in.amz_date = amz_date;
		in.normalize_path = false;
		in.double_encode_path = false;
		in.sign_session_token = true;
		in.add_content_sha256 = true;
		if (io_sigv4_sign(&in, &out, err) != 0)
			goto done;
	}

	/* header lines for libcurl */
	for (i = 0; i < nh; i++)
	{
		IoStrBuf	l;

		io_sb_init(&l);
		io_sb_printf(&l, "%s: %s", i == 0 ? "Host" : hdrs[i].name, hdrs[i].value);
		r->lines[r->nlines++] = io_sb_steal(&l);
	}
	if (out.nadd_headers > 0)
	{
		for (i = 0; i < out.nadd_headers && r->nlines < IO_S3_MAX_LINES; i++)
		{
			IoStrBuf	l;

			io_sb_init(&l);
			io_sb_printf(&l, "%s: %s", out.add_headers[i].key, out.add_headers[i].value);
			r->lines[r->nlines++] = io_sb_steal(&l);
		}
	}
	else
	{
		IoStrBuf	l;

		io_sb_init(&l);
		io_sb_printf(&l, "x-amz-content-sha256: %s", payload_hash);
		r->lines[r->nlines++] = io_sb_steal(&l);
	}
	for (i = 0; i < r->nlines; i++)
		if (r->lines[i] == NULL)
		{
			io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			goto done;
		}
	if (full_url.oom)
	{
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		goto done;
	}
	r->url = io_sb_steal(&full_url);
	r->req.method = method;
	r->req.url = r->url;
	r->req.headers = (const char *const *) r->lines;
	r->req.nheaders = r->nlines;
	r->req.body = body;
	r->req.body_len = body_len;
	r->req.idempotent = true;	/* every S3 call we make is idempotent */
	r->req.what = "S3";
	rc = 0;

done:
	if (rc != 0)
		io_s3_request_free(r);
	io_sigv4_free(&out);
	io_sb_free(&full_url);
	free(url);
	free(host);
	free(wire);
	return rc;
}

/*
 * Send one signed S3 request (io_s3_request_build, then the HTTP core with
 * its retries).  Returns 0 with a response of any status, -1 with *err.
 */
static int
s3_request(IoStorage *st, const char *method, const char *bucket,
		   const char *key, const char *query, const IoHeader *extra,
		   size_t nextra, const void *body, size_t body_len,
		   IoHttpResponse *resp, IoError *err)
{
	IoS3Request r;
	int			rc;

	memset(resp, 0, sizeof(*resp));
	io_storage_refresh_if_due(st);
	for (int attempt = 0;; attempt++)
	{
		char		code[64];
		IoError		scratch;

		if (io_s3_request_build(st, method, bucket, key, query, extra, nextra, body,
								body_len, &r, err) != 0)
			return -1;
		rc = io_http_perform(&st->http, &r.req, resp, err);
		io_s3_request_free(&r);
		if (rc != 0 || attempt > 0 || st->refresh == NULL ||
			(resp->status != 400 && resp->status != 403))
			break;
		(void) io_s3_status_error(resp, "access", bucket, key, code, sizeof(code), &scratch);
		if (!io_s3_credentials_refused(resp->status, code))
			break;
		/* refused for its credentials: new ones, and once more */
		if (io_storage_refresh(st, &scratch) != 0)
			break;
		io_http_response_free(resp);
	}
	return rc;
}

/*
 * See io_int.h: turn a non-2xx S3 response into *err; the S3 error
 * document's Code and Message go to the detail, its Code also to
 * s3code_out when given.
 */
int
io_s3_status_error(const IoHttpResponse *resp, const char *what,
				   const char *bucket, const char *key, char *s3code_out,
				   size_t s3code_size, IoError *err)
{
	IoErrorCode code;
	IoXmlNode  *doc = NULL;
	IoError		xerr;
	const char *s3code = NULL;
	const char *s3msg = NULL;

	switch (resp->status)
	{
		case 400:
			code = IO_ERR_BAD_REQUEST;
			break;
		case 401:
			code = IO_ERR_UNAUTHORIZED;
			break;
		case 403:
			code = IO_ERR_FORBIDDEN;
			break;
		case 404:
			code = IO_ERR_NOT_FOUND;
			break;
		case 429:
		case 503:
			code = IO_ERR_UNAVAILABLE;
			break;
		default:
			code = resp->status >= 500 ? IO_ERR_SERVER : IO_ERR_STORAGE;
			break;
	}
	io_set_error(err, code, resp->status, "could not %s \"s3://%s/%s\": HTTP status %ld",
				 what, bucket, key ? key : "", resp->status);
	if (resp->body_len > 0)
		doc = io_xml_parse(resp->body, resp->body_len, &xerr);
	if (doc != NULL)
	{
		s3code = io_xml_child_text(doc, "Code");
		s3msg = io_xml_child_text(doc, "Message");
	}
	if (s3code != NULL || s3msg != NULL)
	{
		char		d[sizeof(err->detail)];

		snprintf(d, sizeof(d), "%s%s%s", s3code ? s3code : "",
				 (s3code && s3msg) ? ": " : "", s3msg ? s3msg : "");
		io_set_detail(err, d, strlen(d));
	}
	if (s3code_out != NULL && s3code_size > 0)
		snprintf(s3code_out, s3code_size, "%s", s3code ? s3code : "");
	io_xml_free(doc);
	return -1;
}

static int
s3_read(IoStorage *st, const IoParsedUri *u, uint64_t offset, uint64_t len,
		IoBuffer *out, IoError *err)
{
	IoHttpResponse resp;
	char		range[80];
	IoHeader	h;
	size_t		nh = 0;

	if (offset > 0 || len > 0)
	{
		if (len > 0)
			snprintf(range, sizeof(range), "bytes=%llu-%llu",
					 (unsigned long long) offset,
					 (unsigned long long) (offset + len - 1));
		else
			snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long) offset);
		h.name = "range";
		h.value = range;
		nh = 1;
	}
	if (s3_request(st, "GET", u->bucket, u->path, NULL, &h, nh, NULL, 0, &resp, err) != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status == 416)
	{
		/* offset at or past the end: an empty read */
		io_http_response_free(&resp);
		out->data = io_strdup("");
		out->len = 0;
		return out->data ? 0 : io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	if (resp.status != 200 && resp.status != 206)
	{
		io_s3_status_error(&resp, "read", u->bucket, u->path, NULL, 0, err);
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status == 200 && nh > 0)
	{
		/* server ignored the range: cut it out ourselves */
		size_t		from = offset < resp.body_len ? (size_t) offset : resp.body_len;
		size_t		n = resp.body_len - from;

		if (len > 0 && len < n)
			n = (size_t) len;
		memmove(resp.body, resp.body + from, n);
		resp.body[n] = '\0';
		resp.body_len = n;
	}
	out->data = resp.body;
	out->len = resp.body_len;
	resp.body = NULL;
	io_http_response_free(&resp);
	return 0;
}

/* Parse S3 time "2024-01-02T03:04:05.000Z" to epoch seconds (0 if bad). */
static int64_t
parse_s3_time(const char *s)
{
	struct tm	tm;

	if (s == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t) timegm(&tm);
}

static int
s3_list(IoStorage *st, const IoParsedUri *u, const char *prefix_uri,
		IoListFn fn, void *arg, IoError *err)
{
	char	   *token = NULL;
	size_t		scheme_len = uri_scheme_len(prefix_uri);
	int			rc = 0;
	bool		stop = false;

	do
	{
		IoStrBuf	q;
		IoHttpResponse resp;
		IoXmlNode  *doc;
		const IoXmlNode *c;
		const char *truncated;
		const char *next;
		char	   *ep = io_uri_encode(u->path, strlen(u->path), false);

		io_sb_init(&q);
		io_sb_printf(&q, "list-type=2&max-keys=%d&prefix=%s", st->list_page_size,
					 ep ? ep : "");
		free(ep);
		if (token != NULL)
		{
			char	   *et = io_uri_encode(token, strlen(token), false);

			io_sb_printf(&q, "&continuation-token=%s", et ? et : "");
			if (et == NULL)
				q.oom = true;
			free(et);
		}
		if (q.oom || ep == NULL)
		{
			io_sb_free(&q);
			rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			break;
		}
		rc = s3_request(st, "GET", u->bucket, "", q.data, NULL, 0, NULL, 0, &resp, err);
		io_sb_free(&q);
		if (rc != 0)
		{
			io_http_response_free(&resp);
			break;
		}
		if (resp.status != 200)
		{
			rc = io_s3_status_error(&resp, "list", u->bucket, u->path, NULL, 0, err);
			io_http_response_free(&resp);
			break;
		}
		doc = io_xml_parse(resp.body, resp.body_len, err);
		io_http_response_free(&resp);
		if (doc == NULL)
		{
			rc = -1;
			break;
		}
		if (strcmp(doc->name, "ListBucketResult") != 0)
		{
			rc = io_set_error(err, IO_ERR_PROTOCOL, 200,
							  "unexpected S3 listing response: root element \"%s\"",
							  doc->name);
			io_xml_free(doc);
			break;
		}
		for (c = doc->children; c != NULL && !stop; c = c->next)
		{
			IoStrBuf	uri;
			IoObjectInfo info;
			const char *key;
			const char *size;

			if (strcmp(c->name, "Contents") != 0)
				continue;
			key = io_xml_child_text(c, "Key");
			size = io_xml_child_text(c, "Size");
			if (key == NULL)
			{
				rc = io_set_error(err, IO_ERR_PROTOCOL, 200,
								  "malformed S3 listing: an entry has no Key");
				break;
			}
			io_sb_init(&uri);
			io_sb_append(&uri, prefix_uri, scheme_len);
			io_sb_printf(&uri, "%s/%s", u->bucket, key);
			if (uri.oom)
			{
				rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
				break;
			}
			info.uri = uri.data;
			info.size = size ? strtoull(size, NULL, 10) : 0;
			info.mtime = parse_s3_time(io_xml_child_text(c, "LastModified"));
			if (fn(arg, &info) != 0)
				stop = true;
			io_sb_free(&uri);
		}
		truncated = io_xml_child_text(doc, "IsTruncated");
		next = io_xml_child_text(doc, "NextContinuationToken");
		free(token);
		token = NULL;
		if (rc == 0 && !stop && truncated != NULL && strcmp(truncated, "true") == 0)
		{
			if (next == NULL || next[0] == '\0')
				rc = io_set_error(err, IO_ERR_PROTOCOL, 200,
								  "malformed S3 listing: truncated without a continuation token");
			else
			{
				token = io_strdup(next);
				if (token == NULL)
					rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			}
		}
		io_xml_free(doc);
		if (st->http.interrupted && token != NULL &&
			st->http.interrupted(st->http.interrupt_arg))
			rc = io_set_error(err, IO_ERR_INTERRUPTED, 0, "listing interrupted");
	} while (rc == 0 && token != NULL);
	free(token);
	return rc;
}

/* Escape text for an XML element body. */
static void
xml_escape(IoStrBuf *sb, const char *s)
{
	for (; *s; s++)
	{
		switch (*s)
		{
			case '<':
				io_sb_puts(sb, "&lt;");
				break;
			case '>':
				io_sb_puts(sb, "&gt;");
				break;
			case '&':
				io_sb_puts(sb, "&amp;");
				break;
			case '"':
				io_sb_puts(sb, "&quot;");
				break;
			case '\'':
				io_sb_puts(sb, "&apos;");
				break;
			default:
				if ((unsigned char) *s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r')
					io_sb_printf(sb, "&#%d;", (unsigned char) *s);
				else
					io_sb_putc(sb, *s);
		}
	}
}

/* See io_int.h: the DeleteObjects body of keys[0..n) and its Content-MD5. */
int
io_s3_delete_body(const char *const *keys, size_t n, IoStrBuf *body,
				  char md5b64[32], IoError *err)
{
	unsigned char md5[16];
	size_t		i;

	io_sb_init(body);
	io_sb_puts(body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			   "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>false</Quiet>");
	for (i = 0; i < n; i++)
	{
		io_sb_puts(body, "<Object><Key>");
		xml_escape(body, keys[i]);
		io_sb_puts(body, "</Key></Object>");
	}
	io_sb_puts(body, "</Delete>");
	if (body->oom)
	{
		io_sb_free(body);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	if (EVP_Digest(body->data, body->len, md5, NULL, EVP_md5(), NULL) != 1)
	{
		io_sb_free(body);
		return io_set_error(err, IO_ERR_INTERNAL, 0, "could not compute MD5");
	}
	EVP_EncodeBlock((unsigned char *) md5b64, md5, 16);
	return 0;
}

/*
 * See io_int.h: read a 200 answer to DeleteObjects for keys[0..n) into
 * results[0..n).
 */
int
io_s3_delete_read(const IoHttpResponse *resp, const char *const *keys, size_t n,
				  IoDeleteResult *results, IoError *err)
{
	IoXmlNode  *doc;
	const IoXmlNode *c;
	size_t		i;
	bool	   *done;

	doc = io_xml_parse(resp->body, resp->body_len, err);
	if (doc == NULL)
		return -1;
	if (strcmp(doc->name, "DeleteResult") != 0)
	{
		io_set_error(err, IO_ERR_PROTOCOL, 200,
					 "unexpected S3 delete response: root element \"%s\"", doc->name);
		io_xml_free(doc);
		return -1;
	}
	done = calloc(n ? n : 1, sizeof(bool));
	if (done == NULL)
	{
		io_xml_free(doc);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	for (c = doc->children; c != NULL; c = c->next)
	{
		bool		is_deleted = strcmp(c->name, "Deleted") == 0;
		const char *key;

		if (!is_deleted && strcmp(c->name, "Error") != 0)
			continue;
		key = io_xml_child_text(c, "Key");
		if (key == NULL)
			continue;
		for (i = 0; i < n; i++)
		{
			IoDeleteResult *r = &results[i];

			if (done[i] || strcmp(keys[i], key) != 0)
				continue;
			done[i] = true;
			if (is_deleted)
			{
				r->deleted = true;
				r->code[0] = '\0';
				r->message[0] = '\0';
			}
			else
			{
				const char *code = io_xml_child_text(c, "Code");
				const char *msg = io_xml_child_text(c, "Message");

				/* a key that is already gone is what we wanted */
				r->deleted = code != NULL && strcmp(code, "NoSuchKey") == 0;
				snprintf(r->code, sizeof(r->code), "%s", code ? code : "Unknown");
				snprintf(r->message, sizeof(r->message), "%s", msg ? msg : "");
			}
			break;
		}
	}
	for (i = 0; i < n; i++)
		if (!done[i])
		{
			IoDeleteResult *r = &results[i];

			r->deleted = false;
			snprintf(r->code, sizeof(r->code), "NoResult");
			snprintf(r->message, sizeof(r->message),
					 "the server's delete result does not mention this key");
		}
	free(done);
	io_xml_free(doc);
	return 0;
}

/*
 * One DeleteObjects request for keys[idx[0..n)] of one bucket; fills
 * results[idx[i]].
 */
static int
s3_delete_batch(IoStorage *st, const char *bucket, IoParsedUri *parsed,
				const size_t *idx, size_t n, IoDeleteResult *results,
				IoError *err)
{
	IoStrBuf	body;
	char		md5b64[32];
	IoHeader	h[2];
	IoHttpResponse resp;
	const char **keys;
	IoDeleteResult *res;
	size_t		i;
	int			rc = 0;

	keys = calloc(n ? n : 1, sizeof(char *));
	res = calloc(n ? n : 1, sizeof(IoDeleteResult));
	if (keys == NULL || res == NULL)
	{
		free(keys);
		free(res);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	for (i = 0; i < n; i++)
		keys[i] = parsed[idx[i]].path;
	if (io_s3_delete_body(keys, n, &body, md5b64, err) != 0)
	{
		free(keys);
		free(res);
		return -1;
	}
	h[0].name = "content-md5";
	h[0].value = md5b64;
	h[1].name = "content-type";
	h[1].value = "application/xml";

	rc = s3_request(st, "POST", bucket, "", "delete=", h, 2, body.data, body.len,
					&resp, err);
	io_sb_free(&body);
	if (rc == 0 && resp.status != 200)
		rc = io_s3_status_error(&resp, "delete objects in", bucket, "", NULL, 0, err);
	else if (rc == 0)
		rc = io_s3_delete_read(&resp, keys, n, res, err);
	io_http_response_free(&resp);
	if (rc == 0)
		for (i = 0; i < n; i++)
			results[idx[i]] = res[i];
	free(keys);
	free(res);
	return rc;
}

/* ----------------------------------------------------------------
 * Entry points
 * ----------------------------------------------------------------
 */

int
io_storage_read(IoStorage *st, const char *uri, uint64_t offset,
				uint64_t len, IoBuffer *out, IoError *err)
{
	IoParsedUri u;
	IoHttpOptions opt;
	int			rc;

	out->data = NULL;
	out->len = 0;
	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	io_http_options_resolve(&st->http, &opt);
	if (u.scheme == IO_URI_FILE)
		rc = file_read(st, uri, u.path, offset, len, out, opt.max_response_bytes, err);
	else
		rc = s3_read(st, &u, offset, len, out, err);
	io_uri_free(&u);
	return rc;
}

int
io_storage_size(IoStorage *st, const char *uri, uint64_t *size, IoError *err)
{
	IoParsedUri u;
	int			rc = 0;

	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = file_size(st, uri, u.path, size, err);
	else
	{
		IoHttpResponse resp;

		rc = s3_request(st, "HEAD", u.bucket, u.path, NULL, NULL, 0, NULL, 0, &resp, err);
		if (rc == 0 && resp.status != 200)
			rc = io_s3_status_error(&resp, "stat", u.bucket, u.path, NULL, 0, err);
		else if (rc == 0)
		{
			const char *cl = io_http_header(&resp, "content-length", NULL);

			if (cl == NULL)
				rc = io_set_error(err, IO_ERR_PROTOCOL, resp.status,
								  "S3 HEAD response has no Content-Length");
			else
				*size = strtoull(cl, NULL, 10);
		}
		io_http_response_free(&resp);
	}
	io_uri_free(&u);
	return rc;
}

int
io_storage_write(IoStorage *st, const char *uri, const void *data, size_t len,
				 IoError *err)
{
	IoParsedUri u;
	int			rc;

	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = file_write(st, uri, u.path, data, len, err);
	else if (u.path[0] == '\0')
		rc = io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
						  "invalid S3 location \"%s\": missing key", uri);
	else
	{
		IoHttpResponse resp;
		IoHeader	h = {"content-type", "application/octet-stream"};

		rc = s3_request(st, "PUT", u.bucket, u.path, NULL, &h, 1, data ? data : "", len,
						&resp, err);
		if (rc == 0 && resp.status != 200 && resp.status != 201 && resp.status != 204)
			rc = io_s3_status_error(&resp, "write", u.bucket, u.path, NULL, 0, err);
		io_http_response_free(&resp);
	}
	io_uri_free(&u);
	return rc;
}

int
io_storage_list(IoStorage *st, const char *prefix, IoListFn fn, void *arg,
				IoError *err)
{
	IoParsedUri u;
	int			rc;

	if (io_uri_parse(prefix, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = file_list(st, prefix, u.path, fn, arg, err);
	else
		rc = s3_list(st, &u, prefix, fn, arg, err);
	io_uri_free(&u);
	return rc;
}

/* A local file of one io_storage_delete call: its path and its index. */
typedef struct LocalEntry
{
	const char *path;
	size_t		i;
} LocalEntry;

/* By directory, then by name: the files of one directory stand together. */
static int
local_entry_cmp(const void *a, const void *b)
{
	const char *pa = ((const LocalEntry *) a)->path;
	const char *pb = ((const LocalEntry *) b)->path;
	const char *sa = strrchr(pa, '/');
	const char *sb = strrchr(pb, '/');
	size_t		la = sa ? (size_t) (sa - pa) : 0;
	size_t		lb = sb ? (size_t) (sb - pb) : 0;
	int			c = memcmp(pa, pb, la < lb ? la : lb);

	if (c != 0)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(pa + la, pb + lb);
}

int
io_storage_delete(IoStorage *st, const char *const *uris, size_t n,
				  IoDeleteResult *results, IoError *err)
{
	IoParsedUri *parsed;
	size_t	   *idx;
	bool	   *taken;
	LocalEntry *locals;
	size_t		nlocal = 0;
	LocalDirCache dircache = {NULL, -1};
	size_t		i;
	int			rc = 0;

	if (n == 0)
		return 0;
	parsed = calloc(n, sizeof(IoParsedUri));
	idx = calloc(n, sizeof(size_t));
	taken = calloc(n, sizeof(bool));
	locals = calloc(n, sizeof(LocalEntry));
	if (parsed == NULL || idx == NULL || taken == NULL || locals == NULL)
	{
		free(parsed);
		free(idx);
		free(taken);
		free(locals);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	for (i = 0; i < n; i++)
	{
		IoError		perr;

		memset(&results[i], 0, sizeof(IoDeleteResult));
		if (io_uri_parse(uris[i], &parsed[i], &perr) != 0)
		{
			taken[i] = true;
			snprintf(results[i].code, sizeof(results[i].code), "InvalidLocation");
			snprintf(results[i].message, sizeof(results[i].message), "%.255s", perr.message);
			continue;
		}
		if (parsed[i].scheme == IO_URI_FILE)
		{
			taken[i] = true;
			locals[nlocal].path = parsed[i].path;
			locals[nlocal++].i = i;
		}
		else if (parsed[i].path[0] == '\0')
		{
			taken[i] = true;
			snprintf(results[i].code, sizeof(results[i].code), "InvalidLocation");
			snprintf(results[i].message, sizeof(results[i].message), "missing key");
		}
	}
	/* local files by directory, so that each directory is walked once */
	qsort(locals, nlocal, sizeof(LocalEntry), local_entry_cmp);
	for (i = 0; i < nlocal; i++)
		file_delete(st, uris[locals[i].i], locals[i].path, &dircache, &results[locals[i].i]);
	local_dir_cache_end(&dircache);
	/* S3: batches of up to 1000 keys of the same bucket, in input order */
	for (i = 0; i < n && rc == 0; i++)
	{
		size_t		nb = 0,
					j;

		if (taken[i])
			continue;
		for (j = i; j < n && nb < S3_DELETE_BATCH; j++)
			if (!taken[j] && strcmp(parsed[j].bucket, parsed[i].bucket) == 0)
			{
				idx[nb++] = j;
				taken[j] = true;
			}
		rc = s3_delete_batch(st, parsed[i].bucket, parsed, idx, nb, results, err);
	}
	for (i = 0; i < n; i++)
		io_uri_free(&parsed[i]);
	free(parsed);
	free(idx);
	free(taken);
	free(locals);
	return rc;
}
