/*-------------------------------------------------------------------------
 *
 * pool.c
 *	  A tms pool worker: claims one task at a time and runs it.
 *
 * Each pass: in one short transaction, claim the best due task (see
 * src/sched/sched.c) and commit; publish the lease so the supervisor keeps
 * its heartbeat; execute and settle it in a second transaction (a detached
 * kind's handler makes its own short transactions instead).  After a
 * task the worker looks for the next one at once; with nothing due it
 * sleeps tms.naptime, or less when tms.schedule_task() wakes it.  It does
 * nothing while tms.enabled is off, while the server is in recovery, or
 * while its database lacks the extension (looked up in the catalog by the
 * first pass after a nap: between tasks run back to back it was there a
 * moment ago, and a claim statement on a dropped extension fails anyway).
 *
 * An error outside a handler (a handler's own errors fail its task) is
 * reported and the pass is abandoned; the worker carries on after a nap.
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
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "bridge/settings.h"
#include "bridge/usercode.h"
#include "sched/lease.h"
#include "sched/sched.h"
#include "worker/worker.h"

typedef struct PoolPass
{
	bool		check_extension;	/* look the extension up first */
	bool		worked;			/* a task was claimed and run */
	bool		no_extension;
} PoolPass;

/*
 * One pass: claim and, if something was claimed, execute.
 */
static void
pool_pass(void *arg)
{
	PoolPass   *pass = (PoolPass *) arg;
	MemoryContext pass_cxt = CurrentMemoryContext;
	SchedTask	task;
	bool		claimed = false;
	char	   *picked_by = psprintf("tms worker %d (pid %d)", MyTmsSlot->index, MyProcPid);
	ErrorData  *error = NULL;
	SchedOutcome outcome;

	pass->worked = false;
	pass->no_extension = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (pass->check_extension && !OidIsValid(get_extension_oid("tms", true)))
	{
		pass->no_extension = true;
		CommitTransactionCommand();
		return;
	}
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "tms: claiming a task");
	/* the claimed task must outlive SPI's context and the transaction */
	MemoryContextSwitchTo(pass_cxt);
	claimed = sched_claim(picked_by, NULL, &task);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	if (!claimed)
		return;

	pass->worked = true;
	sched_lease_publish(&task);
	tms_slot_set_state(TMS_STATE_RUNNING, psprintf("%s/%s", task.kind, task.instance));

	if (sched_kind_detached(task.kind))
	{
		/* its handler makes its own short transactions (sched.c) */
		MemoryContextSwitchTo(pass_cxt);
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("tms: task %s/%s", task.kind, task.instance));
		outcome = sched_execute(&task, &error);
	}
	else
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("tms: task %s/%s", task.kind, task.instance));
		/* the error, if any, must outlive SPI's context */
		MemoryContextSwitchTo(pass_cxt);
		outcome = sched_execute(&task, &error);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	MemoryContextSwitchTo(pass_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);
	sched_lease_clear();

	if (outcome == SCHED_FAILED)
		ereport(LOG,
				(errmsg("task \"%s\" instance \"%s\" failed: %s",
						task.kind, task.instance, error->message),
				 errdetail("It is retried after a backoff (consecutive failures: %d).",
						   task.consecutive_failures + 1)));
}

/*
 * Entry point of a pool worker; bgw_extra holds the database OID and the
 * worker's number.
 */
void
tms_worker_main(Datum main_arg)
{
	TmsWorkerExtra extra;
	char		appname[NAMEDATALEN];
	MemoryContext pass_cxt;
	bool		worked = false;

	memcpy(&extra, MyBgworkerEntry->bgw_extra, sizeof(extra));

	tms_worker_setup_signals();
	BackgroundWorkerInitializeConnectionByOid(extra.dboid, InvalidOid, 0);
	/* tms's statements never depend on a search_path (bridge/usercode.h) */
	tms_pin_search_path();
	snprintf(appname, sizeof(appname), "tms worker %d", extra.index);
	pgstat_report_appname(appname);

	if (tms_slot_acquire(TMS_ROLE_WORKER, extra.dboid, extra.index) == NULL)
		proc_exit(0);			/* this worker number is already running */
	if (!sched_lease_attach())
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no free tms lease entry for worker %d", extra.index)));

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "tms worker pass",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		/*
		 * After a pass that ran a task the extension was there a moment ago:
		 * the next claim follows without looking it up again (a catalog
		 * scan).  Were it dropped meanwhile, the claim statement fails, the
		 * pass is abandoned, and the pass after the nap looks it up.
		 */
		PoolPass	pass = {!worked, false, false};

		if (RecoveryInProgress())
			tms_slot_set_state(TMS_STATE_STANDBY, NULL);
		else if (!tms_enabled)
			tms_slot_set_state(TMS_STATE_DISABLED, NULL);
		else
		{
			MemoryContext old = MemoryContextSwitchTo(pass_cxt);

			tms_slot_set_state(TMS_STATE_IDLE, NULL);
			worked = tms_run_guarded(pool_pass, &pass) && pass.worked;
			sched_lease_clear();
			MemoryContextSwitchTo(old);
			MemoryContextReset(pass_cxt);

			if (pass.no_extension)
				tms_slot_set_state(TMS_STATE_NO_EXTENSION, NULL);
			else
				tms_slot_set_state(TMS_STATE_IDLE, NULL);
			if (pass.worked)
			{
				CHECK_FOR_INTERRUPTS();
				tms_worker_handle_reload();
				continue;		/* look for the next task at once */
			}
		}
		worked = false;
		tms_wait(tms_naptime_ms, PG_WAIT_EXTENSION);
	}
}
