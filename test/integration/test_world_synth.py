"""
test_world_synth.py -- the synthetic table writer (test/fixtures/synth.py)
writes real Iceberg tables: Avro headers keep every field-id (read back with
python3-avro, an independent Avro reader), the fast entry encoder agrees with
the generic one byte for byte, and icebird (npm, an independent Iceberg
reader) counts the same files.
"""

import io
import json
import os
import subprocess
import sys
import uuid
import warnings

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
import opsworld  # noqa: E402
import avro_codec  # noqa: E402
import iceberg_avro_schemas  # noqa: E402
import synth  # noqa: E402

SYNTH = os.path.join(world.FIXTURES_DIR, "synth.py")

MANIFEST_IDS_V2 = {0, 1, 2, 3, 4, 100, 101, 102, 103, 104, 108, 109, 110, 117, 118, 119, 120,
                   121, 122, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137,
                   138, 139, 140, 143}
LIST_IDS_V2 = {500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 510, 511, 512, 513, 514,
               515, 516, 517, 518, 519}


def run_synth(*args):
    r = subprocess.run([world.PYTHON, SYNTH] + list(args), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def icebird(metadata, s3=None, file_root=None, read_rows=False):
    world.node_modules()
    return opsworld.icebird(metadata, s3_endpoint=s3.endpoint if s3 else None,
                            file_root=file_root, read_rows=read_rows, timeout=300)


def ids_in(schema, acc=None):
    acc = set() if acc is None else acc
    if isinstance(schema, dict):
        for k in ("field-id", "element-id"):
            if k in schema:
                acc.add(schema[k])
        for v in schema.values():
            ids_in(v, acc)
    elif isinstance(schema, list):
        for v in schema:
            ids_in(v, acc)
    return acc


@pytest.mark.parametrize("fv", [1, 2])
@pytest.mark.parametrize("partitioned", [False, True])
def test_fast_encoder_matches_generic(fv, partitioned):
    part = [("category", "string", 1000)] if partitioned else []
    generic = avro_codec.compile_encoder(json.loads(iceberg_avro_schemas.manifest_entry_schema(fv, part)))
    fast = synth.EntryEncoder(fv, [p[0] for p in part])
    for content, eq in ((0, None), (1, None), (2, [1, 2])):
        if fv == 1 and content:
            continue
        for sid, low in ((1, 0), (2 ** 62 + 5, -7), (123456789, 2 ** 40)):
            pv = "p3" if partitioned else None
            a = fast.encode(1, sid, content, "s3://b/k/f-placeholder.parquet", pv, 1000, 4096,
                            low, low + 999, eq)
            b = generic(synth.entry_record(1, sid, content, "s3://b/k/f-placeholder.parquet", pv,
                                           "category" if partitioned else None, 1000, 4096,
                                           low, low + 999, fv, eq))
            assert a == b


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_python3_avro_reads_back_field_ids(tmp_path, codec):
    import avro.datafile
    import avro.io
    out = run_synth("--out", str(tmp_path / "t"), "--snapshots", "2", "--data-files", "5",
                    "--files-per-manifest", "2", "--pos-deletes", "1", "--eq-deletes", "1",
                    "--partitioned", "--codec", codec)
    mdir = tmp_path / "t" / "metadata"
    entries = lists = 0
    for f in sorted(os.listdir(mdir)):
        if not f.endswith(".avro"):
            continue
        data = (mdir / f).read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = avro.datafile.DataFileReader(io.BytesIO(data), avro.io.DatumReader())
            records = list(reader)
            schema = json.loads(reader.meta["avro.schema"])
            assert reader.meta["avro.codec"] == codec.encode()
        if f.startswith("snap-"):
            assert ids_in(schema) == LIST_IDS_V2
            assert reader.meta["format-version"] == b"2"
            lists += 1
        else:
            assert ids_in(schema) == MANIFEST_IDS_V2 | {1000}
            assert json.loads(reader.meta["partition-spec"])[0]["transform"] == "identity"
            entries += len(records)
            for r in records:
                assert r["data_file"]["file_path"].endswith("-placeholder.parquet")
    assert lists == 3 and entries == 5 + 1 + 1
    assert out["manifests"] == 3 + 2


def test_v1_schema_ids(tmp_path):
    run_synth("--out", str(tmp_path / "t"), "--format-version", "1", "--data-files", "2")
    mdir = tmp_path / "t" / "metadata"
    for f in os.listdir(mdir):
        if f.endswith(".avro"):
            schema, meta, _ = avro_codec.read_container((mdir / f).read_bytes())
            names = [fl["name"] for fl in schema["fields"]]
            if f.startswith("snap-"):
                assert "added_data_files_count" in names and "content" not in names
            else:
                df = schema["fields"][-1]["type"]["fields"]
                assert "block_size_in_bytes" in [x["name"] for x in df]
                assert 134 not in ids_in(schema)
            assert meta["format-version"] == b"1"


def test_metadata_refs_stats_and_placeholders(tmp_path):
    out = run_synth("--out", str(tmp_path / "t"), "--snapshots", "3", "--data-files", "6",
                    "--branch", "audit@1:max-snapshot-age-ms=1000,min-snapshots-to-keep=2",
                    "--tag", "release@2:max-ref-age-ms=5000", "--stats-files", "2",
                    "--file-size", "300")
    meta = json.loads(open(out["metadata_location"][len("file://"):]).read())
    snaps = meta["snapshots"]
    assert len(snaps) == 3 and out["metadata_files"] == 3
    assert meta["refs"]["main"]["snapshot-id"] == snaps[-1]["snapshot-id"]
    assert meta["refs"]["audit"] == {"snapshot-id": snaps[0]["snapshot-id"], "type": "branch",
                                     "max-snapshot-age-ms": 1000, "min-snapshots-to-keep": 2}
    assert meta["refs"]["release"] == {"snapshot-id": snaps[1]["snapshot-id"], "type": "tag",
                                       "max-ref-age-ms": 5000}
    assert [s["snapshot-id"] for s in meta["statistics"]] == [s["snapshot-id"] for s in snaps[1:]]
    for st in meta["statistics"]:
        data = open(st["statistics-path"][len("file://"):], "rb").read()
        assert data[:4] == b"PFA1" and data[-4:] == b"PFA1" and len(data) == st["file-size-in-bytes"]
    assert [e["metadata-file"] for e in meta["metadata-log"]] == sorted(
        e["metadata-file"] for e in meta["metadata-log"])
    assert len(meta["metadata-log"]) == 2
    ddir = tmp_path / "t" / "data"
    files = os.listdir(ddir)
    assert len(files) == 6 and all(f.endswith("-data-placeholder.parquet") for f in files)
    assert all(os.path.getsize(ddir / f) == 300 for f in files)


def test_no_data_bytes(tmp_path):
    out = run_synth("--out", str(tmp_path / "t"), "--data-files", "50", "--no-data-bytes")
    assert out["data_files"] == 50 and not (tmp_path / "t" / "data").exists()


@pytest.mark.parametrize("fv,extra,expect", [
    (1, [], dict(data_files=7, position_delete_files=0, equality_delete_files=0)),
    (1, ["--partitioned"], dict(data_files=7, position_delete_files=0, equality_delete_files=0)),
    (2, [], dict(data_files=7, position_delete_files=0, equality_delete_files=0)),
    (2, ["--partitioned", "--pos-deletes", "3", "--eq-deletes", "2"],
     dict(data_files=7, position_delete_files=3, equality_delete_files=2)),
    (2, ["--pos-deletes", "1", "--eq-deletes", "1", "--codec", "null"],
     dict(data_files=7, position_delete_files=1, equality_delete_files=1)),
])
def test_icebird_counts_generated_tables(tmp_path, fv, extra, expect):
    out = run_synth("--out", str(tmp_path / "t"), "--format-version", str(fv), "--snapshots", "3",
                    "--data-files", "7", "--files-per-manifest", "2", "--no-data-bytes", *extra)
    got = icebird(out["metadata_location"])
    for k, v in expect.items():
        assert got[k] == v, (k, got)
    assert got["records"] == 7 * 100 and got["manifests"] == out["manifests"]
    assert got["format_version"] == fv


def test_icebird_reads_s3_table_registered_in_catalog(catalog, s3):
    prefix = "synth/%s" % uuid.uuid4().hex
    name = "s3synth_%s" % uuid.uuid4().hex[:6]
    out = run_synth("--out", "s3://warehouse/" + prefix, "--snapshots", "2", "--data-files", "20",
                    "--files-per-manifest", "4", "--pos-deletes", "2", "--partitions", "3",
                    "--no-data-bytes", "--s3-endpoint", s3.endpoint,
                    "--register", catalog.uri, "synth", name)
    loaded = catalog.load_table("synth", name)
    assert loaded["metadata-location"] == out["metadata_location"]
    got = icebird(out["metadata_location"], s3=s3)
    assert (got["data_files"], got["position_delete_files"], got["manifests"]) == (20, 2, 7)
    assert out["manifests"] == 7


def test_large_table_counts(tmp_path):
    out = run_synth("--out", str(tmp_path / "t"), "--data-files", "20000", "--files-per-manifest",
                    "5000", "--snapshots", "4", "--partitions", "8", "--no-data-bytes")
    got = icebird(out["metadata_location"])
    assert got["data_files"] == 20000 and got["manifests"] == 4
