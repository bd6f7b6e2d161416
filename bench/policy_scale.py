#!/usr/bin/python3
"""
policy_scale.py -- one cluster's policies at scale: an event-fed group of
a million tables whose cycles see no event, and the refresh of a polled
group of 100,000 tables against the physical limit of the test world.

    /usr/bin/python3 bench/policy_scale.py events [--tables 1000000] [--cycles 5]
    /usr/bin/python3 bench/policy_scale.py polled [--tables 100000] [--rounds 2]
                                                  [--changed-pct 1] [--page-size 1000]
                                                  [--catalog-processes 4]

Both start their own PostgreSQL cluster (tms preloaded) and REST catalog
test server (test/catalog/server.py), on a Unix socket and 127.0.0.1; the
catalog's pointers live in tms's own database in Iceberg's JdbcCatalog
layout, all pointing at one synthetic table of 5 data files (as
bench/policy_cycle.py does).

How the tables get into tms (the cheapest honest way): a real discovery
of one table (namespace "proto", a tms.evaluate_now of a one-table
policy) records what tms knows of that table -- its uuid, metadata
location, the catalog's ETag, snapshot, counters, commit times -- and the
N rows of tms.tables are then inserted in one statement as copies of that
row under the N names, which is exactly what a discovery of the N tables
would record (they all point at the same metadata file).  The policy's
rules are added afterwards, so tms.add_rule attaches the N tables as it
attaches any group's (tms._attach: one baseline per table and rule), and
the group is marked refreshed (tms.object_groups.refreshed_at) instead of
running a discovery of N loads.

events: the pointers' catalog is attached as a commit source
(tms.attach_jdbc_catalog: its commits arrive through the trigger, after
the pointers were inserted, so the insert made no event), and the policy
has an on-commit rule and a rule on the evaluation cycle.  Then --cycles
times: the policy's policy-expand task is made due (tms.schedule_task)
and the pool runs it, with no event meanwhile; measured per cycle: catalog
requests (the test server's request log), the CPU time of every pool
worker and of the supervisor (utime + stime of /proc/<pid>/stat, before
and after) and their private memory (RssAnon), and the cycle's wall time.
The same cycle's code in a backend (tms.evaluate_now, force) is measured
the same way (its backend's CPU from /proc).

polled: the pool is off (tms.enabled = off) and tms.evaluate_now runs the
cycle in a backend, as bench/policy_cycle.py does.  Each round measures,
one after the other on the same tables: the physical limit (every table
loaded with If-None-Match by bench/catalog_load_client.c, as many in
flight as tms.evaluation_pool_size, kept-alive connections, nothing else
done: what the catalog server can answer), then tms's refresh of the
unchanged group (the run's DEBUG1 figures), with the CPU time of the
backend, of the catalog server and of the catalog's PostgreSQL
connections.  The catalog serves from --catalog-processes pre-forked
processes (server.py --processes; default 4, one per connection of a
pool of 4: no two handler threads share a GIL; 1: one process, as before
2026-12-08), as real catalogs serve on many threads; its CPU is the sum
of its processes'.  Then --changed-pct of the tables move to a version with one
more commit and one more refresh is measured (none with --changed-pct 0).

Prints JSON and a short table; see bench/README.md, "Scale".  Every wait
is bounded; everything is stopped in `finally`.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))

import psycopg2  # noqa: E402

import synth  # noqa: E402
import world  # noqa: E402
from pgcluster import Cluster, fetch as q  # noqa: E402
from policy_cycle import load_counts, read_status, run_cycle, wait_rows  # noqa: E402

CATALOG = "scat"
NS = "b"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def tree_pids(pid):
    """pid and its children (a pre-forked catalog's serving processes)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [pid] + [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return [pid]


def name_sql(width):
    return "'t' || lpad(g::text, %d, '0')" % width


class World:
    def __init__(self, root, settings, catalog_processes=1):
        self.root = root
        self.catalog_processes = catalog_processes
        self.files = os.path.join(root, "files")
        self.cluster = Cluster(os.path.join(root, "pg", "data"), settings=settings)
        self.catalog = None

    def start(self, page_size):
        c = self.cluster
        c.init()
        c.start()
        c.create_database()
        os.makedirs(self.files)
        os.chmod(self.files, 0o755)
        conn = self.connect()
        q(conn, "CREATE EXTENSION tms")
        self.catalog = world.CatalogServer(c.dsn(), "file://%s/wh" % self.files,
                                           catalog_name=CATALOG, file_root=self.files,
                                           processes=self.catalog_processes)
        cat = self.catalog
        res = synth.generate(synth.build_parser().parse_args(
            ["--out", "file://%s/base" % self.files, "--data-files", "5", "--snapshots", "1",
             "--no-data-bytes", "--single-metadata", "--codec", "null", "--seed", "1"]))
        self.base = res["metadata_location"]
        cat.register("proto", "t", self.base)
        meta = cat.load_table("proto", "t")["metadata"]
        snap = meta["snapshots"][-1]
        cat.request("POST", "namespaces/proto/tables/t", {
            "requirements": [], "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": 4242424242, "parent-snapshot-id": snap["snapshot-id"],
                    "sequence-number": meta.get("last-sequence-number", 0) + 1,
                    "timestamp-ms": int(time.time() * 1000), "manifest-list": snap["manifest-list"],
                    "summary": {"operation": "append", "added-files-size": "1048576"},
                    "schema-id": snap.get("schema-id", 0)}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": 4242424242}]})
        self.changed_loc = cat.load_table("proto", "t")["metadata-location"]
        # the proto table back at the base version: its discovery is the rows' model
        q(conn, "UPDATE iceberg_tables SET metadata_location = %s WHERE catalog_name = %s"
                " AND table_namespace = 'proto'", (self.base, CATALOG))
        opts = ("uri %s, relative_path_root %s, allowed_locations %s, request_timeout '60s',"
                " page_size %s")
        q(conn, "CREATE SERVER scale FOREIGN DATA WRAPPER tms_iceberg OPTIONS (%s)" % opts,
          ("http://127.0.0.1:%d" % cat.port, self.files, "file://%s/" % self.files,
           str(page_size)))
        q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER scale")
        return conn

    def connect(self):
        conn = psycopg2.connect(self.cluster.dsn())
        conn.autocommit = True
        return conn

    def stop(self):
        if self.catalog:
            self.catalog.stop()
        self.cluster.stop()


def fill(conn, w, n, width):
    """n pointers in namespace NS of the catalog and n rows of tms.tables
    copied from the real discovery of the proto table (see the header)."""
    t0 = time.time()
    w.catalog.create_namespace(NS)
    q(conn, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
            " metadata_location, iceberg_type)"
            " SELECT %%s, %%s, %s, %%s, 'TABLE' FROM generate_series(1, %%s) g" % name_sql(width),
      (CATALOG, NS, w.base, n))
    q(conn, "SELECT tms.create_object_group('proto', server => 'scale', namespace_pattern => 'proto')")
    q(conn, "SELECT tms.create_policy('proto', 'proto', active => false)")
    q(conn, "SELECT tms.add_rule('proto', 'compaction', 'spark', '{\"commits-added\": 1}',"
            " 'dataFiles > 100')")
    run_cycle(conn, "proto")
    proto = q(conn, "SELECT count(*) FROM tms.tables WHERE namespace = 'proto' AND etag IS NOT NULL"
                    " AND metadata_location = %s", (w.base,))[0][0]
    if proto != 1:
        raise RuntimeError("the discovery of the proto table recorded %r rows" % proto)
    q(conn, "INSERT INTO tms.tables (server, namespace, table_name, table_uuid, metadata_location,"
            " etag, snapshot_id, commits, bytes_added, first_commit_at, last_commit_at)"
            " SELECT p.server, %%s, %s, p.table_uuid, p.metadata_location, p.etag, p.snapshot_id,"
            "        p.commits, p.bytes_added, p.first_commit_at, p.last_commit_at"
            "   FROM generate_series(1, %%s) g,"
            "        (SELECT * FROM tms.tables WHERE namespace = 'proto') p" % name_sql(width),
      (NS, n))
    q(conn, "ANALYZE iceberg_tables")
    q(conn, "ANALYZE tms.tables")
    return round(time.time() - t0, 1)


def add_policy(conn, name, rules):
    """An inactive policy over NS; rules are add_rule's SQL arguments after
    (policy, operation, engine, counters, condition); the group is marked
    refreshed (see the header).  Returns the seconds add_rule took (the
    baselines of every table)."""
    q(conn, "SELECT tms.create_object_group(%s, server => 'scale', namespace_pattern => %s)",
      (name, NS))
    q(conn, "SELECT tms.create_policy(%s, %s, active => false)", (name, name))
    t0 = time.time()
    for rule in rules:
        q(conn, "SELECT tms.add_rule(%%s, %s)" % rule, (name,))
    spent = time.time() - t0
    q(conn, "ANALYZE tms.rule_baselines")
    q(conn, "UPDATE tms.object_groups SET refreshed_at = now() WHERE name = %s", (name,))
    return round(spent, 1)


def pool_pids(conn):
    return dict(q(conn, "SELECT pid, role FROM tms.workers"))


def pool_cycle(conn, w, policy_id, timeout):
    """Make the policy's policy-expand task due, wait for its run to end;
    the figures of every tms process around it."""
    pids = pool_pids(conn)
    before = {p: (cpu_seconds(p), read_status(p)) for p in pids}
    w.catalog.reset_requests()
    at = q(conn, "SELECT clock_timestamp()")[0][0]
    t0 = time.monotonic()
    q(conn, "SELECT tms.schedule_task('policy-expand', %s)", (str(policy_id),))
    rows = wait_rows(conn, "SELECT last_success >= %s AND NOT picked, last_failure >= %s,"
                           "       last_error FROM tms.scheduled_tasks"
                           " WHERE task_name = 'policy-expand' AND task_instance = %s",
                     (at, at, str(policy_id)), lambda r: r[0][0] or r[0][1], timeout,
                     "the policy's cycle", interval=0.02)
    if rows[0][1]:
        raise RuntimeError("the policy's cycle failed: %s" % rows[0][2])
    wall = time.monotonic() - t0
    procs = []
    for p, role in pids.items():
        c1, st = cpu_seconds(p), read_status(p)
        if c1 is None or before[p][0] is None:
            continue
        procs.append({"pid": p, "role": role, "cpu_s": round(c1 - before[p][0], 3),
                      "anon_kb": st.get("RssAnon"), "anon_before_kb": before[p][1].get("RssAnon")})
    return {"wall_ms": round(wall * 1000, 1),
            "catalog_requests": w.catalog.requests()["total"],
            "cpu_s_all_tms_processes": round(sum(p["cpu_s"] for p in procs), 3),
            "cpu_s_max_process": max(p["cpu_s"] for p in procs),
            "max_worker_anon_kb": max(p["anon_kb"] or 0 for p in procs),
            "processes": procs}


def events(args):
    root = tempfile.mkdtemp(prefix="tms-scale-events.", dir="/tmp")
    os.chmod(root, 0o755)
    w = World(root, {"tms.evaluation_cycle_interval": "'1h'", "shared_buffers": "'512MB'",
                     "maintenance_work_mem": "'256MB'", "max_wal_size": "'4GB'"})
    out = {"mode": "events", "tables": args.tables}
    try:
        conn = w.start(1000)
        out["fill_s"] = fill(conn, w, args.tables, 7)
        # after the pointers' insert (no event for it), before the group
        # is marked refreshed (no refresh due)
        q(conn, "SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'scale',"
                " catalog_name => %s)", (CATALOG,))
        out["attach_rules_s"] = add_policy(conn, "ev", [
            "'compaction', 'spark', '{\"commits-added\": 1}', 'dataFiles > 3', 'going-forward',"
            " schedule => '{\"on-commit\": true}'",
            "'manifest-rewrite', 'spark', '{\"commits-added\": 10}', 'dataFiles > 100',"
            " 'going-forward'"])
        out["baselines"] = q(conn, "SELECT count(*) FROM tms.rule_baselines")[0][0]
        out["tms_tables"] = q(conn, "SELECT count(*) FROM tms.tables")[0][0]
        out["database_mb"] = q(conn, "SELECT pg_database_size(current_database()) / 1048576")[0][0]
        pid = q(conn, "SELECT id FROM tms.maintenance_policies WHERE name = 'ev'")[0][0]
        q(conn, "SELECT tms.set_policy_active('ev', true)")
        # the run its activation schedules, before the measured ones
        pool_cycle(conn, w, pid, args.timeout)
        print("[events] %d tables, %d baselines; cycles ..." % (out["tms_tables"], out["baselines"]),
              file=sys.stderr, flush=True)
        out["cycles"] = [pool_cycle(conn, w, pid, args.timeout) for _ in range(args.cycles)]
        # the same cycle's code in a backend
        b = w.connect()
        bpid = q(b, "SELECT pg_backend_pid()")[0][0]
        out["evaluate_now"] = []
        for _ in range(args.cycles):
            w.catalog.reset_requests()
            c0, s0 = cpu_seconds(bpid), read_status(bpid)
            st = run_cycle(b, "ev")
            c1, s1 = cpu_seconds(bpid), read_status(bpid)
            st.update({"catalog_requests": w.catalog.requests()["total"],
                       "backend_cpu_s": round(c1 - c0, 3), "anon_kb": s1.get("RssAnon"),
                       "anon_before_kb": s0.get("RssAnon")})
            out["evaluate_now"].append(st)
        b.close()
        out["load_average_end"] = os.getloadavg()
        print(json.dumps(out, indent=2))
        print("\n%d event-fed tables, %d baselines, no event:" % (out["tms_tables"], out["baselines"]))
        for i, c in enumerate(out["cycles"]):
            print("  pool cycle %d: %6d catalog requests, %8.1f ms, CPU %.3f s (all tms processes),"
                  " largest worker RssAnon %.1f MB"
                  % (i + 1, c["catalog_requests"], c["wall_ms"], c["cpu_s_all_tms_processes"],
                     c["max_worker_anon_kb"] / 1024.0))
        for i, c in enumerate(out["evaluate_now"]):
            print("  evaluate_now %d: %6d catalog requests, %8.1f ms, backend CPU %.3f s,"
                  " RssAnon %.1f MB" % (i + 1, c["catalog_requests"], c["wall_ms"],
                                        c["backend_cpu_s"], c["anon_kb"] / 1024.0))
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


def build_client():
    exe = os.path.join(tempfile.gettempdir(), "tms_catalog_load_client")
    subprocess.run(["gcc", "-std=gnu99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe,
                    os.path.join(HERE, "catalog_load_client.c"), "-lcurl"], check=True)
    return exe


def catalog_backends(conn):
    return [r[0] for r in q(conn, "SELECT pid FROM pg_stat_activity WHERE backend_type ="
                                  " 'client backend' AND pid <> pg_backend_pid()"
                                  " AND application_name = ''")]


def polled(args):
    exe = build_client()
    root = tempfile.mkdtemp(prefix="tms-scale-polled.", dir="/tmp")
    os.chmod(root, 0o755)
    settings = {"tms.evaluation_cycle_interval": "'1h'", "shared_buffers": "'256MB'",
                "tms.enabled": "off"}
    if args.pool_size:
        settings["tms.evaluation_pool_size"] = str(args.pool_size)
    w = World(root, settings, args.catalog_processes)
    out = {"mode": "polled", "tables": args.tables, "page_size": args.page_size,
           "catalog_processes": args.catalog_processes, "rounds": []}
    try:
        conn = w.start(args.page_size)
        out["fill_s"] = fill(conn, w, args.tables, 6)
        out["attach_rules_s"] = add_policy(conn, "pl", [
            "'compaction', 'spark', '{\"commits-added\": 1}', 'dataFiles > 3 AND"
            " avgDataFileSize < 128MB', 'going-forward'"])
        pool = int(q(conn, "SHOW tms.evaluation_pool_size")[0][0])
        out["pool_size"] = pool
        server_pids = tree_pids(w.catalog.child.proc.pid)
        prefix = "http://127.0.0.1:%d/v1/%s/namespaces/%s/tables/t" % (w.catalog.port, CATALOG, NS)
        bpid = q(conn, "SELECT pg_backend_pid()")[0][0]

        def measured(fn):
            others = catalog_backends(conn)
            pids = [bpid] + server_pids + others
            c0 = {p: cpu_seconds(p) for p in pids}
            la0 = os.getloadavg()[0]
            t0 = time.monotonic()
            res = fn()
            wall = time.monotonic() - t0
            c1 = {p: cpu_seconds(p) for p in pids}
            d = {p: round(c1[p] - c0[p], 2) for p in pids if c0[p] is not None and c1[p] is not None}
            return res, {"wall_s": round(wall, 2), "tms_backend_cpu_s": d.get(bpid),
                         "catalog_server_cpu_s": round(sum(d.get(p, 0) for p in server_pids), 2),
                         "catalog_db_cpu_s": round(sum(d.get(p, 0) for p in others), 2),
                         "load_average": [la0, os.getloadavg()[0]]}

        def limit():
            r = subprocess.run([exe, prefix, "1", str(args.tables), str(pool)],
                               capture_output=True, text=True, check=True, timeout=args.timeout)
            return [json.loads(line) for line in r.stdout.splitlines()]

        def refresh():
            w.catalog.reset_requests()
            return run_cycle(conn, "pl")

        def counted(st):
            # read from the catalog's request log after the CPU is measured:
            # the log of 100,000 requests, encoded, is not the refresh's work
            st["loads_200_304"] = load_counts(w.catalog, NS)
            return st

        for i in range(args.rounds):
            rnd = {}
            passes, rnd["limit_cpu"] = measured(limit)
            rnd["limit"] = passes[1]
            rnd["limit_full"] = passes[0]
            rnd["refresh"], rnd["refresh_cpu"] = measured(refresh)
            counted(rnd["refresh"])
            out["rounds"].append(rnd)
            print("[polled] round %d: %s" % (i + 1, json.dumps(rnd)), file=sys.stderr, flush=True)
        n = int(args.tables * args.changed_pct / 100)
        if n == 0:
            print(json.dumps(out, indent=2))
            print_polled(args, pool, out)
            return
        q(conn, "UPDATE iceberg_tables SET metadata_location = %s WHERE catalog_name = %s"
                " AND table_namespace = %s AND table_name IN"
                " (SELECT 't' || lpad(g::text, 6, '0') FROM generate_series(1, %s, %s) g)",
          (w.changed_loc, CATALOG, NS, args.tables, max(1, args.tables // max(n, 1))))
        out["changed"], out["changed_cpu"] = measured(refresh)
        counted(out["changed"])
        out["changed"]["tables_changed"] = n
        print(json.dumps(out, indent=2))
        print_polled(args, pool, out)
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


def print_polled(args, pool, out):
    """The short table of a polled run."""
    print("\n%d polled tables, page_size %d, %d in flight, catalog in %d processes:"
          % (args.tables, args.page_size, pool, args.catalog_processes))
    for i, r in enumerate(out["rounds"]):
        print("  round %d: limit (client, %d x 304) %.1f s (%d/s); tms refresh %.1f s"
              " (%d requests, 200/304 %s), CPU: backend %.1f s, catalog server %.1f s,"
              " catalog db %.1f s; load %s"
              % (i + 1, r["limit"]["status_304"], r["limit"]["seconds"],
                 r["limit"]["per_second"], r["refresh"]["refresh_ms"] / 1000,
                 r["refresh"]["refresh_requests"], r["refresh"]["loads_200_304"],
                 r["refresh_cpu"]["tms_backend_cpu_s"], r["refresh_cpu"]["catalog_server_cpu_s"],
                 r["refresh_cpu"]["catalog_db_cpu_s"], r["refresh_cpu"]["load_average"]))
    if "changed" not in out:
        return
    c = out["changed"]
    print("  %g%% changed: refresh %.1f s (%d requests, 200/304 %s), evaluation %.1f s"
          % (args.changed_pct, c["refresh_ms"] / 1000, c["refresh_requests"],
             c["loads_200_304"], c["evaluation_ms"] / 1000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    e = sub.add_parser("events")
    e.add_argument("--tables", type=int, default=1000000)
    e.add_argument("--cycles", type=int, default=5)
    e.add_argument("--timeout", type=float, default=600)
    p = sub.add_parser("polled")
    p.add_argument("--tables", type=int, default=100000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--changed-pct", type=float, default=1.0)
    p.add_argument("--page-size", type=int, default=1000)
    p.add_argument("--pool-size", type=int, default=None)
    p.add_argument("--catalog-processes", type=int, default=4)
    p.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    if args.mode == "events":
        events(args)
    else:
        polled(args)


if __name__ == "__main__":
    main()
