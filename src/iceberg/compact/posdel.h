/*-------------------------------------------------------------------------
 *
 * posdel.h
 *	  The rewrite of position delete files (Iceberg's
 *	  RewritePositionDeleteFiles action), the plain-C half: the plan, the
 *	  check that the data files the rewritten deletes point at are still
 *	  live, and the metrics Iceberg keeps for a position delete file.
 *	  It reuses compaction's plan, group line, helper and commit
 *	  (compact.h) with IcebergCompactPlan.rewrite_content set to
 *	  ICEBERG_CONTENT_POSITION_DELETES: a group's "files" are then
 *	  position delete files, rewritten into position delete files.
 *
 * The plan follows Iceberg's BinPackRewritePositionDeletePlanner
 * (https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/actions/BinPackRewritePositionDeletePlanner.java):
 *	- the live position delete files of the current snapshot are grouped by
 *	  their spec and partition (the where filter selects partitions);
 *	- a file is a candidate when rewrite-all, or its size is outside
 *	  [min-file-size-bytes, max-file-size-bytes] (75 % and 180 % of
 *	  target-file-size-bytes, whose default is the table's
 *	  write.delete.target-file-size-bytes, else 64 MiB), or it is proven
 *	  dangling (below);
 *	- the candidates of a partition are packed in order by compaction's
 *	  packer into groups of at most max-file-group-size-bytes (and
 *	  max_group_files files); a group is rewritten by compaction's
 *	  size rules (enough input files, enough content, too much content,
 *	  rewrite-all) or when it holds a dangling file;
 *	- its output file count is Iceberg's expectedOutputFiles(bytes).
 * Dangling deletes (https://iceberg.apache.org/spec/#scan-planning): a
 * position delete applies to a data file of its own spec and partition
 * whose data sequence number is not above the delete file's.  The helper
 * keeps a row (file_path, pos) only when file_path is such a live data
 * file (the group's "keep" list: the live data files of its partition,
 * only its referenced_data_file when it has one); the others are dropped.
 * A delete file no live data file can match (none of its partition, or
 * its referenced_data_file gone) is proven dangling by the metadata
 * alone: a group of only such files writes nothing and removes them.
 * The rows written are sorted by (file_path, pos), with Iceberg's field
 * ids (file_path 2147483546, pos 2147483545).
 *
 * The commit (compact_commit.c, Iceberg's RewritePositionDeletesCommitManager):
 * one "replace" snapshot removes the group files and adds the new ones,
 * which inherit the new snapshot's sequence number as Iceberg's
 * RewriteFiles.addFile gives them.  That is correct because the rows
 * kept are only those that applied before: a row whose data file is
 * newer than its delete file was dropped as dangling, so no delete
 * applies to a row it did not delete before.  Before writing, the group
 * files must all be live (a concurrent commit removed one: conflict) and
 * the data files the new files may point at (those of the keep list
 * between the outputs' file_path bounds) must all be live
 * (iceberg_posdel_check_live): a concurrent commit that removed one
 * (a compaction, a delete) is a conflict, not overwritten.
 *
 * Format v1 has no delete files (an empty plan).  Format v3
 * (https://iceberg.apache.org/spec/#deletion-vectors: at most one deletion
 * vector per data file in a snapshot; a writer adding one merges the data
 * file's position deletes into it) writes deletion vectors instead, as
 * Iceberg's rewrite_position_delete_files does on v3: a partition holding
 * a position delete file, two deletion vectors of one data file or a
 * dangling delete is one group of all its delete files and deletion
 * vectors (a data file's deletes meet in one group; the size options and
 * group bounds do not choose), reason ICEBERG_COMPACT_TO_DV; a deletion
 * vector is a group file keyed by its Puffin file and offset
 * (IcebergCompactFile.dv_key, compact_int.h).  The helper
 * (src/compactor/dv_rewrite.c) keeps the rows as above and writes one
 * deletion vector per data file, all in one Puffin file; the commit adds
 * one entry each (PUFFIN, referenced_data_file, content_offset,
 * content_size_in_bytes, the new snapshot's sequence number) and removes
 * the group files; a delete of one of those data files added since the
 * plan is a conflict (compact_dv.c).
 *
 * Memory: one record per live position delete file of the selected
 * partitions and one per live data file of a partition that has one.
 *
 * src/iceberg/compact/posdel.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_POSDEL_H
#define TMS_ICEBERG_POSDEL_H

#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_wire.h"

#define ICEBERG_POS_PATH_ID		2147483546
#define ICEBERG_POS_POS_ID		2147483545

/* A group holds a delete file proven dangling (IcebergCompactGroup.reasons). */
#define ICEBERG_COMPACT_DANGLING	0x40
/* v3: a group holds position delete files or several DVs of a data file */
#define ICEBERG_COMPACT_TO_DV		0x80

/* Iceberg's write.delete.target-file-size-bytes default. */
#define ICEBERG_POSDEL_DEFAULT_TARGET	(INT64_C(64) * 1024 * 1024)

/*
 * Plan on md's current snapshot with compaction's options (the sizes,
 * min-input-files, max-file-group-size-bytes, max_group_files,
 * rewrite-all, where; the delete thresholds and output-spec-id are not
 * used; on v3 neither do the sizes and group bounds, above).  Invalid sizes
 * are ICEBERG_ERR_INVALID_ARGUMENT.
 * plan->candidates counts the candidate files, plan->filtered_out the
 * delete files the filter left out, plan->dangling those proven dangling,
 * plan->data_files and data_bytes the live data files (counted only when
 * some position delete file is selected: the data manifests are read only
 * then).
 */
extern bool iceberg_posdel_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
								const IcebergCompactOptions *opt, IcebergCompactPlan **out,
								TmsError *err);

/* The options checked against md without planning (as the plan resolves them). */
extern bool iceberg_posdel_check_options(const IcebergTableMetadata *md,
										 const IcebergCompactOptions *opt, TmsError *err);

/*
 * Iceberg's schema of position delete files (file_path, pos), as JSON: the
 * helper's output schema for them (posdel_plan.c).
 */
extern const char *const compact_posdel_schema_json;

/* The metrics modes of the helper's output: full for file_path and pos. */
#define ICEBERG_POSDEL_NMETRICS 2
extern const IcebergCompactJobMetric iceberg_posdel_metrics[ICEBERG_POSDEL_NMETRICS];

/*
 * For the commit of groups[0 .. ngroups) on md's snapshot snap: the data
 * files their outputs may point at are still live (and on v3 no delete of
 * them was added since the plan).  ICEBERG_ERR_CONFLICT naming the first
 * that is not.
 */
extern bool iceberg_posdel_check_live(const IcebergFileIO *io, const IcebergTableMetadata *md,
									  const IcebergSnapshot *snap, const IcebergCompactPlan *p,
									  const IcebergCompactGroupOutput *groups, int ngroups,
									  TmsError *err);

/*
 * Does the manifest entry of output o keep metric c of kind which (0
 * column_sizes, 1 value_counts, 2 null_value_counts, 3 nan_value_counts,
 * 4 lower_bounds, 5 upper_bounds)?  As Iceberg's PositionDeleteWriter:
 * no counts for file_path and pos, and their bounds only when the file
 * points at one data file (its file_path bounds are equal).
 */
extern bool iceberg_posdel_metric_kept(const IcebergCompactOutput *o,
									   const IcebergColumnMetrics *c, int which);

#endif							/* TMS_ICEBERG_POSDEL_H */
