/*-------------------------------------------------------------------------
 *
 * policy_run.c
 *	  One evaluation of one policy: the handler of the "policy-expand" task
 *	  kind, tms.evaluate_now, and the database steps both use.
 *
 * A run of the policy-expand task (see policy_int.h for its two modes):
 *
 *	1. read the policy (a step); a task whose policy is gone ends here;
 *	2. expand the crontab firings that are due into cron-job tasks, at most
 *	   tms.expand_batch_size per run (a step, tms._expand_cron);
 *	3. when the task's cycle is due (its data's cycle_at): connect to the
 *	   group's catalog as the policy's owner (a step: the owner's USAGE on
 *	   the server and user mapping are checked), refresh the group's tables
 *	   (policy_refresh.c) when it needs it (load_policy_step says when),
 *	   and, while the policy's window is open, evaluate the candidates of
 *	   its rules without a schedule (policy_evaluate.c).  A run with no
 *	   refresh due and no possible candidate (any_candidate_step) does not
 *	   connect at all: an event-fed group's cycle without events makes no
 *	   catalog request;
 *	4. prune one batch of the evaluation log, and reschedule the task at
 *	   the earliest of its next cycle (tms.evaluation_cycle_interval after
 *	   this one), its rules' next firing, and now while an expansion goes
 *	   on (a step conditional on the task's lease).
 *
 * tms.evaluate_now runs step 3 for every rule of the policy at once, with a
 * refresh first unless the group's commits arrive as events and it needs
 * none.
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
	const char *task_data;		/* the policy-expand task's data, or NULL */
} LoadPolicy;

/*
 * The policy, and what its run has to do.  The group's tables need a
 * refresh when it was never refreshed; for a server that is polled, when
 * the policy has rules the refresh serves (counters, a crontab's tables,
 * or no rule yet: discovery) and no policy of the group refreshed it
 * within half an evaluation interval; for a server whose commits arrive
 * as events (tms.commit_sources), once after they were attached and then
 * every tms.commit_event_resync_interval.
 */
static void
load_policy_step(void *arg)
{
	LoadPolicy *lp = arg;
	PolicyRun  *r = lp->run;
	Oid			types[5] = {INT4OID, TEXTOID, INT4OID, TEXTOID, INT4OID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	PolicyRow  *p;

	values[0] = Int32GetDatum(lp->id);
	if (lp->name)
		values[1] = CStringGetTextDatum(lp->name);
	else
		nulls[1] = 'n';
	values[2] = Int32GetDatum(tms_evaluation_cycle_interval_ms);
	if (lp->task_data)
		values[3] = CStringGetTextDatum(lp->task_data);
	else
		nulls[3] = 'n';
	values[4] = Int32GetDatum(tms_commit_event_resync_interval_s);
	policy_exec("SELECT p.id, p.name, p.owner::oid, g.server::text, g.id,"
				"       tms.window_open(p.time_window, now()), p.active,"
				"       g.refreshed_at IS NULL"
				"       OR (cs.server IS NULL AND (x.counters OR x.cron OR x.n = 0)"
				"           AND g.refreshed_at < now() - make_interval(secs => $3 / 2000.0))"
				"       OR (cs.server IS NOT NULL"
				"           AND (g.refreshed_at < cs.attached_at"
				"                OR ($5 > 0 AND g.refreshed_at < now() - make_interval(secs => $5)))),"
				"       x.cycle, x.cron,"
				"       ($4::jsonb ->> 'cycle_at') IS NULL"
				"       OR ($4::jsonb ->> 'cycle_at')::timestamptz <= now(),"
				"       cs.server IS NOT NULL"
				"  FROM tms.maintenance_policies p"
				"  JOIN tms.object_groups g ON g.id = p.group_id"
				"  LEFT JOIN tms.commit_sources cs ON cs.server = g.server"
				"  CROSS JOIN LATERAL ("
				"       SELECT count(*) AS n,"
				"              coalesce(bool_or(r.schedule IS NULL), false) AS cycle,"
				"              coalesce(bool_or(r.schedule ? 'crontab'), false) AS cron,"
				"              coalesce(bool_or(num_nonnulls(r.commits_threshold, r.bytes_threshold,"
				"                                            r.time_threshold_ms) > 0), false) AS counters"
				"         FROM tms.maintenance_rules r WHERE r.policy_id = p.id) x"
				" WHERE CASE WHEN $2 IS NULL THEN p.id = $1 ELSE p.name = $2 END",
				5, types, values, nulls, SPI_OK_SELECT);
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
	p->has_cycle_rules = policy_col_int64(0, 9, 0) != 0;
	p->has_cron_rules = policy_col_int64(0, 10, 0) != 0;
	p->cycle_due = policy_col_int64(0, 11, 1) != 0;
	p->events = policy_col_int64(0, 12, 0) != 0;
	r->policy = p;
}

bool
policy_load(PolicyRun *r, int32 id, const char *task_data)
{
	LoadPolicy	lp;

	lp.run = r;
	lp.id = id;
	lp.name = NULL;
	lp.task_data = task_data;
	r->policy = NULL;
	return policy_step(r, load_policy_step, &lp);
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

bool
policy_with_catalog(PolicyRun *r, bool (*fn) (PolicyRun *r, void *arg), void *arg)
{
	volatile bool ok = true;

	if (!policy_step(r, connect_step, r))
		return false;
	PG_TRY();
	{
		ok = fn(r, arg);
	}
	PG_FINALLY();
	{
		tms_catalog_release(r->conn);
		r->conn = NULL;
	}
	PG_END_TRY();
	return ok;
}

/* ---------------------------------------------------------------------
 * The task
 * --------------------------------------------------------------------- */

typedef struct Expand
{
	PolicyRun  *run;
	int			enqueued;
	bool		more;			/* more cron-jobs of a firing to enqueue */
	bool		has_next;
	TimestampTz next_at;		/* the next firing of any crontab rule */
} Expand;

/* One batch of the policy's crontab expansion (tms._expand_cron). */
static void
expand_step(void *arg)
{
	Expand	   *ex = arg;
	Oid			types[3] = {INT4OID, INT4OID, BOOLOID};
	Datum		values[3];
	bool		isnull;

	values[0] = Int32GetDatum(ex->run->policy->id);
	values[1] = Int32GetDatum(tms_expand_batch_size);
	values[2] = BoolGetDatum(!ex->run->policy->active);
	policy_exec("SELECT enqueued, more, next_at FROM tms._expand_cron($1, $2, $3)",
				3, types, values, NULL, SPI_OK_SELECT);
	ex->enqueued = (int) policy_col_int64(0, 1, 0);
	ex->more = policy_col_int64(0, 2, 0) != 0;
	ex->next_at = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 3, &isnull));
	ex->has_next = !isnull;
}

typedef struct Reschedule
{
	SchedTask  *task;
	bool		cycle_ran;		/* the cycle ran: the next is an interval away */
	const Expand *expand;
	bool		done;
} Reschedule;

/*
 * The end of a task run: prune a batch of the log, and make the task due
 * at the earliest of its next cycle, its rules' next firing, and now when
 * a firing's expansion goes on.  The task's data says when the cycle is
 * due and how the expansion stands (tms.tasks shows it).  Conditional on
 * the task's lease.
 */
static void
reschedule_step(void *arg)
{
	Reschedule *rs = arg;
	const Expand *ex = rs->expand;
	Oid			types[9] = {TEXTOID, INT8OID, INT4OID, BOOLOID, TEXTOID, INT4OID, BOOLOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	policy_exec("SELECT tms.prune_evaluation_log(1000)", 0, NULL, NULL, NULL, SPI_OK_SELECT);
	values[0] = CStringGetTextDatum(rs->task->instance);
	values[1] = Int64GetDatum(rs->task->version);
	values[2] = Int32GetDatum(tms_evaluation_cycle_interval_ms);
	values[3] = BoolGetDatum(rs->cycle_ran);
	if (rs->task->data)
		values[4] = CStringGetTextDatum(rs->task->data);
	else
		nulls[4] = 'n';
	values[5] = Int32GetDatum(ex->enqueued);
	values[6] = BoolGetDatum(ex->more);
	values[7] = TimestampTzGetDatum(ex->next_at);
	if (!ex->has_next)
		nulls[7] = 'n';
	values[8] = TimestampTzGetDatum(rs->task->execution_time);

	/*
	 * A task rescheduled while it ran (tms.schedule_task from add_rule,
	 * set_policy_active, ...: its due time is no longer the claim's) keeps
	 * that due time, and its next run is a full one (no cycle_at).
	 */
	policy_exec("WITH c AS ("
				"  SELECT CASE WHEN $4 OR ($5::jsonb ->> 'cycle_at') IS NULL"
				"              THEN now() + make_interval(secs => $3 / 1000.0)"
				"              ELSE ($5::jsonb ->> 'cycle_at')::timestamptz END AS cycle_at)"
				" UPDATE tms.scheduled_tasks"
				"    SET execution_time = CASE WHEN execution_time <> $9 THEN execution_time"
				"                         ELSE least(c.cycle_at, $8, CASE WHEN $7 THEN now() END) END,"
				"        task_data = CASE WHEN execution_time <> $9 THEN '{}'::jsonb"
				"                    ELSE jsonb_build_object('cycle_at', c.cycle_at) END"
				"                    || CASE WHEN $8 IS NULL AND $6 = 0 THEN '{}'::jsonb"
				"                       ELSE jsonb_build_object('cron', jsonb_build_object("
				"                                'enqueued', $6, 'more', $7, 'next_firing', $8)) END"
				"   FROM c"
				"  WHERE task_name = 'policy-expand' AND task_instance = $1"
				"    AND version = $2 AND picked",
				9, types, values, nulls, SPI_OK_UPDATE);
	rs->done = SPI_processed == 1;
}

typedef struct CycleArgs
{
	bool		refresh;
	bool		evaluate;
} CycleArgs;

typedef struct AnyCandidate
{
	PolicyRun  *run;
	bool		any;
} AnyCandidate;

/*
 * Could the run have a candidate?  A superset of the candidate queries of
 * src/ops/policy_evaluate.c (the cycle's and evaluate_now's), each arm
 * served by an index: a pair with no job in flight whose counters fired
 * (the two partial indexes of tms.rule_baselines), or, for evaluate_now,
 * a pair of a rule without counters.  When there is none, the run needs
 * no catalog: an event-fed group's cycle with no event makes no request,
 * not even the first connection's GET /v1/config; and a polled group's
 * cycle after a refresh that found nothing new skips the candidate
 * queries (15 s at 100,000 unchanged tables on a loaded machine against
 * well under a millisecond for this one: bench/README.md, "Scale").
 */
static void
any_candidate_step(void *arg)
{
	AnyCandidate *ac = arg;
	Oid			types[2] = {INT4OID, BOOLOID};
	Datum		values[2];

	values[0] = Int32GetDatum(ac->run->policy->id);
	values[1] = BoolGetDatum(ac->run->scope != POLICY_SCOPE_CYCLE);
	policy_exec("SELECT EXISTS (SELECT 1 FROM tms.maintenance_rules r"
				"                 JOIN tms.rule_baselines b ON b.rule_id = r.id"
				"                WHERE r.policy_id = $1 AND b.triggered AND b.pending_job IS NULL)"
				"    OR EXISTS (SELECT 1 FROM tms.maintenance_rules r"
				"                 JOIN tms.rule_baselines b ON b.rule_id = r.id"
				"                WHERE r.policy_id = $1 AND b.pending_job IS NULL"
				"                  AND b.due_at IS NOT NULL AND b.due_at <= now())"
				"    OR ($2 AND EXISTS (SELECT 1 FROM tms.maintenance_rules r"
				"                         JOIN tms.rule_baselines b ON b.rule_id = r.id"
				"                        WHERE r.policy_id = $1 AND b.pending_job IS NULL"
				"                          AND num_nonnulls(r.commits_threshold, r.bytes_threshold,"
				"                                           r.time_threshold_ms) = 0))",
				2, types, values, NULL, SPI_OK_SELECT);
	ac->any = policy_col_int64(0, 1, 1) != 0;
}

/* The cycle's work with the catalog connected; false: it failed. */
static bool
cycle_with_catalog(PolicyRun *r, void *arg)
{
	CycleArgs  *ca = arg;
	uint64		req0 = io_catalog_request_count(r->conn->catalog);
	bool		ok = true;
	instr_time	t0,
				t1;

	INSTR_TIME_SET_CURRENT(t0);
	if (ca->refresh)
		ok = policy_refresh_group(r);
	INSTR_TIME_SET_CURRENT(t1);
	INSTR_TIME_SUBTRACT(t1, t0);
	r->refresh_ms = INSTR_TIME_GET_MILLISEC(t1);
	r->requests_refresh = io_catalog_request_count(r->conn->catalog) - req0;
	if (ok && ca->evaluate)
	{
		AnyCandidate ac;

		/* after a refresh: most cycles have no fired pair at all */
		ac.run = r;
		ac.any = true;
		if (ca->refresh)
		{
			INSTR_TIME_SET_CURRENT(t0);
			ok = policy_step(r, any_candidate_step, &ac);
			INSTR_TIME_SET_CURRENT(t1);
			INSTR_TIME_SUBTRACT(t1, t0);
			r->candidates_ms += INSTR_TIME_GET_MILLISEC(t1);
		}
		if (ok && ac.any)
			ok = policy_evaluate_candidates(r);
	}
	r->requests_evaluate = io_catalog_request_count(r->conn->catalog) - req0 -
		r->requests_refresh;
	return ok;
}

/* The run's refresh and evaluation after the policy is read; false: failed. */
static bool
run_policy(PolicyRun *r, bool refresh, bool evaluate)
{
	CycleArgs	ca;
	bool		ok = true;
	AnyCandidate ac;

	ca.refresh = refresh;
	ca.evaluate = evaluate;
	ac.run = r;
	ac.any = true;
	if (!refresh && evaluate)
	{
		instr_time	t0,
					t1;

		INSTR_TIME_SET_CURRENT(t0);
		ok = policy_step(r, any_candidate_step, &ac);
		INSTR_TIME_SET_CURRENT(t1);
		INSTR_TIME_SUBTRACT(t1, t0);
		r->candidates_ms = INSTR_TIME_GET_MILLISEC(t1);
	}
	if (ok && (refresh || ac.any))
		ok = policy_with_catalog(r, cycle_with_catalog, &ca);
	elog(DEBUG1, "tms: policy \"%s\": refresh %.1f ms (" UINT64_FORMAT " catalog requests),"
		 " candidate query %.3f ms (%d candidates), evaluation %.1f ms (" UINT64_FORMAT
		 " catalog requests)",
		 r->policy->name, r->refresh_ms, r->requests_refresh, r->candidates_ms,
		 r->evaluated, r->evaluate_ms, r->requests_evaluate);
	return ok;
}

/*
 * A run of a policy's policy-expand task: the crontab expansion (a batch,
 * no network), then, when its cycle is due, the refresh its group needs
 * and the evaluation of its rules without a schedule (while its window is
 * open), then the reschedule.
 */
SchedOutcome
policy_expand_task(SchedTask *task, ErrorData **error)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms policy run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PolicyRun  *r = palloc0(sizeof(PolicyRun));
	Expand		ex;
	Reschedule	rs;
	char	   *end;
	int32		id;
	SchedOutcome outcome = SCHED_DONE;
	bool		ok;

	r->task = true;
	r->cxt = cxt;
	r->scope = POLICY_SCOPE_CYCLE;
	memset(&ex, 0, sizeof(ex));
	ex.run = r;
	memset(&rs, 0, sizeof(rs));
	id = (int32) strtol(task->instance, &end, 10);
	if (*end != '\0' || id <= 0)
	{
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid policy-expand task instance \"%s\"", task->instance),
							 NULL);
		MemoryContextSwitchTo(old);
		return SCHED_FAILED;
	}
	sched_task_subject(task, id, -1, -1, -1);

	ok = policy_load(r, id, task->data);
	if (ok && r->policy != NULL)
	{
		PolicyRow  *p = r->policy;
		bool		refresh = p->active && p->cycle_due && p->refresh_due;
		bool		evaluate = p->active && p->cycle_due && p->window_open &&
		p->has_cycle_rules;

		pgstat_report_activity(STATE_RUNNING,
							   psprintf("tms: evaluating policy \"%s\"", p->name));
		if (p->has_cron_rules)
			ok = policy_step(r, expand_step, &ex);
		if (ok && (refresh || evaluate))
			(void) run_policy(r, refresh, evaluate);
		rs.cycle_ran = p->cycle_due;
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
		rs.expand = &ex;
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
	r->scope = POLICY_SCOPE_ALL;
	lp.run = r;
	lp.id = 0;
	lp.name = policy;
	lp.task_data = NULL;
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
	{
		/* a server whose commits arrive as events has its counters already */
		(void) run_policy(r, !r->policy->events || r->policy->refresh_due, true);
	}
	tms_restore_role(&save);
}
