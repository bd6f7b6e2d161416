/*-------------------------------------------------------------------------
 *
 * expire.c
 *	  Snapshot expiry: the plan (Iceberg's RemoveSnapshots), the metadata
 *	  without the expired snapshots, and the files they leave behind
 *	  (Iceberg's ReachableFileCleanup).  See expire.h.
 *
 * Rules: plain C, errors as TmsError values, no allocation sized by
 * an untrusted count beyond what the parsed metadata already holds; the
 * file stream keeps hashes of canonical paths, never the paths.
 *
 * src/iceberg/maint/expire.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/maint/expire.h"
#include "iceberg/iceberg_internal.h"
#include "iceberg/maint/pathhash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------------
 * The plan
 * ------------------------------------------------------------------------
 */

/* (snapshot id, index in md->snapshots), sorted by id, for lookups. */
typedef struct SnapIndex
{
	int64_t		id;
	int			idx;
} SnapIndex;

static int
cmp_snap_index(const void *a, const void *b)
{
	const SnapIndex *x = a;
	const SnapIndex *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->idx - y->idx;
}

/* Index of snapshot id in md, or -1 (the first one if ids repeat). */
static int
snap_lookup(const SnapIndex *ix, int n, int64_t id)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (ix[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ix[lo].id == id ? ix[lo].idx : -1;
}

static SnapIndex *
snap_index_build(const IcebergTableMetadata *md, TmsError *err)
{
	SnapIndex  *ix;
	int			i;

	ix = io_malloc(sizeof(SnapIndex) * (size_t) (md->nsnapshots > 0 ? md->nsnapshots : 1));
	if (ix == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	for (i = 0; i < md->nsnapshots; i++)
	{
		ix[i].id = md->snapshots[i].snapshot_id;
		ix[i].idx = i;
	}
	qsort(ix, (size_t) md->nsnapshots, sizeof(SnapIndex), cmp_snap_index);
	return ix;
}

/*
 * A property as a Java long (Long.parseLong: optional sign, decimal
 * digits, nothing else).  Absent: *out = dflt.
 */
static bool
prop_long(const IcebergTableMetadata *md, const char *key, int64_t dflt,
		  int64_t *out, TmsError *err)
{
	const char *v = iceberg_metadata_property(md, key);
	const char *p;
	char	   *end;
	long long	x;

	if (v == NULL)
	{
		*out = dflt;
		return true;
	}
	p = v + ((v[0] == '-' || v[0] == '+') ? 1 : 0);
	if (*p < '0' || *p > '9')
		goto bad;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0')
		goto bad;
	*out = (int64_t) x;
	return true;
bad:
	tms_error_set(err, ICEBERG_ERR_MALFORMED,
				  "invalid table property \"%s\"", key);
	tms_error_detail(err, "The value \"%.100s\" is not an integer.", v);
	return false;
}

/* now - age, saturating at INT64_MIN. */
static int64_t
minus_sat(int64_t now, int64_t age)
{
	if (age > 0 && now < INT64_MIN + age)
		return INT64_MIN;
	if (age < 0 && now > INT64_MAX + age)
		return INT64_MAX;
	return now - age;
}

typedef struct TsId
{
	int64_t		ts;
	int64_t		id;
} TsId;

static int
cmp_ts_id(const void *a, const void *b)
{
	const TsId *x = a;
	const TsId *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

void
iceberg_expire_plan_free(IcebergExpirePlan *p)
{
	int			i;

	if (p == NULL)
		return;
	io_free(p->expired);
	io_free(p->retained);
	for (i = 0; i < p->nremoved_refs; i++)
		io_free(p->removed_refs[i]);
	io_free(p->removed_refs);
	io_free(p->removed_ref_snapshot_ids);
	memset(p, 0, sizeof(*p));
}

/*
 * Mark the ancestors of head (head included) in *mark, at most
 * md->nsnapshots steps; with a retention rule, stop at the first one that
 * is neither among the first min_keep nor at or after older_than.
 */
static void
mark_ancestors(const IcebergTableMetadata *md, const SnapIndex *ix,
			   int64_t head, bool rule, int64_t min_keep, int64_t older_than,
			   bool *mark)
{
	int64_t		id = head;
	int64_t		kept = 0;
	int			steps;

	for (steps = 0; steps < md->nsnapshots; steps++)
	{
		int			k = snap_lookup(ix, md->nsnapshots, id);
		const IcebergSnapshot *s;

		if (k < 0)
			return;
		s = &md->snapshots[k];
		if (rule && !(kept < min_keep || s->timestamp_ms >= older_than))
			return;
		mark[k] = true;
		kept++;
		if (s->parent_snapshot_id < 0)
			return;
		id = s->parent_snapshot_id;
	}
}

/*
 * Check the arguments and work out the effective settings into out
 * (older_than_ms, retain_last, max_ref_age_ms), as RemoveSnapshots'
 * constructor and setters do: the options, else the table's properties,
 * else Iceberg's defaults.
 */
static bool
expire_settings(const IcebergTableMetadata *md, const IcebergExpireOptions *opt,
				IcebergExpirePlan *out, TmsError *err)
{
	const char *gc;
	int64_t		max_age,
				older_than,
				max_ref_age,
				retain_last;

	if (md == NULL || opt == NULL || out == NULL ||
		(opt->nsnapshot_ids > 0 && opt->snapshot_ids == NULL) ||
		opt->nsnapshot_ids < 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid expiry arguments");
		return false;
	}
	gc = iceberg_metadata_property(md, ICEBERG_PROP_GC_ENABLED);
	if (gc != NULL && strcasecmp(gc, "true") != 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "cannot expire snapshots: garbage collection is disabled for this table");
		tms_error_detail(err, "The table property gc.enabled is \"%.50s\"; deleting files may corrupt other tables that share them.", gc);
		return false;
	}
	if (opt->retain_last != -1 && opt->retain_last < 1)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "number of snapshots to retain must be at least 1, cannot be: %d",
					  (int) opt->retain_last);
		return false;
	}
	if (opt->older_than_ms < -1 || opt->max_ref_age_ms < -1 || opt->now_ms < 0)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid expiry options: negative time");
		return false;
	}

	/* effective defaults, as RemoveSnapshots' constructor and setters */
	if (!prop_long(md, ICEBERG_PROP_MAX_SNAPSHOT_AGE_MS,
				   ICEBERG_DEFAULT_MAX_SNAPSHOT_AGE_MS, &max_age, err))
		return false;
	older_than = opt->older_than_ms >= 0 ? opt->older_than_ms
		: minus_sat(opt->now_ms, max_age);
	if (opt->retain_last >= 1)
		retain_last = opt->retain_last;
	else
	{
		if (!prop_long(md, ICEBERG_PROP_MIN_SNAPSHOTS_TO_KEEP,
					   ICEBERG_DEFAULT_MIN_SNAPSHOTS_TO_KEEP, &retain_last, err))
			return false;
		if (retain_last < INT32_MIN || retain_last > INT32_MAX)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED,
						  "invalid table property \"%s\"", ICEBERG_PROP_MIN_SNAPSHOTS_TO_KEEP);
			tms_error_detail(err, "The value is out of range for an int.");
			return false;
		}
	}
	if (opt->max_ref_age_ms >= 0)
		max_ref_age = opt->max_ref_age_ms;
	else if (!prop_long(md, ICEBERG_PROP_MAX_REF_AGE_MS, INT64_MAX,
						&max_ref_age, err))
		return false;
	out->older_than_ms = older_than;
	out->retain_last = (int32_t) retain_last;
	out->max_ref_age_ms = max_ref_age;
	return true;
}

/*
 * computeRetainedRefs: which refs are kept (main always; another while its
 * snapshot is no older than its max ref age) into ref_kept; the others go
 * to out->removed_refs with their snapshot ids.
 */
static bool
expire_retained_refs(const IcebergTableMetadata *md, const IcebergExpireOptions *opt,
					 const SnapIndex *ix, bool *ref_kept, IcebergExpirePlan *out,
					 TmsError *err)
{
	int			i;

	for (i = 0; i < md->nrefs; i++)
	{
		const IcebergRef *r = &md->refs[i];
		int			k;

		if (r->name != NULL && strcmp(r->name, "main") == 0)
		{
			ref_kept[i] = true;
			continue;
		}
		k = snap_lookup(ix, md->nsnapshots, r->snapshot_id);
		if (k >= 0)
		{
			int64_t		age = minus_sat(opt->now_ms, md->snapshots[k].timestamp_ms);
			int64_t		limit = r->max_ref_age_ms >= 0 ? r->max_ref_age_ms : out->max_ref_age_ms;

			ref_kept[i] = age <= limit;
		}
		if (!ref_kept[i])
		{
			out->removed_refs[out->nremoved_refs] = iceberg_strdup(r->name ? r->name : "", err);
			if (out->removed_refs[out->nremoved_refs] == NULL)
				return false;
			out->removed_ref_snapshot_ids[out->nremoved_refs] = r->snapshot_id;
			out->nremoved_refs++;
		}
	}
	return true;
}

/*
 * The snapshots to keep for the kept refs, into retain: each kept ref's
 * head (an explicit id naming one is an error), the ancestors a branch's
 * retention rule keeps (computeAllBranchSnapshotsToRetain), and, into
 * referenced, every snapshot a kept ref reaches.
 */
static bool
expire_retain_refs(const IcebergTableMetadata *md, const IcebergExpireOptions *opt,
				   const SnapIndex *ix, const bool *ref_kept, const IcebergExpirePlan *out,
				   bool *retain, bool *referenced, TmsError *err)
{
	int			i,
				j,
				n = md->nsnapshots;

	/* the heads of retained refs; explicit ids must not be one */
	for (i = 0; i < md->nrefs; i++)
	{
		int			k;

		if (!ref_kept[i])
			continue;
		for (j = 0; j < opt->nsnapshot_ids; j++)
			if (opt->snapshot_ids[j] == md->refs[i].snapshot_id)
			{
				tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
							  "cannot expire snapshot %lld: it is still referenced by ref \"%.100s\"",
							  (long long) opt->snapshot_ids[j], md->refs[i].name);
				return false;
			}
		k = snap_lookup(ix, n, md->refs[i].snapshot_id);
		if (k >= 0)
			retain[k] = true;
	}

	/* computeAllBranchSnapshotsToRetain, and what refs reference */
	for (i = 0; i < md->nrefs; i++)
	{
		const IcebergRef *r = &md->refs[i];

		if (!ref_kept[i])
			continue;
		if (r->type == ICEBERG_REF_BRANCH)
		{
			int64_t		ot = r->max_snapshot_age_ms >= 0
			? minus_sat(opt->now_ms, r->max_snapshot_age_ms) : out->older_than_ms;
			int64_t		mk = r->min_snapshots_to_keep >= 0
			? r->min_snapshots_to_keep : out->retain_last;

			mark_ancestors(md, ix, r->snapshot_id, true, mk, ot, retain);
			mark_ancestors(md, ix, r->snapshot_id, false, 0, 0, referenced);
		}
		else
		{
			int			k = snap_lookup(ix, n, r->snapshot_id);

			if (k >= 0)
				referenced[k] = true;
		}
	}
	return true;
}

/*
 * The snapshots to expire, into expire: those not retained, except the
 * unreferenced ones no older than older_than (unreferencedSnapshotsToRetain)
 * and the current snapshot, plus the explicit ids (the current snapshot's
 * is an error).
 */
static bool
expire_choose(const IcebergTableMetadata *md, const IcebergExpireOptions *opt,
			  int64_t older_than, bool *retain, const bool *referenced,
			  bool *expire, TmsError *err)
{
	int			i,
				j,
				n = md->nsnapshots;

	/* unreferencedSnapshotsToRetain; the current snapshot, always */
	for (i = 0; i < n; i++)
	{
		if (!referenced[i] && md->snapshots[i].timestamp_ms >= older_than)
			retain[i] = true;
		if (md->snapshots[i].snapshot_id == md->current_snapshot_id)
			retain[i] = true;
	}
	for (i = 0; i < n; i++)
		expire[i] = !retain[i];
	for (j = 0; j < opt->nsnapshot_ids; j++)
	{
		if (opt->snapshot_ids[j] == md->current_snapshot_id)
		{
			tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "cannot expire snapshot %lld: it is the current snapshot",
						  (long long) opt->snapshot_ids[j]);
			return false;
		}
		for (i = 0; i < n; i++)
			if (md->snapshots[i].snapshot_id == opt->snapshot_ids[j])
				expire[i] = true;
	}
	return true;
}

/*
 * The plan's two lists, ascending by timestamp (then id): out->expired
 * (each id once) and out->retained; order is scratch space for n + 1.
 */
static void
expire_lists(const IcebergTableMetadata *md, const bool *expire, TsId *order,
			 IcebergExpirePlan *out)
{
	int			i,
				j,
				n = md->nsnapshots;

	for (i = 0, j = 0; i < n; i++)
		if (expire[i])
		{
			order[j].ts = md->snapshots[i].timestamp_ms;
			order[j++].id = md->snapshots[i].snapshot_id;
		}
	qsort(order, (size_t) j, sizeof(TsId), cmp_ts_id);
	for (i = 0; i < j; i++)
		if (i == 0 || order[i].id != order[i - 1].id)
			out->expired[out->nexpired++] = order[i].id;
	for (i = 0, j = 0; i < n; i++)
		if (!expire[i])
		{
			order[j].ts = md->snapshots[i].timestamp_ms;
			order[j++].id = md->snapshots[i].snapshot_id;
		}
	qsort(order, (size_t) j, sizeof(TsId), cmp_ts_id);
	for (i = 0; i < j; i++)
		out->retained[out->nretained++] = order[i].id;
}

bool
iceberg_expire_plan(const IcebergTableMetadata *md,
					const IcebergExpireOptions *opt, IcebergExpirePlan *out,
					TmsError *err)
{
	SnapIndex  *ix = NULL;
	bool	   *ref_kept = NULL;
	bool	   *retain = NULL;
	bool	   *referenced = NULL;
	bool	   *expire = NULL;
	TsId	   *order = NULL;
	int			n;

	tms_error_clear(err);
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (!expire_settings(md, opt, out, err))
		return false;

	n = md->nsnapshots;
	ix = snap_index_build(md, err);
	ref_kept = io_calloc((size_t) md->nrefs + 1, sizeof(bool));
	retain = io_calloc((size_t) n + 1, sizeof(bool));
	referenced = io_calloc((size_t) n + 1, sizeof(bool));
	expire = io_calloc((size_t) n + 1, sizeof(bool));
	order = io_malloc(sizeof(TsId) * ((size_t) n + 1));
	out->removed_refs = io_calloc((size_t) md->nrefs + 1, sizeof(char *));
	out->removed_ref_snapshot_ids = io_calloc((size_t) md->nrefs + 1, sizeof(int64_t));
	out->expired = io_malloc(sizeof(int64_t) * ((size_t) n + 1));
	out->retained = io_malloc(sizeof(int64_t) * ((size_t) n + 1));
	if (ix == NULL || ref_kept == NULL || retain == NULL || referenced == NULL ||
		expire == NULL || order == NULL || out->removed_refs == NULL ||
		out->expired == NULL || out->retained == NULL ||
		out->removed_ref_snapshot_ids == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		goto fail;
	}

	/* computeRetainedRefs */
	if (!expire_retained_refs(md, opt, ix, ref_kept, out, err))
		goto fail;
	/* the heads and branches of retained refs, and what refs reference */
	if (!expire_retain_refs(md, opt, ix, ref_kept, out, retain, referenced, err))
		goto fail;
	/* unreferencedSnapshotsToRetain, the current snapshot, explicit ids */
	if (!expire_choose(md, opt, out->older_than_ms, retain, referenced, expire, err))
		goto fail;
	/* the two lists, ascending by timestamp */
	expire_lists(md, expire, order, out);

	io_free(ix);
	io_free(ref_kept);
	io_free(retain);
	io_free(referenced);
	io_free(expire);
	io_free(order);
	return true;

fail:
	io_free(ix);
	io_free(ref_kept);
	io_free(retain);
	io_free(referenced);
	io_free(expire);
	io_free(order);
	iceberg_expire_plan_free(out);
	return false;
}

bool
iceberg_snapshot_landed(const IcebergTableMetadata *md, int64_t snapshot_id)
{
	return md != NULL && iceberg_metadata_snapshot(md, snapshot_id) != NULL;
}

bool
iceberg_expiry_landed(const IcebergTableMetadata *md,
					  const IcebergExpirePlan *plan)
{
	int			i;

	if (md == NULL || plan == NULL)
		return false;
	for (i = 0; i < plan->nexpired; i++)
		if (iceberg_metadata_snapshot(md, plan->expired[i]) != NULL)
			return false;
	for (i = 0; i < plan->nremoved_refs; i++)
		if (iceberg_metadata_ref(md, plan->removed_refs[i]) != NULL)
			return false;
	return true;
}

/* ------------------------------------------------------------------------
 * The metadata without the expired snapshots (dry run)
 * ------------------------------------------------------------------------
 */

static bool
in_ids(const int64_t *ids, int n, int64_t id)
{
	int			i;

	for (i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static bool
in_names(char *const *names, int n, const char *name)
{
	int			i;

	for (i = 0; i < n; i++)
		if (name != NULL && strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* calloc of n items (at least one), counting failure in *bad. */
static void *
xcalloc(int n, size_t size, bool *bad)
{
	void	   *p = io_calloc(n > 0 ? (size_t) n : 1, size);

	if (p == NULL)
		*bad = true;
	return p;
}

/* strdup counting failure in *bad; NULL stays NULL. */
static char *
xstrdup(const char *s, bool *bad)
{
	char	   *r;

	if (s == NULL)
		return NULL;
	r = io_strdup(s);
	if (r == NULL)
		*bad = true;
	return r;
}

static IcebergKeyValue *
copy_kv(const IcebergKeyValue *kv, int n, bool *bad)
{
	IcebergKeyValue *r = xcalloc(n, sizeof(IcebergKeyValue), bad);
	int			i;

	if (r == NULL)
		return NULL;
	for (i = 0; i < n; i++)
	{
		r[i].key = xstrdup(kv[i].key, bad);
		r[i].value = xstrdup(kv[i].value, bad);
	}
	return r;
}

/* Copy the statistics entries whose snapshot is not expired. */
static IcebergStatisticsFile *
copy_stats(const IcebergStatisticsFile *st, int n, const IcebergExpirePlan *plan,
		   int *nout, bool *bad)
{
	IcebergStatisticsFile *r = xcalloc(n, sizeof(IcebergStatisticsFile), bad);
	int			i;

	*nout = 0;
	if (r == NULL)
		return NULL;
	for (i = 0; i < n; i++)
	{
		if (in_ids(plan->expired, plan->nexpired, st[i].snapshot_id))
			continue;
		r[*nout] = st[i];
		r[*nout].path = xstrdup(st[i].path, bad);
		(*nout)++;
	}
	return r;
}

IcebergTableMetadata *
iceberg_metadata_without(const IcebergTableMetadata *md,
						 const IcebergExpirePlan *plan, TmsError *err)
{
	IcebergTableMetadata *r;
	bool		bad = false;
	int			i,
				j;

	tms_error_clear(err);
	if (md == NULL || plan == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid arguments");
		return NULL;
	}
	r = io_calloc(1, sizeof(*r));
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	*r = *md;
	/* nothing of md's may be freed with r */
	r->table_uuid = r->location = NULL;
	r->current_schema_json = NULL;
	r->sort_orders_json = NULL;
	r->properties = NULL;
	r->specs = NULL;
	r->snapshots = NULL;
	r->refs = NULL;
	r->snapshot_log = NULL;
	r->metadata_log = NULL;
	r->statistics = r->partition_statistics = NULL;
	r->nstatistics = r->npartition_statistics = 0;
	r->table_uuid = xstrdup(md->table_uuid, &bad);
	r->location = xstrdup(md->location, &bad);
	r->current_schema_json = xstrdup(md->current_schema_json, &bad);
	r->sort_orders_json = xstrdup(md->sort_orders_json, &bad);
	r->properties = copy_kv(md->properties, md->nproperties, &bad);
	r->specs = xcalloc(md->nspecs, sizeof(IcebergPartitionSpec), &bad);
	r->snapshots = xcalloc(md->nsnapshots, sizeof(IcebergSnapshot), &bad);
	r->refs = xcalloc(md->nrefs, sizeof(IcebergRef), &bad);
	r->snapshot_log = xcalloc(md->nsnapshot_log, sizeof(IcebergSnapshotLogEntry), &bad);
	r->metadata_log = xcalloc(md->nmetadata_log, sizeof(IcebergMetadataLogEntry), &bad);
	r->nspecs = r->nsnapshots = r->nrefs = r->nsnapshot_log = r->nmetadata_log = 0;
	r->nstatistics = r->npartition_statistics = 0;
	if (r->properties == NULL)
		r->nproperties = 0;
	if (bad)
		goto fail;
	for (i = 0; i < md->nspecs; i++)
	{
		IcebergPartitionSpec *d = &r->specs[r->nspecs++];

		d->spec_id = md->specs[i].spec_id;
		d->fields = xcalloc(md->specs[i].nfields, sizeof(IcebergPartitionField), &bad);
		if (d->fields == NULL)
			goto fail;
		for (j = 0; j < md->specs[i].nfields; j++)
		{
			d->fields[j] = md->specs[i].fields[j];
			d->fields[j].name = xstrdup(md->specs[i].fields[j].name, &bad);
			d->fields[j].transform = xstrdup(md->specs[i].fields[j].transform, &bad);
			d->nfields++;
		}
	}
	for (i = 0; i < md->nsnapshots; i++)
	{
		const IcebergSnapshot *s = &md->snapshots[i];
		IcebergSnapshot *d;

		if (in_ids(plan->expired, plan->nexpired, s->snapshot_id))
			continue;
		d = &r->snapshots[r->nsnapshots++];
		*d = *s;
		d->manifest_list = xstrdup(s->manifest_list, &bad);
		d->nmanifests = 0;
		d->manifests = xcalloc(s->nmanifests, sizeof(char *), &bad);
		d->nsummary = 0;
		d->summary = copy_kv(s->summary, s->nsummary, &bad);
		if (d->manifests == NULL || d->summary == NULL)
			goto fail;
		d->nsummary = s->nsummary;
		d->operation = NULL;
		for (j = 0; j < s->nsummary; j++)
			if (s->operation != NULL && s->summary[j].value != NULL &&
				strcmp(s->summary[j].key, "operation") == 0)
				d->operation = d->summary[j].value;
		for (j = 0; j < s->nmanifests; j++)
			d->manifests[d->nmanifests++] = xstrdup(s->manifests[j], &bad);
	}
	for (i = 0; i < md->nrefs; i++)
	{
		if (in_names(plan->removed_refs, plan->nremoved_refs, md->refs[i].name))
			continue;
		r->refs[r->nrefs] = md->refs[i];
		r->refs[r->nrefs++].name = xstrdup(md->refs[i].name, &bad);
	}
	for (i = 0; i < md->nsnapshot_log; i++)
		if (!in_ids(plan->expired, plan->nexpired, md->snapshot_log[i].snapshot_id))
			r->snapshot_log[r->nsnapshot_log++] = md->snapshot_log[i];
	for (i = 0; i < md->nmetadata_log; i++)
	{
		r->metadata_log[i] = md->metadata_log[i];
		r->metadata_log[i].metadata_file = xstrdup(md->metadata_log[i].metadata_file, &bad);
		r->nmetadata_log++;
	}
	r->statistics = copy_stats(md->statistics, md->nstatistics, plan,
							   &r->nstatistics, &bad);
	r->partition_statistics = copy_stats(md->partition_statistics,
										 md->npartition_statistics, plan,
										 &r->npartition_statistics, &bad);
	if (!bad)
		return r;
fail:
	iceberg_metadata_free(r);
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return NULL;
}

/* ------------------------------------------------------------------------
 * The files of expired snapshots (ReachableFileCleanup)
 * ------------------------------------------------------------------------
 */

/* Hash of the canonical form of path; false (err) when it has none. */
static bool
canonical_hash(const char *path, const char *root, uint64_t *h, char **canon,
			   TmsError *err)
{
	char	   *c;

	if (!iceberg_location_canonical(path, root, &c, err))
		return false;
	*h = iceberg_path_hash(c, strlen(c), 0);
	if (canon != NULL)
		*canon = c;
	else
		io_free(c);
	return true;
}

typedef struct KeptState
{
	IcebergHashArray *kept;
	const char *root;
} KeptState;

static bool
kept_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	KeptState  *st = arg;
	uint64_t	h;

	if (!canonical_hash(f->path, st->root, &h, NULL, err))
		return false;
	return iceberg_hash_array_add(st->kept, h, err);
}

typedef struct Expired
{
	const IcebergFileIO *io;
	const IcebergTableMetadata *md;
	const char *root;
	IcebergHashArray kept;
	IcebergHashTable done;		/* files streamed, manifests read */
	IcebergWalkCallback cb;
	void	   *arg;
	TmsError   *err;
	int64_t    *missing;		/* NULL: a missing file is an error */
} Expired;

/*
 * Is err a missing file (404 / ENOENT) that the caller tolerates?  Then it
 * is counted, err is cleared and the file's hash is marked done, so that
 * it is neither read again nor streamed: it is gone already.  Any other
 * failure (5xx, timeout, a malformed file) stays one.
 */
static bool
expired_missing(Expired *x, uint64_t h)
{
	bool		added;

	if (x->missing == NULL ||
		!(x->err->code == IO_ERR_NOT_FOUND ||
		  (x->err->code == ICEBERG_ERR_IO && x->err->io_code == IO_ERR_NOT_FOUND)))
		return false;
	tms_error_clear(x->err);
	if (!iceberg_hash_table_add(&x->done, h, &added, x->err))
		return false;
	(*x->missing)++;
	return true;
}

/*
 * Stream path unless kept or streamed already.  The canonical path goes
 * to the callback.
 */
static bool
expired_emit(Expired *x, IcebergFileKind kind, const char *path, int64_t size,
			 int64_t snapshot_id, int32_t status)
{
	uint64_t	h;
	char	   *canon;
	bool		added;
	IcebergWalkFile f;
	bool		ok;

	if (!canonical_hash(path, x->root, &h, &canon, x->err))
		return false;
	if (iceberg_hash_array_has(&x->kept, h))
	{
		io_free(canon);
		return true;
	}
	if (!iceberg_hash_table_add(&x->done, h, &added, x->err))
	{
		io_free(canon);
		return false;
	}
	if (!added)
	{
		io_free(canon);
		return true;
	}
	f.kind = kind;
	f.path = canon;
	f.size = size;
	f.snapshot_id = snapshot_id;
	f.status = status;
	ok = x->cb(x->arg, &f, x->err);
	io_free(canon);
	if (!ok && x->err->code == ICEBERG_OK)
		tms_error_set(x->err, ICEBERG_ERR_CANCELLED,
					  "expired-file stream stopped by its callback");
	return ok;
}

/* One manifest of an expired snapshot: its live content, then itself. */
static bool
expired_manifest(Expired *x, const IcebergManifestFile *mf, int64_t snapshot_id)
{
	uint64_t	h;
	bool		added;
	IcebergManifestReader *mr;
	const IcebergManifestEntry *e;
	int			rc;

	if (!canonical_hash(mf->manifest_path, x->root, &h, NULL, x->err))
		return false;
	if (iceberg_hash_array_has(&x->kept, h) ||
		iceberg_hash_table_has(&x->done, h))
		return true;
	if (!iceberg_manifest_open(x->io, mf, x->md->format_version, 0, &mr, x->err))
		return expired_missing(x, h);
	while ((rc = iceberg_manifest_next(mr, &e, x->err)) == 1)
	{
		IcebergFileKind kind;

		if (e->status == ICEBERG_STATUS_DELETED)
			continue;
		kind = e->content == ICEBERG_CONTENT_DATA ? ICEBERG_FILE_DATA
			: e->content == ICEBERG_CONTENT_POSITION_DELETES
			? ICEBERG_FILE_POSITION_DELETES : ICEBERG_FILE_EQUALITY_DELETES;
		if (!expired_emit(x, kind, e->file_path, e->file_size_in_bytes,
						  snapshot_id, e->status))
		{
			iceberg_manifest_close(mr);
			return false;
		}
	}
	iceberg_manifest_close(mr);
	if (rc != 0)
		return expired_missing(x, h);

	/*
	 * streamed after its content, so that an interrupted run leaves orphans,
	 * never dangling manifests
	 */
	if (!expired_emit(x, ICEBERG_FILE_MANIFEST, mf->manifest_path,
					  mf->manifest_length, snapshot_id, -1))
		return false;
	/* a manifest is read once even if the callback saw it already */
	return iceberg_hash_table_add(&x->done, h, &added, x->err);
}

static bool
expired_snapshot(Expired *x, const IcebergSnapshot *s)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	uint64_t	h = 0;
	bool		listed = true;
	int			rc;

	if (s->manifest_list != NULL &&
		!canonical_hash(s->manifest_list, x->root, &h, NULL, x->err))
		return false;
	if (!iceberg_manifest_list_open(x->io, x->md, s, &lr, x->err))
		return s->manifest_list != NULL && expired_missing(x, h);
	while ((rc = iceberg_manifest_list_next(lr, &mf, x->err)) == 1)
	{
		if (iceberg_check_interrupt(x->io, x->err) ||
			!expired_manifest(x, mf, s->snapshot_id))
		{
			rc = -1;
			listed = false;		/* a manifest's failure, not the list's */
			break;
		}
	}
	iceberg_manifest_list_close(lr);
	if (rc < 0 && listed && s->manifest_list != NULL)
		return expired_missing(x, h);
	return rc == 0;
}

static bool
expired_stats(Expired *x, const IcebergStatisticsFile *st, int n,
			  IcebergFileKind kind)
{
	int			i;

	for (i = 0; i < n; i++)
		if (!expired_emit(x, kind, st[i].path, st[i].file_size_in_bytes,
						  st[i].snapshot_id, -1))
			return false;
	return true;
}

bool
iceberg_expired_files(const IcebergFileIO *io,
					  const IcebergTableMetadata *old_md,
					  const IcebergTableMetadata *kept_md,
					  const char *relative_root, IcebergWalkCallback cb,
					  void *arg, int64_t *missing, TmsError *err)
{
	Expired		x;
	KeptState	ks;
	SnapIndex  *kix = NULL;
	bool		ok = false;
	int			i;

	tms_error_clear(err);
	if (io == NULL || old_md == NULL || kept_md == NULL || cb == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid arguments for the expired-file stream");
		return false;
	}
	memset(&x, 0, sizeof(x));
	x.io = io;
	x.md = old_md;
	x.root = relative_root;
	x.cb = cb;
	x.arg = arg;
	x.err = err;
	x.missing = missing;

	/* every file of every kept snapshot (live entries), and its statistics */
	ks.kept = &x.kept;
	ks.root = relative_root;
	if (!iceberg_walk(io, kept_md, NULL, NULL, -1,
					  ICEBERG_WALK_MANIFEST_LISTS | ICEBERG_WALK_MANIFESTS |
					  ICEBERG_WALK_CONTENT_FILES | ICEBERG_WALK_STATISTICS,
					  kept_cb, &ks, err))
		goto done;
	iceberg_hash_array_seal(&x.kept);

	kix = snap_index_build(kept_md, err);
	if (kix == NULL)
		goto done;
	/* manifests (content first) of the snapshots kept_md no longer has */
	for (i = 0; i < old_md->nsnapshots; i++)
	{
		const IcebergSnapshot *s = &old_md->snapshots[i];

		if (snap_lookup(kix, kept_md->nsnapshots, s->snapshot_id) >= 0)
			continue;
		if (iceberg_check_interrupt(io, err) || !expired_snapshot(&x, s))
			goto done;
	}
	/* then their manifest lists */
	for (i = 0; i < old_md->nsnapshots; i++)
	{
		const IcebergSnapshot *s = &old_md->snapshots[i];

		if (s->manifest_list == NULL ||
			snap_lookup(kix, kept_md->nsnapshots, s->snapshot_id) >= 0)
			continue;
		if (!expired_emit(&x, ICEBERG_FILE_MANIFEST_LIST, s->manifest_list, -1,
						  s->snapshot_id, -1))
			goto done;
	}
	/* statistics files kept_md no longer lists */
	if (!expired_stats(&x, old_md->statistics, old_md->nstatistics,
					   ICEBERG_FILE_STATISTICS) ||
		!expired_stats(&x, old_md->partition_statistics,
					   old_md->npartition_statistics,
					   ICEBERG_FILE_PARTITION_STATISTICS))
		goto done;
	ok = true;
done:
	io_free(kix);
	iceberg_hash_array_free(&x.kept);
	iceberg_hash_table_free(&x.done);
	return ok;
}
