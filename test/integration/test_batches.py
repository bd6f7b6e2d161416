"""
test_batches.py -- batched snapshot expiry, end to end (doc/policies.md,
"Batches"), with tms's own engine on tables of the test catalog:

  - a snapshot-expiry rule with batch-size 3 fires on five tables: two
    batches (three tables and two), two tasks, two runs in the history,
    each table its own job row;
  - a table dropped from the catalog after its evaluation fails alone:
    its job ends failed with the catalog's answer, the other tables of its
    batch are expired, each job with its own effect (snapshots expired,
    snapshot before and after), the catalog agrees;
  - every table's (table, rule) gate reopens once its job ended;
  - with the pool on, the workers claim and run the batches' tasks as any
    task: four tables of batch-size 2 are expired by two runs.

The first test runs with the pool off (tms.enabled = off): the evaluation
is tms.evaluate_now, and the batches' tasks run through CALL tms.run_task
(whether due or not), so nothing depends on timing; the second turns the
pool on and awaits the jobs' ends.

Run: /usr/bin/python3 -m pytest -q test/integration/test_batches.py
"""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster

SETTINGS = dict(FAST_WORKERS, **{"tms.enabled": "off",
                                 "tms.evaluation_cycle_interval": "'1h'"})
NS = "bt"
TABLES = ["t1", "t2", "t3", "t4", "t5"]


@pytest.fixture(scope="module")
def world(tms_world):
    w = tms_world("batch", settings=SETTINGS, s3=None, catalog={}, pool=None)
    w["pg"].psql("""CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                      uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
                      allowed_locations 'file://%s/');
                    CREATE USER MAPPING FOR PUBLIC SERVER cat;"""
                 % (w["catalog"].uri, w["file_root"], w["file_root"]))
    return w


def q(w, sql, args=None):
    return w["pg"].query(sql, args)


def snapshots(w, name, ns=NS):
    return len(ow.load(w["catalog"], ns, name)[1].get("snapshots") or [])


def make_tables(w, ns, names):
    for name in names:
        loc = "file://%s/wh/%s/%s" % (w["file_root"], ns, name)
        res = ow.synth_table(loc, "--data-files", "2", "--no-data-bytes", "--codec", "null",
                             "--snapshots", "3")
        w["catalog"].register(ns, name, res["metadata_location"])
        assert snapshots(w, name, ns) == 3


def expiry_rule(w, ns, batch_size):
    """A policy over namespace ns with a snapshot-expiry rule of batch_size."""
    q(w, "SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s)",
      (ns + "-g", ns))
    q(w, "SELECT tms.create_policy(%s, %s)", (ns + "-p", ns + "-g"))
    return q(w, "SELECT tms.add_rule(%s, 'snapshot-expiry', 'local',"
                " '{\"commits-added\": 1}', 'snapshots > 1', 'catch-up',"
                " options => jsonb_build_object('older-than', '1 second', 'retain-last', 1,"
                " 'batch-size', %s), min_interval => '0')", (ns + "-p", batch_size))[0][0]


def test_five_tables_expired_by_two_batches_one_failing_alone(world):
    w = world
    make_tables(w, NS, TABLES)
    rule = expiry_rule(w, NS, 3)

    # one evaluation: five jobs in two batches, two tasks
    rows = q(w, "SELECT table_name, decision FROM tms.evaluate_now('bt-p', force => true)"
                " ORDER BY table_name")
    assert rows == [(t, "submitted") for t in TABLES], rows
    jobs = q(w, "SELECT table_name, id, batch_id, state FROM tms.maintenance_jobs"
                " WHERE rule_id = %s ORDER BY id", (rule,))
    batches = sorted({j[2] for j in jobs})
    assert len(jobs) == 5 and len(batches) == 2, jobs
    assert [sum(1 for j in jobs if j[2] == b) for b in batches] == [3, 2], jobs
    assert all(j[3] == "pending" for j in jobs), jobs
    tasks = q(w, "SELECT task_instance FROM tms.scheduled_tasks WHERE task_name = 'maintenance'"
                 " ORDER BY task_instance")
    assert sorted(t[0] for t in tasks) == sorted("batch-%d" % b for b in batches), tasks

    # the middle table of the first batch is dropped before its batch runs
    first = [j for j in jobs if j[2] == batches[0]]
    dropped = first[1][0]
    w["catalog"].request("DELETE", "namespaces/%s/tables/%s" % (NS, dropped))

    for b in batches:
        q(w, "CALL tms.run_task('maintenance', %s)", ("batch-%d" % b,))

    ended = q(w, "SELECT table_name, state, snapshots_expired, last_error,"
                 " before_snapshot_id IS NOT NULL, after_snapshot_id IS NOT NULL"
                 " FROM tms.maintenance_jobs WHERE rule_id = %s ORDER BY id", (rule,))
    for name, state, expired, error, before, after in ended:
        if name == dropped:
            assert state == "failed" and expired == 0, ended
            assert "cannot load table" in error, error
        else:
            assert (state, expired, error, before, after) == ("succeeded", 2, None, True, True), \
                ended
            assert snapshots(w, name) == 1
    # each batch is one task, run once: two rows of the run history, both gone
    hist = q(w, "SELECT instance, job_id, succeeded FROM tms.task_history"
                " WHERE kind = 'maintenance' ORDER BY id")
    assert [(h[0], h[1]) for h in hist] == [("batch-%d" % b, b) for b in batches], hist
    # the first batch's run says a table of it failed; the second succeeded
    assert [h[2] for h in hist] == [False, True], hist
    assert q(w, "SELECT count(*) FROM tms.scheduled_tasks"
                " WHERE task_name = 'maintenance'")[0][0] == 0

    # every (table, rule) is free again: a commit-free table with one
    # snapshot no longer fires, so the rule is evaluated and not needed
    left = [t for t in TABLES if t != dropped]
    assert q(w, "SELECT count(*) FROM tms.rule_baselines WHERE rule_id = %s"
                " AND pending_job IS NOT NULL", (rule,))[0][0] == 0
    rows = q(w, "SELECT table_name, decision FROM tms.evaluate_now('bt-p', force => true)"
                " ORDER BY table_name")
    assert all(d != "already-pending" for _, d in rows), rows
    assert {t for t, _ in rows} <= set(left), rows


def test_the_pool_runs_batches(world):
    w = world
    ns = "bq"
    names = ["u1", "u2", "u3", "u4"]
    make_tables(w, ns, names)
    rule = expiry_rule(w, ns, 2)
    rows = q(w, "SELECT table_name, decision FROM tms.evaluate_now(%s, force => true)"
                " ORDER BY table_name", (ns + "-p",))
    assert rows == [(t, "submitted") for t in names], rows
    w["pg"].psql("ALTER SYSTEM SET tms.enabled = on")
    w["pg"].psql("SELECT pg_reload_conf()")
    try:
        wait_for(lambda: q(w, "SELECT count(*) FROM tms.table_maintenance_job"
                              " WHERE rule_id = %s AND finished_at IS NULL", (rule,))[0][0] == 0,
                 timeout=180, what="the batches' jobs to end")
    finally:
        w["pg"].psql("ALTER SYSTEM RESET tms.enabled")
        w["pg"].psql("SELECT pg_reload_conf()")
    ended = q(w, "SELECT table_name, state, snapshots_expired, batch_id"
                 " FROM tms.maintenance_jobs WHERE rule_id = %s ORDER BY id", (rule,))
    assert [(e[0], e[1], e[2]) for e in ended] == [(t, "succeeded", 2) for t in names], ended
    batches = sorted({e[3] for e in ended})
    assert len(batches) == 2, ended
    assert all(snapshots(w, t, ns) == 1 for t in names)
    hist = q(w, "SELECT instance, succeeded FROM tms.task_history"
                " WHERE kind = 'maintenance' AND rule_id = %s ORDER BY id", (rule,))
    assert sorted(hist) == [("batch-%d" % b, True) for b in batches], hist
