/*-------------------------------------------------------------------------
 *
 * sched.h
 *	  The scheduler core: claim, execute, complete, fail, heartbeat and
 *	  recover rows of tms.scheduled_tasks.
 *
 * Semantics are db-scheduler's (../shared/seeds/000): a task is a row
 * keyed by (task_name, task_instance); a claim sets picked and bumps
 * version in one short transaction; every later write by the claimant is
 * conditional on that version, so a claimant whose lease was taken away
 * (dead-lease recovery, or an operator) writes nothing.  Heartbeats are
 * renewed by the supervisor, not by the process doing the work (seed 003),
 * so a long task does not need to interrupt itself to stay alive.
 *
 * Every function here runs inside a transaction with SPI connected; the
 * callers (the pool worker loop and the run_pending/run_task procedures)
 * own the transaction boundaries, and never keep a transaction open
 * between a claim and the execution.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_SCHED_H
#define TMS_SCHED_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"

/* settings (src/tms.c) */
extern int	tms_heartbeat_interval_ms;
extern int	tms_missed_heartbeats_limit;
extern int	tms_expand_concurrency;
extern int	tms_cron_concurrency;
extern int	tms_commit_concurrency;
extern int	tms_retry_delay_ms;
extern int	tms_retry_delay_max_ms;

/* A claimed task, palloc'd in the caller's context. */
typedef struct SchedTask
{
	char	   *kind;
	char	   *instance;
	char	   *data;			/* task_data as jsonb text, or NULL */
	int64		version;		/* the version this claim holds */
	TimestampTz heartbeat;		/* last_heartbeat written by the claim */
	TimestampTz execution_time; /* due time at the claim */
	int			consecutive_failures;
	Oid			handler;		/* SQL procedure, InvalidOid if built-in */
} SchedTask;

typedef enum SchedOutcome
{
	SCHED_DONE,					/* completed (deleted or rescheduled) */
	SCHED_FAILED,				/* failed; retried after a backoff */
	SCHED_LEASE_LOST			/* someone else owns it now; nothing written */
} SchedOutcome;

/* A built-in kind's C handler; raises an error to fail the task. */
typedef void (*SchedHandler) (SchedTask *task);

/*
 * A detached built-in handler: it runs with no transaction of its own
 * open, does its network and storage work outside any transaction and its
 * database work in short steps (sched_step).  It returns SCHED_DONE,
 * SCHED_FAILED with *error set to a palloc'd message (the task is then
 * retried after a backoff), or SCHED_LEASE_LOST when it found its lease
 * gone (nothing is written).  It should report expected failures this way
 * rather than raise them: an error it raises ends the executor's pass and
 * the task is reclaimed once its lease expires.
 */
typedef SchedOutcome (*SchedDetachedHandler) (SchedTask *task, char **error);

extern void sched_register_builtin(const char *kind, SchedHandler handler, int *cap);
extern void sched_register_detached(const char *kind, SchedDetachedHandler handler,
									int *cap);
extern bool sched_kind_detached(const char *kind);
extern void sched_step(void (*fn) (void *arg), void *arg);
extern bool sched_lease_lost(void);

extern void sched_maintain(void);
extern bool sched_claim(const char *picked_by, ArrayType *kinds, SchedTask *task);
extern void sched_claim_given(const char *kind, const char *instance,
							  const char *picked_by, SchedTask *task);
extern SchedOutcome sched_execute(SchedTask *task, ErrorData **error);
extern void sched_check_lease(void);

extern void sched_publish_lease(const SchedTask *task);
extern void sched_clear_lease(void);
extern int	sched_renew_heartbeats(void);

extern char *sched_claimant_name(void);

#endif							/* TMS_SCHED_H */
