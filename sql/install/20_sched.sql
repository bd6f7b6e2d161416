-- Scheduler core: db-scheduler's scheduled_tasks, task kinds with
-- concurrency caps, and the views an operator reads.
--
-- Claiming, heartbeats and completion are done by C code (src/sched/)
-- shared by the background workers and CALL tms.run_pending(); the
-- statements it runs are documented there.
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).  Functions and views:
-- sql/install/functions/20_sched.sql.

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
