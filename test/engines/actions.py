"""
actions.py -- what the test engines (test/engines/server.py) actually do to a
table once a statement is parsed: snapshot expiry, orphan cleanup, manifest
rewrite, position-delete rewrite and compaction, against the test REST
catalog (through its REST API, as a real engine commits) and its storage.

The effects follow Iceberg Java's actions, computed with the oracles of
test/opsworld.py (the tests compare tms with those same oracles):
  expire_snapshots     opsworld.expected_expiry -> one commit of
                       remove-snapshot-ref + remove-snapshots asserting main,
                       then delete what only the expired snapshots reached
                       (opsworld.expected_expiry_deletes); counts per kind
  remove_orphan_files  opsworld.expected_orphans of a listing of the table
                       location (or `location`), deleted unless dry_run;
                       the canonical uris
  rewrite_manifests    every data manifest of the current snapshot (of one
                       spec, with spec_id) merged into one manifest per spec,
                       entries EXISTING with their snapshot ids and sequence
                       numbers made explicit; delete manifests kept; one
                       "replace" snapshot
  rewrite_position_delete_files
                       test/engines/compact.py's rewrite_position_deletes:
                       per partition with at least min-input-files (5)
                       position delete files (or rewrite-all), their rows
                       still pointing at live data files into one new
                       sorted delete file keeping the highest data
                       sequence number; one "replace" snapshot
  rewrite_data_files   test/engines/compact.py (imported lazily; a run
                       fails with "compaction is not available" without it)
  delete_rows          DELETE FROM ... WHERE: compact.py's delete_rows,
                       copy-on-write (files wholly matching dropped, others
                       with a match rewritten without it); one "delete" or
                       "overwrite" snapshot

A commit the catalog refuses with 409 is re-planned from a fresh load, up
to COMMIT_ATTEMPTS times (Iceberg's commit.retry.num-retries default 4);
compact.py's two rewrites retry once on the new base themselves.
Errors are grammar.EngineError; the caller words them for its engine.
Rules: no sleeps; loops bounded by the table or by COMMIT_ATTEMPTS.
"""

import json
import os
import random
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_DIR = os.path.dirname(HERE)
for _d in (HERE, TEST_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import opsworld as ow  # noqa: E402
import avro_codec  # noqa: E402
from grammar import EngineError  # noqa: E402

COMMIT_ATTEMPTS = 4


class NoSuchTable(EngineError):
    def __init__(self, ns, name):
        super().__init__("TABLE_NOT_FOUND", "Table does not exist: %s.%s" % (".".join(ns), name))
        self.ns, self.name = ns, name


class CommitConflict(EngineError):
    pass


class CommitStateUnknown(EngineError):
    pass


class Cancelled(EngineError):
    """The run was cancelled at a checkpoint (before a commit or deletes)."""

    def __init__(self, message="cancelled"):
        super().__init__("CANCELLED", message)


class RestCatalog:
    """The REST catalog as an engine sees it: load and commit a table."""

    def __init__(self, uri, token=None, timeout=30):
        self.uri = uri.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._prefix = None

    def _req(self, method, path, body=None):
        hdrs = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.uri + path, data=data, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"error": {"message": raw.decode("utf-8", "replace")}}
        except (urllib.error.URLError, OSError) as e:
            raise EngineError("org.apache.iceberg.exceptions.RESTException",
                              "Error occurred while processing %s request: %s" % (method, e))

    def prefix(self):
        if self._prefix is None:
            st, body = self._req("GET", "/v1/config")
            if st != 200:
                raise EngineError("org.apache.iceberg.exceptions.RESTException",
                                  "cannot read the catalog config: HTTP %s %s" % (st, body))
            self._prefix = (body.get("overrides") or {}).get("prefix") or \
                (body.get("defaults") or {}).get("prefix") or ""
        return self._prefix

    def _table_path(self, ns, name):
        p = self.prefix()
        return "/v1/%s%snamespaces/%s/tables/%s" % (
            urllib.parse.quote(p, safe=""), "/" if p else "",
            urllib.parse.quote("\x1f".join(ns), safe=""), urllib.parse.quote(name, safe=""))

    def load(self, ns, name):
        st, body = self._req("GET", self._table_path(ns, name))
        if st == 404:
            raise NoSuchTable(ns, name)
        if st != 200:
            raise EngineError("org.apache.iceberg.exceptions.RESTException",
                              "load of %s.%s failed: HTTP %s %s" % (".".join(ns), name, st,
                                                                  _err_text(body)))
        return body["metadata-location"], body["metadata"]

    def commit(self, ns, name, body):
        try:
            st, answer = self._req("POST", self._table_path(ns, name), body)
        except EngineError as e:
            # unanswered: it may have landed (Iceberg's CommitStateUnknownException)
            raise CommitStateUnknown("org.apache.iceberg.exceptions.CommitStateUnknownException",
                                     e.message)
        if st == 409:
            raise CommitConflict("org.apache.iceberg.exceptions.CommitFailedException",
                                 _err_text(answer))
        if st != 200:
            cls = CommitStateUnknown if st >= 500 else EngineError
            raise cls("org.apache.iceberg.exceptions.CommitStateUnknownException"
                              if st >= 500 else "org.apache.iceberg.exceptions.RESTException",
                              "commit of %s.%s failed: HTTP %s %s"
                              % (".".join(ns), name, st, _err_text(answer)))
        return answer


def _err_text(body):
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("message") or json.dumps(body)
    return json.dumps(body)


def _retrying(fn):
    last = None
    for _ in range(COMMIT_ATTEMPTS):
        try:
            return fn()
        except CommitConflict as e:
            last = e
    raise last


# ---------------------------------------------------------------------------
# snapshot expiry
# ---------------------------------------------------------------------------

EXPIRY_KINDS = {"data": "deleted_data_files_count",
                "position-deletes": "deleted_position_delete_files_count",
                "equality-deletes": "deleted_equality_delete_files_count",
                "manifest": "deleted_manifest_files_count",
                "manifest-list": "deleted_manifest_lists_count",
                "statistics": "deleted_statistics_files_count",
                "partition-statistics": "deleted_statistics_files_count"}


def expire_snapshots(cat, st, ns, name, older_than_ms=None, retain_last=None, snapshot_ids=(),
                     now_ms=None, check=None):
    """Expire and clean; returns the Spark result columns as a dict and
    "expired" (the ids)."""
    def once():
        _, meta = cat.load(ns, name)
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        known = {s["snapshot-id"] for s in meta.get("snapshots") or []}
        for sid in snapshot_ids:
            if sid not in known:
                raise EngineError("org.apache.iceberg.exceptions.ValidationException",
                                  "Cannot expire %d. Snapshot does not exist" % sid)
        try:
            expiry = ow.expected_expiry(meta, now, older_than_ms=older_than_ms,
                                        retain_last=retain_last, snapshot_ids=snapshot_ids)
        except ValueError:
            heads = {r["snapshot-id"]: n for n, r in (meta.get("refs") or {}).items()}
            sid = [s for s in snapshot_ids if s in heads][0]
            raise EngineError("java.lang.IllegalArgumentException",
                              "Cannot expire %d. Still referenced by refs: [%s]"
                              % (sid, heads[sid]))
        counts = {v: 0 for v in EXPIRY_KINDS.values()}
        if not expiry["expired"] and not expiry["removed_refs"]:
            return dict(counts, expired=[])
        after = ow.metadata_after_expiry(meta, expiry)
        deletes = ow.expected_expiry_deletes(st, meta, after)
        updates = [{"action": "remove-snapshot-ref", "ref-name": r}
                   for r in sorted(expiry["removed_refs"])]
        if expiry["expired"]:
            updates.append({"action": "remove-snapshots",
                            "snapshot-ids": sorted(expiry["expired"])})
        cur = ow.current_id(meta)
        if check:
            check()
        cat.commit(ns, name, {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                                                "snapshot-id": cur}],
                              "updates": updates})
        for path, kind in deletes.items():
            st.delete(path)
            counts[EXPIRY_KINDS[kind]] += 1
        return dict(counts, expired=sorted(expiry["expired"]))
    return _retrying(once)


# ---------------------------------------------------------------------------
# orphan cleanup
# ---------------------------------------------------------------------------

def remove_orphan_files(cat, st, ns, name, older_than_s, location=None, dry_run=False,
                        check=None):
    """{"orphans": canonical uris (sorted) older than older_than_s (Unix
    time) below the table location (or location), deleted unless dry_run;
    "scanned": files listed, "active": files reachable, "manifests": the
    manifests read}."""
    mloc, meta = cat.load(ns, name)
    listing = ow.list_location(st, location or meta["location"])
    keep = ow.reachable(st, meta, mloc)
    orphans = sorted(u for u, (_, mtime) in listing.items()
                     if u not in keep and mtime < older_than_s)
    if check:
        check()
    if not dry_run:
        for u in orphans:
            st.delete(u)
    manifests = {p for p, k in ow.content_files(st, meta).items() if k == "manifest"}
    return {"orphans": orphans, "scanned": len(listing), "active": len(keep),
            "manifests": len(manifests)}


# ---------------------------------------------------------------------------
# manifest rewrite
# ---------------------------------------------------------------------------

def rewrite_manifests(cat, st, ns, name, spec_id=None, seed=None, check=None):
    """Merge the data manifests of the current snapshot, one per spec;
    returns {rewritten_manifests_count, added_manifests_count}."""
    def once():
        _, meta = cat.load(ns, name)
        return _rewrite_manifests_once(cat, st, ns, name, meta, spec_id, seed, check)
    return _retrying(once)


def _rewrite_manifests_once(cat, st, ns, name, meta, spec_id, seed, check):
    cur = ow.current_id(meta)
    zero = {"rewritten_manifests_count": 0, "added_manifests_count": 0}
    if cur is None:
        return zero
    snap = ow.snapshot(meta, cur)
    if not snap.get("manifest-list"):
        raise EngineError("java.lang.UnsupportedOperationException",
                          "Cannot rewrite manifests of a snapshot without a manifest list")
    if spec_id is not None and spec_id not in {s["spec-id"] for s in meta.get("partition-specs")
                                               or [{"spec-id": 0}]}:
        raise EngineError("java.lang.IllegalArgumentException",
                          "Spec id %d is not a valid spec id for table %s" % (spec_id, name))
    list_schema, list_hmeta_b, records = ow._list_schema_and_meta(st, snap)
    list_hmeta = {k: v.decode() for k, v in list_hmeta_b.items() if not k.startswith("avro.")}
    groups = {}
    kept = []
    for rec in records:
        sid = rec.get("partition_spec_id", 0) or 0
        if (rec.get("content") or 0) != 0 or (spec_id is not None and sid != spec_id):
            kept.append(rec)
            continue
        groups.setdefault(sid, []).append(rec)
    if not groups:
        return zero
    rnd = random.Random(seed)
    fv = meta["format-version"]
    new_snap = ow._new_snapshot(meta, rnd, None, "replace", {})
    loc = meta["location"].rstrip("/")
    tag = "%032x" % rnd.getrandbits(128)
    new_snap["manifest-list"] = "%s/metadata/snap-%d-1-%s.avro" % (loc, new_snap["snapshot-id"], tag)
    added_key, existing_key, deleted_key = ow._counts_keys(list_schema)
    new_records, written, entries_total = [], [], 0
    for n, (sid, recs) in enumerate(sorted(groups.items())):
        data = st.read(recs[0]["manifest_path"])
        hdr, _, _ = avro_codec.read_header(data)
        m_schema = json.loads(hdr["avro.schema"])
        m_hmeta = {k: v.decode() for k, v in hdr.items() if not k.startswith("avro.")}
        entries = []
        for rec in recs:
            mseq = rec.get("sequence_number")
            for e in ow.manifest_entries(st, rec["manifest_path"]):
                if e["status"] == 2:
                    continue
                e = dict(e)
                if e["status"] == 1:
                    if e.get("snapshot_id") is None:
                        e["snapshot_id"] = rec.get("added_snapshot_id")
                    if fv >= 2:
                        if e.get("sequence_number") is None:
                            e["sequence_number"] = mseq
                        if e.get("file_sequence_number") is None:
                            e["file_sequence_number"] = mseq
                e["status"] = 0
                entries.append(ow._conform(e, m_schema))
        entries_total += len(entries)
        mpath = "%s/metadata/%s-m%d.avro" % (loc, tag, n)
        mdata = avro_codec.write_container(json.dumps(m_schema), entries, "deflate", m_hmeta)
        st.write(mpath, mdata)
        written.append(mpath)
        seqs = [e.get("sequence_number") for e in entries if e.get("sequence_number") is not None]
        rows = sum(e["data_file"]["record_count"] for e in entries)
        rec = {"manifest_path": mpath, "manifest_length": len(mdata),
               "partition_spec_id": sid, "content": 0,
               "sequence_number": new_snap.get("sequence-number"),
               "min_sequence_number": min(seqs) if seqs else new_snap.get("sequence-number"),
               "added_snapshot_id": new_snap["snapshot-id"], added_key: 0,
               existing_key: len(entries), deleted_key: 0, "added_rows_count": 0,
               "existing_rows_count": rows, "deleted_rows_count": 0, "partitions": None,
               "key_metadata": None}
        new_records.append(rec)
    rewritten = sum(len(v) for v in groups.values())
    parent = snap.get("summary") or {}
    summ = {k: v for k, v in parent.items() if k.startswith("total-")}
    summ.update({"manifests-created": str(len(new_records)), "manifests-kept": str(len(kept)),
                 "manifests-replaced": str(rewritten), "entries-processed": str(entries_total)})
    new_snap["summary"].update(summ)
    ow._write_list(st, meta, new_snap, list_schema, list_hmeta, new_records + kept)
    written.append(new_snap["manifest-list"])
    try:
        if check:
            check()
        cat.commit(ns, name, ow._commit_body(meta, new_snap))
    except (CommitConflict, Cancelled):
        for p in written:
            st.delete(p)
        raise
    return {"rewritten_manifests_count": rewritten, "added_manifests_count": len(new_records)}


# ---------------------------------------------------------------------------
# position deletes, compaction
# ---------------------------------------------------------------------------

def rewrite_position_delete_files(cat, st, ns, name, predicate=None, options=None):
    """compact.rewrite_position_deletes(...) when test/engines/compact.py
    exists: the Spark result columns (plus snapshot_id, attempts, groups)."""
    cat.load(ns, name)
    try:
        import compact as compact_mod
    except ImportError as e:
        raise EngineError("java.lang.UnsupportedOperationException",
                          "rewriting delete files is not available in this test engine (%s)" % e)
    return compact_mod.rewrite_position_deletes(cat.uri, cat.token, st, list(ns), name,
                                                predicate=predicate,
                                                options=dict(options or {}))


def rewrite_data_files(cat, st, ns, name, strategy="binpack", sort_order=None, predicate=None,
                       options=None, file_size_threshold=None):
    """compact.compact(...) when test/engines/compact.py exists."""
    cat.load(ns, name)
    try:
        import compact as compact_mod
    except ImportError as e:
        raise EngineError("java.lang.UnsupportedOperationException",
                          "compaction is not available in this test engine (%s)" % e)
    return compact_mod.compact(cat.uri, cat.token, st, list(ns), name, strategy=strategy,
                               sort_order=sort_order, predicate=predicate,
                               options=dict(options or {}),
                               file_size_threshold=file_size_threshold)


def delete_rows(cat, st, ns, name, predicate, fold_case=False):
    """DELETE FROM ... WHERE: compact.delete_rows(...) (copy-on-write; its
    rows deleted, snapshot_id)."""
    cat.load(ns, name)
    try:
        import compact as compact_mod
    except ImportError as e:
        raise EngineError("java.lang.UnsupportedOperationException",
                          "row-level deletes are not available in this test engine (%s)" % e)
    return compact_mod.delete_rows(cat.uri, cat.token, st, list(ns), name, predicate,
                                   fold_case=fold_case)


def added_rows(cat, st, ns, name):
    """Records of the files the current snapshot added (Trino's optimize
    answers the rows it wrote)."""
    _, meta = cat.load(ns, name)
    cur = ow.current_id(meta)
    if cur is None:
        return 0
    return sum(f["records"] for f in ow.live_files(st, meta).values()
               if f["status"] == 1 and f["snapshot_id"] == cur and f["content"] == 0)
