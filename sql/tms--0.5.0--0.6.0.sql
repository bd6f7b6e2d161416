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

-- tms._start_job: a comment of its body names the upstream design it follows
-- (no change of behaviour).
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
