/*-------------------------------------------------------------------------
 *
 * walk.c
 *	  The reachable-file walk: every file a set of snapshots references,
 *	  delivered to a callback as a stream.
 *
 * Order: metadata files; then per selected snapshot (in metadata order)
 * its manifest list, and each of its manifests not seen before followed
 * by that manifest's content files; then statistics files.  Memory is one
 * Avro block at a time plus the set of manifest paths already walked,
 * which is what makes a manifest shared by many snapshots cost one read.
 *
 * Which entries count: by default only live entries (EXISTING, ADDED).
 * A DELETED entry records that a snapshot removed the file; the file is
 * still reachable from older snapshots until those expire, and it belongs
 * to the table.  So purge (dropTableData in the reference implementation
 * reads every manifest of every snapshot) must delete it too, while
 * expire-snapshots must never treat it as reachable on account of the
 * kept snapshots: ICEBERG_WALK_INCLUDE_DELETED chooses.
 *
 * src/iceberg/table/walk.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"

#include <stdlib.h>
#include <string.h>

const char *
iceberg_file_kind_name(IcebergFileKind kind)
{
	switch (kind)
	{
		case ICEBERG_FILE_METADATA:
			return "metadata";
		case ICEBERG_FILE_MANIFEST_LIST:
			return "manifest-list";
		case ICEBERG_FILE_MANIFEST:
			return "manifest";
		case ICEBERG_FILE_DATA:
			return "data";
		case ICEBERG_FILE_POSITION_DELETES:
			return "position-deletes";
		case ICEBERG_FILE_EQUALITY_DELETES:
			return "equality-deletes";
		case ICEBERG_FILE_STATISTICS:
			return "statistics";
		case ICEBERG_FILE_PARTITION_STATISTICS:
			return "partition-statistics";
	}
	return "unknown";
}

typedef struct Walk
{
	const IcebergFileIO *io;
	const IcebergTableMetadata *md;
	unsigned	flags;
	IcebergWalkCallback cb;
	void	   *arg;
	TmsError   *err;
	IcebergStrMap seen;			/* manifest paths walked */
} Walk;

/* Deliver one file; false ends the walk with err set. */
static bool
emit(Walk *w, IcebergFileKind kind, const char *path, int64_t size,
	 int64_t snapshot_id, int32_t status)
{
	IcebergWalkFile f;

	f.kind = kind;
	f.path = path;
	f.size = size;
	f.snapshot_id = snapshot_id;
	f.status = status;
	if (w->cb(w->arg, &f, w->err))
		return true;
	if (w->err->code == ICEBERG_OK)
		tms_error_set(w->err, ICEBERG_ERR_CANCELLED, "walk stopped by its callback");
	return false;
}

/* Walk one manifest's content files. */
static bool
walk_manifest(Walk *w, const IcebergManifestFile *mf, int64_t snapshot_id)
{
	IcebergManifestReader *mr;
	const IcebergManifestEntry *e;
	int			rc;

	if (!iceberg_manifest_open(w->io, mf, w->md->format_version, 0, &mr, w->err))
		return false;
	while ((rc = iceberg_manifest_next(mr, &e, w->err)) == 1)
	{
		IcebergFileKind kind;

		if (e->status == ICEBERG_STATUS_DELETED &&
			!(w->flags & ICEBERG_WALK_INCLUDE_DELETED))
			continue;
		kind = e->content == ICEBERG_CONTENT_DATA ? ICEBERG_FILE_DATA
			: e->content == ICEBERG_CONTENT_POSITION_DELETES
			? ICEBERG_FILE_POSITION_DELETES : ICEBERG_FILE_EQUALITY_DELETES;
		if (!emit(w, kind, e->file_path, e->file_size_in_bytes, snapshot_id,
				  e->status))
		{
			rc = -1;
			break;
		}
	}
	iceberg_manifest_close(mr);
	return rc == 0;
}

/* Walk one snapshot: manifest list, new manifests, their content. */
static bool
walk_snapshot(Walk *w, const IcebergSnapshot *s)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	int			rc;

	if ((w->flags & ICEBERG_WALK_MANIFEST_LISTS) && s->manifest_list != NULL &&
		!emit(w, ICEBERG_FILE_MANIFEST_LIST, s->manifest_list, -1,
			  s->snapshot_id, -1))
		return false;
	if (!(w->flags & (ICEBERG_WALK_MANIFESTS | ICEBERG_WALK_CONTENT_FILES)))
		return true;
	if (!iceberg_manifest_list_open(w->io, w->md, s, &lr, w->err))
		return false;
	while ((rc = iceberg_manifest_list_next(lr, &mf, w->err)) == 1)
	{
		bool		added;

		if (iceberg_check_interrupt(w->io, w->err))
		{
			rc = -1;
			break;
		}
		if (iceberg_strmap_put(&w->seen, mf->manifest_path, 0, &added) == NULL)
		{
			tms_error_set(w->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			rc = -1;
			break;
		}
		if (!added)
			continue;
		if ((w->flags & ICEBERG_WALK_MANIFESTS) &&
			!emit(w, ICEBERG_FILE_MANIFEST, mf->manifest_path,
				  mf->manifest_length, s->snapshot_id, -1))
		{
			rc = -1;
			break;
		}
		if ((w->flags & ICEBERG_WALK_CONTENT_FILES) &&
			!walk_manifest(w, mf, s->snapshot_id))
		{
			rc = -1;
			break;
		}
	}
	iceberg_manifest_list_close(lr);
	return rc == 0;
}

/* Is snapshot id selected? (n < 0: all) */
static bool
selected(const int64_t *ids, int n, int64_t id)
{
	int			i;

	if (n < 0)
		return true;
	for (i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/*
 * iceberg_walk: see iceberg.h.
 */
bool
iceberg_walk(const IcebergFileIO *io, const IcebergTableMetadata *md,
			 const char *metadata_location, const int64_t *snapshot_ids,
			 int nsnapshot_ids, unsigned flags, IcebergWalkCallback callback,
			 void *callback_arg, TmsError *err)
{
	Walk		w;
	int			i;
	bool		ok = true;

	tms_error_clear(err);
	if (md == NULL || callback == NULL || (nsnapshot_ids > 0 && snapshot_ids == NULL))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid walk arguments");
		return false;
	}
	for (i = 0; i < nsnapshot_ids; i++)
		if (iceberg_metadata_snapshot(md, snapshot_ids[i]) == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_NOT_FOUND, "snapshot %lld not found",
						  (long long) snapshot_ids[i]);
			tms_error_detail(err, "The table metadata has no snapshot with that id.");
			return false;
		}
	memset(&w, 0, sizeof(w));
	w.io = io;
	w.md = md;
	w.flags = flags;
	w.cb = callback;
	w.arg = callback_arg;
	w.err = err;

	if (flags & ICEBERG_WALK_METADATA_FILES)
	{
		if (metadata_location != NULL &&
			!emit(&w, ICEBERG_FILE_METADATA, metadata_location, -1, -1, -1))
			return false;
		for (i = 0; i < md->nmetadata_log; i++)
			if (!emit(&w, ICEBERG_FILE_METADATA, md->metadata_log[i].metadata_file,
					  -1, -1, -1))
				return false;
	}
	for (i = 0; ok && i < md->nsnapshots; i++)
	{
		if (!selected(snapshot_ids, nsnapshot_ids, md->snapshots[i].snapshot_id))
			continue;
		if (iceberg_check_interrupt(io, err))
			ok = false;
		else
			ok = walk_snapshot(&w, &md->snapshots[i]);
	}
	iceberg_strmap_free(&w.seen);
	if (!ok)
		return false;
	if (flags & ICEBERG_WALK_STATISTICS)
	{
		for (i = 0; i < md->nstatistics; i++)
			if (selected(snapshot_ids, nsnapshot_ids, md->statistics[i].snapshot_id) &&
				!emit(&w, ICEBERG_FILE_STATISTICS, md->statistics[i].path,
					  md->statistics[i].file_size_in_bytes,
					  md->statistics[i].snapshot_id, -1))
				return false;
		for (i = 0; i < md->npartition_statistics; i++)
			if (selected(snapshot_ids, nsnapshot_ids,
						 md->partition_statistics[i].snapshot_id) &&
				!emit(&w, ICEBERG_FILE_PARTITION_STATISTICS,
					  md->partition_statistics[i].path,
					  md->partition_statistics[i].file_size_in_bytes,
					  md->partition_statistics[i].snapshot_id, -1))
				return false;
	}
	return true;
}
