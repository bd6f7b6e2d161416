-- tms 0.5.0 -> 0.6.0
--
-- What changed, and what this script does about it:
--

-- Purge safety (doc/purge.md): tms.purge_table gains
-- delete_other_tables_files (files at or below the location of another
-- table tms knows are kept unless it is true); the job records it and an
-- example of a kept file, and tms.purge_jobs shows both.
ALTER TABLE tms.iceberg_cleanup_job
    ADD COLUMN kept_example text,
    ADD COLUMN delete_other_tables_files boolean NOT NULL DEFAULT false;

DROP FUNCTION tms.purge_table(name, text, text);
CREATE FUNCTION tms.purge_table(server name, namespace text, table_name text,
                                delete_other_tables_files boolean DEFAULT false)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_purge_table';

COMMENT ON FUNCTION tms.purge_table(name, text, text, boolean) IS
    'drop an Iceberg table from its catalog and delete its files asynchronously (the drop follows the commit); returns the job id';

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

