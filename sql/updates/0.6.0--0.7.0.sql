-- tms 0.6.0 to 0.7.0: the once-only changes (tables, types, indexes,
-- data) of 0.7.0, run before every file of sql/install/functions/ is
-- replayed (scripts/sql-gen.sh builds tms--0.6.0--0.7.0.sql; the rules are
-- in doc/developing.md, "Changing the schema").
--
-- A function whose result type changes, or a view whose columns change
-- other than by appending, is dropped first: list it here, one line each,
-- as "-- drop: FUNCTION tms.name(argument types)" or "-- drop: VIEW tms.name".
--
-- drop: FUNCTION tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text)
-- drop: FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval)
-- drop: FUNCTION tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb, jsonb, interval)

-- Rules people can change (tms.alter_rule): versions, a rule's own
-- active flag and window, and which version decided an evaluation or
-- submitted a job; object groups get a priority (tms.effective_rules).
ALTER TABLE tms.object_groups ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE tms.maintenance_rules
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version > 0),
    ADD COLUMN active boolean NOT NULL DEFAULT true,
    ADD COLUMN time_window jsonb;
ALTER TABLE tms.table_maintenance_job ADD COLUMN rule_version integer;
ALTER TABLE tms.evaluation_log ADD COLUMN rule_version integer;

CREATE TABLE tms.rule_versions (
    rule_id           bigint NOT NULL,
    version           integer NOT NULL CHECK (version > 0),
    policy_id         integer NOT NULL,
    policy_name       text NOT NULL,
    changed_at        timestamptz NOT NULL DEFAULT now(),
    changed_by        name NOT NULL,
    changes           jsonb,
    definition        jsonb NOT NULL,
    PRIMARY KEY (rule_id, version)
);

COMMENT ON TABLE tms.rule_versions IS
    'every version of every rule: who made it, when, what changed, the definition';

SELECT pg_catalog.pg_extension_config_dump('tms.rule_versions', '');

-- (the rules of 0.6.0 get their version 1 in 0.6.0--0.7.0.post.sql,
-- which runs once tms._rule_definition exists)

-- Budgets (doc/policies.md, "Budgets"): per rule or policy, and the
-- budget a queued job waits for.
ALTER TABLE tms.table_maintenance_job ADD COLUMN budget_wait text;

-- what budgets count (tms._budget_check): a policy's jobs (and so a
-- rule's) by their first start, and by their end (bytes rewritten in the
-- last hour)
CREATE INDEX table_maintenance_job_policy_started_idx
    ON tms.table_maintenance_job (policy_id, started_at) WHERE policy_id IS NOT NULL;
CREATE INDEX table_maintenance_job_policy_finished_idx
    ON tms.table_maintenance_job (policy_id, finished_at) WHERE policy_id IS NOT NULL;

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

SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_budgets', '');

-- Adaptive cadence: a (rule, table) pair whose jobs change nothing backs
-- off (sql/install/functions/63_cadence.sql).
ALTER TABLE tms.rule_baselines
    ADD COLUMN backoff_level integer NOT NULL DEFAULT 0 CHECK (backoff_level >= 0),
    ADD COLUMN backoff_reason text;

-- Rule scores: a rule's score expression, the score and rank of each job
-- it submits, and each evaluation's score with its explanation.
ALTER TABLE tms.maintenance_rules ADD COLUMN score text;
ALTER TABLE tms.table_maintenance_job
    ADD COLUMN score double precision,
    ADD COLUMN rank_at timestamptz;
ALTER TABLE tms.evaluation_log
    ADD COLUMN score double precision,
    ADD COLUMN score_explanation text;

-- Indexes of the job tables: a table's jobs of one policy (the chain's
-- wait, tms._start_job; the idx_tmj_table_policy_finished of Gravitino's
-- table maintenance service design), the queue of a budget
-- (tms._budget_check), the finished purge jobs by their end (their prune).
CREATE INDEX table_maintenance_job_table_policy_idx
    ON tms.table_maintenance_job (table_id, policy_id, finished_at);
CREATE INDEX table_maintenance_job_budget_wait_idx
    ON tms.table_maintenance_job (budget_wait)
    WHERE finished_at IS NULL AND budget_wait IS NOT NULL;
CREATE INDEX iceberg_cleanup_job_finished_idx ON tms.iceberg_cleanup_job (finished_at)
    WHERE state IN ('SUCCEEDED', 'FAILED');

-- Retention: the data files a job dropped whole and their rows.
ALTER TABLE tms.table_maintenance_job
    ADD COLUMN data_files_removed bigint NOT NULL DEFAULT 0,
    ADD COLUMN rows_removed bigint NOT NULL DEFAULT 0;

-- Batched snapshot expiry (doc/policies.md, "Batches"): the jobs of a
-- rule's batch share one task, "batch-<batch id>".
ALTER TABLE tms.table_maintenance_job ADD COLUMN batch_id bigint;
CREATE INDEX table_maintenance_job_batch_idx ON tms.table_maintenance_job (batch_id)
    WHERE batch_id IS NOT NULL;
