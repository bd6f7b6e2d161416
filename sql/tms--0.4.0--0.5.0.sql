-- tms 0.4.0 -> 0.5.0
--
-- What changed, and what this script does about it:
--
--  * Catalogs that sign requests with AWS SigV4 (server options
--    signing_region, signing_name; user-mapping options aws_access_key_id,
--    aws_secret_access_key, aws_session_token): checked by the wrappers'
--    validators in C, no schema change, nothing to do here.
--  * Faster manifest decoding (libdeflate), tms.purge_table and a policy
--    cycle whose memory does not grow with the number of tables: code
--    only, nothing to do here.
--  * Deletes of purges and maintenance operations share one delete pool per
--    database (tms.delete_concurrency) and adapt to storage throttling:
--    the views tms.delete_pool and tms.delete_targets over shared memory.
--  * Vended storage credentials that expire are loaded again; a purge can
--    hold the table's catalog entry in a namespace (server option
--    purge_hold_namespace) until its files are gone: the job records where
--    (held_namespace, held_name, shown by tms.purge_jobs), and
--    tms.retry_purge resumes a job that got to the metadata file there.
--  * Events: every state change of a maintenance job and of a purge is
--    sent on the channel tms_events (triggers on their tables; tasks from
--    the scheduler when tms.events has "task"); the tms_webhook wrapper,
--    tms.webhook_outbox with the view tms.webhook_deliveries and the task
--    kind "webhook" deliver the changes a webhook server asks for.
--
--  * Compaction on engine 'local' (issue 17): runs in the helper
--    $libdir/tms/tms_compactor; its settings tms.compaction_memory_limit,
--    tms.compaction_threads and tms.compaction_temp_directory are the
--    library's, and the catalog already accepts engine 'local' for every
--    operation: no schema change, nothing to do here.
--
--  * Monitoring: cumulative statistics in shared memory and the
--    tms.stat_* views over them and over the current state of the work
--    (tms.stat_reset, tms._stat_counters, tms._stat_count_job, which
--    tms._job_ended now calls); the run history of tasks
--    (tms.task_history, tms.task_run_totals, tms._prune_task_history) and
--    the views tms.job_history, tms.job_errors, tms.job_stats; retries of
--    failed tasks and deferred starts of jobs wait a jittered time
--    (tms._jitter, tms._start_job).
--

\echo Use "ALTER EXTENSION tms UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------------
-- The delete pool (throttled, shared deletes)
-- ---------------------------------------------------------------------

CREATE FUNCTION tms.delete_pool_internal(
    OUT pid integer,
    OUT database name,
    OUT job text,
    OUT requests_in_flight integer,
    OUT waiting boolean,
    OUT waiting_since timestamptz,
    OUT requests bigint)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_delete_pool';

COMMENT ON FUNCTION tms.delete_pool_internal() IS
    'the processes of the delete pools, from shared memory; use the view tms.delete_pool';

CREATE VIEW tms.delete_pool AS
    SELECT pid, database, job, requests_in_flight, waiting, waiting_since, requests
      FROM tms.delete_pool_internal()
     ORDER BY database, pid;

COMMENT ON VIEW tms.delete_pool IS
    'processes that delete files: their requests in flight (permits of tms.delete_concurrency), whether they wait for one, permits taken so far';

CREATE FUNCTION tms.delete_targets_internal(
    OUT database name,
    OUT target text,
    OUT request_window double precision,
    OUT allowed_in_flight integer,
    OUT in_flight integer,
    OUT pause_ms bigint,
    OUT requests bigint,
    OUT succeeded bigint,
    OUT throttled bigint,
    OUT window_decreases bigint,
    OUT retried_keys bigint,
    OUT last_throttled_at timestamptz)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_delete_targets';

COMMENT ON FUNCTION tms.delete_targets_internal() IS
    'storage targets of the delete pools, from shared memory; use the view tms.delete_targets';

CREATE VIEW tms.delete_targets AS
    SELECT database, target, request_window, allowed_in_flight, in_flight, pause_ms,
           requests, succeeded, throttled, window_decreases, retried_keys,
           last_throttled_at
      FROM tms.delete_targets_internal()
     ORDER BY database, target;

COMMENT ON VIEW tms.delete_targets IS
    'storage targets (endpoint/bucket) deleted from: the request window (halved when the storage refuses to slow down, grown back by successes), requests in flight, throttled requests, keys sent again';

REVOKE ALL ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() TO pg_monitor;
GRANT SELECT ON tms.delete_pool, tms.delete_targets TO pg_monitor;

-- ---------------------------------------------------------------------
-- Vended credentials that expire: the purge's hold
-- ---------------------------------------------------------------------

ALTER TABLE tms.iceberg_cleanup_job
    ADD COLUMN held_namespace text,
    ADD COLUMN held_name text;

CREATE OR REPLACE VIEW tms.purge_jobs AS
    SELECT j.id, j.server, j.namespace, j.table_name, j.state, j.phase,
           j.attempts, j.last_error,
           j.files_deleted, j.bytes_freed, j.files_skipped, j.skipped_example,
           j.files_kept, j.files_unreadable, j.delete_requests,
           j.requested_by, j.created_at, j.dropped_at, j.started_at, j.finished_at,
           j.updated_at,
           t.picked_by AS running_on,
           CASE WHEN t.picked THEN now() - t.last_heartbeat END AS heartbeat_age,
           CASE WHEN NOT t.picked THEN t.execution_time END AS next_attempt_at,
           j.table_location, j.metadata_location, j.table_uuid,
           j.held_namespace, j.held_name
      FROM tms.iceberg_cleanup_job j
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'purge' AND t.task_instance = j.id::text;


CREATE OR REPLACE FUNCTION tms._retry_purge(acting regrole, job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.iceberg_cleanup_job;
BEGIN
    SELECT * INTO j FROM tms.iceberg_cleanup_job WHERE id = job_id FOR UPDATE;
    IF NOT FOUND OR NOT (pg_has_role(acting, j.requested_by, 'USAGE')
                         OR EXISTS (SELECT 1 FROM pg_foreign_server s
                                     WHERE s.srvname = j.server
                                       AND pg_has_role(acting, s.srvowner, 'USAGE'))) THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = format('purge job %s does not exist', job_id),
            HINT = 'A job is visible to its requester, the owner of its server and pg_monitor.';
    END IF;
    IF j.state <> 'FAILED' THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('purge job %s is %s, not FAILED', job_id, j.state),
            HINT = 'Only a FAILED job can be retried; a PENDING or RUNNING one is retried by the workers.';
    END IF;
    -- a job that got to the metadata file (or to its held entry) goes on
    -- from there: the files below it are gone
    UPDATE tms.iceberg_cleanup_job
       SET state = 'PENDING', attempts = 0, finished_at = NULL,
           phase = CASE WHEN dropped_at IS NULL THEN 'drop'
                        WHEN phase IN ('metadata', 'release') THEN phase
                        ELSE 'content' END,
           last_error = 'retried by ' || acting::text || ' after: ' || coalesce(j.last_error, ''),
           updated_at = now()
     WHERE id = job_id;
    PERFORM tms.schedule_task('purge', job_id::text);
END
$$;

-- ---------------------------------------------------------------------
-- Events: NOTIFY tms_events and webhooks (sql/install/68_events.sql)
-- ---------------------------------------------------------------------

-- The receivers of webhooks: a server names which events it gets; the
-- user mapping of its owner (or PUBLIC) holds the URL, which may carry a
-- secret, and an optional bearer token.  USAGE on the wrapper is not
-- granted to anyone: a webhook receives every job's and purge's outcome.
CREATE FUNCTION tms.webhook_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'tms_webhook_fdw_validator';

COMMENT ON FUNCTION tms.webhook_fdw_validator(text[], oid) IS
    'validator of the tms_webhook foreign-data wrapper';

CREATE FOREIGN DATA WRAPPER tms_webhook
    VALIDATOR tms.webhook_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_webhook IS
    'webhook receivers of tms events: CREATE SERVER ... FOREIGN DATA WRAPPER tms_webhook OPTIONS (events ''job-failed, purge-failed''); the URL in the user mapping';

-- One row per (event, webhook server) to deliver; readable by the
-- extension owner only (the view below is what others read).
CREATE TABLE tms.webhook_outbox (
    id              bigserial PRIMARY KEY,
    server          name NOT NULL,          -- the tms_webhook server
    event           text NOT NULL,          -- job-failed, purge-failed ...
    payload         jsonb NOT NULL,         -- the body POSTed: the tms_events payload
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    last_status     integer,                -- HTTP status of the last answer
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    next_attempt_at timestamptz DEFAULT now(),
    finished_at     timestamptz,
    CHECK ((state = 'pending') = (finished_at IS NULL))
);

COMMENT ON TABLE tms.webhook_outbox IS
    'webhook deliveries of state-change events: pending -> delivered | failed';

CREATE INDEX webhook_outbox_finished_idx ON tms.webhook_outbox (finished_at)
    WHERE finished_at IS NOT NULL;

REVOKE ALL ON tms.webhook_outbox FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('tms.webhook_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('tms.webhook_outbox_id_seq', '');

-- The built-in task kind; its cap follows tms.webhook_concurrency.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('webhook', NULL, 2, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'webhook', s FROM generate_series(1, 2) s;

-- What an operator reads: state ("retrying": pending after a failed
-- attempt), attempts, the last answer and error; never the URL.
CREATE VIEW tms.webhook_deliveries AS
    SELECT o.id, o.server, o.event,
           CASE WHEN o.state = 'pending' AND o.attempts > 0 THEN 'retrying'
                ELSE o.state END AS state,
           o.attempts, o.last_status, o.last_error,
           o.created_at, o.last_attempt_at,
           CASE WHEN o.state = 'pending' THEN o.next_attempt_at END AS next_attempt_at,
           o.finished_at,
           t.picked_by AS running_on,
           o.payload
      FROM tms.webhook_outbox o
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'webhook' AND t.task_instance = o.id::text;

COMMENT ON VIEW tms.webhook_deliveries IS
    'webhook deliveries of state-change events: state, attempts, last answer and error (never the URL)';

GRANT SELECT ON tms.webhook_deliveries TO pg_monitor;

-- The triggers: a job or purge recorded pending, and every change of its
-- state.  The INSERT triggers ignore rows recorded in another state (a
-- restored dump's finished jobs).
CREATE FUNCTION tms._state_event()
RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_state_event';

REVOKE ALL ON FUNCTION tms._state_event() FROM PUBLIC;

CREATE TRIGGER tms_job_created
    AFTER INSERT ON tms.table_maintenance_job
    FOR EACH ROW WHEN (NEW.state = 'pending')
    EXECUTE FUNCTION tms._state_event('job');
CREATE TRIGGER tms_job_state
    AFTER UPDATE OF state ON tms.table_maintenance_job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION tms._state_event('job');
CREATE TRIGGER tms_purge_created
    AFTER INSERT ON tms.iceberg_cleanup_job
    FOR EACH ROW WHEN (NEW.state = 'PENDING')
    EXECUTE FUNCTION tms._state_event('purge');
CREATE TRIGGER tms_purge_state
    AFTER UPDATE OF state ON tms.iceberg_cleanup_job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION tms._state_event('purge');

-- Monitoring: the run history and jittered retries (sql/install/20_sched.sql)
-- ---------------------------------------------------------------------

-- The wait before a retry: between half of wait and all of it, uniformly
-- ("equal jitter", https://aws.amazon.com/blogs/architecture/
-- exponential-backoff-and-jitter/).  Tasks that failed together (a
-- catalog down for all of them) come back spread over half their backoff
-- instead of as a herd, while each still waits at least half of it and
-- the wait still grows with the failures; with "full jitter" some would
-- come back at once, to the service that just failed them.  The retries
-- of failed tasks (src/sched/sched.c) and the deferred starts of
-- maintenance jobs (tms._start_job) wait so.
CREATE FUNCTION tms._jitter(wait interval)
RETURNS interval
LANGUAGE sql VOLATILE
AS $$ SELECT wait * (0.5 + 0.5 * random()) $$;

-- The run history: one row per run of a task (its claim to its settle),
-- written by the settle statement itself (src/sched/sched.c), kept for
-- tms.task_history_retention.  A run whose lease was lost settles nothing
-- and has no row; nor has a run its handler called idle (a deferred
-- start).  policy_id, rule_id, table_id and job_id are what the handler
-- said the run worked on (NULL: nothing of the kind).  The views
-- tms.job_history, tms.job_errors and tms.job_stats read it.
CREATE TABLE tms.task_history (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL,
    instance      text NOT NULL,
    policy_id     integer,
    rule_id       bigint,
    table_id      bigint,
    job_id        bigint,                 -- the maintenance or purge job
    attempt       integer NOT NULL,       -- 1 + the failures before it
    pid           integer,                -- of the executor
    started_at    timestamptz NOT NULL,   -- the claim
    finished_at   timestamptz NOT NULL,
    succeeded     boolean NOT NULL,
    sqlstate      text,
    error         text,
    CHECK (succeeded = (sqlstate IS NULL))
);

COMMENT ON TABLE tms.task_history IS
    'one row per run of a task: what it worked on, when, its outcome and its error with SQLSTATE';

-- What pruned history rows counted, per (kind, policy, rule), so that the
-- totals of tms.job_stats outlive tms.task_history_retention.
CREATE TABLE tms.task_run_totals (
    kind                   text NOT NULL,
    policy_id              integer,
    rule_id                bigint,
    runs                   bigint NOT NULL,
    successes              bigint NOT NULL,
    failures               bigint NOT NULL,
    total_duration         interval NOT NULL,
    last_run_started_at    timestamptz,
    last_run_finished_at   timestamptz,
    last_run_succeeded     boolean,
    last_successful_finish timestamptz,
    last_failure_at        timestamptz,
    last_sqlstate          text,
    last_error             text,
    UNIQUE NULLS NOT DISTINCT (kind, policy_id, rule_id)
);

SELECT pg_catalog.pg_extension_config_dump('tms.task_history', '');
SELECT pg_catalog.pg_extension_config_dump('tms.task_history_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.task_run_totals', '');

-- Delete up to batch of the oldest history rows older than retention,
-- folding what they counted into tms.task_run_totals; returns how many.
-- Rows are taken in id order, the order of their settles, so a batch
-- reads no more than batch rows.  The supervisors call it
-- (src/sched/sched.c, prune_history).
CREATE FUNCTION tms._prune_task_history(retention interval, batch integer DEFAULT 10000)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH old AS (
        SELECT o.id
          FROM (SELECT h.id, h.finished_at FROM tms.task_history h
                 ORDER BY h.id LIMIT batch) o
         WHERE o.finished_at < now() - retention
    ), gone AS (
        DELETE FROM tms.task_history h USING old
         WHERE h.id = old.id
        RETURNING h.*
    ), sums AS (
        SELECT g.kind, g.policy_id, g.rule_id,
               count(*) AS runs,
               count(*) FILTER (WHERE g.succeeded) AS successes,
               count(*) FILTER (WHERE NOT g.succeeded) AS failures,
               sum(g.finished_at - g.started_at) AS total_duration,
               (array_agg(g.started_at ORDER BY g.id DESC))[1] AS last_run_started_at,
               (array_agg(g.finished_at ORDER BY g.id DESC))[1] AS last_run_finished_at,
               (array_agg(g.succeeded ORDER BY g.id DESC))[1] AS last_run_succeeded,
               max(g.finished_at) FILTER (WHERE g.succeeded) AS last_successful_finish,
               max(g.finished_at) FILTER (WHERE NOT g.succeeded) AS last_failure_at,
               (array_agg(g.sqlstate ORDER BY g.id DESC) FILTER (WHERE NOT g.succeeded))[1]
                   AS last_sqlstate,
               (array_agg(g.error ORDER BY g.id DESC) FILTER (WHERE NOT g.succeeded))[1]
                   AS last_error
          FROM gone g
         GROUP BY g.kind, g.policy_id, g.rule_id
    ), folded AS (
        INSERT INTO tms.task_run_totals AS t
        SELECT * FROM sums
        ON CONFLICT (kind, policy_id, rule_id) DO UPDATE
           SET runs = t.runs + excluded.runs,
               successes = t.successes + excluded.successes,
               failures = t.failures + excluded.failures,
               total_duration = t.total_duration + excluded.total_duration,
               last_run_started_at = excluded.last_run_started_at,
               last_run_finished_at = excluded.last_run_finished_at,
               last_run_succeeded = excluded.last_run_succeeded,
               last_successful_finish = coalesce(excluded.last_successful_finish,
                                                 t.last_successful_finish),
               last_failure_at = coalesce(excluded.last_failure_at, t.last_failure_at),
               last_sqlstate = CASE WHEN excluded.last_failure_at IS NULL THEN t.last_sqlstate
                                    ELSE excluded.last_sqlstate END,
               last_error = CASE WHEN excluded.last_failure_at IS NULL THEN t.last_error
                                 ELSE excluded.last_error END
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

REVOKE ALL ON FUNCTION tms._prune_task_history(interval, integer) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Monitoring: maintenance jobs (sql/install/63_policy_jobs.sql): deferred starts
-- wait a jittered time; every
-- end of a job is counted
-- ---------------------------------------------------------------------

-- Whether job jid may start (or resume) now, and if so mark it running.
-- Called by the "maintenance" task's handler (src/ops/maint.c) in a short
-- step, as the extension owner.  Returns
--   gone      the job is finished, cancelled or no longer exists;
--   deferred  not now (reason says why); the task is due again at retry_at;
--   skipped   never (reason says why): the job ended so;
--   started   the job is running: job holds it with its table.
-- Gates, in order: a cancel request; for a job that has done nothing yet
-- (phase "start") from a policy: the rule and policy still exist (else
-- skipped), the policy is active and its window open (else deferred);
-- one job at a time per (table, operation); a policy's job waits for the
-- jobs of the same policy and table earlier in the chain (tms._chain_rank);
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
            retry_at := now() + tms._jitter(interval '1 minute');
        ELSIF NOT tms.window_open(p.time_window, now()) THEN
            state := 'deferred';
            reason := format('the time window of policy "%s" is closed', p.name);
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
            retry_at := now() + tms._jitter(interval '2 seconds');
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
            retry_at := now() + tms._jitter(interval '2 seconds');
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

-- After a job ended (any outcome; every end of a job comes here): it is
-- counted in tms.stat_maintenance; its (table, rule) baseline is reset, so
-- the counters measure activity since this run and the pair is evaluated
-- again, though not before the rule's min_interval (the design's
-- minIntervalMs) has passed; old snapshot metrics are pruned.
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
        END IF;
    END IF;
    DELETE FROM tms.table_snapshot_metrics
     WHERE recorded_at < now() - current_setting('tms.snapshot_metrics_retention')::interval;
END
$$;

-- ---------------------------------------------------------------------
-- Monitoring: statistics and views (sql/install/70_monitoring.sql)
-- ---------------------------------------------------------------------

CREATE FUNCTION tms._stat_counters(area text)
RETURNS TABLE (dbid oid, label1 text, label2 text, label3 text,
               counters bigint[], stats_reset timestamptz)
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'tms_stat_counters_sql';

-- Count a maintenance job that ended (tms._job_ended calls it).
CREATE FUNCTION tms._stat_count_job(operation text, engine text, outcome text,
                                    duration_us bigint, files bigint, bytes bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_stat_count_job_sql';

-- Zero the counters of an area (tasks, maintenance, purges, requests;
-- NULL: all of them) of this database.
CREATE FUNCTION tms.stat_reset(area text DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_stat_reset_sql';

COMMENT ON FUNCTION tms.stat_reset(text) IS
    'zero the cumulative statistics of this database: one area (tasks, maintenance, purges, requests) or all';

-- The database of a row; "(other)" for an area's overflow row.
CREATE FUNCTION tms._stat_database(dbid oid)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN dbid = 0 THEN '(other)'
                ELSE (SELECT d.datname::text FROM pg_database d WHERE d.oid = dbid) END
$$;

CREATE VIEW tms.stat_tasks AS
    SELECT db AS database,
           s.label1 AS kind,
           s.counters[1] AS claimed,
           s.counters[2] AS succeeded,
           s.counters[3] AS failed,
           s.counters[4] AS lease_lost,
           s.counters[5] / 1e6::float8 AS run_seconds,
           s.stats_reset
      FROM tms._stat_counters('tasks') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_tasks IS
    'tasks claimed, succeeded, failed and whose lease was lost, per database and kind, since stats_reset';

CREATE VIEW tms.stat_maintenance AS
    SELECT db AS database,
           s.label1 AS operation,
           s.label2 AS engine,
           s.label3 AS outcome,
           s.counters[1] AS jobs,
           s.counters[2] / 1e6::float8 AS duration_seconds,
           s.counters[3] AS files_deleted,
           s.counters[4] AS bytes_deleted,
           s.stats_reset
      FROM tms._stat_counters('maintenance') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_maintenance IS
    'maintenance jobs ended per database, operation, engine and outcome, with their time and what they deleted';

CREATE VIEW tms.stat_purges AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS outcome,
           s.counters[1] AS jobs,
           s.counters[2] / 1e6::float8 AS duration_seconds,
           s.counters[3] AS files_deleted,
           s.counters[4] AS bytes_freed,
           s.counters[5] AS files_skipped,
           s.counters[6] AS delete_requests,
           s.stats_reset
      FROM tms._stat_counters('purges') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_purges IS
    'purge jobs ended per database, server and outcome, with their time and what they deleted';

-- latency_seconds, _bucket, _sum and _count are a histogram as
-- prometheus-postgres-exporter's HISTOGRAM usage reads it: the upper
-- bounds (+Inf implied), cumulative counts, sum and count.
CREATE VIEW tms.stat_requests AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS service,
           s.counters[1] AS requests,
           s.counters[2] AS retries,
           s.counters[3] AS errors,
           '{0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10}'::float8[] AS latency_seconds,
           ARRAY(SELECT sum(b) OVER (ORDER BY i)::bigint
                   FROM unnest(s.counters[11:21]) WITH ORDINALITY AS u(b, i)
                  ORDER BY i) AS latency_seconds_bucket,
           s.counters[10] / 1e6::float8 AS latency_seconds_sum,
           s.counters[1] AS latency_seconds_count,
           s.stats_reset
      FROM tms._stat_counters('requests') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_requests IS
    'HTTP exchanges with catalogs, storage and engines per database, foreign server and service: requests, retries, errors, latency histogram';

CREATE VIEW tms.stat_request_errors AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS service,
           c.class,
           s.counters[3 + c.i] AS errors,
           s.stats_reset
      FROM tms._stat_counters('requests') s,
           LATERAL tms._stat_database(s.dbid) db,
           unnest('{timeout,connect,throttled,client,server,other}'::text[])
               WITH ORDINALITY AS c(class, i)
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_request_errors IS
    'failed HTTP exchanges per database, foreign server, service and class (timeout, connect, throttled, client, server, other)';

-- ---------------------------------------------------------------------
-- The current state of the work (this database)
-- ---------------------------------------------------------------------

-- A lease is dead after tms.heartbeat_interval x tms.missed_heartbeats_limit
-- without a heartbeat (src/sched/lease.c).
CREATE FUNCTION tms._dead_lease_age()
RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(current_setting('tms.heartbeat_interval', true), '5s')::interval
           * coalesce(current_setting('tms.missed_heartbeats_limit', true), '6')::integer
$$;

-- Running tasks that look stuck: no heartbeat for the dead-lease age (its
-- executor is gone or hangs; recovery will release it unless a live
-- process holds it), or held longer than tms.stuck_task_age.
CREATE VIEW tms.stat_stuck_tasks AS
    SELECT current_database()::text AS database,
           t.task_name AS kind,
           t.task_instance AS instance,
           t.picked_by,
           t.picked_pid AS owner_pid,
           s.since AS claimed_at,
           coalesce(extract(epoch FROM now() - s.since), 0)::float8 AS held_seconds,
           extract(epoch FROM now() - t.last_heartbeat)::float8 AS heartbeat_age_seconds,
           CASE WHEN t.last_heartbeat < now() - tms._dead_lease_age() THEN 'no heartbeat'
                ELSE 'held too long' END AS reason
      FROM tms.scheduled_tasks t
      LEFT JOIN tms.task_slots s
        ON s.kind = t.task_name AND s.task_instance = t.task_instance
     WHERE t.picked
       AND (t.last_heartbeat < now() - tms._dead_lease_age()
            OR s.since < now() - coalesce(current_setting('tms.stuck_task_age', true), '1h')::interval);

COMMENT ON VIEW tms.stat_stuck_tasks IS
    'running tasks without a heartbeat for the dead-lease age, or held longer than tms.stuck_task_age';

CREATE VIEW tms.stat_task_queue AS
    SELECT current_database()::text AS database,
           k.kind,
           k.max_concurrency,
           count(t.*) FILTER (WHERE t.picked) AS running,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time <= now()) AS due,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time > now()) AS scheduled,
           count(t.*) FILTER (WHERE t.consecutive_failures > 0) AS failing,
           coalesce(extract(epoch FROM now() - min(t.execution_time)
                                  FILTER (WHERE NOT t.picked AND t.execution_time <= now())),
                    0)::float8 AS oldest_due_seconds,
           (SELECT count(*) FROM tms.stat_stuck_tasks st WHERE st.kind = k.kind) AS stuck
      FROM tms.task_kinds k
      LEFT JOIN tms.scheduled_tasks t ON t.task_name = k.kind
     GROUP BY k.kind, k.max_concurrency;

COMMENT ON VIEW tms.stat_task_queue IS
    'tasks per kind: running, due, scheduled, failing, the oldest due one''s wait, stuck';

CREATE VIEW tms.stat_maintenance_queue AS
    SELECT current_database()::text AS database,
           j.operation,
           j.engine,
           count(*) FILTER (WHERE j.state = 'pending') AS pending,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           coalesce(extract(epoch FROM now() - min(j.created_at)
                                  FILTER (WHERE j.state = 'pending')), 0)::float8
               AS oldest_pending_seconds,
           coalesce(extract(epoch FROM now() - min(j.started_at)
                                  FILTER (WHERE j.state = 'running')), 0)::float8
               AS oldest_running_seconds
      FROM tms.table_maintenance_job j
     WHERE j.finished_at IS NULL
     GROUP BY j.operation, j.engine;

COMMENT ON VIEW tms.stat_maintenance_queue IS
    'maintenance jobs in flight per operation and engine: pending, running, the oldest of each';

-- One row per tms_iceberg server (and per server of a job in flight that
-- is gone), so that an empty backlog is a row of zeros.
CREATE VIEW tms.stat_purge_queue AS
    WITH jobs AS (
        SELECT j.server,
               count(*) FILTER (WHERE j.state = 'PENDING') AS pending,
               count(*) FILTER (WHERE j.state = 'PENDING' AND j.attempts > 0) AS retrying,
               count(*) FILTER (WHERE j.state = 'RUNNING') AS running,
               min(j.created_at) FILTER (WHERE j.state = 'PENDING') AS oldest_pending
          FROM tms.iceberg_cleanup_job j
         WHERE j.state IN ('PENDING', 'RUNNING')
         GROUP BY j.server
    ), servers AS (
        SELECT s.srvname AS server
          FROM pg_foreign_server s
          JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
         WHERE w.fdwname = 'tms_iceberg'
    )
    SELECT current_database()::text AS database,
           coalesce(s.server, j.server)::text AS server,
           coalesce(j.pending, 0) AS pending,
           coalesce(j.retrying, 0) AS retrying,
           coalesce(j.running, 0) AS running,
           coalesce(extract(epoch FROM now() - j.oldest_pending), 0)::float8
               AS oldest_pending_seconds
      FROM servers s
      FULL JOIN jobs j ON j.server = s.server;

COMMENT ON VIEW tms.stat_purge_queue IS
    'the purge backlog per server: pending (retrying among them), running, the oldest pending one''s wait';

-- ---------------------------------------------------------------------
-- The run history, as TimescaleDB's automation framework shows its jobs
-- (timescaledb_information.job_history, job_errors, job_stats)
-- ---------------------------------------------------------------------

-- Every run of a task (tms.task_history, kept for
-- tms.task_history_retention) with the names of what it worked on.
CREATE VIEW tms.job_history AS
    SELECT h.id,
           h.kind,
           h.instance,
           p.name AS policy,
           h.policy_id,
           h.rule_id,
           coalesce(r.operation, mj.operation) AS operation,
           coalesce(t.server, pj.server)::text AS server,
           coalesce(t.namespace, pj.namespace) AS namespace,
           coalesce(t.table_name, pj.table_name) AS table_name,
           h.job_id,
           h.attempt,
           h.succeeded,
           h.pid,
           h.started_at AS start_time,
           h.finished_at AS finish_time,
           h.finished_at - h.started_at AS duration,
           h.sqlstate AS sqlerrcode,
           h.error AS err_message
      FROM tms.task_history h
      LEFT JOIN tms.maintenance_policies p ON p.id = h.policy_id
      LEFT JOIN tms.maintenance_rules r ON r.id = h.rule_id
      LEFT JOIN tms.tables t ON t.id = h.table_id
      LEFT JOIN tms.table_maintenance_job mj ON h.kind = 'maintenance' AND mj.id = h.job_id
      LEFT JOIN tms.iceberg_cleanup_job pj ON h.kind = 'purge' AND pj.id = h.job_id;

COMMENT ON VIEW tms.job_history IS
    'every run of a task: what it worked on, when, its outcome, its error with SQLSTATE (tms.task_history_retention)';

CREATE VIEW tms.job_errors AS
    SELECT id, kind, instance, policy, policy_id, rule_id, operation, server, namespace,
           table_name, job_id, attempt, pid, start_time, finish_time, duration,
           sqlerrcode, err_message
      FROM tms.job_history
     WHERE NOT succeeded;

COMMENT ON VIEW tms.job_errors IS
    'the runs of tasks that failed, with their SQLSTATE and message';

-- Per task kind and rule (policy-level kinds: per policy; the others: per
-- kind), over the history and what pruned rows counted
-- (tms.task_run_totals).  next_start and job_status come from the tasks
-- waiting or running now; their subjects are read from the instance the
-- way each kind's handler reads it: policy-expand "<policy>", cron-job
-- "<policy>:<table>", maintenance "job-<id>" (the job's policy and rule).
CREATE VIEW tms.job_stats AS
    WITH live AS (
        SELECT h.kind, h.policy_id, h.rule_id,
               count(*) AS runs,
               count(*) FILTER (WHERE h.succeeded) AS successes,
               count(*) FILTER (WHERE NOT h.succeeded) AS failures,
               sum(h.finished_at - h.started_at) AS total_duration,
               max(h.finished_at) FILTER (WHERE h.succeeded) AS last_successful_finish,
               max(h.id) AS last_id,
               max(h.id) FILTER (WHERE NOT h.succeeded) AS last_failed_id
          FROM tms.task_history h
         GROUP BY h.kind, h.policy_id, h.rule_id
    ), keys AS (
        SELECT kind, policy_id, rule_id FROM live
        UNION
        SELECT kind, policy_id, rule_id FROM tms.task_run_totals
    ), tasks AS (
        SELECT t.task_name AS kind,
               CASE WHEN t.task_name = 'policy-expand' AND t.task_instance ~ '^[0-9]{1,9}$'
                        THEN t.task_instance::integer
                    WHEN t.task_name = 'cron-job' AND t.task_instance ~ '^[0-9]{1,9}:'
                        THEN split_part(t.task_instance, ':', 1)::integer
                    ELSE j.policy_id END AS policy_id,
               j.rule_id,
               t.picked,
               t.execution_time
          FROM tms.scheduled_tasks t
          LEFT JOIN tms.table_maintenance_job j
            ON t.task_name = 'maintenance'
           AND j.id = CASE WHEN t.task_instance ~ '^job-[0-9]{1,18}$'
                           THEN substr(t.task_instance, 5)::bigint END
    ), waiting AS (
        SELECT kind, policy_id, rule_id,
               count(*) FILTER (WHERE picked) AS running,
               min(execution_time) FILTER (WHERE NOT picked) AS next_start
          FROM tasks
         GROUP BY kind, policy_id, rule_id
    )
    SELECT k.kind,
           p.name AS policy,
           k.policy_id,
           k.rule_id,
           r.operation,
           coalesce(lr.started_at, tt.last_run_started_at) AS last_run_started_at,
           greatest(l.last_successful_finish, tt.last_successful_finish) AS last_successful_finish,
           CASE coalesce(lr.succeeded, tt.last_run_succeeded)
               WHEN true THEN 'succeeded' WHEN false THEN 'failed' END AS last_run_status,
           CASE WHEN w.running > 0 THEN 'running'
                WHEN w.next_start IS NOT NULL THEN 'scheduled'
                ELSE 'idle' END AS job_status,
           coalesce(lr.finished_at - lr.started_at,
                    tt.last_run_finished_at - tt.last_run_started_at) AS last_run_duration,
           w.next_start,
           coalesce(l.runs, 0) + coalesce(tt.runs, 0) AS total_runs,
           coalesce(l.successes, 0) + coalesce(tt.successes, 0) AS total_successes,
           coalesce(l.failures, 0) + coalesce(tt.failures, 0) AS total_failures,
           coalesce(l.total_duration, '0') + coalesce(tt.total_duration, '0') AS total_duration,
           (coalesce(l.total_duration, '0') + coalesce(tt.total_duration, '0'))
               / nullif(coalesce(l.runs, 0) + coalesce(tt.runs, 0), 0) AS average_duration,
           coalesce(lf.finished_at, tt.last_failure_at) AS last_failure_at,
           coalesce(lf.sqlstate, tt.last_sqlstate) AS last_sqlerrcode,
           coalesce(lf.error, tt.last_error) AS last_error
      FROM keys k
      LEFT JOIN live l
        ON (l.kind, l.policy_id, l.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN tms.task_run_totals tt
        ON (tt.kind, tt.policy_id, tt.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN waiting w
        ON (w.kind, w.policy_id, w.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN tms.task_history lr ON lr.id = l.last_id
      LEFT JOIN tms.task_history lf ON lf.id = l.last_failed_id
      LEFT JOIN tms.maintenance_policies p ON p.id = k.policy_id
      LEFT JOIN tms.maintenance_rules r ON r.id = k.rule_id;

COMMENT ON VIEW tms.job_stats IS
    'per task kind and rule: runs, successes, failures, the last run and error with SQLSTATE, durations, next start';

REVOKE ALL ON FUNCTION tms._stat_counters(text),
                       tms._stat_count_job(text, text, text, bigint, bigint, bigint),
                       tms.stat_reset(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms._stat_counters(text) TO pg_monitor;
GRANT SELECT ON tms.stat_tasks, tms.stat_maintenance, tms.stat_purges,
                tms.stat_requests, tms.stat_request_errors, tms.stat_stuck_tasks,
                tms.stat_task_queue, tms.stat_maintenance_queue, tms.stat_purge_queue,
                tms.job_history, tms.job_errors, tms.job_stats
    TO pg_monitor;
