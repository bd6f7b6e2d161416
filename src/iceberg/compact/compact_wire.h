/*-------------------------------------------------------------------------
 *
 * compact_wire.h
 *	  The protocol between a tms worker and the compaction helper
 *	  (tms_compactor, src/compactor/), and the Iceberg values the helper
 *	  reports: both sides encode and decode through this file, so the
 *	  protocol has one implementation.
 *
 * Framing: newline-delimited JSON.  Each message is one JSON object on
 * one line (JSON strings escape their newlines), at most
 * ICEBERG_COMPACT_MAX_LINE bytes; "type" says which message it is.
 *
 *	worker -> helper (the helper's stdin)
 *	  hello		{"type":"hello","protocol":1,"memory_limit":bytes,
 *				 "threads":n,"groups":m,"temp_directory":dir,"storage":{...}}:
 *				 once, first; m: the groups the worker would keep in
 *				 flight at once (max-concurrent-file-group-rewrites; 1
 *				 when absent); the storage the table's files are read
 *				 and written with (endpoint, region, path style, keys,
 *				 local roots, timeouts), as the worker has it
 *	  group		{"type":"group","group":g,"schema":{Iceberg schema},
 *				 "inputs":[{"path","uri","records","size","seq",
 *				 "first_row_id","dv":{"offset","length","referenced"}}],
 *				 "deletes":[{"uri","content":1|2,"seq","equality_ids",
 *				 "dv":{"offset","length","records","referenced"}}],
 *				 "row_lineage":true,
 *				 "output":{"dir","upload_dir","prefix","files":k,
 *				 "compression","compression_level",
 *				 "metrics":[{"id","mode","length"}],
 *				 "sort":{"zorder":bool,"fields":[{"id","transform",
 *				 "desc","nulls_first"}]}},"keep":[{"path","seq"}],
 *				 "name_mapping":"[...]","dv_output":true,
 *				 "remove_older":{"id","kind":"value"|"us"|"ns"|"days",
 *				 "cutoff"},"remove_where":"<where text>",
 *				 "positions_output":true}
 *				 ("sort" only for strategies sort and zorder and the
 *				 rewrite of position deletes: the group's rows in that
 *				 order; "keep" only for the rewrite of position deletes,
 *				 whose inputs are delete files: a row is kept only when
 *				 its file_path is a kept data file whose sequence number
 *				 is not above its delete file's, the others are dangling;
 *				 "dv_output" only for the rewrite of position deletes
 *				 of a v3 table: its inputs are position delete files
 *				 and deletion vectors (an input's "dv": its blob at
 *				 offset, length bytes, of the Puffin file, deleting
 *				 "records" positions of the data file "referenced"),
 *				 its output one Puffin file <dir><prefix>-00000.puffin
 *				 of one deletion vector per data file (files is 1);
 *				 "name_mapping" only when the table has
 *				 schema.name-mapping.default, its text: a data file
 *				 without field ids is read through it;
 *				 "dv" only for a v3 deletion vector: the Puffin blob at
 *				 offset, length bytes, deleting records positions of the
 *				 data file "referenced"; "remove_older" only for a
 *				 retention's rewrite: a row whose column id, in the
 *				 kind's units, is below cutoff is removed too (NULL
 *				 stays); "remove_where" only for a deletion's rewrite:
 *				 the rows its where (row_filter.h, parsed and bound
 *				 again by the helper to "schema") matches are removed
 *				 too; "positions_output" only for a row delta (compact.h:
 *				 retention's delete-files, with remove_older or
 *				 remove_where): the outputs are position delete files
 *				 (file_path, pos, sorted, the metrics those of "output")
 *				 of the rows removed that no delete of the group
 *				 deletes already, and rows_out, rows_deleted and
 *				 rows_filtered of "done" count those positions; with
 *				 "dv_output" too (a v3 table) the output is one Puffin
 *				 file <dir><prefix>-00000.puffin of one deletion vector
 *				 per data file with rows removed, holding those and the
 *				 positions the group's deletes already delete in it,
 *				 rows_deleted and rows_filtered count the new positions,
 *				 rows_out every position written; "row_lineage" and "first_row_id"
 *				 only for a v3 table, every input has one then: the
 *				 outputs keep each row's _row_id and
 *				 _last_updated_sequence_number, the values the file
 *				 stores, else first_row_id + position and the file's
 *				 data sequence number, as the reserved columns of field
 *				 ids 2147483540 and 2147483539):
 *				 rewrite these data files, applying these delete files
 *				 by the sequence number rules, into k Parquet files named
 *				 <dir><prefix>-NNNNN.parquet (the metrics modes: one per
 *				 primitive field, at every depth); "path" and "dir" are spelled
 *				 as the table's metadata spells them (position deletes
 *				 name data files so), "uri" and "upload_dir" are where
 *				 storage reads and writes them (relative paths resolved)
 *				 The worker sends a group line while fewer groups than
 *				 the ready's "groups" are in flight (sent, their done not
 *				 read yet); the helper rewrites them at once.
 *	  (end of input: the helper finishes the groups in flight and exits)
 *
 *	helper -> worker (its stdout)
 *	  ready		{"type":"ready","protocol":1,"duckdb":"v1.5.6","groups":k}:
 *				 k (at most the hello's m; 1 when absent) groups may be in
 *				 flight at once
 *	  progress	{"type":"progress","group":g,"done":bytes}: at least
 *				 once a second while a group runs (the worker's sign of
 *				 life)
 *	  file		{"type":"file","group":g,"path","size","records",
 *				 "metrics":[{"id","column_size","value_count","null_count",
 *				 "nan_count","lower","upper"}],"split_offsets":[...],
 *				 "dvs":[{"referenced","offset","length","records"}]}:
 *				 one written and uploaded file, metrics per primitive
 *				 field at every depth; bounds are hex of Iceberg's
 *				 single-value serialization; "dvs" only for a Puffin
 *				 file of deletion vectors (dv_output): each blob, its
 *				 data file and cardinality
 *	  done		{"type":"done","group":g,"files":k,"rows_in","rows_deleted",
 *				 "rows_out","bytes_in","peak_rss","in_flight",
 *				 "rows_filtered"}: in_flight, the most groups the helper
 *				 was rewriting at once while this one ran, itself
 *				 included (1 when absent); rows_deleted counts every row
 *				 removed, rows_filtered those of them remove_older
 *				 removed; the messages of groups in flight interleave,
 *				 each names its group
 *	  error		{"type":"error","group":g,"message":"...","alone":b}:
 *				 the group failed; with alone true (a failure of that
 *				 group's rewrite: its inputs, its statements, its
 *				 uploads) the helper removed what it had of it and goes
 *				 on with the others, its slot free; else (or absent) the
 *				 helper exits after it and the groups in flight are lost
 *
 * The worker treats what the helper sends as untrusted: a message is
 * parsed under a memory budget and every field is checked for type and
 * range (iceberg_compact_message_parse); the caller checks the meaning
 * (paths, counts).
 *
 * src/iceberg/compact/compact_wire.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_COMPACT_WIRE_H
#define TMS_ICEBERG_COMPACT_WIRE_H

#include "iceberg/compact/compact.h"
#include "iceberg/compact/row_filter.h"
#include "io/io.h"

#define ICEBERG_COMPACT_PROTOCOL	1
#define ICEBERG_COMPACT_MAX_LINE	(64 * 1024 * 1024)
#define ICEBERG_COMPACT_MAX_BOUND	65536	/* bytes of one bound */
#define ICEBERG_COMPACT_MAX_GROUPS	64	/* groups in flight at once, at most */

/* ---- hello ---- */

typedef struct IcebergCompactHello
{
	int64_t		memory_limit;	/* bytes */
	int			threads;
	int			groups;			/* groups the worker would keep in flight */
	char	   *temp_directory;
	/* storage, owned */
	char	   *s3_endpoint;
	char	   *s3_region;
	int			s3_path_style;
	char	   *s3_access_key_id;
	char	   *s3_secret_access_key;
	char	   *s3_session_token;
	char	   *azure_endpoint;
	char	   *azure_account_key;
	char	   *azure_sas_token;
	char	   *azure_tenant_id;
	char	   *azure_client_id;
	char	   *azure_client_secret;
	char	   *azure_token_url;
	IoKeyValue *azure_vended;	/* the vended "adls.sas-token.<account>" */
	int			nazure_vended;
	char	   *gcs_endpoint;
	char	   *gcs_hmac_access_id;
	char	   *gcs_hmac_secret;
	char	   *gcs_oauth2_token;
	char	   *gcs_service_account_key;
	bool		gcs_credentials_vended;
	int64_t		gcs_upload_part_bytes;
	int			nlocal_roots;
	char	  **local_roots;
	long		connect_timeout_ms;
	long		request_timeout_ms;
	int			retries;
	char	   *allowed_hosts;	/* tms.allowed_hosts (io/http/reach.h), NULL:
								 * none */
} IcebergCompactHello;

/*
 * The hello line for storage cfg (its secrets included: for the pipe only)
 * and the hosts the helper may connect to (NULL or "": no limit).
 */
extern char *iceberg_compact_hello_json(const IoStorageConfig *cfg, int64_t memory_limit,
										int threads, int groups, const char *temp_directory,
										const char *allowed_hosts, TmsError *err);
extern bool iceberg_compact_hello_parse(const char *text, size_t len,
										IcebergCompactHello *out, TmsError *err);

/* cfg points into h. */
extern void iceberg_compact_hello_storage(const IcebergCompactHello *h, IoStorageConfig *cfg);
extern void iceberg_compact_hello_free(IcebergCompactHello *h);

/* ---- group ---- */

typedef enum IcebergMetricsMode
{
	ICEBERG_METRICS_NONE,
	ICEBERG_METRICS_COUNTS,
	ICEBERG_METRICS_TRUNCATE,
	ICEBERG_METRICS_FULL
} IcebergMetricsMode;

typedef struct IcebergCompactJobInput
{
	char	   *path;			/* as the metadata spells it */
	char	   *uri;			/* where to read it */
	int64_t		records;
	int64_t		size;
	int64_t		seq;
	int64_t		first_row_id;	/* row lineage: its first_row_id; else -1 */
	/* a rewrite of position deletes into deletion vectors: a DV input */
	int64_t		dv_offset;		/* -1: a Parquet position delete file */
	int64_t		dv_length;
	char	   *dv_referenced;
} IcebergCompactJobInput;

typedef struct IcebergCompactJobDelete
{
	char	   *uri;			/* where to read it */
	int32_t		content;
	int64_t		seq;
	int			nequality_ids;
	int32_t    *equality_ids;
	/* a deletion vector: its blob, the data file it deletes rows of */
	int64_t		dv_offset;		/* -1: a Parquet delete file */
	int64_t		dv_length;
	int64_t		dv_records;		/* its cardinality */
	char	   *dv_referenced;	/* as the metadata spells it */
} IcebergCompactJobDelete;

typedef struct IcebergCompactJobMetric
{
	int32_t		id;
	IcebergMetricsMode mode;
	int			length;			/* truncate */
} IcebergCompactJobMetric;

typedef struct IcebergCompactJob
{
	int			group;
	char	   *schema_json;
	IcebergSchema *schema;		/* parsed (iceberg_compact_job_parse) */
	int			ninputs;
	IcebergCompactJobInput *inputs;
	int			ndeletes;
	IcebergCompactJobDelete *deletes;
	char	   *output_dir;		/* as the metadata spells it */
	char	   *upload_dir;		/* where storage writes it */
	char	   *prefix;
	int			files;
	char	   *compression;
	int			compression_level;	/* -1: the codec's default */
	int			nmetrics;
	IcebergCompactJobMetric *metrics;
	IcebergSortOrder *sort;		/* NULL: rows in file order (bin-pack) */
	bool		row_lineage;	/* v3: every input has first_row_id; the
								 * outputs carry _row_id and
								 * _last_updated_sequence_number */
	/* a rewrite of position deletes: rows kept only when they point at one */
	bool		filter_live;
	bool		dv_output;		/* v3: into one Puffin file of deletion
								 * vectors, one per data file */
	int			nkeep;
	IcebergPosdelKeep *keep;
	/* the table's schema.name-mapping.default (a JSON array), or NULL */
	char	   *name_mapping;
	/* a retention's rewrite: the rows it removes (kind NONE: none) */
	IcebergRowCutoff remove_older;
	/* a deletion's rewrite: the rows its where matches (NULL: none) */
	IcebergRowFilter *remove_where;
	/* a row delta: position delete files of the rows removed are the output */
	bool		positions_output;
} IcebergCompactJob;

/*
 * The metrics modes of the table's primitive fields at every depth
 * (Iceberg's MetricsConfig): write.metadata.metrics.column.<full name>
 * ("a.b", "l.element", "m.key"), else write.metadata.metrics.default;
 * without that default, the first write.metadata.metrics.max-inferred-
 * column-defaults (100) fields, breadth first as Iceberg's limitFieldIds
 * takes them, get truncate(16) and the others none.  n = schema->nleaves.
 */
extern bool iceberg_compact_metrics_modes(const IcebergTableMetadata *md,
										  const IcebergSchema *schema,
										  IcebergCompactJobMetric **out,
										  TmsError *err);

/*
 * The group line of plan group g: output dir (as the metadata spells it)
 * and upload_dir, prefix, compression given; input_uris[i] and
 * delete_uris[i] are where storage reads the group's i-th file and i-th
 * delete file.
 */
extern char *iceberg_compact_job_json(const IcebergTableMetadata *md,
									  const IcebergCompactPlan *p, int g,
									  const IcebergCompactJobMetric *metrics,
									  int nmetrics, const char *const *input_uris,
									  const char *const *delete_uris,
									  const char *output_dir, const char *upload_dir,
									  const char *prefix, const char *compression,
									  int compression_level, TmsError *err);
extern bool iceberg_compact_job_parse(const char *text, size_t len,
									  IcebergCompactJob **out, TmsError *err);
extern void iceberg_compact_job_free(IcebergCompactJob *job);

/* ---- what the helper says ---- */

typedef enum IcebergCompactMsgType
{
	ICEBERG_MSG_READY,
	ICEBERG_MSG_PROGRESS,
	ICEBERG_MSG_FILE,
	ICEBERG_MSG_DONE,
	ICEBERG_MSG_ERROR
} IcebergCompactMsgType;

typedef struct IcebergCompactMessage
{
	IcebergCompactMsgType type;
	int			group;
	/* ready */
	int			protocol;
	char	   *version;
	int			groups;			/* groups in flight at once, at most */
	/* progress */
	int64_t		done;
	/* file */
	IcebergCompactOutput file;
	/* done */
	int			files;
	int64_t		rows_in;
	int64_t		rows_deleted;
	int64_t		rows_out;
	int64_t		bytes_in;
	int64_t		peak_rss;
	int			in_flight;		/* groups the helper ran at once, at most */
	int64_t		rows_filtered;	/* of rows_deleted, removed by remove_older */
	/* error */
	char	   *message;
	bool		alone;			/* only its group failed; the helper goes on */
} IcebergCompactMessage;

/* Parse one line (len bytes, no newline) under a budget of max_json bytes. */
extern bool iceberg_compact_message_parse(const char *line, size_t len, int64_t max_json,
										  IcebergCompactMessage *out, TmsError *err);
extern void iceberg_compact_message_free(IcebergCompactMessage *m);

/* The helper's lines (malloc'd, no newline). */
extern char *iceberg_compact_ready_json(const char *version, int groups);

/* buf: at least ICEBERG_COMPACT_PROGRESS_LEN bytes */
#define ICEBERG_COMPACT_PROGRESS_LEN 96
extern void iceberg_compact_progress_line(char *buf, size_t len, int group, int64_t done);
extern char *iceberg_compact_file_json(int group, const IcebergCompactOutput *file);
extern char *iceberg_compact_done_json(int group, int files, int64_t rows_in,
									   int64_t rows_deleted, int64_t rows_out,
									   int64_t bytes_in, int64_t peak_rss, int in_flight,
									   int64_t rows_filtered);
extern char *iceberg_compact_error_json(int group, const char *message);
extern char *iceberg_compact_group_error_json(int group, const char *message, bool alone);

/* ---- Iceberg values (https://iceberg.apache.org/spec/#binary-single-value-serialization) ---- */

/*
 * The single-value serialization of a value of column c given as text:
 * booleans "true"/"false"; int, long, date (days), time, timestamps
 * (microseconds; timestamp_ns and timestamptz_ns in nanoseconds) as
 * integers; float and double as decimal text ("inf", "-inf" too);
 * decimals as decimal text at any scale up to the column's; strings as
 * they are (len bytes); binary and fixed as hex; uuids in their text
 * form.  For a lower or upper bound in mode truncate(length), strings
 * (in characters), binary and fixed are truncated as Iceberg does
 * (UnicodeUtil, BinaryUtil): a lower bound
 * is the prefix, an upper bound the prefix with its last character (byte)
 * incremented; *out NULL when no such upper bound exists.  *out is
 * malloc'd.  False: not a value of that type, or out of memory (*oom).
 */
extern bool iceberg_value_serialize(const IcebergColumn *c, const char *text, size_t len,
									bool upper, int truncate_length, uint8_t **out,
									size_t *out_len, bool *oom);

#endif							/* TMS_ICEBERG_COMPACT_WIRE_H */
