"""
test_world_sigv4.py -- the test catalog's AWS SigV4 verifier
(test/catalog/sigv4.py) and the catalog verifying with it:

  - the verifier accepts every one of the 38 signed requests of the AWS
    SigV4 test suite (test/fixtures/sigv4/v4, header form), recomputing the
    suite's own canonical request, and refuses each of them once a part is
    wrong: the secret, the region, the service, the key id, the session
    token, the date (more than 15 minutes off either way), the body;
  - a catalog told to verify (--sigv4-* or POST /admin/sigv4) refuses an
    unsigned or badly signed /v1 request with the status, type and message
    AWS's front end uses (or the Iceberg error model when asked), before
    faults and routes; accepts the world's own signed requests; reads the
    bearer token from Original-Authorization; leaves the OAuth2 token
    endpoint and the admin endpoints alone; logs what it verified.

Run: /usr/bin/python3 -m pytest -q test/integration/test_world_sigv4.py
"""

import datetime
import json
import os
import sys
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import world  # noqa: E402
import sigv4  # noqa: E402  (test/catalog, on the path through world)

SUITE = os.path.join(world.FIXTURES_DIR, "sigv4", "v4")
CASES = sorted(os.listdir(SUITE)) if os.path.isdir(SUITE) else []


def parse_request(text):
    """A request of the suite's files: (method, path, query, [(name, value)],
    body).  The path may hold spaces (get-space-*); a line that starts with
    white space continues the header before it (get-header-value-multiline)."""
    head, _, body = text.partition("\n\n")
    lines = head.split("\n")
    method, _, rest = lines[0].partition(" ")
    target = rest[:rest.rindex(" HTTP/")]
    headers = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:
            name, value = headers[-1]
            headers[-1] = (name, value + "\n" + line)
            continue
        name, _, value = line.partition(":")
        headers.append((name, value))
    path, _, query = target.partition("?")
    return method, path, query, headers, body.encode()


def case(name):
    """(verifier, request, now, context) of one suite case."""
    d = os.path.join(SUITE, name)
    with open(os.path.join(d, "context.json")) as f:
        ctx = json.load(f)
    with open(os.path.join(d, "header-signed-request.txt")) as f:
        req = parse_request(f.read())
    cred = ctx["credentials"]
    v = sigv4.Verifier(ctx["region"], ctx["service"],
                       {cred["access_key_id"]: sigv4.Key(cred["secret_access_key"],
                                                         cred.get("token"))},
                       normalize=ctx["normalize"], strict=False)
    now = datetime.datetime.strptime(ctx["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    return v, req, now, ctx


def test_suite_is_complete():
    assert len(CASES) == 38, CASES


@pytest.mark.parametrize("name", CASES)
def test_verifier_accepts_the_suite(name):
    v, (method, path, query, headers, body), now, _ = case(name)
    info = v.verify(method, path, query, headers, body, now=now)
    with open(os.path.join(SUITE, name, "header-canonical-request.txt")) as f:
        assert info["canonical_request"] == f.read()
    with open(os.path.join(SUITE, name, "header-signature.txt")) as f:
        assert info["signature"] == f.read().strip()


def refused(v, req, now, **change):
    method, path, query, headers, body = req
    headers = change.get("headers", headers)
    with pytest.raises(sigv4.SigV4Error) as e:
        v.verify(method, path, query, headers, change.get("body", body), now=now)
    return e.value


def replace_header(headers, name, value):
    return [(k, value if k.lower() == name else v) for k, v in headers]


@pytest.mark.parametrize("name", CASES)
def test_verifier_refuses_what_is_wrong(name):
    v, req, now, ctx = case(name)
    key_id = next(iter(v.keys))
    key = v.keys[key_id]

    wrong = sigv4.Verifier(v.region, v.service, {key_id: sigv4.Key("x" + key.secret,
                                                                    key.session_token)},
                           normalize=v.normalize, strict=False)
    e = refused(wrong, req, now)
    assert (e.status, e.type) == (403, "InvalidSignatureException")
    assert e.message.startswith("The request signature we calculated does not match")

    e = refused(sigv4.Verifier("eu-west-1", v.service, v.keys, normalize=v.normalize,
                               strict=False), req, now)
    assert e.type == "InvalidSignatureException" and "valid region" in e.message
    e = refused(sigv4.Verifier(v.region, "glue", v.keys, normalize=v.normalize,
                               strict=False), req, now)
    assert e.type == "InvalidSignatureException" and "'glue'" in e.message

    e = refused(sigv4.Verifier(v.region, v.service, {"AKIDOTHER": key}, strict=False),
                req, now)
    assert e.type == "UnrecognizedClientException"

    # 15 minutes either way is the limit
    assert v.verify(*req, now=now + 15 * 60)
    assert v.verify(*req, now=now - 15 * 60)
    e = refused(v, req, now + 15 * 60 + 1)
    assert e.type == "InvalidSignatureException" and e.message.startswith("Signature expired")
    e = refused(v, req, now - 15 * 60 - 1)
    assert e.message.startswith("Signature not yet current")

    if key.session_token:
        # temporary keys are nothing without their token
        headers = [(k, val) for k, val in req[3] if k.lower() != "x-amz-security-token"]
        assert refused(v, req, now, headers=headers).type == "UnrecognizedClientException"
    if ctx["sign_body"]:
        e = refused(v, req, now, body=req[4] + b"x")
        assert e.type in ("InvalidSignatureException", "XAmzContentSHA256Mismatch")
    # the signature itself altered
    auth = [val for k, val in req[3] if k.lower() == "authorization"][0]
    forged = auth[:-1] + ("0" if auth[-1] != "0" else "1")
    e = refused(v, req, now, headers=replace_header(req[3], "authorization", forged))
    assert e.type == "InvalidSignatureException"


def test_verifier_refuses_missing_and_malformed_authorization():
    v, req, now, _ = case("get-vanilla")
    headers = [(k, val) for k, val in req[3] if k.lower() != "authorization"]
    e = refused(v, req, now, headers=headers)
    assert (e.status, e.type, e.message) == (403, "MissingAuthenticationTokenException",
                                             "Missing Authentication Token")
    e = refused(v, req, now, headers=replace_header(
        req[3], "authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/"
        "us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date"))
    assert e.type == "IncompleteSignatureException" and "'Signature'" in e.message
    e = refused(v, req, now, headers=replace_header(req[3], "x-amz-date", "yesterday"))
    assert e.type == "IncompleteSignatureException"


def test_strict_mode_wants_every_amz_header_signed():
    """post-sts-header-after sends its session token unsigned: AWS's suite
    accepts that, the catalog's strict mode does not (tms signs it, as
    Iceberg's signer does)."""
    v, req, now, _ = case("post-sts-header-after")
    assert v.verify(*req, now=now)
    strict = sigv4.Verifier(v.region, v.service, v.keys)
    e = refused(strict, req, now)
    assert e.type == "InvalidSignatureException" and "x-amz-security-token" in e.message


def test_signer_and_verifier_agree():
    """sign() (the world's own requests) makes what verify() accepts, bearer
    token relocated, session token signed."""
    v = sigv4.Verifier("eu-west-1", "glue",
                       {"AKID": sigv4.Key("s3cr3t", session_token="tok/en+=")})
    url = "http://127.0.0.1:8181/iceberg/v1/catalogs%2F1/namespaces/a%1Fb/tables?pageSize=2"
    h = v.sign("GET", url, {"Authorization": "Bearer abc", "Accept": "application/json"},
               b"", "AKID", now=1440938160)
    assert h["Original-Authorization"] == "Bearer abc" and "Authorization" in h
    info = v.verify("GET", "/iceberg/v1/catalogs%2F1/namespaces/a%1Fb/tables", "pageSize=2",
                    list(h.items()), b"", now=1440938160 + 60)
    assert "original-authorization" in info["signed_headers"] and info["session_token"]
    assert "/iceberg/v1/catalogs%252F1/namespaces/a%251Fb/tables\n" in info["canonical_request"]


# ---------------------------------------------------------------------------
# the catalog verifying
# ---------------------------------------------------------------------------

KEYS = {"AKIDTEST": {"secret": "wJalr/TEST+secret", "session_token": None}}


def raw_unsigned(cat, method, path, headers=None):
    req = urllib.request.Request(cat.uri + path, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_catalog_verifies_from_the_command_line(make_catalog):
    cat = make_catalog(sigv4={"region": "eu-west-1", "service": "glue", "keys": KEYS})
    assert cat.sigv4()["keys"] == ["AKIDTEST"] and "secret" not in json.dumps(cat.sigv4())
    st, body, headers = raw_unsigned(cat, "GET", "/v1/config")
    assert st == 403
    assert json.loads(body) == {"message": "Missing Authentication Token"}
    assert headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    # the world signs its own requests
    cat.create_namespace("signed")
    assert "signed" in [n[0] for n in cat.request("GET", "namespaces")["namespaces"]]
    log = cat.requests()["requests"]
    assert log[0]["sigv4"] == {"error": "MissingAuthenticationTokenException"}
    assert all(e["sigv4"]["access_key_id"] == "AKIDTEST" for e in log[1:])


def test_catalog_refusals_and_shapes(make_catalog):
    cat = make_catalog()
    cat.set_sigv4("us-east-1", "s3tables", KEYS)
    # another key, another region, another service: all refused by the catalog
    for spec, kind in [
            (dict(region="us-east-1", service="s3tables",
                  keys={"AKIDOTHER": {"secret": "x"}}), "UnrecognizedClientException"),
            (dict(region="us-west-2", service="s3tables", keys=KEYS), "InvalidSignatureException"),
            (dict(region="us-east-1", service="glue", keys=KEYS), "InvalidSignatureException"),
            (dict(region="us-east-1", service="s3tables",
                  keys={"AKIDTEST": {"secret": "wrong"}}), "InvalidSignatureException")]:
        cat.sign_as(**spec)
        st, body, headers = cat.raw("GET", "/v1/config")
        assert st == 403 and headers["x-amzn-ErrorType"] == kind, (spec, body)
        assert isinstance(body["message"], str)
    # the Iceberg error model, when asked
    cat.set_sigv4("us-east-1", "s3tables", KEYS, error_shape="iceberg")
    cat.sign_as("us-east-1", "s3tables", {"AKIDTEST": {"secret": "wrong"}})
    st, body, _ = cat.raw("GET", "/v1/config")
    assert st == 403 and body["error"]["type"] == "InvalidSignatureException"
    assert body["error"]["code"] == 403
    # a server clock 20 minutes ahead: the signature has expired
    cat.set_sigv4("us-east-1", "s3tables", KEYS, clock_offset_seconds=1200)
    st, body, _ = cat.raw("GET", "/v1/config")
    assert st == 403 and body["message"].startswith("Signature expired")
    # a refusal comes before faults: the fault still waits for its request
    cat.fault(r"/v1/config", status=500)
    cat.set_sigv4("us-east-1", "s3tables", {"AKIDTEST": {"secret": "other"}})
    cat.sign_as("us-east-1", "s3tables", KEYS)
    assert cat.raw("GET", "/v1/config")[0] == 403
    assert len(cat.armed_faults()) == 1
    cat.clear_sigv4()
    assert cat.raw("GET", "/v1/config")[0] == 500
    assert cat.raw("GET", "/v1/config")[0] == 200


def test_catalog_session_token_and_oauth(make_catalog):
    """Temporary keys need their token; the bearer token of OAuth2 is read
    from Original-Authorization, and the token endpoint is not signed."""
    cat = make_catalog(credential="client:secret")
    keys = {"ASIATEMP": {"secret": "tmp-secret", "session_token": "FwoGZXIvYXdz/token=="}}
    cat.set_sigv4("eu-west-1", "glue", keys)
    st, body, _ = cat.raw("GET", "/v1/config")      # token request unsigned, config signed
    assert st == 200, body
    log = [e for e in cat.requests()["requests"] if e["path"] == "/v1/config"]
    assert log[-1]["sigv4"]["session_token"] is True
    assert log[-1]["original_authorization"] == "present"
    assert "x-amz-security-token" in log[-1]["sigv4"]["signed_headers"]
    # a signed request without the bearer token: SigV4 passes, OAuth2 refuses
    v = sigv4.Verifier("eu-west-1", "glue", {"ASIATEMP": sigv4.Key(
        "tmp-secret", "FwoGZXIvYXdz/token==")})
    h = v.sign("GET", cat.uri + "/v1/config", {}, b"", "ASIATEMP")
    st, _, _ = raw_unsigned(cat, "GET", "/v1/config", h)
    assert st == 401
    # without the session token
    cat.sign_as("eu-west-1", "glue", {"ASIATEMP": {"secret": "tmp-secret"}})
    st, body, headers = cat.raw("GET", "/v1/config")
    assert st == 403 and headers["x-amzn-ErrorType"] == "UnrecognizedClientException"
