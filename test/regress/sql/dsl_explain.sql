-- Policy condition DSL: tms.dsl_explain() says why a condition is true or
-- false: the value of every sub-expression, what was not evaluated, the
-- outcome, and a text an operator can read in the evaluation log.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

-- The evaluation log's typical question: counters fired, but the files are
-- few and already big.
SELECT x->>'text' AS text, x->'result' AS result, x->>'outcome' AS outcome
  FROM tms.dsl_explain('dataFiles > 100 AND avgDataFileSize < 128MB',
                       '{"dataFiles": 80, "avgDataFileSize": 220200960}') AS x;
SELECT x->>'text' AS text
  FROM tms.dsl_explain('dataFiles > 100 AND avgDataFileSize < 128MB',
                       '{"dataFiles": 180, "avgDataFileSize": 220200960}') AS x;

-- Every node: pre-order, with parent, kind, type, state and value.
SELECT n->>'id' AS id, n->>'parent' AS parent, n->>'expr' AS expr, n->>'kind' AS kind,
       n->>'type' AS type, n->>'op' AS op, n->>'state' AS state, n->'value' AS value
  FROM tms.dsl_explain('dataFiles > 100 AND avgDataFileSize < 128MB',
                       '{"dataFiles": 80, "avgDataFileSize": 220200960}') AS x,
       jsonb_array_elements(x->'nodes') AS n;

-- Division by zero: which node failed, and that the condition is false.
SELECT x->>'text' AS text, x->'result' AS result, x->>'outcome' AS outcome
  FROM tms.dsl_explain('dataFilesSize / dataFiles > 1GB OR snapshots > 10',
                       '{"dataFiles": 0, "dataFilesSize": 0, "snapshots": 50}') AS x;
SELECT n->>'expr' AS expr, n->>'state' AS state, n->>'outcome' AS outcome
  FROM tms.dsl_explain('dataFilesSize / dataFiles > 1GB OR snapshots > 10',
                       '{"dataFiles": 0, "dataFilesSize": 0, "snapshots": 50}') AS x,
       jsonb_array_elements(x->'nodes') AS n;

-- Overflow.
SELECT x->>'text' AS text, x->>'outcome' AS outcome
  FROM tms.dsl_explain('dataRecords * 2 > 0',
                       '{"dataRecords": 9223372036854775807}') AS x;

-- Properties say where their value came from; lambdas show the count, the
-- number of files read, and the values computed once per call.
SELECT x->>'text' AS text
  FROM tms.dsl_explain('dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5',
                       '{"dataFiles": 12}', '{"write.target-file-size-bytes": "104857600"}',
                       (SELECT jsonb_agg(jsonb_build_object('size', i * 10485760, 'records', 1))
                          FROM generate_series(1, 12) i)) AS x;
SELECT n->>'expr' AS expr, n->>'kind' AS kind, n->>'state' AS state, n->'value' AS value,
       n->>'from' AS "from", n->>'raw' AS raw, n->'files' AS files
  FROM tms.dsl_explain('countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) > 1',
                       '{}', '{"write.target-file-size-bytes": "big"}',
                       '[{"size": 1}, {"size": 2}]') AS x,
       jsonb_array_elements(x->'nodes') AS n;

-- The combined example, with maintenance disabled by a property.
SELECT x->>'text' AS text
  FROM tms.dsl_explain('!property(''maintenance.disabled'', false) AND ((dataFiles > 100 AND avgDataFileSize < 128MB) OR equalityDeleteFiles > 50 OR (timeSinceLastUpdate > 3d AND snapshots > 50))',
                       '{"dataFiles": 500, "avgDataFileSize": 1048576, "equalityDeleteFiles": 0, "timeSinceLastUpdate": 0, "snapshots": 1}',
                       '{"maintenance.disabled": "true"}') AS x;
SELECT x->>'text' AS text
  FROM tms.dsl_explain('!property(''maintenance.disabled'', false) AND ((dataFiles > 100 AND avgDataFileSize < 128MB) OR equalityDeleteFiles > 50 OR (timeSinceLastUpdate > 3d AND snapshots > 50))',
                       '{"dataFiles": 50, "avgDataFileSize": 1048576, "equalityDeleteFiles": 0, "timeSinceLastUpdate": 300000000, "snapshots": 51}') AS x;

-- A failing lambda only fails the condition when it is reached.
SELECT x->>'text' AS text, x->>'outcome' AS outcome
  FROM tms.dsl_explain('countDataFiles(f -> f.size / f.records > 100) > 0',
                       '{}', '{}', '[{"size": 10, "records": 0}]') AS x;
