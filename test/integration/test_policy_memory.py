"""
test_policy_memory.py -- the memory of a policy's run does not grow with
the number of tables it refreshes, evaluates or finds dropped: in a backend
(tms.evaluate_now) and in the pool worker that runs the policy-expand task,
and the pool's supervisor keeps nothing of them meanwhile.

Each test runs the same policy shape over a small namespace (SMALL tables)
and a large one (LARGE tables) and compares the peak private memory of the
process that ran it: VmHWM of /proc/<pid>/status, reset through
/proc/<pid>/clear_refs just before the run, minus the shared and file pages
mapped at its end (VmHWM also counts the shared buffers the run touched).
The difference between the two runs is what grows with the tables; it must
stay below GROWTH_LIMIT_KB (what the one page may legitimately take), far
below what keeping a few kilobytes per table until the run ends would give.
The listing's page size is LARGE, so anything kept per table until a page
ends would show too.

The tables are pointers inserted into the test catalog's JDBC table, all to
one synthetic table of 5 data files; the rules are catch-up with a
condition that reads the manifest list and is false, so every table is
discovered and evaluated and nothing is submitted.

Needs to write /proc/<pid>/clear_refs of the server's processes (root or
the server's user); skipped otherwise.

Run: /usr/bin/python3 -m pytest test/integration/test_policy_memory.py
"""

import os
import sys
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import synth  # noqa: E402
from pgcluster import wait_for  # noqa: E402

SMALL = 400
LARGE = 4000
# What may grow from SMALL to LARGE tables in one page: the page's names,
# states and statement parameters, about 1.2 KB a table (4.3 MB); a result
# or an evaluation kept per table (5 to 8 KB each) would add 20 to 30 MB.
GROWTH_LIMIT_KB = 10 * 1024
# Finding tables dropped keeps nothing per table but a 64-bit hash.
DROP_GROWTH_LIMIT_KB = 2 * 1024
CONDITION = "dataFiles > 100"        # needs the manifest list; false for 5 data files
SETTINGS = {"tms.max_workers": "1", "tms.evaluation_cycle_interval": "'1h'"}


# clusters of its own (new_cluster): see test/integration/conftest.py
pytestmark = pytest.mark.own_cluster


def q(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def connect(cluster):
    conn = psycopg2.connect(cluster.dsn())
    conn.autocommit = True
    return conn


# ---------------------------------------------------------------------------
# memory of a process
# ---------------------------------------------------------------------------

def status(pid):
    """{field: kB} of the memory fields of /proc/<pid>/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    return out


def reset_peak(pid):
    """Reset pid's VmHWM to its current RSS; skip the test if not allowed."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
    except OSError as e:
        pytest.skip("cannot reset the peak RSS of a server process: %s" % e)


def private_peak_growths(pids, fn):
    """Run fn(); return (its result, {pid: the growth in kB of the pid's
    private memory at its peak over its private memory before})."""
    before = {}
    for pid in pids:
        reset_peak(pid)
        before[pid] = status(pid)
    res = fn()
    growth = {}
    for pid in pids:
        after = status(pid)
        growth[pid] = (after["VmHWM"] - after["RssShmem"] - after["RssFile"]
                       - before[pid]["RssAnon"])
    return res, growth


def private_peak_growth(pid, fn):
    """private_peak_growths() of one process: (fn's result, kB)."""
    res, growth = private_peak_growths([pid], fn)
    return res, growth[pid]


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def proto(file_root):
    """The metadata location of one synthetic table (5 data files)."""
    os.chmod(file_root, 0o755)          # the server reads manifests as its own user
    loc = "file://%s/memory_%s/proto" % (file_root, uuid.uuid4().hex[:6])
    res = synth.generate(synth.build_parser().parse_args(
        ["--out", loc, "--data-files", "5", "--snapshots", "1", "--no-data-bytes",
         "--single-metadata", "--codec", "null", "--seed", "1"]))
    return res["metadata_location"]


def namespaces(catalog, catalog_dsn, proto, sizes):
    """{label: namespace} of new namespaces with n pointers to proto each."""
    tag = uuid.uuid4().hex[:6]
    out = {}
    conn = psycopg2.connect(catalog_dsn)
    conn.autocommit = True
    try:
        for label, n in sizes.items():
            ns = "mem_%s_%s" % (label, tag)
            catalog.create_namespace(ns)
            q(conn, "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
                    " metadata_location, iceberg_type)"
                    " SELECT %s, %s, 't' || lpad(g::text, 5, '0'), %s, 'TABLE'"
                    "   FROM generate_series(1, %s) g",
              (catalog.catalog_name, ns, proto, n))
            out[label] = ns
    finally:
        conn.close()
    return out


def drop_pointers(catalog, catalog_dsn, ns):
    """Remove every table of ns from the catalog (its JDBC rows)."""
    conn = psycopg2.connect(catalog_dsn)
    conn.autocommit = True
    try:
        q(conn, "DELETE FROM iceberg_tables WHERE catalog_name = %s AND table_namespace = %s",
          (catalog.catalog_name, ns))
    finally:
        conn.close()


def make_policies(conn, catalog, file_root, nss):
    """A server listing LARGE tables a page, and one inactive catch-up
    policy per namespace, named after its label."""
    q(conn, "CREATE EXTENSION IF NOT EXISTS tms")
    q(conn, "CREATE SERVER mem FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %s,"
            " relative_path_root %s, allowed_locations %s, page_size %s, request_timeout '30s')",
      ("http://127.0.0.1:%d" % catalog.port, file_root, "file://%s/" % file_root, str(LARGE)))
    q(conn, "CREATE USER MAPPING FOR CURRENT_USER SERVER mem")
    for label, ns in nss.items():
        q(conn, "SELECT tms.create_object_group(%s, server => 'mem', namespace_pattern => %s)",
          (label, ns))
        q(conn, "SELECT tms.create_policy(%s, %s, active => false)", (label, label))
        q(conn, "SELECT tms.add_rule(%s, 'compaction', 'spark', '{\"commits-added\": 1}', %s,"
                " 'catch-up')", (label, CONDITION))


# ---------------------------------------------------------------------------
# a backend: tms.evaluate_now
# ---------------------------------------------------------------------------

def evaluate_in_fresh_backend(cluster, policy):
    """tms.evaluate_now(policy) in a new backend warmed by the 10-table
    policy; returns (its rows' decisions, private peak growth in kB)."""
    conn = connect(cluster)
    try:
        pid = q(conn, "SELECT pg_backend_pid()")[0][0]
        # the function's result rows stay in memory up to work_mem
        q(conn, "SET work_mem = '64kB'")
        q(conn, "SELECT count(*) FROM tms.evaluate_now('warm', force => true)")
        return private_peak_growth(pid, lambda: [r[0] for r in q(
            conn, "SELECT decision FROM tms.evaluate_now(%s, force => true)", (policy,))])
    finally:
        conn.close()


def test_evaluate_now_memory_does_not_grow_with_tables(new_cluster, catalog, catalog_dsn,
                                                      file_root, proto):
    cluster = new_cluster(settings=SETTINGS)
    nss = namespaces(catalog, catalog_dsn, proto, {"warm": 10, "small": SMALL, "large": LARGE})
    conn = connect(cluster)
    make_policies(conn, catalog, file_root, nss)

    # discovery and evaluation of every table
    got = {}
    for label, n in (("small", SMALL), ("large", LARGE)):
        decisions, growth = evaluate_in_fresh_backend(cluster, label)
        assert decisions == ["not-needed"] * n
        got[label] = growth
    print("evaluate_now, private peak growth in kB: %s" % got)
    assert got["large"] - got["small"] < GROWTH_LIMIT_KB, got

    # every table gone from the catalog: the refresh marks each dropped
    for label in ("small", "large"):
        drop_pointers(catalog, catalog_dsn, nss[label])
    dropped = {}
    for label in ("small", "large"):
        decisions, dropped[label] = evaluate_in_fresh_backend(cluster, label)
        assert decisions == []
    assert [q(conn, "SELECT count(*) FROM tms.tables WHERE namespace = %s AND dropped_at IS NOT NULL",
              (nss[label],))[0][0] for label in ("small", "large")] == [SMALL, LARGE]
    print("evaluate_now finding every table dropped, private peak growth in kB: %s" % dropped)
    assert dropped["large"] - dropped["small"] < DROP_GROWTH_LIMIT_KB, dropped


# ---------------------------------------------------------------------------
# the pool worker: the policy-expand task
# ---------------------------------------------------------------------------

def run_task(conn, policy):
    """Activate policy, let its task run once in the pool, deactivate it;
    returns the number of evaluations it logged.  Fails the test if the
    run fails."""
    instance = str(q(conn, "SELECT id FROM tms.maintenance_policies WHERE name = %s",
                     (policy,))[0][0])
    t0 = q(conn, "SELECT clock_timestamp()")[0][0]
    q(conn, "SELECT tms.set_policy_active(%s, true)", (policy,))

    def ended():
        r = q(conn, "SELECT last_success >= %s AND NOT picked, last_failure >= %s, last_error"
                    "  FROM tms.scheduled_tasks"
                    " WHERE task_name = 'policy-expand' AND task_instance = %s",
              (t0, t0, instance))[0]
        return r if (r[0] or r[1]) else None

    row = wait_for(ended, timeout=300, what="the policy-expand task of %s" % policy)
    assert not row[1], row[2]
    q(conn, "SELECT tms.set_policy_active(%s, false)", (policy,))
    return q(conn, "SELECT count(*) FROM tms.evaluation_log WHERE policy_name = %s",
             (policy,))[0][0]


def test_policy_task_memory_does_not_grow_with_tables(new_cluster, catalog, catalog_dsn,
                                                     file_root, proto):
    cluster = new_cluster(settings=SETTINGS)
    nss = namespaces(catalog, catalog_dsn, proto, {"warm": 10, "small": SMALL, "large": LARGE})
    conn = connect(cluster)
    make_policies(conn, catalog, file_root, nss)
    workers = wait_for(lambda: q(conn, "SELECT pid FROM tms.workers WHERE role = 'worker'"
                                       "   AND state = 'idle'"), timeout=60, what="the pool worker")
    assert len(workers) == 1
    worker = workers[0][0]
    supervisor = q(conn, "SELECT pid FROM tms.workers WHERE role = 'supervisor'")[0][0]
    assert run_task(conn, "warm") == 10

    got = {}
    sup = {}
    for label, n in (("small", SMALL), ("large", LARGE)):
        evaluated, growth = private_peak_growths([worker, supervisor],
                                                 lambda: run_task(conn, label))
        got[label], sup[label] = growth[worker], growth[supervisor]
        assert evaluated == n
    assert q(conn, "SELECT pid FROM tms.workers WHERE role = 'worker'") == [(worker,)]
    assert q(conn, "SELECT pid FROM tms.workers WHERE role = 'supervisor'") == [(supervisor,)]
    print("policy-expand task, private peak growth in kB: worker %s, supervisor %s" % (got, sup))
    assert got["large"] - got["small"] < GROWTH_LIMIT_KB, got
    # the supervisor only renews the lease: it keeps nothing of the tables
    assert sup["large"] - sup["small"] < DROP_GROWTH_LIMIT_KB, sup
