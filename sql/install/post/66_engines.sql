-- Engines: the tms_engine foreign-data wrapper.  An engine is a foreign
-- server of type livy (Spark through Apache Livy), trino or gravitino; its
-- credentials are a user mapping (basic, bearer token, or OAuth2 client
-- credentials).  See doc/operations.md.
-- Once-only objects that need the functions (run after them):
-- changed for a new version through sql/updates/ (doc/developing.md).

CREATE FOREIGN DATA WRAPPER tms_engine
    VALIDATOR tms.engine_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_engine IS
    'engines that run maintenance: CREATE SERVER ... FOREIGN DATA WRAPPER tms_engine OPTIONS (type ''trino'', uri ''...'', catalog ''...'')';
