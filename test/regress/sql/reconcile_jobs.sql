-- No maintenance job waits forever: the maintenance kind's sweep, run after
-- the prune of the run history (CALL tms.run_pending and the supervisors),
-- ends "failed" a job whose task is gone and a job handed to
-- tms.maintenance_handler that did not finish within
-- tms.handler_job_timeout; its (table, rule) is free again.  Times are
-- moved by backdating the rows.  The supervisor may sweep too: only the
-- jobs' ends are shown, never a count of what one call ended.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

SHOW tms.handler_job_timeout;

CREATE SERVER jr_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('jr-g', server => 'jr_srv', namespace_pattern => 'jr') > 0 AS g;
SELECT tms.create_policy('jr-p', 'jr-g') > 0 AS p;
SELECT tms.observe_table('jr_srv', 'jr', 't', 'u-1', 'm-5', 5, 5, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed;
SELECT tms.add_rule('jr-p', 'compaction', 'spark', '{"commits-added": 1}',
                    min_interval => '0') AS rule \gset
SELECT id AS tbl FROM tms.tables WHERE server = 'jr_srv' \gset

CREATE FUNCTION jr_submit() RETURNS bigint LANGUAGE sql AS $$
    SELECT (tms._record_evaluation(r.policy_id, r.id, b.table_id, '{}', '{}', true, 'ok',
                                   NULL, NULL, NULL)).job_id
      FROM tms.maintenance_rules r JOIN tms.rule_baselines b ON b.rule_id = r.id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE t.server = 'jr_srv'
$$;
CREATE VIEW jr_jobs AS
  SELECT j.id - min(j.id) OVER () AS n, j.state,
         regexp_replace(regexp_replace(j.last_error, 'job-\d+', 'job-N'),
                        ' at .* and ', ' at T and ') AS last_error,
         b.pending_job IS NOT DISTINCT FROM j.id AS gate_closed
    FROM tms.table_maintenance_job j
    JOIN tms.tables t ON t.id = j.table_id AND t.server = 'jr_srv'
    LEFT JOIN tms.rule_baselines b ON b.rule_id = j.rule_id AND b.table_id = j.table_id
   ORDER BY j.id;

-- 1. a job whose task is gone
SELECT jr_submit() AS job1 \gset
-- a job with its task is left alone, however old
UPDATE tms.table_maintenance_job SET created_at = now() - interval '2 hours' WHERE id = :job1;
SELECT tms._reconcile_jobs(interval '1 hour') AS ended;
-- a young job whose task is not there (yet) is left alone
DELETE FROM tms.scheduled_tasks WHERE task_name = 'maintenance' AND task_instance = 'job-' || :job1;
UPDATE tms.table_maintenance_job SET created_at = now() WHERE id = :job1;
SELECT tms._reconcile_jobs(interval '1 hour') AS ended;
SELECT * FROM jr_jobs;
-- a minute later it ends failed, with the reason, through the scheduler's
-- own sweep; the gate reopens and the rule may fire again
UPDATE tms.table_maintenance_job SET created_at = now() - interval '2 minutes' WHERE id = :job1;
CALL tms.run_pending(0);
SELECT * FROM jr_jobs;
SELECT jr_submit() AS job2 \gset

-- 2. a job handed to tms.maintenance_handler (none is set: it stays
-- running until tms.finish_operation)
SELECT jr_submit() IS NULL AS already_pending;
CALL tms.run_task('maintenance', 'job-' || :job2);
SELECT count(*) AS its_task FROM tms.scheduled_tasks WHERE task_instance = 'job-' || :job2;
SELECT * FROM jr_jobs;
-- within the timeout, and with the timeout off, it stays
UPDATE tms.table_maintenance_job SET started_at = now() - interval '59 minutes'
 WHERE id = :job2;
SELECT tms._reconcile_jobs(interval '1 hour') AS ended;
SELECT tms._reconcile_jobs(interval '0') AS ended;
SELECT tms._reconcile_jobs(NULL) AS ended;
SELECT * FROM jr_jobs;
-- past it, it ends failed; its executor's late finish changes nothing
UPDATE tms.table_maintenance_job SET started_at = now() - interval '2 hours'
 WHERE id = :job2;
SELECT tms._reconcile_jobs(interval '1 hour') >= 0 AS swept;
SELECT * FROM jr_jobs;
SELECT tms.finish_operation(:job2) AS late_finish;
SELECT state, count(*) FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id
 WHERE t.server = 'jr_srv' GROUP BY state ORDER BY state;
SELECT jr_submit() IS NOT NULL AS fired_again;

-- the setting: seconds, 0 turns it off, never negative; reload
SELECT unit, min_val, boot_val, context FROM pg_settings WHERE name = 'tms.handler_job_timeout';

-- clean up
DELETE FROM tms.scheduled_tasks WHERE task_name = 'maintenance'
   AND task_instance IN (SELECT task_instance FROM tms.table_maintenance_job WHERE table_id = :tbl);
DELETE FROM tms.table_maintenance_job WHERE table_id = :tbl;
SELECT tms.drop_policy('jr-p');
SELECT tms.drop_object_group('jr-g');
DELETE FROM tms.tables WHERE id = :tbl;
DROP VIEW jr_jobs;
DROP FUNCTION jr_submit();
DROP SERVER jr_srv CASCADE;
