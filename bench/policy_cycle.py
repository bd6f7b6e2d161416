#!/usr/bin/python3
"""
policy_cycle.py -- one policy evaluation over N registered tables of which
1% changed: time of the refresh (one conditional load per table), of the
candidate query and of the evaluation, and the catalog requests made;
against the naive plan of evaluating every table.  With --memory, the
memory of the process that runs the policy instead.

    /usr/bin/python3 bench/policy_cycle.py [--tables 100000] [--changed-pct 1]
                                          [--naive-sample 2000] [--pool-size N]
                                          [--latency-ms L] [--page-size P]
    /usr/bin/python3 bench/policy_cycle.py --memory [--tables N] [--page-size 1000]

Starts its own PostgreSQL cluster (tms preloaded) and REST catalog test
server, both on 127.0.0.1 / a Unix socket; the tables are pointers inserted
straight into the catalog's JDBC table (all sharing one synthetic Iceberg
table of 5 data files), and the changed ones are moved to a version with
one more commit.  --page-size sets the server option page_size (the
pageSize tms sends with listings); without it tms sends none and the test
catalog pages by 100.

Timing (default): tms.evaluate_now in a backend, which runs the same code
as the policy-expand task, with the per-phase figures of its DEBUG1 line.
The worker pool is switched off (tms.enabled = off) so that the maintenance
tasks the evaluation submits do not run on the same two cores during the
measurement.  A run stops if any evaluation failed (its figures would
measure the failures).

Memory (--memory): for the discovery (every table new), an unchanged
refresh, one with 1% changed, and the first run of a catch-up rule (an
unchanged refresh, then every table a candidate and evaluated), the peak
RSS growth of the process that runs the policy, (a) a backend in
tms.evaluate_now and (b) the pool worker that runs the policy's
policy-expand task (one pool worker; the task's holder is checked with
tms.workers.current_task), and the supervisor's RSS (it must not move):
/proc/<pid>/clear_refs resets VmHWM just before the run, and the peak of
RssAnon (private memory; VmHWM also counts the shared buffers the run
touched) is sampled every 10 ms.  Each backend run is a fresh backend
warmed by an evaluation of a 10-table policy on the same server, and the
pool worker is warmed the same way once, so the growth is the run's own
(in the pool worker, memory an earlier run freed is reused without showing
as growth).  Also measured: tms.list_tables() over the same namespace (a
listing collected whole), and the physical floor: the listing's bytes on
the wire, fetched page by page.  The rules' condition is false in this
mode, so nothing is submitted.  The pool worker's runs are timed from
activation to the end of the task; their phase figures come from the same
DEBUG1 line in the server log (log_min_messages = debug1 in this mode).

Prints the figures as JSON and a short table.  See bench/README.md,
"Policies".  Every wait is bounded; everything is stopped in `finally`.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))

import psycopg2  # noqa: E402

import synth  # noqa: E402
import world  # noqa: E402
from pgcluster import Cluster, fetch as q  # noqa: E402

STATS = re.compile(r'refresh ([\d.]+) ms \((\d+) catalog requests\), candidate query ([\d.]+) ms '
                   r'\((\d+) candidates\), evaluation ([\d.]+) ms \((\d+) catalog requests\)')

# the candidate query of src/ops/policy_evaluate.c (candidates_step), first batch
CANDIDATE_SQL = ("SELECT b.rule_id, b.table_id, t.namespace, t.table_name, r.operation,"
                 "       r.condition, t.commits - b.base_commits, t.bytes_added - b.base_bytes,"
                 "       (extract(epoch FROM least(now() - b.since,"
                 "                                 interval '100000 years')) * 1000)::bigint"
                 "  FROM tms.maintenance_rules r"
                 "  JOIN tms.rule_baselines b ON b.rule_id = r.id"
                 "  JOIN tms.tables t ON t.id = b.table_id"
                 " WHERE r.policy_id = (SELECT id FROM tms.maintenance_policies WHERE name = 'bench')"
                 "   AND b.pending_job IS NULL"
                 "   AND (b.triggered OR b.due_at <= now()) AND t.dropped_at IS NULL"
                 "   AND (b.rule_id, b.table_id) > (0, 0)"
                 " ORDER BY b.rule_id, b.table_id LIMIT 64")


def parse_stats(text):
    """The figures of a run's DEBUG1 line, or None."""
    m = STATS.search(text)
    if not m:
        return None
    return {"refresh_ms": float(m.group(1)), "refresh_requests": int(m.group(2)),
            "candidate_query_ms": float(m.group(3)), "candidates": int(m.group(4)),
            "evaluation_ms": float(m.group(5)), "evaluation_requests": int(m.group(6))}


def run_cycle(conn, policy):
    """tms.evaluate_now with the run's DEBUG1 figures; returns a dict."""
    del conn.notices[:]
    q(conn, "SET client_min_messages = debug1")
    t0 = time.time()
    rows = q(conn, "SELECT decision, explanation FROM tms.evaluate_now(%s, force => true)",
             (policy,))
    wall = (time.time() - t0) * 1000
    q(conn, "SET client_min_messages = notice")
    for n in conn.notices:
        st = parse_stats(n)
        if st and '"%s"' % policy in n:
            st.update({"wall_ms": round(wall, 1), "evaluated": len(rows),
                       "submitted": sum(1 for r in rows if r[0] == "submitted")})
            failed = [r for r in rows if r[0] == "failed"]
            if failed:
                raise RuntimeError("%d of %d evaluations failed, e.g.: %s"
                                   % (len(failed), len(rows), failed[0][1]))
            return st
    raise RuntimeError("no run statistics in %r" % conn.notices)


def load_counts(catalog, ns):
    ok = nm = 0
    for r in catalog.requests()["requests"]:
        if r["method"] == "GET" and "/namespaces/%s/tables/" % ns in r["path"]:
            ok += r["status"] == 200
            nm += r["status"] == 304
    return ok, nm


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

class World:
    """A cluster with tms, the catalog's database and the REST test catalog,
    one synthetic table and a version of it with one more commit."""

    def __init__(self, root, settings):
        self.root = root
        self.cluster = Cluster(os.path.join(root, "pg", "data"), settings=settings)
        self.catalog = None
        self.files = os.path.join(root, "files")

    def start(self):
        c = self.cluster
        c.init()
        c.start()
        c.create_database()
        c.psql("CREATE DATABASE iceberg_catalog")
        os.makedirs(self.files)
        os.chmod(self.files, 0o755)
        self.catalog = world.CatalogServer(c.dsn("iceberg_catalog"), "file://%s/wh" % self.files,
                                           catalog_name="bench", file_root=self.files)
        loc = "file://%s/base" % self.files
        res = synth.generate(synth.build_parser().parse_args(
            ["--out", loc, "--data-files", "5", "--snapshots", "1", "--no-data-bytes",
             "--single-metadata", "--codec", "null", "--seed", "1"]))
        self.base = res["metadata_location"]
        self.catalog.register("proto", "t", self.base)
        meta = self.catalog.load_table("proto", "t")["metadata"]
        snap = meta["snapshots"][-1]
        new_id = 4242424242
        self.catalog.request("POST", "namespaces/proto/tables/t", {
            "requirements": [], "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": new_id, "parent-snapshot-id": snap["snapshot-id"],
                    "sequence-number": meta.get("last-sequence-number", 0) + 1,
                    "timestamp-ms": int(time.time() * 1000), "manifest-list": snap["manifest-list"],
                    "summary": {"operation": "append", "added-files-size": "1048576"},
                    "schema-id": snap.get("schema-id", 0)}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": new_id}]})
        self.changed_loc = self.catalog.load_table("proto", "t")["metadata-location"]
        self.cat = psycopg2.connect(c.dsn("iceberg_catalog"))
        self.cat.autocommit = True

    def connect(self):
        conn = psycopg2.connect(self.cluster.dsn())
        conn.autocommit = True
        return conn

    def add_tables(self, ns, n):
        """n pointers to the synthetic table in namespace ns."""
        self.catalog.create_namespace(ns)
        q(self.cat, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
                    " metadata_location, iceberg_type)"
                    " SELECT 'bench', %s, 't' || lpad(g::text, 6, '0'), %s, 'TABLE'"
                    "   FROM generate_series(1, %s) g", (ns, self.base, n))

    def change(self, ns, n, pct):
        """Move pct% of the n tables of ns, evenly spread, to the new version."""
        nchanged = int(n * pct / 100)
        q(self.cat, "UPDATE iceberg_tables SET metadata_location = %s WHERE catalog_name = 'bench'"
                    " AND table_namespace = %s AND table_name IN"
                    " (SELECT 't' || lpad(g::text, 6, '0') FROM generate_series(1, %s, %s) g)",
          (self.changed_loc, ns, n, max(1, n // max(nchanged, 1))))
        return nchanged

    def create_server(self, conn, page_size):
        # allowed_locations: the evaluations read manifest lists under it
        opts = "uri %s, relative_path_root %s, allowed_locations %s, request_timeout '60s'"
        args = ["http://127.0.0.1:%d" % self.catalog.port, self.files, "file://%s/" % self.files]
        if page_size:
            opts += ", page_size %s"
            args.append(str(page_size))
        q(conn, "CREATE SERVER bench FOREIGN DATA WRAPPER tms_iceberg OPTIONS (%s)" % opts, args)
        q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER bench")

    def stop(self):
        if self.catalog:
            self.catalog.stop()
        self.cluster.stop()


def policy(conn, name, ns, condition, baseline_mode="going-forward"):
    """An inactive policy `name` on a group `name` over namespace ns, with
    one rule: commits-added 1 and the condition."""
    q(conn, "SELECT tms.create_object_group(%s, server => 'bench', namespace_pattern => %s)",
      (name, ns))
    q(conn, "SELECT tms.create_policy(%s, %s, active => false)", (name, name))
    q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}',"
            " %s, %s)", (name, condition, baseline_mode))


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

def timing(w, args):
    w.add_tables("bench", args.tables)
    w.add_tables("naive", args.naive_sample)
    catalog = w.catalog
    conn = w.connect()
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    w.create_server(conn, args.page_size)
    policy(conn, "bench", "bench", "dataFiles > 3 AND avgDataFileSize < 128MB")
    out = {"tables": args.tables,
           "pool_size": int(q(conn, "SHOW tms.evaluation_pool_size")[0][0]),
           "latency_ms": args.latency_ms, "page_size": args.page_size}
    if args.latency_ms > 0:
        # every load of a table waits this long in the server's handler
        # thread (ThreadingHTTPServer: concurrent waits overlap)
        catalog.fault(r"/namespaces/(bench|naive)/tables/t", action="hang",
                      seconds=args.latency_ms / 1000.0, count=10 ** 9, method="GET")

    # every process of the cluster, for the private memory each phase adds
    procs = dict(q(conn, "SELECT pid, CASE WHEN pid = pg_backend_pid() THEN 'the cycle''s backend'"
                         " WHEN backend_type = 'client backend' AND application_name = ''"
                         " THEN 'client backend (the test catalog''s)'"
                         " ELSE backend_type || coalesce(' ' || nullif(application_name, ''), '')"
                         " END FROM pg_stat_activity"))
    out["process_memory"] = {}

    def phase(name):
        catalog.reset_requests()
        out[name], fig = measured(list(procs), lambda: run_cycle(conn, "bench"))
        out[name]["loads_200_304"] = load_counts(catalog, "bench")
        out["process_memory"][name] = sorted(
            ({"pid": pid, "process": procs[pid], "anon_growth_kb": f["anon_growth_kb"],
              "anon_peak_kb": f["anon_peak_kb"]} for pid, f in fig.items()),
            key=lambda r: -r["anon_growth_kb"])

    phase("discovery")
    phase("unchanged")
    nchanged = w.change("bench", args.tables, args.changed_pct)
    phase("changed")
    out["changed"]["tables_changed"] = nchanged

    # the candidate query alone, with the changed pairs triggered again
    q(conn, "BEGIN")
    q(conn, "UPDATE tms.rule_baselines SET pending_job = NULL, triggered = true"
            " WHERE pending_job IS NOT NULL")
    plan = q(conn, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) " + CANDIDATE_SQL)
    q(conn, "ROLLBACK")
    out["candidate_query_plan"] = [r[0] for r in plan]

    # naive plan: evaluate every table (catch-up rule: all are candidates)
    policy(conn, "naive", "naive", "dataFiles > 100 AND avgDataFileSize < 128MB", "catch-up")
    naive = run_cycle(conn, "naive")
    per_table = naive["evaluation_ms"] / max(naive["evaluated"], 1)
    out["naive_sample"] = naive
    out["naive_extrapolated"] = {
        "evaluation_ms_per_table": round(per_table, 3),
        "requests": args.tables,
        "cycle_ms": round(per_table * args.tables, 0)}
    print(json.dumps(out, indent=2))
    c = out["changed"]
    print("\n%d tables, %d changed, tms.evaluation_pool_size %d, added latency %g ms, page_size %s:"
          % (args.tables, nchanged, out["pool_size"], args.latency_ms,
             args.page_size or "(none sent)"))
    print("  discovery                     %9.1f ms  %d requests"
          % (out["discovery"]["refresh_ms"], out["discovery"]["refresh_requests"]))
    print("  refresh, nothing changed      %9.1f ms  %d requests"
          % (out["unchanged"]["refresh_ms"], out["unchanged"]["refresh_requests"]))
    print("  refresh, %g%% changed          %9.1f ms  %d requests (200/304: %s)"
          % (args.changed_pct, c["refresh_ms"], c["refresh_requests"], c["loads_200_304"]))
    print("  candidate query               %9.3f ms  %d candidates"
          % (c["candidate_query_ms"], c["candidates"]))
    print("  evaluation                    %9.1f ms  %d requests"
          % (c["evaluation_ms"], c["evaluation_requests"]))
    print("  whole cycle (wall)            %9.1f ms" % c["wall_ms"])
    print("  naive: evaluate every table   %9.0f ms  %d requests (extrapolated from %d)"
          % (out["naive_extrapolated"]["cycle_ms"], args.tables, args.naive_sample))
    print("  private memory (RssAnon) each phase added, the two largest processes:")
    for name, rows in out["process_memory"].items():
        print("    %-10s %s" % (name, "; ".join(
            "%s (pid %d) +%.1f MB, peak %.1f MB" % (r["process"] or "?", r["pid"],
                                                    r["anon_growth_kb"] / 1024.0,
                                                    (r["anon_peak_kb"] or 0) / 1024.0)
            for r in rows[:2])))


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------

MEM_FIELDS = ("VmHWM", "VmRSS", "RssAnon", "RssShmem", "RssFile")
# the runs measured: every table new, none changed, changed_pct changed,
# and a catch-up rule's first run (every table evaluated)
PHASES = ("discovery", "unchanged", "changed", "all-candidates")


def read_status(pid):
    """{field: kB} of the memory fields of /proc/<pid>/status ({} if gone)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in MEM_FIELDS:
                    out[k] = int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def reset_hwm(pid):
    """Reset VmHWM to the current RSS (needs to be root or the owner)."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def measured(pids, fn, interval=0.01):
    """Run fn() with the peak RSS of pids measured: VmHWM reset before,
    RssAnon and VmRSS sampled every `interval` s.  Returns (fn's result,
    {pid: figures in kB})."""
    before = {}
    for pid in pids:
        reset_hwm(pid)
        before[pid] = read_status(pid)
    peak = {pid: dict(before[pid]) for pid in pids}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            for pid in pids:
                st = read_status(pid)
                for k in ("RssAnon", "VmRSS"):
                    if st.get(k, 0) > peak[pid].get(k, 0):
                        peak[pid][k] = st[k]
            stop.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        res = fn()
    finally:
        stop.set()
        th.join()
    figures = {}
    for pid in pids:
        after = read_status(pid)
        b = before[pid]
        figures[pid] = {
            "rss_before_kb": b.get("VmRSS"), "hwm_after_kb": after.get("VmHWM"),
            "hwm_growth_kb": after.get("VmHWM", 0) - b.get("VmRSS", 0),
            "anon_before_kb": b.get("RssAnon"), "anon_peak_kb": peak[pid].get("RssAnon"),
            "anon_growth_kb": peak[pid].get("RssAnon", 0) - b.get("RssAnon", 0),
            "rss_after_kb": after.get("VmRSS"), "anon_after_kb": after.get("RssAnon"),
            "shmem_after_kb": after.get("RssShmem")}
    return res, figures


def listing_wire(catalog, ns, page_size, max_pages):
    """Fetch the listing of ns page by page as tms does; return its bytes
    on the wire (bodies, and bodies plus response heads)."""
    conn = http.client.HTTPConnection("127.0.0.1", catalog.port, timeout=60)
    token = ""
    body_bytes = head_bytes = pages = biggest = names = 0
    try:
        while pages < max_pages:
            path = "/v1/%s/namespaces/%s/tables?pageToken=%s" % (
                catalog.prefix, urllib.parse.quote(ns), urllib.parse.quote(token))
            if page_size:
                path += "&pageSize=%d" % page_size
            conn.request("GET", path)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError("listing %s: %d %r" % (path, r.status, data[:200]))
            pages += 1
            body_bytes += len(data)
            head_bytes += len(str(r.msg)) + len("HTTP/1.1 200 OK\r\n") + 2
            biggest = max(biggest, len(data))
            doc = json.loads(data)
            names += len(doc["identifiers"])
            token = doc.get("next-page-token")
            if not token:
                break
        else:
            raise RuntimeError("listing of %s did not end after %d pages" % (ns, max_pages))
        # one table load, and the same load answered 304
        conn.request("GET", "/v1/%s/namespaces/%s/tables/t000001" % (catalog.prefix, ns))
        r = conn.getresponse()
        load = r.read()
        etag = r.getheader("ETag")
        conn.request("GET", "/v1/%s/namespaces/%s/tables/t000001" % (catalog.prefix, ns),
                     headers={"If-None-Match": etag})
        r = conn.getresponse()
        r.read()
        not_modified = r.status
    finally:
        conn.close()
    return {"pages": pages, "tables": names, "body_bytes": body_bytes,
            "wire_bytes": body_bytes + head_bytes, "biggest_page_bytes": biggest,
            "load_body_bytes": len(load), "conditional_load_status": not_modified}


def supervisor_pid(conn):
    rows = q(conn, "SELECT pid FROM tms.workers WHERE role = 'supervisor'")
    if len(rows) != 1:
        raise RuntimeError("expected one supervisor, found %r" % rows)
    return rows[0][0]


def wait_rows(conn, sql, args, ok, timeout, what, interval=0.05):
    """Poll sql until ok(rows); bounded by timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = q(conn, sql, args)
        if ok(rows):
            return rows
        time.sleep(interval)
    raise TimeoutError("timed out after %.0f s waiting for %s" % (timeout, what))


class PoolRun:
    """Run a policy's policy-expand task in the pool and wait for its end;
    remembers the pool worker that held it (tms.workers.current_task)."""

    def __init__(self, w, conn, name, timeout):
        self.w, self.conn, self.name, self.timeout = w, conn, name, timeout
        self.id = q(conn, "SELECT id FROM tms.maintenance_policies WHERE name = %s", (name,))[0][0]
        self.owner = None
        self.log_offset = 0

    def __call__(self):
        conn = self.conn
        # the refresh is due again (not done within half an interval)
        q(conn, "UPDATE tms.object_groups SET refreshed_at = NULL WHERE name = %s", (self.name,))
        try:
            self.log_offset = os.path.getsize(self.w.cluster.logfile)
        except OSError:
            self.log_offset = 0
        t0 = q(conn, "SELECT clock_timestamp()")[0][0]
        wall0 = time.monotonic()
        q(conn, "SELECT tms.set_policy_active(%s, true)", (self.name,))
        deadline = time.monotonic() + self.timeout
        task = "policy-expand/%d" % self.id
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError("policy-expand/%d did not end in %d s" % (self.id, self.timeout))
            pids = q(conn, "SELECT pid FROM tms.workers WHERE current_task = %s", (task,))
            if pids:
                self.owner = pids[0][0]
            row = q(conn, "SELECT picked, picked_pid, last_success >= %s, last_failure >= %s,"
                          "       last_error"
                          "  FROM tms.scheduled_tasks"
                          " WHERE task_name = 'policy-expand' AND task_instance = %s",
                    (t0, t0, str(self.id)))[0]
            if row[0] and row[1] and self.owner is None:
                self.owner = row[1]
            if row[3]:
                raise RuntimeError("policy-expand/%d failed: %s" % (self.id, row[4]))
            if row[2] and not row[0]:
                break
            time.sleep(0.05)
        wall = (time.monotonic() - wall0) * 1000
        q(conn, "SELECT tms.set_policy_active(%s, false)", (self.name,))
        stats = None
        with open(self.w.cluster.logfile, errors="replace") as f:
            f.seek(self.log_offset)
            for line in f:
                if '"%s"' % self.name in line:
                    stats = parse_stats(line) or stats
        out = dict(stats or {}, wall_ms=round(wall, 1))
        return out


def fmt_mb(kb):
    return "%.1f MB" % (kb / 1024.0) if kb is not None else "-"


def memory(w, args):
    n = args.tables
    page_size = args.page_size or 1000
    conn = w.connect()
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    w.create_server(conn, page_size)
    for ns, count in (("bench", n), ("pool", n), ("warm", 10)):
        w.add_tables(ns, count)
    false_cond = "dataFiles > 100"           # evaluated, never submits
    policy(conn, "bench", "bench", false_cond)
    policy(conn, "warm", "warm", false_cond)
    policy(conn, "pool", "pool", false_cond)
    policy(conn, "warmpool", "warm", false_cond)
    # the first run of a catch-up rule: every table of the group a candidate
    policy(conn, "all", "bench", false_cond, "catch-up")
    policy(conn, "poolall", "pool", false_cond, "catch-up")
    out = {"tables": n, "page_size": page_size, "changed_pct": args.changed_pct,
           "pool_size": int(q(conn, "SHOW tms.evaluation_pool_size")[0][0]),
           "shared_buffers": q(conn, "SHOW shared_buffers")[0][0]}

    out["wire"] = listing_wire(w.catalog, "bench", page_size, n // page_size + 3)
    out["wire"]["seen_hashes_bytes"] = 8 * n
    sup = supervisor_pid(conn)
    out["supervisor_start"] = read_status(sup)
    log = lambda msg: print("[memory %d] %s" % (n, msg), file=sys.stderr, flush=True)  # noqa: E731

    # (a) a backend in tms.evaluate_now, fresh and warmed for each run
    out["backend"] = {}
    for phase in PHASES:
        if phase == "changed":
            out["tables_changed"] = w.change("bench", n, args.changed_pct)
        b = w.connect()
        try:
            pid = q(b, "SELECT pg_backend_pid()")[0][0]
            run_cycle(b, "warm")
            stats, fig = measured([pid, sup], lambda: run_cycle(
                b, "all" if phase == "all-candidates" else "bench"))
        finally:
            b.close()
        out["backend"][phase] = {"stats": stats, "process": fig[pid], "supervisor": fig[sup]}
        log("backend %s: %s, RssAnon +%s, VmHWM +%s; supervisor VmHWM +%s"
            % (phase, stats, fig[pid]["anon_growth_kb"], fig[pid]["hwm_growth_kb"],
               fig[sup]["hwm_growth_kb"]))

    # the same listing collected whole: tms.list_tables() in a backend
    b = w.connect()
    try:
        pid = q(b, "SELECT pg_backend_pid()")[0][0]
        q(b, "SELECT count(*) FROM tms.list_tables('bench', 'warm')")
        t0 = time.monotonic()
        cnt, fig = measured([pid], lambda: q(b, "SELECT count(*) FROM tms.list_tables('bench', 'bench')"))
        out["list_tables"] = {"rows": cnt[0][0], "ms": round((time.monotonic() - t0) * 1000, 1),
                              "process": fig[pid]}
    finally:
        b.close()
    log("tms.list_tables: %s" % out["list_tables"])

    # (b) the policy-expand task in the pool worker, warmed first
    workers = q(conn, "SELECT pid FROM tms.workers WHERE role = 'worker'")
    if len(workers) != 1:
        raise RuntimeError("--memory runs with one pool worker; found %r" % workers)
    worker = workers[0][0]
    PoolRun(w, conn, "warmpool", args.timeout)()
    out["pool"] = {}
    for phase in PHASES:
        if phase == "changed":
            w.change("pool", n, args.changed_pct)
        run = PoolRun(w, conn, "poolall" if phase == "all-candidates" else "pool", args.timeout)
        stats, fig = measured([worker, sup], run)
        if run.owner != worker:
            raise RuntimeError("the task ran in %r, not in the pool worker %d" % (run.owner, worker))
        out["pool"][phase] = {"stats": stats, "worker_pid": run.owner, "process": fig[worker],
                              "supervisor": fig[sup]}
        log("pool %s: %s, RssAnon +%s, VmHWM +%s; supervisor VmHWM +%s"
            % (phase, stats, fig[worker]["anon_growth_kb"], fig[worker]["hwm_growth_kb"],
               fig[sup]["hwm_growth_kb"]))
    out["supervisor_end"] = read_status(sup)
    if supervisor_pid(conn) != sup:
        raise RuntimeError("the supervisor was restarted during the run")

    print(json.dumps(out, indent=2))
    wire = out["wire"]
    print("\n%d tables in one namespace, page_size %d, %d listing pages:" % (n, page_size,
                                                                           wire["pages"]))
    print("  listing on the wire: %s bodies (%s with heads), biggest page %s; one load %d bytes;"
          " seen-table hashes %s"
          % (fmt_mb(wire["body_bytes"] / 1024), fmt_mb(wire["wire_bytes"] / 1024),
             fmt_mb(wire["biggest_page_bytes"] / 1024), wire["load_body_bytes"],
             fmt_mb(wire["seen_hashes_bytes"] / 1024)))
    print("  %-8s %-15s %10s %12s %14s %14s %17s" % (
        "process", "run", "refresh ms", "evaluated", "RssAnon growth", "VmHWM growth",
        "supervisor VmHWM"))
    for where in ("backend", "pool"):
        for phase in PHASES:
            r = out[where][phase]
            st = r["stats"] or {}
            print("  %-8s %-15s %10s %12s %14s %14s %17s"
                  % (where, phase, st.get("refresh_ms", "-"), st.get("candidates", "-"),
                     fmt_mb(r["process"]["anon_growth_kb"]), fmt_mb(r["process"]["hwm_growth_kb"]),
                     "+" + fmt_mb(r["supervisor"]["hwm_growth_kb"])))
    lt = out["list_tables"]
    print("  tms.list_tables (whole listing): RssAnon +%s, VmHWM +%s"
          % (fmt_mb(lt["process"]["anon_growth_kb"]), fmt_mb(lt["process"]["hwm_growth_kb"])))
    print("  supervisor VmRSS %s -> %s, RssAnon %s -> %s"
          % (fmt_mb(out["supervisor_start"].get("VmRSS")), fmt_mb(out["supervisor_end"].get("VmRSS")),
             fmt_mb(out["supervisor_start"].get("RssAnon")),
             fmt_mb(out["supervisor_end"].get("RssAnon"))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=100000)
    ap.add_argument("--changed-pct", type=float, default=1.0)
    ap.add_argument("--naive-sample", type=int, default=2000)
    ap.add_argument("--pool-size", type=int, default=None,
                    help="tms.evaluation_pool_size (catalog requests in flight); default: the server's")
    ap.add_argument("--latency-ms", type=float, default=0,
                    help="delay the test catalog adds to every table load (a remote catalog)")
    ap.add_argument("--page-size", type=int, default=None,
                    help="server option page_size (default: none; 1000 with --memory)")
    ap.add_argument("--memory", action="store_true",
                    help="measure the memory of a refresh instead of its time")
    ap.add_argument("--timeout", type=int, default=3600,
                    help="--memory: seconds to wait for one pool run")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="tms-bench-policy.", dir="/tmp")
    os.chmod(root, 0o755)
    settings = {"tms.evaluation_cycle_interval": "'1h'", "shared_buffers": "'256MB'"}
    if args.pool_size is not None:
        settings["tms.evaluation_pool_size"] = str(args.pool_size)
    if args.memory:
        # one pool worker, whose DEBUG1 line (the run's figures) goes to the log
        settings.update({"tms.max_workers": "1", "log_min_messages": "debug1"})
    else:
        settings["tms.enabled"] = "off"
    w = World(root, settings)
    try:
        w.start()
        if args.memory:
            memory(w, args)
        else:
            timing(w, args)
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
