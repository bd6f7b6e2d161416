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

