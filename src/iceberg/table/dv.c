/*-------------------------------------------------------------------------
 *
 * dv.c
 *	  Decoding and encoding Iceberg v3 deletion vectors (Puffin
 *	  deletion-vector-v1 blobs, portable 64-bit roaring bitmaps), and the
 *	  footer of a Puffin file of them; dv.h states the format.
 *
 * Rules: plain C, errors as TmsError values; the input is untrusted: every
 * read is bounds-checked, every count checked against the bytes left
 * before anything is allocated, and the output is bounded by the caller's
 * max_positions.  The portable 32-bit roaring serialization
 * (https://github.com/RoaringBitmap/RoaringFormatSpec) is read with both
 * cookies: 12346 (no run containers, a container count and offsets follow)
 * and 12347 in the low 16 bits (run containers; the count - 1 in the high
 * 16 bits, a bitset of run containers, offsets only from 4 containers on).
 * The encoder writes cookie 12346 only; its input is the caller's own
 * (checked ascending), its output one growing buffer freed on every error.
 *
 * src/iceberg/table/dv.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/table/dv.h"
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <jansson.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define COOKIE_NO_RUN	12346
#define COOKIE_RUN		12347
#define ARRAY_MAX		4096
#define BITMAP_BYTES	8192

typedef struct Cur
{
	const uint8_t *p;
	size_t		left;
} Cur;

typedef struct Out
{
	int64_t    *v;
	int64_t		n;
	int64_t		cap;
	int64_t		max;
	int64_t		last;			/* -1: none yet */
} Out;

static bool
take(Cur *c, size_t n, const uint8_t **at)
{
	if (c->left < n)
		return false;
	*at = c->p;
	c->p += n;
	c->left -= n;
	return true;
}

static uint16_t
le16(const uint8_t *p)
{
	return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) |
		((uint32_t) p[3] << 24);
}

static uint32_t
be32(const uint8_t *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) |
		(uint32_t) p[3];
}

static bool
malformed(TmsError *err, const char *what)
{
	tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid deletion vector");
	tms_error_detail(err, "%s.", what);
	return false;
}

/* Append one position; positions must ascend. */
static bool
put(Out *o, int64_t pos, TmsError *err)
{
	if (pos <= o->last)
		return malformed(err, "Its positions are not in ascending order");
	if (o->n >= o->max)
	{
		tms_error_set(err, ICEBERG_ERR_LIMIT, "deletion vector has too many positions");
		tms_error_detail(err, "More than %" PRId64 " positions.", o->max);
		return false;
	}
	if (o->n == o->cap)
	{
		int64_t		nc = o->cap ? o->cap * 2 : 256;
		int64_t    *nv;

		if (nc > o->max)
			nc = o->max;
		nv = io_realloc(o->v, sizeof(int64_t) * (size_t) nc);
		if (nv == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		o->v = nv;
		o->cap = nc;
	}
	o->v[o->n++] = pos;
	o->last = pos;
	return true;
}

/* One 32-bit portable roaring bitmap whose values get high bits "high". */
static bool
bitmap32(Cur *c, int64_t high, Out *o, TmsError *err)
{
	const uint8_t *at,
			   *runs = NULL,
			   *desc;
	uint32_t	cookie,
				n,
				k;
	bool		offsets;
	int32_t		prev_key = -1;

	if (!take(c, 4, &at))
		return malformed(err, "It ends inside a bitmap header");
	cookie = le32(at);
	if ((cookie & 0xFFFF) == COOKIE_RUN)
	{
		n = (cookie >> 16) + 1;
		if (!take(c, (n + 7) / 8, &runs))
			return malformed(err, "It ends inside a run bitset");
		offsets = n >= 4;
	}
	else if (cookie == COOKIE_NO_RUN)
	{
		if (!take(c, 4, &at))
			return malformed(err, "It ends inside a bitmap header");
		n = le32(at);
		if (n > 65536)
			return malformed(err, "A bitmap has more than 65536 containers");
		offsets = true;
	}
	else
		return malformed(err, "A bitmap has an unknown cookie");
	if (!take(c, (size_t) n * 4, &desc) || (offsets && !take(c, (size_t) n * 4, &at)))
		return malformed(err, "It ends inside a bitmap header");
	for (k = 0; k < n; k++)
	{
		uint16_t	key = le16(desc + 4 * k);
		uint32_t	card = (uint32_t) le16(desc + 4 * k + 2) + 1;
		int64_t		base = high | ((int64_t) key << 16);
		uint32_t	i,
					seen = 0;

		if ((int32_t) key <= prev_key)
			return malformed(err, "Its container keys are not ascending");
		prev_key = key;
		if (runs != NULL && (runs[k / 8] & (1 << (k % 8))))
		{
			uint32_t	nruns;

			if (!take(c, 2, &at))
				return malformed(err, "It ends inside a run container");
			nruns = le16(at);
			if (!take(c, (size_t) nruns * 4, &at))
				return malformed(err, "It ends inside a run container");
			for (i = 0; i < nruns; i++)
			{
				uint32_t	start = le16(at + 4 * i);
				uint32_t	len = le16(at + 4 * i + 2);
				uint32_t	v;

				if (start + len > 0xFFFF)
					return malformed(err, "A run passes its container's end");
				for (v = start; v <= start + len; v++)
					if (!put(o, base | v, err))
						return false;
				seen += len + 1;
			}
		}
		else if (card <= ARRAY_MAX)
		{
			if (!take(c, (size_t) card * 2, &at))
				return malformed(err, "It ends inside an array container");
			for (i = 0; i < card; i++)
				if (!put(o, base | le16(at + 2 * i), err))
					return false;
			seen = card;
		}
		else
		{
			if (!take(c, BITMAP_BYTES, &at))
				return malformed(err, "It ends inside a bitmap container");
			for (i = 0; i < BITMAP_BYTES * 8; i++)
				if ((at[i / 8] >> (i % 8)) & 1)
				{
					if (!put(o, base | i, err))
						return false;
					seen++;
				}
		}
		if (seen != card)
			return malformed(err, "A container's cardinality differs from its header");
	}
	return true;
}

/* See dv.h. */
bool
iceberg_dv_decode(const uint8_t *blob, size_t len, int64_t cardinality,
				  int64_t max_positions, int64_t **positions, int64_t *npositions,
				  TmsError *err)
{
	static const uint8_t magic[4] = {0xD1, 0xD3, 0x39, 0x64};
	Cur			c;
	Out			o;
	const uint8_t *at;
	uint32_t	vlen;
	uint64_t	nmaps,
				i;
	int64_t		prev_key = -1;

	tms_error_clear(err);
	*positions = NULL;
	*npositions = 0;
	if (blob == NULL || len < 20)
		return malformed(err, "It is shorter than its framing");
	vlen = be32(blob);
	if ((size_t) vlen + 8 != len || vlen < 12)
		return malformed(err, "Its length prefix does not match its size");
	if (memcmp(blob + 4, magic, 4) != 0)
		return malformed(err, "It lacks the deletion-vector magic");
	if ((uint32_t) crc32(0L, blob + 4, (uInt) vlen) != be32(blob + 4 + vlen))
		return malformed(err, "Its CRC-32 does not match");
	c.p = blob + 8;
	c.left = vlen - 4;
	memset(&o, 0, sizeof(o));
	o.max = max_positions > 0 ? max_positions : 0;
	o.last = -1;
	if (!take(&c, 8, &at))
		return malformed(err, "It ends inside its bitmap count");
	nmaps = (uint64_t) le32(at) | ((uint64_t) le32(at + 4) << 32);
	if (nmaps > c.left / 8)
		return malformed(err, "Its bitmap count exceeds its size");
	for (i = 0; i < nmaps; i++)
	{
		int64_t		key;

		if (!take(&c, 4, &at))
		{
			io_free(o.v);
			return malformed(err, "It ends inside a bitmap key");
		}
		key = (int64_t) le32(at);
		if (key <= prev_key || key > INT32_MAX)
		{
			io_free(o.v);
			return malformed(err, "Its bitmap keys are not ascending positive integers");
		}
		prev_key = key;
		if (!bitmap32(&c, key << 32, &o, err))
		{
			io_free(o.v);
			return false;
		}
	}
	if (c.left != 0)
	{
		io_free(o.v);
		return malformed(err, "It has bytes after its last bitmap");
	}
	if (cardinality >= 0 && o.n != cardinality)
	{
		io_free(o.v);
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid deletion vector");
		tms_error_detail(err, "It holds %" PRId64 " positions, its record_count says %" PRId64 ".",
						 o.n, cardinality);
		return false;
	}
	*positions = o.v;
	*npositions = o.n;
	return true;
}

/* ---------------------------------------------------------------------
 * The writer: blobs and the Puffin footer
 * ---------------------------------------------------------------------
 */

typedef struct Buf
{
	uint8_t    *b;
	size_t		n;
	size_t		cap;
	bool		oom;
} Buf;

static uint8_t *
room(Buf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (b->n + n > b->cap)
	{
		size_t		nc = b->cap ? b->cap : 256;
		uint8_t    *nb;

		while (nc < b->n + n)
			nc *= 2;
		nb = io_realloc(b->b, nc);
		if (nb == NULL)
		{
			b->oom = true;
			return NULL;
		}
		b->b = nb;
		b->cap = nc;
	}
	b->n += n;
	return b->b + b->n - n;
}

static void
add32(Buf *b, uint32_t v, bool big)
{
	uint8_t    *p = room(b, 4);

	if (p == NULL)
		return;
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (big ? 24 - 8 * i : 8 * i));
}

static void
add16(Buf *b, uint16_t v)
{
	uint8_t    *p = room(b, 2);

	if (p != NULL)
	{
		p[0] = (uint8_t) v;
		p[1] = (uint8_t) (v >> 8);
	}
}

/*
 * The portable 32-bit bitmap of the low halves of pos[0 .. n) (all with one
 * high half): no run containers; arrays up to 4096 values, bitmaps above.
 */
static void
encode32(Buf *b, const int64_t *pos, int64_t n)
{
	int64_t		i,
				j;
	uint32_t	ncont = 0;
	size_t		offset;

	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (pos[j] >> 16) == (pos[i] >> 16); j++)
			;
		ncont++;
	}
	add32(b, COOKIE_NO_RUN, false);
	add32(b, ncont, false);
	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (pos[j] >> 16) == (pos[i] >> 16); j++)
			;
		add16(b, (uint16_t) ((pos[i] >> 16) & 0xFFFF));
		add16(b, (uint16_t) (j - i - 1));
	}
	offset = 8 + 8 * (size_t) ncont;
	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (pos[j] >> 16) == (pos[i] >> 16); j++)
			;
		add32(b, (uint32_t) offset, false);
		offset += j - i <= ARRAY_MAX ? 2 * (size_t) (j - i) : BITMAP_BYTES;
	}
	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (pos[j] >> 16) == (pos[i] >> 16); j++)
			;
		if (j - i <= ARRAY_MAX)
			for (int64_t k = i; k < j; k++)
				add16(b, (uint16_t) (pos[k] & 0xFFFF));
		else
		{
			uint8_t    *bits = room(b, BITMAP_BYTES);

			if (bits == NULL)
				return;
			memset(bits, 0, BITMAP_BYTES);
			for (int64_t k = i; k < j; k++)
				bits[(pos[k] & 0xFFFF) >> 3] |= (uint8_t) (1 << (pos[k] & 7));
		}
	}
}

/* See dv.h. */
bool
iceberg_dv_encode(const int64_t *positions, int64_t n, uint8_t **blob, size_t *len,
				  TmsError *err)
{
	static const uint8_t magic[4] = {0xD1, 0xD3, 0x39, 0x64};
	Buf			b = {0};
	int64_t		i,
				j;
	uint64_t	nmaps = 0;
	uint8_t    *p;

	tms_error_clear(err);
	*blob = NULL;
	*len = 0;
	for (i = 0; i < n; i++)
		if (positions[i] < 0 || (i > 0 && positions[i] <= positions[i - 1]))
		{
			tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "deletion vector positions must be distinct, ascending and not negative");
			tms_error_detail(err, "Position %" PRId64 " at index %" PRId64 ".", positions[i], i);
			return false;
		}
	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (positions[j] >> 32) == (positions[i] >> 32); j++)
			;
		nmaps++;
	}
	add32(&b, 0, true);			/* the length, set below */
	if ((p = room(&b, 4)) != NULL)
		memcpy(p, magic, 4);
	add32(&b, (uint32_t) nmaps, false);
	add32(&b, (uint32_t) (nmaps >> 32), false);
	for (i = 0; i < n; i = j)
	{
		for (j = i; j < n && (positions[j] >> 32) == (positions[i] >> 32); j++)
			;
		add32(&b, (uint32_t) (positions[i] >> 32), false);
		encode32(&b, positions + i, j - i);
	}
	if (!b.oom && b.n - 4 > UINT32_MAX)
	{
		io_free(b.b);
		tms_error_set(err, ICEBERG_ERR_LIMIT, "deletion vector too large");
		return false;
	}
	if (!b.oom)
	{
		uint32_t	vlen = (uint32_t) (b.n - 4);
		uint32_t	crc = (uint32_t) crc32(0L, b.b + 4, (uInt) vlen);

		for (int k = 0; k < 4; k++)
			b.b[k] = (uint8_t) (vlen >> (24 - 8 * k));
		add32(&b, crc, true);
	}
	if (b.oom)
	{
		io_free(b.b);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	*blob = b.b;
	*len = b.n;
	return true;
}

/* See dv.h. */
bool
iceberg_puffin_footer(const IcebergDvBlobRef *blobs, int n, const char *created_by,
					  uint8_t **footer, size_t *len, TmsError *err)
{
	json_t	   *arr = json_array();
	json_t	   *root = NULL;
	char	   *payload = NULL;
	Buf			b = {0};
	uint8_t    *p;
	size_t		plen;
	bool		ok = arr != NULL;

	tms_error_clear(err);
	*footer = NULL;
	*len = 0;
	for (int i = 0; ok && i < n; i++)
	{
		char		card[32];
		json_t	   *o;

		snprintf(card, sizeof(card), "%" PRId64, blobs[i].cardinality);
		o = json_pack("{s:s, s:[i], s:i, s:i, s:I, s:I, s:{s:s, s:s}}",
					  "type", "deletion-vector-v1", "fields", (int) ICEBERG_DV_ROW_POS_ID,
					  "snapshot-id", -1, "sequence-number", -1,
					  "offset", (json_int_t) blobs[i].offset,
					  "length", (json_int_t) blobs[i].length, "properties",
					  "referenced-data-file", blobs[i].referenced, "cardinality", card);
		ok = o != NULL && json_array_append_new(arr, o) == 0;
	}
	if (ok)
	{
		root = json_pack("{s:o, s:{s:s}}", "blobs", arr, "properties", "created-by", created_by);
		arr = NULL;
		payload = root ? json_dumps(root, JSON_COMPACT) : NULL;
		ok = payload != NULL;
	}
	json_decref(arr);
	json_decref(root);
	if (ok)
	{
		plen = strlen(payload);
		if ((p = room(&b, 4)) != NULL)
			memcpy(p, "PFA1", 4);
		if ((p = room(&b, plen)) != NULL)
			memcpy(p, payload, plen);
		add32(&b, (uint32_t) plen, false);
		add32(&b, 0, false);	/* flags: the payload is not compressed */
		if ((p = room(&b, 4)) != NULL)
			memcpy(p, "PFA1", 4);
		ok = !b.oom;
	}
	io_json_free(payload);
	if (!ok)
	{
		io_free(b.b);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	*footer = b.b;
	*len = b.n;
	return true;
}
