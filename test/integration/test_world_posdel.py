"""
test_world_posdel.py -- the engine look-alikes' rewrite_position_delete_files
(test/engines/compact.py rewrite_position_deletes, called by
test/engines/actions.py), run through the Livy look-alike against the test
REST catalog and its storage:

  - a small-file table with position and equality deletes gets a second
    position delete file in partition c0 (two live rows and one pointing
    at a file that does not exist); a where limited to c1 rewrites
    nothing; min-input-files 2 rewrites c0's two delete files into one:
    icebird reads exactly the same rows, the live position delete files
    fall by one, the dangling row is gone, the new entry keeps the highest
    data sequence number of the files it replaces (its file sequence
    number is the new snapshot's), the snapshot is a "replace" whose
    summary counts the change, and the new file carries Iceberg's reserved
    field ids.

Everything runs in this module's own catalog and engine (file:// tables).
Run: /usr/bin/python3 -m pytest -q test/integration/test_world_posdel.py
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import compact as cp  # noqa: E402
import smallfiles  # noqa: E402


@pytest.fixture(scope="module")
def cat(catalog_dsn, s3, file_root):
    server = world.CatalogServer(catalog_dsn, "file://%s/wh_posdel" % file_root,
                                 catalog_name="posdel_%s" % uuid.uuid4().hex[:8], s3=s3,
                                 file_root=file_root)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def livy(cat):
    e = world.EngineServer("livy", cat)
    yield e
    e.stop()


def await_(cond, what, timeout=20, step=0.05):
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


def livy_call(eng, code):
    """Run code in a fresh Livy session; {column: value} of its one row."""
    s = eng.request("POST", "/sessions", {"kind": "sql"}, expect=201)
    await_(lambda: eng.request("GET", "/sessions/%d/state" % s["id"])["state"] == "idle",
           "session idle")
    stmt = eng.request("POST", "/sessions/%d/statements" % s["id"],
                       {"code": code, "kind": "sql"}, expect=201)
    done = await_(lambda: (lambda x: x if x["state"] in ("available", "error", "cancelled")
                           else None)(eng.request("GET", "/sessions/%d/statements/%d"
                                                  % (s["id"], stmt["id"]))), "statement")
    eng.request("DELETE", "/sessions/%d" % s["id"])
    out = done["output"]
    assert out["status"] == "ok", out
    js = out["data"]["application/json"]
    assert len(js["data"]) == 1
    return dict(zip([f["name"] for f in js["schema"]["fields"]], js["data"][0]))


def rows(s3, file_root, mloc):
    out = ow.icebird(mloc, s3_endpoint=s3.endpoint, file_root=file_root, dump_rows=True)
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


def add_position_deletes(cat, st, ns, name, meta, part, pairs, tmp):
    """Commit one more position delete file of (file_path, pos) pairs in
    partition {category: part}; (location, metadata, its uri)."""
    vals = ", ".join("(%s, %d::BIGINT)" % (cp._sql_lit(u), p) for u, p in sorted(pairs))
    res = cp.run_node({"mode": "write", "schema": {"fields": cp.POS_FIELDS},
                       "query": "SELECT * FROM (VALUES %s) v(c_2147483546, c_2147483545) "
                                "ORDER BY 1, 2" % vals,
                       "output_files": 1, "output_dir": tmp, "file_prefix": "pos2-%s" % uuid.uuid4(),
                       "compression": "zstd"})
    o = res["files"][0]
    uri = "%s/category=%s/%s" % (cp.data_location(meta), part, os.path.basename(o["path"]))
    with open(o["path"], "rb") as fh:
        st.write(uri, fh.read())
    df = smallfiles._data_file(uri, o, {"category": part}, content=1,
                               schema={"fields": cp.POS_FIELDS}, truncate=None)
    snap = smallfiles._snapshot(meta, __import__("random").Random(7), "delete")
    prev = ow.snapshot(meta, ow.current_id(meta))
    records = [smallfiles._manifest(st, meta, snap, True, [df], 1)] + \
        ow.manifest_records(st, prev)
    tot = {k: v for k, v in (prev.get("summary") or {}).items() if k.startswith("total-")}
    for k, add in (("total-delete-files", 1), ("total-position-deletes", o["records"]),
                   ("total-files-size", o["size"])):
        tot[k] = str(int(tot.get(k, "0")) + add)
    snap["summary"].update(tot)
    snap["summary"].update({"added-delete-files": "1", "added-position-delete-files": "1",
                            "added-position-deletes": str(o["records"])})
    mloc, meta = smallfiles._push(cat, [ns], name, st, meta, snap, records)
    return mloc, meta, uri


def test_rewrite_position_delete_files_through_livy(livy, cat, s3, file_root, tmp_path):
    st = ow.storage(s3, file_root)
    ns, name = "pd", "t_%s" % uuid.uuid4().hex[:8]
    smallfiles.make_table(cat, st, ns, name, files=28, rows_per_file=10, with_deletes=True,
                          seed=5)
    _, meta = ow.load(cat, [ns], name)
    files = ow.live_files(st, meta)
    c0_data = sorted(p for p, f in files.items() if f["content"] == 0 and "category=c0/" in p)
    pos0 = [p for p, f in files.items() if f["content"] == 1]
    assert len(pos0) == 4           # one per partition (every 7th file)
    gone = c0_data[0].rsplit("/", 1)[0] + "/no-such-file.parquet"
    mloc, meta, second = add_position_deletes(
        cat, st, ns, name, meta, "c0", [(c0_data[0], 5), (c0_data[1], 5), (gone, 1)],
        str(tmp_path))
    before = rows(s3, file_root, mloc)
    assert len(before) == 280 - 4 * 2 - 2 - sum(
        1 for i in range(28) if i % 4 == 1 for r in range(10)
        if (i * 10 + r) % 97 == 5 and not (i % 7 == 0 and r in (0, 3)))
    files = ow.live_files(st, meta)
    c0_dels = sorted((p for p, f in files.items() if f["content"] == 1
                      and f["partition"] == ow._partition_key({"category": "c0"})))
    assert len(c0_dels) == 2 and second in c0_dels
    old_seqs = [files[p]["seq"] for p in c0_dels]
    old_bytes = sum(files[p]["size"] for p in c0_dels)
    n_snaps = len(meta["snapshots"])

    # the where limits the partitions; Iceberg's default min-input-files is 5
    call = "CALL `lake`.system.rewrite_position_delete_files(table => '%s.%s'%s)"
    zero = {"rewritten_delete_files_count": 0, "added_delete_files_count": 0,
            "rewritten_bytes_count": 0, "added_bytes_count": 0}
    assert livy_call(livy, call % (ns, name, ", options => map('min-input-files', '2'), "
                                   "where => 'category = \\'c1\\''")) == zero
    assert livy_call(livy, call % (ns, name, "")) == zero
    assert len(ow.load(cat, [ns], name)[1]["snapshots"]) == n_snaps

    res = livy_call(livy, call % (ns, name, ", options => map('min-input-files', '2')"))
    mloc2, meta2 = ow.load(cat, [ns], name)
    assert len(meta2["snapshots"]) == n_snaps + 1
    snap = ow.snapshot(meta2, ow.current_id(meta2))
    assert snap["summary"]["operation"] == "replace"
    after_files = ow.live_files(st, meta2)
    new = [p for p, f in after_files.items() if f["content"] == 1 and f["status"] == 1
           and f["snapshot_id"] == snap["snapshot-id"]]
    assert len(new) == 1
    nf = after_files[new[0]]
    assert res == {"rewritten_delete_files_count": 2, "added_delete_files_count": 1,
                   "rewritten_bytes_count": old_bytes, "added_bytes_count": nf["size"]}
    # the same rows; one position delete file fewer; the dangling row dropped
    assert rows(s3, file_root, mloc2) == before
    assert sum(1 for f in files.values() if f["content"] == 1) == 5
    assert sum(1 for f in after_files.values() if f["content"] == 1) == 4
    assert not set(c0_dels) & set(after_files)
    assert nf["records"] == 2 + 2
    # the data sequence number of the rewritten files, the file one of the snapshot
    assert nf["seq"] == max(old_seqs) and nf["seq"] < snap["sequence-number"]
    assert nf["file_seq"] == snap["sequence-number"]
    s = snap["summary"]
    assert (s["added-delete-files"], s["removed-delete-files"]) == ("1", "2")
    assert (s["added-position-deletes"], s["removed-position-deletes"]) == ("4", "5")
    assert s["total-delete-files"] == str(sum(1 for f in after_files.values()
                                              if f["content"] != 0))
    assert s["total-data-files"] == "28"
    assert s["total-position-deletes"] == str(
        sum(f["records"] for f in after_files.values() if f["content"] == 1))
    # the new file: Iceberg's reserved field ids, rows sorted, no dangling row
    local = st.local_path(new[0])
    script = ("import { DuckDBInstance } from '@duckdb/node-api';"
              "const c = await (await DuckDBInstance.create(':memory:')).connect();"
              "const a = (await c.runAndReadAll(`SELECT name, field_id FROM parquet_schema(%s)`))"
              ".getRowObjectsJson();"
              "const b = (await c.runAndReadAll(`SELECT file_path, pos FROM read_parquet(%s)`))"
              ".getRowObjectsJson();"
              "console.log(JSON.stringify([a, b]))" % (cp._sql_lit(local), cp._sql_lit(local)))
    r = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ow.NODE_DIR,
                       capture_output=True, text=True, timeout=60, check=True)
    schema, content = json.loads(r.stdout)
    ids = {x["name"]: x["field_id"] and int(x["field_id"]) for x in schema}
    assert ids["file_path"] == 2147483546 and ids["pos"] == 2147483545
    pairs = [(x["file_path"], int(x["pos"])) for x in content]
    assert pairs == sorted([(c0_data[0], 0), (c0_data[0], 3), (c0_data[0], 5),
                            (c0_data[1], 5)])
