"""
test_monitoring.py -- the cumulative statistics and the run history against
the test world (doc/operations.md, "Monitoring"):

  - tms.stat_tasks counts the tasks the workers claim, finish and fail;
    a failed task's SQLSTATE is in tms.job_errors, its totals in
    tms.job_stats;
  - tms.stat_maintenance counts a maintenance job with what it deleted
    (files and bytes, as the job records them), tms.stat_purges a purge,
    and both counts stay when the job rows are deleted;
  - tms.stat_requests counts the catalog's and the storage's HTTP
    exchanges per foreign server, tms.stat_request_errors the refused ones
    by class (the test catalog's /admin/faults), with retries and a
    latency histogram;
  - the supervisor prunes the history after tms.task_history_retention,
    its counts kept in tms.job_stats;
  - a policy's job is a run of its rule in tms.job_stats and
    tms.job_history, the policy's evaluations runs of the policy;
  - a maintenance job that fails for good is a failed run in the history
    with the SQLSTATE of its cause (403: 42501), though its task completes;
  - the counters survive a clean restart (pg_stat/tms.stat is written at
    shutdown, read and removed at start) and start from zero after a
    crash.

Run: /usr/bin/python3 -m pytest -q test/integration/test_monitoring.py
"""

import collections
import contextlib
import datetime
import json
import os
import signal
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

TERMINAL = ("succeeded", "failed", "skipped", "cancelled")


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "moncat"
    w = tms_world("mon", settings=FAST_WORKERS, catalog={}, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '2',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv),
        "CREATE PROCEDURE ok(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$",
        "CREATE PROCEDURE bad(i text, d jsonb) LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE EXCEPTION 'no %', i USING ERRCODE = 'check_violation'; END $$"],
        task_kinds={"ok": ("ok(text, jsonb)", 4), "bad": ("bad(text, jsonb)", 4)})
    return dict(w, server=srv)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def one(env, sql, args=None):
    rows = q(env, sql, args)
    return rows[0] if rows else None


@contextlib.contextmanager
def reloaded(env, **settings):
    """The tms.* settings given set (ALTER SYSTEM, reload) for the duration
    of the block, reset after it."""
    for k, v in settings.items():
        env["pg"].psql("ALTER SYSTEM SET tms.%s = '%s'" % (k, v))
    env["pg"].psql("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        for k in settings:
            env["pg"].psql("ALTER SYSTEM RESET tms.%s" % k)
        env["pg"].psql("SELECT pg_reload_conf()")


def counters(env, view, where, args=()):
    """The row of a stat view of this database as a dict; before it has
    one, every counter reads 0."""
    rows = q(env, "SELECT row_to_json(v) FROM tms.%s v WHERE database = current_database()"
                  " AND %s" % (view, where), args)
    assert len(rows) <= 1, rows
    return rows[0][0] if rows else collections.defaultdict(int)


def new_table(env, where, *args, ns="mon"):
    tag = uuid.uuid4().hex[:10]
    loc = ("s3://warehouse/mon/%s/t" % tag if where == "s3"
           else "file://%s/mon/%s/t" % (env["file_root"], tag))
    extra = ["--s3-endpoint", env["s3"].endpoint] if where == "s3" else []
    res = ow.synth_table(loc, *(list(args) + extra))
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register(ns, name, res["metadata_location"])
    return name, res


def job_row(env, jid):
    rows = q(env, "SELECT state, last_error, files_deleted, bytes_deleted FROM"
                  " tms.maintenance_jobs WHERE id = %s", (jid,))
    return rows[0] if rows else None


def wait_job(env, jid):
    wait_for(lambda: (job_row(env, jid) or (None,))[0] in TERMINAL, timeout=120,
             what="job %s to end (now %r)" % (jid, job_row(env, jid)))
    return job_row(env, jid)


# ---------------------------------------------------------------------------
# tasks
# ---------------------------------------------------------------------------

def test_tasks_counted_with_their_failures(env):
    before_ok = counters(env, "stat_tasks", "kind = 'ok'")
    before_bad = counters(env, "stat_tasks", "kind = 'bad'")
    q(env, "SELECT tms.schedule_task('ok', 'o' || g) FROM generate_series(1, 20) g")
    q(env, "SELECT tms.schedule_task('bad', 'b' || g) FROM generate_series(1, 5) g")
    wait_for(lambda: counters(env, "stat_tasks", "kind = 'ok'")["succeeded"]
             - before_ok["succeeded"] == 20, what="20 tasks to succeed")
    wait_for(lambda: counters(env, "stat_tasks", "kind = 'bad'")["failed"]
             - before_bad["failed"] >= 5, what="5 failures")
    ok = counters(env, "stat_tasks", "kind = 'ok'")
    assert ok["claimed"] - before_ok["claimed"] == 20
    assert ok["failed"] == before_ok["failed"] and ok["lease_lost"] == 0
    assert ok["run_seconds"] > before_ok["run_seconds"]

    # the failures, with the handler's SQLSTATE, in the history and its totals
    errs = q(env, "SELECT DISTINCT sqlerrcode, err_message FROM tms.job_errors"
                  " WHERE kind = 'bad' AND instance = 'b1'")
    assert errs == [("23514", "no b1")], errs
    stats = one(env, "SELECT total_failures, total_successes, last_run_status, last_sqlerrcode,"
                     " job_status FROM tms.job_stats WHERE kind = 'bad'")
    assert stats[0] >= 5 and stats[1] == 0 and stats[2] == "failed" and stats[3] == "23514"
    assert stats[4] in ("scheduled", "running")

    # the task rows go; the counts stay
    env["pg"].pool(False)
    try:
        bad = counters(env, "stat_tasks", "kind = 'bad'")
        q(env, "DELETE FROM tms.scheduled_tasks WHERE task_name = 'bad'")
        assert counters(env, "stat_tasks", "kind = 'bad'") == bad
    finally:
        env["pg"].pool(True)


def test_supervisor_prunes_the_history(env):
    """The supervisor prunes the history rows older than
    tms.task_history_retention (a batch every
    tms.task_history_prune_interval, in a transaction of its own, after its
    heartbeats), folding their counts into tms.task_run_totals:
    tms.job_stats still counts them."""
    with reloaded(env, task_history_prune_interval="1s"):
        q(env, "INSERT INTO tms.task_history (kind, instance, attempt, started_at,"
               " finished_at, succeeded)"
               " SELECT 'aged', 'i' || g, 1, now() - interval '15 days',"
               " now() - interval '15 days' + interval '1 s', true"
               " FROM generate_series(1, 3) g")
        wait_for(lambda: one(env, "SELECT count(*) FROM tms.task_history"
                                  " WHERE kind = 'aged'")[0] == 0,
                 timeout=150, what="the supervisor to prune the aged rows")
    assert one(env, "SELECT total_runs, total_successes, total_duration FROM tms.job_stats"
                    " WHERE kind = 'aged'") == (3, 3, datetime.timedelta(seconds=3))


# ---------------------------------------------------------------------------
# maintenance jobs, purges, requests
# ---------------------------------------------------------------------------

def test_maintenance_job_counted_and_kept(env):
    name, _ = new_table(env, "file", "--snapshots", "6", "--data-files", "12")
    key = "operation = 'snapshot-expiry' AND engine = 'local' AND outcome = 'succeeded'"
    before = counters(env, "stat_maintenance", key)
    # every snapshot but the last goes: older than an hour from now
    options = {"retain-last": 1,
               "older-than": one(env, "SELECT (now() + interval '1 hour')::text")[0]}
    jid = one(env, "SELECT tms.run_operation(%s, 'mon', %s, 'snapshot-expiry', %s::jsonb)",
              (env["server"], name, json.dumps(options)))[0]
    state, err, files, nbytes = wait_job(env, jid)
    assert state == "succeeded", err
    assert files > 0
    after = counters(env, "stat_maintenance", key)
    assert after["jobs"] - before["jobs"] == 1
    assert after["files_deleted"] - before["files_deleted"] == files
    assert after["bytes_deleted"] - before["bytes_deleted"] == nbytes
    assert after["duration_seconds"] > before["duration_seconds"]

    # the run in the history, with its job and table
    row = one(env, "SELECT succeeded, operation, table_name, server FROM tms.job_history"
                   " WHERE kind = 'maintenance' AND job_id = %s", (jid,))
    assert row == (True, "snapshot-expiry", name, env["server"]), row

    # deleting the job's rows changes no counter
    q(env, "DELETE FROM tms.table_snapshot_metrics WHERE job_id = %s", (jid,))
    q(env, "DELETE FROM tms.table_maintenance_job WHERE id = %s", (jid,))
    assert counters(env, "stat_maintenance", key) == after


def test_policy_runs_kept_per_rule(env):
    """A policy's job is a run of its rule in tms.job_stats and
    tms.job_history (policy name, rule, operation, table), and its
    evaluations are runs of the policy (kind policy-expand)."""
    # its task runs again a second after a run, not a minute
    with reloaded(env, evaluation_cycle_interval="1s"):
        ns = "monpol_%s" % uuid.uuid4().hex[:6]
        env["catalog"].create_namespace(ns)
        name, _ = new_table(env, "file", "--snapshots", "4", "--data-files", "8", ns=ns)
        tag = uuid.uuid4().hex[:6]
        policy = "p-" + tag
        q(env, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s,"
               " table_pattern => %s)", ("g-" + tag, env["server"], ns, name))
        q(env, "SELECT tms.create_policy(%s, %s)", (policy, "g-" + tag))
        rule = one(env, "SELECT tms.add_rule(%s, 'snapshot-expiry', 'local',"
                        " '{\"commits-added\": 1}', 'true', 'catch-up',"
                        " '{\"older-than\": \"1 second\", \"retain-last\": 2}')", (policy,))[0]
        pid = one(env, "SELECT id FROM tms.maintenance_policies WHERE name = %s", (policy,))[0]
        try:
            wait_for(lambda: one(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE rule_id = %s"
                                      " AND state IN ('succeeded', 'failed')", (rule,))[0] > 0,
                     timeout=120, what="the policy's job")
            jid, state, err = one(env, "SELECT id, state, last_error FROM tms.maintenance_jobs"
                                       " WHERE rule_id = %s ORDER BY id LIMIT 1", (rule,))
            assert state == "succeeded", err
            # the settle that wrote the history row commits with the job's end
            wait_for(lambda: one(env, "SELECT count(*) FROM tms.job_history"
                                      " WHERE kind = 'maintenance' AND job_id = %s", (jid,))[0] == 1,
                     what="the job's run in the history")
            row = one(env, "SELECT policy, policy_id, rule_id, operation, table_name, server,"
                           " succeeded, sqlerrcode FROM tms.job_history"
                           " WHERE kind = 'maintenance' AND job_id = %s", (jid,))
            assert row == (policy, pid, rule, "snapshot-expiry", name, env["server"], True, None), row
            stats = one(env, "SELECT policy, operation, total_runs, total_successes, total_failures,"
                             " last_run_status, last_successful_finish IS NOT NULL,"
                             " average_duration > '0' FROM tms.job_stats"
                             " WHERE kind = 'maintenance' AND rule_id = %s", (rule,))
            assert stats is not None and stats[:2] == (policy, "snapshot-expiry"), stats
            assert stats[2] >= 1 and stats[2] == stats[3] and stats[4] == 0, stats
            assert stats[5:] == ("succeeded", True, True), stats
            # the policy's evaluations: runs of the policy, without a rule
            expand = one(env, "SELECT policy, total_runs, total_failures FROM tms.job_stats"
                              " WHERE kind = 'policy-expand' AND policy_id = %s"
                              " AND rule_id IS NULL", (pid,))
            assert expand is not None and expand[0] == policy and expand[1] >= 1, expand
        finally:
            q(env, "SELECT tms.drop_policy(%s)", (policy,))


def test_purge_counted_with_storage_requests(env):
    name, _ = new_table(env, "s3", "--snapshots", "3", "--data-files", "30",
                          "--file-size", "2048")
    skey = "server = %s AND service = %s"
    storage0 = counters(env, "stat_requests", skey, (env["server"], "storage"))
    catalog0 = counters(env, "stat_requests", skey, (env["server"], "catalog"))
    pkey = "server = %s AND outcome = 'succeeded'"
    before = counters(env, "stat_purges", pkey, (env["server"],))

    job = one(env, "SELECT tms.purge_table(%s, 'mon', %s)", (env["server"], name))[0]
    wait_for(lambda: one(env, "SELECT state FROM tms.purge_jobs WHERE id = %s", (job,))[0]
             in ("SUCCEEDED", "FAILED"), timeout=120, what="the purge")
    state, files, nbytes, requests = one(
        env, "SELECT state, files_deleted, bytes_freed, delete_requests FROM tms.purge_jobs"
             " WHERE id = %s", (job,))
    assert state == "SUCCEEDED"
    assert files > 30 and nbytes >= 30 * 2048
    after = counters(env, "stat_purges", pkey, (env["server"],))
    assert after["jobs"] - before["jobs"] == 1
    assert after["files_deleted"] - before["files_deleted"] == files
    assert after["bytes_freed"] - before["bytes_freed"] == nbytes
    assert after["delete_requests"] - before["delete_requests"] == requests > 0

    # the storage exchanges (reading metadata, deleting) and the catalog's (load, drop)
    storage = counters(env, "stat_requests", skey, (env["server"], "storage"))
    catalog = counters(env, "stat_requests", skey, (env["server"], "catalog"))
    assert storage["requests"] - storage0["requests"] >= requests + 1
    assert catalog["requests"] - catalog0["requests"] >= 2
    for c in (storage, catalog):
        assert c["latency_seconds_count"] == c["requests"]
        assert c["latency_seconds_bucket"] == sorted(c["latency_seconds_bucket"])
        assert c["latency_seconds_bucket"][-1] <= c["requests"]
        assert len(c["latency_seconds_bucket"]) == len(c["latency_seconds"]) == 11
        assert c["latency_seconds_sum"] > 0

    q(env, "DELETE FROM tms.iceberg_cleanup_job WHERE id = %s", (job,))
    assert counters(env, "stat_purges", pkey, (env["server"],)) == after


def test_catalog_errors_by_class(env):
    name, _ = new_table(env, "file", "--snapshots", "2")
    key = "server = %s AND service = 'catalog'"
    before = counters(env, "stat_requests", key, (env["server"],))
    errs0 = dict(q(env, "SELECT class, errors FROM tms.stat_request_errors"
                        " WHERE database = current_database() AND server = %s"
                        " AND service = 'catalog'", (env["server"],)))
    # three 503s: the load is tried three times (retries '2') and fails
    env["catalog"].fault(r"/tables/%s$" % name, status=503, count=3, method="GET")
    env["pg"].query_error("SELECT * FROM tms.plan_operation(%s, 'mon', %s,"
                          " 'snapshot-expiry', '{}')", (env["server"], name))
    # then a 404 for a table that does not exist
    env["pg"].query_error("SELECT * FROM tms.plan_operation(%s, 'mon', 'no_such_table',"
                          " 'snapshot-expiry', '{}')", (env["server"],))
    after = counters(env, "stat_requests", key, (env["server"],))
    errs = dict(q(env, "SELECT class, errors FROM tms.stat_request_errors"
                       " WHERE database = current_database() AND server = %s"
                       " AND service = 'catalog'", (env["server"],)))
    assert sorted(errs) == ["client", "connect", "other", "server", "throttled", "timeout"]
    assert errs["throttled"] - errs0.get("throttled", 0) == 3
    assert errs["client"] - errs0.get("client", 0) >= 1
    assert after["retries"] - before["retries"] >= 2
    assert after["errors"] - before["errors"] == sum(errs.values()) - sum(errs0.values())
    assert after["requests"] - before["requests"] >= 4


def test_failed_job_is_a_failed_run_with_its_sqlstate(env):
    name, _ = new_table(env, "file", "--snapshots", "2")
    key = "operation = 'snapshot-expiry' AND engine = 'local' AND outcome = 'failed'"
    before = counters(env, "stat_maintenance", key)
    # the job is recorded while the pool waits; when its run loads the
    # table again, the catalog refuses it (403), for good
    env["pg"].pool(False)
    try:
        jid = one(env, "SELECT tms.run_operation(%s, 'mon', %s, 'snapshot-expiry', '{}')",
                  (env["server"], name))[0]
        env["catalog"].fault(r"/tables/%s$" % name, status=403, count=10, method="GET",
                             body=json.dumps({"error": {"message": "no",
                                                        "type": "ForbiddenException",
                                                        "code": 403}}))
    finally:
        env["pg"].pool(True)
    try:
        state, err, _, _ = wait_job(env, jid)
    finally:
        env["catalog"].clear_faults()
    assert state == "failed", err
    assert counters(env, "stat_maintenance", key)["jobs"] - before["jobs"] == 1
    row = one(env, "SELECT sqlerrcode, err_message, operation, table_name FROM tms.job_errors"
                   " WHERE kind = 'maintenance' AND job_id = %s", (jid,))
    assert row is not None and row[0] == "42501" and row[2:] == ("snapshot-expiry", name), row
    assert "403" in row[1] or "forbidden" in row[1].lower(), row
    # the task completed: nothing waits to retry it
    assert one(env, "SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'maintenance'"
                    " AND task_instance = %s", ("job-%d" % jid,))[0] == 0


# ---------------------------------------------------------------------------
# restarts and crashes
# ---------------------------------------------------------------------------

def test_counters_survive_a_clean_restart_not_a_crash(new_cluster):
    c = new_cluster(preload=("tms",), settings=FAST_WORKERS)
    c.psql("CREATE EXTENSION tms")
    c.psql("CREATE PROCEDURE ok(i text, d jsonb) LANGUAGE sql AS $$ SELECT 1 $$")
    c.psql("SELECT tms.register_task_kind('ok', 'ok(text, jsonb)', 4)")
    c.psql("SELECT tms.schedule_task('ok', 'o' || g) FROM generate_series(1, 10) g")
    row = "SELECT claimed, succeeded, stats_reset FROM tms.stat_tasks WHERE kind = 'ok'"
    wait_for(lambda: (c.query(row) or [(0, 0)])[0][1] == 10, what="10 tasks")
    counted = c.query(row)
    stats_file = os.path.join(c.datadir, "pg_stat", "tms.stat")
    assert not os.path.exists(stats_file)     # read and removed at start

    c.stop()
    assert os.path.exists(stats_file)         # written at the clean shutdown
    c.start()
    assert not os.path.exists(stats_file)
    assert c.query(row) == counted

    # a crash (a tms worker killed) reinitialises shared memory: no file, zeros
    pid = int(c.psql("SELECT pid FROM tms.workers WHERE role = 'worker' LIMIT 1"))
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: c.query("SELECT count(*) FROM tms.stat_tasks WHERE kind = 'ok'",
                             ) == [(0,)], timeout=60, what="the counters after the crash")
    wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'") == "4",
             timeout=60, what="the pool back")
    c.psql("SELECT tms.schedule_task('ok', 'after')")
    wait_for(lambda: c.query(row) and c.query(row)[0][1] == 1, what="a task after the crash")
