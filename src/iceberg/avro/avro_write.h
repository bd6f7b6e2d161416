/*-------------------------------------------------------------------------
 *
 * avro_write.h
 *	  The Avro object container WRITER of src/iceberg (avro_write.c), for
 *	  the files of this layer only (manifest rewrite, tests); not part of
 *	  the layer's interface.
 *
 * A writer builds one whole file in memory: the header (magic "Obj\x01",
 * the metadata map with avro.schema, avro.codec and the caller's keys, a
 * 16-byte random sync marker), then blocks of records (object count, byte
 * size, data, sync).  Codecs: null and deflate (raw zlib deflate, no zlib
 * header, as Avro's Java and Iceberg write it).  Records are encoded by a
 * schema-driven encoder: the writer schema (JSON, parsed with jansson
 * under io's memory budget) is compiled once; a record is given as values
 * by Iceberg field id (field-id of the schema; a schema field without an
 * id is matched by name) and encoded field by field in schema order.  For
 * a union the branch is picked by the value's kind: an absent or null
 * value takes the null branch (an absent value for a field without a null
 * branch is an error, "required field absent"), a long takes long or int
 * (range checked), bytes take bytes or a fixed of the same size, a raw
 * span the first non-null branch (its bytes are that branch's encoding,
 * copied verbatim), a record the record branch, an array the array
 * branch.  Maps cannot be encoded from values (only copied in raw spans).
 *
 * Memory: the file being built (the caller bounds it, e.g. by rolling to
 * a new file at a target size) plus one pending block (about 64 KiB).
 * Nothing aborts; errors are TmsError values.
 *
 * src/iceberg/avro/avro_write.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_AVRO_WRITE_H
#define TMS_ICEBERG_AVRO_WRITE_H

#include "iceberg/iceberg_internal.h"

typedef enum IcebergAvroWKind
{
	AVW_ABSENT = 0,				/* not given: null branch, or an error */
	AVW_NULL,
	AVW_BOOL,					/* l: 0 / 1 */
	AVW_LONG,					/* l */
	AVW_DOUBLE,					/* d: float or double */
	AVW_STRING,					/* p, len */
	AVW_BYTES,					/* p, len: bytes or fixed */
	AVW_RAW,					/* p, len: encoded bytes of the value */
	AVW_RECORD,					/* fields, nfields */
	AVW_ARRAY					/* items, nitems */
} IcebergAvroWKind;

struct IcebergAvroWField;

typedef struct IcebergAvroWValue
{
	IcebergAvroWKind kind;
	int64_t		l;
	double		d;
	const void *p;
	size_t		len;
	const struct IcebergAvroWField *fields;
	int			nfields;
	const struct IcebergAvroWValue *items;
	int			nitems;
} IcebergAvroWValue;

typedef struct IcebergAvroWField
{
	int32_t		field_id;		/* matched against the schema's field-id */
	const char *name;			/* for schema fields without an id; may be
								 * NULL */
	IcebergAvroWValue v;
} IcebergAvroWField;

typedef struct IcebergAvroWriter IcebergAvroWriter;

#define ICEBERG_AVRO_WRITE_NULL		0
#define ICEBERG_AVRO_WRITE_DEFLATE	1

/*
 * Compiles schema_json (a record schema) and writes the header with
 * avro.schema = schema_json, avro.codec, and meta[0..nmeta) (keys
 * starting with "avro." are skipped).  level: the deflate level 0-9, -1
 * for zlib's default (6, as Avro's Java writer).  max_json_bytes bounds
 * the schema parse (0: io's default).
 */
extern bool iceberg_avro_writer_create(const char *schema_json,
									   const IcebergKeyValue *meta, int nmeta,
									   int codec, int level,
									   int64_t max_json_bytes,
									   IcebergAvroWriter **out,
									   TmsError *err);

/* Appends one record given as values by field id. */
extern bool iceberg_avro_writer_add(IcebergAvroWriter *w,
									const IcebergAvroWField *fields,
									int nfields, TmsError *err);

/* Appends one record already encoded in this schema (copied verbatim). */
extern bool iceberg_avro_writer_add_raw(IcebergAvroWriter *w,
										const void *data, size_t len,
										TmsError *err);

/* Bytes so far: the file written plus the pending block (uncompressed). */
extern int64_t iceberg_avro_writer_size(const IcebergAvroWriter *w);

/* Records added so far. */
extern int64_t iceberg_avro_writer_count(const IcebergAvroWriter *w);

/*
 * Flushes the pending block and returns the whole file (owned by the
 * writer, valid until it is freed).  No record may be added after.
 */
extern bool iceberg_avro_writer_finish(IcebergAvroWriter *w,
									   const uint8_t **data, size_t *len,
									   TmsError *err);

/* Frees; NULL is fine. */
extern void iceberg_avro_writer_free(IcebergAvroWriter *w);

/*
 * n random bytes from the system's random source (getrandom, else
 * /dev/urandom).  False with err when none is available.
 */
extern bool iceberg_random_bytes(void *buf, size_t n, TmsError *err);

#endif							/* TMS_ICEBERG_AVRO_WRITE_H */
