-- Async purge of dropped Iceberg tables (doc/purge.md).
--
-- tms.purge_table() records a job here in the caller's transaction; the
-- job's task (kind "purge", instance = job id) is run by the pool workers
-- or CALL tms.run_pending(): its first step drops the table from its
-- catalog, then every reachable file is deleted in bulk batches
-- (src/ops/purge.c, purge_walk.c).
-- Idempotent part, replayed by every update script: only statements
-- that may run again (doc/developing.md).  Tables: sql/install/50_purge.sql.

-- purge_table: record the purge (a worker drops the table right after the
-- commit) and delete every file in the background.  Returns the job id.
-- Refused, with nothing recorded or dropped, for a table the purge could
-- not walk once dropped (its metadata file unreadable or outside the
-- allowed roots, gc.enabled=false).  Files at or below the location of
-- another table tms knows are kept unless delete_other_tables_files.
CREATE OR REPLACE FUNCTION tms.purge_table(server name, namespace text, table_name text,
                                delete_other_tables_files boolean DEFAULT false)
RETURNS bigint
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_purge_table';

COMMENT ON FUNCTION tms.purge_table(name, text, text, boolean) IS
    'drop an Iceberg table from its catalog and delete its files asynchronously (the drop follows the commit); returns the job id';

-- drop_table: the synchronous catalog drop (purge => true: the catalog
-- deletes the files before answering).
CREATE OR REPLACE FUNCTION tms.drop_table(server name, namespace text, table_name text,
                               purge boolean DEFAULT false)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_drop_table';

COMMENT ON FUNCTION tms.drop_table(name, text, text, boolean) IS
    'drop an Iceberg table through its catalog, synchronously (purge => true: the catalog deletes its files)';

-- What an operator reads.
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
           j.held_namespace, j.held_name,
           j.kept_example, j.delete_other_tables_files
      FROM tms.iceberg_cleanup_job j
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'purge' AND t.task_instance = j.id::text;

COMMENT ON VIEW tms.purge_jobs IS 'async purge jobs with their progress and lease';

CREATE OR REPLACE VIEW tms.purge_job_counts AS
    SELECT count(*) FILTER (WHERE state = 'PENDING') AS pending,
           count(*) FILTER (WHERE state = 'RUNNING') AS running,
           count(*) FILTER (WHERE state = 'SUCCEEDED') AS succeeded,
           count(*) FILTER (WHERE state = 'FAILED') AS failed,
           now() - min(created_at) FILTER (WHERE state = 'PENDING') AS oldest_pending_age,
           coalesce(sum(files_deleted), 0) AS files_deleted,
           coalesce(sum(bytes_freed), 0) AS bytes_freed,
           coalesce(sum(files_skipped), 0) AS files_skipped
      FROM tms.iceberg_cleanup_job;

COMMENT ON VIEW tms.purge_job_counts IS 'purge jobs per state, backlog age, files deleted and bytes freed';

GRANT SELECT ON tms.purge_jobs, tms.purge_job_counts TO pg_monitor;

-- Who may see and re-drive a job: its requester, the owner of its server,
-- and members of pg_monitor (seeing) / superusers.
CREATE OR REPLACE FUNCTION tms._may_see_job(acting regrole, j tms.iceberg_cleanup_job)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(acting, j.requested_by, 'USAGE')
        OR pg_has_role(acting, 'pg_monitor', 'USAGE')
        OR EXISTS (SELECT 1 FROM pg_foreign_server s
                    WHERE s.srvname = j.server AND pg_has_role(acting, s.srvowner, 'USAGE'))
$$;

-- purge_status: the latest job of an identifier the acting role may see,
-- and whether it still blocks re-creating the name (the tombstone).
CREATE OR REPLACE FUNCTION tms._purge_status(acting regrole, server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.id, j.state, j.state IN ('PENDING', 'RUNNING'), j.attempts,
           j.last_error, j.files_deleted, j.created_at, j.finished_at
      FROM tms.iceberg_cleanup_job j
     WHERE j.server = $2 AND j.namespace = $3 AND j.table_name = $4
       AND tms._may_see_job($1, j)
     ORDER BY (j.state IN ('PENDING', 'RUNNING')) DESC, j.id DESC
     LIMIT 1
$$;

CREATE OR REPLACE FUNCTION tms.purge_status(server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE c STABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.purge_status(name, text, text) IS
    'latest purge job of a table identifier (one the caller requested, owns the server of, or monitors); blocks_recreate while it is PENDING or RUNNING';

-- retry_purge: re-drive a FAILED job from scratch (its requester, the
-- server's owner, or a superuser).
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

CREATE OR REPLACE FUNCTION tms.retry_purge(job_id bigint)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.retry_purge(bigint) IS 're-drive a FAILED purge job';

-- prune_purge_jobs: delete SUCCEEDED and FAILED rows older than
-- tms.purge_retention (also done by the workers after each job).
CREATE OR REPLACE FUNCTION tms._prune_purge_jobs(acting regrole)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM tms.iceberg_cleanup_job
         WHERE state IN ('SUCCEEDED', 'FAILED')
           AND finished_at < now() -
               coalesce(current_setting('tms.purge_retention', true), '30d')::interval
        RETURNING 1)
    SELECT count(*) FROM gone
$$;

CREATE OR REPLACE FUNCTION tms.prune_purge_jobs()
RETURNS bigint
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

REVOKE ALL ON FUNCTION tms._may_see_job(regrole, tms.iceberg_cleanup_job),
                       tms._purge_status(regrole, name, text, text),
                       tms._retry_purge(regrole, bigint),
                       tms._prune_purge_jobs(regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.purge_status(name, text, text),
                          tms.retry_purge(bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION tms.prune_purge_jobs() FROM PUBLIC;

-- The tombstone for catalogs whose pointers live in this database in the
-- Iceberg JDBC layout: attach to their iceberg_tables table with
--   CREATE TRIGGER tms_tombstone BEFORE INSERT ON iceberg_tables
--     FOR EACH ROW EXECUTE FUNCTION tms.refuse_purging_tables('server' [, 'catalog_name']);
-- It refuses a pointer row (create, register) for an identifier whose
-- purge job of that tms server is PENDING or RUNNING.  SECURITY DEFINER
-- (as only tms._budget_wait and tms._budget_wait_job are besides): it runs
-- on another owner's table and must read the job table, which it only
-- reads.
CREATE OR REPLACE FUNCTION tms.refuse_purging_tables()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r jsonb := to_jsonb(NEW);
    j record;
BEGIN
    IF TG_NARGS < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tms.refuse_purging_tables() needs the tms server name as trigger argument',
            HINT = 'CREATE TRIGGER ... EXECUTE FUNCTION tms.refuse_purging_tables(''server'').';
    END IF;
    IF TG_NARGS >= 2 AND r ->> 'catalog_name' IS DISTINCT FROM TG_ARGV[1] THEN
        RETURN NEW;
    END IF;
    IF upper(coalesce(r ->> 'iceberg_type', 'TABLE')) <> 'TABLE' THEN
        RETURN NEW;
    END IF;
    SELECT id, state INTO j FROM tms.iceberg_cleanup_job
     WHERE server = TG_ARGV[0] AND namespace = r ->> 'table_namespace'
       AND table_name = r ->> 'table_name' AND state IN ('PENDING', 'RUNNING');
    IF FOUND THEN
        -- an integrity violation: a JDBC catalog reports it as a conflict
        RAISE EXCEPTION USING ERRCODE = 'integrity_constraint_violation',
            MESSAGE = format('table %s.%s is being purged by tms purge job %s (%s)',
                             r ->> 'table_namespace', r ->> 'table_name', j.id, j.state),
            DETAIL = 'Its files are still being deleted; the name is free again when the job has SUCCEEDED or FAILED.',
            HINT = format('SELECT * FROM tms.purge_jobs WHERE id = %s;', j.id);
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION tms.refuse_purging_tables() IS
    'trigger for a JDBC-layout iceberg_tables table: refuses re-creating a table whose purge is active';
