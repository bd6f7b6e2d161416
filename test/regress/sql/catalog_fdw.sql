-- The tms_iceberg foreign-data wrapper: option validation, user mappings,
-- privileges, and a clean error from a catalog that is not there.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- a server needs a uri
CREATE SERVER cat_nouri FOREIGN DATA WRAPPER tms_iceberg;
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_nouri FOREIGN DATA WRAPPER tms_iceberg OPTIONS (warehouse 'w');
\echo :LAST_ERROR_SQLSTATE

-- unknown options: a close match is suggested, else the valid ones listed
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:1', warehose 'w');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:1', colour 'blue');
\echo :LAST_ERROR_SQLSTATE
-- a user-mapping option on a server says where it belongs
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:1', credential 'a:b');
\echo :LAST_ERROR_SQLSTATE
-- the wrapper itself takes no options
ALTER FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://x');
\echo :LAST_ERROR_SQLSTATE

-- malformed values
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'ftp://host/x');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', connect_timeout 'soon');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', request_timeout '-5');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', retries '11');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', s3_path_style 'sometimes');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', s3_endpoint 'localhost:9000');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', allowed_locations 's3://b/x, relative/dir');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h', allowed_locations 'file:///');
\echo :LAST_ERROR_SQLSTATE

-- a valid server; units are accepted for durations
CREATE SERVER cat_dead FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1/api', warehouse 'wh', connect_timeout '2s',
             request_timeout '3000', retries '0', s3_path_style 'true',
             allowed_locations 's3://bucket/warehouse/, file:///tmp/wh');
-- ALTER re-validates the whole resulting list
ALTER SERVER cat_dead OPTIONS (DROP uri);
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER cat_dead OPTIONS (SET retries 'many');
\echo :LAST_ERROR_SQLSTATE

-- user mappings (for a role of this test, so messages do not depend on
-- who runs it)
CREATE ROLE catalog_fdw_user;
GRANT USAGE ON FOREIGN SERVER cat_dead TO catalog_fdw_user;
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (credential 'no-colon-here');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (credential ':secret');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (credential 'id:secret', token 'tok');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (s3_access_key_id 'AKID');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (s3_session_token 'st');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (tokn 'x');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead OPTIONS (warehouse 'x');
\echo :LAST_ERROR_SQLSTATE

-- no user mapping yet: a clear error with a hint
SET ROLE catalog_fdw_user;
SELECT * FROM tms.list_namespaces('cat_dead');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

CREATE USER MAPPING FOR catalog_fdw_user SERVER cat_dead
    OPTIONS (credential 'client:s3cr3t-value', s3_access_key_id 'AKID', s3_secret_access_key 'shh');

-- nothing listens on port 1: a connection error with its SQLSTATE, and no
-- secret in the message (the DETAIL holds libcurl's text with timings)
\set VERBOSITY terse
SET ROLE catalog_fdw_user;
SELECT * FROM tms.list_namespaces('cat_dead');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.table_metadata('cat_dead', 'db', 't');
\echo :LAST_ERROR_SQLSTATE
SELECT :'LAST_ERROR_MESSAGE' LIKE '%s3cr3t%' AS secret_in_message;
RESET ROLE;
\set VERBOSITY default

-- unknown server, wrong wrapper
SELECT * FROM tms.list_tables('no_such_server');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN DATA WRAPPER catalog_other_fdw;
CREATE SERVER cat_other FOREIGN DATA WRAPPER catalog_other_fdw;
SELECT * FROM tms.list_tables('cat_other');
\echo :LAST_ERROR_SQLSTATE

-- a role without USAGE on the server is refused
CREATE ROLE catalog_fdw_nobody;
SET ROLE catalog_fdw_nobody;
SELECT * FROM tms.list_namespaces('cat_dead');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- with USAGE but no mapping of its own (nor PUBLIC)
GRANT USAGE ON FOREIGN SERVER cat_dead TO catalog_fdw_nobody;
SET ROLE catalog_fdw_nobody;
SELECT * FROM tms.list_namespaces('cat_dead');
\echo :LAST_ERROR_SQLSTATE
-- other roles cannot read the mapping's secrets
SELECT count(*) AS visible_options FROM pg_user_mappings
 WHERE srvname = 'cat_dead' AND umoptions IS NOT NULL;
RESET ROLE;

-- bad arguments
SET ROLE catalog_fdw_user;
SELECT tms.table_metrics('cat_dead', 'db', 't', 'everything');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.table_metadata('cat_dead', NULL, 't');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- options that reach the server's own files need file_fdw's privileges
CREATE ROLE catalog_fdw_files;
GRANT USAGE ON FOREIGN DATA WRAPPER tms_iceberg TO catalog_fdw_files;
SET ROLE catalog_fdw_files;
CREATE SERVER cat_files FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://h', allowed_locations 'file:///var/lib/postgresql/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_files FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://h', allowed_locations 's3://b/wh/, /var/lib/postgresql/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_files FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://h', relative_path_root '/var/lib/postgresql');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER cat_files FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://h', ca_file '/etc/shadow');
\echo :LAST_ERROR_SQLSTATE
-- object storage needs nothing more
CREATE SERVER cat_files FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://h', allowed_locations 's3://b/wh/');
RESET ROLE;
GRANT pg_read_server_files TO catalog_fdw_files;
SET ROLE catalog_fdw_files;
ALTER SERVER cat_files OPTIONS (ADD ca_file '/etc/ssl/certs/ca-certificates.crt');
-- deleting local files needs pg_write_server_files too
ALTER SERVER cat_files OPTIONS (SET allowed_locations 'file:///srv/lake/');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT pg_write_server_files TO catalog_fdw_files;
SET ROLE catalog_fdw_files;
ALTER SERVER cat_files OPTIONS (SET allowed_locations 'file:///srv/lake/');
RESET ROLE;
DROP SERVER cat_files;
REVOKE USAGE ON FOREIGN DATA WRAPPER tms_iceberg FROM catalog_fdw_files;
DROP ROLE catalog_fdw_files;

DROP SERVER cat_dead CASCADE;
DROP SERVER cat_other;
DROP FOREIGN DATA WRAPPER catalog_other_fdw;
DROP ROLE catalog_fdw_nobody;
DROP ROLE catalog_fdw_user;
