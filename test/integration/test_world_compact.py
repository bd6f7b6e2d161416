"""
test_world_compact.py -- the compaction of the engine look-alikes
(test/engines/compact.py, test/node/compact.mjs) and the small-file table
generator (test/engines/smallfiles.py), against the test REST catalog and
its storage:

  - a synthetic table of many small real Parquet files with position and
    equality deletes is compacted to one file per partition: icebird reads
    exactly the same rows, the deletes are applied and their files no
    longer referenced, the replace snapshot's summary counts what changed,
    the new files carry Iceberg field ids and the new manifest entries
    column bounds;
  - the plan: the output file count follows the target size, groups below
    min-input-files are skipped, the where predicate limits the rewrite to
    the matching partitions, Trino's file_size_threshold selects files;
  - the real fixtures spark-v2-mor-posdeletes and
    spark-v2-partitioned-bucket-identity (s3rver) and
    java-v2-partitioned-eqdeletes (file://) keep their rows;
  - a concurrent append before the compaction's commit: 409, a retry on
    the new base, no lost row; a concurrent delete of a file being
    rewritten: CompactError, and the written files are removed; a 503 on
    the commit: CompactError, and the written files are kept (the outcome
    is unknown);
  - Iceberg's output file count and the binary encoding of bounds.

Everything runs in this module's own catalog, s3rver and file root (the
session's real tables stay untouched).
Run: /usr/bin/python3 -m pytest -q test/integration/test_world_compact.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import opsworld as ow  # noqa: E402
import compact as cp  # noqa: E402
import smallfiles  # noqa: E402


@pytest.fixture(scope="module")
def env(tms_world, catalog_dsn):
    w = tms_world("compact", cluster=False, catalog={}, pointers=catalog_dsn, real=True)
    # root: the file root every relative path resolves against
    return {"cat": w["catalog"], "s3": w["s3"], "root": w["file_root"], "st": w["st"],
            "real": w["real"]}


def rows(env, mloc):
    out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["root"],
                     dump_rows=True)
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


def live(env, ns, name):
    mloc, meta = ow.load(env["cat"], ns, name)
    return mloc, meta, ow.live_files(env["st"], meta)


def data_files(files):
    return {p: f for p, f in files.items() if f["content"] == 0}


def run_compact(env, ns, name, **kw):
    return cp.compact(env["cat"].uri, None, env["st"], [ns], name, **kw)


def parquet_field_ids(path):
    """{column: field id} of a local Parquet file, by DuckDB's parquet_schema()."""
    script = ("import { DuckDBInstance } from '@duckdb/node-api';"
              "const c = await (await DuckDBInstance.create(':memory:')).connect();"
              "const r = await c.runAndReadAll(`SELECT name, field_id FROM parquet_schema('%s')`);"
              "console.log(JSON.stringify(r.getRowObjectsJson()))" % path.replace("'", "''"))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ow.NODE_DIR,
                       capture_output=True, text=True, timeout=60, check=True)
    return {x["name"]: x["field_id"] and int(x["field_id"]) for x in json.loads(r.stdout)}


def new_entries(env, meta):
    """The ADDED entries of the current snapshot's manifests."""
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    out = []
    for rec in ow.manifest_records(env["st"], snap):
        for e in ow.manifest_entries(env["st"], rec["manifest_path"]):
            if e["status"] == 1 and e["snapshot_id"] == snap["snapshot-id"]:
                out.append(e)
    return out


def test_small_files_with_deletes_compacted(env):
    st, cat = env["st"], env["cat"]
    mloc = smallfiles.make_table(cat, st, "cmp", "small", files=120, rows_per_file=20,
                                 with_deletes=True, seed=3)
    _, meta0, before = live(env, "cmp", "small")
    s = ow.summary(before)
    assert (s["data_files"], s["records"]) == (120, 2400)
    assert s["position_delete_files"] == 4 and s["equality_delete_files"] == 1
    assert len(meta0["snapshots"]) == 7
    want = rows(env, mloc)
    # rows 0 and 3 of every 7th file (18 files), ids = 5 mod 97 in c1
    eq = sum(1 for i in range(120) if i % 4 == 1 for r in range(20)
             if (i * 20 + r) % 97 == 5 and not (i % 7 == 0 and r in (0, 3)))
    assert len(want) == 2400 - 18 * 2 - eq

    res = run_compact(env, "cmp", "small")
    assert {k: res[k] for k in ("rewritten_data_files_count", "added_data_files_count",
                                "failed_data_files_count", "removed_delete_files_count")} == {
        "rewritten_data_files_count": 120, "added_data_files_count": 4,
        "failed_data_files_count": 0, "removed_delete_files_count": 5}
    assert res["rewritten_bytes_count"] == s["size"]

    mloc2, meta, after = live(env, "cmp", "small")
    assert rows(env, mloc2) == want
    assert ow.summary(after)["data_files"] == 4
    assert not [p for p, f in after.items() if f["content"] != 0]
    assert not set(before) & set(after)
    for f in after.values():
        assert f["seq"] == meta["last-sequence-number"]
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    assert snap["parent-snapshot-id"] == meta0["current-snapshot-id"]
    sm = snap["summary"]
    assert sm["operation"] == "replace"
    assert (sm["added-data-files"], sm["deleted-data-files"], sm["removed-delete-files"],
            sm["total-data-files"], sm["total-delete-files"]) == ("4", "120", "5", "4", "0")
    assert (sm["deleted-records"], sm["added-records"], sm["total-records"]) == (
        "2400", str(len(want)), str(len(want)))
    assert sm["removed-position-delete-files"] == "4"
    assert sm["removed-equality-delete-files"] == "1"

    # field ids in the new files; bounds in their manifest entries
    by_cat = {}
    for r in want:
        r = json.loads(r)
        by_cat.setdefault(r["category"], []).append(int(r["id"]))
    entries = new_entries(env, meta)
    assert len(entries) == 4
    for e in entries:
        df = e["data_file"]
        ids = parquet_field_ids(st.local_path(df["file_path"]))
        assert {k: v for k, v in ids.items() if v} == {
            "id": 1, "category": 2, "amount": 3, "score": 4, "day": 5, "ts": 6, "flag": 7}
        lo = {b["key"]: b["value"] for b in df["lower_bounds"]}
        hi = {b["key"]: b["value"] for b in df["upper_bounds"]}
        assert set(lo) == set(hi) == {1, 2, 3, 4, 5, 6, 7}
        c = df["partition"]["category"]
        assert lo[2] == hi[2] == c.encode()
        assert int.from_bytes(lo[1], "little") == min(by_cat[c])
        assert int.from_bytes(hi[1], "little") == max(by_cat[c])
        nulls = {b["key"]: b["value"] for b in df["null_value_counts"]}
        assert nulls[1] == 0 and nulls[4] > 0
        assert df["record_count"] == len(by_cat[c])

    # a second run finds one file per partition: nothing to do
    again = run_compact(env, "cmp", "small")
    assert again["rewritten_data_files_count"] == 0 and again["snapshot_id"] is None
    assert ow.load(cat, "cmp", "small")[1]["current-snapshot-id"] == meta["current-snapshot-id"]


def test_plan_target_size_min_inputs_predicate_threshold(env):
    st, cat = env["st"], env["cat"]
    mloc = smallfiles.make_table(cat, st, "cmp", "plan", files=24, rows_per_file=40, seed=5)
    want = rows(env, mloc)
    _, meta, before = live(env, "cmp", "plan")
    parts = {}
    for p, f in before.items():
        parts.setdefault(f["partition"], []).append(f)
    assert sorted(len(v) for v in parts.values()) == [6, 6, 6, 6]

    # six files per partition: min-input-files 7 leaves everything alone
    res = run_compact(env, "cmp", "plan", options={"min-input-files": "7"})
    assert res["rewritten_data_files_count"] == 0
    assert ow.load(cat, "cmp", "plan")[1]["current-snapshot-id"] == meta["current-snapshot-id"]

    # the predicate limits the rewrite to c0 and c1; a target of half a
    # partition's bytes gives two files each
    half = max(sum(f["size"] for f in v) for v in parts.values()) // 2
    res = run_compact(env, "cmp", "plan", predicate=lambda p: p["category"] in ("c0", "c1"),
                      options={"target-file-size-bytes": str(half + 1)})
    assert res["rewritten_data_files_count"] == 12
    assert [g["output_files"] for g in res["groups"]] == [2, 2]
    mloc2, _, after = live(env, "cmp", "plan")
    counts = {}
    for p, f in after.items():
        counts[dict(f["partition"])["category"]] = counts.get(dict(f["partition"])["category"], 0) + 1
    assert counts == {"c0": 2, "c1": 2, "c2": 6, "c3": 6}
    untouched = {p for p, f in before.items() if dict(f["partition"])["category"] in ("c2", "c3")}
    assert untouched <= set(after)
    assert rows(env, mloc2) == want

    # Trino's threshold: nothing is smaller than 1 byte; everything is
    # smaller than 1 GB, c2 and c3 become one file each, the two-file
    # partitions one each too
    assert run_compact(env, "cmp", "plan", file_size_threshold=1)["rewritten_data_files_count"] == 0
    res = run_compact(env, "cmp", "plan", file_size_threshold=1 << 30)
    assert res["rewritten_data_files_count"] == 16 and res["added_data_files_count"] == 4
    mloc3, _, after = live(env, "cmp", "plan")
    assert ow.summary(after)["data_files"] == 4
    assert rows(env, mloc3) == want


def test_sort_strategy_orders_rows(env):
    st, cat = env["st"], env["cat"]
    mloc = smallfiles.make_table(cat, st, "cmp", "sorted", files=8, rows_per_file=10,
                                 partitioned=False, seed=9)
    want = rows(env, mloc)
    res = run_compact(env, "cmp", "sorted", strategy="sort", sort_order="id DESC NULLS LAST",
                      options={"rewrite-all": "true"})
    assert (res["rewritten_data_files_count"], res["added_data_files_count"]) == (8, 1)
    mloc2, _, _ = live(env, "cmp", "sorted")
    out = ow.icebird(mloc2, file_root=env["root"], dump_rows=True)["row_values"]
    ids = [int(r["id"]) for r in out]
    assert ids == sorted(ids, reverse=True)
    assert sorted(json.dumps(r, sort_keys=True) for r in out) == want


def set_main(cat, ns, name, snapshot_id):
    """Roll main back (or forward) to one of the table's snapshots."""
    meta = ow.load(cat, ns, name)[1]
    ow.commit(cat, ns, name, {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                          "snapshot-id": meta["current-snapshot-id"]}],
        "updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                     "snapshot-id": snapshot_id}]})


def test_real_spark_position_deletes(env):
    cat, name = env["cat"], "spark_v2_mor_posdeletes"
    _, meta0, _ = live(env, "real", name)
    # its current snapshot replaced the file the position delete names (the
    # delete dangles); its parent is the merge-on-read delete itself
    head = meta0["current-snapshot-id"]
    parent = ow.snapshot(meta0, head)["parent-snapshot-id"]
    set_main(cat, "real", name, parent)
    mloc, _, before = live(env, "real", name)
    want = rows(env, mloc)
    assert ow.summary(before)["position_delete_files"] == 1
    assert len(want) == ow.summary(before)["records"] - 1
    res = run_compact(env, "real", name, options={"delete-file-threshold": "1"})
    assert (res["rewritten_data_files_count"], res["added_data_files_count"],
            res["removed_delete_files_count"]) == (1, 1, 1)
    mloc, meta, after = live(env, "real", name)
    assert ow.summary(after)["position_delete_files"] == 0
    assert rows(env, mloc) == want
    assert ow.summary(after)["records"] == len(want)
    for p in after:
        assert p.startswith("s3a://hyperparam-iceberg/spark/bunnies/data/") and p not in before

    # back at the head, the delete applies to no live file: kept by
    # default (too few files to rewrite), removed with remove-dangling-deletes
    set_main(cat, "real", name, head)
    mloc, _, before = live(env, "real", name)
    want = rows(env, mloc)
    assert run_compact(env, "real", name)["snapshot_id"] is None
    res = run_compact(env, "real", name, options={"remove-dangling-deletes": "true"})
    assert (res["rewritten_data_files_count"], res["removed_delete_files_count"]) == (0, 1)
    mloc, _, after = live(env, "real", name)
    assert ow.summary(after)["position_delete_files"] == 0
    assert set(after) == {p for p, f in before.items() if f["content"] == 0}
    assert rows(env, mloc) == want


def test_real_java_equality_deletes(env):
    info = env["real"]["java_v2_partitioned_eqdeletes"]
    want = rows(env, info["metadata_location"])
    _, _, before = live(env, "real", "java_v2_partitioned_eqdeletes")
    assert ow.summary(before)["equality_delete_files"] == 3
    # one row each in b, c, f: name = 'b', (name, id) = ('c', 3), name = 'f'
    assert ow.summary(before)["records"] - len(want) == 3
    res = run_compact(env, "real", "java_v2_partitioned_eqdeletes",
                      options={"delete-file-threshold": "1"})
    assert res["rewritten_data_files_count"] == 3
    assert res["removed_delete_files_count"] == 3
    mloc, _, after = live(env, "real", "java_v2_partitioned_eqdeletes")
    s = ow.summary(after)
    assert s["equality_delete_files"] == 0 and s["records"] == len(want)
    assert rows(env, mloc) == want


def test_real_bucket_identity_rewrite_all(env):
    info = env["real"]["spark_v2_partitioned_bucket_identity"]
    want = rows(env, info["metadata_location"])
    _, _, before = live(env, "real", "spark_v2_partitioned_bucket_identity")
    res = run_compact(env, "real", "spark_v2_partitioned_bucket_identity",
                      options={"rewrite-all": "true"})
    assert (res["rewritten_data_files_count"], res["added_data_files_count"]) == (3, 3)
    mloc, meta, after = live(env, "real", "spark_v2_partitioned_bucket_identity")
    assert sorted(repr(f["partition"]) for f in after.values()) == \
        sorted(repr(f["partition"]) for f in before.values())
    assert not set(after) & set(before)
    for p in after:
        assert "/data/id_bucket=" in p and "/date=" in p
    assert rows(env, mloc) == want
    entries = new_entries(env, meta)
    assert len(entries) == 3
    for e in entries:
        df = e["data_file"]
        nulls = {b["key"]: b["value"] for b in df["null_value_counts"]}
        lo = {b["key"]: b["value"] for b in df["lower_bounds"]}
        hi = {b["key"]: b["value"] for b in df["upper_bounds"]}
        assert set(nulls) == {1, 2, 3, 4, 5}
        # a bound for every column with a value (date is null in one partition)
        assert set(lo) == set(hi) == {k for k, n in nulls.items() if n < df["record_count"]}
        assert {1, 4} <= set(lo)


def _extra_file(env, meta, category, first, count):
    """A real Parquet data file (smallfiles' schema) written beside the table."""
    tmp = tempfile.mkdtemp(prefix="tms-compact-extra-")
    try:
        res = cp.run_node({"mode": "write", "schema": {"fields": smallfiles.SCHEMA["fields"]},
                           "query": smallfiles._rows_query(first, count, category, 0),
                           "output_files": 1, "output_dir": tmp, "file_prefix": "extra",
                           "iceberg_schema": json.dumps(smallfiles.SCHEMA)})
        o = res["files"][0]
        uri = "%s/category=%s/extra-%s.parquet" % (cp.data_location(meta), category,
                                                   uuid.uuid4().hex)
        with open(o["path"], "rb") as fh:
            env["st"].write(uri, fh.read())
        return {"path": uri, "records": o["records"], "size": o["size"],
                "partition": {"category": category}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_concurrent_append_retried_no_row_lost(env):
    st, cat = env["st"], env["cat"]
    smallfiles.make_table(cat, st, "cmp", "conc", files=20, rows_per_file=10, seed=11)
    mloc, meta, before = live(env, "cmp", "conc")
    extra = _extra_file(env, meta, "c2", 10000, 7)
    body, _ = ow.append_commit(st, meta, [extra], seed=1)
    cat.reset_requests()
    cat.fault(r"/tables/conc$", action="interpose", method="POST", commits=[body])
    res = run_compact(env, "cmp", "conc")
    assert res["attempts"] == 2 and res["rewritten_data_files_count"] == 20
    statuses = [(r["status"], r["fault"]) for r in cat.requests(r"/tables/conc$")["requests"]
                if r["method"] == "POST"]
    assert [s for s, _ in statuses] == [200, 409, 200]
    mloc2, meta2, after = live(env, "cmp", "conc")
    assert extra["path"] in after
    assert ow.summary(after)["data_files"] == 5
    assert ow.summary(after)["records"] == 207
    got = rows(env, mloc2)
    assert len(got) == 207
    ids = sorted(int(json.loads(r)["id"]) for r in got)
    assert ids == list(range(200)) + list(range(10000, 10007))
    snap = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert snap["summary"]["operation"] == "replace"
    parent = ow.snapshot(meta2, snap["parent-snapshot-id"])
    assert parent["summary"]["operation"] == "append"


def test_concurrent_delete_of_rewritten_file_fails_cleanly(env):
    st, cat = env["st"], env["cat"]
    smallfiles.make_table(cat, st, "cmp", "clash", files=10, rows_per_file=5, seed=13)
    mloc, meta, before = live(env, "cmp", "clash")
    manifest = sorted({f["manifest"] for f in before.values()})[0]
    body, _ = ow.delete_manifests_commit(st, meta, [manifest], seed=2)
    cat.fault(r"/tables/clash$", action="interpose", method="POST", commits=[body])
    listing = ow.list_location(st, meta["location"])
    with pytest.raises(cp.CompactError, match="concurrent commit"):
        run_compact(env, "cmp", "clash", options={"rewrite-all": "true"})
    mloc2, meta2, after = live(env, "cmp", "clash")
    assert ow.snapshot(meta2, meta2["current-snapshot-id"])["summary"]["operation"] == "delete"
    # nothing the failed rewrite wrote is left (only the new metadata JSON
    # of the interposed commit, and its own manifests, were added)
    added = set(ow.list_location(st, meta["location"])) - set(listing)
    assert all("/metadata/" in u and ("deleting-" in u or u.endswith(".metadata.json"))
               for u in added), sorted(added)


def test_commit_state_unknown_keeps_files(env):
    st, cat = env["st"], env["cat"]
    smallfiles.make_table(cat, st, "cmp", "unknown", files=6, rows_per_file=5, seed=17)
    _, meta, before = live(env, "cmp", "unknown")
    listing = ow.list_location(st, meta["location"])
    cat.fault(r"/tables/unknown$", action="status", status=503, method="POST")
    with pytest.raises(cp.CompactError, match="commit state unknown"):
        run_compact(env, "cmp", "unknown", options={"rewrite-all": "true"})
    _, meta2, after = live(env, "cmp", "unknown")
    assert meta2["current-snapshot-id"] == meta["current-snapshot-id"] and after == before
    # the commit might have landed: the new data files and manifests stay
    added = set(ow.list_location(st, meta["location"])) - set(listing)
    assert any(u.endswith(".parquet") for u in added)
    assert any("/metadata/snap-" in u for u in added)


def test_output_file_count_and_bound_encoding():
    # Iceberg's numOutputFiles: target 100, min 75, max 180
    assert [cp._num_output_files(n, 100, 75, 180) for n in (40, 100, 210, 250, 280)] == \
        [1, 1, 2, 3, 3]
    enc = cp.encode_bound
    assert enc("int", "-2") == b"\xfe\xff\xff\xff"
    assert enc("date", "19723") == (19723).to_bytes(4, "little")
    assert enc("long", "1704067200000000") == (1704067200000000).to_bytes(8, "little")
    assert enc("decimal(10, 2)", "-1.50") == (-150).to_bytes(2, "big", signed=True)
    assert enc("decimal(10, 2)", "0.00") == b"\x00"
    assert enc("double", "1.5") == b"\x00\x00\x00\x00\x00\x00\xf8?"
    assert enc("boolean", True) == b"\x01" and enc("boolean", False) == b"\x00"
    assert enc("string", "abcdefghijklmnopq") == b"abcdefghijklmnop"
    assert enc("string", "abcdefghijklmnopq", upper=True) == b"abcdefghijklmnoq"
    assert enc("string", "abcdefghijklmnopq", upper=True, truncate=2 ** 31) == b"abcdefghijklmnopq"
    assert enc("binary", "ff" * 17, upper=True) is None
    assert enc("uuid", "f79c3e09-677c-4bbd-a479-3f349cb785e7") == \
        bytes.fromhex("f79c3e09677c4bbda4793f349cb785e7")
    assert enc("string", None) is None
