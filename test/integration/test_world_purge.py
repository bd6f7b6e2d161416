"""
test_world_purge.py -- DELETE ...?purgeRequested=true deletes exactly the
files the table's metadata reaches (as Iceberg Java's
CatalogUtil.dropTableData), on file:// and s3://, and nothing else.
"""

import json
import os
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402

SYNTH = os.path.join(world.FIXTURES_DIR, "synth.py")


def synth(*args):
    r = subprocess.run([world.PYTHON, SYNTH, "--list-files"] + list(args),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_purge_file_table(catalog, file_root):
    loc = os.path.join(file_root, "purge", uuid.uuid4().hex)
    out = synth("--out", loc, "--snapshots", "3", "--data-files", "9", "--files-per-manifest", "2",
                "--pos-deletes", "2", "--eq-deletes", "1", "--partitioned", "--stats-files", "2")
    written = sorted(f[len("file://"):] for f in out["files"])
    neighbour = os.path.join(loc, "data", "not-in-the-table.parquet")
    with open(neighbour, "w") as f:
        f.write("a neighbour")
    hint = os.path.join(loc, "metadata", "version-hint.text")
    with open(hint, "w") as f:
        f.write("3")
    name = "purge_%s" % uuid.uuid4().hex[:6]
    catalog.register("purge", name, out["metadata_location"])
    # a commit adds one more metadata file, which the purge must also remove
    commit = catalog.request("POST", "namespaces/purge/tables/%s" % name, {
        "requirements": [], "updates": [{"action": "set-properties", "updates": {"p": "1"}}]})
    written.append(commit["metadata-location"][len("file://"):])
    assert all(os.path.exists(p) for p in written)
    catalog.request("DELETE", "namespaces/purge/tables/%s?purgeRequested=true" % name, expect=204)
    left = sorted(os.path.join(d, f) for d, _, fs in os.walk(loc) for f in fs)
    assert left == sorted([neighbour, hint])
    assert catalog.raw("GET", "/v1/%s/namespaces/purge/tables/%s" % (catalog.prefix, name))[0] == 404


def test_drop_without_purge_keeps_files(catalog, file_root):
    loc = os.path.join(file_root, "nopurge", uuid.uuid4().hex)
    out = synth("--out", loc, "--data-files", "3")
    name = "keep_%s" % uuid.uuid4().hex[:6]
    catalog.register("purge", name, out["metadata_location"])
    catalog.request("DELETE", "namespaces/purge/tables/%s" % name, expect=204)
    assert all(os.path.exists(f[len("file://"):]) for f in out["files"])


def test_purge_s3_table(catalog, s3):
    prefix = "purge/%s" % uuid.uuid4().hex
    out = synth("--out", "s3://warehouse/" + prefix, "--format-version", "1", "--snapshots", "2",
                "--data-files", "5", "--files-per-manifest", "2", "--s3-endpoint", s3.endpoint)
    client = s3.client()
    client.put("warehouse", prefix + "/data/neighbour.parquet", b"keep me")
    keys = sorted(client.list("warehouse", prefix + "/"))
    assert len(keys) == len(out["files"]) + 1
    name = "s3purge_%s" % uuid.uuid4().hex[:6]
    loaded = catalog.register("purge", name, out["metadata_location"])
    assert loaded["config"]["s3.endpoint"] == s3.endpoint
    catalog.request("DELETE", "namespaces/purge/tables/%s?purgeRequested=true" % name, expect=204)
    assert client.list("warehouse", prefix + "/") == [prefix + "/data/neighbour.parquet"]


def test_purge_respects_gc_disabled(catalog, file_root):
    loc = os.path.join(file_root, "nogc", uuid.uuid4().hex)
    out = synth("--out", loc, "--data-files", "4", "--property", "gc.enabled=false")
    name = "nogc_%s" % uuid.uuid4().hex[:6]
    catalog.register("purge", name, out["metadata_location"])
    catalog.request("DELETE", "namespaces/purge/tables/%s?purgeRequested=true" % name, expect=204)
    left = sorted(os.path.join(d, f) for d, _, fs in os.walk(loc) for f in fs)
    assert left and all("/data/" in p for p in left) and len(left) == 4
