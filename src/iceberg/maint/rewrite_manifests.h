/*-------------------------------------------------------------------------
 *
 * rewrite_manifests.h
 *	  Iceberg manifest rewrite (RewriteManifests), the plain-C half:
 *	  planning which manifests of the current snapshot to merge, and
 *	  writing the merged manifests and the new manifest list.  The caller
 *	  (the PostgreSQL glue) commits the new snapshot through its catalog,
 *	  retries, and deletes the written objects when the commit certainly
 *	  failed.
 *
 * Semantics, after Apache Iceberg's BaseRewriteManifests and
 * RewriteManifestsSparkAction
 * (https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/BaseRewriteManifests.java,
 *	https://iceberg.apache.org/spec/#manifests):
 *	- candidates are the current snapshot's manifests of the selected spec
 *	  (or every spec) whose manifest_length is below the target size;
 *	  they are grouped by (partition spec, content data/deletes, identical
 *	  writer schema text); a group needs at least 2 manifests, else its
 *	  manifest is kept as it is;
 *	- in a v2 table a manifest whose writer schema lacks the entry's
 *	  sequence_number (id 3), i.e. one written by a v1 writer, is kept:
 *	  its entries could not carry explicit sequence numbers;
 *	- live entries only (ADDED, EXISTING; DELETED entries are dropped);
 *	  every entry is written EXISTING with its original snapshot id and
 *	  explicit data and file sequence numbers (inherited values made
 *	  explicit); the data_file bytes are copied verbatim from the input
 *	  (every field and field id survives);
 *	- entries are clustered by partition: sorted by the canonical partition
 *	  text within the memory budget.  BEYOND THE BUDGET, each chunk of
 *	  entries that fits in it is sorted and written on its own, so the
 *	  same partition may then appear in several output manifests (still
 *	  correct, only less well clustered);
 *	- output manifests roll at the target size (bytes written so far plus
 *	  the pending uncompressed block); their writer schema and header
 *	  metadata are those of the group's first manifest; codec deflate
 *	  (null when write.avro.compression-codec is "uncompressed"; level
 *	  write.avro.compression-level, else zlib's default 6);
 *	- the new manifest list has the base list's writer schema and header
 *	  (snapshot-id, parent-snapshot-id, sequence-number updated): the new
 *	  manifests first, then the kept records copied byte for byte.  New
 *	  records: added_snapshot_id = the new snapshot, sequence_number = the
 *	  new snapshot's, min_sequence_number = min data sequence number of
 *	  the entries, existing counts, added/deleted 0, and partition field
 *	  summaries computed from the entries (contains_null, contains_nan,
 *	  lower/upper bounds in Iceberg's single-value serialization).  When a
 *	  partition field has a type the summaries do not support (anything
 *	  but boolean, int, long, float, double, string, bytes, fixed, and the
 *	  logical types date, time, timestamp, decimal, uuid on those), that
 *	  manifest's "partitions" is written null (the field is optional);
 *	- format v3 keeps row lineage (https://iceberg.apache.org/spec/#row-lineage):
 *	  every data file's first_row_id is kept, a null one (an ADDED file's,
 *	  inherited) written out with its inherited value, the manifest's
 *	  first_row_id plus the record_count of the files before it in that
 *	  manifest whose first_row_id is null ("First Row ID Inheritance": the
 *	  inherited value must be written when creating existing entries);
 *	  so no file of a new manifest inherits, and each new data manifest
 *	  gets first_row_id = the snapshot's first-row-id = the table's
 *	  next-row-id, consuming no row ids ("Row lineage example": optional
 *	  when the writer knows every file's first_row_id is assigned); kept
 *	  records keep theirs byte for byte; the snapshot has added-rows 0, so
 *	  the table's next-row-id does not move ("Snapshot Row IDs").  Delete
 *	  manifests (deletion vectors included: referenced_data_file,
 *	  content_offset and content_size_in_bytes are in the data_file bytes)
 *	  are merged like v2 ones; their first_row_id stays null.  A v3 data
 *	  manifest is a candidate only when its writer schema has first_row_id
 *	  as a union of null and long;
 *	- refused: a v3 snapshot without first-row-id or a data manifest without
 *	  first_row_id (a table upgraded to v3 whose files have no row ids yet:
 *	  the next commit must assign them, "Row Lineage for Upgraded Tables"),
 *	  format versions above 3, and snapshots with an inline v1 "manifests"
 *	  array instead of a manifest list (ICEBERG_ERR_UNSUPPORTED).
 *
 * Conflicts: iceberg_rewrite_execute() refuses with ICEBERG_ERR_CONFLICT
 * (added to IcebergErrorCode for this) when md's current snapshot is not
 * the plan's base or the base manifest list no longer matches the plan.
 *
 * Memory: the plan holds one small record per manifest of the base list;
 * execution holds one output manifest being built (about the target size)
 * plus the clustering buffer (memory_budget_bytes, counted as entry bytes
 * plus an index), plus one Avro block per open reader.
 *
 * src/iceberg/maint/rewrite_manifests.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_REWRITE_H
#define TMS_ICEBERG_REWRITE_H

#include "iceberg/iceberg.h"
#include "iceberg/write/commit_request.h"

typedef struct IcebergWriter	/* how iceberg writes a whole object;
								 * implemented by the caller */
{
	void	   *arg;
	/* create or replace path with these bytes; 0 ok, -1 with *err */
	int			(*write) (void *arg, const char *path, const void *data, size_t len,
						  TmsError *err);
} IcebergWriter;

typedef struct IcebergRewriteOptions
{
	int64_t		target_size_bytes;	/* <= 0: table property
									 * commit.manifest.target-size-bytes, else
									 * 8 MiB */
	int32_t		spec_id;		/* -1: every spec */
	int64_t		now_ms;			/* snapshot timestamp (<= 0: the clock) */
	int64_t		memory_budget_bytes;	/* <= 0: 32 MiB; raw entry bytes held
										 * at once for clustering */
} IcebergRewriteOptions;

typedef struct IcebergRewriteManifest	/* one manifest of the base snapshot */
{
	char	   *path;
	int64_t		length;
	int32_t		spec_id;
	int32_t		content;
	int64_t		live_entries;	/* added + existing files count (-1: unknown,
								 * v1 nulls) */
	int			group;			/* index into groups, -1: kept as is */
	/* added fields */
	int64_t		sequence_number;	/* of its manifest list record */
	int64_t		added_snapshot_id;
	uint64_t	schema_hash;	/* of its writer schema text (candidates only,
								 * else 0) */
	int64_t		first_row_id;	/* v3, of its manifest list record; -1: null */
	int			long_branch;	/* v3 data candidates: the branch of "long" in
								 * data_file.first_row_id's union */
} IcebergRewriteManifest;

typedef struct IcebergRewriteGroup	/* manifests merged together */
{
	int32_t		spec_id;
	int32_t		content;
	int			nreplaced;
	int64_t		live_entries;
	int64_t		bytes;			/* sum of replaced manifest_length */
	int			expected_outputs;	/* ceil(bytes / target) at least 1
									 * (estimate) */
	/* added field */
	uint64_t	schema_hash;
} IcebergRewriteGroup;

typedef struct IcebergRewritePlan
{
	int64_t		base_snapshot_id;	/* the current snapshot planned on; -1:
									 * table empty, nothing to do */
	int64_t		target_size_bytes;
	int			nmanifests;
	IcebergRewriteManifest *manifests;	/* in manifest-list order */
	int			ngroups;
	IcebergRewriteGroup *groups;
	int			nreplaced;
	int			nkept;
	/* added fields: the options resolved */
	int64_t		now_ms;
	int64_t		memory_budget_bytes;
} IcebergRewritePlan;

extern bool iceberg_rewrite_plan(const IcebergFileIO *io,
								 const IcebergTableMetadata *md,
								 const IcebergRewriteOptions *opt,
								 IcebergRewritePlan **out, TmsError *err);
extern void iceberg_rewrite_plan_free(IcebergRewritePlan *p);

/* IcebergNewSnapshot: commit_request.h.  Its summary holds manifests-created,
 * manifests-kept, manifests-replaced, entries-processed and the parent's
 * total-* carried over. */

typedef struct IcebergRewriteResult
{
	int			nwritten;
	char	  **written;		/* every object written, manifests then the
								 * list, ALSO on failure (caller deletes them
								 * once the commit certainly failed) */
	IcebergNewSnapshot snapshot;
	int64_t		manifests_replaced;
	int64_t		manifests_added;
	int64_t		entries_rewritten;
	/* added fields */
	int64_t		entries_dropped;	/* DELETED entries left out */
	int64_t		cluster_chunks; /* sorted chunks (> groups: the budget split a
								 * group) */
	int64_t		cluster_peak_bytes; /* most clustering bytes held at once */
} IcebergRewriteResult;

/*
 * Writes the new manifests and manifest list (under
 * "<md->location>/metadata/", names like Iceberg's: "<uuid>-m<N>.avro",
 * "snap-<id>-1-<uuid>.avro"), fills res->snapshot (sequence number
 * md->last_sequence_number+1 for v2, parent = plan->base_snapshot_id).
 * Refuses (ICEBERG_ERR_CONFLICT) if md's current snapshot is not
 * plan->base_snapshot_id; ICEBERG_ERR_INVALID_ARGUMENT when the plan
 * replaces nothing or new_snapshot_id is not positive or already in md.
 * res is always initialised (free it with iceberg_rewrite_result_free()
 * on success and on failure).
 */
extern bool iceberg_rewrite_execute(const IcebergFileIO *io,
									const IcebergWriter *w,
									const IcebergTableMetadata *md,
									const IcebergRewritePlan *plan,
									int64_t new_snapshot_id,
									IcebergRewriteResult *res,
									TmsError *err);
extern void iceberg_rewrite_result_free(IcebergRewriteResult *res);

/* Random positive, not in md (0 only if no random source is available). */
extern int64_t iceberg_new_snapshot_id(const IcebergTableMetadata *md);

#endif							/* TMS_ICEBERG_REWRITE_H */
