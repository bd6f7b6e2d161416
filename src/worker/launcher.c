/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The tms launcher: keeps one supervisor running per database named in
 *	  tms.database_name.
 *
 * The launcher is the only static background worker of tms.  It connects
 * to no database (it reads only the shared catalog pg_database), resolves
 * the configured names to OIDs, and starts a supervisor for each database
 * that has none, as a dynamic worker whose start and exit set our latch.
 * A supervisor that exits is started again, at most once per second per
 * database so that a supervisor failing at start cannot spin.
 *
 * Whether a supervisor runs is decided from the shared slots, not from the
 * handles we hold: after the launcher itself is restarted it has no
 * handles, but the supervisors it started earlier are still there.
 *
 * On a hot standby the launcher is not started at all
 * (BgWorkerStart_RecoveryFinished); after promotion it starts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "bridge/settings.h"
#include "worker/worker.h"

/* how often the launcher looks at its databases without being woken */
#define LAUNCHER_NAPTIME_MS		1000
/* at most one supervisor start per database in this interval */
#define RESTART_INTERVAL_MS		1000
/* seconds before the postmaster restarts a launcher that exited */
#define LAUNCHER_RESTART_S		5

typedef struct LauncherDb
{
	char	   *name;
	Oid			oid;			/* InvalidOid until resolved */
	bool		missing_reported;
	BackgroundWorkerHandle *handle;
	TimestampTz last_start;
} LauncherDb;

static List *launcher_read_databases(void);
static void launcher_resolve(LauncherDb *db);
static void launcher_ensure_supervisor(LauncherDb *db);

/*
 * Register the launcher; called from _PG_init while preloading.
 */
void
tms_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = LAUNCHER_RESTART_S;
	strlcpy(worker.bgw_library_name, "tms", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "tms_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "tms launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "tms launcher", BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * Entry point of the launcher.
 */
void
tms_launcher_main(Datum main_arg)
{
	List	   *databases;
	ListCell   *lc;

	tms_worker_setup_signals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("tms launcher");

	if (tms_slot_acquire(TMS_ROLE_LAUNCHER, InvalidOid, 0) == NULL)
		proc_exit(0);			/* another launcher is running */

	databases = launcher_read_databases();
	tms_slot_set_state(TMS_STATE_IDLE, NULL);

	for (;;)
	{
		foreach(lc, databases)
		{
			LauncherDb *db = (LauncherDb *) lfirst(lc);

			if (!OidIsValid(db->oid))
				launcher_resolve(db);
			if (OidIsValid(db->oid))
				launcher_ensure_supervisor(db);
		}
		tms_wait(LAUNCHER_NAPTIME_MS, PG_WAIT_EXTENSION);
	}
}

/*
 * Parse tms.database_name into a list of LauncherDb in TopMemoryContext.
 * An unparsable list is reported once and leaves the launcher idle.
 */
static List *
launcher_read_databases(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	char	   *raw = pstrdup(tms_database_name ? tms_database_name : "");
	List	   *names;
	List	   *result = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(raw, ',', &names))
	{
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in parameter \"tms.database_name\""),
				 errdetail("The value is \"%s\".", tms_database_name)));
		names = NIL;
	}
	foreach(lc, names)
	{
		LauncherDb *db = palloc0(sizeof(LauncherDb));

		db->name = pstrdup((char *) lfirst(lc));
		result = lappend(result, db);
	}
	MemoryContextSwitchTo(old);
	return result;
}

/*
 * Look the database up by name; warn once while it does not exist.
 */
static void
launcher_resolve(LauncherDb *db)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	/*
	 * Without a database only the shared catalogs' heaps can be read, not
	 * their indexes, so scan pg_database as the autovacuum launcher does.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	db->oid = InvalidOid;
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tup);

		if (strcmp(NameStr(form->datname), db->name) == 0 &&
			form->datconnlimit != DATCONNLIMIT_INVALID_DB)
		{
			db->oid = form->oid;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();

	if (OidIsValid(db->oid))
		db->missing_reported = false;
	else if (!db->missing_reported)
	{
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_DATABASE),
				 errmsg("database \"%s\" named in \"tms.database_name\" does not exist",
						db->name),
				 errhint("Create the database; tms starts its workers there within a second.")));
		db->missing_reported = true;
	}
}

/*
 * Start a supervisor for db unless one is running or being started.
 */
static void
launcher_ensure_supervisor(LauncherDb *db)
{
	TmsWorkerExtra extra;
	char		name[BGW_MAXLEN];
	pid_t		pid;
	MemoryContext old;

	if (db->handle != NULL)
	{
		if (GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED)
			return;
		pfree(db->handle);
		db->handle = NULL;

		/*
		 * Look the name up again before the restart, in case the database was
		 * dropped (the supervisor could not connect) or re-created.
		 */
		launcher_resolve(db);
		if (!OidIsValid(db->oid))
			return;
	}
	if (tms_slot_in_use(TMS_ROLE_SUPERVISOR, db->oid, 0))
		return;
	if (!TimestampDifferenceExceeds(db->last_start, GetCurrentTimestamp(),
									RESTART_INTERVAL_MS))
		return;

	extra.dboid = db->oid;
	extra.index = 0;
	snprintf(name, sizeof(name), "tms supervisor for database \"%s\"", db->name);
	db->last_start = GetCurrentTimestamp();

	/* the handle outlives this iteration */
	old = MemoryContextSwitchTo(TopMemoryContext);
	(void) tms_start_dynamic_worker("tms_supervisor_main", "tms supervisor",
									name, &extra, &db->handle);
	MemoryContextSwitchTo(old);
}
