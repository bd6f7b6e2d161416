"""
test_waits.py -- how a backend waits on the network: the wait is visible
in pg_stat_activity as an extension wait, and it ends when the postmaster
dies, as every wait of PostgreSQL does (WL_EXIT_ON_PM_DEATH).

  wait event      a backend whose catalog hangs, and one sleeping out a
                  Retry-After, show wait_event_type 'Extension' (as
                  postgres_fdw's do); before, they showed no wait at all
  postmaster      kill -9 of the postmaster ends such a backend within a
                  few seconds; before, it lived on until its request
                  timeout (or the Retry-After) ran out

The servers are in this module: a socket that takes connections and never
answers (a hanging catalog), and an HTTP server answering every request
503 with Retry-After: 3600 (retries are allowed, so tms sleeps out the
Retry-After, at most a minute).  Both listen on 127.0.0.1.  The
postmaster-death tests run clusters of their own (the kill ends them);
the others use the session cluster.  Every wait is an awaited condition.

Run: /usr/bin/python3 -m pytest -q test/integration/test_waits.py
"""

import http.server
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid

import psycopg2
import psycopg2.errorcodes
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from pgcluster import Cluster, wait_for  # noqa: E402


# ---------------------------------------------------------------------------
# the servers
# ---------------------------------------------------------------------------

# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


class HangingServer:
    """Accepts connections and reads what comes, never answers."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.uri = "http://127.0.0.1:%d" % self.port
        self.requests = 0
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        c.settimeout(0.2)
        while not self.stopping:
            try:
                data = c.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            if b"\r\n\r\n" in data:
                self.requests += 1

    def stop(self):
        self.stopping = True
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


class RefusingServer:
    """Answers every request 503 with Retry-After: 3600."""

    def __init__(self):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                owner.requests += 1
                body = b'{"error": {"message": "busy", "type": "SlowDown", "code": 503}}'
                self.send_response(503)
                self.send_header("Retry-After", "3600")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.requests = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.uri = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


SERVERS = {"hang": HangingServer, "retry-after": RefusingServer}


@pytest.fixture(params=sorted(SERVERS))
def stuck(request):
    """A server of each kind tms gets stuck on."""
    s = SERVERS[request.param]()
    s.kind = request.param
    yield s
    s.stop()


def make_server(conn, uri):
    """A catalog server on uri (retries allowed, long timeouts: only an
    interrupt ends a wait early) with a mapping for the current user."""
    name = "wait_%s" % uuid.uuid4().hex[:10]
    with conn.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS tms")
        cur.execute("CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS "
                    "(uri '%s', retries '2', request_timeout '600s', connect_timeout '10s')"
                    % (name, uri))
        cur.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % name)
    return name


def start_listing(dsn, name):
    """Run tms.list_namespaces(name) on a new connection in a thread;
    returns (pid, thread, result) -- result gets "error" and "ended"."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    result = {}

    def run():
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT * FROM tms.list_namespaces(%s)", (name,))
                result["rows"] = cur.fetchall()
        except psycopg2.Error as e:
            result["error"] = e
        result["ended"] = time.monotonic()
        try:
            conn.close()
        except psycopg2.Error:
            pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return pid, th, result


def wait_event(pg_query, pid):
    rows = pg_query("SELECT wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE pid = %s", (pid,))
    return tuple(rows[0]) if rows else None


def await_stuck(server, pg_query, pid):
    """Await the backend waiting on the server: the request arrived (for the
    refusing server: was refused, so tms sleeps out the Retry-After) and
    the backend shows the extension wait event.  Returns the event."""
    wait_for(lambda: server.requests >= 1, timeout=30, what="the request to arrive")
    return wait_for(lambda: wait_event(pg_query, pid) == ("Extension", "Extension")
                    and wait_event(pg_query, pid), timeout=10,
                    what="the backend to show the Extension wait event")


# ---------------------------------------------------------------------------
# the wait event
# ---------------------------------------------------------------------------

def test_network_wait_shows_the_extension_wait_event(pg, stuck):
    """While tms waits on a catalog that hangs (libcurl's wait) or sleeps
    out a Retry-After (the backoff sleep), pg_stat_activity shows
    wait_event_type 'Extension', as for postgres_fdw; a cancel ends the
    wait.  Before, the backend showed no wait event: it looked busy."""
    with pg.connect() as conn:
        name = make_server(conn, stuck.uri)
    pid, th, result = start_listing(pg.dsn(), name)
    try:
        ev = await_stuck(stuck, pg.query, pid)
        print("%s: pg_stat_activity shows %s/%s" % (stuck.kind, ev[0], ev[1]))
        if stuck.kind == "retry-after":
            # one request, refused: the wait is the Retry-After sleep
            assert stuck.requests == 1
    finally:
        pg.query("SELECT pg_cancel_backend(%s)", (pid,))
        th.join(30)
    assert not th.is_alive(), "the query outlived its cancel"
    assert result["error"].pgcode == psycopg2.errorcodes.QUERY_CANCELED, result
    with pg.connect() as conn, conn.cursor() as cur:
        cur.execute("DROP SERVER %s CASCADE" % name)


# ---------------------------------------------------------------------------
# postmaster death
# ---------------------------------------------------------------------------

def alive(pid):
    """Is pid a live process (not gone, not a zombie)?"""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def children(ppid):
    """The pids whose parent is ppid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == ppid:
            out.append(int(d))
    return out


@pytest.fixture
def own_cluster():
    """A throwaway cluster: these tests kill its postmaster."""
    root = tempfile.mkdtemp(prefix="tms-waits-", dir="/tmp")
    os.chmod(root, 0o755)
    c = Cluster(os.path.join(root, "pg", "data"), preload=("tms",))
    c.init()
    c.start()
    c.create_database()
    c.psql("CREATE EXTENSION tms")
    procs = []
    c.procs = procs
    try:
        yield c
    finally:
        # what the postmaster's death left behind (nothing, when the test
        # passes) is ended by pid: these are this test's processes
        for p in procs:
            if alive(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


def test_postmaster_death_ends_a_network_wait(own_cluster, stuck):
    """kill -9 of the postmaster while a backend waits on a hanging catalog
    or sleeps out a Retry-After (request timeout 600 s, Retry-After up to a
    minute): the backend exits within a few seconds, as every PostgreSQL
    wait does on postmaster death.  Before, it waited on until the
    request timeout, an orphan holding shared memory."""
    c = own_cluster
    with c.connect() as conn:
        name = make_server(conn, stuck.uri)
    pid, th, result = start_listing(c.dsn(), name)
    await_stuck(stuck, c.query, pid)
    pm = c.postmaster_pid()
    c.procs.extend(children(pm))
    assert pid in c.procs
    os.kill(pm, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: not alive(pid), timeout=5,
             what="the waiting backend to exit after the postmaster died")
    took = time.monotonic() - killed_at
    print("%s: the backend exited %.0f ms after the postmaster died" % (stuck.kind, took * 1000))
    # its client sees the connection end, not an answer
    th.join(10)
    assert not th.is_alive()
    assert "rows" not in result
    # and the cluster's other processes are gone too
    wait_for(lambda: not any(alive(p) for p in c.procs), timeout=10,
             what="every process of the cluster to exit")
