/*-------------------------------------------------------------------------
 *
 * worker_base.c
 *	  What the launcher, the supervisors and the pool workers share: signal
 *	  set-up, the wait primitive, configuration reload, starting a dynamic
 *	  background worker, and the "is the extension installed" check.
 *
 * Signals follow src/test/modules/worker_spi: SIGTERM is die(), which sets
 * ProcDiePending and the latch, so a process waiting in tms_wait() wakes at
 * once and exits at the CHECK_FOR_INTERRUPTS() that follows; SIGHUP sets
 * ConfigReloadPending.  Postmaster death ends every wait
 * (WL_EXIT_ON_PM_DEATH).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "bridge/settings.h"
#include "worker/worker.h"

/*
 * Install the standard handlers and unblock signals; call first thing in
 * every entry point.
 */
void
tms_worker_setup_signals(void)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
}

/*
 * Re-read the configuration file if a SIGHUP arrived.
 */
void
tms_worker_handle_reload(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * Sleep until the latch is set or timeout_ms passes, then service
 * interrupts and reloads.  Returns the WaitLatch result.  Exits the process
 * on SIGTERM (through CHECK_FOR_INTERRUPTS) and on postmaster death.
 */
int
tms_wait(long timeout_ms, uint32 wait_event_info)
{
	int			rc;

	rc = WaitLatch(MyLatch,
				   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   timeout_ms, wait_event_info);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	tms_worker_handle_reload();
	return rc;
}

/*
 * Is "tms" installed in the database this process is connected to?  Runs
 * its own short transaction; the caller must not be in one.
 */
bool
tms_extension_present(void)
{
	bool		present;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	present = OidIsValid(get_extension_oid("tms", true));
	CommitTransactionCommand();
	return present;
}

/*
 * Register a dynamic background worker of this library that reports its
 * start and stop to the calling process (bgw_notify_pid), so that the
 * caller's latch is set when it needs attention.  Returns false, after a
 * WARNING, when no background worker slot is free.
 */
bool
tms_start_dynamic_worker(const char *function_name, const char *type,
						 const char *name, const TmsWorkerExtra *extra,
						 BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "tms", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, function_name, BGW_MAXLEN);
	strlcpy(worker.bgw_type, type, BGW_MAXLEN);
	strlcpy(worker.bgw_name, name, BGW_MAXLEN);
	StaticAssertStmt(sizeof(TmsWorkerExtra) <= BGW_EXTRALEN,
					 "TmsWorkerExtra does not fit in bgw_extra");
	memcpy(worker.bgw_extra, extra, sizeof(TmsWorkerExtra));
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, handle))
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start background process \"%s\"", name),
				 errdetail("No background worker slot is free."),
				 errhint("You might need to increase \"max_worker_processes\".")));
		*handle = NULL;
		return false;
	}
	return true;
}

/*
 * Run fn(arg) and recover from an error it raises, as a backend recovers
 * between queries: report it, abort the transaction, forget the error.
 * Returns false if fn raised an error.  FATAL errors (SIGTERM) still end
 * the process.  Memory allocated by fn in the caller's context stays; the
 * caller resets its loop context.
 */
bool
tms_run_guarded(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		/* SPI and snapshots are cleaned up by the abort */
		MemoryContextSwitchTo(cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}
