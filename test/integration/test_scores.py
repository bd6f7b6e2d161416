"""
test_scores.py -- rule scores end to end (doc/policies.md, "Scores and the
order of jobs"; doc/dsl.md, healthScore):

  - 50 tables of different health in a real catalog, one rule scoring
    them by 100 - healthScore, one job at a time (tms.max_active_operations
    = 1): the jobs start in the order of their scores, highest first, and
    tms.table_health says why each of the others waits;
  - the starvation bound: a job of score 0 is overtaken by jobs of score
    100 submitted after it only while they came within (100 - 0) x
    tms.score_aging of it; the first submitted later than that starts
    after it.

The module's own cluster has its sessions' clock set by libfaketime (as
test_schedules.py does), so that the bound is checked over two hours of
faked time without waiting; its pool is off and a session drives the
maintenance tasks with CALL tms.run_pending(), as pg_cron would.  A job of
the legacy engine "spark" with no tms.maintenance_handler stays running
until tms.finish_operation, so a started job is easy to see and to finish.

Run: /usr/bin/python3 -m pytest -q test/integration/test_scores.py
"""

import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster  # noqa: E402

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SETTINGS = dict(FAST_WORKERS, **{"tms.enabled": "off", "tms.max_active_operations": "1",
                                 "tms.score_aging": "'1min'"})

pytestmark = pytest.mark.own_cluster


class FakedClock:
    """The clock of the cluster's sessions through libfaketime: an offset
    from the real time in a file read at every call."""

    def __init__(self, root):
        self.path = os.path.join(root, "faketime")

    def set(self, instant):
        with open(self.path + ".new", "w") as f:
            f.write("%+ds\n" % int(round(instant.timestamp() - time.time())))
        os.chmod(self.path + ".new", 0o644)
        os.replace(self.path + ".new", self.path)

    def server_env(self):
        return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": self.path,
                "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1"}


@pytest.fixture(scope="module")
def env(tms_world):
    if not os.path.exists(FAKETIME_LIB):
        pytest.fail("libfaketime is not installed (scripts/install-deps.sh installs it)")
    w = tms_world("score", s3=None, catalog={}, pointers="own", cluster=False, pool=None)
    root = tempfile.mkdtemp(prefix="tms-score-pg-", dir=os.environ.get("TMS_TEST_ROOT") or "/tmp")
    os.chmod(root, 0o755)
    clock = FakedClock(root)
    clock.set(datetime.now(timezone.utc))
    c = Cluster(os.path.join(root, "data"), preload=("tms",), settings=SETTINGS,
                server_env=clock.server_env())
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
        w["pg"] = c
        w["clock"] = clock
        yield w
    except Exception:
        sys.stderr.write("---- server log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


def make_table(env, ns, name, *args):
    loc = "file://%s/wh/%s/%s" % (env["file_root"], ns, name)
    res = ow.synth_table(loc, "--no-data-bytes", "--codec", "null", "--snapshots", "1", *args)
    env["catalog"].register(ns, name, res["metadata_location"])


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def one(env, sql, args=None):
    return env["pg"].one(sql, args)


def running(env, rules):
    return q(env, "SELECT j.id, t.table_name FROM tms.table_maintenance_job j"
                  "  JOIN tms.tables t ON t.id = j.table_id"
                  " WHERE j.rule_id = ANY (%s) AND j.state = 'running'", (rules,))


def start_next(env, rules):
    """Drive the maintenance tasks as one worker would (several claims:
    the best starts, the others are deferred at tms.max_active_operations);
    returns the table of the one job then running."""
    q(env, "CALL tms.run_pending(5, '{maintenance}')")
    rows = running(env, rules)
    assert len(rows) == 1, rows
    return rows[0]


def policy(env, name, ns, score, condition="true"):
    q(env, "SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s)",
      (name, ns))
    q(env, "SELECT tms.create_policy(%s, %s)", (name, name))
    return one(env, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}',"
                    " condition => %s, score => %s)", (name, condition, score))


def test_the_highest_scores_start_first(env):
    # table i: 10 + i data files of 100 records, none small (target 512
    # bytes), (7 i mod 11) position delete files of one record each:
    # healthScore = 100 - 25 x deletes / records
    for i in range(50):
        make_table(env, "fleet", "t%02d" % i, "--data-files", 10 + i,
                   "--pos-deletes", (i * 7) % 11, "--property", "write.target-file-size-bytes=512")
    rule = policy(env, "fleet", "fleet", "100 - healthScore")
    rows = q(env, "SELECT decision, count(*) FROM tms.evaluate_now('fleet') GROUP BY 1")
    assert rows == [("submitted", 50)], rows
    scores = dict(q(env, "SELECT table_name, score FROM tms.evaluation_log WHERE rule_id = %s",
                    (rule,)))
    assert len(scores) == 50
    assert len(set(scores.values())) >= 10, scores
    # no deletes: healthy; 7 deleted rows of 1100: 100 - 25 x 7 / 1100
    assert scores["t00"] == 0.0
    assert abs(scores["t01"] - 25.0 * 7 / 1100) < 1e-9, scores["t01"]
    expl = one(env, "SELECT score_explanation FROM tms.evaluation_log"
                    " WHERE rule_id = %s AND table_name = 't01'", (rule,))
    assert "healthScore = " in expl and "score: " in expl, expl

    order = []
    first = start_next(env, [rule])
    order.append(first[1])
    # the others wait, each saying how many rank before it
    health = dict(q(env, "SELECT table_name, waiting_for FROM tms.table_health"
                         " WHERE namespace = 'fleet'"))
    assert health[first[1]].startswith("in flight"), health[first[1]]
    assert sum(1 for w in health.values() if "ahead of it" in (w or "")) >= 40, health
    for _ in range(49):
        q(env, "SELECT tms.finish_operation(%s)", (first[0],))
        first = start_next(env, [rule])
        order.append(first[1])
    q(env, "SELECT tms.finish_operation(%s)", (first[0],))
    started = [scores[t] for t in order]
    assert len(set(order)) == 50
    assert started == sorted(started, reverse=True), list(zip(order, started))


def test_a_low_score_waits_at_most_the_score_range_times_the_aging(env):
    clock = env["clock"]
    t0 = datetime.now(timezone.utc) + timedelta(days=1)
    # score 100: every file small, deletes of every row of both kinds;
    # score 0: no small file, no delete
    rules = {}
    for k in range(7):
        ns = "st_h%d" % k
        make_table(env, ns, "t", "--data-files", 2, "--records-per-file", 1,
                   "--pos-deletes", 2, "--eq-deletes", 2)
        rules["h%d" % k] = policy(env, ns, ns, "100 - healthScore")
    make_table(env, "st_low", "t", "--data-files", 2,
               "--property", "write.target-file-size-bytes=512")
    rules["low"] = policy(env, "st_low", "st_low", "100 - healthScore")
    ids = list(rules.values())

    def submit(name, at):
        clock.set(at)
        rows = q(env, "SELECT decision FROM tms.evaluate_now(%s)", ("st_" + name,))
        assert rows == [("submitted",)], (name, rows)
        return one(env, "SELECT score FROM tms.evaluation_log WHERE rule_id = %s", (rules[name],))

    assert submit("h0", t0 - timedelta(minutes=1)) == 100.0
    job = start_next(env, ids)
    assert submit("low", t0) == 0.0
    starts = []
    # a job of score 100 every 20 minutes, then 30 minutes later: those
    # submitted within 100 x 1 min of the low one go before it, the
    # first submitted later does not
    for name, minutes in [("h1", 20), ("h2", 40), ("h3", 60), ("h4", 80), ("h5", 110),
                          ("h6", 130)]:
        submit(name, t0 + timedelta(minutes=minutes))
        q(env, "SELECT tms.finish_operation(%s)", (job[0],))
        job = start_next(env, ids)
        starts.append(one(env, "SELECT p.name FROM tms.table_maintenance_job j"
                               "  JOIN tms.maintenance_policies p ON p.id = j.policy_id"
                               " WHERE j.id = %s", (job[0],)))
    assert starts == ["st_h1", "st_h2", "st_h3", "st_h4", "st_low", "st_h5"], starts
    waited = one(env, "SELECT extract(epoch FROM started_at - created_at) / 60"
                      "  FROM tms.table_maintenance_job WHERE rule_id = %s", (rules["low"],))
    # it started when the job ahead of it ended after the bound had passed
    assert 100 <= float(waited) <= 111, waited
    q(env, "SELECT tms.finish_operation(id) FROM tms.table_maintenance_job"
           " WHERE rule_id = ANY (%s) AND finished_at IS NULL", (ids,))
