/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policies: settings, the built-in task kind "maintenance" that a
 *	  submitted operation becomes, and the supervisor's entry point to the
 *	  evaluation cycle (the cycle itself is policy_cycle.c).
 *
 * A condition that is true for a (table, rule) becomes a row of
 * tms.table_maintenance_job (state pending) and a task of kind
 * "maintenance" in one transaction.  The task's handler starts the job
 * when fewer than tms.max_active_operations jobs are running, otherwise
 * retries in two seconds; a started job is handed to the SQL procedure
 * named by tms.maintenance_handler when one is set (the engines of a later
 * version take this place).  The job stays in flight, and its (table,
 * rule) is not evaluated again, until tms.finish_operation() records its
 * outcome and resets the baseline.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "ops/ops.h"
#include "ops/policy_int.h"
#include "sched/sched.h"

int			tms_evaluation_cycle_interval_ms = 60000;
int			tms_max_active_operations = 8;
int			tms_evaluation_pool_size = 4;
int			tms_evaluation_log_retention_s = 14 * 86400;
char	   *tms_maintenance_handler = NULL;

static void maintenance_task(SchedTask *task);

/*
 * Define the policy settings and declare the "maintenance" task kind.
 */
void
tms_policy_init(void)
{
	long		cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (cores < 1)
		cores = 1;
	tms_evaluation_pool_size = (int) Min(cores * 2, 256);

	DefineCustomIntVariable("tms.evaluation_cycle_interval",
							gettext_noop("Time between two evaluation cycles of the maintenance policies."),
							NULL,
							&tms_evaluation_cycle_interval_ms,
							60000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.max_active_operations",
							gettext_noop("Maintenance operations that may run at once."),
							gettext_noop("Submitted operations beyond this wait, pending."),
							&tms_max_active_operations,
							8, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.evaluation_pool_size",
							gettext_noop("Condition evaluations in progress at once in a cycle."),
							gettext_noop("Defaults to twice the number of CPU cores."),
							&tms_evaluation_pool_size,
							tms_evaluation_pool_size, 1, 256,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.evaluation_log_retention",
							gettext_noop("How long rows of tms.evaluation_log are kept."),
							NULL,
							&tms_evaluation_log_retention_s,
							14 * 86400, 86400, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomStringVariable("tms.maintenance_handler",
							   gettext_noop("Procedure (job_id bigint, job jsonb) that runs started maintenance jobs."),
							   gettext_noop("Empty: started jobs stay running until tms.finish_operation() is called."),
							   &tms_maintenance_handler,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);

	sched_register_builtin("maintenance", maintenance_task, &tms_max_active_operations);
}

/*
 * Handler of the "maintenance" kind: runs in the scheduler's
 * subtransaction with SPI connected; the SQL function does the work (see
 * the file header).
 */
static void
maintenance_task(SchedTask *task)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	char		nulls[2] = {' ', ' '};
	int			rc;

	args[0] = CStringGetTextDatum(task->instance);
	if (task->data)
		args[1] = CStringGetTextDatum(task->data);
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("maintenance task \"%s\" has no data", task->instance)));
	rc = SPI_execute_with_args("SELECT tms._run_maintenance_task($1, $2::jsonb)",
							   2, types, args, nulls, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not run maintenance task: %s", SPI_result_code_string(rc));
}
