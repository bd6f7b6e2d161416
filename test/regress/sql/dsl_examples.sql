-- Policy condition DSL: every example of doc/dsl.md ("Examples") compiles and
-- behaves as written, with metrics chosen to make it true and then false.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

-- What each example needs, so the evaluation loads only that.
SELECT c.ok, c.type, c.needs, c.uses_files, c.variables, e.expr
  FROM (VALUES
    (1, 'dataFiles > 100 AND avgDataFileSize < 128MB'),
    (2, 'dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5'),
    (3, 'equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000'),
    (4, 'equalityDeleteFilesSize + positionDeleteFilesSize > 1GB'),
    (5, 'dataFilesWithDeletes > 100000'),
    (6, 'countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5'),
    (7, '!property(''maintenance.disabled'', false) AND ((dataFiles > 100 AND avgDataFileSize < 128MB) OR equalityDeleteFiles > 50 OR (timeSinceLastUpdate > 3d AND snapshots > 50))'),
    (8, 'snapshots > 1 AND oldestSnapshotAge > days(5)'),
    (9, 'countDataFiles(f -> f.size > 1GB) > 10'),
    (10, 'countDataFiles(f -> f.records < 1000) > 50'),
    (11, 'manifests > 100')) AS e(n, expr),
  LATERAL tms.dsl_check(e.expr) AS c
 ORDER BY e.n;

-- 1. many small files
SELECT tms.dsl_eval('dataFiles > 100 AND avgDataFileSize < 128MB',
                    '{"dataFiles": 150, "avgDataFileSize": 67108864}') AS small_files,
       tms.dsl_eval('dataFiles > 100 AND avgDataFileSize < 128MB',
                    '{"dataFiles": 80, "avgDataFileSize": 67108864}') AS too_few,
       tms.dsl_eval('dataFiles > 100 AND avgDataFileSize < 128MB',
                    '{"dataFiles": 150, "avgDataFileSize": 220200960}') AS too_big;

-- 2. more than half of the files under the target size from the table
-- properties: 12 files, 7 of them under 100 MiB, 8 under the 512MB default.
CREATE TEMP TABLE files12 AS
SELECT jsonb_agg(jsonb_build_object('size', s, 'records', 1000)) AS files
  FROM (SELECT (i * 10 * 1048576)::bigint AS s FROM generate_series(1, 7) i
        UNION ALL SELECT 200 * 1048576
        UNION ALL SELECT 600 * 1048576 FROM generate_series(1, 4)) x;
SELECT tms.dsl_eval('dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5',
                    '{"dataFiles": 12}', '{"write.target-file-size-bytes": "104857600"}', files) AS seven_of_12,
       tms.dsl_eval('dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5',
                    '{"dataFiles": 12}', '{"write.target-file-size-bytes": "10485760"}', files) AS none_of_12,
       tms.dsl_eval('dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5',
                    '{"dataFiles": 12}', '{}', files) AS default_8_of_12,
       tms.dsl_eval('dataFiles > 10 AND countDataFiles(f -> f.size < property(''write.target-file-size-bytes'', 512MB)) / dataFiles > 0.5',
                    '{"dataFiles": 10}', '{}', files) AS only_10_files
  FROM files12;

-- 3. equality deletes pile up
SELECT tms.dsl_eval('equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000',
                    '{"equalityDeleteFiles": 11, "equalityDeleteRecords": 0}') AS many_files,
       tms.dsl_eval('equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000',
                    '{"equalityDeleteFiles": 0, "equalityDeleteRecords": 100001}') AS many_records,
       tms.dsl_eval('equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000',
                    '{"equalityDeleteFiles": 10, "equalityDeleteRecords": 100000}') AS neither;

-- 4. delete files over 1 GiB in total
SELECT tms.dsl_eval('equalityDeleteFilesSize + positionDeleteFilesSize > 1GB',
                    '{"equalityDeleteFilesSize": 536870912, "positionDeleteFilesSize": 536870913}') AS over,
       tms.dsl_eval('equalityDeleteFilesSize + positionDeleteFilesSize > 1GB',
                    '{"equalityDeleteFilesSize": 536870912, "positionDeleteFilesSize": 536870912}') AS exactly_1gb;

-- 5. deletes apply to many data files
SELECT tms.dsl_eval('dataFilesWithDeletes > 100000', '{"dataFilesWithDeletes": 100001}') AS over,
       tms.dsl_eval('dataFilesWithDeletes > 100000', '{"dataFilesWithDeletes": 100000}') AS at_limit;

-- 6. small files with deletes: hasDeletes is given, or derived from the
-- position / equality flags when absent
SELECT tms.dsl_eval('countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5', '{}', '{}',
                    (SELECT jsonb_agg(jsonb_build_object('size', 1048576, 'records', 1,
                                                         'hasPositionDeletes', i % 2 = 0,
                                                         'hasEqualityDeletes', i % 2 = 1))
                       FROM generate_series(1, 6) i)) AS six_derived,
       tms.dsl_eval('countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5', '{}', '{}',
                    (SELECT jsonb_agg(jsonb_build_object('size', 1048576, 'hasDeletes', i > 1))
                       FROM generate_series(1, 6) i)) AS five_given,
       tms.dsl_eval('countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5', '{}', '{}',
                    (SELECT jsonb_agg(jsonb_build_object('size', 64 * 1048576, 'hasDeletes', true))
                       FROM generate_series(1, 6) i)) AS six_too_big;

-- 7. combined, unless maintenance is disabled by a table property
CREATE TEMP TABLE combined(expr) AS VALUES (
'!property(''maintenance.disabled'', false) AND (
    (dataFiles > 100 AND avgDataFileSize < 128MB)
    OR equalityDeleteFiles > 50
    OR (timeSinceLastUpdate > 3d AND snapshots > 50)
)');
CREATE TEMP TABLE quiet(m) AS VALUES (jsonb_build_object(
    'dataFiles', 10, 'avgDataFileSize', 1.0, 'equalityDeleteFiles', 0,
    'timeSinceLastUpdate', 0, 'snapshots', 0));
SELECT tms.dsl_eval(expr, m) AS quiet_table,
       tms.dsl_eval(expr, m || '{"dataFiles": 101}') AS small_files,
       tms.dsl_eval(expr, m || '{"equalityDeleteFiles": 51}') AS deletes,
       tms.dsl_eval(expr, m || '{"timeSinceLastUpdate": 259200001, "snapshots": 51}') AS stale,
       tms.dsl_eval(expr, m || '{"timeSinceLastUpdate": 259200000, "snapshots": 51}') AS not_stale_yet,
       tms.dsl_eval(expr, m || '{"equalityDeleteFiles": 51}', '{"maintenance.disabled": "true"}') AS disabled,
       tms.dsl_eval(expr, m || '{"equalityDeleteFiles": 51}', '{"maintenance.disabled": "FALSE"}') AS enabled,
       tms.dsl_eval(expr, m || '{"equalityDeleteFiles": 51}', '{"maintenance.disabled": "maybe"}') AS unconvertible
  FROM combined, quiet;

-- 8. snapshots to expire
SELECT tms.dsl_eval('snapshots > 1 AND oldestSnapshotAge > days(5)',
                    '{"snapshots": 2, "oldestSnapshotAge": 432000001}') AS old,
       tms.dsl_eval('snapshots > 1 AND oldestSnapshotAge > days(5)',
                    '{"snapshots": 2, "oldestSnapshotAge": 432000000}') AS five_days,
       tms.dsl_eval('snapshots > 1 AND oldestSnapshotAge > days(5)',
                    '{"snapshots": 1, "oldestSnapshotAge": 999999999}') AS one_snapshot;

-- 9. and 10. counting files by size and by records
CREATE TEMP TABLE files60 AS
SELECT jsonb_agg(jsonb_build_object('size', CASE WHEN i <= 11 THEN 2147483648 ELSE 1024 END,
                                    'records', CASE WHEN i <= 51 THEN 999 ELSE 1000 END)) AS files
  FROM generate_series(1, 60) i;
SELECT tms.dsl_eval('countDataFiles(f -> f.size > 1GB) > 10', '{}', '{}', files) AS eleven_big,
       tms.dsl_eval('countDataFiles(f -> f.size > 1GB) > 11', '{}', '{}', files) AS not_twelve,
       tms.dsl_eval('countDataFiles(f -> f.records < 1000) > 50', '{}', '{}', files) AS fifty_one_small,
       tms.dsl_eval('countDataFiles(f -> f.records < 1000) > 51', '{}', '{}', files) AS not_fifty_two
  FROM files60;
