-- Policy API validation: every rejected input with its SQLSTATE and message;
-- nothing is stored by a failing call.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER pv_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
CREATE SERVER pv_other FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');

-- object groups
SELECT tms.create_object_group('pv group', server => 'pv_srv', namespace_pattern => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_object_group('pv-g', server => 'no_such_server', namespace_pattern => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_object_group('pv-g', server => 'pv_srv', namespace_pattern => '');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_object_group('pv-g', server => 'pv_srv', namespace_pattern => 'sales', table_pattern => 'o*') > 0 AS created;
SELECT tms.create_object_group('pv-g', server => 'pv_srv', namespace_pattern => 'sales');
\echo :LAST_ERROR_SQLSTATE

-- a role without USAGE on the server can neither group its tables nor own a
-- policy on them; another role's group needs its owner's grant
CREATE ROLE tms_pv_user;
GRANT USAGE ON SCHEMA tms TO tms_pv_user;
SET ROLE tms_pv_user;
SELECT tms.create_object_group('pv-u', server => 'pv_srv', namespace_pattern => 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv-u', group_name => 'pv-g');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.grant_object_group('pv-g', 'tms_pv_user');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT tms.grant_object_group('pv-g', 'tms_pv_user');
SET ROLE tms_pv_user;
SELECT tms.create_policy('pv-u', group_name => 'pv-g');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER pv_srv TO tms_pv_user;
SET ROLE tms_pv_user;
SELECT tms.create_policy('pv-u', group_name => 'pv-g', active => false) > 0 AS created;
SELECT owner FROM tms.policies WHERE name = 'pv-u';
RESET ROLE;
-- a grant in use cannot be revoked
SELECT tms.revoke_object_group('pv-g', 'tms_pv_user');
\echo :LAST_ERROR_SQLSTATE

-- policies: names, groups, windows
SELECT tms.create_policy('bad name!', group_name => 'pv-g');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'no-such-group');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "Mars/Olympus", "periods": [{"cron": "0 2 * * *", "duration": 1000}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": []}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 25 * * *", "duration": 1000}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 2 * *", "duration": 1000}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 2 * * *", "duration": 0}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 2 * * *", "duration": 1000, "every": 2}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"time-zone-id": "UTC", "periods": [{"cron": "0 0 30 2 *", "duration": 1000}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', time_window => '{"zone": "UTC"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.create_policy('pv', group_name => 'pv-g', description => 'validation',
       time_window => '{"time-zone-id": "Europe/Moscow", "periods": [{"cron": "0 2 * * 1-5", "duration": 14400000}]}',
       active => false) > 0 AS created;
SELECT tms.create_policy('pv', group_name => 'pv-g');
\echo :LAST_ERROR_SQLSTATE

-- rules: operations, engines, counters, conditions, options, baseline modes
SELECT tms.add_rule('no-such-policy', 'compaction', 'spark', '{"commits-added": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'vacuum', 'spark', '{"commits-added": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'flink', '{"commits-added": 1}');
\echo :LAST_ERROR_SQLSTATE
-- position-delete-rewrite runs locally, with compaction's size options only
SELECT tms.add_rule('pv', 'position-delete-rewrite', 'local', '{"commits-added": 1}', options => '{"strategy": "sort"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"bytes-added": -5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"time-elapsed": 1.5}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"time-elapsed": "1d"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'orphan-cleanup', 'local', '{"commits-added": 10, "time-elapsed": 86400000}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'orphan-cleanup', 'local', '{"bytes-added": 10}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', baseline_mode => 'sometimes');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', condition => 'dataFiles > 100 AND avgDataFileSize <');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', condition => 'dataFiles + 1');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', condition => 'datafiles > 100');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', condition => 'snapshots > ''x''');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"spark.hadoop.fs.s3a.secret.key": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"jobOptions": {"AWS_ACCESS_KEY_ID": "x"}}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"Password": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"oauth.token": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"private-key-file": "/k"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"credential": "a:b"}');
\echo :LAST_ERROR_SQLSTATE
-- at any depth, in arrays too, and inside string values
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"a": [{"password": "x"}]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"conf": ["spark.hadoop.fs.s3a.secret.key=abc"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"header": "Bearer eyJhbGciOi"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '[1]');
\echo :LAST_ERROR_SQLSTATE
-- the credential shapes of Spark, Hadoop, Azure and GCS users: a login in
-- a URL, Azure account keys and SAS tokens, GCS tokens and fs.gs.auth.*
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"uri": "https://user:password@catalog.example/v1"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"conf": ["--webhook=http://alice@hooks.example/x"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"fs.azure.account.key.acct.dfs.core.windows.net": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"spark.hadoop.fs.azure.sas.container.acct.blob.core.windows.net": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"adls.sas-token.acct.dfs.core.windows.net": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"gcs.oauth2.token": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"fs.gs.auth.service.account.email": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"conf": ["spark.hadoop.fs.azure.account.key.acct=abc"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}', options => '{"path": "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=abc"}');
\echo :LAST_ERROR_SQLSTATE

-- nothing above was stored
SELECT count(*) AS rules FROM tms.rules WHERE policy = 'pv';

-- what is not a credential: an Azure container in a URL's user info, a URL
-- without a login, Azure settings that hold no key
SELECT doc, tms._find_credential(doc) AS credential
  FROM (VALUES ('{"location": "abfss://container@acct.dfs.core.windows.net/wh"}'::jsonb),
               ('{"location": "https://catalog.example:8443/v1?x=1"}'),
               ('{"fs.azure.account.auth.type": "OAuth"}'),
               ('{"basis": "sassy"}')) AS t(doc);

-- valid rules
SELECT tms.add_rule('pv', operation => 'compaction', engine => 'spark',
       counters => '{"commits-added": 100, "bytes-added": 1073741824}',
       condition => 'dataFiles > 100 AND avgDataFileSize < 128MB',
       baseline_mode => 'catch-up', options => '{"target-file-size-bytes": "536870912"}') > 0 AS added;
SELECT tms.add_rule('pv', 'orphan-cleanup', 'local', '{"time-elapsed": 86400000}') > 0 AS added;
SELECT tms.add_rule('pv', 'snapshot-expiry', 'local', '{"time-elapsed": 3600000}',
       'snapshots > 1 AND oldestSnapshotAge > days(5)', 'going-forward') > 0 AS added;
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 10}',
       'countDataFiles(f -> f.size < 64MB AND f.hasDeletes) > 5') > 0 AS added;
SELECT policy, operation, engine, options, commits_added, bytes_added, time_elapsed_ms,
       condition, needs, baseline_mode
  FROM tms.rules WHERE policy = 'pv' ORDER BY id;

-- only the owner changes a policy
SET ROLE tms_pv_user;
SELECT tms.set_policy_active('pv', true);
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('pv', 'compaction', 'spark', '{"commits-added": 1}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT tms.set_policy_active('pv', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tms.set_policy_active('nope', true);
\echo :LAST_ERROR_SQLSTATE

-- groups in use cannot be dropped
SELECT tms.drop_object_group('pv-g');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.evaluate_now('nope');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM tms.evaluate_now('pv');

-- clean up
SELECT tms.drop_policy('pv');
SELECT tms.drop_policy('pv-u');
SELECT tms.drop_object_group('pv-g');
SELECT count(*) FROM tms.maintenance_rules r JOIN tms.maintenance_policies p ON p.id = r.policy_id
 WHERE p.name IN ('pv', 'pv-u');
DROP SERVER pv_srv;
DROP SERVER pv_other;
REVOKE USAGE ON SCHEMA tms FROM tms_pv_user;
DROP ROLE tms_pv_user;
