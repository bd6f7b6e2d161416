"""
soakworld.py -- the randomized data-safety campaign of tms's table
maintenance: random Iceberg table histories written by the test world,
tms's operations run against them (with a concurrent writer and faults),
and invariants checked by code that is not tms.

    import soakworld as sw
    camp = sw.Campaign(w, server)          # w: a tms_world dict (pg, catalog, s3, gate, st, file_root)
    report = camp.run(first_id, count, batch=25)
    report.violations, report.counts       # [Violation], {"histories", "moves", ...}

A history is a pure function of its number (the generator's random state
is random.Random(number)); a violation names the number and a one-line
summary of the history, and `python3 -m pytest test/integration/test_soak.py
--soak-history N` replays it alone (test/integration/test_soak.py).

The generator (Plan, Builder) creates a table through the test REST catalog
(test/catalog/server.py), on file:// or on s3rver, format v1 or v2, and
commits 6-14 steps: appends (to main or a branch), overwrites, file
deletes, position deletes and equality deletes (v2), branches and tags
created, advanced and dropped with retention settings, schema evolution
(add, drop, rename, widen float->double and decimal(9,2)->decimal(18,2)),
partition evolution (identity, bucket, truncate, day, month, hour),
statistics and partition-statistics files.  Data files are real Parquet
written by DuckDB (test/node/compact.mjs, mode "write", field ids), from a
few rows (about 1 KB) to, in a campaign with --big, several MB; manifests
and manifest lists are Avro written here (test/catalog/avro_codec.py).
Snapshots are dated hours apart in the past (odd hours before the
generation, so no retention boundary lies within an hour of a run).
Besides the table it plants old and young orphan files under the table's
location, files in a neighbour whose location shares the table's prefix,
and, for some tables, data files outside the allowed locations that the
table references.

The reference reader (Reader) is independent of tms: DuckDB reads every
Parquet file by field id (compact.mjs, mode "read"); position and equality
deletes are applied here by the spec's sequence-number rules.  Its rows of
every snapshot the generator committed are checked against the
generator's own model (the ids it wrote minus those it deleted), so the
reader and the generator check each other.

The moves (Campaign._round) go through tms's SQL API: tms.run_operation
snapshot-expiry (snapshot-ids among its options, a ref's head now and
then, which tms must refuse), orphan-cleanup, manifest-rewrite, compaction
(engine local; where, sort and z-order among its options),
position-delete-rewrite (engine local, v2 tables) with random option
combinations, and tms.purge_table; several operations of a table
run at once, the tables of a batch all at once, and a writer commits to
main or a branch during a round: appends, whole-file deletes, position
deletes.  Faults: catalog 503 on a commit, a lost answer (the commit
landed, 503 answered), a hang or a late answer past tms's request
timeout, 503 on loads; storage SlowDown on deletes, 500 InternalError and
503 ServiceUnavailable on any request of tms's (the S3 gate); SIGKILL of
the compaction helper, of a pool worker (full campaign), and the whole
cluster stopped with pg_ctl stop -m immediate and started again.  The
choices added later come from random states of their own (Plan.rnd2,
Plan.rnd3 and per-round states), so a history's earlier choices stay what they were.

Invariants (Campaign._check): every snapshot the table keeps has the rows
it had (generator snapshots: the rows read before the moves; a tms
`replace` snapshot: its parent's rows; the writer's: its parent's plus the
rows it added less those it deleted); a compaction with a where rewrote
only files of partitions it selects, one with a sort order wrote each
file in that order; no file reachable from the table's metadata (snapshots, refs,
statistics, metadata log) is missing; nothing outside the table's location
(the neighbour, the outside files) is touched; no orphan younger than an
orphan cleanup's threshold is deleted; a ref is removed only by an expiry
whose rules remove it and a snapshot only by one whose rules expire it
(test/opsworld.expected_expiry on the metadata the expiry committed on,
with its snapshot-ids); no ref moves but main, forward, and the writer's
branch, to the writer's snapshots;
every job ends in a terminal state, a failed one with its error; no data
file is added by two snapshots and no snapshot of tms's has another
operation than `replace`; afterwards orphan cleanup finds no file tms wrote
and left unreferenced after a job that succeeded.

Rules: nothing here sleeps to wait for tms: jobs are awaited by polling
their rows, bounded in time; every loop is bounded; paths are compared in
opsworld.canon() form.
"""

import collections
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

TEST_DIR = os.path.dirname(os.path.abspath(__file__))
for _d in (os.path.join(TEST_DIR, "catalog"), os.path.join(TEST_DIR, "fixtures"),
           os.path.join(TEST_DIR, "engines"), TEST_DIR):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import avro_codec  # noqa: E402
import iceberg_avro_schemas  # noqa: E402
import iceberg_transforms  # noqa: E402
import storage as storage_mod  # noqa: E402
import opsworld as ow  # noqa: E402
import compact as compact_mod  # noqa: E402
import synth  # noqa: E402
import world  # noqa: E402

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
POS_FIELDS = compact_mod.POS_FIELDS
TERMINAL = ("succeeded", "failed", "skipped", "cancelled")
EPOCH_TS = 1704067200  # 2024-01-01 00:00:00 UTC, the first value of column ts

BASE_FIELDS = [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "category", "required": False, "type": "string"},
    {"id": 3, "name": "amount", "required": False, "type": "decimal(9, 2)"},
    {"id": 4, "name": "score", "required": False, "type": "float"},
    {"id": 5, "name": "n", "required": False, "type": "int"},
    {"id": 6, "name": "ts", "required": False, "type": "timestamptz"},
]
# partition transforms: (name, transform, source id, avro type of the value)
TRANSFORMS = [
    ("category", "identity", 2, "string"),
    ("id_bucket", "bucket[4]", 1, "int"),
    ("n_trunc", "truncate[100]", 5, "int"),
    ("ts_day", "day", 6, "int"),
    ("ts_month", "month", 6, "int"),
    ("ts_hour", "hour", 6, "int"),
]
PARTITION_SOURCES = {1, 2, 5, 6}


# ---------------------------------------------------------------------------
# values: the row of an id, and its partition values (Iceberg's transforms)
# ---------------------------------------------------------------------------

def ts_seconds(i):
    """Column ts of row i, in seconds since the epoch: spread over days,
    months and hours so every time transform has several values."""
    return EPOCH_TS + ((i % 3) * 40 + (i % 7)) * 86400 + (i % 5) * 3600


def source_value(fid, i):
    if fid == 1:
        return i
    if fid == 2:
        return "c%d" % (i % 4)
    if fid == 5:
        return i % 1000
    if fid == 6:
        return ts_seconds(i)
    raise ValueError(fid)


def transform_value(transform, v):
    if transform == "identity":
        return v
    if transform.startswith("bucket["):
        n = int(transform[7:-1])
        return iceberg_transforms.bucket(struct.pack("<q", v), n)
    if transform.startswith("truncate["):
        w = int(transform[9:-1])
        return v - (v % w)
    if transform == "day":
        return v // 86400
    if transform == "hour":
        return v // 3600
    if transform == "month":
        t = time.gmtime(v)
        return (t.tm_year - 1970) * 12 + t.tm_mon - 1
    raise ValueError(transform)


def column_sql(f):
    """The DuckDB expression of column c_<id> of the row of id x."""
    fid, t = f["id"], f["type"]
    if fid == 1:
        return "x::BIGINT"
    if fid == 2:
        return "'c' || (x % 4)::VARCHAR"
    if fid == 3:
        return "((x %% 100000) / 100.0)::%s" % compact_mod_duck(t)
    if fid == 4:
        return "(x * 0.5)::%s" % ("FLOAT" if t == "float" else "DOUBLE")
    if fid == 5:
        return "(x % 1000)::INTEGER"
    if fid == 6:
        return ("TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_days(((x % 3) * 40 + (x % 7))::INTEGER)"
                " + to_hours((x % 5)::BIGINT)")
    # added columns: a long or a string of the id and the field id
    if t == "string":
        return "'v%d-' || x::VARCHAR" % fid
    return "(x * %d %% 100003)::BIGINT" % fid


def compact_mod_duck(t):
    p, s = t[len("decimal("):-1].split(",")
    return "DECIMAL(%d, %d)" % (int(p), int(s))


# ---------------------------------------------------------------------------
# the reference reader
# ---------------------------------------------------------------------------

class Reader:
    """Rows of snapshots, read by DuckDB (compact.mjs mode "read") by field
    id, deletes applied here.  Files are immutable: each is read once and
    kept (per table) in self.rows."""

    def __init__(self, st, tmp):
        self.st, self.tmp = st, tmp
        self.rows = {}             # (path, fields key) -> [[pos, values...]]
        self.manifests = {}        # manifest path -> entries
        self.local = {}

    def _local(self, uri):
        if not storage_mod.is_s3(uri):
            return self.st.local_path(uri)
        if uri not in self.local:
            p = os.path.join(self.tmp, "rd-%d.parquet" % len(self.local))
            with open(p, "wb") as f:
                f.write(self.st.read(uri))
            self.local[uri] = p
        return self.local[uri]

    def scan(self, meta, sid):
        """[{path, content, seq, spec, partition, eq_ids}] of the live
        entries of snapshot sid."""
        snap = ow.snapshot(meta, sid)
        out = []
        for rec in ow.manifest_records(self.st, snap):
            mseq = rec.get("sequence_number")
            spec = rec.get("partition_spec_id", 0)
            for e in ow.manifest_entries(self.st, rec["manifest_path"], self.manifests):
                if e["status"] == 2:
                    continue
                df = e["data_file"]
                seq = e.get("sequence_number")
                if e["status"] == 1 and seq is None:
                    seq = mseq
                out.append({"path": df["file_path"], "content": df.get("content", 0) or 0,
                            "seq": seq or 0, "spec": spec,
                            "partition": json.dumps(df.get("partition") or {}, sort_keys=True,
                                                    default=repr),
                            "eq_ids": df.get("equality_ids") or [],
                            "records": df["record_count"]})
        return out

    def load(self, wanted):
        """Read the files of wanted [(path, fields)] not read yet, in one
        node process."""
        todo, seen = [], set()
        for path, fields in wanted:
            key = (path, json.dumps(fields))
            if key not in self.rows and key not in seen:
                seen.add(key)
                todo.append((path, self._local(path), fields))
        if not todo:
            return
        res = compact_mod.run_node({"mode": "read", "files": [
            {"path": lp, "fields": [{"id": f["id"], "type": f["type"]} for f in fields]}
            for _, lp, fields in todo]}, timeout=600)
        for (path, _, fields), r in zip(todo, res["files"]):
            self.rows[(path, json.dumps(fields))] = r["rows"]

    def needs(self, meta, sid, fields):
        """(scan, [(path, fields)] the rows of snapshot sid need)."""
        files = self.scan(meta, sid)
        need = []
        for f in files:
            if f["content"] == 0:
                need.append((f["path"], fields))
            elif f["content"] == 1:
                need.append((f["path"], POS_FIELDS))
            else:
                need.append((f["path"], [x for x in fields if x["id"] in f["eq_ids"]]))
        return files, need

    def snapshot_rows(self, meta, sid, fields, unpartitioned_specs):
        """Counter of row texts (values of fields, JSON) of snapshot sid
        (load() the files of needs() first to read many at once)."""
        files, need = self.needs(meta, sid, fields)
        self.load(need)
        data = [f for f in files if f["content"] == 0]
        pos = [f for f in files if f["content"] == 1]
        eqs = [f for f in files if f["content"] == 2]
        eqf = {f["path"]: [x for x in fields if x["id"] in f["eq_ids"]] for f in eqs}
        idx = {x["id"]: i for i, x in enumerate(fields)}
        out = collections.Counter()
        for d in data:
            deleted = set()
            for p in pos:
                if p["seq"] >= d["seq"] and p["spec"] == d["spec"] and \
                        p["partition"] == d["partition"]:
                    for r in self.rows[(p["path"], json.dumps(POS_FIELDS))]:
                        if r[1] == d["path"]:
                            deleted.add(int(r[2]))
            eq_sets = []
            for e in eqs:
                if e["seq"] > d["seq"] and (e["spec"] in unpartitioned_specs or (
                        e["spec"] == d["spec"] and e["partition"] == d["partition"])):
                    ef = eqf[e["path"]]
                    vals = {tuple(r[1:]) for r in self.rows[(e["path"], json.dumps(ef))]}
                    eq_sets.append(([idx[x["id"]] for x in ef], vals))
            for r in self.rows[(d["path"], json.dumps(fields))]:
                if r[0] in deleted:
                    continue
                v = r[1:]
                if any(tuple(v[i] for i in ix) in vals for ix, vals in eq_sets):
                    continue
                out[json.dumps(v)] += 1
        return out


def all_fields(meta):
    """Every field id any schema of the table has had, with its latest type
    (the widest), sorted by id."""
    by_id = {}
    for s in sorted(meta.get("schemas") or [], key=lambda s: s["schema-id"]):
        for f in s["fields"]:
            by_id[f["id"]] = {"id": f["id"], "type": f["type"]}
    return [by_id[k] for k in sorted(by_id)]


def current_field_ids(meta):
    for s in meta.get("schemas") or []:
        if s["schema-id"] == meta.get("current-schema-id"):
            return {f["id"] for f in s["fields"]}
    return set()


def unpartitioned_specs(meta):
    return {s["spec-id"] for s in meta.get("partition-specs") or [] if not s["fields"]}


def project(counter, fields, keep_ids):
    """counter's rows restricted to the field ids keep_ids."""
    ix = [i for i, f in enumerate(fields) if f["id"] in keep_ids]
    out = collections.Counter()
    for text, n in counter.items():
        v = json.loads(text)
        out[json.dumps([v[i] for i in ix])] += n
    return out


def ids_of(counter, fields):
    ix = [i for i, f in enumerate(fields) if f["id"] == 1][0]
    out = collections.Counter()
    for text, n in counter.items():
        out[int(json.loads(text)[ix])] += n
    return out


# ---------------------------------------------------------------------------
# the generator: a plan (pure, from the history's number), then its files
# and commits
# ---------------------------------------------------------------------------

class PFile:
    """A file the plan writes: kind data|pos|eq, spec id, partition
    ({name: value}), ids (data: in file order; eq: the deleted ids), rows
    (pos: [(data path, position)]), fields (the schema written), uri."""

    def __init__(self, kind, uri, spec, partition, fields, ids=None, rows=None):
        self.kind, self.uri, self.spec, self.partition = kind, uri, spec, partition
        self.fields, self.ids, self.rows = fields, ids or [], rows or []
        self.out = None            # compact.mjs's description once written


class Plan:
    """The random history of table number `number` (its random state is
    random.Random(number)): the table's settings, the steps, the files, the
    model of every planned snapshot, the moves and faults of its rounds."""

    def __init__(self, number, loc_s3, loc_file, file_root, t0_ms, big=False, fast=False):
        r = self.rnd = random.Random(number)
        # the choices added to the campaign later (the writer's deletes and
        # branch, expiry's snapshot-ids, compaction's where and sort) come
        # from a second random state, so a history's first choices stay
        # what they were
        self.rnd2 = random.Random(number * 1009 + 17)
        # and the position-delete rewrite on engine local from a third
        self.rnd3 = random.Random(number * 1013 + 29)
        self.number = number
        self.name = "h%d" % number
        self.fv = r.choice([1, 2, 2])
        self.s3 = r.random() < 0.4
        self.location = (loc_s3 if self.s3 else loc_file) + "/" + self.name
        self.outside_root = ("s3://warehouse/outside-%s" % self.name if self.s3 else
                             "file://%s/outside/%s" % (file_root, self.name))
        self.neighbour = self.location + "-nb"
        self.outside = r.random() < 0.15
        self.big = big and r.random() < 0.2
        self.t0 = t0_ms
        self.schema = [dict(f) for f in BASE_FIELDS]
        self.schema_id = 0
        self.last_column_id = 6
        self.specs = {0: self._random_spec(1000)}
        self.default_spec = 0
        self.last_pid = 999 + len(self.specs[0])
        self.props = {"format-version": str(self.fv), "write.parquet.compression-codec": "zstd"}
        if r.random() < 0.3:
            self.props["history.expire.min-snapshots-to-keep"] = str(r.randint(1, 3))
        if r.random() < 0.2:
            self.props["history.expire.max-snapshot-age-ms"] = str(r.choice([2, 4, 6]) * DAY_MS)
        if r.random() < 0.04:
            self.props["gc.enabled"] = "false"
        self.next_id = number * 10 ** 7
        self.files = []            # every PFile
        self.steps = []
        self.snaps = {}            # plan key -> {"parent", "data": {uri: PFile}, "ids": set, "ts"}
        self.refs = {}             # name -> {"key", "type", retention...}
        self.nsnap = 0
        self.summary = []
        self.fast = fast
        self._generate(fast)
        self.writer_files = []
        if r.random() < 0.9:
            for _ in range(r.randint(1, 3)):
                self.writer_files.append(self._data_files(r.randint(2, 12), max_files=1)[0])
        self.aged = r.random() < 0.5
        self.rounds = self._moves()
        self._plan_writer()

    # -- table settings -----------------------------------------------------

    def _random_spec(self, first_pid, keep=()):
        r = self.rnd
        fields = [dict(f) for f in keep]
        used = {f["name"] for f in fields}
        choices = [t for t in TRANSFORMS if t[0] not in used]
        n = r.choice([0, 1, 1, 2]) if not keep else 1
        pid = first_pid
        for t in r.sample(choices, min(n, len(choices))):
            if t[0] in ("ts_day", "ts_month", "ts_hour") and \
                    any(f["name"] in ("ts_day", "ts_month", "ts_hour") for f in fields):
                continue
            fields.append({"name": t[0], "transform": t[1], "source-id": t[2], "field-id": pid,
                           "avro": t[3]})
            pid += 1
        return fields

    def spec_json(self, sid):
        return {"spec-id": sid, "fields": [{k: v for k, v in f.items() if k != "avro"}
                                           for f in self.specs[sid]]}

    def schema_json(self, fields=None, sid=None):
        return {"type": "struct", "schema-id": self.schema_id if sid is None else sid,
                "fields": [dict(f) for f in (fields or self.schema)]}

    # -- planned snapshots ----------------------------------------------------

    def _head(self, ref):
        return self.snaps[self.refs[ref]["key"]] if ref in self.refs else None

    def _new_snap(self, ref, data, ids):
        key = self.nsnap
        self.nsnap += 1
        parent = self.refs[ref]["key"] if ref in self.refs else None
        self.snaps[key] = {"parent": parent, "data": data, "ids": ids,
                           "ts": self.t0 - 8 * DAY_MS - HOUR_MS + key * 10 * HOUR_MS}
        if ref in self.refs:
            self.refs[ref]["key"] = key
        else:
            self.refs[ref] = {"key": key, "type": "branch"}
        return key

    def _partition(self, spec, i):
        return {f["name"]: transform_value(f["transform"], source_value(f["source-id"], i))
                for f in self.specs[spec]}

    def _data_files(self, rows, max_files=8):
        """New data files of `rows` fresh ids under the default spec, one
        file per partition value (at most max_files; ids of other
        partitions are skipped)."""
        groups = collections.OrderedDict()
        for _ in range(rows):
            i = self.next_id
            self.next_id += 1
            p = self._partition(self.default_spec, i)
            key = json.dumps(p, sort_keys=True)
            if key not in groups and len(groups) >= max_files:
                continue
            groups.setdefault(key, (p, []))[1].append(i)
        out = []
        for key, (p, ids) in groups.items():
            where = self.outside_root if (self.outside and len(self.files) < 2) \
                else self.location + "/data"
            sub = "/".join("%s=%s" % (n, v) for n, v in sorted(p.items()))
            uri = "%s/%s%s-%05d-%s.parquet" % (where, sub + "/" if sub else "", self.name,
                                               len(self.files), uuid.UUID(int=self.rnd.getrandbits(128)))
            f = PFile("data", uri, self.default_spec, p, [dict(x) for x in self.schema], ids=ids)
            self.files.append(f)
            out.append(f)
        return out

    def _rows(self):
        if self.big:
            return self.rnd.choice([20000, 60000, 150000])
        return self.rnd.randint(3, 40)

    def _commit(self, ref, op, adds, removes=()):
        head = self._head(ref)
        data = dict(head["data"]) if head else {}
        ids = set(head["ids"]) if head else set()
        for u in removes:
            f = data.pop(u)
            ids -= set(f.ids)
        for f in adds:
            if f.kind == "data":
                data[f.uri] = f
                ids |= set(f.ids)
            elif f.kind == "pos":
                for u, p in f.rows:
                    ids.discard(data[u].ids[p])
            else:
                ids -= set(f.ids)
        ret = {k: v for k, v in (self.refs.get(ref) or {}).items() if k not in ("key", "type")}
        key = self._new_snap(ref, data, ids)
        self.steps.append(("commit", ref, op, adds, list(removes), key, ret))
        self.summary.append("%s:%s" % (op, ref))

    def _live_targets(self, head):
        """Data files of a head with rows still live: [(PFile, [positions])]."""
        out = []
        for u, f in sorted(head["data"].items()):
            live = [p for p, i in enumerate(f.ids) if i in head["ids"]]
            if live:
                out.append((f, live))
        return out

    def _generate(self, fast):
        r = self.rnd
        self._commit("main", "append", self._data_files(self._rows()))
        nsteps = r.randint(5, 9) if fast else r.randint(6, 14)
        for _ in range(nsteps):
            branches = [n for n, x in self.refs.items() if x["type"] == "branch"]
            ref = "main" if r.random() < 0.75 else r.choice(branches)
            head = self._head(ref)
            kinds = ["append"] * 4 + ["overwrite", "delete-file", "branch", "tag", "drop-ref",
                                      "schema", "spec", "stats"]
            if self.fv >= 2:
                kinds += ["pos-delete"] * 3 + ["eq-delete"] * 2
            k = r.choice(kinds)
            targets = self._live_targets(head)
            if k == "append" or (k in ("overwrite", "delete-file", "pos-delete", "eq-delete")
                                 and not targets):
                self._commit(ref, "append", self._data_files(self._rows()))
            elif k == "overwrite":
                gone = [f.uri for f, _ in r.sample(targets, min(len(targets), r.randint(1, 2)))]
                self._commit(ref, "overwrite", self._data_files(self._rows()), gone)
            elif k == "delete-file":
                self._commit(ref, "delete", [], [r.choice(targets)[0].uri])
            elif k == "pos-delete":
                f, live = r.choice(targets)
                pos = sorted(r.sample(live, min(len(live), r.randint(1, 3))))
                uri = "%s/data/%s-pos-%05d-%s.parquet" % (
                    self.location, self.name, len(self.files), uuid.UUID(int=r.getrandbits(128)))
                pf = PFile("pos", uri, f.spec, f.partition, POS_FIELDS,
                           rows=[(f.uri, p) for p in pos])
                self.files.append(pf)
                self._commit(ref, "delete", [pf])
            elif k == "eq-delete":
                f, live = r.choice(targets)
                ids = sorted(f.ids[p] for p in r.sample(live, min(len(live), r.randint(1, 3))))
                uri = "%s/data/%s-eq-%05d-%s.parquet" % (
                    self.location, self.name, len(self.files), uuid.UUID(int=r.getrandbits(128)))
                ef = PFile("eq", uri, f.spec, f.partition, [dict(BASE_FIELDS[0])], ids=ids)
                self.files.append(ef)
                self._commit(ref, "delete", [ef])
            elif k == "branch":
                name = "b%d" % len(self.refs)
                at = r.choice(self._ancestry("main"))
                ret = self._retention(branch=True)
                self.refs[name] = dict({"key": at, "type": "branch"}, **ret)
                self.steps.append(("ref", name, at, "branch", ret))
                self.summary.append("branch:%s%s" % (name, ret and "*" or ""))
            elif k == "tag":
                name = "t%d" % len(self.refs)
                ret = self._retention(branch=False)
                at = r.choice(sorted(self.snaps))
                self.refs[name] = dict({"key": at, "type": "tag"}, **ret)
                self.steps.append(("ref", name, at, "tag", ret))
                self.summary.append("tag:%s%s" % (name, ret and "*" or ""))
            elif k == "drop-ref":
                others = [n for n in self.refs if n != "main"]
                if others:
                    name = r.choice(sorted(others))
                    del self.refs[name]
                    self.steps.append(("drop-ref", name))
                    self.summary.append("drop:%s" % name)
            elif k == "schema":
                self._evolve_schema()
            elif k == "spec":
                keep = self.specs[self.default_spec] if self.fv == 1 else ()
                spec = self._random_spec(self.last_pid + 1, keep)
                if spec and spec != self.specs[self.default_spec]:
                    sid = max(self.specs) + 1
                    self.specs[sid] = spec
                    self.last_pid = max([self.last_pid] + [f["field-id"] for f in spec])
                    self.default_spec = sid
                    self.steps.append(("spec", sid))
                    self.summary.append("spec:" + ",".join(f["transform"] for f in spec))
            elif k == "stats":
                key = r.choice(sorted(self.snaps))
                kind = r.choice(["statistics", "partition-statistics"])
                self.steps.append(("stats", key, kind))
                self.summary.append(kind[:9])

    def _ancestry(self, ref):
        out, key = [], self.refs[ref]["key"]
        while key is not None and len(out) <= len(self.snaps):
            out.append(key)
            key = self.snaps[key]["parent"]
        return out

    def _retention(self, branch):
        r = self.rnd
        ret = {}
        if r.random() < 0.5:
            ret["max-ref-age-ms"] = r.choice([1, 2, 3, 6, 10]) * DAY_MS
        if branch and r.random() < 0.4:
            ret["min-snapshots-to-keep"] = r.randint(1, 4)
        if branch and r.random() < 0.4:
            ret["max-snapshot-age-ms"] = r.choice([12, 48, 96, 200]) * HOUR_MS
        return ret

    def _evolve_schema(self):
        r = self.rnd
        kinds = ["add", "rename"]
        droppable = [f for f in self.schema if f["id"] not in PARTITION_SOURCES]
        if droppable:
            kinds.append("drop")
        widen = [f for f in self.schema if f["type"] in ("float", "decimal(9, 2)")]
        if widen:
            kinds.append("widen")
        k = r.choice(kinds)
        if k == "add":
            self.last_column_id += 1
            self.schema.append({"id": self.last_column_id, "name": "x%d" % self.last_column_id,
                                "required": False, "type": r.choice(["long", "string"])})
        elif k == "rename":
            f = r.choice([f for f in self.schema if f["id"] != 1])
            f["name"] = f["name"] + "_r"
        elif k == "drop":
            f = r.choice(droppable)
            self.schema = [x for x in self.schema if x["id"] != f["id"]]
        else:
            f = r.choice(widen)
            f["type"] = "double" if f["type"] == "float" else "decimal(18, 2)"
        self.schema_id += 1
        self.steps.append(("schema", self.schema_id, [dict(f) for f in self.schema]))
        self.summary.append("schema:" + k)

    def _plan_writer(self):
        """The writer's ref (main, or in some histories a branch) and, in
        some histories, deletes it commits besides its appends: whole data
        files removed, or (v2) position deletes, of files live at the
        head of its ref; writer_items is everything it commits, in order."""
        r = self.rnd2
        self.writer_ref = "main"
        self.writer_deletes = []
        self.writer_items = list(self.writer_files)
        if not self.writer_files:
            return
        branches = sorted(n for n, x in self.refs.items() if x["type"] == "branch" and n != "main")
        if branches and r.random() < 0.3:
            self.writer_ref = r.choice(branches)
        if r.random() < 0.5:
            targets = self._live_targets(self._head(self.writer_ref))
            r.shuffle(targets)
            for f, live in targets[:r.randint(1, 2)]:
                if self.fv >= 2 and r.random() < 0.6:
                    pos = sorted(r.sample(live, min(len(live), r.randint(1, 3))))
                    uri = "%s/data/%s-wpos-%05d-%s.parquet" % (
                        self.location, self.name, len(self.files), uuid.UUID(int=r.getrandbits(128)))
                    d = PFile("pos", uri, f.spec, f.partition, POS_FIELDS,
                              rows=[(f.uri, p) for p in pos])
                    d.deleted = {f.ids[p] for p in pos}
                else:
                    d = PFile("delfile", f.uri, f.spec, f.partition, f.fields)
                    d.deleted = set(f.ids)
                d.target = f
                self.writer_deletes.append(d)
                self.writer_items.insert(r.randint(0, len(self.writer_items)), d)

    # -- moves and faults -----------------------------------------------------

    def _moves(self):
        r = self.rnd
        rounds = []
        for _ in range(r.randint(1, 2) if self.fast else r.randint(1, 3)):
            ops = r.sample(["snapshot-expiry", "orphan-cleanup", "manifest-rewrite",
                            "compaction"], r.randint(1, 3))
            moves = [(op, self._options(op)) for op in ops]
            if self.fv >= 2 and self.rnd3.random() < 0.3:
                moves.append(("position-delete-rewrite", self._posdel_options()))
            fault = None
            if r.random() < 0.35:
                fault = r.choice(["commit-503", "commit-lost", "commit-hang", "commit-late",
                                  "load-503", "kill-helper"])
            rounds.append({"moves": moves, "fault": fault,
                           "writer": bool(self.writer_files) and r.random() < 0.7})
        self.purge = r.random() < 0.15
        return rounds

    def _options(self, op):
        r = self.rnd
        o = {}
        self._options2(op, o)
        if op == "snapshot-expiry":
            if r.random() < 0.7:
                hours = r.choice([0, 24, 48, 96, 120, 168, 240])
                o["older-than"] = iso(self.t0 - hours * HOUR_MS)
            if r.random() < 0.5:
                o["retain-last"] = r.randint(1, 4)
            if r.random() < 0.3:
                o["max-ref-age-ms"] = r.choice([1, 3, 6, 9]) * DAY_MS
            if r.random() < 0.2:
                o["clean-expired-files"] = False
        elif op == "orphan-cleanup":
            o["older-than"] = r.choice(["1 day", "3 days", "5 days", "7 days"])
            if r.random() < 0.3:
                o["prefix-mismatch-mode"] = r.choice(["error", "ignore", "delete"])
            if r.random() < 0.2:
                o["location"] = self.location + "/data"
        elif op == "manifest-rewrite":
            if r.random() < 0.6:
                o["target-size-bytes"] = r.choice([1024, 8192, 65536, 8388608])
            if r.random() < 0.2:
                o["spec-id"] = r.choice(sorted(self.specs))
        elif op == "compaction":
            if r.random() < 0.6:
                o["target-file-size-bytes"] = r.choice([2048, 16384, 1048576])
            if r.random() < 0.6:
                o["min-input-files"] = r.randint(1, 5)
            if r.random() < 0.3:
                o["rewrite-all"] = True
            if r.random() < 0.3:
                o["delete-file-threshold"] = r.randint(1, 2)
            if r.random() < 0.2:
                o["max-file-group-size-bytes"] = r.choice([4096, 65536])
        return o

    def _posdel_options(self):
        """position-delete-rewrite on engine local: Iceberg's
        RewritePositionDeleteFiles options that change the plan."""
        r = self.rnd3
        o = {}
        if r.random() < 0.5:
            o["min-input-files"] = r.randint(1, 3)
        if r.random() < 0.3:
            o["rewrite-all"] = True
        if r.random() < 0.3:
            o["target-file-size-bytes"] = r.choice([1024, 65536])
        if r.random() < 0.2:
            o["max-file-group-size-bytes"] = r.choice([2048, 65536])
        return o

    def _options2(self, op, o):
        """The options added later, from the second random state: expiry's
        snapshot-ids (o["_ids"]: [how many, with a ref head?], resolved
        against the table when the round starts), compaction's where (o["_where"]:
        (partition field, operator, values) to check the rewritten files
        against) and sort strategy (o["_sort"]: [(field id, descending)],
        empty for z-order)."""
        r = self.rnd2
        if op == "snapshot-expiry" and r.random() < 0.3:
            o["_ids"] = [r.randint(1, 2), r.random() < 0.15]
        if op != "compaction":
            return
        spec = [f for f in self.specs[self.default_spec]
                if f["name"] in ("category", "id_bucket", "n_trunc", "ts_day")]
        live = sorted(self.snaps[self.refs["main"]["key"]]["ids"])
        if spec and live and r.random() < 0.3:
            f = r.choice(spec)
            vals = sorted({transform_value(f["transform"], source_value(f["source-id"], i))
                           for i in live})
            lit = (lambda v: "'%s'" % v) if f["name"] == "category" else (
                (lambda v: "'%s'" % time.strftime("%Y-%m-%d", time.gmtime(v * 86400)))
                if f["name"] == "ts_day" else str)
            kind = r.choice(["=", "in", ">="])
            if kind == "in":
                pick = sorted(r.sample(vals, min(len(vals), 2)))
                o["where"] = "%s IN (%s)" % (f["name"], ", ".join(lit(v) for v in pick))
            else:
                pick = [r.choice(vals)]
                o["where"] = "%s %s %s" % (f["name"], kind, lit(pick[0]))
            o["_where"] = [f["name"], kind, pick]
        if r.random() < 0.3:
            n = [f["name"] for f in self.schema if f["id"] == 5][0]
            o["strategy"] = "sort"
            o["sort-order"], o["_sort"] = r.choice([
                ("id DESC", [[1, True]]), ("id", [[1, False]]),
                ("%s DESC NULLS LAST, id" % n, [[5, True], [1, False]]),
                ("%s, id DESC" % n, [[5, False], [1, True]]),
                ("zorder(id, %s)" % n, [])])

    def line(self):
        return "history %d: v%d %s%s%s spec %s, %d steps [%s]; rounds %s%s" % (
            self.number, self.fv, "s3" if self.s3 else "file",
            " outside" if self.outside else "", " big" if self.big else "",
            ",".join(f["transform"] for f in self.specs[0]) or "none", len(self.steps),
            " ".join(self.summary) + ("; writer on %s" % self.writer_ref if
                                      self.writer_ref != "main" else "") +
            ("".join(" w-" + d.kind for d in self.writer_deletes)),
            "; ".join("+".join(m[0] + "".join("/" + k[1:] for k in sorted(m[1]) if k[0] == "_")
                               for m in rd["moves"]) + (" !" + rd["fault"] if rd["fault"] else "")
                      + (" w" if rd["writer"] else "") for rd in self.rounds),
            " purge" if self.purge else "")


def iso(ms):
    return time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(ms // 1000))


def write_files(plans, tmp):
    """Write the Parquet files of every plan (and of its writer) with one
    node process: a by_file job per (plan, kind, fields); fills f.out."""
    jobs, keys = [], []
    for p in plans:
        groups = collections.OrderedDict()
        for f in p.files + p.writer_files + [d for d in p.writer_deletes if d.kind == "pos"]:
            groups.setdefault((f.kind, json.dumps(f.fields)), []).append(f)
        for gi, ((kind, _), fs) in enumerate(groups.items()):
            fields = fs[0].fields
            if kind == "pos":
                vals = ", ".join("(%d, '%s', %d::BIGINT)" % (k, u.replace("'", "''"), pos)
                                 for k, f in enumerate(fs) for u, pos in f.rows)
                query = ("SELECT v.f AS __file, v.p AS c_2147483546, v.o AS c_2147483545 FROM "
                         "(VALUES %s) v(f, p, o) ORDER BY 1, 2, 3" % vals)
            else:
                vals = ", ".join("(%d, [%s])" % (k, ",".join(map(str, f.ids)))
                                 for k, f in enumerate(fs))
                query = ("SELECT __file, %s FROM (SELECT v.f AS __file, unnest(v.ids)::BIGINT AS x"
                         " FROM (VALUES %s) v(f, ids)) r ORDER BY __file, x" % (
                             ", ".join("%s AS c_%d" % (column_sql(x), x["id"]) for x in fields),
                             vals))
            jobs.append({"mode": "write", "by_file": True, "schema": {"fields": fields},
                         "query": query, "output_dir": os.path.join(tmp, p.name, "g%d" % gi),
                         "file_prefix": kind, "compression": "zstd",
                         "iceberg_schema": json.dumps({"type": "struct", "schema-id": 0,
                                                       "fields": fields})})
            keys.append(fs)
    if not jobs:
        return
    res = compact_mod.run_node({"jobs": jobs}, timeout=1800)["results"]
    for fs, r in zip(keys, res):
        by = {o["file"]: o for o in r["files"]}
        for k, f in enumerate(fs):
            f.out = by[k]


class Builder:
    """Commits a plan's steps through the catalog: creates the table,
    uploads each file, writes manifests and manifest lists, and maps the
    plan's snapshot keys to snapshot ids."""

    def __init__(self, plan, catalog, st, ns):
        self.p, self.cat, self.st, self.ns = plan, catalog, st, ns
        self.sid = {}              # plan key -> snapshot id
        self.written = set()       # every uri written (canonical)
        self.meta = None

    def put(self, uri, data):
        self.st.write(uri, data)
        self.written.add(ow.canon(self.st, uri))

    def upload(self, f):
        with open(f.out["path"], "rb") as fh:
            self.put(f.uri, fh.read())

    def create(self):
        p = self.p
        body = {"name": p.name, "location": p.location, "schema": p.schema_json(BASE_FIELDS, 0),
                "partition-spec": p.spec_json(0), "properties": p.props}
        r = self.cat.request("POST", "namespaces/%s/tables" % self.ns, body)
        self.meta = r["metadata"]

    def _post(self, requirements, updates):
        body = {"requirements": [{"type": "assert-table-uuid",
                                  "uuid": self.meta["table-uuid"]}] + requirements,
                "updates": updates}
        r = ow.commit(self.cat, self.ns, self.p.name, body)
        self.meta = r["metadata"]
        return r

    def run(self):
        self.create()
        for step in self.p.steps:
            getattr(self, "_" + step[0].replace("-", "_"))(*step[1:])
        return self.meta

    # -- steps ----------------------------------------------------------------

    def _ref(self, name, key, kind, retention):
        self._post([], [dict({"action": "set-snapshot-ref", "ref-name": name, "type": kind,
                              "snapshot-id": self.sid[key]}, **retention)])

    def _drop_ref(self, name):
        self._post([], [{"action": "remove-snapshot-ref", "ref-name": name}])

    def _schema(self, schema_id, fields):
        self._post([], [{"action": "add-schema", "schema": {"type": "struct", "schema-id": schema_id,
                                                            "fields": fields},
                         "last-column-id": max(f["id"] for f in fields)},
                        {"action": "set-current-schema", "schema-id": -1}])

    def _spec(self, spec_id):
        self._post([], [{"action": "add-spec", "spec": self.p.spec_json(spec_id)},
                        {"action": "set-default-spec", "spec-id": -1}])

    def _stats(self, key, kind):
        sid = self.sid[key]
        if not any(s["snapshot-id"] == sid for s in self.meta["snapshots"]):
            return
        u = uuid.UUID(int=self.p.rnd.getrandbits(128))
        loc = self.p.location + "/metadata"
        if kind == "statistics":
            data, footer = synth.puffin_bytes(sid)
            path = "%s/%d-%s.stats" % (loc, sid, u)
            self.put(path, data)
            self._post([], [{"action": "set-statistics", "snapshot-id": sid, "statistics": {
                "snapshot-id": sid, "statistics-path": path, "file-size-in-bytes": len(data),
                "file-footer-size-in-bytes": footer, "blob-metadata": []}}])
        else:
            data = b"PAR1 partition statistics of the test world\n"
            path = "%s/partition-stats-%d-%s.parquet" % (loc, sid, u)
            self.put(path, data)
            self._post([], [{"action": "set-partition-statistics", "partition-statistics": {
                "snapshot-id": sid, "statistics-path": path, "file-size-in-bytes": len(data)}}])

    def _commit(self, ref, op, adds, removes, key, retention):
        p = self.p
        parent = p.snaps[key]["parent"]
        parent_sid = self.sid[parent] if parent is not None else None
        for f in adds:
            self.upload(f)
        body, written = commit_body(self.st, self.meta, parent_sid, ref, op, adds, removes,
                                    p.rnd, p.snaps[key]["ts"], retention)
        self.written.update(ow.canon(self.st, u) for u in written)
        self._post(body["requirements"], body["updates"])
        self.sid[key] = body["updates"][0]["snapshot"]["snapshot-id"]


def _avro_partition_fields(meta, spec_id):
    spec = [s for s in meta["partition-specs"] if s["spec-id"] == spec_id][0]
    types = {}
    for s in meta.get("schemas") or []:
        for f in s["fields"]:
            types[f["id"]] = f["type"]
    out = []
    for f in spec["fields"]:
        if f["transform"] == "identity":
            t = types.get(f["source-id"], "string")
            t = {"string": "string", "long": "long", "int": "int"}.get(t, "string")
        else:
            t = "int"
        out.append((f["name"], t, f["field-id"]))
    return spec, out


def _current_schema(meta):
    return [s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"]][0]


def _write_manifest(st, meta, rnd, spec_id, content, entries, written):
    """Write one manifest of entries (dicts: status, snapshot_id,
    sequence_number, file_sequence_number, data_file); its list record
    (without the snapshot-dependent counts filled by the caller)."""
    fv = meta["format-version"]
    spec, pfields = _avro_partition_fields(meta, spec_id)
    schema_text = iceberg_avro_schemas.manifest_entry_schema(fv, pfields)
    schema = json.loads(schema_text)
    cur = _current_schema(meta)
    hmeta = {"schema": json.dumps(cur), "schema-id": str(cur["schema-id"]),
             "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": str(spec_id),
             "format-version": str(fv)}
    if fv >= 2:
        hmeta["content"] = "data" if content == 0 else "deletes"
    recs = [ow._conform(e, schema) for e in entries]
    path = "%s/metadata/%s-m0.avro" % (meta["location"].rstrip("/"),
                                         uuid.UUID(int=rnd.getrandbits(128)))
    data = avro_codec.write_container(schema_text, recs, "deflate", hmeta)
    st.write(path, data)
    written.append(path)
    return {"manifest_path": path, "manifest_length": len(data), "partition_spec_id": spec_id,
            "content": content, "key_metadata": None, "partitions": None}


def _data_file(meta, f):
    fv = meta["format-version"]
    o = f.out
    content = {"data": 0, "pos": 1, "eq": 2}[f.kind]
    df = {"content": content, "file_path": f.uri, "file_format": "PARQUET",
          "partition": dict(f.partition), "record_count": o["records"],
          "file_size_in_bytes": o["size"], "key_metadata": None, "split_offsets": None,
          "equality_ids": [1] if f.kind == "eq" else None,
          "sort_order_id": 0 if f.kind != "pos" else None, "referenced_data_file": None}
    if fv == 1:
        df["block_size_in_bytes"] = 64 * 1024 * 1024
    df.update(compact_mod.data_file_metrics({"fields": f.fields}, o,
                                            None if f.kind == "pos" else 16))
    return df


def commit_body(st, meta, parent_sid, ref, op, adds, removes, rnd, ts, retention=None):
    """(commit body, [written uris]) of a snapshot on parent_sid (None: a
    new branch with no parent) adding the files adds (PFiles written and
    uploaded) and removing the data files removes, committed to ref:
    manifests of the added files (one per content and spec), the parent's
    manifests that hold a removed file rewritten with it DELETED and the
    others EXISTING, the rest carried."""
    fv = meta["format-version"]
    sid = rnd.getrandbits(62) | 1
    seq = meta.get("last-sequence-number", 0) + 1
    written = []
    records = []
    removes = set(removes)
    ndel_files = ndel_rows = 0
    if parent_sid is not None:
        parent = ow.snapshot(meta, parent_sid)
        for rec in ow.manifest_records(st, parent):
            entries = ow.manifest_entries(st, rec["manifest_path"])
            hit = [e for e in entries if e["status"] != 2 and e["data_file"]["file_path"] in removes]
            if not hit:
                records.append(rec)
                continue
            new = []
            mseq = rec.get("sequence_number")
            for e in entries:
                if e["status"] == 2:
                    continue
                e = dict(e)
                if fv >= 2:
                    if e.get("sequence_number") is None:
                        e["sequence_number"] = mseq
                    if e.get("file_sequence_number") is None:
                        e["file_sequence_number"] = mseq
                if e["data_file"]["file_path"] in removes:
                    e["status"] = 2
                    e["snapshot_id"] = sid
                    ndel_files += 1
                    ndel_rows += e["data_file"]["record_count"]
                else:
                    e["status"] = 0
                new.append(e)
            r2 = _write_manifest(st, meta, rnd, rec.get("partition_spec_id", 0),
                                 rec.get("content", 0) or 0, new, written)
            _counts(r2, new, sid, seq if fv >= 2 else None,
                    min(e.get("sequence_number") or 0 for e in new) if fv >= 2 else None)
            records.append(r2)
    groups = collections.OrderedDict()
    for f in adds:
        groups.setdefault((0 if f.kind == "data" else 1, f.spec), []).append(f)
    new_recs = []
    for (content, spec), fs in groups.items():
        entries = [{"status": 1, "snapshot_id": sid, "sequence_number": None,
                    "file_sequence_number": None, "data_file": _data_file(meta, f)} for f in fs]
        r2 = _write_manifest(st, meta, rnd, spec, content, entries, written)
        _counts(r2, entries, sid, seq if fv >= 2 else None, seq if fv >= 2 else None)
        new_recs.append(r2)
    records = new_recs + records
    loc = meta["location"].rstrip("/")
    snap = {"snapshot-id": sid, "timestamp-ms": ts,
            "manifest-list": "%s/metadata/snap-%d-1-%s.avro" % (
                loc, sid, uuid.UUID(int=rnd.getrandbits(128))),
            "summary": {"operation": op,
                        "added-data-files": str(sum(1 for f in adds if f.kind == "data")),
                        "added-records": str(sum(f.out["records"] for f in adds if f.kind == "data")),
                        "added-delete-files": str(sum(1 for f in adds if f.kind != "data")),
                        "deleted-data-files": str(ndel_files),
                        "deleted-records": str(ndel_rows)},
            "schema-id": meta["current-schema-id"]}
    if parent_sid is not None:
        snap["parent-snapshot-id"] = parent_sid
    if fv >= 2:
        snap["sequence-number"] = seq
    list_schema = json.loads(iceberg_avro_schemas.manifest_list_schema(fv))
    hm = {"format-version": str(fv)}
    ow._write_list(st, meta, snap, list_schema, hm, records)
    written.append(snap["manifest-list"])
    body = {"requirements": [{"type": "assert-ref-snapshot-id", "ref": ref,
                              "snapshot-id": parent_sid}],
            "updates": [{"action": "add-snapshot", "snapshot": snap},
                        dict({"action": "set-snapshot-ref", "ref-name": ref, "type": "branch",
                              "snapshot-id": sid}, **(retention or {}))]}
    return body, written


def _counts(rec, entries, sid, seq, min_seq):
    added = [e for e in entries if e["status"] == 1]
    existing = [e for e in entries if e["status"] == 0]
    deleted = [e for e in entries if e["status"] == 2]
    rows = lambda es: sum(e["data_file"]["record_count"] for e in es)  # noqa: E731
    rec.update({"added_snapshot_id": sid, "sequence_number": seq, "min_sequence_number": min_seq,
                "added_files_count": len(added), "existing_files_count": len(existing),
                "deleted_files_count": len(deleted), "added_data_files_count": len(added),
                "existing_data_files_count": len(existing),
                "deleted_data_files_count": len(deleted), "added_rows_count": rows(added),
                "existing_rows_count": rows(existing), "deleted_rows_count": rows(deleted)})


# ---------------------------------------------------------------------------
# the campaign: histories in batches, moves, faults, invariants
# ---------------------------------------------------------------------------

class CachedStorage:
    """A storage.Storage whose reads of Avro and metadata files are kept:
    the campaign reads each manifest list, manifest and metadata file of
    a table many times, and they never change once written (whether one
    still exists is checked on listings, never through this cache)."""

    def __init__(self, st):
        self._st = st
        self._cache = {}
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._st, name)

    def read(self, uri):
        if not (uri.endswith(".avro") or uri.endswith(".metadata.json")):
            return self._st.read(uri)
        with self._lock:
            if uri in self._cache:
                return self._cache[uri]
        data = self._st.read(uri)
        with self._lock:
            self._cache[uri] = data
        return data


def parse_iso(text):
    import calendar
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S+00")) * 1000


def _days(text):
    return int(text.split()[0])


class HistoryState:
    """What the campaign knows of one history while its moves run."""

    def __init__(self, plan, builder, meta, fields):
        self.p, self.b, self.meta, self.fields = plan, builder, meta, fields
        self.rows = {}            # snapshot id -> Counter of rows (over fields)
        self.exp = {}             # snapshot id -> Counter of ids expected
        self.writer = {}          # writer snapshot id -> (ids added, ids deleted)
        self.writer_parent = {}   # writer snapshot id -> the snapshot it was committed on
        self.ours = set()         # canonical uris planted or left by our writer
        self.sentinels = {}       # canonical uri -> (size, mtime): never to change
        self.referenced = set()   # canonical uris any metadata version reached
        self.seen_meta = set()    # metadata files already walked
        self.log_len = 0          # metadata-log entries already checked
        self.jobs = []            # (round, operation, options, job id or error)
        self.faulted = False      # a fault may have failed a job of this table
        self.leaky = False        # ... or left files of an unknown commit (documented)
        self.violations = []
        self.unchecked = 0
        self.round_faults = []    # faults of a whole round of the batch: "round N: what"

    def fail(self, what):
        self.violations.append("%s -- %s%s" % (what, self.p.line(), "".join(
            "; " + x for x in self.round_faults)))


class Campaign:
    """Runs histories against a tms world: w has pg (a pgcluster.Cluster),
    catalog (world.CatalogServer whose storage is the gate), s3 (the
    S3Server), gate (the S3Gate or None), st, file_root; server is the
    tms_iceberg server naming the catalog."""

    NS = "soak"

    def __init__(self, w, server, big=False, fast=False, log=None, job_timeout=240):
        self.w, self.server, self.big, self.fast = w, server, big, fast
        self.st = CachedStorage(w["st"])
        self.log = log or (lambda *a: None)
        self.job_timeout = job_timeout
        self.counts = collections.Counter()
        self._lock = threading.Lock()
        self.violations = []
        try:
            w["catalog"].create_namespace(self.NS)
        except world.CatalogError as e:
            if e.status != 409:
                raise

    def inc(self, key, n=1):
        with self._lock:
            self.counts[key] += n

    # -- the SQL API ----------------------------------------------------------

    def q(self, sql, args=None):
        deadline = time.time() + 120
        while True:
            try:
                return self.w["pg"].query(sql, args)
            except Exception as e:  # the server restarting after a crash or a stop
                import psycopg2
                lost = isinstance(e, psycopg2.Error) and (
                    e.pgcode is None or e.pgcode[:2] in ("08", "57"))
                if not lost or time.time() > deadline:
                    raise
                time.sleep(0.5)

    def run(self, numbers, batch=25):
        numbers = list(numbers)
        for i in range(0, len(numbers), batch):
            started = time.time()
            seen = len(self.violations)
            self._batch(numbers[i:i + batch])
            c = self.counts
            self.log("soak: batch %d..%d in %.0f s: %d violations; so far %d histories, %d moves,"
                     " %d faults, %d rows checked, %d files checked" % (
                         numbers[i], numbers[min(i + batch, len(numbers)) - 1],
                         time.time() - started, len(self.violations) - seen, c["histories"],
                         c["moves"], c["faults"], c["rows checked"], c["files checked"]))
            for v in self.violations[seen:]:
                self.log("VIOLATION " + v)
        return self

    # -- one batch ---------------------------------------------------------------

    def _batch(self, numbers):
        w = self.w
        t0 = int(time.time() * 1000)
        plans = [Plan(n, "s3://warehouse/soak", "file://%s/wh/soak" % w["file_root"],
                      w["file_root"], t0, self.big, self.fast) for n in numbers]
        tmp = tempfile.mkdtemp(prefix="tms-soak-", dir=w["root"])
        clock = [time.time()]

        def lap(what):
            now = time.time()
            self.inc("seconds " + what, now - clock[0])
            clock[0] = now
        try:
            write_files(plans, tmp)
            lap("writing files")
            def build(p):
                b = Builder(p, w["catalog"], self.st, self.NS)
                try:
                    meta = b.run()
                except Exception as e:
                    self.violations.append("test world: the generator failed: %r -- %s"
                                           % (e, p.line()))
                    return None
                return HistoryState(p, b, meta, all_fields(meta))
            states = [x for x in parallel(build, plans) if x is not None]
            ow.give_to_server(w["file_root"])
            lap("committing")
            reader = Reader(self.st, tmp)
            self._baseline(reader, states)
            lap("baseline")
            for s in states:
                self._plant(s, t0)
            ow.give_to_server(w["file_root"])
            for rnd in range(max((len(s.p.rounds) for s in states), default=0)):
                self._round(reader, [s for s in states if rnd < len(s.p.rounds)], rnd, lap)
            def settle(s):
                self._settled(s)
                if s.p.purge:
                    self._purge(s)
            parallel(settle, states)
            lap("settling")
            for s in states:
                self.inc("histories", 1)
                self.violations.extend(s.violations)
                self.inc("unchecked snapshots", s.unchecked)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            self.st._cache.clear()

    def _load(self, s):
        for attempt in range(50):
            try:
                r = self.w["catalog"].load_table(self.NS, s.p.name)
                break
            except world.CatalogError as e:
                if e.status < 500 or attempt == 49:
                    raise
                time.sleep(0.2)             # its database restarting after a crash
        s.meta = r["metadata"]
        s.mloc = r["metadata-location"]
        return s.meta

    # -- the baseline: the generator's model against the reader ---------------

    def _baseline(self, reader, states):
        need = []
        for s in states:
            for snap in s.meta["snapshots"]:
                need += reader.needs(s.meta, snap["snapshot-id"], s.fields)[1]
        reader.load(need)
        for s in states:
            self._load(s)
            uspecs = unpartitioned_specs(s.meta)
            by_sid = {v: k for k, v in s.b.sid.items()}
            for snap in s.meta["snapshots"]:
                sid = snap["snapshot-id"]
                rows = reader.snapshot_rows(s.meta, sid, s.fields, uspecs)
                want = collections.Counter(s.p.snaps[by_sid[sid]]["ids"])
                got = ids_of(rows, s.fields)
                self.inc("rows checked", sum(rows.values()))
                if got != want:
                    s.fail("test world: the reference reader and the generator disagree on "
                           "snapshot %d: %d rows read, %d expected" % (
                               sid, sum(got.values()), sum(want.values())))
                s.rows[sid] = rows
                s.exp[sid] = want
            self._walk_referenced(s)
            s.log_len = len(s.meta.get("metadata-log") or [])
            s.prev_refs = dict(s.meta.get("refs") or {})

    def _walk_referenced(self, s):
        """Add every file each metadata version reached to s.referenced."""
        cache = reader_cache(s)
        for e in list(s.meta.get("metadata-log") or []) + [{"metadata-file": s.mloc}]:
            m = e["metadata-file"]
            if m in s.seen_meta:
                continue
            s.seen_meta.add(m)
            s.referenced.add(ow.canon(self.st, m))
            try:
                meta = s.meta if m == s.mloc else json.loads(self.st.read(m))
                s.referenced.update(ow.canon(self.st, u)
                                    for u in ow.content_files(self.st, meta, cache))
            except Exception:  # an older version whose files an expiry deleted
                pass

    # -- planting ------------------------------------------------------------

    def _plant(self, s, t0):
        p, st, s3 = s.p, self.st, self.w["s3"]
        old = t0 / 1000 - 10 * 86400
        if p.aged:
            ow.age_tree(st, p.location, t0 / 1000 - 4 * 86400, s3)
        r = random.Random(p.number * 7 + 1)
        for i in range(r.randint(1, 3)):
            u = "%s/data/orphan-old-%d-%s.parquet" % (p.location, i, uuid.UUID(int=r.getrandbits(128)))
            ow.plant(st, u, mtime=old, s3server=s3)
            s.ours.add(ow.canon(st, u))
        for i in range(r.randint(1, 2)):
            u = "%s/metadata/orphan-young-%d-%s.avro" % (p.location, i, uuid.UUID(int=r.getrandbits(128)))
            ow.plant(st, u, s3server=s3)
            s.ours.add(ow.canon(st, u))
        for u in ("%s/data/neighbour.parquet" % p.neighbour,
                  "%s/metadata/00000-neighbour.metadata.json" % p.neighbour):
            ow.plant(st, u, mtime=old, s3server=s3)
        for root in (p.neighbour, p.outside_root):
            if p.outside or root == p.neighbour:
                for u in list(ow.list_location(st, root)):
                    ow.set_mtime(st, u, old, s3)
                s.sentinels.update(ow.list_location(st, root))

    # -- a round of moves -------------------------------------------------------

    def _round(self, reader, states, rnd, lap):
        cat, gate = self.w["catalog"], self.w.get("gate")
        throttle = gate is not None and random.Random(
            states[0].p.number * 31 + rnd).random() < 0.3 if states else False
        crash = not self.fast and states and random.Random(
            states[0].p.number * 37 + rnd).random() < 0.2
        # faults of a whole round added later, from random states of their own
        errors = gate is not None and bool(states) and random.Random(
            states[0].p.number * 41 + rnd).random() < (0.15 if self.fast else 0.25)
        pm_stop = bool(states) and not crash and random.Random(
            states[0].p.number * 43 + rnd).random() < (0.1 if self.fast else 0.12)
        if errors:
            every = random.Random(states[0].p.number * 47 + rnd).choice([3, 5, 8])
            gate.errors(every, agent="tms/")
            self.inc("faults", 1)
            for s in states:
                s.round_faults.append("round %d: storage 500/503 to every %dth request of tms"
                                      % (rnd, every))
                if s.p.s3:
                    s.faulted = s.leaky = True
        if throttle:
            gate.throttle(40, burst=10, mode=random.Random(rnd).choice(["request", "keys"]),
                          scope="delete")
            self.inc("faults", 1)
        before = {}
        writers = []
        killers = []
        submitted = []
        lock = threading.Lock()

        def submit(s):
            rd = s.p.rounds[rnd]
            before[s.p.name] = self._listing(s)
            fault = rd["fault"]
            if fault:
                self._arm(s, fault)
                s.faulted = True
                s.leaky = s.leaky or fault != "kill-helper"
            if rd["writer"]:
                t = threading.Thread(target=self._writer, args=(s, rnd), daemon=True)
                t.start()
                with lock:
                    writers.append(t)
            for op, opts in rd["moves"]:
                started = time.time()
                opts = self._resolve(s, rnd, opts)
                send = {k: v for k, v in opts.items() if not k.startswith("_")}
                try:
                    jid = self.q("SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb)",
                                 (self.server, self.NS, s.p.name, op, json.dumps(send)))[0][0]
                    with lock:
                        submitted.append((s, jid))
                except Exception as e:
                    jid = "refused: %s" % str(e).splitlines()[0]
                    self.inc("moves refused", 1)
                    if opts.get("_head") and "still referenced" in jid:
                        self.inc("expiries of a ref head refused", 1)
                    elif (opts.get("_where") or opts.get("_sort") is not None or
                          opts.get("_ids")) and "garbage collection" not in jid:
                        s.fail("round %d: %s %s refused: %s" % (rnd, op, json.dumps(send), jid))
                s.jobs.append((rnd, op, opts, jid, started))
            if fault == "kill-helper":
                with lock:
                    killers.append(s)
        parallel(submit, states)
        for s in states:
            self.inc("moves", len(s.p.rounds[rnd]["moves"]))
            self.inc("faults", 1 if s.p.rounds[rnd]["fault"] else 0)
        done = threading.Event()
        if killers:
            for s in states:                # the helper killed may be any table's
                s.faulted = True
            t = threading.Thread(target=self._kill_helpers, args=(len(killers), done), daemon=True)
            t.start()
            writers.append(t)
        if crash:
            for s in states:
                s.faulted = s.leaky = True
                s.round_faults.append("round %d: a pool worker killed" % rnd)
            t = threading.Thread(target=self._kill_worker, args=(done,), daemon=True)
            t.start()
            writers.append(t)
        if pm_stop:
            for s in states:
                s.faulted = s.leaky = True
                s.round_faults.append("round %d: the postmaster stopped (immediate) and started"
                                      % rnd)
            self.inc("faults", 1)
            t = threading.Thread(target=self._stop_postmaster, args=(done,), daemon=True)
            t.start()
            writers.append(t)
        lap("submitting")
        self._await_jobs(submitted)
        done.set()
        for t in writers:
            t.join(timeout=120)
        lap("awaiting jobs")
        cat.clear_faults()
        if throttle:
            gate.unthrottle()
        if errors:
            self.inc("storage errors injected", gate.no_errors())
        need = []
        for s in states:
            try:
                self._load(s)
                for snap in s.meta["snapshots"]:
                    if snap["snapshot-id"] not in s.rows:
                        need += reader.needs(s.meta, snap["snapshot-id"], s.fields)[1]
            except Exception as e:
                s.fail("loading the table after round %d raised %r" % (rnd, e))
        try:
            reader.load(need)
        except Exception as e:
            for s in states:
                s.fail("reading the new snapshots after round %d raised %r" % (rnd, e))
            return
        lap("reading")
        for s in states:
            try:
                self._after_round(reader, s, rnd, before[s.p.name])
            except Exception as e:
                import traceback
                s.fail("checking round %d raised %r %s" % (rnd, e, traceback.format_exc()[-600:]))
        lap("checking")

    def _arm(self, s, fault):
        cat = self.w["catalog"]
        path = r"/namespaces/%s/tables/%s$" % (self.NS, s.p.name)
        if fault == "commit-503":
            cat.fault(path, method="POST", status=503)
        elif fault == "commit-lost":
            cat.fault(path, method="POST", action="lost", status=503)
        elif fault == "commit-hang":
            cat.fault(path, method="POST", action="hang", seconds=4)
        elif fault == "commit-late":
            cat.fault(path, method="POST", action="late", seconds=4)
        elif fault == "load-503":
            cat.fault(path, method="GET", status=503, count=2)

    def _kill_helpers(self, n, done):
        """SIGKILL up to n compaction helpers of this cluster as they run
        (until done is set)."""
        sys.path.insert(0, os.path.join(TEST_DIR, "integration"))
        from test_compaction_local import helper_pids
        killed = 0
        deadline = time.time() + 60
        while killed < n and time.time() < deadline and not done.is_set():
            try:
                pids = helper_pids({"pg": self.w["pg"]})
            except Exception:      # the cluster stopped or restarting in the same round
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, 9)
                    killed += 1
                    self.inc("helpers killed", 1)
                except OSError:
                    pass
            time.sleep(0.05)

    def _resolve(self, s, rnd, opts):
        """opts with the choices made against the table as it is when the
        round starts: an expiry's snapshot-ids (o["_ids"]: how many
        snapshots no ref has at its head, and whether a ref's head is
        among them, which tms must refuse; "_head" says so)."""
        if "_ids" not in opts:
            return opts
        k, head = opts["_ids"]
        rr = random.Random(s.p.number * 53 + rnd)
        heads = sorted({x["snapshot-id"] for x in (s.meta.get("refs") or {}).values()})
        others = sorted(x["snapshot-id"] for x in s.meta["snapshots"]
                        if x["snapshot-id"] not in heads)
        pick = rr.sample(others, min(k, len(others)))
        if head and heads:
            pick.append(rr.choice(heads))
        out = dict(opts, _head=bool(head and heads))
        if pick:
            out["snapshot-ids"] = pick
        return out

    def _stop_postmaster(self, done):
        """Once a pool worker runs a job: stop the whole cluster at once
        (pg_ctl stop -m immediate: every process ends without a shutdown,
        the postmaster too, as in a crash of the machine's PostgreSQL),
        then start it again; dead-lease recovery must settle the jobs."""
        pg = self.w["pg"]
        deadline = time.time() + 60
        while time.time() < deadline and not done.is_set():
            try:
                rows = pg.query("SELECT pid FROM tms.workers WHERE role = 'worker'"
                                " AND current_task IS NOT NULL")
            except Exception:
                rows = []
            if rows:
                break
            time.sleep(0.05)
        else:
            return
        pg.stop("immediate")
        self.inc("postmaster stops (immediate, then started)", 1)
        err = None
        for _ in range(5):
            try:
                pg.start()
                return
            except RuntimeError as e:
                err = e
                time.sleep(1)
        with self._lock:
            self.violations.append("test world: PostgreSQL did not start again: %s" % err)

    def _kill_worker(self, done):
        """SIGKILL a pool worker while it runs a job: the postmaster
        restarts every process of the cluster (a crash), and dead-lease
        recovery hands the jobs on."""
        deadline = time.time() + 60
        while time.time() < deadline and not done.is_set():
            try:
                rows = self.w["pg"].query("SELECT pid FROM tms.workers WHERE role = 'worker'"
                                          " AND current_task IS NOT NULL")
            except Exception:
                rows = []
            if rows:
                try:
                    os.kill(rows[0][0], 9)
                    self.inc("workers killed (crash and restart)", 1)
                    return
                except OSError:
                    pass
            time.sleep(0.05)

    def _await_jobs(self, submitted):
        deadline = time.time() + self.job_timeout
        pending = {jid for _, jid in submitted}
        while pending and time.time() < deadline:
            rows = self.q("SELECT id, state FROM tms.maintenance_jobs WHERE id = ANY(%s)",
                          (list(pending),))
            for jid, state in rows:
                if state in TERMINAL:
                    pending.discard(jid)
            if pending:
                time.sleep(0.2)
        for s, jid in submitted:
            if jid in pending:
                s.fail("job %d did not end within %d s" % (jid, self.job_timeout))

    def _writer(self, s, rnd):
        """A writer committing to its ref (main, or a branch) while the
        round's moves run: appends of its files, and the deletes it
        planned (whole files, position deletes)."""
        r = random.Random(s.p.number * 101 + rnd)
        files = [f for f in s.p.writer_items if not getattr(f, "done", False)]
        for f in files[:r.randint(1, len(files))] if files else []:
            time.sleep(r.random() * 1.5)   # pacing, not waiting for anything
            f.done = True
            try:
                self._writer_commit(s, f, r)
            except Exception as e:
                s.fail("test world: the writer raised %r" % (e,))

    def _writer_commit(self, s, f, r):
        for attempt in range(5):
            try:
                return self._writer_commit1(s, f, r)
            except FileNotFoundError:
                # tms removed the directory it was writing into, emptied
                # by a delete: write again
                self.inc("writer rewrites (directory removed under it)", 1)
        s.fail("test world: the writer could not write its files")

    def _writer_live(self, meta, sid):
        """The paths of the live data files of snapshot sid."""
        out = set()
        for rec in ow.manifest_records(self.st, ow.snapshot(meta, sid)):
            for e in ow.manifest_entries(self.st, rec["manifest_path"]):
                if e["status"] != 2 and (e["data_file"].get("content") or 0) == 0:
                    out.add(e["data_file"]["file_path"])
        return out

    def _writer_commit1(self, s, f, r):
        cat, st = self.w["catalog"], self.st
        ref = s.p.writer_ref
        if f.kind != "delfile":
            s.b.upload(f)
            if not storage_mod.is_s3(f.uri):
                # the directories it made are root's: tms (postgres) writes there too
                ow.give_to_server(st.local_path(s.p.location))
        for attempt in range(8):
            meta = None
            for _ in range(20):
                try:
                    meta = cat.load_table(self.NS, s.p.name)["metadata"]
                    break
                except world.CatalogError:
                    time.sleep(0.2)             # a fault, or the database restarting
            if meta is None:
                break
            head = (meta.get("refs") or {}).get(ref)
            if head is None:
                # an expiry removed the writer's branch
                self.inc("writer's branch gone", 1)
                if f.kind != "delfile":
                    s.ours.add(ow.canon(st, f.uri))
                return
            cur = head["snapshot-id"]
            if f.kind != "data" and f.target.uri not in self._writer_live(meta, cur):
                # a compaction rewrote the file it deletes from
                self.inc("writer deletes whose file went", 1)
                if f.kind == "pos":
                    s.ours.add(ow.canon(st, f.uri))
                return
            retention = {k: v for k, v in head.items()
                         if k in ("max-ref-age-ms", "min-snapshots-to-keep", "max-snapshot-age-ms")}
            body, written = commit_body(
                st, meta, cur, ref, "append" if f.kind == "data" else "delete",
                [] if f.kind == "delfile" else [f], [f.uri] if f.kind == "delfile" else [], r,
                int(time.time() * 1000), retention)
            body["requirements"].insert(0, {"type": "assert-table-uuid",
                                            "uuid": meta["table-uuid"]})
            sid = body["updates"][0]["snapshot"]["snapshot-id"]
            # its change, should it land unseen: ids added, ids deleted
            s.writer[sid] = (collections.Counter(f.ids if f.kind == "data" else ()),
                             set(getattr(f, "deleted", ())))
            s.writer_parent[sid] = cur
            try:
                ow.commit(cat, self.NS, s.p.name, body)
                landed = True
            except world.CatalogError as e:
                landed = False
                self.inc("writer conflicts %d" % e.status, 1)
                if e.status != 409:
                    again = None
                    for _ in range(50):
                        try:
                            again = cat.load_table(self.NS, s.p.name)["metadata"]
                            break
                        except world.CatalogError:
                            time.sleep(0.2)     # the catalog's database restarting
                    if again is None:
                        if f.kind != "delfile":
                            s.ours.add(ow.canon(st, f.uri))
                        s.ours.update(ow.canon(st, u) for u in written)
                        self.inc("writer outcome unknown", 1)
                        return
                    landed = any(x["snapshot-id"] == sid for x in again["snapshots"])
            if landed:
                self.inc("writer commits", 1)
                self.inc("writer commits " + f.kind + ("" if ref == "main" else " on a branch"), 1)
                return
            for u in written:
                st.delete(u)
                s.ours.add(ow.canon(st, u))
        self.inc("writer gave up", 1)
        if f.kind != "delfile":
            s.ours.add(ow.canon(st, f.uri))

    def _listing(self, s):
        out = {}
        for root in (s.p.location, s.p.neighbour, s.p.outside_root):
            out.update(ow.list_location(self.st, root))
        return out


def parallel(fn, items, workers=4):
    """fn over items in a few threads (the catalog, s3rver and PostgreSQL
    answer in processes of their own); results in order."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def reader_cache(s):
    return s.__dict__.setdefault("cache", {})


def _ancestors(meta, sid):
    by = {x["snapshot-id"]: x for x in meta["snapshots"]}
    out = []
    while sid in by and len(out) <= len(by):
        out.append(sid)
        sid = by[sid].get("parent-snapshot-id")
    return out


def _after_round(self, reader, s, rnd, before):
    st, meta = self.st, s.meta
    jobs = [j for j in s.jobs if j[0] == rnd]
    # every job ends in a state that says what happened
    for _, op, opts, jid, _ in jobs:
        if not isinstance(jid, int):
            continue
        state, err, reason, drw = self.q(
            "SELECT state, last_error, reason, delete_files_rewritten FROM tms.maintenance_jobs"
            " WHERE id = %s", (jid,))[0]
        s.__dict__.setdefault("states", {})[jid] = state
        self.inc("jobs " + state, 1)
        if op == "position-delete-rewrite" and state == "succeeded" and drw:
            self.inc("delete files rewritten (position-delete-rewrite)", drw)
        if state == "failed" and not err:
            s.fail("job %d (%s) failed without an error" % (jid, op))
        if state == "skipped" and not reason:
            s.fail("job %d (%s) skipped without a reason" % (jid, op))
        expected = s.faulted or "garbage collection" in (err or "") or (
            s.p.outside and "outside the allowed locations" in (err or "")) or (
            opts.get("_head") and "still referenced by ref" in (err or ""))
        if state == "failed" and opts.get("_head") and "still referenced by ref" in (err or ""):
            self.inc("expiries of a ref head refused", 1)
        if state == "failed" and not expected:
            s.fail("job %d (%s %s) failed with no fault injected: %s" % (
                jid, op, json.dumps(opts), (err or "").splitlines()[0] if err else err))
    after = self._listing(s)
    # nothing outside the table's location is touched
    for u, (size, mtime) in s.sentinels.items():
        got = after.get(u)
        if got is None or got[0] != size or abs(got[1] - mtime) > 1:
            s.fail("round %d: %s outside the table's location was %s" % (
                rnd, u, "deleted" if got is None else "changed"))
    # no file younger than an orphan cleanup's threshold is deleted, and no
    # file never referenced is deleted by anything but orphan cleanup
    end = time.time()
    cutoffs = [end - _days(o.get("older-than", "3 days")) * 86400
               for _, op, o, jid, _ in jobs if op == "orphan-cleanup" and isinstance(jid, int)]
    for u, (size, mtime) in before.items():
        if u in after or u in s.referenced or u in s.sentinels:
            continue
        self.inc("files checked", 1)
        if not cutoffs:
            s.fail("round %d: %s, which no metadata ever referenced, was deleted by a round "
                   "without orphan cleanup" % (rnd, u))
        elif mtime >= max(cutoffs):
            s.fail("round %d: orphan %s modified %.0f s ago was deleted by an orphan cleanup "
                   "keeping files younger than %s" % (rnd, u, end - mtime,
                                                      [o for _, op, o, _, _ in jobs
                                                       if op == "orphan-cleanup"]))
    # every file the table reaches exists
    reach = set(ow.canon(st, u) for u in ow.content_files(st, meta, reader_cache(s)))
    reach.add(ow.canon(st, s.mloc))
    reach.update(ow.canon(st, e["metadata-file"]) for e in meta.get("metadata-log") or [])
    for u in sorted(reach):
        self.inc("files checked", 1)
        if u not in after and not st.exists(u):
            s.fail("round %d: %s, reachable from the table, is missing" % (rnd, u))
    # the rows of every snapshot
    uspecs = unpartitioned_specs(meta)
    cur_ids = current_field_ids(meta)
    by = {x["snapshot-id"]: x for x in meta["snapshots"]}
    new_sids = []
    for sid, snap in sorted(by.items(), key=lambda kv: kv[1].get("sequence-number", 0)):
        if sid in s.rows:
            continue
        new_sids.append(sid)
        rows = reader.snapshot_rows(meta, sid, s.fields, uspecs)
        self.inc("rows checked", sum(rows.values()))
        parent = snap.get("parent-snapshot-id")
        op = (snap.get("summary") or {}).get("operation")
        if sid in s.writer:
            if parent in s.exp:
                added_ids, deleted_ids = s.writer[sid]
                want = s.exp[parent] + added_ids
                for i in deleted_ids:
                    want.pop(i, None)
                if ids_of(rows, s.fields) != want:
                    s.fail("round %d: the writer's snapshot %d has %d rows, %d expected" % (
                        rnd, sid, sum(rows.values()), sum(want.values())))
                s.exp[sid] = want
            else:
                s.unchecked += 1
        elif op == "replace":
            if parent in s.rows:
                a, b = project(rows, s.fields, cur_ids), project(s.rows[parent], s.fields, cur_ids)
                if a != b:
                    lost = sum((b - a).values())
                    extra = sum((a - b).values())
                    s.fail("round %d: replace snapshot %d differs from its parent %d: %d rows "
                           "lost, %d rows added (%s)" % (rnd, sid, parent, lost, extra,
                                                         json.dumps(snap.get("summary"))))
                if parent in s.exp:
                    s.exp[sid] = s.exp[parent]
            else:
                s.unchecked += 1
        else:
            s.fail("round %d: snapshot %d of operation %s was committed by no one known"
                   % (rnd, sid, op))
        s.rows[sid] = rows
    # compaction's where and sort: what it rewrote and how it wrote it
    comp = [o for _, op, o, jid, _ in jobs if op == "compaction" and isinstance(jid, int)]
    if comp and ("_where" in comp[0] or "_sort" in comp[0]):
        _check_compaction(self, reader, s, rnd, meta, new_sids, comp[0])
    # no data file is added by two snapshots
    added = collections.defaultdict(set)
    cache = reader_cache(s)
    for snap in meta["snapshots"]:
        for rec in ow.manifest_records(st, snap):
            for e in ow.manifest_entries(st, rec["manifest_path"], cache):
                if e["status"] == 1:
                    added[e["data_file"]["file_path"]].add(e.get("snapshot_id"))
    for path, sids in added.items():
        if len(sids) > 1:
            s.fail("round %d: %s was added by %d snapshots %s" % (rnd, path, len(sids), sorted(sids)))
    # refs: only main moves, forward; refs and snapshots go only by expiry rules
    refs = meta.get("refs") or {}
    allowed_refs = set()
    versions = [e["metadata-file"] for e in meta.get("metadata-log") or []] + [s.mloc]
    exp_jobs = [o for _, op, o, jid, _ in jobs if op == "snapshot-expiry" and isinstance(jid, int)]
    for i in range(max(0, s.log_len), len(versions) - 1):
        a = json.loads(st.read(versions[i]))
        b = meta if versions[i + 1] == s.mloc else json.loads(st.read(versions[i + 1]))
        gone = {x["snapshot-id"] for x in a["snapshots"]} - {x["snapshot-id"] for x in b["snapshots"]}
        gone_refs = set(a.get("refs") or {}) - set(b.get("refs") or {})
        if not gone and not gone_refs:
            continue
        if not exp_jobs:
            s.fail("round %d: %s removed snapshots %s and refs %s without an expiry" % (
                rnd, versions[i + 1], sorted(gone), sorted(gone_refs)))
            continue
        o = exp_jobs[0]
        try:
            want = ow.expected_expiry(
                a, b["last-updated-ms"],
                older_than_ms=parse_iso(o["older-than"]) if "older-than" in o else None,
                retain_last=o.get("retain-last"), max_ref_age_ms=o.get("max-ref-age-ms"),
                snapshot_ids=o.get("snapshot-ids") or ())
        except ValueError as e:
            s.fail("round %d: expiry %s committed %s though %s" % (
                rnd, json.dumps(o), versions[i + 1], e))
            continue
        if o.get("snapshot-ids"):
            self.inc("expiry commits checked with snapshot-ids", 1)
        self.inc("expiry commits checked", 1)
        if gone - want["expired"]:
            s.fail("round %d: expiry %s removed snapshots %s that Iceberg's rules keep" % (
                rnd, json.dumps(o), sorted(gone - want["expired"])))
        if gone_refs - want["removed_refs"]:
            s.fail("round %d: expiry %s removed refs %s that Iceberg's rules keep" % (
                rnd, json.dumps(o), sorted(gone_refs - want["removed_refs"])))
        if want["expired"] - gone:
            self.inc("expiry kept more than the oracle", 1)
        allowed_refs |= gone_refs
    for name, ref in s.prev_refs.items():
        now = refs.get(name)
        if now is None:
            if name not in allowed_refs:
                s.fail("round %d: ref %s vanished" % (rnd, name))
        elif name != "main" and now["snapshot-id"] != ref["snapshot-id"]:
            # only the writer's branch moves, forward, to the writer's
            # snapshots (by the parents they were committed on: an expiry
            # of the round may have removed the branch's earlier head)
            x, steps = now["snapshot-id"], 0
            while x in s.writer and x != ref["snapshot-id"] and steps <= len(s.writer):
                x, steps = s.writer_parent[x], steps + 1
            if name != s.p.writer_ref or x != ref["snapshot-id"]:
                s.fail("round %d: ref %s moved from %d to %d" % (rnd, name, ref["snapshot-id"],
                                                                 now["snapshot-id"]))
        elif name == "main" and now["snapshot-id"] != ref["snapshot-id"]:
            anc = _ancestors(meta, now["snapshot-id"])
            if ref["snapshot-id"] in by and ref["snapshot-id"] not in anc:
                s.fail("round %d: main moved from %d to %d, not a descendant" % (
                    rnd, ref["snapshot-id"], now["snapshot-id"]))
    s.prev_refs = dict(refs)
    s.log_len = len(versions) - 1
    self._walk_referenced(s)


def _check_compaction(self, reader, s, rnd, meta, sids, o):
    """The compaction snapshots of the round (replace snapshots adding data
    files): with a where, every data file they removed has a partition
    that makes it true (a partition without the field is unknown, not
    true); with a sort, the rows of every file they added, read back in
    file order, are ordered by the sort's columns."""
    st, cache = self.st, reader_cache(s)
    fkey = json.dumps(s.fields)
    col = {f["id"]: i + 1 for i, f in enumerate(s.fields)}     # rows are [pos, values...]
    for sid in sids:
        snap = ow.snapshot(meta, sid)
        if (snap.get("summary") or {}).get("operation") != "replace":
            continue
        added, removed = [], []
        for rec in ow.manifest_records(st, snap):
            for e in ow.manifest_entries(st, rec["manifest_path"], cache):
                if e.get("snapshot_id") != sid or (e["data_file"].get("content") or 0) != 0:
                    continue
                (added if e["status"] == 1 else removed if e["status"] == 2 else []).append(
                    e["data_file"])
        if not added:
            continue                    # a manifest rewrite's
        if "_where" in o:
            name, kind, vals = o["_where"]
            for df in removed:
                v = (df.get("partition") or {}).get(name)
                self.inc("files checked (where)", 1)
                if v is None or not (v in vals if kind in ("=", "in") else v >= vals[0]):
                    s.fail("round %d: compaction where %r rewrote %s of partition %s" % (
                        rnd, o["where"], df["file_path"], json.dumps(df.get("partition"),
                                                                    default=repr)))
        for df in added if o.get("_sort") else ():
            rows = reader.rows.get((df["file_path"], fkey))
            if rows is None:
                continue
            self.inc("files checked (sorted)", 1)
            keys = [tuple(-int(r[col[fid]]) if desc else int(r[col[fid]])
                          for fid, desc in o["_sort"]) for r in rows]
            bad = [k for k in range(len(keys) - 1) if keys[k] > keys[k + 1]]
            if bad:
                s.fail("round %d: compaction sort-order %r wrote %s with row %d out of order" % (
                    rnd, o["sort-order"], df["file_path"], bad[0] + 1))


def _settled(self, s):
    """After the dust settles: orphan cleanup finds nothing tms wrote and
    left unreferenced after jobs that succeeded."""
    st = self.st
    if s.p.props.get("gc.enabled") == "false":
        return
    try:
        self._load(s)
        self._walk_referenced(s)
        rows = self.q("SELECT action, target FROM tms.plan_operation(%s, %s, %s, 'orphan-cleanup',"
                      " %s::jsonb)", (self.server, self.NS, s.p.name, json.dumps(
                          {"older-than": iso(int(time.time() * 1000) + 120000), "force": True})))
    except Exception as e:
        s.fail("the orphan plan after the moves raised %r" % (e,))
        return
    left = set()
    for action, target in rows:
        if action != "delete-file":
            continue
        u = ow.canon(st, target)
        if u in s.ours or u in s.referenced or u in s.b.written or u.endswith(".metadata.json"):
            continue
        left.add(u)
    clean = not s.leaky and all(v in ("succeeded", "failed") if s.faulted else v == "succeeded"
                                for v in (s.__dict__.get("states") or {}).values())
    if left and clean:
        s.fail("tms left %d files it wrote unreferenced after jobs that succeeded: %s" % (
            len(left), sorted(left)[:3]))
    self.inc("files left after failures (documented)", 0 if clean else len(left))


def _purge(self, s):
    try:
        jid = self.q("SELECT tms.purge_table(%s, %s, %s)", (self.server, self.NS, s.p.name))[0][0]
    except Exception as e:
        self.inc("purges refused", 1)
        s.__dict__["purge_refused"] = str(e).splitlines()[0]
        return
    self.inc("moves", 1)
    deadline = time.time() + self.job_timeout
    state = err = None
    while time.time() < deadline:
        state, err = self.q("SELECT state, last_error FROM tms.purge_jobs WHERE id = %s", (jid,))[0]
        if state in ("SUCCEEDED", "FAILED"):
            break
        time.sleep(0.2)
    self.inc("purges " + str(state), 1)
    if state == "FAILED":
        self.inc("purge failed: " + (err or "").splitlines()[0][:100] if err else "purge failed", 1)
    if state not in ("SUCCEEDED", "FAILED"):
        s.fail("purge %d did not end (%s)" % (jid, state))
    elif state == "FAILED" and not err:
        s.fail("purge %d failed without an error" % jid)
    after = self._listing(s)
    for u, (size, mtime) in s.sentinels.items():
        got = after.get(u)
        if got is None or got[0] != size:
            s.fail("purge: %s outside the table's location was %s" % (
                u, "deleted" if got is None else "changed"))


Campaign._after_round = _after_round
Campaign._settled = _settled
Campaign._purge = _purge
