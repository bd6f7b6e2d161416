-- Retention of histories: tms.table_snapshot_metrics loses its rows older
-- than tms.snapshot_metrics_retention (90 days) when a job ends
-- (tms._job_ended); tms.prune_purge_jobs() deletes the finished purge jobs
-- older than tms.purge_retention (30 days), never one in flight.  Ages are
-- made by backdating the rows; recent rows stay.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

SHOW tms.snapshot_metrics_retention;
SHOW tms.purge_retention;

-- 1. snapshot metrics, pruned when a job ends
INSERT INTO tms.tables (server, namespace, table_name) VALUES ('rt_srv', 'rt', 't')
    RETURNING id AS tbl \gset
INSERT INTO tms.table_maintenance_job (table_id, requested_by, operation, engine)
    VALUES (:tbl, current_user::regrole, 'snapshot-expiry', 'spark')
    RETURNING id AS job \gset
INSERT INTO tms.table_snapshot_metrics (job_id, table_id, server, namespace, table_name, phase,
                                        recorded_at, metrics)
SELECT -n, :tbl, 'rt_srv', 'rt', 't', 'before', now() - make_interval(days => d), '{}'
  FROM (VALUES (1, 365), (2, 91), (3, 89), (4, 1), (5, 0)) v(n, d);
SELECT -job_id AS n, extract(day FROM now() - recorded_at)::int AS age_days
  FROM tms.table_snapshot_metrics WHERE server = 'rt_srv' ORDER BY 1;
SELECT tms.finish_operation(:job) AS finished;
-- the rows of 365 and 91 days went; those within the 90 days stay
SELECT -job_id AS n, extract(day FROM now() - recorded_at)::int AS age_days
  FROM tms.table_snapshot_metrics WHERE server = 'rt_srv' ORDER BY 1;

-- 2. finished purge jobs
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                     metadata_location, state, created_at, started_at,
                                     finished_at, requested_by)
SELECT 'rt_srv', 'rt', name, 'file:///rt/' || name, 'file:///rt/' || name || '/m.json',
       state, now() - interval '400 days', now() - interval '400 days',
       now() - make_interval(days => d), current_user::regrole
  FROM (VALUES ('old-ok', 'SUCCEEDED', 31), ('old-failed', 'FAILED', 45),
               ('recent-ok', 'SUCCEEDED', 29), ('recent-failed', 'FAILED', 1),
               ('pending', 'PENDING', NULL), ('running', 'RUNNING', NULL)) v(name, state, d);
SELECT tms.prune_purge_jobs() AS pruned;
SELECT table_name, state FROM tms.iceberg_cleanup_job WHERE server = 'rt_srv' ORDER BY id;
-- nothing more is old enough
SELECT tms.prune_purge_jobs() AS pruned;

-- clean up
DELETE FROM tms.iceberg_cleanup_job WHERE server = 'rt_srv';
DELETE FROM tms.table_snapshot_metrics WHERE server = 'rt_srv';
DELETE FROM tms.table_maintenance_job WHERE table_id = :tbl;
DELETE FROM tms.tables WHERE id = :tbl;
