"""
goog4.py -- the test world's independent checks of Google Cloud Storage
credentials: the V4 signature of an HMAC-signed XML API request
(GOOG4-HMAC-SHA256) and the RS256 signature of a service account's JWT.

Written from Google's documentation, not from tms's code:
  https://cloud.google.com/storage/docs/authentication/signatures
  https://cloud.google.com/storage/docs/authentication/canonical-requests
  https://developers.google.com/identity/protocols/oauth2/service-account
and RFC 8017 (RSASSA-PKCS1-v1_5) for the JWT signature.  Only the Python
standard library: the RSA check is the textbook one (s^e mod n against
the EMSA-PKCS1-v1_5 encoding of the SHA-256 digest).

    canonical = canonical_request(method, raw_path, raw_query, headers, signed, payload)
    ok, why = verify_hmac(method, raw_path, raw_query, headers, body, secrets, now)
    ok = verify_rs256(signing_input, signature, n, e)
"""

import base64
import calendar
import hashlib
import hmac
import re
import time
import urllib.parse

ALGORITHM = "GOOG4-HMAC-SHA256"
AUTH_RE = re.compile(r"^GOOG4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/"
                     r"goog4_request,\s*SignedHeaders=([a-z0-9;._/-]+),\s*Signature=([0-9a-f]{64})$")
# the SHA-256 DigestInfo prefix of EMSA-PKCS1-v1_5 (RFC 8017, 9.2, note 1)
SHA256_PREFIX = bytes.fromhex("3031300d060960864801650304020105000420")
# how far a request's date may lie from now (Google allows 15 minutes)
MAX_SKEW_S = 15 * 60


def _encode(text):
    """Percent-encode every byte but A-Z a-z 0-9 - . _ ~ (canonical query)."""
    return urllib.parse.quote(text, safe="-_.~")


def canonical_query(raw_query):
    """Decode each name=value, encode it again, sort by name then value."""
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if not part:
            continue
        k, _, v = part.partition("=")
        pairs.append((_encode(urllib.parse.unquote(k)), _encode(urllib.parse.unquote(v))))
    pairs.sort()
    return "&".join("%s=%s" % kv for kv in pairs)


def canonical_headers(headers, signed):
    """name:value lines of the signed headers, names lowercase, values
    trimmed with inner runs of blanks made one space, repeats joined by
    ','; the names sorted."""
    lines = []
    for name in signed:
        values = [" ".join(v.split()) for k, v in headers if k.lower() == name]
        if not values:
            return None
        lines.append("%s:%s" % (name, ",".join(values)))
    return "\n".join(lines) + "\n"


def canonical_request(method, raw_path, raw_query, headers, signed, payload):
    """The canonical request: the path as sent (the XML API's path is
    encoded once, which is its canonical form), the canonical query and
    headers, the signed names, the payload hash."""
    hdrs = canonical_headers(headers, signed)
    if hdrs is None:
        return None
    return "\n".join([method, raw_path or "/", canonical_query(raw_query), hdrs,
                      ";".join(signed), payload])


def signing_key(secret, date, region, service):
    k = hmac.new(("GOOG4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "goog4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def verify_hmac(method, raw_path, raw_query, headers, body, secrets, now=None):
    """Check the Authorization header of a request.  headers: [(name,
    value)] as received; secrets: {access id: secret}.  Returns (access id,
    None) when it holds, else (None, (code, message))."""
    auth = [v for k, v in headers if k.lower() == "authorization"]
    if len(auth) != 1:
        return None, ("MissingSecurityHeader", "no Authorization header")
    m = AUTH_RE.match(auth[0].strip())
    if not m:
        return None, ("InvalidArgument", "malformed GOOG4-HMAC-SHA256 Authorization")
    access_id, date8, region, service, signed_text, signature = m.groups()
    if access_id not in secrets:
        return None, ("InvalidAccessKeyId", "unknown access id")
    if service != "storage":
        return None, ("InvalidArgument", "the scope's service must be storage")
    signed = signed_text.split(";")
    if signed != sorted(signed) or "host" not in signed:
        return None, ("InvalidArgument", "signed headers must be sorted and include host")
    dates = [v for k, v in headers if k.lower() == "x-goog-date"]
    if len(dates) != 1 or "x-goog-date" not in signed or not dates[0].startswith(date8):
        return None, ("InvalidArgument", "x-goog-date missing, unsigned or not of the scope")
    try:
        when = calendar.timegm(time.strptime(dates[0], "%Y%m%dT%H%M%SZ"))
    except ValueError:
        return None, ("InvalidArgument", "malformed x-goog-date")
    if abs((now or time.time()) - when) > MAX_SKEW_S:
        return None, ("RequestTimeTooSkewed", "the request's date is too far from now")
    payload = [v for k, v in headers if k.lower() == "x-goog-content-sha256"]
    payload = payload[0] if payload else "UNSIGNED-PAYLOAD"
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        return None, ("BadDigest", "x-goog-content-sha256 is not the body's")
    creq = canonical_request(method, raw_path, raw_query, headers, signed, payload)
    if creq is None:
        return None, ("InvalidArgument", "a signed header is missing")
    sts = "\n".join([ALGORITHM, dates[0], "%s/%s/%s/goog4_request" % (date8, region, service),
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(secrets[access_id], date8, region, service), sts.encode(),
                    hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, signature):
        return None, ("SignatureDoesNotMatch",
                      "The request signature we calculated does not match the signature "
                      "you provided.")
    return access_id, None


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_rs256(signing_input, signature, n, e):
    """RSASSA-PKCS1-v1_5 verification with SHA-256 (RFC 8017, 8.2.2)."""
    k = (n.bit_length() + 7) // 8
    if len(signature) != k:
        return False
    s = int.from_bytes(signature, "big")
    if s >= n:
        return False
    em = pow(s, e, n).to_bytes(k, "big")
    t = SHA256_PREFIX + hashlib.sha256(signing_input).digest()
    if k < len(t) + 11:
        return False
    expect = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return hmac.compare_digest(em, expect)
