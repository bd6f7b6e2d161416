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
-- option engine: a string naming local or a tms_engine server; mode is
-- refused on a server (0A000), and so is a server that cannot DELETE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"engine": 3}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"engine": "nosuch"}');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER del_trino FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri 'http://127.0.0.1:9', catalog 'c');
CREATE SERVER del_grav FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'gravitino', uri 'http://127.0.0.1:9', metalake 'm', catalog 'c');
CREATE USER MAPPING FOR CURRENT_USER SERVER del_trino OPTIONS (user 'svc', token 't');
CREATE USER MAPPING FOR CURRENT_USER SERVER del_grav OPTIONS (credential 'a:b');
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"engine": "del_trino", "mode": "rewrite"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = 1', '{"engine": "del_grav"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.delete_rows('del_srv', 'ns', 't', 'id = ', '{"engine": "del_trino"}');
\echo :LAST_ERROR_SQLSTATE
DROP USER MAPPING FOR CURRENT_USER SERVER del_trino;
DROP USER MAPPING FOR CURRENT_USER SERVER del_grav;
DROP SERVER del_trino, del_grav;

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
