-- Maintenance policies, part 1: the tables.  Object groups, policies and
-- rules with the history of their versions, the tables tms knows in each catalog with their activity
-- counters, per (table, rule) baselines, maintenance jobs and the
-- evaluation log.  See doc/policies.md; the evaluation of a policy is C
-- (src/ops/policy_*.c), run as a task of kind policy-expand by the pool
-- workers, and by tms.evaluate_now().
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).  Functions and views:
-- sql/install/functions/60_policy_tables.sql.

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
    refreshed_at      timestamptz,
    -- breaks a tie of specificity between groups with rules for the same
    -- operation on one table: the higher wins (tms._rule_precedence)
    priority          integer NOT NULL DEFAULT 0
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
    -- tms.alter_rule makes a new version (tms.rule_versions) of the same
    -- rule: its baselines and cooldowns stay
    version           integer NOT NULL DEFAULT 1 CHECK (version > 0),
    active            boolean NOT NULL DEFAULT true,   -- false: never evaluated
    time_window       jsonb,                  -- its jobs start only then; NULL: always
    score             text,                   -- DSL, numeric: its jobs' rank; NULL: 0
    CONSTRAINT maintenance_rules_check
        CHECK (schedule IS NOT NULL
               OR num_nonnulls(commits_threshold, bytes_threshold, time_threshold_ms) > 0)
);

CREATE INDEX maintenance_rules_policy_idx ON tms.maintenance_rules (policy_id);

-- Every version of every rule: who made it, when, what changed from the
-- version before (NULL for the rule as added) and the whole definition.
-- No foreign key: the history outlives the rule, as its jobs do.
CREATE TABLE tms.rule_versions (
    rule_id           bigint NOT NULL,
    version           integer NOT NULL CHECK (version > 0),
    policy_id         integer NOT NULL,
    policy_name       text NOT NULL,
    changed_at        timestamptz NOT NULL DEFAULT now(),
    changed_by        name NOT NULL,          -- the acting role then
    changes           jsonb,                  -- {"condition": {"from": ..., "to": ...}, ...}
    definition        jsonb NOT NULL,
    PRIMARY KEY (rule_id, version)
);

COMMENT ON TABLE tms.rule_versions IS
    'every version of every rule: who made it, when, what changed, the definition';

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
-- submitted_at and submit_snapshot_id are written, with phase "submit",
-- in the step committed before the first request that may start a run
-- on the engine, and cleared only when that request certainly did not
-- arrive: a recovered job that finds them knows a run may exist, and
-- never submits again (it follows the run, or looks at the table's
-- snapshots after submit_snapshot_id).
-- No credential is ever stored here.
CREATE TABLE tms.table_maintenance_job (
    id                bigserial PRIMARY KEY,
    table_id          bigint NOT NULL REFERENCES tms.tables,
    rule_id           bigint,                 -- no FK: jobs outlive rules
    rule_version      integer,                -- the version whose evaluation submitted it
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
    submitted_at      timestamptz,            -- a run may have been started on the engine
    submit_snapshot_id bigint,                -- the table's snapshot then (NULL: none)
    budget_wait       text,                   -- the budget it waits for ("rule:7", "policy:3", "engine:spark")
    -- its rule's score when it was submitted, and its rank: the due time
    -- of its task, submission time - score x tms.score_aging
    score             double precision,
    rank_at           timestamptz,
    -- retention: the data files it dropped whole and their rows (exact:
    -- the manifests' record counts)
    data_files_removed bigint NOT NULL DEFAULT 0,
    rows_removed      bigint NOT NULL DEFAULT 0,
    -- the batch it runs in (a rule's batch-size: one task, "batch-<id>",
    -- runs the jobs of up to that many tables one after the other); the
    -- id of the batch's first job; NULL: a job of its own ("job-<id>")
    batch_id          bigint,
    CHECK ((finished_at IS NULL) = (state IN ('pending', 'running')))
);

CREATE INDEX table_maintenance_job_inflight_idx ON tms.table_maintenance_job (state)
    WHERE finished_at IS NULL;
CREATE INDEX table_maintenance_job_table_idx ON tms.table_maintenance_job (table_id, rule_id);
-- the jobs of one batch (the batch's task runs them; tms._record_evaluation
-- adds to an open one)
CREATE INDEX table_maintenance_job_batch_idx ON tms.table_maintenance_job (batch_id)
    WHERE batch_id IS NOT NULL;

-- what budgets count (tms._budget_check): a policy's jobs (and so a
-- rule's) by their first start, and by their end (bytes rewritten in the
-- last hour)
CREATE INDEX table_maintenance_job_policy_started_idx
    ON tms.table_maintenance_job (policy_id, started_at) WHERE policy_id IS NOT NULL;
CREATE INDEX table_maintenance_job_policy_finished_idx
    ON tms.table_maintenance_job (policy_id, finished_at) WHERE policy_id IS NOT NULL;

-- a table's jobs of one policy, in flight or by their end (the
-- idx_tmj_table_policy_finished of Gravitino's table maintenance service
-- design, https://github.com/apache/gravitino/pull/13386): the wait of a
-- job for the earlier operations of its chain (tms._start_job)
CREATE INDEX table_maintenance_job_table_policy_idx
    ON tms.table_maintenance_job (table_id, policy_id, finished_at);
-- the queue of the jobs waiting for one budget (tms._budget_check)
CREATE INDEX table_maintenance_job_budget_wait_idx
    ON tms.table_maintenance_job (budget_wait)
    WHERE finished_at IS NULL AND budget_wait IS NOT NULL;

-- A table's metrics at the snapshot before and after every job (the
-- table_snapshot_metrics of Gravitino's table maintenance service design,
-- https://github.com/apache/gravitino/pull/13386), so a user sees the
-- effect of maintenance.
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
    cooldown_until    timestamptz,            -- no job before (the rule's min_interval, or its back-off)
    -- adaptive cadence (functions/63_cadence.sql): the pair's jobs in a
    -- row that changed nothing (0: not backed off), and what the last one
    -- did not do
    backoff_level     integer NOT NULL DEFAULT 0 CHECK (backoff_level >= 0),
    backoff_reason    text,
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
    rule_version      integer,                -- the version evaluated
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
    decision          text NOT NULL,          -- submitted, not-needed, already-pending, failed, superseded
    job_id            bigint,
    score             double precision,       -- the rule's score (NULL: no score, or no result)
    score_explanation text                    -- its variables' values and the score
);

CREATE INDEX evaluation_log_time_idx ON tms.evaluation_log (evaluated_at);
CREATE INDEX evaluation_log_table_idx ON tms.evaluation_log (table_name, evaluated_at);

COMMENT ON TABLE tms.evaluation_log IS
    'every policy condition evaluation: trigger configuration, counters, metrics, result with explanation, resulting job';

-- Budgets (doc/policies.md, "Budgets"): what the jobs of one rule, or of
-- every rule of a policy (rule_id NULL), may spend: data bytes rewritten
-- in a trailing hour, jobs started in a window (the occurrence of the
-- rule's or policy's time window open now, else a rolling hour).  NULL:
-- no limit of that kind; a row has at least one.  Enforced where a job
-- starts (tms._start_job through tms._budget_check).
CREATE TABLE tms.maintenance_budgets (
    policy_id         integer NOT NULL REFERENCES tms.maintenance_policies ON DELETE CASCADE,
    rule_id           bigint REFERENCES tms.maintenance_rules ON DELETE CASCADE,
    bytes_rewritten_per_hour bigint CHECK (bytes_rewritten_per_hour > 0),
    jobs_per_window   integer CHECK (jobs_per_window > 0),
    set_at            timestamptz NOT NULL DEFAULT now(),
    set_by            name NOT NULL,
    CHECK (bytes_rewritten_per_hour IS NOT NULL OR jobs_per_window IS NOT NULL)
);

CREATE UNIQUE INDEX maintenance_budgets_scope_idx
    ON tms.maintenance_budgets (policy_id, coalesce(rule_id, 0));

COMMENT ON TABLE tms.maintenance_budgets IS
    'per rule or policy: bytes rewritten per hour and jobs per window its jobs may spend';

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
SELECT pg_catalog.pg_extension_config_dump('tms.rule_versions', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_maintenance_job', '');
SELECT pg_catalog.pg_extension_config_dump('tms.evaluation_log', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_budgets', '');
-- and their sequences, so that a restored database goes on numbering
SELECT pg_catalog.pg_extension_config_dump('tms.tables_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.object_groups_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_policies_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_rules_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_maintenance_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.evaluation_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_snapshot_metrics_id_seq', '');
