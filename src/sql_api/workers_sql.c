/*-------------------------------------------------------------------------
 *
 * workers_sql.c
 *	  SQL view of the tms processes: tms.workers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "bridge/settings.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(tms_workers);

#define TMS_WORKERS_COLS 8

/*
 * tms.workers(): one row per running tms process, read from shared memory.
 * Each slot is copied under its spinlock, so a row is consistent; rows of
 * different slots may be from slightly different instants.
 */
Datum
tms_workers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	tms_require_preload("tms.workers");
	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < TmsSharedState->nslots; i++)
	{
		TmsSlot		copy;
		TmsSlot    *slot = &TmsSharedState->slots[i];
		Datum		values[TMS_WORKERS_COLS];
		bool		nulls[TMS_WORKERS_COLS];
		char	   *dbname;

		SpinLockAcquire(&slot->mutex);
		memcpy(&copy, slot, sizeof(copy));
		SpinLockRelease(&slot->mutex);

		if (copy.role == TMS_ROLE_NONE)
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(copy.pid);
		values[1] = CStringGetTextDatum(tms_role_name(copy.role));
		dbname = OidIsValid(copy.dboid) ? get_database_name(copy.dboid) : NULL;
		if (dbname)
		{
			Name		n = (Name) palloc0(NAMEDATALEN);

			namestrcpy(n, dbname);
			values[2] = NameGetDatum(n);
		}
		else
			nulls[2] = true;
		if (copy.role == TMS_ROLE_WORKER)
			values[3] = Int32GetDatum(copy.index);
		else
			nulls[3] = true;
		values[4] = CStringGetTextDatum(tms_state_name(copy.state));
		copy.task[TMS_TASK_DESC_LEN - 1] = '\0';
		if (copy.task[0] != '\0')
			values[5] = CStringGetTextDatum(copy.task);
		else
			nulls[5] = true;
		values[6] = TimestampTzGetDatum(copy.started_at);
		values[7] = TimestampTzGetDatum(copy.state_since);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
