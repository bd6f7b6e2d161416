/*-------------------------------------------------------------------------
 *
 * commit_request.h
 *	  The JSON bodies of the REST catalog commits tms makes
 *	  (CommitTableRequest of the Iceberg REST catalog API,
 *	  https://github.com/apache/iceberg/blob/main/open-api/rest-catalog-open-api.yaml):
 *	  the expiry of snapshots and the addition of one snapshot to a branch.
 *
 * Rules: plain C, no PostgreSQL header; each function returns a
 * malloc'd NUL-terminated compact JSON text (free with io_free()) or NULL
 * with *err filled.  Strings that are not valid UTF-8 are refused
 * (ICEBERG_ERR_INVALID_ARGUMENT).  Every body asserts the table's uuid
 * (when known) and the snapshot its ref points at, so a concurrent
 * change fails the commit (409) instead of being overwritten.
 *
 * src/iceberg/write/commit_request.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_COMMIT_H
#define TMS_ICEBERG_COMMIT_H

#include "iceberg/maint/expire.h"
#include "iceberg/iceberg.h"

/*
 * requirements: assert-table-uuid (omitted when table_uuid is NULL, as
 * for v1 tables without one), assert-ref-snapshot-id for ref "main" =
 * main_snapshot_id (-1: null, the ref must not exist), and for each
 * removed ref the snapshot it pointed at (removed_ref_snapshot_ids, when
 * not NULL), so that a ref changed meanwhile is not removed;
 * updates: remove-snapshot-ref for each removed ref, then
 * remove-snapshots with the expired ids (omitted when there are none).
 * A plan that changes nothing is refused (ICEBERG_ERR_INVALID_ARGUMENT:
 * there is nothing to commit).
 */
extern char *iceberg_commit_expire(const char *table_uuid,
								   int64_t main_snapshot_id,
								   const IcebergExpirePlan *plan,
								   TmsError *err);

/* A snapshot a commit adds (add-snapshot); rewrite_manifests.c and compact_commit.c fill one. */
typedef struct IcebergNewSnapshot
{
	int64_t		snapshot_id;
	int64_t		parent_snapshot_id; /* -1 none */
	int64_t		sequence_number;	/* v1: 0 (omitted) */
	int64_t		timestamp_ms;
	char	   *manifest_list;
	int32_t		schema_id;		/* -1: omit */
	char	   *operation;		/* "replace" */
	int			nsummary;
	IcebergKeyValue *summary;	/* besides "operation" (not repeated here) */
	bool		row_lineage;	/* v3: first-row-id and added-rows sent */
	int64_t		first_row_id;
	int64_t		added_rows;
} IcebergNewSnapshot;

/*
 * requirements: assert-table-uuid (omitted when NULL),
 * assert-ref-snapshot-id(ref, snap->parent_snapshot_id; -1: null);
 * updates: add-snapshot (summary: "operation" first, then the summary
 * entries, a second "operation" among them ignored; with row_lineage the
 * v3 first-row-id and added-rows), set-snapshot-ref
 * (ref, type branch, the new snapshot id).
 */
extern char *iceberg_commit_snapshot(const char *table_uuid, const char *ref,
									 const IcebergNewSnapshot *snap,
									 TmsError *err);

#endif							/* TMS_ICEBERG_COMMIT_H */
