-- pg_cron and tms live in the same database and server, and pg_cron can
-- drive tms: a scheduled job that calls into tms is accepted and listed.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
CREATE EXTENSION IF NOT EXISTS pg_cron;

-- pg_cron's launcher may still be retrying its first connection (the test
-- database was created after the server started): await it, 30 s at most
DO $$
BEGIN
    FOR i IN 1..600 LOOP
        EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
                           WHERE backend_type = 'pg_cron launcher');
        PERFORM pg_sleep(0.05);
        PERFORM pg_stat_clear_snapshot();  -- activity is cached per transaction
    END LOOP;
END $$;
SELECT count(*) = 1 AS cron_launcher_runs
  FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher';
SELECT count(*) = 1 AS tms_launcher_runs
  FROM pg_stat_activity WHERE backend_type = 'tms launcher';

SELECT cron.schedule('tms-workers-probe', '* * * * *',
                     $$SELECT count(*) FROM tms.workers$$) > 0 AS scheduled;
SELECT jobname, schedule, command, database, active
  FROM cron.job WHERE jobname = 'tms-workers-probe';
SELECT cron.unschedule('tms-workers-probe');
SELECT count(*) FROM cron.job WHERE jobname = 'tms-workers-probe';

DROP EXTENSION pg_cron;
