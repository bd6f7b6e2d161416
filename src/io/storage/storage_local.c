/*-------------------------------------------------------------------------
 *
 * storage_local.c
 *		Object storage, the local backend: local files (file:// URIs and
 *		absolute paths), confined to the configured allowed roots and never
 *		through a symbolic link.
 *
 * Called only by the entry points of storage.c (storage_int.h), after the
 * location rule (location.c); the rules of confinement are stated below.
 *
 * src/io/storage/storage_local.c
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

#include "io/io_int.h"
#include "io/storage/storage_int.h"

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
file_error(TmsError *err, const char *op, const char *path, int e)
{
	return tms_error_set(err, e == ENOENT || e == ENOTDIR ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE, "could not %s file \"%.300s\": %s", op, path, strerror(e));
}

/* The one answer for a path outside every allowed root. */
static int
outside_error(TmsError *err, const char *uri)
{
	return tms_error_set(err, IO_ERR_FORBIDDEN,
						 "path \"%.300s\" is outside the allowed locations", uri);
}

/* A symbolic link met below a root. */
static int
symlink_error(TmsError *err, const char *uri)
{
	return tms_error_set(err, IO_ERR_FORBIDDEN,
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
	io_free(w->copy);
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
		   bool whole, LocalWalk *w, TmsError *err)
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
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	resolved = realpath(root, NULL);
	if (resolved == NULL)
	{
		int			e = errno;

		local_walk_end(w);
		if (e == ENOMEM)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return tms_error_set(err, e == ENOENT ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE,
							 "could not open allowed location \"%.300s\": %s",
							 root, strerror(e));
	}
	w->dirfd = open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(resolved);
	if (w->dirfd < 0)
	{
		int			e = errno;

		local_walk_end(w);
		return tms_error_set(err, e == ENOENT ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE,
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
				return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
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
local_open_file(const LocalWalk *w, const char *uri, struct stat *sb, TmsError *err)
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
		return tms_error_set(err, IO_ERR_STORAGE,
							 "\"%.300s\" is not a regular file", uri);
	}
	return fd;
}

/*
 * pread want bytes at offset into buf, stopping early only at the end of
 * the file; *got receives what was read.  Closes nothing.
 */
static int
local_pread(int fd, const char *uri, uint8_t *buf, size_t want,
			uint64_t offset, size_t *got, TmsError *err)
{
	*got = 0;
	while (*got < want)
	{
		ssize_t		r = pread(fd, buf + *got, want - *got, (off_t) (offset + *got));

		if (r < 0)
		{
			int			e = errno;

			if (e == EINTR)
				continue;
			return file_error(err, "read", uri, e);
		}
		if (r == 0)
			break;
		*got += (size_t) r;
	}
	return 0;
}

/*
 * Open a file of the root for reading: the walk to it (no link, no "..")
 * and its open, as io_local_read and io_local_read_into both do.
 */
static int
local_open_for_read(IoStorage *st, const char *uri, const char *path, struct stat *sb,
					TmsError *err)
{
	LocalWalk	w;
	int			fd;

	if (local_walk(st, uri, path, false, false, &w, err) != 0)
		return -1;
	fd = local_open_file(&w, uri, sb, err);
	local_walk_end(&w);
	return fd;
}

int
io_local_read(IoStorage *st, const char *uri, const char *path, uint64_t offset,
			  uint64_t len, IoBuffer *out, size_t cap, TmsError *err)
{
	struct stat stbuf;
	uint64_t	want;
	size_t		got = 0;
	int			fd = local_open_for_read(st, uri, path, &stbuf, err);

	if (fd < 0)
		return -1;
	want = (offset >= (uint64_t) stbuf.st_size) ? 0 : (uint64_t) stbuf.st_size - offset;
	if (len > 0 && len < want)
		want = len;
	if (want > cap)
	{
		close(fd);
		return tms_error_set(err, IO_ERR_TOO_LARGE,
							 "read of %llu bytes from \"%.300s\" exceeds the limit of %zu bytes",
							 (unsigned long long) want, uri, cap);
	}
	out->data = io_malloc((size_t) want + 1);
	if (out->data == NULL)
	{
		close(fd);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (local_pread(fd, uri, (uint8_t *) out->data, (size_t) want, offset, &got,
					err) != 0)
	{
		close(fd);
		io_buffer_free(out);
		return -1;
	}
	close(fd);
	out->data[got] = '\0';
	out->len = got;
	return 0;
}

int
io_local_read_into(IoStorage *st, const char *uri, const char *path,
				   uint64_t offset, void *buf, size_t len, size_t *got,
				   uint64_t *size, TmsError *err)
{
	struct stat stbuf;
	int			fd;
	int			rc;

	*got = 0;
	fd = local_open_for_read(st, uri, path, &stbuf, err);
	if (fd < 0)
		return -1;
	if (size != NULL)
		*size = (uint64_t) stbuf.st_size;
	rc = len == 0 ? 0 : local_pread(fd, uri, buf, len, offset, got, err);
	close(fd);
	return rc;
}

int
io_local_size(IoStorage *st, const char *uri, const char *path, uint64_t *size,
			  TmsError *err)
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
		rc = tms_error_set(err, IO_ERR_STORAGE, "\"%.300s\" is not a regular file", uri);
	else
		*size = (uint64_t) stbuf.st_size;
	local_walk_end(&w);
	return rc;
}

/* the temporary name of a write: the name, this suffix, the writer's pid */
#define LOCAL_TEMP_FORMAT "%s.tms-tmp-%ld"

char *
io_local_temp_name(const char *uri, long pid)
{
	IoStrBuf	b;

	/* local files only (file: or a plain absolute path): objects have none */
	if (strncasecmp(uri, "file:", 5) != 0 && uri[0] != '/')
		return NULL;
	io_sb_init(&b);
	io_sb_printf(&b, LOCAL_TEMP_FORMAT, uri, pid);
	if (b.oom)
	{
		io_sb_free(&b);
		return NULL;
	}
	return b.data;
}

/*
 * Write atomically: a temporary file in the same directory, then renameat
 * over the final name (which replaces a symbolic link there, never its
 * target).  Missing directories below the root are created.
 */
int
io_local_write(IoStorage *st, const char *uri, const char *path, const void *data,
			   size_t len, TmsError *err)
{
	LocalWalk	w;
	IoStrBuf	tmp;
	int			fd;
	size_t		done = 0;

	if (local_walk(st, uri, path, true, false, &w, err) != 0)
		return -1;
	io_sb_init(&tmp);
	io_sb_printf(&tmp, LOCAL_TEMP_FORMAT, w.last, (long) getpid());
	if (tmp.oom)
	{
		io_sb_free(&tmp);
		local_walk_end(&w);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
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

void
io_local_dir_cache_end(LocalDirCache *c)
{
	if (c->fd >= 0)
		close(c->fd);
	io_free(c->dir);
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
void
io_local_delete(IoStorage *st, const char *uri, const char *path,
				LocalDirCache *cache, IoDeleteResult *r)
{
	LocalWalk	w;
	TmsError	err;
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
	io_local_dir_cache_end(cache);
	if (slash != NULL &&
		(cache->dir = io_malloc(slash - path + 1)) != NULL)
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
			 TmsError *err)
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
		return tms_error_set(err, IO_ERR_STORAGE,
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
			rc = tms_error_set(err, IO_ERR_INTERRUPTED, "listing interrupted");
			break;
		}
		rel->len = base;
		if (rel->data)
			rel->data[base] = '\0';
		io_sb_putc(rel, '/');
		io_sb_puts(rel, de->d_name);
		if (rel->oom)
		{
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
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
				rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
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
int
io_local_list(IoStorage *st, const char *prefix, const char *path, IoListFn fn,
			  void *arg, TmsError *err)
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
		tms_error_clear(err);	/* nothing under a missing prefix */
		return 0;
	}
	while (ulen > 1 && prefix[ulen - 1] == '/')
		ulen--;
	up = io_strndup(prefix, ulen);
	if (up == NULL)
	{
		local_walk_end(&w);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	io_http_options_resolve(&st->http, &opt);
	io_sb_init(&rel);
	rc = file_list_fd(w.dirfd, &rel, up, fn, arg, &opt, 0, &stopped, err);
	w.dirfd = -1;				/* taken over by file_list_fd */
	local_walk_end(&w);
	io_sb_free(&rel);
	io_free(up);
	return rc;
}
