"""
opsworld.py -- the test world of tms's table maintenance operations
(snapshot expiry, orphan cleanup, manifest rewrite): independent readers,
oracles, planted files and prepared commits.

Everything here reads and writes Iceberg tables by itself, in Python (Avro
through test/catalog/avro_codec.py), never through tms: the integration
tests compare what tms did with what these functions compute.

Rules: no function sleeps; every loop is bounded by the table it walks;
paths are compared in canonical form (canon()); nothing here talks to
PostgreSQL.

Reading (st is a storage.Storage, see storage()):
  storage(s3=None, file_root=None, azure=None)
                                          a Storage over file://, s3rver and
                                          Azurite
  canon(st, uri)                          "s3://bucket/key", "file:///abs" or
                                          "abfs://container@host/blob"
  load(catalog, ns, name)                 (metadata location, metadata)
  manifest_records(st, snap)              the manifest_file records of a snapshot
  manifest_entries(st, path, cache=None)  the entries of a manifest
  live_files(st, meta, snapshot_id=None, cache=None)
                                          {path: {content, records, size,
                                          seq, file_seq, partition, manifest,
                                          status, snapshot_id}} of the live
                                          (ADDED/EXISTING) entries
  live_files_by_snapshot(st, meta, snapshot_ids=None)
  entry_key(f) / live_set(files)          what must survive a rewrite
  summary(files)                          data_files, records, size,
                                          position/equality delete files
  content_files(st, meta)                 {path: kind} every file the
                                          snapshots reach (lists, manifests,
                                          live data/delete files, statistics)
  reachable(st, meta, metadata_location)  content_files + metadata files,
                                          metadata log, version-hint.text
                                          (canonical paths)
Oracles:
  expected_expiry(meta, now_ms, older_than_ms=None, retain_last=None,
                  max_ref_age_ms=None, snapshot_ids=())
                                          {"expired": ids, "removed_refs": names}
                                          (Iceberg Java's RemoveSnapshots rules)
  metadata_after_expiry(meta, expiry)     the metadata without them
  expected_expiry_deletes(st, before, after)
                                          {path: kind} the files an expiry
                                          with clean-expired-files deletes
  list_location(st, location)             {canonical uri: (size, mtime)}
                                          below location/ (not neighbours)
  expected_orphans(st, meta, metadata_location, listing, cutoff)
                                          listed, unreachable, older than cutoff
Planting:
  plant(st, uri, data=b"...", mtime=None, s3server=None)
  set_mtime(st, uri, when, s3server=None)
  age_tree(st, location, when, s3server=None)
  give_to_server(path)                    chown a local tree to postgres
Writing (a concurrent writer's commits, for CatalogServer.fault(...,
action="interpose", commits=[...]) or a direct POST):
  append_commit(st, meta, files)          (commit body, written uris): a
                                          new snapshot adding data files
  delete_manifests_commit(st, meta, manifest_paths)
                                          (commit body, written uris): a
                                          snapshot deleting every file of
                                          those manifests (DELETED entries)
  commit(catalog, ns, name, body)         POST it to the catalog
Tables and the independent reader:
  synth_table(out, *args)                 synth.generate in-process (+ files)
  icebird(metadata_location, s3_endpoint=None, file_root=None,
          list_files=False, read_rows=False, dump_rows=False)
                                          test/node/icebird_count.mjs output
                                          (dump_rows: "row_values", every row)
"""

import copy
import json
import os
import pwd
import random
import sys
import time
import urllib.parse

TEST_DIR = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(TEST_DIR, "catalog"), os.path.join(TEST_DIR, "fixtures"), TEST_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import avro_codec  # noqa: E402
import nodeserve  # noqa: E402
import storage as storage_mod  # noqa: E402
import tablemeta  # noqa: E402

ICEBIRD = os.path.join(TEST_DIR, "node", "icebird_count.mjs")
NODE_DIR = os.path.join(TEST_DIR, "node")
DAY_MS = 24 * 3600 * 1000
LONG_MAX = 2 ** 63 - 1

CONTENT_KIND = {0: "data", 1: "position-deletes", 2: "equality-deletes"}


# ---------------------------------------------------------------------------
# storage and paths
# ---------------------------------------------------------------------------

def storage(s3=None, file_root=None, azure=None, gcs=None):
    """A storage.Storage: s3 is an S3Server, an S3Config or None; azure an
    AzuriteServer, an AzureConfig or None; gcs a GcsServer (world.py), a
    GcsConfig or None."""
    cfg = s3.config() if hasattr(s3, "config") else s3
    az = azure.config() if hasattr(azure, "config") else azure
    gcfg = gcs.config() if hasattr(gcs, "config") else gcs
    return storage_mod.Storage(s3=cfg, file_root=file_root, azure=az, gcs=gcfg)


def canon(st, uri):
    """One spelling per object: s3/s3a/s3n -> "s3://bucket/key"; Azure ->
    "abfs://container@account.dfs.<domain>/blob" (tms's form); anything
    else -> "file://" + the local path it resolves to (relative paths and
    file://host/... against the storage's file_root)."""
    if storage_mod.is_s3(uri):
        bucket, key = storage_mod.split_s3(uri)
        return "s3://%s/%s" % (bucket, key)
    if storage_mod.is_azure(uri):
        return storage_mod.canonical_azure(uri)
    if storage_mod.is_gs(uri):
        return "gs://%s/%s" % storage_mod.split_gs(uri)
    return "file://" + os.path.normpath(st.local_path(uri))


def load(catalog, ns, name):
    """(metadata location, metadata) of a table, as the catalog has it."""
    r = catalog.load_table(ns, name)
    return r["metadata-location"], r["metadata"]


def snapshot(meta, sid):
    for s in meta.get("snapshots") or []:
        if s["snapshot-id"] == sid:
            return s
    raise KeyError("no snapshot %s" % sid)


def current_id(meta):
    cur = meta.get("current-snapshot-id")
    if cur is None or cur == -1:
        return None
    return cur


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------

def manifest_records(st, snap):
    """The manifest_file records of a snapshot: its manifest list, or the
    inline v1 "manifests" (paths only, given as {"manifest_path": p})."""
    if snap.get("manifest-list"):
        _, _, records = avro_codec.read_container(st.read(snap["manifest-list"]))
        return records
    return [{"manifest_path": p} for p in snap.get("manifests") or []]


def manifest_entries(st, path, cache=None):
    """The entries of one manifest (decoded dicts); cache is an optional
    dict shared between calls."""
    if cache is not None and path in cache:
        return cache[path]
    _, _, entries = avro_codec.read_container(st.read(path))
    if cache is not None:
        cache[path] = entries
    return entries


def _partition_key(part):
    if not part:
        return ()
    return tuple(sorted((k, v if not isinstance(v, bytes) else v.hex())
                        for k, v in part.items()))


def live_files(st, meta, snapshot_id=None, cache=None):
    """The live entries (status ADDED or EXISTING) of a snapshot (default:
    the current one): {path: {content, records, size, seq, file_seq,
    partition, manifest, status, snapshot_id}}.  seq and file_seq are the
    data and file sequence numbers after inheritance (None in v1)."""
    sid = snapshot_id if snapshot_id is not None else current_id(meta)
    if sid is None:
        return {}
    out = {}
    for rec in manifest_records(st, snapshot(meta, sid)):
        mseq = rec.get("sequence_number")
        for e in manifest_entries(st, rec["manifest_path"], cache):
            if e["status"] == 2:
                continue
            df = e["data_file"]
            seq = e.get("sequence_number")
            fseq = e.get("file_sequence_number")
            if e["status"] == 1:            # ADDED: null inherits the manifest's
                seq = mseq if seq is None else seq
                fseq = mseq if fseq is None else fseq
            out[df["file_path"]] = {
                "content": df.get("content", 0) or 0,
                "records": df["record_count"], "size": df["file_size_in_bytes"],
                "seq": seq, "file_seq": fseq,
                "partition": _partition_key(df.get("partition")),
                "manifest": rec["manifest_path"], "status": e["status"],
                "snapshot_id": e.get("snapshot_id")}
    return out


def live_files_by_snapshot(st, meta, snapshot_ids=None):
    """live_files of every snapshot (or of snapshot_ids), sharing one
    manifest cache: {snapshot id: {path: ...}}."""
    cache = {}
    ids = snapshot_ids if snapshot_ids is not None else [
        s["snapshot-id"] for s in meta.get("snapshots") or []]
    return {sid: live_files(st, meta, sid, cache) for sid in ids}


def entry_key(path, f):
    """What a manifest rewrite must keep of a live entry."""
    return (path, f["content"], f["records"], f["size"], f["seq"], f["file_seq"],
            f["partition"])


def live_set(files):
    return sorted(entry_key(p, f) for p, f in files.items())


def summary(files):
    """Counts of live_files(): data files, their records and bytes, delete files."""
    data = [f for f in files.values() if f["content"] == 0]
    return {"data_files": len(data), "records": sum(f["records"] for f in data),
            "size": sum(f["size"] for f in data),
            "position_delete_files": sum(1 for f in files.values() if f["content"] == 1),
            "equality_delete_files": sum(1 for f in files.values() if f["content"] == 2)}


def content_files(st, meta, cache=None):
    """{path as written in the metadata: kind} of every file the table's
    snapshots reach: manifest lists, manifests, the live data and delete
    files of those manifests, statistics and partition statistics files.
    (A file only in DELETED entries is not reached, as Iceberg Java's
    ReachableFileCleanup reads live entries.)"""
    cache = {} if cache is None else cache
    out = {}
    seen_manifests = set()
    for snap in meta.get("snapshots") or []:
        if snap.get("manifest-list"):
            out[snap["manifest-list"]] = "manifest-list"
        for rec in manifest_records(st, snap):
            m = rec["manifest_path"]
            out[m] = "manifest"
            if m in seen_manifests:
                continue
            seen_manifests.add(m)
            for e in manifest_entries(st, m, cache):
                if e["status"] == 2:
                    continue
                df = e["data_file"]
                out.setdefault(df["file_path"], CONTENT_KIND[df.get("content", 0) or 0])
    for s in meta.get("statistics") or []:
        out[s["statistics-path"]] = "statistics"
    for s in meta.get("partition-statistics") or []:
        out[s["statistics-path"]] = "partition-statistics"
    return out


def version_hint_location(meta):
    base = (meta.get("properties") or {}).get("write.metadata.path") \
        or meta["location"].rstrip("/") + "/metadata"
    return base.rstrip("/") + "/version-hint.text"


def reachable(st, meta, metadata_location, cache=None):
    """Canonical paths of everything an orphan cleanup must keep: the
    content files, the current metadata file, the metadata log and the
    version hint."""
    paths = set(content_files(st, meta, cache))
    paths.add(metadata_location)
    paths.update(e["metadata-file"] for e in meta.get("metadata-log") or [])
    paths.add(version_hint_location(meta))
    return {canon(st, p) for p in paths}


# ---------------------------------------------------------------------------
# oracles
# ---------------------------------------------------------------------------

def _ancestors(meta, sid):
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots") or []}
    out = []
    while sid is not None and sid in by_id and len(out) <= len(by_id):
        out.append(by_id[sid])
        sid = by_id[sid].get("parent-snapshot-id")
    return out


def expected_expiry(meta, now_ms, older_than_ms=None, retain_last=None,
                    max_ref_age_ms=None, snapshot_ids=()):
    """Which snapshots and refs an expiry removes, by Iceberg Java's
    RemoveSnapshots rules (core/src/main/java/org/apache/iceberg/
    RemoveSnapshots.java, https://github.com/apache/iceberg):

      * a ref other than main is removed when its snapshot is older than its
        max-ref-age-ms (default: max_ref_age_ms, else the table property
        history.expire.max-ref-age-ms, else forever) or does not exist;
      * each remaining branch keeps the ancestors of its head while fewer
        than min-snapshots-to-keep are kept (ref setting, else retain_last,
        else history.expire.min-snapshots-to-keep, else 1) or while they are
        younger than its max-snapshot-age-ms (ref setting, else
        older_than_ms, else now - history.expire.max-snapshot-age-ms, else
        5 days); a tag keeps its snapshot;
      * a snapshot in no remaining ref's history is kept when not older than
        the default cutoff;
      * snapshot_ids are expired anyway (a ref head among them: ValueError).
    Returns {"expired": set of ids, "removed_refs": set of names,
    "retained": set of ids}."""
    props = meta.get("properties") or {}
    default_cutoff = older_than_ms if older_than_ms is not None else now_ms - int(
        props.get("history.expire.max-snapshot-age-ms", 5 * DAY_MS))
    default_min = retain_last if retain_last is not None else int(
        props.get("history.expire.min-snapshots-to-keep", 1))
    default_ref_age = max_ref_age_ms if max_ref_age_ms is not None else int(
        props.get("history.expire.max-ref-age-ms", LONG_MAX))
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots") or []}
    refs = tablemeta.refs_of(meta)
    kept_refs = {}
    for name, ref in refs.items():
        snap = by_id.get(ref["snapshot-id"])
        if name == "main":
            kept_refs[name] = ref
            continue
        if snap is None:
            continue
        age = ref.get("max-ref-age-ms")
        age = default_ref_age if age is None else age
        if now_ms - snap["timestamp-ms"] <= age:
            kept_refs[name] = ref
    retain = set()
    referenced = set()
    for name, ref in kept_refs.items():
        if ref.get("type", "branch") == "tag":
            retain.add(ref["snapshot-id"])
            referenced.add(ref["snapshot-id"])
            continue
        cutoff = default_cutoff if ref.get("max-snapshot-age-ms") is None \
            else now_ms - ref["max-snapshot-age-ms"]
        keep_n = ref.get("min-snapshots-to-keep")
        keep_n = default_min if keep_n is None else keep_n
        branch_keep = set()
        for anc in _ancestors(meta, ref["snapshot-id"]):
            referenced.add(anc["snapshot-id"])
        for anc in _ancestors(meta, ref["snapshot-id"]):
            if len(branch_keep) < keep_n or anc["timestamp-ms"] >= cutoff:
                branch_keep.add(anc["snapshot-id"])
            else:
                break
        retain |= branch_keep
    for sid, s in by_id.items():
        if sid not in referenced and s["timestamp-ms"] >= default_cutoff:
            retain.add(sid)
    explicit = set(snapshot_ids)
    heads = {r["snapshot-id"] for r in kept_refs.values()}
    if explicit & heads:
        raise ValueError("cannot expire %s: still referenced by a ref" % sorted(explicit & heads))
    expired = {sid for sid in by_id if sid not in retain or sid in explicit}
    return {"expired": expired, "removed_refs": set(refs) - set(kept_refs),
            "retained": set(by_id) - expired}


def metadata_after_expiry(meta, expiry):
    """meta without the expired snapshots, the removed refs and the
    statistics of expired snapshots (what the commit leaves)."""
    m = copy.deepcopy(meta)
    gone = expiry["expired"]
    m["snapshots"] = [s for s in m.get("snapshots") or [] if s["snapshot-id"] not in gone]
    m["refs"] = {n: r for n, r in tablemeta.refs_of(meta).items()
                 if n not in expiry["removed_refs"] and r["snapshot-id"] not in gone}
    for k in ("statistics", "partition-statistics"):
        m[k] = [s for s in m.get(k) or [] if s["snapshot-id"] not in gone]
    return m


def expected_expiry_deletes(st, before, after, cache=None):
    """{path: kind} the expiry deletes with clean-expired-files: whatever
    the snapshots of `before` reach and those of `after` do not (metadata
    JSON files are never deleted by an expiry)."""
    cache = {} if cache is None else cache
    b = content_files(st, before, cache)
    a = content_files(st, after, cache)
    return {p: k for p, k in b.items() if p not in a}


def list_location(st, location):
    """{canonical uri: (size, mtime)} of every file below location + "/"
    (so a neighbour whose location merely starts with the same text, such
    as .../t2 next to .../t, is not included)."""
    out = {}
    if storage_mod.is_s3(location):
        bucket, key = storage_mod.split_s3(location.rstrip("/"))
        for k, size, when in st.s3.list_objects(bucket, key + "/"):
            out["s3://%s/%s" % (bucket, k)] = (size, when)
        return out
    if storage_mod.is_azure(location):
        account, container, key = storage_mod.split_azure(location.rstrip("/"))
        base = storage_mod.canonical_azure(location).split("/", 3)[:3]
        for k, size, when in st.azure.list_objects(account, container, key + "/"):
            out["%s/%s" % ("/".join(base), k)] = (size, when)
        return out
    if storage_mod.is_gs(location):
        bucket, key = storage_mod.split_gs(location.rstrip("/"))
        for k, size, when in st.gcs.list_objects(bucket, key + "/"):
            out["gs://%s/%s" % (bucket, k)] = (size, when)
        return out
    root = st.local_path(location.rstrip("/"))
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            s = os.stat(p)
            out["file://" + os.path.normpath(p)] = (s.st_size, s.st_mtime)
    return out


def expected_orphans(st, meta, metadata_location, listing, cutoff):
    """The canonical uris of listing (list_location) that nothing reaches
    and that are older than cutoff (a Unix time): what an orphan cleanup
    deletes."""
    keep = reachable(st, meta, metadata_location)
    return {u for u, (_, mtime) in listing.items() if u not in keep and mtime < cutoff}


# ---------------------------------------------------------------------------
# planting
# ---------------------------------------------------------------------------

PG_USER = "postgres"


def give_to_server(path):
    """Local files the tests write belong to root; the PostgreSQL server
    (user postgres) must read and delete them."""
    if os.geteuid() != 0:
        return
    uid = pwd.getpwnam(PG_USER).pw_uid
    for d, _, files in os.walk(path):
        os.chown(d, uid, -1)
        os.chmod(d, 0o755)
        for f in files:
            os.chown(os.path.join(d, f), uid, -1)


def set_mtime(st, uri, when, s3server=None):
    """Set a file's modification time (Unix time): os.utime locally, the
    s3rver backing file in S3 (s3server: a world.S3Server), the GCS test
    server's record in GCS (s3server: a world.GcsServer)."""
    if storage_mod.is_gs(uri):
        if s3server is None:
            raise ValueError("set_mtime of %s needs the GcsServer" % uri)
        s3server.set_mtime(*storage_mod.split_gs(uri), when)
    elif storage_mod.is_s3(uri):
        if s3server is None:
            raise ValueError("set_mtime of %s needs the S3Server" % uri)
        s3server.set_mtime(*storage_mod.split_s3(uri), when)
    else:
        p = st.local_path(uri)
        os.utime(p, (when, when))


def plant(st, uri, data=b"tms test: an orphan file\n", mtime=None, s3server=None):
    """Write a file no metadata references; with mtime, backdate it."""
    st.write(uri, data)
    if not storage_mod.is_s3(uri) and not storage_mod.is_azure(uri) and not storage_mod.is_gs(uri):
        give_to_server(os.path.dirname(st.local_path(uri)))
    if mtime is not None:
        set_mtime(st, uri, mtime, s3server)
    return uri


def age_tree(st, location, when, s3server=None):
    """Backdate every file below location + "/" to `when`; returns how many."""
    listing = list_location(st, location)
    for u in listing:
        set_mtime(st, u, when, s3server)
    return len(listing)


# ---------------------------------------------------------------------------
# commits of a concurrent writer
# ---------------------------------------------------------------------------

def _conform(value, schema, names=None):
    """value shaped to an Avro schema: missing record fields become None
    (or their default), unknown ones are dropped."""
    names = {} if names is None else names
    if isinstance(schema, str):
        return value
    if isinstance(schema, list):
        if value is None:
            return None
        for branch in schema:
            if branch != "null":
                return _conform(value, branch, names)
        return value
    t = schema.get("type")
    if isinstance(t, (dict, list)):
        return _conform(value, t, names)
    if t == "record":
        if value is None:
            return None
        return {f["name"]: _conform(value.get(f["name"], f.get("default")), f["type"], names)
                for f in schema["fields"]}
    if t == "array" and value is not None:
        return [_conform(v, schema["items"], names) for v in value]
    return value


def _list_schema_and_meta(st, snap):
    data = st.read(snap["manifest-list"])
    schema, meta, records = avro_codec.read_container(data)
    return schema, meta, records


def _manifest_template(st, meta, records, content):
    """(schema dict, header metadata) of an existing manifest of this
    content (0 data, 1 deletes) to write new ones like it."""
    for rec in records:
        if (rec.get("content") or 0) == content:
            data = st.read(rec["manifest_path"])
            hdr, _, _ = avro_codec.read_header(data)
            schema = json.loads(hdr["avro.schema"])
            hmeta = {k: v.decode() for k, v in hdr.items() if not k.startswith("avro.")}
            return schema, hmeta
    raise ValueError("the table has no manifest of content %d to model one on" % content)


def _counts_keys(list_schema):
    names = {f["name"] for f in list_schema["fields"]}
    if "added_files_count" in names:
        return "added_files_count", "existing_files_count", "deleted_files_count"
    return "added_data_files_count", "existing_data_files_count", "deleted_data_files_count"


def _new_snapshot(meta, rnd, manifest_list, operation, summary_extra):
    cur = current_id(meta)
    base = snapshot(meta, cur) if cur is not None else None
    sid = rnd.getrandbits(62) | 1
    ts = max(int(time.time() * 1000), (base["timestamp-ms"] + 1) if base else 0)
    snap = {"snapshot-id": sid, "timestamp-ms": ts, "manifest-list": manifest_list,
            "summary": dict({"operation": operation}, **summary_extra),
            "schema-id": meta.get("current-schema-id", 0)}
    if cur is not None:
        snap["parent-snapshot-id"] = cur
    if meta["format-version"] >= 2:
        snap["sequence-number"] = meta.get("last-sequence-number", 0) + 1
    return snap


def _commit_body(meta, snap):
    cur = current_id(meta)
    return {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                              "snapshot-id": cur}],
            "updates": [{"action": "add-snapshot", "snapshot": snap},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": snap["snapshot-id"]}]}


def _write_list(st, meta, snap, list_schema, list_hmeta, records, codec="deflate"):
    hm = dict(list_hmeta)
    hm["snapshot-id"] = str(snap["snapshot-id"])
    hm["parent-snapshot-id"] = str(snap.get("parent-snapshot-id", "null"))
    if meta["format-version"] >= 2:
        hm["sequence-number"] = str(snap["sequence-number"])
    recs = [_conform(r, list_schema) for r in records]
    st.write(snap["manifest-list"], avro_codec.write_container(
        json.dumps(list_schema), recs, codec, hm))


def append_commit(st, meta, files, seed=None, codec="deflate"):
    """Prepare a fast append to the current snapshot of meta: one new data
    manifest with `files` ([{"path", "records", "size", "partition": {}}])
    as ADDED entries, and a manifest list of it plus every current manifest.
    Writes both; returns (commit body asserting main is still the current
    snapshot, [written uris]).  The table needs a data manifest to model the
    new one on (its schema and header)."""
    rnd = random.Random(seed)
    fv = meta["format-version"]
    cur = snapshot(meta, current_id(meta))
    list_schema, list_hmeta_b, records = _list_schema_and_meta(st, cur)
    list_hmeta = {k: v.decode() for k, v in list_hmeta_b.items() if not k.startswith("avro.")}
    m_schema, m_hmeta = _manifest_template(st, meta, records, 0)
    loc = meta["location"].rstrip("/")
    tag = "%032x" % rnd.getrandbits(128)
    snap = _new_snapshot(meta, rnd, "%s/metadata/snap-interposed-%s.avro" % (loc, tag), "append",
                         {"added-data-files": str(len(files)),
                          "added-records": str(sum(f["records"] for f in files)),
                          "added-files-size": str(sum(f["size"] for f in files))})
    entries = []
    for f in files:
        df = {"content": 0, "file_path": f["path"], "file_format": "PARQUET",
              "partition": f.get("partition") or {}, "record_count": f["records"],
              "file_size_in_bytes": f["size"], "block_size_in_bytes": 64 * 1024 * 1024}
        e = {"status": 1, "snapshot_id": snap["snapshot-id"], "data_file": df}
        entries.append(_conform(e, m_schema))
    mpath = "%s/metadata/interposed-%s-m0.avro" % (loc, tag)
    mh = dict(m_hmeta)
    if fv >= 2:
        mh["content"] = "data"
    mdata = avro_codec.write_container(json.dumps(m_schema), entries, codec, mh)
    st.write(mpath, mdata)
    added, existing, deleted = _counts_keys(list_schema)
    rec = {"manifest_path": mpath, "manifest_length": len(mdata),
           "partition_spec_id": meta.get("default-spec-id", 0), "content": 0,
           "sequence_number": snap.get("sequence-number"),
           "min_sequence_number": snap.get("sequence-number"),
           "added_snapshot_id": snap["snapshot-id"], added: len(files), existing: 0, deleted: 0,
           "added_rows_count": sum(f["records"] for f in files), "existing_rows_count": 0,
           "deleted_rows_count": 0, "partitions": None, "key_metadata": None}
    _write_list(st, meta, snap, list_schema, list_hmeta, [rec] + records, codec)
    return _commit_body(meta, snap), [mpath, snap["manifest-list"]] + [f["path"] for f in files]


def delete_manifests_commit(st, meta, manifest_paths, seed=None, codec="deflate", copy=False):
    """Prepare a snapshot deleting every live file of the given manifests of
    the current snapshot: each is replaced in the new manifest list by a
    manifest of the same entries with status DELETED (sequence numbers made
    explicit, as Iceberg writes them).  With copy, a "replace" as a
    compaction's: each data file deleted is copied under a new name, added
    (its rows the same, its data sequence number the new snapshot's) in the
    same manifest.  Writes them; returns (commit body, [written uris])."""
    rnd = random.Random(seed)
    fv = meta["format-version"]
    cur = snapshot(meta, current_id(meta))
    list_schema, list_hmeta_b, records = _list_schema_and_meta(st, cur)
    list_hmeta = {k: v.decode() for k, v in list_hmeta_b.items() if not k.startswith("avro.")}
    loc = meta["location"].rstrip("/")
    tag = "%032x" % rnd.getrandbits(128)
    wanted = set(manifest_paths)
    missing = wanted - {r["manifest_path"] for r in records}
    if missing:
        raise ValueError("not manifests of the current snapshot: %s" % sorted(missing))
    snap = _new_snapshot(meta, rnd, "%s/metadata/snap-deleting-%s.avro" % (loc, tag),
                         "replace" if copy else "delete", {})
    added, existing, deleted = _counts_keys(list_schema)
    new_records, written, nfiles, nrows = [], [], 0, 0
    for i, rec in enumerate(records):
        if rec["manifest_path"] not in wanted:
            new_records.append(rec)
            continue
        data = st.read(rec["manifest_path"])
        hdr, _, _ = avro_codec.read_header(data)
        m_schema = json.loads(hdr["avro.schema"])
        _, _, entries = avro_codec.read_container(data)
        out = []
        for e in entries:
            if e["status"] == 2:
                continue
            e = dict(e)
            if fv >= 2:
                if e.get("sequence_number") is None:
                    e["sequence_number"] = rec.get("sequence_number")
                if e.get("file_sequence_number") is None:
                    e["file_sequence_number"] = rec.get("sequence_number")
            e["status"] = 2
            e["snapshot_id"] = snap["snapshot-id"]
            out.append(e)
        copies = []
        for e in out if copy else []:
            df = dict(e["data_file"])
            df["file_path"] = "%s-copy-%s.parquet" % (df["file_path"].rsplit(".", 1)[0], tag[:8])
            st.write(df["file_path"], st.read(e["data_file"]["file_path"]))
            written.append(df["file_path"])
            c = dict(e, status=1, data_file=df)
            if fv >= 2:
                c["sequence_number"] = None
                c["file_sequence_number"] = None
            copies.append(c)
        mh = {k: v.decode() for k, v in hdr.items() if not k.startswith("avro.")}
        mpath = "%s/metadata/deleting-%s-m%d.avro" % (loc, tag, i)
        mdata = avro_codec.write_container(json.dumps(m_schema), out + copies, codec, mh)
        st.write(mpath, mdata)
        written.append(mpath)
        rows = sum(e["data_file"]["record_count"] for e in out)
        nfiles += len(out)
        nrows += rows
        r2 = dict(rec)
        r2.update({"manifest_path": mpath, "manifest_length": len(mdata),
                   "added_snapshot_id": snap["snapshot-id"], added: len(copies), existing: 0,
                   deleted: len(out), "added_rows_count": rows if copy else 0,
                   "existing_rows_count": 0, "deleted_rows_count": rows})
        if fv >= 2:
            r2["sequence_number"] = snap["sequence-number"]
            r2["min_sequence_number"] = rec.get("min_sequence_number", rec.get("sequence_number"))
        new_records.append(r2)
    snap["summary"].update({"deleted-data-files": str(nfiles), "deleted-records": str(nrows)})
    _write_list(st, meta, snap, list_schema, list_hmeta, new_records, codec)
    written.append(snap["manifest-list"])
    return _commit_body(meta, snap), written


def commit(catalog, ns, name, body):
    """POST a commit to the table; returns the catalog's answer."""
    return catalog.request("POST", "namespaces/%s/tables/%s" % (
        urllib.parse.quote(ns), urllib.parse.quote(name)), body)


# ---------------------------------------------------------------------------
# tables and the independent reader
# ---------------------------------------------------------------------------

def synth_table(out, *args):
    """Write a synthetic table (test/fixtures/synth.py options as strings)
    in-process; returns synth's summary with "files"."""
    import synth
    opts = synth.build_parser().parse_args(["--out", out, "--list-files"] + [str(a) for a in args])
    res = synth.generate(opts)
    if not storage_mod.is_s3(out) and not storage_mod.is_azure(out) and not storage_mod.is_gs(out):
        give_to_server(out[len("file://"):] if out.startswith("file://") else out)
    return res


def icebird(metadata_location, s3_endpoint=None, file_root=None, list_files=False,
            read_rows=False, timeout=600, dump_rows=False):
    """Read the table with icebird (test/node/icebird_count.mjs): counts of
    the current snapshot's manifests and live entries, the live data files'
    record total, with list_files every live entry, with read_rows the rows
    icebergRead returns (real Parquet only), with dump_rows the rows
    themselves ("row_values", plain JSON values)."""
    argv = ["--metadata", metadata_location]
    if s3_endpoint:
        argv += ["--s3-endpoint", s3_endpoint]
    if file_root:
        argv += ["--file-root", file_root]
    if list_files:
        argv.append("--list-files")
    if read_rows:
        argv.append("--read-rows")
    if dump_rows:
        argv.append("--dump-rows")
    try:
        return nodeserve.run(ICEBIRD, {"argv": argv}, timeout)
    except RuntimeError as e:
        raise RuntimeError("icebird failed on %s: %s" % (metadata_location, e))
