-- tms 0.4.0 -> 0.5.0
--
-- What changed, and what this script does about it:
--
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
