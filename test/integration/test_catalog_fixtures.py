"""
test_catalog_fixtures.py -- every real table of test/fixtures/iceberg,
read by tms itself: loaded into the test world's REST catalog (file tables
below file_root, s3a:// tables in s3rver), reached through a tms_iceberg
foreign server, and counted with tms.table_snapshots / tms.table_files /
tms.table_metrics.

  (a) the counts each fixture's PROVENANCE.md states (snapshots, distinct
      manifests, data / position-delete / equality-delete files over all
      snapshots, and record counts where stated);
  (b) the current snapshot's live data files (path, record count, size),
      the live delete-file counts and the totals agree with icebird 0.3.1's
      reading of the same table, where icebird can read it.

Run: /usr/bin/python3 -m pytest -q test/integration/test_catalog_fixtures.py
"""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
from test_catalog_sql import make_server, readable_by_server  # noqa: E402
from test_world_fixtures import ICEBIRD_CANNOT  # noqa: E402

# The counts of each fixture's PROVENANCE.md, by hand: snapshots (in
# current metadata), distinct manifests (all snapshots), data files,
# position delete files, equality delete files.  "records" is a record count
# the note states, as (snapshot ordinal in sequence order, or "current";
# records of that snapshot's live data files).
PROVENANCE = {
    "java_v2_partitioned_eqdeletes": dict(
        folder="java-v2-partitioned-eqdeletes",
        snapshots=5, manifests=5, data=6, pos=0, eq=3, records=None),
    "pyiceberg_v1_overwrite": dict(
        folder="pyiceberg-v1-overwrite",
        snapshots=3, manifests=4, data=4, pos=0, eq=0, records=None),
    "pyiceberg_v2_partitioned_nullcodec": dict(
        folder="pyiceberg-v2-partitioned-nullcodec",
        snapshots=2, manifests=2, data=2, pos=0, eq=0, records=None),
    "spark_v1_gzip_metadata": dict(
        folder="spark-v1-gzip-metadata",
        snapshots=1, manifests=1, data=1, pos=0, eq=0,
        records=("current", 111968)),          # TPC-H lineitem SF0.01
    "spark_v1_legacy_manifests_field": dict(
        folder="spark-v1-legacy-manifests-field",
        snapshots=1, manifests=1, data=2, pos=0, eq=0, records=None),
    "spark_v2_mor_posdeletes": dict(
        folder="spark-v2-mor-posdeletes",
        snapshots=3, manifests=4, data=2, pos=1, eq=0,
        records=(1, 21)),                      # snapshot 1 appends 21 rows
    "spark_v2_partitioned_bucket_identity": dict(
        folder="spark-v2-partitioned-bucket-identity",
        snapshots=1, manifests=1, data=3, pos=0, eq=0, records=None),
}

ALL = sorted(PROVENANCE)

CONTENT = {"data": 0, "position_deletes": 1, "equality_deletes": 2}


def note_rows(folder):
    """The "| key | value |" rows of a fixture's PROVENANCE.md, as a dict."""
    path = os.path.join(world.REAL_FIXTURES, folder, "PROVENANCE.md")
    rows = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|") and len(cells) == 2:
                rows.setdefault(cells[0], cells[1])
    return rows


def test_provenance_table_covers_every_real_fixture():
    """The table above names every real fixture table, and each table's
    PROVENANCE.md says what the table says (so a changed note fails here)."""
    assert ALL == sorted(world.table_name_for(f) for f in world.REAL_TABLES)
    keys = ["snapshots (in current metadata)", "distinct manifests (all snapshots)",
            "data files", "position delete files", "equality delete files"]
    for name, exp in PROVENANCE.items():
        assert world.table_name_for(exp["folder"]) == name
        rows = note_rows(exp["folder"])
        want = [str(exp[k]) for k in ("snapshots", "manifests", "data", "pos", "eq")]
        assert [rows.get(k) for k in keys] == want, (name, rows)
        if exp["records"]:
            which, records = exp["records"]
            key = ("current snapshot: records of live data files" if which == "current"
                   else "snapshot %d: records of live data files" % which)
            assert rows.get(key) == "{:,}".format(records), (name, key, rows.get(key))


@pytest.fixture(scope="module")
def srv(pg, catalog, real_tables, file_root):
    """A tms_iceberg server over the session catalog; relative and
    file://data/... paths resolve below file_root, s3a:// ones through the
    S3 config the catalog vends (s3rver)."""
    readable_by_server(file_root)
    return make_server(pg, catalog.uri, file_root)


def snapshots_of(pg, srv, name):
    return pg.query("SELECT snapshot_id, sequence_number, is_current, manifest_list"
                 " FROM tms.table_snapshots(%s, 'real', %s)"
                 " ORDER BY sequence_number, committed_at", (srv, name))


def files_of(pg, srv, name, snapshot_id=None):
    """Live entries of a snapshot (the current one when None), as dicts."""
    rows = pg.query("SELECT file_path, content, record_count, file_size_in_bytes,"
                 " manifest_path FROM tms.table_files(%s, 'real', %s, %s)",
                 (srv, name, snapshot_id))
    return [dict(zip(("path", "content", "records", "size", "manifest"), r)) for r in rows]


# ---------------------------------------------------------------------------
# (a) PROVENANCE counts
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_provenance_counts(pg, srv, name):
    exp = PROVENANCE[name]
    snaps = snapshots_of(pg, srv, name)
    assert len(snaps) == exp["snapshots"]
    assert sum(1 for s in snaps if s[2]) == 1

    m = pg.query("SELECT tms.table_metrics(%s, 'real', %s)", (srv, name))[0][0]
    assert m["level"] == "deletes"
    assert m["snapshots"] == exp["snapshots"]

    per_snapshot = {s[0]: files_of(pg, srv, name, s[0]) for s in snaps}
    distinct = {c: set() for c in CONTENT}
    manifests = set()
    for files in per_snapshot.values():
        for f in files:
            distinct[f["content"]].add(f["path"])
            manifests.add(f["manifest"])
    assert (len(distinct["data"]), len(distinct["position_deletes"]),
            len(distinct["equality_deletes"])) == (exp["data"], exp["pos"], exp["eq"])
    # table_files yields live entries only, so a manifest whose entries are
    # all DELETED (pyiceberg's overwrite -m1, Spark's copy-on-write -m0) is
    # seen only in the current snapshot's manifest-list count.
    current = next(s[0] for s in snaps if s[2])
    live_in_current = {f["manifest"] for f in per_snapshot[current]}
    assert live_in_current <= manifests and m["manifests"] >= len(live_in_current)
    assert len(manifests) + m["manifests"] - len(live_in_current) == exp["manifests"], (
        sorted(manifests), m["manifests"])
    if exp["records"]:
        which, records = exp["records"]
        sid = current if which == "current" else snaps[which - 1][0]
        assert sum(f["records"] for f in per_snapshot[sid] if f["content"] == "data") == records


# ---------------------------------------------------------------------------
# (b) agreement with icebird
# ---------------------------------------------------------------------------

# icebird_count.mjs prints counts only; this prints the live entries of the
# current snapshot as icebird's icebergManifests() returns them.  The fetch
# shim maps s3a:// (which icebird rewrites to https://BUCKET.s3.amazonaws.com)
# to s3rver path-style, and file paths as test/catalog/storage.py does.
ICEBIRD_FILES_JS = r"""
import { readFileSync } from 'node:fs'
import { gunzipSync } from 'node:zlib'
import path from 'node:path'
import { icebergManifests } from 'icebird'

const [metadataUri, s3, fileRoot] = process.argv.slice(1)
const realFetch = globalThis.fetch
function local(uri) {
  if (uri.startsWith('file://')) {
    const rest = uri.slice(7)
    return rest.startsWith('/') ? decodeURIComponent(rest)
                                : path.join(fileRoot, decodeURIComponent(rest))
  }
  return uri.startsWith('/') ? uri : path.join(fileRoot, uri)
}
globalThis.fetch = async (input, init) => {
  const uri = typeof input === 'string' ? input : input.url
  const m = /^https:\/\/([^./]+)\.s3\.amazonaws\.com(\/.*)$/.exec(uri) ||
            /^s3a?:\/\/([^/]+)(\/.*)$/.exec(uri)
  if (m) return realFetch(`${s3}/${m[1]}${m[2]}`, init)
  try {
    return new Response(readFileSync(local(uri)), { status: 200 })
  } catch {
    return new Response('not found', { status: 404 })
  }
}
let bytes = Buffer.from(await (await globalThis.fetch(metadataUri)).arrayBuffer())
if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzipSync(bytes)
const manifests = await icebergManifests(JSON.parse(bytes.toString('utf8')))
const out = { manifests: manifests.length, files: [] }
for (const { entries } of manifests) {
  for (const e of entries) {
    if (e.status === 2) continue
    const f = e.data_file
    out.files.push({ path: f.file_path, content: Number(f.content ?? 0),
                     records: Number(f.record_count), size: Number(f.file_size_in_bytes) })
  }
}
process.stdout.write(JSON.stringify(out) + '\n')
"""


def icebird_files(metadata_location, s3, file_root):
    world.node_modules()
    r = subprocess.run(["node", "--input-type=module", "-e", ICEBIRD_FILES_JS,
                        metadata_location, s3.endpoint, file_root],
                       capture_output=True, text=True, timeout=300, cwd=world.NODE_DIR)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=ICEBIRD_CANNOT[n], strict=True))
    if n in ICEBIRD_CANNOT else n for n in ALL])
def test_agrees_with_icebird(pg, srv, real_tables, s3, file_root, name):
    theirs = icebird_files(real_tables[name]["metadata_location"], s3, file_root)
    ours = files_of(pg, srv, name)
    m = pg.query("SELECT tms.table_metrics(%s, 'real', %s)", (srv, name))[0][0]

    # tms names the content ('data', ...), icebird gives the spec's number
    def content(f):
        return CONTENT.get(f["content"], f["content"])

    def data(files):
        return sorted((f["path"], f["records"], f["size"]) for f in files if content(f) == 0)

    def deletes(files, c):
        return sorted(f["path"] for f in files if content(f) == c)

    assert data(ours) == data(theirs["files"])
    assert deletes(ours, 1) == deletes(theirs["files"], 1)
    assert deletes(ours, 2) == deletes(theirs["files"], 2)
    assert m["manifests"] == theirs["manifests"]
    tdata = data(theirs["files"])
    assert m["dataFiles"] == len(tdata)
    assert m["dataRecords"] == sum(f[1] for f in tdata)
    assert m["dataFilesSize"] == sum(f[2] for f in tdata)
    assert m["positionDeleteFiles"] == len(deletes(theirs["files"], 1))
    assert m["equalityDeleteFiles"] == len(deletes(theirs["files"], 2))
