-- The delete pool of purges and maintenance operations: its settings and
-- its views over shared memory (doc/purge.md, "Deleting").  What the pool
-- does with requests is tested against a throttling storage in
-- test/integration/test_delete_pool.py.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;

SELECT name, setting, unit, context, vartype, min_val, max_val
  FROM pg_settings
 WHERE name IN ('tms.delete_concurrency', 'tms.delete_adaptive',
                'tms.delete_throttle_patience')
 ORDER BY name;

-- read by the workers: not a session's to change
SET tms.delete_concurrency = 8;
SET tms.delete_adaptive = off;

-- nothing deleted from S3 yet: no process in the pool, no target
SELECT count(*) AS processes FROM tms.delete_pool;
SELECT count(*) AS targets FROM tms.delete_targets;

SELECT attrelid::regclass AS view, attname, format_type(atttypid, atttypmod)
  FROM pg_attribute
 WHERE attrelid IN ('tms.delete_pool'::regclass, 'tms.delete_targets'::regclass)
   AND attnum > 0
 ORDER BY attrelid::regclass::text, attnum;

-- monitoring roles can read the views; other roles cannot
CREATE ROLE tms_test_delete_monitor IN ROLE pg_monitor;
CREATE ROLE tms_test_delete_nobody;
SET ROLE tms_test_delete_monitor;
SELECT count(*) AS seen FROM tms.delete_pool;
SELECT count(*) AS seen FROM tms.delete_targets;
SET ROLE tms_test_delete_nobody;
SELECT count(*) AS seen FROM tms.delete_pool;
SELECT count(*) AS seen FROM tms.delete_targets;
RESET ROLE;
DROP ROLE tms_test_delete_monitor, tms_test_delete_nobody;
