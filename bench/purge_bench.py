#!/usr/bin/python3
"""Async purge: deletion throughput, requests per file, worker memory, and
the drop-to-return latency of tms.purge_table().

Usage: bench/purge_bench.py [--files N] [--s3-files N] [--s3-small N]
                            [--latency-calls N] [--latency-only] [--history N,N...]
                            [--no-small-large] [--deadline SECONDS]

One throwaway world on 127.0.0.1 / a Unix socket: a PostgreSQL 15 cluster
with tms (pool of 4 workers), s3rver, a counting HTTP proxy in front of
s3rver, and the test REST catalog (test/catalog/server.py) whose pointers
live in the cluster's database.  The catalog vends the *proxy* as the S3
endpoint, so every request a purge worker sends to S3 is counted there.

Tables are synthetic Iceberg v2 tables (test/fixtures/synth.py, 10
snapshots, 1000 data files per manifest) whose data files are materialised
placeholders of --file-size bytes (declared size = real size), registered
in the catalog and purged with tms.purge_table() one at a time; the worker
pool is switched off while a job is enqueued and on again to run it, so
each job runs alone and its request count holds only its own requests.

Measured per run:
  files/s      files_deleted / (finished_at - started_at) of the job row
               (the run itself, from claim to SUCCEEDED, server clock)
  requests     file://: the job's delete_requests (one unlink per file);
               s3: HTTP requests counted by the proxy while the job ran,
               by kind (GET = reading metadata, manifest lists, manifests;
               POST ?delete = DeleteObjects, with the keys it carried)
  memory       the worker that held the task: VmHWM (peak RSS) from
               /proc/<pid>/status after resetting it (clear_refs 5) just
               before the run, and the peak of RssAnon (private memory)
               sampled every 10 ms during the run, next to its value before

Runs: bulk (tms.purge_delete_batch_size 1000) and one-by-one (batch size 1,
the same code path) on file:// and s3rver, and the physical baseline
without tms: a Python loop of os.unlink() over an identical file set, and
a loop of single DELETE requests on one keep-alive connection through the
same proxy.  Latency: --latency-calls purge_table() calls per table shape
(small, the large table, and a long history per --history snapshot count;
--no-small-large: the long histories only), timed on the client, workers
off so the jobs never run (the cluster is destroyed afterwards); through
the stock catalog and one with TCP_NODELAY, the parts (a load alone, a
drop alone), and the time spent inside the backend (clock_timestamp()
around the call, in the same statement).  --latency-only runs only this
part.

Everything is bounded by --deadline (SIGALRM) and stopped in `finally`.
"""

import argparse
import http.client
import http.server
import json
import os
import pwd
import shutil
import signal
import socketserver
import sys
import tempfile
import threading
import time
import types
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "catalog"))

import world  # noqa: E402
import storage as storage_mod  # noqa: E402
import synth  # noqa: E402
from pgcluster import Cluster, wait_for  # noqa: E402

PG_UID = pwd.getpwnam("postgres").pw_uid
BUCKET = "warehouse"
SERVER = "benchcat"
SERVER_ND = "benchcat_nodelay"
# data files per partition directory: s3rver lists the directory of every
# key it deletes (to remove it once empty), so its deletes cost O(files in
# the directory); identity partitions keep that constant across sizes
FILES_PER_PARTITION = 500

NODELAY_WRAPPER = """# written by bench/purge_bench.py: test/catalog/server.py with TCP_NODELAY
import runpy, socketserver, sys
socketserver.StreamRequestHandler.disable_nagle_algorithm = True
sys.path.insert(0, %r)
sys.argv[0] = %r
runpy.run_path(%r, run_name="__main__")
"""


def nodelay_catalog(root, dsn, warehouse, **kw):
    """The test catalog with Nagle's algorithm off on its sockets.

    Its handler writes the response head and body in two writes; with
    Nagle on, the body waits for the ACK of the head, which a client on
    delayed ACK sends after ~40 ms.  Started through a wrapper that sets
    StreamRequestHandler.disable_nagle_algorithm before running it."""
    d = os.path.join(root, "catalog-nodelay")
    os.makedirs(d)
    real = os.path.join(world.CATALOG_DIR, "server.py")
    with open(os.path.join(d, "server.py"), "w") as f:
        f.write(NODELAY_WRAPPER % (world.CATALOG_DIR, real, real))
    saved = world.CATALOG_DIR
    world.CATALOG_DIR = d
    try:
        return world.CatalogServer(dsn, warehouse, **kw)
    finally:
        world.CATALOG_DIR = saved


def log(msg):
    print("[%7.1f s] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


T0 = time.monotonic()


# ---------------------------------------------------------------------------
# the counting proxy
# ---------------------------------------------------------------------------

class CountingProxy:
    """HTTP/1.1 forwarder on 127.0.0.1 in front of s3rver that counts the
    requests it forwards by kind.  It answers `Expect: 100-continue` itself
    and forwards whole bodies, so libcurl never waits for a 100."""

    def __init__(self, upstream_port):
        proxy = self
        self.lock = threading.Lock()
        self.reset()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("expect", "connection", "keep-alive",
                                             "proxy-connection", "transfer-encoding")}
                for attempt in (1, 2):
                    # s3rver closes idle keep-alive connections after 5 s
                    up = getattr(self, "_up", None)
                    if up is None:
                        up = self._up = http.client.HTTPConnection(
                            "127.0.0.1", upstream_port, timeout=60)
                    try:
                        up.request(self.command, self.path, body=body, headers=hdrs)
                        r = up.getresponse()
                        data = r.read()
                        break
                    except (http.client.RemoteDisconnected, ConnectionError):
                        up.close()
                        self._up = None
                        if attempt == 2:
                            raise
                proxy.count(self.command, self.path, body, r.status)
                head = ["HTTP/1.1 %d %s" % (r.status, r.reason)]
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "keep-alive"):
                        head.append("%s: %s" % (k, v))
                if self.command == "HEAD":
                    head.append("Content-Length: %s" % (r.getheader("Content-Length") or "0"))
                    data = b""
                else:
                    head.append("Content-Length: %d" % len(data))
                # one write: no Nagle / delayed-ACK stall between head and body
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def count(self, method, path, body, status):
        query = urllib.parse.urlsplit(path).query
        kind = method
        keys = 0
        if method == "POST" and "delete" in urllib.parse.parse_qs(query, keep_blank_values=True):
            kind = "POST ?delete"
            keys = body.count(b"<Key>") if body else 0
        if status >= 300:
            kind += " -> %d" % status
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.delete_keys += keys
            if keys:
                self.batches.append(keys)

    def reset(self):
        with self.lock:
            self.counts = {}
            self.delete_keys = 0
            self.batches = []

    def snapshot(self):
        with self.lock:
            return dict(self.counts), self.delete_keys, list(self.batches)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------
# writing tables fast: synth.py with the test world's S3 uploader
# ---------------------------------------------------------------------------

def make_table(location, data_files, file_size, s3=None, snapshots=10, no_data=False,
               single_metadata=False, per_manifest=1000):
    """Write a synthetic table at `out` (an absolute path or s3://); return
    synth's summary (with "files": every file written)."""
    args = ["--out", location, "--data-files", str(data_files), "--snapshots", str(snapshots),
            "--files-per-manifest", str(per_manifest), "--file-size", str(file_size),
            "--list-files"]
    if data_files >= 2 * FILES_PER_PARTITION:
        args += ["--partitions", str(data_files // FILES_PER_PARTITION)]
    if no_data:
        args.append("--no-data-bytes")
    if single_metadata:
        args.append("--single-metadata")
    pool = None
    if s3 is not None:
        args += ["--s3-endpoint", s3.endpoint]
        pool = world.S3Uploader(s3)

    class FastStorage(storage_mod.Storage):
        def write(self, uri, data):
            if pool is not None and storage_mod.is_s3(uri):
                pool.put(*storage_mod.split_s3(uri), data)
            else:
                path = self.local_path(uri)
                try:
                    f = open(path, "wb")
                except FileNotFoundError:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    f = open(path, "wb")
                with f:
                    f.write(data)

    saved = synth.storage_mod
    synth.storage_mod = types.SimpleNamespace(is_s3=storage_mod.is_s3,
                                              S3Config=storage_mod.S3Config,
                                              Storage=FastStorage)
    try:
        out = synth.generate(synth.build_parser().parse_args(args))
    finally:
        synth.storage_mod = saved
        if pool is not None:
            pool.join()
    if s3 is None:
        give_dirs_to_server(location)
    return out


def make_history(location, snapshots):
    """A table of `snapshots` snapshots in one metadata file, for purge_table()
    latency (which reads no manifest): synth writes one snapshot, whose entry
    is then repeated with new ids, each the parent of the next, and a
    snapshot log of as many entries; only the last is referenced (main).
    Writing the manifest lists of a real history of 5,000 snapshots takes
    synth minutes (each list holds every manifest before it)."""
    out = make_table(location, 1, 64, snapshots=1, no_data=True, single_metadata=True,
                     per_manifest=1)
    path = out["metadata_location"][len("file://"):]
    with open(path) as f:
        meta = json.load(f)
    first = meta["snapshots"][0]
    snaps, log_, parent = [], [], None
    for i in range(snapshots):
        s = json.loads(json.dumps(first))
        s["snapshot-id"] = first["snapshot-id"] + i
        s["sequence-number"] = i + 1
        s["timestamp-ms"] = first["timestamp-ms"] + i
        if parent is None:
            s.pop("parent-snapshot-id", None)
        else:
            s["parent-snapshot-id"] = parent
        parent = s["snapshot-id"]
        snaps.append(s)
        log_.append({"timestamp-ms": s["timestamp-ms"], "snapshot-id": s["snapshot-id"]})
    meta["snapshots"] = snaps
    meta["snapshot-log"] = log_
    meta["last-sequence-number"] = snapshots
    meta["current-snapshot-id"] = parent
    meta["refs"] = {"main": {"snapshot-id": parent, "type": "branch"}}
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
    return out


def give_dirs_to_server(path):
    """The server unlinks the files: it needs write access to the directories."""
    for d, _, _ in os.walk(path):
        os.chown(d, PG_UID, -1)
        os.chmod(d, 0o755)


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

class World:
    def __init__(self, root):
        self.root = root
        self.pg = self.s3 = self.proxy = self.catalog = self.catalog_nd = None
        self.file_root = os.path.join(root, "files")
        os.makedirs(self.file_root)
        os.chmod(root, 0o755)
        os.chmod(self.file_root, 0o755)

    def start(self):
        self.pg = Cluster(os.path.join(self.root, "pg", "data"), settings={
            "tms.naptime": "'50ms'", "tms.heartbeat_interval": "'500ms'",
            "tms.purge_concurrency": "1", "log_min_messages": "warning"})
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.pg.psql("CREATE EXTENSION tms")
        self.s3 = world.S3Server(buckets=[BUCKET])
        self.proxy = CountingProxy(self.s3.port)
        cfg = storage_mod.S3Config(self.proxy.endpoint, "S3RVER", "S3RVER", "us-east-1")
        self.catalog = world.CatalogServer(self.pg.dsn(), "file://%s/wh" % self.file_root,
                                           catalog_name="bench_%s" % uuid.uuid4().hex[:6],
                                           s3=cfg, file_root=self.file_root)
        self.catalog_nd = nodelay_catalog(self.root, self.pg.dsn(), "file://%s/wh" % self.file_root,
                                          catalog_name="benchnd_%s" % uuid.uuid4().hex[:6],
                                          s3=cfg, file_root=self.file_root)
        # s3_vended_endpoint: tms sends S3 requests to an endpoint the catalog
        # vends (here the counting proxy) only when the server says so
        for srv, cat in ((SERVER, self.catalog), (SERVER_ND, self.catalog_nd)):
            self.pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                            uri '%s', request_timeout '30s', s3_vended_endpoint 'true',
                            allowed_locations 'file://%s/, s3://%s/');
                          CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                         % (srv, cat.uri, self.file_root, BUCKET, srv))
        wait_for(lambda: self.pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                      " AND state = 'idle'") != "0", timeout=60,
                 what="the worker pool")
        self.conn = self.pg.connect()

    def stop(self):
        for what in (self.catalog, self.catalog_nd, self.proxy, self.s3):
            if what is not None:
                try:
                    what.stop()
                except Exception as e:       # noqa: BLE001 -- stop the rest anyway
                    log("stopping %r: %s" % (what, e))
        if self.pg is not None:
            self.pg.destroy()

    def q(self, sql, args=None):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None

    def set_conf(self, **kv):
        for k, v in kv.items():
            self.q("ALTER SYSTEM SET tms.%s = '%s'" % (k, v))
        self.q("SELECT pg_reload_conf()")
        time.sleep(0.3)

    def register(self, name, metadata_location, catalog=None):
        (catalog or self.catalog).register("bench", name, metadata_location)


def read_status(pid):
    """{field: kB} of /proc/<pid>/status for the memory fields."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS", "RssAnon", "RssShmem"):
                    out[k] = int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def purge_run(w, label, out, batch, timeout):
    """Register `out`, purge it with batch size `batch`, wait for the job;
    return the measured figures."""
    name = "t_%s" % uuid.uuid4().hex[:10]
    w.register(name, out["metadata_location"])
    w.set_conf(enabled="off", purge_delete_batch_size=batch)
    job = w.q("SELECT tms.purge_table(%s, 'bench', %s)", (SERVER, name))[0][0]
    workers = [r[0] for r in w.q("SELECT pid FROM tms.workers WHERE role = 'worker'")]
    before = {}
    for pid in workers:
        try:
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")               # reset VmHWM to the current RSS
        except OSError:
            pass
        before[pid] = read_status(pid)
    w.proxy.reset()
    peak_anon = {}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for pid in workers:
                a = read_status(pid).get("RssAnon", 0)
                if a > peak_anon.get(pid, 0):
                    peak_anon[pid] = a
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    w.set_conf(enabled="on")
    owner = None
    deadline = t0 + timeout
    state = None
    while time.monotonic() < deadline:
        state, pid = w.q("SELECT j.state, t.picked_pid FROM tms.iceberg_cleanup_job j"
                         " LEFT JOIN tms.scheduled_tasks t ON t.task_name = 'purge'"
                         " AND t.task_instance = j.id::text WHERE j.id = %s", (job,))[0]
        if pid:
            owner = pid
        if state in ("SUCCEEDED", "FAILED"):
            break
        time.sleep(0.05)
    wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    counts, keys, batches = w.proxy.snapshot()
    row = w.q("SELECT state, attempts, last_error, files_deleted, bytes_freed,"
              " delete_requests, extract(epoch FROM finished_at - started_at)"
              " FROM tms.iceberg_cleanup_job WHERE id = %s", (job,))[0]
    if row[0] != "SUCCEEDED":
        raise RuntimeError("%s: job %d ended %s after %.0f s: %s" % (label, job, row[0],
                                                                     wall, row[2]))
    if owner is None:
        # the run was over before the first poll saw it: the only busy worker
        grown = [p for p in workers if peak_anon.get(p, 0) > before[p].get("RssAnon", 0)]
        if len(grown) != 1:
            # none or several grew privately: the one whose peak rose most
            # above its RSS at the reset (the others stayed idle)
            rise = {p: read_status(p).get("VmHWM", 0) - before[p].get("VmRSS", 0)
                    for p in workers}
            grown = [max(rise, key=rise.get)] if rise and max(rise.values()) > 0 else []
        owner = grown[0] if grown else None
    mem = read_status(owner) if owner else {}
    files = row[3]
    secs = float(row[6] or wall)
    res = {"label": label, "batch": batch, "files": files, "bytes_freed": row[4],
           "delete_requests": row[5], "run_s": secs, "wall_s": wall,
           "files_per_s": files / secs if secs > 0 else None, "attempts": row[1],
           "http": counts, "http_delete_keys": keys,
           "http_delete_batches": batches if len(batches) <= 20 else
           "%d requests, %d-%d keys" % (len(batches), min(batches), max(batches)),
           "http_requests": sum(counts.values()),
           "worker_pid": owner, "vmhwm_kb": mem.get("VmHWM"),
           "rss_anon_before_kb": before.get(owner, {}).get("RssAnon"),
           "rss_anon_peak_kb": peak_anon.get(owner)}
    log("%s: %d files in %.2f s (%.0f files/s), %d delete requests, http %s %s, "
        "VmHWM %s kB, RssAnon %s -> %s kB"
        % (label, files, secs, res["files_per_s"] or 0, row[5], counts,
           res["http_delete_batches"], res["vmhwm_kb"],
           res["rss_anon_before_kb"], res["rss_anon_peak_kb"]))
    return res


def unlink_baseline(label, out):
    """A plain os.unlink loop over every file of the table (no tms)."""
    paths = [f[len("file://"):] for f in out["files"]]
    t0 = time.monotonic()
    for p in paths:
        os.unlink(p)
    secs = time.monotonic() - t0
    res = {"label": label, "files": len(paths), "run_s": secs,
           "files_per_s": len(paths) / secs, "delete_requests": len(paths)}
    log("%s: %d unlinks in %.2f s (%.0f files/s)" % (label, len(paths), secs,
                                                    res["files_per_s"]))
    return res


def delete_loop_baseline(w, label, out):
    """One DELETE request per object, on one keep-alive connection through
    the counting proxy (no tms)."""
    keys = [storage_mod.split_s3(f) for f in out["files"]]
    w.proxy.reset()
    conn = http.client.HTTPConnection("127.0.0.1", w.proxy.port, timeout=60)
    t0 = time.monotonic()
    for bucket, key in keys:
        conn.request("DELETE", "/%s/%s" % (bucket, urllib.parse.quote(key)),
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
        r = conn.getresponse()
        r.read()
        if r.status != 204:
            raise RuntimeError("DELETE %s: %d" % (key, r.status))
    secs = time.monotonic() - t0
    conn.close()
    counts, _, _ = w.proxy.snapshot()
    res = {"label": label, "files": len(keys), "run_s": secs,
           "files_per_s": len(keys) / secs, "http": counts,
           "http_requests": sum(counts.values())}
    log("%s: %d DELETEs in %.2f s (%.0f files/s)" % (label, len(keys), secs,
                                                    res["files_per_s"]))
    return res


def s3_left(w, prefix):
    return w.s3.client().list(BUCKET, prefix)


# ---------------------------------------------------------------------------
# latency
# ---------------------------------------------------------------------------

def pct(sorted_ms, p):
    """Nearest-rank percentile."""
    k = max(0, min(len(sorted_ms) - 1, int(-(-p * len(sorted_ms) // 100)) - 1))
    return sorted_ms[k]


def timed_calls(w, server, catalog, metadata_location, sql, calls, backend=None):
    """Register `calls` names pointing at metadata_location in `catalog`,
    run `sql` (params: server, name) once per name on one connection; return
    the client-side times in ms, in call order.  With a list `backend`, sql
    returns the time the backend spent in the call (ms), appended to it."""
    names = ["l_%s_%d" % (uuid.uuid4().hex[:6], i) for i in range(calls)]
    for n in names:
        w.register(n, metadata_location, catalog)
    conn = w.pg.connect()
    times = []
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")          # the backend exists before the first call
            for n in names:
                t0 = time.perf_counter()
                cur.execute(sql, (server, n))
                rows = cur.fetchall()
                times.append((time.perf_counter() - t0) * 1000)
                if backend is not None:
                    backend.append(float(rows[0][0]))
    finally:
        conn.close()
    return times


def summary(times):
    s = sorted(times)
    return {"calls": len(s), "first_ms": times[0], "p50_ms": pct(s, 50), "p95_ms": pct(s, 95),
            "p99_ms": pct(s, 99), "max_ms": s[-1]}


PURGE_SQL = "SELECT tms.purge_table(%s, 'bench', %s)"
# the same call, returning the time spent in it inside the backend (ms):
# the materialised CTEs run in order, the clock is read after the call
PURGE_SQL_BACKEND = ("WITH a AS MATERIALIZED (SELECT clock_timestamp() AS t0),"
                     " b AS MATERIALIZED (SELECT tms.purge_table(%s, 'bench', %s) AS id FROM a)"
                     " SELECT extract(epoch FROM clock_timestamp() - a.t0) * 1000 FROM a, b")
LOAD_SQL = "SELECT tms.table_metadata(%s, 'bench', %s) IS NOT NULL"
DROP_SQL = "SELECT tms.drop_table(%s, 'bench', %s, purge => false)"


def latency(w, label, metadata_location, calls, parts_calls):
    """purge_table() latency through the stock test catalog and through the
    same catalog with TCP_NODELAY; with the latter, the parts: a catalog
    load (tms.table_metadata) and a drop without purge (tms.drop_table)."""
    res = {"label": label}
    for key, srv, cat in (("stock", SERVER, w.catalog), ("nodelay", SERVER_ND, w.catalog_nd)):
        res[key] = summary(timed_calls(w, srv, cat, metadata_location, PURGE_SQL, calls))
        log("latency %s, %s catalog: %s" % (label, key, fmt_lat(res[key])))
    inside = []
    timed_calls(w, SERVER, w.catalog, metadata_location, PURGE_SQL_BACKEND, calls, inside)
    res["in_backend"] = summary(inside)
    log("latency %s, time in the backend (stock catalog): %s"
        % (label, fmt_lat(res["in_backend"])))
    for key, sql in (("load_only", LOAD_SQL), ("drop_only", DROP_SQL)):
        res[key] = summary(timed_calls(w, SERVER_ND, w.catalog_nd, metadata_location, sql,
                                       parts_calls))
        log("latency %s, %s (nodelay catalog): %s" % (label, key, fmt_lat(res[key])))
    return res


def fmt_lat(r):
    return "first %.1f p50 %.1f p95 %.1f p99 %.1f max %.1f ms" % (
        r["first_ms"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"])


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def timed(label, fn, *args, **kw):
    t0 = time.monotonic()
    out = fn(*args, **kw)
    secs = time.monotonic() - t0
    log("%s: %.1f s" % (label, secs))
    GEN[label] = secs
    return out


GEN = {}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=100000, help="data files per file:// table")
    p.add_argument("--s3-files", type=int, default=50000, help="data files of the s3 bulk table")
    p.add_argument("--s3-small", type=int, default=5000,
                   help="data files of the s3 tables purged both ways (bulk vs one by one)")
    p.add_argument("--file-size", type=int, default=64, help="bytes per placeholder data file")
    p.add_argument("--latency-calls", type=int, default=200)
    p.add_argument("--deadline", type=int, default=900, help="abort after this many seconds")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--latency-only", action="store_true",
                   help="only the purge_table() latency part (no purge runs)")
    p.add_argument("--history", default="500,5000",
                   help="snapshot counts of the long-history latency shapes (comma-separated)")
    p.add_argument("--no-small-large", action="store_true",
                   help="latency: only the long-history shapes")
    opts = p.parse_args()

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    def on_term(signum, frame):
        raise SystemExit("terminated")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(opts.deadline)

    root = tempfile.mkdtemp(prefix="tms-purge-bench-", dir="/tmp")
    w = World(root)
    results = {"runs": [], "latency": [], "generate_s": GEN, "opts": vars(opts)}
    try:
        w.start()
        log("world up")
        fr = w.file_root

        def floc(tag):
            return os.path.join(fr, "t", "%s_%s" % (tag, uuid.uuid4().hex[:8]))

        if not opts.latency_only:
            # ---- file:// ------------------------------------------------------
            n = opts.files
            f_bulk = timed("generate file:// %d (bulk)" % n, make_table, floc("bulk"), n,
                           opts.file_size)
            results["runs"].append(dict(purge_run(w, "file:// bulk", f_bulk, 1000, 300),
                                        storage="file", size=n))
            f_one = timed("generate file:// %d (one by one)" % n, make_table, floc("one"), n,
                          opts.file_size)
            results["runs"].append(dict(purge_run(w, "file:// batch 1", f_one, 1, 300),
                                        storage="file", size=n))
            f_raw = timed("generate file:// %d (baseline)" % n, make_table, floc("raw"), n,
                          opts.file_size)
            results["runs"].append(dict(unlink_baseline("file:// os.unlink loop", f_raw),
                                        storage="file", size=n))
            for out in (f_bulk, f_one):
                left = [f for f in out["files"] if os.path.exists(f[len("file://"):])]
                assert not left, "files left after the purge: %s" % left[:3]

            # ---- s3rver --------------------------------------------------------
            for size, kinds in ((opts.s3_small, ("bulk", "one", "raw")),
                                (opts.s3_files, ("bulk",))):
                for kind in kinds:
                    prefix = "t/%s_%s_%s" % (kind, size, uuid.uuid4().hex[:8])
                    out = timed("generate s3 %d (%s)" % (size, kind), make_table,
                                "s3://%s/%s" % (BUCKET, prefix), size, opts.file_size, s3=w.s3)
                    if kind == "raw":
                        r = delete_loop_baseline(w, "s3 DELETE loop", out)
                    else:
                        r = purge_run(w, "s3 %s" % ("bulk" if kind == "bulk" else "batch 1"),
                                      out, 1000 if kind == "bulk" else 1, 420)
                    results["runs"].append(dict(r, storage="s3", size=size))
                    left = s3_left(w, prefix)
                    assert not left, "objects left after the purge: %s" % left[:3]

        # ---- latency -------------------------------------------------------
        w.set_conf(enabled="off")
        shapes = []
        if not opts.no_small_large:
            small = timed("generate latency small", make_table, floc("lsmall"), 2,
                          opts.file_size, snapshots=1)
            large = timed("generate latency large", make_table, floc("llarge"), opts.files,
                          opts.file_size, no_data=True)
            shapes += [("small (2 files, 1 snapshot)", small),
                       ("large (%d files, 10 snapshots)" % opts.files, large)]
        for n in [int(x) for x in opts.history.split(",") if x]:
            shapes.append(("long history (%d snapshots)" % n,
                           timed("generate latency history %d" % n, make_history,
                                 floc("lhist%d" % n), n)))
        for label, out in shapes:
            r = latency(w, label, out["metadata_location"], opts.latency_calls,
                        max(20, opts.latency_calls // 4))
            r["metadata_json_bytes"] = os.path.getsize(out["metadata_location"][len("file://"):])
            results["latency"].append(r)
    finally:
        signal.alarm(0)
        try:
            w.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    log("done, world stopped")
    print(json.dumps(results, indent=1))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
