/*-------------------------------------------------------------------------
 *
 * purge.h
 *	  What the async purge shares between its worker side (src/ops/purge.c)
 *	  and its SQL side (src/sql_api/purge_sql.c): settings and the path
 *	  rules that decide what may ever be deleted.
 *
 * Paths are compared in a canonical form: "s3://bucket/key" for s3://,
 * s3a:// and s3n:// URIs, an absolute file system path for file:///x,
 * file:/x and /x, and relative paths ("data/x", "file://data/x",
 * "file:data/x", "./x") resolved against the server's relative_path_root.
 * A path that cannot be put in that form is never deleted.
 *
 * src/ops/purge.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_PURGE_H
#define TMS_PURGE_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* settings (purge.c) */
extern int	tms_purge_delete_batch_size;
extern int	tms_purge_max_attempts;
extern int	tms_purge_retention_s;
extern int	tms_purge_concurrency;
extern int	tms_purge_batch_pause_ms;

/*
 * Canonical form of path, malloc'd (free with free()), or NULL when it
 * cannot be resolved (a relative path without relative_root, an unknown
 * scheme, an empty bucket) or when out of memory.  Plain C: safe inside
 * the iceberg layer's callbacks.
 */
extern char *purge_canonical_malloc(const char *path, const char *relative_root);

/* The same, palloc'd. */
extern char *purge_canonical(const char *path, const char *relative_root);

/*
 * Is canonical path strictly below canonical root (at a '/' boundary)?
 * false for a path with "." or ".." segments.
 */
extern bool purge_path_under(const char *path, const char *root);

/*
 * A server's allowed_locations option (NULL: none) as canonical roots,
 * palloc'd; entries that cannot be canonicalised are left out.
 */
extern List *purge_allowed_roots(const char *allowed_locations,
								 const char *relative_root);

#endif							/* TMS_PURGE_H */
