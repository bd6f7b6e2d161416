-- Policy condition DSL: compile errors (position, message, hint) from
-- tms.dsl_check(), which never raises, and the same errors raised by
-- tms.dsl_eval() with their SQLSTATE and caret excerpt; evaluation errors.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

SELECT e.n, c.ok, c.position, c.error, c.hint, left(e.expr, 40) AS expr
  FROM (VALUES
    (1, ''),
    (2, 'dataFiles >'),
    (3, 'dataFiles > 100 100'),
    (4, '(dataFiles > 100'),
    (5, 'datafiles > 100'),
    (6, 'snapshots > 1 AND oldestSnapshotAg > 5'),
    (7, 'mb(64) > 1'),
    (8, 'dataFiles(1) > 1'),
    (9, 'days > 1'),
    (10, 'countDataFiles(f -> f.sise < 1) > 1'),
    (11, 'countDataFiles(f -> f) > 1'),
    (12, 'f.size > 1'),
    (13, 'countDataFiles(f -> countDataFiles(g -> true) > 0) > 1'),
    (14, 'countDataFiles(f.size) > 1'),
    (15, 'countDataFiles(f -> f.size) > 1'),
    (16, 'MB(1, 2) > 1'),
    (17, 'property(''x'') > 1'),
    (18, 'property(dataFiles, 1) > 1'),
    (19, 'MB(''x'') > 1'),
    (20, 'dataFiles > ''many'''),
    (21, 'true > false'),
    (22, 'dataFiles AND true'),
    (23, '!dataFiles > 5'),
    (24, '-true'),
    (25, 'dataFiles + 1'),
    (26, 'dataFiles > ''unterminated'),
    (27, '''a\q'' == ''x'''),
    (28, 'dataFiles > 10Mb'),
    (29, 'dataFiles > 1e6'),
    (30, 'dataFiles > 9223372036854775808'),
    (31, 'dataFiles > 8589934592GB'),
    (32, 'dataFiles = 100'),
    (33, 'dataFiles > 1 && true'),
    (34, 'dataFiles > 1 || true'),
    (35, 'dataFiles > 1 # x'),
    (36, '''été'' == ''x'' AND zz'),
    (37, 'not true'),
    (38, repeat('(', 10000) || 'true' || repeat(')', 10000)),
    (39, repeat('!', 10000) || 'true'),
    (40, repeat('snapshots + ', 1500) || '1 > 0'),
    (41, 'true' || repeat(' ', 70000))) AS e(n, expr),
  LATERAL tms.dsl_check(e.expr) AS c
 ORDER BY e.n;

-- A non-BOOLEAN expression reports its type.
SELECT ok, type, error FROM tms.dsl_check('512MB * 2');

-- Raised errors: SQLSTATE, DETAIL with the caret excerpt, HINT.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT tms.dsl_eval('snapshots > 1 AND
    oldestSnapshotAg > days(5)', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 100 AND', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > ''many''', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('MB(1, 2) > 1', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles * 2', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_explain('countDataFiles(f -> f.hasdeletes) > 0', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 99999999999999999999', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval(repeat('(', 200) || 'true' || repeat(')', 200), '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('true' || repeat(' ', 70000), '{}');
\echo :LAST_ERROR_SQLSTATE

-- Evaluation inputs: a needed metric must be present and of the right type,
-- the file list must be given when the condition counts files.
SELECT tms.dsl_eval('dataFiles > 100', '{"snapshots": 3}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 100', '{"dataFiles": 1.5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 100', '{"dataFiles": "80"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 100', '[80]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('dataFiles > 100', '{"dataFiles": 80}', '{"p": {"nested": 1}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('countDataFiles(f -> f.size > 1) > 0', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('countDataFiles(f -> f.records > 1) > 0', '{}', '{}', '[{"size": 1}]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('countDataFiles(f -> f.hasDeletes) > 0', '{}', '{}', '[{"hasDeletes": 1}]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.dsl_eval('countDataFiles(f -> true) > 0', '{}', '{}', '{"size": 1}');
\echo :LAST_ERROR_SQLSTATE

-- Unknown metric keys are ignored, null metrics are absent, 1.0 is an
-- integer; NULL arguments give NULL.
SELECT tms.dsl_eval('dataFiles > 1', '{"dataFiles": 2.0, "level": "manifests", "snapshots": null}') AS extra_keys,
       tms.dsl_eval(NULL, '{}') IS NULL AS null_expr,
       tms.dsl_eval('true', NULL) IS NULL AS null_metrics,
       tms.dsl_check(NULL) IS NULL AS null_check;
