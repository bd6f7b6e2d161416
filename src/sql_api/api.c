/*-------------------------------------------------------------------------
 *
 * api.c
 *	  Argument helpers of the SQL functions (api.h), and the one entry
 *	  point of the SQL API functions that act on tms's tables on behalf of
 *	  the acting role (tms_api_call).
 *
 * tms's tables belong to the extension's owner and are not writable by
 * PUBLIC.  A public function such as tms.create_policy(name, ...) is
 * declared LANGUAGE c with symbol tms_api_call; it
 *
 *	1. takes the acting role (tms_acting_role(): the current user, which
 *	   inside a SECURITY DEFINER function is that function's owner, as
 *	   postgres_fdw decides whose user mapping to use);
 *	2. switches to the extension owner;
 *	3. calls tms._create_policy(acting regrole, name, ...), the internal
 *	   function of the same name with a leading underscore and the acting
 *	   role as first argument, which checks that role's privileges and
 *	   does the work;
 *	4. switches back and returns its result (a value, or the rows of a
 *	   set-returning function).
 *
 * The internal functions are revoked from PUBLIC; only the owner (that
 * is, this entry point) calls them.  So no tms function is SECURITY
 * DEFINER, and every one of them records and checks the same role.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "bridge/role.h"
#include "sql_api/api.h"

PG_FUNCTION_INFO_V1(tms_api_call);

char *
tms_arg_text(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

char *
tms_arg_name(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return pstrdup(NameStr(*PG_GETARG_NAME(n)));
}

/* The internal call of a public function, prepared once per backend. */
typedef struct ApiCall
{
	Oid			fn;				/* the public function */
	SPIPlanPtr	plan;
	int			nargs;			/* of the public function */
	Oid			rettype;
	bool		retset;
	int16		typlen;
	bool		typbyval;
} ApiCall;

#define MAX_API_CALLS 64
static ApiCall calls[MAX_API_CALLS];
static int	ncalls = 0;

/* Look up (or prepare) the internal call of function fn. */
static ApiCall *
api_call_for(Oid fn)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	StringInfoData sql;
	Oid		   *types;
	ApiCall    *c;
	SPIPlanPtr	plan;

	for (int i = 0; i < ncalls; i++)
		if (calls[i].fn == fn)
			return &calls[i];
	if (ncalls == MAX_API_CALLS)
	{
		/* functions of an extension dropped and created again: start over */
		for (int i = 0; i < ncalls; i++)
			SPI_freeplan(calls[i].plan);
		ncalls = 0;
	}

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fn);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	c = &calls[ncalls];
	c->fn = fn;
	c->nargs = proc->pronargs;
	c->rettype = proc->prorettype;
	c->retset = proc->proretset;
	types = palloc(sizeof(Oid) * (c->nargs + 1));
	types[0] = REGROLEOID;
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s._%s($1",
					 quote_identifier(get_namespace_name(proc->pronamespace)),
					 NameStr(proc->proname));
	for (int i = 0; i < c->nargs; i++)
	{
		types[i + 1] = proc->proargtypes.values[i];
		appendStringInfo(&sql, ", $%d", i + 2);
	}
	appendStringInfoChar(&sql, ')');
	ReleaseSysCache(tup);
	get_typlenbyval(c->rettype, &c->typlen, &c->typbyval);

	plan = SPI_prepare(sql.data, c->nargs + 1, types);
	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql.data,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep \"%s\"", sql.data);
	c->plan = plan;
	ncalls++;
	return c;
}

Datum
tms_api_call(PG_FUNCTION_ARGS)
{
	Oid			acting = tms_acting_role();
	MemoryContext cxt = CurrentMemoryContext;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ApiCall    *c;
	Datum	   *values;
	char	   *nulls;
	TmsRoleSave save;
	Datum		result = (Datum) 0;
	bool		isnull = true;
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	c = api_call_for(fcinfo->flinfo->fn_oid);
	if (c->retset)
		InitMaterializedSRF(fcinfo, 0);
	values = palloc(sizeof(Datum) * (c->nargs + 1));
	nulls = palloc(c->nargs + 1);
	values[0] = ObjectIdGetDatum(acting);
	nulls[0] = ' ';
	for (int i = 0; i < c->nargs; i++)
	{
		values[i + 1] = PG_GETARG_DATUM(i);
		nulls[i + 1] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	tms_become_extension_owner(&save);
	rc = SPI_execute_plan(c->plan, values, nulls, false, 0);
	tms_restore_role(&save);
	if (rc < 0)
		elog(ERROR, "could not call the internal function of %s: %s",
			 format_procedure(c->fn), SPI_result_code_string(rc));

	if (c->retset)
	{
		MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);

		for (uint64 r = 0; r < SPI_processed; r++)
		{
			Datum	   *row = palloc(sizeof(Datum) * rsinfo->setDesc->natts);
			bool	   *rnull = palloc(sizeof(bool) * rsinfo->setDesc->natts);

			heap_deform_tuple(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, row, rnull);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, rnull);
		}
		MemoryContextSwitchTo(old);
	}
	else if (SPI_processed == 1 && c->rettype != VOIDOID)
	{
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			result = datumCopy(result, c->typbyval, c->typlen);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	if (c->retset)
		return (Datum) 0;
	if (isnull)
		PG_RETURN_NULL();
	return result;
}
