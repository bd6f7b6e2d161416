/*-------------------------------------------------------------------------
 *
 * pool.c
 *	  A tms pool worker: claims one task at a time and runs it.
 *
 * The worker sleeps tms.naptime between polls and wakes early when its
 * latch is set.  It does nothing while tms.enabled is off, while the
 * server is in recovery, or while its database lacks the extension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"

#include "tms.h"
#include "worker/worker.h"

/*
 * Entry point of a pool worker; bgw_extra holds the database OID and the
 * worker's number.
 */
void
tms_worker_main(Datum main_arg)
{
	TmsWorkerExtra extra;
	char		appname[NAMEDATALEN];

	memcpy(&extra, MyBgworkerEntry->bgw_extra, sizeof(extra));

	tms_worker_setup_signals();
	BackgroundWorkerInitializeConnectionByOid(extra.dboid, InvalidOid, 0);
	snprintf(appname, sizeof(appname), "tms worker %d", extra.index);
	pgstat_report_appname(appname);

	if (tms_slot_acquire(TMS_ROLE_WORKER, extra.dboid, extra.index) == NULL)
		proc_exit(0);			/* this worker number is already running */

	for (;;)
	{
		if (RecoveryInProgress())
			tms_slot_set_state(TMS_STATE_STANDBY, NULL);
		else if (!tms_enabled)
			tms_slot_set_state(TMS_STATE_DISABLED, NULL);
		else if (!tms_extension_present())
			tms_slot_set_state(TMS_STATE_NO_EXTENSION, NULL);
		else
			tms_slot_set_state(TMS_STATE_IDLE, NULL);

		tms_wait(tms_naptime_ms, PG_WAIT_EXTENSION);
	}
}
