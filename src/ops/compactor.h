/*-------------------------------------------------------------------------
 *
 * compactor.h
 *	  The compaction helper process as a worker sees it (compactor.c):
 *	  started for one job, spoken to through pipes in the protocol of
 *	  src/iceberg/compact/compact_wire.h, killed when the job ends, is cancelled
 *	  or loses its lease.  For maint_compact.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_COMPACTOR_H
#define TMS_OPS_COMPACTOR_H

#include "iceberg/compact/compact_wire.h"
#include "ops/maint_int.h"

/* settings */
extern int	tms_compaction_memory_limit_mb;
extern int	tms_compaction_threads;
extern char *tms_compaction_temp_directory;

/* A helper seconds silent (no line, not even progress) is killed. */
#define COMPACTOR_SILENCE_S 60

typedef struct Compactor Compactor;

/* The installed helper's path, or NULL when tms was built without DuckDB. */
extern const char *tms_compactor_path(void);

/*
 * Start the helper for run (its temporary directory created, hello sent,
 * ready awaited), asking for groups in flight at once.  NULL with
 * run->result set on failure.
 */
extern Compactor *compactor_start(MaintRun *run, const IoStorageConfig *storage, int groups);

/* The groups it takes in flight at once (what it granted, at most what was asked). */
extern int	compactor_groups(const Compactor *c);

/* Send one line; false (run->result set, the helper killed) on failure. */
extern bool compactor_send(Compactor *c, MaintRun *run, const char *line);

/*
 * The next message but progress ones (*m to free with
 * iceberg_compact_message_free).  Waits at most COMPACTOR_SILENCE_S
 * between lines, checking interrupts, the lease and a cancel request
 * (maint_keep_going) and the deadline; false with run->result set (the
 * helper killed) when the helper died, said something malformed, went
 * silent or the run must stop.
 */
extern bool compactor_next(Compactor *c, MaintRun *run, TimestampTz deadline,
						   IcebergCompactMessage *m);

/* Kill (if alive), reap, remove its temporary directory; NULL is fine. */
extern void compactor_stop(Compactor *c);

/* The helper's pid (for tests and logs), 0 when none. */
extern int	compactor_pid(const Compactor *c);

#endif							/* TMS_OPS_COMPACTOR_H */
