-- Rules people can change: tms.alter_rule (validation shared with
-- tms.add_rule, versions in tms.rule_versions, baselines and cooldowns
-- kept, results of a replaced version submit nothing) and precedence
-- between groups (tms.effective_rules: an exact table beats a pattern, a
-- pattern beats a server-wide group, ties broken by priority, then age).
-- Commits are simulated with tms.observe_table.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER pr_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('pr-server', server => 'pr_srv', namespace_pattern => '*') > 0 AS g;
SELECT tms.create_object_group('pr-sales', server => 'pr_srv', namespace_pattern => 'pr_sales') > 0 AS g;
SELECT tms.create_object_group('pr-orders', server => 'pr_srv') > 0 AS g;
SELECT tms.add_group_member('pr-orders', 'pr_sales', 'orders');
SELECT tms.create_object_group('pr-orders-too', server => 'pr_srv', namespace_pattern => 'pr_sales',
                               table_pattern => 'orders') > 0 AS g;
-- inactive policies: their tasks leave them alone
SELECT tms.create_policy(n, n, active => false) > 0 AS p
  FROM unnest(ARRAY['pr-server', 'pr-sales', 'pr-orders', 'pr-orders-too']) n;

SELECT tms.observe_table('pr_srv', 'pr_sales', 'orders', 'u-1', 'm-1', 1, 50, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed;
SELECT tms.observe_table('pr_srv', 'pr_sales', 'items', 'u-2', 'm-1', 1, 50, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed;
SELECT tms.observe_table('pr_srv', 'pr_logs', 'events', 'u-3', 'm-1', 1, 50, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed;

SELECT tms.add_rule('pr-server', 'compaction', 'spark', '{"commits-added": 10}') AS r_server \gset
SELECT tms.add_rule('pr-server', 'snapshot-expiry', 'local', '{"commits-added": 10}') AS r_expiry \gset
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 10}') AS r_sales \gset
SELECT tms.add_rule('pr-orders', 'compaction', 'spark', '{"commits-added": 10}') AS r_orders \gset
SELECT tms.add_rule('pr-orders-too', 'compaction', 'spark', '{"commits-added": 10}') AS r_orders_too \gset

CREATE VIEW pr_effective AS
  SELECT table_name, operation, policy, specificity, priority,
         array_length(overridden_rules, 1) AS overridden, overridden_groups, reason
    FROM tms.effective_rules WHERE server = 'pr_srv' ORDER BY namespace, table_name, operation, policy;

-- orders: two groups name it exactly (a member, literal patterns); the
-- older wins.  items: the namespace pattern beats the server-wide group.
-- events: only the server-wide group.  snapshot-expiry: nobody competes.
SELECT * FROM pr_effective;

-- priority breaks the tie of specificity; it never beats specificity
SELECT tms.set_group_priority('pr-orders-too', 5);
SELECT tms.set_group_priority('pr-server', 100);
SELECT * FROM pr_effective WHERE operation = 'compaction';
SELECT tms.set_group_priority('pr-server', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tms.set_group_priority('pr-nope', 1);
\echo :LAST_ERROR_SQLSTATE

-- the candidates: every pair fired (catch-up, 50 >= 10); only the
-- winners run (the evaluation asks tms._rule_wins; runnable is also false
-- because the policies are inactive)
SELECT c.policy, c.table_name, c.operation, tms._rule_wins(c.rule_id, t.id) AS wins, c.runnable
  FROM tms.candidates c JOIN tms.tables t USING (server, namespace, table_name)
 WHERE c.server = 'pr_srv' ORDER BY c.table_name, c.operation, c.policy;

-- a job an overridden rule submitted (before the nearer group had its
-- rule) is skipped when it would start
SELECT (tms._record_evaluation(p.id, :r_server, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL)).job_id AS j_over
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'pr-server' AND t.server = 'pr_srv' AND t.table_name = 'orders' \gset
SELECT state, replace(reason, :r_server::text, 'N') AS reason FROM tms._start_job(:j_over);
SELECT state, rule_version FROM tms.maintenance_jobs WHERE id = :j_over;

-- alter_rule: the same validation as add_rule, argument by argument
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_sales, counters => '{"commits-added": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits": 1}');
SELECT tms.alter_rule(:r_sales, counters => '{"commits": 1}');
SELECT tms.alter_rule(:r_sales, counters => '[1]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{}');
SELECT tms.alter_rule(:r_sales, counters => '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 1}', 'dataFiles >');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_sales, condition => 'dataFiles >');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 1}',
                    schedule => '{"crontab": "61 * * * *"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_sales, schedule => '{"crontab": "61 * * * *"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_sales, schedule => '{"on-commit": 1}');
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 1}',
                    min_interval => '-1 hour');
SELECT tms.alter_rule(:r_sales, min_interval => '-1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pr-sales', 'compaction', 'spark', '{"commits-added": 1}',
                    options => '{"s3.secret-access-key": "x"}');
SELECT tms.alter_rule(:r_sales, options => '{"s3.secret-access-key": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_sales, time_window => '{"time-zone-id": "Mars/Olympus", "periods": [{"cron": "0 2 * * *", "duration": 60000}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_expiry, counters => '{"commits-added": 1}', reset => '{schedule}');
SELECT tms.alter_rule(:r_expiry, reset => '{engine}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_expiry, min_interval => '1 hour', reset => '{min_interval}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(-1, condition => 'true');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(NULL, condition => 'true');
\echo :LAST_ERROR_SQLSTATE
-- a schedule-only rule cannot lose its schedule without getting a counter
SELECT tms.add_rule('pr-server', 'orphan-cleanup', 'local', NULL,
                    schedule => '{"crontab": "0 3 * * 0"}') AS r_orphan \gset
SELECT tms.alter_rule(:r_orphan, reset => '{schedule}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_orphan, counters => '{"commits-added": 5}');
\echo :LAST_ERROR_SQLSTATE
-- nothing was changed by the failing calls
SELECT id = :r_sales AS sales, version, condition, commits_added, schedule, min_interval
  FROM tms.rules WHERE id IN (:r_sales, :r_orphan) ORDER BY id;

-- who may alter: the policy's owner (as for add_rule and drop_rule)
CREATE ROLE tms_pr_user;
GRANT USAGE ON SCHEMA tms TO tms_pr_user;
SET ROLE tms_pr_user;
SELECT tms.alter_rule(:r_sales, condition => 'true');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.set_group_priority('pr-sales', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) >= 5 AS readable FROM tms.rule_versions;
RESET ROLE;
REVOKE USAGE ON SCHEMA tms FROM tms_pr_user;
DROP ROLE tms_pr_user;

-- a change keeps the rule's baselines and cooldowns
UPDATE tms.rule_baselines b SET cooldown_until = '2030-01-01'
  FROM tms.tables t WHERE b.rule_id = :r_sales AND t.id = b.table_id AND t.table_name = 'items';
CREATE TEMP TABLE pr_before AS
  SELECT table_id, base_commits, since, cooldown_until, triggered
    FROM tms.rule_baselines WHERE rule_id = :r_sales;
SELECT tms.alter_rule(:r_sales, condition => 'dataFiles > 1', min_interval => '2 hours',
                      options => '{"target-file-size-bytes": 1048576}') AS version;
SELECT tms.alter_rule(:r_sales, condition => 'dataFiles > 1') AS unchanged_version;
SELECT count(*) AS kept FROM tms.rule_baselines b JOIN pr_before o USING (table_id)
 WHERE b.rule_id = :r_sales AND (b.base_commits, b.since, b.cooldown_until, b.triggered)
       IS NOT DISTINCT FROM (o.base_commits, o.since, o.cooldown_until, o.triggered);
-- new thresholds apply to the counts so far: 50 commits are below 100
SELECT tms.alter_rule(:r_sales, counters => '{"commits-added": 100, "time-elapsed": 3600000}') AS version;
SELECT t.table_name, b.base_commits, b.due_commits, b.triggered, b.cooldown_until
  FROM tms.rule_baselines b JOIN tms.tables t ON t.id = b.table_id
 WHERE b.rule_id = :r_sales ORDER BY t.table_name;
SELECT tms.alter_rule(:r_sales, counters => '{"commits-added": 20}', active => false,
                      time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 2 * * *", "duration": 60000}]}') AS version;
SELECT t.table_name, b.due_commits, b.triggered
  FROM tms.rule_baselines b JOIN tms.tables t ON t.id = b.table_id
 WHERE b.rule_id = :r_sales ORDER BY t.table_name;
SELECT version, active, time_window IS NOT NULL AS has_window, min_interval
  FROM tms.rules WHERE id = :r_sales;
SELECT tms.alter_rule(:r_sales, reset => '{time_window,min_interval}', active => true) AS version;

-- the history: who changed what, and the definition of every version
SELECT version, changed_by, policy_name, changes
  FROM tms.rule_versions WHERE rule_id = :r_sales ORDER BY version;
SELECT definition ->> 'condition' AS condition, definition -> 'counters' AS counters
  FROM tms.rule_versions WHERE rule_id = :r_sales ORDER BY version;

-- a result of a version replaced while it was evaluated submits nothing
-- and is logged with the version (and condition) that decided; the
-- current version submits, and its job records it
SELECT d.job_id, d.decision
  FROM tms.maintenance_policies p, tms.tables t,
       LATERAL tms._record_evaluation(p.id, :r_sales, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL, 2) d
 WHERE p.name = 'pr-sales' AND t.server = 'pr_srv' AND t.table_name = 'items';
SELECT (tms._record_evaluation(p.id, :r_sales, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL, 5)).decision
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'pr-sales' AND t.server = 'pr_srv' AND t.table_name = 'items';
SELECT rule_version, condition, thresholds, decision, job_id IS NOT NULL AS has_job
  FROM tms.evaluation_log WHERE rule_id = :r_sales ORDER BY id;
SELECT rule_version, operation FROM tms.maintenance_jobs WHERE rule_id = :r_sales;

-- dropping the rule keeps its history
SELECT tms.drop_rule(:r_sales);
SELECT count(*) AS versions FROM tms.rule_versions WHERE rule_id = :r_sales;
-- with the pattern group's rule gone, items falls back to the server-wide group
SELECT * FROM pr_effective WHERE table_name = 'items';

SELECT tms.finish_operation(j.id, 'cancelled') FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'pr_srv' AND j.finished_at IS NULL;
DELETE FROM tms.scheduled_tasks s USING tms.table_maintenance_job j, tms.tables t
 WHERE s.task_name = 'maintenance' AND s.task_instance = j.task_instance
   AND t.id = j.table_id AND t.server = 'pr_srv';
SELECT tms.drop_policy(n) FROM unnest(ARRAY['pr-server', 'pr-sales', 'pr-orders', 'pr-orders-too']) n;
DROP VIEW pr_effective;
