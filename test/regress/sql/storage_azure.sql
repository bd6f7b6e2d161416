-- Azure storage options of the tms_iceberg wrapper: Azure locations in
-- allowed_locations (every spelling of one root made one), the endpoint
-- and token URL, the user mapping's credentials checked without being
-- shown, and user mappings readable only by their owner.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER az_ok FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:1',
    azure_endpoint 'http://127.0.0.1:10000', azure_token_url 'https://login.example/t/token',
    allowed_locations 'abfss://lake@acme.dfs.core.windows.net/wh/, wasbs://raw@acme.blob.core.windows.net/');
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'az_ok';

-- locations that are no Azure objects
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    allowed_locations 'abfss://acme.dfs.core.windows.net/wh/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    allowed_locations 'abfss://Lake@acme.dfs.core.windows.net/wh/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    allowed_locations 'abfss://lake@acme.dfs.core.windows.net/wh/../x/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    azure_endpoint 'ftp://127.0.0.1:10000');
\echo :LAST_ERROR_SQLSTATE
-- an endpoint with a login in it
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    azure_endpoint 'http://acme:s3cr3tkey@127.0.0.1:10000');
\echo :LAST_ERROR_SQLSTATE
-- credentials belong to a user mapping
CREATE SERVER az_bad FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://h',
    azure_account_key 'QUFBQQ==');
\echo :LAST_ERROR_SQLSTATE

-- the shared key is base64; the value is never shown
CREATE USER MAPPING FOR PUBLIC SERVER az_ok OPTIONS (azure_account_key 'not base64 s3cr3t!');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER az_ok OPTIONS (azure_account_key 'QUFBQQ=');
\echo :LAST_ERROR_SQLSTATE
-- the client credentials go together
CREATE USER MAPPING FOR PUBLIC SERVER az_ok OPTIONS (azure_client_id 'app',
    azure_client_secret 'shh');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER az_ok OPTIONS (azure_account_key 'QUFBQQ==',
    azure_sas_token 'sv=2021-08-06&sig=abc', azure_tenant_id 't', azure_client_id 'app',
    azure_client_secret 'shh');

-- a role that does not own the mapping sees none of its options
CREATE ROLE storage_azure_reader;
GRANT USAGE ON FOREIGN SERVER az_ok TO storage_azure_reader;
SET ROLE storage_azure_reader;
SELECT srvname, umoptions FROM pg_user_mappings WHERE srvname = 'az_ok';
RESET ROLE;

DROP USER MAPPING FOR PUBLIC SERVER az_ok;
DROP SERVER az_ok;
DROP ROLE storage_azure_reader;
