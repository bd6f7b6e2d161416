/*-------------------------------------------------------------------------
 *
 * purge.h
 *	  Async purge of dropped Iceberg tables (doc/purge.md): what
 *	  the SQL side (src/sql_api/purge_sql.c) calls.
 *
 * tms.purge_table() only validates and records: the job, the storage
 * credentials the catalog vended, and the task, all in the caller's
 * transaction, so a rollback leaves the table as it was and no job.  The
 * catalog drop is the job's first step, run by a worker after the commit;
 * the job row is the tombstone that keeps the name from being re-created
 * meanwhile, and it never forgets the metadata location.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_PURGE_H
#define TMS_OPS_PURGE_H

#include "postgres.h"

/* settings (purge.c) */
extern int	tms_purge_delete_batch_size;
extern int	tms_purge_max_attempts;
extern int	tms_purge_retention_s;
extern int	tms_purge_concurrency;
extern int	tms_purge_batch_pause_ms;

/*
 * Record the purge of server.ns.table for the acting role and return the
 * job id; raises (recording nothing) when the table does not exist, lies
 * outside the server's allowed_locations, could not be walked once
 * dropped (purge_check.c), or is being purged already.  delete_others:
 * also delete files that lie under the location of another table tms
 * knows on the server (kept by default).
 */
extern int64 tms_purge_enqueue(const char *server, const char *ns, const char *table,
							   bool delete_others);

#endif							/* TMS_OPS_PURGE_H */
