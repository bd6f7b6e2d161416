/*-------------------------------------------------------------------------
 *
 * retention.h
 *	  Data retention by a time column, the plain-C half: which live data
 *	  files of the current snapshot hold only rows older than a cutoff
 *	  (and leave the table by a metadata-only "delete" snapshot), which
 *	  straddle it (some rows older, some not: a rewrite, or the position
 *	  deletes of a row delta, remove those rows), which are kept, and which cannot be
 *	  told without reading them (no metrics on the column).
 *
 * A row is older than the cutoff when its value of the column is
 * strictly less than the cutoff (a value equal to it is kept); a row
 * whose value is NULL is never older (SQL's "column < cutoff" is not
 * true for it) and is kept.  The cutoff is an instant, in microseconds
 * since 1970-01-01 00:00:00 UTC, and is compared in the column's units:
 *	- timestamp, timestamptz: microseconds;
 *	- timestamp_ns, timestamptz_ns: nanoseconds (the cutoff times 1000);
 *	- date: days; a day is older only when it ends at or before the
 *	  cutoff (the day holding the cutoff is kept: dates < the cutoff's
 *	  day, as a DELETE ... WHERE d < DATE '<the cutoff's day>' would);
 *	- long and int holding an epoch: in the unit given (seconds,
 *	  milliseconds, microseconds or nanoseconds since 1970-01-01 UTC); a
 *	  value v is older when v units after the epoch is before the cutoff.
 *
 * A data file is classified by row_filter.h's judgement of the filter
 * "column < cutoff" (iceberg_row_filter_less_than: one rule for
 * retention and deletions), which amounts to (first that applies):
 *	1. its partition, in its own spec (so files of every spec of an
 *	   evolved table are judged by the spec they were written in): a field
 *	   on the column with transform identity, year, month, day or hour and
 *	   a non-null value fixes the range of the file's values; the file is
 *	   DROP when that range lies wholly before the cutoff, KEEP when it
 *	   lies wholly at or after it;
 *	2. its column metrics (null_value_counts, lower_bounds, upper_bounds;
 *	   exact for these types, never truncated): DROP when upper < cutoff
 *	   and the null count is known to be 0; KEEP when lower >= cutoff, or
 *	   when every row is NULL (null count = record count); STRADDLE when
 *	   lower < cutoff (some rows are older, some may not be, or NULLs
 *	   stay);
 *	3. else UNKNOWN (no bounds on the column): kept, and reported, unless
 *	   the caller reads it (scan).
 * Iceberg's own DELETE decides the same way (its StrictMetricsEvaluator
 * and the partition projection of the filter, see
 * https://github.com/apache/iceberg/blob/main/api/src/main/java/org/apache/iceberg/expressions/StrictMetricsEvaluator.java).
 *
 * The plan is compaction's (compact.h) with a selection: the groups are
 * the DROP files by partition; the commit (iceberg_retention_commit_
 * write) is compaction's commit with no output files, as a "delete"
 * snapshot: the files become DELETED entries, a delete file is removed
 * when every data file of the base it applied to is dropped (position
 * deletes by referenced_data_file or by partition, and equality deletes
 * by the sequence number rules alike: an equality delete file stays while
 * it may still apply to a live data file).  The same conflict checks:
 * a dropped file no longer live, or a position delete added to its
 * partition since the plan, is ICEBERG_ERR_CONFLICT.  Nothing is deleted
 * from storage: snapshot expiry and orphan cleanup do that later.
 *
 * Refused: format v3 (deletion vectors and row lineage are not
 * maintained here, ICEBERG_ERR_UNSUPPORTED); a column that is not a
 * top-level timestamp, date, long or int (ICEBERG_ERR_INVALID_ARGUMENT);
 * a long or int column without a unit.
 *
 * Rules: plain C, no PostgreSQL header; errors are TmsError values; the
 * plan holds one record per file dropped and per straddling or unknown
 * file (their paths, for the report and the rewrite).
 *
 * src/iceberg/maint/retention.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_RETENTION_H
#define TMS_ICEBERG_RETENTION_H

#include "iceberg/compact/compact.h"

typedef enum IcebergRetentionClass
{
	ICEBERG_RETAIN_KEEP,
	ICEBERG_RETAIN_DROP,
	ICEBERG_RETAIN_STRADDLE,
	ICEBERG_RETAIN_UNKNOWN
} IcebergRetentionClass;

/* Units of an epoch held in a long or int column. */
typedef enum IcebergEpochUnit
{
	ICEBERG_EPOCH_NONE,			/* not a long or int column */
	ICEBERG_EPOCH_S,
	ICEBERG_EPOCH_MS,
	ICEBERG_EPOCH_US,
	ICEBERG_EPOCH_NS
} IcebergEpochUnit;

/* "s", "ms", "us", "ns" (and their long names); false when none. */
extern bool iceberg_epoch_unit_parse(const char *text, IcebergEpochUnit *out);

typedef struct IcebergRowFilter IcebergRowFilter;	/* row_filter.h */

/*
 * The rows removed, bound to a table: the column and the cutoff (rows
 * older), or a where (rows it matches: tms.delete_rows; filter set,
 * field_id -1, the class of a file is row_filter.h's, its SOME files
 * STRADDLE, none UNKNOWN).
 */
typedef struct IcebergRetention
{
	int32_t		field_id;
	char	   *column;			/* its name */
	IcebergTypeId type;
	bool		required;		/* no NULL in it: no null count needed */
	IcebergEpochUnit unit;
	int64_t		cutoff_us;		/* as given */
	int64_t		cutoff;			/* in the column's units: older iff value <
								 * cutoff */
	IcebergRowFilter *older;	/* "column < cutoff" (in its units) */
	char	   *where;			/* the where's text, or NULL */
	IcebergRowFilter *filter;	/* it, bound */
} IcebergRetention;

/*
 * Bind column (a top-level column of md's current schema, matched exactly,
 * else case-insensitively when only one matches) and the cutoff.  unit is
 * required for a long or int column and refused for the others.
 * ICEBERG_ERR_INVALID_ARGUMENT naming the bad value.
 */
extern bool iceberg_retention_bind(const IcebergTableMetadata *md, const char *column,
								   int64_t cutoff_us, IcebergEpochUnit unit,
								   IcebergRetention **out, TmsError *err);

/*
 * Bind a where (row_filter.h) to md's current schema: its errors (22023
 * and 42703 kinds: ICEBERG_ERR_INVALID_ARGUMENT, ICEBERG_ERR_NOT_FOUND,
 * ICEBERG_ERR_UNSUPPORTED) with detail and hint.
 */
extern bool iceberg_retention_bind_where(const IcebergTableMetadata *md, const char *where,
										 IcebergRetention **out, TmsError *err);
extern void iceberg_retention_free(IcebergRetention *r);

/*
 * The class of a live data file (read with ICEBERG_READ_PARTITION and
 * ICEBERG_READ_BOUNDS); for STRADDLE, *older estimates its older rows
 * from the bounds (linearly between lower and upper), or the rows a
 * where matches (iceberg_row_filter_estimate), for DROP it is its record
 * count, else 0.  *by_partition: the partition decided.
 */
extern IcebergRetentionClass iceberg_retention_classify(const IcebergRetention *r,
														const IcebergTableMetadata *md,
														const IcebergManifestEntry *e,
														int64_t *older, bool *by_partition);

/* A straddling or unknown data file of the plan. */
typedef struct IcebergRetentionFile
{
	char	   *path;
	int64_t		size;
	int64_t		records;
	int64_t		older;			/* estimated older rows (straddling) */
	int32_t		spec_id;
	char	   *partition;
} IcebergRetentionFile;

typedef struct IcebergRetentionPlan
{
	IcebergCompactPlan *drop;	/* the groups of files dropped whole */
	int64_t		dropped_files;
	int64_t		dropped_bytes;
	int64_t		dropped_rows;
	int64_t		dropped_by_partition;	/* of them, told by their partition */
	int			nstraddling;
	IcebergRetentionFile *straddling;
	int64_t		straddling_rows;	/* their records */
	int64_t		straddling_older;	/* estimated older rows in them */
	int			nunknown;
	IcebergRetentionFile *unknown;
	int64_t		unknown_rows;
	int64_t		kept_files;
} IcebergRetentionPlan;

/* Plan on md's current snapshot (an empty table: drop->ngroups 0). */
extern bool iceberg_retention_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
								   const IcebergRetention *r, IcebergRetentionPlan **out,
								   TmsError *err);
extern void iceberg_retention_plan_free(IcebergRetentionPlan *p);

/*
 * The commit of every group of p->drop on md (the base, or the table after
 * a conflict): compaction's commit without outputs, its snapshot's
 * operation "delete".  res as iceberg_compact_commit_write's.
 */
extern bool iceberg_retention_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
										   const IcebergTableMetadata *md,
										   IcebergRetentionPlan *p, int64_t new_snapshot_id,
										   IcebergCompactCommit *res, TmsError *err);

/*
 * Mode "rewrite": the plan of the straddling files of md's current
 * snapshot (with scan, the files without bounds too), compaction's
 * groups by partition with every delete file applying to them, and its
 * remove_older set from r: the helper rewrites each group without the
 * rows older than the cutoff.  Planned on the table after the
 * metadata-only commit.  row_delta (mode "delete-files", which writes no
 * row): a v3 file without row ids is planned too (compact.h's
 * no_row_ids), where a rewrite, which keeps each row's _row_id, refuses
 * it.
 */
extern IcebergRowCutoff iceberg_retention_row_cutoff(const IcebergRetention *r);
extern bool iceberg_retention_rewrite_plan(const IcebergFileIO *io,
										   const IcebergTableMetadata *md,
										   const IcebergRetention *r, bool scan,
										   bool row_delta,
										   IcebergCompactPlan **out, TmsError *err);

/*
 * Mode "delete-files": the rewrite plan made a row delta (compact.h's
 * row_delta): the helper writes one position delete file per group of the
 * positions of its rows removed (on v3 one Puffin file of deletion
 * vectors, one per data file, merged with its earlier deletes), the commit adds them with the new
 * snapshot's sequence number and keeps the data files, which must still
 * be live (a file removed or rewritten since the plan is
 * ICEBERG_ERR_CONFLICT: the caller plans again).  A file whose spec and
 * partition are not its group's (a file of an older spec grouped into the
 * current one) is ICEBERG_ERR_UNSUPPORTED: a position delete applies only
 * in its own spec and partition.
 */
extern bool iceberg_retention_row_delta(IcebergCompactPlan *p, TmsError *err);

/*
 * iceberg_compact_commit_write, its snapshot's operation "overwrite" when
 * p->remove_older removes rows (Iceberg's overwrite: rows deleted and
 * added; a compaction's "replace" says the data did not change), "delete"
 * for a row delta (deletes added, no data file).
 */
extern bool iceberg_retention_rewrite_commit_write(const IcebergFileIO *io,
												   const IcebergWriter *w,
												   const IcebergTableMetadata *md,
												   IcebergCompactPlan *p,
												   const IcebergCompactGroupOutput *groups,
												   int ngroups, int64_t new_snapshot_id,
												   IcebergCompactCommit *res, TmsError *err);

#endif							/* TMS_ICEBERG_RETENTION_H */
