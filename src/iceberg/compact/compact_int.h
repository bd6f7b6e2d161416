/*-------------------------------------------------------------------------
 *
 * compact_int.h
 *	  What compact_plan.c shares with compact_commit.c: a map from strings
 *	  to indexes, the manifest-list records kept for a second look and the
 *	  checks of the table; and compact_sort.c with compact_wire.c: a sort
 *	  order's JSON in the group line; and compact_plan.c with posdel_plan.c:
 *	  the plan's rules and the one packer of both plans (not part of the
 *	  API; compact.h is).
 *
 * Rules of this file: plain C, errors as TmsError values; include it
 * only from the .c files of src/iceberg/compact.
 *
 * src/iceberg/compact/compact_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_COMPACT_INT_H
#define TMS_ICEBERG_COMPACT_INT_H

#include "iceberg/compact/compact.h"
#include "iceberg/write/write_internal.h"

#define MIB						(INT64_C(1024) * 1024)

/*
 * A map from strings to indexes: the layer's string map (iceberg_strmap,
 * iceberg_internal.h), its keys borrowed (they must outlive the map).
 */
typedef IcebergStrMap StrMap;

/* A manifest-list record kept for a second look: its fields and raw bytes. */
typedef struct ListRec
{
	IcebergManifestFile mf;		/* manifest_path points to path */
	char	   *path;
	uint8_t    *raw;
	size_t		raw_len;
} ListRec;

/* The "sort" of a group line (compact_sort.c, for compact_wire.c). */
struct json_t;
extern struct json_t *compact_sort_json(const IcebergSortOrder *o);
extern bool compact_sort_from_json(struct json_t *j, const IcebergSchema *schema,
								   IcebergSortOrder **out, TmsError *err);

extern bool compact_oom(TmsError *err);
extern bool compact_map_put(StrMap *m, const char *key, int value);
extern int	compact_map_get(const StrMap *m, const char *key);

/*
 * The table checks of the plan and the commit (iceberg_write_check_table).
 */
extern bool compact_check_table(const IcebergTableMetadata *md,
								const IcebergSnapshot **snap, TmsError *err);
extern void compact_free_recs(ListRec *r, int n);
extern char *compact_part_key(int32_t spec_id, const char *partition, size_t len);
extern bool compact_read_list(const IcebergFileIO *io, const IcebergTableMetadata *md,
							  const IcebergSnapshot *snap, ListRec **out, int *nout,
							  TmsError *err);

/*
 * Iceberg's manifest_entry schema for format_version with the partition
 * record of source_schema (a manifest's writer schema) or, when it is
 * NULL, part_record (compact_schema.c); malloc'd.
 */
extern char *compact_entry_schema(int format_version, const char *source_schema,
								  const char *part_record, int64_t max_json,
								  TmsError *err);

/*
 * The plan's rules shared by compaction and the rewrite of position
 * deletes (compact_plan.c): the options resolved into p (min < target <
 * max checked), Iceberg's expectedOutputFiles, and why a group of n files
 * and bytes is worth rewriting by size (ICEBERG_COMPACT_* bits).
 */
extern bool compact_resolve_options(IcebergCompactPlan *p, const IcebergTableMetadata *md,
									const IcebergCompactOptions *opt, TmsError *err);
extern int	compact_expected_outputs(const IcebergCompactPlan *p, int64_t bytes);
extern unsigned compact_size_reasons(const IcebergCompactPlan *p, int n, int64_t bytes);

/*
 * The packer of both plans (compact_plan.c), Iceberg's ListPacker with a
 * lookback of one: the n candidates of one partition, in order, go into
 * groups; a candidate goes into the open group while the group stays
 * within p->max_file_group_size_bytes and opt's max_group_files (the
 * first always goes in), else it closes the group and opens the next.
 * item(arg, i, out) describes candidate i: its size, records and the
 * reasons it gives its group (bits of IcebergCompactGroup.reasons).  A
 * group [start, end) with a reason, its own or compact_size_reasons',
 * is handed to group(arg, start, end, bytes, records, reasons); a false
 * from it stops the packing and is returned.
 */
typedef struct CompactPackItem
{
	int64_t		size;
	int64_t		records;
	unsigned	reasons;
} CompactPackItem;

typedef void (*CompactPackItemFn) (void *arg, int i, CompactPackItem *out);
typedef bool (*CompactPackGroupFn) (void *arg, int start, int end, int64_t bytes,
									int64_t records, unsigned reasons);

extern bool compact_pack(const IcebergCompactPlan *p, const IcebergCompactOptions *opt,
						 int n, CompactPackItemFn item, CompactPackGroupFn group, void *arg);

/*
 * What a commit removed beside its groups' files and the deletion vectors
 * it added, for its summary (compact_summary.c).
 */
typedef struct CompactSummaryCounts
{
	int64_t		removed_pos_files,
				removed_eq_files,
				removed_pos_records,
				removed_eq_records,
				removed_delete_bytes,
				removed_dvs,	/* of removed_pos_files, deletion vectors */
				added_dvs;		/* of delete_files_added */
} CompactSummaryCounts;

/*
 * s->summary from the commit's counts r and c: data, a commit that
 * rewrites data files (its data file counts are given); the totals are
 * the parent's plus the changes.
 */
extern bool compact_fill_summary(IcebergNewSnapshot *s, const IcebergCompactCommit *r,
								 const CompactSummaryCounts *c, bool data,
								 int64_t changed_partitions, const IcebergSnapshot *parent,
								 TmsError *err);

/*
 * A group line's parts for a rewrite of position deletes (posdel_plan.c,
 * for compact_wire.c): the order of position delete files (their schema:
 * posdel.h), the data files kept as JSON, and read back into a job.
 */
extern const IcebergSortOrder compact_posdel_order;
extern struct json_t *compact_posdel_keep_json(const IcebergCompactGroup *gr);
extern bool compact_posdel_keep_parse(struct json_t *a, IcebergPosdelKeep **keep,
									  int *nkeep, TmsError *err);

/*
 * Deletion vectors written by a rewrite of position deletes on v3
 * (compact_dv.c): an output's blobs as the helper reports them ("dvs" of
 * its file line) and read back (checked against the file's size); the key
 * of a plan's file among the group files (path, or path and
 * content_offset for a deletion vector: NULL when buf is too small); the
 * manifest entry's fields 143, 144 and 145 of one (df: 3 fields).
 */
#define COMPACT_DV_KEY_MAX 8192
extern struct json_t *compact_dvs_json(const IcebergCompactOutput *f);
extern bool compact_dvs_parse(struct json_t *a, IcebergCompactOutput *f, TmsError *err);
extern const char *compact_dv_key(const char *path, int64_t offset, char *buf, size_t n);
extern int	compact_dv_fields(struct IcebergAvroWField *df, const IcebergCompactDv *dv);

/*
 * The commit's check (posdel.h's iceberg_posdel_check_live on v3): a
 * delete naming a data file groups' outputs write a deletion vector for,
 * added since the plan, is ICEBERG_ERR_CONFLICT.
 */
extern bool compact_dv_check_added(const IcebergFileIO *io, const IcebergTableMetadata *md,
								   const IcebergSnapshot *snap, const IcebergCompactPlan *p,
								   const IcebergCompactGroupOutput *groups, int ngroups,
								   TmsError *err);

/*
 * A row delta on v3: the deletes its deletion vectors replace (each data
 * file's old deletion vector and position delete files of it alone), as
 * indexes into p->deletes; ICEBERG_ERR_MALFORMED for a deletion vector of
 * a data file outside its group (compact_dv.c).
 */
extern bool compact_dv_replaced(const IcebergCompactPlan *p,
								const IcebergCompactGroupOutput *gs, int ngs,
								int **rm, int *nrm, TmsError *err);

/*
 * Row lineage in the commit (compact_lineage.c,
 * https://iceberg.apache.org/spec/#row-lineage): a data manifest rewritten
 * on a v3 table gets a new first_row_id, so the entries it carries write
 * out the first_row_id they inherited; compact_lineage_entry gives the
 * data_file bytes to copy (*raw the entry's, or patched), compact_lineage_
 * check refuses (ICEBERG_ERR_UNSUPPORTED) a changed manifest with a data
 * file that has none.  compact_assign_row_ids (v3; nothing otherwise)
 * gives every new data manifest (added[], news[]: path NULL for none) the
 * next row ids from t->first_row_id on, taking its added and existing
 * rows, and sets snap's first-row-id and added-rows.
 */
typedef struct CompactLineage
{
	bool		on;				/* a data manifest of a v3 table */
	int			branch;			/* first_row_id's "long" in the union, or -1 */
	int64_t		next;			/* the next inherited first_row_id, or -1 */
	const char *manifest;
	const char *missing;		/* a manifest with a data file without one */
	IcebergBuf *patch;
} CompactLineage;

extern bool compact_lineage_start(CompactLineage *l, const IcebergTableMetadata *md,
								  const IcebergManifestFile *mf, const char *path,
								  const char *schema, int64_t max_json, IcebergBuf *patch,
								  TmsError *err);
extern bool compact_lineage_entry(CompactLineage *l, const IcebergManifestEntry *e,
								  const void **raw, size_t *raw_len, TmsError *err);
extern bool compact_lineage_check(const CompactLineage *l, TmsError *err);
extern bool compact_assign_row_ids(const IcebergTableMetadata *md, IcebergNewManifest *added,
								   int nadded, IcebergNewManifest *news, int nnews,
								   const IcebergWriteTarget *t, IcebergNewSnapshot *snap,
								   TmsError *err);

/* The v1 manifest list schema (manifest_file of format v1). */
extern const char *const compact_list_schema_v1;

/* The size of the object at path. */
extern bool compact_object_length(const IcebergFileIO *io, const char *path, int64_t *len,
								  TmsError *err);

/* Iceberg's partition transforms (compact_transform.c) */
extern uint32_t iceberg_murmur3_32(const void *data, size_t len);
extern uint32_t iceberg_hash_long(int64_t v);
extern int32_t iceberg_bucket_of_hash(uint32_t hash, int32_t n);
extern int64_t iceberg_truncate_long(int64_t v, int64_t w);
extern size_t iceberg_truncate_utf8(const char *s, size_t len, int64_t w);
extern size_t iceberg_decimal_min_bytes(const uint8_t *b, size_t len, size_t *start);
extern int	iceberg_decimal_bytes(int precision);
extern bool iceberg_truncate_decimal(const uint8_t *in, size_t len, int64_t w, int out_len,
									 uint8_t *out);
extern int64_t iceberg_years_from_days(int64_t days);
extern int64_t iceberg_months_from_days(int64_t days);

/*
 * The partition in spec to_spec of a file of spec from_spec and partition
 * text (len bytes), computed from its values; *out NULL (and true) when
 * they do not fix it (the file may hold rows of several partitions).
 */
extern bool iceberg_partition_project(const IcebergTableMetadata *md,
									  const IcebergSchema *schema, int32_t from_spec,
									  const char *text, size_t len, int32_t to_spec,
									  char **out, TmsError *err);

/* The Avro partition record (field 102) of a spec's manifests. */
extern char *iceberg_partition_record_schema(const IcebergTableMetadata *md,
											 const IcebergSchema *schema,
											 int32_t spec_id, TmsError *err);

/* The spec's fields as a manifest header's "partition-spec" JSON. */
extern char *iceberg_partition_spec_json(const IcebergTableMetadata *md, int32_t spec_id,
										 TmsError *err);

/*
 * Lowercase hex (as the helper sends binary bounds) to bytes: *out (io_malloc,
 * at most ICEBERG_COMPACT_MAX_BOUND bytes) and *n; false when s is not such
 * hex or memory ran out (compact_values.c).
 */
extern bool iceberg_compact_unhex(const char *s, uint8_t **out, size_t *n);

#endif							/* TMS_ICEBERG_COMPACT_INT_H */
