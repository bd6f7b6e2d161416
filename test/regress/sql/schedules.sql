-- Schedules, cooldowns and commit events (SQL only; the pool claims
-- nothing here, tms.enabled is off): a rule's schedule and min_interval
-- are validated; a JdbcCatalog table of pointers with tms's trigger turns
-- each pointer change into a commit-job in the committing transaction,
-- coalesced per table; a rolled-back commit makes none; the crontab
-- expansion enqueues cron-jobs in batches.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER sc_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
CREATE SERVER sc_other FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('sc-g', server => 'sc_srv', namespace_pattern => 'sales') > 0 AS g;
SELECT tms.create_policy('sc', 'sc-g', active => false) > 0 AS p;

-- ---------------------------------------------------------------------
-- Validation: nothing is stored by a failing call
-- ---------------------------------------------------------------------
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"cron": "0 2 * * *"}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"crontab": 2}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"crontab": "0 2 * *"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"crontab": "0 2 30 2 *"}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local',
                    schedule => '{"crontab": "0 2 * * *", "time-zone": "Mars/Olympus"}');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"time-zone": "UTC", "on-commit": true}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"on-commit": "yes"}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"on-commit": false}');
SELECT tms.add_rule('sc', 'orphan-cleanup', 'local', schedule => '{"on-commit": true}');
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"on-commit": true}',
                    min_interval => '-1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local', schedule => '{"on-commit": true}',
                    min_interval => '1000 years');
-- without a schedule, a rule still needs a counter
SELECT tms.add_rule('sc', 'snapshot-expiry', 'local');
SELECT count(*) AS rules FROM tms.maintenance_rules;

-- the issue's two rules; defaults of min_interval come from the settings
SELECT tms.add_rule('sc', operation => 'snapshot-expiry', engine => 'local',
       schedule => '{"crontab": "0 2 * * *", "time-zone": "Europe/Berlin"}',
       min_interval => '12 hours', condition => 'snapshots > 100') AS r_nightly \gset
SELECT tms.add_rule('sc', operation => 'compaction', engine => 'spark',
       schedule => '{"on-commit": true}', counters => '{"commits-added": 50}',
       condition => 'dataFiles > 100 AND avgDataFileSize < 128MB') AS r_hot \gset
SELECT tms.add_rule('sc', 'orphan-cleanup', 'local',
                    schedule => '{"crontab": "30 3 * * 0"}') AS r_orphans \gset
SELECT operation, schedule, min_interval, commits_added,
       next_firing = tms.cron_next(schedule ->> 'crontab', now(),
                                   coalesce(schedule ->> 'time-zone', 'UTC')) AS next_firing_ok
  FROM tms.rules WHERE policy = 'sc' ORDER BY id;

-- ---------------------------------------------------------------------
-- Commit events from a JdbcCatalog table of pointers
-- ---------------------------------------------------------------------
CREATE TABLE iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name));
CREATE TABLE not_pointers (catalog_name text, table_name text);
CREATE VIEW pointers_view AS SELECT * FROM iceberg_tables;

SELECT tms.attach_jdbc_catalog('not_pointers', server => 'sc_srv');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.attach_jdbc_catalog('pointers_view', server => 'sc_srv');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'no_srv');
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE sc_stranger;
GRANT USAGE ON FOREIGN SERVER sc_srv TO sc_stranger;
SET ROLE sc_stranger;
SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'sc_srv');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.notify_commit('sc_other', 'sales', 'orders');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS sources FROM tms.commit_sources;

SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'sc_srv', catalog_name => 'prod');
SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'sc_srv');
\echo :LAST_ERROR_SQLSTATE
SELECT server, kind, pointers, catalog_name FROM tms.commit_sources;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'iceberg_tables'::regclass;

CREATE VIEW sc_jobs AS
  SELECT t.table_name, s.task_data ->> 'events' AS events,
         s.task_data ->> 'metadata_location' AS location
    FROM tms.scheduled_tasks s JOIN tms.tables t ON t.id = s.task_instance::bigint
   WHERE s.task_name = 'commit-job' ORDER BY 1;

-- a create: the table joins the group, its commit-job exists in the same
-- transaction; a table of another catalog or namespace makes none
BEGIN;
INSERT INTO iceberg_tables VALUES ('prod', 'sales', 'orders', 's3://w/orders/v1.metadata.json', NULL, 'TABLE');
INSERT INTO iceberg_tables VALUES ('prod', 'hr', 'people', 's3://w/people/v1.metadata.json', NULL, 'TABLE');
INSERT INTO iceberg_tables VALUES ('dev', 'sales', 'orders', 's3://w/dev/v1.metadata.json', NULL, 'TABLE');
INSERT INTO iceberg_tables VALUES ('prod', 'sales', 'v_orders', 's3://w/v/v1.metadata.json', NULL, 'VIEW');
SELECT * FROM sc_jobs;
COMMIT;
SELECT server, namespace, table_name, metadata_location IS NULL AS not_yet_observed
  FROM tms.tables WHERE server = 'sc_srv' ORDER BY table_name;

-- a rolled-back commit makes nothing
DELETE FROM tms.scheduled_tasks WHERE task_name = 'commit-job';
BEGIN;
UPDATE iceberg_tables SET metadata_location = 's3://w/orders/v2.metadata.json',
       previous_metadata_location = metadata_location
 WHERE catalog_name = 'prod' AND table_name = 'orders';
SELECT * FROM sc_jobs;
ROLLBACK;
SELECT count(*) AS after_rollback FROM sc_jobs;

-- a burst of 1,000 commits to one table makes one commit-job
DO $$
BEGIN
    FOR i IN 2..1001 LOOP
        UPDATE iceberg_tables SET metadata_location = format('s3://w/orders/v%s.metadata.json', i),
               previous_metadata_location = metadata_location
         WHERE catalog_name = 'prod' AND table_namespace = 'sales' AND table_name = 'orders';
    END LOOP;
END
$$;
SELECT * FROM sc_jobs;
-- an update that moves no pointer is no commit
UPDATE iceberg_tables SET iceberg_type = 'TABLE' WHERE table_name = 'orders';
SELECT * FROM sc_jobs;

-- a rename drops the old name and creates the new one; a delete drops
UPDATE iceberg_tables SET table_name = 'orders_v2' WHERE catalog_name = 'prod' AND table_name = 'orders';
SELECT table_name, dropped_at IS NOT NULL AS dropped FROM tms.tables
 WHERE server = 'sc_srv' AND table_name LIKE 'orders%' ORDER BY 1;
SELECT * FROM sc_jobs;
DELETE FROM iceberg_tables WHERE catalog_name = 'prod' AND table_name = 'orders_v2';
SELECT table_name, dropped_at IS NOT NULL AS dropped FROM tms.tables
 WHERE server = 'sc_srv' AND table_name LIKE 'orders%' ORDER BY 1;
SELECT * FROM sc_jobs;

-- tms.notify_commit: the entry point of other catalogs' listeners
SELECT tms.notify_commit('sc_srv', 'sales', 'returns', 's3://w/returns/v7.metadata.json') AS watched;
SELECT tms.notify_commit('sc_srv', 'hr', 'salaries') AS watched;
SELECT tms.notify_commit('sc_srv', '', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sc_jobs;
SELECT tms.notify_commit('sc_srv', 'sales', 'refunds') AS watched;
SELECT tms.notify_drop('sc_srv', 'sales', 'refunds');
SELECT * FROM sc_jobs;

-- detaching removes the trigger with the last source of the table
SELECT tms.attach_commit_listener('sc_other');
SELECT server, kind FROM tms.commit_sources ORDER BY 1;
SELECT tms.detach_commit_source('sc_srv'), tms.detach_commit_source('sc_other'),
       tms.detach_commit_source('sc_other');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'iceberg_tables'::regclass;
INSERT INTO iceberg_tables VALUES ('prod', 'sales', 'after', 's3://w/after/v1.metadata.json', NULL, 'TABLE');
SELECT count(*) AS tables_after FROM tms.tables WHERE table_name = 'after';

-- ---------------------------------------------------------------------
-- Cooldown: a finished job's pair waits min_interval
-- ---------------------------------------------------------------------
SELECT (tms._record_evaluation(p.id, :r_hot, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL)).decision,
       t.id AS t_returns
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'sc' AND t.server = 'sc_srv' AND t.table_name = 'returns' \gset
\echo :decision
SELECT tms.finish_operation(pending_job) FROM tms.rule_baselines
 WHERE rule_id = :r_hot AND table_id = :t_returns;
SELECT cooldown_until BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'
       AS compaction_cools_an_hour
  FROM tms.rule_baselines WHERE rule_id = :r_hot AND table_id = :t_returns;

-- ---------------------------------------------------------------------
-- The crontab expansion: batches of cron-jobs, visible in tms.tasks
-- ---------------------------------------------------------------------
UPDATE tms.maintenance_policies SET active = true WHERE name = 'sc';
SELECT count(*) AS observed
  FROM (SELECT tms.observe_table('sc_srv', 'sales', 't' || i, NULL, NULL, NULL)
          FROM generate_series(1, 5) i) o;
SELECT count(*) AS nightly_tables FROM tms.rule_baselines b JOIN tms.tables t ON t.id = b.table_id
 WHERE b.rule_id = :r_nightly AND t.dropped_at IS NULL;
-- not due: the rule is younger than its last firing
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
-- as if the rule had existed since yesterday
UPDATE tms.maintenance_rules SET created_at = now() - interval '10 days' WHERE id IN (:r_nightly, :r_orphans);
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
SELECT count(*) AS cron_jobs FROM tms.tasks WHERE kind = 'cron-job';
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
SELECT enqueued, more FROM tms._expand_cron((SELECT id FROM tms.maintenance_policies WHERE name = 'sc'), 3, false);
-- each (policy, table) has one cron-job carrying the rules that fired
SELECT count(*) AS cron_jobs,
       count(*) FILTER (WHERE jsonb_array_length(data -> 'rules') = 2) AS with_both_rules
  FROM tms.tasks WHERE kind = 'cron-job';
SELECT cron_cursor IS NULL AS expanded,
       cron_fired_at = tms.cron_prev(schedule ->> 'crontab', now(),
                                     coalesce(schedule ->> 'time-zone', 'UTC')) AS fired_latest
  FROM tms.maintenance_rules WHERE id IN (:r_nightly, :r_orphans) ORDER BY id;

-- clean up
DELETE FROM tms.scheduled_tasks WHERE task_name IN ('cron-job', 'commit-job', 'maintenance');
SELECT tms.drop_policy('sc');
DROP VIEW sc_jobs;
DROP VIEW pointers_view;
DROP TABLE iceberg_tables, not_pointers;
REVOKE USAGE ON FOREIGN SERVER sc_srv FROM sc_stranger;
DROP ROLE sc_stranger;
