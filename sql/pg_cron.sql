-- pg_cron and tms live in the same database and server, and pg_cron can
-- drive tms: a scheduled job that calls into tms is accepted and listed.
CREATE EXTENSION IF NOT EXISTS tms;
CREATE EXTENSION IF NOT EXISTS pg_cron;

SELECT count(*) = 1 AS both_launchers_run
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
