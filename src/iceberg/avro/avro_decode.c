/*-------------------------------------------------------------------------
 *
 * avro_decode.c
 *	  The value decoder of the Avro reader: records decoded by plan, the
 *	  wanted leaves stored into their slots, everything else skipped with
 *	  the cheapest walk over the bytes, and partition tuples rendered as
 *	  canonical JSON.
 *
 * Strings and int arrays are copied into the per-record scratch buffer;
 * their offsets are resolved into pointers once the record is complete
 * (the buffer may move while it grows).  Every count is checked against
 * the bytes left and the collection limit before it is used.
 *
 * The hot cases of a manifest entry take no call: a record's optional
 * fields (a union whose one-byte branch index is read in the record's
 * loop), its long slots, the fields it skips when flat, the arrays of
 * column statistics, and their items whose key and length are one byte
 * each (the bounds maps).  Each still checks every read against the end
 * of the block, as the general paths do.
 *
 * src/iceberg/avro/avro_decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro/avro_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* the slots of a record are bits of smask and imask */
_Static_assert(ICEBERG_AVRO_MAX_SLOTS <= 64, "a slot mask has 64 bits");

static bool skip_node(const IcebergAvroPlanNode *n, IcebergAvroCursor *c,
					  int64_t coll_cap);

/* Skip an array (map when is_map) whose items are n->children[0]. */
static bool
skip_collection(const IcebergAvroPlanNode *n, IcebergAvroCursor *c,
				int64_t coll_cap, bool is_map)
{
	const IcebergAvroPlanNode *item = n->children[0];

	for (;;)
	{
		int64_t		count,
					bsize,
					i;

		if (!rd_count(c, item->min_size + (is_map ? 1 : 0), coll_cap, &count,
					  &bsize))
			return false;
		if (count == 0)
			return true;
		if (bsize >= 0)
		{
			c->p += bsize;
			continue;
		}
		if (!is_map && item->nflat == 1 && item->flat[0] > 0)
		{
			/*
			 * arrays of ints or of {key: int, value: long}: one run of
			 * varints (rd_count bounds count by the block's bytes)
			 */
			if (!skip_varints(c, count * item->flat[0]))
				return false;
			continue;
		}
		if (!is_map && item->nflat == 2 && item->flat[0] == 1 && item->flat[1] == 0)
		{
			/* {key: int, value: bytes}: the bounds maps, in one loop */
			const uint8_t *p = c->p;
			const uint8_t *end = c->end;

			i = 0;

			/*
			 * While every item left fits before the end even at its largest
			 * with a key and a length of one byte each (2 + 63 bytes), such
			 * items need no bound check (rd_count bounds count by the bytes
			 * left, so the product does not overflow)
			 */
			if (count * 65 <= end - p)
				for (; i < count; i++)
				{
					unsigned	k = p[0],
								l = p[1];

					if ((k | l) & 0x81)
						break;
					p += 2 + (l >> 1);
				}
			for (; i < count; i++)
			{
				uint64_t	len = 0;
				int			shift = 0;

				if (ICEBERG_LIKELY(end - p >= 2))
				{
					/* a key and a length of one byte each: most items */
					unsigned	k = p[0],
								l = p[1];

					if (ICEBERG_LIKELY(!((k | l) & 0x81)))
					{
						if ((size_t) (l >> 1) > (size_t) (end - p) - 2)
							return false;	/* beyond the block */
						p += 2 + (l >> 1);
						continue;
					}
				}
				while (p < end && (*p & 0x80))	/* the key */
					p++;
				if (++p >= end)
					return false;
				for (;;)		/* the length, zig-zag */
				{
					uint8_t		b = *p++;

					len |= (uint64_t) (b & 0x7f) << shift;
					if (!(b & 0x80))
						break;
					shift += 7;
					if (shift > 63 || p >= end)
						return false;
				}
				if (len & 1 || (len >> 1) > (uint64_t) (end - p))
					return false;	/* negative, or beyond the block */
				p += len >> 1;
			}
			c->p = p;
			continue;
		}
		if (!is_map && item->nflat >= 0)
		{
			/* arrays of other flat records */
			for (i = 0; i < count; i++)
				if (!skip_flat(item, c))
					return false;
			continue;
		}
		for (i = 0; i < count; i++)
		{
			if (is_map)
			{
				int64_t		klen;

				if (!rd_long(c, &klen) || !skip_bytes(c, klen))
					return false;
			}
			if (!skip_node(item, c, coll_cap))
				return false;
		}
	}
}

/* Skip one value of node n; a union's branch is followed without a call. */
static bool
skip_node(const IcebergAvroPlanNode *n, IcebergAvroCursor *c, int64_t coll_cap)
{
	int64_t		v;
	int			i;

	for (;;)
	{
		if (n->nflat >= 0)
			return skip_flat(n, c);
		switch (n->type)
		{
			case AT_RECORD:
				for (i = 0; i < n->nchildren; i++)
					if (!skip_node(n->children[i], c, coll_cap))
						return false;
				return true;
			case AT_ARRAY:
				return skip_collection(n, c, coll_cap, false);
			case AT_MAP:
				return skip_collection(n, c, coll_cap, true);
			case AT_UNION:
				if (!rd_long(c, &v) || v < 0 || v >= n->nchildren)
					return false;
				n = n->children[v];
				continue;
			case AT_NULL:
				return true;
			case AT_BOOLEAN:
				return skip_bytes(c, 1);
			case AT_INT:
			case AT_LONG:
			case AT_ENUM:
				return skip_varint(c);
			case AT_FLOAT:
				return skip_bytes(c, 4);
			case AT_DOUBLE:
				return skip_bytes(c, 8);
			case AT_BYTES:
			case AT_STRING:
				return rd_long(c, &v) && skip_bytes(c, v);
			case AT_FIXED:
				return skip_bytes(c, n->size);
		}
		return false;
	}
}

/* iceberg_render_json_string: see iceberg_internal.h. */
bool
iceberg_render_json_string(IcebergBuf *b, const uint8_t *s, int64_t len)
{
	static const char hex[] = "0123456789abcdef";
	int64_t		i;

	if (!iceberg_buf_append(b, "\"", 1))
		return false;
	for (i = 0; i < len; i++)
	{
		uint8_t		ch = s[i];
		char		esc[6];

		if (ch == '"' || ch == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) ch;
			if (!iceberg_buf_append(b, esc, 2))
				return false;
		}
		else if (ch < 0x20)
		{
			esc[0] = '\\';
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[ch >> 4];
			esc[5] = hex[ch & 15];
			if (!iceberg_buf_append(b, esc, 6))
				return false;
		}
		else if (!iceberg_buf_append(b, &ch, 1))
			return false;
	}
	return iceberg_buf_append(b, "\"", 1);
}

/* iceberg_render_hex: see iceberg_internal.h. */
bool
iceberg_render_hex(IcebergBuf *b, const uint8_t *s, int64_t len)
{
	static const char hex[] = "0123456789abcdef";
	int64_t		i;

	if (!iceberg_buf_reserve(b, (size_t) len * 2 + 4))
		return false;
	b->data[b->len++] = '"';
	b->data[b->len++] = '0';
	b->data[b->len++] = 'x';
	for (i = 0; i < len; i++)
	{
		b->data[b->len++] = hex[s[i] >> 4];
		b->data[b->len++] = hex[s[i] & 15];
	}
	b->data[b->len++] = '"';
	b->data[b->len] = '\0';
	return true;
}

/*
 * Render one value as canonical JSON into b (partition tuples).  Returns
 * false on malformed input or allocation failure (*oom says which).
 */
static bool
render_node(const IcebergAvroPlanNode *n, IcebergAvroCursor *c, IcebergBuf *b,
			int64_t coll_cap, int depth, bool *oom)
{
	char		tmp[64];
	int64_t		v;
	const uint8_t *s;
	int			i;

#define APPEND(p, l) do { if (!iceberg_buf_append(b, (p), (l))) { *oom = true; return false; } } while (0)
	if (depth > ICEBERG_AVRO_MAX_DEPTH)
		return false;
	switch (n->type)
	{
		case AT_NULL:
			APPEND("null", 4);
			return true;
		case AT_BOOLEAN:
			if (c->p >= c->end || *c->p > 1)
				return false;
			if (*c->p++)
				APPEND("true", 4);
			else
				APPEND("false", 5);
			return true;
		case AT_INT:
		case AT_LONG:
		case AT_ENUM:
			if (!rd_long(c, &v))
				return false;
			snprintf(tmp, sizeof(tmp), "%lld", (long long) v);
			APPEND(tmp, strlen(tmp));
			return true;
		case AT_FLOAT:
			{
				float		f;

				if (c->end - c->p < 4)
					return false;
				memcpy(&f, c->p, 4);	/* Avro is little-endian, like us */
				c->p += 4;
				if (isnan(f))
					APPEND("\"NaN\"", 5);
				else if (isinf(f))
					APPEND(f > 0 ? "\"Infinity\"" : "\"-Infinity\"", f > 0 ? 10 : 11);
				else
				{
					snprintf(tmp, sizeof(tmp), "%.9g", (double) f);
					APPEND(tmp, strlen(tmp));
				}
				return true;
			}
		case AT_DOUBLE:
			{
				double		d;

				if (c->end - c->p < 8)
					return false;
				memcpy(&d, c->p, 8);
				c->p += 8;
				if (isnan(d))
					APPEND("\"NaN\"", 5);
				else if (isinf(d))
					APPEND(d > 0 ? "\"Infinity\"" : "\"-Infinity\"", d > 0 ? 10 : 11);
				else
				{
					snprintf(tmp, sizeof(tmp), "%.17g", d);
					APPEND(tmp, strlen(tmp));
				}
				return true;
			}
		case AT_STRING:
			if (!rd_bytes(c, &s, &v))
				return false;
			if (!iceberg_render_json_string(b, s, v))
			{
				*oom = true;
				return false;
			}
			return true;
		case AT_BYTES:
			if (!rd_bytes(c, &s, &v))
				return false;
			if (!iceberg_render_hex(b, s, v))
			{
				*oom = true;
				return false;
			}
			return true;
		case AT_FIXED:
			if (c->end - c->p < n->size)
				return false;
			if (!iceberg_render_hex(b, c->p, n->size))
			{
				*oom = true;
				return false;
			}
			c->p += n->size;
			return true;
		case AT_UNION:
			if (!rd_long(c, &v) || v < 0 || v >= n->nchildren)
				return false;
			return render_node(n->children[v], c, b, coll_cap, depth + 1, oom);
		case AT_RECORD:
			APPEND("[", 1);
			for (i = 0; i < n->nchildren; i++)
			{
				if (i > 0)
					APPEND(",", 1);
				if (!render_node(n->children[i], c, b, coll_cap, depth + 1, oom))
					return false;
			}
			APPEND("]", 1);
			return true;
		case AT_ARRAY:
		case AT_MAP:
			{
				bool		first = true;

				APPEND("[", 1);
				for (;;)
				{
					int64_t		count,
								bsize,
								k;

					if (!rd_count(c, n->children[0]->min_size + (n->type == AT_MAP ? 1 : 0),
								  coll_cap, &count, &bsize))
						return false;
					if (count == 0)
						break;
					for (k = 0; k < count; k++)
					{
						if (!first)
							APPEND(",", 1);
						first = false;
						if (n->type == AT_MAP)
						{
							if (!rd_bytes(c, &s, &v))
								return false;
							if (!iceberg_render_json_string(b, s, v))
							{
								*oom = true;
								return false;
							}
							APPEND(":", 1);
						}
						if (!render_node(n->children[0], c, b, coll_cap, depth + 1, oom))
							return false;
					}
				}
				APPEND("]", 1);
				return true;
			}
	}
#undef APPEND
	return false;
}

/* Align the scratch buffer length to 8 bytes. */
static bool
scratch_align(IcebergBuf *b)
{
	static const char zeros[8] = {0};
	size_t		pad = (8 - (b->len & 7)) & 7;

	return pad == 0 || iceberg_buf_append(b, zeros, pad);
}

/* Skip a field not wanted: without a call when flat or an array. */
static inline bool
skip_field(const IcebergAvroPlanNode *n, IcebergAvroCursor *c, int64_t coll_cap)
{
	if (n->nflat >= 0)
		return skip_flat(n, c);
	if (n->type == AT_ARRAY)
		return skip_collection(n, c, coll_cap, false);
	return skip_node(n, c, coll_cap);
}

/*
 * An array slot: its ints copied into the scratch buffer (INT_ARRAY), or
 * only counted (COUNT_ARRAY).
 */
static bool
decode_int_array(IcebergAvroReader *r, const IcebergAvroPlanNode *n,
				 IcebergAvroCursor *c, IcebergAvroValue *out, bool *oom)
{
	const IcebergAvroPlanNode *item = n->children[0];
	int			total = 0;
	int64_t		v;

	if (!scratch_align(&r->scratch))
	{
		*oom = true;
		return false;
	}
	if (n->kind == ICEBERG_AVRO_SLOT_INT_ARRAY)
	{
		r->iofs[n->slot] = r->scratch.len;
		r->imask |= UINT64_C(1) << n->slot;
	}
	for (;;)
	{
		int64_t		count,
					bsize,
					k;

		if (!rd_count(c, item->min_size, r->coll_cap, &count, &bsize))
			return false;
		if (count == 0)
			break;
		if (count > r->coll_cap - total)
			return false;
		if (n->kind == ICEBERG_AVRO_SLOT_COUNT_ARRAY)
		{
			total += (int) count;
			if (bsize >= 0)
				c->p += bsize;
			else
				for (k = 0; k < count; k++)
					if (!skip_node(item, c, r->coll_cap))
						return false;
			continue;
		}
		for (k = 0; k < count; k++)
		{
			int32_t		iv;

			if (!rd_long(c, &v) || v < INT32_MIN || v > INT32_MAX)
				return false;
			iv = (int32_t) v;
			if (!iceberg_buf_append(&r->scratch, &iv, sizeof(iv)))
			{
				*oom = true;
				return false;
			}
			total++;
		}
	}
	out->nints = n->kind == ICEBERG_AVRO_SLOT_INT_ARRAY ? total : 0;
	out->l = total;
	out->present = true;
	return true;
}

/*
 * Decode one value of n, storing wanted leaves into values (string
 * offsets into r->sofs / r->iofs, resolved after the record).  On a
 * malformed value returns false; *oom distinguishes allocation failure.
 */
static bool
decode_node(IcebergAvroReader *r, const IcebergAvroPlanNode *n,
			IcebergAvroCursor *c, IcebergAvroValue *values, bool *oom)
{
	int64_t		v;
	int			i;

	if (!n->wanted)
		return n->nflat >= 0 ? skip_flat(n, c) : skip_node(n, c, r->coll_cap);

	if (n->slot >= 0)
	{
		IcebergAvroValue *out = &values[n->slot];

		switch (n->kind)
		{
			case ICEBERG_AVRO_SLOT_LONG:
				if (!rd_long(c, &v))
					return false;
				if (n->type == AT_INT && (v < INT32_MIN || v > INT32_MAX))
					return false;
				out->l = v;
				out->present = true;
				return true;
			case ICEBERG_AVRO_SLOT_STRING:
				{
					const uint8_t *s;

					if (!rd_bytes(c, &s, &v))
						return false;
					if (v > r->string_cap)
						return false;
					/* the bytes and a NUL, and the buffer's own NUL after */
					if (r->scratch.cap - r->scratch.len < (size_t) v + 2 &&
						!iceberg_buf_reserve(&r->scratch, (size_t) v + 1))
					{
						*oom = true;
						return false;
					}
					r->sofs[n->slot] = r->scratch.len;
					r->smask |= UINT64_C(1) << n->slot;
					memcpy(r->scratch.data + r->scratch.len, s, (size_t) v);
					r->scratch.len += (size_t) v + 1;
					r->scratch.data[r->scratch.len - 1] = '\0';
					r->scratch.data[r->scratch.len] = '\0';
					out->slen = (size_t) v;
					out->present = true;
					return true;
				}
			case ICEBERG_AVRO_SLOT_PARTITION:
				{
					size_t		start = r->scratch.len;

					if (!render_node(n, c, &r->scratch, r->coll_cap, 0, oom))
						return false;
					if (r->scratch.len - start > (size_t) r->string_cap)
						return false;
					if (!iceberg_buf_append(&r->scratch, "", 1))
					{
						*oom = true;
						return false;
					}
					r->sofs[n->slot] = start;
					r->smask |= UINT64_C(1) << n->slot;
					out->slen = r->scratch.len - 1 - start;
					out->present = true;
					return true;
				}
			case ICEBERG_AVRO_SLOT_INT_ARRAY:
			case ICEBERG_AVRO_SLOT_COUNT_ARRAY:
				return decode_int_array(r, n, c, out, oom);
			case ICEBERG_AVRO_SLOT_RAW:
				break;			/* raw spans use raw_slot */
		}
		return false;
	}

	if (ICEBERG_UNLIKELY(n->raw_slot >= 0))
	{
		/* ICEBERG_AVRO_SLOT_RAW: record the span around the value */
		const uint8_t *start = c->p;
		IcebergAvroValue *out = &values[n->raw_slot];

		if (n->type == AT_RECORD)
		{
			for (i = 0; i < n->nchildren; i++)
				if (!decode_node(r, n->children[i], c, values, oom))
					return false;
		}
		else if (!skip_node(n, c, r->coll_cap))
			return false;
		out->s = (const char *) start;
		out->slen = (size_t) (c->p - start);
		out->present = true;
		return true;
	}

	switch (n->type)
	{
		case AT_RECORD:
			for (i = 0; i < n->nchildren; i++)
			{
				const IcebergAvroPlanNode *child = n->children[i];

				/*
				 * A union's one-byte branch index (optional fields) is read
				 * here, unless a span is recorded around the union; then the
				 * fields not wanted are skipped without a call when flat, and
				 * long slots are stored without a call.
				 */
				if (child->type == AT_UNION && child->raw_slot < 0 &&
					ICEBERG_LIKELY(c->p < c->end) && !(*c->p & 0x80))
				{
					v = (int64_t) ((*c->p >> 1) ^ (~(*c->p & 1) + 1));
					if (v < 0 || v >= child->nchildren)
						return false;
					c->p++;
					child = child->children[v];
				}
				if (!child->wanted)
				{
					if (!skip_field(child, c, r->coll_cap))
						return false;
				}
				else if (child->slot >= 0 && child->kind == ICEBERG_AVRO_SLOT_LONG &&
						 child->raw_slot < 0)
				{
					if (!rd_long(c, &v))
						return false;
					if (child->type == AT_INT && (v < INT32_MIN || v > INT32_MAX))
						return false;
					values[child->slot].l = v;
					values[child->slot].present = true;
				}
				else if (!decode_node(r, child, c, values, oom))
					return false;
			}
			return true;
		case AT_UNION:
			if (!rd_long(c, &v) || v < 0 || v >= n->nchildren)
				return false;
			return decode_node(r, n->children[v], c, values, oom);
		default:
			/* wanted but neither a slot nor a container: cannot happen */
			return skip_node(n, c, r->coll_cap);
	}
}

/* ---------------------------------------------------------------------
 * Records
 * ---------------------------------------------------------------------
 */

/*
 * iceberg_avro_reader_next: see iceberg_internal.h.
 */
int
iceberg_avro_reader_next(IcebergAvroReader *r, IcebergAvroValue *values,
						 TmsError *err)
{
	bool		oom = false;
	int			i;

	while (r->left == 0)
	{
		int			rc;

		if (r->nblocks > 0 && r->cur.p != r->cur.end)
		{
			iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
							   "avro block has bytes after its last object");
			return -1;
		}
		rc = iceberg_avro_next_block(r, err);
		if (rc <= 0)
			return rc;
	}
	memset(values, 0, sizeof(IcebergAvroValue) * r->nslots);
	r->smask = r->imask = 0;
	r->scratch.len = 0;
	r->last_raw = r->cur.p;
	if (!decode_node(r, r->root, &r->cur, values, &oom))
	{
		if (oom)
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		else
			iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid or truncated avro record");
		return -1;
	}
	r->left--;
	r->last_raw_len = (size_t) (r->cur.p - r->last_raw);
	/* resolve scratch offsets now that the buffer no longer moves */
	if (r->scratch.data != NULL)
	{
		uint64_t	m;

		for (m = r->smask; m != 0; m &= m - 1)
		{
			i = __builtin_ctzll(m);
			if (values[i].present)
				values[i].s = r->scratch.data + r->sofs[i];
		}
		for (m = r->imask; m != 0; m &= m - 1)
		{
			i = __builtin_ctzll(m);
			if (values[i].present && values[i].nints > 0)
				values[i].ints = (const int32_t *) (r->scratch.data + r->iofs[i]);
		}
	}
	return 1;
}

/* See iceberg_internal.h. */
void
iceberg_avro_reader_last_raw(const IcebergAvroReader *r, const uint8_t **data,
							 size_t *len)
{
	*data = r->last_raw;
	*len = r->last_raw_len;
}
