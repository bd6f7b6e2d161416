/*-------------------------------------------------------------------------
 *
 * dv_test.c
 *	  Unit driver of src/iceberg/table/dv.c: deletion-vector-v1 blobs
 *	  decoded into positions.  Blobs come from the test world's independent
 *	  writer (test/v3world.py dv_blob: array containers, two 64-bit keys),
 *	  and from a small encoder here for bitmap and run containers; then the
 *	  refusals: length, magic, CRC, truncation at every byte, unordered
 *	  keys, cardinality and the position limit.  The encoder and the Puffin
 *	  footer: round trips, and the test world's blob byte for byte.
 *
 * test/unit/dv_test.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/table/dv.h"
#include "iceberg/iceberg_internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "unit.h"

/* Blobs written by test/v3world.py dv_blob([1, 3, 4]) and ([5, 70000, 2^33 + 7]). */
static const char *PY_SMALL =
"00000026d1d339640100000000000000000000003a30000001000000000002001000000001000300040043856c78";
static const char *PY_KEYS =
"00000042d1d339640200000000000000000000003a300000020000000000000001000000180000001a0000000500701102"
"0000003a3000000100000000000000100000000700fca32fc0";

static size_t
unhex(const char *h, uint8_t *out)
{
	size_t		n = strlen(h) / 2,
				i;

	for (i = 0; i < n; i++)
	{
		unsigned int v;

		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t) v;
	}
	return n;
}

static void
put32le(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static void
put32be(uint8_t *p, uint32_t v)
{
	p[0] = (v >> 24) & 0xff;
	p[1] = (v >> 16) & 0xff;
	p[2] = (v >> 8) & 0xff;
	p[3] = v & 0xff;
}

/* Frame a vector (64-bit portable roaring bytes) as a blob; its length. */
static size_t
frame(const uint8_t *vec, size_t vlen, uint8_t *out)
{
	static const uint8_t magic[4] = {0xD1, 0xD3, 0x39, 0x64};

	put32be(out, (uint32_t) (vlen + 4));
	memcpy(out + 4, magic, 4);
	memcpy(out + 8, vec, vlen);
	put32be(out + 8 + vlen, (uint32_t) crc32(0L, out + 4, (uInt) (vlen + 4)));
	return vlen + 12;
}

static bool
decode(const uint8_t *b, size_t n, int64_t card, int64_t max, int64_t **pos, int64_t *np,
	   TmsError *err)
{
	return iceberg_dv_decode(b, n, card, max, pos, np, err);
}

static void
test_python_blobs(void)
{
	uint8_t		b[256];
	size_t		n = unhex(PY_SMALL, b);
	int64_t    *pos;
	int64_t		np;
	TmsError	err;

	CHECK(decode(b, n, 3, 100, &pos, &np, &err) && np == 3 && pos[0] == 1 && pos[1] == 3 &&
		  pos[2] == 4, "python array blob: %s", err.message);
	io_free(pos);
	n = unhex(PY_KEYS, b);
	CHECK(decode(b, n, 3, 100, &pos, &np, &err) && np == 3 && pos[0] == 5 && pos[1] == 70000 &&
		  pos[2] == (INT64_C(1) << 33) + 7, "python two-key blob: %s", err.message);
	io_free(pos);

	/* every truncation and every single flipped byte is refused or differs */
	{
		size_t		cut;
		int			refused = 0;

		for (cut = 0; cut < n; cut++)
			if (!decode(b, cut, -1, 100, &pos, &np, &err) && pos == NULL)
				refused++;
		CHECK(refused == (int) n, "every truncation refused (%d of %zu)", refused, n);
		b[20] ^= 0x10;
		CHECK(!decode(b, n, -1, 100, &pos, &np, &err) && strstr(err.detail, "CRC") != NULL,
			  "flipped byte: CRC (%s)", err.detail);
		b[20] ^= 0x10;
		b[5] ^= 1;
		CHECK(!decode(b, n, -1, 100, &pos, &np, &err) && strstr(err.detail, "magic") != NULL,
			  "bad magic (%s)", err.detail);
		b[5] ^= 1;
		b[3]++;
		CHECK(!decode(b, n, -1, 100, &pos, &np, &err) && strstr(err.detail, "length") != NULL,
			  "bad length (%s)", err.detail);
		b[3]--;
	}
	CHECK(!decode(b, n, 4, 100, &pos, &np, &err) && err.code == ICEBERG_ERR_MALFORMED &&
		  strstr(err.detail, "record_count") != NULL, "cardinality differs (%s)", err.detail);
	CHECK(!decode(b, n, -1, 2, &pos, &np, &err) && err.code == ICEBERG_ERR_LIMIT && pos == NULL,
		  "position limit");
}

/* One key 0, one bitmap container of every even value below 10000. */
static void
test_bitmap_and_runs(void)
{
	static uint8_t vec[8 + 4 + 8 + 4 + 4 + 8192];
	static uint8_t blob[sizeof(vec) + 12];
	uint8_t		rv[64];
	uint8_t		rb[80];
	uint8_t    *p = vec;
	int64_t    *pos;
	int64_t		np,
				i;
	size_t		n;
	TmsError	err;
	bool		ok = true;

	memset(vec, 0, sizeof(vec));
	put32le(p, 1);				/* one bitmap (low half of the 8 bytes) */
	p += 8;
	put32le(p, 0);				/* key 0 */
	p += 4;
	put32le(p, 12346);
	put32le(p + 4, 1);
	p += 8;
	p[0] = 0;					/* container key 0, cardinality 5000 */
	p[1] = 0;
	p[2] = (4999) & 0xff;
	p[3] = (4999) >> 8;
	p += 4;
	put32le(p, 0);				/* offset (not checked) */
	p += 4;
	for (i = 0; i < 10000; i += 2)
		p[i / 8] |= (uint8_t) (1 << (i % 8));
	n = frame(vec, sizeof(vec), blob);
	CHECK(decode(blob, n, 5000, 100000, &pos, &np, &err) && np == 5000, "bitmap: %s",
		  err.message);
	for (i = 0; ok && i < np; i++)
		ok = pos[i] == 2 * i;
	CHECK(ok, "bitmap positions");
	io_free(pos);

	/* a run container (cookie 12347, one container: no offsets): 10..15 */
	memset(rv, 0, sizeof(rv));
	put32le(rv, 1);
	put32le(rv + 8, 7);			/* key 7 */
	put32le(rv + 12, 12347);	/* (1 - 1) << 16 | 12347 */
	rv[16] = 1;					/* run bitset: container 0 is a run */
	rv[17] = 0;					/* key 0 */
	rv[18] = 0;
	rv[19] = 5;					/* cardinality - 1 */
	rv[20] = 0;
	rv[21] = 1;					/* one run */
	rv[22] = 0;
	rv[23] = 10;				/* start 10 */
	rv[24] = 0;
	rv[25] = 5;					/* length 5 */
	rv[26] = 0;
	n = frame(rv, 27, rb);
	CHECK(decode(rb, n, 6, 100, &pos, &np, &err) && np == 6 &&
		  pos[0] == (INT64_C(7) << 32) + 10 && pos[5] == (INT64_C(7) << 32) + 15,
		  "run container: %s", err.message);
	io_free(pos);

	/* the same with a header cardinality that lies */
	rv[19] = 4;
	n = frame(rv, 27, rb);
	CHECK(!decode(rb, n, -1, 100, &pos, &np, &err) && strstr(err.detail, "cardinality") != NULL,
		  "run cardinality mismatch (%s)", err.detail);

	/* two bitmaps with the same key */
	{
		uint8_t		v2[64],
					b2[80];
		uint8_t    *q = v2;
		int			k;

		memset(v2, 0, sizeof(v2));
		put32le(q, 2);
		q += 8;
		for (k = 0; k < 2; k++)
		{
			put32le(q, 3);
			put32le(q + 4, 12346);
			put32le(q + 8, 1);
			q[12] = 0;
			q[13] = 0;
			q[14] = 0;
			q[15] = 0;			/* one value */
			put32le(q + 16, 0);
			q[20] = (uint8_t) k;
			q[21] = 0;
			q += 22;
		}
		n = frame(v2, (size_t) (q - v2), b2);
		CHECK(!decode(b2, n, -1, 100, &pos, &np, &err) && strstr(err.detail, "keys") != NULL,
			  "repeated key (%s)", err.detail);
	}
}

/*
 * The encoder: what it writes decodes to the same positions (empty, one,
 * arrays, a bitmap container above 4096 values, several 64-bit keys); the
 * test world's own blob of [1, 3, 4] byte for byte; unordered positions
 * refused; the Puffin footer's framing.
 */
static void
test_encode(void)
{
	static const int64_t small[] = {1, 3, 4};
	int64_t    *big = malloc(sizeof(int64_t) * 12000);
	int64_t    *pos = NULL;
	int64_t		np = 0,
				n = 0,
				i;
	uint8_t    *blob = NULL;
	uint8_t		py[256];
	size_t		len = 0,
				pylen;
	TmsError	err;
	bool		same;

	CHECK(iceberg_dv_encode(small, 3, &blob, &len, &err), "encode small: %s", err.message);
	pylen = unhex(PY_SMALL, py);
	CHECK(len == pylen && memcmp(blob, py, len) == 0, "small blob as the test world writes it");
	io_free(blob);
	CHECK(iceberg_dv_encode(NULL, 0, &blob, &len, &err) &&
		  decode(blob, len, 0, 10, &pos, &np, &err) && np == 0, "empty vector round trip");
	io_free(blob);
	io_free(pos);
	/* 6000 even positions (a bitmap container), then other keys */
	for (i = 0; i < 12000; i += 2)
		big[n++] = i;
	for (i = 0; i < 100; i++)
		big[n++] = 70000 + 3 * i;
	big[n++] = (INT64_C(1) << 33) + 7;
	big[n++] = (INT64_C(1) << 40) + 65536;
	CHECK(iceberg_dv_encode(big, n, &blob, &len, &err), "encode big: %s", err.message);
	CHECK(decode(blob, len, n, INT64_MAX, &pos, &np, &err) && np == n, "big round trip: %s",
		  err.message);
	same = np == n;
	for (i = 0; same && i < n; i++)
		same = pos[i] == big[i];
	CHECK(same, "big round trip positions");
	io_free(blob);
	io_free(pos);
	big[1] = 0;
	CHECK(!iceberg_dv_encode(big, n, &blob, &len, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT && blob == NULL, "unordered positions refused");
	free(big);
	{
		IcebergDvBlobRef r[2] = {{"s3://b/t/data/a.parquet", 4, 38, 3},
		{"s3://b/t/data/b.parquet", 42, 40, 5}};
		uint32_t	plen;

		CHECK(iceberg_puffin_footer(r, 2, "tms test", &blob, &len, &err), "footer: %s",
			  err.message);
		plen = (uint32_t) blob[len - 12] | ((uint32_t) blob[len - 11] << 8);
		CHECK(memcmp(blob, "PFA1", 4) == 0 && memcmp(blob + len - 4, "PFA1", 4) == 0 &&
			  plen + 16 == len && blob[len - 8] == 0, "footer framing");
		blob[len - 12] = 0;
		CHECK(strstr((char *) blob + 4, "\"referenced-data-file\":\"s3://b/t/data/b.parquet\"") != NULL &&
			  strstr((char *) blob + 4, "\"cardinality\":\"5\"") != NULL &&
			  strstr((char *) blob + 4, "\"fields\":[2147483645]") != NULL,
			  "footer payload: %s", (char *) blob + 4);
		io_free(blob);
	}
}

int
main(void)
{
	test_python_blobs();
	test_bitmap_and_runs();
	test_encode();
	return unit_done();
}
