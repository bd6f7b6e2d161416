-- tms 0.5.0 -> 0.6.0
--
-- What changed, and what this script does about it:
--
--  * Task handlers and tms.maintenance_handler run as PostgreSQL runs user
--    code for VACUUM: as the procedure's owner in a security-restricted
--    operation, in a GUC nest level of their own, called by OID (C only).
--    tms's own statements never depend on a search_path: every function
--    of the extension that runs SQL gets search_path = pg_catalog, pg_temp
--    (the two procedures that commit set it per transaction in C; the
--    functions that run no SQL keep none).
ALTER FUNCTION tms._check_operation(text,text,jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms._jdbc_commit_trigger() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms._reset_baseline(bigint,bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms._state_event() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms._table_dropped(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms._wake_at_commit() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.add_group_member(text,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.add_rule(text,text,text,jsonb,text,text,jsonb,jsonb,interval) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.attach_commit_listener(name) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.attach_jdbc_catalog(regclass,name,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.cancel_operation(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.cancel_task(text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.catalog_config(name) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.create_object_group(text,name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.create_policy(text,text,text,jsonb,boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.detach_commit_source(name) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.drop_object_group(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.drop_policy(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.drop_rule(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.drop_table(name,text,text,boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.engine_fdw_validator(text[],oid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.engine_statement(text,text,text,text,jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.evaluate_now(text,boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.grant_object_group(text,regrole) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.iceberg_fdw_validator(text[],oid) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.list_namespaces(name,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.list_tables(name,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.notify_commit(name,text,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.notify_drop(name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.plan_operation(name,text,text,text,jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.prune_evaluation_log(integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.prune_purge_jobs() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.purge_status(name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.purge_table(name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.register_task_kind(text,regprocedure,integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.remove_group_member(text,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.retry_purge(bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.revoke_object_group(text,regrole) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.run_operation(name,text,text,text,jsonb,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.schedule_task(text,text,jsonb,timestamp with time zone,integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.set_policy_active(text,boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.set_policy_window(text,jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.stat_reset(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.table_files(name,text,text,bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.table_metadata(name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.table_metrics(name,text,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.table_snapshots(name,text,text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.unregister_task_kind(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION tms.webhook_fdw_validator(text[],oid) SET search_path = pg_catalog, pg_temp;

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
SET search_path = pg_catalog, pg_temp
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


-- An engine job records, before the first request that may start a run on
-- the engine, that a run may exist (submitted_at) and the table's snapshot
-- then (submit_snapshot_id): a recovered job never submits again, it
-- follows the run or looks at the snapshots committed after that one.
-- A job in flight on an engine when the update runs has its request's
-- snapshot as the best base known.
ALTER TABLE tms.table_maintenance_job
    ADD COLUMN submitted_at timestamptz,
    ADD COLUMN submit_snapshot_id bigint;
UPDATE tms.table_maintenance_job
   SET submitted_at = coalesce(started_at, created_at),
       submit_snapshot_id = before_snapshot_id
 WHERE finished_at IS NULL AND phase IN ('submit', 'engine');
