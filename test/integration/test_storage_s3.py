"""
test_storage_s3.py -- src/io's storage layer (through the command-line
driver io_driver.c) against s3rver and against a fake S3 that
checks every SigV4 signature and Content-MD5 and answers DeleteObjects
with per-key errors; plus local file storage.

s3rver does not verify signatures (it checks only the access key id), so the
fake server recomputes each request's signature independently (Python
hashlib/hmac, S3 rules: single URI encoding, no path normalisation) and
refuses a wrong one with 403 SignatureDoesNotMatch.

Run: /usr/bin/python3 -m pytest test/integration/test_storage_s3.py
"""

import base64
import hashlib
import hmac
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid
from xml.sax.saxutils import unescape as xml_unescape

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def driver():
    return world.built_driver("io_driver")


class Driver:
    def __init__(self, exe, endpoint, key="S3RVER", secret="S3RVER", token=None,
                 page=None, timeout_ms=None, roots=()):
        self.argv = [exe, "-e", endpoint, "-p", "1"]
        for r in roots:
            self.argv += ["-R", str(r)]
        if key:
            self.argv += ["-k", key, "-s", secret]
        if token:
            self.argv += ["-t", token]
        if page:
            self.argv += ["-l", str(page)]
        if timeout_ms:
            self.argv += ["-T", str(timeout_ms)]

    def run(self, *args, data=None, check=True):
        r = subprocess.run(self.argv + list(args), input=data, capture_output=True,
                           timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("driver %s failed (%d): %s" % (args, r.returncode,
                                                                r.stderr.decode()))
        return r

    def put(self, uri, data):
        self.run("put", uri, "-", data=data)

    def get(self, uri, *rng):
        return self.run("get", uri, *[str(x) for x in rng]).stdout

    def error(self, *args):
        r = self.run(*args, check=False)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        return r.stderr.decode().rstrip("\n").split("\t")

    def lines(self, *args, **kw):
        out = self.run(*args, **kw).stdout.decode()
        return [ln.split("\t") for ln in out.splitlines()]


@pytest.fixture(scope="module")
def s3(request):
    """An s3rver of this module (world.S3Server: listings of several pages
    work)."""
    server = world.S3Server()
    yield server
    server.stop()


@pytest.fixture
def bucket(s3):
    name = "b%s" % uuid.uuid4().hex[:12]
    s3.create_bucket(name)
    return name


# ---------------------------------------------------------------------------
# s3rver
# ---------------------------------------------------------------------------

def test_put_get_ranges_and_size(driver, s3, bucket):
    d = Driver(driver, s3.endpoint)
    data = bytes(range(256)) * 40
    for key in ["plain.bin", "dir/with space/и юникод+plus=eq&amp.bin", "a/b/c/d.avro"]:
        uri = "s3://%s/%s" % (bucket, key)
        d.put(uri, data)
        assert d.get(uri) == data
        assert d.get(uri, 100, 50) == data[100:150]
        assert d.get(uri, 10000, 0) == data[10000:]
        assert d.get(uri, len(data) - 5, 100) == data[-5:]
        assert d.get(uri, len(data) + 10, 5) == b""
        assert d.lines("size", uri) == [[str(len(data))]]
    # s3a / s3n are the same objects
    assert d.get("s3a://%s/plain.bin" % bucket, 0, 4) == data[:4]
    assert d.get("s3n://%s/plain.bin" % bucket, 0, 4) == data[:4]


def test_missing_object_and_bucket(driver, s3, bucket):
    d = Driver(driver, s3.endpoint)
    err = d.error("get", "s3://%s/nope" % bucket)
    assert err[1] == "not found" and err[2] == "404"
    assert "NoSuchKey" in err[4]
    err = d.error("get", "s3://no-such-bucket-%s/x" % uuid.uuid4().hex[:6])
    assert err[1] == "not found" and "NoSuchBucket" in err[4]


def test_wrong_access_key_is_forbidden(driver, s3, bucket):
    d = Driver(driver, s3.endpoint, key="WRONG", secret="WRONG-SECRET-VALUE")
    err = d.error("get", "s3://%s/x" % bucket)
    assert err[1] == "forbidden" and err[2] == "403"
    assert "WRONG-SECRET-VALUE" not in "\t".join(err)


def test_list_with_continuation(driver, s3, bucket):
    d = Driver(driver, s3.endpoint, page=10)
    keys = ["t/data/%03d.parquet" % i for i in range(25)] + ["t/metadata/v1.json",
                                                             "other/x"]
    for k in keys:
        d.put("s3://%s/%s" % (bucket, k), k.encode())
    got = d.lines("list", "s3a://%s/t/" % bucket)
    assert sorted(g[0] for g in got) == sorted("s3a://%s/%s" % (bucket, k)
                                               for k in keys if k.startswith("t/"))
    assert all(int(g[1]) == len(g[0].split("/", 3)[3]) for g in got)
    assert len(d.lines("list", "s3://%s/t/data/" % bucket)) == 25
    assert d.lines("list", "s3://%s/none/" % bucket) == []


def test_bulk_delete_in_batches(driver, s3, bucket, tmp_path):
    d = Driver(driver, s3.endpoint)
    client = s3.client()
    keys = ["del/%04d" % i for i in range(1005)]
    for k in keys + ["del/keep"]:
        client.put(bucket, k, b"x")
    uris = ["s3://%s/%s" % (bucket, k) for k in keys] + ["s3://%s/del/missing" % bucket]
    listing = tmp_path / "uris"
    listing.write_text("\n".join(uris) + "\n")
    res = d.lines("delete-from", str(listing))
    assert len(res) == 1006
    assert all(r[1] == "deleted" for r in res), [r for r in res if r[1] != "deleted"][:3]
    # "del/keep" stays: s3rver deletes a batch's keys concurrently and fails
    # with a 500 (ENOENT in scandir) when their directory becomes empty
    assert d.lines("list", "s3://%s/del/" % bucket) == [["s3://%s/del/keep" % bucket, "1"]]


# ---------------------------------------------------------------------------
# a fake S3 that checks signatures and reports per-key delete errors
# ---------------------------------------------------------------------------

def _enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def expected_signature(method, raw_path, raw_query, headers, secret, body):
    """Recompute an S3 SigV4 header signature from the request as received."""
    auth = headers["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 ")
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    _, date, region, service, term = fields["Credential"].split("/")
    assert service == "s3" and term == "aws4_request"
    signed = fields["SignedHeaders"].split(";")
    assert signed == sorted(signed)
    for must in ("host", "x-amz-content-sha256", "x-amz-date"):
        assert must in signed
    params = []
    for part in raw_query.split("&") if raw_query else []:
        k, _, v = part.partition("=")
        params.append((_enc(urllib.parse.unquote(k)), _enc(urllib.parse.unquote(v))))
    cq = "&".join("%s=%s" % kv for kv in sorted(params))
    ch = "".join("%s:%s\n" % (h, " ".join(headers[h].split())) for h in signed)
    payload = headers["x-amz-content-sha256"]
    assert payload == hashlib.sha256(body).hexdigest()
    creq = "\n".join([method, raw_path, cq, ch, fields["SignedHeaders"], payload])
    amz_date = headers["x-amz-date"]
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "/".join([date, region, service, term]),
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for m in (date, region, service, term):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    return fields["Signature"], hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


class FakeS3(http.server.BaseHTTPRequestHandler):
    secret = "fake-secret"
    log = []

    def log_message(self, *a):
        pass

    def _reply(self, status, body=b"", ctype="application/xml"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        raw_path, _, raw_query = self.path.partition("?")
        entry = {"method": method, "path": raw_path, "query": raw_query,
                 "headers": dict(self.headers), "body": body}
        FakeS3.log.append(entry)
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        hdrs["Authorization"] = self.headers.get("Authorization", "")
        try:
            got, want = expected_signature(method, raw_path, raw_query, hdrs,
                                           self.secret, body)
        except (AssertionError, KeyError, ValueError) as e:
            entry["sig_error"] = repr(e)
            return self._reply(400, b"<Error><Code>BadRequest</Code><Message>%s</Message>"
                               b"</Error>" % repr(e).encode())
        entry["signature_ok"] = got == want
        if got != want:
            return self._reply(403, b"<Error><Code>SignatureDoesNotMatch</Code>"
                               b"<Message>bad signature</Message></Error>")
        if method == "POST" and raw_query == "delete=":
            md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
            if hdrs.get("content-md5") != md5:
                return self._reply(400, b"<Error><Code>InvalidDigest</Code></Error>")
            keys = [k.decode() for k in
                    __import__("re").findall(rb"<Key>(.*?)</Key>", body)]
            keys = [xml_unescape(k) for k in keys]
            out = ["<?xml version='1.0' encoding='UTF-8'?><DeleteResult>"]
            for k in keys:
                esc = k.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                if "locked" in k:
                    out.append("<Error><Key>%s</Key><Code>AccessDenied</Code>"
                               "<Message>Access &amp; denied</Message></Error>" % esc)
                else:
                    out.append("<Deleted><Key>%s</Key></Deleted>" % esc)
            out.append("</DeleteResult>")
            return self._reply(200, "".join(out).encode())
        if method == "GET" and "list-type=2" in raw_query:
            q = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
            token = q.get("continuation-token")
            if not token:
                body = ("<ListBucketResult><IsTruncated>true</IsTruncated>"
                        "<Contents><Key>p/a &amp; b</Key><Size>3</Size></Contents>"
                        "<NextContinuationToken>tok/+=1</NextContinuationToken>"
                        "</ListBucketResult>")
            else:
                assert token == "tok/+=1", token
                body = ("<ListBucketResult><IsTruncated>false</IsTruncated>"
                        "<Contents><Key>p/c</Key><Size>4</Size></Contents>"
                        "</ListBucketResult>")
            return self._reply(200, body.encode())
        if method == "PUT":
            return self._reply(200)
        if method == "GET":
            return self._reply(200, b"0123456789", "application/octet-stream")
        return self._reply(400)

    def do_GET(self):
        self._handle("GET")

    def do_PUT(self):
        self._handle("PUT")

    def do_POST(self):
        self._handle("POST")

    def do_HEAD(self):
        self._handle("HEAD")


@pytest.fixture
def fake_s3():
    FakeS3.log = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeS3)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_signatures_verified_independently(driver, fake_s3):
    d = Driver(driver, fake_s3, key="AKIDFAKE", secret=FakeS3.secret,
               token="session/token+with=chars")
    d.put("s3://bkt/dir/a b+c=d&e~f.txt", b"hello")
    assert d.get("s3://bkt/dir/x%y.bin") == b"0123456789"
    got = d.lines("list", "s3://bkt/p/")
    assert [g[0] for g in got] == ["s3://bkt/p/a & b", "s3://bkt/p/c"]
    assert all(e.get("signature_ok") for e in FakeS3.log), [
        (e["method"], e["path"], e.get("sig_error")) for e in FakeS3.log]
    assert all(e["headers"].get("X-Amz-Security-Token") == "session/token+with=chars"
               for e in FakeS3.log)
    put = FakeS3.log[0]
    assert put["path"] == "/bkt/dir/a%20b%2Bc%3Dd%26e~f.txt"
    # a wrong secret is caught by the checker
    bad = Driver(driver, fake_s3, key="AKIDFAKE", secret="not-the-secret")
    err = bad.error("get", "s3://bkt/x")
    assert err[1] == "forbidden" and "SignatureDoesNotMatch" in err[4]


def test_delete_reports_per_key_errors(driver, fake_s3):
    d = Driver(driver, fake_s3, key="AKIDFAKE", secret=FakeS3.secret)
    uris = ["s3://bkt/k/%04d" % i for i in range(1001)] + [
        "s3://bkt/k/locked & <odd>", "s3://other/k/x", "relative/path"]
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("\n".join(uris) + "\n")
    res = d.lines("delete-from", f.name)
    os.unlink(f.name)
    by = {r[0]: r for r in res}
    assert all(by[u][1] == "deleted" for u in uris[:1001])
    assert by["s3://bkt/k/locked & <odd>"][1:] == ["failed", "AccessDenied", "Access & denied"]
    assert by["s3://other/k/x"][1] == "deleted"
    assert by["relative/path"][1:3] == ["failed", "InvalidLocation"]
    posts = [e for e in FakeS3.log if e["method"] == "POST"]
    # bucket bkt: 1002 keys -> 1000 + 2; bucket other: 1
    sizes = sorted(e["body"].count(b"<Object>") for e in posts)
    assert sizes == [1, 2, 1000]
    for e in posts:
        h = {k.lower(): v for k, v in e["headers"].items()}
        assert h["content-md5"] == base64.b64encode(hashlib.md5(e["body"]).digest()).decode()


# ---------------------------------------------------------------------------
# local files
# ---------------------------------------------------------------------------

def test_file_storage(driver, tmp_path):
    d = Driver(driver, "http://127.0.0.1:1", key=None, roots=[tmp_path])
    uri = "file://%s/t/data/a.parquet" % tmp_path
    d.put(uri, b"abcdef")
    d.put(str(tmp_path / "t" / "metadata" / "v1.json"), b"{}")
    assert d.get(uri, 2, 2) == b"cd"
    got = sorted(g[0] for g in d.lines("list", "file://%s/t" % tmp_path))
    assert got == ["file://%s/t/data/a.parquet" % tmp_path,
                   "file://%s/t/metadata/v1.json" % tmp_path]
    res = d.lines("delete", uri, uri + ".missing")
    assert [r[1] for r in res] == ["deleted", "deleted"]
    assert d.error("get", uri)[1] == "not found"
    # the file system root is outside the allowed locations
    assert d.error("list", "file:///")[1] == "forbidden"
    # and so is everything without a root
    assert Driver(driver, "http://127.0.0.1:1", key=None).error("get", uri)[1] == "forbidden"
