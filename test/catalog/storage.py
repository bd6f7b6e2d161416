"""
storage.py -- file:// and s3:// object access for the tms test world.

The test REST catalog and the synthetic table writer both need to read, write
and delete files either on the local file system or in an S3 server (s3rver in
the tests).  This module offers one small interface, Storage, over both:

    st = Storage(s3=S3Config(endpoint, key_id, secret, region), file_root=DIR)
    st.write(uri, data); st.read(uri); st.delete(uri); st.exists(uri)

URIs understood:
  * file:///abs/path                 -- an absolute local path
  * /abs/path                        -- same
  * relative/path, ./relative/path   -- resolved against file_root (real
                                        writers produced such paths; see
                                        test/fixtures/README.md)
  * file://host/rest                 -- "host" is taken as the first path
                                        component relative to file_root (the
                                        odd PyIceberg form file://data/...)
  * s3://bucket/key, s3a://..., s3n://...  -- path-style requests to the
                                        configured endpoint, SigV4 signed
  * abfs[s]://container@account.dfs.core.windows.net/blob, wasb[s]://
    container@account.blob.core.windows.net/blob  -- Blob service requests
                                        to the configured endpoint (Azurite's
                                        path style: endpoint/account/container),
                                        SharedKey signed
  * gs://bucket/name                 -- the XML API of the configured GCS
                                        endpoint (the test server,
                                        test/gcs/server.py) with a bearer
                                        token, listing through the JSON API

Only the Python standard library is used (its SharedKey signer is written
from Microsoft's documentation, independently of tms's C one, so that each
checks the other against Azurite).  S3 requests are signed with AWS
Signature Version 4 (header-based, UNSIGNED-PAYLOAD is never used: the body's
SHA-256 is always sent in x-amz-content-sha256, which s3rver requires).
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import json
import os
import urllib.parse
import xml.etree.ElementTree as ET

S3_SCHEMES = ("s3", "s3a", "s3n")
AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs")

# Azurite's well-known development account and key (Microsoft's documented
# emulator credentials, not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")


class StorageError(Exception):
    """An I/O failure on a file or object; .status carries the HTTP status
    for S3 (404 for a missing key), None for local files."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class NotFound(StorageError):
    """The file or object does not exist."""


class S3Config:
    """Where and how to reach S3: endpoint URL (http://127.0.0.1:PORT),
    access key id, secret access key and region."""

    def __init__(self, endpoint, access_key_id="S3RVER",
                 secret_access_key="S3RVER", region="us-east-1"):
        self.endpoint = endpoint.rstrip("/")
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.region = region


def is_azure(uri):
    """True when uri names an Azure blob (abfs[s]://, wasb[s]://)."""
    return urllib.parse.urlsplit(uri).scheme in AZURE_SCHEMES


def split_azure(uri):
    """Split abfs://container@host/blob into (account, container, blob)."""
    parts = urllib.parse.urlsplit(uri)
    container, _, host = parts.netloc.partition("@")
    return host.split(".")[0].lower(), container, parts.path.lstrip("/")


def canonical_azure(uri):
    """The one spelling of an Azure location that tms uses (its location
    rule): "abfs://container@account.dfs.<domain>/blob", whatever the scheme
    (abfs, abfss, wasb, wasbs) and whether the host is the account's .blob.
    or .dfs. one."""
    parts = urllib.parse.urlsplit(uri)
    container, _, host = parts.netloc.partition("@")
    labels = host.lower().split(".")
    if len(labels) == 1:
        labels += ["dfs", "core", "windows", "net"]
    elif labels[1] == "blob":
        labels[1] = "dfs"
    rest = uri.split("@", 1)[1]
    path = rest[rest.index("/"):] if "/" in rest else ""
    return "abfs://%s@%s%s" % (container, ".".join(labels), path)


class AzureConfig:
    """Where and how to reach Azure Blob storage: an endpoint URL
    (http://127.0.0.1:PORT, requests go to endpoint/account/container/blob)
    and the account's shared key."""

    def __init__(self, endpoint, account=AZURITE_ACCOUNT, key=AZURITE_KEY):
        self.endpoint = endpoint.rstrip("/")
        self.account = account
        self.key = key


def shared_key_string_to_sign(method, headers, account, path, query):
    """Microsoft's "Authorize with Shared Key" string-to-sign (2009-09-19
    and later): headers a dict (any case), path the URL path as sent,
    query the raw query string."""
    low = {k.lower(): str(v) for k, v in headers.items()}
    std = ["content-encoding", "content-language", "content-length",
           "content-md5", "content-type", "date", "if-modified-since",
           "if-match", "if-none-match", "if-unmodified-since", "range"]
    vals = [low.get(h, "") for h in std]
    if vals[2] == "0":
        vals[2] = ""
    xms = sorted((k, v.strip()) for k, v in low.items() if k.startswith("x-ms-"))
    out = method + "\n" + "".join(v + "\n" for v in vals)
    out += "".join("%s:%s\n" % kv for kv in xms)
    out += "/" + account + path
    params = {}
    for k, v in urllib.parse.parse_qsl(query or "", keep_blank_values=True):
        params.setdefault(k.lower(), []).append(v)
    for k in sorted(params):
        out += "\n%s:%s" % (k, ",".join(sorted(params[k])))
    return out


def account_sas(account, key, expiry, permissions="rwdlac", start=None):
    """An account SAS token (Microsoft's "Create an account SAS", version
    2019-12-12) for the Blob service, signed with the account key; expiry
    and start are datetimes (UTC)."""
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    fields = {"sv": "2019-12-12", "ss": "b", "srt": "sco", "sp": permissions,
              "se": expiry.strftime(fmt), "spr": "https,http"}
    if start is not None:
        fields["st"] = start.strftime(fmt)
    sts = "\n".join([account, fields["sp"], fields["ss"], fields["srt"],
                     fields.get("st", ""), fields["se"], "", fields["spr"],
                     fields["sv"], ""])
    fields["sig"] = base64.b64encode(hmac.new(base64.b64decode(key), sts.encode(),
                                              hashlib.sha256).digest()).decode()
    return urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)


class AzureClient:
    """A minimal Blob service client: get, put, delete, head, list and
    create container, SharedKey signed.  One connection per call."""

    def __init__(self, config, timeout=30):
        self.config = config
        self.timeout = timeout
        parts = urllib.parse.urlsplit(config.endpoint)
        self.host = parts.hostname
        self.port = parts.port or 80

    def request(self, method, account, container, blob=None, query="",
                body=b"", headers=None):
        """Send one signed request; return (status, headers dict, body)."""
        path = "/%s/%s" % (account, container)
        if blob is not None:
            path += "/" + urllib.parse.quote(blob, safe="/-_.~")
        hdrs = dict(headers or {})
        hdrs["x-ms-date"] = email.utils.formatdate(usegmt=True)
        hdrs["x-ms-version"] = "2021-08-06"
        hdrs["Content-Length"] = str(len(body))
        sts = shared_key_string_to_sign(method, hdrs, account, path, query)
        sig = base64.b64encode(hmac.new(base64.b64decode(self.config.key),
                                        sts.encode(), hashlib.sha256).digest())
        hdrs["Authorization"] = "SharedKey %s:%s" % (account, sig.decode())
        conn = http.client.HTTPConnection(self.host, self.port,
                                          timeout=self.timeout)
        try:
            conn.request(method, path + ("?" + query if query else ""),
                         body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, dict(resp.getheaders()), data
        finally:
            conn.close()

    @staticmethod
    def _check(status, data, what):
        if status == 404:
            raise NotFound("%s: not found" % what, 404)
        if status >= 300:
            raise StorageError("%s: HTTP %d: %s" % (
                what, status, data[:300].decode("utf-8", "replace")), status)

    def get(self, account, container, blob):
        status, _, data = self.request("GET", account, container, blob)
        self._check(status, data, "abfs://%s@%s/%s" % (container, account, blob))
        return data

    def put(self, account, container, blob, data):
        status, _, body = self.request(
            "PUT", account, container, blob, body=data,
            headers={"x-ms-blob-type": "BlockBlob",
                     "Content-Type": "application/octet-stream"})
        self._check(status, body, "abfs://%s@%s/%s" % (container, account, blob))

    def delete(self, account, container, blob):
        status, _, body = self.request("DELETE", account, container, blob)
        if status != 404:
            self._check(status, body, "abfs://%s@%s/%s" % (container, account, blob))

    def head(self, account, container, blob):
        status, _, _ = self.request("HEAD", account, container, blob)
        if status == 404:
            return False
        if status >= 300:
            raise StorageError("HEAD %s/%s: HTTP %d" % (container, blob, status), status)
        return True

    def create_container(self, account, container):
        """Create a container; an existing one is fine."""
        status, _, body = self.request("PUT", account, container,
                                       query="restype=container")
        if status >= 300 and status != 409:
            self._check(status, body, "container %s" % container)

    def list_objects(self, account, container, prefix=""):
        """Every blob under prefix as (name, size, Last-Modified as a Unix
        time), all pages."""
        out = []
        marker = None
        while True:
            q = [("restype", "container"), ("comp", "list"), ("prefix", prefix)]
            if marker:
                q.append(("marker", marker))
            query = urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
            status, _, body = self.request("GET", account, container, query=query)
            self._check(status, body, "list %s/%s" % (container, prefix))
            root = ET.fromstring(body)
            for b in root.iter("Blob"):
                props = b.find("Properties")
                size = props.find("Content-Length") if props is not None else None
                lm = props.find("Last-Modified") if props is not None else None
                when = (email.utils.parsedate_to_datetime(lm.text).timestamp()
                        if lm is not None and lm.text else None)
                out.append((b.find("Name").text,
                            int(size.text) if size is not None else None, when))
            nm = root.find("NextMarker")
            marker = nm.text if nm is not None else None
            if not marker:
                return out


class GcsConfig:
    """Where and how to reach Google Cloud Storage: endpoint URL
    (http://127.0.0.1:PORT) and an OAuth2 access token."""

    def __init__(self, endpoint, token):
        self.endpoint = endpoint.rstrip("/")
        self.token = token


def is_gs(uri):
    """True when uri names a Google Cloud Storage object (gs://)."""
    return urllib.parse.urlsplit(uri).scheme == "gs"


def is_s3(uri):
    """True when uri names an S3 object (s3://, s3a://, s3n://)."""
    return urllib.parse.urlsplit(uri).scheme in S3_SCHEMES


def split_s3(uri):
    """Split s3://bucket/key into (bucket, key)."""
    parts = urllib.parse.urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


# ---------------------------------------------------------------------------
# AWS Signature Version 4
# ---------------------------------------------------------------------------

def _uri_encode(text, encode_slash):
    """Percent-encode as SigV4 wants: every byte except A-Z a-z 0-9 - _ . ~
    (and '/' when encode_slash is false)."""
    safe = "-_.~" if encode_slash else "-_.~/"
    return urllib.parse.quote(text, safe=safe)


def sigv4_headers(method, url, headers, payload, access_key_id,
                  secret_access_key, region, service="s3", now=None,
                  content_sha256_header=True):
    """Return a copy of headers with x-amz-date, x-amz-content-sha256 and
    Authorization added for an AWS SigV4 request.

    url is the full request URL (its query is canonicalised: parameters are
    sorted by encoded name then value, and encoded the AWS way); payload is
    the request body as bytes.  now (a UTC datetime) and
    content_sha256_header=False (as in AWS's generic test suite, which does
    not sign that S3-specific header) are for tests."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = now.strftime("%Y%m%d")
    parts = urllib.parse.urlsplit(url)
    payload_hash = hashlib.sha256(payload or b"").hexdigest()

    out = dict(headers)
    out["host"] = parts.netloc
    out["x-amz-date"] = amz_date
    if content_sha256_header:
        out["x-amz-content-sha256"] = payload_hash

    canonical_uri = _uri_encode(urllib.parse.unquote(parts.path or "/"), False)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    canonical_query = "&".join(
        "%s=%s" % (k, v) for k, v in sorted(
            (_uri_encode(k, True), _uri_encode(v, True)) for k, v in query))
    lowered = {}
    for k, v in out.items():
        lowered[k.lower().strip()] = " ".join(str(v).strip().split())
    signed = sorted(lowered)
    canonical_headers = "".join("%s:%s\n" % (k, lowered[k]) for k in signed)
    signed_headers = ";".join(signed)
    canonical_request = "\n".join([method, canonical_uri, canonical_query,
                                   canonical_headers, signed_headers,
                                   payload_hash])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    string_to_sign = "\n".join([
        "AWS4-HMAC-SHA256", amz_date, scope,
        hashlib.sha256(canonical_request.encode()).hexdigest()])

    def _hmac(key, msg):
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()

    k = _hmac(("AWS4" + secret_access_key).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    k = _hmac(k, "aws4_request")
    signature = hmac.new(k, string_to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (access_key_id, scope, signed_headers, signature))
    return out


class S3Client:
    """A minimal path-style S3 client: get, put, delete, head, list (V2) and
    create bucket.  One HTTP connection per call (simple and thread-safe)."""

    def __init__(self, config, timeout=30):
        self.config = config
        self.timeout = timeout
        parts = urllib.parse.urlsplit(config.endpoint)
        self.host = parts.hostname
        self.port = parts.port or 80

    def request(self, method, bucket, key="", query="", body=b"",
                headers=None):
        """Send one signed request; return (status, headers dict, body)."""
        path = "/" + bucket
        if key:
            path += "/" + urllib.parse.quote(key, safe="/-_.~")
        url = self.config.endpoint + path + ("?" + query if query else "")
        hdrs = sigv4_headers(method, url, headers or {}, body,
                             self.config.access_key_id,
                             self.config.secret_access_key,
                             self.config.region)
        hdrs["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(self.host, self.port,
                                          timeout=self.timeout)
        try:
            conn.request(method, path + ("?" + query if query else ""),
                         body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, dict(resp.getheaders()), data
        finally:
            conn.close()

    def _check(self, status, data, what):
        if status == 404:
            raise NotFound("%s: not found" % what, 404)
        if status >= 300:
            raise StorageError("%s: HTTP %d: %s" % (
                what, status, data[:300].decode("utf-8", "replace")), status)

    def get(self, bucket, key):
        """Return the object's bytes; NotFound when missing."""
        status, _, data = self.request("GET", bucket, key)
        self._check(status, data, "s3://%s/%s" % (bucket, key))
        return data

    def put(self, bucket, key, data):
        """Store data under bucket/key."""
        status, _, body = self.request("PUT", bucket, key, body=data)
        self._check(status, body, "s3://%s/%s" % (bucket, key))

    def delete(self, bucket, key):
        """Delete bucket/key (S3 reports success for missing keys too)."""
        status, _, body = self.request("DELETE", bucket, key)
        self._check(status, body, "s3://%s/%s" % (bucket, key))

    def head(self, bucket, key):
        """True when bucket/key exists."""
        status, _, _ = self.request("HEAD", bucket, key)
        if status == 404:
            return False
        if status >= 300:
            raise StorageError("HEAD s3://%s/%s: HTTP %d" % (bucket, key, status),
                               status)
        return True

    def create_bucket(self, bucket):
        """Create a bucket; an existing one is fine."""
        status, _, body = self.request("PUT", bucket)
        if status >= 300 and b"BucketAlreadyOwnedByYou" not in body \
                and b"BucketAlreadyExists" not in body:
            self._check(status, body, "s3://%s" % bucket)

    def list(self, bucket, prefix=""):
        """Return every key under prefix (ListObjectsV2, all pages)."""
        return [k for k, _, _ in self.list_objects(bucket, prefix)]

    def list_objects(self, bucket, prefix=""):
        """Every object under prefix as (key, size, LastModified as a Unix
        time), ListObjectsV2, all pages."""
        keys = []
        token = None
        while True:
            q = [("list-type", "2"), ("prefix", prefix)]
            if token:
                q.append(("continuation-token", token))
            query = urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
            status, _, body = self.request("GET", bucket, query=query)
            self._check(status, body, "list s3://%s/%s" % (bucket, prefix))
            root = ET.fromstring(body)
            ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for c in root.findall(ns + "Contents"):
                size = c.find(ns + "Size")
                lm = c.find(ns + "LastModified")
                when = None
                if lm is not None and lm.text:
                    when = datetime.datetime.fromisoformat(
                        lm.text.replace("Z", "+00:00")).timestamp()
                keys.append((c.find(ns + "Key").text,
                             int(size.text) if size is not None else None, when))
            trunc = root.find(ns + "IsTruncated")
            if trunc is not None and trunc.text == "true":
                token = root.find(ns + "NextContinuationToken").text
            else:
                return keys


class GcsClient:
    """A minimal Google Cloud Storage client with a bearer token: get, put,
    delete, head through the XML API, list through the JSON API.  One HTTP
    connection per call."""

    def __init__(self, config, timeout=30):
        self.config = config
        self.timeout = timeout
        parts = urllib.parse.urlsplit(config.endpoint)
        self.host = parts.hostname
        self.port = parts.port or 80

    def request(self, method, path, query="", body=b""):
        hdrs = {"Authorization": "Bearer " + self.config.token,
                "Content-Length": str(len(body))}
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path + ("?" + query if query else ""), body=body,
                         headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    @staticmethod
    def xml_path(bucket, name):
        return "/%s/%s" % (bucket, urllib.parse.quote(name, safe="/-_.~"))

    def _check(self, status, data, what):
        if status == 404:
            raise NotFound("%s: not found" % what, 404)
        if status >= 300:
            raise StorageError("%s: HTTP %d: %s" % (
                what, status, data[:300].decode("utf-8", "replace")), status)

    def get(self, bucket, name):
        status, data = self.request("GET", self.xml_path(bucket, name))
        self._check(status, data, "gs://%s/%s" % (bucket, name))
        return data

    def put(self, bucket, name, data):
        status, body = self.request("PUT", self.xml_path(bucket, name), body=data)
        self._check(status, body, "gs://%s/%s" % (bucket, name))

    def delete(self, bucket, name):
        """Delete an object; a missing one is not an error."""
        status, body = self.request("DELETE", self.xml_path(bucket, name))
        if status != 404:
            self._check(status, body, "gs://%s/%s" % (bucket, name))

    def head(self, bucket, name):
        status, _ = self.request("HEAD", self.xml_path(bucket, name))
        if status == 404:
            return False
        if status >= 300:
            raise StorageError("HEAD gs://%s/%s: HTTP %d" % (bucket, name, status), status)
        return True

    def list(self, bucket, prefix=""):
        return [k for k, _, _ in self.list_objects(bucket, prefix)]

    def list_objects(self, bucket, prefix=""):
        """Every object under prefix as (name, size, updated as a Unix
        time): objects.list of the JSON API, all pages."""
        out, token = [], None
        while True:
            q = [("prefix", prefix)] + ([("pageToken", token)] if token else [])
            status, body = self.request("GET", "/storage/v1/b/%s/o" % urllib.parse.quote(bucket),
                                        urllib.parse.urlencode(q, quote_via=urllib.parse.quote))
            self._check(status, body, "list gs://%s/%s" % (bucket, prefix))
            doc = json.loads(body)
            for it in doc.get("items", []):
                out.append((it["name"], int(it["size"]), datetime.datetime.fromisoformat(
                    it["updated"].replace("Z", "+00:00")).timestamp()))
            token = doc.get("nextPageToken")
            if not token:
                return out


def split_gs(uri):
    """Split gs://bucket/name into (bucket, name)."""
    parts = urllib.parse.urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


class Storage:
    """file://, s3:// and gs:// behind one interface (see the module
    comment)."""

    def __init__(self, s3=None, file_root=None, azure=None, gcs=None):
        self.s3 = S3Client(s3) if s3 else None
        self.azure = AzureClient(azure) if azure else None
        self.gcs = GcsClient(gcs) if gcs else None
        self.file_root = os.path.abspath(file_root or os.getcwd())

    def _az(self, uri):
        if self.azure is None:
            raise StorageError("no Azure endpoint configured for %r" % uri)
        return split_azure(uri)

    def _gs(self, uri):
        if self.gcs is None:
            raise StorageError("no GCS endpoint configured for %r" % uri)
        return split_gs(uri)

    def local_path(self, uri):
        """Map a non-S3 URI to a local path (see the module comment for the
        rules on relative and authority-bearing file:// URIs)."""
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme == "file":
            path = urllib.parse.unquote(parts.path)
            if parts.netloc and parts.netloc != "localhost":
                return os.path.join(self.file_root, parts.netloc,
                                    path.lstrip("/"))
            return path
        if parts.scheme:
            raise StorageError("unsupported URI scheme in %r" % uri)
        if uri.startswith("/"):
            return uri
        return os.path.normpath(os.path.join(self.file_root, uri))

    def _s3(self, uri):
        if self.s3 is None:
            raise StorageError("no S3 endpoint configured for %r" % uri)
        return split_s3(uri)

    def read(self, uri):
        """Return the bytes of uri; NotFound when missing."""
        if is_s3(uri):
            return self.s3.get(*self._s3(uri))
        if is_azure(uri):
            return self.azure.get(*self._az(uri))
        if is_gs(uri):
            return self.gcs.get(*self._gs(uri))
        try:
            with open(self.local_path(uri), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise NotFound("%s: not found" % uri)
        except OSError as e:
            raise StorageError("%s: %s" % (uri, e))

    def write(self, uri, data):
        """Create or replace uri with data (creating local directories)."""
        if is_s3(uri):
            return self.s3.put(*self._s3(uri), data)
        if is_azure(uri):
            return self.azure.put(*self._az(uri), data)
        if is_gs(uri):
            return self.gcs.put(*self._gs(uri), data)
        path = self.local_path(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp-%d" % os.getpid()
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def delete(self, uri):
        """Delete uri; a missing file is not an error (as with S3)."""
        if is_s3(uri):
            return self.s3.delete(*self._s3(uri))
        if is_azure(uri):
            return self.azure.delete(*self._az(uri))
        if is_gs(uri):
            return self.gcs.delete(*self._gs(uri))
        try:
            os.unlink(self.local_path(uri))
        except FileNotFoundError:
            pass

    def exists(self, uri):
        """True when uri exists."""
        if is_s3(uri):
            return self.s3.head(*self._s3(uri))
        if is_azure(uri):
            return self.azure.head(*self._az(uri))
        if is_gs(uri):
            return self.gcs.head(*self._gs(uri))
        return os.path.exists(self.local_path(uri))
