-- What a session may make tms reach, and credentials where everyone reads
-- them: the setting tms.allowed_hosts (superuser-only, empty by default;
-- a malformed entry refused with the entry named; a catalog refused before
-- any connection when neither its host nor its address is listed), and a
-- server URL carrying a login refused without echoing it.  (Rule options:
-- policy_validation; catalog_config: test_hostile_catalog.py.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- empty by default: no limit
SHOW tms.allowed_hosts;

-- malformed entries are refused, the entry named
SET tms.allowed_hosts = 'catalog.example.com:http';
\echo :LAST_ERROR_SQLSTATE
SET tms.allowed_hosts = '10.0.0.0/40';
\echo :LAST_ERROR_SQLSTATE
SET tms.allowed_hosts = 'ok.example, http://catalog.example.com';
\echo :LAST_ERROR_SQLSTATE
SET tms.allowed_hosts = '*';
\echo :LAST_ERROR_SQLSTATE
SHOW tms.allowed_hosts;

-- host names (exact or below a domain), addresses, networks, ports
SET tms.allowed_hosts = 'catalog.example.com', '*.storage.example:443', '10.0.0.0/8', '[fd00::/8]:8181';
SHOW tms.allowed_hosts;
RESET tms.allowed_hosts;

-- only a superuser changes it
CREATE ROLE security_user;
SET ROLE security_user;
SET tms.allowed_hosts = '';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a server's options are readable by everyone: a URL with a login in them
-- is refused, and the login is not echoed
CREATE SERVER sec_login FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://tms:s3cr3t@catalog.example/api');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER sec_login FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'https://catalog.example/api', s3_endpoint 'ftp://ak:s3cr3t@s3.example');
\echo :LAST_ERROR_SQLSTATE

-- a catalog on 127.0.0.1, where nothing listens on port 1
CREATE SERVER sec_cat FOREIGN DATA WRAPPER tms_iceberg
    OPTIONS (uri 'http://127.0.0.1:1/api', retries '0', connect_timeout '2s');
GRANT USAGE ON FOREIGN SERVER sec_cat TO security_user;
CREATE USER MAPPING FOR security_user SERVER sec_cat;

-- neither its host nor its address listed: refused before connecting
SET tms.allowed_hosts = '10.9.9.9, catalog.example.com, 127.0.0.1:8181';
SET ROLE security_user;
SELECT * FROM tms.list_namespaces('sec_cat');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- listed by address, by network: tried, and refused by the kernel
\set VERBOSITY terse
SET tms.allowed_hosts = '10.9.9.9, 127.0.0.1';
SET ROLE security_user;
SELECT * FROM tms.list_namespaces('sec_cat');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET tms.allowed_hosts = '127.0.0.0/8:1';
SET ROLE security_user;
SELECT * FROM tms.list_namespaces('sec_cat');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
\set VERBOSITY default
RESET tms.allowed_hosts;

DROP SERVER sec_cat CASCADE;
DROP ROLE security_user;
