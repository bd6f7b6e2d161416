/*-------------------------------------------------------------------------
 *
 * compactor_int.h
 *	  What the files of the compaction helper share: tms_compactor.c
 *	  (the process: the protocol loop, its output, the heartbeat),
 *	  rewrite_group.c (the rewrite of one group with DuckDB) and
 *	  compactor_sort.c (the ORDER BY of strategies sort and zorder).
 *
 * The helper is a separate program, never loaded into PostgreSQL: it
 * links libduckdb and tms's plain-C layers (io for storage, iceberg for
 * the protocol, the schema and Iceberg's values), nothing of the server.
 * A worker starts one per compaction job; src/iceberg/compact/compact_wire.h is
 * the protocol and doc/architecture.md the process model.
 *
 * src/compactor/compactor_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_COMPACTOR_H
#define TMS_COMPACTOR_H

#include "compactor/duckdb_capi.h"
#include "iceberg/compact/compact_wire.h"
#include "io/io.h"
#include "io/util/strbuf.h"

typedef struct Helper
{
	IoStorage  *storage;
	duckdb_database db;
	duckdb_connection con;
	char	   *temp_directory;
	int64_t		memory_limit;
	int			threads;
} Helper;

/* Send one line to the worker (thread-safe); exits if the pipe is gone. */
extern void helper_send(char *line);

/* What the heartbeat reports: bytes of the group done so far. */
extern void helper_progress(int group, int64_t done);

/*
 * Rewrite one group (rewrite_group.c): every file message is sent as its file is
 * uploaded, then the done message.  False with msg filled on failure.
 */
extern bool helper_rewrite_group(Helper *h, const IcebergCompactJob *job,
								 char *msg, size_t msglen);

/* Peak resident set size of this process, in bytes. */
extern int64_t helper_peak_rss(void);

/*
 * Strategies sort and zorder (compactor_sort.c): the z-order keys
 * ", <key> AS tms_z<j>" over the inputs' d.c<id> (nothing for sort), and
 * " ORDER BY ..." over the subquery s (false: none, the rows unordered).
 */
extern void compactor_sort_keys(IoStrBuf *q, const IcebergCompactJob *job);
extern bool compactor_order_by(IoStrBuf *q, const IcebergCompactJob *job);

#endif							/* TMS_COMPACTOR_H */
