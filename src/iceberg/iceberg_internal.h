/*-------------------------------------------------------------------------
 *
 * iceberg_internal.h
 *	  Declarations shared by the files of src/iceberg/ and nothing else.
 *
 * Not part of the layer's interface: other layers include iceberg.h only.
 *
 * src/iceberg/iceberg_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_INTERNAL_H
#define TMS_ICEBERG_INTERNAL_H

#include "iceberg/iceberg.h"
#include "io/util/io_memory.h"
#include "io/util/strbuf.h"

#if defined(__GNUC__) || defined(__clang__)
#define ICEBERG_LIKELY(x) __builtin_expect(!!(x), 1)
#define ICEBERG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ICEBERG_LIKELY(x) (x)
#define ICEBERG_UNLIKELY(x) (x)
#endif

/* Size of the chunks requested from IcebergFileIO.read. */
#define ICEBERG_READ_CHUNK	(1024 * 1024)

/*
 * The code of a failed IoFileIO call wrapped into this layer's error
 * (tms_error_wrap): ICEBERG_ERR_CANCELLED for IO_ERR_INTERRUPTED,
 * ICEBERG_ERR_OUT_OF_MEMORY for IO_ERR_OUT_OF_MEMORY, else ICEBERG_ERR_IO.
 */
extern IcebergErrorCode iceberg_code_of_io(const TmsError *ioerr);

/* The effective limits of an io (defaults when io or io->limits is NULL). */
extern void iceberg_effective_limits(const IcebergLimits *in,
									 IcebergLimits *out);

struct json_t;

/*
 * json_loadb under a memory budget of max_json_bytes (io's counting
 * allocators, src/io/util/jsonmem.h): the document, or NULL with *err:
 * ICEBERG_ERR_LIMIT naming max_json_bytes when over the budget,
 * ICEBERG_ERR_MALFORMED ("invalid <what>: not valid JSON", the parser's
 * position as detail), ICEBERG_ERR_INVALID_ARGUMENT when io_init() was
 * not called.
 */
extern struct json_t *iceberg_json_load(const char *text, size_t len,
										size_t flags, int64_t max_json_bytes,
										const char *what, TmsError *err);

/* True when io has an interrupted() hook that reports an interrupt. */
extern bool iceberg_check_interrupt(const IcebergFileIO *io,
									TmsError *err);

/* strdup that reports ICEBERG_ERR_OUT_OF_MEMORY. NULL in gives NULL. */
extern char *iceberg_strdup(const char *s, TmsError *err);

/*
 * The JSON text of a metadata.json file's bytes, as every reader of them
 * takes it (metadata.c): at most cap bytes, zstd refused, gzip inflated
 * (refusing more than cap bytes) into *inflated, which the caller frees
 * with io_free() (NULL when the bytes were not compressed).
 */
extern bool iceberg_metadata_text(const void *data, size_t len, int64_t cap,
								  const char **text, size_t *text_len, char **inflated,
								  TmsError *err);

/* 64-bit FNV-1a over bytes, continuing from "h" (start: ICEBERG_HASH_INIT) */
#define ICEBERG_HASH_INIT UINT64_C(14695981039346656037)
extern uint64_t iceberg_hash_bytes(uint64_t h, const void *data, size_t len);

/*
 * A growable byte buffer: the plain-C layers' one (io/util/strbuf.h), with
 * functions that say whether they succeeded.  They return false only on
 * allocation failure (or a size past SIZE_MAX / 2), which sticks (oom).
 */
typedef IoStrBuf IcebergBuf;

/* Room for "extra" more bytes plus a NUL. */
static inline bool
iceberg_buf_reserve(IcebergBuf *b, size_t extra)
{
	return io_sb_reserve(b, extra);
}

/* Append bytes; the buffer stays NUL-terminated. */
static inline bool
iceberg_buf_append(IcebergBuf *b, const void *data, size_t len)
{
	io_sb_append(b, data, len);
	return !b->oom;
}

/* Release the buffer's memory and zero it. */
static inline void
iceberg_buf_free(IcebergBuf *b)
{
	io_sb_free(b);
}

/*
 * Append a string value (JSON-escaped, quoted) or a binary value ("0x" and
 * lowercase hex, quoted) as the manifest reader renders them in partition
 * texts (avro_decode.c).  false when out of memory.
 */
extern bool iceberg_render_json_string(IcebergBuf *b, const uint8_t *s, int64_t len);
extern bool iceberg_render_hex(IcebergBuf *b, const uint8_t *s, int64_t len);

/*
 * The layer's one string hash table: a map from strings to int64 values
 * (manifest paths seen by the walk, referenced data files in the delete
 * index of metrics.c, paths to indexes in compaction).  Open addressing
 * with linear probing, FNV-1a (iceberg_hash_bytes), load at most 1/2,
 * 64 slots at first.  Keys are copied, or borrowed when borrow_keys is
 * set before the first insert (they must then outlive the map).  A map
 * all zero but borrow_keys is empty; iceberg_strmap_free returns it to
 * that state.
 */
typedef struct IcebergStrMap
{
	char	  **keys;			/* NULL: an empty slot */
	uint64_t   *hashes;
	int64_t    *values;
	size_t		nslots;			/* 0 or a power of two */
	size_t		count;
	bool		borrow_keys;
} IcebergStrMap;

/* The value of key, or NULL when key is absent. */
extern int64_t *iceberg_strmap_get(const IcebergStrMap *m, const char *key);

/*
 * The value of key, inserted with the value init when absent (*added
 * tells whether it was, when added is not NULL).  NULL when out of memory.
 */
extern int64_t *iceberg_strmap_put(IcebergStrMap *m, const char *key,
								   int64_t init, bool *added);
extern void iceberg_strmap_free(IcebergStrMap *m);

/* ---- Avro object container reader (avro_*.c, see avro_internal.h) ---- */

/* What a leaf of the decode plan stores. */
typedef enum IcebergAvroSlotKind
{
	ICEBERG_AVRO_SLOT_LONG,		/* int or long */
	ICEBERG_AVRO_SLOT_STRING,	/* string or bytes, NUL-terminated copy */
	ICEBERG_AVRO_SLOT_INT_ARRAY,	/* array<int> */
	ICEBERG_AVRO_SLOT_PARTITION,	/* record, rendered as canonical JSON */
	ICEBERG_AVRO_SLOT_COUNT_ARRAY,	/* array<anything>: item count only */
	ICEBERG_AVRO_SLOT_RAW		/* the value's encoded bytes as they are in
								 * the block (s, slen; s points into the
								 * block, valid until the next call): the
								 * value is skipped, or, for a record target
								 * with children, decoded as usual while its
								 * span is recorded */
} IcebergAvroSlotKind;

/*
 * The reader's view of the fields it wants: matched against the writer
 * schema by field id, else by name or alternate name.
 */
typedef struct IcebergAvroTarget
{
	int32_t		field_id;
	const char *name;
	const char *alt_name;		/* older spelling, or NULL */
	IcebergAvroSlotKind kind;
	int			slot;			/* index into the values, or -1 for a record
								 * with children */
	const struct IcebergAvroTarget *children;	/* for nested records */
	int			nchildren;
} IcebergAvroTarget;

#define ICEBERG_AVRO_MAX_SLOTS 32

typedef struct IcebergAvroValue
{
	bool		present;		/* false: field absent or null */
	int64_t		l;
	const char *s;				/* STRING / PARTITION text, NUL-terminated */
	size_t		slen;
	const int32_t *ints;		/* INT_ARRAY */
	int			nints;
} IcebergAvroValue;

typedef struct IcebergAvroReader IcebergAvroReader;

/*
 * Opens an Avro object container file through io, reads its header and
 * compiles the decode plan for "targets" (a record's fields).  "what" is
 * used in error messages ("manifest list", "manifest").
 */
extern bool iceberg_avro_reader_open(const IcebergFileIO *io,
									 const char *path, const char *what,
									 const IcebergAvroTarget *targets,
									 int ntargets, IcebergAvroReader **out,
									 TmsError *err);

/*
 * Decodes the next record into values[0..ICEBERG_AVRO_MAX_SLOTS): every
 * slot up to the highest one a target names is set (present false when
 * the field is absent or null); slots above it are not touched.  1 / 0 /
 * -1.  Strings point into reader-owned memory valid until the next call.
 */
extern int	iceberg_avro_reader_next(IcebergAvroReader *r,
									 IcebergAvroValue *values,
									 TmsError *err);

/* The header's user metadata value for key (NUL-terminated) or NULL. */
extern const char *iceberg_avro_reader_meta(const IcebergAvroReader *r,
											const char *key);

/* Every header metadata entry (avro.schema, avro.codec included). */
extern int	iceberg_avro_reader_meta_all(const IcebergAvroReader *r,
										 const IcebergKeyValue **kv);

/*
 * The encoded bytes of the record the last iceberg_avro_reader_next()
 * returned, as they are in the (decompressed) block: valid until the
 * next call.  Recording it costs two pointer stores per record.
 */
extern void iceberg_avro_reader_last_raw(const IcebergAvroReader *r,
										 const uint8_t **data, size_t *len);

/* True when the writer schema has a field (at top level) with this id. */
extern bool iceberg_avro_reader_has_field_id(const IcebergAvroReader *r,
											 int32_t field_id);

/* Bytes read from the file, and bytes of decoded block data, so far. */
extern void iceberg_avro_reader_byte_counts(const IcebergAvroReader *r,
											int64_t *compressed,
											int64_t *inflated);

/* Closes the file and frees the reader; NULL is allowed. */
extern void iceberg_avro_reader_close(IcebergAvroReader *r);

/* Where metrics_dsl.c keeps its batch buffer inside an iterator. */
extern void **iceberg_data_files_adapter_slot(IcebergDataFileIter *it);

#endif							/* TMS_ICEBERG_INTERNAL_H */
