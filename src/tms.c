/*-------------------------------------------------------------------------
 *
 * tms.c
 *	  Library entry point: settings, shared memory and the launcher.
 *
 * _PG_init defines every tms.* setting in one place so that each one has
 * one description, one unit and one deliberate context:
 *
 *	PGC_POSTMASTER	sizes shared memory or the process tree
 *	PGC_SIGHUP		read by the workers; changed with pg_reload_conf()
 *
 * When loaded through shared_preload_libraries it also reserves shared
 * memory and registers the launcher background worker.  Loaded later (the
 * first call of a SQL function in a backend), it defines the settings and
 * nothing else, which is enough for the pure functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "ops/ops.h"
#include "sched/sched.h"
#include "tms.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

char	   *tms_database_name = NULL;
bool		tms_enabled = true;
int			tms_max_workers = 4;
int			tms_naptime_ms = 1000;

int			tms_heartbeat_interval_ms = 5000;
int			tms_missed_heartbeats_limit = 6;
int			tms_expand_concurrency = 4;
int			tms_cron_concurrency = 8;
int			tms_commit_concurrency = 4;
int			tms_retry_delay_ms = 5000;
int			tms_retry_delay_max_ms = 3600 * 1000;

bool		tms_preloaded = false;

/*
 * Define the settings, and when preloaded, shared memory and the launcher.
 */
void
_PG_init(void)
{
	DefineCustomBoolVariable("tms.enabled",
							 gettext_noop("Lets the tms workers claim and run work."),
							 gettext_noop("When off, the workers stay connected but idle."),
							 &tms_enabled,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("tms.naptime",
							gettext_noop("How long an idle tms worker sleeps between polls."),
							NULL,
							&tms_naptime_ms,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.heartbeat_interval",
							gettext_noop("How often supervisors renew the heartbeat of running tasks."),
							NULL,
							&tms_heartbeat_interval_ms,
							5000, 100, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.missed_heartbeats_limit",
							gettext_noop("Missed heartbeats after which a task's lease is released."),
							gettext_noop("A lease is dead when its heartbeat is older than "
										 "tms.heartbeat_interval times this."),
							&tms_missed_heartbeats_limit,
							6, 2, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.expand_concurrency",
							gettext_noop("Maximum policy-expand tasks running at once."),
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

	DefineCustomIntVariable("tms.retry_delay",
							gettext_noop("Delay before the first retry of a failed task."),
							gettext_noop("Each further consecutive failure doubles it, up to "
										 "tms.retry_delay_max."),
							&tms_retry_delay_ms,
							5000, 0, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.retry_delay_max",
							gettext_noop("Longest delay between retries of a failing task."),
							NULL,
							&tms_retry_delay_max_ms,
							3600 * 1000, 0, 24 * 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Settings that size shared memory or the process tree exist only when
	 * preloading: PostgreSQL refuses to define PGC_POSTMASTER settings after
	 * startup, and without preloading there is nothing for them to size.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomStringVariable("tms.database_name",
								   gettext_noop("Databases in which tms runs its workers."),
								   gettext_noop("A comma-separated list; each database gets one supervisor "
												"and a pool of tms.max_workers workers."),
								   &tms_database_name,
								   "postgres",
								   PGC_POSTMASTER,
								   GUC_LIST_INPUT,
								   NULL, NULL, NULL);

		DefineCustomIntVariable("tms.max_workers",
								gettext_noop("Number of pool workers per tms database."),
								NULL,
								&tms_max_workers,
								4, 0, 64,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
	}

	/* the seed's three pools; their executors come with the policy engine */
	sched_register_builtin("policy-expand", NULL, &tms_expand_concurrency);
	sched_register_builtin("cron-job", NULL, &tms_cron_concurrency);
	sched_register_builtin("commit-job", NULL, &tms_commit_concurrency);

	/* each area of src/ops declares its settings and built-in kinds */
	tms_ops_init();

	MarkGUCPrefixReserved("tms");

	if (!process_shared_preload_libraries_in_progress)
		return;

	tms_preloaded = true;
	tms_shmem_register();
	tms_register_launcher();
}

/*
 * Raise an error unless tms was preloaded; for functions that talk to the
 * workers or read their shared memory.
 */
void
tms_require_preload(const char *feature)
{
	if (!tms_preloaded || TmsSharedState == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires tms to be loaded via \"shared_preload_libraries\"",
						feature),
				 errhint("Add \"tms\" to \"shared_preload_libraries\" in postgresql.conf "
						 "and restart the server.")));
}

char *
tms_arg_text(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

char *
tms_arg_name(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return pstrdup(NameStr(*PG_GETARG_NAME(n)));
}
