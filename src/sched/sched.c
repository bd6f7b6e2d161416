/*-------------------------------------------------------------------------
 *
 * sched.c
 *	  Claim, execute and settle rows of tms.scheduled_tasks.
 *
 * The life of a task:
 *
 *	 claim		one statement: lock the best due, unpicked row of a kind with
 *				a free slot (FOR UPDATE SKIP LOCKED), take a free slot of its
 *				kind (the same), mark the row picked and bump its version.
 *				Committed at once.
 *	 execute	the handler runs in a subtransaction of a new transaction:
 *				a SQL procedure handler(task_instance, task_data), or a
 *				built-in C handler.
 *	 settle		in the same subtransaction, conditional on the claimed
 *				version: delete the row (or, if the handler rescheduled it,
 *				unpick it) and free the slot.  If the condition fails the
 *				lease was lost: the subtransaction is rolled back, so the
 *				handler's work is not written either.  If the handler
 *				failed, its subtransaction is rolled back and the failure
 *				is recorded (backoff, consecutive_failures, last_error),
 *				again conditional on the version.
 *
 * A SQL handler's work and the task's completion therefore commit
 * together or not at all.  Built-in handlers do work outside the database
 * (network, storage); they call sched_check_lease() between steps and must
 * be idempotent, as a task whose lease expires is run again.
 *
 * Detached built-in kinds (sched_register_detached) are for handlers whose
 * work is long and outside the database, like a purge deleting a million
 * files: no transaction may stay open meanwhile.  sched_execute() then
 * runs the handler with no transaction of its own open; the handler does
 * its database work in short transactions through sched_step(), and the
 * task is settled in one more.  The handler's writes are not rolled back
 * with a lost lease, so it makes them conditional on the task's version
 * itself.  Two callers, two ways of making a transaction:
 *
 *	 pool worker	sched_execute() is called with no transaction open;
 *					each step starts and commits its own.
 *	 session		(CALL tms.run_pending / tms.run_task) sched_execute() is
 *					called in the idle transaction that SPI_commit() left,
 *					with the procedure's non-atomic SPI connection current
 *					and no snapshot held; each step connects SPI, takes a
 *					snapshot, and ends with SPI_commit().
 *
 * Between steps neither holds a snapshot or an xid, so nothing holds back
 * vacuum or locks while the handler waits on the network.
 *
 * Heartbeats and lost leases are lease.h's: the claimant publishes its
 * lease in shared memory, its supervisor renews the heartbeat, and
 * dead-lease recovery (sched_maintain) releases only leases that no live
 * process of this server holds and whose heartbeat is older than
 * tms.heartbeat_interval * tms.missed_heartbeats_limit.
 *
 * A SQL handler runs as the role that owns its procedure (as pg_cron runs
 * a job as its owner), never as the executor's own user: registering a
 * kind gives its tasks no privilege the procedure's owner lacks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/role.h"
#include "observe/stats.h"
#include "bridge/subxact.h"
#include "bridge/usercode.h"
#include "sched/lease.h"
#include "sched/sched.h"
#include "sched/task_events.h"

int			tms_heartbeat_interval_ms = 5000;
int			tms_missed_heartbeats_limit = 6;
int			tms_retry_delay_ms = 5000;
int			tms_retry_delay_max_ms = 3600 * 1000;
int			tms_stuck_task_age_s = 3600;
int			tms_task_history_retention_s = 14 * 86400;
int			tms_task_history_prune_interval_ms = 60 * 1000;

/* ---------------------------------------------------------------------
 * Built-in kinds
 * --------------------------------------------------------------------- */

#define MAX_BUILTINS 16

typedef struct BuiltinKind
{
	const char *kind;
	SchedHandler handler;		/* NULL: no executor in this version */
	SchedDetachedHandler detached;	/* or this: runs outside transactions */
	int		   *cap;			/* the setting holding its max_concurrency */
	SchedSweep	sweep;			/* NULL: none (sched_register_sweep) */
} BuiltinKind;

static BuiltinKind builtins[MAX_BUILTINS];
static int	nbuiltins = 0;

/*
 * Declare a built-in kind (a row of tms.task_kinds with builtin = true,
 * created by the extension script): its C handler, and the integer setting
 * its concurrency cap follows.  Called from _PG_init, through the init
 * function of the module that owns the kind.
 */
void
sched_register_builtin(const char *kind, SchedHandler handler, int *cap)
{
	if (nbuiltins >= MAX_BUILTINS)
		elog(ERROR, "too many built-in task kinds");
	builtins[nbuiltins].kind = kind;
	builtins[nbuiltins].handler = handler;
	builtins[nbuiltins].detached = NULL;
	builtins[nbuiltins].cap = cap;
	builtins[nbuiltins].sweep = NULL;
	nbuiltins++;
}

/*
 * Declare a detached built-in kind: like sched_register_builtin(), but its
 * handler runs outside any transaction (see the file header).
 */
void
sched_register_detached(const char *kind, SchedDetachedHandler handler, int *cap)
{
	sched_register_builtin(kind, NULL, cap);
	builtins[nbuiltins - 1].detached = handler;
}

/*
 * Give a registered built-in kind its sweep, run after every prune of the
 * run history (sched_run_sweeps).
 */
void
sched_register_sweep(const char *kind, SchedSweep sweep)
{
	for (int i = 0; i < nbuiltins; i++)
		if (strcmp(builtins[i].kind, kind) == 0)
		{
			builtins[i].sweep = sweep;
			return;
		}
	elog(ERROR, "task kind \"%s\" is not registered", kind);
}

static SchedHandler
builtin_handler(const char *kind)
{
	for (int i = 0; i < nbuiltins; i++)
		if (strcmp(builtins[i].kind, kind) == 0)
			return builtins[i].handler;
	return NULL;
}

static SchedDetachedHandler
detached_handler(const char *kind)
{
	for (int i = 0; i < nbuiltins; i++)
		if (strcmp(builtins[i].kind, kind) == 0)
			return builtins[i].detached;
	return NULL;
}

/*
 * Is kind a detached built-in kind?  Its tasks are executed by
 * sched_execute() without a transaction around it (pool workers) or in an
 * idle one (sessions).
 */
bool
sched_kind_detached(const char *kind)
{
	return detached_handler(kind) != NULL;
}

/* ---------------------------------------------------------------------
 * Statements
 * --------------------------------------------------------------------- */

/*
 * The claim.  $1 kinds filter (NULL: any), $2 picked_by, $3 picked_pid.
 *
 * "cand" locks the best due row of a kind with a free slot; "free" locks
 * one free slot of that kind.  Both are SKIP LOCKED, and both CTEs are
 * evaluated once.  The free-slot EXISTS test in "cand" is only a filter
 * from the snapshot: the slot is really taken by "free", whose
 * EvalPlanQual recheck of "task_instance IS NULL" on a row another claim
 * has just filled keeps two claims off one slot.  If the candidate's kind
 * turns out to be full, nothing is claimed and the caller polls again.
 */
static const char *claim_sql =
"WITH cand AS ("
"  SELECT t.task_name, t.task_instance"
"    FROM tms.scheduled_tasks t"
"   WHERE NOT t.picked"
"     AND t.execution_time <= now()"
"     AND ($1::text[] IS NULL OR t.task_name = ANY ($1))"
"     AND EXISTS (SELECT 1 FROM tms.task_slots s"
"                  WHERE s.kind = t.task_name AND s.task_instance IS NULL)"
"   ORDER BY t.priority DESC, t.execution_time"
"   LIMIT 1"
"     FOR UPDATE OF t SKIP LOCKED"
"), free AS ("
"  SELECT f.kind, f.slot"
"    FROM tms.task_slots f, cand"
"   WHERE f.kind = cand.task_name AND f.task_instance IS NULL"
"   LIMIT 1"
"     FOR UPDATE OF f SKIP LOCKED"
"), slot AS ("
"  UPDATE tms.task_slots s"
"     SET task_instance = cand.task_instance, since = now()"
"    FROM free, cand"
"   WHERE s.kind = free.kind AND s.slot = free.slot"
"  RETURNING s.kind, s.task_instance"
")"
" UPDATE tms.scheduled_tasks t"
"    SET picked = true, picked_by = $2, picked_pid = $3,"
"        last_heartbeat = now(), version = t.version + 1"
"   FROM slot"
"  WHERE t.task_name = slot.kind AND t.task_instance = slot.task_instance"
" RETURNING t.task_name, t.task_instance, t.task_data::text, t.version,"
"           t.last_heartbeat, t.execution_time, t.consecutive_failures,"
"           (SELECT k.handler FROM tms.task_kinds k WHERE k.kind = t.task_name),"
"           (SELECT to_regprocedure(k.handler)::oid FROM tms.task_kinds k"
"             WHERE k.kind = t.task_name)";

/*
 * Claim of a named task (tms.run_task).  $1 kind, $2 instance, $3
 * picked_by, $4 picked_pid, $5 dead-lease age.  Takes over a lease whose
 * heartbeat is dead; the caller has checked that the row exists and is not
 * held by a live lease, under the row lock taken by lock_given_sql.
 */
static const char *lock_given_sql =
"SELECT picked, picked_by, now() - last_heartbeat < $3::interval AS live,"
"       version"
"  FROM tms.scheduled_tasks"
" WHERE task_name = $1 AND task_instance = $2"
"   FOR UPDATE";

static const char *claim_given_sql =
"WITH free AS ("
"  SELECT f.kind, f.slot FROM tms.task_slots f"
"   WHERE f.kind = $1 AND f.task_instance IS NULL"
"   ORDER BY f.slot"
"   LIMIT 1 FOR UPDATE SKIP LOCKED"
"), slot AS ("
"  UPDATE tms.task_slots s SET task_instance = $2, since = now()"
"    FROM free"
"   WHERE s.kind = free.kind AND s.slot = free.slot"
"  RETURNING s.kind"
")"
" UPDATE tms.scheduled_tasks t"
"    SET picked = true, picked_by = $3, picked_pid = $4,"
"        last_heartbeat = now(), version = t.version + 1"
"   FROM slot"
"  WHERE t.task_name = $1 AND t.task_instance = $2"
" RETURNING t.task_name, t.task_instance, t.task_data::text, t.version,"
"           t.last_heartbeat, t.execution_time, t.consecutive_failures,"
"           (SELECT k.handler FROM tms.task_kinds k WHERE k.kind = t.task_name),"
"           (SELECT to_regprocedure(k.handler)::oid FROM tms.task_kinds k"
"             WHERE k.kind = t.task_name)";

/*
 * The settle statements below share their first parameters: $1 kind, $2
 * instance, $3 the version of the claim, and the run's row of
 * tms.task_history, which each writes in the same statement (no round
 * trip of its own) when the settle took place: $4 the claim's time, $5
 * the attempt, $6 the executor's pid, $7 to $10 the run's policy, rule,
 * table and job (NULL: none), $11 whether to record the run (false: the
 * handler called it idle), $12 its SQLSTATE and $13 its error (NULL: it
 * succeeded).
 */
#define SETTLE_PARAMS 13
#define HISTORY_ROW \
"), run AS ("\
"  INSERT INTO tms.task_history"\
"         (kind, instance, started_at, attempt, pid, policy_id, rule_id,"\
"          table_id, job_id, finished_at, succeeded, sqlstate, error)"\
"  SELECT $1, $2, $4, $5, $6, $7, $8, $9, $10, clock_timestamp(),"\
"         $12 IS NULL, $12, $13"\
"    FROM done WHERE $11"\
")"

/*
 * What a settle statement that keeps its row returns: the count, and the
 * row's due time and consecutive failures after it (read by
 * settled_after() for the task's event, task_events.h).
 */
#define SETTLED_ROW \
" SELECT count(*), max(execution_time), max(consecutive_failures) FROM done"

/*
 * Completion: a one-shot task is deleted; a task its handler rescheduled
 * (a new execution_time) is unpicked and kept.  Either frees the slot in
 * the same statement and returns how many task rows it settled (0: the
 * lease was lost).  $14 the execution_time at the claim.  (A run that
 * failed for good, which retrying cannot mend, completes its task too;
 * its history row has the failure.)
 */
static const char *complete_delete_sql =
"WITH done AS ("
"  DELETE FROM tms.scheduled_tasks"
"   WHERE task_name = $1 AND task_instance = $2 AND version = $3"
"     AND execution_time = $14"
"  RETURNING 1"
"), freed AS ("
"  UPDATE tms.task_slots SET task_instance = NULL, since = NULL"
"   WHERE kind = $1 AND task_instance = $2 AND EXISTS (SELECT 1 FROM done)"
HISTORY_ROW
" SELECT count(*) FROM done";

static const char *complete_keep_sql =
"WITH done AS ("
"  UPDATE tms.scheduled_tasks"
"     SET picked = false, picked_by = NULL, picked_pid = NULL,"
"         last_heartbeat = NULL, last_success = now(),"
"         consecutive_failures = 0, last_error = NULL, version = version + 1"
"   WHERE task_name = $1 AND task_instance = $2 AND version = $3"
"  RETURNING execution_time, consecutive_failures"
"), freed AS ("
"  UPDATE tms.task_slots SET task_instance = NULL, since = NULL"
"   WHERE kind = $1 AND task_instance = $2 AND EXISTS (SELECT 1 FROM done)"
HISTORY_ROW
SETTLED_ROW;

/*
 * Failure: unpick with a backoff, the error as last_error.  $14 base delay
 * (ms), $15 maximum delay (ms).  The backoff doubles with each consecutive
 * failure up to the maximum, and is spread by tms._jitter (between half of
 * it and all of it), so that tasks failing together do not retry as a
 * herd.
 */
static const char *fail_sql =
"WITH done AS ("
"  UPDATE tms.scheduled_tasks"
"     SET picked = false, picked_by = NULL, picked_pid = NULL,"
"         last_heartbeat = NULL, last_failure = now(),"
"         consecutive_failures = consecutive_failures + 1, last_error = $13,"
"         execution_time = now() + tms._jitter(make_interval(secs =>"
"             least($15::float8, $14::float8 * power(2, least(consecutive_failures, 30)))"
"             / 1000.0)),"
"         version = version + 1"
"   WHERE task_name = $1 AND task_instance = $2 AND version = $3"
"  RETURNING execution_time, consecutive_failures"
"), freed AS ("
"  UPDATE tms.task_slots SET task_instance = NULL, since = NULL"
"   WHERE kind = $1 AND task_instance = $2 AND EXISTS (SELECT 1 FROM done)"
HISTORY_ROW
SETTLED_ROW;

static const char *release_slot_sql =
"UPDATE tms.task_slots SET task_instance = NULL, since = NULL"
" WHERE kind = $1 AND task_instance = $2";

/*
 * Dead-lease recovery: $1 the age after which a heartbeat is dead; $2, $3,
 * $4 the leases live processes of this server publish (kind, instance,
 * version), which are never released whatever their heartbeat's age.  A
 * row locked by a transaction in progress is skipped: its holder is busy
 * with it, the next round decides.
 */
static const char *recover_sql =
"WITH live AS ("
"  SELECT * FROM unnest($2::text[], $3::text[], $4::int8[]) AS l(kind, instance, version)"
"), cand AS ("
"  SELECT t.task_name, t.task_instance"
"    FROM tms.scheduled_tasks t"
"   WHERE t.picked AND t.last_heartbeat < now() - $1::interval"
"     AND NOT EXISTS (SELECT 1 FROM live"
"                      WHERE live.kind = t.task_name AND live.instance = t.task_instance"
"                        AND live.version = t.version)"
"     FOR UPDATE OF t SKIP LOCKED"
"), dead AS ("
"  UPDATE tms.scheduled_tasks t"
"     SET picked = false, picked_by = NULL, picked_pid = NULL,"
"         last_heartbeat = NULL, version = t.version + 1"
"    FROM cand"
"   WHERE t.task_name = cand.task_name AND t.task_instance = cand.task_instance"
"  RETURNING t.task_name, t.task_instance, t.consecutive_failures"
"), freed AS ("
"  UPDATE tms.task_slots s SET task_instance = NULL, since = NULL"
"    FROM dead"
"   WHERE s.kind = dead.task_name AND s.task_instance = dead.task_instance"
")"
" SELECT task_name, task_instance, consecutive_failures FROM dead";

/*
 * Slot upkeep: caps of built-in kinds follow their settings; each kind has
 * exactly slots 1..max_concurrency (extra slots go once free); a slot held
 * for over a minute by a task that is not picked (deleted by hand) is
 * freed.  The minute keeps this clear of claims in flight, which write the
 * slot and the task in one transaction.
 */
static const char *sync_caps_sql =
"UPDATE tms.task_kinds k"
"   SET max_concurrency = c.cap"
"  FROM unnest($1::text[], $2::int[]) c(kind, cap)"
" WHERE k.builtin AND k.kind = c.kind AND k.max_concurrency <> c.cap";

static const char *sync_slots_sql =
"WITH added AS ("
"  INSERT INTO tms.task_slots (kind, slot)"
"  SELECT k.kind, g.slot"
"    FROM tms.task_kinds k, generate_series(1, k.max_concurrency) g(slot)"
"  ON CONFLICT DO NOTHING"
"), removed AS ("
"  DELETE FROM tms.task_slots s USING tms.task_kinds k"
"   WHERE s.kind = k.kind AND s.slot > k.max_concurrency"
"     AND s.task_instance IS NULL"
")"
" UPDATE tms.task_slots s SET task_instance = NULL, since = NULL"
"  WHERE s.task_instance IS NOT NULL AND s.since < now() - interval '1 minute'"
"    AND NOT EXISTS (SELECT 1 FROM tms.scheduled_tasks t"
"                     WHERE t.task_name = s.kind"
"                       AND t.task_instance = s.task_instance AND t.picked)";

/* ---------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static char *
interval_text(int64 ms)
{
	return psprintf("%lld milliseconds", (long long) ms);
}

/*
 * Execute one of the statements above through a plan prepared once per
 * process and kept (SPI_keepplan): the claim and settle statements run for
 * every task, and parsing and planning them each time would cost more than
 * running them.  Plans are revalidated by the plan cache when the tables
 * change (an extension re-created, say).
 */
static int
exec_cached(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types,
			Datum *args, const char *nulls, bool read_only)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

		if (p == NULL)
			elog(ERROR, "could not prepare scheduler statement: %s",
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(p) != 0)
			elog(ERROR, "could not keep scheduler statement");
		*plan = p;
	}
	return SPI_execute_plan(*plan, args, nulls, read_only, 0);
}

/*
 * Count a claim, an end or a lost lease of task in tms.stat_tasks, by the
 * transaction that writes it (stats.h); an end counts its run time since
 * the claim.
 */
static void
count_task(const SchedTask *task, int counter)
{
	int64		delta[TMS_STAT_TASK_RUN_US + 1] = {0};

	delta[counter] = 1;
	if (counter == TMS_STAT_TASK_SUCCEEDED || counter == TMS_STAT_TASK_FAILED)
		delta[TMS_STAT_TASK_RUN_US] = Max(GetCurrentTimestamp() - task->heartbeat, 0);
	tms_stat_add(TMS_STAT_TASKS, task->kind, NULL, NULL, delta, lengthof(delta));
}

static int64
dead_lease_ms(void)
{
	return (int64) tms_heartbeat_interval_ms * tms_missed_heartbeats_limit;
}

/*
 * Copy the claimed row out of SPI's result into the caller's context.
 */
static void
read_claimed(SchedTask *task, MemoryContext cxt)
{
	HeapTuple	tup = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	MemoryContext old = MemoryContextSwitchTo(cxt);
	bool		isnull;
	Datum		d;
	char	   *data;

	task->kind = SPI_getvalue(tup, desc, 1);
	task->instance = SPI_getvalue(tup, desc, 2);
	data = SPI_getvalue(tup, desc, 3);
	task->data = data;
	task->version = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	task->heartbeat = DatumGetTimestampTz(SPI_getbinval(tup, desc, 5, &isnull));
	task->execution_time = DatumGetTimestampTz(SPI_getbinval(tup, desc, 6, &isnull));
	task->consecutive_failures = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
	task->handler_name = SPI_getvalue(tup, desc, 8);
	d = SPI_getbinval(tup, desc, 9, &isnull);
	task->handler = isnull ? InvalidOid : DatumGetObjectId(d);
	task->policy_id = task->rule_id = task->table_id = task->job_id = -1;
	task->idle = false;
	MemoryContextSwitchTo(old);
}

void
sched_task_subject(SchedTask *task, int64 policy_id, int64 rule_id, int64 table_id,
				   int64 job_id)
{
	task->policy_id = policy_id;
	task->rule_id = rule_id;
	task->table_id = table_id;
	task->job_id = job_id;
}

void
sched_task_idle(SchedTask *task)
{
	task->idle = true;
}

/* ---------------------------------------------------------------------
 * Claiming
 * --------------------------------------------------------------------- */

/*
 * Prune tms.task_history: a batch of the rows older than
 * tms.task_history_retention, their counts kept in tms.task_run_totals
 * (tms._prune_task_history).  Once every tms.task_history_prune_interval
 * (a minute), or at every call while the last batch was full, so that a
 * busy scheduler's history is pruned as fast as it grows (up to a batch
 * per heartbeat interval).  The kinds' sweeps run after it, in a
 * transaction of their own (sched_run_sweeps): the one place where what
 * tasks left behind is reconciled (the maintenance kind's ends the jobs no
 * task will finish, src/ops/maint.c).
 */
#define HISTORY_PRUNE_BATCH 10000

static TimestampTz history_pruned_at = 0;	/* the last batch's start */
static bool history_behind = false; /* the last batch was full */

bool
sched_history_prune_due(void)
{
	return history_behind ||
		TimestampDifferenceExceeds(history_pruned_at, GetCurrentTimestamp(),
								   tms_task_history_prune_interval_ms);
}

bool
sched_prune_history(void)
{
	Oid			types[2] = {INT4OID, INT4OID};
	Datum		args[2];
	bool		isnull;
	int			rc;

	if (!sched_history_prune_due())
		return false;
	history_pruned_at = GetCurrentTimestamp();
	history_behind = false;		/* a failed batch waits for the next interval */
	args[0] = Int32GetDatum(tms_task_history_retention_s);
	args[1] = Int32GetDatum(HISTORY_PRUNE_BATCH);
	rc = SPI_execute_with_args("SELECT tms._prune_task_history(make_interval(secs => $1), $2)",
							   2, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not prune the task history: %s", SPI_result_code_string(rc));
	history_behind = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 1, &isnull)) >= HISTORY_PRUNE_BATCH;
	return true;
}

void
sched_run_sweeps(void)
{
	for (int i = 0; i < nbuiltins; i++)
		if (builtins[i].sweep)
			builtins[i].sweep();
}

/*
 * Release dead leases, keep the slots in shape.  Called by supervisors
 * every heartbeat interval and by run_pending before it claims.
 */
void
sched_maintain(void)
{
	Oid			cap_types[2] = {TEXTARRAYOID, INT4ARRAYOID};
	Datum		caps[2];
	Datum		kind_datums[MAX_BUILTINS];
	Datum		cap_datums[MAX_BUILTINS];
	Oid			recover_types[4] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID, INT8ARRAYOID};
	Datum		recover_args[4];
	char		recover_nulls[4] = {' ', ' ', ' ', ' '};
	int			rc;

	for (int i = 0; i < nbuiltins; i++)
	{
		kind_datums[i] = CStringGetTextDatum(builtins[i].kind);
		cap_datums[i] = Int32GetDatum(*builtins[i].cap);
	}
	caps[0] = PointerGetDatum(construct_array(kind_datums, nbuiltins, TEXTOID,
											  -1, false, TYPALIGN_INT));
	caps[1] = PointerGetDatum(construct_array(cap_datums, nbuiltins, INT4OID,
											  4, true, TYPALIGN_INT));
	rc = SPI_execute_with_args(sync_caps_sql, 2, cap_types, caps, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not update the caps of built-in task kinds: %s",
			 SPI_result_code_string(rc));
	rc = SPI_execute(sync_slots_sql, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not synchronise task slots: %s",
			 SPI_result_code_string(rc));

	recover_args[0] = CStringGetTextDatum(interval_text(dead_lease_ms()));
	if (!sched_live_leases(&recover_args[1], &recover_args[2], &recover_args[3]))
		recover_nulls[1] = recover_nulls[2] = recover_nulls[3] = 'n';
	rc = SPI_execute_with_args(recover_sql, 4, recover_types, recover_args,
							   recover_nulls, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not recover dead leases: %s",
			 SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		ereport(LOG,
				(errmsg("released the lease on task \"%s\" instance \"%s\": its executor is gone and sent no heartbeat for %d ms",
						SPI_getvalue(tup, desc, 1), SPI_getvalue(tup, desc, 2),
						(int) dead_lease_ms())));
		sched_event_released(SPI_getvalue(tup, desc, 1), SPI_getvalue(tup, desc, 2),
							 DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull)));
	}
}

/*
 * Claim the best due task of the given kinds (NULL: any) that has a free
 * slot.  Returns false when there is none.  The caller commits right after.
 */
bool
sched_claim(const char *picked_by, ArrayType *kinds, SchedTask *task)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TEXTARRAYOID, TEXTOID, INT4OID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;

	if (kinds)
		args[0] = PointerGetDatum(kinds);
	else
		nulls[0] = 'n';
	args[1] = CStringGetTextDatum(picked_by);
	args[2] = Int32GetDatum(MyProcPid);

	rc = exec_cached(&plan, claim_sql, 3, types, args, nulls, false);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim a task: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	read_claimed(task, cxt);
	sched_event_claimed(task, picked_by, false);
	count_task(task, TMS_STAT_TASK_CLAIMED);
	return true;
}

/*
 * Claim the named task whether due or not, for tms.run_task.  Raises an
 * error, and changes nothing, if the task does not exist, if a live lease
 * holds it (the HUDI-7503 rule: two executions of one plan never run at
 * once), or if its kind has no free slot.  A lease whose heartbeat is dead
 * is taken over.
 */
void
sched_claim_given(const char *kind, const char *instance,
				  const char *picked_by, SchedTask *task)
{
	Oid			lock_types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		lock_args[3];
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, INT4OID};
	Datum		args[4];
	MemoryContext cxt = CurrentMemoryContext;
	bool		isnull;
	bool		took_over;
	int			rc;

	lock_args[0] = CStringGetTextDatum(kind);
	lock_args[1] = CStringGetTextDatum(instance);
	lock_args[2] = CStringGetTextDatum(interval_text(dead_lease_ms()));
	rc = SPI_execute_with_args(lock_given_sql, 3, lock_types, lock_args,
							   NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not lock task: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("task \"%s\" instance \"%s\" does not exist", kind, instance)));

	took_over = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										   1, &isnull));
	if (took_over)
	{
		bool		live = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 3, &isnull));
		int64		version = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
														  SPI_tuptable->tupdesc, 4, &isnull));

		/* a live process of this server holds it, whatever its heartbeat */
		live = live || sched_lease_is_live(kind, instance, version);
		if (live)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("task \"%s\" instance \"%s\" is being executed by %s",
							kind, instance,
							SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2)),
					 errdetail("Its lease has a live heartbeat; two executions of one task never run at once."),
					 errhint("Wait for it to finish, or for its lease to expire if its executor died.")));
	}

	/* a dead lease being taken over gives its slot back first */
	rc = SPI_execute_with_args(release_slot_sql, 2, lock_types, lock_args,
							   NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not release task slot: %s", SPI_result_code_string(rc));

	args[0] = lock_args[0];
	args[1] = lock_args[1];
	args[2] = CStringGetTextDatum(picked_by);
	args[3] = Int32GetDatum(MyProcPid);
	rc = SPI_execute_with_args(claim_given_sql, 4, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim task: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no free slot for task kind \"%s\"", kind),
				 errdetail("All slots of the kind are held by running tasks."),
				 errhint("Raise the kind's max_concurrency or retry later.")));
	read_claimed(task, cxt);
	sched_event_claimed(task, picked_by, took_over);
	count_task(task, TMS_STAT_TASK_CLAIMED);
}

/* ---------------------------------------------------------------------
 * Executing and settling
 * --------------------------------------------------------------------- */

/*
 * Run the handler: the SQL procedure recorded for the kind, called by the
 * OID its signature named at the claim, as its owner, restricted, in a GUC
 * nest level of its own (bridge/usercode.h); or the built-in C function.
 */
static void
run_handler(SchedTask *task)
{
	if (task->handler_name != NULL)
	{
		Datum		args[2];
		bool		nulls[2] = {false, false};

		if (!OidIsValid(task->handler))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("the handler procedure %s of task kind \"%s\" no longer exists",
							task->handler_name, task->kind),
					 errhint("Register the kind again with tms.register_task_kind().")));
		args[0] = CStringGetTextDatum(task->instance);
		if (task->data)
			args[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(task->data));
		else
			nulls[1] = true;
		tms_call_procedure_as_owner(task->handler,
									psprintf("task kind \"%s\"", task->kind),
									2, args, nulls);
	}
	else
	{
		SchedHandler fn = builtin_handler(task->kind);

		if (fn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("built-in task kind \"%s\" has no handler in this version of tms",
							task->kind)));
		fn(task);
	}
}

/*
 * The count returned by a settle statement.
 */
static int64
settled_count(int rc)
{
	bool		isnull;

	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not settle task: %s", SPI_result_code_string(rc));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									   1, &isnull));
}

/*
 * The due time and consecutive failures of the row a settle statement of
 * SETTLED_ROW just kept, read after settled_count() found it settled.
 */
static void
settled_after(TimestampTz *execution_time, int *failures)
{
	bool		isnull;

	*execution_time = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 2, &isnull));
	*failures = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											3, &isnull));
}

/*
 * The parameters the settle statements share (see SETTLE_PARAMS), into
 * types, args and nulls: error is the run's failure (NULL: it succeeded).
 */
static char *error_text(const ErrorData *e);

static void
settle_args(SchedTask *task, const ErrorData *error, Oid *types, Datum *args,
			char *nulls)
{
	int64		subject[4] = {task->policy_id, task->rule_id, task->table_id,
	task->job_id};

	types[0] = TEXTOID;
	args[0] = CStringGetTextDatum(task->kind);
	types[1] = TEXTOID;
	args[1] = CStringGetTextDatum(task->instance);
	types[2] = INT8OID;
	args[2] = Int64GetDatum(task->version);
	types[3] = TIMESTAMPTZOID;
	args[3] = TimestampTzGetDatum(task->heartbeat);
	types[4] = INT4OID;
	args[4] = Int32GetDatum(task->consecutive_failures + 1);
	types[5] = INT4OID;
	args[5] = Int32GetDatum(MyProcPid);
	for (int i = 0; i < 4; i++)
	{
		types[6 + i] = INT8OID;
		args[6 + i] = Int64GetDatum(subject[i]);
		nulls[6 + i] = subject[i] < 0 ? 'n' : ' ';
	}
	types[10] = BOOLOID;
	args[10] = BoolGetDatum(!task->idle);
	types[11] = TEXTOID;
	types[12] = TEXTOID;
	if (error != NULL)
	{
		args[11] = CStringGetTextDatum(unpack_sql_state(error->sqlerrcode ? error->sqlerrcode
														: ERRCODE_INTERNAL_ERROR));
		args[12] = CStringGetTextDatum(error_text(error));
	}
	else
		nulls[11] = nulls[12] = 'n';
}

/*
 * Settle a completed task, conditional on the claimed version: a run that
 * succeeded, or that failed for good (error: what its history row
 * records).  Returns false if the lease was lost.
 */
static bool
settle_done(SchedTask *task, const ErrorData *error)
{
	static SPIPlanPtr delete_plan = NULL;
	static SPIPlanPtr keep_plan = NULL;
	Oid			types[SETTLE_PARAMS + 1];
	Datum		args[SETTLE_PARAMS + 1];
	char		nulls[SETTLE_PARAMS + 1];
	const char *new_state;
	TimestampTz due = 0;
	int			failures = task->consecutive_failures;

	memset(nulls, ' ', sizeof(nulls));
	settle_args(task, error, types, args, nulls);
	types[SETTLE_PARAMS] = TIMESTAMPTZOID;
	args[SETTLE_PARAMS] = TimestampTzGetDatum(task->execution_time);

	if (settled_count(exec_cached(&delete_plan, complete_delete_sql, SETTLE_PARAMS + 1,
								  types, args, nulls, false)) > 0)
		new_state = "done";
	else if (settled_count(exec_cached(&keep_plan, complete_keep_sql, SETTLE_PARAMS,
									   types, args, nulls, false)) > 0)
	{
		new_state = "scheduled";
		settled_after(&due, &failures);
	}
	else
		return false;
	count_task(task, error ? TMS_STAT_TASK_FAILED : TMS_STAT_TASK_SUCCEEDED);
	if (error != NULL)
		sched_event_task(task, "failed", "running", new_state, error_text(error),
						 failures, due);
	else
		sched_event_task(task, "succeeded", "running", new_state, NULL, 0, 0);
	return true;
}

/*
 * Record a failure with backoff, and its SQLSTATE and text in the run's
 * history row, conditional on the claimed version.  Returns false if the
 * lease was lost.
 */
static bool
settle_failed(SchedTask *task, const ErrorData *error)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[SETTLE_PARAMS + 2];
	Datum		args[SETTLE_PARAMS + 2];
	char		nulls[SETTLE_PARAMS + 2];
	TimestampTz retry_at;
	int			failures;

	memset(nulls, ' ', sizeof(nulls));
	settle_args(task, error, types, args, nulls);
	types[SETTLE_PARAMS] = INT4OID;
	args[SETTLE_PARAMS] = Int32GetDatum(tms_retry_delay_ms);
	types[SETTLE_PARAMS + 1] = INT4OID;
	args[SETTLE_PARAMS + 1] = Int32GetDatum(tms_retry_delay_max_ms);
	if (settled_count(exec_cached(&plan, fail_sql, SETTLE_PARAMS + 2, types, args,
								  nulls, false)) == 0)
		return false;
	settled_after(&retry_at, &failures);
	count_task(task, TMS_STAT_TASK_FAILED);
	sched_event_task(task, "failed", "running", "failing", error_text(error),
					 failures, retry_at);
	return true;
}

/* ---------------------------------------------------------------------
 * Sessions
 * --------------------------------------------------------------------- */

/*
 * In a session (CALL tms.run_pending, tms.run_task) tms's statements run
 * with the search_path of bridge/usercode.h, not the caller's.  A
 * procedure that commits can carry no SET clause, and a commit pops every
 * GUC nest level, so every transaction of the procedure sets it again:
 * sched_session_begin() after SPI_connect_ext(), sched_session_commit()
 * in place of SPI_commit(), sched_session_end() before SPI_finish().  An
 * error aborts the transaction, which pops the level; the caller forgets
 * it then with sched_session_forget() (in PG_FINALLY: a no-op after
 * sched_session_end()).
 */
static bool session_active = false;
static int	session_nestlevel = 0;

void
sched_session_begin(void)
{
	session_nestlevel = tms_push_safe_search_path();
	session_active = true;
}

void
sched_session_commit(void)
{
	if (session_active)
		tms_pop_search_path(session_nestlevel);
	SPI_commit();
	if (session_active)
		session_nestlevel = tms_push_safe_search_path();
}

void
sched_session_end(void)
{
	if (session_active)
		tms_pop_search_path(session_nestlevel);
	session_active = false;
}

void
sched_session_forget(void)
{
	session_active = false;
}

/* ---------------------------------------------------------------------
 * Detached kinds
 * --------------------------------------------------------------------- */

/*
 * Run fn(arg) in a short transaction of its own, with SPI connected and a
 * snapshot pushed, and commit it.  For detached handlers (see the file
 * header for the two ways).  An error fn raises propagates with the
 * transaction aborted by whoever catches it (the pool worker's guard, or
 * the end of the CALL).  fn starts in the caller's memory context, which
 * is current again on return; mind that every SPI call leaves SPI's own
 * context current, so fn must switch back before allocating what is to
 * survive the step.
 */
void
sched_step(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (IsTransactionState())
	{
		/* session: inside a non-atomic procedure, between its commits */
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(cxt);
		fn(arg);
		PopActiveSnapshot();
		SPI_finish();
		sched_session_commit();
	}
	else
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(cxt);
		fn(arg);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	MemoryContextSwitchTo(cxt);
}

/* sched_try_step's work in its subtransaction: fn with SPI and a snapshot. */
typedef struct TryStep
{
	void		(*fn) (void *arg);
	void	   *arg;
} TryStep;

static void
try_step_body(void *arg)
{
	TryStep    *t = (TryStep *) arg;
	MemoryContext cxt = CurrentMemoryContext;

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(cxt);
	t->fn(t->arg);
	PopActiveSnapshot();
	SPI_finish();
}

/*
 * Like sched_step(), but an error fn raises is returned as a value: the
 * step's work is rolled back (a subtransaction around fn,
 * bridge/subxact.h), its transaction ends, and false is returned with
 * *error (copied in the caller's context).  A query cancel, a termination
 * and running out of memory are raised again, not returned: the executor
 * must stop (tms_error_must_propagate).
 */
bool
sched_try_step(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		session = IsTransactionState();
	TryStep		t;
	bool		ok;

	if (!session)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
	}
	MemoryContextSwitchTo(cxt);
	t.fn = fn;
	t.arg = arg;
	ok = tms_try_subxact(try_step_body, &t, error);
	if (session)
		sched_session_commit();
	else
		CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return ok;
}

typedef struct DetachedSettle
{
	SchedTask  *task;
	bool		retry;			/* SCHED_FAILED: retried after a backoff */
	ErrorData  *error;			/* NULL: the run succeeded */
	bool		settled;		/* false: the lease was lost */
} DetachedSettle;

static void
settle_detached_step(void *arg)
{
	DetachedSettle *s = (DetachedSettle *) arg;

	if (s->retry)
		s->settled = settle_failed(s->task, s->error);
	else
		s->settled = settle_done(s->task, s->error);
}

/*
 * Execute a task of a detached kind: run its handler outside transactions,
 * then settle the task in a step of its own, conditional on the claimed
 * version.  A failure is returned in *error as an ErrorData (in the
 * caller's memory context) like a failure of an ordinary handler.
 */
static SchedOutcome
execute_detached(SchedTask *task, ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	SchedDetachedHandler fn = detached_handler(task->kind);
	ErrorData  *failure = NULL;
	SchedOutcome outcome;
	DetachedSettle settle;

	outcome = fn(task, &failure);
	MemoryContextSwitchTo(cxt);
	if (outcome != SCHED_LEASE_LOST)
	{
		if (outcome == SCHED_FAILED && failure == NULL)
			failure = sched_error(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
								  "task failed", NULL);
		settle.task = task;
		settle.retry = outcome == SCHED_FAILED;
		settle.error = failure;
		settle.settled = false;
		sched_step(settle_detached_step, &settle);
		if (!settle.settled)
			outcome = SCHED_LEASE_LOST;
	}
	if (outcome == SCHED_LEASE_LOST)
	{
		count_task(task, TMS_STAT_TASK_LEASE_LOST);
		ereport(WARNING,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lost the lease on task \"%s\" instance \"%s\"; it stopped without settling",
						task->kind, task->instance),
				 errdetail("The task row no longer has version " INT64_FORMAT ".",
						   task->version)));
		return outcome;
	}
	if (outcome == SCHED_FAILED)
		*error = failure;
	return outcome;
}

/* "message (detail)" of an error, as last_error records it. */
static char *
error_text(const ErrorData *e)
{
	return e->detail ? psprintf("%s (%s)", e->message, e->detail) : pstrdup(e->message);
}

typedef struct OwnerStep
{
	void		(*fn) (void *arg);
	void	   *arg;
} OwnerStep;

static void
as_owner(void *arg)
{
	OwnerStep  *os = arg;
	TmsRoleSave save;

	tms_become_extension_owner(&save);
	os->fn(os->arg);
	tms_restore_role(&save);
}

void
sched_owner_step(void (*fn) (void *arg), void *arg)
{
	OwnerStep	os = {fn, arg};

	sched_step(as_owner, &os);
}

bool
sched_owner_try_step(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	OwnerStep	os = {fn, arg};

	return sched_try_step(as_owner, &os, error);
}

ErrorData *
sched_error(int sqlerrcode, const char *message, const char *detail)
{
	ErrorData  *e = palloc0(sizeof(ErrorData));

	e->elevel = ERROR;
	e->sqlerrcode = sqlerrcode;
	e->message = pstrdup(message);
	e->detail = detail ? pstrdup(detail) : NULL;
	e->assoc_context = CurrentMemoryContext;
	return e;
}

void
sched_rethrow(ErrorData *e)
{
	/*
	 * Not ReThrowError(): an error a detached handler reported was never
	 * thrown, and lacks what that needs to reach the client and the log.
	 */
	ereport(ERROR,
			(errcode(e->sqlerrcode ? e->sqlerrcode : ERRCODE_INTERNAL_ERROR),
			 errmsg_internal("%s", e->message ? e->message : "task failed"),
			 e->detail ? errdetail_internal("%s", e->detail) : 0,
			 e->hint ? errhint("%s", e->hint) : 0,
			 e->context ? errcontext("%s", e->context) : 0));
	pg_unreachable();
}

/*
 * Execute a claimed task and settle it; see the file header.  Must be
 * called in a transaction with SPI connected; the caller commits.  When the
 * handler failed, *error is its error (in the caller's memory context);
 * after committing, the caller should re-raise a query cancel
 * (ERRCODE_QUERY_CANCELED) so that an interactive CALL stops.
 */
SchedOutcome
sched_execute(SchedTask *task, ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile SchedOutcome outcome = SCHED_DONE;
	ErrorData  *volatile edata = NULL;

	*error = NULL;
	if (sched_kind_detached(task->kind))
	{
		volatile SchedOutcome o = SCHED_FAILED;

		/* network waits of the handler end when the lease is lost */
		tms_io_extra_interrupt = sched_lease_lost;
		PG_TRY();
		{
			o = execute_detached(task, error);
		}
		PG_FINALLY();
		{
			tms_io_extra_interrupt = NULL;
		}
		PG_END_TRY();
		return o;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		run_handler(task);
		if (settle_done(task, NULL))
		{
			ReleaseCurrentSubTransaction();
			outcome = SCHED_DONE;
		}
		else
		{
			/* our lease is gone: the handler's work must not be written */
			RollbackAndReleaseCurrentSubTransaction();
			outcome = SCHED_LEASE_LOST;
		}
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		outcome = SCHED_FAILED;
	}
	PG_END_TRY();

	if (outcome == SCHED_LEASE_LOST)
	{
		count_task(task, TMS_STAT_TASK_LEASE_LOST);
		ereport(WARNING,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lost the lease on task \"%s\" instance \"%s\"; its work was rolled back",
						task->kind, task->instance),
				 errdetail("The task row no longer has version " INT64_FORMAT ".",
						   task->version)));
		return outcome;
	}
	if (outcome == SCHED_DONE)
		return outcome;

	*error = edata;
	if (!settle_failed(task, edata))
	{
		count_task(task, TMS_STAT_TASK_LEASE_LOST);
		outcome = SCHED_LEASE_LOST;
	}
	return outcome;
}
