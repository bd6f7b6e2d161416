/*-------------------------------------------------------------------------
 *
 * delete_sql.c
 *	  SQL views of the delete pool (src/ops/delete_pool.c):
 *	  tms.delete_pool (the processes deleting, their permits) and
 *	  tms.delete_targets (the request window of every storage target).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "bridge/settings.h"
#include "ops/delete.h"

PG_FUNCTION_INFO_V1(tms_delete_pool);
PG_FUNCTION_INFO_V1(tms_delete_targets);

/* A database's name as a Datum of type name; false when it is gone. */
static bool
dbname_datum(Oid dboid, Datum *out)
{
	char	   *dbname = OidIsValid(dboid) ? get_database_name(dboid) : NULL;
	Name		n;

	if (dbname == NULL)
		return false;
	n = (Name) palloc0(NAMEDATALEN);
	namestrcpy(n, dbname);
	*out = NameGetDatum(n);
	return true;
}

/* tms.delete_pool(): one row per process of the pool, from shared memory. */
Datum
tms_delete_pool(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TmsDeleteHolderInfo *h;
	int			n;

	tms_require_preload("tms.delete_pool");
	InitMaterializedSRF(fcinfo, 0);
	n = tms_delete_pool_holders(&h);
	for (int i = 0; i < n; i++)
	{
		Datum		values[7];
		bool		nulls[7];

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(h[i].pid);
		nulls[1] = !dbname_datum(h[i].dboid, &values[1]);
		values[2] = CStringGetTextDatum(h[i].label);
		values[3] = Int32GetDatum(h[i].held);
		values[4] = BoolGetDatum(h[i].waiting);
		if (h[i].waiting)
			values[5] = TimestampTzGetDatum(h[i].wait_since);
		else
			nulls[5] = true;
		values[6] = Int64GetDatum(h[i].requests);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* tms.delete_targets(): one row per storage target, from shared memory. */
Datum
tms_delete_targets(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TmsDeleteTargetInfo *t;
	int			n;

	tms_require_preload("tms.delete_targets");
	InitMaterializedSRF(fcinfo, 0);
	n = tms_delete_pool_targets(&t);
	for (int i = 0; i < n; i++)
	{
		Datum		values[12];
		bool		nulls[12];

		memset(nulls, 0, sizeof(nulls));
		nulls[0] = !dbname_datum(t[i].dboid, &values[0]);
		values[1] = CStringGetTextDatum(t[i].name);
		values[2] = Float8GetDatum(t[i].window);
		values[3] = Int32GetDatum(t[i].allowed);
		values[4] = Int32GetDatum(t[i].in_flight);
		values[5] = Int64GetDatum((int64) t[i].pause_ms);
		values[6] = Int64GetDatum(t[i].requests);
		values[7] = Int64GetDatum(t[i].succeeded);
		values[8] = Int64GetDatum(t[i].throttled);
		values[9] = Int64GetDatum(t[i].decreases);
		values[10] = Int64GetDatum(t[i].retried_keys);
		if (t[i].last_throttled_at != 0)
			values[11] = TimestampTzGetDatum(t[i].last_throttled_at);
		else
			nulls[11] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
