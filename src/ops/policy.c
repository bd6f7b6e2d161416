/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policies: the area's settings and task kinds.  The evaluation of a
 *	  policy (kind "policy-expand") is policy_run.c.
 *
 * A condition that is true for a (table, rule) becomes a row of
 * tms.table_maintenance_job (state pending) and a task of kind
 * "maintenance" in one transaction; maint.c runs it.  The (table, rule)
 * is not evaluated again until the job ends and its baseline is reset.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <unistd.h>

#include "utils/guc.h"
#include "utils/timestamp.h"

#include "ops/ops.h"
#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/sched.h"

int			tms_evaluation_cycle_interval_ms = 60000;
int			tms_expand_concurrency = 4;
int			tms_cron_concurrency = 8;
int			tms_commit_concurrency = 4;
int			tms_max_active_operations = 8;
int			tms_evaluation_pool_size = 4;
int			tms_evaluation_log_retention_s = 14 * 86400;
char	   *tms_maintenance_handler = NULL;

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
							gettext_noop("Time between two evaluations of a maintenance policy."),
							gettext_noop("Each policy is evaluated by a task that runs again this long after it ended."),
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

	DefineCustomIntVariable("tms.expand_concurrency",
							gettext_noop("Maximum policy evaluations (policy-expand tasks) running at once."),
							NULL,
							&tms_expand_concurrency,
							4, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.cron_concurrency",
							gettext_noop("Maximum cron-job tasks running at once."),
							NULL,
							&tms_cron_concurrency,
							8, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.commit_concurrency",
							gettext_noop("Maximum commit-job tasks running at once."),
							NULL,
							&tms_commit_concurrency,
							4, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/* three pools; cron-job and commit-job have no executor yet */
	sched_register_detached("policy-expand", policy_expand_task, &tms_expand_concurrency);
	sched_register_builtin("cron-job", NULL, &tms_cron_concurrency);
	sched_register_builtin("commit-job", NULL, &tms_commit_concurrency);
}
