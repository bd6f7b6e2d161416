/*-------------------------------------------------------------------------
 *
 * compact_commit.c
 *	  Data file compaction, the plain-C half, part two: the commit of one
 *	  rewritten group (its manifests, manifest list and summary) and the
 *	  update of the plan once it landed (compact.h states the semantics,
 *	  the refusals and the memory bounds; compact_plan.c holds the plan).
 *
 * A row delta (compact.h's row_delta): the group files must be live but
 * stay as they are, the outputs are added as a plan of position deletes
 * adds them, no delete file is removed; on v3 the outputs are deletion
 * vectors and each replaces the deletes of its data file it merged
 * (compact_dv_replaced): the old deletion vector, matched by its Puffin
 * file and content_offset, becomes a DELETED entry in the same commit.
 *
 * A plan of position deletes (rewrite_content, posdel.h): the group files
 * are delete files, removed from the delete manifests; the outputs are
 * added in a delete manifest as position delete files with the new
 * snapshot's sequence number and the metrics iceberg_posdel_metric_kept
 * keeps; posdel.h's check of the data files pointed at runs first; the
 * summary counts delete files.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path; nothing here runs the rewrite of the
 * rows, commits, retries or deletes.  Manifests are read with the
 * layer's streaming readers; entries carried into a rewritten manifest
 * keep their data_file bytes (ICEBERG_READ_RAW); the new data files'
 * entries are encoded from values by field id (avro_write.c) in the
 * manifest schema of the spec (Iceberg's, with the partition record of
 * the manifests the files came from).
 *
 * src/iceberg/compact/compact_commit.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/compact/posdel.h"
#include "iceberg/write/write_internal.h"
#include "io/util/jsonmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * The commit of one group
 * ---------------------------------------------------------------------
 */

void
iceberg_compact_commit_free(IcebergCompactCommit *res)
{
	int			i;

	if (res == NULL)
		return;
	iceberg_write_result_free(res->written, res->nwritten, &res->snapshot);
	for (i = 0; i < res->nreplaced; i++)
	{
		io_free(res->replaced_old[i]);
		io_free(res->replaced_new[i]);
	}
	io_free(res->replaced_old);
	io_free(res->replaced_new);
	io_free(res->removed);
	memset(res, 0, sizeof(*res));
}

/* A manifest being written, with its list record's counts and summaries. */
typedef struct MOut
{
	IcebergAvroWriter *w;
	IcebergPartType *types;
	int			ntypes;
	IcebergPartSum *sums;
	bool		bad;
	IcebergBuf	tmp;
	IcebergNewManifest n;
	int64_t		min_seq;
} MOut;

static void
mout_free(MOut *o)
{
	iceberg_avro_writer_free(o->w);
	io_free(o->types);
	iceberg_part_sums_free(o->sums, o->ntypes > 0 ? o->ntypes : 0);
	iceberg_buf_free(&o->tmp);
	iceberg_new_manifest_free(&o->n);
	memset(o, 0, sizeof(*o));
}

static bool
mout_start(MOut *o, const char *schema, const IcebergKeyValue *meta, int nmeta,
		   int codec, int level, int64_t max_json, int32_t spec_id, int32_t content,
		   TmsError *err)
{
	memset(o, 0, sizeof(*o));
	o->n.nsumm = -1;
	o->n.spec_id = spec_id;
	o->n.content = content;
	o->min_seq = INT64_MAX;
	if (!iceberg_avro_writer_create(schema, meta, nmeta, codec, level, max_json, &o->w, err) ||
		!iceberg_partition_types(schema, max_json, &o->types, &o->ntypes, err))
		return false;
	o->bad = o->ntypes < 0;
	if (o->ntypes > 0 && (o->sums = io_calloc((size_t) o->ntypes, sizeof(IcebergPartSum))) == NULL)
		return compact_oom(err);
	return true;
}

/* Count an entry written (status, its partition text, records, data seq). */
static bool
mout_note(MOut *o, int status, const char *part, size_t part_len, int64_t records,
		  int64_t seq, TmsError *err)
{
	if (status == ICEBERG_STATUS_DELETED)
	{
		o->n.deleted_files++;
		o->n.deleted_rows += records;
	}
	else
	{
		if (status == ICEBERG_STATUS_ADDED)
		{
			o->n.added_files++;
			o->n.added_rows += records;
		}
		else
		{
			o->n.existing_files++;
			o->n.existing_rows += records;
		}
		if (seq >= 0 && seq < o->min_seq)
			o->min_seq = seq;
	}
	if (!o->bad && o->ntypes > 0 &&
		!iceberg_part_sum_add(o->sums, o->types, o->ntypes, part, part_len, &o->tmp, &o->bad))
		return compact_oom(err);
	return true;
}

/* Finish, write at path (noted in written), fill the list record. */
static bool
mout_finish(MOut *o, const IcebergWriter *wr, const char *path, int64_t new_seq,
			char ***written, int *nwritten, TmsError *err)
{
	const uint8_t *data;
	size_t		len;

	if (!iceberg_avro_writer_finish(o->w, &data, &len, err))
		return false;
	o->n.path = iceberg_strdup(path, err);
	if (o->n.path == NULL)
		return false;
	o->n.length = (int64_t) len;
	o->n.min_seq = o->min_seq == INT64_MAX ? new_seq : o->min_seq;
	if (!iceberg_new_manifest_summaries(&o->n, o->types, o->ntypes, o->sums, o->bad, err))
		return false;
	return iceberg_write_object(wr, written, nwritten, path, data, len, err);
}

/* Copy a reader's header (without avro.*) into a new array with room for extra. */
static bool
copy_header(IcebergManifestReader *r, int extra, IcebergKeyValue **out, int *nout,
			TmsError *err)
{
	const IcebergKeyValue *kv;
	int			n = iceberg_manifest_header_all(r, &kv);
	int			i;

	*nout = 0;
	*out = io_calloc((size_t) (n + extra + 1), sizeof(IcebergKeyValue));
	if (*out == NULL)
		return compact_oom(err);
	for (i = 0; i < n; i++)
		if (strncmp(kv[i].key, "avro.", 5) != 0 &&
			!iceberg_kv_set(*out, nout, kv[i].key, kv[i].value, true, err))
			return false;
	return true;
}


/* A map<int, long> field of counts (AVW_ARRAY of key/value records). */
typedef struct MapField
{
	IcebergAvroWValue *items;
	IcebergAvroWField *kv;
	int			n;
} MapField;

static bool
map_field(MapField *m, const IcebergCompactOutput *o, int which, bool posdel, TmsError *err)
{
	int			i;

	m->n = 0;
	m->items = io_calloc((size_t) o->nmetrics + 1, sizeof(IcebergAvroWValue));
	m->kv = io_calloc((size_t) o->nmetrics * 2 + 2, sizeof(IcebergAvroWField));
	if (m->items == NULL || m->kv == NULL)
		return compact_oom(err);
	for (i = 0; i < o->nmetrics; i++)
	{
		const IcebergColumnMetrics *c = &o->metrics[i];
		IcebergAvroWField *kv = &m->kv[m->n * 2];
		static const int32_t key_ids[] = {117, 119, 121, 138, 126, 129};
		int64_t		v = which == 0 ? c->column_size : which == 1 ? c->value_count :
		which == 2 ? c->null_count : c->nan_count;

		if (which <= 3 && v < 0)
			continue;
		if (posdel && !iceberg_posdel_metric_kept(o, c, which))
			continue;
		if (which == 4 && !c->has_lower)
			continue;
		if (which == 5 && !c->has_upper)
			continue;
		kv[0].field_id = key_ids[which];
		kv[0].name = "key";
		kv[0].v.kind = AVW_LONG;
		kv[0].v.l = c->id;
		kv[1].field_id = key_ids[which] + 1;
		kv[1].name = "value";
		if (which <= 3)
		{
			kv[1].v.kind = AVW_LONG;
			kv[1].v.l = v;
		}
		else
		{
			kv[1].v.kind = AVW_BYTES;
			kv[1].v.p = which == 4 ? (const void *) c->lower : (const void *) c->upper;
			kv[1].v.len = which == 4 ? c->lower_len : c->upper_len;
			if (kv[1].v.p == NULL)
				kv[1].v.p = "";
		}
		m->items[m->n].kind = AVW_RECORD;
		m->items[m->n].fields = kv;
		m->items[m->n].nfields = 2;
		m->n++;
	}
	return true;
}

/*
 * The partition record of the group as values, from its canonical text,
 * typed by the manifest schema's partition record (types/ntypes) and the
 * spec's field ids.
 */
static bool
partition_values(const IcebergPartitionSpec *spec, const IcebergPartType *types, int ntypes,
				 const char *text, IcebergAvroWField *f, IcebergBuf *bufs, TmsError *err)
{
	const char *pp = text;
	const char *end = text + strlen(text);
	int			k;

	if (ntypes != spec->nfields)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "the partition record of spec %d cannot be written", (int) spec->spec_id);
		return false;
	}
	for (k = 0; k < spec->nfields; k++)
	{
		const char *tok;
		size_t		tl;
		char		num[64];

		f[k].field_id = spec->fields[k].field_id;
		f[k].name = spec->fields[k].name;
		if (!iceberg_partition_next(&pp, end, &tok, &tl))
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid partition \"%.200s\"", text);
			return false;
		}
		if (tl == 4 && memcmp(tok, "null", 4) == 0)
		{
			f[k].v.kind = AVW_NULL;
			continue;
		}
		if (tl < sizeof(num))
		{
			memcpy(num, tok, tl);
			num[tl] = '\0';
		}
		else
			num[0] = '\0';
		switch (types[k])
		{
			case ICEBERG_PT_BOOL:
				f[k].v.kind = AVW_BOOL;
				f[k].v.l = num[0] == 't';
				break;
			case ICEBERG_PT_INT:
			case ICEBERG_PT_LONG:
				f[k].v.kind = AVW_LONG;
				f[k].v.l = strtoll(num, NULL, 10);
				break;
			case ICEBERG_PT_FLOAT:
			case ICEBERG_PT_DOUBLE:
				f[k].v.kind = AVW_DOUBLE;
				f[k].v.d = strcmp(num, "\"NaN\"") == 0 ? 0.0 / 0.0 :
					strcmp(num, "\"Infinity\"") == 0 ? 1.0 / 0.0 :
					strcmp(num, "\"-Infinity\"") == 0 ? -1.0 / 0.0 : strtod(num, NULL);
				break;
			case ICEBERG_PT_STRING:
				if (!iceberg_json_unescape(tok, tl, &bufs[k]))
					return compact_oom(err);
				f[k].v.kind = AVW_STRING;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			case ICEBERG_PT_BYTES:
			case ICEBERG_PT_DECIMAL:
				if (!iceberg_json_unhex(tok, tl, &bufs[k]))
				{
					tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid partition value in \"%.200s\"", text);
					return false;
				}
				f[k].v.kind = AVW_BYTES;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			default:
				tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
							  "partition field \"%s\" has a type this writer cannot write",
							  spec->fields[k].name);
				return false;
		}
	}
	return true;
}

/* Write the ADDED entry of one output into o. */
static bool
add_output(MOut *o, const IcebergCompactOutput *out, const IcebergCompactDv *dv,
		   const IcebergTableMetadata *md, const IcebergPartitionSpec *spec,
		   const char *partition, int64_t snapshot_id, int64_t data_seq,
		   const IcebergSortOrder *sort, int32_t content, TmsError *err)
{
	IcebergAvroWField entry[5];
	IcebergAvroWField df[20];
	IcebergAvroWField *pf = NULL;
	IcebergBuf *bufs = NULL;
	IcebergAvroWValue *splits = NULL;
	MapField	maps[6];
	int			ne = 0,
				nd = 0,
				i;
	bool		ok = false;
	static const int32_t map_ids[] = {108, 109, 110, 137, 125, 128};
	static const char *const map_names[] = {"column_sizes", "value_counts", "null_value_counts",
	"nan_value_counts", "lower_bounds", "upper_bounds"};

	memset(entry, 0, sizeof(entry));
	memset(df, 0, sizeof(df));
	memset(maps, 0, sizeof(maps));
	pf = io_calloc((size_t) spec->nfields + 1, sizeof(IcebergAvroWField));
	bufs = io_calloc((size_t) spec->nfields + 1, sizeof(IcebergBuf));
	if (pf == NULL || bufs == NULL)
	{
		compact_oom(err);
		goto done;
	}
	if (spec->nfields > 0 && o->types == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "the partition record of spec %d cannot be written", (int) spec->spec_id);
		goto done;
	}
	if (!partition_values(spec, o->types, o->ntypes < 0 ? spec->nfields : o->ntypes,
						  partition, pf, bufs, err))
		goto done;

#define DF(id, nm, kind_, val) do { df[nd].field_id = (id); df[nd].name = (nm); \
		df[nd].v.kind = (kind_); df[nd].v.l = (val); nd++; } while (0)
	if (md->format_version >= 2)
		DF(134, "content", AVW_LONG, content);
	df[nd].field_id = 100;
	df[nd].name = "file_path";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = out->path;
	df[nd].v.len = strlen(out->path);
	nd++;
	df[nd].field_id = 101;
	df[nd].name = "file_format";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = dv ? "PUFFIN" : "PARQUET";
	df[nd].v.len = strlen(df[nd].v.p);
	nd++;
	df[nd].field_id = 102;
	df[nd].name = "partition";
	df[nd].v.kind = AVW_RECORD;
	df[nd].v.fields = pf;
	df[nd].v.nfields = spec->nfields;
	nd++;
	DF(103, "record_count", AVW_LONG, dv ? dv->records : out->records);
	DF(104, "file_size_in_bytes", AVW_LONG, out->size);
	if (md->format_version == 1)
		DF(105, "block_size_in_bytes", AVW_LONG, 64 * MIB);
	for (i = 0; i < 6; i++)
	{
		if (!map_field(&maps[i], out, i, content == ICEBERG_CONTENT_POSITION_DELETES, err))
			goto done;
		df[nd].field_id = map_ids[i];
		df[nd].name = map_names[i];
		if (maps[i].n > 0)
		{
			df[nd].v.kind = AVW_ARRAY;
			df[nd].v.items = maps[i].items;
			df[nd].v.nitems = maps[i].n;
		}
		nd++;
	}
	if (out->nsplit_offsets > 0)
	{
		splits = io_calloc((size_t) out->nsplit_offsets, sizeof(IcebergAvroWValue));
		if (splits == NULL)
		{
			compact_oom(err);
			goto done;
		}
		for (i = 0; i < out->nsplit_offsets; i++)
		{
			splits[i].kind = AVW_LONG;
			splits[i].l = out->split_offsets[i];
		}
		df[nd].field_id = 132;
		df[nd].name = "split_offsets";
		df[nd].v.kind = AVW_ARRAY;
		df[nd].v.items = splits;
		df[nd].v.nitems = out->nsplit_offsets;
		nd++;
	}
	/* sorted or z-ordered files: the id Iceberg stamps (compact_sort.c) */
	if (sort != NULL)
		DF(140, "sort_order_id", AVW_LONG, sort->order_id);
	if (dv != NULL)
		nd += compact_dv_fields(&df[nd], dv);
#undef DF

	{
		IcebergAvroWValue dfv;

		memset(&dfv, 0, sizeof(dfv));
		dfv.kind = AVW_RECORD;
		dfv.fields = df;
		dfv.nfields = nd;
		ne = iceberg_manifest_entry_fields(entry, ICEBERG_STATUS_ADDED, snapshot_id,
										   md->format_version >= 2 ? 1 : 0, data_seq, 0, &dfv);
	}
	if (!iceberg_avro_writer_add(o->w, entry, ne, err) ||
		!mout_note(o, ICEBERG_STATUS_ADDED, partition, strlen(partition),
				   dv ? dv->records : out->records,
				   md->format_version >= 2 ? data_seq : 0, err))
		goto done;
	ok = true;
done:
	for (i = 0; i < 6; i++)
	{
		io_free(maps[i].items);
		io_free(maps[i].kv);
	}
	for (i = 0; pf && bufs && i < spec->nfields; i++)
		iceberg_buf_free(&bufs[i]);
	io_free(bufs);
	io_free(pf);
	io_free(splits);
	return ok;
}

/* Copy an entry (data_file bytes raw) into o with status, snapshot and seqs. */
static bool
copy_entry(MOut *o, const IcebergManifestEntry *e, const void *raw, size_t raw_len,
		   int status, int64_t snapshot_id, int format_version, TmsError *err)
{
	IcebergAvroWField f[5];
	IcebergAvroWValue df;
	int			n;

	memset(&df, 0, sizeof(df));
	df.kind = AVW_RAW;
	df.p = raw;
	df.len = raw_len;
	n = iceberg_manifest_entry_fields(f, status, snapshot_id, format_version >= 2 ? 2 : 0,
									  e->sequence_number, e->file_sequence_number, &df);
	if (!iceberg_avro_writer_add(o->w, f, n, err))
		return false;
	return mout_note(o, status, e->partition, e->partition_len, e->record_count,
					 e->sequence_number, err);
}

/* Per-call state of a commit. */
typedef struct Commit
{
	const IcebergFileIO *io;
	const IcebergWriter *wr;
	const IcebergTableMetadata *md;
	IcebergCompactPlan *p;
	const IcebergCompactGroupOutput *gs;	/* the commit's groups */
	const ListRec *recs;		/* the current list's records */
	int64_t		inline_snapshot_id; /* the snapshot listing inline manifests */
	int			ngs;
	IcebergCompactCommit *res;
	TmsError   *err;
	IcebergWriteTarget t;		/* the new snapshot's id, seq, codec, names */
	int			nout;			/* manifests written so far */
	StrMap		group_files;	/* path -> index in files */
	const char **files;			/* the groups' files, group after group */
	int			nfiles;
	bool	   *found;
	StrMap		group_parts;	/* "spec|partition" of every group */
	char	  **part_keys;		/* owned keys of group_parts */
	int			nparts;
	int			new_parts;		/* output partitions not among them */
	StrMap		removable;		/* delete key (compact_dv_key, owned) -> plan
								 * index */
	bool	   *removed_found;
	StrMap		known_deletes;	/* every plan delete path */
	/* the rewritten manifests' list records (by index into recs) */
	IcebergNewManifest *news;	/* indexed like recs; path NULL: kept */
	IcebergNewManifest *carried;	/* inline v1 list: the kept manifests'
									 * records (path NULL: rewritten) */
	int64_t    *carried_snap;	/* their added_snapshot_id */
	/* per spec of the groups: the writer schema of one of its manifests */
	int			nspecs;
	int32_t    *spec_ids;
	char	  **source_schema;
	IcebergKeyValue **source_meta;
	int		   *nsource_meta;
	char	   *part_record;	/* a spec's partition record, built */
	IcebergBuf	patch;			/* v3: a data_file with first_row_id written */
	CompactSummaryCounts sum;	/* the summary's counts */
} Commit;

/*
 * Finish o as the commit's next manifest (<dir>/<uuid>-m<n>.avro), written
 * and noted; its list record moves into *n.
 */
static bool
commit_manifest(Commit *c, MOut *o, IcebergNewManifest *n)
{
	char		path[2300];
	int			len = snprintf(path, sizeof(path), "%s/%s-m%d.avro", c->t.dir, c->t.uuid, c->nout++);

	if (len < 0 || (size_t) len >= sizeof(path))
	{
		tms_error_set(c->err, ICEBERG_ERR_LIMIT, "table location too long");
		return false;
	}
	if (!mout_finish(o, c->wr, path, c->t.seq, &c->res->written, &c->res->nwritten, c->err))
		return false;
	*n = o->n;
	memset(&o->n, 0, sizeof(o->n));
	o->n.nsumm = -1;
	return true;
}

/* The index of spec_id among the commit's specs, or -1. */
static int
commit_spec(const Commit *c, int32_t spec_id)
{
	int			i;

	for (i = 0; i < c->nspecs; i++)
		if (c->spec_ids[i] == spec_id)
			return i;
	return -1;
}

/* Is (spec_id, partition) the partition of one of the commit's groups? */
static bool
commit_touches(const Commit *c, int32_t spec_id, const char *partition, size_t len)
{
	char	   *key = compact_part_key(spec_id, partition, len);
	bool		r;

	if (key == NULL)
		return true;			/* out of memory: assume it does */
	r = compact_map_get(&c->group_parts, key) >= 0;
	io_free(key);
	return r;
}

/* e in the manifest's own counts; *added_by: its first ADDED or DELETED's snapshot */
static void
count_original(IcebergNewManifest *orig, int64_t *added_by, const IcebergManifestEntry *e)
{
	bool		added = e->status == ICEBERG_STATUS_ADDED;

	if (e->status == ICEBERG_STATUS_EXISTING)
	{
		orig->existing_files++;
		orig->existing_rows += e->record_count;
		return;
	}
	orig->added_files += added;
	orig->added_rows += added ? e->record_count : 0;
	orig->deleted_files += !added;
	orig->deleted_rows += added ? 0 : e->record_count;
	if (*added_by < 0)
		*added_by = e->snapshot_id;
}

/*
 * Read one manifest of the current list, writing a filtered copy: entries
 * of group files (data) or removable delete files become DELETED, the
 * other live ones EXISTING.  The copy is kept (news[i]) only if an entry
 * changed.  A position delete file added since the plan that touches the
 * group is ICEBERG_ERR_CONFLICT.
 */
static bool
filter_manifest(Commit *c, const ListRec *rec, IcebergNewManifest *news)
{
	IcebergManifestReader *r;
	const IcebergManifestEntry *e;
	MOut		o;
	int			sx;
	int32_t		spec_id = rec->mf.partition_spec_id;
	int			ix = (int) (rec - c->recs);
	IcebergNewManifest orig;	/* an inline manifest's own counts */
	int64_t		added_by = -1;
	IcebergKeyValue *meta = NULL;
	int			nmeta = 0;
	const char *schema;
	bool		changed = false;
	int			has_seq = -1;	/* -1: not looked at yet */
	int			rc;
	bool		ok = false;
	CompactLineage lin;
	char		kb[COMPACT_DV_KEY_MAX];

	memset(&o, 0, sizeof(o));
	memset(&orig, 0, sizeof(orig));
	orig.nsumm = -1;
	if (!iceberg_manifest_open(c->io, &rec->mf, c->md->format_version,
							   ICEBERG_READ_PARTITION | ICEBERG_READ_RAW, &r, c->err))
		return false;
	/* an inline v1 list has no spec id: the manifest's header has it */
	if (spec_id < 0)
		spec_id = iceberg_manifest_spec_id(r) >= 0 ? iceberg_manifest_spec_id(r) : 0;
	sx = commit_spec(c, spec_id);
	schema = iceberg_manifest_header(r, "avro.schema");
	if (schema == NULL)
	{
		iceberg_manifest_close(r);
		tms_error_set(c->err, ICEBERG_ERR_MALFORMED, "manifest without avro.schema");
		return false;
	}
	if (!copy_header(r, 0, &meta, &nmeta, c->err) ||
		!mout_start(&o, schema, meta, nmeta, c->t.codec, c->t.level, c->t.lim.max_json_bytes,
					spec_id, rec->mf.content, c->err) ||
		!compact_lineage_start(&lin, c->md, &rec->mf, rec->path, schema, c->t.lim.max_json_bytes,
							   &c->patch, c->err))
		goto done;
	if (sx >= 0 && c->source_schema[sx] == NULL &&
		(rec->mf.content == ICEBERG_MANIFEST_CONTENT_DATA) == (c->p->rewrite_content == ICEBERG_CONTENT_DATA))
	{
		c->source_schema[sx] = iceberg_strdup(schema, c->err);
		if (c->source_schema[sx] == NULL ||
			!copy_header(r, 4, &c->source_meta[sx], &c->nsource_meta[sx], c->err))
			goto done;
	}
	while ((rc = iceberg_manifest_next(r, &e, c->err)) == 1)
	{
		int			status = ICEBERG_STATUS_EXISTING;
		int64_t		snap = e->snapshot_id;
		const void *raw;
		size_t		raw_len;

		if (!compact_lineage_entry(&lin, e, &raw, &raw_len, c->err))
			goto done;
		count_original(&orig, &added_by, e);
		if (e->status == ICEBERG_STATUS_DELETED)
			continue;
		if (e->content == ICEBERG_CONTENT_DATA)
		{
			int			k = compact_map_get(&c->group_files, e->file_path);

			if (k >= 0)
				c->found[k] = true;
			/* a row delta's data files stay: the new deletes apply to them */
			if (k >= 0 && !c->p->row_delta)
			{
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				c->res->data_files_rewritten++;
				c->res->bytes_rewritten += e->file_size_in_bytes;
				c->res->records_rewritten += e->record_count;
			}
		}
		else
		{
			const char *key = compact_dv_key(e->file_path, e->content_offset, kb, sizeof(kb));

			/* a deletion vector by its file and offset: one of its Puffin's */
			int			k = key != NULL ? compact_map_get(&c->removable, key) : -1;
			int			gk = e->content == c->p->rewrite_content && key != NULL ?
			compact_map_get(&c->group_files, key) : -1;

			if (gk >= 0)
				c->found[gk] = true;	/* a position delete file rewritten */
			if (gk >= 0 || k >= 0)
			{
				if (k >= 0)
					c->removed_found[k] = true;
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				if (e->content == ICEBERG_CONTENT_POSITION_DELETES)
				{
					c->sum.removed_pos_files++;
					c->sum.removed_dvs += e->content_offset >= 0;
					c->sum.removed_pos_records += e->record_count;
				}
				else
				{
					c->sum.removed_eq_files++;
					c->sum.removed_eq_records += e->record_count;
				}
				c->sum.removed_delete_bytes += e->file_size_in_bytes;
			}
			else if (compact_map_get(&c->known_deletes, e->file_path) < 0 &&
					 c->p->rewrite_content == ICEBERG_CONTENT_DATA &&
					 e->content == ICEBERG_CONTENT_POSITION_DELETES &&
					 (commit_touches(c, e->spec_id, e->partition, e->partition_len) ||
					  (e->referenced_data_file != NULL &&
					   compact_map_get(&c->group_files, e->referenced_data_file) >= 0)))
			{
				tms_error_set(c->err, ICEBERG_ERR_CONFLICT,
							  "a position delete file was added to the partition since the plan");
				tms_error_detail(c->err, "\"%s\" may delete rows of the files being rewritten.",
								 e->file_path);
				goto done;
			}
		}
		if (status == ICEBERG_STATUS_DELETED)
		{
			changed = true;
			if (c->md->format_version >= 2 && has_seq < 0)
			{
				json_t	   *root = iceberg_json_load(schema, strlen(schema), 0,
													 c->t.lim.max_json_bytes, "avro.schema", c->err);

				if (root == NULL)
					goto done;
				has_seq = iceberg_schema_field_type(root, 3, "sequence_number") != NULL;
				json_decref(root);
			}
			if (c->md->format_version >= 2 && !has_seq)
			{
				tms_error_set(c->err, ICEBERG_ERR_UNSUPPORTED,
							  "cannot rewrite a manifest written without sequence numbers");
				tms_error_detail(c->err, "\"%s\" of this format v2 table has no sequence_number field; rewrite the table's manifests first.",
								 rec->path);
				goto done;
			}
		}
		if (c->md->format_version >= 2 && (e->sequence_number < 0 || e->file_sequence_number < 0))
		{
			tms_error_set(c->err, ICEBERG_ERR_MALFORMED, "manifest entry without a sequence number");
			tms_error_detail(c->err, "Entry \"%s\" of \"%s\" has no sequence number and cannot inherit one.",
							 e->file_path, rec->path);
			goto done;
		}
		if (!copy_entry(&o, e, raw, raw_len, status, snap, c->md->format_version, c->err))
			goto done;
	}
	if (rc < 0)
		goto done;
	if (changed && !compact_lineage_check(&lin, c->err))
		goto done;
	if (changed)
	{
		if (!commit_manifest(c, &o, news))
			goto done;
	}
	else if (rec->raw == NULL && c->carried != NULL)
	{
		/*
		 * kept from an inline v1 list: its manifest_file record, which the
		 * new list needs (https://iceberg.apache.org/spec/#manifest-lists:
		 * manifest_length, partition_spec_id and added_snapshot_id are
		 * required), from the manifest itself; added by the snapshot of its
		 * first ADDED or DELETED entry, else by the snapshot that lists it,
		 * as Iceberg Java's BaseSnapshot assumes
		 */
		orig.spec_id = spec_id;
		orig.content = rec->mf.content;
		orig.path = iceberg_strdup(rec->path, c->err);
		if (orig.path == NULL || !compact_object_length(c->io, rec->path, &orig.length, c->err))
			goto done;
		c->carried[ix] = orig;
		memset(&orig, 0, sizeof(orig));
		c->carried_snap[ix] = added_by >= 0 ? added_by : c->inline_snapshot_id;
	}
	ok = true;
done:
	iceberg_new_manifest_free(&orig);
	iceberg_manifest_close(r);
	iceberg_kv_free(meta, nmeta);
	mout_free(&o);
	return ok;
}

/*
 * The header of a manifest of spec sx (Iceberg's keys: partition-spec,
 * partition-spec-id, format-version; schema and content are set by the
 * caller) and its partition record (c->part_record), from the metadata.
 */
static bool
spec_header(Commit *c, int sx)
{
	char	   *spec_json;
	char		num[32];
	IcebergSchema *schema = NULL;
	bool		ok;

	io_free(c->part_record);
	c->part_record = NULL;
	if (!iceberg_schema_parse(c->md->current_schema_json, &schema, c->err))
		return false;
	c->part_record = iceberg_partition_record_schema(c->md, schema, c->spec_ids[sx], c->err);
	iceberg_schema_free(schema);
	if (c->part_record == NULL)
		return false;
	spec_json = iceberg_partition_spec_json(c->md, c->spec_ids[sx], c->err);
	if (spec_json == NULL)
		return false;
	c->source_meta[sx] = io_calloc(8, sizeof(IcebergKeyValue));
	if (c->source_meta[sx] == NULL)
	{
		io_free(spec_json);
		return compact_oom(c->err);
	}
	snprintf(num, sizeof(num), "%d", (int) c->spec_ids[sx]);
	ok = iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "partition-spec", spec_json,
						true, c->err) &&
		iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "partition-spec-id", num,
					   true, c->err);
	snprintf(num, sizeof(num), "%d", c->md->format_version);
	ok = ok && iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "format-version", num,
							  true, c->err);
	io_free(spec_json);
	return ok;
}

/* The manifest of the files added in spec sx's partitions. */
static bool
write_added(Commit *c, int sx, IcebergNewManifest *n)
{
	int32_t		spec_id = c->spec_ids[sx];
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(c->md, spec_id);
	bool		posdel = c->p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES ||
	c->p->row_delta;
	char	   *schema = NULL;
	MOut		o;
	char		num[32];
	int			i,
				j,
				k;
	bool		ok = false;

	memset(&o, 0, sizeof(o));
	for (i = 0, j = 0; j < c->ngs; j++)
		if (c->p->groups[c->gs[j].group].spec_id == spec_id)
			i += c->gs[j].noutputs;
	if (i == 0)
		return true;			/* every row of these groups was deleted */
	if (spec == NULL)
	{
		tms_error_set(c->err, ICEBERG_ERR_MALFORMED,
					  "partition spec %d is not in the table metadata", (int) spec_id);
		return false;
	}
	if (c->source_schema[sx] == NULL)
	{
		/* the output spec of files of older specs: no manifest read has it */
		if (!spec_header(c, sx))
			return false;
		schema = compact_entry_schema(c->md->format_version, NULL, c->part_record,
									  c->t.lim.max_json_bytes, c->err);
	}
	else
		schema = compact_entry_schema(c->md->format_version, c->source_schema[sx], NULL,
									  c->t.lim.max_json_bytes, c->err);
	if (schema == NULL)
		return false;
	snprintf(num, sizeof(num), "%d", (int) c->md->current_schema_id);
	if (!iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "schema",
						c->md->current_schema_json, true, c->err) ||
		!iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "schema-id", num, true, c->err) ||
		(c->md->format_version >= 2 &&
		 !iceberg_kv_set(c->source_meta[sx], &c->nsource_meta[sx], "content",
						 posdel ? "deletes" : "data", true, c->err)))
		goto done;
	if (!mout_start(&o, schema, c->source_meta[sx], c->nsource_meta[sx], c->t.codec, c->t.level,
					c->t.lim.max_json_bytes, spec_id,
					posdel ? ICEBERG_MANIFEST_CONTENT_DELETES : ICEBERG_MANIFEST_CONTENT_DATA, c->err))
		goto done;
	for (j = 0; j < c->ngs; j++)
	{
		const IcebergCompactGroup *gr = &c->p->groups[c->gs[j].group];

		if (gr->spec_id != spec_id)
			continue;
		for (i = 0; i < c->gs[j].noutputs; i++)
		{
			const IcebergCompactOutput *out = &c->gs[j].outputs[i];

			/*
			 * rewritten position deletes take the new snapshot's sequence
			 * number, as Iceberg's RewriteFiles gives them (posdel.h), and a
			 * row delta's new ones, as its RowDelta does: they apply to the
			 * data files of the base
			 */
			for (k = 0; k < (out->ndvs > 0 ? out->ndvs : 1); k++)
				if (!add_output(&o, out, out->ndvs > 0 ? &out->dvs[k] : NULL, c->md, spec,
								gr->partition, c->t.snapshot_id,
								posdel ? c->t.seq : c->p->base_sequence_number,
								posdel ? NULL : c->p->sort,
								posdel ? ICEBERG_CONTENT_POSITION_DELETES : ICEBERG_CONTENT_DATA, c->err))
					goto done;
			c->res->bytes_added += out->size;
			if (posdel)
			{
				c->res->delete_files_added += out->ndvs > 0 ? out->ndvs : 1;
				c->sum.added_dvs += out->ndvs;
				c->res->delete_records_added += out->records;
				continue;
			}
			c->res->data_files_added++;
			c->res->records_added += out->records;
		}
	}
	if (!commit_manifest(c, &o, n))
		goto done;
	ok = true;
done:
	io_free(schema);
	mout_free(&o);
	return ok;
}

/*
 * A v1 manifest list writer for the snapshot replacing inline snap (its
 * schema: compact_list_schema_v1).
 */
static bool
list_begin_inline(Commit *c, const IcebergSnapshot *snap, IcebergAvroWriter **lw)
{
	IcebergKeyValue meta[3];
	char		id[32];
	char		parent[32];

	snprintf(id, sizeof(id), "%" PRId64, c->t.snapshot_id);
	snprintf(parent, sizeof(parent), "%" PRId64, snap->snapshot_id);
	meta[0].key = "snapshot-id";
	meta[0].value = id;
	meta[1].key = "parent-snapshot-id";
	meta[1].value = parent;
	meta[2].key = "format-version";
	meta[2].value = "1";
	return iceberg_avro_writer_create(compact_list_schema_v1, meta, 3, c->t.codec, c->t.level,
									  c->t.lim.max_json_bytes, lw, c->err);
}

/* The new manifest list; its path into *path_out. */
static bool
write_list(Commit *c, const IcebergSnapshot *snap, const ListRec *recs, int nrecs,
		   const IcebergNewManifest *added, char **path_out)
{
	IcebergManifestListReader *lr = NULL;
	IcebergAvroWriter *lw = NULL;
	int			i;
	bool		ok = false;

	if (snap->manifest_list == NULL ? !list_begin_inline(c, snap, &lw) :
		!iceberg_manifest_list_begin(c->io, c->md, snap, snap->snapshot_id, &c->t,
									 &lr, &lw, c->err))
		goto done;
	for (i = 0; i < c->nspecs; i++)
		if (added[i].path != NULL &&
			!iceberg_manifest_list_add_new(lw, &added[i], c->t.seq, c->t.snapshot_id, c->err))
			goto done;
	for (i = 0; i < nrecs; i++)
	{
		if (c->news[i].path != NULL)
		{
			if (!iceberg_manifest_list_add_new(lw, &c->news[i], c->t.seq, c->t.snapshot_id, c->err))
				goto done;
		}
		else if (recs[i].raw == NULL)
		{
			/* a manifest of an inline v1 list, kept */
			if (c->carried == NULL || c->carried[i].path == NULL)
			{
				tms_error_set(c->err, ICEBERG_ERR_MALFORMED,
							  "manifest \"%s\" has no list record", recs[i].path);
				goto done;
			}
			if (!iceberg_manifest_list_add_new(lw, &c->carried[i], 0, c->carried_snap[i], c->err))
				goto done;
		}
		else if (!iceberg_avro_writer_add_raw(lw, recs[i].raw, recs[i].raw_len, c->err))
			goto done;
	}
	ok = iceberg_manifest_list_end(&c->t, lw, c->wr, &c->res->written, &c->res->nwritten,
								   path_out, c->err);
done:
	iceberg_avro_writer_free(lw);
	iceberg_manifest_list_close(lr);
	return ok;
}

/*
 * What the commit looks for: the groups' files (and the manifests the plan
 * found them in, into wanted), their partitions and specs, the plan's
 * delete files and those the commit removes (*rm, *nrm).
 */
static bool
commit_prepare(Commit *c, StrMap *wanted, int **rm, int *nrm)
{
	const IcebergCompactPlan *p = c->p;
	int			total = 0;
	int			parts_alloc;
	int			i,
				j;
	int		   *gix;

	for (j = 0; j < c->ngs; j++)
		total += p->groups[c->gs[j].group].nfiles;
	c->found = io_calloc((size_t) total + 1, sizeof(bool));
	c->files = io_calloc((size_t) total + 1, sizeof(char *));
	parts_alloc = c->ngs + 1;
	c->part_keys = io_calloc((size_t) parts_alloc, sizeof(char *));
	c->spec_ids = io_calloc((size_t) c->ngs + 1, sizeof(int32_t));
	c->source_schema = io_calloc((size_t) c->ngs + 1, sizeof(char *));
	c->source_meta = io_calloc((size_t) c->ngs + 1, sizeof(IcebergKeyValue *));
	c->nsource_meta = io_calloc((size_t) c->ngs + 1, sizeof(int));
	gix = io_calloc((size_t) c->ngs + 1, sizeof(int));
	if (c->found == NULL || c->files == NULL || c->part_keys == NULL || c->spec_ids == NULL ||
		c->source_schema == NULL || c->source_meta == NULL || c->nsource_meta == NULL ||
		gix == NULL)
		goto nomem;
	for (j = 0; j < c->ngs; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[c->gs[j].group];

		if (commit_spec(c, gr->spec_id) < 0)
			c->spec_ids[c->nspecs++] = gr->spec_id;
		for (i = 0; i < gr->nfiles; i++)
		{
			const IcebergCompactFile *f = &p->files[gr->first + i];
			char	   *key = compact_part_key(f->spec_id, f->partition, strlen(f->partition));

			/* the partitions the files come from (new deletes there conflict) */
			if (key == NULL)
				goto nomem;
			if (compact_map_get(&c->group_parts, key) >= 0)
				io_free(key);
			else
			{
				if (c->nparts == parts_alloc)
				{
					char	  **nk = io_realloc(c->part_keys, sizeof(char *) * (size_t) (parts_alloc * 2));

					if (nk == NULL)
					{
						io_free(key);
						goto nomem;
					}
					c->part_keys = nk;
					parts_alloc *= 2;
				}
				c->part_keys[c->nparts] = key;
				if (!compact_map_put(&c->group_parts, key, c->nparts++))
					goto nomem;
			}
			c->files[c->nfiles] = f->dv_key ? f->dv_key : f->path;
			if (!compact_map_put(&c->group_files, c->files[c->nfiles], c->nfiles) ||
				(p->rewrite_content == ICEBERG_CONTENT_DATA &&
				 !compact_map_put(wanted, p->manifests[f->manifest], 1)))
				goto nomem;
			c->nfiles++;
		}
		gix[j] = c->gs[j].group;
	}
	/* the output partitions no file came from, for changed-partition-count */
	for (j = 0; j < c->ngs; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[c->gs[j].group];
		char	   *key = compact_part_key(gr->spec_id, gr->partition, strlen(gr->partition));
		bool		seen;

		if (key == NULL)
			goto nomem;
		seen = compact_map_get(&c->group_parts, key) >= 0;
		for (i = 0; i < j && !seen; i++)
			seen = p->groups[c->gs[i].group].spec_id == gr->spec_id &&
				strcmp(p->groups[c->gs[i].group].partition, gr->partition) == 0;
		io_free(key);
		c->new_parts += !seen;
	}
	for (i = 0; i < p->ndeletes; i++)
		if (!compact_map_put(&c->known_deletes, p->deletes[i].path, i))
			goto nomem;

	/*
	 * a row delta removes no data file, so no delete file either; on v3 its
	 * deletion vectors replace the deletes they merged
	 */
	if (p->row_delta && p->format_version >= 3)
	{
		if (!compact_dv_replaced(p, c->gs, c->ngs, rm, nrm, c->err))
		{
			io_free(gix);
			return false;
		}
	}
	else if (p->row_delta)
		*nrm = 0;
	else if (!iceberg_compact_removable(p, gix, c->ngs, rm, nrm, c->err))
	{
		io_free(gix);
		return false;
	}
	io_free(gix);
	gix = NULL;
	c->removed_found = io_calloc((size_t) *nrm + 1, sizeof(bool));
	if (c->removed_found == NULL)
		goto nomem;
	for (i = 0; i < *nrm; i++)
	{
		const IcebergCompactDelete *d = &p->deletes[(*rm)[i]];
		char		kb[COMPACT_DV_KEY_MAX];
		const char *key = compact_dv_key(d->path, d->dv_offset, kb, sizeof(kb));
		int64_t    *v = key != NULL ? iceberg_strmap_put(&c->removable, key, i, NULL) : NULL;

		if (v == NULL)
			goto nomem;
	}
	return true;
nomem:
	io_free(gix);
	return compact_oom(c->err);
}

static void
commit_free(Commit *c)
{
	int			i;

	io_free(c->found);
	io_free(c->files);
	io_free(c->removed_found);
	iceberg_buf_free(&c->patch);
	for (i = 0; i < c->nparts; i++)
		io_free(c->part_keys[i]);
	io_free(c->part_keys);
	for (i = 0; i < c->nspecs; i++)
	{
		io_free(c->source_schema[i]);
		iceberg_kv_free(c->source_meta[i], c->nsource_meta[i]);
	}
	io_free(c->spec_ids);
	io_free(c->source_schema);
	io_free(c->source_meta);
	io_free(c->nsource_meta);
	io_free(c->part_record);
	iceberg_strmap_free(&c->group_files);
	iceberg_strmap_free(&c->group_parts);
	iceberg_strmap_free(&c->removable);
	iceberg_strmap_free(&c->known_deletes);
}

/* The manifests the commit replaced (old and new paths) into res. */
static bool
note_replaced(Commit *c, const ListRec *recs, int nrecs)
{
	IcebergCompactCommit *res = c->res;
	int			i;

	for (i = 0; i < nrecs; i++)
		if (c->news[i].path != NULL)
		{
			char	  **no = io_realloc(res->replaced_old, sizeof(char *) * (size_t) (res->nreplaced + 1));
			char	  **nn = no ? io_realloc(res->replaced_new, sizeof(char *) * (size_t) (res->nreplaced + 1)) : NULL;

			if (no != NULL)
				res->replaced_old = no;
			if (nn == NULL)
				return compact_oom(c->err);
			res->replaced_new = nn;
			no[res->nreplaced] = io_strdup(recs[i].path);
			nn[res->nreplaced] = io_strdup(c->news[i].path);
			res->nreplaced++;
			if (no[res->nreplaced - 1] == NULL || nn[res->nreplaced - 1] == NULL)
				return compact_oom(c->err);
		}
	return true;
}

bool
iceberg_compact_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
							 const IcebergTableMetadata *md, IcebergCompactPlan *p,
							 const IcebergCompactGroupOutput *groups, int ngroups,
							 int64_t new_snapshot_id, IcebergCompactCommit *res,
							 TmsError *err)
{
	Commit		c;
	const IcebergSnapshot *snap;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	int		   *rm = NULL;
	int			nrm = 0;
	IcebergNewManifest *added = NULL;
	StrMap		wanted = {0};
	bool		fallback = false;
	char	   *list_path = NULL;
	int			i;
	bool		ok = false;

	tms_error_clear(err);
	if (res == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no result given");
		return false;
	}
	memset(res, 0, sizeof(*res));
	res->snapshot.parent_snapshot_id = -1;
	res->snapshot.schema_id = -1;
	if (io == NULL || w == NULL || w->write == NULL || p == NULL || groups == NULL || ngroups <= 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "a commit needs a file io, a writer, a plan and a group");
		return false;
	}
	for (i = 0; i < ngroups; i++)
		if (groups[i].group < 0 || groups[i].group >= p->ngroups || groups[i].noutputs < 0 ||
			(groups[i].noutputs > 0 && groups[i].outputs == NULL))
		{
			tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "invalid group or output files");
			return false;
		}
	if (!compact_check_table(md, &snap, err))
		return false;
	if (snap == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_CONFLICT, "the table has no current snapshot");
		return false;
	}
	if (new_snapshot_id <= 0 || iceberg_metadata_snapshot(md, new_snapshot_id) != NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid new snapshot id %" PRId64, new_snapshot_id);
		return false;
	}
	/* a rewrite of position deletes: the data files they point at stay */
	if (p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES &&
		!iceberg_posdel_check_live(io, md, snap, p, groups, ngroups, err))
		return false;
	memset(&c, 0, sizeof(c));
	c.io = io;
	c.wr = w;
	c.md = md;
	c.p = p;
	c.gs = groups;
	c.ngs = ngroups;
	c.res = res;
	c.err = err;
	if (!iceberg_write_target_init(&c.t, io, md, new_snapshot_id, err))
		return false;
	if (!commit_prepare(&c, &wanted, &rm, &nrm))
		goto done;
	added = io_calloc((size_t) c.nspecs + 1, sizeof(IcebergNewManifest));
	if (added == NULL)
		goto nomem;
	for (i = 0; i < c.nspecs; i++)
		added[i].nsumm = -1;

	/*
	 * the current manifests: those of the groups' files, and every delete
	 * manifest
	 */
	if (!compact_read_list(io, md, snap, &recs, &nrecs, err))
		goto done;
	c.recs = recs;
	c.news = io_calloc((size_t) nrecs + 1, sizeof(IcebergNewManifest));
	if (c.news == NULL)
		goto nomem;
	for (i = 0; i < nrecs; i++)
		c.news[i].nsumm = -1;
	if (snap->manifest_list == NULL)
	{
		/* an inline v1 list: every manifest is read for its list record */
		c.inline_snapshot_id = snap->snapshot_id;
		c.carried = io_calloc((size_t) nrecs + 1, sizeof(IcebergNewManifest));
		c.carried_snap = io_calloc((size_t) nrecs + 1, sizeof(int64_t));
		if (c.carried == NULL || c.carried_snap == NULL)
			goto nomem;
		for (i = 0; i < nrecs; i++)
			c.carried[i].nsumm = -1;
	}
	{
		int			present = 0;

		for (i = 0; i < nrecs; i++)
			if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA &&
				compact_map_get(&wanted, recs[i].path) >= 0)
				present++;

		/*
		 * a manifest of the plan is gone (rewritten meanwhile): look
		 * everywhere
		 */
		fallback = present < (int) wanted.count;
	}
	for (i = 0; i < nrecs; i++)
	{
		bool		look;

		if (c.carried != NULL)
			look = true;
		else if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA)
		{
			/* every data manifest: the files may be of older specs */
			look = fallback || compact_map_get(&wanted, recs[i].path) >= 0;
		}
		else
			look = true;
		if (!look)
			continue;
		if (iceberg_check_interrupt(io, err) || !filter_manifest(&c, &recs[i], &c.news[i]))
			goto done;
	}
	for (i = 0; i < c.nfiles; i++)
		if (!c.found[i])
		{
			tms_error_set(err, ICEBERG_ERR_CONFLICT,
						  "a file of the group is no longer live in the table");
			tms_error_detail(err, "\"%s\" was removed or rewritten by another commit.",
							 c.files[i]);
			goto done;
		}

	/*
	 * the new files, a manifest per spec (none when the deletes took every
	 * row of the groups: the commit only removes), the list, the snapshot
	 */
	for (i = 0; i < c.nspecs; i++)
		if (!write_added(&c, i, &added[i]))
			goto done;
	if (!compact_assign_row_ids(md, added, c.nspecs, c.news, nrecs, &c.t, &res->snapshot, err) ||
		!write_list(&c, snap, recs, nrecs, added, &list_path))
		goto done;
	if (!iceberg_new_snapshot_replace(&res->snapshot, &c.t, snap->snapshot_id, iceberg_now_ms(),
									  md->current_schema_id, &list_path, err) ||
		!compact_fill_summary(&res->snapshot, res, &c.sum,
							  p->rewrite_content == ICEBERG_CONTENT_DATA && !p->row_delta,
							  c.nparts + c.new_parts, snap, err))
		goto done;
	/* the manifests replaced, and the delete files removed */
	if (!note_replaced(&c, recs, nrecs))
		goto done;
	res->removed = io_calloc((size_t) nrm + 1, sizeof(int));
	if (res->removed == NULL)
		goto nomem;
	for (i = 0; i < nrm; i++)
		if (c.removed_found[i])
			res->removed[res->nremoved++] = rm[i];
	res->delete_files_removed = p->rewrite_content == ICEBERG_CONTENT_DATA ? res->nremoved :
		c.sum.removed_pos_files;
	res->delete_bytes_removed = c.sum.removed_delete_bytes;
	ok = true;
	goto done;
nomem:
	compact_oom(err);
done:
	io_free(list_path);
	for (i = 0; added && i < c.nspecs; i++)
		iceberg_new_manifest_free(&added[i]);
	io_free(added);
	for (i = 0; c.news && i < nrecs; i++)
		iceberg_new_manifest_free(&c.news[i]);
	io_free(c.news);
	for (i = 0; c.carried && i < nrecs; i++)
		iceberg_new_manifest_free(&c.carried[i]);
	io_free(c.carried);
	io_free(c.carried_snap);
	compact_free_recs(recs, nrecs);
	io_free(rm);
	commit_free(&c);
	iceberg_strmap_free(&wanted);
	return ok;
}

bool
iceberg_compact_committed(IcebergCompactPlan *p, const int *groups, int ngroups,
						  const IcebergCompactCommit *res, TmsError *err)
{
	StrMap		old = {0};
	int			i,
				j,
				k;

	for (j = 0; j < ngroups && !p->row_delta; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[groups[j]];

		for (i = 0; i < gr->ndeletes; i++)
		{
			IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];

			for (k = 0; k < d->ngroups; k++)
				if (d->groups[k] == groups[j])
					d->covered += d->group_files[k];
		}
	}
	for (i = 0; i < res->nreplaced; i++)
		if (!compact_map_put(&old, res->replaced_old[i], i))
		{
			iceberg_strmap_free(&old);
			return compact_oom(err);
		}
	for (i = 0; i < p->nmanifests; i++)
	{
		int			k2 = compact_map_get(&old, p->manifests[i]);
		char	   *np;

		if (k2 < 0)
			continue;
		np = io_strdup(res->replaced_new[k2]);
		if (np == NULL)
		{
			iceberg_strmap_free(&old);
			return compact_oom(err);
		}
		io_free(p->manifests[i]);
		p->manifests[i] = np;
	}
	iceberg_strmap_free(&old);
	return true;
}
