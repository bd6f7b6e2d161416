/*-------------------------------------------------------------------------
 *
 * file_metrics.c
 *	  The column metrics of a data file the compaction helper wrote, per
 *	  primitive field at every depth, as Iceberg Java's Parquet writer
 *	  reports them (ParquetUtil.footerMetrics and its value writers'
 *	  field metrics), in the field's metrics mode (MetricsConfig):
 *	 - column_size: the field's column chunks' total compressed size;
 *	 - value_count and null_count: for a field reached through structs
 *	   only, the rows and the rows where it is null (a null struct makes
 *	   its fields null); under a list or a map, as Parquet counts values
 *	   (Java takes them from the footer): every slot of the column (the
 *	   footer's num_values: elements, keys or values, and one for each
 *	   null or empty collection) and of them those without a value (the
 *	   slots less the non-null values counted over the rows: DuckDB's
 *	   footer null counts of such columns are not Parquet's);
 *	 - nan_value_count: float and double fields, at every depth;
 *	 - lower and upper bounds: only for fields reached through structs
 *	   (Iceberg's ParquetUtil stores no bounds for a field inside a list
 *	   or a map), the exact min and max over the file (NaN left out),
 *	   serialized per https://iceberg.apache.org/spec/#binary-single-value-serialization
 *	   and truncated in mode truncate(n) (strings to n characters, binary
 *	   and fixed to n bytes, the upper bound incremented).
 * Counts need mode counts or more, bounds truncate or full; mode none
 * reports nothing for the field.  The footer (parquet_metadata: the row
 * groups' null counts, min and max DuckDB wrote, cast back to the
 * column's type) gives the counts and bounds of the top-level columns
 * whose statistics are exact (not float or double, binary, fixed, uuid or
 * timestamp_ns), without reading the file again; one query over the file
 * gives those of the other fields (none when there are none), and those
 * of every field when the footer lacks a statistic (DuckDB leaves out
 * those of long strings).  parquet_schema proves every field carries its
 * field id (and maps the file's columns to them), parquet_metadata gives
 * the sizes, the footer counts and the row groups' offsets (split
 * offsets).
 *
 * src/compactor/file_metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The metrics mode of a field. */
static const IcebergCompactJobMetric *
mode_of(const IcebergCompactJob *job, int32_t id)
{
	static const IcebergCompactJobMetric dflt = {0, ICEBERG_METRICS_TRUNCATE, 16};
	int			i;

	for (i = 0; i < job->nmetrics; i++)
		if (job->metrics[i].id == id)
			return &job->metrics[i];
	return &dflt;
}

static bool
is_float(const IcebergColumn *c)
{
	return c->type == ICEBERG_TYPE_FLOAT || c->type == ICEBERG_TYPE_DOUBLE;
}

static bool
has_bounds(const IcebergCompactJob *job, const Leaf *l)
{
	IcebergMetricsMode m = mode_of(job, l->c->id)->mode;

	return !l->repeated && (m == ICEBERG_METRICS_TRUNCATE || m == ICEBERG_METRICS_FULL);
}

/* The SQL of a bound (agg: min or max) of the values x of field c, as text. */
static void
bound_expr(Sql *q, const IcebergColumn *c, const char *agg, const char *x)
{
	switch (c->type)
	{
		case ICEBERG_TYPE_DATE:
			sql_add(q, "CAST(%s(%s) - DATE '1970-01-01' AS VARCHAR)", agg, x);
			break;
		case ICEBERG_TYPE_TIME:
			sql_add(q, "CAST(epoch_us(DATE '1970-01-01' + %s(%s)) AS VARCHAR)", agg, x);
			break;
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
			sql_add(q, "CAST(epoch_us(%s(%s)) AS VARCHAR)", agg, x);
			break;
		case ICEBERG_TYPE_TIMESTAMP_NS:
			sql_add(q, "CAST(epoch_ns(%s(%s)) AS VARCHAR)", agg, x);
			break;
		case ICEBERG_TYPE_FLOAT:
		case ICEBERG_TYPE_DOUBLE:
			sql_add(q, "CAST(%s(%s) FILTER (WHERE NOT isnan(%s)) AS VARCHAR)", agg, x, x);
			break;
		case ICEBERG_TYPE_BINARY:
		case ICEBERG_TYPE_FIXED:
			sql_add(q, "hex(%s(%s))", agg, x);
			break;
		default:
			sql_add(q, "CAST(%s(%s) AS VARCHAR)", agg, x);
	}
}

/*
 * Does the footer give the metrics of leaf l?  A top-level column whose
 * row group statistics DuckDB writes exactly and casts back (not float or
 * double: NaN; not binary, fixed, uuid or timestamp_ns: their text form).
 */
static bool
from_footer(const IcebergCompactJob *job, const Leaf *l)
{
	const IcebergSchema *s = job->schema;
	IcebergTypeId t = l->c->type;

	return !l->repeated && l->c >= s->columns && l->c < s->columns + s->ncolumns &&
		!is_float(l->c) && t != ICEBERG_TYPE_BINARY && t != ICEBERG_TYPE_FIXED &&
		t != ICEBERG_TYPE_UUID && t != ICEBERG_TYPE_TIMESTAMP_NS &&
		t != ICEBERG_TYPE_TIMESTAMPTZ_NS && !ICEBERG_TYPE_IS_NESTED(t);
}

/*
 * The query of the footer's metrics of the leaves from_footer: the rows,
 * then per leaf its non-null values and bounds (the row groups' null
 * counts, min and max cast back to the column's type), and last whether
 * the footer had all of them (a null count in every row group, min and max
 * unless all null: DuckDB leaves out those of long strings).
 */
static void
footer_sql(Sql *q, const IcebergCompactJob *job, const Leaf *l, int nl, const char *local)
{
	Sql			cond = {0};
	int			i;

	sql_add(q, "SELECT sum(m.row_group_num_rows) FILTER (WHERE m.column_id = 0)::BIGINT");
	sql_add(&cond, "coalesce(true");
	for (i = 0; i < nl; i++)
	{
		Sql			nm = {0};
		Sql			pth = {0};
		Sql			x = {0};
		char		tb[64];
		const char *t;
		int			b;

		if (!from_footer(job, &l[i]))
			continue;
		t = duck_primitive(l[i].c, tb, sizeof(tb));
		avro_name(&nm, l[i].c->name);
		sql_lit(&pth, nm.data ? nm.data : "_");
		sql_add(q, ", sum(CASE WHEN m.path_in_schema = %s"
				" THEN m.row_group_num_rows - m.stats_null_count END)::BIGINT", pth.data);
		for (b = 0; b < 2 && has_bounds(job, &l[i]); b++)
		{
			sql_reset(&x);
			sql_add(&x, "CASE WHEN m.path_in_schema = %s THEN TRY_CAST(m.stats_%s_value AS %s) END",
					pth.data, b ? "max" : "min", t);
			sql_add(q, ", ");
			bound_expr(q, l[i].c, b ? "max" : "min", x.data);
		}
		sql_add(&cond, " AND bool_and(CASE WHEN m.path_in_schema = %s THEN"
				" m.stats_null_count IS NOT NULL AND (m.stats_null_count = m.row_group_num_rows"
				" OR (TRY_CAST(m.stats_min_value AS %s) IS NOT NULL"
				" AND TRY_CAST(m.stats_max_value AS %s) IS NOT NULL)) END)", pth.data, t, t);
		q->oom |= nm.oom || pth.oom || x.oom;
		io_sb_free(&nm);
		io_sb_free(&pth);
		io_sb_free(&x);
	}
	sql_add(&cond, ", false)::INTEGER");
	sql_add(q, ", %s FROM parquet_metadata(", cond.data ? cond.data : "0");
	q->oom |= cond.oom;
	io_sb_free(&cond);
	sql_lit(q, local);
	sql_add(q, ") m");
}

/* The one query of the counts and bounds (of the leaves not skipped). */
static void
metrics_sql(Sql *q, const IcebergCompactJob *job, const Leaf *l, int nl, const bool *skip,
			const char *local)
{
	int			i;

	sql_add(q, "SELECT count(*)");
	for (i = 0; i < nl; i++)
	{
		if (skip[i])
			continue;
		if (!l[i].repeated)
			sql_add(q, ", count(%s)", l[i].expr);
		else
			sql_add(q, ", coalesce(sum(len(list_filter(%s, lambda __tms_v: __tms_v IS NOT NULL))), 0)",
					l[i].expr);
		if (is_float(l[i].c) && !l[i].repeated)
			sql_add(q, ", count_if(isnan(%s))", l[i].expr);
		else if (is_float(l[i].c))
			sql_add(q, ", coalesce(sum(len(list_filter(%s, lambda __tms_v: isnan(__tms_v)))), 0)",
					l[i].expr);
		if (has_bounds(job, &l[i]))
		{
			sql_add(q, ", ");
			bound_expr(q, l[i].c, "min", l[i].expr);
			sql_add(q, ", ");
			bound_expr(q, l[i].c, "max", l[i].expr);
		}
	}
	sql_add(q, " FROM read_parquet(");
	sql_lit(q, local);
	sql_add(q, ") t");
}

/* Bound b (0 lower, 1 upper) of leaf l from result cell k into cm. */
static bool
take_bound(duckdb_result *r, idx_t k, const IcebergCompactJobMetric *m, const Leaf *l, int b,
		   IcebergColumnMetrics *cm)
{
	char	   *v;
	uint8_t    *bytes = NULL;
	size_t		n;
	bool		oom = false;

	if (duckdb_value_is_null(r, k, 0) || (v = duckdb_value_varchar(r, k, 0)) == NULL)
		return true;
	if (iceberg_value_serialize(l->c, v, strlen(v), b == 1,
								m->mode == ICEBERG_METRICS_TRUNCATE ? m->length : 0,
								&bytes, &n, &oom) && bytes != NULL &&
		n <= ICEBERG_COMPACT_MAX_BOUND)
	{
		if (b == 0)
			cm->lower = bytes, cm->lower_len = n, cm->has_lower = true;
		else
			cm->upper = bytes, cm->upper_len = n, cm->has_upper = true;
	}
	else
		io_free(bytes);			/* a value not serialized gets no bound */
	duckdb_free(v);
	return !oom;
}

/* The counts of leaf l (mode m) from non-null and NaN counts into cm. */
static void
take_counts(const IcebergCompactJobMetric *m, const Leaf *l, int64_t records, int64_t nonnull,
			int64_t nans, IcebergColumnMetrics *cm)
{
	if (m->mode == ICEBERG_METRICS_NONE)
		return;
	/* under a list or a map: the footer's slots (metrics_footer) */
	cm->value_count = l->repeated ? -1 : records;
	cm->null_count = l->repeated ? -1 - nonnull : records - nonnull;
	cm->nan_count = nans;
}

/*
 * The counts and bounds of the leaves from_footer from the footer (*done
 * false, nothing taken, when it lacks some), and of the others from one
 * query over the file (of every leaf when skip is all false).
 */
static bool
values_query(Helper *h, const IcebergCompactJob *job, const Leaf *l, int nl, const bool *skip,
			 bool footer, const char *local, IcebergCompactOutput *out, bool *done,
			 TmsError *err)
{
	Sql			q = {0};
	duckdb_result r;
	int			i;
	idx_t		col = 1;

	*done = false;
	if (footer)
		footer_sql(&q, job, l, nl, local);
	else
		metrics_sql(&q, job, l, nl, skip, local);
	/* the footer is light, the pass over the file is not */
	if (q.oom || !(footer ? helper_run_light : helper_run) (h, q.data, &r, err))
	{
		if (q.oom)
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		io_sb_free(&q);
		return false;
	}
	io_sb_free(&q);
	if (footer && duckdb_value_int64(&r, duckdb_column_count(&r) - 1, 0) != 1)
	{
		duckdb_destroy_result(&r);
		return true;			/* the footer lacks some: the pass over the
								 * file */
	}
	out->records = duckdb_value_int64(&r, 0, 0);
	for (i = 0; i < nl; i++)
	{
		const IcebergCompactJobMetric *m = mode_of(job, l[i].c->id);
		IcebergColumnMetrics *cm = &out->metrics[i];
		int64_t		nonnull;
		int64_t		nans = -1;

		if (footer != skip[i])
			continue;
		nonnull = duckdb_value_int64(&r, col++, 0);
		if (is_float(l[i].c))
			nans = duckdb_value_int64(&r, col++, 0);
		take_counts(m, &l[i], out->records, nonnull, nans, cm);
		if (has_bounds(job, &l[i]))
		{
			if (!take_bound(&r, col, m, &l[i], 0, cm) ||
				!take_bound(&r, col + 1, m, &l[i], 1, cm))
			{
				duckdb_destroy_result(&r);
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				return false;
			}
			col += 2;
		}
	}
	duckdb_destroy_result(&r);
	*done = true;
	return true;
}

/*
 * The counts and bounds: the footer's for the leaves from_footer and one
 * query over the file for the others (none when there are none), or, when
 * the footer lacks a statistic, one query over the file for all.
 */
static bool
metrics_values(Helper *h, const IcebergCompactJob *job, const Leaf *l, int nl,
			   const char *local, IcebergCompactOutput *out, TmsError *err)
{
	bool	   *skip = io_calloc((size_t) nl + 1, sizeof(bool));
	bool		done = false;
	bool		ok = true;
	bool		any_footer = false;
	bool		any_scan = false;
	int			i;

	if (skip == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	for (i = 0; i < nl; i++)
	{
		IcebergColumnMetrics *cm = &out->metrics[out->nmetrics++];

		memset(cm, 0, sizeof(*cm));
		cm->id = l[i].c->id;
		cm->column_size = cm->value_count = cm->null_count = cm->nan_count = -1;
		skip[i] = from_footer(job, &l[i]);
		any_footer |= skip[i];
		any_scan |= !skip[i];
	}
	if (any_footer)
		ok = values_query(h, job, l, nl, skip, true, local, out, &done, err);
	if (ok && !done)
		memset(skip, 0, sizeof(bool) * (size_t) nl);	/* every leaf by the
														 * pass */
	if (ok && (!done || any_scan))
		ok = values_query(h, job, l, nl, skip, false, local, out, &done, err);
	io_free(skip);
	return ok;
}

/*
 * From the footer: column sizes, and the counts of the fields under a
 * list or a map; every field of the schema must carry its id.
 */
static bool
metrics_footer(Helper *h, const IcebergCompactJob *job, const Leaf *l, int nl,
			   const char *local, IcebergCompactOutput *out, TmsError *err)
{
	FileNode	root;
	char	   *sig = NULL;
	int32_t    *leaf_ids = NULL;
	Sql			q = {0};
	duckdb_result r;
	bool		ok = false;
	idx_t		row;

	if (!file_schema_read(h, local, &root, &sig, err))
		return false;
	io_free(sig);
	leaf_ids = calloc((size_t) root.nleaves + 1, sizeof(int32_t));
	if (leaf_ids == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}
	if (!file_leaf_ids(job->schema, &root, leaf_ids, root.nleaves, err))
		goto done;
	sql_add(&q, "SELECT column_id, sum(total_compressed_size)::BIGINT, sum(num_values)::BIGINT"
			" FROM parquet_metadata(");
	sql_lit(&q, local);
	sql_add(&q, ") GROUP BY column_id");
	if (q.oom || !helper_run_light(h, q.data, &r, err))
		goto done;
	for (row = 0; row < duckdb_row_count(&r); row++)
	{
		int64_t		cid = duckdb_value_int64(&r, 0, row);
		int32_t		id = cid >= 0 && cid < root.nleaves ? leaf_ids[cid] : -1;
		int			k;

		for (k = 0; k < nl && out->metrics[k].id != id; k++)
			;
		/* row lineage's reserved columns: no metrics (none are required) */
		if (k == nl && job->row_lineage && (id == 2147483540 || id == 2147483539))
			continue;
		if (k == nl)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED,
						  "the file written has a column with field id %d, which the schema lacks",
						  (int) id);
			duckdb_destroy_result(&r);
			goto done;
		}
		if (mode_of(job, id)->mode == ICEBERG_METRICS_NONE)
			continue;
		out->metrics[k].column_size = duckdb_value_int64(&r, 1, row);
		if (l[k].repeated)
		{
			/* null_count holds -1 - the non-null values (metrics_values) */
			int64_t		values = -1 - out->metrics[k].null_count;

			out->metrics[k].value_count = duckdb_value_int64(&r, 2, row);
			out->metrics[k].null_count = out->metrics[k].value_count - values;
		}
	}
	duckdb_destroy_result(&r);
	ok = true;
done:
	io_sb_free(&q);
	free(leaf_ids);
	file_schema_free(&root);
	return ok;
}

/* Where each row group starts. */
static bool
split_offsets(Helper *h, const char *local, IcebergCompactOutput *out, TmsError *err)
{
	Sql			q = {0};
	duckdb_result r;
	idx_t		i;

	sql_add(&q, "SELECT min(CASE WHEN dictionary_page_offset > 0"
			" THEN least(dictionary_page_offset, data_page_offset) ELSE data_page_offset END)"
			" FROM parquet_metadata(");
	sql_lit(&q, local);
	sql_add(&q, ") GROUP BY row_group_id ORDER BY row_group_id");
	if (q.oom || !helper_run_light(h, q.data, &r, err))
	{
		io_sb_free(&q);
		return false;
	}
	io_sb_free(&q);
	out->split_offsets = io_calloc((size_t) duckdb_row_count(&r) + 1, sizeof(int64_t));
	if (out->split_offsets == NULL)
	{
		duckdb_destroy_result(&r);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	for (i = 0; i < duckdb_row_count(&r); i++)
		if (!duckdb_value_is_null(&r, 0, i))
			out->split_offsets[out->nsplit_offsets++] = duckdb_value_int64(&r, 0, i);
	duckdb_destroy_result(&r);
	return true;
}

bool
file_metrics(Helper *h, const IcebergCompactJob *job, const char *local,
			 IcebergCompactOutput *out, TmsError *err)
{
	Leaf	   *l = NULL;
	int			nl = 0;
	bool		ok;

	if (!schema_leaves(job->schema, &l, &nl) ||
		(out->metrics = io_calloc((size_t) nl + 1, sizeof(IcebergColumnMetrics))) == NULL)
	{
		leaves_free(l, nl);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	ok = metrics_values(h, job, l, nl, local, out, err) &&
		metrics_footer(h, job, l, nl, local, out, err) &&
		split_offsets(h, local, out, err);
	leaves_free(l, nl);
	return ok;
}
