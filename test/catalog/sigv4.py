"""
sigv4.py -- an AWS Signature Version 4 verifier for the tms test catalog.

AWS Glue's and S3 Tables' Iceberg REST endpoints (and API Gateway in front
of a catalog) accept only requests signed with SigV4.  The test catalog
(server.py, --sigv4-region / POST /admin/sigv4) checks the signature of every
catalog request with this module, the way such a front end does: it
recomputes the canonical request from the request as it arrived (method,
raw path, raw query, headers, body) with the Python standard library (hmac,
hashlib), independently of the C signer (src/io/http/aws_sigv4.c), and refuses what
it cannot verify with the status, error type and message AWS uses.

    v = Verifier("eu-west-1", "glue", {"AKID": Key("secret", session_token=None)})
    info = v.verify("GET", "/v1/config", "warehouse=wh", [("Host", "..."), ...],
                    b"", now=time.time())      # raises SigV4Error when refused
    headers = v.sign("GET", url, {"Accept": "..."}, b"", "AKID")   # the test
                    # world's own requests (world.CatalogServer), by the same rules

Rules (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html):
  * header form only: Authorization "AWS4-HMAC-SHA256 Credential=ID/DATE/
    REGION/SERVICE/aws4_request, SignedHeaders=a;b, Signature=HEX";
  * canonical URI: the raw path, dot segments removed and slashes merged
    (normalize), then percent-encoded again (double_encode, the rule of
    every service but S3; with it off the raw path is taken as it is);
  * canonical query: parameters percent-decoded, encoded per RFC 3986,
    sorted by name then value; a name without '=' has an empty value;
  * canonical headers: each signed header's values as received, trimmed,
    whitespace runs collapsed, repeated headers joined with ',';
  * payload hash: sha256 of the body received; an x-amz-content-sha256
    header must equal it (hex);
  * X-Amz-Date within max_skew seconds (AWS: 15 minutes) of now, its day
    equal to the credential scope's;
  * strict (the catalog's mode): Host, X-Amz-Date, every x-amz-* header and
    Original-Authorization (a bearer token that SigV4 displaced) must be
    signed.  The AWS suite has an unsigned session token (post-sts-header-
    after), so its check runs with strict=False.

Refusals (SigV4Error: status, type, message), as AWS's front end words them:
  403 MissingAuthenticationTokenException  no Authorization header
  403 IncompleteSignatureException         a malformed one, no X-Amz-Date
  403 UnrecognizedClientException          unknown key id, wrong or missing
                                           session token
  403 InvalidSignatureException            wrong region or service, stale or
                                           future date, unsigned header,
                                           signature mismatch (the message
                                           then carries the canonical request
                                           and string to sign expected, as
                                           AWS's JSON services do)
  400 XAmzContentSHA256Mismatch            x-amz-content-sha256 is not the
                                           body's sha256
"""

import datetime
import hashlib
import hmac
import time
import urllib.parse

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_SECONDS = 15 * 60


class SigV4Error(Exception):
    """A refused request: HTTP status, AWS error type, message."""

    def __init__(self, status, type_, message):
        super().__init__("%s: %s" % (type_, message))
        self.status = status
        self.type = type_
        self.message = message


class Key:
    """A secret access key and, for temporary credentials, the session
    token every request signed with it must carry."""

    def __init__(self, secret, session_token=None):
        self.secret = secret
        self.session_token = session_token


def uri_encode(text, encode_slash=True):
    """RFC 3986 percent-encoding of text (str or bytes, UTF-8): every byte
    but A-Z a-z 0-9 - _ . ~ (and '/' unless encode_slash)."""
    return urllib.parse.quote(text, safe="-_.~" if encode_slash else "-_.~/")


def normalize_path(path):
    """Remove dot segments and merge slashes; a trailing slash stays."""
    out = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if out:
                out.pop()
            continue
        out.append(seg)
    trailing = path.endswith(("/", "/.", "/..")) or path in (".", "..")
    result = "/" + "/".join(out)
    if trailing and out:
        result += "/"
    return result


def canonical_uri(raw_path, double_encode=True, normalize=True):
    path = raw_path or "/"
    if normalize:
        path = normalize_path(path)
    return uri_encode(path, encode_slash=False) if double_encode else path


def canonical_query(raw_query):
    params = []
    for part in raw_query.split("&") if raw_query else []:
        if not part:
            continue
        name, _, value = part.partition("=")
        params.append((uri_encode(urllib.parse.unquote(name)),
                       uri_encode(urllib.parse.unquote(value))))
    return "&".join("%s=%s" % p for p in sorted(params))


def header_values(headers, name):
    """The values of header name (any case) in the order they arrived."""
    return [v for k, v in headers if k.strip().lower() == name]


def canonical_header_value(value):
    return " ".join(value.split())


def parse_authorization(value):
    """The fields of an Authorization header: (algorithm, {Credential,
    SignedHeaders, Signature})."""
    algorithm, _, rest = value.strip().partition(" ")
    fields = {}
    for part in rest.split(","):
        k, sep, v = part.strip().partition("=")
        if sep:
            fields[k.strip()] = v.strip()
    return algorithm, fields


def signing_key(secret, date, region, service):
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def parse_amz_date(text):
    return datetime.datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc)


def amz_date(t):
    return t.strftime("%Y%m%dT%H%M%SZ")


class Verifier:
    """Checks requests for one region and service against known keys
    ({access key id: Key})."""

    def __init__(self, region, service, keys, max_skew=MAX_SKEW_SECONDS,
                 double_encode=True, normalize=True, strict=True):
        self.region = region
        self.service = service
        self.keys = dict(keys)
        self.max_skew = max_skew
        self.double_encode = double_encode
        self.normalize = normalize
        self.strict = strict

    def canonical_request(self, method, raw_path, raw_query, headers, signed,
                          payload_hash):
        lines = [method, canonical_uri(raw_path, self.double_encode, self.normalize),
                 canonical_query(raw_query)]
        for name in signed:
            lines.append("%s:%s" % (name, ",".join(
                canonical_header_value(v) for v in header_values(headers, name))))
        return "\n".join(lines) + "\n\n" + ";".join(signed) + "\n" + payload_hash

    def verify(self, method, raw_path, raw_query, headers, body, now=None):
        """Check one request (headers: (name, value) pairs as received;
        body: bytes).  Returns what was verified ({access_key_id,
        signed_headers, amz_date, signature, session_token}); raises
        SigV4Error otherwise."""
        now = datetime.datetime.fromtimestamp(now if now is not None else time.time(),
                                              tz=datetime.timezone.utc)
        auth = header_values(headers, "authorization")
        if not auth:
            raise SigV4Error(403, "MissingAuthenticationTokenException",
                             "Missing Authentication Token")
        algorithm, fields = parse_authorization(auth[0])
        if algorithm != ALGORITHM:
            raise SigV4Error(403, "IncompleteSignatureException",
                             "Unsupported authorization type: %r" % algorithm)
        missing = [f for f in ("Credential", "SignedHeaders", "Signature") if f not in fields]
        if missing:
            raise SigV4Error(403, "IncompleteSignatureException", " ".join(
                "Authorization header requires '%s' parameter." % f for f in missing))
        scope = fields["Credential"].split("/")
        if len(scope) != 5 or scope[4] != "aws4_request":
            raise SigV4Error(403, "IncompleteSignatureException",
                             "Credential should be scoped with a valid terminator: "
                             "'aws4_request', not %r." % fields["Credential"].split("/")[-1])
        key_id, date, region, service, _ = scope
        dates = header_values(headers, "x-amz-date")
        if not dates:
            raise SigV4Error(403, "IncompleteSignatureException",
                             "Authorization header requires existence of either a "
                             "'X-Amz-Date' or a 'Date' header.")
        try:
            when = parse_amz_date(dates[0].strip())
        except ValueError:
            raise SigV4Error(403, "IncompleteSignatureException",
                             "Date must be in ISO-8601 'basic format'. Got '%s'." % dates[0])

        key = self.keys.get(key_id)
        tokens = header_values(headers, "x-amz-security-token")
        if key is None or (key.session_token or None) != (tokens[0] if tokens else None):
            raise SigV4Error(403, "UnrecognizedClientException",
                             "The security token included in the request is invalid.")
        if region != self.region:
            raise SigV4Error(403, "InvalidSignatureException",
                             "Credential should be scoped to a valid region, not '%s'. "
                             % region)
        if service != self.service:
            raise SigV4Error(403, "InvalidSignatureException",
                             "Credential should be scoped to correct service: '%s'. "
                             % self.service)
        if date != when.strftime("%Y%m%d"):
            raise SigV4Error(403, "InvalidSignatureException",
                             "Date in Credential scope does not match YYYYMMDD from "
                             "ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'."
                             % (date, when.strftime("%Y%m%d"), dates[0]))
        skew = datetime.timedelta(seconds=self.max_skew)
        if when < now - skew:
            raise SigV4Error(403, "InvalidSignatureException",
                             "Signature expired: %s is now earlier than %s (%s - %d min.)"
                             % (amz_date(when), amz_date(now - skew), amz_date(now),
                                self.max_skew // 60))
        if when > now + skew:
            raise SigV4Error(403, "InvalidSignatureException",
                             "Signature not yet current: %s is still later than %s "
                             "(%s + %d min.)" % (amz_date(when), amz_date(now + skew),
                                                 amz_date(now), self.max_skew // 60))

        signed = fields["SignedHeaders"].split(";")
        if signed != sorted(signed) or any(h != h.lower() or not h for h in signed):
            raise SigV4Error(403, "InvalidSignatureException",
                             "SignedHeaders must be lowercase names in sorted order")
        must = {"host"}
        if self.strict:
            must |= {"x-amz-date"}
            must |= {k.strip().lower() for k, _ in headers
                     if k.strip().lower().startswith("x-amz-") or
                     k.strip().lower() == "original-authorization"}
        unsigned = sorted(must - set(signed))
        if unsigned:
            raise SigV4Error(403, "InvalidSignatureException",
                             "There were headers present in the request which were not "
                             "signed: %s" % ", ".join(unsigned))

        payload_hash = hashlib.sha256(body or b"").hexdigest()
        claimed = header_values(headers, "x-amz-content-sha256")
        if claimed and claimed[0].strip() != payload_hash:
            raise SigV4Error(400, "XAmzContentSHA256Mismatch",
                             "The provided 'x-amz-content-sha256' header does not match "
                             "what was computed.")
        creq = self.canonical_request(method, raw_path, raw_query, headers, signed,
                                      payload_hash)
        sts = "\n".join([ALGORITHM, dates[0].strip(), "/".join(scope[1:]),
                         hashlib.sha256(creq.encode()).hexdigest()])
        want = hmac.new(signing_key(key.secret, date, region, service), sts.encode(),
                        hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, fields["Signature"]):
            raise SigV4Error(403, "InvalidSignatureException",
                             "The request signature we calculated does not match the "
                             "signature you provided. Check your AWS Secret Access Key and "
                             "signing method. Consult the service documentation for "
                             "details.\n\nThe Canonical String for this request should have "
                             "been\n'%s'\n\nThe String-to-Sign should have been\n'%s'\n"
                             % (creq, sts))
        return {"access_key_id": key_id, "signed_headers": signed,
                "amz_date": dates[0].strip(), "signature": fields["Signature"],
                "session_token": bool(tokens), "canonical_request": creq}

    def sign(self, method, url, headers, body, key_id, now=None):
        """A copy of headers (a dict) with Host, X-Amz-Date,
        x-amz-content-sha256, X-Amz-Security-Token (for a key with one) and
        Authorization added: every header signed, by this verifier's rules.
        For the test world's own requests to a verifying catalog; a bearer
        token in Authorization moves to Original-Authorization, as the
        client of tms and Iceberg's move it."""
        key = self.keys[key_id]
        when = datetime.datetime.fromtimestamp(now if now is not None else time.time(),
                                               tz=datetime.timezone.utc)
        parts = urllib.parse.urlsplit(url)
        out = {("Original-Authorization" if k.lower() == "authorization" else k): v
               for k, v in headers.items()}
        out["Host"] = parts.netloc
        out["X-Amz-Date"] = amz_date(when)
        out["x-amz-content-sha256"] = hashlib.sha256(body or b"").hexdigest()
        if key.session_token:
            out["X-Amz-Security-Token"] = key.session_token
        pairs = list(out.items())
        signed = sorted({k.lower() for k in out})
        creq = self.canonical_request(method, parts.path, parts.query, pairs, signed,
                                      out["x-amz-content-sha256"])
        scope = "%s/%s/%s/aws4_request" % (when.strftime("%Y%m%d"), self.region,
                                           self.service)
        sts = "\n".join([ALGORITHM, out["X-Amz-Date"], scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        signature = hmac.new(signing_key(key.secret, when.strftime("%Y%m%d"), self.region,
                                         self.service), sts.encode(),
                             hashlib.sha256).hexdigest()
        out["Authorization"] = "%s Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
            ALGORITHM, key_id, scope, ";".join(signed), signature)
        return out
