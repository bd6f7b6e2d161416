"""
test_world_ops.py -- the test world of the maintenance operations
(test/opsworld.py, the catalog's "interpose" fault, S3 modification times):

  - the interpose fault is a concurrent writer: its commit lands first, the
    request asserting the old main gets 409, a retry on top succeeds, on a
    table path and on /transactions/commit;
  - the prepared commits (append, deleting manifests) are real Iceberg:
    the Python reader and icebird read the same live files;
  - the Python live-file reader agrees with icebird on the real fixtures;
  - the expiry oracle follows Iceberg Java's rules (branches, tags,
    retain-last, ref ages, unreferenced snapshots, explicit ids), and an
    expiry done by hand with it leaves a readable table with every live
    file and nothing dangling;
  - s3rver modification times can be set; listings stop at the location
    (a prefix sibling .../t2 is not below .../t); the orphan oracle finds
    exactly the planted old orphans, on file:// and s3://.

Run: /usr/bin/python3 -m pytest -q test/integration/test_world_ops.py
"""

import os
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402
import opsworld as ow  # noqa: E402

ICEBIRD_CANNOT = {"pyiceberg_v1_overwrite", "spark_v1_legacy_manifests_field"}


@pytest.fixture
def cat(make_catalog):
    return make_catalog()


def new_table(cat, st, base, *args):
    """A synthetic table at base/<id>/t, registered in namespace ops."""
    loc = "%s/%s/t" % (base.rstrip("/"), uuid.uuid4().hex[:10])
    res = ow.synth_table(loc, *args)
    name = "t_%s" % uuid.uuid4().hex[:8]
    cat.register("ops", name, res["metadata_location"])
    return loc, name, res


def table_log(cat, name):
    return [(r["method"], r["status"], r["fault"])
            for r in cat.requests(r"/tables/%s$" % name)["requests"]]


def set_props_commit(meta, key="k", value="v"):
    return {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                              "snapshot-id": meta["current-snapshot-id"]}],
            "updates": [{"action": "set-properties", "updates": {key: value}}]}


# ---------------------------------------------------------------------------
# the interpose fault and the prepared commits
# ---------------------------------------------------------------------------

def test_interpose_fault_is_a_concurrent_writer(cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, res = new_table(cat, st, "file://%s/ops" % file_root, "--snapshots", "2",
                               "--data-files", "6", "--files-per-manifest", "2")
    mloc, meta = ow.load(cat, "ops", name)
    before = ow.live_files(st, meta)
    extra = [{"path": loc + "/data/interposed-%d.parquet" % i, "records": 7, "size": 99}
             for i in range(3)]
    body, written = ow.append_commit(st, meta, extra, seed=1)
    assert all(st.exists(p) for p in written[:2])
    cat.reset_requests()
    cat.fault(r"/namespaces/ops/tables/%s$" % name, action="interpose", method="POST",
              commits=[body])
    # a writer that read the table before the interposed append loses the race
    st_, answer, _ = cat.raw("POST", "/v1/%s/namespaces/ops/tables/%s" % (cat.prefix, name),
                             set_props_commit(meta))
    assert st_ == 409 and answer["error"]["type"] == "CommitFailedException", answer
    assert table_log(cat, name) == [("POST", 200, "interposed"), ("POST", 409, "interpose")]
    mloc2, meta2 = ow.load(cat, "ops", name)
    assert meta2["current-snapshot-id"] == body["updates"][0]["snapshot"]["snapshot-id"]
    after = ow.live_files(st, meta2)
    assert set(after) == set(before) | {f["path"] for f in extra}
    assert after[extra[0]["path"]]["seq"] == meta2["last-sequence-number"]
    # it retries on top of the new snapshot: no fault left, it lands
    assert cat.armed_faults() == []
    ow.commit(cat, "ops", name, set_props_commit(meta2))
    assert ow.load(cat, "ops", name)[1]["properties"]["k"] == "v"
    # icebird reads the interposed snapshot: the added files are live
    ib = ow.icebird(ow.load(cat, "ops", name)[0], s3.endpoint, file_root, list_files=True)
    assert ib["data_files"] == 9 and ib["records"] == res["records"] + 21
    assert sorted(f["path"] for f in ib["files"]) == sorted(after)


def test_interpose_on_a_transaction_names_its_table(cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, _ = new_table(cat, st, "file://%s/ops" % file_root, "--data-files", "2")
    _, meta = ow.load(cat, "ops", name)
    body, _ = ow.append_commit(st, meta, [{"path": loc + "/data/x.parquet", "records": 1,
                                           "size": 1}], seed=2)
    cat.fault(r"/transactions/commit$", action="interpose", commits=[body], table=("ops", name))
    change = dict(set_props_commit(meta), identifier={"namespace": ["ops"], "name": name})
    st_, answer, _ = cat.raw("POST", "/v1/%s/transactions/commit" % cat.prefix,
                             {"table-changes": [change]})
    assert st_ == 409, answer
    assert len(ow.live_files(st, ow.load(cat, "ops", name)[1])) == 3


def test_interpose_fault_is_validated(cat):
    st_, body, _ = cat.raw("POST", "/admin/faults", {"action": "interpose"}, auth=False)
    assert st_ == 400 and "commits" in body["error"]["message"]


def test_append_and_delete_commits_on_s3_partitioned(cat, s3, file_root):
    st = ow.storage(s3, file_root)
    loc, name, res = new_table(cat, st, "s3://warehouse/ops", "--snapshots", "3",
                               "--data-files", "12", "--files-per-manifest", "2",
                               "--partitions", "3", "--pos-deletes", "2",
                               "--s3-endpoint", s3.endpoint)
    _, meta = ow.load(cat, "ops", name)
    before = ow.live_files(st, meta)
    assert ow.summary(before) == {"data_files": 12, "records": 1200, "size": 12 * 1024,
                                  "position_delete_files": 2, "equality_delete_files": 0}
    body, _ = ow.append_commit(st, meta, [{"path": loc + "/data/category=p1/new.parquet",
                                           "records": 5, "size": 10,
                                           "partition": {"category": "p1"}}], seed=3)
    ow.commit(cat, "ops", name, body)
    _, meta = ow.load(cat, "ops", name)
    data_manifests = [r["manifest_path"] for r in ow.manifest_records(
        st, ow.snapshot(meta, meta["current-snapshot-id"])) if not r.get("content")]
    victim = data_manifests[-1]          # the oldest data manifest
    victim_files = {p for p, f in ow.live_files(st, meta).items() if f["manifest"] == victim}
    assert len(victim_files) == 2
    body, written = ow.delete_manifests_commit(st, meta, [victim], seed=4)
    ow.commit(cat, "ops", name, body)
    mloc, meta = ow.load(cat, "ops", name)
    live = ow.live_files(st, meta)
    assert set(live) == (set(before) | {loc + "/data/category=p1/new.parquet"}) - victim_files
    ib = ow.icebird(mloc, s3.endpoint, file_root, list_files=True)
    assert sorted(f["path"] for f in ib["files"]) == sorted(live)
    assert ib["deleted_entries"] == 2
    # the deleted files keep their data sequence numbers in the DELETED entries
    snap = ow.snapshot(meta, meta["current-snapshot-id"])
    deleting = [r for r in ow.manifest_records(st, snap) if r["manifest_path"] in written]
    entries = ow.manifest_entries(st, deleting[0]["manifest_path"])
    assert {e["status"] for e in entries} == {2}
    assert all(e["sequence_number"] is not None for e in entries)


# ---------------------------------------------------------------------------
# the live-file reader against icebird, real fixtures
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(world.table_name_for(f) for f in world.REAL_TABLES
                                        if world.table_name_for(f) not in ICEBIRD_CANNOT))
def test_live_files_agree_with_icebird(real_tables, s3, file_root, catalog, name):
    st = ow.storage(s3, file_root)
    mloc, meta = ow.load(catalog, world.REAL_NAMESPACE, name)
    ours = ow.live_files(st, meta)
    theirs = ow.icebird(mloc, s3.endpoint, file_root, list_files=True)
    assert sorted((p, f["content"], f["records"], f["size"]) for p, f in ours.items()) == \
        sorted((f["path"], f["content"], f["records"], f["size"]) for f in theirs["files"])
    s = ow.summary(ours)
    assert (s["data_files"], s["records"], s["position_delete_files"],
            s["equality_delete_files"]) == (theirs["data_files"], theirs["records"],
                                            theirs["position_delete_files"],
                                            theirs["equality_delete_files"])


@pytest.mark.parametrize("name", sorted(world.table_name_for(f) for f in world.REAL_TABLES))
def test_real_fixtures_reach_only_existing_files(real_tables, s3, file_root, catalog, name):
    """Every file the oracle says a real table reaches exists (so a test
    can demand that an operation leaves them all)."""
    st = ow.storage(s3, file_root)
    mloc, meta = ow.load(catalog, world.REAL_NAMESPACE, name)
    files = ow.content_files(st, meta)
    assert files and all(st.exists(p) for p in files), [p for p in files if not st.exists(p)]
    by_snap = ow.live_files_by_snapshot(st, meta)
    assert set(by_snap) == {s["snapshot-id"] for s in meta["snapshots"]}


# ---------------------------------------------------------------------------
# the expiry oracle
# ---------------------------------------------------------------------------

def chain(n, t0=1_000_000, step=1000, start=1):
    """n snapshots 1..n, each the parent of the next, one a second."""
    return [{"snapshot-id": i, "timestamp-ms": t0 + (i - 1) * step,
             **({"parent-snapshot-id": i - 1} if i > start else {})}
            for i in range(start, start + n)]


def test_expected_expiry_rules():
    now = 1_000_000 + 100_000
    snaps = chain(10)
    # a side branch forking at 3 (11, 12), and a dangling unreferenced snapshot 20
    snaps += [{"snapshot-id": 11, "parent-snapshot-id": 3, "timestamp-ms": 1_000_000 + 10_500},
              {"snapshot-id": 12, "parent-snapshot-id": 11, "timestamp-ms": 1_000_000 + 11_000},
              {"snapshot-id": 20, "timestamp-ms": 1_000_000 + 50_000}]
    meta = {"format-version": 2, "snapshots": snaps, "current-snapshot-id": 10,
            "refs": {"main": {"snapshot-id": 10, "type": "branch"},
                     "side": {"snapshot-id": 12, "type": "branch"},
                     "v1": {"snapshot-id": 5, "type": "tag"},
                     "old": {"snapshot-id": 2, "type": "tag", "max-ref-age-ms": 1000}},
            "properties": {}}
    # everything older than now: main keeps 3 (retain-last), side keeps 3
    # (its own ancestry 12, 11, 3), tag v1 keeps 5, tag "old" is too old
    e = ow.expected_expiry(meta, now, older_than_ms=now, retain_last=3)
    assert e["removed_refs"] == {"old"}
    assert e["retained"] == {8, 9, 10, 12, 11, 3, 5}
    assert e["expired"] == {1, 2, 4, 6, 7, 20}
    # a branch's own min-snapshots-to-keep wins over retain-last
    meta["refs"]["side"]["min-snapshots-to-keep"] = 1
    assert ow.expected_expiry(meta, now, older_than_ms=now, retain_last=3)["retained"] == \
        {8, 9, 10, 12, 5}
    # a cutoff between snapshots: younger ones stay; the unreferenced 20 is young
    e = ow.expected_expiry(meta, now, older_than_ms=1_000_000 + 6_500, retain_last=1)
    assert e["retained"] == {8, 9, 10, 12, 11, 5, 20}
    # defaults: 5 days of age (all young here), so only explicit ids go
    # ("old" has its own max-ref-age-ms of 1 s: 99 s old, removed even so)
    e = ow.expected_expiry(meta, now, snapshot_ids=[4])
    assert e["expired"] == {4} and e["removed_refs"] == {"old"}
    with pytest.raises(ValueError):
        ow.expected_expiry(meta, now, snapshot_ids=[10])
    # the table property and the option for ref ages
    # the option and the table property set the age of refs without their
    # own (branches too, never main)
    del meta["refs"]["old"]["max-ref-age-ms"]
    assert ow.expected_expiry(meta, now)["removed_refs"] == set()
    assert ow.expected_expiry(meta, now, max_ref_age_ms=1000)["removed_refs"] == \
        {"old", "v1", "side"}
    meta["properties"]["history.expire.max-ref-age-ms"] = "1000"
    assert ow.expected_expiry(meta, now)["removed_refs"] == {"old", "v1", "side"}


def test_expiry_by_the_oracle_keeps_the_table_whole(cat, s3, file_root):
    """Expire by hand with the oracle (remove-snapshots + deleting
    expected_expiry_deletes): the live files do not change, every file the
    remaining snapshots reach is still there, the deleted ones are the
    expired lists, the deleted manifest, its data files, the stats file."""
    st = ow.storage(s3, file_root)
    loc, name, res = new_table(cat, st, "file://%s/ops" % file_root, "--snapshots", "8",
                               "--data-files", "16", "--files-per-manifest", "1",
                               "--branch", "b@3", "--tag", "t@5", "--stats-files", "8")
    _, meta = ow.load(cat, "ops", name)
    first = [r for r in ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"]))][-1]
    body, _ = ow.delete_manifests_commit(st, meta, [first["manifest_path"]], seed=5)
    ow.commit(cat, "ops", name, body)
    mloc, meta = ow.load(cat, "ops", name)
    live_before = ow.live_files(st, meta)
    now = int(time.time() * 1000)
    exp = ow.expected_expiry(meta, now, older_than_ms=now, retain_last=2)
    ordinals = {s["snapshot-id"]: i + 1 for i, s in enumerate(meta["snapshots"])}
    assert sorted(ordinals[s] for s in exp["retained"]) == [2, 3, 5, 8, 9]
    after_meta = ow.metadata_after_expiry(meta, exp)
    deletes = ow.expected_expiry_deletes(st, meta, after_meta)
    kinds = sorted(set(deletes.values()))
    assert kinds == ["manifest-list", "statistics"], deletes
    # snapshot 1's manifest is still reached by the branch, the tag and
    # snapshot 8: nothing but lists and stats goes.  Remove the branch and
    # the tag, keep only the last snapshot: now it goes with its data file.
    exp = ow.expected_expiry(meta, now, older_than_ms=now, retain_last=1, max_ref_age_ms=1)
    assert exp["removed_refs"] == {"b", "t"}
    after_meta = ow.metadata_after_expiry(meta, exp)
    deletes = ow.expected_expiry_deletes(st, meta, after_meta)
    assert deletes[first["manifest_path"]] == "manifest"
    gone_data = {p for p, k in deletes.items() if k == "data"}
    assert len(gone_data) == 1 and gone_data.isdisjoint(live_before)
    ow.commit(cat, "ops", name, {"requirements": [], "updates": [
        {"action": "remove-snapshot-ref", "ref-name": r} for r in sorted(exp["removed_refs"])] + [
        {"action": "remove-snapshots", "snapshot-ids": sorted(exp["expired"])}]})
    for p in deletes:
        st.delete(p)
    mloc, meta2 = ow.load(cat, "ops", name)
    assert {s["snapshot-id"] for s in meta2["snapshots"]} == exp["retained"]
    assert ow.live_files(st, meta2) == live_before
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    ib = ow.icebird(mloc, s3.endpoint, file_root, list_files=True)
    assert sorted(f["path"] for f in ib["files"]) == sorted(live_before)


# ---------------------------------------------------------------------------
# listings, modification times, the orphan oracle
# ---------------------------------------------------------------------------

def test_s3_modification_time_and_listing_bounds(s3):
    client = s3.client()
    base = "mt/%s" % uuid.uuid4().hex
    client.put("warehouse", base + "/t/a", b"a")
    client.put("warehouse", base + "/t2/b", b"b")
    old = time.time() - 10 * 86400
    s3.set_mtime("warehouse", base + "/t/a", old)
    objs = client.list_objects("warehouse", base + "/")
    when = {k: w for k, _, w in objs}
    assert abs(when[base + "/t/a"] - int(old)) <= 1
    assert when[base + "/t2/b"] > time.time() - 3600
    st = ow.storage(s3)
    listing = ow.list_location(st, "s3://warehouse/%s/t" % base)
    assert list(listing) == ["s3://warehouse/%s/t/a" % base]
    assert listing["s3://warehouse/%s/t/a" % base][0] == 1
    with pytest.raises(FileNotFoundError):
        s3.set_mtime("warehouse", base + "/t/missing", old)


@pytest.mark.parametrize("where", ["file", "s3"])
def test_orphan_oracle_finds_exactly_the_planted_old_orphans(cat, s3, file_root, where):
    st = ow.storage(s3, file_root)
    if where == "file":
        base = "file://%s/orph/%s" % (file_root, uuid.uuid4().hex[:8])
        extra = []
    else:
        base = "s3://warehouse/orph/%s" % uuid.uuid4().hex[:8]
        extra = ["--s3-endpoint", s3.endpoint]
    loc = base + "/t"
    res = ow.synth_table(loc, "--snapshots", "3", "--data-files", "6", "--files-per-manifest", "2",
                         "--stats-files", "1", "--version-hint", *extra)
    sib = ow.synth_table(base + "/t2", "--data-files", "2", *extra)
    name = "o_%s" % uuid.uuid4().hex[:8]
    cat.register("ops", name, res["metadata_location"])
    old = time.time() - 10 * 86400
    assert ow.age_tree(st, loc, old, s3) == res["files_written"]
    ow.age_tree(st, base + "/t2", old, s3)
    planted_old = [ow.plant(st, loc + "/data/orphan-%d.parquet" % i, mtime=old, s3server=s3)
                   for i in range(3)]
    planted_old.append(ow.plant(st, loc + "/metadata/orphan.avro", mtime=old, s3server=s3))
    young = ow.plant(st, loc + "/data/young.parquet", s3server=s3)
    mloc, meta = ow.load(cat, "ops", name)
    listing = ow.list_location(st, loc)
    assert ow.canon(st, young) in listing
    assert not any("/t2/" in u for u in listing)
    found = ow.expected_orphans(st, meta, mloc, listing, time.time() - 3 * 86400)
    assert found == {ow.canon(st, p) for p in planted_old}
    # the version hint and the statistics file are reached, so never orphans
    keep = ow.reachable(st, meta, mloc)
    assert ow.canon(st, loc + "/metadata/version-hint.text") in keep
    assert ow.canon(st, meta["statistics"][0]["statistics-path"]) in keep
    assert sib["files_written"] == len(ow.list_location(st, base + "/t2"))
