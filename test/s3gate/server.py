#!/usr/bin/python3
"""
server.py -- the S3 gate: an HTTP server of the test world placed in front of
s3rver, forwarding every request to it, that can throttle like S3 and
check credentials like S3, which s3rver does neither of.

    /usr/bin/python3 test/s3gate/server.py --port PORT --upstream http://127.0.0.1:S3PORT
        [--upstream-key S3RVER] [--admin-token TOKEN] [--verbose]
        [--flavor s3|azure]

With --flavor azure it stands in front of Azurite instead and throttles
like Azure Blob storage: the bulk delete is a Blob Batch request (POST
...?restype=container&comp=batch, its keys the Delete Blob sub-requests of
its multipart body), refused as a whole with 503 ServerBusy ("The server
is busy.", x-ms-error-code), or in mode "keys" forwarded with the allowed
sub-requests only (the outer request signed again with Azurite's
development key, as its Content-Length changed) and answered with a 503
ServerBusy sub-response for each of the others.  Credentials are not
checked in this flavor (Azurite checks SharedKey itself), except bearer
tokens, which Azurite takes over HTTPS only: once told where
(POST /admin/bearer {"verify_url": URL}), a request with "Authorization:
Bearer T" is let through when GET URL with that header answers 200 (the
test catalog's /v1/config, which checks the tokens it issued), signed
again with Azurite's development key, else answered 403
InvalidAuthenticationInfo.

It listens on 127.0.0.1 only, prints "gate listening on http://127.0.0.1:PORT"
once it accepts connections, and exits cleanly on SIGTERM/SIGINT.  Only the
Python standard library is used (and the test world's SigV4 verifier and
HTTP scaffolding, test/httpserve.py).

Throttling (off until configured): a token bucket of `rate` tokens a
second holding at most `burst`, refilled continuously.
  mode "request"   each request in scope takes a token; without one it is
                   answered 503 SlowDown as a whole ("Please reduce your
                   request rate.", with Retry-After when configured), as S3
                   answers past a prefix's request rate.
  mode "keys"      each key of a DeleteObjects request takes a token; the
                   keys that get one are forwarded (in a rewritten body),
                   the others come back inside the 200 answer as
                   <Error><Code>SlowDown</Code>, as S3 may answer a
                   DeleteObjects in part.
  scope "delete" (default) applies it to DeleteObjects only, "all" to
  every request.  An adaptive client sees fewer refusals over time; one
  that keeps its rate does not.

Injected errors (off until configured): S3's server errors other than
SlowDown, as a request may get them at any time (500 InternalError "We
encountered an internal error. Please try again.", 503 ServiceUnavailable
"Please reduce your request rate.", Azure's 500 InternalError and 503
ServerBusy in that flavor).  A request picked is answered with the error
and not forwarded, so it had no effect.  The pick counts requests (every
Nth of those in scope), so a client's order of requests decides which
fail, not a clock.  The scope is its methods (a LIST is a GET, a
DeleteObjects a POST) and the prefix of its User-Agent, so the one
client under test can get the errors while the test world's own clients
(the catalog, the test's checks) go through untouched.

Credentials (off until enabled): every request must carry an AWS SigV4
header signature (S3 rules: the path as sent is its own canonical form, a
query sorted by name, x-amz-content-sha256 the body's hash) of a key
registered here, recomputed independently of any client by the test
world's verifier (test/catalog/sigv4.py): an unknown key is
403 InvalidAccessKeyId, a wrong signature 403 SignatureDoesNotMatch, a
session token other than the key's (or none when it has one) 403
InvalidToken, and a key past its expiry 400 ExpiredToken ("The provided
token has expired."), as S3 answers for expired temporary credentials.

Requests go on to s3rver with its access key id in place of the client's
(s3rver checks the key id, not the signature) and without a session token.

Every request is logged with its outcome (GET /admin/log): when it was
received and when answered (seconds since the gate started), method,
path, kind, the keys of a DeleteObjects (count, first key), the key id
that signed it, the status sent back and why.

Admin endpoints (outside the S3 namespace: /admin/...; open unless
--admin-token is given, then they need "X-Admin-Token: TOKEN"):
  POST   /admin/throttle   {"rate": 20, "burst": 5, "mode": "request"|"keys",
                            "scope": "delete"|"all", "retry_after": null|SECONDS}
  DELETE /admin/throttle   no throttling
  POST   /admin/errors     {"every": N, "statuses": [500, 503], "methods":
                            ["GET", "PUT", "HEAD", "POST", "DELETE"],
                            "agent": "tms/"|null}: every Nth request of those
                           methods whose User-Agent starts with agent (any
                           agent when null) is answered with the next of
                           statuses in turn, before it reaches s3rver (below)
  DELETE /admin/errors     no injected errors
  POST   /admin/delay      {"seconds": S, "count": N, "scope": "delete"|"all"}:
                           the next N requests in scope wait S seconds
                           before they are forwarded (a storage that hangs)
  DELETE /admin/delay      no delays (and waiting requests go on at once)
  POST   /admin/credentials {"access_key_id": ..., "secret_access_key": ...,
                            "session_token": null, "expires_at": null|UNIX_TIME}
                           register (or replace) a key
  DELETE /admin/credentials forget every key
  POST   /admin/verify     {"enabled": true|false}: check credentials
  POST   /admin/bearer     {"verify_url": URL|null}: (azure) bearer tokens
                           checked by a GET of URL
  GET    /admin/log        {"requests": [...], "total": n}; ?since=SEQ for the
                           entries after SEQ
  DELETE /admin/log        reset the log
"""

import argparse
import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "catalog"))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import httpserve  # noqa: E402  (the test world's HTTP scaffolding)
import sigv4 as sigv4_mod  # noqa: E402  (the test world's one SigV4 verifier)
import storage as storage_mod  # noqa: E402  (the test world's SharedKey signer)

HOP_BY_HOP = ("expect", "connection", "keep-alive", "proxy-connection",
              "transfer-encoding", "te", "upgrade")


def xml_text(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def azure_error(code, message):
    return ("<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>%s</Code>"
            "<Message>%s</Message></Error>" % (code, xml_text(message))).encode()


AZ_PART = re.compile(rb"--(?P<b>[^\r\n]+)\r?\n(?P<head>.*?)\r?\n\r?\n(?P<req>DELETE (?P<path>\S+) HTTP/1\.1\r?\n.*?\r?\n\r?\n)",
                     re.S)


def azure_batch_parts(body):
    """The sub-requests of a Blob Batch body: [(content id, path, the part's
    text from its delimiter line on)]."""
    out = []
    for m in AZ_PART.finditer(body):
        cid = re.search(rb"Content-ID:\s*(\S+)", m.group("head"), re.I)
        out.append((cid.group(1).decode() if cid else str(len(out)),
                    urllib.parse.unquote(m.group("path").decode().split("?")[0]),
                    m.group(0)))
    return out


def s3_error(code, message):
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
            "<Message>%s</Message></Error>" % (code, xml_text(message))).encode()


# ---------------------------------------------------------------------------
# state
# ---------------------------------------------------------------------------

class Bucket:
    """A token bucket: `rate` tokens a second, at most `burst`."""

    def __init__(self, rate, burst):
        self.rate = float(rate)
        self.burst = max(float(burst), 1.0)
        self.tokens = self.burst
        self.at = time.monotonic()

    def take(self, n):
        """Take up to n whole tokens; the number taken."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        got = min(n, int(self.tokens))
        self.tokens -= got
        return got


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.throttle = None        # dict with "bucket"
        self.delay = None           # {"seconds", "count", "scope"}
        self.delay_released = threading.Event()
        self.errors = None          # {"every", "statuses", "methods", "agent", "seen", "sent"}
        self.keys = {}              # access key id -> {"secret", "token", "expires_at"}
        self.verify = False
        self.bearer_url = None      # azure: where bearer tokens are checked
        self.log = []
        self.seq = 0
        self.t0 = time.monotonic()

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            entry["t"] = round(time.monotonic() - self.t0, 4)
            self.log.append(entry)
            if len(self.log) > 200000:
                del self.log[:100000]


# ---------------------------------------------------------------------------
# SigV4, checked from the request as received (test/catalog/sigv4.py)
# ---------------------------------------------------------------------------

class Refused(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# the AWS JSON-service refusals of sigv4.Verifier as S3 words them
S3_CODES = {
    "MissingAuthenticationTokenException": (403, "AccessDenied"),
    "IncompleteSignatureException": (400, "AuthorizationHeaderMalformed"),
    "InvalidSignatureException": (403, "SignatureDoesNotMatch"),
    "XAmzContentSHA256Mismatch": (400, "XAmzContentSHA256Mismatch"),
}


def check_signature(state, method, raw_path, raw_query, headers, body):
    """The key id that signed the request, or Refused.  S3's rules: the path
    as sent is its own canonical form (no second encoding, no dot segments
    removed), every x-amz-* header signed; any region."""
    _, fields = sigv4_mod.parse_authorization(dict(headers).get("authorization", ""))
    scope = fields.get("Credential", "").split("/")
    key_id = scope[0] if scope else ""
    region = scope[2] if len(scope) == 5 else ""
    with state.lock:
        keys = {k: sigv4_mod.Key(v["secret"], v["token"]) for k, v in state.keys.items()}
        expires_at = state.keys.get(key_id, {}).get("expires_at")
    verifier = sigv4_mod.Verifier(region, "s3", keys, double_encode=False, normalize=False)
    try:
        verifier.verify(method, raw_path, raw_query, list(headers.items()), body)
    except sigv4_mod.SigV4Error as e:
        if e.type == "UnrecognizedClientException":
            if key_id not in keys:
                raise Refused(403, "InvalidAccessKeyId",
                              "The AWS Access Key Id you provided does not exist in our records.")
            raise Refused(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        status, code = S3_CODES.get(e.type, (403, "AccessDenied"))
        raise Refused(status, code, e.message.split("\n")[0])
    if expires_at is not None and time.time() >= expires_at:
        raise Refused(400, "ExpiredToken", "The provided token has expired.")
    return key_id


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

class Handler(httpserve.Handler):
    server_version = "tms-s3-gate/1"
    log_prefix = "gate"
    # a proxy: the answers carry s3rver's own Date and Server headers
    server_headers = False

    def _reply(self, status, body=b"", headers=None):
        self.reply(status, body, headers, "application/xml")

    # -- forwarding -------------------------------------------------------------

    def _upstream(self, method, path, body, headers):
        """Send to s3rver on this thread's keep-alive connection; (status,
        reason, headers, data)."""
        for attempt in (1, 2):
            up = getattr(self, "_up", None)
            if up is None:
                up = self._up = http.client.HTTPConnection(self.server.upstream_host,
                                                           self.server.upstream_port,
                                                           timeout=120)
            try:
                up.request(method, path, body=body, headers=headers)
                r = up.getresponse()
                return r.status, r.reason, r.getheaders(), r.read()
            except (http.client.HTTPException, ConnectionError, OSError):
                # s3rver closes idle keep-alive connections after 5 s
                up.close()
                self._up = None
                if attempt == 2:
                    raise

    def _forward(self, body, headers, entry):
        status, _, rh, data = self._upstream(self.command, self.path, body, headers)
        out = {k: v for k, v in rh if k.lower() not in HOP_BY_HOP + ("content-length",)}
        if self.command == "HEAD":
            # the length of the body a GET would have, as s3rver said
            self.reply(status, b"", out, None,
                       dict((k.lower(), v) for k, v in rh).get("content-length", "0"))
        else:
            self._reply(status, data, out)
        entry["status"] = status
        return status, data

    def _forward_keys(self, body, headers, keys, allowed, entry):
        """Forward the DeleteObjects of keys[:allowed]; the rest SlowDown."""
        refused = keys[allowed:]
        results = []
        status = 200
        if allowed > 0:
            sub = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Quiet>false</Quiet>" +
                   "".join("<Object><Key>%s</Key></Object>" % xml_text(k) for k in keys[:allowed]) +
                   "</Delete>").encode()
            h = dict(headers)
            h["Content-Length"] = str(len(sub))
            h["x-amz-content-sha256"] = hashlib.sha256(sub).hexdigest()
            h["Content-MD5"] = base64.b64encode(hashlib.md5(sub).digest()).decode()
            status, _, _, data = self._upstream("POST", self.path, sub, h)
            if status != 200:
                self._reply(status, data)
                entry["status"] = status
                return
            inner = re.search(rb"<DeleteResult[^>]*>(.*)</DeleteResult>", data, re.S)
            results.append(inner.group(1).decode() if inner else "")
        for k in refused:
            results.append("<Error><Key>%s</Key><Code>SlowDown</Code>"
                           "<Message>Please reduce your request rate.</Message></Error>"
                           % xml_text(k))
        doc = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult "
               "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">%s</DeleteResult>"
               % "".join(results)).encode()
        self._reply(200, doc)
        entry["status"] = 200

    def _resign(self, headers, method, body):
        """headers signed again with Azurite's development key (SharedKey),
        for a request whose authorisation the gate checked itself."""
        h = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        h["Content-Length"] = str(len(body))
        raw_path, _, raw_query = self.path.partition("?")
        account = raw_path.lstrip("/").split("/", 1)[0]
        sts = storage_mod.shared_key_string_to_sign(method, h, account, raw_path, raw_query)
        sig = base64.b64encode(hmac.new(base64.b64decode(storage_mod.AZURITE_KEY),
                                        sts.encode(), hashlib.sha256).digest()).decode()
        h["Authorization"] = "SharedKey %s:%s" % (account, sig)
        return h

    def _resign_parts(self, body):
        """A Blob Batch body whose sub-requests carry bearer tokens, each
        checked and signed again with the development key; None when one
        is refused."""
        out = []
        for m in re.finditer(rb"(--[^\r\n]+\r\n.*?\r\n\r\n)(DELETE (\S+) HTTP/1\.1\r\n)(.*?\r\n)\r\n",
                             body, re.S):
            lines = [ln for ln in m.group(4).decode().split("\r\n") if ln]
            hdrs = dict(ln.split(": ", 1) for ln in lines)
            auth = hdrs.pop("Authorization", "")
            if not auth.startswith("Bearer ") or not self._bearer_ok(auth[7:]):
                return None
            path, _, query = m.group(3).decode().partition("?")
            account = path.lstrip("/").split("/", 1)[0]
            sts = storage_mod.shared_key_string_to_sign("DELETE", hdrs, account, path, query)
            sig = base64.b64encode(hmac.new(base64.b64decode(storage_mod.AZURITE_KEY),
                                            sts.encode(), hashlib.sha256).digest()).decode()
            hdrs["Authorization"] = "SharedKey %s:%s" % (account, sig)
            out.append(m.group(1) + m.group(2) +
                       "".join("%s: %s\r\n" % kv for kv in hdrs.items()).encode() + b"\r\n")
        end = re.search(rb"--[^\r\n]+--\r?\n?$", body)
        return b"".join(out) + (end.group(0) if end else b"")

    def _bearer_ok(self, token):
        """Does the verifying URL take this bearer token (200)?"""
        u = urllib.parse.urlsplit(self.server.state.bearer_url)
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        try:
            conn.request("GET", u.path or "/", headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            r.read()
            return r.status == 200
        finally:
            conn.close()

    def _forward_parts(self, parts, headers, allowed, entry):
        """Forward the Blob Batch of parts[:allowed] (signed again: its
        length changed); the rest answered 503 ServerBusy."""
        boundary = "batchresponse_tms_gate"
        answers = []
        if allowed > 0:
            delim = parts[0][2].split(b"\n", 1)[0].rstrip(b"\r")
            sub = b"".join(p[2] for p in parts[:allowed]) + delim + b"--\r\n"
            h = self._resign(headers, "POST", sub)
            status, _, rh, data = self._upstream("POST", self.path, sub, h)
            if status != 202:
                self._reply(status, data)
                entry["status"] = status
                return
            ct = dict((k.lower(), v) for k, v in rh).get("content-type", "")
            up_boundary = ct.split("boundary=", 1)[-1].strip().strip('"')
            for chunk in data.split(b"--" + up_boundary.encode())[1:]:
                if chunk.startswith(b"--"):
                    break
                answers.append(chunk.strip(b"\r\n"))
        for cid, _, _ in parts[allowed:]:
            answers.append(("Content-Type: application/http\r\nContent-ID: %s\r\n\r\n"
                            "HTTP/1.1 503 The server is busy.\r\nx-ms-error-code: ServerBusy\r\n"
                            "x-ms-version: 2021-08-06\r\n" % cid).encode())
        doc = b"".join(b"--" + boundary.encode() + b"\r\n" + a + b"\r\n\r\n" for a in answers)
        doc += b"--" + boundary.encode() + b"--\r\n"
        self.reply(202, doc, None, "multipart/mixed; boundary=%s" % boundary)
        entry["status"] = 202

    # -- one request ------------------------------------------------------------

    def _handle(self):
        if self.path.startswith("/admin/"):
            return self._admin()
        state = self.server.state
        body = self.read_body()
        raw_path, _, raw_query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        azure = self.server.flavor == "azure"
        qs = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
        is_delete = self.command == "POST" and (
            qs.get("comp") == ["batch"] if azure else "delete" in qs)
        keys = []
        parts = []
        if is_delete and azure:
            parts = azure_batch_parts(body)
            keys = [p[1] for p in parts]
        elif is_delete:
            try:
                root = ET.fromstring(body)
                keys = [e.text or "" for e in root.iter() if e.tag.endswith("Key")]
            except ET.ParseError:
                keys = []
        entry = {"received": round(time.monotonic() - state.t0, 4),
                 "method": self.command, "path": raw_path, "query": raw_query,
                 "kind": "delete" if is_delete else self.command.lower(),
                 "keys": len(keys), "first_key": keys[0] if keys else None,
                 "bucket": raw_path.lstrip("/").split("/", 1)[0],
                 "outcome": "ok", "throttled_keys": 0, "access_key_id": None}
        try:
            if state.verify and not azure:
                try:
                    entry["access_key_id"] = check_signature(state, self.command, raw_path,
                                                             raw_query, headers, body)
                except Refused as r:
                    signer = re.search(r"Credential=([^/,]*)/", headers.get("authorization", ""))
                    entry["access_key_id"] = signer.group(1) if signer else None
                    entry["outcome"] = {"ExpiredToken": "expired"}.get(r.code, "denied")
                    entry["code"] = r.code
                    entry["status"] = r.status
                    self._reply(r.status, s3_error(r.code, r.message))
                    return
            fwd = self._upstream_headers()
            bearer = headers.get("authorization", "")
            if azure and state.bearer_url and bearer.startswith("Bearer "):
                entry["auth"] = "bearer"
                if not self._bearer_ok(bearer[7:]):
                    entry["outcome"] = "denied"
                    entry["status"] = 403
                    self._reply(403, azure_error("InvalidAuthenticationInfo",
                                                 "Authentication information is not given in"
                                                 " the correct format."),
                                {"x-ms-error-code": "InvalidAuthenticationInfo"})
                    return
                if is_delete:
                    body = self._resign_parts(body)
                    if body is None:
                        entry["outcome"] = "denied"
                        entry["status"] = 403
                        self._reply(403, azure_error("InvalidAuthenticationInfo",
                                                     "A sub-request's bearer token is refused."),
                                    {"x-ms-error-code": "InvalidAuthenticationInfo"})
                        return
                    parts = azure_batch_parts(body)
                fwd = self._resign(fwd, self.command, body)
            if self._maybe_error(entry, azure):
                return
            self._maybe_delay(is_delete)
            with state.lock:
                th = state.throttle
                in_scope = th is not None and (th["scope"] == "all" or is_delete)
                want = (len(keys) if th and th["mode"] == "keys" and is_delete else 1)
                got = th["bucket"].take(want) if in_scope else want
            if in_scope and th["mode"] == "keys" and is_delete and got < len(keys):
                entry["throttled_keys"] = len(keys) - got
                entry["outcome"] = "keys-throttled"
                if azure:
                    self._forward_parts(parts, fwd, got, entry)
                else:
                    self._forward_keys(body, fwd, keys, got, entry)
            elif in_scope and got < want:
                entry["outcome"] = "throttled"
                entry["status"] = 503
                extra = {}
                if th.get("retry_after") is not None:
                    extra["Retry-After"] = str(th["retry_after"])
                if azure:
                    extra["x-ms-error-code"] = "ServerBusy"
                    self._reply(503, azure_error("ServerBusy", "The server is busy."), extra)
                else:
                    self._reply(503, s3_error("SlowDown", "Please reduce your request rate."),
                                extra)
            else:
                self._forward(body, fwd, entry)
        finally:
            state.record(entry)

    def _upstream_headers(self):
        """The request's headers for s3rver, which checks the access key id
        (not the signature): the key a client signed with becomes the
        upstream's, its session token goes."""
        out = {}
        for k, v in self.headers.items():
            lk = k.lower()
            if lk in HOP_BY_HOP or lk == "x-amz-security-token":
                continue
            if lk == "authorization" and self.server.flavor != "azure":
                v = re.sub(r"Credential=[^/,]*/", "Credential=%s/" % self.server.upstream_key, v)
            out[k] = v
        return out

    def _maybe_error(self, entry, azure):
        """Answer an injected server error (and forward nothing) when this
        request is the next one picked; True when it was."""
        state = self.server.state
        with state.lock:
            e = state.errors
            if e is None or self.command not in e["methods"] or (
                    e["agent"] and not self.headers.get("User-Agent", "").startswith(e["agent"])):
                return False
            e["seen"] += 1
            if e["seen"] % e["every"] != 0:
                return False
            status = e["statuses"][e["sent"] % len(e["statuses"])]
            e["sent"] += 1
        entry["outcome"] = "injected"
        entry["status"] = status
        if azure:
            code, msg = {500: ("InternalError", "The server encountered an internal error."
                                                " Please retry the request."),
                         503: ("ServerBusy", "The server is busy.")}.get(
                status, ("InternalError", "injected"))
            self._reply(status, azure_error(code, msg), {"x-ms-error-code": code})
        else:
            code, msg = {500: ("InternalError", "We encountered an internal error."
                                                " Please try again."),
                         503: ("ServiceUnavailable", "Please reduce your request rate.")}.get(
                status, ("InternalError", "injected"))
            self._reply(status, s3_error(code, msg))
        return True

    def _maybe_delay(self, is_delete):
        state = self.server.state
        with state.lock:
            d = state.delay
            if d is None or d["count"] <= 0 or (d["scope"] == "delete" and not is_delete):
                return
            d["count"] -= 1
            seconds = d["seconds"]
            released = state.delay_released
        released.wait(seconds)

    # -- admin ------------------------------------------------------------------

    def _admin(self):
        state = self.server.state
        tok = self.server.admin_token
        if tok and self.headers.get("X-Admin-Token") != tok:
            return self.reply_error(403, "admin token required")
        raw = self.read_body()
        path, _, query = self.path.partition("?")
        try:
            spec = json.loads(raw) if raw else {}
        except ValueError:
            return self.reply_error(400, "body must be JSON")
        m = self.command
        with state.lock:
            if path == "/admin/throttle" and m == "POST":
                mode = spec.get("mode", "request")
                scope = spec.get("scope", "delete")
                if mode not in ("request", "keys") or scope not in ("delete", "all") or \
                        float(spec.get("rate", 0)) <= 0:
                    return self.reply_error(400, "rate > 0, mode request|keys, scope delete|all")
                state.throttle = {"bucket": Bucket(spec["rate"], spec.get("burst", 1)),
                                  "mode": mode, "scope": scope,
                                  "retry_after": spec.get("retry_after")}
                return self.reply_json(204)
            if path == "/admin/throttle" and m == "DELETE":
                state.throttle = None
                return self.reply_json(204)
            if path == "/admin/errors" and m == "POST":
                statuses = [int(x) for x in spec.get("statuses", [500, 503])]
                every = int(spec.get("every", 5))
                if every < 1 or not statuses or any(x < 500 or x > 599 for x in statuses):
                    return self.reply_error(400, "every >= 1, statuses 5xx")
                state.errors = {"every": every, "statuses": statuses,
                                "methods": [x.upper() for x in spec.get(
                                    "methods", ["GET", "PUT", "HEAD", "POST", "DELETE"])],
                                "agent": spec.get("agent"), "seen": 0, "sent": 0}
                return self.reply_json(204)
            if path == "/admin/errors" and m == "DELETE":
                n = state.errors["sent"] if state.errors else 0
                state.errors = None
                return self.reply_json(200, {"sent": n})
            if path == "/admin/delay" and m == "POST":
                state.delay = {"seconds": float(spec.get("seconds", 5)),
                               "count": int(spec.get("count", 1)),
                               "scope": spec.get("scope", "delete")}
                state.delay_released = threading.Event()
                return self.reply_json(204)
            if path == "/admin/delay" and m == "DELETE":
                state.delay = None
                state.delay_released.set()
                return self.reply_json(204)
            if path == "/admin/credentials" and m == "POST":
                if not spec.get("access_key_id") or not spec.get("secret_access_key"):
                    return self.reply_error(400, "access_key_id and secret_access_key")
                state.keys[spec["access_key_id"]] = {
                    "secret": spec["secret_access_key"],
                    "token": spec.get("session_token"),
                    "expires_at": spec.get("expires_at")}
                return self.reply_json(204)
            if path == "/admin/credentials" and m == "DELETE":
                state.keys = {}
                return self.reply_json(204)
            if path == "/admin/bearer" and m == "POST":
                state.bearer_url = spec.get("verify_url")
                return self.reply_json(204)
            if path == "/admin/verify" and m == "POST":
                state.verify = bool(spec.get("enabled"))
                return self.reply_json(204)
            if path == "/admin/log" and m == "GET":
                since = int(urllib.parse.parse_qs(query).get("since", ["0"])[0])
                entries = [e for e in state.log if e["seq"] > since]
                return self.reply_json(200, {"requests": entries, "total": state.seq})
            if path == "/admin/log" and m == "DELETE":
                state.log = []
                return self.reply_json(204)
        return self.reply_error(404, "no such admin route: %s %s" % (m, path))

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


def main(argv=None):
    p = argparse.ArgumentParser(description="S3 gate in front of s3rver for the tms tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of s3rver")
    p.add_argument("--upstream-key", default="S3RVER",
                   help="the access key id s3rver knows (requests go on with it)")
    p.add_argument("--admin-token")
    p.add_argument("--flavor", choices=("s3", "azure"), default="s3",
                   help="the store behind: s3rver, or Azurite (Blob Batch, ServerBusy)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    up = urllib.parse.urlsplit(args.upstream)
    server = httpserve.Server(args.port, Handler, verbose=args.verbose)
    server.state = State()
    server.upstream_host = up.hostname
    server.upstream_port = up.port or 80
    server.upstream_key = args.upstream_key
    server.flavor = args.flavor
    server.admin_token = args.admin_token
    httpserve.serve(server, "gate", on_stop=lambda: server.state.delay_released.set())
    return 0


if __name__ == "__main__":
    sys.exit(main())
