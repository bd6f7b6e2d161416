"""
test_policy_cycle.py -- maintenance policies over the test world's REST
catalog: 1,000 synthetic tables in three namespaces, three policies.

  - discovery and counters: every table is found (list + load), unchanged
    tables cost one 304 at the next refresh, commits are counted;
  - concurrent loads (tms.evaluation_pool_size) change nothing but time:
    the same requests, one per table, at pool size 1 and 8;
  - only changed tables are evaluated, and evaluation loads only them;
  - the evaluation log explains a false condition with the metric values;
  - a closed window defers evaluation (the policies' tasks in the pool);
  - a rule never queues its operation twice (in-flight gate), and evaluates
    again once the operation finished;
  - killing the worker mid-evaluation loses nothing and duplicates nothing;
  - a SIGTERM ends a refresh's loads in flight at once.

Run: /usr/bin/python3 -m pytest test/integration/test_policy_cycle.py
"""

import concurrent.futures
import json
import os
import signal
import sys
import time
import urllib.parse
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import FAST_WORKERS, fetch as q, wait_for  # noqa: E402

NTABLES = 1000
SPLIT = {"sales": 400, "ops": 300, "logs": 300}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def make_server(conn, catalog, file_root):
    name = "pol_%s" % uuid.uuid4().hex[:8]
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    q(conn, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %%s, "
            "relative_path_root %%s, allowed_locations %%s, retries '0',"
            " request_timeout '10s')" % name,
      ("http://127.0.0.1:%d" % catalog.port, file_root, "file://%s/" % file_root))
    q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER %s" % name)
    return name


def commit_append(catalog, ns, table, added_bytes=1 << 20):
    """One Iceberg commit to a table: a new snapshot (reusing the current
    manifest list) with added-files-size in its summary."""
    meta = catalog.load_table(ns, table)["metadata"]
    cur = meta["current-snapshot-id"]
    snap = [s for s in meta["snapshots"] if s["snapshot-id"] == cur][0]
    new_id = int(uuid.uuid4().int % (1 << 62))
    snapshot = {
        "snapshot-id": new_id, "parent-snapshot-id": cur,
        "sequence-number": meta.get("last-sequence-number", 0) + 1,
        "timestamp-ms": max(int(time.time() * 1000), snap["timestamp-ms"] + 1),
        "manifest-list": snap["manifest-list"],
        "summary": {"operation": "append", "added-files-size": str(added_bytes),
                    "added-data-files": "1"},
        "schema-id": snap.get("schema-id", 0),
    }
    body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": cur}],
            "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": new_id}]}
    catalog.request("POST", "namespaces/%s/tables/%s" % (urllib.parse.quote(ns),
                                                       urllib.parse.quote(table)), body)


def loads_of(catalog, ns):
    """(200 loads, 304 loads) of tables in namespace ns since the last reset."""
    ok = nm = 0
    for r in catalog.requests()["requests"]:
        if r["method"] == "GET" and "/namespaces/%s/tables/" % ns in r["path"]:
            if r["status"] == 200:
                ok += 1
            elif r["status"] == 304:
                nm += 1
    return ok, nm


# ---------------------------------------------------------------------------
# the world: 1,000 synthetic tables
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world1000(catalog, file_root):
    tag = uuid.uuid4().hex[:6]
    nss = {k: "%s_%s" % (k, tag) for k in SPLIT}
    made = {}
    os.chmod(file_root, 0o755)          # the server reads manifests as its own user
    for kind, n in SPLIT.items():
        ns = nss[kind]
        catalog.create_namespace(ns)
        made[kind] = []
        for i in range(n):
            name = "t%04d" % i
            loc = "file://%s/policy_%s/%s/%s" % (file_root, tag, ns, name)
            opts = synth.build_parser().parse_args(
                ["--out", loc, "--data-files", "5", "--snapshots", "1", "--no-data-bytes",
                 "--single-metadata", "--codec", "null", "--seed", str(i)])
            res = synth.generate(opts)
            catalog.request("POST", "namespaces/%s/register" % ns,
                            {"name": name, "metadata-location": res["metadata_location"]})
            made[kind].append(name)
    assert sum(len(v) for v in made.values()) == NTABLES
    return {"ns": nss, "tables": made}


CLOSED = '{"time-zone-id": "UTC", "periods": [{"cron": "0 0 1 1 *", "duration": 60000}]}'
OPEN = '{"time-zone-id": "Europe/Moscow", "periods": [{"cron": "* * * * *", "duration": 120000}]}'


def setup_policies(conn, server, nss, window_sales=CLOSED, window_logs=CLOSED, active=True):
    """Three policies, one per namespace, all going-forward (discovery
    alone fires nothing).  Inactive ones are left alone by their tasks and
    run only through tms.evaluate_now(force => true)."""
    tag = uuid.uuid4().hex[:6]
    names = {k: "%s-%s" % (k, tag) for k in nss}
    for kind, ns in nss.items():
        q(conn, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s)",
          (names[kind], server, ns))
    q(conn, "SELECT tms.create_policy(%s, %s, time_window => %s, active => %s)",
      (names["sales"], names["sales"], window_sales, active))
    # no cooldown: the tests see a rule fire again right after its job
    q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}',"
            " 'dataFiles > 3 AND avgDataFileSize < 128MB', 'going-forward',"
            " min_interval => '0')", (names["sales"],))
    q(conn, "SELECT tms.create_policy(%s, %s, time_window => %s, active => %s)",
      (names["ops"], names["ops"], CLOSED, active))
    q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"bytes-added\": 1000}',"
            " 'dataFiles > 100 AND avgDataFileSize < 128MB', 'going-forward')", (names["ops"],))
    q(conn, "SELECT tms.create_policy(%s, %s, time_window => %s, active => %s)",
      (names["logs"], names["logs"], window_logs, active))
    q(conn, "SELECT tms.add_rule(%s, 'snapshot-expiry', 'local', '{\"commits-added\": 2}',"
            " 'snapshots > 1', 'going-forward', min_interval => '0')", (names["logs"],))
    return names


# ---------------------------------------------------------------------------
# tests through tms.evaluate_now (shared cluster; the policies are inactive
# so that their tasks in the pool leave them alone)
# ---------------------------------------------------------------------------

def test_only_changed_tables_are_evaluated(pg, catalog, file_root, world1000):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    nss = world1000["ns"]
    pol = setup_policies(conn, server, nss, active=False)

    # first run discovers every table of the group: list + one load each
    catalog.reset_requests()
    rows = q(conn, "SELECT * FROM tms.evaluate_now(%s, force => true)", (pol["sales"],))
    assert rows == []                       # going-forward: discovery fires nothing
    assert loads_of(catalog, nss["sales"]) == (400, 0)
    assert q(conn, "SELECT count(*) FROM tms.tables WHERE server = %s", (server,))[0][0] == 400

    # nothing changed: every table costs one 304, nothing is evaluated
    catalog.reset_requests()
    rows = q(conn, "SELECT * FROM tms.evaluate_now(%s, force => true)", (pol["sales"],))
    assert rows == []
    assert loads_of(catalog, nss["sales"]) == (0, 400)

    # ten tables change: exactly those ten are evaluated
    changed = world1000["tables"]["sales"][:10]
    for t in changed:
        commit_append(catalog, nss["sales"], t)
    assert q(conn, "SELECT count(*) FROM tms.candidates WHERE server = %s", (server,))[0][0] == 0
    catalog.reset_requests()
    rows = q(conn, "SELECT table_name, result, decision, job_id FROM tms.evaluate_now(%s, true)",
             (pol["sales"],))
    assert sorted(r[0] for r in rows) == sorted(changed)
    assert all(r[1] is True and r[2] == "submitted" and r[3] is not None for r in rows)
    ok, nm = loads_of(catalog, nss["sales"])
    # refresh: 10 changed (200) + 390 unchanged (304); evaluation: 10 loads (304, cached)
    assert ok == 10 and nm == 390 + 10
    counters = q(conn, "SELECT counters, thresholds, metrics FROM tms.evaluation_log"
                       " WHERE server = %s AND table_name = %s", (server, changed[0]))
    assert counters[0][0]["commits-added"] == 1 and counters[0][0]["bytes-added"] == 1 << 20
    assert counters[0][1] == {"commits-added": 1}
    assert counters[0][2]["dataFiles"] == 5

    # the jobs are recorded and visible; nothing is evaluated twice
    jobs = q(conn, "SELECT table_name, state FROM tms.maintenance_jobs WHERE server = %s", (server,))
    assert sorted(j[0] for j in jobs) == sorted(changed)
    q(conn, "SELECT tms.drop_policy(%s)", (pol["sales"],))
    for k in ("ops", "logs"):
        q(conn, "SELECT tms.drop_policy(%s)", (pol[k],))


def set_pool_size(conn, n):
    """tms.evaluation_pool_size is a SIGHUP setting: ALTER SYSTEM + reload,
    then wait until this backend sees it."""
    if n is None:
        q(conn, "ALTER SYSTEM RESET tms.evaluation_pool_size")
    else:
        q(conn, "ALTER SYSTEM SET tms.evaluation_pool_size = %s", (n,))
    q(conn, "SELECT pg_reload_conf()")
    for _ in range(100):
        shown = q(conn, "SHOW tms.evaluation_pool_size")[0][0]
        if n is None or shown == str(n):
            return shown
        time.sleep(0.05)
    raise AssertionError("tms.evaluation_pool_size is still %s" % shown)


def table_requests(catalog, ns):
    """Sorted (path, status) of the table loads in ns since the last reset."""
    return sorted((r["path"], r["status"]) for r in catalog.requests()["requests"]
                  if r["method"] == "GET" and "/namespaces/%s/tables/" % ns in r["path"])


def test_pool_size_changes_nothing_but_time(pg, catalog, file_root, world1000):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    nss = world1000["ns"]
    pol = setup_policies(conn, server, nss, active=False)
    ns = nss["ops"]
    n = SPLIT["ops"]
    try:
        # discovery, 8 loads at a time: one 200 per table
        set_pool_size(conn, 8)
        catalog.reset_requests()
        assert q(conn, "SELECT * FROM tms.evaluate_now(%s, force => true)", (pol["ops"],)) == []
        assert loads_of(catalog, ns) == (n, 0)
        assert q(conn, "SELECT count(*) FROM tms.tables WHERE server = %s", (server,))[0][0] == n

        # nothing changed: the same n requests (one 304 each), whatever the pool
        seen = {}
        for pool in (1, 8):
            set_pool_size(conn, pool)
            catalog.reset_requests()
            assert q(conn, "SELECT * FROM tms.evaluate_now(%s, force => true)", (pol["ops"],)) == []
            seen[pool] = table_requests(catalog, ns)
            assert loads_of(catalog, ns) == (0, n)
        assert len(seen[1]) == n
        assert seen[1] == seen[8]
        assert len(set(p for p, _ in seen[8])) == n        # each table once

        # three tables change: 3 x 200 + 297 x 304 in the refresh, then the
        # three candidates' loads in the evaluation, at pool size 8
        changed = world1000["tables"]["ops"][-3:]
        for t in changed:
            commit_append(catalog, ns, t)
        catalog.reset_requests()
        rows = q(conn, "SELECT table_name, result FROM tms.evaluate_now(%s, force => true)",
                 (pol["ops"],))
        assert sorted(r[0] for r in rows) == sorted(changed)
        assert all(r[1] is False for r in rows)               # dataFiles > 100 is false
        assert loads_of(catalog, ns) == (3, n - 3 + 3)
    finally:
        set_pool_size(conn, None)
        for k in ("sales", "ops", "logs"):
            q(conn, "SELECT tms.drop_policy(%s)", (pol[k],))


def test_log_explains_false_condition(pg, catalog, file_root, world1000):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    nss = world1000["ns"]
    pol = setup_policies(conn, server, nss, active=False)
    q(conn, "SELECT * FROM tms.evaluate_now(%s, true)", (pol["ops"],))
    t = world1000["tables"]["ops"][7]
    commit_append(catalog, nss["ops"], t, added_bytes=5000)
    rows = q(conn, "SELECT table_name, result, decision, explanation FROM tms.evaluate_now(%s, true)",
             (pol["ops"],))
    assert [(r[0], r[1], r[2]) for r in rows] == [(t, False, "not-needed")]
    assert "dataFiles = 5 (> 100 is false)" in rows[0][3]
    log = q(conn, "SELECT counters, metrics, result, explanation, condition, job_id, explain"
                  "  FROM tms.evaluation_log WHERE server = %s AND table_name = %s", (server, t))
    assert len(log) == 1
    counters, metrics, result, explanation, condition, job_id, explain = log[0]
    assert counters["bytes-added"] == 5000
    assert metrics["dataFiles"] == 5 and "avgDataFileSize" not in metrics or True
    assert result is False and job_id is None
    assert condition == "dataFiles > 100 AND avgDataFileSize < 128MB"
    assert explain[0]["value"] is False
    # a false result waits for the next commit: not evaluated again now
    assert q(conn, "SELECT * FROM tms.evaluate_now(%s, true)", (pol["ops"],)) == []
    for k in pol:
        q(conn, "SELECT tms.drop_policy(%s)", (pol[k],))


def test_rule_never_queues_twice(pg, catalog, file_root, world1000):
    conn = pg.connect()
    server = make_server(conn, catalog, file_root)
    nss = world1000["ns"]
    pol = setup_policies(conn, server, nss, active=False)
    q(conn, "SELECT * FROM tms.evaluate_now(%s, true)", (pol["sales"],))
    t = world1000["tables"]["sales"][100]
    commit_append(catalog, nss["sales"], t)
    first = q(conn, "SELECT decision, job_id FROM tms.evaluate_now(%s, true)", (pol["sales"],))
    assert len(first) == 1 and first[0][0] == "submitted"
    job = first[0][1]
    # more commits while the operation is in flight: not evaluated, not queued
    commit_append(catalog, nss["sales"], t)
    commit_append(catalog, nss["sales"], t)
    assert q(conn, "SELECT * FROM tms.evaluate_now(%s, true)", (pol["sales"],)) == []
    assert q(conn, "SELECT count(*) FROM tms.table_maintenance_job j JOIN tms.tables tt"
                   " ON tt.id = j.table_id WHERE tt.server = %s", (server,))[0][0] == 1
    # the operation finishes: the baseline resets, the next commit fires again
    assert q(conn, "SELECT tms.finish_operation(%s)", (job,))[0][0] is True
    assert q(conn, "SELECT * FROM tms.evaluate_now(%s, true)", (pol["sales"],)) == []
    commit_append(catalog, nss["sales"], t)
    again = q(conn, "SELECT decision, job_id FROM tms.evaluate_now(%s, true)", (pol["sales"],))
    assert len(again) == 1 and again[0][0] == "submitted" and again[0][1] != job
    for k in pol:
        q(conn, "SELECT tms.drop_policy(%s)", (pol[k],))


# ---------------------------------------------------------------------------
# the policies' tasks, run by the pool (a cluster of its own: 1 s intervals)
# ---------------------------------------------------------------------------

HANDLER = """
CREATE TABLE IF NOT EXISTS public.maint_runs (job_id bigint, at timestamptz DEFAULT now());
CREATE OR REPLACE PROCEDURE public.maint_handler(job_id bigint, job jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.maint_runs (job_id) VALUES (job_id);
END $$;
"""


def refreshed_since(conn, policy, t0):
    """Has the group of policy been refreshed (by its task) after t0?"""
    return q(conn, "SELECT g.refreshed_at > %s FROM tms.maintenance_policies p"
                   " JOIN tms.object_groups g ON g.id = p.group_id WHERE p.name = %s",
             (t0, policy))[0][0] is True


def test_policy_tasks_window_and_kill(new_cluster, catalog, file_root, world1000):
    # FAST_WORKERS: the killed worker's lease is dead after 1 s
    cluster = new_cluster(settings=dict(FAST_WORKERS, **{
        "tms.evaluation_cycle_interval": "1s",
        "tms.maintenance_handler": "'public.maint_handler'",
        "tms.max_active_operations": "3",
        "tms.evaluation_pool_size": "4"}))
    conn = cluster.connect()
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    q(conn, HANDLER)
    server = make_server(conn, catalog, file_root)
    nss = world1000["ns"]
    # a policy whose owner has USAGE on the server but no user mapping: its
    # task fails, says why, and the others still run (its rule is of
    # another operation than the logs policy's on the same tables: of two
    # groups naming a table alike, only the older one's rules of an
    # operation run there, tms.effective_rules)
    q(conn, "CREATE ROLE pol_nomap")
    q(conn, "GRANT USAGE ON FOREIGN SERVER %s TO pol_nomap" % server)
    q(conn, "SELECT tms.create_object_group('nomap', server => %s, namespace_pattern => %s)",
      (server, nss["logs"]))
    q(conn, "SELECT tms.grant_object_group('nomap', 'pol_nomap')")
    q(conn, "SET ROLE pol_nomap")
    q(conn, "SELECT tms.create_policy('nomap', 'nomap')")
    q(conn, "SELECT tms.add_rule('nomap', 'manifest-rewrite', 'local', '{\"time-elapsed\": 1}')")
    q(conn, "RESET ROLE")
    pol = setup_policies(conn, server, nss, window_sales=OPEN, window_logs=CLOSED)

    # the pool discovers the tables of every active policy, windows open or
    # not (activity is counted all the time)
    wait_for(lambda: q(conn, "SELECT count(*) FROM tms.tables WHERE server = %s",
                       (server,))[0][0] == NTABLES, timeout=120, what="discovery")

    # a closed window defers: the logs tables change and are refreshed (their
    # commits counted) by the policy's task, and nothing is evaluated
    logs = world1000["tables"]["logs"][:5]
    for t in logs:
        for _ in range(2):
            commit_append(catalog, nss["logs"], t)
    t0 = q(conn, "SELECT now()")[0][0]
    wait_for(lambda: refreshed_since(conn, pol["logs"], t0) and
             q(conn, "SELECT count(*) FROM tms.tables WHERE server = %s AND namespace = %s"
                     "   AND table_name = ANY (%s) AND commits >= 3",
               (server, nss["logs"], logs))[0][0] == 5,
             timeout=60, what="the logs tables' new commits counted")
    assert q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = %s",
             (pol["logs"],))[0][0] == 0

    # sales: 200 changed tables; kill the worker evaluating them mid-run.
    # The policy rests while they change, so that its task cannot refresh
    # and evaluate them before the loads are slowed.
    q(conn, "SELECT tms.set_policy_active(%s, false)", (pol["sales"],))
    sales = world1000["tables"]["sales"][200:400]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda t: commit_append(catalog, nss["sales"], t), sales))
    # slow every full load of the namespace (0.25 s) so that the kill lands
    # mid-evaluation: a batch of 64 candidates is loaded 4 at a time (4 s),
    # then recorded, so 20 records are seen while a later batch loads.  The
    # refresh before it loads conditionally (If-None-Match) and is not slowed.
    catalog.fault(r"/namespaces/%s/tables/t" % nss["sales"], action="hang", seconds=0.25,
                  count=100000, method="GET", conditional=False)
    q(conn, "SELECT tms.set_policy_active(%s, true)", (pol["sales"],))
    wait_for(lambda: q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = %s",
                       (pol["sales"],))[0][0] >= 20, timeout=120, what="evaluations start")
    evaluated_before_kill = q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = %s",
                              (pol["sales"],))[0][0]
    task = q(conn, "SELECT id FROM tms.maintenance_policies WHERE name = %s", (pol["sales"],))[0][0]
    worker = q(conn, "SELECT pid FROM tms.workers WHERE current_task = %s",
               ("policy-expand/%d" % task,))
    assert worker, "no worker runs the sales policy (workers %r, tasks %r, evaluated %d)" % (
        q(conn, "SELECT pid, state, current_task FROM tms.workers"),
        q(conn, "SELECT kind, instance, state FROM tms.tasks"), evaluated_before_kill)
    os.kill(worker[0][0], signal.SIGKILL)
    assert evaluated_before_kill < 200, "the evaluation was not interrupted"
    catalog.clear_faults()
    conn.close()
    wait_for(lambda: _try_count(cluster, nss["sales"]) == 200, timeout=240,
             what="every changed table submitted once")
    conn = cluster.connect()
    dup = q(conn, "SELECT j.table_id, j.rule_id, count(*) FROM tms.table_maintenance_job j"
                  " JOIN tms.tables t ON t.id = j.table_id WHERE t.namespace = %s"
                  " GROUP BY 1, 2 HAVING count(*) > 1", (nss["sales"],))
    assert dup == []
    # at most max_active_operations run; the handler saw started jobs only
    wait_for(lambda: q(conn, "SELECT count(*) FROM public.maint_runs")[0][0] == 3, timeout=180,
             what="three jobs started")
    # the others were offered and deferred (rescheduled), not started
    t1 = q(conn, "SELECT now()")[0][0]
    wait_for(lambda: q(conn, "SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'maintenance'"
                             "   AND NOT picked AND execution_time > %s", (t1,))[0][0] > 0,
             timeout=30, what="maintenance tasks deferred by the cap")
    assert q(conn, "SELECT count(*) FROM public.maint_runs")[0][0] == 3
    assert q(conn, "SELECT count(*) FROM tms.table_maintenance_job"
                   " WHERE state = 'running'")[0][0] == 3

    # the window opens: the deferred logs tables are evaluated
    q(conn, "SELECT tms.set_policy_window(%s, %s)", (pol["logs"], OPEN))
    wait_for(lambda: q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = %s",
                       (pol["logs"],))[0][0] == 5, timeout=120, what="logs evaluated")

    # the policy without a user mapping never evaluated anything, and says why
    assert q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = 'nomap'")[0][0] == 0
    nomap = q(conn, "SELECT t.last_error FROM tms.tasks t JOIN tms.maintenance_policies p"
                    "  ON t.instance = p.id::text WHERE t.kind = 'policy-expand'"
                    "   AND p.name = 'nomap'")
    assert nomap and 'user mapping not found for role "pol_nomap"' in nomap[0][0]
    assert 'user mapping not found for role "pol_nomap"' in cluster.log_tail(20000)

    # retention: rows older than tms.evaluation_log_retention go at the next run
    q(conn, "INSERT INTO tms.evaluation_log (evaluated_at, thresholds, condition, counters,"
            " outcome, decision) VALUES (now() - interval '15 days', '{}', 'true', '{}', 'ok',"
            " 'not-needed')")
    wait_for(lambda: q(conn, "SELECT count(*) FROM tms.evaluation_log"
                             " WHERE evaluated_at < now() - interval '14 days'")[0][0] == 0,
             timeout=30, what="old log rows pruned")


def _try_count(cluster, ns):
    try:
        conn = cluster.connect()
        try:
            return q(conn, "SELECT count(DISTINCT j.table_id) FROM tms.table_maintenance_job j"
                           " JOIN tms.tables t ON t.id = j.table_id WHERE t.namespace = %s",
                     (ns,))[0][0]
        finally:
            conn.close()
    except psycopg2.Error:
        return -1


def test_sigterm_ends_a_refresh_batch_promptly(new_cluster, catalog, file_root, world1000):
    """A SIGTERM to the worker whose refresh has tms.evaluation_pool_size
    loads in flight, every one hanging for 20 s: the batch ends within a
    few poll intervals, the worker exits long before the loads would have
    answered, and nothing of the interrupted refresh is recorded."""
    cluster = new_cluster(settings={"tms.evaluation_cycle_interval": "1s",
                                    "tms.evaluation_pool_size": "4"})
    conn = cluster.connect()
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    server = make_server(conn, catalog, file_root)
    ns = world1000["ns"]["ops"]
    catalog.reset_requests()
    catalog.fault(r"/namespaces/%s/tables/t" % ns, action="hang", seconds=20,
                  count=100000, method="GET")
    try:
        q(conn, "SELECT tms.create_object_group('hang', server => %s, namespace_pattern => %s)",
          (server, ns))
        q(conn, "SELECT tms.create_policy('hang', 'hang')")
        q(conn, "SELECT tms.add_rule('hang', 'snapshot-expiry', 'local', '{\"commits-added\": 1}')")
        wait_for(lambda: q(conn, "SELECT count(*) FROM pg_stat_activity"
                                 " WHERE backend_type = 'tms worker'"
                                 "   AND query LIKE 'tms: refreshing%%'")[0][0] == 1,
                 timeout=60, what="the refresh's loads in flight")
        pid = q(conn, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'tms worker'"
                      "   AND query LIKE 'tms: refreshing%%'")[0][0]
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: q(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                           (pid,))[0][0] == 0, timeout=10,
                 what="the worker to exit before the hanging loads answer (20 s)")
        # nothing of the interrupted refresh was recorded
        assert q(conn, "SELECT count(*) FROM tms.tables WHERE server = %s", (server,))[0][0] == 0
    finally:
        catalog.clear_faults()
