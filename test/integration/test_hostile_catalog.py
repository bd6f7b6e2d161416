"""
test_hostile_catalog.py -- the attacks and faults of an adversarial review
of tms, replayed against the fixed code: each test does what the review did
and asserts the safe behaviour, and says in its docstring what the code
before the fix did (these tests fail on it).

  symlinks        a symlink inside a table's directory never leads a purge
                  outside the allowed root
  root tables     a table whose location is an allowed root is refused
  local reads     paths outside the allowed roots are never read, with one
                  message whether they exist or not
  endpoints       a vended s3.endpoint never receives the mapping's keys
  names           ".", ".." and empty levels are refused before any request
  memory          huge, compressed and object-heavy responses fail cleanly
                  within bounded memory
  timestamps      out-of-range snapshot timestamps are malformed metadata
  406, config     a refusing catalog; credential-shaped config hidden
  purge safety    purge_table and the job's drop refuse a table the walk
                  could not do (metadata-location file:///etc/passwd or
                  outside the roots, a table directory that is a symlink,
                  gc.enabled=false) before anything is dropped; the files
                  of a nested table tms knows are kept unless
                  delete_other_tables_files

The review's transaction faults (a rolled-back purge_table, a drop whose
answer comes too late, a drop that failed, run_task through psql) are in
test_purge_async.py, next to the other purge tests.

The module runs its own cluster (short heartbeat and retry times) whose
database also holds the test catalog's pointer tables.  Every server a test
starts listens on 127.0.0.1; every wait is an awaited condition.

Run: /usr/bin/python3 -m pytest -q test/integration/test_hostile_catalog.py
"""

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid

import psycopg2
import psycopg2.errorcodes
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "catalog"))

import avro_codec  # noqa: E402
import world  # noqa: E402
from pgcluster import FAST_WORKERS, error_text, wait_for  # noqa: E402

SYNTH = os.path.join(world.FIXTURES_DIR, "synth.py")
SETTINGS = dict(FAST_WORKERS, **{"tms.purge_max_attempts": "3"})
PG_UID = pwd.getpwnam("postgres").pw_uid
MB = 1024 * 1024


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    return tms_world("hostile", settings=SETTINGS, catalog={})


def give_to_server(path):
    """Files the tests write belong to root; the server reads and deletes them."""
    for d, dirs, files in os.walk(path):
        os.chown(d, PG_UID, -1)
        os.chmod(d, 0o755)
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                os.chown(p, PG_UID, -1)
                os.chmod(p, 0o644)


def synth(*args):
    r = subprocess.run([world.PYTHON, SYNTH, "--list-files"] + list(args),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def local(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


def quote(v):
    return "'" + v.replace("'", "''") + "'"


def connect(env):
    return env["pg"].connect()


def q(env, sql, args=None, conn=None):
    return env["pg"].query(sql, args, conn=conn)


def error(env, sql, args=None, conn=None):
    return env["pg"].query_error(sql, args, conn=conn)


def make_server(env, mapping="", **options):
    """CREATE SERVER (a fresh name) on the test catalog with a PUBLIC user
    mapping; options are the server's (request_timeout 5 s, no retries
    unless given)."""
    name = "h_%s" % uuid.uuid4().hex[:10]
    opts = {"uri": env["catalog"].uri, "retries": "0", "request_timeout": "5s",
            "connect_timeout": "2s"}
    opts.update({k: v for k, v in options.items() if v is not None})
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (%s)" % (
        name, ", ".join("%s %s" % (k, quote(v)) for k, v in opts.items())))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s %s" % (
        name, "OPTIONS (%s)" % mapping if mapping else ""))
    return name


def register(env, ns, metadata_location, name=None):
    name = name or "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register(ns, name, metadata_location)
    return name


def table_uri(env, ns, name):
    return "/v1/%s/namespaces/%s/tables/%s" % (env["catalog"].prefix, ns, name)


def job_rows(env, name):
    return q(env, "SELECT id FROM tms.iceberg_cleanup_job WHERE table_name = %s", (name,))


def wait_job(env, job, states=("SUCCEEDED",), timeout=60):
    def row():
        return q(env, "SELECT state, attempts, last_error, files_deleted, files_skipped,"
                 " skipped_example FROM tms.purge_jobs WHERE id = %s", (job,))[0]
    wait_for(lambda: row()[0] in states, timeout=timeout,
             what="job %s to reach %s (now %r)" % (job, states, row()))
    return row()


# -- editing what synth.py wrote ---------------------------------------------

def read_avro(path):
    with open(path, "rb") as f:
        schema, meta, records = avro_codec.read_container(f.read())
    return meta, records


def write_avro(path, meta, records):
    """Write records back with the file's own schema text, codec and keys."""
    schema_text = meta["avro.schema"].decode()
    codec = meta.get("avro.codec", b"null").decode()
    rest = {k: v for k, v in meta.items() if not k.startswith("avro.")}
    data = avro_codec.write_container(schema_text, records, codec, rest)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def current_manifest_list(metadata_location):
    with open(local(metadata_location)) as f:
        meta = json.load(f)
    cur = meta["current-snapshot-id"]
    return next(s["manifest-list"] for s in meta["snapshots"] if s["snapshot-id"] == cur)


def rewrite_data_paths(metadata_location, new_paths):
    """Point the first len(new_paths) data entries of the current
    snapshot's manifests at new_paths (the metadata then reaches them);
    returns the paths they had before."""
    mlist = local(current_manifest_list(metadata_location))
    lmeta, manifests = read_avro(mlist)
    old, todo = [], list(new_paths)
    for m in manifests:
        path = local(m["manifest_path"])
        mmeta, entries = read_avro(path)
        for e in entries:
            if todo:
                old.append(e["data_file"]["file_path"])
                e["data_file"]["file_path"] = todo.pop(0)
        m["manifest_length"] = write_avro(path, mmeta, entries)
    assert not todo, "not enough data entries to rewrite"
    write_avro(mlist, lmeta, manifests)
    return old


def rewrite_manifest_paths(metadata_location, new_path):
    """Point every manifest of the current snapshot's list at new_path."""
    mlist = local(current_manifest_list(metadata_location))
    lmeta, manifests = read_avro(mlist)
    for m in manifests:
        m["manifest_path"] = new_path
    write_avro(mlist, lmeta, manifests)


def edited_metadata(env, metadata_location, edit):
    """A copy of a metadata file, changed by edit(meta), next to it; its
    file:// location."""
    with open(local(metadata_location)) as f:
        meta = json.load(f)
    edit(meta)
    path = os.path.join(os.path.dirname(local(metadata_location)),
                        "99999-%s.metadata.json" % uuid.uuid4())
    with open(path, "w") as f:
        json.dump(meta, f)
    give_to_server(os.path.dirname(path))
    return "file://" + path


# ---------------------------------------------------------------------------
# 1. a symlink in a table's directory
# ---------------------------------------------------------------------------

def test_purge_never_follows_a_symlink_out_of_the_root(env):
    """The review put a symlink .../paths/link -> /elsewhere into a table
    below the allowed root and a manifest entry .../paths/link/v5: the old
    purge checked the path string only (it lies below the table and the
    root) and unlink()ed it, deleting /elsewhere/v5 through the link.  Now
    the io layer walks below the root with O_NOFOLLOW: the file is skipped
    and counted, everything else of the table goes.  A link as the last
    component (data/lastlink -> /elsewhere/v6) is removed itself; its target
    stays."""
    fr = env["file_root"]
    loc = os.path.join(fr, "wh", "sym_%s" % uuid.uuid4().hex[:8])
    out = synth("--out", loc, "--data-files", "4", "--single-metadata")
    elsewhere = tempfile.mkdtemp(prefix="tms-elsewhere-", dir=env["root"])
    for n in ("v5", "v6"):
        with open(os.path.join(elsewhere, n), "w") as f:
            f.write("not the table's")
    give_to_server(elsewhere)               # the server could delete them
    os.makedirs(os.path.join(loc, "paths"))
    os.symlink(elsewhere, os.path.join(loc, "paths", "link"))
    os.symlink(os.path.join(elsewhere, "v6"), os.path.join(loc, "data", "lastlink"))
    through = "file://%s/paths/link/v5" % loc
    last = "file://%s/data/lastlink" % loc
    replaced = rewrite_data_paths(out["metadata_location"], [through, last])
    give_to_server(loc)
    name = register(env, "sym", out["metadata_location"])
    srv = make_server(env, allowed_locations="file://%s/wh/" % fr)

    job = q(env, "SELECT tms.purge_table(%s, 'sym', %s)", (srv, name))[0][0]
    state, attempts, last_error, deleted, skipped, example = wait_job(env, job)

    assert os.path.exists(os.path.join(elsewhere, "v5")), "deleted through the symlink"
    assert os.path.exists(os.path.join(elsewhere, "v6")), "deleted the target of a link"
    assert not os.path.lexists(os.path.join(loc, "data", "lastlink"))
    assert skipped >= 1 and "paths/link/v5" in example and "symbolic link" in example, example
    # the rest of the table is gone (the two replaced data files were never
    # referenced any more, so they stay)
    left = [f for f in out["files"] if os.path.exists(local(f)) and f not in replaced]
    assert left == [], left


# ---------------------------------------------------------------------------
# 2. a table at an allowed root
# ---------------------------------------------------------------------------

def test_table_at_an_allowed_root_is_refused(env):
    """A table whose location IS the allowed root has every neighbour's
    files below its location: the review made its manifest reference a file
    of table B under the same root, and the old purge_table accepted the
    table and deleted B's file.  Now purge_table refuses it (42501, no job,
    no drop) and B is untouched; B itself, strictly below the root, is
    purged normally."""
    fr = env["file_root"]
    root = os.path.join(fr, "root_%s" % uuid.uuid4().hex[:8])
    out_b = synth("--out", os.path.join(root, "b"), "--data-files", "3", "--single-metadata")
    out_a = synth("--out", root, "--data-files", "3", "--single-metadata")
    b_data = [f for f in out_b["files"] if f.endswith("-data-placeholder.parquet")][0]
    rewrite_data_paths(out_a["metadata_location"], [b_data])
    give_to_server(root)
    a = register(env, "roots", out_a["metadata_location"])
    b = register(env, "roots", out_b["metadata_location"])
    srv = make_server(env, allowed_locations="file://%s/" % root)

    env["catalog"].reset_requests()
    e = error(env, "SELECT tms.purge_table(%s, 'roots', %s)", (srv, a))
    assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
    assert "strictly below" in e.diag.message_detail
    assert job_rows(env, a) == []
    assert [r["method"] for r in env["catalog"].requests(r"/tables/")["requests"]] == ["GET"]
    assert env["catalog"].raw("GET", table_uri(env, "roots", a))[0] == 200
    assert all(os.path.exists(local(f)) for f in out_b["files"])

    job = q(env, "SELECT tms.purge_table(%s, 'roots', %s)", (srv, b))[0][0]
    row = wait_job(env, job)
    assert row[4] == 0, row
    assert not [f for f in out_b["files"] if os.path.exists(local(f))]
    # A's own files are all still there
    a_own = [f for f in out_a["files"] if not f.startswith("file://%s/b/" % root)]
    assert all(os.path.exists(local(f)) for f in a_own)


# ---------------------------------------------------------------------------
# 3. reading outside the allowed roots
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def outside(env):
    """Paths outside every root: an existing system file, a file of ours
    that the server could read (with a recognisable content), a path that
    does not exist."""
    d = tempfile.mkdtemp(prefix="tms-outside-", dir="/tmp")
    os.chmod(d, 0o755)
    secret = os.path.join(d, "secret.avro")
    token = "TOPSECRET-%s" % uuid.uuid4().hex
    with open(secret, "w") as f:
        f.write("Obj\x01" + token * 10)
    os.chmod(secret, 0o644)
    missing = "/nonexistent-%s/hostname" % uuid.uuid4().hex[:8]
    yield dict(paths=["/etc/hostname", secret, missing], token=token)
    shutil.rmtree(d, ignore_errors=True)


def normalised(e, path):
    return (e.pgcode, (e.diag.message_primary or "").replace(path, "<P>"),
            (e.diag.message_detail or "").replace(path, "<P>"))


def assert_one_answer(errors, paths, token):
    """Every error is 42501, names no content, and reads the same once the
    path is taken out: no existence oracle."""
    shapes = set()
    for e, p in zip(errors, paths):
        assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
        assert token not in error_text(e)
        shapes.add(normalised(e, p))
    assert len(shapes) == 1, shapes
    return shapes.pop()


def test_manifest_list_outside_the_roots_is_never_read(env, outside):
    """The catalog names a manifest list at a server path outside the
    allowed roots.  The old code opened any local path the server's OS user
    could read: /etc/hostname and our readable file were read and handed to
    the Avro reader (failing as malformed Avro, 22000), while a missing path
    failed as not found -- an oracle for which files exist.  Now every one
    is 42501 with the same message, and no byte of a file is shown."""
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "ml_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "2", "--single-metadata")
    give_to_server(fr)
    srv = make_server(env, allowed_locations="file://%s/" % fr)
    metrics, files = [], []
    for p in outside["paths"]:
        def edit(meta, p=p):
            for s in meta["snapshots"]:
                s["manifest-list"] = p
        name = register(env, "outside", edited_metadata(env, out["metadata_location"], edit))
        metrics.append(error(env, "SELECT tms.table_metrics(%s, 'outside', %s)", (srv, name)))
        files.append(error(env, "SELECT * FROM tms.table_files(%s, 'outside', %s)",
                           (srv, name)))
    for errors in (metrics, files):
        shape = assert_one_answer(errors, outside["paths"], outside["token"])
        assert shape[2] == 'path "<P>" is outside the allowed locations', shape


def test_manifest_outside_the_roots_is_never_read(env, outside):
    """The same for a manifest named by a (readable, allowed) manifest list."""
    fr = env["file_root"]
    metrics, files = [], []
    srv = make_server(env, allowed_locations="file://%s/" % fr)
    for p in outside["paths"]:
        out = synth("--out", os.path.join(fr, "wh", "mf_%s" % uuid.uuid4().hex[:8]),
                    "--data-files", "2", "--single-metadata")
        rewrite_manifest_paths(out["metadata_location"], p)
        give_to_server(fr)
        name = register(env, "outside", out["metadata_location"])
        files.append(error(env, "SELECT * FROM tms.table_files(%s, 'outside', %s)",
                           (srv, name)))
        metrics.append(error(env, "SELECT tms.table_metrics(%s, 'outside', %s)", (srv, name)))
    for errors in (metrics, files):
        shape = assert_one_answer(errors, outside["paths"], outside["token"])
        assert shape[2] == 'path "<P>" is outside the allowed locations', shape


@pytest.mark.parametrize("allowed", [None, "s3://warehouse/"])
def test_no_local_root_reads_no_local_file(env, allowed):
    """A server without a local allowed location reads no local file, not
    even one of a table the catalog serves below the warehouse (the old code
    read every path the server's OS user could)."""
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "nl_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "2", "--single-metadata")
    give_to_server(fr)
    name = register(env, "nolocal", out["metadata_location"])
    srv = make_server(env, allowed_locations=allowed)
    for sql in ("SELECT tms.table_metrics(%s, 'nolocal', %s)",
                "SELECT * FROM tms.table_files(%s, 'nolocal', %s)"):
        e = error(env, sql, (srv, name))
        assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
        assert "is outside the allowed locations" in e.diag.message_detail
    # the metadata itself comes from the catalog: that still works
    assert q(env, "SELECT tms.table_metrics(%s, 'nolocal', %s, 'metadata')",
             (srv, name))[0][0]["snapshots"] == 1
    # and with the root allowed, the same table reads
    ok = make_server(env, allowed_locations="file://%s/" % fr)
    assert q(env, "SELECT tms.table_metrics(%s, 'nolocal', %s)", (ok, name))[0][0]["dataFiles"] == 2


# ---------------------------------------------------------------------------
# 4. endpoints the catalog chooses
# ---------------------------------------------------------------------------

class Listener:
    """A TCP listener on 127.0.0.1 that records every connection (in
    accept order) and the request head it receives, and answers 403 with an
    S3 error."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.conns = []                 # [{"peer": port, "head": bytes}]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                s, peer = self.sock.accept()
            except OSError:
                return
            rec = {"peer": peer[1], "head": b""}
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(s, rec), daemon=True).start()

    def _serve(self, s, rec):
        s.settimeout(5)
        try:
            while b"\r\n\r\n" not in rec["head"] and len(rec["head"]) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                rec["head"] += chunk
            body = b"<Error><Code>AccessDenied</Code><Message>listener</Message></Error>"
            s.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
                      b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass
        finally:
            s.close()

    def connections(self):
        """Every connection made before now, the test's own sentinel
        excluded: connects to it and awaits its acceptance, which comes
        after every earlier connection's (one accepting thread, FIFO)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as c:
            mine = c.getsockname()[1]
            wait_for(lambda: any(r["peer"] == mine for r in self.conns), timeout=10,
                     what="the listener to accept the sentinel")
        with self.lock:
            upto = next(i for i, r in enumerate(self.conns) if r["peer"] == mine)
            seen = self.conns[:upto]
            del self.conns[:upto + 1]
        return seen

    def stop(self):
        self.stopped = True
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.stop()


@pytest.fixture(scope="module")
def s3_table(env):
    s3 = env["s3"]
    out = synth("--out", "s3://warehouse/hostile/%s" % uuid.uuid4().hex[:8],
                "--data-files", "3", "--single-metadata", "--s3-endpoint", s3.endpoint)
    name = register(env, "s3ns", out["metadata_location"])
    yield name
    env["catalog"].clear_table_configs()


def s3_server(env, vended_endpoint):
    return make_server(env, mapping="s3_access_key_id 'S3RVER', s3_secret_access_key 'S3RVER'",
                       s3_endpoint=env["s3"].endpoint, s3_vended_endpoint=vended_endpoint)


@pytest.mark.parametrize("vended_endpoint", [None, "false", "true"])
def test_vended_endpoint_without_vended_keys_is_ignored(env, listener, s3_table,
                                                         vended_endpoint):
    """The catalog vends s3.endpoint (our listener) but no credentials: the
    old code sent the requests, signed with the user mapping's keys, to the
    endpoint the catalog chose.  Now the mapping's keys go to the server's
    s3_endpoint only (whatever s3_vended_endpoint says), and the read
    works there."""
    env["catalog"].set_table_config("s3ns", s3_table, {
        "s3.endpoint": listener.url, "s3.path-style-access": "true"})
    srv = s3_server(env, vended_endpoint)
    m = q(env, "SELECT tms.table_metrics(%s, 's3ns', %s)", (srv, s3_table))[0][0]
    assert m["dataFiles"] == 3
    assert listener.connections() == []


def test_vended_endpoint_with_vended_keys_needs_the_server_option(env, listener, s3_table):
    """Vended credentials and a vended endpoint, s3_vended_endpoint off: the
    old code went to the vended endpoint.  Now the server's endpoint is
    used (with the vended keys)."""
    env["catalog"].set_table_config("s3ns", s3_table, {
        "s3.endpoint": listener.url, "s3.access-key-id": "S3RVER",
        "s3.secret-access-key": "S3RVER", "s3.path-style-access": "true"})
    srv = s3_server(env, "false")
    m = q(env, "SELECT tms.table_metrics(%s, 's3ns', %s)", (srv, s3_table))[0][0]
    assert m["dataFiles"] == 3
    assert listener.connections() == []


def test_vended_endpoint_used_with_vended_keys_only(env, listener, s3_table):
    """s3_vended_endpoint 'true' and vended credentials: the vended endpoint
    is used, and what reaches it is signed with the vended key id, never
    the user mapping's."""
    env["catalog"].set_table_config("s3ns", s3_table, {
        "s3.endpoint": listener.url, "s3.access-key-id": "VENDEDKEYID",
        "s3.secret-access-key": "vended-secret", "s3.path-style-access": "true"})
    srv = s3_server(env, "true")
    e = error(env, "SELECT tms.table_metrics(%s, 's3ns', %s)", (srv, s3_table))
    assert "S3RVER" not in error_text(e) and "vended-secret" not in error_text(e)
    seen = listener.connections()
    assert seen, "the vended endpoint was not used"
    heads = [r["head"].decode("latin-1") for r in seen]
    auth = [line for h in heads for line in h.split("\r\n")
            if line.lower().startswith("authorization:")]
    assert auth and all("Credential=VENDEDKEYID/" in a for a in auth), heads
    assert not any("S3RVER" in h for h in heads), heads


# ---------------------------------------------------------------------------
# 5. "." and ".." as names
# ---------------------------------------------------------------------------

BAD_NAMES = [
    ("ns", "."), ("ns", ".."), ("ns", ""), (".", "t"), ("..", "t"), ("", "t"),
    ("a..b", "t"), ("a.", "t"), (".a", "t"), ("a.b.", "t"), ("a...b", "t"),
]


NAMED_CALLS = [
    "SELECT tms.drop_table(%s, %s, %s)",
    "SELECT tms.drop_table(%s, %s, %s, purge => true)",
    "SELECT tms.purge_table(%s, %s, %s)",
    "SELECT tms.table_metadata(%s, %s, %s)",
    "SELECT * FROM tms.table_snapshots(%s, %s, %s)",
    "SELECT * FROM tms.table_files(%s, %s, %s)",
    "SELECT tms.table_metrics(%s, %s, %s)",
]


def test_dot_names_fail_before_any_request(env):
    """tms.drop_table('srv', 'ns', '..') used to send DELETE
    /v1/{p}/namespaces/ns/tables/.., which libcurl normalised to DELETE
    /v1/{p}/namespaces/ns/ -- a drop of the namespace; empty levels named
    other objects too.  Now every such name is 22023 and the catalog gets
    no request at all, not even the /v1/config handshake of a new
    session's connection (the table functions used to connect first)."""
    srv = make_server(env, allowed_locations="file://%s/" % env["file_root"])
    env["catalog"].reset_requests()
    for ns, t in BAD_NAMES:
        for sql in NAMED_CALLS:
            # a new session each time: no cached catalog connection
            e = error(env, sql, (srv, ns, t))
            assert e.pgcode == psycopg2.errorcodes.INVALID_PARAMETER_VALUE, (sql, ns, t, e)
    for ns in (".", "..", "a..b", ""):
        e = error(env, "SELECT * FROM tms.list_tables(%s, %s)", (srv, ns))
        assert e.pgcode == psycopg2.errorcodes.INVALID_PARAMETER_VALUE, (ns, e)
    assert env["catalog"].requests()["total"] == 0, env["catalog"].requests()


def test_megabyte_name_is_name_too_long(env):
    srv = make_server(env, allowed_locations="file://%s/" % env["file_root"])
    env["catalog"].reset_requests()
    big = "x" * MB
    for ns, t in ((big, "t"), ("ns", big), ("ns." + big, "t")):
        for sql in NAMED_CALLS:
            e = error(env, sql, (srv, ns, t))
            assert e.pgcode == psycopg2.errorcodes.NAME_TOO_LONG, e
            assert len(error_text(e)) < 1000        # the name is not echoed
    assert env["catalog"].requests()["total"] == 0


# ---------------------------------------------------------------------------
# 6. memory amplification
# ---------------------------------------------------------------------------

def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


@pytest.fixture(scope="module")
def small_table(env):
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "mem_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "2", "--single-metadata")
    give_to_server(fr)
    name = register(env, "mem", out["metadata_location"])
    # these tests bound memory, not time: the Python catalog can take more
    # than the usual 5 s to send 100 MB on a loaded machine
    srv = make_server(env, allowed_locations="file://%s/" % fr, request_timeout="120s")
    return srv, name


HUGE_STRING = {"head": '{"metadata-location": "s3://b/m.json", "metadata": {}, '
                       '"config": {"filler": "',
               "unit": "a" * 1024, "count": 100 * 1024, "tail": '"}}'}   # 100 MB
# ~40 MB of small objects; the filler comes first and is ignored by a reader
SMALL_OBJECTS = {"head": '{"filler": [', "unit": '{"a":1},', "count": 5 * MB,
                 "tail": '{}], "metadata-location": "s3://b/m.json", "metadata": {}}'}


def hostile_load(env, small_table, body_repeat, encoding=None):
    """Load the table through a catalog that answers with body_repeat: the
    error and the backend's peak RSS growth (kB)."""
    srv, name = small_table
    conn = connect(env)
    try:
        pid = q(env, "SELECT pg_backend_pid()", conn=conn)[0][0]
        q(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)   # warm up
        before = vm_hwm_kb(pid)
        env["catalog"].fault(r"/namespaces/mem/tables/%s$" % name, status=200, method="GET",
                             body_repeat=body_repeat, encoding=encoding)
        e = error(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)
        grew = vm_hwm_kb(pid) - before
        # the backend is fine afterwards
        assert q(env, "SELECT tms.table_metadata(%s, 'mem', %s) ->> 'format-version'",
                 (srv, name), conn) == [("2",)]
        return e, grew
    finally:
        conn.close()


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_huge_response_fails_within_bounded_memory(env, small_table, encoding):
    """A 100 MB loadTable answer, plain or gzip (100 KB on the wire): the
    old client kept the whole decompressed body and parsed it (the review
    measured hundreds of MB of backend RSS), then failed on the metadata,
    not on a limit.  Now the body stops at tms.max_response_size (64 MB,
    counted after decompression): 54000 naming the limit, and the peak RSS
    grows by about that much."""
    e, grew = hostile_load(env, small_table, HUGE_STRING, encoding)
    print("100 MB response%s: peak RSS +%d MB" % (" (gzip)" if encoding else "", grew // 1024))
    assert e.pgcode == psycopg2.errorcodes.PROGRAM_LIMIT_EXCEEDED, error_text(e)
    assert "max_response_bytes (%d bytes" % (64 * MB) in e.diag.message_primary
    assert "tms.max_response_size" in e.diag.message_hint
    assert grew < 200 * 1024, grew


def test_object_heavy_response_fails_within_bounded_memory(env, small_table):
    """~40 MB of small JSON objects (under the response limit): the old
    client let jansson build a node for every object (the review measured
    ~700 MB of RSS).  Now the parse stops once it needs more than
    tms.max_json_memory (256 MB): 54000 naming the limit, and the growth is
    bounded by the body's buffer plus that budget (the default budget
    itself allows ~256 MB, so the bound is that, not less)."""
    e, grew = hostile_load(env, small_table, SMALL_OBJECTS)
    print("40 MB of small objects: peak RSS +%d MB" % (grew // 1024))
    assert e.pgcode == psycopg2.errorcodes.PROGRAM_LIMIT_EXCEEDED, error_text(e)
    assert "max_json_bytes (%d bytes)" % (256 * MB) in e.diag.message_primary
    assert "tms.max_json_memory" in e.diag.message_hint
    # the 40 MB body (in a buffer of up to 64 MB) + the 256 MB budget
    assert grew < (64 + 256 + 32) * 1024, grew


def test_lower_json_budget_lowers_the_peak(env, small_table):
    """The bound is the setting: with tms.max_json_memory = 32MB the same
    answer stops far earlier."""
    srv, name = small_table
    conn = connect(env)
    try:
        q(env, "SET tms.max_json_memory = '32MB'", conn=conn)
        pid = q(env, "SELECT pg_backend_pid()", conn=conn)[0][0]
        q(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)
        before = vm_hwm_kb(pid)
        env["catalog"].fault(r"/namespaces/mem/tables/%s$" % name, status=200, method="GET",
                             body_repeat=SMALL_OBJECTS)
        e = error(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)
        grew = vm_hwm_kb(pid) - before
    finally:
        conn.close()
    print("40 MB of small objects, 32 MB budget: peak RSS +%d MB" % (grew // 1024))
    assert e.pgcode == psycopg2.errorcodes.PROGRAM_LIMIT_EXCEEDED
    assert "max_json_bytes (%d bytes)" % (32 * MB) in e.diag.message_primary
    assert grew < (64 + 32 + 32) * 1024, grew


def test_raising_max_json_memory_lets_a_large_document_through(env, small_table):
    """A document that needs more than the default budget fails; a
    superuser raises tms.max_json_memory in the session and the same load
    goes through (also on the session's cached catalog connection).  Other
    roles may not raise it."""
    srv, name = small_table
    cat = env["catalog"]
    # the real answer with ~1 M small objects before it (8 MB, which needs
    # about 300 MB to parse)
    status, real, _ = cat.raw("GET", table_uri(env, "mem", name))
    assert status == 200
    doc = json.dumps(real)
    big = {"head": '{"filler": [', "unit": '{"a":1},', "count": MB, "tail": '{}], ' + doc[1:]}
    conn = connect(env)
    try:
        cat.fault(r"/namespaces/mem/tables/%s$" % name, status=200, method="GET",
                  body_repeat=big)
        e = error(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)
        assert e.pgcode == psycopg2.errorcodes.PROGRAM_LIMIT_EXCEEDED, error_text(e)
        assert "(%d bytes)" % (256 * MB) in e.diag.message_primary
        # the session's catalog connection is cached now: the setting must
        # still reach it
        q(env, "SET tms.max_json_memory = '1GB'", conn=conn)
        cat.fault(r"/namespaces/mem/tables/%s$" % name, status=200, method="GET",
                  body_repeat=big)
        md = q(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name), conn)[0][0]
        assert md["table-uuid"] == real["metadata"]["table-uuid"]
    finally:
        conn.close()
    q(env, "DROP ROLE IF EXISTS h_plain; CREATE ROLE h_plain")
    conn = connect(env)
    try:
        q(env, "SET ROLE h_plain", conn=conn)
        e = error(env, "SET tms.max_json_memory = '1GB'", conn=conn)
        assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# 7. extreme values
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("ts", [2 ** 63 - 1, 2 ** 63 - 1000, -2 ** 63, -1])
def test_extreme_snapshot_timestamp_is_malformed(env, small_table, ts):
    """A snapshot timestamp-ms near INT64_MAX / INT64_MIN: the old code
    computed now - ts, which overflowed into a huge negative (or positive)
    oldestSnapshotAge.  Now the metadata is malformed: 22000 naming the
    field."""
    srv, _ = small_table
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "ts_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "1", "--single-metadata")

    def edit(meta):
        meta["snapshots"][0]["timestamp-ms"] = ts
    name = register(env, "ts", edited_metadata(env, out["metadata_location"], edit))
    give_to_server(fr)
    e = error(env, "SELECT tms.table_metrics(%s, 'ts', %s)", (srv, name))
    assert e.pgcode == psycopg2.errorcodes.DATA_EXCEPTION, error_text(e)
    assert '"timestamp-ms"' in e.diag.message_primary and str(ts) in e.diag.message_primary


def test_future_timestamps_give_no_negative_age(env, small_table):
    """The largest timestamp allowed (9999-12-31) is in the future: ages are
    0, never negative."""
    srv, _ = small_table
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "tf_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "1", "--single-metadata")
    far = 253402300799999

    def edit(meta):
        meta["snapshots"][0]["timestamp-ms"] = far
        meta["last-updated-ms"] = far
    name = register(env, "ts", edited_metadata(env, out["metadata_location"], edit))
    give_to_server(fr)
    m = q(env, "SELECT tms.table_metrics(%s, 'ts', %s)", (srv, name))[0][0]
    assert m["oldestSnapshotAge"] == 0 and m["timeSinceLastUpdate"] == 0, m


# ---------------------------------------------------------------------------
# 9. a catalog refusing an operation; config that looks like a credential
# ---------------------------------------------------------------------------

def test_406_is_an_fdw_error_saying_the_catalog_refused(env, small_table):
    """The catalog answers loadTable with 406 (the spec's Unsupported
    Operation).  The old mapping was 0A000 feature_not_supported, which
    reads as a limit of tms.  Now HV000 with a message saying the catalog
    refused."""
    srv, name = small_table
    env["catalog"].fault(r"/namespaces/mem/tables/%s$" % name, status=406, method="GET")
    e = error(env, "SELECT tms.table_metadata(%s, 'mem', %s)", (srv, name))
    assert e.pgcode == psycopg2.errorcodes.FDW_ERROR, error_text(e)
    assert "catalog refused" in e.diag.message_primary and "406" in e.diag.message_primary


def test_catalog_config_hides_credentials(env):
    """/v1/config properties whose key looks like a credential, or whose
    value holds one, are left out of tms.catalog_config; a URL's login is
    shown as "***@"; others are shown as they are."""
    cat = env["catalog"]
    cat.set_config(defaults={"s3.secret-access-key": "SEKRIT-default",
                             "harmless.default": "visible-1"},
                   overrides={"token": "SEKRIT-token",
                              "spark.conf": "spark.hadoop.fs.s3a.secret.key=SEKRIT-value",
                              "client.password": "SEKRIT-pw",
                              "harmless.override": "visible-2",
                              # the shapes of Azure, GCS and a login in a URL
                              "fs.azure.account.key.acct.dfs.core.windows.net": "SEKRIT-az",
                              "adls.sas-token.acct": "SEKRIT-sas",
                              "gcs.oauth2.token": "SEKRIT-gcs",
                              "fs.gs.auth.service.account.private.key.id": "SEKRIT-gs",
                              "sas.url": "https://a.blob.core.windows.net/c?sv=1&sig=SEKRIT-sig",
                              "uri": "https://tms:SEKRIT-login@catalog.example:8443/v1",
                              "warehouse.location": "abfss://container@acct.dfs.core.windows.net/w"})
    try:
        srv = make_server(env)
        rows = dict(q(env, "SELECT key, value FROM tms.catalog_config(%s)", (srv,)))
    finally:
        cat.clear_config()
    assert rows["harmless.default"] == "visible-1"
    assert rows["harmless.override"] == "visible-2"
    assert rows["(prefix)"] == cat.prefix
    # a login in a URL is redacted, the URL shown; a container is no login
    assert rows["uri"] == "https://***@catalog.example:8443/v1"
    assert rows["warehouse.location"] == "abfss://container@acct.dfs.core.windows.net/w"
    for k in ("s3.secret-access-key", "token", "spark.conf", "client.password",
              "fs.azure.account.key.acct.dfs.core.windows.net", "adls.sas-token.acct",
              "gcs.oauth2.token", "fs.gs.auth.service.account.private.key.id", "sas.url"):
        assert k not in rows, rows
    assert not any("SEKRIT" in v for v in rows.values()), rows


# ---------------------------------------------------------------------------
# 8. a purge drops only what it can walk, and keeps other tables' files
# ---------------------------------------------------------------------------

def hostile_answer(env, ns, name, metadata_location):
    """The catalog's own loadTable answer with another metadata-location."""
    body = env["catalog"].load_table(ns, name)
    body["metadata-location"] = metadata_location
    return json.dumps(body)


def table_methods(env, ns, name):
    return [r["method"] for r in
            env["catalog"].requests(r"/namespaces/%s/tables/%s$" % (ns, name))["requests"]]


def assert_not_dropped(env, ns, name, files):
    assert "DELETE" not in table_methods(env, ns, name)
    assert env["catalog"].raw("GET", table_uri(env, ns, name))[0] == 200
    assert all(os.path.exists(local(f)) for f in files)


def plain_table(env, ns, *args):
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "%s_%s" % (ns, uuid.uuid4().hex[:8])),
                "--data-files", "2", "--single-metadata", *args)
    give_to_server(fr)
    return out, register(env, ns, out["metadata_location"])


def test_purge_refuses_a_metadata_location_outside_the_roots(env):
    """A catalog answers the load with "metadata-location":
    "file:///etc/passwd" (uuid and location those of the real table): the
    old purge_table recorded the job, the job dropped the table from the
    catalog, then failed to read /etc/passwd on every attempt, and the
    table's files stayed for good.  Now purge_table refuses it (42501,
    naming the location): no job, no DELETE, the table and its files
    untouched."""
    out, name = plain_table(env, "etc")
    srv = make_server(env, allowed_locations="file://%s/wh/" % env["file_root"])
    cat = env["catalog"]
    cat.fault(r"/namespaces/etc/tables/%s$" % name, status=200, method="GET", count=100,
              body=hostile_answer(env, "etc", name, "file:///etc/passwd"))
    cat.reset_requests()
    try:
        e = error(env, "SELECT tms.purge_table(%s, 'etc', %s)", (srv, name))
    finally:
        cat.clear_faults()
    assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
    assert "metadata file is not below the allowed_locations" in e.diag.message_primary
    assert "file:///etc/passwd" in e.diag.message_detail
    assert job_rows(env, name) == []
    assert_not_dropped(env, "etc", name, out["files"])


def test_purge_job_checks_again_before_its_drop(env):
    """The same answer arriving only after tms.purge_table (the catalog
    changed between the call and the job's drop): the old job dropped the
    table, then failed its attempts.  Now the job refuses before the drop:
    FAILED at once (the failure is terminal), saying it was not dropped; no
    DELETE reached the catalog and every file is there."""
    out, name = plain_table(env, "etc")
    srv = make_server(env, allowed_locations="file://%s/wh/" % env["file_root"])
    cat = env["catalog"]
    hostile = hostile_answer(env, "etc", name, "file:///etc/passwd")
    conn = env["pg"].connect(autocommit=False)
    try:
        job = q(env, "SELECT tms.purge_table(%s, 'etc', %s)", (srv, name), conn=conn)[0][0]
        cat.reset_requests()
        cat.fault(r"/namespaces/etc/tables/%s$" % name, status=200, method="GET", count=1000,
                  body=hostile)
        conn.commit()
        state, attempts, last_error, deleted, skipped, example = wait_job(env, job, ("FAILED",))
    finally:
        conn.close()
        cat.clear_faults()
    assert attempts == 1, (attempts, last_error)
    assert "it was not dropped" in last_error and "allowed_locations" in last_error, last_error
    assert deleted == 0
    assert q(env, "SELECT dropped_at FROM tms.purge_jobs WHERE id = %s", (job,)) == [(None,)]
    assert_not_dropped(env, "etc", name, out["files"])


def test_purge_refuses_a_table_directory_that_is_a_symlink(env):
    """A table whose directory below the allowed root is a symbolic link to
    a directory outside it: the old purge dropped the table, then every
    read went through the link and was refused, so the job failed and the
    table was gone from the catalog with its files left.  Now purge_table
    reads the metadata file the way the walk would (never through a link)
    and refuses: 42501 naming the link, no job, nothing dropped."""
    fr = env["file_root"]
    elsewhere = tempfile.mkdtemp(prefix="tms-elsewhere-", dir=env["root"])
    target = os.path.join(elsewhere, "tbl")
    os.makedirs(target)
    link = os.path.join(fr, "wh", "symdir_%s" % uuid.uuid4().hex[:8])
    os.symlink(target, link)
    out = synth("--out", link, "--data-files", "2", "--single-metadata")
    give_to_server(elsewhere)
    give_to_server(fr)
    name = register(env, "symdir", out["metadata_location"])
    srv = make_server(env, allowed_locations="file://%s/wh/" % fr)
    env["catalog"].reset_requests()
    e = error(env, "SELECT tms.purge_table(%s, 'symdir', %s)", (srv, name))
    assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
    assert "metadata file cannot be read" in e.diag.message_primary
    assert "symbolic link" in e.diag.message_detail, e.diag.message_detail
    assert job_rows(env, name) == []
    assert_not_dropped(env, "symdir", name, out["files"])


def test_purge_refuses_metadata_outside_the_roots_of_a_real_table(env):
    """A legitimate table whose metadata file lies outside the allowed
    locations (another directory, as another bucket would be): the old
    purge dropped it and then could not read its metadata.  Now it is
    refused before anything happens (42501)."""
    fr = env["file_root"]
    out = synth("--out", os.path.join(fr, "wh", "meta_%s" % uuid.uuid4().hex[:8]),
                "--data-files", "2", "--single-metadata")
    other = os.path.join(fr, "other_%s" % uuid.uuid4().hex[:8])
    os.makedirs(other)
    moved = os.path.join(other, os.path.basename(local(out["metadata_location"])))
    shutil.copy(local(out["metadata_location"]), moved)
    give_to_server(fr)
    name = register(env, "metaout", "file://" + moved)
    srv = make_server(env, allowed_locations="file://%s/wh/" % fr)
    env["catalog"].reset_requests()
    e = error(env, "SELECT tms.purge_table(%s, 'metaout', %s)", (srv, name))
    assert e.pgcode == psycopg2.errorcodes.INSUFFICIENT_PRIVILEGE, error_text(e)
    assert moved in e.diag.message_detail
    assert job_rows(env, name) == []
    assert_not_dropped(env, "metaout", name, out["files"] + ["file://" + moved])


def test_purge_refuses_a_table_with_gc_disabled(env):
    """gc.enabled=false: the table's files may be another table's, and
    Iceberg's purge refuses it.  The old purge dropped the table and
    deleted its metadata (keeping data files with nothing pointing at
    them).  Now purge_table refuses (55000, naming the property)."""
    out, name = plain_table(env, "nogc", "--property", "gc.enabled=false")
    srv = make_server(env, allowed_locations="file://%s/wh/" % env["file_root"])
    env["catalog"].reset_requests()
    e = error(env, "SELECT tms.purge_table(%s, 'nogc', %s)", (srv, name))
    assert e.pgcode == psycopg2.errorcodes.OBJECT_NOT_IN_PREREQUISITE_STATE, error_text(e)
    assert "gc.enabled" in e.diag.message_detail
    assert "tms.drop_table" in e.diag.message_hint
    assert job_rows(env, name) == []
    assert_not_dropped(env, "nogc", name, out["files"])


def nested_tables(env, ns):
    """Table A at root/a and table B at root/a/b, one of A's manifest
    entries naming a data file of B; both registered, B known to tms."""
    fr = env["file_root"]
    root = os.path.join(fr, "wh", "nest_%s" % uuid.uuid4().hex[:8], "a")
    out_b = synth("--out", os.path.join(root, "b"), "--data-files", "3", "--single-metadata")
    out_a = synth("--out", root, "--data-files", "3", "--single-metadata")
    b_data = [f for f in out_b["files"] if f.endswith("-data-placeholder.parquet")][0]
    replaced = rewrite_data_paths(out_a["metadata_location"], [b_data])
    give_to_server(fr)
    a = register(env, ns, out_a["metadata_location"])
    b = register(env, ns, out_b["metadata_location"])
    srv = make_server(env, allowed_locations="file://%s/wh/" % fr)
    q(env, "SELECT tms.observe_table(%s, %s, %s, NULL, %s, NULL)",
      (srv, ns, b, out_b["metadata_location"]))
    a_own = [f for f in out_a["files"] if f not in replaced and
             not f.startswith("file://%s/b/" % root)]
    return srv, a, out_a, out_b, b_data, a_own


def kept(env, job):
    return q(env, "SELECT files_kept, kept_example, delete_other_tables_files"
             " FROM tms.purge_jobs WHERE id = %s", (job,))[0]


def test_purge_keeps_the_files_of_a_nested_table_tms_knows(env):
    """Table B lies inside table A's directory and A's manifest names one
    of B's data files: the old purge of A deleted it (it lies below A's
    location and the root).  Now the file is kept, counted in files_kept
    and shown in kept_example; A's own files are deleted and B is whole."""
    srv, a, out_a, out_b, b_data, a_own = nested_tables(env, "nest")
    job = q(env, "SELECT tms.purge_table(%s, 'nest', %s)", (srv, a))[0][0]
    row = wait_job(env, job)
    assert os.path.exists(local(b_data)), "deleted the nested table's file"
    assert all(os.path.exists(local(f)) for f in out_b["files"])
    files_kept, example, delete_others = kept(env, job)
    assert files_kept == 1 and local(b_data) in example and "another table" in example, example
    assert delete_others is False
    assert not [f for f in a_own if os.path.exists(local(f))], row


def test_purge_deletes_other_tables_files_when_asked(env):
    """delete_other_tables_files => true: the file of the nested table that
    A's manifest names is deleted with A's (what the call asked for)."""
    srv, a, out_a, out_b, b_data, a_own = nested_tables(env, "nest2")
    job = q(env, "SELECT tms.purge_table(%s, 'nest2', %s, delete_other_tables_files => true)",
            (srv, a))[0][0]
    wait_job(env, job)
    files_kept, example, delete_others = kept(env, job)
    assert delete_others is True and files_kept == 0 and example is None
    assert not os.path.exists(local(b_data))
    assert not [f for f in a_own if os.path.exists(local(f))]
