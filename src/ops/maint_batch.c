/*-------------------------------------------------------------------------
 *
 * maint_batch.c
 *	  A batch of maintenance jobs: the task "batch-<id>" of the "maintenance"
 *	  kind, which runs the jobs of up to a rule's batch-size tables one
 *	  after the other (the batched snapshot expiry of Gravitino's table
 *	  maintenance service design, https://github.com/apache/gravitino/pull/13386,
 *	  whose job row "batch:{batch_id}:{policy_id}" stands for many small
 *	  tables of one rule).
 *
 * A batch is made by tms._record_evaluation (tms._open_batch): a
 * snapshot-expiry rule on engine local with option batch-size N puts the
 * jobs of its fired candidates into one batch until it has N, or until an
 * executor claims its task; its id is its first job's.  Every table keeps
 * its own row of tms.table_maintenance_job, so everything that holds per
 * job holds per table in a batch: the table's in-flight gate (a job of a
 * batch is in flight from its evaluation to its end), the drift gate,
 * cooldowns, back-off and budgets (tms._start_job and tms._job_ended, per
 * job), and the effect or error, which tms.maintenance_jobs shows with the
 * job's batch_id.
 *
 * The task runs each unfinished job of its batch, in id order, exactly as
 * a job's own task would (maint_run_job, maint.c), under the batch task's
 * one lease.  A job that fails does not stop the others: after the last
 * one, the task is retried after its backoff if a job went back to
 * pending for a retry (the jobs that ended are not run again), ends with
 * the first failure's error if one failed for good, and is kept, due
 * again, while a job of it is deferred (a deferral moves the task's due
 * time; the settle keeps a task whose due time moved).  A lost lease
 * stops the batch at once: whoever holds the task now runs the rest.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "ops/maint_int.h"
#include "sched/lease.h"
#include "sched/sched.h"

typedef struct NextJob
{
	int64		batch_id;
	int64		after;			/* the last job run; 0: none yet */
	int64		job_id;			/* out: the next one; 0: none */
} NextJob;

/* The batch's next unfinished job after nj->after. */
static void
step_next(void *arg)
{
	NextJob    *nj = arg;
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		args[2];
	bool		isnull;
	int			rc;

	args[0] = Int64GetDatum(nj->batch_id);
	args[1] = Int64GetDatum(nj->after);
	rc = SPI_execute_with_args("SELECT id FROM tms.table_maintenance_job"
							   " WHERE batch_id = $1 AND id > $2 AND finished_at IS NULL"
							   " ORDER BY id LIMIT 1",
							   2, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read the jobs of batch " INT64_FORMAT ": %s",
			 nj->batch_id, SPI_result_code_string(rc));
	nj->job_id = 0;
	if (SPI_processed == 1)
		nj->job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 1, &isnull));
}

/* See the file header. */
SchedOutcome
maint_run_batch(SchedTask *task, int64 batch_id, ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	NextJob		nj = {batch_id, 0, 0};
	ErrorData  *retry = NULL;
	ErrorData  *failed = NULL;
	bool		idle = true;
	int64		policy_id = -1;
	int64		rule_id = -1;

	for (;;)
	{
		ErrorData  *e = NULL;
		ErrorData  *job_error = NULL;
		SchedOutcome o;

		CHECK_FOR_INTERRUPTS();
		if (sched_lease_lost())
			return SCHED_LEASE_LOST;
		if (!sched_owner_try_step(step_next, &nj, &e))
		{
			MemoryContextSwitchTo(cxt);
			*error = sched_error(e->sqlerrcode, e->message, e->detail);
			return SCHED_FAILED;
		}
		MemoryContextSwitchTo(cxt);
		if (nj.job_id == 0)
			break;
		nj.after = nj.job_id;
		task->idle = false;
		o = maint_run_job(task, nj.job_id, &job_error);
		MemoryContextSwitchTo(cxt);
		if (o == SCHED_LEASE_LOST)
			return o;
		/* a deferred start is no run; any other job's is */
		idle = idle && task->idle;
		if (task->policy_id > 0)
		{
			policy_id = task->policy_id;
			rule_id = task->rule_id;
		}
		if (o == SCHED_FAILED && retry == NULL)
			retry = job_error;
		else if (o == SCHED_DONE && job_error != NULL && failed == NULL)
			failed = job_error;
	}
	task->idle = idle;
	/* the run's row of tms.task_history names the batch, by its id */
	sched_task_subject(task, policy_id, rule_id, -1, batch_id);
	if (retry != NULL)
	{
		*error = retry;
		return SCHED_FAILED;
	}
	if (failed != NULL)
		*error = failed;
	return SCHED_DONE;
}
