/*-------------------------------------------------------------------------
 *
 * sched.h
 *	  The scheduler core: claim, execute, complete, fail and recover rows
 *	  of tms.scheduled_tasks.
 *
 * Semantics are db-scheduler's (as Apache Gravitino's table maintenance
 * service uses them): a task is a row keyed by (task_name, task_instance); a claim
 * sets picked and bumps version in one short transaction; every later
 * write by the claimant is conditional on that version, so a claimant
 * whose lease was taken away (dead-lease recovery, or an operator) writes
 * nothing.  Heartbeats are renewed by the supervisor, not by the process
 * doing the work, through the lease entries of lease.h.
 *
 * Every function here runs inside a transaction with SPI connected unless
 * it says otherwise; the callers (the pool worker loop and the
 * run_pending/run_task procedures) own the transaction boundaries, and
 * never keep a transaction open between a claim and the execution.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_SCHED_H
#define TMS_SCHED_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/array.h"

/* sizes of a task's identity as shared memory keeps it */
#define SCHED_KIND_LEN 64
#define SCHED_INSTANCE_LEN 1024

/* settings (sched.c) */
extern int	tms_heartbeat_interval_ms;
extern int	tms_missed_heartbeats_limit;
extern int	tms_retry_delay_ms;
extern int	tms_retry_delay_max_ms;
extern int	tms_stuck_task_age_s;	/* read by the view tms.stat_stuck_tasks */
extern int	tms_task_history_retention_s;
extern int	tms_task_history_prune_interval_ms;

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
	char	   *handler_name;	/* SQL procedure's signature, NULL if built-in */
	Oid			handler;		/* that procedure now, InvalidOid if none */

	/*
	 * What the run worked on, for its row of tms.task_history (-1: nothing of
	 * the kind), and whether it is worth a row at all: a handler tells with
	 * sched_task_subject() and sched_task_idle().
	 */
	int64		policy_id;
	int64		rule_id;
	int64		table_id;
	int64		job_id;
	bool		idle;
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
 * SCHED_FAILED with *error set to a palloc'd ErrorData (made with
 * sched_error(); the task is then retried after a backoff), or
 * SCHED_LEASE_LOST when it found its lease gone (nothing is written).
 * SCHED_DONE with *error set is a run that failed for good (a job that
 * retrying cannot mend): the task completes, and its row of
 * tms.task_history records the failure.  It
 * should report expected failures this way rather than raise them: an
 * error it raises ends the executor's pass and the task is reclaimed once
 * its executor is gone.
 */
typedef SchedOutcome (*SchedDetachedHandler) (SchedTask *task, ErrorData **error);

/*
 * For a handler: the policy, rule, table and job (maintenance or purge job)
 * its run works on (-1: none), recorded with the run in tms.task_history;
 * and that the run only found its work not ready and rescheduled itself
 * (a deferred start), which is not worth a row there.
 */
extern void sched_task_subject(SchedTask *task, int64 policy_id, int64 rule_id,
							   int64 table_id, int64 job_id);
extern void sched_task_idle(SchedTask *task);

/* Declare built-in kinds (from _PG_init, through the owning area's init). */
/*
 * The transactions of a session's claim-execute loop (CALL tms.run_pending,
 * run_task) run tms's statements with a safe search_path; see sched.c.
 */
extern void sched_session_begin(void);
extern void sched_session_commit(void);
extern void sched_session_end(void);
extern void sched_session_forget(void);

extern void sched_register_builtin(const char *kind, SchedHandler handler, int *cap);
extern void sched_register_detached(const char *kind, SchedDetachedHandler handler,
									int *cap);
extern bool sched_kind_detached(const char *kind);

/*
 * For detached handlers: a short transaction around fn(arg), with SPI
 * connected and a snapshot; sched_try_step returns fn's error as a value
 * (its work rolled back) instead of raising it.
 */
extern void sched_step(void (*fn) (void *arg), void *arg);
extern bool sched_try_step(void (*fn) (void *arg), void *arg, ErrorData **error);

/*
 * The same as the extension's owner: the steps of built-in kinds write
 * tms's own tables, whoever drives the scheduler (a pool worker, or a
 * session in CALL tms.run_pending).  The identity is restored when fn
 * returns, and by the abort when it raises.
 */
extern void sched_owner_step(void (*fn) (void *arg), void *arg);
extern bool sched_owner_try_step(void (*fn) (void *arg), void *arg, ErrorData **error);

/*
 * The condition a step's write adds to its WHERE so that it writes only
 * while the claim still holds the lease: the task row of kind (a string
 * literal) whose instance is $2 still carries the claim's version, $3.
 */
#define SCHED_LEASE_HELD(kind) \
	" EXISTS (SELECT 1 FROM tms.scheduled_tasks t" \
	"          WHERE t.task_name = '" kind "' AND t.task_instance = $2" \
	"            AND t.version = $3 AND t.picked)"

/* A failure as an ErrorData in the current memory context. */
extern ErrorData *sched_error(int sqlerrcode, const char *message, const char *detail);

/*
 * Release dead leases (never one a live process of this server holds) and
 * keep the kinds' slots in shape.
 */
extern void sched_maintain(void);

/*
 * Prune a batch of tms.task_history's rows older than
 * tms.task_history_retention, when one is due (at most once every
 * tms.task_history_prune_interval unless the last batch was full); true
 * when a batch ran.  In a transaction of its own: a batch deletes up to
 * 10,000 rows, work no heartbeat should wait for.  The caller commits it
 * and then runs the sweeps (sched_run_sweeps) in the next one, so that a
 * sweep's failure does not undo the prune nor the prune's a sweep.
 */
extern bool sched_prune_history(void);

/*
 * A kind's sweep of the state its tasks leave behind (records of work whose
 * task is gone, say), run after every prune of the run history
 * (sched_run_sweeps), in a transaction with SPI connected.  Called from
 * _PG_init; at most one per kind.
 */
typedef void (*SchedSweep) (void);
extern void sched_register_sweep(const char *kind, SchedSweep sweep);

/* Run every kind's sweep, in the caller's transaction (SPI connected). */
extern void sched_run_sweeps(void);

/* Whether sched_prune_history has a batch to run (no transaction needed). */
extern bool sched_history_prune_due(void);

/*
 * Claim the best due task of the given kinds (NULL: any) for claimant
 * picked_by.  Returns false when there is none.  The caller commits right
 * after, then publishes the lease (sched_lease_publish).
 */
extern bool sched_claim(const char *picked_by, ArrayType *kinds, SchedTask *task);

/*
 * Claim the named task whether due or not (tms.run_task).  Raises, changing
 * nothing, if it does not exist, if a live process holds it or its
 * heartbeat is live (the HUDI-7503 rule: two executions of one plan never
 * run at once), or if its kind has no free slot.
 */
extern void sched_claim_given(const char *kind, const char *instance,
							  const char *picked_by, SchedTask *task);

/*
 * Execute a claimed task and settle it; see sched.c.  When the handler
 * failed, *error is its error (in the caller's memory context).
 */
extern SchedOutcome sched_execute(SchedTask *task, ErrorData **error);

/* Raise *error again as it was, with its SQLSTATE, for a session's CALL. */
extern void sched_rethrow(ErrorData *error) pg_attribute_noreturn();

#endif							/* TMS_SCHED_H */
