/*-------------------------------------------------------------------------
 *
 * storage_int.h
 *		Private declarations shared by the files of the object storage:
 *		the interface and dispatch (storage.c), the local backend
 *		(storage_local.c) and the S3 backend (storage_s3.c).
 *
 * Not part of the layer's interface (that is io.h); only those three files
 * include this one.
 *
 * src/io/storage/storage_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_STORAGE_INT_H
#define TMS_IO_STORAGE_INT_H

#include "io/io_int.h"

/* The storage handle (io.h's IoStorage), filled in by storage.c. */
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
	const IoAllocator *alloc;	/* current at creation: refreshed keys */
	int			list_page_size;
	char	  **local_roots;	/* canonical absolute directories */
	size_t		nlocal_roots;
	IoHttpOptions http;
};

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

/* ---- The local backend (storage_local.c) ---- */

extern int	io_local_read(IoStorage *st, const char *uri, const char *path,
						  uint64_t offset, uint64_t len, IoBuffer *out,
						  size_t cap, IoError *err);
extern int	io_local_size(IoStorage *st, const char *uri, const char *path,
						  uint64_t *size, IoError *err);
extern int	io_local_write(IoStorage *st, const char *uri, const char *path,
						   const void *data, size_t len, IoError *err);
extern void io_local_delete(IoStorage *st, const char *uri, const char *path,
							LocalDirCache *cache, IoDeleteResult *r);
extern void io_local_dir_cache_end(LocalDirCache *c);
extern int	io_local_list(IoStorage *st, const char *prefix, const char *path,
						  IoListFn fn, void *arg, IoError *err);

/* ---- The S3 backend (storage_s3.c) ---- */

extern int	io_s3_request(IoStorage *st, const char *method,
						  const char *bucket, const char *key,
						  const char *query, const IoHeader *extra,
						  size_t nextra, const void *body, size_t body_len,
						  IoHttpResponse *resp, IoError *err);
extern int	io_s3_read(IoStorage *st, const IoParsedUri *u, uint64_t offset,
					   uint64_t len, IoBuffer *out, IoError *err);
extern int	io_s3_list(IoStorage *st, const IoParsedUri *u,
					   const char *prefix_uri, IoListFn fn, void *arg,
					   IoError *err);
extern int	io_s3_delete_batch(IoStorage *st, const char *bucket,
							   IoParsedUri *parsed, const size_t *idx, size_t n,
							   IoDeleteResult *results, IoError *err);

#endif							/* TMS_IO_STORAGE_INT_H */
