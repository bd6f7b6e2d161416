-- Engines: the tms_engine foreign-data wrapper.  An engine is a foreign
-- server of type livy (Spark through Apache Livy), trino or gravitino; its
-- credentials are a user mapping (basic, bearer token, or OAuth2 client
-- credentials).  See doc/operations.md.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms.engine_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_engine_fdw_validator';

COMMENT ON FUNCTION tms.engine_fdw_validator(text[], oid) IS
    'validates options of tms_engine servers and user mappings';

CREATE OR REPLACE FUNCTION tms.engine_statement(engine text, namespace text, table_name text,
                                     operation text, options jsonb DEFAULT '{}')
RETURNS text
LANGUAGE c STABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_engine_statement_sql';

COMMENT ON FUNCTION tms.engine_statement(text, text, text, text, jsonb) IS
    'the statement a job of an operation on a tms_engine server would submit now (for gravitino the jobs API body); sends nothing';
