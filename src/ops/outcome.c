/*-------------------------------------------------------------------------
 *
 * outcome.c
 *	  The outcome of a finished maintenance or purge run (outcome.h).
 *
 * src/ops/outcome.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops/outcome.h"

/* The run's error for the scheduler, in the current memory context. */
static ErrorData *
run_error(const OpsRunFailure *f)
{
	ErrorData  *e;

	e = sched_error(f->sqlerrcode ? f->sqlerrcode : ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					f->message, (f->detail && f->detail[0]) ? f->detail : NULL);
	e->hint = (f->hint && f->hint[0]) ? pstrdup(f->hint) : NULL;
	return e;
}

/* See outcome.h. */
SchedOutcome
ops_run_outcome(OpsRunEnd end, const OpsRunFailure *f, const char *job,
				MemoryContext cxt, ErrorData **error)
{
	MemoryContext prev;

	switch (end)
	{
		case OPS_RUN_LEASE_LOST:
			return SCHED_LEASE_LOST;
		case OPS_RUN_RETRY:
			prev = MemoryContextSwitchTo(cxt);
			*error = run_error(f);
			MemoryContextSwitchTo(prev);
			return SCHED_FAILED;
		case OPS_RUN_FAILED:
			ereport(LOG,
					(errmsg("%s failed: %s", job, f->message),
					 (f->detail && f->detail[0]) ? errdetail_internal("%s", f->detail) : 0,
					 (f->hint && f->hint[0]) ? errhint("%s", f->hint) : 0));
			/* done for good: the task's history row has the failure */
			prev = MemoryContextSwitchTo(cxt);
			*error = run_error(f);
			MemoryContextSwitchTo(prev);
			return SCHED_DONE;
		case OPS_RUN_ENDED:
			break;
	}
	return SCHED_DONE;
}
