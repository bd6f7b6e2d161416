-- tms 0.2.0 -> 0.3.0
--
-- What changed, and what this script does about it:
--
--  * Maintenance runs: snapshot expiry, orphan cleanup and manifest
--    rewrite run inside tms (src/ops/maint*.c).  A job records who asked
--    (requested_by), its reason, attempts, last error, the phase of its
--    commit protocol and its effect; a job can be skipped.
--  * tms.run_operation, tms.plan_operation and tms.cancel_operation; one
--    check of operations, engines and options in C (tms._check_operation)
--    that tms.add_rule uses too; the local engine runs manifest-rewrite.
--  * tms.table_snapshot_metrics: a table's metrics before and after
--    every job.
--  * The "maintenance" task kind is detached; _start_job decides, and
--    _run_maintenance_task is gone.
--  * Engines are foreign servers of the new tms_engine wrapper.
--  * tms._attach serialises a rule's baselines with a table's, so that a
--    rule added during a discovery gets the tables it finds.

\echo Use "ALTER EXTENSION tms UPDATE TO '0.3.0'" to load this file. \quit

-- ---------------------------------------------------------------------
-- Jobs
-- ---------------------------------------------------------------------

ALTER TABLE tms.table_maintenance_job
    ADD COLUMN requested_by oid,
    ADD COLUMN reason text,
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error text,
    ADD COLUMN phase text NOT NULL DEFAULT 'start'
               CHECK (phase IN ('start', 'commit', 'cleanup', 'submit', 'engine', 'done')),
    ADD COLUMN commit_state jsonb,
    ADD COLUMN base_metadata_location text,
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN snapshots_expired bigint NOT NULL DEFAULT 0,
    ADD COLUMN manifests_rewritten bigint NOT NULL DEFAULT 0,
    ADD COLUMN manifests_added bigint NOT NULL DEFAULT 0,
    ADD COLUMN files_deleted bigint NOT NULL DEFAULT 0,
    ADD COLUMN bytes_deleted bigint NOT NULL DEFAULT 0,
    ADD COLUMN orphans_found bigint NOT NULL DEFAULT 0,
    ADD COLUMN statement text,
    ADD COLUMN data_files_rewritten bigint NOT NULL DEFAULT 0,
    ADD COLUMN data_files_added bigint NOT NULL DEFAULT 0,
    ADD COLUMN bytes_rewritten bigint NOT NULL DEFAULT 0,
    ADD COLUMN delete_files_rewritten bigint NOT NULL DEFAULT 0,
    ADD COLUMN delete_files_added bigint NOT NULL DEFAULT 0;
ALTER TABLE tms.table_maintenance_job DROP CONSTRAINT table_maintenance_job_state_check;
ALTER TABLE tms.table_maintenance_job ADD CONSTRAINT table_maintenance_job_state_check
    CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'));
UPDATE tms.table_maintenance_job SET phase = 'done' WHERE finished_at IS NOT NULL;

-- A table's metrics at the snapshot before and after every job (the design's
-- table_snapshot_metrics), so a user sees the effect of maintenance.
-- Self-contained like the evaluation log; pruned after
-- tms.snapshot_metrics_retention.
CREATE TABLE tms.table_snapshot_metrics (
    id                bigserial PRIMARY KEY,
    job_id            bigint NOT NULL,
    table_id          bigint,
    server            name NOT NULL,
    namespace         text NOT NULL,
    table_name        text NOT NULL,
    phase             text NOT NULL CHECK (phase IN ('before', 'after')),
    snapshot_id       bigint,
    recorded_at       timestamptz NOT NULL DEFAULT now(),
    metrics           jsonb NOT NULL,
    UNIQUE (job_id, phase)
);

CREATE INDEX table_snapshot_metrics_time_idx ON tms.table_snapshot_metrics (recorded_at);
CREATE INDEX table_snapshot_metrics_table_idx
    ON tms.table_snapshot_metrics (server, namespace, table_name, recorded_at);

COMMENT ON TABLE tms.table_snapshot_metrics IS
    'a table''s metrics before and after every maintenance job';

SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics_id_seq', '');

-- ---------------------------------------------------------------------
-- The life of a job
-- ---------------------------------------------------------------------

DROP FUNCTION tms._run_maintenance_task(text, jsonb);
-- The place of an operation in the design's chain of one table's
-- operations: data files first, then delete files, manifests, snapshots,
-- and orphans last.
CREATE FUNCTION tms._chain_rank(operation text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE operation
               WHEN 'compaction' THEN 1
               WHEN 'position-delete-rewrite' THEN 2
               WHEN 'manifest-rewrite' THEN 3
               WHEN 'snapshot-expiry' THEN 4
               WHEN 'orphan-cleanup' THEN 5
               ELSE 6 END
$$;

DROP FUNCTION tms._start_job(bigint);

CREATE FUNCTION tms._start_job(jid bigint,
                               OUT state text, OUT reason text,
                               OUT retry_at timestamptz, OUT job jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
    p tms.maintenance_policies;
    other bigint;
    running integer;
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
        IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM tms.maintenance_rules r WHERE r.id = j.rule_id) THEN
            reason := 'its policy or rule no longer exists';
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
            retry_at := now() + interval '1 minute';
        ELSIF NOT tms.window_open(p.time_window, now()) THEN
            state := 'deferred';
            reason := format('the time window of policy "%s" is closed', p.name);
            retry_at := now() + interval '1 minute';
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
            retry_at := now() + interval '5 seconds';
        END IF;
    END IF;
    IF state IS NULL AND j.policy_id IS NOT NULL AND j.phase = 'start' THEN
        -- the design's chain: a policy's operations on one table run one
        -- after the other, compaction first, snapshot expiry last
        SELECT o.id, o.operation INTO other, reason FROM tms.table_maintenance_job o
         WHERE o.table_id = j.table_id AND o.policy_id = j.policy_id AND o.id <> jid
           AND o.finished_at IS NULL
           AND tms._chain_rank(o.operation) < tms._chain_rank(j.operation)
         ORDER BY tms._chain_rank(o.operation), o.id
         LIMIT 1;
        IF FOUND THEN
            state := 'deferred';
            reason := format('waits for job %s (%s) of its chain on this table', other, reason);
            retry_at := now() + interval '2 seconds';
        ELSE
            reason := NULL;
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
           AND ((o.engine <> 'local'
                 AND NOT EXISTS (SELECT 1 FROM pg_foreign_server s
                                   JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
                                  WHERE w.fdwname = 'tms_engine' AND s.srvname = o.engine))
                OR EXISTS (SELECT 1 FROM tms.scheduled_tasks t
                            WHERE t.task_name = o.task_kind AND t.task_instance = o.task_instance
                              AND t.picked));
        IF running >= current_setting('tms.max_active_operations')::integer THEN
            state := 'deferred';
            reason := format('%s operations run (tms.max_active_operations)', running);
            retry_at := now() + interval '2 seconds';
        END IF;
    END IF;
    IF state = 'deferred' THEN
        UPDATE tms.table_maintenance_job SET reason = _start_job.reason WHERE id = jid;
        RETURN;
    END IF;
    UPDATE tms.table_maintenance_job
       SET state = 'running', started_at = coalesce(started_at, now()),
           attempts = attempts + 1, reason = NULL
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

CREATE FUNCTION tms._job_ended(jid bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
BEGIN
    SELECT * INTO j FROM tms.table_maintenance_job WHERE id = jid;
    IF FOUND AND EXISTS (SELECT 1 FROM tms.rule_baselines b
                          WHERE b.rule_id = j.rule_id AND b.table_id = j.table_id
                            AND b.pending_job = j.id) THEN
        PERFORM tms._reset_baseline(j.rule_id, j.table_id);
    END IF;
    DELETE FROM tms.table_snapshot_metrics
     WHERE recorded_at < now() - current_setting('tms.snapshot_metrics_retention')::interval;
END
$$;

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

REVOKE ALL ON FUNCTION tms._start_job(bigint), tms._job_ended(bigint) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Operations on demand, and the one check of operations and options
-- ---------------------------------------------------------------------

-- Maintenance operations on demand: tms.plan_operation (a dry run),
-- tms.run_operation (a job a worker runs), tms.cancel_operation.  The
-- operations themselves, and the validation of an operation's options
-- that rules share, are C (src/ops/maint*.c).

-- Raise unless engine can run operation with these options (NULL: check
-- the names only): the one check of operation names, engines and option
-- keys and types, for rules and for run_operation alike.  Credentials in
-- options are tms._check_options's to refuse, before this.
CREATE FUNCTION tms._check_operation(operation text, engine text, options jsonb)
RETURNS void
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'tms_check_operation';

-- Record a job for the acting role and its task (called by
-- tms.run_operation after it validated the options and loaded the table as
-- that role).
CREATE FUNCTION tms._submit_operation(acting regrole, server name, namespace text,
                                      table_name text, operation text, engine text,
                                      options jsonb, table_uuid text,
                                      metadata_location text, snapshot_id bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tid bigint;
    jid bigint;
BEGIN
    PERFORM tms._check_server(server, acting);
    PERFORM tms._check_options(options);
    PERFORM tms._check_operation(operation, engine, options);
    SELECT t.id INTO tid FROM tms.tables t
     WHERE t.server = _submit_operation.server AND t.namespace = _submit_operation.namespace
       AND t.table_name = _submit_operation.table_name;
    IF NOT FOUND THEN
        tid := tms.observe_table(server, namespace, table_name, table_uuid,
                                 metadata_location, snapshot_id);
    END IF;
    INSERT INTO tms.table_maintenance_job
           (table_id, requested_by, operation, engine, options, task_kind,
            before_snapshot_id)
    VALUES (tid, acting, operation, engine, options, 'maintenance', snapshot_id)
    RETURNING id INTO jid;
    UPDATE tms.table_maintenance_job SET task_instance = 'job-' || jid WHERE id = jid;
    PERFORM tms.schedule_task('maintenance', 'job-' || jid, jsonb_build_object('job_id', jid));
    RETURN jid;
END
$$;

CREATE FUNCTION tms.run_operation(server name, namespace text, table_name text,
                                  operation text, options jsonb DEFAULT '{}',
                                  engine text DEFAULT 'local')
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_run_operation';

COMMENT ON FUNCTION tms.run_operation(name, text, text, text, jsonb, text) IS
    'validate, then record a maintenance job on one table for the acting role; a worker runs it; returns the job id';

CREATE FUNCTION tms.plan_operation(server name, namespace text, table_name text,
                                   operation text, options jsonb DEFAULT '{}')
RETURNS TABLE (action text, target text, detail jsonb)
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_plan_operation';

COMMENT ON FUNCTION tms.plan_operation(name, text, text, text, jsonb) IS
    'what an operation would commit and delete on one table, changing nothing';

-- Cancel a job: a pending one ends now; a running one stops at its next
-- step (a commit in flight is resolved first; after a commit landed, the
-- files it unreferenced are left to orphan cleanup).  The requester, the
-- owner of the job's policy and superusers may cancel.
CREATE FUNCTION tms._cancel_operation(acting regrole, job_id bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
    owner oid;
BEGIN
    SELECT * INTO j FROM tms.table_maintenance_job WHERE id = job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'maintenance job % does not exist', job_id
              USING ERRCODE = 'undefined_object';
    END IF;
    SELECT p.owner INTO owner FROM tms.maintenance_policies p WHERE p.id = j.policy_id;
    IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE oid = acting), false)
       AND acting::oid IS DISTINCT FROM j.requested_by
       AND acting::oid IS DISTINCT FROM owner THEN
        RAISE EXCEPTION 'permission denied to cancel maintenance job %', job_id
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = 'Only the role that requested the job, the owner of its policy and superusers may cancel it.';
    END IF;
    IF j.finished_at IS NOT NULL THEN
        RETURN false;
    END IF;
    IF j.state = 'pending' AND j.phase = 'start' THEN
        UPDATE tms.table_maintenance_job
           SET state = 'cancelled', finished_at = now(), cancel_requested = true,
               reason = format('cancelled by %s', acting)
         WHERE id = j.id;
        PERFORM tms.cancel_task(j.task_kind, j.task_instance)
          FROM tms.scheduled_tasks t
         WHERE t.task_name = j.task_kind AND t.task_instance = j.task_instance
           AND NOT t.picked;
        PERFORM tms._job_ended(j.id);
    ELSE
        UPDATE tms.table_maintenance_job
           SET cancel_requested = true, reason = format('cancel requested by %s', acting)
         WHERE id = j.id;
    END IF;
    RETURN true;
END
$$;

CREATE FUNCTION tms.cancel_operation(job_id bigint)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.cancel_operation(bigint) IS
    'cancel a maintenance job: a pending one at once, a running one at its next step';

GRANT EXECUTE ON FUNCTION tms.run_operation(name, text, text, text, jsonb, text),
                          tms.plan_operation(name, text, text, text, jsonb),
                          tms.cancel_operation(bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION tms._submit_operation(regrole, name, text, text, text, text, jsonb, text, text, bigint),
                       tms._cancel_operation(regrole, bigint),
                       tms._check_operation(text, text, jsonb)
    FROM PUBLIC;

CREATE OR REPLACE FUNCTION tms._add_rule(acting regrole, policy_name text, operation text, engine text, counters jsonb, condition text, baseline_mode text, options jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, policy_name);
    k text;
    v jsonb;
    thr jsonb := '{}';
    needs text;
    rid bigint;
BEGIN
    PERFORM tms._check_operation(operation, engine, NULL);   -- names first

    -- counters: at least one threshold, each a positive integer
    IF counters IS NULL OR jsonb_typeof(counters) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule counters'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'Counters must be a JSON object such as {"commits-added": 100}.';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(counters) LOOP
        IF k NOT IN ('commits-added', 'bytes-added', 'time-elapsed') THEN
            RAISE EXCEPTION 'unknown activity counter "%"', k
                  USING ERRCODE = 'invalid_parameter_value',
                        HINT = 'Counters are commits-added, bytes-added and time-elapsed (milliseconds).';
        END IF;
        IF jsonb_typeof(v) <> 'number' OR (v::text)::numeric <> trunc((v::text)::numeric)
           OR (v::text)::numeric > 9223372036854775807 THEN
            RAISE EXCEPTION 'invalid threshold for counter "%"', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The threshold is %s; it must be a whole number.', v);
        END IF;
        IF (v::text)::numeric <= 0 THEN
            RAISE EXCEPTION 'threshold for counter "%" must be greater than zero', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The threshold is %s.', v);
        END IF;
    END LOOP;
    IF NOT (counters ? 'commits-added' OR counters ? 'bytes-added' OR counters ? 'time-elapsed') THEN
        RAISE EXCEPTION 'a rule needs at least one counter threshold'
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Give commits-added, bytes-added or time-elapsed, e.g. {"commits-added": 100}.';
    END IF;
    -- orphan-cleanup scans storage: schedule only, never on commits
    IF operation = 'orphan-cleanup' AND (counters ? 'commits-added' OR counters ? 'bytes-added') THEN
        RAISE EXCEPTION 'orphan-cleanup cannot be triggered by commits'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The rule has a commits-added or bytes-added threshold; orphan-cleanup scans storage and runs on a schedule only.',
                    HINT = 'Use only the time-elapsed counter for orphan-cleanup.';
    END IF;

    IF baseline_mode IS NULL OR baseline_mode NOT IN ('catch-up', 'going-forward') THEN
        RAISE EXCEPTION 'invalid baseline mode "%"', baseline_mode
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Baseline modes are catch-up and going-forward.';
    END IF;
    PERFORM tms._check_options(coalesce(options, '{}'));
    PERFORM tms._check_operation(operation, engine, coalesce(options, '{}'));
    IF condition IS NULL THEN
        RAISE EXCEPTION 'a rule needs a condition' USING ERRCODE = 'null_value_not_allowed',
              HINT = 'Use ''true'' to act whenever the counters fire.';
    END IF;
    needs := tms._compile_condition(condition);

    INSERT INTO tms.maintenance_rules (policy_id, operation, engine, options,
                                       commits_threshold, bytes_threshold,
                                       time_threshold_ms, condition, needs,
                                       baseline_mode)
    VALUES (p.id, operation, engine, coalesce(options, '{}'),
            (counters ->> 'commits-added')::bigint, (counters ->> 'bytes-added')::bigint,
            (counters ->> 'time-elapsed')::bigint, condition, needs, baseline_mode)
    RETURNING id INTO rid;
    PERFORM tms._attach(rid, NULL);
    RETURN rid;
END
$$;

-- ---------------------------------------------------------------------
-- Views
-- ---------------------------------------------------------------------

DROP VIEW tms.maintenance_jobs;
CREATE VIEW tms.maintenance_jobs AS
    SELECT j.id, p.name AS policy, j.rule_id, j.operation, j.engine, t.server,
           t.namespace, t.table_name, j.state, j.reason, j.attempts, j.last_error,
           j.phase, j.cancel_requested,
           j.before_snapshot_id, j.after_snapshot_id,
           j.created_at, j.started_at, j.finished_at,
           j.snapshots_expired, j.manifests_rewritten, j.manifests_added,
           j.files_deleted, j.bytes_deleted, j.orphans_found,
           j.data_files_rewritten, j.data_files_added, j.bytes_rewritten,
           j.delete_files_rewritten, j.delete_files_added,
           j.options, j.requested_by::regrole AS requested_by, j.statement, j.message
      FROM tms.table_maintenance_job j
      JOIN tms.tables t ON t.id = j.table_id
      LEFT JOIN tms.maintenance_policies p ON p.id = j.policy_id;

COMMENT ON VIEW tms.maintenance_jobs IS
    'maintenance runs, from policies and from tms.run_operation: state with its reason, attempts, effect; finished_at null: in flight';

GRANT SELECT ON tms.maintenance_jobs, tms.table_snapshot_metrics TO pg_monitor;

-- ---------------------------------------------------------------------
-- Engines: the tms_engine foreign-data wrapper
-- ---------------------------------------------------------------------

CREATE FUNCTION tms.engine_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'tms_engine_fdw_validator';

COMMENT ON FUNCTION tms.engine_fdw_validator(text[], oid) IS
    'validates options of tms_engine servers and user mappings';

CREATE FOREIGN DATA WRAPPER tms_engine
    VALIDATOR tms.engine_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_engine IS
    'engines that run maintenance: CREATE SERVER ... FOREIGN DATA WRAPPER tms_engine OPTIONS (type ''trino'', uri ''...'', catalog ''...'')';

CREATE FUNCTION tms.engine_statement(engine text, namespace text, table_name text,
                                     operation text, options jsonb DEFAULT '{}')
RETURNS text
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'tms_engine_statement_sql';

COMMENT ON FUNCTION tms.engine_statement(text, text, text, text, jsonb) IS
    'the statement a job of an operation on a tms_engine server would submit now (for gravitino the jobs API body); sends nothing';

-- ---------------------------------------------------------------------
-- A rule added while its group's tables are being discovered: the two
-- sides of tms._attach no longer miss each other
-- ---------------------------------------------------------------------

CREATE OR REPLACE FUNCTION tms._attach(rule_filter bigint, table_filter bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    n bigint;
BEGIN
    IF table_filter IS NULL THEN
        PERFORM pg_advisory_xact_lock(7367, 2);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(7367, 2);
    END IF;
    INSERT INTO tms.rule_baselines AS b
           (rule_id, table_id, base_commits, base_bytes, since,
            due_commits, due_bytes, due_at, triggered)
    SELECT r.id, t.id, x.c, x.b, x.s,
           x.c + r.commits_threshold, x.b + r.bytes_threshold,
           x.s + make_interval(secs => r.time_threshold_ms / 1000.0),
           (t.commits >= x.c + r.commits_threshold) IS TRUE
             OR (t.bytes_added >= x.b + r.bytes_threshold) IS TRUE
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.object_groups g ON g.id = p.group_id
      JOIN tms.tables t ON t.server = g.server AND tms._in_group(g, t)
      CROSS JOIN LATERAL (
          SELECT CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.commits END AS c,
                 CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.bytes_added END AS b,
                 CASE WHEN r.baseline_mode = 'catch-up'
                      THEN least(coalesce(t.first_commit_at, now()), now())
                      ELSE now() END AS s) x
     WHERE (rule_filter IS NULL OR r.id = rule_filter)
       AND (table_filter IS NULL OR t.id = table_filter)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
