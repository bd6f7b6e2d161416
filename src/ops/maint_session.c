/*-------------------------------------------------------------------------
 *
 * maint_session.c
 *	  What SQL calls in the caller's session: tms.plan_operation (a dry
 *	  run of an operation, its actions returned as rows) and
 *	  tms.run_operation (a job submitted, run later by the "maintenance"
 *	  task kind of maint.c).
 *
 * The table is loaded as the acting role in the caller's transaction.
 * Names and options are checked first: nothing else runs for bad input.
 * A plan writes and deletes nothing (run->dry_run); a submission records
 * the job through tms._submit_operation as the extension's owner, with
 * the acting role as its requester.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "bridge/catalog.h"
#include "bridge/engine_server.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/role.h"
#include "ops/maint.h"
#include "ops/maint_int.h"

/* ----------------------------------------------------------------
 * tms.run_operation and tms.plan_operation
 * ----------------------------------------------------------------
 */

static char *
json_quote(const char *s)
{
	StringInfoData b;

	initStringInfo(&b);
	escape_json(&b, s);
	return b.data;
}

/* Load the table as the acting role in the caller's transaction. */
static void
session_load(MaintRun *run, const char *server, const char *ns, const char *table,
			 const char *what)
{
	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
	run->server_name = pstrdup(server);
	run->ns = pstrdup(ns);
	run->table = pstrdup(table);
	run->ns_io = tms_namespace_to_io(ns);
	run->acting = tms_acting_role();
	run->conn = tms_catalog_connect(server);
	if (!maint_load(run))
	{
		if (run->load_failed)
			tms_error_ereport(&run->load_err);
		if (run->refused_location)
			(void) tms_check_table_location(run->conn->server, ns, table,
											run->refused_location, "maintain");
		ereport(ERROR,
				(errcode(run->result == MAINT_TERMINAL ? ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
						 : ERRCODE_CONNECTION_FAILURE),
				 errmsg("cannot %s on table \"%s.%s\"", what, ns, table),
				 errdetail("%s", run->error)));
	}
	/* a server with no allowed_locations, raised with its own message */
	(void) tms_check_table_location(run->conn->server, ns, table, run->md->location, "maintain");
}

typedef struct PlanRows
{
	Tuplestorestate *ts;
	TupleDesc	desc;
} PlanRows;

static void
plan_row(void *arg, const char *action, const char *target, const char *detail_json)
{
	PlanRows   *p = arg;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(action);
	values[1] = CStringGetTextDatum(target ? target : "");
	if (detail_json)
		values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(detail_json));
	else
		nulls[2] = true;
	tuplestore_putvalues(p->ts, p->desc, values, nulls);
}

void
tms_operation_plan(const char *server, const char *ns, const char *table,
				   const char *operation, Jsonb *options, Tuplestorestate *ts,
				   TupleDesc desc)
{
	MaintRun   *run = palloc0(sizeof(MaintRun));
	PlanRows	rows = {ts, desc};

	run->cxt = CurrentMemoryContext;
	run->qcxt = AllocSetContextCreate(CurrentMemoryContext, "tms plan", ALLOCSET_SMALL_SIZES);
	run->dry_run = true;
	run->emit = plan_row;
	run->emit_arg = &rows;
	run->result = MAINT_OK;
	run->after_snapshot_id = -1;
	maint_options_parse(operation, "local", options, &run->opt);
	PG_TRY();
	{
		session_load(run, server, ns, table, "plan an operation");
		if (run->opt.op == MAINT_ORPHAN)
			maint_orphan_check_table(run);
		if (run->opt.op == MAINT_POSDELETE)
			maint_posdel_check_table(run);
		if (run->opt.op == MAINT_RETENTION)
			maint_retention_check_table(run);
		maint_run_operation(run);
		if (run->result == MAINT_SKIPPED)
			maint_emit(run, "skip", operation,
					   psprintf("{\"reason\": %s}", json_quote(run->error)));
		else if (run->result != MAINT_OK)
			ereport(ERROR,
					(errcode(run->result == MAINT_TERMINAL ? ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
							 : ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("cannot plan %s on table \"%s.%s\"", operation, ns, table),
					 errdetail("%s", run->error)));
	}
	PG_FINALLY();
	{
		maint_unload(run);
	}
	PG_END_TRY();
}

int64
tms_operation_submit(const char *server, const char *ns, const char *table,
					 const char *operation, Jsonb *options, const char *engine)
{
	MaintRun   *run = palloc0(sizeof(MaintRun));
	Oid			types[10] = {OIDOID, NAMEOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
	JSONBOID, TEXTOID, TEXTOID, INT8OID};
	Datum		args[10];
	char		nulls[10];
	TmsRoleSave save;
	int64		id;
	bool		isnull;
	int			rc;
	MemoryContext cxt = CurrentMemoryContext;

	run->cxt = CurrentMemoryContext;
	run->qcxt = AllocSetContextCreate(CurrentMemoryContext, "tms submit", ALLOCSET_SMALL_SIZES);
	run->result = MAINT_OK;

	/* names and options first: nothing else runs for bad input */
	maint_options_parse(operation, engine, options, &run->opt);
	if (run->opt.engine_type != ENGINE_TYPE_UNKNOWN)
		tms_engine_check_access(engine, tms_acting_role());
	memset(nulls, ' ', sizeof(nulls));
	PG_TRY();
	{
		session_load(run, server, ns, table, "run an operation");
		if (run->opt.local && run->opt.op == MAINT_COMPACTION)
			maint_compact_check_table(run);
		if (run->opt.local && run->opt.op == MAINT_POSDELETE)
			maint_posdel_check_table(run);
		if (run->opt.local && run->opt.op == MAINT_ORPHAN)
			maint_orphan_check_table(run);
		if (run->opt.op == MAINT_RETENTION)
			maint_retention_check_table(run);
		args[7] = run->md->table_uuid ? CStringGetTextDatum(run->md->table_uuid) : (Datum) 0;
		nulls[7] = run->md->table_uuid ? ' ' : 'n';
		args[8] = CStringGetTextDatum(run->metadata_location);
		args[9] = Int64GetDatum(run->before_snapshot_id);
		nulls[9] = run->before_snapshot_id >= 0 ? ' ' : 'n';
	}
	PG_FINALLY();
	{
		maint_unload(run);
	}
	PG_END_TRY();

	args[0] = ObjectIdGetDatum(run->acting);
	args[1] = DirectFunctionCall1(namein, CStringGetDatum(server));
	args[2] = CStringGetTextDatum(ns);
	args[3] = CStringGetTextDatum(table);
	args[4] = CStringGetTextDatum(operation);
	args[5] = CStringGetTextDatum(engine);
	args[6] = options ? JsonbPGetDatum(options) :
		DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));
	SPI_connect();
	tms_become_extension_owner(&save);
	rc = SPI_execute_with_args("SELECT tms._submit_operation($1::regrole, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
							   10, types, args, nulls, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not submit maintenance job: %s", SPI_result_code_string(rc));
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	tms_restore_role(&save);
	SPI_finish();
	MemoryContextSwitchTo(cxt);
	return id;
}
