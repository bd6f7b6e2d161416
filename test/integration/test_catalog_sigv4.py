"""
test_catalog_sigv4.py -- tms against a catalog that verifies AWS SigV4, as
AWS Glue's and S3 Tables' Iceberg REST endpoints do (the test catalog with
POST /admin/sigv4; its verifier is test/catalog/sigv4.py, checked against
the AWS suite in test_world_sigv4.py).

The server signs for region eu-west-1 and service glue with temporary keys
(a session token), and also holds an OAuth2 client credential, so every
request carries a SigV4 signature over the bearer token moved to
Original-Authorization:

  - tms connects, lists namespaces and tables, and loads tables (one at a
    time, and in the batches of the policy cycle's refresh, with and
    without If-None-Match); a load answered 503 with Retry-After is
    retried with a new date and a new signature, alone and in a batch;
  - a maintenance operation commits (snapshot expiry in the pool, a POST
    whose body's sha256 is signed) and a purge drops a table (DELETE);
  - every request the catalog saw, except the OAuth2 token requests, was
    signed with the session token, and none was refused;
  - a wrong secret, an unknown key, a missing session token and a clock
    off by 20 minutes each fail cleanly with SQLSTATE 28000 and AWS's
    message, in either error shape, with no secret in the message, the
    DETAIL or the server log.

The module runs its own cluster (fast workers) whose database also holds
the catalog's pointer tables.

Run: /usr/bin/python3 -m pytest -q test/integration/test_catalog_sigv4.py
"""

import json
import os
import sys
import time
import uuid

import psycopg2
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import opsworld as ow  # noqa: E402
from pgcluster import FAST_WORKERS, wait_for  # noqa: E402

REGION, SERVICE = "eu-west-1", "glue"
KEY_ID = "ASIATESTSIGV4KEY"
SECRET = "wJalrXUtnFEMI/K7MDENG/SIGV4-SECRET-KEY"
SESSION = "FwoGZXIvYXdzEBYaDSESSION-SECRET-TOKEN/+=="
CLIENT = "tms-client:OAUTH-CLIENT-SECRET"
KEYS = {KEY_ID: {"secret": SECRET, "session_token": SESSION}}
SECRETS = ("SIGV4-SECRET", "SESSION-SECRET", "OAUTH-CLIENT-SECRET")
NS = "sig"
BATCH = ["b%02d" % i for i in range(6)]


def quote(v):
    return "'" + v.replace("'", "''") + "'"


pytestmark = pytest.mark.own_cluster


@pytest.fixture(scope="module")
def env(tms_world):
    w = tms_world("sig", settings=FAST_WORKERS, catalog=dict(credential=CLIENT))
    c, cat, file_root = w["pg"], w["catalog"], w["file_root"]
    # tables first (synth registers unsigned), then the catalog verifies
    tables = {}
    for name, args in [("orders", ["--snapshots", "2", "--data-files", "4"]),
                       ("expire_me", ["--snapshots", "4", "--data-files", "8"]),
                       ("purge_me", ["--snapshots", "2", "--data-files", "5"])] + \
            [(b, ["--snapshots", "1", "--data-files", "2"]) for b in BATCH]:
        res = ow.synth_table("file://%s/%s/%s" % (file_root, NS, name), *args)
        cat.register(NS, name, res["metadata_location"])
        tables[name] = res
    cat.set_sigv4(REGION, SERVICE, KEYS)
    srv = "glue_lake"
    c.psql("""CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (
                uri '%s', relative_path_root '%s', allowed_locations 'file://%s/',
                request_timeout '10s', retries '2', signing_region '%s', signing_name '%s');
              CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (
                credential %s, aws_access_key_id %s, aws_secret_access_key %s,
                aws_session_token %s);"""
           % (srv, cat.uri, file_root, file_root, REGION, SERVICE, srv,
              quote(CLIENT), quote(KEY_ID), quote(SECRET), quote(SESSION)))
    return dict(w, server=srv, tables=tables)


def q(env, sql, args=None):
    return env["pg"].query(sql, args)


def catalog_requests(env, path_regex=None):
    """The catalog's log of /v1 requests but the OAuth2 token requests."""
    return [r for r in env["catalog"].requests(path_regex)["requests"]
            if r["path"] != "/v1/oauth/tokens"]


def assert_all_signed(reqs):
    """Every request verified with the session token, its bearer token
    relocated and signed, none refused."""
    assert reqs
    for r in reqs:
        sig = r["sigv4"]
        assert sig and "error" not in sig, r
        assert sig["access_key_id"] == KEY_ID and sig["session_token"] is True, r
        assert r["original_authorization"] == "present", r
        assert {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
                "original-authorization"} <= set(sig["signed_headers"]), r


def test_lists_and_loads_are_signed(env):
    cat = env["catalog"]
    cat.reset_requests()
    assert NS in [r[0] for r in q(env, "SELECT * FROM tms.list_namespaces(%s)", (env["server"],))]
    names = [r[0] for r in q(env, "SELECT table_name FROM tms.list_tables(%s, %s)",
                             (env["server"], NS))]
    assert set(names) == {"orders", "expire_me", "purge_me"} | set(BATCH)
    meta = q(env, "SELECT tms.table_metadata(%s, %s, 'orders')", (env["server"], NS))[0][0]
    assert len(meta["snapshots"]) == 2
    metrics = q(env, "SELECT tms.table_metrics(%s, %s, 'orders')", (env["server"], NS))[0][0]
    assert metrics["dataFiles"] == 4
    reqs = catalog_requests(env)
    assert {(r["method"], r["status"]) for r in reqs} <= {("GET", 200), ("GET", 304)}
    assert any(r["path"].endswith("/tables/orders") for r in reqs)
    assert_all_signed(reqs)


def test_retry_is_signed_anew(env):
    """A load answered 503 with Retry-After: 2 is sent again at least two
    seconds later: a new X-Amz-Date, a new signature, both verified."""
    cat = env["catalog"]
    q(env, "SELECT tms.table_metadata(%s, %s, 'orders')", (env["server"], NS))  # connected
    cat.reset_requests()
    cat.fault(r"/tables/orders$", method="GET", status=503, headers={"Retry-After": "2"})
    q(env, "SELECT tms.table_metadata(%s, %s, 'orders')", (env["server"], NS))
    loads = catalog_requests(env, r"/tables/orders$")
    assert [r["status"] for r in loads] == [503, 200], loads
    assert_all_signed(loads)
    a, b = (r["sigv4"] for r in loads)
    assert a["amz_date"] != b["amz_date"] and a["signature"] != b["signature"]


def evaluate(env, policy):
    return q(env, "SELECT table_name FROM tms.evaluate_now(%s, force => true)", (policy,))


def test_batched_loads_are_signed(env):
    """The policy cycle's refresh loads the group's tables in batches: the
    first run unconditionally, the next with If-None-Match (304s); a batch
    member answered 503 with Retry-After is retried with a new signature."""
    cat, srv = env["catalog"], env["server"]
    tag = uuid.uuid4().hex[:6]
    group, policy = "g-%s" % tag, "p-%s" % tag
    q(env, "SELECT tms.create_object_group(%s, server => %s, namespace_pattern => %s,"
           " table_pattern => 'b*')", (group, srv, NS))
    q(env, "SELECT tms.create_policy(%s, %s, active => false)", (policy, group))
    q(env, "SELECT tms.add_rule(%s, 'snapshot-expiry', 'local', '{\"commits-added\": 1}',"
           " 'snapshots > 100', 'going-forward')", (policy,))
    try:
        cat.reset_requests()
        assert evaluate(env, policy) == []
        loads = catalog_requests(env, r"/tables/b\d\d$")
        assert sorted((r["path"].rsplit("/", 1)[1], r["status"]) for r in loads) == \
            [(b, 200) for b in BATCH]
        assert_all_signed(loads)

        cat.reset_requests()
        cat.fault(r"/tables/b03$", method="GET", status=503, headers={"Retry-After": "2"})
        assert evaluate(env, policy) == []
        loads = catalog_requests(env, r"/tables/b\d\d$")
        assert sorted((r["path"].rsplit("/", 1)[1], r["status"]) for r in loads) == \
            sorted([(b, 304) for b in BATCH] + [("b03", 503)])
        assert all(r["if_none_match"] for r in loads)
        assert_all_signed(loads)
        b03 = [r["sigv4"] for r in loads if r["path"].endswith("/b03")]
        assert b03[0]["amz_date"] != b03[1]["amz_date"]
        assert b03[0]["signature"] != b03[1]["signature"]
    finally:
        q(env, "SELECT tms.drop_policy(%s)", (policy,))
        q(env, "SELECT tms.drop_object_group(%s)", (group,))


def test_snapshot_expiry_commits_signed(env):
    cat, st = env["catalog"], env["st"]
    mloc, meta = ow.load(cat, NS, "expire_me")
    assert len(meta["snapshots"]) == 4
    cutoff = q(env, "SELECT now()::text")[0][0]
    cat.reset_requests()
    jid = q(env, "SELECT tms.run_operation(%s, %s, 'expire_me', 'snapshot-expiry', %s::jsonb,"
                 " 'local')", (env["server"], NS,
                               json.dumps({"older-than": cutoff, "retain-last": 1})))[0][0]
    wait_for(lambda: q(env, "SELECT state FROM tms.maintenance_jobs WHERE id = %s",
                       (jid,))[0][0] in ("succeeded", "failed"),
             timeout=120, what="the expiry job")
    state, expired, err = q(env, "SELECT state, snapshots_expired, last_error"
                                 " FROM tms.maintenance_jobs WHERE id = %s", (jid,))[0]
    assert (state, expired) == ("succeeded", 3), err
    _, meta2 = ow.load(cat, NS, "expire_me")
    assert len(meta2["snapshots"]) == 1
    commits = [r for r in catalog_requests(env, r"/tables/expire_me$") if r["method"] == "POST"]
    assert [r["status"] for r in commits] == [200]
    assert "content-type" in commits[0]["sigv4"]["signed_headers"]
    assert_all_signed(catalog_requests(env))
    assert all(st.exists(p) for p in ow.content_files(st, meta2))


def test_purge_drops_signed(env):
    cat = env["catalog"]
    cat.reset_requests()
    job = q(env, "SELECT tms.purge_table(%s, %s, 'purge_me')", (env["server"], NS))[0][0]
    wait_for(lambda: q(env, "SELECT state FROM tms.purge_jobs WHERE id = %s", (job,))[0][0]
             in ("SUCCEEDED", "FAILED"), timeout=120, what="the purge")
    state, deleted, err = q(env, "SELECT state, files_deleted, last_error FROM tms.purge_jobs"
                                 " WHERE id = %s", (job,))[0]
    assert state == "SUCCEEDED", err
    assert deleted == len(env["tables"]["purge_me"]["files"])
    drops = [r for r in catalog_requests(env, r"/tables/purge_me$") if r["method"] == "DELETE"]
    assert [r["status"] for r in drops] == [204]
    assert_all_signed(catalog_requests(env))
    assert "purge_me" not in [r[0] for r in q(env, "SELECT table_name FROM tms.list_tables(%s, %s)",
                                              (env["server"], NS))]


# ---------------------------------------------------------------------------
# refusals: a clean 28000, no secret anywhere
# ---------------------------------------------------------------------------

def other_server(env, **mapping):
    """A server on the same catalog whose mapping has other AWS keys."""
    name = "sig_%s" % uuid.uuid4().hex[:8]
    opts = dict(credential=CLIENT, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                aws_session_token=SESSION)
    opts.update(mapping)
    opts = {k: v for k, v in opts.items() if v is not None}
    q(env, "CREATE SERVER %s FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri %s,"
           " retries '0', signing_region '%s', signing_name '%s')"
           % (name, quote(env["catalog"].uri), REGION, SERVICE))
    q(env, "CREATE USER MAPPING FOR PUBLIC SERVER %s OPTIONS (%s)"
           % (name, ", ".join("%s %s" % (k, quote(v)) for k, v in opts.items())))
    return name


def refusal(env, server):
    """The error of listing through server: (SQLSTATE, message, detail, hint)."""
    with pytest.raises(psycopg2.Error) as e:
        q(env, "SELECT * FROM tms.list_namespaces(%s)", (server,))
    d = e.value.diag
    return e.value.pgcode, d.message_primary, d.message_detail or "", d.message_hint or ""


def assert_no_secret(*texts):
    for t in texts:
        for s in SECRETS:
            assert s not in t, (s, t)


@pytest.mark.parametrize("mapping,aws_type,message", [
    (dict(aws_secret_access_key="wJalrXUtnFEMI/WRONG-SIGV4-SECRET-KEY"),
     "InvalidSignatureException", "The request signature we calculated does not match"),
    (dict(aws_access_key_id="ASIAUNKNOWNKEY"),
     "UnrecognizedClientException", "The security token included in the request is invalid"),
    (dict(aws_session_token=None),
     "UnrecognizedClientException", "The security token included in the request is invalid"),
])
def test_refused_credentials_fail_cleanly(env, mapping, aws_type, message):
    srv = other_server(env, **mapping)
    env["catalog"].reset_requests()
    code, msg, detail, hint = refusal(env, srv)
    assert code == "28000", (code, msg, detail)
    assert msg.startswith("catalog configuration request failed with HTTP status 403")
    assert detail.startswith("%s: %s" % (aws_type, message)), detail
    assert "SigV4" in hint
    # the mismatch's message goes on with the canonical request (tokens in
    # it): only its first line reaches the client
    assert "Canonical String" not in detail
    assert_no_secret(msg, detail, hint, env["pg"].log_tail(400))
    seen = catalog_requests(env)
    assert [r["sigv4"] for r in seen] == [{"error": aws_type}]
    q(env, "DROP SERVER %s CASCADE" % srv)


def test_skewed_clock_and_iceberg_shape(env):
    """A clock 20 minutes off: "Signature expired", 28000, in AWS's shape
    and wrapped in the Iceberg error model alike."""
    cat = env["catalog"]
    srv = other_server(env)
    try:
        for shape in ("aws", "iceberg"):
            cat.set_sigv4(REGION, SERVICE, KEYS, clock_offset_seconds=1200, error_shape=shape)
            code, msg, detail, _ = refusal(env, srv)
            assert code == "28000", (shape, msg, detail)
            assert detail.startswith("InvalidSignatureException: Signature expired: "), detail
            assert_no_secret(msg, detail)
    finally:
        cat.set_sigv4(REGION, SERVICE, KEYS)
        q(env, "DROP SERVER %s CASCADE" % srv)
    # and the right clock again
    assert NS in [r[0] for r in q(env, "SELECT * FROM tms.list_namespaces(%s)", (env["server"],))]


def test_permission_denied_stays_42501(env):
    """A 403 that refuses the call, not the keys (AccessDeniedException)."""
    cat = env["catalog"]
    srv = other_server(env)
    cat.fault(r"/v1/config$", status=403, body=json.dumps(
        {"message": "User: arn:aws:iam::111122223333:user/tms is not authorized to perform:"
                    " glue:GetCatalog"}), headers={"x-amzn-ErrorType": "AccessDeniedException"})
    try:
        code, msg, detail, _ = refusal(env, srv)
        assert code == "42501" and detail.startswith("AccessDeniedException: User: arn:aws"), detail
    finally:
        cat.clear_faults()
        q(env, "DROP SERVER %s CASCADE" % srv)


def test_user_mappings_keep_the_keys(env):
    """The keys are in the user mapping only: not shown to other roles, not
    in any tms table."""
    q(env, "CREATE ROLE sigv4_other")
    try:
        conn = env["pg"].connect()
        try:
            env["pg"].query("SET ROLE sigv4_other", conn=conn)
            rows = env["pg"].query("SELECT umoptions FROM pg_user_mappings WHERE srvname = %s",
                                   (env["server"],), conn=conn)
        finally:
            conn.close()
        assert rows == [(None,)]
    finally:
        q(env, "DROP ROLE sigv4_other")
    dump = json.dumps(q(env, "SELECT row_to_json(j) FROM tms.maintenance_jobs j") or []) + \
        json.dumps(q(env, "SELECT row_to_json(p) FROM tms.purge_jobs p") or [])
    assert_no_secret(dump)
    assert SECRET not in dump and SESSION not in dump
