"""
test_posdel_local.py -- position-delete-rewrite on engine 'local': tms plans
Iceberg's RewritePositionDeleteFiles, its helper tms_compactor (DuckDB)
merges each group's small position delete files into sorted ones without
the dangling deletes, and the worker commits 'replace' snapshots.

Every expectation is checked independently of tms: the rows through icebird
(the table read by another implementation, deletes applied), the live files
through the Python reader of test/opsworld.py, the new delete files' rows
through DuckDB reading them by Iceberg field id (test/node/compact.mjs):

  - a table whose partitions hold many small position delete files, one
    of them pointing only at a data file that is gone (proven dangling by
    its referenced_data_file) and one with some dangling deletes: the rows
    read are identical before and after, each partition ends with one
    delete file sorted by (file_path, pos) holding exactly the deletes that
    still point at a live data file, with the new snapshot's sequence
    number and the metrics Iceberg's PositionDeleteWriter keeps; the job
    counts the files removed and added and says how many dangling deletes
    it dropped;
  - the Spark fixture's delete file points at a data file a later commit
    replaced (its sequence numbers prove it dangling): it is removed and
    nothing is written;
  - a group written as several files keeps them consecutive in
    (file_path, pos) order, and a file pointing at one data file keeps its
    bounds;
  - tms.plan_operation shows the groups, files, bytes and dangling files;
    min-input-files, rewrite-all, max-file-group-size-bytes, where and
    partial progress are honoured;
  - a commit landing during the rewrite that removes a rewritten delete
    file, or a data file the deletes point at, is not overwritten: the
    attempt gives up, the retry plans on the new table;
  - a group the helper fails (a delete file that is no Parquet) fails the
    job; nothing is committed and what the helper wrote is deleted;
  - a format v3 table is planned (its deletes become deletion vectors,
    test_v3_tables.py); unknown options, bad sizes and a bad filter are
    refused before a job is recorded.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_posdel_local.py
"""

import json
import os
import random
import shutil
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import compact as compact_mod  # noqa: E402
import iceberg_avro_schemas as ias  # noqa: E402
from pgcluster import FAST_WORKERS  # noqa: E402

PATH_ID, POS_ID = 2147483546, 2147483545
OP = "position-delete-rewrite"

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "pdcat"
    w = tms_world("pd", settings=dict(FAST_WORKERS), catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://hyperparam-iceberg/, s3a://hyperparam-iceberg/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, name, options=None, ns="pd"):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb)",
             (env["server"], ns, name, OP, json.dumps(options or {})))[0][0]


def plan(env, name, options=None, ns="pd"):
    return [dict(action=a, target=t, detail=d) for a, t, d in q(
        env, "SELECT action, target, detail FROM tms.plan_operation(%s, %s, %s, %s,"
             " %s::jsonb)", (env["server"], ns, name, OP, json.dumps(options or {})))]


def groups(p):
    """The rewrite-group rows, each with its partition's category."""
    out = [dict(r["detail"]) for r in p if r["action"] == "rewrite-group"]
    for g in out:
        g["category"] = g["partition"][0] if g["partition"] else None
    return out


def summary(p):
    return [r for r in p if r["action"] == "summary"][0]["detail"]


def rows(env, mloc):
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                     dump_rows=True)
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


def live(env, name):
    mloc, meta = ow.load(env["catalog"], "pd", name)
    return mloc, meta, ow.live_files(env["st"], meta)


def cat_of(f):
    return dict(f["partition"])["category"]


def delete_rows(env, paths):
    """The (file_path, pos) rows of position delete files, in file order,
    read by Iceberg field id by DuckDB: {path: [(file_path, pos)]}."""
    res = compact_mod.run_node({"mode": "read", "files": [
        {"path": env["st"].local_path(p), "fields": smallfiles.POS_FIELDS} for p in paths]})
    return {p: [(r[1], int(r[2])) for r in f["rows"]] for p, f in zip(paths, res["files"])}


def add_delete_files(env, name, files, seed):
    """Commit one 'delete' snapshot adding position delete files: files is
    [(category, [(data file path, pos)], referenced_data_file or None)];
    each is written sorted by (file_path, pos) by DuckDB.  Returns their
    paths."""
    st = env["st"]
    rnd = random.Random(seed)
    _, meta = ow.load(env["catalog"], "pd", name)
    data_dir = compact_mod.data_location(meta)
    tmp = tempfile.mkdtemp(prefix="tms-posdel-test-")
    try:
        jobs = []
        for n, (cat, entries, _) in enumerate(files):
            vals = ", ".join("('%s', %d::BIGINT)" % (p.replace("'", "''"), pos)
                             for p, pos in entries)
            jobs.append({"mode": "write", "schema": {"fields": smallfiles.POS_FIELDS},
                         "query": "SELECT * FROM (VALUES %s) v(c_%d, c_%d) ORDER BY 1, 2"
                                  % (vals, PATH_ID, POS_ID),
                         "output_files": 1, "output_dir": os.path.join(tmp, "d%d" % n),
                         "file_prefix": "pos-%s" % uuid.UUID(int=rnd.getrandbits(128)),
                         "compression": "zstd"})
        outs = compact_mod.run_node({"jobs": jobs})["results"]
        entries, paths = [], []
        for (cat, _, ref), res in zip(files, outs):
            o = res["files"][0]
            uri = "%s/category=%s/%s" % (data_dir, cat, os.path.basename(o["path"]))
            with open(o["path"], "rb") as fh:
                st.write(uri, fh.read())
            df = smallfiles._data_file(uri, o, {"category": cat}, content=1,
                                       schema={"fields": smallfiles.POS_FIELDS}, truncate=None)
            df["referenced_data_file"] = ref
            entries.append(df)
            paths.append(uri)
        snap = smallfiles._snapshot(meta, rnd, "delete")
        records = ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"]))
        rec = smallfiles._manifest(st, meta, snap, True, entries, 1)
        ow._write_list(st, meta, snap, json.loads(ias.manifest_list_schema(2)),
                       {"format-version": "2"}, [rec] + records)
        body = ow._commit_body(meta, snap)
        ow.commit(env["catalog"], "pd", name, body)
        ow.give_to_server(env["file_root"])
        return paths, rec["manifest_path"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_table(env, name, seed):
    """A partitioned table (c0..c3) of 40 data files of 20 rows, Spark-like
    position deletes (one file a partition) and an equality delete, then
    five more small position delete files a partition (each deleting two
    rows of one data file), one in c2 whose every delete points at a data
    file that never was live (its referenced_data_file says so), and one in
    c3 with two live and two dangling deletes.  Returns (deletes added, the
    dangling deletes among them)."""
    smallfiles.make_table(env["catalog"], env["st"], "pd", name, files=40, rows_per_file=20,
                          with_deletes=True, seed=seed)
    ow.give_to_server(env["file_root"])
    _, meta, before = live(env, name)
    data = {}
    for p, f in sorted(before.items()):
        if f["content"] == 0:
            data.setdefault(cat_of(f), []).append(p)
    files = []
    for cat in sorted(data):
        for k in range(5):
            files.append((cat, [(data[cat][k + 1], 5), (data[cat][k + 1], 9)], None))
    gone = "%s/category=c2/gone-%s-00000.parquet" % (compact_mod.data_location(meta), name)
    files.append(("c2", [(gone, 0), (gone, 1), (gone, 2)], gone))
    gone3 = "%s/category=c3/gone-%s-00000.parquet" % (compact_mod.data_location(meta), name)
    files.append(("c3", [(data["c3"][0], 11), (data["c3"][0], 12), (gone3, 3), (gone3, 4)],
                  None))
    paths, manifest = add_delete_files(env, name, files, seed)
    return paths, manifest, 5


def test_merges_small_delete_files_and_drops_dangling(env):
    paths, _, ndangling = make_table(env, "merge", seed=21)
    mloc, meta0, before = live(env, "merge")
    want_rows = rows(env, mloc)
    old_pos = {p: f for p, f in before.items() if f["content"] == 1}
    live_data = {p for p, f in before.items() if f["content"] == 0}
    # the deletes that still point at a live data file, by partition
    want = {}
    for p, entries in delete_rows(env, sorted(old_pos)).items():
        want.setdefault(cat_of(old_pos[p]), []).extend(e for e in entries if e[0] in live_data)

    pl = plan(env, "merge")
    gs = groups(pl)
    # one group a partition: 6 files (7 in c2 and c3), all of the partition's
    assert sorted((g["category"], g["files"]) for g in gs) == \
        [("c0", 6), ("c1", 6), ("c2", 7), ("c3", 7)], gs
    assert [g["dangling_delete_files"] for g in gs] == [0, 0, 1, 0]
    assert "dangling" in gs[2]["reasons"] and "enough-input-files" in gs[0]["reasons"]
    s = summary(pl)
    assert s["groups"] == 4 and s["files_rewritten"] == 26 and s["dangling_delete_files"] == 1
    assert s["bytes_rewritten"] == sum(f["size"] for f in old_pos.values())
    assert s["target_file_size_bytes"] == 64 * 1024 * 1024
    assert sorted(r["target"] for r in pl if r["action"] == "rewrite-delete-file") == sorted(old_pos)

    row = env["pg"].wait_job(run(env, "merge"))
    assert row["delete_files_rewritten"] == 26 and row["delete_files_added"] == 4, row
    assert row["bytes_rewritten"] == sum(f["size"] for f in old_pos.values()), row
    assert row["data_files_rewritten"] == 0
    assert row["message"] == "%d dangling position deletes dropped" % ndangling, row

    mloc2, meta2, after = live(env, "merge")
    assert rows(env, mloc2) == want_rows
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert snap["summary"]["operation"] == "replace"
    assert snap["parent-snapshot-id"] == meta0["current-snapshot-id"]
    assert int(snap["summary"]["removed-position-delete-files"]) == 26
    assert int(snap["summary"]["added-position-delete-files"]) == 4
    assert int(snap["summary"]["added-position-deletes"]) == sum(len(v) for v in want.values())
    assert "added-data-files" not in snap["summary"]
    # the data files and the equality delete are untouched
    assert {p for p, f in after.items() if f["content"] != 1} == \
        {p for p, f in before.items() if f["content"] != 1}
    new_pos = {p: f for p, f in after.items() if f["content"] == 1}
    assert not set(new_pos) & set(old_pos)
    assert sorted(cat_of(f) for f in new_pos.values()) == ["c0", "c1", "c2", "c3"]
    got = delete_rows(env, sorted(new_pos))
    for p, f in new_pos.items():
        # sorted by (file_path, pos), exactly the live deletes of its partition
        assert got[p] == sorted(got[p]) and sorted(got[p]) == sorted(want[cat_of(f)]), p
        # the new snapshot's sequence number, as Iceberg's RewriteFiles gives it
        assert f["seq"] == snap["sequence-number"] and f["file_seq"] == snap["sequence-number"]
        assert f["records"] == len(want[cat_of(f)])
    # metrics as Iceberg's PositionDeleteWriter keeps them: no counts for
    # file_path and pos, no bounds when a file points at several data files
    for rec in ow.manifest_records(env["st"], snap):
        for e in ow.manifest_entries(env["st"], rec["manifest_path"]):
            df = e["data_file"]
            if e["status"] == 1 and df["file_path"] in new_pos:
                assert df["content"] == 1 and df["file_format"] == "PARQUET"
                for k in ("value_counts", "null_value_counts", "column_sizes"):
                    assert not [x for x in (df.get(k) or []) if x["key"] in (PATH_ID, POS_ID)]
                assert not df.get("lower_bounds") and not df.get("upper_bounds")
                assert df.get("sort_order_id") is None
    # the old files are kept for older snapshots (snapshot expiry removes them)
    assert all(os.path.exists(env["st"].local_path(p)) for p in old_pos)


def test_spark_delete_file_of_a_replaced_data_file(env):
    """The Spark fixture's position delete file (sequence number 2) points
    at a data file a copy-on-write commit (3) replaced: every delete of it
    is dangling, proven by the sequence numbers alone; its group removes it
    and writes nothing."""
    ns, name = world.REAL_NAMESPACE, "spark_v2_mor_posdeletes"
    mloc, meta0 = ow.load(env["catalog"], ns, name)
    before = ow.live_files(env["st"], meta0)
    want = rows(env, mloc)
    pl = plan(env, name, ns=ns)
    gs = groups(pl)
    assert len(gs) == 1 and gs[0]["reasons"] == ["dangling"] and gs[0]["data_files_kept"] == 0
    assert summary(pl)["dangling_delete_files"] == 1
    row = env["pg"].wait_job(run(env, name, ns=ns))
    assert row["delete_files_rewritten"] == 1 and row["delete_files_added"] == 0, row
    mloc2, meta2 = ow.load(env["catalog"], ns, name)
    after = ow.live_files(env["st"], meta2)
    assert rows(env, mloc2) == want
    assert not [f for f in after.values() if f["content"] == 1]
    assert {p for p, f in after.items() if f["content"] == 0} == \
        {p for p, f in before.items() if f["content"] == 0}
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert snap["summary"]["operation"] == "replace"
    assert snap["summary"]["removed-position-delete-files"] == "1"
    assert "added-position-delete-files" not in snap["summary"]
    # the manifest list holds no delete manifest with a live entry
    for rec in ow.manifest_records(env["st"], snap):
        if rec["content"] == 1:
            assert rec["added_data_files_count"] == 0 and rec["existing_data_files_count"] == 0


def test_plan_options(env):
    make_table(env, "opts", seed=22)
    _, _, before = live(env, "opts")
    # min-input-files above every partition's count: only c2, for its dangling file
    gs = groups(plan(env, "opts", {"min-input-files": 8}))
    assert [(g["category"], g["reasons"]) for g in gs] == [("c2", ["dangling"])]
    # rewrite-all: every partition, whatever the counts
    gs = groups(plan(env, "opts", {"rewrite-all": True, "min-input-files": 100}))
    assert len(gs) == 4 and all("rewrite-all" in g["reasons"] for g in gs)
    # where: one partition
    p = plan(env, "opts", {"where": "category = 'c1'"})
    assert [g["category"] for g in groups(p)] == ["c1"]
    assert summary(p)["filtered_out"] == sum(
        1 for f in before.values() if f["content"] == 1 and cat_of(f) != "c1")
    # max-file-group-size-bytes: groups of at most that many bytes
    sizes = sorted(f["size"] for f in before.values() if f["content"] == 1)
    cap = sizes[-1] * 2
    gs = groups(plan(env, "opts", {"max-file-group-size-bytes": cap, "rewrite-all": True}))
    assert len(gs) > 4 and all(g["bytes"] <= cap or g["files"] == 1 for g in gs), gs
    # sizes: every file inside [min, max] and too few files: nothing to do
    p = plan(env, "opts", {"target-file-size-bytes": sizes[0] + 1, "min-file-size-bytes": 0,
                           "max-file-size-bytes": 10 ** 9, "min-input-files": 100})
    assert [g["category"] for g in groups(p)] == ["c2"]
    # partial progress: a commit a group
    opts = {"partial-progress.enabled": True, "partial-progress.max-commits": 4}
    assert summary(plan(env, "opts", opts))["commits"] == 4
    mloc, meta0, _ = live(env, "opts")
    want_rows = rows(env, mloc)
    env["pg"].wait_job(run(env, "opts", opts))
    mloc2, meta2, after = live(env, "opts")
    chain, sid = [], meta2["current-snapshot-id"]
    while sid != meta0["current-snapshot-id"]:
        s = ow.snapshot(meta2, sid)
        chain.append(s["summary"]["operation"])
        sid = s["parent-snapshot-id"]
    assert chain == ["replace"] * 4
    assert rows(env, mloc2) == want_rows
    assert sum(1 for f in after.values() if f["content"] == 1) == 4


def test_several_outputs_stay_sorted(env):
    """A target far below a group's bytes: the group is written as several
    files, consecutive in (file_path, pos) order; a file that points at one
    data file keeps its file_path and pos bounds, as Iceberg's
    PositionDeleteWriter does."""
    make_table(env, "split", seed=26)
    mloc, _, before = live(env, "split")
    want_rows = rows(env, mloc)
    live_data = {p for p, f in before.items() if f["content"] == 0}
    old_pos = {p: f for p, f in before.items() if f["content"] == 1}
    opts = {"target-file-size-bytes": 3000, "min-file-size-bytes": 2999,
            "max-file-size-bytes": 1000000, "rewrite-all": True}
    gs = groups(plan(env, "split", opts))
    assert len(gs) == 4 and all(g["output_files"] > 1 for g in gs), gs
    env["pg"].wait_job(run(env, "split", opts))
    mloc2, meta2, after = live(env, "split")
    assert rows(env, mloc2) == want_rows
    new_pos = {p: f for p, f in after.items() if f["content"] == 1}
    got = delete_rows(env, sorted(new_pos))
    want = {}
    for p, entries in delete_rows(env, sorted(old_pos)).items():
        want.setdefault(cat_of(old_pos[p]), []).extend(e for e in entries if e[0] in live_data)
    for cat in ("c0", "c1", "c2", "c3"):
        files = sorted(p for p, f in new_pos.items() if cat_of(f) == cat)
        concat = [e for p in files for e in got[p]]
        assert len(files) > 1 and concat == sorted(want[cat]), cat
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    single = 0
    for rec in ow.manifest_records(env["st"], snap):
        for e in ow.manifest_entries(env["st"], rec["manifest_path"]):
            df = e["data_file"]
            if e["status"] != 1 or df["file_path"] not in new_pos:
                continue
            paths = {x[0] for x in got[df["file_path"]]}
            lower = {x["key"]: x["value"] for x in df.get("lower_bounds") or []}
            upper = {x["key"]: x["value"] for x in df.get("upper_bounds") or []}
            if len(paths) == 1:
                single += 1
                path = paths.pop().encode()
                poss = sorted(x[1] for x in got[df["file_path"]])
                assert lower[PATH_ID] == path and upper[PATH_ID] == path
                assert lower[POS_ID] == poss[0].to_bytes(8, "little", signed=True)
                assert upper[POS_ID] == poss[-1].to_bytes(8, "little", signed=True)
            else:
                assert PATH_ID not in lower and POS_ID not in upper
    assert single > 0


def test_failed_group_leaves_the_table_and_storage_unchanged(env):
    """A delete file that is no Parquet fails its group in the helper: the
    job fails with the helper's error, nothing is committed, and the files
    the helper wrote for the groups before it are deleted."""
    paths, _, _ = make_table(env, "broken", seed=27)
    mloc0, meta0, before = live(env, "broken")
    victim = sorted(p for p in paths if "/category=c2/" in p)[0]
    size = len(env["st"].read(victim))
    env["st"].write(victim, b"not a parquet file".ljust(size, b"."))
    data_dir = env["st"].local_path(compact_mod.data_location(meta0))
    existing = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs}
    env["pg"].psql("ALTER SYSTEM SET tms.maintenance_max_attempts = 1")
    env["pg"].reload_conf()
    try:
        row = env["pg"].wait_job(run(env, "broken"), ("failed",))
    finally:
        env["pg"].psql("ALTER SYSTEM RESET tms.maintenance_max_attempts")
        env["pg"].reload_conf()
    assert "compaction helper failed" in row["last_error"], row
    mloc1, _, after = live(env, "broken")
    assert mloc1 == mloc0 and set(after) == set(before)
    left = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs} - existing
    assert not left, left


def posts(env, name):
    return [(r["status"], r["fault"]) for r in
            env["catalog"].requests(r"/tables/%s$" % name)["requests"] if r["method"] == "POST"]


def test_concurrent_removal_of_a_rewritten_delete_file(env):
    paths, manifest, _ = make_table(env, "cdel", seed=23)
    _, meta, _ = live(env, "cdel")
    # a concurrent commit removes the small delete files added last
    body, _ = ow.delete_manifests_commit(env["st"], meta, [manifest], seed=3)
    ow.give_to_server(env["file_root"])
    env["catalog"].reset_requests()
    env["catalog"].fault(r"/tables/cdel$", action="interpose", method="POST", commits=[body])
    row = env["pg"].wait_job(run(env, "cdel"))
    log = posts(env, "cdel")
    assert log[:2] == [(200, "interposed"), (409, "interpose")], log
    # the first attempt gave up; the retry planned on the table as it is now
    assert row["attempts"] == 2, row
    mloc2, meta2, after = live(env, "cdel")
    # the concurrent removal stands: none of its files came back
    assert not set(paths) & set(after)
    interposed = [s for s in meta2["snapshots"] if s["summary"]["operation"] == "delete"
                  and s["snapshot-id"] not in {x["snapshot-id"] for x in meta["snapshots"]}]
    assert len(interposed) == 1, interposed


def test_concurrent_removal_of_a_data_file_pointed_at(env):
    make_table(env, "cdata", seed=24)
    mloc0, meta, before = live(env, "cdata")
    # a concurrent commit removes a data manifest (its data files' rows go)
    data_manifests = sorted({f["manifest"] for f in before.values() if f["content"] == 0})
    victim = data_manifests[0]
    gone = {p for p, f in before.items() if f["manifest"] == victim}
    body, _ = ow.delete_manifests_commit(env["st"], meta, [victim], seed=4)
    ow.give_to_server(env["file_root"])
    env["catalog"].fault(r"/tables/cdata$", action="interpose", method="POST", commits=[body])
    row = env["pg"].wait_job(run(env, "cdata"))
    assert row["attempts"] == 2, row
    mloc2, meta2, after = live(env, "cdata")
    assert not gone & set(after)
    # the rows: those of the table after the concurrent commit alone
    interposed = [s for s in meta2["snapshots"] if s["summary"]["operation"] == "delete"
                  and s["snapshot-id"] not in {x["snapshot-id"] for x in meta["snapshots"]}]
    assert len(interposed) == 1
    new_pos = sorted(p for p, f in after.items() if f["content"] == 1
                     and p not in before)
    for p, entries in delete_rows(env, new_pos).items():
        assert not {e[0] for e in entries} & gone, p
    live_data = {p for p, f in after.items() if f["content"] == 0}
    assert live_data == {p for p, f in before.items() if f["content"] == 0} - gone


def test_format_v3_is_planned(env):
    # format v3 is no longer refused: its position deletes become deletion
    # vectors (test_v3_tables.py rewrites them); a v3 table without a
    # snapshot plans nothing
    env["catalog"].create_namespace("pd")
    env["catalog"].request("POST", "namespaces/pd/tables", {
        "name": "v3", "schema": smallfiles.SCHEMA,
        "properties": {"format-version": "3"}})
    rows = q(env, "SELECT action, detail FROM tms.plan_operation(%s, 'pd', 'v3', %s, '{}')",
             (env["server"], OP))
    assert [a for a, _ in rows] == ["summary"], rows
    detail = rows[0][1] if isinstance(rows[0][1], dict) else json.loads(rows[0][1])
    assert detail["groups"] == 0


def test_refused_before_a_job(env):
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    make_table(env, "bad", seed=25)
    for opts, code, says in [
            ({"strategy": "sort"}, "22023", "position-delete-rewrite"),
            ({"delete-file-threshold": 1}, "22023", "position-delete-rewrite"),
            ({"min-file-size-bytes": 100, "max-file-size-bytes": 10}, "22023", "min"),
            ({"target-file-size-bytes": 1}, "22023", "min-file-size-bytes"),
            ({"where": "nope = 1"}, "22023", "nope"),
            ({"min-input-files": 0}, "22023", "min-input-files")]:
        e = env["pg"].query_error("SELECT tms.run_operation(%s, 'pd', 'bad', %s, %s::jsonb)",
                                  (env["server"], OP, json.dumps(opts)))
        assert e.pgcode == code, (opts, str(e))
        text = " ".join(x or "" for x in (str(e), e.diag.message_detail, e.diag.message_hint))
        assert says in text, (opts, text)
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n
