"""
test_roles.py -- who tms acts as, where it takes the workers, a catalog
or a cluster of its own to show (doc/security.md "One acting role" and
"What each role may do").  The SQL-level rules (the owner a SECURITY
DEFINER function or SET ROLE records, purge_status and retry_purge by
role, using another role's group, DROP ROLE / DROP OWNED BY / REASSIGN
OWNED BY) are the pg_regress test test/regress/sql/roles.sql.

Each test is the reproduction of an attack or a fault of the review:

  - a task kind registered by a superuser, whose handler procedure's
    owner (an ordinary role) later makes it run ALTER ROLE ... SUPERUSER:
    run by a pool worker, by CALL tms.run_pending() and by CALL
    tms.run_task() in a superuser session, the handler runs as its owner,
    the role stays an ordinary one and the task fails with the permission
    error; the same for tms.maintenance_handler;
  - nothing a handler sets outlives it: a handler that puts its owner's
    schema first in the session's search_path (and sets work_mem and
    statement_timeout) on a pool of one worker; the worker's own next
    statement never runs the owner's now(), the next task of another
    owner sees the server's settings, and an overload of the handler's
    name never runs;
  - a purge requested under SET ROLE r runs as r: only r has a user
    mapping, and the job succeeds; without r's mapping it fails cleanly
    and deletes nothing;
  - tms.evaluate_now is for the policy's owner (it failed for every role
    but a superuser): the owner evaluates with its own mapping, another
    role is refused;
  - tms.catalog_config shows a catalog's configuration without the
    credentials in it (rule options are pg_regress policy_validation);
  - a role dropped where tms is not loaded (no hook) leaves its policy
    ownerless, and the policy's evaluation fails with "the role of policy
    ... no longer exists" instead of running as anyone.

Run: /usr/bin/python3 -m pytest test/integration/test_roles.py
"""

import json
import os
import pwd
import sys
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

FAST = dict(FAST_WORKERS, **{"tms.purge_max_attempts": "3"})
PG_UID = pwd.getpwnam("postgres").pw_uid
SUPERUSER_ERROR = "must be superuser to alter superuser roles"


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def pool_ready(c):
    wait_for(lambda: c.one("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                           " AND state = 'idle'") == 4, what="the pool")


def set_pool(c, enabled):
    """Switch the pool on or off and wait until every worker follows."""
    if enabled:
        c.query("ALTER SYSTEM RESET tms.enabled")
    else:
        c.query("ALTER SYSTEM SET tms.enabled = off")
    c.query("SELECT pg_reload_conf()")
    if enabled:
        pool_ready(c)
    else:
        wait_for(lambda: c.one("SELECT count(*) FROM tms.workers"
                               " WHERE state = 'disabled'") == 5,
                 what="the pool to pause")


def is_superuser(c, role):
    return c.one("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,))


@pytest.fixture
def cluster(new_cluster):
    c = new_cluster(settings=dict(FAST, **{"tms.maintenance_handler": "'public.run_job'"}))
    c.query("CREATE EXTENSION tms")
    # an ordinary role that owns procedures, and a table it writes to
    c.query("""
        CREATE ROLE app_owner;
        GRANT CREATE ON SCHEMA public TO app_owner;
        CREATE TABLE public.seen (what text, who text, pid int DEFAULT pg_backend_pid());
        GRANT INSERT ON public.seen TO app_owner;
    """)
    pool_ready(c)
    return c


# ---------------------------------------------------------------------------
# handlers run as their owner
# ---------------------------------------------------------------------------

RECORD = """
CREATE OR REPLACE PROCEDURE public.handle(instance text, data jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.seen (what, who) VALUES (instance, current_user);
END $$;
"""
# the owner's later edits: each tries to make app_owner a superuser
ESCALATE = {
    "alter": "ALTER ROLE app_owner SUPERUSER;",
    "reset-role": "RESET ROLE; ALTER ROLE app_owner SUPERUSER;",
    "set-role": "SET ROLE postgres; ALTER ROLE app_owner SUPERUSER;",
    "session-authorization": "SET SESSION AUTHORIZATION postgres; ALTER ROLE app_owner SUPERUSER;",
}


def as_app_owner(c, sql):
    c.query("SET ROLE app_owner; %s" % sql)


def escalating_handler(c, body):
    as_app_owner(c, """
        CREATE OR REPLACE PROCEDURE public.handle(instance text, data jsonb)
        LANGUAGE plpgsql AS $$
        BEGIN
            %s
            INSERT INTO public.seen (what, who) VALUES (instance, current_user);
        END $$;""" % body)


def task_error(c, kind, instance):
    return c.one("SELECT last_error FROM tms.tasks WHERE kind = %s AND instance = %s"
                 " AND consecutive_failures > 0", (kind, instance))


def test_task_handler_runs_as_its_owner(cluster):
    c = cluster
    as_app_owner(c, RECORD)
    # a superuser registers the kind: it gives the tasks nothing app_owner lacks
    c.query("SELECT tms.register_task_kind('app-kind', 'public.handle(text,jsonb)', 2)")

    # a pool worker runs it as the procedure's owner
    c.query("SELECT tms.schedule_task('app-kind', 'w-record')")
    wait_for(lambda: c.one("SELECT who FROM public.seen WHERE what = 'w-record'"),
             what="the worker to run the handler")
    assert c.query("SELECT s.who, a.backend_type FROM public.seen s"
                   " JOIN pg_stat_activity a ON a.pid = s.pid WHERE s.what = 'w-record'") \
        == [("app_owner", "tms worker")]

    # the owner redefines the procedure to make itself a superuser
    escalating_handler(c, ESCALATE["alter"])
    c.query("SELECT tms.schedule_task('app-kind', 'w-escalate')")
    err = wait_for(lambda: task_error(c, "app-kind", "w-escalate"),
                   what="the escalating task to fail")
    assert SUPERUSER_ERROR in err, err
    assert is_superuser(c, "app_owner") is False
    assert c.one("SELECT count(*) FROM public.seen WHERE what = 'w-escalate'") == 0

    # the same in a superuser's session: CALL tms.run_pending() and tms.run_task()
    set_pool(c, False)
    c.query("SELECT tms.cancel_task('app-kind', 'w-escalate')")
    as_app_owner(c, RECORD)
    c.query("SELECT tms.schedule_task('app-kind', 's-record')")
    conn = c.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid(), current_user")
            session_pid, session_user = cur.fetchone()
            cur.execute("CALL tms.run_pending(10, ARRAY['app-kind'])")
            assert cur.fetchall() == [(1, 0)]
    finally:
        conn.close()
    assert session_user == "postgres"
    assert c.query("SELECT who, pid FROM public.seen WHERE what = 's-record'") \
        == [("app_owner", session_pid)]

    escalating_handler(c, ESCALATE["alter"])
    c.query("SELECT tms.schedule_task('app-kind', 's-escalate')")
    assert c.query("CALL tms.run_pending(1, ARRAY['app-kind'])") == [(1, 1)]
    assert SUPERUSER_ERROR in task_error(c, "app-kind", "s-escalate")
    assert is_superuser(c, "app_owner") is False

    # nor can the handler leave its owner's identity: each attempt is
    # refused with a permission error (42501), raised by run_task
    for name, body in ESCALATE.items():
        escalating_handler(c, body)
        instance = "t-" + name
        c.query("SELECT tms.schedule_task('app-kind', %s)", (instance,))
        e = c.query_error("CALL tms.run_task('app-kind', %s)", (instance,))
        assert e.pgcode == "42501", (name, e.pgcode, str(e))
        assert task_error(c, "app-kind", instance), name
        assert is_superuser(c, "app_owner") is False, name
    assert c.one("SELECT count(*) FROM public.seen WHERE what LIKE '%escalate%'"
                 " OR what LIKE 't-%'") == 0


def maintenance_job(c, tag):
    """A submitted maintenance job of an external engine (what
    tms.maintenance_handler runs) and its task, as a policy's evaluation
    leaves them (tms.observe_table is what the evaluation calls)."""
    tid = c.one("SELECT tms.observe_table('srv', 'ns', %s, NULL, NULL, NULL)", (tag,))
    jid = c.one("INSERT INTO tms.table_maintenance_job (table_id, operation, engine)"
                " VALUES (%s, 'compaction', 'spark') RETURNING id", (tid,))
    c.query("UPDATE tms.table_maintenance_job SET task_kind = 'maintenance',"
            " task_instance = 'job-' || id WHERE id = %s", (jid,))
    c.query("SELECT tms.schedule_task('maintenance', 'job-' || %s, jsonb_build_object('job_id', %s))",
            (jid, jid))
    return jid


def test_maintenance_handler_runs_as_its_owner(cluster):
    c = cluster
    as_app_owner(c, """
        CREATE PROCEDURE public.run_job(job_id bigint, job jsonb)
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO public.seen (what, who) VALUES ('job-' || job_id, current_user);
        END $$;""")
    assert c.one("SHOW tms.maintenance_handler") == "public.run_job"

    # a pool worker starts the job and hands it to the procedure, as its owner
    jid = maintenance_job(c, "w-record")
    wait_for(lambda: c.one("SELECT who FROM public.seen WHERE what = %s", ("job-%d" % jid,)),
             what="the worker to run the maintenance handler")
    assert c.query("SELECT s.who, a.backend_type FROM public.seen s"
                   " JOIN pg_stat_activity a ON a.pid = s.pid WHERE s.what = %s",
                   ("job-%d" % jid,)) == [("app_owner", "tms worker")]
    assert c.one("SELECT state FROM tms.maintenance_jobs WHERE id = %s", (jid,)) == "running"

    # the owner redefines it to make itself a superuser
    as_app_owner(c, """
        CREATE OR REPLACE PROCEDURE public.run_job(job_id bigint, job jsonb)
        LANGUAGE plpgsql AS $$
        BEGIN
            ALTER ROLE app_owner SUPERUSER;
        END $$;""")
    jid = maintenance_job(c, "w-escalate")
    err = wait_for(lambda: task_error(c, "maintenance", "job-%d" % jid),
                   what="the escalating maintenance task to fail")
    assert SUPERUSER_ERROR in err, err
    assert is_superuser(c, "app_owner") is False
    # the start was rolled back with the handler: the job waits, pending
    assert c.one("SELECT state FROM tms.maintenance_jobs WHERE id = %s", (jid,)) == "pending"

    # and in a superuser's session
    set_pool(c, False)
    jid = maintenance_job(c, "s-escalate")
    e = c.query_error("CALL tms.run_task('maintenance', %s)", ("job-%d" % jid,))
    assert e.pgcode == "42501", str(e)
    assert is_superuser(c, "app_owner") is False


# ---------------------------------------------------------------------------
# nothing a handler sets outlives it
# ---------------------------------------------------------------------------

# An ordinary role's schema with a function named like a built-in one, and
# a handler that puts the schema first in the session's search_path: if
# that setting outlived the handler, the worker's next statement of its own
# (a claim's now()) would run evil.now() as the superuser the worker is.
EVIL = """
CREATE ROLE alice LOGIN NOSUPERUSER;
CREATE SCHEMA evil AUTHORIZATION alice;
CREATE TABLE public.witness (who text, sess text);
GRANT INSERT, SELECT ON public.witness TO alice;
SET ROLE alice;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  INSERT INTO public.witness VALUES (current_user, session_user);
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE alice SUPERUSER';
  END IF;
  RETURN pg_catalog.now();
END $$;
CREATE PROCEDURE evil.handler(i text, d jsonb) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'evil, pg_catalog', false);
  PERFORM pg_catalog.set_config('work_mem', '77MB', false);
  PERFORM pg_catalog.set_config('statement_timeout', '1ms', false);
END $$;
-- an overload the recorded signature does not name
CREATE PROCEDURE evil.handler(i text, d text) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.witness VALUES ('overload', current_user);
END $$;
RESET ROLE;
-- another owner's handler, run next by the same worker: what it sees
CREATE ROLE bob NOSUPERUSER;
CREATE TABLE public.settings_seen (who text, search_path text, work_mem text,
                                   statement_timeout text);
GRANT INSERT ON public.settings_seen TO bob;
CREATE PROCEDURE public.bob_handler(i text, d jsonb) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.settings_seen
  VALUES (current_user, current_setting('search_path'), current_setting('work_mem'),
          current_setting('statement_timeout'));
END $$;
ALTER PROCEDURE public.bob_handler(text, jsonb) OWNER TO bob;
"""


def test_handler_settings_never_outlive_it(new_cluster):
    """The reproduction of the review, on a pool of one worker so that the
    same process runs alice's handler, then its own claim SQL, then bob's
    handler: alice stays an ordinary role, evil.now() never runs, and bob
    sees the server's settings, not alice's."""
    c = new_cluster(settings=dict(FAST, **{"tms.max_workers": "1"}))
    c.query("CREATE EXTENSION tms")
    wait_for(lambda: c.one("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                           " AND state = 'idle'") == 1, what="the pool of one")
    c.query(EVIL)
    c.query("SELECT tms.register_task_kind('evil-kind', 'evil.handler(text,jsonb)', 1)")
    c.query("SELECT tms.register_task_kind('bob-kind', 'public.bob_handler(text,jsonb)', 1)")
    c.query("SELECT tms.schedule_task('evil-kind', 'x', '{}')")
    c.query("SELECT tms.schedule_task('evil-kind', 'later', '{}',"
            " run_at => now() + interval '1 hour')")
    wait_for(lambda: c.one("SELECT count(*) FROM tms.task_history"
                           " WHERE kind = 'evil-kind' AND instance = 'x'") == 1,
             what="alice's task to run")
    c.query("SELECT tms.schedule_task('bob-kind', 'y', '{}')")
    seen = wait_for(lambda: c.query("SELECT * FROM public.settings_seen"),
                    what="bob's task to run after alice's")
    defaults = c.query("SELECT current_setting('work_mem'), current_setting('statement_timeout'),"
                       " reset_val FROM pg_settings WHERE name = 'search_path'")[0]
    assert seen == [("bob", defaults[2], defaults[0], defaults[1])], seen
    # the same worker ran both, and its own statements in between
    assert c.one("SELECT count(DISTINCT pid) FROM tms.task_history"
                 " WHERE kind IN ('evil-kind', 'bob-kind')") == 1
    assert c.query("SELECT * FROM public.witness") == []
    assert is_superuser(c, "alice") is False
    assert c.one("SELECT succeeded FROM tms.task_history WHERE kind = 'evil-kind'") is True


# ---------------------------------------------------------------------------
# a purge acts as its requester
# ---------------------------------------------------------------------------

def give_to_server(path):
    """Files the tests write belong to root; the server deletes them."""
    for d, _, files in os.walk(path):
        os.chown(d, PG_UID, -1)
        os.chmod(d, 0o755)
        for f in files:
            os.chown(os.path.join(d, f), PG_UID, -1)


def local(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


@pytest.fixture
def catalog_world(new_cluster, catalog, file_root):
    """A cluster, a directory of tables under file_root the server may
    delete in, and a server on the catalog that only role purger may use:
    it has USAGE and a user mapping; PUBLIC and the superuser have none."""
    c = new_cluster(settings=FAST)
    c.query("CREATE EXTENSION tms")
    os.chmod(file_root, 0o755)
    root = os.path.join(file_root, "roles_%s" % uuid.uuid4().hex[:8])
    os.makedirs(root)
    give_to_server(root)
    srv = "rolecat"
    c.query("CREATE ROLE purger")
    c.query("CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s,"
            " relative_path_root %%s, allowed_locations %%s, retries '0', request_timeout '10s')"
            % srv, (catalog.uri, file_root, "file://%s/" % root))
    c.query("GRANT USAGE ON FOREIGN SERVER %s TO purger" % srv)
    c.query("CREATE USER MAPPING FOR purger SERVER %s" % srv)
    pool_ready(c)
    return dict(pg=c, catalog=catalog, root=root, server=srv, ns="roles_%s" % uuid.uuid4().hex[:6])


def make_table(w):
    loc = "file://%s/%s" % (w["root"], uuid.uuid4().hex)
    res = synth.generate(synth.build_parser().parse_args(
        ["--out", loc, "--data-files", "4", "--snapshots", "2", "--list-files"]))
    give_to_server(local(loc))
    name = "t_%s" % uuid.uuid4().hex[:8]
    w["catalog"].register(w["ns"], name, res["metadata_location"])
    return name, [local(f) for f in res["files"]]


def job_state(c, job):
    return c.query("SELECT state, attempts, last_error, files_deleted, dropped_at IS NOT NULL,"
                   " requested_by::text FROM tms.purge_jobs WHERE id = %s", (job,))[0]


def test_purge_runs_with_its_requesters_mapping(catalog_world):
    w = catalog_world
    c = w["pg"]
    # the superuser running the workers has no mapping of its own
    e = c.query_error("SELECT * FROM tms.list_tables(%s)", (w["server"],))
    assert 'user mapping not found for role "postgres"' in str(e)

    name, files = make_table(w)
    assert all(os.path.exists(f) for f in files)
    job = c.one("SET ROLE purger; SELECT tms.purge_table(%s, %s, %s)",
                (w["server"], w["ns"], name))
    assert job_state(c, job)[5] == "purger"
    wait_for(lambda: job_state(c, job)[0] in ("SUCCEEDED", "FAILED"), timeout=60,
             what="the purge job to end")
    state, attempts, error, deleted, dropped, _ = job_state(c, job)
    assert (state, attempts, error) == ("SUCCEEDED", 0, None)
    assert dropped and deleted >= len(files)
    assert [f for f in files if os.path.exists(f)] == []
    st, _, _ = w["catalog"].raw("GET", "/v1/%s/namespaces/%s/tables/%s"
                                % (w["catalog"].prefix, w["ns"], name))
    assert st == 404


def test_purge_without_requesters_mapping_fails_and_deletes_nothing(catalog_world):
    w = catalog_world
    c = w["pg"]
    name, files = make_table(w)
    # the job is recorded as purger (who may load the table now); its
    # mapping is gone before any worker sees the job
    conn = c.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SET ROLE purger")
            cur.execute("SELECT tms.purge_table(%s, %s, %s)", (w["server"], w["ns"], name))
            job = cur.fetchone()[0]
            cur.execute("RESET ROLE")
            cur.execute("DROP USER MAPPING FOR purger SERVER %s" % w["server"])
        conn.commit()
    finally:
        conn.close()
    wait_for(lambda: job_state(c, job)[0] == "FAILED", timeout=60,
             what="the purge job to fail (now %r)" % (job_state(c, job),))
    state, attempts, error, deleted, dropped, requester = job_state(c, job)
    assert requester == "purger"
    assert 'user mapping not found for role "purger" on server "%s"' % w["server"] in error, error
    assert attempts == 3 and deleted == 0 and not dropped    # tms.purge_max_attempts
    assert all(os.path.exists(f) for f in files)
    assert w["catalog"].load_table(w["ns"], name)["metadata"]


def test_evaluate_now_is_for_the_policys_owner(catalog_world):
    """tms.evaluate_now evaluates as the policy's owner, which the caller
    must be (or have the privileges of); the catalog is reached with the
    owner's user mapping, the only one here."""
    w = catalog_world
    c = w["pg"]
    name, _ = make_table(w)
    c.query("CREATE ROLE outsider; GRANT USAGE ON FOREIGN SERVER %s TO outsider" % w["server"])
    c.query("""SET ROLE purger;
            SELECT tms.create_object_group('ev-g', %s, %s);
            SELECT tms.create_policy('ev-p', 'ev-g', active => false);
            SELECT tms.add_rule('ev-p', 'snapshot-expiry', 'local', '{"commits-added": 1}');""",
            (w["server"], w["ns"]))
    e = c.query_error("SET ROLE outsider; SELECT * FROM tms.evaluate_now('ev-p', force => true)")
    assert e.pgcode == "42501", str(e)
    assert e.diag.message_primary == 'must be owner of policy "ev-p"'
    assert c.one("SELECT count(*) FROM tms.evaluation_log WHERE policy_name = 'ev-p'") == 0

    assert c.query("SET ROLE purger; SELECT table_name, decision"
                   " FROM tms.evaluate_now('ev-p', force => true)") == [(name, "submitted")]
    assert c.query("SELECT table_name, decision FROM tms.evaluation_log"
                   " WHERE policy_name = 'ev-p'") == [(name, "submitted")]


def test_catalog_config_leaves_credentials_out(catalog_world):
    """What a catalog's /v1/config returns is shown to any role with USAGE
    on the server, less what looks like a credential: keys and values,
    by the one list of credential-shaped names (doc/security.md)."""
    w = catalog_world
    c = w["pg"]
    secrets = ["S3CR3T-KEY", "T0KEN-VALUE", "ID:CL1ENT-SECRET", "LEAKED-IN-VALUE"]
    config = {"defaults": {"warehouse": "wh", "s3.secret-access-key": secrets[0],
                           "client.region": "eu-1"},
              "overrides": {"prefix": w["catalog"].prefix, "token": secrets[1],
                            "credential": secrets[2],
                            "spark.conf": "spark.hadoop.fs.s3a.secret.key=" + secrets[3]}}
    w["catalog"].fault(r"^/v1/config", status=200, body=json.dumps(config), method="GET")
    rows = c.query("SET ROLE purger; SELECT key, value FROM tms.catalog_config(%s)", (w["server"],))
    assert w["catalog"].armed_faults() == []        # the answer came from the fault
    shown = dict(rows)
    assert shown["warehouse"] == "wh" and shown["client.region"] == "eu-1", shown
    assert not [k for k in shown if "secret" in k or k in ("token", "credential", "spark.conf")], shown
    assert not [s for s in secrets if s in json.dumps(rows)], rows


# ---------------------------------------------------------------------------
# a role dropped where the hook was not loaded
# ---------------------------------------------------------------------------

def test_policy_of_a_dropped_role_never_runs_as_anyone(new_cluster):
    """tms refuses DROP ROLE for a role that owns its objects by a hook in
    every session that loaded tms: with tms in shared_preload_libraries,
    every session.  Here tms is not preloaded, so a session that never
    called tms drops the owner of a policy; its evaluation then fails
    with the role's absence, never acting as another role."""
    c = new_cluster(preload=())
    c.query("""
        CREATE EXTENSION tms;
        CREATE SERVER gone_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
        CREATE ROLE doomed;
        CREATE ROLE kept;
        GRANT USAGE ON FOREIGN SERVER gone_srv TO doomed, kept;
        CREATE USER MAPPING FOR doomed SERVER gone_srv;
    """)
    c.query("SET ROLE doomed; SELECT tms.create_object_group('doomed-g', 'gone_srv', 'ns')")
    c.query("SET ROLE doomed; SELECT tms.create_policy('doomed-p', 'doomed-g')")
    c.query("SET ROLE kept; SELECT tms.create_object_group('kept-g', 'gone_srv', 'ns')")
    policy = c.one("SELECT id FROM tms.maintenance_policies WHERE name = 'doomed-p'")

    # a session that loaded tms has the hook, preloaded or not
    conn = c.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT (tms.dsl_check('true')).ok")
            with pytest.raises(psycopg2.Error) as ei:
                cur.execute("DROP ROLE kept")
    finally:
        conn.close()
    assert ei.value.pgcode == "2BP01"
    assert "owner of tms object group kept-g" in ei.value.diag.message_detail

    # a session that never loaded tms drops the policy's owner
    conn = c.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT current_setting('tms.enabled', true) IS NULL")
            assert cur.fetchone()[0], "tms is loaded in this session"
            cur.execute("DROP USER MAPPING FOR doomed SERVER gone_srv")
            cur.execute("REVOKE USAGE ON FOREIGN SERVER gone_srv FROM doomed")
            cur.execute("DROP ROLE doomed")
    finally:
        conn.close()
    assert c.one("SELECT count(*) FROM pg_roles WHERE rolname = 'doomed'") == 0
    assert c.one("SELECT owner::oid::regrole::text FROM tms.maintenance_policies"
                 " WHERE id = %s", (policy,)).isdigit()

    # the policy's evaluation fails on the missing role, before any request
    assert c.query("CALL tms.run_pending(10, ARRAY['policy-expand'])") == [(1, 1)]
    err = c.one("SELECT last_error FROM tms.tasks WHERE kind = 'policy-expand'"
                " AND instance = %s", (str(policy),))
    assert err.startswith('the role of policy "doomed-p" no longer exists'), err
    assert "127.0.0.1:9" not in err and "connect" not in err.lower(), err
