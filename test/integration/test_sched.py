"""Scheduler core across processes: workers and run_pending sessions
together, crashes, stolen leases, retries, caps, one execution per task.

Each test uses a cluster of its own with short intervals, so that lease
expiry and backoff are observable in seconds.
"""

import os
import signal
import threading
import time

import psycopg2
import pytest

from pgcluster import wait_for

FAST = {
    "tms.naptime": "'50ms'",
    "tms.heartbeat_interval": "'200ms'",
    "tms.missed_heartbeats_limit": "5",      # a lease is dead after 1 s
    "tms.retry_delay": "'100ms'",
}


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


@pytest.fixture
def cluster(new_cluster):
    c = new_cluster(settings=FAST)
    c.psql("CREATE EXTENSION tms")
    c.psql("""
        CREATE TABLE execs (instance text, note text, pid int DEFAULT pg_backend_pid(),
                            started timestamptz, finished timestamptz DEFAULT clock_timestamp());
    """)
    wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker' AND state = 'idle'") == "4",
             what="the pool")
    return c


def count(c, sql):
    return int(c.psql(sql))


def test_ten_thousand_tasks_run_exactly_once(cluster):
    c = cluster
    c.psql("""
        CREATE PROCEDURE rec(i text, d jsonb) LANGUAGE sql
            AS $$ INSERT INTO execs (instance) VALUES (i) $$;
        SELECT tms.register_task_kind('rec', 'rec(text,jsonb)', 8);
    """)
    # switch the pool off while loading, so workers and sessions start together
    c.psql("ALTER SYSTEM SET tms.enabled = off")
    c.psql("SELECT pg_reload_conf()")
    wait_for(lambda: count(c, "SELECT count(*) FROM tms.workers WHERE state = 'disabled'") == 5,
             what="the pool to pause")
    c.psql("SELECT tms.schedule_task('rec', 't' || g) FROM generate_series(1, 10000) g")
    assert count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 10000

    stop = threading.Event()
    errors = []

    def session():
        conn = c.connect()
        try:
            with conn.cursor() as cur:
                deadline = time.monotonic() + 300
                while not stop.is_set() and time.monotonic() < deadline:
                    cur.execute("CALL tms.run_pending(200, ARRAY['rec'])")
                    executed, _ = cur.fetchone()
                    if executed == 0 and count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 0:
                        break
        except Exception as e:          # reported below
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=session) for _ in range(2)]
    c.psql("ALTER SYSTEM RESET tms.enabled")
    c.psql("SELECT pg_reload_conf()")
    for t in threads:
        t.start()
    try:
        wait_for(lambda: count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 0,
                 timeout=300, interval=0.5, what="all tasks to run")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors

    assert count(c, "SELECT count(*) FROM execs") == 10000
    assert count(c, "SELECT count(DISTINCT instance) FROM execs") == 10000
    # both kinds of executor took part
    by = c.psql("""
        SELECT string_agg(DISTINCT CASE WHEN a.backend_type = 'tms worker' THEN 'worker'
                                        ELSE 'session' END, ',')
          FROM execs e LEFT JOIN pg_stat_activity a ON a.pid = e.pid""")
    assert by == "session,worker", by
    assert count(c, "SELECT count(*) FROM tms.task_slots WHERE task_instance IS NOT NULL") == 0


def test_cap_holds_across_workers_and_sessions(cluster):
    c = cluster
    c.psql("""
        CREATE PROCEDURE slowish(i text, d jsonb) LANGUAGE plpgsql AS $$
        DECLARE t0 timestamptz := clock_timestamp();
        BEGIN
            PERFORM pg_sleep(0.3);
            INSERT INTO execs (instance, started) VALUES (i, t0);
        END $$;
        SELECT tms.register_task_kind('capped', 'slowish(text,jsonb)', 2);
        SELECT tms.schedule_task('capped', 'c' || g) FROM generate_series(1, 12) g;
    """)
    conn = c.connect()
    with conn.cursor() as cur:          # a session joins the four workers
        cur.execute("CALL tms.run_pending(12, ARRAY['capped'])")
    wait_for(lambda: count(c, "SELECT count(*) FROM execs") == 12, timeout=60,
             what="the capped tasks")
    # at no instant did more than two run: count overlaps at each start
    peak = count(c, """
        SELECT max(n) FROM (
            SELECT (SELECT count(*) FROM execs b
                     WHERE b.started <= a.started AND b.finished > a.started) AS n
              FROM execs a) s""")
    assert peak <= 2, peak
    assert peak == 2   # and the cap was used


def test_sigkill_mid_task_reclaims_after_lease_expiry(cluster):
    c = cluster
    marker_dir = c.root
    c.psql("""
        CREATE PROCEDURE slow(i text, d jsonb) LANGUAGE plpgsql AS $$
        DECLARE marker text := %s || '/marker-' || i;
        BEGIN
            -- a first attempt leaves a marker outside the transaction; a
            -- later attempt sees it and acts idempotently
            IF (pg_stat_file(marker, true)).size IS NOT NULL THEN
                INSERT INTO execs (instance, note) VALUES (i, 'saw the first attempt');
                RETURN;
            END IF;
            EXECUTE format('COPY (SELECT 1) TO %%L', marker);
            PERFORM pg_sleep(60);
            INSERT INTO execs (instance, note) VALUES (i, 'first attempt finished');
        END $$;
        SELECT tms.register_task_kind('slow', 'slow(text,jsonb)', 4);
        SELECT tms.schedule_task('slow', 'k1');
    """ % ("'" + marker_dir + "'"))
    owner = wait_for(lambda: c.psql(
        "SELECT owner_pid FROM tms.tasks WHERE instance = 'k1' AND state = 'running'"),
        what="the task to start")
    wait_for(lambda: os.path.exists(os.path.join(marker_dir, "marker-k1")),
             what="the first attempt's marker")
    pm = c.postmaster_pid()

    os.kill(int(owner), signal.SIGKILL)

    wait_for(lambda: "all server processes terminated; reinitializing" in c.log_tail(500),
             what="the crash restart")
    try:
        wait_for(lambda: c.psql("SELECT note FROM execs WHERE instance = 'k1'") != "",
                 timeout=60, what="the task to be executed again")
    except TimeoutError as e:
        raise AssertionError("%s; tasks: %s; activity: %s" % (
            e, c.psql("SELECT * FROM tms.tasks"),
            c.psql("SELECT pid, backend_type, wait_event, query FROM pg_stat_activity "
                   "WHERE backend_type LIKE 'tms%'")))
    assert c.postmaster_pid() == pm
    assert c.psql("SELECT note FROM execs") == "saw the first attempt"
    assert count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 0
    assert 'released the lease on task "slow" instance "k1"' in c.log_tail(500)


def test_worker_whose_lease_is_stolen_writes_nothing(cluster):
    c = cluster
    # the task waits for an advisory lock the test holds until the lease
    # is taken over (a nap of fixed length could end first under load)
    holder = c.connect()
    holder.autocommit = True
    with holder.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(424243)")
    c.psql("""
        CREATE PROCEDURE nap(i text, d jsonb) LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO execs (instance, note) VALUES (i, 'written by the old owner');
            PERFORM pg_advisory_lock(424243);
            PERFORM pg_advisory_unlock(424243);
        END $$;
        SELECT tms.register_task_kind('nap', 'nap(text,jsonb)', 4);
        SELECT tms.schedule_task('nap', 's1');
    """)
    try:
        wait_for(lambda: c.psql("SELECT state FROM tms.tasks WHERE instance = 's1'") == "running",
                 what="the task to start")
        # an operator (or a second scheduler) takes the lease over
        c.psql("""
            UPDATE tms.scheduled_tasks
               SET version = version + 1, picked_by = 'thief',
                   last_heartbeat = now() + interval '1 hour'
             WHERE task_instance = 's1'""")
    finally:
        holder.close()
    wait_for(lambda: 'lost the lease on task "nap" instance "s1"' in c.log_tail(200),
             timeout=30, what="the old owner to give up")
    assert count(c, "SELECT count(*) FROM execs") == 0
    assert c.psql("SELECT picked_by FROM tms.scheduled_tasks WHERE task_instance = 's1'") == "thief"


def test_failing_handler_is_retried_with_backoff(cluster):
    c = cluster
    c.psql("""
        CREATE SEQUENCE attempts;
        CREATE TABLE failures (n int, delay interval);
        CREATE FUNCTION log_failure() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.consecutive_failures > OLD.consecutive_failures THEN
                -- qualified: it fires in the workers, whose search_path
                -- is tms's own (pg_catalog, pg_temp)
                INSERT INTO public.failures VALUES (NEW.consecutive_failures,
                                             NEW.execution_time - NEW.last_failure);
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER log_failure AFTER UPDATE ON tms.scheduled_tasks
            FOR EACH ROW EXECUTE FUNCTION log_failure();
        CREATE PROCEDURE flaky(i text, d jsonb) LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('attempts') <= 3 THEN
                RAISE EXCEPTION 'transient failure %', currval('attempts');
            END IF;
            INSERT INTO execs (instance, note) VALUES (i, 'succeeded');
        END $$;
        SELECT tms.register_task_kind('flaky', 'flaky(text,jsonb)', 1);
        SELECT tms.schedule_task('flaky', 'f1');
    """)
    wait_for(lambda: c.psql("SELECT note FROM execs") == "succeeded", timeout=30,
             what="the fourth attempt to succeed")
    rows = c.psql("SELECT n, extract(epoch FROM delay) * 1000 FROM failures ORDER BY n")
    delays = {int(n): float(ms) for n, ms in (r.split("|") for r in rows.splitlines())}
    assert sorted(delays) == [1, 2, 3]
    # tms.retry_delay doubling (100 ms, 200 ms, 400 ms), each retry waiting
    # between half of it and all of it (jitter)
    for k, backoff in ((1, 100), (2, 200), (3, 400)):
        assert backoff / 2 - 0.5 <= delays[k] <= backoff + 0.5, delays
    assert count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 0
    assert count(c, "SELECT last_value FROM attempts") == 4


def test_second_executor_is_refused_while_a_worker_runs_the_task(cluster):
    c = cluster
    # the task runs until the test lets it go: it waits for an advisory
    # lock the test holds (a nap of fixed length could end, under load,
    # before the second executor is tried; the supervisor renews the
    # lease meanwhile)
    holder = c.connect()
    holder.autocommit = True
    with holder.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(424242)")
    c.psql("""
        CREATE PROCEDURE nap(i text, d jsonb) LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_lock(424242);
            PERFORM pg_advisory_unlock(424242);
            INSERT INTO execs (instance, note) VALUES (i, 'worker');
        END $$;
        SELECT tms.register_task_kind('nap', 'nap(text,jsonb)', 4);
        SELECT tms.schedule_task('nap', 'p1');
    """)
    try:
        wait_for(lambda: c.psql("SELECT state FROM tms.tasks WHERE instance = 'p1'") == "running",
                 what="the worker to start the task")
        conn = c.connect()
        with conn.cursor() as cur:
            with pytest.raises(psycopg2.Error) as e:
                cur.execute("CALL tms.run_task('nap', 'p1')")
        assert e.value.pgcode == "55006", (e.value.pgcode, str(e.value))
        assert "is being executed by tms worker" in e.value.diag.message_primary
    finally:
        holder.close()
    wait_for(lambda: count(c, "SELECT count(*) FROM tms.scheduled_tasks") == 0,
             what="the worker to finish")
    assert c.psql("SELECT string_agg(note, ',') FROM execs") == "worker"
