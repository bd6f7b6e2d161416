/*-------------------------------------------------------------------------
 *
 * compact.h
 *	  Iceberg data file compaction (RewriteDataFiles with the bin-pack,
 *	  sort and z-order strategies), the plain-C half: the table schema's
 *	  columns, a filter on partitions ("where"), the sort orders, the plan
 *	  (which data files to rewrite, in which groups, with which delete
 *	  files), and the commit of one group's rewrite (its manifests, the
 *	  manifest list and the "replace" snapshot; sorted files carry the
 *	  sort_order_id Iceberg stamps).
 *	  Rewriting the rows themselves is the helper program's work
 *	  (src/compactor/, through compact_wire.h); committing, retrying and
 *	  deleting are the caller's.
 *
 * The plan follows Apache Iceberg's BinPackRewriteFilePlanner and
 * SizeBasedFileRewritePlanner
 * (https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/actions/BinPackRewriteFilePlanner.java):
 *	- the live data files of the current snapshot are grouped by their
 *	  partition in the output spec (output-spec-id, default the table's
 *	  current spec), as Iceberg rewrites files of older specs into it: a
 *	  file of another spec whose partition fixes its output partition
 *	  (the same source column as identity or a finer transform,
 *	  compact_transform.c computes identity, bucket, truncate, year,
 *	  month, day and hour) joins that output partition; a file whose
 *	  partition does not (unpartitioned, another bucket count) may hold
 *	  rows of several output partitions, and since the helper does not
 *	  split rows by partition it is rewritten in its own spec
 *	  (plan->kept_in_spec counts them), or, when the options name
 *	  output-spec-id, the plan fails (ICEBERG_ERR_INVALID_ARGUMENT, naming the
 *	  file) before anything is rewritten;
 *	- a file is a candidate when rewrite-all, or its size is outside
 *	  [min-file-size-bytes, max-file-size-bytes] (75 % and 180 % of
 *	  target-file-size-bytes), or at least delete-file-threshold delete
 *	  files apply to it, or its file-scoped position deletes cover at
 *	  least delete-ratio-threshold of its rows;
 *	- the candidates of a partition are packed in order into groups of at
 *	  most max-file-group-size-bytes (and max_group_files files); a group
 *	  is rewritten when it has more than one file and at least
 *	  min-input-files, or more than one file and more bytes than the
 *	  target, or more bytes than max-file-size-bytes, or a file with too
 *	  many deletes or too high a delete ratio; with rewrite-all every
 *	  file is a candidate and every group is rewritten, whatever
 *	  min-input-files, the sizes and the delete thresholds say (Iceberg's
 *	  SizeBasedFileRewritePlanner skips both filters when rewrite-all is
 *	  set);
 *	- its output file count is Iceberg's expectedOutputFiles(bytes).
 * Deletes apply by the spec's sequence number rules
 * (https://iceberg.apache.org/spec/#scan-planning): a position delete file
 * to the data files of its spec and partition whose data sequence number
 * is not greater than its own (only to referenced_data_file when set); an
 * equality delete file to those whose data sequence number is smaller
 * (every partition of every spec when its spec is unpartitioned).
 *
 * The commit (Iceberg's RewriteFiles with the starting sequence number):
 * the new data files get the plan's base sequence number as their
 * explicit data sequence number, so an equality delete committed after
 * the plan still applies to them, and one applied by the rewrite no
 * longer does; the rewritten files become DELETED entries of their
 * manifests (rewritten with the other entries as EXISTING, data_file
 * bytes copied); a delete file is removed in the commit that rewrites the
 * last data file of the base it applied to.  Before writing, the group is
 * checked against the table it is committed on (iceberg_compact_commit_
 * write): every rewritten file must still be live and no position delete
 * file added since the plan may touch the group's partition (Iceberg's
 * validateNoNewDeletesForDataFiles; new equality deletes are fine, as
 * above); otherwise ICEBERG_ERR_CONFLICT and the group is given up.
 *
 * Format v1 (https://iceberg.apache.org/spec/#version-1-analytic-data-tables):
 * a snapshot that lists its manifests inline ("manifests") is read like
 * a list and replaced by one with a v1 manifest list (allowed in v1);
 * entries carry no sequence numbers, the new snapshot none either.
 *
 * Format v3 (https://iceberg.apache.org/spec/#row-lineage): a deletion
 * vector (a Puffin blob, content_offset and content_size_in_bytes, for
 * referenced_data_file) applies as a position delete file would and is
 * passed to the helper as its blob, which it decodes (table/dv.h); each
 * candidate's first_row_id (written, else inherited) goes with it, and the
 * helper writes every row's _row_id and _last_updated_sequence_number
 * (stored, else first_row_id + position and the data sequence number) as
 * the reserved columns; the commit gives its data manifests new row ids
 * (compact_lineage.c) and writes out the first_row_id of the entries they
 * carry.
 *
 * Refused (ICEBERG_ERR_UNSUPPORTED): a column of a type the helper does
 * not write (iceberg_compact_check_schema: timestamptz_ns, which DuckDB
 * has no type for, and v3's unknown, variant and geo types, at any
 * depth, and a nested field's initial-default other than null), a v3
 * data file without a first_row_id to keep (a table upgraded to v3
 * before a v3 writer assigned row ids), manifests of a v2 table written without sequence
 * numbers (only for a group whose files they hold).
 *
 * A row delta (IcebergCompactPlan.row_delta, retention's "delete-files")
 * reuses the plan, the group line and this commit too: its groups' data
 * files stay, the helper's outputs are position delete files of the rows
 * removed; on v3 one Puffin file a group of deletion vectors, one per data
 * file with rows removed, each merging that file's earlier deletes, whose
 * old deletion vector the commit removes (by file and content_offset).
 *
 * The rewrite of position delete files (posdel.h) reuses the plan's
 * structures, the group line and this commit with rewrite_content
 * ICEBERG_CONTENT_POSITION_DELETES: its groups' files are then position
 * delete files, rewritten into position delete files (on v3, with the
 * deletion vectors, into deletion vectors: posdel.h).
 *
 * Memory: the plan holds one record per candidate data file and per live
 * delete file (with the groups each delete file's data files fall in);
 * non-candidate data files are streamed.  A commit holds one manifest
 * being written.
 *
 * src/iceberg/compact/compact.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_COMPACT_H
#define TMS_ICEBERG_COMPACT_H

#include "iceberg/write/commit_request.h"
#include "iceberg/iceberg.h"
#include "iceberg/maint/rewrite_manifests.h"

/* ------------------------------------------------------------------------
 * The table schema's top-level columns (schema.c)
 * ------------------------------------------------------------------------
 */

typedef enum IcebergTypeId
{
	ICEBERG_TYPE_BOOLEAN,
	ICEBERG_TYPE_INT,
	ICEBERG_TYPE_LONG,
	ICEBERG_TYPE_FLOAT,
	ICEBERG_TYPE_DOUBLE,
	ICEBERG_TYPE_DECIMAL,
	ICEBERG_TYPE_DATE,
	ICEBERG_TYPE_TIME,
	ICEBERG_TYPE_TIMESTAMP,
	ICEBERG_TYPE_TIMESTAMPTZ,
	ICEBERG_TYPE_TIMESTAMP_NS,
	ICEBERG_TYPE_TIMESTAMPTZ_NS,
	ICEBERG_TYPE_STRING,
	ICEBERG_TYPE_UUID,
	ICEBERG_TYPE_FIXED,
	ICEBERG_TYPE_BINARY,
	ICEBERG_TYPE_STRUCT,
	ICEBERG_TYPE_LIST,
	ICEBERG_TYPE_MAP,
	ICEBERG_TYPE_OTHER			/* unknown, variant, geometry, ... */
} IcebergTypeId;

#define ICEBERG_TYPE_IS_NESTED(t) \
	((t) == ICEBERG_TYPE_STRUCT || (t) == ICEBERG_TYPE_LIST || (t) == ICEBERG_TYPE_MAP)

/*
 * A field of the schema, at any depth: a top-level column, a struct's
 * field, a list's element (named "element") or a map's key and value
 * (named "key" and "value"), each with its Iceberg field id.
 */
typedef struct IcebergColumn
{
	int32_t		id;
	char	   *name;
	IcebergTypeId type;
	int			precision;		/* decimal */
	int			scale;			/* decimal */
	int			length;			/* fixed */
	bool		required;
	char	   *type_text;		/* as in the schema ("decimal(10, 2)"), or
								 * "struct"/"list"/"map" */
	int			nchildren;		/* struct: its fields; list: 1 (the element);
								 * map: 2 (key, value) */
	struct IcebergColumn *children;
	char	   *initial_default;	/* the field's "initial-default" as JSON
									 * text (the spec's JSON single-value
									 * serialization), or NULL */
} IcebergColumn;

typedef struct IcebergSchema
{
	int32_t		schema_id;
	int			ncolumns;		/* top-level columns */
	IcebergColumn *columns;
	int			nleaves;		/* primitive fields at every depth */
} IcebergSchema;

/*
 * Parse a schema object's JSON text (IcebergTableMetadata.current_schema_
 * json): nested types are descended into (64 levels at most), every field
 * keeps its id.
 */
extern bool iceberg_schema_parse(const char *json, IcebergSchema **out,
								 TmsError *err);
extern void iceberg_schema_free(IcebergSchema *s);

/*
 * The path to the field id at any depth: path[0] its top-level column,
 * path[n - 1] the field itself; n returned (at most cap), 0 when the schema
 * has no such field (or not within cap levels).
 */
extern int	iceberg_schema_field_path(const IcebergSchema *s, int32_t id,
									  const IcebergColumn **path, int cap);

/* A top-level column by id. */
extern const IcebergColumn *iceberg_schema_column(const IcebergSchema *s, int32_t id);

/* A field at any depth by id (its parent's in *parent, NULL: top level). */
extern const IcebergColumn *iceberg_schema_field(const IcebergSchema *s, int32_t id,
												 const IcebergColumn **parent);

/*
 * The first field (depth first) of a type the local engine cannot rewrite
 * (see compact_refusals.c): ICEBERG_ERR_UNSUPPORTED, the message and the
 * detail naming its full name ("a.b.element") and type, the detail also
 * saying why; true when none.
 */
extern bool iceberg_compact_check_schema(const IcebergSchema *s, TmsError *err);

/* ------------------------------------------------------------------------
 * A filter on partitions ("where", compact_filter.c)
 * ------------------------------------------------------------------------
 */

/*
 * The grammar, SQL-like and case-insensitive in its keywords:
 *	  expr    := term { OR term }
 *	  term    := factor { AND factor }
 *	  factor  := NOT factor | '(' expr ')' | name op literal
 *				 | name [NOT] IN '(' literal { ',' literal } ')'
 *				 | name [NOT] BETWEEN literal AND literal
 *				 | name IS [NOT] NULL
 *	  op      := = | <> | != | < | <= | > | >=
 *	  literal := 'text' ('' inside) | number | TRUE | FALSE
 *	  name    := identifier | "quoted identifier" ("" inside)
 * A name is a partition field of the file's spec, or a table column that
 * an identity partition field of that spec has as its source.  A file is
 * selected when its partition values make the filter true; a name its
 * spec does not partition by, and a comparison with a null value, are
 * unknown (SQL's three-valued logic), and unknown is not true.  Literals
 * are read as the value's type: dates as 'YYYY-MM-DD' (day and identity
 * date), timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff][Z|+HH:MM]',
 * decimals exactly, uuids in their text form.
 */
typedef struct IcebergPartitionFilter IcebergPartitionFilter;

/* Parse (the syntax only): 1 KiB of text at most, 256 terms. */
extern bool iceberg_partition_filter_parse(const char *text,
										   IcebergPartitionFilter **out,
										   TmsError *err);

/*
 * Check every name and literal against the table (its current schema and
 * partition specs): ICEBERG_ERR_INVALID_ARGUMENT naming the first bad one.
 */
extern bool iceberg_partition_filter_bind(IcebergPartitionFilter *f,
										  const IcebergTableMetadata *md,
										  TmsError *err);

/* Does a partition (spec id, canonical text) satisfy the bound filter? */
extern bool iceberg_partition_filter_match(const IcebergPartitionFilter *f,
										   int32_t spec_id, const char *partition,
										   size_t len);
extern void iceberg_partition_filter_free(IcebergPartitionFilter *f);

/* ------------------------------------------------------------------------
 * Sort orders of the sort and z-order strategies (compact_sort.c)
 * ------------------------------------------------------------------------
 */

/*
 * One field of a sort order: a top-level column, the transform applied to
 * it (Iceberg's text: "identity", "year", "month", "day", "hour",
 * "truncate[W]", "void"), its direction and null order.
 */
typedef struct IcebergSortField
{
	int32_t		source_id;
	char	   *transform;
	bool		descending;
	bool		nulls_first;
} IcebergSortField;

/*
 * How a group's rows are ordered: by fields (strategy sort), or by the
 * z-value of the fields' columns (zorder(...): Iceberg's Spark z-order;
 * directions and null orders unused).  order_id is the id written as the
 * output files' sort_order_id: the first of the table's sort orders with
 * the same fields (Iceberg's SortOrderUtil.findTableSortOrder), else 0.
 */
typedef struct IcebergSortOrder
{
	int32_t		order_id;
	bool		zorder;
	int			nfields;
	IcebergSortField *fields;
} IcebergSortOrder;

/*
 * Parse the sort-order option in Spark's rewrite_data_files syntax:
 * "col [ASC|DESC] [NULLS FIRST|NULLS LAST], ..." (ASC NULLS FIRST and
 * DESC NULLS LAST by default) or "zorder(col, ...)"; a name is an
 * identifier or `quoted` (`` inside), matched against the schema's
 * top-level columns exactly, else case-insensitively when one matches.
 * schema NULL: the syntax only.  ICEBERG_ERR_INVALID_ARGUMENT with the
 * bad text in the detail; ICEBERG_ERR_UNSUPPORTED for a column whose type
 * the strategy cannot order.  order_id is left 0 (see
 * iceberg_sort_order_match).
 */
extern bool iceberg_sort_order_parse(const char *text, const IcebergSchema *schema,
									 IcebergSortOrder **out, TmsError *err);

/*
 * The table's default sort order (default-sort-order-id of sort-orders),
 * checked against schema; ICEBERG_ERR_INVALID_ARGUMENT when the table is
 * unsorted, ICEBERG_ERR_UNSUPPORTED for a transform the helper cannot
 * apply (bucket) or a field of an unknown column.
 */
extern bool iceberg_sort_order_of_table(const IcebergTableMetadata *md,
										const IcebergSchema *schema,
										IcebergSortOrder **out, TmsError *err);

/* Set o->order_id as Iceberg would stamp the files it writes (above). */
extern void iceberg_sort_order_match(const IcebergTableMetadata *md, IcebergSortOrder *o);

/* A copy (NULL when out of memory), and the free; NULL is fine. */
extern IcebergSortOrder *iceberg_sort_order_copy(const IcebergSortOrder *o);
extern void iceberg_sort_order_free(IcebergSortOrder *o);

/* ------------------------------------------------------------------------
 * The plan
 * ------------------------------------------------------------------------
 */

typedef struct IcebergCompactOptions
{
	int64_t		target_file_size_bytes; /* <= 0: write.target-file-size-bytes,
										 * else 512 MiB */
	int64_t		min_file_size_bytes;	/* < 0: 75 % of the target */
	int64_t		max_file_size_bytes;	/* < 0: 180 % of the target */
	int32_t		min_input_files;	/* <= 0: 5 */
	int64_t		max_file_group_size_bytes;	/* <= 0: 100 GiB */
	int32_t		max_group_files;	/* <= 0: 100,000 */
	bool		rewrite_all;
	int32_t		delete_file_threshold;	/* < 0: none */
	double		delete_ratio_threshold; /* <= 0: 0.3 */
	bool		remove_dangling_deletes;
	int32_t		output_spec_id; /* < 0: the table's current spec */
	const IcebergPartitionFilter *where;	/* bound; NULL: every partition */

	/*
	 * Instead of the size and delete rules (retention.h): a live data file
	 * the where filter lets through is a candidate when select returns 1 (0:
	 * not; -1: an error, set in *err, ends the plan).  The manifests are then
	 * read with the files' column metrics (ICEBERG_READ_BOUNDS) and the
	 * schema is not checked for the helper (the caller checks it when it
	 * rewrites rows).  Set rewrite_all too to keep every group.
	 */
	int			(*select) (void *arg, const IcebergManifestEntry *e, TmsError *err);
	void	   *select_arg;

	/*
	 * the caller writes no data file (a row delta): a v3 file without a
	 * first_row_id (a table upgraded to v3, no v3 commit since) is planned,
	 * not refused, and the helper is not asked for row lineage
	 */
	bool		no_row_ids;
} IcebergCompactOptions;

/* Why a group is rewritten (bits of IcebergCompactGroup.reasons). */
#define ICEBERG_COMPACT_ENOUGH_INPUTS	0x01
#define ICEBERG_COMPACT_ENOUGH_CONTENT	0x02
#define ICEBERG_COMPACT_TOO_MUCH_CONTENT 0x04
#define ICEBERG_COMPACT_DELETES			0x08
#define ICEBERG_COMPACT_DELETE_RATIO	0x10
#define ICEBERG_COMPACT_REWRITE_ALL		0x20

/* The largest deletion vector blob read (content_size_in_bytes). */
#define ICEBERG_DV_MAX_BYTES	(256 * 1024 * 1024)

/* A live delete file of the base snapshot. */
typedef struct IcebergCompactDelete
{
	char	   *path;
	int32_t		content;		/* ICEBERG_CONTENT_POSITION_DELETES or
								 * _EQUALITY_DELETES */
	int64_t		seq;			/* data sequence number */
	int64_t		size;
	int64_t		records;
	int32_t		spec_id;
	char	   *partition;
	bool global;				/* equality deletes of an unpartitioned spec */
	int			nequality_ids;
	int32_t    *equality_ids;
	char	   *referenced;		/* referenced_data_file, or NULL */
	int64_t		dv_offset;		/* a v3 deletion vector: its blob's
								 * content_offset; -1: a delete file */
	int64_t		dv_length;		/* its content_size_in_bytes */
	int			manifest;		/* index into plan->manifests */
	int64_t		applies;		/* live data files of the base it applies to */
	int64_t		covered;		/* of them, rewritten by committed groups */
	int			ngroups;		/* groups that rewrite some of them */
	int		   *groups;
	int64_t    *group_files;	/* how many each */
} IcebergCompactDelete;

/* A data file to rewrite. */
typedef struct IcebergCompactFile
{
	char	   *path;
	int64_t		size;
	int64_t		records;
	int64_t		seq;			/* data sequence number */
	int64_t		first_row_id;	/* v3: its first_row_id, written or inherited;
								 * else -1 */
	int			manifest;		/* index into plan->manifests */
	int			ndeletes;		/* delete files applying to it */
	int		   *deletes;		/* indexes into plan->deletes */
	int32_t		spec_id;		/* its own spec and partition (its group's are
								 * the output spec's) */
	char	   *partition;
	/* a rewrite of position deletes on v3: a deletion vector (dv_length > 0) */
	int64_t		dv_offset;		/* its blob's content_offset */
	int64_t		dv_length;		/* its content_size_in_bytes; 0: not a DV */
	char	   *referenced;		/* its referenced_data_file */
	char	   *dv_key;			/* its key among the group files (path and
								 * offset, compact_int.h) */
} IcebergCompactFile;

/* A live data file that a group's position deletes may point at. */
typedef struct IcebergPosdelKeep
{
	char	   *path;
	int64_t		seq;			/* its data sequence number */
} IcebergPosdelKeep;

typedef struct IcebergCompactGroup
{
	int32_t		spec_id;
	char	   *partition;		/* canonical text */
	int			first;			/* its files: plan->files[first ..] */
	int			nfiles;
	int64_t		bytes;
	int64_t		records;
	int			expected_outputs;
	unsigned	reasons;		/* ICEBERG_COMPACT_* */
	int			ndeletes;		/* distinct delete files applying to its files */
	int		   *deletes;
	/* a rewrite of position deletes (posdel.h): the data files they keep */
	int			nkeep;
	IcebergPosdelKeep *keep;
	int			ndangling;		/* of its files, those proven dangling */
} IcebergCompactGroup;

/*
 * A rewrite that removes rows (retention.h's mode "rewrite"): a row goes
 * when its value of the top-level column field_id, in the column's units
 * (an integer as it is, a timestamp's microseconds or nanoseconds since
 * 1970, a date's days since 1970), is below cutoff; a NULL stays.  The
 * commit of such a plan is an "overwrite" snapshot (rows removed), not a
 * "replace".
 */
typedef enum IcebergCutoffKind
{
	ICEBERG_CUTOFF_NONE,		/* no row removed: a compaction */
	ICEBERG_CUTOFF_VALUE,		/* long, int */
	ICEBERG_CUTOFF_US,			/* timestamp, timestamptz */
	ICEBERG_CUTOFF_NS,			/* timestamp_ns */
	ICEBERG_CUTOFF_DAYS			/* date */
} IcebergCutoffKind;

typedef struct IcebergRowCutoff
{
	IcebergCutoffKind kind;
	int32_t		field_id;
	int64_t		cutoff;
} IcebergRowCutoff;

typedef struct IcebergCompactPlan
{
	int64_t		base_snapshot_id;	/* -1: an empty table, nothing to do */
	int64_t		base_sequence_number;
	int			format_version;
	/* the options resolved */
	int64_t		target_file_size_bytes;
	int64_t		min_file_size_bytes;
	int64_t		max_file_size_bytes;
	int32_t		min_input_files;
	int64_t		max_file_group_size_bytes;
	bool		rewrite_all;
	int32_t		delete_file_threshold;
	double		delete_ratio_threshold;
	bool		remove_dangling_deletes;
	int32_t		output_spec_id;
	/* the groups, in (spec id, partition) order */
	int			ngroups;
	IcebergCompactGroup *groups;
	int			nfiles;
	IcebergCompactFile *files;
	int			ndeletes;
	IcebergCompactDelete *deletes;
	/* manifests holding the plan's files, as the table has them now */
	int			nmanifests;
	char	  **manifests;
	/* what was looked at */
	int64_t		data_files;		/* live data files of the base */
	int64_t		data_bytes;
	int64_t		filtered_out;	/* not selected by the filter */
	int64_t		candidates;		/* candidate files, before the groups */
	int64_t		dangling;		/* live delete files applying to no live data
								 * file */
	int64_t		kept_in_spec;	/* candidates of another spec than the output
								 * spec whose partition does not fix theirs:
								 * rewritten in their own spec */
	/* strategy sort or zorder: set by the caller after planning, owned */
	IcebergSortOrder *sort;		/* NULL: bin-pack, rows in file order */

	/*
	 * what the groups' files are: ICEBERG_CONTENT_DATA (compaction), or
	 * ICEBERG_CONTENT_POSITION_DELETES (posdel.h's rewrite of delete files)
	 */
	int32_t		rewrite_content;

	/* set by the caller after planning: rows the rewrite removes */
	IcebergRowCutoff remove_older;
	char	   *remove_where;	/* or the rows a where matches (row_filter.h;
								 * owned), NULL: none */

	/*
	 * set by the caller after planning (retention's mode "delete-files",
	 * retention.h): the rows removed are not rewritten away but deleted by
	 * merge-on-read, Iceberg's RowDelta: the helper writes the positions of
	 * the groups' rows it removes as position delete files, the commit adds
	 * them (the new snapshot's sequence number) and keeps the group files,
	 * which must still be live (else ICEBERG_ERR_CONFLICT); it removes no
	 * delete file, except on v3, where the helper writes deletion vectors
	 * (one per data file, merging its earlier deletes) and the commit removes
	 * the ones they replace
	 */
	bool		row_delta;
} IcebergCompactPlan;

/* Does the plan's rewrite remove rows (a retention's or a deletion's)? */
#define iceberg_compact_removes_rows(p) \
	((p)->remove_older.kind != ICEBERG_CUTOFF_NONE || (p)->remove_where != NULL)

/*
 * Plan on md's current snapshot.  A table without a current snapshot
 * gets an empty plan (base_snapshot_id -1).  Invalid options (a target
 * not between min and max, negative counts) are
 * ICEBERG_ERR_INVALID_ARGUMENT.
 */
extern bool iceberg_compact_plan(const IcebergFileIO *io,
								 const IcebergTableMetadata *md,
								 const IcebergCompactOptions *opt,
								 IcebergCompactPlan **out, TmsError *err);

/*
 * Can the helper apply every equality delete file that applies to a file of
 * p's groups?  It matches rows on top-level primitive columns of the
 * current schema; a delete file naming a field nested in a struct, or a
 * field the schema no longer has, is ICEBERG_ERR_UNSUPPORTED with the
 * file, the field and a hint (an engine's rewrite_data_files); true when
 * none.  iceberg_compact_plan checks it for compaction; a caller that
 * selects its own files and rewrites rows checks it on its plan.
 */
extern bool iceberg_compact_check_deletes(const IcebergCompactPlan *p, const IcebergSchema *s,
										  TmsError *err);
extern void iceberg_compact_plan_free(IcebergCompactPlan *p);

/*
 * Check the options against md without planning (the sizes resolved with
 * the table's write.target-file-size-bytes, the output spec one of its
 * specs): ICEBERG_ERR_INVALID_ARGUMENT naming the bad value.
 */
extern bool iceberg_compact_check_options(const IcebergTableMetadata *md,
										  const IcebergCompactOptions *opt,
										  TmsError *err);

/*
 * The delete files the commit of groups[0 .. ngroups) removes: those whose
 * data files of the base are all rewritten once these groups are (with
 * the groups committed before), and, with remove-dangling-deletes, those
 * that apply to no live data file of the base (Iceberg's dangling
 * deletes).  Fills (*out, *n) with indexes into plan->deletes (malloc'd).
 */
extern bool iceberg_compact_removable(const IcebergCompactPlan *p, const int *groups,
									  int ngroups, int **out, int *n,
									  TmsError *err);

/*
 * Where group g's data files go: the table's data location
 * (write.data.path, else write.folder-storage.path, else
 * <location>/data) and, for a partitioned spec, the partition path as
 * Iceberg names it (field=value/...), with a trailing '/'.  malloc'd.
 */
extern char *iceberg_compact_output_dir(const IcebergTableMetadata *md,
										const IcebergSchema *schema,
										const IcebergCompactPlan *p, int g,
										TmsError *err);

/* ------------------------------------------------------------------------
 * The commit of one group
 * ------------------------------------------------------------------------
 */

/* The metrics of one column of a data file written. */
typedef struct IcebergColumnMetrics
{
	int32_t		id;
	int64_t		column_size;	/* -1: absent */
	int64_t		value_count;	/* -1: absent */
	int64_t		null_count;		/* -1: absent */
	int64_t		nan_count;		/* -1: absent */
	bool		has_lower;
	bool		has_upper;
	size_t		lower_len;
	size_t		upper_len;
	uint8_t    *lower;			/* single-value serialization */
	uint8_t    *upper;
} IcebergColumnMetrics;

/* A deletion vector of a Puffin file the helper wrote (compact_dv.c). */
typedef struct IcebergCompactDv
{
	char	   *referenced;		/* the data file, as the metadata spells it */
	int64_t		offset;			/* content_offset */
	int64_t		length;			/* content_size_in_bytes */
	int64_t		records;		/* its cardinality */
} IcebergCompactDv;

/* A data file the helper wrote for a group. */
typedef struct IcebergCompactOutput
{
	char	   *path;
	int64_t		size;
	int64_t		records;
	int			nmetrics;
	IcebergColumnMetrics *metrics;
	int			nsplit_offsets;
	int64_t    *split_offsets;
	/* a Puffin file of deletion vectors (no metrics): one entry each */
	int			ndvs;
	IcebergCompactDv *dvs;
} IcebergCompactOutput;

extern void iceberg_compact_output_free(IcebergCompactOutput *o);

typedef struct IcebergCompactCommit
{
	int			nwritten;
	char	  **written;		/* manifests and the list, also on failure */
	IcebergNewSnapshot snapshot;
	int			nreplaced;		/* manifests rewritten: old and new paths */
	char	  **replaced_old;
	char	  **replaced_new;
	int64_t		data_files_rewritten;
	int64_t		bytes_rewritten;
	int64_t		records_rewritten;
	int64_t		data_files_added;
	int64_t		bytes_added;
	int64_t		records_added;
	int64_t		delete_files_removed;
	int			nremoved;		/* the delete files removed (plan indexes) */
	int		   *removed;
	/* a rewrite of position deletes: the group files removed, the new ones */
	int64_t		delete_bytes_removed;
	int64_t		delete_files_added;
	int64_t		delete_records_added;
} IcebergCompactCommit;

/* One group of a commit and the files the helper wrote for it. */
typedef struct IcebergCompactGroupOutput
{
	int			group;			/* index into plan->groups */
	const IcebergCompactOutput *outputs;
	int			noutputs;		/* 0: the group's deletes took every row */
} IcebergCompactGroupOutput;

/*
 * Check groups[0 .. ngroups) against md (the table they are to be
 * committed on: the base, or the table after a conflict or after the
 * commits before), then write the manifests and the manifest list of one
 * "replace" snapshot new_snapshot_id that rewrites each group's files into
 * its outputs and removes the delete files iceberg_compact_removable()
 * names (those no longer live are left out).  Several groups in one
 * commit are Iceberg's partial progress (a commit every so many groups)
 * or its all-at-once commit.  ICEBERG_ERR_CONFLICT: a group cannot go on
 * md (a file gone, a position delete added since the plan); nothing was
 * written.  res is always initialised; free it with
 * iceberg_compact_commit_free().
 */
extern bool iceberg_compact_commit_write(const IcebergFileIO *io,
										 const IcebergWriter *w,
										 const IcebergTableMetadata *md,
										 IcebergCompactPlan *p,
										 const IcebergCompactGroupOutput *groups,
										 int ngroups, int64_t new_snapshot_id,
										 IcebergCompactCommit *res,
										 TmsError *err);

/*
 * After the commit of groups[0 .. ngroups) landed: their delete coverage
 * counts, and the plan follows the manifests the commit replaced (so that
 * later groups find their files).
 */
extern bool iceberg_compact_committed(IcebergCompactPlan *p, const int *groups,
									  int ngroups, const IcebergCompactCommit *res,
									  TmsError *err);
extern void iceberg_compact_commit_free(IcebergCompactCommit *res);

#endif							/* TMS_ICEBERG_COMPACT_H */
