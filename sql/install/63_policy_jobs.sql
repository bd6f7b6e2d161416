-- Maintenance policies, part 4: evaluations and the life of a maintenance
-- job: recording an evaluation and submitting its job, starting jobs under
-- tms.max_active_operations, finishing them, log retention, and
-- tms.evaluate_now.

-- Record one evaluation (called by the cycle): the log row, and for a
-- true result the job and its task, guarded so that a (table, rule) never
-- has two operations in flight.  Returns the job id (NULL if none) and
-- the decision.
CREATE FUNCTION tms._record_evaluation(p_policy integer, p_rule bigint, p_table bigint,
                                       p_counters jsonb, p_metrics jsonb,
                                       p_result boolean, p_outcome text,
                                       p_explanation text, p_explain jsonb,
                                       p_error text,
                                       OUT job_id bigint, OUT decision text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r tms.maintenance_rules;
    p tms.maintenance_policies;
    t tms.tables;
    jid bigint;
BEGIN
    SELECT * INTO r FROM tms.maintenance_rules WHERE id = p_rule;
    SELECT * INTO p FROM tms.maintenance_policies WHERE id = p_policy;
    SELECT * INTO t FROM tms.tables WHERE id = p_table;
    IF p_result IS NULL THEN
        decision := 'failed';           -- retried at the next cycle
    ELSIF p_result THEN
        jid := nextval(pg_get_serial_sequence('tms.table_maintenance_job', 'id'));
        UPDATE tms.rule_baselines b
           SET pending_job = jid, triggered = false, last_evaluated_at = now()
         WHERE b.rule_id = p_rule AND b.table_id = p_table AND b.pending_job IS NULL;
        IF FOUND THEN
            INSERT INTO tms.table_maintenance_job
                   (id, table_id, rule_id, policy_id, operation, engine, options,
                    task_kind, task_instance, before_snapshot_id)
            VALUES (jid, p_table, p_rule, p_policy, r.operation, r.engine, r.options,
                    'maintenance', 'job-' || jid, t.snapshot_id);
            PERFORM tms.schedule_task('maintenance', 'job-' || jid,
                                      jsonb_build_object('job_id', jid));
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
    INSERT INTO tms.evaluation_log (policy_id, policy_name, rule_id, operation, table_id,
                                    server, namespace, table_name, thresholds, condition,
                                    counters, metrics, result, outcome, explanation,
                                    explain, error, decision, job_id)
    VALUES (p_policy, p.name, p_rule, r.operation, p_table, t.server, t.namespace,
            t.table_name,
            jsonb_strip_nulls(jsonb_build_object('commits-added', r.commits_threshold,
                                                 'bytes-added', r.bytes_threshold,
                                                 'time-elapsed', r.time_threshold_ms)),
            r.condition, p_counters, p_metrics, p_result, p_outcome, p_explanation,
            p_explain, p_error, decision, job_id);
END
$$;

-- Start a submitted job if fewer than tms.max_active_operations run;
-- 'started', 'deferred' or 'gone'.  Serialised by an advisory lock so the
-- count and the start are one step.
CREATE FUNCTION tms._start_job(jid bigint)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    st text;
    running integer;
BEGIN
    PERFORM pg_advisory_xact_lock(7367, 1);
    SELECT state INTO st FROM tms.table_maintenance_job WHERE id = jid FOR UPDATE;
    IF NOT FOUND OR st <> 'pending' THEN
        RETURN 'gone';
    END IF;
    SELECT count(*) INTO running FROM tms.table_maintenance_job
     WHERE finished_at IS NULL AND state = 'running';
    IF running >= current_setting('tms.max_active_operations')::integer THEN
        RETURN 'deferred';
    END IF;
    UPDATE tms.table_maintenance_job SET state = 'running', started_at = now() WHERE id = jid;
    RETURN 'started';
END
$$;

-- Finish a job: record the outcome and reset the (table, rule) baseline, so
-- the counters measure activity since this run and the pair is evaluated
-- again.  Called by the engine (or a test's handler).
CREATE FUNCTION tms.finish_operation(job_id bigint, outcome text DEFAULT 'succeeded',
                                     after_snapshot_id bigint DEFAULT NULL,
                                     message text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
BEGIN
    IF outcome IS NULL OR outcome NOT IN ('succeeded', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'invalid job outcome "%"', outcome
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Outcomes are succeeded, failed and cancelled.';
    END IF;
    UPDATE tms.table_maintenance_job mj
       SET state = outcome, finished_at = now(),
           started_at = coalesce(mj.started_at, now()),
           after_snapshot_id = finish_operation.after_snapshot_id,
           message = finish_operation.message
     WHERE mj.id = job_id AND mj.finished_at IS NULL
    RETURNING * INTO j;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM tms.rule_baselines b
                WHERE b.rule_id = j.rule_id AND b.table_id = j.table_id
                  AND b.pending_job = j.id) THEN
        PERFORM tms._reset_baseline(j.rule_id, j.table_id);
    END IF;
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION tms.finish_operation(bigint, text, bigint, text) FROM PUBLIC;

-- What a task of kind 'maintenance' does (called by its C handler,
-- src/ops/policy.c): start the job under the cap, or retry in a few
-- seconds.  Returns the outcome ('started', 'deferred' or 'gone') and, for
-- a started job, the job as JSON: the C handler then calls the procedure
-- named by tms.maintenance_handler, as that procedure's owner (the engines
-- of a later version take this place; until then a started job stays
-- running, visible in tms.maintenance_jobs, until finished).
CREATE FUNCTION tms._run_maintenance_task(instance text, data jsonb,
                                          OUT state text, OUT job jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    jid bigint := (data ->> 'job_id')::bigint;
BEGIN
    state := tms._start_job(jid);
    IF state = 'deferred' THEN
        PERFORM tms.schedule_task('maintenance', instance, data, now() + interval '2 seconds');
    ELSIF state = 'started' THEN
        SELECT to_jsonb(mj) || jsonb_build_object('namespace', t.namespace,
                                                  'table_name', t.table_name,
                                                  'server', t.server)
          INTO job
          FROM tms.table_maintenance_job mj JOIN tms.tables t ON t.id = mj.table_id
         WHERE mj.id = jid;
    END IF;
END
$$;

-- Retention: delete log rows older than tms.evaluation_log_retention, at
-- most batch rows per call; returns how many.
CREATE FUNCTION tms.prune_evaluation_log(batch integer DEFAULT 1000)
RETURNS integer
LANGUAGE sql
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
CREATE FUNCTION tms.evaluate_now(policy text, force boolean DEFAULT false)
RETURNS TABLE (rule_id bigint, operation text, namespace text, table_name text,
               result boolean, decision text, job_id bigint, explanation text)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_evaluate_now';

COMMENT ON FUNCTION tms.evaluate_now(text, boolean) IS
    'evaluate one policy now (as its owner): refresh its tables, evaluate its candidates, submit; one row per evaluation';

-- The acting role must own the policy (it runs as the policy's owner).
GRANT EXECUTE ON FUNCTION tms.evaluate_now(text, boolean) TO PUBLIC;

