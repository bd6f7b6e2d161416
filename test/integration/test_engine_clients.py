"""
test_engine_clients.py -- the engine clients of src/io (engine_client.h: Livy,
Trino, Gravitino), through the command-line driver engine_driver.c,
against small strict stub servers defined here.

Each stub speaks the documented shapes of its protocol (Livy's REST API,
Trino's client protocol, Gravitino's jobs API), checks what it is sent
(methods, paths, bodies, the Accept / X-Requested-By / X-Trino-* headers,
the credentials), records every request, and can inject faults: an HTTP
status, a dropped connection (after acting on the request: a submit that
reached the engine unanswered) and a hang (the client must time out).  The
tests assert the exact sequence of requests of submit -> poll -> result,
failures with the engine's own message, cancels, and finding a run by its
tag after a submit whose answer was lost.

The stubs are not the test world's engines (test/engines/): they exist to
pin the client's side of each protocol.  No PostgreSQL is needed.

Run: /usr/bin/python3 -m pytest test/integration/test_engine_clients.py
"""

import base64
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402

# Fast everywhere: every request times out after a second at most.
FAST = ["-T", "1000", "-b", "10", "-i", "5"]


@pytest.fixture(scope="session")
def driver():
    return world.built_driver("engine_driver")


def run_driver(exe, *args):
    """Run the driver; one parsed JSON object per step."""
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


# ---------------------------------------------------------------------------
# The stub base: recording, auth, faults

class StubError(Exception):
    """A request the stub refuses as malformed: answered 400, recorded."""


class Stub:
    """A threaded HTTP server on 127.0.0.1 that routes to self.route()."""

    def __init__(self, auth=None):
        self.log = []
        self.problems = []
        self.lock = threading.Lock()
        self.faults = []
        self.auth = auth            # None, ("basic", u, p), ("bearer", t), ("oauth", id, secret)
        self.tokens = set()
        self.token_count = 0
        self.release = threading.Event()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                stub._handle(self)

            do_POST = do_DELETE = do_PUT = do_GET

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def fault(self, method, path_re, action, times=1):
        """Inject action (an HTTP status, "drop" or "hang") on matching requests."""
        with self.lock:
            self.faults.append([method, re.compile(path_re), action, times])

    def requests(self):
        """(method, path) of every request but the token requests."""
        return [(r["method"], r["path"]) for r in self.log if r["path"] != "/oauth/token"]

    def revoke_tokens(self):
        with self.lock:
            self.tokens.clear()

    # -- internals

    def _take_fault(self, method, path):
        with self.lock:
            for f in self.faults:
                if f[0] == method and f[1].fullmatch(path) and f[3] > 0:
                    f[3] -= 1
                    return f[2]
        return None

    def _authorized(self, headers):
        a = headers.get("authorization")
        if self.auth is None:
            return a is None
        kind = self.auth[0]
        if kind == "basic":
            want = "Basic " + base64.b64encode(("%s:%s" % self.auth[1:]).encode()).decode()
            return a == want
        if kind == "bearer":
            return a == "Bearer " + self.auth[1]
        with self.lock:
            return a is not None and a.startswith("Bearer ") and a[7:] in self.tokens

    def _token(self, body):
        form = urllib.parse.parse_qs(body, strict_parsing=True)
        if form != {"grant_type": ["client_credentials"], "client_id": [self.auth[1]],
                    "client_secret": [self.auth[2]], "scope": ["engine"]}:
            return 401, {"error": "invalid_client", "error_description": "bad credentials"}
        with self.lock:
            self.token_count += 1
            tok = "tok-%d" % self.token_count
            self.tokens.add(tok)
        return 200, {"access_token": tok, "token_type": "bearer", "expires_in": 3600}

    def _handle(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n).decode() if n else ""
        parts = urllib.parse.urlsplit(h.path)
        headers = {k.lower(): v for k, v in h.headers.items()}
        rec = {"method": h.command, "path": parts.path, "query": parts.query,
               "headers": headers, "body": body}
        with self.lock:
            self.log.append(rec)
        action = self._take_fault(h.command, parts.path)
        if isinstance(action, int):
            return self._send(h, action, {"message": "injected %d" % action})
        if parts.path == "/oauth/token" and h.command == "POST":
            return self._send(h, *self._token(body))
        if not self._authorized(headers):
            return self._send(h, 401, {"message": "unauthorized"})
        try:
            status, doc = self.route(h.command, parts.path,
                                     urllib.parse.parse_qs(parts.query), headers, body)
        except StubError as e:
            with self.lock:
                self.problems.append(str(e))
            status, doc = 400, {"message": str(e)}
        if action == "drop":
            h.close_connection = True
            return
        if action == "hang":
            self.release.wait(5)
            h.close_connection = True
            return
        self._send(h, status, doc)

    def _send(self, h, status, doc, ctype="application/json"):
        data = b"" if doc is None else json.dumps(doc).encode()
        h.send_response(status)
        if doc is not None:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def need(cond, what):
    if not cond:
        raise StubError(what)


@pytest.fixture
def stubs():
    made = []
    yield made
    for s in made:
        s.stop()
    for s in made:
        assert s.problems == [], s.problems


# ---------------------------------------------------------------------------
# Livy

class Livy(Stub):
    """Livy's interactive sessions: a session per POST /sessions, states
    advanced one step per GET; one statement per session."""

    def __init__(self, outcome=None, dead_log=None, **kw):
        super().__init__(**kw)
        self.sessions = {}
        self.next_id = 0
        # {"fields": [...], "data": [...]} or {"ename":..,"evalue":..}
        self.outcome = outcome if outcome is not None else {"fields": ["n"], "data": [[1]]}
        self.dead_log = dead_log    # the session dies while starting, with this log

    @staticmethod
    def public(s):
        return {k: v for k, v in s.items() if not k.startswith("_")}

    def route(self, m, path, q, headers, body):
        need(headers.get("x-requested-by") == "tms", "X-Requested-By missing")
        need(headers.get("accept") == "application/json", "Accept")
        if m == "POST" and path == "/sessions":
            req = json.loads(body)
            need(headers.get("content-type") == "application/json", "Content-Type")
            need(set(req) - {"kind", "name"} <= RESOURCE_MEMBERS and
                 {"kind", "name"} <= set(req) and req["kind"] == "sql", "session body %r" % req)
            for s in self.sessions.values():
                if s["name"] == req["name"]:
                    return 400, {"msg": "Duplicate session name: Some(%s) for session %d"
                                 % (req["name"], s["id"])}
            s = {"id": self.next_id, "name": req["name"], "appId": None, "owner": None,
                 "proxyUser": None, "kind": "sql", "state": "starting", "log": [],
                 "appInfo": {"driverLogUrl": None, "sparkUiUrl": None}, "_stmts": []}
            self.next_id += 1
            self.sessions[s["id"]] = s
            return 201, self.public(s)
        if m == "GET" and path == "/sessions":
            frm, size = int(q["from"][0]), int(q["size"][0])
            ids = sorted(self.sessions)
            page = [self.public(self.sessions[i]) for i in ids[frm:frm + size]]
            return 200, {"from": frm, "total": len(ids), "sessions": page}
        mt = re.fullmatch(r"/sessions/(\d+)(/.*)?", path)
        need(mt, "path %s" % path)
        s = self.sessions.get(int(mt.group(1)))
        rest = mt.group(2) or ""
        if s is None:
            return 404, {"msg": "Session '%s' not found." % mt.group(1)}
        if m == "GET" and rest == "":
            if s["state"] == "starting":
                if self.dead_log is not None:
                    s["state"], s["log"] = "dead", list(self.dead_log)
                else:
                    s["state"] = "idle"
            return 200, self.public(s)
        if m == "DELETE" and rest == "":
            del self.sessions[s["id"]]
            return 200, {"msg": "deleted"}
        if m == "GET" and rest == "/log":
            need(q.get("from") == ["-1"] and q.get("size") == ["20"], "log query %r" % q)
            return 200, {"id": s["id"], "from": 0, "total": len(s["log"]), "log": s["log"]}
        if rest == "/statements" and m == "POST":
            need(s["state"] == "idle", "statement posted into a %s session" % s["state"])
            req = json.loads(body)
            need(req == {"code": req.get("code"), "kind": "sql"} and req["code"], "stmt %r" % req)
            st = {"id": len(s["_stmts"]), "code": req["code"], "state": "waiting",
                  "output": None, "progress": 0.0}
            s["_stmts"].append(st)
            s["state"] = "busy"
            return 201, st
        if rest == "/statements" and m == "GET":
            return 200, {"total_statements": len(s["_stmts"]), "statements": s["_stmts"]}
        ms = re.fullmatch(r"/statements/(\d+)(/cancel)?", rest)
        need(ms, "path %s" % path)
        st = s["_stmts"][int(ms.group(1))]
        if m == "POST" and ms.group(2):
            st["state"] = "cancelled"
            s["state"] = "idle"
            return 200, {"msg": "canceled"}
        need(m == "GET" and not ms.group(2), "method %s %s" % (m, path))
        if st["state"] == "waiting":
            st["state"] = "running"
        elif st["state"] == "running":
            o = self.outcome
            st["state"], st["progress"] = "available", 1.0
            if "ename" in o:
                st["output"] = {"status": "error", "execution_count": st["id"],
                                "ename": o["ename"], "evalue": o["evalue"],
                                "traceback": ["at x", "at y"]}
            else:
                st["output"] = {"status": "ok", "execution_count": st["id"], "data": {
                    "application/json": {
                        "schema": {"type": "struct", "fields": [
                            {"name": f, "type": "long", "nullable": True, "metadata": {}}
                            for f in o["fields"]]},
                        "data": o["data"]}}}
            s["state"] = "idle"
        return 200, st


RESOURCE_MEMBERS = {"driverMemory", "driverCores", "executorMemory", "executorCores",
                    "numExecutors", "conf"}


def livy_args(stub, *more):
    return ["-t", "livy", "-u", stub.url, "-c", "lake", "-U", "svc", "-P", "s3cret"] + FAST + \
        list(more)


SQL = "CALL `lake`.system.rewrite_data_files(table => 'db.t')"


def test_livy_submit_poll_success(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"),
                outcome={"fields": ["rewritten_data_files_count", "added_data_files_count",
                                    "rewritten_bytes_count", "note", "ratio"],
                         "data": [[12, 3, 123456789012, None, 0.5], [0, 0, 0, "a \"b\"", 1e20]]})
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-7", SQL, "wait", 5000,
                     "close", "count")
    assert out[0]["ok"] and out[0]["run"]["run_id"] == "0/" and \
        out[0]["run"]["state"] == "pending"
    run = out[1]["run"]
    assert out[1]["ok"] and run["state"] == "succeeded" and run["run_id"] == "0/0"
    assert run["columns"] == ["rewritten_data_files_count", "added_data_files_count",
                              "rewritten_bytes_count", "note", "ratio"]
    assert run["rows"] == [["12", "3", "123456789012", None, "0.5"],
                           ["0", "0", "0", 'a "b"', "1e+20"]]
    assert not run["rows_lost"] and run["message"] is None
    assert out[2]["ok"]
    assert livy.requests() == [
        ("POST", "/sessions"),
        ("GET", "/sessions/0"),              # idle: the statement goes in
        ("POST", "/sessions/0/statements"),
        ("GET", "/sessions/0/statements/0"),  # running
        ("GET", "/sessions/0/statements/0"),  # available
        ("DELETE", "/sessions/0"),
    ]
    assert out[3]["requests"] == 6
    assert json.loads(livy.log[0]["body"]) == {"kind": "sql", "name": "tms-job-7"}
    assert json.loads(livy.log[2]["body"]) == {"code": SQL, "kind": "sql"}
    assert livy.sessions == {}


def test_livy_session_request_carries_the_resources(driver, stubs):
    """Session properties of a livy statement are members of POST /sessions
    (their values JSON); kind and name stay the client's."""
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy, "-s", 'executorMemory="4g"', "-s",
                                        "numExecutors=3", "-s",
                                        'conf={"spark.sql.shuffle.partitions":"8"}'),
                     "submit", "tms-job-9", SQL, "close")
    assert out[0]["ok"], out
    assert json.loads(livy.log[0]["body"]) == {
        "kind": "sql", "name": "tms-job-9", "executorMemory": "4g", "numExecutors": 3,
        "conf": {"spark.sql.shuffle.partitions": "8"}}
    out = run_driver(driver, *livy_args(livy, "-s", 'kind="spark"'), "submit", "tms-job-10", SQL)
    assert not out[0]["ok"] and "tms's own" in out[0]["error"]["message"], out
    assert all("tms-job-10" not in (r.get("body") or "") for r in livy.log), livy.log


def test_livy_statement_error_is_the_engines_message(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"),
                outcome={"ename": "org.apache.iceberg.exceptions.ValidationException",
                         "evalue": "Cannot find table db.t"})
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-8", SQL, "wait", 5000)
    run = out[1]["run"]
    assert run["state"] == "failed"
    assert run["message"] == \
        "org.apache.iceberg.exceptions.ValidationException: Cannot find table db.t"
    assert run["rows"] == []


def test_livy_dead_session_fails_with_its_log(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"),
                dead_log=["stdout: ", "24/01/01 ERROR SparkContext: Error initializing",
                          "java.lang.OutOfMemoryError: Java heap space"])
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-9", SQL, "wait", 5000)
    run = out[1]["run"]
    assert run["state"] == "failed"
    assert run["message"] == ("livy session 0 is dead: stdout: \n24/01/01 ERROR SparkContext: "
                              "Error initializing\njava.lang.OutOfMemoryError: Java heap space")
    assert livy.requests() == [("POST", "/sessions"), ("GET", "/sessions/0")]


def test_livy_dead_session_without_log_asks_for_it(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"), dead_log=[])
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-9", SQL, "wait", 5000)
    assert out[1]["run"]["state"] == "failed"
    assert out[1]["run"]["message"] == "livy session 0 is dead"
    assert livy.requests() == [("POST", "/sessions"), ("GET", "/sessions/0"),
                               ("GET", "/sessions/0/log")]


def test_livy_duplicate_name_is_already_exists(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-1", SQL,
                     "submit", "tms-job-1", SQL)
    assert out[0]["ok"]
    err = out[1]["error"]
    assert err["code"] == "already exists" and err["http_status"] == 400
    assert err["message"] == 'livy already has a session named "tms-job-1"'
    assert "Duplicate session name" in err["detail"]
    assert "s3cret" not in json.dumps(out)


def test_livy_dropped_submit_then_find_by_tag(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    livy.fault("POST", "/sessions", "drop")
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-2", SQL)
    assert out[0]["error"]["code"] == "commit state unknown"
    assert out[0]["error"]["message"].startswith("submit state unknown: ")
    # a restart: another process finds the session by its tag, posts once
    out = run_driver(driver, *livy_args(livy, "-q", SQL), "find", "tms-job-2", "wait", 5000)
    assert out[0]["ok"] and out[0]["found"]
    assert out[0]["run"]["run_id"] == "0/" and out[0]["run"]["state"] == "pending"
    assert out[1]["run"]["state"] == "succeeded" and out[1]["run"]["rows"] == [["1"]]
    assert livy.requests() == [
        ("POST", "/sessions"),
        ("GET", "/sessions"),
        ("GET", "/sessions/0/statements"),
        ("GET", "/sessions/0"),
        ("POST", "/sessions/0/statements"),
        ("GET", "/sessions/0/statements/0"),
        ("GET", "/sessions/0/statements/0"),
    ]
    assert livy.log[1]["query"] == "from=0&size=100"
    assert len(livy.sessions) == 1


def test_livy_find_pages_and_adopts_a_posted_statement(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    # 120 other sessions first: the find needs two pages
    for i in range(120):
        livy.sessions[i] = {"id": i, "name": "other-%d" % i, "kind": "sql", "state": "idle",
                            "log": [], "_stmts": []}
    livy.next_id = 120
    livy.fault("POST", "/sessions/120/statements", "drop")
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-3", SQL, "poll", "poll")
    assert out[0]["run"]["run_id"] == "120/"
    assert out[1]["error"]["code"] == "connection failure"
    # the next poll looks before posting again, and adopts the statement
    assert out[2]["ok"] and out[2]["run"]["run_id"] == "120/0"
    out = run_driver(driver, *livy_args(livy), "find", "tms-job-3", "wait", 5000)
    assert out[0]["found"] and out[0]["run"]["run_id"] == "120/0"
    assert out[1]["run"]["state"] == "succeeded"
    assert [r for r in livy.requests() if r[0] == "POST"] == [
        ("POST", "/sessions"), ("POST", "/sessions/120/statements")]
    pages = [r["query"] for r in livy.log if r["path"] == "/sessions"
             and r["method"] == "GET"]
    assert pages == ["from=0&size=100", "from=100&size=100"]


def test_livy_attach_before_the_statement(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-4", SQL)
    out = run_driver(driver, *livy_args(livy, "-q", SQL), "attach", out[0]["run"]["run_id"],
                     "wait", 5000)
    assert out[0]["ok"] and out[0]["run"]["state"] == "pending"
    assert out[1]["run"]["state"] == "succeeded"
    assert livy.requests()[1:3] == [("GET", "/sessions/0/statements"), ("GET", "/sessions/0")]


def test_livy_find_not_found_and_bad_run_ids(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "find", "tms-job-5", "attach", "x/1",
                     "attach", "1/2/3")
    assert out[0]["ok"] and not out[0]["found"]
    assert out[1]["error"]["code"] == "invalid argument"
    assert out[2]["error"]["code"] == "invalid argument"


def test_livy_cancel(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-6", SQL, "poll", "cancel",
                     "poll")
    assert out[1]["run"]["run_id"] == "0/0"
    assert out[2]["ok"]
    assert out[3]["run"]["state"] == "cancelled"
    assert livy.requests() == [
        ("POST", "/sessions"), ("GET", "/sessions/0"), ("POST", "/sessions/0/statements"),
        ("POST", "/sessions/0/statements/0/cancel"), ("DELETE", "/sessions/0"),
        ("GET", "/sessions/0/statements/0"),
    ]


def test_livy_vanished_session_is_not_found(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-6", SQL, "poll")
    livy.sessions.clear()
    out = run_driver(driver, *livy_args(livy), "attach", "0/0", "poll")
    assert out[1]["error"]["code"] == "not found"
    assert out[1]["error"]["message"] == "livy session 0 no longer exists"


def test_livy_wrong_password_is_unauthorized(driver, stubs):
    livy = Livy(auth=("basic", "svc", "other"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "tms-job-1", SQL)
    assert out[0]["error"]["code"] == "unauthorized"
    assert "s3cret" not in json.dumps(out)


# ---------------------------------------------------------------------------
# Trino

class Trino(Stub):
    """The Trino client protocol: QueryResults pages linked by nextUri."""

    def __init__(self, error=None, hostile=None, **kw):
        super().__init__(**kw)
        self.queries = {}
        self.error = error          # the QueryError of the last page, or None
        self.hostile = hostile      # a base URL the first nextUri points at

    def pages(self):
        cols = [{"name": "rewritten_data_files_count", "type": "bigint"},
                {"name": "note", "type": "varchar"}]
        if self.error is not None:
            return [{"stats": {"state": "QUEUED"}},
                    {"stats": {"state": "FAILED"}, "error": self.error}]
        return [{"stats": {"state": "QUEUED"}},
                {"stats": {"state": "RUNNING"}, "columns": cols},
                {"stats": {"state": "RUNNING"}, "columns": cols, "data": [[7, "x"]]},
                {"stats": {"state": "FINISHED"}, "columns": cols, "data": [[8, None]]}]

    def page(self, q, i):
        doc = dict(q["pages"][i])
        doc["id"] = q["id"]
        doc["infoUri"] = "%s/ui/query.html?%s" % (self.url, q["id"])
        if i + 1 < len(q["pages"]) and "error" not in doc:
            base = self.hostile if (self.hostile and i == 0) else self.url
            doc["nextUri"] = "%s/v1/statement/executing/%s/y%d/%d" % (base, q["id"], i, i + 1)
        q["pos"] = i
        if "error" in doc:
            q["state"] = "FAILED"
        elif i + 1 == len(q["pages"]):
            q["state"] = "FINISHED"
        else:
            q["state"] = doc["stats"]["state"]
        return doc

    def info(self, q):
        d = {"queryId": q["id"], "state": q["state"], "self": self.url + "/v1/query/" + q["id"],
             "query": q["sql"], "session": {"queryId": q["id"], "user": q["user"],
                                             "source": "tms", "clientTags": q["tags"]},
             "memoryPool": "general", "scheduled": True}
        if q["state"] == "FAILED":
            name = q.get("error_name", "GENERIC_INTERNAL_ERROR")
            d["errorCode"] = {"code": 1, "name": name, "type": "USER_ERROR"}
            d["failureInfo"] = {"type": "io.trino.spi.TrinoException",
                                "message": q.get("error_message", "failed")}
        return d

    def route(self, m, path, q, headers, body):
        need(headers.get("x-trino-user") == "svc", "X-Trino-User %r" % headers.get("x-trino-user"))
        if m == "POST" and path == "/v1/statement":
            need(headers.get("x-trino-source") == "tms", "X-Trino-Source")
            need(headers.get("content-type", "").startswith("text/plain"), "Content-Type")
            qid = "20260102_030405_%05d_stubs" % len(self.queries)
            query = {"id": qid, "sql": body, "user": headers["x-trino-user"], "pos": 0,
                     "tags": headers.get("x-trino-client-tags", "").split(","),
                     "pages": self.pages(), "state": "QUEUED"}
            self.queries[qid] = query
            return 200, self.page(query, 0)
        if m == "GET" and path == "/v1/query":
            return 200, [self.info(x) for x in self.queries.values()]
        mq = re.fullmatch(r"/v1/query/(\w+)", path)
        if mq:
            query = self.queries.get(mq.group(1))
            if query is None:
                return 404, None
            if m == "DELETE":
                self.cancel(query)
                return 204, None
            return 200, self.info(query)
        mn = re.fullmatch(r"/v1/statement/executing/(\w+)/y(\d+)/(\d+)", path)
        need(mn, "path %s" % path)
        query = self.queries.get(mn.group(1))
        if query is None or query["state"] == "FAILED":
            return 410, None
        token = int(mn.group(3))
        need(token in (query["pos"], query["pos"] + 1), "token %d at %d" % (token, query["pos"]))
        if m == "DELETE":
            self.cancel(query)
            return 204, None
        return 200, self.page(query, token)

    def cancel(self, query):
        query["state"] = "FAILED"
        query["error_name"] = "USER_CANCELED"
        query["error_message"] = "Query was canceled"


def trino_args(stub, *more):
    return ["-t", "trino", "-u", stub.url, "-c", "lake", "-U", "svc", "-K", "tkn-1"] + FAST + \
        list(more)


TSQL = 'ALTER TABLE "lake"."db"."t" EXECUTE optimize'


def test_trino_submit_follow_success(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    out = run_driver(driver, *trino_args(trino, "-s", "query_max_run_time=2h",
                                         "-s", "iceberg.x=a b,c"),
                     "submit", "tms-job-11", TSQL, "wait", 5000, "count")
    qid = "20260102_030405_00000_stubs"
    assert out[0]["run"]["run_id"] == qid and out[0]["run"]["state"] == "pending"
    run = out[1]["run"]
    assert run["state"] == "succeeded" and not run["rows_lost"]
    assert run["columns"] == ["rewritten_data_files_count", "note"]
    assert run["rows"] == [["7", "x"], ["8", None]]
    base = "/v1/statement/executing/" + qid
    assert trino.requests() == [("POST", "/v1/statement"), ("GET", base + "/y0/1"),
                                ("GET", base + "/y1/2"), ("GET", base + "/y2/3")]
    assert out[2]["requests"] == 4
    post = trino.log[0]
    assert post["body"] == TSQL
    h = post["headers"]
    assert h["x-trino-user"] == "svc" and h["x-trino-catalog"] == "lake"
    assert h["x-trino-client-tags"] == "tms-job-11" and h["x-trino-source"] == "tms"
    assert h["x-trino-session"] == "query_max_run_time=2h,iceberg.x=a%20b%2Cc"
    assert h["authorization"] == "Bearer tkn-1"
    for r in trino.log[1:]:
        assert "x-trino-client-tags" not in r["headers"]
        assert r["headers"]["authorization"] == "Bearer tkn-1"


def test_trino_failure_is_the_engines_message(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"),
                  error={"message": "line 1:13: Table 'lake.db.t' does not exist",
                         "errorCode": 46, "errorName": "TABLE_NOT_FOUND",
                         "errorType": "USER_ERROR", "failureInfo": {"type": "x"}})
    stubs.append(trino)
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-12", TSQL, "wait", 5000)
    assert out[1]["run"]["state"] == "failed"
    assert out[1]["run"]["message"] == \
        "line 1:13: Table 'lake.db.t' does not exist (TABLE_NOT_FOUND)"


def test_trino_cancel(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-13", TSQL, "cancel", "poll")
    qid = out[0]["run"]["run_id"]
    assert out[1]["ok"]
    assert out[2]["run"]["state"] == "cancelled"
    assert out[2]["run"]["message"] == "Query was canceled (USER_CANCELED)"
    assert trino.requests() == [("POST", "/v1/statement"),
                                ("DELETE", "/v1/statement/executing/%s/y0/1" % qid),
                                ("GET", "/v1/query/" + qid)]


def test_trino_hostile_next_uri_is_refused(driver, stubs):
    other = Trino(auth=("bearer", "tkn-1"))
    trino = Trino(auth=("bearer", "tkn-1"), hostile=other.url)
    stubs += [trino, other]
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-14", TSQL)
    err = out[0]["error"]
    assert err["code"] == "protocol error"
    assert err["message"] == ("refusing to follow a trino nextUri to another server (%s)"
                              % other.url)
    assert other.log == []
    qid = "20260102_030405_00000_stubs"
    assert trino.requests() == [("POST", "/v1/statement"), ("DELETE", "/v1/query/" + qid)]


def test_trino_dropped_submit_then_find_by_tag(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    trino.fault("POST", "/v1/statement", "drop")
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-15", TSQL)
    assert out[0]["error"]["code"] == "commit state unknown"
    # another query with another tag, and ours finishes meanwhile
    run_driver(driver, *trino_args(trino), "submit", "tms-job-99", TSQL)
    qid = "20260102_030405_00000_stubs"
    trino.queries[qid]["state"] = "FINISHED"
    n = len(trino.log)
    out = run_driver(driver, *trino_args(trino), "find", "tms-job-15", "poll")
    assert out[0]["found"]
    run = out[0]["run"]
    assert run["run_id"] == qid and run["state"] == "succeeded" and run["rows_lost"]
    assert trino.requests()[n:] == [("GET", "/v1/query"), ("GET", "/v1/query/" + qid)]
    assert len([r for r in trino.requests() if r == ("POST", "/v1/statement")]) == 2


def test_trino_find_running_then_attach(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-16", TSQL, "poll")
    qid = out[0]["run"]["run_id"]
    out = run_driver(driver, *trino_args(trino), "find", "tms-job-16", "find", "nope",
                     "attach", qid, "poll")
    assert out[0]["found"] and out[0]["run"]["state"] == "running"
    assert out[1]["ok"] and not out[1]["found"]
    assert out[3]["run"]["state"] == "running" and out[3]["run"]["run_id"] == qid


def test_trino_500_on_next_uri_is_retried(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    trino.fault("GET", r"/v1/statement/executing/.*/y0/1", 500)
    trino.fault("GET", r"/v1/statement/executing/.*/y1/2", "drop")
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-17", TSQL, "wait", 5000)
    assert out[1]["run"]["state"] == "succeeded"
    assert out[1]["run"]["rows"] == [["7", "x"], ["8", None]]
    paths = [p for _, p in trino.requests()]
    assert [p.rsplit("/", 2)[-2:] for p in paths[1:]] == \
        [["y0", "1"], ["y0", "1"], ["y1", "2"], ["y1", "2"], ["y2", "3"]]


def test_trino_500_on_submit_is_state_unknown(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    trino.fault("POST", "/v1/statement", 503)
    out = run_driver(driver, *trino_args(trino), "submit", "tms-job-18", TSQL)
    assert out[0]["error"]["code"] == "commit state unknown"
    assert out[0]["error"]["http_status"] == 503
    assert trino.requests() == [("POST", "/v1/statement")]


def test_trino_hang_times_out(driver, stubs):
    trino = Trino(auth=("bearer", "tkn-1"))
    stubs.append(trino)
    trino.fault("GET", r"/v1/statement/executing/.*", "hang")
    out = run_driver(driver, *trino_args(trino, "-T", "300"), "submit", "tms-job-19", TSQL,
                     "poll")
    assert out[1]["error"]["code"] == "timeout"
    trino.fault("POST", "/v1/statement", "hang")
    out = run_driver(driver, *trino_args(trino, "-T", "300"), "submit", "tms-job-20", TSQL)
    assert out[0]["error"]["code"] == "commit state unknown"
    assert "timed out" in out[0]["error"]["message"]


def test_trino_oauth_refreshes_once_after_401(driver, stubs):
    trino = Trino(auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(trino)
    args = ["-t", "trino", "-u", trino.url, "-U", "svc", "-C", "tms-client:cl1ent-s3cret",
            "-O", trino.url + "/oauth/token", "-S", "engine"] + FAST
    trino.fault("GET", r"/v1/statement/executing/.*/y0/1", 401)
    out = run_driver(driver, *args, "submit", "tms-job-21", TSQL, "wait", 5000)
    assert out[1]["run"]["state"] == "succeeded"
    y01 = "/v1/statement/executing/%s/y0/1" % out[0]["run"]["run_id"]
    seq = [(r["method"], r["path"], r["headers"].get("authorization")) for r in trino.log]
    assert seq[:5] == [("POST", "/oauth/token", None),
                       ("POST", "/v1/statement", "Bearer tok-1"),
                       ("GET", y01, "Bearer tok-1"),          # answered 401
                       ("POST", "/oauth/token", None),
                       ("GET", y01, "Bearer tok-2")]
    assert all(a == "Bearer tok-2" for _, p, a in seq[5:])
    assert trino.log[0]["headers"]["content-type"] == "application/x-www-form-urlencoded"
    # a second 401 in a row is the answer
    trino.fault("GET", r"/v1/query/\w+", 401, times=2)
    out = run_driver(driver, *args, "attach", out[0]["run"]["run_id"], "poll")
    assert out[1]["error"]["code"] == "unauthorized"
    assert trino.token_count == 4
    assert "cl1ent-s3cret" not in json.dumps(out)


def test_trino_oauth_wrong_secret_is_unauthorized(driver, stubs):
    trino = Trino(auth=("oauth", "tms-client", "right"))
    stubs.append(trino)
    args = ["-t", "trino", "-u", trino.url, "-U", "svc", "-C", "tms-client:wr0ng",
            "-O", trino.url + "/oauth/token", "-S", "engine"] + FAST
    out = run_driver(driver, *args, "submit", "tms-job-22", TSQL)
    assert out[0]["error"]["code"] == "unauthorized"
    assert "wr0ng" not in json.dumps(out)
    assert trino.requests() == []


# ---------------------------------------------------------------------------
# Gravitino

class Gravitino(Stub):
    """Gravitino's jobs API under /api/metalakes/lake/jobs/runs."""

    def __init__(self, final="succeeded", show_conf=True, **kw):
        super().__init__(**kw)
        self.jobs = {}
        self.final = final
        self.show_conf = show_conf

    def dto(self, j, conf):
        d = {"jobId": j["jobId"], "jobTemplateName": j["tmpl"], "status": j["status"],
             "audit": {"creator": "tms", "createTime": j["created"]}}
        if conf:
            d["jobConf"] = j["conf"]
        return d

    def route(self, m, path, q, headers, body):
        need(headers.get("accept") == "application/vnd.gravitino.v1+json", "Accept")
        base = "/api/metalakes/lake/jobs/runs"
        if path == base and m == "POST":
            need(headers.get("content-type") == "application/json", "Content-Type")
            req = json.loads(body)
            need(set(req) == {"jobTemplateName", "jobConf"}, "body %r" % req)
            jid = "job-%d" % (4599671446908527615 + len(self.jobs))
            j = {"jobId": jid, "tmpl": req["jobTemplateName"], "conf": req["jobConf"],
                 "status": "queued", "created": "2026-01-01T00:00:%02d.000Z" % len(self.jobs)}
            self.jobs[jid] = j
            return 200, {"code": 0, "job": self.dto(j, False)}
        if path == base and m == "GET":
            t = q.get("jobTemplateName", [None])[0]
            return 200, {"code": 0, "jobs": [self.dto(j, False) for j in self.jobs.values()
                                             if t is None or j["tmpl"] == t]}
        mj = re.fullmatch(re.escape(base) + r"/([\w-]+)", path)
        need(mj, "path %s" % path)
        j = self.jobs.get(mj.group(1))
        if j is None:
            return 404, {"code": 1003, "type": "NoSuchJobException",
                         "message": "Job %s does not exist" % mj.group(1)}
        if m == "POST":
            need(body == "", "cancel body %r" % body)
            if j["status"] in ("queued", "started"):
                j["status"] = "cancelling"
            return 200, {"code": 0, "job": self.dto(j, False)}
        step = {"queued": "started", "started": self.final, "cancelling": "cancelled"}
        j["status"] = step.get(j["status"], j["status"])
        return 200, {"code": 0, "job": self.dto(j, self.show_conf)}


def grav_args(stub, *more):
    return ["-t", "gravitino", "-u", stub.url, "-m", "lake", "-C", "tms-client:cl1ent-s3cret",
            "-O", stub.url + "/oauth/token", "-S", "engine"] + FAST + list(more)


GBODY = json.dumps({"jobTemplateName": "tms-compaction",
                    "jobConf": {"table": "db.t", "tms_tag": "tms-job-31"}})


def test_gravitino_submit_poll_success(driver, stubs):
    g = Gravitino(auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-31", GBODY, "wait", 5000)
    jid = "job-4599671446908527615"
    assert out[0]["run"] == {"run_id": jid, "state": "pending", "message": None,
                             "rows_lost": False, "columns": [], "rows": []}
    assert out[1]["run"]["state"] == "succeeded"
    base = "/api/metalakes/lake/jobs/runs"
    assert g.requests() == [("POST", base), ("GET", base + "/" + jid), ("GET", base + "/" + jid)]
    assert g.log[1]["body"] == GBODY        # sent as given
    assert g.log[0]["path"] == "/oauth/token" and g.token_count == 1
    assert all(r["headers"]["authorization"] == "Bearer tok-1" for r in g.log[1:])


def test_gravitino_adds_the_tag_and_refuses_another(driver, stubs):
    g = Gravitino(auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    body = json.dumps({"jobTemplateName": "t", "jobConf": {"table": "db.t"}})
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-32", body,
                     "submit", "tms-job-33", GBODY, "submit", "tms-job-34", "[1]")
    assert out[0]["ok"]
    assert json.loads(g.log[1]["body"]) == {"jobTemplateName": "t",
                                            "jobConf": {"table": "db.t", "tms_tag": "tms-job-32"}}
    assert out[1]["error"]["code"] == "invalid argument"
    assert out[2]["error"]["code"] == "invalid argument"
    assert len(g.jobs) == 1


def test_gravitino_failed_and_cancelled(driver, stubs):
    g = Gravitino(final="failed", auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-31", GBODY, "wait", 5000)
    assert out[1]["run"]["state"] == "failed"
    assert out[1]["run"]["message"] == "gravitino job job-4599671446908527615 failed"
    body2 = GBODY.replace("tms-job-31", "tms-job-35")
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-35", body2, "cancel", "poll")
    jid = out[0]["run"]["run_id"]
    assert out[1]["ok"] and out[1]["run"]["state"] == "running"
    assert out[2]["run"]["state"] == "cancelled"
    base = "/api/metalakes/lake/jobs/runs"
    assert g.requests()[-3:] == [("POST", base), ("POST", base + "/" + jid),
                                 ("GET", base + "/" + jid)]


def test_gravitino_dropped_submit_then_find_by_tag(driver, stubs):
    g = Gravitino(auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    other = GBODY.replace("tms-job-31", "tms-job-30")
    run_driver(driver, *grav_args(g), "submit", "tms-job-30", other)
    g.fault("POST", "/api/metalakes/lake/jobs/runs", "drop")
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-31", GBODY)
    assert out[0]["error"]["code"] == "commit state unknown"
    n = len(g.requests())
    out = run_driver(driver, *grav_args(g, "-j", "tms-compaction"), "find", "tms-job-31",
                     "wait", 5000)
    assert out[0]["found"] and out[0]["run"]["run_id"] == "job-4599671446908527616"
    assert out[1]["run"]["state"] == "succeeded"
    base = "/api/metalakes/lake/jobs/runs"
    # the listing has no jobConf: the newest run is read first, and matches
    assert g.requests()[n:n + 2] == [("GET", base), ("GET", base + "/job-4599671446908527616")]
    lists = [r["query"] for r in g.log if r["path"] == base and r["method"] == "GET"]
    assert lists == ["jobTemplateName=tms-compaction"]
    assert len(g.jobs) == 2


def test_gravitino_find_without_job_conf_is_unsupported(driver, stubs):
    g = Gravitino(show_conf=False, auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    run_driver(driver, *grav_args(g), "submit", "tms-job-31", GBODY)
    out = run_driver(driver, *grav_args(g, "-j", "tms-compaction"), "find", "tms-job-31",
                     "find", "tms-job-31")
    assert out[0]["error"]["code"] == "unsupported"
    out = run_driver(driver, *grav_args(g, "-j", "another-template"), "find", "tms-job-31")
    assert out[0]["ok"] and not out[0]["found"]


def test_gravitino_errors(driver, stubs):
    g = Gravitino(auth=("oauth", "tms-client", "cl1ent-s3cret"))
    stubs.append(g)
    g.fault("POST", "/api/metalakes/lake/jobs/runs", 500)
    out = run_driver(driver, *grav_args(g), "submit", "tms-job-31", GBODY,
                     "attach", "job-1", "poll")
    assert out[0]["error"]["code"] == "commit state unknown"
    assert out[1]["ok"]
    err = out[2]["error"]
    assert err["code"] == "not found" and err["http_status"] == 404
    assert err["detail"] == "NoSuchJobException: Job job-1 does not exist"
    out = run_driver(driver, *grav_args(g), "attach", "../x", "attach", "a/b")
    assert [o["error"]["code"] for o in out] == ["invalid argument"] * 2


def test_open_refuses_bad_configuration(driver):
    for args, msg in [
            (["-t", "livy", "-u", "ftp://x"], "engine URI must start with http:// or https://"),
            (["-t", "livy", "-u", "http://u:p@h:1"], "without user information"),
            (["-t", "livy", "-u", "http://h:1/?a"], "must not have a query"),
            (["-t", "gravitino", "-u", "http://h:1"], "a gravitino engine needs a metalake"),
            (["-t", "trino", "-u", "http://h:1", "-C", "a:b"], "oauth2_server_uri"),
            (["-t", "trino", "-u", "http://h:1", "-C", "ab", "-O", "http://h/t"],
             "client_id:client_secret")]:
        out = run_driver(driver, *args, "count")
        assert out[0]["step"] == "open" and msg in out[0]["error"]["message"], (args, out)
        assert "p@h" not in json.dumps(out)


def test_bad_tags_are_refused(driver, stubs):
    livy = Livy(auth=("basic", "svc", "s3cret"))
    stubs.append(livy)
    out = run_driver(driver, *livy_args(livy), "submit", "a,b", SQL, "submit", "a b", SQL,
                     "submit", "x" * 201, SQL)
    assert [o["error"]["code"] for o in out] == ["invalid argument"] * 3
    assert livy.log == []
