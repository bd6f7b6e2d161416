/*-------------------------------------------------------------------------
 *
 * write_internal.h
 *	  What the writers of src/iceberg share (write_base.c): the manifest
 *	  rewrite (rewrite_manifests.c) and the data file rewrite (compact_commit.c) both write
 *	  manifests and a manifest list with partition summaries.  Not part of
 *	  the layer's interface.
 *
 *	- partition values: the canonical partition text of the manifest
 *	  reader (iceberg.h, IcebergManifestEntry.partition) walked value by
 *	  value, typed by the partition record of a manifest's writer schema;
 *	- partition field summaries of a manifest-list record (contains_null,
 *	  contains_nan, lower and upper bounds in Iceberg's single-value
 *	  serialization, https://iceberg.apache.org/spec/#binary-single-value-serialization);
 *	- a manifest written, as its new manifest-list record;
 *	- header metadata, the Avro codec the table asks for, random UUIDs;
 *	- what writing a new snapshot takes: its write target (codec, UUID,
 *	  metadata directory), manifest entry fields, the new manifest list
 *	  begun from the current one and written, the snapshot record.
 *
 * src/iceberg/write/write_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_WRITE_INTERNAL_H
#define TMS_ICEBERG_WRITE_INTERNAL_H

#include "iceberg/avro/avro_write.h"
#include "iceberg/iceberg_internal.h"
#include "iceberg/maint/rewrite_manifests.h"

#include <jansson.h>

/* The type of a partition value, as far as summaries and values go. */
typedef enum IcebergPartType
{
	ICEBERG_PT_UNSUPPORTED,
	ICEBERG_PT_BOOL,
	ICEBERG_PT_INT,
	ICEBERG_PT_LONG,
	ICEBERG_PT_FLOAT,
	ICEBERG_PT_DOUBLE,
	ICEBERG_PT_STRING,
	ICEBERG_PT_BYTES,			/* bytes, fixed, uuid: unsigned bytes */
	ICEBERG_PT_DECIMAL			/* two's complement big-endian */
} IcebergPartType;

#define ICEBERG_DEC_BYTES 32

/* The summary of one partition field over the entries of a manifest. */
typedef struct IcebergPartSum
{
	bool		has_null;
	bool		has_nan;
	bool		has_bound;
	int64_t		llo,
				lhi;
	double		dlo,
				dhi;
	IcebergBuf	blo,
				bhi;
} IcebergPartSum;

/* Strip a ["null", T] union to T; NULL for other unions. */
extern json_t *iceberg_schema_strip_null(json_t *t);

/* The type of the record field with this id (or, without ids, name). */
extern json_t *iceberg_schema_field_type(json_t *rec, int32_t id, const char *name);

/*
 * The partition field types of a manifest writer schema (data_file,
 * field 2, its partition record, field 102).  *ntypes is -1 when some
 * field has a type summaries do not support (they are then written null).
 */
extern bool iceberg_partition_types(const char *schema_text, int64_t max_json,
									IcebergPartType **types, int *ntypes,
									TmsError *err);

/*
 * Next value of a canonical partition text: *tok and *len span its JSON
 * token (a number, true/false/null, a JSON string).  False at the end or
 * on anything unexpected.
 */
extern bool iceberg_partition_next(const char **pp, const char *end,
								   const char **tok, size_t *len);

/* Decode a JSON string token (quotes included) into b. */
extern bool iceberg_json_unescape(const char *t, size_t len, IcebergBuf *b);

/* Decode a "0x<hex>" JSON string token into b. */
extern bool iceberg_json_unhex(const char *t, size_t len, IcebergBuf *b);

/* memcmp order, the shorter first on a tie. */
extern int	iceberg_bytes_cmp(const char *a, size_t al, const char *b, size_t bl);

/*
 * Add one entry's partition text to the summaries fs[0..ntypes).  False
 * on allocation failure; a value that does not parse sets *bad.
 */
extern bool iceberg_part_sum_add(IcebergPartSum *fs, const IcebergPartType *types,
								 int ntypes, const char *text, size_t len,
								 IcebergBuf *tmp, bool *bad);

/* A bound of a summary in Iceberg's single-value serialization. */
extern bool iceberg_part_bound(IcebergPartType t, const IcebergPartSum *f, bool upper,
							   IcebergBuf *out);

/* Free the bounds of n summaries and the array. */
extern void iceberg_part_sums_free(IcebergPartSum *s, int n);

/* A manifest written, described for its manifest-list record. */
typedef struct IcebergNewManifest
{
	char	   *path;
	int64_t		length;
	int32_t		spec_id;
	int32_t		content;		/* 0 data, 1 deletes */
	int64_t		added_files;
	int64_t		existing_files;
	int64_t		deleted_files;
	int64_t		added_rows;
	int64_t		existing_rows;
	int64_t		deleted_rows;
	int64_t		min_seq;
	bool		has_first_row_id;	/* v3 data manifests: first_row_id set */
	int64_t		first_row_id;
	int			nsumm;			/* -1: partitions null */
	bool	   *contains_null;
	bool	   *contains_nan;
	IcebergBuf *lower;
	IcebergBuf *upper;
	bool	   *has_bound;
} IcebergNewManifest;

/*
 * Fill n's partition summaries from sums (ntypes fields; bad or ntypes < 0:
 * partitions null).
 */
extern bool iceberg_new_manifest_summaries(IcebergNewManifest *n,
										   const IcebergPartType *types, int ntypes,
										   const IcebergPartSum *sums, bool bad,
										   TmsError *err);
extern void iceberg_new_manifest_free(IcebergNewManifest *n);

/*
 * Append n as a new record of a manifest list (its writer schema v1 or
 * v2 or v3; fields matched by id): added by snapshot_id at sequence number
 * seq; first_row_id (field 520) written when has_first_row_id.
 */
extern bool iceberg_manifest_list_add_new(IcebergAvroWriter *lw,
										  const IcebergNewManifest *n,
										  int64_t seq, int64_t snapshot_id,
										  TmsError *err);

/*
 * v3 row lineage in manifests written (maint/rewrite_manifests.c): does a
 * manifest's writer schema have data_file.first_row_id (id 142) as a
 * union of null and long (*branch: the index of "long", else -1); and
 * *patch = entry e's raw data_file (ICEBERG_READ_RAW) with its null
 * first_row_id replaced by value.
 */
extern bool iceberg_manifest_first_row_id_branch(const char *schema_text, int64_t max_json,
												 int *branch, TmsError *err);
extern bool iceberg_data_file_with_first_row_id(IcebergBuf *patch,
												const IcebergManifestEntry *e, int branch,
												int64_t value, TmsError *err);

/* Header metadata arrays (IcebergKeyValue, malloc'd strings). */
extern void iceberg_kv_free(IcebergKeyValue *kv, int n);

/* Set key (or, with add, add it: room reserved by the caller). */
extern bool iceberg_kv_set(IcebergKeyValue *kv, int *n, const char *key,
						   const char *value, bool add, TmsError *err);

/*
 * The Avro codec of the files written, from the table properties that
 * Iceberg's writers honour: write.avro.compression-codec "uncompressed"
 * gives null, anything else deflate; write.avro.compression-level 0-9,
 * else zlib's default (-1).
 */
extern void iceberg_avro_codec_from_properties(const IcebergTableMetadata *md,
											   int *codec, int *level);

/*
 * Write an object through the caller's writer; its path is added to
 * (*written, *nwritten) first, since a failed write may leave it.
 */
extern bool iceberg_write_object(const IcebergWriter *w, char ***written, int *nwritten,
								 const char *path, const void *data, size_t len,
								 TmsError *err);

/*
 * What a writer of a new snapshot needs to name and encode its files: the
 * reader limits, the new snapshot id and sequence number (v1: 0), the
 * Avro codec, a random UUID naming the files and the table's metadata
 * directory (<location>/metadata).
 */
typedef struct IcebergWriteTarget
{
	IcebergLimits lim;
	int64_t		snapshot_id;
	int64_t		seq;
	int64_t		first_row_id;	/* v3: the table's next-row-id; else -1 */
	int			codec;			/* ICEBERG_AVRO_WRITE_* */
	int			level;			/* deflate level, -1: default */
	char		uuid[40];
	char		dir[2100];
} IcebergWriteTarget;

/*
 * The refusals common to the writers, named by what ("compaction"): no
 * metadata, format v3 (v3_detail says why; NULL: v3 is written, the
 * writer keeps its row lineage), a format above 3, a current snapshot missing or
 * without a manifest list (inline_hint ends that DETAIL).  *snap: the
 * current snapshot, NULL when the table has none.
 */
extern bool iceberg_write_check_table(const IcebergTableMetadata *md, const char *what,
									  const char *v3_detail, const char *inline_hint,
									  const IcebergSnapshot **snap, TmsError *err);

/* Fill t for writing snapshot new_snapshot_id of md (md->location set). */
extern bool iceberg_write_target_init(IcebergWriteTarget *t, const IcebergFileIO *io,
									  const IcebergTableMetadata *md,
									  int64_t new_snapshot_id, TmsError *err);

/*
 * The fields of a manifest entry: status, snapshot_id, then nseq sequence
 * numbers (0; 1: sequence_number; 2: and file_sequence_number), then
 * data_file.  f has room for 5; returns how many were set.
 */
extern int	iceberg_manifest_entry_fields(IcebergAvroWField *f, int status,
										  int64_t snapshot_id, int nseq, int64_t seq,
										  int64_t file_seq,
										  const IcebergAvroWValue *data_file);

/*
 * Start the manifest list of t's snapshot: *lr reads the list of snap
 * (the current one), *lw writes a list in its schema with its header
 * metadata, snapshot-id, parent-snapshot-id and (v2) sequence-number set.
 * On failure both are NULL.
 */
extern bool iceberg_manifest_list_begin(const IcebergFileIO *io,
										const IcebergTableMetadata *md,
										const IcebergSnapshot *snap,
										int64_t parent_snapshot_id,
										const IcebergWriteTarget *t,
										IcebergManifestListReader **lr,
										IcebergAvroWriter **lw, TmsError *err);

/*
 * Finish the list lw and write it as <dir>/snap-<id>-1-<uuid>.avro
 * (noted in written); its path, malloc'd, into *path_out.
 */
extern bool iceberg_manifest_list_end(const IcebergWriteTarget *t, IcebergAvroWriter *lw,
									  const IcebergWriter *w, char ***written,
									  int *nwritten, char **path_out,
									  TmsError *err);

/*
 * Fill the new snapshot s of t ("replace"), taking *list_path; summary
 * left to the caller.
 */
extern bool iceberg_new_snapshot_replace(IcebergNewSnapshot *s, const IcebergWriteTarget *t,
										 int64_t parent_snapshot_id, int64_t timestamp_ms,
										 int32_t schema_id, char **list_path,
										 TmsError *err);

/*
 * Free what a run writing a snapshot returns: the paths it wrote
 * (iceberg_write_object's written, nwritten) and the snapshot it built.
 */
extern void iceberg_write_result_free(char **written, int nwritten,
									  IcebergNewSnapshot *snapshot);

/* The wall clock in ms since the epoch. */
extern int64_t iceberg_now_ms(void);

#endif							/* TMS_ICEBERG_WRITE_INTERNAL_H */
