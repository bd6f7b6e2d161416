/*-------------------------------------------------------------------------
 *
 * compact.c
 *	  Data file compaction, the plain-C half: the plan and the commit of
 *	  one group (compact.h states the semantics, the refusals and the
 *	  memory bounds).
 *
 * Rules of this file: plain C, errors as IcebergError values, every
 * allocation freed on every path; nothing here runs the rewrite of the
 * rows, commits, retries or deletes.  Manifests are read with the
 * layer's streaming readers; entries carried into a rewritten manifest
 * keep their data_file bytes (ICEBERG_READ_RAW); the new data files'
 * entries are encoded from values by field id (avro_write.c) in the
 * manifest schema of the spec (Iceberg's, with the partition record of
 * the manifests the files came from).
 *
 * src/iceberg/compact.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact.h"
#include "iceberg/write_internal.h"
#include "io/jsonmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB						(INT64_C(1024) * 1024)
#define DEFAULT_TARGET			(512 * MIB)
#define DEFAULT_MAX_GROUP		(100 * 1024 * MIB)
#define DEFAULT_MIN_INPUTS		5
#define DEFAULT_DELETE_RATIO	0.3
#define DEFAULT_MAX_GROUP_FILES 100000
#define SPLIT_OVERHEAD			(5 * 1024)

static bool
oom(IcebergError *err)
{
	return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
}

/* ---------------------------------------------------------------------
 * A map from strings to indexes (open addressing, keys borrowed)
 * ---------------------------------------------------------------------
 */

typedef struct StrMap
{
	const char **keys;
	uint64_t   *hashes;
	int		   *values;
	size_t		nslots;
	size_t		count;
} StrMap;

static uint64_t
hash_str(const char *s)
{
	return iceberg_hash_bytes(ICEBERG_HASH_INIT, s, strlen(s));
}

static bool
map_put(StrMap *m, const char *key, int value)
{
	uint64_t	h = hash_str(key);
	size_t		j;

	if ((m->count + 1) * 2 > m->nslots)
	{
		size_t		n = m->nslots ? m->nslots * 2 : 64;
		StrMap		g = {calloc(n, sizeof(char *)), calloc(n, sizeof(uint64_t)),
		calloc(n, sizeof(int)), n, 0};
		size_t		i;

		if (g.keys == NULL || g.hashes == NULL || g.values == NULL)
		{
			free(g.keys);
			free(g.hashes);
			free(g.values);
			return false;
		}
		for (i = 0; i < m->nslots; i++)
			if (m->keys[i] != NULL)
			{
				j = m->hashes[i] & (n - 1);
				while (g.keys[j] != NULL)
					j = (j + 1) & (n - 1);
				g.keys[j] = m->keys[i];
				g.hashes[j] = m->hashes[i];
				g.values[j] = m->values[i];
				g.count++;
			}
		free(m->keys);
		free(m->hashes);
		free(m->values);
		*m = g;
	}
	j = h & (m->nslots - 1);
	while (m->keys[j] != NULL)
	{
		if (m->hashes[j] == h && strcmp(m->keys[j], key) == 0)
		{
			m->values[j] = value;
			return true;
		}
		j = (j + 1) & (m->nslots - 1);
	}
	m->keys[j] = key;
	m->hashes[j] = h;
	m->values[j] = value;
	m->count++;
	return true;
}

/* The value of key, or -1. */
static int
map_get(const StrMap *m, const char *key)
{
	uint64_t	h;
	size_t		j;

	if (m->nslots == 0)
		return -1;
	h = hash_str(key);
	j = h & (m->nslots - 1);
	while (m->keys[j] != NULL)
	{
		if (m->hashes[j] == h && strcmp(m->keys[j], key) == 0)
			return m->values[j];
		j = (j + 1) & (m->nslots - 1);
	}
	return -1;
}

static void
map_free(StrMap *m)
{
	free(m->keys);
	free(m->hashes);
	free(m->values);
	memset(m, 0, sizeof(*m));
}

/* Append v to a growable int array. */
static bool
int_push(int **arr, int *n, int *alloc, int v)
{
	if (*n == *alloc)
	{
		int			na = *alloc ? *alloc * 2 : 8;
		int		   *nw = realloc(*arr, sizeof(int) * (size_t) na);

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

static bool
check_table(const IcebergTableMetadata *md, const IcebergSnapshot **snap, IcebergError *err)
{
	return iceberg_write_check_table(md, "compaction",
									 "Format v3 adds deletion vectors and row lineage, which this rewrite does not maintain.",
									 "", snap, err);
}

/* Are the schema's columns all of types the helper writes? */
static bool
check_schema(const IcebergSchema *s, IcebergError *err)
{
	int			i;

	for (i = 0; i < s->ncolumns; i++)
	{
		IcebergTypeId t = s->columns[i].type;

		if (t == ICEBERG_TYPE_NESTED || t == ICEBERG_TYPE_FIXED || t == ICEBERG_TYPE_OTHER ||
			t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS)
		{
			iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
							  "compaction does not support column \"%s\" of type %s",
							  s->columns[i].name, s->columns[i].type_text);
			iceberg_set_detail(err, "The local engine rewrites tables whose columns are of primitive types other than fixed; use an engine server for this table.");
			return false;
		}
	}
	return true;
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

/* A manifest-list record kept for a second look: its fields and raw bytes. */
typedef struct ListRec
{
	IcebergManifestFile mf;		/* manifest_path points to path */
	char	   *path;
	uint8_t    *raw;
	size_t		raw_len;
} ListRec;

static void
free_recs(ListRec *r, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		free(r[i].path);
		free(r[i].raw);
	}
	free(r);
}

/* Read a snapshot's manifest list into an array (raw bytes too). */
static bool
read_list(const IcebergFileIO *io, const IcebergTableMetadata *md,
		  const IcebergSnapshot *snap, ListRec **out, int *nout, IcebergError *err)
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
			ListRec    *nr = na < INT32_MAX / 2 ? realloc(recs, sizeof(ListRec) * (size_t) na) : NULL;

			if (nr == NULL)
			{
				oom(err);
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
		r->raw = mf->raw_len ? malloc(mf->raw_len) : NULL;
		n++;
		if (r->path == NULL || (mf->raw_len && r->raw == NULL))
		{
			oom(err);
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
		free_recs(recs, n);
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
	for (i = 0; i < p->ngroups; i++)
	{
		free(p->groups[i].partition);
		free(p->groups[i].deletes);
	}
	free(p->groups);
	for (i = 0; i < p->nfiles; i++)
	{
		free(p->files[i].path);
		free(p->files[i].deletes);
	}
	free(p->files);
	for (i = 0; i < p->ndeletes; i++)
	{
		IcebergCompactDelete *d = &p->deletes[i];

		free(d->path);
		free(d->partition);
		free(d->equality_ids);
		free(d->referenced);
		free(d->groups);
		free(d->group_files);
	}
	free(p->deletes);
	for (i = 0; i < p->nmanifests; i++)
		free(p->manifests[i]);
	free(p->manifests);
	free(p);
}

/* Build state of a plan. */
typedef struct Planner
{
	IcebergCompactPlan *p;
	const IcebergTableMetadata *md;
	const IcebergCompactOptions *opt;
	IcebergError *err;
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

	map_free(&pl->manifest_ix);
	map_free(&pl->part_ix);
	for (i = 0; i < pl->npart_keys; i++)
		free(pl->part_keys[i]);
	free(pl->part_keys);
	free(pl->next_in_part);
	free(pl->global);
	map_free(&pl->cand_ix);
	for (i = 0; i < pl->ncands; i++)
	{
		free(pl->cands[i].key);
		free(pl->cands[i].partition);
		free(pl->cands[i].files);
	}
	free(pl->cands);
	free(pl->scratch);
}

/* "spec|partition" (malloc'd). */
static char *
part_key(int32_t spec_id, const char *partition, size_t len)
{
	char	   *k = malloc(len + 16);

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
	int			i = map_get(&pl->manifest_ix, path);

	if (i >= 0)
		return i;
	if (p->nmanifests == pl->manifests_alloc)
	{
		int			na = pl->manifests_alloc ? pl->manifests_alloc * 2 : 64;
		char	  **nm = realloc(p->manifests, sizeof(char *) * (size_t) na);

		if (nm == NULL)
			return -1;
		p->manifests = nm;
		pl->manifests_alloc = na;
	}
	p->manifests[p->nmanifests] = strdup(path);
	if (p->manifests[p->nmanifests] == NULL)
		return -1;
	if (!map_put(&pl->manifest_ix, p->manifests[p->nmanifests], p->nmanifests))
	{
		free(p->manifests[p->nmanifests]);
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
		IcebergCompactDelete *nd = realloc(p->deletes, sizeof(*nd) * (size_t) na);
		int		   *nn = realloc(pl->next_in_part, sizeof(int) * (size_t) na);

		if (nd != NULL)
			p->deletes = nd;
		if (nn != NULL)
			pl->next_in_part = nn;
		if (nd == NULL || nn == NULL)
			return oom(pl->err);
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
	d->path = strdup(e->file_path);
	d->partition = strndup(e->partition, e->partition_len);
	d->referenced = e->referenced_data_file ? strdup(e->referenced_data_file) : NULL;
	if (d->path == NULL || d->partition == NULL ||
		(e->referenced_data_file && d->referenced == NULL))
		return oom(pl->err);
	if (e->nequality_ids > 0)
	{
		d->equality_ids = malloc(sizeof(int32_t) * (size_t) e->nequality_ids);
		if (d->equality_ids == NULL)
			return oom(pl->err);
		memcpy(d->equality_ids, e->equality_ids, sizeof(int32_t) * (size_t) e->nequality_ids);
		d->nequality_ids = e->nequality_ids;
	}
	if (e->content == ICEBERG_CONTENT_EQUALITY_DELETES && spec_unpartitioned(pl->md, e->spec_id))
	{
		d->global = true;
		if (!int_push(&pl->global, &pl->nglobal, &pl->global_alloc, ix))
			return oom(pl->err);
		pl->next_in_part[ix] = -1;
		return true;
	}
	{
		char	   *key = part_key(e->spec_id, e->partition, e->partition_len);
		int			first;

		if (key == NULL)
			return oom(pl->err);
		first = map_get(&pl->part_ix, key);
		pl->next_in_part[ix] = first;
		if (first >= 0)
		{
			/* the partition's chain starts here now (the map keeps its key) */
			bool		put = map_put(&pl->part_ix, key, ix);

			free(key);
			if (!put)
				return oom(pl->err);
			return true;
		}
		if (pl->npart_keys == pl->part_keys_alloc)
		{
			int			na = pl->part_keys_alloc ? pl->part_keys_alloc * 2 : 16;
			char	  **nk = realloc(pl->part_keys, sizeof(char *) * (size_t) na);

			if (nk == NULL)
			{
				free(key);
				return oom(pl->err);
			}
			pl->part_keys = nk;
			pl->part_keys_alloc = na;
		}
		pl->part_keys[pl->npart_keys++] = key;
		if (!map_put(&pl->part_ix, key, ix))
			return oom(pl->err);
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
			return oom(pl->err);
	if (pl->part_ix.count > 0)
	{
		char	   *key = part_key(e->spec_id, e->partition, e->partition_len);
		int			d;

		if (key == NULL)
			return oom(pl->err);
		for (d = map_get(&pl->part_ix, key); d >= 0; d = pl->next_in_part[d])
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
				free(key);
				return oom(pl->err);
			}
			if (x->referenced != NULL)
				*known_deleted += x->records;
		}
		free(key);
	}
	return true;
}

/* Add a candidate data file to its partition's list. */
static bool
add_candidate(Planner *pl, const IcebergManifestEntry *e, int manifest)
{
	IcebergCompactPlan *p = pl->p;
	IcebergCompactFile *f;
	char	   *key;
	int			c;
	struct Cands *cd;

	if (p->nfiles == pl->files_alloc)
	{
		int			na = pl->files_alloc ? pl->files_alloc * 2 : 64;
		IcebergCompactFile *nf = na < INT32_MAX / 2 ?
			realloc(p->files, sizeof(*nf) * (size_t) na) : NULL;

		if (nf == NULL)
			return oom(pl->err);
		p->files = nf;
		pl->files_alloc = na;
	}
	f = &p->files[p->nfiles];
	memset(f, 0, sizeof(*f));
	p->nfiles++;
	f->path = strdup(e->file_path);
	f->size = e->file_size_in_bytes;
	f->records = e->record_count;
	f->seq = e->sequence_number < 0 ? 0 : e->sequence_number;
	f->manifest = manifest;
	if (f->path == NULL)
		return oom(pl->err);
	if (pl->nscratch > 0)
	{
		f->deletes = malloc(sizeof(int) * (size_t) pl->nscratch);
		if (f->deletes == NULL)
			return oom(pl->err);
		memcpy(f->deletes, pl->scratch, sizeof(int) * (size_t) pl->nscratch);
		f->ndeletes = pl->nscratch;
	}
	key = part_key(e->spec_id, e->partition, e->partition_len);
	if (key == NULL)
		return oom(pl->err);
	c = map_get(&pl->cand_ix, key);
	if (c < 0)
	{
		if (pl->ncands == pl->cands_alloc)
		{
			int			na = pl->cands_alloc ? pl->cands_alloc * 2 : 16;
			struct Cands *nc = realloc(pl->cands, sizeof(*nc) * (size_t) na);

			if (nc == NULL)
			{
				free(key);
				return oom(pl->err);
			}
			pl->cands = nc;
			pl->cands_alloc = na;
		}
		c = pl->ncands++;
		cd = &pl->cands[c];
		memset(cd, 0, sizeof(*cd));
		cd->key = key;
		cd->spec_id = e->spec_id;
		cd->partition = strndup(e->partition, e->partition_len);
		if (cd->partition == NULL || !map_put(&pl->cand_ix, cd->key, c))
			return oom(pl->err);
	}
	else
		free(key);
	cd = &pl->cands[c];
	if (!int_push(&cd->files, &cd->nfiles, &cd->alloc, p->nfiles - 1))
		return oom(pl->err);
	p->candidates++;
	return true;
}

/* Resolve and check the options into the plan. */
static bool
resolve_options(IcebergCompactPlan *p, const IcebergTableMetadata *md,
				const IcebergCompactOptions *opt, IcebergError *err)
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
	if (p->delete_ratio_threshold > 1.0)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "delete-ratio-threshold must not be above 1");
	if (!(p->min_file_size_bytes < p->target_file_size_bytes &&
		  p->target_file_size_bytes < p->max_file_size_bytes))
	{
		iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "min-file-size-bytes < target-file-size-bytes < max-file-size-bytes does not hold");
		iceberg_set_detail(err, "They are %" PRId64 ", %" PRId64 " and %" PRId64 ".",
						   p->min_file_size_bytes, p->target_file_size_bytes,
						   p->max_file_size_bytes);
		return false;
	}
	return true;
}

/* Iceberg's expectedOutputFiles. */
static int
expected_outputs(const IcebergCompactPlan *p, int64_t bytes)
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

/*
 * Pack one partition's candidates into groups (Iceberg's ListPacker with a
 * lookback of one: a file goes into the open group while it fits, else
 * closes it and opens a new one), keep the groups worth rewriting.
 * known[] holds each plan file's known deleted records.
 */
static bool
pack_partition(Planner *pl, struct Cands *c, const int64_t *known,
			   int **order, int *norder, int *order_alloc)
{
	IcebergCompactPlan *p = pl->p;
	int			i = 0;
	int64_t		max_files = pl->opt && pl->opt->max_group_files > 0 ?
		pl->opt->max_group_files : DEFAULT_MAX_GROUP_FILES;

	while (i < c->nfiles)
	{
		int			start = i;
		int64_t		bytes = 0;
		int64_t		records = 0;
		unsigned	reasons = 0;
		int			n;

		/* one group: files while they fit (the first always does) */
		do
		{
			IcebergCompactFile *f = &p->files[c->files[i]];

			bytes += f->size;
			records += f->records;
			if (too_many_deletes(p, f))
				reasons |= ICEBERG_COMPACT_DELETES;
			if (too_high_ratio(p, f, known[c->files[i]]))
				reasons |= ICEBERG_COMPACT_DELETE_RATIO;
			i++;
		} while (i < c->nfiles && i - start < max_files &&
				 bytes + p->files[c->files[i]].size <= p->max_file_group_size_bytes);
		n = i - start;
		/* rewrite-all keeps every group, whatever the thresholds */
		if (p->rewrite_all)
			reasons |= ICEBERG_COMPACT_REWRITE_ALL;
		if (n > 1 && n >= p->min_input_files)
			reasons |= ICEBERG_COMPACT_ENOUGH_INPUTS;
		if (n > 1 && bytes > p->target_file_size_bytes)
			reasons |= ICEBERG_COMPACT_ENOUGH_CONTENT;
		if (bytes > p->max_file_size_bytes)
			reasons |= ICEBERG_COMPACT_TOO_MUCH_CONTENT;
		if (reasons == 0)
			continue;
		{
			IcebergCompactGroup *ng = realloc(p->groups, sizeof(*ng) * (size_t) (p->ngroups + 1));
			IcebergCompactGroup *g;
			int			k;

			if (ng == NULL)
				return oom(pl->err);
			p->groups = ng;
			g = &ng[p->ngroups];
			memset(g, 0, sizeof(*g));
			g->partition = strdup(c->partition);
			if (g->partition == NULL)
				return oom(pl->err);
			p->ngroups++;
			g->spec_id = c->spec_id;
			g->first = *norder;
			g->nfiles = n;
			g->bytes = bytes;
			g->records = records;
			g->reasons = reasons;
			g->expected_outputs = expected_outputs(p, bytes);
			for (k = start; k < i; k++)
				if (!int_push(order, norder, order_alloc, c->files[k]))
					return oom(pl->err);
		}
	}
	return true;
}

/* The groups' distinct deletes, and each delete's groups. */
static bool
link_deletes(IcebergCompactPlan *p, IcebergError *err)
{
	int		   *seen = calloc((size_t) p->ndeletes + 1, sizeof(int));
	int			g,
				i,
				k;

	if (seen == NULL)
		return oom(err);
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
					int		   *ng = realloc(x->groups, sizeof(int) * (size_t) (x->ngroups + 1));
					int64_t    *nc = realloc(x->group_files, sizeof(int64_t) * (size_t) (x->ngroups + 1));

					if (ng != NULL)
						x->groups = ng;
					if (nc != NULL)
						x->group_files = nc;
					if (ng == NULL || nc == NULL || !int_push(&gr->deletes, &gr->ndeletes, &alloc, d))
					{
						free(seen);
						return oom(err);
					}
					x->groups[x->ngroups] = g;
					x->group_files[x->ngroups] = 0;
					x->ngroups++;
					seen[d] = g;
				}
				x->group_files[x->ngroups - 1]++;
			}
	}
	free(seen);
	return true;
}

bool
iceberg_compact_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					 const IcebergCompactOptions *opt, IcebergCompactPlan **out,
					 IcebergError *err)
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

	iceberg_error_clear(err);
	*out = NULL;
	if (io == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "no file io given");
	if (!check_table(md, &snap, err))
		return false;
	p = calloc(1, sizeof(IcebergCompactPlan));
	if (p == NULL)
		return oom(err);
	memset(&pl, 0, sizeof(pl));
	pl.p = p;
	pl.md = md;
	pl.opt = opt;
	pl.err = err;
	p->format_version = md->format_version;
	p->base_snapshot_id = snap ? snap->snapshot_id : -1;
	p->base_sequence_number = snap ? snap->sequence_number : 0;
	if (!resolve_options(p, md, opt, err))
		goto fail;
	if (!iceberg_schema_parse(md->current_schema_json, &schema, err) ||
		!check_schema(schema, err))
		goto fail;
	if (snap == NULL)
		goto done;
	if (!read_list(io, md, snap, &recs, &nrecs, err))
		goto fail;

	/* pass 0: delete manifests; pass 1: data manifests */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < nrecs; i++)
		{
			IcebergManifestReader *r;
			const IcebergManifestEntry *e;
			int			rc,
						mix;

			if ((recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DELETES) != (pass == 0))
				continue;
			if (iceberg_check_interrupt(io, err))
				goto fail;
			if (!iceberg_manifest_open(io, &recs[i].mf, md->format_version,
									   ICEBERG_READ_PARTITION, &r, err))
				goto fail;
			mix = manifest_index(&pl, recs[i].path);
			if (mix < 0)
			{
				iceberg_manifest_close(r);
				oom(err);
				goto fail;
			}
			while ((rc = iceberg_manifest_next(r, &e, err)) == 1)
			{
				int64_t		kd;

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
					IcebergCompactFile probe;

					memset(&probe, 0, sizeof(probe));
					probe.records = e->record_count;
					probe.ndeletes = pl.nscratch;
					if (!(p->rewrite_all || e->file_size_in_bytes < p->min_file_size_bytes ||
						  e->file_size_in_bytes > p->max_file_size_bytes ||
						  too_many_deletes(p, &probe) || too_high_ratio(p, &probe, kd)))
						continue;
				}
				if (!add_candidate(&pl, e, mix))
					break;
				if (p->nfiles > known_alloc)
				{
					int			na = known_alloc ? known_alloc * 2 : 64;
					int64_t    *nk = realloc(known, sizeof(int64_t) * (size_t) na);

					if (nk == NULL)
					{
						oom(err);
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
					oom(err);
				goto fail;
			}
		}

	/* the groups, partition by partition (no candidate: cands is NULL) */
	if (pl.ncands > 1)
		qsort(pl.cands, (size_t) pl.ncands, sizeof(struct Cands), cmp_cands);
	for (i = 0; i < pl.ncands; i++)
		if (!pack_partition(&pl, &pl.cands[i], known, &order, &norder, &order_alloc))
			goto fail;

	/* the files of the groups, in group order; the others go */
	{
		IcebergCompactFile *nf = calloc((size_t) norder + 1, sizeof(IcebergCompactFile));
		char	   *used = calloc((size_t) p->nfiles + 1, 1);

		if (nf == NULL || used == NULL)
		{
			free(nf);
			free(used);
			oom(err);
			goto fail;
		}
		for (i = 0; i < norder; i++)
		{
			nf[i] = p->files[order[i]];
			used[order[i]] = 1;
		}
		for (i = 0; i < p->nfiles; i++)
			if (!used[i])
			{
				free(p->files[i].path);
				free(p->files[i].deletes);
			}
		free(used);
		free(p->files);
		p->files = nf;
		p->nfiles = norder;
	}
	if (!link_deletes(p, err))
		goto fail;
done:
	free_recs(recs, nrecs);
	free(known);
	free(order);
	iceberg_schema_free(schema);
	planner_free(&pl);
	*out = p;
	return true;
fail:
	free_recs(recs, nrecs);
	free(known);
	free(order);
	iceberg_schema_free(schema);
	planner_free(&pl);
	iceberg_compact_plan_free(p);
	return false;
}

bool
iceberg_compact_removable(const IcebergCompactPlan *p, int g, int **out, int *n,
						  IcebergError *err)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	int			alloc = 0;
	int			i,
				k;

	*out = NULL;
	*n = 0;
	for (i = 0; i < gr->ndeletes; i++)
	{
		const IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];

		for (k = 0; k < d->ngroups; k++)
			if (d->groups[k] == g && d->covered + d->group_files[k] == d->applies &&
				d->applies > 0 && !int_push(out, n, &alloc, gr->deletes[i]))
			{
				free(*out);
				*out = NULL;
				*n = 0;
				return oom(err);
			}
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Where the new files go
 * ---------------------------------------------------------------------
 */

static void
civil_from_days(int64_t z, int *y, unsigned *m, unsigned *d)
{
	int64_t		era;
	unsigned	doe,
				yoe,
				doy,
				mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned) (z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int) ((int64_t) yoe + era * 400 + (*m <= 2));
}

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
						   const IcebergCompactPlan *p, int g, IcebergError *err)
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
		iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "partition spec %d is not in the table metadata",
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
		const IcebergColumn *src = iceberg_schema_column(schema, pf->source_id);
		const char *tok;
		size_t		tl;
		char		text[64];
		const char *v = NULL;
		size_t		vl = 0;

		if (!iceberg_partition_next(&pp, end, &tok, &tl))
		{
			iceberg_buf_free(&b);
			iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "invalid partition \"%.200s\"", gr->partition);
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
			int			y;
			unsigned	m,
						d;

			v = text;
			if (strcmp(pf->transform, "day") == 0 ||
				(strcmp(pf->transform, "identity") == 0 && src && src->type == ICEBERG_TYPE_DATE))
			{
				civil_from_days(n, &y, &m, &d);
				vl = (size_t) snprintf(text, sizeof(text), "%04d-%02u-%02u", y, m, d);
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

				civil_from_days(days, &y, &m, &d);
				vl = (size_t) snprintf(text, sizeof(text), "%04d-%02u-%02u-%02lld", y, m, d,
									   n - days * 24);
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
	oom(err);
	return NULL;
}

/* ---------------------------------------------------------------------
 * The commit of one group
 * ---------------------------------------------------------------------
 */

void
iceberg_compact_output_free(IcebergCompactOutput *o)
{
	int			i;

	if (o == NULL)
		return;
	free(o->path);
	for (i = 0; i < o->nmetrics; i++)
	{
		free(o->metrics[i].lower);
		free(o->metrics[i].upper);
	}
	free(o->metrics);
	free(o->split_offsets);
	memset(o, 0, sizeof(*o));
}

void
iceberg_compact_commit_free(IcebergCompactCommit *res)
{
	int			i;

	if (res == NULL)
		return;
	iceberg_write_result_free(res->written, res->nwritten, &res->snapshot);
	for (i = 0; i < res->nreplaced; i++)
	{
		free(res->replaced_old[i]);
		free(res->replaced_new[i]);
	}
	free(res->replaced_old);
	free(res->replaced_new);
	free(res->removed);
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
	free(o->types);
	iceberg_part_sums_free(o->sums, o->ntypes > 0 ? o->ntypes : 0);
	iceberg_buf_free(&o->tmp);
	iceberg_new_manifest_free(&o->n);
	memset(o, 0, sizeof(*o));
}

static bool
mout_start(MOut *o, const char *schema, const IcebergKeyValue *meta, int nmeta,
		   int codec, int level, int64_t max_json, int32_t spec_id, int32_t content,
		   IcebergError *err)
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
	if (o->ntypes > 0 && (o->sums = calloc((size_t) o->ntypes, sizeof(IcebergPartSum))) == NULL)
		return oom(err);
	return true;
}

/* Count an entry written (status, its partition text, records, data seq). */
static bool
mout_note(MOut *o, int status, const char *part, size_t part_len, int64_t records,
		  int64_t seq, IcebergError *err)
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
		return oom(err);
	return true;
}

/* Finish, write at path (noted in written), fill the list record. */
static bool
mout_finish(MOut *o, const IcebergWriter *wr, const char *path, int64_t new_seq,
			char ***written, int *nwritten, IcebergError *err)
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
			IcebergError *err)
{
	const IcebergKeyValue *kv;
	int			n = iceberg_manifest_header_all(r, &kv);
	int			i;

	*nout = 0;
	*out = calloc((size_t) (n + extra + 1), sizeof(IcebergKeyValue));
	if (*out == NULL)
		return oom(err);
	for (i = 0; i < n; i++)
		if (strncmp(kv[i].key, "avro.", 5) != 0 &&
			!iceberg_kv_set(*out, nout, kv[i].key, kv[i].value, true, err))
			return false;
	return true;
}

/*
 * Iceberg's manifest_entry schema (https://iceberg.apache.org/spec/#manifests)
 * for format v1 or v2, its partition record taken from a manifest of the
 * same spec.
 */
static const char *const entry_schema_v2 =
"{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
"{\"name\":\"status\",\"type\":\"int\",\"field-id\":0},"
"{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1},"
"{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3},"
"{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":4},"
"{\"name\":\"data_file\",\"field-id\":2,\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":["
"{\"name\":\"content\",\"type\":\"int\",\"field-id\":134},"
"{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100},"
"{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101},"
"{\"name\":\"partition\",\"type\":null,\"field-id\":102},"
"{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
"{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104},"
"%s"
"{\"name\":\"column_sizes\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k117_v118\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":117},{\"name\":\"value\",\"type\":\"long\",\"field-id\":118}]}}],\"default\":null,\"field-id\":108},"
"{\"name\":\"value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k119_v120\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":119},{\"name\":\"value\",\"type\":\"long\",\"field-id\":120}]}}],\"default\":null,\"field-id\":109},"
"{\"name\":\"null_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k121_v122\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":121},{\"name\":\"value\",\"type\":\"long\",\"field-id\":122}]}}],\"default\":null,\"field-id\":110},"
"{\"name\":\"nan_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k138_v139\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":138},{\"name\":\"value\",\"type\":\"long\",\"field-id\":139}]}}],\"default\":null,\"field-id\":137},"
"{\"name\":\"lower_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k126_v127\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":126},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":127}]}}],\"default\":null,\"field-id\":125},"
"{\"name\":\"upper_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k129_v130\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":129},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":130}]}}],\"default\":null,\"field-id\":128},"
"{\"name\":\"key_metadata\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":131},"
"{\"name\":\"split_offsets\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"long\",\"element-id\":133}],\"default\":null,\"field-id\":132},"
"{\"name\":\"equality_ids\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"int\",\"element-id\":136}],\"default\":null,\"field-id\":135},"
"{\"name\":\"sort_order_id\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":140},"
"{\"name\":\"referenced_data_file\",\"type\":[\"null\",\"string\"],\"default\":null,\"field-id\":143}"
"]}}]}";

/* The schema text for format_version with the partition record of schema_text. */
static char *
entry_schema(int format_version, const char *source_schema, int64_t max_json,
			 IcebergError *err)
{
	char	   *tmpl;
	json_t	   *src = NULL;
	json_t	   *root = NULL;
	json_t	   *part;
	char	   *text = NULL;
	char	   *out = NULL;
	size_t		i;

	tmpl = malloc(strlen(entry_schema_v2) + 128);
	if (tmpl == NULL)
	{
		oom(err);
		return NULL;
	}
	sprintf(tmpl, entry_schema_v2,
			format_version == 1 ? "{\"name\":\"block_size_in_bytes\",\"type\":\"long\",\"field-id\":105}," : "");
	src = iceberg_json_load(source_schema, strlen(source_schema), 0, max_json, "avro.schema", err);
	if (src == NULL)
		goto done;
	part = iceberg_schema_strip_null(iceberg_schema_field_type(src, 2, "data_file"));
	part = part ? iceberg_schema_field_type(part, 102, "partition") : NULL;
	if (part == NULL)
	{
		iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "manifest schema without a partition record");
		goto done;
	}
	root = iceberg_json_load(tmpl, strlen(tmpl), 0, max_json, "manifest schema", err);
	if (root == NULL)
		goto done;
	if (format_version == 1)
	{
		/* v1 entries: no sequence numbers, no content, no referenced file */
		json_t	   *fields = json_object_get(root, "fields");
		json_t	   *df = json_object_get(json_object_get(json_array_get(fields, 4), "type"), "fields");

		json_array_remove(fields, 3);
		json_array_remove(fields, 2);
		json_array_remove(df, json_array_size(df) - 1);
		json_array_remove(df, json_array_size(df) - 2);	/* equality_ids */
		json_array_remove(df, 0);
	}
	{
		json_t	   *fields = json_object_get(root, "fields");
		json_t	   *df = NULL;

		for (i = 0; i < json_array_size(fields); i++)
			if (json_integer_value(json_object_get(json_array_get(fields, i), "field-id")) == 2)
				df = json_object_get(json_object_get(json_array_get(fields, i), "type"), "fields");
		for (i = 0; i < json_array_size(df); i++)
		{
			json_t	   *f = json_array_get(df, i);

			if (json_integer_value(json_object_get(f, "field-id")) == 102 &&
				json_object_set(f, "type", part) != 0)
			{
				oom(err);
				goto done;
			}
		}
	}
	text = json_dumps(root, JSON_COMPACT);
	if (text == NULL)
	{
		oom(err);
		goto done;
	}
	out = iceberg_strdup(text, err);
	io_json_free(text);
done:
	free(tmpl);
	json_decref(src);
	json_decref(root);
	return out;
}

/* A map<int, long> field of counts (AVW_ARRAY of key/value records). */
typedef struct MapField
{
	IcebergAvroWValue *items;
	IcebergAvroWField *kv;
	int			n;
} MapField;

static bool
map_field(MapField *m, const IcebergCompactOutput *o, int which, IcebergError *err)
{
	int			i;

	m->n = 0;
	m->items = calloc((size_t) o->nmetrics + 1, sizeof(IcebergAvroWValue));
	m->kv = calloc((size_t) o->nmetrics * 2 + 2, sizeof(IcebergAvroWField));
	if (m->items == NULL || m->kv == NULL)
		return oom(err);
	for (i = 0; i < o->nmetrics; i++)
	{
		const IcebergColumnMetrics *c = &o->metrics[i];
		IcebergAvroWField *kv = &m->kv[m->n * 2];
		static const int32_t key_ids[] = {117, 119, 121, 138, 126, 129};
		int64_t		v = which == 0 ? c->column_size : which == 1 ? c->value_count :
			which == 2 ? c->null_count : c->nan_count;

		if (which <= 3 && v < 0)
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
				 const char *text, IcebergAvroWField *f, IcebergBuf *bufs, IcebergError *err)
{
	const char *pp = text;
	const char *end = text + strlen(text);
	int			k;

	if (ntypes != spec->nfields)
		return iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
								 "the partition record of spec %d cannot be written", (int) spec->spec_id);
	for (k = 0; k < spec->nfields; k++)
	{
		const char *tok;
		size_t		tl;
		char		num[64];

		f[k].field_id = spec->fields[k].field_id;
		f[k].name = spec->fields[k].name;
		if (!iceberg_partition_next(&pp, end, &tok, &tl))
			return iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "invalid partition \"%.200s\"", text);
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
					return oom(err);
				f[k].v.kind = AVW_STRING;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			case ICEBERG_PT_BYTES:
			case ICEBERG_PT_DECIMAL:
				if (!iceberg_json_unhex(tok, tl, &bufs[k]))
					return iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "invalid partition value in \"%.200s\"", text);
				f[k].v.kind = AVW_BYTES;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			default:
				return iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
										 "partition field \"%s\" has a type this writer cannot write",
										 spec->fields[k].name);
		}
	}
	return true;
}

/* Write the ADDED entry of one output into o. */
static bool
add_output(MOut *o, const IcebergCompactOutput *out, const IcebergTableMetadata *md,
		   const IcebergPartitionSpec *spec, const char *partition, int64_t snapshot_id,
		   int64_t data_seq, IcebergError *err)
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
	pf = calloc((size_t) spec->nfields + 1, sizeof(IcebergAvroWField));
	bufs = calloc((size_t) spec->nfields + 1, sizeof(IcebergBuf));
	if (pf == NULL || bufs == NULL)
	{
		oom(err);
		goto done;
	}
	if (spec->nfields > 0 && o->types == NULL)
	{
		iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
						  "the partition record of spec %d cannot be written", (int) spec->spec_id);
		goto done;
	}
	if (!partition_values(spec, o->types, o->ntypes < 0 ? spec->nfields : o->ntypes,
						  partition, pf, bufs, err))
		goto done;

#define DF(id, nm, kind_, val) do { df[nd].field_id = (id); df[nd].name = (nm); \
		df[nd].v.kind = (kind_); df[nd].v.l = (val); nd++; } while (0)
	if (md->format_version >= 2)
		DF(134, "content", AVW_LONG, 0);
	df[nd].field_id = 100;
	df[nd].name = "file_path";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = out->path;
	df[nd].v.len = strlen(out->path);
	nd++;
	df[nd].field_id = 101;
	df[nd].name = "file_format";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = "PARQUET";
	df[nd].v.len = 7;
	nd++;
	df[nd].field_id = 102;
	df[nd].name = "partition";
	df[nd].v.kind = AVW_RECORD;
	df[nd].v.fields = pf;
	df[nd].v.nfields = spec->nfields;
	nd++;
	DF(103, "record_count", AVW_LONG, out->records);
	DF(104, "file_size_in_bytes", AVW_LONG, out->size);
	if (md->format_version == 1)
		DF(105, "block_size_in_bytes", AVW_LONG, 64 * MIB);
	for (i = 0; i < 6; i++)
	{
		if (!map_field(&maps[i], out, i, err))
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
		splits = calloc((size_t) out->nsplit_offsets, sizeof(IcebergAvroWValue));
		if (splits == NULL)
		{
			oom(err);
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
		!mout_note(o, ICEBERG_STATUS_ADDED, partition, strlen(partition), out->records,
				   md->format_version >= 2 ? data_seq : 0, err))
		goto done;
	ok = true;
done:
	for (i = 0; i < 6; i++)
	{
		free(maps[i].items);
		free(maps[i].kv);
	}
	for (i = 0; pf && bufs && i < spec->nfields; i++)
		iceberg_buf_free(&bufs[i]);
	free(bufs);
	free(pf);
	free(splits);
	return ok;
}

/* Copy an entry (raw data_file) into o with status, snapshot and seqs. */
static bool
copy_entry(MOut *o, const IcebergManifestEntry *e, int status, int64_t snapshot_id,
		   int format_version, IcebergError *err)
{
	IcebergAvroWField f[5];
	IcebergAvroWValue df;
	int			n;

	memset(&df, 0, sizeof(df));
	df.kind = AVW_RAW;
	df.p = e->raw_data_file;
	df.len = e->raw_data_file_len;
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
	int			g;
	IcebergCompactCommit *res;
	IcebergError *err;
	IcebergWriteTarget t;		/* the new snapshot's id, seq, codec, names */
	int			nout;			/* manifests written so far */
	StrMap		group_files;	/* path -> index in the group */
	bool	   *found;
	StrMap		removable;		/* delete path -> plan index */
	bool	   *removed_found;
	StrMap		known_deletes;	/* every plan delete path */
	/* the rewritten manifests' list records (by index into recs) */
	IcebergNewManifest *news;	/* indexed like recs; path NULL: kept */
	char	   *source_schema;	/* writer schema of a manifest of the spec */
	IcebergKeyValue *source_meta;
	int			nsource_meta;
	/* the summary */
	int64_t		removed_pos_files,
				removed_eq_files,
				removed_pos_records,
				removed_eq_records,
				removed_delete_bytes;
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
		return iceberg_set_error(c->err, ICEBERG_ERR_LIMIT, "table location too long");
	if (!mout_finish(o, c->wr, path, c->t.seq, &c->res->written, &c->res->nwritten, c->err))
		return false;
	*n = o->n;
	memset(&o->n, 0, sizeof(o->n));
	o->n.nsumm = -1;
	return true;
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
	const IcebergCompactGroup *gr = &c->p->groups[c->g];
	MOut		o;
	IcebergKeyValue *meta = NULL;
	int			nmeta = 0;
	const char *schema;
	bool		changed = false;
	int			has_seq = -1;	/* -1: not looked at yet */
	int			rc;
	bool		ok = false;

	memset(&o, 0, sizeof(o));
	if (!iceberg_manifest_open(c->io, &rec->mf, c->md->format_version,
							   ICEBERG_READ_PARTITION | ICEBERG_READ_RAW, &r, c->err))
		return false;
	schema = iceberg_manifest_header(r, "avro.schema");
	if (schema == NULL)
	{
		iceberg_manifest_close(r);
		return iceberg_set_error(c->err, ICEBERG_ERR_MALFORMED, "manifest without avro.schema");
	}
	if (!copy_header(r, 0, &meta, &nmeta, c->err) ||
		!mout_start(&o, schema, meta, nmeta, c->t.codec, c->t.level, c->t.lim.max_json_bytes,
					rec->mf.partition_spec_id, rec->mf.content, c->err))
		goto done;
	if (c->source_schema == NULL && rec->mf.content == ICEBERG_MANIFEST_CONTENT_DATA &&
		rec->mf.partition_spec_id == gr->spec_id)
	{
		c->source_schema = iceberg_strdup(schema, c->err);
		if (c->source_schema == NULL || !copy_header(r, 4, &c->source_meta, &c->nsource_meta, c->err))
			goto done;
	}
	while ((rc = iceberg_manifest_next(r, &e, c->err)) == 1)
	{
		int			status = ICEBERG_STATUS_EXISTING;
		int64_t		snap = e->snapshot_id;

		if (e->status == ICEBERG_STATUS_DELETED)
			continue;
		if (e->content == ICEBERG_CONTENT_DATA)
		{
			int			k = map_get(&c->group_files, e->file_path);

			if (k >= 0)
			{
				c->found[k] = true;
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				c->res->data_files_rewritten++;
				c->res->bytes_rewritten += e->file_size_in_bytes;
				c->res->records_rewritten += e->record_count;
			}
		}
		else
		{
			int			k = map_get(&c->removable, e->file_path);

			if (k >= 0)
			{
				c->removed_found[k] = true;
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				if (e->content == ICEBERG_CONTENT_POSITION_DELETES)
				{
					c->removed_pos_files++;
					c->removed_pos_records += e->record_count;
				}
				else
				{
					c->removed_eq_files++;
					c->removed_eq_records += e->record_count;
				}
				c->removed_delete_bytes += e->file_size_in_bytes;
			}
			else if (map_get(&c->known_deletes, e->file_path) < 0 &&
					 e->content == ICEBERG_CONTENT_POSITION_DELETES &&
					 ((e->spec_id == gr->spec_id && e->partition_len == strlen(gr->partition) &&
					   memcmp(e->partition, gr->partition, e->partition_len) == 0) ||
					  (e->referenced_data_file != NULL &&
					   map_get(&c->group_files, e->referenced_data_file) >= 0)))
			{
				iceberg_set_error(c->err, ICEBERG_ERR_CONFLICT,
								  "a position delete file was added to the partition since the plan");
				iceberg_set_detail(c->err, "\"%s\" may delete rows of the files being rewritten.",
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
				iceberg_set_error(c->err, ICEBERG_ERR_UNSUPPORTED,
								  "cannot rewrite a manifest written without sequence numbers");
				iceberg_set_detail(c->err, "\"%s\" of this format v2 table has no sequence_number field; rewrite the table's manifests first.",
								   rec->path);
				goto done;
			}
		}
		if (c->md->format_version >= 2 && (e->sequence_number < 0 || e->file_sequence_number < 0))
		{
			iceberg_set_error(c->err, ICEBERG_ERR_MALFORMED, "manifest entry without a sequence number");
			iceberg_set_detail(c->err, "Entry \"%s\" of \"%s\" has no sequence number and cannot inherit one.",
							   e->file_path, rec->path);
			goto done;
		}
		if (!copy_entry(&o, e, status, snap, c->md->format_version, c->err))
			goto done;
	}
	if (rc < 0)
		goto done;
	if (changed)
	{
		if (!commit_manifest(c, &o, news))
			goto done;
	}
	ok = true;
done:
	iceberg_manifest_close(r);
	iceberg_kv_free(meta, nmeta);
	mout_free(&o);
	return ok;
}

/* The manifest of the added files. */
static bool
write_added(Commit *c, const IcebergCompactOutput *outputs, int noutputs, IcebergNewManifest *n)
{
	const IcebergCompactGroup *gr = &c->p->groups[c->g];
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(c->md, gr->spec_id);
	char	   *schema = NULL;
	MOut		o;
	char		num[32];
	int			i;
	bool		ok = false;

	memset(&o, 0, sizeof(o));
	if (spec == NULL)
		return iceberg_set_error(c->err, ICEBERG_ERR_MALFORMED,
								 "partition spec %d is not in the table metadata", (int) gr->spec_id);
	if (c->source_schema == NULL)
		return iceberg_set_error(c->err, ICEBERG_ERR_CONFLICT,
								 "no manifest of the group's files was found");
	schema = entry_schema(c->md->format_version, c->source_schema, c->t.lim.max_json_bytes, c->err);
	if (schema == NULL)
		return false;
	snprintf(num, sizeof(num), "%d", (int) c->md->current_schema_id);
	if (!iceberg_kv_set(c->source_meta, &c->nsource_meta, "schema", c->md->current_schema_json,
						true, c->err) ||
		!iceberg_kv_set(c->source_meta, &c->nsource_meta, "schema-id", num, true, c->err) ||
		(c->md->format_version >= 2 &&
		 !iceberg_kv_set(c->source_meta, &c->nsource_meta, "content", "data", true, c->err)))
		goto done;
	if (!mout_start(&o, schema, c->source_meta, c->nsource_meta, c->t.codec, c->t.level,
					c->t.lim.max_json_bytes, gr->spec_id, ICEBERG_MANIFEST_CONTENT_DATA, c->err))
		goto done;
	for (i = 0; i < noutputs; i++)
	{
		if (!add_output(&o, &outputs[i], c->md, spec, gr->partition, c->t.snapshot_id,
						c->p->base_sequence_number, c->err))
			goto done;
		c->res->data_files_added++;
		c->res->bytes_added += outputs[i].size;
		c->res->records_added += outputs[i].records;
	}
	if (!commit_manifest(c, &o, n))
		goto done;
	ok = true;
done:
	free(schema);
	mout_free(&o);
	return ok;
}

/* The new manifest list; its path into *path_out. */
static bool
write_list(Commit *c, const IcebergSnapshot *snap, const ListRec *recs, int nrecs,
		   const IcebergNewManifest *added, char **path_out)
{
	IcebergManifestListReader *lr;
	IcebergAvroWriter *lw;
	int			i;
	bool		ok = false;

	if (!iceberg_manifest_list_begin(c->io, c->md, snap, snap->snapshot_id, &c->t,
									 &lr, &lw, c->err))
		return false;
	if (added->path != NULL &&
		!iceberg_manifest_list_add_new(lw, added, c->t.seq, c->t.snapshot_id, c->err))
		goto done;
	for (i = 0; i < nrecs; i++)
	{
		if (c->news[i].path != NULL)
		{
			if (!iceberg_manifest_list_add_new(lw, &c->news[i], c->t.seq, c->t.snapshot_id, c->err))
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

/* The snapshot summary: Iceberg's names, totals carried from the parent. */
static bool
fill_summary(Commit *c, const IcebergSnapshot *parent)
{
	IcebergNewSnapshot *s = &c->res->snapshot;
	IcebergCompactCommit *r = c->res;
	char		num[32];
	int			i;
	struct
	{
		const char *key;
		int64_t		v;
		bool		always;
	}			k[] = {
		{"added-data-files", r->data_files_added, true},
		{"deleted-data-files", r->data_files_rewritten, true},
		{"added-records", r->records_added, true},
		{"deleted-records", r->records_rewritten, true},
		{"added-files-size", r->bytes_added, true},
		{"removed-files-size", r->bytes_rewritten + c->removed_delete_bytes, true},
		{"removed-delete-files", c->removed_pos_files + c->removed_eq_files, false},
		{"removed-position-delete-files", c->removed_pos_files, false},
		{"removed-equality-delete-files", c->removed_eq_files, false},
		{"removed-position-deletes", c->removed_pos_records, false},
		{"removed-equality-deletes", c->removed_eq_records, false},
		{"changed-partition-count", 1, true},
	};
	struct
	{
		const char *key;
		int64_t		delta;
	}			t[] = {
		{"total-data-files", r->data_files_added - r->data_files_rewritten},
		{"total-records", r->records_added - r->records_rewritten},
		{"total-files-size", r->bytes_added - r->bytes_rewritten - c->removed_delete_bytes},
		{"total-delete-files", -(c->removed_pos_files + c->removed_eq_files)},
		{"total-position-deletes", -c->removed_pos_records},
		{"total-equality-deletes", -c->removed_eq_records},
	};
	int			nk = (int) (sizeof(k) / sizeof(k[0]));
	int			nt = (int) (sizeof(t) / sizeof(t[0]));

	s->summary = calloc((size_t) (nk + nt + 1), sizeof(IcebergKeyValue));
	if (s->summary == NULL)
		return oom(c->err);
	for (i = 0; i < nk; i++)
	{
		if (!k[i].always && k[i].v == 0)
			continue;
		snprintf(num, sizeof(num), "%" PRId64, k[i].v);
		if (!iceberg_kv_set(s->summary, &s->nsummary, k[i].key, num, true, c->err))
			return false;
	}
	for (i = 0; i < nt; i++)
	{
		int			j;

		for (j = 0; j < parent->nsummary; j++)
		{
			char	   *end;
			long long	v;

			if (strcmp(parent->summary[j].key, t[i].key) != 0 || parent->summary[j].value == NULL)
				continue;
			v = strtoll(parent->summary[j].value, &end, 10);
			if (*end != '\0' || end == parent->summary[j].value)
				continue;
			snprintf(num, sizeof(num), "%lld", v + (long long) t[i].delta);
			if (!iceberg_kv_set(s->summary, &s->nsummary, t[i].key, num, true, c->err))
				return false;
		}
	}
	return true;
}

bool
iceberg_compact_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
							 const IcebergTableMetadata *md, IcebergCompactPlan *p, int g,
							 const IcebergCompactOutput *outputs, int noutputs,
							 int64_t new_snapshot_id, IcebergCompactCommit *res,
							 IcebergError *err)
{
	Commit		c;
	const IcebergSnapshot *snap;
	const IcebergCompactGroup *gr;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	int		   *rm = NULL;
	int			nrm = 0;
	IcebergNewManifest added;
	StrMap		wanted = {0};
	bool		fallback = false;
	char	   *list_path = NULL;
	int			i;
	bool		ok = false;

	iceberg_error_clear(err);
	if (res == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "no result given");
	memset(res, 0, sizeof(*res));
	res->snapshot.parent_snapshot_id = -1;
	res->snapshot.schema_id = -1;
	memset(&added, 0, sizeof(added));
	added.nsumm = -1;
	if (io == NULL || w == NULL || w->write == NULL || p == NULL || g < 0 || g >= p->ngroups)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "a commit needs a file io, a writer, a plan and a group");
	if (!check_table(md, &snap, err))
		return false;
	if (snap == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_CONFLICT, "the table has no current snapshot");
	if (new_snapshot_id <= 0 || iceberg_metadata_snapshot(md, new_snapshot_id) != NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "invalid new snapshot id %" PRId64, new_snapshot_id);
	if (noutputs < 0 || (noutputs > 0 && outputs == NULL))
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid output files");
	gr = &p->groups[g];
	memset(&c, 0, sizeof(c));
	c.io = io;
	c.wr = w;
	c.md = md;
	c.p = p;
	c.g = g;
	c.res = res;
	c.err = err;
	if (!iceberg_write_target_init(&c.t, io, md, new_snapshot_id, err))
		return false;

	/* what to look for */
	c.found = calloc((size_t) gr->nfiles + 1, sizeof(bool));
	if (c.found == NULL)
		goto nomem;
	for (i = 0; i < gr->nfiles; i++)
		if (!map_put(&c.group_files, p->files[gr->first + i].path, i) ||
			!map_put(&wanted, p->manifests[p->files[gr->first + i].manifest], 1))
			goto nomem;
	for (i = 0; i < p->ndeletes; i++)
		if (!map_put(&c.known_deletes, p->deletes[i].path, i))
			goto nomem;
	if (!iceberg_compact_removable(p, g, &rm, &nrm, err))
		goto done;
	c.removed_found = calloc((size_t) nrm + 1, sizeof(bool));
	if (c.removed_found == NULL)
		goto nomem;
	for (i = 0; i < nrm; i++)
		if (!map_put(&c.removable, p->deletes[rm[i]].path, i))
			goto nomem;

	/* the current manifests: those of the group's files, and every delete manifest */
	if (!read_list(io, md, snap, &recs, &nrecs, err))
		goto done;
	c.news = calloc((size_t) nrecs + 1, sizeof(IcebergNewManifest));
	if (c.news == NULL)
		goto nomem;
	for (i = 0; i < nrecs; i++)
		c.news[i].nsumm = -1;
	{
		int			present = 0;

		for (i = 0; i < nrecs; i++)
			if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA &&
				map_get(&wanted, recs[i].path) >= 0)
				present++;
		/* a manifest of the plan is gone (rewritten meanwhile): look everywhere */
		fallback = present < (int) wanted.count;
	}
	for (i = 0; i < nrecs; i++)
	{
		bool		look;

		if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA)
			look = fallback ? recs[i].mf.partition_spec_id == gr->spec_id :
				map_get(&wanted, recs[i].path) >= 0;
		else
			look = true;
		if (!look)
			continue;
		if (iceberg_check_interrupt(io, err) || !filter_manifest(&c, &recs[i], &c.news[i]))
			goto done;
	}
	for (i = 0; i < gr->nfiles; i++)
		if (!c.found[i])
		{
			iceberg_set_error(err, ICEBERG_ERR_CONFLICT,
							  "a file of the group is no longer live in the table");
			iceberg_set_detail(err, "\"%s\" was removed or rewritten by another commit.",
							   p->files[gr->first + i].path);
			goto done;
		}

	/*
	 * the new files (none when the deletes took every row of the group: the
	 * commit only removes), the list, the snapshot
	 */
	if ((noutputs > 0 && !write_added(&c, outputs, noutputs, &added)) ||
		!write_list(&c, snap, recs, nrecs, &added, &list_path))
		goto done;
	if (!iceberg_new_snapshot_replace(&res->snapshot, &c.t, snap->snapshot_id, iceberg_now_ms(),
									  md->current_schema_id, &list_path, err) ||
		!fill_summary(&c, snap))
		goto done;
	/* the manifests replaced, and the delete files removed */
	for (i = 0; i < nrecs; i++)
		if (c.news[i].path != NULL)
		{
			char	  **no = realloc(res->replaced_old, sizeof(char *) * (size_t) (res->nreplaced + 1));
			char	  **nn = no ? realloc(res->replaced_new, sizeof(char *) * (size_t) (res->nreplaced + 1)) : NULL;

			if (no != NULL)
				res->replaced_old = no;
			if (nn == NULL)
				goto nomem;
			res->replaced_new = nn;
			no[res->nreplaced] = strdup(recs[i].path);
			nn[res->nreplaced] = strdup(c.news[i].path);
			res->nreplaced++;
			if (no[res->nreplaced - 1] == NULL || nn[res->nreplaced - 1] == NULL)
				goto nomem;
		}
	res->removed = calloc((size_t) nrm + 1, sizeof(int));
	if (res->removed == NULL)
		goto nomem;
	for (i = 0; i < nrm; i++)
		if (c.removed_found[i])
			res->removed[res->nremoved++] = rm[i];
	res->delete_files_removed = res->nremoved;
	ok = true;
	goto done;
nomem:
	oom(err);
done:
	free(list_path);
	iceberg_new_manifest_free(&added);
	for (i = 0; c.news && i < nrecs; i++)
		iceberg_new_manifest_free(&c.news[i]);
	free(c.news);
	free_recs(recs, nrecs);
	free(rm);
	free(c.found);
	free(c.removed_found);
	free(c.source_schema);
	iceberg_kv_free(c.source_meta, c.nsource_meta);
	map_free(&c.group_files);
	map_free(&c.removable);
	map_free(&c.known_deletes);
	map_free(&wanted);
	return ok;
}

bool
iceberg_compact_committed(IcebergCompactPlan *p, int g, const IcebergCompactCommit *res,
						  IcebergError *err)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	StrMap		old = {0};
	int			i,
				k;

	for (i = 0; i < gr->ndeletes; i++)
	{
		IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];

		for (k = 0; k < d->ngroups; k++)
			if (d->groups[k] == g)
				d->covered += d->group_files[k];
	}
	for (i = 0; i < res->nreplaced; i++)
		if (!map_put(&old, res->replaced_old[i], i))
		{
			map_free(&old);
			return oom(err);
		}
	for (i = 0; i < p->nmanifests; i++)
	{
		int			k2 = map_get(&old, p->manifests[i]);
		char	   *np;

		if (k2 < 0)
			continue;
		np = strdup(res->replaced_new[k2]);
		if (np == NULL)
		{
			map_free(&old);
			return oom(err);
		}
		free(p->manifests[i]);
		p->manifests[i] = np;
	}
	map_free(&old);
	return true;
}
