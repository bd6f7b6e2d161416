-- tms.delete_rows's arguments: what it refuses before a job is recorded
-- or a table is loaded (22004, 22023 with the value in DETAIL and a HINT),
-- and that its where is retention's option "where", checked by the one
-- parser of where texts.  The where's columns and literals are checked
-- against the table when it is loaded, and what the deletion does, by
-- test/integration/test_delete_rows.py.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER del_srv FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:9', retries '0', connect_timeout '1s');

-- the where is required, and not blank
SELECT tms.delete_rows('del_srv', 'ns', 't', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', '   ');
\echo :LAST_ERROR_SQLSTATE

-- its syntax, with the character at fault
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = ');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1 AND (name = ''x''');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1; DROP TABLE x');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = NULL');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'read_csv(''/etc/passwd'') IS NULL');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', repeat('(', 40) || 'id = 1' || repeat(')', 40));
\echo :LAST_ERROR_SQLSTATE

-- options: mode alone, a string
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"column": "ts"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"mode": 3}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"mode": "vacuum"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '[1]');
\echo :LAST_ERROR_SQLSTATE

-- retention's option "where": alone, or with mode
SELECT tms._check_operation('retention', 'local', '{"where": "id IN (1, 2) OR name IS NULL", "mode": "rewrite"}');
SELECT tms._check_operation('retention', 'local', '{"where": "NOT (d >= ''2026-01-01'' AND flag = true)"}');
SELECT tms._check_operation('retention', 'local', '{"where": "id = 1", "older-than": "1 day"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"where": "id = 1", "mode": "rewrite", "scan": true}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"where": "id = 1", "mode": "delete-files"}');
SELECT tms._check_operation('retention', 'local', '{"where": "id = 1", "mode": "delete-files", "scan": true}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('retention', 'local', '{"where": 7}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM tms.plan_operation('del_srv', 'ns', 't', 'retention', '{"where": "id >"}');
\echo :LAST_ERROR_SQLSTATE

SELECT count(*) AS jobs FROM tms.maintenance_jobs WHERE operation = 'retention';

DROP SERVER del_srv CASCADE;
