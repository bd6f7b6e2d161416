#!/usr/bin/python3
"""Claims per second of the tms scheduler against the raw SKIP LOCKED loop.

Usage: bench/sched_claims.py [--tasks N] [--workers 1,2,4] [--events VALUE ...]
                             [--listen] [--fsync]

For each worker count, a throwaway cluster (tms.max_workers = W) runs N
tasks of a kind whose handler does nothing; the figure is N divided by the
time from switching the pool on to the last task gone.  Each task costs the
full life: claim transaction, handler in a subtransaction, completion.

--events (repeated) runs the tms side once per value of tms.events (the
same run, one cluster each; default: the default of tms.events): "none"
sends nothing, "all" sends a task event with every claim and completion
(two NOTIFYs per task), the price of which is that PostgreSQL serialises
the commits of notifying transactions.  --listen
keeps a session LISTENing on tms_events meanwhile (reading and counting
what it receives); --fsync runs every cluster with fsync on (the default
of the test clusters is off), where a serialised commit waits for its
flush.

The baseline is the physical limit of the same pattern without tms: pgbench
with W clients on a table of the same shape, each transaction pair being
a claim (SELECT ... FOR UPDATE SKIP LOCKED; UPDATE picked) and a completion
(DELETE), the minimum any lease-based scheduler must do per task.

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


def base_settings(fsync):
    return {"max_connections": "50", "fsync": "on" if fsync else "off"}


def run_tms(root, workers, ntasks, events, listen=False, fsync=False):
    c = Cluster(os.path.join(tempfile.mkdtemp(prefix="tms-%d." % workers, dir=root), "data"),
                settings=dict(base_settings(fsync), **{
                    "tms.max_workers": str(workers), "tms.naptime": "'10ms'",
                    "tms.events": "'%s'" % events}))
    c.init()
    c.start()
    listener = None
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
        if listen:
            listener = Listener(c)
        t0 = time.monotonic()
        c.psql("ALTER SYSTEM RESET tms.enabled")
        c.psql("SELECT pg_reload_conf()")
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.scheduled_tasks") == "0",
                 timeout=600, interval=0.02, what="the tasks")
        rate = ntasks / (time.monotonic() - t0)
        if listener is not None:
            # every claim and every completion: two events a task
            want = 2 * ntasks if events in ("all", "task") else 0
            wait_for(lambda: listener.received >= want, timeout=60, what="the events")
        return rate
    finally:
        if listener is not None:
            listener.stop()
        c.destroy()


class Listener:
    """A session LISTENing on tms_events in a thread of its own, counting."""

    def __init__(self, cluster):
        import threading
        self.conn = cluster.connect()
        self.conn.cursor().execute("LISTEN tms_events")
        self.received = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import select
        while not self.stopping:
            select.select([self.conn], [], [], 0.2)
            self.conn.poll()
            self.received += len(self.conn.notifies)
            del self.conn.notifies[:]

    def stop(self):
        self.stopping = True
        self.thread.join()
        self.conn.close()


def run_raw(root, clients, ntasks, fsync=False):
    c = Cluster(os.path.join(tempfile.mkdtemp(prefix="raw-%d." % clients, dir=root), "data"),
                preload=("tms",), settings=dict(base_settings(fsync), **{"tms.max_workers": "0"}))
    c.init()
    c.start()
    try:
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        c.psql(RAW_TABLE)
        c.psql("INSERT INTO raw_tasks (task_name, task_instance, execution_time) "
               "SELECT 'noop', 't' || g, now() FROM generate_series(1, %d) g" % ntasks)
        c.psql("VACUUM ANALYZE raw_tasks")
        script = os.path.join(c.root, "claim.sql")
        with open(script, "w") as f:
            f.write(RAW_SCRIPT)
        per_client = ntasks // clients
        t0 = time.monotonic()
        subprocess.run(["pgbench", "-n", "-f", script, "-c", str(clients), "-j", str(clients),
                        "-t", str(per_client), c.dbname],
                       env=dict(os.environ, **c.env()), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.monotonic() - t0
        left = int(c.psql("SELECT count(*) FROM raw_tasks"))
        return (ntasks - left) / elapsed
    finally:
        c.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--events", action="append",
                    help="a value of tms.events to measure (repeat to compare)")
    ap.add_argument("--listen", action="store_true",
                    help="a session LISTENs on tms_events during each tms run")
    ap.add_argument("--fsync", action="store_true", help="fsync on in every cluster")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tms-bench-sched.", dir="/tmp")
    os.chmod(root, 0o755)
    events = a.events or ["job, purge, task-failure"]
    print("tasks per run: %d; machine: %d cores; fsync %s; listener: %s"
          % (a.tasks, os.cpu_count(), "on" if a.fsync else "off", "yes" if a.listen else "no"))
    labels = ["tms [%s]" % e for e in events]
    print("%-8s" % "workers" + "".join(" %*s" % (max(14, len(x)), x) for x in labels)
          + " %14s %7s" % ("raw claims/s", "ratio"))
    for w in (int(x) for x in a.workers.split(",")):
        tms = [run_tms(root, w, a.tasks, e, a.listen, a.fsync) for e in events]
        raw = run_raw(root, w, a.tasks, a.fsync)
        print("%-8d" % w + "".join(" %*.0f" % (max(14, len(x)), t) for x, t in zip(labels, tms))
              + " %14.0f %6.0f%%" % (raw, 100.0 * tms[0] / raw))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
