-- Roles and tms objects, at the SQL level (doc/security.md): one acting
-- role records what a call creates; a purge job is seen and re-driven only
-- by those it concerns; another role's group is used with its owner's
-- consent; roles that own tms objects are dropped, emptied and reassigned
-- as PostgreSQL does for its own objects.  The workers are off
-- (tms.enabled = off): nothing here runs a task.  What needs the workers
-- or a catalog is in test/integration/test_roles.py.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE ROLE tms_ro_app;
CREATE ROLE tms_ro_report;
CREATE ROLE tms_ro_other;
CREATE ROLE tms_ro_heir;
CREATE ROLE tms_ro_srvowner;
CREATE ROLE tms_ro_monitor IN ROLE pg_monitor;
CREATE SERVER ro_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
GRANT USAGE ON FOREIGN SERVER ro_srv
    TO tms_ro_app, tms_ro_report, tms_ro_other, tms_ro_heir;
GRANT CREATE ON SCHEMA public TO tms_ro_report;

-- ---------------------------------------------------------------------
-- One acting role
-- ---------------------------------------------------------------------

-- The attack of the review: a SECURITY DEFINER function of tms_ro_report
-- that creates a policy, called by tms_ro_app.  The policy belongs to the
-- function's owner, whose privileges (and user mapping) the call used;
-- 0.1.0 recorded the role that called the function.
SET ROLE tms_ro_report;
SELECT tms.create_object_group('ro-report', server => 'ro_srv', namespace_pattern => 'reports') > 0 AS created;
CREATE FUNCTION public.ro_make_policy(name text) RETURNS integer
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
    AS $$ SELECT tms.create_policy(name, group_name => 'ro-report', active => false) $$;
RESET ROLE;
SET ROLE tms_ro_app;
SELECT public.ro_make_policy('ro-definer') > 0 AS created;
SELECT current_user, owner FROM tms.policies WHERE name = 'ro-definer';
-- the app itself may not use the group, only through the function
SELECT tms.create_policy('ro-app-direct', group_name => 'ro-report');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- SET ROLE changes the acting role too: the superuser session records it
SET ROLE tms_ro_app;
SELECT tms.create_object_group('ro-app', server => 'ro_srv', namespace_pattern => 'app') > 0 AS created;
SELECT tms.create_policy('ro-app', group_name => 'ro-app', active => false) > 0 AS created;
RESET ROLE;
SELECT name, owner FROM tms.policies WHERE name LIKE 'ro-%' ORDER BY name;
SELECT name, owner FROM tms.object_groups WHERE name LIKE 'ro-%' ORDER BY name;
-- each policy got its evaluation task
SELECT count(*) FROM tms.scheduled_tasks t JOIN tms.maintenance_policies p
    ON t.task_name = 'policy-expand' AND t.task_instance = p.id::text
 WHERE p.name IN ('ro-definer', 'ro-app');

-- ---------------------------------------------------------------------
-- Another role's group: used with its owner's consent
-- ---------------------------------------------------------------------

SET ROLE tms_ro_other;
SELECT tms.create_policy('ro-other', group_name => 'ro-app', active => false);
\echo :LAST_ERROR_SQLSTATE
-- nor may it grant the group to itself, or change or drop it
SELECT tms.grant_object_group('ro-app', 'tms_ro_other');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_group_member('ro-app', 'app', 'extra');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.drop_object_group('ro-app');
\echo :LAST_ERROR_SQLSTATE
-- nor change another role's policy
SELECT tms.set_policy_active('ro-app', true);
\echo :LAST_ERROR_SQLSTATE
SELECT tms.drop_policy('ro-app');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM tms.evaluate_now('ro-app');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE tms_ro_app;
-- its owner evaluates it (here: inactive, so nothing)
SELECT * FROM tms.evaluate_now('ro-app');
SELECT tms.grant_object_group('ro-app', 'tms_ro_other');
RESET ROLE;
SET ROLE tms_ro_other;
SELECT tms.create_policy('ro-other', group_name => 'ro-app', active => false) > 0 AS created;
RESET ROLE;
-- the owner cannot drop its group while policies use it (its own and the
-- grantee's), nor take the grant back while the grantee's policy uses it
SET ROLE tms_ro_app;
SELECT tms.drop_object_group('ro-app');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.revoke_object_group('ro-app', 'tms_ro_other');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT p.name, p.owner, g.name AS group_name, g.owner AS group_owner, g.grantees
  FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id
 WHERE p.name LIKE 'ro-%' ORDER BY p.name;

-- ---------------------------------------------------------------------
-- Purge jobs: seen by their requester, the server's owner and pg_monitor
-- ---------------------------------------------------------------------

CREATE SERVER ro_purge FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
ALTER SERVER ro_purge OWNER TO tms_ro_srvowner;
-- a FAILED job requested by tms_ro_app (as the workers leave one)
\set ro_job 7001
INSERT INTO tms.iceberg_cleanup_job (id, server, namespace, table_name, table_location,
                                     metadata_location, requested_by, state, finished_at,
                                     last_error, attempts)
    VALUES (:ro_job, 'ro_purge', 'ns', 't', '/nowhere/t', '/nowhere/t/metadata/v1.metadata.json',
            'tms_ro_app', 'FAILED', now(), 'storage said no', 3);
SET ROLE tms_ro_app;
SELECT state, blocks_recreate, attempts, last_error FROM tms.purge_status('ro_purge', 'ns', 't');
RESET ROLE;
SET ROLE tms_ro_srvowner;
SELECT state, blocks_recreate FROM tms.purge_status('ro_purge', 'ns', 't');
RESET ROLE;
SET ROLE tms_ro_monitor;
SELECT state, blocks_recreate FROM tms.purge_status('ro_purge', 'ns', 't');
RESET ROLE;
SET ROLE tms_ro_other;
SELECT count(*) AS rows_seen FROM tms.purge_status('ro_purge', 'ns', 't');
-- nor can it re-drive the job: to it, the job does not exist
SELECT tms.retry_purge(:ro_job);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- pg_monitor sees but does not re-drive
SET ROLE tms_ro_monitor;
SELECT tms.retry_purge(:ro_job);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT state, attempts FROM tms.iceberg_cleanup_job WHERE id = :ro_job;
-- the requester re-drives it: PENDING again, and its task is scheduled
SET ROLE tms_ro_app;
SELECT tms.retry_purge(:ro_job);
SELECT state, blocks_recreate, attempts FROM tms.purge_status('ro_purge', 'ns', 't');
RESET ROLE;
SELECT state, attempts, phase, last_error FROM tms.iceberg_cleanup_job WHERE id = :ro_job;
SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'purge' AND task_instance = :'ro_job';
-- the server's owner may re-drive a job too
UPDATE tms.iceberg_cleanup_job SET state = 'FAILED', finished_at = now() WHERE id = :ro_job;
SET ROLE tms_ro_srvowner;
SELECT tms.retry_purge(:ro_job);
RESET ROLE;
SELECT state FROM tms.iceberg_cleanup_job WHERE id = :ro_job;

-- ---------------------------------------------------------------------
-- Dropping roles that own tms objects
-- ---------------------------------------------------------------------

-- tms_ro_app owns a group and a policy, and requested a purge that is
-- still PENDING; tms_ro_other owns a policy and is granted a group
DROP ROLE tms_ro_app;
\echo :LAST_ERROR_SQLSTATE
DROP ROLE tms_ro_other;
\echo :LAST_ERROR_SQLSTATE
DROP ROLE IF EXISTS tms_ro_nobody, tms_ro_other;
\echo :LAST_ERROR_SQLSTATE

-- DROP OWNED BY the owner of a group that another role's policy uses is
-- refused without CASCADE, and changes nothing
DROP OWNED BY tms_ro_app;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM tms.maintenance_policies WHERE name IN ('ro-app', 'ro-other');

-- DROP OWNED BY drops the policies and groups of the role and takes its
-- grants back; tms_ro_other keeps nothing here
DROP OWNED BY tms_ro_other;
SELECT name FROM tms.maintenance_policies WHERE name LIKE 'ro-%' ORDER BY name;
SELECT name, grantees FROM tms.object_groups WHERE name LIKE 'ro-%' ORDER BY name;
DROP ROLE tms_ro_other;

-- a policy of another role on the app's group again, then CASCADE drops it
-- with the group; the policies' evaluation tasks go with them
CREATE ROLE tms_ro_other;
GRANT USAGE ON FOREIGN SERVER ro_srv TO tms_ro_other;
SET ROLE tms_ro_app;
SELECT tms.grant_object_group('ro-app', 'tms_ro_other');
RESET ROLE;
SET ROLE tms_ro_other;
SELECT tms.create_policy('ro-other', group_name => 'ro-app', active => false) > 0 AS created;
RESET ROLE;
SELECT id AS ro_other_policy FROM tms.maintenance_policies WHERE name = 'ro-other' \gset
DROP OWNED BY tms_ro_app CASCADE;
SELECT name, owner FROM tms.maintenance_policies WHERE name LIKE 'ro-%' ORDER BY name;
SELECT name FROM tms.object_groups WHERE name LIKE 'ro-%' ORDER BY name;
SELECT count(*) FROM tms.scheduled_tasks
 WHERE task_name = 'policy-expand' AND task_instance = :'ro_other_policy';
-- the purge job it requested still runs: DROP ROLE waits for it
DROP ROLE tms_ro_app;
\echo :LAST_ERROR_SQLSTATE

-- REASSIGN OWNED BY gives a role's groups, policies and running purges
-- to another role
REASSIGN OWNED BY tms_ro_app TO tms_ro_heir;
SELECT requested_by FROM tms.iceberg_cleanup_job WHERE id = :ro_job;
DROP ROLE tms_ro_app;
SET ROLE tms_ro_report;
DROP FUNCTION public.ro_make_policy(text);
RESET ROLE;
REASSIGN OWNED BY tms_ro_report TO tms_ro_heir;
SELECT name, owner FROM tms.policies WHERE name LIKE 'ro-%' ORDER BY name;
SELECT name, owner FROM tms.object_groups WHERE name LIKE 'ro-%' ORDER BY name;
REVOKE ALL ON SCHEMA public FROM tms_ro_report;
REVOKE ALL ON FOREIGN SERVER ro_srv FROM tms_ro_report;
DROP ROLE tms_ro_report;
-- the heir owns them now: it changes and drops them
SET ROLE tms_ro_heir;
SELECT tms.set_policy_active('ro-definer', false);
SELECT tms.drop_policy('ro-definer');
SELECT tms.drop_object_group('ro-report');
RESET ROLE;

-- a job that ended no longer holds its requester
UPDATE tms.iceberg_cleanup_job SET state = 'SUCCEEDED', finished_at = now() WHERE id = :ro_job;
DELETE FROM tms.scheduled_tasks WHERE task_name = 'purge' AND task_instance = :'ro_job';
DROP OWNED BY tms_ro_heir, tms_ro_other;
DROP ROLE tms_ro_heir, tms_ro_other;
SELECT state, NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = requested_by) AS requester_gone
  FROM tms.iceberg_cleanup_job WHERE id = :ro_job;

-- clean up
DELETE FROM tms.iceberg_cleanup_job WHERE id = :ro_job;
DROP SERVER ro_srv;
DROP SERVER ro_purge;
DROP ROLE tms_ro_srvowner, tms_ro_monitor;
SELECT count(*) FROM tms.maintenance_policies WHERE name LIKE 'ro-%';
SELECT count(*) FROM tms.object_groups WHERE name LIKE 'ro-%';
