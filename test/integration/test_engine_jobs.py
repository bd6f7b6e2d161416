"""
test_engine_jobs.py -- maintenance on engines end to end: tms_engine servers
of type livy, trino and gravitino (the test world's look-alikes,
test/engines/server.py, which execute what they receive against the test
catalog and its storage), jobs from policies and from tms.run_operation,
run by the worker pool:

  - through each engine type, a policy over a table of many small real
    Parquet files fires, compaction runs on the engine, the data-file
    count falls, icebird reads the same rows before and after, the job
    succeeds with the engine's counts and its statement, the before and
    after metrics are recorded, the rule's baseline is reset and the rule
    does not fire again;
  - a policy whose rules fire compaction, manifest rewrite and snapshot
    expiry on one table runs them as one chain, in that order;
  - an append committed between a policy's evaluation and its chain's
    run skips only the step whose input it changed: the compaction whose
    condition no longer holds ends skipped, nothing submitted, and the
    manifest rewrite runs on the appended snapshot;
  - SIGKILL of the worker right after the submission leaves exactly one
    engine run, which the resumed job follows to its end;
  - SIGKILL of the worker while its submit hangs, a cancel, the submit
    landing, the engine forgetting its runs: the resumed job never
    submits again; the table shows the run's commit and the job ends
    succeeded with it (every engine type), or shows nothing and the job
    ends failed, outcome unknown;
  - an engine server's max_concurrent_jobs: a job over it waits, pending,
    saying so, and starts when a run there ends;
  - tms.cancel_operation and the run timeout reach the engine (the run
    ends cancelled there);
  - Gravitino runs only the job templates its server offers: an
    operation whose template it lacks is refused (0A000) by
    tms.run_operation and tms.add_rule, and fails the job when the server
    withdrew it before the submit, nothing submitted;
  - an engine that is down, one that answers 500 and one that hangs each
    end the job failed with a clear last_error;
  - a position-delete rewrite on Spark rewrites the delete files and keeps
    every row as it was;
  - a format v3 table's job is submitted to each engine type, not skipped:
    its snapshot expiry runs there, the table stays v3 with its rows and
    row lineage;
  - hostile table names (quotes, backticks, semicolons, a newline,
    non-ASCII) run correctly through Spark and Trino statements;
  - a rule's or run_operation's "engine-resources" reach Livy as members
    of the session request and Gravitino as spark_* jobConf (the test
    servers type-check them as the APIs define them); bad ones and
    credentials are refused (22023) before a job is recorded.

The module runs its own cluster (fast workers, a 1 s evaluation cycle), and
one more for the test catalog's pointer tables.

Run: /usr/bin/python3 -m pytest -q test/integration/test_engine_jobs.py
"""

import json
import os
import signal
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import v3world as v3  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

SETTINGS = dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "1s",
                                 "tms.maintenance_max_attempts": "2"})
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")
KINDS = ("livy", "trino", "gravitino")
USERS = {"livy": dict(user="svc", password="pw-livy"),
         "trino": dict(user="svc", token="tok-trino"),
         "gravitino": dict(credential="client:s3cr3t")}
MAPPINGS = {"livy": "user 'svc', password 'pw-livy'",
            "trino": "user 'svc', token 'tok-trino'",
            "gravitino": "credential 'client:s3cr3t'"}


pytestmark = pytest.mark.own_cluster
# A rule's "engine-resources" (doc/engines.md), and what each engine's API
# receives: Livy's session request members, Gravitino's spark_* jobConf.
RESOURCES = {"driverMemory": "1G", "executorMemory": "2048m", "executorCores": 2,
             "numExecutors": 3, "conf": {"spark.sql.shuffle.partitions": 16}}
WANT_RESOURCES = {
    "livy": {"driverMemory": "1g", "executorMemory": "2048m", "executorCores": 2,
             "numExecutors": 3, "conf": {"spark.sql.shuffle.partitions": "16"}},
    "gravitino": {"spark_driver_memory": "1g", "spark_executor_memory": "2048m",
                  "spark_executor_cores": "2", "spark_executor_instances": "3",
                  "spark_conf": '{"spark.sql.shuffle.partitions":"16"}'},
}


def engine_world(w):
    """A module world w with the catalog server "cat" and one look-alike
    engine server of each kind (named by its kind, with its user mapping);
    yields w with "engines", and stops the engines after the module (a
    generator for a module fixture; test_engine_retention.py uses it too)."""
    c, cat, file_root = w["pg"], w["catalog"], w["file_root"]
    engines = {}
    for kind in KINDS:
        engines[kind] = world.EngineServer(kind, cat, file_root=file_root, metalake="ml",
                                           **USERS[kind])
    try:
        c.psql("""CREATE SERVER cat FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                    uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
                    allowed_locations 'file://%s/');
                  CREATE USER MAPPING FOR PUBLIC SERVER cat;""" % (cat.uri, file_root, file_root))
        for kind, e in engines.items():
            c.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_engine OPTIONS (
                        type '%s', uri '%s', catalog 'lake', metalake 'ml',
                        poll_interval '50ms', request_timeout '3s', retries '1'%s);
                      CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (%s);"""
                   % (kind, kind, e.uri,
                      ", oauth2_server_uri '%s/oauth/tokens'" % e.uri if kind == "gravitino" else "",
                      kind, MAPPINGS[kind]))
        yield dict(w, engines=engines)
    finally:
        for e in engines.values():
            e.stop()


@pytest.fixture(scope="module")
def env(tms_world):
    # the catalog's pointers in a cluster of their own: the SIGKILL test's
    # crash restart of tms's cluster must not cut the catalog off
    w = tms_world("eng", settings=SETTINGS, s3=None, catalog={}, pointers="own")
    yield from engine_world(w)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


JOB_COLS = ("id", "policy", "operation", "engine", "state", "reason", "attempts",
            "last_error", "before_snapshot_id", "after_snapshot_id", "statement",
            "data_files_rewritten", "data_files_added", "delete_files_rewritten",
            "delete_files_added", "manifests_rewritten",
            "manifests_added", "snapshots_expired", "finished_at")


def job(env, jid):
    rows = q(env, "SELECT %s, (SELECT engine_job_id FROM tms.table_maintenance_job"
                  " WHERE id = j.id), (SELECT phase FROM tms.table_maintenance_job"
                  " WHERE id = j.id) FROM tms.maintenance_jobs j WHERE id = %%s"
             % ", ".join(JOB_COLS), (jid,))
    if not rows:
        return None
    return dict(zip(JOB_COLS + ("engine_job_id", "phase"), rows[0]))


def wait_job(env, jid, states=("succeeded",), timeout=120):
    """Await a terminal state (across a server restart); fail with the job
    row unless it is one of states."""
    wait_for(lambda: (job(env, jid) or {}).get("state") in TERMINAL, timeout=timeout,
             what="job %s to finish" % jid)
    row = job(env, jid)
    assert row["state"] in states, row
    return row


def run(env, ns, name, op, options=None, engine="local"):
    return q(env, "SELECT tms.run_operation('cat', %s, %s, %s, %s::jsonb, %s)",
             (ns, name, op, json.dumps(options or {}), engine))[0][0]


def small_table(env, ns, name, files=24, rows_per_file=10):
    mloc = smallfiles.make_table(env["catalog"], env["st"], ns, name, files=files,
                                 rows_per_file=rows_per_file, partitioned=True, seed=7)
    ow.give_to_server(env["file_root"])
    return mloc


def rows(env, ns, name):
    mloc, _ = ow.load(env["catalog"], ns, name)
    out = ow.icebird(mloc, file_root=env["file_root"], dump_rows=True)
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


def records(env, ns, name):
    """Live data records and delete records of the current snapshot."""
    _, meta = ow.load(env["catalog"], ns, name)
    live = ow.live_files(env["st"], meta).values()
    return sum(f["records"] for f in live if f["content"] == 0)


def data_file_count(env, ns, name):
    _, meta = ow.load(env["catalog"], ns, name)
    return sum(1 for f in ow.live_files(env["st"], meta).values() if f["content"] == 0)


def runs_of(env, kind, jid):
    tag = "tms-job-%d" % jid
    return [r for r in env["engines"][kind].runs() if tag in (r.get("tag") or "").split(",")]


def worker_pid(env, jid):
    rows_ = q(env, "SELECT s.picked_pid FROM tms.scheduled_tasks s"
                   " JOIN tms.table_maintenance_job j ON s.task_name = j.task_kind"
                   "  AND s.task_instance = j.task_instance"
                   " WHERE j.id = %s AND s.picked AND s.picked_pid IS NOT NULL", (jid,))
    return rows_[0][0] if rows_ else None


def metrics(env, jid):
    return {phase: m for phase, m in q(
        env, "SELECT phase, metrics FROM tms.table_snapshot_metrics WHERE job_id = %s", (jid,))}


# ---------------------------------------------------------------------------
# compaction through each engine, from a policy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_policy_compacts_through_engine(env, kind):
    ns = "p_" + kind
    name = "events"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name)
    before_rows = rows(env, ns, name)
    before_files = data_file_count(env, ns, name)
    assert before_files == 24
    group = "g_" + kind
    q(env, "SELECT tms.create_object_group(%s, 'cat', namespace_pattern => %s)", (group, ns))
    q(env, "SELECT tms.create_policy(%s, %s)", ("compact_" + kind, group))
    options = {"min-input-files": 2, "engine-resources": RESOURCES} if kind != "trino" else {}
    q(env, "SELECT tms.add_rule(%s, 'compaction', %s, '{\"commits-added\": 1}',"
           " 'dataFiles > 10', 'catch-up', %s::jsonb)",
      ("compact_" + kind, kind, json.dumps(options)))
    try:
        wait_for(lambda: q(env, "SELECT id FROM tms.maintenance_jobs WHERE policy = %s",
                           ("compact_" + kind,)), timeout=60, what="the policy's job")
    except TimeoutError:
        raise AssertionError("no job: evaluations %r, baselines %r, tasks %r, slots %r" % (
            q(env, "SELECT table_name, result, decision, explanation, error"
                   " FROM tms.evaluation_log WHERE policy_name = %s", ("compact_" + kind,)),
            q(env, "SELECT * FROM tms.rule_baselines"),
            q(env, "SELECT * FROM tms.tasks"), q(env, "SELECT * FROM tms.task_slots")))
    jid = q(env, "SELECT id FROM tms.maintenance_jobs WHERE policy = %s",
            ("compact_" + kind,))[0][0]
    row = wait_job(env, jid)

    # the engine ran it, once, with the statement the job records
    runs = runs_of(env, kind, jid)
    assert len(runs) == 1, runs
    assert runs[0]["state"] in ("succeeded", "available", "FINISHED", "finished"), runs[0]
    assert row["statement"]
    if kind == "gravitino":
        assert json.loads(row["statement"])["jobTemplateName"] == "builtin-iceberg-rewrite-data-files"
    else:
        assert runs[0]["statement"] == row["statement"]
    assert row["engine_job_id"]
    # the rule's engine-resources reached the engine as its API takes them
    assert runs[0]["resources"] == (None if kind == "trino" else WANT_RESOURCES[kind]), runs[0]

    # the table: fewer files, the same rows
    after_files = data_file_count(env, ns, name)
    assert after_files < before_files
    assert rows(env, ns, name) == before_rows
    if kind == "livy":
        assert row["data_files_rewritten"] == before_files
        assert row["data_files_added"] == after_files
    m = metrics(env, jid)
    assert m["before"]["dataFiles"] == before_files and m["after"]["dataFiles"] == after_files
    assert row["after_snapshot_id"] != row["before_snapshot_id"]

    # the baseline was reset: evaluated again, the rule does not fire
    again = q(env, "SELECT table_name, decision FROM tms.evaluate_now(%s)", ("compact_" + kind,))
    assert all(d != "submitted" for _, d in again), again
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE policy = %s",
             ("compact_" + kind,))[0][0] == 1
    q(env, "SELECT tms.drop_policy(%s)", ("compact_" + kind,))


def test_chain_runs_compaction_then_manifests_then_expiry(env):
    ns, name = "chain", "t"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=16)
    q(env, "SELECT tms.create_object_group('g_chain', 'cat', namespace_pattern => 'chain')")
    q(env, "SELECT tms.create_policy('chain', 'g_chain', active => false)")
    # added in the reverse of the chain's order, to show the order is the chain's
    q(env, "SELECT tms.add_rule('chain', 'snapshot-expiry', 'livy', '{\"commits-added\": 1}',"
           " 'true', 'catch-up', '{\"retain-last\": 1, \"older-than\": \"2099-01-01T00:00:00Z\"}')")
    q(env, "SELECT tms.add_rule('chain', 'manifest-rewrite', 'livy', '{\"commits-added\": 1}',"
           " 'true', 'catch-up')")
    q(env, "SELECT tms.add_rule('chain', 'compaction', 'livy', '{\"commits-added\": 1}', 'true',"
           " 'catch-up', '{\"min-input-files\": 2}')")
    q(env, "SELECT tms.set_policy_active('chain', true)")
    wait_for(lambda: q(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE policy = 'chain'"
                            " AND finished_at IS NOT NULL")[0][0] == 3,
             timeout=120, what="the chain's three jobs")
    jobs = q(env, "SELECT operation, state, started_at, finished_at, coalesce(reason, last_error)"
                  " FROM tms.maintenance_jobs WHERE policy = 'chain' ORDER BY started_at")
    assert [j[0] for j in jobs] == ["compaction", "manifest-rewrite", "snapshot-expiry"], jobs
    assert all(j[1] == "succeeded" for j in jobs), jobs
    assert jobs[0][3] <= jobs[1][2] and jobs[1][3] <= jobs[2][2], jobs
    _, meta = ow.load(env["catalog"], ns, name)
    assert len(meta["snapshots"]) == 1
    q(env, "SELECT tms.drop_policy('chain')")


def test_drift_in_a_chain_skips_only_the_step_whose_input_changed(env):
    """An append committed between a policy's evaluation and its chain's
    run on Livy: the compaction, whose condition no longer holds on the
    appended snapshot, ends skipped and submits nothing; the manifest
    rewrite, which does not depend on the data, runs on that snapshot."""
    ns, name = "drift", "t"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=16)
    q(env, "SELECT tms.create_object_group('g_drift', 'cat', namespace_pattern => 'drift')")
    q(env, "SELECT tms.create_policy('drift', 'g_drift', active => false)")
    q(env, "SELECT tms.add_rule('drift', 'manifest-rewrite', 'livy', '{\"commits-added\": 1}',"
           " 'true', 'catch-up')")
    q(env, "SELECT tms.add_rule('drift', 'compaction', 'livy', '{\"commits-added\": 1}',"
           " 'dataFiles <= 16', 'catch-up', '{\"min-input-files\": 2}')")
    conn = env["pg"].connect(autocommit=False)
    try:
        env["pg"].query("SELECT tms.set_policy_active('drift', true)", conn=conn)
        decided = env["pg"].query("SELECT operation, decision, job_id"
                                  " FROM tms.evaluate_now('drift', true)", conn=conn)
        assert sorted(d[:2] for d in decided) == [("compaction", "submitted"),
                                                  ("manifest-rewrite", "submitted")], decided
        jids = {op: jid for op, _, jid in decided}
        # the append, committed while the evaluation's transaction is open
        _, meta = ow.load(env["catalog"], ns, name)
        s0 = meta["current-snapshot-id"]
        live = ow.live_files(env["st"], meta)
        src = sorted(p for p, f in live.items() if f["content"] == 0)[0]
        dst = src.rsplit("/", 1)[0] + "/appended-after-evaluation.parquet"
        data = env["st"].read(src)
        env["st"].write(dst, data)
        body, _ = ow.append_commit(env["st"], meta, [{
            "path": dst, "records": live[src]["records"], "size": len(data),
            "partition": dict(live[src]["partition"])}], seed=5)
        ow.give_to_server(env["file_root"])
        ow.commit(env["catalog"], ns, name, body)
        conn.commit()
    finally:
        conn.close()
    s1 = ow.load(env["catalog"], ns, name)[1]["current-snapshot-id"]
    assert s1 != s0

    compaction = wait_job(env, jids["compaction"], states=("skipped",))
    assert compaction["reason"].startswith(
        "snapshot drift: the condition no longer holds at snapshot %d (it held at snapshot %d): "
        % (s1, s0)), compaction
    assert "17" in compaction["reason"], compaction      # dataFiles is 17 now
    assert runs_of(env, "livy", jids["compaction"]) == []

    rewrite = wait_job(env, jids["manifest-rewrite"])
    assert rewrite["before_snapshot_id"] == s1, (rewrite, s0, s1)
    assert len(runs_of(env, "livy", jids["manifest-rewrite"])) == 1
    assert "manifest-rewrite does not depend on that data" in q(
        env, "SELECT message FROM tms.maintenance_jobs WHERE id = %s",
        (jids["manifest-rewrite"],))[0][0]
    _, meta = ow.load(env["catalog"], ns, name)
    assert dst in ow.live_files(env["st"], meta)
    q(env, "SELECT tms.drop_policy('drift')")


def test_position_delete_rewrite_on_spark(env):
    """rewrite_position_delete_files through Livy: the delete files of each
    partition are rewritten into one, the rows read are the same."""
    ns, name = "pd", "t"
    env["catalog"].create_namespace(ns)
    smallfiles.make_table(env["catalog"], env["st"], ns, name, files=16, rows_per_file=10,
                          partitioned=True, with_deletes=True, seed=11)
    ow.give_to_server(env["file_root"])
    before = rows(env, ns, name)
    _, meta = ow.load(env["catalog"], ns, name)
    pos_before = {p for p, f in ow.live_files(env["st"], meta).items() if f["content"] == 1}
    assert pos_before
    jid = run(env, ns, name, "position-delete-rewrite", {"rewrite-all": True}, engine="livy")
    row = wait_job(env, jid)
    assert "rewrite_position_delete_files" in row["statement"], row
    assert rows(env, ns, name) == before
    _, meta = ow.load(env["catalog"], ns, name)
    pos_after = {p for p, f in ow.live_files(env["st"], meta).items() if f["content"] == 1}
    assert row["delete_files_rewritten"] == len(pos_before), row
    assert row["delete_files_added"] == len(pos_after) and len(pos_after) <= len(pos_before)
    assert not pos_after & pos_before


# ---------------------------------------------------------------------------
# a format v3 table on each engine
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_v3_table_runs_on_engine(env, kind):
    """A format v3 table (the v3 test world's: row lineage, deletion
    vectors) is not skipped for an engine: its snapshot expiry is submitted
    to the engine, runs there and succeeds; the table stays v3, keeps its
    row lineage, and its rows, read by the world's own reader with the
    deletion vectors applied, are the same."""
    ns, name = "v3_" + kind, "t"
    cat, st = env["catalog"], env["st"]
    cat.create_namespace(ns)
    loc = "file://%s/%s/%s" % (env["file_root"], ns, name)
    res = v3.write_table(st, loc)
    ow.give_to_server(st.local_path(loc))
    cat.register(ns, name, res["metadata_location"])
    _, meta = ow.load(cat, ns, name)
    before = v3.rows(st, meta)
    # Trino's expire_snapshots takes a retention threshold of at least its
    # minimum (7 days; the world's snapshots are an hour old: none expires)
    # and no retain_last
    opts = {"older-than": "7 days"} if kind == "trino" else \
        {"older-than": "2099-01-01T00:00:00Z", "retain-last": 1}
    jid = run(env, ns, name, "snapshot-expiry", opts, engine=kind)
    row = wait_job(env, jid)
    assert row["engine"] == kind and row["engine_job_id"], row
    runs = runs_of(env, kind, jid)
    assert len(runs) == 1 and "expire_snapshots" in runs[0]["statement"], runs
    _, meta2 = ow.load(cat, ns, name)
    assert meta2["format-version"] == 3
    kept = [s["snapshot-id"] for s in meta["snapshots"]] if kind == "trino" else \
        [meta["current-snapshot-id"]]
    assert [s["snapshot-id"] for s in meta2["snapshots"]] == kept
    assert meta2["next-row-id"] == meta["next-row-id"] and v3.check_lineage(meta2) == []
    assert v3.rows(st, meta2) == before


# ---------------------------------------------------------------------------
# exactly one run; cancel; timeout
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mtable(env):
    """A table of several manifests, for manifest rewrites on the engines."""
    env["catalog"].create_namespace("m")
    small_table(env, "m", "t", files=12)
    return "m", "t"


def test_cancel_reaches_the_engine(env, mtable):
    ns, name = mtable
    trino = env["engines"]["trino"]
    trino.fault(action="stuck-run", count=1)
    jid = run(env, ns, name, "manifest-rewrite", engine="trino")
    wait_for(lambda: runs_of(env, "trino", jid), timeout=30, what="the run at the engine")
    assert q(env, "SELECT tms.cancel_operation(%s)", (jid,))[0][0] is True
    row = wait_job(env, jid, states=("cancelled",))
    assert "engine" in row["reason"], row
    wait_for(lambda: runs_of(env, "trino", jid)[0]["state"] in ("cancelled", "FAILED", "CANCELED"),
             timeout=30, what="the engine's run to end")


def test_run_timeout_cancels_at_the_engine(env, mtable):
    ns, name = mtable
    grav = env["engines"]["gravitino"]
    q(env, "ALTER SERVER gravitino OPTIONS (ADD run_timeout '1s')")
    try:
        grav.fault(action="stuck-run", count=1)
        jid = run(env, ns, name, "snapshot-expiry", {"retain-last": 50}, engine="gravitino")
        row = wait_job(env, jid, states=("failed",), timeout=60)
        assert "took longer than its timeout" in row["last_error"], row
        wait_for(lambda: runs_of(env, "gravitino", jid)[0]["state"] in ("cancelled", "cancelling"),
                 timeout=30, what="the engine's run to be cancelled")
    finally:
        q(env, "ALTER SERVER gravitino OPTIONS (DROP run_timeout)")


# ---------------------------------------------------------------------------
# Gravitino runs only the job templates its server offers
# ---------------------------------------------------------------------------

SHIPPED = ["builtin-iceberg-expire-snapshots", "builtin-iceberg-rewrite-data-files",
           "builtin-iceberg-update-stats", "builtin-sparkpi"]


def test_run_operation_engine_resources(env, mtable):
    ns, name = mtable
    jid = run(env, ns, name, "manifest-rewrite",
              {"engine-resources": {"executorMemory": "4g", "driverCores": 1}}, engine="livy")
    wait_job(env, jid)
    assert runs_of(env, "livy", jid)[0]["resources"] == {"executorMemory": "4g",
                                                         "driverCores": 1}
    # refused before a job is recorded: 22023 naming the value, never a credential
    n = job_count(env)
    for eng, res, want in (
            ("livy", {"executorMemory": "4 gigs"}, '"4 gigs"'),
            ("livy", {"numExecutors": 0}, "not 0"),
            ("gravitino", {"conf": {"spark.sql.catalog.lake.uri": "x"}}, "spark.sql.catalog."),
            ("livy", {"conf": {"spark.hadoop.fs.s3a.secret.key": "wJalrXUtnFEMIK7"}},
             "credential")):
        e = env["pg"].query_error("SELECT tms.run_operation('cat', %s, %s, 'snapshot-expiry',"
                                  " %s::jsonb, %s)",
                                  (ns, name, json.dumps({"engine-resources": res}), eng))
        assert e.pgcode == "22023", str(e)
        text = "%s | %s | %s" % (e.diag.message_primary, e.diag.message_detail,
                                 e.diag.message_hint)
        assert want in text and "wJalr" not in text, text
    assert job_count(env) == n


def job_count(env):
    return q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]


def test_gravitino_refuses_a_template_its_server_lacks(env, mtable):
    """A released Gravitino ships no builtin-iceberg-rewrite-manifests:
    tms.run_operation and tms.add_rule read the server's template list and
    refuse manifest-rewrite there (0A000, the templates it offers in DETAIL)
    before a job is recorded or anything is submitted; once the server
    offers the template, the same call runs."""
    ns, name = mtable
    grav = env["engines"]["gravitino"]
    assert grav.request("GET", "/api/metalakes/ml/jobs/templates")["names"] == SHIPPED
    n, nruns = job_count(env), len(grav.runs())
    e = env["pg"].query_error("SELECT tms.run_operation('cat', %s, %s, 'manifest-rewrite',"
                              " '{}', 'gravitino')", (ns, name))
    assert e.pgcode == "0A000", str(e)
    assert e.diag.message_primary == \
        'engine "gravitino" cannot run operation "manifest-rewrite"', e.diag.message_primary
    assert "builtin-iceberg-rewrite-manifests" in e.diag.message_detail
    assert ", ".join(SHIPPED) in e.diag.message_detail, e.diag.message_detail
    assert "another engine" in e.diag.message_hint
    assert job_count(env) == n and len(grav.runs()) == nruns
    # a rule too
    q(env, "SELECT tms.create_object_group('g_tmpl', 'cat', namespace_pattern => %s)", (ns,))
    q(env, "SELECT tms.create_policy('tmpl', 'g_tmpl', active => false)")
    try:
        e = env["pg"].query_error("SELECT tms.add_rule('tmpl', 'manifest-rewrite', 'gravitino',"
                                  " '{\"commits-added\": 1}', 'true', 'catch-up')")
        assert e.pgcode == "0A000", str(e)
        assert q(env, "SELECT count(*) FROM tms.rules WHERE policy = 'tmpl'")[0][0] == 0
        # what it offers still runs
        wait_job(env, run(env, ns, name, "snapshot-expiry", {"retain-last": 50},
                          engine="gravitino"))
        # a server that offers the template runs it
        grav.set_templates(SHIPPED + ["builtin-iceberg-rewrite-manifests"])
        jid = run(env, ns, name, "manifest-rewrite", engine="gravitino")
        row = wait_job(env, jid)
        assert json.loads(row["statement"])["jobTemplateName"] == \
            "builtin-iceberg-rewrite-manifests"
    finally:
        grav.set_templates(SHIPPED)
        q(env, "SELECT tms.drop_policy('tmpl')")
        q(env, "SELECT tms.drop_object_group('g_tmpl')")


def test_gravitino_template_withdrawn_before_the_submit(env):
    """A rule accepted while the server offered the template, whose server
    no longer does when the job runs: the worker reads the list before it
    submits, and the job fails with 0A000's message, nothing submitted."""
    ns, name = "tw", "t"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=4)
    grav = env["engines"]["gravitino"]
    grav.set_templates(SHIPPED + ["builtin-iceberg-rewrite-manifests"])
    q(env, "SELECT tms.create_object_group('g_tw', 'cat', namespace_pattern => 'tw')")
    q(env, "SELECT tms.create_policy('tw', 'g_tw', active => false)")
    try:
        q(env, "SELECT tms.add_rule('tw', 'manifest-rewrite', 'gravitino',"
               " '{\"commits-added\": 1}', 'true', 'catch-up')")
        grav.set_templates(SHIPPED)
        q(env, "SELECT tms.set_policy_active('tw', true)")
        wait_for(lambda: q(env, "SELECT id FROM tms.maintenance_jobs WHERE policy = 'tw'"),
                 timeout=60, what="the policy's job")
        jid = q(env, "SELECT id FROM tms.maintenance_jobs WHERE policy = 'tw'")[0][0]
        row = wait_job(env, jid, states=("failed",))
        assert row["attempts"] == 1, row
        assert 'cannot run operation "manifest-rewrite"' in row["last_error"], row
        assert "builtin-iceberg-rewrite-manifests" in row["last_error"], row
        assert runs_of(env, "gravitino", jid) == []
    finally:
        grav.set_templates(SHIPPED)
        q(env, "SELECT tms.drop_policy('tw')")
        q(env, "SELECT tms.drop_object_group('g_tw')")


# ---------------------------------------------------------------------------
# an engine that is down, answers 500, hangs; a failed run
# ---------------------------------------------------------------------------

def test_engine_down_fails_clearly(env, mtable):
    ns, name = mtable
    port = world.free_port()
    q(env, "CREATE SERVER down FOREIGN DATA WRAPPER tms_engine OPTIONS (type 'trino',"
           " uri 'http://127.0.0.1:%d', catalog 'lake', connect_timeout '500ms', retries '0');"
           " CREATE USER MAPPING FOR PUBLIC SERVER down OPTIONS (user 'svc')" % port)
    jid = run(env, ns, name, "manifest-rewrite", engine="down")
    row = wait_job(env, jid, states=("failed",), timeout=60)
    assert row["attempts"] == 2 and "down" in row["last_error"], row
    assert "connect" in row["last_error"].lower(), row


def statement_posts(trino):
    return sum(trino.requests()["counts"].get("POST /v1/statement", {}).values())


def test_engine_500_fails_clearly(env, mtable):
    """A submit answered 500 may have started a query: the tag finds
    none, and the job is never submitted again; it fails, outcome
    unknown, with the 500 in its message."""
    ns, name = mtable
    trino = env["engines"]["trino"]
    fid = trino.fault(path_regex=r"^/v1/statement$", method="POST", status=500, count=100)
    try:
        posts = statement_posts(trino)
        jid = run(env, ns, name, "manifest-rewrite", engine="trino")
        row = wait_job(env, jid, states=("failed",), timeout=60)
        assert "is unknown" in row["last_error"], row
        message = q(env, "SELECT message FROM tms.table_maintenance_job WHERE id = %s",
                    (jid,))[0][0]
        assert "500" in message, message
        assert runs_of(env, "trino", jid) == []
        assert statement_posts(trino) == posts + 1
    finally:
        trino.clear_faults()
    assert fid


def test_engine_hang_fails_clearly(env, mtable):
    ns, name = mtable
    livy = env["engines"]["livy"]
    # a server of its own whose requests time out after 1 s (each attempt
    # of the job: the request and its retry), the engine hanging 3 s
    if not q(env, "SELECT 1 FROM pg_foreign_server WHERE srvname = 'hang_livy'"):
        q(env, """CREATE SERVER hang_livy FOREIGN DATA WRAPPER tms_engine OPTIONS (
                    type 'livy', uri '%s', catalog 'lake', poll_interval '50ms',
                    request_timeout '1s', retries '1');
                  CREATE USER MAPPING FOR PUBLIC SERVER hang_livy OPTIONS (%s)"""
          % (livy.uri, MAPPINGS["livy"]))
    livy.fault(path_regex=r"^/sessions", action="hang", seconds=3, count=100)
    try:
        jid = run(env, ns, name, "manifest-rewrite", engine="hang_livy")
        row = wait_job(env, jid, states=("failed",), timeout=90)
        assert "timed out" in row["last_error"].lower() or "timeout" in row["last_error"].lower(), row
    finally:
        livy.clear_faults()


def test_failed_run_keeps_the_engines_message(env, mtable):
    ns, name = mtable
    env["engines"]["livy"].fault(action="fail-run", message="java.lang.OutOfMemoryError: boom",
                                 count=1)
    jid = run(env, ns, name, "manifest-rewrite", engine="livy")
    row = wait_job(env, jid, states=("failed",))
    assert "OutOfMemoryError: boom" in row["last_error"], row


# ---------------------------------------------------------------------------
# hostile names
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ("livy", "trino"))
def test_hostile_names(env, kind):
    ns = "h`o\"s't;il" + kind
    name = "t'a`b\"le; DROP TABLE x; -- ü\n" + kind
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=8)
    before = records(env, ns, name)
    jid = run(env, ns, name, "compaction", {"min-input-files": 2} if kind == "livy" else {},
              engine=kind)
    row = wait_job(env, jid)
    assert data_file_count(env, ns, name) < 8
    # (icebird cannot open these paths; the Python reader counts the rows)
    assert records(env, ns, name) == before
    runs = runs_of(env, kind, jid)
    assert len(runs) == 1 and runs[0]["statement"] == row["statement"], runs


# ---------------------------------------------------------------------------
# last: SIGKILL of a worker makes the postmaster restart every process
# ---------------------------------------------------------------------------

def test_sigkill_after_submit_leaves_one_run(env, mtable):
    """The worker dies right after Livy accepted the session (it is still
    starting, the statement not yet posted): the resumed job finds the
    session by its name, posts the statement once, and follows it."""
    ns, name = mtable
    slow = world.EngineServer("livy", env["catalog"], file_root=env["file_root"],
                              startup_delay=3, **USERS["livy"])
    try:
        q(env, "CREATE SERVER slowlivy FOREIGN DATA WRAPPER tms_engine OPTIONS ("
               " type 'livy', uri '%s', catalog 'lake', poll_interval '50ms',"
               " request_timeout '3s');"
               " CREATE USER MAPPING FOR PUBLIC SERVER slowlivy OPTIONS (%s)"
               % (slow.uri, MAPPINGS["livy"]))
        jid = run(env, ns, name, "manifest-rewrite", engine="slowlivy")
        wait_for(lambda: (job(env, jid) or {}).get("phase") == "engine" and worker_pid(env, jid),
                 timeout=30, what="the job to submit")
        # killed while the session starts: no statement was posted yet
        assert slow.runs() == []
        os.kill(worker_pid(env, jid), signal.SIGKILL)
        row = wait_job(env, jid, timeout=120)
        runs = slow.runs()
        assert len(runs) == 1 and runs[0]["tag"] == "tms-job-%d" % jid, runs
        assert row["engine_job_id"] == runs[0]["engine_id"], (row, runs)
        assert row["manifests_added"] >= 1 and row["statement"] == runs[0]["statement"]
    finally:
        slow.stop()


# ---------------------------------------------------------------------------
# a run that may exist is never submitted again (SIGKILL while the submit
# hangs, a cancel, an engine that forgets its runs)
# ---------------------------------------------------------------------------

# the request that starts a run on each engine (Livy: the statement's post)
SUBMIT_PATH = {"livy": r"^/sessions/\d+/statements$", "trino": r"^/v1/statement$",
               "gravitino": r"^/api/metalakes/ml/jobs/runs$"}


def once_server(env, kind):
    """A server of kind whose requests may take 8 s: a submit hung 3 s is
    still in flight when its worker is killed, and the resumed job waits
    out the request timeout (for that submit to land) before it asks the
    engine, long after the test has seen the landed run and made the
    engine forget it."""
    srv = "once_" + kind
    if not q(env, "SELECT 1 FROM pg_foreign_server WHERE srvname = %s", (srv,)):
        q(env, """CREATE SERVER %s FOREIGN DATA WRAPPER tms_engine OPTIONS (
                    type '%s', uri '%s', catalog 'lake', metalake 'ml',
                    poll_interval '50ms', request_timeout '8s', retries '0'%s);
                  CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (%s)"""
          % (srv, kind, env["engines"][kind].uri,
             ", oauth2_server_uri '%s/oauth/tokens'" % env["engines"][kind].uri
             if kind == "gravitino" else "", srv, MAPPINGS[kind]))
    return srv


def snapshots_after(env, ns, name, base):
    """The snapshots of main after base, newest first: [(id, operation)]."""
    _, meta = ow.load(env["catalog"], ns, name)
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots") or []}
    out = []
    sid = ow.current_id(meta)
    while sid is not None and sid != base:
        s = by_id[sid]
        out.append((sid, s["summary"].get("operation")))
        sid = s.get("parent-snapshot-id")
    return out


def kill_during_submit(env, kind, ns, name, stuck=False):
    """Start a manifest rewrite on kind whose submit hangs 3 s, SIGKILL its
    worker while it hangs, and request a cancel once the cluster is back.
    Returns (job id, the snapshot before)."""
    eng = env["engines"][kind]
    srv = once_server(env, kind)
    base = ow.current_id(ow.load(env["catalog"], ns, name)[1])
    if stuck:
        eng.fault(action="stuck-run", count=1)
    fid = eng.fault(path_regex=SUBMIT_PATH[kind], method="POST", action="hang", seconds=3,
                    count=1)
    jid = run(env, ns, name, "manifest-rewrite", engine=srv)
    wait_for(lambda: fid not in eng.armed_faults(), timeout=30, what="the submit to hang")
    pid = wait_for(lambda: worker_pid(env, jid), timeout=10, what="the job's worker")
    os.kill(pid, signal.SIGKILL)
    # the postmaster restarts every process; then the cancel is recorded
    wait_for(lambda: q(env, "SELECT tms.cancel_operation(%s)", (jid,))[0][0] is True,
             timeout=60, what="the cancel")
    return jid, base


@pytest.mark.parametrize("kind", KINDS)
def test_committed_run_is_not_submitted_again(env, kind):
    """The worker dies while the submit hangs; a cancel is requested; the
    submit lands and its run commits; the engine forgets its runs.  The
    resumed job submits nothing: the table shows the run's commit, and the
    job ends succeeded with that snapshot, not cancelled."""
    ns, name = "once_ok_" + kind, "t"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=12)
    eng = env["engines"][kind]
    if kind == "gravitino":
        # a manifest rewrite needs the template later Gravitino releases ship
        eng.set_templates(SHIPPED + ["builtin-iceberg-rewrite-manifests"])
    try:
        committed_run_not_submitted_again(env, kind, ns, name, eng)
    finally:
        if kind == "gravitino":
            eng.set_templates(SHIPPED)


def committed_run_not_submitted_again(env, kind, ns, name, eng):
    jid, base = kill_during_submit(env, kind, ns, name)
    wait_for(lambda: [r for r in runs_of(env, kind, jid) if r["state"] in
                      ("succeeded", "available", "FINISHED", "finished")],
             timeout=60, what="the landed submit's run to commit")
    committed = snapshots_after(env, ns, name, base)
    assert [op for _, op in committed] == ["replace"], committed
    eng.forget()
    row = wait_job(env, jid, states=("succeeded",), timeout=120)
    # one run, one rewrite, and the job records it
    assert len(runs_of(env, kind, jid)) == 1, runs_of(env, kind, jid)
    assert snapshots_after(env, ns, name, base) == committed
    assert row["after_snapshot_id"] == committed[0][0], row


@pytest.mark.parametrize("kind", ("livy", "trino"))
def test_unknown_outcome_fails_without_submitting_again(env, kind):
    """As above, but the run that the late submit started never commits
    before the engine forgets it: nothing proves what became of it, so the
    job fails with outcome unknown (a DETAIL and a HINT in its message)
    and submits nothing again."""
    ns, name = "once_unknown_" + kind, "t"
    env["catalog"].create_namespace(ns)
    small_table(env, ns, name, files=12)
    eng = env["engines"][kind]
    jid, base = kill_during_submit(env, kind, ns, name, stuck=True)
    wait_for(lambda: [r for r in runs_of(env, kind, jid) if r["state"] == "running"],
             timeout=60, what="the landed submit's run to start")
    eng.forget()
    row = wait_job(env, jid, states=("failed",), timeout=120)
    assert "outcome of the engine run of maintenance job %d is unknown" % jid \
        in row["last_error"], row
    message = q(env, "SELECT message FROM tms.table_maintenance_job WHERE id = %s", (jid,))[0][0]
    assert "tms-job-%d" % jid in message and "Check the table's history" in message, message
    assert len(runs_of(env, kind, jid)) == 1, runs_of(env, kind, jid)
    assert snapshots_after(env, ns, name, base) == []
    hist = q(env, "SELECT sqlstate FROM tms.task_history WHERE job_id = %s AND NOT succeeded"
                  " ORDER BY id DESC LIMIT 1", (jid,))
    assert hist and hist[0][0] == "08007", hist


def test_engine_server_runs_at_most_max_concurrent_jobs(env):
    """An engine server's max_concurrent_jobs (doc/engines.md): with 2,
    three jobs on it run two at once (the engine holds their runs open);
    the third waits, pending, saying for what, and starts when one ends."""
    trino = env["engines"]["trino"]
    env["catalog"].create_namespace("mc")
    for i in range(3):
        small_table(env, "mc", "t%d" % i, files=4)
    q(env, "ALTER SERVER trino OPTIONS (ADD max_concurrent_jobs '2')")
    jids = []
    try:
        trino.fault(action="stuck-run", count=3)
        jids.extend(run(env, "mc", "t%d" % i, "manifest-rewrite", engine="trino") for i in range(3))
        wait_for(lambda: all(runs_of(env, "trino", j) for j in jids[:2]), timeout=60,
                 what="the first two runs at the engine")
        row = job(env, jids[2])
        assert row["state"] == "pending" and runs_of(env, "trino", jids[2]) == [], row
        want = 'waiting for budget: 2 of 2 jobs at once on engine server "trino"'
        assert row["reason"].startswith(want), row
        assert q(env, "SELECT waiting_for FROM tms.maintenance_jobs WHERE id = %s",
                 (jids[2],))[0][0].startswith(want)
        assert [job(env, j)["state"] for j in jids[:2]] == ["running", "running"]
        # one ends: the third starts
        assert q(env, "SELECT tms.cancel_operation(%s)", (jids[0],))[0][0] is True
        wait_job(env, jids[0], states=("cancelled",))
        wait_for(lambda: runs_of(env, "trino", jids[2]), timeout=60, what="the third run")
        assert job(env, jids[2])["state"] == "running"
    finally:
        for j in jids:
            q(env, "SELECT tms.cancel_operation(%s)", (j,))
        for j in jids:
            wait_job(env, j, states=TERMINAL)
        q(env, "ALTER SERVER trino OPTIONS (DROP max_concurrent_jobs)")
        trino.clear_faults()
