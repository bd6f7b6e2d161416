/*-------------------------------------------------------------------------
 *
 * rewrite_manifests.c
 *	  Iceberg manifest rewrite: plan (which manifests to merge) and
 *	  execute (write the merged manifests and the new manifest list).
 *	  rewrite_manifests.h states the semantics, the limits and the memory bounds.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path; nothing here commits, retries or
 * deletes (the caller does, with the list of written objects).  Inputs
 * are read with the layer's streaming readers (manifest.c) using raw
 * spans (ICEBERG_READ_RAW), so data_file records and kept manifest-list
 * records are copied byte for byte; outputs go through avro_write.c and
 * the caller's IcebergWriter.  In a format v3 table a data file's null
 * first_row_id is the one field written anew: its union is re-encoded
 * around the rest of the copied bytes (rewrite_manifests.h, row lineage).
 *
 * src/iceberg/maint/rewrite_manifests.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/maint/rewrite_manifests.h"
#include "iceberg/write/write_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TARGET_BYTES	(INT64_C(8) * 1024 * 1024)
#define DEFAULT_BUDGET_BYTES	(INT64_C(32) * 1024 * 1024)

static bool
oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

/* ---------------------------------------------------------------------
 * Plan
 * ---------------------------------------------------------------------
 */

void
iceberg_rewrite_plan_free(IcebergRewritePlan *p)
{
	int			i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nmanifests; i++)
		io_free(p->manifests[i].path);
	io_free(p->manifests);
	io_free(p->groups);
	io_free(p);
}

/* The target size: option, table property, default. */
static int64_t
resolve_target(const IcebergTableMetadata *md, const IcebergRewriteOptions *opt)
{
	const char *prop;

	if (opt != NULL && opt->target_size_bytes > 0)
		return opt->target_size_bytes;
	prop = iceberg_metadata_property(md, "commit.manifest.target-size-bytes");
	if (prop != NULL)
	{
		char	   *end;
		long long	v = strtoll(prop, &end, 10);

		if (end != prop && *end == '\0' && v > 0)
			return (int64_t) v;
	}
	return DEFAULT_TARGET_BYTES;
}

/* Common refusals of plan and execute. */
static bool
check_table(const IcebergTableMetadata *md, const IcebergSnapshot **snap, TmsError *err)
{
	/* NULL: format v3 is rewritten, its row lineage kept */
	return iceberg_write_check_table(md, "manifest rewrite", NULL,
									 "; a writer that upgrades it is needed first", snap, err);
}

/*
 * The refusal of a v3 table whose files lack row ids (upgraded from v2, no
 * v3 commit yet): the manifest list must then assign them
 * (https://iceberg.apache.org/spec/#row-lineage-for-upgraded-tables), which
 * this rewrite does not.
 */
static bool
refuse_unassigned(TmsError *err, const char *what, const char *name)
{
	tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
				  "manifest rewrite does not assign row ids to a format v3 table's files");
	tms_error_detail(err, "%s \"%s\" has no first-row-id: the table was upgraded to v3 and its files have no row ids yet.",
					 what, name);
	tms_error_hint(err, "Commit to the table once with a v3 writer (it assigns them), then rewrite the manifests.");
	return false;
}

/*
 * Does a manifest's data_file have first_row_id (id 142) as a union of
 * null and long?  *branch: the index of "long" in it (write_internal.h;
 * compaction's commit uses it too).
 */
bool
iceberg_manifest_first_row_id_branch(const char *schema_text, int64_t max_json, int *branch,
									 TmsError *err)
{
	json_t	   *s = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
									  max_json, "avro.schema", err);
	json_t	   *fields;
	size_t		i,
				k;

	*branch = -1;
	if (s == NULL)
		return false;
	fields = json_object_get(s, "fields");
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *dff;

		if (json_integer_value(json_object_get(f, "field-id")) != 2)
			continue;
		dff = json_object_get(json_object_get(f, "type"), "fields");
		for (k = 0; k < json_array_size(dff); k++)
		{
			json_t	   *g = json_array_get(dff, k);
			json_t	   *t = json_object_get(g, "type");

			if (json_integer_value(json_object_get(g, "field-id")) == 142 &&
				json_is_array(t) && json_array_size(t) == 2 &&
				json_is_string(json_array_get(t, 0)) && json_is_string(json_array_get(t, 1)))
			{
				const char *a = json_string_value(json_array_get(t, 0));
				const char *b = json_string_value(json_array_get(t, 1));

				if (strcmp(a, "null") == 0 && strcmp(b, "long") == 0)
					*branch = 1;
				else if (strcmp(a, "long") == 0 && strcmp(b, "null") == 0)
					*branch = 0;
			}
		}
	}
	json_decref(s);
	return true;
}

/* Does a manifest's writer schema have a top-level field with this id? */
static bool
schema_has_top_id(const char *schema_text, int32_t id, int64_t max_json,
				  bool *has, TmsError *err)
{
	json_t	   *s = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
									  max_json, "avro.schema", err);
	json_t	   *fields;
	size_t		i;

	*has = false;
	if (s == NULL)
		return false;
	fields = json_object_get(s, "fields");
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *fid = json_object_get(json_array_get(fields, i), "field-id");

		if (json_is_integer(fid) && json_integer_value(fid) == id)
			*has = true;
	}
	json_decref(s);
	return true;
}

/* An IcebergManifestFile for reading a planned manifest. */
static void
plan_manifest_file(const IcebergRewriteManifest *m, IcebergManifestFile *mf)
{
	memset(mf, 0, sizeof(*mf));
	mf->manifest_path = m->path;
	mf->manifest_length = m->length;
	mf->partition_spec_id = m->spec_id;
	mf->content = m->content;
	mf->sequence_number = m->sequence_number;
	mf->min_sequence_number = m->sequence_number;
	mf->added_snapshot_id = m->added_snapshot_id;
	mf->npartition_summaries = -1;
	mf->first_row_id = m->first_row_id;
}

/*
 * Reads a candidate manifest's header: its schema hash, and whether it
 * can be rewritten in this table (v2: needs sequence number fields).
 */
static bool
probe_manifest(const IcebergFileIO *io, const IcebergTableMetadata *md,
			   IcebergRewriteManifest *m, bool *rewritable, TmsError *err)
{
	IcebergManifestReader *r;
	IcebergManifestFile mf;
	IcebergLimits lim;
	const char *schema;
	bool		has = true;

	*rewritable = false;
	iceberg_effective_limits(io->limits, &lim);
	plan_manifest_file(m, &mf);
	if (!iceberg_manifest_open(io, &mf, md->format_version, 0, &r, err))
		return false;
	schema = iceberg_manifest_header(r, "avro.schema");
	if (schema == NULL)
	{
		iceberg_manifest_close(r);
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "manifest without avro.schema");
		return false;
	}
	m->schema_hash = iceberg_hash_bytes(ICEBERG_HASH_INIT, schema, strlen(schema));
	if (md->format_version >= 2 &&
		!schema_has_top_id(schema, 3, lim.max_json_bytes, &has, err))
	{
		iceberg_manifest_close(r);
		return false;
	}
	/* v3 data: first_row_id must be a field its inherited value can fill */
	m->long_branch = -1;
	if (has && md->format_version >= 3 && m->content == ICEBERG_MANIFEST_CONTENT_DATA)
	{
		if (!iceberg_manifest_first_row_id_branch(schema, lim.max_json_bytes, &m->long_branch, err))
		{
			iceberg_manifest_close(r);
			return false;
		}
		has = m->long_branch >= 0;
	}
	iceberg_manifest_close(r);
	*rewritable = has;
	return true;
}

/* See rewrite_manifests.h. */
bool
iceberg_rewrite_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					 const IcebergRewriteOptions *opt, IcebergRewritePlan **out,
					 TmsError *err)
{
	IcebergRewritePlan *p;
	const IcebergSnapshot *snap;
	IcebergManifestListReader *lr = NULL;
	const IcebergManifestFile *mf;
	int			alloc = 0;
	int			rc,
				i,
				g;

	tms_error_clear(err);
	*out = NULL;
	if (io == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no file io given");
		return false;
	}
	if (!check_table(md, &snap, err))
		return false;
	p = io_calloc(1, sizeof(IcebergRewritePlan));
	if (p == NULL)
		return oom(err);
	p->base_snapshot_id = snap ? snap->snapshot_id : -1;
	p->target_size_bytes = resolve_target(md, opt);
	p->now_ms = (opt != NULL && opt->now_ms > 0) ? opt->now_ms : iceberg_now_ms();
	p->memory_budget_bytes = (opt != NULL && opt->memory_budget_bytes > 0)
		? opt->memory_budget_bytes : DEFAULT_BUDGET_BYTES;
	if (snap == NULL)
	{
		*out = p;
		return true;
	}
	if (md->format_version >= 3 && snap->first_row_id < 0)
	{
		char		id[32];

		snprintf(id, sizeof(id), "%" PRId64, snap->snapshot_id);
		refuse_unassigned(err, "Snapshot", id);
		goto fail;
	}
	if (!iceberg_manifest_list_open(io, md, snap, &lr, err))
		goto fail;
	while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
	{
		IcebergRewriteManifest *m;

		if (p->nmanifests == alloc)
		{
			int			na = alloc ? alloc * 2 : 64;
			IcebergRewriteManifest *nm;

			if (na > INT32_MAX / 2)
			{
				tms_error_set(err, ICEBERG_ERR_LIMIT, "too many manifests");
				goto fail;
			}
			nm = io_realloc(p->manifests, sizeof(*nm) * (size_t) na);
			if (nm == NULL)
			{
				oom(err);
				goto fail;
			}
			p->manifests = nm;
			alloc = na;
		}
		m = &p->manifests[p->nmanifests];
		memset(m, 0, sizeof(*m));
		m->path = iceberg_strdup(mf->manifest_path, err);
		if (m->path == NULL)
			goto fail;
		p->nmanifests++;
		m->length = mf->manifest_length;
		m->spec_id = mf->partition_spec_id;
		m->content = mf->content;
		m->live_entries = (mf->added_files_count >= 0 && mf->existing_files_count >= 0)
			? (int64_t) mf->added_files_count + mf->existing_files_count : -1;
		m->group = -1;
		m->sequence_number = mf->sequence_number;
		m->added_snapshot_id = mf->added_snapshot_id;
		m->first_row_id = mf->first_row_id;
		m->long_branch = -1;
		if (md->format_version >= 3 && m->content == ICEBERG_MANIFEST_CONTENT_DATA &&
			m->first_row_id < 0)
		{
			refuse_unassigned(err, "Data manifest", m->path);
			goto fail;
		}
	}
	if (rc < 0)
		goto fail;
	iceberg_manifest_list_close(lr);
	lr = NULL;

	/* candidates, grouped by (spec, content, schema) */
	for (i = 0; i < p->nmanifests; i++)
	{
		IcebergRewriteManifest *m = &p->manifests[i];
		bool		ok;

		if ((opt != NULL && opt->spec_id >= 0 && m->spec_id != opt->spec_id) ||
			m->length < 0 || m->length >= p->target_size_bytes)
			continue;
		if (iceberg_check_interrupt(io, err))
			goto fail;
		if (!probe_manifest(io, md, m, &ok, err))
			goto fail;
		if (!ok)
			continue;
		for (g = 0; g < p->ngroups; g++)
			if (p->groups[g].spec_id == m->spec_id && p->groups[g].content == m->content &&
				p->groups[g].schema_hash == m->schema_hash)
				break;
		if (g == p->ngroups)
		{
			IcebergRewriteGroup *ng;

			/* at most one group per candidate: bounded by nmanifests */
			ng = io_realloc(p->groups, sizeof(*ng) * (size_t) (p->ngroups + 1));
			if (ng == NULL)
			{
				oom(err);
				goto fail;
			}
			p->groups = ng;
			memset(&ng[g], 0, sizeof(ng[g]));
			ng[g].spec_id = m->spec_id;
			ng[g].content = m->content;
			ng[g].schema_hash = m->schema_hash;
			p->ngroups++;
		}
		m->group = g;
		p->groups[g].nreplaced++;
		p->groups[g].live_entries += m->live_entries > 0 ? m->live_entries : 0;
		p->groups[g].bytes += m->length;
	}
	/* groups of one are kept; renumber the rest */
	{
		int			ng = 0;
		int		   *map = io_calloc((size_t) p->ngroups + 1, sizeof(int));

		if (map == NULL)
		{
			oom(err);
			goto fail;
		}
		for (g = 0; g < p->ngroups; g++)
		{
			if (p->groups[g].nreplaced >= 2)
			{
				map[g] = ng;
				p->groups[ng] = p->groups[g];
				p->groups[ng].expected_outputs = (int)
					((p->groups[ng].bytes + p->target_size_bytes - 1) / p->target_size_bytes);
				if (p->groups[ng].expected_outputs < 1)
					p->groups[ng].expected_outputs = 1;
				ng++;
			}
			else
				map[g] = -1;
		}
		for (i = 0; i < p->nmanifests; i++)
		{
			IcebergRewriteManifest *m = &p->manifests[i];

			if (m->group >= 0)
				m->group = map[m->group];
			if (m->group >= 0)
				p->nreplaced++;
			else
				p->nkept++;
		}
		io_free(map);
		p->ngroups = ng;
	}
	*out = p;
	return true;

fail:
	iceberg_manifest_list_close(lr);
	iceberg_rewrite_plan_free(p);
	return false;
}

/* ---------------------------------------------------------------------
 * Execute
 * ---------------------------------------------------------------------
 */

/* One clustered entry, in the arena: header, partition text, raw bytes. */
typedef struct EntryHdr
{
	int64_t		snapshot_id;
	int64_t		seq;
	int64_t		file_seq;
	int64_t		records;
	uint64_t	order;
	uint32_t	part_len;
	uint32_t	raw_len;
} EntryHdr;

typedef struct Exec
{
	const IcebergFileIO *io;
	const IcebergWriter *wr;
	const IcebergTableMetadata *md;
	const IcebergRewritePlan *plan;
	IcebergRewriteResult *res;
	TmsError   *err;
	IcebergWriteTarget t;		/* the new snapshot's id, seq, codec, names */

	/* new manifests */
	IcebergNewManifest *news;
	int			nnews;
	int			news_alloc;

	/* the group being processed */
	char	   *schema;			/* writer schema text of the group */
	int			nmeta;
	IcebergKeyValue *meta;		/* header metadata of its first manifest */
	IcebergPartType *types;
	int			ntypes;			/* -1: summaries unsupported */

	/* clustering */
	IcebergBuf	arena;
	size_t	   *idx;
	size_t		nidx;
	size_t		idx_alloc;
	uint64_t	order;

	/* the output manifest being built */
	IcebergAvroWriter *w;
	int64_t		out_files;
	int64_t		out_rows;
	int64_t		out_min_seq;
	IcebergPartSum *summ;
	bool		summ_bad;
	IcebergBuf	tmp;
	IcebergBuf	patch;			/* a data_file with first_row_id written out */
} Exec;

static void
free_summ(Exec *x)
{
	iceberg_part_sums_free(x->summ, x->ntypes);
	x->summ = NULL;
}

/* Write an object through the caller's writer, noted as written. */
static bool
write_object(Exec *x, const char *path, const uint8_t *data, size_t len)
{
	return iceberg_write_object(x->wr, &x->res->written, &x->res->nwritten, path,
								data, len, x->err);
}

/* Start an output manifest for the current group. */
static bool
out_start(Exec *x)
{
	if (!iceberg_avro_writer_create(x->schema, x->meta, x->nmeta, x->t.codec, x->t.level,
									x->t.lim.max_json_bytes, &x->w, x->err))
		return false;
	x->out_files = 0;
	x->out_rows = 0;
	x->out_min_seq = INT64_MAX;
	x->summ_bad = x->ntypes < 0;
	free_summ(x);
	if (x->ntypes > 0)
	{
		x->summ = io_calloc((size_t) x->ntypes, sizeof(IcebergPartSum));
		if (x->summ == NULL)
			return oom(x->err);
	}
	return true;
}

/* Finish the output manifest: write it and note it for the list. */
static bool
out_finish(Exec *x, int32_t spec_id, int32_t content)
{
	const uint8_t *data;
	size_t		len;
	char		path[2200];
	IcebergNewManifest *n;

	if (x->w == NULL)
		return true;
	if (x->out_files == 0)
	{
		iceberg_avro_writer_free(x->w);
		x->w = NULL;
		return true;
	}
	if (!iceberg_avro_writer_finish(x->w, &data, &len, x->err))
		return false;
	snprintf(path, sizeof(path), "%s/%s-m%d.avro", x->t.dir, x->t.uuid, x->nnews);
	if (x->nnews == x->news_alloc)
	{
		int			na = x->news_alloc ? x->news_alloc * 2 : 16;
		IcebergNewManifest *nn = io_realloc(x->news, sizeof(IcebergNewManifest) * (size_t) na);

		if (nn == NULL)
			return oom(x->err);
		x->news = nn;
		x->news_alloc = na;
	}
	n = &x->news[x->nnews];
	memset(n, 0, sizeof(*n));
	n->nsumm = -1;
	n->path = iceberg_strdup(path, x->err);
	if (n->path == NULL)
		return false;
	x->nnews++;
	n->length = (int64_t) len;
	n->spec_id = spec_id;
	n->content = content;
	n->existing_files = x->out_files;
	n->existing_rows = x->out_rows;
	n->min_seq = x->out_min_seq == INT64_MAX ? 0 : x->out_min_seq;

	/*
	 * v3: a data manifest gets the snapshot's first-row-id; none of its files
	 * inherits (each has its first_row_id written), so it consumes no ids
	 * (https://iceberg.apache.org/spec/#first-row-id-assignment); a delete
	 * manifest's stays null.
	 */
	n->has_first_row_id = x->t.first_row_id >= 0 && content == ICEBERG_MANIFEST_CONTENT_DATA;
	n->first_row_id = x->t.first_row_id;
	if (!iceberg_new_manifest_summaries(n, x->types, x->ntypes, x->summ, x->summ_bad, x->err))
		return false;
	if (!write_object(x, path, data, len))
		return false;
	iceberg_avro_writer_free(x->w);
	x->w = NULL;
	x->res->manifests_added++;
	return true;
}

/* Write one clustered entry into the current output, rolling at target. */
static bool
emit_entry(Exec *x, const EntryHdr *h, int32_t spec_id, int32_t content)
{
	const char *part = (const char *) (h + 1);
	const uint8_t *raw = (const uint8_t *) part + h->part_len;
	IcebergAvroWField f[5];
	IcebergAvroWValue df;
	int			n;

	if (x->w == NULL && !out_start(x))
		return false;
	memset(&df, 0, sizeof(df));
	df.kind = AVW_RAW;
	df.p = raw;
	df.len = h->raw_len;
	n = iceberg_manifest_entry_fields(f, ICEBERG_STATUS_EXISTING, h->snapshot_id, 2,
									  h->seq, h->file_seq, &df);
	if (!iceberg_avro_writer_add(x->w, f, n, x->err))
		return false;
	x->out_files++;
	x->out_rows += h->records;
	if (h->seq < x->out_min_seq)
		x->out_min_seq = h->seq;
	if (!x->summ_bad && x->ntypes > 0 &&
		!iceberg_part_sum_add(x->summ, x->types, x->ntypes, part, h->part_len, &x->tmp, &x->summ_bad))
		return oom(x->err);
	x->res->entries_rewritten++;
	if (iceberg_avro_writer_size(x->w) >= x->plan->target_size_bytes)
		return out_finish(x, spec_id, content);
	return true;
}

static const char *sort_base;

static int
cmp_entries(const void *a, const void *b)
{
	const EntryHdr *ha = (const EntryHdr *) (sort_base + *(const size_t *) a);
	const EntryHdr *hb = (const EntryHdr *) (sort_base + *(const size_t *) b);
	int			c = iceberg_bytes_cmp((const char *) (ha + 1), ha->part_len,
									  (const char *) (hb + 1), hb->part_len);

	if (c != 0)
		return c;
	return ha->order < hb->order ? -1 : ha->order > hb->order ? 1 : 0;
}

/* Sort the held chunk by partition and write it out. */
static bool
flush_chunk(Exec *x, int32_t spec_id, int32_t content)
{
	size_t		i;

	if (x->nidx == 0)
		return true;
	x->res->cluster_chunks++;
	sort_base = x->arena.data;
	qsort(x->idx, x->nidx, sizeof(size_t), cmp_entries);
	for (i = 0; i < x->nidx; i++)
		if (!emit_entry(x, (const EntryHdr *) (x->arena.data + x->idx[i]), spec_id, content))
			return false;
	x->nidx = 0;
	x->arena.len = 0;
	return true;
}

/* Hold one live entry for clustering; flushes the chunk at the budget. */
static bool
hold_entry(Exec *x, const IcebergManifestEntry *e, const uint8_t *raw, size_t raw_len,
		   int32_t spec_id, int32_t content)
{
	size_t		need = sizeof(EntryHdr) + e->partition_len + raw_len;
	size_t		budget = (size_t) x->plan->memory_budget_bytes;
	EntryHdr	h;
	size_t		held;

	need = (need + 7) & ~(size_t) 7;
	if (x->nidx > 0 &&
		x->arena.len + need + (x->nidx + 1) * sizeof(size_t) > budget)
	{
		if (!flush_chunk(x, spec_id, content))
			return false;
	}
	if (x->nidx == x->idx_alloc)
	{
		size_t		na = x->idx_alloc ? x->idx_alloc * 2 : 1024;
		size_t	   *ni;

		if (na * sizeof(size_t) > budget && x->idx_alloc * sizeof(size_t) < budget)
			na = budget / sizeof(size_t) + 1;
		ni = io_realloc(x->idx, na * sizeof(size_t));
		if (ni == NULL)
			return oom(x->err);
		x->idx = ni;
		x->idx_alloc = na;
	}
	if (x->arena.cap < x->arena.len + need + 1)
	{
		/* grow by doubling, but not past the budget (unless one entry) */
		size_t		want = x->arena.cap ? x->arena.cap * 2 : 64 * 1024;
		char	   *nd;

		if (want > budget)
			want = budget;
		if (want < x->arena.len + need + 1)
			want = x->arena.len + need + 1;
		nd = io_realloc(x->arena.data, want);
		if (nd == NULL)
			return oom(x->err);
		x->arena.data = nd;
		x->arena.cap = want;
	}
	memset(&h, 0, sizeof(h));
	h.snapshot_id = e->snapshot_id;
	h.seq = e->sequence_number;
	h.file_seq = e->file_sequence_number;
	h.records = e->record_count;
	h.order = x->order++;
	h.part_len = (uint32_t) e->partition_len;
	h.raw_len = (uint32_t) raw_len;
	x->idx[x->nidx++] = x->arena.len;
	memcpy(x->arena.data + x->arena.len, &h, sizeof(h));
	memcpy(x->arena.data + x->arena.len + sizeof(h), e->partition, e->partition_len);
	memcpy(x->arena.data + x->arena.len + sizeof(h) + e->partition_len, raw, raw_len);
	x->arena.len += need;
	held = x->arena.len + x->nidx * sizeof(size_t);
	if ((int64_t) held > x->res->cluster_peak_bytes)
		x->res->cluster_peak_bytes = (int64_t) held;
	return true;
}

/* Copy a reader's header metadata (without avro.*) into the group state. */
static bool
copy_meta(Exec *x, IcebergManifestReader *r)
{
	const IcebergKeyValue *kv;
	int			n = iceberg_manifest_header_all(r, &kv);
	int			i;

	x->meta = io_calloc((size_t) n + 1, sizeof(IcebergKeyValue));
	if (x->meta == NULL)
		return oom(x->err);
	for (i = 0; i < n; i++)
	{
		if (strncmp(kv[i].key, "avro.", 5) == 0)
			continue;
		x->meta[x->nmeta].key = iceberg_strdup(kv[i].key, x->err);
		x->meta[x->nmeta].value = iceberg_strdup(kv[i].value, x->err);
		x->nmeta++;
		if (x->meta[x->nmeta - 1].key == NULL || x->meta[x->nmeta - 1].value == NULL)
			return false;
	}
	return true;
}

static void
group_reset(Exec *x)
{
	io_free(x->schema);
	x->schema = NULL;
	iceberg_kv_free(x->meta, x->nmeta);
	x->meta = NULL;
	x->nmeta = 0;
	io_free(x->types);
	x->types = NULL;
	free_summ(x);
	x->ntypes = -1;
	iceberg_avro_writer_free(x->w);
	x->w = NULL;
	x->nidx = 0;
	x->arena.len = 0;
}

/* Append v as an Avro long (zigzag varint). */
static void
put_long(IcebergBuf *b, int64_t v)
{
	uint64_t	u = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
	uint8_t		out[10];
	size_t		n = 0;

	while (u >= 0x80)
	{
		out[n++] = (uint8_t) (u | 0x80);
		u >>= 7;
	}
	out[n++] = (uint8_t) u;
	iceberg_buf_append(b, out, n);
}

/*
 * *patch = e's data_file bytes with its null first_row_id replaced by
 * value (branch: the union's index of "long"); every other byte is copied
 * (write_internal.h; compaction's commit uses it too).
 */
bool
iceberg_data_file_with_first_row_id(IcebergBuf *patch, const IcebergManifestEntry *e,
									int branch, int64_t value, TmsError *err)
{
	size_t		off = e->raw_first_row_id_off;
	size_t		len = e->raw_first_row_id_len;

	if (len == 0 || off + len > e->raw_data_file_len)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "data file without first_row_id");
		tms_error_detail(err, "Entry \"%s\".", e->file_path);
		return false;
	}
	patch->len = 0;
	iceberg_buf_append(patch, e->raw_data_file, off);
	put_long(patch, branch);
	put_long(patch, value);
	iceberg_buf_append(patch, e->raw_data_file + off + len,
					   e->raw_data_file_len - off - len);
	if (patch->oom)
		return oom(err);
	return true;
}

/* Merge the manifests of group g. */
static bool
process_group(Exec *x, int g)
{
	const IcebergRewritePlan *p = x->plan;
	const IcebergRewriteGroup *grp = &p->groups[g];
	int			i;

	for (i = 0; i < p->nmanifests; i++)
	{
		const IcebergRewriteManifest *m = &p->manifests[i];
		IcebergManifestReader *r;
		IcebergManifestFile mf;
		const IcebergManifestEntry *e;
		const char *schema;
		int64_t		next_row_id;
		int			rc;

		if (m->group != g)
			continue;
		if (iceberg_check_interrupt(x->io, x->err))
			return false;
		plan_manifest_file(m, &mf);
		if (!iceberg_manifest_open(x->io, &mf, x->md->format_version,
								   ICEBERG_READ_PARTITION | ICEBERG_READ_RAW, &r, x->err))
			return false;
		schema = iceberg_manifest_header(r, "avro.schema");
		if (schema == NULL ||
			iceberg_hash_bytes(ICEBERG_HASH_INIT, schema, strlen(schema)) != grp->schema_hash ||
			(x->schema != NULL && strcmp(schema, x->schema) != 0))
		{
			iceberg_manifest_close(r);
			tms_error_set(x->err, ICEBERG_ERR_CONFLICT,
						  "manifest changed since the rewrite was planned");
			tms_error_detail(x->err, "The writer schema of \"%s\" is not the planned one.", m->path);
			return false;
		}
		if (x->schema == NULL)
		{
			x->schema = iceberg_strdup(schema, x->err);
			if (x->schema == NULL || !copy_meta(x, r) ||
				!iceberg_partition_types(schema, x->t.lim.max_json_bytes, &x->types, &x->ntypes, x->err))
			{
				iceberg_manifest_close(r);
				return false;
			}
		}
		next_row_id = m->first_row_id;
		while ((rc = iceberg_manifest_next(r, &e, x->err)) == 1)
		{
			const uint8_t *raw = e->raw_data_file;
			size_t		raw_len = e->raw_data_file_len;

			/*
			 * https://iceberg.apache.org/spec/#first-row-id-inheritance: a
			 * null first_row_id is the manifest's plus the record_count of
			 * the files before it whose first_row_id is null (any status)
			 */
			if (m->long_branch >= 0 && e->first_row_id < 0)
			{
				int64_t		inherited = next_row_id;

				if (e->record_count < 0 || next_row_id > INT64_MAX - e->record_count)
				{
					iceberg_manifest_close(r);
					tms_error_set(x->err, ICEBERG_ERR_MALFORMED, "first_row_id out of range");
					tms_error_detail(x->err, "Manifest \"%s\".", m->path);
					return false;
				}
				next_row_id += e->record_count;
				if (e->status != ICEBERG_STATUS_DELETED)
				{
					if (!iceberg_data_file_with_first_row_id(&x->patch, e, m->long_branch, inherited, x->err))
					{
						iceberg_manifest_close(r);
						return false;
					}
					raw = (const uint8_t *) x->patch.data;
					raw_len = x->patch.len;
				}
			}
			if (e->status == ICEBERG_STATUS_DELETED)
			{
				x->res->entries_dropped++;
				continue;
			}
			if (x->md->format_version >= 2 &&
				(e->sequence_number < 0 || e->file_sequence_number < 0))
			{
				iceberg_manifest_close(r);
				tms_error_set(x->err, ICEBERG_ERR_MALFORMED,
							  "manifest entry without a sequence number");
				tms_error_detail(x->err, "Entry \"%s\" of \"%s\" has no sequence number and cannot inherit one.",
								 e->file_path, m->path);
				return false;
			}
			if (raw_len > UINT32_MAX || e->partition_len > UINT32_MAX)
			{
				iceberg_manifest_close(r);
				tms_error_set(x->err, ICEBERG_ERR_LIMIT, "manifest entry too large");
				return false;
			}
			if (!hold_entry(x, e, raw, raw_len, grp->spec_id, grp->content))
			{
				iceberg_manifest_close(r);
				return false;
			}
		}
		iceberg_manifest_close(r);
		if (rc < 0)
			return false;
		x->res->manifests_replaced++;
	}
	if (!flush_chunk(x, grp->spec_id, grp->content) ||
		!out_finish(x, grp->spec_id, grp->content))
		return false;
	return true;
}

/* Write the new manifest list; its path into *path. */
static bool
write_list(Exec *x, char **path_out)
{
	const IcebergRewritePlan *p = x->plan;
	const IcebergSnapshot *snap = iceberg_metadata_current_snapshot(x->md);
	IcebergManifestListReader *lr;
	IcebergAvroWriter *lw;
	const IcebergManifestFile *mf;
	int			i,
				rc;
	bool		ok = false;

	if (!iceberg_manifest_list_begin(x->io, x->md, snap, p->base_snapshot_id, &x->t,
									 &lr, &lw, x->err))
		return false;
	for (i = 0; i < x->nnews; i++)
		if (!iceberg_manifest_list_add_new(lw, &x->news[i], x->t.seq, x->t.snapshot_id, x->err))
			goto done;
	i = 0;
	while ((rc = iceberg_manifest_list_next(lr, &mf, x->err)) == 1)
	{
		if (i >= p->nmanifests || strcmp(mf->manifest_path, p->manifests[i].path) != 0)
		{
			tms_error_set(x->err, ICEBERG_ERR_CONFLICT,
						  "manifest list changed since the rewrite was planned");
			tms_error_detail(x->err, "Manifest %d is \"%s\".", i, mf->manifest_path);
			goto done;
		}
		if (p->manifests[i].group < 0 &&
			!iceberg_avro_writer_add_raw(lw, mf->raw, mf->raw_len, x->err))
			goto done;
		i++;
	}
	if (rc < 0)
		goto done;
	if (i != p->nmanifests)
	{
		tms_error_set(x->err, ICEBERG_ERR_CONFLICT,
					  "manifest list changed since the rewrite was planned");
		goto done;
	}
	ok = iceberg_manifest_list_end(&x->t, lw, x->wr, &x->res->written, &x->res->nwritten,
								   path_out, x->err);
done:
	iceberg_avro_writer_free(lw);
	iceberg_manifest_list_close(lr);
	return ok;
}

/* The snapshot summary. */
static bool
fill_summary(Exec *x, const IcebergSnapshot *parent)
{
	IcebergNewSnapshot *s = &x->res->snapshot;
	int			ntotal = 0,
				i;
	char		num[32];
	int64_t		vals[4];
	static const char *const keys[4] = {"manifests-created", "manifests-kept",
	"manifests-replaced", "entries-processed"};

	for (i = 0; i < parent->nsummary; i++)
		if (strncmp(parent->summary[i].key, "total-", 6) == 0)
			ntotal++;
	s->summary = io_calloc((size_t) ntotal + 4, sizeof(IcebergKeyValue));
	if (s->summary == NULL)
		return oom(x->err);
	vals[0] = x->res->manifests_added;
	vals[1] = x->plan->nkept;
	vals[2] = x->res->manifests_replaced;
	vals[3] = x->res->entries_rewritten;
	for (i = 0; i < 4; i++)
	{
		snprintf(num, sizeof(num), "%" PRId64, vals[i]);
		if (!iceberg_kv_set(s->summary, &s->nsummary, keys[i], num, true, x->err))
			return false;
	}
	for (i = 0; i < parent->nsummary; i++)
		if (strncmp(parent->summary[i].key, "total-", 6) == 0 &&
			!iceberg_kv_set(s->summary, &s->nsummary, parent->summary[i].key,
							parent->summary[i].value, true, x->err))
			return false;
	return true;
}

/* See rewrite_manifests.h. */
bool
iceberg_rewrite_execute(const IcebergFileIO *io, const IcebergWriter *w,
						const IcebergTableMetadata *md,
						const IcebergRewritePlan *plan, int64_t new_snapshot_id,
						IcebergRewriteResult *res, TmsError *err)
{
	Exec		x;
	const IcebergSnapshot *snap;
	char	   *list_path = NULL;
	int			g;
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
	if (io == NULL || w == NULL || w->write == NULL || plan == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "rewrite needs a file io, a writer and a plan");
		return false;
	}
	if (!check_table(md, &snap, err))
		return false;
	if (md->format_version >= 3 && snap != NULL && snap->first_row_id < 0)
	{
		char		id[32];

		snprintf(id, sizeof(id), "%" PRId64, snap->snapshot_id);
		return refuse_unassigned(err, "Snapshot", id);
	}
	if (md->current_snapshot_id != plan->base_snapshot_id)
	{
		tms_error_set(err, ICEBERG_ERR_CONFLICT,
					  "the table's current snapshot is not the one the rewrite was planned on");
		tms_error_detail(err, "Planned on snapshot %" PRId64 ", current is %" PRId64 ".",
						 plan->base_snapshot_id, md->current_snapshot_id);
		return false;
	}
	if (snap == NULL || plan->nreplaced == 0 || plan->ngroups == 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "the rewrite plan replaces no manifest");
		return false;
	}
	if (new_snapshot_id <= 0 || iceberg_metadata_snapshot(md, new_snapshot_id) != NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid new snapshot id %" PRId64, new_snapshot_id);
		return false;
	}
	if (md->location == NULL || md->location[0] == '\0')
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "table metadata without a location");
		return false;
	}

	memset(&x, 0, sizeof(x));
	x.io = io;
	x.wr = w;
	x.md = md;
	x.plan = plan;
	x.res = res;
	x.err = err;
	x.ntypes = -1;
	if (!iceberg_write_target_init(&x.t, io, md, new_snapshot_id, err))
		return false;

	for (g = 0; g < plan->ngroups; g++)
	{
		if (!process_group(&x, g))
			goto done;
		group_reset(&x);
	}
	if (!write_list(&x, &list_path))
		goto done;

	if (!iceberg_new_snapshot_replace(&res->snapshot, &x.t, plan->base_snapshot_id,
									  plan->now_ms > 0 ? plan->now_ms : iceberg_now_ms(),
									  md->current_schema_id, &list_path, err) ||
		!fill_summary(&x, snap))
		goto done;
	/* https://iceberg.apache.org/spec/#snapshot-row-ids: no row is added */
	res->snapshot.row_lineage = x.t.first_row_id >= 0;
	res->snapshot.first_row_id = x.t.first_row_id;
	res->snapshot.added_rows = 0;
	ok = true;
done:
	io_free(list_path);
	group_reset(&x);
	for (g = 0; g < x.nnews; g++)
		iceberg_new_manifest_free(&x.news[g]);
	io_free(x.news);
	iceberg_buf_free(&x.arena);
	iceberg_buf_free(&x.tmp);
	iceberg_buf_free(&x.patch);
	io_free(x.idx);
	return ok;
}

void
iceberg_rewrite_result_free(IcebergRewriteResult *res)
{
	if (res == NULL)
		return;
	iceberg_write_result_free(res->written, res->nwritten, &res->snapshot);
	memset(res, 0, sizeof(*res));
}

/* See rewrite_manifests.h. */
int64_t
iceberg_new_snapshot_id(const IcebergTableMetadata *md)
{
	int			tries;

	for (tries = 0; tries < 100; tries++)
	{
		uint64_t	v;
		int64_t		id;

		if (!iceberg_random_bytes(&v, sizeof(v), NULL))
			return 0;
		id = (int64_t) (v & INT64_MAX);
		if (id > 0 && (md == NULL || iceberg_metadata_snapshot(md, id) == NULL))
			return id;
	}
	return 0;
}
