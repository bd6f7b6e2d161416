/*-------------------------------------------------------------------------
 *
 * compact_plan.c
 *	  Data file compaction, the plain-C half, part one: the bin-pack plan,
 *	  the files a committed group may remove and the output directory,
 *	  plus the helpers the commit shares (compact_int.h); compact.h states
 *	  the semantics, the refusals and the memory bounds, compact_commit.c
 *	  holds the commit of one group.
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
 * src/iceberg/compact/compact_plan.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/write/write_internal.h"
#include "io/io.h"
#include "io/util/jsonmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TARGET			(512 * MIB)
#define DEFAULT_MAX_GROUP		(100 * 1024 * MIB)
#define DEFAULT_MIN_INPUTS		5
#define DEFAULT_DELETE_RATIO	0.3
#define DEFAULT_MAX_GROUP_FILES 100000
#define SPLIT_OVERHEAD			(5 * 1024)

bool
compact_oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

/* ---------------------------------------------------------------------
 * A map from strings to indexes (iceberg_strmap, keys borrowed)
 * ---------------------------------------------------------------------
 */

/* key -> value (a present key takes the new value).  False on OOM. */
bool
compact_map_put(StrMap *m, const char *key, int value)
{
	int64_t    *v;

	if (m->nslots == 0)
		m->borrow_keys = true;
	v = iceberg_strmap_put(m, key, value, NULL);
	if (v == NULL)
		return false;
	*v = value;
	return true;
}

/* The value of key, or -1. */
int
compact_map_get(const StrMap *m, const char *key)
{
	const int64_t *v = iceberg_strmap_get(m, key);

	return v != NULL ? (int) *v : -1;
}

/* Append v to a growable int array. */
static bool
int_push(int **arr, int *n, int *alloc, int v)
{
	if (*n == *alloc)
	{
		int			na = *alloc ? *alloc * 2 : 8;
		int		   *nw = io_realloc(*arr, sizeof(int) * (size_t) na);

		if (nw == NULL)
			return false;
		*arr = nw;
		*alloc = na;
	}
	(*arr)[(*n)++] = v;
	return true;
}

/* ---------------------------------------------------------------------
 * Checks shared by the plan and the commit
 * ---------------------------------------------------------------------
 */

bool
compact_check_table(const IcebergTableMetadata *md, const IcebergSnapshot **snap,
					TmsError *err)
{
	if (iceberg_write_check_table(md, "compaction", NULL, "", snap, err))
		return true;

	/*
	 * a v1 snapshot listing its manifests inline is read and replaced by a
	 * snapshot with a manifest list (compact_commit.c)
	 */
	if (err->code == ICEBERG_ERR_UNSUPPORTED && *snap != NULL &&
		(*snap)->manifest_list == NULL && md->format_version == 1)
	{
		tms_error_clear(err);
		return true;
	}
	return false;
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

/* An IcebergManifestFile to read a manifest of a list again. */
static void
copy_mf(const IcebergManifestFile *in, IcebergManifestFile *out)
{
	*out = *in;
	out->raw = NULL;
	out->raw_len = 0;
}

void
compact_free_recs(ListRec *r, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		io_free(r[i].path);
		io_free(r[i].raw);
	}
	io_free(r);
}

/* Read a snapshot's manifest list into an array (raw bytes too). */
bool
compact_read_list(const IcebergFileIO *io, const IcebergTableMetadata *md,
				  const IcebergSnapshot *snap, ListRec **out, int *nout, TmsError *err)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	ListRec    *recs = NULL;
	int			n = 0,
				alloc = 0,
				rc;

	*out = NULL;
	*nout = 0;
	if (!iceberg_manifest_list_open(io, md, snap, &lr, err))
		return false;
	while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
	{
		ListRec    *r;

		if (n == alloc)
		{
			int			na = alloc ? alloc * 2 : 64;
			ListRec    *nr = na < INT32_MAX / 2 ? io_realloc(recs, sizeof(ListRec) * (size_t) na) : NULL;

			if (nr == NULL)
			{
				compact_oom(err);
				rc = -1;
				break;
			}
			recs = nr;
			alloc = na;
		}
		r = &recs[n];
		memset(r, 0, sizeof(*r));
		copy_mf(mf, &r->mf);
		r->path = iceberg_strdup(mf->manifest_path, err);
		r->raw = mf->raw_len ? io_malloc(mf->raw_len) : NULL;
		n++;
		if (r->path == NULL || (mf->raw_len && r->raw == NULL))
		{
			compact_oom(err);
			rc = -1;
			break;
		}
		if (mf->raw_len)
			memcpy(r->raw, mf->raw, mf->raw_len);
		r->raw_len = mf->raw_len;
		r->mf.manifest_path = r->path;
	}
	iceberg_manifest_list_close(lr);
	if (rc < 0)
	{
		compact_free_recs(recs, n);
		return false;
	}
	*out = recs;
	*nout = n;
	return true;
}

/* ---------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------
 */

void
iceberg_compact_plan_free(IcebergCompactPlan *p)
{
	int			i;

	if (p == NULL)
		return;
	iceberg_sort_order_free(p->sort);
	io_free(p->remove_where);
	for (i = 0; i < p->ngroups; i++)
	{
		io_free(p->groups[i].partition);
		io_free(p->groups[i].deletes);
		for (int k = 0; k < p->groups[i].nkeep; k++)
			io_free(p->groups[i].keep[k].path);
		io_free(p->groups[i].keep);
	}
	io_free(p->groups);
	for (i = 0; i < p->nfiles; i++)
	{
		io_free(p->files[i].path);
		io_free(p->files[i].partition);
		io_free(p->files[i].deletes);
		io_free(p->files[i].referenced);
		io_free(p->files[i].dv_key);
	}
	io_free(p->files);
	for (i = 0; i < p->ndeletes; i++)
	{
		IcebergCompactDelete *d = &p->deletes[i];

		io_free(d->path);
		io_free(d->partition);
		io_free(d->equality_ids);
		io_free(d->referenced);
		io_free(d->groups);
		io_free(d->group_files);
	}
	io_free(p->deletes);
	for (i = 0; i < p->nmanifests; i++)
		io_free(p->manifests[i]);
	io_free(p->manifests);
	io_free(p);
}

/* Build state of a plan. */
typedef struct Planner
{
	IcebergCompactPlan *p;
	const IcebergTableMetadata *md;
	const IcebergCompactOptions *opt;
	const IcebergSchema *schema;
	TmsError   *err;
	StrMap		manifest_ix;	/* path -> index into p->manifests */
	int			manifests_alloc;
	int			deletes_alloc;
	int			files_alloc;
	/* deletes by (spec, partition): chains through next_in_part */
	StrMap		part_ix;		/* "spec|partition" -> first delete */
	char	  **part_keys;		/* owned keys of part_ix */
	int			npart_keys;
	int			part_keys_alloc;
	int		   *next_in_part;
	int		   *global;			/* global equality deletes */
	int			nglobal;
	int			global_alloc;
	/* candidates by partition */
	StrMap		cand_ix;		/* "spec|partition" -> index into cands */
	struct Cands
	{
		char	   *key;
		int32_t		spec_id;
		char	   *partition;
		int		   *files;
		int			nfiles;
		int			alloc;
	}		   *cands;
	int			ncands;
	int			cands_alloc;
	/* scratch */
	int		   *scratch;
	int			nscratch;
	int			scratch_alloc;
} Planner;

static void
planner_free(Planner *pl)
{
	int			i;

	iceberg_strmap_free(&pl->manifest_ix);
	iceberg_strmap_free(&pl->part_ix);
	for (i = 0; i < pl->npart_keys; i++)
		io_free(pl->part_keys[i]);
	io_free(pl->part_keys);
	io_free(pl->next_in_part);
	io_free(pl->global);
	iceberg_strmap_free(&pl->cand_ix);
	for (i = 0; i < pl->ncands; i++)
	{
		io_free(pl->cands[i].key);
		io_free(pl->cands[i].partition);
		io_free(pl->cands[i].files);
	}
	io_free(pl->cands);
	io_free(pl->scratch);
}

/* "spec|partition" (malloc'd). */
char *
compact_part_key(int32_t spec_id, const char *partition, size_t len)
{
	char	   *k = io_malloc(len + 16);

	if (k != NULL)
	{
		int			n = snprintf(k, 16, "%d|", (int) spec_id);

		memcpy(k + n, partition, len);
		k[n + len] = '\0';
	}
	return k;
}

/* The index of a manifest path in the plan (added when new). */
static int
manifest_index(Planner *pl, const char *path)
{
	IcebergCompactPlan *p = pl->p;
	int			i = compact_map_get(&pl->manifest_ix, path);

	if (i >= 0)
		return i;
	if (p->nmanifests == pl->manifests_alloc)
	{
		int			na = pl->manifests_alloc ? pl->manifests_alloc * 2 : 64;
		char	  **nm = io_realloc(p->manifests, sizeof(char *) * (size_t) na);

		if (nm == NULL)
			return -1;
		p->manifests = nm;
		pl->manifests_alloc = na;
	}
	p->manifests[p->nmanifests] = io_strdup(path);
	if (p->manifests[p->nmanifests] == NULL)
		return -1;
	if (!compact_map_put(&pl->manifest_ix, p->manifests[p->nmanifests], p->nmanifests))
	{
		io_free(p->manifests[p->nmanifests]);
		return -1;
	}
	return p->nmanifests++;
}

/* Add one live delete file of the base. */
static bool
add_delete(Planner *pl, const IcebergManifestEntry *e, int manifest)
{
	IcebergCompactPlan *p = pl->p;
	IcebergCompactDelete *d;
	int			ix = p->ndeletes;

	if (ix == pl->deletes_alloc)
	{
		int			na = pl->deletes_alloc ? pl->deletes_alloc * 2 : 16;
		IcebergCompactDelete *nd = io_realloc(p->deletes, sizeof(*nd) * (size_t) na);
		int		   *nn = io_realloc(pl->next_in_part, sizeof(int) * (size_t) na);

		if (nd != NULL)
			p->deletes = nd;
		if (nn != NULL)
			pl->next_in_part = nn;
		if (nd == NULL || nn == NULL)
			return compact_oom(pl->err);
		pl->deletes_alloc = na;
	}
	d = &p->deletes[ix];
	memset(d, 0, sizeof(*d));
	p->ndeletes++;
	d->content = e->content;
	d->seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	d->size = e->file_size_in_bytes;
	d->records = e->record_count;
	d->spec_id = e->spec_id;
	d->manifest = manifest;
	d->path = io_strdup(e->file_path);
	d->partition = io_strndup(e->partition, e->partition_len);
	d->referenced = e->referenced_data_file ? io_strdup(e->referenced_data_file) : NULL;
	d->dv_offset = -1;
	d->dv_length = -1;
	if (d->path == NULL || d->partition == NULL ||
		(e->referenced_data_file && d->referenced == NULL))
		return compact_oom(pl->err);

	/*
	 * a deletion vector (https://iceberg.apache.org/spec/#deletion-vectors):
	 * a blob of a Puffin file, for referenced_data_file only
	 */
	if (e->content_offset >= 0 ||
		(e->file_format != NULL && strcasecmp(e->file_format, "puffin") == 0))
	{
		if (e->content != ICEBERG_CONTENT_POSITION_DELETES || e->content_offset < 0 ||
			e->content_size_in_bytes <= 0 || e->referenced_data_file == NULL ||
			e->content_size_in_bytes > ICEBERG_DV_MAX_BYTES)
		{
			tms_error_set(pl->err, ICEBERG_ERR_MALFORMED, "invalid deletion vector entry");
			tms_error_detail(pl->err, "Delete file \"%.400s\" is a Puffin blob without a referenced data file, a content offset or a size of at most %d bytes.",
							 e->file_path, ICEBERG_DV_MAX_BYTES);
			return false;
		}
		d->dv_offset = e->content_offset;
		d->dv_length = e->content_size_in_bytes;
	}
	if (e->nequality_ids > 0)
	{
		d->equality_ids = io_malloc(sizeof(int32_t) * (size_t) e->nequality_ids);
		if (d->equality_ids == NULL)
			return compact_oom(pl->err);
		memcpy(d->equality_ids, e->equality_ids, sizeof(int32_t) * (size_t) e->nequality_ids);
		d->nequality_ids = e->nequality_ids;
	}
	if (e->content == ICEBERG_CONTENT_EQUALITY_DELETES && spec_unpartitioned(pl->md, e->spec_id))
	{
		d->global = true;
		if (!int_push(&pl->global, &pl->nglobal, &pl->global_alloc, ix))
			return compact_oom(pl->err);
		pl->next_in_part[ix] = -1;
		return true;
	}
	{
		char	   *key = compact_part_key(e->spec_id, e->partition, e->partition_len);
		int			first;

		if (key == NULL)
			return compact_oom(pl->err);
		first = compact_map_get(&pl->part_ix, key);
		pl->next_in_part[ix] = first;
		if (first >= 0)
		{
			/* the partition's chain starts here now (the map keeps its key) */
			bool		put = compact_map_put(&pl->part_ix, key, ix);

			io_free(key);
			if (!put)
				return compact_oom(pl->err);
			return true;
		}
		if (pl->npart_keys == pl->part_keys_alloc)
		{
			int			na = pl->part_keys_alloc ? pl->part_keys_alloc * 2 : 16;
			char	  **nk = io_realloc(pl->part_keys, sizeof(char *) * (size_t) na);

			if (nk == NULL)
			{
				io_free(key);
				return compact_oom(pl->err);
			}
			pl->part_keys = nk;
			pl->part_keys_alloc = na;
		}
		pl->part_keys[pl->npart_keys++] = key;
		if (!compact_map_put(&pl->part_ix, key, ix))
			return compact_oom(pl->err);
	}
	return true;
}

/* Collect into pl->scratch the deletes applying to a data entry. */
static bool
match(Planner *pl, const IcebergManifestEntry *e, int64_t *known_deleted)
{
	IcebergCompactPlan *p = pl->p;
	int64_t		seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	int			i;

	pl->nscratch = 0;
	*known_deleted = 0;
	for (i = 0; i < pl->nglobal; i++)
		if (p->deletes[pl->global[i]].seq > seq &&
			!int_push(&pl->scratch, &pl->nscratch, &pl->scratch_alloc, pl->global[i]))
			return compact_oom(pl->err);
	if (pl->part_ix.count > 0)
	{
		char	   *key = compact_part_key(e->spec_id, e->partition, e->partition_len);
		int			d;

		if (key == NULL)
			return compact_oom(pl->err);
		for (d = compact_map_get(&pl->part_ix, key); d >= 0; d = pl->next_in_part[d])
		{
			const IcebergCompactDelete *x = &p->deletes[d];
			bool		applies;

			if (x->content == ICEBERG_CONTENT_POSITION_DELETES)
				applies = x->seq >= seq &&
					(x->referenced == NULL || strcmp(x->referenced, e->file_path) == 0);
			else
				applies = x->seq > seq;
			if (!applies)
				continue;
			if (!int_push(&pl->scratch, &pl->nscratch, &pl->scratch_alloc, d))
			{
				io_free(key);
				return compact_oom(pl->err);
			}
			if (x->referenced != NULL)
				*known_deleted += x->records;
		}
		io_free(key);
	}
	return true;
}

/* Add a candidate data file to its partition's list. */
static bool
add_candidate(Planner *pl, const IcebergManifestEntry *e, int64_t first_row_id, int manifest)
{
	IcebergCompactPlan *p = pl->p;
	IcebergCompactFile *f;
	char	   *key;
	char	   *projected = NULL;
	int32_t		out_spec;
	int			c;
	struct Cands *cd;

	if (p->nfiles == pl->files_alloc)
	{
		int			na = pl->files_alloc ? pl->files_alloc * 2 : 64;
		IcebergCompactFile *nf = na < INT32_MAX / 2 ?
		io_realloc(p->files, sizeof(*nf) * (size_t) na) : NULL;

		if (nf == NULL)
			return compact_oom(pl->err);
		p->files = nf;
		pl->files_alloc = na;
	}
	f = &p->files[p->nfiles];
	memset(f, 0, sizeof(*f));
	p->nfiles++;
	f->path = io_strdup(e->file_path);
	f->size = e->file_size_in_bytes;
	f->records = e->record_count;
	f->seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	f->first_row_id = first_row_id;
	f->manifest = manifest;
	f->spec_id = e->spec_id;
	f->partition = io_strndup(e->partition, e->partition_len);
	if (f->path == NULL || f->partition == NULL)
		return compact_oom(pl->err);
	if (pl->nscratch > 0)
	{
		f->deletes = io_malloc(sizeof(int) * (size_t) pl->nscratch);
		if (f->deletes == NULL)
			return compact_oom(pl->err);
		memcpy(f->deletes, pl->scratch, sizeof(int) * (size_t) pl->nscratch);
		f->ndeletes = pl->nscratch;
	}

	/*
	 * grouped by the partition of the output spec: a file of another spec
	 * whose partition fixes it goes there, the others stay in their spec
	 */
	out_spec = e->spec_id;
	if (e->spec_id != p->output_spec_id)
	{
		if (!iceberg_partition_project(pl->md, pl->schema, e->spec_id, e->partition,
									   e->partition_len, p->output_spec_id, &projected,
									   pl->err))
			return false;
		if (projected != NULL)
			out_spec = p->output_spec_id;
		else if (pl->opt != NULL && pl->opt->output_spec_id >= 0)
		{
			/*
			 * asked for that spec explicitly: its rows may belong to several
			 * partitions of it, which the helper does not split
			 */
			tms_error_set(pl->err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "a data file of partition spec %d cannot be rewritten into output-spec-id %d",
						  (int) e->spec_id, (int) p->output_spec_id);
			tms_error_detail(pl->err, "File \"%.400s\" has partition %.200s in spec %d, which does not fix every field of spec %d: its rows may belong to several partitions of that spec.",
							 e->file_path, f->partition, (int) e->spec_id,
							 (int) p->output_spec_id);
			tms_error_hint(pl->err, "Without output-spec-id, local compaction rewrites such files in their own spec; an engine that repartitions rows (Spark's rewrite_data_files) moves them into spec %d.",
						   (int) p->output_spec_id);
			return false;
		}
		else
			p->kept_in_spec++;
	}
	key = projected ? compact_part_key(out_spec, projected, strlen(projected)) :
		compact_part_key(e->spec_id, e->partition, e->partition_len);
	if (key == NULL)
	{
		io_free(projected);
		return compact_oom(pl->err);
	}
	c = compact_map_get(&pl->cand_ix, key);
	if (c < 0)
	{
		if (pl->ncands == pl->cands_alloc)
		{
			int			na = pl->cands_alloc ? pl->cands_alloc * 2 : 16;
			struct Cands *nc = io_realloc(pl->cands, sizeof(*nc) * (size_t) na);

			if (nc == NULL)
			{
				io_free(key);
				io_free(projected);
				return compact_oom(pl->err);
			}
			pl->cands = nc;
			pl->cands_alloc = na;
		}
		c = pl->ncands++;
		cd = &pl->cands[c];
		memset(cd, 0, sizeof(*cd));
		cd->key = key;
		cd->spec_id = out_spec;
		cd->partition = projected ? projected : io_strndup(e->partition, e->partition_len);
		projected = NULL;
		if (cd->partition == NULL || !compact_map_put(&pl->cand_ix, cd->key, c))
			return compact_oom(pl->err);
	}
	else
		io_free(key);
	io_free(projected);
	cd = &pl->cands[c];
	if (!int_push(&cd->files, &cd->nfiles, &cd->alloc, p->nfiles - 1))
		return compact_oom(pl->err);
	p->candidates++;
	return true;
}

/* Resolve and check the options into the plan. */
bool
compact_resolve_options(IcebergCompactPlan *p, const IcebergTableMetadata *md,
						const IcebergCompactOptions *opt, TmsError *err)
{
	int64_t		target = opt ? opt->target_file_size_bytes : 0;

	if (target <= 0)
	{
		const char *prop = iceberg_metadata_property(md, "write.target-file-size-bytes");
		char	   *end;
		long long	v = prop ? strtoll(prop, &end, 10) : 0;

		target = (prop && end != prop && *end == '\0' && v > 0) ? (int64_t) v : DEFAULT_TARGET;
	}
	p->target_file_size_bytes = target;
	p->min_file_size_bytes = opt && opt->min_file_size_bytes >= 0 ?
		opt->min_file_size_bytes : (int64_t) ((double) target * 0.75);
	p->max_file_size_bytes = opt && opt->max_file_size_bytes >= 0 ?
		opt->max_file_size_bytes : (int64_t) ((double) target * 1.8);
	p->min_input_files = opt && opt->min_input_files > 0 ? opt->min_input_files : DEFAULT_MIN_INPUTS;
	p->max_file_group_size_bytes = opt && opt->max_file_group_size_bytes > 0 ?
		opt->max_file_group_size_bytes : DEFAULT_MAX_GROUP;
	p->rewrite_all = opt && opt->rewrite_all;
	p->delete_file_threshold = opt && opt->delete_file_threshold >= 0 ?
		opt->delete_file_threshold : INT32_MAX;
	p->delete_ratio_threshold = opt && opt->delete_ratio_threshold > 0 ?
		opt->delete_ratio_threshold : DEFAULT_DELETE_RATIO;
	p->remove_dangling_deletes = opt && opt->remove_dangling_deletes;
	p->output_spec_id = opt && opt->output_spec_id >= 0 ? opt->output_spec_id : md->default_spec_id;
	if (iceberg_metadata_spec(md, p->output_spec_id) == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "output-spec-id %d is not a partition spec of the table",
					  (int) p->output_spec_id);
		tms_error_detail(err, "The table's specs are those of its metadata's \"partition-specs\".");
		return false;
	}
	if (p->delete_ratio_threshold > 1.0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "delete-ratio-threshold must not be above 1");
		return false;
	}
	if (!(p->min_file_size_bytes < p->target_file_size_bytes &&
		  p->target_file_size_bytes < p->max_file_size_bytes))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "min-file-size-bytes < target-file-size-bytes < max-file-size-bytes does not hold");
		tms_error_detail(err, "They are %" PRId64 ", %" PRId64 " and %" PRId64 ".",
						 p->min_file_size_bytes, p->target_file_size_bytes,
						 p->max_file_size_bytes);
		return false;
	}
	return true;
}

bool
iceberg_compact_check_options(const IcebergTableMetadata *md, const IcebergCompactOptions *opt,
							  TmsError *err)
{
	IcebergCompactPlan p;

	tms_error_clear(err);
	if (md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no table metadata given");
		return false;
	}
	memset(&p, 0, sizeof(p));
	return compact_resolve_options(&p, md, opt, err);
}

/* Iceberg's expectedOutputFiles. */
int
compact_expected_outputs(const IcebergCompactPlan *p, int64_t bytes)
{
	int64_t		target = p->target_file_size_bytes;
	int64_t		with_rem,
				without;
	double		write_max = (double) target + (double) (p->max_file_size_bytes - target) * 0.5;

	if (bytes < target)
		return 1;
	with_rem = (bytes + target - 1) / target;
	without = bytes / target;
	if (bytes % target > p->min_file_size_bytes)
		return (int) (with_rem > INT32_MAX ? INT32_MAX : with_rem);
	if ((double) (bytes / without) < (1.1 * (double) target < write_max ? 1.1 * (double) target : write_max))
		return (int) (without > INT32_MAX ? INT32_MAX : without);
	return (int) (with_rem > INT32_MAX ? INT32_MAX : with_rem);
}

/*
 * Why a group of n files and bytes is worth rewriting by its size alone
 * (Iceberg's SizeBasedFileRewritePlanner: enoughInputFiles, enoughContent,
 * tooMuchContent; rewrite-all keeps every group, whatever the thresholds).
 */
unsigned
compact_size_reasons(const IcebergCompactPlan *p, int n, int64_t bytes)
{
	unsigned	reasons = 0;

	if (p->rewrite_all)
		reasons |= ICEBERG_COMPACT_REWRITE_ALL;
	if (n > 1 && n >= p->min_input_files)
		reasons |= ICEBERG_COMPACT_ENOUGH_INPUTS;
	if (n > 1 && bytes > p->target_file_size_bytes)
		reasons |= ICEBERG_COMPACT_ENOUGH_CONTENT;
	if (bytes > p->max_file_size_bytes)
		reasons |= ICEBERG_COMPACT_TOO_MUCH_CONTENT;
	return reasons;
}

static bool
too_many_deletes(const IcebergCompactPlan *p, const IcebergCompactFile *f)
{
	return f->ndeletes > 0 && f->ndeletes >= p->delete_file_threshold;
}

static bool
too_high_ratio(const IcebergCompactPlan *p, const IcebergCompactFile *f, int64_t known)
{
	double		deleted;

	if (f->ndeletes == 0 || f->records <= 0)
		return false;
	deleted = (double) (known < f->records ? known : f->records);
	return deleted / (double) f->records >= p->delete_ratio_threshold;
}

/* Sort the candidate partitions by (spec, partition text). */
static int
cmp_cands(const void *a, const void *b)
{
	const struct Cands *x = a;
	const struct Cands *y = b;

	if (x->spec_id != y->spec_id)
		return x->spec_id < y->spec_id ? -1 : 1;
	return strcmp(x->partition, y->partition);
}

bool
compact_pack(const IcebergCompactPlan *p, const IcebergCompactOptions *opt, int n,
			 CompactPackItemFn item, CompactPackGroupFn group, void *arg)
{
	int			i = 0;
	int64_t		max_files = opt && opt->max_group_files > 0 ?
	opt->max_group_files : DEFAULT_MAX_GROUP_FILES;
	CompactPackItem it;

	while (i < n)
	{
		int			start = i;
		int64_t		bytes = 0;
		int64_t		records = 0;
		unsigned	reasons = 0;

		/* one group: items while they fit (the first always does) */
		item(arg, i, &it);
		for (;;)
		{
			bytes += it.size;
			records += it.records;
			reasons |= it.reasons;
			if (++i >= n || i - start >= max_files)
				break;
			item(arg, i, &it);
			if (bytes + it.size > p->max_file_group_size_bytes)
				break;
		}
		reasons |= compact_size_reasons(p, i - start, bytes);
		if (reasons != 0 && !group(arg, start, i, bytes, records, reasons))
			return false;
	}
	return true;
}

/* A partition being packed: its planner, its candidates, known[] and the order. */
typedef struct PackPart
{
	Planner    *pl;
	struct Cands *c;
	const int64_t *known;		/* each plan file's known deleted records */
	int		  **order;
	int		   *norder;
	int		   *order_alloc;
} PackPart;

/* A candidate's size, records and the reasons its deletes give. */
static void
pack_item(void *arg, int i, CompactPackItem *out)
{
	PackPart   *pp = arg;
	IcebergCompactPlan *p = pp->pl->p;
	int			fi = pp->c->files[i];
	const IcebergCompactFile *f = &p->files[fi];

	out->size = f->size;
	out->records = f->records;
	out->reasons = 0;
	if (too_many_deletes(p, f))
		out->reasons |= ICEBERG_COMPACT_DELETES;
	if (too_high_ratio(p, f, pp->known[fi]))
		out->reasons |= ICEBERG_COMPACT_DELETE_RATIO;
}

/* The group of candidates [start, end), worth rewriting: added to the plan. */
static bool
pack_group(void *arg, int start, int end, int64_t bytes, int64_t records, unsigned reasons)
{
	PackPart   *pp = arg;
	IcebergCompactPlan *p = pp->pl->p;
	IcebergCompactGroup *ng = io_realloc(p->groups, sizeof(*ng) * (size_t) (p->ngroups + 1));
	IcebergCompactGroup *g;
	int			k;

	if (ng == NULL)
		return compact_oom(pp->pl->err);
	p->groups = ng;
	g = &ng[p->ngroups];
	memset(g, 0, sizeof(*g));
	g->partition = io_strdup(pp->c->partition);
	if (g->partition == NULL)
		return compact_oom(pp->pl->err);
	p->ngroups++;
	g->spec_id = pp->c->spec_id;
	g->first = *pp->norder;
	g->nfiles = end - start;
	g->bytes = bytes;
	g->records = records;
	g->reasons = reasons;
	g->expected_outputs = compact_expected_outputs(p, bytes);
	for (k = start; k < end; k++)
		if (!int_push(pp->order, pp->norder, pp->order_alloc, pp->c->files[k]))
			return compact_oom(pp->pl->err);
	return true;
}

/* Pack one partition's candidates into groups, keep those worth rewriting. */
static bool
pack_partition(Planner *pl, struct Cands *c, const int64_t *known,
			   int **order, int *norder, int *order_alloc)
{
	PackPart	pp = {pl, c, known, order, norder, order_alloc};

	return compact_pack(pl->p, pl->opt, c->nfiles, pack_item, pack_group, &pp);
}

/* The groups' distinct deletes, and each delete's groups. */
static bool
link_deletes(IcebergCompactPlan *p, TmsError *err)
{
	int		   *seen = io_calloc((size_t) p->ndeletes + 1, sizeof(int));
	int			g,
				i,
				k;

	if (seen == NULL)
		return compact_oom(err);
	for (i = 0; i < p->ndeletes; i++)
		seen[i] = -1;
	for (g = 0; g < p->ngroups; g++)
	{
		IcebergCompactGroup *gr = &p->groups[g];
		int			alloc = 0;

		for (i = gr->first; i < gr->first + gr->nfiles; i++)
			for (k = 0; k < p->files[i].ndeletes; k++)
			{
				int			d = p->files[i].deletes[k];
				IcebergCompactDelete *x = &p->deletes[d];

				if (seen[d] != g)
				{
					int		   *ng = io_realloc(x->groups, sizeof(int) * (size_t) (x->ngroups + 1));
					int64_t    *nc = io_realloc(x->group_files, sizeof(int64_t) * (size_t) (x->ngroups + 1));

					if (ng != NULL)
						x->groups = ng;
					if (nc != NULL)
						x->group_files = nc;
					if (ng == NULL || nc == NULL || !int_push(&gr->deletes, &gr->ndeletes, &alloc, d))
					{
						io_free(seen);
						return compact_oom(err);
					}
					x->groups[x->ngroups] = g;
					x->group_files[x->ngroups] = 0;
					x->ngroups++;
					seen[d] = g;
				}
				x->group_files[x->ngroups - 1]++;
			}
	}
	io_free(seen);
	return true;
}

/*
 * Whether a live data file the filter let through is a candidate: the
 * options' selection when they have one, else the size and delete rules.
 * 1 / 0 / -1 (an error of the selection, in pl->err).  kd: its known
 * deleted records; pl->nscratch the delete files applying to it.
 */
static int
is_candidate(Planner *pl, const IcebergManifestEntry *e, int64_t kd)
{
	const IcebergCompactPlan *p = pl->p;
	IcebergCompactFile probe;

	if (pl->opt != NULL && pl->opt->select != NULL)
		return pl->opt->select(pl->opt->select_arg, e, pl->err);
	memset(&probe, 0, sizeof(probe));
	probe.records = e->record_count;
	probe.ndeletes = pl->nscratch;
	return p->rewrite_all || e->file_size_in_bytes < p->min_file_size_bytes ||
		e->file_size_in_bytes > p->max_file_size_bytes ||
		too_many_deletes(p, &probe) || too_high_ratio(p, &probe, kd);
}

/*
 * Keep the plan's files that went into a group, in group order (order:
 * their indexes, norder of them); the others' strings are freed.
 */
static bool
keep_grouped_files(IcebergCompactPlan *p, const int *order, int norder, TmsError *err)
{
	IcebergCompactFile *nf = io_calloc((size_t) norder + 1, sizeof(IcebergCompactFile));
	char	   *used = io_calloc((size_t) p->nfiles + 1, 1);

	if (nf == NULL || used == NULL)
	{
		io_free(nf);
		io_free(used);
		return compact_oom(err);
	}
	for (int i = 0; i < norder; i++)
	{
		nf[i] = p->files[order[i]];
		used[order[i]] = 1;
	}
	for (int i = 0; i < p->nfiles; i++)
		if (!used[i])
		{
			io_free(p->files[i].path);
			io_free(p->files[i].partition);
			io_free(p->files[i].deletes);
		}
	io_free(used);
	io_free(p->files);
	p->files = nf;
	p->nfiles = norder;
	return true;
}

bool
iceberg_compact_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					 const IcebergCompactOptions *opt, IcebergCompactPlan **out,
					 TmsError *err)
{
	const IcebergSnapshot *snap;
	IcebergSchema *schema = NULL;
	IcebergCompactPlan *p;
	Planner		pl;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	int64_t    *known = NULL;
	int			known_alloc = 0;
	int		   *order = NULL;
	int			norder = 0,
				order_alloc = 0;
	int			pass,
				i;

	tms_error_clear(err);
	*out = NULL;
	if (io == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no file io given");
		return false;
	}
	if (!compact_check_table(md, &snap, err))
		return false;
	p = io_calloc(1, sizeof(IcebergCompactPlan));
	if (p == NULL)
		return compact_oom(err);
	memset(&pl, 0, sizeof(pl));
	pl.p = p;
	pl.md = md;
	pl.opt = opt;
	pl.err = err;
	p->format_version = md->format_version;
	p->base_snapshot_id = snap ? snap->snapshot_id : -1;
	p->base_sequence_number = snap ? snap->sequence_number : 0;
	if (!compact_resolve_options(p, md, opt, err))
		goto fail;
	if (!iceberg_schema_parse(md->current_schema_json, &schema, err) ||
		((opt == NULL || opt->select == NULL) && !iceberg_compact_check_schema(schema, err)))
		goto fail;
	pl.schema = schema;
	if (snap == NULL)
		goto done;
	if (!compact_read_list(io, md, snap, &recs, &nrecs, err))
		goto fail;

	/* pass 0: delete manifests; pass 1: data manifests */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < nrecs; i++)
		{
			IcebergManifestReader *r;
			const IcebergManifestEntry *e;
			int			rc,
						mix;
			int64_t		next_row_id;

			if ((recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DELETES) != (pass == 0))
				continue;
			if (iceberg_check_interrupt(io, err))
				goto fail;
			if (!iceberg_manifest_open(io, &recs[i].mf, md->format_version,
									   ICEBERG_READ_PARTITION |
									   (pass == 1 && opt != NULL && opt->select != NULL ?
										ICEBERG_READ_BOUNDS : 0), &r, err))
				goto fail;
			mix = manifest_index(&pl, recs[i].path);
			if (mix < 0)
			{
				iceberg_manifest_close(r);
				compact_oom(err);
				goto fail;
			}
			next_row_id = recs[i].mf.first_row_id;
			while ((rc = iceberg_manifest_next(r, &e, err)) == 1)
			{
				int64_t		kd;
				int64_t		frid = e->first_row_id;

				/*
				 * v3: a null first_row_id is the manifest's plus the
				 * record_count of the data files before it without one
				 * (https://iceberg.apache.org/spec/#first-row-id-inheritance),
				 * counted over every status as the manifest rewrite does
				 */
				if (md->format_version >= 3 && pass == 1 &&
					e->content == ICEBERG_CONTENT_DATA && frid < 0 && next_row_id >= 0)
				{
					frid = next_row_id;
					if (e->record_count < 0 || next_row_id > INT64_MAX - e->record_count)
					{
						tms_error_set(err, ICEBERG_ERR_MALFORMED, "first_row_id out of range");
						tms_error_detail(err, "Manifest \"%s\".", recs[i].path);
						break;
					}
					next_row_id += e->record_count;
				}
				if (e->status == ICEBERG_STATUS_DELETED)
					continue;
				if (pass == 0)
				{
					if (e->content == ICEBERG_CONTENT_DATA)
						continue;
					if (!add_delete(&pl, e, mix))
						break;
					continue;
				}
				if (e->content != ICEBERG_CONTENT_DATA)
					continue;
				p->data_files++;
				p->data_bytes += e->file_size_in_bytes > 0 ? e->file_size_in_bytes : 0;
				if (!match(&pl, e, &kd))
					break;
				for (int k = 0; k < pl.nscratch; k++)
					p->deletes[pl.scratch[k]].applies++;
				if (opt != NULL && opt->where != NULL &&
					!iceberg_partition_filter_match(opt->where, e->spec_id, e->partition,
													e->partition_len))
				{
					p->filtered_out++;
					continue;
				}
				{
					int			cand = is_candidate(&pl, e, kd);

					if (cand < 0)
						break;
					if (cand == 0)
						continue;
				}
				if (md->format_version >= 3 && frid < 0 && (opt == NULL || !opt->no_row_ids))
				{
					tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
								  "compaction does not assign row ids to a format v3 table's files");
					tms_error_detail(err, "Data file \"%.400s\" has no first_row_id and its manifest \"%.400s\" none to inherit: the table was upgraded to v3 and its files have no row ids yet.",
									 e->file_path, recs[i].path);
					tms_error_hint(err, "Commit to the table once with a v3 writer (it assigns them), or compact it with an engine.");
					break;
				}
				if (!add_candidate(&pl, e, md->format_version >= 3 ? frid : -1, mix))
					break;
				if (p->nfiles > known_alloc)
				{
					int			na = known_alloc ? known_alloc * 2 : 64;
					int64_t    *nk = io_realloc(known, sizeof(int64_t) * (size_t) na);

					if (nk == NULL)
					{
						compact_oom(err);
						break;
					}
					known = nk;
					known_alloc = na;
				}
				known[p->nfiles - 1] = kd;
			}
			iceberg_manifest_close(r);
			if (rc != 0 || err->code != ICEBERG_OK)
			{
				if (err->code == ICEBERG_OK)
					compact_oom(err);
				goto fail;
			}
		}

	/* the groups, partition by partition (no candidate: cands is NULL) */
	if (pl.ncands > 1)
		qsort(pl.cands, (size_t) pl.ncands, sizeof(struct Cands), cmp_cands);
	for (i = 0; i < pl.ncands; i++)
		if (!pack_partition(&pl, &pl.cands[i], known, &order, &norder, &order_alloc))
			goto fail;

	if (!keep_grouped_files(p, order, norder, err))
		goto fail;
	if (!link_deletes(p, err))
		goto fail;
	for (i = 0; i < p->ndeletes; i++)
		p->dangling += p->deletes[i].applies == 0;
	/* compaction: the helper applies the groups' deletes */
	if ((opt == NULL || opt->select == NULL) && !iceberg_compact_check_deletes(p, schema, err))
		goto fail;
done:
	compact_free_recs(recs, nrecs);
	io_free(known);
	io_free(order);
	iceberg_schema_free(schema);
	planner_free(&pl);
	*out = p;
	return true;
fail:
	compact_free_recs(recs, nrecs);
	io_free(known);
	io_free(order);
	iceberg_schema_free(schema);
	planner_free(&pl);
	iceberg_compact_plan_free(p);
	return false;
}

bool
iceberg_compact_removable(const IcebergCompactPlan *p, const int *groups, int ngroups,
						  int **out, int *n, TmsError *err)
{
	int			alloc = 0;
	int			i,
				j,
				k,
				x;

	*out = NULL;
	*n = 0;
	for (j = 0; j < ngroups; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[groups[j]];

		for (i = 0; i < gr->ndeletes; i++)
		{
			const IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];
			int64_t		covered = d->covered;
			bool		listed = false;

			/*
			 * once, at the commit's first group that rewrites some of its
			 * files
			 */
			for (x = 0; x < j && !listed; x++)
				for (k = 0; k < d->ngroups; k++)
					listed |= d->groups[k] == groups[x];
			if (listed)
				continue;
			for (k = 0; k < d->ngroups; k++)
				for (x = j; x < ngroups; x++)
					if (d->groups[k] == groups[x])
						covered += d->group_files[k];
			if (covered == d->applies && d->applies > 0 &&
				!int_push(out, n, &alloc, gr->deletes[i]))
				goto nomem;
		}
	}
	/* Iceberg's remove-dangling-deletes: those applying to nothing */
	for (i = 0; p->remove_dangling_deletes && ngroups > 0 && i < p->ndeletes; i++)
		if (p->deletes[i].applies == 0 && !int_push(out, n, &alloc, i))
			goto nomem;
	return true;
nomem:
	io_free(*out);
	*out = NULL;
	*n = 0;
	return compact_oom(err);
}

/* ---------------------------------------------------------------------
 * Where the new files go
 * ---------------------------------------------------------------------
 */

/* Append s percent-encoded (unreserved characters kept). */
static bool
append_encoded(IcebergBuf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t		i;

	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];
		char		e[3];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '_' || c == '.' || c == '*')
		{
			if (!iceberg_buf_append(b, s + i, 1))
				return false;
			continue;
		}
		e[0] = '%';
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		if (!iceberg_buf_append(b, e, 3))
			return false;
	}
	return true;
}

char *
iceberg_compact_output_dir(const IcebergTableMetadata *md, const IcebergSchema *schema,
						   const IcebergCompactPlan *p, int g, TmsError *err)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(md, gr->spec_id);
	const char *base = iceberg_metadata_property(md, "write.data.path");
	IcebergBuf	b = {0};
	IcebergBuf	tmp = {0};
	const char *pp = gr->partition;
	const char *end = gr->partition + strlen(gr->partition);
	size_t		bl;
	int			k;

	if (base == NULL)
		base = iceberg_metadata_property(md, "write.folder-storage.path");
	if (spec == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "partition spec %d is not in the table metadata",
					  (int) gr->spec_id);
		return NULL;
	}
	if (base == NULL)
	{
		bl = strlen(md->location);
		while (bl > 0 && md->location[bl - 1] == '/')
			bl--;
		if (!iceberg_buf_append(&b, md->location, bl) || !iceberg_buf_append(&b, "/data/", 6))
			goto nomem;
	}
	else
	{
		bl = strlen(base);
		while (bl > 0 && base[bl - 1] == '/')
			bl--;
		if (!iceberg_buf_append(&b, base, bl) || !iceberg_buf_append(&b, "/", 1))
			goto nomem;
	}
	for (k = 0; k < spec->nfields; k++)
	{
		const IcebergPartitionField *pf = &spec->fields[k];
		const IcebergColumn *src = iceberg_schema_field(schema, pf->source_id, NULL);
		const char *tok;
		size_t		tl;
		char		text[64];
		const char *v = NULL;
		size_t		vl = 0;

		if (!iceberg_partition_next(&pp, end, &tok, &tl))
		{
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid partition \"%.200s\"", gr->partition);
			return NULL;
		}
		if (tl == 4 && memcmp(tok, "null", 4) == 0)
		{
			v = "null";
			vl = 4;
		}
		else if (tok[0] == '"')
		{
			if (!iceberg_json_unescape(tok, tl, &tmp))
				goto nomem;
			v = tmp.data ? tmp.data : "";
			vl = tmp.len;
		}
		else
		{
			long long	n = strtoll(tok, NULL, 10);
			int64_t		y;
			int			m,
						d;

			v = text;
			if (strcmp(pf->transform, "day") == 0 ||
				(strcmp(pf->transform, "identity") == 0 && src && src->type == ICEBERG_TYPE_DATE))
			{
				io_civil_from_days(n, &y, &m, &d);
				vl = (size_t) snprintf(text, sizeof(text), "%04lld-%02d-%02d", (long long) y, m, d);
			}
			else if (strcmp(pf->transform, "month") == 0)
				vl = (size_t) snprintf(text, sizeof(text), "%04lld-%02lld",
									   1970 + (n >= 0 ? n / 12 : (n - 11) / 12),
									   ((n % 12) + 12) % 12 + 1);
			else if (strcmp(pf->transform, "year") == 0)
				vl = (size_t) snprintf(text, sizeof(text), "%04lld", 1970 + n);
			else if (strcmp(pf->transform, "hour") == 0)
			{
				long long	days = n >= 0 ? n / 24 : (n - 23) / 24;

				io_civil_from_days(days, &y, &m, &d);
				vl = (size_t) snprintf(text, sizeof(text), "%04lld-%02d-%02d-%02lld", (long long) y,
									   m, d, n - days * 24);
			}
			else
			{
				v = tok;
				vl = tl;
			}
		}
		if (!append_encoded(&b, pf->name, strlen(pf->name)) || !iceberg_buf_append(&b, "=", 1) ||
			!append_encoded(&b, v, vl) || !iceberg_buf_append(&b, "/", 1))
			goto nomem;
	}
	iceberg_buf_free(&tmp);
	if (!iceberg_buf_append(&b, "", 1))
		goto nomem;
	return b.data;
nomem:
	iceberg_buf_free(&b);
	iceberg_buf_free(&tmp);
	compact_oom(err);
	return NULL;
}
