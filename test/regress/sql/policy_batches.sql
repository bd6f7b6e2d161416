-- Batched snapshot expiry (doc/policies.md, "Batches"): a snapshot-expiry
-- rule on engine local with option batch-size N puts the jobs of its
-- fired candidates into batches of up to N tables, each run by one task
-- "batch-<id>"; every table keeps its own job row (its gate, its result).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER bt_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('bt-g', server => 'bt_srv', namespace_pattern => 'bt') > 0 AS g;
SELECT tms.create_policy('bt-p', 'bt-g') > 0 AS p;
SELECT tms.observe_table('bt_srv', 'bt', 't' || i, 'u-' || i, 'm-5', 5, 5, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed
  FROM generate_series(1, 5) i;

-- the option is checked: an integer 1 .. 1000, snapshot-expiry only,
-- engine local only
SELECT tms.add_rule('bt-p', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                    options => '{"batch-size": 0}');
SELECT tms.add_rule('bt-p', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                    options => '{"batch-size": "3"}');
SELECT tms.add_rule('bt-p', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                    options => '{"batch-size": 1001}');
SELECT tms.add_rule('bt-p', 'orphan-cleanup', 'local', '{"commits-added": 1}',
                    options => '{"batch-size": 3}');
SELECT tms.add_rule('bt-p', 'snapshot-expiry', 'spark', '{"commits-added": 1}',
                    options => '{"batch-size": 3}');
SELECT tms.add_rule('bt-p', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                    options => '{"retain-last": 1, "batch-size": 3}',
                    min_interval => '0') AS rule \gset

CREATE FUNCTION bt_submit(tbl text) RETURNS text LANGUAGE sql AS $$
    SELECT (tms._record_evaluation(r.policy_id, r.id, b.table_id, '{}', '{}', true, 'ok',
                                   NULL, NULL, NULL)).decision
      FROM tms.maintenance_rules r JOIN tms.rule_baselines b ON b.rule_id = r.id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE t.server = 'bt_srv' AND t.table_name = tbl
$$;
-- the jobs, their batches numbered 1, 2, ... in order, and their tasks
CREATE VIEW bt_jobs AS
  SELECT j.table_name, j.state, dense_rank() OVER (ORDER BY j.batch_id) AS batch,
         j.batch_id IS NULL AS own_task,
         (SELECT count(*) FROM tms.table_maintenance_job o
           WHERE o.batch_id = j.batch_id AND o.id <= j.id) AS place,
         EXISTS (SELECT 1 FROM tms.scheduled_tasks st JOIN tms.table_maintenance_job o
                     ON st.task_name = o.task_kind AND st.task_instance = o.task_instance
                  WHERE o.id = j.id) AS has_task,
         j.attempts, j.last_error IS NOT NULL AS has_error
    FROM tms.maintenance_jobs j
   WHERE j.server = 'bt_srv'
   ORDER BY j.id;

-- five tables fire: two batches, of three and two tables, two tasks
SELECT t, bt_submit(t) FROM unnest(ARRAY['t1', 't2', 't3', 't4', 't5']) t;
SELECT * FROM bt_jobs;
SELECT count(*) AS batch_tasks FROM tms.scheduled_tasks
 WHERE task_name = 'maintenance' AND task_instance LIKE 'batch-%';
-- a batch's task waits 5 seconds after its first job for the others of
-- the evaluation (a job joining moves it no earlier)
SELECT st.execution_time - j.created_at AS due_after
  FROM tms.scheduled_tasks st JOIN tms.table_maintenance_job j ON j.id = j.batch_id
 WHERE st.task_name = 'maintenance' AND st.task_instance = 'batch-' || j.batch_id
   AND j.rule_id = :rule ORDER BY j.id;
-- the task of a batch is named after its first job
SELECT bool_and(j.task_instance = 'batch-' || j.batch_id) AS named,
       bool_and(st.task_data = jsonb_build_object('batch_id', j.batch_id)) AS data
  FROM tms.table_maintenance_job j
  JOIN tms.scheduled_tasks st ON st.task_name = j.task_kind AND st.task_instance = j.task_instance
 WHERE j.rule_id = :rule;

-- a table in a batch is in flight: its rule does not fire on it again
SELECT bt_submit('t2') AS t2_again;

-- a cancelled job leaves its batch's task to the others; the batch's
-- last job cancelled takes the task with it
SELECT tms.cancel_operation(id) AS cancelled FROM tms.maintenance_jobs
 WHERE server = 'bt_srv' AND table_name = 't4';
SELECT * FROM bt_jobs;
SELECT tms.cancel_operation(id) AS cancelled FROM tms.maintenance_jobs
 WHERE server = 'bt_srv' AND table_name = 't5';
SELECT * FROM bt_jobs;

-- the batch's one run runs each of its tables: the policy's owner has
-- no user mapping, so each job fails on its own, none stops the others;
-- the run's row of the history names the batch
SELECT min(batch_id) AS b1 FROM tms.table_maintenance_job WHERE rule_id = :rule \gset
CALL tms.run_task('maintenance', 'batch-' || :b1);
SELECT * FROM bt_jobs;
SELECT DISTINCT state, last_error FROM tms.table_maintenance_job WHERE batch_id = :b1;
SELECT kind, instance ~ '^batch-\d+$' AS batch, job_id = :b1 AS names_batch, succeeded
  FROM tms.task_history WHERE kind = 'maintenance' AND instance = 'batch-' || :b1;

-- t4 and t5 ended: they fire again and open a new batch (the first
-- batch's jobs have started: it takes no more tables)
SELECT t, bt_submit(t) FROM unnest(ARRAY['t4', 't5']) t;
SELECT * FROM bt_jobs;
-- a batch whose task an executor claimed is closed too: t4's job is
-- cancelled (the task stays for t5), the task claimed, and t4 fires again
SELECT tms.cancel_operation(id) AS cancelled FROM tms.maintenance_jobs
 WHERE server = 'bt_srv' AND table_name = 't4' AND finished_at IS NULL;
BEGIN;
UPDATE tms.scheduled_tasks SET picked = true, picked_by = 'bt', last_heartbeat = now()
 WHERE task_name = 'maintenance'
   AND task_instance = (SELECT 'batch-' || max(batch_id) FROM tms.table_maintenance_job
                         WHERE rule_id = :rule);
SELECT bt_submit('t4') AS t4_again;
SELECT * FROM bt_jobs;
ROLLBACK;

-- batch-size 1 (and a rule without it) runs a job per task, as before
SELECT tms.cancel_operation(id) AS cancelled FROM tms.maintenance_jobs
 WHERE server = 'bt_srv' AND table_name = 't5' AND finished_at IS NULL;
SELECT tms.alter_rule(:rule, options => '{"retain-last": 1, "batch-size": -2}');
SELECT tms.alter_rule(:rule, options => '{"retain-last": 1, "batch-size": 1}') AS version;
SELECT bt_submit('t5') AS t5_again;
SELECT table_name, own_task, has_task FROM bt_jobs WHERE table_name = 't5';
SELECT task_instance ~ '^job-\d+$' AS own FROM tms.table_maintenance_job
 WHERE rule_id = :rule AND table_id = (SELECT id FROM tms.tables
                                        WHERE server = 'bt_srv' AND table_name = 't5')
   AND finished_at IS NULL;

-- tms.job_stats shows a batch's task under its policy and rule
SELECT kind, policy, rule_id = :rule AS its_rule, job_status FROM tms.job_stats
 WHERE policy = 'bt-p' AND kind = 'maintenance';

-- nothing of this test is left for the others
DELETE FROM tms.scheduled_tasks s USING tms.table_maintenance_job j
 WHERE s.task_name = 'maintenance' AND s.task_instance = j.task_instance AND j.rule_id = :rule;
SELECT tms.drop_policy('bt-p');
SELECT tms.drop_object_group('bt-g');
DELETE FROM tms.table_maintenance_job WHERE rule_id = :rule;
DELETE FROM tms.task_history WHERE rule_id = :rule;
DELETE FROM tms.evaluation_log WHERE server = 'bt_srv';
DELETE FROM tms.tables WHERE server = 'bt_srv';
DROP SERVER bt_srv CASCADE;
