"""
test_operations.py -- tms's maintenance operations end to end:
snapshot-expiry, orphan-cleanup and manifest-rewrite, run by the worker pool
through tms.run_operation (engine 'local') or a policy, planned by
tms.plan_operation, on the real fixture tables and synthetic ones, on
file:// and s3rver.

Every expectation is computed independently of tms (test/opsworld.py: a
Python reader of the table's Avro, Iceberg Java's expiry rules, a listing of
storage) and the table is read again afterwards by icebird:

  - after every operation the Python reader and icebird see the same live
    data and delete files (and, for real Parquet, the same rows) as before;
  - expiry removes exactly the snapshots Java's rules remove, keeps refs
    (removing only those older than their max-ref-age-ms), honours
    retain-last and snapshot-ids, deletes exactly the files only the
    expired snapshots reached, and refuses a table with gc.enabled=false;
  - orphan cleanup deletes exactly the unreachable files older than the
    cutoff: planted old orphans go, young ones stay, so do a prefix
    neighbour's files (.../t2 next to .../t), version-hint.text, statistics
    and every metadata file, also when everything is old; it refuses a
    table with gc.enabled=false;
  - manifest rewrite turns 1,000 small manifests (200 on S3) into a few
    with identical live entries (sequence numbers included); a concurrent
    writer (the catalog's interpose fault) makes the first commit fail
    with 409, the job retries and no entry is lost;
  - a rewrite commit that lands but whose answer is lost, against a
    catalog that advertises idempotency-key-lifetime: tms retries it with
    the same Idempotency-Key and it lands exactly once;
  - a commit that lands but whose answer is held ("late" fault), with the
    worker SIGKILLed before it learns the outcome: the job resumes and
    deletes exactly the right files, once;
  - plan_operation changes nothing and lists what run_operation then does;
  - a policy with each operation (engine local) runs it end to end;
  - validation errors carry their SQLSTATE and create no job;
    cancel_operation cancels a pending job.

The module runs its own cluster (fast workers, a 1 s evaluation cycle)
whose database also holds the test catalog's pointer tables.

Run: /usr/bin/python3 -m pytest -q test/integration/test_operations.py
"""

import json
import os
import signal
import sys
import time
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

SETTINGS = dict(FAST_WORKERS, **{"tms.evaluation_cycle_interval": "1s"})
# a run with nothing to do may end either way
DONE = ("succeeded", "skipped")
REAL = sorted(world.table_name_for(f) for f in world.REAL_TABLES)
# icebird 0.3.1 cannot walk these two (test/README.md)
ICEBIRD_CANNOT = {"pyiceberg_v1_overwrite", "spark_v1_legacy_manifests_field"}
# row counts icebird reads from the real Parquet (test/README.md)
REAL_ROWS = {"java_v2_partitioned_eqdeletes", "pyiceberg_v2_partitioned_nullcodec",
             "spark_v1_gzip_metadata", "spark_v2_mor_posdeletes",
             "spark_v2_partitioned_bucket_identity"}
DAY = 86400


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

pytestmark = pytest.mark.own_cluster

# the tests on the real fixture tables and at 1,000 manifests or snapshots: a work
# unit of their own in the parallel run (conftest.py), beside the rest of the
# module, on a world of their own
REAL_UNIT = pytest.mark.xdist_group("test_operations.py:real")


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "opscat"
    w = tms_world("ops", settings=SETTINGS, catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/, s3://hyperparam-iceberg/, s3a://hyperparam-iceberg/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def base(env, where):
    """A fresh directory for tables: file:// below file_root or s3://warehouse."""
    tag = uuid.uuid4().hex[:10]
    if where == "s3":
        return "s3://warehouse/ops/%s" % tag
    return "file://%s/ops/%s" % (env["file_root"], tag)


def synth_args(env, where):
    return ["--s3-endpoint", env["s3"].endpoint] if where == "s3" else []


def new_table(env, where, *args, loc=None, ns="ops"):
    """A synthetic table (synth.py options) at <base>/t, registered."""
    loc = loc or base(env, where) + "/t"
    res = ow.synth_table(loc, *(list(args) + synth_args(env, where)))
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register(ns, name, res["metadata_location"])
    return loc, name, res


def run(env, ns, name, op, options=None, engine="local"):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb, %s)",
             (env["server"], ns, name, op, json.dumps(options or {}), engine))[0][0]


def plan(env, ns, name, op, options=None):
    """tms.plan_operation's rows as dicts (modified: the epoch of an
    orphan's modification time)."""
    rows = q(env, "SELECT action, target, detail, CASE WHEN detail ? 'modified' THEN"
                  " extract(epoch FROM (detail->>'modified')::timestamptz)::float8 END"
                  " FROM tms.plan_operation(%s, %s, %s, %s, %s::jsonb)",
             (env["server"], ns, name, op, json.dumps(options or {})))
    return [dict(action=a, target=t, detail=d, modified=m) for a, t, d, m in rows]


def metrics(env, jid):
    return {phase: (sid, m) for phase, sid, m in q(
        env, "SELECT phase, snapshot_id, metrics FROM tms.table_snapshot_metrics"
             " WHERE job_id = %s", (jid,))}


def job_count(env):
    return q(env, "SELECT count(*) FROM tms.maintenance_jobs")[0][0]


def pool(env, on):
    env["pg"].pool(on)


def worker_pid(env, jid):
    """The pid of the pool worker running the job: its task's picked_pid
    (tms.scheduled_tasks), else the worker whose current task names it."""
    rows = q(env, "SELECT s.picked_pid FROM tms.scheduled_tasks s"
                  " JOIN tms.table_maintenance_job j ON s.task_name = j.task_kind"
                  "  AND s.task_instance = j.task_instance"
                  " WHERE j.id = %s AND s.picked AND s.picked_pid IS NOT NULL", (jid,))
    if rows:
        return rows[0][0]
    rows = q(env, "SELECT w.pid FROM tms.workers w JOIN tms.table_maintenance_job j"
                  " ON w.current_task = j.task_kind || '/' || j.task_instance WHERE j.id = %s",
             (jid,))
    return rows[0][0] if rows else None


def pg_now_ms(env):
    return int(q(env, "SELECT (extract(epoch FROM now()) * 1000)::bigint")[0][0])


def ts_text(env, unix):
    """A timestamptz literal for an absolute older-than."""
    return q(env, "SELECT to_timestamp(%s)::text", (unix,))[0][0]


def observe(env, ns, name, rows=False):
    """What the independent readers see of the current snapshot: the Python
    reader's live entries; icebird's counts and live files (and rows of
    real Parquet) where icebird can read the table."""
    mloc, meta = ow.load(env["catalog"], ns, name)
    live = ow.live_files(env["st"], meta)
    out = {"live": sorted((p, f["content"], f["records"], f["size"]) for p, f in live.items()),
           "summary": ow.summary(live)}
    if name not in ICEBIRD_CANNOT:
        ib = ow.icebird(mloc, env["s3"].endpoint, env["file_root"], list_files=True,
                        read_rows=rows)
        out["icebird"] = {"files": sorted((f["path"], f["content"], f["records"], f["size"])
                                          for f in ib["files"]),
                          "records": ib["records"], "rows": ib.get("rows")}
        assert out["icebird"]["files"] == out["live"], "icebird and the Python reader disagree"
    return out


def snapshot_ids(meta):
    return {s["snapshot-id"] for s in meta.get("snapshots") or []}


# ---------------------------------------------------------------------------
# validation and cancellation
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_table(env):
    return new_table(env, "file", "--snapshots", "3", "--data-files", "6")


@pytest.mark.parametrize("op,options,engine,sqlstate", [
    ("vacuum", {}, "local", "22023"),
    ("position-delete-rewrite", {"strategy": "sort"}, "local", "22023"),
    ("position-delete-rewrite", {"min-file-size-bytes": 9, "max-file-size-bytes": 8}, "local",
     "22023"),
    ("compaction", {"min-input-files": 0}, "local", "22023"),
    ("snapshot-expiry", {"bogus": 1}, "local", "22023"),
    ("snapshot-expiry", {"retain-last": "three"}, "local", "22023"),
    ("snapshot-expiry", {"retain-last": 0}, "local", "22023"),
    ("snapshot-expiry", {"older-than": "not a time"}, "local", "22007"),
    ("snapshot-expiry", {"snapshot-ids": "12"}, "local", "22023"),
    ("snapshot-expiry", {"clean-expired-files": "yes"}, "local", "22023"),
    ("snapshot-expiry", {"max-ref-age-ms": "1d"}, "local", "22023"),
    ("orphan-cleanup", {"older-than": "1 hour"}, "local", "22023"),
    ("orphan-cleanup", {"prefix-mismatch-mode": "maybe"}, "local", "22023"),
    ("orphan-cleanup", {"retain-last": 1}, "local", "22023"),
    ("manifest-rewrite", {"spec-id": "zero"}, "local", "22023"),
    ("manifest-rewrite", {"target-size-bytes": "8MB"}, "local", "22023"),
])
def test_validation_error_creates_no_job(env, one_table, op, options, engine, sqlstate):
    _, name, _ = one_table
    n = job_count(env)
    e = env["pg"].query_error("SELECT tms.run_operation(%s, 'ops', %s, %s, %s::jsonb, %s)",
                              (env["server"], name, op, json.dumps(options), engine))
    assert e.pgcode == sqlstate, (e.pgcode, str(e))
    assert job_count(env) == n


def test_server_errors_create_no_job(env, one_table):
    _, name, _ = one_table
    pg = env["pg"]
    n = job_count(env)
    e = pg.query_error("SELECT tms.run_operation('no_such_server', 'ops', %s,"
                       " 'snapshot-expiry')", (name,))
    assert e.pgcode == "42704", str(e)
    tag = uuid.uuid4().hex[:6]
    nomap, user = "nomap_%s" % tag, "opsuser_%s" % tag
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri '%s')"
      % (nomap, env["catalog"].uri))
    q(env, "CREATE ROLE %s" % user)
    q(env, "GRANT USAGE ON SCHEMA tms TO %s" % user)
    q(env, "GRANT EXECUTE ON FUNCTION tms.run_operation(name, text, text, text, jsonb, text)"
           " TO %s" % user)
    # no USAGE on the server
    e = pg.query_error("SET ROLE %s; SELECT tms.run_operation(%%s, 'ops', %%s,"
                       " 'snapshot-expiry')" % user, (nomap, name))
    assert e.pgcode == "42501", str(e)
    # USAGE but no user mapping
    q(env, "GRANT USAGE ON FOREIGN SERVER %s TO %s" % (nomap, user))
    e = pg.query_error("SET ROLE %s; SELECT tms.run_operation(%%s, 'ops', %%s,"
                       " 'snapshot-expiry')" % user, (nomap, name))
    assert e.pgcode == "42704", str(e)
    assert job_count(env) == n


def test_cancel_pending_operation(env):
    loc, name, res = new_table(env, "file", "--snapshots", "5", "--data-files", "5")
    _, meta = ow.load(env["catalog"], "ops", name)
    pool(env, False)
    try:
        jid = run(env, "ops", name, "snapshot-expiry", {"older-than": "1 second",
                                                        "retain-last": 1})
        assert env["pg"].job(jid)["state"] == "pending"
        assert q(env, "SELECT tms.cancel_operation(%s)", (jid,))[0][0] is True
        row = env["pg"].job(jid)
        assert row["state"] == "cancelled" and row["finished_at"] is not None, row
        assert q(env, "SELECT tms.cancel_operation(%s)", (jid,))[0][0] is False
        assert env["pg"].query_error("SELECT tms.cancel_operation(-1)").pgcode == "42704"
    finally:
        pool(env, True)
    # a later job on the same table runs and finishes; the cancelled one never ran
    later = run(env, "ops", name, "orphan-cleanup")
    env["pg"].wait_job(later, DONE)
    row = env["pg"].job(jid)
    assert row["state"] == "cancelled" and row["started_at"] is None, row
    assert snapshot_ids(ow.load(env["catalog"], "ops", name)[1]) == snapshot_ids(meta)


# ---------------------------------------------------------------------------
# snapshot expiry
# ---------------------------------------------------------------------------

def expiry_world(env, where):
    """30 append snapshots (one manifest each), a branch b at 10 keeping 2,
    a tag keep at 15, a tag old at 2 older than its max-ref-age-ms, a
    statistics file for each of the last 20, a version hint."""
    return new_table(env, where, "--snapshots", "30", "--data-files", "60",
                     "--files-per-manifest", "2", "--branch", "b@10:min-snapshots-to-keep=2",
                     "--tag", "keep@15", "--tag", "old@2:max-ref-age-ms=1000",
                     "--stats-files", "20", "--version-hint")


def expect_expiry(env, meta, **kw):
    now = pg_now_ms(env)
    exp = ow.expected_expiry(meta, now, **kw)
    after = ow.metadata_after_expiry(meta, exp)
    return exp, ow.expected_expiry_deletes(env["st"], meta, after)


@pytest.mark.parametrize("where", ["file", "s3"])
def test_expiry_plan_equals_run_and_keeps_refs(env, where):
    cat, st = env["catalog"], env["st"]
    loc, name, res = expiry_world(env, where)
    mloc, meta = ow.load(cat, "ops", name)
    cutoff = time.time()
    options = {"older-than": ts_text(env, cutoff), "retain-last": 3}
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(cutoff * 1000), retain_last=3)
    assert exp["removed_refs"] == {"old"} and len(exp["expired"]) > 10
    seen = observe(env, "ops", name)
    listing = ow.list_location(st, loc)

    cat.reset_requests()
    rows = plan(env, "ops", name, "snapshot-expiry", options)
    # the plan changed nothing
    assert ow.load(cat, "ops", name)[0] == mloc
    assert ow.list_location(st, loc) == listing
    assert not [r for r in cat.requests()["requests"] if r["method"] != "GET"]
    by = {}
    for r in rows:
        by.setdefault(r["action"], []).append(r)
    assert {int(r["target"]) for r in by["expire-snapshot"]} == exp["expired"]
    assert {r["target"] for r in by["remove-ref"]} == {"old"}
    assert {r["target"]: r["detail"]["kind"] for r in by["delete-file"]} == \
        {ow.canon(st, p): k for p, k in deletes.items()}
    sizes = {u: s for u, (s, _) in listing.items()}
    assert all(r["detail"]["size"] == sizes[ow.canon(st, r["target"])] for r in by["delete-file"])
    assert [r["target"] for r in by["commit"]] == ["remove-snapshots"]

    jid = run(env, "ops", name, "snapshot-expiry", options)
    row = env["pg"].wait_job(jid)
    mloc2, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == exp["retained"]
    refs = meta2["refs"]
    assert set(refs) == {"main", "b", "keep"}
    assert refs["b"] == meta["refs"]["b"] and refs["keep"] == meta["refs"]["keep"]
    after = ow.list_location(st, loc)
    gone = set(listing) - set(after)
    assert gone == {ow.canon(st, p) for p in deletes}
    assert set(after) - set(listing) == {ow.canon(st, mloc2)}       # the new metadata file
    assert ow.canon(st, loc + "/metadata/version-hint.text") in after
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    assert observe(env, "ops", name) == seen
    assert row["snapshots_expired"] == len(exp["expired"])
    assert row["files_deleted"] == len(deletes)
    assert row["bytes_deleted"] == sum(sizes[u] for u in gone)
    assert row["before_snapshot_id"] == row["after_snapshot_id"] == meta["current-snapshot-id"]
    m = metrics(env, jid)
    assert m["before"][1]["snapshots"] == len(meta["snapshots"])
    assert m["after"][1]["snapshots"] == len(exp["retained"])
    assert m["before"][1]["dataFiles"] == m["after"][1]["dataFiles"] == 60
    # run again: nothing left to expire, nothing deleted, nothing committed
    row = env["pg"].wait_job(run(env, "ops", name, "snapshot-expiry", options), DONE)
    assert (row["snapshots_expired"] or 0, row["files_deleted"] or 0) == (0, 0)
    assert ow.load(cat, "ops", name)[0] == mloc2


@pytest.mark.parametrize("where", ["file", "s3"])
def test_expiry_deletes_files_only_expired_snapshots_reach(env, where):
    """A delete snapshot drops two manifests; expiring everything but it
    deletes those manifests, their data files, the lists and stats --
    nothing the current snapshot reads."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, where, "--snapshots", "6", "--data-files", "12",
                               "--files-per-manifest", "1", "--pos-deletes", "2",
                               "--stats-files", "3")
    _, meta = ow.load(cat, "ops", name)
    cur = ow.snapshot(meta, meta["current-snapshot-id"])
    data_manifests = [r["manifest_path"] for r in ow.manifest_records(st, cur)
                      if not r.get("content")]
    body, _ = ow.delete_manifests_commit(st, meta, data_manifests[-2:], seed=7)
    ow.commit(cat, "ops", name, body)
    mloc, meta = ow.load(cat, "ops", name)
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(time.time() * 1000), retain_last=1)
    assert sorted(set(deletes.values())) == ["data", "manifest", "manifest-list", "statistics"]
    assert sum(1 for k in deletes.values() if k == "data") == 2
    seen = observe(env, "ops", name)
    listing = ow.list_location(st, loc)
    rows = plan(env, "ops", name, "snapshot-expiry", {"retain-last": 1,
                                                      "older-than": "1 second"})
    assert {r["target"] for r in rows if r["action"] == "delete-file"} == \
        {ow.canon(st, p) for p in deletes}
    row = env["pg"].wait_job(run(env, "ops", name, "snapshot-expiry",
                                 {"retain-last": 1, "older-than": "1 second"}))
    _, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == exp["retained"] == {meta["current-snapshot-id"]}
    assert set(listing) - set(ow.list_location(st, loc)) == {ow.canon(st, p) for p in deletes}
    assert observe(env, "ops", name) == seen
    assert row["files_deleted"] == len(deletes)


def job_note(env, jid):
    """(phase, message) of a job: what its record says beyond the counters."""
    return tuple(q(env, "SELECT phase, message FROM tms.maintenance_jobs WHERE id = %s",
                   (jid,))[0])


def expired_only_world(env, where):
    """Six appends, then a delete snapshot dropping two manifests: expiring
    everything but the current snapshot expires six snapshots, whose two
    dropped manifests (one data file each) only they reach."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, where, "--snapshots", "6", "--data-files", "12",
                               "--files-per-manifest", "1")
    _, meta = ow.load(cat, "ops", name)
    cur = ow.snapshot(meta, meta["current-snapshot-id"])
    data_manifests = [r["manifest_path"] for r in ow.manifest_records(st, cur)
                      if not r.get("content")]
    body, _ = ow.delete_manifests_commit(st, meta, data_manifests[-2:], seed=11)
    ow.commit(cat, "ops", name, body)
    return loc, name, data_manifests[-2:]


@pytest.mark.parametrize("where", ["file", "s3"])
def test_expiry_skips_missing_files_of_expired_snapshots(env, where):
    """A concurrent orphan cleanup may delete the manifest lists and
    manifests of expired snapshots once the expiry commit landed, before
    the expiry lists them: they are gone, the job skips and reports them,
    deletes the rest and succeeds (as Iceberg's cleanup ignores failures to
    read expired manifests).  Here they are deleted before the run: the
    expiry still sees their snapshots in the metadata and expires them."""
    cat, st = env["catalog"], env["st"]
    loc, name, dropped = expired_only_world(env, where)
    mloc, meta = ow.load(cat, "ops", name)
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(time.time() * 1000),
                                 retain_last=1)
    assert len(exp["expired"]) == 6
    kinds = {ow.canon(st, p): k for p, k in deletes.items()}
    seen = observe(env, "ops", name)
    listing = ow.list_location(st, loc)
    # gone already: the manifest lists of the two oldest snapshots and one
    # dropped manifest (whose data file is then reached by nothing)
    oldest = sorted(meta["snapshots"], key=lambda s: s["timestamp-ms"])[:2]
    assert all(s["snapshot-id"] in exp["expired"] for s in oldest)
    gone_lists = [s["manifest-list"] for s in oldest]
    orphaned = [e["data_file"]["file_path"] for e in ow.manifest_entries(st, dropped[0])]
    assert len(orphaned) == 1 and kinds.get(ow.canon(st, orphaned[0])) == "data"
    for p in gone_lists + [dropped[0]]:
        assert kinds.get(ow.canon(st, p)) in ("manifest-list", "manifest")
        st.delete(p)
    row = env["pg"].wait_job(run(env, "ops", name, "snapshot-expiry",
                                 {"retain-last": 1, "older-than": "1 second"}))
    _, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == exp["retained"]
    after = ow.list_location(st, loc)
    # everything else only the expired snapshots reached is deleted
    assert set(listing) - set(after) == set(kinds) - {ow.canon(st, orphaned[0])}
    assert ow.canon(st, orphaned[0]) in after
    assert row["snapshots_expired"] == 6
    assert row["files_deleted"] == len(deletes) - 3 - 1
    phase, message = job_note(env, row["id"])
    assert phase == "done"
    assert message.startswith("3 manifest lists or manifests of expired snapshots were "
                              "already missing"), message
    # the kept snapshot reads as before
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    assert observe(env, "ops", name) == seen


def test_expiry_missing_file_of_kept_snapshot_fails_before_deleting(env):
    """A missing manifest list of a KEPT snapshot leaves what is kept
    unproven: the commit lands (the job's record says so: phase cleanup,
    the snapshots expired, the error names the landed commit) but nothing
    is deleted, and the job fails."""
    cat, st = env["catalog"], env["st"]
    loc, name, dropped = expired_only_world(env, "file")
    mloc, meta = ow.load(cat, "ops", name)
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(time.time() * 1000),
                                 retain_last=2)
    assert len(exp["expired"]) == 5 and len(exp["retained"]) == 2
    kept_old = [sid for sid in exp["retained"] if sid != meta["current-snapshot-id"]]
    victim = ow.snapshot(meta, kept_old[0])["manifest-list"]
    st.delete(victim)
    listing = ow.list_location(st, loc)
    jid = run(env, "ops", name, "snapshot-expiry", {"retain-last": 2, "older-than": "1 second"})
    row = env["pg"].wait_job(jid, ("failed",))
    mloc2, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == exp["retained"]              # the commit landed
    # nothing deleted: only the new metadata file appeared
    assert set(ow.list_location(st, loc)) == set(listing) | {ow.canon(st, mloc2)}
    assert row["files_deleted"] == 0 and row["snapshots_expired"] == 5
    assert "after the expiry commit landed" in row["last_error"], row["last_error"]
    assert job_note(env, jid)[0] == "cleanup"

@REAL_UNIT
def test_expiry_1000_snapshots(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "file", "--snapshots", "1000", "--data-files", "100",
                               "--files-per-manifest", "10", "--single-metadata",
                               "--codec", "null")
    _, meta = ow.load(cat, "ops", name)
    assert len(meta["snapshots"]) == 1000
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(time.time() * 1000),
                                 retain_last=10)
    assert len(exp["expired"]) == 990 and set(deletes.values()) == {"manifest-list"}
    seen = observe(env, "ops", name)
    rows = plan(env, "ops", name, "snapshot-expiry", {"older-than": "1 second",
                                                      "retain-last": 10})
    assert {int(r["target"]) for r in rows if r["action"] == "expire-snapshot"} == exp["expired"]
    listing = ow.list_location(st, loc)
    row = env["pg"].wait_job(run(env, "ops", name, "snapshot-expiry",
                                 {"older-than": "1 second", "retain-last": 10}), timeout=300)
    assert row["snapshots_expired"] == 990 and row["files_deleted"] == 990
    assert set(listing) - set(ow.list_location(st, loc)) == {ow.canon(st, p) for p in deletes}
    assert observe(env, "ops", name) == seen


def test_expiry_snapshot_ids_and_clean_expired_files_false(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "file", "--snapshots", "8", "--data-files", "8")
    _, meta = ow.load(cat, "ops", name)
    victims = [meta["snapshots"][2]["snapshot-id"], meta["snapshots"][4]["snapshot-id"]]
    exp, deletes = expect_expiry(env, meta, snapshot_ids=victims)
    assert exp["expired"] == set(victims)
    listing = ow.list_location(st, loc)
    row = env["pg"].wait_job(run(env, "ops", name, "snapshot-expiry",
                                 {"snapshot-ids": victims, "clean-expired-files": False}))
    mloc2, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == snapshot_ids(meta) - set(victims)
    # without clean-expired-files nothing is deleted (the new metadata file is added)
    assert set(ow.list_location(st, loc)) == set(listing) | {ow.canon(st, mloc2)}
    assert row["snapshots_expired"] == 2 and row["files_deleted"] == 0


def test_expiry_refused_when_gc_disabled(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "file", "--snapshots", "5", "--data-files", "5",
                               "--property", "gc.enabled=false")
    mloc, meta = ow.load(cat, "ops", name)
    listing = ow.list_location(st, loc)
    options = {"older-than": "1 second", "retain-last": 1}
    try:
        jid = run(env, "ops", name, "snapshot-expiry", options)
    except psycopg2.Error as e:           # refused when the job is requested
        assert "gc.enabled" in str(e), str(e)
    else:                                 # or by the job, which then changes nothing
        row = env["pg"].wait_job(jid, ("failed", "skipped"))
        assert "gc.enabled" in (row["last_error"] or "") + (row["reason"] or ""), row
        assert row["snapshots_expired"] in (0, None) and row["files_deleted"] in (0, None)
    assert ow.load(cat, "ops", name)[0] == mloc
    assert ow.list_location(st, loc) == listing


@REAL_UNIT
@pytest.mark.parametrize("name", REAL)
def test_expiry_real_fixture(env, name):
    cat, st = env["catalog"], env["st"]
    ns = world.REAL_NAMESPACE
    mloc, meta = ow.load(cat, ns, name)
    cutoff = time.time()
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(cutoff * 1000), retain_last=1)
    seen = observe(env, ns, name, rows=name in REAL_ROWS)
    listing = ow.list_location(st, meta["location"])
    present = {p for p in deletes if st.exists(p)}
    options = {"older-than": ts_text(env, cutoff), "retain-last": 1}
    rows = plan(env, ns, name, "snapshot-expiry", options)
    assert {int(r["target"]) for r in rows if r["action"] == "expire-snapshot"} == exp["expired"]
    assert {r["target"] for r in rows if r["action"] == "delete-file"} == \
        {ow.canon(st, p) for p in present}
    row = env["pg"].wait_job(run(env, ns, name, "snapshot-expiry", options),
                             DONE if not exp["expired"] else ("succeeded",))
    mloc2, meta2 = ow.load(cat, ns, name)
    assert snapshot_ids(meta2) == exp["retained"]
    gone = set(listing) - set(ow.list_location(st, meta["location"]))
    assert gone == {ow.canon(st, p) for p in present}
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    assert observe(env, ns, name, rows=name in REAL_ROWS) == seen
    assert (row["snapshots_expired"] or 0) == len(exp["expired"])


# ---------------------------------------------------------------------------
# orphan cleanup
# ---------------------------------------------------------------------------

def orphan_world(env, where, old_age=10 * DAY):
    """Table t and its prefix neighbour t2 (a table too), every file of
    both old; old orphans planted in t (data/, metadata/, a nested
    directory), a young one; returns what a test needs."""
    st, s3 = env["st"], env["s3"]
    b = base(env, where)
    loc, name, res = new_table(env, where, "--snapshots", "4", "--data-files", "8",
                               "--files-per-manifest", "2", "--stats-files", "2",
                               "--version-hint", loc=b + "/t")
    _, name2, _ = new_table(env, where, "--data-files", "3", loc=b + "/t2")
    old = time.time() - old_age
    ow.age_tree(st, loc, old, s3)
    ow.age_tree(st, b + "/t2", old, s3)
    orphans = [ow.plant(st, loc + p, mtime=old, s3server=s3) for p in
               ("/data/orphan-1.parquet", "/data/a/b/orphan-2.parquet",
                "/metadata/orphan-3.avro", "/metadata/00099-orphan.metadata.json",
                "/stray.txt")]
    young = ow.plant(st, loc + "/data/young.parquet", s3server=s3)
    return dict(loc=loc, name=name, t2=b + "/t2", name2=name2, orphans=orphans, young=young)


@pytest.mark.parametrize("where", ["file", "s3"])
def test_orphan_cleanup_deletes_exactly_old_orphans(env, where):
    cat, st = env["catalog"], env["st"]
    w = orphan_world(env, where)
    mloc, meta = ow.load(cat, "ops", w["name"])
    listing = ow.list_location(st, w["loc"])
    neighbour = ow.list_location(st, w["t2"])
    expected = ow.expected_orphans(st, meta, mloc, listing, time.time() - 3 * DAY)
    assert expected == {ow.canon(st, p) for p in w["orphans"]}
    seen = observe(env, "ops", w["name"])

    rows = plan(env, "ops", w["name"], "orphan-cleanup")
    assert ow.list_location(st, w["loc"]) == listing
    dels = [r for r in rows if r["action"] == "delete-file"]
    assert {ow.canon(st, r["target"]) for r in dels} == expected
    for r in dels:
        size, mtime = listing[ow.canon(st, r["target"])]
        assert r["detail"]["kind"] == "orphan" and r["detail"]["size"] == size
        assert abs(r["modified"] - mtime) < 2, (r, mtime)
    assert not [r for r in rows if r["action"] == "commit"]      # nothing to commit

    jid = run(env, "ops", w["name"], "orphan-cleanup")
    row = env["pg"].wait_job(jid)
    after = ow.list_location(st, w["loc"])
    assert set(listing) - set(after) == expected
    assert set(after) == set(listing) - expected                  # nothing else changed
    assert ow.list_location(st, w["t2"]) == neighbour
    assert ow.canon(st, w["young"]) in after
    assert ow.canon(st, w["loc"] + "/metadata/version-hint.text") in after
    assert ow.load(cat, "ops", w["name"])[0] == mloc
    assert observe(env, "ops", w["name"]) == seen
    assert (row["orphans_found"], row["files_deleted"]) == (len(expected), len(expected))
    assert row["bytes_deleted"] == sum(listing[u][0] for u in expected)
    # a second run finds nothing
    row = env["pg"].wait_job(run(env, "ops", w["name"], "orphan-cleanup"), DONE)
    assert (row["orphans_found"] or 0, row["files_deleted"] or 0) == (0, 0)


@pytest.mark.parametrize("where", ["file", "s3"])
def test_orphan_cleanup_absolute_older_than_needs_force(env, where):
    cat, st, s3 = env["catalog"], env["st"], env["s3"]
    loc, name, res = new_table(env, where, "--data-files", "4")
    ow.age_tree(st, loc, time.time() - 4 * 3600, s3)
    two_hours = [ow.plant(st, loc + "/data/two-hours-%d.parquet" % i,
                          mtime=time.time() - 2 * 3600, s3server=s3) for i in range(2)]
    fresh = ow.plant(st, loc + "/data/fresh.parquet", s3server=s3)
    cutoff = time.time() - 3600
    options = {"older-than": ts_text(env, cutoff)}
    n = job_count(env)
    e = env["pg"].query_error("SELECT tms.run_operation(%s, 'ops', %s, 'orphan-cleanup',"
                              " %s::jsonb)", (env["server"], name, json.dumps(options)))
    assert e.pgcode == "22023" and job_count(env) == n
    mloc, meta = ow.load(cat, "ops", name)
    listing = ow.list_location(st, loc)
    expected = ow.expected_orphans(st, meta, mloc, listing, cutoff)
    assert expected == {ow.canon(st, p) for p in two_hours}
    row = env["pg"].wait_job(run(env, "ops", name, "orphan-cleanup", dict(options, force=True)))
    assert set(listing) - set(ow.list_location(st, loc)) == expected
    assert st.exists(fresh) and row["files_deleted"] == 2


def test_orphan_cleanup_refused_when_gc_disabled(env):
    """gc.enabled=false: the location may hold files of other tables, and
    Iceberg's DeleteOrphanFiles refuses such a table.  The old cleanup
    deleted an old unreachable file below it; now the job fails naming the
    property (55000) and deletes nothing."""
    st, s3 = env["st"], env["s3"]
    loc, name, res = new_table(env, "file", "--data-files", "3",
                               "--property", "gc.enabled=false")
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, s3)
    stray = ow.plant(st, loc + "/data/other-table-file.parquet", mtime=old, s3server=s3)
    listing = ow.list_location(st, loc)
    row = env["pg"].wait_job(run(env, "ops", name, "orphan-cleanup"), ("failed",))
    assert "gc.enabled" in row["last_error"], row
    assert (row["files_deleted"] or 0) == 0
    assert st.exists(stray) and ow.list_location(st, loc) == listing


def test_orphan_cleanup_location_option(env):
    st = env["st"]
    w = orphan_world(env, "file")
    listing = ow.list_location(st, w["loc"])
    row = env["pg"].wait_job(run(env, "ops", w["name"], "orphan-cleanup",
                                 {"location": w["loc"] + "/data"}))
    gone = set(listing) - set(ow.list_location(st, w["loc"]))
    assert gone == {ow.canon(st, p) for p in w["orphans"] if "/data/" in p}
    assert row["files_deleted"] == 2


@REAL_UNIT
@pytest.mark.parametrize("name", REAL)
def test_orphan_cleanup_real_fixture(env, name):
    """Everything of the fixture old, an old orphan planted: exactly the
    unreachable old files go (the planted one, and whatever the fixture's
    writer left unreferenced); every file the metadata reaches stays."""
    cat, st, s3 = env["catalog"], env["st"], env["s3"]
    ns = world.REAL_NAMESPACE
    mloc, meta = ow.load(cat, ns, name)
    loc = meta["location"].rstrip("/")
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, s3)
    orphan = ow.plant(st, loc + "/data/orphan-%s.parquet" % uuid.uuid4().hex[:6],
                      mtime=old, s3server=s3)
    listing = ow.list_location(st, loc)
    expected = ow.expected_orphans(st, meta, mloc, listing, time.time() - 3 * DAY)
    assert ow.canon(st, orphan) in expected
    seen = observe(env, ns, name, rows=name in REAL_ROWS)
    rows = plan(env, ns, name, "orphan-cleanup")
    assert {ow.canon(st, r["target"]) for r in rows if r["action"] == "delete-file"} == expected
    row = env["pg"].wait_job(run(env, ns, name, "orphan-cleanup"))
    after = set(ow.list_location(st, loc))
    assert set(listing) - after == expected
    assert ow.reachable(st, meta, mloc) & set(listing) <= after
    assert observe(env, ns, name, rows=name in REAL_ROWS) == seen
    assert row["files_deleted"] == len(expected)


# ---------------------------------------------------------------------------
# manifest rewrite
# ---------------------------------------------------------------------------

def rewrite_world(env, where, files=1000):
    """One snapshot of `files` data files, one manifest each, 4 partitions."""
    return new_table(env, where, "--data-files", str(files), "--files-per-manifest", "1",
                     "--partitions", "4", "--codec", "null")


@REAL_UNIT
@pytest.mark.parametrize("where,n", [("file", 1000), ("s3", 200)])
def test_rewrite_small_manifests(env, where, n):
    """1,000 manifests of one entry each on local files; 200 through the
    S3 test server (the same code path, its every object a PUT and GETs
    of s3rver: a thousand cost two minutes of the suite)."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = rewrite_world(env, where, n)
    mloc, meta = ow.load(cat, "ops", name)
    cur = ow.snapshot(meta, meta["current-snapshot-id"])
    old_manifests = {r["manifest_path"] for r in ow.manifest_records(st, cur)}
    assert len(old_manifests) == n
    live = ow.live_files(st, meta)
    seen = observe(env, "ops", name)

    rows = plan(env, "ops", name, "manifest-rewrite")
    assert ow.load(cat, "ops", name)[0] == mloc
    replaced = [r for r in rows if r["action"] == "replace-manifest"]
    written = [r for r in rows if r["action"] == "write-manifest"]
    assert {r["target"] for r in replaced} == old_manifests
    assert sum(r["detail"]["entries"] for r in replaced) == n
    assert all(r["detail"]["content"] in (0, "data") for r in replaced)
    assert 1 <= len(written) <= 4
    assert sum(r["detail"]["entries"] for r in written) == n
    assert sum(r["detail"]["manifests"] for r in written) <= 8
    assert [r["target"] for r in rows if r["action"] == "commit"] == ["replace"]

    jid = run(env, "ops", name, "manifest-rewrite")
    row = env["pg"].wait_job(jid)
    mloc2, meta2 = ow.load(cat, "ops", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new.get("parent-snapshot-id") == meta["current-snapshot-id"]
    new_manifests = [r["manifest_path"] for r in ow.manifest_records(st, new)]
    assert 1 <= len(new_manifests) <= sum(r["detail"]["manifests"] for r in written)
    assert not set(new_manifests) & old_manifests
    assert ow.live_set(ow.live_files(st, meta2)) == ow.live_set(live)
    for m in new_manifests:                            # rewritten entries are EXISTING
        assert {e["status"] for e in ow.manifest_entries(st, m)} == {0}
    assert observe(env, "ops", name) == seen
    # the old manifests are still there: the previous snapshot reads them
    assert all(st.exists(p) for p in old_manifests)
    assert (row["manifests_rewritten"], row["manifests_added"]) == (n, len(new_manifests))
    assert row["before_snapshot_id"] == meta["current-snapshot-id"]
    assert row["after_snapshot_id"] == new["snapshot-id"]
    m = metrics(env, jid)
    assert m["before"][1]["manifests"] == n
    assert m["after"][1]["manifests"] == len(new_manifests)
    assert m["before"][1]["dataFiles"] == m["after"][1]["dataFiles"] == n
    assert m["before"][1]["dataFilesSize"] == m["after"][1]["dataFilesSize"]


def test_rewrite_with_concurrent_writer_retries_and_loses_nothing(env):
    """A writer appends between the rewrite's read and its commit (the
    catalog's interpose fault on the rewrite's commit): the commit gets
    409, the job retries on top of the append, every entry -- the
    appended one too -- is live after it."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = rewrite_world(env, "file")
    _, meta = ow.load(cat, "ops", name)
    live = ow.live_files(st, meta)
    extra = {"path": loc + "/data/category=p2/concurrent.parquet", "records": 42, "size": 4242,
             "partition": {"category": "p2"}}
    body, _ = ow.append_commit(st, meta, [extra], seed=11)
    appended = body["updates"][0]["snapshot"]["snapshot-id"]
    cat.reset_requests()
    cat.fault(r"/namespaces/ops/tables/%s$" % name, action="interpose", method="POST",
              commits=[body])
    row = env["pg"].wait_job(run(env, "ops", name, "manifest-rewrite"))
    log = [(r["method"], r["status"], r["fault"])
           for r in cat.requests(r"/tables/%s$" % name)["requests"] if r["method"] == "POST"]
    assert log[:2] == [("POST", 200, "interposed"), ("POST", 409, "interpose")], log
    assert log[-1] == ("POST", 200, None) and len(log) >= 3, log
    _, meta2 = ow.load(cat, "ops", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new["parent-snapshot-id"] == appended
    after = ow.live_files(st, meta2)
    assert set(after) == set(live) | {extra["path"]}
    assert ow.live_set({p: f for p, f in after.items() if p in live}) == ow.live_set(live)
    assert after[extra["path"]]["records"] == 42
    assert row["after_snapshot_id"] == new["snapshot-id"]
    assert row["before_snapshot_id"] in (meta["current-snapshot-id"], appended)
    ib = ow.icebird(ow.load(cat, "ops", name)[0], env["s3"].endpoint, env["file_root"])
    assert ib["data_files"] == 1001 and ib["records"] == res["records"] + 42


def test_rewrite_after_a_commit_to_another_branch_retries(env):
    """A writer commits to another branch between the rewrite's read and
    its commit: main's requirement still holds, but the catalog refuses
    the rewrite's snapshot with 400, its sequence number no longer above
    the table's last one (Iceberg's TableMetadata.Builder.addSnapshot,
    https://github.com/apache/iceberg/issues/15001).  Nothing landed and
    the table moved: tms plans again on it, as after a 409, and succeeds
    (it failed the job; found by the data-safety campaign, history 20217
    of `make soak`, with the writer on a branch)."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = rewrite_world(env, "file")
    _, meta = ow.load(cat, "ops", name)
    assert meta["format-version"] == 2
    live = ow.live_files(st, meta)
    extra = {"path": loc + "/data/category=p2/on-a-branch.parquet", "records": 42, "size": 4242,
             "partition": {"category": "p2"}}
    body, _ = ow.append_commit(st, meta, [extra], seed=12)
    body["requirements"] = [{"type": "assert-ref-snapshot-id", "ref": "side",
                             "snapshot-id": None}]
    body["updates"][1]["ref-name"] = "side"
    side = body["updates"][0]["snapshot"]["snapshot-id"]
    cat.reset_requests()
    cat.fault(r"/namespaces/ops/tables/%s$" % name, action="interpose", method="POST",
              commits=[body])
    row = env["pg"].wait_job(run(env, "ops", name, "manifest-rewrite"))
    log = [(r["status"], r["fault"])
           for r in cat.requests(r"/tables/%s$" % name)["requests"] if r["method"] == "POST"]
    assert log[:2] == [(200, "interposed"), (400, "interpose")], log
    assert log[-1] == (200, None) and len(log) == 3, log
    _, meta2 = ow.load(cat, "ops", name)
    new = ow.snapshot(meta2, meta2["current-snapshot-id"])
    assert new["summary"]["operation"] == "replace"
    assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
    assert new["sequence-number"] > ow.snapshot(meta2, side)["sequence-number"]
    assert meta2["refs"]["side"]["snapshot-id"] == side
    assert ow.live_set(ow.live_files(st, meta2)) == ow.live_set(live)
    assert row["after_snapshot_id"] == new["snapshot-id"]


def test_rewrite_commit_answer_lost_retried_with_same_idempotency_key(env):
    """The catalog advertises idempotency-key-lifetime; the rewrite's
    commit is applied but its answer is lost (503).  tms sends the commit
    again with the same Idempotency-Key, the catalog answers with the first
    outcome, the job succeeds and the table has exactly one new snapshot."""
    cat, pg = env["catalog"], env["pg"]
    srv = "opscat_idem"
    pg.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                 uri '%s', relative_path_root '%s', request_timeout '5s', retries '2',
                 allowed_locations 'file://%s/');
               CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
            % (srv, cat.uri, env["file_root"], env["file_root"], srv))
    cat.set_idempotency("PT30M")
    try:
        loc, name, res = new_table(env, "file", "--data-files", "20",
                                   "--files-per-manifest", "1", "--codec", "null")
        _, meta = ow.load(cat, "ops", name)
        cat.reset_requests()
        cat.fault(r"/namespaces/ops/tables/%s$" % name, action="lost", status=503,
                  method="POST")
        jid = q(env, "SELECT tms.run_operation(%s, 'ops', %s, 'manifest-rewrite', '{}', 'local')",
                (srv, name))[0][0]
        row = env["pg"].wait_job(jid)
        posts = [r for r in cat.requests(r"/tables/%s$" % name)["requests"]
                 if r["method"] == "POST"]
        assert [(r["status"], r["fault"]) for r in posts] == [
            (503, "lost"), (200, "idempotent-replay")], posts
        assert posts[0]["idempotency_key"] and \
            posts[0]["idempotency_key"] == posts[1]["idempotency_key"]
        _, meta2 = ow.load(cat, "ops", name)
        assert len(meta2["snapshots"]) == len(meta["snapshots"]) + 1
        new = ow.snapshot(meta2, meta2["current-snapshot-id"])
        assert new["parent-snapshot-id"] == meta["current-snapshot-id"]
        assert new["summary"]["operation"] == "replace"
        assert row["after_snapshot_id"] == new["snapshot-id"]
        assert ow.live_set(ow.live_files(env["st"], meta2)) == \
            ow.live_set(ow.live_files(env["st"], meta))
    finally:
        cat.clear_faults()
        cat.clear_idempotency()
        pg.psql("DROP SERVER %s CASCADE" % srv)


@REAL_UNIT
@pytest.mark.parametrize("name", REAL)
def test_rewrite_real_fixture(env, name):
    cat, st = env["catalog"], env["st"]
    ns = world.REAL_NAMESPACE
    _, meta = ow.load(cat, ns, name)
    live = ow.live_files(st, meta)
    seen = observe(env, ns, name, rows=name in REAL_ROWS)
    row = env["pg"].wait_job(run(env, ns, name, "manifest-rewrite"), DONE)
    _, meta2 = ow.load(cat, ns, name)
    assert ow.live_set(ow.live_files(st, meta2)) == ow.live_set(live)
    assert observe(env, ns, name, rows=name in REAL_ROWS) == seen
    assert meta2["format-version"] == meta["format-version"]
    if row["manifests_rewritten"] and row["state"] == "succeeded":
        assert meta2["current-snapshot-id"] != meta["current-snapshot-id"]
    else:                                       # nothing worth rewriting: no commit
        assert meta2["current-snapshot-id"] == meta["current-snapshot-id"]


# ---------------------------------------------------------------------------
# policies
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["snapshot-expiry", "orphan-cleanup", "manifest-rewrite"])
def test_policy_runs_operation_end_to_end(env, op):
    cat, st, s3 = env["catalog"], env["st"], env["s3"]
    ns = "pol_%s" % uuid.uuid4().hex[:6]
    cat.create_namespace(ns)
    loc, name, res = new_table(env, "file", "--snapshots", "6", "--data-files", "60",
                               "--files-per-manifest", "2", ns=ns)
    mloc, meta = ow.load(cat, ns, name)
    live = ow.live_files(st, meta)
    counters, options = {"commits-added": 1}, {}
    orphan = None
    if op == "snapshot-expiry":
        options = {"older-than": "1 second", "retain-last": 2}
    elif op == "orphan-cleanup":
        counters = {"time-elapsed": 1}
        old = time.time() - 10 * DAY
        ow.age_tree(st, loc, old, s3)
        orphan = ow.plant(st, loc + "/data/policy-orphan.parquet", mtime=old, s3server=s3)
    tag = uuid.uuid4().hex[:6]
    q(env, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s,"
           " table_pattern => %s)", ("g-" + tag, env["server"], ns, name))
    q(env, "SELECT tms.create_policy(%s, %s)", ("p-" + tag, "g-" + tag))
    rule = q(env, "SELECT tms.add_rule(%s, %s, 'local', %s::jsonb, 'true', 'catch-up',"
                  " %s::jsonb)", ("p-" + tag, op, json.dumps(counters),
                                  json.dumps(options)))[0][0]
    try:
        wait_for(lambda: q(env, "SELECT count(*) FROM tms.maintenance_jobs WHERE rule_id = %s"
                                "   AND state IN ('succeeded', 'failed')", (rule,))[0][0] > 0,
                 timeout=120, what="the policy's %s job" % op)
        jid = q(env, "SELECT min(id) FROM tms.maintenance_jobs WHERE rule_id = %s", (rule,))[0][0]
        row = env["pg"].wait_job(jid)
        assert (row["policy"], row["operation"], row["engine"]) == ("p-" + tag, op, "local")
    finally:
        q(env, "SELECT tms.drop_policy(%s)", ("p-" + tag,))
    _, meta2 = ow.load(cat, ns, name)
    if op == "snapshot-expiry":
        assert len(meta2["snapshots"]) == 2 and row["snapshots_expired"] == 4
    elif op == "orphan-cleanup":
        assert not st.exists(orphan) and row["files_deleted"] == 1
    else:
        cur = ow.snapshot(meta2, meta2["current-snapshot-id"])
        assert len(ow.manifest_records(st, cur)) < 30 and row["manifests_rewritten"] == 30
    assert ow.live_set(ow.live_files(st, meta2)) == ow.live_set(live)


# ---------------------------------------------------------------------------
# a commit whose answer never reaches the worker (last: the crash restarts
# the server under the catalog's pointer connections)
# ---------------------------------------------------------------------------

def test_late_commit_and_sigkill_resume_deletes_exactly_the_right_files(env):
    """The catalog applies the expiry's commit but holds its answer; the
    worker is SIGKILLed while it waits (after the commit, before any
    delete).  The job resumes after the crash restart, recognises that its
    commit landed, commits nothing more and deletes exactly the files the
    expired snapshots alone reached (computed here from the metadata
    before the commit)."""
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "file", "--snapshots", "12", "--data-files", "24",
                               "--files-per-manifest", "1", "--stats-files", "4")
    _, meta = ow.load(cat, "ops", name)
    cur = ow.snapshot(meta, meta["current-snapshot-id"])
    victim = [r["manifest_path"] for r in ow.manifest_records(st, cur)][-1]
    body, _ = ow.delete_manifests_commit(st, meta, [victim], seed=13)
    ow.commit(cat, "ops", name, body)
    mloc, meta = ow.load(cat, "ops", name)
    cutoff = time.time()
    exp, deletes = expect_expiry(env, meta, older_than_ms=int(cutoff * 1000), retain_last=1)
    assert "data" in deletes.values() and "manifest-list" in deletes.values()
    seen = observe(env, "ops", name)
    listing = ow.list_location(st, loc)
    cat.reset_requests()
    fid = cat.fault(r"/namespaces/ops/tables/%s$" % name, action="late", method="POST",
                    seconds=30)
    jid = run(env, "ops", name, "snapshot-expiry",
              {"older-than": ts_text(env, cutoff), "retain-last": 1})
    # the commit took effect (the pointer moved) and its answer is held
    wait_for(lambda: fid not in cat.armed_faults() and ow.load(cat, "ops", name)[0] != mloc,
             timeout=60, what="the commit to land")
    pid = worker_pid(env, jid)
    assert pid, env["pg"].job(jid)
    assert set(ow.list_location(st, loc)) >= set(listing)      # nothing deleted yet
    os.kill(pid, signal.SIGKILL)                               # PostgreSQL crash-restarts
    wait_for(lambda: env["pg"].psql("SELECT 1", check=False) == "1", timeout=60,
             what="the restart")
    # the catalog's pooled connections died with the restart: each answers
    # one 503 before it is replaced
    wait_for(lambda: cat.raw("GET", "/v1/%s/namespaces/ops/tables/%s"
                             % (cat.prefix, name))[0] == 200, timeout=60,
             what="the catalog to reconnect")
    row = env["pg"].wait_job(jid, timeout=180)
    assert row["attempts"] >= 1, row            # the killed run is one
    _, meta2 = ow.load(cat, "ops", name)
    assert snapshot_ids(meta2) == exp["retained"]
    after = ow.list_location(st, loc)
    assert set(listing) - set(after) == {ow.canon(st, p) for p in deletes}
    assert row["files_deleted"] == len(deletes)
    # one commit only: the resumed job did not expire anything again
    posts = [r for r in cat.requests(r"/tables/%s$" % name)["requests"]
             if r["method"] == "POST" and r["status"] == 200]
    assert len(posts) == 1, posts
    assert observe(env, "ops", name) == seen
