/*-------------------------------------------------------------------------
 *
 * supervisor.c
 *	  The per-database tms supervisor: keeps the pool of workers running.
 *
 * One supervisor runs in each database of tms.database_name.  It starts
 * tms.max_workers pool workers as dynamic background workers that report
 * to it, and starts again any that exits, at most once per second per
 * worker number.
 *
 * Every tms.heartbeat_interval it renews the heartbeat of each lease held
 * by the workers and run_pending sessions of its database, and releases
 * dead leases (src/sched/lease.h, sched.c).  These duties go on with
 * tms.enabled = off, so that the tasks running when it was turned off keep
 * their leases; on a server in recovery the supervisor does nothing.
 *
 * That is all it does: leases, dead-lease recovery, the pool, and the
 * pruning of the run history.  Policy evaluation and every other piece of
 * work are tasks run by the pool, so no catalog, storage or engine can
 * delay a heartbeat.  Its transaction per interval is bounded too:
 * lock_timeout and statement_timeout are set for it, so a lock held
 * elsewhere on the scheduler's tables delays one round, never the next.
 * A batch of the history's pruning, when one is due, runs after it in a
 * transaction of its own, bounded the same way: its failure or its length
 * never rolls back or holds up a heartbeat.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "commands/dbcommands.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bridge/settings.h"
#include "bridge/usercode.h"
#include "sched/lease.h"
#include "sched/sched.h"
#include "utils/guc.h"
#include "worker/worker.h"

#define RESTART_INTERVAL_MS		1000

typedef struct PoolMember
{
	BackgroundWorkerHandle *handle;
	TimestampTz last_start;
} PoolMember;

static void supervisor_ensure_pool(PoolMember *pool, const char *dbname);
static void supervisor_beat(void *arg);
static void supervisor_chore(void *arg);

/*
 * Bound the current transaction: at most half a heartbeat interval
 * waiting for a lock or a statement.
 */
static void
bound_transaction(void)
{
	char	   *limit = psprintf("%d", Max(tms_heartbeat_interval_ms / 2, 50));

	(void) set_config_option("lock_timeout", limit, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	(void) set_config_option("statement_timeout", limit, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * Renew heartbeats and release dead leases, in one short transaction.
 */
static void
supervisor_beat(void *arg)
{
	bool	   *no_extension = (bool *) arg;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	*no_extension = !OidIsValid(get_extension_oid("tms", true));
	if (!*no_extension)
	{
		bound_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "tms: renewing heartbeats");
		(void) sched_renew_heartbeats();
		sched_maintain();
		SPI_finish();
		PopActiveSnapshot();
	}
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Housekeeping after the beat: a batch of the run history pruned if one is
 * due (sched_prune_history), then the kinds' sweeps (sched_run_sweeps),
 * each in a bounded transaction of its own, so that one failing does not
 * undo the other.  arg: the SupervisorChore to run.
 */
typedef enum SupervisorChore
{
	CHORE_PRUNE,
	CHORE_SWEEP
} SupervisorChore;

static void
supervisor_chore(void *arg)
{
	SupervisorChore chore = *(SupervisorChore *) arg;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (OidIsValid(get_extension_oid("tms", true)))
	{
		bound_transaction();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (chore == CHORE_PRUNE)
		{
			pgstat_report_activity(STATE_RUNNING, "tms: pruning the task history");
			(void) sched_prune_history();
		}
		else
		{
			pgstat_report_activity(STATE_RUNNING, "tms: sweeping what tasks left behind");
			sched_run_sweeps();
		}
		SPI_finish();
		PopActiveSnapshot();
	}
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Entry point of a supervisor; bgw_extra holds the database OID.
 */
void
tms_supervisor_main(Datum main_arg)
{
	TmsWorkerExtra extra;
	PoolMember *pool;
	char	   *dbname;
	MemoryContext beat_cxt;
	TimestampTz next_beat = 0;
	bool		no_extension = true;

	memcpy(&extra, MyBgworkerEntry->bgw_extra, sizeof(extra));

	tms_worker_setup_signals();
	BackgroundWorkerInitializeConnectionByOid(extra.dboid, InvalidOid, 0);
	/* tms's statements never depend on a search_path (bridge/usercode.h) */
	tms_pin_search_path();
	pgstat_report_appname("tms supervisor");

	if (tms_slot_acquire(TMS_ROLE_SUPERVISOR, extra.dboid, 0) == NULL)
		proc_exit(0);			/* a supervisor for this database runs */

	StartTransactionCommand();
	dbname = MemoryContextStrdup(TopMemoryContext,
								 get_database_name(extra.dboid));
	CommitTransactionCommand();
	pool = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(PoolMember) * Max(tms_max_workers, 1));

	beat_cxt = AllocSetContextCreate(TopMemoryContext, "tms supervisor beat",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		timeout = Min(tms_naptime_ms, 1000);

		if (RecoveryInProgress())
			tms_slot_set_state(TMS_STATE_STANDBY, NULL);
		else
		{
			TimestampTz now = GetCurrentTimestamp();

			supervisor_ensure_pool(pool, dbname);
			if (now >= next_beat || no_extension)
			{
				MemoryContext old = MemoryContextSwitchTo(beat_cxt);

				(void) tms_run_guarded(supervisor_beat, &no_extension);
				if (!no_extension && sched_history_prune_due())
				{
					SupervisorChore prune = CHORE_PRUNE;
					SupervisorChore sweep = CHORE_SWEEP;

					(void) tms_run_guarded(supervisor_chore, &prune);
					(void) tms_run_guarded(supervisor_chore, &sweep);
				}
				MemoryContextSwitchTo(old);
				MemoryContextReset(beat_cxt);
				next_beat = TimestampTzPlusMilliseconds(now, tms_heartbeat_interval_ms);
			}
			if (no_extension)
				tms_slot_set_state(TMS_STATE_NO_EXTENSION, NULL);
			else if (!tms_enabled)
				tms_slot_set_state(TMS_STATE_DISABLED, NULL);
			else
				tms_slot_set_state(TMS_STATE_IDLE, NULL);
			timeout = Min(timeout, Max(1, (next_beat - now) / 1000));
		}
		tms_wait(timeout, PG_WAIT_EXTENSION);
	}
}

/*
 * Start every pool worker that is neither running nor being started.
 */
static void
supervisor_ensure_pool(PoolMember *pool, const char *dbname)
{
	for (int i = 0; i < tms_max_workers; i++)
	{
		PoolMember *m = &pool[i];
		TmsWorkerExtra extra;
		char		name[BGW_MAXLEN];
		pid_t		pid;
		MemoryContext old;

		if (m->handle != NULL)
		{
			if (GetBackgroundWorkerPid(m->handle, &pid) != BGWH_STOPPED)
				continue;
			pfree(m->handle);
			m->handle = NULL;
		}
		if (tms_slot_in_use(TMS_ROLE_WORKER, MyDatabaseId, i))
			continue;
		if (!TimestampDifferenceExceeds(m->last_start, GetCurrentTimestamp(),
										RESTART_INTERVAL_MS))
			continue;

		extra.dboid = MyDatabaseId;
		extra.index = i;
		snprintf(name, sizeof(name), "tms worker %d for database \"%s\"",
				 i, dbname);
		m->last_start = GetCurrentTimestamp();

		old = MemoryContextSwitchTo(TopMemoryContext);
		(void) tms_start_dynamic_worker("tms_worker_main", "tms worker",
										name, &extra, &m->handle);
		MemoryContextSwitchTo(old);
	}
}
