/*-------------------------------------------------------------------------
 *
 * sched_sql.c
 *	  SQL functions of the scheduler core: task kinds, scheduling, and the
 *	  claim-execute loop for sessions (CALL tms.run_pending / run_task).
 *
 * run_pending and run_task are procedures that commit as they go, like a
 * PL/pgSQL procedure with COMMIT: the claim commits before the handler
 * runs, and each task's outcome commits before the next claim.  They must
 * therefore be called on their own, not inside a transaction block; pg_cron
 * calls them that way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bridge/settings.h"
#include "sched/lease.h"
#include "sched/sched.h"
#include "worker/worker.h"

PG_FUNCTION_INFO_V1(tms_register_task_kind);
PG_FUNCTION_INFO_V1(tms_unregister_task_kind);
PG_FUNCTION_INFO_V1(tms_schedule_task);
PG_FUNCTION_INFO_V1(tms_cancel_task);
PG_FUNCTION_INFO_V1(tms_run_pending);
PG_FUNCTION_INFO_V1(tms_run_task);
PG_FUNCTION_INFO_V1(tms_wake_at_commit);

static bool wake_registered = false;
static bool wake_pending = false;

/*
 * At commit of a transaction that scheduled due work, wake the idle pool
 * workers of this database so they claim it without waiting a naptime.
 */
static void
wake_at_commit(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && wake_pending)
		tms_wake_workers(MyDatabaseId);
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		wake_pending = false;
}

static void
request_wake(void)
{
	if (!tms_preloaded)
		return;
	if (!wake_registered)
	{
		RegisterXactCallback(wake_at_commit, NULL);
		wake_registered = true;
	}
	wake_pending = true;
}

/*
 * tms._wake_at_commit(): for the SQL that enqueues due tasks itself (commit
 * events, the crontab expansion).
 */
Datum
tms_wake_at_commit(PG_FUNCTION_ARGS)
{
	request_wake();
	PG_RETURN_VOID();
}

static void
check_kind_name(const char *kind)
{
	int			len = strlen(kind);
	bool		ok = len > 0 && len < SCHED_KIND_LEN && kind[0] >= 'a' && kind[0] <= 'z';

	for (int i = 0; ok && i < len; i++)
		ok = (kind[i] >= 'a' && kind[i] <= 'z') || (kind[i] >= '0' && kind[i] <= '9') ||
			kind[i] == '-' || kind[i] == '_';
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid task kind name \"%s\"", kind),
				 errdetail("A kind name is 1 to %d lowercase letters, digits, \"-\" or \"_\", "
						   "starting with a letter.", SCHED_KIND_LEN - 1)));
}

/*
 * The handler must be a procedure taking (text, jsonb).
 */
static void
check_handler(Oid handler)
{
	HeapTuple	tup;
	Form_pg_proc proc;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("procedure with OID %u does not exist", handler)));
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prokind != PROKIND_PROCEDURE)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a procedure", format_procedure(handler)),
				 errhint("A task handler is created with CREATE PROCEDURE name(task_instance text, task_data jsonb).")));
	}
	if (proc->pronargs != 2 || proc->proargtypes.values[0] != TEXTOID ||
		proc->proargtypes.values[1] != JSONBOID)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("task handler %s must take (text, jsonb)", format_procedure(handler)),
				 errdetail("It is called as handler(task_instance, task_data).")));
	}
	ReleaseSysCache(tup);
}

static void
spi_exec(const char *sql, int nargs, Oid *types, Datum *args, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, args, NULL, false, 0);

	if (rc != expect)
		elog(ERROR, "unexpected SPI result %s for: %s", SPI_result_code_string(rc), sql);
}

/*
 * tms.register_task_kind(kind, handler, max_concurrency): superusers only
 * (a kind's cap is shared by every user).  The handler is recorded by its
 * schema-qualified signature and looked up by it at every claim; it runs
 * as the role that owns the procedure then (src/sched/sched.c).
 */
Datum
tms_register_task_kind(PG_FUNCTION_ARGS)
{
	char	   *kind = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			handler = PG_GETARG_OID(1);
	int32		cap = PG_GETARG_INT32(2);
	Oid			types[3] = {TEXTOID, REGPROCEDUREOID, INT4OID};
	Datum		args[3];

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to register task kind \"%s\"", kind),
				 errdetail("Task kinds and their caps are shared by every user; only superusers may register them.")));
	check_kind_name(kind);
	check_handler(handler);
	if (cap < 1 || cap > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_concurrency must be between 1 and 1000"),
				 errdetail("The value given is %d.", cap)));

	args[0] = CStringGetTextDatum(kind);
	args[1] = ObjectIdGetDatum(handler);
	args[2] = Int32GetDatum(cap);

	SPI_connect();
	spi_exec("SELECT 1 FROM tms.task_kinds WHERE kind = $1 AND builtin",
			 1, types, args, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot redefine built-in task kind \"%s\"", kind),
				 errhint("Its concurrency follows the tms.*_concurrency settings.")));
	spi_exec("INSERT INTO tms.task_kinds (kind, handler, max_concurrency)"
			 " VALUES ($1, tms._procedure_signature($2), $3)"
			 " ON CONFLICT (kind) DO UPDATE"
			 " SET handler = EXCLUDED.handler,"
			 "     max_concurrency = EXCLUDED.max_concurrency,"
			 "     registered_by = current_user, registered_at = now()",
			 3, types, args, SPI_OK_INSERT);
	spi_exec("INSERT INTO tms.task_slots (kind, slot)"
			 " SELECT $1, g FROM generate_series(1, $3) g"
			 " ON CONFLICT DO NOTHING",
			 3, types, args, SPI_OK_INSERT);
	/* slots above a lowered cap go now if free, else when released */
	spi_exec("DELETE FROM tms.task_slots"
			 " WHERE kind = $1 AND slot > $3 AND task_instance IS NULL",
			 3, types, args, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * tms.unregister_task_kind(kind): drops the kind and its waiting tasks;
 * refused while one of its tasks runs.
 */
Datum
tms_unregister_task_kind(PG_FUNCTION_ARGS)
{
	char	   *kind = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			types[1] = {TEXTOID};
	Datum		args[1];

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to unregister task kind \"%s\"", kind)));
	args[0] = CStringGetTextDatum(kind);

	SPI_connect();
	spi_exec("SELECT builtin FROM tms.task_kinds WHERE kind = $1 FOR UPDATE",
			 1, types, args, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task kind \"%s\" does not exist", kind)));
	if (strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), "t") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot unregister built-in task kind \"%s\"", kind)));
	spi_exec("SELECT 1 FROM tms.scheduled_tasks WHERE task_name = $1 AND picked FOR UPDATE",
			 1, types, args, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot unregister task kind \"%s\" while %d of its tasks run",
						kind, (int) SPI_processed),
				 errhint("Retry when they have finished.")));
	spi_exec("DELETE FROM tms.scheduled_tasks WHERE task_name = $1",
			 1, types, args, SPI_OK_DELETE);
	spi_exec("DELETE FROM tms.task_kinds WHERE kind = $1",
			 1, types, args, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * tms.schedule_task(kind, instance, data, run_at, priority): insert the
 * task, or give an existing one new data, due time and priority.  A running
 * task is not disturbed: the new due time becomes its next run.
 */
Datum
tms_schedule_task(PG_FUNCTION_ARGS)
{
	Oid			types[5] = {TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	char	   *kind;
	int			rc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("task kind and instance must not be null")));
	kind = text_to_cstring(PG_GETARG_TEXT_PP(0));
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	if (PG_ARGISNULL(2))
		nulls[2] = 'n';
	else
		args[2] = PG_GETARG_DATUM(2);
	args[3] = PG_ARGISNULL(3) ? TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())
		: PG_GETARG_DATUM(3);
	args[4] = PG_ARGISNULL(4) ? Int32GetDatum(0) : PG_GETARG_DATUM(4);

	SPI_connect();
	rc = SPI_execute_with_args("SELECT 1 FROM tms.task_kinds WHERE kind = $1",
							   1, types, args, nulls, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up task kind: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task kind \"%s\" does not exist", kind),
				 errhint("Register it with tms.register_task_kind().")));
	rc = SPI_execute_with_args(
							   "INSERT INTO tms.scheduled_tasks"
							   "  (task_name, task_instance, task_data, execution_time, priority)"
							   " VALUES ($1, $2, $3, $4, $5)"
							   " ON CONFLICT (task_name, task_instance) DO UPDATE"
							   " SET task_data = EXCLUDED.task_data,"
							   "     execution_time = EXCLUDED.execution_time,"
							   "     priority = EXCLUDED.priority,"
							   "     version = CASE WHEN scheduled_tasks.picked THEN scheduled_tasks.version"
							   "                    ELSE scheduled_tasks.version + 1 END",
							   5, types, args, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not schedule task: %s", SPI_result_code_string(rc));
	SPI_finish();

	if (DatumGetTimestampTz(args[3]) <= GetCurrentTimestamp())
		request_wake();
	PG_RETURN_VOID();
}

/*
 * tms.cancel_task(kind, instance): delete a waiting task.  Returns false if
 * there is none; refused while it runs.
 *
 * The row is locked whatever its state, and "picked" read from the locked
 * row: a claim in flight holds the row lock until it commits, so the
 * cancel waits for it and then sees the row picked.  (Filtering on picked
 * before locking would read the row unpicked from the snapshot, skip the
 * lock, and let the DELETE, rechecking only the key after the claim
 * committed, delete a task just claimed: its run would lose its lease.)
 */
Datum
tms_cancel_task(PG_FUNCTION_ARGS)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	bool		isnull;
	bool		deleted;

	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	SPI_connect();
	spi_exec("SELECT picked, picked_by FROM tms.scheduled_tasks"
			 " WHERE task_name = $1 AND task_instance = $2 FOR UPDATE",
			 2, types, args, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
								   &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot cancel task \"%s\" instance \"%s\" while it runs",
						TextDatumGetCString(args[0]), TextDatumGetCString(args[1])),
				 errdetail("It is being executed by %s.",
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2))));
	spi_exec("DELETE FROM tms.scheduled_tasks WHERE task_name = $1 AND task_instance = $2",
			 2, types, args, SPI_OK_DELETE);
	deleted = SPI_processed > 0;
	SPI_finish();
	PG_RETURN_BOOL(deleted);
}

/*
 * Refuse to run inside a transaction block: the procedures commit.
 */
static void
require_nonatomic(FunctionCallInfo fcinfo, const char *name)
{
	CallContext *ctx = (CallContext *) fcinfo->context;

	if (ctx == NULL || !IsA(ctx, CallContext) || ctx->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("%s cannot run inside a transaction block", name),
				 errdetail("It commits after each claim and each task."),
				 errhint("Call it on its own (CALL %s(...)), as pg_cron does.", name)));
}

/*
 * Take a lease entry, when preloaded, so the supervisor renews our
 * leases and recovery knows them live; without one (no preloading, or all
 * entries busy) a task must finish within the dead-lease age.
 */
static void
session_lease_attach(void)
{
	(void) sched_lease_attach();
}

static char *
claimant_name(void)
{
	return psprintf("session (pid %d)", MyProcPid);
}

/*
 * Build the (executed, failed) result row of the procedures.
 */
static Datum
counts_result(FunctionCallInfo fcinfo, int executed, int failed)
{
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int32GetDatum(executed);
	values[1] = Int32GetDatum(failed);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

/*
 * CALL tms.run_pending(max_tasks, kinds): claim and run up to max_tasks due
 * tasks (of the given kinds), each in its own transactions.  Returns how
 * many were executed and how many of those failed.
 */
Datum
tms_run_pending(PG_FUNCTION_ARGS)
{
	int32		max_tasks = PG_ARGISNULL(0) ? 100 : PG_GETARG_INT32(0);
	ArrayType  *kinds = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P_COPY(1);
	MemoryContext call_cxt = CurrentMemoryContext;
	MemoryContext task_cxt;
	volatile int executed = 0;
	volatile int failed = 0;
	char	   *picked_by;

	require_nonatomic(fcinfo, "tms.run_pending");
	if (max_tasks < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tasks must not be negative"),
				 errdetail("The value given is %d.", max_tasks)));

	task_cxt = AllocSetContextCreate(call_cxt, "tms run_pending task",
									 ALLOCSET_DEFAULT_SIZES);
	session_lease_attach();
	picked_by = claimant_name();

	PG_TRY();
	{
		SPI_connect_ext(SPI_OPT_NONATOMIC);
		sched_session_begin();
		sched_maintain();
		sched_session_commit();
		if (sched_prune_history())
		{
			sched_session_commit();
			sched_run_sweeps();
		}
		sched_session_commit();

		while (executed < max_tasks)
		{
			SchedTask	task;
			ErrorData  *error = NULL;
			SchedOutcome outcome;
			MemoryContext old = MemoryContextSwitchTo(task_cxt);

			CHECK_FOR_INTERRUPTS();
			if (!sched_claim(picked_by, kinds, &task))
			{
				sched_session_commit();
				MemoryContextSwitchTo(old);
				break;
			}
			sched_session_commit();
			sched_lease_publish(&task);
			outcome = sched_execute(&task, &error);
			sched_session_commit();
			sched_lease_clear();

			executed++;
			if (outcome == SCHED_FAILED)
			{
				failed++;
				if (error->sqlerrcode == ERRCODE_QUERY_CANCELED)
					sched_rethrow(error);
				ereport(WARNING,
						(errmsg("task \"%s\" instance \"%s\" failed: %s",
								task.kind, task.instance, error->message),
						 errdetail("It is retried after a backoff.")));
			}
			MemoryContextSwitchTo(old);
			MemoryContextReset(task_cxt);
		}
		sched_session_end();
		SPI_finish();
	}
	PG_FINALLY();
	{
		sched_session_forget();
		sched_lease_clear();
		sched_lease_detach();
	}
	PG_END_TRY();

	MemoryContextSwitchTo(call_cxt);
	return counts_result(fcinfo, executed, failed);
}

/*
 * CALL tms.run_task(kind, instance): run this task now, due or not.  Fails,
 * changing nothing, while a live lease holds it.  A failure of the handler
 * is recorded like any other and then raised to the caller.
 */
Datum
tms_run_task(PG_FUNCTION_ARGS)
{
	char	   *kind;
	char	   *instance;
	MemoryContext call_cxt = CurrentMemoryContext;
	SchedTask	task;
	ErrorData  *volatile error = NULL;
	volatile SchedOutcome outcome = SCHED_DONE;

	require_nonatomic(fcinfo, "tms.run_task");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("task kind and instance must not be null")));
	kind = text_to_cstring(PG_GETARG_TEXT_PP(0));
	instance = text_to_cstring(PG_GETARG_TEXT_PP(1));

	session_lease_attach();
	PG_TRY();
	{
		ErrorData  *e = NULL;

		SPI_connect_ext(SPI_OPT_NONATOMIC);
		sched_session_begin();
		sched_claim_given(kind, instance, claimant_name(), &task);
		sched_session_commit();
		sched_lease_publish(&task);
		outcome = sched_execute(&task, &e);
		error = e;
		sched_session_commit();
		sched_session_end();
		SPI_finish();
	}
	PG_FINALLY();
	{
		sched_session_forget();
		sched_lease_clear();
		sched_lease_detach();
	}
	PG_END_TRY();

	MemoryContextSwitchTo(call_cxt);
	if (outcome == SCHED_FAILED)
		sched_rethrow(error);
	return counts_result(fcinfo, outcome == SCHED_LEASE_LOST ? 0 : 1,
						 outcome == SCHED_FAILED ? 1 : 0);
}
