#!/usr/bin/python3
"""The maintenance operations at scale: wall time, catalog requests, storage
I/O and the pool worker's peak memory of snapshot-expiry, orphan-cleanup and
manifest-rewrite, side by side with the manifest decoder's own throughput.

Usage: bench/ops_bench.py [--small] [--snapshots N] [--data-files N]
                          [--orphans N] [--manifests N] [--manifest-entries N]
                          [--plan] [--no-decoder] [--verify] [--deadline S]
                          [--json PATH]

One throwaway world on 127.0.0.1 / a Unix socket: a PostgreSQL 15 cluster
with tms (pool of 4 workers) and the test REST catalog
(test/catalog/server.py), whose pointers live in the cluster's database.
Tables are file:// (the orphan listing is a directory walk).

Tables (test/fixtures/synth.py through bench/purge_bench.py's fast writer;
every loop bounded by the sizes given):
  expiry    --snapshots snapshots (default 1,000) and --data-files data files
            (default 1,000,000; metadata only), one manifest per snapshot;
            expired with retain-last 10: the 990 oldest snapshots go with
            their manifest lists
  orphans   --orphans listed objects (default 1,000,000): half a table's
            data files (empty files), half planted empty orphans, everything
            backdated 10 days; the cleanup (default older-than, 3 days)
            deletes the orphans and keeps every reachable file
  rewrite   --manifests small manifests (default 1,000) of
            --manifest-entries entries (default 10) in one snapshot; the
            rewrite turns them into a few

Each operation runs through tms.run_operation(..., engine => 'local') and is
awaited in tms.maintenance_jobs.  Measured per run:
  wall_s         finished_at - started_at of the job (server clock) and the
                 client's time from run_operation to the terminal state
  catalog        the catalog's /admin/requests counts while the job ran
                 (METHOD path -> {status: n}) and their total
  storage        /proc/<pid>/io of the worker that ran the job: read and
                 write syscalls and bytes (local storage has no requests to
                 count; deletes are files_deleted)
  memory         VmHWM (peak RSS, kB) of that worker, reset with clear_refs
                 before the run, next to its RSS before; the worker is found
                 in tms.scheduled_tasks / tms.workers while the job runs
  counters       the job row: snapshots_expired, files_deleted,
                 bytes_deleted, orphans_found, manifests_rewritten/added
With --plan, tms.plan_operation is timed first (it returns one row per file
to delete: the client holds them all).  In the same run, unless
--no-decoder, bench/iceberg_manifest_bench.sh decodes a table of
--data-files entries (10,000 per manifest) with src/iceberg's decoder,
avro-c and icebird, and its output is reported verbatim.

--small: 100 snapshots, 10,000 data files, 10,000 orphans, 100 manifests:
a quick check that the script and the API work (a minute or two).
Everything is bounded by --deadline (SIGALRM) and stopped in `finally`.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "test"))
sys.path.insert(0, os.path.join(REPO, "test", "fixtures"))
sys.path.insert(0, os.path.join(REPO, "test", "catalog"))
sys.path.insert(0, HERE)

import world  # noqa: E402
import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402
import purge_bench  # noqa: E402  (make_table: synth with a fast file writer)

SERVER = "opsbench"
NS = "bench"
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")
DAY = 86400
T0 = time.monotonic()


def log(msg):
    print("[%7.1f s] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

class World:
    def __init__(self, root):
        self.root = root
        self.pg = self.catalog = self.conn = None
        self.file_root = os.path.join(root, "files")
        os.makedirs(self.file_root)
        os.chmod(root, 0o755)
        os.chmod(self.file_root, 0o755)

    def start(self):
        self.pg = Cluster(os.path.join(self.root, "pg", "data"),
                          settings=dict(FAST_WORKERS, log_min_messages="warning"))
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.pg.psql("CREATE EXTENSION tms")
        self.catalog = world.CatalogServer(self.pg.dsn(), "file://%s/wh" % self.file_root,
                                           catalog_name="opsb_%s" % uuid.uuid4().hex[:6],
                                           file_root=self.file_root)
        self.pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                        uri '%s', request_timeout '60s', relative_path_root '%s',
                        allowed_locations 'file://%s/');
                      CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                     % (SERVER, self.catalog.uri, self.file_root, self.file_root, SERVER))
        wait_for(lambda: self.pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                      " AND state = 'idle'") != "0", timeout=60,
                 what="the worker pool")
        self.conn = self.pg.connect()

    def stop(self):
        if self.catalog is not None:
            try:
                self.catalog.stop()
            except Exception as e:           # noqa: BLE001 -- stop the cluster anyway
                log("stopping the catalog: %s" % e)
        if self.pg is not None:
            self.pg.destroy()

    def q(self, sql, args=None):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None

    def register(self, name, metadata_location):
        self.catalog.register(NS, name, metadata_location)


# ---------------------------------------------------------------------------
# measuring one job
# ---------------------------------------------------------------------------

def proc_file(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name)) as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def status_kb(pid):
    out = {}
    for line in proc_file(pid, "status").splitlines():
        k, _, v = line.partition(":")
        if k in ("VmHWM", "VmRSS", "RssAnon"):
            out[k] = int(v.split()[0])
    return out


def io_counters(pid):
    out = {}
    for line in proc_file(pid, "io").splitlines():
        k, _, v = line.partition(":")
        if k in ("syscr", "syscw", "rchar", "wchar", "read_bytes", "write_bytes"):
            out[k] = int(v)
    return out


def pool_pids(w):
    return [r[0] for r in w.q("SELECT pid FROM tms.workers WHERE role = 'worker'")]


def job_pid(w, jid):
    """The worker running the job, if one does now."""
    rows = w.q("SELECT s.picked_pid FROM tms.scheduled_tasks s"
               " JOIN tms.table_maintenance_job j ON s.task_name = j.task_kind"
               "  AND s.task_instance = j.task_instance"
               " WHERE j.id = %s AND s.picked AND s.picked_pid IS NOT NULL", (jid,))
    if rows:
        return rows[0][0]
    rows = w.q("SELECT w.pid FROM tms.workers w JOIN tms.table_maintenance_job j"
               " ON w.current_task = j.task_kind || '/' || j.task_instance WHERE j.id = %s",
               (jid,))
    return rows[0][0] if rows else None


JOB_COLS = ("state", "attempts", "last_error", "started_at", "finished_at",
            "snapshots_expired", "manifests_rewritten", "manifests_added", "files_deleted",
            "bytes_deleted", "orphans_found")


def job_row(w, jid):
    rows = w.q("SELECT %s, extract(epoch FROM finished_at - started_at)::float8"
               " FROM tms.maintenance_jobs WHERE id = %%s" % ", ".join(JOB_COLS), (jid,))
    r = rows[0]
    d = dict(zip(JOB_COLS, r[:-1]))
    d["server_wall_s"] = r[-1]
    return d


def run_op(w, label, name, op, options, timeout, plan=False):
    """Run one operation on table `name` and measure it (see the module
    comment).  Returns the figures."""
    res = {"label": label, "operation": op, "options": options}
    if plan:
        t = time.monotonic()
        rows = w.q("SELECT action, count(*) FROM tms.plan_operation(%s, %s, %s, %s, %s::jsonb)"
                   " GROUP BY 1 ORDER BY 1", (SERVER, NS, name, op, json.dumps(options)))
        res["plan_s"] = round(time.monotonic() - t, 3)
        res["plan_rows"] = dict(rows)
        log("%s: plan %.2f s %s" % (label, res["plan_s"], res["plan_rows"]))
    pids = pool_pids(w)
    before = {}
    for pid in pids:
        try:
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")                 # VmHWM := the current RSS
        except OSError:
            pass
        before[pid] = (status_kb(pid), io_counters(pid))
    w.catalog.reset_requests()
    t = time.monotonic()
    jid = w.q("SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb, 'local')",
              (SERVER, NS, name, op, json.dumps(options)))[0][0]
    owner = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:       # bounded: the job's timeout
        if owner is None:
            owner = job_pid(w, jid)
        st = w.q("SELECT state FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0][0]
        if st in TERMINAL:
            break
        time.sleep(0.02)
    else:
        raise TimeoutError("%s: job %d did not finish in %d s" % (label, jid, timeout))
    res["client_wall_s"] = round(time.monotonic() - t, 3)
    res["job"] = {k: (str(v) if k in ("started_at", "finished_at") else v)
                  for k, v in job_row(w, jid).items()}
    reqs = w.catalog.requests()
    res["catalog_requests"] = {"total": reqs["total"], "counts": reqs["counts"]}
    mem = {}
    for pid in pids:
        s, io = status_kb(pid), io_counters(pid)
        mem[pid] = {"rss_before_kb": before[pid][0].get("VmRSS"), "vmhwm_kb": s.get("VmHWM"),
                    "io": {k: io.get(k, 0) - before[pid][1].get(k, 0) for k in io}}
    res["worker_pid"] = owner
    if owner in mem:
        res["worker"] = mem[owner]
    res["pool_max_vmhwm_kb"] = max((m["vmhwm_kb"] or 0) for m in mem.values()) if mem else None
    log("%s: %s in %.2f s (server %.2f s), catalog requests %d, worker VmHWM %s kB (pool max %s),"
        " io %s, counters %s" % (
            label, res["job"]["state"], res["client_wall_s"], res["job"]["server_wall_s"] or -1,
            reqs["total"], res.get("worker", {}).get("vmhwm_kb"), res["pool_max_vmhwm_kb"],
            res.get("worker", {}).get("io"),
            {k: res["job"][k] for k in ("snapshots_expired", "files_deleted", "bytes_deleted",
                                        "orphans_found", "manifests_rewritten",
                                        "manifests_added")}))
    if res["job"]["state"] != "succeeded":
        log("%s: job ended %s: %s" % (label, res["job"]["state"], res["job"]["last_error"]))
    return res


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

def timed(gen, label, fn, *args, **kw):
    t = time.monotonic()
    out = fn(*args, **kw)
    gen[label] = round(time.monotonic() - t, 2)
    log("generate %s: %.1f s" % (label, gen[label]))
    return out


def expiry_table(w, snapshots, data_files):
    """snapshots snapshots sharing data_files data files (metadata only),
    one manifest per snapshot."""
    loc = os.path.join(w.file_root, "expiry")
    per = max(1, -(-data_files // snapshots))
    out = purge_bench.make_table(loc, data_files, 0, snapshots=snapshots, no_data=True,
                                 single_metadata=True, per_manifest=per)
    w.register("expiry", out["metadata_location"])
    return out


def orphan_table(w, listed):
    """A table whose data files are half of `listed` (empty files), plus as
    many planted empty orphans; everything backdated 10 days."""
    loc = os.path.join(w.file_root, "orphans")
    half = listed // 2
    out = purge_bench.make_table(loc, half, 0, snapshots=10, per_manifest=10000)
    w.register("orphans", out["metadata_location"])
    old = time.time() - 10 * DAY
    per_dir = 1000
    planted = 0
    for d in range(-(-(listed - half) // per_dir)):          # bounded by `listed`
        dpath = os.path.join(loc, "data", "orphans", "d%05d" % d)
        os.makedirs(dpath, exist_ok=True)
        for i in range(min(per_dir, listed - half - planted)):
            p = os.path.join(dpath, "o%07d.parquet" % (d * per_dir + i))
            with open(p, "wb"):
                pass
            os.utime(p, (old, old))
            planted += 1
    aged = 0
    for dpath, _, names in os.walk(loc):                      # bounded by the tree
        for n in names:
            os.utime(os.path.join(dpath, n), (old, old))
            aged += 1
    purge_bench.give_dirs_to_server(loc)
    out["planted_orphans"] = planted
    out["listed"] = aged
    return out


def rewrite_table(w, manifests, entries):
    loc = os.path.join(w.file_root, "rewrite")
    out = purge_bench.make_table(loc, manifests * entries, 0, snapshots=1, no_data=True,
                                 per_manifest=entries)
    w.register("rewrite", out["metadata_location"])
    return out


# ---------------------------------------------------------------------------
# the decoder, in the same run
# ---------------------------------------------------------------------------

def decoder_bench(root, files, per, timeout):
    """bench/iceberg_manifest_bench.sh on a table of `files` entries, its
    output verbatim (or why it could not run)."""
    d = os.path.join(root, "decoder-table")
    t = time.monotonic()
    try:
        r = subprocess.run(["sh", os.path.join(HERE, "iceberg_manifest_bench.sh"), str(files),
                            str(per), d], cwd=REPO, capture_output=True, text=True,
                           timeout=timeout)
        out = {"exit": r.returncode, "stdout": r.stdout, "stderr": r.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        out = {"exit": None, "stdout": "", "stderr": "timed out after %d s" % timeout}
    out["seconds"] = round(time.monotonic() - t, 1)
    log("decoder bench (%d entries, %d per manifest): exit %s in %.1f s\n%s" % (
        files, per, out["exit"], out["seconds"], out["stdout"] or out["stderr"]))
    return out


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="a quick run with small tables")
    p.add_argument("--snapshots", type=int, help="snapshots of the expiry table (1,000)")
    p.add_argument("--data-files", type=int, help="data files of the expiry table (1,000,000)")
    p.add_argument("--orphans", type=int, help="objects listed by the orphan cleanup (1,000,000)")
    p.add_argument("--manifests", type=int, help="small manifests to rewrite (1,000)")
    p.add_argument("--manifest-entries", type=int, default=10, help="entries per small manifest")
    p.add_argument("--retain-last", type=int, default=10)
    p.add_argument("--plan", action="store_true", help="also time tms.plan_operation")
    p.add_argument("--no-decoder", action="store_true", help="skip iceberg_manifest_bench.sh")
    p.add_argument("--verify", action="store_true",
                   help="check the results with test/opsworld.py (reads every manifest)")
    p.add_argument("--job-timeout", type=int, default=1800)
    p.add_argument("--deadline", type=int, default=5400, help="abort after this many seconds")
    p.add_argument("--json", help="also write the results here")
    opts = p.parse_args()
    small = opts.small
    snapshots = opts.snapshots or (100 if small else 1000)
    data_files = opts.data_files or (10000 if small else 1000000)
    orphans = opts.orphans or (10000 if small else 1000000)
    manifests = opts.manifests or (100 if small else 1000)
    for n, what in ((snapshots, "snapshots"), (data_files, "data files"), (orphans, "orphans"),
                    (manifests, "manifests"), (opts.manifest_entries, "entries")):
        if not 1 <= n <= 10000000:
            p.error("%s must be between 1 and 10,000,000" % what)
    if opts.retain_last >= snapshots:
        p.error("--retain-last must be below --snapshots")

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    def on_term(signum, frame):
        raise SystemExit("terminated")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(opts.deadline)

    root = tempfile.mkdtemp(prefix="tms-ops-bench-", dir="/tmp")
    w = World(root)
    gen = {}
    results = {"opts": dict(vars(opts), snapshots=snapshots, data_files=data_files,
                            orphans=orphans, manifests=manifests),
               "generate_s": gen, "runs": []}
    try:
        w.start()
        log("world up")
        st = ow.storage(file_root=w.file_root)

        # ---- snapshot-expiry -------------------------------------------------
        ex = timed(gen, "expiry: %d snapshots, %d data files" % (snapshots, data_files),
                   expiry_table, w, snapshots, data_files)
        r = run_op(w, "snapshot-expiry", "expiry", "snapshot-expiry",
                   {"older-than": "1 second", "retain-last": opts.retain_last},
                   opts.job_timeout, opts.plan)
        r["table"] = {"snapshots": ex["snapshots"], "manifests": ex["manifests"],
                      "data_files": ex["data_files"]}
        _, meta = ow.load(w.catalog, NS, "expiry")
        r["check"] = {"snapshots_left": len(meta["snapshots"]),
                      "expected": opts.retain_last}
        results["runs"].append(r)

        # ---- orphan-cleanup --------------------------------------------------
        orp = timed(gen, "orphans: %d listed objects" % orphans, orphan_table, w, orphans)
        r = run_op(w, "orphan-cleanup", "orphans", "orphan-cleanup", {}, opts.job_timeout,
                   opts.plan)
        r["table"] = {"listed": orp["listed"], "planted_orphans": orp["planted_orphans"],
                      "data_files": orp["data_files"]}
        left = sum(len(fs) for _, _, fs in os.walk(os.path.join(w.file_root, "orphans", "data",
                                                                "orphans")))
        r["check"] = {"orphans_left": left, "files_deleted": r["job"]["files_deleted"],
                      "expected_deleted": orp["planted_orphans"]}
        results["runs"].append(r)

        # ---- manifest-rewrite ------------------------------------------------
        rw = timed(gen, "rewrite: %d manifests of %d" % (manifests, opts.manifest_entries),
                   rewrite_table, w, manifests, opts.manifest_entries)
        before = None
        if opts.verify:
            before = ow.live_set(ow.live_files(st, ow.load(w.catalog, NS, "rewrite")[1]))
        r = run_op(w, "manifest-rewrite", "rewrite", "manifest-rewrite", {}, opts.job_timeout,
                   opts.plan)
        _, meta = ow.load(w.catalog, NS, "rewrite")
        cur = ow.snapshot(meta, meta["current-snapshot-id"])
        r["table"] = {"manifests": rw["manifests"], "data_files": rw["data_files"]}
        r["check"] = {"manifests_after": len(ow.manifest_records(st, cur))}
        if before is not None:
            r["check"]["live_entries_equal"] = ow.live_set(ow.live_files(st, meta)) == before
        results["runs"].append(r)

        if opts.verify:
            _, meta = ow.load(w.catalog, NS, "expiry")
            results["runs"][0]["check"]["content_files_present"] = all(
                st.exists(p) for p, k in ow.content_files(st, meta).items() if k != "data")
    finally:
        signal.alarm(0)
        try:
            w.stop()
        except Exception as e:               # noqa: BLE001 -- still remove the files
            log("stopping the world: %s" % e)

    # ---- the decoder, same machine, same run ---------------------------------
    if not opts.no_decoder:
        results["decoder"] = decoder_bench(root, data_files, min(10000, data_files),
                                           max(60, opts.deadline // 3))
    shutil.rmtree(root, ignore_errors=True)
    log("done, world stopped")
    print(json.dumps(results, indent=1, default=str))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
