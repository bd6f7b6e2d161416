/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  The table metrics the policy DSL reads, computed level by level,
 *	  and the per-data-file stream behind countDataFiles().
 *
 * Levels (each includes the previous): METADATA reads nothing more;
 * MANIFEST_LIST reads the current snapshot's manifest list; MANIFESTS
 * reads every manifest of it; DELETES additionally decides, for every
 * live data file, whether some live delete file applies to it.
 *
 * Delete matching follows the spec's "Scan Planning" scope rules:
 *	- a position delete file (or v3 deletion vector) applies to a data
 *	  file in the same partition (spec id and values) whose data sequence
 *	  number is <= the delete's; when it names a referenced_data_file it
 *	  applies to that file only;
 *	- an equality delete file applies to a data file whose data sequence
 *	  number is < the delete's, in the same partition, or in any
 *	  partition when the delete file's spec is unpartitioned (no fields,
 *	  or only void transforms).
 * Since the question is only "does any delete apply", each partition
 * keeps just the largest position-delete and equality-delete sequence
 * numbers: a data file with sequence d has position deletes iff
 * max_pos >= d, equality deletes iff max_eq > d (or the global
 * equality maximum > d).  Referenced position deletes are kept per
 * referenced path the same way.
 *
 * Cost: pass 1 reads the delete manifests and builds the index:
 * O(delete files) time, O(partitions with deletes + referenced paths)
 * memory.  Pass 2 streams the data manifests: O(data files) time with one
 * hash probe per file, O(1) memory beyond one Avro block.  A table with
 * 1,000,000 data files and no deletes costs exactly a MANIFESTS walk
 * (partition tuples are not even rendered when the index is empty).
 *
 * src/iceberg/table/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A manifest of the current snapshot, copied out of the manifest list. */
typedef struct ManifestRef
{
	IcebergManifestFile mf;		/* manifest_path points to path below */
	char	   *path;
} ManifestRef;

/* One partition with deletes. */
typedef struct DeletePartition
{
	uint64_t	hash;
	int32_t		spec_id;
	char	   *partition;		/* NULL marks an empty slot */
	int64_t		max_pos_seq;	/* -1: none */
	int64_t		max_eq_seq;		/* -1: none */
} DeletePartition;

typedef struct DeleteIndex
{
	DeletePartition *parts;
	size_t		nparts_slots;
	size_t		nparts;
	IcebergStrMap refs;			/* data files named by position deletes'
								 * referenced_data_file -> max_pos_seq */
	int64_t		max_global_eq_seq;	/* -1: none */
} DeleteIndex;

/*
 * now_ms - then_ms as an age: 0 when then_ms is not in the past, INT64_MAX
 * when the difference does not fit in an int64_t.  Never overflows, for
 * any two values (metadata written by hand, a clock far off).
 */
static int64_t
age_ms(int64_t now_ms, int64_t then_ms)
{
	int64_t		d;

	if (now_ms <= then_ms)
		return 0;
	if (__builtin_sub_overflow(now_ms, then_ms, &d))
		return INT64_MAX;
	return d;
}

/*
 * *sum += v, saturating at INT64_MAX / INT64_MIN: sizes and record counts
 * come from manifests, and a hostile one must not overflow a total.
 */
static inline void
add_saturating(int64_t *sum, int64_t v)
{
	if (__builtin_add_overflow(*sum, v, sum))
		*sum = v < 0 ? INT64_MIN : INT64_MAX;
}

/* Grow an open-addressing table of elements with a leading uint64 hash. */
static bool
grow_parts(DeleteIndex *ix)
{
	size_t		n = ix->nparts_slots ? ix->nparts_slots * 2 : 64;
	DeletePartition *t = io_calloc(n, sizeof(DeletePartition));
	size_t		i;

	if (t == NULL)
		return false;
	for (i = 0; i < ix->nparts_slots; i++)
	{
		size_t		j;

		if (ix->parts[i].partition == NULL)
			continue;
		j = ix->parts[i].hash & (n - 1);
		while (t[j].partition != NULL)
			j = (j + 1) & (n - 1);
		t[j] = ix->parts[i];
	}
	io_free(ix->parts);
	ix->parts = t;
	ix->nparts_slots = n;
	return true;
}

/* Find (or, with create, add) the partition of an entry. */
static DeletePartition *
find_partition(DeleteIndex *ix, const IcebergManifestEntry *e, bool create,
			   bool *oom)
{
	size_t		j;

	*oom = false;
	if (ix->nparts_slots == 0)
	{
		if (!create)
			return NULL;
		if (!grow_parts(ix))
		{
			*oom = true;
			return NULL;
		}
	}
	j = e->partition_hash & (ix->nparts_slots - 1);
	while (ix->parts[j].partition != NULL)
	{
		DeletePartition *p = &ix->parts[j];

		if (p->hash == e->partition_hash && p->spec_id == e->spec_id &&
			strcmp(p->partition, e->partition) == 0)
			return p;
		j = (j + 1) & (ix->nparts_slots - 1);
	}
	if (!create)
		return NULL;
	if ((ix->nparts + 1) * 2 > ix->nparts_slots)
	{
		if (!grow_parts(ix))
		{
			*oom = true;
			return NULL;
		}
		return find_partition(ix, e, true, oom);
	}
	ix->parts[j].partition = iceberg_strdup(e->partition, NULL);
	if (ix->parts[j].partition == NULL)
	{
		*oom = true;
		return NULL;
	}
	ix->parts[j].hash = e->partition_hash;
	ix->parts[j].spec_id = e->spec_id;
	ix->parts[j].max_pos_seq = -1;
	ix->parts[j].max_eq_seq = -1;
	ix->nparts++;
	return &ix->parts[j];
}

static void
free_index(DeleteIndex *ix)
{
	size_t		i;

	for (i = 0; i < ix->nparts_slots; i++)
		io_free(ix->parts[i].partition);
	io_free(ix->parts);
	iceberg_strmap_free(&ix->refs);
	memset(ix, 0, sizeof(*ix));
}

/* Is the spec unpartitioned (no fields, or only void transforms)? */
static bool
spec_unpartitioned(const IcebergTableMetadata *md, int32_t spec_id)
{
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(md, spec_id);
	int			i;

	if (spec == NULL)
		return false;
	for (i = 0; i < spec->nfields; i++)
		if (strcmp(spec->fields[i].transform, "void") != 0)
			return false;
	return true;
}

/* Add one live delete file to the index. */
static bool
index_delete(DeleteIndex *ix, const IcebergTableMetadata *md,
			 const IcebergManifestEntry *e, TmsError *err)
{
	int64_t		seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	bool		oom;

	if (e->content == ICEBERG_CONTENT_EQUALITY_DELETES &&
		spec_unpartitioned(md, e->spec_id))
	{
		if (seq > ix->max_global_eq_seq)
			ix->max_global_eq_seq = seq;
		return true;
	}
	if (e->content == ICEBERG_CONTENT_POSITION_DELETES &&
		e->referenced_data_file != NULL)
	{
		int64_t    *max_pos_seq = iceberg_strmap_put(&ix->refs,
													 e->referenced_data_file,
													 -1, NULL);

		if (max_pos_seq == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		if (seq > *max_pos_seq)
			*max_pos_seq = seq;
		return true;
	}
	{
		DeletePartition *p = find_partition(ix, e, true, &oom);

		if (p == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		if (e->content == ICEBERG_CONTENT_POSITION_DELETES)
		{
			if (seq > p->max_pos_seq)
				p->max_pos_seq = seq;
		}
		else if (seq > p->max_eq_seq)
			p->max_eq_seq = seq;
	}
	return true;
}

/* Decide which deletes apply to a data file. */
static void
match_deletes(DeleteIndex *ix, const IcebergManifestEntry *e, bool *pos,
			  bool *eq)
{
	int64_t		seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	bool		oom;
	DeletePartition *p;

	*pos = false;
	*eq = ix->max_global_eq_seq > seq;
	p = find_partition(ix, e, false, &oom);
	if (p != NULL)
	{
		if (p->max_pos_seq >= 0 && p->max_pos_seq >= seq)
			*pos = true;
		if (p->max_eq_seq > seq)
			*eq = true;
	}
	if (!*pos && ix->refs.count > 0)
	{
		const int64_t *max_pos_seq = iceberg_strmap_get(&ix->refs, e->file_path);

		if (max_pos_seq != NULL && *max_pos_seq >= seq)
			*pos = true;
	}
}

/* Read the current snapshot's manifest list into an array. */
static bool
load_manifests(const IcebergFileIO *io, const IcebergTableMetadata *md,
			   const IcebergSnapshot *snap, ManifestRef **out, int *nout,
			   TmsError *err)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	ManifestRef *arr = NULL;
	int			n = 0;
	int			alloc = 0;
	int			rc;

	*out = NULL;
	*nout = 0;
	if (!iceberg_manifest_list_open(io, md, snap, &lr, err))
		return false;
	while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
	{
		if (n == alloc)
		{
			ManifestRef *na;

			alloc = alloc ? alloc * 2 : 16;
			na = io_realloc(arr, sizeof(ManifestRef) * (size_t) alloc);
			if (na == NULL)
			{
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				rc = -1;
				break;
			}
			arr = na;
		}
		arr[n].mf = *mf;
		arr[n].path = iceberg_strdup(mf->manifest_path, err);
		if (arr[n].path == NULL)
		{
			rc = -1;
			break;
		}
		arr[n].mf.manifest_path = arr[n].path;
		n++;
	}
	iceberg_manifest_list_close(lr);
	if (rc < 0)
	{
		while (n-- > 0)
			io_free(arr[n].path);
		io_free(arr);
		return false;
	}
	*out = arr;
	*nout = n;
	return true;
}

static void
free_manifests(ManifestRef *arr, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		io_free(arr[i].path);
	io_free(arr);
}

/*
 * Stream one manifest: accumulate counts; for data files, match deletes
 * (when ix is given) and call the file callback.
 */
static bool
scan_manifest(const IcebergFileIO *io, const IcebergTableMetadata *md,
			  const IcebergManifestFile *mf, unsigned flags, DeleteIndex *build,
			  DeleteIndex *ix, IcebergDataFileCallback cb, void *cb_arg,
			  IcebergTableMetrics *m, TmsError *err)
{
	IcebergManifestReader *mr;
	const IcebergManifestEntry *e;
	int			rc;

	if (!iceberg_manifest_open(io, mf, md->format_version, flags, &mr, err))
		return false;
	while ((rc = iceberg_manifest_next(mr, &e, err)) == 1)
	{
		if (e->status == ICEBERG_STATUS_DELETED)
			continue;
		switch (e->content)
		{
			case ICEBERG_CONTENT_DATA:
				{
					IcebergDataFileInfo fi;

					m->data_files++;
					add_saturating(&m->data_files_size, e->file_size_in_bytes);
					add_saturating(&m->data_records, e->record_count);
					fi.path = e->file_path;
					fi.size = e->file_size_in_bytes;
					fi.records = e->record_count;
					fi.has_position_deletes = fi.has_equality_deletes = false;
					if (ix != NULL)
					{
						match_deletes(ix, e, &fi.has_position_deletes,
									  &fi.has_equality_deletes);
						if (fi.has_position_deletes)
							m->data_files_with_position_deletes++;
						if (fi.has_equality_deletes)
							m->data_files_with_equality_deletes++;
						if (fi.has_position_deletes || fi.has_equality_deletes)
							m->data_files_with_deletes++;
					}
					fi.has_deletes = fi.has_position_deletes || fi.has_equality_deletes;
					if (cb != NULL && !cb(cb_arg, &fi, err))
					{
						if (err->code == ICEBERG_OK)
							tms_error_set(err, ICEBERG_ERR_CANCELLED,
										  "data file stream stopped by its callback");
						rc = -1;
					}
					break;
				}
			case ICEBERG_CONTENT_POSITION_DELETES:
				m->position_delete_files++;
				add_saturating(&m->position_delete_files_size, e->file_size_in_bytes);
				add_saturating(&m->position_delete_records, e->record_count);
				/* https://iceberg.apache.org/spec/#deletion-vectors */
				if (e->content_offset >= 0 ||
					(e->file_format != NULL && strcasecmp(e->file_format, "puffin") == 0))
				{
					m->deletion_vectors++;
					add_saturating(&m->deletion_vector_records, e->record_count);
				}
				if (build != NULL && !index_delete(build, md, e, err))
					rc = -1;
				break;
			case ICEBERG_CONTENT_EQUALITY_DELETES:
				m->equality_delete_files++;
				add_saturating(&m->equality_delete_files_size, e->file_size_in_bytes);
				add_saturating(&m->equality_delete_records, e->record_count);
				if (build != NULL && !index_delete(build, md, e, err))
					rc = -1;
				break;
		}
		if (rc < 0)
			break;
	}
	iceberg_manifest_close(mr);
	return rc == 0;
}

/*
 * iceberg_table_metrics: see iceberg.h.
 */
bool
iceberg_table_metrics(const IcebergFileIO *io, const IcebergTableMetadata *md,
					  IcebergMetricsLevel level, int64_t now_ms,
					  IcebergDataFileCallback file_callback,
					  void *file_callback_arg, IcebergTableMetrics *out,
					  TmsError *err)
{
	const IcebergSnapshot *cur;
	ManifestRef *mans = NULL;
	int			nmans = 0;
	DeleteIndex ix;
	bool		ok = true;
	int			i;
	int64_t		oldest = INT64_MAX;

	tms_error_clear(err);
	memset(out, 0, sizeof(*out));
	if (md == NULL || level < ICEBERG_METRICS_METADATA || level > ICEBERG_METRICS_DELETES)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid metrics arguments");
		return false;
	}
	if (file_callback != NULL && level < ICEBERG_METRICS_MANIFESTS)
		level = ICEBERG_METRICS_MANIFESTS;
	out->level = level;

	/* metadata */
	out->snapshots = md->nsnapshots;
	for (i = 0; i < md->nsnapshots; i++)
		if (md->snapshots[i].timestamp_ms < oldest)
			oldest = md->snapshots[i].timestamp_ms;
	out->oldest_snapshot_age_ms = md->nsnapshots > 0 ? age_ms(now_ms, oldest) : 0;
	out->time_since_last_update_ms = age_ms(now_ms, md->last_updated_ms);
	if (level == ICEBERG_METRICS_METADATA)
		return true;

	/* manifest list */
	cur = iceberg_metadata_current_snapshot(md);
	if (cur == NULL)
		return true;			/* empty table: every count is 0 */
	if (!load_manifests(io, md, cur, &mans, &nmans, err))
		return false;
	out->manifests = nmans;
	if (level == ICEBERG_METRICS_MANIFEST_LIST)
	{
		free_manifests(mans, nmans);
		return true;
	}

	/* manifests; for DELETES, delete manifests first to build the index */
	memset(&ix, 0, sizeof(ix));
	ix.max_global_eq_seq = -1;
	for (i = 0; ok && i < nmans; i++)
	{
		if (mans[i].mf.content != ICEBERG_MANIFEST_CONTENT_DELETES)
			continue;
		ok = !iceberg_check_interrupt(io, err) &&
			scan_manifest(io, md, &mans[i].mf,
						  level == ICEBERG_METRICS_DELETES ? ICEBERG_READ_PARTITION : 0,
						  level == ICEBERG_METRICS_DELETES ? &ix : NULL, NULL,
						  NULL, NULL, out, err);
	}
	for (i = 0; ok && i < nmans; i++)
	{
		bool		use_ix = level == ICEBERG_METRICS_DELETES;
		bool		need_partition = use_ix && ix.nparts > 0;

		if (mans[i].mf.content == ICEBERG_MANIFEST_CONTENT_DELETES)
			continue;
		ok = !iceberg_check_interrupt(io, err) &&
			scan_manifest(io, md, &mans[i].mf,
						  need_partition ? ICEBERG_READ_PARTITION : 0,
						  NULL, use_ix ? &ix : NULL,
						  file_callback, file_callback_arg, out, err);
	}
	free_index(&ix);
	free_manifests(mans, nmans);
	if (!ok)
		return false;
	out->avg_data_file_size = out->data_files > 0 ?
		(double) out->data_files_size / (double) out->data_files : 0.0;
	out->deleted_record_ratio = out->data_records > 0 ?
		(double) out->position_delete_records / (double) out->data_records : 0.0;
	return true;
}

/* ---------------------------------------------------------------------
 * Pull-style stream of the current snapshot's live data files
 * ---------------------------------------------------------------------
 */

struct IcebergDataFileIter
{
	const IcebergFileIO *io;
	const IcebergTableMetadata *md;
	ManifestRef *mans;
	int			nmans;
	int			next_manifest;
	bool		match;
	DeleteIndex ix;
	IcebergManifestReader *mr;
	IcebergDataFileInfo current;
	IcebergTableMetrics delete_counts;	/* filled by the index pass */
	TmsError	error;			/* the last error, for adapters */
	void	   *adapter;		/* owned by metrics_dsl.c (io_free) */
};

/*
 * iceberg_data_files_open: see iceberg.h.
 */
bool
iceberg_data_files_open(const IcebergFileIO *io, const IcebergTableMetadata *md,
						bool match_deletes, IcebergDataFileIter **out,
						TmsError *err)
{
	IcebergDataFileIter *it;
	const IcebergSnapshot *cur;
	int			i;

	tms_error_clear(err);
	*out = NULL;
	if (md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "no table metadata given");
		return false;
	}
	it = io_calloc(1, sizeof(IcebergDataFileIter));
	if (it == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	it->io = io;
	it->md = md;
	it->match = match_deletes;
	it->ix.max_global_eq_seq = -1;
	tms_error_clear(&it->error);
	cur = iceberg_metadata_current_snapshot(md);
	if (cur != NULL && !load_manifests(io, md, cur, &it->mans, &it->nmans, err))
	{
		io_free(it);
		return false;
	}
	for (i = 0; match_deletes && i < it->nmans; i++)
	{
		if (it->mans[i].mf.content != ICEBERG_MANIFEST_CONTENT_DELETES)
			continue;
		if (iceberg_check_interrupt(io, err) ||
			!scan_manifest(io, md, &it->mans[i].mf, ICEBERG_READ_PARTITION,
						   &it->ix, NULL, NULL, NULL, &it->delete_counts, err))
		{
			iceberg_data_files_close(it);
			return false;
		}
	}
	*out = it;
	return true;
}

/*
 * iceberg_data_files_next: see iceberg.h.
 */
int
iceberg_data_files_next(IcebergDataFileIter *it, const IcebergDataFileInfo **out,
						TmsError *err)
{
	const IcebergManifestEntry *e;
	int			rc;

	*out = NULL;
	for (;;)
	{
		if (it->mr == NULL)
		{
			const IcebergManifestFile *mf;

			while (it->next_manifest < it->nmans &&
				   it->mans[it->next_manifest].mf.content == ICEBERG_MANIFEST_CONTENT_DELETES)
				it->next_manifest++;
			if (it->next_manifest >= it->nmans)
				return 0;
			mf = &it->mans[it->next_manifest++].mf;
			if (iceberg_check_interrupt(it->io, err) ||
				!iceberg_manifest_open(it->io, mf, it->md->format_version,
									   it->match && it->ix.nparts > 0 ? ICEBERG_READ_PARTITION : 0,
									   &it->mr, err))
			{
				it->error = *err;
				return -1;
			}
		}
		rc = iceberg_manifest_next(it->mr, &e, err);
		if (rc < 0)
		{
			it->error = *err;
			return -1;
		}
		if (rc == 0)
		{
			iceberg_manifest_close(it->mr);
			it->mr = NULL;
			continue;
		}
		if (e->status == ICEBERG_STATUS_DELETED || e->content != ICEBERG_CONTENT_DATA)
			continue;
		it->current.path = e->file_path;
		it->current.size = e->file_size_in_bytes;
		it->current.records = e->record_count;
		it->current.has_position_deletes = it->current.has_equality_deletes = false;
		if (it->match)
			match_deletes(&it->ix, e, &it->current.has_position_deletes,
						  &it->current.has_equality_deletes);
		it->current.has_deletes = it->current.has_position_deletes ||
			it->current.has_equality_deletes;
		*out = &it->current;
		return 1;
	}
}

/* The iterator's last error (for adapters that cannot return one). */
const TmsError *
iceberg_data_files_error(const IcebergDataFileIter *it)
{
	return &it->error;
}

/* Adapter storage (see metrics_dsl.c). */
void	  **
iceberg_data_files_adapter_slot(IcebergDataFileIter *it)
{
	return &it->adapter;
}

/*
 * iceberg_data_files_close: see iceberg.h.
 */
void
iceberg_data_files_close(IcebergDataFileIter *it)
{
	if (it == NULL)
		return;
	iceberg_manifest_close(it->mr);
	free_index(&it->ix);
	free_manifests(it->mans, it->nmans);
	io_free(it->adapter);
	io_free(it);
}
