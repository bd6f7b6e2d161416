/*-------------------------------------------------------------------------
 *
 * maint_sql.c
 *	  tms.run_operation(), tms.plan_operation(), tms.engine_statement(),
 *	  tms.delete_rows() and tms._check_operation(): maintenance operations
 *	  on demand (src/ops/maint.c, src/ops/maint_on_engine.c,
 *	  src/ops/maint_retention.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "ops/maint.h"
#include "sql_api/api.h"

PG_FUNCTION_INFO_V1(tms_run_operation);
PG_FUNCTION_INFO_V1(tms_plan_operation);
PG_FUNCTION_INFO_V1(tms_delete_rows);
PG_FUNCTION_INFO_V1(tms_check_operation);
PG_FUNCTION_INFO_V1(tms_engine_statement_sql);

/*
 * tms.run_operation(server, namespace, table_name, operation, options,
 * engine) -> job id
 */
Datum
tms_run_operation(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *operation = tms_arg_text(fcinfo, 3, "operation");
	Jsonb	   *options = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);
	char	   *engine = tms_arg_text(fcinfo, 5, "engine");

	PG_RETURN_INT64(tms_operation_submit(server, ns, table, operation, options, engine));
}

/*
 * tms.delete_rows(server, namespace, table_name, where, options) -> job id
 */
Datum
tms_delete_rows(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *where = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));
	Jsonb	   *options = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);

	PG_RETURN_INT64(tms_delete_rows_submit(server, ns, table, where, options));
}

/*
 * tms.plan_operation(server, namespace, table_name, operation, options)
 * -> setof (action, target, detail)
 */
Datum
tms_plan_operation(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *operation = tms_arg_text(fcinfo, 3, "operation");
	Jsonb	   *options = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);

	InitMaterializedSRF(fcinfo, 0);
	tms_operation_plan(server, ns, table, operation, options,
					   rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

/* tms._check_operation(operation, engine, options): raise unless valid */
Datum
tms_check_operation(PG_FUNCTION_ARGS)
{
	char	   *operation = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *engine = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	Jsonb	   *options = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);

	tms_operation_check(operation, engine, options);
	PG_RETURN_VOID();
}

/*
 * tms.engine_statement(engine, namespace, table_name, operation, options)
 * -> text
 */
Datum
tms_engine_statement_sql(PG_FUNCTION_ARGS)
{
	char	   *engine = tms_arg_text(fcinfo, 0, "engine");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *operation = tms_arg_text(fcinfo, 3, "operation");
	Jsonb	   *options = PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4);

	PG_RETURN_TEXT_P(cstring_to_text(tms_engine_statement(engine, ns, table, operation, options)));
}
