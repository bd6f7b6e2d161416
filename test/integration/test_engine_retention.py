"""
test_engine_retention.py -- retention and tms.delete_rows on engine servers:
Spark's (through Livy) and Trino's DELETE FROM ... WHERE, run by the test
world's look-alikes (test/engines/server.py), which parse what they receive
and delete the matching rows for real (copy-on-write, a new snapshot
through the test catalog):

  - tms.delete_rows with {"engine": "livy" | "trino"}: the statement the
    engine received (its run log) is exactly the DELETE tms prints from
    the bound filter, each engine's identifier quoting and a hostile
    string literal escaped its way; the rows left, read by icebird, are
    exactly those the where does not match; the job records the rows
    removed (Trino: its update count; Spark: the new snapshot's summary);
  - retention by a timestamptz column with a point in time, by a date
    column (the cutoff's day) and by a long epoch column with a unit: the
    cutoff written as the engine's literal;
  - a policy's rule schedules retention on Trino like any engine
    operation: its job runs the DELETE and records it with the rule;
  - refused before a job is recorded: retention on Gravitino (0A000), the
    local-only options mode and scan (0A000), a where naming no column
    (42703); a hostile table name reaches the engine quoted.

The module runs its own cluster.
Run: /usr/bin/python3 -m pytest -q test/integration/test_engine_retention.py
"""

import json
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402
from test_engine_jobs import engine_world  # noqa: E402

pytestmark = pytest.mark.own_cluster

TERMINAL = ("succeeded", "failed", "skipped", "cancelled")
HOSTILE = "it's \"x\" `y` \\ ;--"


@pytest.fixture(scope="module")
def env(tms_world):
    w = tms_world("engret", settings=dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "1s"}),
                  s3=None, catalog={})
    yield from engine_world(w)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


JOB_COLS = ("id", "operation", "engine", "state", "last_error", "statement", "rows_removed",
            "message")


def job(env, jid):
    rows = q(env, "SELECT %s FROM tms.maintenance_jobs WHERE id = %%s" % ", ".join(JOB_COLS),
             (jid,))
    return dict(zip(JOB_COLS, rows[0])) if rows else None


def wait_job(env, jid, timeout=120):
    wait_for(lambda: (job(env, jid) or {}).get("state") in TERMINAL, timeout=timeout,
             what="job %s to finish" % jid)
    row = job(env, jid)
    assert row["state"] == "succeeded", row
    return row


def table(env, ns, name, seed=31):
    """Four files of ten rows, unpartitioned: ids 0..39, file i category
    c<i>, ts 2024-01-01 00:00:00+00 + (60 id + 31) s."""
    env["catalog"].create_namespace(ns)
    smallfiles.make_table(env["catalog"], env["st"], ns, name, files=4, rows_per_file=10,
                          partitioned=False, seed=seed)
    ow.give_to_server(env["file_root"])


def ids(env, ns, name):
    """The table's ids as icebird reads them."""
    mloc, _ = ow.load(env["catalog"], ns, name)
    out = ow.icebird(mloc, file_root=env["file_root"], dump_rows=True)
    return sorted(int(r["id"]) for r in out["row_values"])


def runs_of(env, kind, jid):
    tag = "tms-job-%d" % jid
    return [r for r in env["engines"][kind].runs() if tag in (r.get("tag") or "").split(",")]


def job_count(env):
    return q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]


def quoted(kind, *names):
    if kind == "livy":
        return ".".join("`%s`" % n.replace("`", "``") for n in names)
    return ".".join('"%s"' % n.replace('"', '""') for n in names)


def string(kind, s):
    if kind == "livy":
        return "'%s'" % s.replace("\\", "\\\\").replace("'", "\\'")
    return "'%s'" % s.replace("'", "''")


def check_run(env, kind, jid, want_statement, want_ids, ns, name, removed):
    row = wait_job(env, jid)
    assert row["statement"] == want_statement, row
    runs = runs_of(env, kind, jid)
    assert len(runs) == 1 and runs[0]["statement"] == want_statement, runs
    assert ids(env, ns, name) == want_ids
    assert row["rows_removed"] == removed, row
    assert row["message"].startswith('delete rows on engine "%s": %d rows removed'
                                     % (kind, removed)), row
    return row


@pytest.mark.parametrize("kind", ("livy", "trino"))
def test_delete_rows_on_engine(env, kind):
    ns, name = "dr_" + kind, "t"
    table(env, ns, name)
    where = "id < 12 OR category IN ('c3', '%s')" % HOSTILE.replace("'", "''")
    jid = q(env, "SELECT tms.delete_rows('cat', %s, %s, %s, %s::jsonb)",
            (ns, name, where, json.dumps({"engine": kind})))[0][0]
    want = "DELETE FROM %s WHERE ((%s < 12) OR (%s IN (%s, %s)))" % (
        quoted(kind, "lake", ns, name), quoted(kind, "id"), quoted(kind, "category"),
        string(kind, "c3"), string(kind, HOSTILE))
    row = check_run(env, kind, jid, want, [i for i in range(40) if i >= 12 and i < 30],
                    ns, name, 22)
    assert row["operation"] == "retention" and row["engine"] == kind, row
    # file 0 and file 3 left by metadata, file 1 rewritten without 10 and 11
    _, meta = ow.load(env["catalog"], ns, name)
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "overwrite", snap["summary"]
    assert snap["summary"]["deleted-data-files"] == "3", snap["summary"]


@pytest.mark.parametrize("kind", ("livy", "trino"))
def test_retention_on_engine(env, kind):
    ns, name = "rt_" + kind, "t"
    table(env, ns, name)
    # ts of id x is 60 x + 31 s after midnight: ids 0..19 are before 00:20
    jid = q(env, "SELECT tms.run_operation('cat', %s, %s, 'retention', %s::jsonb, %s)",
            (ns, name, json.dumps({"column": "ts", "older-than": "2024-01-01 00:20:00Z"}),
             kind))[0][0]
    lit = ("TIMESTAMP '2024-01-01 00:20:00.000000+00:00'" if kind == "livy"
           else "TIMESTAMP '2024-01-01 00:20:00.000000 UTC'")
    want = "DELETE FROM %s WHERE (%s < %s)" % (quoted(kind, "lake", ns, name),
                                               quoted(kind, "ts"), lit)
    check_run(env, kind, jid, want, list(range(20, 40)), ns, name, 20)
    # the whole files went by metadata: a "delete" snapshot
    _, meta = ow.load(env["catalog"], ns, name)
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "delete", snap["summary"]


def test_retention_date_column_on_livy(env):
    ns, name = "dt_livy", "t"
    table(env, ns, name)
    # day of id x is 2024-01-01 + (x + 1) % 30 days; a date column goes by
    # the cutoff's day: days before 2024-01-05 (ids 0, 1, 2, 29..32)
    jid = q(env, "SELECT tms.run_operation('cat', %s, %s, 'retention', %s::jsonb, 'livy')",
            (ns, name, json.dumps({"column": "day", "older-than": "2024-01-05 12:00:00Z"})))[0][0]
    want = "DELETE FROM `lake`.`dt_livy`.`t` WHERE (`day` < DATE '2024-01-05')"
    gone = {0, 1, 2, 29, 30, 31, 32}
    check_run(env, "livy", jid, want, [i for i in range(40) if i not in gone], ns, name, 7)


def test_retention_epoch_unit_on_trino(env):
    ns, name = "ep_trino", "t"
    table(env, ns, name)
    jid = q(env, "SELECT tms.run_operation('cat', %s, %s, 'retention', %s::jsonb, 'trino')",
            (ns, name, json.dumps({"column": "id", "unit": "s",
                                   "older-than": "1970-01-01 00:00:15Z"})))[0][0]
    want = 'DELETE FROM "lake"."ep_trino"."t" WHERE ("id" < 15)'
    check_run(env, "trino", jid, want, list(range(15, 40)), ns, name, 15)


def test_policy_schedules_retention_on_trino(env):
    ns, name = "pol_trino", "t"
    table(env, ns, name)
    tag = uuid.uuid4().hex[:6]
    q(env, "SELECT tms.create_object_group(%s, server => 'cat', namespace_pattern => %s,"
           " table_pattern => %s)", ("g-" + tag, ns, name))
    q(env, "SELECT tms.create_policy(%s, %s)", ("p-" + tag, "g-" + tag))
    rule = q(env, "SELECT tms.add_rule(%s, 'retention', 'trino', %s::jsonb, 'true', 'catch-up',"
                  " %s::jsonb)", ("p-" + tag, json.dumps({"commits-added": 1}),
                                  json.dumps({"column": "ts",
                                              "older-than": "2024-01-01 00:10:00Z"})))[0][0]
    try:
        wait_for(lambda: q(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE rule_id = %s"
                                "   AND state IN ('succeeded', 'failed')", (rule,))[0][0] > 0,
                 timeout=120, what="the policy's retention job")
        jid = q(env, "SELECT min(id) FROM tms.maintenance_jobs WHERE rule_id = %s", (rule,))[0][0]
    finally:
        q(env, "SELECT tms.drop_policy(%s)", ("p-" + tag,))
    want = ('DELETE FROM "lake"."pol_trino"."t" WHERE ("ts" < '
            "TIMESTAMP '2024-01-01 00:10:00.000000 UTC')")
    # ts of id x is 60 x + 31 s after midnight: ids 0..9 are before 00:10
    check_run(env, "trino", jid, want, list(range(10, 40)), ns, name, 10)


@pytest.mark.parametrize("kind", ("livy", "trino"))
def test_hostile_table_name(env, kind):
    ns = "h`o\"s't" + kind
    name = "t'a`b\"le; --" + kind
    table(env, ns, name)
    jid = q(env, "SELECT tms.delete_rows('cat', %s, %s, 'id >= 35', %s::jsonb)",
            (ns, name, json.dumps({"engine": kind})))[0][0]
    row = wait_job(env, jid)
    want = "DELETE FROM %s WHERE (%s >= 35)" % (quoted(kind, "lake", ns, name), quoted(kind, "id"))
    assert row["statement"] == want and row["rows_removed"] == 5, row
    # (icebird cannot open these paths; the Python reader counts the rows)
    _, meta = ow.load(env["catalog"], ns, name)
    live = ow.live_files(env["st"], meta).values()
    assert sum(f["records"] for f in live if f["content"] == 0) == 35


def test_refused_before_a_job(env):
    ns, name = "refused", "t"
    table(env, ns, name)
    n = job_count(env)
    e = env["pg"].query_error(
        "SELECT tms.run_operation('cat', %s, %s, 'retention', %s::jsonb, 'gravitino')",
        (ns, name, json.dumps({"column": "ts", "older-than": "90 days"})))
    assert e.pgcode == "0A000" and "livy or trino" in (e.diag.message_hint or ""), str(e)
    e = env["pg"].query_error(
        "SELECT tms.delete_rows('cat', %s, %s, 'id = 1', '{\"engine\": \"gravitino\"}')",
        (ns, name))
    assert e.pgcode == "0A000", str(e)
    for opts in ({"column": "ts", "older-than": "90 days", "mode": "rewrite"},
                 {"column": "ts", "older-than": "90 days", "scan": True},
                 {"where": "id = 1", "mode": "metadata"}):
        e = env["pg"].query_error(
            "SELECT tms.run_operation('cat', %s, %s, 'retention', %s::jsonb, 'livy')",
            (ns, name, json.dumps(opts)))
        assert e.pgcode == "0A000" and "local" in (e.diag.message_hint or ""), (opts, str(e))
    e = env["pg"].query_error(
        "SELECT tms.delete_rows('cat', %s, %s, 'id = 1', %s::jsonb)",
        (ns, name, json.dumps({"engine": "trino", "mode": "metadata"})))
    assert e.pgcode == "0A000", str(e)
    e = env["pg"].query_error(
        "SELECT tms.delete_rows('cat', %s, %s, 'nosuch = 1', '{\"engine\": \"trino\"}')",
        (ns, name))
    assert e.pgcode == "42703", str(e)
    e = env["pg"].query_error(
        "SELECT tms.engine_statement('trino', %s, %s, 'retention', %s::jsonb)",
        (ns, name, json.dumps({"column": "ts", "older-than": "90 days"})))
    assert e.pgcode == "0A000", str(e)
    assert job_count(env) == n
    assert ids(env, ns, name) == list(range(40))
