/*-------------------------------------------------------------------------
 *
 * policy_run.c
 *	  One evaluation of one policy: the handler of the "policy-expand" task
 *	  kind, tms.evaluate_now, and the database steps both use.
 *
 * A run (see policy_int.h for its two modes):
 *
 *	1. read the policy (a step); a task whose policy is gone ends here;
 *	2. connect to the group's catalog as the policy's owner (a step: the
 *	   owner's USAGE on the server and user mapping are checked);
 *	3. refresh the group's tables (policy_refresh.c) unless another policy
 *	   of the same group did so within half an evaluation interval;
 *	4. while the policy's window is open: evaluate the candidates
 *	   (policy_evaluate.c);
 *	5. prune one batch of the evaluation log, and reschedule the task
 *	   tms.evaluation_cycle_interval from now (a step conditional on the
 *	   task's lease).
 *
 * In task mode a failure at any point (catalog down, owner without a user
 * mapping, role dropped) ends the run as a failed task: it is recorded in
 * tms.scheduled_tasks.last_error and logged, and the task runs again after
 * the scheduler's backoff.  A lost lease ends it silently at the next
 * check.  Nothing here holds a transaction open across a network wait.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/role.h"
#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/lease.h"
#include "sched/sched.h"

/* ---------------------------------------------------------------------
 * Steps and SPI helpers (policy_int.h)
 * --------------------------------------------------------------------- */

bool
policy_step(PolicyRun *r, void (*fn) (void *arg), void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	ErrorData  *e;

	if (!r->task)
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		MemoryContextSwitchTo(caller);
		fn(arg);
		SPI_finish();
		CommandCounterIncrement();
		MemoryContextSwitchTo(caller);
		return true;
	}
	if (sched_try_step(fn, arg, &e))
	{
		MemoryContextSwitchTo(caller);
		return true;
	}
	/* the error outlives the caller's context (a page's, a candidate's) */
	MemoryContextSwitchTo(r->cxt);
	if (r->error == NULL)
		r->error = sched_error(e->sqlerrcode, e->message, e->detail);
	MemoryContextSwitchTo(caller);
	return false;
}

bool
policy_fail(PolicyRun *r, int sqlerrcode, const char *message, const char *detail)
{
	if (!r->task)
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg_internal("%s", message),
				 detail ? errdetail_internal("%s", detail) : 0));
	if (r->error == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(r->cxt);

		r->error = sched_error(sqlerrcode, message, detail);
		MemoryContextSwitchTo(old);
	}
	return false;
}

void
policy_exec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
			int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "policy statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

char *
policy_col_str(int row, int col, MemoryContext cxt)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v ? MemoryContextStrdup(cxt, v) : NULL;
}

int64
policy_col_int64(int row, int col, int64 dflt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	if (isnull)
		return dflt;
	switch (SPI_gettypeid(SPI_tuptable->tupdesc, col))
	{
		case INT4OID:
		case OIDOID:
		case REGROLEOID:
			return DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
		case BOOLOID:
			return DatumGetBool(d) ? 1 : 0;
		default:
			elog(ERROR, "unexpected column type %u", SPI_gettypeid(SPI_tuptable->tupdesc, col));
	}
	return dflt;
}

int64
policy_now_ms(void)
{
	return (int64) (GetCurrentTimestamp() / 1000) +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

TimestampTz
policy_ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms * 1000) -
		(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

/* ---------------------------------------------------------------------
 * Reading the policy and connecting
 * --------------------------------------------------------------------- */

typedef struct LoadPolicy
{
	PolicyRun  *run;
	int32		id;				/* by id (task) ... */
	const char *name;			/* ... or by name (evaluate_now) */
} LoadPolicy;

static void
load_policy_step(void *arg)
{
	LoadPolicy *lp = arg;
	PolicyRun  *r = lp->run;
	Oid			types[3] = {INT4OID, TEXTOID, INT4OID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	PolicyRow  *p;

	values[0] = Int32GetDatum(lp->id);
	if (lp->name)
		values[1] = CStringGetTextDatum(lp->name);
	else
		nulls[1] = 'n';
	values[2] = Int32GetDatum(tms_evaluation_cycle_interval_ms);
	policy_exec("SELECT p.id, p.name, p.owner::oid, g.server::text, g.id,"
				"       tms.window_open(p.time_window, now()), p.active,"
				"       g.refreshed_at IS NULL"
				"       OR g.refreshed_at < now() - make_interval(secs => $3 / 2000.0)"
				"  FROM tms.maintenance_policies p"
				"  JOIN tms.object_groups g ON g.id = p.group_id"
				" WHERE CASE WHEN $2 IS NULL THEN p.id = $1 ELSE p.name = $2 END",
				3, types, values, nulls, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return;
	p = MemoryContextAllocZero(r->cxt, sizeof(PolicyRow));
	p->id = (int32) policy_col_int64(0, 1, 0);
	p->name = policy_col_str(0, 2, r->cxt);
	p->owner = (Oid) policy_col_int64(0, 3, 0);
	p->server = policy_col_str(0, 4, r->cxt);
	p->group_id = (int32) policy_col_int64(0, 5, 0);
	p->window_open = policy_col_int64(0, 6, 0) != 0;
	p->active = policy_col_int64(0, 7, 0) != 0;
	p->refresh_due = policy_col_int64(0, 8, 0) != 0;
	r->policy = p;
}

static void
connect_step(void *arg)
{
	PolicyRun  *r = arg;
	TmsRoleSave save;
	char	   *what = psprintf("policy \"%s\"", r->policy->name);

	tms_become_role(r->policy->owner, what, &save);
	r->conn = tms_catalog_connect(r->policy->server);
	tms_catalog_keep(r->conn);
	tms_restore_role(&save);
}

/* ---------------------------------------------------------------------
 * The task
 * --------------------------------------------------------------------- */

typedef struct Reschedule
{
	SchedTask  *task;
	bool		done;
} Reschedule;

/* The end of a task run: prune a batch of the log, run again later. */
static void
reschedule_step(void *arg)
{
	Reschedule *rs = arg;
	Oid			types[3] = {TEXTOID, INT8OID, INT4OID};
	Datum		values[3];

	policy_exec("SELECT tms.prune_evaluation_log(1000)", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	values[0] = CStringGetTextDatum(rs->task->instance);
	values[1] = Int64GetDatum(rs->task->version);
	values[2] = Int32GetDatum(tms_evaluation_cycle_interval_ms);
	policy_exec("UPDATE tms.scheduled_tasks"
				"   SET execution_time = now() + make_interval(secs => $3 / 1000.0)"
				" WHERE task_name = 'policy-expand' AND task_instance = $1"
				"   AND version = $2 AND picked",
				3, types, values, NULL, SPI_OK_UPDATE);
	rs->done = SPI_processed == 1;
}

/* The run's steps after the policy is read; false: it failed. */
static bool
run_policy(PolicyRun *r, bool refresh, bool evaluate)
{
	volatile bool ok = true;
	volatile bool kept = false;

	if (!policy_step(r, connect_step, r))
		return false;
	kept = true;
	PG_TRY();
	{
		uint64		req0 = io_catalog_request_count(r->conn->catalog);
		instr_time	t0,
					t1;

		INSTR_TIME_SET_CURRENT(t0);
		if (refresh)
			ok = policy_refresh_group(r);
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		r->refresh_ms = INSTR_TIME_GET_MILLISEC(t1);
		r->requests_refresh = io_catalog_request_count(r->conn->catalog) - req0;
		if (ok && evaluate)
			ok = policy_evaluate_candidates(r);
		r->requests_evaluate = io_catalog_request_count(r->conn->catalog) - req0 -
			r->requests_refresh;
	}
	PG_FINALLY();
	{
		if (kept)
			tms_catalog_release(r->conn);
	}
	PG_END_TRY();
	elog(DEBUG1, "tms: policy \"%s\": refresh %.1f ms (" UINT64_FORMAT " catalog requests),"
		 " candidate query %.3f ms (%d candidates), evaluation %.1f ms (" UINT64_FORMAT
		 " catalog requests)",
		 r->policy->name, r->refresh_ms, r->requests_refresh, r->candidates_ms,
		 r->evaluated, r->evaluate_ms, r->requests_evaluate);
	return ok;
}

SchedOutcome
policy_expand_task(SchedTask *task, ErrorData **error)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms policy run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PolicyRun  *r = palloc0(sizeof(PolicyRun));
	LoadPolicy	lp;
	Reschedule	rs;
	char	   *end;
	SchedOutcome outcome = SCHED_DONE;

	r->task = true;
	r->cxt = cxt;
	lp.run = r;
	lp.name = NULL;
	lp.id = (int32) strtol(task->instance, &end, 10);
	if (*end != '\0' || lp.id <= 0)
	{
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid policy-expand task instance \"%s\"", task->instance),
							 NULL);
		MemoryContextSwitchTo(old);
		return SCHED_FAILED;
	}

	if (policy_step(r, load_policy_step, &lp) && r->policy != NULL)
	{
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("tms: evaluating policy \"%s\"", r->policy->name));
		if (r->policy->active && (r->policy->refresh_due || r->policy->window_open))
			(void) run_policy(r, r->policy->refresh_due, r->policy->window_open);
	}

	if (sched_lease_lost())
		outcome = SCHED_LEASE_LOST;
	else if (r->error != NULL)
	{
		/* the failure, in the caller's context; the backoff retries */
		MemoryContextSwitchTo(old);
		*error = sched_error(r->error->sqlerrcode, r->error->message, r->error->detail);
		outcome = SCHED_FAILED;
	}
	else if (r->policy != NULL)
	{
		rs.task = task;
		rs.done = false;
		if (!policy_step(r, reschedule_step, &rs))
		{
			MemoryContextSwitchTo(old);
			*error = sched_error(r->error->sqlerrcode, r->error->message, r->error->detail);
			outcome = SCHED_FAILED;
		}
		else if (!rs.done)
			outcome = SCHED_LEASE_LOST;
	}
	/* a policy that is gone: the task ends (settled, deleted) */
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return outcome;
}

/* ---------------------------------------------------------------------
 * tms.evaluate_now
 * --------------------------------------------------------------------- */

/*
 * The acting role (the caller) must have the privileges of the policy's
 * owner.  The run reads and writes tms's tables as the extension's owner,
 * as the SQL API does (src/sql_api/api.c), and reaches the catalog as the
 * policy's owner (connect_step); an error undoes the switch with the
 * (sub)transaction.
 */
void
tms_policy_evaluate_now(const char *policy, bool force,
						Tuplestorestate *tupstore, TupleDesc desc)
{
	PolicyRun  *r = palloc0(sizeof(PolicyRun));
	LoadPolicy	lp;
	Oid			acting = tms_acting_role();
	TmsRoleSave save;

	r->task = false;
	r->cxt = CurrentMemoryContext;
	r->tupstore = tupstore;
	r->desc = desc;
	lp.run = r;
	lp.id = 0;
	lp.name = policy;
	tms_become_extension_owner(&save);
	(void) policy_step(r, load_policy_step, &lp);
	if (r->policy == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("policy \"%s\" does not exist", policy),
				 errhint("See SELECT name FROM tms.policies.")));
	if (!has_privs_of_role(acting, r->policy->owner))
	{
		char	   *owner = GetUserNameFromId(r->policy->owner, true);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of policy \"%s\"", policy),
				 owner ? errdetail("The policy is owned by role %s.", owner) :
				 errdetail("The role that owned the policy was dropped.")));
	}
	if (!force && !r->policy->active)
		ereport(NOTICE,
				(errmsg("policy \"%s\" is not active; nothing evaluated", policy),
				 errhint("Pass force => true to evaluate it anyway.")));
	else if (!force && !r->policy->window_open)
		ereport(NOTICE,
				(errmsg("the time window of policy \"%s\" is closed; nothing evaluated", policy),
				 errhint("Pass force => true to evaluate it anyway.")));
	else
		(void) run_policy(r, true, true);
	tms_restore_role(&save);
}
