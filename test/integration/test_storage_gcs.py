"""
test_storage_gcs.py -- src/io's Google Cloud Storage backend (through the
command-line driver io_driver.c) against the GCS test server
(test/gcs/server.py), which checks every V4 signature (its own verifier,
test/gcs/goog4.py), every bearer token and every service account JWT
(RS256 with the public key of a key pair this module makes with openssl):

  - with an OAuth2 token: writes, ranged reads, sizes, listings over pages
    (JSON API, pageToken), deletes in JSON API batches of at most 100 (a
    missing object is deleted), an XML multipart upload above the part
    size;
  - with HMAC keys: the same through the XML API only (ListObjectsV2,
    one DELETE an object), signed GOOG4-HMAC-SHA256; a wrong secret is
    refused SignatureDoesNotMatch;
  - with a service account key: one token fetched at the key's token_uri
    and used for every request; a key the server does not know is refused;
  - 429 and 503 are retried with backoff; a batch's objects refused 429
    come back "SlowDown" (the delete pool's sign to slow down);
  - an expired token is refused; no secret (token, HMAC secret, private
    key) appears in an error.

Run: /usr/bin/python3 -m pytest -q test/integration/test_storage_gcs.py
"""

import json
import os
import subprocess
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import world  # noqa: E402

HMAC_ID = "GOOGTS7C7FUP3AIRVJTE2TESTID"
HMAC_SECRET = "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ"


@pytest.fixture(scope="module")
def driver():
    return world.built_driver("io_driver")


@pytest.fixture(scope="module")
def gcs():
    server = world.GcsServer()
    server.add_hmac(HMAC_ID, HMAC_SECRET)
    yield server
    server.stop()


def make_key_pair(directory):
    """An RSA key (PKCS#8 PEM) made with openssl, and its public modulus."""
    pem = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                    "rsa_keygen_bits:2048", "-out", pem], check=True, capture_output=True)
    mod = subprocess.run(["openssl", "rsa", "-in", pem, "-noout", "-modulus"], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert mod.startswith("Modulus=")
    with open(pem) as f:
        return f.read(), mod[len("Modulus="):]


@pytest.fixture(scope="module")
def service_account(gcs, tmp_path_factory):
    """A service account registered with the server, and its key file."""
    d = tmp_path_factory.mktemp("sa")
    pem, modulus = make_key_pair(str(d))
    email = "tms-test@tms-project.iam.gserviceaccount.com"
    gcs.add_service_account(email, modulus)
    key = {"type": "service_account", "project_id": "tms-project",
           "private_key_id": uuid.uuid4().hex, "private_key": pem, "client_email": email,
           "client_id": "1", "token_uri": gcs.token_uri}
    path = d / "key.json"
    path.write_text(json.dumps(key))
    return dict(email=email, path=str(path), pem=pem, key=key)


@pytest.fixture
def bucket(gcs):
    name = "b%s" % uuid.uuid4().hex[:12]
    gcs.create_bucket(name)
    gcs.reset_log()
    return name


class Driver:
    def __init__(self, exe, gcs, token=None, hmac=None, key_file=None, page=None,
                 part=None, retries=None):
        self.argv = [exe, "-G", gcs.endpoint]
        if token:
            self.argv += ["-O", token]
        if hmac:
            self.argv += ["-H", "%s:%s" % hmac]
        if key_file:
            self.argv += ["-J", key_file]
        if page:
            self.argv += ["-l", str(page)]
        if part:
            self.argv += ["-P", str(part)]
        if retries is not None:
            self.argv += ["-X", str(retries)]

    def run(self, *args, data=None, check=True):
        r = subprocess.run(self.argv + list(args), input=data, capture_output=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("driver %s failed (%d): %s" % (args, r.returncode,
                                                                r.stderr.decode()))
        return r

    def put(self, uri, data):
        self.run("put", uri, "-", data=data)

    def get(self, uri, *rng):
        return self.run("get", uri, *[str(x) for x in rng]).stdout

    def error(self, *args, data=None):
        r = self.run(*args, data=data, check=False)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        return r.stderr.decode().rstrip("\n").split("\t")

    def lines(self, *args):
        return [ln.split("\t") for ln in self.run(*args).stdout.decode().splitlines()]


def objects(gcs, bucket, prefix=""):
    return sorted(gcs.client().list(bucket, prefix))


# ---------------------------------------------------------------------------
# an OAuth2 token: XML API reads and writes, JSON API listings and batches
# ---------------------------------------------------------------------------

def test_token_put_get_ranges_size(driver, gcs, bucket):
    d = Driver(driver, gcs, token=gcs.token)
    data = bytes(range(256)) * 40
    uri = "gs://%s/t/a dir/file+1.bin" % bucket
    d.put(uri, data)
    assert gcs.client().get(bucket, "t/a dir/file+1.bin") == data
    assert d.get(uri) == data
    assert d.get(uri, 100, 50) == data[100:150]
    assert d.get(uri, len(data) - 5, 0) == data[-5:]
    assert d.get(uri, len(data) + 10, 5) == b""
    assert d.run("size", uri).stdout.decode().strip() == str(len(data))
    e = d.error("get", "gs://%s/missing" % bucket)
    assert e[1] == "not found" and e[2] == "404", e
    e = d.error("size", "gs://%s/missing" % bucket)
    assert e[1] == "not found", e
    log = gcs.log()
    assert log and all(x["auth"] == "bearer" and x["who"] == "world" for x in log), log
    assert [x["status"] for x in log if x["method"] == "GET"][:3] == [200, 200, 206]


def test_token_listing_pages(driver, gcs, bucket):
    names = ["l/%03d.parquet" % i for i in range(25)] + ["l2/sibling.parquet"]
    for n in names:
        gcs.client().put(bucket, n, b"x" * (len(n)))
    gcs.reset_log()
    d = Driver(driver, gcs, token=gcs.token, page=10)
    got = d.lines("list", "gs://%s/l/" % bucket)
    assert sorted(g[0] for g in got) == ["gs://%s/%s" % (bucket, n) for n in names[:25]]
    assert all(int(g[1]) == len(g[0].split("/", 3)[3]) for g in got)
    lists = [x for x in gcs.log() if x["path"] == "/storage/v1/b/%s/o" % bucket]
    assert len(lists) == 3 and "pageToken=" in lists[2]["query"], lists
    assert all("maxResults=10" in x["query"] and "prefix=l%2F" in x["query"] for x in lists)


def test_token_deletes_in_batches_of_100(driver, gcs, bucket, tmp_path):
    names = ["d/%04d" % i for i in range(250)]
    for n in names:
        gcs.client().put(bucket, n, b"1")
    gcs.reset_log()
    listfile = tmp_path / "uris"
    uris = ["gs://%s/%s" % (bucket, n) for n in names] + ["gs://%s/d/never-there" % bucket]
    listfile.write_text("\n".join(uris) + "\n")
    out = Driver(driver, gcs, token=gcs.token).lines("delete-from", str(listfile))
    assert len(out) == 251 and all(o[1] == "deleted" for o in out), \
        [o for o in out if o[1] != "deleted"][:3]
    assert objects(gcs, bucket, "d/") == []
    batches = [x for x in gcs.log() if x["path"] == "/batch/storage/v1"]
    assert [b["items"]["count"] for b in batches] == [100, 100, 51], batches


def test_token_multipart_upload(driver, gcs, bucket):
    d = Driver(driver, gcs, token=gcs.token, part=1000)
    data = os.urandom(3500)
    uri = "gs://%s/mp/big.parquet" % bucket
    d.put(uri, data)
    assert gcs.client().get(bucket, "mp/big.parquet") == data
    steps = [(x["method"], x["query"].split("&")[0].split("=")[0]) for x in gcs.log()
             if x["method"] != "GET"]
    assert steps == [("POST", "uploads")] + [("PUT", "partNumber")] * 4 + \
        [("POST", "uploadId")], steps
    assert gcs.stats()["uploads"] == 0
    # at most the part size: one PUT
    gcs.reset_log()
    d.put("gs://%s/mp/small" % bucket, data[:1000])
    assert [(x["method"], x["query"]) for x in gcs.log()] == [("PUT", "")]


# ---------------------------------------------------------------------------
# HMAC keys: V4 signatures, XML API only
# ---------------------------------------------------------------------------

def test_hmac_everything_through_the_xml_api(driver, gcs, bucket):
    d = Driver(driver, gcs, hmac=(HMAC_ID, HMAC_SECRET), page=7, part=2048)
    names = ["h/%02d x.bin" % i for i in range(12)]
    for n in names:
        d.put("gs://%s/%s" % (bucket, n), n.encode())
    d.put("gs://%s/h/big" % bucket, b"z" * 5000)
    assert d.get("gs://%s/%s" % (bucket, names[3]), 2, 3) == names[3].encode()[2:5]
    got = sorted(g[0] for g in d.lines("list", "gs://%s/h/" % bucket))
    assert got == sorted("gs://%s/%s" % (bucket, n) for n in names + ["h/big"])
    out = d.lines("delete", *got[:5], "gs://%s/h/missing" % bucket)
    assert all(o[1] == "deleted" for o in out), out
    log = gcs.log()
    assert log and all(x["auth"] == "hmac" and x["who"] == HMAC_ID for x in log), \
        [x for x in log if x["auth"] != "hmac"][:3]
    assert not [x for x in log if x["path"].startswith(("/storage/", "/batch/"))], \
        "HMAC keys reach only the XML API"
    lists = [x for x in log if "list-type=2" in x["query"]]
    assert len(lists) == 2 and "continuation-token=" in lists[1]["query"]
    assert len([x for x in log if x["method"] == "DELETE"]) == 6
    assert ("POST", "uploads") in [(x["method"], x["query"]) for x in log]


def test_hmac_wrong_secret_is_refused_and_not_shown(driver, gcs, bucket):
    d = Driver(driver, gcs, hmac=(HMAC_ID, "not-the-secret-42"))
    e = d.error("put", "gs://%s/x" % bucket, "-", data=b"abc")
    assert e[1] == "forbidden" and e[2] == "403" and "SignatureDoesNotMatch" in e[4], e
    assert "not-the-secret-42" not in "\t".join(e)
    e = Driver(driver, gcs, hmac=("GOOGUNKNOWN", HMAC_SECRET)).error("get", "gs://%s/x" % bucket)
    assert "InvalidAccessKeyId" in e[4] and HMAC_SECRET not in "\t".join(e), e
    assert objects(gcs, bucket) == []


# ---------------------------------------------------------------------------
# a service account key: the JWT bearer grant
# ---------------------------------------------------------------------------

def test_service_account_key_gets_one_token(driver, gcs, bucket, service_account):
    before = gcs.stats()["tokens_issued"]
    d = Driver(driver, gcs, key_file=service_account["path"])
    d.put("gs://%s/sa/one" % bucket, b"1")
    d.put("gs://%s/sa/two" % bucket, b"22")
    assert sorted(g[0] for g in d.lines("list", "gs://%s/sa/" % bucket)) == \
        ["gs://%s/sa/one" % bucket, "gs://%s/sa/two" % bucket]
    # each driver run is a process of its own: one token each, reused within
    assert gcs.stats()["tokens_issued"] == before + 3
    log = gcs.log()
    assert [x["path"] for x in log if x["path"] == "/token"] == ["/token"] * 3
    assert all(x["who"] == service_account["email"] for x in log if x["path"] != "/token")
    out = d.lines("delete", "gs://%s/sa/one" % bucket, "gs://%s/sa/two" % bucket)
    assert [o[1] for o in out] == ["deleted", "deleted"]
    assert objects(gcs, bucket) == []


def test_unknown_service_account_is_refused(driver, gcs, bucket, tmp_path):
    pem, _ = make_key_pair(str(tmp_path))
    key = {"type": "service_account", "private_key": pem, "token_uri": gcs.token_uri,
           "client_email": "stranger@elsewhere.iam.gserviceaccount.com"}
    path = tmp_path / "key.json"
    path.write_text(json.dumps(key))
    e = Driver(driver, gcs, key_file=str(path)).error("get", "gs://%s/x" % bucket)
    assert e[1] == "unauthorized" and e[2] == "400", e
    assert "PRIVATE KEY" not in "\t".join(e) and pem[40:80] not in "\t".join(e)


# ---------------------------------------------------------------------------
# throttling, expired tokens, secrets
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("status", [429, 503])
def test_throttled_requests_are_retried(driver, gcs, bucket, status):
    gcs.client().put(bucket, "th/x", b"payload")
    gcs.reset_log()
    gcs.throttle(status, 2, scope="read", retry_after=0)
    try:
        d = Driver(driver, gcs, token=gcs.token, retries=3)
        assert d.get("gs://%s/th/x" % bucket) == b"payload"
    finally:
        gcs.unthrottle()
    assert [x["status"] for x in gcs.log()] == [status, status, 200]
    # without retries the refusal is an error that says so
    gcs.throttle(status, 1, scope="read")
    try:
        e = Driver(driver, gcs, token=gcs.token).error("get", "gs://%s/th/x" % bucket)
    finally:
        gcs.unthrottle()
    assert e[1] == "service unavailable" and e[2] == str(status), e


def test_batch_objects_refused_429_come_back_slowdown(driver, gcs, bucket):
    for i in range(5):
        gcs.client().put(bucket, "s/%d" % i, b"x")
    gcs.throttle(429, 2, scope="items")
    try:
        out = Driver(driver, gcs, token=gcs.token).lines(
            "delete", *["gs://%s/s/%d" % (bucket, i) for i in range(5)])
    finally:
        gcs.unthrottle()
    assert [o[1] for o in out] == ["failed", "failed", "deleted", "deleted", "deleted"], out
    assert out[0][2] == "SlowDown" and out[1][2] == "SlowDown"
    assert objects(gcs, bucket, "s/") == ["s/0", "s/1"]


def test_expired_and_unknown_tokens_are_refused_and_not_shown(driver, gcs, bucket):
    gcs.add_token("ya29.expired-SECRETVALUE", 1.0, "old")
    for tok in ("ya29.expired-SECRETVALUE", "ya29.unknown-SECRETVALUE"):
        e = Driver(driver, gcs, token=tok).error("list", "gs://%s/" % bucket)
        assert e[1] == "unauthorized" and e[2] == "401", e
        assert "SECRETVALUE" not in "\t".join(e)


def test_bad_locations_are_refused(driver, gcs):
    d = Driver(driver, gcs, token=gcs.token)
    for uri in ("gs://UPPER/x", "gs://ab/x", "gs://bucket/a/../b"):
        e = d.error("get", uri)
        assert e[1] == "invalid argument", e
    assert not [x for x in gcs.log() if x["path"].startswith("/UPPER")]
