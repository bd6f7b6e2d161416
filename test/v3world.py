"""
v3world.py -- Iceberg format v3 tables for the test world, written and read
here, never by tms: row lineage and deletion vectors.

The writer (write_table) builds a small partitioned v3 table snapshot by
snapshot, as an engine would (https://iceberg.apache.org/spec/):

  - "Row Lineage": the table's next-row-id; each snapshot's first-row-id
    (the table's next-row-id) and added-rows; every new data manifest's
    first_row_id in the manifest list, advancing by its added and existing
    rows ("Row lineage example"); ADDED data files written with a null
    first_row_id (inherited when read, "First Row ID Inheritance"), EXISTING
    and DELETED entries with the inherited value written out; a data file
    whose rows were moved (a replace) carries _row_id and
    _last_updated_sequence_number columns (reserved field ids 2147483540,
    2147483539), one row modified (its sequence number null);
  - deletion vectors: Puffin files (https://iceberg.apache.org/puffin-spec/)
    of deletion-vector-v1 blobs (big-endian length of magic + vector, magic
    D1 D3 39 64, the vector in the portable 64-bit roaring format, big-endian
    CRC-32 of magic + vector; blob metadata with referenced-data-file and
    cardinality, snapshot-id and sequence-number -1), referenced by delete
    manifest entries (content 1, file_format puffin, referenced_data_file,
    content_offset, content_size_in_bytes, record_count = cardinality); a
    second delete of a file merges the old vector into a new one and marks
    the old one DELETED in the same snapshot (at most one per data file).

Data files are real Parquet with field ids, written by DuckDB
(test/node/compact.mjs, mode "write").

The reference reader (rows) reads the snapshot's Parquet by field id with
DuckDB (compact.mjs mode "read"), applies the deletion vectors and v2
position delete files (Parquet, file_path and pos, as a table upgraded
from v2 keeps them) by the sequence-number rule, and
computes each row's _row_id (first_row_id + position when the column is
null) and _last_updated_sequence_number (the data file's data sequence
number when null).  row_lineage(st, meta) gives the inherited first_row_id
of every live data file; check_lineage(meta) checks the table-level rules.

Rules: file:// tables only (Storage.write); every loop is bounded by the
table; nothing here talks to PostgreSQL or sleeps.
"""

import json
import os
import struct
import sys
import tempfile
import time
import uuid
import zlib

TEST_DIR = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(TEST_DIR, "catalog"), os.path.join(TEST_DIR, "fixtures"),
           os.path.join(TEST_DIR, "engines"), TEST_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import avro_codec  # noqa: E402
import iceberg_avro_schemas as schemas  # noqa: E402
import compact as compact_mod  # noqa: E402

ROW_ID = 2147483540
LAST_SEQ = 2147483539
ROW_POS = 2147483645
POS_PATH = 2147483546
POS_POS = 2147483545
DV_MAGIC = b"\xd1\xd3\x39\x64"
PUFFIN_MAGIC = b"PFA1"

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "name", "required": False, "type": "string"},
    {"id": 3, "name": "part", "required": False, "type": "int"}]}
SPEC = {"spec-id": 0, "fields": [
    {"name": "part", "transform": "identity", "source-id": 3, "field-id": 1000}]}
PART_FIELDS = [("part", "int", 1000)]
READ_FIELDS = [{"id": 1, "type": "long"}, {"id": 2, "type": "string"}, {"id": 3, "type": "int"},
               {"id": ROW_ID, "type": "long"}, {"id": LAST_SEQ, "type": "long"}]


# ---------------------------------------------------------------------------
# deletion vectors: portable 64-bit roaring, the deletion-vector-v1 blob
# ---------------------------------------------------------------------------

def roaring64(positions):
    """The portable 64-bit roaring serialization of a set of positions: the
    number of 32-bit bitmaps (8 bytes LE), then per bitmap its key (the high
    32 bits, 4 bytes LE) and a 32-bit roaring bitmap in the portable format
    without run containers (cookie 12346, the container count, per container
    its key and cardinality - 1, the offsets, then array containers of
    sorted uint16 or bitmap containers of 8192 bytes above 4096 values)."""
    by_key = {}
    for p in sorted(set(positions)):
        if p < 0 or p >= 2 ** 64:
            raise ValueError("position %r out of range" % p)
        by_key.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    out = [struct.pack("<Q", len(by_key))]
    for key in sorted(by_key):
        lows = by_key[key]
        conts = {}
        for v in lows:
            conts.setdefault(v >> 16, []).append(v & 0xFFFF)
        n = len(conts)
        head = [struct.pack("<II", 12346, n)]
        bodies = []
        for ck in sorted(conts):
            vals = conts[ck]
            head.append(struct.pack("<HH", ck, len(vals) - 1))
            if len(vals) <= 4096:
                bodies.append(struct.pack("<%dH" % len(vals), *vals))
            else:
                bits = bytearray(8192)
                for v in vals:
                    bits[v >> 3] |= 1 << (v & 7)
                bodies.append(bytes(bits))
        off = 8 + 4 * n + 4 * n
        for b in bodies:
            head.append(struct.pack("<I", off))
            off += len(b)
        out.append(struct.pack("<I", key) + b"".join(head) + b"".join(bodies))
    return b"".join(out)


def _roaring32(data, i):
    """(set of values, next offset) of a portable 32-bit roaring bitmap at i."""
    cookie = struct.unpack_from("<I", data, i)[0]
    if cookie & 0xFFFF == 12347:
        n = (cookie >> 16) + 1
        i += 4
        runmap = data[i:i + (n + 7) // 8]
        i += (n + 7) // 8
        has_offsets = n >= 4
    elif cookie == 12346:
        n = struct.unpack_from("<I", data, i + 4)[0]
        i += 8
        runmap = bytes((n + 7) // 8)
        has_offsets = True
    else:
        raise ValueError("not a portable roaring bitmap (cookie %d)" % cookie)
    keys = [struct.unpack_from("<HH", data, i + 4 * k) for k in range(n)]
    i += 4 * n
    if has_offsets:
        i += 4 * n
    vals = set()
    for k, (ck, card1) in enumerate(keys):
        base = ck << 16
        if runmap[k // 8] & (1 << (k % 8)):
            nruns = struct.unpack_from("<H", data, i)[0]
            i += 2
            for r in range(nruns):
                start, length = struct.unpack_from("<HH", data, i + 4 * r)
                vals.update(base + v for v in range(start, start + length + 1))
            i += 4 * nruns
        elif card1 + 1 <= 4096:
            vals.update(base + v for v in struct.unpack_from("<%dH" % (card1 + 1), data, i))
            i += 2 * (card1 + 1)
        else:
            bits = data[i:i + 8192]
            vals.update(base + b * 8 + j for b in range(8192) for j in range(8)
                        if bits[b] & (1 << j))
            i += 8192
    return vals, i


def read_roaring64(data):
    n = struct.unpack_from("<Q", data, 0)[0]
    i, out = 8, set()
    for _ in range(n):
        key = struct.unpack_from("<I", data, i)[0]
        vals, i = _roaring32(data, i + 4)
        out.update((key << 32) | v for v in vals)
    if i != len(data):
        raise ValueError("trailing bytes after the roaring bitmap")
    return out


def dv_blob(positions):
    """A deletion-vector-v1 blob (Puffin spec, "deletion-vector-v1 blob type")."""
    vec = DV_MAGIC + roaring64(positions)
    return struct.pack(">I", len(vec)) + vec + struct.pack(">I", zlib.crc32(vec) & 0xFFFFFFFF)


def read_dv_blob(blob):
    """The positions of a deletion-vector-v1 blob; checks length, magic, CRC."""
    (n,) = struct.unpack_from(">I", blob, 0)
    if n + 8 != len(blob) or blob[4:8] != DV_MAGIC:
        raise ValueError("bad deletion vector length or magic")
    vec = blob[4:4 + n]
    if struct.unpack_from(">I", blob, 4 + n)[0] != zlib.crc32(vec) & 0xFFFFFFFF:
        raise ValueError("deletion vector CRC-32 mismatch")
    return read_roaring64(vec[4:])


def puffin_file(dvs):
    """(Puffin file bytes, [(offset, length)]) of blobs for dvs [(data file
    uri, positions)]: magic, blobs, footer (magic, JSON payload, its length
    4 bytes LE, flags 0, magic)."""
    body, blobs, spans = bytearray(PUFFIN_MAGIC), [], []
    for uri, positions in dvs:
        b = dv_blob(positions)
        spans.append((len(body), len(b)))
        blobs.append({"type": "deletion-vector-v1", "fields": [ROW_POS], "snapshot-id": -1,
                      "sequence-number": -1, "offset": len(body), "length": len(b),
                      "properties": {"referenced-data-file": uri,
                                     "cardinality": str(len(set(positions)))}})
        body += b
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": "tms test world"}}).encode()
    body += PUFFIN_MAGIC + payload + struct.pack("<I", len(payload)) + b"\0\0\0\0" + PUFFIN_MAGIC
    return bytes(body), spans


def read_puffin_footer(data):
    if data[:4] != PUFFIN_MAGIC or data[-4:] != PUFFIN_MAGIC:
        raise ValueError("not a Puffin file")
    (n,) = struct.unpack_from("<I", data, len(data) - 12)
    return json.loads(data[len(data) - 12 - n:len(data) - 12])


# ---------------------------------------------------------------------------
# the writer
# ---------------------------------------------------------------------------

class _Table:
    """A table being written; fv 2 (for a bench's twin table) leaves row
    lineage out: no next-row-id, first-row-id, added-rows, first_row_id."""

    def __init__(self, st, location, tmp, fv=3):
        self.st, self.loc, self.tmp, self.fv = st, location.rstrip("/"), tmp, fv
        self.meta = {
            "format-version": fv, "table-uuid": str(uuid.uuid4()), "location": self.loc,
            "last-sequence-number": 0, "last-updated-ms": 0, "last-column-id": 3,
            "current-schema-id": 0, "schemas": [SCHEMA], "default-spec-id": 0,
            "partition-specs": [SPEC], "last-partition-id": 1000, "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {"write.avro.compression-codec": "deflate"},
            "current-snapshot-id": -1, "snapshots": [], "snapshot-log": [], "metadata-log": [],
            "refs": {}}
        if fv >= 3:
            self.meta["next-row-id"] = 0
        self.ts = int(time.time() * 1000) - 3600 * 1000
        self.manifests = []        # the current manifest list records
        self.nfile = 0

    # files
    def parquet(self, rows, lineage=False):
        """Write one data file of rows [(id, name, part[, row_id, last_seq])];
        (uri, record count, size)."""
        fields = [{"id": 1, "name": "id", "type": "long", "required": True},
                  {"id": 2, "name": "name", "type": "string"},
                  {"id": 3, "name": "part", "type": "int"}]
        if lineage:
            fields += [{"id": ROW_ID, "name": "_row_id", "type": "long"},
                       {"id": LAST_SEQ, "name": "_last_updated_sequence_number", "type": "long"}]

        def lit(v, t):
            if v is None:
                return "NULL::%s" % t
            return ("'%s'" % v.replace("'", "''")) if isinstance(v, str) else "%d::%s" % (v, t)
        types = ["BIGINT", "VARCHAR", "INTEGER", "BIGINT", "BIGINT"]
        # one VALUES list (a UNION ALL of 6,000 SELECTs took DuckDB seconds
        # to plan), rows in order
        sel = "SELECT * FROM (VALUES %s) AS v(%s)" % (
            ", ".join("(%s)" % ", ".join(lit(v, types[k]) for k, v in enumerate(r[:len(fields)]))
                      for r in rows),
            ", ".join("c_%d" % f["id"] for f in fields))
        self.nfile += 1
        out = os.path.join(self.tmp, "w%d" % self.nfile)
        res = compact_mod.run_node({"mode": "write", "schema": {"fields": fields}, "query": sel,
                                    "output_files": 1, "output_dir": out,
                                    "file_prefix": "data", "compression": "zstd",
                                    "iceberg_schema": json.dumps(SCHEMA)})
        f = res["files"][0]
        uri = "%s/data/part=%d/%05d-%s.parquet" % (self.loc, rows[0][2], self.nfile, uuid.uuid4())
        with open(f["path"], "rb") as fh:
            self.st.write(uri, fh.read())
        return {"path": uri, "records": f["records"], "size": f["size"], "part": rows[0][2]}

    def posdel(self, part, deletes):
        """One v2 position delete file (Parquet, file_path and pos, sorted)
        of partition part: deletes [(data file, position)]."""
        fields = [{"id": POS_PATH, "name": "file_path", "type": "string", "required": True},
                  {"id": POS_POS, "name": "pos", "type": "long", "required": True}]
        sel = "SELECT * FROM (VALUES %s) AS v(c_%d, c_%d)" % (
            ", ".join("('%s', %d::BIGINT)" % (f["path"].replace("'", "''"), p)
                      for f, p in sorted(deletes, key=lambda d: (d[0]["path"], d[1]))),
            POS_PATH, POS_POS)
        self.nfile += 1
        out = os.path.join(self.tmp, "w%d" % self.nfile)
        res = compact_mod.run_node({"mode": "write", "schema": {"fields": fields},
                                    "query": "SELECT * FROM (%s) ORDER BY 1, 2" % sel,
                                    "output_files": 1, "output_dir": out,
                                    "file_prefix": "deletes", "compression": "zstd",
                                    "iceberg_schema": json.dumps({"type": "struct", "schema-id": 0,
                                                                  "fields": fields})})
        f = res["files"][0]
        uri = "%s/data/part=%d/%05d-%s-deletes.parquet" % (self.loc, part, self.nfile, uuid.uuid4())
        with open(f["path"], "rb") as fh:
            self.st.write(uri, fh.read())
        return {"path": uri, "records": f["records"], "size": f["size"], "part": part}

    def puffin(self, dvs):
        data, spans = puffin_file([(f["path"], pos) for f, pos in dvs])
        self.nfile += 1
        uri = "%s/data/%05d-%s-dv.puffin" % (self.loc, self.nfile, uuid.uuid4())
        self.st.write(uri, data)
        return [{"path": uri, "size": len(data), "ref": f["path"], "part": f["part"],
                 "offset": off, "length": ln, "records": len(set(pos))}
                for (f, pos), (off, ln) in zip(dvs, spans)]

    # manifests
    def manifest(self, content, entries, snap):
        """entries: [(status, data_file dict, seq or None, file_seq or None)]."""
        schema = schemas.manifest_entry_schema(self.fv, PART_FIELDS)
        recs = []
        for status, df, seq, fseq in entries:
            recs.append({"status": status, "snapshot_id": df.pop("_snap", snap["snapshot-id"]),
                         "sequence_number": seq, "file_sequence_number": fseq, "data_file": df})
        self.nfile += 1
        path = "%s/metadata/%s-m%d.avro" % (self.loc, uuid.uuid4(), self.nfile)
        data = avro_codec.write_container(schema, recs, "deflate", {
            "schema": json.dumps(SCHEMA), "schema-id": "0", "partition-spec": json.dumps(SPEC["fields"]),
            "partition-spec-id": "0", "format-version": str(self.fv),
            "content": "deletes" if content else "data"})
        self.st.write(path, data)
        cnt = {0: [0, 0], 1: [0, 0], 2: [0, 0]}
        for status, df, _, _ in entries:
            cnt[status][0] += 1
            cnt[status][1] += df["record_count"]
        seqs = [s for _, _, s, _ in entries if s is not None] + [snap["sequence-number"]]
        return {"manifest_path": path, "manifest_length": len(data), "partition_spec_id": 0,
                "content": content, "sequence_number": snap["sequence-number"],
                "min_sequence_number": min(seqs), "added_snapshot_id": snap["snapshot-id"],
                "added_files_count": cnt[1][0], "existing_files_count": cnt[0][0],
                "deleted_files_count": cnt[2][0], "added_rows_count": cnt[1][1],
                "existing_rows_count": cnt[0][1], "deleted_rows_count": cnt[2][1],
                "partitions": None, "key_metadata": None, "first_row_id": None}

    def commit(self, operation, new_records, kept_records):
        """A snapshot whose list is new_records (written by it) + kept ones."""
        m = self.meta
        seq = m["last-sequence-number"] + 1
        sid = int(uuid.uuid4().int & ((1 << 62) - 1)) | 1
        self.ts += 60000
        snap = {"snapshot-id": sid, "sequence-number": seq, "timestamp-ms": self.ts,
                "summary": {"operation": operation}, "schema-id": 0}
        if self.fv >= 3:
            snap["first-row-id"] = m["next-row-id"]
        if m["current-snapshot-id"] >= 0:
            snap["parent-snapshot-id"] = m["current-snapshot-id"]
        recs = [r(snap) for r in new_records]
        # "Row lineage example": new data manifests get first_row_id,
        # advancing by their added and existing rows
        nxt = m.get("next-row-id", 0)
        for r in recs:
            if r["content"] == 0 and self.fv >= 3:
                r["first_row_id"] = nxt
                nxt += r["added_rows_count"] + r["existing_rows_count"]
            if self.fv < 3:
                r.pop("first_row_id", None)
        if self.fv >= 3:
            snap["added-rows"] = nxt - m["next-row-id"]
        lst = recs + kept_records
        path = "%s/metadata/snap-%d-1-%s.avro" % (self.loc, sid, uuid.uuid4())
        hdr = {"snapshot-id": str(sid), "parent-snapshot-id": str(snap.get("parent-snapshot-id", "null")),
               "sequence-number": str(seq), "format-version": str(self.fv)}
        if self.fv >= 3:
            hdr["first-row-id"] = str(m["next-row-id"])
        self.st.write(path, avro_codec.write_container(
            schemas.manifest_list_schema(self.fv), lst, "deflate", hdr))
        snap["manifest-list"] = path
        m["snapshots"].append(snap)
        m["snapshot-log"].append({"snapshot-id": sid, "timestamp-ms": self.ts})
        m["current-snapshot-id"] = sid
        m["refs"] = {"main": {"snapshot-id": sid, "type": "branch"}}
        m["last-sequence-number"] = seq
        m["last-updated-ms"] = self.ts
        if self.fv >= 3:
            m["next-row-id"] = nxt
        self.manifests = lst
        return snap

    def write_metadata(self):
        path = "%s/metadata/00000-%s.metadata.json" % (self.loc, uuid.uuid4())
        self.st.write(path, json.dumps(self.meta, indent=1).encode())
        return path


def _df(f, content=0, first_row_id=None):
    """A data_file record; a delete (content 1) is a deletion vector when
    f has "ref", else a Parquet position delete file."""
    d = {"content": content, "file_path": f["path"],
         "file_format": "PUFFIN" if content == 1 and "ref" in f else "PARQUET",
         "partition": {"part": f["part"]}, "record_count": f["records"],
         "file_size_in_bytes": f["size"], "first_row_id": first_row_id}
    if content == 1 and "ref" in f:
        d.update({"referenced_data_file": f["ref"], "content_offset": f["offset"],
                  "content_size_in_bytes": f["length"]})
    return d


def write_table(st, location, extra_appends=0, position_deletes=False, drop_c=False):
    """Write the v3 table below location (file://); returns {metadata_location,
    meta, files}.  Snapshots (sequence numbers 1..6, +extra_appends):
      1 append A (part 0, 5 rows), B (part 1, 7 rows);
      2 append C (part 0, 4 rows);
      3 replace B by E (its rows moved: _row_id and sequence number
        written, one row modified with a null sequence number);
      4 delete: one Puffin file of DVs for A {1, 3} and C {0};
      5 delete: A's DV replaced by {1, 3, 4} (the old one DELETED);
      6 append F (part 1, 6000 rows) and its DV of every even position
        (a bitmap container) in the same snapshot: an overwrite;
      then extra_appends appends of one small file each (more manifests);
      with position_deletes, then a delete snapshot of v2 position delete
      files (Parquet), as a table upgraded from v2 keeps them: in part 0
      one deleting A 0 and C 2 (A's and C's DVs stay: two deletes of one
      data file, which a position delete rewrite on v3 merges into one
      DV), in part 1 one deleting F 1 and 3 (odd positions, F's DV holds
      the even ones) and E 6; with drop_c, then a delete snapshot that
      removes the data file C (its rows gone) and leaves its deletion
      vector and the position delete of it: dangling deletes."""
    tmp = tempfile.mkdtemp(prefix="tms-v3w-")
    t = _Table(st, location, tmp)
    A = t.parquet([(i, "a%d" % i, 0) for i in range(5)])
    B = t.parquet([(100 + i, "b%d" % i, 1) for i in range(7)])
    t.commit("append", [lambda s: t.manifest(0, [(1, _df(A), None, None), (1, _df(B), None, None)], s)], [])
    m1 = t.manifests[0]
    C = t.parquet([(200 + i, "c%d" % i, 0) for i in range(4)])
    t.commit("append", [lambda s: t.manifest(0, [(1, _df(C), None, None)], s)], list(t.manifests))
    m2 = t.manifests[0]
    # B's rows got ids 5..11 (m1 first_row_id 0, after A's 5 rows) at seq 1
    E = t.parquet([(100, "b0-modified", 1, 5, None)] +
                  [(100 + i, "b%d" % i, 1, 5 + i, 1) for i in range(1, 7)], lineage=True)
    t.commit("replace", [
        lambda s: t.manifest(0, [(1, _df(E), None, None)], s),
        lambda s: t.manifest(0, [(0, dict(_df(A, first_row_id=0), _snap=m1["added_snapshot_id"]), 1, 1),
                                 (2, _df(B, first_row_id=5), 1, 1)], s)], [m2])
    m3, m1b = t.manifests[0], t.manifests[1]
    dv1 = t.puffin([(A, [1, 3]), (C, [0])])
    t.commit("delete", [lambda s: t.manifest(1, [(1, _df(d, 1), None, None) for d in dv1], s)],
             list(t.manifests))
    m4 = t.manifests[0]
    dv2 = t.puffin([(A, [1, 3, 4])])
    t.commit("delete", [
        lambda s: t.manifest(1, [(1, _df(dv2[0], 1), None, None)], s),
        lambda s: t.manifest(1, [(2, _df(dv1[0], 1), 4, 4),
                                 (0, dict(_df(dv1[1], 1), _snap=m4["added_snapshot_id"]), 4, 4)], s)],
        [m3, m1b, m2])
    F = t.parquet([(1000 + i, "f%d" % i, 1) for i in range(6000)])
    dv3 = t.puffin([(F, list(range(0, 6000, 2)))])
    kept = list(t.manifests)
    t.commit("overwrite", [lambda s: t.manifest(0, [(1, _df(F), None, None)], s),
                           lambda s: t.manifest(1, [(1, _df(dv3[0], 1), None, None)], s)], kept)
    files = {"A": A, "B": B, "C": C, "E": E, "F": F}
    for k in range(extra_appends):
        G = t.parquet([(5000 + 10 * k + i, "g", k % 2) for i in range(3)])
        t.commit("append", [lambda s, G=G: t.manifest(0, [(1, _df(G), None, None)], s)],
                 list(t.manifests))
        files["G%d" % k] = G
    if position_deletes:
        p0 = t.posdel(0, [(A, 0), (C, 2)])
        p1 = t.posdel(1, [(F, 1), (F, 3), (E, 6)])
        t.commit("delete", [lambda s: t.manifest(1, [(1, _df(p0, 1), None, None),
                                                     (1, _df(p1, 1), None, None)], s)],
                 list(t.manifests))
        files.update({"P0": p0, "P1": p1})
    if drop_c:
        # C was appended at sequence number 2, its first row id 12 (after
        # A's 5 and B's 7 rows)
        t.commit("delete", [lambda s: t.manifest(0, [(2, _df(C, first_row_id=12), 2, 2)], s)],
                 [r for r in t.manifests if r is not m2])
    return {"metadata_location": t.write_metadata(), "meta": t.meta, "files": files}


def dv_commit(st, meta, data_file, part, positions):
    """A commit body (for a catalog's interposition) adding one deletion
    vector of positions for data_file (partition part) in a new Puffin
    file, as a concurrent v3 writer would: a "delete" snapshot whose list
    is a new delete manifest plus the current ones; no row added."""
    cur = _snapshot(meta)
    _, hdr, recs = avro_codec.read_container(st.read(cur["manifest-list"]))
    loc = meta["location"].rstrip("/")
    tag = uuid.uuid4().hex
    data, spans = puffin_file([(data_file, positions)])
    puffin = "%s/data/%s-interposed-dv.puffin" % (loc, tag)
    st.write(puffin, data)
    seq = meta["last-sequence-number"] + 1
    sid = int(uuid.uuid4().int & ((1 << 62) - 1)) | 1
    df = {"content": 1, "file_path": puffin, "file_format": "PUFFIN", "partition": {"part": part},
          "record_count": len(set(positions)), "file_size_in_bytes": len(data),
          "first_row_id": None, "referenced_data_file": data_file,
          "content_offset": spans[0][0], "content_size_in_bytes": spans[0][1]}
    mpath = "%s/metadata/%s-interposed-m0.avro" % (loc, tag)
    mdata = avro_codec.write_container(schemas.manifest_entry_schema(3, PART_FIELDS), [
        {"status": 1, "snapshot_id": sid, "sequence_number": None, "file_sequence_number": None,
         "data_file": df}], "deflate", {
        "schema": json.dumps(SCHEMA), "schema-id": "0", "partition-spec": json.dumps(SPEC["fields"]),
        "partition-spec-id": "0", "format-version": "3", "content": "deletes"})
    st.write(mpath, mdata)
    rec = {"manifest_path": mpath, "manifest_length": len(mdata), "partition_spec_id": 0,
           "content": 1, "sequence_number": seq, "min_sequence_number": seq,
           "added_snapshot_id": sid, "added_files_count": 1, "existing_files_count": 0,
           "deleted_files_count": 0, "added_rows_count": df["record_count"],
           "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
           "key_metadata": None, "first_row_id": None}
    lpath = "%s/metadata/snap-%d-1-%s.avro" % (loc, sid, tag)
    st.write(lpath, avro_codec.write_container(schemas.manifest_list_schema(3), [rec] + recs, "deflate", {
        "snapshot-id": str(sid), "parent-snapshot-id": str(cur["snapshot-id"]),
        "sequence-number": str(seq), "format-version": "3", "first-row-id": str(meta["next-row-id"])}))
    snap = {"snapshot-id": sid, "parent-snapshot-id": cur["snapshot-id"], "sequence-number": seq,
            "timestamp-ms": max(int(time.time() * 1000), cur["timestamp-ms"] + 1),
            "summary": {"operation": "delete"}, "schema-id": 0, "manifest-list": lpath,
            "first-row-id": meta["next-row-id"], "added-rows": 0}
    return {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                              "snapshot-id": cur["snapshot-id"]}],
            "updates": [{"action": "add-snapshot", "snapshot": snap},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": sid}]}


# ---------------------------------------------------------------------------
# the reference reader
# ---------------------------------------------------------------------------

def _snapshot(meta, sid=None):
    sid = meta["current-snapshot-id"] if sid is None else sid
    return next(s for s in meta["snapshots"] if s["snapshot-id"] == sid)


def entries(st, meta, sid=None):
    """Every entry of a snapshot's manifests, with what it inherits:
    [{status, content, path, records, seq, file_seq, first_row_id, ref,
    offset, length, manifest, manifest_first_row_id, partition}]
    ("Sequence Number Inheritance", "First Row ID Inheritance")."""
    snap = _snapshot(meta, sid)
    _, _, lst = avro_codec.read_container(st.read(snap["manifest-list"]))
    out = []
    for rec in lst:
        _, _, ents = avro_codec.read_container(st.read(rec["manifest_path"]))
        nxt = rec.get("first_row_id")
        for e in ents:
            df = e["data_file"]
            content = df.get("content") or 0
            seq, fseq = e.get("sequence_number"), e.get("file_sequence_number")
            if e["status"] == 1:
                seq = rec["sequence_number"] if seq is None else seq
                fseq = rec["sequence_number"] if fseq is None else fseq
            frid = df.get("first_row_id")
            if content == 0 and frid is None and nxt is not None:
                frid = nxt
                nxt += df["record_count"]
            out.append({"status": e["status"], "content": content, "path": df["file_path"],
                        "records": df["record_count"], "seq": seq, "file_seq": fseq,
                        "snapshot_id": e.get("snapshot_id"),
                        "first_row_id": frid, "written_first_row_id": df.get("first_row_id"),
                        "ref": df.get("referenced_data_file"), "offset": df.get("content_offset"),
                        "length": df.get("content_size_in_bytes"),
                        "format": df.get("file_format"), "manifest": rec["manifest_path"],
                        "manifest_content": rec.get("content") or 0,
                        "manifest_first_row_id": rec.get("first_row_id"),
                        "partition": json.dumps(df.get("partition") or {}, sort_keys=True)})
    return out


def live(st, meta, sid=None):
    return [e for e in entries(st, meta, sid) if e["status"] != 2]


def dv_positions(st, e):
    """The positions a DV entry deletes, its blob checked against the
    Puffin footer (offset, length, referenced file, cardinality)."""
    data = st.read(e["path"])
    foot = read_puffin_footer(data)
    blob = next((b for b in foot["blobs"] if b["offset"] == e["offset"]), None)
    if blob is None or blob["length"] != e["length"] or blob["type"] != "deletion-vector-v1" or \
            blob["properties"]["referenced-data-file"] != e["ref"]:
        raise ValueError("DV entry of %s does not match its Puffin footer" % e["path"])
    pos = read_dv_blob(data[e["offset"]:e["offset"] + e["length"]])
    if len(pos) != e["records"] or int(blob["properties"]["cardinality"]) != len(pos):
        raise ValueError("DV cardinality differs from record_count")
    return pos


def rows(st, meta, sid=None):
    """The rows of a snapshot, sorted: (id, name, part, _row_id,
    _last_updated_sequence_number), DVs applied ("Row Lineage": null
    _row_id = first_row_id + _pos, null sequence number = the data file's
    data sequence number)."""
    files = live(st, meta, sid)
    data = [f for f in files if f["content"] == 0]
    dvs = [f for f in files if f["content"] == 1 and (f["format"] or "").lower() == "puffin"]
    posdel = [f for f in files if f["content"] == 1 and (f["format"] or "").lower() != "puffin"]
    per_file = {}
    for d in dvs:
        if d["ref"] in per_file:
            raise ValueError("two deletion vectors for %s in one snapshot" % d["ref"])
        per_file[d["ref"]] = d
    res = compact_mod.run_node({"mode": "read", "files": [
        {"path": st.local_path(f["path"]), "fields": READ_FIELDS} for f in data] + [
        {"path": st.local_path(f["path"]), "fields": [{"id": POS_PATH, "type": "string"},
                                                      {"id": POS_POS, "type": "long"}]}
        for f in posdel]}, timeout=300)
    # v2 position deletes (https://iceberg.apache.org/spec/#scan-planning):
    # (file_path, pos) with the delete file's sequence number
    pos_rows = {}
    for f, r in zip(posdel, res["files"][len(data):]):
        for row in r["rows"]:
            pos_rows.setdefault(row[1], []).append((int(row[2]), f["seq"]))
    out = []
    for f, r in zip(data, res["files"]):
        deleted = set()
        dv = per_file.get(f["path"])
        if dv is not None and dv["seq"] >= f["seq"]:
            deleted = dv_positions(st, dv)
        deleted = set(deleted) | {p for p, seq in pos_rows.get(f["path"], ()) if seq >= f["seq"]}
        for row in r["rows"]:
            pos = int(row[0])
            if pos in deleted:
                continue
            rid = row[4]
            if rid is None:
                rid = None if f["first_row_id"] is None else f["first_row_id"] + pos
            lseq = row[5] if row[5] is not None else f["seq"]
            out.append((int(row[1]), row[2], row[3], None if rid is None else int(rid), int(lseq)))
    return sorted(out)


def check_lineage(meta):
    """The table-level row lineage rules ("Snapshot Row IDs"): every v3
    snapshot has first-row-id and added-rows; in commit order each
    first-row-id is at least the previous one plus its added-rows; the
    table's next-row-id is at least the last one's first-row-id +
    added-rows.  Returns [] or the violations."""
    bad, floor = [], 0
    for s in sorted(meta["snapshots"], key=lambda s: s.get("sequence-number", 0)):
        f, a = s.get("first-row-id"), s.get("added-rows")
        if not isinstance(f, int) or not isinstance(a, int) or a < 0:
            bad.append("snapshot %d lacks first-row-id/added-rows" % s["snapshot-id"])
            continue
        if f < floor:
            bad.append("snapshot %d first-row-id %d < %d" % (s["snapshot-id"], f, floor))
        floor = f + a
    if meta.get("next-row-id", -1) < floor:
        bad.append("next-row-id %r < %d" % (meta.get("next-row-id"), floor))
    return bad
