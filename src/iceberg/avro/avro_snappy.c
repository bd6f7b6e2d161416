/*-------------------------------------------------------------------------
 *
 * avro_snappy.c
 *	  The snappy decompressor of the Avro reader, for blocks written with
 *	  the "snappy" codec: the raw snappy format (a varint length, then
 *	  literals and copies) followed by the big-endian CRC-32 of the
 *	  uncompressed bytes, as Avro frames it.
 *
 * A small decoder here, because libsnappy is not a dependency.  Every
 * literal and copy is checked against the input left, the declared
 * length (itself capped by max_block_bytes) and the bytes already
 * written; the CRC-32 (zlib's) must match.
 *
 * src/iceberg/avro/avro_snappy.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro/avro_internal.h"

#include <string.h>

/* See avro_internal.h. */
bool
iceberg_avro_snappy_block(IcebergAvroReader *r, const uint8_t *in, size_t inlen,
						  TmsError *err)
{
	IcebergAvroCursor c;
	int64_t		ulen;
	uint64_t	v = 0;
	int			shift = 0;
	uint8_t    *out;
	size_t		op = 0;
	uint32_t	crc;

	if (inlen < 4)
		return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
	c.p = in;
	c.end = in + inlen - 4;
	/* plain (not zig-zag) varint length */
	for (;;)
	{
		uint8_t		b;

		if (c.p >= c.end || shift > 28)
			return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
		b = *c.p++;
		v |= (uint64_t) (b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
		shift += 7;
	}
	ulen = (int64_t) v;
	if (ulen > r->limits.max_block_bytes)
		return iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
	r->inflated.len = 0;
	if (!iceberg_buf_reserve(&r->inflated, (size_t) ulen))
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	out = (uint8_t *) r->inflated.data;
	while (c.p < c.end)
	{
		uint8_t		tag = *c.p++;
		size_t		len;
		size_t		off;

		if ((tag & 3) == 0)
		{
			len = (size_t) (tag >> 2) + 1;
			if (len > 60)
			{
				size_t		nb = len - 60,
							k;

				if ((size_t) (c.end - c.p) < nb)
					goto bad;
				len = 0;
				for (k = 0; k < nb; k++)
					len |= (size_t) c.p[k] << (8 * k);
				len += 1;
				c.p += nb;
			}
			if ((size_t) (c.end - c.p) < len || (size_t) ulen - op < len)
				goto bad;
			memcpy(out + op, c.p, len);
			c.p += len;
			op += len;
			continue;
		}
		if ((tag & 3) == 1)
		{
			if (c.p >= c.end)
				goto bad;
			len = 4 + ((tag >> 2) & 7);
			off = ((size_t) (tag >> 5) << 8) | *c.p++;
		}
		else if ((tag & 3) == 2)
		{
			if (c.end - c.p < 2)
				goto bad;
			len = (size_t) (tag >> 2) + 1;
			off = (size_t) c.p[0] | ((size_t) c.p[1] << 8);
			c.p += 2;
		}
		else
		{
			if (c.end - c.p < 4)
				goto bad;
			len = (size_t) (tag >> 2) + 1;
			off = (size_t) c.p[0] | ((size_t) c.p[1] << 8) |
				((size_t) c.p[2] << 16) | ((size_t) c.p[3] << 24);
			c.p += 4;
		}
		if (off == 0 || off > op || (size_t) ulen - op < len)
			goto bad;
		while (len-- > 0)
		{
			out[op] = out[op - off];
			op++;
		}
	}
	if (op != (size_t) ulen)
		goto bad;
	crc = (uint32_t) crc32(0L, out, (uInt) op);
	if (((uint32_t) c.end[0] << 24 | (uint32_t) c.end[1] << 16 |
		 (uint32_t) c.end[2] << 8 | (uint32_t) c.end[3]) != crc)
		return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
								  "snappy block checksum mismatch");
	r->inflated.len = op;
	return true;
bad:
	return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
}
