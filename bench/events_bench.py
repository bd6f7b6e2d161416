#!/usr/bin/python3
"""
events_bench.py -- commits as events against today's polling cycle, in one
run: N tables behind a polled catalog server and N behind one whose commits
arrive through tms's trigger on the JdbcCatalog table of pointers
(tms.attach_jdbc_catalog); 1% of each receive a commit.  Measured:

  - polling (a policy with a rule on the evaluation cycle, run by
    tms.evaluate_now in a backend, the same code as its policy-expand task):
    catalog requests and time of a cycle with nothing changed and of one
    after 1% changed;
  - events (a policy with an on-commit rule, run by the worker pool): the
    catalog requests of a cycle with nothing changed (the policy's
    policy-expand task, rescheduled now), then the requests per changed
    table and the latency from each commit to the start of its maintenance
    job, for a burst (the commits as fast as one client sends them) and
    paced (--paced-rate commits per second, one at a time);
  - the cost of a commit with the trigger: pointer swaps of the polled
    catalog (the trigger fires, finds no source) and of the event-fed one
    (the whole event: tms.tables, the commit-job upsert).

    /usr/bin/python3 bench/events_bench.py [--tables 100000] [--changed-pct 1]
                                           [--paced 200] [--paced-rate 20]

Starts its own PostgreSQL cluster (tms preloaded, the pool on) and two REST
catalog test servers, on 127.0.0.1 and a Unix socket; the pointers live in
tms's own database, all pointing at one synthetic table of 5 data files
(like bench/policy_cycle.py), and a changed table moves to a version with
one more commit.  Maintenance jobs are of the legacy engine "spark" with
no tms.maintenance_handler: they start and stay running, which is the
moment measured.  Prints JSON and a short table; see bench/README.md,
"Commit events".  Every wait is bounded; everything is stopped in
`finally`.
"""

import argparse
import json
import os
import shutil
import statistics
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
from policy_cycle import load_counts, run_cycle, wait_rows as wait  # noqa: E402

CONDITION = "dataFiles > 3 AND avgDataFileSize < 128MB"


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class World:
    def __init__(self, root):
        self.root = root
        self.files = os.path.join(root, "files")
        self.cluster = Cluster(os.path.join(root, "pg", "data"), settings={
            "tms.evaluation_cycle_interval": "'1h'",
            "tms.max_active_operations": "1000",
            "tms.commit_concurrency": "4"})
        self.catalogs = {}

    def start(self, n):
        c = self.cluster
        c.init()
        c.start()
        c.create_database()
        os.makedirs(self.files)
        os.chmod(self.files, 0o755)
        conn = self.connect()
        q(conn, "CREATE EXTENSION tms")
        for name in ("pcat", "ecat"):
            self.catalogs[name] = world.CatalogServer(c.dsn(), "file://%s/wh" % self.files,
                                                      catalog_name=name, file_root=self.files)
        cat = self.catalogs["pcat"]
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
        for name, srv in (("pcat", "polled"), ("ecat", "events")):
            u = self.catalogs[name]
            q(conn, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s,"
                    " relative_path_root %%s, allowed_locations %%s, request_timeout '60s',"
                    " page_size '1000')" % srv,
              ("http://127.0.0.1:%d" % u.port, self.files, "file://%s/" % self.files))
            q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % srv)
            u.create_namespace("b")
            q(conn, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
                    " metadata_location, iceberg_type)"
                    " SELECT %s, 'b', 't' || lpad(g::text, 6, '0'), %s, 'TABLE'"
                    "   FROM generate_series(1, %s) g", (name, self.base, n))
        q(conn, "SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'events',"
                " catalog_name => 'ecat')")
        return conn

    def connect(self):
        conn = psycopg2.connect(self.cluster.dsn())
        conn.autocommit = True
        return conn

    def stop(self):
        for cat in self.catalogs.values():
            cat.stop()
        self.cluster.stop()


def changed_names(n, pct_changed, offset=0):
    k = max(1, int(n * pct_changed / 100))
    step = max(1, n // k)
    return ["t%06d" % (1 + offset + i * step) for i in range(k) if 1 + offset + i * step <= n]


def commit_each(conn, catalog, names, location, rate=None):
    """Swap each table's pointer in a transaction of its own (a JdbcCatalog
    commit); returns {name: commit time (epoch s)} and the commits' time."""
    at = {}
    t0 = time.time()
    for i, name in enumerate(names):
        if rate:
            due = t0 + i / rate
            now = time.time()
            if due > now:
                time.sleep(due - now)
        q(conn, "UPDATE iceberg_tables SET previous_metadata_location = metadata_location,"
                " metadata_location = %s WHERE catalog_name = %s AND table_namespace = 'b'"
                " AND table_name = %s", (location, catalog, name))
        at[name] = time.time()
    return at, time.time() - t0


def job_starts(conn, names):
    rows = q(conn, "SELECT t.table_name, extract(epoch FROM j.started_at)"
                   "  FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id"
                   " WHERE t.server = 'events' AND t.table_name = ANY (%s)"
                   "   AND j.started_at IS NOT NULL", (list(names),))
    return {r[0]: float(r[1]) for r in rows}


def events_phase(conn, w, names, location, rate, timeout):
    cat = w.catalogs["ecat"]
    cat.reset_requests()
    at, spent = commit_each(conn, "ecat", names, location, rate)
    rows = wait(conn, "SELECT count(*) FROM tms.table_maintenance_job j JOIN tms.tables t"
                      " ON t.id = j.table_id WHERE t.server = 'events' AND t.table_name = ANY (%s)"
                      " AND j.started_at IS NOT NULL", (list(names),),
                lambda r: r[0][0] >= len(names), timeout, "the jobs of %d commits" % len(names))
    done = time.time()
    starts = job_starts(conn, names)
    lat = [(starts[n] - at[n]) * 1000 for n in names]
    ok, nm = load_counts(cat, "b")
    reqs = cat.requests()["requests"]
    others = {}
    for r in reqs:
        if not (r["method"] == "GET" and "/namespaces/b/tables/" in r["path"]):
            key = "%s %s" % (r["method"], r["path"])
            others[key] = others.get(key, 0) + 1
    return {"commits": len(names), "commit_seconds": round(spent, 3),
            "per_commit_ms": round(spent * 1000 / len(names), 3),
            "all_started_after_s": round(done - min(at.values()), 3), "jobs": rows[0][0],
            "latency_ms": {"p50": round(pct(lat, 50), 1), "p99": round(pct(lat, 99), 1),
                           "max": round(max(lat), 1), "mean": round(statistics.mean(lat), 1)},
            "catalog_requests": len(reqs), "loads_200_304": (ok, nm),
            "other_requests": others,
            "requests_per_changed_table": round(len(reqs) / len(names), 2)}


def finish_jobs(conn):
    """End every job in flight (they stay running otherwise), so that the
    next phase's jobs find tms.max_active_operations free."""
    q(conn, "SELECT count(tms.finish_operation(id)) FROM tms.table_maintenance_job"
            " WHERE finished_at IS NULL")


def event_cycle(conn, w, timeout):
    """The events policy's policy-expand task, due now, run once by the
    pool; its catalog requests."""
    cat = w.catalogs["ecat"]
    cat.reset_requests()
    pid = q(conn, "SELECT id FROM tms.maintenance_policies WHERE name = 'ev'")[0][0]
    before = q(conn, "SELECT last_success FROM tms.scheduled_tasks"
                     " WHERE task_name = 'policy-expand' AND task_instance = %s", (str(pid),))[0][0]
    t0 = time.time()
    q(conn, "SELECT tms.schedule_task('policy-expand', %s)", (str(pid),))
    wait(conn, "SELECT last_success FROM tms.scheduled_tasks WHERE task_name = 'policy-expand'"
               " AND task_instance = %s", (str(pid),),
         lambda r: r[0][0] is not None and r[0][0] != before, timeout, "the event-fed cycle")
    return {"wall_ms": round((time.time() - t0) * 1000, 1),
            "catalog_requests": len(cat.requests()["requests"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=100000)
    ap.add_argument("--changed-pct", type=float, default=1.0)
    ap.add_argument("--paced", type=int, default=200)
    ap.add_argument("--paced-rate", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tms-events-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    w = World(root)
    out = {"tables_per_side": args.tables, "changed_pct": args.changed_pct}
    try:
        t0 = time.time()
        conn = w.start(args.tables)
        out["setup_s"] = round(time.time() - t0, 1)
        # polling: an inactive policy, driven by tms.evaluate_now
        q(conn, "SELECT tms.create_object_group('poll', server => 'polled', namespace_pattern => 'b')")
        q(conn, "SELECT tms.create_policy('poll', 'poll', active => false)")
        q(conn, "SELECT tms.add_rule('poll', 'compaction', 'spark', '{\"commits-added\": 1}',"
                " %s, 'going-forward', min_interval => '0')", (CONDITION,))
        # events: on commit, run by the pool; its first cycle is the discovery
        t0 = time.time()
        q(conn, "SELECT tms.create_object_group('ev', server => 'events', namespace_pattern => 'b')")
        q(conn, "SELECT tms.create_policy('ev', 'ev')")
        q(conn, "SELECT tms.add_rule('ev', 'compaction', 'spark', '{\"commits-added\": 1}',"
                " %s, 'going-forward', schedule => '{\"on-commit\": true}', min_interval => '0')",
          (CONDITION,))
        wait(conn, "SELECT refreshed_at FROM tms.object_groups WHERE name = 'ev'", None,
             lambda r: r[0][0] is not None, args.timeout, "the event-fed discovery", interval=0.5)
        out["events_discovery_s"] = round(time.time() - t0, 1)

        pcat = w.catalogs["pcat"]
        pcat.reset_requests()
        out["poll_discovery"] = run_cycle(conn, "poll")
        pcat.reset_requests()
        out["poll_unchanged"] = run_cycle(conn, "poll")
        out["poll_unchanged"]["loads_200_304"] = load_counts(pcat, "b")
        names = changed_names(args.tables, args.changed_pct)
        at, spent = commit_each(conn, "pcat", names, w.changed_loc)
        out["trigger_no_source_per_commit_ms"] = round(spent * 1000 / len(names), 3)
        pcat.reset_requests()
        out["poll_changed"] = run_cycle(conn, "poll")
        out["poll_changed"]["loads_200_304"] = load_counts(pcat, "b")
        out["poll_changed"]["tables_changed"] = len(names)
        finish_jobs(conn)

        out["events_cycle_unchanged"] = event_cycle(conn, w, args.timeout)
        out["events_burst"] = events_phase(conn, w, names, w.changed_loc, None, args.timeout)
        out["events_cycle_after"] = event_cycle(conn, w, args.timeout)
        finish_jobs(conn)
        paced = changed_names(args.tables, args.changed_pct, offset=1)[:args.paced]
        out["events_paced"] = events_phase(conn, w, paced, w.changed_loc, args.paced_rate,
                                           args.timeout)
        out["events_paced"]["rate_per_s"] = args.paced_rate
        print(json.dumps(out, indent=2))
        pu, pc = out["poll_unchanged"], out["poll_changed"]
        eb, ep = out["events_burst"], out["events_paced"]
        print("\n%d tables a side, %d changed:" % (args.tables, len(names)))
        print("  polling cycle, nothing changed   %9.1f ms  %7d catalog requests"
              % (pu["wall_ms"], pu["refresh_requests"] + pu["evaluation_requests"]))
        print("  polling cycle, 1%% changed        %9.1f ms  %7d catalog requests"
              % (pc["wall_ms"], pc["refresh_requests"] + pc["evaluation_requests"]))
        print("  event-fed cycle, nothing changed %9.1f ms  %7d catalog requests"
              % (out["events_cycle_unchanged"]["wall_ms"],
                 out["events_cycle_unchanged"]["catalog_requests"]))
        print("  events, burst of %d commits: %d requests (%.2f a table), commit to job start"
              " p50 %.1f ms, p99 %.1f ms" % (eb["commits"], eb["catalog_requests"],
                                             eb["requests_per_changed_table"],
                                             eb["latency_ms"]["p50"], eb["latency_ms"]["p99"]))
        print("  events, %d commits at %g/s: commit to job start p50 %.1f ms, p99 %.1f ms"
              % (ep["commits"], args.paced_rate, ep["latency_ms"]["p50"], ep["latency_ms"]["p99"]))
        print("  a commit: %.3f ms with the trigger and no source, %.3f ms as an event"
              % (out["trigger_no_source_per_commit_ms"], eb["per_commit_ms"]))
    finally:
        w.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
