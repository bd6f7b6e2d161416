#!/usr/bin/python3
"""Deletes against a storage that throttles, and the delete pool shared by
purges: the adaptive window (AIMD) against a fixed one and the unthrottled
limit; several requests in flight against one; two purges at once.

Usage: bench/delete_bench.py [--files N] [--batch N] [--rate R] [--latency-ms N]
                             [--share-files N] [--deadline SECONDS] [--json FILE]

One throwaway world on 127.0.0.1 / a Unix socket: PostgreSQL 15 with tms
(4 pool workers, tms.delete_concurrency 4, tms.purge_delete_batch_size
--batch), s3rver, the test world's S3 gate in front of it
(test/s3gate/server.py), and the test REST catalog vending the gate as the
S3 endpoint.  Every table is synthetic (test/fixtures/synth.py: 4
snapshots, 500 data files per manifest, identity partitions of 250 data
files, real 16-byte objects written straight to s3rver), purged with
tms.purge_table(), one job at a time unless said otherwise.

Runs, in one world:
  unthrottled   the gate forwards everything: what the storage takes
  aimd          the gate takes --rate DeleteObjects a second (a token bucket,
                burst 2) and answers 503 SlowDown beyond; tms.delete_adaptive on
  fixed         the same gate, tms.delete_adaptive off: every job keeps its
                share of tms.delete_concurrency, a refused request backs off
                alone (doubling, as an SDK's standard retries do)
  concurrency   the gate holds every DeleteObjects --latency-ms (a round trip
                to a remote S3): tms.delete_concurrency 1 against 4
  sharing       the same latency, two purges of --share-files files started
                together: each job's requests while both ran, and the time of
                the two against one alone
Per purge: files/s = files_deleted / (finished_at - started_at) of the job
row; the requests, refusals and refused share per third of the job's
DeleteObjects come from the gate's log.

Everything is bounded by --deadline (SIGALRM) and stopped in `finally`.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))

import world  # noqa: E402
from pgcluster import Cluster, wait_for  # noqa: E402

BUCKET = "warehouse"
SERVER = "benchcat"
PER_PARTITION = 250
T0 = time.monotonic()


def log(msg):
    print("[%7.1f s] %s" % (time.monotonic() - T0, msg), file=sys.stderr, flush=True)


class World:
    def __init__(self, root, batch):
        self.root = root
        self.batch = batch
        self.pg = self.s3 = self.gate = self.catalog = None

    def start(self):
        self.pg = Cluster(os.path.join(self.root, "pg", "data"), settings={
            "tms.naptime": "'50ms'", "tms.heartbeat_interval": "'500ms'",
            "tms.purge_concurrency": "2", "tms.delete_concurrency": "4",
            "tms.purge_delete_batch_size": str(self.batch),
            "log_min_messages": "warning"})
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.pg.psql("CREATE EXTENSION tms")
        self.s3 = world.S3Server(buckets=[BUCKET])
        self.gate = world.S3Gate(self.s3)
        self.catalog = world.CatalogServer(self.pg.dsn(), "file://%s/wh" % self.root,
                                           catalog_name="db_%s" % uuid.uuid4().hex[:6],
                                           s3=self.gate.config(), file_root=self.root)
        self.pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                        uri '%s', s3_endpoint '%s', request_timeout '60s',
                        allowed_locations 's3://%s/');
                      CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                     % (SERVER, self.catalog.uri, self.gate.endpoint, BUCKET, SERVER))
        wait_for(lambda: self.pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                      " AND state = 'idle'") != "0", timeout=60,
                 what="the worker pool")
        self.conn = self.pg.connect()

    def stop(self):
        for what in (self.catalog, self.gate, self.s3):
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

    def table(self, files):
        """A registered synthetic table; (name, key prefix, seconds to write)."""
        name = "t_%s" % uuid.uuid4().hex[:10]
        prefix = "bench/%s" % name
        t0 = time.monotonic()
        out = world.synth_table(
            ["--out", "s3://%s/%s" % (BUCKET, prefix), "--data-files", str(files),
             "--snapshots", "4", "--files-per-manifest", "500",
             "--partitions", str(max(1, files // PER_PARTITION)), "--file-size", "16",
             "--list-files"], s3=self.s3)
        self.catalog.register("bench", name, out["metadata_location"])
        secs = time.monotonic() - t0
        log("wrote table %s: %d files in %.0f s" % (name, len(out["files"]), secs))
        return name, prefix, secs

    def purge(self, name):
        return self.q("SELECT tms.purge_table(%s, 'bench', %s)", (SERVER, name))[0][0]

    def wait(self, job, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.q("SELECT state, last_error, attempts, files_deleted, delete_requests,"
                         " extract(epoch FROM finished_at - started_at)"
                         " FROM tms.iceberg_cleanup_job WHERE id = %s", (job,))[0]
            if row[0] in ("SUCCEEDED", "FAILED"):
                if row[0] != "SUCCEEDED":
                    raise RuntimeError("job %d %s: %s" % (job, row[0], row[1]))
                return {"attempts": row[2], "files": row[3], "delete_requests": row[4],
                        "run_s": float(row[5])}
            time.sleep(0.1)
        raise TimeoutError("job %d still running after %d s" % (job, timeout))

    def left(self, prefix):
        return self.s3.client().list(BUCKET, prefix + "/")


def deletes_of(log_entries, prefix):
    return [e for e in log_entries if e["kind"] == "delete" and
            (e["first_key"] or "").startswith(prefix + "/")]


def refused(entries):
    return sum(e["outcome"] in ("throttled", "keys-throttled") for e in entries)


def shares_by_third(entries):
    n = len(entries)
    parts = (entries[:n // 3], entries[n // 3:n - n // 3], entries[n - n // 3:])
    return [round(100.0 * refused(p) / len(p), 1) if p else None for p in parts]


def purge_run(w, label, files, timeout):
    name, prefix, gen = w.table(files)
    w.gate.reset_log()
    t0 = time.monotonic()
    r = w.wait(w.purge(name), timeout)
    r["wall_s"] = time.monotonic() - t0
    ent = deletes_of(w.gate.log(), prefix)
    r.update(label=label, generate_s=gen, gate_requests=len(ent), refused=refused(ent),
             refused_share_by_third=shares_by_third(ent),
             files_per_s=r["files"] / r["run_s"] if r["run_s"] > 0 else None)
    left = w.left(prefix)
    if left:
        raise RuntimeError("%s: %d objects left, e.g. %s" % (label, len(left), left[:3]))
    log("%s: %d files in %.1f s (%.0f files/s), %d DeleteObjects, %d refused, "
        "refused by third %s %%" % (label, r["files"], r["run_s"], r["files_per_s"],
                                   r["gate_requests"], r["refused"],
                                   r["refused_share_by_third"]))
    return r


def sharing_run(w, files, timeout):
    a, b = w.table(files), w.table(files)
    w.set_conf(enabled="off")
    wait_for(lambda: w.q("SELECT count(*) FROM tms.workers WHERE state = 'disabled'")[0][0]
             == 5, what="the pool to stop claiming")
    w.gate.reset_log()
    ja, jb = w.purge(a[0]), w.purge(b[0])
    t0 = time.monotonic()
    w.set_conf(enabled="on")
    ra, rb = w.wait(ja, timeout), w.wait(jb, timeout)
    both_wall = time.monotonic() - t0
    log_entries = w.gate.log()
    ea, eb = deletes_of(log_entries, a[1]), deletes_of(log_entries, b[1])
    start, end = max(ea[0]["t"], eb[0]["t"]), min(ea[-1]["t"], eb[-1]["t"])
    na = sum(start <= e["t"] <= end for e in ea)
    nb = sum(start <= e["t"] <= end for e in eb)
    res = {"files_each": files, "job_a": ra, "job_b": rb, "both_wall_s": both_wall,
           "overlap_s": end - start, "requests_in_overlap": [na, nb],
           "share_a_pct": round(100.0 * na / (na + nb), 1) if na + nb else None}
    log("sharing: both done in %.1f s; while both ran (%.1f s) %d and %d requests "
        "(%.1f %% / %.1f %%)" % (both_wall, end - start, na, nb, res["share_a_pct"],
                                 100 - res["share_a_pct"]))
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=20000, help="data files per throttled table")
    p.add_argument("--batch", type=int, default=100, help="tms.purge_delete_batch_size")
    p.add_argument("--rate", type=float, default=10, help="DeleteObjects/s the gate takes")
    p.add_argument("--latency-ms", type=int, default=50,
                   help="added to each DeleteObjects in the concurrency and sharing runs")
    p.add_argument("--share-files", type=int, default=10000)
    p.add_argument("--deadline", type=int, default=1800)
    p.add_argument("--json", help="also write the results here")
    opts = p.parse_args()

    def on_alarm(signum, frame):
        raise TimeoutError("bench deadline of %d s reached" % opts.deadline)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit("terminated"))
    signal.alarm(opts.deadline)
    root = tempfile.mkdtemp(prefix="tms-delete-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    w = World(root, opts.batch)
    res = {"opts": vars(opts), "runs": []}
    timeout = max(300, int(4 * opts.files / opts.batch / opts.rate))
    try:
        w.start()
        log("world up")
        res["runs"].append(purge_run(w, "unthrottled", opts.files, timeout))
        w.gate.throttle(rate=opts.rate, burst=2, mode="request")
        res["runs"].append(purge_run(w, "aimd", opts.files, timeout))
        w.set_conf(delete_adaptive="off")
        res["runs"].append(purge_run(w, "fixed", opts.files, timeout))
        w.set_conf(delete_adaptive="on")
        w.gate.unthrottle()
        res["limit_files_per_s"] = opts.rate * opts.batch
        w.gate.delay(opts.latency_ms / 1000.0, count=10 ** 9)
        w.set_conf(delete_concurrency=1)
        res["runs"].append(purge_run(w, "latency %d ms, concurrency 1" % opts.latency_ms,
                                     opts.share_files, timeout))
        w.set_conf(delete_concurrency=4)
        res["runs"].append(purge_run(w, "latency %d ms, concurrency 4" % opts.latency_ms,
                                     opts.share_files, timeout))
        res["sharing"] = sharing_run(w, opts.share_files, timeout)
        w.gate.undelay()
    finally:
        signal.alarm(0)
        try:
            w.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    log("done, world stopped")
    print(json.dumps(res, indent=1))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
