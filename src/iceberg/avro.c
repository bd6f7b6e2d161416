/*-------------------------------------------------------------------------
 *
 * avro.c
 *	  A streaming, schema-resolving reader for Avro object container files,
 *	  specialised for Iceberg manifest lists and manifests.
 *
 * Why not avro-c: its generic reader materialises every field of every
 * record as an avro_value_t (the column statistics maps of a data_file are
 * most of a manifest's bytes), and it needs a reader schema for
 * resolution by name, while Iceberg requires matching by field id.  This
 * reader compiles the writer schema from the file header, once, into a
 * decode plan: a tree whose nodes either store a value into a numbered
 * slot or are skipped with the cheapest possible walk over the bytes.
 * bench/iceberg_manifest_bench.c measures both (doc/iceberg-io.md has the
 * figures).
 *
 * Safety: every read is checked against the end of the block; every
 * count is checked against the bytes left (an item takes at least its
 * minimum encoded size) and against the collection limit; block and
 * string sizes are capped; the sync marker after each block is compared
 * with the header's; schema nesting is bounded.  Nothing allocates in
 * proportion to a count read from the file.  Memory: the source buffer
 * holds one compressed block (plus read-ahead), the inflate buffer one
 * decompressed block, the scratch buffer one record's strings.
 *
 * Codecs: null, deflate (raw zlib inflate), snappy (a small decoder
 * here: libsnappy is not a dependency; CRC-32 of the block checked).
 *
 * src/iceberg/avro.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define AVRO_MAX_DEPTH		32	/* schema nesting */
#define AVRO_MAX_NAMED		4096	/* named types in one schema */
#define AVRO_MAX_FIELDS		65536	/* fields of one record / union
									 * branches */

typedef enum AvroType
{
	AT_NULL,
	AT_BOOLEAN,
	AT_INT,
	AT_LONG,
	AT_FLOAT,
	AT_DOUBLE,
	AT_BYTES,
	AT_STRING,
	AT_FIXED,
	AT_ENUM,
	AT_RECORD,
	AT_ARRAY,
	AT_MAP,
	AT_UNION
} AvroType;

typedef enum AvroCodec
{
	CODEC_NULL,
	CODEC_DEFLATE,
	CODEC_SNAPPY
} AvroCodec;

/* One node of the decode plan. */
typedef struct PlanNode
{
	AvroType	type;
	int			slot;			/* >= 0: store the value here */
	AvroSlotKind kind;			/* what to store (when slot >= 0) */
	bool		wanted;			/* this subtree stores something */
	int32_t		size;			/* fixed: byte size; enum: symbol count */
	int64_t		min_size;		/* minimum encoded size in bytes */
	int32_t		nvarints;		/* > 0: encoded as exactly this many varints
								 * (int, long, enum, records of those) */
	int			nchildren;
	struct PlanNode **children; /* record fields, union branches, or the
								 * array item / map value as [0] */
} PlanNode;

/* A cursor over decoded block bytes. */
typedef struct Cur
{
	const uint8_t *p;
	const uint8_t *end;
} Cur;

typedef struct NamedType
{
	char	   *name;
	json_t	   *def;			/* borrowed from the parsed schema */
} NamedType;

struct AvroReader
{
	const IcebergFileIO *io;
	void	   *handle;
	IcebergLimits limits;
	char		path[256];
	const char *what;

	/* header */
	int			nmeta;
	IcebergKeyValue *meta;
	uint8_t		sync[16];
	AvroCodec	codec;
	int32_t    *top_ids;
	int			ntop_ids;

	/* plan */
	PlanNode   *root;

	/* source buffer: bytes read from io, [pos, end) not yet consumed */
	uint8_t    *buf;
	size_t		alloc;
	size_t		pos;
	size_t		end;
	bool		eof;

	/* current block */
	IcebergBuf	inflated;
	z_stream	zs;
	bool		zs_ready;
	Cur			cur;
	int64_t		left;			/* objects left in the block */
	int64_t		nblocks;

	/* per record scratch and slot string offsets */
	IcebergBuf	scratch;
	size_t		sofs[AVRO_MAX_SLOTS];
	size_t		iofs[AVRO_MAX_SLOTS];
	int64_t		string_cap;
	int64_t		coll_cap;

	int64_t		bytes_compressed;
	int64_t		bytes_inflated;
};

/* ---------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------
 */

static bool
avro_error(AvroReader *r, IcebergError *err, IcebergErrorCode code,
		   const char *msg)
{
	iceberg_set_error(err, code, "%s in %s", msg, r->what);
	iceberg_set_detail(err, "The file is \"%s\"%s.", r->path,
					   r->nblocks > 0 ? " (after its first block)" : "");
	return false;
}

/* ---------------------------------------------------------------------
 * Primitive decoding
 * ---------------------------------------------------------------------
 */

/* Zig-zag varint long; false when truncated or longer than 10 bytes. */
static inline bool
rd_long(Cur *c, int64_t *out)
{
	uint64_t	v = 0;
	int			shift = 0;

	while (ICEBERG_LIKELY(c->p < c->end))
	{
		uint8_t		b = *c->p++;

		v |= (uint64_t) (b & 0x7f) << shift;
		if (!(b & 0x80))
		{
			*out = (int64_t) ((v >> 1) ^ (~(v & 1) + 1));
			return true;
		}
		shift += 7;
		if (shift > 63)
			return false;
	}
	return false;
}

/* Skip one varint. */
static inline bool
skip_varint(Cur *c)
{
	const uint8_t *p = c->p;
	const uint8_t *lim = c->end;

	if (lim - p > 10)
		lim = p + 10;
	while (p < lim)
	{
		if (!(*p++ & 0x80))
		{
			c->p = p;
			return true;
		}
	}
	return false;
}

/*
 * Skip n varints: count the bytes that end one.  Overlong varints are not
 * diagnosed here; the values are not used.
 */
static inline bool
skip_varints(Cur *c, int64_t n)
{
	const uint8_t *p = c->p;
	const uint8_t *end = c->end;

	while (n > 0)
	{
		if (ICEBERG_UNLIKELY(p >= end))
			return false;
		n -= !(*p++ & 0x80);
	}
	c->p = p;
	return true;
}

/* Skip n bytes. */
static inline bool
skip_bytes(Cur *c, int64_t n)
{
	if (n < 0 || n > c->end - c->p)
		return false;
	c->p += n;
	return true;
}

/* Read a length-prefixed byte string; borrowed pointer into the block. */
static inline bool
rd_bytes(Cur *c, const uint8_t **s, int64_t *len)
{
	if (!rd_long(c, len) || *len < 0 || *len > c->end - c->p)
		return false;
	*s = c->p;
	c->p += *len;
	return true;
}

/*
 * Read a block count of an array or map: returns false on error; a
 * negative count is followed by the block's byte size, returned in *bsize
 * (else -1).  The count is checked against the bytes left.
 */
static inline bool
rd_count(Cur *c, int64_t min_item, int64_t coll_cap, int64_t *count,
		 int64_t *bsize)
{
	*bsize = -1;
	if (!rd_long(c, count))
		return false;
	if (*count < 0)
	{
		if (*count == INT64_MIN)
			return false;
		*count = -*count;
		if (!rd_long(c, bsize) || *bsize < 0 || *bsize > c->end - c->p)
			return false;
	}
	if (*count > coll_cap)
		return false;
	if (min_item > 0 && *count > (c->end - c->p) / min_item)
		return false;
	return true;
}

/* ---------------------------------------------------------------------
 * Skipping and decoding by plan
 * ---------------------------------------------------------------------
 */

static bool skip_node(const PlanNode *n, Cur *c, int64_t coll_cap);

/* Skip an array (map when is_map) whose items are n->children[0]. */
static bool
skip_collection(const PlanNode *n, Cur *c, int64_t coll_cap, bool is_map)
{
	const PlanNode *item = n->children[0];

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
		if (!is_map && item->nvarints > 0)
		{
			/* arrays of ints or of {key: int, value: long}: a tight loop */
			if (!skip_varints(c, count * item->nvarints))
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

/* Skip one value of node n. */
static bool
skip_node(const PlanNode *n, Cur *c, int64_t coll_cap)
{
	int64_t		v;
	int			i;

	if (n->nvarints > 0)
		return skip_varints(c, n->nvarints);
	switch (n->type)
	{
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
			return skip_node(n->children[v], c, coll_cap);
	}
	return false;
}

/* Append JSON text for a string value to the scratch buffer. */
static bool
render_json_string(IcebergBuf *b, const uint8_t *s, int64_t len)
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

/* Append "0x<hex>" for binary values. */
static bool
render_hex(IcebergBuf *b, const uint8_t *s, int64_t len)
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
render_node(const PlanNode *n, Cur *c, IcebergBuf *b, int64_t coll_cap,
			int depth, bool *oom)
{
	char		tmp[64];
	int64_t		v;
	const uint8_t *s;
	int			i;

#define APPEND(p, l) do { if (!iceberg_buf_append(b, (p), (l))) { *oom = true; return false; } } while (0)
	if (depth > AVRO_MAX_DEPTH)
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
			if (!render_json_string(b, s, v))
			{
				*oom = true;
				return false;
			}
			return true;
		case AT_BYTES:
			if (!rd_bytes(c, &s, &v))
				return false;
			if (!render_hex(b, s, v))
			{
				*oom = true;
				return false;
			}
			return true;
		case AT_FIXED:
			if (c->end - c->p < n->size)
				return false;
			if (!render_hex(b, c->p, n->size))
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
							if (!render_json_string(b, s, v))
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

/*
 * Decode one value of n, storing wanted leaves into values (string
 * offsets into r->sofs / r->iofs, resolved after the record).  On a
 * malformed value returns false; *oom distinguishes allocation failure.
 */
static bool
decode_node(AvroReader *r, const PlanNode *n, Cur *c, AvroValue *values,
			bool *oom)
{
	int64_t		v;
	int			i;

	if (!n->wanted)
	{
		if (n->nvarints > 0)
			return skip_varints(c, n->nvarints);
		return skip_node(n, c, r->coll_cap);
	}

	if (n->slot >= 0)
	{
		AvroValue  *out = &values[n->slot];

		switch (n->kind)
		{
			case AVRO_SLOT_LONG:
				if (!rd_long(c, &v))
					return false;
				if (n->type == AT_INT && (v < INT32_MIN || v > INT32_MAX))
					return false;
				out->l = v;
				out->present = true;
				return true;
			case AVRO_SLOT_STRING:
				{
					const uint8_t *s;

					if (!rd_bytes(c, &s, &v))
						return false;
					if (v > r->string_cap)
						return false;
					r->sofs[n->slot] = r->scratch.len;
					if (!iceberg_buf_append(&r->scratch, s, (size_t) v) ||
						!iceberg_buf_append(&r->scratch, "", 1))
					{
						*oom = true;
						return false;
					}
					out->slen = (size_t) v;
					out->present = true;
					return true;
				}
			case AVRO_SLOT_PARTITION:
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
					out->slen = r->scratch.len - 1 - start;
					out->present = true;
					return true;
				}
			case AVRO_SLOT_INT_ARRAY:
			case AVRO_SLOT_COUNT_ARRAY:
				{
					const PlanNode *item = n->children[0];
					int			total = 0;

					if (!scratch_align(&r->scratch))
					{
						*oom = true;
						return false;
					}
					if (n->kind == AVRO_SLOT_INT_ARRAY)
						r->iofs[n->slot] = r->scratch.len;
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
						if (n->kind == AVRO_SLOT_COUNT_ARRAY)
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
					out->nints = n->kind == AVRO_SLOT_INT_ARRAY ? total : 0;
					out->l = total;
					out->present = true;
					return true;
				}
		}
		return false;
	}

	switch (n->type)
	{
		case AT_RECORD:
			for (i = 0; i < n->nchildren; i++)
				if (!decode_node(r, n->children[i], c, values, oom))
					return false;
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
 * Plan compilation from the writer schema
 * ---------------------------------------------------------------------
 */

typedef struct Compiler
{
	NamedType  *named;
	int			nnamed;
	int			nodes;			/* total plan nodes, bounded */
	IcebergError *err;
	AvroReader *r;
	bool		failed_oom;
	const char *bad;			/* a short reason for a malformed schema */
} Compiler;

static void
free_plan(PlanNode *n)
{
	int			i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nchildren; i++)
		free_plan(n->children[i]);
	free(n->children);
	free(n);
}

static PlanNode *
new_node(Compiler *cc, AvroType t, int nchildren)
{
	PlanNode   *n;

	if (++cc->nodes > 1000000)
	{
		cc->bad = "schema too large";
		return NULL;
	}
	n = calloc(1, sizeof(PlanNode));
	if (n == NULL)
	{
		cc->failed_oom = true;
		return NULL;
	}
	n->type = t;
	n->slot = -1;
	if (nchildren > 0)
	{
		n->children = calloc((size_t) nchildren, sizeof(PlanNode *));
		if (n->children == NULL)
		{
			free(n);
			cc->failed_oom = true;
			return NULL;
		}
	}
	n->nchildren = 0;
	return n;
}

/* Register a named type (record / enum / fixed) under its full name. */
static bool
register_named(Compiler *cc, json_t *def)
{
	const char *name = json_string_value(json_object_get(def, "name"));
	const char *ns = json_string_value(json_object_get(def, "namespace"));
	char	   *full;
	int			i;

	if (name == NULL)
	{
		cc->bad = "named type without a name";
		return false;
	}
	if (cc->nnamed >= AVRO_MAX_NAMED)
	{
		cc->bad = "too many named types";
		return false;
	}
	if (ns != NULL && ns[0] != '\0' && strchr(name, '.') == NULL)
	{
		full = malloc(strlen(ns) + strlen(name) + 2);
		if (full)
			sprintf(full, "%s.%s", ns, name);
	}
	else
		full = iceberg_strdup(name, NULL);
	if (full == NULL)
	{
		cc->failed_oom = true;
		return false;
	}
	for (i = 0; i < cc->nnamed; i++)
		if (strcmp(cc->named[i].name, full) == 0)
		{
			/* redefinition: keep the first, as Avro forbids it anyway */
			free(full);
			return true;
		}
	if (cc->nnamed % 16 == 0)
	{
		NamedType  *nt = realloc(cc->named, sizeof(NamedType) * (size_t) (cc->nnamed + 16));

		if (nt == NULL)
		{
			free(full);
			cc->failed_oom = true;
			return false;
		}
		cc->named = nt;
	}
	cc->named[cc->nnamed].name = full;
	cc->named[cc->nnamed].def = def;
	cc->nnamed++;
	return true;
}

static json_t *
lookup_named(Compiler *cc, const char *name)
{
	int			i;
	const char *dot;

	for (i = 0; i < cc->nnamed; i++)
		if (strcmp(cc->named[i].name, name) == 0)
			return cc->named[i].def;
	/* unqualified reference to a namespaced name */
	for (i = 0; i < cc->nnamed; i++)
	{
		dot = strrchr(cc->named[i].name, '.');
		if (dot != NULL && strcmp(dot + 1, name) == 0)
			return cc->named[i].def;
	}
	return NULL;
}

static PlanNode *compile(Compiler *cc, json_t *schema, const AvroTarget *leaf,
						 const AvroTarget *targets, int ntargets, int depth);

/* Primitive type from its name; -1 when not primitive. */
static int
primitive_type(const char *s)
{
	static const struct
	{
		const char *name;
		AvroType	t;
	}			prims[] = {
		{"null", AT_NULL}, {"boolean", AT_BOOLEAN}, {"int", AT_INT},
		{"long", AT_LONG}, {"float", AT_FLOAT}, {"double", AT_DOUBLE},
		{"bytes", AT_BYTES}, {"string", AT_STRING}
	};
	size_t		i;

	for (i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (strcmp(s, prims[i].name) == 0)
			return (int) prims[i].t;
	return -1;
}

static int64_t
prim_min_size(AvroType t)
{
	switch (t)
	{
		case AT_NULL:
			return 0;
		case AT_FLOAT:
			return 4;
		case AT_DOUBLE:
			return 8;
		default:
			return 1;
	}
}

/* Does a leaf of this type suit the target's slot kind? */
static bool
leaf_compatible(const PlanNode *n, AvroSlotKind kind)
{
	switch (kind)
	{
		case AVRO_SLOT_LONG:
			return n->type == AT_INT || n->type == AT_LONG;
		case AVRO_SLOT_STRING:
			return n->type == AT_STRING || n->type == AT_BYTES;
		case AVRO_SLOT_INT_ARRAY:
			return n->type == AT_ARRAY &&
				(n->children[0]->type == AT_INT || n->children[0]->type == AT_LONG);
		case AVRO_SLOT_COUNT_ARRAY:
			return n->type == AT_ARRAY;
		case AVRO_SLOT_PARTITION:
			return n->type == AT_RECORD;
	}
	return false;
}

/* Compile a record's fields against targets (ntargets may be 0). */
static PlanNode *
compile_record(Compiler *cc, json_t *def, const AvroTarget *targets,
			   int ntargets, int depth)
{
	json_t	   *fields = json_object_get(def, "fields");
	PlanNode   *n;
	size_t		i;

	if (!json_is_array(fields) || json_array_size(fields) > AVRO_MAX_FIELDS)
	{
		cc->bad = "record without a valid \"fields\" array";
		return NULL;
	}
	n = new_node(cc, AT_RECORD, (int) json_array_size(fields));
	if (n == NULL)
		return NULL;
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *idj = json_object_get(f, "field-id");
		const char *fname = json_string_value(json_object_get(f, "name"));
		const AvroTarget *match = NULL;
		PlanNode   *child;
		int			k;

		if (!json_is_object(f) || fname == NULL || json_object_get(f, "type") == NULL)
		{
			cc->bad = "record field without a name or type";
			free_plan(n);
			return NULL;
		}
		for (k = 0; k < ntargets && match == NULL; k++)
		{
			const AvroTarget *t = &targets[k];

			if (json_is_integer(idj))
			{
				if (t->field_id >= 0 && json_integer_value(idj) == t->field_id)
					match = t;
			}
			else if (strcmp(fname, t->name) == 0 ||
					 (t->alt_name != NULL && strcmp(fname, t->alt_name) == 0))
				match = t;
		}
		if (match != NULL && match->children != NULL)
			child = compile(cc, json_object_get(f, "type"), NULL, match->children,
							match->nchildren, depth + 1);
		else
			child = compile(cc, json_object_get(f, "type"), match, NULL, 0,
							depth + 1);
		if (child == NULL)
		{
			free_plan(n);
			return NULL;
		}
		n->children[n->nchildren++] = child;
		n->min_size += child->min_size;
		if (child->wanted)
			n->wanted = true;
	}
	/* a record of nothing but varints is skipped as a run of varints */
	for (i = 0; i < (size_t) n->nchildren; i++)
	{
		if (n->children[i]->nvarints <= 0 || n->nvarints > 1000000)
		{
			n->nvarints = 0;
			break;
		}
		n->nvarints += n->children[i]->nvarints;
	}
	return n;
}

/*
 * Compile one schema into a plan node.  "leaf" (may be NULL) is a target
 * whose slot this value fills; targets/ntargets apply to a record.
 */
static PlanNode *
compile(Compiler *cc, json_t *schema, const AvroTarget *leaf,
		const AvroTarget *targets, int ntargets, int depth)
{
	PlanNode   *n = NULL;

	if (depth > AVRO_MAX_DEPTH)
	{
		cc->bad = "schema nested too deeply";
		return NULL;
	}
	if (json_is_string(schema))
	{
		const char *s = json_string_value(schema);
		int			t = primitive_type(s);

		if (t >= 0)
		{
			n = new_node(cc, (AvroType) t, 0);
			if (n == NULL)
				return NULL;
			n->min_size = prim_min_size(n->type);
			if (n->type == AT_INT || n->type == AT_LONG)
				n->nvarints = 1;
		}
		else
		{
			json_t	   *def = lookup_named(cc, s);

			if (def == NULL)
			{
				cc->bad = "reference to an undefined named type";
				return NULL;
			}
			return compile(cc, def, leaf, targets, ntargets, depth + 1);
		}
	}
	else if (json_is_array(schema))
	{
		size_t		i;
		size_t		nb = json_array_size(schema);

		if (nb == 0 || nb > AVRO_MAX_FIELDS)
		{
			cc->bad = "invalid union";
			return NULL;
		}
		n = new_node(cc, AT_UNION, (int) nb);
		if (n == NULL)
			return NULL;
		n->min_size = 1;
		for (i = 0; i < nb; i++)
		{
			json_t	   *b = json_array_get(schema, i);
			bool		is_null = json_is_string(b) &&
				strcmp(json_string_value(b), "null") == 0;
			PlanNode   *child = compile(cc, b, is_null ? NULL : leaf,
										is_null ? NULL : targets,
										is_null ? 0 : ntargets, depth + 1);

			if (child == NULL)
			{
				free_plan(n);
				return NULL;
			}
			n->children[n->nchildren++] = child;
			if (child->wanted)
				n->wanted = true;
		}
		return n;
	}
	else if (json_is_object(schema))
	{
		const char *type = json_string_value(json_object_get(schema, "type"));
		int			t;

		if (type == NULL)
		{
			json_t	   *inner = json_object_get(schema, "type");

			/* {"type": {...}} or {"type": [...]} wraps a schema */
			if (inner != NULL && (json_is_object(inner) || json_is_array(inner)))
				return compile(cc, inner, leaf, targets, ntargets, depth + 1);
			cc->bad = "schema object without a type";
			return NULL;
		}
		t = primitive_type(type);
		if (t >= 0)
		{
			/* primitive with attributes, e.g. a logicalType */
			n = new_node(cc, (AvroType) t, 0);
			if (n == NULL)
				return NULL;
			n->min_size = prim_min_size(n->type);
			if (n->type == AT_INT || n->type == AT_LONG)
				n->nvarints = 1;
		}
		else if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0)
		{
			if (!register_named(cc, schema))
				return NULL;
			if (leaf != NULL)
			{
				/* a record stored whole (partition): children unwanted */
				n = compile_record(cc, schema, NULL, 0, depth);
			}
			else
				n = compile_record(cc, schema, targets, ntargets, depth);
			if (n == NULL)
				return NULL;
		}
		else if (strcmp(type, "enum") == 0)
		{
			json_t	   *syms = json_object_get(schema, "symbols");

			if (!register_named(cc, schema))
				return NULL;
			if (!json_is_array(syms))
			{
				cc->bad = "enum without symbols";
				return NULL;
			}
			n = new_node(cc, AT_ENUM, 0);
			if (n == NULL)
				return NULL;
			n->size = (int32_t) json_array_size(syms);
			n->min_size = 1;
			n->nvarints = 1;
		}
		else if (strcmp(type, "fixed") == 0)
		{
			json_t	   *sz = json_object_get(schema, "size");

			if (!register_named(cc, schema))
				return NULL;
			if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
				json_integer_value(sz) > 1024 * 1024)
			{
				cc->bad = "fixed without a valid size";
				return NULL;
			}
			n = new_node(cc, AT_FIXED, 0);
			if (n == NULL)
				return NULL;
			n->size = (int32_t) json_integer_value(sz);
			n->min_size = n->size;
		}
		else if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0)
		{
			bool		is_map = type[0] == 'm';
			json_t	   *inner = json_object_get(schema, is_map ? "values" : "items");
			PlanNode   *child;

			if (inner == NULL)
			{
				cc->bad = "array or map without an item type";
				return NULL;
			}
			n = new_node(cc, is_map ? AT_MAP : AT_ARRAY, 1);
			if (n == NULL)
				return NULL;
			child = compile(cc, inner, NULL, NULL, 0, depth + 1);
			if (child == NULL)
			{
				free(n->children);
				free(n);
				return NULL;
			}
			n->children[n->nchildren++] = child;
			n->min_size = 1;
		}
		else
		{
			json_t	   *def = lookup_named(cc, type);

			if (def == NULL)
			{
				cc->bad = "unknown type name";
				return NULL;
			}
			return compile(cc, def, leaf, targets, ntargets, depth + 1);
		}
	}
	else
	{
		cc->bad = "schema is neither a name, a union nor an object";
		return NULL;
	}

	if (leaf != NULL)
	{
		if (!leaf_compatible(n, leaf->kind))
		{
			iceberg_set_error(cc->err, ICEBERG_ERR_MALFORMED,
							  "field \"%s\" has an unexpected type in %s",
							  leaf->name, cc->r->what);
			iceberg_set_detail(cc->err, "The file is \"%s\".", cc->r->path);
			cc->bad = "";
			free_plan(n);
			return NULL;
		}
		n->slot = leaf->slot;
		n->kind = leaf->kind;
		n->wanted = true;
	}
	return n;
}

/* ---------------------------------------------------------------------
 * Source buffer
 * ---------------------------------------------------------------------
 */

/*
 * Make at least "need" unconsumed bytes available, unless the object
 * ends first (then fewer are available and r->eof is set).  need must
 * already be within the caller's limit.
 */
static bool
src_fill(AvroReader *r, size_t need, IcebergError *err)
{
	while (r->end - r->pos < need && !r->eof)
	{
		IoError		ioerr;
		int64_t		n;
		size_t		want;

		if (r->pos > 0 && r->alloc - r->end < ICEBERG_READ_CHUNK)
		{
			memmove(r->buf, r->buf + r->pos, r->end - r->pos);
			r->end -= r->pos;
			r->pos = 0;
		}
		if (r->alloc - r->end < ICEBERG_READ_CHUNK || r->alloc < need)
		{
			size_t		na = r->alloc ? r->alloc : ICEBERG_READ_CHUNK;
			uint8_t    *nb;

			while (na < r->end + ICEBERG_READ_CHUNK || na < need)
				na *= 2;
			nb = realloc(r->buf, na);
			if (nb == NULL)
				return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			r->buf = nb;
			r->alloc = na;
		}
		want = r->alloc - r->end;
		if (want > ICEBERG_READ_CHUNK)
			want = ICEBERG_READ_CHUNK;
		io_error_clear(&ioerr);
		n = r->io->io.read(r->io->io.arg, r->handle, r->buf + r->end, want,
						   &ioerr);
		if (n < 0)
			return iceberg_set_io_error(err, &ioerr, r->path);
		if (n == 0)
			r->eof = true;
		if ((size_t) n > want)
			n = (int64_t) want;
		r->end += (size_t) n;
		r->bytes_compressed += n;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Header
 * ---------------------------------------------------------------------
 */

/*
 * Parse the header from the buffered bytes.  Returns 1 parsed, 0 need
 * more bytes, -1 malformed (err set).  *used receives the header size.
 */
static int
parse_header(AvroReader *r, IcebergError *err, size_t *used)
{
	Cur			c;
	int			cap_items = 0;

	c.p = r->buf + r->pos;
	c.end = r->buf + r->end;
	if (c.end - c.p < 4)
		return r->eof ? (avro_error(r, err, ICEBERG_ERR_MALFORMED,
									"file too short for an avro header"), -1) : 0;
	if (memcmp(c.p, "Obj\x01", 4) != 0)
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro magic");
		return -1;
	}
	c.p += 4;
	/* discard what a previous partial attempt kept */
	if (r->meta != NULL)
	{
		int			i;

		for (i = 0; i < r->nmeta; i++)
		{
			free(r->meta[i].key);
			free(r->meta[i].value);
		}
		free(r->meta);
		r->meta = NULL;
		r->nmeta = 0;
	}
	for (;;)
	{
		int64_t		count,
					bsize,
					i;

		if (!rd_long(&c, &count))
			goto need_more;
		if (count < 0)
		{
			if (count == INT64_MIN)
				goto bad;
			count = -count;
			if (!rd_long(&c, &bsize))
				goto need_more;
		}
		if (count == 0)
			break;
		if (count > 100000 || cap_items + count > 100000)
			goto bad;
		for (i = 0; i < count; i++)
		{
			const uint8_t *k,
					   *v;
			int64_t		klen,
						vlen;
			IcebergKeyValue *kv;

			if (!rd_bytes(&c, &k, &klen) || !rd_bytes(&c, &v, &vlen))
				goto need_more;
			if (r->nmeta % 8 == 0)
			{
				IcebergKeyValue *nm = realloc(r->meta, sizeof(IcebergKeyValue) * (size_t) (r->nmeta + 8));

				if (nm == NULL)
					goto oom;
				r->meta = nm;
			}
			kv = &r->meta[r->nmeta];
			kv->key = malloc((size_t) klen + 1);
			kv->value = malloc((size_t) vlen + 1);
			if (kv->key == NULL || kv->value == NULL)
			{
				free(kv->key);
				free(kv->value);
				goto oom;
			}
			memcpy(kv->key, k, (size_t) klen);
			kv->key[klen] = '\0';
			memcpy(kv->value, v, (size_t) vlen);
			kv->value[vlen] = '\0';
			r->nmeta++;
			cap_items++;
		}
	}
	if (c.end - c.p < 16)
		goto need_more;
	memcpy(r->sync, c.p, 16);
	c.p += 16;
	*used = (size_t) (c.p - (r->buf + r->pos));
	return 1;

need_more:
	if (r->eof)
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro header");
		return -1;
	}
	return 0;
bad:
	avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro header");
	return -1;
oom:
	iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return -1;
}

const char *
avro_reader_meta(const AvroReader *r, const char *key)
{
	int			i;

	for (i = 0; i < r->nmeta; i++)
		if (strcmp(r->meta[i].key, key) == 0)
			return r->meta[i].value;
	return NULL;
}

bool
avro_reader_has_field_id(const AvroReader *r, int32_t field_id)
{
	int			i;

	for (i = 0; i < r->ntop_ids; i++)
		if (r->top_ids[i] == field_id)
			return true;
	return false;
}

/* Build the plan from avro.schema. */
static bool
build_plan(AvroReader *r, const AvroTarget *targets, int ntargets,
		   IcebergError *err)
{
	const char *schema_text = avro_reader_meta(r, "avro.schema");
	const char *codec = avro_reader_meta(r, "avro.codec");
	json_t	   *schema;
	json_t	   *fields;
	Compiler	cc;
	int			i;

	if (codec == NULL || codec[0] == '\0' || strcmp(codec, "null") == 0)
		r->codec = CODEC_NULL;
	else if (strcmp(codec, "deflate") == 0)
		r->codec = CODEC_DEFLATE;
	else if (strcmp(codec, "snappy") == 0)
		r->codec = CODEC_SNAPPY;
	else
	{
		iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
						  "unsupported avro codec \"%.40s\" in %s", codec, r->what);
		iceberg_set_detail(err, "The file is \"%s\"; supported codecs are null, deflate and snappy.",
						   r->path);
		return false;
	}
	if (schema_text == NULL)
		return avro_error(r, err, ICEBERG_ERR_MALFORMED,
						  "missing avro.schema in the header");
	schema = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
							   r->limits.max_json_bytes, "avro.schema", err);
	if (schema == NULL)
	{
		if (err != NULL && err->code == ICEBERG_ERR_MALFORMED)
			return avro_error(r, err, ICEBERG_ERR_MALFORMED,
							  "invalid avro.schema JSON");
		return false;
	}
	if (!json_is_object(schema) ||
		json_string_value(json_object_get(schema, "type")) == NULL ||
		strcmp(json_string_value(json_object_get(schema, "type")), "record") != 0)
	{
		json_decref(schema);
		return avro_error(r, err, ICEBERG_ERR_MALFORMED,
						  "avro schema is not a record");
	}
	fields = json_object_get(schema, "fields");
	if (json_is_array(fields) && json_array_size(fields) <= AVRO_MAX_FIELDS)
	{
		r->top_ids = calloc(json_array_size(fields) + 1, sizeof(int32_t));
		if (r->top_ids == NULL)
		{
			json_decref(schema);
			return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		}
		for (i = 0; i < (int) json_array_size(fields); i++)
		{
			json_t	   *id = json_object_get(json_array_get(fields, i), "field-id");

			if (json_is_integer(id))
				r->top_ids[r->ntop_ids++] = (int32_t) json_integer_value(id);
		}
	}
	memset(&cc, 0, sizeof(cc));
	cc.err = err;
	cc.r = r;
	r->root = compile(&cc, schema, NULL, targets, ntargets, 0);
	for (i = 0; i < cc.nnamed; i++)
		free(cc.named[i].name);
	free(cc.named);
	json_decref(schema);
	if (r->root == NULL)
	{
		if (cc.failed_oom)
			return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		if (cc.bad != NULL && cc.bad[0] == '\0')
			return false;		/* err already set */
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro schema");
		iceberg_set_detail(err, "The file is \"%s\": %s.", r->path,
						   cc.bad ? cc.bad : "unknown problem");
		return false;
	}
	return true;
}

/*
 * avro_reader_open: see iceberg_internal.h.
 */
bool
avro_reader_open(const IcebergFileIO *io, const char *path, const char *what,
				 const AvroTarget *targets, int ntargets, AvroReader **out,
				 IcebergError *err)
{
	AvroReader *r;
	IoError		ioerr;
	int64_t		size;
	size_t		need = 4096;

	*out = NULL;
	if (io == NULL || io->io.open == NULL || io->io.read == NULL ||
		io->io.close == NULL || path == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "no file reader given");
	r = calloc(1, sizeof(AvroReader));
	if (r == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	r->io = io;
	r->what = what;
	snprintf(r->path, sizeof(r->path), "%s", path);
	iceberg_effective_limits(io->limits, &r->limits);
	r->string_cap = r->limits.max_string_bytes;
	r->coll_cap = r->limits.max_collection_items;
	io_error_clear(&ioerr);
	r->handle = io->io.open(io->io.arg, path, &size, &ioerr);
	if (r->handle == NULL)
	{
		iceberg_set_io_error(err, &ioerr, path);
		free(r);
		return false;
	}
	for (;;)
	{
		size_t		used;
		int			rc;

		if (!src_fill(r, need, err))
			goto fail;
		rc = parse_header(r, err, &used);
		if (rc < 0)
			goto fail;
		if (rc > 0)
		{
			r->pos += used;
			break;
		}
		if ((int64_t) need >= r->limits.max_header_bytes)
		{
			avro_error(r, err, ICEBERG_ERR_LIMIT, "avro header too large");
			goto fail;
		}
		need *= 4;
		if ((int64_t) need > r->limits.max_header_bytes)
			need = (size_t) r->limits.max_header_bytes;
	}
	if (!build_plan(r, targets, ntargets, err))
		goto fail;
	*out = r;
	return true;

fail:
	avro_reader_close(r);
	return false;
}

/* ---------------------------------------------------------------------
 * Blocks
 * ---------------------------------------------------------------------
 */

/* Decompress snappy "in" into r->inflated; checks the trailing CRC-32. */
static bool
snappy_block(AvroReader *r, const uint8_t *in, size_t inlen, IcebergError *err)
{
	Cur			c;
	int64_t		ulen;
	uint64_t	v = 0;
	int			shift = 0;
	uint8_t    *out;
	size_t		op = 0;
	uint32_t	crc;

	if (inlen < 4)
		return avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
	c.p = in;
	c.end = in + inlen - 4;
	/* plain (not zig-zag) varint length */
	for (;;)
	{
		uint8_t		b;

		if (c.p >= c.end || shift > 28)
			return avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
		b = *c.p++;
		v |= (uint64_t) (b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
		shift += 7;
	}
	ulen = (int64_t) v;
	if (ulen > r->limits.max_block_bytes)
		return avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
	r->inflated.len = 0;
	if (!iceberg_buf_reserve(&r->inflated, (size_t) ulen))
		return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
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
		return avro_error(r, err, ICEBERG_ERR_MALFORMED,
						  "snappy block checksum mismatch");
	r->inflated.len = op;
	return true;
bad:
	return avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid snappy block");
}

/* Raw-inflate "in" into r->inflated, capped by max_block_bytes. */
static bool
deflate_block(AvroReader *r, const uint8_t *in, size_t inlen, IcebergError *err)
{
	int			rc;
	size_t		cap = (size_t) r->limits.max_block_bytes;

	if (!r->zs_ready)
	{
		memset(&r->zs, 0, sizeof(r->zs));
		if (inflateInit2(&r->zs, -15) != Z_OK)
			return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY,
									 "could not initialise zlib");
		r->zs_ready = true;
	}
	else
		inflateReset(&r->zs);
	r->inflated.len = 0;
	r->zs.next_in = (unsigned char *) in;
	r->zs.avail_in = (uInt) inlen;
	for (;;)
	{
		size_t		room;

		if (r->inflated.alloc - r->inflated.len < 65536 + 1)
		{
			size_t		want = r->inflated.alloc ? r->inflated.alloc : inlen * 4 + 65536;

			if (want > cap + 1)
				want = cap + 1;
			if (want <= r->inflated.len + 1)
				return avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
			if (!iceberg_buf_reserve(&r->inflated, want - r->inflated.len))
				return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		}
		room = r->inflated.alloc - r->inflated.len - 1;
		if (r->inflated.len + room > cap)
			room = cap - r->inflated.len;
		if (room == 0)
			return avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
		r->zs.next_out = (unsigned char *) r->inflated.data + r->inflated.len;
		r->zs.avail_out = (uInt) room;
		rc = inflate(&r->zs, Z_NO_FLUSH);
		r->inflated.len += room - r->zs.avail_out;
		if (rc == Z_STREAM_END)
			break;
		if (rc == Z_OK && r->zs.avail_out == 0)
			continue;
		if (rc == Z_OK || rc == Z_BUF_ERROR)
		{
			/* input exhausted without the end marker */
			if (r->zs.avail_in == 0)
				return avro_error(r, err, ICEBERG_ERR_MALFORMED,
								  "truncated deflate block");
			if (r->zs.avail_out == 0)
				continue;
		}
		return avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid deflate block");
	}
	return true;
}

/*
 * Load the next block.  Returns 1 loaded, 0 clean end of file, -1 error.
 */
static int
next_block(AvroReader *r, IcebergError *err)
{
	Cur			c;
	int64_t		count,
				size;
	size_t		hdr;
	const uint8_t *data;

	if (iceberg_check_interrupt(r->io, err))
		return -1;
	if (!src_fill(r, 20, err))
		return -1;
	if (r->end == r->pos && r->eof)
		return 0;
	c.p = r->buf + r->pos;
	c.end = r->buf + r->end;
	if (!rd_long(&c, &count) || !rd_long(&c, &size))
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro block header");
		return -1;
	}
	if (count < 0 || size < 0)
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro block header");
		return -1;
	}
	if (count > r->limits.max_block_items)
	{
		avro_error(r, err, ICEBERG_ERR_LIMIT, "too many objects in an avro block");
		return -1;
	}
	if (size > r->limits.max_block_bytes)
	{
		avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
		return -1;
	}
	hdr = (size_t) (c.p - (r->buf + r->pos));
	if (!src_fill(r, hdr + (size_t) size + 16, err))
		return -1;
	if (r->end - r->pos < hdr + (size_t) size + 16)
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro block");
		return -1;
	}
	data = r->buf + r->pos + hdr;
	if (memcmp(data + size, r->sync, 16) != 0)
	{
		avro_error(r, err, ICEBERG_ERR_MALFORMED, "avro sync marker mismatch");
		return -1;
	}
	r->pos += hdr + (size_t) size + 16;
	switch (r->codec)
	{
		case CODEC_NULL:
			r->cur.p = data;
			r->cur.end = data + size;
			break;
		case CODEC_DEFLATE:
			if (!deflate_block(r, data, (size_t) size, err))
				return -1;
			r->cur.p = (const uint8_t *) r->inflated.data;
			r->cur.end = r->cur.p + r->inflated.len;
			break;
		case CODEC_SNAPPY:
			if (!snappy_block(r, data, (size_t) size, err))
				return -1;
			r->cur.p = (const uint8_t *) r->inflated.data;
			r->cur.end = r->cur.p + r->inflated.len;
			break;
	}
	r->bytes_inflated += r->cur.end - r->cur.p;
	r->left = count;
	r->nblocks++;
	return 1;
}

/*
 * avro_reader_next: see iceberg_internal.h.
 */
int
avro_reader_next(AvroReader *r, AvroValue *values, IcebergError *err)
{
	bool		oom = false;
	int			i;

	while (r->left == 0)
	{
		int			rc;

		if (r->nblocks > 0 && r->cur.p != r->cur.end)
		{
			avro_error(r, err, ICEBERG_ERR_MALFORMED,
					   "avro block has bytes after its last object");
			return -1;
		}
		rc = next_block(r, err);
		if (rc <= 0)
			return rc;
	}
	memset(values, 0, sizeof(AvroValue) * AVRO_MAX_SLOTS);
	for (i = 0; i < AVRO_MAX_SLOTS; i++)
		r->sofs[i] = r->iofs[i] = SIZE_MAX;
	r->scratch.len = 0;
	if (!decode_node(r, r->root, &r->cur, values, &oom))
	{
		if (oom)
			iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		else
			avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid or truncated avro record");
		return -1;
	}
	r->left--;
	/* resolve scratch offsets now that the buffer no longer moves */
	for (i = 0; i < AVRO_MAX_SLOTS; i++)
	{
		AvroValue  *v = &values[i];

		if (!v->present)
			continue;
		if (r->sofs[i] != SIZE_MAX && r->scratch.data != NULL)
			v->s = r->scratch.data + r->sofs[i];
		if (r->iofs[i] != SIZE_MAX && v->nints > 0 && r->scratch.data != NULL)
			v->ints = (const int32_t *) (r->scratch.data + r->iofs[i]);
	}
	return 1;
}

void
avro_reader_byte_counts(const AvroReader *r, int64_t *compressed,
						int64_t *inflated)
{
	if (compressed)
		*compressed = r->bytes_compressed;
	if (inflated)
		*inflated = r->bytes_inflated;
}

/*
 * avro_reader_close: free everything; NULL is fine.
 */
void
avro_reader_close(AvroReader *r)
{
	int			i;

	if (r == NULL)
		return;
	if (r->handle != NULL)
		r->io->io.close(r->io->io.arg, r->handle);
	for (i = 0; i < r->nmeta; i++)
	{
		free(r->meta[i].key);
		free(r->meta[i].value);
	}
	free(r->meta);
	free(r->top_ids);
	free_plan(r->root);
	free(r->buf);
	iceberg_buf_free(&r->inflated);
	iceberg_buf_free(&r->scratch);
	if (r->zs_ready)
		inflateEnd(&r->zs);
	free(r);
}
