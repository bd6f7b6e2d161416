"""
smallfiles.py -- synthetic Iceberg tables of many small REAL Parquet files,
for the compaction tests and the demo.

    make_table(catalog, st, namespace, name, *, files=200, rows_per_file=50,
               partitioned=True, with_deletes=False, seed=0)
        -> metadata location

catalog is a world.CatalogServer, st an opsworld.storage() object.  The
table (format v2) is created through the catalog (CreateTableRequest, at
the catalog's default location), then filled by several append snapshots
(at most 40 files each, at least 5 snapshots when there are files enough),
each a manifest of ADDED entries plus the manifests before it, committed as
a REST commit asserting main.  The data files are written by DuckDB
(test/node/compact.mjs, mode "write") with Iceberg field ids, the
"iceberg.schema" key-value metadata and full column metrics in the
manifests, so icebird (test/opsworld.icebird) reads the rows.

Schema: id long (required, unique, 0..files*rows_per_file-1), category
string ("c0".."c3", the identity partition when partitioned; file i holds
category c(i % 4)), amount decimal(10,2), score double (null every 11th
row), day date, ts timestamptz, flag boolean.  Values derive from id and
the seed only, so tables are reproducible.

with_deletes adds two snapshots: position deletes (one file per affected
partition, rows 0 and 3 of every 7th data file) and equality deletes on id
(one file in partition c1, ids congruent to 5 modulo 97 among c1's rows).

Rules: no sleeping; the data files are written by one node process (one
DuckDB COPY a file, then read back and checked against the rows it was
given: each file exactly its rows, in order); nothing here talks to
PostgreSQL.
"""

import json
import os
import random
import shutil
import sys
import tempfile
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_DIR = os.path.dirname(HERE)
for _d in (os.path.join(TEST_DIR, "catalog"), os.path.join(TEST_DIR, "fixtures"), TEST_DIR, HERE):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import avro_codec  # noqa: E402
import storage as storage_mod  # noqa: E402
import iceberg_avro_schemas  # noqa: E402
import opsworld  # noqa: E402
import compact as compact_mod  # noqa: E402

CATEGORIES = 4
POS_FIELDS = compact_mod.POS_FIELDS

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "category", "required": False, "type": "string"},
    {"id": 3, "name": "amount", "required": False, "type": "decimal(10, 2)"},
    {"id": 4, "name": "score", "required": False, "type": "double"},
    {"id": 5, "name": "day", "required": False, "type": "date"},
    {"id": 6, "name": "ts", "required": False, "type": "timestamptz"},
    {"id": 7, "name": "flag", "required": False, "type": "boolean"}]}


def _columns(category, seed):
    """The select list of the columns c_<field id> of the row of id x (a
    BIGINT column of the FROM clause), category an SQL expression."""
    k = seed % 1000
    return ("x::BIGINT AS c_1, %s AS c_2, "
            "(((x * 37 + %d) %% 100000) / 100.0)::DECIMAL(10,2) AS c_3, "
            "CASE WHEN x %% 11 = 0 THEN NULL ELSE (x * 1.5 + %d)::DOUBLE END AS c_4, "
            "DATE '2024-01-01' + ((x + %d) %% 30)::INTEGER AS c_5, "
            "TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_seconds(x * 60 + %d) AS c_6, "
            "((x + %d) %% 3 = 0) AS c_7" % (category, k, k, k, k, k))


def _rows_query(first, count, category, seed):
    """DuckDB SQL of `count` rows with ids first.. (columns c_<field id>)."""
    return ("SELECT %s FROM (SELECT (%d + i)::BIGINT AS x FROM range(%d) t(i)) r ORDER BY x"
            % (_columns("'%s'" % category if category is not None else "NULL", seed),
               first, count))


def _files_query(files, rows_per_file, seed):
    """DuckDB SQL of the rows of every data file at once, for compact.mjs's
    by_file write: file i (column __file) holds ids i * rows_per_file..
    (in order), category c(i % 4)."""
    return ("SELECT __file, %s FROM (SELECT i::BIGINT AS x, (i // %d)::BIGINT AS __file"
            " FROM range(%d) t(i)) r ORDER BY x"
            % (_columns("'c' || (__file %% %d)::VARCHAR" % CATEGORIES, seed),
               rows_per_file, files * rows_per_file))


def _create(catalog, namespace, name, partitioned):
    levels = [namespace] if isinstance(namespace, str) else list(namespace)
    catalog.create_namespace(*levels)
    spec = {"spec-id": 0, "fields": [{"name": "category", "transform": "identity",
                                      "source-id": 2, "field-id": 1000}] if partitioned else []}
    body = {"name": name, "schema": SCHEMA, "partition-spec": spec,
            "properties": {"format-version": "2", "write.parquet.compression-codec": "zstd"}}
    catalog.request("POST", "namespaces/%s/tables" % urllib.parse.quote("\x1f".join(levels)),
                    body)
    return levels


def _manifest(st, meta, snap, partitioned, entries, content):
    """Write one manifest of ADDED entries; returns its manifest list record."""
    fv = 2
    pfields = [("category", "string", 1000)] if partitioned else []
    schema = iceberg_avro_schemas.manifest_entry_schema(fv, pfields)
    hmeta = {"schema": json.dumps(SCHEMA), "schema-id": "0",
             "partition-spec": json.dumps(meta["partition-specs"][0]["fields"]),
             "partition-spec-id": "0", "format-version": str(fv),
             "content": "data" if content == 0 else "deletes"}
    recs = [opsworld._conform({"status": 1, "snapshot_id": snap["snapshot-id"],
                               "sequence_number": None, "file_sequence_number": None,
                               "data_file": df}, json.loads(schema)) for df in entries]
    path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"), uuid.uuid4())
    data = avro_codec.write_container(schema, recs, "deflate", hmeta)
    st.write(path, data)
    seq = snap["sequence-number"]
    return {"manifest_path": path, "manifest_length": len(data), "partition_spec_id": 0,
            "content": 0 if content == 0 else 1, "sequence_number": seq,
            "min_sequence_number": seq, "added_snapshot_id": snap["snapshot-id"],
            "added_files_count": len(entries), "existing_files_count": 0,
            "deleted_files_count": 0,
            "added_rows_count": sum(e["record_count"] for e in entries),
            "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
            "key_metadata": None}


def _data_file(uri, out, partition, content=0, equality_ids=None, schema=None, truncate=16):
    df = {"content": content, "file_path": uri, "file_format": "PARQUET",
          "partition": partition, "record_count": out["records"],
          "file_size_in_bytes": out["size"], "key_metadata": None, "split_offsets": None,
          "equality_ids": equality_ids, "sort_order_id": 0 if content != 1 else None,
          "referenced_data_file": None}
    df.update(compact_mod.data_file_metrics(schema or SCHEMA, out, truncate))
    return df


def _snapshot(meta, rnd, operation):
    snap = opsworld._new_snapshot(meta, rnd, None, operation, {})
    snap["manifest-list"] = "%s/metadata/snap-%d-1-%s.avro" % (
        meta["location"].rstrip("/"), snap["snapshot-id"], uuid.uuid4())
    return snap


def make_table(catalog, st, namespace, name, *, files=200, rows_per_file=50,
               partitioned=True, with_deletes=False, seed=0):
    """Create and fill the table (see the module comment); returns the
    metadata location of its last commit."""
    rnd = random.Random(seed)
    levels = _create(catalog, namespace, name, partitioned)
    _, meta = opsworld.load(catalog, levels, name)
    data_dir = compact_mod.data_location(meta)
    tmp = tempfile.mkdtemp(prefix="tms-smallfiles-")
    try:
        # the data files: one node run, one COPY a file (compact.mjs's
        # by_file write, which reads them back and checks every file holds
        # exactly its rows, in order), described by three queries over all
        outs = compact_mod.run_node({
            "mode": "write", "by_file": True, "schema": {"fields": SCHEMA["fields"]},
            "query": _files_query(files, rows_per_file, seed),
            "output_dir": os.path.join(tmp, "data"), "file_prefix": "data",
            "compression": "zstd", "iceberg_schema": json.dumps(SCHEMA)},
            timeout=300 + files // 10)["files"] if files else []
        if [o["file"] for o in outs] != list(range(files)) or \
                any(o["records"] != rows_per_file for o in outs):
            raise RuntimeError("compact.mjs wrote %d files of %d, not %d rows each"
                               % (len(outs), files, rows_per_file))
        written = []
        for i, o in enumerate(outs):
            cat = "c%d" % (i % CATEGORIES)
            sub = ("category=%s/" % cat) if partitioned else ""
            prefix = "%05d-%d-%s" % (i, seed, uuid.UUID(int=rnd.getrandbits(128)))
            uri = data_dir + "/" + sub + prefix + "-00000.parquet"
            _put(st, uri, o["path"])
            part = {"category": cat} if partitioned else {}
            written.append((i, cat, uri, o, _data_file(uri, o, part)))
        # append snapshots
        per = max(1, min(40, -(-files // 5)))
        records = []
        mloc = None
        # the summary totals every snapshot carries, as Iceberg writes them
        tot = {"total-data-files": 0, "total-records": 0, "total-files-size": 0,
               "total-delete-files": 0, "total-position-deletes": 0,
               "total-equality-deletes": 0}

        def totals(summary, **add):
            for k, v in add.items():
                tot["total-" + k.replace("_", "-")] += v
            summary.update({k: str(v) for k, v in tot.items()})
        for start in range(0, files, per):
            chunk = written[start:start + per]
            snap = _snapshot(meta, rnd, "append")
            rec = _manifest(st, meta, snap, partitioned, [w[4] for w in chunk], 0)
            records = [rec] + records
            snap["summary"].update({
                "added-data-files": str(len(chunk)),
                "added-records": str(sum(w[3]["records"] for w in chunk)),
                "added-files-size": str(sum(w[3]["size"] for w in chunk))})
            totals(snap["summary"], data_files=len(chunk),
                   records=sum(w[3]["records"] for w in chunk),
                   files_size=sum(w[3]["size"] for w in chunk))
            mloc, meta = _push(catalog, levels, name, st, meta, snap, records)
        if with_deletes and written:
            # position deletes: rows 0 and 3 of every 7th file, one file per partition
            by_cat = {}
            for i, cat, uri, o, _ in written:
                if i % 7 == 0:
                    by_cat.setdefault(cat if partitioned else None, []).append(uri)
            jobs, keys = [], []
            for cat, uris in sorted(by_cat.items(), key=lambda kv: str(kv[0])):
                vals = ", ".join("('%s', %d::BIGINT)" % (u.replace("'", "''"), p)
                                 for u in sorted(uris) for p in (0, 3) if p < rows_per_file)
                jobs.append({"mode": "write", "schema": {"fields": POS_FIELDS},
                             "query": "SELECT * FROM (VALUES %s) v(c_2147483546, c_2147483545) "
                                      "ORDER BY 1, 2" % vals,
                             "output_files": 1, "output_dir": os.path.join(tmp, "p%s" % cat),
                             "file_prefix": "pos-%s" % uuid.UUID(int=rnd.getrandbits(128)),
                             "compression": "zstd"})
                keys.append(cat)
            outs = compact_mod.run_node({"jobs": jobs})["results"]
            entries = []
            for cat, res in zip(keys, outs):
                o = res["files"][0]
                sub = ("category=%s/" % cat) if partitioned else ""
                uri = data_dir + "/" + sub + os.path.basename(o["path"])
                with open(o["path"], "rb") as fh:
                    st.write(uri, fh.read())
                entries.append(_data_file(uri, o, {"category": cat} if partitioned else {},
                                          content=1, schema={"fields": POS_FIELDS},
                                          truncate=None))
            snap = _snapshot(meta, rnd, "delete")
            records = [_manifest(st, meta, snap, partitioned, entries, 1)] + records
            snap["summary"].update({"added-delete-files": str(len(entries)),
                                    "added-position-delete-files": str(len(entries)),
                                    "added-position-deletes": str(sum(
                                        e["record_count"] for e in entries))})
            totals(snap["summary"], delete_files=len(entries),
                   position_deletes=sum(e["record_count"] for e in entries),
                   files_size=sum(e["file_size_in_bytes"] for e in entries))
            mloc, meta = _push(catalog, levels, name, st, meta, snap, records)
            # equality deletes on id in partition c1 (or everywhere, unpartitioned)
            ids = [i * rows_per_file + r for i, cat, _, _, _ in written if cat == "c1"
                   for r in range(rows_per_file) if (i * rows_per_file + r) % 97 == 5]
            if ids:
                eq_fields = [SCHEMA["fields"][0]]
                res = compact_mod.run_node({
                    "mode": "write", "schema": {"fields": eq_fields},
                    "query": "SELECT * FROM (VALUES %s) v(c_1)" % ", ".join(
                        "(%d::BIGINT)" % x for x in ids),
                    "output_files": 1, "output_dir": os.path.join(tmp, "eq"),
                    "file_prefix": "eq-%s" % uuid.UUID(int=rnd.getrandbits(128)),
                    "compression": "zstd"})
                o = res["files"][0]
                sub = "category=c1/" if partitioned else ""
                uri = data_dir + "/" + sub + os.path.basename(o["path"])
                with open(o["path"], "rb") as fh:
                    st.write(uri, fh.read())
                e = _data_file(uri, o, {"category": "c1"} if partitioned else {}, content=2,
                               equality_ids=[1], schema={"fields": eq_fields})
                snap = _snapshot(meta, rnd, "delete")
                records = [_manifest(st, meta, snap, partitioned, [e], 2)] + records
                snap["summary"].update({"added-delete-files": "1",
                                        "added-equality-delete-files": "1",
                                        "added-equality-deletes": str(len(ids))})
                totals(snap["summary"], delete_files=1, equality_deletes=len(ids),
                       files_size=e["file_size_in_bytes"])
                mloc, meta = _push(catalog, levels, name, st, meta, snap, records)
        return mloc if mloc is not None else opsworld.load(catalog, levels, name)[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _put(st, uri, path):
    """Store the local file path at uri: moved into place when uri is local
    (one rename, not a copy: 10,000 files are written this way), else
    uploaded."""
    if storage_mod.is_s3(uri) or storage_mod.is_azure(uri) or storage_mod.is_gs(uri):
        with open(path, "rb") as fh:
            st.write(uri, fh.read())
        return
    dst = st.local_path(uri)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.move(path, dst)


def _push(catalog, levels, name, st, meta, snap, records):
    """Write the manifest list and commit the snapshot; (location, metadata)."""
    opsworld._write_list(st, meta, snap, json.loads(iceberg_avro_schemas.manifest_list_schema(2)),
                         {"format-version": "2"}, records)
    body = opsworld._commit_body(meta, snap)
    body["requirements"].insert(0, {"type": "assert-table-uuid", "uuid": meta["table-uuid"]})
    r = opsworld.commit(catalog, "\x1f".join(levels), name, body)
    return r["metadata-location"], r["metadata"]
