#!/usr/bin/python3
"""
policy_cycle.py -- one policy evaluation cycle over N registered tables of
which 1% changed: time of the refresh (one conditional load per table),
of the candidate query and of the evaluation, and the catalog requests
made; against the naive plan of evaluating every table.

    /usr/bin/python3 bench/policy_cycle.py [--tables 100000] [--changed-pct 1]
                                          [--naive-sample 2000] [--pool-size N]
                                          [--latency-ms L]

Starts its own PostgreSQL cluster (tms preloaded) and REST catalog test
server; the tables are pointers inserted straight into the catalog's JDBC
table (all sharing one synthetic Iceberg table of 5 data files), and the
changed ones are moved to a version with one more commit.  Prints the
figures as JSON and a short table.  See bench/README.md, "Policies".
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))

import psycopg2  # noqa: E402

import synth  # noqa: E402
import world  # noqa: E402
from pgcluster import Cluster, fetch as q  # noqa: E402

STATS = re.compile(r'refresh ([\d.]+) ms \((\d+) catalog requests\), candidate query ([\d.]+) ms '
                   r'\((\d+) candidates\), evaluation ([\d.]+) ms \((\d+) catalog requests\)')


def run_cycle(conn, policy):
    """tms.evaluate_now with the cycle's DEBUG1 figures; returns a dict."""
    del conn.notices[:]
    q(conn, "SET client_min_messages = debug1")
    t0 = time.time()
    rows = q(conn, "SELECT decision FROM tms.evaluate_now(%s, force => true)", (policy,))
    wall = (time.time() - t0) * 1000
    q(conn, "SET client_min_messages = notice")
    for n in conn.notices:
        m = STATS.search(n)
        if m:
            return {"wall_ms": round(wall, 1), "refresh_ms": float(m.group(1)),
                    "refresh_requests": int(m.group(2)), "candidate_query_ms": float(m.group(3)),
                    "candidates": int(m.group(4)), "evaluation_ms": float(m.group(5)),
                    "evaluation_requests": int(m.group(6)), "evaluated": len(rows),
                    "submitted": sum(1 for r in rows if r[0] == "submitted")}
    raise RuntimeError("no cycle statistics in %r" % conn.notices)


def load_counts(catalog, ns):
    ok = nm = 0
    for r in catalog.requests()["requests"]:
        if r["method"] == "GET" and "/namespaces/%s/tables/" % ns in r["path"]:
            ok += r["status"] == 200
            nm += r["status"] == 304
    return ok, nm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=100000)
    ap.add_argument("--changed-pct", type=float, default=1.0)
    ap.add_argument("--naive-sample", type=int, default=2000)
    ap.add_argument("--pool-size", type=int, default=None,
                    help="tms.evaluation_pool_size (catalog requests in flight); default: the server's")
    ap.add_argument("--latency-ms", type=float, default=0,
                    help="delay the test catalog adds to every table load (a remote catalog)")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="tms-bench-policy.", dir="/tmp")
    os.chmod(root, 0o755)
    settings = {"tms.evaluation_cycle_interval": "'1h'", "shared_buffers": "'256MB'"}
    if args.pool_size is not None:
        settings["tms.evaluation_pool_size"] = str(args.pool_size)
    cluster = Cluster(os.path.join(root, "pg", "data"), settings=settings)
    catalog = None
    try:
        cluster.init()
        cluster.start()
        cluster.create_database()
        cluster.psql("CREATE DATABASE iceberg_catalog")
        files = os.path.join(root, "files")
        os.makedirs(files)
        os.chmod(files, 0o755)
        catalog = world.CatalogServer(cluster.dsn("iceberg_catalog"), "file://%s/wh" % files,
                                      catalog_name="bench", file_root=files)

        # one synthetic table, and a version of it with one more commit
        loc = "file://%s/base" % files
        res = synth.generate(synth.build_parser().parse_args(
            ["--out", loc, "--data-files", "5", "--snapshots", "1", "--no-data-bytes",
             "--single-metadata", "--codec", "null", "--seed", "1"]))
        base = res["metadata_location"]
        catalog.register("proto", "t", base)
        meta = catalog.load_table("proto", "t")["metadata"]
        snap = meta["snapshots"][-1]
        new_id = 4242424242
        catalog.request("POST", "namespaces/proto/tables/t", {
            "requirements": [], "updates": [
                {"action": "add-snapshot", "snapshot": {
                    "snapshot-id": new_id, "parent-snapshot-id": snap["snapshot-id"],
                    "sequence-number": meta.get("last-sequence-number", 0) + 1,
                    "timestamp-ms": int(time.time() * 1000), "manifest-list": snap["manifest-list"],
                    "summary": {"operation": "append", "added-files-size": "1048576"},
                    "schema-id": snap.get("schema-id", 0)}},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": new_id}]})
        changed_loc = catalog.load_table("proto", "t")["metadata-location"]

        # N pointers in the catalog's JDBC table, plus a naive-plan sample
        catalog.create_namespace("bench")
        catalog.create_namespace("naive")
        cat = psycopg2.connect(cluster.dsn("iceberg_catalog"))
        cat.autocommit = True
        q(cat, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
               " metadata_location, iceberg_type)"
               " SELECT 'bench', 'bench', 't' || lpad(g::text, 6, '0'), %s, 'TABLE'"
               "   FROM generate_series(1, %s) g", (base, args.tables))
        q(cat, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
               " metadata_location, iceberg_type)"
               " SELECT 'bench', 'naive', 't' || lpad(g::text, 6, '0'), %s, 'TABLE'"
               "   FROM generate_series(1, %s) g", (base, args.naive_sample))

        conn = psycopg2.connect(cluster.dsn())
        conn.autocommit = True
        q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
        q(conn, "CREATE SERVER bench FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %s,"
                " relative_path_root %s, request_timeout '60s')",
          ("http://127.0.0.1:%d" % catalog.port, files))
        q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER bench")
        q(conn, "SELECT tms.create_object_group('bench', server => 'bench', namespace_pattern => 'bench')")
        q(conn, "SELECT tms.create_policy('bench', 'bench', active => false)")
        q(conn, "SELECT tms.add_rule('bench', 'compaction', 'spark', '{\"commits-added\": 1}',"
                " 'dataFiles > 3 AND avgDataFileSize < 128MB', 'going-forward')")
        out = {"tables": args.tables,
               "pool_size": int(q(conn, "SHOW tms.evaluation_pool_size")[0][0]),
               "latency_ms": args.latency_ms}
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

        nchanged = int(args.tables * args.changed_pct / 100)
        q(cat, "UPDATE iceberg_tables SET metadata_location = %s WHERE catalog_name = 'bench'"
               " AND table_namespace = 'bench' AND table_name IN"
               " (SELECT 't' || lpad(g::text, 6, '0') FROM generate_series(1, %s, %s) g)",
          (changed_loc, args.tables, max(1, args.tables // max(nchanged, 1))))
        catalog.reset_requests()
        out["changed"] = run_cycle(conn, "bench")
        out["changed"]["loads_200_304"] = load_counts(catalog, "bench")
        out["changed"]["tables_changed"] = nchanged

        # the candidate query alone, with the changed pairs triggered again
        q(conn, "BEGIN")
        q(conn, "UPDATE tms.rule_baselines SET pending_job = NULL, triggered = true"
                " WHERE pending_job IS NOT NULL")
        plan = q(conn, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) "
                       "SELECT b.rule_id, b.table_id, t.namespace, t.table_name, r.operation,"
                       "       r.condition, t.commits - b.base_commits, t.bytes_added - b.base_bytes,"
                       "       (extract(epoch FROM now() - b.since) * 1000)::bigint"
                       "  FROM tms.maintenance_rules r"
                       "  JOIN tms.rule_baselines b ON b.rule_id = r.id"
                       "  JOIN tms.tables t ON t.id = b.table_id"
                       " WHERE r.policy_id = (SELECT id FROM tms.maintenance_policies WHERE name = 'bench')"
                       "   AND b.pending_job IS NULL AND (b.triggered OR b.due_at <= now())"
                       "   AND t.dropped_at IS NULL ORDER BY b.rule_id, b.table_id")
        q(conn, "ROLLBACK")
        out["candidate_query_plan"] = [r[0] for r in plan]

        # naive plan: evaluate every table (catch-up rule: all are candidates)
        q(conn, "SELECT tms.create_object_group('naive', server => 'bench', namespace_pattern => 'naive')")
        q(conn, "SELECT tms.create_policy('naive', 'naive', active => false)")
        q(conn, "SELECT tms.add_rule('naive', 'compaction', 'spark', '{\"commits-added\": 1}',"
                " 'dataFiles > 100 AND avgDataFileSize < 128MB', 'catch-up')")
        naive = run_cycle(conn, "naive")
        per_table = naive["evaluation_ms"] / max(naive["evaluated"], 1)
        out["naive_sample"] = naive
        out["naive_extrapolated"] = {
            "evaluation_ms_per_table": round(per_table, 3),
            "requests": args.tables,
            "cycle_ms": round(per_table * args.tables, 0)}
        print(json.dumps(out, indent=2))
        c = out["changed"]
        print("\n%d tables, %d changed, tms.evaluation_pool_size %d, added latency %g ms:"
              % (args.tables, nchanged, out["pool_size"], args.latency_ms))
        print("  refresh (conditional loads)   %9.1f ms  %d requests (200/304: %s)"
              % (c["refresh_ms"], c["refresh_requests"], c["loads_200_304"]))
        print("  candidate query               %9.3f ms  %d candidates"
              % (c["candidate_query_ms"], c["candidates"]))
        print("  evaluation                    %9.1f ms  %d requests"
              % (c["evaluation_ms"], c["evaluation_requests"]))
        print("  whole cycle (wall)            %9.1f ms" % c["wall_ms"])
        print("  naive: evaluate every table   %9.0f ms  %d requests (extrapolated from %d)"
              % (out["naive_extrapolated"]["cycle_ms"], args.tables, args.naive_sample))
    finally:
        if catalog:
            catalog.stop()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
