-- Maintenance policies, part 4: evaluations and the life of a maintenance
-- job: recording an evaluation and submitting its job, starting jobs under
-- tms.max_active_operations, finishing them, log retention, and
-- tms.evaluate_now.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- Record one evaluation (called by the cycle): the log row, and for a
-- true result the job and its task, guarded so that a (table, rule) never
-- has two operations in flight.  p_version is the version of the rule
-- evaluated (NULL: the current one); the rule's row is locked against
-- tms.alter_rule (KEY SHARE: it conflicts with alter_rule's FOR UPDATE,
-- not with the crontab bookkeeping's updates), and a result of a version
-- since replaced submits
-- nothing ("superseded": the pair stays a candidate, for the new
-- version).  p_score is the rule's score over the table (NULL: the rule
-- has none, 0 counts); the job's task is due at its rank, now() - score x
-- tms.score_aging, the score clamped to 0 .. 10000: the claim takes due
-- tasks in due-time order, so a job ranks as if it had already waited
-- that long (doc/policies.md, "Scores and the order of jobs").  Returns
-- the job id (NULL if none) and the decision.
CREATE OR REPLACE FUNCTION tms._record_evaluation(p_policy integer, p_rule bigint, p_table bigint,
                                       p_counters jsonb, p_metrics jsonb,
                                       p_result boolean, p_outcome text,
                                       p_explanation text, p_explain jsonb,
                                       p_error text, p_version integer DEFAULT NULL,
                                       p_score double precision DEFAULT NULL,
                                       p_score_explanation text DEFAULT NULL,
                                       OUT job_id bigint, OUT decision text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r tms.maintenance_rules;
    p tms.maintenance_policies;
    t tms.tables;
    jid bigint;
    thr jsonb;
    cond text;
    rank timestamptz;
    bid bigint;
BEGIN
    SELECT * INTO r FROM tms.maintenance_rules WHERE id = p_rule FOR KEY SHARE;
    SELECT * INTO p FROM tms.maintenance_policies WHERE id = p_policy;
    SELECT * INTO t FROM tms.tables WHERE id = p_table;
    p_version := coalesce(p_version, r.version);
    IF p_result IS NULL THEN
        decision := 'failed';           -- retried at the next cycle
    ELSIF p_version IS DISTINCT FROM r.version THEN
        decision := 'superseded';       -- evaluated again with the new version
    ELSIF p_result THEN
        jid := nextval(pg_get_serial_sequence('tms.table_maintenance_job', 'id'));
        UPDATE tms.rule_baselines b
           SET pending_job = jid, triggered = false, last_evaluated_at = now()
         WHERE b.rule_id = p_rule AND b.table_id = p_table AND b.pending_job IS NULL;
        IF FOUND THEN
            rank := now() - make_interval(secs => tms._score_clamp(p_score)
                                                  * tms._score_aging_s());
            bid := tms._open_batch(r, jid);
            INSERT INTO tms.table_maintenance_job
                   (id, table_id, rule_id, rule_version, policy_id, operation, engine,
                    options, task_kind, task_instance, before_snapshot_id, score, rank_at,
                    batch_id)
            VALUES (jid, p_table, p_rule, r.version, p_policy, r.operation, r.engine, r.options,
                    'maintenance', CASE WHEN bid IS NULL THEN 'job-' || jid
                                        ELSE 'batch-' || bid END,
                    t.snapshot_id, p_score, rank, bid);
            IF bid IS NULL THEN
                PERFORM tms.schedule_task('maintenance', 'job-' || jid,
                                          jsonb_build_object('job_id', jid), run_at => rank);
            ELSIF bid = jid THEN
                -- a new batch: its task waits a little for the other
                -- candidates of the evaluation to join
                PERFORM tms.schedule_task('maintenance', 'batch-' || bid,
                                          jsonb_build_object('batch_id', bid),
                                          run_at => greatest(rank, now() + interval '5 seconds'));
            ELSE
                -- joined: the batch is due at its best-ranked job, once
                -- its first job's 5 seconds are over
                rank := greatest(rank, (SELECT o.created_at FROM tms.table_maintenance_job o
                                         WHERE o.id = bid) + interval '5 seconds');
                UPDATE tms.scheduled_tasks st SET execution_time = rank
                 WHERE st.task_name = 'maintenance' AND st.task_instance = 'batch-' || bid
                   AND NOT st.picked AND st.execution_time > rank;
            END IF;
            job_id := jid;
            decision := 'submitted';
        ELSE
            decision := 'already-pending';
        END IF;
    ELSE
        -- not needed now: wait for the next commit, or another time-elapsed period
        UPDATE tms.rule_baselines b
           SET triggered = false, last_evaluated_at = now(),
               due_at = CASE WHEN r.time_threshold_ms IS NULL THEN NULL
                             ELSE now() + make_interval(secs => r.time_threshold_ms / 1000.0) END
         WHERE b.rule_id = p_rule AND b.table_id = p_table AND b.pending_job IS NULL;
        decision := 'not-needed';
    END IF;
    -- the log row shows the version that decided
    thr := jsonb_strip_nulls(jsonb_build_object('commits-added', r.commits_threshold,
                                                'bytes-added', r.bytes_threshold,
                                                'time-elapsed', r.time_threshold_ms));
    cond := r.condition;
    IF p_version IS DISTINCT FROM r.version THEN
        SELECT v.definition -> 'counters', v.definition ->> 'condition' INTO thr, cond
          FROM tms.rule_versions v WHERE v.rule_id = p_rule AND v.version = p_version;
    END IF;
    INSERT INTO tms.evaluation_log (policy_id, policy_name, rule_id, rule_version, operation,
                                    table_id, server, namespace, table_name, thresholds,
                                    condition, counters, metrics, result, outcome,
                                    explanation, explain, error, decision, job_id,
                                    score, score_explanation)
    VALUES (p_policy, p.name, p_rule, p_version, r.operation, p_table, t.server, t.namespace,
            t.table_name, coalesce(thr, '{}'), coalesce(cond, ''), p_counters, p_metrics, p_result, p_outcome, p_explanation,
            p_explain, p_error, decision, job_id, p_score, p_score_explanation);
END
$$;

-- The batch a new job jid of rule r joins (doc/policies.md, "Batches"):
-- NULL when the rule does not batch (its option batch-size absent or 1;
-- only snapshot-expiry on engine local takes it, tms._check_operation);
-- else the rule's open batch: the newest in flight whose task no executor
-- has claimed yet (its row is locked here, so a claim waits for this
-- transaction and then runs the job too, or comes first and the batch is
-- closed), whose jobs have not started and which has fewer than
-- batch-size jobs; else jid, the first job of a new batch.  One batch is
-- filled at a time per rule (an advisory lock per rule).
CREATE OR REPLACE FUNCTION tms._open_batch(r tms.maintenance_rules, jid bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    size integer;
    bid bigint;
BEGIN
    IF r.operation <> 'snapshot-expiry' OR r.engine <> 'local'
       OR jsonb_typeof(r.options -> 'batch-size') IS DISTINCT FROM 'number' THEN
        RETURN NULL;
    END IF;
    size := (r.options ->> 'batch-size')::numeric::integer;
    IF size <= 1 THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(7368, (r.id % 2147483647)::integer);
    SELECT max(o.batch_id) INTO bid
      FROM tms.table_maintenance_job o
     WHERE o.finished_at IS NULL AND o.rule_id = r.id AND o.batch_id IS NOT NULL;
    IF bid IS NOT NULL THEN
        PERFORM 1 FROM tms.scheduled_tasks st
         WHERE st.task_name = 'maintenance' AND st.task_instance = 'batch-' || bid
           AND NOT st.picked
           FOR UPDATE;
        IF NOT FOUND
           OR (SELECT count(*) FROM tms.table_maintenance_job o WHERE o.batch_id = bid) >= size
           OR EXISTS (SELECT 1 FROM tms.table_maintenance_job o
                       WHERE o.batch_id = bid AND (o.attempts > 0 OR o.state <> 'pending')) THEN
            bid := NULL;
        END IF;
    END IF;
    RETURN coalesce(bid, jid);
END
$$;

REVOKE ALL ON FUNCTION tms._open_batch(tms.maintenance_rules, bigint) FROM PUBLIC;

-- A score as it ranks a job: 0 .. 10000 (NULL, NaN and below 0: 0).
CREATE OR REPLACE FUNCTION tms._score_clamp(score double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN score IS NULL OR score = 'NaN'::float8 OR score <= 0 THEN 0
                WHEN score >= 10000 THEN 10000
                ELSE score END
$$;

-- tms.score_aging in seconds (the setting's default when tms is not loaded).
CREATE OR REPLACE FUNCTION tms._score_aging_s()
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT extract(epoch FROM coalesce(nullif(current_setting('tms.score_aging', true), ''),
                                       '1min')::interval)::float8
$$;

-- The place of an operation in the chain of one table's operations of
-- Gravitino's table maintenance service design
-- (https://github.com/apache/gravitino/pull/13386): data files first,
-- then delete files, manifests, snapshots, and orphans last; retention,
-- which removes data files, before them all.
CREATE OR REPLACE FUNCTION tms._chain_rank(operation text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE operation
               WHEN 'retention' THEN 0
               WHEN 'compaction' THEN 1
               WHEN 'position-delete-rewrite' THEN 2
               WHEN 'manifest-rewrite' THEN 3
               WHEN 'snapshot-expiry' THEN 4
               WHEN 'orphan-cleanup' THEN 5
               ELSE 6 END
$$;

-- Whether a job on this engine is handed to tms.maintenance_handler: an
-- engine that is neither "local" nor a tms_engine server tms follows
-- itself.  The one statement of it: _start_job and _reconcile_jobs here,
-- and the maintenance kind's start of a job (src/ops/maint.c), ask it.
CREATE OR REPLACE FUNCTION tms._handed_to_handler(engine text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT engine <> 'local'
       AND NOT EXISTS (SELECT 1 FROM pg_foreign_server s
                         JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
                        WHERE w.fdwname = 'tms_engine' AND s.srvname = engine)
$$;

REVOKE ALL ON FUNCTION tms._handed_to_handler(text) FROM PUBLIC;

-- Whether job jid may start (or resume) now, and if so mark it running.
-- Called by the "maintenance" task's handler (src/ops/maint.c) in a short
-- step, as the extension owner.  Returns
--   gone      the job is finished, cancelled or no longer exists;
--   deferred  not now (reason says why); the task is due again at retry_at;
--   skipped   never (reason says why): the job ended so;
--   started   the job is running: job holds it with its table.
-- Gates, in order: a cancel request; for a job that has done nothing yet
-- (phase "start") from a policy: the rule and policy still exist and no
-- nearer group's rule overrides the rule on the table (tms._rule_wins;
-- else skipped), the policy and the rule are active and their windows
-- open (else deferred);
-- one job at a time per (table, operation); a policy's job waits for the
-- jobs of the same policy and table earlier in the chain (tms._chain_rank);
-- its rule's and policy's budgets and its engine server's
-- max_concurrent_jobs (tms._budget_check; reason "waiting for budget: ...",
-- due again when the budget frees, in the order of its budget's queue);
-- at most tms.max_active_operations running jobs, counting a job only
-- while a live executor holds its task (or, for tms.maintenance_handler's
-- engines, while it runs there).  Serialised by an advisory lock so that a
-- count and a start are one step.  A deferred start is due again after a
-- jittered wait (tms._jitter), so that jobs deferred together do not all
-- come back at once.
CREATE OR REPLACE FUNCTION tms._start_job(jid bigint,
                               OUT state text, OUT reason text,
                               OUT retry_at timestamptz, OUT job jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
    p tms.maintenance_policies;
    rr tms.maintenance_rules;
    other bigint;
    running integer;
    wait_key text;
BEGIN
    PERFORM pg_advisory_xact_lock(7367, 1);
    SELECT * INTO j FROM tms.table_maintenance_job WHERE id = jid FOR UPDATE;
    IF NOT FOUND OR j.finished_at IS NOT NULL THEN
        state := 'gone';
        RETURN;
    END IF;
    IF j.cancel_requested AND j.phase = 'start' THEN
        UPDATE tms.table_maintenance_job
           SET state = 'cancelled', finished_at = now(),
               reason = coalesce(reason, 'cancelled before it started')
         WHERE id = jid;
        PERFORM tms._job_ended(jid);
        state := 'gone';
        RETURN;
    END IF;
    IF j.policy_id IS NOT NULL AND j.phase = 'start' THEN
        SELECT * INTO p FROM tms.maintenance_policies WHERE id = j.policy_id;
        IF FOUND THEN
            SELECT * INTO rr FROM tms.maintenance_rules r WHERE r.id = j.rule_id;
        END IF;
        IF NOT FOUND THEN
            reason := 'its policy or rule no longer exists';
        ELSIF NOT tms._rule_wins(j.rule_id, j.table_id) THEN
            -- a nearer group got a rule of the operation since
            reason := format('rule %s is overridden on this table (tms.effective_rules)', j.rule_id);
        END IF;
        IF reason IS NOT NULL THEN
            UPDATE tms.table_maintenance_job
               SET state = 'skipped', finished_at = now(), reason = _start_job.reason
             WHERE id = jid;
            PERFORM tms._job_ended(jid);
            state := 'skipped';
            RETURN;
        END IF;
        IF NOT p.active THEN
            state := 'deferred';
            reason := format('policy "%s" is inactive', p.name);
            retry_at := now() + tms._jitter(interval '1 minute');
        ELSIF NOT tms.window_open(p.time_window, now()) THEN
            state := 'deferred';
            reason := format('the time window of policy "%s" is closed', p.name);
            retry_at := now() + tms._jitter(interval '1 minute');
        ELSIF NOT rr.active THEN
            state := 'deferred';
            reason := format('rule %s is inactive', rr.id);
            retry_at := now() + tms._jitter(interval '1 minute');
        ELSIF NOT tms.window_open(rr.time_window, now()) THEN
            state := 'deferred';
            reason := format('the time window of rule %s is closed', rr.id);
            retry_at := now() + tms._jitter(interval '1 minute');
        END IF;
    END IF;
    IF state IS NULL THEN
        SELECT o.id INTO other FROM tms.table_maintenance_job o
         WHERE o.table_id = j.table_id AND o.operation = j.operation AND o.id <> jid
           AND o.state = 'running' AND o.finished_at IS NULL
         LIMIT 1;
        IF FOUND THEN
            state := 'deferred';
            reason := format('job %s runs %s on this table', other, j.operation);
            retry_at := now() + tms._jitter(interval '5 seconds');
        END IF;
    END IF;
    IF state IS NULL AND j.policy_id IS NOT NULL AND j.phase = 'start' THEN
        -- the chain of Gravitino's table maintenance service design: a
        -- policy's operations on one table run one after the other,
        -- compaction first, snapshot expiry last
        SELECT o.id, o.operation INTO other, reason FROM tms.table_maintenance_job o
         WHERE o.table_id = j.table_id AND o.policy_id = j.policy_id AND o.id <> jid
           AND o.finished_at IS NULL
           AND tms._chain_rank(o.operation) < tms._chain_rank(j.operation)
         ORDER BY tms._chain_rank(o.operation), o.id
         LIMIT 1;
        IF FOUND THEN
            state := 'deferred';
            reason := format('waits for job %s (%s) of its chain on this table', other, reason);
            retry_at := now() + tms._jitter(interval '2 seconds');
        ELSE
            reason := NULL;
        END IF;
    END IF;
    IF state IS NULL AND j.phase = 'start' THEN
        -- budgets (tms._budget_check): the rule's and its policy's at a
        -- job's first start, its engine server's jobs at once at every
        -- start of a run there; a job over budget waits in its budget's
        -- queue (budget_wait), in the order of the job ids
        SELECT b.wait, b.key, b.retry_at INTO reason, wait_key, retry_at
          FROM tms._budget_check(CASE WHEN j.started_at IS NULL THEN j.rule_id END,
                                 j.engine, jid) b;
        IF reason IS NOT NULL THEN
            state := 'deferred';
        END IF;
    END IF;
    IF state IS NULL THEN
        -- a job counts while a worker holds its task (local jobs and
        -- those of tms_engine servers, which a worker follows); a job
        -- handed to tms.maintenance_handler while it runs there (until
        -- tms.finish_operation)
        SELECT count(*) INTO running
          FROM tms.table_maintenance_job o
         WHERE o.finished_at IS NULL AND o.state = 'running' AND o.id <> jid
           AND (tms._handed_to_handler(o.engine)
                OR EXISTS (SELECT 1 FROM tms.scheduled_tasks t
                            WHERE t.task_name = o.task_kind AND t.task_instance = o.task_instance
                              AND t.picked));
        IF running >= current_setting('tms.max_active_operations')::integer THEN
            state := 'deferred';
            reason := format('%s operations run (tms.max_active_operations)', running);
            retry_at := now() + tms._jitter(interval '2 seconds');
        END IF;
    END IF;
    IF state = 'deferred' THEN
        UPDATE tms.table_maintenance_job
           SET reason = _start_job.reason, budget_wait = wait_key
         WHERE id = jid;
        RETURN;
    END IF;
    UPDATE tms.table_maintenance_job
       SET state = 'running', started_at = coalesce(started_at, now()),
           attempts = attempts + 1, reason = NULL, budget_wait = NULL
     WHERE id = jid
    RETURNING * INTO j;
    state := 'started';
    SELECT to_jsonb(j) || jsonb_build_object('namespace', t.namespace,
                                             'table_name', t.table_name,
                                             'server', t.server,
                                             'acting_role',
                                             coalesce(j.requested_by,
                                                      (SELECT mp.owner::oid FROM tms.maintenance_policies mp
                                                        WHERE mp.id = j.policy_id))::bigint)
      INTO job
      FROM tms.tables t
     WHERE t.id = j.table_id;
END
$$;

-- After a job ended (any outcome; every end of a job comes here): it is
-- counted in tms.stat_maintenance; its (table, rule) baseline is reset, so
-- the counters measure activity since this run and the pair is evaluated
-- again, though not before the rule's min_interval (minIntervalMs of
-- Gravitino's table maintenance service design) has passed, or its
-- back-off when the job changed nothing (63_cadence.sql); old snapshot
-- metrics are pruned.
CREATE OR REPLACE FUNCTION tms._job_ended(jid bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
BEGIN
    SELECT * INTO j FROM tms.table_maintenance_job WHERE id = jid;
    IF FOUND THEN
        PERFORM tms._stat_count_job(j.operation, j.engine, j.state,
                                    (extract(epoch FROM j.finished_at
                                                        - coalesce(j.started_at, j.finished_at))
                                     * 1e6)::bigint,
                                    j.files_deleted, j.bytes_deleted);
        IF EXISTS (SELECT 1 FROM tms.rule_baselines b
                    WHERE b.rule_id = j.rule_id AND b.table_id = j.table_id
                      AND b.pending_job = j.id) THEN
            PERFORM tms._reset_baseline(j.rule_id, j.table_id);
            PERFORM tms._adapt_cadence(j.id);   -- a job that changed nothing backs off
        END IF;
    END IF;
    -- a place under tms.max_active_operations is free: the jobs deferred
    -- for want of one are due again at their rank, so the best-ranked
    -- starts next (not the one whose deferral happened to end first)
    UPDATE tms.scheduled_tasks st
       SET execution_time = o.rank_at
      FROM tms.table_maintenance_job o
     WHERE o.finished_at IS NULL AND o.state = 'pending' AND o.rank_at IS NOT NULL
       AND o.reason LIKE '%(tms.max_active_operations)'
       AND st.task_name = o.task_kind AND st.task_instance = o.task_instance
       AND NOT st.picked AND st.execution_time > o.rank_at;
    DELETE FROM tms.table_snapshot_metrics
     WHERE recorded_at < now() - current_setting('tms.snapshot_metrics_retention')::interval;
END
$$;

-- Reconcile the jobs nothing will ever finish (called with the run
-- history's prune, src/sched/sched.c, through the maintenance kind's
-- sweep, src/ops/maint.c): a job in flight whose task is gone (deleted by
-- hand, or lost), other than a job handed to tms.maintenance_handler,
-- whose task ends on purpose when the handler took it (a job younger than
-- a minute is left alone: its task may be on its way); and a job handed
-- to tms.maintenance_handler that has not called tms.finish_operation
-- within handler_timeout since it was handed over (NULL or zero: never).
-- Each ends "failed" with the reason in last_error, through tms._job_ended,
-- so its (table, rule) is evaluated again and its table's next job of the
-- operation may start.  A job locked by a step in progress is left to the
-- next round.  Returns how many ended.
CREATE OR REPLACE FUNCTION tms._reconcile_jobs(handler_timeout interval)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j record;
    n integer := 0;
BEGIN
    FOR j IN
        SELECT o.id,
               CASE WHEN ext.handed THEN
                        format('the job was handed to tms.maintenance_handler at %s and did not finish'
                               ' within tms.handler_job_timeout (%s)', o.started_at, handler_timeout)
                    ELSE format('its task "%s" instance "%s" no longer exists',
                                o.task_kind, o.task_instance)
               END AS why
          FROM tms.table_maintenance_job o,
               LATERAL (SELECT o.state = 'running'
                               AND tms._handed_to_handler(o.engine) AS handed) ext
         WHERE o.finished_at IS NULL AND o.task_kind IS NOT NULL
           AND CASE WHEN ext.handed THEN
                        coalesce(handler_timeout > interval '0', false)
                        AND o.started_at < now() - handler_timeout
                    ELSE o.created_at < now() - interval '1 minute'
                         AND NOT EXISTS (SELECT 1 FROM tms.scheduled_tasks t
                                      WHERE t.task_name = o.task_kind
                                        AND t.task_instance = o.task_instance)
               END
         ORDER BY o.id
         FOR UPDATE OF o SKIP LOCKED
    LOOP
        UPDATE tms.table_maintenance_job
           SET state = 'failed', finished_at = now(), last_error = j.why
         WHERE id = j.id AND finished_at IS NULL;
        IF FOUND THEN
            PERFORM tms._job_ended(j.id);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

REVOKE ALL ON FUNCTION tms._reconcile_jobs(interval) FROM PUBLIC;

-- Finish a job run by an external executor (a procedure named by
-- tms.maintenance_handler, for engines tms does not run itself): record
-- the outcome and reset the (table, rule) baseline.
CREATE OR REPLACE FUNCTION tms.finish_operation(job_id bigint, outcome text DEFAULT 'succeeded',
                                     after_snapshot_id bigint DEFAULT NULL,
                                     message text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
BEGIN
    IF outcome IS NULL OR outcome NOT IN ('succeeded', 'failed', 'skipped', 'cancelled') THEN
        RAISE EXCEPTION 'invalid job outcome "%"', outcome
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Outcomes are succeeded, failed, skipped and cancelled.';
    END IF;
    UPDATE tms.table_maintenance_job mj
       SET state = outcome, finished_at = now(),
           started_at = coalesce(mj.started_at, now()),
           after_snapshot_id = finish_operation.after_snapshot_id,
           message = finish_operation.message,
           last_error = CASE WHEN outcome = 'failed' THEN finish_operation.message END
     WHERE mj.id = job_id AND mj.finished_at IS NULL
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM tms._job_ended(j.id);
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION tms.finish_operation(bigint, text, bigint, text) FROM PUBLIC;

-- Retention: delete log rows older than tms.evaluation_log_retention, at
-- most batch rows per call; returns how many.
CREATE OR REPLACE FUNCTION tms.prune_evaluation_log(batch integer DEFAULT 1000)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH old AS (
        SELECT id FROM tms.evaluation_log
         WHERE evaluated_at < now() - current_setting('tms.evaluation_log_retention')::interval
         ORDER BY evaluated_at
         LIMIT batch),
    del AS (DELETE FROM tms.evaluation_log l USING old WHERE l.id = old.id RETURNING 1)
    SELECT count(*)::integer FROM del
$$;

REVOKE ALL ON FUNCTION tms.prune_evaluation_log(integer) FROM PUBLIC;

-- One evaluation cycle for one policy, now: refresh its tables, find its
-- candidates, evaluate, log, submit.  Returns one row per evaluation.
-- force evaluates even an inactive policy or one whose window is closed.
CREATE OR REPLACE FUNCTION tms.evaluate_now(policy text, force boolean DEFAULT false)
RETURNS TABLE (rule_id bigint, operation text, namespace text, table_name text,
               result boolean, decision text, job_id bigint, explanation text)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_evaluate_now';

COMMENT ON FUNCTION tms.evaluate_now(text, boolean) IS
    'evaluate one policy now (as its owner): refresh its tables, evaluate its candidates, submit; one row per evaluation';

-- The acting role must own the policy (it runs as the policy's owner).
GRANT EXECUTE ON FUNCTION tms.evaluate_now(text, boolean) TO PUBLIC;
