/*-------------------------------------------------------------------------
 *
 * metrics_dsl.c
 *	  Adapters from this layer's metrics and data-file stream to the
 *	  policy DSL's input types (src/dsl/dsl.h).
 *
 * Also the facts of a table that the DSL's derived variables need beyond
 * the metrics (iceberg_dsl_table_facts, iceberg_small_files_callback).
 *
 * Only dsl.h's types are used, never its functions, so src/iceberg links
 * and is tested without src/dsl.
 *
 * src/iceberg/table/metrics_dsl.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "dsl/dsl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DSL_BATCH 512

/*
 * iceberg_metrics_to_dsl: see iceberg.h.
 */
void
iceberg_metrics_to_dsl(const IcebergTableMetrics *m, struct DslMetrics *out)
{
	memset(out, 0, sizeof(*out));
	out->snapshots = m->snapshots;
	out->oldest_snapshot_age = m->oldest_snapshot_age_ms;
	out->time_since_last_update = m->time_since_last_update_ms;
	out->present = DSL_VAR_BIT(DSL_VAR_SNAPSHOTS) |
		DSL_VAR_BIT(DSL_VAR_OLDEST_SNAPSHOT_AGE) |
		DSL_VAR_BIT(DSL_VAR_TIME_SINCE_LAST_UPDATE);
	if (m->level < ICEBERG_METRICS_MANIFEST_LIST)
		return;
	out->manifests = m->manifests;
	out->present |= DSL_VAR_BIT(DSL_VAR_MANIFESTS);
	if (m->level < ICEBERG_METRICS_MANIFESTS)
		return;
	out->data_files = m->data_files;
	out->data_files_size = m->data_files_size;
	out->data_records = m->data_records;
	out->equality_delete_files = m->equality_delete_files;
	out->equality_delete_files_size = m->equality_delete_files_size;
	out->equality_delete_records = m->equality_delete_records;
	out->position_delete_files = m->position_delete_files;
	out->position_delete_files_size = m->position_delete_files_size;
	out->position_delete_records = m->position_delete_records;
	out->avg_data_file_size = m->avg_data_file_size;
	out->present |= DSL_VAR_BIT(DSL_VAR_DATA_FILES) |
		DSL_VAR_BIT(DSL_VAR_DATA_FILES_SIZE) |
		DSL_VAR_BIT(DSL_VAR_DATA_RECORDS) |
		DSL_VAR_BIT(DSL_VAR_EQUALITY_DELETE_FILES) |
		DSL_VAR_BIT(DSL_VAR_EQUALITY_DELETE_FILES_SIZE) |
		DSL_VAR_BIT(DSL_VAR_EQUALITY_DELETE_RECORDS) |
		DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_FILES) |
		DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_FILES_SIZE) |
		DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_RECORDS) |
		DSL_VAR_BIT(DSL_VAR_AVG_DATA_FILE_SIZE);
	if (m->level < ICEBERG_METRICS_DELETES)
		return;
	out->data_files_with_deletes = m->data_files_with_deletes;
	out->data_files_with_position_deletes = m->data_files_with_position_deletes;
	out->data_files_with_equality_deletes = m->data_files_with_equality_deletes;
	out->present |= DSL_VAR_BIT(DSL_VAR_DATA_FILES_WITH_DELETES) |
		DSL_VAR_BIT(DSL_VAR_DATA_FILES_WITH_POSITION_DELETES) |
		DSL_VAR_BIT(DSL_VAR_DATA_FILES_WITH_EQUALITY_DELETES);
}

/* DslProperties.get over table properties. */
static const char *
property_get_adapter(void *arg, const char *name)
{
	return iceberg_metadata_property((const IcebergTableMetadata *) arg, name);
}

/*
 * iceberg_dsl_properties: see iceberg.h.
 */
void
iceberg_dsl_properties(const IcebergTableMetadata *md, struct DslProperties *out)
{
	out->get = property_get_adapter;
	out->arg = (void *) md;
}

/* DslFileSource.next: fill a batch of up to DSL_BATCH files. */
static int
files_next_adapter(void *arg, const DslFile **files, size_t *nfiles)
{
	IcebergDataFileIter *it = arg;
	DslFile    *batch = *iceberg_data_files_adapter_slot(it);
	size_t		n = 0;
	TmsError	err;

	while (n < DSL_BATCH)
	{
		const IcebergDataFileInfo *f;
		int			rc = iceberg_data_files_next(it, &f, &err);

		if (rc < 0)
			return -1;
		if (rc == 0)
			break;
		batch[n].size = f->size;
		batch[n].records = f->records;
		batch[n].has_deletes = f->has_deletes;
		batch[n].has_position_deletes = f->has_position_deletes;
		batch[n].has_equality_deletes = f->has_equality_deletes;
		n++;
	}
	*files = batch;
	*nfiles = n;
	return n > 0 ? 1 : 0;
}

/*
 * iceberg_data_files_dsl_source: see iceberg.h.
 */
bool
iceberg_data_files_dsl_source(IcebergDataFileIter *it,
							  struct DslFileSource *out, TmsError *err)
{
	void	  **slot = iceberg_data_files_adapter_slot(it);

	if (*slot == NULL)
	{
		*slot = io_malloc(sizeof(DslFile) * DSL_BATCH);
		if (*slot == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
	}
	out->next = files_next_adapter;
	out->arg = it;
	return true;
}

#define DEFAULT_TARGET_FILE_SIZE (INT64_C(512) * 1024 * 1024)

/* A summary entry as a count or size; 0 when absent or not a number. */
static int64_t
summary_long(const IcebergSnapshot *sn, const char *key)
{
	for (int i = 0; i < sn->nsummary; i++)
		if (strcmp(sn->summary[i].key, key) == 0 && sn->summary[i].value)
		{
			char	   *end;
			long long	v;

			errno = 0;
			v = strtoll(sn->summary[i].value, &end, 10);
			if (errno != 0 || end == sn->summary[i].value || *end != '\0' || v < 0)
				return 0;
			return (int64_t) v;
		}
	return 0;
}

static int
cmp_id(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a;
	int64_t		y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

/*
 * iceberg_dsl_table_facts: see iceberg.h.  A snapshot's removals are files
 * its parent still references; they count when that parent is still in the
 * metadata (expiring it would free them).  Without memory for the sorted
 * ids the removals count 0 (an estimate, never a failure).
 */
void
iceberg_dsl_table_facts(const IcebergTableMetadata *md, int64_t target_file_size,
						struct DslTableFacts *out)
{
	const char *prop;
	int64_t    *ids;

	memset(out, 0, sizeof(*out));
	out->target_file_size = target_file_size;
	if (out->target_file_size <= 0)
	{
		prop = iceberg_metadata_property(md, "write.target-file-size-bytes");
		if (prop != NULL)
		{
			char	   *end;
			long long	v;

			errno = 0;
			v = strtoll(prop, &end, 10);
			if (errno == 0 && end != prop && *end == '\0' && v > 0)
				out->target_file_size = (int64_t) v;
		}
	}
	if (out->target_file_size <= 0)
		out->target_file_size = DEFAULT_TARGET_FILE_SIZE;
	if (md->nsnapshots < 2)
		return;
	ids = malloc(sizeof(int64_t) * (size_t) md->nsnapshots);
	if (ids == NULL)
		return;
	for (int i = 0; i < md->nsnapshots; i++)
		ids[i] = md->snapshots[i].snapshot_id;
	qsort(ids, (size_t) md->nsnapshots, sizeof(int64_t), cmp_id);
	for (int i = 0; i < md->nsnapshots; i++)
	{
		const IcebergSnapshot *sn = &md->snapshots[i];
		int64_t		files;

		if (sn->parent_snapshot_id < 0 ||
			bsearch(&sn->parent_snapshot_id, ids, (size_t) md->nsnapshots,
					sizeof(int64_t), cmp_id) == NULL)
			continue;
		files = summary_long(sn, "deleted-data-files");
		if (__builtin_add_overflow(files, summary_long(sn, "removed-delete-files"), &files) ||
			__builtin_add_overflow(out->removed_files, files, &out->removed_files))
			out->removed_files = INT64_MAX;
		if (__builtin_add_overflow(out->removed_bytes, summary_long(sn, "removed-files-size"),
								   &out->removed_bytes))
			out->removed_bytes = INT64_MAX;
	}
	free(ids);
}

/* iceberg_small_files_callback: see iceberg.h. */
bool
iceberg_small_files_callback(void *arg, const IcebergDataFileInfo *file,
							 TmsError *err)
{
	struct DslTableFacts *f = arg;

	(void) err;
	if (file->size >= f->target_file_size)
		return true;
	f->small_files++;
	if (__builtin_add_overflow(f->small_files_size, file->size, &f->small_files_size))
		f->small_files_size = INT64_MAX;
	return true;
}
