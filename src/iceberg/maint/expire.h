/*-------------------------------------------------------------------------
 *
 * expire.h
 *	  Iceberg snapshot expiry, the plain-C half: which snapshots and refs
 *	  an expiry removes (Apache Iceberg's RemoveSnapshots), the table
 *	  metadata without them (for a dry run), and the files the expired
 *	  snapshots leave unreferenced (Iceberg's ReachableFileCleanup),
 *	  streamed with bounded memory.
 *
 * The PostgreSQL side loads the table through the REST catalog, calls
 * iceberg_expire_plan(), commits iceberg_commit_expire() (commit_request.h),
 * reloads the table, and deletes what iceberg_expired_files() streams.
 *
 * Semantics follow Apache Iceberg's Java implementation:
 *	https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/RemoveSnapshots.java
 *	https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/ReachableFileCleanup.java
 * and the spec's table properties and snapshot retention
 * (https://iceberg.apache.org/spec/#snapshot-retention-policy).
 *
 * Rules: plain C, no PostgreSQL header, no longjmp; failures are
 * TmsError values; everything returned is malloc'd and freed by the
 * matching *_free.  Path comparisons use the canonical form of
 * io_location_canonical only (src/io/storage/location.c).
 *
 * src/iceberg/maint/expire.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_EXPIRE_H
#define TMS_ICEBERG_EXPIRE_H

#include "iceberg/iceberg.h"

/* Table properties and their defaults (Iceberg's TableProperties). */
#define ICEBERG_PROP_GC_ENABLED				"gc.enabled"
#define ICEBERG_PROP_MAX_SNAPSHOT_AGE_MS	"history.expire.max-snapshot-age-ms"
#define ICEBERG_PROP_MIN_SNAPSHOTS_TO_KEEP	"history.expire.min-snapshots-to-keep"
#define ICEBERG_PROP_MAX_REF_AGE_MS			"history.expire.max-ref-age-ms"
#define ICEBERG_DEFAULT_MAX_SNAPSHOT_AGE_MS	INT64_C(432000000)	/* 5 days */
#define ICEBERG_DEFAULT_MIN_SNAPSHOTS_TO_KEEP 1

typedef struct IcebergExpireOptions
{
	int64_t		now_ms;			/* the evaluation time, ms since the epoch */
	int64_t		older_than_ms;	/* absolute ms timestamp; -1: now - table
								 * property history.expire.max-snapshot-age-ms
								 * (default 5 days) */
	int32_t		retain_last;	/* -1: property
								 * history.expire.min-snapshots-to-keep
								 * (default 1); else must be >= 1 */
	int64_t		max_ref_age_ms; /* -1: property history.expire.max-ref-age-ms
								 * (default: refs never expire); else >= 0 */
	int			nsnapshot_ids;
	const int64_t *snapshot_ids;	/* also expire these explicitly (refused
									 * if one is the head of a retained ref;
									 * ids not in the table are ignored, as
									 * Iceberg does) */
} IcebergExpireOptions;

typedef struct IcebergExpirePlan
{
	int			nexpired;
	int64_t    *expired;		/* ascending by timestamp (then id) */
	int			nremoved_refs;
	char	  **removed_refs;	/* in metadata order */
	int64_t    *removed_ref_snapshot_ids;	/* what each removed ref pointed
											 * at (-1: nothing); the commit
											 * asserts it */
	int			nretained;
	int64_t    *retained;		/* ascending by timestamp (then id) */
	int64_t		older_than_ms;	/* effective values */
	int32_t		retain_last;
	int64_t		max_ref_age_ms; /* INT64_MAX: refs never expire */
} IcebergExpirePlan;

/*
 * Computes what an expiry of md removes, exactly as Iceberg's
 * RemoveSnapshots does:
 *	- a ref other than "main" is removed when its snapshot is missing or
 *	  now - its snapshot's timestamp > its max-ref-age-ms (the ref's own,
 *	  else the option, else the table property; default never);
 *	- every retained ref's snapshot is retained; an explicit id that is
 *	  one is refused (ICEBERG_ERR_INVALID_ARGUMENT);
 *	- per retained branch, its ancestors (head first) are retained while
 *	  fewer than min-snapshots-to-keep (the branch's own, else
 *	  retain_last) are retained or the ancestor is no older than
 *	  max-snapshot-age (the branch's own: now - it; else older_than);
 *	- a snapshot that is no ancestor of a retained branch and no retained
 *	  tag's snapshot is retained when its timestamp >= older_than;
 *	- everything else, and every explicit id, is expired; the current
 *	  snapshot is always retained.
 * gc.enabled other than "true" (any case; absent = true) is refused with
 * ICEBERG_ERR_INVALID_ARGUMENT, as Iceberg refuses it ("deleting files
 * may corrupt other tables").  A property that is not a number is
 * ICEBERG_ERR_MALFORMED.  Parent chains are followed at most nsnapshots
 * steps (a cycle ends the walk).  On success the caller frees *out with
 * iceberg_expire_plan_free(); on failure *out is zeroed.
 */
extern bool iceberg_expire_plan(const IcebergTableMetadata *md,
								const IcebergExpireOptions *opt,
								IcebergExpirePlan *out, TmsError *err);
extern void iceberg_expire_plan_free(IcebergExpirePlan *p);

/* True when md has a snapshot with this id (after a commit: did it land?). */
extern bool iceberg_snapshot_landed(const IcebergTableMetadata *md,
									int64_t snapshot_id);

/*
 * True when none of the plan's expired snapshots and removed refs is in
 * md any more (after an expiry commit of unknown outcome: did it land?).
 */
extern bool iceberg_expiry_landed(const IcebergTableMetadata *md,
								  const IcebergExpirePlan *plan);

/*
 * A deep copy of md minus the plan's expired snapshots (and their
 * snapshot-log entries), removed refs, and the statistics and partition
 * statistics of expired snapshots: the metadata an expiry would commit,
 * for a dry run of iceberg_expired_files().  NULL on failure (err).
 * Free with iceberg_metadata_free().
 */
extern IcebergTableMetadata *iceberg_metadata_without(const IcebergTableMetadata *md,
													  const IcebergExpirePlan *plan,
													  TmsError *err);

/*
 * Streams every file reachable from the snapshots of old_md that kept_md
 * (the table's metadata after the expiry committed; it may hold newer
 * snapshots) no longer has, and reachable from no snapshot of kept_md:
 * content files first (live entries of the expired-only manifests not
 * live in any kept manifest), each manifest after its content files,
 * then the manifest lists of the expired snapshots, then the statistics
 * and partition-statistics files of old_md not referenced by kept_md.
 *
 * Each file once; file->path is its canonical form (relative paths
 * resolved against relative_root, which may be NULL when the table has
 * none); file->snapshot_id the expired snapshot it was reached through;
 * cb as in iceberg_walk (false stops: ICEBERG_ERR_CANCELLED unless the
 * callback filled err).
 *
 * Memory: the kept snapshots' files as 64-bit hashes of canonical paths
 * (8 to 12 bytes each) plus the files streamed so far (16 to 32 bytes
 * each, hashes again); a collision can only keep a file, never delete one.
 * A path that cannot be canonicalised fails the call
 * (ICEBERG_ERR_INVALID_ARGUMENT): nothing is guessed.
 *
 * missing NULL: every file must be readable.  Else (after the expiry
 * commit landed, as Iceberg's FileCleanupStrategy ignores failures to
 * read expired manifests) a manifest list or manifest of an EXPIRED
 * snapshot that is missing (IO_ERR_NOT_FOUND: a concurrent orphan
 * cleanup deleted it) is skipped and counted in *missing: it is gone,
 * and the files only it listed are left to orphan cleanup.  A missing
 * file of a KEPT snapshot still fails the call, before anything is
 * streamed: what is kept must be proven complete.  Other failures stay.
 */
extern bool iceberg_expired_files(const IcebergFileIO *io,
								  const IcebergTableMetadata *old_md,
								  const IcebergTableMetadata *kept_md,
								  const char *relative_root,
								  IcebergWalkCallback cb, void *arg,
								  int64_t *missing, TmsError *err);

#endif							/* TMS_ICEBERG_EXPIRE_H */
