/*-------------------------------------------------------------------------
 *
 * stats_sql.c
 *	  SQL functions over the cumulative statistics of src/observe/stats.c:
 *	  the rows the tms.stat_* views unpack, tms.stat_reset(), and the
 *	  count of a maintenance job's end (tms._job_ended calls it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "observe/stats.h"

PG_FUNCTION_INFO_V1(tms_stat_counters_sql);
PG_FUNCTION_INFO_V1(tms_stat_reset_sql);
PG_FUNCTION_INFO_V1(tms_stat_count_job_sql);

/* The area an argument names, or an error listing the names. */
static int
area_arg(text * t)
{
	char	   *name = text_to_cstring(t);
	int			area = tms_stat_area_by_name(name);

	if (area < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown statistics area \"%s\"", name),
				 errhint("The areas are tasks, maintenance, purges and requests.")));
	return area;
}

/*
 * tms._stat_counters(area) -> (dbid, label1, label2, label3, counters
 * bigint[], stats_reset): the rows of an area of every database, counters
 * in the order of stats.h.
 */
Datum
tms_stat_counters_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			area = area_arg(PG_GETARG_TEXT_PP(0));
	TmsStatRow *rows;
	int			n;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	n = tms_stat_rows(area, &rows);
	for (int i = 0; i < n; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		Datum		counters[TMS_STAT_NCOUNTERS];

		values[0] = ObjectIdGetDatum(rows[i].dboid);
		for (int l = 0; l < TMS_STAT_NLABELS; l++)
			values[1 + l] = CStringGetTextDatum(rows[i].labels[l]);
		for (int c = 0; c < TMS_STAT_NCOUNTERS; c++)
			counters[c] = Int64GetDatum(rows[i].counters[c]);
		values[4] = PointerGetDatum(construct_array(counters, TMS_STAT_NCOUNTERS, INT8OID,
													8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[5] = TimestampTzGetDatum(rows[i].reset);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * tms.stat_reset(area DEFAULT NULL): zero the counters of an area (NULL:
 * every area) of this database, and the overflow rows.  Revoked from
 * PUBLIC, as pg_stat_reset() is.
 */
Datum
tms_stat_reset_sql(PG_FUNCTION_ARGS)
{
	int			area = PG_ARGISNULL(0) ? -1 : area_arg(PG_GETARG_TEXT_PP(0));

	tms_stat_reset(area, MyDatabaseId);
	PG_RETURN_VOID();
}

/*
 * tms._stat_count_job(operation, engine, outcome, duration_us, files,
 * bytes): count a maintenance job that ended, by the calling transaction.
 */
Datum
tms_stat_count_job_sql(PG_FUNCTION_ARGS)
{
	int64		delta[TMS_STAT_JOB_BYTES + 1];

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			PG_RETURN_VOID();
	delta[TMS_STAT_JOB_ENDED] = 1;
	delta[TMS_STAT_JOB_DURATION_US] = PG_GETARG_INT64(3);
	delta[TMS_STAT_JOB_FILES] = PG_GETARG_INT64(4);
	delta[TMS_STAT_JOB_BYTES] = PG_GETARG_INT64(5);
	tms_stat_add(TMS_STAT_JOBS, text_to_cstring(PG_GETARG_TEXT_PP(0)),
				 text_to_cstring(PG_GETARG_TEXT_PP(1)),
				 text_to_cstring(PG_GETARG_TEXT_PP(2)), delta, lengthof(delta));
	PG_RETURN_VOID();
}
