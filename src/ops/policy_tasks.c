/*-------------------------------------------------------------------------
 *
 * policy_tasks.c
 *	  The handlers of the "cron-job" and "commit-job" task kinds: the
 *	  evaluation of the rules of one table when a crontab fired or when
 *	  commits to it arrived (the cron and commit pools of Gravitino's table
 *	  maintenance service design,
 *	  https://github.com/apache/gravitino/pull/13386).
 *
 * A cron-job (instance "<policy id>:<table id>", made by the policy's
 * policy-expand task, tms._expand_cron) carries the crontab rules that
 * fired.  It reads the policy (gone or inactive: it ends), connects as the
 * policy's owner and evaluates those rules on its table: a rule with a job
 * in flight on the table, or in its cooldown, is passed over; one whose
 * counters have not fired is not evaluated (a rule without counters is);
 * every evaluation is logged and a true one records its job
 * (tms._record_evaluation), as the cycle does.
 *
 * A commit-job (instance "<table id>", made by tms._commit_event from a
 * catalog's commit events, coalescing every event until it runs) first
 * observes the table, as the owner of the first policy watching it: one
 * load, whose snapshots count the new commits and bytes into the
 * counters, which is all the tables whose commits arrive as events ever
 * need (no polling).  Then, for each policy with on-commit rules on the
 * table, as its owner, it evaluates those rules on it, as one chain in
 * that design's order (the jobs wait for each other, tms._start_job).
 * When a rule whose counters fired is in its cooldown, the task is due
 * again when the cooldown ends instead of being deleted, so commits that
 * came during the cooldown are acted on after it.
 *
 * Both are detached handlers (sched.h): short steps, network in between,
 * failures returned as values (the task is retried after a backoff).  An
 * evaluation that failed (logged as such) fails the task too, so a
 * transient catalog error is retried soon instead of waiting for the next
 * firing, which may be a day away.
 * Nothing they do twice does harm: an evaluation records at most one job
 * per (table, rule) in flight, and an observation counts a commit once
 * (tms.observe_table's base counters), so a worker killed mid-step loses
 * nothing and duplicates nothing when the task runs again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/lease.h"
#include "sched/sched.h"

/* ---------------------------------------------------------------------
 * Shared
 * --------------------------------------------------------------------- */

/*
 * A positive decimal id at s ending with stop (a separator, or '\0' for
 * the string's end); *rest is what follows the separator.
 */
static bool
parse_id(const char *s, char stop, int64 *id, const char **rest)
{
	char	   *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*id = strtoi64(s, &end, 10);
	if (errno != 0 || *end != stop || *id <= 0)
		return false;
	if (rest)
		*rest = end + (stop ? 1 : 0);
	return true;
}

/* A new run in task mode in context cxt. */
static PolicyRun *
new_run(MemoryContext cxt, PolicyScope scope, int64 table_id)
{
	PolicyRun  *r = MemoryContextAllocZero(cxt, sizeof(PolicyRun));

	r->task = true;
	r->cxt = cxt;
	r->scope = scope;
	r->table_id = table_id;
	return r;
}

/* fn of policy_with_catalog: evaluate the run's scope. */
static bool
evaluate_with_catalog(PolicyRun *r, void *arg)
{
	return policy_evaluate_candidates(r);
}

/*
 * An evaluation of the run that failed (the catalog was down, the metadata
 * could not be read: logged in tms.evaluation_log) fails the task, so
 * that it is retried after the scheduler's backoff rather than left to the
 * next firing or commit; the retry evaluates only what has no job yet.
 */
static void
fail_on_failed_evaluations(PolicyRun *r)
{
	if (r->failed > 0 && r->error == NULL)
		(void) policy_fail(r, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
						   psprintf("%d evaluation%s failed: %s", r->failed,
									r->failed == 1 ? "" : "s",
									r->first_failure ? r->first_failure : "see tms.evaluation_log"),
						   "The task runs again after a backoff; tms.evaluation_log has each failure.");
}

/* The outcome of a handler whose last run is r (NULL: none failed). */
static SchedOutcome
task_outcome(PolicyRun *r, MemoryContext caller, ErrorData **error)
{
	if (sched_lease_lost())
		return SCHED_LEASE_LOST;
	if (r != NULL && r->error != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(caller);

		*error = sched_error(r->error->sqlerrcode, r->error->message, r->error->detail);
		MemoryContextSwitchTo(old);
		return SCHED_FAILED;
	}
	return SCHED_DONE;
}

/* ---------------------------------------------------------------------
 * cron-job
 * --------------------------------------------------------------------- */

typedef struct CronRules
{
	PolicyRun  *run;
	const char *data;
} CronRules;

/* The rules of the task's data that still are crontab rules of the policy. */
static void
cron_rules_step(void *arg)
{
	CronRules  *cr = arg;
	PolicyRun  *r = cr->run;
	Oid			types[2] = {TEXTOID, INT4OID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(cr->data ? cr->data : "{}");
	values[1] = Int32GetDatum(r->policy->id);
	policy_exec("SELECT m.id FROM tms.maintenance_rules m"
				" WHERE m.policy_id = $2 AND m.schedule ? 'crontab'"
				"   AND m.id IN (SELECT x::bigint"
				"                  FROM jsonb_array_elements_text($1::jsonb -> 'rules') x)"
				" ORDER BY m.id",
				2, types, values, NULL, SPI_OK_SELECT);
	r->nrules = (int) SPI_processed;
	r->rule_ids = MemoryContextAlloc(r->cxt, sizeof(int64) * Max(r->nrules, 1));
	for (int i = 0; i < r->nrules; i++)
		r->rule_ids[i] = policy_col_int64(i, 1, 0);
}

SchedOutcome
policy_cron_job_task(SchedTask *task, ErrorData **error)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt = AllocSetContextCreate(caller, "tms cron-job", ALLOCSET_DEFAULT_SIZES);
	int64		policy_id;
	int64		table_id;
	const char *rest;
	PolicyRun  *r;
	CronRules	cr;
	SchedOutcome outcome;

	if (!parse_id(task->instance, ':', &policy_id, &rest) || policy_id > PG_INT32_MAX ||
		!parse_id(rest, '\0', &table_id, NULL))
	{
		MemoryContextDelete(cxt);
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid cron-job task instance \"%s\"", task->instance),
							 "A cron-job's instance is \"<policy id>:<table id>\".");
		return SCHED_FAILED;
	}
	sched_task_subject(task, policy_id, -1, table_id, -1);
	MemoryContextSwitchTo(cxt);
	r = new_run(cxt, POLICY_SCOPE_CRON, table_id);
	if (policy_load(r, (int32) policy_id, NULL) && r->policy != NULL && r->policy->active)
	{
		cr.run = r;
		cr.data = task->data;
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("tms: crontab rules of policy \"%s\" on a table",
										r->policy->name));
		if (policy_step(r, cron_rules_step, &cr) && r->nrules > 0 &&
			policy_with_catalog(r, evaluate_with_catalog, NULL))
			fail_on_failed_evaluations(r);
	}
	/* a policy that is gone or inactive: the firing passes */
	outcome = task_outcome(r, caller, error);
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	return outcome;
}

/* ---------------------------------------------------------------------
 * commit-job
 * --------------------------------------------------------------------- */

typedef struct CommitTable
{
	PolicyRun  *run;			/* for the steps' errors */
	int64		table_id;
	bool		found;
	char	   *ns;
	char	   *table;
	int			npolicies;		/* the policies watching it, by id */
	int32	   *policies;
	bool	   *on_commit;		/* ... which have on-commit rules */
} CommitTable;

static void
commit_table_step(void *arg)
{
	CommitTable *ct = arg;
	MemoryContext cxt = ct->run->cxt;
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(ct->table_id);
	policy_exec("SELECT t.namespace, t.table_name, r.policy_id,"
				"       bool_or(r.schedule @> '{\"on-commit\": true}')"
				"  FROM tms.tables t"
				"  JOIN tms.rule_baselines b ON b.table_id = t.id"
				"  JOIN tms.maintenance_rules r ON r.id = b.rule_id"
				" WHERE t.id = $1 AND t.dropped_at IS NULL"
				" GROUP BY t.namespace, t.table_name, r.policy_id"
				" ORDER BY r.policy_id",
				1, types, values, NULL, SPI_OK_SELECT);
	ct->npolicies = (int) SPI_processed;
	ct->found = ct->npolicies > 0;
	if (!ct->found)
		return;
	ct->ns = policy_col_str(0, 1, cxt);
	ct->table = policy_col_str(0, 2, cxt);
	ct->policies = MemoryContextAlloc(cxt, sizeof(int32) * ct->npolicies);
	ct->on_commit = MemoryContextAlloc(cxt, sizeof(bool) * ct->npolicies);
	for (int i = 0; i < ct->npolicies; i++)
	{
		ct->policies[i] = (int32) policy_col_int64(i, 3, 0);
		ct->on_commit[i] = policy_col_int64(i, 4, 0) != 0;
	}
}

typedef struct ObserveArgs
{
	CommitTable *ct;
	bool		evaluate;		/* the policy has on-commit rules */
	bool		gone;
} ObserveArgs;

/*
 * fn of policy_with_catalog: observe the table, then evaluate (its first
 * candidate takes the observation's load: one request in all).
 */
static bool
observe_with_catalog(PolicyRun *r, void *arg)
{
	ObserveArgs *oa = arg;
	volatile bool ok = true;

	PG_TRY();
	{
		if (!policy_refresh_table(r, oa->ct->ns, oa->ct->table, &oa->gone))
			ok = false;
		else if (!oa->gone && oa->evaluate && r->policy->active)
			ok = policy_evaluate_candidates(r);
	}
	PG_CATCH();
	{
		io_loaded_table_free(&r->kept);
		PG_RE_THROW();
	}
	PG_END_TRY();
	io_loaded_table_free(&r->kept);
	return ok;
}

typedef struct Cooldown
{
	SchedTask  *task;
	int64		table_id;
	bool		done;
} Cooldown;

/*
 * An on-commit rule of the table whose counters fired (or that has none)
 * and that is in its cooldown: the task is due again when the earliest
 * such cooldown ends, unless events arrived while it ran (it runs again
 * soon anyway, and comes back here).
 */
static void
cooldown_step(void *arg)
{
	Cooldown   *cd = arg;
	Oid			types[4] = {INT8OID, TEXTOID, INT8OID, TIMESTAMPTZOID};
	Datum		values[4];

	values[0] = Int64GetDatum(cd->table_id);
	values[1] = CStringGetTextDatum(cd->task->instance);
	values[2] = Int64GetDatum(cd->task->version);
	values[3] = TimestampTzGetDatum(cd->task->execution_time);
	policy_exec("UPDATE tms.scheduled_tasks s SET execution_time = w.until"
				"  FROM (SELECT min(b.cooldown_until) AS until"
				"          FROM tms.rule_baselines b"
				"          JOIN tms.maintenance_rules r ON r.id = b.rule_id"
				"          JOIN tms.maintenance_policies p ON p.id = r.policy_id"
				"         WHERE b.table_id = $1 AND r.schedule @> '{\"on-commit\": true}'"
				"           AND p.active AND b.pending_job IS NULL AND b.cooldown_until > now()"
				"           AND (b.triggered OR b.due_at <= now()"
				"                OR num_nonnulls(r.commits_threshold, r.bytes_threshold,"
				"                                r.time_threshold_ms) = 0)) w"
				" WHERE w.until IS NOT NULL AND s.task_name = 'commit-job'"
				"   AND s.task_instance = $2 AND s.version = $3 AND s.picked"
				"   AND s.execution_time = $4",
				4, types, values, NULL, SPI_OK_UPDATE);
	cd->done = true;
}

SchedOutcome
policy_commit_job_task(SchedTask *task, ErrorData **error)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt = AllocSetContextCreate(caller, "tms commit-job", ALLOCSET_DEFAULT_SIZES);
	int64		table_id;
	PolicyRun  *r = NULL;
	CommitTable ct;
	SchedOutcome outcome;
	bool		ok;

	if (!parse_id(task->instance, '\0', &table_id, NULL))
	{
		MemoryContextDelete(cxt);
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid commit-job task instance \"%s\"", task->instance),
							 "A commit-job's instance is the id of a table of tms.tables.");
		return SCHED_FAILED;
	}
	sched_task_subject(task, -1, -1, table_id, -1);
	MemoryContextSwitchTo(cxt);
	memset(&ct, 0, sizeof(ct));
	ct.table_id = table_id;
	ct.run = r = new_run(cxt, POLICY_SCOPE_COMMIT, table_id);
	pgstat_report_activity(STATE_RUNNING, "tms: commits to a table");
	ok = policy_step(r, commit_table_step, &ct);

	/* a table gone or watched by no rule: nothing to do */
	for (int i = 0; ok && ct.found && i < ct.npolicies; i++)
	{
		ObserveArgs oa;

		if (i > 0 && !ct.on_commit[i])
			continue;
		r = new_run(cxt, POLICY_SCOPE_COMMIT, table_id);
		if (!policy_load(r, ct.policies[i], NULL))
			ok = false;
		else if (r->policy == NULL)
			continue;			/* dropped meanwhile */
		else if (i == 0)
		{
			/* the observation, then this policy's rules */
			oa.ct = &ct;
			oa.evaluate = ct.on_commit[0];
			oa.gone = false;
			ok = policy_with_catalog(r, observe_with_catalog, &oa);
			if (ok && oa.gone)
				break;
		}
		else if (r->policy->active)
			ok = policy_with_catalog(r, evaluate_with_catalog, NULL);
		if (ok)
		{
			fail_on_failed_evaluations(r);
			ok = r->error == NULL;
		}
		if (sched_lease_lost())
			ok = false;
	}
	if (ok && ct.found)
	{
		Cooldown	cd;

		cd.task = task;
		cd.table_id = table_id;
		cd.done = false;
		(void) policy_step(r, cooldown_step, &cd);
	}
	outcome = task_outcome(r, caller, error);
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	return outcome;
}
