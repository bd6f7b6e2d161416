-- events: tms.events and the webhook settings, the tms_webhook wrapper's
-- options, the payloads the job and purge triggers write to the webhook
-- outbox, and who may see what.  The notifications themselves (and their
-- delivery) are tested by test/integration/test_events.py: psql prints a
-- notification with the sender's pid.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- settings
SHOW tms.events;
SHOW tms.webhook_concurrency;
SHOW tms.webhook_max_attempts;
SHOW tms.webhook_retention;
SET tms.events = 'all';
ALTER SYSTEM SET tms.events = 'jobs';
ALTER SYSTEM SET tms.events = 'job,,task';
SELECT kind, builtin, max_concurrency FROM tms.task_kinds WHERE kind = 'webhook';

-- the wrapper: server options
CREATE SERVER hook_bad FOREIGN DATA WRAPPER tms_webhook OPTIONS (events 'job-failed, job-exploded');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER hook_bad FOREIGN DATA WRAPPER tms_webhook OPTIONS (events ' , ');
CREATE SERVER hook_bad FOREIGN DATA WRAPPER tms_webhook OPTIONS (event 'job-failed');
CREATE SERVER hook_bad FOREIGN DATA WRAPPER tms_webhook OPTIONS (url 'https://h.example/x');
CREATE SERVER hook_bad FOREIGN DATA WRAPPER tms_webhook OPTIONS (request_timeout 'soon');
CREATE SERVER hook_failed FOREIGN DATA WRAPPER tms_webhook;
CREATE SERVER hook_all FOREIGN DATA WRAPPER tms_webhook
    OPTIONS (events 'job-succeeded,job-failed,job-skipped,job-cancelled,purge-succeeded,purge-failed',
             request_timeout '2s');

-- user mappings: the URL is required and never echoed
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed OPTIONS (token 'tok-SECRET-1');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed OPTIONS (url 'ftp://h.example/SECRET-2');
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed OPTIONS (url 'https:///SECRET-3');
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed OPTIONS (url 'https://h.example/SECRET 4');
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed OPTIONS (url 'https://h.example/', events 'job-failed');
CREATE USER MAPPING FOR PUBLIC SERVER hook_failed
    OPTIONS (url 'https://h.example/hooks/SECRET-5', token 'tok-SECRET-6');
CREATE USER MAPPING FOR PUBLIC SERVER hook_all OPTIONS (url 'http://127.0.0.1:9/all');

-- who may: creating a webhook needs USAGE on the wrapper, which nobody
-- has; the mappings' options are the owner's to read; the outbox is the
-- extension owner's, its view pg_monitor's
CREATE ROLE events_user;
CREATE ROLE events_monitor IN ROLE pg_monitor;
SET ROLE events_user;
CREATE SERVER hook_mine FOREIGN DATA WRAPPER tms_webhook;
SELECT srvname, umoptions FROM pg_user_mappings WHERE srvname LIKE 'hook%' ORDER BY 1;
SELECT count(*) FROM tms.webhook_outbox;
SELECT count(*) FROM tms.webhook_deliveries;
SET ROLE events_monitor;
SELECT count(*) FROM tms.webhook_deliveries;
SELECT count(*) FROM tms.webhook_outbox;
RESET ROLE;

-- a job: recorded pending (no webhook), then running, back to pending
-- after a failed attempt, then failed: the outbox gets the last change
-- once per server that asks for job-failed
INSERT INTO tms.tables (server, namespace, table_name) VALUES ('cat', 'sales', 'orders');
INSERT INTO tms.table_maintenance_job (id, table_id, operation, engine)
    SELECT 101, id, 'snapshot-expiry', 'local' FROM tms.tables WHERE table_name = 'orders';
UPDATE tms.table_maintenance_job SET state = 'running', attempts = 1 WHERE id = 101;
UPDATE tms.table_maintenance_job SET state = 'pending', last_error = 'catalog unavailable' WHERE id = 101;
UPDATE tms.table_maintenance_job SET state = 'running', attempts = 2 WHERE id = 101;
SELECT count(*) FROM tms.webhook_outbox;
UPDATE tms.table_maintenance_job
   SET state = 'failed', finished_at = now(), last_error = E'commit refused:\n"409"'
 WHERE id = 101;
SELECT server, event, state, attempts, payload - 'at' AS payload, payload ? 'at' AS has_at
  FROM tms.webhook_outbox ORDER BY server;
-- each has its delivery task, due now
SELECT t.task_name, t.task_instance = o.id::text AS instance_is_id, t.execution_time <= now() AS due
  FROM tms.webhook_outbox o JOIN tms.scheduled_tasks t ON t.task_name = 'webhook'
                                                       AND t.task_instance = o.id::text
 ORDER BY o.server;
-- the view, as pg_monitor reads it
SET ROLE events_monitor;
SELECT server, event, state, attempts, last_status, last_error, next_attempt_at IS NOT NULL AS next,
       finished_at, running_on, payload->>'type' AS type
  FROM tms.webhook_deliveries ORDER BY server;
RESET ROLE;

-- a success goes to hook_all only; a change that is not a state change
-- (same state), and one rolled back, queue nothing
TRUNCATE tms.webhook_outbox;
INSERT INTO tms.table_maintenance_job (id, table_id, operation, engine, state)
    SELECT 102, id, 'manifest-rewrite', 'local', 'running' FROM tms.tables WHERE table_name = 'orders';
UPDATE tms.table_maintenance_job SET state = 'running', attempts = 3 WHERE id = 102;
BEGIN;
UPDATE tms.table_maintenance_job SET state = 'failed', finished_at = now() WHERE id = 102;
ROLLBACK;
SELECT count(*) FROM tms.webhook_outbox;
UPDATE tms.table_maintenance_job SET state = 'succeeded', finished_at = now(), last_error = 'old' WHERE id = 102;
SELECT server, event, payload->>'old' AS old, payload->>'new' AS new, payload->'error' AS error
  FROM tms.webhook_outbox;

-- a job recorded finished (a restored dump) queues nothing
TRUNCATE tms.webhook_outbox;
INSERT INTO tms.table_maintenance_job (id, table_id, operation, engine, state, finished_at)
    SELECT 103, id, 'orphan-cleanup', 'local', 'failed', now() FROM tms.tables WHERE table_name = 'orders';
SELECT count(*) FROM tms.webhook_outbox;

-- a purge
INSERT INTO tms.iceberg_cleanup_job (id, server, namespace, table_name, table_location,
                                     metadata_location, requested_by)
    VALUES (201, 'cat', 'sales', 'orders_2019', '/nowhere/t', '/nowhere/t/metadata/v1.metadata.json',
            current_user::text::regrole);
UPDATE tms.iceberg_cleanup_job SET state = 'RUNNING' WHERE id = 201;
UPDATE tms.iceberg_cleanup_job
   SET state = 'FAILED', finished_at = now(), attempts = 5, files_deleted = 12,
       bytes_freed = 3400, last_error = 'metadata gone'
 WHERE id = 201;
SELECT server, event, payload - 'at' AS payload FROM tms.webhook_outbox ORDER BY server;

-- long and unprintable texts are clipped and escaped: a payload stays
-- far below NOTIFY's 8000 bytes
TRUNCATE tms.webhook_outbox;
INSERT INTO tms.tables (server, namespace, table_name)
    VALUES ('cat', repeat(E'\x01', 3000), repeat('t', 3000));
INSERT INTO tms.table_maintenance_job (id, table_id, operation, engine, state)
    SELECT 104, id, 'snapshot-expiry', repeat('e', 3000), 'running'
      FROM tms.tables WHERE table_name = repeat('t', 3000);
UPDATE tms.table_maintenance_job
   SET state = 'failed', finished_at = now(), last_error = repeat(E'\u00e9"\\', 5000),
       reason = repeat(E'\x02', 5000)
 WHERE id = 104;
SELECT octet_length(payload::text) < 8000 AS fits,
       length(payload->>'namespace') AS namespace, length(payload->>'table') AS table,
       length(payload->>'engine') AS engine, length(payload->>'error') AS error,
       length(payload->>'reason') AS reason, right(payload->>'error', 4) AS error_end
  FROM tms.webhook_outbox WHERE server = 'hook_failed';

-- a text that fits its budget exactly is not clipped
TRUNCATE tms.webhook_outbox;
INSERT INTO tms.tables (server, namespace, table_name) VALUES ('cat', 'sales', repeat('u', 256));
INSERT INTO tms.table_maintenance_job (id, table_id, operation, engine, state)
    SELECT 105, id, 'snapshot-expiry', 'local', 'running' FROM tms.tables
     WHERE table_name = repeat('u', 256);
UPDATE tms.table_maintenance_job SET state = 'failed', finished_at = now() WHERE id = 105;
SELECT payload->>'table' = repeat('u', 256) AS whole FROM tms.webhook_outbox WHERE server = 'hook_failed';

-- dropping a webhook server leaves its deliveries (they fail for good)
DROP SERVER hook_all CASCADE;
SELECT server, state FROM tms.webhook_outbox ORDER BY server;

-- clean up
TRUNCATE tms.webhook_outbox;
DELETE FROM tms.scheduled_tasks WHERE task_name = 'webhook';
DELETE FROM tms.table_maintenance_job WHERE id BETWEEN 101 AND 105;
DELETE FROM tms.iceberg_cleanup_job WHERE id = 201;
DELETE FROM tms.tables WHERE server = 'cat';
DROP SERVER hook_failed CASCADE;
DROP ROLE events_user;
DROP ROLE events_monitor;
