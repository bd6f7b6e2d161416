#!/usr/bin/python3
"""Maintenance on engines: how long after an engine finished a run tms has
recorded it, and how many requests a job costs, next to the least any
client of that protocol could send.

Usage: bench/engine_bench.py [--jobs N] [--poll MS[,MS...]] [--run-seconds S]
                             [--deadline S] [--json PATH]

One throwaway world on 127.0.0.1 / Unix sockets: a PostgreSQL 15 cluster
with tms (pool of 4 workers), a second one for the test REST catalog's
pointers, the catalog (test/catalog/server.py) and the three engine
look-alikes of the test world (test/engines/server.py as livy, trino and
gravitino).  One table of 12 small real Parquet files
(test/engines/smallfiles.py) takes every job.

For each engine type and each poll interval (the tms_engine server's
poll_interval option; default 50 and 500 ms), --jobs manifest rewrites
(default 20) run one after the other through tms.run_operation; each run
takes --run-seconds (default 1.0) longer at the engine (the look-alike's
slow-run fault), so that polling has something to wait for.  Measured per job:
  record_ms   the job's finished_at minus the engine's own finished_at of
              the run (/admin/runs): submission-to-record latency once the
              run ended, what polling adds
  job_ms      finished_at - started_at of the job (server clock)
  requests    the engine's request count during the job (/admin/requests)
and reported as median and p95, next to the least possible requests per job
for the protocol: submit and one final status (trino: POST /v1/statement,
one GET of nextUri that returns the end; gravitino: POST runs, one GET;
livy: POST /sessions, POST statements, one GET of the statement, DELETE
/sessions, since a Livy run is a session plus a statement).

Every loop is bounded by --jobs and --deadline (SIGALRM); every server is
stopped in `finally`.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "test")
sys.path.insert(0, TEST)
sys.path.insert(0, os.path.join(TEST, "engines"))

import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import world  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402

KINDS = ("livy", "trino", "gravitino")
LEAST = {"livy": 4, "trino": 2, "gravitino": 2}


def log(msg):
    sys.stderr.write("[engine_bench] %s\n" % msg)
    sys.stderr.flush()


def pct(values, p):
    v = sorted(values)
    if not v:
        return None
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--poll", default="50,500")
    ap.add_argument("--run-seconds", type=float, default=1.0)
    ap.add_argument("--deadline", type=int, default=1800)
    ap.add_argument("--json")
    a = ap.parse_args()
    polls = [int(x) for x in a.poll.split(",")]

    def alarm(*_):
        raise TimeoutError("deadline of %d s reached" % a.deadline)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(a.deadline)

    root = tempfile.mkdtemp(prefix="tms-engine-bench-", dir="/tmp")
    os.chmod(root, 0o755)
    pg = catpg = cat = None
    engines = {}
    results = []
    try:
        pg = Cluster(os.path.join(root, "pg", "data"), settings=dict(FAST_WORKERS))
        pg.init()
        pg.start()
        pg.create_database()
        pg.psql("CREATE EXTENSION tms")
        catpg = Cluster(os.path.join(root, "catpg", "data"), preload=())
        catpg.init()
        catpg.start()
        catpg.create_database()
        files = os.path.join(root, "files")
        os.makedirs(files)
        os.chmod(files, 0o755)
        cat = world.CatalogServer(catpg.dsn(), "file://%s/wh" % files,
                                  catalog_name="bench_%s" % uuid.uuid4().hex[:6], file_root=files)
        st = ow.storage(None, files)
        cat.create_namespace("b")
        smallfiles.make_table(cat, st, "b", "t", files=12, rows_per_file=10, seed=5)
        ow.give_to_server(files)
        pg.psql("CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s',"
                " relative_path_root '%s', allowed_locations 'file://%s/');"
                " CREATE USER MAPPING FOR PUBLIC SERVER cat;" % (cat.uri, files, files))
        for kind in KINDS:
            engines[kind] = world.EngineServer(kind, cat, file_root=files, metalake="ml")
        wait_for(lambda: pg.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                 " AND state = 'idle'") == "4", what="the pool")
        for kind in KINDS:
            e = engines[kind]
            for poll in polls:
                srv = "%s_%d" % (kind, poll)
                pg.psql("CREATE SERVER %s FOREIGN DATA WRAPPER tms_engine OPTIONS (type '%s',"
                        " uri '%s', catalog 'lake', metalake 'ml', poll_interval '%dms');"
                        " CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (user 'bench');"
                        % (srv, kind, e.uri, poll, srv))
                rows = []
                for i in range(a.jobs):
                    if a.run_seconds > 0:
                        e.fault(action="slow-run", seconds=a.run_seconds, count=1)
                    e.reset_requests()
                    jid = int(pg.psql("SELECT tms.run_operation('cat', 'b', 't',"
                                      " 'manifest-rewrite', '{}', '%s')" % srv))
                    wait_for(lambda: pg.psql("SELECT finished_at IS NOT NULL FROM"
                                             " tms.maintenance_jobs WHERE id = %d" % jid) == "t",
                             timeout=120, what="job %d" % jid)
                    state, started, finished = pg.psql(
                        "SELECT state, extract(epoch FROM started_at),"
                        " extract(epoch FROM finished_at) FROM tms.maintenance_jobs"
                        " WHERE id = %d" % jid).split("|")
                    tag = "tms-job-%d" % jid
                    run = [r for r in e.runs() if tag in (r.get("tag") or "").split(",")]
                    req = e.requests()["total"]
                    e.clear_faults()
                    if state != "succeeded" or len(run) != 1 or not run[0].get("finished_at"):
                        raise RuntimeError("job %d on %s: %s, runs %r" % (jid, srv, state, run))
                    rows.append({"record_ms": (float(finished) - run[0]["finished_at"]) * 1000,
                                 "job_ms": (float(finished) - float(started)) * 1000,
                                 "requests": req})
                res = {"engine": kind, "poll_ms": poll, "jobs": len(rows),
                       "record_ms_p50": statistics.median(r["record_ms"] for r in rows),
                       "record_ms_p95": pct([r["record_ms"] for r in rows], 95),
                       "job_ms_p50": statistics.median(r["job_ms"] for r in rows),
                       "requests_p50": statistics.median(r["requests"] for r in rows),
                       "requests_max": max(r["requests"] for r in rows),
                       "requests_least": LEAST[kind]}
                log(json.dumps(res))
                results.append(res)
    finally:
        signal.alarm(0)
        for e in engines.values():
            e.stop()
        if cat:
            cat.stop()
        for c in (pg, catpg):
            if c:
                c.destroy()
        shutil.rmtree(root, ignore_errors=True)

    print("| engine | poll_interval | jobs | record after the run ended, p50 / p95 | job wall time p50 | requests per job p50 (max) | least possible |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print("| %s | %d ms | %d | %.0f / %.0f ms | %.0f ms | %g (%d) | %d |" % (
            r["engine"], r["poll_ms"], r["jobs"], r["record_ms_p50"], r["record_ms_p95"],
            r["job_ms_p50"], r["requests_p50"], r["requests_max"], r["requests_least"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
