/*-------------------------------------------------------------------------
 *
 * usercode.c
 *	  Running user code, and tms's own SQL, so that neither can change
 *	  what the other runs (usercode.h).
 *
 * tms_call_procedure_as_owner() follows what ExecuteCallStmt() does for an
 * atomic CALL (a CallContext, the EXECUTE check, strictness, function
 * usage statistics) around the identity and GUC switches of VACUUM's
 * vacuum_rel() and of RefreshMatViewByOid().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "bridge/usercode.h"

/* the most arguments a procedure tms calls takes */
#define USERCODE_MAX_ARGS 4

Oid
tms_procedure_owner(Oid proc, const char *what)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("the procedure of %s no longer exists", what),
				 errdetail("The procedure with OID %u was dropped.", proc)));
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
}

void
tms_call_procedure_as_owner(Oid proc, const char *what, int nargs, Datum *args,
							bool *nulls)
{
	Oid			owner = tms_procedure_owner(proc, what);
	FmgrInfo	flinfo;

	LOCAL_FCINFO(fcinfo, USERCODE_MAX_ARGS);
	CallContext *callcontext;
	PgStat_FunctionCallUsage fcusage;
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	AclResult	aclresult;
	bool		call = true;

	if (nargs > USERCODE_MAX_ARGS)
		elog(ERROR, "a procedure tms calls takes at most %d arguments", USERCODE_MAX_ARGS);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the owner of the procedure of %s no longer exists", what),
				 errdetail("The role with OID %u was dropped.", owner)));

	/*
	 * As the owner, restricted, in a GUC nest level of its own: what
	 * vacuum_rel() does around the index and expression functions it runs.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	/* the search_path a new session would have, not tms's own (usercode.h) */
	(void) set_config_option("search_path", GetConfigOptionResetString("search_path"),
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	aclresult = pg_proc_aclcheck(proc, owner, ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_PROCEDURE, get_func_name(proc));
	InvokeFunctionExecuteHook(proc);

	/* by OID, through fmgr, as ExecuteCallStmt() calls it in an atomic CALL */
	fmgr_info(proc, &flinfo);
	callcontext = makeNode(CallContext);
	callcontext->atomic = true;
	InitFunctionCallInfoData(*fcinfo, &flinfo, nargs, InvalidOid,
							 (Node *) callcontext, NULL);
	for (int i = 0; i < nargs; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = nulls[i];
		if (nulls[i] && flinfo.fn_strict)
			call = false;		/* a strict procedure is not called on a NULL */
	}
	if (call)
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_init_function_usage(fcinfo, &fcusage);
		(void) FunctionCallInvoke(fcinfo);
		pgstat_end_function_usage(&fcusage, true);
		PopActiveSnapshot();
	}

	/* nothing the procedure set survives it, SET and set_config() included */
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

void
tms_pin_search_path(void)
{
	SetConfigOption("search_path", TMS_SAFE_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION);
}

int
tms_push_safe_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", TMS_SAFE_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

void
tms_pop_search_path(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}
