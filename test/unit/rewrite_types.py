#!/usr/bin/python3
"""
rewrite_types.py -- a small Iceberg v2 table for test/unit/rewrite_test.c
whose partition has one field of every type the manifest rewrite
summarises, and manifests of every kind it must treat apart.

    /usr/bin/python3 test/unit/rewrite_types.py DIR

Writes DIR/metadata/v1.metadata.json (location file://DIR), one manifest
list and:
  - 12 data manifests of 6 entries each (statuses ADDED with inherited
    sequence numbers, EXISTING with explicit ones, DELETED), partition
    (boolean, int, long, float, double, string, bytes, decimal(9,2) as
    fixed[5], date) with nulls, NaN, -0.0, negative decimals and non-ASCII
    strings: they are merged;
  - 2 data manifests written with the v1 manifest_entry schema (no
    sequence numbers): in a v2 table they must be kept.
Deterministic (seeded).  Uses the test world's Avro codec.
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "catalog"))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import avro_codec  # noqa: E402
import iceberg_avro_schemas as schemas  # noqa: E402

out = os.path.abspath(sys.argv[1])
os.makedirs(out + "/metadata", exist_ok=True)
loc = "file://" + out
rnd = random.Random(11)

PART = [("b", "boolean", 1000), ("i", "int", 1001), ("l", "long", 1002),
        ("f", "float", 1003), ("d", "double", 1004), ("s", "string", 1005),
        ("bin", "bytes", 1006),
        ("dec", {"type": "fixed", "name": "fixed_5", "size": 5, "logicalType": "decimal",
                 "precision": 9, "scale": 2}, 1007),
        ("day", {"type": "int", "logicalType": "date"}, 1008)]


def pval():
    def maybe(v):
        return None if rnd.random() < 0.15 else v
    f = rnd.choice([1.5, -2.25, 0.0, -0.0, float("nan"), 3.0e9, -7.0])
    d = rnd.choice([1e-300, -1e300, 0.5, float("nan"), -0.0, 42.0])
    dec = rnd.randint(-10 ** 9 + 1, 10 ** 9 - 1)
    return {"b": maybe(rnd.random() < 0.5), "i": maybe(rnd.randint(-2 ** 31, 2 ** 31 - 1)),
            "l": maybe(rnd.randint(-2 ** 63, 2 ** 63 - 1)), "f": maybe(f), "d": maybe(d),
            "s": maybe(rnd.choice(["a", "\u00e9t\u00e9", "zz", "", "A\"q\\", "\u65e5\u672c", "ctl\x01"])),
            "bin": maybe(bytes(rnd.randint(0, 255) for _ in range(rnd.randint(0, 4)))),
            "dec": maybe(dec.to_bytes(5, "big", signed=True)),
            "day": maybe(rnd.randint(-1000, 30000))}


def data_file(n, fv):
    df = {"content": 0, "file_path": "%s/data/f-%05d.parquet" % (loc, n), "file_format": "PARQUET",
          "partition": pval(), "record_count": rnd.randint(1, 10 ** 6),
          "file_size_in_bytes": rnd.randint(1, 10 ** 9),
          "column_sizes": [{"key": 1, "value": 10}], "value_counts": None,
          "null_value_counts": None, "nan_value_counts": None,
          "lower_bounds": [{"key": 1, "value": b"\x00\x01"}],
          "upper_bounds": [{"key": 1, "value": b"\xff"}], "key_metadata": None,
          "split_offsets": [4, 1000], "equality_ids": None, "sort_order_id": 0,
          "referenced_data_file": None}
    if fv == 1:
        del df["content"], df["equality_ids"], df["referenced_data_file"]
        df["block_size_in_bytes"] = 67108864
    return df


meta = {"schema": "{}", "schema-id": "0", "partition-spec": "[]", "partition-spec-id": "0",
        "format-version": "2", "content": "data"}
records = []
n = 0
for k in range(14):
    fv = 1 if k >= 12 else 2
    schema = schemas.manifest_entry_schema(fv, PART)
    mseq = 1 + k % 3
    ents = []
    for j in range(6):
        n += 1
        st = [1, 0, 0, 1, 2, 0][j]
        e = {"status": st, "snapshot_id": None if st == 1 else 100 + j, "data_file": data_file(n, fv)}
        if fv == 2:
            e["sequence_number"] = None if st == 1 else max(1, mseq - 1)
            e["file_sequence_number"] = None if st == 1 else max(1, mseq - 1)
        ents.append(e)
    data = avro_codec.write_container(schema, ents, "deflate", meta)
    path = "%s/metadata/types-%02d-m0.avro" % (loc, k)
    with open(path[len("file://"):], "wb") as f:
        f.write(data)
    records.append({"manifest_path": path, "manifest_length": len(data), "partition_spec_id": 0,
                    "content": 0, "sequence_number": mseq, "min_sequence_number": 1,
                    "added_snapshot_id": 200 + k,
                    "added_files_count": 2, "existing_files_count": 3, "deleted_files_count": 1,
                    "added_rows_count": 0, "existing_rows_count": 0, "deleted_rows_count": 0,
                    "partitions": None, "key_metadata": None})

lst = "%s/metadata/snap-9-1-types.avro" % loc
with open(lst[len("file://"):], "wb") as f:
    f.write(avro_codec.write_container(
        schemas.manifest_list_schema(2), records, "deflate",
        {"snapshot-id": "9", "parent-snapshot-id": "null", "sequence-number": "3",
         "format-version": "2"}))

cols = [{"id": 1 + i, "name": "c%d" % i, "required": False,
         "type": t if isinstance(t, str) else ("decimal(9, 2)" if t["type"] == "fixed" else "date")}
        for i, (_, t, _) in enumerate(PART)]
for c in cols:
    c["type"] = {"bytes": "binary", "int": "int"}.get(c["type"], c["type"])
md = {"format-version": 2, "table-uuid": "9a1c7e0e-0000-4000-8000-000000000001",
      "location": loc, "last-sequence-number": 3, "last-updated-ms": 1700000000000,
      "last-column-id": len(PART), "current-schema-id": 0,
      "schemas": [{"type": "struct", "schema-id": 0, "fields": cols}],
      "default-spec-id": 0, "last-partition-id": 1008,
      "partition-specs": [{"spec-id": 0, "fields": [
          {"name": nm, "transform": "identity", "source-id": 1 + i, "field-id": fid}
          for i, (nm, _, fid) in enumerate(PART)]}],
      "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
      "properties": {}, "current-snapshot-id": 9,
      "snapshots": [{"snapshot-id": 9, "sequence-number": 3, "timestamp-ms": 1700000000000,
                     "manifest-list": lst, "schema-id": 0,
                     "summary": {"operation": "append", "total-data-files": str(n)}}],
      "snapshot-log": [], "metadata-log": [],
      "refs": {"main": {"snapshot-id": 9, "type": "branch"}}}
with open(out + "/metadata/v1.metadata.json", "w") as f:
    json.dump(md, f)
print(json.dumps({"manifests": len(records), "entries": n}))
