/*-------------------------------------------------------------------------
 *
 * supervisor.c
 *	  The per-database tms supervisor: keeps the pool of workers running.
 *
 * One supervisor runs in each database of tms.database_name.  It starts
 * tms.max_workers pool workers as dynamic background workers that report
 * to it, and starts again any that exits, at most once per second per
 * worker number.  Later parts of tms hang the periodic database-wide duties
 * here (lease renewal, the evaluation cycle); they must stay short and
 * never hold a transaction open across network waits.
 *
 * With tms.enabled = off the supervisor keeps its pool but does no work of
 * its own; on a server in recovery it does nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "commands/dbcommands.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "tms.h"
#include "worker/worker.h"

#define RESTART_INTERVAL_MS		1000

typedef struct PoolMember
{
	BackgroundWorkerHandle *handle;
	TimestampTz last_start;
} PoolMember;

static void supervisor_ensure_pool(PoolMember *pool, const char *dbname);

/*
 * Entry point of a supervisor; bgw_extra holds the database OID.
 */
void
tms_supervisor_main(Datum main_arg)
{
	TmsWorkerExtra extra;
	PoolMember *pool;
	char	   *dbname;

	memcpy(&extra, MyBgworkerEntry->bgw_extra, sizeof(extra));

	tms_worker_setup_signals();
	BackgroundWorkerInitializeConnectionByOid(extra.dboid, InvalidOid, 0);
	pgstat_report_appname("tms supervisor");

	if (tms_slot_acquire(TMS_ROLE_SUPERVISOR, extra.dboid, 0) == NULL)
		proc_exit(0);			/* a supervisor for this database runs */

	StartTransactionCommand();
	dbname = MemoryContextStrdup(TopMemoryContext,
								 get_database_name(extra.dboid));
	CommitTransactionCommand();
	pool = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(PoolMember) * Max(tms_max_workers, 1));

	for (;;)
	{
		if (RecoveryInProgress())
			tms_slot_set_state(TMS_STATE_STANDBY, NULL);
		else
		{
			supervisor_ensure_pool(pool, dbname);
			if (!tms_enabled)
				tms_slot_set_state(TMS_STATE_DISABLED, NULL);
			else if (!tms_extension_present())
				tms_slot_set_state(TMS_STATE_NO_EXTENSION, NULL);
			else
				tms_slot_set_state(TMS_STATE_IDLE, NULL);
		}
		tms_wait(Min(tms_naptime_ms, 1000), PG_WAIT_EXTENSION);
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
