"""
compact.py -- compaction for the test world's engine look-alikes: Iceberg's
rewrite_data_files (Spark, bin-pack or sort) and Trino's ALTER TABLE ...
EXECUTE optimize, really executed against the test REST catalog and its
storage.

    compact(catalog_uri, catalog_token, st, namespace, table, *,
            strategy="binpack", sort_order=None, predicate=None,
            options={}, file_size_threshold=None) -> dict

catalog_uri is the catalog's base URI (http://127.0.0.1:PORT, the prefix is
then read from GET /v1/config) or its URI with the prefix
(http://127.0.0.1:PORT/v1/PREFIX); catalog_token a bearer token or None;
st an opsworld.storage() object; predicate None or a callable taking a data
file's partition values {partition field name: Python value (identity
dates as datetime.date, identity timestamps as datetime.datetime, the rest
as stored)} -> bool.  options are Iceberg's rewrite options as strings:
target-file-size-bytes (default: the table property
write.target-file-size-bytes, else 512 MB), min-file-size-bytes (75 % of
the target), max-file-size-bytes (180 %), min-input-files (5), rewrite-all
(false), max-file-group-size-bytes (100 GB), delete-file-threshold (no
limit).  file_size_threshold switches to Trino's rule: in each partition the
files smaller than it (and the files with deletes) are rewritten when there
are two or more of them or one has deletes.

The plan follows Iceberg's bin-pack rewrite (SizeBasedFileRewriter): files
are grouped by (partition spec id, partition) and written back in the same
spec; a group is rewritten when rewrite-all, or it has more than one file
and at least min-input-files, or more than one file and more bytes than the
target, or more bytes than max-file-group-size-bytes, or a file with at
least delete-file-threshold deletes; its output file count is Iceberg's
numOutputFiles(input bytes), the rows split evenly.  remove-dangling-deletes
(false) also removes the delete files that apply to no live data file (in
the same snapshot; Iceberg commits them separately).  Deletes are applied
by the spec's sequence number rules (a position delete to data files of its
partition with data sequence number <= its own, narrowed by its file_path
bounds; an equality delete to data files of its partition -- every
partition when its spec is unpartitioned -- with a strictly smaller one).  A delete file is removed when
every live data file it applies to is rewritten.  One "replace" snapshot is
committed (requirements assert-table-uuid and assert-ref-snapshot-id of
main); the new data files inherit its sequence number.  On 409 the table is
reloaded and the same rewrite is committed on the new base once, if every
rewritten file is still live and no new delete file touches their
partitions; otherwise (or on a second 409, or another 4xx) CompactError is
raised and the files written are deleted; after a 5xx or a lost connection
the commit's outcome is unknown: CompactError, and the files are kept.

Returns the columns of Spark's rewrite_data_files: rewritten_data_files_count,
added_data_files_count, rewritten_bytes_count, failed_data_files_count,
removed_delete_files_count (plus snapshot_id, None when nothing was
rewritten; attempts, the commits sent (0, 1 or 2); groups: [{spec_id,
partition, input_files, output_files}]).

    rewrite_position_deletes(catalog_uri, catalog_token, st, namespace, table,
                             *, predicate=None, options=None) -> dict

is Iceberg's rewrite_position_delete_files: per (spec id, partition) of the
current snapshot with at least min-input-files (5, and more than one) live
position delete files, or every one with rewrite-all, the rows still
pointing at a live data file of the partition (dangling ones dropped) are
written sorted by (file_path, pos) into ONE new position delete file
(field ids 2147483546, 2147483545; none when no row is left), whose
explicit data sequence number is the highest of the files it replaces (so
it applies to the same data files; its file sequence number is the new
snapshot's).  One "replace" snapshot marks the old files DELETED (same
requirements, 409 and 5xx rules as above; the retry needs the old files
still live).  Returns rewritten_delete_files_count,
added_delete_files_count, rewritten_bytes_count, added_bytes_count (plus
snapshot_id, attempts, groups).

The Parquet work is test/node/compact.mjs (DuckDB); s3:// inputs are copied
to a temporary directory through st and outputs uploaded the same way.
Rules: only primitive column types (CompactError otherwise); no sleeping;
every loop is bounded by the table's files; nothing here talks to
PostgreSQL.
"""

import datetime
import decimal
import json
import os
import random
import shutil
import struct
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuid_mod

TEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _d in (os.path.join(TEST_DIR, "catalog"), os.path.join(TEST_DIR, "fixtures"), TEST_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import avro_codec  # noqa: E402
import nodeserve  # noqa: E402
import opsworld  # noqa: E402
import storage as storage_mod  # noqa: E402

NODE_DIR = os.path.join(TEST_DIR, "node")
COMPACT_MJS = os.path.join(NODE_DIR, "compact.mjs")
MB = 1024 * 1024
POS_PATH_ID = 2147483546
EPOCH = datetime.date(1970, 1, 1)


class CompactError(Exception):
    """The compaction could not be planned, written or committed."""


# ---------------------------------------------------------------------------
# the catalog
# ---------------------------------------------------------------------------

class _Catalog:
    def __init__(self, uri, token):
        self.token = token
        uri = uri.rstrip("/")
        if "/v1" in urllib.parse.urlsplit(uri).path:
            self.base = uri
        else:
            cfg = self._call("GET", uri + "/v1/config")[1] or {}
            prefix = (cfg.get("overrides") or {}).get("prefix") \
                or (cfg.get("defaults") or {}).get("prefix")
            self.base = uri + "/v1" + ("/" + prefix if prefix else "")

    def _call(self, method, url, body=None):
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text.decode("utf-8", "replace")
        return status, parsed

    def table_url(self, namespace, table):
        return "%s/namespaces/%s/tables/%s" % (
            self.base, urllib.parse.quote("\x1f".join(namespace), safe=""),
            urllib.parse.quote(table, safe=""))

    def load(self, namespace, table):
        status, body = self._call("GET", self.table_url(namespace, table))
        if status != 200:
            raise CompactError("loading %s.%s: HTTP %d %s" % (
                ".".join(namespace), table, status, body))
        return body["metadata-location"], body["metadata"]

    def commit(self, namespace, table, body):
        return self._call("POST", self.table_url(namespace, table), body)


# ---------------------------------------------------------------------------
# reading the table
# ---------------------------------------------------------------------------

def _spec(meta, spec_id):
    for s in meta.get("partition-specs") or []:
        if s["spec-id"] == spec_id:
            return s
    if spec_id == 0 and meta.get("partition-spec") is not None:
        return {"spec-id": 0, "fields": meta["partition-spec"]}
    raise CompactError("no partition spec %s" % spec_id)


def _schema(meta):
    sid = meta.get("current-schema-id", 0)
    for s in meta.get("schemas") or []:
        if s["schema-id"] == sid:
            return s
    if meta.get("schema"):
        return meta["schema"]
    raise CompactError("no current schema")


def _scan(st, meta):
    """Every live entry of the current snapshot: a list of dicts with path,
    content, spec_id, part (hashable), partition (the record), seq,
    file_seq, records, size, equality_ids, bounds of file_path, manifest,
    and the manifest list records."""
    cur = opsworld.current_id(meta)
    if cur is None:
        return [], []
    snap = opsworld.snapshot(meta, cur)
    if not snap.get("manifest-list"):
        raise CompactError("snapshot %s has no manifest list (v1 inline manifests)" % cur)
    records = opsworld.manifest_records(st, snap)
    out = []
    for rec in records:
        mseq = rec.get("sequence_number")
        for e in opsworld.manifest_entries(st, rec["manifest_path"]):
            if e["status"] == 2:
                continue
            df = e["data_file"]
            seq = e.get("sequence_number")
            fseq = e.get("file_sequence_number")
            if e["status"] == 1:
                seq = mseq if seq is None else seq
                fseq = mseq if fseq is None else fseq
            lower = {b["key"]: b["value"] for b in df.get("lower_bounds") or []}
            upper = {b["key"]: b["value"] for b in df.get("upper_bounds") or []}
            out.append({
                "path": df["file_path"], "content": df.get("content", 0) or 0,
                "spec_id": rec.get("partition_spec_id", 0),
                "partition": df.get("partition") or {},
                "part": opsworld._partition_key(df.get("partition")),
                "seq": seq, "file_seq": fseq, "records": df["record_count"],
                "size": df["file_size_in_bytes"],
                "equality_ids": df.get("equality_ids") or [],
                "referenced": df.get("referenced_data_file"),
                "path_lower": lower.get(POS_PATH_ID), "path_upper": upper.get(POS_PATH_ID),
                "manifest": rec["manifest_path"]})
    return out, records


def _unpartitioned(meta, spec_id):
    return not _spec(meta, spec_id)["fields"]


def _deletes_for(meta, d, deletes):
    """(position delete entries, equality delete entries) applying to data
    file entry d, by the sequence number rules (see the module comment)."""
    pos, eq = [], []
    if d["seq"] is None:
        return pos, eq
    for x in deletes:
        same = x["spec_id"] == d["spec_id"] and x["part"] == d["part"]
        if x["content"] == 1:
            if not same or x["seq"] < d["seq"]:
                continue
            if x["referenced"] and x["referenced"] != d["path"]:
                continue
            lo, hi = x["path_lower"], x["path_upper"]
            p = d["path"].encode()
            if lo is not None and p < lo:
                continue
            if hi is not None and p > hi and not p.startswith(hi):
                continue
            pos.append(x)
        elif x["content"] == 2:
            if x["seq"] <= d["seq"]:
                continue
            if same or _unpartitioned(meta, x["spec_id"]):
                eq.append(x)
    return pos, eq


# ---------------------------------------------------------------------------
# planning
# ---------------------------------------------------------------------------

def _partition_values(meta, spec_id, partition):
    """The predicate's view of a partition: {name: Python value}."""
    spec = _spec(meta, spec_id)
    types = {f["id"]: f["type"] for f in _schema(meta)["fields"]}
    out = {}
    for pf in spec["fields"]:
        v = partition.get(pf["name"])
        if v is not None and pf["transform"] == "identity":
            t = types.get(pf["source-id"])
            if t == "date":
                v = EPOCH + datetime.timedelta(days=v)
            elif t in ("timestamp", "timestamptz"):
                v = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc if t == "timestamptz"
                                      else None) + datetime.timedelta(microseconds=v)
        out[pf["name"]] = v
    return out


def _opt_int(options, key, default):
    v = options.get(key)
    return int(v) if v not in (None, "") else default


def _num_output_files(size, target, min_size, max_size):
    """Iceberg's SizeBasedFileRewriter.numOutputFiles."""
    if size < target:
        return 1
    with_rem = -(-size // target)
    without = size // target
    if size % target > min_size:
        return with_rem
    if without > 0 and size / without < min(1.1 * target, max_size):
        return without
    return with_rem


def plan(meta, scan, options=None, predicate=None, file_size_threshold=None):
    """The file groups to rewrite: [{spec_id, part, partition, files: [data
    entries], deletes: {path: (pos, eq)}, output_files}]."""
    options = dict(options or {})
    props = meta.get("properties") or {}
    target = _opt_int(options, "target-file-size-bytes",
                      int(props.get("write.target-file-size-bytes", 512 * MB)))
    min_size = _opt_int(options, "min-file-size-bytes", int(target * 0.75))
    max_size = _opt_int(options, "max-file-size-bytes", int(target * 1.8))
    min_inputs = _opt_int(options, "min-input-files", 5)
    max_group = _opt_int(options, "max-file-group-size-bytes", 100 * 1024 * MB)
    delete_threshold = _opt_int(options, "delete-file-threshold", 2 ** 31 - 1)
    rewrite_all = str(options.get("rewrite-all", "false")).lower() == "true"
    if target <= 0 or min_inputs <= 0 or max_group <= 0 or delete_threshold <= 0:
        raise CompactError("rewrite options must be positive: %s" % options)
    if not (0 <= min_size < target < max_size):
        raise CompactError("need min-file-size-bytes < target-file-size-bytes < "
                           "max-file-size-bytes (%d, %d, %d)" % (min_size, target, max_size))
    data = [f for f in scan if f["content"] == 0]
    deletes = [f for f in scan if f["content"] != 0]
    by_part = {}
    for d in data:
        by_part.setdefault((d["spec_id"], d["part"]), []).append(d)
    groups = []
    for (spec_id, part), files in sorted(by_part.items(), key=lambda kv: repr(kv[0])):
        if predicate is not None and not predicate(
                _partition_values(meta, spec_id, files[0]["partition"])):
            continue
        dl = {d["path"]: _deletes_for(meta, d, deletes) for d in files}
        ndel = {p: len(a) + len(b) for p, (a, b) in dl.items()}
        if file_size_threshold is not None:
            sel = [d for d in files if d["size"] < file_size_threshold or ndel[d["path"]]]
            if len(sel) < 2 and not any(ndel[d["path"]] for d in sel):
                continue
            bins = [sel]
        else:
            sel = [d for d in files if rewrite_all or d["size"] < min_size or d["size"] > max_size
                   or ndel[d["path"]] >= delete_threshold]
            bins = []
            for d in sorted(sel, key=lambda f: (-f["size"], f["path"])):
                for b in bins:
                    if sum(f["size"] for f in b) + d["size"] <= max_group:
                        b.append(d)
                        break
                else:
                    bins.append([d])
        for b in bins:
            size = sum(f["size"] for f in b)
            if file_size_threshold is None and not (
                    rewrite_all or (len(b) > 1 and len(b) >= min_inputs)
                    or (len(b) > 1 and size > target) or size > max_group
                    or any(ndel[f["path"]] >= delete_threshold for f in b)):
                continue
            b = sorted(b, key=lambda f: (f["seq"] or 0, f["path"]))
            groups.append({"spec_id": spec_id, "part": part, "partition": b[0]["partition"],
                           "files": b, "deletes": {f["path"]: dl[f["path"]] for f in b},
                           "output_files": _num_output_files(size, target, min_size, max_size)})
    return groups


# ---------------------------------------------------------------------------
# Iceberg values
# ---------------------------------------------------------------------------

def _truncate_upper(data, n, unit_bytes=False):
    """The upper bound of a value truncated to n units (Iceberg's
    truncate-upper): the prefix with its last unit incremented; None if
    impossible."""
    if unit_bytes:
        pre = bytearray(data[:n])
        while pre:
            if pre[-1] < 0xFF:
                pre[-1] += 1
                return bytes(pre)
            pre.pop()
        return None
    chars = list(data[:n])
    while chars:
        c = ord(chars[-1]) + 1
        if 0xD800 <= c <= 0xDFFF:
            c = 0xE000
        if c <= 0x10FFFF:
            chars[-1] = chr(c)
            return "".join(chars).encode()
        chars.pop()
    return None


def encode_bound(type_, text, upper=False, truncate=16):
    """An Iceberg single-value binary bound from compact.mjs's text."""
    if text is None:
        return None
    if type_ in ("int", "date"):
        return struct.pack("<i", int(text))
    if type_ in ("long", "time", "timestamp", "timestamptz", "timestamp_ns"):
        return struct.pack("<q", int(text))
    if type_ == "float":
        return struct.pack("<f", float(text))
    if type_ == "double":
        return struct.pack("<d", float(text))
    if type_ == "boolean":
        return b"\x01" if text in (True, "true") else b"\x00"
    if type_ == "string":
        if len(text) <= truncate:
            return text.encode()
        return _truncate_upper(text, truncate) if upper else text[:truncate].encode()
    if type_ == "uuid":
        return uuid_mod.UUID(text).bytes
    if type_.startswith("decimal"):
        scale = int(type_.split(",")[1].rstrip(") "))
        unscaled = int(decimal.Decimal(text).scaleb(scale))
        n = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(n, "big", signed=True)
    if type_ == "binary" or type_.startswith("fixed"):
        raw = bytes.fromhex(text)
        if type_ == "binary" and len(raw) > truncate:
            return _truncate_upper(raw, truncate, True) if upper else raw[:truncate]
        return raw
    return None


def _kv(d):
    return [{"key": int(k), "value": v} for k, v in sorted(d.items(), key=lambda kv: int(kv[0]))
            if v is not None]


def data_file_metrics(schema, out, truncate=16):
    """column_sizes, value_counts, null/nan counts, bounds of a manifest
    data_file from one compact.mjs output file (strings and binary bounds
    truncated to `truncate` units, Iceberg's default metrics mode; None:
    full, as Iceberg keeps position delete files' file_path)."""
    truncate = truncate if truncate is not None else 2 ** 31
    types = {f["id"]: f["type"] for f in schema["fields"]}
    m = out["metrics"]
    return {
        "column_sizes": _kv({k: v for k, v in out["column_sizes"].items()}),
        "value_counts": _kv({k: v["value_count"] for k, v in m.items()}),
        "null_value_counts": _kv({k: v["null_count"] for k, v in m.items()}),
        "nan_value_counts": _kv({k: v["nan_count"] for k, v in m.items()
                                 if v["nan_count"] is not None}) or None,
        "lower_bounds": _kv({k: encode_bound(types[int(k)], v["lower"], truncate=truncate)
                             for k, v in m.items()}),
        "upper_bounds": _kv({k: encode_bound(types[int(k)], v["upper"], upper=True,
                                             truncate=truncate) for k, v in m.items()}),
    }


def _check_primitive(schema):
    for f in schema["fields"]:
        if not isinstance(f["type"], str):
            raise CompactError("column %s has a nested type: compaction handles primitive "
                               "columns only" % f["name"])


# ---------------------------------------------------------------------------
# the Parquet work (test/node/compact.mjs)
# ---------------------------------------------------------------------------

def run_node(job, timeout=300):
    """Run compact.mjs on a job (dict); returns its parsed output, through
    the test world's pool of long-lived Node servers (test/nodeserve.py):
    a failed job raises CompactError and leaves its server usable."""
    return nodeserve.run(COMPACT_MJS, job, timeout, CompactError)


class _Local:
    """Local paths of table files: s3:// ones are copied into a temporary
    directory (once each)."""

    def __init__(self, st, tmp):
        self.st, self.tmp, self.map = st, tmp, {}

    def path(self, uri):
        if uri in self.map:
            return self.map[uri]
        if storage_mod.is_s3(uri) or storage_mod.is_gs(uri):
            p = os.path.join(self.tmp, "in", "%05d.parquet" % len(self.map))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(self.st.read(uri))
        else:
            p = self.st.local_path(uri)
        self.map[uri] = p
        return p


def data_location(meta):
    props = meta.get("properties") or {}
    return (props.get("write.data.path") or props.get("write.folder-storage.path")
            or meta["location"].rstrip("/") + "/data").rstrip("/")


def partition_path(meta, spec_id, partition):
    """name=value/... as Iceberg's PartitionSpec.partitionToPath writes it."""
    vals = _partition_values(meta, spec_id, partition)
    parts = []
    for pf in _spec(meta, spec_id)["fields"]:
        v = vals.get(pf["name"])
        text = "null" if v is None else (v.isoformat() if hasattr(v, "isoformat") else
                                         v.hex() if isinstance(v, bytes) else str(v))
        parts.append("%s=%s" % (urllib.parse.quote(pf["name"], safe=""),
                                urllib.parse.quote(text, safe="")))
    return "/".join(parts)


def parse_sort_order(meta, strategy, sort_order):
    """[{field_id, direction, nulls}] from a Spark sort_order string ("id
    DESC NULLS LAST, name"), a list of such dicts, or (strategy "sort"
    without one) the table's default sort order."""
    if strategy not in ("binpack", "sort"):
        raise CompactError("strategy %r is not supported (binpack, sort)" % strategy)
    schema = _schema(meta)
    by_name = {f["name"].lower(): f["id"] for f in schema["fields"]}
    if sort_order is None:
        if strategy != "sort":
            return []
        oid = meta.get("default-sort-order-id", 0)
        order = next((o for o in meta.get("sort-orders") or [] if o["order-id"] == oid),
                     {"fields": []})
        out = []
        for f in order["fields"]:
            if f.get("transform", "identity") != "identity":
                raise CompactError("sort transform %s is not supported" % f["transform"])
            out.append({"field_id": f["source-id"], "direction": f.get("direction", "asc"),
                        "nulls": "first" if f.get("null-order", "nulls-first") == "nulls-first"
                        else "last"})
        if not out:
            raise CompactError("strategy sort needs a sort order (the table has none)")
        return out
    if isinstance(sort_order, str):
        items = []
        for term in [t.strip() for t in sort_order.split(",") if t.strip()]:
            words = term.split()
            up = [w.upper() for w in words]
            d = {"column": words[0].strip('`"'), "direction": "asc"}
            if "DESC" in up:
                d["direction"] = "desc"
            if "NULLS" in up:
                d["nulls"] = up[up.index("NULLS") + 1].lower()
            items.append(d)
        sort_order = items
    out = []
    for s in sort_order:
        fid = s.get("field_id") or by_name.get(str(s.get("column", "")).lower())
        if fid is None:
            raise CompactError("sort column %r is not in the table" % s.get("column"))
        direction = s.get("direction", "asc").lower()
        out.append({"field_id": fid, "direction": direction,
                    "nulls": s.get("nulls") or ("first" if direction == "asc" else "last")})
    return out


def write_group(st, meta, group, local, sort, tmp, n):
    """Rewrite one group: returns ([{path (uri), records, size, metrics,
    field_ids}], compact.mjs's answer); CompactError unless every file
    carries exactly the schema's field ids (parquet_schema())."""
    schema = _schema(meta)
    props = meta.get("properties") or {}
    inputs = []
    for f in group["files"]:
        pos, eq = group["deletes"][f["path"]]
        inputs.append({"path": local.path(f["path"]), "uri": f["path"],
                       "positions": sorted(group.get("positions", {}).get(f["path"], ())),
                       "position_delete_files": [local.path(x["path"]) for x in pos],
                       "equality_deletes": [{"path": local.path(x["path"]),
                                             "field_ids": x["equality_ids"]} for x in eq]})
    out_dir = os.path.join(tmp, "out", "g%05d" % n)
    tag = uuid_mod.uuid4()
    job = {"mode": "compact", "schema": {"fields": schema["fields"]}, "inputs": inputs,
           "sort": sort, "output_files": group["output_files"], "output_dir": out_dir,
           "file_prefix": "%05d-%d-%s" % (n, 0, tag),
           "compression": props.get("write.parquet.compression-codec", "zstd"),
           "iceberg_schema": json.dumps(schema)}
    res = run_node(job)
    base = data_location(meta)
    ppath = partition_path(meta, group["spec_id"], group["partition"])
    files = []
    want_ids = sorted(f["id"] for f in schema["fields"])
    for o in res["files"]:
        if sorted(o["field_ids"].values()) != want_ids:
            raise CompactError("%s: field ids %s, not the schema's %s" % (
                o["path"], o["field_ids"], want_ids))
        uri = "%s/%s%s" % (base, ppath + "/" if ppath else "", os.path.basename(o["path"]))
        with open(o["path"], "rb") as fh:
            st.write(uri, fh.read())
        files.append({"path": uri, "records": o["records"], "size": o["size"],
                      "metrics": data_file_metrics(schema, o), "field_ids": o["field_ids"]})
    return files, res


# ---------------------------------------------------------------------------
# the commit
# ---------------------------------------------------------------------------

def _manifest_header(st, manifest_path):
    hdr, _, _ = avro_codec.read_header(st.read(manifest_path))
    return json.loads(hdr["avro.schema"]), {k: v.decode() for k, v in hdr.items()
                                            if not k.startswith("avro.")}


def _send_commit(cat, namespace, table, body, written):
    """POST the commit; (status, answer) of a 2xx or 4xx.  A commit whose
    outcome is unknown (no answer, a 5xx) may have landed: every file
    written is then kept (written emptied, as Iceberg does on
    CommitStateUnknownException) and CompactError raised."""
    try:
        status, answer = cat.commit(namespace, table, body)
    except OSError as e:
        status, answer = None, str(e)
    if status is None or status >= 500:
        del written[:]
        raise CompactError("commit state unknown (%s %s): the files written are kept"
                           % (status, answer))
    return status, answer


def _delete_written(st, written, tmp):
    """After a rewrite: the files of an attempt that did not land leave
    storage, the local scratch directory goes."""
    for uri in written:
        try:
            st.delete(uri)
        except storage_mod.StorageError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)


def build_commit(st, meta, scan, records, rewritten, removed, new_files, sort_order_id,
                 rnd, summary_extra):
    """(commit body, written uris): the replace snapshot on base meta."""
    fv = meta["format-version"]
    cur = opsworld.current_id(meta)
    cur_snap = opsworld.snapshot(meta, cur)
    list_schema, list_hmeta_b, _ = opsworld._list_schema_and_meta(st, cur_snap)
    list_hmeta = {k: v.decode() for k, v in list_hmeta_b.items() if not k.startswith("avro.")}
    loc = meta["location"].rstrip("/")
    tag = str(uuid_mod.uuid4())
    snap = opsworld._new_snapshot(meta, rnd, "%s/metadata/snap-%%d-1-%s.avro" % (loc, tag),
                                  "replace", {})
    sid = snap["snapshot-id"]
    snap["manifest-list"] = snap["manifest-list"] % sid
    seq = snap.get("sequence-number")
    added_k, existing_k, deleted_k = opsworld._counts_keys(list_schema)
    schema = _schema(meta)
    written = []
    gone = set(rewritten) | set(removed)
    new_records = []
    # one manifest of ADDED entries per (partition spec, content) of the
    # new files; a new file with "content" 1 is a position delete file, and
    # its "data_seq" (when set) is written as its explicit data sequence
    # number (Iceberg's rewrite of delete files keeps the rewritten ones')
    by_spec = {}
    for f in new_files:
        by_spec.setdefault((f["spec_id"], f.get("content", 0)), []).append(f)
    entry_of = {e["path"]: e for e in scan}
    for (spec_id, content), files in sorted(by_spec.items()):
        model = next((e["manifest"] for e in scan if e["content"] == content
                      and e["spec_id"] == spec_id), None) or next(
            e["manifest"] for e in scan if e["spec_id"] == spec_id)
        m_schema, m_hmeta = _manifest_header(st, model)
        m_hmeta.update({"schema": json.dumps(schema), "schema-id": str(schema.get("schema-id", 0)),
                        "partition-spec": json.dumps(_spec(meta, spec_id)["fields"]),
                        "partition-spec-id": str(spec_id), "format-version": str(fv)})
        if fv >= 2:
            m_hmeta["content"] = "data" if content == 0 else "deletes"
        entries, seqs = [], []
        for f in files:
            df = dict({"content": content, "file_path": f["path"], "file_format": "PARQUET",
                       "partition": f["partition"], "record_count": f["records"],
                       "file_size_in_bytes": f["size"], "block_size_in_bytes": 64 * MB,
                       "key_metadata": None, "split_offsets": None, "equality_ids": None,
                       "referenced_data_file": None,
                       "sort_order_id": sort_order_id if content == 0 else None}, **f["metrics"])
            dseq = f.get("data_seq") if fv >= 2 else None
            seqs.append(seq if dseq is None else dseq)
            entries.append(opsworld._conform({"status": 1, "snapshot_id": sid,
                                              "sequence_number": dseq,
                                              "file_sequence_number": None,
                                              "data_file": df}, m_schema))
        mpath = "%s/metadata/%s-m%d.avro" % (loc, tag, len(written))
        mdata = avro_codec.write_container(json.dumps(m_schema), entries, "deflate", m_hmeta)
        st.write(mpath, mdata)
        written.append(mpath)
        new_records.append({"manifest_path": mpath, "manifest_length": len(mdata),
                            "partition_spec_id": spec_id, "content": 0 if content == 0 else 1,
                            "sequence_number": seq,
                            "min_sequence_number": min([x for x in seqs if x is not None]
                                                       or [seq]),
                            "added_snapshot_id": sid, added_k: len(files), existing_k: 0,
                            deleted_k: 0, "added_rows_count": sum(f["records"] for f in files),
                            "existing_rows_count": 0, "deleted_rows_count": 0,
                            "partitions": None, "key_metadata": None})
    # the manifests holding rewritten or removed files, rewritten with
    # DELETED and EXISTING entries
    touched = {entry_of[p]["manifest"] for p in gone}
    for rec in records:
        if rec["manifest_path"] not in touched:
            new_records.append(rec)
            continue
        m_schema, m_hmeta = _manifest_header(st, rec["manifest_path"])
        mseq = rec.get("sequence_number")
        out, n_ex, n_del, r_ex, r_del, seqs = [], 0, 0, 0, 0, []
        for e in opsworld.manifest_entries(st, rec["manifest_path"]):
            if e["status"] == 2:
                continue
            e = dict(e)
            if fv >= 2:
                if e.get("sequence_number") is None:
                    e["sequence_number"] = mseq
                if e.get("file_sequence_number") is None:
                    e["file_sequence_number"] = mseq
            rows = e["data_file"]["record_count"]
            if e["data_file"]["file_path"] in gone:
                e["status"], e["snapshot_id"] = 2, sid
                n_del, r_del = n_del + 1, r_del + rows
            else:
                e["status"] = 0
                n_ex, r_ex = n_ex + 1, r_ex + rows
                seqs.append(e.get("sequence_number"))
            out.append(e)
        mpath = "%s/metadata/%s-m%d.avro" % (loc, tag, len(written))
        mdata = avro_codec.write_container(json.dumps(m_schema), out, "deflate", m_hmeta)
        st.write(mpath, mdata)
        written.append(mpath)
        r2 = dict(rec)
        r2.update({"manifest_path": mpath, "manifest_length": len(mdata),
                   "added_snapshot_id": sid, added_k: 0, existing_k: n_ex, deleted_k: n_del,
                   "added_rows_count": 0, "existing_rows_count": r_ex,
                   "deleted_rows_count": r_del})
        if fv >= 2:
            r2["sequence_number"] = seq
            r2["min_sequence_number"] = min([s for s in seqs if s is not None] or [seq])
        new_records.append(r2)
    # the summary, Iceberg's names; totals of the new live set
    live = [e for e in scan if e["path"] not in gone]
    rw = [entry_of[p] for p in rewritten]
    rm = [entry_of[p] for p in removed]
    new_del = [f for f in new_files if f.get("content", 0) == 1]
    new_files = [f for f in new_files if f.get("content", 0) == 0]
    s = {"added-data-files": len(new_files), "deleted-data-files": len(rw),
         "added-records": sum(f["records"] for f in new_files),
         "deleted-records": sum(f["records"] for f in rw),
         "added-files-size": sum(f["size"] for f in new_files + new_del),
         "added-delete-files": len(new_del),
         "added-position-delete-files": len(new_del),
         "added-position-deletes": sum(f["records"] for f in new_del),
         "removed-files-size": sum(f["size"] for f in rw + rm),
         "removed-delete-files": len(rm),
         "removed-position-delete-files": sum(1 for f in rm if f["content"] == 1),
         "removed-equality-delete-files": sum(1 for f in rm if f["content"] == 2),
         "removed-position-deletes": sum(f["records"] for f in rm if f["content"] == 1),
         "removed-equality-deletes": sum(f["records"] for f in rm if f["content"] == 2),
         "changed-partition-count": len({(f["spec_id"], f["part"]) for f in rw + rm}),
         "total-records": sum(f["records"] for f in live if f["content"] == 0)
         + sum(f["records"] for f in new_files),
         "total-files-size": sum(f["size"] for f in live)
         + sum(f["size"] for f in new_files + new_del),
         "total-data-files": sum(1 for f in live if f["content"] == 0) + len(new_files),
         "total-delete-files": sum(1 for f in live if f["content"] != 0) + len(new_del),
         "total-position-deletes": sum(f["records"] for f in live if f["content"] == 1)
         + sum(f["records"] for f in new_del),
         "total-equality-deletes": sum(f["records"] for f in live if f["content"] == 2)}
    s = {k: str(v) for k, v in s.items() if v or k.startswith("total-") or k in (
        "added-data-files", "deleted-data-files", "added-records", "deleted-records")}
    s.update(summary_extra)
    snap["summary"].update(s)
    opsworld._write_list(st, meta, snap, list_schema, list_hmeta, new_records)
    written.append(snap["manifest-list"])
    body = opsworld._commit_body(meta, snap)
    body["requirements"].insert(0, {"type": "assert-table-uuid", "uuid": meta["table-uuid"]})
    return body, written, snap


def _still_valid(meta, old_scan, new_scan, rewritten, removed):
    """The same rewrite may go on the new base: its files are live there
    and no delete file added since touches their partitions."""
    live = {e["path"] for e in new_scan}
    if not (set(rewritten) | set(removed)) <= live:
        return False
    old = {e["path"] for e in old_scan}
    parts = {(e["spec_id"], e["part"]) for e in old_scan if e["path"] in set(rewritten)}
    for e in new_scan:
        if e["content"] != 0 and e["path"] not in old:
            if (e["spec_id"], e["part"]) in parts or (
                    e["content"] == 2 and _unpartitioned(meta, e["spec_id"])):
                return False
    return True


def _removable_deletes(meta, scan, rset, dangling_too=False):
    """The delete files every live data file they apply to is in rset (or,
    dangling_too, that apply to none)."""
    data = [e for e in scan if e["content"] == 0]
    removed = []
    for x in scan:
        if x["content"] == 0:
            continue
        hits = [d for d in data if _deletes_for(meta, d, [x]) != ([], [])]
        if (hits and all(d["path"] in rset for d in hits)) or (not hits and dangling_too):
            removed.append(x["path"])
    return removed


def compact(catalog_uri, catalog_token, st, namespace, table, *, strategy="binpack",
            sort_order=None, predicate=None, options={}, file_size_threshold=None):
    """Rewrite the selected data files of a table (see the module comment)."""
    namespace = [namespace] if isinstance(namespace, str) else list(namespace)
    cat = _Catalog(catalog_uri, catalog_token)
    _, meta = cat.load(namespace, table)
    result = {"rewritten_data_files_count": 0, "added_data_files_count": 0,
              "rewritten_bytes_count": 0, "failed_data_files_count": 0,
              "removed_delete_files_count": 0, "snapshot_id": None, "attempts": 0,
              "groups": []}
    scan, records = _scan(st, meta)
    schema = _schema(meta)
    sort = parse_sort_order(meta, strategy, sort_order)
    groups = plan(meta, scan, options, predicate, file_size_threshold)
    dangling_too = str(options.get("remove-dangling-deletes", "false")).lower() == "true"
    rewritten = [f["path"] for g in groups for f in g["files"]]
    removed = _removable_deletes(meta, scan, set(rewritten), dangling_too)
    rset = set(rewritten)
    if not groups and not removed:
        return result
    _check_primitive(schema)
    sort_order_id = (meta.get("default-sort-order-id", 0) if strategy == "sort" and sort_order is None
                     else 0 if not sort and meta.get("default-sort-order-id", 0) == 0 else None)
    rnd = random.Random()
    tmp = tempfile.mkdtemp(prefix="tms-compact-")
    written = []
    try:
        local = _Local(st, tmp)
        new_files = []
        for n, g in enumerate(groups):
            files, _ = write_group(st, meta, g, local, sort, tmp, n)
            for f in files:
                f["spec_id"], f["partition"] = g["spec_id"], g["partition"]
            written += [f["path"] for f in files]
            new_files += files
            result["groups"].append({"spec_id": g["spec_id"], "partition": g["partition"],
                                     "input_files": len(g["files"]), "output_files": len(files)})
        extra = {}
        base_meta, base_scan, base_records = meta, scan, records
        for attempt in range(2):
            body, w, snap = build_commit(st, base_meta, base_scan, base_records, rewritten,
                                         removed, new_files, sort_order_id, rnd, extra)
            written += w
            status, answer = _send_commit(cat, namespace, table, body, written)
            if status == 200:
                result.update({
                    "rewritten_data_files_count": len(rewritten),
                    "added_data_files_count": len(new_files),
                    "rewritten_bytes_count": sum(e["size"] for e in scan if e["path"] in rset),
                    "removed_delete_files_count": len(removed),
                    "snapshot_id": snap["snapshot-id"], "attempts": attempt + 1})
                written = []
                return result
            if status != 409 or attempt == 1:
                raise CompactError("commit of the rewrite failed: HTTP %d %s" % (status, answer))
            _, base_meta = cat.load(namespace, table)
            if base_meta.get("table-uuid") != meta.get("table-uuid"):
                raise CompactError("the table was replaced during the rewrite")
            base_scan, base_records = _scan(st, base_meta)
            if not _still_valid(base_meta, scan, base_scan, rewritten, removed):
                raise CompactError("a concurrent commit changed the files being rewritten")
        raise CompactError("unreachable")
    finally:
        _delete_written(st, written, tmp)


# ---------------------------------------------------------------------------
# rewrite_position_delete_files
# ---------------------------------------------------------------------------

POS_FIELDS = [{"id": 2147483546, "name": "file_path", "type": "string", "required": True},
              {"id": 2147483545, "name": "pos", "type": "long", "required": True}]


def _sql_lit(s):
    return "'%s'" % s.replace("'", "''")


def plan_position_deletes(meta, scan, options=None, predicate=None):
    """The position delete groups to rewrite: [{spec_id, part, partition,
    deletes: [entries], live: sorted data file paths of the partition}]."""
    options = dict(options or {})
    min_inputs = _opt_int(options, "min-input-files", 5)
    rewrite_all = str(options.get("rewrite-all", "false")).lower() == "true"
    if min_inputs <= 0:
        raise CompactError("min-input-files must be positive: %s" % options)
    by_part = {}
    for e in scan:
        if e["content"] == 1:
            by_part.setdefault((e["spec_id"], e["part"]), []).append(e)
    groups = []
    for (spec_id, part), dels in sorted(by_part.items(), key=lambda kv: repr(kv[0])):
        if predicate is not None and not predicate(
                _partition_values(meta, spec_id, dels[0]["partition"])):
            continue
        if not (rewrite_all or (len(dels) > 1 and len(dels) >= min_inputs)):
            continue
        live = sorted(e["path"] for e in scan if e["content"] == 0
                      and e["spec_id"] == spec_id and e["part"] == part)
        groups.append({"spec_id": spec_id, "part": part, "partition": dels[0]["partition"],
                       "deletes": sorted(dels, key=lambda x: (x["seq"] or 0, x["path"])),
                       "live": live})
    return groups


def rewrite_position_deletes(catalog_uri, catalog_token, st, namespace, table, *,
                             predicate=None, options=None):
    """Iceberg's rewrite_position_delete_files: per (spec, partition) group
    of at least min-input-files (5) live position delete files (or every
    group with rewrite-all), the rows pointing at live data files of the
    partition ("dangling" ones dropped) go, sorted by (file_path, pos), into
    ONE new position delete file (none when no row is left) whose data
    sequence number is the highest of the files it replaces, so it applies
    to the same data files.  One "replace" snapshot (assert-table-uuid,
    assert-ref-snapshot-id of main) marks the old files DELETED; on 409 it
    is committed once more on the new base if the old files are still live.
    Returns rewritten_delete_files_count, added_delete_files_count,
    rewritten_bytes_count, added_bytes_count (plus snapshot_id, attempts,
    groups: [{spec_id, partition, input_files, output_files, data_seq}])."""
    namespace = [namespace] if isinstance(namespace, str) else list(namespace)
    cat = _Catalog(catalog_uri, catalog_token)
    _, meta = cat.load(namespace, table)
    result = {"rewritten_delete_files_count": 0, "added_delete_files_count": 0,
              "rewritten_bytes_count": 0, "added_bytes_count": 0, "snapshot_id": None,
              "attempts": 0, "groups": []}
    scan, records = _scan(st, meta)
    groups = plan_position_deletes(meta, scan, options, predicate)
    if not groups:
        return result
    if meta["format-version"] < 2:
        raise CompactError("position delete files need format version 2")
    props = meta.get("properties") or {}
    codec = props.get("write.delete.parquet.compression-codec") or \
        props.get("write.parquet.compression-codec", "zstd")
    tmp = tempfile.mkdtemp(prefix="tms-posdel-")
    written = []
    try:
        local = _Local(st, tmp)
        jobs, job_groups = [], []
        for n, g in enumerate(groups):
            if not g["live"]:
                continue
            srcs = ", ".join(_sql_lit(local.path(x["path"])) for x in g["deletes"])
            keep = ", ".join(_sql_lit(p) for p in g["live"])
            jobs.append({"mode": "write", "schema": {"fields": POS_FIELDS},
                         "query": "SELECT file_path AS c_2147483546, pos AS c_2147483545 "
                                  "FROM read_parquet([%s]) WHERE file_path IN (%s) "
                                  "ORDER BY 1, 2" % (srcs, keep),
                         "output_files": 1, "output_dir": os.path.join(tmp, "out", "g%05d" % n),
                         "file_prefix": "%05d-0-%s-deletes" % (n, uuid_mod.uuid4()),
                         "compression": codec})
            job_groups.append(n)
        outs = run_node({"jobs": jobs})["results"] if jobs else []
        produced = {n: res["files"] for n, res in zip(job_groups, outs)}
        base = data_location(meta)
        new_files = []
        for n, g in enumerate(groups):
            data_seq = max(x["seq"] for x in g["deletes"])
            files = []
            for o in produced.get(n, []):
                ppath = partition_path(meta, g["spec_id"], g["partition"])
                uri = "%s/%s%s" % (base, ppath + "/" if ppath else "", os.path.basename(o["path"]))
                with open(o["path"], "rb") as fh:
                    st.write(uri, fh.read())
                written.append(uri)
                files.append({"path": uri, "records": o["records"], "size": o["size"],
                              "content": 1, "data_seq": data_seq, "spec_id": g["spec_id"],
                              "partition": g["partition"],
                              "metrics": data_file_metrics({"fields": POS_FIELDS}, o, None)})
            new_files += files
            result["groups"].append({"spec_id": g["spec_id"], "partition": g["partition"],
                                     "input_files": len(g["deletes"]),
                                     "output_files": len(files), "data_seq": data_seq})
        removed = [x["path"] for g in groups for x in g["deletes"]]
        rnd = random.Random()
        base_meta, base_scan, base_records = meta, scan, records
        for attempt in range(2):
            body, w, snap = build_commit(st, base_meta, base_scan, base_records, [], removed,
                                         new_files, None, rnd, {})
            written += w
            status, answer = _send_commit(cat, namespace, table, body, written)
            if status == 200:
                sizes = {e["path"]: e["size"] for e in scan}
                result.update({
                    "rewritten_delete_files_count": len(removed),
                    "added_delete_files_count": len(new_files),
                    "rewritten_bytes_count": sum(sizes[p] for p in removed),
                    "added_bytes_count": sum(f["size"] for f in new_files),
                    "snapshot_id": snap["snapshot-id"], "attempts": attempt + 1})
                written = []
                return result
            if status != 409 or attempt == 1:
                raise CompactError("commit of the delete rewrite failed: HTTP %d %s"
                                   % (status, answer))
            _, base_meta = cat.load(namespace, table)
            if base_meta.get("table-uuid") != meta.get("table-uuid"):
                raise CompactError("the table was replaced during the rewrite")
            base_scan, base_records = _scan(st, base_meta)
            if not set(removed) <= {e["path"] for e in base_scan}:
                raise CompactError("a concurrent commit removed delete files being rewritten")
        raise CompactError("unreachable")
    finally:
        _delete_written(st, written, tmp)


# ---------------------------------------------------------------------------
# DELETE FROM ... WHERE (Spark's and Trino's row-level delete, copy-on-write)
# ---------------------------------------------------------------------------

def _row_value(type_, v):
    """A value as compact.mjs's read mode gives it, in the predicate's terms
    (test/engines/grammar.py): dates as days, timestamps as microseconds."""
    if v is None:
        return None
    if type_ in ("int", "long"):
        return int(v)
    if type_ == "date":
        return (datetime.date.fromisoformat(str(v)[:10]) - EPOCH).days
    if type_ in ("timestamp", "timestamptz"):
        text = str(v)
        if len(text) >= 3 and text[-3] in "+-" and text[-2:].isdigit():
            text += ":00"               # DuckDB's "+00" zone
        t = datetime.datetime.fromisoformat(text)
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (t - epoch) // datetime.timedelta(microseconds=1)
    if type_ == "boolean":
        return bool(v)
    return v


def delete_rows(catalog_uri, catalog_token, st, namespace, table, predicate, fold_case=False):
    """DELETE FROM table WHERE predicate: predicate is a callable taking a row
    {column name (lower case with fold_case, as Trino resolves names):
    value} -> bool (grammar.Predicate: TRUE deletes, FALSE and NULL keep).
    Every live data file is read (compact.mjs "read"); the rows of it that
    match and that no position delete file already deleted go: a file
    whose live rows all match leaves the table by metadata, another with a
    match is rewritten without them (with its delete files applied,
    write_group); delete files applying only to those files go too.  One
    snapshot on main (operation "delete" when only files were dropped, else
    "overwrite"; assert-ref-snapshot-id), no retry: a 409 is CompactError.
    Returns {"rows": rows deleted, "snapshot_id", "dropped", "rewritten"}.
    Rows an equality delete already removed are counted again (this test
    engine does not evaluate equality deletes here)."""
    namespace = [namespace] if isinstance(namespace, str) else list(namespace)
    cat = _Catalog(catalog_uri, catalog_token)
    _, meta = cat.load(namespace, table)
    scan, records = _scan(st, meta)
    schema = _schema(meta)
    result = {"rows": 0, "snapshot_id": None, "dropped": 0, "rewritten": 0}
    data = [e for e in scan if e["content"] == 0]
    deletes = [e for e in scan if e["content"] != 0]
    if not data:
        return result
    fields = [{"id": f["id"], "type": f["type"]} for f in schema["fields"]]
    names = [f["name"].lower() if fold_case else f["name"] for f in schema["fields"]]
    tmp = tempfile.mkdtemp(prefix="tms-delete-")
    written = []
    try:
        local = _Local(st, tmp)
        read = run_node({"mode": "read", "files": [{"path": local.path(d["path"]),
                                                     "fields": fields} for d in data]})
        pos_rows = {}                   # position delete file -> [(data file, pos)]
        pos_files = sorted({x["path"] for d in data for x in _deletes_for(meta, d, deletes)[0]})
        if pos_files:
            pf = [{"id": POS_PATH_ID, "type": "string"}, {"id": 2147483545, "type": "long"}]
            got = run_node({"mode": "read", "files": [{"path": local.path(p), "fields": pf}
                                                      for p in pos_files]})["files"]
            for p, f in zip(pos_files, got):
                pos_rows[p] = [(path, int(pos)) for _, path, pos in f["rows"]]
        dropped, groups = [], []
        for d, f in zip(data, read["files"]):
            pos_dels, eq_dels = _deletes_for(meta, d, deletes)
            gone = {pos for x in pos_dels for path, pos in pos_rows[x["path"]]
                    if path == d["path"]}
            live = [r for r in f["rows"] if r[0] not in gone]
            hit = [r[0] for r in live if predicate(
                {n: _row_value(fd["type"], v) for n, fd, v in zip(names, fields, r[1:])})]
            if not hit:
                continue
            result["rows"] += len(hit)
            if len(hit) == len(live) and not eq_dels:
                dropped.append(d["path"])
                continue
            groups.append({"files": [d], "deletes": {d["path"]: (pos_dels, eq_dels)},
                           "positions": {d["path"]: hit}, "output_files": 1,
                           "spec_id": d["spec_id"], "partition": d["partition"]})
        if not dropped and not groups:
            return result
        _check_primitive(schema)
        new_files = []
        for n, g in enumerate(groups):
            files, _ = write_group(st, meta, g, local, [], tmp, n)
            for nf in files:
                nf["spec_id"], nf["partition"] = g["spec_id"], g["partition"]
            written += [nf["path"] for nf in files]
            new_files += files
        rewritten = dropped + [g["files"][0]["path"] for g in groups]
        removed = _removable_deletes(meta, scan, set(rewritten))
        body, w, snap = build_commit(st, meta, scan, records, rewritten, removed, new_files,
                                     None, random.Random(), {})
        written += w
        snap["summary"]["operation"] = "overwrite" if new_files else "delete"
        status, answer = _send_commit(cat, namespace, table, body, written)
        if status != 200:
            raise CompactError("commit of the delete failed: HTTP %d %s" % (status, answer))
        written = []
        result.update({"snapshot_id": snap["snapshot-id"], "dropped": len(dropped),
                       "rewritten": len(groups)})
        return result
    finally:
        _delete_written(st, written, tmp)
