/*-------------------------------------------------------------------------
 *
 * iceberg.h
 *	  The Iceberg model layer of tms: table metadata, manifest lists,
 *	  manifests, the reachable-file walk and the table metrics the policy
 *	  DSL reads.
 *
 * This is the one public header of src/iceberg/.  The layer is plain C99:
 * no PostgreSQL headers, no libcurl.  Bytes come in through an IoFileIO
 * (src/io/storage/fileio.h, owned by the io layer) that the caller supplies inside
 * an IcebergFileIO together with the size limits (src/io/ provides S3 and
 * confined local files; this layer provides an unconfined local-file
 * implementation for tests and tools).  The dependency goes one way:
 * iceberg includes io/storage/fileio.h, io never includes this header.  Every
 * function reports failure as a value: it returns false (or -1) and fills
 * the caller's TmsError.  Nothing here aborts, exits or longjmps, and
 * every allocation is freed on every path.
 *
 * Reading model, in short (doc/iceberg-io.md has the long form):
 *	- metadata.json is read whole, with a size cap, gzip detected by its
 *	  magic bytes and inflated with a cap as well;
 *	- manifest lists and manifests are Avro object container files read as
 *	  a stream of blocks: memory is bounded by one (decompressed) block
 *	  plus the decode plan built once from the writer schema;
 *	- fields are matched by Iceberg field id, with a fallback to the field
 *	  name for writers that omit ids.
 *
 * Conventions of this API:
 *	- bool functions return true on success; on false, *err is filled;
 *	- "next" functions return 1 (an item), 0 (end of stream) or -1 (error);
 *	- pointers inside returned items are borrowed: valid until the next
 *	  call on the same reader, or until the owning object is freed;
 *	- int64_t fields use -1 for "absent/unknown" where noted.
 *
 * src/iceberg/iceberg.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_H
#define TMS_ICEBERG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/storage/fileio.h"

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------
 */

/*
 * Errors are TmsError values (io/io_error.h, through fileio.h) with an
 * IcebergErrorCode.  The message is a lowercase one-line primary message
 * in PostgreSQL style ("invalid avro block count in manifest"); the detail
 * is a full sentence naming the offending file and value, or empty.
 * Neither ever contains credentials (this layer never sees any).
 *
 * io_code is the IoFileIO's own error code when reading failed (then code
 * is ICEBERG_ERR_IO, or ICEBERG_ERR_CANCELLED for IO_ERR_INTERRUPTED, or
 * ICEBERG_ERR_OUT_OF_MEMORY), so that callers can tell a timeout, a
 * forbidden path or a missing object apart; IO_OK otherwise.
 */

/* ------------------------------------------------------------------------
 * Limits
 * ------------------------------------------------------------------------
 */

/*
 * Caps that keep a corrupt or hostile file from causing a huge
 * allocation.  Exceeding one is ICEBERG_ERR_LIMIT.  A zero field means
 * "use the default" (shown in brackets).
 */
typedef struct IcebergLimits
{
	int64_t		max_metadata_bytes; /* metadata.json, after inflate [256 MiB] */
	int64_t		max_header_bytes;	/* Avro file header incl. schema [16 MiB] */
	int64_t		max_block_bytes;	/* one Avro block, compressed or not [64
									 * MiB] */
	int64_t		max_block_items;	/* objects in one Avro block [16 Mi] */
	int64_t		max_string_bytes;	/* one string / bytes value [16 MiB] */
	int64_t		max_collection_items;	/* items in one JSON array / Avro
										 * array or map [16 Mi] */
	int64_t		max_json_bytes; /* memory one JSON parse (metadata.json, an
								 * Avro schema) may take, counted by io's
								 * jansson allocators (io_init()) [256 MiB] */
} IcebergLimits;

/* Fills *limits with the defaults above. */
extern void iceberg_limits_default(IcebergLimits *limits);

/* ------------------------------------------------------------------------
 * Input: the file reading interface the caller supplies
 * ------------------------------------------------------------------------
 */

/*
 * Where this layer reads from: the caller's IoFileIO (src/io/storage/fileio.h;
 * paths are passed exactly as they appear in Iceberg metadata, resolving
 * them is the IoFileIO's job) and the limits to apply while reading.
 * This layer asks the IoFileIO for chunks of about 1 MiB and polls its
 * interrupted() between Avro blocks and between files (true ends the
 * operation with ICEBERG_ERR_CANCELLED).  A failed open or read becomes
 * ICEBERG_ERR_IO (CANCELLED, OUT_OF_MEMORY) wrapping the IoFileIO's
 * error (tms_error_wrap: io_code is its code, detail its texts).
 *
 * limits:	 optional; NULL means iceberg_limits_default().
 */
typedef struct IcebergFileIO
{
	IoFileIO	io;
	const IcebergLimits *limits;
} IcebergFileIO;

/*
 * The local-file implementation, for tests, the fuzzer's tools and
 * benchmarks only: it is not confined to any directory and follows
 * symlinks, so the server never uses it (it reads local files through
 * io_storage_fileio of src/io/io.h, which is confined).  It accepts plain paths, "file:/abs",
 * "file:///abs" and "file://host/rest" (the latter read as the relative
 * path "host/rest", which is what some local writers produce).  Before
 * that, the first matching prefix mapping rewrites the path: a path that
 * starts with maps[i].from has that prefix replaced by maps[i].to (tests
 * map "s3a://hyperparam-iceberg/spark/bunnies" to a fixture folder).
 * The IcebergLocalFS must outlive the IcebergFileIO.
 */
#define ICEBERG_LOCAL_MAX_MAPS 8
typedef struct IcebergLocalFS
{
	int			nmaps;
	struct
	{
		const char *from;
		const char *to;
	}			maps[ICEBERG_LOCAL_MAX_MAPS];
} IcebergLocalFS;

/*
 * Fills *io with the local implementation over *fs (fs may be NULL) and
 * NULL limits.
 */
extern void iceberg_local_fileio(IcebergFileIO *io, IcebergLocalFS *fs);

/*
 * An in-memory implementation: every path opens the same buffer.  For the
 * fuzzer and for callers that already hold a file's bytes.  "buf" must
 * outlive the IcebergFileIO.  Limits are set to NULL.
 */
typedef struct IcebergMemoryFile
{
	const void *data;
	size_t		len;
} IcebergMemoryFile;
extern void iceberg_memory_fileio(IcebergFileIO *io, IcebergMemoryFile *buf);

/*
 * Reads a whole object into a malloc'ed buffer (NUL-terminated for
 * convenience; *len_out excludes the NUL), refusing more than max_bytes
 * (ICEBERG_ERR_LIMIT).  The caller frees *data_out with io_free().
 */
extern bool iceberg_read_all(const IcebergFileIO *io, const char *path,
							 int64_t max_bytes, char **data_out,
							 size_t *len_out, TmsError *err);

/* ------------------------------------------------------------------------
 * Table metadata (metadata.json)
 * ------------------------------------------------------------------------
 */

typedef struct IcebergKeyValue
{
	char	   *key;
	char	   *value;
} IcebergKeyValue;

typedef struct IcebergPartitionField
{
	int32_t		source_id;		/* first of source-ids for multi-arg
								 * transforms */
	int32_t		field_id;		/* v1 without ids: 1000 + position */
	char	   *name;
	char	   *transform;		/* "identity", "bucket[16]", "day", "void", … */
} IcebergPartitionField;

typedef struct IcebergPartitionSpec
{
	int32_t		spec_id;
	int			nfields;		/* 0 = unpartitioned */
	IcebergPartitionField *fields;
} IcebergPartitionSpec;

typedef struct IcebergSnapshot
{
	int64_t		snapshot_id;
	int64_t		parent_snapshot_id; /* -1: no parent */
	int64_t		sequence_number;	/* 0 for v1 */
	int64_t		timestamp_ms;
	char	   *manifest_list;	/* NULL when the v1 inline list is used */
	int			nmanifests;		/* v1 inline "manifests" (paths) */
	char	  **manifests;
	int32_t		schema_id;		/* -1: absent */
	char	   *operation;		/* summary "operation", or NULL */
	int			nsummary;
	IcebergKeyValue *summary;	/* every summary entry, operation included */
	int64_t		first_row_id;	/* v3; -1: absent */
	int64_t		added_rows;		/* v3; -1: absent */
} IcebergSnapshot;

typedef enum IcebergRefType
{
	ICEBERG_REF_BRANCH,
	ICEBERG_REF_TAG
} IcebergRefType;

typedef struct IcebergRef
{
	char	   *name;
	IcebergRefType type;
	int64_t		snapshot_id;
	int32_t		min_snapshots_to_keep;	/* -1: absent */
	int64_t		max_snapshot_age_ms;	/* -1: absent */
	int64_t		max_ref_age_ms; /* -1: absent */
} IcebergRef;

typedef struct IcebergSnapshotLogEntry
{
	int64_t		timestamp_ms;
	int64_t		snapshot_id;
} IcebergSnapshotLogEntry;

typedef struct IcebergMetadataLogEntry
{
	int64_t		timestamp_ms;
	char	   *metadata_file;
} IcebergMetadataLogEntry;

/* A "statistics" (Puffin) or "partition-statistics" entry. */
typedef struct IcebergStatisticsFile
{
	int64_t		snapshot_id;
	char	   *path;
	int64_t		file_size_in_bytes;
	int64_t		file_footer_size_in_bytes;	/* -1 for partition statistics */
} IcebergStatisticsFile;

typedef struct IcebergTableMetadata
{
	int			format_version; /* 1, 2 or 3 */
	char	   *table_uuid;		/* NULL only in v1 files without one */
	char	   *location;
	int64_t		last_updated_ms;
	int64_t		last_sequence_number;	/* 0 for v1 */
	int32_t		last_column_id;
	int32_t		current_schema_id;
	int			nschemas;
	int32_t		default_spec_id;
	int32_t		last_partition_id;	/* -1: absent (v1) */
	int64_t		next_row_id;	/* v3; -1: absent */
	int64_t		current_snapshot_id;	/* -1: no current snapshot */

	int			nproperties;
	IcebergKeyValue *properties;
	int			nspecs;
	IcebergPartitionSpec *specs;
	int			nsnapshots;
	IcebergSnapshot *snapshots; /* in file order */
	int			nrefs;
	IcebergRef *refs;			/* includes a synthesized "main" when the file
								 * has a current snapshot but no refs */
	int			nsnapshot_log;
	IcebergSnapshotLogEntry *snapshot_log;
	int			nmetadata_log;
	IcebergMetadataLogEntry *metadata_log;
	int			nstatistics;
	IcebergStatisticsFile *statistics;
	int			npartition_statistics;
	IcebergStatisticsFile *partition_statistics;
	char	   *current_schema_json;	/* the current schema object, compact
										 * JSON text (writers put it in
										 * manifest headers and data files) */
	int32_t		default_sort_order_id;	/* 0: unsorted (and v1 without one) */
	char	   *sort_orders_json;	/* the sort-orders array, compact JSON
									 * text; NULL: absent */
} IcebergTableMetadata;

/* The largest timestamp metadata may hold: 9999-12-31T23:59:59.999Z. */
#define ICEBERG_MAX_TIMESTAMP_MS INT64_C(253402300799999)

/*
 * Parses metadata.json from memory.  gzip input (magic 1f 8b) is inflated
 * with the max_metadata_bytes cap; zstd input is ICEBERG_ERR_UNSUPPORTED.
 * Accepts format versions 1-3 (higher: ICEBERG_ERR_UNSUPPORTED); fields a
 * version requires must be present with the right JSON types, otherwise
 * ICEBERG_ERR_MALFORMED.  Timestamps (last-updated-ms, and timestamp-ms of
 * snapshots, snapshot-log and metadata-log entries) must lie in
 * [0, ICEBERG_MAX_TIMESTAMP_MS], otherwise ICEBERG_ERR_MALFORMED.
 * "limits" may be NULL.  On success the caller owns *out and frees it with
 * iceberg_metadata_free().
 */
extern bool iceberg_metadata_parse(const void *data, size_t len,
								   const IcebergLimits *limits,
								   IcebergTableMetadata **out,
								   TmsError *err);

/*
 * Reads "path" through io (capped) and parses it as above.  The detail of
 * a parse error ends with the file's path.
 */
extern bool iceberg_metadata_read(const IcebergFileIO *io, const char *path,
								  IcebergTableMetadata **out,
								  TmsError *err);

/* Frees metadata; NULL is fine. */
extern void iceberg_metadata_free(IcebergTableMetadata *md);

/*
 * A table's identity without its history (metadata_identity.c): what
 * tms.purge_table() checks before it records a job.  The document's JSON
 * syntax is checked whole, the members below are decoded with the types
 * and requirements of iceberg_metadata_parse(); nothing else is built or
 * validated.  Free with iceberg_table_identity_free().
 */
typedef struct IcebergTableIdentity
{
	int			format_version; /* 1, 2 or 3 */
	char	   *table_uuid;		/* NULL only in v1 files without one */
	char	   *location;
	char	   *gc_enabled;		/* the property gc.enabled (a non-string value
								 * as its JSON text); NULL: absent */
} IcebergTableIdentity;

extern bool iceberg_metadata_identity(const void *data, size_t len,
									  const IcebergLimits *limits,
									  IcebergTableIdentity *out, TmsError *err);

/*
 * The same from the file at "path" through io (capped), reading its head
 * only when that holds the identity (metadata_identity.c): the members
 * after the identity's are then neither read nor checked.  Whatever the
 * head cannot settle is decided by the whole file; errors name the file.
 */
extern bool iceberg_metadata_read_identity(const IcebergFileIO *io, const char *path,
										   IcebergTableIdentity *out,
										   TmsError *err);
extern void iceberg_table_identity_free(IcebergTableIdentity *id);

/* Lookups: NULL when absent.  Linear scans (these lists are short). */
extern const IcebergSnapshot *iceberg_metadata_snapshot(const IcebergTableMetadata *md,
														int64_t snapshot_id);
extern const IcebergSnapshot *iceberg_metadata_current_snapshot(const IcebergTableMetadata *md);
extern const IcebergPartitionSpec *iceberg_metadata_spec(const IcebergTableMetadata *md,
														 int32_t spec_id);
extern const IcebergRef *iceberg_metadata_ref(const IcebergTableMetadata *md,
											  const char *name);
extern const char *iceberg_metadata_property(const IcebergTableMetadata *md,
											 const char *key);

/* ------------------------------------------------------------------------
 * Manifest lists
 * ------------------------------------------------------------------------
 */

#define ICEBERG_MANIFEST_CONTENT_DATA		0
#define ICEBERG_MANIFEST_CONTENT_DELETES	1

/*
 * One manifest_file record.  Counts are -1 when the writer left them null
 * (v1).  For a v1 snapshot with an inline "manifests" array only
 * manifest_path is known: manifest_length is -1, partition_spec_id is -1
 * (the manifest header then supplies it), sequence numbers are 0.
 */
typedef struct IcebergManifestFile
{
	const char *manifest_path;
	int64_t		manifest_length;
	int32_t		partition_spec_id;
	int32_t		content;		/* ICEBERG_MANIFEST_CONTENT_* */
	int64_t		sequence_number;	/* 0 for v1 */
	int64_t		min_sequence_number;	/* 0 for v1 */
	int64_t		added_snapshot_id;	/* -1 when unknown (inline v1) */
	int32_t		added_files_count;
	int32_t		existing_files_count;
	int32_t		deleted_files_count;
	int64_t		added_rows_count;
	int64_t		existing_rows_count;
	int64_t		deleted_rows_count;
	int32_t		npartition_summaries;	/* -1: null */
	int64_t		first_row_id;	/* v3; -1: absent */

	/*
	 * The whole manifest_file record's encoded Avro bytes as they are in the
	 * decoded block (in the list's writer schema, see
	 * iceberg_manifest_list_header()), borrowed like the rest; NULL / 0 for
	 * an inline v1 list.
	 */
	const uint8_t *raw;
	size_t		raw_len;
} IcebergManifestFile;

typedef struct IcebergManifestListReader IcebergManifestListReader;

/*
 * Opens the manifest list of "snap" (or, for a v1 snapshot with inline
 * "manifests", an iterator over those paths).  md gives the format
 * version used for defaults.  Close with iceberg_manifest_list_close().
 */
extern bool iceberg_manifest_list_open(const IcebergFileIO *io,
									   const IcebergTableMetadata *md,
									   const IcebergSnapshot *snap,
									   IcebergManifestListReader **out,
									   TmsError *err);

/* Opens a manifest list file by path, without table metadata. */
extern bool iceberg_manifest_list_open_path(const IcebergFileIO *io,
											const char *path,
											IcebergManifestListReader **out,
											TmsError *err);

/*
 * Next record: 1 and *out set (borrowed until the next call), 0 at the
 * end, -1 on error.
 */
extern int	iceberg_manifest_list_next(IcebergManifestListReader *r,
									   const IcebergManifestFile **out,
									   TmsError *err);

/* Format version from the file header (or inferred from field ids). */
extern int	iceberg_manifest_list_format_version(const IcebergManifestListReader *r);

/*
 * A header metadata value of the manifest list file (e.g. "avro.schema",
 * the writer schema JSON; "format-version"), NUL-terminated, or NULL when
 * absent or for an inline v1 list.  Valid until the reader is closed.
 */
extern const char *iceberg_manifest_list_header(const IcebergManifestListReader *r,
												const char *key);

/* Every header metadata entry; returns the count (0 for an inline list). */
extern int	iceberg_manifest_list_header_all(const IcebergManifestListReader *r,
											 const IcebergKeyValue **kv);

/* Closes; NULL is fine. */
extern void iceberg_manifest_list_close(IcebergManifestListReader *r);

/* ------------------------------------------------------------------------
 * Manifests
 * ------------------------------------------------------------------------
 */

#define ICEBERG_STATUS_EXISTING		0
#define ICEBERG_STATUS_ADDED		1
#define ICEBERG_STATUS_DELETED		2

#define ICEBERG_CONTENT_DATA				0
#define ICEBERG_CONTENT_POSITION_DELETES	1
#define ICEBERG_CONTENT_EQUALITY_DELETES	2

/*
 * One manifest_entry with its data_file, after inheritance: snapshot_id
 * from the manifest list's added_snapshot_id when null; sequence numbers
 * from the manifest list's sequence_number when null and status is ADDED
 * (or when the table is v1: 0).  A null sequence number that cannot be
 * inherited stays -1.
 *
 * partition is a canonical JSON array of the partition values in spec
 * field order (ints/longs as numbers, strings quoted, null, booleans,
 * floats by their exact decimal form, bytes/fixed/decimal as "0x…" hex
 * strings), e.g. [3,19000] or ["a",null].  Two files are in the same
 * partition iff spec_id and partition text are equal; partition_hash
 * hashes both.  Only filled when ICEBERG_READ_PARTITION was requested,
 * else partition is "" and the hash is 0.
 */
typedef struct IcebergManifestEntry
{
	int32_t		status;			/* ICEBERG_STATUS_* */
	int64_t		snapshot_id;
	int64_t		sequence_number;	/* data sequence number */
	int64_t		file_sequence_number;
	int32_t		content;		/* ICEBERG_CONTENT_* */
	const char *file_path;
	const char *file_format;
	int32_t		spec_id;
	const char *partition;
	size_t		partition_len;
	uint64_t	partition_hash;
	int64_t		record_count;
	int64_t		file_size_in_bytes;
	int			nequality_ids;
	const int32_t *equality_ids;
	const char *referenced_data_file;	/* NULL when absent */
	int64_t		first_row_id;	/* -1: absent */
	int64_t		content_offset; /* v3 DVs; -1: absent */
	int64_t		content_size_in_bytes;	/* -1: absent */

	/*
	 * With ICEBERG_READ_RAW: the encoded Avro bytes of the data_file field
	 * (id 2, a record in the manifest's writer schema, see
	 * iceberg_manifest_header("avro.schema")), exactly as they are in the
	 * decoded block; valid until the next call.  NULL / 0 otherwise.
	 */
	const uint8_t *raw_data_file;
	size_t		raw_data_file_len;

	/*
	 * With ICEBERG_READ_RAW: where first_row_id (id 142, an optional long: a
	 * union of null and long) is within raw_data_file, its branch index
	 * included; len 0 when the writer schema has no such field.
	 */
	size_t		raw_first_row_id_off;
	size_t		raw_first_row_id_len;

	/*
	 * With ICEBERG_READ_BOUNDS: the encoded Avro bytes of null_value_counts
	 * (id 110), lower_bounds (125) and upper_bounds (128), each an optional
	 * map from field id to a count or to a bound in Iceberg's single-value
	 * serialization, its union branch included (read them with
	 * iceberg_metric_count and iceberg_metric_bound); NULL / 0 when the
	 * writer schema has no such field.  Valid until the next call.
	 */
	const uint8_t *null_value_counts;
	size_t		null_value_counts_len;
	const uint8_t *lower_bounds;
	size_t		lower_bounds_len;
	const uint8_t *upper_bounds;
	size_t		upper_bounds_len;
} IcebergManifestEntry;

/* Flags for iceberg_manifest_open() */
#define ICEBERG_READ_PARTITION		0x01	/* fill partition / hash */
#define ICEBERG_READ_RAW			0x02	/* fill raw_data_file */
#define ICEBERG_READ_BOUNDS			0x04	/* fill the column metrics' spans */

/*
 * The entry of key field_id in a column metrics span of an entry read with
 * ICEBERG_READ_BOUNDS: a bound (*val, *vlen borrowed from the span) or a
 * count.  1 found, 0 absent (no span, a null map, no such key), -1 the
 * span is not a map of that kind (the caller treats the metric as
 * unknown).  The union's branch is told from what follows it, so either
 * order of "null" and the map in the writer schema reads right.
 */
extern int	iceberg_metric_bound(const uint8_t *span, size_t len, int32_t field_id,
								 const uint8_t **val, size_t *vlen);
extern int	iceberg_metric_count(const uint8_t *span, size_t len, int32_t field_id,
								 int64_t *count);

typedef struct IcebergManifestReader IcebergManifestReader;

/*
 * Opens the manifest "mf" (a record from its manifest list; its path,
 * spec id, sequence number and snapshot id drive inheritance).
 * format_version is the table's.  Memory is bounded by one Avro block.
 */
extern bool iceberg_manifest_open(const IcebergFileIO *io,
								  const IcebergManifestFile *mf,
								  int format_version, unsigned flags,
								  IcebergManifestReader **out,
								  TmsError *err);

/* Next entry: 1 / 0 (end) / -1 (error); *out borrowed until next call. */
extern int	iceberg_manifest_next(IcebergManifestReader *r,
								  const IcebergManifestEntry **out,
								  TmsError *err);

/*
 * A header metadata value of the manifest file: "avro.schema" (the
 * writer schema JSON), "avro.codec", and Iceberg's "schema", "schema-id",
 * "partition-spec", "partition-spec-id", "format-version", "content".
 * NULL when absent; valid until the reader is closed.
 */
extern const char *iceberg_manifest_header(const IcebergManifestReader *r,
										   const char *key);

/* Every header metadata entry; returns the count. */
extern int	iceberg_manifest_header_all(const IcebergManifestReader *r,
										const IcebergKeyValue **kv);

/* Header facts: spec id (-1 if unknown), "data"/"deletes" as 0/1. */
extern int32_t iceberg_manifest_spec_id(const IcebergManifestReader *r);
extern int32_t iceberg_manifest_content(const IcebergManifestReader *r);

/* Bytes read from storage and inflated so far (for benchmarks). */
extern void iceberg_manifest_byte_counts(const IcebergManifestReader *r,
										 int64_t *compressed,
										 int64_t *inflated);

/* Closes; NULL is fine. */
extern void iceberg_manifest_close(IcebergManifestReader *r);

/* ------------------------------------------------------------------------
 * Reachability walk
 * ------------------------------------------------------------------------
 */

typedef enum IcebergFileKind
{
	ICEBERG_FILE_METADATA,		/* metadata.json: current and metadata-log */
	ICEBERG_FILE_MANIFEST_LIST,
	ICEBERG_FILE_MANIFEST,
	ICEBERG_FILE_DATA,
	ICEBERG_FILE_POSITION_DELETES,
	ICEBERG_FILE_EQUALITY_DELETES,
	ICEBERG_FILE_STATISTICS,
	ICEBERG_FILE_PARTITION_STATISTICS
} IcebergFileKind;

/* "data", "manifest-list", … */
extern const char *iceberg_file_kind_name(IcebergFileKind kind);

typedef struct IcebergWalkFile
{
	IcebergFileKind kind;
	const char *path;
	int64_t		size;			/* bytes, -1 when unknown */
	int64_t		snapshot_id;	/* snapshot through which it was reached, -1
								 * for metadata files */
	int32_t		status;			/* manifest entry status for content files, -1
								 * otherwise */
} IcebergWalkFile;

/*
 * Called once per reached file.  Return true to continue; false stops the
 * walk, which then fails with ICEBERG_ERR_CANCELLED unless the callback
 * filled *err with its own error.
 */
typedef bool (*IcebergWalkCallback) (void *arg, const IcebergWalkFile *file,
									 TmsError *err);

#define ICEBERG_WALK_METADATA_FILES		0x01	/* metadata_location +
												 * metadata-log */
#define ICEBERG_WALK_MANIFEST_LISTS		0x02
#define ICEBERG_WALK_MANIFESTS			0x04
#define ICEBERG_WALK_CONTENT_FILES		0x08	/* data + delete files */
#define ICEBERG_WALK_STATISTICS			0x10	/* statistics + partition
												 * statistics */
#define ICEBERG_WALK_INCLUDE_DELETED	0x20	/* also entries with status
												 * DELETED (purge: yes;
												 * expire: no) */
#define ICEBERG_WALK_ALL				0x1f	/* everything live */
#define ICEBERG_WALK_PURGE				0x3f	/* everything the table ever
												 * still references */

/*
 * Streams every file that the given snapshots reference.  snapshot_ids /
 * nsnapshot_ids select the snapshots; nsnapshot_ids < 0 means all
 * snapshots in md.  metadata_location (may be NULL) is the path of the
 * metadata file md was read from, reported as a METADATA file together
 * with the metadata-log entries.  Manifests are deduplicated by path
 * across snapshots (a hash set: the only memory that grows with the
 * table, ~ manifests × path length); content files are reported once per
 * manifest entry, so a data file carried in two distinct manifests is
 * reported twice (callers that delete are idempotent; callers that count
 * must dedup themselves).  Statistics files are reported for the selected
 * snapshots only.
 */
extern bool iceberg_walk(const IcebergFileIO *io,
						 const IcebergTableMetadata *md,
						 const char *metadata_location,
						 const int64_t *snapshot_ids, int nsnapshot_ids,
						 unsigned flags,
						 IcebergWalkCallback callback, void *callback_arg,
						 TmsError *err);

/* ------------------------------------------------------------------------
 * Table metrics (the policy DSL's variables)
 * ------------------------------------------------------------------------
 */

/* What a DSL expression needs; each level includes the ones before it. */
typedef enum IcebergMetricsLevel
{
	ICEBERG_METRICS_METADATA = 0,	/* snapshots, oldestSnapshotAge,
									 * timeSinceLastUpdate */
	ICEBERG_METRICS_MANIFEST_LIST = 1,	/* + manifests */
	ICEBERG_METRICS_MANIFESTS = 2,	/* + file counts, sizes, records,
									 * avgDataFileSize */
	ICEBERG_METRICS_DELETES = 3 /* + dataFilesWith*Deletes */
} IcebergMetricsLevel;

/*
 * Every DSL variable, for the current snapshot.  Fields above the
 * computed level are 0.
 */
typedef struct IcebergTableMetrics
{
	IcebergMetricsLevel level;	/* the level actually computed */

	/* metadata */
	int64_t		snapshots;
	int64_t		oldest_snapshot_age_ms; /* 0 without snapshots */
	int64_t		time_since_last_update_ms;

	/* manifest list */
	int64_t		manifests;		/* data + delete manifests */

	/* manifests (live entries: status EXISTING or ADDED) */
	int64_t		data_files;
	int64_t		data_files_size;
	int64_t		data_records;
	int64_t		equality_delete_files;
	int64_t		equality_delete_files_size;
	int64_t		equality_delete_records;
	int64_t		position_delete_files;
	int64_t		position_delete_files_size;
	int64_t		position_delete_records;
	double		avg_data_file_size; /* 0 for an empty table */

	/*
	 * v3 deletion vectors: position deletes held as Puffin blobs (counted in
	 * position_delete_* too)
	 */
	int64_t		deletion_vectors;
	int64_t		deletion_vector_records;
	/* position_delete_records / data_records, 0 for an empty table */
	double		deleted_record_ratio;

	/* delete matching */
	int64_t		data_files_with_deletes;
	int64_t		data_files_with_position_deletes;
	int64_t		data_files_with_equality_deletes;
} IcebergTableMetrics;

/* One live data file of the current snapshot, for countDataFiles(). */
typedef struct IcebergDataFileInfo
{
	const char *path;
	int64_t		size;
	int64_t		records;
	bool		has_deletes;	/* only meaningful at level DELETES */
	bool		has_position_deletes;
	bool		has_equality_deletes;
} IcebergDataFileInfo;

/* Return true to continue, false to stop (the computation then fails
 * with ICEBERG_ERR_CANCELLED unless *err was filled). */
typedef bool (*IcebergDataFileCallback) (void *arg,
										 const IcebergDataFileInfo *file,
										 TmsError *err);

/*
 * Computes the metrics up to "level" for md's current snapshot, loading
 * nothing beyond that level.  now_ms is the evaluation time (ms since the
 * epoch) for the age variables.  When file_callback is not NULL it is
 * called for every live data file (level is raised to at least
 * MANIFESTS); at level DELETES its has_* flags are exact.
 *
 * Memory: levels up to MANIFESTS stream with one Avro block; DELETES
 * keeps an index of the live delete files (grouped by partition), which
 * grows with the number of delete files, not data files.
 */
extern bool iceberg_table_metrics(const IcebergFileIO *io,
								  const IcebergTableMetadata *md,
								  IcebergMetricsLevel level, int64_t now_ms,
								  IcebergDataFileCallback file_callback,
								  void *file_callback_arg,
								  IcebergTableMetrics *out,
								  TmsError *err);

/*
 * The same file stream, pulled instead of pushed (the DSL's
 * countDataFiles() pulls batches).  Opening reads the manifest list and,
 * with match_deletes, every delete manifest to build the delete index;
 * next() then streams the data manifests: 1 with *out set (borrowed until
 * the next call), 0 at the end, -1 on error.  Memory as for
 * iceberg_table_metrics().  md must outlive the iterator.
 */
typedef struct IcebergDataFileIter IcebergDataFileIter;

extern bool iceberg_data_files_open(const IcebergFileIO *io,
									const IcebergTableMetadata *md,
									bool match_deletes,
									IcebergDataFileIter **out,
									TmsError *err);
extern int	iceberg_data_files_next(IcebergDataFileIter *it,
									const IcebergDataFileInfo **out,
									TmsError *err);

/* The error that ended the stream (code ICEBERG_OK if none). */
extern const TmsError *iceberg_data_files_error(const IcebergDataFileIter *it);
extern void iceberg_data_files_close(IcebergDataFileIter *it);

/* ------------------------------------------------------------------------
 * Adapters to the policy DSL (src/dsl/dsl.h); only the types are shared,
 * so this layer links without the DSL.
 * ------------------------------------------------------------------------
 */
struct DslMetrics;
struct DslProperties;
struct DslFileSource;
struct DslTableFacts;

/*
 * Fills *out with every variable computed at m->level (and sets its
 * "present" bits); variables above that level stay absent, so dsl_eval()
 * reports DSL_MISSING_METRIC instead of reading a 0 that was never
 * measured.
 */
extern void iceberg_metrics_to_dsl(const IcebergTableMetrics *m,
								   struct DslMetrics *out);

/* property(name, default) lookups over md's properties (md outlives it). */
extern void iceberg_dsl_properties(const IcebergTableMetadata *md,
								   struct DslProperties *out);

/*
 * A DslFileSource that pulls batches from "it".  When next() fails it
 * returns -1 and iceberg_data_files_error(it) says why.  The batch buffer
 * belongs to the iterator and is freed by iceberg_data_files_close().
 */
extern bool iceberg_data_files_dsl_source(IcebergDataFileIter *it,
										  struct DslFileSource *out,
										  TmsError *err);

/*
 * The facts of md that the DSL's derived variables read beyond the
 * metrics (dsl_metrics_derive): the target file size (target_file_size if
 * > 0, else the table property write.target-file-size-bytes, else 512 MiB)
 * and the snapshot summaries' removals.  The small-file counts start at 0:
 * pass iceberg_small_files_callback with *out to iceberg_table_metrics().
 */
extern void iceberg_dsl_table_facts(const IcebergTableMetadata *md,
									int64_t target_file_size,
									struct DslTableFacts *out);

/* An IcebergDataFileCallback counting the files under the target size
 * into the DslTableFacts *arg. */
extern bool iceberg_small_files_callback(void *arg,
										 const IcebergDataFileInfo *file,
										 TmsError *err);

/* A random v4 UUID in text form (out: 37 bytes); write_base.c. */
extern bool iceberg_make_uuid(char *out, TmsError *err);

#endif							/* TMS_ICEBERG_H */
