-- Catalogs that sign their requests with AWS SigV4 (AWS Glue's and S3
-- Tables' Iceberg REST endpoints, API Gateway): the server options
-- signing_region and signing_name, the user mapping's AWS keys, their
-- combinations, and secrets never echoed.  Signing itself is tested
-- against a verifying catalog in test/integration/test_catalog_sigv4.py.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- a region or service must be a name of a SigV4 scope
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', signing_region 'eu west 1');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', signing_region 'eu-west-1',
             signing_name 'glue/iceberg');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', signing_region '');
\echo :LAST_ERROR_SQLSTATE
-- a signing name alone signs nothing
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', signing_name 'glue');
\echo :LAST_ERROR_SQLSTATE
-- options of the other object say where they belong, near misses are
-- suggested
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', aws_access_key_id 'AKID');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER sig_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://glue.eu-west-1.amazonaws.com/iceberg', signing_regoin 'eu-west-1');
\echo :LAST_ERROR_SQLSTATE

-- AWS Glue, S3 Tables, and API Gateway (the default signing name)
CREATE SERVER sig_glue FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1/iceberg', warehouse '123456789012',
             signing_region 'eu-west-1', signing_name 'glue',
             connect_timeout '1s', retries '0');
CREATE SERVER sig_tables FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://s3tables.us-east-1.amazonaws.com/iceberg',
             warehouse 'arn:aws:s3tables:us-east-1:111122223333:bucket/lake',
             signing_region 'us-east-1', signing_name 's3tables');
CREATE SERVER sig_gateway FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1/prod', signing_region 'us-east-1',
             connect_timeout '1s', retries '0');
ALTER SERVER sig_gateway OPTIONS (SET signing_region 'us east');
\echo :LAST_ERROR_SQLSTATE
-- dropping the region while the name stays is refused too
ALTER SERVER sig_glue OPTIONS (DROP signing_region);
\echo :LAST_ERROR_SQLSTATE

-- user mappings: the keys go together, the session token needs them, and
-- no secret value is ever repeated in a message
CREATE ROLE catalog_sigv4_user;
GRANT USAGE ON FOREIGN SERVER sig_glue, sig_gateway TO catalog_sigv4_user;
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (aws_access_key_id 'AKIDEXAMPLE');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (aws_secret_access_key 'wJalr-SECRET-KEY', aws_session_token 'FwoG-SECRET-TOKEN');
\echo :LAST_ERROR_SQLSTATE
SELECT :'LAST_ERROR_MESSAGE' LIKE '%SECRET%' AS secret_in_message;
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (aws_access_key_id 'AKIDEXAMPLE', aws_secret_access_key '');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (aws_access_key_id 'AKIDEXAMPLE', aws_secret_access_key 'wJalr-SECRET-KEY',
             aws_sesion_token 'FwoG-SECRET-TOKEN');
\echo :LAST_ERROR_SQLSTATE
SELECT :'LAST_ERROR_MESSAGE' LIKE '%SECRET%' AS secret_in_message;
-- a server option in a mapping says where it belongs
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (signing_region 'eu-west-1');
\echo :LAST_ERROR_SQLSTATE

-- a signing server and a mapping without AWS keys: refused before any
-- request, with a hint
CREATE USER MAPPING FOR catalog_sigv4_user SERVER sig_glue OPTIONS (token 'bearer-SECRET');
SET ROLE catalog_sigv4_user;
SELECT * FROM tms.list_namespaces('sig_glue');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- keys on a server that does not sign: refused too, rather than sent
-- unsigned
CREATE SERVER sig_plain FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:1');
CREATE USER MAPPING FOR PUBLIC SERVER sig_plain
    OPTIONS (aws_access_key_id 'AKIDEXAMPLE', aws_secret_access_key 'wJalr-SECRET-KEY');
SELECT * FROM tms.list_namespaces('sig_plain');
\echo :LAST_ERROR_SQLSTATE

-- OAuth2 and SigV4 together: the mapping is complete; nothing listens on
-- port 1, so the connection fails with its SQLSTATE and no secret in the
-- message
ALTER USER MAPPING FOR catalog_sigv4_user SERVER sig_glue
    OPTIONS (ADD aws_access_key_id 'AKIDEXAMPLE', ADD aws_secret_access_key 'wJalr-SECRET-KEY',
             ADD aws_session_token 'FwoG-SECRET-TOKEN');
\set VERBOSITY terse
SET ROLE catalog_sigv4_user;
SELECT * FROM tms.list_namespaces('sig_glue');
\echo :LAST_ERROR_SQLSTATE
SELECT :'LAST_ERROR_MESSAGE' LIKE '%SECRET%' AS secret_in_message;
RESET ROLE;
\set VERBOSITY default

DROP SERVER sig_glue CASCADE;
DROP SERVER sig_tables;
DROP SERVER sig_gateway;
DROP SERVER sig_plain CASCADE;
DROP ROLE catalog_sigv4_user;
