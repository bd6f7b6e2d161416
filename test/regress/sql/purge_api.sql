-- purge: SQL-level validation and errors (no catalog needed)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- the kind is built in and detached; its cap follows tms.purge_concurrency
SELECT kind, builtin, max_concurrency FROM tms.task_kinds WHERE kind = 'purge';
SHOW tms.purge_delete_batch_size;
SHOW tms.purge_max_attempts;
SHOW tms.purge_retention;

-- arguments
SELECT tms.purge_table(NULL, 'ns', 't');
SELECT tms.purge_table('no_such_server', 'ns', 't');
SELECT tms.purge_table('purge_regress', '', 't');
SELECT tms.purge_table('purge_regress', 'ns', '..');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.purge_table('purge_regress', 'a..b', 't');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.purge_table('purge_regress', 'ns', repeat('x', 1048576));
\echo :LAST_ERROR_SQLSTATE
SELECT tms.drop_table('purge_regress', 'ns', '.');
\echo :LAST_ERROR_SQLSTATE

-- a server without allowed_locations: refused before any network call
CREATE SERVER purge_regress FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.purge_table('purge_regress', 'ns', 't');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.purge_table('purge_regress', 'ns', 't', delete_other_tables_files => true);
\echo :LAST_ERROR_SQLSTATE

-- files of other tables tms knows are kept unless the call says otherwise
SELECT pg_get_function_arguments('tms.purge_table'::regproc);
SELECT files_kept, kept_example, delete_other_tables_files FROM tms.purge_jobs;

-- observability with no jobs
SELECT pending, running, succeeded, failed, oldest_pending_age, files_deleted
  FROM tms.purge_job_counts;
SELECT * FROM tms.purge_status('purge_regress', 'ns', 't');

-- retry of a job that does not exist, or is not FAILED
SELECT setval('tms.iceberg_cleanup_job_id_seq', 1000, false) > 0 AS restarted;
SELECT tms.retry_purge(-1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location, metadata_location, requested_by)
    VALUES ('purge_regress', 'ns', 't', '/nowhere/t', '/nowhere/t/metadata/v1.metadata.json', current_user::text::regrole);
SELECT blocks_recreate, state FROM tms.purge_status('purge_regress', 'ns', 't');
SELECT tms.retry_purge(id) FROM tms.iceberg_cleanup_job WHERE server = 'purge_regress';
\echo :LAST_ERROR_SQLSTATE

-- one active job per identifier
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location, metadata_location, requested_by)
    VALUES ('purge_regress', 'ns', 't', '/nowhere/t', '/nowhere/t/metadata/v1.metadata.json', current_user::text::regrole);
\echo :LAST_ERROR_SQLSTATE

-- the tombstone trigger on a JDBC-layout pointer table
CREATE TEMP TABLE iceberg_tables (catalog_name varchar(255), table_namespace varchar(255),
    table_name varchar(255), metadata_location varchar(1000),
    previous_metadata_location varchar(1000), iceberg_type varchar(5));
CREATE TRIGGER no_args BEFORE INSERT ON iceberg_tables
    FOR EACH ROW EXECUTE FUNCTION tms.refuse_purging_tables();
INSERT INTO iceberg_tables VALUES ('c', 'ns', 'other', 'x', NULL, 'TABLE');
DROP TRIGGER no_args ON iceberg_tables;
CREATE TRIGGER tombstone BEFORE INSERT ON iceberg_tables
    FOR EACH ROW EXECUTE FUNCTION tms.refuse_purging_tables('purge_regress');
INSERT INTO iceberg_tables VALUES ('c', 'ns', 'other', 'x', NULL, 'TABLE');
INSERT INTO iceberg_tables VALUES ('c', 'ns', 't', 'x', NULL, 'TABLE');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO iceberg_tables VALUES ('c', 'ns', 't', 'x', NULL, 'VIEW');
UPDATE tms.iceberg_cleanup_job SET state = 'FAILED', finished_at = now()
 WHERE server = 'purge_regress';
INSERT INTO iceberg_tables VALUES ('c', 'ns2', 't', 'x', NULL, 'TABLE');
INSERT INTO iceberg_tables VALUES ('c', 'ns', 't', 'y', NULL, 'TABLE');
SELECT count(*) FROM iceberg_tables;

-- purge_hold_namespace: where a purge holds a table until its files are
-- gone (a namespace, checked as tms checks namespaces)
ALTER SERVER purge_regress OPTIONS (ADD purge_hold_namespace 'tms..hold');
ALTER SERVER purge_regress OPTIONS (ADD purge_hold_namespace 'tms.purging');
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'purge_regress';
-- a retried job goes on from the metadata file or the release it got to,
-- else from its files again
INSERT INTO tms.iceberg_cleanup_job (server, namespace, table_name, table_location,
                                     metadata_location, requested_by, state, phase,
                                     dropped_at, finished_at, held_namespace, held_name)
    VALUES ('purge_regress', 'ns', 'r1', '/nowhere/r1', '/nowhere/r1/m.json',
            current_user::text::regrole, 'FAILED', 'release', now(), now(),
            'tms.purging', 'tms_purge_1'),
           ('purge_regress', 'ns', 'r2', '/nowhere/r2', '/nowhere/r2/m.json',
            current_user::text::regrole, 'FAILED', 'metadata-log', now(), now(), NULL, NULL);
SELECT tms.retry_purge(id) FROM tms.iceberg_cleanup_job WHERE table_name IN ('r1', 'r2');
SELECT table_name, state, phase, held_namespace, held_name FROM tms.purge_jobs
 WHERE table_name IN ('r1', 'r2') ORDER BY table_name;
DELETE FROM tms.scheduled_tasks t USING tms.iceberg_cleanup_job j
 WHERE t.task_name = 'purge' AND t.task_instance = j.id::text AND j.server = 'purge_regress';

-- clean up
DELETE FROM tms.iceberg_cleanup_job WHERE server = 'purge_regress';
DROP TABLE iceberg_tables;
DROP SERVER purge_regress;
