#!/usr/bin/python3
"""
server.py -- the Google Cloud Storage test server of the test world: the
parts of the XML and JSON APIs tms uses, an OAuth2 token endpoint for
service accounts, credential checks and injected throttling.  No GCS
emulator is installable here; this one is written from Google's
documentation (links below) and checks what it receives strictly.

    /usr/bin/python3 test/gcs/server.py --port PORT [--verbose]

It listens on 127.0.0.1 only, prints "gcs listening on http://127.0.0.1:PORT"
once it accepts connections, and exits cleanly on SIGTERM/SIGINT.  Objects
live in memory.  Only the Python standard library (and the test world's
HTTP scaffolding, test/httpserve.py, and its checks of Google credentials,
test/gcs/goog4.py).

The XML API (https://cloud.google.com/storage/docs/xml-api/overview):
  GET/HEAD/PUT/DELETE /BUCKET/NAME     objects (GET honours Range: 206, 416)
  GET /BUCKET?list-type=2&prefix=&max-keys=&continuation-token=
                                       ListObjectsV2, ListBucketResult
  POST /BUCKET/NAME?uploads, PUT ?partNumber=N&uploadId=ID,
  POST ?uploadId=ID (CompleteMultipartUpload), DELETE ?uploadId=ID
                                       XML multipart uploads
The JSON API (https://cloud.google.com/storage/docs/json_api):
  GET /storage/v1/b/BUCKET/o?prefix=&maxResults=&pageToken=
                                       objects.list (items: name, size as a
                                       string, updated; nextPageToken)
  DELETE /storage/v1/b/BUCKET/o/NAME   objects.delete (NAME encoded, '/' too)
  POST /batch/storage/v1               a batch (multipart/mixed) of at most
                                       100 objects.delete requests
                                       (https://cloud.google.com/storage/docs/batch)
Tokens (https://developers.google.com/identity/protocols/oauth2/service-account):
  POST /token                          grant_type=urn:ietf:params:oauth:grant-type:
                                       jwt-bearer&assertion=JWT -> an access token

Credentials (always checked; nothing is anonymous):
  - "Authorization: GOOG4-HMAC-SHA256 ..." (XML API only, as on GCS): the
    V4 signature recomputed by goog4.py with the registered secret; an
    unknown id is 403 InvalidAccessKeyId, a wrong signature 403
    SignatureDoesNotMatch, a date more than 15 minutes off 403
    RequestTimeTooSkewed;
  - "Authorization: Bearer TOKEN": a token this server issued at /token or
    was given through /admin/tokens, not past its expiry (else 401);
  - a JWT at /token: RS256 over header.claims with the public key of a
    registered service account (iss), aud this server's /token URL, iat
    not in the future, exp after now and at most an hour after iat, scope
    devstorage.read_write or full_control; else 400 invalid_grant.

Throttling (off until configured): the next COUNT requests in scope are
answered STATUS (429 or 503, with Retry-After when asked) as a whole;
scope "items" refuses the next COUNT objects inside batches with 429 in
their part of a 200 answer, as GCS may answer a batch in part.

Every request is logged (GET /admin/log): method, path, query, the kind of
credential (hmac, bearer, none) and whose, the status, the objects of a
batch.

Admin endpoints (outside both APIs, no credentials):
  POST   /admin/buckets          {"name": B}
  POST   /admin/hmac             {"access_id": ID, "secret": S}
  POST   /admin/service-accounts {"email": E, "n": HEX, "e": INT}  (public key)
  POST   /admin/tokens           {"token": T, "expires_at": UNIX|null, "who": NAME}
  POST   /admin/token-ttl        {"ttl": SECONDS} of the tokens /token issues
  POST   /admin/throttle         {"status": 429|503, "count": N,
                                  "scope": "all"|"delete"|"items"|"read"|"list",
                                  "retry_after": null|SECONDS}
  DELETE /admin/throttle
  POST   /admin/mtime            {"bucket": B, "name": N, "mtime": UNIX}
  GET    /admin/log, DELETE /admin/log
  GET    /admin/stats            {"objects": N, "tokens_issued": N, "uploads": N}

What it does not check: test/README.md ("The GCS test server").
"""

import argparse
import base64
import hashlib
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse
from email.utils import formatdate
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import goog4  # noqa: E402
import httpserve  # noqa: E402

BATCH_MAX = 100
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",
          "https://www.googleapis.com/auth/devstorage.full_control")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.buckets = {}           # name -> {object name: [data, mtime]}
        self.hmac = {}              # access id -> secret
        self.accounts = {}          # email -> (n, e)
        self.tokens = {}            # token -> {"expires_at", "who"}
        self.token_ttl = 3600
        self.tokens_issued = 0
        self.uploads = {}           # id -> {"bucket", "name", "parts": {n: bytes}}
        self.throttle = None
        self.log = []
        self.started = time.time()


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


class Handler(httpserve.Handler):
    log_prefix = "gcs"
    # A buffered answer, sent when the handler returns (http.server flushes
    # wfile after each request): so a request's entry is in the log before
    # its client has the whole answer, and a test that resets the log after
    # a request never sees that request's entry arrive late.
    wbufsize = -1

    # -- plumbing -------------------------------------------------------------

    @property
    def st(self):
        return self.server.state

    def do_GET(self):
        self.route("GET")

    def do_HEAD(self):
        self.route("HEAD")

    def do_PUT(self):
        self.route("PUT")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def xml_error(self, status, code, message, headers=None):
        body = ("<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code>"
                "<Message>%s</Message></Error>" % (escape(code), escape(message))).encode()
        self.reply(status, body, headers, "application/xml; charset=UTF-8")
        return status

    def json_error(self, status, reason, message, headers=None):
        self.reply_json(status, {"error": {"code": status, "message": message,
                                           "errors": [{"reason": reason, "message": message,
                                                       "domain": "global"}]}}, headers)
        return status

    def entry(self, **kw):
        e = dict(time=round(time.time() - self.st.started, 3), method=self.command,
                 path=self.raw_path, query=self.raw_query)
        e.update(kw)
        with self.st.lock:
            self.st.log.append(e)

    def route(self, method):
        self.raw_path, _, self.raw_query = self.path.partition("?")
        self.query = urllib.parse.parse_qs(self.raw_query, keep_blank_values=True)
        body = self.read_body()
        if self.raw_path.startswith("/admin/"):
            return self.admin(method, body)
        if self.raw_path == "/token":
            status = self.token(method, body)
            self.entry(auth="none", who=None, status=status)
            return
        json_api = self.raw_path.startswith("/storage/v1/") or \
            self.raw_path.startswith("/batch/storage/v1")
        err = self.json_error if json_api else self.xml_error
        kind, who, problem = self.authenticate(method, body, json_api)
        if problem is not None:
            status = err(*problem)
            self.entry(auth=kind, who=who, status=status, why=problem[2])
            return
        status = self.throttled(method, json_api, err)
        if status is None:
            try:
                status, items = self.dispatch(method, body, json_api, err)
            except Exception as exc:  # a bug here must show, not hang a client
                status, items = self.xml_error(500, "InternalError", repr(exc)), None
        else:
            items = None
        self.entry(auth=kind, who=who, status=status, items=items)

    # -- credentials ----------------------------------------------------------

    def authenticate(self, method, body, json_api):
        """(kind, who, None), or (kind, who, (status, code, message))."""
        auth = self.headers.get("Authorization")
        if auth is None:
            return "none", None, (401, "AuthenticationRequired", "Anonymous caller does not have access")
        if auth.startswith("Bearer "):
            tok = auth[7:].strip()
            with self.st.lock:
                t = self.st.tokens.get(tok)
            if t is None:
                return "bearer", None, (401, "authError", "Invalid Credentials")
            if t["expires_at"] is not None and time.time() >= t["expires_at"]:
                return "bearer", t["who"], (401, "authError", "Invalid Credentials (expired)")
            return "bearer", t["who"], None
        if auth.startswith("GOOG4-HMAC-SHA256 "):
            if json_api:
                return "hmac", None, (401, "authError",
                                      "HMAC keys authenticate XML API requests only")
            with self.st.lock:
                keys = dict(self.st.hmac)
            who, why = goog4.verify_hmac(method, self.raw_path, self.raw_query,
                                         list(self.headers.items()), body, keys)
            if why is not None:
                return "hmac", None, (403,) + why
            return "hmac", who, None
        return "other", None, (401, "AuthenticationRequired", "unsupported Authorization")

    def token(self, method, body):
        """The JWT bearer grant (RFC 7523) of a registered service account."""
        if method != "POST":
            return self.json_error(405, "methodNotAllowed", "POST only")
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        if form.get("grant_type") != [JWT_GRANT] or len(form.get("assertion", [])) != 1:
            self.reply_json(400, {"error": "unsupported_grant_type"})
            return 400
        why = self.check_jwt(form["assertion"][0])
        if why is not None:
            self.reply_json(400, {"error": "invalid_grant", "error_description": why})
            return 400
        tok = "ya29.test-" + secrets.token_urlsafe(24)
        with self.st.lock:
            self.st.tokens[tok] = {"expires_at": time.time() + self.st.token_ttl,
                                   "who": self.jwt_iss}
            self.st.tokens_issued += 1
            ttl = self.st.token_ttl
        self.reply_json(200, {"access_token": tok, "expires_in": ttl, "token_type": "Bearer"})
        return 200

    def check_jwt(self, jwt):
        parts = jwt.split(".")
        if len(parts) != 3:
            return "not a JWT"
        try:
            header = json.loads(goog4.b64url_decode(parts[0]))
            claims = json.loads(goog4.b64url_decode(parts[1]))
            sig = goog4.b64url_decode(parts[2])
        except ValueError:
            return "undecodable JWT"
        if header.get("alg") != "RS256" or header.get("typ", "JWT") != "JWT":
            return "alg must be RS256"
        self.jwt_iss = claims.get("iss")
        with self.st.lock:
            key = self.st.accounts.get(self.jwt_iss)
        if key is None:
            return "unknown service account"
        if not goog4.verify_rs256(("%s.%s" % (parts[0], parts[1])).encode(), sig, *key):
            return "Invalid JWT Signature."
        now = time.time()
        aud = "http://127.0.0.1:%d/token" % self.server.port
        if claims.get("aud") != aud:
            return "aud must be %s" % aud
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "iat and exp must be integers"
        if iat > now + 60 or exp <= now or exp - iat > 3600:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe"
        if not any(s in SCOPES for s in str(claims.get("scope", "")).split()):
            return "scope must allow writing objects"
        return None

    # -- throttling -----------------------------------------------------------

    def throttled(self, method, json_api, err):
        with self.st.lock:
            t = self.st.throttle
            if t is None or t["count"] <= 0 or t["scope"] == "items":
                return None
            kind = ("delete" if method == "DELETE" or self.raw_path.startswith("/batch/")
                    else "list" if json_api or "list-type" in self.query
                    else "read" if method in ("GET", "HEAD") else "write")
            if t["scope"] not in ("all", kind):
                return None
            t["count"] -= 1
        hdrs = {"Retry-After": str(t["retry_after"])} if t.get("retry_after") is not None else None
        return err(t["status"], "rateLimitExceeded" if json_api else "SlowDown",
                   "The rate of requests is too high; slow down.", hdrs)

    def take_item_refusal(self):
        with self.st.lock:
            t = self.st.throttle
            if t is None or t["scope"] != "items" or t["count"] <= 0:
                return False
            t["count"] -= 1
            return True

    # -- the APIs -------------------------------------------------------------

    def dispatch(self, method, body, json_api, err):
        if self.raw_path == "/batch/storage/v1" and method == "POST":
            return self.batch(body)
        if json_api:
            parts = self.raw_path.split("/")
            # /storage/v1/b/BUCKET/o[/NAME]
            if len(parts) >= 6 and parts[1:4] == ["storage", "v1", "b"] and parts[5] == "o":
                bucket = urllib.parse.unquote(parts[4])
                if len(parts) == 6 and method == "GET":
                    return self.json_list(bucket), None
                if len(parts) == 7 and method == "DELETE":
                    status = self.delete_object(bucket, urllib.parse.unquote(parts[6]))
                    if status == 204:
                        self.reply(204)
                    else:
                        self.json_error(404, "notFound", "No such object")
                    return status, None
            return self.json_error(404, "notFound", "no such JSON API route"), None
        path = urllib.parse.unquote(self.raw_path[1:])
        bucket, _, name = path.partition("/")
        with self.st.lock:
            known = bucket in self.st.buckets
        if not known:
            return err(404, "NoSuchBucket", "The specified bucket does not exist."), None
        if name == "":
            if method == "GET" and self.query.get("list-type") == ["2"]:
                return self.xml_list(bucket), None
            return err(400, "InvalidArgument", "unsupported bucket request"), None
        if "uploads" in self.query or "uploadId" in self.query:
            return self.multipart(method, bucket, name, body), None
        if method in ("GET", "HEAD"):
            return self.get_object(bucket, name), None
        if method == "PUT":
            with self.st.lock:
                self.st.buckets[bucket][name] = [body, time.time()]
            self.reply(200, b"", {"ETag": '"%s"' % hashlib.md5(body).hexdigest()})
            return 200, None
        if method == "DELETE":
            status = self.delete_object(bucket, name)
            if status == 204:
                self.reply(204)
            else:
                err(404, "NoSuchKey", "The specified key does not exist.")
            return status, None
        return err(405, "MethodNotAllowed", "not supported here"), None

    def delete_object(self, bucket, name):
        with self.st.lock:
            objs = self.st.buckets.get(bucket)
            if objs is None or name not in objs:
                return 404
            del objs[name]
            return 204

    def get_object(self, bucket, name):
        with self.st.lock:
            obj = self.st.buckets[bucket].get(name)
        if obj is None:
            return self.xml_error(404, "NoSuchKey", "The specified key does not exist.")
        data, mtime = obj
        hdrs = {"ETag": '"%s"' % hashlib.md5(data).hexdigest(),
                "Last-Modified": formatdate(mtime, usegmt=True),
                "x-goog-stored-content-length": str(len(data))}
        rng = self.headers.get("Range")
        if rng and self.command == "GET":
            if not rng.startswith("bytes="):
                return self.xml_error(400, "InvalidArgument", "bad Range")
            first, _, last = rng[6:].partition("-")
            first = int(first)
            last = int(last) if last else len(data) - 1
            if first >= len(data):
                return self.xml_error(416, "InvalidRange", "The requested range cannot be satisfied.")
            last = min(last, len(data) - 1)
            hdrs["Content-Range"] = "bytes %d-%d/%d" % (first, last, len(data))
            self.reply(206, data[first:last + 1], hdrs, "application/octet-stream")
            return 206
        self.reply(200, data, hdrs, "application/octet-stream", content_length=len(data))
        return 200

    def listing(self, bucket, prefix, start_after, limit):
        with self.st.lock:
            names = sorted((n, len(d), m) for n, (d, m) in self.st.buckets[bucket].items()
                           if n.startswith(prefix) and (start_after is None or n > start_after))
        return names[:limit], len(names) > limit

    def json_list(self, bucket):
        with self.st.lock:
            if bucket not in self.st.buckets:
                return self.json_error(404, "notFound", "The specified bucket does not exist.")
        prefix = self.query.get("prefix", [""])[0]
        limit = max(1, min(int(self.query.get("maxResults", ["1000"])[0]), 1000))
        token = self.query.get("pageToken", [None])[0]
        after = base64.urlsafe_b64decode(token.encode()).decode() if token else None
        page, more = self.listing(bucket, prefix, after, limit)
        doc = {"kind": "storage#objects",
               "items": [{"kind": "storage#object", "name": n, "bucket": bucket,
                          "size": str(size), "updated": rfc3339(m)} for n, size, m in page]}
        if more:
            doc["nextPageToken"] = base64.urlsafe_b64encode(page[-1][0].encode()).decode()
        self.reply_json(200, doc)
        return 200

    def xml_list(self, bucket):
        prefix = self.query.get("prefix", [""])[0]
        limit = max(1, min(int(self.query.get("max-keys", ["1000"])[0]), 1000))
        token = self.query.get("continuation-token", [None])[0]
        after = base64.urlsafe_b64decode(token.encode()).decode() if token else None
        page, more = self.listing(bucket, prefix, after, limit)
        out = ["<?xml version='1.0' encoding='UTF-8'?>"
               "<ListBucketResult xmlns='http://doc.s3.amazonaws.com/2006-03-01'>"
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
               "<MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>"
               % (escape(bucket), escape(prefix), len(page), limit, "true" if more else "false")]
        if more:
            out.append("<NextContinuationToken>%s</NextContinuationToken>"
                       % base64.urlsafe_b64encode(page[-1][0].encode()).decode())
        for n, size, m in page:
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified><Size>%d</Size>"
                       "</Contents>" % (escape(n), rfc3339(m), size))
        out.append("</ListBucketResult>")
        self.reply(200, "".join(out).encode(), None, "application/xml; charset=UTF-8")
        return 200

    def multipart(self, method, bucket, name, body):
        uid = self.query.get("uploadId", [None])[0]
        if method == "POST" and "uploads" in self.query:
            uid = secrets.token_hex(12)
            with self.st.lock:
                self.st.uploads[uid] = {"bucket": bucket, "name": name, "parts": {}}
            self.reply(200, ("<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
                             "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
                             "</InitiateMultipartUploadResult>"
                             % (escape(bucket), escape(name), uid)).encode(),
                       None, "application/xml")
            return 200
        with self.st.lock:
            up = self.st.uploads.get(uid)
        if up is None or up["bucket"] != bucket or up["name"] != name:
            return self.xml_error(404, "NoSuchUpload", "The specified upload does not exist.")
        if method == "PUT":
            n = int(self.query.get("partNumber", ["0"])[0])
            if not 1 <= n <= 10000:
                return self.xml_error(400, "InvalidArgument", "partNumber out of range")
            with self.st.lock:
                up["parts"][n] = body
            self.reply(200, b"", {"ETag": '"%s"' % hashlib.md5(body).hexdigest()})
            return 200
        if method == "DELETE":
            with self.st.lock:
                self.st.uploads.pop(uid, None)
            self.reply(204)
            return 204
        if method == "POST":
            import xml.etree.ElementTree as ET
            try:
                root = ET.fromstring(body)
            except ET.ParseError:
                return self.xml_error(400, "MalformedXML", "CompleteMultipartUpload is not XML")
            listed = [(int(p.findtext("PartNumber")), p.findtext("ETag").strip('"'))
                      for p in root.iter("Part")]
            if not listed or [n for n, _ in listed] != sorted(n for n, _ in listed):
                return self.xml_error(400, "InvalidPartOrder", "parts must be in order")
            data = []
            for n, etag in listed:
                part = up["parts"].get(n)
                if part is None or hashlib.md5(part).hexdigest() != etag:
                    return self.xml_error(400, "InvalidPart", "part %d is not as uploaded" % n)
                data.append(part)
            with self.st.lock:
                self.st.buckets[bucket][name] = [b"".join(data), time.time()]
                self.st.uploads.pop(uid, None)
            self.reply(200, ("<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
                             "<Bucket>%s</Bucket><Key>%s</Key></CompleteMultipartUploadResult>"
                             % (escape(bucket), escape(name))).encode(), None, "application/xml")
            return 200
        return self.xml_error(405, "MethodNotAllowed", "not supported here")

    def batch(self, body):
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/mixed") or "boundary=" not in ctype:
            return self.json_error(400, "invalid", "a batch must be multipart/mixed"), None
        boundary = ctype.split("boundary=", 1)[1].split(";")[0].strip().strip('"')
        delim = ("--" + boundary).encode()
        chunks = body.split(b"\r\n" + delim)
        if not body.startswith(delim) or not chunks[-1].startswith(b"--"):
            return self.json_error(400, "invalid", "malformed multipart body"), None
        first = chunks[0][len(delim):]
        parts = [first] + chunks[1:-1]
        if len(parts) > BATCH_MAX:
            return self.json_error(400, "invalid",
                                   "A batch request cannot contain more than %d calls" % BATCH_MAX), None
        out = []
        boundary_out = "batch_" + secrets.token_hex(8)
        names = []
        for part in parts:
            head, _, inner = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
            cid = None
            for line in head.split(b"\r\n"):
                k, _, v = line.decode().partition(":")
                if k.strip().lower() == "content-id":
                    cid = v.strip()
            reqline = inner.split(b"\r\n", 1)[0].decode()
            verb, _, rest = reqline.partition(" ")
            target = rest.rsplit(" ", 1)[0]
            segs = target.split("/")
            if verb != "DELETE" or len(segs) != 7 or segs[1:4] != ["storage", "v1", "b"] or \
                    segs[5] != "o":
                status, text = 400, json.dumps({"error": {"code": 400, "message": "only objects.delete"}})
            elif self.take_item_refusal():
                status, text = 429, json.dumps({"error": {"code": 429, "message": "rate limit",
                                                          "errors": [{"reason": "rateLimitExceeded"}]}})
            else:
                name = urllib.parse.unquote(segs[6])
                names.append(name)
                status = self.delete_object(urllib.parse.unquote(segs[4]), name)
                text = "" if status == 204 else json.dumps(
                    {"error": {"code": 404, "message": "No such object: %s" % name}})
            reason = {204: "No Content", 404: "Not Found", 429: "Too Many Requests"}.get(status, "Bad Request")
            out.append("--%s\r\nContent-Type: application/http\r\n%s\r\n"
                       "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=UTF-8\r\n"
                       "Content-Length: %d\r\n\r\n%s\r\n"
                       % (boundary_out, ("Content-ID: <response-%s>\r\n" % cid.strip("<>")) if cid else "",
                          status, reason, len(text.encode()), text))
        out.append("--%s--\r\n" % boundary_out)
        self.reply(200, "".join(out).encode(), None, "multipart/mixed; boundary=%s" % boundary_out)
        return 200, {"count": len(parts), "first": names[0] if names else None}

    # -- admin ----------------------------------------------------------------

    def admin(self, method, body):
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            return self.reply_error(400, "not JSON")
        st = self.st
        with st.lock:
            if self.raw_path == "/admin/buckets" and method == "POST":
                st.buckets.setdefault(doc["name"], {})
            elif self.raw_path == "/admin/hmac" and method == "POST":
                st.hmac[doc["access_id"]] = doc["secret"]
            elif self.raw_path == "/admin/service-accounts" and method == "POST":
                st.accounts[doc["email"]] = (int(doc["n"], 16), int(doc["e"]))
            elif self.raw_path == "/admin/tokens" and method == "POST":
                st.tokens[doc["token"]] = {"expires_at": doc.get("expires_at"),
                                           "who": doc.get("who", "admin")}
            elif self.raw_path == "/admin/token-ttl" and method == "POST":
                st.token_ttl = int(doc["ttl"])
            elif self.raw_path == "/admin/throttle" and method == "POST":
                st.throttle = {"status": int(doc.get("status", 503)), "count": int(doc["count"]),
                               "scope": doc.get("scope", "all"),
                               "retry_after": doc.get("retry_after")}
            elif self.raw_path == "/admin/throttle" and method == "DELETE":
                st.throttle = None
            elif self.raw_path == "/admin/mtime" and method == "POST":
                st.buckets[doc["bucket"]][doc["name"]][1] = float(doc["mtime"])
            elif self.raw_path == "/admin/log" and method == "GET":
                return self.reply_json(200, {"log": list(st.log)})
            elif self.raw_path == "/admin/log" and method == "DELETE":
                st.log = []
            elif self.raw_path == "/admin/stats" and method == "GET":
                return self.reply_json(200, {
                    "objects": sum(len(b) for b in st.buckets.values()),
                    "tokens_issued": st.tokens_issued, "uploads": len(st.uploads),
                    "throttle_left": st.throttle["count"] if st.throttle else 0})
            else:
                return self.reply_error(404, "no such admin route")
        self.reply_json(200, {})


def main(argv=None):
    p = argparse.ArgumentParser(description="Google Cloud Storage test server for the tms tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    server = httpserve.Server(args.port, Handler, verbose=args.verbose)
    server.state = State()
    httpserve.serve(server, "gcs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
