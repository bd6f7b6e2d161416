-- Maintenance operations on demand: tms.plan_operation (a dry run),
-- tms.run_operation (a job a worker runs), tms.cancel_operation.  The
-- operations themselves, and the validation of an operation's options
-- that rules share, are C (src/ops/maint*.c).
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- Raise unless engine can run operation with these options (NULL: check
-- the names only): the one check of operation names, engines and option
-- keys and types, for rules and for run_operation alike.  Credentials in
-- options are tms._check_options's to refuse, before this.
CREATE OR REPLACE FUNCTION tms._check_operation(operation text, engine text, options jsonb)
RETURNS void
LANGUAGE c STABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_check_operation';

-- Record a job for the acting role and its task (called by
-- tms.run_operation after it validated the options and loaded the table as
-- that role).
CREATE OR REPLACE FUNCTION tms._submit_operation(acting regrole, server name, namespace text,
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

CREATE OR REPLACE FUNCTION tms.run_operation(server name, namespace text, table_name text,
                                  operation text, options jsonb DEFAULT '{}',
                                  engine text DEFAULT 'local')
RETURNS bigint
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_run_operation';

COMMENT ON FUNCTION tms.run_operation(name, text, text, text, jsonb, text) IS
    'validate, then record a maintenance job on one table for the acting role; a worker runs it; returns the job id';

CREATE OR REPLACE FUNCTION tms.plan_operation(server name, namespace text, table_name text,
                                   operation text, options jsonb DEFAULT '{}')
RETURNS TABLE (action text, target text, detail jsonb)
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_plan_operation';

COMMENT ON FUNCTION tms.plan_operation(name, text, text, text, jsonb) IS
    'what an operation would commit and delete on one table, changing nothing';

-- A deletion request: a job of operation retention whose options are the
-- where and the mode (doc/operations.md, "Deleting rows"); its dry run is
-- tms.plan_operation(..., 'retention', '{"where": ..., "mode": "rewrite"}').
CREATE OR REPLACE FUNCTION tms.delete_rows(server name, namespace text, table_name text,
                               "where" text, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_delete_rows';

COMMENT ON FUNCTION tms.delete_rows(name, text, text, text, jsonb) IS
    'validate, then record a job deleting the rows a where matches from one table (files wholly matching dropped by metadata, the others that may match rewritten); returns the job id';

-- Cancel a job: a pending one ends now; a running one stops at its next
-- step (a commit in flight is resolved first; after a commit landed, the
-- files it unreferenced are left to orphan cleanup).  The requester, the
-- owner of the job's policy and superusers may cancel.
CREATE OR REPLACE FUNCTION tms._cancel_operation(acting regrole, job_id bigint)
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
           AND NOT t.picked
           -- a batch's task stays while it has other jobs to run
           AND NOT EXISTS (SELECT 1 FROM tms.table_maintenance_job o
                            WHERE o.task_kind = j.task_kind AND o.task_instance = j.task_instance
                              AND o.id <> j.id AND o.finished_at IS NULL);
        PERFORM tms._job_ended(j.id);
    ELSE
        UPDATE tms.table_maintenance_job
           SET cancel_requested = true, reason = format('cancel requested by %s', acting)
         WHERE id = j.id;
    END IF;
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION tms.cancel_operation(job_id bigint)
RETURNS boolean
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.cancel_operation(bigint) IS
    'cancel a maintenance job: a pending one at once, a running one at its next step';

GRANT EXECUTE ON FUNCTION tms.run_operation(name, text, text, text, jsonb, text),
                          tms.plan_operation(name, text, text, text, jsonb),
                          tms.delete_rows(name, text, text, text, jsonb),
                          tms.cancel_operation(bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION tms._submit_operation(regrole, name, text, text, text, text, jsonb, text, text, bigint),
                       tms._cancel_operation(regrole, bigint),
                       tms._check_operation(text, text, jsonb)
    FROM PUBLIC;
