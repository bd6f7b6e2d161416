"""
test_gcs_world.py -- tables stored on Google Cloud Storage, maintained
through PostgreSQL as tables on S3 are, against the GCS test server
(test/gcs/server.py: every signature, token and JWT checked):

  - metrics, snapshot expiry (exactly the files only expired snapshots
    reach), orphan cleanup (the JSON API listing; exactly the old
    unreachable files), manifest rewrite, compaction (the helper reads
    and writes gs:// through the same storage code) and an async purge
    (JSON API batches of at most 100 through the delete pool) of tables
    the test world wrote to gs://, with a service account key in the user
    mapping (one token, fetched with an RS256 JWT);
  - the same operations with HMAC keys go through the XML API only,
    signed GOOG4-HMAC-SHA256;
  - a table outside the server's allowed_locations is refused, its files
    untouched;
  - deletes refused with 503 as a whole and 429 inside a batch slow down
    and finish;
  - a catalog's vended gcs.oauth2.token is used in place of the mapping's
    key, and new tokens come before the vended ones expire, or (no expiry
    vended) after the storage refused an expired one with 401, also in a
    purge through its held entry;
  - a bad key is refused when the mapping is created; no secret (private
    key, HMAC secret, tokens) reaches an error, the server log or a
    readable row.

The module runs its own cluster, GCS test server and catalog (warehouse
gs://gwh/wh).
Run: /usr/bin/python3 -m pytest -q test/integration/test_gcs_world.py
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))

import world  # noqa: E402
import opsworld as ow  # noqa: E402
import smallfiles  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

pytestmark = pytest.mark.own_cluster

BUCKET = "gwh"
NS = "g"
DAY = 86400
HMAC_ID = "GOOGTMSWORLDHMACID0001"
HMAC_SECRET = "hmac+secret/ForTheWorld0123456789abcdef"
SETTINGS = dict(FAST_WORKERS, **{
    "tms.purge_delete_batch_size": "250",
    "tms.maintenance_delete_batch_size": "250",
    "log_min_messages": "info",
})


def key_pair(directory):
    pem = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                    "rsa_keygen_bits:2048", "-out", pem], check=True, capture_output=True)
    mod = subprocess.run(["openssl", "rsa", "-in", pem, "-noout", "-modulus"], check=True,
                         capture_output=True, text=True).stdout.strip()
    with open(pem) as f:
        return f.read(), mod.split("=", 1)[1]


def sql_lit(s):
    return "'" + s.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def env(tms_world, tmp_path_factory):
    gcs = world.GcsServer(buckets=[BUCKET])
    gcs.add_hmac(HMAC_ID, HMAC_SECRET)
    pem, modulus = key_pair(str(tmp_path_factory.mktemp("sa")))
    email = "tms-world@tms-project.iam.gserviceaccount.com"
    gcs.add_service_account(email, modulus)
    key = json.dumps({"type": "service_account", "project_id": "tms-project",
                      "private_key_id": "k1", "private_key": pem, "client_email": email,
                      "token_uri": gcs.token_uri})
    w = tms_world("gcs", settings=SETTINGS, s3=None, catalog=None)
    cat = world.CatalogServer(w["pg"].dsn(), "gs://%s/wh" % BUCKET,
                              catalog_name="gcs_%s" % uuid.uuid4().hex[:6], gcs=gcs,
                              file_root=w["file_root"])
    cat.create_namespace(NS)
    sa = "gcs_service_account_key %s" % sql_lit(key)
    servers = {"gsa": ("gs://%s/wh/" % BUCKET, sa, ""),
               "ghmac": ("gs://%s/wh/" % BUCKET, "gcs_hmac_access_id '%s', gcs_hmac_secret '%s'"
                         % (HMAC_ID, HMAC_SECRET), ""),
               "gnarrow": ("gs://%s/other/" % BUCKET, sa, ""),
               "gheld": ("gs://%s/wh/" % BUCKET, sa, ", purge_hold_namespace 'gcs_hold'")}
    for srv, (allowed, mapping, extra) in servers.items():
        w["pg"].psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                          uri '%s', gcs_endpoint '%s', request_timeout '30s',
                          allowed_locations '%s'%s);
                        CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (%s);"""
                     % (srv, cat.uri, gcs.endpoint, allowed, extra, srv, mapping))
    st = ow.storage(None, w["file_root"], gcs=gcs)
    yield dict(w, gcs=gcs, catalog=cat, st=st, email=email, pem=pem, key=key)
    cat.stop()
    gcs.stop()


@pytest.fixture(autouse=True)
def reset(env):
    env["gcs"].unthrottle()
    env["gcs"].reset_log()
    yield
    env["gcs"].unthrottle()
    env["catalog"].clear_vending()


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def run(env, name, op, options=None, server="gsa"):
    return q(env, "SELECT tms.run_operation(%s, %s, %s, %s, %s::jsonb)",
             (server, NS, name, op, json.dumps(options or {})))[0][0]


def new_table(env, *args, base=None):
    """A synthetic table written to gs:// by the test world, registered."""
    name = "t_%s" % uuid.uuid4().hex[:8]
    loc = "%s/%s" % (base or "gs://%s/wh/%s" % (BUCKET, NS), name)
    res = world.synth_table(["--out", loc, "--list-files"] + [str(a) for a in args],
                            gcs=env["gcs"])
    env["catalog"].register(NS, name, res["metadata_location"])
    return loc, name, res


def tms_requests(env):
    """The requests of tms (not of the test world's own token)."""
    return [e for e in env["gcs"].log() if e["who"] != "world"]


def assert_service_account_only(env, entries):
    assert entries, "tms sent nothing to GCS"
    bad = [e for e in entries if e["status"] in (401, 403) or
           (e["path"] != "/token" and (e["auth"], e["who"]) != ("bearer", env["email"]))]
    assert not bad, bad[:3]


def ts_text(env, unix):
    return q(env, "SELECT to_timestamp(%s)::text", (unix,))[0][0]


def snapshot_ids(meta):
    return {s["snapshot-id"] for s in meta.get("snapshots", [])}


# ---------------------------------------------------------------------------
# the operations with a service account key
# ---------------------------------------------------------------------------

def test_metrics(env):
    loc, name, res = new_table(env, "--snapshots", "3", "--data-files", "40",
                               "--files-per-manifest", "5")
    env["gcs"].reset_log()
    m = q(env, "SELECT tms.table_metrics('gsa', %s, %s)", (NS, name))[0][0]
    assert m["dataFiles"] == 40, m
    assert m["snapshots"] == 3, m
    entries = tms_requests(env)
    assert_service_account_only(env, entries)
    assert all(e["path"].startswith("/%s/wh/" % BUCKET) for e in entries if e["path"] != "/token")


def test_snapshot_expiry_deletes_exactly_what_expired_snapshots_reach(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "--snapshots", "12", "--data-files", "36",
                               "--files-per-manifest", "3", "--stats-files", "4",
                               "--version-hint")
    mloc, meta = ow.load(cat, NS, name)
    cutoff = time.time()
    now = int(q(env, "SELECT (extract(epoch FROM now()) * 1000)::bigint")[0][0])
    exp = ow.expected_expiry(meta, now, older_than_ms=int(cutoff * 1000), retain_last=2)
    after_meta = ow.metadata_after_expiry(meta, exp)
    deletes = ow.expected_expiry_deletes(st, meta, after_meta)
    assert len(exp["expired"]) == 10 and deletes
    listing = ow.list_location(st, loc)
    row = env["pg"].wait_job(run(env, name, "snapshot-expiry",
                                 {"older-than": ts_text(env, cutoff), "retain-last": 2}))
    mloc2, meta2 = ow.load(cat, NS, name)
    assert snapshot_ids(meta2) == exp["retained"]
    after = ow.list_location(st, loc)
    assert set(listing) - set(after) == {ow.canon(st, p) for p in deletes}
    assert set(after) - set(listing) == {ow.canon(st, mloc2)}
    assert all(st.exists(p) for p in ow.content_files(st, meta2))
    assert row["snapshots_expired"] == 10 and row["files_deleted"] == len(deletes)
    entries = tms_requests(env)
    assert_service_account_only(env, entries)
    assert [e for e in entries if e["path"] == "/batch/storage/v1"], "no batch delete"


def test_orphan_cleanup_lists_and_deletes_exactly_old_orphans(env):
    cat, st, gcs = env["catalog"], env["st"], env["gcs"]
    loc, name, res = new_table(env, "--snapshots", "3", "--data-files", "9",
                               "--files-per-manifest", "3", "--version-hint")
    # a neighbour whose name starts with the table's: never listed as its
    _, n2, _ = new_table(env, "--data-files", "2", base=loc.rsplit("/", 1)[0])
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, gcs)
    orphans = [ow.plant(st, loc + p, mtime=old, s3server=gcs) for p in
               ("/data/orphan-1.parquet", "/data/a/b/orphan 2.parquet",
                "/metadata/orphan-3.avro", "/stray.txt")]
    young = ow.plant(st, loc + "/data/young.parquet")
    mloc, meta = ow.load(cat, NS, name)
    listing = ow.list_location(st, loc)
    expected = ow.expected_orphans(st, meta, mloc, listing, time.time() - 3 * DAY)
    assert expected == {ow.canon(st, p) for p in orphans}
    gcs.reset_log()
    row = env["pg"].wait_job(run(env, name, "orphan-cleanup", {"older-than": "3 days"}))
    after = ow.list_location(st, loc)
    assert set(after) == set(listing) - expected
    assert ow.canon(st, young) in after
    assert (row["orphans_found"], row["files_deleted"]) == (len(expected), len(expected))
    entries = tms_requests(env)
    assert_service_account_only(env, entries)
    lists = [e for e in entries if e["path"] == "/storage/v1/b/%s/o" % BUCKET]
    assert lists and all("prefix=wh%2Fg%2F" + name + "%2F" in e["query"] for e in lists), lists


def test_manifest_rewrite_keeps_every_live_file(env):
    cat, st = env["catalog"], env["st"]
    loc, name, res = new_table(env, "--snapshots", "8", "--data-files", "40",
                               "--files-per-manifest", "5")
    _, meta = ow.load(cat, NS, name)
    before = ow.live_set(ow.live_files(st, meta))
    row = env["pg"].wait_job(run(env, name, "manifest-rewrite"))
    _, meta2 = ow.load(cat, NS, name)
    assert meta2["current-snapshot-id"] != meta["current-snapshot-id"]
    assert ow.live_set(ow.live_files(st, meta2)) == before
    assert row["manifests_rewritten"] and row["manifests_rewritten"] > 1, row
    assert_service_account_only(env, tms_requests(env))


def test_compaction_reads_and_writes_through_gcs(env):
    cat, st = env["catalog"], env["st"]
    name = "c_%s" % uuid.uuid4().hex[:8]
    smallfiles.make_table(cat, st, NS, name, files=12, rows_per_file=40, partitioned=False)
    mloc, meta = ow.load(cat, NS, name)
    assert meta["location"].startswith("gs://%s/wh/" % BUCKET), meta["location"]
    records = ow.summary(ow.live_files(st, meta))["records"]
    env["gcs"].reset_log()
    row = env["pg"].wait_job(run(env, name, "compaction"), timeout=400)
    assert row["data_files_rewritten"] == 12 and row["data_files_added"] >= 1, row
    _, meta2 = ow.load(cat, NS, name)
    live2 = ow.live_files(st, meta2)
    assert len(live2) == row["data_files_added"]
    assert ow.summary(live2)["records"] == records
    for path, f in live2.items():
        assert path.startswith(meta["location"] + "/data/"), path
        data = st.read(path)
        assert data[:4] == b"PAR1" and data[-4:] == b"PAR1" and len(data) == f["size"]
    entries = tms_requests(env)
    assert_service_account_only(env, entries)
    assert [e for e in entries if e["method"] == "PUT"], "the helper wrote nothing to GCS"


def test_purge_deletes_every_file_in_batches(env):
    loc, name, res = new_table(env, "--snapshots", "2", "--data-files", "450",
                               "--files-per-manifest", "150")
    prefix = loc.split("/", 3)[3] + "/"
    assert len(env["gcs"].client().list(BUCKET, prefix)) > 450
    env["gcs"].reset_log()
    jid = q(env, "SELECT tms.purge_table('gsa', %s, %s)", (NS, name))[0][0]
    row = wait_purge(env, jid)
    assert row[0] == "SUCCEEDED", row
    assert env["gcs"].client().list(BUCKET, prefix) == []
    entries = tms_requests(env)
    assert_service_account_only(env, entries)
    batches = [e for e in entries if e["path"] == "/batch/storage/v1"]
    assert batches and max(b["items"]["count"] for b in batches) <= 100
    assert sum(b["items"]["count"] for b in batches) >= 450


def purge_job(env, jid):
    return q(env, "SELECT state, attempts, last_error, files_deleted FROM tms.purge_jobs"
             " WHERE id = %s", (jid,))[0]


def wait_purge(env, jid, timeout=240):
    wait_for(lambda: purge_job(env, jid)[0] in ("SUCCEEDED", "FAILED"), timeout=timeout,
             interval=0.2, what="purge job %d (%r)" % (jid, purge_job(env, jid)))
    return purge_job(env, jid)


def test_throttled_deletes_slow_down_and_finish(env):
    loc, name, res = new_table(env, "--snapshots", "2", "--data-files", "300",
                               "--files-per-manifest", "100")
    prefix = loc.split("/", 3)[3] + "/"
    env["gcs"].throttle(503, 3, scope="delete", retry_after=1)
    jid = q(env, "SELECT tms.purge_table('gsa', %s, %s)", (NS, name))[0][0]
    wait_for(lambda: env["gcs"].stats()["throttle_left"] == 0 or
             purge_job(env, jid)[0] in ("SUCCEEDED", "FAILED"), timeout=120,
             what="the refusals")
    env["gcs"].throttle(429, 40, scope="items")
    row = wait_purge(env, jid)
    assert row[0] == "SUCCEEDED", row
    assert env["gcs"].client().list(BUCKET, prefix) == []
    log = tms_requests(env)
    refused = [e for e in log if e["path"] == "/batch/storage/v1" and e["status"] == 503]
    assert len(refused) == 3, refused
    assert env["gcs"].stats()["throttle_left"] == 0, "no object was refused inside a batch"


# ---------------------------------------------------------------------------
# HMAC keys, allowed roots, vended tokens, secrets
# ---------------------------------------------------------------------------

def test_hmac_keys_reach_only_the_xml_api(env):
    st, gcs = env["st"], env["gcs"]
    loc, name, res = new_table(env, "--snapshots", "4", "--data-files", "12",
                               "--files-per-manifest", "3")
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, gcs)
    orphan = ow.plant(st, loc + "/data/orphan.parquet", mtime=old, s3server=gcs)
    gcs.reset_log()
    m = q(env, "SELECT tms.table_metrics('ghmac', %s, %s)", (NS, name))[0][0]
    assert m["dataFiles"] == 12
    row = env["pg"].wait_job(run(env, name, "orphan-cleanup", {"older-than": "3 days"}, "ghmac"))
    assert row["files_deleted"] == 1 and not st.exists(orphan)
    row = env["pg"].wait_job(run(env, name, "snapshot-expiry",
                                 {"older-than": ts_text(env, time.time()), "retain-last": 1}, "ghmac"))
    assert row["snapshots_expired"] == 3 and row["files_deleted"] > 0
    entries = tms_requests(env)
    assert entries and all(e["auth"] == "hmac" and e["who"] == HMAC_ID for e in entries), \
        [e for e in entries if e["auth"] != "hmac"][:3]
    assert not [e for e in entries if e["path"].startswith(("/storage/", "/batch/"))]
    assert [e for e in entries if "list-type=2" in e["query"]]
    assert [e for e in entries if e["method"] == "DELETE"]


def test_outside_allowed_locations_is_refused(env):
    st = env["st"]
    loc, name, res = new_table(env, "--data-files", "4")
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, env["gcs"])
    orphan = ow.plant(st, loc + "/data/orphan.parquet", mtime=old, s3server=env["gcs"])
    listing = ow.list_location(st, loc)
    for op in ("orphan-cleanup", "snapshot-expiry"):
        e = env["pg"].query_error("SELECT tms.run_operation('gnarrow', %s, %s, %s)",
                                  (NS, name, op))
        assert e.pgcode == "42501" and "allowed_locations" in str(e), str(e)
    e = env["pg"].query_error("SELECT tms.purge_table('gnarrow', %s, %s)", (NS, name))
    assert e.pgcode == "42501", str(e)
    assert ow.list_location(st, loc) == listing and st.exists(orphan)
    assert not [x for x in tms_requests(env) if x["method"] in ("DELETE", "POST", "PUT")
                and x["path"] != "/token"]


def test_vended_tokens_replace_the_key_and_are_refreshed(env):
    st, gcs, cat = env["st"], env["gcs"], env["catalog"]
    loc, name, res = new_table(env, "--snapshots", "2", "--data-files", "20",
                               "--files-per-manifest", "10")
    old = time.time() - 10 * DAY
    ow.age_tree(st, loc, old, gcs)
    orphans = [ow.plant(st, loc + "/data/o/%03d.parquet" % i, mtime=old, s3server=gcs)
               for i in range(60)]
    cat.set_vending(gcs, 4)
    q(env, "ALTER SERVER gsa OPTIONS (SET request_timeout '31s')")
    try:
        gcs.reset_log()
        # deletes held back: the job outlives the first vended token
        gcs.throttle(503, 4, scope="delete", retry_after=2)
        row = env["pg"].wait_job(run(env, name, "orphan-cleanup", {"older-than": "3 days"}))
    finally:
        q(env, "ALTER SERVER gsa OPTIONS (SET request_timeout '30s')")
    assert row["files_deleted"] == len(orphans)
    assert not any(st.exists(o) for o in orphans)
    entries = [e for e in tms_requests(env) if e["path"] != "/token"]
    assert entries and all(e["who"] == "vended" for e in entries), \
        [e for e in entries if e["who"] != "vended"][:3]
    assert not [e for e in entries if e["status"] == 401], "a vended token expired in use"
    issued = [v for v in cat.vended() if "token" in v]
    assert len(issued) >= 2, "the job never got a new token"


@pytest.mark.parametrize("expiry_visible", [True, False])
def test_purge_outlives_its_vended_token_through_the_hold(env, expiry_visible):
    # without gcs.oauth2.token-expires-at the storage refuses the expired
    # token (401) before a new one is fetched
    gcs, cat = env["gcs"], env["catalog"]
    loc, name, res = new_table(env, "--snapshots", "2", "--data-files", "400",
                               "--files-per-manifest", "100")
    prefix = loc.split("/", 3)[3] + "/"
    cat.set_vending(gcs, 3, expiry_visible=expiry_visible)
    q(env, "ALTER SERVER gheld OPTIONS (SET request_timeout '31s')")
    gcs.reset_log()
    # deletes held back for over 3 s: the first vended token expires meanwhile
    gcs.throttle(503, 6, scope="delete", retry_after=2)
    t0 = time.time()
    jid = q(env, "SELECT tms.purge_table('gheld', %s, %s)", (NS, name))[0][0]
    row = wait_purge(env, jid)
    assert row[0] == "SUCCEEDED", row
    assert time.time() - t0 > 3, "the purge did not outlive its first token"
    assert gcs.client().list(BUCKET, prefix) == []
    entries = [e for e in tms_requests(env) if e["path"] != "/token"]
    assert entries and all(e["who"] == "vended" for e in entries), \
        [e for e in entries if e["who"] != "vended"][:3]
    refused = [e for e in entries if e["status"] == 401]
    if expiry_visible:
        assert not refused, "a vended token expired in use"
    else:
        assert refused, "the storage never refused an expired token: nothing was tested"
    vended = [v for v in cat.vended() if "token" in v]
    assert len(vended) >= 2 and [v for v in vended if v["via"] == "credentials"], vended
    assert cat.requests(r"/namespaces/gcs_hold/tables/tms_purge_%d/credentials$" % jid)[
        "requests"], "no loadCredentials through the held entry"


def test_bad_key_is_refused_at_create_and_never_shown(env):
    bad = json.dumps({"type": "service_account", "client_email": "x@y",
                      "token_uri": env["gcs"].token_uri,
                      "private_key": "-----BEGIN PRIVATE KEY-----\nTOTALLYSECRETBYTES\n"
                                     "-----END PRIVATE KEY-----\n"})
    e = env["pg"].query_error("CREATE USER MAPPING FOR CURRENT_USER SERVER gnarrow"
                              " OPTIONS (gcs_service_account_key %s)" % sql_lit(bad))
    assert e.pgcode == "HV00D" or e.pgcode.startswith("HV"), (e.pgcode, str(e))
    assert "TOTALLYSECRETBYTES" not in str(e)
    e = env["pg"].query_error("CREATE USER MAPPING FOR CURRENT_USER SERVER gnarrow"
                              " OPTIONS (gcs_hmac_access_id 'A', gcs_hmac_secret 'B',"
                              " gcs_oauth2_token 'C')")
    assert "only one of" in str(e)


def test_no_secret_in_logs_or_rows(env):
    pem_body = env["pem"].splitlines()[3]
    secrets_ = [pem_body, HMAC_SECRET, env["gcs"].token]
    secrets_ += [v["token"] for v in env["catalog"].vended() if "token" in v]
    log = env["pg"].log_tail(100000)
    rows = json.dumps(q(env, "SELECT row_to_json(j)::text FROM tms.maintenance_jobs j"), default=str)
    rows += json.dumps(q(env, "SELECT row_to_json(j)::text FROM tms.purge_jobs j"), default=str)
    server_log = json.dumps(env["gcs"].log())
    for s in secrets_:
        assert s not in log, "a secret in the server log"
        assert s not in rows, "a secret in a readable row"
        assert s not in server_log
