-- Budgets (doc/policies.md, "Budgets"; doc/engines.md, max_concurrent_jobs):
-- tms.set_budget and its errors, and what tms._start_job does with a job
-- over budget: it waits, its task due again when the budget frees, in the
-- order of its budget's queue, and tms.candidates and tms.maintenance_jobs
-- say why.  Jobs are those of an engine that no server names and no
-- tms.maintenance_handler takes ('spark'): started, they stay running
-- until tms.finish_operation.  The pool is off (test/regress.conf): each
-- start is a CALL tms.run_task.  Times move by backdating rows.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';

CREATE SERVER bu_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('bu-g', server => 'bu_srv', namespace_pattern => 'bu') > 0 AS g;
SELECT tms.create_policy('bu-p', 'bu-g') > 0 AS p;
SELECT count(tms.observe_table('bu_srv', 'bu', 't' || i, 'u-' || i, 'm-' || i, 5, 5, 0,
                               '2026-01-01', '2026-06-01')) AS observed
  FROM generate_series(1, 6) i;
SELECT tms.add_rule('bu-p', 'compaction', 'spark', '{"commits-added": 1}',
                    min_interval => '0') AS rule \gset

-- 1. the API and its errors; nothing is stored by a failing call
SELECT tms.set_budget('nope', jobs_per_window => 1);
SELECT tms.set_budget(NULL, jobs_per_window => 1);
SELECT tms.set_budget('bu-p', rule_id => 999999, jobs_per_window => 1);
SELECT tms.set_budget('bu-p', :rule, bytes_rewritten_per_hour => 0);
SELECT tms.set_budget('bu-p', :rule, jobs_per_window => 5, bytes_rewritten_per_hour => -1);
SELECT tms.set_budget('bu-p', :rule, jobs_per_window => -3);
CREATE ROLE bu_other;
GRANT USAGE ON FOREIGN SERVER bu_srv TO bu_other;
SET ROLE bu_other;
SELECT tms.set_budget('bu-p', jobs_per_window => 1);
SELECT count(*) AS budgets_seen FROM tms.budgets;
RESET ROLE;
SELECT count(*) AS none_stored FROM tms.maintenance_budgets;
SELECT tms.set_budget('bu-p', :rule, jobs_per_window => 2);
SELECT tms.set_budget('bu-p', bytes_rewritten_per_hour => 1000000);
SELECT policy, rule_id = :rule AS of_rule, bytes_rewritten_per_hour, jobs_per_window, set_by
  FROM tms.budgets ORDER BY rule_id NULLS LAST;
-- both NULL removes; setting again replaces
SELECT tms.set_budget('bu-p');
SELECT policy, rule_id = :rule AS of_rule, bytes_rewritten_per_hour, jobs_per_window
  FROM tms.budgets ORDER BY rule_id NULLS LAST;
-- a budget is kept by a dump (pg_extension_config_dump)
SELECT 'tms.maintenance_budgets'::regclass = ANY (extconfig) AS dumped
  FROM pg_extension WHERE extname = 'tms';

-- 2. jobs per window, no window: a rolling hour
CREATE FUNCTION bu_submit_all() RETURNS bigint LANGUAGE sql AS $$
    SELECT count((tms._record_evaluation(r.policy_id, r.id, b.table_id, '{}', '{}', true, 'ok',
                                         NULL, NULL, NULL)).job_id)
      FROM tms.maintenance_rules r JOIN tms.rule_baselines b ON b.rule_id = r.id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE t.server = 'bu_srv' AND t.table_name <> 't6' AND b.pending_job IS NULL
$$;
CREATE FUNCTION bu_start_all() RETURNS void LANGUAGE plpgsql AS $$
DECLARE j record;
BEGIN
    FOR j IN SELECT task_instance FROM tms.table_maintenance_job
              WHERE finished_at IS NULL AND state = 'pending' AND task_kind = 'maintenance'
                AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv')
              ORDER BY id
    LOOP
        PERFORM tms._start_job(substr(j.task_instance, 5)::bigint);
    END LOOP;
END $$;
CREATE VIEW bu_jobs AS
  SELECT j.table_name, j.state,
         regexp_replace(regexp_replace(j.reason, 'job \d+', 'job N'), 'rule \d+', 'rule R', 'g') AS reason,
         regexp_replace(regexp_replace(j.waiting_for, 'job \d+', 'job N'), 'rule \d+', 'rule R', 'g') AS waiting_for
    FROM tms.maintenance_jobs j WHERE j.server = 'bu_srv' AND j.finished_at IS NULL
   ORDER BY j.id;
SELECT tms.set_budget('bu-p', :rule, jobs_per_window => 2);
SELECT bu_submit_all() AS submitted;
-- t6 is a candidate (not submitted): it would wait behind them
SELECT table_name, waiting_for IS NULL AS within_budget FROM tms.candidates
 WHERE server = 'bu_srv' ORDER BY table_name;
-- two start, three wait, in the queue of the rule's budget
SELECT bu_start_all();
SELECT * FROM bu_jobs;
SELECT regexp_replace(waiting_for, 'rule \d+', 'rule R') AS t6_waits_for FROM tms.candidates
 WHERE server = 'bu_srv' AND table_name = 't6';
-- a deferred job's task is due when the oldest counted job is an hour old
SELECT j.id AS j3 FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id
 WHERE t.server = 'bu_srv' AND t.table_name = 't3' \gset
CALL tms.run_task('maintenance', 'job-' || :j3);
SELECT s.execution_time - (SELECT min(started_at) FROM tms.table_maintenance_job WHERE started_at IS NOT NULL) AS due_after
  FROM tms.scheduled_tasks s WHERE s.task_instance = 'job-' || :j3;
SELECT budget_wait = 'rule:' || :rule AS queued FROM tms.table_maintenance_job WHERE id = :j3;
-- finished jobs still count within their hour
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT bu_start_all();
SELECT * FROM bu_jobs;
-- an hour on: two more start, the oldest waiting first
UPDATE tms.table_maintenance_job SET started_at = started_at - interval '61 minutes'
 WHERE started_at IS NOT NULL;
SELECT bu_start_all();
SELECT * FROM bu_jobs;

-- 3. a window: jobs since the opening of its occurrence open now (since
-- midnight UTC); jobs of the day before do not count.  The four jobs
-- started so far are put at the opening itself, so that all of them count
-- whatever the hour the test runs at (within the hour after midnight, the
-- first two would otherwise be of the day before)
UPDATE tms.table_maintenance_job SET started_at = date_trunc('day', now())
 WHERE started_at IS NOT NULL;
SELECT tms.alter_rule(:rule, time_window =>
       '{"time-zone-id": "UTC", "periods": [{"cron": "0 0 * * *", "duration": 86400000}]}') AS v;
SELECT bu_start_all();
SELECT table_name, state, regexp_replace(reason, 'at \S+Z$', 'at T') AS reason FROM bu_jobs;
UPDATE tms.table_maintenance_job SET started_at = date_trunc('day', now()) - interval '1 minute'
 WHERE started_at IS NOT NULL;
SELECT bu_start_all();
SELECT * FROM bu_jobs;
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
-- its next chance: the window's next opening
SELECT bu_submit_all() AS submitted;
SELECT j.id AS j1 FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id
 WHERE t.server = 'bu_srv' AND t.table_name = 't1' AND j.finished_at IS NULL \gset
UPDATE tms.table_maintenance_job SET started_at = date_trunc('day', now())
 WHERE finished_at IS NOT NULL;
SELECT state, retry_at = date_trunc('day', now()) + interval '1 day' AS next_opening
  FROM tms._start_job(:j1);
SELECT tms.alter_rule(:rule, reset => '{time_window}') AS v;

-- 4. bytes rewritten per hour: jobs of the scope run one at a time, and
-- start while what ended in the trailing hour is under the budget
UPDATE tms.table_maintenance_job SET started_at = started_at - interval '1 day'
 WHERE finished_at IS NOT NULL;
SELECT tms.set_budget('bu-p', :rule, bytes_rewritten_per_hour => 1000);
SELECT bu_start_all();
SELECT * FROM bu_jobs;
UPDATE tms.table_maintenance_job SET bytes_rewritten = 700
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT bu_start_all();
SELECT * FROM bu_jobs;
UPDATE tms.table_maintenance_job SET bytes_rewritten = 700
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
-- 1400 of 1000 in the hour: due when the first 700 are an hour old
SELECT bu_start_all();
SELECT * FROM bu_jobs;
SELECT j.id AS jn FROM tms.table_maintenance_job j
 WHERE j.finished_at IS NULL ORDER BY j.id LIMIT 1 \gset
SELECT state, retry_at = (SELECT min(finished_at) + interval '1 hour' FROM tms.table_maintenance_job
                           WHERE finished_at > now() - interval '1 hour' AND bytes_rewritten > 0)
                AS when_700_age_out
  FROM tms._start_job(:jn);
UPDATE tms.table_maintenance_job SET finished_at = now() - interval '2 hours'
 WHERE id = (SELECT min(id) FROM tms.table_maintenance_job
              WHERE finished_at > now() - interval '1 hour' AND bytes_rewritten > 0);
SELECT bu_start_all();
SELECT * FROM bu_jobs;

-- 5. a policy's budget holds every rule of the policy
SELECT tms.set_budget('bu-p', :rule);
SELECT tms.set_budget('bu-p', jobs_per_window => 1);
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT bu_start_all();
SELECT * FROM bu_jobs;
-- removing it: waiting jobs are due again now
SELECT tms.set_budget('bu-p');
SELECT count(*) FILTER (WHERE s.execution_time <= now()) AS due_now, count(*) AS waiting
  FROM tms.scheduled_tasks s JOIN tms.table_maintenance_job j ON s.task_instance = j.task_instance
 WHERE j.finished_at IS NULL AND j.state = 'pending';
SELECT bu_start_all();
SELECT * FROM bu_jobs;
SELECT count(tms.finish_operation(id)) AS finished FROM tms.table_maintenance_job
 WHERE state = 'running' AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');

-- 6. an engine server's jobs at once (max_concurrent_jobs)
CREATE SERVER bu_eng FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'http://127.0.0.1:9', catalog 'lake', max_concurrent_jobs '0');
CREATE SERVER bu_eng FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'http://127.0.0.1:9', catalog 'lake', max_concurrent_jobs '01');
CREATE SERVER bu_eng FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'http://127.0.0.1:9', catalog 'lake', max_concurrent_jobs '2x');
CREATE SERVER bu_eng FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'http://127.0.0.1:9', catalog 'lake', max_concurrent_jobs '2');
ALTER SERVER bu_eng OPTIONS (SET max_concurrent_jobs '100001');
CREATE USER MAPPING FOR PUBLIC SERVER bu_eng OPTIONS (user 'svc', password 'pw');
SELECT tms.drop_rule(:rule);
SELECT tms.add_rule('bu-p', 'compaction', 'bu_eng', '{"commits-added": 1}',
                    min_interval => '0') AS erule \gset
SELECT tms._budget_wait(:erule, 'bu_eng') IS NULL AS within;
SELECT bu_submit_all() AS submitted;
SELECT bu_start_all();
SELECT * FROM bu_jobs;
SELECT tms._budget_wait(:erule, 'bu_eng') AS new_job_waits;
SELECT tms._budget_wait(NULL, 'bu_eng') AS any_job_waits;
-- one ends: the oldest waiting takes its place
SELECT tms.finish_operation(min(j.id)) FROM tms.table_maintenance_job j
 WHERE j.state = 'running' AND j.engine = 'bu_eng';
-- the youngest, asking first, keeps its place behind the two older ones
SELECT state, regexp_replace(reason, '"bu_eng".*', '"bu_eng" ...') AS reason
  FROM tms._start_job((SELECT max(id) FROM tms.table_maintenance_job
                        WHERE engine = 'bu_eng' AND finished_at IS NULL));
SELECT bu_start_all();
SELECT * FROM bu_jobs;
ALTER SERVER bu_eng OPTIONS (DROP max_concurrent_jobs);
SELECT tms._budget_wait(:erule, 'bu_eng') IS NULL AS within;
-- pg_monitor reads what they wait for; PUBLIC does not call the functions
CREATE ROLE bu_mon IN ROLE pg_monitor;
SET ROLE bu_mon;
SELECT count(waiting_for) AS waiting FROM tms.maintenance_jobs WHERE server = 'bu_srv';
RESET ROLE;
SELECT has_function_privilege('bu_other', 'tms._budget_wait(bigint, text)', 'EXECUTE') AS public_calls;

-- clean up
UPDATE tms.table_maintenance_job SET state = 'cancelled', finished_at = now()
 WHERE finished_at IS NULL AND table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
DELETE FROM tms.scheduled_tasks WHERE task_name = 'maintenance'
   AND task_instance IN (SELECT task_instance FROM tms.table_maintenance_job j
                          JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'bu_srv');
DELETE FROM tms.table_maintenance_job WHERE table_id IN (SELECT id FROM tms.tables WHERE server = 'bu_srv');
SELECT tms.drop_policy('bu-p');
SELECT tms.drop_object_group('bu-g');
SELECT count(*) AS budgets_left FROM tms.maintenance_budgets;
DELETE FROM tms.tables WHERE server = 'bu_srv';
DROP VIEW bu_jobs;
DROP FUNCTION bu_submit_all(), bu_start_all();
DROP SERVER bu_srv CASCADE;
DROP SERVER bu_eng CASCADE;
DROP ROLE bu_other;
DROP ROLE bu_mon;
