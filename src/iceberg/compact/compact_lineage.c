/*-------------------------------------------------------------------------
 *
 * compact_lineage.c
 *	  Data file compaction on format v3 tables, the commit's row lineage
 *	  (https://iceberg.apache.org/spec/#row-lineage): the first_row_id of
 *	  the entries carried into a rewritten data manifest, and the row ids
 *	  the commit's new data manifests take (compact_int.h states the API).
 *
 * A data file whose first_row_id is null inherits its manifest's plus
 * the record_count of the data files before it whose first_row_id is
 * null (https://iceberg.apache.org/spec/#first-row-id-inheritance; counted
 * over every status, as the manifest rewrite and the plan count them).
 * Every manifest the commit writes is given a new first_row_id, so the
 * entries it carries have theirs written out.  The manifests take the
 * next row ids in list order, each its added and existing rows, and the
 * snapshot's added-rows is their sum
 * (https://iceberg.apache.org/spec/#snapshot-row-ids): the compacted
 * files' rows keep the _row_id they carry, the ids their manifest is
 * given are not used by them.
 *
 * Rules of this file: plain C, errors as TmsError values; nothing is
 * allocated here but the caller's patch buffer.
 *
 * src/iceberg/compact/compact_lineage.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/write/write_internal.h"

#include <inttypes.h>
#include <string.h>

bool
compact_lineage_start(CompactLineage *l, const IcebergTableMetadata *md,
					  const IcebergManifestFile *mf, const char *path, const char *schema,
					  int64_t max_json, IcebergBuf *patch, TmsError *err)
{
	memset(l, 0, sizeof(*l));
	l->branch = -1;
	l->next = mf->first_row_id;
	l->manifest = path;
	l->patch = patch;
	l->on = md->format_version >= 3 && mf->content == ICEBERG_MANIFEST_CONTENT_DATA;
	return !l->on || iceberg_manifest_first_row_id_branch(schema, max_json, &l->branch, err);
}

bool
compact_lineage_entry(CompactLineage *l, const IcebergManifestEntry *e, const void **raw,
					  size_t *raw_len, TmsError *err)
{
	int64_t		inherited = l->next;

	*raw = e->raw_data_file;
	*raw_len = e->raw_data_file_len;
	if (!l->on || e->content != ICEBERG_CONTENT_DATA || e->first_row_id >= 0)
		return true;
	if (l->next >= 0)
	{
		if (e->record_count < 0 || l->next > INT64_MAX - e->record_count)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "first_row_id out of range");
			tms_error_detail(err, "Manifest \"%s\".", l->manifest);
			return false;
		}
		l->next += e->record_count;
	}
	if (e->status == ICEBERG_STATUS_DELETED)
		return true;			/* dropped from the manifest written */
	if (inherited < 0 || l->branch < 0)
	{
		l->missing = l->manifest;
		return true;
	}
	if (!iceberg_data_file_with_first_row_id(l->patch, e, l->branch, inherited, err))
		return false;
	*raw = l->patch->data;
	*raw_len = l->patch->len;
	return true;
}

bool
compact_lineage_check(const CompactLineage *l, TmsError *err)
{
	if (l->missing == NULL)
		return true;
	tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
				  "compaction does not assign row ids to a format v3 table's files");
	tms_error_detail(err, "Manifest \"%s\" has data files without first_row_id and none to inherit.",
					 l->missing);
	tms_error_hint(err, "Commit to the table once with a v3 writer (it assigns them), or compact it with an engine.");
	return false;
}

bool
compact_assign_row_ids(const IcebergTableMetadata *md, IcebergNewManifest *added, int nadded,
					   IcebergNewManifest *news, int nnews, const IcebergWriteTarget *t,
					   IcebergNewSnapshot *snap, TmsError *err)
{
	int64_t		next = t->first_row_id;

	if (md->format_version < 3)
		return true;
	if (next < 0)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "format v3 table metadata without next-row-id");
		return false;
	}
	for (int i = 0; i < nadded + nnews; i++)
	{
		IcebergNewManifest *n = i < nadded ? &added[i] : &news[i - nadded];
		int64_t		rows;

		if (n->path == NULL || n->content != ICEBERG_MANIFEST_CONTENT_DATA)
			continue;
		rows = n->added_rows + n->existing_rows;
		if (rows < 0 || next > INT64_MAX - rows)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "next-row-id out of range");
			return false;
		}
		n->has_first_row_id = true;
		n->first_row_id = next;
		next += rows;
	}
	snap->row_lineage = true;
	snap->first_row_id = t->first_row_id;
	snap->added_rows = next - t->first_row_id;
	return true;
}
