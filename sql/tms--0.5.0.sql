-- Generated from sql/install/*.sql by the Makefile; edit those files.

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

-- A procedure's signature as tms.task_kinds records it: schema-qualified
-- wherever it is read (regprocedure's text with only pg_catalog on the
-- search path), so that to_regprocedure() finds the same procedure in any
-- session.
CREATE FUNCTION tms._procedure_signature(proc regprocedure)
RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog
AS $$ SELECT proc::text $$;

REVOKE ALL ON FUNCTION tms._procedure_signature(regprocedure) FROM PUBLIC;

-- What kinds of task exist and how many of each may run at once.  A SQL
-- handler is recorded by its signature, not as a regprocedure: procedure
-- OIDs change in a dump and restore and in pg_upgrade, which refuses a
-- cluster that has a regprocedure column in a table.  Each claim looks the
-- procedure up by its signature.
CREATE TABLE tms.task_kinds (
    kind            text PRIMARY KEY
                    CHECK (kind ~ '^[a-z][a-z0-9_-]*$' AND length(kind) <= 63),
    handler         text,           -- NULL: a built-in kind run by C code
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

-- The built-in kinds of three pools; their caps follow the
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
-- tms.purge_table() records a job here in the caller's transaction; the
-- job's task (kind "purge", instance = job id) is run by the pool workers
-- or CALL tms.run_pending(): its first step drops the table from its
-- catalog, then every reachable file is deleted in bulk batches
-- (src/ops/purge.c, purge_walk.c).

CREATE TABLE tms.iceberg_cleanup_job (
    id                bigserial PRIMARY KEY,
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
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    -- progress and outcome (counts of the latest attempt)
    phase             text NOT NULL DEFAULT 'drop',  -- drop, content, metadata-log, metadata
    files_deleted     bigint NOT NULL DEFAULT 0,    -- includes not-found
    bytes_freed       bigint NOT NULL DEFAULT 0,    -- declared sizes where known
    files_skipped     bigint NOT NULL DEFAULT 0,    -- outside location/allowed roots
    skipped_example   text,
    files_kept        bigint NOT NULL DEFAULT 0,    -- gc.enabled=false data files
    files_unreadable  bigint NOT NULL DEFAULT 0,    -- manifests/lists already gone
    delete_requests   bigint NOT NULL DEFAULT 0,
    requested_by      regrole NOT NULL,     -- the acting role: its user mapping is used
    dropped_at        timestamptz,          -- when the catalog entry was dropped (or held)
    -- with the server option purge_hold_namespace: where the catalog entry
    -- is held (renamed) until the files are gone, so that vended storage
    -- credentials can be loaded again; NULL: dropped
    held_namespace    text,
    held_name         text,
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
SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_credentials', '');

-- The built-in task kind; its cap follows tms.purge_concurrency.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('purge', NULL, 2, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'purge', s FROM generate_series(1, 2) s;

-- purge_table: record the purge (a worker drops the table right after the
-- commit) and delete every file in the background.  Returns the job id.
CREATE FUNCTION tms.purge_table(server name, namespace text, table_name text)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_purge_table';

COMMENT ON FUNCTION tms.purge_table(name, text, text) IS
    'drop an Iceberg table from its catalog and delete its files asynchronously (the drop follows the commit); returns the job id';

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

-- Who may see and re-drive a job: its requester, the owner of its server,
-- and members of pg_monitor (seeing) / superusers.
CREATE FUNCTION tms._may_see_job(acting regrole, j tms.iceberg_cleanup_job)
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
CREATE FUNCTION tms._purge_status(acting regrole, server name, namespace text, table_name text)
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

CREATE FUNCTION tms.purge_status(server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.purge_status(name, text, text) IS
    'latest purge job of a table identifier (one the caller requested, owns the server of, or monitors); blocks_recreate while it is PENDING or RUNNING';

-- retry_purge: re-drive a FAILED job from scratch (its requester, the
-- server's owner, or a superuser).
CREATE FUNCTION tms._retry_purge(acting regrole, job_id bigint)
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

CREATE FUNCTION tms.retry_purge(job_id bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.retry_purge(bigint) IS 're-drive a FAILED purge job';

-- prune_purge_jobs: delete SUCCEEDED and FAILED rows older than
-- tms.purge_retention (also done by the workers after each job).
CREATE FUNCTION tms._prune_purge_jobs(acting regrole)
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

CREATE FUNCTION tms.prune_purge_jobs()
RETURNS bigint
LANGUAGE c VOLATILE
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
-- purge job of that tms server is PENDING or RUNNING.  The one SECURITY
-- DEFINER function of tms: it runs on another owner's table and must read
-- the job table, which it only reads.
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

-- sql/install/51_delete_pool.sql
-- The delete pool of each database (src/ops/delete_pool.c, doc/purge.md
-- "Deleting"): the bulk delete requests of purges and maintenance
-- operations in flight at once, bounded by tms.delete_concurrency and
-- shared fairly, and the request window of every storage target, which
-- shrinks when the storage asks to slow down (SlowDown, 503) and grows
-- back with each success.  Both views read shared memory.

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

-- A view's caller needs EXECUTE on the functions it calls.
REVOKE ALL ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() TO pg_monitor;
GRANT SELECT ON tms.delete_pool, tms.delete_targets TO pg_monitor;

-- sql/install/60_policy_tables.sql
-- Maintenance policies, part 1: the tables.  Object groups, policies and
-- rules, the tables tms knows in each catalog with their activity
-- counters, per (table, rule) baselines, maintenance jobs and the
-- evaluation log.  See doc/policies.md; the evaluation of a policy is C
-- (src/ops/policy_*.c), run as a task of kind policy-expand by the pool
-- workers, and by tms.evaluate_now().

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
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- roles the owner lets build policies on the group (tms.grant_object_group)
    grantees          regrole[] NOT NULL DEFAULT '{}',
    -- when a policy last refreshed the group's tables
    refreshed_at      timestamptz
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
    -- when the rule is evaluated (tms._check_schedule): NULL, at every
    -- evaluation cycle of its policy; {"crontab": "m h dom mon dow",
    -- "time-zone": "Europe/Berlin"}, at each firing; {"on-commit": true},
    -- after each commit to a table (both may be given)
    schedule          jsonb,
    min_interval_ms   bigint CHECK (min_interval_ms >= 0),  -- NULL: the operation's setting
    -- the crontab firing expanded last (policy-expand), and while its
    -- expansion is under way the last table id enqueued (NULL: complete)
    cron_fired_at     timestamptz,
    cron_cursor       bigint,
    CONSTRAINT maintenance_rules_check
        CHECK (schedule IS NOT NULL
               OR num_nonnulls(commits_threshold, bytes_threshold, time_threshold_ms) > 0)
);

CREATE INDEX maintenance_rules_policy_idx ON tms.maintenance_rules (policy_id);

-- One row per maintenance run (Gravitino's table_maintenance_job), from a
-- policy (rule_id set) or from tms.run_operation (requested_by set).
-- finished_at NULL means in flight (pending or running).  A run of the
-- local engine moves through phases: "start" (nothing done yet),
-- "commit" (a commit is in flight: commit_state says what it wrote and
-- expects, resolved before anything else on resume), "cleanup" (the
-- commit landed: delete what it unreferenced).  A run on an engine
-- server: "submit" (the statement is recorded and may have been sent:
-- the engine is asked for the job's tag before anything is sent again),
-- "engine" (the engine accepted it; engine_job_id is its id of the run).
-- No credential is ever stored here.
CREATE TABLE tms.table_maintenance_job (
    id                bigserial PRIMARY KEY,
    table_id          bigint NOT NULL REFERENCES tms.tables,
    rule_id           bigint,                 -- no FK: jobs outlive rules
    policy_id         integer,
    requested_by      oid,                    -- run_operation's acting role
    operation         text NOT NULL,
    engine            text NOT NULL,
    options           jsonb NOT NULL DEFAULT '{}',
    state             text NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'running', 'succeeded', 'failed',
                                       'skipped', 'cancelled')),
    reason            text,                   -- why skipped, cancelled or waiting
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text,
    phase             text NOT NULL DEFAULT 'start'
                      CHECK (phase IN ('start', 'commit', 'cleanup', 'submit', 'engine', 'done')),
    commit_state      jsonb,
    base_metadata_location text,              -- the metadata the run planned on
    cancel_requested  boolean NOT NULL DEFAULT false,
    task_kind         text,
    task_instance     text,
    engine_job_id     text,
    statement         text,                   -- what was submitted to an engine
    before_snapshot_id bigint,
    after_snapshot_id bigint,
    snapshots_expired bigint NOT NULL DEFAULT 0,
    manifests_rewritten bigint NOT NULL DEFAULT 0,
    manifests_added   bigint NOT NULL DEFAULT 0,
    files_deleted     bigint NOT NULL DEFAULT 0,
    bytes_deleted     bigint NOT NULL DEFAULT 0,
    orphans_found     bigint NOT NULL DEFAULT 0,
    data_files_rewritten bigint NOT NULL DEFAULT 0, -- an engine's counts
    data_files_added  bigint NOT NULL DEFAULT 0,
    bytes_rewritten   bigint NOT NULL DEFAULT 0,
    delete_files_rewritten bigint NOT NULL DEFAULT 0,
    delete_files_added bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    message           text,
    CHECK ((finished_at IS NULL) = (state IN ('pending', 'running')))
);

CREATE INDEX table_maintenance_job_inflight_idx ON tms.table_maintenance_job (state)
    WHERE finished_at IS NULL;
CREATE INDEX table_maintenance_job_table_idx ON tms.table_maintenance_job (table_id, rule_id);

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
    cooldown_until    timestamptz,            -- no job before (the rule's min_interval)
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
SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics', '');
-- and their sequences, so that a restored database goes on numbering
SELECT pg_catalog.pg_extension_config_dump('tms.tables_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.object_groups_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_policies_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_rules_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_maintenance_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.evaluation_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics_id_seq', '');


-- sql/install/61_policy_internals.sql
-- Maintenance policies, part 2: internals.  Helpers in C, group
-- membership and windows, baselines and observations, and the checks the
-- API makes.  None of these is for PUBLIC.

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

-- Does s match the glob pattern ("*" any run of characters, "?" one
-- character)?  The one implementation is C's (src/bridge/names.c), which
-- the policy evaluation uses too.
CREATE FUNCTION tms._glob_match(pattern text, s text)
RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_glob_match_sql';

-- The path of the first credential in a JSON document, or NULL
-- (src/bridge/secrets.c).
CREATE FUNCTION tms._find_credential(doc jsonb)
RETURNS text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_find_credential_sql';

-- The cooldown of an operation when its rule gives no min_interval: the
-- setting tms.<operation>_min_interval, in milliseconds
-- (src/ops/policy.c).
CREATE FUNCTION tms._default_min_interval(operation text)
RETURNS bigint
LANGUAGE c STABLE STRICT
AS 'MODULE_PATHNAME', 'tms_default_min_interval';

-- Compile a condition; returns the metric level it needs, or raises the
-- compile error (SQLSTATE, caret excerpt in DETAIL).
CREATE FUNCTION tms._compile_condition(condition text)
RETURNS text
LANGUAGE c IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'tms_policy_compile_condition';

-- Is table t in group g?
CREATE FUNCTION tms._in_group(g tms.object_groups, t tms.tables)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT g.server = t.server AND t.dropped_at IS NULL AND (
           (g.namespace_pattern IS NOT NULL
            AND tms._glob_match(g.namespace_pattern, t.namespace)
            AND tms._glob_match(g.table_pattern, t.table_name))
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
-- NULL) or of one table (rule_filter NULL).  A rule being added and a
-- table being discovered at the same time must not miss each other (each
-- transaction would see the other's row only after it committed, and the
-- pair would never get a baseline): the rule side takes an exclusive lock,
-- the table side a shared one, and the INSERT below, a new statement with
-- a new snapshot, then sees whatever the other side committed first.  catch-up: zero counters, time
-- counted from the table's first known commit; going-forward: the table's
-- current counters, time from now.  Planned for the filters it is given
-- (custom plans), so each call uses the index its filter needs: a table
-- joining is the common case, one row of tms.tables.
CREATE FUNCTION tms._attach(rule_filter bigint, table_filter bigint)
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

-- Record what a policy's refresh or a commit-job observed of a table:
-- upsert tms.tables with the commits seen since the last observation,
-- attach it to the groups it belongs to (creating baselines), and mark the
-- (table, rule) pairs whose commit or byte threshold it now reaches.
-- base_commits and base_bytes, when given, are the counters the caller
-- read before it counted new_commits and new_bytes: the counters become
-- base + new unless another observer already counted further, so two
-- observers of one commit (a refresh and a commit-job) count it once.
-- Returns the table id.
CREATE FUNCTION tms.observe_table(server name, namespace text, table_name text,
                                  table_uuid text, metadata_location text,
                                  snapshot_id bigint,
                                  new_commits bigint DEFAULT 0,
                                  new_bytes bigint DEFAULT 0,
                                  first_commit_at timestamptz DEFAULT NULL,
                                  last_commit_at timestamptz DEFAULT NULL,
                                  etag text DEFAULT NULL,
                                  base_commits bigint DEFAULT NULL,
                                  base_bytes bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    tid bigint;
    is_new boolean;
BEGIN
    -- commit times come from snapshots (1970 to 9999); nothing infinite
    IF NOT isfinite(coalesce(first_commit_at, now()))
       OR NOT isfinite(coalesce(last_commit_at, now())) THEN
        RAISE EXCEPTION 'commit times must be finite'
              USING ERRCODE = 'datetime_field_overflow',
                    DETAIL = format('first_commit_at is %s, last_commit_at is %s.',
                                    first_commit_at, last_commit_at);
    END IF;
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
           commits = CASE WHEN base_commits IS NULL THEN t.commits + EXCLUDED.commits
                          ELSE greatest(t.commits, base_commits + EXCLUDED.commits) END,
           bytes_added = CASE WHEN base_bytes IS NULL THEN t.bytes_added + EXCLUDED.bytes_added
                              ELSE greatest(t.bytes_added, base_bytes + EXCLUDED.bytes_added) END,
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

COMMENT ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) IS
    'record commits observed on a table (used by the policy evaluation; tests may simulate commits with it)';

REVOKE ALL ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) FROM PUBLIC;

-- Mark a table dropped: it leaves every group.
CREATE FUNCTION tms._table_dropped(tid bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE tms.tables SET dropped_at = now() WHERE id = tid AND dropped_at IS NULL;
    DELETE FROM tms.rule_baselines WHERE table_id = tid AND pending_job IS NULL;
$$;

-- Reset a baseline to the table's current counters when the rule's job
-- on the table ended, and start the rule's cooldown there (its
-- min_interval, or the operation's setting).
CREATE FUNCTION tms._reset_baseline(rid bigint, tid bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE tms.rule_baselines b
       SET base_commits = t.commits, base_bytes = t.bytes_added, since = now(),
           due_commits = t.commits + r.commits_threshold,
           due_bytes = t.bytes_added + r.bytes_threshold,
           due_at = now() + make_interval(secs => r.time_threshold_ms / 1000.0),
           triggered = false, pending_job = NULL,
           cooldown_until = now() + make_interval(secs =>
               coalesce(r.min_interval_ms, tms._default_min_interval(r.operation)) / 1000.0)
      FROM tms.tables t, tms.maintenance_rules r
     WHERE b.rule_id = rid AND b.table_id = tid AND t.id = tid AND r.id = rid;
$$;

-- The policy's row: raise unless it exists and the acting role owns it
-- (has the privileges of its owner role).
CREATE FUNCTION tms._own_policy(acting regrole, policy_name text)
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
    IF NOT pg_has_role(acting, p.owner, 'USAGE') THEN
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

-- Validate a rule's schedule document (NULL: the policy's evaluation
-- cycle) for its operation; returns the time zone of its crontab (NULL:
-- none).
CREATE FUNCTION tms._check_schedule(operation text, schedule jsonb)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    zone text;
BEGIN
    IF schedule IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(schedule) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The schedule must be a JSON object, not %s.', jsonb_typeof(schedule)),
                    HINT = 'Examples: {"crontab": "0 2 * * *", "time-zone": "Europe/Berlin"}, {"on-commit": true}.';
    END IF;
    FOR k IN SELECT jsonb_object_keys(schedule) LOOP
        IF k NOT IN ('crontab', 'time-zone', 'on-commit') THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Unknown key "%s".', k),
                        HINT = 'A schedule has the keys "crontab", "time-zone" and "on-commit".';
        END IF;
    END LOOP;
    IF schedule ? 'on-commit' AND jsonb_typeof(schedule -> 'on-commit') <> 'boolean' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('"on-commit" is %s; it must be true or false.', schedule -> 'on-commit');
    END IF;
    IF schedule ? 'crontab' AND jsonb_typeof(schedule -> 'crontab') <> 'string' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('"crontab" is %s; it must be a string of five cron fields.', schedule -> 'crontab');
    END IF;
    IF schedule ? 'time-zone' THEN
        IF NOT schedule ? 'crontab' THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = 'A "time-zone" is given without a "crontab".';
        END IF;
        IF jsonb_typeof(schedule -> 'time-zone') <> 'string' THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('"time-zone" is %s; it must be a string such as "Europe/Berlin".', schedule -> 'time-zone');
        END IF;
    END IF;
    IF NOT schedule ? 'crontab' AND schedule -> 'on-commit' IS DISTINCT FROM 'true' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The schedule has neither a "crontab" nor "on-commit": true.',
                    HINT = 'Leave the schedule out (NULL) to evaluate the rule at every evaluation cycle.';
    END IF;
    IF operation = 'orphan-cleanup' AND schedule -> 'on-commit' = 'true' THEN
        RAISE EXCEPTION 'orphan-cleanup cannot run on commit'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'orphan-cleanup scans storage; it runs on a crontab or the evaluation cycle only.',
                    HINT = 'Give it a "crontab" schedule instead.';
    END IF;
    IF schedule ? 'crontab' THEN
        zone := coalesce(schedule ->> 'time-zone', 'UTC');
        -- raises on a bad expression (caret in DETAIL) or an unknown zone
        IF tms.cron_next(schedule ->> 'crontab', now(), zone) IS NULL THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The crontab "%s" never fires.', schedule ->> 'crontab');
        END IF;
    END IF;
    RETURN zone;
END
$$;

-- Reject credentials anywhere in an options document: a credential-shaped
-- key, or a string value holding one ("...secret.key=..."), at any depth.
-- The one list of credential-shaped names is C's (src/io/secrets.c).
CREATE FUNCTION tms._check_options(options jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found text;
BEGIN
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule options'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('Options must be a JSON object, not %s.', jsonb_typeof(options));
    END IF;
    found := tms._find_credential(options);
    IF found IS NOT NULL THEN
        RAISE EXCEPTION 'rule options must not contain credentials'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The %s looks like a credential.', found),
                    HINT = 'Credentials belong in the user mapping of the policy owner for the catalog server (CREATE USER MAPPING ... OPTIONS (...)), never in policy content.';
    END IF;
END
$$;

-- The group's row: raise unless it exists and the acting role owns it.
CREATE FUNCTION tms._own_group(acting regrole, group_name text)
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
    IF NOT pg_has_role(acting, g.owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of object group "%"', group_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The group is owned by role %s.', g.owner);
    END IF;
    RETURN g;
END
$$;

-- May the acting role build a policy on the group?  Its owner may, and the
-- roles the owner granted it to (tms.grant_object_group).
CREATE FUNCTION tms._may_use_group(acting regrole, g tms.object_groups)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(acting, g.owner, 'USAGE')
        OR EXISTS (SELECT 1 FROM unnest(g.grantees) r WHERE pg_has_role(acting, r, 'USAGE'))
$$;

-- sql/install/62_policy_api.sql
-- Maintenance policies, part 3: the SQL API.  Each public function is a
-- C entry point (tms_api_call) that takes the acting role, switches to the
-- extension owner and calls the internal function of the same name with a
-- leading underscore, which checks that role's privileges and does the
-- work; no function here is SECURITY DEFINER.

CREATE FUNCTION tms._create_object_group(acting regrole, name text, server name, namespace_pattern text, table_pattern text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gid integer;
    who regrole := acting;
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
    IF EXISTS (SELECT 1 FROM tms.object_groups g WHERE g.name = _create_object_group.name) THEN
        RAISE EXCEPTION 'object group "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.object_groups (name, server, namespace_pattern, table_pattern, owner)
    VALUES (_create_object_group.name, _create_object_group.server,
            _create_object_group.namespace_pattern, _create_object_group.table_pattern, who)
    RETURNING id INTO gid;
    RETURN gid;
END
$$;

CREATE FUNCTION tms._add_group_member(acting regrole, group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
    tid bigint;
BEGIN
    IF namespace IS NULL OR table_name IS NULL OR namespace = '' OR table_name = '' THEN
        RAISE EXCEPTION 'a group member needs a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    INSERT INTO tms.object_group_members VALUES (g.id, namespace, table_name)
    ON CONFLICT DO NOTHING;
    SELECT id INTO tid FROM tms.tables t
     WHERE t.server = g.server AND t.namespace = _add_group_member.namespace
       AND t.table_name = _add_group_member.table_name;
    IF FOUND THEN
        PERFORM tms._attach(NULL, tid);
    END IF;
END
$$;

CREATE FUNCTION tms._remove_group_member(acting regrole, group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
BEGIN
    DELETE FROM tms.object_group_members m
     WHERE m.group_id = g.id AND m.namespace = _remove_group_member.namespace
       AND m.table_name = _remove_group_member.table_name;
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

CREATE FUNCTION tms._drop_object_group(acting regrole, name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, name);
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

CREATE FUNCTION tms._create_policy(acting regrole, name text, group_name text, description text, time_window jsonb, active boolean)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who regrole := acting;
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
    -- a group is used with its owner's consent: ownership or a grant
    IF NOT tms._may_use_group(who, g) THEN
        RAISE EXCEPTION 'permission denied for object group "%"', group_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The group is owned by role %s, which has not granted it to role %s.', g.owner, who),
                    HINT = format('The owner may run SELECT tms.grant_object_group(%L, %L);', g.name, who::text);
    END IF;
    -- the policy runs as its owner: the owner must be able to use the catalog
    PERFORM tms._check_server(g.server, who);
    PERFORM tms._check_window(time_window);
    IF EXISTS (SELECT 1 FROM tms.maintenance_policies p WHERE p.name = _create_policy.name) THEN
        RAISE EXCEPTION 'policy "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.maintenance_policies (name, group_id, owner, description, active, time_window)
    VALUES (_create_policy.name, g.id, who, _create_policy.description,
            coalesce(_create_policy.active, true), time_window)
    RETURNING id INTO pid;
    -- its evaluation: a task the pool runs now and every evaluation interval
    PERFORM tms.schedule_task('policy-expand', pid::text);
    RETURN pid;
END
$$;

CREATE FUNCTION tms._add_rule(acting regrole, policy_name text, operation text, engine text, counters jsonb, condition text, baseline_mode text, options jsonb, schedule jsonb, min_interval interval)
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
    PERFORM tms._check_schedule(operation, schedule);

    -- counters: each a positive integer; at least one unless a schedule
    -- says when to look
    IF counters IS NULL THEN
        counters := '{}';
    END IF;
    IF jsonb_typeof(counters) <> 'object' THEN
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
    IF schedule IS NULL
       AND NOT (counters ? 'commits-added' OR counters ? 'bytes-added' OR counters ? 'time-elapsed') THEN
        RAISE EXCEPTION 'a rule needs at least one counter threshold or a schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Give commits-added, bytes-added or time-elapsed, e.g. {"commits-added": 100}, or a schedule such as {"crontab": "0 2 * * *"}.';
    END IF;
    IF min_interval IS NOT NULL AND (NOT isfinite(min_interval) OR min_interval < interval '0'
                                     OR min_interval > interval '100 years') THEN
        RAISE EXCEPTION 'invalid min_interval'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('min_interval is %s; it must be between zero and 100 years.', min_interval);
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
                                       baseline_mode, schedule, min_interval_ms)
    VALUES (p.id, operation, engine, coalesce(options, '{}'),
            (counters ->> 'commits-added')::bigint, (counters ->> 'bytes-added')::bigint,
            (counters ->> 'time-elapsed')::bigint, condition, needs, baseline_mode,
            schedule,
            (extract(epoch FROM min_interval) * 1000)::bigint)
    RETURNING id INTO rid;
    PERFORM tms._attach(rid, NULL);
    -- the policy's task is due at its rules' next firing: look again now
    IF schedule ? 'crontab' THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
    RETURN rid;
END
$$;

CREATE FUNCTION tms._drop_rule(acting regrole, rule_id bigint)
RETURNS void
LANGUAGE plpgsql
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
    PERFORM tms._own_policy(acting, pname);
    DELETE FROM tms.maintenance_rules WHERE id = rule_id;
END
$$;

CREATE FUNCTION tms._set_policy_active(acting regrole, name text, active boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    IF active IS NULL THEN
        RAISE EXCEPTION 'active must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE tms.maintenance_policies SET active = _set_policy_active.active WHERE id = p.id;
    IF active THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
END
$$;

CREATE FUNCTION tms._set_policy_window(acting regrole, name text, time_window jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    PERFORM tms._check_window(time_window);
    UPDATE tms.maintenance_policies SET time_window = _set_policy_window.time_window WHERE id = p.id;
    PERFORM tms.schedule_task('policy-expand', p.id::text);
END
$$;

CREATE FUNCTION tms._drop_policy(acting regrole, name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    DELETE FROM tms.maintenance_policies WHERE id = p.id;
    -- its evaluation task; a running one ends by itself, finding no policy
    DELETE FROM tms.scheduled_tasks
     WHERE task_name = 'policy-expand' AND task_instance = p.id::text AND NOT picked;
END
$$;


CREATE FUNCTION tms._grant_object_group(acting regrole, group_name text, grantee regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
BEGIN
    IF grantee IS NULL THEN
        RAISE EXCEPTION 'grantee must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE tms.object_groups
       SET grantees = array_append(grantees, grantee)
     WHERE id = g.id AND NOT grantee = ANY (grantees);
END
$$;

CREATE FUNCTION tms._revoke_object_group(acting regrole, group_name text, grantee regrole)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
    users text;
BEGIN
    SELECT string_agg(p.name, ', ' ORDER BY p.name) INTO users
      FROM tms.maintenance_policies p
     WHERE p.group_id = g.id AND p.owner = grantee AND NOT pg_has_role(grantee, g.owner, 'USAGE');
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot revoke object group "%" from role % because its policies use it',
                        group_name, grantee
              USING ERRCODE = 'dependent_objects_still_exist',
                    DETAIL = format('Policies of role %s on the group: %s.', grantee, users),
                    HINT = 'Drop those policies first.';
    END IF;
    UPDATE tms.object_groups SET grantees = array_remove(grantees, grantee)
     WHERE id = g.id AND grantee = ANY (grantees);
    RETURN FOUND;
END
$$;

-- ---------------------------------------------------------------------
-- The public functions: each calls its internal function above as the
-- extension owner, passing the acting role first (src/sql_api/api.c).
-- ---------------------------------------------------------------------

CREATE FUNCTION tms.create_object_group(name text, server name,
                                        namespace_pattern text DEFAULT NULL,
                                        table_pattern text DEFAULT '*')
RETURNS integer
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_object_group(text, name, text, text) IS
    'create a target group: the tables of a catalog server whose namespace and name match glob patterns, plus explicit members';

CREATE FUNCTION tms.add_group_member(group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_group_member(text, text, text) IS
    'add an explicit member table to an object group';

CREATE FUNCTION tms.remove_group_member(group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.remove_group_member(text, text, text) IS
    'remove an explicit member table from an object group';

CREATE FUNCTION tms.drop_object_group(name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_object_group(text) IS
    'drop an object group no policy uses';

CREATE FUNCTION tms.grant_object_group(group_name text, grantee regrole)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.grant_object_group(text, regrole) IS
    'let a role build policies on an object group';

CREATE FUNCTION tms.revoke_object_group(group_name text, grantee regrole)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.revoke_object_group(text, regrole) IS
    'take back a grant of an object group';

CREATE FUNCTION tms.create_policy(name text, group_name text,
                                  description text DEFAULT NULL,
                                  time_window jsonb DEFAULT NULL,
                                  active boolean DEFAULT true)
RETURNS integer
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_policy(text, text, text, jsonb, boolean) IS
    'create a maintenance policy over an object group, owned by (and run as) the acting role';

CREATE FUNCTION tms.add_rule(policy_name text, operation text, engine text,
                             counters jsonb DEFAULT NULL,
                             condition text DEFAULT 'true',
                             baseline_mode text DEFAULT 'catch-up',
                             options jsonb DEFAULT '{}',
                             schedule jsonb DEFAULT NULL,
                             min_interval interval DEFAULT NULL)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval) IS
    'add a rule to a policy: operation, engine, counter thresholds, DSL condition, baseline mode, options, schedule (crontab, on-commit; NULL: every evaluation cycle), cooldown';

CREATE FUNCTION tms.drop_rule(rule_id bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_rule(bigint) IS
    'drop a rule of a policy';

CREATE FUNCTION tms.set_policy_active(name text, active boolean)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_active(text, boolean) IS
    'activate or deactivate a policy';

CREATE FUNCTION tms.set_policy_window(name text, time_window jsonb)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_window(text, jsonb) IS
    'set (NULL: remove) the time window of a policy';

CREATE FUNCTION tms.drop_policy(name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_policy(text) IS
    'drop a policy with its rules';

REVOKE ALL ON FUNCTION
    tms._create_object_group(regrole, text, name, text, text),
    tms._add_group_member(regrole, text, text, text),
    tms._remove_group_member(regrole, text, text, text),
    tms._drop_object_group(regrole, text),
    tms._grant_object_group(regrole, text, regrole),
    tms._revoke_object_group(regrole, text, regrole),
    tms._create_policy(regrole, text, text, text, jsonb, boolean),
    tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb, jsonb, interval),
    tms._drop_rule(regrole, bigint),
    tms._set_policy_active(regrole, text, boolean),
    tms._set_policy_window(regrole, text, jsonb),
    tms._drop_policy(regrole, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    tms.create_object_group(text, name, text, text),
    tms.add_group_member(text, text, text),
    tms.remove_group_member(text, text, text),
    tms.drop_object_group(text),
    tms.grant_object_group(text, regrole),
    tms.revoke_object_group(text, regrole),
    tms.create_policy(text, text, text, jsonb, boolean),
    tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval),
    tms.drop_rule(bigint),
    tms.set_policy_active(text, boolean),
    tms.set_policy_window(text, jsonb),
    tms.drop_policy(text)
  TO PUBLIC;

-- sql/install/63_policy_jobs.sql
-- Maintenance policies, part 4: evaluations and the life of a maintenance
-- job: recording an evaluation and submitting its job, starting jobs under
-- tms.max_active_operations, finishing them, log retention, and
-- tms.evaluate_now.

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
CREATE FUNCTION tms._job_ended(jid bigint)
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

-- Finish a job run by an external executor (a procedure named by
-- tms.maintenance_handler, for engines tms does not run itself): record
-- the outcome and reset the (table, rule) baseline.
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

REVOKE ALL ON FUNCTION tms.finish_operation(bigint, text, bigint, text) FROM PUBLIC;

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
    'evaluate one policy now (as its owner): refresh its tables, evaluate its candidates, submit; one row per evaluation';

-- The acting role must own the policy (it runs as the policy's owner).
GRANT EXECUTE ON FUNCTION tms.evaluate_now(text, boolean) TO PUBLIC;


-- sql/install/64_policy_views.sql
-- Maintenance policies, part 5: the views an operator reads, and who may
-- read what.

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
             WHERE b.rule_id = r.id AND b.pending_job IS NOT NULL) AS in_flight,
           r.schedule,
           make_interval(secs => coalesce(r.min_interval_ms,
                                          tms._default_min_interval(r.operation)) / 1000.0) AS min_interval,
           CASE WHEN r.schedule ? 'crontab'
                THEN tms.cron_next(r.schedule ->> 'crontab', greatest(now(), r.cron_fired_at),
                                   coalesce(r.schedule ->> 'time-zone', 'UTC')) END AS next_firing,
           r.cron_fired_at AS last_firing
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id;

COMMENT ON VIEW tms.rules IS 'rules of every policy: operation, engine, thresholds, condition, baseline mode, schedule, cooldown, next crontab firing';

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
           p.active AND tms.window_open(p.time_window, now())
             AND (b.cooldown_until IS NULL OR b.cooldown_until <= now()) AS runnable,
           r.schedule,
           b.cooldown_until
      FROM tms.rule_baselines b
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE b.pending_job IS NULL AND (b.triggered OR b.due_at <= now())
       AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.candidates IS
    '(table, rule) pairs whose counters reached a threshold: what the next cycle (schedule null), firing or commit evaluates (runnable: policy active, window open, no cooldown)';

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

-- policy content holds no credentials: everyone may read policies and rules
GRANT SELECT ON tms.policies, tms.rules TO PUBLIC;
GRANT SELECT ON tms.candidates, tms.evaluation_log, tms.maintenance_jobs,
                tms.tables, tms.table_snapshot_metrics TO pg_monitor;

REVOKE ALL ON FUNCTION tms._compile_condition(text), tms._glob_match(text, text),
                       tms._find_credential(jsonb),
                       tms._in_group(tms.object_groups, tms.tables),
                       tms._attach(bigint, bigint), tms._table_dropped(bigint),
                       tms._reset_baseline(bigint, bigint),
                       tms._own_policy(regrole, text), tms._own_group(regrole, text),
                       tms._may_use_group(regrole, tms.object_groups),
                       tms._check_server(name, regrole), tms._check_window(jsonb),
                       tms._check_options(jsonb), tms._check_schedule(text, jsonb),
                       tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text),
                       tms._start_job(bigint), tms._job_ended(bigint)
    FROM PUBLIC;

-- sql/install/65_operations.sql
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

-- sql/install/66_engines.sql
-- Engines: the tms_engine foreign-data wrapper.  An engine is a foreign
-- server of type livy (Spark through Apache Livy), trino or gravitino; its
-- credentials are a user mapping (basic, bearer token, or OAuth2 client
-- credentials).  See doc/operations.md.

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

-- sql/install/67_schedules.sql
-- Schedules and commit events (doc/schedules.md).  A rule is evaluated at
-- its policy's evaluation cycle, at the firings of its crontab, or after
-- each commit to a table; here are the two entry points of commits (a
-- trigger on a JdbcCatalog's table of pointers, tms.notify_commit), the
-- catalogs whose commits arrive as events and are therefore not polled,
-- and the crontab expansion of the policy-expand task.  The handlers of
-- the task kinds are C (src/ops/policy_run.c for policy-expand,
-- src/ops/policy_tasks.c for cron-job and commit-job).

-- Catalog servers whose commits reach tms as events: a table of pointers
-- in this database in Iceberg's JdbcCatalog layout, with tms's trigger
-- (jdbc), or an event listener calling tms.notify_commit (listener).  The
-- policy cycle does not poll them; it refreshes their groups once after
-- the source is attached and then every tms.commit_event_resync_interval.
CREATE TABLE tms.commit_sources (
    server          name PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('jdbc', 'listener')),
    pointers        regclass,               -- jdbc: the table of pointers
    catalog_name    text,                   -- jdbc: its catalog_name rows (NULL: all)
    attached_by     regrole NOT NULL,
    attached_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'jdbc') = (pointers IS NOT NULL)),
    CHECK (kind = 'jdbc' OR catalog_name IS NULL)
);

CREATE INDEX commit_sources_pointers_idx ON tms.commit_sources (pointers);

COMMENT ON TABLE tms.commit_sources IS
    'catalog servers whose commits arrive as events (JdbcCatalog trigger, event listener) and are not polled';

SELECT pg_catalog.pg_extension_config_dump('tms.commit_sources', '');

GRANT SELECT ON tms.commit_sources TO PUBLIC;

-- Wake the idle pool workers of this database when the transaction
-- commits (src/sql_api/sched_sql.c), so work it made due is claimed at
-- once rather than after a tms.naptime.
CREATE FUNCTION tms._wake_at_commit()
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_wake_at_commit';

-- A commit (or, dropped, the drop) of a table of a catalog server,
-- recorded in the committing transaction: a table new to tms joins its
-- groups, and a table some rule watches gets its commit-job, one per
-- table, coalescing every event until it runs.  A job picked while events
-- arrive runs again afterwards (its due time moves past the claim's).
-- Returns the table's id, NULL when no rule watches it.
CREATE FUNCTION tms._commit_event(srv name, ns text, tbl text, location text, dropped boolean)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tid bigint;
    at timestamptz := clock_timestamp();
BEGIN
    IF dropped THEN
        SELECT t.id INTO tid FROM tms.tables t
         WHERE t.server = srv AND t.namespace = ns AND t.table_name = tbl
           AND t.dropped_at IS NULL;
        IF FOUND THEN
            PERFORM tms._table_dropped(tid);
            DELETE FROM tms.scheduled_tasks
             WHERE task_name = 'commit-job' AND task_instance = tid::text AND NOT picked;
        END IF;
        RETURN NULL;
    END IF;
    INSERT INTO tms.tables AS t (server, namespace, table_name)
    VALUES (srv, ns, tbl)
    ON CONFLICT ON CONSTRAINT tables_server_namespace_table_name_key DO UPDATE
       SET dropped_at = NULL, changed_at = now()
     WHERE t.dropped_at IS NOT NULL
    RETURNING t.id INTO tid;
    IF FOUND THEN
        PERFORM tms._attach(NULL, tid);     -- new, or back: it joins its groups
    ELSE
        SELECT t.id INTO tid FROM tms.tables t
         WHERE t.server = srv AND t.namespace = ns AND t.table_name = tbl;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tms.rule_baselines b WHERE b.table_id = tid) THEN
        RETURN NULL;
    END IF;
    INSERT INTO tms.scheduled_tasks AS s (task_name, task_instance, task_data, execution_time)
    VALUES ('commit-job', tid::text,
            jsonb_build_object('table_id', tid, 'events', 1, 'first_event_at', at,
                               'metadata_location', location),
            at + coalesce(current_setting('tms.commit_job_delay', true), '0')::interval)
    ON CONFLICT (task_name, task_instance) DO UPDATE
       SET task_data = s.task_data
                       || jsonb_build_object('events', coalesce((s.task_data ->> 'events')::bigint, 0) + 1,
                                             'metadata_location', location),
           execution_time = CASE WHEN s.picked THEN EXCLUDED.execution_time
                                 ELSE least(s.execution_time, EXCLUDED.execution_time) END,
           version = CASE WHEN s.picked THEN s.version ELSE s.version + 1 END;
    PERFORM tms._wake_at_commit();
    RETURN tid;
END
$$;

-- The trigger's call for one row event of a table of pointers (relid):
-- the commit sources attached to it whose catalog name matches.
CREATE FUNCTION tms._jdbc_event(relid oid, catalog text, ns text, tbl text,
                                location text, dropped boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    srv name;
BEGIN
    FOR srv IN SELECT c.server FROM tms.commit_sources c
                WHERE c.pointers = relid::regclass
                  AND (c.catalog_name IS NULL OR c.catalog_name = catalog) LOOP
        PERFORM tms._commit_event(srv, ns, tbl, location, dropped);
    END LOOP;
END
$$;

-- The trigger tms.attach_jdbc_catalog puts on a table of pointers
-- (src/sql_api/events_sql.c): every inserted, changed, renamed or deleted
-- pointer becomes a commit event in the same transaction.
CREATE FUNCTION tms._jdbc_commit_trigger()
RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_jdbc_commit_trigger';

CREATE FUNCTION tms._attach_jdbc_catalog(acting regrole, pointers regclass, server name,
                                         catalog_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind "char";
    col text;
    missing text;
BEGIN
    IF pointers IS NULL OR server IS NULL THEN
        RAISE EXCEPTION 'the table of pointers and the server must not be null'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = pointers;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', pointers
              USING ERRCODE = 'wrong_object_type',
                    DETAIL = 'Commit events come from a trigger on a table of pointers.';
    END IF;
    IF NOT has_table_privilege(acting, pointers, 'TRIGGER') THEN
        RAISE EXCEPTION 'permission denied for table %', pointers
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('Role %s may not create triggers on the table.', acting),
                    HINT = format('The owner may run GRANT TRIGGER ON %s TO %I;', pointers, acting::text);
    END IF;
    FOREACH col IN ARRAY ARRAY['catalog_name', 'table_namespace', 'table_name', 'metadata_location'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_attribute a
                        WHERE a.attrelid = pointers AND a.attname = col AND NOT a.attisdropped
                          AND a.attnum > 0
                          AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype)) THEN
            missing := concat_ws(', ', missing, col);
        END IF;
    END LOOP;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'table % does not have the layout of an Iceberg JdbcCatalog', pointers
              USING ERRCODE = 'invalid_table_definition',
                    DETAIL = format('Missing text columns: %s.', missing),
                    HINT = 'The table needs catalog_name, table_namespace, table_name and metadata_location (and may have previous_metadata_location and iceberg_type), as JdbcCatalog creates iceberg_tables.';
    END IF;
    IF EXISTS (SELECT 1 FROM tms.commit_sources c WHERE c.server = _attach_jdbc_catalog.server) THEN
        RAISE EXCEPTION 'commit events of server "%" are already attached', server
              USING ERRCODE = 'duplicate_object',
                    HINT = 'Detach them first with tms.detach_commit_source().';
    END IF;
    INSERT INTO tms.commit_sources (server, kind, pointers, catalog_name, attached_by)
    VALUES (server, 'jdbc', pointers, catalog_name, acting);
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t
                    WHERE t.tgrelid = pointers AND t.tgname = 'tms_commit_events') THEN
        EXECUTE format('CREATE TRIGGER tms_commit_events AFTER INSERT OR UPDATE OR DELETE ON %s'
                       ' FOR EACH ROW EXECUTE FUNCTION tms._jdbc_commit_trigger()', pointers);
    END IF;
    -- the groups of the server are refreshed once more: commits before now
    PERFORM tms.schedule_task('policy-expand', p.id::text)
       FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id
      WHERE g.server = _attach_jdbc_catalog.server;
END
$$;

CREATE FUNCTION tms._attach_commit_listener(acting regrole, server name)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL THEN
        RAISE EXCEPTION 'server must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    IF EXISTS (SELECT 1 FROM tms.commit_sources c WHERE c.server = _attach_commit_listener.server) THEN
        RAISE EXCEPTION 'commit events of server "%" are already attached', server
              USING ERRCODE = 'duplicate_object',
                    HINT = 'Detach them first with tms.detach_commit_source().';
    END IF;
    INSERT INTO tms.commit_sources (server, kind, attached_by)
    VALUES (server, 'listener', acting);
END
$$;

CREATE FUNCTION tms._detach_commit_source(acting regrole, server name)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c tms.commit_sources;
BEGIN
    SELECT * INTO c FROM tms.commit_sources s WHERE s.server = _detach_commit_source.server;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT pg_has_role(acting, c.attached_by, 'USAGE') THEN
        RAISE EXCEPTION 'must be the role that attached the commit events of server "%"', server
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('They were attached by role %s.', c.attached_by);
    END IF;
    DELETE FROM tms.commit_sources s WHERE s.server = c.server;
    IF c.kind = 'jdbc'
       AND NOT EXISTS (SELECT 1 FROM tms.commit_sources s WHERE s.pointers = c.pointers) THEN
        EXECUTE format('DROP TRIGGER IF EXISTS tms_commit_events ON %s', c.pointers);
    END IF;
    -- polled again from the next cycle on
    PERFORM tms.schedule_task('policy-expand', p.id::text)
       FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id
      WHERE g.server = c.server;
    RETURN true;
END
$$;

CREATE FUNCTION tms._notify_commit(acting regrole, server name, namespace text,
                                   table_name text, metadata_location text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL OR namespace IS NULL OR table_name IS NULL
       OR namespace = '' OR table_name = '' THEN
        RAISE EXCEPTION 'a commit needs a server, a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    RETURN tms._commit_event(server, namespace, table_name, metadata_location, false) IS NOT NULL;
END
$$;

CREATE FUNCTION tms._notify_drop(acting regrole, server name, namespace text, table_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL OR namespace IS NULL OR table_name IS NULL THEN
        RAISE EXCEPTION 'a drop needs a server, a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    PERFORM tms._commit_event(server, namespace, table_name, NULL, true);
END
$$;

CREATE FUNCTION tms.attach_jdbc_catalog(pointers regclass, server name,
                                        catalog_name text DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_jdbc_catalog(regclass, name, text) IS
    'turn every pointer change of a JdbcCatalog table of pointers in this database into a commit event of a catalog server, in the committing transaction; the server is no longer polled';

CREATE FUNCTION tms.attach_commit_listener(server name)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_commit_listener(name) IS
    'declare that an event listener reports every commit of a catalog server through tms.notify_commit; the server is no longer polled';

CREATE FUNCTION tms.detach_commit_source(server name)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.detach_commit_source(name) IS
    'stop taking the commits of a catalog server as events (drops the trigger); the server is polled again';

CREATE FUNCTION tms.notify_commit(server name, namespace text, table_name text,
                                  metadata_location text DEFAULT NULL)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.notify_commit(name, text, text, text) IS
    'report a commit to a table (namespace levels joined with "."); its commit-job runs the table''s on-commit rules; false: no rule watches the table';

CREATE FUNCTION tms.notify_drop(server name, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.notify_drop(name, text, text) IS
    'report that a table was dropped from its catalog: it leaves every group';

-- The crontab expansion of policy p_policy, one pick of its policy-expand
-- task: for each crontab rule whose latest firing is due and not yet
-- expanded (a firing missed while nothing ran fires once, late; one
-- before the rule existed never), enqueue the cron-jobs of its tables in
-- table id order, at most p_batch in all, remembering how far it got
-- (cron_cursor); a firing of an inactive policy (p_skip) is passed over.
-- A cron-job is per (policy, table) and carries the rules that fired.
-- Returns how many it enqueued, whether some remain (the task is due again
-- at once), and the next firing of any of the rules.
CREATE FUNCTION tms._expand_cron(p_policy integer, p_batch integer, p_skip boolean,
                                 OUT enqueued integer, OUT more boolean,
                                 OUT next_at timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r tms.maintenance_rules;
    zone text;
    fire timestamptz;
    want integer;
    n integer;
    last bigint;
BEGIN
    enqueued := 0;
    more := false;
    FOR r IN SELECT * FROM tms.maintenance_rules m
              WHERE m.policy_id = p_policy AND m.schedule ? 'crontab'
              ORDER BY m.id FOR UPDATE LOOP
        zone := coalesce(r.schedule ->> 'time-zone', 'UTC');
        IF r.cron_cursor IS NULL THEN
            fire := tms.cron_prev(r.schedule ->> 'crontab', now(), zone);
            IF fire IS NOT NULL AND fire >= r.created_at
               AND fire > coalesce(r.cron_fired_at, '-infinity') THEN
                r.cron_fired_at := fire;
                r.cron_cursor := CASE WHEN p_skip THEN NULL ELSE 0 END;
            END IF;
        END IF;
        IF r.cron_cursor IS NOT NULL THEN
            want := p_batch - enqueued;
            IF want <= 0 THEN
                more := true;
            ELSE
                WITH due AS (
                    SELECT b.table_id FROM tms.rule_baselines b
                      JOIN tms.tables t ON t.id = b.table_id
                     WHERE b.rule_id = r.id AND b.table_id > r.cron_cursor
                       AND t.dropped_at IS NULL
                     ORDER BY b.table_id
                     LIMIT want),
                ins AS (
                    INSERT INTO tms.scheduled_tasks AS s
                           (task_name, task_instance, task_data, execution_time)
                    SELECT 'cron-job', p_policy || ':' || due.table_id,
                           jsonb_build_object('policy_id', p_policy, 'table_id', due.table_id,
                                              'rules', jsonb_build_array(r.id),
                                              'fired_at', r.cron_fired_at),
                           now()
                      FROM due
                    ON CONFLICT (task_name, task_instance) DO UPDATE
                       SET task_data = s.task_data || jsonb_build_object('rules',
                               (SELECT jsonb_agg(DISTINCT x)
                                  FROM jsonb_array_elements(coalesce(s.task_data -> 'rules', '[]')
                                                            || (EXCLUDED.task_data -> 'rules')) x)),
                           execution_time = CASE WHEN s.picked THEN clock_timestamp()
                                                 ELSE least(s.execution_time, EXCLUDED.execution_time) END,
                           version = CASE WHEN s.picked THEN s.version ELSE s.version + 1 END
                    RETURNING 1)
                SELECT count(*)::integer, max(due.table_id) INTO n, last FROM due;
                enqueued := enqueued + n;
                IF n < want THEN
                    r.cron_cursor := NULL;          -- the firing is expanded
                ELSE
                    r.cron_cursor := last;
                    more := true;
                END IF;
            END IF;
        END IF;
        UPDATE tms.maintenance_rules m
           SET cron_fired_at = r.cron_fired_at, cron_cursor = r.cron_cursor
         WHERE m.id = r.id;
        next_at := least(next_at, tms.cron_next(r.schedule ->> 'crontab',
                                                greatest(now(), r.cron_fired_at), zone));
    END LOOP;
    IF enqueued > 0 THEN
        PERFORM tms._wake_at_commit();
    END IF;
END
$$;

REVOKE ALL ON FUNCTION
    tms._wake_at_commit(),
    tms._jdbc_commit_trigger(),
    tms._commit_event(name, text, text, text, boolean),
    tms._jdbc_event(oid, text, text, text, text, boolean),
    tms._attach_jdbc_catalog(regrole, regclass, name, text),
    tms._attach_commit_listener(regrole, name),
    tms._detach_commit_source(regrole, name),
    tms._notify_commit(regrole, name, text, text, text),
    tms._notify_drop(regrole, name, text, text),
    tms._expand_cron(integer, integer, boolean)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    tms.attach_jdbc_catalog(regclass, name, text),
    tms.attach_commit_listener(name),
    tms.detach_commit_source(name),
    tms.notify_commit(name, text, text, text),
    tms.notify_drop(name, text, text)
  TO PUBLIC;

-- sql/install/68_events.sql
-- State-change events (doc/operations.md, "Events"): NOTIFY tms_events
-- with a JSON payload for every state change of a maintenance job, a purge
-- and (tms.events = '..., task') a task, and webhook deliveries of the
-- changes a tms_webhook server asks for.
--
-- Jobs and purges notify from the row triggers below (their work is C:
-- src/ops/events.c); tasks notify from the scheduler's own statements
-- (src/sched/task_events.c).  A webhook delivery is a row of
-- tms.webhook_outbox written in the transaction of the change, delivered
-- by a task of kind "webhook" (src/ops/webhook.c).

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

-- sql/install/70_monitoring.sql
-- Monitoring (doc/operations.md, "Monitoring"): the cumulative statistics
-- kept in shared memory (src/bridge/stats.c) and views of the current
-- state of the work, all readable by pg_monitor.
--
-- The tms.stat_* views are built for prometheus-postgres-exporter: one
-- row per label set, counters that only grow (until tms.stat_reset()) and
-- are never NULL, and a stats_reset column saying since when a row
-- counts.  Their names and columns are an interface: change them only
-- with a new version's upgrade script and the docs.

-- ---------------------------------------------------------------------
-- Cumulative statistics
-- ---------------------------------------------------------------------

-- The rows of one area of every database (counters in the order of
-- src/bridge/stats.h); the views below unpack them.
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
