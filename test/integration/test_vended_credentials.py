"""
test_vended_credentials.py -- storage credentials a catalog vends that expire
before the work is done: an operation and a purge get new ones (through the
REST spec's loadCredentials, or a table load where the catalog does not offer
it) before they expire or after the storage refused an expired token, and
finish; a purge does so through the table's entry held in the server's
purge_hold_namespace until its files are gone; without a hold it fails and
says why; a catalog that will not rename gets a plain drop; the user
mapping's keys never reach the storage in their place.

The test catalog vends temporary credentials (key, secret, session token)
registered with the session's S3 gate, which checks every signature
(test/s3gate/server.py) and answers 400 ExpiredToken once they expire.  The
module runs its own cluster over the session's s3rver; the gate checks
credentials only while this module runs.

Run: /usr/bin/python3 -m pytest test/integration/test_vended_credentials.py
"""

import os
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "catalog"))

import storage as storage_mod  # noqa: E402
import world  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

BUCKET = "vended"
HOLD = "tms_hold"
SETTINGS = dict(FAST_WORKERS, **{
    "tms.purge_delete_batch_size": "25",
    "tms.maintenance_delete_batch_size": "25",
    "tms.purge_max_attempts": "2",
    "log_min_messages": "warning",
})
TTL = 3


pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world, s3, s3_gate):
    s3.create_bucket(BUCKET)
    gate = s3_gate
    # the catalog reads and writes metadata through the gate with s3rver's key
    gate.add_credentials(s3.access_key_id, s3.secret_access_key)
    gate.verify(True)
    # the mapping's keys are not the gate's: were they ever sent, the gate
    # would log them, refused
    w = tms_world("vc", settings=SETTINGS, s3=s3, catalog=dict(s3=gate.config()),
                  sql=lambda w: [
        """CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
             uri '%s', s3_endpoint '%s', request_timeout '30s', %s
             allowed_locations 's3://%s/');
           CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (
             s3_access_key_id 'MAPPINGKEY', s3_secret_access_key 'mapping-secret');"""
        % (srv, w["catalog"].uri, gate.endpoint, hold, BUCKET, srv)
        for srv, hold in (("held", "purge_hold_namespace '%s'," % HOLD), ("plain", ""))])
    w["catalog"].create_namespace("vc")
    yield dict(w, gate=gate)
    gate.verify(False)
    gate.clear_credentials()
    gate.unthrottle()


@pytest.fixture(autouse=True)
def reset(env):
    env["gate"].reset_log()
    yield
    env["gate"].unthrottle()
    env["catalog"].clear_vending()
    env["catalog"].clear_faults()


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def s3_table(env, files):
    """A synthetic table of `files` data files in the bucket, registered;
    (name, key prefix)."""
    name = "t_%s" % uuid.uuid4().hex[:8]
    prefix = "tables/%s" % name
    out = world.synth_table(
        ["--out", "s3://%s/%s" % (BUCKET, prefix), "--data-files", str(files),
         "--snapshots", "2", "--files-per-manifest", "250",
         "--partitions", str(max(1, files // 250)), "--file-size", "16",
         "--list-files"], s3=env["s3"])
    env["catalog"].register("vc", name, out["metadata_location"])
    return name, prefix


def remaining(env, prefix):
    return env["s3"].client().list(BUCKET, prefix + "/")


def gate_log(env, prefix=None):
    return [e for e in env["gate"].log()
            if prefix is None or e["path"].startswith("/%s/%s" % (BUCKET, prefix)) or
            (e["first_key"] or "").startswith(prefix)]


def vended_keys(env):
    return {v["access_key_id"]: v for v in env["catalog"].vended()}


def assert_only_vended_keys(env, entries):
    """Every request tms sent (those not signed with the catalog's own key)
    was signed with a key the catalog vended, never the mapping's; the keys
    it used."""
    vended = vended_keys(env)
    refused = [e for e in entries if e["outcome"] == "denied"]
    assert not refused, "requests refused for their credentials: %s" % refused[:3]
    used = {e["access_key_id"] for e in entries} - {env["s3"].access_key_id}
    assert "MAPPINGKEY" not in used, "the user mapping's key reached the storage"
    assert used and used <= set(vended), (used - set(vended))
    return used


def vend(env, expiry_visible=True, credentials_endpoint=True):
    """The catalog vends credentials that live TTL seconds.  Whether it
    offers loadCredentials is in its /v1/config, which a cached catalog
    connection read earlier: a change of both servers drops those of every
    process."""
    env["catalog"].set_vending(env["gate"], TTL, expiry_visible=expiry_visible,
                               credentials_endpoint=credentials_endpoint)
    for srv in ("held", "plain"):
        q(env, "ALTER SERVER %s OPTIONS (SET request_timeout '30s')" % srv)


def catalog_calls(env, regex):
    return [r for r in env["catalog"].requests(regex)["requests"]]


# ---------------------------------------------------------------------------
# the gate really checks
# ---------------------------------------------------------------------------

def test_gate_checks_signatures_and_expiry(env):
    gate = env["gate"]
    gate.add_credentials("GOODKEY", "good-secret", "tok-1", expires_at=time.time() + 600)
    gate.add_credentials("OLDKEY", "old-secret", "tok-2", expires_at=time.time() - 1)

    def status(key, secret, token):
        client = storage_mod.S3Client(storage_mod.S3Config(gate.endpoint, key, secret))
        hdrs = {"x-amz-security-token": token} if token else {}
        st, _, body = client.request("GET", BUCKET, "nothing-here", headers=hdrs)
        return st, body

    assert status("GOODKEY", "good-secret", "tok-1")[0] == 404      # forwarded
    st, body = status("GOODKEY", "wrong-secret", "tok-1")
    assert st == 403 and b"SignatureDoesNotMatch" in body
    st, body = status("GOODKEY", "good-secret", None)
    assert st == 403 and b"InvalidToken" in body
    st, body = status("OLDKEY", "old-secret", "tok-2")
    assert st == 400 and b"ExpiredToken" in body
    st, body = status("NOKEY", "x", None)
    assert st == 403 and b"InvalidAccessKeyId" in body


# ---------------------------------------------------------------------------
# an operation outlives its credentials
# ---------------------------------------------------------------------------

def run_orphan_cleanup(env, expiry_visible, credentials_endpoint):
    name, prefix = s3_table(env, 100)
    orphans = ["s3://%s/%s/data/orphans/o%04d.parquet" % (BUCKET, prefix, i)
               for i in range(400)]
    world.put_objects(env["s3"], orphans)
    old = time.time() - 10 * 86400
    for u in orphans:
        env["s3"].set_mtime(BUCKET, u.split("/", 3)[3], old)
    vend(env, expiry_visible, credentials_endpoint)
    env["catalog"].reset_requests()
    env["gate"].reset_log()
    # 16 deletes of 25 files at 3 a second: longer than the credentials live
    env["gate"].throttle(rate=3, burst=1, mode="request")
    job = q(env, "SELECT tms.run_operation('held', 'vc', %s, 'orphan-cleanup',"
            " '{\"older-than\": \"7 days\"}')", (name,))[0][0]
    wait_for(lambda: q(env, "SELECT state FROM tms.maintenance_jobs WHERE id = %s",
                       (job,))[0][0] in ("succeeded", "failed"), timeout=120, interval=0.2,
             what="the orphan cleanup")
    row = q(env, "SELECT state, last_error, files_deleted, started_at, finished_at"
            " FROM tms.maintenance_jobs WHERE id = %s", (job,))[0]
    assert row[0] == "succeeded" and row[2] == 400, row
    assert remaining(env, prefix + "/data/orphans") == []
    entries = gate_log(env, prefix)
    assert (row[4] - row[3]).total_seconds() > TTL, "the job did not outlive its credentials"
    return entries, assert_only_vended_keys(env, entries)


def test_operation_refreshes_its_credentials_before_they_expire(env):
    entries, used = run_orphan_cleanup(env, expiry_visible=True, credentials_endpoint=True)
    # the vended expiry is known: new credentials came before the old expired
    assert not [e for e in entries if e["outcome"] == "expired"], \
        "the storage refused an expired token"
    assert len(used) >= 2, "one set of credentials served the whole job"
    assert catalog_calls(env, r"/tables/[^/]+/credentials$"), "loadCredentials was not called"


def test_operation_refreshes_its_credentials_after_an_expired_token(env):
    # no expiry vended, no loadCredentials offered: the storage says, and
    # the table is loaded again for new credentials
    entries, used = run_orphan_cleanup(env, expiry_visible=False, credentials_endpoint=False)
    expired = [e for e in entries if e["outcome"] == "expired"]
    assert expired, "the storage never refused an expired token: nothing was tested"
    assert len(used) >= 2
    assert not catalog_calls(env, r"/credentials$"), "loadCredentials is not offered"
    assert [v for v in env["catalog"].vended() if v["via"] == "load"]


# ---------------------------------------------------------------------------
# a purge outlives its credentials: the hold
# ---------------------------------------------------------------------------

def purge_job(env, job):
    return q(env, "SELECT state, attempts, last_error, phase, held_namespace, held_name,"
             " files_deleted, dropped_at FROM tms.purge_jobs WHERE id = %s", (job,))[0]


def wait_purge(env, job, timeout=180):
    wait_for(lambda: purge_job(env, job)[0] in ("SUCCEEDED", "FAILED"), timeout=timeout,
             interval=0.2, what="purge job %d (%r)" % (job, purge_job(env, job)))
    return purge_job(env, job)


def catalog_tables(env, ns):
    st, body, _ = env["catalog"].raw("GET", "/v1/%s/namespaces/%s/tables"
                                     % (env["catalog"].prefix, ns))
    return [] if st == 404 else [t["name"] for t in body["identifiers"]]


@pytest.mark.parametrize("expiry_visible", [True, False])
def test_purge_outlives_its_credentials_through_the_hold(env, expiry_visible):
    # 700 files in DeleteObjects of 25 at 6 a second: over 4.5 s of
    # deletes, beyond the TTL (3 s) of the credentials the purge starts with
    name, prefix = s3_table(env, 700)
    vend(env, expiry_visible=expiry_visible)
    env["gate"].reset_log()
    env["gate"].throttle(rate=6, burst=1, mode="request")
    job = q(env, "SELECT tms.purge_table('held', 'vc', %s)", (name,))[0][0]
    # the name is free as soon as the job dropped it from its namespace
    wait_for(lambda: purge_job(env, job)[7] is not None, what="the hold")
    assert name not in catalog_tables(env, "vc")
    row = purge_job(env, job)
    assert (row[4], row[5]) == (HOLD, "tms_purge_%d" % job), row
    assert row[5] in catalog_tables(env, HOLD)
    row = wait_purge(env, job)
    assert row[0] == "SUCCEEDED" and row[1] == 0 and row[2] is None, row
    assert row[3] == "release", row
    assert remaining(env, prefix) == [], "files left in the bucket"
    assert row[5] not in catalog_tables(env, HOLD), "the held entry was not dropped"
    entries = gate_log(env, prefix)
    used = assert_only_vended_keys(env, entries)
    assert len(used) >= 2, "the purge did not outlive its first credentials"
    assert catalog_calls(env, r"/namespaces/%s/tables/tms_purge_%d/credentials$" % (HOLD, job)), \
        "no loadCredentials through the held entry"
    expired = [e for e in entries if e["outcome"] == "expired"]
    if expiry_visible:
        assert not expired, "refreshed before they expired, the storage never refused"
    else:
        assert expired, "without a known expiry the storage refused once, then new ones came"


def test_purge_without_a_hold_fails_and_says_why(env):
    name, prefix = s3_table(env, 600)
    vend(env, expiry_visible=False)
    env["gate"].throttle(rate=4, burst=1, mode="request")
    job = q(env, "SELECT tms.purge_table('plain', 'vc', %s)", (name,))[0][0]
    row = wait_purge(env, job)
    assert row[0] == "FAILED" and row[4] is None, row
    assert "purge_hold_namespace" in row[2] and "ExpiredToken" in row[2], row[2]
    env["gate"].unthrottle()
    # the files left are the operator's (docs: retry_purge with the mapping's keys)
    assert remaining(env, prefix)


def test_a_catalog_that_will_not_rename_gets_a_plain_drop(env):
    name, prefix = s3_table(env, 100)
    env["catalog"].fault(r"/tables/rename$", method="POST", status=406, count=5)
    job = q(env, "SELECT tms.purge_table('held', 'vc', %s)", (name,))[0][0]
    row = wait_purge(env, job)
    assert row[0] == "SUCCEEDED" and row[4] is None and row[5] is None, row
    assert row[3] == "metadata", row
    assert name not in catalog_tables(env, "vc")
    assert remaining(env, prefix) == []
