"""
tablemeta.py -- Iceberg table metadata for the test REST catalog.

What the catalog server needs to know about table metadata, kept apart from
HTTP and SQL:

  * read_metadata()        read a metadata JSON file (plain or gzip)
  * new_table_metadata()   build v1/v2 metadata for a CreateTableRequest
  * check_requirements()   every TableRequirement type of the REST spec
  * apply_updates()        the TableUpdate actions a commit may carry, with the
                           same effects as Java's TableMetadata.Builder (the
                           snapshot log, the metadata log, refs, ...)
  * next_metadata_location()  <location>/metadata/NNNNN-<uuid>.metadata.json
  * reachable_files()      every file a table's metadata reaches, in the order
                           Java's CatalogUtil.dropTableData deletes them

Errors are raised as CatalogError(status, type, message) so the server maps
them one-to-one onto the spec's error model.
"""

import copy
import gzip
import json
import re
import time
import uuid

import avro_codec


class CatalogError(Exception):
    """An error that becomes an IcebergErrorResponse: HTTP status, the
    exception type name Java clients know, and a message."""

    def __init__(self, status, type_, message):
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message


def bad_request(msg):
    return CatalogError(400, "BadRequestException", msg)


def commit_failed(msg):
    return CatalogError(409, "CommitFailedException", msg)


def now_ms():
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------
# reading and writing metadata files
# ---------------------------------------------------------------------------

def parse_metadata_bytes(data):
    """Parse metadata JSON bytes, gunzipping first when they are gzip."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        meta = json.loads(data)
    except ValueError as e:
        raise bad_request("metadata file is not valid JSON: %s" % e)
    if not isinstance(meta, dict) or "format-version" not in meta:
        raise bad_request("metadata file has no format-version")
    return meta


def read_metadata(storage, location):
    """Read and parse the metadata file at location."""
    return parse_metadata_bytes(storage.read(location))


def serialize_metadata(meta, location):
    """Bytes to store for meta at location (gzip for *.gz.metadata.json)."""
    data = json.dumps(meta, indent=2).encode()
    if location.endswith(".gz.metadata.json"):
        data = gzip.compress(data)
    return data


def metadata_version(location):
    """The version number in a metadata file name, or -1 if there is none
    (NNNNN-<uuid>.metadata.json or vN.metadata.json, optionally .gz)."""
    name = location.rsplit("/", 1)[-1]
    m = re.match(r"^(\d+)-.*\.metadata\.json$", name)
    if m:
        return int(m.group(1))
    m = re.match(r"^v(\d+)(\.gz)?\.metadata\.json$", name)
    if m:
        return int(m.group(1))
    return -1


def next_metadata_location(meta, current_location):
    """Where the next metadata file goes: the write.metadata.path property or
    <location>/metadata, named NNNNN-<uuid>.metadata.json with NNNNN one more
    than the current file's version (Java's naming)."""
    props = meta.get("properties") or {}
    base = props.get("write.metadata.path") or (
        meta["location"].rstrip("/") + "/metadata")
    version = metadata_version(current_location) + 1 if current_location else 0
    ext = ".metadata.json"
    if props.get("write.metadata.compression-codec", "none").lower() == "gzip":
        ext = ".gz.metadata.json"
    return "%s/%05d-%s%s" % (base.rstrip("/"), version, uuid.uuid4(), ext)


# ---------------------------------------------------------------------------
# helpers over the metadata dict
# ---------------------------------------------------------------------------

def refs_of(meta):
    """The table's refs; v1 tables without `refs` get an implied main."""
    refs = meta.get("refs")
    if refs is not None:
        return refs
    cur = meta.get("current-snapshot-id")
    if cur is not None and cur != -1:
        return {"main": {"snapshot-id": cur, "type": "branch"}}
    return {}


def current_schema_id(meta):
    if "current-schema-id" in meta:
        return meta["current-schema-id"]
    return (meta.get("schema") or {}).get("schema-id", 0)


def default_spec_id(meta):
    return meta.get("default-spec-id", 0)


def last_partition_id(meta):
    if "last-partition-id" in meta:
        return meta["last-partition-id"]
    fields = meta.get("partition-spec") or []
    return max([f.get("field-id", 999) for f in fields] + [999])


def max_field_id(type_):
    """The largest field id used anywhere in a schema/type."""
    if not isinstance(type_, dict):
        return 0
    best = 0
    t = type_.get("type")
    if t == "struct":
        for f in type_.get("fields", []):
            best = max(best, f["id"], max_field_id(f.get("type")))
    elif t == "list":
        best = max(type_.get("element-id", 0), max_field_id(type_.get("element")))
    elif t == "map":
        best = max(type_.get("key-id", 0), type_.get("value-id", 0),
                   max_field_id(type_.get("key")), max_field_id(type_.get("value")))
    return best


def snapshots_for_refs(meta):
    """The snapshots that branches or tags reference (snapshots=refs)."""
    ids = {r["snapshot-id"] for r in refs_of(meta).values()}
    return [s for s in meta.get("snapshots", []) if s["snapshot-id"] in ids]


def refs_view(meta):
    """meta as a snapshots=refs load answers it: the snapshots that branches
    or tags reference, and the snapshot log's entries of those snapshots only,
    as Iceberg's TableMetadata.Builder.suppressHistoricalSnapshots() builds it
    (its test testSuppressHistoricalSnapshotsFiltersSnapshotLog)."""
    view = dict(meta)
    view["snapshots"] = snapshots_for_refs(meta)
    if "snapshot-log" in meta:
        ids = {s["snapshot-id"] for s in view["snapshots"]}
        view["snapshot-log"] = [e for e in meta["snapshot-log"]
                                if isinstance(e, dict) and e.get("snapshot-id") in ids]
    return view


# ---------------------------------------------------------------------------
# creating a table
# ---------------------------------------------------------------------------

def _spec_from_request(spec, spec_id=0, last_pid=999):
    fields = []
    for f in (spec or {}).get("fields", []):
        f = dict(f)
        if "field-id" not in f:
            last_pid += 1
            f["field-id"] = last_pid
        last_pid = max(last_pid, f["field-id"])
        fields.append(f)
    return {"spec-id": spec_id, "fields": fields}, last_pid


def new_table_metadata(request, location):
    """Metadata for a new table from a CreateTableRequest (dict).

    The format version comes from the `format-version` property (default 2)
    and is removed from the stored properties, as Java does."""
    props = dict(request.get("properties") or {})
    fv = int(props.pop("format-version", 2))
    if fv not in (1, 2, 3):
        raise bad_request("unsupported format-version %d" % fv)
    schema = dict(request["schema"])
    schema.setdefault("type", "struct")
    schema["schema-id"] = 0
    spec, last_pid = _spec_from_request(request.get("partition-spec"))
    order = request.get("write-order") or {"order-id": 0, "fields": []}
    order = dict(order)
    order["order-id"] = 1 if order.get("fields") else 0
    meta = {
        "format-version": fv,
        "table-uuid": str(uuid.uuid4()),
        "location": location,
    }
    if fv >= 2:
        meta["last-sequence-number"] = 0
    meta.update({
        "last-updated-ms": now_ms(),
        "last-column-id": max_field_id(schema),
        "current-schema-id": 0,
        "schemas": [schema],
        "default-spec-id": 0,
        "partition-specs": [spec],
        "last-partition-id": last_pid,
        "default-sort-order-id": order["order-id"],
        "sort-orders": [order],
        "properties": props,
        "current-snapshot-id": -1,
        "refs": {},
        "snapshots": [],
        "statistics": [],
        "partition-statistics": [],
        "snapshot-log": [],
        "metadata-log": [],
    })
    if fv >= 3:
        meta["next-row-id"] = 0
    if fv == 1:
        meta["schema"] = schema
        meta["partition-spec"] = spec["fields"]
    return meta


def empty_metadata():
    """The starting point of a create transaction (assert-create commit)."""
    return {
        "format-version": 2, "table-uuid": str(uuid.uuid4()), "location": None,
        "last-sequence-number": 0, "last-updated-ms": now_ms(),
        "last-column-id": 0, "current-schema-id": -1, "schemas": [],
        "default-spec-id": -1, "partition-specs": [], "last-partition-id": 999,
        "default-sort-order-id": -1, "sort-orders": [], "properties": {},
        "current-snapshot-id": -1, "refs": {}, "snapshots": [],
        "statistics": [], "partition-statistics": [], "snapshot-log": [],
        "metadata-log": [],
    }


# ---------------------------------------------------------------------------
# commit: requirements
# ---------------------------------------------------------------------------

def check_requirements(meta, requirements):
    """Raise CatalogError 409 CommitFailedException when a requirement fails
    (meta is None when the table does not exist), 400 for unknown types."""
    for req in requirements:
        t = req.get("type")
        if t == "assert-create":
            if meta is not None:
                raise commit_failed("Requirement failed: table already exists")
            continue
        if meta is None:
            raise CatalogError(404, "NoSuchTableException",
                               "Table does not exist")
        if t == "assert-table-uuid":
            if req.get("uuid") != meta.get("table-uuid"):
                raise commit_failed(
                    "Requirement failed: UUID does not match: expected %s != %s"
                    % (meta.get("table-uuid"), req.get("uuid")))
        elif t == "assert-ref-snapshot-id":
            name = req.get("ref")
            want = req.get("snapshot-id")
            ref = refs_of(meta).get(name)
            if ref is None:
                if want is not None:
                    raise commit_failed(
                        "Requirement failed: branch or tag %s is missing, expected %s"
                        % (name, want))
            elif want is None:
                raise commit_failed(
                    "Requirement failed: %s %s was created concurrently"
                    % (ref.get("type", "branch"), name))
            elif ref["snapshot-id"] != want:
                raise commit_failed(
                    "Requirement failed: %s %s has changed: expected id %s != %s"
                    % (ref.get("type", "branch"), name, want, ref["snapshot-id"]))
        elif t == "assert-last-assigned-field-id":
            if meta.get("last-column-id") != req.get("last-assigned-field-id"):
                raise commit_failed(
                    "Requirement failed: last assigned field id changed: expected id %s != %s"
                    % (req.get("last-assigned-field-id"), meta.get("last-column-id")))
        elif t == "assert-current-schema-id":
            if current_schema_id(meta) != req.get("current-schema-id"):
                raise commit_failed(
                    "Requirement failed: current schema changed: expected id %s != %s"
                    % (req.get("current-schema-id"), current_schema_id(meta)))
        elif t == "assert-last-assigned-partition-id":
            if last_partition_id(meta) != req.get("last-assigned-partition-id"):
                raise commit_failed(
                    "Requirement failed: last assigned partition id changed: expected id %s != %s"
                    % (req.get("last-assigned-partition-id"), last_partition_id(meta)))
        elif t == "assert-default-spec-id":
            if default_spec_id(meta) != req.get("default-spec-id"):
                raise commit_failed(
                    "Requirement failed: default partition spec changed: expected id %s != %s"
                    % (req.get("default-spec-id"), default_spec_id(meta)))
        elif t == "assert-default-sort-order-id":
            if meta.get("default-sort-order-id", 0) != req.get("default-sort-order-id"):
                raise commit_failed(
                    "Requirement failed: default sort order changed: expected id %s != %s"
                    % (req.get("default-sort-order-id"), meta.get("default-sort-order-id")))
        else:
            raise bad_request("unknown requirement type %r" % (t,))


# ---------------------------------------------------------------------------
# commit: updates
# ---------------------------------------------------------------------------

def _require(update, *keys):
    for k in keys:
        if k not in update:
            raise bad_request("update %s is missing %r" % (update.get("action"), k))


def apply_updates(base, updates, base_location):
    """Return new metadata: base with updates applied (base is not changed).

    base_location is the metadata file base was read from (None for a new
    table); it is appended to the metadata log when anything changed."""
    meta = copy.deepcopy(base)
    now = now_ms()
    last_added_schema = last_added_spec = last_added_order = None
    added_snapshots = {}
    last_updated = None
    meta.setdefault("refs", refs_of(base))
    meta.setdefault("snapshots", [])
    meta.setdefault("snapshot-log", [])
    meta.setdefault("metadata-log", [])

    for u in updates:
        a = u.get("action")
        if a == "assign-uuid":
            _require(u, "uuid")
            if base_location is not None and u["uuid"] != base.get("table-uuid"):
                raise bad_request("cannot reassign the uuid of an existing table")
            meta["table-uuid"] = u["uuid"]
        elif a == "upgrade-format-version":
            _require(u, "format-version")
            v = u["format-version"]
            if v < meta["format-version"]:
                raise bad_request("cannot downgrade format-version %d to %d"
                                  % (meta["format-version"], v))
            if v > 3:
                raise bad_request("unsupported format-version %d" % v)
            if v >= 2:
                meta.setdefault("last-sequence-number", 0)
            if v >= 3:
                meta.setdefault("next-row-id", 0)
            meta["format-version"] = v
        elif a == "add-schema":
            _require(u, "schema")
            schema = dict(u["schema"])
            same = [s for s in meta.get("schemas", [])
                    if s.get("fields") == schema.get("fields")
                    and s.get("identifier-field-ids", []) == schema.get("identifier-field-ids", [])]
            if same:
                last_added_schema = same[0]["schema-id"]
            else:
                new_id = max([s["schema-id"] for s in meta.get("schemas", [])] + [-1]) + 1
                schema["schema-id"] = new_id
                meta.setdefault("schemas", []).append(schema)
                last_added_schema = new_id
            meta["last-column-id"] = max(meta.get("last-column-id", 0),
                                         u.get("last-column-id", 0),
                                         max_field_id(schema))
        elif a == "set-current-schema":
            _require(u, "schema-id")
            sid = u["schema-id"]
            if sid == -1:
                if last_added_schema is None:
                    raise bad_request("cannot set last added schema: no schema has been added")
                sid = last_added_schema
            if sid not in [s["schema-id"] for s in meta.get("schemas", [])]:
                raise bad_request("cannot set current schema to unknown schema: %d" % sid)
            meta["current-schema-id"] = sid
        elif a == "add-spec":
            _require(u, "spec")
            spec, last_pid = _spec_from_request(u["spec"], 0, last_partition_id(meta))
            same = [s for s in meta.get("partition-specs", [])
                    if s["fields"] == spec["fields"]]
            if same:
                last_added_spec = same[0]["spec-id"]
            else:
                spec["spec-id"] = max([s["spec-id"] for s in meta.get("partition-specs", [])] + [-1]) + 1
                meta.setdefault("partition-specs", []).append(spec)
                last_added_spec = spec["spec-id"]
            meta["last-partition-id"] = max(last_pid, last_partition_id(meta))
        elif a == "set-default-spec":
            _require(u, "spec-id")
            sid = u["spec-id"]
            if sid == -1:
                if last_added_spec is None:
                    raise bad_request("cannot set last added spec: no spec has been added")
                sid = last_added_spec
            if sid not in [s["spec-id"] for s in meta.get("partition-specs", [])]:
                raise bad_request("cannot set default partition spec to unknown spec: %d" % sid)
            meta["default-spec-id"] = sid
        elif a == "add-sort-order":
            _require(u, "sort-order")
            order = dict(u["sort-order"])
            same = [o for o in meta.get("sort-orders", []) if o["fields"] == order.get("fields", [])]
            if same:
                last_added_order = same[0]["order-id"]
            else:
                order["order-id"] = 0 if not order.get("fields") else max(
                    [o["order-id"] for o in meta.get("sort-orders", [])] + [0]) + 1
                meta.setdefault("sort-orders", []).append(order)
                last_added_order = order["order-id"]
        elif a == "set-default-sort-order":
            _require(u, "sort-order-id")
            oid = u["sort-order-id"]
            if oid == -1:
                if last_added_order is None:
                    raise bad_request("cannot set last added sort order: none has been added")
                oid = last_added_order
            if oid not in [o["order-id"] for o in meta.get("sort-orders", [])]:
                raise bad_request("cannot set default sort order to unknown order: %d" % oid)
            meta["default-sort-order-id"] = oid
        elif a == "add-snapshot":
            _require(u, "snapshot")
            snap = u["snapshot"]
            sid = snap["snapshot-id"]
            if any(s["snapshot-id"] == sid for s in meta["snapshots"]):
                raise bad_request("snapshot already exists: %d" % sid)
            if meta["format-version"] >= 2:
                seq = snap.get("sequence-number", 0)
                if seq <= meta.get("last-sequence-number", 0) and snap.get("parent-snapshot-id") is not None:
                    raise bad_request(
                        "cannot add snapshot with sequence number %d older than last sequence number %d"
                        % (seq, meta.get("last-sequence-number", 0)))
                meta["last-sequence-number"] = max(meta.get("last-sequence-number", 0), seq)
            if meta["format-version"] >= 3:
                # https://iceberg.apache.org/spec/#snapshot-row-ids: first-row-id
                # is the table's next-row-id, which advances by added-rows
                first, added = snap.get("first-row-id"), snap.get("added-rows")
                if not isinstance(first, int) or not isinstance(added, int) or added < 0:
                    raise bad_request("a v3 snapshot needs first-row-id and added-rows")
                if first < meta.get("next-row-id", 0):
                    raise bad_request("cannot add snapshot: first-row-id %d is behind the "
                                      "table's next-row-id %d" % (first, meta.get("next-row-id", 0)))
                meta["next-row-id"] = first + added
            meta["snapshots"].append(snap)
            added_snapshots[sid] = snap
            last_updated = snap.get("timestamp-ms", now)
        elif a == "set-snapshot-ref":
            _require(u, "ref-name", "snapshot-id", "type")
            sid = u["snapshot-id"]
            snap = next((s for s in meta["snapshots"] if s["snapshot-id"] == sid), None)
            if snap is None:
                raise bad_request("cannot set %s to unknown snapshot: %d" % (u["ref-name"], sid))
            if u["type"] not in ("branch", "tag"):
                raise bad_request("invalid ref type %r" % u["type"])
            ref = {"snapshot-id": sid, "type": u["type"]}
            for k in ("max-ref-age-ms", "max-snapshot-age-ms", "min-snapshots-to-keep"):
                if u.get(k) is not None:
                    ref[k] = u[k]
            meta["refs"][u["ref-name"]] = ref
            if u["ref-name"] == "main":
                meta["current-snapshot-id"] = sid
                ts = snap.get("timestamp-ms", now) if sid in added_snapshots else now
                meta["snapshot-log"].append({"timestamp-ms": ts, "snapshot-id": sid})
                last_updated = ts
        elif a == "remove-snapshot-ref":
            _require(u, "ref-name")
            if meta["refs"].pop(u["ref-name"], None) is not None and u["ref-name"] == "main":
                meta["current-snapshot-id"] = -1
        elif a == "remove-snapshots":
            _require(u, "snapshot-ids")
            gone = set(u["snapshot-ids"])
            meta["snapshots"] = [s for s in meta["snapshots"] if s["snapshot-id"] not in gone]
            for name in [n for n, r in meta["refs"].items() if r["snapshot-id"] in gone]:
                del meta["refs"][name]
                if name == "main":
                    meta["current-snapshot-id"] = -1
            meta["snapshot-log"] = [e for e in meta["snapshot-log"] if e["snapshot-id"] not in gone]
            meta["statistics"] = [s for s in meta.get("statistics", []) if s["snapshot-id"] not in gone]
            meta["partition-statistics"] = [s for s in meta.get("partition-statistics", [])
                                            if s["snapshot-id"] not in gone]
        elif a == "set-location":
            _require(u, "location")
            meta["location"] = u["location"]
        elif a == "set-properties":
            _require(u, "updates")
            meta.setdefault("properties", {}).update(u["updates"])
        elif a == "remove-properties":
            _require(u, "removals")
            for k in u["removals"]:
                meta.setdefault("properties", {}).pop(k, None)
        elif a == "set-statistics":
            _require(u, "statistics")
            st = u["statistics"]
            meta["statistics"] = [s for s in meta.get("statistics", [])
                                  if s["snapshot-id"] != st["snapshot-id"]] + [st]
        elif a == "remove-statistics":
            _require(u, "snapshot-id")
            meta["statistics"] = [s for s in meta.get("statistics", [])
                                  if s["snapshot-id"] != u["snapshot-id"]]
        elif a == "set-partition-statistics":
            _require(u, "partition-statistics")
            st = u["partition-statistics"]
            meta["partition-statistics"] = [s for s in meta.get("partition-statistics", [])
                                            if s["snapshot-id"] != st["snapshot-id"]] + [st]
        elif a == "remove-partition-statistics":
            _require(u, "snapshot-id")
            meta["partition-statistics"] = [s for s in meta.get("partition-statistics", [])
                                            if s["snapshot-id"] != u["snapshot-id"]]
        elif a == "remove-partition-specs":
            _require(u, "spec-ids")
            if meta.get("default-spec-id") in u["spec-ids"]:
                raise bad_request("cannot remove the default partition spec")
            meta["partition-specs"] = [s for s in meta.get("partition-specs", [])
                                       if s["spec-id"] not in u["spec-ids"]]
        elif a == "remove-schemas":
            _require(u, "schema-ids")
            if meta.get("current-schema-id") in u["schema-ids"]:
                raise bad_request("cannot remove the current schema")
            meta["schemas"] = [s for s in meta.get("schemas", [])
                               if s["schema-id"] not in u["schema-ids"]]
        else:
            raise bad_request("unknown or unsupported table update action %r" % (a,))

    if meta == base:
        return meta
    meta["last-updated-ms"] = max(last_updated or now, now)
    if base_location is not None:
        meta["metadata-log"].append({"timestamp-ms": base.get("last-updated-ms", now),
                                     "metadata-file": base_location})
        keep = int((meta.get("properties") or {}).get(
            "write.metadata.previous-versions-max", 100))
        if len(meta["metadata-log"]) > keep:
            meta["metadata-log"] = meta["metadata-log"][-keep:]
    if meta["format-version"] == 1:
        cur = next((s for s in meta.get("schemas", [])
                    if s["schema-id"] == meta.get("current-schema-id")), None)
        if cur is not None:
            meta["schema"] = cur
        spec = next((s for s in meta.get("partition-specs", [])
                     if s["spec-id"] == meta.get("default-spec-id")), None)
        if spec is not None:
            meta["partition-spec"] = spec["fields"]
    return meta


# ---------------------------------------------------------------------------
# purge
# ---------------------------------------------------------------------------

def manifests_of_snapshot(storage, snap):
    """The manifest paths of one snapshot (manifest list or inline list)."""
    if snap.get("manifest-list"):
        _, _, records = avro_codec.read_container(storage.read(snap["manifest-list"]))
        return [r["manifest_path"] for r in records]
    return list(snap.get("manifests") or [])


def reachable_files(storage, meta, metadata_location):
    """Every file the table's metadata reaches, grouped in the order Java's
    CatalogUtil.dropTableData deletes them: data and delete files of every
    entry of every manifest of every snapshot (skipped when gc.enabled is
    false), manifests, manifest lists, previous metadata files, statistics
    and partition statistics files, then the current metadata file.
    A file listed by a snapshot but missing from storage is skipped when it
    is a manifest list or manifest (it cannot be read), as Java logs and
    continues."""
    from storage import NotFound
    manifest_lists = []
    manifests = []
    seen = set()
    for snap in meta.get("snapshots", []):
        if snap.get("manifest-list"):
            manifest_lists.append(snap["manifest-list"])
        try:
            paths = manifests_of_snapshot(storage, snap)
        except NotFound:
            continue
        for p in paths:
            if p not in seen:
                seen.add(p)
                manifests.append(p)
    data_files = []
    gc = str((meta.get("properties") or {}).get("gc.enabled", "true")).lower() != "false"
    if gc:
        seen_data = set()
        for m in manifests:
            try:
                _, _, entries = avro_codec.read_container(storage.read(m))
            except NotFound:
                continue
            for e in entries:
                p = e["data_file"]["file_path"]
                if p not in seen_data:
                    seen_data.add(p)
                    data_files.append(p)
    previous = [e["metadata-file"] for e in meta.get("metadata-log", [])]
    stats = [s["statistics-path"] for s in meta.get("statistics", [])]
    pstats = [s["statistics-path"] for s in meta.get("partition-statistics", [])]
    out = []
    done = set()
    for group in (data_files, manifests, manifest_lists, previous, stats, pstats,
                  [metadata_location]):
        for p in group:
            if p not in done:
                done.add(p)
                out.append(p)
    return out
