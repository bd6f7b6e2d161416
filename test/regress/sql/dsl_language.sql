-- Policy condition DSL: literals, suffixes, operators and their precedence,
-- LONG/DOUBLE mixing, functions, property() typing and fallback, division
-- by zero, overflow, and lambdas with outer references.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

-- Every test below is a condition that must be true; a wrong answer shows
-- up as f.
CREATE TEMP TABLE cases(n serial, expr text);
INSERT INTO cases(expr) VALUES
    -- literals and suffixes (size x1024^n, duration in ms)
    ('1KB == 1024 AND 1kb == 1024'),
    ('1MB == 1048576 AND 1mb == 1048576 AND 512MB == 536870912'),
    ('1GB == 1073741824 AND 1gb == 1073741824 AND 100KB == 102400'),
    ('30m == 1800000 AND 24h == 86400000 AND 7d == 604800000 AND 3d == 259200000'),
    ('1.5KB == 1536 AND 0.5 + 0.25 == 0.75 AND 100.0 == 100'),
    ('9223372036854775807 > 0 AND 8589934591GB > 0'),
    ($$'it\'s' == "it's" AND "say \"hi\"" == 'say "hi"' AND 'a\\b' != 'a'$$),
    -- strings compare bytewise, booleans only with == and !=
    ($$'abc' < 'abd' AND 'b' >= 'a' AND 'x' <= 'x' AND true != false$$),
    -- / is always DOUBLE, LONG and DOUBLE mix
    ('7 / 2 == 3.5 AND 8 / 2 == 4 AND 1 + 0.5 == 1.5 AND 3 * 0.5 == 1.5'),
    -- precedence: * / over + -
    ('2 + 3 * 4 == 14 AND 20 - 8 / 4 == 18'),
    -- left associativity
    ('10 - 4 - 3 == 3 AND 100 / 10 / 5 == 2'),
    -- unary minus over * and +
    ('-2 * 3 == -6 AND -2 + 5 == 3 AND 5 - -2 == 7'),
    -- + - over comparisons
    ('1 + 1 > 1 AND 2 * 3 >= 6'),
    -- comparisons over == != (would be a type error the other way round)
    ('1 < 2 == 3 < 4 AND 1 > 2 != 3 < 4'),
    -- == over AND: (false == false) AND true
    ('false == false AND true'),
    -- AND over OR: true OR (false AND false), (false AND false) OR true
    ('true OR false AND false'),
    ('false AND false OR true'),
    -- ! over everything: (!true) == false, (!false) AND true
    ('!true == false AND !false AND true'),
    ('!(true AND false) AND (2 + 3) * 4 == 20'),
    -- keywords in any case
    ('true and false or TRUE Or false'),
    -- unit functions, LONG and DOUBLE arguments
    ('KB(1) == 1024 AND MB(1) == 1048576 AND GB(1) == 1073741824'),
    ('hours(1) == 3600000 AND days(1) == 86400000 AND MB(1.5) == 1572864 AND hours(0.5) == 30m');
SELECT n, tms.dsl_eval(expr, '{}') AS holds, expr FROM cases ORDER BY n;

-- A wrong precedence would change these answers.
SELECT tms.dsl_eval('dataFiles + 1 * 2 == 12', '{"dataFiles": 10}') AS mul_before_add,
       tms.dsl_eval('dataFiles > 5 OR dataFiles > 100 AND false', '{"dataFiles": 10}') AS and_before_or,
       tms.dsl_eval('-dataFiles * -1 == 10', '{"dataFiles": 10}') AS unary_minus_first;

-- property(): the default's type decides, missing or unconvertible values
-- fall back to the default (no whitespace or suffixes in LONG values).
CREATE TEMP TABLE props(p) AS VALUES (jsonb_build_object(
    'write.target-file-size-bytes', '1048576',
    'maintenance.disabled', 'True',
    'bad.long', '512MB',
    'spaced.long', ' 42',
    'neg.long', '-17',
    'ratio', '0.25',
    'exp', '1e3',
    'nan', 'NaN',
    'owner.team', 'data-eng',
    'bool.bad', 'yes',
    'json.number', 12,
    'json.bool', false));
SELECT tms.dsl_eval(e, '{}', p) AS holds, e
  FROM props, unnest(ARRAY[
    $$property('write.target-file-size-bytes', 512MB) == 1048576$$,
    $$property('missing', 512MB) == 536870912$$,
    $$property('maintenance.disabled', false)$$,
    $$property('bad.long', 7) == 7$$,
    $$property('spaced.long', 7) == 7$$,
    $$property('neg.long', 7) == -17$$,
    $$property('ratio', 1.0) == 0.25$$,
    $$property('exp', 1.0) == 1000$$,
    $$property('nan', 2.5) == 2.5$$,
    $$property('ratio', 5) == 5$$,
    $$property('owner.team', 'default') == 'data-eng'$$,
    $$property('nobody', "default") == 'default'$$,
    $$property('bool.bad', true) AND !property('bool.bad', false)$$,
    $$property('json.number', 0) == 12 AND !property('json.bool', true)$$,
    $$MB(property('target-file-size-mb', 128)) == 128MB$$,
    $$property('maintenance.disabled', 1 / 0 > 0)$$]) AS e;

-- properties default to none
SELECT tms.dsl_eval($$property('maintenance.disabled', false)$$, '{}') AS no_properties,
       tms.dsl_eval($$property('maintenance.disabled', false)$$, '{}', NULL) AS null_properties;

-- Division by zero makes the whole condition false, also under OR and !,
-- unless short-circuit evaluation never reaches it.
SELECT tms.dsl_eval('dataFilesSize / dataFiles > 1', '{"dataFiles": 0, "dataFilesSize": 5}') AS div0,
       tms.dsl_eval('dataFilesSize / dataFiles > 1 OR true', '{"dataFiles": 0, "dataFilesSize": 5}') AS div0_or_true,
       tms.dsl_eval('!(dataFilesSize / dataFiles > 1)', '{"dataFiles": 0, "dataFilesSize": 5}') AS not_div0,
       tms.dsl_eval('true OR dataFilesSize / dataFiles > 1', '{"dataFiles": 0, "dataFilesSize": 5}') AS short_circuit,
       tms.dsl_eval('dataFilesSize / dataFiles > 1', '{"dataFiles": 2, "dataFilesSize": 5}') AS no_div0;

-- LONG overflow behaves like division by zero: the condition is false.
SELECT tms.dsl_eval('dataFiles + 1 > 0', '{"dataFiles": 9223372036854775807}') AS add_overflow,
       tms.dsl_eval('dataFiles * 1.0 > 0', '{"dataFiles": 9223372036854775807}') AS as_double,
       tms.dsl_eval('GB(dataFiles) > 0 OR true', '{"dataFiles": 9223372036854775807}') AS unit_overflow,
       tms.dsl_eval('-dataFiles < 0', '{"dataFiles": 9223372036854775807}') AS negate;

-- Lambdas: any parameter name, outer variables and functions inside.
CREATE TEMP TABLE f3(files) AS VALUES ('[
    {"size": 1024, "records": 1},
    {"size": 2048, "records": 0},
    {"size": 4096, "records": 2, "hasPositionDeletes": true}]'::jsonb);
SELECT tms.dsl_eval('countDataFiles(f -> f.size * dataFiles > 6000) == 2', '{"dataFiles": 3}', '{}', files) AS outer_variable,
       tms.dsl_eval('countDataFiles(file -> file.size > dataFiles) == 3', '{"dataFiles": 3}', '{}', files) AS any_name,
       tms.dsl_eval($$countDataFiles(f -> f.size < KB(property('small-kb', 512))) == 1$$, '{}', '{"small-kb": "2"}', files) AS outer_property,
       tms.dsl_eval('countDataFiles(f -> f.hasDeletes) == 1 AND countDataFiles(f -> f.hasEqualityDeletes) == 0', '{}', '{}', files) AS derived_flags,
       tms.dsl_eval('countDataFiles(f -> true) == 3 AND countDataFiles(f -> false) == 0', '{}', '{}', files) AS constant,
       tms.dsl_eval('countDataFiles(f -> f.size / f.records > 1) > 0', '{}', '{}', files) AS per_file_div0,
       tms.dsl_eval('true OR countDataFiles(f -> f.size / f.records > 1) > 0', '{}', '{}', files) AS not_reached,
       tms.dsl_eval('countDataFiles(f -> true) == 0', '{}', '{}', '[]') AS no_files
  FROM f3;
