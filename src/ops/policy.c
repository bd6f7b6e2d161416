/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policies: the area's settings and task kinds.  The evaluation of a
 *	  policy (kind "policy-expand") is policy_run.c.
 *
 * A condition that is true for a (table, rule) becomes a row of
 * tms.table_maintenance_job (state pending) and a task of kind
 * "maintenance" in one transaction; maint.c runs it.  The (table, rule)
 * is not evaluated again until the job ends and its baseline is reset,
 * nor before the rule's min_interval has passed after that.
 *
 * Three kinds of task evaluate rules (the three pools of Gravitino's table
 * maintenance service design, https://github.com/apache/gravitino/pull/13386,
 * each with its cap): "policy-expand", one per policy (policy_run.c), runs
 * the evaluation cycle of the rules without a schedule and expands the
 * crontab firings into "cron-job" tasks, one per (policy, table); a
 * "commit-job", one per table, is made by the commit events of
 * sql/install/functions/67_schedules.sql and runs the table's on-commit
 * rules (policy_tasks.c).
 *
 * Adaptive cadence (tms.backoff_max): a (rule, table) whose jobs change
 * nothing waits longer and longer before its next one, until a commit to
 * the table; the rule is SQL (sql/install/functions/63_cadence.sql), run
 * when a job ends and when a commit is observed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <string.h>
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
int			tms_score_aging_ms = 60000;
char	   *tms_maintenance_handler = NULL;
int			tms_expand_batch_size = 100;
int			tms_commit_job_delay_ms = 0;
int			tms_commit_event_resync_interval_s = 86400;
int			tms_backoff_max_s = 7 * 86400;

/*
 * The cooldown of each operation when its rule gives no min_interval
 * (the defaults of Gravitino's design: an hour, a day for orphan cleanup),
 * one setting each.
 */
typedef struct MinInterval
{
	const char *operation;
	const char *setting;
	const char *description;
	int			value_s;
} MinInterval;

static MinInterval min_intervals[] = {
	{"compaction", "tms.compaction_min_interval",
	"Cooldown of compaction when its rule gives no min_interval.", 3600},
	{"position-delete-rewrite", "tms.position_delete_rewrite_min_interval",
	"Cooldown of position-delete-rewrite when its rule gives no min_interval.", 3600},
	{"manifest-rewrite", "tms.manifest_rewrite_min_interval",
	"Cooldown of manifest-rewrite when its rule gives no min_interval.", 3600},
	{"snapshot-expiry", "tms.snapshot_expiry_min_interval",
	"Cooldown of snapshot-expiry when its rule gives no min_interval.", 3600},
	{"orphan-cleanup", "tms.orphan_cleanup_min_interval",
	"Cooldown of orphan-cleanup when its rule gives no min_interval.", 86400},
	{"retention", "tms.retention_min_interval",
	"Cooldown of retention when its rule gives no min_interval.", 86400},
};

int64
tms_policy_default_min_interval_ms(const char *operation)
{
	for (size_t i = 0; i < lengthof(min_intervals); i++)
		if (strcmp(min_intervals[i].operation, operation) == 0)
			return (int64) min_intervals[i].value_s * 1000;
	return (int64) min_intervals[0].value_s * 1000; /* other engines'
													 * operations */
}

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
	DefineCustomIntVariable("tms.score_aging",
							gettext_noop("Waiting time one point of a rule's score is worth."),
							gettext_noop("A submitted job ranks as if it had waited its score times this long already; "
										 "0 ranks jobs by submission time alone."),
							&tms_score_aging_ms,
							60000, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
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

	DefineCustomIntVariable("tms.expand_batch_size",
							gettext_noop("Most cron-job tasks one run of a policy-expand task enqueues."),
							gettext_noop("A crontab firing over more tables is expanded by several runs, one after the other."),
							&tms_expand_batch_size,
							100, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.commit_job_delay",
							gettext_noop("How long after a commit event its table's commit-job is due."),
							gettext_noop("Events arriving meanwhile coalesce into the same job."),
							&tms_commit_job_delay_ms,
							0, 0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.commit_event_resync_interval",
							gettext_noop("Time between two full refreshes of a group whose commits arrive as events (0: never)."),
							gettext_noop("A safety net for events that were lost; commits arriving as events need no refresh."),
							&tms_commit_event_resync_interval_s,
							86400, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.backoff_max",
							gettext_noop("Longest time a (rule, table) whose runs change nothing waits before its next run (0: no back-off)."),
							gettext_noop("The wait starts at the rule's cadence and doubles at each further run that changes nothing; a commit to the table ends it."),
							&tms_backoff_max_s,
							7 * 86400, 0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	for (size_t i = 0; i < lengthof(min_intervals); i++)
		DefineCustomIntVariable(min_intervals[i].setting,
								min_intervals[i].description,
								gettext_noop("No job of a rule starts on a table sooner than this after the rule's last job there finished."),
								&min_intervals[i].value_s,
								min_intervals[i].value_s, 0, INT_MAX,
								PGC_SIGHUP,
								GUC_UNIT_S,
								NULL, NULL, NULL);

	/* the three pools of Gravitino's design */
	sched_register_detached("policy-expand", policy_expand_task, &tms_expand_concurrency);
	sched_register_detached("cron-job", policy_cron_job_task, &tms_cron_concurrency);
	sched_register_detached("commit-job", policy_commit_job_task, &tms_commit_concurrency);
}
