/*-------------------------------------------------------------------------
 *
 * policy.h
 *	  Maintenance policies (doc/policies.md): the settings of the area, its
 *	  task kinds, and the evaluation of one policy, for the SQL functions
 *	  of src/sql_api/policy_sql.c.
 *
 * A policy is evaluated by a task of kind "policy-expand" whose instance is
 * the policy's id: claimed by a pool worker (or CALL tms.run_pending) like
 * every task, with its lease kept alive by the supervisor.  The task
 * refreshes the policy group's tables, finds the candidates, evaluates
 * their conditions and submits the maintenance jobs, then reschedules
 * itself tms.evaluation_cycle_interval later.  tms.create_policy schedules
 * it; a task whose policy is gone ends.  tms.evaluate_now runs the same
 * steps inside its caller's transaction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_POLICY_H
#define TMS_OPS_POLICY_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "utils/tuplestore.h"

/* settings (policy.c) */
extern int	tms_evaluation_cycle_interval_ms;
extern int	tms_max_active_operations;
extern int	tms_evaluation_pool_size;
extern int	tms_evaluation_log_retention_s;
extern int	tms_score_aging_ms;
extern char *tms_maintenance_handler;
extern int	tms_expand_concurrency;
extern int	tms_cron_concurrency;
extern int	tms_commit_concurrency;
extern int	tms_expand_batch_size;
extern int	tms_commit_job_delay_ms;
extern int	tms_commit_event_resync_interval_s;
extern int	tms_backoff_max_s;

/*
 * The cooldown of an operation whose rule gives no min_interval: the
 * setting tms.<operation>_min_interval, in milliseconds (an operation of
 * no built-in name: compaction's).
 */
extern int64 tms_policy_default_min_interval_ms(const char *operation);

/*
 * tms.evaluate_now: one evaluation of one policy inside the caller's
 * transaction, as its owner; one row per evaluation into tupstore
 * (tms.evaluate_now's columns).  Raises ERRCODE_INSUFFICIENT_PRIVILEGE
 * unless the acting role has the privileges of the policy's owner.
 */
extern void tms_policy_evaluate_now(const char *policy, bool force,
									Tuplestorestate *tupstore, TupleDesc desc);

#endif							/* TMS_OPS_POLICY_H */
