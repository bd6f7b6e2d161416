-- The retention operation's options: what tms.run_operation,
-- tms.plan_operation and the rules' check (tms._check_operation) reject
-- before anything runs (22023 with the value in DETAIL; 0A000 for what
-- engine local does not do), and what they accept.  The column and the
-- unit are checked against the table when it is loaded, and what the
-- operation does, by test/integration/test_retention.py.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER ret_srv FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:9', retries '0', connect_timeout '1s');

-- accepted: an age, a point in time, an epoch unit, mode metadata, scan false
SELECT tms._check_operation('retention', 'local', '{"column": "event_ts", "older-than": "90 days"}');
SELECT tms._check_operation('retention', 'local', '{"column": "d", "older-than": "2026-01-01 00:00Z", "mode": "metadata", "scan": false}');
SELECT tms._check_operation('retention', 'local', '{"column": "ms", "older-than": "1 week", "unit": "ms"}');

-- the column and the cutoff are required
SELECT tms._check_operation('retention', 'local', '{"older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "event_ts"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "", "older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE

-- wrong types and values
SELECT tms._check_operation('retention', 'local', '{"column": 3, "older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "-3 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "ninety days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "unit": "days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "vacuum"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "where": "a = 1"}');
\echo :LAST_ERROR_SQLSTATE

-- modes rewrite and delete-files (with scan) are accepted; scan needs one
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "rewrite"}');
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "rewrite", "scan": true}');
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "delete-files"}');
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "delete-files", "scan": true}');
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "mode": "Delete-Files"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"column": "ts", "older-than": "90 days", "scan": true}');
\echo :LAST_ERROR_SQLSTATE

-- on a livy or trino server retention is a DELETE FROM ... WHERE: the same
-- options but the local-only mode and scan (0A000); gravitino has no
-- template for it and the handler engines of 0.2.0 are not handed it
-- (0A000)
CREATE SERVER ret_livy FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'http://127.0.0.1:9', catalog 'c');
CREATE SERVER ret_trino FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri 'http://127.0.0.1:9', catalog 'c');
CREATE SERVER ret_grav FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'gravitino', uri 'http://127.0.0.1:9', metalake 'm', catalog 'c');
CREATE USER MAPPING FOR CURRENT_USER SERVER ret_livy OPTIONS (user 'svc', password 'pw');
CREATE USER MAPPING FOR CURRENT_USER SERVER ret_trino OPTIONS (user 'svc', token 't');
CREATE USER MAPPING FOR CURRENT_USER SERVER ret_grav OPTIONS (credential 'a:b');
SELECT tms._check_operation('retention', 'ret_livy', '{"column": "ts", "older-than": "90 days"}');
SELECT tms._check_operation('retention', 'ret_trino', '{"column": "ms", "unit": "ms", "older-than": "2026-01-01 00:00Z"}');
SELECT tms._check_operation('retention', 'ret_trino', '{"where": "id = 1 OR name = ''x''"}');
SELECT tms._check_operation('retention', 'ret_livy', '{"column": "ts", "older-than": "90 days", "mode": "rewrite"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'ret_trino', '{"where": "id = 1", "mode": "metadata"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'ret_livy', '{"column": "ts", "older-than": "90 days", "scan": true}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'ret_livy', '{"column": "ts"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'ret_livy', '{"column": "ts", "older-than": "90 days", "engine-resources": {}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'ret_grav', '{"column": "ts", "older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'spark', '{"column": "ts", "older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('ret_trino', 'ns', 't', 'retention', '{"column": "ts", "older-than": "90 days"}');
\echo :LAST_ERROR_SQLSTATE
DROP USER MAPPING FOR CURRENT_USER SERVER ret_livy;
DROP USER MAPPING FOR CURRENT_USER SERVER ret_trino;
DROP USER MAPPING FOR CURRENT_USER SERVER ret_grav;
DROP SERVER ret_livy, ret_trino, ret_grav;

-- run_operation and plan_operation refuse the same before loading the table
SELECT tms.run_operation('ret_srv', 'ns', 't', 'retention', '{"column": "ts"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM tms.plan_operation('ret_srv', 'ns', 't', 'retention', '{"older-than": "1 day"}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS jobs FROM tms.maintenance_jobs WHERE operation = 'retention';

DROP SERVER ret_srv CASCADE;
