#!/usr/bin/python3
"""
policy_cycle.py -- one policy evaluation over N registered tables of which
1% changed: time of the refresh (one conditional load per table), of the
candidate query and of the evaluation, and the catalog requests made;
against the naive plan of evaluating every table.

    /usr/bin/python3 bench/policy_cycle.py [--tables 100000] [--changed-pct 1]
                                          [--naive-sample 2000] [--pool-size N]
                                          [--latency-ms L] [--page-size P]

Starts its own PostgreSQL cluster (tms preloaded) and REST catalog test
server, both on 127.0.0.1 / a Unix socket; the tables are pointers inserted
straight into the catalog's JDBC table (all sharing one synthetic Iceberg
table of 5 data files), and the changed ones are moved to a version with
one more commit.  --page-size sets the server option page_size (the
pageSize tms sends with listings); without it tms sends none and the test
catalog pages by 100.

The figures: tms.evaluate_now in a backend, which runs the same code as
the policy-expand task, with the per-phase figures of its DEBUG1 line.
The worker pool is switched off (tms.enabled = off) so that the maintenance
tasks the evaluation submits do not run on the same two cores during the
measurement.  A run stops if any evaluation failed (its figures would
measure the failures).

Prints the figures as JSON and a short table.  See bench/README.md,
"Policies".  Every wait is bounded; everything is stopped in `finally`.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))

import psycopg2  # noqa: E402

import synth  # noqa: E402
import world  # noqa: E402
from pgcluster import Cluster  # noqa: E402

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


def q(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


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

    catalog.reset_requests()
    out["discovery"] = run_cycle(conn, "bench")
    out["discovery"]["loads_200_304"] = load_counts(catalog, "bench")

    catalog.reset_requests()
    out["unchanged"] = run_cycle(conn, "bench")
    out["unchanged"]["loads_200_304"] = load_counts(catalog, "bench")

    nchanged = w.change("bench", args.tables, args.changed_pct)
    catalog.reset_requests()
    out["changed"] = run_cycle(conn, "bench")
    out["changed"]["loads_200_304"] = load_counts(catalog, "bench")
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
                    help="server option page_size (default: none)")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="tms-bench-policy.", dir="/tmp")
    os.chmod(root, 0o755)
    settings = {"tms.evaluation_cycle_interval": "'1h'", "shared_buffers": "'256MB'"}
    if args.pool_size is not None:
        settings["tms.evaluation_pool_size"] = str(args.pool_size)
    settings["tms.enabled"] = "off"
    w = World(root, settings)
    try:
        w.start()
        timing(w, args)
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
