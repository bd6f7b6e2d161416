"""
test_cadence.py -- adaptive cadence, end to end (doc/policies.md,
"Adaptive cadence"), with tms's own engine on a table of the test catalog:

  - a snapshot-expiry rule on a crontab of every minute, on a table with
    nothing to expire: its jobs change nothing, so it backs off: its jobs
    run at the firings 1, 2, 4 and then (tms.backoff_max = 4 min) 4
    minutes apart, the firings between are passed over, and each job says
    "backed off until X after N no-op runs"; then a commit to the table
    (tms.notify_commit, its commit-job observes it) ends the back-off at
    once: the next firing runs it, and the back-off starts again at 1x;
  - an orphan-cleanup rule follows the bytes it reclaims: below its
    min-reclaimed-bytes it backs off, doubling; a run that reclaims more
    brings it back to every firing.

The cluster's sessions run on a clock set by libfaketime (test_schedules'
FakedClock), so no test waits for a minute to start: each step sets the
clock 5 s past the next minute's start and runs every task then due with
CALL tms.run_pending() (the pool is off: libfaketime does not reach
background workers).  The module's own cluster holds the catalog's
pointers.

Run: /usr/bin/python3 -m pytest -q test/integration/test_cadence.py
"""

import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster  # noqa: E402
from test_schedules import FakedClock, prepare_append  # noqa: E402

pytestmark = pytest.mark.own_cluster

SETTINGS = dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "'1h'",
                                 "tms.enabled": "off",
                                 "tms.backoff_max": "'4min'"})
DAY = 86400


@pytest.fixture(scope="module")
def world(tms_world):
    w = tms_world("cad", s3=None, catalog={})
    root = tempfile.mkdtemp(prefix="tms-cadence-", dir="/tmp")
    os.chmod(root, 0o755)
    pgroot = os.path.join(root, "pg")
    os.makedirs(pgroot)
    os.chmod(pgroot, 0o755)
    clock = FakedClock(pgroot)
    start = datetime.now(timezone.utc).replace(second=30, microsecond=0)
    clock.set(start)
    c = Cluster(os.path.join(pgroot, "data"), preload=("tms",), settings=SETTINGS,
                server_env=clock.server_env())
    conn = None
    try:
        c.init()
        c.start()
        c.create_database()
        c.psql("CREATE EXTENSION tms")
        c.psql("""CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                    uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
                    allowed_locations 'file://%s/');
                  CREATE USER MAPPING FOR PUBLIC SERVER cat;"""
               % (w["catalog"].uri, w["file_root"], w["file_root"]))
        conn = c.connect()
        yield dict(w, pg=c, clock=clock, conn=conn, now=[start])
    except Exception:
        sys.stderr.write("---- faked cluster log ----\n%s\n" % c.log_tail(120))
        raise
    finally:
        if conn is not None:
            conn.close()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


def q(w, sql, args=None):
    return w["pg"].query(sql, args)


def one(w, sql, args=None):
    return w["pg"].one(sql, args)


def drain(w):
    """Run every task due now in the session (bounded)."""
    for _ in range(100):
        if w["pg"].query("CALL tms.run_pending()", conn=w["conn"])[0][0] == 0:
            return
    raise AssertionError("tasks kept coming due")


def tick(w):
    """The clock to 5 s past the next minute's start (a firing of
    "* * * * *"), then every task due; returns that minute."""
    minute = w["now"][0].replace(second=0, microsecond=0) + timedelta(minutes=1)
    w["now"][0] = minute + timedelta(seconds=5)
    w["clock"].set(w["now"][0])
    drain(w)
    return minute


def make_table(w, ns, name):
    loc = "file://%s/wh/%s/%s" % (w["file_root"], ns, name)
    res = ow.synth_table(loc, "--data-files", "2", "--no-data-bytes", "--codec", "null",
                         "--snapshots", "1")
    w["catalog"].register(ns, name, res["metadata_location"])
    return loc


def rule_on(w, ns, op, options):
    """A policy over table ns.t with one rule of op on tms's engine at every
    minute, no cooldown of its own; returns the rule id once the policy's
    first run gave the table its baseline."""
    q(w, "SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s)",
      (ns + "-g", ns))
    q(w, "SELECT tms.create_policy(%s, %s)", (ns + "-p", ns + "-g"))
    rule = one(w, "SELECT tms.add_rule(%s, %s, 'local', condition => 'true',"
                  " options => %s::jsonb, schedule => '{\"crontab\": \"* * * * *\"}',"
                  " min_interval => '0')", (ns + "-p", op, options))
    drain(w)
    assert one(w, "SELECT count(*) FROM tms.rule_baselines WHERE rule_id = %s", (rule,)) == 1
    return rule


def jobs(w, rule):
    return q(w, "SELECT id, state, date_trunc('minute', created_at), bytes_deleted, message"
                " FROM tms.table_maintenance_job WHERE rule_id = %s ORDER BY id", (rule,))


def backoff(w, rule):
    return q(w, "SELECT backoff_level, cooldown_until FROM tms.rule_baselines"
                " WHERE rule_id = %s", (rule,))[0]


def test_runs_that_change_nothing_back_off_and_a_commit_brings_the_rule_back(world):
    w = world
    ns = "cad_e"
    make_table(w, ns, "t")
    rule = rule_on(w, ns, "snapshot-expiry", "{}")
    first = None
    ran = []
    for _ in range(12):
        minute = tick(w)
        first = first or minute
        js = jobs(w, rule)
        assert all(j[1] == "succeeded" for j in js), js
        if len(js) > len(ran):
            assert len(js) == len(ran) + 1 and js[-1][2] == minute, js
            ran.append(int((minute - first).total_seconds() // 60))
            level, until = backoff(w, rule)
            assert level == len(ran)
            # the back-off counts from the firing, to a firing: 1x, 2x, 4x, then the cap
            assert until == minute + timedelta(minutes=min(2 ** (level - 1), 4)), (level, until)
            assert re.search(r"backed off until .* after %d no-op runs? \(expired no snapshot\)"
                             % level, js[-1][4]), js[-1][4]
        else:
            # a firing while backed off is passed over: not even evaluated
            assert one(w, "SELECT count(*) FROM tms.evaluation_log WHERE rule_id = %s"
                          " AND evaluated_at >= %s", (rule, minute)) == 0
    assert ran == [0, 1, 3, 7, 11], ran
    assert one(w, "SELECT noop_runs FROM tms.rule_backoffs WHERE rule_id = %s", (rule,)) == 5
    assert "expired no snapshot" in one(w, "SELECT reason FROM tms.rule_backoffs"
                                           " WHERE rule_id = %s", (rule,))

    # a commit: its commit-job observes it, and the back-off ends at once
    ow.commit(w["catalog"], ns, "t", prepare_append(w, ns, "t", seed=7))
    assert one(w, "SELECT tms.notify_commit('cat', %s, 't')", (ns,)) is True
    drain(w)
    assert backoff(w, rule) == (0, None)
    assert one(w, "SELECT count(*) FROM tms.rule_backoffs WHERE rule_id = %s", (rule,)) == 0
    # the next firing runs it (not the one the back-off would have allowed,
    # 4 minutes after the last job), and the back-off starts again at 1x
    minute = tick(w)
    assert len(jobs(w, rule)) == 6 and jobs(w, rule)[-1][2] == minute
    assert backoff(w, rule) == (1, minute + timedelta(minutes=1))


def test_orphan_cleanup_cadence_follows_the_bytes_it_reclaims(world):
    w = world
    ns = "cad_o"
    loc = make_table(w, ns, "t")
    rule = rule_on(w, ns, "orphan-cleanup", '{"min-reclaimed-bytes": 2000}')
    old = time.time() - 4 * DAY

    def orphan(name, size):
        ow.plant(w["st"], "%s/data/%s.parquet" % (loc, name), data=b"x" * size, mtime=old)

    minutes = []
    # nothing to reclaim: backs off (1x)
    minutes.append(tick(w))
    assert backoff(w, rule) == (1, minutes[-1] + timedelta(minutes=1))
    # 100 bytes, less than min-reclaimed-bytes: backs off further (2x)
    orphan("small", 100)
    minutes.append(tick(w))
    assert backoff(w, rule) == (2, minutes[-1] + timedelta(minutes=2))
    # 5000 bytes: the firing between is passed over, then the run reclaims
    # them and the rule is back to every firing
    orphan("big", 5000)
    skipped = tick(w)
    minutes.append(tick(w))
    assert backoff(w, rule)[0] == 0
    minutes.append(tick(w))
    assert backoff(w, rule) == (1, minutes[-1] + timedelta(minutes=1))
    js = jobs(w, rule)
    assert [j[1] for j in js] == ["succeeded"] * 4, js
    assert [j[2] for j in js] == minutes and skipped not in minutes
    assert [j[3] for j in js] == [0, 100, 5000, 0], js
    assert "reclaimed 100 bytes, less than min-reclaimed-bytes 2000" in js[1][4]
    assert "backed off" not in (js[2][4] or "")
