/*-------------------------------------------------------------------------
 *
 * row_filter.h
 *	  The "where" of a deletion (tms.delete_rows, retention's option
 *	  "where"): a filter on a table's rows, bound to its columns, judged
 *	  per data file on its partition and column metrics, and written as a
 *	  DuckDB predicate for the compaction helper that removes the rows.
 *
 * Grammar (compact_filter.c parses it, filter_tree.h is its tree):
 *	  or      := and (OR and)*
 *	  and     := factor (AND factor)*
 *	  factor  := NOT factor | ( or ) | column cmp literal
 *			   | column [NOT] IN (literal, ...) | column [NOT] BETWEEN
 *				 literal AND literal | column IS [NOT] NULL
 *	  cmp     := = | <> | != | < | <= | > | >=
 *	  literal := 'text' | number | true | false
 * Text is at most 1 KiB, 256 terms, nested at most 32 deep.  A column is
 * a top-level column of the current schema, named exactly (or "quoted"),
 * else case-insensitively when one column alone matches; of type
 * boolean, int, long, date, timestamp, timestamptz, timestamp_ns,
 * timestamptz_ns or string.  A literal is of its column's type: a number
 * for int and long, true or false for boolean, 'YYYY-MM-DD' (or days)
 * for date, 'YYYY-MM-DD[ HH:MM[:SS[.ffffff]]]' (with Z or +HH:MM for the
 * zoned types; or the type's units since 1970) for timestamps, 'text'
 * for string.
 *
 * Semantics are SQL's DELETE ... WHERE: a row is removed when the filter
 * is TRUE for it; FALSE and NULL (a comparison with a NULL value) keep
 * it.  A data file is judged three-valued and conservatively
 * (iceberg_row_filter_classify): ALL only when every row is proven to
 * match, NONE only when no row can, else SOME (the file is read).  The
 * proof uses, per column, its partition value in the file's own spec
 * (identity, or year, month, day, hour of a date or timestamp: a range of
 * values, and non-null) and its metrics (null count, lower and upper
 * bounds, which Iceberg keeps as bounds even when truncated), the same
 * evidence Iceberg's StrictMetricsEvaluator and InclusiveMetricsEvaluator
 * use
 * (https://github.com/apache/iceberg/blob/main/api/src/main/java/org/apache/iceberg/expressions/StrictMetricsEvaluator.java).
 *
 * The DuckDB predicate (iceberg_row_filter_sql) is built from the bound
 * tree, never from the user's text: column references by field id,
 * numbers printed from their int64 values, strings quoted with their
 * quotes doubled.
 *
 * Rules: plain C; errors as TmsError values naming the column or the
 * literal; every allocation freed on every path.
 *
 * src/iceberg/compact/row_filter.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_ROW_FILTER_H
#define TMS_ICEBERG_ROW_FILTER_H

#include "iceberg/compact/compact.h"
#include "io/util/strbuf.h"

typedef struct IcebergRowFilter IcebergRowFilter;

typedef enum IcebergRowMatch
{
	ICEBERG_ROWS_NONE,			/* no row of the file can match */
	ICEBERG_ROWS_SOME,			/* some may: the file must be read */
	ICEBERG_ROWS_ALL			/* every row matches */
} IcebergRowMatch;

/*
 * Parse text and bind it to schema.  ICEBERG_ERR_INVALID_ARGUMENT (the
 * syntax, with the character; a literal not of its column's type),
 * ICEBERG_ERR_NOT_FOUND (a name that is no column), ICEBERG_ERR_UNSUPPORTED
 * (a column of a type not filtered), each with detail and hint.
 */
extern bool iceberg_row_filter_bind(const char *text, const IcebergSchema *schema,
									IcebergRowFilter **out, TmsError *err);
extern void iceberg_row_filter_free(IcebergRowFilter *f);

/*
 * The filter "column < value" on a column of type t (value in its units:
 * retention's cutoff); NULL when out of memory.
 */
extern IcebergRowFilter *iceberg_row_filter_less_than(int32_t field_id, IcebergTypeId t,
													  bool required, int64_t value);

/*
 * The class of a live data file (read with ICEBERG_READ_PARTITION and
 * ICEBERG_READ_BOUNDS); *by_partition: its partition alone decided ALL
 * or NONE.
 */
extern IcebergRowMatch iceberg_row_filter_classify(const IcebergRowFilter *f,
												   const IcebergTableMetadata *md,
												   const IcebergManifestEntry *e,
												   bool *by_partition);

/*
 * How many rows of a live data file (read as for classify) the filter is
 * estimated to match: per column, its null count and its values spread
 * evenly between its bounds (partition ranges narrowing them), columns
 * independent, three-valued through AND, OR and NOT.  An estimate for
 * plans, never a proof: classify decides what is dropped or read.
 */
extern int64_t iceberg_row_filter_estimate(const IcebergRowFilter *f,
										   const IcebergTableMetadata *md,
										   const IcebergManifestEntry *e);

/*
 * The predicate as DuckDB SQL (io_malloc'd; NULL when out of memory):
 * TRUE exactly for the rows the filter matches; the column of field id N
 * is <prefix>N ("d.c" gives d.c3).
 */
extern char *iceberg_row_filter_sql(const IcebergRowFilter *f, const char *prefix);

/*
 * The predicate in another engine's SQL (an engine's DELETE FROM ...
 * WHERE): the tree's shape as standard SQL (parentheses, AND, OR, NOT,
 * IN, NOT IN, IS [NOT] NULL, =, <>, <, <=, >, >=), each column and each
 * literal written by the printer's callbacks from the bound leaf (its
 * field id and type; a literal's value in the type's units, or a
 * string).  A callback returns false to stop (its caller keeps the
 * reason); false also when out of memory.
 */
typedef struct IcebergRowFilterPrinter
{
	bool		(*column) (void *arg, IoStrBuf *b, int32_t field_id, IcebergTypeId t);
	bool		(*value) (void *arg, IoStrBuf *b, IcebergTypeId t, int64_t v, const char *s);
	void	   *arg;
} IcebergRowFilterPrinter;

extern bool iceberg_row_filter_print(const IcebergRowFilter *f,
									 const IcebergRowFilterPrinter *p, IoStrBuf *b);

/*
 * Partition values, shared with retention (retention.h): the n-th value
 * of a partition's canonical JSON array as a long (1; 0 when null; -1
 * not a long or not there), and the range [lo, hi) of a source column's
 * values (of type t, in its Iceberg units) a partition value v of
 * transform (identity, year, month, day, hour) fixes (false: none, or
 * the arithmetic overflows).
 */
extern int	iceberg_partition_long(const char *text, size_t len, int n, int64_t *out);
extern bool iceberg_transform_range(IcebergTypeId t, const char *transform, int64_t v,
									int64_t *lo, int64_t *hi);

#endif							/* TMS_ICEBERG_ROW_FILTER_H */
