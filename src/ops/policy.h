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
 * policy_condition_evaluate is the one evaluation of a rule's condition
 * over a table: a policy run's (policy_evaluate.c), and a job's again at
 * the snapshot it runs on when the table's data changed since (the
 * snapshot-drift gate of maint.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_POLICY_H
#define TMS_OPS_POLICY_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "utils/tuplestore.h"

#include "dsl/dsl.h"
#include "iceberg/iceberg.h"

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

/* One evaluation of a condition: its result, or the error that ended it. */
typedef struct PolicyEvaluation
{
	bool		has_result;		/* false: the evaluation failed */
	bool		result;
	const char *outcome;
	char	   *explanation;
	char	   *explain_json;
	char	   *metrics_json;
	char	   *error;
	bool		has_score;		/* the rule has a score, evaluated */
	double		score;			/* 0 when its evaluation failed */
	char	   *score_explanation;
} PolicyEvaluation;

/*
 * Evaluate prog, the condition of a rule of operation whose option
 * target-file-size-bytes is target_file_size (0: none), over the parsed
 * table md, as a policy's evaluation does (without the rule's score); fio
 * reads the files the condition needs (manifest lists, manifests, data
 * file lists).  Every failure becomes ev->error; raises only on
 * interrupts and out of memory.  No database access.
 */
extern void policy_condition_evaluate(const DslProgram *prog, const char *operation,
									  int64 target_file_size,
									  const IcebergFileIO *fio,
									  const IcebergTableMetadata *md,
									  PolicyEvaluation *ev);

#endif							/* TMS_OPS_POLICY_H */
