-- The policy condition language (src/dsl/, src/sql_api/dsl_sql.c).
-- Pure functions: they work without shared_preload_libraries.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms.dsl_check(
    expr text,
    OUT ok boolean,
    OUT type text,
    OUT needs text,
    OUT error text,
    OUT "position" integer,
    OUT uses_files boolean,
    OUT variables text[],
    OUT hint text)
RETURNS record
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_check';

COMMENT ON FUNCTION tms.dsl_check(text) IS
    'compile a policy condition: whether it is valid, what it needs, or the error and its 1-based position';

CREATE OR REPLACE FUNCTION tms.dsl_eval(
    expr text,
    metrics jsonb,
    properties jsonb DEFAULT '{}',
    files jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_eval';

COMMENT ON FUNCTION tms.dsl_eval(text, jsonb, jsonb, jsonb) IS
    'evaluate a policy condition over table metrics (jsonb keyed by variable), table properties and data files';

CREATE OR REPLACE FUNCTION tms.dsl_explain(
    expr text,
    metrics jsonb,
    properties jsonb DEFAULT '{}',
    files jsonb DEFAULT NULL)
RETURNS jsonb
LANGUAGE c IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_dsl_explain';

COMMENT ON FUNCTION tms.dsl_explain(text, jsonb, jsonb, jsonb) IS
    'evaluate a policy condition and explain it: the value of every sub-expression and a text summary';
