/*-------------------------------------------------------------------------
 *
 * retention_plan.c
 *	  Data retention by a time column, the plain-C half: the column and
 *	  cutoff bound to a table, the class of each live data file, the plan
 *	  (compaction's, with a selection) and the metadata-only commit
 *	  (retention.h states the semantics).
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path; overflowing arithmetic on a cutoff or a
 * partition value is caught and makes the file UNKNOWN, never a wrong
 * DROP.
 *
 * src/iceberg/maint/retention_plan.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/maint/retention.h"
#include "iceberg/compact/row_filter.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"
#include "iceberg/write/write_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define US_PER_DAY	INT64_C(86400000000)

static bool
retention_oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

bool
iceberg_epoch_unit_parse(const char *text, IcebergEpochUnit *out)
{
	static const struct
	{
		const char *name;
		IcebergEpochUnit unit;
	}			units[] = {
		{"s", ICEBERG_EPOCH_S}, {"seconds", ICEBERG_EPOCH_S},
		{"ms", ICEBERG_EPOCH_MS}, {"milliseconds", ICEBERG_EPOCH_MS},
		{"us", ICEBERG_EPOCH_US}, {"microseconds", ICEBERG_EPOCH_US},
		{"ns", ICEBERG_EPOCH_NS}, {"nanoseconds", ICEBERG_EPOCH_NS},
	};

	for (size_t i = 0; text != NULL && i < sizeof(units) / sizeof(units[0]); i++)
		if (strcasecmp(text, units[i].name) == 0)
		{
			*out = units[i].unit;
			return true;
		}
	return false;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* ceil(a / b) for b > 0 */
static int64_t
ceil_div(int64_t a, int64_t b)
{
	return -floor_div(-a, b);
}

static bool
is_time_type(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_TIMESTAMP || t == ICEBERG_TYPE_TIMESTAMPTZ ||
		t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS;
}

bool
iceberg_retention_bind(const IcebergTableMetadata *md, const char *column, int64_t cutoff_us,
					   IcebergEpochUnit unit, IcebergRetention **out, TmsError *err)
{
	IcebergSchema *schema = NULL;
	const IcebergColumn *c = NULL;
	IcebergRetention *r;
	int			nfold = 0;

	tms_error_clear(err);
	*out = NULL;
	if (column == NULL || column[0] == '\0')
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no retention column given");
		return false;
	}
	if (!iceberg_schema_parse(md->current_schema_json, &schema, err))
		return false;
	for (int i = 0; i < schema->ncolumns; i++)
		if (strcmp(schema->columns[i].name, column) == 0)
		{
			c = &schema->columns[i];
			nfold = 1;
			break;
		}
	if (c == NULL)
		for (int i = 0; i < schema->ncolumns; i++)
			if (strcasecmp(schema->columns[i].name, column) == 0)
			{
				c = &schema->columns[i];
				nfold++;
			}
	if (c == NULL || nfold != 1)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  nfold > 1 ? "retention column \"%.200s\" is ambiguous" :
					  "retention column \"%.200s\" is not a column of the table",
					  column);
		tms_error_detail(err, "The column must be a top-level column of the table's current schema.");
		iceberg_schema_free(schema);
		return false;
	}
	if (!(is_time_type(c->type) || c->type == ICEBERG_TYPE_DATE ||
		  c->type == ICEBERG_TYPE_LONG || c->type == ICEBERG_TYPE_INT))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "retention column \"%.200s\" is of type %.100s", c->name, c->type_text);
		tms_error_detail(err, "Retention needs a timestamp, timestamptz, date, or long or int epoch column.");
		iceberg_schema_free(schema);
		return false;
	}
	if ((c->type == ICEBERG_TYPE_LONG || c->type == ICEBERG_TYPE_INT) != (unit != ICEBERG_EPOCH_NONE))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  unit == ICEBERG_EPOCH_NONE ? "retention column \"%.200s\" of type %.100s needs a unit" :
					  "retention column \"%.200s\" of type %.100s takes no unit",
					  c->name, c->type_text);
		tms_error_detail(err, "A unit (s, ms, us or ns since 1970-01-01 UTC) says what a long or int column holds; timestamp and date columns have their own.");
		iceberg_schema_free(schema);
		return false;
	}
	r = io_calloc(1, sizeof(IcebergRetention));
	if (r == NULL || (r->column = io_strdup(c->name)) == NULL)
	{
		io_free(r);
		iceberg_schema_free(schema);
		return retention_oom(err);
	}
	r->field_id = c->id;
	r->type = c->type;
	r->required = c->required;
	r->unit = unit;
	r->cutoff_us = cutoff_us;
	iceberg_schema_free(schema);

	/* the cutoff in the column's units: older iff value < r->cutoff */
	switch (r->type)
	{
		case ICEBERG_TYPE_DATE:
			r->cutoff = floor_div(cutoff_us, US_PER_DAY);
			break;
		case ICEBERG_TYPE_TIMESTAMP_NS:
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			if (__builtin_mul_overflow(cutoff_us, INT64_C(1000), &r->cutoff))
				r->cutoff = cutoff_us < 0 ? INT64_MIN : INT64_MAX;
			break;
		case ICEBERG_TYPE_LONG:
		case ICEBERG_TYPE_INT:
			if (unit == ICEBERG_EPOCH_S)
				r->cutoff = ceil_div(cutoff_us, INT64_C(1000000));
			else if (unit == ICEBERG_EPOCH_MS)
				r->cutoff = ceil_div(cutoff_us, INT64_C(1000));
			else if (unit == ICEBERG_EPOCH_NS)
			{
				if (__builtin_mul_overflow(cutoff_us, INT64_C(1000), &r->cutoff))
					r->cutoff = cutoff_us < 0 ? INT64_MIN : INT64_MAX;
			}
			else
				r->cutoff = cutoff_us;
			break;
		default:
			r->cutoff = cutoff_us;
			break;
	}
	r->older = iceberg_row_filter_less_than(r->field_id, r->type, r->required, r->cutoff);
	if (r->older == NULL)
	{
		iceberg_retention_free(r);
		return retention_oom(err);
	}
	*out = r;
	return true;
}

void
iceberg_retention_free(IcebergRetention *r)
{
	if (r == NULL)
		return;
	io_free(r->column);
	io_free(r->where);
	iceberg_row_filter_free(r->filter);
	iceberg_row_filter_free(r->older);
	io_free(r);
}

bool
iceberg_retention_bind_where(const IcebergTableMetadata *md, const char *where,
							 IcebergRetention **out, TmsError *err)
{
	IcebergSchema *schema = NULL;
	IcebergRetention *r;
	bool		ok;

	tms_error_clear(err);
	*out = NULL;
	if (!iceberg_schema_parse(md->current_schema_json, &schema, err))
		return false;
	r = io_calloc(1, sizeof(IcebergRetention));
	if (r == NULL || (r->where = io_strdup(where)) == NULL)
	{
		io_free(r);
		iceberg_schema_free(schema);
		return retention_oom(err);
	}
	ok = iceberg_row_filter_bind(where, schema, &r->filter, err);
	iceberg_schema_free(schema);
	if (!ok)
	{
		iceberg_retention_free(r);
		return false;
	}
	r->field_id = -1;
	*out = r;
	return true;
}

/* A bound of the column's type: 1, 0 absent, -1 unreadable. */
static int
read_bound(const IcebergRetention *r, const uint8_t *span, size_t len, int64_t *out)
{
	const uint8_t *b;
	size_t		n;
	int			rc = iceberg_metric_bound(span, len, r->field_id, &b, &n);
	uint64_t	u = 0;

	if (rc != 1)
		return rc;
	if (r->type == ICEBERG_TYPE_DATE || r->type == ICEBERG_TYPE_INT)
	{
		if (n != 4)
			return -1;
		u = (uint64_t) b[0] | (uint64_t) b[1] << 8 | (uint64_t) b[2] << 16 | (uint64_t) b[3] << 24;
		*out = (int64_t) (int32_t) (uint32_t) u;
		return 1;
	}
	if (n != 8)
		return -1;
	for (int i = 7; i >= 0; i--)
		u = u << 8 | b[i];
	*out = (int64_t) u;
	return 1;
}

IcebergRetentionClass
iceberg_retention_classify(const IcebergRetention *r, const IcebergTableMetadata *md,
						   const IcebergManifestEntry *e, int64_t *older, bool *by_partition)
{
	int64_t		lower = 0,
				upper = 0,
				nulls = -1;
	int			has_lower,
				has_upper,
				has_nulls;
	int64_t		rows;

	*older = 0;
	/* one rule: the where's, or "column < cutoff" in the column's units */
	switch (iceberg_row_filter_classify(r->filter ? r->filter : r->older, md, e, by_partition))
	{
		case ICEBERG_ROWS_ALL:
			*older = e->record_count;
			return ICEBERG_RETAIN_DROP;
		case ICEBERG_ROWS_NONE:
			return ICEBERG_RETAIN_KEEP;
		case ICEBERG_ROWS_SOME:
			break;
	}
	*by_partition = false;
	if (r->filter != NULL)
	{
		/* a where: its rows matched estimated from the metrics */
		*older = iceberg_row_filter_estimate(r->filter, md, e);
		return ICEBERG_RETAIN_STRADDLE;
	}

	/* some rows may be older: straddling when bounded below, else unknown */
	has_nulls = iceberg_metric_count(e->null_value_counts, e->null_value_counts_len,
									 r->field_id, &nulls);
	has_lower = read_bound(r, e->lower_bounds, e->lower_bounds_len, &lower);
	has_upper = read_bound(r, e->upper_bounds, e->upper_bounds_len, &upper);
	if (has_lower != 1 || lower >= r->cutoff)
		return ICEBERG_RETAIN_UNKNOWN;
	rows = e->record_count - (!r->required && has_nulls == 1 && nulls > 0 ? nulls : 0);
	/* older rows estimated linearly between the bounds */
	if (has_upper == 1 && upper >= r->cutoff && upper > lower)
	{
		double		frac = ((double) r->cutoff - (double) lower) /
		((double) upper - (double) lower);

		/* at least one row older, and the upper bound's row is not */
		*older = (int64_t) (frac * (double) rows + 0.5);
		if (*older >= rows)
			*older = rows - 1;
		if (*older < 1)
			*older = 1;
	}
	else
		*older = rows > 0 ? rows : 1;
	return ICEBERG_RETAIN_STRADDLE;
}

/* ---------------------------------------------------------------------
 * The plan
 * ---------------------------------------------------------------------
 */

typedef struct Selector
{
	const IcebergRetention *r;
	const IcebergTableMetadata *md;
	IcebergRetentionPlan *p;
	int			straddling_alloc;
	int			unknown_alloc;
} Selector;

static bool
note_file(IcebergRetentionFile **arr, int *n, int *alloc, const IcebergManifestEntry *e,
		  int64_t older, TmsError *err)
{
	IcebergRetentionFile *f;

	if (*n == *alloc)
	{
		int			na = *alloc ? *alloc * 2 : 16;
		IcebergRetentionFile *nf = na < INT32_MAX / 2 ?
		io_realloc(*arr, sizeof(*nf) * (size_t) na) : NULL;

		if (nf == NULL)
			return retention_oom(err);
		*arr = nf;
		*alloc = na;
	}
	f = &(*arr)[*n];
	memset(f, 0, sizeof(*f));
	(*n)++;
	f->path = io_strdup(e->file_path);
	f->partition = io_strndup(e->partition, e->partition_len);
	f->size = e->file_size_in_bytes;
	f->records = e->record_count;
	f->older = older;
	f->spec_id = e->spec_id;
	if (f->path == NULL || f->partition == NULL)
		return retention_oom(err);
	return true;
}

static int
select_file(void *arg, const IcebergManifestEntry *e, TmsError *err)
{
	Selector   *s = arg;
	IcebergRetentionPlan *p = s->p;
	int64_t		older;
	bool		by_partition;

	switch (iceberg_retention_classify(s->r, s->md, e, &older, &by_partition))
	{
		case ICEBERG_RETAIN_DROP:
			p->dropped_files++;
			p->dropped_bytes += e->file_size_in_bytes > 0 ? e->file_size_in_bytes : 0;
			p->dropped_rows += e->record_count > 0 ? e->record_count : 0;
			p->dropped_by_partition += by_partition;
			return 1;
		case ICEBERG_RETAIN_STRADDLE:
			p->straddling_rows += e->record_count;
			p->straddling_older += older;
			return note_file(&p->straddling, &p->nstraddling, &s->straddling_alloc, e, older,
							 err) ? 0 : -1;
		case ICEBERG_RETAIN_UNKNOWN:
			p->unknown_rows += e->record_count;
			return note_file(&p->unknown, &p->nunknown, &s->unknown_alloc, e, 0, err) ? 0 : -1;
		case ICEBERG_RETAIN_KEEP:
			break;
	}
	p->kept_files++;
	return 0;
}

static void
free_files(IcebergRetentionFile *f, int n)
{
	for (int i = 0; i < n; i++)
	{
		io_free(f[i].path);
		io_free(f[i].partition);
	}
	io_free(f);
}

void
iceberg_retention_plan_free(IcebergRetentionPlan *p)
{
	if (p == NULL)
		return;
	iceberg_compact_plan_free(p->drop);
	free_files(p->straddling, p->nstraddling);
	free_files(p->unknown, p->nunknown);
	io_free(p);
}

/*
 * Retention's commits are compaction's, which keep format v1, v2 and v3
 * (deletion vectors leave with their data files, row lineage is kept).
 */
static bool
format_supported(const IcebergTableMetadata *md, TmsError *err)
{
	if (md->format_version <= 3)
		return true;
	tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
				  "retention of a format v%d table is not supported", md->format_version);
	tms_error_detail(err, "tms knows the Iceberg table formats v1, v2 and v3.");
	return false;
}

bool
iceberg_retention_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					   const IcebergRetention *r, IcebergRetentionPlan **out, TmsError *err)
{
	IcebergRetentionPlan *p;
	IcebergCompactOptions o;
	Selector	s;

	tms_error_clear(err);
	*out = NULL;
	if (!format_supported(md, err))
		return false;
	p = io_calloc(1, sizeof(IcebergRetentionPlan));
	if (p == NULL)
		return retention_oom(err);
	memset(&o, 0, sizeof(o));
	o.delete_file_threshold = -1;
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	o.output_spec_id = -1;
	o.rewrite_all = true;
	s.r = r;
	s.md = md;
	s.p = p;
	s.straddling_alloc = 0;
	s.unknown_alloc = 0;
	o.select = select_file;
	o.select_arg = &s;
	if (!iceberg_compact_plan(io, md, &o, &p->drop, err))
	{
		iceberg_retention_plan_free(p);
		return false;
	}
	*out = p;
	return true;
}

bool
iceberg_retention_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
							   const IcebergTableMetadata *md, IcebergRetentionPlan *p,
							   int64_t new_snapshot_id, IcebergCompactCommit *res,
							   TmsError *err)
{
	IcebergCompactGroupOutput *gs;
	int			n = p->drop->ngroups;
	bool		ok;

	memset(res, 0, sizeof(*res));
	gs = io_calloc((size_t) n + 1, sizeof(IcebergCompactGroupOutput));
	if (gs == NULL)
		return retention_oom(err);
	for (int g = 0; g < n; g++)
		gs[g].group = g;
	ok = iceberg_compact_commit_write(io, w, md, p->drop, gs, n, new_snapshot_id, res, err);
	io_free(gs);
	if (ok)
	{
		char	   *op = io_strdup("delete");

		if (op == NULL)
			return retention_oom(err);
		io_free(res->snapshot.operation);
		res->snapshot.operation = op;
	}
	return ok;
}

/* ----------------------------------------------------------------
 * The rewrite of straddling files (mode "rewrite")
 * ----------------------------------------------------------------
 */

typedef struct RewriteSelector
{
	const IcebergRetention *r;
	const IcebergTableMetadata *md;
	bool		scan;
} RewriteSelector;

static int
select_rewrite(void *arg, const IcebergManifestEntry *e, TmsError *err)
{
	RewriteSelector *s = arg;
	int64_t		older;
	bool		by_partition;

	(void) err;
	switch (iceberg_retention_classify(s->r, s->md, e, &older, &by_partition))
	{
		case ICEBERG_RETAIN_STRADDLE:
			return 1;
		case ICEBERG_RETAIN_UNKNOWN:
			return s->scan ? 1 : 0;
		case ICEBERG_RETAIN_DROP:
		case ICEBERG_RETAIN_KEEP:
			break;
	}
	return 0;
}

IcebergRowCutoff
iceberg_retention_row_cutoff(const IcebergRetention *r)
{
	IcebergRowCutoff c;

	c.field_id = r->field_id;
	c.cutoff = r->cutoff;
	switch (r->type)
	{
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
			c.kind = ICEBERG_CUTOFF_US;
			break;
		case ICEBERG_TYPE_TIMESTAMP_NS:
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			c.kind = ICEBERG_CUTOFF_NS;
			break;
		case ICEBERG_TYPE_DATE:
			c.kind = ICEBERG_CUTOFF_DAYS;
			break;
		default:
			c.kind = ICEBERG_CUTOFF_VALUE;
			break;
	}
	return c;
}

bool
iceberg_retention_rewrite_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
							   const IcebergRetention *r, bool scan, bool row_delta,
							   IcebergCompactPlan **out, TmsError *err)
{
	IcebergCompactOptions o;
	RewriteSelector s;

	tms_error_clear(err);
	*out = NULL;
	if (!format_supported(md, err))
		return false;
	memset(&o, 0, sizeof(o));
	o.delete_file_threshold = -1;
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	o.output_spec_id = -1;
	o.rewrite_all = true;
	o.no_row_ids = row_delta;
	s.r = r;
	s.md = md;
	s.scan = scan;
	o.select = select_rewrite;
	o.select_arg = &s;
	if (!iceberg_compact_plan(io, md, &o, out, err))
		return false;
	{
		/* the helper applies the groups' deletes as compaction's does */
		IcebergSchema *schema;
		bool		ok = iceberg_schema_parse(md->current_schema_json, &schema, err) &&
		iceberg_compact_check_deletes(*out, schema, err);

		iceberg_schema_free(schema);
		if (!ok)
		{
			iceberg_compact_plan_free(*out);
			*out = NULL;
			return false;
		}
	}
	if (r->filter != NULL)
	{
		if (((*out)->remove_where = io_strdup(r->where)) == NULL)
		{
			iceberg_compact_plan_free(*out);
			*out = NULL;
			return retention_oom(err);
		}
	}
	else
		(*out)->remove_older = iceberg_retention_row_cutoff(r);
	return true;
}

bool
iceberg_retention_row_delta(IcebergCompactPlan *p, TmsError *err)
{
	tms_error_clear(err);
	for (int g = 0; g < p->ngroups; g++)
	{
		const IcebergCompactGroup *gr = &p->groups[g];

		for (int i = 0; i < gr->nfiles; i++)
		{
			const IcebergCompactFile *f = &p->files[gr->first + i];

			if (f->spec_id != gr->spec_id || strcmp(f->partition, gr->partition) != 0)
			{
				tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
							  "position deletes of data files of an older partition spec are not written");
				tms_error_detail(err, "\"%s\" was written in partition spec %d, the table's is %d.",
								 f->path, (int) f->spec_id, (int) gr->spec_id);
				tms_error_hint(err, "Use \"mode\": \"rewrite\", or rewrite the table's data files into its current spec first.");
				return false;
			}
		}
		/* one position delete file of the group's partition */
		p->groups[g].expected_outputs = 1;
	}
	p->row_delta = true;
	return true;
}

bool
iceberg_retention_rewrite_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
									   const IcebergTableMetadata *md, IcebergCompactPlan *p,
									   const IcebergCompactGroupOutput *groups, int ngroups,
									   int64_t new_snapshot_id, IcebergCompactCommit *res,
									   TmsError *err)
{
	char	   *op;

	if (!iceberg_compact_commit_write(io, w, md, p, groups, ngroups, new_snapshot_id, res, err))
		return false;
	if (!iceberg_compact_removes_rows(p))
		return true;

	/*
	 * rows removed: the data changed; a row delta of deletes alone is a
	 * "delete", as Iceberg's BaseRowDelta says when it adds no data file
	 */
	if ((op = io_strdup(p->row_delta ? "delete" : "overwrite")) == NULL)
		return retention_oom(err);
	io_free(res->snapshot.operation);
	res->snapshot.operation = op;
	return true;
}
