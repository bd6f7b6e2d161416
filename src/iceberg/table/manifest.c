/*-------------------------------------------------------------------------
 *
 * manifest.c
 *	  Manifest lists and manifests as streams of Iceberg records, on top
 *	  of the Avro reader (avro_*.c).
 *
 * Fields are wanted by Iceberg field id (manifest_file 500-520,
 * manifest_entry 0-4 and data_file 100-145), with the spec's names, and
 * the names older writers used, as a fallback for files whose schema has
 * no ids.  Version defaults follow the spec's "Reading v1 metadata for
 * v2"; sequence number and snapshot id inheritance follow "Sequence
 * Number Inheritance" exactly as the reference implementation applies it:
 * a null data or file sequence number is replaced by the manifest's
 * sequence number when the entry is ADDED or the manifest's sequence
 * number is 0 (v1); a null snapshot id by the manifest's
 * added_snapshot_id.  With ICEBERG_READ_BOUNDS the column metrics maps
 * (null_value_counts, lower_bounds, upper_bounds) are kept as raw spans
 * and looked up by field id on demand (iceberg_metric_bound, _count), so
 * that a reader that does not ask for them pays nothing.
 *
 * src/iceberg/table/manifest.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * Manifest lists
 * ---------------------------------------------------------------------
 */

enum
{
	ML_PATH, ML_LENGTH, ML_SPEC, ML_CONTENT, ML_SEQ, ML_MINSEQ, ML_SNAP,
	ML_ADDED, ML_EXISTING, ML_DELETED, ML_ADDED_ROWS, ML_EXISTING_ROWS,
	ML_DELETED_ROWS, ML_PARTITIONS, ML_FIRST_ROW_ID
};

static const IcebergAvroTarget manifest_file_targets[] = {
	{500, "manifest_path", NULL, ICEBERG_AVRO_SLOT_STRING, ML_PATH, NULL, 0},
	{501, "manifest_length", NULL, ICEBERG_AVRO_SLOT_LONG, ML_LENGTH, NULL, 0},
	{502, "partition_spec_id", NULL, ICEBERG_AVRO_SLOT_LONG, ML_SPEC, NULL, 0},
	{517, "content", NULL, ICEBERG_AVRO_SLOT_LONG, ML_CONTENT, NULL, 0},
	{515, "sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ML_SEQ, NULL, 0},
	{516, "min_sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ML_MINSEQ, NULL, 0},
	{503, "added_snapshot_id", NULL, ICEBERG_AVRO_SLOT_LONG, ML_SNAP, NULL, 0},
	{504, "added_files_count", "added_data_files_count", ICEBERG_AVRO_SLOT_LONG, ML_ADDED, NULL, 0},
	{505, "existing_files_count", "existing_data_files_count", ICEBERG_AVRO_SLOT_LONG, ML_EXISTING, NULL, 0},
	{506, "deleted_files_count", "deleted_data_files_count", ICEBERG_AVRO_SLOT_LONG, ML_DELETED, NULL, 0},
	{512, "added_rows_count", NULL, ICEBERG_AVRO_SLOT_LONG, ML_ADDED_ROWS, NULL, 0},
	{513, "existing_rows_count", NULL, ICEBERG_AVRO_SLOT_LONG, ML_EXISTING_ROWS, NULL, 0},
	{514, "deleted_rows_count", NULL, ICEBERG_AVRO_SLOT_LONG, ML_DELETED_ROWS, NULL, 0},
	{507, "partitions", NULL, ICEBERG_AVRO_SLOT_COUNT_ARRAY, ML_PARTITIONS, NULL, 0},
	{520, "first_row_id", NULL, ICEBERG_AVRO_SLOT_LONG, ML_FIRST_ROW_ID, NULL, 0},
};

struct IcebergManifestListReader
{
	IcebergAvroReader *avro;	/* NULL for an inline v1 list */
	const IcebergSnapshot *inline_snap;
	int			inline_pos;
	int			format_version;
	IcebergManifestFile current;
	IcebergAvroValue values[ICEBERG_AVRO_MAX_SLOTS];
};

/* Open a manifest list file; format_version 0 means "from the file". */
static bool
manifest_list_open_file(const IcebergFileIO *io, const char *path,
						int format_version, IcebergManifestListReader **out,
						TmsError *err)
{
	IcebergManifestListReader *r;
	const char *fv;

	r = io_calloc(1, sizeof(IcebergManifestListReader));
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	if (!iceberg_avro_reader_open(io, path, "manifest list", manifest_file_targets,
								  (int) (sizeof(manifest_file_targets) / sizeof(manifest_file_targets[0])),
								  &r->avro, err))
	{
		io_free(r);
		return false;
	}
	fv = iceberg_avro_reader_meta(r->avro, "format-version");
	if (fv != NULL && fv[0] >= '1' && fv[0] <= '9' && fv[1] == '\0')
		r->format_version = fv[0] - '0';
	else if (format_version > 0)
		r->format_version = format_version;
	else if (iceberg_avro_reader_has_field_id(r->avro, 520))
		r->format_version = 3;
	else if (iceberg_avro_reader_has_field_id(r->avro, 517) ||
			 iceberg_avro_reader_has_field_id(r->avro, 515))
		r->format_version = 2;
	else
		r->format_version = 1;
	*out = r;
	return true;
}

/*
 * iceberg_manifest_list_open: see iceberg.h.
 */
bool
iceberg_manifest_list_open(const IcebergFileIO *io,
						   const IcebergTableMetadata *md,
						   const IcebergSnapshot *snap,
						   IcebergManifestListReader **out, TmsError *err)
{
	IcebergManifestListReader *r;

	tms_error_clear(err);
	*out = NULL;
	if (md == NULL || snap == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "no snapshot given");
		return false;
	}
	if (snap->manifest_list != NULL)
		return manifest_list_open_file(io, snap->manifest_list,
									   md->format_version, out, err);
	r = io_calloc(1, sizeof(IcebergManifestListReader));
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	r->inline_snap = snap;
	r->format_version = 1;
	*out = r;
	return true;
}

/*
 * iceberg_manifest_list_open_path: see iceberg.h.
 */
bool
iceberg_manifest_list_open_path(const IcebergFileIO *io, const char *path,
								IcebergManifestListReader **out,
								TmsError *err)
{
	tms_error_clear(err);
	*out = NULL;
	return manifest_list_open_file(io, path, 0, out, err);
}

/* Value of an optional long slot, dflt when null or absent. */
static inline int64_t
slot_long(const IcebergAvroValue *v, int slot, int64_t dflt)
{
	return v[slot].present ? v[slot].l : dflt;
}

/*
 * The value of an optional long's raw span: the union's branch index, then
 * nothing (null: -1) or the zigzag varint of the long.
 */
static bool
raw_union_long(const uint8_t *p, size_t n, int64_t *out)
{
	size_t		i = 0;
	int			part;

	*out = -1;
	for (part = 0; part < 2 && i < n; part++)
	{
		uint64_t	u = 0;
		int			shift = 0;

		for (;;)
		{
			if (i >= n || shift > 63)
				return false;
			u |= (uint64_t) (p[i] & 0x7f) << shift;
			shift += 7;
			if (!(p[i++] & 0x80))
				break;
		}
		if (part == 1)
			*out = (int64_t) (u >> 1) ^ -(int64_t) (u & 1);
	}
	return i == n;
}

/* An int32 slot (the writer may have declared it long). */
static inline int32_t
slot_int(const IcebergAvroValue *v, int slot, int32_t dflt)
{
	int64_t		l = slot_long(v, slot, dflt);

	if (l < INT32_MIN || l > INT32_MAX)
		return dflt;
	return (int32_t) l;
}

/*
 * iceberg_manifest_list_next: see iceberg.h.
 */
int
iceberg_manifest_list_next(IcebergManifestListReader *r,
						   const IcebergManifestFile **out, TmsError *err)
{
	IcebergManifestFile *m = &r->current;
	const IcebergAvroValue *v = r->values;
	int			rc;

	*out = NULL;
	if (r->avro == NULL)
	{
		if (r->inline_pos >= r->inline_snap->nmanifests)
			return 0;
		memset(m, 0, sizeof(*m));
		m->manifest_path = r->inline_snap->manifests[r->inline_pos++];
		m->manifest_length = -1;
		m->partition_spec_id = -1;
		m->added_snapshot_id = -1;
		m->added_files_count = m->existing_files_count = m->deleted_files_count = -1;
		m->added_rows_count = m->existing_rows_count = m->deleted_rows_count = -1;
		m->npartition_summaries = -1;
		m->first_row_id = -1;
		*out = m;
		return 1;
	}
	rc = iceberg_avro_reader_next(r->avro, r->values, err);
	if (rc <= 0)
		return rc;
	if (!v[ML_PATH].present || !v[ML_LENGTH].present || !v[ML_SPEC].present ||
		!v[ML_SNAP].present)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "manifest list entry lacks a required field");
		tms_error_detail(err, "manifest_path, manifest_length, partition_spec_id and added_snapshot_id are required.");
		return -1;
	}
	if (r->format_version >= 2 &&
		(!v[ML_CONTENT].present || !v[ML_SEQ].present))
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "v2 manifest list entry lacks content or sequence_number");
		tms_error_detail(err, "The entry is for manifest \"%s\".", v[ML_PATH].s);
		return -1;
	}
	m->manifest_path = v[ML_PATH].s;
	m->manifest_length = v[ML_LENGTH].l;
	m->partition_spec_id = slot_int(v, ML_SPEC, 0);
	m->content = slot_int(v, ML_CONTENT, 0);
	if (m->content != ICEBERG_MANIFEST_CONTENT_DATA &&
		m->content != ICEBERG_MANIFEST_CONTENT_DELETES)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "invalid manifest content %d in manifest list", m->content);
		tms_error_detail(err, "The entry is for manifest \"%s\".", m->manifest_path);
		return -1;
	}
	m->sequence_number = slot_long(v, ML_SEQ, 0);
	m->min_sequence_number = slot_long(v, ML_MINSEQ, 0);
	m->added_snapshot_id = v[ML_SNAP].l;
	m->added_files_count = slot_int(v, ML_ADDED, -1);
	m->existing_files_count = slot_int(v, ML_EXISTING, -1);
	m->deleted_files_count = slot_int(v, ML_DELETED, -1);
	m->added_rows_count = slot_long(v, ML_ADDED_ROWS, -1);
	m->existing_rows_count = slot_long(v, ML_EXISTING_ROWS, -1);
	m->deleted_rows_count = slot_long(v, ML_DELETED_ROWS, -1);
	m->npartition_summaries = slot_int(v, ML_PARTITIONS, -1);
	m->first_row_id = slot_long(v, ML_FIRST_ROW_ID, -1);
	iceberg_avro_reader_last_raw(r->avro, &m->raw, &m->raw_len);
	*out = m;
	return 1;
}

int
iceberg_manifest_list_format_version(const IcebergManifestListReader *r)
{
	return r->format_version;
}

const char *
iceberg_manifest_list_header(const IcebergManifestListReader *r, const char *key)
{
	return r->avro != NULL ? iceberg_avro_reader_meta(r->avro, key) : NULL;
}

int
iceberg_manifest_list_header_all(const IcebergManifestListReader *r,
								 const IcebergKeyValue **kv)
{
	*kv = NULL;
	return r->avro != NULL ? iceberg_avro_reader_meta_all(r->avro, kv) : 0;
}

void
iceberg_manifest_list_close(IcebergManifestListReader *r)
{
	if (r == NULL)
		return;
	iceberg_avro_reader_close(r->avro);
	io_free(r);
}

/* ---------------------------------------------------------------------
 * Manifests
 * ---------------------------------------------------------------------
 */

enum
{
	ME_STATUS, ME_SNAP, ME_SEQ, ME_FILE_SEQ, DF_CONTENT, DF_PATH, DF_FORMAT,
	DF_PARTITION, DF_RECORDS, DF_SIZE, DF_EQ_IDS, DF_REF_FILE, DF_FIRST_ROW_ID,
	DF_CONTENT_OFFSET, DF_CONTENT_SIZE, DF_RAW, DF_RAW_FIRST_ROW_ID,
	DF_NULL_COUNTS, DF_LOWER, DF_UPPER
};

/* data_file_targets' index of first_row_id (a raw span with ICEBERG_READ_RAW) */
#define DF_TARGET_FIRST_ROW_ID 7

#define N_DATA_FILE_TARGETS 11
static const IcebergAvroTarget data_file_targets[N_DATA_FILE_TARGETS] = {
	{134, "content", NULL, ICEBERG_AVRO_SLOT_LONG, DF_CONTENT, NULL, 0},
	{100, "file_path", NULL, ICEBERG_AVRO_SLOT_STRING, DF_PATH, NULL, 0},
	{101, "file_format", NULL, ICEBERG_AVRO_SLOT_STRING, DF_FORMAT, NULL, 0},
	{103, "record_count", NULL, ICEBERG_AVRO_SLOT_LONG, DF_RECORDS, NULL, 0},
	{104, "file_size_in_bytes", NULL, ICEBERG_AVRO_SLOT_LONG, DF_SIZE, NULL, 0},
	{135, "equality_ids", NULL, ICEBERG_AVRO_SLOT_INT_ARRAY, DF_EQ_IDS, NULL, 0},
	{143, "referenced_data_file", NULL, ICEBERG_AVRO_SLOT_STRING, DF_REF_FILE, NULL, 0},
	{142, "first_row_id", NULL, ICEBERG_AVRO_SLOT_LONG, DF_FIRST_ROW_ID, NULL, 0},
	{144, "content_offset", NULL, ICEBERG_AVRO_SLOT_LONG, DF_CONTENT_OFFSET, NULL, 0},
	{145, "content_size_in_bytes", NULL, ICEBERG_AVRO_SLOT_LONG, DF_CONTENT_SIZE, NULL, 0},
	/* last, so that it can be left out */
	{102, "partition", NULL, ICEBERG_AVRO_SLOT_PARTITION, DF_PARTITION, NULL, 0},
};

/* the column metrics ICEBERG_READ_BOUNDS adds, as raw spans */
#define N_BOUNDS_TARGETS 3
static const IcebergAvroTarget bounds_targets[N_BOUNDS_TARGETS] = {
	{110, "null_value_counts", NULL, ICEBERG_AVRO_SLOT_RAW, DF_NULL_COUNTS, NULL, 0},
	{125, "lower_bounds", NULL, ICEBERG_AVRO_SLOT_RAW, DF_LOWER, NULL, 0},
	{128, "upper_bounds", NULL, ICEBERG_AVRO_SLOT_RAW, DF_UPPER, NULL, 0},
};

static const IcebergAvroTarget entry_targets_with_partition[] = {
	{0, "status", NULL, ICEBERG_AVRO_SLOT_LONG, ME_STATUS, NULL, 0},
	{1, "snapshot_id", NULL, ICEBERG_AVRO_SLOT_LONG, ME_SNAP, NULL, 0},
	{3, "sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ME_SEQ, NULL, 0},
	{4, "file_sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ME_FILE_SEQ, NULL, 0},
	{2, "data_file", NULL, ICEBERG_AVRO_SLOT_LONG, -1, data_file_targets, N_DATA_FILE_TARGETS},
};

static const IcebergAvroTarget entry_targets_no_partition[] = {
	{0, "status", NULL, ICEBERG_AVRO_SLOT_LONG, ME_STATUS, NULL, 0},
	{1, "snapshot_id", NULL, ICEBERG_AVRO_SLOT_LONG, ME_SNAP, NULL, 0},
	{3, "sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ME_SEQ, NULL, 0},
	{4, "file_sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, ME_FILE_SEQ, NULL, 0},
	{2, "data_file", NULL, ICEBERG_AVRO_SLOT_LONG, -1, data_file_targets, N_DATA_FILE_TARGETS - 1},
};

struct IcebergManifestReader
{
	IcebergAvroReader *avro;
	unsigned	flags;
	int			format_version;
	int32_t		spec_id;
	int32_t		content;
	int64_t		sequence_number;	/* to inherit */
	int64_t		snapshot_id;	/* to inherit */
	char		path[256];
	IcebergAvroTarget targets[5];	/* with ICEBERG_READ_RAW or _BOUNDS */
	IcebergAvroTarget df_targets[N_DATA_FILE_TARGETS + N_BOUNDS_TARGETS];	/* likewise */
	IcebergManifestEntry current;
	IcebergAvroValue values[ICEBERG_AVRO_MAX_SLOTS];
};

/* Parse a small non-negative decimal, -1 when not one. */
static int64_t
parse_small_int(const char *s)
{
	int64_t		v = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s; s++)
	{
		if (*s < '0' || *s > '9' || v > INT32_MAX / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/*
 * iceberg_manifest_open: see iceberg.h.
 */
bool
iceberg_manifest_open(const IcebergFileIO *io, const IcebergManifestFile *mf,
					  int format_version, unsigned flags,
					  IcebergManifestReader **out, TmsError *err)
{
	IcebergManifestReader *r;
	const IcebergAvroTarget *targets;
	const char *content;
	int64_t		spec;

	tms_error_clear(err);
	*out = NULL;
	if (mf == NULL || mf->manifest_path == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "no manifest given");
		return false;
	}
	r = io_calloc(1, sizeof(IcebergManifestReader));
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	targets = (flags & ICEBERG_READ_PARTITION) ? entry_targets_with_partition
		: entry_targets_no_partition;
	if (flags & (ICEBERG_READ_RAW | ICEBERG_READ_BOUNDS))
	{
		int			ndf = targets[4].nchildren;

		memcpy(r->targets, targets, sizeof(r->targets));
		memcpy(r->df_targets, data_file_targets, sizeof(IcebergAvroTarget) * (size_t) ndf);
		if (flags & ICEBERG_READ_RAW)
		{
			/* data_file decoded as usual, its span recorded too */
			r->targets[4].kind = ICEBERG_AVRO_SLOT_RAW;
			r->targets[4].slot = DF_RAW;
			/* and first_row_id's span, so that a rewrite can write it out */
			r->df_targets[DF_TARGET_FIRST_ROW_ID].kind = ICEBERG_AVRO_SLOT_RAW;
			r->df_targets[DF_TARGET_FIRST_ROW_ID].slot = DF_RAW_FIRST_ROW_ID;
		}
		if (flags & ICEBERG_READ_BOUNDS)
		{
			memcpy(&r->df_targets[ndf], bounds_targets, sizeof(bounds_targets));
			ndf += N_BOUNDS_TARGETS;
		}
		r->targets[4].children = r->df_targets;
		r->targets[4].nchildren = ndf;
		targets = r->targets;
	}
	if (!iceberg_avro_reader_open(io, mf->manifest_path, "manifest", targets, 5,
								  &r->avro, err))
	{
		io_free(r);
		return false;
	}
	r->flags = flags;
	r->format_version = format_version;
	snprintf(r->path, sizeof(r->path), "%s", mf->manifest_path);
	spec = parse_small_int(iceberg_avro_reader_meta(r->avro, "partition-spec-id"));
	r->spec_id = mf->partition_spec_id >= 0 ? mf->partition_spec_id
		: (spec >= 0 ? (int32_t) spec : 0);
	content = iceberg_avro_reader_meta(r->avro, "content");
	if (content != NULL && strcmp(content, "deletes") == 0)
		r->content = ICEBERG_MANIFEST_CONTENT_DELETES;
	else if (content != NULL && strcmp(content, "data") == 0)
		r->content = ICEBERG_MANIFEST_CONTENT_DATA;
	else
		r->content = mf->content;
	r->sequence_number = mf->sequence_number;
	r->snapshot_id = mf->added_snapshot_id;
	*out = r;
	return true;
}

/* Fail an entry: malformed, naming the manifest. */
static int
entry_error(IcebergManifestReader *r, TmsError *err, const char *msg)
{
	tms_error_set(err, ICEBERG_ERR_MALFORMED, "%s", msg);
	tms_error_detail(err, "The manifest is \"%s\".", r->path);
	return -1;
}

/*
 * iceberg_manifest_next: see iceberg.h.
 */
int
iceberg_manifest_next(IcebergManifestReader *r,
					  const IcebergManifestEntry **out, TmsError *err)
{
	IcebergManifestEntry *e = &r->current;
	const IcebergAvroValue *v = r->values;
	int			rc;

	*out = NULL;
	rc = iceberg_avro_reader_next(r->avro, r->values, err);
	if (rc <= 0)
		return rc;
	if (!v[ME_STATUS].present || !v[DF_PATH].present ||
		!v[DF_RECORDS].present || !v[DF_SIZE].present)
		return entry_error(r, err, "manifest entry lacks a required field");
	e->status = slot_int(v, ME_STATUS, -1);
	if (e->status < ICEBERG_STATUS_EXISTING || e->status > ICEBERG_STATUS_DELETED)
		return entry_error(r, err, "invalid manifest entry status");
	e->snapshot_id = slot_long(v, ME_SNAP, r->snapshot_id);
	e->sequence_number = slot_long(v, ME_SEQ, -1);
	e->file_sequence_number = slot_long(v, ME_FILE_SEQ, -1);
	if (r->format_version <= 1 && !v[ME_SEQ].present)
		e->sequence_number = 0;
	if (r->format_version <= 1 && !v[ME_FILE_SEQ].present)
		e->file_sequence_number = 0;
	if (r->sequence_number == 0 || e->status == ICEBERG_STATUS_ADDED)
	{
		if (!v[ME_SEQ].present)
			e->sequence_number = r->sequence_number;
		if (!v[ME_FILE_SEQ].present)
			e->file_sequence_number = r->sequence_number;
	}
	e->content = slot_int(v, DF_CONTENT, ICEBERG_CONTENT_DATA);
	if (e->content < ICEBERG_CONTENT_DATA ||
		e->content > ICEBERG_CONTENT_EQUALITY_DELETES)
		return entry_error(r, err, "invalid data file content");
	e->file_path = v[DF_PATH].s;
	e->file_format = v[DF_FORMAT].present ? v[DF_FORMAT].s : "";
	e->spec_id = r->spec_id;
	if (v[DF_PARTITION].present)
	{
		e->partition = v[DF_PARTITION].s;
		e->partition_len = v[DF_PARTITION].slen;
		e->partition_hash = iceberg_hash_bytes(
											   iceberg_hash_bytes(ICEBERG_HASH_INIT, &e->spec_id, sizeof(e->spec_id)),
											   e->partition, e->partition_len);
	}
	else
	{
		e->partition = "";
		e->partition_len = 0;
		e->partition_hash = 0;
	}
	e->record_count = v[DF_RECORDS].l;
	e->file_size_in_bytes = v[DF_SIZE].l;
	e->nequality_ids = v[DF_EQ_IDS].present ? v[DF_EQ_IDS].nints : 0;
	e->equality_ids = e->nequality_ids > 0 ? v[DF_EQ_IDS].ints : NULL;
	e->referenced_data_file = v[DF_REF_FILE].present ? v[DF_REF_FILE].s : NULL;
	e->first_row_id = slot_long(v, DF_FIRST_ROW_ID, -1);
	e->content_offset = slot_long(v, DF_CONTENT_OFFSET, -1);
	e->content_size_in_bytes = slot_long(v, DF_CONTENT_SIZE, -1);
	e->null_value_counts = NULL;
	e->null_value_counts_len = 0;
	e->lower_bounds = NULL;
	e->lower_bounds_len = 0;
	e->upper_bounds = NULL;
	e->upper_bounds_len = 0;
	if (r->flags & ICEBERG_READ_BOUNDS)
	{
		if (v[DF_NULL_COUNTS].present)
		{
			e->null_value_counts = (const uint8_t *) v[DF_NULL_COUNTS].s;
			e->null_value_counts_len = v[DF_NULL_COUNTS].slen;
		}
		if (v[DF_LOWER].present)
		{
			e->lower_bounds = (const uint8_t *) v[DF_LOWER].s;
			e->lower_bounds_len = v[DF_LOWER].slen;
		}
		if (v[DF_UPPER].present)
		{
			e->upper_bounds = (const uint8_t *) v[DF_UPPER].s;
			e->upper_bounds_len = v[DF_UPPER].slen;
		}
	}
	if (r->flags & ICEBERG_READ_RAW)
	{
		if (!v[DF_RAW].present)
			return entry_error(r, err, "manifest entry lacks data_file");
		e->raw_data_file = (const uint8_t *) v[DF_RAW].s;
		e->raw_data_file_len = v[DF_RAW].slen;
		e->raw_first_row_id_off = 0;
		e->raw_first_row_id_len = 0;
		if (v[DF_RAW_FIRST_ROW_ID].present)
		{
			const uint8_t *p = (const uint8_t *) v[DF_RAW_FIRST_ROW_ID].s;
			size_t		n = v[DF_RAW_FIRST_ROW_ID].slen;

			if (p < e->raw_data_file || p + n > e->raw_data_file + e->raw_data_file_len)
				return entry_error(r, err, "first_row_id outside its data_file");
			e->raw_first_row_id_off = (size_t) (p - e->raw_data_file);
			e->raw_first_row_id_len = n;
			if (!raw_union_long(p, n, &e->first_row_id))
				return entry_error(r, err, "invalid first_row_id");
		}
	}
	*out = e;
	return 1;
}

const char *
iceberg_manifest_header(const IcebergManifestReader *r, const char *key)
{
	return iceberg_avro_reader_meta(r->avro, key);
}

int
iceberg_manifest_header_all(const IcebergManifestReader *r,
							const IcebergKeyValue **kv)
{
	return iceberg_avro_reader_meta_all(r->avro, kv);
}

int32_t
iceberg_manifest_spec_id(const IcebergManifestReader *r)
{
	return r->spec_id;
}

int32_t
iceberg_manifest_content(const IcebergManifestReader *r)
{
	return r->content;
}

void
iceberg_manifest_byte_counts(const IcebergManifestReader *r, int64_t *compressed,
							 int64_t *inflated)
{
	iceberg_avro_reader_byte_counts(r->avro, compressed, inflated);
}

void
iceberg_manifest_close(IcebergManifestReader *r)
{
	if (r == NULL)
		return;
	iceberg_avro_reader_close(r->avro);
	io_free(r);
}

/* ---------------------------------------------------------------------
 * Column metrics (ICEBERG_READ_BOUNDS)
 * ---------------------------------------------------------------------
 */

/* A zigzag varint at p[*i .. n); false when truncated or overlong. */
static bool
metric_varint(const uint8_t *p, size_t n, size_t *i, int64_t *out)
{
	uint64_t	u = 0;
	int			shift = 0;

	for (;;)
	{
		if (*i >= n || shift > 63)
			return false;
		u |= (uint64_t) (p[*i] & 0x7f) << shift;
		shift += 7;
		if (!(p[(*i)++] & 0x80))
			break;
	}
	*out = (int64_t) (u >> 1) ^ -(int64_t) (u & 1);
	return true;
}

/*
 * Look field_id up in an optional map span: Iceberg writes the map as an
 * array of key/value records (blocks of items, a negative count followed
 * by the block's byte size, a zero count ending it).  bytes: the values
 * are byte strings (bounds), else longs (counts).
 */
static int
metric_lookup(const uint8_t *span, size_t len, int32_t field_id, bool bytes,
			  const uint8_t **val, size_t *vlen, int64_t *count)
{
	size_t		i = 0;
	int64_t		branch;
	int			found = 0;

	if (span == NULL || len == 0)
		return 0;
	if (!metric_varint(span, len, &i, &branch) || branch < 0 || branch > 1)
		return -1;
	if (i == len)
		return 0;				/* the null branch */
	for (;;)
	{
		int64_t		items;

		if (!metric_varint(span, len, &i, &items))
			return -1;
		if (items == 0)
			break;
		if (items < 0)
		{
			int64_t		size;

			if (items == INT64_MIN || !metric_varint(span, len, &i, &size) || size < 0)
				return -1;
			items = -items;
		}
		for (; items > 0; items--)
		{
			int64_t		key,
						v;

			if (!metric_varint(span, len, &i, &key) || !metric_varint(span, len, &i, &v))
				return -1;
			if (bytes)
			{
				if (v < 0 || (uint64_t) v > len - i)
					return -1;
				if (key == field_id && !found)
				{
					*val = span + i;
					*vlen = (size_t) v;
					found = 1;
				}
				i += (size_t) v;
			}
			else if (key == field_id && !found)
			{
				*count = v;
				found = 1;
			}
		}
	}
	return i == len ? found : -1;
}

int
iceberg_metric_bound(const uint8_t *span, size_t len, int32_t field_id,
					 const uint8_t **val, size_t *vlen)
{
	*val = NULL;
	*vlen = 0;
	return metric_lookup(span, len, field_id, true, val, vlen, NULL);
}

int
iceberg_metric_count(const uint8_t *span, size_t len, int32_t field_id, int64_t *count)
{
	*count = -1;
	return metric_lookup(span, len, field_id, false, NULL, NULL, count);
}
