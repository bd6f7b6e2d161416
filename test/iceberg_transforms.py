"""
iceberg_transforms.py -- Iceberg's bucket transform as the table spec
states it (https://iceberg.apache.org/spec/#bucket-transform-details and
Appendix B), computed by the tests themselves so that they check tms's
partition values independently of tms.

    murmur3_32(data, seed=0)  MurmurHash3 x86 32-bit of bytes
    bucket(value_bytes, n)    the bucket of a value's hash bytes
    unscaled_bytes(u)         a decimal's unscaled value as the spec hashes it
    zkey_long(v), zkey_double(v), zvalue(keys)
                              z-order: the ordered 8-byte key of a long (an
                              int as a long) or double, and the interleaved
                              bits of such keys, as Iceberg's ZOrderByteUtils
                              (Spark's rewrite_data_files zorder)

test_compaction_types.py checks murmur3 and bucket against the spec's
examples.
"""

import struct


def murmur3_32(data, seed=0):
    """MurmurHash3 x86 32-bit of data (bytes)."""
    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & 0xffffffff

    def mix(k):
        return rotl((k * 0xcc9e2d51) & 0xffffffff, 15) * 0x1b873593 & 0xffffffff
    h, n = seed, len(data) // 4
    for i in range(n):
        h = (rotl(h ^ mix(int.from_bytes(data[4 * i:4 * i + 4], "little")), 13) * 5
             + 0xe6546b64) & 0xffffffff
    tail = data[4 * n:]
    if tail:
        h ^= mix(int.from_bytes(tail, "little"))
    h ^= len(data)
    h = (h ^ (h >> 16)) * 0x85ebca6b & 0xffffffff
    h = (h ^ (h >> 13)) * 0xc2b2ae35 & 0xffffffff
    return h ^ (h >> 16)


def bucket(value_bytes, n):
    """Iceberg's bucket[n] of a value whose hash bytes are value_bytes."""
    return (murmur3_32(value_bytes) & 0x7fffffff) % n


def unscaled_bytes(u):
    """The fewest two's complement big-endian bytes of an unscaled value."""
    return u.to_bytes(((u if u >= 0 else ~u).bit_length() // 8) + 1, "big", signed=True)


MASK64 = (1 << 64) - 1


def zkey_long(v):
    """The ordered key of a long (or an int): its sign bit flipped; a null
    is zeros."""
    return 0 if v is None else (int(v) + (1 << 63)) & MASK64


def zkey_double(v):
    """The ordered key of a double: the bits of a negative one inverted,
    of a positive one with the sign bit flipped; a null is zeros."""
    if v is None:
        return 0
    bits = struct.unpack(">q", struct.pack(">d", float(v)))[0]
    return (~bits) & MASK64 if bits < 0 else (bits ^ (1 << 63)) & MASK64


def zvalue(keys):
    """ZOrderByteUtils.interleaveBits of 8-byte column keys."""
    z = 0
    for i in range(64):
        for k in keys:
            z = (z << 1) | ((k >> (63 - i)) & 1)
    return z
