-- Google Cloud Storage options of a tms_iceberg server and its user
-- mappings: the endpoint, the three ways to authenticate (HMAC keys as a
-- pair, an OAuth2 token, a service account key that tms can sign with), at
-- most one of them, gs:// allowed locations, and secrets never echoed.
-- The storage itself is tested against the GCS test server in
-- test/integration/test_storage_gcs.py and test_gcs_world.py.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- the endpoint is a URL without a login; allowed locations may be gs://
CREATE SERVER gcs_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1', gcs_endpoint 'storage.googleapis.com');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER gcs_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1', allowed_locations 'gs://Upper-Case/warehouse/');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER gcs_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1', allowed_locations 'gs://lake/warehouse/../x');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER gcs_lake FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1', gcs_endpoint 'http://127.0.0.1:2',
             allowed_locations 'gs://lake/warehouse/, s3://other/wh/',
             connect_timeout '1s', retries '0');
-- credentials belong to the user mapping
CREATE SERVER gcs_bad FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1', gcs_oauth2_token 'ya29.SECRET');
\echo :LAST_ERROR_SQLSTATE

-- HMAC keys come as a pair; one way to authenticate at most
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_hmac_access_id 'GOOGID');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_hmac_secret 'HMAC-SECRET-VALUE');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_hmac_access_id 'GOOGID', gcs_hmac_secret 'HMAC-SECRET-VALUE',
             gcs_oauth2_token 'ya29.TOKEN-SECRET');
\echo :LAST_ERROR_SQLSTATE
SELECT :'LAST_ERROR_MESSAGE' LIKE '%SECRET%' AS secret_in_message;
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_oauth2_token '');
\echo :LAST_ERROR_SQLSTATE

-- a service account key must be one tms can sign with; never echoed
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_service_account_key 'PRIVATE-KEY-SECRET not json');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_service_account_key '{"type": "service_account", "client_email": "a@b",
             "token_uri": "https://oauth2.googleapis.com/token",
             "private_key": "-----BEGIN PRIVATE KEY-----\nPRIVATE-KEY-SECRET\n-----END PRIVATE KEY-----\n"}');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_service_account_key '{"type": "service_account", "client_email": "a@b",
             "token_uri": "file:///etc/passwd", "private_key": "-----BEGIN PRIVATE KEY-----\nx\n"}');
\echo :LAST_ERROR_SQLSTATE

-- a complete mapping; ALTER keeps the rules
CREATE USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (gcs_hmac_access_id 'GOOGID', gcs_hmac_secret 'HMAC-SECRET-VALUE');
ALTER USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (ADD gcs_oauth2_token 'ya29.TOKEN-SECRET');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER gcs_lake
    OPTIONS (DROP gcs_hmac_access_id, DROP gcs_hmac_secret, ADD gcs_oauth2_token 'ya29.TOKEN-SECRET');

SET client_min_messages = warning;
DROP SERVER gcs_lake CASCADE;
RESET client_min_messages;
