-- Engines: the tms_engine foreign-data wrapper.  An engine is a foreign
-- server of type livy (Spark through Apache Livy), trino or gravitino; its
-- credentials are a user mapping (basic, bearer token, or OAuth2 client
-- credentials).  See doc/operations.md.

CREATE FUNCTION tms.engine_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_engine_fdw_validator';

COMMENT ON FUNCTION tms.engine_fdw_validator(text[], oid) IS
    'validates options of tms_engine servers and user mappings';

CREATE FOREIGN DATA WRAPPER tms_engine
    VALIDATOR tms.engine_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_engine IS
    'engines that run maintenance: CREATE SERVER ... FOREIGN DATA WRAPPER tms_engine OPTIONS (type ''trino'', uri ''...'', catalog ''...'')';

CREATE FUNCTION tms.engine_statement(engine text, namespace text, table_name text,
                                     operation text, options jsonb DEFAULT '{}')
RETURNS text
LANGUAGE c STABLE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_engine_statement_sql';

COMMENT ON FUNCTION tms.engine_statement(text, text, text, text, jsonb) IS
    'the statement a job of an operation on a tms_engine server would submit now (for gravitino the jobs API body); sends nothing';
