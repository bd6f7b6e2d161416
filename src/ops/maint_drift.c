/*-------------------------------------------------------------------------
 *
 * maint_drift.c
 *	  The snapshot-drift gate of a policy's job, per operation, as
 *	  Gravitino's table maintenance service design describes
 *	  (https://github.com/apache/gravitino/pull/13386): a data commit made
 *	  between the evaluation of a rule's condition and the job's run skips
 *	  only the operations whose input it changed.
 *
 * A policy's job carries the snapshot its condition was evaluated at (the
 * job's before_snapshot_id until it runs).  When the run loads the table
 * (maint.c, the load step) and finds its data changed since (drift:
 * snapshot_drift), maint_drift_matters(op) decides:
 *
 *	 no		snapshot expiry, orphan cleanup and manifest rewrite work on
 *			whatever snapshot is current, not on the data the condition
 *			looked at: the job runs on the current snapshot.
 *	 yes	compaction and position-delete rewrite are planned at run time
 *			on the table as loaded (nothing planned at the evaluation is
 *			kept), and run only if the rule's condition, evaluated again
 *			with the one evaluation (policy_condition_evaluate), still
 *			holds at the current snapshot; else the job ends skipped with
 *			the evaluation's explanation.
 *
 * A job that goes on records why in its message, and the snapshot it runs
 * on as its before_snapshot_id (a retry of it compares with that one).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "bridge/condition.h"
#include "ops/maint_int.h"
#include "ops/policy.h"
#include "sched/lease.h"
#include "sched/sched.h"

/*
 * Whether a data commit made after the evaluation of the job's condition
 * changes the input of its operation (an operation not named here: it
 * does, the safe answer).
 */
static bool
maint_drift_matters(MaintOp op)
{
	switch (op)
	{
		case MAINT_EXPIRE:
		case MAINT_ORPHAN:
		case MAINT_REWRITE:
			return false;
		default:
			return true;
	}
}

/*
 * Whether the table's data changed since the snapshot the condition was
 * evaluated at.  Snapshots of operation "replace" (manifest rewrite,
 * compaction: the same rows) between the two are not drift, so one
 * operation's commit does not put the others decided with it to the
 * test.  A snapshot that is no longer an ancestor of the current one
 * (expired, or main moved elsewhere) is drift.
 */
static bool
snapshot_drift(MaintRun *run)
{
	int64		id = run->before_snapshot_id;

	if (run->evaluated_snapshot_id < 0 || id == run->evaluated_snapshot_id)
		return false;
	for (int steps = 0; id >= 0 && steps <= run->md->nsnapshots; steps++)
	{
		const IcebergSnapshot *s = iceberg_metadata_snapshot(run->md, id);

		if (s == NULL)
			return true;
		if (id == run->evaluated_snapshot_id)
			return false;
		if (s->operation == NULL || strcmp(s->operation, "replace") != 0)
			return true;
		id = s->parent_snapshot_id;
	}
	return true;
}

typedef struct DriftStep
{
	MaintRun   *run;
	const char *note;			/* in: the message to record, NULL: read */
	char	   *condition;		/* out: the rule's condition, NULL: gone */
	int64		target_file_size;	/* out: its option target-file-size-bytes,
									 * or 0 */
	bool		written;		/* out: the note was recorded */
} DriftStep;

static void
step_drift(void *arg)
{
	DriftStep  *d = arg;
	MaintRun   *run = d->run;
	Oid			types[5] = {INT8OID, TEXTOID, INT8OID, TEXTOID, INT8OID};
	Datum		args[5];
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	if (d->note == NULL)
	{
		rc = SPI_execute_with_args("SELECT r.condition,"
								   "       CASE WHEN r.options ->> 'target-file-size-bytes'"
								   "                 ~ '^[0-9]{1,18}$'"
								   "            THEN r.options ->> 'target-file-size-bytes' END"
								   "  FROM tms.table_maintenance_job j"
								   "  JOIN tms.maintenance_rules r ON r.id = j.rule_id"
								   " WHERE j.id = $1", 1, types, args, NULL, true, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not read the condition of a job's rule: %s",
				 SPI_result_code_string(rc));
		if (SPI_processed == 1)
		{
			char	   *size = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);

			d->condition = MemoryContextStrdup(run->cxt,
											   SPI_getvalue(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 1));
			d->target_file_size = size ? strtoll(size, NULL, 10) : 0;
		}
		return;
	}
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(d->note);
	args[4] = Int64GetDatum(run->before_snapshot_id);
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET message = $4, before_snapshot_id = $5"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
							   5, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the snapshot drift of a maintenance job: %s",
			 SPI_result_code_string(rc));
	d->written = SPI_processed == 1;
}

/* Record why the job runs despite the drift; false when the lease is gone. */
static bool
drift_note(MaintRun *run, const char *note)
{
	DriftStep	d = {run, note, NULL, 0, false};

	sched_owner_step(step_drift, &d);
	if (!d.written)
		run->result = MAINT_LEASE_LOST;
	return d.written;
}

/*
 * The gate (the run's load step, after maint_load): true when the run goes
 * on, false with run->result set (skipped, or the lease lost).
 */
bool
maint_drift_gate(MaintRun *run)
{
	DriftStep	d = {run, NULL, NULL, 0, false};
	DslProgram *prog;
	DslError	err;
	PolicyEvaluation ev;
	int64		was = run->evaluated_snapshot_id;
	int64		now = run->before_snapshot_id;

	if (run->dry_run || !run->policy_job || !snapshot_drift(run))
		return true;
	if (!maint_drift_matters(run->opt.op))
		return drift_note(run, psprintf("snapshot drift: the condition was evaluated at snapshot "
										INT64_FORMAT " and the table's data changed since; %s does"
										" not depend on that data, so it ran on snapshot " INT64_FORMAT,
										was, maint_op_name(run->opt.op), now));

	/* planned at run time on the table as loaded: does its condition hold? */
	sched_owner_step(step_drift, &d);
	if (d.condition == NULL)
	{
		maint_fail(run, MAINT_SKIPPED, "snapshot drift: the condition was evaluated at snapshot "
				   INT64_FORMAT ", the table is now at snapshot " INT64_FORMAT
				   ", and the job's rule is gone", was, now);
		return false;
	}
	prog = tms_condition_compile(d.condition, strlen(d.condition), &err);
	if (prog == NULL)
	{
		maint_fail(run, MAINT_SKIPPED, "snapshot drift: the condition cannot be evaluated again at snapshot "
				   INT64_FORMAT ": %s", now, err.message);
		return false;
	}
	policy_condition_evaluate(prog, maint_op_name(run->opt.op), d.target_file_size,
							  &run->fio, run->md, &ev);
	dsl_free(prog);
	if (!ev.has_result)
	{
		maint_fail(run, MAINT_SKIPPED, "snapshot drift: the condition cannot be evaluated again at snapshot "
				   INT64_FORMAT ": %s", now, ev.error ? ev.error : ev.outcome);
		return false;
	}
	if (!ev.result)
	{
		maint_fail(run, MAINT_SKIPPED, "snapshot drift: the condition no longer holds at snapshot "
				   INT64_FORMAT " (it held at snapshot " INT64_FORMAT "): %s", now, was,
				   ev.explanation ? ev.explanation : "false");
		return false;
	}
	return drift_note(run, psprintf("snapshot drift: the condition was evaluated at snapshot "
									INT64_FORMAT " and the table's data changed since; it still"
									" holds at snapshot " INT64_FORMAT ", where %s was planned again",
									was, now, maint_op_name(run->opt.op)));
}
