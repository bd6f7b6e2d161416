"""
test_purge_async.py -- tms.purge_table() end to end: the job's first step
drops the catalog entry, the workers delete every reachable file (file:// and s3rver, real
fixture tables and synthetic ones) and nothing else; retries, FAILED at the
limit, crash recovery, one executor per job, no transaction held while
deleting, the tombstone (409 through the test catalog), latency; the
transaction rules (a rolled-back purge_table, a drop whose answer comes
after the timeout, a drop that failed, a failing run_task through psql).

The module runs its own cluster (short heartbeat, retry and lease times)
whose database also holds the test catalog's JDBC pointer tables, so the
tombstone trigger can be attached to them.

Run: /usr/bin/python3 -m pytest test/integration/test_purge_async.py
"""

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import psycopg2
import psycopg2.errorcodes
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "catalog"))

import world  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

SYNTH = os.path.join(world.FIXTURES_DIR, "synth.py")
SETTINGS = dict(FAST_WORKERS, **{"tms.purge_max_attempts": "3"})
PG_UID = pwd.getpwnam("postgres").pw_uid


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------

pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    srv = "purgecat"
    w = tms_world("purge", settings=SETTINGS, catalog={}, real=True, sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', relative_path_root '%s', request_timeout '5s', retries '0',
             s3_vended_endpoint 'true',
             allowed_locations 'file://%s/, s3://warehouse/, s3://hyperparam-iceberg/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
        % (srv, w["catalog"].uri, w["file_root"], w["file_root"], srv)])
    return dict(w, server=srv)


def give_to_server(path):
    """Files the tests write belong to root; the server deletes them."""
    for d, dirs, files in os.walk(path):
        os.chown(d, PG_UID, -1)
        os.chmod(d, 0o755)
        for f in files:
            os.chown(os.path.join(d, f), PG_UID, -1)


def synth(*args):
    r = subprocess.run([world.PYTHON, SYNTH, "--list-files"] + list(args),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def purge(env, ns, name):
    t0 = time.monotonic()
    job = q(env, "SELECT tms.purge_table(%s, %s, %s)", (env["server"], ns, name))[0][0]
    return job, time.monotonic() - t0


def job_row(env, job):
    rows = q(env, "SELECT state, attempts, last_error, files_deleted, files_skipped,"
             " skipped_example, bytes_freed FROM tms.purge_jobs WHERE id = %s", (job,))
    return rows[0] if rows else None


def wait_state(env, job, states=("SUCCEEDED",), timeout=60):
    wait_for(lambda: job_row(env, job)[0] in states, timeout=timeout,
             what="job %s to reach %s (now %r)" % (job, states, q(env, "SELECT * FROM tms.purge_jobs WHERE id = %s", (job,))))
    return job_row(env, job)


def file_table(env, *args):
    loc = os.path.join(env["file_root"], "t", uuid.uuid4().hex)
    out = synth("--out", loc, *args)
    give_to_server(loc)
    name = "t_%s" % uuid.uuid4().hex[:8]
    env["catalog"].register("ns", name, out["metadata_location"])
    return loc, name, out


def local(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


def set_conf(env, **kv):
    """Set (None: reset) tms.<name> settings and await the reload."""
    env["pg"].set_conf({"tms." + k: v for k, v in kv.items()})


# ---------------------------------------------------------------------------
# deleting exactly the table's files
# ---------------------------------------------------------------------------

def test_file_table_purged_neighbours_kept(env):
    loc, name, out = file_table(env, "--snapshots", "3", "--data-files", "9",
                                "--files-per-manifest", "2", "--pos-deletes", "2",
                                "--eq-deletes", "1", "--partitioned", "--stats-files", "2")
    files = [local(f) for f in out["files"]]
    # a neighbour inside the location, a neighbour table sharing the prefix,
    # and a file outside the location that the metadata does not reach
    inside = os.path.join(loc, "data", "not-in-the-table.parquet")
    sibling = loc + "_sibling"
    os.makedirs(sibling)
    sibling_file = os.path.join(sibling, "data.parquet")
    for p in (inside, sibling_file):
        with open(p, "w") as f:
            f.write("keep")
    give_to_server(loc)
    give_to_server(sibling)
    assert all(os.path.exists(p) for p in files)

    job, took = purge(env, "ns", name)
    row = wait_state(env, job)
    # the job's first step dropped it from the catalog
    status, _, _ = env["catalog"].raw("GET", "/v1/%s/namespaces/ns/tables/%s"
                                      % (env["catalog"].prefix, name))
    assert status == 404
    assert q(env, "SELECT dropped_at IS NOT NULL FROM tms.purge_jobs WHERE id = %s",
             (job,)) == [(True,)]
    left = [p for p in files if os.path.exists(p)]
    assert not left, q(env, "SELECT files_skipped, skipped_example, table_location, files_deleted FROM tms.purge_jobs WHERE id = %s", (job,))
    assert os.path.exists(inside) and os.path.exists(sibling_file)
    assert row[3] >= len(files) and row[4] == 0, row
    assert row[6] > 0                       # bytes freed
    print("purge_table returned in %.1f ms" % (took * 1000))


def test_s3_table_purged_credentials_captured_then_deleted(env):
    s3, cat = env["s3"], env["catalog"]
    prefix = "tbl/%s" % uuid.uuid4().hex
    out = synth("--out", "s3://warehouse/" + prefix, "--snapshots", "2", "--data-files", "7",
                "--files-per-manifest", "3", "--s3-endpoint", s3.endpoint)
    client = s3.client()
    client.put("warehouse", prefix + "/data/neighbour.parquet", b"keep me")
    client.put("warehouse", prefix + "x/data/sibling.parquet", b"keep me too")
    name = "s3_%s" % uuid.uuid4().hex[:8]
    cat.register("ns", name, out["metadata_location"])
    set_conf(env, enabled="off")
    try:
        job, _ = purge(env, "ns", name)
        storage = q(env, "SELECT storage FROM tms.iceberg_cleanup_job WHERE id = %s", (job,))[0][0]
        assert storage["credentials"] == "vended by the catalog"
        assert "S3RVER" not in json.dumps(storage)          # no secret in the job row
        assert q(env, "SELECT count(*) FROM tms.iceberg_cleanup_credentials"
                 " WHERE job_id = %s", (job,))[0][0] == 1
    finally:
        set_conf(env, enabled=None)
    wait_state(env, job)
    assert client.list("warehouse", prefix) == [prefix + "/data/neighbour.parquet",
                                                prefix + "x/data/sibling.parquet"]
    assert q(env, "SELECT count(*) FROM tms.iceberg_cleanup_credentials"
             " WHERE job_id = %s", (job,))[0][0] == 0


def test_timeout_in_the_purge_check_then_purge_again_on_the_same_backend(env):
    """A statement timeout ends tms.purge_table while its check reads the
    metadata file through the S3 gate (delayed): the error frees the io
    memory of the call (the loaded table, the storage opened for the check,
    in io scopes) with no PG_FINALLY.  The same backend then purges the
    table: anything of the failed call left reachable (a dangling storage
    or allocator) would fail or crash it.  No scope context is left."""
    s3, cat, pg = env["s3"], env["catalog"], env["pg"]
    prefix = "tbl/%s" % uuid.uuid4().hex
    out = synth("--out", "s3://warehouse/" + prefix, "--snapshots", "2", "--data-files", "3",
                "--s3-endpoint", s3.endpoint)
    name = "s3t_%s" % uuid.uuid4().hex[:8]
    cat.register("ns", name, out["metadata_location"])
    gate = world.S3Gate(s3)
    conn = pg.connect()
    try:
        cat.set_table_config("ns", name, {
            "s3.endpoint": gate.endpoint, "s3.access-key-id": s3.access_key_id,
            "s3.secret-access-key": s3.secret_access_key, "s3.path-style-access": "true",
            "client.region": s3.region})
        gate.delay(60, count=1, scope="all")
        pg.query("SET statement_timeout = '2s'", conn=conn)
        e = pg.query_error("SELECT tms.purge_table(%s, 'ns', %s)", (env["server"], name),
                           conn=conn)
        assert e.pgcode == psycopg2.errorcodes.QUERY_CANCELED, e.diag.message_primary
        pg.query("RESET statement_timeout", conn=conn)
        gate.undelay()
        meta_key = out["metadata_location"].split("/", 3)[3]
        wait_for(lambda: any(r["method"] == "GET" and r["path"].endswith(meta_key)
                             for r in gate.log()),
                 timeout=30, what="the delayed metadata read to reach the gate")
        assert q(env, "SELECT count(*) FROM tms.iceberg_cleanup_job WHERE table_name = %s",
                 (name,))[0][0] == 0, "no job for the failed call"
        assert pg.query("SELECT count(*) FROM pg_backend_memory_contexts"
                        " WHERE name = 'tms io scope'", conn=conn)[0][0] == 0
        job = pg.query("SELECT tms.purge_table(%s, 'ns', %s)", (env["server"], name),
                       conn=conn)[0][0]
        assert pg.query("SELECT count(*) FROM pg_backend_memory_contexts"
                        " WHERE name = 'tms io scope'", conn=conn)[0][0] == 0
        assert wait_state(env, job)[0] == "SUCCEEDED"
        assert s3.client().list("warehouse", prefix) == []
    finally:
        conn.close()
        cat.clear_table_configs()
        gate.stop()


@pytest.mark.parametrize("name", ["spark_v2_mor_posdeletes",
                                  "spark_v2_partitioned_bucket_identity",
                                  "java_v2_partitioned_eqdeletes",
                                  "pyiceberg_v1_overwrite",
                                  "pyiceberg_v2_partitioned_nullcodec",
                                  "spark_v1_gzip_metadata",
                                  "spark_v1_legacy_manifests_field"])
def test_real_fixture_table(env, name):
    """Every file Java's dropTableData would delete (the test world's own
    walk) is gone; every other file of the fixture's tree is still there."""
    import storage as storage_mod
    import tablemeta

    info = env["real"][name]
    st = storage_mod.Storage(s3=env["s3"].config(), file_root=env["file_root"])
    meta = env["catalog"].load_table(world.REAL_NAMESPACE, name)["metadata"]
    reach = tablemeta.reachable_files(st, meta, info["metadata_location"])
    present = [p for p in reach if st.exists(p)]
    assert present

    def tree():
        if info["storage"] == "s3":
            bucket, key = storage_mod.split_s3(info["resolves_to"])
            return {"s3://%s/%s" % (bucket, k) for k in env["s3"].client().list(bucket, key)}
        return {os.path.join(d, f) for d, _, fs in os.walk(info["resolves_to"]) for f in fs}

    def resolved(p):
        if p.startswith(("s3://", "s3a://", "s3n://")):
            return "s3://" + p.split("://", 1)[1]
        return st.local_path(p)

    before = tree()
    job, _ = purge(env, world.REAL_NAMESPACE, name)
    row = wait_state(env, job)
    assert [p for p in present if st.exists(p)] == [], row
    expected_left = before - {resolved(p) for p in reach}
    assert tree() == expected_left


def test_missing_table_is_an_error_and_no_job(env):
    loc, name, out = file_table(env, "--data-files", "2")
    job, _ = purge(env, "ns", name)
    # the drop is the job's first step, after the caller's commit: until
    # it ran, a second purge finds the first one in flight (55006)
    wait_state(env, job)
    with pytest.raises(psycopg2.Error) as ei:
        purge(env, "ns", name)
    assert ei.value.pgcode == "42P01"        # undefined_table: 404 from the catalog
    assert q(env, "SELECT count(*) FROM tms.iceberg_cleanup_job WHERE table_name = %s",
             (name,))[0][0] == 1
    with pytest.raises(psycopg2.Error) as ei:
        purge(env, "ns", "never_existed")
    assert ei.value.pgcode == "42P01"


def test_drop_table_synchronous_purge(env):
    loc, name, out = file_table(env, "--data-files", "3")
    q(env, "SELECT tms.drop_table(%s, 'ns', %s, purge => true)", (env["server"], name))
    # the catalog itself deleted the files before answering
    assert not [f for f in out["files"] if os.path.exists(local(f))]


# ---------------------------------------------------------------------------
# failures
# ---------------------------------------------------------------------------

def test_failing_storage_retries_then_fails_and_tombstone_lifts(env):
    loc, name, out = file_table(env, "--data-files", "4")
    # a data directory the server may not write to: every unlink fails
    data = os.path.join(loc, "data")
    for d, _, fs in os.walk(data):
        os.chown(d, 0, -1)
    job, _ = purge(env, "ns", name)
    wait_for(lambda: (job_row(env, job)[1] or 0) >= 1, timeout=30, what="a failed attempt")
    row = job_row(env, job)
    assert row[0] in ("PENDING", "RUNNING", "FAILED")
    assert "could not delete" in row[2] and "Permission denied" in row[2], row
    row = wait_state(env, job, ("FAILED",))
    assert row[1] == 3, row                 # tms.purge_max_attempts
    # the metadata survived (it goes last), so the table could be recovered
    assert os.path.exists(local(out["metadata_location"]))
    st = q(env, "SELECT state, blocks_recreate FROM tms.purge_status(%s, 'ns', %s)",
           (env["server"], name))
    assert st == [("FAILED", False)]
    # an operator fixes the storage and re-drives the job
    give_to_server(loc)
    q(env, "SELECT tms.retry_purge(%s)", (job,))
    wait_state(env, job)
    assert not [f for f in out["files"] if os.path.exists(local(f))]


def test_corrupt_metadata_fails_at_once(env):
    loc, name, out = file_table(env, "--data-files", "2")
    set_conf(env, enabled="off")
    try:
        job, _ = purge(env, "ns", name)
        with open(local(out["metadata_location"]), "w") as f:
            f.write("{ not json")
    finally:
        set_conf(env, enabled=None)
    row = wait_state(env, job, ("FAILED",))
    assert row[1] == 1 and "metadata" in row[2], row
    assert all(os.path.exists(local(f)) for f in out["files"])


def test_broken_history_fails_the_job_before_the_drop(env):
    """tms.purge_table reads the metadata file's head only (the identity
    members come first); the job parses it whole before it drops the table,
    so a history that does not parse fails the job with the table and every
    file left in place.  (A file cut short cannot be served by the test
    catalog, which parses it; test_metadata_read_identity_head covers it.)"""
    loc, name, out = file_table(env, "--data-files", "2")
    path = local(out["metadata_location"])
    with open(path) as f:
        meta = json.load(f)
    # an old snapshot no reference keeps (snapshots=refs leaves it out)
    # whose timestamp is not a number: the identity is intact
    meta["snapshots"].insert(0, dict(meta["snapshots"][0], **{
        "snapshot-id": 1, "timestamp-ms": "yesterday"}))
    meta["snapshots"][0].pop("parent-snapshot-id", None)
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
    job, _ = purge(env, "ns", name)
    row = wait_state(env, job, ("FAILED",))
    assert row[1] == 1, row
    # the job's whole parse (of the catalog's full answer, which holds the
    # file's history) refuses it before the drop
    assert "cannot read the current metadata" in row[2], row
    assert env["catalog"].load_table("ns", name)["metadata-location"] == out["metadata_location"]
    assert all(os.path.exists(local(f)) for f in out["files"])


# ---------------------------------------------------------------------------
# the tombstone
# ---------------------------------------------------------------------------

def test_tombstone_refuses_recreate_with_409_until_done(env):
    cat = env["catalog"]
    pg = env["pg"]
    pg.psql("CREATE TRIGGER tms_tombstone BEFORE INSERT ON public.iceberg_tables"
            " FOR EACH ROW EXECUTE FUNCTION tms.refuse_purging_tables('%s', '%s')"
            % (env["server"], cat.catalog_name))
    try:
        loc, name, out = file_table(env, "--data-files", "3")
        set_conf(env, enabled="off")
        try:
            job, _ = purge(env, "ns", name)
            assert q(env, "SELECT blocks_recreate FROM tms.purge_status(%s, 'ns', %s)",
                     (env["server"], name)) == [(True,)]
            # dropped by someone else before the job's own drop step: the
            # tombstone covers the name from the commit of purge_table on
            cat.request("DELETE", "namespaces/ns/tables/%s" % name, expect=204)
            copy = os.path.join(env["file_root"], "copy-%s.metadata.json" % name)
            shutil.copyfile(local(out["metadata_location"]), copy)
            status, body, _ = cat.raw("POST", "/v1/%s/namespaces/ns/register" % cat.prefix,
                                      {"name": name, "metadata-location": "file://" + copy})
            assert status == 409, body
            msg = (body if isinstance(body, dict) else json.loads(body))["error"]["message"]
            assert "purge job %d" % job in msg, msg
        finally:
            set_conf(env, enabled=None)
        wait_state(env, job)
        status, body, _ = cat.raw("POST", "/v1/%s/namespaces/ns/register" % cat.prefix,
                                  {"name": name, "metadata-location": "file://" + copy})
        assert status == 200, body
    finally:
        pg.psql("DROP TRIGGER tms_tombstone ON public.iceberg_tables")


# ---------------------------------------------------------------------------
# leases, crashes, transactions
# ---------------------------------------------------------------------------

def slow_table(env, files=1500):
    loc, name, out = file_table(env, "--data-files", str(files), "--files-per-manifest", "100")
    return loc, name, out


def test_one_executor_and_no_transaction_held(env):
    loc, name, out = slow_table(env)
    set_conf(env, purge_delete_batch_size=50, purge_batch_pause="100ms")
    try:
        job, _ = purge(env, "ns", name)
        wait_for(lambda: q(env, "SELECT running_on IS NOT NULL AND files_deleted > 0"
                           " FROM tms.purge_jobs WHERE id = %s", (job,))[0][0],
                 what="the job to run")
        # a second executor fails cleanly and changes nothing (HUDI-7503)
        e = env["pg"].query_error("CALL tms.run_task('purge', %s)", (str(job),))
        assert "is being executed by" in str(e)
        # while it deletes, the worker holds no transaction for long and no xmin
        pid = q(env, "SELECT picked_pid FROM tms.scheduled_tasks WHERE task_name = 'purge'"
                " AND task_instance = %s", (str(job),))[0][0]
        samples = []
        for _ in range(20):
            samples += q(env, "SELECT backend_xmin IS NULL, coalesce(now() - xact_start"
                         " < interval '1 second', true) FROM pg_stat_activity WHERE pid = %s",
                         (pid,))
            time.sleep(0.05)
        assert samples and all(short for _, short in samples), samples
        assert any(no_xmin for no_xmin, _ in samples), samples
    finally:
        set_conf(env, purge_delete_batch_size=None, purge_batch_pause=None)
    row = wait_state(env, job, timeout=120)
    assert row[1] == 0, row                 # one attempt, never run twice
    assert not [f for f in out["files"] if os.path.exists(local(f))]


# ---------------------------------------------------------------------------
# transactions: the drop is the job's first step
# ---------------------------------------------------------------------------

def pool(env, on):
    env["pg"].pool(on)


def fast_server(env):
    """A server on the same catalog whose requests time out after 1 s."""
    name = "fast_%s" % uuid.uuid4().hex[:6]
    env["pg"].psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                uri '%s', relative_path_root '%s', request_timeout '1s', retries '0',
                allowed_locations 'file://%s/');
              CREATE USER MAPPING FOR PUBLIC SERVER %s;"""
                   % (name, env["catalog"].uri, env["file_root"], env["file_root"], name))
    return name


def table_log(env, name):
    """(method, status, fault) of every request for the table, in order."""
    return [(r["method"], r["status"], r["fault"])
            for r in env["catalog"].requests(r"/tables/%s$" % name)["requests"]]


def test_rollback_leaves_the_table_and_no_job(env):
    """BEGIN; SELECT tms.purge_table(...); ROLLBACK.  The old purge_table
    dropped the catalog entry inside the call: the rollback left a dropped
    table and no job, every file orphaned.  Now the call only records, so
    the table is still loadable through the catalog and no job (nor task)
    exists."""
    cat = env["catalog"]
    loc, name, out = file_table(env, "--data-files", "2")
    cat.reset_requests()
    conn = env["pg"].connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT tms.purge_table(%s, 'ns', %s)", (env["server"], name))
            job = cur.fetchone()[0]
            cur.execute("SELECT state FROM tms.purge_jobs WHERE id = %s", (job,))
            assert cur.fetchall() == [("PENDING",)]
        conn.rollback()
    finally:
        conn.close()
    assert q(env, "SELECT count(*) FROM tms.iceberg_cleanup_job WHERE table_name = %s",
             (name,)) == [(0,)]
    assert q(env, "SELECT count(*) FROM tms.scheduled_tasks WHERE task_name = 'purge'"
             " AND task_instance = %s", (str(job),)) == [(0,)]
    assert cat.load_table("ns", name)["metadata-location"] == out["metadata_location"]
    assert [m for m, _, _ in table_log(env, name)] == ["GET", "GET"]   # no DELETE
    assert all(os.path.exists(local(f)) for f in out["files"])


def test_drop_landed_but_answer_late_is_resolved_by_reloading(env):
    """The catalog drops the table but its answer arrives after the
    server's request_timeout (1 s).  The old purge_table raised 08006 inside
    the caller's transaction: the job rolled back with it while the table
    was gone from the catalog, every file orphaned.  Now the job resolves
    the unknown outcome by loading the table (404: dropped), SUCCEEDS and
    deletes the files -- of the metadata location it recorded before the
    drop: the table was moved to a newer metadata file between purge_table
    and the drop, and that newer file and the snapshot only it references
    are deleted too."""
    cat = env["catalog"]
    loc = os.path.join(env["file_root"], "t", uuid.uuid4().hex)
    out = synth("--out", loc, "--snapshots", "2", "--data-files", "4")
    give_to_server(loc)
    first = [f for f in out["files"] if "/metadata/00000-" in f][0]
    newest = out["metadata_location"]
    name = "late_%s" % uuid.uuid4().hex[:8]
    cat.register("ns", name, first)
    srv = fast_server(env)
    pool(env, False)
    try:
        job, _ = purge(dict(env, server=srv), "ns", name)
        assert q(env, "SELECT metadata_location FROM tms.purge_jobs WHERE id = %s",
                 (job,)) == [(first,)]
        # a commit lands after purge_table: the current metadata is newer
        cat.register("ns", name, newest, overwrite=True)
        cat.reset_requests()
        cat.fault(r"/namespaces/ns/tables/%s$" % name, action="late", seconds=4,
                  method="DELETE")
    finally:
        pool(env, True)
    row = wait_state(env, job)
    assert row[1] == 0, row                  # one attempt: nothing was retried
    assert q(env, "SELECT metadata_location, dropped_at IS NOT NULL FROM tms.purge_jobs"
             " WHERE id = %s", (job,)) == [(newest, True)]
    log = table_log(env, name)
    assert ("DELETE", 204, "late") in log, log
    assert log[log.index(("DELETE", 204, "late")) + 1:] == [("GET", 404, None)], log
    assert cat.raw("GET", "/v1/%s/namespaces/ns/tables/%s" % (cat.prefix, name))[0] == 404
    assert not [f for f in out["files"] if os.path.exists(local(f))]


def test_failed_drop_keeps_the_table_and_run_task_reports_it(env):
    """The catalog answers the drop with 503 twice.  The table stays, the
    job is PENDING with last_error (the reload found the table still
    there), it is retried, and it SUCCEEDS when the catalog drops it on the
    third attempt.  The first attempt runs through psql's CALL
    tms.run_task with ON_ERROR_STOP: it exits non-zero and prints the error
    with its SQLSTATE; the old run_task printed nothing and exited 0."""
    cat = env["catalog"]
    loc, name, out = file_table(env, "--data-files", "3")
    pool(env, False)
    try:
        job, _ = purge(env, "ns", name)
        cat.reset_requests()
        cat.fault(r"/namespaces/ns/tables/%s$" % name, status=503, count=2, method="DELETE")
        r = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose",
                            "-d", env["pg"].dbname, "-c",
                            "CALL tms.run_task('purge', '%d')" % job],
                           env=dict(os.environ, **env["pg"].env()), capture_output=True,
                           text=True, timeout=60)
        print(r.stderr)
        assert r.returncode != 0, (r.returncode, r.stdout, r.stderr)
        assert re.search(r'ERROR:  [0-9A-Z]{5}: could not drop table "ns\.%s" from its catalog'
                         r' \(it is still there\)' % name, r.stderr), r.stderr
        state, attempts, last_error = q(env, "SELECT state, attempts, last_error"
                                        " FROM tms.purge_jobs WHERE id = %s", (job,))[0]
        assert (state, attempts) == ("PENDING", 1), (state, attempts, last_error)
        assert "still there" in last_error and "503" in last_error, last_error
        # the step's load, the refused drop, the load that finds it still there
        assert table_log(env, name) == [("GET", 200, None), ("DELETE", 503, "status"),
                                        ("GET", 200, None)]
        assert cat.load_table("ns", name)["metadata-location"] == out["metadata_location"]
        assert all(os.path.exists(local(f)) for f in out["files"])
    finally:
        pool(env, True)
    # the workers retry: one more 503, then the drop goes through
    row = wait_state(env, job)
    assert row[1] == 2, row
    methods = table_log(env, name)
    assert methods.count(("DELETE", 503, "status")) == 2 and ("DELETE", 204, None) in methods
    assert not [f for f in out["files"] if os.path.exists(local(f))]


# ---------------------------------------------------------------------------
# latency and observability
# ---------------------------------------------------------------------------

def test_drop_to_return_latency_and_counts(env):
    tables = [file_table(env, "--data-files", "2") for _ in range(15)]
    times = []
    for _, name, _ in tables:
        _, took = purge(env, "ns", name)
        times.append(took * 1000)
    times.sort()
    p99 = times[-1]
    print("purge_table latency ms: median %.1f max %.1f" % (times[len(times) // 2], p99))
    assert p99 < 1000                       # the 50 ms target is measured by bench/
    counts = q(env, "SELECT pending + running + succeeded + failed, files_deleted > 0,"
               " bytes_freed > 0 FROM tms.purge_job_counts")[0]
    assert counts[0] >= 15 and counts[1] and counts[2]


# last: the crash restarts the server under the catalog's connection

def test_sigkill_mid_purge_resumes_and_finishes(env):
    loc, name, out = slow_table(env)
    set_conf(env, purge_delete_batch_size=50, purge_batch_pause="100ms")
    try:
        job, _ = purge(env, "ns", name)
        wait_for(lambda: q(env, "SELECT files_deleted > 100 FROM tms.purge_jobs WHERE id = %s",
                           (job,))[0][0], timeout=60, what="progress")
        pid = q(env, "SELECT picked_pid FROM tms.scheduled_tasks WHERE task_name = 'purge'"
                " AND task_instance = %s", (str(job),))[0][0]
        killed_at = q(env, "SELECT now()")[0][0]
        os.kill(pid, signal.SIGKILL)         # PostgreSQL crash-restarts
        # the restart is over once a new checkpointer runs
        wait_for(lambda: q(env, "SELECT count(*) FROM pg_stat_activity"
                                " WHERE backend_type = 'checkpointer' AND backend_start > %s",
                           (killed_at,))[0][0] == 1, timeout=60, what="the restart")
        assert any(os.path.exists(local(f)) for f in out["files"])
    finally:
        set_conf(env, purge_delete_batch_size=None, purge_batch_pause=None)
    row = wait_state(env, job, timeout=120)
    assert row[1] == 1, row                 # the killed run counts as one attempt
    assert not [f for f in out["files"] if os.path.exists(local(f))]
