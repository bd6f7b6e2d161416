/*-------------------------------------------------------------------------
 *
 * tms.c
 *	  Library entry point: settings, shared memory and the launcher.
 *
 * _PG_init defines the core tms.* settings in one place so that each one
 * has one description, one unit and one deliberate context (each area of
 * src/ops defines its own in its init function):
 *
 *	PGC_POSTMASTER	sizes shared memory or the process tree
 *	PGC_SIGHUP		read by the workers; changed with pg_reload_conf()
 *	PGC_SUSET		limits what a session may make tms do (response sizes,
 *					the hosts it may reach): only a superuser changes them
 *
 * When loaded through shared_preload_libraries it also reserves shared
 * memory (the worker slots of src/worker, the lease entries of src/sched,
 * the delete pool of src/ops/delete_pool.c, the cumulative statistics of
 * src/observe/stats.c) and registers the launcher background worker,
 * except under pg_upgrade,
 * whose servers must run nothing of ours.  Loaded later (the first call of
 * a SQL function in a backend), it defines the settings and nothing else,
 * which is enough for the pure functions.
 *
 * This is the one file above every layer: it may include any of them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "bridge/plain_memory.h"
#include "bridge/settings.h"
#include "observe/stats.h"
#include "io/io.h"
#include "ops/delete.h"
#include "ops/ops.h"
#include "sched/lease.h"
#include "sched/sched.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Reserve the shared memory of the worker slots, leases and statistics. */
static void
tms_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(tms_slots_shmem_size());
	RequestAddinShmemSpace(sched_lease_shmem_size(tms_lease_entry_count()));
	RequestAddinShmemSpace(tms_delete_pool_shmem_size(tms_lease_entry_count()));
	RequestAddinShmemSpace(tms_stat_shmem_size());
	tms_slots_shmem_request();
	sched_lease_shmem_request();
	tms_delete_pool_shmem_request();
	tms_stat_shmem_request();
}

static void
tms_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tms_slots_shmem_init();
	sched_lease_shmem_init(tms_lease_entry_count());
	tms_delete_pool_shmem_init(tms_lease_entry_count());
	tms_stat_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Define the settings, and when preloaded, shared memory and the launcher.
 */
void
_PG_init(void)
{
	/* before anything parses JSON: jansson's allocators count (io.h) */
	io_init();
	/* io and iceberg allocate in the memory context "tms io" */
	tms_io_memory_init();

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

	DefineCustomIntVariable("tms.stuck_task_age",
							gettext_noop("Time after which a running task shows in tms.stat_stuck_tasks."),
							gettext_noop("A monitoring threshold: the task goes on running."),
							&tms_stuck_task_age_s,
							3600, 1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.task_history_retention",
							gettext_noop("How long tms.task_history keeps the row of a task's run."),
							gettext_noop("Older rows are pruned by the workers; their counts stay in tms.job_stats."),
							&tms_task_history_retention_s,
							14 * 86400, 60, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.task_history_prune_interval",
							gettext_noop("How often the supervisors prune tms.task_history."),
							gettext_noop("Each time a batch of rows older than "
										 "tms.task_history_retention; while batches come "
										 "full, one at every heartbeat."),
							&tms_task_history_prune_interval_ms,
							60 * 1000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.retry_delay",
							gettext_noop("Delay before the first retry of a failed task."),
							gettext_noop("Each further consecutive failure doubles it, up to "
										 "tms.retry_delay_max; a retry waits between half of "
										 "that and all of it (jitter)."),
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

		DefineCustomIntVariable("tms.stat_max_entries",
								gettext_noop("Rows of cumulative statistics tms keeps in shared memory."),
								gettext_noop("One row per task kind, job outcome, purge outcome and "
											 "foreign server of each database; beyond it, new rows "
											 "are counted in one overflow row per area."),
								&tms_stat_max_entries,
								1000, 100, 1000000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
	}

	/*
	 * Superuser-only: whoever may change it could point the database host
	 * anywhere (doc/security.md).  An empty list sets no limit.
	 */
	DefineCustomStringVariable("tms.allowed_hosts",
							   gettext_noop("Hosts, addresses and networks tms may connect to (catalogs, storage, engines, webhooks)."),
							   gettext_noop("A comma-separated list of host names (\"*.example.com\" for every name below "
											"one), IP addresses and CIDR networks, each with an optional \":port\"; "
											"empty: no limit."),
							   &tms_allowed_hosts,
							   "",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   tms_check_allowed_hosts, tms_assign_allowed_hosts, NULL);

	DefineCustomIntVariable("tms.max_response_size",
							gettext_noop("Largest catalog response tms accepts, after decompression."),
							NULL,
							&tms_max_response_size_kb,
							64 * 1024, 1024, INT_MAX / 1024,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tms.max_json_memory",
							gettext_noop("Memory one JSON document (catalog response, table metadata) may take while parsed."),
							NULL,
							&tms_max_json_memory_kb,
							256 * 1024, 1024, INT_MAX / 1024,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	/* each area of src/ops declares its settings and built-in kinds */
	tms_ops_init();

	MarkGUCPrefixReserved("tms");

	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	tms_preloaded = true;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = tms_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = tms_shmem_startup;
	tms_register_launcher();
}
