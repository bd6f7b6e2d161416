-- tms 0.1.0, as released: the install script of that version, kept so that
-- CREATE EXTENSION tms VERSION '0.1.0' and the upgrade test can install it.

-- sql/install/00_schema.sql
-- tms: Apache Iceberg table maintenance from inside PostgreSQL.
-- The schema "tms" is created by CREATE EXTENSION (tms.control: schema = tms).

\echo Use "CREATE EXTENSION tms" to load this file. \quit

COMMENT ON SCHEMA tms IS 'Apache Iceberg table maintenance (tms extension)';

-- Everyone may look into the schema; each object grants its own privileges
-- (the pure functions to everyone, views and actions to chosen roles).
GRANT USAGE ON SCHEMA tms TO PUBLIC;

-- sql/install/10_workers.sql
-- The tms background processes, from the shared memory they maintain.

CREATE FUNCTION tms.workers_internal(
    OUT pid integer,
    OUT role text,
    OUT database name,
    OUT worker_number integer,
    OUT state text,
    OUT current_task text,
    OUT started_at timestamptz,
    OUT state_since timestamptz)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_workers';

COMMENT ON FUNCTION tms.workers_internal() IS
    'tms processes from shared memory; use the view tms.workers';

CREATE VIEW tms.workers AS
    SELECT pid, role, database, worker_number, state, current_task,
           started_at, state_since
      FROM tms.workers_internal()
     ORDER BY CASE role WHEN 'launcher' THEN 0 WHEN 'supervisor' THEN 1 ELSE 2 END,
              database, worker_number;

COMMENT ON VIEW tms.workers IS
    'tms launcher, supervisors and pool workers: what each is doing now';

-- A view's caller needs EXECUTE on the functions it calls.
REVOKE ALL ON FUNCTION tms.workers_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.workers_internal() TO pg_monitor;
GRANT SELECT ON tms.workers TO pg_monitor;

-- sql/install/20_sched.sql
-- Scheduler core: db-scheduler's scheduled_tasks, task kinds with
-- concurrency caps, and the views an operator reads.
--
-- Claiming, heartbeats and completion are done by C code (src/sched/)
-- shared by the background workers and CALL tms.run_pending(); the
-- statements it runs are documented there.

-- What kinds of task exist and how many of each may run at once.
CREATE TABLE tms.task_kinds (
    kind            text PRIMARY KEY
                    CHECK (kind ~ '^[a-z][a-z0-9_-]*$' AND length(kind) <= 63),
    handler         regprocedure,   -- NULL: a built-in kind run by C code
    max_concurrency integer NOT NULL CHECK (max_concurrency BETWEEN 1 AND 1000),
    builtin         boolean NOT NULL DEFAULT false,
    registered_by   name NOT NULL DEFAULT current_user,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (builtin = (handler IS NULL))
);

COMMENT ON TABLE tms.task_kinds IS
    'task kinds: built-in (C) or a SQL procedure handler(task_instance text, task_data jsonb), with a per-kind concurrency cap';

-- One row per running-slot of each kind.  A claim takes a free slot with
-- FOR UPDATE SKIP LOCKED and writes its task into it, so a cap holds across
-- every worker and every CALL tms.run_pending() without serialising claims.
CREATE TABLE tms.task_slots (
    kind            text NOT NULL REFERENCES tms.task_kinds ON DELETE CASCADE,
    slot            integer NOT NULL,
    task_instance   text,           -- NULL: free
    since           timestamptz,    -- when it was taken
    PRIMARY KEY (kind, slot),
    CHECK ((task_instance IS NULL) = (since IS NULL))
);

-- db-scheduler's table (task_name is the kind), plus priority, last_error
-- and the claimant's pid.
CREATE TABLE tms.scheduled_tasks (
    task_name            text NOT NULL REFERENCES tms.task_kinds (kind),
    task_instance        text NOT NULL CHECK (length(task_instance) BETWEEN 1 AND 1000),
    task_data            jsonb,
    execution_time       timestamptz NOT NULL,
    picked               boolean NOT NULL DEFAULT false,
    picked_by            text,
    picked_pid           integer,
    last_success         timestamptz,
    last_failure         timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_heartbeat       timestamptz,
    version              bigint NOT NULL DEFAULT 1,
    priority             integer NOT NULL DEFAULT 0,
    last_error           text,
    PRIMARY KEY (task_name, task_instance),
    CHECK (picked = (picked_by IS NOT NULL)),
    CHECK (NOT picked OR last_heartbeat IS NOT NULL)
);

-- the claim: due, unpicked rows in priority then due-time order
CREATE INDEX scheduled_tasks_due_idx ON tms.scheduled_tasks
    (priority DESC, execution_time) WHERE NOT picked;
-- dead-lease recovery: picked rows by heartbeat
CREATE INDEX scheduled_tasks_picked_idx ON tms.scheduled_tasks
    (last_heartbeat) WHERE picked;

COMMENT ON TABLE tms.scheduled_tasks IS
    'db-scheduler task rows; claimed by tms workers and CALL tms.run_pending()';

ALTER TABLE tms.scheduled_tasks SET (fillfactor = 70);
ALTER TABLE tms.task_slots SET (fillfactor = 50);

SELECT pg_catalog.pg_extension_config_dump('tms.task_kinds', 'WHERE NOT builtin');
SELECT pg_catalog.pg_extension_config_dump('tms.scheduled_tasks', '');

-- The built-in kinds of the seed's three pools; their caps follow the
-- settings tms.expand_concurrency, tms.cron_concurrency and
-- tms.commit_concurrency (synchronised by the supervisor).
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin) VALUES
    ('policy-expand', NULL, 4, true),
    ('cron-job', NULL, 8, true),
    ('commit-job', NULL, 4, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT kind, s FROM tms.task_kinds, generate_series(1, max_concurrency) s;

-- register_task_kind(kind, handler, max_concurrency): a kind whose tasks
-- run the SQL procedure handler(task_instance text, task_data jsonb).
CREATE FUNCTION tms.register_task_kind(kind text, handler regprocedure,
                                       max_concurrency integer DEFAULT 1)
RETURNS void
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'tms_register_task_kind';

COMMENT ON FUNCTION tms.register_task_kind(text, regprocedure, integer) IS
    'register or update a task kind run by a SQL procedure (superuser only)';

CREATE FUNCTION tms.unregister_task_kind(kind text)
RETURNS void
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'tms_unregister_task_kind';

-- schedule_task: insert a task, or reschedule an existing one (new data and
-- due time).  A task that is running keeps running; the new due time is
-- its next run.
CREATE FUNCTION tms.schedule_task(kind text, instance text,
                                  data jsonb DEFAULT NULL,
                                  run_at timestamptz DEFAULT now(),
                                  priority integer DEFAULT 0)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_schedule_task';

CREATE FUNCTION tms.cancel_task(kind text, instance text)
RETURNS boolean
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'tms_cancel_task';

-- run_pending: the claim-execute loop in the calling session, for
-- deployments driven by pg_cron.  Commits between tasks; returns how many
-- tasks it executed and how many of them failed.
CREATE PROCEDURE tms.run_pending(max_tasks integer DEFAULT 100,
                                 kinds text[] DEFAULT NULL,
                                 INOUT executed integer DEFAULT NULL,
                                 INOUT failed integer DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_run_pending';

-- run_task: execute one given task now, whether due or not; fails cleanly,
-- changing nothing, while another executor holds a live lease on it.
CREATE PROCEDURE tms.run_task(kind text, instance text,
                              INOUT executed integer DEFAULT NULL,
                              INOUT failed integer DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_run_task';

REVOKE ALL ON FUNCTION tms.register_task_kind(text, regprocedure, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.unregister_task_kind(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.schedule_task(text, text, jsonb, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.cancel_task(text, text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE tms.run_pending(integer, text[], integer, integer) FROM PUBLIC;
REVOKE ALL ON PROCEDURE tms.run_task(text, text, integer, integer) FROM PUBLIC;

-- What an operator asks: what is due, what runs (who, heartbeat age), what
-- keeps failing.
CREATE VIEW tms.tasks AS
    SELECT t.task_name AS kind,
           t.task_instance AS instance,
           CASE
               WHEN t.picked THEN 'running'
               WHEN t.consecutive_failures > 0 THEN 'failing'
               WHEN t.execution_time <= now() THEN 'due'
               ELSE 'scheduled'
           END AS state,
           t.execution_time AS due_at,
           t.priority,
           t.picked_by,
           t.picked_pid AS owner_pid,
           CASE WHEN t.picked THEN now() - t.last_heartbeat END AS heartbeat_age,
           t.consecutive_failures,
           t.last_success,
           t.last_failure,
           t.last_error,
           t.task_data AS data
      FROM tms.scheduled_tasks t;

COMMENT ON VIEW tms.tasks IS 'scheduled tasks with their state: due, scheduled, running, failing';

CREATE VIEW tms.task_counts AS
    SELECT k.kind,
           k.max_concurrency,
           count(t.*) FILTER (WHERE t.picked) AS running,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time <= now()) AS due,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time > now()) AS scheduled,
           count(t.*) FILTER (WHERE t.consecutive_failures > 0) AS failing,
           min(t.execution_time) FILTER (WHERE NOT t.picked) AS next_due
      FROM tms.task_kinds k
      LEFT JOIN tms.scheduled_tasks t ON t.task_name = k.kind
     GROUP BY k.kind, k.max_concurrency;

COMMENT ON VIEW tms.task_counts IS 'tasks per kind and state';

GRANT SELECT ON tms.tasks, tms.task_counts TO pg_monitor;

-- sql/install/30_dsl.sql
-- The policy condition language (src/dsl/, src/sql_api/dsl_sql.c).
-- Pure functions: they work without shared_preload_libraries.

CREATE FUNCTION tms.dsl_check(
    expr text,
    OUT ok boolean,
    OUT type text,
    OUT needs text,
    OUT error text,
    OUT "position" integer,
    OUT uses_files boolean,
    OUT variables text[],
    OUT hint text)
RETURNS record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_check';

COMMENT ON FUNCTION tms.dsl_check(text) IS
    'compile a policy condition: whether it is valid, what it needs, or the error and its 1-based position';

CREATE FUNCTION tms.dsl_eval(
    expr text,
    metrics jsonb,
    properties jsonb DEFAULT '{}',
    files jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_eval';

COMMENT ON FUNCTION tms.dsl_eval(text, jsonb, jsonb, jsonb) IS
    'evaluate a policy condition over table metrics (jsonb keyed by variable), table properties and data files';

CREATE FUNCTION tms.dsl_explain(
    expr text,
    metrics jsonb,
    properties jsonb DEFAULT '{}',
    files jsonb DEFAULT NULL)
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_explain';

COMMENT ON FUNCTION tms.dsl_explain(text, jsonb, jsonb, jsonb) IS
    'evaluate a policy condition and explain it: the value of every sub-expression and a text summary';

-- sql/install/40_catalog.sql
-- Iceberg catalogs: the tms_iceberg foreign-data wrapper (a catalog is a
-- foreign server, its credentials a user mapping) and the functions that
-- look into catalogs and tables.  See doc/catalogs.md.

CREATE FUNCTION tms.iceberg_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
AS 'MODULE_PATHNAME', 'tms_iceberg_fdw_validator';

COMMENT ON FUNCTION tms.iceberg_fdw_validator(text[], oid) IS
    'validates options of tms_iceberg servers and user mappings';

CREATE FOREIGN DATA WRAPPER tms_iceberg
    VALIDATOR tms.iceberg_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_iceberg IS
    'Iceberg REST catalogs: CREATE SERVER ... FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri ''...'')';

CREATE FUNCTION tms.catalog_config(server name)
RETURNS TABLE (key text, value text)
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_catalog_config';

COMMENT ON FUNCTION tms.catalog_config(name) IS
    'the catalog''s merged configuration (/v1/config), prefix and endpoints; secrets left out';

CREATE FUNCTION tms.list_namespaces(server name, parent text DEFAULT NULL)
RETURNS TABLE (namespace text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_list_namespaces';

COMMENT ON FUNCTION tms.list_namespaces(name, text) IS
    'namespaces directly under parent (top level when null); levels joined with "."';

CREATE FUNCTION tms.list_tables(server name, namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, table_name text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_list_tables';

COMMENT ON FUNCTION tms.list_tables(name, text) IS
    'tables of a namespace, or of every namespace when null';

CREATE FUNCTION tms.table_metadata(server name, namespace text, table_name text)
RETURNS jsonb
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_table_metadata';

COMMENT ON FUNCTION tms.table_metadata(name, text, text) IS
    'the table''s current metadata as the catalog returns it';

CREATE FUNCTION tms.table_snapshots(server name, namespace text, table_name text)
RETURNS TABLE (snapshot_id bigint, parent_id bigint, sequence_number bigint,
               committed_at timestamptz, operation text, manifest_list text,
               summary jsonb, is_current boolean)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_table_snapshots';

COMMENT ON FUNCTION tms.table_snapshots(name, text, text) IS
    'the snapshots in the table''s current metadata';

CREATE FUNCTION tms.table_files(server name, namespace text, table_name text,
                                snapshot_id bigint DEFAULT NULL)
RETURNS TABLE (file_path text, content text, file_format text, spec_id integer,
               partition jsonb, record_count bigint, file_size_in_bytes bigint,
               sequence_number bigint, file_sequence_number bigint,
               added_snapshot_id bigint, manifest_path text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_table_files';

COMMENT ON FUNCTION tms.table_files(name, text, text, bigint) IS
    'live data and delete files of a snapshot (the current one when null), read from its manifests';

CREATE FUNCTION tms.table_metrics(server name, namespace text, table_name text,
                                  level text DEFAULT 'auto')
RETURNS jsonb
LANGUAGE c VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_table_metrics';

COMMENT ON FUNCTION tms.table_metrics(name, text, text, text) IS
    'the policy DSL''s table variables, computed up to level (metadata, manifest_list, manifests, deletes; auto = all)';

-- sql/install/50_purge.sql
-- Async purge of dropped Iceberg tables (doc/purge.md).
--
-- tms.purge_table() drops a table from its catalog without purge and
-- records a job here; the job's task (kind "purge", instance = job id) is
-- run by the pool workers or CALL tms.run_pending(), which re-read the
-- metadata and delete every reachable file in bulk batches (src/ops/purge.c).

CREATE TABLE tms.iceberg_cleanup_job (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    server            name NOT NULL,        -- the tms_iceberg foreign server
    namespace         text NOT NULL,        -- levels joined by '.'
    table_name        text NOT NULL,
    table_uuid        text,
    table_location    text NOT NULL,        -- nothing outside it is deleted
    metadata_location text NOT NULL,
    -- non-secret storage settings in effect at enqueue time: endpoint,
    -- region, path_style, and where credentials come from
    storage           jsonb NOT NULL DEFAULT '{}',
    state             text NOT NULL DEFAULT 'PENDING'
                      CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED')),
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text,
    heartbeat_at      timestamptz,          -- last progress written by a worker
    created_by        name NOT NULL DEFAULT current_user,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    -- progress and outcome (counts of the latest attempt)
    phase             text,                 -- content, manifests, lists, metadata
    files_deleted     bigint NOT NULL DEFAULT 0,    -- includes not-found
    bytes_freed       bigint NOT NULL DEFAULT 0,    -- declared sizes where known
    files_skipped     bigint NOT NULL DEFAULT 0,    -- outside location/allowed roots
    skipped_example   text,
    files_kept        bigint NOT NULL DEFAULT 0,    -- gc.enabled=false data files
    files_unreadable  bigint NOT NULL DEFAULT 0,    -- manifests/lists already gone
    delete_requests   bigint NOT NULL DEFAULT 0,
    CHECK ((state IN ('SUCCEEDED', 'FAILED')) = (finished_at IS NOT NULL))
);

COMMENT ON TABLE tms.iceberg_cleanup_job IS
    'async purge jobs of dropped Iceberg tables: PENDING -> RUNNING -> SUCCEEDED | FAILED';

CREATE INDEX iceberg_cleanup_job_state_idx ON tms.iceberg_cleanup_job (state, updated_at);
-- the tombstone: at most one active job per identifier, found by one probe
CREATE UNIQUE INDEX iceberg_cleanup_job_active_idx ON tms.iceberg_cleanup_job
    (server, namespace, table_name) WHERE state IN ('PENDING', 'RUNNING');
CREATE INDEX iceberg_cleanup_job_object_idx ON tms.iceberg_cleanup_job
    (server, namespace, table_name, id);

-- Storage credentials a catalog vended at enqueue time, for the workers;
-- readable by the extension owner only, deleted when the job ends.
CREATE TABLE tms.iceberg_cleanup_credentials (
    job_id      bigint PRIMARY KEY REFERENCES tms.iceberg_cleanup_job ON DELETE CASCADE,
    config      jsonb NOT NULL,     -- the vended key/values (secrets included)
    expires_at  timestamptz         -- from s3.session-token-expires-at-ms, if given
);

REVOKE ALL ON tms.iceberg_cleanup_job, tms.iceberg_cleanup_credentials FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_job', '');

-- The built-in task kind; its cap follows tms.purge_concurrency.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('purge', NULL, 2, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'purge', s FROM generate_series(1, 2) s;

-- purge_table: drop now, delete every file in the background.  Returns
-- the job id.
CREATE FUNCTION tms.purge_table(server name, namespace text, table_name text)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_purge_table';

COMMENT ON FUNCTION tms.purge_table(name, text, text) IS
    'drop an Iceberg table from its catalog and delete its files asynchronously; returns the job id';

-- drop_table: the synchronous catalog drop (purge => true: the catalog
-- deletes the files before answering).
CREATE FUNCTION tms.drop_table(server name, namespace text, table_name text,
                               purge boolean DEFAULT false)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_drop_table';

COMMENT ON FUNCTION tms.drop_table(name, text, text, boolean) IS
    'drop an Iceberg table through its catalog, synchronously (purge => true: the catalog deletes its files)';

-- What an operator reads.
CREATE VIEW tms.purge_jobs AS
    SELECT j.id, j.server, j.namespace, j.table_name, j.state, j.phase,
           j.attempts, j.last_error,
           j.files_deleted, j.bytes_freed, j.files_skipped, j.skipped_example,
           j.files_kept, j.files_unreadable, j.delete_requests,
           j.created_by, j.created_at, j.started_at, j.finished_at, j.updated_at,
           t.picked_by AS running_on,
           CASE WHEN t.picked THEN now() - t.last_heartbeat END AS heartbeat_age,
           CASE WHEN NOT t.picked THEN t.execution_time END AS next_attempt_at,
           j.table_location, j.metadata_location, j.table_uuid
      FROM tms.iceberg_cleanup_job j
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'purge' AND t.task_instance = j.id::text;

COMMENT ON VIEW tms.purge_jobs IS 'async purge jobs with their progress and lease';

CREATE VIEW tms.purge_job_counts AS
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

-- purge_status: the latest job of an identifier, and whether it still
-- blocks re-creating the name (the tombstone).
CREATE FUNCTION tms.purge_status(server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.id, j.state, j.state IN ('PENDING', 'RUNNING'), j.attempts,
           j.last_error, j.files_deleted, j.created_at, j.finished_at
      FROM tms.iceberg_cleanup_job j
     WHERE j.server = $1 AND j.namespace = $2 AND j.table_name = $3
     ORDER BY (j.state IN ('PENDING', 'RUNNING')) DESC, j.id DESC
     LIMIT 1
$$;

COMMENT ON FUNCTION tms.purge_status(name, text, text) IS
    'latest purge job of a table identifier; blocks_recreate while it is PENDING or RUNNING';

-- retry_purge: re-drive a FAILED job from scratch.
CREATE FUNCTION tms.retry_purge(job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.iceberg_cleanup_job;
BEGIN
    SELECT * INTO j FROM tms.iceberg_cleanup_job WHERE id = job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = format('purge job %s does not exist', job_id);
    END IF;
    IF j.state <> 'FAILED' THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('purge job %s is %s, not FAILED', job_id, j.state),
            HINT = 'Only a FAILED job can be retried; a PENDING or RUNNING one is retried by the workers.';
    END IF;
    UPDATE tms.iceberg_cleanup_job
       SET state = 'PENDING', attempts = 0, finished_at = NULL, phase = NULL,
           last_error = 'retried by ' || session_user || ' after: ' || coalesce(j.last_error, ''),
           updated_at = now()
     WHERE id = job_id;
    PERFORM tms.schedule_task('purge', job_id::text);
END
$$;

COMMENT ON FUNCTION tms.retry_purge(bigint) IS 're-drive a FAILED purge job';
REVOKE ALL ON FUNCTION tms.retry_purge(bigint) FROM PUBLIC;

-- prune_purge_jobs: delete SUCCEEDED and FAILED rows older than
-- tms.purge_retention (also done by the workers after each job).
CREATE FUNCTION tms.prune_purge_jobs()
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER
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

REVOKE ALL ON FUNCTION tms.prune_purge_jobs() FROM PUBLIC;

-- The tombstone for catalogs whose pointers live in this database in the
-- Iceberg JDBC layout: attach to their iceberg_tables table with
--   CREATE TRIGGER tms_tombstone BEFORE INSERT ON iceberg_tables
--     FOR EACH ROW EXECUTE FUNCTION tms.refuse_purging_tables('server' [, 'catalog_name']);
-- It refuses a pointer row (create, register) for an identifier whose
-- purge job of that tms server is PENDING or RUNNING.
CREATE FUNCTION tms.refuse_purging_tables()
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

-- sql/install/60_policy.sql
-- Maintenance policies: object groups, policies and rules, the tables tms
-- knows in each catalog with their activity counters, per (table, rule)
-- baselines, maintenance jobs and the evaluation log.  See doc/policies.md;
-- the evaluation cycle itself is C (src/ops/policy*.c), run by the
-- supervisor and by tms.evaluate_now().

-- ---------------------------------------------------------------------
-- Helpers in C (src/sql_api/policy_sql.c)
-- ---------------------------------------------------------------------

-- Next / previous firing of a 5-field cron expression in a time zone.
CREATE FUNCTION tms.cron_next(expr text, after timestamptz DEFAULT now(),
                              zone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_cron_next';

COMMENT ON FUNCTION tms.cron_next(text, timestamptz, text) IS
    'the first firing of a 5-field cron expression strictly after "after", in time zone "zone" (null: none within 30 years)';

CREATE FUNCTION tms.cron_prev(expr text, before timestamptz DEFAULT now(),
                              zone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_cron_prev';

COMMENT ON FUNCTION tms.cron_prev(text, timestamptz, text) IS
    'the last firing of a 5-field cron expression at or before "before", in time zone "zone"';

GRANT EXECUTE ON FUNCTION tms.cron_next(text, timestamptz, text),
                          tms.cron_prev(text, timestamptz, text) TO PUBLIC;

-- The role that called the current tms function, seen through SECURITY
-- DEFINER (the outer user id).
CREATE FUNCTION tms._caller()
RETURNS regrole
LANGUAGE c STABLE STRICT
AS 'MODULE_PATHNAME', 'tms_policy_caller';

-- Compile a condition; returns the metric level it needs, or raises the
-- compile error (SQLSTATE, caret excerpt in DETAIL).
CREATE FUNCTION tms._compile_condition(condition text)
RETURNS text
LANGUAGE c IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'tms_policy_compile_condition';

-- ---------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------

-- Iceberg tables tms has seen in each catalog, with activity counters
-- accumulated from the commits (snapshots) it observed.
CREATE TABLE tms.tables (
    id                bigserial PRIMARY KEY,
    server            name NOT NULL,
    namespace         text NOT NULL,          -- levels joined with "."
    table_name        text NOT NULL,
    table_uuid        text,
    metadata_location text,
    etag              text,                   -- the catalog's ETag of that version
    snapshot_id       bigint,                 -- current snapshot, NULL: none
    commits           bigint NOT NULL DEFAULT 0 CHECK (commits >= 0),
    bytes_added       bigint NOT NULL DEFAULT 0 CHECK (bytes_added >= 0),
    first_commit_at   timestamptz,
    last_commit_at    timestamptz,
    discovered_at     timestamptz NOT NULL DEFAULT now(),
    changed_at        timestamptz NOT NULL DEFAULT now(),
    dropped_at        timestamptz,            -- gone from the catalog
    UNIQUE (server, namespace, table_name)
);

COMMENT ON TABLE tms.tables IS
    'Iceberg tables known per catalog server: current metadata, cumulative commits and added bytes';

-- Target groups: tables of one catalog by glob patterns ("*", "?") over
-- the namespace and table name, plus explicit members.
CREATE TABLE tms.object_groups (
    id                serial PRIMARY KEY,
    name              text NOT NULL UNIQUE
                      CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' AND length(name) <= 63),
    server            name NOT NULL,
    namespace_pattern text,                   -- NULL: explicit members only
    table_pattern     text NOT NULL DEFAULT '*',
    owner             regrole NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tms.object_group_members (
    group_id          integer NOT NULL REFERENCES tms.object_groups ON DELETE CASCADE,
    namespace         text NOT NULL,
    table_name        text NOT NULL,
    PRIMARY KEY (group_id, namespace, table_name)
);

CREATE TABLE tms.maintenance_policies (
    id                serial PRIMARY KEY,
    name              text NOT NULL UNIQUE
                      CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' AND length(name) <= 63),
    group_id          integer NOT NULL REFERENCES tms.object_groups,
    owner             regrole NOT NULL,       -- the run-as role
    description       text,
    active            boolean NOT NULL DEFAULT true,
    time_window       jsonb,                  -- NULL: always open
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tms.maintenance_rules (
    id                bigserial PRIMARY KEY,
    policy_id         integer NOT NULL REFERENCES tms.maintenance_policies ON DELETE CASCADE,
    operation         text NOT NULL,
    engine            text NOT NULL,
    options           jsonb NOT NULL DEFAULT '{}',
    commits_threshold bigint CHECK (commits_threshold > 0),
    bytes_threshold   bigint CHECK (bytes_threshold > 0),
    time_threshold_ms bigint CHECK (time_threshold_ms > 0),
    condition         text NOT NULL,
    needs             text NOT NULL,          -- metric level of the condition
    baseline_mode     text NOT NULL CHECK (baseline_mode IN ('catch-up', 'going-forward')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (num_nonnulls(commits_threshold, bytes_threshold, time_threshold_ms) > 0)
);

CREATE INDEX maintenance_rules_policy_idx ON tms.maintenance_rules (policy_id);

-- One row per maintenance run (the seed's table_maintenance_job):
-- finished_at NULL means in flight (pending or running).
CREATE TABLE tms.table_maintenance_job (
    id                bigserial PRIMARY KEY,
    table_id          bigint NOT NULL REFERENCES tms.tables,
    rule_id           bigint,                 -- no FK: jobs outlive rules
    policy_id         integer,
    operation         text NOT NULL,
    engine            text NOT NULL,
    options           jsonb NOT NULL DEFAULT '{}',
    state             text NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    task_kind         text,
    task_instance     text,
    engine_job_id     text,
    before_snapshot_id bigint,
    after_snapshot_id bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    message           text,
    CHECK ((finished_at IS NULL) = (state IN ('pending', 'running')))
);

CREATE INDEX table_maintenance_job_inflight_idx ON tms.table_maintenance_job (state)
    WHERE finished_at IS NULL;
CREATE INDEX table_maintenance_job_table_idx ON tms.table_maintenance_job (table_id, rule_id);

-- Per (rule, table) baseline: the table's counters when the rule started
-- watching it or its operation last finished, and when the thresholds are
-- reached (due_*).  "triggered" is set when a commit observed by tms
-- reaches a threshold; due_at is the time-elapsed deadline.  The candidate
-- search reads only this table's indexes.
CREATE TABLE tms.rule_baselines (
    rule_id           bigint NOT NULL REFERENCES tms.maintenance_rules ON DELETE CASCADE,
    table_id          bigint NOT NULL REFERENCES tms.tables ON DELETE CASCADE,
    base_commits      bigint NOT NULL,
    base_bytes        bigint NOT NULL,
    since             timestamptz NOT NULL,
    due_commits       bigint,
    due_bytes         bigint,
    due_at            timestamptz,
    triggered         boolean NOT NULL DEFAULT false,
    pending_job       bigint,                 -- in-flight job: no evaluation
    last_evaluated_at timestamptz,
    PRIMARY KEY (rule_id, table_id)
);

CREATE INDEX rule_baselines_triggered_idx ON tms.rule_baselines (rule_id)
    WHERE triggered AND pending_job IS NULL;
CREATE INDEX rule_baselines_due_idx ON tms.rule_baselines (rule_id, due_at)
    WHERE pending_job IS NULL AND due_at IS NOT NULL;   -- rules with time-elapsed only
CREATE INDEX rule_baselines_table_idx ON tms.rule_baselines (table_id);

-- Every condition evaluation.  Self-contained: names and configuration are
-- copied, so the row still explains itself after the rule or table is gone.
CREATE TABLE tms.evaluation_log (
    id                bigserial PRIMARY KEY,
    evaluated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    policy_id         integer,
    policy_name       text,
    rule_id           bigint,
    operation         text,
    table_id          bigint,
    server            name,
    namespace         text,
    table_name        text,
    thresholds        jsonb NOT NULL,         -- {"commits-added": 100, ...}
    condition         text NOT NULL,
    counters          jsonb NOT NULL,         -- values at evaluation time
    metrics           jsonb,                  -- the metric values read
    result            boolean,                -- NULL: evaluation failed
    outcome           text NOT NULL,          -- ok, division_by_zero, error, ...
    explanation       text,                   -- one line per comparison
    explain           jsonb,                  -- per-node values
    error             text,
    decision          text NOT NULL,          -- submitted, not-needed, already-pending, failed
    job_id            bigint
);

CREATE INDEX evaluation_log_time_idx ON tms.evaluation_log (evaluated_at);
CREATE INDEX evaluation_log_table_idx ON tms.evaluation_log (table_name, evaluated_at);

COMMENT ON TABLE tms.evaluation_log IS
    'every policy condition evaluation: trigger configuration, counters, metrics, result with explanation, resulting job';

-- The built-in task kind a submitted operation becomes; its cap follows
-- tms.max_active_operations.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('maintenance', NULL, 8, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'maintenance', s FROM generate_series(1, 8) s;

SELECT pg_catalog.pg_extension_config_dump('tms.tables', '');
SELECT pg_catalog.pg_extension_config_dump('tms.object_groups', '');
SELECT pg_catalog.pg_extension_config_dump('tms.object_group_members', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_policies', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_rules', '');
SELECT pg_catalog.pg_extension_config_dump('tms.rule_baselines', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_maintenance_job', '');
SELECT pg_catalog.pg_extension_config_dump('tms.evaluation_log', '');

-- ---------------------------------------------------------------------
-- Internal helpers
-- ---------------------------------------------------------------------

-- A glob ("*" any run, "?" one character) as a LIKE pattern.
CREATE FUNCTION tms._glob_like(pattern text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT replace(replace(replace(replace(replace(pattern, '\', '\\'),
                   '%', '\%'), '_', '\_'), '*', '%'), '?', '_')
$$;

-- Is table t in group g?
CREATE FUNCTION tms._in_group(g tms.object_groups, t tms.tables)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT g.server = t.server AND t.dropped_at IS NULL AND (
           (g.namespace_pattern IS NOT NULL
            AND t.namespace LIKE tms._glob_like(g.namespace_pattern)
            AND t.table_name LIKE tms._glob_like(g.table_pattern))
        OR EXISTS (SELECT 1 FROM tms.object_group_members m
                    WHERE m.group_id = g.id AND m.namespace = t.namespace
                      AND m.table_name = t.table_name))
$$;

-- Is a time window open at "at"?  NULL window: always.
CREATE FUNCTION tms.window_open(time_window jsonb, at timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT time_window IS NULL OR EXISTS (
        SELECT 1
          FROM jsonb_array_elements(time_window -> 'periods') p,
               LATERAL tms.cron_prev(p ->> 'cron', at, time_window ->> 'time-zone-id') f
         WHERE f IS NOT NULL
           AND at < f + make_interval(secs => (p ->> 'duration')::float8 / 1000.0))
$$;

COMMENT ON FUNCTION tms.window_open(jsonb, timestamptz) IS
    'true when "at" lies in a period of the window: previous firing <= at < previous firing + duration';

GRANT EXECUTE ON FUNCTION tms.window_open(jsonb, timestamptz) TO PUBLIC;

-- Baseline values for new (rule, table) pairs: of one rule (table_filter
-- NULL) or of one table (rule_filter NULL).  catch-up: zero counters, time
-- counted from the table's first known commit; going-forward: the table's
-- current counters, time from now.  Two statements, so that each uses its
-- index (a table joining is the common case: one row of tms.tables).
CREATE FUNCTION tms._attach(rule_filter bigint, table_filter bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    n bigint;
BEGIN
    IF table_filter IS NOT NULL THEN
        INSERT INTO tms.rule_baselines AS b
               (rule_id, table_id, base_commits, base_bytes, since,
                due_commits, due_bytes, due_at, triggered)
        SELECT r.id, t.id, x.c, x.b, x.s,
               x.c + r.commits_threshold, x.b + r.bytes_threshold,
               x.s + make_interval(secs => r.time_threshold_ms / 1000.0),
               (t.commits >= x.c + r.commits_threshold) IS TRUE
                 OR (t.bytes_added >= x.b + r.bytes_threshold) IS TRUE
          FROM tms.tables t
          JOIN tms.object_groups g ON g.server = t.server
          JOIN tms.maintenance_policies p ON p.group_id = g.id
          JOIN tms.maintenance_rules r ON r.policy_id = p.id
          CROSS JOIN LATERAL (
              SELECT CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.commits END AS c,
                     CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.bytes_added END AS b,
                     CASE WHEN r.baseline_mode = 'catch-up'
                          THEN least(coalesce(t.first_commit_at, now()), now())
                          ELSE now() END AS s) x
         WHERE t.id = table_filter AND tms._in_group(g, t)
           AND (rule_filter IS NULL OR r.id = rule_filter)
        ON CONFLICT DO NOTHING;
    ELSE
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
         WHERE r.id = rule_filter
        ON CONFLICT DO NOTHING;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Record what the supervisor observed of a table: upsert tms.tables with
-- the commits seen since the last observation, attach it to the groups it
-- belongs to (creating baselines), and mark the (table, rule) pairs whose
-- commit or byte threshold it now reaches.  Returns the table id.
CREATE FUNCTION tms.observe_table(server name, namespace text, table_name text,
                                  table_uuid text, metadata_location text,
                                  snapshot_id bigint,
                                  new_commits bigint DEFAULT 0,
                                  new_bytes bigint DEFAULT 0,
                                  first_commit_at timestamptz DEFAULT NULL,
                                  last_commit_at timestamptz DEFAULT NULL,
                                  etag text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    tid bigint;
    is_new boolean;
BEGIN
    INSERT INTO tms.tables AS t (server, namespace, table_name, table_uuid,
                                 metadata_location, snapshot_id, commits,
                                 bytes_added, first_commit_at, last_commit_at, etag)
    VALUES (observe_table.server, observe_table.namespace, observe_table.table_name,
            observe_table.table_uuid, observe_table.metadata_location,
            observe_table.snapshot_id, greatest(new_commits, 0), greatest(new_bytes, 0),
            observe_table.first_commit_at, observe_table.last_commit_at, observe_table.etag)
    ON CONFLICT ON CONSTRAINT tables_server_namespace_table_name_key DO UPDATE
       SET table_uuid = EXCLUDED.table_uuid,
           metadata_location = EXCLUDED.metadata_location,
           snapshot_id = EXCLUDED.snapshot_id,
           commits = t.commits + EXCLUDED.commits,
           bytes_added = t.bytes_added + EXCLUDED.bytes_added,
           first_commit_at = coalesce(t.first_commit_at, EXCLUDED.first_commit_at),
           last_commit_at = greatest(t.last_commit_at, EXCLUDED.last_commit_at),
           etag = EXCLUDED.etag,
           changed_at = now(),
           dropped_at = NULL
    RETURNING t.id, (xmax = 0) INTO tid, is_new;

    -- a new table (or one back from the dead) joins its groups now
    PERFORM tms._attach(NULL, tid);
    IF new_commits > 0 OR new_bytes > 0 THEN
        UPDATE tms.rule_baselines b
           SET triggered = true
          FROM tms.tables t
         WHERE b.table_id = tid AND t.id = tid AND NOT b.triggered
           AND (t.commits >= b.due_commits OR t.bytes_added >= b.due_bytes);
    END IF;
    RETURN tid;
END
$$;

COMMENT ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text) IS
    'record commits observed on a table (used by the supervisor; tests may simulate commits with it)';

REVOKE ALL ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text) FROM PUBLIC;

-- Mark a table dropped: it leaves every group.
CREATE FUNCTION tms._table_dropped(tid bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE tms.tables SET dropped_at = now() WHERE id = tid AND dropped_at IS NULL;
    DELETE FROM tms.rule_baselines WHERE table_id = tid AND pending_job IS NULL;
$$;

-- Reset a baseline to the table's current counters (the rule's operation
-- finished, or it was evaluated and found not needed for time-elapsed).
CREATE FUNCTION tms._reset_baseline(rid bigint, tid bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE tms.rule_baselines b
       SET base_commits = t.commits, base_bytes = t.bytes_added, since = now(),
           due_commits = t.commits + r.commits_threshold,
           due_bytes = t.bytes_added + r.bytes_threshold,
           due_at = now() + make_interval(secs => r.time_threshold_ms / 1000.0),
           triggered = false, pending_job = NULL
      FROM tms.tables t, tms.maintenance_rules r
     WHERE b.rule_id = rid AND b.table_id = tid AND t.id = tid AND r.id = rid;
$$;

-- ---------------------------------------------------------------------
-- Validation
-- ---------------------------------------------------------------------

-- The policy's object: raise unless it exists and the caller owns it.
CREATE FUNCTION tms._own_policy(policy_name text)
RETURNS tms.maintenance_policies
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies;
BEGIN
    SELECT * INTO p FROM tms.maintenance_policies WHERE name = policy_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'policy "%" does not exist', policy_name
              USING ERRCODE = 'undefined_object',
                    HINT = 'See SELECT name FROM tms.policies.';
    END IF;
    IF NOT pg_has_role(tms._caller(), p.owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of policy "%"', policy_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The policy is owned by role %s.', p.owner);
    END IF;
    RETURN p;
END
$$;

-- The server must be a tms_iceberg server the role may use.
CREATE FUNCTION tms._check_server(srv name, who regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wrapper name;
BEGIN
    SELECT w.fdwname INTO wrapper
      FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
     WHERE s.srvname = srv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'server "%" does not exist', srv
              USING ERRCODE = 'undefined_object',
                    HINT = 'Create it with CREATE SERVER ... FOREIGN DATA WRAPPER tms_iceberg.';
    END IF;
    IF wrapper <> 'tms_iceberg' THEN
        RAISE EXCEPTION 'server "%" is not a tms_iceberg server', srv
              USING ERRCODE = 'wrong_object_type',
                    DETAIL = format('It uses the foreign-data wrapper "%s".', wrapper);
    END IF;
    IF NOT has_server_privilege(who, srv, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied for foreign server %', srv
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('Role %s has no USAGE privilege on the server; a policy acts with its owner''s user mapping.', who),
                    HINT = format('GRANT USAGE ON FOREIGN SERVER %I TO %I;', srv, who::text);
    END IF;
END
$$;

-- Validate a time window document.
CREATE FUNCTION tms._check_window(w jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    p jsonb;
    zone text;
    i integer := 0;
BEGIN
    IF w IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(w) <> 'object' THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The window must be a JSON object, not %s.', jsonb_typeof(w)),
                    HINT = 'Example: {"time-zone-id": "Europe/Moscow", "periods": [{"cron": "0 2 * * 1-5", "duration": 14400000}]}';
    END IF;
    FOR k IN SELECT jsonb_object_keys(w) LOOP
        IF k NOT IN ('time-zone-id', 'periods') THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Unknown key "%s".', k),
                        HINT = 'A window has the keys "time-zone-id" and "periods".';
        END IF;
    END LOOP;
    IF jsonb_typeof(w -> 'time-zone-id') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The window has no "time-zone-id" string.';
    END IF;
    zone := w ->> 'time-zone-id';
    PERFORM tms.cron_next('* * * * *', now(), zone);   -- raises on an unknown zone
    IF jsonb_typeof(w -> 'periods') IS DISTINCT FROM 'array'
       OR jsonb_array_length(w -> 'periods') = 0 THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The window needs a non-empty "periods" array.';
    END IF;
    FOR p IN SELECT jsonb_array_elements(w -> 'periods') LOOP
        i := i + 1;
        IF jsonb_typeof(p) <> 'object' OR jsonb_typeof(p -> 'cron') IS DISTINCT FROM 'string'
           OR jsonb_typeof(p -> 'duration') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Period %s must be an object with a "cron" string and a "duration" number of milliseconds.', i);
        END IF;
        FOR k IN SELECT jsonb_object_keys(p) LOOP
            IF k NOT IN ('cron', 'duration') THEN
                RAISE EXCEPTION 'invalid time window'
                      USING ERRCODE = 'invalid_parameter_value',
                            DETAIL = format('Period %s has the unknown key "%s".', i, k);
            END IF;
        END LOOP;
        IF (p ->> 'duration')::numeric <= 0 OR (p ->> 'duration')::numeric <> trunc((p ->> 'duration')::numeric)
           OR (p ->> 'duration')::numeric > 31622400000 THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Period %s has duration %s; it must be a whole number of milliseconds between 1 and 31622400000 (366 days).', i, p ->> 'duration');
        END IF;
        IF tms.cron_next(p ->> 'cron', now(), zone) IS NULL THEN   -- raises when invalid
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The cron expression "%s" of period %s never fires.', p ->> 'cron', i);
        END IF;
    END LOOP;
END
$$;

-- Reject credential-shaped keys anywhere in an options document.
CREATE FUNCTION tms._check_options(options jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
    norm text;
BEGIN
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule options'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('Options must be a JSON object, not %s.', jsonb_typeof(options));
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(options) LOOP
        norm := regexp_replace(lower(k), '[._ ]', '-', 'g');
        IF norm ~ '(password|passwd|secret|token|credential|access-?key|private|session-?key|api-?key|keytab)' THEN
            RAISE EXCEPTION 'rule options must not contain credentials'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Option "%s" looks like a credential.', k),
                        HINT = 'Credentials belong in the user mapping of the policy owner for the catalog server (CREATE USER MAPPING ... OPTIONS (...)), never in policy content.';
        END IF;
        IF jsonb_typeof(v) = 'object' THEN
            PERFORM tms._check_options(v);
        END IF;
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------
-- The SQL API
-- ---------------------------------------------------------------------

CREATE FUNCTION tms.create_object_group(name text, server name,
                                        namespace_pattern text DEFAULT NULL,
                                        table_pattern text DEFAULT '*')
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gid integer;
    who regrole := tms._caller();
BEGIN
    IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
        RAISE EXCEPTION 'invalid object group name "%"', name
              USING ERRCODE = 'invalid_name',
                    HINT = 'Use up to 63 letters, digits, "_", "." and "-", starting with a letter or digit.';
    END IF;
    IF server IS NULL THEN
        RAISE EXCEPTION 'an object group needs a server' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, who);
    IF table_pattern IS NULL OR table_pattern = '' OR namespace_pattern = '' THEN
        RAISE EXCEPTION 'invalid object group pattern'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'Patterns must not be empty.',
                    HINT = 'Use "*" to match every namespace or table.';
    END IF;
    IF EXISTS (SELECT 1 FROM tms.object_groups g WHERE g.name = create_object_group.name) THEN
        RAISE EXCEPTION 'object group "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.object_groups (name, server, namespace_pattern, table_pattern, owner)
    VALUES (create_object_group.name, create_object_group.server,
            create_object_group.namespace_pattern, create_object_group.table_pattern, who)
    RETURNING id INTO gid;
    RETURN gid;
END
$$;

COMMENT ON FUNCTION tms.create_object_group(text, name, text, text) IS
    'create a target group: the tables of a catalog server whose namespace and name match glob patterns, plus explicit members';

CREATE FUNCTION tms._own_group(group_name text)
RETURNS tms.object_groups
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups;
BEGIN
    SELECT * INTO g FROM tms.object_groups WHERE name = group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object group "%" does not exist', group_name
              USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_has_role(tms._caller(), g.owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of object group "%"', group_name
              USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN g;
END
$$;

CREATE FUNCTION tms.add_group_member(group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(group_name);
    tid bigint;
BEGIN
    IF namespace IS NULL OR table_name IS NULL OR namespace = '' OR table_name = '' THEN
        RAISE EXCEPTION 'a group member needs a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    INSERT INTO tms.object_group_members VALUES (g.id, namespace, table_name)
    ON CONFLICT DO NOTHING;
    SELECT id INTO tid FROM tms.tables t
     WHERE t.server = g.server AND t.namespace = add_group_member.namespace
       AND t.table_name = add_group_member.table_name;
    IF FOUND THEN
        PERFORM tms._attach(NULL, tid);
    END IF;
END
$$;

CREATE FUNCTION tms.remove_group_member(group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(group_name);
BEGIN
    DELETE FROM tms.object_group_members m
     WHERE m.group_id = g.id AND m.namespace = remove_group_member.namespace
       AND m.table_name = remove_group_member.table_name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- pairs of tables no longer in the group go, unless an operation is in flight
    DELETE FROM tms.rule_baselines b
     USING tms.maintenance_rules r, tms.maintenance_policies p, tms.tables t
     WHERE b.rule_id = r.id AND r.policy_id = p.id AND p.group_id = g.id
       AND t.id = b.table_id AND b.pending_job IS NULL AND NOT tms._in_group(g, t);
    RETURN true;
END
$$;

CREATE FUNCTION tms.drop_object_group(name text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(name);
    users text;
BEGIN
    SELECT string_agg(p.name, ', ' ORDER BY p.name) INTO users
      FROM tms.maintenance_policies p WHERE p.group_id = g.id;
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop object group "%" because policies use it', name
              USING ERRCODE = 'dependent_objects_still_exist',
                    DETAIL = format('Used by: %s.', users),
                    HINT = 'Drop those policies first.';
    END IF;
    DELETE FROM tms.object_groups WHERE id = g.id;
END
$$;

CREATE FUNCTION tms.create_policy(name text, group_name text,
                                  description text DEFAULT NULL,
                                  time_window jsonb DEFAULT NULL,
                                  active boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who regrole := tms._caller();
    g tms.object_groups;
    pid integer;
BEGIN
    IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
        RAISE EXCEPTION 'invalid policy name "%"', name
              USING ERRCODE = 'invalid_name',
                    HINT = 'Use up to 63 letters, digits, "_", "." and "-", starting with a letter or digit.';
    END IF;
    SELECT * INTO g FROM tms.object_groups WHERE object_groups.name = group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object group "%" does not exist', group_name
              USING ERRCODE = 'undefined_object',
                    HINT = 'Create it with tms.create_object_group().';
    END IF;
    -- the policy runs as its owner: the owner must be able to use the catalog
    PERFORM tms._check_server(g.server, who);
    PERFORM tms._check_window(time_window);
    IF EXISTS (SELECT 1 FROM tms.maintenance_policies p WHERE p.name = create_policy.name) THEN
        RAISE EXCEPTION 'policy "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.maintenance_policies (name, group_id, owner, description, active, time_window)
    VALUES (create_policy.name, g.id, who, create_policy.description,
            coalesce(create_policy.active, true), time_window)
    RETURNING id INTO pid;
    RETURN pid;
END
$$;

COMMENT ON FUNCTION tms.create_policy(text, text, text, jsonb, boolean) IS
    'create a maintenance policy over an object group, owned by (and run as) the calling role';

CREATE FUNCTION tms.add_rule(policy_name text, operation text, engine text,
                             counters jsonb,
                             condition text DEFAULT 'true',
                             baseline_mode text DEFAULT 'catch-up',
                             options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(policy_name);
    k text;
    v jsonb;
    thr jsonb := '{}';
    needs text;
    rid bigint;
    ops CONSTANT text[] := ARRAY['compaction', 'manifest-rewrite', 'snapshot-expiry', 'orphan-cleanup'];
    engines CONSTANT text[] := ARRAY['local', 'spark', 'trino'];
BEGIN
    IF operation IS NULL OR NOT operation = ANY (ops) THEN
        RAISE EXCEPTION 'unknown maintenance operation "%"', operation
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Operations are compaction, manifest-rewrite, snapshot-expiry and orphan-cleanup.';
    END IF;
    IF engine IS NULL OR NOT engine = ANY (engines) THEN
        RAISE EXCEPTION 'unknown maintenance engine "%"', engine
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Engines are local, spark and trino.';
    END IF;
    IF engine = 'local' AND operation IN ('compaction', 'manifest-rewrite') THEN
        RAISE EXCEPTION 'engine "local" cannot run operation "%"', operation
              USING ERRCODE = 'feature_not_supported',
                    DETAIL = 'The local engine runs only light operations: snapshot-expiry and orphan-cleanup.',
                    HINT = 'Use engine "spark".';
    END IF;

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

COMMENT ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb) IS
    'add a rule to a policy: operation, engine, counter thresholds, DSL condition, baseline mode, options';

CREATE FUNCTION tms.drop_rule(rule_id bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pname text;
BEGIN
    SELECT p.name INTO pname FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id WHERE r.id = rule_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rule % does not exist', rule_id USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM tms._own_policy(pname);
    DELETE FROM tms.maintenance_rules WHERE id = rule_id;
END
$$;

CREATE FUNCTION tms.set_policy_active(name text, active boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(name);
BEGIN
    IF active IS NULL THEN
        RAISE EXCEPTION 'active must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE tms.maintenance_policies SET active = set_policy_active.active WHERE id = p.id;
END
$$;

CREATE FUNCTION tms.set_policy_window(name text, time_window jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(name);
BEGIN
    PERFORM tms._check_window(time_window);
    UPDATE tms.maintenance_policies SET time_window = set_policy_window.time_window WHERE id = p.id;
END
$$;

CREATE FUNCTION tms.drop_policy(name text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(name);
BEGIN
    DELETE FROM tms.maintenance_policies WHERE id = p.id;
END
$$;

-- ---------------------------------------------------------------------
-- Submission and the life of a maintenance job
-- ---------------------------------------------------------------------

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

-- What a task of kind 'maintenance' does (called by its C handler): start
-- the job under the cap, or retry in a few seconds; once started, hand it
-- to the procedure named by tms.maintenance_handler if one is set (the
-- engines of a later version take this place; until then a started job
-- stays running, visible in tms.maintenance_jobs, until finished).
CREATE FUNCTION tms._run_maintenance_task(instance text, data jsonb)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    jid bigint := (data ->> 'job_id')::bigint;
    st text;
    handler text := nullif(current_setting('tms.maintenance_handler', true), '');
    j jsonb;
BEGIN
    st := tms._start_job(jid);
    IF st = 'deferred' THEN
        PERFORM tms.schedule_task('maintenance', instance, data, now() + interval '2 seconds');
    ELSIF st = 'started' AND handler IS NOT NULL THEN
        SELECT to_jsonb(mj) || jsonb_build_object('namespace', t.namespace,
                                                  'table_name', t.table_name,
                                                  'server', t.server)
          INTO j
          FROM tms.table_maintenance_job mj JOIN tms.tables t ON t.id = mj.table_id
         WHERE mj.id = jid;
        EXECUTE format('CALL %s($1, $2)', handler::regproc) USING jid, j;
    END IF;
    RETURN st;
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
    'run one evaluation cycle for one policy now (as its owner) and return what it decided';

REVOKE ALL ON FUNCTION tms.evaluate_now(text, boolean) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Views
-- ---------------------------------------------------------------------

CREATE VIEW tms.policies AS
    SELECT p.name, g.name AS group_name, g.server, p.owner, p.description,
           p.active, p.time_window,
           tms.window_open(p.time_window, now()) AS window_open,
           (SELECT count(*) FROM tms.maintenance_rules r WHERE r.policy_id = p.id) AS rules,
           p.created_at, p.id
      FROM tms.maintenance_policies p
      JOIN tms.object_groups g ON g.id = p.group_id;

COMMENT ON VIEW tms.policies IS 'maintenance policies with their group, owner, window state and rule count';

CREATE VIEW tms.rules AS
    SELECT r.id, p.name AS policy, r.operation, r.engine, r.options,
           r.commits_threshold AS commits_added,
           r.bytes_threshold AS bytes_added,
           r.time_threshold_ms AS time_elapsed_ms,
           r.condition, r.needs, r.baseline_mode, r.created_at,
           (SELECT count(*) FROM tms.rule_baselines b
             WHERE b.rule_id = r.id AND b.pending_job IS NOT NULL) AS in_flight
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id;

COMMENT ON VIEW tms.rules IS 'rules of every policy: operation, engine, thresholds, condition, baseline mode';

-- What the next cycle would evaluate, and why.
CREATE VIEW tms.candidates AS
    SELECT p.name AS policy, r.id AS rule_id, r.operation,
           t.server, t.namespace, t.table_name,
           t.commits - b.base_commits AS commits_added,
           t.bytes_added - b.base_bytes AS bytes_added,
           (extract(epoch FROM now() - b.since) * 1000)::bigint AS time_elapsed_ms,
           concat_ws(', ',
               CASE WHEN t.commits >= b.due_commits
                    THEN format('commits-added %s >= %s', t.commits - b.base_commits, r.commits_threshold) END,
               CASE WHEN t.bytes_added >= b.due_bytes
                    THEN format('bytes-added %s >= %s', t.bytes_added - b.base_bytes, r.bytes_threshold) END,
               CASE WHEN b.due_at <= now()
                    THEN format('time-elapsed %s ms >= %s', (extract(epoch FROM now() - b.since) * 1000)::bigint, r.time_threshold_ms) END,
               CASE WHEN b.triggered AND NOT (t.commits >= b.due_commits OR t.bytes_added >= b.due_bytes) IS TRUE
                    THEN 'triggered' END) AS reason,
           p.active AND tms.window_open(p.time_window, now()) AS runnable
      FROM tms.rule_baselines b
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE b.pending_job IS NULL AND (b.triggered OR b.due_at <= now())
       AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.candidates IS
    '(table, rule) pairs whose counters reached a threshold: what the next cycle evaluates (runnable: policy active and window open)';

CREATE VIEW tms.maintenance_jobs AS
    SELECT j.id, p.name AS policy, j.rule_id, j.operation, j.engine, t.server,
           t.namespace, t.table_name, j.state, j.created_at, j.started_at,
           j.finished_at, j.before_snapshot_id, j.after_snapshot_id, j.message
      FROM tms.table_maintenance_job j
      JOIN tms.tables t ON t.id = j.table_id
      LEFT JOIN tms.maintenance_policies p ON p.id = j.policy_id;

COMMENT ON VIEW tms.maintenance_jobs IS 'maintenance runs submitted by policies; finished_at null: in flight';

-- policy content holds no credentials: everyone may read policies and rules
GRANT SELECT ON tms.policies, tms.rules TO PUBLIC;
GRANT SELECT ON tms.candidates, tms.evaluation_log, tms.maintenance_jobs,
                tms.tables TO pg_monitor;

REVOKE ALL ON FUNCTION tms._caller(), tms._compile_condition(text),
                       tms._attach(bigint, bigint), tms._table_dropped(bigint),
                       tms._reset_baseline(bigint, bigint),
                       tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text),
                       tms._start_job(bigint), tms._run_maintenance_task(text, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.create_object_group(text, name, text, text),
                          tms.add_group_member(text, text, text),
                          tms.remove_group_member(text, text, text),
                          tms.drop_object_group(text),
                          tms.create_policy(text, text, text, jsonb, boolean),
                          tms.add_rule(text, text, text, jsonb, text, text, jsonb),
                          tms.drop_rule(bigint),
                          tms.set_policy_active(text, boolean),
                          tms.set_policy_window(text, jsonb),
                          tms.drop_policy(text) TO PUBLIC;
