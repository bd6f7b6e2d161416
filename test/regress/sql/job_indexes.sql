-- The indexes of the job tables, used by the queries they are for: on a
-- history of many finished jobs and a few in flight, with statistics, the
-- planner answers from an index, not from a scan of the history:
--   the wait of a job for the earlier operations of its chain
--   (tms._start_job): table_maintenance_job_table_policy_idx;
--   the queue of the jobs waiting for a budget (tms._budget_check):
--   table_maintenance_job_budget_wait_idx;
--   the prune of the finished purge jobs (tms._prune_purge_jobs):
--   iceberg_cleanup_job_finished_idx.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

SELECT c.relname AS index, pg_get_indexdef(c.oid) ~ 'WHERE' AS partial
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid IN ('tms.table_maintenance_job'::regclass, 'tms.iceberg_cleanup_job'::regclass)
   AND c.relname IN ('table_maintenance_job_table_policy_idx',
                     'table_maintenance_job_budget_wait_idx',
                     'iceberg_cleanup_job_finished_idx')
 ORDER BY 1;

-- the ids the tests after this one expect stay as they were
SELECT (SELECT format('%s, %L', last_value, is_called) FROM tms.tables_id_seq) AS tables_seq,
       (SELECT format('%s, %L', last_value, is_called)
          FROM tms.table_maintenance_job_id_seq) AS jobs_seq,
       (SELECT format('%s, %L', last_value, is_called)
          FROM tms.iceberg_cleanup_job_id_seq) AS purges_seq \gset

-- 40 tables, 2000 finished jobs of 4 policies, a job in flight per table,
-- a few of them waiting for a budget
INSERT INTO tms.tables (server, namespace, table_name)
SELECT 'ix_srv', 'ix', 't' || n FROM generate_series(1, 40) n;
INSERT INTO tms.table_maintenance_job (table_id, policy_id, operation, engine, state,
                                       started_at, finished_at)
SELECT t.id, n % 4 + 1, 'compaction', 'local', 'succeeded',
       now() - make_interval(hours => n), now() - make_interval(hours => n)
  FROM tms.tables t, generate_series(1, 50) n WHERE t.server = 'ix_srv';
INSERT INTO tms.table_maintenance_job (table_id, policy_id, operation, engine, budget_wait)
SELECT t.id, 1, 'snapshot-expiry', 'local',
       CASE WHEN t.table_name IN ('t1', 't2', 't3') THEN 'policy:1' END
  FROM tms.tables t WHERE t.server = 'ix_srv';
-- 3000 finished purge jobs of the last 30 days, 3 older
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                     metadata_location, state, finished_at, requested_by)
SELECT 'ix_srv', 'ix', 'p' || n, 'file:///ix/p' || n, 'file:///ix/p' || n || '/m.json',
       CASE WHEN n % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
       now() - make_interval(days => CASE WHEN n <= 3 THEN 40 ELSE n % 29 END),
       current_user::regrole
  FROM generate_series(1, 3000) n;
ANALYZE tms.tables, tms.table_maintenance_job, tms.iceberg_cleanup_job;

SELECT id AS t5 FROM tms.tables WHERE server = 'ix_srv' AND table_name = 't5' \gset
-- a plan, without the table's id (which depends on the tests run before)
CREATE FUNCTION pg_temp.plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        RETURN NEXT regexp_replace(line, 'table_id = [0-9]+', 'table_id = <t5>');
    END LOOP;
END
$$;

-- the chain's wait
SELECT pg_temp.plan(format('SELECT o.id FROM tms.table_maintenance_job o'
                           ' WHERE o.table_id = %s AND o.policy_id = 1 AND o.id <> 0'
                           ' AND o.finished_at IS NULL', :t5));
SELECT count(*) AS in_flight FROM tms.table_maintenance_job o
 WHERE o.table_id = :t5 AND o.policy_id = 1 AND o.id <> 0 AND o.finished_at IS NULL;

-- a budget's queue
EXPLAIN (COSTS OFF)
SELECT count(*) FROM tms.table_maintenance_job o
 WHERE o.budget_wait = 'policy:1' AND o.finished_at IS NULL
   AND (coalesce(o.rank_at, o.created_at), o.id) < (now(), 9223372036854775807);
SELECT count(*) AS waiting FROM tms.table_maintenance_job o
 WHERE o.budget_wait = 'policy:1' AND o.finished_at IS NULL
   AND (coalesce(o.rank_at, o.created_at), o.id) < (now(), 9223372036854775807);

-- the finished purge jobs past tms.purge_retention
EXPLAIN (COSTS OFF)
SELECT 1 FROM tms.iceberg_cleanup_job
 WHERE state IN ('SUCCEEDED', 'FAILED') AND finished_at < now() - interval '30 days';
SELECT tms.prune_purge_jobs() AS pruned;

-- clean up
DELETE FROM tms.iceberg_cleanup_job WHERE server = 'ix_srv';
DELETE FROM tms.table_maintenance_job j USING tms.tables t
 WHERE t.id = j.table_id AND t.server = 'ix_srv';
DELETE FROM tms.tables WHERE server = 'ix_srv';
SELECT setval('tms.tables_id_seq', :tables_seq) > 0 AS restored,
       setval('tms.table_maintenance_job_id_seq', :jobs_seq) > 0 AS restored,
       setval('tms.iceberg_cleanup_job_id_seq', :purges_seq) > 0 AS restored;
