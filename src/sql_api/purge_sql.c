/*-------------------------------------------------------------------------
 *
 * purge_sql.c
 *	  tms.purge_table(): drop an Iceberg table and have its files deleted
 *	  in the background (src/ops/purge.c); tms.drop_table(): the
 *	  synchronous catalog drop.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "bridge/catalog.h"
#include "bridge/names.h"
#include "ops/purge.h"
#include "sql_api/api.h"

PG_FUNCTION_INFO_V1(tms_purge_table);
PG_FUNCTION_INFO_V1(tms_drop_table);

/*
 * tms.purge_table(server, namespace, table_name, delete_other_tables_files)
 * -> job id.  Records the job in the caller's transaction; a worker drops
 * the table after commit.
 */
Datum
tms_purge_table(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	bool		delete_others = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);

	PG_RETURN_INT64(tms_purge_enqueue(server, ns, table, delete_others));
}

/*
 * tms.drop_table(server, namespace, table_name, purge): the catalog's own
 * drop, now (purge => true: the catalog deletes the files itself).
 */
Datum
tms_drop_table(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	bool		purge = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);

	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
	tms_catalog_drop_table(tms_catalog_connect(server), ns, table, purge);
	PG_RETURN_VOID();
}
