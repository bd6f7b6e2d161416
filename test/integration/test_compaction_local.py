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
    deletes (Iceberg Java; a group every row of which is deleted commits
    no new file) and bucket/identity partitions keep their rows;
  - a table whose partition spec evolved: each spec's files are rewritten
    in their own spec;
  - files of two specs in one partition of the output spec: one group,
    written in the output spec; another output partition its own group;
  - a table of 10,000 small files (one group per partition, one replace
    commit each; bench/compact_bench.py compacts such a table on every run
    too);
  - the where filter selects partitions, and a bad one is refused before a
    job is recorded;
  - a writer committing during the compaction (the catalog's interpose
    fault on the compaction's commit): an append is kept, an equality
    delete still applies to the rewritten rows, a position delete on a
    rewritten file gives the group up; no row lost or resurrected; a
    writer's commit and an expiry deleting the manifest list of the
    snapshot the compaction loaded: the commit is built again on the
    reloaded table;
  - the helper killed while it writes: the job fails with a clear
    last_error, the table is unchanged, no file it wrote is referenced;
  - max-concurrent-file-group-rewrites: four groups in the helper at once
    (its done messages say so), partial progress's batches still committed
    in plan order; one at a time when asked; a group failing in the helper
    fails alone with partial progress (the others committed), the run
    without it;
  - a memory limit far below the data's size completes by spilling;
  - cancel_operation kills the helper;
  - tms.allowed_hosts in the server's configuration limits the workers
    (a catalog not listed fails the job), whatever the asking session set;
  - the snapshot-drift gate per operation: an append lands between a
    policy's evaluation and its job's run; a manifest rewrite and a
    snapshot expiry still run and succeed on the new snapshot (the expiry
    keeps it and the appended file), a compaction whose condition still
    holds there is planned again on it (the appended file is compacted
    too), one whose condition no longer holds ends skipped saying so.

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
from pgcluster import FAST_WORKERS, JOB_ENDS, wait_for  # noqa: E402
from iceberg_transforms import bucket as iceberg_bucket, zkey_double, zkey_long, zvalue  # noqa: E402

TERMINAL = JOB_ENDS


pytestmark = pytest.mark.own_cluster

# the longest tests: a work unit of their own in the parallel run (conftest.py),
# beside the rest of the module, on a world of their own
SCALE = pytest.mark.xdist_group("test_compaction_local.py:scale")


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "cmpcat"
    w = tms_world("cmp", settings=dict(FAST_WORKERS), catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/, s3://hyperparam-iceberg/, s3a://hyperparam-iceberg/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


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


def iceberg_js_load(env, ns, name):
    """The metadata location of the table as iceberg-js (a third-party REST
    client) loads it from the catalog.  (Its snapshot ids are JavaScript
    numbers, rounded past 2^53: the location is what is compared.)"""
    script = (
        "import { IcebergRestCatalog } from 'iceberg-js';"
        "const c = new IcebergRestCatalog({baseUrl: %s, warehouse: %s, auth: {type: 'none'}});"
        "const r = await c.loadTableResult({namespace: %s, name: %s});"
        "console.log(JSON.stringify({location: r['metadata-location']}));"
        % (json.dumps(env["catalog"].uri), json.dumps(env["catalog"].prefix),
           json.dumps(ns.split(".")), json.dumps(name)))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=world.NODE_DIR,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["location"]


def new_entries(env, meta, paths):
    """The manifest entries (decoded) of the data files paths of meta's
    current snapshot."""
    out = {}
    for rec in ow.manifest_records(env["st"], ow.snapshot(meta, meta["current-snapshot-id"])):
        for e in ow.manifest_entries(env["st"], rec["manifest_path"]):
            if e["status"] != 2 and e["data_file"]["file_path"] in paths:
                out[e["data_file"]["file_path"]] = e["data_file"]
    return out


def live(env, ns, name):
    mloc, meta = ow.load(env["catalog"], ns, name)
    return mloc, meta, ow.live_files(env["st"], meta)


def small_table(env, name, ns="cmp", **kw):
    mloc = smallfiles.make_table(env["catalog"], env["st"], ns, name, **kw)
    ow.give_to_server(env["file_root"])
    return mloc


def replace_chain(meta, meta0):
    """The snapshots committed after meta0's current one, newest first."""
    snaps = {s["snapshot-id"]: s for s in meta["snapshots"]}
    chain, sid = [], meta["current-snapshot-id"]
    while sid != meta0["current-snapshot-id"]:
        chain.append(snaps[sid])
        sid = snaps[sid]["parent-snapshot-id"]
    return chain


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
    row = env["pg"].wait_job(jid)
    mloc2, meta, after = live(env, "cmp", "small")
    # iceberg-js loads the table the catalog holds; icebird reads its rows
    js_loc = iceberg_js_load(env, "cmp", "small")
    assert js_loc == mloc2
    got = rows(env, js_loc)
    assert got == want
    data = {p: f for p, f in after.items() if f["content"] == 0}
    assert len(data) == 4
    assert not [p for p, f in after.items() if f["content"] != 0]
    assert row["data_files_rewritten"] == 120 and row["data_files_added"] == 4, row
    assert row["delete_files_rewritten"] == len(deletes), row
    # one replace snapshot for the four groups (Iceberg's default:
    # partial-progress.enabled false)
    snaps = {s["snapshot-id"]: s for s in meta["snapshots"]}
    chain = replace_chain(meta, meta0)
    assert len(chain) == 1 and chain[0]["summary"]["operation"] == "replace"
    assert chain[0]["summary"]["changed-partition-count"] == "4", chain[0]["summary"]
    # the new entries carry the base's sequence number (Iceberg's starting sequence number)
    base_seq = snaps[meta0["current-snapshot-id"]]["sequence-number"]
    assert {f["seq"] for f in data.values()} == {base_seq}
    # the bounds of the new files are the exact min and max of their rows,
    # so a reader prunes by them as before: category = 'cN' reads one file
    # (before: that partition's files), id = X the one file holding X
    by_cat = {}
    for r in got:
        r = json.loads(r)
        by_cat.setdefault(r["category"], []).append(int(r["id"]))
    entries = new_entries(env, meta, set(data))
    assert len(entries) == 4
    for df in entries.values():
        lo = {b["key"]: b["value"] for b in df["lower_bounds"]}
        hi = {b["key"]: b["value"] for b in df["upper_bounds"]}
        assert set(lo) == set(hi) == {1, 2, 3, 4, 5, 6, 7}, (lo, hi)
        c = df["partition"]["category"]
        assert lo[2] == hi[2] == c.encode()
        assert int.from_bytes(lo[1], "little", signed=True) == min(by_cat[c])
        assert int.from_bytes(hi[1], "little", signed=True) == max(by_cat[c])
        nulls = {b["key"]: b["value"] for b in df["null_value_counts"]}
        assert nulls[1] == 0 and nulls[4] > 0
        assert df["record_count"] == len(by_cat[c])

    def prune_id(x):
        return [p for p, df in entries.items()
                if int.from_bytes({b["key"]: b["value"] for b in df["lower_bounds"]}[1],
                                  "little", signed=True) <= x <=
                int.from_bytes({b["key"]: b["value"] for b in df["upper_bounds"]}[1],
                               "little", signed=True)]
    for c, ids in by_cat.items():
        for x in (min(ids), max(ids)):
            kept = prune_id(x)
            assert [p for p in kept if entries[p]["partition"]["category"] == c], (x, kept)
    assert not prune_id(max(max(v) for v in by_cat.values()) + 1)
    ib = ow.icebird(mloc2, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                    list_files=True)
    assert ib["records"] == sum(f["records"] for f in data.values())


# ---------------------------------------------------------------------------
# the real fixtures
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["spark_v2_mor_posdeletes", "java_v2_partitioned_eqdeletes",
                                  "spark_v2_partitioned_bucket_identity"])
def test_real_fixture_keeps_its_rows(env, name):
    ns = world.REAL_NAMESPACE
    mloc, meta0, before = live(env, ns, name)
    want = rows(env, mloc)
    # rewrite-all alone: every live data file is rewritten, in groups kept
    # whatever min-input-files (5 by default) says, as Iceberg's
    # SizeBasedFileRewritePlanner does; no partition has five files
    opts = {"rewrite-all": True}
    pl = plan(env, ns, name, opts)
    planned = sum(g["detail"]["output_files"] for g in group_rows(pl))
    rewritten = {r["target"] for r in pl if r["action"] == "rewrite-file"}
    assert {ow.canon(env["st"], p) for p in rewritten} == \
        {ow.canon(env["st"], p) for p, f in before.items() if f["content"] == 0}, pl
    assert all("rewrite-all" in g["detail"]["reasons"] for g in group_rows(pl)), pl
    removed = {ow.canon(env["st"], r["target"]) for r in pl if r["action"] == "remove-delete-file"}
    row = env["pg"].wait_job(run(env, ns, name, opts))
    mloc2, meta, after = live(env, ns, name)
    js_loc = iceberg_js_load(env, ns, name)
    assert js_loc == mloc2
    assert rows(env, js_loc) == want
    assert row["data_files_rewritten"] == len(rewritten)
    if name == "java_v2_partitioned_eqdeletes":
        # its equality deletes take every row of the files they apply to:
        # those groups' commits remove their files and add none (the plan
        # counts outputs by bytes, before deletes); the other groups, kept
        # for rewrite-all alone, write their one file each
        kept = sum(g["detail"]["output_files"] for g in group_rows(pl)
                   if g["detail"]["equality_delete_files"] == 0)
        assert row["data_files_added"] == kept and 0 < kept < planned, (row, pl)
        planned = kept
    else:
        assert row["data_files_added"] == planned
    # the rewritten files and the removed delete files are no longer live
    gone = {ow.canon(env["st"], p) for p in rewritten} | removed
    assert not gone & {ow.canon(env["st"], p) for p in after}
    assert len([p for p, f in after.items() if f["content"] == 0]) == \
        len([p for p, f in before.items() if f["content"] == 0]) - len(rewritten) + planned
    assert rewritten and mloc2 != mloc
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["summary"]["operation"] == "replace"
    if name == "java_v2_partitioned_eqdeletes":
        # the equality deletes were applied; those whose files were all rewritten are gone
        assert removed and row["delete_files_rewritten"] == len(removed)


# ---------------------------------------------------------------------------
# an evolved partition spec, many small files, the where filter
# ---------------------------------------------------------------------------

def evolve_and_append(env, ns, name, files, rows_per_file, first_id):
    """Move the table to a new default spec (bucket[2](id)) and append
    `files` Parquet files written in it, one append snapshot."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, ns, name)
    spec = {"spec-id": 1, "fields": [{"name": "id_bucket", "transform": "bucket[2]",
                                      "source-id": 1, "field-id": 1001}]}
    ow.commit(cat, ns, name, {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-spec", "spec": spec},
                    {"action": "set-default-spec", "spec-id": 1}]})
    _, meta = ow.load(cat, ns, name)
    import compact as cp
    tmp = tempfile.mkdtemp(prefix="tms-evolve-")
    try:
        data_dir = cp.data_location(meta)
        jobs, uris = [], []
        for i in range(files):
            prefix = "evolved-%05d-%s" % (i, uuid.uuid4())
            # bucket[2](id) of Iceberg (murmur3) is not computed here: every
            # file goes to bucket 0, which is what its manifest says
            jobs.append({"mode": "write", "schema": {"fields": smallfiles.SCHEMA["fields"]},
                         "query": smallfiles._rows_query(first_id + i * rows_per_file,
                                                         rows_per_file, "e", 0),
                         "output_files": 1, "output_dir": os.path.join(tmp, "d%d" % i),
                         "file_prefix": prefix, "compression": "zstd",
                         "iceberg_schema": json.dumps(smallfiles.SCHEMA)})
            uris.append(data_dir + "/id_bucket=0/" + prefix + "-00000.parquet")
        outs = cp.run_node({"jobs": jobs})["results"]
        entries = []
        for uri, res in zip(uris, outs):
            o = res["files"][0]
            with open(o["path"], "rb") as fh:
                st.write(uri, fh.read())
            entries.append(smallfiles._data_file(uri, o, {"id_bucket": 0}))
        rnd = __import__("random").Random(7)
        snap = smallfiles._snapshot(meta, rnd, "append")
        list_schema, _, records = ow._list_schema_and_meta(st, ow.snapshot(meta, meta["current-snapshot-id"]))
        m_schema, m_hmeta = ow._manifest_template(st, meta, records, 0)
        # the spec-1 manifest: its partition record is id_bucket int
        import iceberg_avro_schemas as ias
        import avro_codec
        schema = ias.manifest_entry_schema(2, [("id_bucket", "int", 1001)])
        recs = [ow._conform({"status": 1, "snapshot_id": snap["snapshot-id"],
                             "sequence_number": None, "file_sequence_number": None,
                             "data_file": df}, json.loads(schema)) for df in entries]
        path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"), uuid.uuid4())
        hmeta = {"schema": json.dumps(smallfiles.SCHEMA), "schema-id": "0",
                 "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": "1",
                 "format-version": "2", "content": "data"}
        data = avro_codec.write_container(schema, recs, "deflate", hmeta)
        st.write(path, data)
        seq = snap["sequence-number"]
        rec = {"manifest_path": path, "manifest_length": len(data), "partition_spec_id": 1,
               "content": 0, "sequence_number": seq, "min_sequence_number": seq,
               "added_snapshot_id": snap["snapshot-id"], "added_files_count": len(entries),
               "existing_files_count": 0, "deleted_files_count": 0,
               "added_rows_count": sum(e["record_count"] for e in entries),
               "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
               "key_metadata": None}
        smallfiles._push(cat, [ns], name, st, meta, snap, [rec] + records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ow.give_to_server(env["file_root"])


def test_evolved_partition_spec(env):
    small_table(env, "evolved", files=20, rows_per_file=10, seed=5)
    evolve_and_append(env, "cmp", "evolved", files=12, rows_per_file=10, first_id=100000)
    mloc, meta0, before = live(env, "cmp", "evolved")
    assert {tuple(k for k, _ in f["partition"]) for f in before.values()} == \
        {("category",), ("id_bucket",)}
    want = rows(env, mloc)
    groups = group_rows(plan(env, "cmp", "evolved"))
    # the four category partitions of spec 0 and the one bucket of spec 1
    assert sorted((g["detail"]["spec_id"], g["detail"]["files"]) for g in groups) == \
        [(0, 5), (0, 5), (0, 5), (0, 5), (1, 12)], groups
    env["pg"].wait_job(run(env, "cmp", "evolved"))
    mloc2, meta, after = live(env, "cmp", "evolved")
    assert rows(env, mloc2) == want
    data = [f for f in after.values() if f["content"] == 0]
    # each file written back in its own spec and partition
    assert sorted(f["partition"] for f in data) == \
        sorted([(("category", "c%d" % i),) for i in range(4)] + [(("id_bucket", 0),)])


def test_where_selects_partitions(env):
    small_table(env, "where", files=40, rows_per_file=10, seed=9)
    mloc, meta0, before = live(env, "cmp", "where")
    want = rows(env, mloc)
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    # refused before a job is recorded: not a partition column, a bad literal
    for bad, says in (("amount > 1", "not a partition column"),
                      ("nosuch = 1", "neither a partition field nor a column"),
                      ("category = ", "invalid where filter")):
        e = env["pg"].query_error("SELECT tms.run_operation(%s, 'cmp', 'where', 'compaction',"
                                  " %s::jsonb)", (env["server"], json.dumps({"where": bad})))
        assert e.pgcode == "22023" and says in str(e), (bad, str(e))
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n
    opts = {"where": "category IN ('c1', 'c3')"}
    groups = group_rows(plan(env, "cmp", "where", opts))
    assert sorted(g["detail"]["partition"] for g in groups) == [["c1"], ["c3"]]
    env["pg"].wait_job(run(env, "cmp", "where", opts))
    mloc2, _, after = live(env, "cmp", "where")
    assert rows(env, mloc2) == want
    per = {}
    for f in after.values():
        c = dict(f["partition"])["category"]
        per[c] = per.get(c, 0) + 1
    assert per == {"c0": 10, "c1": 1, "c2": 10, "c3": 1}, per

@SCALE
def test_two_thousand_small_files(env):
    """Thousands of small files in four partitions: four groups of 500,
    one replace commit of them all (bench/README.md has the compaction of
    10,000 files and more, timed)."""
    mloc = small_table(env, "twok", files=2000, rows_per_file=5, seed=1)
    _, meta0, before = live(env, "cmp", "twok")
    assert len(before) == 2000
    want = rows(env, mloc)
    assert len(want) == 10000
    groups = group_rows(plan(env, "cmp", "twok"))
    assert [g["detail"]["files"] for g in groups] == [500] * 4
    row = env["pg"].wait_job(run(env, "cmp", "twok"), timeout=600)
    mloc2, meta, after = live(env, "cmp", "twok")
    assert len(after) == 4 and row["data_files_rewritten"] == 2000
    assert row["data_files_added"] == 4, row
    # one replace commit of the four groups on the table's last append
    chain = replace_chain(meta, meta0)
    assert len(chain) == 1 and chain[0]["summary"]["operation"] == "replace"
    assert iceberg_js_load(env, "cmp", "twok") == mloc2
    assert rows(env, mloc2) == want
    assert ow.icebird(mloc2, file_root=env["file_root"])["records"] == 10000


# ---------------------------------------------------------------------------
# a writer committing during the compaction
# ---------------------------------------------------------------------------

def concurrent_append(env, ns, name, meta, category):
    """An append of a copy of one of the table's data files (real rows)."""
    st = env["st"]
    live_files = ow.live_files(st, meta)
    src = sorted(p for p, f in live_files.items()
                 if f["content"] == 0 and dict(f["partition"]).get("category") == category)[0]
    dst = src.rsplit("/", 1)[0] + "/concurrent-%s.parquet" % uuid.uuid4().hex[:8]
    data = st.read(src)
    st.write(dst, data)
    f = live_files[src]
    body, _ = ow.append_commit(st, meta, [{"path": dst, "records": f["records"],
                                           "size": len(data), "partition": dict(f["partition"])}],
                               seed=3)
    return body, dst


def concurrent_delete(env, ns, name, meta, category, ids=None, position=None):
    """An equality delete of ids (field 1) or a position delete of
    (path, pos) pairs in the category partition, prepared as a commit body."""
    import compact as cp
    import random
    st = env["st"]
    tmp = tempfile.mkdtemp(prefix="tms-cdel-")
    try:
        if ids is not None:
            fields = [smallfiles.SCHEMA["fields"][0]]
            query = "SELECT * FROM (VALUES %s) v(c_1)" % ", ".join("(%d::BIGINT)" % i for i in ids)
            content = 2
        else:
            fields = smallfiles.POS_FIELDS
            query = "SELECT * FROM (VALUES %s) v(c_2147483546, c_2147483545) ORDER BY 1, 2" % \
                ", ".join("('%s', %d::BIGINT)" % (p.replace("'", "''"), n) for p, n in position)
            content = 1
        out = cp.run_node({"mode": "write", "schema": {"fields": fields}, "query": query,
                           "output_files": 1, "output_dir": tmp,
                           "file_prefix": "del-%s" % uuid.uuid4(), "compression": "zstd"})
        o = out["files"][0]
        uri = cp.data_location(meta) + "/category=%s/%s" % (category, os.path.basename(o["path"]))
        with open(o["path"], "rb") as fh:
            st.write(uri, fh.read())
        e = smallfiles._data_file(uri, o, {"category": category}, content=content,
                                  equality_ids=[1] if content == 2 else None,
                                  schema={"fields": fields}, truncate=None if content == 1 else 16)
        snap = smallfiles._snapshot(meta, random.Random(5), "delete")
        cur = ow.snapshot(meta, meta["current-snapshot-id"])
        records = ow.manifest_records(st, cur)
        rec = smallfiles._manifest(st, meta, snap, True, [e], content)
        import iceberg_avro_schemas as ias
        ow._write_list(st, meta, snap, json.loads(ias.manifest_list_schema(2)),
                       {"format-version": "2"}, [rec] + records)
        body = ow._commit_body(meta, snap)
        body["requirements"].insert(0, {"type": "assert-table-uuid", "uuid": meta["table-uuid"]})
        return body
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def posts(env, name):
    return [(r["status"], r["fault"]) for r in env["catalog"].requests(r"/tables/%s$" % name)["requests"]
            if r["method"] == "POST"]


def test_concurrent_append_kept(env):
    mloc = small_table(env, "cappend", files=24, rows_per_file=10, seed=11)
    _, meta, _ = live(env, "cmp", "cappend")
    body, dst = concurrent_append(env, "cmp", "cappend", meta, "c0")
    ow.give_to_server(env["file_root"])
    env["catalog"].reset_requests()
    env["catalog"].fault(r"/tables/cappend$", action="interpose", method="POST", commits=[body])
    env["pg"].wait_job(run(env, "cmp", "cappend"))
    log = posts(env, "cappend")
    assert log[:2] == [(200, "interposed"), (409, "interpose")], log
    mloc2, meta2, after = live(env, "cmp", "cappend")
    # the appended file is live beside the compacted ones; its rows are all there
    assert dst in after
    base = rows(env, mloc)
    extra = [r for r in rows(env, mloc2)]
    assert len(extra) == len(base) + after[dst]["records"]
    assert set(base) <= set(extra)


def test_concurrent_equality_delete_applies(env):
    mloc = small_table(env, "ceq", files=24, rows_per_file=10, seed=12)
    _, meta, before = live(env, "cmp", "ceq")
    # ids of partition c1 (files 1, 5, 9, ... hold ids 10..19, 50..59, ...)
    gone = [15, 52, 97]
    body = concurrent_delete(env, "cmp", "ceq", meta, "c1", ids=gone)
    ow.give_to_server(env["file_root"])
    env["catalog"].fault(r"/tables/ceq$", action="interpose", method="POST", commits=[body])
    env["pg"].wait_job(run(env, "cmp", "ceq"))
    mloc2, _, after = live(env, "cmp", "ceq")
    want = [r for r in rows(env, mloc) if int(json.loads(r)["id"]) not in gone]
    assert rows(env, mloc2) == want
    # the new equality delete is still there, and still applies to the rewritten rows
    assert [f for f in after.values() if f["content"] == 2]


def test_concurrent_position_delete_gives_the_group_up(env):
    mloc = small_table(env, "cpos", files=24, rows_per_file=10, seed=13)
    _, meta, before = live(env, "cmp", "cpos")
    victim = sorted(p for p, f in before.items() if dict(f["partition"])["category"] == "c0")[0]
    body = concurrent_delete(env, "cmp", "cpos", meta, "c0", position=[(victim, 1)])
    ow.give_to_server(env["file_root"])
    want_before = rows(env, mloc)
    env["catalog"].fault(r"/tables/cpos$", action="interpose", method="POST", commits=[body])
    # partial progress, a commit per group: the failed one leaves the others
    # committed (Iceberg's partial-progress.max-failed-commits defaults to
    # max-commits, so one failure does not fail the run)
    opts = {"partial-progress.enabled": True, "partial-progress.max-commits": 4}
    assert summary_row(plan(env, "cmp", "cpos", opts))["commits"] == 4
    env["pg"].wait_job(run(env, "cmp", "cpos", opts))
    mloc2, meta2, after = live(env, "cmp", "cpos")
    chain = [s for s in replace_chain(meta2, meta) if s["summary"]["operation"] == "replace"]
    assert len(chain) == 3, [s["summary"] for s in chain]
    # the c0 group was given up: its files and the new delete are live, the rest compacted
    per = {}
    for f in after.values():
        if f["content"] == 0:
            c = dict(f["partition"])["category"]
            per[c] = per.get(c, 0) + 1
    assert per == {"c0": 6, "c1": 1, "c2": 1, "c3": 1}, per
    got = rows(env, mloc2)
    assert len(got) == len(want_before) - 1 and set(got) <= set(want_before)


# ---------------------------------------------------------------------------
# the helper: killed, cancelled, short of memory
# ---------------------------------------------------------------------------

def helper_pids(env):
    """The compaction helpers this cluster's workers run (children of its workers)."""
    workers = {r[0] for r in q(env, "SELECT pid FROM tms.workers WHERE role = 'worker'")}
    out = subprocess.run(["pgrep", "-f", "tms/tms_compactor"], capture_output=True, text=True)
    pids = []
    for pid in (int(x) for x in out.stdout.split()):
        try:
            with open("/proc/%d/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid in workers:
            pids.append(pid)
    return pids


def set_and_reload(env, name, value):
    """ALTER SYSTEM SET name = value (as written) and await the reload:
    a worker claiming the job queued next must have it."""
    env["pg"].psql("ALTER SYSTEM SET %s = %s" % (name, value))
    env["pg"].reload_conf()

@SCALE
def test_writer_and_expiry_during_the_rewrite(env):
    """Found by the data-safety campaign (a history whose writer appended
    while an expiry ran beside the compaction): the writer's commit made
    the snapshot the compaction had loaded an old one, the expiry removed
    it and deleted its manifest list, and the compaction, building its
    commit on the table as it had loaded it, failed reading that list
    (404).  It now loads the table again and builds its commit on the
    writer's snapshot.  The helper is stopped (SIGSTOP) while the writer
    and the expiry commit."""
    small_table(env, "stale", files=400, rows_per_file=200, seed=18)
    mloc0, meta0, _ = live(env, "cmp", "stale")
    base = rows(env, mloc0)
    s0 = meta0["current-snapshot-id"]
    jid = run(env, "cmp", "stale")
    wait_for(lambda: helper_pids(env), timeout=60, interval=0.01, what="the helper")
    pid = helper_pids(env)[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        body, dst = concurrent_append(env, "cmp", "stale", meta0, "c0")
        ow.give_to_server(env["file_root"])
        ow.commit(env["catalog"], "cmp", "stale", body)
        _, meta1, _ = live(env, "cmp", "stale")
        s1 = meta1["current-snapshot-id"]
        assert s1 != s0
        # the expiry: s0 leaves the table, and its manifest list the storage
        ow.commit(env["catalog"], "cmp", "stale", {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": s1}],
            "updates": [{"action": "remove-snapshots", "snapshot-ids": [s0]}]})
        env["st"].delete(ow.snapshot(meta0, s0)["manifest-list"])
    finally:
        os.kill(pid, signal.SIGCONT)
    row = env["pg"].wait_job(jid)
    mloc2, meta2, after = live(env, "cmp", "stale")
    assert dst in after
    chain = replace_chain(meta2, meta1)
    assert [s["summary"]["operation"] for s in chain] == ["replace"], chain
    assert row["after_snapshot_id"] == meta2["current-snapshot-id"]
    got = rows(env, mloc2)
    assert len(got) == len(base) + after[dst]["records"]
    assert set(base) <= set(got)

@SCALE
def test_helper_killed_mid_write_leaves_the_table_unchanged(env):
    small_table(env, "killed", files=400, rows_per_file=200, seed=14)
    mloc0, meta0, before = live(env, "cmp", "killed")
    data_dir = os.path.join(env["file_root"], "wh", "cmp", "killed", "data")
    started = time.time()
    set_and_reload(env, "tms.maintenance_max_attempts", "1")
    try:
        jid = run(env, "cmp", "killed")
        wait_for(lambda: helper_pids(env), timeout=60, interval=0.02, what="the helper")
        pid = helper_pids(env)[0]
        os.kill(pid, signal.SIGKILL)
        row = env["pg"].wait_job(jid, ("failed",))
    finally:
        env["pg"].psql("ALTER SYSTEM RESET tms.maintenance_max_attempts")
        env["pg"].psql("SELECT pg_reload_conf()")
    assert "compaction helper failed" in row["last_error"] and "signal 9" in row["last_error"], row
    mloc1, meta1, after = live(env, "cmp", "killed")
    assert mloc1 == mloc0 and set(after) == set(before)
    assert not helper_pids(env)
    # nothing it wrote remains: a file it uploaded before the kill, announced
    # or not, is deleted once the helper is stopped
    written = [os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs
               if os.path.getmtime(os.path.join(d, f)) >= started]
    assert not written, written
    assert rows(env, mloc1) == rows(env, mloc0)


def test_helper_killed_inside_a_local_write_leaves_no_temporary_file(env):
    """Found by the data-safety campaign (test_soak.py, a history whose
    compaction helper was killed): a local write goes to
    NAME.tms-tmp-PID and is renamed over NAME, so a helper killed inside
    it left that temporary file, which nothing referenced or deleted.
    The helper is stepped (SIGSTOP, a few ms of SIGCONT at a time) until
    it is stopped with a temporary file present, then killed."""
    small_table(env, "killedtmp", files=8, rows_per_file=60000, seed=17, partitioned=False)
    mloc0, _, before = live(env, "cmp", "killedtmp")
    data_dir = os.path.join(env["file_root"], "wh", "cmp", "killedtmp", "data")

    def temporaries():
        return [os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs
                if ".tms-tmp-" in f]
    set_and_reload(env, "tms.maintenance_max_attempts", "1")
    try:
        caught = []
        for _ in range(6):                  # a helper that wrote before it was caught: again
            jid = run(env, "cmp", "killedtmp", {"rewrite-all": True})
            wait_for(lambda: helper_pids(env), timeout=60, interval=0.01, what="the helper")
            pid = helper_pids(env)[0]
            try:
                os.kill(pid, signal.SIGSTOP)
                for _ in range(20000):      # bounded: about 40 s of the helper's time
                    caught = temporaries()
                    if caught:
                        break
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.002)
                    os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:      # it ended first
                pass
            if caught:
                break
            env["pg"].wait_job(jid, TERMINAL)
            mloc0 = live(env, "cmp", "killedtmp")[0]
        assert caught, "the helper was never stopped inside a write"
        os.kill(pid, signal.SIGKILL)
        row = env["pg"].wait_job(jid, ("failed",))
    finally:
        env["pg"].psql("ALTER SYSTEM RESET tms.maintenance_max_attempts")
        env["pg"].psql("SELECT pg_reload_conf()")
    assert "compaction helper failed" in row["last_error"], row
    assert live(env, "cmp", "killedtmp")[0] == mloc0
    assert not temporaries(), temporaries()


def test_cancel_kills_the_helper(env):
    small_table(env, "cancelled", files=400, rows_per_file=200, seed=15)
    mloc0, _, before = live(env, "cmp", "cancelled")
    jid = run(env, "cmp", "cancelled")
    wait_for(lambda: helper_pids(env), timeout=60, interval=0.02, what="the helper")
    assert q(env, "SELECT tms.cancel_operation(%s)", (jid,))[0][0] is True
    row = env["pg"].wait_job(jid, ("cancelled", "succeeded"))
    wait_for(lambda: not helper_pids(env), timeout=30, what="the helper to be gone")
    if row["state"] == "cancelled":
        assert live(env, "cmp", "cancelled")[0] == mloc0 or row["data_files_rewritten"] > 0


def duckdb_ids(paths):
    """count, min, max, sum and sum of squares of the id column (field 1)
    of Parquet files, read by DuckDB alone."""
    sql = ("SELECT count(*)::VARCHAR, min(id)::VARCHAR, max(id)::VARCHAR, sum(id)::VARCHAR,"
           " sum(id::HUGEINT * id)::VARCHAR FROM read_parquet([%s])"
           % ", ".join("'%s'" % p.replace("'", "''") for p in paths))
    script = ("import { DuckDBInstance } from '@duckdb/node-api';"
              "const c = await (await DuckDBInstance.create(':memory:')).connect();"
              "const r = await c.runAndReadAll(%s);"
              "console.log(JSON.stringify(r.getRows()[0]));" % json.dumps(sql))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=world.NODE_DIR,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return [int(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]

@SCALE
def test_memory_limit_far_below_the_data(env):
    # about 60 MB of Parquet, 240 MB as rows; DuckDB gets 64 MB
    files, per = 24, 150000
    small_table(env, "bigrows", files=files, rows_per_file=per, seed=16, with_deletes=True)
    set_and_reload(env, "tms.compaction_memory_limit", "'64MB'")
    try:
        row = env["pg"].wait_job(run(env, "cmp", "bigrows"), timeout=600)
    finally:
        env["pg"].psql("ALTER SYSTEM RESET tms.compaction_memory_limit")
        env["pg"].psql("SELECT pg_reload_conf()")
    _, _, after = live(env, "cmp", "bigrows")
    assert row["data_files_added"] == 4
    assert not [f for f in after.values() if f["content"] != 0]
    # the rows smallfiles wrote, less its deletes (module comment of
    # test/engines/smallfiles.py): position deletes of rows 0 and 3 of every
    # 7th file, equality deletes of the ids = 5 mod 97 of partition c1
    want = set(range(files * per))
    want -= {i * per + r for i in range(0, files, 7) for r in (0, 3)}
    want -= {x for i in range(1, files, 4) for x in range(i * per, (i + 1) * per) if x % 97 == 5}
    got = duckdb_ids([env["st"].local_path(p) for p in after])
    assert got == [len(want), min(want), max(want), sum(want), sum(x * x for x in want)], got


def test_refused_without_the_helper(env):
    # a build without libduckdb installs no $libdir/tms/tms_compactor: the
    # helper made non-executable stands for it (this test holds the install
    # lock, as every test run does; the mode is restored in any case)
    libdir = subprocess.run(["pg_config", "--pkglibdir"], capture_output=True, text=True,
                            check=True).stdout.strip()
    path = os.path.join(libdir, "tms", "tms_compactor")
    mode = os.stat(path).st_mode
    small_table(env, "nohelper", files=10, rows_per_file=5, seed=17)
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    os.chmod(path, mode & ~0o111)
    try:
        e = env["pg"].query_error("SELECT tms.run_operation(%s, 'cmp', 'nohelper', 'compaction')",
                                  (env["server"],))
        assert e.pgcode == "0A000", (e.pgcode, str(e))
        assert "without libduckdb" in e.diag.message_detail, e.diag.message_detail
        assert "install-deps" in e.diag.message_hint, e.diag.message_hint
    finally:
        os.chmod(path, mode)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n
    # installed again: accepted
    env["pg"].wait_job(run(env, "cmp", "nohelper"), ("succeeded", "skipped"))


# ---------------------------------------------------------------------------
# tms.allowed_hosts in the workers
# ---------------------------------------------------------------------------

def set_allowed_hosts(env, value):
    q(env, "ALTER SYSTEM SET tms.allowed_hosts = %s", (value,))
    q(env, "SELECT pg_reload_conf()")


def run_until(env, ns, name, opts, want, timeout=60):
    """Run the compaction until a job ends in want (the workers take the
    reloaded setting when they next look: a job claimed before may still
    run with the old one); the last job.  The session that asks sets no
    limit of its own: what is checked is the workers' setting."""
    deadline = time.monotonic() + timeout
    conn = env["pg"].connect()
    conn.autocommit = True
    try:
        while True:
            env["pg"].query("SET tms.allowed_hosts = ''", conn=conn)
            jid = env["pg"].query(
                "SELECT tms.run_operation(%s, %s, %s, 'compaction', %s::jsonb)",
                (env["server"], ns, name, json.dumps(opts)), conn=conn)[0][0]
            row = env["pg"].wait_job(jid, states=TERMINAL)
            if row["state"] == want or time.monotonic() > deadline:
                return row
    finally:
        conn.close()


def test_allowed_hosts_in_the_workers(env):
    """A worker refuses a catalog not in tms.allowed_hosts set in the
    server's configuration, even when the session that asked has no limit
    (the job fails naming the setting and the address); with the catalog's
    and the storage's ports listed the job runs.  (The helper's copy of
    the list, from its hello: compact_test.)"""
    ns, name = world.REAL_NAMESPACE, "spark_v2_mor_posdeletes"
    assert env["real"][name]["storage"] == "s3"
    cat_port = int(env["catalog"].uri.rsplit(":", 1)[1])
    s3_port = int(env["s3"].endpoint.rsplit(":", 1)[1])
    opts = {"rewrite-all": True, "min-input-files": 1, "delete-file-threshold": 1}
    try:
        set_allowed_hosts(env, "10.9.9.9")
        row = run_until(env, ns, name, opts, "failed")
        assert row["state"] == "failed", row
        assert "is not allowed by tms.allowed_hosts" in (row["last_error"] or ""), row
        assert "Address 127.0.0.1 port %d is not listed" % cat_port in row["last_error"], row

        # the catalog's and the storage's ports listed: the job runs (the
        # helper, when there is something to rewrite, gets the same list)
        set_allowed_hosts(env, "127.0.0.1:%d, 127.0.0.1:%d" % (cat_port, s3_port))
        row = run_until(env, ns, name, opts, "succeeded")
        assert row["state"] == "succeeded", row
    finally:
        q(env, "ALTER SYSTEM RESET tms.allowed_hosts")
        q(env, "SELECT pg_reload_conf()")


# ---------------------------------------------------------------------------
# strategies sort and zorder
# ---------------------------------------------------------------------------

def file_rows(paths, cols):
    """Each Parquet file's rows (cols, SQL over its columns, as text), in
    file order, read by DuckDB alone: {path: [[...], ...]}."""
    sel = ", ".join("(%s)::VARCHAR" % c for c in cols)
    script = ("import { DuckDBInstance } from '@duckdb/node-api';"
              "const c = await (await DuckDBInstance.create(':memory:')).connect();"
              "const out = {};"
              "for (const p of %s) {"
              " const r = await c.runAndReadAll(`SELECT %s FROM read_parquet('${p.replaceAll(\"'\", \"''\")}',"
              " file_row_number = true) ORDER BY file_row_number`);"
              " out[p] = r.getRows(); }"
              "console.log(JSON.stringify(out));" % (json.dumps(paths), sel))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=world.NODE_DIR,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def sort_key(fields):
    """A Python sort key for rows of text values: fields are (index, kind,
    descending, nulls_first), kind 'int' or 'float'."""
    import functools

    def cmp(a, b):
        for i, kind, desc, nulls_first in fields:
            x, y = a[i], b[i]
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return (-1 if x is None else 1) * (1 if nulls_first else -1)
            x, y = (int(x), int(y)) if kind == "int" else (float(x), float(y))
            if x != y:
                return (-1 if x < y else 1) * (-1 if desc else 1)
        return 0
    return functools.cmp_to_key(cmp)


def sorted_run(env, name, opts, files=40, rows_per_file=200, seed=21, order=None):
    """A table, its sort order (order: fields of a sort order, or None),
    a compaction with opts; the rows before, the new data files and their
    manifest entries."""
    mloc = small_table(env, name, files=files, rows_per_file=rows_per_file, seed=seed,
                       with_deletes=True)
    if order is not None:
        _, meta = ow.load(env["catalog"], "cmp", name)
        ow.commit(env["catalog"], "cmp", name, {
            "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
            "updates": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": order}},
                        {"action": "set-default-sort-order", "sort-order-id": -1}]})
    want = rows(env, mloc)
    _, meta0, before = live(env, "cmp", name)
    row = env["pg"].wait_job(run(env, "cmp", name, opts))
    mloc2, meta, after = live(env, "cmp", name)
    assert rows(env, mloc2) == want          # the same rows, as a multiset
    data = {p: f for p, f in after.items() if f["content"] == 0 and p not in before}
    assert data and row["data_files_added"] == len(data), row
    return data, new_entries(env, meta, set(data))


def by_partition(env, data, cols):
    """The new files' rows (file_rows), grouped by partition, each
    partition's files in the order of their names (the helper numbers a
    group's outputs in order)."""
    got = file_rows([env["st"].local_path(p) for p in sorted(data)], cols)
    parts = {}
    for p in sorted(data):
        parts.setdefault(dict(data[p]["partition"])["category"], []).append(
            got[env["st"].local_path(p)])
    return parts


def test_sort_by_the_tables_order(env):
    # the table's order: day ASC NULLS FIRST, id DESC NULLS LAST; several
    # outputs a group (a 16 KB target), sorted across them
    order = [{"transform": "identity", "source-id": 5, "direction": "asc", "null-order": "nulls-first"},
             {"transform": "identity", "source-id": 1, "direction": "desc", "null-order": "nulls-last"}]
    data, entries = sorted_run(env, "sorttab", {"strategy": "sort", "target-file-size-bytes": 16384},
                               order=order)
    parts = by_partition(env, data, ["day - DATE '1970-01-01'", "id"])
    key = sort_key([(0, "int", False, True), (1, "int", True, False)])
    assert any(len(files) > 1 for files in parts.values()), {k: len(v) for k, v in parts.items()}
    for files in parts.values():
        rows_ = [r for f in files for r in f]
        assert rows_ == sorted(rows_, key=key)
    assert {df["sort_order_id"] for df in entries.values()} == {1}

@SCALE
def test_sort_by_an_explicit_order(env):
    # score DESC NULLS FIRST (score is null every 11th row), then id
    # ascending; no table order has these fields: sort_order_id 0
    data, entries = sorted_run(env, "sortexp", {"sort-order": "score DESC NULLS FIRST, `id`",
                                                "target-file-size-bytes": 16384}, seed=22)
    parts = by_partition(env, data, ["score", "id"])
    key = sort_key([(0, "float", True, True), (1, "int", False, True)])
    for files in parts.values():
        rows_ = [r for f in files for r in f]
        assert rows_ == sorted(rows_, key=key)
        assert rows_[0][0] is None               # nulls first
    assert {df["sort_order_id"] for df in entries.values()} == {0}
    # the same order as the table's: its id is stamped
    order = [{"transform": "identity", "source-id": 4, "direction": "asc", "null-order": "nulls-last"}]
    data, entries = sorted_run(env, "sortexp2", {"sort-order": "score ASC NULLS LAST"},
                               seed=23, order=order)
    parts = by_partition(env, data, ["score"])
    for files in parts.values():
        rows_ = [r for f in files for r in f]
        assert rows_ == sorted(rows_, key=sort_key([(0, "float", False, False)]))
        assert rows_[-1][0] is None
    assert {df["sort_order_id"] for df in entries.values()} == {1}


def test_zorder(env):
    data, entries = sorted_run(env, "zorder", {"strategy": "sort",
                                               "sort-order": "zorder(score, id)",
                                               "target-file-size-bytes": 16384}, seed=24)
    parts = by_partition(env, data, ["score", "id"])
    for files in parts.values():
        zs = [zvalue([zkey_double(r[0]), zkey_long(r[1])]) for f in files for r in f]
        assert zs == sorted(zs)
        assert len(set(zs)) > 1
    # z-order matches no table order: Iceberg stamps 0
    assert {df["sort_order_id"] for df in entries.values()} == {0}


def test_bad_sort_orders_are_refused(env):
    small_table(env, "badsort", files=10, rows_per_file=5, seed=25)
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    for opts, says in (
            ({"sort-order": "id DESK"}, "id DESK"),
            ({"sort-order": "id NULLS"}, "id NULLS"),
            ({"sort-order": ""}, "empty"),
            ({"sort-order": "zorder(id"}, "zorder(id"),
            ({"sort-order": "bucket(4, id)"}, "bucket(4, id)"),
            ({"sort-order": "nosuch DESC"}, "nosuch"),
            ({"sort-order": "zorder(amount, id)"}, "amount"),
            ({"strategy": "binpack", "sort-order": "id"}, "id"),
            ({"strategy": "zorder"}, "zorder"),
            ({"strategy": "sort"}, "unsorted")):
        e = env["pg"].query_error("SELECT tms.run_operation(%s, 'cmp', 'badsort', 'compaction',"
                                  " %s::jsonb)", (env["server"], json.dumps(opts)))
        assert e.pgcode == "22023", (opts, e.pgcode, str(e))
        assert says in (e.diag.message_detail or "") + e.diag.message_primary, (opts, str(e))
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


def test_table_order_the_helper_cannot_apply_is_refused(env):
    # the table's default sort order buckets id: refused before a job is
    # recorded, 0A000, the detail naming the column and the transform, a
    # hint to use an engine
    small_table(env, "bucketsort", files=10, rows_per_file=5, seed=27)
    _, meta = ow.load(env["catalog"], "cmp", "bucketsort")
    ow.commit(env["catalog"], "cmp", "bucketsort", {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
            {"transform": "bucket[4]", "source-id": 1, "direction": "asc",
             "null-order": "nulls-first"}]}},
                    {"action": "set-default-sort-order", "sort-order-id": -1}]})
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    e = env["pg"].query_error("SELECT tms.run_operation(%s, 'cmp', 'bucketsort', 'compaction',"
                              " '{\"strategy\": \"sort\"}'::jsonb)", (env["server"],))
    assert e.pgcode == "0A000", (e.pgcode, str(e))
    assert "bucket[4](id)" in (e.diag.message_detail or ""), str(e)
    assert "engine" in (e.diag.message_hint or ""), str(e)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


# ---------------------------------------------------------------------------
# Iceberg's rewrite options, v1 inline manifests, the output spec
# ---------------------------------------------------------------------------

def test_partial_progress_commits_in_batches(env):
    small_table(env, "pp", files=24, rows_per_file=10, seed=21)
    mloc, meta0, _ = live(env, "cmp", "pp")
    want = rows(env, mloc)
    # four groups, at most two commits: ceil(4 / 2) = two groups a commit
    opts = {"partial-progress.enabled": True, "partial-progress.max-commits": 2,
            "min-input-files": 2}
    assert summary_row(plan(env, "cmp", "pp", opts))["commits"] == 2
    assert summary_row(plan(env, "cmp", "pp", {"min-input-files": 2}))["commits"] == 1
    row = env["pg"].wait_job(run(env, "cmp", "pp", opts))
    mloc2, meta, after = live(env, "cmp", "pp")
    chain = replace_chain(meta, meta0)
    assert len(chain) == 2 and all(s["summary"]["operation"] == "replace" and
                                   s["summary"]["changed-partition-count"] == "2"
                                   for s in chain), [s["summary"] for s in chain]
    assert row["data_files_rewritten"] == 24 and row["data_files_added"] == 4
    assert rows(env, mloc2) == want


def groups_at_once(env, jid):
    """How many groups the helper said it rewrote at once in job jid (the
    worker's LOG line at the job's end)."""
    import re
    m = re.search(r"maintenance job %d: compaction of \d+ groups, \d+ given up [^,]*, \d+ failed, "
                  r"up to (\d+) rewritten at once" % jid, env["pg"].log_tail(5000))
    assert m, env["pg"].log_tail(40)
    return int(m.group(1))


def test_groups_rewritten_at_once(env):
    # Iceberg's max-concurrent-file-group-rewrites: up to N groups in the
    # helper at once.  Four groups, all four sent at once: the helper
    # starts the second while the first runs (its done reports the most
    # groups it ran at once); with partial progress the batches still
    # commit in plan order, two groups each
    small_table(env, "conc", files=24, rows_per_file=10, seed=23)
    mloc, meta0, _ = live(env, "cmp", "conc")
    want = rows(env, mloc)
    opts = {"max-concurrent-file-group-rewrites": 4, "partial-progress.enabled": True,
            "partial-progress.max-commits": 2}
    planned = [g["detail"]["partition"] for g in group_rows(plan(env, "cmp", "conc", opts))]
    assert len(planned) == 4
    jid = run(env, "cmp", "conc", opts)
    row = env["pg"].wait_job(jid)
    mloc2, meta, after = live(env, "cmp", "conc")
    chain = replace_chain(meta, meta0)
    assert len(chain) == 2 and all(s["summary"]["operation"] == "replace" and
                                   s["summary"]["changed-partition-count"] == "2"
                                   for s in chain), [s["summary"] for s in chain]
    # the first commit holds the plan's first two groups, whichever ended first
    first = sorted([dict(f["partition"])["category"]] for f in after.values()
                   if f["content"] == 0 and f["snapshot_id"] == chain[1]["snapshot-id"])
    assert row["data_files_rewritten"] == 24 and row["data_files_added"] == 4, row
    assert rows(env, mloc2) == want
    assert 2 <= groups_at_once(env, jid) <= 4
    assert first == sorted(planned[:2]), (first, planned)

    # one at a time when asked
    small_table(env, "conc1", files=24, rows_per_file=10, seed=24)
    mloc, _, _ = live(env, "cmp", "conc1")
    want = rows(env, mloc)
    jid = run(env, "cmp", "conc1", {"max-concurrent-file-group-rewrites": 1})
    row = env["pg"].wait_job(jid)
    assert row["data_files_rewritten"] == 24 and row["data_files_added"] == 4, row
    assert rows(env, live(env, "cmp", "conc1")[0]) == want
    assert groups_at_once(env, jid) == 1


def test_a_failed_group_fails_alone(env):
    # one data file of partition c1 is not Parquet: its group fails in the
    # helper.  With partial progress (a commit per group) the other groups
    # are rewritten and committed and the run succeeds (one failed commit,
    # within partial-progress.max-failed-commits); without it, nothing is
    # committed and the run fails
    def corrupt(name):
        small_table(env, name, files=24, rows_per_file=10, seed=26)
        _, meta, before = live(env, "cmp", name)
        victim = sorted(p for p, f in before.items()
                        if dict(f["partition"])["category"] == "c1")[0]
        env["st"].write(victim, b"not a parquet file" * 20)
        ow.give_to_server(env["file_root"])
        return meta

    def per_category(name):
        out = {}
        for f in live(env, "cmp", name)[2].values():
            if f["content"] == 0:
                c = dict(f["partition"])["category"]
                out[c] = out.get(c, 0) + 1
        return out

    meta0 = corrupt("galone")
    opts = {"partial-progress.enabled": True, "partial-progress.max-commits": 4,
            "max-concurrent-file-group-rewrites": 2}
    row = env["pg"].wait_job(run(env, "cmp", "galone", opts))
    _, meta, _ = live(env, "cmp", "galone")
    assert len(replace_chain(meta, meta0)) == 3
    # the c1 group's files stay; each other partition is one file (or none,
    # when the deletes took every row of it: seed 26's c0)
    cats = per_category("galone")
    assert cats["c1"] == 6 and all(n == 1 for c, n in cats.items() if c != "c1"), cats
    assert row["data_files_rewritten"] == 18 and row["data_files_added"] == len(cats) - 1, row
    assert "of the compaction failed and is left out of its commit" in env["pg"].log_tail(5000)

    meta0 = corrupt("gall")
    row = env["pg"].wait_job(run(env, "cmp", "gall", {"max-concurrent-file-group-rewrites": 2}),
                             states=("failed",))
    assert "the compaction helper failed" in (row["last_error"] or ""), row
    _, meta, _ = live(env, "cmp", "gall")
    assert meta["current-snapshot-id"] == meta0["current-snapshot-id"]
    assert per_category("gall") == {"c0": 6, "c1": 6, "c2": 6, "c3": 6}


_OPTS_TABLE = []


def opts_table(env):
    if not _OPTS_TABLE:
        small_table(env, "opts", files=4, rows_per_file=5, seed=22)
        _OPTS_TABLE.append(True)


@pytest.mark.parametrize("opts,says", [
    ({"partial-progress.max-commits": 0}, "0"),
    ({"partial-progress.max-failed-commits": -1}, "-1"),
    ({"max-concurrent-file-group-rewrites": 0}, "0"),
    ({"partial-progress.enabled": "yes"}, "string"),
    ({"remove-dangling-deletes": 1}, "number"),
    ({"output-spec-id": 9}, "9"),
    ({"min-file-size-bytes": 100, "max-file-size-bytes": 50}, "100"),
    ({"target-file-size-bytes": 4096, "max-file-size-bytes": 1024}, "4096"),
    ({"max-file-size-bytes": 1024}, "1024"),
])
def test_invalid_options_refused_before_a_job(env, opts, says):
    """Refused with 22023, the value named, before a job is recorded."""
    opts_table(env)
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    e = env["pg"].query_error("SELECT tms.run_operation(%s, 'cmp', 'opts', 'compaction',"
                              " %s::jsonb)", (env["server"], json.dumps(opts)))
    assert e.pgcode == "22023", (opts, str(e))
    assert says in (e.diag.message_detail or ""), (opts, str(e), e.diag.message_detail)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


def duck_rows(paths, columns, select=None):
    """The rows of local Parquet files read by DuckDB (not tms), columns by
    name (or a select list), as sorted JSON texts."""
    sql = "SELECT %s FROM read_parquet(%s)" % (
        select or ", ".join('"%s"' % c for c in columns), json.dumps(paths).replace('"', "'"))
    script = ("import { DuckDBInstance } from '@duckdb/node-api';"
              "const db = await DuckDBInstance.create(':memory:');"
              "const c = await db.connect();"
              "const r = await c.runAndReadAll(%s);"
              "console.log(JSON.stringify(r.getRowObjectsJson()));" % json.dumps(sql))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=world.NODE_DIR,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return sorted(json.dumps(x, sort_keys=True) for x in json.loads(r.stdout.strip().splitlines()[-1]))


def local_copy(env, uri, tmp):
    """A local copy of a data file (read through the test world's storage)."""
    path = os.path.join(tmp, "%s-%s" % (uuid.uuid4().hex[:8], os.path.basename(uri)))
    with open(path, "wb") as fh:
        fh.write(env["st"].read(uri))
    return path


def test_v1_inline_manifests(env):
    ns, name = world.REAL_NAMESPACE, "spark_v1_legacy_manifests_field"
    mloc, meta0, before = live(env, ns, name)
    snap0 = ow.snapshot(meta0, meta0["current-snapshot-id"])
    assert meta0["format-version"] == 1 and "manifest-list" not in snap0 and snap0["manifests"]
    schema = meta0.get("schema") or [s for s in meta0["schemas"]
                                     if s["schema-id"] == meta0["current-schema-id"]][0]
    cols = [f["name"] for f in schema["fields"]]
    tmp = tempfile.mkdtemp(prefix="tms-v1-")
    try:
        want = duck_rows([local_copy(env, p, tmp) for p, f in before.items() if f["content"] == 0],
                         cols)
        assert len(want) == 3
        pl = plan(env, ns, name, {"rewrite-all": True})
        assert len(group_rows(pl)) == 2, pl
        row = env["pg"].wait_job(run(env, ns, name, {"rewrite-all": True}))
        mloc2, meta, after = live(env, ns, name)
        snap = ow.snapshot(meta, meta["current-snapshot-id"])
        # the v1 rules: a manifest list now (allowed in v1), no sequence number
        assert meta["format-version"] == 1
        assert snap["manifest-list"] and "manifests" not in snap and "sequence-number" not in snap
        assert snap["summary"]["operation"] == "replace" and snap["parent-snapshot-id"] == snap0["snapshot-id"]
        assert row["data_files_rewritten"] == 2 and row["data_files_added"] == 2, row
        data = [p for p, f in after.items() if f["content"] == 0]
        assert len(data) == 2 and not set(data) & set(before)
        assert all(f["seq"] in (None, 0) for f in after.values())
        got = duck_rows([local_copy(env, p, tmp) for p in data], cols)
        assert got == want
        # (icebird 0.3.1 reads neither the inline list nor v1 entries,
        # which have no sequence numbers: DuckDB is the independent reader)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def append_in_spec(env, ns, name, spec, pfields, files):
    """Append Parquet files written in spec (already the table's default):
    files = [(partition dict, DuckDB query of c_<field id> columns)]."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, ns, name)
    import compact as cp
    import iceberg_avro_schemas as ias
    import avro_codec
    import random
    tmp = tempfile.mkdtemp(prefix="tms-spec-")
    try:
        data_dir = cp.data_location(meta)
        jobs, uris = [], []
        for i, (part, query) in enumerate(files):
            prefix = "spec%d-%05d-%s" % (spec["spec-id"], i, uuid.uuid4())
            jobs.append({"mode": "write", "schema": {"fields": smallfiles.SCHEMA["fields"]},
                         "query": query, "output_files": 1,
                         "output_dir": os.path.join(tmp, "d%d" % i), "file_prefix": prefix,
                         "compression": "zstd", "iceberg_schema": json.dumps(smallfiles.SCHEMA)})
            uris.append("%s/spec%d/%s-00000.parquet" % (data_dir, spec["spec-id"], prefix))
        outs = cp.run_node({"jobs": jobs})["results"]
        entries = []
        for uri, res, (part, _) in zip(uris, outs, files):
            o = res["files"][0]
            with open(o["path"], "rb") as fh:
                st.write(uri, fh.read())
            entries.append(smallfiles._data_file(uri, o, part))
        snap = smallfiles._snapshot(meta, random.Random(17), "append")
        records = ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"]))
        schema = ias.manifest_entry_schema(2, pfields)
        recs = [ow._conform({"status": 1, "snapshot_id": snap["snapshot-id"],
                             "sequence_number": None, "file_sequence_number": None,
                             "data_file": df}, json.loads(schema)) for df in entries]
        path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"), uuid.uuid4())
        hmeta = {"schema": json.dumps(smallfiles.SCHEMA), "schema-id": "0",
                 "partition-spec": json.dumps(spec["fields"]),
                 "partition-spec-id": str(spec["spec-id"]), "format-version": "2",
                 "content": "data"}
        data = avro_codec.write_container(schema, recs, "deflate", hmeta)
        st.write(path, data)
        seq = snap["sequence-number"]
        rec = {"manifest_path": path, "manifest_length": len(data),
               "partition_spec_id": spec["spec-id"], "content": 0, "sequence_number": seq,
               "min_sequence_number": seq, "added_snapshot_id": snap["snapshot-id"],
               "added_files_count": len(entries), "existing_files_count": 0,
               "deleted_files_count": 0,
               "added_rows_count": sum(e["record_count"] for e in entries),
               "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
               "key_metadata": None}
        smallfiles._push(cat, [ns], name, st, meta, snap, [rec] + records)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ow.give_to_server(env["file_root"])


def set_spec(env, ns, name, spec):
    _, meta = ow.load(env["catalog"], ns, name)
    ow.commit(env["catalog"], ns, name, {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-spec", "spec": spec},
                    {"action": "set-default-spec", "spec-id": spec["spec-id"]}]})


def test_output_spec_computes_every_transform(env):
    import datetime
    # spec 0: identity(category) (the small files); spec 1: identity of
    # category, day and ts, each file one value of each
    small_table(env, "xform", files=8, rows_per_file=5, seed=23)
    spec1 = {"spec-id": 1, "fields": [
        {"name": "category", "transform": "identity", "source-id": 2, "field-id": 1001},
        {"name": "day", "transform": "identity", "source-id": 5, "field-id": 1002},
        {"name": "ts", "transform": "identity", "source-id": 6, "field-id": 1003}]}
    set_spec(env, "cmp", "xform", spec1)
    epoch = datetime.date(1970, 1, 1)
    values = [("iceberg", datetime.date(2017, 11, 16), datetime.datetime(2017, 11, 16, 22, 31, 8)),
              ("ibis", datetime.date(2017, 11, 30), datetime.datetime(2017, 11, 16, 22, 59, 0)),
              ("zeta", datetime.date(1969, 12, 31), datetime.datetime(1969, 12, 31, 23, 30, 0)),
              ("eclair", datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 0, 0, 1))]
    files = []
    for i, (cat, d, ts) in enumerate(values * 2):
        micros = int((ts - datetime.datetime(1970, 1, 1)).total_seconds()) * 1000000
        query = ("SELECT x::BIGINT AS c_1, '%s' AS c_2, (x / 100.0)::DECIMAL(10,2) AS c_3,"
                 " (x * 1.5)::DOUBLE AS c_4, DATE '%s' AS c_5,"
                 " make_timestamptz(%d::BIGINT) AS c_6, (x %% 3 = 0) AS c_7"
                 " FROM (SELECT (%d + i)::BIGINT AS x FROM range(5) t(i)) r ORDER BY x"
                 % (cat, d.isoformat(), micros, 500000 + i * 5))
        files.append(({"category": cat, "day": (d - epoch).days, "ts": micros}, query))
    append_in_spec(env, "cmp", "xform", spec1,
                   [("category", "string", 1001), ("day", {"type": "int", "logicalType": "date"}, 1002),
                    ("ts", {"type": "long", "logicalType": "timestamp-micros",
                            "adjust-to-utc": True}, 1003)], files)
    # spec 2, the current one: every transform
    spec2 = {"spec-id": 2, "fields": [
        {"name": "cat_bucket", "transform": "bucket[4]", "source-id": 2, "field-id": 1004},
        {"name": "cat_trunc", "transform": "truncate[1]", "source-id": 2, "field-id": 1005},
        {"name": "cat", "transform": "identity", "source-id": 2, "field-id": 1006},
        {"name": "day_year", "transform": "year", "source-id": 5, "field-id": 1007},
        {"name": "day_month", "transform": "month", "source-id": 5, "field-id": 1008},
        {"name": "ts_day", "transform": "day", "source-id": 6, "field-id": 1009},
        {"name": "ts_hour", "transform": "hour", "source-id": 6, "field-id": 1010}]}
    set_spec(env, "cmp", "xform", spec2)
    mloc, meta0, before = live(env, "cmp", "xform")
    want = rows(env, mloc)
    pl = plan(env, "cmp", "xform", {"rewrite-all": True})
    # the spec-1 files go to spec 2 (their partition fixes every field), the
    # spec-0 files (category only) stay in spec 0
    assert summary_row(pl)["output_spec_id"] == 2 and summary_row(pl)["kept_in_own_spec"] == 8
    assert sorted(g["detail"]["spec_id"] for g in group_rows(pl)) == [0] * 4 + [2] * 4, pl
    env["pg"].wait_job(run(env, "cmp", "xform", {"rewrite-all": True}))
    mloc2, meta, after = live(env, "cmp", "xform")
    assert rows(env, mloc2) == want
    new = {p: f for p, f in after.items() if f["content"] == 0 and p not in before}
    spec2_files = {p: f for p, f in new.items()
                   if {k for k, _ in f["partition"]} == {x["name"] for x in spec2["fields"]}}
    assert len(spec2_files) == 4, new
    tmp = tempfile.mkdtemp(prefix="tms-xform-")
    try:
        for p, f in spec2_files.items():
            part = dict(f["partition"])
            got = [json.loads(r) for r in duck_rows(
                [local_copy(env, p, tmp)], None,
                select="category, strftime(day, '%Y-%m-%d') AS day, epoch_us(ts) AS us")]
            assert len(got) == 10
            for r in got:
                # the partition of every row, computed here
                cat = r["category"]
                d = datetime.date.fromisoformat(r["day"])
                micros = int(r["us"])
                exp = {"cat_bucket": iceberg_bucket(cat.encode(), 4), "cat_trunc": cat[:1],
                       "cat": cat, "day_year": d.year - 1970,
                       "day_month": (d.year - 1970) * 12 + d.month - 1,
                       "ts_day": micros // 86400000000, "ts_hour": micros // 3600000000}
                assert part == exp, (p, part, exp, r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_two_specs_in_one_output_partition(env):
    # spec 0: identity(category), categories c0..c3; spec 1, the current
    # one: truncate[1](category), files of "c9" (partition "c") and "d1"
    # (partition "d").  Every spec-0 file falls into output partition "c":
    # one group holds them with the spec-1 files of "c", and the "d" files
    # are a group of their own (a group never spans output partitions)
    small_table(env, "twospec", files=8, rows_per_file=5, seed=25)
    spec1 = {"spec-id": 1, "fields": [
        {"name": "cat_trunc", "transform": "truncate[1]", "source-id": 2, "field-id": 1001}]}
    set_spec(env, "cmp", "twospec", spec1)
    files = []
    for i, cat in enumerate(["c9", "c9", "d1", "d1"]):
        query = ("SELECT x::BIGINT AS c_1, '%s' AS c_2, (x / 100.0)::DECIMAL(10,2) AS c_3,"
                 " (x * 1.5)::DOUBLE AS c_4, DATE '2026-01-02' AS c_5,"
                 " make_timestamptz(0::BIGINT) AS c_6, (x %% 3 = 0) AS c_7"
                 " FROM (SELECT (%d + i)::BIGINT AS x FROM range(5) t(i)) r ORDER BY x"
                 % (cat, 700000 + i * 5))
        files.append(({"cat_trunc": cat[:1]}, query))
    append_in_spec(env, "cmp", "twospec", spec1, [("cat_trunc", "string", 1001)], files)
    mloc, meta0, before = live(env, "cmp", "twospec")
    want = rows(env, mloc)
    opts = {"rewrite-all": True, "max-concurrent-file-group-rewrites": 2}
    pl = plan(env, "cmp", "twospec", opts)
    assert summary_row(pl)["kept_in_own_spec"] == 0, summary_row(pl)
    groups = sorted((g["detail"]["spec_id"], g["detail"]["partition"], g["detail"]["files"])
                    for g in group_rows(pl))
    assert groups == [(1, ["c"], 10), (1, ["d"], 2)], pl
    env["pg"].wait_job(run(env, "cmp", "twospec", opts))
    mloc2, meta, after = live(env, "cmp", "twospec")
    assert rows(env, mloc2) == want
    new = {p: f for p, f in after.items() if f["content"] == 0}
    assert sorted(f["partition"] for f in new.values()) == \
        [(("cat_trunc", "c"),), (("cat_trunc", "d"),)], new
    tmp = tempfile.mkdtemp(prefix="tms-twospec-")
    try:
        for p, f in new.items():
            got = [json.loads(r)["category"] for r in duck_rows(
                [local_copy(env, p, tmp)], None, select="category")]
            # every row of a file in its partition
            assert got and {c[:1] for c in got} == {dict(f["partition"])["cat_trunc"]}, (p, got)
            assert len(got) == (40 + 10 if dict(f["partition"])["cat_trunc"] == "c" else 10)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_explicit_output_spec_refuses_a_file_it_cannot_carry(env):
    # spec 0: identity(category); spec 1, the current one: bucket[4](id),
    # which a file of spec 0 (many ids) does not fix: its rows may belong
    # to several buckets, which the helper does not split
    small_table(env, "xcarry", files=6, rows_per_file=5, seed=29)
    set_spec(env, "cmp", "xcarry", {"spec-id": 1, "fields": [
        {"name": "id_bucket", "transform": "bucket[4]", "source-id": 1, "field-id": 1001}]})
    mloc, meta0, before = live(env, "cmp", "xcarry")
    # without output-spec-id the files stay in their own spec
    pl = plan(env, "cmp", "xcarry", {"rewrite-all": True})
    assert summary_row(pl)["kept_in_own_spec"] == 6, pl
    # naming it: refused, the file and its partition named, before anything runs
    opts = {"rewrite-all": True, "output-spec-id": 1}
    e = env["pg"].query_error(
        "SELECT * FROM tms.plan_operation(%s, 'cmp', 'xcarry', 'compaction', %s::jsonb)",
        (env["server"], json.dumps(opts)))
    assert e.pgcode == "55000", (e.pgcode, str(e))
    detail = e.diag.message_detail or ""
    assert "a data file of partition spec 0 cannot be rewritten into output-spec-id 1" in detail
    assert 'has partition ["c' in detail and "in spec 0" in detail, detail
    assert any(p in detail for p in before), detail
    row = env["pg"].wait_job(run(env, "cmp", "xcarry", opts), states=("failed",))
    assert "cannot be rewritten into output-spec-id 1" in row["last_error"], row
    mloc2, meta, after = live(env, "cmp", "xcarry")
    assert meta["current-snapshot-id"] == meta0["current-snapshot-id"] and after == before


# ---------------------------------------------------------------------------
# the snapshot-drift gate, per operation
# ---------------------------------------------------------------------------

def drift_job(env, name, operation, condition, options=None):
    """A policy's job over cmp.<name>, evaluated at the table's snapshot S0,
    and an append committed (S1) after that evaluation and before the job
    can run (the evaluation's transaction is still open).  Returns the
    job's id, S0, S1 and the appended file."""
    pol = "drift_%s" % name
    q(env, "SELECT tms.create_object_group(%s, %s, namespace_pattern => 'cmp',"
           " table_pattern => %s)", (pol, env["server"], name))
    q(env, "SELECT tms.create_policy(%s, %s, active => false)", (pol, pol))
    q(env, "SELECT tms.add_rule(%s, %s, 'local', '{\"commits-added\": 1}', %s, 'catch-up',"
           " %s::jsonb, min_interval => '0')",
      (pol, operation, condition, json.dumps(options or {})))
    conn = env["pg"].connect(autocommit=False)
    try:
        env["pg"].query("SELECT tms.set_policy_active(%s, true)", (pol,), conn=conn)
        rows = env["pg"].query("SELECT decision, job_id FROM tms.evaluate_now(%s, true)",
                               (pol,), conn=conn)
        assert [r[0] for r in rows] == ["submitted"], rows
        jid = rows[0][1]
        _, meta, _ = live(env, "cmp", name)
        s0 = meta["current-snapshot-id"]
        body, dst = concurrent_append(env, "cmp", name, meta, "c0")
        ow.give_to_server(env["file_root"])
        ow.commit(env["catalog"], "cmp", name, body)
        conn.commit()
    finally:
        conn.close()
    s1 = ow.load(env["catalog"], "cmp", name)[1]["current-snapshot-id"]
    assert s1 != s0
    assert q(env, "SELECT before_snapshot_id FROM tms.table_maintenance_job WHERE id = %s",
             (jid,))[0][0] in (s0, s1)
    return jid, s0, s1, dst


def drift_row(env, jid):
    return q(env, "SELECT state, reason, message, before_snapshot_id, after_snapshot_id"
                  " FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0]


def test_drift_manifest_rewrite_still_runs(env):
    small_table(env, "drifta", files=12, rows_per_file=10, seed=31)
    jid, s0, s1, _ = drift_job(env, "drifta", "manifest-rewrite", "true")
    env["pg"].wait_job(jid)
    state, reason, message, before, after = drift_row(env, jid)
    assert state == "succeeded" and reason is None
    assert before == s1, (before, s0, s1)
    assert message == ("snapshot drift: the condition was evaluated at snapshot %d and the"
                       " table's data changed since; manifest-rewrite does not depend on that"
                       " data, so it ran on snapshot %d" % (s0, s1)), message


def test_drift_snapshot_expiry_runs_on_the_new_snapshot(env):
    small_table(env, "driftd", files=4, rows_per_file=10, seed=34)
    jid, s0, s1, dst = drift_job(env, "driftd", "snapshot-expiry", "true",
                                 {"older-than": "0 seconds", "retain-last": 1})
    env["pg"].wait_job(jid)
    state, reason, message, before, after = drift_row(env, jid)
    assert state == "succeeded" and reason is None
    assert before == s1, (before, s0, s1)
    assert message.startswith("snapshot drift: the condition was evaluated at snapshot %d"
                              % s0) and "snapshot-expiry does not depend" in message, message
    # expired up to the append's snapshot, which is kept with its file
    assert q(env, "SELECT snapshots_expired FROM tms.maintenance_jobs WHERE id = %s",
             (jid,))[0][0] >= 1
    _, meta, files = live(env, "cmp", "driftd")
    assert [x["snapshot-id"] for x in meta["snapshots"]] == [s1]
    assert dst in files


def test_drift_compaction_replanned_while_its_condition_holds(env):
    small_table(env, "driftb", files=24, rows_per_file=10, seed=32)
    jid, s0, s1, dst = drift_job(env, "driftb", "compaction", "dataFiles > 1")
    row = env["pg"].wait_job(jid)
    state, reason, message, before, after = drift_row(env, jid)
    assert before == s1 and after != s1, (before, after, s0, s1)
    assert "it still holds at snapshot %d, where compaction was planned again" % s1 in message, message
    # planned on S1: the file S1 appended was compacted with the others
    _, meta, files = live(env, "cmp", "driftb")
    assert dst not in files
    assert row["data_files_rewritten"] > 0


def test_drift_compaction_skipped_when_its_condition_no_longer_holds(env):
    small_table(env, "driftc", files=24, rows_per_file=10, seed=33)
    jid, s0, s1, dst = drift_job(env, "driftc", "compaction", "dataFiles <= 24")
    env["pg"].wait_job(jid, states=("skipped",))
    state, reason, message, before, after = drift_row(env, jid)
    assert reason.startswith("snapshot drift: the condition no longer holds at snapshot %d"
                             " (it held at snapshot %d): " % (s1, s0)), reason
    assert "25" in reason, reason          # the explanation: dataFiles is 25 now
    _, meta, files = live(env, "cmp", "driftc")
    assert meta["current-snapshot-id"] == s1 and dst in files
