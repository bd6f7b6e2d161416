/*-------------------------------------------------------------------------
 *
 * posdel_plan.c
 *	  The rewrite of position delete files, the plain-C half (posdel.h
 *	  states the semantics): the plan, the group line's parts that differ
 *	  from compaction's (the delete files' schema and order, the data files
 *	  kept), the check of those data files at commit time, and the metrics
 *	  a position delete file's entry keeps.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path.  Manifests are read with the layer's
 * streaming readers; compaction's rules (options, the packer and its
 * bounds on a group's bytes and files, group sizes, output counts) are
 * compact_plan.c's, called here.
 *
 * src/iceberg/compact/posdel_plan.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/posdel.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/iceberg_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEEP		10000000
#define MAX_KEEP_PATH	4096

/* ---------------------------------------------------------------------
 * The parts of a group line
 * ---------------------------------------------------------------------
 */

/* Iceberg's position delete schema (MetadataColumns.DELETE_FILE_PATH/POS) */
const char *const compact_posdel_schema_json =
"{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
"{\"id\":2147483546,\"name\":\"file_path\",\"required\":true,\"type\":\"string\"},"
"{\"id\":2147483545,\"name\":\"pos\",\"required\":true,\"type\":\"long\"}]}";

static IcebergSortField posdel_fields[2] = {
	{ICEBERG_POS_PATH_ID, (char *) "identity", false, true},
	{ICEBERG_POS_POS_ID, (char *) "identity", false, true},
};

/* the order the spec requires of position delete files: file_path, pos */
const IcebergSortOrder compact_posdel_order = {0, false, 2, posdel_fields};

/* MetricsConfig.forPositionDelete: full for both */
const IcebergCompactJobMetric iceberg_posdel_metrics[ICEBERG_POSDEL_NMETRICS] = {
	{ICEBERG_POS_PATH_ID, ICEBERG_METRICS_FULL, 0},
	{ICEBERG_POS_POS_ID, ICEBERG_METRICS_FULL, 0},
};

struct json_t *
compact_posdel_keep_json(const IcebergCompactGroup *gr)
{
	json_t	   *a = json_array();
	int			k;

	for (k = 0; a != NULL && k < gr->nkeep; k++)
		if (json_array_append_new(a, json_pack("{s:s, s:I}", "path", gr->keep[k].path,
											   "seq", (json_int_t) gr->keep[k].seq)) != 0)
		{
			json_decref(a);
			a = NULL;
		}
	return a;
}

bool
compact_posdel_keep_parse(struct json_t *a, IcebergPosdelKeep **keep, int *nkeep, TmsError *err)
{
	size_t		i;

	*keep = NULL;
	*nkeep = 0;
	if (!json_is_array(a) || json_array_size(a) > MAX_KEEP)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: keep");
		return false;
	}
	*keep = io_calloc(json_array_size(a) + 1, sizeof(IcebergPosdelKeep));
	if (*keep == NULL)
		return compact_oom(err);
	for (i = 0; i < json_array_size(a); i++)
	{
		json_t	   *o = json_array_get(a, i);
		const char *path = json_string_value(json_object_get(o, "path"));
		json_t	   *seq = json_object_get(o, "seq");

		if (path == NULL || strlen(path) > MAX_KEEP_PATH || !json_is_integer(seq) ||
			json_integer_value(seq) < 0)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: keep");
			return false;
		}
		(*keep)[*nkeep].path = io_strdup(path);
		if ((*keep)[*nkeep].path == NULL)
			return compact_oom(err);
		(*keep)[(*nkeep)++].seq = (int64_t) json_integer_value(seq);
	}
	return true;
}

/* ---------------------------------------------------------------------
 * The metrics of a new delete file's entry
 * ---------------------------------------------------------------------
 */

bool
iceberg_posdel_metric_kept(const IcebergCompactOutput *o, const IcebergColumnMetrics *c,
						   int which)
{
	int			i;

	if (c->id != ICEBERG_POS_PATH_ID && c->id != ICEBERG_POS_POS_ID)
		return true;
	if (which <= 3)
		return false;
	for (i = 0; i < o->nmetrics; i++)
	{
		const IcebergColumnMetrics *m = &o->metrics[i];

		if (m->id == ICEBERG_POS_PATH_ID)
			return m->has_lower && m->has_upper && m->lower_len == m->upper_len &&
				(m->lower_len == 0 || memcmp(m->lower, m->upper, m->lower_len) == 0);
	}
	return false;
}

/* ---------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------
 */

typedef struct PDel
{
	char	   *path;
	int64_t		size;
	int64_t		records;
	int64_t		seq;
	char	   *referenced;
	int64_t		dv_offset;		/* v3: a deletion vector's blob; -1: a file */
	int64_t		dv_length;
	int			part;
	bool		dangling;
} PDel;

typedef struct PLive
{
	char	   *path;
	int64_t		seq;
	int			part;
} PLive;

typedef struct PPart
{
	char	   *key;			/* "spec|partition", owned */
	int32_t		spec_id;
	char	   *partition;
	int		   *dels;			/* indexes into dels, in manifest order */
	int			ndels;
	int			dels_alloc;
	int		   *live;			/* indexes into live */
	int			nlive;
	int			live_alloc;
	int64_t		min_live_seq;
} PPart;

typedef struct PosPlanner
{
	IcebergCompactPlan *p;
	TmsError   *err;
	PDel	   *dels;
	int			ndels;
	int			dels_alloc;
	PLive	   *live;
	int			nlive;
	int			live_alloc;
	StrMap		live_ix;		/* live data path -> index into live */
	PPart	   *parts;
	int			nparts;
	int			parts_alloc;
	StrMap		part_ix;		/* key -> index into parts */
	int			files_alloc;
} PosPlanner;

/* Grow *arr (elements of size sz) to hold n + 1. */
static bool
grow(void **arr, int n, int *alloc, size_t sz)
{
	void	   *nw;
	int			na;

	if (n < *alloc)
		return true;
	na = *alloc ? *alloc * 2 : 16;
	if (na > INT32_MAX / 4)
		return false;
	nw = io_realloc(*arr, sz * (size_t) na);
	if (nw == NULL)
		return false;
	*arr = nw;
	*alloc = na;
	return true;
}

static void
planner_free(PosPlanner *pl)
{
	int			i;

	for (i = 0; i < pl->ndels; i++)
	{
		io_free(pl->dels[i].path);
		io_free(pl->dels[i].referenced);
	}
	io_free(pl->dels);
	for (i = 0; i < pl->nlive; i++)
		io_free(pl->live[i].path);
	io_free(pl->live);
	for (i = 0; i < pl->nparts; i++)
	{
		io_free(pl->parts[i].key);
		io_free(pl->parts[i].partition);
		io_free(pl->parts[i].dels);
		io_free(pl->parts[i].live);
	}
	io_free(pl->parts);
	iceberg_strmap_free(&pl->live_ix);
	iceberg_strmap_free(&pl->part_ix);
}

/* A live position delete file of a selected partition. */
static bool
add_del(PosPlanner *pl, const IcebergManifestEntry *e)
{
	char	   *key = compact_part_key(e->spec_id, e->partition, e->partition_len);
	int			ix;
	PDel	   *d;
	PPart	   *pt;

	if (key == NULL)
		return compact_oom(pl->err);
	ix = compact_map_get(&pl->part_ix, key);
	if (ix >= 0)
		io_free(key);
	else
	{
		if (!grow((void **) &pl->parts, pl->nparts, &pl->parts_alloc, sizeof(PPart)))
		{
			io_free(key);
			return compact_oom(pl->err);
		}
		pt = &pl->parts[pl->nparts];
		memset(pt, 0, sizeof(*pt));
		pt->key = key;
		pt->spec_id = e->spec_id;
		pt->min_live_seq = INT64_MAX;
		pt->partition = io_malloc(e->partition_len + 1);
		if (pt->partition == NULL)
		{
			io_free(key);
			return compact_oom(pl->err);
		}
		memcpy(pt->partition, e->partition, e->partition_len);
		pt->partition[e->partition_len] = '\0';
		ix = pl->nparts++;
		if (!compact_map_put(&pl->part_ix, key, ix))
			return compact_oom(pl->err);
	}
	pt = &pl->parts[ix];
	if (!grow((void **) &pl->dels, pl->ndels, &pl->dels_alloc, sizeof(PDel)) ||
		!grow((void **) &pt->dels, pt->ndels, &pt->dels_alloc, sizeof(int)))
		return compact_oom(pl->err);
	d = &pl->dels[pl->ndels];
	memset(d, 0, sizeof(*d));
	d->path = io_strdup(e->file_path);
	d->referenced = e->referenced_data_file ? io_strdup(e->referenced_data_file) : NULL;
	if (d->path == NULL || (e->referenced_data_file && d->referenced == NULL))
	{
		io_free(d->path);
		io_free(d->referenced);
		return compact_oom(pl->err);
	}
	d->size = e->file_size_in_bytes;
	d->records = e->record_count;
	d->seq = e->sequence_number;
	d->dv_offset = e->content_offset >= 0 && e->content_size_in_bytes > 0 ? e->content_offset : -1;
	d->dv_length = d->dv_offset >= 0 ? e->content_size_in_bytes : -1;
	d->part = ix;
	pt->dels[pt->ndels++] = pl->ndels++;
	return true;
}

/* A live data file: kept when its partition has delete files. */
static bool
add_live(PosPlanner *pl, const IcebergManifestEntry *e)
{
	char	   *key = compact_part_key(e->spec_id, e->partition, e->partition_len);
	int			ix;
	PPart	   *pt;
	PLive	   *l;

	if (key == NULL)
		return compact_oom(pl->err);
	ix = compact_map_get(&pl->part_ix, key);
	io_free(key);
	if (ix < 0)
		return true;
	pt = &pl->parts[ix];
	if (!grow((void **) &pl->live, pl->nlive, &pl->live_alloc, sizeof(PLive)) ||
		!grow((void **) &pt->live, pt->nlive, &pt->live_alloc, sizeof(int)))
		return compact_oom(pl->err);
	l = &pl->live[pl->nlive];
	l->path = io_strdup(e->file_path);
	l->seq = e->sequence_number;
	l->part = ix;
	if (l->path == NULL)
		return compact_oom(pl->err);
	if (l->seq < pt->min_live_seq)
		pt->min_live_seq = l->seq;
	if (!compact_map_put(&pl->live_ix, l->path, pl->nlive))
	{
		io_free(l->path);
		return compact_oom(pl->err);
	}
	pt->live[pt->nlive++] = pl->nlive;
	pl->nlive++;
	return true;
}

/* Read the delete manifests (pass 0) or the data manifests (pass 1). */
static bool
read_pass(PosPlanner *pl, const IcebergFileIO *io, const IcebergTableMetadata *md,
		  const IcebergCompactOptions *opt, const ListRec *recs, int nrecs, int pass)
{
	IcebergCompactPlan *p = pl->p;
	int			i;

	for (i = 0; i < nrecs; i++)
	{
		IcebergManifestReader *r;
		const IcebergManifestEntry *e;
		int			rc;
		bool		ok = true;

		if ((recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DELETES) != (pass == 0))
			continue;
		if (iceberg_check_interrupt(io, pl->err) ||
			!iceberg_manifest_open(io, &recs[i].mf, md->format_version, ICEBERG_READ_PARTITION,
								   &r, pl->err))
			return false;
		while (ok && (rc = iceberg_manifest_next(r, &e, pl->err)) == 1)
		{
			if (e->status == ICEBERG_STATUS_DELETED)
				continue;
			if (pass == 1 && e->content == ICEBERG_CONTENT_DATA)
			{
				p->data_files++;
				p->data_bytes += e->file_size_in_bytes > 0 ? e->file_size_in_bytes : 0;
				ok = add_live(pl, e);
			}
			else if (pass == 0 && e->content == ICEBERG_CONTENT_POSITION_DELETES)
			{
				if (opt->where != NULL &&
					!iceberg_partition_filter_match(opt->where, e->spec_id, e->partition,
													e->partition_len))
					p->filtered_out++;
				else
					ok = add_del(pl, e);
			}
		}
		iceberg_manifest_close(r);
		if (!ok || rc < 0)
			return false;
	}
	return true;
}

/* Is delete file d proven dangling: can no live data file match it? */
static bool
proven_dangling(const PosPlanner *pl, const PDel *d)
{
	const PPart *pt = &pl->parts[d->part];

	if (d->referenced != NULL)
	{
		int			k = compact_map_get(&pl->live_ix, d->referenced);

		return k < 0 || pl->live[k].seq > d->seq || pl->live[k].part != d->part;
	}
	return pt->nlive == 0 || pt->min_live_seq > d->seq;
}

/* Sort the partitions by (spec, partition text). */
static int
cmp_parts(const void *a, const void *b)
{
	const PPart *x = a;
	const PPart *y = b;

	if (x->spec_id != y->spec_id)
		return x->spec_id < y->spec_id ? -1 : 1;
	return strcmp(x->partition, y->partition);
}

/*
 * The data files group gr of partition pt keeps: those its files name as
 * referenced_data_file when each names one, else every live data file of
 * the partition not newer than its newest delete file.
 */
static bool
group_keep(PosPlanner *pl, const PPart *pt, IcebergCompactGroup *gr, const int *cands,
		   int n, int64_t max_seq)
{
	bool		all_ref = true;
	int			i,
				alloc = 0;

	for (i = 0; i < n; i++)
		all_ref &= pl->dels[cands[i]].referenced != NULL;
	for (i = 0; i < (all_ref ? n : pt->nlive); i++)
	{
		int			k = i;
		int			j;
		bool		dup = false;

		if (all_ref)
		{
			k = compact_map_get(&pl->live_ix, pl->dels[cands[i]].referenced);
			if (k < 0 || pl->live[k].part != pl->dels[cands[i]].part ||
				pl->live[k].seq > pl->dels[cands[i]].seq)
				continue;
			for (j = 0; j < gr->nkeep && !dup; j++)
				dup = strcmp(gr->keep[j].path, pl->live[k].path) == 0;
			if (dup)
				continue;
		}
		else
		{
			k = pt->live[i];
			if (pl->live[k].seq > max_seq)
				continue;
		}
		if (!grow((void **) &gr->keep, gr->nkeep, &alloc, sizeof(IcebergPosdelKeep)))
			return compact_oom(pl->err);
		gr->keep[gr->nkeep].path = io_strdup(pl->live[k].path);
		if (gr->keep[gr->nkeep].path == NULL)
			return compact_oom(pl->err);
		gr->keep[gr->nkeep++].seq = pl->live[k].seq;
	}
	return true;
}

/* Plan file f is deletion vector d: its blob, data file and key. */
static bool
add_dv_file(PosPlanner *pl, const PDel *d, IcebergCompactFile *f)
{
	char		kb[COMPACT_DV_KEY_MAX];
	const char *key = compact_dv_key(d->path, d->dv_offset, kb, sizeof(kb));

	if (key == NULL || d->referenced == NULL)
	{
		tms_error_set(pl->err, ICEBERG_ERR_MALFORMED,
					  "a deletion vector without its data file or with too long a path");
		tms_error_detail(pl->err, "%.1000s", d->path);
		return false;
	}
	f->dv_offset = d->dv_offset;
	f->dv_length = d->dv_length;
	f->referenced = io_strdup(d->referenced);
	f->dv_key = io_strdup(key);
	return (f->referenced != NULL && f->dv_key != NULL) || compact_oom(pl->err);
}

/* Add the group of cands[0 .. n) (bytes, records, reasons) of partition pt. */
static bool
add_group(PosPlanner *pl, const PPart *pt, const int *cands, int n, int64_t bytes,
		  int64_t records, unsigned reasons)
{
	IcebergCompactPlan *p = pl->p;
	IcebergCompactGroup *ng = io_realloc(p->groups, sizeof(*ng) * (size_t) (p->ngroups + 1));
	IcebergCompactGroup *g;
	int64_t		max_seq = 0;
	int			i;

	if (ng == NULL)
		return compact_oom(pl->err);
	p->groups = ng;
	g = &ng[p->ngroups++];
	memset(g, 0, sizeof(*g));
	g->partition = io_strdup(pt->partition);
	if (g->partition == NULL)
		return compact_oom(pl->err);
	g->spec_id = pt->spec_id;
	g->first = p->nfiles;
	g->bytes = bytes;
	g->records = records;
	g->reasons = reasons;
	/* v3: one Puffin file of the group's deletion vectors */
	g->expected_outputs = p->format_version >= 3 ? 1 : compact_expected_outputs(p, bytes);
	for (i = 0; i < n; i++)
	{
		const PDel *d = &pl->dels[cands[i]];
		IcebergCompactFile *f;

		if (!grow((void **) &p->files, p->nfiles, &pl->files_alloc, sizeof(IcebergCompactFile)))
			return compact_oom(pl->err);
		f = &p->files[p->nfiles];
		memset(f, 0, sizeof(*f));
		f->path = io_strdup(d->path);
		f->partition = io_strdup(pt->partition);
		if (f->path == NULL || f->partition == NULL)
		{
			io_free(f->path);
			io_free(f->partition);
			return compact_oom(pl->err);
		}
		p->nfiles++;
		g->nfiles++;
		f->size = d->size;
		f->records = d->records;
		f->seq = d->seq;
		f->manifest = -1;
		f->spec_id = pt->spec_id;
		if (d->dv_offset >= 0 && !add_dv_file(pl, d, f))
			return false;
		g->ndangling += d->dangling;
		if (d->seq > max_seq)
			max_seq = d->seq;
	}
	return group_keep(pl, pt, g, cands, n, max_seq);
}

/* A partition being packed: its planner, partition and candidates. */
typedef struct PosPack
{
	PosPlanner *pl;
	const PPart *pt;
	const int  *cands;
} PosPack;

/* A candidate's size, records and whether it makes its group worth it. */
static void
pack_item(void *arg, int i, CompactPackItem *out)
{
	PosPack    *pp = arg;
	const PDel *d = &pp->pl->dels[pp->cands[i]];

	out->size = d->size;
	out->records = d->records;
	out->reasons = d->dangling ? ICEBERG_COMPACT_DANGLING : 0;
}

/* The group of candidates [start, end), worth rewriting: added. */
static bool
pack_group(void *arg, int start, int end, int64_t bytes, int64_t records, unsigned reasons)
{
	PosPack    *pp = arg;

	return add_group(pp->pl, pp->pt, pp->cands + start, end - start, bytes, records, reasons);
}

/*
 * Pack a partition's candidates into groups with compaction's packer (its
 * bounds: max-file-group-size-bytes and max_group_files), keep those
 * worth rewriting.
 */
static bool
pack_part(PosPlanner *pl, const IcebergCompactOptions *opt, const PPart *pt,
		  const int *cands, int ncands)
{
	PosPack		pp = {pl, pt, cands};

	return compact_pack(pl->p, opt, ncands, pack_item, pack_group, &pp);
}

/* The options with the delete files' target size (Iceberg's default). */
static void
posdel_options(const IcebergTableMetadata *md, const IcebergCompactOptions *opt,
			   IcebergCompactOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->min_file_size_bytes = -1;
	o->max_file_size_bytes = -1;
	o->output_spec_id = -1;
	if (opt != NULL)
		*o = *opt;
	if (o->target_file_size_bytes <= 0)
	{
		const char *prop = iceberg_metadata_property(md, "write.delete.target-file-size-bytes");
		char	   *end;
		long long	v = prop ? strtoll(prop, &end, 10) : 0;

		o->target_file_size_bytes = (prop && end != prop && *end == '\0' && v > 0) ?
			(int64_t) v : ICEBERG_POSDEL_DEFAULT_TARGET;
	}
}

bool
iceberg_posdel_check_options(const IcebergTableMetadata *md, const IcebergCompactOptions *opt,
							 TmsError *err)
{
	IcebergCompactOptions o;

	tms_error_clear(err);
	if (md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no table metadata given");
		return false;
	}
	posdel_options(md, opt, &o);
	return iceberg_compact_check_options(md, &o, err);
}

/*
 * Format v3 (https://iceberg.apache.org/spec/#deletion-vectors: at most one
 * deletion vector per data file in a snapshot, position delete files
 * merged into it): a partition whose delete files are all deletion vectors,
 * one per data file, none dangling, is left alone; any other is one group
 * of all its delete files (a data file's deletes meet in one group), whose
 * rows become one deletion vector per data file, all in one Puffin file.
 * The sizes, min-input-files and the group bounds do not apply.
 */
static bool
plan_v3_part(PosPlanner *pl, const PPart *pt, const int *cands, int n)
{
	StrMap		seen = {0};
	int64_t		bytes = 0,
				records = 0;
	unsigned	reasons = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		const PDel *d = &pl->dels[cands[i]];

		bytes += d->size;
		records += d->records;
		if (d->dangling)
			reasons |= ICEBERG_COMPACT_DANGLING;
		if (d->dv_offset < 0 || d->referenced == NULL ||
			compact_map_get(&seen, d->referenced) >= 0)
			reasons |= ICEBERG_COMPACT_TO_DV;
		else if (!compact_map_put(&seen, d->referenced, i))
		{
			iceberg_strmap_free(&seen);
			return compact_oom(pl->err);
		}
	}
	iceberg_strmap_free(&seen);
	if (n == 0 || reasons == 0)
		return true;
	return add_group(pl, pt, cands, n, bytes, records, reasons);
}

/* The groups, partition by partition; the proven dangling files counted. */
static bool
plan_groups(PosPlanner *pl, const IcebergCompactOptions *opt)
{
	IcebergCompactPlan *p = pl->p;
	int		   *cands = io_calloc((size_t) pl->ndels + 1, sizeof(int));
	int			i,
				j;

	if (cands == NULL)
		return compact_oom(pl->err);
	if (pl->nparts > 1)
	{
		qsort(pl->parts, (size_t) pl->nparts, sizeof(PPart), cmp_parts);
		/* the moved partitions' indexes: the files' and live files' */
		for (i = 0; i < pl->nparts; i++)
		{
			for (j = 0; j < pl->parts[i].ndels; j++)
				pl->dels[pl->parts[i].dels[j]].part = i;
			for (j = 0; j < pl->parts[i].nlive; j++)
				pl->live[pl->parts[i].live[j]].part = i;
		}
	}
	for (i = 0; i < pl->nparts; i++)
	{
		const PPart *pt = &pl->parts[i];
		int			n = 0;

		for (j = 0; j < pt->ndels; j++)
		{
			PDel	   *d = &pl->dels[pt->dels[j]];

			d->dangling = proven_dangling(pl, d);
			p->dangling += d->dangling;
			if (p->rewrite_all || d->size < p->min_file_size_bytes ||
				d->size > p->max_file_size_bytes || d->dangling || p->format_version >= 3)
				cands[n++] = pt->dels[j];
		}
		p->candidates += n;
		if (p->format_version >= 3 ? !plan_v3_part(pl, pt, cands, n) :
			!pack_part(pl, opt, pt, cands, n))
		{
			io_free(cands);
			return false;
		}
	}
	io_free(cands);
	return true;
}

bool
iceberg_posdel_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					const IcebergCompactOptions *opt, IcebergCompactPlan **out, TmsError *err)
{
	const IcebergSnapshot *snap;
	IcebergCompactPlan *p;
	IcebergCompactOptions o;
	PosPlanner	pl;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	bool		ok;

	tms_error_clear(err);
	*out = NULL;
	if (io == NULL || md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no file io or table metadata given");
		return false;
	}
	if (!compact_check_table(md, &snap, err))
		return false;
	p = io_calloc(1, sizeof(IcebergCompactPlan));
	if (p == NULL)
		return compact_oom(err);
	memset(&pl, 0, sizeof(pl));
	pl.p = p;
	pl.err = err;
	p->rewrite_content = ICEBERG_CONTENT_POSITION_DELETES;
	p->format_version = md->format_version;
	p->base_snapshot_id = snap ? snap->snapshot_id : -1;
	p->base_sequence_number = snap ? snap->sequence_number : 0;
	posdel_options(md, opt, &o);
	ok = compact_resolve_options(p, md, &o, err);
	/* v1 has no delete files: nothing to do */
	if (ok && snap != NULL && md->format_version >= 2)
		ok = compact_read_list(io, md, snap, &recs, &nrecs, err) &&
			read_pass(&pl, io, md, &o, recs, nrecs, 0) &&
			(pl.nparts == 0 || read_pass(&pl, io, md, &o, recs, nrecs, 1)) &&
			plan_groups(&pl, &o);
	compact_free_recs(recs, nrecs);
	planner_free(&pl);
	if (!ok)
	{
		if (err->code == ICEBERG_OK)
			compact_oom(err);
		iceberg_compact_plan_free(p);
		return false;
	}
	*out = p;
	return true;
}

/* ---------------------------------------------------------------------
 * The commit's check of the data files pointed at
 * ---------------------------------------------------------------------
 */

/* The file_path bounds over a group's outputs; false when one has none. */
static bool
outputs_bounds(const IcebergCompactGroupOutput *g, const IcebergColumnMetrics **lo,
			   const IcebergColumnMetrics **hi)
{
	int			i,
				k;

	*lo = *hi = NULL;
	for (i = 0; i < g->noutputs; i++)
	{
		const IcebergColumnMetrics *m = NULL;

		for (k = 0; k < g->outputs[i].nmetrics && m == NULL; k++)
			if (g->outputs[i].metrics[k].id == ICEBERG_POS_PATH_ID)
				m = &g->outputs[i].metrics[k];
		if (m == NULL || !m->has_lower || !m->has_upper)
			return false;
		if (*lo == NULL || iceberg_bytes_cmp((const char *) m->lower, m->lower_len,
											 (const char *) (*lo)->lower, (*lo)->lower_len) < 0)
			*lo = m;
		if (*hi == NULL || iceberg_bytes_cmp((const char *) m->upper, m->upper_len,
											 (const char *) (*hi)->upper, (*hi)->upper_len) > 0)
			*hi = m;
	}
	return true;
}

bool
iceberg_posdel_check_live(const IcebergFileIO *io, const IcebergTableMetadata *md,
						  const IcebergSnapshot *snap, const IcebergCompactPlan *p,
						  const IcebergCompactGroupOutput *groups, int ngroups, TmsError *err)
{
	StrMap		want = {0};
	const char **paths = NULL;
	bool	   *found = NULL;
	int			n = 0,
				alloc = 0,
				i,
				j;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	bool		ok = false;

	/* v3: no second deletion vector for a data file (compact_dv.c) */
	if (p->format_version >= 3 &&
		!compact_dv_check_added(io, md, snap, p, groups, ngroups, err))
		return false;
	for (j = 0; j < ngroups; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[groups[j].group];
		const IcebergColumnMetrics *lo,
				   *hi;
		bool		bounded;

		if (groups[j].noutputs == 0)
			continue;			/* nothing kept: nothing pointed at */
		bounded = outputs_bounds(&groups[j], &lo, &hi);
		for (i = 0; i < gr->nkeep; i++)
		{
			const char *k = gr->keep[i].path;
			size_t		kl = strlen(k);

			if (bounded &&
				(iceberg_bytes_cmp(k, kl, (const char *) lo->lower, lo->lower_len) < 0 ||
				 iceberg_bytes_cmp(k, kl, (const char *) hi->upper, hi->upper_len) > 0))
				continue;
			if (compact_map_get(&want, k) >= 0)
				continue;
			if (!grow((void **) &paths, n, &alloc, sizeof(char *)) ||
				!compact_map_put(&want, k, n))
				goto nomem;
			paths[n++] = k;
		}
	}
	if (n == 0)
	{
		ok = true;
		goto done;
	}
	found = io_calloc((size_t) n, sizeof(bool));
	if (found == NULL || !compact_read_list(io, md, snap, &recs, &nrecs, err))
		goto nomem;
	for (i = 0; i < nrecs; i++)
	{
		IcebergManifestReader *r;
		const IcebergManifestEntry *e;
		int			rc;

		if (recs[i].mf.content != ICEBERG_MANIFEST_CONTENT_DATA)
			continue;
		if (iceberg_check_interrupt(io, err) ||
			!iceberg_manifest_open(io, &recs[i].mf, md->format_version, 0, &r, err))
			goto done;
		while ((rc = iceberg_manifest_next(r, &e, err)) == 1)
		{
			int			k;

			if (e->status != ICEBERG_STATUS_DELETED && e->content == ICEBERG_CONTENT_DATA &&
				(k = compact_map_get(&want, e->file_path)) >= 0)
				found[k] = true;
		}
		iceberg_manifest_close(r);
		if (rc < 0)
			goto done;
	}
	for (i = 0; i < n; i++)
		if (!found[i])
		{
			tms_error_set(err, ICEBERG_ERR_CONFLICT,
						  "a data file the rewritten position deletes point at is no longer live");
			tms_error_detail(err, "\"%s\" was removed or rewritten by another commit.", paths[i]);
			goto done;
		}
	ok = true;
	goto done;
nomem:
	if (err->code == ICEBERG_OK)
		compact_oom(err);
done:
	compact_free_recs(recs, nrecs);
	io_free(found);
	io_free(paths);
	iceberg_strmap_free(&want);
	return ok;
}
