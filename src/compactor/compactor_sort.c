/*-------------------------------------------------------------------------
 *
 * compactor_sort.c
 *	  The SQL of the compaction helper's sort and z-order strategies: the
 *	  ORDER BY of a group's rows (rewrite_group.c sorts each group with
 *	  it, within DuckDB's memory limit, spilling to the temporary
 *	  directory).
 *
 * Sort: each field's transform applied to its column c<id>, or for a
 * field of structs struct_extract of its top-level column (identity,
 * date_trunc for year, month, day and hour, which order as Iceberg's
 * transforms do; truncate[W] as Iceberg truncates), then ASC or DESC and
 * NULLS FIRST or LAST.
 *
 * Z-order, as Iceberg's Spark z-order (SparkZOrderUDF, ZOrderByteUtils,
 * https://github.com/apache/iceberg/blob/main/core/src/main/java/org/apache/iceberg/util/ZOrderByteUtils.java):
 * every column becomes 8 bytes that compare as unsigned big-endian
 * numbers, kept here as a UBIGINT "tms_z<j>":
 *	 int, long	   the value with its sign bit flipped;
 *	 date		   its days since 1970-01-01, likewise (Spark casts a date
 *				   to long, which gives null: every date the same value);
 *	 timestamp	   its seconds since the epoch (floor), likewise (Spark's
 *				   cast to long);
 *	 float, double the IEEE bits of the double: all bits flipped when
 *				   negative, else the sign bit;
 *	 string		   the first 8 bytes of its UTF-8, zero-padded;
 *	 binary		   the first 8 bytes, zero-padded;
 *	 boolean	   0x81 in its first byte when true;
 *	 null		   0.
 * Their bits are interleaved, most significant first, column after
 * column (bit i of column j is bit i*n+j of the z-value); the n*64-bit
 * z-value is ordered as n UBIGINT words.
 *
 * src/compactor/compactor_sort.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"

#include <stdio.h>
#include <string.h>

/*
 * The SQL of sort field id in the rows of alias: alias.c<id>, or for a
 * field of structs struct_extract of its top-level column (field_sql.c).
 */
static bool
sort_col(IoStrBuf *col, const IcebergCompactJob *job, const char *alias, int32_t id)
{
	sql_reset(col);
	return field_row_sql(col, job->schema, alias, id) && !col->oom;
}

/* The 8-byte key of z-order column x (its SQL) of type c's, as SQL. */
static void
zkey(IoStrBuf *q, const IcebergColumn *c, const char *x)
{
	switch (c->type)
	{
		case ICEBERG_TYPE_INT:
		case ICEBERG_TYPE_LONG:
			io_sb_printf(q, "coalesce((%s::HUGEINT + 9223372036854775808)::UBIGINT, 0::UBIGINT)", x);
			break;
		case ICEBERG_TYPE_DATE:
			io_sb_printf(q, "coalesce(((%s - DATE '1970-01-01')::HUGEINT + 9223372036854775808)::UBIGINT, 0::UBIGINT)", x);
			break;
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
			io_sb_printf(q, "coalesce(((epoch_us(%s) - (epoch_us(%s) %% 1000000 + 1000000) %% 1000000) // 1000000"
						 " + 9223372036854775808::HUGEINT)::UBIGINT, 0::UBIGINT)", x, x);
			break;
		case ICEBERG_TYPE_FLOAT:
		case ICEBERG_TYPE_DOUBLE:
			io_sb_printf(q, "CASE WHEN %s IS NULL THEN 0::UBIGINT"
						 " WHEN %s::DOUBLE::BIT::BIGINT < 0 THEN (-1 - %s::DOUBLE::BIT::BIGINT)::UBIGINT"
						 " ELSE (%s::DOUBLE::BIT::BIGINT::HUGEINT + 9223372036854775808)::UBIGINT END",
						 x, x, x, x);
			break;
		case ICEBERG_TYPE_STRING:
			io_sb_printf(q, "coalesce(('0x' || rpad(left(hex(left(%s, 8)), 16), 16, '0'))::UBIGINT, 0::UBIGINT)", x);
			break;
		case ICEBERG_TYPE_BINARY:
			io_sb_printf(q, "coalesce(('0x' || rpad(left(hex(%s), 16), 16, '0'))::UBIGINT, 0::UBIGINT)", x);
			break;
		case ICEBERG_TYPE_BOOLEAN:
			io_sb_printf(q, "CASE WHEN %s THEN 9295429630892703744::UBIGINT ELSE 0::UBIGINT END", x);
			break;
		default:
			/* compact_sort.c refuses other types before a job is made */
			io_sb_printf(q, "0::UBIGINT");
	}
}

void
compactor_sort_keys(IoStrBuf *q, const IcebergCompactJob *job)
{
	IoStrBuf	x = {0};
	int			j;

	if (job->sort == NULL || !job->sort->zorder)
		return;
	for (j = 0; j < job->sort->nfields; j++)
	{
		int32_t		id = job->sort->fields[j].source_id;
		const IcebergColumn *c = iceberg_schema_field(job->schema, id, NULL);

		io_sb_printf(q, ", ");
		if (c == NULL || !sort_col(&x, job, "d", id))
			io_sb_printf(q, "0::UBIGINT");
		else
			zkey(q, c, x.data);
		io_sb_printf(q, " AS tms_z%d", j);
	}
	q->oom |= x.oom;
	io_sb_free(&x);
}

/* One sort field's expression over x (its column's SQL); false: none (void). */
static bool
sort_expr(IoStrBuf *q, const IcebergSortField *f, const IcebergColumn *c, const char *x)
{
	const char *t = f->transform;
	int			w;

	if (strcmp(t, "void") == 0)
		return false;
	if (strcmp(t, "year") == 0 || strcmp(t, "month") == 0 || strcmp(t, "day") == 0 ||
		strcmp(t, "hour") == 0)
		io_sb_printf(q, "date_trunc('%s', %s)", t, x);
	else if (sscanf(t, "truncate[%d]", &w) == 1 && w > 0 && c != NULL &&
			 c->type == ICEBERG_TYPE_STRING)
		io_sb_printf(q, "left(%s, %d)", x, w);
	else if (sscanf(t, "truncate[%d]", &w) == 1 && w > 0)
		io_sb_printf(q, "(%s::HUGEINT - ((%s::HUGEINT %% %d) + %d) %% %d)", x, x, w, w, w);
	else
		io_sb_printf(q, "%s", x);
	return true;
}

bool
compactor_order_by(IoStrBuf *q, const IcebergCompactJob *job)
{
	const IcebergSortOrder *o = job->sort;
	IoStrBuf	x = {0};
	int			n = 0;
	int			j;

	if (o == NULL)
		return false;
	if (o->zorder)
	{
		int			nc = o->nfields;
		int			w;

		/* word w holds z-value bits 64w .. 64w+63 */
		io_sb_printf(q, " ORDER BY ");
		for (w = 0; w < nc; w++)
		{
			int			b;

			io_sb_printf(q, "%s(", w ? ", " : "");
			for (b = 0; b < 64; b++)
			{
				int			p = w * 64 + b;

				/* SQL's bit operators share one precedence: parenthesised */
				io_sb_printf(q, "%s(((s.tms_z%d >> %d) & 1::UBIGINT) << %d)", b ? " | " : "",
							 p % nc, 63 - p / nc, 63 - b);
			}
			io_sb_printf(q, ")");
		}
		return true;
	}
	for (j = 0; j < o->nfields; j++)
	{
		const IcebergSortField *f = &o->fields[j];
		size_t		mark = q->len;

		io_sb_printf(q, "%s", n ? ", " : " ORDER BY ");
		if (!sort_col(&x, job, "s", f->source_id) ||
			!sort_expr(q, f, iceberg_schema_field(job->schema, f->source_id, NULL), x.data))
		{
			q->len = mark;		/* a void field orders nothing */
			if (q->data)
				q->data[mark] = '\0';
			continue;
		}
		io_sb_printf(q, " %s NULLS %s", f->descending ? "DESC" : "ASC",
					 f->nulls_first ? "FIRST" : "LAST");
		n++;
	}
	io_sb_free(&x);
	return n > 0;
}
