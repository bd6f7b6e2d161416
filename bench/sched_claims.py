#!/usr/bin/python3
"""Claims per second of the tms scheduler against the raw SKIP LOCKED loop.

Usage: bench/sched_claims.py [--tasks N] [--workers 1,2,4]

For each worker count, a throwaway cluster (tms.max_workers = W) runs N
tasks of a kind whose handler does nothing; the figure is N divided by the
time from switching the pool on to the last task gone.  Each task costs the
full life: claim transaction, handler in a subtransaction, completion.

The baseline is the physical limit of the same pattern without tms: pgbench
with W clients on a table of the same shape, each transaction pair being
a claim (SELECT ... FOR UPDATE SKIP LOCKED; UPDATE picked) and a completion
(DELETE), the minimum any lease-based scheduler must do per task.

A second baseline, "raw+hist", is the same loop whose completion also
writes a run's row into a table shaped like tms.task_history, in the same
statement, as tms's settle does since the run history: the difference
between the two raw columns is what that row costs, measured in the same
run and free of everything else tms does.

Beside each rate, the server's CPU time per task (microseconds: the user
and system time of the cluster's processes over the run, from /proc,
exited backends included through the postmaster's children times), which
other load on a shared machine disturbs far less than the rate.

Everything runs on a Unix socket; each run is bounded by --tasks and a
timeout, and every cluster is destroyed at the end.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test"))
from pgcluster import Cluster, wait_for  # noqa: E402

RAW_TABLE = """
CREATE TABLE raw_tasks (LIKE tms.scheduled_tasks INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE raw_tasks DROP CONSTRAINT IF EXISTS scheduled_tasks_task_name_fkey;
ALTER TABLE raw_tasks ADD PRIMARY KEY (task_name, task_instance);
CREATE INDEX ON raw_tasks (priority DESC, execution_time) WHERE NOT picked;
ALTER TABLE raw_tasks SET (fillfactor = 70);
"""

RAW_SCRIPT = r"""
BEGIN;
WITH c AS (SELECT task_name, task_instance FROM raw_tasks
            WHERE NOT picked AND execution_time <= now()
            ORDER BY priority DESC, execution_time LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE raw_tasks r SET picked = true, picked_by = 'pgbench', last_heartbeat = now(),
       version = r.version + 1
  FROM c WHERE r.task_name = c.task_name AND r.task_instance = c.task_instance
RETURNING r.task_instance AS i \gset
COMMIT;
DELETE FROM raw_tasks WHERE task_name = 'noop' AND task_instance = ':i';
"""

# the completion writes the run's row as tms's settle statement does
RAW_HISTORY_TABLE = """
CREATE TABLE raw_history (LIKE tms.task_history INCLUDING ALL);
"""

RAW_HISTORY_SCRIPT = RAW_SCRIPT.replace(
    "DELETE FROM raw_tasks WHERE task_name = 'noop' AND task_instance = ':i';",
    "WITH done AS (DELETE FROM raw_tasks WHERE task_name = 'noop' AND task_instance = ':i'"
    " RETURNING 1)"
    " INSERT INTO raw_history (kind, instance, started_at, attempt, pid, finished_at,"
    " succeeded) SELECT 'noop', ':i', now(), 1, pg_backend_pid(), clock_timestamp(), true"
    " FROM done;")


def cluster_cpu(c):
    """Seconds of CPU the cluster's processes used so far: the postmaster's
    own and its reaped children's, and its live children's."""
    pm = c.postmaster_pid()
    ticks = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        if int(pid) == pm:
            ticks += utime + stime + cutime + cstime
        elif int(fields[1]) == pm:
            ticks += utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def run_tms(root, workers, ntasks):
    c = Cluster(os.path.join(tempfile.mkdtemp(prefix="tms-%d." % workers, dir=root), "data"),
                settings={"tms.max_workers": str(workers), "tms.naptime": "'10ms'",
                          "max_connections": "50"})
    c.init()
    c.start()
    try:
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        c.psql("CREATE PROCEDURE noop(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$")
        c.psql("SELECT tms.register_task_kind('noop', 'noop(text,jsonb)', 1000)")
        c.psql("ALTER SYSTEM SET tms.enabled = off")
        c.psql("SELECT pg_reload_conf()")
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker' "
                                "AND state = 'disabled'") == str(workers),
                 what="the pool to pause")
        c.psql("SELECT tms.schedule_task('noop', 't' || g) FROM generate_series(1, %d) g" % ntasks)
        c.psql("VACUUM ANALYZE tms.scheduled_tasks")
        t0, cpu0 = time.monotonic(), cluster_cpu(c)
        c.psql("ALTER SYSTEM RESET tms.enabled")
        c.psql("SELECT pg_reload_conf()")
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.scheduled_tasks") == "0",
                 timeout=600, interval=0.02, what="the tasks")
        elapsed, cpu = time.monotonic() - t0, cluster_cpu(c) - cpu0
        return ntasks / elapsed, 1e6 * cpu / ntasks
    finally:
        c.destroy()


def run_raw(root, clients, ntasks, history=False):
    c = Cluster(os.path.join(tempfile.mkdtemp(prefix="raw-%d." % clients, dir=root), "data"),
                preload=("tms",), settings={"tms.max_workers": "0", "max_connections": "50"})
    c.init()
    c.start()
    try:
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        c.psql(RAW_TABLE)
        if history:
            c.psql(RAW_HISTORY_TABLE)
        c.psql("INSERT INTO raw_tasks (task_name, task_instance, execution_time) "
               "SELECT 'noop', 't' || g, now() FROM generate_series(1, %d) g" % ntasks)
        c.psql("VACUUM ANALYZE raw_tasks")
        script = os.path.join(c.root, "claim.sql")
        with open(script, "w") as f:
            f.write(RAW_HISTORY_SCRIPT if history else RAW_SCRIPT)
        per_client = ntasks // clients
        t0, cpu0 = time.monotonic(), cluster_cpu(c)
        subprocess.run(["pgbench", "-n", "-f", script, "-c", str(clients), "-j", str(clients),
                        "-t", str(per_client), c.dbname],
                       env=dict(os.environ, **c.env()), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed, cpu = time.monotonic() - t0, cluster_cpu(c) - cpu0
        done = ntasks - int(c.psql("SELECT count(*) FROM raw_tasks"))
        return done / elapsed, 1e6 * cpu / done
    finally:
        c.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--workers", default="1,2,4")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tms-bench-sched.", dir="/tmp")
    os.chmod(root, 0o755)
    print("tasks per run: %d; machine: %d cores" % (a.tasks, os.cpu_count()))
    print("%-7s %12s %12s %13s %6s | %s" % ("workers", "tms claims/s", "raw claims/s",
                                           "raw+hist /s", "ratio",
                                           "cpu us/task: tms, raw, raw+hist"))
    for w in (int(x) for x in a.workers.split(",")):
        tms, tms_cpu = run_tms(root, w, a.tasks)
        raw, raw_cpu = run_raw(root, w, a.tasks)
        hist, hist_cpu = run_raw(root, w, a.tasks, history=True)
        print("%-7d %12.0f %12.0f %13.0f %5.0f%% | %6.0f %6.0f %6.0f"
              % (w, tms, raw, hist, 100.0 * tms / raw, tms_cpu, raw_cpu, hist_cpu))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
