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
    OPTIONS (type 'gravitino', uri 'https://gravitino.example.com', metalake 'prod', catalog 'lake');
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

-- the statements tms builds: only the arguments given, every name escaped
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction',
       '{"strategy": "sort", "sort-order": "id DESC NULLS LAST", "where": "day = ''2026-11-30''",
         "target-file-size-bytes": 536870912, "min-input-files": 2, "rewrite-all": true}');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'position-delete-rewrite', '{"where": "id > 3"}');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'manifest-rewrite', '{"use-caching": false, "spec-id": 2}');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'snapshot-expiry',
       '{"older-than": "2026-11-01T00:00:00Z", "retain-last": 5, "snapshot-ids": [1, 9223372036854775807]}');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'orphan-cleanup',
       '{"older-than": "2026-11-01T00:00:00Z", "location": "s3://b/wh/sales/orders/data",
         "prefix-mismatch-mode": "IGNORE", "equal-schemes": {"s3a": "s3"}}');
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction');
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction',
       '{"file-size-threshold": "128MB", "where": "\"day\" = DATE ''2026-11-30''"}');
SELECT tms.engine_statement('trino', 'sales', 'orders', 'manifest-rewrite');
SELECT tms.engine_statement('trino', 'sales', 'orders', 'snapshot-expiry', '{"older-than": "7 days"}');
SELECT tms.engine_statement('trino', 'sales', 'orders', 'orphan-cleanup', '{"older-than": "3 days"}');
SELECT tms.engine_statement('grav', 'sales', 'orders', 'compaction', '{"strategy": "binpack", "min-input-files": 2}');
SELECT tms.engine_statement('grav', 'sales', 'orders', 'manifest-rewrite', '{"use-caching": true}');
SELECT tms.engine_statement('grav', 'sales', 'orders', 'snapshot-expiry', '{"retain-last": 3}');

-- hostile names stay names
SELECT tms.engine_statement('spark', 'sa`les', 'or''d"ers; DROP TABLE x; --', 'manifest-rewrite');
SELECT tms.engine_statement('spark', E'ns\nnext', 'täble\\', 'manifest-rewrite');
SELECT tms.engine_statement('trino', 'sa"les', 'or''d"ers; DROP TABLE x; --', 'manifest-rewrite');
SELECT tms.engine_statement('spark', E'lvl1\x1flvl2', 'orders', 'manifest-rewrite');

-- every option checked before anything is built
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"strategy": "zorder"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"target-file-size": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"rewrite-all": "yes"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"min-input-files": 2.5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"min-input-files": 99999999999999999999}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"options": {"no-such-option": "1"}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'manifest-rewrite', '{"spec-id": -1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'snapshot-expiry', '{"older-than": "last tuesday"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'manifest-rewrite', '{"use-caching": "{{use_caching}}"}');
-- engine-resources: Gravitino's spark_* jobConf; refusals are 22023, credentials never shown
SELECT tms.engine_statement('grav', 'sales', 'orders', 'snapshot-expiry', '{"engine-resources": {"executorMemory": "4g", "numExecutors": 4, "conf": {"spark.sql.shuffle.partitions": 64}}}');
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"engine-resources": {"executorMemory": "4 GB"}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"engine-resources": {"conf": {"spark.executor.instances": "4"}}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction', '{"engine-resources": {"conf": {"spark.hadoop.fs.s3a.secret.key": "wJalrXUtnFEMI"}}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction', '{"engine-resources": {"numExecutors": 2}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction', '{"where": "1 = 1; DROP TABLE t"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction', '{"where": "x = 1 -- comment"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', 'sales', 'orders', 'compaction', '{"where": "x = ''open"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', 'sales', 'orders', 'position-delete-rewrite');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('trino', E'lvl1\x1flvl2', 'orders', 'manifest-rewrite');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('grav', 'sales', 'orders', 'orphan-cleanup');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('local', 'sales', 'orders', 'manifest-rewrite');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.engine_statement('nosuch', 'sales', 'orders', 'manifest-rewrite');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('position-delete-rewrite', 'local', '{"min-input-files": 2, "where": "a = 1"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('position-delete-rewrite', 'local', '{"sort-order": "id"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms._check_operation('vacuum', 'spark', '{}');
\echo :LAST_ERROR_SQLSTATE

-- an engine needs USAGE and a user mapping of the acting role
CREATE ROLE tms_engine_user2;
GRANT USAGE ON SCHEMA tms TO tms_engine_user2;
SET ROLE tms_engine_user2;
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER spark TO tms_engine_user2;
SET ROLE tms_engine_user2;
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE USER MAPPING FOR tms_engine_user2 SERVER spark OPTIONS (user 'svc2', password 'pw2');
SET ROLE tms_engine_user2;
SELECT tms.engine_statement('spark', 'sales', 'orders', 'compaction');
RESET ROLE;
DROP USER MAPPING FOR tms_engine_user2 SERVER spark;
REVOKE USAGE ON FOREIGN SERVER spark FROM tms_engine_user2;
REVOKE USAGE ON SCHEMA tms FROM tms_engine_user2;
DROP ROLE tms_engine_user2;

DROP USER MAPPING FOR CURRENT_USER SERVER spark;
DROP USER MAPPING FOR CURRENT_USER SERVER trino;
DROP USER MAPPING FOR CURRENT_USER SERVER grav;
DROP SERVER spark;
DROP SERVER trino;
DROP SERVER grav;
