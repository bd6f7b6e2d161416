"""
test_leases.py -- one execution per task, whatever the catalog's speed
(doc/security.md "One execution per task").

The reproduction of the review: the supervisor used to run the policy
evaluation cycle itself, so a catalog load that hung stopped every
heartbeat; a long SQL-handled task then looked dead, and CALL
tms.run_pending() released its lease and ran its handler a second time
while the first execution was still running.  Now the evaluation runs in a
pool worker like every task, the supervisor only keeps leases, and
dead-lease recovery never releases a lease a live process holds.

Each test counts executions with a sequence the handler advances first
thing: nextval() is not transactional, so a second execution would show
even if it were rolled back.

  - small settings (heartbeat 1 s, dead after 2 s), a load hanging 15 s,
    a handler running past the dead-lease age (until the test lets it go):
    run_pending executes nothing, the heartbeat stays fresh, the handler
    ran once;
  - the defaults (dead after 30 s), a load hanging 45 s: the same (the
    one test that waits for the default dead-lease age);
  - a purge under the same stall finishes with no spurious failed attempt;
  - a handler whose lease is taken away learns it at once: its network
    wait ends long before the catalog answers, and it writes nothing more.

Run: /usr/bin/python3 -m pytest test/integration/test_leases.py
"""

import os
import subprocess
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import wait_for  # noqa: E402

# the handler runs until the test lets it go: it waits for the advisory
# lock the test's session holds (freed when that session ends, whatever
# happens to the test)
SLOW_LOCK = 4242
SLOW_HANDLER = """
CREATE SEQUENCE public.execs;
CREATE PROCEDURE public.slow(instance text, data jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('public.execs');
    PERFORM pg_advisory_xact_lock(%d);
END $$;
SELECT tms.register_task_kind('slow', 'public.slow(text, jsonb)', 1);
""" % SLOW_LOCK


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def one_table(catalog, file_root):
    """A namespace with one small synthetic table; returns (ns, table)."""
    ns = "lease_%s" % uuid.uuid4().hex[:6]
    catalog.create_namespace(ns)
    loc = "file://%s/leases/%s/t" % (file_root, ns)
    opts = synth.build_parser().parse_args(
        ["--out", loc, "--data-files", "2", "--snapshots", "1", "--no-data-bytes",
         "--single-metadata", "--codec", "null", "--seed", "1"])
    res = synth.generate(opts)
    catalog.request("POST", "namespaces/%s/register" % ns,
                    {"name": "t", "metadata-location": res["metadata_location"]})
    os.chmod(file_root, 0o755)
    return ns, "t"


def stalled_policy(cluster, catalog, file_root, hang_s):
    """A policy whose every table load hangs hang_s seconds; returns ns."""
    ns, table = one_table(catalog, file_root)
    srv = "lease_%s" % uuid.uuid4().hex[:6]
    cluster.query("CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s,"
                  " relative_path_root %%s, allowed_locations %%s, retries '0',"
                  " request_timeout '120s')" % srv,
                  (catalog.uri, file_root, "file://%s/" % file_root))
    cluster.query("CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % srv)
    catalog.fault(r"/namespaces/%s/tables/%s$" % (ns, table), action="hang",
                  seconds=hang_s, count=1000, method="GET")
    cluster.query("SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s)",
                  (srv, srv, ns))
    cluster.query("SELECT tms.create_policy(%s, %s)", (srv, srv))
    cluster.query("SELECT tms.add_rule(%s, 'snapshot-expiry', 'local', '{\"commits-added\": 1}')",
                  (srv,))
    # the catalog logs a request when it answers: watch the worker instead
    wait_for(lambda: cluster.query("SELECT count(*) FROM pg_stat_activity"
                                   " WHERE backend_type = 'tms worker'"
                                   "   AND query LIKE 'tms: refreshing%%'")[0][0] == 1,
             timeout=30, what="the policy's refresh waiting on its load")
    return ns


def slow_task_running_for(cluster, seconds):
    """Has the worker running the slow handler been in it for `seconds`?"""
    rows = cluster.query("SELECT now() - query_start > make_interval(secs => %s)"
                         "  FROM pg_stat_activity WHERE query = 'tms: task slow/one'"
                         "   AND backend_type = 'tms worker'", (seconds,))
    return bool(rows) and rows[0][0]


def run_the_reproduction(cluster, catalog, file_root, hang_s, dead_s):
    cluster.query("CREATE EXTENSION IF NOT EXISTS tms")
    cluster.query(SLOW_HANDLER)
    stalled_policy(cluster, catalog, file_root, hang_s)
    hold = cluster.connect()
    try:
        cluster.query("SELECT pg_advisory_lock(%s)", (SLOW_LOCK,), conn=hold)
        cluster.query("SELECT tms.schedule_task('slow', 'one', '{}')")
        wait_for(lambda: cluster.query("SELECT state FROM tms.tasks WHERE kind = 'slow'")
                 == [("running",)], timeout=30, what="the slow task claimed")
        # the handler has run past the dead-lease age while the catalog stalls
        wait_for(lambda: slow_task_running_for(cluster, dead_s + 2), timeout=dead_s + 30,
                 what="the slow handler running past the dead-lease age")
        # its heartbeat is fresh: the supervisor renews it whatever the catalog does
        age = cluster.query("SELECT extract(epoch FROM heartbeat_age) FROM tms.tasks"
                            " WHERE kind = 'slow'")[0][0]
        assert age < dead_s, "heartbeat %.1f s old while the catalog stalls" % age
        # another executor finds nothing to run: the lease is live
        assert cluster.query("CALL tms.run_pending(1, '{slow}')") == [(0, 0)]
    finally:
        hold.close()            # the handler ends
    wait_for(lambda: cluster.query("SELECT count(*) FROM tms.scheduled_tasks"
                                   " WHERE task_name = 'slow'")[0][0] == 0,
             timeout=30, what="the slow task finished")
    assert cluster.query("SELECT last_value FROM public.execs")[0][0] == 1
    assert "released the lease" not in cluster.log_tail(5000)
    catalog.clear_faults()


def test_one_execution_small_settings(new_cluster, catalog, file_root):
    cluster = new_cluster(settings={"tms.heartbeat_interval": "'1s'",
                                    "tms.missed_heartbeats_limit": "2",
                                    "tms.naptime": "'100ms'"})
    run_the_reproduction(cluster, catalog, file_root, hang_s=15, dead_s=2)


def test_one_execution_default_settings(new_cluster, catalog, file_root):
    cluster = new_cluster(settings={"tms.naptime": "'100ms'"})
    run_the_reproduction(cluster, catalog, file_root, hang_s=45, dead_s=30)


def test_purge_under_a_stall_counts_no_failed_attempt(new_cluster, catalog, file_root):
    """A purge that runs for several heartbeat intervals while a policy's
    load stalls: SUCCEEDED with no failed attempt, nothing left."""
    cluster = new_cluster(settings={"tms.heartbeat_interval": "'500ms'",
                                    "tms.missed_heartbeats_limit": "2",
                                    "tms.naptime": "'100ms'",
                                    "tms.purge_delete_batch_size": "1",
                                    "tms.purge_batch_pause": "'300ms'"})
    cluster.query("CREATE EXTENSION IF NOT EXISTS tms")
    stalled_policy(cluster, catalog, file_root, hang_s=20)
    ns, table = one_table(catalog, file_root)
    srv = "purge_%s" % uuid.uuid4().hex[:6]
    cluster.query("CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s,"
                  " relative_path_root %%s, allowed_locations %%s, retries '0')" % srv,
                  (catalog.uri, file_root, "file://%s/leases/" % file_root))
    cluster.query("CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % srv)
    # the server deletes them as its own user
    subprocess.run(["chown", "-R", "postgres", os.path.join(file_root, "leases", ns)],
                   check=True)
    job = cluster.query("SELECT tms.purge_table(%s, %s, %s)", (srv, ns, table))[0][0]
    wait_for(lambda: cluster.query("SELECT state FROM tms.purge_jobs WHERE id = %s", (job,))[0][0]
             in ("SUCCEEDED", "FAILED"), timeout=120, what="the purge to end")
    state, attempts, err = cluster.query("SELECT state, attempts, last_error FROM tms.purge_jobs"
                                         " WHERE id = %s", (job,))[0]
    assert (state, attempts) == ("SUCCEEDED", 0), err
    left = [f for _, _, fs in os.walk(os.path.join(file_root, "leases", ns, "t")) for f in fs]
    assert left == []
    catalog.clear_faults()


def test_a_lost_lease_ends_the_handler_at_once(new_cluster, catalog, file_root):
    """An operator takes a running policy evaluation's lease away (the
    task's version changes): the evaluation, waiting on a load that hangs
    for a minute, stops within a few heartbeat intervals."""
    cluster = new_cluster(settings={"tms.heartbeat_interval": "'500ms'",
                                    "tms.naptime": "'100ms'"})
    cluster.query("CREATE EXTENSION IF NOT EXISTS tms")
    stalled_policy(cluster, catalog, file_root, hang_s=60)
    wait_for(lambda: cluster.query("SELECT count(*) FROM tms.workers"
                                   " WHERE current_task LIKE 'policy-expand/%'")[0][0] == 1,
             timeout=30, what="the evaluation running")
    cluster.query("UPDATE tms.scheduled_tasks SET version = version + 1"
                  " WHERE task_name = 'policy-expand'")
    wait_for(lambda: cluster.query("SELECT count(*) FROM tms.workers"
                                   " WHERE current_task LIKE 'policy-expand/%'")[0][0] == 0,
             timeout=10, what="the evaluation to stop, long before the catalog answers")
    assert "lost the lease on task \"policy-expand\"" in cluster.log_tail(5000)
    catalog.clear_faults()
