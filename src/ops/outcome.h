/*-------------------------------------------------------------------------
 *
 * outcome.h
 *	  How a finished run of a job becomes the scheduler's outcome: the one
 *	  rule for maintenance jobs (maint.c) and purge jobs (purge.c), once
 *	  the run's finish step has written the job row (its state, attempts
 *	  and last_error, each in its own table and vocabulary).
 *
 *	  lease lost	the finish step found the lease gone: SCHED_LEASE_LOST
 *	  retry			the run failed and the job is pending again: the task
 *					fails (SCHED_FAILED) with the run's error, and the
 *					scheduler retries it after a backoff
 *	  failed		the run failed for good: logged (LOG, with its detail
 *					and hint), and the task ends (SCHED_DONE) with the
 *					run's error, which its history row keeps
 *	  ended			succeeded, skipped or cancelled: SCHED_DONE
 *
 * The run's error is its SQLSTATE (ERRCODE_EXTERNAL_ROUTINE_EXCEPTION
 * when the failure did not know one), message, detail and hint.
 *
 * src/ops/outcome.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_OUTCOME_H
#define TMS_OPS_OUTCOME_H

#include "postgres.h"

#include "sched/sched.h"

/* What the finish step of a run found (see above). */
typedef enum OpsRunEnd
{
	OPS_RUN_LEASE_LOST,
	OPS_RUN_RETRY,
	OPS_RUN_FAILED,
	OPS_RUN_ENDED
} OpsRunEnd;

/* A run's failure, as its job row records it. */
typedef struct OpsRunFailure
{
	int			sqlerrcode;		/* 0: not known */
	const char *message;
	const char *detail;			/* NULL or "": none */
	const char *hint;			/* likewise */
} OpsRunFailure;

/*
 * The outcome of a run that ended as "end", its failure f (read for retry
 * and failed only).  "job" names the job in the LOG line of a failure
 * ("purge job 12").  *error is made in the memory context cxt (retry and
 * failed; left alone otherwise).
 */
extern SchedOutcome ops_run_outcome(OpsRunEnd end, const OpsRunFailure *f,
									const char *job, MemoryContext cxt,
									ErrorData **error);

#endif							/* TMS_OPS_OUTCOME_H */
