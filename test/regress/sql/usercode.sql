-- User code (task handlers) runs as PostgreSQL runs user code for VACUUM:
-- as its owner, in a security-restricted operation, in a GUC nest level of
-- its own; tms's own statements never depend on a search_path
-- (src/bridge/usercode.h).  Here in a superuser's session, through CALL
-- tms.run_pending() and tms.run_task(); test/integration/test_roles.py
-- runs the same through a pool worker.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS tms;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- an ordinary role with a function named like a built-in one
CREATE ROLE uc_alice NOSUPERUSER;
CREATE ROLE uc_bob NOSUPERUSER;
CREATE SCHEMA uc_evil AUTHORIZATION uc_alice;
CREATE TABLE public.uc_witness (who text, sess text);
GRANT INSERT, SELECT ON public.uc_witness TO uc_alice;
CREATE TABLE public.uc_seen (instance text, who text, search_path text, work_mem text,
                             statement_timeout text);
GRANT INSERT ON public.uc_seen TO uc_alice, uc_bob;
SET ROLE uc_alice;
CREATE FUNCTION uc_evil.now() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO public.uc_witness VALUES (current_user, session_user);
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE uc_alice SUPERUSER';
  END IF;
  RETURN pg_catalog.now();
END $$;
CREATE FUNCTION uc_evil.int8eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.uc_witness VALUES ('=', session_user);
  RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR uc_evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = uc_evil.int8eq);
-- puts its schema first in the session's search_path and sets two limits
CREATE PROCEDURE uc_evil.handler(i text, d jsonb) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'uc_evil, pg_catalog', false);
  PERFORM pg_catalog.set_config('work_mem', '77MB', false);
  PERFORM pg_catalog.set_config('statement_timeout', '1ms', false);
  EXECUTE 'SET statement_timeout = ''2ms''';
END $$;
-- an overload of the handler's name that the recorded signature does not name
CREATE PROCEDURE uc_evil.handler(i text, d text) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.uc_witness VALUES ('overload', session_user);
END $$;
-- tries each way out of its owner's identity, as data says
CREATE PROCEDURE uc_evil.escape(i text, d jsonb) LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE d ->> 'sql';
  INSERT INTO public.uc_seen (instance, who) VALUES (i, current_user);
END $$;
RESET ROLE;
CREATE PROCEDURE public.uc_record(i text, d jsonb) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.uc_seen
  VALUES (i, current_user, current_setting('search_path'), current_setting('work_mem'),
          current_setting('statement_timeout'));
END $$;
ALTER PROCEDURE public.uc_record(text, jsonb) OWNER TO uc_bob;

SELECT tms.register_task_kind('uc-evil', 'uc_evil.handler(text,jsonb)', 1);
SELECT tms.register_task_kind('uc-bob', 'public.uc_record(text,jsonb)', 1);
SELECT tms.register_task_kind('uc-escape', 'uc_evil.escape(text,jsonb)', 1);
SELECT kind, handler FROM tms.task_kinds WHERE kind LIKE 'uc-%' ORDER BY kind;

-- alice's handler runs first, then bob's, in one CALL
SELECT tms.schedule_task('uc-evil', 'x', '{}', priority => 10);
SELECT tms.schedule_task('uc-evil', 'later', '{}', run_at => now() + interval '1 hour');
SELECT tms.schedule_task('uc-bob', 'y', '{}', priority => 1);
CALL tms.run_pending(10, ARRAY['uc-evil', 'uc-bob']);
-- bob saw the server's settings, not alice's; nothing of alice's ran again
SELECT instance, who, search_path = (SELECT reset_val FROM pg_settings WHERE name = 'search_path')
       AS default_search_path, work_mem, statement_timeout
  FROM public.uc_seen;
SELECT * FROM public.uc_witness;
SELECT rolsuper FROM pg_roles WHERE rolname = 'uc_alice';
-- nor does the session that called keep them
SELECT current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS statement_timeout;
SHOW search_path;

-- a caller whose own search_path puts an untrusted schema first: tms's
-- statements (the claim's now(), its = on bigint) still never run its functions
TRUNCATE public.uc_seen;
SET search_path = uc_evil, pg_catalog, public;
SELECT tms.schedule_task('uc-bob', 'z1', '{}');
CALL tms.run_pending(10, ARRAY['uc-bob']);
SELECT tms.schedule_task('uc-bob', 'z2', '{}');
CALL tms.run_task('uc-bob', 'z2');
RESET search_path;
SELECT instance, who FROM public.uc_seen ORDER BY instance;
SELECT * FROM public.uc_witness;
SELECT rolsuper FROM pg_roles WHERE rolname = 'uc_alice';

-- the ways out of the owner's identity, and temporary objects, are refused
-- (a security-restricted operation); nothing the handler did is kept
TRUNCATE public.uc_seen;
CREATE TEMP TABLE uc_session_temp (a int);     -- the session has a temp schema
SELECT tms.schedule_task('uc-escape', 'set-role', '{"sql": "SET ROLE postgres"}');
CALL tms.run_task('uc-escape', 'set-role');
SELECT tms.schedule_task('uc-escape', 'session-authorization',
                         '{"sql": "SET SESSION AUTHORIZATION postgres"}');
CALL tms.run_task('uc-escape', 'session-authorization');
SELECT tms.schedule_task('uc-escape', 'temp-table',
                         '{"sql": "CREATE TEMP TABLE uc_shadow (a int)"}');
CALL tms.run_task('uc-escape', 'temp-table');
-- a function in the session's temporary schema is never found by tms's
-- statements: functions are never looked up in pg_temp unqualified
SELECT tms.schedule_task('uc-escape', 'temp-now',
  '{"sql": "CREATE FUNCTION pg_temp.now() RETURNS timestamptz LANGUAGE sql AS $f$ INSERT INTO public.uc_witness VALUES (''pg_temp'', session_user) RETURNING pg_catalog.now() $f$"}');
CALL tms.run_task('uc-escape', 'temp-now');
SELECT tms.schedule_task('uc-bob', 'after-temp', '{}');
CALL tms.run_pending(10, ARRAY['uc-bob']);
SELECT instance, who FROM public.uc_seen ORDER BY instance;
SELECT * FROM public.uc_witness;
SELECT kind, instance, consecutive_failures, last_error FROM tms.tasks
 WHERE kind = 'uc-escape' ORDER BY instance;

-- tms's own statements as the extension's owner (here the DROP OWNED BY
-- hook) never run an operator of the caller's: a role puts its schema
-- first, with an = for (regrole, oid), and drops what it owns in tms
CREATE ROLE uc_carol NOSUPERUSER;
CREATE SERVER uc_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
GRANT USAGE ON FOREIGN SERVER uc_srv TO uc_carol;
CREATE SCHEMA uc_carol AUTHORIZATION uc_carol;
GRANT INSERT ON public.uc_witness TO uc_carol;
SET ROLE uc_carol;
SELECT tms.create_object_group('uc-carol', server => 'uc_srv', namespace_pattern => 'c') > 0 AS created;
CREATE FUNCTION uc_carol.regrole_eq(regrole, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.uc_witness VALUES (current_user, session_user);
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE uc_carol SUPERUSER';
  END IF;
  RETURN $1::oid OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR uc_carol.= (LEFTARG = regrole, RIGHTARG = oid, FUNCTION = uc_carol.regrole_eq);
SET search_path = uc_carol, pg_catalog;
SET client_min_messages = error;    -- grants made to carol stay, with warnings
DROP OWNED BY uc_carol;
RESET client_min_messages;
RESET search_path;
RESET ROLE;
SELECT count(*) AS carol_groups FROM tms.object_groups WHERE name = 'uc-carol';
SELECT * FROM public.uc_witness;
SELECT rolsuper FROM pg_roles WHERE rolname = 'uc_carol';
REVOKE ALL ON public.uc_witness FROM uc_carol;
DROP SERVER uc_srv CASCADE;
DROP ROLE uc_carol;

-- every function of tms runs with search_path = pg_catalog, pg_temp, but
-- those that run no SQL (pure computations, shared-memory readers, SQL
-- functions meant to be inlined) and the two procedures that commit, which
-- set it for each of their transactions themselves
SELECT p.oid::regprocedure AS without_search_path
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'tms')
   AND d.deptype = 'e'
   AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c
                    WHERE c IN ('search_path=pg_catalog, pg_temp', 'search_path=pg_catalog'))
 ORDER BY p.oid::regprocedure::text;

-- clean up
SELECT tms.unregister_task_kind(k) FROM unnest(ARRAY['uc-evil', 'uc-bob', 'uc-escape']) k;
DROP TABLE uc_session_temp;
DROP FUNCTION pg_temp.now();
DROP SCHEMA uc_evil CASCADE;
DROP PROCEDURE public.uc_record(text, jsonb);
DROP TABLE public.uc_witness, public.uc_seen;
DROP ROLE uc_alice;
DROP ROLE uc_bob;
