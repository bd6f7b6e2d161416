"""
test_events.py -- state-change events end to end: what a session that
LISTENs on tms_events receives while the workers run a maintenance job, a
purge and a failing task against the test world, in order and with the
documented payloads; nothing for a change that rolls back; and webhook
deliveries to a receiver this test runs (Python's http.server on
127.0.0.1): one POST per failed job and purge, a receiver answering 503
twice is retried until it accepts, one that is down (connection refused)
gets the delivery once it is up again, one that refuses (404) is given up at
once, one that hangs delays no job, and the URL's secret appears in no
view, no log line and nothing a non-owner can read.

The module runs its own cluster (fast workers, every event class on, one
attempt per job and purge so that a failure is final at once) whose
database also holds the test catalog's pointer tables; tables are
synthetic, on file://.

Run: /usr/bin/python3 -m pytest -q test/integration/test_events.py
"""

import datetime
import http.server
import json
import os
import select
import sys
import threading
import time
import uuid

import psycopg2
import psycopg2.errors
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

SETTINGS = dict(FAST_WORKERS, **{
    "tms.events": "'all'",
    "tms.maintenance_max_attempts": "1",
    "tms.purge_max_attempts": "1",
    "tms.webhook_max_attempts": "5",
})
NS = "ev"
TOKEN = "tok-%s" % uuid.uuid4().hex          # the webhook URL's secret
BEARER = "bearer-%s" % uuid.uuid4().hex      # the mapping's token


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

class Receiver:
    """A webhook receiver on 127.0.0.1.  Paths say how it answers:
    /ok/... 200; /flaky/N/... 503 to the first N POSTs of that path, then
    200; /gone/... 404; /hang/... holds the request until release() (at
    most 60 s), then 200.  Every POST is recorded (path, headers, body).
    port: the port to listen on (0: any free one)."""

    def __init__(self, port=0):
        self.posts = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    receiver.posts.append({"path": self.path, "headers": dict(self.headers),
                                           "body": body.decode()})
                    seen = sum(1 for p in receiver.posts if p["path"] == self.path)
                parts = self.path.split("/")
                if parts[1] == "flaky" and seen <= int(parts[2]):
                    status = 503
                elif parts[1] == "gone":
                    status = 404
                else:
                    if parts[1] == "hang":
                        receiver.released.wait(60)
                    status = 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def posts_to(self, prefix):
        with self.lock:
            return [p for p in self.posts if p["path"].startswith(prefix)]

    def stop(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    w = tms_world("ev", settings=SETTINGS, s3=None, catalog={}, sql=lambda w: [
        """CREATE SERVER evcat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', request_timeout '5s', retries '0',
             allowed_locations 'file://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER evcat;""" % (w["catalog"].uri, w["file_root"])])
    rec = Receiver()
    yield dict(w, receiver=rec)
    rec.stop()


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def new_table(env, snapshots=3):
    """A synthetic table registered in the test catalog; its name."""
    loc = "file://%s/t/%s" % (env["file_root"], uuid.uuid4().hex[:10])
    res = ow.synth_table(loc, "--snapshots", snapshots, "--data-files", 4)
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register(NS, name, res["metadata_location"])
    return name


def run_expiry(env, name):
    return q(env, "SELECT tms.run_operation('evcat', %s, %s, 'snapshot-expiry',"
                  " '{\"retain-last\": 1}')", (NS, name))[0][0]


def job_state(env, jid):
    return q(env, "SELECT state FROM tms.table_maintenance_job WHERE id = %s", (jid,))[0][0]


def wait_job(env, jid, states):
    wait_for(lambda: job_state(env, jid) in states, timeout=60,
             what="job %s to be %s (now %s)" % (jid, states, job_state(env, jid)))


def purge_row(env, pid):
    return q(env, "SELECT state, files_deleted, attempts FROM tms.iceberg_cleanup_job"
                  " WHERE id = %s", (pid,))[0]


def pool(env, on):
    env["pg"].psql("ALTER SYSTEM SET tms.enabled = %s" % ("on" if on else "off"))
    env["pg"].psql("SELECT pg_reload_conf()")
    wait_for(lambda: env["pg"].psql(
        "SELECT count(*) FILTER (WHERE state %s 'disabled') FROM tms.workers"
        " WHERE role = 'worker'" % ("<>" if on else "=")) == "4",
        what="the pool to be %s" % ("on" if on else "off"))


def failing_job(env):
    """A job that fails: its table's loads fail while the worker runs it
    (one attempt per job here).  Returns its id once failed."""
    name = new_table(env)
    pool(env, False)
    try:
        jid = run_expiry(env, name)
        env["catalog"].fault(r"/namespaces/%s/tables/%s$" % (NS, name), status=500,
                             count=100, method="GET")
    finally:
        pool(env, True)
    wait_job(env, jid, ("failed",))
    env["catalog"].clear_faults()
    return jid


class Listener:
    """A session LISTENing on tms_events; events() parses what arrived."""

    def __init__(self, env):
        self.conn = env["pg"].connect()
        self.conn.cursor().execute("LISTEN tms_events")
        self.payloads = []

    def poll(self):
        select.select([self.conn], [], [], 0.05)
        self.conn.poll()
        while self.conn.notifies:
            n = self.conn.notifies.pop(0)
            assert n.channel == "tms_events"
            self.payloads.append(n.payload)
        return [json.loads(p) for p in self.payloads]

    def wait(self, predicate, what, timeout=60):
        """Poll until predicate(events) holds; returns the events."""
        wait_for(lambda: predicate(self.poll()), timeout=timeout, interval=0.01, what=what)
        return self.poll()

    def close(self):
        self.conn.close()


@pytest.fixture
def listener(env):
    lst = Listener(env)
    yield lst
    lst.close()


def of(events, type_, **match):
    return [e for e in events
            if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())]


def transitions(events):
    return [(e["old"], e["new"]) for e in events]


def parse_at(text):
    return datetime.datetime.fromisoformat(text)


# ---------------------------------------------------------------------------
# NOTIFY tms_events
# ---------------------------------------------------------------------------

def test_job_events(env, listener):
    name = new_table(env)
    jid = run_expiry(env, name)
    wait_job(env, jid, ("succeeded",))
    events = listener.wait(lambda ev: ("running", "succeeded") in transitions(of(ev, "job", id=jid)),
                           what="the job's events")
    mine = of(events, "job", id=jid)
    assert transitions(mine) == [(None, "pending"), ("pending", "running"),
                                 ("running", "succeeded")], mine
    table_id = q(env, "SELECT table_id FROM tms.table_maintenance_job WHERE id = %s", (jid,))[0][0]
    for e in mine:
        assert set(e) == {"type", "id", "table_id", "server", "namespace", "table", "operation",
                          "engine", "policy_id", "rule_id", "old", "new", "attempts", "error",
                          "reason", "at"}, e
        assert (e["table_id"], e["server"], e["namespace"], e["table"], e["operation"],
                e["engine"], e["policy_id"], e["rule_id"], e["error"]) == \
            (table_id, "evcat", NS, name, "snapshot-expiry", "local", None, None, None), e
    assert [e["attempts"] for e in mine] == [0, 1, 1]
    ats = [parse_at(e["at"]) for e in mine]
    assert ats == sorted(ats) and all(a.utcoffset() == datetime.timedelta(0) for a in ats)
    # the task that ran it: claimed by a worker, succeeded, gone
    task = of(events, "task", kind="maintenance", instance="job-%d" % jid)
    assert [(e["event"], e["old"], e["new"]) for e in task] == \
        [("claimed", "due", "running"), ("succeeded", "running", "done")], task
    assert task[0]["by"].startswith("tms worker")
    # in commit order: the claim before the job started, the settle after it ended
    order = [(e["type"], e.get("event") or e["new"]) for e in events
             if e in task or e in mine]
    assert order == [("job", "pending"), ("task", "claimed"), ("job", "running"),
                     ("job", "succeeded"), ("task", "succeeded")], order


def test_failed_job_events(env, listener):
    jid = failing_job(env)
    events = listener.wait(lambda ev: ("running", "failed") in transitions(of(ev, "job", id=jid)),
                           what="the failure's event")
    mine = of(events, "job", id=jid)
    assert transitions(mine) == [(None, "pending"), ("pending", "running"),
                                 ("running", "failed")], mine
    last_error = q(env, "SELECT last_error FROM tms.table_maintenance_job WHERE id = %s",
                   (jid,))[0][0]
    assert mine[-1]["error"] == last_error and last_error, mine[-1]
    assert mine[0]["error"] is None and mine[1]["error"] is None


def test_purge_events(env, listener):
    name = new_table(env)
    pid = q(env, "SELECT tms.purge_table('evcat', %s, %s)", (NS, name))[0][0]
    wait_for(lambda: purge_row(env, pid)[0] == "SUCCEEDED", timeout=60, what="the purge")
    events = listener.wait(lambda ev: any(e["new"] == "SUCCEEDED" for e in of(ev, "purge", id=pid)),
                           what="the purge's events")
    mine = of(events, "purge", id=pid)
    assert transitions(mine) == [(None, "PENDING"), ("PENDING", "RUNNING"),
                                 ("RUNNING", "SUCCEEDED")], mine
    state, files_deleted, attempts = purge_row(env, pid)
    assert files_deleted > 0
    assert mine[-1]["files_deleted"] == files_deleted and mine[-1]["attempts"] == attempts
    assert mine[-1]["bytes_freed"] > 0 and mine[-1]["error"] is None
    for e in mine:
        assert set(e) == {"type", "id", "server", "namespace", "table", "old", "new", "attempts",
                          "files_deleted", "bytes_freed", "error", "at"}, e
        assert (e["server"], e["namespace"], e["table"]) == ("evcat", NS, name)


def unregister_when_idle(env, kind):
    """Unregister a task kind whose tasks keep being retried: the unregister
    is refused (55006) while one of them runs, and a retry may be claimed
    at any time, so await an attempt that finds none running (each attempt
    is one statement: refused, it changes nothing)."""
    def attempt():
        try:
            env["pg"].query("SELECT tms.unregister_task_kind(%s)", (kind,))
        except psycopg2.errors.ObjectInUse:
            return False
        return True
    wait_for(attempt, what="no task of kind %s running, to unregister it" % kind)


def test_failing_task_events(env, listener):
    env["pg"].psql("""
        CREATE PROCEDURE ev_fail(i text, d jsonb) LANGUAGE plpgsql
            AS $$ BEGIN RAISE EXCEPTION 'no luck with %', i; END $$;
        SELECT tms.register_task_kind('ev-fail', 'ev_fail(text,jsonb)', 1);
        SELECT tms.schedule_task('ev-fail', 'one');""")
    try:
        events = listener.wait(
            lambda ev: len(of(ev, "task", kind="ev-fail", event="failed")) >= 2,
            what="two failures of the task")
    finally:
        unregister_when_idle(env, "ev-fail")
        env["pg"].psql("DROP PROCEDURE ev_fail")
    mine = of(events, "task", kind="ev-fail")[:4]
    assert [(e["event"], e["old"], e["new"], e["failures"]) for e in mine] == [
        ("claimed", "due", "running", 0), ("failed", "running", "failing", 1),
        ("claimed", "failing", "running", 1), ("failed", "running", "failing", 2)], mine
    for e in mine:
        assert e["instance"] == "one"
        if e["event"] == "failed":
            assert e["error"] == "no luck with one"
            # due again after the backoff, which the next claim then follows
            assert parse_at(e["retry_at"]) > parse_at(e["at"]) - datetime.timedelta(seconds=1)
        else:
            assert e["error"] is None and e["retry_at"] is None and e["by"]
    assert parse_at(mine[2]["at"]) >= parse_at(mine[1]["retry_at"])


def test_default_sends_task_failures_only(new_cluster):
    """tms.events by default: a task's failure is sent, claims and
    completions (every task's, on the claim path) are not."""
    c = new_cluster(settings=FAST_WORKERS)
    c.psql("CREATE EXTENSION tms")
    assert c.psql("SHOW tms.events") == "job, purge, task-failure"
    c.psql("""
        CREATE PROCEDURE ev_fail(i text, d jsonb) LANGUAGE plpgsql
            AS $$ BEGIN RAISE EXCEPTION 'no luck'; END $$;
        CREATE PROCEDURE ev_ok(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$;
        SELECT tms.register_task_kind('ev-fail', 'ev_fail(text,jsonb)', 1);
        SELECT tms.register_task_kind('ev-ok', 'ev_ok(text,jsonb)', 1);""")
    lst = Listener({"pg": c})
    try:
        c.psql("SELECT tms.schedule_task('ev-ok', 'fine'), tms.schedule_task('ev-fail', 'bad')")
        lst.wait(lambda ev: of(ev, "task", kind="ev-fail", event="failed"), what="the failure")
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.scheduled_tasks"
                                " WHERE task_name = 'ev-ok'") == "0", what="the success")
        c.psql("SELECT pg_notify('tms_events', '{\"type\": \"marker\"}')")
        events = lst.wait(lambda ev: of(ev, "marker"), what="the marker")
        assert {e["event"] for e in of(events, "task")} == {"failed"}, events
    finally:
        lst.close()


def test_rolled_back_change_notifies_nothing(env, listener):
    name = new_table(env)
    jid = run_expiry(env, name)
    wait_job(env, jid, ("succeeded",))
    conn = env["pg"].connect(autocommit=False)
    try:
        cur = conn.cursor()
        cur.execute("UPDATE tms.table_maintenance_job SET state = 'failed' WHERE id = %s", (jid,))
        cur.execute("UPDATE tms.iceberg_cleanup_job SET state = 'FAILED'")
        conn.rollback()
        # a marker sent after the rollback: everything before it has arrived
        cur.execute("SELECT pg_notify('tms_events', '{\"type\": \"marker\"}')")
        conn.commit()
    finally:
        conn.close()
    events = listener.wait(lambda ev: of(ev, "marker"), what="the marker")
    assert not [e for e in of(events, "job", id=jid) if e["new"] == "failed"], events
    assert not [e for e in of(events, "purge") if e["new"] == "FAILED"], events


# ---------------------------------------------------------------------------
# webhooks
# ---------------------------------------------------------------------------

@pytest.fixture
def hook(env):
    """make(path, events=None, **options): a tms_webhook server whose
    mapping points at the receiver's path; all dropped afterwards."""
    made = []

    def make(path, events=None, token=BEARER, **options):
        name = "hook_%s" % uuid.uuid4().hex[:8]
        opts = dict(options, **({"events": events} if events else {}))
        env["pg"].psql("CREATE SERVER %s FOREIGN DATA WRAPPER tms_webhook%s"
                       % (name, " OPTIONS (%s)" % ", ".join("%s '%s'" % kv for kv in opts.items())
                          if opts else ""))
        env["pg"].psql("CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (url '%s'%s)"
                       % (name, env["receiver"].url(path),
                          ", token '%s'" % token if token else ""))
        made.append(name)
        return name

    yield make
    env["receiver"].released.set()
    for name in made:
        env["pg"].psql("DROP SERVER %s CASCADE" % name)
    wait_for(lambda: q(env, "SELECT count(*) FROM tms.webhook_outbox WHERE state = 'pending'")[0][0] == 0,
             what="the deliveries of dropped servers to end")


def deliveries(env, server):
    return q(env, "SELECT id, event, state, attempts, last_status, last_error, payload"
                  "  FROM tms.webhook_deliveries WHERE server = %s ORDER BY id", (server,))


def wait_deliveries(env, server, n, states=("delivered",)):
    """Await n deliveries to server in one of states; returns them all."""
    wait_for(lambda: len([d for d in deliveries(env, server) if d[2] in states]) == n,
             timeout=60, what="%d deliveries to %s in %s (now %r)"
             % (n, server, states, deliveries(env, server)))
    return deliveries(env, server)


def test_webhook_one_post_per_failed_job_and_purge(env, hook):
    rec = env["receiver"]
    path = "/ok/%s" % TOKEN
    server = hook(path)
    jid = failing_job(env)

    name = new_table(env)
    env["catalog"].fault(r"/namespaces/%s/tables/%s$" % (NS, name), status=500, count=1,
                         method="DELETE")
    pid = q(env, "SELECT tms.purge_table('evcat', %s, %s)", (NS, name))[0][0]
    wait_for(lambda: purge_row(env, pid)[0] == "FAILED", timeout=60, what="the purge to fail")
    env["catalog"].clear_faults()

    rows = wait_deliveries(env, server, 2)
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        ("job-failed", "delivered", 1, 200, None), ("purge-failed", "delivered", 1, 200, None)]
    posts = rec.posts_to(path)
    bodies = [json.loads(p["body"]) for p in posts]
    assert [(b["type"], b["id"], b["new"]) for b in bodies] == [("job", jid, "failed"),
                                                                ("purge", pid, "FAILED")], bodies
    assert bodies == [r[6] for r in rows]                  # the payload, as sent
    for p in posts:
        assert p["headers"]["Content-Type"] == "application/json"
        assert p["headers"]["Authorization"] == "Bearer %s" % BEARER
    assert bodies[0]["error"] and bodies[1]["error"]
    # the successes of the same run went to nobody
    assert not [b for b in bodies if b["new"] in ("succeeded", "SUCCEEDED")]


def test_webhook_retried_until_accepted(env, hook):
    rec = env["receiver"]
    path = "/flaky/2/%s" % TOKEN
    server = hook(path, events="job-succeeded")
    jid = run_expiry(env, new_table(env))
    rows = wait_deliveries(env, server, 1)
    assert [(r[2], r[3], r[4], r[5]) for r in rows] == [("delivered", 3, 200, None)], rows
    posts = rec.posts_to(path)
    assert len(posts) == 3 and len({p["body"] for p in posts}) == 1
    assert json.loads(posts[0]["body"])["id"] == jid


def set_max_attempts(env, value):
    env["pg"].psql("ALTER SYSTEM %s" % ("SET tms.webhook_max_attempts = %d" % value
                                        if value else "RESET tms.webhook_max_attempts"))
    env["pg"].psql("SELECT pg_reload_conf()")


def test_webhook_receiver_down_then_up(env, hook):
    """A receiver that is down (nothing listens on its port: every attempt
    refused) gets the delivery once it is up again."""
    down = Receiver()
    port = down.port
    down.stop()
    set_max_attempts(env, 1000)
    try:
        server = hook("/ok/%s" % TOKEN, events="job-succeeded")
        env["pg"].psql("ALTER USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (SET url '%s')"
                       % (server, "http://127.0.0.1:%d/up/%s" % (port, TOKEN)))
        jid = run_expiry(env, new_table(env))
        # refused twice at least, and to be tried again
        wait_for(lambda: [(d[2], d[4]) for d in deliveries(env, server) if d[3] >= 2]
                 == [("retrying", None)], timeout=60,
                 what="two refused attempts of the delivery, and another to come")
        up = Receiver(port)
        try:
            (_, _, state, attempts, status, error, payload), = wait_deliveries(env, server, 1)
            assert (state, status, error) == ("delivered", 200, None)
            assert attempts >= 3 and payload["id"] == jid
            posts = up.posts_to("/up/")
            assert len(posts) == 1 and json.loads(posts[0]["body"]) == payload
        finally:
            up.stop()
    finally:
        set_max_attempts(env, None)


def test_webhook_refused_is_given_up(env, hook):
    path = "/gone/%s" % TOKEN
    server = hook(path, events="job-succeeded", token=None)
    run_expiry(env, new_table(env))
    rows = wait_deliveries(env, server, 1, ("failed",))
    (_, _, state, attempts, status, error, _), = rows
    assert (state, attempts, status) == ("failed", 1, 404)
    assert "404" in error and "127.0.0.1" in error and TOKEN not in error
    assert "Authorization" not in env["receiver"].posts_to(path)[0]["headers"]


def test_webhook_hanging_receiver_delays_no_job(env, hook):
    rec = env["receiver"]
    rec.released.clear()
    path = "/hang/%s" % TOKEN
    server = hook(path, events="job-succeeded", request_timeout="60s")
    first = run_expiry(env, new_table(env))
    # its delivery is in flight: the receiver holds the request
    wait_for(lambda: rec.posts_to(path), what="the delivery to reach the receiver")
    second = run_expiry(env, new_table(env))
    wait_job(env, second, ("succeeded",))
    rows = deliveries(env, server)
    assert rows[0][6]["id"] == first
    assert (rows[0][2], rows[0][3]) == ("pending", 0), rows          # still in flight
    assert q(env, "SELECT running_on IS NOT NULL FROM tms.webhook_deliveries WHERE id = %s",
             (rows[0][0],))[0][0]
    rec.released.set()
    rows = wait_deliveries(env, server, 2)
    assert sorted(r[6]["id"] for r in rows) == [first, second]


def test_webhook_secret_shown_nowhere(env, hook):
    """After the tests above: the URL's token and the bearer token are in no
    view, no log line, and nothing a non-owner reads; a delivery that
    cannot connect does not name them either."""
    closed = Receiver()
    port = closed.port
    closed.stop()
    server = hook("/ok/%s" % TOKEN, events="job-succeeded")
    env["pg"].psql("ALTER USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (SET url '%s')"
                   % (server, "http://127.0.0.1:%d/ok/%s?k=%s" % (port, TOKEN, TOKEN)))
    run_expiry(env, new_table(env))
    # every attempt refused, then given up (logged)
    (_, _, state, attempts, status, err, _), = wait_deliveries(env, server, 1, ("failed",))
    assert (state, attempts, status) == ("failed", 5, None)
    assert "127.0.0.1:%d" % port in err and TOKEN not in err, err

    env["pg"].psql("DROP ROLE IF EXISTS ev_monitor; CREATE ROLE ev_monitor LOGIN IN ROLE pg_monitor")
    try:
        conn = env["pg"].connect()
        cur = conn.cursor()
        cur.execute("SET ROLE ev_monitor")
        seen = []
        for sql in ("SELECT * FROM tms.webhook_deliveries", "SELECT * FROM tms.tasks",
                    "SELECT * FROM pg_user_mappings", "SELECT * FROM pg_foreign_server",
                    "SELECT * FROM tms.maintenance_jobs", "SELECT * FROM pg_stat_activity"):
            cur.execute(sql)
            seen.append(repr(cur.fetchall()))
        with pytest.raises(psycopg2.Error):
            cur.execute("SELECT * FROM tms.webhook_outbox")
        conn.close()
        text = "\n".join(seen)
        assert server in text                        # what was read is there
        assert TOKEN not in text and BEARER not in text
    finally:
        env["pg"].psql("DROP ROLE ev_monitor")
    # the owner's own table holds neither (the payload is all there is)
    assert TOKEN not in repr(q(env, "SELECT * FROM tms.webhook_outbox"))
    with open(env["pg"].logfile, errors="replace") as f:
        log = f.read()
    assert "webhook" in log
    assert TOKEN not in log and BEARER not in log
