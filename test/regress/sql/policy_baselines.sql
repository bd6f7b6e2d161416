-- Baseline modes and candidates (SQL only: commits are simulated with
-- tms.observe_table, as a policy's evaluation records what it observes).
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER pb_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('pb-g', server => 'pb_srv', namespace_pattern => 'pb_sales', table_pattern => 'o*') > 0 AS g;
-- inactive policies: their tasks leave them alone; tms.candidates still shows them
SELECT tms.create_policy('pb-catch-up', 'pb-g', active => false) > 0 AS p;
SELECT tms.create_policy('pb-going-forward', 'pb-g', active => false) > 0 AS p;

-- commit times are finite
SELECT tms.observe_table('pb_srv', 'pb_sales', 'inf', 'u-0', 'm-0', 1, 1, 0, '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE

-- the example of the design: orders has 500 commits when the rules are added
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders', 'u-1', 'm-500', 500, 500, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed;
SELECT tms.observe_table('pb_srv', 'pb_sales', 'customers', 'u-2', 'm-1', 1, 900, 0,
                         '2026-01-01', '2026-06-01') > 0 AS not_in_group;
SELECT tms.add_rule('pb-catch-up', 'compaction', 'spark', '{"commits-added": 100}',
                    baseline_mode => 'catch-up') AS r_catch \gset
SELECT tms.add_rule('pb-going-forward', 'compaction', 'spark', '{"commits-added": 100}',
                    baseline_mode => 'going-forward') AS r_fwd \gset

CREATE VIEW pb_cands AS
  SELECT policy, table_name, commits_added, reason FROM tms.candidates
   WHERE server = 'pb_srv' ORDER BY policy, table_name;

-- catch-up fires at once (500 >= 100); going-forward starts at 500
SELECT * FROM pb_cands;
-- 99 more commits: nothing new
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders', 'u-1', 'm-599', 599, 99, 0, NULL, '2026-06-02') > 0;
SELECT * FROM pb_cands;
-- the 600th commit fires going-forward
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders', 'u-1', 'm-600', 600, 1, 0, NULL, '2026-06-03') > 0;
SELECT * FROM pb_cands;

-- a table joining the group later: catch-up counts its past, going-forward
-- takes its baseline at this first check and does not fire
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders_eu', 'u-3', 'm-300', 300, 300, 0,
                         '2026-02-01', '2026-06-01') > 0;
SELECT * FROM pb_cands;
SELECT b.base_commits, b.triggered
  FROM tms.rule_baselines b JOIN tms.tables t ON t.id = b.table_id
 WHERE b.rule_id = :r_fwd AND t.table_name = 'orders_eu';
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders_eu', 'u-3', 'm-400', 400, 100, 0, NULL, '2026-06-05') > 0;
SELECT * FROM pb_cands;

-- an explicit member outside the patterns joins too
SELECT tms.add_group_member('pb-g', 'pb_sales', 'customers');
SELECT * FROM pb_cands;
SELECT tms.remove_group_member('pb-g', 'pb_sales', 'customers');

-- a submitted operation takes the pair out of the candidates (in flight);
-- finishing it resets the baseline to the counters of that moment
SELECT (tms._record_evaluation(p.id, :r_catch, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL)).decision
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'pb-catch-up' AND t.server = 'pb_srv' AND t.table_name = 'orders';
SELECT (tms._record_evaluation(p.id, :r_catch, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL)).decision
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'pb-catch-up' AND t.server = 'pb_srv' AND t.table_name = 'orders';
SELECT * FROM pb_cands;
SELECT j.operation, j.task_kind, j.task_instance = 'job-' || j.id AS task, j.finished_at IS NULL AS in_flight
  FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id
 WHERE t.server = 'pb_srv';
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders', 'u-1', 'm-700', 700, 100, 0, NULL, '2026-06-06') > 0;
SELECT * FROM pb_cands;   -- still in flight: not a candidate
SELECT tms.finish_operation(j.id, 'succeeded') FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'pb_srv';
SELECT b.base_commits, b.pending_job IS NULL AS free, b.triggered
  FROM tms.rule_baselines b JOIN tms.tables t ON t.id = b.table_id
 WHERE b.rule_id = :r_catch AND t.table_name = 'orders';
SELECT * FROM pb_cands;
SELECT tms.finish_operation(j.id, 'succeeded') FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'pb_srv';   -- already finished
SELECT tms.finish_operation(0, 'exploded');
\echo :LAST_ERROR_SQLSTATE

-- a false result waits for the next commit
SELECT (tms._record_evaluation(p.id, :r_fwd, t.id, '{}', '{}', false, 'ok', NULL, NULL, NULL)).decision
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'pb-going-forward' AND t.server = 'pb_srv' AND t.table_name = 'orders';
SELECT * FROM pb_cands;
SELECT tms.observe_table('pb_srv', 'pb_sales', 'orders', 'u-1', 'm-701', 701, 1, 0, NULL, '2026-06-07') > 0;
SELECT * FROM pb_cands;

-- the log rows are self-contained
SELECT policy_name, operation, table_name, thresholds, condition, result, decision, job_id IS NOT NULL AS job
  FROM tms.evaluation_log WHERE server = 'pb_srv' ORDER BY id;

-- time-elapsed: due when the time passes
SELECT tms.create_policy('pb-time', 'pb-g', active => false) > 0;
SELECT tms.add_rule('pb-time', 'snapshot-expiry', 'local', '{"time-elapsed": 3600000}',
                    baseline_mode => 'going-forward') > 0;
SELECT count(*) AS due_now FROM tms.candidates WHERE policy = 'pb-time';
UPDATE tms.rule_baselines b SET since = since - interval '2 hours', due_at = due_at - interval '2 hours'
  FROM tms.maintenance_rules r JOIN tms.maintenance_policies p ON p.id = r.policy_id
 WHERE b.rule_id = r.id AND p.name = 'pb-time';
SELECT table_name, reason ~ '^time-elapsed \d+ ms >= 3600000$' AS by_time
  FROM tms.candidates WHERE policy = 'pb-time' ORDER BY table_name;

-- clean up
DROP VIEW pb_cands;
SELECT tms.drop_policy(n) FROM unnest(ARRAY['pb-catch-up', 'pb-going-forward', 'pb-time']) n;
SELECT tms.drop_object_group('pb-g');
SELECT count(*) >= 0 AS cleaned FROM (
  SELECT tms.cancel_task('maintenance', j.task_instance) FROM tms.table_maintenance_job j
    JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'pb_srv') c;
DELETE FROM tms.table_maintenance_job WHERE table_id IN (SELECT id FROM tms.tables WHERE server = 'pb_srv');
DELETE FROM tms.evaluation_log WHERE server = 'pb_srv';
DELETE FROM tms.tables WHERE server = 'pb_srv';
DROP SERVER pb_srv;
