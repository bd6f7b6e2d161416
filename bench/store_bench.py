#!/usr/bin/python3
"""Purge and orphan cleanup of a large table on one object store (s3rver,
Azurite or the GCS test server): wall time, files/s and HTTP requests per
file, next to what the store takes from a plain client.

Usage: bench/store_bench.py --store s3|azure|gcs [--files N] [--orphans N]
                            [--threads N] [--deadline SECONDS] [--json FILE]
                            [--azurite-mariadb]

One throwaway world on 127.0.0.1 / a Unix socket: PostgreSQL 15 with tms
(4 pool workers, defaults otherwise: tms.purge_delete_batch_size,
tms.delete_concurrency), the store, and the test REST catalog whose
pointers live in the cluster's database.  Requests are counted where they
arrive: for s3 and azure the test world's gate (test/s3gate/server.py) in
front of s3rver / Azurite, which tms is pointed at; for gcs the GCS test
server's own request log (test/gcs/server.py, no gate exists for it).
tms's own count, tms.stat_requests (service storage, the bench's server),
is read before and after each run as a cross-check.

The table is synthetic (test/fixtures/synth.py through
purge_bench.make_table: 4 snapshots, 1000 data files per manifest, identity
partitions of 500 data files) with --files data files of 16 bytes, written
straight to the store by --threads writers; then --orphans files no
metadata reaches are planted below its data/ directory.

Runs, in order, on the same table:
  orphan cleanup  tms.run_operation(..., 'orphan-cleanup', older-than 1 s,
                  force) once every file is older than that: the job's time
                  (started_at..finished_at) and the client's, orphans found
                  and deleted (checked against the planted set: exactly
                  them, every live file kept), listing requests and delete
                  requests and what they carried
  purge           tms.purge_table(): the job's time, files/s, requests by
                  kind per file; afterwards the table's prefix is empty
  baseline        without tms, against the same endpoint tms used: one full
                  listing of the table's prefix before the runs (pages and
                  time, the same store-side work the cleanup's listing
                  does), and --orphans more planted objects deleted one
                  DELETE per object by --threads clients on keep-alive
                  connections (the store's per-object delete rate; the
                  batch endpoints are tms's)

--azurite-mariadb (with --store azure) keeps Azurite's blob metadata in
a private MariaDB server (Debian's mariadb-server, its binaries only:
mariadb-install-db, mariadbd; installed first when missing, by
scripts/install-deps.sh --bench-mariadb as root) started here on 127.0.0.1 and a Unix socket
in the run's temporary directory, instead of Azurite's in-memory LokiJS
collections, where every lookup and delete scans every blob held (a purge
of n files costs O(n^2 log n) there).  The server is tuned for a throwaway
bench (no binary log, the redo log flushed once a second) and stopped with
the rest.  Azurite on MariaDB takes 30-70 PUTs a second here, so the data
files, orphans and baseline objects (not the metadata files, manifest lists
and manifests, which go through Azurite) are written as copies of one
blob's metadata row, straight in the database (Store.bulk_write): the same
blobs as far as listing and deleting go; every timed run goes through
Azurite.  The CPU time Azurite, MariaDB, the gate and the PostgreSQL cluster
(tms) used during each run is read from /proc and reported with it.

Everything is bounded by --deadline (SIGALRM) and stopped in `finally`.
"""

import argparse
import http.client
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import purge_bench as pb  # noqa: E402  (puts test/ and test/fixtures on sys.path)
import world  # noqa: E402
import storage as storage_mod  # noqa: E402
from pgcluster import Cluster, wait_for  # noqa: E402

BUCKET = "warehouse"
DATA_FILE = b"0" * 16           # synth.py --file-size 16 (bulk_write's content)
SERVER = "storebench"
NS = "bench"
log = pb.log


# ---------------------------------------------------------------------------
# a private MariaDB for Azurite's SQL metadata store
# ---------------------------------------------------------------------------

MARIADB_PROGS = ("mariadb-install-db", "mariadbd", "mariadb")


def mariadb_missing():
    return [p for p in MARIADB_PROGS
            if shutil.which(p) is None and not os.path.exists("/usr/sbin/" + p)]


def install_mariadb():
    """Debian's mariadb-server when its programs are missing, through
    scripts/install-deps.sh --bench-mariadb (as root: it starts no service
    and keeps the packaged one off); otherwise what to run."""
    missing = mariadb_missing()
    if not missing:
        return
    script = os.path.join(HERE, "..", "scripts", "install-deps.sh")
    if os.geteuid() != 0:
        raise SystemExit("--azurite-mariadb needs %s: run (as root) %s --bench-mariadb"
                         % (", ".join(missing), script))
    log("installing mariadb-server (%s --bench-mariadb)" % script)
    subprocess.run(["bash", script, "--bench-mariadb"], check=True, timeout=1800)
    missing = mariadb_missing()
    if missing:
        raise SystemExit("--azurite-mariadb: still no %s after %s --bench-mariadb"
                         % (", ".join(missing), script))


class MariaDB:
    """mariadbd on 127.0.0.1:port and root/sock, its data in root/data,
    with one database and user for Azurite (url()).  stop() ends it
    (SIGTERM, then SIGKILL after 60 s); the caller removes root."""

    def __init__(self, root, timeout=120):
        install_mariadb()
        self.root = root
        self.proc = None
        os.makedirs(root, exist_ok=True)
        self.data = os.path.join(root, "data")
        self.sock = os.path.join(root, "sock")
        self.port = world.free_port()
        user = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + self.data,
                        "--auth-root-authentication-method=socket", "--skip-test-db"] + user,
                       check=True, timeout=timeout, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT)
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        self.log = open(os.path.join(root, "server.log"), "wb")
        self.proc = subprocess.Popen(
            [mariadbd, "--no-defaults", "--datadir=" + self.data, "--socket=" + self.sock,
             "--port=%d" % self.port, "--bind-address=127.0.0.1", "--skip-name-resolve",
             "--pid-file=" + os.path.join(root, "pid"), "--skip-log-bin",
             "--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=512M",
             "--max-connections=100"] + user,
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        try:
            wait_for(lambda: self.proc.poll() is not None or self._sql("SELECT 1") is not None,
                     timeout=timeout, what="mariadbd")
            if self.proc.poll() is not None:
                raise RuntimeError("mariadbd exited %s, see %s" % (self.proc.returncode,
                                                                   self.log.name))
            self._sql("CREATE DATABASE azurite; CREATE USER 'azurite'@'127.0.0.1'"
                      " IDENTIFIED BY 'azurite'; GRANT ALL ON azurite.* TO"
                      " 'azurite'@'127.0.0.1'", check=True)
        except BaseException:
            self.stop()
            raise

    def _sql(self, sql, check=False):
        r = subprocess.run(["mariadb", "--no-defaults", "-S", self.sock, "-uroot", "-N",
                            "-e", sql], capture_output=True, timeout=30)
        if r.returncode != 0:
            if check:
                raise RuntimeError("mariadb: %s" % r.stderr.decode(errors="replace"))
            return None
        return r.stdout.decode()

    def url(self):
        return "mysql://azurite:azurite@127.0.0.1:%d/azurite" % self.port

    def clone_blobs(self, account, container, template, names):
        """Rows of Azurite's Blobs table for `names`, each a copy of the
        row of the blob `template` (written through Azurite) with only its
        name changed: what a PUT of the same content would leave, without
        Azurite's per-PUT round trips."""
        cols = self._sql("SELECT column_name FROM information_schema.columns WHERE"
                         " table_schema = 'azurite' AND table_name = 'Blobs' AND"
                         " extra NOT LIKE '%auto_increment%' ORDER BY ordinal_position",
                         check=True).split()
        sel = ", ".join("bench_names.n" if c == "blobName" else "b.`%s`" % c for c in cols)

        def lit(v):
            return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"

        sql = ["CREATE TEMPORARY TABLE bench_names (n VARCHAR(1024) NOT NULL);"]
        for i in range(0, len(names), 1000):
            sql.append("INSERT INTO bench_names VALUES %s;"
                       % ",".join("(%s)" % lit(n) for n in names[i:i + 1000]))
        sql.append("INSERT INTO Blobs (%s) SELECT %s FROM Blobs b JOIN bench_names"
                   " WHERE b.accountName = %s AND b.containerName = %s AND b.blobName = %s"
                   " AND b.snapshot = '';"
                   % (", ".join("`%s`" % c for c in cols), sel, lit(account), lit(container),
                      lit(template)))
        sql.append("SELECT ROW_COUNT();")
        r = subprocess.run(["mariadb", "--no-defaults", "-S", self.sock, "-uroot", "-N",
                            "azurite"], input="\n".join(sql).encode(), capture_output=True,
                           timeout=600)
        if r.returncode != 0:
            raise RuntimeError("mariadb: %s" % r.stderr.decode(errors="replace")[-2000:])
        made = int(r.stdout.split()[-1])
        if made != len(names):
            raise RuntimeError("cloned %d blob rows for %d names" % (made, len(names)))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.log.close()


def cpu_seconds(pids):
    """user + system CPU seconds of pids and their descendants, from /proc."""
    tck = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # rest[1] ppid; rest[11..14] utime, stime, and of its reaped
        # children cutime, cstime (a backend that ended counts in the
        # postmaster's)
        stats[int(d)] = (int(rest[1]), sum(int(x) for x in rest[11:15]) / tck)
    total = 0.0
    for pid, (ppid, secs) in stats.items():
        p = pid
        while p > 1:
            if p in pids:
                total += secs
                break
            p = stats.get(p, (0, 0))[0]
    return total


# ---------------------------------------------------------------------------
# the stores
# ---------------------------------------------------------------------------

class Store:
    """One store, the endpoint tms uses (counted), a writer's Storage
    arguments, and the request log since reset_log()."""

    def __init__(self, kind, mariadb=None):
        self.kind = kind
        self.mariadb = mariadb
        self.backend = self.gate = None
        if kind == "s3":
            self.backend = world.S3Server(buckets=[BUCKET])
            self.gate = world.S3Gate(self.backend)
            self.root = "s3://%s/" % BUCKET
            self.endpoint = self.gate.endpoint
            self.server_opts = "s3_endpoint '%s'" % self.gate.endpoint
            self.mapping = ""
            self.storage_kw = {"s3": self.backend.config()}
            self.catalog_kw = {"s3": self.gate.config()}
        elif kind == "azure":
            self.backend = world.AzuriteServer(containers=[BUCKET], sql_db=(
                mariadb.url() if mariadb is not None else None))
            self.gate = world.AzureGate(self.backend)
            self.root = "abfss://%s@%s.dfs.core.windows.net/" % (BUCKET,
                                                                 storage_mod.AZURITE_ACCOUNT)
            self.endpoint = self.gate.endpoint
            self.server_opts = "azure_endpoint '%s'" % self.gate.endpoint
            self.mapping = "OPTIONS (azure_account_key '%s')" % storage_mod.AZURITE_KEY
            self.storage_kw = {"azure": self.backend.config()}
            self.catalog_kw = {"azure": self.backend}
        elif kind == "gcs":
            if not hasattr(world, "GcsServer"):
                raise SystemExit("--store gcs: this tree has no GCS test server")
            self.backend = world.GcsServer(buckets=[BUCKET])
            self.root = "gs://%s/" % BUCKET
            self.endpoint = self.backend.endpoint
            self.server_opts = "gcs_endpoint '%s'" % self.backend.endpoint
            self.mapping = "OPTIONS (gcs_oauth2_token '%s')" % self.backend.token
            self.storage_kw = {"gcs": self.backend.config()}
            self.catalog_kw = {"gcs": self.backend}
        else:
            raise SystemExit("--store: s3, azure or gcs")

    def synth_args(self):
        if self.kind == "s3":
            return ["--s3-endpoint", self.backend.endpoint]
        if self.kind == "azure":
            return ["--azure-endpoint", self.backend.endpoint]
        return ["--gcs-endpoint", self.backend.endpoint, "--gcs-token", self.backend.token]

    def bulk_write(self, uris, data):
        """(Azurite on MariaDB) one blob of `data` PUT through Azurite,
        then its metadata row copied for every uri straight in the
        database: the same blobs a PUT each would make (same size, etag,
        properties), written in seconds instead of at Azurite's 30-70 PUTs
        a second.  Only their content's extent is shared, which neither the
        cleanup nor the purge reads."""
        account, container, _ = storage_mod.split_azure(uris[0])
        template = "bench-template/%s" % uuid.uuid4().hex
        self.client(through_counted=False).put(account, container, template, data)
        names = []
        for u in uris:
            a, c, blob = storage_mod.split_azure(u)
            if (a, c) != (account, container):
                raise RuntimeError("bulk write across containers: %s" % u)
            names.append(blob)
        # the template stays (outside every table's prefix): its extent is theirs
        self.mariadb.clone_blobs(account, container, template, names)

    def counted(self):
        return self.gate or self.backend

    def reset_log(self):
        self.counted().reset_log()

    def log(self):
        return self.counted().log()

    def client(self, through_counted=True):
        """A simple client of the store (optionally through the gate)."""
        if self.kind == "s3":
            return storage_mod.S3Client(self.gate.config() if through_counted
                                        else self.backend.config())
        if self.kind == "azure":
            return storage_mod.AzureClient(self.gate.config() if through_counted
                                           else self.backend.config())
        return storage_mod.GcsClient(self.backend.config())

    def split(self, uri):
        """(args for the client's per-object calls) of uri."""
        if self.kind == "s3":
            return storage_mod.split_s3(uri)
        if self.kind == "azure":
            return storage_mod.split_azure(uri)
        return storage_mod.split_gs(uri)

    def list_prefix(self, client, uri_prefix):
        """Every object below uri_prefix, by the store's listing."""
        if self.kind == "s3":
            b, k = storage_mod.split_s3(uri_prefix)
            return client.list_objects(b, k)
        if self.kind == "azure":
            a, c, k = storage_mod.split_azure(uri_prefix)
            return client.list_objects(a, c, k)
        b, k = storage_mod.split_gs(uri_prefix)
        return client.list_objects(b, k)

    def stop(self):
        for what in (self.gate, self.backend):
            if what is not None:
                try:
                    what.stop()
                except Exception as e:       # noqa: BLE001 -- stop the rest anyway
                    log("stopping %r: %s" % (what, e))


def classify(store, entries):
    """{kind: requests}, keys carried by batch deletes, pages listed."""
    out = {}
    keys = 0
    for e in entries:
        method, path, query = e.get("method"), e.get("path", ""), e.get("query", "") or ""
        if method == "DELETE":
            k = "DELETE"
            keys += 1
        elif e.get("kind") == "delete" or path.startswith("/batch/storage/v1"):
            k = "batch delete"
            items = e.get("items") or {}   # the GCS server's log: {"count": objects}
            keys += e.get("keys") or items.get("count", 0)
        elif method == "GET" and ("comp=list" in query or "list-type" in query or
                                  (path.startswith("/storage/v1/b/") and path.endswith("/o"))):
            k = "list"
        else:
            k = method
        status = e.get("status")
        if isinstance(status, int) and status >= 300 and status != 404:
            k += " -> %d" % status
        out[k] = out.get(k, 0) + 1
    return out, keys


# ---------------------------------------------------------------------------
# writing objects fast: a pool of Storage writers
# ---------------------------------------------------------------------------

class WriterPool:
    """`threads` threads, each with its own storage.Storage(**kw), writing
    (uri, data) pairs from a bounded queue; join() raises the first error."""

    def __init__(self, kw, threads):
        self.q = queue.Queue(maxsize=threads * 64)
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(kw,), daemon=True)
                        for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, kw):
        st = storage_mod.Storage(**kw)
        while True:
            item = self.q.get()
            if item is None:
                return
            if self.errors:
                continue
            for attempt in (1, 2, 3):
                try:
                    st.write(*item)
                    break
                except Exception as e:       # noqa: BLE001 -- a fresh client, then give up
                    st = storage_mod.Storage(**kw)
                    if attempt == 3:
                        self.errors.append("%s: %s" % (item[0], e))

    def put(self, uri, data):
        self.q.put((uri, data), timeout=120)

    def join(self):
        for _ in self.threads:
            self.q.put(None, timeout=120)
        for t in self.threads:
            t.join(timeout=600)
        if self.errors:
            raise RuntimeError("writes failed: %s" % self.errors[:3])


class PooledStorage(storage_mod.Storage):
    """What synth.py sees as storage.Storage: local paths as usual, every
    object store URI written through the current WriterPool, or, when
    `bulk` is a list, data files (below a data/ directory) only noted there
    for Store.bulk_write."""

    pool = None
    bulk = None

    def write(self, uri, data):
        if self.bulk is not None and "/data/" in uri:
            self.bulk.append(uri)
        elif "://" in uri and not uri.startswith("file:"):
            self.pool.put(uri, data)
        else:
            super().write(uri, data)


def write_table(store, location, files, threads):
    """The synthetic table at `location`, written through a WriterPool;
    synth's summary."""
    import synth  # test/fixtures

    pool = PooledStorage.pool = WriterPool(store.storage_kw, threads)
    PooledStorage.bulk = [] if store.mariadb is not None else None
    saved = synth.storage_mod
    ns = type(sys)("storage_pooled")
    ns.__dict__.update(vars(storage_mod))
    ns.Storage = PooledStorage
    synth.storage_mod = ns
    try:
        args = ["--out", location, "--data-files", str(files), "--snapshots", "4",
                "--files-per-manifest", "1000", "--file-size", "16", "--list-files",
                "--partitions", str(max(1, files // pb.FILES_PER_PARTITION))]
        out = synth.generate(synth.build_parser().parse_args(args + store.synth_args()))
    finally:
        synth.storage_mod = saved
        pool.join()
        bulk, PooledStorage.bulk = PooledStorage.bulk, None
    if bulk:
        store.bulk_write(bulk, DATA_FILE)
    return out


def plant(store, uris, threads):
    if store.mariadb is not None:
        store.bulk_write(uris, b"orphan!!")
        return
    pool = WriterPool(store.storage_kw, threads)
    for u in uris:
        pool.put(u, b"orphan!!")
    pool.join()


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

class World:
    def __init__(self, root, store_kind, mariadb=False):
        self.root = root
        self.kind = store_kind
        self.want_mariadb = mariadb
        self.pg = self.store = self.catalog = self.mariadb = None

    def start(self):
        self.pg = Cluster(os.path.join(self.root, "pg", "data"), settings={
            "tms.naptime": "'50ms'", "tms.heartbeat_interval": "'500ms'",
            "log_min_messages": "warning"})
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.pg.psql("CREATE EXTENSION tms")
        if self.want_mariadb:
            self.mariadb = MariaDB(os.path.join(self.root, "mariadb"))
        self.store = Store(self.kind, self.mariadb)
        self.catalog = world.CatalogServer(self.pg.dsn(), self.store.root + "wh",
                                           catalog_name="sb_%s" % uuid.uuid4().hex[:6],
                                           file_root=self.root, **self.store.catalog_kw)
        self.pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                        uri '%s', %s, request_timeout '60s', allowed_locations '%s');
                      CREATE USER MAPPING FOR PUBLIC SERVER %s %s;"""
                     % (SERVER, self.catalog.uri, self.store.server_opts, self.store.root,
                        SERVER, self.store.mapping))
        wait_for(lambda: self.pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                      " AND state = 'idle'") != "0", timeout=60,
                 what="the worker pool")
        self.conn = self.pg.connect()

    def stop(self):
        for what in (self.catalog, self.store, self.mariadb):
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

    def processes(self):
        """{name: pid} of the processes whose CPU time a run reports."""
        with open(os.path.join(self.pg.datadir, "postmaster.pid")) as f:
            out = {"postgres (tms)": int(f.readline())}
        out["store"] = self.store.backend.child.proc.pid
        if self.store.gate is not None:
            out["gate"] = self.store.gate.child.proc.pid
        if self.mariadb is not None:
            out["mariadb"] = self.mariadb.proc.pid
        out["catalog"] = self.catalog.child.proc.pid
        return out

    def cpu(self):
        return {k: cpu_seconds({pid}) for k, pid in self.processes().items()}

    def storage_requests(self):
        """tms's own count of its storage requests through SERVER."""
        r = self.q("SELECT coalesce(sum(requests), 0), coalesce(sum(retries), 0)"
                   " FROM tms.stat_requests WHERE server = %s AND service = 'storage'",
                   (SERVER,))
        return int(r[0][0]), int(r[0][1])


# ---------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------

def cpu_delta(w, before):
    after = w.cpu()
    return {k: round(after[k] - before[k], 2) for k in after}


def delete_rate_by_fifth(entries):
    """Batch deletes' keys/s in five consecutive fifths of the keys (by
    arrival at the gate): flat when a delete costs the store the same
    whatever it still holds."""
    ds = [(e["received"], e.get("keys", 0)) for e in entries
          if e.get("kind") == "delete" and "received" in e]
    total = sum(k for _, k in ds)
    if total == 0 or len(ds) < 10:
        return None
    out, acc, acc0, start = [], 0, 0, ds[0][0]
    for t, k in ds:
        acc += k
        if len(out) < 5 and acc >= total * (len(out) + 1) / 5:
            out.append(round((acc - acc0) / max(t - start, 1e-3), 1))
            start, acc0 = t, acc
    return out


def run_orphan_cleanup(w, name, orphans, live, timeout):
    st = w.store
    req0 = w.storage_requests()
    cpu0 = w.cpu()
    st.reset_log()
    t0 = time.monotonic()
    jid = w.q("SELECT tms.run_operation(%s, %s, %s, 'orphan-cleanup', %s::jsonb)",
              (SERVER, NS, name, json.dumps({"older-than": "1 second", "force": True})))[0][0]
    deadline = t0 + timeout
    row = None
    while time.monotonic() < deadline:
        row = w.q("SELECT state, last_error, orphans_found, files_deleted,"
                  " extract(epoch FROM finished_at - started_at)"
                  " FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0]
        if row[0] in ("succeeded", "failed", "skipped", "cancelled"):
            break
        time.sleep(0.1)
    wall = time.monotonic() - t0
    if row is None or row[0] != "succeeded":
        raise RuntimeError("orphan cleanup job %s ended %r after %.0f s" % (jid, row, wall))
    req1 = w.storage_requests()
    kinds, keys = classify(st, st.log())
    secs = float(row[4] or wall)
    res = {"job_s": secs, "wall_s": wall, "orphans_found": row[2], "files_deleted": row[3],
           "requests_by_kind": kinds, "delete_keys": keys,
           "requests": sum(kinds.values()),
           "tms_storage_requests": req1[0] - req0[0], "tms_retries": req1[1] - req0[1],
           "listed_objects": live + orphans,
           "orphans_per_s": row[3] / secs if secs > 0 else None}
    res["load_avg"] = os.getloadavg()
    res["cpu_s"] = cpu_delta(w, cpu0)
    res["list_requests"] = kinds.get("list", 0)
    res["delete_requests"] = kinds.get("batch delete", 0) + kinds.get("DELETE", 0)
    res["delete_requests_per_orphan"] = res["delete_requests"] / orphans if orphans else None
    log("orphan cleanup: %d found, %d deleted in %.1f s (client %.1f s), requests %s,"
        " %d keys in deletes, tms counted %d, CPU s %s"
        % (row[2], row[3], secs, wall, kinds, keys, res["tms_storage_requests"],
           res["cpu_s"]))
    return res


def run_purge(w, name, timeout):
    st = w.store
    req0 = w.storage_requests()
    cpu0 = w.cpu()
    st.reset_log()
    t0 = time.monotonic()
    job = w.q("SELECT tms.purge_table(%s, %s, %s)", (SERVER, NS, name))[0][0]
    deadline = t0 + timeout
    row = None
    while time.monotonic() < deadline:
        row = w.q("SELECT state, last_error, files_deleted, delete_requests, attempts,"
                  " extract(epoch FROM finished_at - started_at)"
                  " FROM tms.iceberg_cleanup_job WHERE id = %s", (job,))[0]
        if row[0] in ("SUCCEEDED", "FAILED"):
            break
        time.sleep(0.1)
    wall = time.monotonic() - t0
    if row is None or row[0] != "SUCCEEDED":
        raise RuntimeError("purge job %s ended %r after %.0f s" % (job, row, wall))
    req1 = w.storage_requests()
    entries = st.log()
    kinds, keys = classify(st, entries)
    files = row[2]
    secs = float(row[5] or wall)
    total = sum(kinds.values())
    res = {"job_s": secs, "wall_s": wall, "files": files, "attempts": row[4],
           "job_delete_requests": row[3], "requests_by_kind": kinds, "delete_keys": keys,
           "requests": total, "requests_per_file": total / files if files else None,
           "tms_storage_requests": req1[0] - req0[0], "tms_retries": req1[1] - req0[1],
           "files_per_s": files / secs if secs > 0 else None,
           "load_avg": os.getloadavg(), "cpu_s": cpu_delta(w, cpu0),
           "delete_keys_per_s_by_fifth": delete_rate_by_fifth(entries)}
    log("purge: %d files in %.1f s (client %.1f s, %.0f files/s), requests %s "
        "(%.4f per file), %d keys in deletes, tms counted %d, CPU s %s, keys/s by fifth %s"
        % (files, secs, wall, res["files_per_s"] or 0, kinds, res["requests_per_file"] or 0,
           keys, res["tms_storage_requests"], res["cpu_s"],
           res["delete_keys_per_s_by_fifth"]))
    return res


def baseline_list(w, prefix):
    st = w.store
    st.reset_log()
    cpu0 = w.cpu()
    t0 = time.monotonic()
    listed = st.list_prefix(st.client(), prefix)
    secs = time.monotonic() - t0
    kinds, _ = classify(st, st.log())
    res = {"objects": len(listed), "s": secs, "pages": kinds.get("list", 0),
           "load_avg": os.getloadavg(), "cpu_s": cpu_delta(w, cpu0),
           "objects_per_s": len(listed) / secs if secs > 0 else None}
    log("baseline listing: %d objects in %.2f s, %d pages" % (len(listed), secs,
                                                            res["pages"]))
    return res


def baseline_delete(w, uris, threads):
    """One DELETE per object, `threads` clients on keep-alive connections."""
    st = w.store
    todo = queue.Queue()
    for u in uris:
        todo.put(u)
    errors = []
    retried = []

    def run():
        c = st.client()
        while not errors:
            try:
                u = todo.get_nowait()
            except queue.Empty:
                return
            for attempt in (1, 2, 3):
                # s3rver answers 500 when concurrent deletes race to remove
                # the directory they empty: retried, as tms retries
                try:
                    c.delete(*st.split(u))
                    break
                except storage_mod.StorageError as e:
                    if getattr(e, "status", None) != 500 or attempt == 3:
                        errors.append("%s: %s" % (u, e))
                        break
                    retried.append(u)

    st.reset_log()
    cpu0 = w.cpu()
    t0 = time.monotonic()
    ts = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=600)
    secs = time.monotonic() - t0
    if errors:
        raise RuntimeError("baseline deletes failed: %s" % errors[:3])
    kinds, _ = classify(st, st.log())
    res = {"objects": len(uris), "s": secs, "threads": threads, "requests_by_kind": kinds,
           "retried_500": len(retried), "load_avg": os.getloadavg(),
           "cpu_s": cpu_delta(w, cpu0),
           "objects_per_s": len(uris) / secs if secs > 0 else None}
    log("baseline DELETE loop: %d objects in %.2f s (%.0f/s, %d threads), %s"
        % (len(uris), secs, res["objects_per_s"], threads, kinds))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", required=True, choices=("s3", "azure", "gcs"))
    p.add_argument("--files", type=int, default=100000, help="data files of the table")
    p.add_argument("--orphans", type=int, default=10000, help="orphan files planted")
    p.add_argument("--threads", type=int, default=8, help="writers / baseline clients")
    p.add_argument("--deadline", type=int, default=1800, help="abort after this many seconds")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--azurite-mariadb", action="store_true",
                   help="Azurite's metadata in a private MariaDB (with --store azure)")
    opts = p.parse_args()
    if opts.azurite_mariadb and opts.store != "azure":
        p.error("--azurite-mariadb goes with --store azure")

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit("terminated"))
    signal.alarm(opts.deadline)
    root = tempfile.mkdtemp(prefix="tms-store-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    w = World(root, opts.store, mariadb=opts.azurite_mariadb)
    res = {"opts": vars(opts)}
    timeout = max(300, opts.files // 20)
    try:
        w.start()
        log("world up (%s)" % opts.store)
        st = w.store
        name = "t_%s" % uuid.uuid4().hex[:10]
        loc = "%sbench/%s" % (st.root, name)
        t0 = time.monotonic()
        out = write_table(st, loc, opts.files, opts.threads)
        res["write_table_s"] = time.monotonic() - t0
        res["write_load_avg"] = os.getloadavg()
        live = len(out["files"])
        log("wrote the table: %d files in %.0f s" % (live, res["write_table_s"]))
        # directories of FILES_PER_PARTITION objects, as the data files:
        # s3rver lists the directory of every key it deletes
        per = pb.FILES_PER_PARTITION
        orphans = ["%s/data/orphans-%03d/o%06d.parquet" % (loc, i // per, i)
                   for i in range(opts.orphans)]
        extra = ["%sbaseline/%s/%03d/b%06d" % (st.root, name, i // per, i)
                 for i in range(opts.orphans)]
        t0 = time.monotonic()
        plant(st, orphans + extra, opts.threads)
        res["plant_s"] = time.monotonic() - t0
        log("planted %d orphans and %d baseline objects in %.0f s"
            % (len(orphans), len(extra), res["plant_s"]))
        w.catalog.register(NS, name, out["metadata_location"])
        res["baseline_list"] = baseline_list(w, loc + "/")
        if res["baseline_list"]["objects"] != live + len(orphans):
            raise RuntimeError("listed %d objects, wrote %d" % (res["baseline_list"]["objects"],
                                                                live + len(orphans)))
        res["baseline_delete"] = baseline_delete(w, extra, opts.threads)
        # every file older than the cleanup's 1 s (the store's clock is ours)
        time.sleep(1.5)
        res["orphan_cleanup"] = run_orphan_cleanup(w, name, len(orphans), live, timeout)
        after = {o for o in st.list_prefix(st.client(), loc + "/")}
        res["after_cleanup_objects"] = len(after)
        if len(after) != live:
            raise RuntimeError("after the cleanup %d objects, expected the %d live ones"
                               % (len(after), live))
        res["purge"] = run_purge(w, name, timeout)
        left = st.list_prefix(st.client(), loc + "/")
        if left:
            raise RuntimeError("%d objects left after the purge, e.g. %s" % (len(left),
                                                                            list(left)[:3]))
        res["live_files"] = live
    finally:
        signal.alarm(0)
        try:
            w.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    log("done, world stopped")
    print(json.dumps(res, indent=1, default=str))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
