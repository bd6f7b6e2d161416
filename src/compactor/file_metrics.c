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
 * reports nothing for the field.  One query over the file gives the
 * counts and bounds, parquet_schema proves every field carries its field
 * id (and maps the file's columns to them), parquet_metadata gives the
 * sizes, the footer counts and the row groups' offsets (split offsets).
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

/* The one query of the counts and bounds. */
static void
metrics_sql(Sql *q, const IcebergCompactJob *job, const Leaf *l, int nl, const char *local)
{
	int			i;

	sql_add(q, "SELECT count(*)");
	for (i = 0; i < nl; i++)
	{
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

/* The counts and bounds, from one query over the file. */
static bool
metrics_values(Helper *h, const IcebergCompactJob *job, const Leaf *l, int nl,
			   const char *local, IcebergCompactOutput *out, TmsError *err)
{
	Sql			q = {0};
	duckdb_result r;
	int			i;
	idx_t		col = 1;

	metrics_sql(&q, job, l, nl, local);
	if (q.oom || !helper_run(h, q.data, &r, err))
	{
		if (q.oom)
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		io_sb_free(&q);
		return false;
	}
	io_sb_free(&q);
	out->records = duckdb_value_int64(&r, 0, 0);
	for (i = 0; i < nl; i++)
	{
		const IcebergCompactJobMetric *m = mode_of(job, l[i].c->id);
		IcebergColumnMetrics *cm = &out->metrics[out->nmetrics++];
		int64_t		nonnull = -1;
		int64_t		nans = -1;

		memset(cm, 0, sizeof(*cm));
		cm->id = l[i].c->id;
		cm->column_size = cm->value_count = cm->null_count = cm->nan_count = -1;
		nonnull = duckdb_value_int64(&r, col++, 0);
		if (is_float(l[i].c))
			nans = duckdb_value_int64(&r, col++, 0);
		if (m->mode != ICEBERG_METRICS_NONE)
		{
			/* under a list or a map: the footer's slots (metrics_footer) */
			cm->value_count = l[i].repeated ? -1 : out->records;
			cm->null_count = l[i].repeated ? -1 - nonnull : out->records - nonnull;
			cm->nan_count = nans;
		}
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
	return true;
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
	if (q.oom || !helper_run(h, q.data, &r, err))
		goto done;
	for (row = 0; row < duckdb_row_count(&r); row++)
	{
		int64_t		cid = duckdb_value_int64(&r, 0, row);
		int32_t		id = cid >= 0 && cid < root.nleaves ? leaf_ids[cid] : -1;
		int			k;

		for (k = 0; k < nl && out->metrics[k].id != id; k++)
			;
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
	if (q.oom || !helper_run(h, q.data, &r, err))
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
