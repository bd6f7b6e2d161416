-- Maintenance operations on demand: every input tms.run_operation and
-- tms.plan_operation reject before anything runs (no job is recorded),
-- the one option check that rules share, cancel_operation's rules, and
-- the shape of tms.maintenance_jobs and tms.table_snapshot_metrics.
-- What the operations do is test/integration/test_operations.py's.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER op_srv FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:9', retries '0', connect_timeout '1s');

-- names
SELECT tms.run_operation('op_srv', 'ns', 't', 'vacuum');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', engine => 'duckdb');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'position-delete-rewrite', '{"delete-file-threshold": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', NULL);
\echo :LAST_ERROR_SQLSTATE

-- options: unknown keys, wrong types, out of range, per operation
-- (compaction on engine local: sizes, counts, the where filter's syntax)
SELECT tms._check_operation('compaction', 'local', '{"target-file-size-bytes": "128MB", "min-input-files": 2, "rewrite-all": true, "where": "day = ''2026-11-30'' AND (region IN (''eu'', ''us'') OR NOT id_bucket BETWEEN 1 AND 3)"}');
SELECT tms._check_operation('compaction', 'local', '{"target-file-size-bytes": "128 parsecs"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"min-input-files": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"delete-ratio-threshold": 1.5}');
\echo :LAST_ERROR_SQLSTATE
-- (Iceberg's partial progress and other rewrite options)
SELECT tms._check_operation('compaction', 'local', '{"partial-progress.enabled": true, "partial-progress.max-commits": 3, "partial-progress.max-failed-commits": 0, "remove-dangling-deletes": true, "output-spec-id": 0, "max-concurrent-file-group-rewrites": 2}');
SELECT tms._check_operation('compaction', 'local', '{"partial-progress.max-commits": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"min-file-size-bytes": 100, "max-file-size-bytes": 50}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"where": "day = ''2026-11-30'' AND"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"where": "day = NULL"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"strategy": "sort", "sort-order": "id DESC NULLS LAST, `name`"}');
SELECT tms._check_operation('compaction', 'local', '{"sort-order": "zorder(a, b)"}');
SELECT tms._check_operation('compaction', 'local', '{"strategy": "zorder"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"sort-order": "id DESC NULLS SOMETIMES"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"strategy": "binpack", "sort-order": "id"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('compaction', 'local', '{"nosuch": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"retain_last": 5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"retain-last": "5"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"retain-last": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"retain-last": 1.5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"older-than": "a fortnight"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"older-than": "-3 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"older-than": "2026-13-45"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '{"snapshot-ids": [1, "two"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'snapshot-expiry', '[1]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'manifest-rewrite', '{"older-than": "7 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'manifest-rewrite', '{"target-size-bytes": 10}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'orphan-cleanup', '{"prefix-mismatch-mode": "maybe"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('op_srv', 'ns', 't', 'orphan-cleanup', '{"equal-schemes": {"s3a": 1}}');
\echo :LAST_ERROR_SQLSTATE
-- orphan cleanup of files younger than a day needs force (as Iceberg)
SELECT tms.run_operation('op_srv', 'ns', 't', 'orphan-cleanup', '{"older-than": "2 hours"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.plan_operation('op_srv', 'ns', 't', 'orphan-cleanup', '{"older-than": "0 seconds"}');
\echo :LAST_ERROR_SQLSTATE

-- valid options pass the check; the catalog is then asked (and is not there)
SELECT tms.run_operation('op_srv', 'ns', 't', 'orphan-cleanup', '{"older-than": "2 hours", "force": true}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.run_operation('no_such_server', 'ns', 't', 'snapshot-expiry');
\echo :LAST_ERROR_SQLSTATE
-- an engine's options are the engine's (credentials are refused everywhere)
SELECT tms._check_operation('compaction', 'spark', '{"strategy": "sort", "anything": [1, 2]}');
SELECT tms._check_operation('snapshot-expiry', 'local', '{"retain-last": 3, "older-than": "1 day", "clean-expired-files": false}');
SELECT tms._check_operation('manifest-rewrite', 'local', '{"spec-id": 0, "target-size-bytes": 8388608}');

-- nothing was recorded
SELECT count(*) AS jobs FROM tms.table_maintenance_job;
SELECT count(*) AS tasks FROM tms.scheduled_tasks WHERE task_name = 'maintenance';

-- rules use the same check
SELECT tms.create_object_group('op-g', server => 'op_srv', namespace_pattern => 'ns') > 0 AS created;
SELECT tms.create_policy('op-p', group_name => 'op-g') > 0 AS created;
SELECT tms.add_rule('op-p', 'snapshot-expiry', 'local', '{"time-elapsed": 3600000}',
                    options => '{"retain-last": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('op-p', 'manifest-rewrite', 'local', '{"commits-added": 50}',
                    options => '{"target-size-bytes": 8388608}') > 0 AS added;
SELECT operation, engine, options FROM tms.rules WHERE policy = 'op-p';

-- cancel: unknown job; a pending job ends cancelled at once, once
SELECT tms.cancel_operation(424242);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO tms.tables (server, namespace, table_name) VALUES ('op_srv', 'ns', 't');
INSERT INTO tms.table_maintenance_job (table_id, requested_by, operation, engine, task_kind, task_instance)
    SELECT id, 'postgres'::regrole, 'snapshot-expiry', 'local', 'maintenance', 'job-x' FROM tms.tables;
SELECT tms.cancel_operation(id) FROM tms.table_maintenance_job;
SELECT tms.cancel_operation(id) FROM tms.table_maintenance_job;
CREATE ROLE tms_op_other;
GRANT USAGE ON SCHEMA tms TO tms_op_other;
INSERT INTO tms.table_maintenance_job (table_id, requested_by, operation, engine)
    SELECT id, 'postgres'::regrole, 'orphan-cleanup', 'local' FROM tms.tables
    RETURNING id AS other_job \gset
SET ROLE tms_op_other;
SELECT tms.cancel_operation(:other_job);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT operation, state, reason IS NOT NULL AS has_reason, cancel_requested, phase
  FROM tms.maintenance_jobs ORDER BY id;

-- what an operator reads
SELECT attname FROM pg_attribute
 WHERE attrelid = 'tms.maintenance_jobs'::regclass AND attnum > 0 ORDER BY attnum;
SELECT attname FROM pg_attribute
 WHERE attrelid = 'tms.table_snapshot_metrics'::regclass AND attnum > 0 ORDER BY attnum;
SELECT has_table_privilege('pg_monitor', 'tms.table_snapshot_metrics', 'SELECT') AS monitor_reads_metrics,
       has_table_privilege('tms_op_other', 'tms.table_maintenance_job', 'SELECT') AS public_reads_jobs;

DELETE FROM tms.table_maintenance_job;
DELETE FROM tms.tables;
SELECT tms.drop_policy('op-p');
SELECT tms.drop_object_group('op-g');
REVOKE USAGE ON SCHEMA tms FROM tms_op_other;
DROP ROLE tms_op_other;
DROP SERVER op_srv;
