"""
test_v3_tables.py -- Iceberg format v3 tables (row lineage, deletion
vectors) under tms's local maintenance, checked independently of tms by the
v3 test world (test/v3world.py: its own writer of v3 metadata, Parquet by
DuckDB and Puffin deletion vectors, and its reference reader).

  - the world itself: the reference reader's rows of the written table are
    the writer's model (deletion vectors applied, _row_id inherited as
    first_row_id + position or kept from the file, the sequence number
    inherited or kept), and the table keeps the spec's row lineage rules;
    v2 position delete files kept by a v3 table are applied too;
  - manifest rewrite on v3 (https://iceberg.apache.org/spec/#row-lineage):
    the rows with _row_id and _last_updated_sequence_number are identical
    afterwards; every data file keeps its first_row_id (an inherited one
    written out); new data manifests carry the snapshot's first-row-id,
    delete manifests none; the snapshot has first-row-id = the table's
    next-row-id and added-rows 0, next-row-id does not move; deletion
    vector entries keep referenced_data_file, content_offset and
    content_size_in_bytes;
  - a v3 table upgraded from v2 whose files have no row ids yet: the
    manifest rewrite is refused before anything is written (unsupported,
    0A000 inside: plan_operation's row is "skip" with the reason and what
    to do, the job is skipped with it), the table unchanged;
  - local compaction on v3 (https://iceberg.apache.org/spec/#row-lineage,
    #deletion-vectors): the world's reader sees the same live rows with the
    same _row_id and _last_updated_sequence_number afterwards; the deletion
    vectors applied are removed in the commit; the new data manifests take
    row ids from next-row-id on (added and existing rows each), the
    snapshot's first-row-id and added-rows and the table's next-row-id
    follow; a partition left out keeps its files and DV; a table whose
    files have no row ids yet is skipped before anything is written;
  - position-delete rewrite on v3 (https://iceberg.apache.org/spec/#deletion-vectors):
    v2 position delete files and the deletion vectors of a data file become
    one deletion vector per data file (its positions the union, read back
    from the Puffin file and checked against its footer), one Puffin file
    per partition, the old deletes removed in the same snapshot (each blob
    by its offset), the rows and row lineage unchanged, no row ids taken;
    the deletes of a removed data file are dropped as dangling; a deletion
    vector added meanwhile for a data file the rewrite writes one for is a
    conflict, and the retry merges it;
  - tms.delete_rows on v3: the files whose rows all match leave whole with
    their deletion vectors, a file with some is rewritten without them,
    every row left keeps its _row_id and _last_updated_sequence_number;
  - mode delete-files on v3 (tms.delete_rows and retention): each data file
    with matching rows gets one deletion vector holding its new positions
    and those its deletion vector and v2 position delete files deleted
    before, the old deletion vector removed in the same "delete" snapshot
    (by Puffin file and offset); rows, _row_id and next-row-id unchanged;
    summary added-dvs / removed-dvs; a deletion vector added meanwhile for
    such a file is a conflict: the attempt's Puffin file is deleted and
    the job plans again, merging it; a table upgraded to v3 whose files
    have no row ids yet gets its deletion vectors too (no row id assigned).

The module runs its own cluster and catalog over a file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_v3_tables.py
"""

import copy
import json
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
import v3world as v3  # noqa: E402
import avro_codec  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "v3cat"
    w = tms_world("v3", settings=dict(FAST_WORKERS), catalog={}, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             allowed_locations 'file://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    w = dict(w, server=srv)
    w["st"] = ow.storage(file_root=w["file_root"])
    w["catalog"].create_namespace("v3")
    return w


def new_table(env, **kw):
    loc = "file://%s/v3/%s/t" % (env["file_root"], uuid.uuid4().hex[:10])
    res = v3.write_table(env["st"], loc, **kw)
    ow.give_to_server(env["st"].local_path(loc))
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register("v3", name, res["metadata_location"])
    return name, res


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, name, op, options=None):
    return q(env, "SELECT tms.run_operation(%s, 'v3', %s, %s, %s::jsonb, 'local')",
             (env["server"], name, op, json.dumps(options or {})))[0][0]


def plan(env, name, op):
    return q(env, "SELECT action, target, detail FROM tms.plan_operation(%s, 'v3', %s, %s, '{}')",
             (env["server"], name, op))


def wait_job(env, jid, timeout=120):
    def row():
        r = q(env, "SELECT state, reason, last_error, manifests_rewritten, manifests_added"
                   " FROM tms.maintenance_jobs WHERE id = %s", (jid,))
        return r[0] if r else None
    wait_for(lambda: (row() or [None])[0] in TERMINAL, timeout=timeout,
             what="job %s to finish (%r)" % (jid, row()))
    return row()


def expected_rows(res):
    """The writer's model of the current snapshot (write_table's docstring)."""
    out = [(i, "a%d" % i, 0, i, 1) for i in range(5) if i not in (1, 3, 4)]
    out += [(100, "b0-modified", 1, 5, 3)] + [(100 + i, "b%d" % i, 1, 5 + i, 1) for i in range(1, 7)]
    out += [(200 + i, "c%d" % i, 0, 12 + i, 2) for i in range(1, 4)]
    # F: the first file of snapshot 6, whose first-row-id is 28
    out += [(1000 + i, "f%d" % i, 1, 28 + i, 6) for i in range(1, 6000, 2)]
    # extra appends: three rows each, ids from next-row-id 6028 on
    for k in range(sum(1 for f in res["files"] if f.startswith("G"))):
        out += [(5000 + 10 * k + i, "g", k % 2, 6028 + 3 * k + i, 7 + k) for i in range(3)]
    return sorted(out)


def test_world_reader_matches_writer(env):
    name, res = new_table(env)
    _, meta = ow.load(env["catalog"], "v3", name)
    assert meta["format-version"] == 3
    assert v3.rows(env["st"], meta) == expected_rows(res)
    assert v3.check_lineage(meta) == []
    assert meta["next-row-id"] == 6028
    # at most one deletion vector per data file; the replaced one is gone
    dvs = [e["ref"] for e in v3.live(env["st"], meta) if e["content"] == 1]
    assert len(dvs) == len(set(dvs)) == 3


def test_world_reader_applies_position_delete_files(env):
    # a v3 table that also keeps v2 position delete files (as one upgraded
    # from v2 does): the reader applies both kinds; A, C and F then have a
    # deletion vector and a position delete file each
    name, res = new_table(env, position_deletes=True)
    _, meta = ow.load(env["catalog"], "v3", name)
    gone = {0, 202, 1001, 1003, 106}
    assert v3.rows(env["st"], meta) == [r for r in expected_rows(res) if r[0] not in gone]
    live = v3.live(env["st"], meta)
    files = res["files"]
    pos = [e for e in live if e["content"] == 1 and e["format"].lower() == "parquet"]
    assert {e["path"] for e in pos} == {files["P0"]["path"], files["P1"]["path"]}
    assert {e["ref"] for e in live if e["content"] == 1 and e["ref"]} == {
        files[k]["path"] for k in ("A", "C", "F")}
    assert v3.check_lineage(meta) == []


def test_world_roaring_round_trip():
    for positions in ([], [0], [1, 3, 4], list(range(0, 9000, 2)), [5, 70000, 2 ** 33 + 7]):
        blob = v3.dv_blob(positions)
        assert v3.read_dv_blob(blob) == set(positions)
    bad = bytearray(v3.dv_blob([1, 2]))
    bad[-1] ^= 1
    with pytest.raises(ValueError):
        v3.read_dv_blob(bytes(bad))


def test_manifest_rewrite_keeps_rows_and_row_lineage(env):
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env, extra_appends=3)
    _, meta = ow.load(cat, "v3", name)
    before_rows = v3.rows(st, meta)
    before = {e["path"]: e for e in v3.live(st, meta)}
    old_manifests = {e["manifest"] for e in before.values()}
    assert all(e["first_row_id"] is not None for e in before.values() if e["content"] == 0)
    assert any(e["written_first_row_id"] is None for e in before.values() if e["content"] == 0)

    rows = plan(env, name, "manifest-rewrite")
    assert [t for a, t, _ in rows if a == "commit"] == ["replace"]
    assert ow.load(cat, "v3", name)[1]["current-snapshot-id"] == meta["current-snapshot-id"]

    state, reason, err, rewritten, added = wait_job(env, run(env, name, "manifest-rewrite"))
    assert state == "succeeded", (reason, err)
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
    # https://iceberg.apache.org/spec/#snapshot-row-ids: a commit adding no rows
    assert new["first-row-id"] == meta["next-row-id"]
    assert new["added-rows"] == 0
    assert meta2["next-row-id"] == meta["next-row-id"]
    assert v3.check_lineage(meta2) == []

    after = {e["path"]: e for e in v3.live(st, meta2)}
    assert set(after) == set(before)
    for p, e in after.items():
        b = before[p]
        for k in ("content", "records", "seq", "file_seq", "partition", "ref", "offset", "length",
                  "first_row_id"):
            assert e[k] == b[k], (p, k, e[k], b[k])
    rewritten_entries = [e for e in after.values() if e["manifest"] not in old_manifests]
    assert rewritten_entries and added >= 1 and rewritten >= 2
    lst = ow.manifest_records(st, new)
    for e in rewritten_entries:
        assert e["status"] == 0
        if e["content"] == 0:                  # inherited values written out
            assert e["written_first_row_id"] == before[e["path"]]["first_row_id"]
        else:
            assert e["written_first_row_id"] is None
    for r in lst:
        if r["manifest_path"] in old_manifests:
            continue
        if r["content"] == 0:
            assert r["first_row_id"] == new["first-row-id"]
        else:
            assert r["first_row_id"] is None
    _, hmeta, _ = avro_codec.read_container(st.read(new["manifest-list"]))
    assert hmeta["first-row-id"] == str(new["first-row-id"]).encode()
    assert any(r["manifest_path"] not in old_manifests and r["content"] == 1 for r in lst)

    # the rows, with _row_id and _last_updated_sequence_number, are the same
    assert v3.rows(st, meta2) == before_rows == expected_rows(res)


def upgraded(env):
    """A v3 table as a v2 table upgraded to v3 leaves it: no first-row-id
    on its snapshots nor first_row_id on its manifests."""
    name, res = new_table(env)
    st = env["st"]
    meta = copy.deepcopy(res["meta"])
    for s in meta["snapshots"]:
        s.pop("first-row-id", None)
        s.pop("added-rows", None)
        schema, hm, recs = avro_codec.read_container(st.read(s["manifest-list"]))
        for r in recs:
            r["first_row_id"] = None
        path = s["manifest-list"].replace(".avro", "-upgraded.avro")
        st.write(path, avro_codec.write_container(json.dumps(schema), recs, "deflate",
                                                  {k: v.decode() for k, v in hm.items()
                                                   if not k.startswith("avro.")}))
        s["manifest-list"] = path
    meta["next-row-id"] = 0
    loc = res["metadata_location"].replace(".metadata.json", "-upgraded.metadata.json")
    st.write(loc, json.dumps(meta).encode())
    ow.give_to_server(os.path.dirname(st.local_path(loc)))
    name2 = name + "_up"
    env["catalog"].register("v3", name2, loc)
    return name2


def test_manifest_rewrite_refuses_files_without_row_ids(env):
    name = upgraded(env)
    _, meta = ow.load(env["catalog"], "v3", name)
    # a table the rewrite cannot handle is skipped (ICEBERG_ERR_UNSUPPORTED,
    # 0A000 inside), with the reason and what to do, before anything is written
    rows = plan(env, name, "manifest-rewrite")
    assert [(a, t) for a, t, _ in rows] == [("skip", "manifest-rewrite")], rows
    reason = rows[0][2]["reason"]
    assert "does not assign row ids" in reason and "has no first-row-id" in reason, reason
    assert "Commit to the table once with a v3 writer" in reason, reason
    state, reason, err, _, _ = wait_job(env, run(env, name, "manifest-rewrite"))
    assert state == "skipped" and "row ids" in (reason or "") + (err or ""), (state, reason, err)
    assert ow.load(env["catalog"], "v3", name)[1] == meta


def compact_and_check(env, name, options):
    """Run local compaction on a v3 table and check what the spec asks of
    it; returns (meta before, meta after, the new snapshot)."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, "v3", name)
    before_rows = v3.rows(st, meta)
    state, reason, err, _, _ = wait_job(env, run(env, name, "compaction", options))
    assert state == "succeeded", (state, reason, err)
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
    # the live rows, with their _row_id and _last_updated_sequence_number,
    # read by the world's reader (not tms's planner)
    assert v3.rows(st, meta2) == before_rows
    # https://iceberg.apache.org/spec/#snapshot-row-ids: the new data
    # manifests take the ids from the table's next-row-id on, each its
    # added and existing rows; next-row-id moves by added-rows
    old_manifests = {e["manifest"] for e in v3.entries(st, meta)}
    lst = ow.manifest_records(st, new)
    fresh = [r for r in lst if r["manifest_path"] not in old_manifests]
    nxt = meta["next-row-id"]
    assert new["first-row-id"] == nxt
    for r in fresh:
        if r["content"] == 0:
            assert r["first_row_id"] == nxt, (r, nxt)
            nxt += r["added_rows_count"] + r["existing_rows_count"]
        else:
            assert r["first_row_id"] is None
    assert new["added-rows"] == nxt - meta["next-row-id"]
    assert meta2["next-row-id"] == nxt
    assert v3.check_lineage(meta2) == []
    return meta, meta2, new


def test_compaction_keeps_rows_and_row_lineage(env):
    st = env["st"]
    name, res = new_table(env, extra_appends=2)
    meta, meta2, new = compact_and_check(env, name, {"rewrite-all": True})
    assert v3.rows(st, meta2) == expected_rows(res)
    before = v3.live(st, meta)
    after = v3.live(st, meta2)
    # every data file rewritten, the deletion vectors it applied removed
    assert {e["path"] for e in after if e["content"] == 0}.isdisjoint(
        e["path"] for e in before if e["content"] == 0)
    assert [e for e in after if e["content"] != 0] == []
    assert len([e for e in after if e["content"] == 0]) == 2     # one per partition
    removed = {e["path"] for e in v3.entries(st, meta2) if e["status"] == 2 and e["content"] == 1}
    assert removed == {e["path"] for e in before if e["content"] == 1}
    # the rows' ids are the values the new files store: their own first_row_id
    # (inherited from a manifest given ids past the old next-row-id) would differ
    assert all(e["first_row_id"] >= meta["next-row-id"] for e in after if e["content"] == 0)
    # deletion vectors counted apart, as Iceberg's SnapshotSummary does
    assert int(new["summary"]["removed-dvs"]) == 3
    assert "removed-position-delete-files" not in new["summary"]
    assert int(new["summary"]["added-records"]) == len(expected_rows(res))


def test_metrics_count_deletion_vectors_before_and_after_compaction(env):
    # tms.table_metrics gives the policy DSL's variables: the deletion
    # vectors (Puffin blobs) and the rows they delete, counted by the world's
    # manifests, and the deleted-row ratio; compaction applies them all
    st = env["st"]
    name, _ = new_table(env)
    _, meta = ow.load(env["catalog"], "v3", name)
    live = v3.live(st, meta)
    dvs = [e for e in live if e["content"] == 1 and (e["format"] or "").lower() == "puffin"]
    pos = [e for e in live if e["content"] == 1]
    data = sum(e["records"] for e in live if e["content"] == 0)
    assert dvs

    def metrics():
        return q(env, "SELECT tms.table_metrics(%s, 'v3', %s, 'manifests')",
                 (env["server"], name))[0][0]
    m = metrics()
    assert m["deletionVectors"] == len(dvs)
    assert m["deletionVectorRecords"] == sum(e["records"] for e in dvs)
    assert m["positionDeleteFiles"] == len(pos)
    assert m["deletedRecordRatio"] == pytest.approx(sum(e["records"] for e in pos) / data)
    compact_and_check(env, name, {"rewrite-all": True})
    m = metrics()
    assert (m["deletionVectors"], m["deletionVectorRecords"], m["deletedRecordRatio"]) == (0, 0, 0)


def test_compaction_of_one_partition_keeps_the_others(env):
    st = env["st"]
    name, res = new_table(env, extra_appends=3)
    meta, meta2, _ = compact_and_check(env, name, {"rewrite-all": True, "where": "part = 0"})
    assert v3.rows(st, meta2) == expected_rows(res)
    before = {e["path"]: e for e in v3.live(st, meta)}
    after = {e["path"]: e for e in v3.live(st, meta2)}
    part1 = json.dumps({"part": 1}, sort_keys=True)
    # partition 1 and its deletion vector as they were, first_row_id included
    for p, e in before.items():
        if e["partition"] == part1:
            assert p in after and after[p]["first_row_id"] == e["first_row_id"], p
    assert [e["ref"] for e in after.values() if e["content"] == 1] == [res["files"]["F"]["path"]]


def test_sorted_compaction_into_several_files_keeps_row_lineage(env):
    # strategy sort, several outputs per partition: the rows go through the
    # sorted intermediate file and are split, their lineage with them
    st = env["st"]
    name, res = new_table(env)
    _, meta2, _ = compact_and_check(env, name, {"rewrite-all": True, "sort-order": "id DESC",
                                                "target-file-size-bytes": 4096})
    assert v3.rows(st, meta2) == expected_rows(res)
    data = [e for e in v3.live(st, meta2) if e["content"] == 0]
    assert len(data) > 2 and not [e for e in v3.live(st, meta2) if e["content"] != 0]


def test_compaction_refuses_files_without_row_ids(env):
    name = upgraded(env)
    _, meta = ow.load(env["catalog"], "v3", name)
    state, reason, err, _, _ = wait_job(env, run(env, name, "compaction", {"rewrite-all": True}))
    assert state == "skipped" and "row ids" in (reason or "") + (err or ""), (state, reason, err)
    assert ow.load(env["catalog"], "v3", name)[1] == meta


def posdel_rewrite(env, name, options=None):
    """Run position-delete-rewrite on a v3 table; (meta before, meta after,
    the new snapshot), the rows read back by the world's reader unchanged."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, "v3", name)
    before_rows = v3.rows(st, meta)
    state, reason, err, _, _ = wait_job(env, run(env, name, "position-delete-rewrite", options))
    assert state == "succeeded", (state, reason, err)
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
    assert v3.rows(st, meta2) == before_rows
    # no row moved: no row ids taken (https://iceberg.apache.org/spec/#row-lineage)
    assert new["first-row-id"] == meta["next-row-id"] and new["added-rows"] == 0
    assert meta2["next-row-id"] == meta["next-row-id"]
    assert v3.check_lineage(meta2) == []
    return meta, meta2, new


def test_position_delete_rewrite_converts_and_merges_into_deletion_vectors(env):
    # A, C and F have a deletion vector and a position delete file each, E
    # a position delete file: afterwards each has exactly one deletion
    # vector holding both (https://iceberg.apache.org/spec/#deletion-vectors),
    # one Puffin file per partition, no position delete file left
    st = env["st"]
    name, res = new_table(env, position_deletes=True)
    files = res["files"]
    acts = plan(env, name, "position-delete-rewrite")
    groups = [json.loads(d) if isinstance(d, str) else d for a, _, d in acts if a == "rewrite-group"]
    assert len(groups) == 2 and all(g["reasons"] == ["deletion-vectors"] for g in groups), acts
    meta, meta2, new = posdel_rewrite(env, name)
    before, after = v3.live(st, meta), v3.live(st, meta2)
    dels = [e for e in after if e["content"] == 1]
    assert all((e["format"] or "").lower() == "puffin" for e in dels), dels
    refs = [e["ref"] for e in dels]
    assert len(refs) == len(set(refs)) == 4
    assert set(refs) == {files[k]["path"] for k in ("A", "C", "E", "F")}
    want = {"A": {0, 1, 3, 4}, "C": {0, 2}, "E": {6}, "F": set(range(0, 6000, 2)) | {1, 3}}
    for e in dels:
        k = next(k for k in want if files[k]["path"] == e["ref"])
        assert v3.dv_positions(st, e) == want[k], k
        assert e["seq"] == new["sequence-number"] and e["snapshot_id"] == new["snapshot-id"]
    assert len({e["path"] for e in dels}) == 2
    # the old deletes go in the same snapshot: the files and each blob
    old = {(e["path"], e["offset"]) for e in before if e["content"] == 1}
    removed = {(e["path"], e["offset"]) for e in v3.entries(st, meta2)
               if e["status"] == 2 and e["content"] == 1 and e["snapshot_id"] == new["snapshot-id"]}
    assert removed == old
    # the summary counts deletion vectors apart, as Iceberg's SnapshotSummary
    sm = new["summary"]
    assert (sm["added-dvs"], sm["added-delete-files"], sm["removed-dvs"],
            sm["removed-position-delete-files"], sm["removed-delete-files"]) == \
        ("4", "4", "3", "2", "5"), sm
    assert "added-position-delete-files" not in sm
    # data files untouched
    assert sorted(e["path"] for e in after if e["content"] == 0) == \
        sorted(e["path"] for e in before if e["content"] == 0)
    # nothing left to do: the plan is empty
    acts = plan(env, name, "position-delete-rewrite")
    assert not [a for a, _, _ in acts if a == "rewrite-group"], acts


def test_position_delete_rewrite_drops_dangling_deletes(env):
    # C was removed after its deletion vector and a position delete file
    # pointing at it were written: both are dangling, as on v2 (the spec's
    # scan planning: no live data file they apply to), and are dropped;
    # A's deletes still become one deletion vector
    st = env["st"]
    name, res = new_table(env, position_deletes=True, drop_c=True)
    files = res["files"]
    meta, meta2, new = posdel_rewrite(env, name)
    dels = [e for e in v3.live(st, meta2) if e["content"] == 1]
    assert sorted(e["ref"] for e in dels) == sorted(files[k]["path"] for k in ("A", "E", "F"))
    assert all((e["format"] or "").lower() == "puffin" for e in dels)
    a = next(e for e in dels if e["ref"] == files["A"]["path"])
    assert v3.dv_positions(st, a) == {0, 1, 3, 4}
    # C's deletion vector is removed with the rest
    removed = {(e["path"], e["ref"]) for e in v3.entries(st, meta2)
               if e["status"] == 2 and e["content"] == 1 and e["snapshot_id"] == new["snapshot-id"]}
    assert any(ref == files["C"]["path"] for _, ref in removed), removed
    # C's one deleted position and the position delete file's (C, 2)
    msg = q(env, "SELECT message FROM tms.maintenance_jobs ORDER BY id DESC LIMIT 1")[0][0]
    assert msg == "2 dangling position deletes dropped", msg


def test_position_delete_rewrite_conflicts_with_a_deletion_vector_added(env):
    # while the rewrite runs, a v3 writer adds a deletion vector for E (which
    # the rewrite writes one for): committing would leave E two deletion
    # vectors, so the attempt gives up and the retry plans on the table as
    # it is then, merging the new one too
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env, position_deletes=True)
    files = res["files"]
    _, meta = ow.load(cat, "v3", name)
    body = v3.dv_commit(st, meta, files["E"]["path"], 1, [0, 6])
    ow.give_to_server(env["file_root"])
    cat.fault(r"/tables/%s$" % name, action="interpose", method="POST", commits=[body])
    jid = run(env, name, "position-delete-rewrite")
    state, reason, err, _, _ = wait_job(env, jid)
    assert state == "succeeded", (state, reason, err)
    assert q(env, "SELECT attempts FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0][0] == 2
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    interposed = new["parent-snapshot-id"]
    assert interposed == body["updates"][0]["snapshot"]["snapshot-id"]
    assert v3.rows(st, meta2) == v3.rows(st, meta2, interposed)
    dels = [e for e in v3.live(st, meta2) if e["content"] == 1]
    assert len({e["ref"] for e in dels}) == len(dels) == 4
    e = next(e for e in dels if e["ref"] == files["E"]["path"])
    assert v3.dv_positions(st, e) == {0, 6}


# ---------------------------------------------------------------------------
# retention and deletions on v3
# ---------------------------------------------------------------------------

def test_delete_rows_drops_and_rewrites_keeping_row_lineage(env):
    """tms.delete_rows on v3 (https://iceberg.apache.org/spec/#row-lineage):
    the files of partition 0 leave whole with their deletion vectors, the
    file F that holds some matching rows is rewritten without them; every
    row left keeps its _row_id and _last_updated_sequence_number (it was
    not modified), as the world's reader sees them."""
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env, extra_appends=2)
    _, meta = ow.load(cat, "v3", name)
    where = "part = 0 OR (id >= 1001 AND id < 1011)"
    gone = lambda r: r[2] == 0 or 1001 <= r[0] < 1011  # noqa: E731
    want = [r for r in expected_rows(res) if not gone(r)]
    assert len(want) < len(expected_rows(res)) - 5
    jid = q(env, "SELECT tms.delete_rows(%s, 'v3', %s, %s, '{}')", (env["server"], name, where))[0][0]
    state, reason, err, _, _ = wait_job(env, jid)
    assert state == "succeeded", (state, reason, err)
    _, meta2 = ow.load(cat, "v3", name)
    assert v3.rows(st, meta2) == want
    assert v3.check_lineage(meta2) == []
    # a delete (partition 0 by its partition values), then an overwrite on it
    over = ow.snapshot(meta2, meta2["current-snapshot-id"])
    drop = ow.snapshot(meta2, over["parent-snapshot-id"])
    assert (drop["summary"]["operation"], over["summary"]["operation"]) == ("delete", "overwrite")
    assert drop["parent-snapshot-id"] == meta["current-snapshot-id"]
    # no deletion vector is left for a data file that is gone
    live = v3.live(st, meta2)
    data = {e["path"] for e in live if e["content"] == 0}
    assert all(e["ref"] in data for e in live if e["content"] == 1), live
    # rows_removed: the record counts of the files dropped (their rows a
    # deletion vector deleted already included, as the manifests count
    # them) and the five rows of F the rewrite removed (1001 .. 1009)
    dropped = sum(e["records"] for e in v3.live(st, meta)
                  if e["content"] == 0 and json.loads(e["partition"]).get("part") == 0)
    row = q(env, "SELECT rows_removed FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0][0]
    assert row == dropped + 5, (row, dropped)


def dv_entries(st, meta):
    """The live deletion vectors of a table: {data file: entry}."""
    dvs = [e for e in v3.live(st, meta) if e["content"] == 1 and
           (e["format"] or "").lower() == "puffin"]
    assert len({e["ref"] for e in dvs}) == len(dvs), dvs
    return {e["ref"]: e for e in dvs}


def delete_files_check(env, name, meta, want_rows, new_positions):
    """After a row delta on a v3 table (mode delete-files): one "delete"
    snapshot on meta's, the rows the world's reader sees are want_rows
    (their _row_id and _last_updated_sequence_number unchanged), no row id
    taken; each data file of new_positions ({data file: positions}) has
    exactly one deletion vector, new, holding exactly those positions; the
    old deletion vectors of those files are DELETED entries of that
    snapshot (by Puffin file and offset), every other delete file stays.
    Returns (meta after, the new snapshot)."""
    cat, st = env["catalog"], env["st"]
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "delete", new["summary"]
    assert v3.rows(st, meta2) == want_rows
    # no row moved (https://iceberg.apache.org/spec/#row-lineage)
    assert new["first-row-id"] == meta["next-row-id"] and new["added-rows"] == 0
    assert meta2["next-row-id"] == meta["next-row-id"]
    assert v3.check_lineage(meta2) == []
    before, after = v3.live(st, meta), v3.live(st, meta2)
    # the data files stay as they were
    assert sorted((e["path"], e["first_row_id"]) for e in after if e["content"] == 0) == \
        sorted((e["path"], e["first_row_id"]) for e in before if e["content"] == 0)
    old = dv_entries(st, meta)
    dvs = dv_entries(st, meta2)
    for ref, want in new_positions.items():
        e = dvs[ref]
        assert (e["format"] or "").upper() == "PUFFIN"
        assert e["snapshot_id"] == new["snapshot-id"] and e["seq"] == new["sequence-number"]
        assert v3.dv_positions(st, e) == want, ref
        assert e["records"] == len(want)
    # the old deletion vectors of those files removed in the same snapshot
    replaced = {(e["path"], e["offset"]) for r, e in old.items() if r in new_positions}
    removed = {(e["path"], e["offset"]) for e in v3.entries(st, meta2)
               if e["status"] == 2 and e["content"] == 1 and e["snapshot_id"] == new["snapshot-id"]}
    assert removed == replaced, (removed, replaced)
    # every other delete stays: the others' deletion vectors, position delete files
    kept = {(e["path"], e["offset"]) for e in before if e["content"] == 1} - replaced
    assert kept == {(e["path"], e["offset"]) for e in after if e["content"] == 1 and
                    e["snapshot_id"] != new["snapshot-id"]}
    sm = new["summary"]
    assert (sm["added-dvs"], sm["added-delete-files"]) == \
        (str(len(new_positions)), str(len(new_positions))), sm
    assert sm.get("removed-dvs", "0") == str(len(replaced)), sm
    assert "added-position-delete-files" not in sm and "added-records" not in sm, sm
    assert int(sm["added-position-deletes"]) == sum(len(p) for p in new_positions.values()), sm
    return meta2, new


def test_delete_rows_delete_files_writes_deletion_vectors(env):
    """tms.delete_rows mode delete-files on v3
    (https://iceberg.apache.org/spec/#deletion-vectors): the matching rows
    of A, C, E and F are deleted by one deletion vector each, holding the
    union of the new positions and those deleted before (A's and F's
    deletion vectors, the v2 position delete files kept from before an
    upgrade); the old deletion vectors are removed in the same snapshot
    (C's is one blob of a Puffin file shared with a removed one of A),
    the position delete files, which delete rows of other files too, stay."""
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env, position_deletes=True)
    files = {k: f["path"] for k, f in res["files"].items()}
    _, meta = ow.load(cat, "v3", name)
    rows0 = v3.rows(st, meta)
    # 202 and 1001, 1003 the position delete files deleted already
    where = "id IN (2, 202, 203, 105) OR (id >= 1001 AND id < 1011)"
    gone = lambda r: r[0] in (2, 202, 203, 105) or 1001 <= r[0] < 1011  # noqa: E731
    want = [r for r in rows0 if not gone(r)]
    opts = {"where": where, "mode": "delete-files"}
    acts = q(env, "SELECT action, target, detail FROM tms.plan_operation(%s, 'v3', %s, 'retention', %s)",
             (env["server"], name, json.dumps(opts)))
    strad = {t: d for a, t, d in acts if a == "straddling-data-file"}
    assert set(strad) == {files[k] for k in ("A", "C", "E", "F")}, acts
    assert all(d["deletion_vector"] is True and "position_deletes" not in d
               for d in strad.values()), strad
    commit = [d for a, t, d in acts if a == "commit" and t == "delete"]
    assert commit and commit[-1]["deletion-vector-files"] == 2, acts   # one per partition
    assert ow.load(cat, "v3", name)[1]["current-snapshot-id"] == meta["current-snapshot-id"]

    jid = q(env, "SELECT tms.delete_rows(%s, 'v3', %s, %s, '{\"mode\": \"delete-files\"}')",
            (env["server"], name, where))[0][0]
    state, reason, err, _, _ = wait_job(env, jid)
    assert state == "succeeded", (state, reason, err)
    meta2, new = delete_files_check(env, name, meta, want, {
        files["A"]: {0, 1, 2, 3, 4},            # DV {1, 3, 4}, v2 delete 0, new 2
        files["C"]: {0, 2, 3},                  # DV {0}, v2 delete 2, new 3
        files["E"]: {5, 6},                     # v2 delete 6, new 5
        files["F"]: set(range(0, 6000, 2)) | {1, 3, 5, 7, 9}})
    assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
    assert len({e["path"] for e in dv_entries(st, meta2).values()}) == 2
    assert new["summary"]["removed-dvs"] == "3"
    assert "removed-position-delete-files" not in new["summary"]
    # the rows removed: the new positions (A 2, C 203, E 105, F 1005, 1007, 1009)
    row = q(env, "SELECT rows_removed, message FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0]
    assert row[0] == 6 and "deletion vectors" in row[1], row


def test_delete_files_conflict_with_a_deletion_vector_added(env):
    """A v3 writer adds a deletion vector for E between the plan and the
    commit of the row delta, which writes one for E too: committing would
    leave E two deletion vectors, so the attempt gives up, its Puffin file
    is deleted, and the job plans again on the table as it is then: E's
    one deletion vector holds both."""
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env)
    files = {k: f["path"] for k, f in res["files"].items()}
    _, meta = ow.load(cat, "v3", name)
    body = v3.dv_commit(st, meta, files["E"], 1, [0, 6])
    ow.give_to_server(env["file_root"])
    cat.reset_requests()
    cat.fault(r"/tables/%s$" % name, action="interpose", method="POST", commits=[body])
    where = "id = 105 OR id = 201"
    jid = q(env, "SELECT tms.delete_rows(%s, 'v3', %s, %s, '{\"mode\": \"delete-files\"}')",
            (env["server"], name, where))[0][0]
    state, reason, err, _, _ = wait_job(env, jid)
    assert state == "succeeded", (state, reason, err)
    posts = [(r["status"], r["fault"]) for r in
             cat.requests(r"/tables/%s$" % name)["requests"] if r["method"] == "POST"]
    assert posts[0] == (200, "interposed") and posts[1][0] == 409 and posts[-1][0] == 200, posts
    assert "of the retention no longer fit the table" in env["pg"].log_tail(300)
    _, mid = ow.load(cat, "v3", name)
    interposed = body["updates"][0]["snapshot"]["snapshot-id"]
    assert ow.snapshot(mid, mid["current-snapshot-id"])["parent-snapshot-id"] == interposed
    # checked against the table after the interposed commit
    base = dict(mid, **{"current-snapshot-id": interposed})
    want = [r for r in v3.rows(st, mid, interposed) if r[0] not in (105, 201)]
    meta2, new = delete_files_check(env, name, base, want, {
        files["E"]: {0, 5, 6},                  # the interposed DV {0, 6}, new 5
        files["C"]: {0, 1}})                    # DV {0}, new 1
    # the first attempt's Puffin file is gone: every Puffin file below the
    # table is one a snapshot references
    known = {ow.canon(st, e["path"]) for s in meta2["snapshots"]
             for e in v3.entries(st, meta2, s["snapshot-id"])}
    listed = {ow.canon(st, u) for u in ow.list_location(st, meta2["location"].rstrip("/"))}
    stray = [u for u in listed if u.endswith(".puffin") and u not in known]
    assert not stray, stray
    assert q(env, "SELECT rows_removed FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0][0] == 2


def test_retention_delete_files_writes_deletion_vectors(env):
    """Retention (column and cutoff) in mode delete-files on v3, its files
    read (the world writes no column bounds: "scan"): the older rows of A
    (ids below 2) are deleted by its one deletion vector, merged with the
    one it had; the other files hold no older row and get none."""
    cat, st = env["catalog"], env["st"]
    name, res = new_table(env)
    files = {k: f["path"] for k, f in res["files"].items()}
    _, meta = ow.load(cat, "v3", name)
    want = [r for r in v3.rows(st, meta) if r[0] >= 2]
    opts = {"column": "id", "unit": "s", "older-than": "1970-01-01 00:00:02Z",
            "mode": "delete-files", "scan": True}
    state, reason, err, _, _ = wait_job(env, run(env, name, "retention", opts))
    assert state == "succeeded", (state, reason, err)
    delete_files_check(env, name, meta, want, {files["A"]: {0, 1, 3, 4}})   # DV {1, 3, 4}, new 0
    row = q(env, "SELECT rows_removed, data_files_removed FROM tms.maintenance_jobs"
                 " ORDER BY id DESC LIMIT 1")[0]
    assert tuple(row) == (1, 0), row


def test_delete_files_on_a_table_without_row_ids(env):
    """A v3 table upgraded from v2 whose files have no row ids yet: a row
    delta writes no row, so mode delete-files runs (where a rewrite, which
    keeps each row's _row_id, is refused): E gets a deletion vector, A's
    is merged and replaced; no row id is assigned (the table's next-row-id
    stays 0)."""
    cat, st = env["catalog"], env["st"]
    name = upgraded(env)
    _, meta = ow.load(cat, "v3", name)
    files = {e["ref"] for e in v3.live(st, meta) if e["content"] == 1}
    a = next(e["ref"] for e in v3.live(st, meta) if e["content"] == 1 and e["ref"] and
             v3.dv_positions(st, e) == {1, 3, 4})
    e_file = next(e["path"] for e in v3.live(st, meta) if e["content"] == 0 and
                  e["path"] not in files and json.loads(e["partition"]).get("part") == 1 and
                  e["records"] == 7)
    want = [r for r in v3.rows(st, meta) if r[0] not in (2, 105)]
    jid = q(env, "SELECT tms.delete_rows(%s, 'v3', %s, 'id IN (2, 105)', "
                 "'{\"mode\": \"delete-files\"}')", (env["server"], name))[0][0]
    state, reason, err, _, _ = wait_job(env, jid)
    assert state == "succeeded", (state, reason, err)
    _, meta2 = ow.load(cat, "v3", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "delete"
    assert v3.rows(st, meta2) == want
    assert meta2["next-row-id"] == 0 and new["added-rows"] == 0
    dvs = dv_entries(st, meta2)
    assert v3.dv_positions(st, dvs[a]) == {1, 2, 3, 4}
    assert v3.dv_positions(st, dvs[e_file]) == {5}
    assert (new["summary"]["added-dvs"], new["summary"]["removed-dvs"]) == ("2", "1"), new["summary"]
