-- Scheduler core at the SQL level: task kinds, scheduling, the views, and
-- the session procedures.  The pool workers would race with this test for
-- due tasks, so test/regress.conf switches them off (tms.enabled = off);
-- the integration tests cover workers and sessions together.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

DO $$
BEGIN
    FOR i IN 1..600 LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM tms.workers
                               WHERE role = 'worker' AND state <> 'disabled');
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT count(*) AS workers_enabled FROM tms.workers
 WHERE role = 'worker' AND state <> 'disabled';

CREATE TABLE sched_runs (instance text, data jsonb, at timestamptz DEFAULT clock_timestamp());
CREATE PROCEDURE sched_record(instance text, data jsonb) LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sched_runs (instance, data) VALUES (instance, data);
    IF data ? 'fail' THEN
        RAISE EXCEPTION 'handler asked to fail: %', data->>'fail'
            USING DETAIL = 'instance ' || instance;
    END IF;
END $$;
CREATE FUNCTION sched_not_a_procedure(text, jsonb) RETURNS void LANGUAGE sql AS '';
CREATE PROCEDURE sched_wrong_args(text) LANGUAGE sql AS '';

-- the built-in kinds, with their default caps
SELECT kind, max_concurrency, builtin FROM tms.task_kinds ORDER BY kind;

-- registering a kind: validated before anything is stored
SELECT tms.register_task_kind('Bad Kind', 'sched_record(text,jsonb)', 1);
SELECT tms.register_task_kind('rec', 'sched_not_a_procedure(text,jsonb)', 1);
SELECT tms.register_task_kind('rec', 'sched_wrong_args(text)', 1);
SELECT tms.register_task_kind('rec', 'sched_record(text,jsonb)', 0);
SELECT tms.register_task_kind('cron-job', 'sched_record(text,jsonb)', 1);
CREATE ROLE sched_nobody;
GRANT EXECUTE ON FUNCTION tms.register_task_kind(text, regprocedure, integer) TO sched_nobody;
SET ROLE sched_nobody;
SELECT tms.register_task_kind('rec', 'sched_record(text,jsonb)', 1);
RESET ROLE;
DROP OWNED BY sched_nobody;
DROP ROLE sched_nobody;
SELECT count(*) FROM tms.task_kinds WHERE kind = 'rec';

SELECT tms.register_task_kind('rec', 'sched_record(text,jsonb)', 3);
SELECT kind, handler, max_concurrency, builtin FROM tms.task_kinds WHERE kind = 'rec';
SELECT count(*) AS slots FROM tms.task_slots WHERE kind = 'rec';
-- lowering the cap drops the free slots above it
SELECT tms.register_task_kind('rec', 'sched_record(text,jsonb)', 2);
SELECT array_agg(slot ORDER BY slot) AS slots FROM tms.task_slots WHERE kind = 'rec';

-- scheduling
SELECT tms.schedule_task('nope', 'x');
SELECT tms.schedule_task('rec', NULL);
SELECT tms.schedule_task('rec', 'later', '{"n": 1}', now() + interval '1 day');
SELECT tms.schedule_task('rec', 'soon', '{"n": 2}', priority => 5);
SELECT tms.schedule_task('rec', 'fails', '{"fail": "on purpose"}');
SELECT kind, instance, state, priority, data FROM tms.tasks ORDER BY instance;
-- rescheduling replaces data and due time
SELECT tms.schedule_task('rec', 'later', '{"n": 3}', now() + interval '2 days');
SELECT data, due_at > now() + interval '1 day' AS pushed FROM tms.tasks WHERE instance = 'later';

-- the session loop refuses to run inside a transaction block
BEGIN;
CALL tms.run_pending();
ROLLBACK;

-- run_pending runs what is due, highest priority first; 'later' stays
CALL tms.run_pending(max_tasks => 10, kinds => ARRAY['rec']);
SELECT instance, data FROM sched_runs ORDER BY at;
SELECT instance, state, consecutive_failures, last_error, picked_by IS NULL AS unpicked,
       due_at > now() AS backed_off
  FROM tms.tasks ORDER BY instance;
SELECT count(*) AS held_slots FROM tms.task_slots WHERE task_instance IS NOT NULL;

-- run_task runs a named task now, due or not; a handler error reaches the caller
TRUNCATE sched_runs;
CALL tms.run_task('rec', 'later');
SELECT instance, data FROM sched_runs;
SELECT count(*) FROM tms.tasks WHERE instance = 'later';
CALL tms.run_task('rec', 'fails');
SELECT consecutive_failures FROM tms.tasks WHERE instance = 'fails';
CALL tms.run_task('rec', 'missing');

-- two executions of one task never run at once: a live lease refuses a
-- second executor, which changes nothing (HUDI-7503)
SELECT tms.schedule_task('rec', 'busy', '{}', now() + interval '1 day');
UPDATE tms.scheduled_tasks
   SET picked = true, picked_by = 'another executor', last_heartbeat = now(),
       version = version + 1
 WHERE task_instance = 'busy';
TRUNCATE sched_runs;
CALL tms.run_task('rec', 'busy');
SELECT count(*) AS runs FROM sched_runs;
SELECT state, picked_by FROM tms.tasks WHERE instance = 'busy';
SELECT tms.cancel_task('rec', 'busy');
-- a dead lease (no heartbeat for heartbeat_interval * missed_heartbeats_limit)
-- is taken over
UPDATE tms.scheduled_tasks SET last_heartbeat = now() - interval '1 hour'
 WHERE task_instance = 'busy';
CALL tms.run_task('rec', 'busy');
SELECT count(*) AS runs FROM sched_runs;

-- a handler that reschedules its own task keeps it, for the new due time
CREATE PROCEDURE sched_again(instance text, data jsonb) LANGUAGE sql AS $$
    INSERT INTO sched_runs (instance, data) VALUES (instance, data);
    SELECT tms.schedule_task('again', instance, '{"round": 2}', now() + interval '1 hour');
$$;
SELECT tms.register_task_kind('again', 'sched_again(text,jsonb)', 1);
SELECT tms.schedule_task('again', 'a1', '{"round": 1}', now() + interval '1 day');
CALL tms.run_task('again', 'a1');
SELECT state, data, due_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes' AS in_an_hour,
       last_success IS NOT NULL AS succeeded, picked_by
  FROM tms.tasks WHERE kind = 'again';
SELECT count(*) AS free_slots FROM tms.task_slots WHERE kind = 'again' AND task_instance IS NULL;
SELECT tms.unregister_task_kind('again');
DROP PROCEDURE sched_again;

-- cancelling
SELECT tms.cancel_task('rec', 'fails');
SELECT tms.cancel_task('rec', 'fails');

-- unregistering drops waiting tasks
SELECT tms.schedule_task('rec', 'orphan', NULL, now() + interval '1 day');
SELECT tms.unregister_task_kind('rec');
SELECT tms.unregister_task_kind('cron-job');
SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'rec';

-- the views are for monitoring roles
SELECT has_table_privilege('pg_monitor', 'tms.tasks', 'SELECT') AS tasks,
       has_table_privilege('pg_monitor', 'tms.task_counts', 'SELECT') AS counts;

DROP TABLE sched_runs;
DROP PROCEDURE sched_record, sched_wrong_args;
DROP FUNCTION sched_not_a_procedure;
