/*-------------------------------------------------------------------------
 *
 * compact_test.c
 *	  Unit driver of the compaction's plain-C half (src/iceberg/compact/,
 *	  schema.c): the where filter (syntax, binding, three-valued
 *	  evaluation), Iceberg's single-value serialization and truncation of
 *	  bounds, the helper protocol's encoders and strict decoders, the
 *	  metrics modes, the plan on the real fixture with equality
 *	  deletes and on a synthetic table, and the sort orders of strategy
 *	  sort (Spark's syntax, the table's order, the id stamped).  Built by "make unit" with the
 *	  iceberg layer (UNIT_LAYER_compact).  Prints "N passed, M failed" last.
 *
 * test/unit/compact_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/compact/compact_wire.h"
#include "iceberg/iceberg.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;

/* A table with two specs: identity(cat) and day(ts), bucket[4](id). */
static const char *metadata_json =
"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
" \"location\": \"s3://b/t\", \"last-sequence-number\": 3, \"last-updated-ms\": 1,"
" \"last-column-id\": 5, \"current-schema-id\": 0,"
" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
"  {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
"  {\"id\": 2, \"name\": \"cat\", \"required\": false, \"type\": \"string\"},"
"  {\"id\": 3, \"name\": \"ts\", \"required\": false, \"type\": \"timestamptz\"},"
"  {\"id\": 4, \"name\": \"amount\", \"required\": false, \"type\": \"decimal(10, 2)\"},"
"  {\"id\": 5, \"name\": \"day\", \"required\": false, \"type\": \"date\"}]}],"
" \"default-spec-id\": 1, \"last-partition-id\": 1003,"
" \"partition-specs\": ["
"  {\"spec-id\": 0, \"fields\": [{\"name\": \"cat\", \"transform\": \"identity\", \"source-id\": 2, \"field-id\": 1000}]},"
"  {\"spec-id\": 1, \"fields\": [{\"name\": \"ts_day\", \"transform\": \"day\", \"source-id\": 3, \"field-id\": 1001},"
"     {\"name\": \"id_bucket\", \"transform\": \"bucket[4]\", \"source-id\": 1, \"field-id\": 1002},"
"     {\"name\": \"amount\", \"transform\": \"identity\", \"source-id\": 4, \"field-id\": 1003}]}],"
" \"properties\": {\"write.metadata.metrics.column.cat\": \"full\","
"   \"write.metadata.metrics.default\": \"counts\"},"
" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";

static bool
match(IcebergTableMetadata *md, const char *where, int spec, const char *part)
{
	IcebergPartitionFilter *f;
	TmsError	err;
	bool		r;

	if (!iceberg_partition_filter_parse(where, &f, &err) ||
		!iceberg_partition_filter_bind(f, md, &err))
	{
		printf("  (%s: %s %s)\n", where, err.message, err.detail);
		return false;
	}
	r = iceberg_partition_filter_match(f, spec, part, strlen(part));
	iceberg_partition_filter_free(f);
	return r;
}

static bool
refused(IcebergTableMetadata *md, const char *where, int code, const char *says)
{
	IcebergPartitionFilter *f = NULL;
	TmsError	err;
	bool		ok;

	ok = iceberg_partition_filter_parse(where, &f, &err) &&
		(md == NULL || iceberg_partition_filter_bind(f, md, &err));
	iceberg_partition_filter_free(f);
	if (ok)
		return false;
	if (err.code != code || (says && strstr(err.message, says) == NULL))
	{
		printf("  (%s: %s)\n", where, err.message);
		return false;
	}
	return true;
}

static void
test_filter(void)
{
	IcebergTableMetadata *md;
	TmsError	err;
	int64_t		day = 20422;	/* 2025-11-30 */
	char		p1[128];

	if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err))
	{
		CHECK(false, "metadata: %s %s", err.message, err.detail);
		return;
	}
	snprintf(p1, sizeof(p1), "[%" PRId64 ",3,\"0x04d2\"]", day);	/* amount 12.34 */

	/* identity strings, spec 0 */
	CHECK(match(md, "cat = 'c1'", 0, "[\"c1\"]"), "cat = c1");
	CHECK(!match(md, "cat = 'c1'", 0, "[\"c2\"]"), "cat = c1 on c2");
	CHECK(match(md, "cat IN ('a', 'c2')", 0, "[\"c2\"]"), "IN");
	CHECK(!match(md, "cat NOT IN ('a', 'c2')", 0, "[\"c2\"]"), "NOT IN");
	CHECK(match(md, "\"cat\" <> 'x' AND cat >= 'c'", 0, "[\"c2\"]"), "quoted name, >=");
	CHECK(match(md, "cat = 'it''s'", 0, "[\"it's\"]"), "doubled quote");
	CHECK(match(md, "cat = 'x\"y'", 0, "[\"x\\\"y\"]"), "escaped JSON string");
	/* a null value: unknown, not selected; IS NULL selects it */
	CHECK(!match(md, "cat = 'c1'", 0, "[null]"), "null = c1 is unknown");
	CHECK(!match(md, "NOT cat = 'c1'", 0, "[null]"), "NOT unknown is unknown");
	CHECK(match(md, "cat IS NULL", 0, "[null]"), "IS NULL");
	CHECK(match(md, "cat IS NOT NULL", 0, "[\"c1\"]"), "IS NOT NULL");
	CHECK(match(md, "cat = 'c1' OR cat IS NULL", 0, "[null]"), "unknown OR true");
	/* a name the spec does not partition by: unknown */
	CHECK(!match(md, "cat = 'c1'", 1, p1), "cat in spec 1");
	CHECK(match(md, "cat = 'c1' OR ts_day = '2025-11-30'", 1, p1), "OR across specs");
	/* transforms: day as a date, bucket as an int, decimals exactly */
	CHECK(match(md, "ts_day = '2025-11-30'", 1, p1), "day literal");
	CHECK(match(md, "ts_day BETWEEN '2025-11-01' AND '2025-12-01'", 1, p1), "BETWEEN");
	CHECK(!match(md, "ts_day NOT BETWEEN '2025-11-01' AND '2025-12-01'", 1, p1), "NOT BETWEEN");
	CHECK(match(md, "id_bucket = 3 AND ts_day > 20000", 1, p1), "bucket, day as int");
	CHECK(match(md, "amount = 12.34", 1, p1), "decimal");
	CHECK(match(md, "amount = 12.340", 1, p1), "decimal, trailing zero");
	CHECK(!match(md, "amount > 12.34", 1, p1), "decimal >");
	CHECK(match(md, "(id_bucket = 1 OR id_bucket = 3) AND NOT (amount < 0)", 1, p1), "nesting");

	/* refused: syntax, then names and literals */
	CHECK(refused(NULL, "", ICEBERG_ERR_INVALID_ARGUMENT, "empty"), "empty");
	CHECK(refused(NULL, "cat = ", ICEBERG_ERR_INVALID_ARGUMENT, "literal"), "no literal");
	CHECK(refused(NULL, "cat = 'x", ICEBERG_ERR_INVALID_ARGUMENT, "unterminated"), "open quote");
	CHECK(refused(NULL, "cat = 'x'; DROP TABLE t", ICEBERG_ERR_INVALID_ARGUMENT, NULL), "a second statement");
	CHECK(refused(NULL, "cat = NULL", ICEBERG_ERR_INVALID_ARGUMENT, "IS NULL"), "= NULL");
	CHECK(refused(NULL, "(((((((((((((((((((((((((((((((((((cat = 'a')))))))))))))))))))))))))))))))))))",
				  ICEBERG_ERR_INVALID_ARGUMENT, "deeply"), "depth");
	CHECK(refused(md, "nosuch = 1", ICEBERG_ERR_INVALID_ARGUMENT, "neither"), "unknown name");
	CHECK(refused(md, "id = 1", ICEBERG_ERR_INVALID_ARGUMENT, "not a partition column"), "not a partition column");
	CHECK(refused(md, "ts_day = 'yesterday'", ICEBERG_ERR_INVALID_ARGUMENT, "literal"), "bad date");
	CHECK(refused(md, "id_bucket = 'x'", ICEBERG_ERR_INVALID_ARGUMENT, "literal"), "bad int");
	CHECK(refused(md, "amount = 1.234", ICEBERG_ERR_INVALID_ARGUMENT, "literal"), "decimal scale");
	{
		char		big[2048];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		CHECK(refused(NULL, big, ICEBERG_ERR_INVALID_ARGUMENT, "longer"), "too long");
	}
	iceberg_metadata_free(md);
}

static bool
ser(IcebergTypeId t, int scale, const char *text, bool upper, int trunc, const char *hex)
{
	IcebergColumn c;
	uint8_t    *out;
	size_t		n;
	bool		oom;
	char		got[512];
	size_t		i;

	memset(&c, 0, sizeof(c));
	c.type = t;
	c.scale = scale;
	c.precision = 38;
	if (!iceberg_value_serialize(&c, text, strlen(text), upper, trunc, &out, &n, &oom))
		return hex == NULL;
	if (out == NULL)
		return hex != NULL && strcmp(hex, "none") == 0;
	for (i = 0; i < n && i * 2 + 2 < sizeof(got); i++)
		snprintf(got + 2 * i, 3, "%02x", out[i]);
	got[2 * i] = '\0';
	io_free(out);
	if (hex == NULL || strcmp(got, hex) != 0)
	{
		printf("  (%s -> %s)\n", text, got);
		return false;
	}
	return true;
}

static void
test_values(void)
{
	CHECK(ser(ICEBERG_TYPE_INT, 0, "1", false, 0, "01000000"), "int");
	CHECK(ser(ICEBERG_TYPE_INT, 0, "-1", false, 0, "ffffffff"), "negative int");
	CHECK(ser(ICEBERG_TYPE_INT, 0, "3000000000", false, 0, NULL), "int out of range");
	CHECK(ser(ICEBERG_TYPE_LONG, 0, "258", false, 0, "0201000000000000"), "long");
	CHECK(ser(ICEBERG_TYPE_DATE, 0, "19000", false, 0, "384a0000"), "date");
	CHECK(ser(ICEBERG_TYPE_TIMESTAMPTZ, 0, "1", false, 0, "0100000000000000"), "timestamptz");
	CHECK(ser(ICEBERG_TYPE_BOOLEAN, 0, "true", false, 0, "01"), "boolean");
	CHECK(ser(ICEBERG_TYPE_DOUBLE, 0, "1.5", false, 0, "000000000000f83f"), "double");
	CHECK(ser(ICEBERG_TYPE_FLOAT, 0, "1.5", false, 0, "0000c03f"), "float");
	CHECK(ser(ICEBERG_TYPE_DOUBLE, 0, "nan", false, 0, NULL), "NaN is no bound");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 2, "12.34", false, 0, "04d2"), "decimal");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 2, "-1.00", false, 0, "9c"), "negative decimal, minimal");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 2, "1.5", false, 0, "0096"), "decimal at a smaller scale, sign byte");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 2, "1.234", false, 0, NULL), "decimal past its scale");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 0, "128", false, 0, "0080"), "sign byte kept");
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "abc", false, 16, "616263"), "short string");
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "abcdef", false, 3, "616263"), "truncated lower");
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "abcdef", true, 3, "616264"), "truncated upper");
	/* characters, not bytes: é is two bytes */
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "\xc3\xa9\xc3\xa9\xc3\xa9", false, 2, "c3a9c3a9"), "utf-8 lower");
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "\xc3\xa9\xc3\xa9\xc3\xa9", true, 2, "c3a9c3aa"), "utf-8 upper");
	/* U+10FFFF cannot be incremented: the one before is */
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "a\xf4\x8f\xbf\xbfz", true, 2, "62"), "max code point");
	CHECK(ser(ICEBERG_TYPE_STRING, 0, "\xf4\x8f\xbf\xbf\xf4\x8f\xbf\xbfz", true, 2, "none"), "no upper bound");
	CHECK(ser(ICEBERG_TYPE_BINARY, 0, "0102ff03", true, 3, "0103"), "binary upper");
	CHECK(ser(ICEBERG_TYPE_BINARY, 0, "0102ff03", false, 3, "0102ff"), "binary lower");
	CHECK(ser(ICEBERG_TYPE_UUID, 0, "f79c3e09-677c-4bbd-a479-3f349cb785e7", false, 0,
			  "f79c3e09677c4bbda4793f349cb785e7"), "uuid");
	CHECK(ser(ICEBERG_TYPE_UUID, 0, "f79c3e09-677c-4bbd-a479-3f349cb785", false, 0, NULL), "short uuid");
	CHECK(ser(ICEBERG_TYPE_FIXED, 0, "0102ff03", true, 3, "0103"), "fixed upper, truncated as binary");
	CHECK(ser(ICEBERG_TYPE_FIXED, 0, "0102ff03", false, 0, "0102ff03"), "fixed full");
	CHECK(ser(ICEBERG_TYPE_TIMESTAMP_NS, 0, "1704067200123456789", false, 0, "15cdc0081710a617"),
		  "timestamp_ns: nanoseconds, 8 bytes");
	CHECK(ser(ICEBERG_TYPE_DECIMAL, 0, "-99999999999999999999999999999999999999", false, 0,
			  "b4c4b357a5793b85f675ddc000000001"), "decimal(38) minimum");
}

static bool
parses(const char *line)
{
	IcebergCompactMessage m;
	TmsError	err;
	bool		ok = iceberg_compact_message_parse(line, strlen(line), 0, &m, &err);

	iceberg_compact_message_free(&m);
	return ok;
}

static void
test_wire(void)
{
	IcebergCompactMessage m;
	TmsError	err;
	IcebergCompactOutput o;
	IcebergColumnMetrics cm[2];
	int64_t		splits[2] = {4, 1000};
	uint8_t		lo[3] = {1, 2, 3};
	char	   *line;

	/* a file message round trip */
	memset(&o, 0, sizeof(o));
	memset(cm, 0, sizeof(cm));
	o.path = "s3://b/t/data/00000-0-x-00000.parquet";
	o.size = 4096;
	o.records = 10;
	cm[0].id = 1;
	cm[0].column_size = 100;
	cm[0].value_count = 10;
	cm[0].null_count = 2;
	cm[0].nan_count = -1;
	cm[0].column_size = 50;
	cm[0].has_lower = true;
	cm[0].lower = lo;
	cm[0].lower_len = 3;
	cm[1].id = 7;
	cm[1].column_size = -1;
	cm[1].value_count = -1;
	cm[1].null_count = -1;
	cm[1].nan_count = 0;
	o.metrics = cm;
	o.nmetrics = 2;
	o.split_offsets = splits;
	o.nsplit_offsets = 2;
	line = iceberg_compact_file_json(3, &o);
	CHECK(line != NULL && iceberg_compact_message_parse(line, strlen(line), 0, &m, &err),
		  "file message: %s", line ? err.message : "no line");
	if (line != NULL)
	{
		CHECK(m.type == ICEBERG_MSG_FILE && m.group == 3 && m.file.records == 10 &&
			  m.file.size == 4096 && m.file.nmetrics == 2 && m.file.metrics[0].has_lower &&
			  m.file.metrics[0].lower_len == 3 && m.file.metrics[0].lower[2] == 3 &&
			  !m.file.metrics[0].has_upper && m.file.metrics[0].null_count == 2 &&
			  m.file.metrics[1].value_count == -1 && m.file.metrics[1].nan_count == 0 &&
			  m.file.nsplit_offsets == 2 && m.file.split_offsets[1] == 1000, "file round trip");
		iceberg_compact_message_free(&m);
		io_free(line);
	}
	/* a Puffin file of deletion vectors: its blobs round trip */
	{
		IcebergCompactDv dvs[2] = {{(char *) "s3://b/t/a.parquet", 4, 40, 3},
		{(char *) "s3://b/t/c.parquet", 44, 30, 1}};
		IcebergCompactOutput p;

		memset(&p, 0, sizeof(p));
		p.path = (char *) "s3://b/t/x-00000.puffin";
		p.size = 200;
		p.records = 4;
		p.dvs = dvs;
		p.ndvs = 2;
		line = iceberg_compact_file_json(5, &p);
		CHECK(line != NULL && iceberg_compact_message_parse(line, strlen(line), 0, &m, &err) &&
			  m.file.ndvs == 2 && strcmp(m.file.dvs[1].referenced, "s3://b/t/c.parquet") == 0 &&
			  m.file.dvs[1].offset == 44 && m.file.dvs[1].length == 30 &&
			  m.file.dvs[0].records == 3, "dvs round trip: %s", line ? err.message : "no line");
		iceberg_compact_message_free(&m);
		io_free(line);
	}
	line = iceberg_compact_done_json(3, 2, 100, 7, 93, 5000, 1 << 20, 2, 5);
	CHECK(iceberg_compact_message_parse(line, strlen(line), 0, &m, &err) &&
		  m.type == ICEBERG_MSG_DONE && m.rows_deleted == 7 && m.rows_out == 93 &&
		  m.in_flight == 2 && m.rows_filtered == 5, "done");
	iceberg_compact_message_free(&m);
	io_free(line);
	line = iceberg_compact_error_json(1, "bad \xff bytes");
	CHECK(iceberg_compact_message_parse(line, strlen(line), 0, &m, &err) &&
		  m.type == ICEBERG_MSG_ERROR && strcmp(m.message, "bad ? bytes") == 0,
		  "error with invalid UTF-8: %s", line);
	iceberg_compact_message_free(&m);
	io_free(line);

	/* what a broken or hostile helper may send */
	CHECK(!parses(""), "empty");
	CHECK(!parses("[1]"), "not an object");
	CHECK(!parses("{\"type\":\"file\",\"group\":1}"), "file without path");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":0,\"records\":1,\"metrics\":[]}"),
		  "empty file");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":10,\"records\":-1,\"metrics\":[]}"),
		  "negative records");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":10,\"records\":1,"
				  "\"metrics\":[{\"id\":1,\"lower\":\"0g\"}]}"), "bad hex");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":10,\"records\":1,"
				  "\"metrics\":[{\"id\":1,\"value_count\":1,\"null_count\":2}]}"), "more nulls than values");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":10,\"records\":1,"
				  "\"metrics\":[],\"split_offsets\":[8,6]}"), "offsets not increasing");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":10,\"records\":1,"
				  "\"metrics\":[],\"split_offsets\":[4,12]}"), "offset past the file");
	CHECK(!parses("{\"type\":\"done\",\"group\":1,\"files\":1,\"rows_in\":1,\"rows_deleted\":2,"
				  "\"rows_out\":0,\"bytes_in\":1,\"peak_rss\":1}"), "more deleted than read");
	CHECK(!parses("{\"type\":\"progress\",\"group\":1,\"done\":1.5}"), "a float");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":100,\"records\":1,"
				  "\"metrics\":[],\"dvs\":[{\"referenced\":\"a\",\"offset\":90,\"length\":20,\"records\":1}]}"),
		  "a blob past the file");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":100,\"records\":1,"
				  "\"metrics\":[],\"dvs\":[{\"offset\":4,\"length\":20,\"records\":1}]}"),
		  "a blob without its data file");
	CHECK(!parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":100,\"records\":1,"
				  "\"metrics\":[],\"dvs\":[]}"), "no blob");
	CHECK(parses("{\"type\":\"file\",\"group\":1,\"path\":\"x\",\"size\":100,\"records\":1,"
				 "\"metrics\":[],\"dvs\":[{\"referenced\":\"a\",\"offset\":4,\"length\":20,\"records\":1}]}"),
		  "a blob");
	CHECK(!parses("{\"type\":\"whatever\"}"), "unknown type");
	CHECK(!parses("{\"type\":\"error\",\"group\":1,\"message\":\"a\\u0000b\"}"), "NUL in a string");
	CHECK(parses("{\"type\":\"progress\",\"group\":1,\"done\":5}"), "progress");

	/* a v3 group line: row lineage and a deletion vector, and their checks */
	{
		static const char *const lines[] = {
			/* 0: good */
			"\"row_lineage\": true, \"inputs\": [%s, \"first_row_id\": 7}],"
			" \"deletes\": [{\"uri\": \"d\", \"content\": 1, \"seq\": 2, \"dv\":"
			" {\"offset\": 4, \"length\": 40, \"records\": 2, \"referenced\": \"a\"}}]",
			/* refused: */
			"\"row_lineage\": true, \"inputs\": [%s}], \"deletes\": []",
			"\"row_lineage\": 1, \"inputs\": [%s, \"first_row_id\": 7}], \"deletes\": []",
			"\"row_lineage\": true, \"inputs\": [%s, \"first_row_id\": -1}], \"deletes\": []",
			"\"row_lineage\": true, \"inputs\": [%s, \"first_row_id\": 9223372036854775806}],"
			" \"deletes\": []",
			"\"inputs\": [%s}], \"deletes\": [{\"uri\": \"d\", \"content\": 2, \"seq\": 2,"
			" \"equality_ids\": [1], \"dv\": {\"offset\": 4, \"length\": 40, \"records\": 2,"
			" \"referenced\": \"a\"}}]",
			"\"inputs\": [%s}], \"deletes\": [{\"uri\": \"d\", \"content\": 1, \"seq\": 2,"
			" \"dv\": {\"offset\": 4, \"length\": 0, \"records\": 2, \"referenced\": \"a\"}}]",
			"\"inputs\": [%s}], \"deletes\": [{\"uri\": \"d\", \"content\": 1, \"seq\": 2,"
			" \"dv\": {\"offset\": 4, \"length\": 40, \"records\": 2}}]",
			"\"inputs\": [%s}], \"deletes\": [{\"uri\": \"d\", \"content\": 1, \"seq\": 2,"
			" \"dv\": [4, 40]}]",
			"\"dv_output\": 1, \"inputs\": [%s}], \"deletes\": []",
			"\"inputs\": [%s, \"dv\": {\"offset\": 4, \"length\": 0, \"referenced\": \"a\"}}],"
			" \"deletes\": []",
			"\"inputs\": [%s, \"dv\": {\"offset\": 4, \"length\": 9}}], \"deletes\": []",
			/* last: good, a rewrite of position deletes into deletion vectors */
			"\"dv_output\": true, \"inputs\": [%s, \"dv\": {\"offset\": 4, \"length\": 9,"
			" \"referenced\": \"s3://b/a.parquet\"}}], \"deletes\": []",
		};
		const int	nlines = (int) (sizeof(lines) / sizeof(lines[0]));

		for (int i = 0; i < nlines; i++)
		{
			char		part[1024];
			char		text[4096];
			IcebergCompactJob *job = NULL;
			bool		ok;

			snprintf(part, sizeof(part), lines[i],
					 "{\"path\": \"a\", \"uri\": \"a\", \"records\": 5, \"size\": 1, \"seq\": 1");
			snprintf(text, sizeof(text),
					 "{\"type\": \"group\", \"group\": 0, \"schema\": {\"type\": \"struct\","
					 " \"fields\": [{\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"}]},"
					 " %s, \"output\": {\"dir\": \"d/\", \"upload_dir\": \"d/\", \"prefix\": \"p\","
					 " \"files\": 1, \"compression\": \"zstd\", \"metrics\": []}}", part);
			ok = iceberg_compact_job_parse(text, strlen(text), &job, &err);
			if (i == 0)
			{
				CHECK(ok && job->row_lineage && job->inputs[0].first_row_id == 7 &&
					  job->ndeletes == 1 && job->deletes[0].dv_offset == 4 &&
					  job->deletes[0].dv_length == 40 && job->deletes[0].dv_records == 2 &&
					  strcmp(job->deletes[0].dv_referenced, "a") == 0,
					  "v3 group line: %s %s", ok ? "" : err.message, ok ? "" : err.detail);
			}
			else if (i == nlines - 1)
				CHECK(ok && job->dv_output && job->inputs[0].dv_offset == 4 &&
					  job->inputs[0].dv_length == 9 &&
					  strcmp(job->inputs[0].dv_referenced, "s3://b/a.parquet") == 0,
					  "v3 position delete line: %s %s", ok ? "" : err.message, ok ? "" : err.detail);
			else
				CHECK(!ok && err.code == ICEBERG_ERR_MALFORMED, "bad v3 group line %d refused", i);
			iceberg_compact_job_free(job);
		}
	}

	/* a retention's group line: remove_older, and its checks */
	{
		static const char *const lines[] = {
			/* 0: good */
			"\"remove_older\": {\"id\": 1, \"kind\": \"us\", \"cutoff\": -5}",
			/* refused: */
			"\"remove_older\": {\"id\": 2, \"kind\": \"us\", \"cutoff\": 5}",
			"\"remove_older\": {\"id\": 1, \"kind\": \"none\", \"cutoff\": 5}",
			"\"remove_older\": {\"id\": 1, \"kind\": \"weeks\", \"cutoff\": 5}",
			"\"remove_older\": {\"id\": 1, \"kind\": \"days\"}",
			"\"remove_older\": {\"id\": 1, \"kind\": \"days\", \"cutoff\": 1.5}",
			"\"remove_older\": [1, \"us\", 5]",
		};

		for (int i = 0; i < (int) (sizeof(lines) / sizeof(lines[0])); i++)
		{
			char		text[4096];
			IcebergCompactJob *job = NULL;
			bool		ok;

			snprintf(text, sizeof(text),
					 "{\"type\": \"group\", \"group\": 0, \"schema\": {\"type\": \"struct\","
					 " \"fields\": [{\"id\": 1, \"name\": \"ts\", \"required\": false, \"type\": \"timestamptz\"}]},"
					 " \"inputs\": [{\"path\": \"a\", \"uri\": \"a\", \"records\": 5, \"size\": 1, \"seq\": 1}],"
					 " \"deletes\": [], %s, \"output\": {\"dir\": \"d/\", \"upload_dir\": \"d/\","
					 " \"prefix\": \"p\", \"files\": 1, \"compression\": \"zstd\", \"metrics\": []}}",
					 lines[i]);
			ok = iceberg_compact_job_parse(text, strlen(text), &job, &err);
			if (i == 0)
				CHECK(ok && job->remove_older.kind == ICEBERG_CUTOFF_US &&
					  job->remove_older.field_id == 1 && job->remove_older.cutoff == -5,
					  "remove_older: %s %s", ok ? "" : err.message, ok ? "" : err.detail);
			else
				CHECK(!ok && err.code == ICEBERG_ERR_MALFORMED, "bad remove_older %d refused", i);
			iceberg_compact_job_free(job);
		}
	}

	/* the hello keeps the storage */
	{
		IoStorageConfig cfg;
		IcebergCompactHello h;
		const char *roots[] = {"/data/a", "/data/b"};

		memset(&cfg, 0, sizeof(cfg));
		cfg.s3_endpoint = "http://127.0.0.1:9000";
		cfg.s3_access_key_id = "AK";
		cfg.s3_secret_access_key = "SK";
		cfg.s3_path_style = 1;
		cfg.local_roots = roots;
		cfg.nlocal_roots = 2;
		cfg.http.request_timeout_ms = 5000;
		line = iceberg_compact_hello_json(&cfg, 1 << 28, 2, 3, "/tmp/x", "10.0.0.0/8, s3.example", &err);
		CHECK(line != NULL && iceberg_compact_hello_parse(line, strlen(line), &h, &err) &&
			  strcmp(h.s3_secret_access_key, "SK") == 0 && h.nlocal_roots == 2 &&
			  strcmp(h.local_roots[1], "/data/b") == 0 && h.memory_limit == 1 << 28 &&
			  h.threads == 2 && h.groups == 3 && h.request_timeout_ms == 5000 && h.s3_path_style == 1 &&
			  h.s3_session_token == NULL &&
			  strcmp(h.allowed_hosts, "10.0.0.0/8, s3.example") == 0, "hello round trip");
		iceberg_compact_hello_free(&h);
		io_free(line);
	}
}

static void
test_metrics_modes(void)
{
	IcebergTableMetadata *md;
	IcebergSchema *s;
	IcebergCompactJobMetric *m;
	TmsError	err;

	if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err) ||
		!iceberg_schema_parse(md->current_schema_json, &s, &err))
	{
		CHECK(false, "metadata: %s", err.message);
		return;
	}
	CHECK(s->ncolumns == 5 && s->columns[3].type == ICEBERG_TYPE_DECIMAL &&
		  s->columns[3].precision == 10 && s->columns[3].scale == 2 && s->columns[0].required,
		  "schema");
	CHECK(iceberg_compact_metrics_modes(md, s, &m, &err), "modes");
	CHECK(m[0].mode == ICEBERG_METRICS_COUNTS && m[1].mode == ICEBERG_METRICS_FULL,
		  "default counts, cat full: %d %d", m[0].mode, m[1].mode);
	io_free(m);
	iceberg_schema_free(s);
	iceberg_metadata_free(md);
}

/* A schema of nested types: struct, list and map, two deep, evolved. */
static const char *nested_schema =
"{\"type\": \"struct\", \"schema-id\": 3, \"fields\": ["
" {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
" {\"id\": 2, \"name\": \"s\", \"required\": false, \"type\": {\"type\": \"struct\", \"fields\": ["
"   {\"id\": 3, \"name\": \"a\", \"required\": false, \"type\": \"fixed[4]\", \"initial-default\": \"00ff\"},"
"   {\"id\": 4, \"name\": \"l\", \"required\": false, \"type\": {\"type\": \"list\", \"element-id\": 5,"
"      \"element-required\": true, \"element\": {\"type\": \"map\", \"key-id\": 6, \"key\": \"string\","
"      \"value-id\": 7, \"value-required\": false, \"value\": \"double\"}}}]}},"
" {\"id\": 8, \"name\": \"t\", \"required\": false, \"type\": \"timestamp_ns\"}]}";

static void
test_nested_schema(void)
{
	IcebergSchema *s;
	TmsError	err;
	const IcebergColumn *c,
			   *up;

	if (!iceberg_schema_parse(nested_schema, &s, &err))
	{
		CHECK(false, "nested schema: %s", err.message);
		return;
	}
	CHECK(s->ncolumns == 3 && s->nleaves == 5, "3 columns, 5 leaves: %d %d", s->ncolumns, s->nleaves);
	c = iceberg_schema_field(s, 6, &up);
	CHECK(c != NULL && strcmp(c->name, "key") == 0 && c->required && up != NULL && up->id == 5 &&
		  up->type == ICEBERG_TYPE_MAP && up->required, "map key under a required list element");
	c = iceberg_schema_field(s, 3, &up);
	CHECK(c != NULL && c->type == ICEBERG_TYPE_FIXED && c->length == 4 && c->initial_default &&
		  strcmp(c->initial_default, "\"00ff\"") == 0 && up->id == 2, "fixed with its initial-default");
	CHECK(iceberg_schema_column(s, 3) == NULL, "a nested field is no top-level column");
	CHECK(iceberg_compact_check_schema(s, &err), "nested, fixed and timestamp_ns are rewritten");
	{
		const IcebergColumn *path[8];

		CHECK(iceberg_schema_field_path(s, 6, path, 8) == 4 && path[0]->id == 2 &&
			  path[1]->id == 4 && path[2]->id == 5 && path[3]->id == 6, "the path to a map key");
		CHECK(iceberg_schema_field_path(s, 6, path, 3) == 0, "a path deeper than cap");
		CHECK(iceberg_schema_field_path(s, 99, path, 8) == 0, "no path to a missing field");
	}

	/*
	 * equality deletes: a field of a struct is applied; in a list, a map or
	 * gone, refused
	 */
	{
		int32_t		ids[1];
		IcebergCompactDelete d = {.path = "s3://b/t/eq.parquet",
			.content = ICEBERG_CONTENT_EQUALITY_DELETES,.nequality_ids = 1,
		.equality_ids = ids,.ngroups = 1};
		IcebergCompactPlan p = {.ndeletes = 1,.deletes = &d};

		ids[0] = 3;
		CHECK(iceberg_compact_check_deletes(&p, s, &err), "s.a is applied");
		ids[0] = 1;
		CHECK(iceberg_compact_check_deletes(&p, s, &err), "a top-level column is applied");
		ids[0] = 6;
		CHECK(!iceberg_compact_check_deletes(&p, s, &err) && err.code == ICEBERG_ERR_UNSUPPORTED &&
			  strstr(err.message, "\"s3://b/t/eq.parquet\"") != NULL &&
			  strstr(err.detail, "field \"key\" (id 6) inside list \"l\"") != NULL,
			  "a map key inside a list refused: %s", err.detail);
		ids[0] = 4;
		CHECK(!iceberg_compact_check_deletes(&p, s, &err) &&
			  strstr(err.detail, "field \"l\" (id 4) of type list") != NULL,
			  "a list field refused: %s", err.detail);
		ids[0] = 99;
		CHECK(!iceberg_compact_check_deletes(&p, s, &err) &&
			  strstr(err.detail, "field id 99") != NULL, "a field gone refused: %s", err.detail);
	}
	iceberg_schema_free(s);

	/* a partition field whose source is inside a struct: typed by it */
	{
		static const char *md_nested =
		"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
		" \"location\": \"s3://b/t\", \"last-sequence-number\": 0, \"last-updated-ms\": 1,"
		" \"last-column-id\": 3, \"current-schema-id\": 0, \"schemas\": [{\"type\": \"struct\","
		"  \"schema-id\": 0, \"fields\": [{\"id\": 1, \"name\": \"s\", \"required\": false,"
		"  \"type\": {\"type\": \"struct\", \"fields\": [{\"id\": 2, \"name\": \"d\","
		"  \"required\": false, \"type\": \"date\"}]}}]}], \"default-spec-id\": 0,"
		" \"last-partition-id\": 1000, \"partition-specs\": [{\"spec-id\": 0, \"fields\":"
		"  [{\"name\": \"s_d\", \"transform\": \"identity\", \"source-id\": 2, \"field-id\": 1000}]}],"
		" \"properties\": {}, \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [],"
		" \"metadata-log\": [], \"sort-orders\": [{\"order-id\": 0, \"fields\": []}],"
		" \"default-sort-order-id\": 0}";
		IcebergTableMetadata *md;

		if (iceberg_metadata_parse(md_nested, strlen(md_nested), NULL, &md, &err))
		{
			CHECK(match(md, "s_d = '2025-11-30'", 0, "[20422]"), "nested identity date source");
			CHECK(!match(md, "s_d < '2025-11-30'", 0, "[20422]"), "nested identity date source, <");
			iceberg_metadata_free(md);
		}
		else
			CHECK(false, "metadata: %s", err.message);
	}

	/* refused: timestamptz_ns deep inside, named by its full name */
	CHECK(iceberg_schema_parse("{\"fields\": [{\"id\": 1, \"name\": \"m\", \"required\": false,"
							   " \"type\": {\"type\": \"map\", \"key-id\": 2, \"key\": \"int\", \"value-id\": 3,"
							   " \"value\": {\"type\": \"struct\", \"fields\": [{\"id\": 4, \"name\": \"at\","
							   " \"required\": false, \"type\": \"timestamptz_ns\"}]}}}]}", &s, &err), "parse");
	CHECK(!iceberg_compact_check_schema(s, &err) && err.code == ICEBERG_ERR_UNSUPPORTED &&
		  strstr(err.message, "\"m.value.at\" of type timestamptz_ns") != NULL && err.detail[0],
		  "timestamptz_ns refused: %s", err.message);
	iceberg_schema_free(s);
	CHECK(iceberg_schema_parse("{\"fields\": [{\"id\": 1, \"name\": \"v\", \"required\": false,"
							   " \"type\": \"variant\"}]}", &s, &err) &&
		  !iceberg_compact_check_schema(s, &err) && strstr(err.message, "\"v\" of type variant"),
		  "variant refused: %s", err.message);
	iceberg_schema_free(s);
	/* v3 default values: a struct's initial-default is not filled in */
	CHECK(iceberg_schema_parse("{\"fields\": [{\"id\": 1, \"name\": \"s\", \"required\": false,"
							   " \"type\": {\"type\": \"struct\", \"fields\": [{\"id\": 2, \"name\": \"a\","
							   " \"required\": false, \"type\": \"int\"}]}, \"initial-default\": {\"2\": 1}}]}",
							   &s, &err) &&
		  !iceberg_compact_check_schema(s, &err) && err.code == ICEBERG_ERR_UNSUPPORTED &&
		  strstr(err.message, "initial-default of column \"s\"") != NULL,
		  "nested initial-default refused: %s", err.message);
	iceberg_schema_free(s);
	CHECK(!iceberg_schema_parse("{\"fields\": [{\"id\": 1, \"name\": \"l\", \"required\": false,"
								" \"type\": {\"type\": \"list\", \"element\": \"int\"}}]}", &s, &err) &&
		  err.code == ICEBERG_ERR_MALFORMED, "a list without element-id is malformed");
}

/* Metrics modes of nested leaves: full names, limitFieldIds' order. */
static void
test_nested_modes(void)
{
	static const char *md_fmt =
	"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
	" \"location\": \"s3://b/t\", \"last-sequence-number\": 0, \"last-updated-ms\": 1,"
	" \"last-column-id\": 8, \"current-schema-id\": 3, \"schemas\": [%s],"
	" \"default-spec-id\": 0, \"last-partition-id\": 999, \"partition-specs\": [{\"spec-id\": 0, \"fields\": []}],"
	" \"properties\": {\"write.metadata.metrics.column.s.l.element.value\": \"full\","
	"   \"write.metadata.metrics.max-inferred-column-defaults\": \"2\"},"
	" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
	" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";
	char		text[4096];
	IcebergTableMetadata *md;
	IcebergSchema *s;
	IcebergCompactJobMetric *m;
	TmsError	err;
	int			i;
	IcebergMetricsMode want[9] = {0};

	snprintf(text, sizeof(text), md_fmt, nested_schema);
	if (!iceberg_metadata_parse(text, strlen(text), NULL, &md, &err) ||
		!iceberg_schema_parse(md->current_schema_json, &s, &err))
	{
		CHECK(false, "metadata: %s", err.message);
		return;
	}
	CHECK(iceberg_compact_metrics_modes(md, s, &m, &err), "modes");
	/* the top level's primitives first (id, t), then none; 7 its own */
	want[1] = ICEBERG_METRICS_TRUNCATE;
	want[8] = ICEBERG_METRICS_TRUNCATE;
	want[3] = want[6] = ICEBERG_METRICS_NONE;
	want[7] = ICEBERG_METRICS_FULL;
	for (i = 0; i < s->nleaves; i++)
		CHECK(m[i].id >= 1 && m[i].id <= 8 && m[i].mode == want[m[i].id] &&
			  (m[i].mode != ICEBERG_METRICS_TRUNCATE || m[i].length == 16),
			  "field %d: mode %d", (int) m[i].id, m[i].mode);
	io_free(m);
	iceberg_schema_free(s);
	iceberg_metadata_free(md);
}

static void
test_plan_fixture(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergCompactPlan *p;
	IcebergCompactOptions o;
	TmsError	err;
	char		folder[1024];
	char		path[1200];
	int			total = 0;

	memset(&fs, 0, sizeof(fs));
	snprintf(folder, sizeof(folder), "%s/java-v2-partitioned-eqdeletes", fixtures);
	fs.nmaps = 1;
	fs.maps[0].from = "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/v6.metadata.json", folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "fixture: %s %s", err.message, err.detail);
		return;
	}
	/* defaults: the files are tiny, but no partition has 5 of them */
	memset(&o, 0, sizeof(o));
	o.delete_file_threshold = -1;
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		CHECK(p->data_files == 6 && p->ndeletes == 3 && p->candidates == 6,
			  "6 data files, 3 deletes: %" PRId64 " %d %" PRId64, p->data_files, p->ndeletes,
			  p->candidates);
		/* a group of one file without enough deletes is not worth rewriting */
		for (int g = 0; g < p->ngroups; g++)
			CHECK(p->groups[g].nfiles > 1 || (p->groups[g].reasons & ICEBERG_COMPACT_DELETE_RATIO),
				  "group %d of %d files", g, p->groups[g].nfiles);
		iceberg_compact_plan_free(p);
	}

	/*
	 * rewrite-all alone (min-input-files left at 5): every file in a group,
	 * every group kept, though each partition has one or two files
	 */
	o.rewrite_all = true;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		CHECK(p->nfiles == 6 && p->ngroups == 6,
			  "rewrite-all: 6 files in 6 groups, not %d in %d", p->nfiles, p->ngroups);
		for (int g = 0; g < p->ngroups; g++)
			CHECK(p->groups[g].reasons & ICEBERG_COMPACT_REWRITE_ALL,
				  "group %d kept for rewrite-all", g);
		iceberg_compact_plan_free(p);
	}
	/* min-input-files 1: every partition with two or more files, and deletes */
	o.min_input_files = 1;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		for (int g = 0; g < p->ngroups; g++)
		{
			total += p->groups[g].nfiles;
			CHECK(p->groups[g].expected_outputs == 1, "one output");
		}
		CHECK(p->nfiles == total, "files in groups");
		/* every equality delete applies to files of older sequence numbers */
		for (int d = 0; d < p->ndeletes; d++)
			CHECK(p->deletes[d].content == ICEBERG_CONTENT_EQUALITY_DELETES &&
				  p->deletes[d].nequality_ids >= 1, "equality delete %d", d);
		iceberg_compact_plan_free(p);
	}
	/* where on the identity column, and a target between min and max */
	{
		IcebergPartitionFilter *f;

		CHECK(iceberg_partition_filter_parse("name = 'no such name'", &f, &err) &&
			  iceberg_partition_filter_bind(f, md, &err), "filter: %s", err.message);
		o.where = f;
		CHECK(iceberg_compact_plan(&io, md, &o, &p, &err) && p->ngroups == 0 &&
			  p->filtered_out == 6, "nothing selected");
		iceberg_compact_plan_free(p);
		iceberg_partition_filter_free(f);
		o.where = NULL;
	}
	o.target_file_size_bytes = 100;
	o.min_file_size_bytes = 200;
	CHECK(!iceberg_compact_plan(&io, md, &o, &p, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "min above the target refused");
	iceberg_metadata_free(md);
}

/*
 * rewrite-all on an unpartitioned v2 table with one live data file (and a
 * position delete file): the single-file group is rewritten, as Iceberg's
 * SizeBasedFileRewritePlanner keeps every group when rewrite-all is set;
 * without it the group is not worth rewriting.
 */
static void
test_plan_rewrite_all(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergCompactPlan *p;
	IcebergCompactOptions o;
	TmsError	err;
	char		folder[1024];
	char		path[1200];

	memset(&fs, 0, sizeof(fs));
	snprintf(folder, sizeof(folder), "%s/spark-v2-mor-posdeletes", fixtures);
	fs.nmaps = 1;
	fs.maps[0].from = "s3a://hyperparam-iceberg/spark/bunnies";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/v5.metadata.json", folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "fixture: %s %s", err.message, err.detail);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.delete_file_threshold = -1;
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err) && p->ngroups == 0 &&
		  p->candidates == 1, "without rewrite-all: one small file, no group");
	iceberg_compact_plan_free(p);
	o.rewrite_all = true;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		CHECK(p->ngroups == 1 && p->nfiles == 1 && p->groups[0].nfiles == 1 &&
			  p->groups[0].reasons == ICEBERG_COMPACT_REWRITE_ALL &&
			  p->groups[0].expected_outputs == 1,
			  "rewrite-all: one group of the one file (%d groups)", p->ngroups);
		iceberg_compact_plan_free(p);
	}
	/* an explicit min-input-files does not hold it back either */
	o.min_input_files = 10;
	CHECK(iceberg_compact_plan(&io, md, &o, &p, &err) && p->ngroups == 1,
		  "rewrite-all with min-input-files 10");
	iceberg_compact_plan_free(p);
	iceberg_metadata_free(md);
}

/* A sort order's text parsed against md's schema: its fields as "id:dir:nulls,...". */
static bool
sort_is(IcebergSchema *schema, const char *text, const char *want)
{
	IcebergSortOrder *o;
	TmsError	err;
	char		got[512] = "";
	int			i;

	if (!iceberg_sort_order_parse(text, schema, &o, &err))
	{
		printf("  (%s: %s %s)\n", text, err.message, err.detail);
		return false;
	}
	if (o->zorder)
		strcat(got, "z");
	for (i = 0; i < o->nfields; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d:%s:%s", i ? "," : "",
				 (int) o->fields[i].source_id, o->fields[i].descending ? "desc" : "asc",
				 o->fields[i].nulls_first ? "first" : "last");
	iceberg_sort_order_free(o);
	if (strcmp(got, want) != 0)
		printf("  (%s: %s, not %s)\n", text, got, want);
	return strcmp(got, want) == 0;
}

/* Refused with ICEBERG_ERR_INVALID_ARGUMENT, the detail or message containing says. */
static bool
sort_refused(IcebergSchema *schema, const char *text, const char *says)
{
	IcebergSortOrder *o = NULL;
	TmsError	err;

	if (iceberg_sort_order_parse(text, schema, &o, &err))
	{
		iceberg_sort_order_free(o);
		return false;
	}
	if (err.code != ICEBERG_ERR_INVALID_ARGUMENT ||
		(strstr(err.detail, says) == NULL && strstr(err.message, says) == NULL))
	{
		printf("  (%s: %s %s)\n", text, err.message, err.detail);
		return false;
	}
	return true;
}

/* Sort orders on fields of structs: s.f in the text, a nested source-id. */
static void
test_sort_nested(void)
{
	IcebergSchema *schema;
	IcebergTableMetadata *md;
	IcebergSortOrder *o = NULL;
	TmsError	err;
	static const char *md_json =
	"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
	" \"location\": \"s3://b/t\", \"last-sequence-number\": 0, \"last-updated-ms\": 1,"
	" \"last-column-id\": 7, \"current-schema-id\": 0, \"schemas\": [{\"type\": \"struct\","
	"  \"schema-id\": 0, \"fields\": [{\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
	"  {\"id\": 2, \"name\": \"s\", \"required\": false, \"type\": {\"type\": \"struct\", \"fields\": ["
	"   {\"id\": 3, \"name\": \"f\", \"required\": false, \"type\": \"int\"},"
	"   {\"id\": 4, \"name\": \"T\", \"required\": false, \"type\": {\"type\": \"struct\", \"fields\": ["
	"    {\"id\": 5, \"name\": \"d\", \"required\": false, \"type\": \"date\"}]}}]}},"
	"  {\"id\": 6, \"name\": \"l\", \"required\": false, \"type\": {\"type\": \"list\","
	"   \"element-id\": 7, \"element-required\": false, \"element\": \"int\"}}]}],"
	" \"default-spec-id\": 0, \"last-partition-id\": 999, \"partition-specs\": [{\"spec-id\": 0, \"fields\": []}],"
	" \"properties\": {}, \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [],"
	" \"metadata-log\": [], \"sort-orders\": [{\"order-id\": 0, \"fields\": []}, {\"order-id\": 1,"
	"  \"fields\": [{\"transform\": \"month\", \"source-id\": 5, \"direction\": \"desc\","
	"  \"null-order\": \"nulls-last\"}, {\"transform\": \"identity\", \"source-id\": 3,"
	"  \"direction\": \"asc\", \"null-order\": \"nulls-first\"}]}], \"default-sort-order-id\": 1}";

	if (!iceberg_metadata_parse(md_json, strlen(md_json), NULL, &md, &err) ||
		!iceberg_schema_parse(md->current_schema_json, &schema, &err))
	{
		CHECK(false, "nested sort metadata: %s", err.message);
		return;
	}
	CHECK(sort_is(schema, "s.f DESC, `s`.t.`d`", "3:desc:last,5:asc:first"),
		  "fields of structs, quoted and case-insensitive parts");
	CHECK(sort_is(schema, "zorder(s.t.d, id)", "z5:asc:first,1:asc:first"), "zorder of a field of structs");
	CHECK(sort_refused(schema, "s.nosuch", "nosuch"), "an unknown field of a struct");
	CHECK(sort_refused(schema, "id.x", "only a struct's fields"), "a field of a long");
	CHECK(sort_refused(schema, "l.element", "only a struct's fields"), "a list's element");
	CHECK(sort_refused(schema, "s.t", "cannot be sorted"), "a struct");
	CHECK(iceberg_sort_order_of_table(md, schema, &o, &err) && o->nfields == 2 &&
		  o->fields[0].source_id == 5 && strcmp(o->fields[0].transform, "month") == 0 &&
		  o->fields[1].source_id == 3, "the table's order on fields of structs: %s", err.message);
	iceberg_sort_order_free(o);
	iceberg_schema_free(schema);
	iceberg_metadata_free(md);
}

static void
test_sort_orders(void)
{
	IcebergTableMetadata *md;
	IcebergSchema *schema;
	IcebergSortOrder *o = NULL;
	TmsError	err;
	char	   *sorted;
	const char *orders = "\"sort-orders\": [{\"order-id\": 0, \"fields\": []},"
	" {\"order-id\": 3, \"fields\": [{\"transform\": \"identity\", \"source-id\": 1,"
	" \"direction\": \"desc\", \"null-order\": \"nulls-last\"}, {\"transform\": \"day\","
	" \"source-id\": 3, \"direction\": \"asc\", \"null-order\": \"nulls-first\"}]}],"
	" \"default-sort-order-id\": 3}";

	CHECK(iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err) &&
		  iceberg_schema_parse(md->current_schema_json, &schema, &err), "metadata");
	/* Spark's syntax, its defaults, quoted and case-insensitive names */
	CHECK(sort_is(schema, "id", "1:asc:first"), "asc nulls first by default");
	CHECK(sort_is(schema, "id DESC", "1:desc:last"), "desc nulls last by default");
	CHECK(sort_is(schema, " id desc nulls first , `cat` ASC NULLS LAST,TS", "1:desc:first,2:asc:last,3:asc:first"),
		  "directions, null orders, quoted and case-insensitive names");
	CHECK(sort_is(schema, "zorder(cat, id)", "z2:asc:first,1:asc:first"), "zorder");
	CHECK(sort_is(schema, "ZORDER ( ts , day )", "z3:asc:first,5:asc:first"), "zorder of a timestamp and a date");
	CHECK(sort_is(NULL, "nosuch DESC", "0:desc:last"), "the syntax alone without a schema");
	/* refused, the bad text named */
	CHECK(sort_refused(schema, "", "empty"), "empty");
	CHECK(sort_refused(schema, "id DESK", "\"id DESK\""), "a bad direction");
	CHECK(sort_refused(schema, "id NULLS LATER", "NULLS FIRST or NULLS LAST"), "a bad null order");
	CHECK(sort_refused(schema, "id,", "column name was expected"), "a trailing comma");
	CHECK(sort_refused(schema, "`id", "not closed"), "an unclosed quote");
	CHECK(sort_refused(schema, "bucket(4, id)", "bucket(4, id)"), "a transform");
	CHECK(sort_refused(schema, "zorder(id", "zorder(id"), "an unclosed zorder");
	CHECK(sort_refused(schema, "zorder(id, id)", "twice"), "a column twice in zorder");
	CHECK(sort_refused(schema, "zorder(id) DESC", "nothing may follow"), "zorder then more");
	CHECK(sort_refused(schema, "nosuch", "nosuch"), "an unknown column");
	CHECK(sort_refused(schema, "zorder(amount)", "amount"), "zorder of a decimal");
	CHECK(sort_is(schema, "amount DESC", "4:desc:last"), "sort by a decimal");
	/* the table is unsorted: no default */
	CHECK(!iceberg_sort_order_of_table(md, schema, &o, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.message, "unsorted"),
		  "an unsorted table has no sort order");
	iceberg_metadata_free(md);

	/* a table sorted by id DESC, day(ts): its order, and the id stamped */
	sorted = io_malloc(strlen(metadata_json) + strlen(orders) + 1);
	strcpy(sorted, metadata_json);
	strcpy(strstr(sorted, "\"sort-orders\""), orders);
	CHECK(iceberg_metadata_parse(sorted, strlen(sorted), NULL, &md, &err), "sorted metadata");
	CHECK(md->default_sort_order_id == 3, "default-sort-order-id kept");
	CHECK(iceberg_sort_order_of_table(md, schema, &o, &err) && o->order_id == 3 &&
		  o->nfields == 2 && strcmp(o->fields[1].transform, "day") == 0 &&
		  o->fields[0].descending && !o->fields[0].nulls_first, "the table's order");
	{
		IcebergSortOrder *c = iceberg_sort_order_copy(o);

		CHECK(c != NULL && c->nfields == 2 && c->order_id == 3 &&
			  strcmp(c->fields[1].transform, "day") == 0, "a copy");
		iceberg_sort_order_free(c);
	}
	iceberg_sort_order_free(o);
	CHECK(iceberg_sort_order_parse("id DESC, ts", schema, &o, &err), "parse");
	iceberg_sort_order_match(md, o);
	CHECK(o->order_id == 0, "identity(ts) is not day(ts): unsorted");
	iceberg_sort_order_free(o);
	CHECK(iceberg_sort_order_parse("id DESC NULLS LAST", schema, &o, &err), "parse");
	iceberg_sort_order_match(md, o);
	CHECK(o->order_id == 0, "a prefix of the order is not the order");
	iceberg_sort_order_free(o);
	CHECK(iceberg_sort_order_parse("zorder(id, ts)", schema, &o, &err), "parse");
	iceberg_sort_order_match(md, o);
	CHECK(o->order_id == 0, "z-order stamps 0");
	iceberg_sort_order_free(o);
	iceberg_metadata_free(md);
	/* the same fields as the table's order stamp its id */
	strcpy(strstr(strstr(sorted, "\"sort-orders\""), "\"transform\": \"day\""), "\"transform\": \"identity\", \"source-id\": 3,"
		   " \"direction\": \"asc\", \"null-order\": \"nulls-first\"}]}], \"default-sort-order-id\": 3}");
	CHECK(iceberg_metadata_parse(sorted, strlen(sorted), NULL, &md, &err), "metadata, identity(ts)");
	CHECK(iceberg_sort_order_parse("id DESC, ts", schema, &o, &err), "parse");
	iceberg_sort_order_match(md, o);
	CHECK(o->order_id == 3, "the same fields: the table's order id");
	iceberg_sort_order_free(o);
	iceberg_metadata_free(md);
	iceberg_schema_free(schema);
	io_free(sorted);
}


/*
 * The delete files a commit removes: those every data file of which the
 * commit's groups (with those committed before) rewrite, counted once per
 * commit whatever number of its groups they touch; with
 * remove-dangling-deletes also those applying to no live data file.
 */
static void
test_removable(void)
{
	IcebergCompactPlan p;
	IcebergCompactGroup groups[3];
	IcebergCompactDelete deletes[3];
	int			g0d[] = {0, 1};
	int			g1d[] = {0};
	int			d0g[] = {0, 1};
	int64_t		d0f[] = {2, 3};
	int			d1g[] = {0};
	int64_t		d1f[] = {1};
	int			both[] = {0, 1};
	int			only0[] = {0};
	int			only2[] = {2};
	int		   *rm;
	int			n;
	TmsError	err;

	memset(&p, 0, sizeof(p));
	memset(groups, 0, sizeof(groups));
	memset(deletes, 0, sizeof(deletes));
	groups[0].ndeletes = 2;
	groups[0].deletes = g0d;
	groups[1].ndeletes = 1;
	groups[1].deletes = g1d;

	/*
	 * d0: 5 files, 2 in group 0 and 3 in group 1; d1: 1 file of group 0; d2
	 * dangling
	 */
	deletes[0].applies = 5;
	deletes[0].ngroups = 2;
	deletes[0].groups = d0g;
	deletes[0].group_files = d0f;
	deletes[1].applies = 1;
	deletes[1].ngroups = 1;
	deletes[1].groups = d1g;
	deletes[1].group_files = d1f;
	deletes[2].applies = 0;
	p.ngroups = 3;
	p.groups = groups;
	p.ndeletes = 3;
	p.deletes = deletes;

	CHECK(iceberg_compact_removable(&p, only0, 1, &rm, &n, &err) && n == 1 && rm[0] == 1,
		  "group 0 alone removes d1 only (%d)", n);
	io_free(rm);
	CHECK(iceberg_compact_removable(&p, both, 2, &rm, &n, &err) && n == 2 &&
		  rm[0] == 0 && rm[1] == 1, "groups 0 and 1 in one commit remove d0 (once) and d1 (%d)", n);
	io_free(rm);
	deletes[0].covered = 3;		/* group 1 committed before */
	CHECK(iceberg_compact_removable(&p, only0, 1, &rm, &n, &err) && n == 2,
		  "group 0 after group 1 removes d0 and d1 (%d)", n);
	io_free(rm);
	CHECK(iceberg_compact_removable(&p, only2, 1, &rm, &n, &err) && n == 0,
		  "a dangling delete stays without remove-dangling-deletes (%d)", n);
	io_free(rm);
	p.remove_dangling_deletes = true;
	CHECK(iceberg_compact_removable(&p, only2, 1, &rm, &n, &err) && n == 1 && rm[0] == 2,
		  "remove-dangling-deletes removes d2 (%d)", n);
	io_free(rm);
}

/* The options checked against the table before anything runs. */
static void
test_check_options(void)
{
	IcebergTableMetadata *md;
	IcebergCompactOptions o;
	TmsError	err;

	if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err))
	{
		CHECK(false, "metadata: %s", err.message);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	o.delete_file_threshold = -1;
	o.output_spec_id = -1;
	CHECK(iceberg_compact_check_options(md, &o, &err), "defaults: %s", err.message);
	o.output_spec_id = 0;
	CHECK(iceberg_compact_check_options(md, &o, &err), "output-spec-id 0 (an older spec)");
	o.output_spec_id = 7;
	CHECK(!iceberg_compact_check_options(md, &o, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.message, "7") != NULL,
		  "output-spec-id 7 refused, naming it: %s", err.message);
	o.output_spec_id = -1;
	/* the table's default target (512 MiB) above an explicit maximum */
	o.max_file_size_bytes = 1024;
	CHECK(!iceberg_compact_check_options(md, &o, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT && strstr(err.detail, "1024") != NULL,
		  "max-file-size-bytes below the table's target refused: %s", err.detail);
	o.target_file_size_bytes = 512;
	o.min_file_size_bytes = 100;
	CHECK(iceberg_compact_check_options(md, &o, &err), "100 < 512 < 1024");
	iceberg_metadata_free(md);
}

/* A writer below a folder: path's prefix mapped as the local file io maps it. */
typedef struct FolderWriter
{
	const char *prefix;
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
		err->code = IO_ERR_STORAGE;
		snprintf(err->message, sizeof(err->message), "cannot write %.300s", p);
		return -1;
	}
	if (strstr(path, "/snap-") != NULL)
		snprintf(fw->list, sizeof(fw->list), "%s", path);
	return 0;
}

/*
 * A format v1 table whose snapshot lists its manifests inline: planned,
 * and its group committed as a snapshot with a v1 manifest list whose
 * records carry the spec id from the manifests' headers and no sequence
 * numbers (https://iceberg.apache.org/spec/#manifest-lists).
 */
static void
test_v1_inline(void)
{
	const char *prefix = "data/persistent/iceberg_v1_deprecated/default/legacy_v1";
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergCompactPlan *p;
	IcebergCompactOptions o;
	IcebergCompactCommit res;
	IcebergCompactOutput out;
	IcebergCompactGroupOutput go;
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	TmsError	err;
	FolderWriter fw;
	IcebergWriter w = {&fw, folder_write};
	char		tmpl[] = "/tmp/tms-compact-v1-XXXXXX";
	char		cmd[2600];
	char		path[1200];
	int			n = 0,
				added = 0,
				deleted = 0,
				existing = 0;

	if (mkdtemp(tmpl) == NULL)
	{
		CHECK(false, "mkdtemp");
		return;
	}
	memset(&fw, 0, sizeof(fw));
	fw.prefix = prefix;
	snprintf(fw.folder, sizeof(fw.folder), "%s/t", tmpl);
	snprintf(cmd, sizeof(cmd), "cp -r '%s/spark-v1-legacy-manifests-field' '%s'", fixtures,
			 fw.folder);
	CHECK(system(cmd) == 0, "copy the fixture");
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = prefix;
	fs.maps[0].to = fw.folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/v2.metadata.json", fw.folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "fixture: %s %s", err.message, err.detail);
		return;
	}
	CHECK(md->format_version == 1 && iceberg_metadata_current_snapshot(md)->manifest_list == NULL,
		  "a v1 snapshot with inline manifests");
	memset(&o, 0, sizeof(o));
	o.min_file_size_bytes = -1;
	o.max_file_size_bytes = -1;
	o.delete_file_threshold = -1;
	o.output_spec_id = -1;
	o.rewrite_all = true;
	if (!iceberg_compact_plan(&io, md, &o, &p, &err))
	{
		CHECK(false, "plan: %s %s", err.message, err.detail);
		iceberg_metadata_free(md);
		return;
	}
	CHECK(p->data_files == 2 && p->ngroups == 2 && p->nfiles == 2 && p->base_sequence_number == 0,
		  "two files, two partitions, two groups: %d", p->ngroups);

	/* the first group rewritten into one (pretended) file */
	memset(&out, 0, sizeof(out));
	out.path = (char *) "data/persistent/iceberg_v1_deprecated/default/legacy_v1/data/new.parquet";
	out.size = 1000;
	out.records = p->groups[0].records;
	go.group = 0;
	go.outputs = &out;
	go.noutputs = 1;
	CHECK(iceberg_compact_commit_write(&io, &w, md, p, &go, 1, 77, &res, &err),
		  "commit: %s %s", err.message, err.detail);
	CHECK(res.snapshot.manifest_list != NULL && res.snapshot.sequence_number == 0 &&
		  res.data_files_rewritten == 1 && res.data_files_added == 1 && fw.list[0] != '\0',
		  "a snapshot with a manifest list, no sequence number");
	if (fw.list[0] != '\0' && iceberg_manifest_list_open_path(&io, fw.list, &lr, &err))
	{
		CHECK(iceberg_manifest_list_format_version(lr) == 1, "a v1 list");
		while (iceberg_manifest_list_next(lr, &mf, &err) == 1)
		{
			n++;
			CHECK(mf->partition_spec_id == 0 && mf->manifest_length > 0 &&
				  mf->sequence_number == 0, "record %d: spec 0, a length", n);
			added += mf->added_files_count;
			deleted += mf->deleted_files_count;
			existing += mf->existing_files_count;
		}
		iceberg_manifest_list_close(lr);
		CHECK(n == 2 && added == 1 && deleted == 1 && existing == 1,
			  "the added manifest and the rewritten one: %d records, %d/%d/%d", n, added,
			  deleted, existing);
	}
	else
		CHECK(false, "read the new list: %s", err.message);
	iceberg_compact_commit_free(&res);
	iceberg_compact_plan_free(p);
	iceberg_metadata_free(md);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
	(void) system(cmd);
}

/*
 * Iceberg's transforms against the spec's published examples
 * (https://iceberg.apache.org/spec/#appendix-b-32-bit-hash-requirements
 * and #truncate-transform-details), and the projection of a partition of
 * an older spec into the output spec.
 */
static void
test_transforms(void)
{
	static const uint8_t b0123[] = {0, 1, 2, 3};
	static const uint8_t dec1420[] = {0x05, 0x8c};	/* 1420, minimal bytes */
	static const uint8_t uuid[] = {0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd,
	0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7};
	IcebergTableMetadata *md;
	IcebergSchema *schema;
	TmsError	err;
	char	   *out;

	CHECK((int32_t) iceberg_hash_long(34) == 2017239379, "int/long 34");
	CHECK((int32_t) iceberg_hash_long(17486) == -653330422, "date 2017-11-16");
	CHECK((int32_t) iceberg_hash_long(INT64_C(81068000000)) == -662762989, "time 22:31:08");
	CHECK((int32_t) iceberg_hash_long(INT64_C(1510871468000000)) == -2047944441,
		  "timestamp 2017-11-16T22:31:08");
	CHECK((int32_t) iceberg_murmur3_32("iceberg", 7) == 1210000089, "string iceberg");
	CHECK((int32_t) iceberg_murmur3_32(b0123, 4) == -188683207, "binary 00 01 02 03");
	CHECK((int32_t) iceberg_murmur3_32(dec1420, 2) == -500754589, "decimal 14.20");
	CHECK((int32_t) iceberg_murmur3_32(uuid, 16) == 1488055340, "uuid");
	CHECK(iceberg_bucket_of_hash(iceberg_hash_long(34), 16) == (2017239379 % 16), "bucket[16](34)");
	CHECK(iceberg_bucket_of_hash(0xffffffffu, 7) == (int32_t) (INT32_MAX % 7), "bucket masks the sign");
	CHECK(iceberg_truncate_long(1, 10) == 0 && iceberg_truncate_long(-1, 10) == -10 &&
		  iceberg_truncate_long(10, 10) == 10, "truncate[10] of 1, -1, 10");
	CHECK(iceberg_truncate_utf8("iceberg", 7, 3) == 3, "truncate[3] iceberg");
	CHECK(iceberg_truncate_utf8("\xc3\xa9t\xc3\xa9", 6, 2) == 3, "truncate by code points");
	CHECK(iceberg_years_from_days(17486) == 47 && iceberg_months_from_days(17486) == 574 &&
		  iceberg_years_from_days(-1) == -1 && iceberg_months_from_days(-1) == -1,
		  "year and month of 2017-11-16 and 1969-12-31");

	if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err) ||
		!iceberg_schema_parse(md->current_schema_json, &schema, &err))
	{
		CHECK(false, "metadata: %s", err.message);
		return;
	}
	/* spec 0 is identity(cat): spec 1 needs ts and id, which it does not fix */
	CHECK(iceberg_partition_project(md, schema, 0, "[\"c1\"]", 6, 1, &out, &err) && out == NULL,
		  "identity(cat) does not fix day(ts), bucket(id)");
	/* spec 1 into spec 1: the same values */
	CHECK(iceberg_partition_project(md, schema, 1, "[20422,3,\"0x04d2\"]", 18, 1, &out, &err) &&
		  out != NULL && strcmp(out, "[20422,3,\"0x04d2\"]") == 0, "the same spec");
	io_free(out);
	iceberg_schema_free(schema);
	iceberg_metadata_free(md);

	/* a table whose spec 0 has identity values, spec 1 every transform */
	{
		static const char *evolved =
		"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c2\","
		" \"location\": \"s3://b/t\", \"last-sequence-number\": 3, \"last-updated-ms\": 1,"
		" \"last-column-id\": 4, \"current-schema-id\": 0,"
		" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
		"  {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"},"
		"  {\"id\": 2, \"name\": \"cat\", \"required\": false, \"type\": \"string\"},"
		"  {\"id\": 3, \"name\": \"ts\", \"required\": false, \"type\": \"timestamp\"},"
		"  {\"id\": 4, \"name\": \"d\", \"required\": false, \"type\": \"date\"}]}],"
		" \"default-spec-id\": 1, \"last-partition-id\": 1010,"
		" \"partition-specs\": ["
		"  {\"spec-id\": 0, \"fields\": [{\"name\": \"id\", \"transform\": \"identity\", \"source-id\": 1, \"field-id\": 1000},"
		"     {\"name\": \"cat\", \"transform\": \"identity\", \"source-id\": 2, \"field-id\": 1001},"
		"     {\"name\": \"ts_hour\", \"transform\": \"hour\", \"source-id\": 3, \"field-id\": 1002},"
		"     {\"name\": \"d\", \"transform\": \"identity\", \"source-id\": 4, \"field-id\": 1003}]},"
		"  {\"spec-id\": 1, \"fields\": [{\"name\": \"id_bucket\", \"transform\": \"bucket[16]\", \"source-id\": 1, \"field-id\": 1004},"
		"     {\"name\": \"id_trunc\", \"transform\": \"truncate[10]\", \"source-id\": 1, \"field-id\": 1005},"
		"     {\"name\": \"cat_trunc\", \"transform\": \"truncate[3]\", \"source-id\": 2, \"field-id\": 1006},"
		"     {\"name\": \"ts_day\", \"transform\": \"day\", \"source-id\": 3, \"field-id\": 1007},"
		"     {\"name\": \"d_year\", \"transform\": \"year\", \"source-id\": 4, \"field-id\": 1008},"
		"     {\"name\": \"d_month\", \"transform\": \"month\", \"source-id\": 4, \"field-id\": 1009},"
		"     {\"name\": \"cat\", \"transform\": \"identity\", \"source-id\": 2, \"field-id\": 1010}]},"
		"  {\"spec-id\": 2, \"fields\": []}],"
		" \"properties\": {},"
		" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
		" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";

		/* id 34, cat "iceberg", hour 420242 (2017-12-10T02h), d 2017-11-16 */
		const char *p0 = "[34,\"iceberg\",420242,17486]";
		char		want[128];
		char	   *rs;

		if (!iceberg_metadata_parse(evolved, strlen(evolved), NULL, &md, &err) ||
			!iceberg_schema_parse(md->current_schema_json, &schema, &err))
		{
			CHECK(false, "evolved metadata: %s %s", err.message, err.detail);
			return;
		}
		snprintf(want, sizeof(want), "[%d,30,\"ice\",%d,47,574,\"iceberg\"]",
				 2017239379 % 16, 420242 / 24);
		CHECK(iceberg_partition_project(md, schema, 0, p0, strlen(p0), 1, &out, &err) &&
			  out != NULL && strcmp(out, want) == 0, "every transform: %s, want %s",
			  out ? out : "(none)", want);
		io_free(out);
		CHECK(iceberg_partition_project(md, schema, 0, "[null,null,null,null]", 21, 1, &out, &err) &&
			  out != NULL && strcmp(out, "[null,null,null,null,null,null,null]") == 0,
			  "nulls stay null: %s", out ? out : "(none)");
		io_free(out);
		CHECK(iceberg_partition_project(md, schema, 2, "[]", 2, 1, &out, &err) && out == NULL,
			  "an unpartitioned file is not fixed");
		rs = iceberg_partition_record_schema(md, schema, 1, &err);
		CHECK(rs != NULL && strstr(rs, "\"field-id\":1004") != NULL &&
			  strstr(rs, "\"logicalType\":\"date\"") != NULL, "partition record of spec 1: %s",
			  rs ? rs : err.message);
		io_free(rs);
		iceberg_schema_free(schema);
		iceberg_metadata_free(md);
	}
}

/*
 * bucket and truncate of decimal, uuid, fixed, binary and timestamp_ns
 * (https://iceberg.apache.org/spec/#partition-transforms and Appendix B):
 * a decimal hashes its unscaled value's fewest two's complement big-endian
 * bytes (14.20: 05 8c, whatever the width of the manifest's fixed), a
 * uuid its 16 big-endian bytes, timestamp_ns its microseconds; truncate
 * of a decimal works on the unscaled value; and which transforms of a
 * transform are fixed by it.
 */
static void
test_transforms_bytes(void)
{
	static const char *json =
	"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c3\","
	" \"location\": \"s3://b/t\", \"last-sequence-number\": 3, \"last-updated-ms\": 1,"
	" \"last-column-id\": 6, \"current-schema-id\": 0,"
	" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
	"  {\"id\": 1, \"name\": \"dec\", \"required\": false, \"type\": \"decimal(9, 2)\"},"
	"  {\"id\": 2, \"name\": \"u\", \"required\": false, \"type\": \"uuid\"},"
	"  {\"id\": 3, \"name\": \"fx\", \"required\": false, \"type\": \"fixed[4]\"},"
	"  {\"id\": 4, \"name\": \"bin\", \"required\": false, \"type\": \"binary\"},"
	"  {\"id\": 5, \"name\": \"tns\", \"required\": false, \"type\": \"timestamp_ns\"},"
	"  {\"id\": 6, \"name\": \"id\", \"required\": false, \"type\": \"long\"}]}],"
	" \"default-spec-id\": 1, \"last-partition-id\": 1020,"
	" \"partition-specs\": ["
	"  {\"spec-id\": 0, \"fields\": ["
	"     {\"name\": \"dec\", \"transform\": \"identity\", \"source-id\": 1, \"field-id\": 1000},"
	"     {\"name\": \"u\", \"transform\": \"identity\", \"source-id\": 2, \"field-id\": 1001},"
	"     {\"name\": \"fx\", \"transform\": \"identity\", \"source-id\": 3, \"field-id\": 1002},"
	"     {\"name\": \"bin\", \"transform\": \"identity\", \"source-id\": 4, \"field-id\": 1003},"
	"     {\"name\": \"tns\", \"transform\": \"identity\", \"source-id\": 5, \"field-id\": 1004}]},"
	"  {\"spec-id\": 1, \"fields\": ["
	"     {\"name\": \"dec_b\", \"transform\": \"bucket[100]\", \"source-id\": 1, \"field-id\": 1005},"
	"     {\"name\": \"dec_t\", \"transform\": \"truncate[10]\", \"source-id\": 1, \"field-id\": 1006},"
	"     {\"name\": \"u_b\", \"transform\": \"bucket[16]\", \"source-id\": 2, \"field-id\": 1007},"
	"     {\"name\": \"fx_b\", \"transform\": \"bucket[8]\", \"source-id\": 3, \"field-id\": 1008},"
	"     {\"name\": \"bin_b\", \"transform\": \"bucket[8]\", \"source-id\": 4, \"field-id\": 1009},"
	"     {\"name\": \"bin_t\", \"transform\": \"truncate[2]\", \"source-id\": 4, \"field-id\": 1010},"
	"     {\"name\": \"tns_b\", \"transform\": \"bucket[16]\", \"source-id\": 5, \"field-id\": 1011},"
	"     {\"name\": \"tns_y\", \"transform\": \"year\", \"source-id\": 5, \"field-id\": 1012},"
	"     {\"name\": \"tns_h\", \"transform\": \"hour\", \"source-id\": 5, \"field-id\": 1013}]},"
	"  {\"spec-id\": 2, \"fields\": ["
	"     {\"name\": \"id_t\", \"transform\": \"truncate[10]\", \"source-id\": 6, \"field-id\": 1014},"
	"     {\"name\": \"id_b\", \"transform\": \"bucket[16]\", \"source-id\": 6, \"field-id\": 1015}]},"
	"  {\"spec-id\": 3, \"fields\": ["
	"     {\"name\": \"id_t5\", \"transform\": \"truncate[5]\", \"source-id\": 6, \"field-id\": 1016}]},"
	"  {\"spec-id\": 4, \"fields\": ["
	"     {\"name\": \"id_t20\", \"transform\": \"truncate[20]\", \"source-id\": 6, \"field-id\": 1017},"
	"     {\"name\": \"id_b4\", \"transform\": \"bucket[4]\", \"source-id\": 6, \"field-id\": 1018}]},"
	"  {\"spec-id\": 5, \"fields\": ["
	"     {\"name\": \"id_b3\", \"transform\": \"bucket[3]\", \"source-id\": 6, \"field-id\": 1019}]}],"
	" \"properties\": {},"
	" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
	" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";
	static const uint8_t dec1420[] = {0x00, 0x00, 0x05, 0x8c};
	static const uint8_t minus1[] = {0xff, 0xff, 0xff, 0xff};
	static const uint8_t d1065[] = {0x00, 0x00, 0x04, 0x29};
	static const uint8_t dm5[] = {0xff, 0xff, 0xff, 0xfb};
	static const uint8_t big[] = {0x4b, 0x3b, 0x4c, 0xa8, 0x5a, 0x86, 0xc4, 0x7a,
	0x09, 0x8a, 0x22, 0x3f, 0xff, 0xff, 0xff, 0xff};	/* 10^38 - 1 */
	uint8_t		out[16];
	size_t		start;
	IcebergTableMetadata *md;
	IcebergSchema *schema;
	TmsError	err;
	char	   *res;
	char	   *rs;
	char		want[256];

	/* the decimal's fewest bytes */
	CHECK(iceberg_decimal_min_bytes(dec1420, 4, &start) == 2 && start == 2 &&
		  (int32_t) iceberg_murmur3_32(dec1420 + start, 2) == -500754589,
		  "decimal 14.20 of a 4-byte fixed hashes as 05 8c");
	CHECK(iceberg_decimal_min_bytes(minus1, 4, &start) == 1 && start == 3, "-1 is one byte ff");
	CHECK(iceberg_decimal_min_bytes((const uint8_t *) "\x00\x80", 2, &start) == 2 && start == 0,
		  "128 keeps its sign byte");
	CHECK(iceberg_decimal_bytes(9) == 4 && iceberg_decimal_bytes(10) == 5 &&
		  iceberg_decimal_bytes(38) == 16, "bytes of decimal(9), (10), (38)");

	/*
	 * truncate[10] of decimal: 10.65 -> 10.60, -0.05 -> -0.10 (the spec's
	 * examples)
	 */
	CHECK(iceberg_truncate_decimal(d1065, 4, 10, 4, out) &&
		  memcmp(out, "\x00\x00\x04\x24", 4) == 0, "truncate[10](10.65) = 10.60");
	CHECK(iceberg_truncate_decimal(dm5, 4, 10, 4, out) &&
		  memcmp(out, "\xff\xff\xff\xf6", 4) == 0, "truncate[10](-0.05) = -0.10");
	CHECK(iceberg_truncate_decimal(big, 16, 7, 16, out) && memcmp(out, big, 15) == 0 &&
		  out[15] == 0xfe, "truncate[7] of 10^38 - 1");
	CHECK(!iceberg_truncate_decimal(minus1, 4, INT64_C(2147483647), 1, out),
		  "a result outside the output width is not computed");

	if (!iceberg_metadata_parse(json, strlen(json), NULL, &md, &err) ||
		!iceberg_schema_parse(md->current_schema_json, &schema, &err))
	{
		CHECK(false, "metadata: %s %s", err.message, err.detail);
		return;
	}

	/*
	 * 14.20, the spec's uuid, 00 01 02 03 twice,
	 * 2017-11-16T22:31:08.000001001
	 */
	{
		const char *p0 = "[\"0x0000058c\",\"0xf79c3e09677c4bbda4793f349cb785e7\","
		"\"0x00010203\",\"0x00010203\",1510871468000001001]";

		snprintf(want, sizeof(want), "[59,\"0x0000058c\",%d,%d,%d,\"0x0001\",%d,47,%d]",
				 1488055340 % 16, (-188683207 & INT32_MAX) % 8, (-188683207 & INT32_MAX) % 8,
				 iceberg_bucket_of_hash(iceberg_hash_long(INT64_C(1510871468000001)), 16),
				 (int) (INT64_C(1510871468000001) / INT64_C(3600000000)));
		CHECK(iceberg_partition_project(md, schema, 0, p0, strlen(p0), 1, &res, &err) &&
			  res != NULL && strcmp(res, want) == 0, "bucket and truncate of bytes: %s, want %s",
			  res ? res : "(none)", want);
		io_free(res);
	}
	/* truncate[5] of truncate[10] is not fixed (10 and 15), truncate[20] is */
	CHECK(iceberg_partition_project(md, schema, 2, "[10,3]", 6, 3, &res, &err) && res == NULL,
		  "truncate[5] is not fixed by truncate[10]");
	CHECK(iceberg_partition_project(md, schema, 2, "[30,7]", 6, 4, &res, &err) && res != NULL &&
		  strcmp(res, "[20,3]") == 0, "truncate[20] and bucket[4] of truncate[10], bucket[16]: %s",
		  res ? res : "(none)");
	io_free(res);
	CHECK(iceberg_partition_project(md, schema, 2, "[30,7]", 6, 5, &res, &err) && res == NULL,
		  "bucket[3] is not fixed by bucket[16]");
	rs = iceberg_partition_record_schema(md, schema, 0, &err);
	CHECK(rs != NULL && strstr(rs, "\"logicalType\":\"uuid\"") != NULL &&
		  strstr(rs, "\"name\":\"fixed_4\",\"size\":4") != NULL &&
		  strstr(rs, "\"size\":4,\"logicalType\":\"decimal\"") != NULL &&
		  strstr(rs, "timestamp-nanos") != NULL, "partition record of identity(uuid, fixed, ...): %s",
		  rs ? rs : err.message);
	io_free(rs);
	iceberg_schema_free(schema);
	iceberg_metadata_free(md);
}

/*
 * v3: the commit's new data manifests take the next row ids, each its added
 * and existing rows; delete manifests and absent ones take none
 * (https://iceberg.apache.org/spec/#snapshot-row-ids).
 */
static void
test_assign_row_ids(void)
{
	IcebergTableMetadata md;
	IcebergWriteTarget t;
	IcebergNewSnapshot snap;
	IcebergNewManifest added[2];
	IcebergNewManifest news[3];
	TmsError	err;

	memset(&md, 0, sizeof(md));
	memset(&t, 0, sizeof(t));
	memset(&snap, 0, sizeof(snap));
	memset(added, 0, sizeof(added));
	memset(news, 0, sizeof(news));
	md.format_version = 3;
	t.first_row_id = 6028;
	added[0].path = "m0";
	added[0].content = ICEBERG_MANIFEST_CONTENT_DATA;
	added[0].added_rows = 3002; /* added[1]: no manifest for that spec */
	news[0].path = "m1";
	news[0].content = ICEBERG_MANIFEST_CONTENT_DELETES;
	news[0].existing_rows = 9;
	news[2].path = "m2";
	news[2].content = ICEBERG_MANIFEST_CONTENT_DATA;
	news[2].existing_rows = 5;
	news[2].deleted_rows = 7;
	CHECK(compact_assign_row_ids(&md, added, 2, news, 3, &t, &snap, &err), "assign: %s",
		  err.message);
	CHECK(added[0].has_first_row_id && added[0].first_row_id == 6028 &&
		  !added[1].has_first_row_id && !news[0].has_first_row_id &&
		  !news[1].has_first_row_id && news[2].has_first_row_id &&
		  news[2].first_row_id == 6028 + 3002, "each data manifest its ids");
	CHECK(snap.row_lineage && snap.first_row_id == 6028 && snap.added_rows == 3002 + 5,
		  "the snapshot's first-row-id and added-rows");
	/* v2: nothing; v3 without next-row-id: refused */
	memset(&snap, 0, sizeof(snap));
	md.format_version = 2;
	CHECK(compact_assign_row_ids(&md, added, 2, news, 3, &t, &snap, &err) && !snap.row_lineage,
		  "v2: no row ids");
	md.format_version = 3;
	t.first_row_id = -1;
	CHECK(!compact_assign_row_ids(&md, added, 2, news, 3, &t, &snap, &err) &&
		  err.code == ICEBERG_ERR_MALFORMED, "no next-row-id");
	t.first_row_id = INT64_MAX - 10;
	CHECK(!compact_assign_row_ids(&md, added, 2, news, 3, &t, &snap, &err) &&
		  err.code == ICEBERG_ERR_MALFORMED, "row ids out of range");
}

/*
 * The civil dates of the transforms and the retention cutoffs: known days,
 * and a round trip over 800 years around 1970 and far from it.
 */
static void
test_civil_dates(void)
{
	static const struct
	{
		int64_t		y;
		int			m,
					d;
		int64_t		days;
	}			known[] = {
		{1970, 1, 1, 0}, {1969, 12, 31, -1}, {2000, 2, 29, 11016}, {2000, 3, 1, 11017},
		{1900, 3, 1, -25508}, {2024, 1, 1, 19723}, {1, 1, 1, -719162}, {-1, 12, 31, -719529},
	};
	int64_t		y;
	int			m,
				d,
				bad = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
	{
		io_civil_from_days(known[i].days, &y, &m, &d);
		CHECK(io_days_from_civil(known[i].y, known[i].m, known[i].d) == known[i].days &&
			  y == known[i].y && m == known[i].m && d == known[i].d,
			  "civil date of day %" PRId64, known[i].days);
	}
	for (int64_t base = -1000000000; base <= 1000000000; base += 1000000000)
		for (int64_t n = base - 146097; n < base + 146097; n++)
		{
			io_civil_from_days(n, &y, &m, &d);
			if (io_days_from_civil(y, m, d) != n || m < 1 || m > 12 || d < 1 || d > 31)
				bad++;
		}
	CHECK(bad == 0, "%d days do not round-trip through their civil date", bad);
	CHECK(iceberg_years_from_days(-1) == -1 && iceberg_months_from_days(-1) == -1 &&
		  iceberg_months_from_days(31) == 1, "years and months of days");
}

int
main(void)
{
	io_init();
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";
	test_civil_dates();
	test_filter();
	test_values();
	test_wire();
	test_metrics_modes();
	test_nested_schema();
	test_nested_modes();
	test_plan_fixture();
	test_plan_rewrite_all();
	test_sort_orders();
	test_sort_nested();
	test_removable();
	test_check_options();
	test_v1_inline();
	test_transforms();
	test_transforms_bytes();
	test_assign_row_ids();
	return unit_done();
}
