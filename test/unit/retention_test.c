/*-------------------------------------------------------------------------
 *
 * retention_test.c
 *	  Unit driver of data retention's plain-C half
 *	  (src/iceberg/maint/retention.h): the column metrics maps read from
 *	  manifest entries, the cutoff in each column type's units, the class
 *	  of a file by its partition (identity, year, month, day, hour, every
 *	  spec of an evolved table) and by its bounds and null count, with the
 *	  edges exactly at the cutoff (strict "<"), and the plan on the real
 *	  fixtures (day-partitioned timestamptz, identity date, unpartitioned
 *	  with equality deletes); mode delete-files' row delta (one position
 *	  delete file a group, a file of another spec than its group's
 *	  refused, the group line's positions_output read back by the
 *	  helper's parser).  Built by "make unit" with the iceberg layer
 *	  (UNIT_LAYER_retention).  Prints "N passed, M failed" last.
 *
 * test/unit/retention_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/compact/compact_int.h"
#include "iceberg/compact/compact_wire.h"
#include "iceberg/iceberg.h"
#include "iceberg/maint/retention.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;

#define DAY_US INT64_C(86400000000)
#define D20260101 INT64_C(20454)

/* A table whose specs evolve: unpartitioned, day(ts), month(ts), hour(ts), year(d), identity(d), identity(e). */
static const char *metadata_json =
"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
" \"location\": \"s3://b/t\", \"last-sequence-number\": 3, \"last-updated-ms\": 1,"
" \"last-column-id\": 6, \"current-schema-id\": 0,"
" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
"  {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
"  {\"id\": 2, \"name\": \"ts\", \"required\": false, \"type\": \"timestamptz\"},"
"  {\"id\": 3, \"name\": \"d\", \"required\": false, \"type\": \"date\"},"
"  {\"id\": 4, \"name\": \"e\", \"required\": true, \"type\": \"long\"},"
"  {\"id\": 5, \"name\": \"s\", \"required\": false, \"type\": \"string\"},"
"  {\"id\": 6, \"name\": \"TSN\", \"required\": false, \"type\": \"timestamp_ns\"}]}],"
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

static IcebergRetentionClass
classify(const IcebergRetention *r, const IcebergTableMetadata *md, Entry *x, int64_t *older)
{
	bool		by_part;
	int64_t		o;

	return iceberg_retention_classify(r, md, &x->e, older ? older : &o, &by_part);
}

static void
test_metric_maps(void)
{
	uint8_t		b[64];
	size_t		n;
	const uint8_t *v;
	size_t		vl;
	int64_t		c;

	n = bound_span(b, 7, INT64_C(0x0102030405060708), 8);
	CHECK(iceberg_metric_bound(b, n, 7, &v, &vl) == 1 && vl == 8 && v[0] == 0x08, "bound found");
	CHECK(iceberg_metric_bound(b, n, 8, &v, &vl) == 0 && v == NULL, "other key absent");
	CHECK(iceberg_metric_bound(b, n - 1, 7, &v, &vl) == -1, "truncated map refused");
	CHECK(iceberg_metric_bound(NULL, 0, 7, &v, &vl) == 0, "no span: absent");
	n = 0;
	put_long(b, &n, 0);
	CHECK(iceberg_metric_bound(b, n, 7, &v, &vl) == 0, "the null branch: absent");
	n = count_span(b, 3, 42);
	CHECK(iceberg_metric_count(b, n, 3, &c) == 1 && c == 42, "count in a sized block");
	CHECK(iceberg_metric_count(b, n, 4, &c) == 0 && c == -1, "count absent");
	/* the map first in the union: branch 0 followed by the array */
	n = bound_span(b, 7, 5, 4);
	b[0] = 0;
	CHECK(iceberg_metric_bound(b, n, 7, &v, &vl) == 1 && vl == 4 && v[0] == 5, "map-first union");
	/* a length past the end */
	n = 0;
	put_long(b, &n, 1);
	put_long(b, &n, 1);
	put_long(b, &n, 7);
	put_long(b, &n, 100);
	CHECK(iceberg_metric_bound(b, n, 7, &v, &vl) == -1, "value past the end refused");
}

static void
test_bind(IcebergTableMetadata *md)
{
	IcebergRetention *r;
	TmsError	err;
	IcebergEpochUnit u;

	CHECK(iceberg_retention_bind(md, "ts", 5, ICEBERG_EPOCH_NONE, &r, &err) &&
		  r->field_id == 2 && r->cutoff == 5, "timestamptz: microseconds");
	iceberg_retention_free(r);
	CHECK(iceberg_retention_bind(md, "tsn", 5, ICEBERG_EPOCH_NONE, &r, &err) &&
		  r->field_id == 6 && r->cutoff == 5000, "timestamp_ns, matched case-insensitively");
	iceberg_retention_free(r);
	/* date: the day holding the cutoff is kept */
	CHECK(iceberg_retention_bind(md, "d", D20260101 * DAY_US + 1, ICEBERG_EPOCH_NONE, &r, &err) &&
		  r->cutoff == D20260101, "date: the cutoff's day");
	iceberg_retention_free(r);
	CHECK(iceberg_retention_bind(md, "d", -1, ICEBERG_EPOCH_NONE, &r, &err) &&
		  r->cutoff == -1, "date before the epoch floors");
	iceberg_retention_free(r);

	/*
	 * epochs: a value v is older when v units after the epoch is before the
	 * cutoff
	 */
	CHECK(iceberg_retention_bind(md, "e", 1500001, ICEBERG_EPOCH_S, &r, &err) &&
		  r->cutoff == 2, "seconds: ceil (1 s is before 1.500001 s, 2 s is not)");
	iceberg_retention_free(r);
	CHECK(iceberg_retention_bind(md, "e", 2000000, ICEBERG_EPOCH_S, &r, &err) &&
		  r->cutoff == 2, "seconds exactly");
	iceberg_retention_free(r);
	CHECK(iceberg_retention_bind(md, "e", 1500, ICEBERG_EPOCH_MS, &r, &err) &&
		  r->cutoff == 2, "milliseconds");
	iceberg_retention_free(r);
	CHECK(iceberg_retention_bind(md, "e", 3, ICEBERG_EPOCH_NS, &r, &err) &&
		  r->cutoff == 3000, "nanoseconds");
	iceberg_retention_free(r);
	CHECK(!iceberg_retention_bind(md, "e", 3, ICEBERG_EPOCH_NONE, &r, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.message, "needs a unit"),
		  "a long without a unit refused: %s", err.message);
	CHECK(!iceberg_retention_bind(md, "ts", 3, ICEBERG_EPOCH_MS, &r, &err) &&
		  strstr(err.message, "takes no unit"), "a timestamp with a unit refused");
	CHECK(!iceberg_retention_bind(md, "s", 3, ICEBERG_EPOCH_NONE, &r, &err) &&
		  strstr(err.message, "of type string"), "a string column refused");
	CHECK(!iceberg_retention_bind(md, "nope", 3, ICEBERG_EPOCH_NONE, &r, &err) &&
		  strstr(err.message, "not a column"), "an unknown column refused");
	CHECK(iceberg_epoch_unit_parse("MS", &u) && u == ICEBERG_EPOCH_MS &&
		  iceberg_epoch_unit_parse("seconds", &u) && u == ICEBERG_EPOCH_S &&
		  !iceberg_epoch_unit_parse("days", &u) && !iceberg_epoch_unit_parse(NULL, &u), "units");
}

/* Bounds and null counts, exactly at the cutoff. */
static void
test_bounds(IcebergTableMetadata *md)
{
	IcebergRetention *r;
	TmsError	err;
	Entry		x;
	int64_t		cut = D20260101 * DAY_US;
	int64_t		older;

	if (!iceberg_retention_bind(md, "ts", cut, ICEBERG_EPOCH_NONE, &r, &err))
	{
		CHECK(false, "bind: %s", err.message);
		return;
	}
	entry(&x, 0, "[]", 2, 8, true, cut - 100, cut - 1, 0);
	CHECK(classify(r, md, &x, &older) == ICEBERG_RETAIN_DROP && older == 100, "upper one below: dropped");
	entry(&x, 0, "[]", 2, 8, true, cut - 100, cut, 0);
	CHECK(classify(r, md, &x, &older) == ICEBERG_RETAIN_STRADDLE && older >= 1 && older < 100,
		  "upper at the cutoff: straddles (%" PRId64 " older)", older);
	entry(&x, 0, "[]", 2, 8, true, cut, cut + 100, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "lower at the cutoff: kept");
	entry(&x, 0, "[]", 2, 8, true, cut - 1, cut + 100, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_STRADDLE, "lower one below: straddles");
	entry(&x, 0, "[]", 2, 8, true, cut - 100, cut - 1, 3);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_STRADDLE, "older rows and NULLs: straddles");
	entry(&x, 0, "[]", 2, 8, true, cut - 100, cut - 1, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_STRADDLE, "null count unknown: not dropped");
	entry(&x, 0, "[]", 2, 8, false, 0, 0, 100);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "only NULLs: kept");
	entry(&x, 0, "[]", 2, 8, false, 0, 0, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_UNKNOWN, "no bounds: unknown");
	entry(&x, 0, "[]", 3, 8, true, cut - 100, cut - 1, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_UNKNOWN, "bounds of another column: unknown");
	entry(&x, 0, "[]", 2, 4, true, 1, 2, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_UNKNOWN, "a bound of the wrong width: unknown");
	iceberg_retention_free(r);

	/* a required epoch column needs no null count; ms, edge at the cutoff */
	CHECK(iceberg_retention_bind(md, "e", 5000000, ICEBERG_EPOCH_MS, &r, &err), "bind e");
	entry(&x, 0, "[]", 4, 8, true, 0, 4999, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "required: dropped without a null count");
	entry(&x, 0, "[]", 4, 8, true, 0, 5000, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_STRADDLE, "5000 ms is not older than 5 s");
	iceberg_retention_free(r);

	/* date bounds are 4 bytes */
	CHECK(iceberg_retention_bind(md, "d", cut + 5, ICEBERG_EPOCH_NONE, &r, &err), "bind d");
	entry(&x, 0, "[]", 3, 4, true, D20260101 - 9, D20260101 - 1, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "the day before the cutoff's: dropped");
	entry(&x, 0, "[]", 3, 4, true, D20260101 - 9, D20260101, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_STRADDLE, "the cutoff's day is kept");
	iceberg_retention_free(r);
}

/* The partition decides, in each spec of the evolved table. */
static void
test_partitions(IcebergTableMetadata *md)
{
	IcebergRetention *r;
	TmsError	err;
	Entry		x;
	int64_t		cut = D20260101 * DAY_US;
	char		part[64];

	if (!iceberg_retention_bind(md, "ts", cut, ICEBERG_EPOCH_NONE, &r, &err))
		return;
	/* day: the day before ends exactly at the cutoff */
	snprintf(part, sizeof(part), "[%" PRId64 "]", D20260101 - 1);
	entry(&x, 1, part, 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "day before: dropped without bounds");
	snprintf(part, sizeof(part), "[%" PRId64 "]", D20260101);
	entry(&x, 1, part, 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "the cutoff's day: kept");
	entry(&x, 1, "[null]", 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "a null partition: every row NULL, none older, kept");
	/* month (2025-12 = 671) behind an identity string with a comma */
	entry(&x, 2, "[\"a,\\\"b\",671]", 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "2025-12 ends at the cutoff: dropped");
	entry(&x, 2, "[\"a\",672]", 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "2026-01: kept");
	iceberg_retention_free(r);

	/*
	 * a cutoff in the middle of a month: that month straddles, its bounds
	 * decide
	 */
	CHECK(iceberg_retention_bind(md, "ts", cut + 5 * DAY_US, ICEBERG_EPOCH_NONE, &r, &err), "bind");
	entry(&x, 2, "[\"a\",672]", 2, 8, true, cut, cut + DAY_US, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "2026-01 straddles, its bounds drop it");
	entry(&x, 2, "[\"a\",672]", 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_UNKNOWN, "2026-01 without bounds: unknown");
	/* hour: 2026-01-05T23 ends at the cutoff */
	snprintf(part, sizeof(part), "[%" PRId64 "]", (D20260101 + 5) * 24 - 1);
	entry(&x, 3, part, 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "the hour before: dropped");
	snprintf(part, sizeof(part), "[%" PRId64 "]", (D20260101 + 5) * 24);
	entry(&x, 3, part, 2, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "the cutoff's hour: kept");
	/* spec 4 partitions another column: the bounds of ts decide */
	entry(&x, 4, "[55]", 2, 8, true, 0, 1, 0);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "another column's partition: bounds");
	iceberg_retention_free(r);
	/* date column: year(d) and identity(d) */
	CHECK(iceberg_retention_bind(md, "d", cut, ICEBERG_EPOCH_NONE, &r, &err), "bind d");
	entry(&x, 4, "[55]", 3, 4, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "year 2025: dropped");
	entry(&x, 4, "[56]", 3, 4, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "year 2026: kept");
	snprintf(part, sizeof(part), "[%" PRId64 ",1]", D20260101 - 1);
	entry(&x, 5, part, 3, 4, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "identity date before: dropped");
	snprintf(part, sizeof(part), "[%" PRId64 ",1]", D20260101);
	entry(&x, 5, part, 3, 4, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "identity date at the cutoff: kept");
	iceberg_retention_free(r);
	/* identity on an epoch column, exactly at the cutoff */
	CHECK(iceberg_retention_bind(md, "e", 7000000, ICEBERG_EPOCH_S, &r, &err), "bind e");
	entry(&x, 5, "[null,6]", 4, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_DROP, "6 s: dropped");
	entry(&x, 5, "[null,7]", 4, 8, false, 0, 0, -1);
	CHECK(classify(r, md, &x, NULL) == ICEBERG_RETAIN_KEEP, "7 s: kept");
	iceberg_retention_free(r);
}

static bool
load(const char *dir, const char *from, const char *meta, IcebergLocalFS *fs,
	 IcebergFileIO *io, IcebergTableMetadata **md)
{
	static char folder[1024];
	char		path[1200];
	TmsError	err;

	memset(fs, 0, sizeof(*fs));
	snprintf(folder, sizeof(folder), "%s/%s", fixtures, dir);
	fs->nmaps = 1;
	fs->maps[0].from = from;
	fs->maps[0].to = folder;
	iceberg_local_fileio(io, fs);
	snprintf(path, sizeof(path), "%s/metadata/%s", folder, meta);
	if (!iceberg_metadata_read(io, path, md, &err))
	{
		CHECK(false, "fixture %s: %s %s", dir, err.message, err.detail);
		return false;
	}
	return true;
}

static IcebergRetentionPlan *
plan(const IcebergFileIO *io, IcebergTableMetadata *md, const char *col, int64_t cut)
{
	IcebergRetention *r;
	IcebergRetentionPlan *p = NULL;
	TmsError	err;

	if (!iceberg_retention_bind(md, col, cut, ICEBERG_EPOCH_NONE, &r, &err))
	{
		CHECK(false, "bind %s: %s", col, err.message);
		return NULL;
	}
	if (!iceberg_retention_plan(io, md, r, &p, &err))
		CHECK(false, "plan %s: %s %s", col, err.message, err.detail);
	iceberg_retention_free(r);
	if (p && getenv("RETENTION_TEST_VERBOSE"))
		fprintf(stderr, "%s cut %" PRId64 ": dropped %" PRId64 " (%" PRId64 " by partition, %" PRId64
				" rows, %d groups) straddling %d (%" PRId64 " older of %" PRId64 ") unknown %d kept %" PRId64 "\n",
				col, cut, p->dropped_files, p->dropped_by_partition, p->dropped_rows, p->drop->ngroups,
				p->nstraddling, p->straddling_older, p->straddling_rows, p->nunknown, p->kept_files);
	return p;
}

/* A plan's counts: dropped (by partition), straddling, unknown, kept. */
static void
plan_is(const IcebergFileIO *io, IcebergTableMetadata *md, const char *col, int64_t cut,
		int64_t dropped, int64_t by_partition, int straddling, int unknown, int64_t kept)
{
	IcebergRetentionPlan *p = plan(io, md, col, cut);

	if (p == NULL)
		return;
	CHECK(p->dropped_files == dropped && p->dropped_by_partition == by_partition &&
		  p->nstraddling == straddling && p->nunknown == unknown && p->kept_files == kept &&
		  p->drop->nfiles == dropped,
		  "%s < %" PRId64 ": %" PRId64 " dropped (%" PRId64 " by partition), %d straddling, %d unknown, %" PRId64 " kept",
		  col, cut, p->dropped_files, p->dropped_by_partition, p->nstraddling, p->nunknown,
		  p->kept_files);
	iceberg_retention_plan_free(p);
}

static void
test_fixtures(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;

	/* day(timestamp): one file a day, 2026-01-01 and 2026-01-02 */
	if (load("pyiceberg-v2-partitioned-nullcodec", "file://data/persistent/map_stats/default.db/map_stats",
			 "00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json", &fs, &io, &md))
	{
		plan_is(&io, md, "timestamp", D20260101 * DAY_US, 0, 0, 0, 0, 2);
		plan_is(&io, md, "timestamp", (D20260101 + 1) * DAY_US, 1, 1, 0, 0, 1);
		plan_is(&io, md, "timestamp", (D20260101 + 2) * DAY_US, 2, 2, 0, 0, 0);
		iceberg_metadata_free(md);
	}
	/* identity(event_date) with bucket[4](id) */
	if (load("spark-v2-partitioned-bucket-identity", "s3a://hyperparam-iceberg/spark/rename_column",
			 "v3.metadata.json", &fs, &io, &md))
	{
		plan_is(&io, md, "event_date", (D20260101 + 1) * DAY_US, 2, 2, 0, 0, 1);
		iceberg_metadata_free(md);
	}
	/* partitioned by name only: the bounds of bir decide */
	if (load("java-v2-partitioned-eqdeletes", "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
			 "v6.metadata.json", &fs, &io, &md))
	{
		plan_is(&io, md, "bir", (D20260101 + 1) * DAY_US, 6, 0, 0, 0, 0);
		plan_is(&io, md, "bir", 0, 0, 0, 0, 0, 6);
		iceberg_metadata_free(md);
	}
}

typedef struct FolderWriter
{
	const char *prefix;			/* the table's paths start so */
	char		folder[1024];
	char		list[2048];		/* the last manifest list written */
} FolderWriter;

static int
folder_write(void *arg, const char *path, const void *data, size_t len, TmsError *err)
{
	FolderWriter *fw = arg;
	char		p[4096];
	FILE	   *f;

	if (strncmp(path, fw->prefix, strlen(fw->prefix)) != 0)
	{
		err->code = IO_ERR_STORAGE;
		snprintf(err->message, sizeof(err->message), "unexpected path %.300s", path);
		return -1;
	}
	snprintf(p, sizeof(p), "%s%s", fw->folder, path + strlen(fw->prefix));
	f = fopen(p, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
	{
		if (f != NULL)
			fclose(f);
		err->code = IO_ERR_STORAGE;
		snprintf(err->message, sizeof(err->message), "cannot write %.300s", p);
		return -1;
	}
	if (strstr(path, "/snap-") != NULL)
		snprintf(fw->list, sizeof(fw->list), "%s", path);
	return 0;
}

static const char *
summary_value(const IcebergNewSnapshot *s, const char *key)
{
	for (int i = 0; i < s->nsummary; i++)
		if (strcmp(s->summary[i].key, key) == 0)
			return s->summary[i].value;
	return "";
}

/*
 * The metadata-only commit on a copy of a fixture: the dropped files are
 * DELETED entries of a "delete" snapshot, the others carried; the delete
 * files that applied only to dropped files are removed.  want_* : the
 * live data and delete files the new snapshot's manifests hold.
 */
static void
commit_fixture(const char *dir, const char *prefix, const char *meta, const char *col,
			   int64_t cut, int64_t want_dropped, int want_data, int want_deletes)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergRetentionPlan *p;
	IcebergCompactCommit res;
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	TmsError	err;
	FolderWriter fw;
	IcebergWriter w = {&fw, folder_write};
	char		tmpl[] = "/tmp/tms-retention-XXXXXX";
	char		cmd[2600];
	char		path[1200];
	int			data = 0,
				deletes = 0;

	if (mkdtemp(tmpl) == NULL)
	{
		CHECK(false, "mkdtemp");
		return;
	}
	memset(&fw, 0, sizeof(fw));
	fw.prefix = prefix;
	snprintf(fw.folder, sizeof(fw.folder), "%s/t", tmpl);
	snprintf(cmd, sizeof(cmd), "cp -r '%s/%s' '%s'", fixtures, dir, fw.folder);
	CHECK(system(cmd) == 0, "copy the fixture");
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = prefix;
	fs.maps[0].to = fw.folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/%s", fw.folder, meta);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "fixture: %s %s", err.message, err.detail);
		return;
	}
	p = plan(&io, md, col, cut);
	if (p != NULL)
	{
		CHECK(p->dropped_files == want_dropped, "%s: %" PRId64 " dropped", dir, p->dropped_files);
		CHECK(iceberg_retention_commit_write(&io, &w, md, p, 77, &res, &err),
			  "commit: %s %s", err.message, err.detail);
		CHECK(res.snapshot.operation && strcmp(res.snapshot.operation, "delete") == 0 &&
			  res.data_files_added == 0 && res.data_files_rewritten == want_dropped &&
			  atoll(summary_value(&res.snapshot, "deleted-data-files")) == want_dropped &&
			  atoll(summary_value(&res.snapshot, "deleted-records")) == p->dropped_rows,
			  "%s: a delete snapshot of %" PRId64 " files, %" PRId64 " rows", dir,
			  res.data_files_rewritten, p->dropped_rows);
		if (fw.list[0] != '\0' && iceberg_manifest_list_open_path(&io, fw.list, &lr, &err))
		{
			while (iceberg_manifest_list_next(lr, &mf, &err) == 1)
			{
				IcebergManifestReader *r;
				const IcebergManifestEntry *e;

				if (!iceberg_manifest_open(&io, mf, md->format_version, 0, &r, &err))
					break;
				while (iceberg_manifest_next(r, &e, &err) == 1)
					if (e->status != ICEBERG_STATUS_DELETED)
					{
						data += e->content == ICEBERG_CONTENT_DATA;
						deletes += e->content != ICEBERG_CONTENT_DATA;
					}
				iceberg_manifest_close(r);
			}
			iceberg_manifest_list_close(lr);
			CHECK(data == want_data && deletes == want_deletes,
				  "%s: %d data and %d delete files live after (want %d and %d)", dir, data,
				  deletes, want_data, want_deletes);
		}
		else
			CHECK(false, "read the new list: %s", err.message);
		iceberg_compact_commit_free(&res);
		iceberg_retention_plan_free(p);
	}
	iceberg_metadata_free(md);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	(void) system(cmd);
}

/*
 * Mode delete-files: iceberg_retention_row_delta on a plan of two groups
 * (one file of its own spec and partition; one of an older spec joined to
 * the current one), and the group line it makes.
 */
static void
test_row_delta(const IcebergTableMetadata *md)
{
	IcebergCompactFile files[2];
	IcebergCompactGroup groups[2];
	IcebergCompactPlan p;
	IcebergCompactJob *job = NULL;
	TmsError	err;
	const char *uris[1] = {"file:///t/data/a.parquet"};
	char	   *line;

	memset(files, 0, sizeof(files));
	memset(groups, 0, sizeof(groups));
	memset(&p, 0, sizeof(p));
	files[0].path = (char *) "s3://b/t/data/ts_day=2026-01-01/a.parquet";
	files[0].spec_id = 1;
	files[0].partition = (char *) "{\"ts_day\": 20454}";
	files[0].records = 10;
	files[0].size = 100;
	files[0].first_row_id = -1;
	files[1] = files[0];
	files[1].spec_id = 3;
	files[1].partition = (char *) "{\"ts_hour\": 490896}";
	for (int g = 0; g < 2; g++)
	{
		groups[g].spec_id = 1;
		groups[g].partition = files[0].partition;
		groups[g].first = g;
		groups[g].nfiles = 1;
		groups[g].expected_outputs = 3;
	}
	p.groups = groups;
	p.files = files;
	p.ngroups = 1;
	p.nfiles = 1;
	p.format_version = 2;
	p.base_snapshot_id = 1;
	p.remove_where = (char *) "id = 1";
	CHECK(iceberg_retention_row_delta(&p, &err) && p.row_delta &&
		  groups[0].expected_outputs == 1,
		  "row delta: one position delete file a group (%s)", err.message);
	line = iceberg_compact_job_json(md, &p, 0, NULL, 0, uris, NULL, "s3://b/t/data/",
									"file:///t/data/", "x", "zstd", -1, &err);
	CHECK(line != NULL && strstr(line, "\"positions_output\":true") != NULL,
		  "the group line asks for positions: %s", line ? line : err.message);
	if (line != NULL)
	{
		CHECK(iceberg_compact_job_parse(line, strlen(line), &job, &err) &&
			  job->positions_output && job->remove_where != NULL,
			  "the helper reads positions_output back: %s", err.message);
		iceberg_compact_job_free(job);
	}
	io_free(line);
	/* on v3 the helper writes deletion vectors (the files have row ids) */
	p.format_version = 3;
	files[0].first_row_id = 0;
	line = iceberg_compact_job_json(md, &p, 0, NULL, 0, uris, NULL, "s3://b/t/data/",
									"file:///t/data/", "x", "zstd", -1, &err);
	CHECK(line != NULL && strstr(line, "\"positions_output\":true") != NULL &&
		  strstr(line, "\"dv_output\":true") != NULL,
		  "v3: the group line asks for deletion vectors: %s", line ? line : err.message);
	if (line != NULL)
	{
		job = NULL;
		CHECK(iceberg_compact_job_parse(line, strlen(line), &job, &err) &&
			  job->positions_output && job->dv_output && !job->filter_live,
			  "the helper reads dv_output back: %s", err.message);
		iceberg_compact_job_free(job);
	}
	io_free(line);
	p.format_version = 2;
	files[0].first_row_id = -1;
	/* a file of spec 3 in a group of spec 1: its deletes would not apply */
	p.row_delta = false;
	p.ngroups = 2;
	p.nfiles = 2;
	CHECK(!iceberg_retention_row_delta(&p, &err) && err.code == ICEBERG_ERR_UNSUPPORTED &&
		  strstr(err.detail, "partition spec 3") != NULL && !p.row_delta,
		  "a file of an older spec: %d %s %s", (int) err.code, err.message, err.detail);
}

/*
 * A row delta on v3: the deletes its deletion vectors replace are the
 * data file's old deletion vector and a position delete file of it alone,
 * not a position delete file of the partition nor another file's deletion
 * vector in the same Puffin file; a deletion vector of a data file outside
 * its group is refused.
 */
static void
test_dv_replaced(void)
{
	IcebergCompactFile files[2];
	IcebergCompactGroup group;
	IcebergCompactDelete dels[4];
	IcebergCompactPlan p;
	IcebergCompactDv dv = {(char *) "s3://b/t/data/a.parquet", 4, 40, 3};
	IcebergCompactOutput out;
	IcebergCompactGroupOutput go = {0, &out, 1};
	int			a_deletes[3] = {0, 1, 2};
	int			b_deletes[2] = {2, 3};
	int		   *rm = NULL;
	int			nrm = -1;
	TmsError	err;

	memset(files, 0, sizeof(files));
	memset(&group, 0, sizeof(group));
	memset(dels, 0, sizeof(dels));
	memset(&p, 0, sizeof(p));
	memset(&out, 0, sizeof(out));
	files[0].path = (char *) "s3://b/t/data/a.parquet";
	files[0].deletes = a_deletes;
	files[0].ndeletes = 3;
	files[1].path = (char *) "s3://b/t/data/b.parquet";
	files[1].deletes = b_deletes;
	files[1].ndeletes = 2;
	for (int i = 0; i < 4; i++)
	{
		dels[i].content = ICEBERG_CONTENT_POSITION_DELETES;
		dels[i].dv_offset = -1;
	}
	/* a's deletion vector, a's own position delete file, the partition's */
	dels[0].path = (char *) "s3://b/t/data/old.puffin";
	dels[0].referenced = files[0].path;
	dels[0].dv_offset = 4;
	dels[1].path = (char *) "s3://b/t/data/a-deletes.parquet";
	dels[1].referenced = files[0].path;
	dels[2].path = (char *) "s3://b/t/data/part-deletes.parquet";
	/* b's deletion vector, in the same Puffin file */
	dels[3].path = dels[0].path;
	dels[3].referenced = files[1].path;
	dels[3].dv_offset = 60;
	group.nfiles = 2;
	p.groups = &group;
	p.ngroups = 1;
	p.files = files;
	p.nfiles = 2;
	p.deletes = dels;
	p.ndeletes = 4;
	p.format_version = 3;
	p.row_delta = true;
	out.ndvs = 1;
	out.dvs = &dv;
	CHECK(compact_dv_replaced(&p, &go, 1, &rm, &nrm, &err) && nrm == 2 &&
		  rm[0] == 0 && rm[1] == 1,
		  "a's deletion vector and own delete file replaced, nothing else: %d %s", nrm, err.message);
	io_free(rm);
	rm = NULL;
	dv.referenced = (char *) "s3://b/t/data/elsewhere.parquet";
	CHECK(!compact_dv_replaced(&p, &go, 1, &rm, &nrm, &err) && err.code == ICEBERG_ERR_MALFORMED &&
		  rm == NULL && nrm == 0,
		  "a deletion vector outside the group: %d %s", (int) err.code, err.message);
}

int
main(void)
{
	IcebergTableMetadata *md;
	TmsError	err;

	io_init();
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";
	test_metric_maps();
	test_dv_replaced();
	if (iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err))
	{
		test_bind(md);
		test_bounds(md);
		test_partitions(md);
		test_row_delta(md);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "metadata: %s", err.message);
	test_fixtures();
	commit_fixture("pyiceberg-v2-partitioned-nullcodec", "file://data/persistent/map_stats/default.db/map_stats",
				   "00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json", "timestamp",
				   (D20260101 + 1) * DAY_US, 1, 1, 0);
	commit_fixture("java-v2-partitioned-eqdeletes", "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
				   "v6.metadata.json", "bir", (D20260101 + 1) * DAY_US, 6, 0, 0);
	return unit_done();
}
