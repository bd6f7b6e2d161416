"""
test_budgets.py -- budgets end to end (doc/policies.md, "Budgets"), on a
cluster whose sessions' clock is set by libfaketime (test_schedules.py's
FakedClock), its tasks driven by CALL tms.run_pending() as pg_cron drives
them, so that an hour passes without waiting for it:

  - 50 tables of a catalog are candidates of a rule whose budget is 5 jobs
    per window (no time window: a rolling hour): one evaluation submits 50
    jobs; exactly 5 start, the 45 others wait (their state says "waiting
    for budget: 5 of 5 jobs per window ...", as tms.maintenance_jobs'
    waiting_for does), their tasks due when the hour of the first 5 ends;
    an hour later the next 5 start, the oldest first, and so on until all
    50 have run, never more than 5 started in any hour;
  - a rule with a budget of bytes rewritten per hour: its jobs run one at a
    time, and once the hour's bytes reach the budget the next job waits
    until the oldest of them are an hour old; the budget is exceeded by at
    most one job's bytes.

The jobs are those of the legacy engine "spark" with no
tms.maintenance_handler: a started job stays running until
tms.finish_operation, as if an external executor ran it; the bytes such an
executor rewrote are recorded as an engine's count would be
(bytes_rewritten).  The engine server limit (max_concurrent_jobs) is
tested in test/regress/sql/policy_budgets.sql.

Run: /usr/bin/python3 -m pytest -q test/integration/test_budgets.py
"""

import concurrent.futures
import os
import shutil
import sys
import tempfile
import uuid
from datetime import datetime, timedelta, timezone

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import opsworld as ow  # noqa: E402
from test_schedules import FAKETIME_LIB, SETTINGS, _faked_cluster, _faked_server  # noqa: E402

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    name = "bud_%s" % uuid.uuid4().hex[:6]
    return tms_world("bud", settings=SETTINGS, s3=None, catalog=dict(catalog_name=name))


@pytest.fixture
def faked(env):
    """A cluster whose sessions' clock is set, with server cat of the
    module's catalog; yields (cluster, clock, run) where run() is one
    CALL tms.run_pending() and returns how many tasks ran."""
    if not os.path.exists(FAKETIME_LIB):
        pytest.fail("libfaketime is not installed (scripts/install-deps.sh installs it)")
    root = tempfile.mkdtemp(prefix="tms-bud-", dir="/tmp")
    os.chmod(root, 0o755)
    at = datetime(2027, 3, 1, 9, 0, tzinfo=timezone.utc)
    c, clock = _faked_cluster(os.path.join(root, "pg"), at)
    conn = None
    try:
        _faked_server(c, env)
        conn = c.connect()

        def run():
            return c.query("CALL tms.run_pending(500)", conn=conn)[0][0]

        yield c, clock, run
    except Exception:
        sys.stderr.write("---- faked server log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        if conn is not None:
            conn.close()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


def tables(env, ns, n):
    """n small synthetic tables in namespace ns (one metadata file)."""
    loc = "file://%s/wh/%s/t0" % (env["file_root"], ns)
    res = ow.synth_table(loc, "--data-files", "2", "--no-data-bytes", "--codec", "null",
                         "--snapshots", "1")
    env["catalog"].register(ns, "t0", res["metadata_location"])
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: env["catalog"].register(ns, "t%d" % i, res["metadata_location"]),
                    range(1, n)))


def policy(c, ns, name):
    """A group over ns, a policy, and its rule: every table is a candidate
    (one commit, threshold 1; catch-up) and its condition true."""
    c.query("SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s)",
            (name, ns))
    c.query("SELECT tms.create_policy(%s, %s)", (name, name))
    return c.one("SELECT tms.add_rule(%s, 'snapshot-expiry', 'spark',"
                 " counters => '{\"commits-added\": 1}', condition => 'true',"
                 " min_interval => '0')", (name,))


def jobs(c, rule):
    return c.query("SELECT id, state, reason, waiting_for, started_at, finished_at"
                   " FROM tms.maintenance_jobs WHERE rule_id = %s ORDER BY id", (rule,))


def test_jobs_per_window_hold_over_every_window(env, faked):
    c, clock, run = faked
    ns = "bud_w"
    tables(env, ns, 50)
    rule = policy(c, ns, "bud-w")
    c.query("SELECT tms.set_budget('bud-w', %s, jobs_per_window => 5)", (rule,))
    rows = c.query("SELECT decision FROM tms.evaluate_now('bud-w')")
    assert [r[0] for r in rows] == ["submitted"] * 50, rows
    # no job has started: every candidate's job is within the budget so far
    ran = run()
    assert ran >= 50, ran
    js = jobs(c, rule)
    started = [j for j in js if j[1] == "running"]
    waiting = [j for j in js if j[1] == "pending"]
    assert len(started) == 5 and len(waiting) == 45, js
    # the others say why they wait (the state's reason, and waiting_for)
    for j in waiting:
        assert j[2].startswith("waiting for budget: 5 of 5 jobs per window of rule %d" % rule), j
        assert j[3] is not None and j[3].startswith("waiting for budget: 5 of 5 jobs per window"), j
    # their tasks are due when the first five are an hour old
    first = min(j[4] for j in started)
    due = c.query("SELECT min(s.execution_time), max(s.execution_time) FROM tms.scheduled_tasks s"
                  " JOIN tms.table_maintenance_job j ON j.task_instance = s.task_instance"
                  " WHERE j.rule_id = %s AND j.finished_at IS NULL", (rule,))[0]
    assert due[0] == due[1] == first + timedelta(hours=1), (due, first)
    # finished, they still count in their hour: nothing more starts
    for j in started:
        assert c.one("SELECT tms.finish_operation(%s)", (j[0],)) is True
    run()
    assert sum(1 for j in jobs(c, rule) if j[1] == "pending") == 45
    now = c.one("SELECT now()")
    # window after window, five more start: the five that waited longest
    for window in range(1, 10):
        queued = sorted(j[0] for j in jobs(c, rule) if j[1] == "pending")
        now += timedelta(minutes=61)
        clock.set(now)
        run()
        js = jobs(c, rule)
        running = [j[0] for j in js if j[1] == "running"]
        assert running == queued[:5], (window, running, queued[:6])
        assert sum(1 for j in js if j[1] == "pending") == 45 - 5 * window
        for j in running:
            assert c.one("SELECT tms.finish_operation(%s)", (j,)) is True
    js = jobs(c, rule)
    assert [j[1] for j in js] == ["succeeded"] * 50
    # the budget held: no hour saw more than five starts
    starts = sorted(j[4] for j in js)
    for i in range(len(starts) - 5):
        assert starts[i + 5] - starts[i] >= timedelta(hours=1), (i, starts[i:i + 6])


def test_bytes_rewritten_per_hour(env, faked):
    c, clock, run = faked
    ns = "bud_b"
    tables(env, ns, 6)
    rule = policy(c, ns, "bud-b")
    budget = 2500
    c.query("SELECT tms.set_budget('bud-b', %s, bytes_rewritten_per_hour => %s)", (rule, budget))
    assert len(c.query("SELECT 1 FROM tms.evaluate_now('bud-b')")) == 6
    now = c.one("SELECT now()")
    done = []
    for step in range(6):
        run()
        js = jobs(c, rule)
        running = [j for j in js if j[1] == "running"]
        if not running:
            # over the budget: waiting until the oldest bytes are an hour old
            pend = [j for j in js if j[1] == "pending"]
            assert pend and all("bytes rewritten per hour of rule %d in the last hour" % rule
                                in j[3] for j in pend), pend
            hour = c.one("SELECT coalesce(sum(bytes_rewritten), 0) FROM tms.table_maintenance_job"
                         " WHERE rule_id = %s AND finished_at > now() - interval '1 hour'", (rule,))
            assert hour >= budget
            now += timedelta(minutes=61)
            clock.set(now)
            run()
            js = jobs(c, rule)
            running = [j for j in js if j[1] == "running"]
        # one at a time; the others wait for its end
        assert len(running) == 1, js
        for j in js:
            if j[1] == "pending":
                assert j[2].startswith("waiting for budget: "), j
                assert "job %d runs" % running[0][0] in j[3], j
        # what ended in the hour before this start was under the budget
        before = c.one("SELECT coalesce(sum(bytes_rewritten), 0) FROM tms.table_maintenance_job"
                       " WHERE rule_id = %s AND finished_at > %s - interval '1 hour'",
                       (rule, running[0][4]))
        assert before < budget, (step, before)
        # the engine rewrote 1000 bytes
        c.query("UPDATE tms.table_maintenance_job SET bytes_rewritten = 1000 WHERE id = %s",
                (running[0][0],))
        assert c.one("SELECT tms.finish_operation(%s)", (running[0][0],)) is True
        done.append(running[0][0])
        now = c.one("SELECT now()") + timedelta(minutes=5)
        clock.set(now)
    assert done == sorted(done) and len(done) == 6
    # over any hour: at most the budget and one job's bytes
    ends = c.query("SELECT finished_at, bytes_rewritten FROM tms.table_maintenance_job"
                   " WHERE rule_id = %s ORDER BY finished_at", (rule,))
    for t, _ in ends:
        assert sum(b for u, b in ends if t - timedelta(hours=1) < u <= t) <= budget + 1000
