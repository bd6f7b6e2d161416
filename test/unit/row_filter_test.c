/*-------------------------------------------------------------------------
 *
 * row_filter_test.c
 *	  Unit driver of a deletion's where (src/iceberg/compact/row_filter.h):
 *	  binding to the schema and its errors (a name that is no column, a
 *	  literal of the wrong type, a type not filtered, the parser's bounds
 *	  on text, terms and depth), the three-valued judgement of a data file
 *	  by its bounds, null counts and partition values (identity of a
 *	  string, a long and a date, day and month of a timestamp), with
 *	  NULL's rules under NOT, AND and OR, and the DuckDB predicate written
 *	  from the bound tree (strings quoted with their quotes doubled).
 *	  Built by "make unit" with the iceberg layer (UNIT_LAYER_row_filter).
 *	  Prints "N passed, M failed" last.
 *
 * test/unit/row_filter_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/iceberg.h"
#include "iceberg/compact/row_filter.h"
#include "io/io.h"
#include "unit.h"

#define DAY_US INT64_C(86400000000)
#define D20260101 INT64_C(20454)

/* A table whose specs evolve: unpartitioned, day(ts), month(ts), hour(ts), year(d), identity(d), identity(e). */
static const char *metadata_json =
"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
" \"location\": \"s3://b/t\", \"last-sequence-number\": 3, \"last-updated-ms\": 1,"
" \"last-column-id\": 8, \"current-schema-id\": 0,"
" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
"  {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
"  {\"id\": 2, \"name\": \"ts\", \"required\": false, \"type\": \"timestamptz\"},"
"  {\"id\": 3, \"name\": \"d\", \"required\": false, \"type\": \"date\"},"
"  {\"id\": 4, \"name\": \"e\", \"required\": true, \"type\": \"long\"},"
"  {\"id\": 5, \"name\": \"s\", \"required\": false, \"type\": \"string\"},"
"  {\"id\": 6, \"name\": \"TSN\", \"required\": false, \"type\": \"timestamp_ns\"},"
"  {\"id\": 7, \"name\": \"x\", \"required\": false, \"type\": \"double\"},"
"  {\"id\": 8, \"name\": \"b\", \"required\": false, \"type\": \"boolean\"}]}],"
" \"default-spec-id\": 1, \"last-partition-id\": 1006,"
" \"partition-specs\": ["
"  {\"spec-id\": 0, \"fields\": []},"
"  {\"spec-id\": 1, \"fields\": [{\"name\": \"ts_day\", \"transform\": \"day\", \"source-id\": 2, \"field-id\": 1000}]},"
"  {\"spec-id\": 2, \"fields\": [{\"name\": \"s\", \"transform\": \"identity\", \"source-id\": 5, \"field-id\": 1001},"
"     {\"name\": \"ts_month\", \"transform\": \"month\", \"source-id\": 2, \"field-id\": 1002}]},"
"  {\"spec-id\": 3, \"fields\": [{\"name\": \"ts_hour\", \"transform\": \"hour\", \"source-id\": 2, \"field-id\": 1003}]},"
"  {\"spec-id\": 4, \"fields\": [{\"name\": \"d_year\", \"transform\": \"year\", \"source-id\": 3, \"field-id\": 1004}]},"
"  {\"spec-id\": 5, \"fields\": [{\"name\": \"d\", \"transform\": \"identity\", \"source-id\": 3, \"field-id\": 1005},"
"     {\"name\": \"e\", \"transform\": \"identity\", \"source-id\": 4, \"field-id\": 1006}]}],"
" \"properties\": {},"
" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";

/* Avro's zigzag varint of v appended at b[*n]. */
static void
put_long(uint8_t *b, size_t *n, int64_t v)
{
	uint64_t	u = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);

	while (u >= 0x80)
	{
		b[(*n)++] = (uint8_t) (u | 0x80);
		u >>= 7;
	}
	b[(*n)++] = (uint8_t) u;
}

/* An optional map span of one entry {field: bound of width bytes} ("null" first). */
static size_t
bound_span(uint8_t *b, int32_t field, int64_t v, int width)
{
	size_t		n = 0;

	put_long(b, &n, 1);
	put_long(b, &n, 1);
	put_long(b, &n, field);
	put_long(b, &n, width);
	for (int i = 0; i < width; i++)
		b[n++] = (uint8_t) ((uint64_t) v >> (8 * i));
	put_long(b, &n, 0);
	return n;
}

/* An optional map span {field: count}, in a block with its byte size. */
static size_t
count_span(uint8_t *b, int32_t field, int64_t count)
{
	size_t		n = 0;
	uint8_t		item[20];
	size_t		ni = 0;

	put_long(item, &ni, field);
	put_long(item, &ni, count);
	put_long(b, &n, 1);
	put_long(b, &n, -1);
	put_long(b, &n, (int64_t) ni);
	memcpy(b + n, item, ni);
	n += ni;
	put_long(b, &n, 0);
	return n;
}

typedef struct Entry
{
	IcebergManifestEntry e;
	uint8_t		lo[32],
				up[32],
				nc[32];
} Entry;

/* A data file of spec, partition, bounds [lo, up] of width bytes on field, nulls null values (-1: no count). */
static void
entry(Entry *x, int32_t spec, const char *part, int32_t field, int width, bool bounds,
	  int64_t lo, int64_t up, int64_t nulls)
{
	memset(x, 0, sizeof(*x));
	x->e.file_path = "s3://b/t/data/f.parquet";
	x->e.spec_id = spec;
	x->e.partition = part;
	x->e.partition_len = strlen(part);
	x->e.record_count = 100;
	x->e.file_size_in_bytes = 1000;
	if (bounds)
	{
		x->e.lower_bounds = x->lo;
		x->e.lower_bounds_len = bound_span(x->lo, field, lo, width);
		x->e.upper_bounds = x->up;
		x->e.upper_bounds_len = bound_span(x->up, field, up, width);
	}
	if (nulls >= 0)
	{
		x->e.null_value_counts = x->nc;
		x->e.null_value_counts_len = count_span(x->nc, field, nulls);
	}
}

static IcebergSchema *schema;

/* Bind where, or NULL with err set. */
static IcebergRowFilter *
bind(const char *where, TmsError *err)
{
	IcebergRowFilter *f;

	return iceberg_row_filter_bind(where, schema, &f, err) ? f : NULL;
}

/* The class of x under where (-1: the where did not bind). */
static int
judge(IcebergTableMetadata *md, const char *where, Entry *x, bool *by_part)
{
	TmsError	err;
	IcebergRowFilter *f = bind(where, &err);
	bool		bp;
	int			m;

	if (f == NULL)
	{
		CHECK(false, "%s: %s (%s)", where, err.message, err.detail);
		return -1;
	}
	m = (int) iceberg_row_filter_classify(f, md, &x->e, by_part ? by_part : &bp);
	iceberg_row_filter_free(f);
	return m;
}

static void
test_bind_errors(void)
{
	TmsError	err;
	IcebergRowFilter *f;
	char		big[2048];

	f = bind("nosuch = 1", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_NOT_FOUND && strstr(err.message, "nosuch") &&
		  strstr(err.detail, "id, ts, d") && err.hint[0], "unknown column: %s", err.message);
	f = bind("id = 'abc'", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.detail, "'abc'") &&
		  strstr(err.detail, "long") && err.hint[0], "long with a string: %s", err.detail);
	f = bind("s = 3", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "string with a number");
	f = bind("ts < '2026-13-01'", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "no month 13");
	f = bind("x = 1", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_UNSUPPORTED && strstr(err.message, "double"),
		  "double not filtered: %s", err.message);
	f = bind("id = 1 OR", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.detail, "10"),
		  "syntax, at its character: %s", err.detail);
	f = bind("id = 1; SELECT 1", &err);
	CHECK(f == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "no statement after");
	big[0] = '\0';
	for (int i = 0; i < 130; i++)
		strcat(big, "b=1 OR ");
	strcat(big, "id=2");
	f = bind(big, &err);
	CHECK(f == NULL && strstr(err.message, "too many terms"), "256 nodes: %s", err.message);
	memset(big, '(', 40);
	strcpy(big + 40, "id = 1");
	memset(big + 46, ')', 40);
	big[86] = '\0';
	f = bind(big, &err);
	CHECK(f == NULL && strstr(err.message, "nested too deeply"), "depth: %s", err.message);
	memset(big, ' ', 1100);
	strcpy(big + 1100, "id = 1");
	f = bind(big, &err);
	CHECK(f == NULL && strstr(err.message, "longer than"), "1 KiB: %s", err.message);
	f = bind("tsn > 5 AND b = true AND \"TSN\" IS NOT NULL AND D = '2026-01-01'", &err);
	CHECK(f != NULL, "names case-insensitively, quoted, and literals of each type: %s",
		  f ? "" : err.message);
	iceberg_row_filter_free(f);
}

static void
test_bounds(IcebergTableMetadata *md)
{
	Entry		x;

	/* id: required long, [10, 19] */
	entry(&x, 0, "[]", 1, 8, true, 10, 19, -1);
	CHECK(judge(md, "id < 20", &x, NULL) == ICEBERG_ROWS_ALL, "id < 20: all");
	CHECK(judge(md, "id < 10", &x, NULL) == ICEBERG_ROWS_NONE, "id < 10: none");
	CHECK(judge(md, "id < 15", &x, NULL) == ICEBERG_ROWS_SOME, "id < 15: some");
	CHECK(judge(md, "id <= 10", &x, NULL) == ICEBERG_ROWS_SOME, "id <= 10: the lower bound's row");
	CHECK(judge(md, "id > 19", &x, NULL) == ICEBERG_ROWS_NONE, "id > 19: none");
	CHECK(judge(md, "id >= 10", &x, NULL) == ICEBERG_ROWS_ALL, "id >= 10: all");
	CHECK(judge(md, "id IN (5, 25)", &x, NULL) == ICEBERG_ROWS_NONE, "IN outside");
	CHECK(judge(md, "id NOT IN (5, 25)", &x, NULL) == ICEBERG_ROWS_ALL, "NOT IN outside");
	CHECK(judge(md, "id = 10", &x, NULL) == ICEBERG_ROWS_SOME, "= inside");
	CHECK(judge(md, "id <> 30", &x, NULL) == ICEBERG_ROWS_ALL, "<> outside");
	CHECK(judge(md, "NOT id < 20", &x, NULL) == ICEBERG_ROWS_NONE, "NOT");
	CHECK(judge(md, "id BETWEEN 10 AND 19", &x, NULL) == ICEBERG_ROWS_ALL, "BETWEEN the bounds");
	CHECK(judge(md, "id < 12 OR id > 15", &x, NULL) == ICEBERG_ROWS_SOME, "OR of two parts");
	CHECK(judge(md, "id < 12 OR id >= 12", &x, NULL) == ICEBERG_ROWS_SOME,
		  "rows are not correlated: conservative");
	CHECK(judge(md, "id IS NOT NULL", &x, NULL) == ICEBERG_ROWS_ALL, "required: never null");
	CHECK(judge(md, "id IS NULL", &x, NULL) == ICEBERG_ROWS_NONE, "required: never null");
	/* no bounds on id: nothing proven */
	entry(&x, 0, "[]", 4, 8, true, 10, 19, -1);
	CHECK(judge(md, "id < 20", &x, NULL) == ICEBERG_ROWS_SOME, "no bounds: read");
	/* lower and upper equal: all rows equal */
	entry(&x, 0, "[]", 1, 8, true, 7, 7, -1);
	CHECK(judge(md, "id = 7", &x, NULL) == ICEBERG_ROWS_ALL, "= a constant column");
	CHECK(judge(md, "id IN (3, 7)", &x, NULL) == ICEBERG_ROWS_ALL, "IN a constant column");
	CHECK(judge(md, "id <> 7", &x, NULL) == ICEBERG_ROWS_NONE, "<> a constant column");

	/* ts: nullable, [D, D + 1 day), null count unknown, 0, all */
	entry(&x, 0, "[]", 2, 8, true, D20260101 * DAY_US, (D20260101 + 1) * DAY_US - 1, -1);
	CHECK(judge(md, "ts < '2026-01-02 00:00:00Z'", &x, NULL) == ICEBERG_ROWS_SOME,
		  "nulls unknown: they stay");
	entry(&x, 0, "[]", 2, 8, true, D20260101 * DAY_US, (D20260101 + 1) * DAY_US - 1, 0);
	CHECK(judge(md, "ts < '2026-01-02 00:00:00Z'", &x, NULL) == ICEBERG_ROWS_ALL, "no null: all");
	CHECK(judge(md, "ts < '2026-01-02 01:00:00+01:00'", &x, NULL) == ICEBERG_ROWS_ALL,
		  "a zone offset");
	CHECK(judge(md, "ts IS NULL", &x, NULL) == ICEBERG_ROWS_NONE, "no null: IS NULL none");
	entry(&x, 0, "[]", 2, 8, false, 0, 0, 100);
	CHECK(judge(md, "ts < '2026-01-02'", &x, NULL) == ICEBERG_ROWS_NONE, "only nulls: none");
	CHECK(judge(md, "NOT (ts < '2026-01-02')", &x, NULL) == ICEBERG_ROWS_NONE,
		  "only nulls: NOT keeps NULL");
	CHECK(judge(md, "ts IS NULL", &x, NULL) == ICEBERG_ROWS_ALL, "only nulls: IS NULL all");
	CHECK(judge(md, "ts IS NULL OR ts < '2026-01-02'", &x, NULL) == ICEBERG_ROWS_ALL,
		  "OR with NULL and TRUE");
	CHECK(judge(md, "ts IS NULL AND ts < '2026-01-02'", &x, NULL) == ICEBERG_ROWS_NONE,
		  "AND with NULL");
}

/* The rows of x (100) under where that the estimate gives (-1: did not bind). */
static int64_t
est(IcebergTableMetadata *md, const char *where, Entry *x)
{
	TmsError	err;
	IcebergRowFilter *f = bind(where, &err);
	int64_t		n;

	if (f == NULL)
	{
		CHECK(false, "%s: %s (%s)", where, err.message, err.detail);
		return -1;
	}
	n = iceberg_row_filter_estimate(f, md, &x->e);
	iceberg_row_filter_free(f);
	return n;
}

/*
 * The plan's estimate of the rows a where matches: even spread between
 * the bounds, the null count, independence, three-valued NOT.
 */
static void
test_estimate(IcebergTableMetadata *md)
{
	Entry		x;

	/* id: required long, 100 rows in [10, 19]: ten values, ten rows each */
	entry(&x, 0, "[]", 1, 8, true, 10, 19, -1);
	CHECK(est(md, "id < 15", &x) == 50, "id < 15: half (%lld)", (long long) est(md, "id < 15", &x));
	CHECK(est(md, "id <= 10", &x) == 10, "id <= 10: one value of ten");
	CHECK(est(md, "id > 17", &x) == 20, "id > 17: two values");
	CHECK(est(md, "id = 12", &x) == 10, "= one value of ten");
	CHECK(est(md, "id IN (11, 12, 40)", &x) == 20, "IN: two values inside");
	CHECK(est(md, "id <> 12", &x) == 90, "<>: the others");
	CHECK(est(md, "id < 15 AND id >= 15", &x) == 25, "AND: independent (not correlated)");
	CHECK(est(md, "id < 15 OR id > 17", &x) == 60, "OR: 1 - (1 - .5)(1 - .2)");
	CHECK(est(md, "NOT id < 15", &x) == 50, "NOT");
	CHECK(est(md, "id < 20", &x) == 100 && est(md, "id < 10", &x) == 0, "proven: all, none");

	/* ts: nullable, one day, 40 nulls of 100 */
	entry(&x, 0, "[]", 2, 8, true, D20260101 * DAY_US, (D20260101 + 1) * DAY_US - 1, 40);
	CHECK(est(md, "ts < '2026-01-01 06:00:00Z'", &x) == 15,
		  "a quarter of the 60 non-null rows (%lld)",
		  (long long) est(md, "ts < '2026-01-01 06:00:00Z'", &x));
	CHECK(est(md, "NOT ts < '2026-01-01 06:00:00Z'", &x) == 45, "NOT keeps the NULLs out");
	CHECK(est(md, "ts IS NULL", &x) == 40 && est(md, "ts IS NOT NULL", &x) == 60, "IS NULL");
	CHECK(est(md, "ts IS NULL OR ts < '2026-01-01 06:00:00Z'", &x) == 49,
		  "OR's sides independent, as PostgreSQL takes them (.4 + .15 - .4 x .15)");

	/* no bounds: PostgreSQL's defaults, a third for a range, 1/200 for = */
	entry(&x, 0, "[]", 4, 8, true, 10, 19, -1);
	CHECK(est(md, "id < 15", &x) == 33, "no bounds: a third");
	CHECK(est(md, "id = 15", &x) == 1, "no bounds: 1/200 (0.5 rounds up)");

	/* strings: the bytes after the bounds' common prefix as a number */
	entry(&x, 0, "[]", 5, 0, false, 0, 0, 0);
	x.e.lower_bounds = x.lo;
	x.e.upper_bounds = x.up;
	{
		size_t		n = 0;

		put_long(x.lo, &n, 1);
		put_long(x.lo, &n, 1);
		put_long(x.lo, &n, 5);
		put_long(x.lo, &n, 4);
		memcpy(x.lo + n, "ab\x00\x00", 4);
		n += 4;
		put_long(x.lo, &n, 0);
		x.e.lower_bounds_len = n;
		memcpy(x.up, x.lo, n);
		x.up[n - 3] = (uint8_t) 0x80;	/* "ab\x80\x00" */
		x.e.upper_bounds_len = n;
	}
	CHECK(est(md, "s < 'ab@'", &x) == 50, "string half way (%lld)",
		  (long long) est(md, "s < 'ab@'", &x));
	CHECK(est(md, "s < 'aa'", &x) == 0 && est(md, "s >= 'aa'", &x) == 100, "string outside");
}

static void
test_partitions(IcebergTableMetadata *md)
{
	Entry		x;
	bool		bp;

	/* spec 1: day(ts) = 2026-01-01, no metrics */
	entry(&x, 1, "[20454]", 2, 8, false, 0, 0, -1);
	CHECK(judge(md, "ts < '2026-01-02'", &x, &bp) == ICEBERG_ROWS_ALL && bp, "day: all, by partition");
	CHECK(judge(md, "ts >= '2026-01-02'", &x, &bp) == ICEBERG_ROWS_NONE && bp, "day: none");
	CHECK(judge(md, "ts < '2026-01-01 12:00:00Z'", &x, &bp) == ICEBERG_ROWS_SOME && !bp, "day: some");
	CHECK(judge(md, "ts IS NULL", &x, &bp) == ICEBERG_ROWS_NONE && bp, "day: a value, so no null");
	entry(&x, 1, "[null]", 2, 8, false, 0, 0, -1);
	CHECK(judge(md, "ts IS NULL", &x, &bp) == ICEBERG_ROWS_ALL && bp, "day null: every ts null");
	/* spec 2: identity(s), month(ts) = 2026-01 (672) */
	entry(&x, 2, "[\"x\",672]", 2, 8, false, 0, 0, -1);
	CHECK(judge(md, "s = 'x'", &x, &bp) == ICEBERG_ROWS_ALL && bp, "string identity: all");
	CHECK(judge(md, "s IN ('y', 'z')", &x, &bp) == ICEBERG_ROWS_NONE && bp, "string identity: none");
	CHECK(judge(md, "s = 'x' AND ts < '2026-02-01'", &x, &bp) == ICEBERG_ROWS_ALL && bp,
		  "two partition fields");
	CHECK(judge(md, "s = 'x' AND ts < '2026-01-15'", &x, &bp) == ICEBERG_ROWS_SOME, "month: some");
	entry(&x, 2, "[\"x\\\"y\",672]", 2, 8, false, 0, 0, -1);
	CHECK(judge(md, "s = 'x'", &x, &bp) == ICEBERG_ROWS_SOME, "an escaped value proves nothing");
	/* spec 5: identity(d), identity(e) */
	entry(&x, 5, "[20454,3]", 2, 8, false, 0, 0, -1);
	CHECK(judge(md, "e = 3 AND d = '2026-01-01'", &x, &bp) == ICEBERG_ROWS_ALL && bp,
		  "identity long and date");
	CHECK(judge(md, "e > 3 OR d < '2026-01-01'", &x, &bp) == ICEBERG_ROWS_NONE && bp, "identity: none");
}

static void
test_sql(void)
{
	TmsError	err;
	IcebergRowFilter *f = bind("id = 5 AND s = 'it''s' OR NOT (ts IS NULL) OR d IN ('2026-01-01', 3)"
							   " OR b = false OR tsn >= 7 OR s NOT IN ('''; DROP TABLE t; --')", &err);
	char	   *sql = f ? iceberg_row_filter_sql(f, "d.c") : NULL;
	const char *want = "(((((((d.c1 = CAST('5' AS BIGINT)) AND (d.c5 = 'it''s')) OR (NOT (epoch_us(d.c2) IS NULL)))"
	" OR (date_diff('day', DATE '1970-01-01', d.c3) IN (CAST('20454' AS BIGINT), CAST('3' AS BIGINT))))"
	" OR (d.c8 = false)) OR (epoch_ns(d.c6) >= CAST('7' AS BIGINT))) OR (d.c5 NOT IN ('''; DROP TABLE t; --')))";

	CHECK(sql != NULL && strcmp(sql, want) == 0, "the predicate:\n got %s\nwant %s",
		  sql ? sql : "(none)", want);
	io_free(sql);
	iceberg_row_filter_free(f);
}

/* A printer of another engine's SQL (row_filter.h): c<id>:<type> and v<type>:<value>. */
static bool
tp_column(void *arg, IoStrBuf *b, int32_t field_id, IcebergTypeId t)
{
	(void) arg;
	io_sb_printf(b, "c%d:%d", (int) field_id, (int) t);
	return field_id != 99;
}

static bool
tp_value(void *arg, IoStrBuf *b, IcebergTypeId t, int64_t v, const char *s)
{
	(void) arg;
	(void) t;
	if (s)
		io_sb_printf(b, "<%s>", s);
	else
		io_sb_printf(b, "%lld", (long long) v);
	return !(s && strcmp(s, "stop") == 0);
}

static void
test_print(void)
{
	TmsError	err;
	IcebergRowFilterPrinter p = {tp_column, tp_value, NULL};
	IcebergRowFilter *f = bind("id = 5 AND s = 'it''s' OR NOT (ts IS NOT NULL) OR d NOT IN ('2026-01-01', 3)"
							   " OR b BETWEEN false AND true", &err);
	IoStrBuf	b;
	char		want[512];

	snprintf(want, sizeof(want),
			 "(((((c1:%d = 5) AND (c5:%d = <it's>)) OR (NOT (c2:%d IS NOT NULL)))"
			 " OR (c3:%d NOT IN (20454, 3))) OR ((c8:%d >= 0) AND (c8:%d <= 1)))",
			 ICEBERG_TYPE_LONG, ICEBERG_TYPE_STRING, ICEBERG_TYPE_TIMESTAMPTZ, ICEBERG_TYPE_DATE,
			 ICEBERG_TYPE_BOOLEAN, ICEBERG_TYPE_BOOLEAN);
	io_sb_init(&b);
	CHECK(f != NULL && iceberg_row_filter_print(f, &p, &b) && strcmp(b.data, want) == 0,
		  "printed:\n got %s\nwant %s", b.data ? b.data : "(none)", want);
	io_sb_free(&b);
	iceberg_row_filter_free(f);
	/* a callback's refusal stops the print */
	f = bind("id = 1 OR s = 'stop'", &err);
	io_sb_init(&b);
	CHECK(f != NULL && !iceberg_row_filter_print(f, &p, &b), "a refusal is false");
	io_sb_free(&b);
	iceberg_row_filter_free(f);
	/* retention's "column < cutoff" */
	f = iceberg_row_filter_less_than(4, ICEBERG_TYPE_LONG, true, INT64_C(1767225600000));
	io_sb_init(&b);
	snprintf(want, sizeof(want), "(c4:%d < 1767225600000)", ICEBERG_TYPE_LONG);
	CHECK(f != NULL && iceberg_row_filter_print(f, &p, &b) && strcmp(b.data, want) == 0,
		  "less than: %s", b.data ? b.data : "(none)");
	io_sb_free(&b);
	iceberg_row_filter_free(f);
}

int
main(void)
{
	IcebergTableMetadata *md;
	TmsError	err;

	io_init();
	if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err))
	{
		CHECK(false, "metadata: %s", err.message);
		return unit_done();
	}
	if (!iceberg_schema_parse(md->current_schema_json, &schema, &err))
		CHECK(false, "schema: %s", err.message);
	else
	{
		test_bind_errors();
		test_bounds(md);
		test_partitions(md);
		test_estimate(md);
		test_sql();
		test_print();
		iceberg_schema_free(schema);
	}
	iceberg_metadata_free(md);
	return unit_done();
}
