-- Monitoring (doc/operations.md, "Monitoring"): the cumulative statistics
-- kept in shared memory (src/observe/stats.c) and views of the current
-- state of the work, all readable by pg_monitor.
--
-- The tms.stat_* views are built for prometheus-postgres-exporter: one
-- row per label set, counters that only grow (until tms.stat_reset()) and
-- are never NULL, and a stats_reset column saying since when a row
-- counts.  Their names and columns are an interface: change them only
-- with a new version's upgrade script and the docs.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- ---------------------------------------------------------------------
-- Cumulative statistics
-- ---------------------------------------------------------------------

-- The rows of one area of every database (counters in the order of
-- src/observe/stats.h); the views below unpack them.
CREATE OR REPLACE FUNCTION tms._stat_counters(area text)
RETURNS TABLE (dbid oid, label1 text, label2 text, label3 text,
               counters bigint[], stats_reset timestamptz)
LANGUAGE c VOLATILE STRICT
AS 'MODULE_PATHNAME', 'tms_stat_counters_sql';

-- Count a maintenance job that ended (tms._job_ended calls it).
CREATE OR REPLACE FUNCTION tms._stat_count_job(operation text, engine text, outcome text,
                                    duration_us bigint, files bigint, bytes bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_stat_count_job_sql';

-- Zero the counters of an area (tasks, maintenance, purges, requests;
-- NULL: all of them) of this database.
CREATE OR REPLACE FUNCTION tms.stat_reset(area text DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_stat_reset_sql';

COMMENT ON FUNCTION tms.stat_reset(text) IS
    'zero the cumulative statistics of this database: one area (tasks, maintenance, purges, requests) or all';

-- The database of a row; "(other)" for an area's overflow row.
CREATE OR REPLACE FUNCTION tms._stat_database(dbid oid)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN dbid = 0 THEN '(other)'
                ELSE (SELECT d.datname::text FROM pg_database d WHERE d.oid = dbid) END
$$;

CREATE OR REPLACE VIEW tms.stat_tasks AS
    SELECT db AS database,
           s.label1 AS kind,
           s.counters[1] AS claimed,
           s.counters[2] AS succeeded,
           s.counters[3] AS failed,
           s.counters[4] AS lease_lost,
           s.counters[5] / 1e6::float8 AS run_seconds,
           s.stats_reset
      FROM tms._stat_counters('tasks') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_tasks IS
    'tasks claimed, succeeded, failed and whose lease was lost, per database and kind, since stats_reset';

CREATE OR REPLACE VIEW tms.stat_maintenance AS
    SELECT db AS database,
           s.label1 AS operation,
           s.label2 AS engine,
           s.label3 AS outcome,
           s.counters[1] AS jobs,
           s.counters[2] / 1e6::float8 AS duration_seconds,
           s.counters[3] AS files_deleted,
           s.counters[4] AS bytes_deleted,
           s.stats_reset
      FROM tms._stat_counters('maintenance') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_maintenance IS
    'maintenance jobs ended per database, operation, engine and outcome, with their time and what they deleted';

CREATE OR REPLACE VIEW tms.stat_purges AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS outcome,
           s.counters[1] AS jobs,
           s.counters[2] / 1e6::float8 AS duration_seconds,
           s.counters[3] AS files_deleted,
           s.counters[4] AS bytes_freed,
           s.counters[5] AS files_skipped,
           s.counters[6] AS delete_requests,
           s.stats_reset
      FROM tms._stat_counters('purges') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_purges IS
    'purge jobs ended per database, server and outcome, with their time and what they deleted';

-- latency_seconds, _bucket, _sum and _count are a histogram as
-- prometheus-postgres-exporter's HISTOGRAM usage reads it: the upper
-- bounds (+Inf implied), cumulative counts, sum and count.
CREATE OR REPLACE VIEW tms.stat_requests AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS service,
           s.counters[1] AS requests,
           s.counters[2] AS retries,
           s.counters[3] AS errors,
           '{0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10}'::float8[] AS latency_seconds,
           ARRAY(SELECT sum(b) OVER (ORDER BY i)::bigint
                   FROM unnest(s.counters[11:21]) WITH ORDINALITY AS u(b, i)
                  ORDER BY i) AS latency_seconds_bucket,
           s.counters[10] / 1e6::float8 AS latency_seconds_sum,
           s.counters[1] AS latency_seconds_count,
           s.stats_reset
      FROM tms._stat_counters('requests') s,
           LATERAL tms._stat_database(s.dbid) db
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_requests IS
    'HTTP exchanges with catalogs, storage and engines per database, foreign server and service: requests, retries, errors, latency histogram';

CREATE OR REPLACE VIEW tms.stat_request_errors AS
    SELECT db AS database,
           s.label1 AS server,
           s.label2 AS service,
           c.class,
           s.counters[3 + c.i] AS errors,
           s.stats_reset
      FROM tms._stat_counters('requests') s,
           LATERAL tms._stat_database(s.dbid) db,
           unnest('{timeout,connect,throttled,client,server,other}'::text[])
               WITH ORDINALITY AS c(class, i)
     WHERE db IS NOT NULL;

COMMENT ON VIEW tms.stat_request_errors IS
    'failed HTTP exchanges per database, foreign server, service and class (timeout, connect, throttled, client, server, other)';

-- ---------------------------------------------------------------------
-- The current state of the work (this database)
-- ---------------------------------------------------------------------

-- A lease is dead after tms.heartbeat_interval x tms.missed_heartbeats_limit
-- without a heartbeat (src/sched/lease.c).
CREATE OR REPLACE FUNCTION tms._dead_lease_age()
RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(current_setting('tms.heartbeat_interval', true), '5s')::interval
           * coalesce(current_setting('tms.missed_heartbeats_limit', true), '6')::integer
$$;

-- Running tasks that look stuck: no heartbeat for the dead-lease age (its
-- executor is gone or hangs; recovery will release it unless a live
-- process holds it), or held longer than tms.stuck_task_age.
CREATE OR REPLACE VIEW tms.stat_stuck_tasks AS
    SELECT current_database()::text AS database,
           t.task_name AS kind,
           t.task_instance AS instance,
           t.picked_by,
           t.picked_pid AS owner_pid,
           s.since AS claimed_at,
           coalesce(extract(epoch FROM now() - s.since), 0)::float8 AS held_seconds,
           extract(epoch FROM now() - t.last_heartbeat)::float8 AS heartbeat_age_seconds,
           CASE WHEN t.last_heartbeat < now() - tms._dead_lease_age() THEN 'no heartbeat'
                ELSE 'held too long' END AS reason
      FROM tms.scheduled_tasks t
      LEFT JOIN tms.task_slots s
        ON s.kind = t.task_name AND s.task_instance = t.task_instance
     WHERE t.picked
       AND (t.last_heartbeat < now() - tms._dead_lease_age()
            OR s.since < now() - coalesce(current_setting('tms.stuck_task_age', true), '1h')::interval);

COMMENT ON VIEW tms.stat_stuck_tasks IS
    'running tasks without a heartbeat for the dead-lease age, or held longer than tms.stuck_task_age';

CREATE OR REPLACE VIEW tms.stat_task_queue AS
    SELECT current_database()::text AS database,
           k.kind,
           k.max_concurrency,
           count(t.*) FILTER (WHERE t.picked) AS running,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time <= now()) AS due,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time > now()) AS scheduled,
           count(t.*) FILTER (WHERE t.consecutive_failures > 0) AS failing,
           coalesce(extract(epoch FROM now() - min(t.execution_time)
                                  FILTER (WHERE NOT t.picked AND t.execution_time <= now())),
                    0)::float8 AS oldest_due_seconds,
           (SELECT count(*) FROM tms.stat_stuck_tasks st WHERE st.kind = k.kind) AS stuck
      FROM tms.task_kinds k
      LEFT JOIN tms.scheduled_tasks t ON t.task_name = k.kind
     GROUP BY k.kind, k.max_concurrency;

COMMENT ON VIEW tms.stat_task_queue IS
    'tasks per kind: running, due, scheduled, failing, the oldest due one''s wait, stuck';

CREATE OR REPLACE VIEW tms.stat_maintenance_queue AS
    SELECT current_database()::text AS database,
           j.operation,
           j.engine,
           count(*) FILTER (WHERE j.state = 'pending') AS pending,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           coalesce(extract(epoch FROM now() - min(j.created_at)
                                  FILTER (WHERE j.state = 'pending')), 0)::float8
               AS oldest_pending_seconds,
           coalesce(extract(epoch FROM now() - min(j.started_at)
                                  FILTER (WHERE j.state = 'running')), 0)::float8
               AS oldest_running_seconds
      FROM tms.table_maintenance_job j
     WHERE j.finished_at IS NULL
     GROUP BY j.operation, j.engine;

COMMENT ON VIEW tms.stat_maintenance_queue IS
    'maintenance jobs in flight per operation and engine: pending, running, the oldest of each';

-- One row per tms_iceberg server (and per server of a job in flight that
-- is gone), so that an empty backlog is a row of zeros.
CREATE OR REPLACE VIEW tms.stat_purge_queue AS
    WITH jobs AS (
        SELECT j.server,
               count(*) FILTER (WHERE j.state = 'PENDING') AS pending,
               count(*) FILTER (WHERE j.state = 'PENDING' AND j.attempts > 0) AS retrying,
               count(*) FILTER (WHERE j.state = 'RUNNING') AS running,
               min(j.created_at) FILTER (WHERE j.state = 'PENDING') AS oldest_pending
          FROM tms.iceberg_cleanup_job j
         WHERE j.state IN ('PENDING', 'RUNNING')
         GROUP BY j.server
    ), servers AS (
        SELECT s.srvname AS server
          FROM pg_foreign_server s
          JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
         WHERE w.fdwname = 'tms_iceberg'
    )
    SELECT current_database()::text AS database,
           coalesce(s.server, j.server)::text AS server,
           coalesce(j.pending, 0) AS pending,
           coalesce(j.retrying, 0) AS retrying,
           coalesce(j.running, 0) AS running,
           coalesce(extract(epoch FROM now() - j.oldest_pending), 0)::float8
               AS oldest_pending_seconds
      FROM servers s
      FULL JOIN jobs j ON j.server = s.server;

COMMENT ON VIEW tms.stat_purge_queue IS
    'the purge backlog per server: pending (retrying among them), running, the oldest pending one''s wait';

-- ---------------------------------------------------------------------
-- The run history, as TimescaleDB's automation framework shows its jobs
-- (timescaledb_information.job_history, job_errors, job_stats)
-- ---------------------------------------------------------------------

-- Every run of a task (tms.task_history, kept for
-- tms.task_history_retention) with the names of what it worked on.
CREATE OR REPLACE VIEW tms.job_history AS
    SELECT h.id,
           h.kind,
           h.instance,
           p.name AS policy,
           h.policy_id,
           h.rule_id,
           coalesce(r.operation, mj.operation) AS operation,
           coalesce(t.server, pj.server)::text AS server,
           coalesce(t.namespace, pj.namespace) AS namespace,
           coalesce(t.table_name, pj.table_name) AS table_name,
           h.job_id,
           h.attempt,
           h.succeeded,
           h.pid,
           h.started_at AS start_time,
           h.finished_at AS finish_time,
           h.finished_at - h.started_at AS duration,
           h.sqlstate AS sqlerrcode,
           h.error AS err_message
      FROM tms.task_history h
      LEFT JOIN tms.maintenance_policies p ON p.id = h.policy_id
      LEFT JOIN tms.maintenance_rules r ON r.id = h.rule_id
      LEFT JOIN tms.tables t ON t.id = h.table_id
      LEFT JOIN tms.table_maintenance_job mj ON h.kind = 'maintenance' AND mj.id = h.job_id
      LEFT JOIN tms.iceberg_cleanup_job pj ON h.kind = 'purge' AND pj.id = h.job_id;

COMMENT ON VIEW tms.job_history IS
    'every run of a task: what it worked on, when, its outcome, its error with SQLSTATE (tms.task_history_retention)';

CREATE OR REPLACE VIEW tms.job_errors AS
    SELECT id, kind, instance, policy, policy_id, rule_id, operation, server, namespace,
           table_name, job_id, attempt, pid, start_time, finish_time, duration,
           sqlerrcode, err_message
      FROM tms.job_history
     WHERE NOT succeeded;

COMMENT ON VIEW tms.job_errors IS
    'the runs of tasks that failed, with their SQLSTATE and message';

-- Per task kind and rule (policy-level kinds: per policy; the others: per
-- kind), over the history and what pruned rows counted
-- (tms.task_run_totals).  next_start and job_status come from the tasks
-- waiting or running now; their subjects are read from the instance the
-- way each kind's handler reads it: policy-expand "<policy>", cron-job
-- "<policy>:<table>", maintenance "job-<id>" (the job's policy and rule)
-- and "batch-<id>" (its first job's).
CREATE OR REPLACE VIEW tms.job_stats AS
    WITH live AS (
        SELECT h.kind, h.policy_id, h.rule_id,
               count(*) AS runs,
               count(*) FILTER (WHERE h.succeeded) AS successes,
               count(*) FILTER (WHERE NOT h.succeeded) AS failures,
               sum(h.finished_at - h.started_at) AS total_duration,
               max(h.finished_at) FILTER (WHERE h.succeeded) AS last_successful_finish,
               max(h.id) AS last_id,
               max(h.id) FILTER (WHERE NOT h.succeeded) AS last_failed_id
          FROM tms.task_history h
         GROUP BY h.kind, h.policy_id, h.rule_id
    ), keys AS (
        SELECT kind, policy_id, rule_id FROM live
        UNION
        SELECT kind, policy_id, rule_id FROM tms.task_run_totals
    ), tasks AS (
        SELECT t.task_name AS kind,
               CASE WHEN t.task_name = 'policy-expand' AND t.task_instance ~ '^[0-9]{1,9}$'
                        THEN t.task_instance::integer
                    WHEN t.task_name = 'cron-job' AND t.task_instance ~ '^[0-9]{1,9}:'
                        THEN split_part(t.task_instance, ':', 1)::integer
                    ELSE j.policy_id END AS policy_id,
               j.rule_id,
               t.picked,
               t.execution_time
          FROM tms.scheduled_tasks t
          LEFT JOIN tms.table_maintenance_job j
            ON t.task_name = 'maintenance'
           AND j.id = CASE WHEN t.task_instance ~ '^job-[0-9]{1,18}$'
                           THEN substr(t.task_instance, 5)::bigint
                           WHEN t.task_instance ~ '^batch-[0-9]{1,18}$'
                           THEN substr(t.task_instance, 7)::bigint END
    ), waiting AS (
        SELECT kind, policy_id, rule_id,
               count(*) FILTER (WHERE picked) AS running,
               min(execution_time) FILTER (WHERE NOT picked) AS next_start
          FROM tasks
         GROUP BY kind, policy_id, rule_id
    )
    SELECT k.kind,
           p.name AS policy,
           k.policy_id,
           k.rule_id,
           r.operation,
           coalesce(lr.started_at, tt.last_run_started_at) AS last_run_started_at,
           greatest(l.last_successful_finish, tt.last_successful_finish) AS last_successful_finish,
           CASE coalesce(lr.succeeded, tt.last_run_succeeded)
               WHEN true THEN 'succeeded' WHEN false THEN 'failed' END AS last_run_status,
           CASE WHEN w.running > 0 THEN 'running'
                WHEN w.next_start IS NOT NULL THEN 'scheduled'
                ELSE 'idle' END AS job_status,
           coalesce(lr.finished_at - lr.started_at,
                    tt.last_run_finished_at - tt.last_run_started_at) AS last_run_duration,
           w.next_start,
           coalesce(l.runs, 0) + coalesce(tt.runs, 0) AS total_runs,
           coalesce(l.successes, 0) + coalesce(tt.successes, 0) AS total_successes,
           coalesce(l.failures, 0) + coalesce(tt.failures, 0) AS total_failures,
           coalesce(l.total_duration, '0') + coalesce(tt.total_duration, '0') AS total_duration,
           (coalesce(l.total_duration, '0') + coalesce(tt.total_duration, '0'))
               / nullif(coalesce(l.runs, 0) + coalesce(tt.runs, 0), 0) AS average_duration,
           coalesce(lf.finished_at, tt.last_failure_at) AS last_failure_at,
           coalesce(lf.sqlstate, tt.last_sqlstate) AS last_sqlerrcode,
           coalesce(lf.error, tt.last_error) AS last_error
      FROM keys k
      LEFT JOIN live l
        ON (l.kind, l.policy_id, l.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN tms.task_run_totals tt
        ON (tt.kind, tt.policy_id, tt.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN waiting w
        ON (w.kind, w.policy_id, w.rule_id) IS NOT DISTINCT FROM (k.kind, k.policy_id, k.rule_id)
      LEFT JOIN tms.task_history lr ON lr.id = l.last_id
      LEFT JOIN tms.task_history lf ON lf.id = l.last_failed_id
      LEFT JOIN tms.maintenance_policies p ON p.id = k.policy_id
      LEFT JOIN tms.maintenance_rules r ON r.id = k.rule_id;

COMMENT ON VIEW tms.job_stats IS
    'per task kind and rule: runs, successes, failures, the last run and error with SQLSTATE, durations, next start';

REVOKE ALL ON FUNCTION tms._stat_counters(text),
                       tms._stat_count_job(text, text, text, bigint, bigint, bigint),
                       tms.stat_reset(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms._stat_counters(text) TO pg_monitor;
GRANT SELECT ON tms.stat_tasks, tms.stat_maintenance, tms.stat_purges,
                tms.stat_requests, tms.stat_request_errors, tms.stat_stuck_tasks,
                tms.stat_task_queue, tms.stat_maintenance_queue, tms.stat_purge_queue,
                tms.job_history, tms.job_errors, tms.job_stats
    TO pg_monitor;
