"""
avro_codec.py -- a small, fast Avro object-container-file reader and writer.

Iceberg manifest lists and manifests are Avro object container files whose
schemas must keep every `field-id` attribute.  avro-c drops those attributes
when writing and python3-avro is too slow for million-entry manifests, so the
test world uses this module:

  * write_container(schema_json, records, codec, metadata) -> bytes
      Encodes records (dicts keyed by field name) with an encoder compiled once
      from the schema (closures per field, no per-record schema walk).  The
      schema text is written to the header exactly as given, so `field-id`,
      `element-id`, `key-id`, `value-id` and `logicalType` survive.
      codec: "null" or "deflate" (raw RFC 1951 deflate, as the Avro spec says).
  * read_container(data) -> (schema dict, metadata dict, list of records)
      Decodes any Avro container with null or deflate blocks, checking every
      block's sync marker.

Unions are written by picking the first branch that accepts the value (None
picks "null"); records are dicts; maps are dicts; arrays are lists; bytes and
fixed are bytes; strings are str.  Only the standard library is used.
"""

import json
import os
import struct
import zlib

MAGIC = b"Obj\x01"


class AvroError(Exception):
    """Malformed Avro input or a value that does not fit the schema."""


# ---------------------------------------------------------------------------
# primitive encoding
# ---------------------------------------------------------------------------

def encode_long(n):
    """Zigzag + varint encoding of an int/long."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [encode_long(i) for i in range(-64, 4096)]


def enc_long(n):
    """encode_long with a cache for small values (the common case)."""
    if -64 <= n < 4096:
        return _SMALL[n + 64]
    return encode_long(n)


def enc_bytes(b):
    """Length-prefixed bytes."""
    return enc_long(len(b)) + b


def enc_string(s):
    """Length-prefixed UTF-8 string."""
    b = s.encode("utf-8")
    return enc_long(len(b)) + b


# ---------------------------------------------------------------------------
# schema compilation (writer)
# ---------------------------------------------------------------------------

def _named(schema, names):
    """Register named types so later references by name resolve."""
    if isinstance(schema, dict) and schema.get("type") in ("record", "fixed", "enum"):
        names[schema["name"]] = schema
        if "namespace" in schema:
            names[schema["namespace"] + "." + schema["name"]] = schema


def _accepts(schema, value, names):
    """Whether a union branch can hold value (used to pick the branch)."""
    if isinstance(schema, str) and schema in names:
        schema = names[schema]
    t = schema if isinstance(schema, str) else schema.get("type")
    if isinstance(t, (dict, list)):
        return _accepts(t, value, names)
    if t == "null":
        return value is None
    if value is None:
        return False
    if t in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t in ("bytes", "fixed"):
        return isinstance(value, (bytes, bytearray))
    if t in ("record", "map"):
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, (list, tuple))
    if t == "enum":
        return isinstance(value, str)
    return False


def compile_encoder(schema, names=None):
    """Return a function value -> bytes for schema (parsed JSON)."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in names:
            return compile_encoder(names[schema], names)
        schema = {"type": schema}
    if isinstance(schema, list):
        branches = [(i, b, compile_encoder(b, names)) for i, b in enumerate(schema)]
        prefixes = [enc_long(i) for i in range(len(schema))]

        def enc_union(v):
            for i, b, f in branches:
                if _accepts(b, v, names):
                    return prefixes[i] + f(v)
            raise AvroError("value %r fits no branch of union %s" % (v, json.dumps(schema)))
        return enc_union
    t = schema["type"]
    if isinstance(t, (dict, list)):
        return compile_encoder(t, names)
    if t == "null":
        return lambda v: b""
    if t == "boolean":
        return lambda v: b"\x01" if v else b"\x00"
    if t in ("int", "long"):
        return enc_long
    if t == "float":
        return lambda v: struct.pack("<f", v)
    if t == "double":
        return lambda v: struct.pack("<d", v)
    if t == "string":
        return enc_string
    if t == "bytes":
        return enc_bytes
    if t == "fixed":
        _named(schema, names)
        size = schema["size"]

        def enc_fixed(v):
            if len(v) != size:
                raise AvroError("fixed %s needs %d bytes" % (schema["name"], size))
            return bytes(v)
        return enc_fixed
    if t == "enum":
        _named(schema, names)
        index = {s: enc_long(i) for i, s in enumerate(schema["symbols"])}
        return lambda v: index[v]
    if t == "array":
        item = compile_encoder(schema["items"], names)

        def enc_array(v):
            if not v:
                return b"\x00"
            return enc_long(len(v)) + b"".join(item(x) for x in v) + b"\x00"
        return enc_array
    if t == "map":
        val = compile_encoder(schema["values"], names)

        def enc_map(v):
            if not v:
                return b"\x00"
            return (enc_long(len(v))
                    + b"".join(enc_string(k) + val(x) for k, x in v.items())
                    + b"\x00")
        return enc_map
    if t == "record":
        _named(schema, names)
        fields = [(f["name"], compile_encoder(f["type"], names))
                  for f in schema["fields"]]

        def enc_record(v):
            try:
                return b"".join(f(v.get(n)) for n, f in fields)
            except AvroError as e:
                raise AvroError("%s: %s" % (schema["name"], e))
        return enc_record
    raise AvroError("unsupported Avro type %r" % (t,))


# ---------------------------------------------------------------------------
# container writer
# ---------------------------------------------------------------------------

def container_header(schema_text, codec, metadata, sync):
    """The container header: magic, metadata map (avro.schema first), sync."""
    meta = [("avro.schema", schema_text.encode()), ("avro.codec", codec.encode())]
    for k, v in (metadata or {}).items():
        meta.append((k, v.encode() if isinstance(v, str) else v))
    out = [MAGIC, enc_long(len(meta))]
    for k, v in meta:
        out.append(enc_string(k))
        out.append(enc_bytes(v))
    out.append(b"\x00")
    out.append(sync)
    return b"".join(out)


def container_block(count, payload, codec, sync):
    """One data block: count, byte size, (compressed) payload, sync."""
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        payload = c.compress(payload) + c.flush()
    elif codec != "null":
        raise AvroError("unsupported codec %r" % codec)
    return enc_long(count) + enc_long(len(payload)) + payload + sync


def write_container(schema_text, records, codec="deflate", metadata=None,
                    block_records=4096, encoder=None):
    """Encode records into a complete Avro object container file (bytes).

    schema_text is the schema as JSON text (written verbatim); encoder may be
    passed to reuse a compiled encoder across files."""
    enc = encoder or compile_encoder(json.loads(schema_text))
    sync = os.urandom(16)
    out = [container_header(schema_text, codec, metadata, sync)]
    batch = []
    for r in records:
        batch.append(enc(r))
        if len(batch) >= block_records:
            out.append(container_block(len(batch), b"".join(batch), codec, sync))
            batch = []
    if batch:
        out.append(container_block(len(batch), b"".join(batch), codec, sync))
    return b"".join(out)


# ---------------------------------------------------------------------------
# reader
# ---------------------------------------------------------------------------

class _Buf:
    __slots__ = ("data", "pos")

    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def long(self):
        data = self.data
        pos = self.pos
        b = data[pos]
        pos += 1
        n = b & 0x7F
        shift = 7
        while b & 0x80:
            if pos >= len(data):
                raise AvroError("truncated varint")
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
        self.pos = pos
        return (n >> 1) ^ -(n & 1)

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise AvroError("truncated input")
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v


def compile_decoder(schema, names=None):
    """Return a function _Buf -> value for schema (parsed JSON)."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in names:
            return compile_decoder(names[schema], names)
        schema = {"type": schema}
    if isinstance(schema, list):
        decs = [compile_decoder(s, names) for s in schema]

        def dec_union(b):
            i = b.long()
            if i < 0 or i >= len(decs):
                raise AvroError("union branch %d out of range" % i)
            return decs[i](b)
        return dec_union
    t = schema["type"]
    if isinstance(t, (dict, list)):
        return compile_decoder(t, names)
    if t == "null":
        return lambda b: None
    if t == "boolean":
        return lambda b: b.take(1) != b"\x00"
    if t in ("int", "long"):
        return lambda b: b.long()
    if t == "float":
        return lambda b: struct.unpack("<f", b.take(4))[0]
    if t == "double":
        return lambda b: struct.unpack("<d", b.take(8))[0]
    if t == "string":
        return lambda b: b.take(b.long()).decode("utf-8")
    if t == "bytes":
        return lambda b: bytes(b.take(b.long()))
    if t == "fixed":
        _named(schema, names)
        size = schema["size"]
        return lambda b: bytes(b.take(size))
    if t == "enum":
        _named(schema, names)
        syms = schema["symbols"]
        return lambda b: syms[b.long()]
    if t in ("array", "map"):
        is_map = t == "map"
        item = compile_decoder(schema["items" if not is_map else "values"], names)

        def dec_coll(b):
            out = {} if is_map else []
            while True:
                n = b.long()
                if n == 0:
                    return out
                if n < 0:
                    n = -n
                    b.long()
                for _ in range(n):
                    if is_map:
                        k = b.take(b.long()).decode("utf-8")
                        out[k] = item(b)
                    else:
                        out.append(item(b))
        return dec_coll
    if t == "record":
        _named(schema, names)
        fields = [(f["name"], compile_decoder(f["type"], names))
                  for f in schema["fields"]]

        def dec_record(b):
            return {n: f(b) for n, f in fields}
        return dec_record
    raise AvroError("unsupported Avro type %r" % (t,))


def read_header(data):
    """Parse a container header: return (metadata dict of bytes, sync, pos)."""
    if data[:4] != MAGIC:
        raise AvroError("not an Avro object container file (bad magic)")
    b = _Buf(data, 4)
    meta = {}
    while True:
        n = b.long()
        if n == 0:
            break
        if n < 0:
            n = -n
            b.long()
        for _ in range(n):
            k = b.take(b.long()).decode("utf-8")
            meta[k] = bytes(b.take(b.long()))
    sync = bytes(b.take(16))
    return meta, sync, b.pos


def read_container(data):
    """Decode a whole container: return (schema, metadata, records).

    metadata values are bytes; schema is the parsed avro.schema."""
    meta, sync, pos = read_header(data)
    schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", b"null").decode()
    dec = compile_decoder(schema)
    records = []
    b = _Buf(data, pos)
    while b.pos < len(data):
        count = b.long()
        size = b.long()
        payload = b.take(size)
        if bytes(b.take(16)) != sync:
            raise AvroError("sync marker mismatch")
        if codec == "deflate":
            payload = zlib.decompress(payload, -15)
        elif codec != "null":
            raise AvroError("unsupported codec %r" % codec)
        pb = _Buf(payload)
        for _ in range(count):
            records.append(dec(pb))
    return schema, meta, records
