#!/usr/bin/python3
"""Claims per second of the tms scheduler against a server-side loop doing
the same work: the limit of the pattern on this machine.

Usage: bench/sched_claims.py [--tasks N] [--workers 1,2,4] [--rounds R]
                             [--events VALUE ...] [--listen] [--fsync]

One throwaway cluster per worker count W (tms.max_workers = W, naptime
10 ms).  Each round runs N tasks of a kind whose SQL handler does nothing,
twice, one after the other on the same cluster and tables:

  tms       the pool switched on (ALTER SYSTEM SET tms.enabled) with N due
            tasks; the W pool workers claim, CALL the handler in a
            subtransaction and settle, as in production.
  limit     W sessions, connected beforehand and held at an advisory lock,
            each CALLing a PL/pgSQL procedure that loops doing, per task,
            what a tms worker does: the claim statement (the task row and
            a slot of its kind, FOR UPDATE SKIP LOCKED) in a transaction of
            its own, then in a new transaction a subtransaction (BEGIN ...
            EXCEPTION) holding the handler's CALL and the settle statement
            (delete the row if its version is the claimed one, free the
            slot, write the run's row of tms.task_history).  PL/pgSQL keeps the statements' plans, so they are
            prepared as tms's are, and there is no client round trip.
            The claim and settle statements are not copied: they are read
            from src/sched/sched.c at run time, so the limit always does
            what the tms being measured does.

Both are timed the same way: from the start (pool switched on / lock
released, each by statements over the connection that polls, so neither
side's time includes starting a client) to the moment the task table is
empty, polled every 10 ms with one cheap query over one connection kept
for the whole run.  The figure is N / that time; the ratio tms / limit is
reported per round and as the median of the rounds, which alternate which
side runs first.

Beside the rate, the CPU time per task of the processes doing the work
(/proc/PID/stat, user + system): the pool workers and their supervisor
for tms, the W sessions' backends for the limit.  Other work on a shared
machine stretches wall time, far less the CPU time a task takes, so the
CPU ratio (limit's CPU per task / tms's) is the steadier figure there.

What tms does besides the limit: the claim's result is copied out (9
columns), its lease is published in shared memory, the handler runs as its
procedure's owner (a role switch), and the workers share the 2 cores with
their supervisor.  The limit's sessions are ordinary backends.

--events (repeated) measures the tms side once per value of tms.events in
each round, on the same cluster (set while the pool is paused; rounds
alternate the order): "none" sends nothing, "all" sends a task event with
every claim and completion (two NOTIFYs per task), the price of which is
that PostgreSQL serialises the commits of notifying transactions.  Without
--events, tms.events keeps its default.  --listen keeps a session
LISTENing on tms_events during each tms run (a thread reading and counting
what arrives; the run ends when the tasks are gone, then every event is
awaited untimed); --fsync runs the cluster with fsync on (the test
clusters' default is off), where a serialised commit waits for its flush.

Everything runs on a Unix socket; the run is bounded by --tasks, --rounds
and a timeout per run, and every cluster is destroyed at the end.
"""

import argparse
import os
import re
import select
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test"))
from pgcluster import Cluster, wait_for  # noqa: E402

SCHED_C = os.path.join(HERE, "..", "src", "sched", "sched.c")
LOCK_KEY = 1804
RUN_TIMEOUT = 600


LITERAL = r"\"(?:[^\"\\]|\\.)*\""


def c_string(name):
    """The SQL text of `static const char *name = "..." MACRO "...";` in
    sched.c, a MACRO being a `#define MACRO "..." "..."` of string literals
    (continued with backslashes) there."""
    with open(SCHED_C) as f:
        src = f.read()
    macros = {m.group(1): m.group(2) for m in re.finditer(
        r"#define ([A-Z_][A-Z0-9_]*)[ \t]*\\\n((?:[ \t]*%s[ \t]*\\?\n)+)" % LITERAL, src)}
    m = re.search(r"static const char \*%s =\s*((?:(?:%s|[A-Z_][A-Z0-9_]*)\s*)+);"
                  % (name, LITERAL), src)
    if m is None:
        raise SystemExit("bench: %s not found in %s" % (name, SCHED_C))
    text = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda t: macros[t.group(0)]
                  if t.group(0) in macros else t.group(0), m.group(1))
    return "".join(bytes(s, "utf-8").decode("unicode_escape")
                   for s in re.findall(r"\"((?:[^\"\\]|\\.)*)\"", text))


def bind(sql, names):
    """Replace $1..$n by PL/pgSQL expressions (names[0] for $1 ...)."""
    def sub(m):
        i = int(m.group(1))
        if i > len(names):
            raise SystemExit("bench: sched.c statement has a parameter $%d this bench "
                             "does not know: update bench/sched_claims.py" % i)
        return names[i - 1]
    return re.sub(r"\$(\d+)", sub, sql)


def limit_procedure():
    claim = bind(c_string("claim_sql"), ["NULL::text[]", "me", "pg_backend_pid()"])
    # the settle's parameters (sched.c, SETTLE_PARAMS): the task, its
    # claimed version, the run's row of tms.task_history (the claim's time,
    # the attempt, the executor, no policy/rule/table/job, recorded, no
    # error), then the due time at the claim
    settle = bind(c_string("complete_delete_sql"),
                  ["r.task_name", "r.task_instance", "r.version", "r.last_heartbeat",
                   "r.consecutive_failures + 1", "pg_backend_pid()", "NULL::integer",
                   "NULL::bigint", "NULL::bigint", "NULL::bigint", "true", "NULL::text",
                   "NULL::text", "r.execution_time"])
    return """
CREATE PROCEDURE bench_limit_loop(me text)
LANGUAGE plpgsql AS $bench$
DECLARE
    r record;
    got boolean;
    settled bigint;
BEGIN
    -- wait for the start signal (the driver holds the lock exclusively)
    PERFORM pg_advisory_lock_shared(%(key)d);
    PERFORM pg_advisory_unlock_shared(%(key)d);
    COMMIT;
    LOOP
        %(claim)s INTO r;
        got := FOUND;
        COMMIT;
        IF NOT got THEN
            EXIT WHEN NOT EXISTS (SELECT 1 FROM tms.scheduled_tasks);
            CONTINUE;   -- the rest is held by the other sessions
        END IF;
        BEGIN
            CALL public.noop(r.task_instance, r.task_data::jsonb);
            %(settle)s INTO settled;
            IF settled <> 1 THEN
                RAISE EXCEPTION 'lost the lease on %%', r.task_instance;
            END IF;
        EXCEPTION WHEN query_canceled THEN
            RAISE;
        END;
        COMMIT;
    END LOOP;
END
$bench$""" % {"key": LOCK_KEY, "claim": claim, "settle": settle}


def schedule(c, ntasks):
    c.psql("SELECT tms.schedule_task('noop', 't' || g) FROM generate_series(1, %d) g" % ntasks)
    c.psql("VACUUM ANALYZE tms.scheduled_tasks")
    c.psql("VACUUM ANALYZE tms.task_slots")


def wait_empty(poll):
    """Seconds until the task table is empty, polled over one connection."""
    deadline = time.monotonic() + RUN_TIMEOUT
    with poll.cursor() as cur:
        while time.monotonic() < deadline:
            cur.execute("SELECT EXISTS (SELECT 1 FROM tms.scheduled_tasks)")
            if not cur.fetchone()[0]:
                return time.monotonic()
            time.sleep(0.01)
    raise TimeoutError("tasks not done after %d s" % RUN_TIMEOUT)


def pause(c):
    c.psql("ALTER SYSTEM SET tms.enabled = off")
    c.psql("SELECT pg_reload_conf()")
    wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker' "
                            "AND state <> 'disabled'") == "0", what="the pool to pause")


class Listener:
    """A session LISTENing on tms_events in a thread of its own, counting."""

    def __init__(self, cluster):
        self.conn = cluster.connect()
        self.conn.cursor().execute("LISTEN tms_events")
        self.received = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            select.select([self.conn], [], [], 0.2)
            self.conn.poll()
            self.received += len(self.conn.notifies)
            del self.conn.notifies[:]

    def stop(self):
        self.stopping = True
        self.thread.join()
        self.conn.close()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids):
    """User + system CPU seconds the processes pids have used so far."""
    total = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def run_tms(c, poll, ntasks, events=None, listen=False):
    """(claims per second of the pool, CPU seconds per task of its workers
    and supervisor); events: the value of tms.events (None: its default),
    set while the pool is paused."""
    schedule(c, ntasks)
    if events is not None:
        c.psql("ALTER SYSTEM SET tms.events = '%s'" % events)
    pids = [int(p) for p in c.psql("SELECT pid FROM tms.workers WHERE role IN "
                                   "('worker', 'supervisor') AND pid IS NOT NULL").split()]
    listener = Listener(c) if listen else None
    try:
        cpu0 = cpu_seconds(pids)
        t0 = time.monotonic()
        with poll.cursor() as cur:
            cur.execute("ALTER SYSTEM RESET tms.enabled")
            cur.execute("SELECT pg_reload_conf()")
        t1 = wait_empty(poll)
        cpu1 = cpu_seconds(pids)
        if listener is not None:
            # every claim and every completion: two events a task
            want = 2 * ntasks if events in ("all", "task") else 0
            wait_for(lambda: listener.received >= want, timeout=60, what="the events")
    finally:
        if listener is not None:
            listener.stop()
    pause(c)
    return ntasks / (t1 - t0), (cpu1 - cpu0) / ntasks


def run_limit(c, poll, ntasks, sessions):
    schedule(c, ntasks)
    conns = [c.connect() for _ in range(sessions)]
    errors = []
    with poll.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%d)" % LOCK_KEY)

    def loop(i, conn):
        try:
            with conn.cursor() as cur:
                cur.execute("CALL bench_limit_loop(%s)", ("limit-%d" % i,))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(i, conn)) for i, conn in enumerate(conns)]
    for t in threads:
        t.start()
    # every session waits at the lock before the clock starts
    wait_for(lambda: c.one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                           "AND NOT granted") == sessions, what="the sessions to wait")
    pids = [conn.get_backend_pid() for conn in conns]
    cpu0 = cpu_seconds(pids)
    t0 = time.monotonic()
    with poll.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%d)" % LOCK_KEY)
    t1 = wait_empty(poll)
    cpu1 = cpu_seconds(pids)
    for t in threads:
        t.join(RUN_TIMEOUT)
    for conn in conns:
        conn.close()
    if errors:
        raise RuntimeError("limit loop failed: %s" % errors[0])
    return ntasks / (t1 - t0), (cpu1 - cpu0) / ntasks


def label(events):
    return "default" if events is None else events


def measure(root, workers, ntasks, rounds, events, listen, fsync):
    """[(tms rate per value of events, limit rate)] for each round."""
    c = Cluster(os.path.join(tempfile.mkdtemp(prefix="tms-%d." % workers, dir=root), "data"),
                settings={"tms.max_workers": str(workers), "tms.naptime": "'10ms'",
                          "max_connections": "50", "fsync": "on" if fsync else "off"})
    c.init()
    c.start()
    try:
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        c.psql("CREATE PROCEDURE noop(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$")
        c.psql("SELECT tms.register_task_kind('noop', 'noop(text,jsonb)', 1000)")
        c.psql(limit_procedure())
        pause(c)
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.task_slots WHERE kind = 'noop'")
                 == "1000", what="the slots of the kind")
        poll = c.connect()
        out = []
        for r in range(rounds):
            order = events if r % 2 == 0 else events[::-1]
            if r % 2 == 0:
                tms = {e: run_tms(c, poll, ntasks, e, listen) for e in order}
                lim = run_limit(c, poll, ntasks, workers)
            else:
                lim = run_limit(c, poll, ntasks, workers)
                tms = {e: run_tms(c, poll, ntasks, e, listen) for e in order}
            out.append(([tms[e] for e in events], lim))
            print("  W=%d round %d: %s, limit %.0f/s %.0f us CPU/task, load %.1f"
                  % (workers, r + 1, ", ".join(
                      "%s %.0f/s %.0f us CPU/task (ratio %.2f, CPU ratio %.2f)"
                      % (label(e), tms[e][0], tms[e][1] * 1e6, tms[e][0] / lim[0],
                         lim[1] / tms[e][1]) for e in events),
                     lim[0], lim[1] * 1e6, os.getloadavg()[0]))
            sys.stdout.flush()
        poll.close()
        return out
    finally:
        c.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--events", action="append",
                    help="a value of tms.events to measure (repeat to compare)")
    ap.add_argument("--listen", action="store_true",
                    help="a session LISTENs on tms_events during each tms run")
    ap.add_argument("--fsync", action="store_true", help="fsync on in every cluster")
    a = ap.parse_args()
    events = a.events or [None]
    root = tempfile.mkdtemp(prefix="tms-bench-sched.", dir="/tmp")
    os.chmod(root, 0o755)
    print("tasks per run: %d; rounds: %d; machine: %d cores, load %.1f; fsync %s; listener %s"
          % (a.tasks, a.rounds, os.cpu_count(), os.getloadavg()[0],
             "on" if a.fsync else "off", "yes" if a.listen else "no"))
    rows = []
    for w in (int(x) for x in a.workers.split(",")):
        rows.append((w, measure(root, w, a.tasks, a.rounds, events, a.listen, a.fsync)))
    print("%-8s %-28s %14s %16s %14s %10s %10s %10s %10s %10s" % (
        "workers", "tms.events", "tms claims/s", "limit claims/s", "ratio median",
        "ratio min-max", "tms us/task", "limit us/task", "CPU ratio", "CPU min-max"))
    for w, out in rows:
        for i, e in enumerate(events):
            ratios = [t[i][0] / l[0] for t, l in out]
            cpu_ratios = [l[1] / t[i][1] for t, l in out]
            print("%-8d %-28s %14.0f %16.0f %14.2f %5.2f-%.2f %10.0f %10.0f %10.2f %5.2f-%.2f" % (
                w, label(e), statistics.median(t[i][0] for t, _ in out),
                statistics.median(l[0] for _, l in out),
                statistics.median(ratios), min(ratios), max(ratios),
                statistics.median(t[i][1] for t, _ in out) * 1e6,
                statistics.median(l[1] for _, l in out) * 1e6,
                statistics.median(cpu_ratios), min(cpu_ratios), max(cpu_ratios)))
    os.rmdir(root)


if __name__ == "__main__":
    main()
