/*-------------------------------------------------------------------------
 *
 * avro_internal.h
 *	  Internals shared by the files of the Avro object container reader
 *	  (avro_file.c, avro_plan.c, avro_decode.c, avro_snappy.c) and nothing
 *	  else; the rest of src/iceberg uses the iceberg_avro_reader_*()
 *	  functions of iceberg_internal.h.
 *
 * The reader is streaming and schema-resolving, specialised for Iceberg
 * manifest lists and manifests.  Why not avro-c: its generic reader
 * materialises every field of every record as an avro_value_t (the column
 * statistics maps of a data_file are most of a manifest's bytes), and it
 * needs a reader schema for resolution by name, while Iceberg requires
 * matching by field id.  This reader compiles the writer schema from the
 * file header, once, into a decode plan (avro_plan.c): a tree whose nodes
 * either store a value into a numbered slot or are skipped with the
 * cheapest possible walk over the bytes (avro_decode.c).  The file layer
 * (avro_file.c) reads the header and the blocks and dispatches the codecs:
 * null, deflate (raw inflate: libdeflate's one-shot decompressor when
 * tms is built with it, which the Makefile does when it is installed, else
 * zlib's) and snappy (avro_snappy.c, a small decoder: libsnappy is not a
 * dependency).  bench/iceberg_manifest_bench.c
 * measures this reader against avro-c (doc/iceberg-io.md has the figures).
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
 * The primitive decoders are static inline here, so that the hot loops of
 * avro_decode.c inline them as they did when the reader was one file.
 *
 * src/iceberg/avro/avro_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_AVRO_INTERNAL_H
#define TMS_ICEBERG_AVRO_INTERNAL_H

#include "iceberg/iceberg_internal.h"

#include <string.h>

#ifdef TMS_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif
#include <zlib.h>				/* the fallback inflater; snappy's CRC-32 */

#define ICEBERG_AVRO_MAX_DEPTH	32	/* schema nesting */
#define ICEBERG_AVRO_MAX_NAMED	4096	/* named types in one schema */
#define ICEBERG_AVRO_MAX_FIELDS 65536	/* fields of one record / union
										 * branches */

/* Avro schema types. */
typedef enum IcebergAvroType
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
} IcebergAvroType;

/* Block codecs (the header's avro.codec). */
typedef enum IcebergAvroCodec
{
	CODEC_NULL,
	CODEC_DEFLATE,
	CODEC_SNAPPY
} IcebergAvroCodec;

/*
 * A value whose encoding is a fixed sequence of varints, length-prefixed
 * byte strings and fixed-size runs (an int, a string, a record of such:
 * the {key, value} items of a data_file's bounds and counts maps) is
 * skipped by running its "flat" program, at most this many ops, instead
 * of walking the tree.
 */
#define ICEBERG_AVRO_MAX_FLAT	8

/* One node of the decode plan. */
typedef struct IcebergAvroPlanNode
{
	IcebergAvroType type;
	int			slot;			/* >= 0: store the value here */
	int			raw_slot;		/* >= 0: store the span of the value's bytes
								 * here (ICEBERG_AVRO_SLOT_RAW) */
	IcebergAvroSlotKind kind;	/* what to store (when slot >= 0) */
	bool		wanted;			/* this subtree stores something */
	int32_t		size;			/* fixed: byte size; enum: symbol count */
	int64_t		min_size;		/* minimum encoded size in bytes */
	int8_t		nflat;			/* >= 0: the value's flat program has this
								 * many ops (0: the value has no bytes); -1:
								 * not flat */
	int32_t		flat[ICEBERG_AVRO_MAX_FLAT];	/* > 0: skip that many
												 * varints; 0: a byte string;
												 * < 0: skip -op bytes */
	int			nchildren;
	struct IcebergAvroPlanNode **children;	/* record fields, union branches,
											 * or the array item / map value
											 * as [0] */
} IcebergAvroPlanNode;

/* A cursor over decoded block bytes. */
typedef struct IcebergAvroCursor
{
	const uint8_t *p;
	const uint8_t *end;
} IcebergAvroCursor;

struct IcebergAvroReader
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
	IcebergAvroCodec codec;
	int32_t    *top_ids;
	int			ntop_ids;

	/* plan */
	IcebergAvroPlanNode *root;
	int			nslots;			/* 1 + the highest slot a target names */

	/* source buffer: bytes read from io, [pos, end) not yet consumed */
	uint8_t    *buf;
	size_t		chunk;			/* bytes read at once, at most */
	size_t		alloc;
	size_t		pos;
	size_t		end;
	bool		eof;

	/* current block */
	IcebergBuf	inflated;
#ifdef TMS_HAVE_LIBDEFLATE
	struct libdeflate_decompressor *ld;
#else
	z_stream	zs;
	bool		zs_ready;
#endif
	IcebergAvroCursor cur;
	int64_t		left;			/* objects left in the block */
	const uint8_t *last_raw;	/* span of the last record returned */
	size_t		last_raw_len;
	int64_t		nblocks;

	/*
	 * per record scratch and slot string offsets: sofs[i] (iofs[i]) holds one
	 * only when bit i of smask (imask) is set by this record
	 */
	IcebergBuf	scratch;
	size_t		sofs[ICEBERG_AVRO_MAX_SLOTS];
	size_t		iofs[ICEBERG_AVRO_MAX_SLOTS];
	uint64_t	smask;
	uint64_t	imask;
	int64_t		string_cap;
	int64_t		coll_cap;

	int64_t		bytes_compressed;
	int64_t		bytes_inflated;
};

/* ---------------------------------------------------------------------
 * Primitive decoding
 * ---------------------------------------------------------------------
 */

/* Zig-zag varint long; false when truncated or longer than 10 bytes. */
static inline bool
rd_long(IcebergAvroCursor *c, int64_t *out)
{
	uint64_t	v = 0;
	int			shift = 0;

	/* most are one byte: lengths, counts, field ids, small values */
	if (ICEBERG_LIKELY(c->p < c->end) && !(*c->p & 0x80))
	{
		v = *c->p++;
		*out = (int64_t) ((v >> 1) ^ (~(v & 1) + 1));
		return true;
	}
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
skip_varint(IcebergAvroCursor *c)
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
 * Skip n varints: count the bytes that end one (high bit clear), eight at
 * a time while the n-th is not among them, then find the n-th in its word
 * (on little-endian machines; elsewhere byte by byte).  Overlong varints
 * are not diagnosed here; the values are not used.
 */
static inline bool
skip_varints(IcebergAvroCursor *c, int64_t n)
{
	const uint8_t *p = c->p;
	const uint8_t *end = c->end;

	while (n > 0 && end - p >= 8)
	{
		uint64_t	w;
		uint64_t	ends;
		int64_t		nends;

		memcpy(&w, p, 8);
		/* bit 7 of each byte that ends a varint */
		ends = ~w & UINT64_C(0x8080808080808080);
		nends = (int64_t) ((ends >> 7) * UINT64_C(0x0101010101010101) >> 56);
		if (nends < n)
		{
			n -= nends;
			p += 8;
			continue;
		}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* the n-th end is in this word (byte 0 is bit 7): drop those before */
		while (--n > 0)
			ends &= ends - 1;
		c->p = p + (__builtin_ctzll(ends) >> 3) + 1;
		return true;
#else
		break;					/* found bytewise below */
#endif
	}
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
skip_bytes(IcebergAvroCursor *c, int64_t n)
{
	if (n < 0 || n > c->end - c->p)
		return false;
	c->p += n;
	return true;
}

/* Read a length-prefixed byte string; borrowed pointer into the block. */
static inline bool
rd_bytes(IcebergAvroCursor *c, const uint8_t **s, int64_t *len)
{
	if (!rd_long(c, len) || *len < 0 || *len > c->end - c->p)
		return false;
	*s = c->p;
	c->p += *len;
	return true;
}

/*
 * Skip one value of a flat node (n->nflat >= 0) by running its program.
 */
static inline bool
skip_flat(const IcebergAvroPlanNode *n, IcebergAvroCursor *c)
{
	int			i;

	for (i = 0; i < n->nflat; i++)
	{
		int32_t		op = n->flat[i];

		if (op > 0)
		{
			if (!skip_varints(c, op))
				return false;
		}
		else if (op == 0)
		{
			int64_t		len;

			if (!rd_long(c, &len) || !skip_bytes(c, len))
				return false;
		}
		else if (!skip_bytes(c, -(int64_t) op))
			return false;
	}
	return true;
}

/*
 * Read a block count of an array or map: returns false on error; a
 * negative count is followed by the block's byte size, returned in *bsize
 * (else -1).  The count is checked against the bytes left.
 */
static inline bool
rd_count(IcebergAvroCursor *c, int64_t min_item, int64_t coll_cap, int64_t *count,
		 int64_t *bsize)
{
	int64_t		need;

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
	/* a product, not a quotient: a division per collection costs more */
	if (min_item > 0 && (__builtin_mul_overflow(*count, min_item, &need) ||
						 need > c->end - c->p))
		return false;
	return true;
}

/* ---------------------------------------------------------------------
 * Functions shared by the reader's files
 * ---------------------------------------------------------------------
 */

/*
 * avro_file.c: set err to code with "msg in <what>" and a detail naming
 * the file.  Returns false.
 */
extern bool iceberg_avro_error(IcebergAvroReader *r, TmsError *err,
							   IcebergErrorCode code, const char *msg);

/*
 * avro_file.c: load the next block into r->cur (decompressed).  Returns 1
 * loaded, 0 clean end of file, -1 error (err set).
 */
extern int	iceberg_avro_next_block(IcebergAvroReader *r, TmsError *err);

/*
 * avro_plan.c: compile the header's avro.schema into r->root for targets,
 * and note the top-level field ids.  False with err set.
 */
extern bool iceberg_avro_build_plan(IcebergAvroReader *r,
									const IcebergAvroTarget *targets,
									int ntargets, TmsError *err);

/* avro_plan.c: free a plan tree; NULL is allowed. */
extern void iceberg_avro_free_plan(IcebergAvroPlanNode *n);

/*
 * avro_snappy.c: decompress the snappy block "in" into r->inflated,
 * capped by max_block_bytes, checking its trailing CRC-32.  False with
 * err set.
 */
extern bool iceberg_avro_snappy_block(IcebergAvroReader *r, const uint8_t *in,
									  size_t inlen, TmsError *err);

#endif							/* TMS_ICEBERG_AVRO_INTERNAL_H */
