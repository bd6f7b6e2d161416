-- Monitoring (doc/operations.md, "Monitoring"): the tms.stat_* views and
-- their columns, who may read them, tms.stat_reset, the run history of
-- tasks run in this session (tms.job_history, job_errors, job_stats),
-- history pruning that keeps the totals, and retries spread by jitter.
-- The workers claim nothing here (tms.enabled = off, test/regress.conf).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

-- The views and their columns: the interface monitoring builds on.
SELECT c.relname AS view, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
 WHERE n.nspname = 'tms' AND c.relkind = 'v'
   AND (c.relname LIKE 'stat\_%' OR c.relname LIKE 'job\_%')
 ORDER BY c.relname, a.attnum;

-- Two kinds run by SQL procedures, one of them always failing.
CREATE PROCEDURE mon_ok(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$;
CREATE PROCEDURE mon_bad(i text, d jsonb) LANGUAGE plpgsql
    AS $$ BEGIN PERFORM 1 / (length(i) - length(i)); END $$;
SELECT tms.register_task_kind('mon-ok', 'mon_ok(text, jsonb)', 4);
SELECT tms.register_task_kind('mon-bad', 'mon_bad(text, jsonb)', 4);
SELECT tms.schedule_task('mon-ok', 'a'), tms.schedule_task('mon-ok', 'b'),
       tms.schedule_task('mon-bad', 'x');

CALL tms.run_task('mon-ok', 'a');
CALL tms.run_task('mon-ok', 'b');
CALL tms.run_task('mon-bad', 'x');
CALL tms.run_task('mon-bad', 'x');

-- the counters of the two kinds
SELECT kind, claimed, succeeded, failed, lease_lost, run_seconds > 0 AS ran,
       stats_reset <= now() AS since
  FROM tms.stat_tasks WHERE kind LIKE 'mon-%' ORDER BY kind;

-- the history: one row per run, the failures with their SQLSTATE
SELECT kind, instance, attempt, succeeded, sqlerrcode, err_message,
       finish_time >= start_time AS ordered, pid IS NOT NULL AS has_pid
  FROM tms.job_history WHERE kind LIKE 'mon-%' ORDER BY id;
SELECT kind, instance, attempt, sqlerrcode, err_message
  FROM tms.job_errors WHERE kind LIKE 'mon-%' ORDER BY id;
SELECT kind, policy, rule_id, last_run_status, job_status, next_start > now() AS next_later,
       total_runs, total_successes, total_failures, last_sqlerrcode, last_error,
       last_run_duration >= '0' AS has_duration, average_duration >= '0' AS has_average
  FROM tms.job_stats WHERE kind LIKE 'mon-%' ORDER BY kind;

-- pruning the history (its retention here: none) keeps the totals
SELECT tms._prune_task_history('0 s', 100000) >= 4 AS pruned;
SELECT count(*) FROM tms.job_history WHERE kind LIKE 'mon-%';
SELECT kind, last_run_status, total_runs, total_successes, total_failures, last_sqlerrcode
  FROM tms.job_stats WHERE kind LIKE 'mon-%' ORDER BY kind;
-- a failure after the pruning is the last error again
CALL tms.run_task('mon-bad', 'x');
SELECT kind, total_runs, total_failures, last_sqlerrcode
  FROM tms.job_stats WHERE kind = 'mon-bad';

-- 100 tasks that fail at once come back spread over half their backoff
-- (tms.retry_delay 5 s: between 2.5 s and 5 s after the failure), not as
-- a herd
SELECT count(*) AS scheduled
  FROM (SELECT tms.schedule_task('mon-bad', 'herd-' || g) FROM generate_series(1, 100) g) s;
SET client_min_messages = error;
CALL tms.run_pending(100, '{mon-bad}');
RESET client_min_messages;
SELECT count(*) AS failed,
       bool_and(execution_time - last_failure BETWEEN interval '2.5 s' AND interval '5 s')
           AS within_backoff,
       count(DISTINCT width_bucket(extract(epoch FROM execution_time - last_failure),
                                   2.5, 5.0, 5)) AS fifths_used,
       stddev(extract(epoch FROM execution_time - last_failure)) > 0.5 AS spread
  FROM tms.scheduled_tasks
 WHERE task_name = 'mon-bad' AND task_instance LIKE 'herd-%';

-- The views are pg_monitor's; PUBLIC reads none, nor resets anything.
CREATE ROLE tms_mon_reader IN ROLE pg_monitor;
CREATE ROLE tms_mon_nobody;
SET ROLE tms_mon_reader;
SELECT count(*) > 0 AS rows FROM tms.stat_tasks;
SELECT count(*) >= 0 AS readable FROM tms.stat_maintenance;
SELECT count(*) >= 0 AS readable FROM tms.stat_purges;
SELECT count(*) > 0 AS rows FROM tms.stat_requests;
SELECT count(*) > 0 AS rows FROM tms.stat_request_errors;
SELECT count(*) > 0 AS rows FROM tms.stat_task_queue;
SELECT count(*) >= 0 AS readable FROM tms.stat_stuck_tasks;
SELECT count(*) >= 0 AS readable FROM tms.stat_maintenance_queue;
SELECT count(*) >= 0 AS readable FROM tms.stat_purge_queue;
SELECT count(*) > 0 AS rows FROM tms.job_history;
SELECT count(*) > 0 AS rows FROM tms.job_errors;
SELECT count(*) > 0 AS rows FROM tms.job_stats;
SELECT tms.stat_reset();
RESET ROLE;
SET ROLE tms_mon_nobody;
SELECT * FROM tms.stat_tasks;
SELECT * FROM tms.stat_requests;
SELECT * FROM tms.job_errors;
SELECT * FROM tms._stat_counters('tasks');
SELECT tms.stat_reset();
RESET ROLE;

-- the queue of the herd
SELECT kind, running, due, scheduled, failing, oldest_due_seconds, stuck
  FROM tms.stat_task_queue WHERE kind LIKE 'mon-%' ORDER BY kind;

-- tms.stat_reset: one area, then everything; an unknown area is refused
SELECT now() AS before_reset \gset
SELECT tms.stat_reset('tasks');
SELECT kind, claimed, succeeded, failed, stats_reset >= :'before_reset' AS reset
  FROM tms.stat_tasks WHERE kind LIKE 'mon-%' ORDER BY kind;
SELECT tms.stat_reset('requests');
SELECT bool_and(requests = 0 AND stats_reset >= :'before_reset') AS zero
  FROM tms.stat_requests WHERE database IN (current_database(), '(other)');
SELECT tms.stat_reset();
SELECT tms.stat_reset('everything');

DROP ROLE tms_mon_reader;
DROP ROLE tms_mon_nobody;
DELETE FROM tms.scheduled_tasks WHERE task_name LIKE 'mon-%';
SELECT tms.unregister_task_kind('mon-ok'), tms.unregister_task_kind('mon-bad');
DROP PROCEDURE mon_ok(text, jsonb);
DROP PROCEDURE mon_bad(text, jsonb);
