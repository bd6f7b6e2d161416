"""
test_compaction_types.py -- compaction on engine 'local' of tables of every
Iceberg type and of tables whose schema evolved: nested types (struct, list,
map, two deep and more), fixed, uuid, binary, decimal(38), time, timestamp
and timestamptz; columns added (one with an initial-default), dropped,
renamed, reordered and widened between the data files.

Each table is written here, independently of tms: real Parquet files with
Iceberg field ids at every depth (DuckDB's COPY ... FIELD_IDS, through
test/node/duckdb_sql.mjs), manifests and snapshots through the test world's
Avro writer and REST catalog; the schema evolves through the catalog
(add-schema, set-current-schema) between the files.  Then tms compacts it
(rewrite-all) and the test checks, without tms code:

  - the rows of the new file, read with DuckDB, are exactly the rows the
    files hold read by field id in the current schema (what each file was
    written to mean, stated here in SQL), and the file's Parquet schema has
    the current schema's names and field ids at every depth;
  - the metrics of the new manifest entry are those computed here from the
    rows (value, null and NaN counts per primitive field at every depth;
    lower and upper bounds, truncated to 16 characters or bytes, in
    Iceberg's single-value serialization, only for fields not under a list
    or a map, as Iceberg Java writes them) and the Parquet footer (value
    counts of the fields under a list or a map);
  - icebird reads the same rows before and after where it reads the table
    at all (it reads a file by its column names, not by field id: of an
    evolved table, only the compacted table, whose row count is checked);
  - files without field ids (imported) are read through the table's name
    mapping (an alias, an unmapped column, lists and maps), and fail the
    job, leaving the table as it was, on a table without one;
  - a format v3 table of timestamp_ns values and a column added with an
    initial-default and a write-default keeps its rows, nanoseconds,
    defaults and row lineage;
  - equality deletes by fields inside structs (one and two deep) are
    applied, nulls equal and by sequence number; one by a field inside a
    list skips the job with the file and the field;
  - the sort strategy orders by fields of structs, the table's sort order
    and a sort-order text (s.b.x);
  - a table with a column the local engine cannot rewrite (timestamptz_ns
    inside a struct) is refused by run_operation with 0A000, a DETAIL
    naming the column and its type and a HINT, before a job is recorded.

The module runs its own cluster, catalog, s3rver and file root.
Run: /usr/bin/python3 -m pytest -q test/integration/test_compaction_types.py
"""

import datetime
import decimal
import json
import os
import random
import struct
import subprocess
import sys
import urllib.parse
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
import avro_codec  # noqa: E402
import iceberg_avro_schemas  # noqa: E402
import compact as compact_mod  # noqa: E402
from iceberg_transforms import murmur3_32, unscaled_bytes, zkey_long, zvalue  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster

NS = "cty"
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "ctycat"
    w = tms_world("cty", settings=dict(FAST_WORKERS), catalog={}, real=False, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '10s', retries '0',
             s3_vended_endpoint 'true', allowed_locations 'file://%s/, s3://warehouse/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


# ---------------------------------------------------------------------------
# DuckDB, the table writer
# ---------------------------------------------------------------------------

def duck(statements, timeout=300):
    """Run SQL statements with DuckDB (test/node/duckdb_sql.mjs); the rows of each."""
    r = subprocess.run(["node", os.path.join(world.NODE_DIR, "duckdb_sql.mjs")],
                       input=json.dumps({"statements": statements}), capture_output=True,
                       text=True, timeout=timeout, cwd=world.NODE_DIR)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)["results"]


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def ident(s):
    return '"' + s.replace('"', '""') + '"'


def _ids_value(t, fid):
    if isinstance(t, str):
        return str(fid)
    if t["type"] == "struct":
        return "{__duckdb_field_id: %d%s}" % (fid, "".join(
            ", %s: %s" % (ident(f["name"]), _ids_value(f["type"], f["id"])) for f in t["fields"]))
    if t["type"] == "list":
        return "{__duckdb_field_id: %d, element: %s}" % (
            fid, _ids_value(t["element"], t["element-id"]))
    return "{__duckdb_field_id: %d, key: %s, value: %s}" % (
        fid, _ids_value(t["key"], t["key-id"]), _ids_value(t["value"], t["value-id"]))


def field_ids(schema):
    """COPY's FIELD_IDS for an Iceberg schema, every depth."""
    return "{%s}" % ", ".join("%s: %s" % (ident(f["name"]), _ids_value(f["type"], f["id"]))
                              for f in schema["fields"])


def schema_of(schema_id, fields):
    return {"type": "struct", "schema-id": schema_id, "fields": fields}


def create_table(env, name, schema, fv=2, props=None):
    env["catalog"].create_namespace(NS)
    env["catalog"].request("POST", "namespaces/%s/tables" % urllib.parse.quote(NS), {
        "name": name, "schema": schema, "partition-spec": {"spec-id": 0, "fields": []},
        "properties": dict({"format-version": str(fv), "write.parquet.compression-codec": "zstd"},
                           **(props or {}))})


def evolve(env, name, schema):
    """Make schema (with a new schema-id) the table's current one."""
    _, meta = ow.load(env["catalog"], NS, name)
    ow.commit(env["catalog"], NS, name, {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-schema", "schema": schema,
                     "last-column-id": max(meta.get("last-column-id", 0), max_id(schema))},
                    {"action": "set-current-schema", "schema-id": -1}]})


def max_id(schema):
    ids = []

    def walk(t):
        if isinstance(t, str):
            return
        if t["type"] == "struct":
            for f in t["fields"]:
                ids.append(f["id"])
                walk(f["type"])
        elif t["type"] == "list":
            ids.append(t["element-id"])
            walk(t["element"])
        else:
            ids.extend([t["key-id"], t["value-id"]])
            walk(t["key"])
            walk(t["value"])
    walk(schema)
    return max(ids)


def append_file(env, name, query, schema, tmp, seed, spec=None, partition=None, pfields=(),
                ids=True):
    """Write the rows of query (its columns named as schema names them) as
    one Parquet file with schema's field ids (none when not ids: a file
    imported into Iceberg) and commit it as an append (on a v3 table with
    its row lineage: first-row-id, added-rows, the manifest's first_row_id);
    in spec (default the unpartitioned spec 0) with partition {name: value}
    of pfields [(name, Avro type, field id)]."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, NS, name)
    local = os.path.join(tmp, "f-%s.parquet" % uuid.uuid4())
    res = duck(["COPY (%s) TO %s (FORMAT parquet, COMPRESSION zstd%s)"
                % (query, lit(local), ", FIELD_IDS %s" % field_ids(schema) if ids else ""),
                "SELECT count(*)::BIGINT AS n FROM read_parquet(%s)" % lit(local)])
    records = int(res[1][0]["n"])
    uri = "%s/%s" % (compact_mod.data_location(meta), os.path.basename(local))
    with open(local, "rb") as fh:
        data = fh.read()
    st.write(uri, data)
    rnd = random.Random(seed)
    fv = meta["format-version"]
    snap = smallfiles._snapshot(meta, rnd, "append")
    df = {"content": 0, "file_path": uri, "file_format": "PARQUET", "partition": partition or {},
          "record_count": records, "file_size_in_bytes": len(data), "sort_order_id": 0}
    mschema = iceberg_avro_schemas.manifest_entry_schema(fv, list(pfields))
    spec = spec or {"spec-id": 0, "fields": []}
    recs = [ow._conform({"status": 1, "snapshot_id": snap["snapshot-id"],
                         "sequence_number": None, "file_sequence_number": None,
                         "data_file": df}, json.loads(mschema))]
    path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"), uuid.uuid4())
    cur = [s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"]][0]
    mdata = avro_codec.write_container(mschema, recs, "deflate", {
        "schema": json.dumps(cur), "schema-id": str(cur["schema-id"]),
        "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": str(spec["spec-id"]),
        "format-version": str(fv), "content": "data"})
    st.write(path, mdata)
    seq = snap["sequence-number"]
    rec = {"manifest_path": path, "manifest_length": len(mdata),
           "partition_spec_id": spec["spec-id"], "content": 0, "sequence_number": seq, "min_sequence_number": seq,
           "added_snapshot_id": snap["snapshot-id"], "added_files_count": 1,
           "existing_files_count": 0, "deleted_files_count": 0, "added_rows_count": records,
           "existing_rows_count": 0, "deleted_rows_count": 0, "partitions": None,
           "key_metadata": None}
    old = []
    if meta.get("current-snapshot-id") not in (None, -1):
        old = ow._list_schema_and_meta(st, ow.snapshot(meta, meta["current-snapshot-id"]))[2]
    snap["summary"].update({"added-data-files": "1", "added-records": str(records)})
    if fv < 3:
        smallfiles._push(cat, [NS], name, st, meta, snap, [rec] + list(old))
    else:
        # https://iceberg.apache.org/spec/#row-lineage: the snapshot's
        # first-row-id is the table's next-row-id, the new manifest's
        # first_row_id too; its rows are the snapshot's added-rows
        first = meta.get("next-row-id", 0)
        rec["first_row_id"] = first
        snap.update({"first-row-id": first, "added-rows": records})
        ow._write_list(st, meta, snap, json.loads(iceberg_avro_schemas.manifest_list_schema(3)),
                       {"format-version": "3", "first-row-id": str(first)}, [rec] + list(old))
        body = ow._commit_body(meta, snap)
        body["requirements"].insert(0, {"type": "assert-table-uuid", "uuid": meta["table-uuid"]})
        ow.commit(cat, NS, name, body)
    ow.give_to_server(env["file_root"])


# ---------------------------------------------------------------------------
# tms
# ---------------------------------------------------------------------------

def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def compact(env, name, opts=None):
    jid = q(env, "SELECT tms.run_operation(%s, %s, %s, 'compaction', %s::jsonb)",
            (env["server"], NS, name, json.dumps(dict(opts or {}, **{"rewrite-all": True}))))[0][0]
    state = lambda: q(env, "SELECT state, last_error FROM tms.maintenance_jobs WHERE id = %s",  # noqa: E731
                      (jid,))[0]
    wait_for(lambda: state()[0] in TERMINAL, timeout=300, what="job %s" % jid)
    assert state()[0] == "succeeded", state()


def data_files(env, meta):
    return {p: f for p, f in ow.live_files(env["st"], meta).items() if f["content"] == 0}


def new_entry(env, meta, path):
    for rec in ow.manifest_records(env["st"], ow.snapshot(meta, meta["current-snapshot-id"])):
        for e in ow.manifest_entries(env["st"], rec["manifest_path"]):
            if e["status"] != 2 and e["data_file"]["file_path"] == path:
                return e["data_file"]
    raise AssertionError("no entry for %s" % path)


def icebird_rows(env, mloc):
    """The rows icebird reads, or None where it cannot read the table."""
    try:
        out = ow.icebird(mloc, s3_endpoint=env["s3"].endpoint, file_root=env["file_root"],
                         dump_rows=True)
    except RuntimeError:
        return None
    return sorted(json.dumps(r, sort_keys=True) for r in out["row_values"])


# ---------------------------------------------------------------------------
# what the new file must be, computed here
# ---------------------------------------------------------------------------

def canon(rows):
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def expected_tree(schema):
    """(name, field id, [children]) of the Parquet schema an Iceberg writer
    gives schema (3-level lists, key_value maps)."""
    def node(name, t, fid):
        if isinstance(t, str):
            return (name, fid, [])
        if t["type"] == "struct":
            return (name, fid, [node(f["name"], f["type"], f["id"]) for f in t["fields"]])
        if t["type"] == "list":
            return (name, fid, [("list", None, [node("element", t["element"], t["element-id"])])])
        return (name, fid, [("key_value", None, [node("key", t["key"], t["key-id"]),
                                                node("value", t["value"], t["value-id"])])])
    return [node(f["name"], f["type"], f["id"]) for f in schema["fields"]]


def file_tree(rows):
    """parquet_schema() rows (depth first) as (name, field id, [children])."""
    it = iter(rows[1:])

    def node():
        r = next(it)
        n = int(r["num_children"] or 0)
        fid = int(r["field_id"]) if r["field_id"] is not None else None
        return (r["name"], fid, [node() for _ in range(n)])
    return [node() for _ in range(int(rows[0]["num_children"]))]


def leaves(schema):
    """(id, type, path of steps, under a list or map) of every primitive
    field; a step is ("f", name), ("e",), ("k",) or ("v",)."""
    out = []

    def walk(t, fid, path, rep):
        if isinstance(t, str):
            out.append((fid, t, path, rep))
        elif t["type"] == "struct":
            for f in t["fields"]:
                walk(f["type"], f["id"], path + [("f", f["name"])], rep)
        elif t["type"] == "list":
            walk(t["element"], t["element-id"], path + [("e",)], True)
        else:
            walk(t["key"], t["key-id"], path + [("k",)], True)
            walk(t["value"], t["value-id"], path + [("v",)], True)
    for f in schema["fields"]:
        walk(f["type"], f["id"], [("f", f["name"])], False)
    return out


def slots(v, path):
    """The values of a field in one row value, as Parquet stores them: one
    slot per element, key or value, and one (no value: None) for each null
    or empty collection or null struct on the way."""
    if not path:
        return [v]
    step = path[0]
    if v is None:
        return [None]
    if step[0] == "f":
        return slots(v.get(step[1]), path[1:])
    items = v if step[0] == "e" else [e["key" if step[0] == "k" else "value"] for e in v]
    if not items:
        return [None]
    return [x for i in items for x in slots(i, path[1:])]


EPOCH = datetime.date(1970, 1, 1)


def py_value(t, v):
    """A DuckDB JSON value of Iceberg type t as a Python value that orders
    as Iceberg orders it."""
    if t in ("int", "long"):
        return int(v)
    if t in ("float", "double"):
        return float(v)
    if t.startswith("decimal"):
        return decimal.Decimal(v)
    if t == "boolean":
        return bool(v)
    if t == "date":
        return (datetime.date.fromisoformat(v) - EPOCH).days
    if t == "time":
        hh, mm, ss = v.split(":")
        return (int(hh) * 3600 + int(mm) * 60) * 1000000 + round(decimal.Decimal(ss) * 1000000)
    if t in ("timestamp", "timestamptz"):
        s = v.replace(" ", "T")
        if t == "timestamptz" and s[-3] in "+-" and s[-2:].isdigit():
            s += ":00"
        d = datetime.datetime.fromisoformat(s)
        if d.tzinfo is None:
            d = d.replace(tzinfo=datetime.timezone.utc)
        delta = d - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1000000 + delta.microseconds
    if t == "uuid":
        return bytes.fromhex(v.replace("-", ""))
    if t == "binary" or t.startswith("fixed"):
        out, i = bytearray(), 0
        while i < len(v):
            if v.startswith("\\x", i):
                out.append(int(v[i + 2:i + 4], 16))
                i += 4
            else:
                out.append(ord(v[i]))
                i += 1
        return bytes(out)
    return v


def serialize(t, x, upper):
    """Iceberg's single-value serialization of x (py_value), a bound
    truncated as truncate(16) does (strings to 16 characters, binary and
    fixed to 16 bytes; an upper bound's last one incremented)."""
    if t in ("int", "date"):
        return struct.pack("<i", x)
    if t in ("long", "time", "timestamp", "timestamptz"):
        return struct.pack("<q", x)
    if t == "float":
        return struct.pack("<f", x)
    if t == "double":
        return struct.pack("<d", x)
    if t == "boolean":
        return b"\x01" if x else b"\x00"
    if t.startswith("decimal"):
        scale = int(t.split(",")[1].strip(" )"))
        with decimal.localcontext() as ctx:
            ctx.prec = 80           # 38 digits, exactly
            u = int(x.scaleb(scale))
        n = (u + (u < 0)).bit_length() // 8 + 1
        return u.to_bytes(n, "big", signed=True)
    if t == "uuid":
        return x
    if t == "string":
        if len(x) > 16:
            x = x[:16]
            if upper:
                # the last code point that can be incremented is (Java's
                # UnicodeUtil.truncateStringMax), surrogates skipped
                while x and ord(x[-1]) == 0x10FFFF:
                    x = x[:-1]
                c = ord(x[-1]) + 1
                x = x[:-1] + chr(0xE000 if 0xD800 <= c <= 0xDFFF else c)
        return x.encode()
    if t == "binary" or t.startswith("fixed"):
        if len(x) > 16:
            x = x[:16]
            if upper:
                # BinaryUtil.truncateBinaryMax: the last byte below 0xff incremented
                x = x.rstrip(b"\xff")
                x = x[:-1] + bytes([x[-1] + 1])
        return x
    raise AssertionError(t)


def expected_metrics(schema, rows, footer_values):
    """{metric name: {field id: value}} for the rows (DuckDB JSON of the
    current schema); footer_values: {field id: the footer's value count}."""
    m = {"value_counts": {}, "null_value_counts": {}, "nan_value_counts": {},
         "lower_bounds": {}, "upper_bounds": {}}
    for fid, t, path, rep in leaves(schema):
        vals = [x for r in rows for x in slots(r, path)]
        if rep:
            # one slot per stored value, as the footer says
            assert len(vals) == footer_values[fid], (fid, len(vals), footer_values[fid])
        m["value_counts"][fid] = len(vals)
        m["null_value_counts"][fid] = sum(1 for x in vals if x is None)
        if t in ("float", "double"):
            m["nan_value_counts"][fid] = sum(1 for x in vals if x == "NaN")
        if rep:
            continue
        real = [py_value(t, x) for x in vals if x is not None and x != "NaN"]
        if real:
            m["lower_bounds"][fid] = serialize(t, min(real), False)
            m["upper_bounds"][fid] = serialize(t, max(real), True)
    return m


def check_compaction(env, name, schema, expected_sql, files_before, evolved=False):
    """Compact the table; the new file holds expected_sql's rows (the
    current schema's) with the schema's names and ids, and its metrics.
    icebird reads a file by its own column names, not by field id: on an
    evolved table it reads only the compacted table (its row count)."""
    mloc, meta0 = ow.load(env["catalog"], NS, name)
    before = data_files(env, meta0)
    assert len(before) == files_before
    ice_before = icebird_rows(env, mloc)
    compact(env, name)
    mloc2, meta = ow.load(env["catalog"], NS, name)
    after = data_files(env, meta)
    assert len(after) == 1 and not set(after) & set(before), (before, after)
    path = next(iter(after))
    local = env["st"].local_path(path)
    want, got, pschema, footer = duck([
        "SELECT * FROM (%s)" % expected_sql,
        "SELECT * FROM read_parquet(%s)" % lit(local),
        "SELECT name, field_id, num_children FROM parquet_schema(%s)" % lit(local),
        "SELECT path_in_schema, sum(num_values)::BIGINT AS n FROM parquet_metadata(%s)"
        " GROUP BY ALL" % lit(local)])
    # the current schema's names and field ids at every depth
    assert file_tree(pschema) == expected_tree(schema), (file_tree(pschema), expected_tree(schema))
    # the rows, by field id
    assert canon(got) == canon(want)
    # the metrics, computed here
    by_path = {r["path_in_schema"]: int(r["n"]) for r in footer}
    footer_values = {}
    for fid, _, steps, _ in leaves(schema):
        names = []
        for step in steps:
            names += [step[1]] if step[0] == "f" else (
                ["list", "element"] if step[0] == "e" else
                ["key_value", "key" if step[0] == "k" else "value"])
        footer_values[fid] = by_path[", ".join(names)]
    want_m = expected_metrics(schema, want, footer_values)
    df = new_entry(env, meta, path)
    assert df["record_count"] == len(want)
    for k in want_m:
        got_k = {b["key"]: b["value"] for b in (df[k] or [])}
        assert got_k == want_m[k], (k, got_k, want_m[k])
    assert {b["key"] for b in df["column_sizes"]} == {l[0] for l in leaves(schema)}
    # icebird, where it reads the table at all
    ice_after = icebird_rows(env, mloc2)
    if ice_before is not None and not evolved:
        assert ice_after == ice_before
    elif ice_after is not None:
        assert len(ice_after) == len(want)
    return df


# ---------------------------------------------------------------------------
# a table per type family
# ---------------------------------------------------------------------------

NESTED = schema_of(0, [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "s", "required": False, "type": {"type": "struct", "fields": [
        {"id": 3, "name": "a", "required": False, "type": "int"},
        {"id": 4, "name": "b", "required": False, "type": {"type": "struct", "fields": [
            {"id": 5, "name": "x", "required": False, "type": "string"},
            {"id": 6, "name": "y", "required": False, "type": {
                "type": "list", "element-id": 7, "element-required": False,
                "element": "double"}}]}}]}},
    {"id": 8, "name": "l", "required": False, "type": {
        "type": "list", "element-id": 9, "element-required": False, "element": {
            "type": "struct", "fields": [
                {"id": 10, "name": "p", "required": False, "type": "int"},
                {"id": 11, "name": "q", "required": False, "type": {
                    "type": "list", "element-id": 12, "element-required": False,
                    "element": "int"}}]}}},
    {"id": 13, "name": "m", "required": False, "type": {
        "type": "map", "key-id": 14, "key": "string", "value-id": 15, "value-required": False,
        "value": {"type": "struct", "fields": [
            {"id": 16, "name": "v", "required": False, "type": "double"}]}}},
    {"id": 17, "name": "ll", "required": False, "type": {
        "type": "list", "element-id": 18, "element-required": False, "element": {
            "type": "list", "element-id": 19, "element-required": False,
            "element": "string"}}}])


def nested_rows(first, n):
    return (
        "SELECT (%d + i)::BIGINT AS id,"
        " CASE WHEN i %% 5 = 4 THEN NULL ELSE {'a': CASE WHEN i %% 3 = 0 THEN NULL ELSE i::INTEGER END,"
        "   'b': CASE WHEN i %% 7 = 6 THEN NULL ELSE {'x': 'x-' || (%d + i)::VARCHAR,"
        "     'y': CASE WHEN i %% 4 = 0 THEN NULL ELSE [i::DOUBLE / 3, CASE WHEN i %% 2 = 0"
        "       THEN 'nan'::DOUBLE ELSE NULL END]::DOUBLE[] END} END} END AS s,"
        " CASE WHEN i %% 6 = 5 THEN NULL WHEN i %% 6 = 4 THEN []::STRUCT(p INTEGER, q INTEGER[])[]"
        "   ELSE [{'p': i::INTEGER, 'q': [i::INTEGER, NULL, -i::INTEGER]},"
        "         NULL::STRUCT(p INTEGER, q INTEGER[])] END AS l,"
        " CASE WHEN i %% 4 = 3 THEN NULL ELSE map_from_entries([{'key': 'k' || i::VARCHAR,"
        "   'value': {'v': CASE WHEN i %% 3 = 1 THEN 'nan'::DOUBLE ELSE i * 1.25 END}},"
        "   {'key': 'z', 'value': NULL::STRUCT(v DOUBLE)}]) END AS m,"
        " [['a' || i::VARCHAR, NULL], NULL, []]::VARCHAR[][] AS ll"
        " FROM range(%d) t(i)" % (first, first, n))


def test_nested_types(env, tmp_path):
    create_table(env, "nested", NESTED)
    for k in range(3):
        append_file(env, "nested", nested_rows(k * 1000, 20), NESTED, str(tmp_path), k)
    want = " UNION ALL ".join(nested_rows(k * 1000, 20) for k in range(3))
    df = check_compaction(env, "nested", NESTED, want, 3)
    # the fields under a list or a map have counts and no bounds
    assert 7 not in {b["key"] for b in df["lower_bounds"]}
    assert {7, 16} <= {b["key"] for b in df["nan_value_counts"]}


def add_eq_delete(env, name, tmp, select, fids, eq_ids, seed):
    """Commit one equality delete file of eq_ids: select's rows written
    with the field ids fids (a DuckDB FIELD_IDS value, the struct path with
    ids at every level, as Iceberg's writers write it); its uri."""
    cat, st = env["catalog"], env["st"]
    _, meta = ow.load(cat, NS, name)
    local = os.path.join(tmp, "eq-%s.parquet" % uuid.uuid4())
    res = duck(["COPY (%s) TO %s (FORMAT parquet, FIELD_IDS %s)" % (select, lit(local), fids),
                "SELECT count(*)::BIGINT AS n FROM read_parquet(%s)" % lit(local)])
    uri = "%s/%s" % (compact_mod.data_location(meta), os.path.basename(local))
    with open(local, "rb") as fh:
        data = fh.read()
    st.write(uri, data)
    df = {"content": 2, "file_path": uri, "file_format": "PARQUET", "partition": {},
          "record_count": int(res[1][0]["n"]), "file_size_in_bytes": len(data),
          "key_metadata": None, "split_offsets": None, "equality_ids": eq_ids,
          "sort_order_id": 0, "referenced_data_file": None}
    snap = smallfiles._snapshot(meta, random.Random(seed), "delete")
    rec = smallfiles._manifest(st, meta, snap, False, [df], 2, table_schema=NESTED)
    old = ow.manifest_records(st, ow.snapshot(meta, meta["current-snapshot-id"]))
    smallfiles._push(cat, [NS], name, st, meta, snap, [rec] + old)
    return uri


def test_equality_delete_on_a_nested_field_applies(env, tmp_path):
    """Equality deletes by fields inside structs (s.a, and s.b.x two deep,
    as Flink's upserts on a nested key write them), the delete files
    written with the struct path and field ids at every level (a struct
    named otherwise than the table's: matched by id).  The compacted file,
    read with DuckDB, holds exactly the rows not deleted: a null field
    (the struct above it null included) equals a null in the delete, and
    a delete applies only to the data files older than it (the file
    appended after keeps its row of s.a = 1)."""
    tmp = str(tmp_path)
    create_table(env, "nestedeq", NESTED)
    for k in range(2):
        # ids k*1000 + i, i < 5: s.a null for i = 0, 3; s null for i = 4
        append_file(env, "nestedeq", nested_rows(k * 1000, 5), NESTED, tmp, k)
    add_eq_delete(env, "nestedeq", tmp, "SELECT {'a': 1}::STRUCT(a INTEGER) AS olds",
                  "{olds: {__duckdb_field_id: 2, a: 3}}", [3], 11)
    add_eq_delete(env, "nestedeq", tmp,
                  "SELECT * FROM (VALUES ({'b': {'x': 'x-1002'}}::STRUCT(b STRUCT(x VARCHAR))),"
                  " ({'b': {'x': NULL}}::STRUCT(b STRUCT(x VARCHAR)))) t(s)",
                  "{s: {__duckdb_field_id: 2, b: {__duckdb_field_id: 4, x: 5}}}", [5], 12)
    append_file(env, "nestedeq", nested_rows(2000, 2), NESTED, tmp, 13)
    compact(env, "nestedeq")
    _, meta = ow.load(env["catalog"], NS, "nestedeq")
    after = data_files(env, meta)
    assert len(after) == 1, after
    local = env["st"].local_path(next(iter(after)))
    got, want = duck([
        "SELECT * FROM read_parquet(%s)" % lit(local),
        "SELECT * FROM (%s) WHERE id IN (0, 2, 3, 1000, 1003, 2000, 2001)"
        % " UNION ALL ".join(nested_rows(f, n) for f, n in ((0, 5), (1000, 5), (2000, 2))),
    ])
    assert sorted(int(r["id"]) for r in got) == [0, 2, 3, 1000, 1003, 2000, 2001], got
    assert canon(got) == canon(want)


def test_equality_delete_inside_a_list_is_refused(env, tmp_path):
    """An equality delete by a field inside a list (l.element.p) matches no
    one value of a row: the job is skipped with the file and the field
    before the helper starts, the table unchanged."""
    tmp = str(tmp_path)
    create_table(env, "listeq", NESTED)
    for k in range(2):
        append_file(env, "listeq", nested_rows(k * 1000, 5), NESTED, tmp, k)
    uri = add_eq_delete(env, "listeq", tmp, "SELECT 1::INTEGER AS p", "{p: 10}", [10], 7)
    cat = env["catalog"]
    mloc = ow.load(cat, NS, "listeq")[0]
    jid = q(env, "SELECT tms.run_operation(%s, %s, %s, 'compaction', %s::jsonb)",
            (env["server"], NS, "listeq", json.dumps({"rewrite-all": True})))[0][0]
    row = env["pg"].wait_job(jid, ("skipped",), timeout=300)
    assert 'cannot apply equality delete file "%s"' % uri in row["reason"], row
    assert 'field "p" (id 10) inside list "l"' in row["reason"], row
    assert ow.load(cat, NS, "listeq")[0] == mloc


def test_sort_on_fields_of_structs(env, tmp_path):
    """The table's sort order on a field of a struct (s.a, DESC NULLS LAST)
    and a sort-order text naming one two deep (s.b.x): the compacted file,
    read with DuckDB in its row order, is sorted by the field, with every
    row kept; the table's order id is stamped, the text's (no table order
    has it) 0.  Then a z-order of s.a and id, checked by the rows'
    interleaved bits."""
    create_table(env, "nestedsort", NESTED)
    for k in range(3):
        append_file(env, "nestedsort", nested_rows(k * 1000, 20), NESTED, str(tmp_path), k)
    _, meta = ow.load(env["catalog"], NS, "nestedsort")
    ow.commit(env["catalog"], NS, "nestedsort", {
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
            {"transform": "identity", "source-id": 3, "direction": "desc",
             "null-order": "nulls-last"}]}},
            {"action": "set-default-sort-order", "sort-order-id": -1}]})
    ids = sorted(k * 1000 + i for k in range(3) for i in range(20))

    def file_order(key_sql):
        _, meta = ow.load(env["catalog"], NS, "nestedsort")
        after = data_files(env, meta)
        assert len(after) == 1, after
        path = next(iter(after))
        got = duck(["SELECT %s AS k, id FROM read_parquet(%s, file_row_number = true)"
                    " ORDER BY file_row_number" % (key_sql, lit(env["st"].local_path(path)))])[0]
        assert sorted(int(r["id"]) for r in got) == ids
        return [r["k"] for r in got], new_entry(env, meta, path)["sort_order_id"]

    compact(env, "nestedsort", {"strategy": "sort"})
    keys, order_id = file_order("s.a")
    nn = [k for k in keys if k is not None]
    assert nn == sorted(nn, reverse=True) and keys == nn + [None] * (len(keys) - len(nn)), keys
    assert len(nn) > 10 and len(nn) < len(keys)
    assert order_id == 1
    compact(env, "nestedsort", {"strategy": "sort", "sort-order": "s.b.x ASC NULLS FIRST"})
    keys, order_id = file_order("s.b.x")
    nn = [k for k in keys if k is not None]
    assert keys == [None] * (len(keys) - len(nn)) + sorted(nn), keys
    assert len(nn) > 10 and len(nn) < len(keys)
    assert order_id == 0
    # z-order on the struct's int field and a top-level long: the file's
    # rows in ascending interleaved bits of their ordered 8-byte keys
    # (Iceberg's ZOrderByteUtils: an int as a long with its sign bit
    # flipped, a null as zeros)
    compact(env, "nestedsort", {"strategy": "sort", "sort-order": "zorder(s.a, id)"})
    keys, order_id = file_order("[s.a, id]")
    zs = [zvalue([zkey_long(a), zkey_long(b)]) for a, b in keys]
    assert zs == sorted(zs) and len(set(zs)) == len(zs), keys
    assert order_id == 0


PRIMS = schema_of(0, [
    {"id": 1, "name": "id", "required": True, "type": "int"},
    {"id": 2, "name": "fx", "required": False, "type": "fixed[20]"},
    {"id": 3, "name": "u", "required": False, "type": "uuid"},
    {"id": 4, "name": "bin", "required": False, "type": "binary"},
    {"id": 5, "name": "dec", "required": False, "type": "decimal(38, 10)"},
    {"id": 6, "name": "tm", "required": False, "type": "time"},
    {"id": 7, "name": "ts", "required": False, "type": "timestamp"},
    {"id": 8, "name": "tz", "required": False, "type": "timestamptz"},
    {"id": 9, "name": "d", "required": False, "type": "date"},
    {"id": 10, "name": "f", "required": False, "type": "float"},
    {"id": 11, "name": "txt", "required": False, "type": "string"},
    {"id": 12, "name": "ok", "required": False, "type": "boolean"},
    {"id": 13, "name": "st", "required": False, "type": {"type": "struct", "fields": [
        {"id": 14, "name": "fx2", "required": False, "type": "fixed[2]"},
        {"id": 15, "name": "u2", "required": False, "type": "uuid"}]}}])


def prim_rows(first, n):
    return (
        "SELECT (%d + i)::INTEGER AS id,"
        " unhex(md5('f' || i::VARCHAR) || printf('%%08x', %d + i))::BLOB AS fx,"
        " CASE WHEN i %% 4 = 3 THEN NULL ELSE md5(i::VARCHAR || 'u%d')::UUID END AS u,"
        " unhex(repeat(printf('%%02x', (i * 37 + %d) %% 256), 1 + (i * 3) %% 25))::BLOB AS bin,"
        " ((%d + i) * 12345678901234567.0123456789 - 99999999999999999999.5)::DECIMAL(38, 10) AS dec,"
        " (TIME '00:00:01.000001' + to_microseconds((%d + i) * 3600000123))::TIME AS tm,"
        " (TIMESTAMP '2024-02-29 23:59:59.999999' + to_microseconds((%d + i) * 86400000001))::TIMESTAMP AS ts,"
        " (TIMESTAMPTZ '1969-12-31 23:00:00.000001+00' + to_microseconds((%d + i) * 60000007))::TIMESTAMPTZ AS tz,"
        " (DATE '1960-01-01' + ((%d + i) * 400)::INTEGER)::DATE AS d,"
        " CASE WHEN i %% 5 = 0 THEN 'nan'::FLOAT WHEN i %% 5 = 1 THEN NULL ELSE (i - 7.5)::FLOAT END AS f,"
        " repeat('é', (i %% 3) * 10) || 'zz' || (%d + i)::VARCHAR AS txt,"
        " CASE WHEN i %% 3 = 2 THEN NULL ELSE i %% 2 = 0 END AS ok,"
        " {'fx2': unhex(printf('%%04x', (%d + i) * 7)), 'u2': md5('w' || i::VARCHAR)::UUID} AS st"
        " FROM range(%d) t(i)" % ((first,) * 11 + (n,)))


def test_primitive_types(env, tmp_path):
    create_table(env, "prims", PRIMS)
    for k in range(3):
        append_file(env, "prims", prim_rows(k * 100, 12), PRIMS, str(tmp_path), 10 + k)
    want = " UNION ALL ".join(prim_rows(k * 100, 12) for k in range(3))
    df = check_compaction(env, "prims", PRIMS, want, 3)
    # truncated bounds: the fixed[20] values and the long strings
    lo = {b["key"]: b["value"] for b in df["lower_bounds"]}
    assert len(lo[2]) == 16 and len(lo[14]) == 2 and len(lo[3]) == 16


# ---------------------------------------------------------------------------
# a table per schema evolution
# ---------------------------------------------------------------------------

def F(fid, name, t, required=False, **kw):
    return dict({"id": fid, "name": name, "required": required, "type": t}, **kw)


def S(*fields):
    return {"type": "struct", "fields": list(fields)}


EVOLUTIONS = {
    # a column and a nested field added; one with an initial-default
    "added": (
        [F(1, "id", "long", True), F(2, "s", S(F(3, "a", "int")))],
        [F(1, "id", "long", True), F(2, "s", S(F(3, "a", "int"), F(5, "b", "string"))),
         F(4, "extra", "string"), F(6, "dflt", "int", **{"initial-default": 42})],
        "SELECT i::BIGINT AS id, {'a': i::INTEGER} AS s FROM range(10) t(i)",
        "SELECT (100 + i)::BIGINT AS id, {'a': i::INTEGER, 'b': 'b' || i::VARCHAR} AS s,"
        " 'e' || i::VARCHAR AS extra, i::INTEGER AS dflt FROM range(10) t(i)",
        "SELECT i::BIGINT AS id, {'a': i::INTEGER, 'b': NULL::VARCHAR} AS s,"
        " NULL::VARCHAR AS extra, 42::INTEGER AS dflt FROM range(10) t(i)"),
    # a column and a nested field dropped
    "dropped": (
        [F(1, "id", "long", True), F(2, "old", "string"),
         F(3, "s", S(F(4, "a", "int"), F(5, "gone", "string")))],
        [F(1, "id", "long", True), F(3, "s", S(F(4, "a", "int")))],
        "SELECT i::BIGINT AS id, 'o' || i::VARCHAR AS old, {'a': i::INTEGER, 'gone': 'g'} AS s"
        " FROM range(10) t(i)",
        "SELECT (100 + i)::BIGINT AS id, {'a': -i::INTEGER} AS s FROM range(10) t(i)",
        "SELECT i::BIGINT AS id, {'a': i::INTEGER} AS s FROM range(10) t(i)"),
    # columns and nested fields renamed (the map's value's field too)
    "renamed": (
        [F(1, "id", "long", True), F(2, "name", "string"), F(3, "s", S(F(4, "a", "int"))),
         F(5, "m", {"type": "map", "key-id": 6, "key": "string", "value-id": 7,
                    "value-required": False, "value": S(F(8, "v", "int"))})],
        [F(1, "id", "long", True), F(2, "label", "string"), F(3, "st", S(F(4, "alpha", "int"))),
         F(5, "mm", {"type": "map", "key-id": 6, "key": "string", "value-id": 7,
                     "value-required": False, "value": S(F(8, "vv", "int"))})],
        "SELECT i::BIGINT AS id, 'n' || i::VARCHAR AS name, {'a': i::INTEGER} AS s,"
        " MAP {'k': {'v': i::INTEGER}} AS m FROM range(10) t(i)",
        "SELECT (100 + i)::BIGINT AS id, 'l' || i::VARCHAR AS label, {'alpha': i::INTEGER} AS st,"
        " MAP {'k2': {'vv': -i::INTEGER}} AS mm FROM range(10) t(i)",
        "SELECT i::BIGINT AS id, 'n' || i::VARCHAR AS label, {'alpha': i::INTEGER} AS st,"
        " MAP {'k': {'vv': i::INTEGER}} AS mm FROM range(10) t(i)"),
    # columns and nested fields reordered
    "reordered": (
        [F(1, "id", "long", True), F(2, "x", "string"),
         F(3, "s", S(F(4, "a", "int"), F(5, "b", "string")))],
        [F(3, "s", S(F(5, "b", "string"), F(4, "a", "int"))), F(2, "x", "string"),
         F(1, "id", "long", True)],
        "SELECT i::BIGINT AS id, 'x' || i::VARCHAR AS x, {'a': i::INTEGER, 'b': 'b' || i::VARCHAR}"
        " AS s FROM range(10) t(i)",
        "SELECT {'b': 'c' || i::VARCHAR, 'a': -i::INTEGER} AS s, 'y' AS x, (100 + i)::BIGINT AS id"
        " FROM range(10) t(i)",
        "SELECT {'b': 'b' || i::VARCHAR, 'a': i::INTEGER} AS s, 'x' || i::VARCHAR AS x,"
        " i::BIGINT AS id FROM range(10) t(i)"),
    # int to long, float to double, decimal widened, at the top and nested
    "widened": (
        [F(1, "i", "int", True), F(2, "f", "float"), F(3, "d", "decimal(9, 2)"),
         F(4, "l", {"type": "list", "element-id": 5, "element-required": False, "element": "int"}),
         F(6, "s", S(F(7, "g", "float")))],
        [F(1, "i", "long", True), F(2, "f", "double"), F(3, "d", "decimal(18, 2)"),
         F(4, "l", {"type": "list", "element-id": 5, "element-required": False, "element": "long"}),
         F(6, "s", S(F(7, "g", "double")))],
        "SELECT i::INTEGER AS i, (i / 4)::FLOAT AS f, (i * 1.25)::DECIMAL(9, 2) AS d,"
        " [i::INTEGER, 2147483647] AS l, {'g': (i / 8)::FLOAT} AS s FROM range(10) t(i)",
        "SELECT (5000000000 + i)::BIGINT AS i, (i / 3)::DOUBLE AS f,"
        " (1234567890123.45 + i)::DECIMAL(18, 2) AS d, [5000000000 + i]::BIGINT[] AS l,"
        " {'g': (i / 3)::DOUBLE} AS s FROM range(10) t(i)",
        "SELECT i::BIGINT AS i, (i / 4)::FLOAT::DOUBLE AS f, (i * 1.25)::DECIMAL(18, 2) AS d,"
        " [i, 2147483647]::BIGINT[] AS l, {'g': (i / 8)::FLOAT::DOUBLE} AS s FROM range(10) t(i)"),
}


@pytest.mark.parametrize("kind", sorted(EVOLUTIONS))
def test_schema_evolution(env, tmp_path, kind):
    f0, f1, old_rows, new_rows, old_as_new = EVOLUTIONS[kind]
    s0, s1 = schema_of(0, f0), schema_of(1, f1)
    name = "evo_" + kind
    create_table(env, name, s0)
    append_file(env, name, old_rows, s0, str(tmp_path), 1)
    evolve(env, name, s1)
    append_file(env, name, new_rows, s1, str(tmp_path), 2)
    check_compaction(env, name, s1, "%s UNION ALL %s" % (old_as_new, new_rows), 2, evolved=True)


# ---------------------------------------------------------------------------
# files without field ids, read through the table's name mapping
# ---------------------------------------------------------------------------

MAPPED = schema_of(0, [
    F(1, "id", "long", True),
    F(2, "s", S(F(3, "a", "int"), F(4, "b", {"type": "list", "element-id": 5,
                                             "element-required": False, "element": "string"}))),
    F(6, "m", {"type": "map", "key-id": 7, "key": "string", "value-id": 8,
               "value-required": False, "value": "int"})])

# Iceberg's name mapping serialization (https://iceberg.apache.org/spec/#name-mapping-serialization):
# id is also found under its former name "ident"
NAME_MAPPING = [
    {"field-id": 1, "names": ["id", "ident"]},
    {"field-id": 2, "names": ["s"], "fields": [
        {"field-id": 3, "names": ["a"]},
        {"field-id": 4, "names": ["b"], "fields": [{"field-id": 5, "names": ["element"]}]}]},
    {"field-id": 6, "names": ["m"], "fields": [
        {"field-id": 7, "names": ["key"]}, {"field-id": 8, "names": ["value"]}]}]


def mapped_rows(first, idname="id", junk=False):
    return ("SELECT (%d + i)::BIGINT AS %s, {'a': i::INTEGER, 'b': ['b' || i::VARCHAR, NULL]} AS s,"
            " MAP {'k' || i::VARCHAR: i::INTEGER} AS m%s FROM range(10) t(i)"
            % (first, idname, ", 'not read' AS junk" if junk else ""))


def test_files_without_field_ids_read_by_name_mapping(env, tmp_path):
    """Imported files (no field ids, as add_files or migrate leave them; one
    with a column the mapping does not name, one with id under a name the
    mapping lists too) and a file with ids: compacted by the mapping, as
    Iceberg reads them."""
    create_table(env, "mapped", MAPPED,
                 props={"schema.name-mapping.default": json.dumps(NAME_MAPPING)})
    append_file(env, "mapped", mapped_rows(0, junk=True), MAPPED, str(tmp_path), 1, ids=False)
    append_file(env, "mapped", mapped_rows(100, idname="ident"), MAPPED, str(tmp_path), 2,
                ids=False)
    append_file(env, "mapped", mapped_rows(200), MAPPED, str(tmp_path), 3)
    want = " UNION ALL ".join(mapped_rows(k) for k in (0, 100, 200))
    check_compaction(env, "mapped", MAPPED, want, 3, evolved=True)


def test_files_without_field_ids_fail_without_a_name_mapping(env, tmp_path):
    create_table(env, "unmapped", MAPPED)
    append_file(env, "unmapped", mapped_rows(0), MAPPED, str(tmp_path), 1, ids=False)
    append_file(env, "unmapped", mapped_rows(100), MAPPED, str(tmp_path), 2, ids=False)
    _, meta0 = ow.load(env["catalog"], NS, "unmapped")
    jid = q(env, "SELECT tms.run_operation(%s, %s, %s, 'compaction', %s::jsonb)",
            (env["server"], NS, "unmapped", json.dumps({"rewrite-all": True})))[0][0]
    state = lambda: q(env, "SELECT state, last_error FROM tms.maintenance_jobs WHERE id = %s",  # noqa: E731
                      (jid,))[0]
    wait_for(lambda: state()[0] in TERMINAL, timeout=300, what="job %s" % jid)
    st, last_error = state()
    assert st == "failed" and "no Iceberg field id and the table no name mapping" in last_error, \
        (st, last_error)
    assert ow.load(env["catalog"], NS, "unmapped")[1]["current-snapshot-id"] == \
        meta0["current-snapshot-id"]


# ---------------------------------------------------------------------------
# bucket and truncate of decimal, uuid and binary (the output spec)
# ---------------------------------------------------------------------------

def test_murmur3_of_the_tests():
    # Appendix B's examples, so that the tests' own hash is right
    assert murmur3_32(b"iceberg") == 1210000089
    assert murmur3_32((34).to_bytes(8, "little", signed=True)) == 2017239379
    assert murmur3_32(unscaled_bytes(1420)) == 2 ** 32 - 500754589
    assert murmur3_32(uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes) == 1488055340
    assert unscaled_bytes(-128) == b"\x80" and unscaled_bytes(128) == b"\x00\x80"


def test_output_spec_bucket_truncate_of_decimal_uuid_binary(env, tmp_path):
    """Files of spec 1 (identity of a decimal, a uuid and a binary column,
    one value of each a file) are rewritten into spec 2 (bucket and
    truncate of each): the new files' partitions, read by the test world's
    manifest reader, are those computed here from every row, the rows are
    the same."""
    schema = schema_of(0, [F(1, "id", "long", True), F(2, "dec", "decimal(9, 2)"),
                           F(3, "u", "uuid"), F(4, "b", "binary")])
    create_table(env, "xbytes", schema)
    spec1 = {"spec-id": 1, "fields": [
        {"name": "dec", "transform": "identity", "source-id": 2, "field-id": 1000},
        {"name": "u", "transform": "identity", "source-id": 3, "field-id": 1001},
        {"name": "b", "transform": "identity", "source-id": 4, "field-id": 1002}]}
    spec2 = {"spec-id": 2, "fields": [
        {"name": "dec_bucket", "transform": "bucket[4]", "source-id": 2, "field-id": 1003},
        {"name": "dec_trunc", "transform": "truncate[100]", "source-id": 2, "field-id": 1004},
        {"name": "u_bucket", "transform": "bucket[8]", "source-id": 3, "field-id": 1005},
        {"name": "b_bucket", "transform": "bucket[4]", "source-id": 4, "field-id": 1006},
        {"name": "b_trunc", "transform": "truncate[2]", "source-id": 4, "field-id": 1007}]}

    def set_spec(spec):
        _, meta = ow.load(env["catalog"], NS, "xbytes")
        ow.commit(env["catalog"], NS, "xbytes", {
            "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
            "updates": [{"action": "add-spec", "spec": spec},
                        {"action": "set-default-spec", "spec-id": spec["spec-id"]}]})
    set_spec(spec1)
    pfields = [("dec", {"type": "fixed", "name": "decimal_9_2", "size": 4,
                        "logicalType": "decimal", "precision": 9, "scale": 2}, 1000),
               ("u", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"},
                1001),
               ("b", "bytes", 1002)]
    # 14.20 and the uuid of the spec's examples, a negative decimal, a
    # null, a decimal of 7 digits, one- and zero-byte binaries
    values = [(decimal.Decimal("14.20"), "f79c3e09-677c-4bbd-a479-3f349cb785e7", b"\x00\x01\x02\x03"),
              (decimal.Decimal("-0.05"), "0b8f7a9e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", b"\xff"),
              (None, "11111111-2222-4333-8444-555555555555", b""),
              (decimal.Decimal("1234567.89"), None, b"\x80\x7f\x01")]
    for k, (d, u, b) in enumerate(values):
        query = ("SELECT (%d + i)::BIGINT AS id, %s::DECIMAL(9, 2) AS dec, %s::UUID AS u,"
                 " unhex('%s')::BLOB AS b FROM range(5) t(i)"
                 % (k * 100, "NULL" if d is None else "'%s'" % d,
                    "NULL" if u is None else "'%s'" % u, b.hex()))
        part = {"dec": None if d is None else int(d.scaleb(2)).to_bytes(4, "big", signed=True),
                "u": None if u is None else uuid.UUID(u).bytes, "b": b}
        append_file(env, "xbytes", query, schema, str(tmp_path), 40 + k, spec=spec1,
                    partition=part, pfields=pfields)
    set_spec(spec2)
    _, meta0 = ow.load(env["catalog"], NS, "xbytes")
    before = data_files(env, meta0)
    sel = "SELECT id::VARCHAR AS id, dec::VARCHAR AS dec, u::VARCHAR AS u, hex(b) AS b"
    want = canon(duck(["%s FROM read_parquet([%s])" % (
        sel, ", ".join(lit(env["st"].local_path(p)) for p in before))])[0])
    compact(env, "xbytes")
    _, meta = ow.load(env["catalog"], NS, "xbytes")
    after = data_files(env, meta)
    assert len(after) == 4 and not set(after) & set(before), after
    got = []
    for p, f in after.items():
        part = dict(f["partition"])
        assert set(part) == {x["name"] for x in spec2["fields"]}, part
        for r in duck(["%s FROM read_parquet(%s)" % (sel, lit(env["st"].local_path(p)))])[0]:
            got.append(r)
            d = None if r["dec"] is None else int(decimal.Decimal(r["dec"]).scaleb(2))
            ub = None if r["u"] is None else uuid.UUID(r["u"]).bytes
            b = bytes.fromhex(r["b"])
            exp = {
                "dec_bucket": None if d is None else (murmur3_32(unscaled_bytes(d)) & 0x7fffffff) % 4,
                "dec_trunc": None if d is None else (d - d % 100).to_bytes(4, "big", signed=True).hex(),
                "u_bucket": None if ub is None else (murmur3_32(ub) & 0x7fffffff) % 8,
                "b_bucket": (murmur3_32(b) & 0x7fffffff) % 4,
                "b_trunc": b[:2].hex()}
            assert part == exp, (p, part, exp, r)
    assert canon(got) == want
    # 14.20 is bucket 3 of 4 (the spec's hash, -500754589), truncate[100] 14.00
    assert {(dict(f["partition"])["dec_bucket"], dict(f["partition"])["dec_trunc"])
            for f in after.values()} >= {(3, "00000578")}


# ---------------------------------------------------------------------------
# format v3: timestamp_ns, initial-default and write-default, row lineage
# ---------------------------------------------------------------------------

def test_v3_timestamp_ns_and_defaults(env, tmp_path):
    """A v3 table (https://iceberg.apache.org/spec/#version-3) of
    timestamp_ns values, at the top and in a struct, to which a column with
    an initial-default and a write-default is added after its first file
    ("Default values": a file written before reads the initial-default, a
    writer fills the write-default in).  Compacted by the local engine:
    the new file holds the same rows, nanoseconds kept, the
    initial-default written out for the old file's rows, the second file's
    explicit values (its write-default and a null) as they were, and each
    row's _row_id and _last_updated_sequence_number as the old files gave
    them (first_row_id + position, the file's data sequence number)."""
    name = "v3ns"
    s0 = schema_of(0, [F(1, "id", "long", True), F(2, "t", "timestamp_ns"),
                       F(3, "s", S(F(4, "u", "timestamp_ns")))])
    s1 = schema_of(1, s0["fields"] + [F(5, "dflt", "int", **{"initial-default": 42,
                                                              "write-default": 7})])
    ts = ["1969-12-31 23:59:59.999999999", "2024-01-01 00:00:00.000000001",
          "2262-01-01 00:00:00.000000007", "1900-01-01 00:00:00.123456789"]
    old = ("SELECT id::BIGINT AS id, t, {'u': u} AS s FROM (VALUES"
           " (0, TIMESTAMP_NS '%s', TIMESTAMP_NS '%s'), (1, TIMESTAMP_NS '%s', NULL::TIMESTAMP_NS),"
           " (2, NULL::TIMESTAMP_NS, TIMESTAMP_NS '%s')) v(id, t, u)" % (ts[0], ts[2], ts[1], ts[3]))
    new = ("SELECT id::BIGINT AS id, t, {'u': u} AS s, dflt::INTEGER AS dflt FROM (VALUES"
           " (10, TIMESTAMP_NS '%s', TIMESTAMP_NS '%s', 7), (11, TIMESTAMP_NS '%s', NULL, NULL))"
           " v(id, t, u, dflt)" % (ts[1], ts[0], ts[3]))
    create_table(env, name, s0, fv=3)
    append_file(env, name, old, s0, str(tmp_path), 1)
    evolve(env, name, s1)
    append_file(env, name, new, s1, str(tmp_path), 2)
    _, meta0 = ow.load(env["catalog"], NS, name)
    assert meta0["format-version"] == 3 and meta0["next-row-id"] == 5
    before = data_files(env, meta0)
    compact(env, name)
    _, meta = ow.load(env["catalog"], NS, name)
    after = data_files(env, meta)
    assert len(after) == 1 and not set(after) & set(before), (before, after)
    path = next(iter(after))
    local = env["st"].local_path(path)
    sel = ("SELECT id, epoch_ns(t)::VARCHAR AS t, epoch_ns(s.u)::VARCHAR AS u, dflt,"
           " _row_id, _last_updated_sequence_number AS lus FROM (%s) ORDER BY id")
    want, got, ids = duck([
        sel % ("SELECT *, 42 AS dflt, id AS _row_id, 1::BIGINT AS _last_updated_sequence_number"
               " FROM (%s) UNION ALL SELECT *, (3 + id - 10)::BIGINT, 2::BIGINT FROM (%s)"
               % (old, new)),
        sel % ("SELECT * FROM read_parquet(%s)" % lit(local)),
        "SELECT name, field_id FROM parquet_schema(%s) WHERE field_id IS NOT NULL"
        " ORDER BY field_id" % lit(local)])
    assert canon(got) == canon(want), (got, want)
    assert [r["dflt"] for r in got] == [42, 42, 42, 7, None]
    # 1969-12-31 23:59:59.999999999 is -1 ns
    assert got[0]["t"] == "-1" and got[3]["u"] == "-1"
    assert [(r["name"], int(r["field_id"])) for r in ids] == [
        ("id", 1), ("t", 2), ("s", 3), ("u", 4), ("dflt", 5),
        ("_last_updated_sequence_number", 2147483539), ("_row_id", 2147483540)]
    # the nanosecond bounds, Iceberg's single-value serialization (8 bytes LE)
    df = new_entry(env, meta, path)
    lo = {b["key"]: b["value"] for b in df["lower_bounds"] or []}
    hi = {b["key"]: b["value"] for b in df["upper_bounds"] or []}
    ns = sorted(int(r["t"]) for r in want if r["t"] is not None)
    assert lo[2] == struct.pack("<q", ns[0]) and hi[2] == struct.pack("<q", ns[-1])
    assert lo[5] == struct.pack("<i", 7) and hi[5] == struct.pack("<i", 42)
    # the new manifest's rows get ids past the old next-row-id ("Row
    # lineage example"); the file stores the old ones, which win
    assert meta["next-row-id"] == meta0["next-row-id"] + 5


# ---------------------------------------------------------------------------
# what the local engine still refuses
# ---------------------------------------------------------------------------

def test_refused_type(env, tmp_path):
    schema = schema_of(0, [F(1, "id", "long", True),
                           F(2, "ev", S(F(3, "at", "timestamptz_ns")))])
    create_table(env, "refused", schema, fv=3)
    n = q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]
    e = env["pg"].query_error("SELECT tms.run_operation(%s, %s, 'refused', 'compaction')",
                              (env["server"], NS))
    assert e.pgcode == "0A000", (e.pgcode, str(e))
    assert 'Column "ev.at" is of type timestamptz_ns' in e.diag.message_detail, \
        e.diag.message_detail
    assert "tms_engine" in e.diag.message_hint, e.diag.message_hint
    assert q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0] == n


# ---------------------------------------------------------------------------
# timestamp_ns, through the helper alone
# ---------------------------------------------------------------------------

def test_helper_timestamp_ns(tmp_path):
    """timestamp_ns, a format v3 type, through the helper alone (a job on
    a v3 table: test_v3_timestamp_ns_and_defaults): the
    helper itself (the installed tms_compactor, speaking its protocol)
    rewrites a file of timestamp_ns values, nested ones too, keeping their
    nanoseconds, and bounds them in nanoseconds."""
    libdir = subprocess.run(["pg_config", "--pkglibdir"], capture_output=True, text=True,
                            check=True).stdout.strip()
    helper = os.path.join(libdir, "tms", "tms_compactor")
    schema = schema_of(0, [F(1, "id", "int", True), F(2, "t", "timestamp_ns"),
                           F(3, "s", S(F(4, "u", "timestamp_ns")))])
    rows = ("SELECT id::INTEGER AS id, t, {'u': u} AS s FROM (VALUES"
            " (0, TIMESTAMP_NS '1969-12-31 23:59:59.999999999', TIMESTAMP_NS '2262-01-01 00:00:00.000000007'),"
            " (1, TIMESTAMP_NS '2024-01-01 00:00:00.000000001', TIMESTAMP_NS '1900-01-01 00:00:00.123456789'),"
            " (2, TIMESTAMP_NS '2024-01-01 00:00:00.000000002', NULL::TIMESTAMP_NS)) v(id, t, u)")
    src = str(tmp_path / "in.parquet")
    res = duck(["COPY (%s) TO %s (FORMAT parquet, FIELD_IDS %s)" % (rows, lit(src), field_ids(schema)),
                "SELECT id, epoch_ns(t)::VARCHAR AS t, epoch_ns(s.u)::VARCHAR AS u FROM (%s)" % rows])
    want = res[1]
    out_dir = tmp_path / "out"
    (tmp_path / "tmp").mkdir()
    out_dir.mkdir()
    hello = {"type": "hello", "protocol": 1, "memory_limit": 256 << 20, "threads": 1,
             "temp_directory": str(tmp_path / "tmp"),
             "storage": {"s3_path_style": 1, "connect_timeout_ms": 1000,
                         "request_timeout_ms": 10000, "retries": 0,
                         "local_roots": [str(tmp_path)]}}
    group = {"type": "group", "group": 0, "schema": schema,
             "inputs": [{"path": "file://" + src, "uri": "file://" + src, "records": 3,
                         "size": os.path.getsize(src), "seq": 1}],
             "deletes": [],
             "output": {"dir": "file://%s/" % out_dir, "upload_dir": "file://%s/" % out_dir,
                        "prefix": "o", "files": 1, "compression": "zstd",
                        "compression_level": -1, "metrics": []}}
    r = subprocess.run([helper, str(os.getpid())], input="%s\n%s\n" % (json.dumps(hello),
                       json.dumps(group)), capture_output=True, text=True, timeout=120)
    msgs = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and msgs[-1]["type"] == "done", (r.stdout, r.stderr)
    f = [m for m in msgs if m["type"] == "file"][0]
    local = str(out_dir / "o-00000.parquet")
    got, types = duck(["SELECT id, epoch_ns(t)::VARCHAR AS t, epoch_ns(s.u)::VARCHAR AS u"
                       " FROM read_parquet(%s)" % lit(local),
                       "SELECT name, logical_type FROM parquet_schema(%s)"
                       " WHERE name IN ('t', 'u')" % lit(local)])
    assert canon(got) == canon(want)
    assert all("NANOS" in (t["logical_type"] or "") for t in types), types
    m = {x["id"]: x for x in f["metrics"]}
    for fid, col in ((2, "t"), (4, "u")):
        vals = [int(w[col]) for w in want if w[col] is not None]
        assert m[fid]["lower"] == struct.pack("<q", min(vals)).hex(), (fid, m[fid])
        assert m[fid]["upper"] == struct.pack("<q", max(vals)).hex(), (fid, m[fid])
    assert m[4]["null_count"] == 1 and m[2]["null_count"] == 0
