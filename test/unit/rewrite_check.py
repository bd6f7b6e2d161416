#!/usr/bin/python3
"""
rewrite_check.py -- the independent reader of test/unit/rewrite_test.c.

    /usr/bin/python3 test/unit/rewrite_check.py OLD_LIST NEW_LIST NEW_SNAPSHOT_ID \
        FORMAT_VERSION [PREFIX FOLDER]

Reads the manifest list before and after a manifest rewrite with the test
world's own Avro codec (test/catalog/avro_codec.py, not the C reader) and
checks, exiting 1 with a reason on the first failure:
  - the multiset of live entries (snapshot id, data and file sequence
    numbers after inheritance, the whole decoded data_file) is the same;
  - kept manifest-list records are identical; new ones were added by the
    new snapshot, hold only EXISTING entries with explicit snapshot id and
    (v2) sequence numbers, and their counts, row counts and
    min_sequence_number match their entries;
  - the partition summaries of new manifests are exact: contains_null,
    contains_nan, and lower/upper bounds decoded from Iceberg's
    single-value serialization equal the min/max of the entries' values.
With REWRITE_CHECK_SUMMARIES set, a new manifest without summaries fails.
Paths starting with PREFIX are read below FOLDER; "file://" is stripped.
Prints "ok <live entries> <new manifests> <kept manifests>".
"""

import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "catalog"))
import avro_codec  # noqa: E402
import warnings  # noqa: E402

warnings.simplefilter("ignore")     # python3-avro's notes on logical types

args = sys.argv[1:]
old_list, new_list, new_id, fv = args[0], args[1], int(args[2]), int(args[3])
prefix, folder = (args[4], args[5]) if len(args) >= 6 else (None, None)


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def local(path):
    if prefix and path.startswith(prefix):
        path = folder + path[len(prefix):]
    if path.startswith("file://"):
        path = path[len("file://"):]
    return path


def read(path):
    with open(local(path), "rb") as f:
        return avro_codec.read_container(f.read())


def field(m, name, old):
    """A manifest_file field by its name or the older writers' name."""
    return m[name] if name in m else m.get(old)


def canon(v):
    return json.dumps(v, sort_keys=True, default=lambda b: b.hex())


def live_entries(list_path):
    _, _, recs = read(list_path)
    out = []
    for m in recs:
        schema, _, ents = read(m["manifest_path"])
        mseq = m.get("sequence_number") or 0
        for e in ents:
            st = e["status"]
            if st == 2:
                continue
            snap = e["snapshot_id"] if e["snapshot_id"] is not None else m["added_snapshot_id"]
            seq = e.get("sequence_number")
            fseq = e.get("file_sequence_number")
            if seq is None and (st == 1 or mseq == 0):
                seq = mseq
            if fseq is None and (st == 1 or mseq == 0):
                fseq = mseq
            if fv == 1:
                seq, fseq = seq or 0, fseq or 0
            out.append((m, schema, e, (snap, repr(seq), repr(fseq), canon(e["data_file"]))))
    return recs, out


def partition_types(schema):
    def strip(t):
        if isinstance(t, list):
            t = [b for b in t if b != "null"][0]
        return t
    df = strip([f for f in schema["fields"] if f.get("field-id") == 2][0]["type"])
    part = strip([f for f in df["fields"] if f.get("field-id") == 102][0]["type"])
    types = []
    for f in part["fields"]:
        t = strip(f["type"])
        if isinstance(t, dict):
            if t.get("logicalType") == "decimal":
                types.append((f["name"], "decimal"))
            else:
                types.append((f["name"], t["type"]))
        else:
            types.append((f["name"], t))
    return types


def decode_bound(kind, b):
    if kind == "boolean":
        return b[0] != 0
    if kind == "int":
        return struct.unpack("<i", b)[0]
    if kind == "long":
        return struct.unpack("<q", b)[0]
    if kind == "float":
        return struct.unpack("<f", b)[0]
    if kind == "double":
        return struct.unpack("<d", b)[0]
    if kind == "string":
        return b.decode("utf-8")
    if kind == "decimal":
        return int.from_bytes(b, "big", signed=True)
    return bytes(b)


def value_key(kind, v):
    if kind == "decimal":
        return int.from_bytes(v, "big", signed=True)
    if kind == "string":
        return v.encode("utf-8")    # byte order == code point order
    return v


old_recs, old_live = live_entries(old_list)
new_recs, new_live = live_entries(new_list)
a = sorted(k for *_, k in old_live)
b = sorted(k for *_, k in new_live)
if a != b:
    fail("live entries differ: %d before, %d after" % (len(a), len(b)))

old_by_path = {r["manifest_path"]: r for r in old_recs}
new_manifests = [r for r in new_recs if r["added_snapshot_id"] == new_id]
kept = [r for r in new_recs if r["added_snapshot_id"] != new_id]
for r in kept:
    if canon(old_by_path.get(r["manifest_path"])) != canon(r):
        fail("kept record changed: " + r["manifest_path"])

for m in new_manifests:
    schema, meta, ents = read(m["manifest_path"])
    existing = field(m, "existing_files_count", "existing_data_files_count")
    if len(ents) != existing:
        fail("existing_files_count %s != %d entries" % (existing, len(ents)))
    if (field(m, "added_files_count", "added_data_files_count") != 0 or
            field(m, "deleted_files_count", "deleted_data_files_count") != 0):
        fail("added/deleted counts not 0")
    if sum(e["data_file"]["record_count"] for e in ents) != m["existing_rows_count"]:
        fail("existing_rows_count")
    if meta.get("partition-spec-id") is not None and int(meta["partition-spec-id"]) != m["partition_spec_id"]:
        fail("partition-spec-id header")
    for e in ents:
        if e["status"] != 0:
            fail("a rewritten entry is not EXISTING")
        if e["snapshot_id"] is None:
            fail("a rewritten entry has no explicit snapshot id")
        if fv >= 2 and (e.get("sequence_number") is None or e.get("file_sequence_number") is None):
            fail("a rewritten entry has no explicit sequence numbers")
    if fv >= 2 and ents and m["min_sequence_number"] != min(e["sequence_number"] for e in ents):
        fail("min_sequence_number")
    if m.get("partitions") is None:
        if os.environ.get("REWRITE_CHECK_SUMMARIES"):
            fail("a new manifest without partition summaries")
        continue
    types = partition_types(schema)
    if len(types) != len(m["partitions"]):
        fail("partition summary count")
    for i, (name, kind) in enumerate(types):
        vals = [e["data_file"]["partition"][name] for e in ents]
        s = m["partitions"][i]
        has_null = any(v is None for v in vals)
        nonnull = [v for v in vals if v is not None]
        has_nan = any(isinstance(v, float) and math.isnan(v) for v in nonnull)
        bounded = [value_key(kind, v) for v in nonnull
                   if not (isinstance(v, float) and math.isnan(v))]
        if s["contains_null"] != has_null:
            fail("contains_null of %s" % name)
        if s.get("contains_nan") is not None and s["contains_nan"] != has_nan:
            fail("contains_nan of %s" % name)
        if not bounded:
            if s["lower_bound"] is not None or s["upper_bound"] is not None:
                fail("bounds without values for %s" % name)
            continue
        lo = decode_bound(kind, s["lower_bound"])
        hi = decode_bound(kind, s["upper_bound"])
        if kind == "string":
            lo, hi = lo.encode("utf-8"), hi.encode("utf-8")
        if lo != min(bounded) or hi != max(bounded):
            fail("bounds of %s: [%r, %r] vs [%r, %r]" % (name, lo, hi, min(bounded), max(bounded)))

# A second reader, where installed: Apache Avro's own (python3-avro) must
# read the new list and the new manifests record for record alike (by
# the fields that its logical-type conversions leave as they are).
try:
    import avro.datafile
    import avro.io
except ImportError:
    avro = None
if avro is not None:
    for path in [new_list] + [m["manifest_path"] for m in new_manifests]:
        with open(local(path), "rb") as f:
            recs = list(avro.datafile.DataFileReader(f, avro.io.DatumReader()))
        def ident(r):
            if "manifest_path" in r:
                return (r["manifest_path"], r["added_snapshot_id"], r["manifest_length"])
            return (r["status"], r["snapshot_id"], r["data_file"]["file_path"],
                    r["data_file"]["record_count"], r["data_file"]["file_size_in_bytes"])
        if [ident(r) for r in recs] != [ident(r) for r in read(path)[2]]:
            fail("python3-avro reads %s differently" % path)

print("ok %d %d %d" % (len(b), len(new_manifests), len(kept)))
