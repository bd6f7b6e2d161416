"""
test_schedules.py -- rules on schedules, end to end, run by the worker pool
(doc/schedules.md):

  - a commit through the test catalog, whose pointers live in tms's own
    database in Iceberg's JdbcCatalog layout with tms's trigger
    (tms.attach_jdbc_catalog), starts the table's on-commit maintenance
    with no polling at all (the evaluation cycle is an hour): the commit-job
    loads the table once, counts the commit from its snapshots, and the job
    starts;
  - a cycle of a policy over such an event-fed group, with no event,
    makes no catalog request at all, in any pool worker and in a new
    session's tms.evaluate_now (not even a first connection's
    GET /v1/config); a counter that fires makes it load and evaluate;
  - a burst of 1,000 commits to one table makes one maintenance job;
  - min_interval holds after a job, and a commit that came during the
    cooldown is acted on when it ends;
  - tms.notify_commit does the same for a catalog that is polled;
  - on a cluster whose clock is set by libfaketime (FakedClock: set while
    the server runs, so that no test waits for a minute's start), a
    crontab rule fires at its instant and its policy-expand task enqueues
    the firing's cron-jobs in batches of tms.expand_batch_size; and a
    crontab fires at its instant across a daylight-saving change: in
    Berlin on the spring-forward day (a local time that does not exist)
    and in New York on the fall-back day (a local time that occurs twice,
    fired once); their tasks are driven by a session's CALL
    tms.run_pending(), as pg_cron drives them, since libfaketime does not
    reach background workers;
  - a rule with both a crontab and on-commit fires at its crontab's
    instant and after a commit;
  - SIGKILL of the worker in the middle of a commit-job, and of one in the
    middle of a cron-job, loses nothing and duplicates nothing (the rule of
    the cron-job is made by a session whose clock is set before a firing
    the workers' real clock has passed: they fire it at once).

The module runs its own cluster (fast workers), whose database also holds
the catalog's table of pointers; a job of the legacy engine "spark" with
no tms.maintenance_handler stays running until tms.finish_operation, so a
started job is easy to see and to finish.

Run: /usr/bin/python3 -m pytest -q test/integration/test_schedules.py
"""

import concurrent.futures
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402

SETTINGS = dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "'1h'"})
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    name = "sch_%s" % uuid.uuid4().hex[:6]
    # the pointers in tms's own database: the trigger can see them
    return tms_world("sch", settings=SETTINGS, s3=None, catalog=dict(catalog_name=name),
                     sql=lambda w: [
        """CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             allowed_locations 'file://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER cat;
           CREATE SERVER polled FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             allowed_locations 'file://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER polled;"""
        % (w["catalog"].uri, w["file_root"], w["file_root"],
           w["catalog"].uri, w["file_root"], w["file_root"]),
        "SELECT tms.attach_jdbc_catalog('iceberg_tables', server => 'cat',"
        " catalog_name => '%s')" % name])


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def one(env, sql, args=None):
    return env["pg"].one(sql, args)


def make_table(env, ns, name):
    """A small synthetic table registered in the catalog (a create: the
    trigger's INSERT event)."""
    loc = "file://%s/wh/%s/%s" % (env["file_root"], ns, name)
    res = ow.synth_table(loc, "--data-files", "2", "--no-data-bytes", "--codec", "null",
                         "--snapshots", "1")
    env["catalog"].register(ns, name, res["metadata_location"])
    return res


def prepare_append(env, ns, name, seed):
    """The body of a commit adding a data file to the table's current
    snapshot (its files written)."""
    _, meta = ow.load(env["catalog"], ns, name)
    loc = meta["location"].rstrip("/")
    body, _ = ow.append_commit(env["st"], meta, [{"path": "%s/data/extra-%d.parquet" % (loc, seed),
                                                  "records": 10, "size": 1000}], seed=seed)
    return body


def append(env, ns, name, seed):
    """One real commit through the catalog: a snapshot adding a data file."""
    ow.commit(env["catalog"], ns, name, prepare_append(env, ns, name, seed))


def policy(env, ns, pname, rules):
    """A group over namespace ns of server cat and a policy with rules
    [(operation, kwargs sql)]; returns the rule ids."""
    q(env, "SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s)",
      (pname + "-g", ns))
    q(env, "SELECT tms.create_policy(%s, %s)", (pname, pname + "-g"))
    ids = []
    for op, kw in rules:
        ids.append(one(env, "SELECT tms.add_rule(%%s, %%s, 'spark', %s)" % kw, (pname, op)))
    return ids


def jobs(env, rule):
    return q(env, "SELECT id, state, created_at, started_at, finished_at"
                  " FROM tms.table_maintenance_job WHERE rule_id = %s ORDER BY id", (rule,))


def table_loads(env, ns, name):
    reqs = env["catalog"].requests(path_regex="namespaces/%s/tables/%s$" % (ns, name))
    return [r for r in reqs["requests"] if r["method"] == "GET"]


def wait_policy_refreshed(env, pname):
    wait_for(lambda: one(env, "SELECT g.refreshed_at IS NOT NULL FROM tms.object_groups g"
                              " WHERE g.name = %s", (pname + "-g",)),
             what="the first refresh of the group")


# ---------------------------------------------------------------------------
# commit events
# ---------------------------------------------------------------------------

def test_jdbc_commit_starts_the_on_commit_maintenance_without_polling(env):
    ns = "ev_a"
    make_table(env, ns, "orders")
    rule, = policy(env, ns, "ev-a", [("compaction",
                                     "counters => '{\"commits-added\": 1}', condition => 'true',"
                                     " schedule => '{\"on-commit\": true}', min_interval => '0'")])
    wait_policy_refreshed(env, "ev-a")
    base = int(one(env, "SELECT commits FROM tms.tables WHERE server = 'cat'"
                        " AND namespace = %s AND table_name = 'orders'", (ns,)))
    # nothing is due: no job, and the cycle is an hour away
    assert jobs(env, rule) == []
    body = prepare_append(env, ns, "orders", seed=1)
    env["catalog"].reset_requests()

    ow.commit(env["catalog"], ns, "orders", body)
    wait_for(lambda: jobs(env, rule) and jobs(env, rule)[0][3] is not None,
             what="the on-commit job to start")
    (jid, state, created, started, finished), = jobs(env, rule)
    assert state == "running"
    # the commit was counted from the event's load, without a refresh
    assert int(one(env, "SELECT commits FROM tms.tables WHERE server = 'cat'"
                        " AND namespace = %s AND table_name = 'orders'", (ns,))) == base + 1
    loads = table_loads(env, ns, "orders")
    # one load: the commit-job's observation, which its evaluation reuses;
    # no listing at all
    assert len(loads) == 1, loads
    listings = [r for r in env["catalog"].requests(path_regex="/tables$")["requests"]
                if r["method"] == "GET"]
    assert listings == []
    log = q(env, "SELECT decision, job_id FROM tms.evaluation_log WHERE rule_id = %s", (rule,))
    assert log == [("submitted", jid)]
    q(env, "SELECT tms.finish_operation(%s)", (jid,))


def test_an_event_fed_cycle_without_events_makes_no_catalog_request(env):
    ns = "ev_z"
    for name in ("a", "b", "c"):
        make_table(env, ns, name)
    # an on-commit rule and one on the evaluation cycle: the cycle has
    # something to evaluate, were any counter to fire (none does)
    commit_rule, cycle_rule = policy(env, ns, "ev-z", [
        ("compaction", "counters => '{\"commits-added\": 100}', condition => 'true',"
                       " schedule => '{\"on-commit\": true}'"),
        ("manifest-rewrite", "counters => '{\"commits-added\": 100}', condition => 'false'")])
    wait_policy_refreshed(env, "ev-z")
    pid = one(env, "SELECT id FROM tms.maintenance_policies WHERE name = 'ev-z'")
    env["catalog"].reset_requests()
    # the policy's cycle, run by the pool as many times as it has workers
    # (each may land on a worker that never connected to the catalog)
    workers = one(env, "SELECT count(*) FROM tms.workers WHERE role = 'worker'")
    for _ in range(workers + 1):
        t0 = one(env, "SELECT clock_timestamp()")
        q(env, "SELECT tms.schedule_task('policy-expand', %s)", (str(pid),))
        wait_for(lambda: one(env, "SELECT last_success >= %s AND NOT picked"
                                  "  FROM tms.scheduled_tasks WHERE task_name = 'policy-expand'"
                                  "   AND task_instance = %s", (t0, str(pid))),
                 what="the policy's cycle")
    # and in a new session (a backend that never connected)
    assert q(env, "SELECT * FROM tms.evaluate_now('ev-z', force => true)") == []
    assert env["catalog"].requests()["requests"] == []
    # a counter that fires makes the cycle connect and evaluate as before
    q(env, "UPDATE tms.rule_baselines SET triggered = true WHERE rule_id = %s", (cycle_rule,))
    decisions = q(env, "SELECT decision FROM tms.evaluate_now('ev-z', force => true)")
    assert len(decisions) == 3, decisions
    assert len(table_loads(env, ns, "a")) == 1
    assert jobs(env, commit_rule) == [] and jobs(env, cycle_rule) == []


def test_a_burst_of_commits_makes_one_job(env):
    ns = "ev_b"
    make_table(env, ns, "hot")
    append(env, ns, "hot", seed=2)
    rule, = policy(env, ns, "ev-b", [("compaction",
                                     "counters => '{\"commits-added\": 1}', condition => 'true',"
                                     " schedule => '{\"on-commit\": true}'")])
    wait_policy_refreshed(env, "ev-b")
    # the table's last two metadata files: a burst of pointer swaps between them
    rows = q(env, "SELECT metadata_location, previous_metadata_location FROM iceberg_tables"
                  " WHERE table_namespace = %s AND table_name = 'hot'", (ns,))
    cur, prev = rows[0]
    conn = env["pg"].connect()
    try:
        with conn.cursor() as c:
            for i in range(1000):
                a, b = (cur, prev) if i % 2 else (prev, cur)
                c.execute("UPDATE iceberg_tables SET metadata_location = %s,"
                          " previous_metadata_location = %s"
                          " WHERE table_namespace = %s AND table_name = 'hot'", (a, b, ns))
    finally:
        conn.close()
    wait_for(lambda: one(env, "SELECT count(*) FROM tms.scheduled_tasks"
                              " WHERE task_name = 'commit-job'") == 0,
             what="the commit-jobs to drain")
    assert len(jobs(env, rule)) == 1
    # the commit-jobs of the burst coalesced: far fewer loads than commits
    loads = table_loads(env, ns, "hot")
    sys.stderr.write("1000 commits: %d loads of the table\n" % len(loads))
    assert len(loads) < 1000
    q(env, "SELECT tms.finish_operation(id) FROM tms.table_maintenance_job WHERE rule_id = %s",
      (rule,))


def test_min_interval_holds_and_a_commit_during_it_is_acted_on_after(env):
    ns = "ev_c"
    make_table(env, ns, "cool")
    rule, = policy(env, ns, "ev-c", [("compaction",
                                     "counters => '{\"commits-added\": 1}', condition => 'true',"
                                     " schedule => '{\"on-commit\": true}', min_interval => '3s'")])
    wait_policy_refreshed(env, "ev-c")
    append(env, ns, "cool", seed=3)
    wait_for(lambda: len(jobs(env, rule)) == 1, what="the first job")
    first = jobs(env, rule)[0][0]
    q(env, "SELECT tms.finish_operation(%s)", (first,))
    finished = jobs(env, rule)[0][4]
    # a commit during the cooldown: its commit-job waits for the cooldown's end
    append(env, ns, "cool", seed=4)
    wait_for(lambda: one(env, "SELECT count(*) FROM tms.scheduled_tasks s"
                              " JOIN tms.rule_baselines b ON b.table_id = s.task_instance::bigint"
                              " WHERE s.task_name = 'commit-job' AND b.rule_id = %s"
                              "   AND NOT s.picked AND s.execution_time >= b.cooldown_until",
                         (rule,)) == 1,
             what="the commit-job to wait for the cooldown")
    wait_for(lambda: len(jobs(env, rule)) == 2, timeout=30, what="the job after the cooldown")
    second = jobs(env, rule)[1]
    assert second[2] >= finished + timedelta(seconds=3)
    q(env, "SELECT tms.finish_operation(%s)", (second[0],))


def test_notify_commit_reaches_a_polled_catalog(env):
    ns = "ev_d"
    make_table(env, ns, "events")
    q(env, "SELECT tms.create_object_group('ev-d-g', server => 'polled', namespace_pattern => %s)",
      (ns,))
    q(env, "SELECT tms.create_policy('ev-d', 'ev-d-g')")
    rule = one(env, "SELECT tms.add_rule('ev-d', 'compaction', 'spark',"
                    " counters => '{\"commits-added\": 1}', schedule => '{\"on-commit\": true}',"
                    " min_interval => '0')")
    wait_policy_refreshed(env, "ev-d")
    append(env, ns, "events", seed=5)
    # the polled server's cycle is an hour away: the call is what starts it
    assert one(env, "SELECT tms.notify_commit('polled', %s, 'events')", (ns,)) is True
    wait_for(lambda: len(jobs(env, rule)) == 1, what="the job of the notified commit")
    q(env, "SELECT tms.finish_operation(id) FROM tms.table_maintenance_job WHERE rule_id = %s",
      (rule,))


def test_killing_the_worker_mid_commit_job_loses_and_duplicates_nothing(env):
    ns = "ev_k"
    make_table(env, ns, "crash")
    rule, = policy(env, ns, "ev-k", [("compaction",
                                     "counters => '{\"commits-added\": 2}', condition => 'true',"
                                     " schedule => '{\"on-commit\": true}'")])
    wait_policy_refreshed(env, "ev-k")
    base = int(one(env, "SELECT commits FROM tms.tables WHERE server = 'cat'"
                        " AND namespace = %s", (ns,)))
    assert base == 1        # the table's one snapshot: below the threshold of 2
    body = prepare_append(env, ns, "crash", seed=6)
    # the commit-job's load hangs: the worker is in the middle of it
    env["catalog"].fault("namespaces/%s/tables/crash$" % ns, action="hang", seconds=3,
                         method="GET", count=1)
    ow.commit(env["catalog"], ns, "crash", body)
    pid = wait_for(lambda: one(env, "SELECT pid FROM tms.workers"
                                    " WHERE current_task LIKE 'commit-job/%'"),
                   what="a worker in the commit-job")
    os.kill(int(pid), signal.SIGKILL)
    # the cluster restarts after the crash (wait_for retries through its
    # errors); the lease is recovered and the task runs again
    # (the recovery, the lease's release and the run again take seconds on
    # an idle machine, a minute and more on a loaded one)
    wait_for(lambda: one(env, "SELECT count(*) FROM tms.table_maintenance_job"
                                 " WHERE rule_id = %s" % rule) == 1,
             timeout=180, what="the job after the crash")
    wait_for(lambda: one(env, "SELECT count(*) FROM tms.scheduled_tasks"
                                 " WHERE task_name = 'commit-job'") == 0,
             timeout=30, what="the commit-job to end")
    assert len(jobs(env, rule)) == 1
    assert int(one(env, "SELECT commits FROM tms.tables WHERE server = 'cat'"
                        " AND namespace = %s", (ns,))) == base + 1
    env["catalog"].clear_faults()
    q(env, "SELECT tms.finish_operation(id) FROM tms.table_maintenance_job WHERE rule_id = %s",
      (rule,))


def test_killing_the_worker_mid_cron_job_loses_and_duplicates_nothing(env):
    ns = "cr_k"
    make_table(env, ns, "crash")
    # a cluster of its own with the pool, whose sessions' clock is set: the
    # rule is made at a faked time before a firing the workers' real clock
    # has passed, so that they fire it at once (no wait for a minute's start)
    root = tempfile.mkdtemp(prefix="tms-cronkill-", dir="/tmp")
    os.chmod(root, 0o755)
    c, clock = _faked_cluster(os.path.join(root, "pg"), datetime.now(timezone.utc), pool=True)
    cenv = dict(env, pg=c)
    try:
        _faked_server(c, env)
        wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                                " AND state = 'idle'") == "4", what="the pool")
        policy(cenv, ns, "cr-k", [])
        wait_policy_refreshed(cenv, "cr-k")
        # the cron-job's load of the table hangs: the worker is in the middle of it
        env["catalog"].fault("namespaces/%s/tables/crash$" % ns, action="hang", seconds=5,
                             method="GET", count=1)
        # the last minute's start, once a day: no other firing in the test
        firing = datetime.now(timezone.utc).replace(second=0, microsecond=0)
        clock.set(firing - timedelta(seconds=30))
        rule = one(cenv, "SELECT tms.add_rule('cr-k', 'snapshot-expiry', 'spark',"
                         " schedule => jsonb_build_object('crontab', %s::text),"
                         " condition => 'true')", ("%d %d * * *" % (firing.minute, firing.hour),))
        # the rule is made: the sessions' clock goes back to the real one,
        # which the processes the crash restart starts below then read (with
        # the clock left 30 to 90 s behind, the job after the crash came that
        # much later: 93 s instead of 1.3 s in one run of five)
        clock.set(datetime.now(timezone.utc))
        pid = wait_for(lambda: one(cenv, "SELECT pid FROM tms.workers"
                                         " WHERE current_task LIKE 'cron-job/%'"),
                       timeout=60, what="a worker in the cron-job of the firing")
        os.kill(int(pid), signal.SIGKILL)
        wait_for(lambda: one(cenv, "SELECT count(*) FROM tms.table_maintenance_job"
                                   " WHERE rule_id = %s" % rule) == 1,
                 timeout=180, what="the job after the crash")
        wait_for(lambda: one(cenv, "SELECT count(*) FROM tms.scheduled_tasks"
                                   " WHERE task_name = 'cron-job'") == 0,
                 timeout=30, what="the cron-job to end")
        # one firing, one job: the run after the crash submitted it (a load the
        # restart cut off is a failed evaluation, and the task was retried)
        assert q(cenv, "SELECT decision, count(*) FROM tms.evaluation_log WHERE rule_id = %s"
                       " AND decision <> 'failed' GROUP BY 1", (rule,)) == [("submitted", 1)]
        assert len(jobs(cenv, rule)) == 1
        assert one(cenv, "SELECT last_firing FROM tms.rules WHERE id = %s", (rule,)) == firing
    except Exception:
        sys.stderr.write("---- cluster log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        env["catalog"].clear_faults()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------
# crontab
# ---------------------------------------------------------------------------

def test_a_crontab_fires_at_its_instant_and_expands_in_batches(env):
    """On a cluster whose clock is set (its tasks driven by a session, see
    _faked_cluster): the rule is made 45 s before a minute's start, the
    clock then set to a second before it."""
    ns = "cr_a"
    res = make_table(env, ns, "t0")
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: env["catalog"].register(ns, "t%d" % i, res["metadata_location"]),
                    range(1, 250)))
    at = datetime(2027, 1, 4, 12, 0, tzinfo=timezone.utc)
    root = tempfile.mkdtemp(prefix="tms-cron-", dir="/tmp")
    os.chmod(root, 0o755)
    c, clock = _faked_cluster(os.path.join(root, "pg"), at - timedelta(seconds=45))
    cenv = dict(env, pg=c)
    conn = None
    try:
        _faked_server(c, env)
        conn = c.connect()

        def run(max_tasks=100, kinds=None):
            return c.query("CALL tms.run_pending(%s, %s)", (max_tasks, kinds), conn=conn)[0][0]

        rule, = policy(cenv, ns, "cr-a", [("snapshot-expiry",
                                          "schedule => '{\"crontab\": \"* * * * *\"}',"
                                          " condition => 'snapshots > 1000'")])
        # the policy's task refreshes the group: a baseline per table
        wait_for(lambda: run() >= 0 and
                 one(cenv, "SELECT count(*) FROM tms.rule_baselines WHERE rule_id = %s",
                     (rule,)) == 250, what="the 250 tables")
        firing = one(cenv, "SELECT next_firing FROM tms.rules WHERE id = %s", (rule,))
        assert firing == at
        # the policy's task is due at the firing, not at its cycle an hour away
        task = ("SELECT due_at, data FROM tms.tasks WHERE kind = 'policy-expand' AND instance ="
                " (SELECT id::text FROM tms.maintenance_policies WHERE name = 'cr-a')")
        assert q(cenv, task)[0][0] == firing, q(cenv, task)
        clock.set(firing - timedelta(seconds=1))
        # at the firing, a run of the task enqueues 100 cron-jobs
        # (tms.expand_batch_size) and is due again at once for the rest
        wait_for(lambda: run(1, ["policy-expand"]) == 1, what="the firing")
        cron = q(cenv, task)[0][1]["cron"]
        assert cron["enqueued"] == 100 and cron["more"] is True, cron
        assert one(cenv, "SELECT count(*) FROM tms.scheduled_tasks"
                         " WHERE task_name = 'cron-job'") == 100
        wait_for(lambda: run() >= 0 and
                 one(cenv, "SELECT count(*) FROM tms.evaluation_log WHERE rule_id = %s",
                     (rule,)) == 250, timeout=90, what="every table evaluated at the firing")
        assert one(cenv, "SELECT last_firing FROM tms.rules WHERE id = %s", (rule,)) == firing
        first, last, decisions = q(cenv, "SELECT min(evaluated_at), max(evaluated_at),"
                                         " array_agg(DISTINCT decision)"
                                         " FROM tms.evaluation_log WHERE rule_id = %s",
                                   (rule,))[0]
        assert first >= firing and decisions == ["not-needed"]
        sys.stderr.write("crontab: first evaluation %.3f s after the firing, last %.3f s\n"
                         % ((first - firing).total_seconds(), (last - firing).total_seconds()))
        # the firing was not missed and not left to a later one
        assert last < firing + timedelta(seconds=60)
        # the expansion ended; the task is due at the next firing
        assert q(cenv, task)[0][1]["cron"]["more"] is False, q(cenv, task)
    except Exception:
        sys.stderr.write("---- faked server log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        if conn is not None:
            conn.close()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


def test_a_rule_with_a_crontab_and_on_commit_fires_on_both(env):
    """A schedule with both (doc/schedules.md): the rule fires at its
    crontab's instant, with no commit, and after a commit, long before its
    next firing.  On a cluster whose clock is set, its tasks driven by a
    session (as test_a_crontab_fires_at_its_instant_and_expands_in_batches);
    the commit is declared by tms.notify_commit, its server being polled."""
    ns = "both"
    make_table(env, ns, "t")
    at = datetime(2027, 2, 1, 12, 0, tzinfo=timezone.utc)
    root = tempfile.mkdtemp(prefix="tms-both-", dir="/tmp")
    os.chmod(root, 0o755)
    c, clock = _faked_cluster(os.path.join(root, "pg"), at - timedelta(seconds=45))
    cenv = dict(env, pg=c)
    conn = None
    try:
        _faked_server(c, env)
        conn = c.connect()

        def run():
            return c.query("CALL tms.run_pending()", conn=conn)[0][0]

        def log():
            return q(cenv, "SELECT evaluated_at, decision, job_id FROM tms.evaluation_log"
                           " WHERE rule_id = %s ORDER BY id", (rule,))

        rule, = policy(cenv, ns, "both", [("compaction",
                                          "schedule => '{\"crontab\": \"0 12 * * *\","
                                          " \"on-commit\": true}', condition => 'true',"
                                          " min_interval => '0'")])
        wait_for(lambda: run() >= 0 and
                 one(cenv, "SELECT count(*) FROM tms.rule_baselines WHERE rule_id = %s",
                     (rule,)) == 1, what="the table's baseline")
        assert one(cenv, "SELECT next_firing FROM tms.rules WHERE id = %s", (rule,)) == at
        assert jobs(cenv, rule) == [] and log() == []

        # the crontab: at its instant the table is evaluated and the job submitted
        clock.set(at - timedelta(seconds=1))
        wait_for(lambda: run() >= 0 and len(jobs(cenv, rule)) == 1, timeout=60,
                 interval=0.05, what="the crontab's job")
        (when, decision, first), = log()
        assert decision == "submitted" and at <= when < at + timedelta(seconds=30)
        assert one(cenv, "SELECT last_firing FROM tms.rules WHERE id = %s", (rule,)) == at
        assert one(cenv, "SELECT array_agg(kind) FROM tms.task_history"
                         " WHERE %s BETWEEN started_at AND finished_at", (when,)) == ["cron-job"]
        assert one(cenv, "SELECT tms.finish_operation(%s)", (first,)) is True
        run()
        # no commit, no firing: nothing more
        assert len(jobs(cenv, rule)) == 1

        # a commit: its commit-job evaluates the table, a day before the next firing
        append(env, ns, "t", seed=41)
        assert one(cenv, "SELECT tms.notify_commit('cat', %s, 't')", (ns,)) is True
        wait_for(lambda: run() >= 0 and len(jobs(cenv, rule)) == 2, timeout=60,
                 interval=0.05, what="the commit's job")
        (_, _, _), (when, decision, second) = log()
        assert decision == "submitted" and second == jobs(cenv, rule)[1][0]
        assert when < at + timedelta(minutes=5)
        # evaluated by the commit's commit-job, not by a cron-job
        assert one(cenv, "SELECT array_agg(kind) FROM tms.task_history"
                         " WHERE %s BETWEEN started_at AND finished_at", (when,)) == ["commit-job"]
        assert one(cenv, "SELECT last_firing FROM tms.rules WHERE id = %s", (rule,)) == at
        q(cenv, "SELECT tms.finish_operation(%s)", (second,))
    except Exception:
        sys.stderr.write("---- faked server log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        if conn is not None:
            conn.close()
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)


class FakedClock:
    """The clock of a cluster's sessions, through libfaketime: an offset
    from the real time in a file the library reads at every call
    (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE), so that a test sets it
    while the server runs.  The monotonic clock (timeouts, latches) is the
    real one."""

    def __init__(self, root):
        self.path = os.path.join(root, "faketime")

    def set(self, instant):
        """From now on the sessions' clock reads `instant` (UTC, aware) and
        runs on."""
        with open(self.path + ".new", "w") as f:
            f.write("%+ds\n" % int(round(instant.timestamp() - time.time())))
        os.chmod(self.path + ".new", 0o644)
        os.replace(self.path + ".new", self.path)

    def server_env(self):
        return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": self.path,
                "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1"}


def _faked_cluster(root, instant, pool=False):
    """A cluster whose sessions' clock reads `instant` (UTC, aware) now and
    runs on; returns (cluster, its FakedClock).

    libfaketime fakes the clock of the postmaster's backends but not of its
    background workers (which PostgreSQL 15's postmaster starts from its
    signal handlers).  Without `pool` the pool is off and a session drives
    the tasks with CALL tms.run_pending(), as pg_cron would
    (doc/scheduler.md); with it, what a session does (add a rule) happens
    at the faked time and the workers run on the real one."""
    os.makedirs(root)
    os.chmod(root, 0o755)
    clock = FakedClock(root)
    clock.set(instant)
    settings = SETTINGS if pool else dict(SETTINGS, **{"tms.enabled": "off"})
    c = Cluster(os.path.join(root, "data"), preload=("tms",), settings=settings,
                server_env=clock.server_env())
    c.init()
    c.start()
    c.create_database()
    c.psql("CREATE EXTENSION tms")
    return c, clock


def _faked_server(c, env):
    """Server cat of the faked cluster c: the module's catalog."""
    c.psql("""CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
                allowed_locations 'file://%s/');
              CREATE USER MAPPING FOR PUBLIC SERVER cat;"""
           % (env["catalog"].uri, env["file_root"], env["file_root"]))


@pytest.mark.parametrize("zone,crontab,fake_now,expected,next_expected", [
    # 2027-03-28 Berlin springs forward at 02:00 CET: 02:30 does not exist
    # and is read as 02:30 CET = 03:30 CEST = 01:30 UTC; the next day's
    # 02:30 CEST is 00:30 UTC
    ("Europe/Berlin", "30 2 * * *", "2027-03-28 01:29:30", "2027-03-28 01:30:00",
     "2027-03-29 00:30:00"),
    # 2027-11-07 New York falls back at 02:00 EDT: 01:30 occurs at 05:30
    # UTC (EDT) and 06:30 UTC (EST) and fires once, at the second; the
    # rule made at 06:29:30 fires at 06:30, the next day at 06:30 UTC (EST)
    ("America/New_York", "30 1 * * *", "2027-11-07 06:29:30", "2027-11-07 06:30:00",
     "2027-11-08 06:30:00"),
])
def test_a_crontab_fires_across_a_daylight_saving_change(env, zone, crontab, fake_now,
                                                         expected, next_expected):
    if not os.path.exists(FAKETIME_LIB):
        pytest.fail("libfaketime is not installed (scripts/install-deps.sh installs it)")
    utc = lambda s: datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)  # noqa: E731
    ns = "dst_%s" % zone.split("/")[1].lower()
    make_table(env, ns, "t")
    root = tempfile.mkdtemp(prefix="tms-dst-", dir="/tmp")
    os.chmod(root, 0o755)
    # the cluster is made some minutes of faked time before the rule (on the
    # same side of the change), however long making it takes; the clock is
    # set to the rule's instant once the rest is made
    c, clock = _faked_cluster(os.path.join(root, "pg"), utc(fake_now) - timedelta(minutes=10))
    try:
        _faked_server(c, env)
        c.query("SELECT tms.create_object_group('g', server => 'cat', namespace_pattern => %s)",
                (ns,))
        c.query("SELECT tms.create_policy('p', 'g')")
        clock.set(utc(fake_now))
        rule = c.one("SELECT tms.add_rule('p', 'snapshot-expiry', 'spark',"
                     " schedule => jsonb_build_object('crontab', %s::text, 'time-zone', %s::text),"
                     " condition => 'true')", (crontab, zone))
        assert c.one("SELECT next_firing FROM tms.rules WHERE id = %s", (rule,)) == utc(expected)
        # the rule is made: on to a second before its firing
        clock.set(utc(expected) - timedelta(seconds=1))
        conn = c.connect()
        try:
            def fired():
                c.query("CALL tms.run_pending()", conn=conn)
                return c.one("SELECT count(*) FROM tms.evaluation_log WHERE rule_id = %s",
                             (rule,), conn=conn) == 1
            wait_for(fired, timeout=60, interval=0.05, what="the firing")
        finally:
            conn.close()
        at, decision = c.query("SELECT evaluated_at, decision FROM tms.evaluation_log"
                               " WHERE rule_id = %s", (rule,))[0]
        assert decision == "submitted"
        assert utc(expected) <= at < utc(expected) + timedelta(seconds=30)
        assert c.one("SELECT last_firing FROM tms.rules WHERE id = %s", (rule,)) == utc(expected)
        assert c.one("SELECT next_firing FROM tms.rules WHERE id = %s", (rule,)) == \
            utc(next_expected)
        assert c.one("SELECT (data -> 'cron' ->> 'next_firing')::timestamptz"
                     " FROM tms.tasks WHERE kind = 'policy-expand'") == utc(next_expected)
    except Exception:
        sys.stderr.write("---- faked server log ----\n%s\n" % c.log_tail(80))
        raise
    finally:
        c.destroy()
        shutil.rmtree(root, ignore_errors=True)
