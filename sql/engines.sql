-- Engines as foreign servers of tms_engine: every option the validator
-- refuses, with its SQLSTATE; credentials only in user mappings and never
-- echoed.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- servers
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (uri 'https://livy.example.com:8998');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'spark', uri 'https://x');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'trino', catalog 'lake');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'trino', uri 'ftp://trino');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'trino', uri 'https://trino');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'gravitino', uri 'https://g');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'livy', uri 'https://l', catalog 'lake', catlog 'x');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'livy', uri 'https://l', catalog 'lake', password 'p');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_bad FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'livy', uri 'https://l', catalog 'lake', run_timeout 'forever');
\echo :LAST_ERROR_SQLSTATE

CREATE SERVER spark FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'livy', uri 'https://livy.example.com:8998', catalog 'lake',
             poll_interval '2s', run_timeout '6h');
CREATE SERVER trino FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri 'https://trino.example.com', catalog 'lake');
CREATE SERVER grav FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'gravitino', uri 'https://gravitino.example.com', metalake 'prod');
ALTER SERVER trino OPTIONS (DROP catalog);
\echo :LAST_ERROR_SQLSTATE

-- user mappings: basic, bearer, OAuth2 client credentials, one at a time
CREATE USER MAPPING FOR CURRENT_USER SERVER spark OPTIONS (password 'hunter2');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER spark OPTIONS (user 'svc', password 'hunter2', token 't0ken');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER spark OPTIONS (credential 'no-colon-secret');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER spark OPTIONS (uri 'https://elsewhere');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER spark OPTIONS (user 'svc', password 'hunter2');
CREATE USER MAPPING FOR CURRENT_USER SERVER trino OPTIONS (token 't0ken');
CREATE USER MAPPING FOR CURRENT_USER SERVER grav OPTIONS (credential 'client:s3cr3t');

-- a file of the server's needs pg_read_server_files, as with file_fdw
CREATE ROLE tms_engine_user;
GRANT USAGE ON FOREIGN DATA WRAPPER tms_engine TO tms_engine_user;
SET ROLE tms_engine_user;
CREATE SERVER e_mine FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri 'https://t', catalog 'lake', ca_file '/etc/shadow');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER e_mine FOREIGN DATA WRAPPER tms_engine
    OPTIONS (type 'trino', uri 'https://t', catalog 'lake');
DROP SERVER e_mine;
RESET ROLE;
REVOKE USAGE ON FOREIGN DATA WRAPPER tms_engine FROM tms_engine_user;
DROP ROLE tms_engine_user;

SELECT srvname, srvoptions FROM pg_foreign_server s
  JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
 WHERE w.fdwname = 'tms_engine' ORDER BY 1;

DROP USER MAPPING FOR CURRENT_USER SERVER spark;
DROP USER MAPPING FOR CURRENT_USER SERVER trino;
DROP USER MAPPING FOR CURRENT_USER SERVER grav;
DROP SERVER spark;
DROP SERVER trino;
DROP SERVER grav;
