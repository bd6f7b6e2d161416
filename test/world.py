"""
world.py -- start and stop the tms test world from Python.

Tests (and people at a Python prompt) import this module to get:

  free_port()                      a free TCP port on 127.0.0.1
  S3Server(port=None, directory=None, buckets=[...])
                                   s3rver from test/node on 127.0.0.1;
                                   .endpoint, .access_key_id, .secret_access_key,
                                   .region, .client() (an S3Client),
                                   .set_mtime(bucket, key, unix_time) (the
                                   object's LastModified), .stop()
  S3Uploader(s3), put_objects(s3, uris)
                                   many objects into s3rver at once
  synth_table(args, s3=None, gcs=None)
                                   test/fixtures/synth.py in this process,
                                   its s3:// files written by an S3Uploader,
                                   its gs:// ones to a GcsServer
  AzuriteServer(port=None, containers=[...], sql_db=None)
                                   Azurite's Blob service from test/node on
                                   127.0.0.1, in memory (or its metadata in
                                   the SQL database sql_db, a Sequelize URL,
                                   extents in a temporary directory);
                                   .endpoint, .account, .key, .config() (an
                                   AzureConfig), .client(), .stop()
  AzureGate(azurite, port=None)    the gate below in front of Azurite:
                                   Blob Batch throttled with 503 ServerBusy
  GcsServer(buckets=())            test/gcs/server.py: .endpoint, .token,
                                   .token_uri, .config(), .client(),
                                   .create_bucket(b), .add_hmac(id, secret),
                                   .add_service_account(email, modulus),
                                   .add_token(t, expires_at, who),
                                   .throttle(status, count, scope),
                                   .unthrottle(), .set_mtime(b, n, t),
                                   .log(), .reset_log(), .stats(), .stop()
  S3Gate(s3, port=None)            test/s3gate/server.py in front of an
                                   S3Server: .endpoint, .config(),
                                   .throttle(rate, burst, mode, scope),
                                   .unthrottle(), .delay(seconds, count),
                                   .undelay(), .add_credentials(id, secret,
                                   token, expires_at), .verify(on),
                                   .clear_credentials(), .log(since),
                                   .reset_log(), .stop()
  CatalogServer(dsn, warehouse, port=None, credential=None, ...)
                                   test/catalog/server.py; .uri, .prefix,
                                   .fault(...), .clear_faults(),
                                   .armed_faults(), .requests(),
                                   .reset_requests(), .set_table_config(...),
                                   .set_config(...), .set_vending(gate, ttl),
                                   .set_idempotency(lifetime),
                                   .clear_idempotency(), .idempotency(),
                                   .vended(), .token(), .request(...),
                                   .stop(); .fault(..., action="interpose",
                                   commits=[...]) is a concurrent writer;
                                   .set_sigv4(region, service, keys) makes it
                                   verify SigV4 (and its helpers sign;
                                   .sign_as(...) with other keys)
  EngineServer(kind, catalog, port=None, catalog_name="lake", ...)
                                   test/engines/server.py as livy, trino or
                                   gravitino over a CatalogServer; .uri,
                                   .raw(...), .request(...), .fault(...),
                                   .clear_faults(), .armed_faults(),
                                   .runs(), .requests(), .reset_requests(),
                                   .reset(), .restart(), .stop()
  Table readers, oracles and planting for the maintenance operations
  (snapshot expiry, orphan cleanup, manifest rewrite) are in opsworld.py.
  PostgresExporter(dsn, queries)   Debian's prometheus-postgres-exporter on
                                   127.0.0.1 with a queries file; .url,
                                   .metrics(), .stop()
  Prometheus(targets, scrape_interval="1s")
                                   Debian's prometheus on 127.0.0.1 scraping
                                   targets ("127.0.0.1:PORT"), storage in a
                                   temporary directory; .url, .query(expr),
                                   .query_range(...), .label_values(...),
                                   .stop()
  ThrowawayPostgres()              a private PostgreSQL 15 cluster for use
                                   until test/conftest.py's `pg` fixture is
                                   available; .dsn(dbname), .psql(sql, dbname),
                                   .stop()
  load_real_fixtures(catalog, s3=None, file_root=...)
                                   copy every real table of
                                   test/fixtures/iceberg into storage and
                                   register it; returns {table: how it resolved}

Every process is a child of this interpreter: .stop() ends it (SIGTERM, then
SIGKILL after a grace period), and an atexit hook stops whatever is still
running.  Readiness is awaited by reading the ready line each server prints;
nothing sleeps for a fixed time.  All servers listen on 127.0.0.1 only.
"""

import atexit
import http.client
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
import urllib.error
import urllib.parse
import urllib.request

TEST_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TEST_DIR)


def built_driver(name):
    """The path of test/integration/build/NAME (io_driver, engine_driver:
    the io layer under a driver of the tests), made by make first: make
    test built it already and make finds it up to date; a module run alone
    builds it here, once, under a lock the xdist workers share."""
    import fcntl
    out = os.path.join(REPO, "test", "integration", "build")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".make-lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "-C", REPO, "test/integration/build/" + name],
                       check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, name)
NODE_DIR = os.path.join(TEST_DIR, "node")
CATALOG_DIR = os.path.join(TEST_DIR, "catalog")
ENGINES_DIR = os.path.join(TEST_DIR, "engines")
S3GATE_DIR = os.path.join(TEST_DIR, "s3gate")
GCS_DIR = os.path.join(TEST_DIR, "gcs")
FIXTURES_DIR = os.path.join(TEST_DIR, "fixtures")
REAL_FIXTURES = os.path.join(FIXTURES_DIR, "iceberg")
PYTHON = "/usr/bin/python3"

for _d in (CATALOG_DIR, FIXTURES_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import sigv4 as sigv4_mod  # noqa: E402
import storage as storage_mod  # noqa: E402

_live = []
_live_lock = threading.Lock()


def _stop_all():
    with _live_lock:
        procs = list(reversed(_live))
    for p in procs:
        p.stop()


def _register(obj):
    """Remember obj so the atexit hook stops it (obj.stop() is idempotent)."""
    with _live_lock:
        _live.append(obj)


def _forget(obj):
    with _live_lock:
        if obj in _live:
            _live.remove(obj)


atexit.register(_stop_all)


def free_port():
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_modules():
    """Path of test/node/node_modules; raises with the install hint if absent."""
    path = os.path.join(NODE_DIR, "node_modules")
    if not os.path.isdir(os.path.join(path, "s3rver")):
        raise RuntimeError("test/node/node_modules is missing: run "
                           "npm ci --prefix test/node --no-audit --no-fund")
    return path


class _Child:
    """A child process whose stdout is drained by a thread; start() waits
    until a line containing `ready` appears (or the process dies)."""

    def __init__(self, argv, ready, timeout=30, cwd=None, env=None, name="child"):
        self.argv = argv
        self.name = name
        self.lines = []
        self._ready = threading.Event()
        self._ready_text = ready
        self.ready_line = None
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                     start_new_session=True)
        with _live_lock:
            _live.append(self)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self.ready_line is None:
            out = "".join(self.lines[-40:])
            self.stop()
            raise RuntimeError("%s did not become ready (exit %s):\n%s"
                               % (name, self.proc.poll(), out))

    def _drain(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if len(self.lines) > 2000:
                del self.lines[:1000]
            if self.ready_line is None and self._ready_text in line:
                self.ready_line = line.strip()
                self._ready.set()
        self._ready.set()

    def output(self):
        """What the process printed so far (the last lines)."""
        return "".join(self.lines)

    def stop(self, grace=10):
        """SIGTERM, wait up to grace seconds, then SIGKILL."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        with _live_lock:
            if self in _live:
                _live.remove(self)


# ---------------------------------------------------------------------------
# s3rver
# ---------------------------------------------------------------------------

class S3Server:
    """s3rver (npm, pinned in test/node) on 127.0.0.1.

    buckets are created at start (--configure-bucket); directory defaults to
    a fresh temporary directory removed on stop().  Credentials are s3rver's
    fixed S3RVER/S3RVER."""

    access_key_id = "S3RVER"
    secret_access_key = "S3RVER"
    region = "us-east-1"

    def __init__(self, port=None, directory=None, buckets=(), timeout=30):
        self._own_dir = directory is None
        self.directory = directory or tempfile.mkdtemp(prefix="tms-s3rver-")
        self.port = port or 0
        argv = ["node", os.path.join(node_modules(), "s3rver", "bin", "s3rver.js"),
                "--directory", self.directory, "--address", "127.0.0.1",
                "--port", str(self.port), "--silent", "--no-vhost-buckets"]
        for b in buckets:
            argv += ["--configure-bucket", b]
        # s3rver 3.7 encrypts ListObjectsV2 continuation tokens with DES,
        # which Node 17+ (OpenSSL 3) has only in its legacy provider:
        # without it every listing of more than one page answers 500.
        env = dict(os.environ)
        env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --openssl-legacy-provider").strip()
        self.child = _Child(argv, "S3rver listening on", timeout, env=env, name="s3rver")
        _register(self)
        self.port = int(self.child.ready_line.rsplit(":", 1)[1])
        self.endpoint = "http://127.0.0.1:%d" % self.port

    def config(self):
        """An S3Config for storage.Storage / the catalog."""
        return storage_mod.S3Config(self.endpoint, self.access_key_id,
                                    self.secret_access_key, self.region)

    def client(self):
        """A SigV4-signing S3Client for this server."""
        return storage_mod.S3Client(self.config())

    def create_bucket(self, name):
        self.client().create_bucket(name)

    def object_file(self, bucket, key):
        """The file s3rver keeps the object's bytes in (its filesystem
        store: DIR/BUCKET/KEY-DIRS/NAME._S3rver_object)."""
        parts = key.split("/")
        return os.path.join(self.directory, bucket, *parts[:-1],
                            "%s._S3rver_object" % parts[-1])

    def set_mtime(self, bucket, key, when):
        """Make the object's LastModified `when` (a Unix time; s3rver reports
        the backing file's mtime, to the second, in HEAD, GET and listings).
        Raises FileNotFoundError for a missing object."""
        path = self.object_file(bucket, key)
        os.utime(path, (when, when))

    def stop(self):
        self.child.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)
        _forget(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class S3Uploader:
    """PUTs to an S3Server through `threads` keep-alive connections,
    unsigned (s3rver takes unsigned requests): about 800 objects a second,
    where one signed client does 150.  put() queues (blocking when 4096
    are queued), join() waits for all and raises on a failure."""

    def __init__(self, s3, threads=4):
        self.port = s3.port
        self.q = queue.Queue(maxsize=4096)
        self.errors = []
        self.threads = [threading.Thread(target=self._run, daemon=True)
                        for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def _run(self):
        conn = self._connect()
        while True:
            item = self.q.get()
            if item is None:
                conn.close()
                return
            path, data = item
            for attempt in (1, 2):
                try:
                    conn.request("PUT", path, body=data,
                                 headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
                    r = conn.getresponse()
                    r.read()
                    if r.status not in (200, 204):
                        self.errors.append("PUT %s: %d" % (path, r.status))
                    break
                except (http.client.HTTPException, OSError) as e:
                    # s3rver closes idle keep-alive connections after 5 s
                    conn.close()
                    conn = self._connect()
                    if attempt == 2:
                        self.errors.append("PUT %s: %s" % (path, e))

    def put(self, bucket, key, data):
        self.q.put(("/%s/%s" % (bucket, urllib.parse.quote(key)), data))

    def join(self):
        for _ in self.threads:
            self.q.put(None)
        for t in self.threads:
            t.join()
        if self.errors:
            raise RuntimeError("S3 upload failed: %s" % self.errors[:3])


def put_objects(s3, uris, data=b"x", threads=4):
    """Store data under every s3://bucket/key of uris in s3 (S3Uploader)."""
    up = S3Uploader(s3, threads)
    try:
        for u in uris:
            up.put(*storage_mod.split_s3(u), data)
    finally:
        up.join()


def synth_table(args, s3=None, gcs=None):
    """test/fixtures/synth.py in this process (its argument list, "--out"
    and "--list-files" included), the s3:// objects it writes PUT through
    an S3Uploader to s3 (an S3Server) instead of one signed request at a
    time, the gs:// ones to gcs (a GcsServer) with its world token;
    returns synth's summary."""
    import synth  # test/fixtures, on sys.path

    up = S3Uploader(s3) if s3 is not None else None

    class Pooled(storage_mod.Storage):
        def write(self, uri, data):
            if up is not None and storage_mod.is_s3(uri):
                up.put(*storage_mod.split_s3(uri), data)
            else:
                super().write(uri, data)

    saved = synth.storage_mod
    synth.storage_mod = types.SimpleNamespace(is_s3=storage_mod.is_s3,
                                              S3Config=storage_mod.S3Config,
                                              GcsConfig=storage_mod.GcsConfig,
                                              Storage=Pooled)
    try:
        opts = synth.build_parser().parse_args(
            list(args) + (["--s3-endpoint", s3.endpoint] if s3 is not None else []) +
            (["--gcs-endpoint", gcs.endpoint, "--gcs-token", gcs.token] if gcs is not None else []))
        return synth.generate(opts)
    finally:
        synth.storage_mod = saved
        if up is not None:
            up.join()


# ---------------------------------------------------------------------------
# the GCS test server
# ---------------------------------------------------------------------------

class GcsServer:
    """test/gcs/server.py: the XML and JSON APIs of Google Cloud Storage
    that tms uses, a token endpoint for service accounts (.token_uri),
    credential checks and injected throttling.  .token is the world's own
    bearer token (no expiry), which the catalog and the table writers use."""

    def __init__(self, buckets=(), port=None, verbose=False, timeout=30):
        self.port = port or free_port()
        argv = [PYTHON, os.path.join(GCS_DIR, "server.py"), "--port", str(self.port)]
        if verbose:
            argv.append("--verbose")
        self.child = _Child(argv, "gcs listening on", timeout, name="gcs")
        _register(self)
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.token_uri = self.endpoint + "/token"
        self.token = "ya29.world-" + os.urandom(16).hex()
        self.add_token(self.token, None, "world")
        for b in buckets:
            self.create_bucket(b)

    def config(self):
        return storage_mod.GcsConfig(self.endpoint, self.token)

    def client(self):
        return storage_mod.GcsClient(self.config())

    def _admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.endpoint + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def create_bucket(self, name):
        self._admin("POST", "/admin/buckets", {"name": name})

    def add_hmac(self, access_id, secret):
        self._admin("POST", "/admin/hmac", {"access_id": access_id, "secret": secret})

    def add_service_account(self, email, modulus_hex, exponent=65537):
        self._admin("POST", "/admin/service-accounts",
                    {"email": email, "n": modulus_hex, "e": exponent})

    def add_token(self, token, expires_at, who):
        self._admin("POST", "/admin/tokens", {"token": token, "expires_at": expires_at,
                                              "who": who})

    def token_ttl(self, seconds):
        self._admin("POST", "/admin/token-ttl", {"ttl": seconds})

    def throttle(self, status, count, scope="all", retry_after=None):
        """The next `count` requests in scope ("all", "delete", "read",
        "list", "write") are answered `status` as a whole; scope "items":
        the next `count` objects of batches are refused 429 in their part."""
        self._admin("POST", "/admin/throttle", {"status": status, "count": count,
                                                "scope": scope, "retry_after": retry_after})

    def unthrottle(self):
        self._admin("DELETE", "/admin/throttle")

    def set_mtime(self, bucket, name, when):
        self._admin("POST", "/admin/mtime", {"bucket": bucket, "name": name, "mtime": when})

    def log(self):
        return self._admin("GET", "/admin/log")["log"]

    def reset_log(self):
        self._admin("DELETE", "/admin/log")

    def stats(self):
        return self._admin("GET", "/admin/stats")

    def stop(self):
        self.child.stop()
        _forget(self)


# ---------------------------------------------------------------------------
# the S3 gate
# ---------------------------------------------------------------------------

class S3Gate:
    """test/s3gate/server.py in front of an S3Server: forwards every request
    to it, throttles like S3 (a token bucket: 503 SlowDown as a whole, or
    keys of a DeleteObjects refused SlowDown) and checks SigV4 credentials
    with their session tokens and expiry, when told to; logs every
    request's outcome.  .endpoint is what clients use instead of the
    s3rver's.  In front of an AzuriteServer (flavor "azure") it throttles
    Blob Batch requests the same ways with Azure's 503 ServerBusy."""

    flavor = "s3"

    def __init__(self, s3, port=None, admin_token=None, verbose=False, timeout=30):
        self.s3 = s3
        self.port = port or free_port()
        self.admin_token = admin_token
        argv = [PYTHON, os.path.join(S3GATE_DIR, "server.py"), "--port", str(self.port),
                "--upstream", s3.endpoint, "--flavor", self.flavor]
        if admin_token:
            argv += ["--admin-token", admin_token]
        if verbose:
            argv.append("--verbose")
        self.child = _Child(argv, "gate listening on", timeout, name="s3gate")
        _register(self)
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.access_key_id = getattr(s3, "access_key_id", None)
        self.secret_access_key = getattr(s3, "secret_access_key", None)
        self.region = getattr(s3, "region", None)

    def config(self):
        """An S3Config through the gate (s3rver's credentials)."""
        return storage_mod.S3Config(self.endpoint, self.access_key_id,
                                    self.secret_access_key, self.region)

    def _admin(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"}
        if self.admin_token:
            hdrs["X-Admin-Token"] = self.admin_token
        req = urllib.request.Request(self.endpoint + path, data=data, headers=hdrs,
                                     method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def throttle(self, rate, burst=1, mode="request", scope="delete", retry_after=None):
        """A token bucket of rate a second (burst at most): beyond it,
        mode "request" answers 503 SlowDown, mode "keys" refuses the keys
        of a DeleteObjects beyond it with SlowDown in a 200."""
        self._admin("POST", "/admin/throttle", {"rate": rate, "burst": burst, "mode": mode,
                                                "scope": scope, "retry_after": retry_after})

    def unthrottle(self):
        self._admin("DELETE", "/admin/throttle")

    def errors(self, every, statuses=(500, 503), methods=("GET", "PUT", "HEAD", "POST", "DELETE"),
               agent=None):
        """Answer every `every`-th request of `methods` (whose User-Agent
        starts with `agent`, when given) with the next of `statuses` in
        turn (500 InternalError, 503 ServiceUnavailable), not forwarded."""
        self._admin("POST", "/admin/errors", {"every": every, "statuses": list(statuses),
                                              "methods": list(methods), "agent": agent})

    def no_errors(self):
        """Stop injecting errors; the number answered since errors()."""
        return (self._admin("DELETE", "/admin/errors") or {}).get("sent", 0)

    def delay(self, seconds, count=1, scope="delete"):
        """The next `count` requests in scope wait `seconds` first."""
        self._admin("POST", "/admin/delay", {"seconds": seconds, "count": count,
                                             "scope": scope})

    def undelay(self):
        self._admin("DELETE", "/admin/delay")

    def add_credentials(self, access_key_id, secret_access_key, session_token=None,
                        expires_at=None):
        self._admin("POST", "/admin/credentials", {
            "access_key_id": access_key_id, "secret_access_key": secret_access_key,
            "session_token": session_token, "expires_at": expires_at})

    def clear_credentials(self):
        self._admin("DELETE", "/admin/credentials")

    def verify(self, enabled=True):
        """Check every request's signature against the registered keys."""
        self._admin("POST", "/admin/verify", {"enabled": enabled})

    def log(self, since=0):
        """The request log after seq `since`: a list of dicts (seq, t: when
        answered, received: when received, both seconds since the gate
        started, method, path, kind, keys, first_key, bucket, outcome, status,
        throttled_keys, access_key_id)."""
        return self._admin("GET", "/admin/log?since=%d" % since)["requests"]

    def reset_log(self):
        self._admin("DELETE", "/admin/log")

    def stop(self):
        self.child.stop()
        _forget(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class AzureGate(S3Gate):
    """The gate (test/s3gate/server.py --flavor azure) in front of an
    AzuriteServer: .throttle(rate, burst, mode, scope, retry_after) refuses
    Blob Batch requests with 503 ServerBusy as a whole (mode "request") or
    sub-request by sub-request (mode "keys"); .delay, .log as S3Gate's."""

    flavor = "azure"

    def config(self):
        """An AzureConfig through the gate (Azurite's development key)."""
        return storage_mod.AzureConfig(self.endpoint)

    def bearer(self, verify_url):
        """Take a request with a bearer token when a GET of verify_url with
        it answers 200 (signing it again for Azurite); None: no longer."""
        self._admin("POST", "/admin/bearer", {"verify_url": verify_url})


# ---------------------------------------------------------------------------
# Azurite
# ---------------------------------------------------------------------------

class AzuriteServer:
    """Azurite's Blob service (npm, pinned in test/node) on 127.0.0.1, in
    memory, without telemetry.  Its development account and key
    (devstoreaccount1, storage.AZURITE_KEY) are the only ones; requests go
    to endpoint/devstoreaccount1/<container>/<blob>.  containers are created
    at start.

    sql_db (a Sequelize URL, e.g. mysql://user:password@127.0.0.1:port/db,
    given to Azurite as AZURITE_DB) keeps the blob metadata in that
    database instead of Azurite's in-memory LokiJS collections, whose
    lookups and deletes scan every blob held (benchmarks of 100,000 blobs
    need it); the extents then go to a temporary directory removed on
    stop(), as Azurite refuses --inMemoryPersistence with SQL."""

    account = storage_mod.AZURITE_ACCOUNT
    key = storage_mod.AZURITE_KEY

    def __init__(self, port=None, containers=(), timeout=60, sql_db=None):
        argv = ["node", os.path.join(node_modules(), "azurite", "dist", "src", "blob", "main.js"),
                "--blobHost", "127.0.0.1", "--blobPort", str(port or 0),
                "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"]
        env = None
        self.location = None
        if sql_db is None:
            argv += ["--inMemoryPersistence", "--extentMemoryLimit", "512"]
        else:
            self.location = tempfile.mkdtemp(prefix="tms-azurite-")
            argv += ["--location", self.location]
            env = dict(os.environ, AZURITE_DB=sql_db)
        try:
            self.child = _Child(argv, "Azurite Blob service successfully listens on", timeout,
                                env=env, name="azurite")
        except BaseException:
            self._remove_location()
            raise
        _register(self)
        self.port = int(self.child.ready_line.rsplit(":", 1)[1])
        self.endpoint = "http://127.0.0.1:%d" % self.port
        for c in containers:
            self.create_container(c)

    def config(self):
        """An AzureConfig for storage.Storage / the catalog."""
        return storage_mod.AzureConfig(self.endpoint)

    def client(self):
        return storage_mod.AzureClient(self.config())

    def create_container(self, name):
        self.client().create_container(self.account, name)

    def _remove_location(self):
        if self.location is not None:
            shutil.rmtree(self.location, ignore_errors=True)

    def stop(self):
        try:
            self.child.stop()
        finally:
            self._remove_location()
            _forget(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------
# the REST catalog
# ---------------------------------------------------------------------------

class CatalogError(Exception):
    """A non-2xx answer from CatalogServer.request(): .status, .body."""

    def __init__(self, status, body, headers=None):
        super().__init__("HTTP %s: %s" % (status, body))
        self.status = status
        self.body = body
        self.headers = headers or {}


class CatalogServer:
    """test/catalog/server.py as a child process.

    dsn names the pointer database; warehouse is file:///... or s3://...;
    s3 is an S3Server (or S3Config) the catalog writes through and vends;
    azure an AzuriteServer (or AzureConfig) it writes abfs[s]:// files to;
    credential "ID:SECRET" turns on OAuth2; static_token adds a fixed bearer
    token; file_root is where relative paths resolve; sigv4 = {"region",
    "service", "keys": {ID: {"secret", "session_token"}}} makes it verify
    AWS SigV4 from the start (set_sigv4 does it later).  While it verifies,
    raw() and request() sign /v1 requests with the first key.  processes
    N > 1 serves from N pre-forked processes (server.py --processes: the
    request log gathered from all; admin changes refused)."""

    def __init__(self, dsn, warehouse, port=None, credential=None, token_ttl=None,
                 static_token=None, catalog_name="tms_test", s3=None, file_root=None,
                 admin_token=None, verbose=False, timeout=30, sigv4=None, azure=None,
                 gcs=None, processes=None):
        self.port = port or free_port()
        self.catalog_name = catalog_name
        self.prefix = catalog_name
        self.credential = credential
        self.static_token = static_token
        self.admin_token = admin_token
        self.warehouse = warehouse
        self.file_root = file_root
        argv = [PYTHON, os.path.join(CATALOG_DIR, "server.py"), "--port", str(self.port),
                "--dsn", dsn, "--warehouse", warehouse, "--catalog-name", catalog_name]
        if credential:
            argv += ["--token-credential", credential]
        if token_ttl is not None:
            argv += ["--token-ttl", str(token_ttl)]
        if static_token:
            argv += ["--static-token", static_token]
        if admin_token:
            argv += ["--admin-token", admin_token]
        if s3 is not None:
            cfg = s3.config() if hasattr(s3, "config") else s3
            argv += ["--s3-endpoint", cfg.endpoint, "--s3-access-key-id", cfg.access_key_id,
                     "--s3-secret-access-key", cfg.secret_access_key,
                     "--s3-region", cfg.region]
        self.s3 = s3
        if azure is not None:
            argv += ["--azure-endpoint", azure.endpoint]
        self.azure = azure
        if gcs is not None:
            argv += ["--gcs-endpoint", gcs.endpoint, "--gcs-token", gcs.token]
        self.gcs = gcs
        if file_root:
            argv += ["--file-root", file_root]
        if verbose:
            argv.append("--verbose")
        if processes:
            argv += ["--processes", str(processes)]
        self.processes = processes or 1
        self._signer = None
        if sigv4:
            argv += ["--sigv4-region", sigv4["region"],
                     "--sigv4-service", sigv4.get("service") or "execute-api"]
            for kid, k in sigv4["keys"].items():
                argv += ["--sigv4-key", ":".join(
                    [kid, k["secret"]] + ([k["session_token"]] if k.get("session_token") else []))]
            self._signer = self._make_signer(sigv4)
        self.child = _Child(argv, "catalog listening on", timeout, name="catalog")
        self.uri = "http://127.0.0.1:%d" % self.port
        self._token = None

    # -- HTTP helpers -----------------------------------------------------------

    def token(self, fresh=False):
        """A bearer token: the static one, or one from /v1/oauth/tokens."""
        if self.static_token and not self.credential:
            return self.static_token
        if not self.credential:
            return None
        if self._token is None or fresh:
            cid, sec = self.credential.split(":", 1)
            st, body, _ = self.raw("POST", "/v1/oauth/tokens", form={
                "grant_type": "client_credentials", "client_id": cid,
                "client_secret": sec, "scope": "catalog"})
            if st != 200:
                raise CatalogError(st, body)
            self._token = body["access_token"]
        return self._token

    def raw(self, method, path, body=None, headers=None, form=None, timeout=30, auth=None):
        """One HTTP request; returns (status, parsed JSON or text or None, headers).

        auth: None -> use token() when the server needs one; False -> none;
        a string -> that bearer token."""
        hdrs = dict(headers or {})
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if auth is None and path.startswith("/v1/") and path != "/v1/oauth/tokens":
            tok = self.token()
            if tok:
                hdrs["Authorization"] = "Bearer " + tok
        elif isinstance(auth, str):
            hdrs["Authorization"] = "Bearer " + auth
        if self._signer is not None and path.startswith("/v1/") and path != "/v1/oauth/tokens":
            verifier, key_id = self._signer
            hdrs = verifier.sign(method, self.uri + path, hdrs, data, key_id)
        req = urllib.request.Request(self.uri + path, data=data, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, text, rh = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, text, rh = e.code, e.read(), dict(e.headers)
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text.decode("utf-8", "replace")
        return status, parsed, rh

    def request(self, method, path, body=None, headers=None, expect=None, **kw):
        """raw() that raises CatalogError unless the status is expected
        (default: any 2xx or 304).  path may omit "/v1/{prefix}": a path
        starting with "namespaces" or "tables" gets it prepended."""
        if not path.startswith("/"):
            path = "/v1/%s/%s" % (self.prefix, path)
        st, parsed, rh = self.raw(method, path, body, headers, **kw)
        ok = (st == expect) if expect is not None else (200 <= st < 300 or st == 304)
        if not ok:
            raise CatalogError(st, parsed, rh)
        return parsed

    def _admin(self, method, path, body=None):
        hdrs = {"X-Admin-Token": self.admin_token} if self.admin_token else {}
        st, parsed, _ = self.raw(method, path, body, hdrs, auth=False)
        if st >= 300:
            raise CatalogError(st, parsed)
        return parsed

    def fault(self, path_regex, action="status", count=1, method=None, status=503,
              seconds=5, body=None, headers=None, at="request", body_repeat=None,
              encoding=None, commits=None, table=None, conditional=None):
        """Arm a fault for the next `count` requests matching method and
        path_regex (and, when conditional is not None, carrying If-None-Match
        or not; see server.py); returns its id.  body_repeat is a dict
        (head, unit, count, tail) the server builds a large body from;
        encoding="gzip" compresses the body.  action="interpose" with
        commits=[{"requirements": [...], "updates": [...]}, ...] applies
        those commits to the table first (a concurrent writer; table =
        (namespace, name) when the matched path names no table)."""
        spec = {"match": {"path_regex": path_regex}, "count": count, "action": action,
                "status": status, "seconds": seconds, "at": at}
        if commits is not None:
            spec["commits"] = commits
        if table is not None:
            ns, name = table
            spec["table"] = {"namespace": [ns] if isinstance(ns, str) else list(ns),
                             "name": name}
        if method:
            spec["match"]["method"] = method
        if conditional is not None:
            spec["match"]["conditional"] = conditional
        if body is not None:
            spec["body"] = body
        if headers:
            spec["headers"] = headers
        if body_repeat is not None:
            spec["body_repeat"] = body_repeat
        if encoding:
            spec["encoding"] = encoding
        return self._admin("POST", "/admin/faults", spec)["id"]

    def clear_faults(self):
        self._admin("DELETE", "/admin/faults")

    def armed_faults(self):
        """The ids of the faults that have firings left.  A fault armed with
        count=1 leaves this list when a matching request arrives, before it
        acts (a hang is then in progress): tests await that instead of
        sleeping."""
        return [f["id"] for f in self._admin("GET", "/admin/faults")["faults"]]

    def requests(self, path_regex=None):
        """The request log: {"requests": [...], "counts": {...}, "total": n}."""
        q = "?" + urllib.parse.urlencode({"path_regex": path_regex}) if path_regex else ""
        return self._admin("GET", "/admin/requests" + q)

    def reset_requests(self):
        self._admin("DELETE", "/admin/requests")

    def expire_tokens(self):
        self._admin("POST", "/admin/expire-tokens")

    def set_table_config(self, namespace, name, config):
        """Vend `config` (a dict of strings) as LoadTableResult.config of
        this table from now on, instead of the catalog's S3 settings."""
        levels = [namespace] if isinstance(namespace, str) else list(namespace)
        self._admin("POST", "/admin/table-config",
                    {"namespace": levels, "table": name, "config": config})

    def clear_table_configs(self):
        self._admin("DELETE", "/admin/table-config")

    def set_config(self, defaults=None, overrides=None):
        """Extra properties in the catalog's GET /v1/config answer."""
        self._admin("POST", "/admin/config",
                    {"defaults": defaults or {}, "overrides": overrides or {}})

    def clear_config(self):
        self._admin("DELETE", "/admin/config")

    def set_idempotency(self, lifetime="PT30M"):
        """Advertise idempotency-key-lifetime in /v1/config and answer a
        repeated Idempotency-Key with its first answer, from now on."""
        self._admin("POST", "/admin/idempotency", {"lifetime": lifetime})

    def clear_idempotency(self):
        self._admin("DELETE", "/admin/idempotency")

    def idempotency(self):
        """{"lifetime": str or None, "keys": how many answers are remembered}."""
        return self._admin("GET", "/admin/idempotency")

    def set_vending(self, gate, ttl, expiry_visible=True, credentials_endpoint=True):
        """Vend temporary S3 credentials for tables in S3, registered with
        `gate` (an S3Gate) to expire `ttl` seconds after each load or
        loadCredentials; with expiry_visible false the vended config does
        not say when; with credentials_endpoint false /v1/config does not
        offer loadCredentials (clients reload the table instead)."""
        self._admin("POST", "/admin/vending", {
            "gate": gate.endpoint, "ttl": ttl, "expiry_visible": expiry_visible,
            "credentials_endpoint": credentials_endpoint})

    def clear_vending(self):
        self._admin("DELETE", "/admin/vending")

    def vended(self):
        """The credentials vended so far: [{access_key_id, expires_at, via
        ("load" or "credentials"), issued_at}]."""
        return self._admin("GET", "/admin/vending")["issued"]

    @staticmethod
    def _make_signer(spec):
        keys = {k: sigv4_mod.Key(v["secret"], v.get("session_token"))
                for k, v in spec["keys"].items()}
        return (sigv4_mod.Verifier(spec["region"], spec.get("service") or "execute-api", keys),
                next(iter(spec["keys"])))

    def set_sigv4(self, region, service="execute-api", keys=None, **options):
        """Verify AWS SigV4 on every /v1 request from now on: keys is
        {ID: {"secret": ..., "session_token": ...}}; options are
        max_skew_seconds, clock_offset_seconds, error_shape ("aws" or
        "iceberg"), as POST /admin/sigv4 takes them.  This helper's own
        requests are signed with the first key."""
        spec = dict(options, region=region, service=service, keys=keys)
        self._admin("POST", "/admin/sigv4", spec)
        self._signer = self._make_signer(spec)

    def sign_as(self, region, service="execute-api", keys=None):
        """Sign this helper's own requests with these keys, region and
        service from now on, whatever the catalog verifies (to see
        requests refused)."""
        self._signer = self._make_signer(dict(region=region, service=service, keys=keys))

    def clear_sigv4(self):
        self._admin("DELETE", "/admin/sigv4")
        self._signer = None

    def sigv4(self):
        """What the catalog verifies ({} when it does not)."""
        return self._admin("GET", "/admin/sigv4")

    # -- catalog helpers --------------------------------------------------------

    def create_namespace(self, *levels, properties=None):
        st, body, _ = self.raw("POST", "/v1/%s/namespaces" % self.prefix,
                               {"namespace": list(levels), "properties": properties or {}})
        if st not in (200, 409):
            raise CatalogError(st, body)
        return body

    def register(self, namespace, name, metadata_location, overwrite=False):
        """Register a table (creating its namespace if needed)."""
        levels = [namespace] if isinstance(namespace, str) else list(namespace)
        self.create_namespace(*levels)
        return self.request("POST", "namespaces/%s/register" % urllib.parse.quote("\x1f".join(levels)),
                            {"name": name, "metadata-location": metadata_location,
                             "overwrite": overwrite})

    def load_table(self, namespace, name, **kw):
        levels = [namespace] if isinstance(namespace, str) else list(namespace)
        return self.request("GET", "namespaces/%s/tables/%s" % (
            urllib.parse.quote("\x1f".join(levels)), urllib.parse.quote(name)), **kw)

    def stop(self):
        self.child.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------
# the engines (Livy, Trino, Gravitino)
# ---------------------------------------------------------------------------

class EngineServer:
    """test/engines/server.py as a child process: kind is "livy", "trino" or
    "gravitino"; it commits to `catalog` (a CatalogServer) and reads and
    writes its storage (s3: an S3Server; file_root as the catalog's).

    Auth: user + password (basic), token (bearer), or credential
    "ID:SECRET" (OAuth2 client credentials at POST /oauth/tokens); raw()
    and request() send whichever is configured unless auth=False or a
    header is given."""

    def __init__(self, kind, catalog, port=None, catalog_name="lake", s3=None, file_root=None,
                 metalake="metalake", user=None, password=None, token=None, credential=None,
                 admin_token=None, startup_delay=None, abandon_seconds=None, verbose=False,
                 timeout=30):
        self.kind = kind
        self.port = port or free_port()
        self.catalog_name = catalog_name
        self.metalake = metalake
        self.user, self.password, self.token_value = user, password, token
        self.credential = credential
        self.admin_token = admin_token
        argv = [PYTHON, os.path.join(ENGINES_DIR, "server.py"), "--type", kind,
                "--port", str(self.port), "--catalog-uri", catalog.uri,
                "--catalog-name", catalog_name, "--metalake", metalake]
        ctok = catalog.token() if hasattr(catalog, "token") else None
        if ctok:
            argv += ["--catalog-token", ctok]
        file_root = file_root or getattr(catalog, "file_root", None)
        if file_root:
            argv += ["--file-root", file_root]
        s3 = s3 if s3 is not None else getattr(catalog, "s3", None)
        if s3 is not None:
            cfg = s3.config() if hasattr(s3, "config") else s3
            argv += ["--s3-endpoint", cfg.endpoint, "--s3-access-key-id", cfg.access_key_id,
                     "--s3-secret-access-key", cfg.secret_access_key, "--s3-region", cfg.region]
        if user:
            argv += ["--user", user]
        if password is not None:
            argv += ["--password", password]
        if token:
            argv += ["--token", token]
        if credential:
            argv += ["--oauth2-credential", credential]
        if admin_token:
            argv += ["--admin-token", admin_token]
        if startup_delay is not None:
            argv += ["--startup-delay", str(startup_delay)]
        if abandon_seconds is not None:
            argv += ["--abandon-seconds", str(abandon_seconds)]
        if verbose:
            argv.append("--verbose")
        self.child = _Child(argv, "engine listening on", timeout, name="engine-" + kind)
        self.uri = "http://127.0.0.1:%d" % self.port
        self._token = None

    def auth_header(self):
        """The Authorization header value for the configured credentials."""
        import base64
        if self.password is not None:
            return "Basic " + base64.b64encode(
                ("%s:%s" % (self.user, self.password)).encode()).decode()
        if self.token_value:
            return "Bearer " + self.token_value
        if self.credential:
            if self._token is None:
                cid, sec = self.credential.split(":", 1)
                st, body, _ = self.raw("POST", "/oauth/tokens", form={
                    "grant_type": "client_credentials", "client_id": cid,
                    "client_secret": sec}, auth=False)
                if st != 200:
                    raise CatalogError(st, body)
                self._token = body["access_token"]
            return "Bearer " + self._token
        return None

    def raw(self, method, path, body=None, headers=None, form=None, data=None, timeout=30,
            auth=None):
        """One request; (status, parsed JSON or text, headers).  body: JSON;
        data: raw bytes or text (Trino's statement)."""
        hdrs = dict(headers or {})
        payload = None
        if form is not None:
            payload = urllib.parse.urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        elif data is not None:
            payload = data.encode() if isinstance(data, str) else data
        elif body is not None:
            payload = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if auth is None and "Authorization" not in hdrs and not path.startswith("/admin"):
            h = self.auth_header()
            if h:
                hdrs["Authorization"] = h
        elif isinstance(auth, str):
            hdrs["Authorization"] = auth
        if path.startswith("/admin") and self.admin_token:
            hdrs["X-Admin-Token"] = self.admin_token
        url = path if path.startswith("http") else self.uri + path
        req = urllib.request.Request(url, data=payload, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, text, rh = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, text, rh = e.code, e.read(), dict(e.headers)
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text.decode("utf-8", "replace")
        return status, parsed, rh

    def request(self, method, path, body=None, expect=None, **kw):
        st, parsed, rh = self.raw(method, path, body, **kw)
        ok = (st == expect) if expect is not None else 200 <= st < 300
        if not ok:
            raise CatalogError(st, parsed, rh)
        return parsed

    def _admin(self, method, path, body=None):
        st, parsed, _ = self.raw(method, path, body, auth=False)
        if st >= 300:
            raise CatalogError(st, parsed)
        return parsed

    def fault(self, path_regex=".*", action="status", count=1, method=None, status=503,
              seconds=5, body=None, message=None, statement_regex=None):
        """Arm a fault (see test/engines/server.py); returns its id."""
        spec = {"match": {"path_regex": path_regex}, "count": count, "action": action,
                "status": status, "seconds": seconds}
        if method:
            spec["match"]["method"] = method
        if statement_regex:
            spec["match"]["statement_regex"] = statement_regex
        if body is not None:
            spec["body"] = body
        if message is not None:
            spec["message"] = message
        return self._admin("POST", "/admin/faults", spec)["id"]

    def restart(self):
        """Forget every session, statement, query and running job now."""
        return self.fault(action="restart")

    def forget(self):
        """As restart(), and Gravitino also forgets every job run: the
        engine knows no run by its id or its tag afterwards."""
        return self.fault(action="forget")

    def set_templates(self, names):
        """gravitino: the built-in job templates offered from now on (a
        POST /admin/reset goes back to those a Gravitino release ships)."""
        return self._admin("POST", "/admin/templates", {"names": names})["names"]

    def clear_faults(self):
        self._admin("DELETE", "/admin/faults")

    def armed_faults(self):
        return [f["id"] for f in self._admin("GET", "/admin/faults")["faults"]]

    def runs(self):
        """Every run: [{id, engine_id, tag, statement, state, submitted_at,
        finished_at, result, columns, rows, error}]."""
        return self._admin("GET", "/admin/runs")["runs"]

    def requests(self):
        """{"counts": {"METHOD /path/{template}": {"status": n}}, "total": n}."""
        return self._admin("GET", "/admin/requests")

    def reset_requests(self):
        self._admin("DELETE", "/admin/requests")

    def reset(self):
        self._admin("POST", "/admin/reset")

    def stop(self):
        self.child.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------
# Prometheus and its PostgreSQL exporter (Debian packages)
# ---------------------------------------------------------------------------

def _http_get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8")


class PostgresExporter:
    """prometheus-postgres-exporter (Debian 12: 0.11) on 127.0.0.1:port,
    connecting with dsn (a libpq key=value string) and adding the metrics
    of the queries file (--extend.query-path).  The DSN goes in the
    environment, never on a command line."""

    BINARY = "prometheus-postgres-exporter"

    def __init__(self, dsn, queries, port=None, timeout=30):
        if shutil.which(self.BINARY) is None:
            raise RuntimeError("%s is missing: run scripts/install-deps.sh as root" % self.BINARY)
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        env = dict(os.environ, DATA_SOURCE_NAME=dsn)
        self.child = _Child([self.BINARY, "--web.listen-address=127.0.0.1:%d" % self.port,
                             "--extend.query-path=%s" % queries, "--log.level=info"],
                            "Listening on", timeout, env=env, name="postgres exporter")
        _register(self)

    def metrics(self):
        """The text of one scrape of /metrics."""
        return _http_get(self.url + "/metrics")

    def stop(self):
        self.child.stop()
        _forget(self)


class Prometheus:
    """prometheus (Debian 12: 2.42) on 127.0.0.1:port scraping `targets`
    (host:port strings, job "tms") every scrape_interval, with its
    configuration and TSDB in a temporary directory removed on stop()."""

    BINARY = "prometheus"

    def __init__(self, targets, port=None, scrape_interval="1s", timeout=60):
        if shutil.which(self.BINARY) is None:
            raise RuntimeError("%s is missing: run scripts/install-deps.sh as root" % self.BINARY)
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.directory = tempfile.mkdtemp(prefix="tms-prometheus-")
        config = os.path.join(self.directory, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: %s\n  evaluation_interval: %s\n"
                    "scrape_configs:\n  - job_name: tms\n    static_configs:\n"
                    "      - targets: [%s]\n"
                    % (scrape_interval, scrape_interval,
                       ", ".join(json.dumps(t) for t in targets)))
        self.child = _Child([self.BINARY, "--config.file=%s" % config,
                             "--storage.tsdb.path=%s" % os.path.join(self.directory, "data"),
                             "--web.listen-address=127.0.0.1:%d" % self.port],
                            "Server is ready to receive web requests", timeout,
                            cwd=self.directory, name="prometheus")
        _register(self)

    def _api(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            body = json.loads(_http_get("%s/api/v1/%s?%s" % (self.url, path, query)))
        except urllib.error.HTTPError as e:
            body = json.loads(e.read().decode("utf-8", "replace") or "{}")
        if body.get("status") != "success":
            raise RuntimeError("prometheus %s %r: %s: %s"
                               % (path, params, body.get("errorType"), body.get("error")))
        return body["data"]

    def query(self, expr, at=None):
        """An instant query: the list of {"metric": {...}, "value": [t, "v"]}."""
        params = {"query": expr}
        if at is not None:
            params["time"] = at
        data = self._api("query", **params)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [data]

    def query_range(self, expr, start, end, step):
        """A range query: the list of {"metric": {...}, "values": [[t, "v"], ...]}."""
        return self._api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def label_values(self, label, match=None):
        """The values of a label, over the series matching `match` (a selector)."""
        params = {"match[]": [match]} if match else {}
        return self._api("label/%s/values" % label, **params)

    def stop(self):
        self.child.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
        _forget(self)


# ---------------------------------------------------------------------------
# PostgreSQL until the lead's `pg` fixture exists
# ---------------------------------------------------------------------------

class ThrowawayPostgres:
    """A private PostgreSQL 15 cluster (initdb as postgres, Unix socket and
    127.0.0.1 only), removed on stop().  Only for use while test/conftest.py
    does not provide the `pg` fixture."""

    BIN = "/usr/lib/postgresql/15/bin"

    def __init__(self, port=None):
        self.port = port or free_port()
        self.base = tempfile.mkdtemp(prefix="tms-world-pg-")
        os.chmod(self.base, 0o755)
        self.data = os.path.join(self.base, "data")
        self.host = os.path.join(self.base, "sock")
        as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            subprocess.run(["install", "-d", "-o", "postgres", self.data, self.host], check=True)
        else:
            os.makedirs(self.data)
            os.makedirs(self.host)
        subprocess.run(as_pg + [self.BIN + "/initdb", "-D", self.data, "-U", "postgres",
                                "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, cwd="/tmp", stdout=subprocess.DEVNULL)
        argv = as_pg + [self.BIN + "/postgres", "-D", self.data, "-p", str(self.port),
                        "-k", self.host, "-c", "listen_addresses=127.0.0.1",
                        "-c", "fsync=off", "-c", "log_min_messages=log"]
        self.child = _Child(argv, "ready to accept connections", 60, cwd="/tmp",
                            name="postgres")
        _register(self)

    def dsn(self, dbname="postgres"):
        return "host=%s port=%d user=postgres dbname=%s" % (self.host, self.port, dbname)

    def psql(self, sql, dbname="postgres"):
        r = subprocess.run(["/usr/bin/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                            self.dsn(dbname), "-c", sql], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        return r.stdout

    def stop(self):
        self.child.stop()
        shutil.rmtree(self.base, ignore_errors=True)
        _forget(self)


def ensure_database(psql, dbname):
    """CREATE DATABASE dbname unless it exists (psql: a callable(sql, dbname))."""
    have = psql("SELECT 1 FROM pg_database WHERE datname = '%s'" % dbname, dbname="postgres")
    if not have.strip():
        psql("CREATE DATABASE %s" % dbname, dbname="postgres")


# ---------------------------------------------------------------------------
# the real fixture tables
# ---------------------------------------------------------------------------

# table folder -> (current metadata file, path prefix written in the metadata)
REAL_TABLES = {
    "spark-v2-mor-posdeletes": ("metadata/v5.metadata.json",
                                "s3a://hyperparam-iceberg/spark/bunnies"),
    "spark-v2-partitioned-bucket-identity": ("metadata/v3.metadata.json",
                                             "s3a://hyperparam-iceberg/spark/rename_column"),
    "java-v2-partitioned-eqdeletes": (
        "metadata/v6.metadata.json",
        "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned"),
    "pyiceberg-v1-overwrite": (
        "metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json",
        "data/persistent/iceberg_v1_repro/repro/merch_v1"),
    "pyiceberg-v2-partitioned-nullcodec": (
        "metadata/00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json",
        "file://data/persistent/map_stats/default.db/map_stats"),
    "spark-v1-gzip-metadata": ("metadata/v2.gz.metadata.json", "lineitem_iceberg_gz"),
    "spark-v1-legacy-manifests-field": (
        "metadata/v2.metadata.json",
        "data/persistent/iceberg_v1_deprecated/default/legacy_v1"),
}

REAL_NAMESPACE = "real"


def table_name_for(folder):
    """The catalog table name of a fixture folder (dashes -> underscores)."""
    return folder.replace("-", "_")


def load_real_fixtures(catalog, s3=None, file_root=None, namespace=REAL_NAMESPACE,
                       source=REAL_FIXTURES):
    """Put every real table of test/fixtures/iceberg into storage and
    register it in catalog under `namespace`.

    * s3a://bucket/prefix tables are uploaded to s3 (an S3Server) under the
      same bucket and keys (the bucket is created if needed); the registered
      metadata location is the original s3a:// URI.  Skipped if s3 is None.
    * relative and file://data/... tables are copied below file_root so that
      their prefix, taken relative to file_root, names the copy; the catalog
      must have been started with the same file_root (CatalogServer(...,
      file_root=...)).  The registered metadata location is the absolute
      file:// URI of the copy's metadata file.

    Returns {table name: {"folder", "metadata_location", "prefix", "storage"
    ("s3" or "file"), "resolves_to" (bucket/key prefix or local directory),
    "format_version"}}."""
    if file_root is None:
        file_root = catalog.file_root
    result = {}
    for folder, (meta_rel, prefix) in sorted(REAL_TABLES.items()):
        src = os.path.join(source, folder)
        name = table_name_for(folder)
        files = []
        for dirpath, _, names in os.walk(src):
            for n in names:
                if n == "PROVENANCE.md":
                    continue
                full = os.path.join(dirpath, n)
                files.append((os.path.relpath(full, src), full))
        if prefix.startswith("s3a://"):
            if s3 is None:
                continue
            bucket, key_prefix = storage_mod.split_s3(prefix)
            client = s3.client()
            client.create_bucket(bucket)
            for rel, full in files:
                with open(full, "rb") as f:
                    client.put(bucket, key_prefix + "/" + rel, f.read())
            mloc = prefix + "/" + meta_rel
            info = {"storage": "s3", "resolves_to": "s3://%s/%s/" % (bucket, key_prefix)}
        else:
            if file_root is None:
                raise ValueError("file_root is needed for tables with relative paths")
            rel_prefix = prefix[len("file://"):] if prefix.startswith("file://") else prefix
            dest = os.path.join(file_root, rel_prefix)
            for rel, full in files:
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copyfile(full, os.path.join(dest, rel))
            mloc = "file://" + os.path.join(dest, meta_rel)
            info = {"storage": "file", "resolves_to": dest + "/"}
        catalog.register(namespace, name, mloc)
        loaded = catalog.load_table(namespace, name)
        info.update({"folder": folder, "metadata_location": mloc, "prefix": prefix,
                     "format_version": loaded["metadata"]["format-version"]})
        result[name] = info
    return result
