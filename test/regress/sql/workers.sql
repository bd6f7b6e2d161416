-- The tms processes: settings, the tms.workers view, pg_stat_activity.
-- test/regress.conf sets tms.enabled = off, so the supervisor and the pool
-- are up but claim nothing ("disabled"); test_workers.py switches
-- tms.enabled at run time and sees them idle.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

-- Await a condition on tms.workers for at most 30 seconds.
CREATE FUNCTION pg_temp.await_workers(cond text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE ok boolean;
BEGIN
    FOR i IN 1..600 LOOP
        EXECUTE 'SELECT ' || cond || ' FROM tms.workers' INTO ok;
        IF ok THEN RETURN true; END IF;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN false;
END $$;

SELECT name, setting, unit, context, vartype
  FROM pg_settings
 WHERE name IN ('tms.database_name', 'tms.enabled', 'tms.max_workers', 'tms.naptime')
 ORDER BY name;

-- the prefix is reserved: a typo is an error, not a silent placeholder
SET tms.max_worker = 3;

-- one launcher, one supervisor for this database, tms.max_workers workers
SELECT pg_temp.await_workers($$count(*) FILTER (WHERE role = 'launcher' AND state = 'idle') = 1
    AND count(*) FILTER (WHERE state = 'disabled') = 5$$);
SELECT role, database, worker_number, state, current_task IS NULL AS no_task,
       started_at <= now() AS started
  FROM tms.workers;

-- each is visible in pg_stat_activity with what it is
SELECT a.backend_type, a.application_name, w.role
  FROM tms.workers w JOIN pg_stat_activity a USING (pid)
 ORDER BY 1, 2;

-- monitoring roles can read the view; other roles cannot
CREATE ROLE tms_test_monitor IN ROLE pg_monitor;
CREATE ROLE tms_test_nobody;
SET ROLE tms_test_monitor;
SELECT count(*) AS seen FROM tms.workers;
SET ROLE tms_test_nobody;
SELECT count(*) AS seen FROM tms.workers;
RESET ROLE;
DROP ROLE tms_test_monitor, tms_test_nobody;
