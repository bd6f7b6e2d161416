/*-------------------------------------------------------------------------
 *
 * fuzz_compact.c
 *	  libFuzzer target for what the compaction's plain-C half reads from
 *	  outside: the compaction helper's lines (the worker treats the helper
 *	  as untrusted), the worker's lines as the helper reads them, and the
 *	  user's where filter (src/iceberg/compact/compact_wire.h, compact.h).
 *
 * The first input byte selects the reader, the rest is its input:
 *	0: a helper line (iceberg_compact_message_parse), with a small JSON
 *	   budget (64 KiB) so that the budget's path is reached;
 *	1: a group line (iceberg_compact_job_parse);
 *	2: a hello line (iceberg_compact_hello_parse);
 *	3: a where filter, parsed, bound to a partitioned table and evaluated
 *	   on the partitions ["c1", 19000] and [null, null];
 *	4: a value as text, serialized as each type, lower and upper,
 *	   truncated to 3;
 *	5: a deletion's where (row_filter.h), bound to the table's schema,
 *	   judged on data files of partitions ["c1", 19000], [null, null] and
 *	   ["c\"1", 1] without metrics, and written as DuckDB SQL.
 * Each must end in a value (true, or false with its error set); ASan,
 * UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-compact (this file with src/iceberg and src/io).
 * Seed corpus: test/fuzz/corpus/compact/.
 *
 * test/fuzz/fuzz_compact.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_wire.h"
#include "iceberg/compact/row_filter.h"
#include "io/io.h"

static const char *metadata_json =
"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
" \"location\": \"s3://b/t\", \"last-sequence-number\": 0, \"last-updated-ms\": 1,"
" \"last-column-id\": 3, \"current-schema-id\": 0,"
" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
"  {\"id\": 1, \"name\": \"cat\", \"required\": false, \"type\": \"string\"},"
"  {\"id\": 2, \"name\": \"d\", \"required\": false, \"type\": \"date\"},"
"  {\"id\": 3, \"name\": \"amount\", \"required\": false, \"type\": \"decimal(10, 2)\"}]}],"
" \"default-spec-id\": 0, \"last-partition-id\": 1001,"
" \"partition-specs\": [{\"spec-id\": 0, \"fields\": ["
"  {\"name\": \"cat\", \"transform\": \"identity\", \"source-id\": 1, \"field-id\": 1000},"
"  {\"name\": \"d_day\", \"transform\": \"day\", \"source-id\": 2, \"field-id\": 1001}]}],"
" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";

static IcebergTableMetadata *md;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TmsError	err;
	char	   *text;
	size_t		len;

	if (size < 1)
		return 0;
	if (md == NULL)
	{
		io_init();
		if (!iceberg_metadata_parse(metadata_json, strlen(metadata_json), NULL, &md, &err))
			abort();
	}
	len = size - 1;
	text = io_malloc(len + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data + 1, len);
	text[len] = '\0';
	switch (data[0] % 6)
	{
		case 0:
			{
				IcebergCompactMessage m;

				if (iceberg_compact_message_parse(text, len, 64 * 1024, &m, &err))
					iceberg_compact_message_free(&m);
				else if (err.code == ICEBERG_OK)
					abort();
				break;
			}
		case 1:
			{
				IcebergCompactJob *job;

				if (iceberg_compact_job_parse(text, len, &job, &err))
					iceberg_compact_job_free(job);
				else if (err.code == ICEBERG_OK)
					abort();
				break;
			}
		case 2:
			{
				IcebergCompactHello h;

				if (iceberg_compact_hello_parse(text, len, &h, &err))
					iceberg_compact_hello_free(&h);
				else if (err.code == ICEBERG_OK)
					abort();
				break;
			}
		case 3:
			{
				IcebergPartitionFilter *f;

				if (iceberg_partition_filter_parse(text, &f, &err))
				{
					if (iceberg_partition_filter_bind(f, md, &err))
					{
						(void) iceberg_partition_filter_match(f, 0, "[\"c1\",19000]", 12);
						(void) iceberg_partition_filter_match(f, 0, "[null,null]", 11);
						(void) iceberg_partition_filter_match(f, 7, "[1]", 3);
					}
					else if (err.code == ICEBERG_OK)
						abort();
					iceberg_partition_filter_free(f);
				}
				else if (err.code == ICEBERG_OK)
					abort();
				break;
			}
		case 4:
			for (int t = ICEBERG_TYPE_BOOLEAN; t <= ICEBERG_TYPE_BINARY; t++)
				for (int upper = 0; upper < 2; upper++)
				{
					IcebergColumn c;
					uint8_t    *out;
					size_t		n;
					bool		oom;

					memset(&c, 0, sizeof(c));
					c.type = (IcebergTypeId) t;
					c.precision = 38;
					c.scale = 4;
					if (iceberg_value_serialize(&c, text, len, upper, 3, &out, &n, &oom))
						io_free(out);
				}
			break;
		case 5:
			{
				static const char *const parts[] = {"[\"c1\",19000]", "[null,null]",
				"[\"c\\\"1\",1]"};
				IcebergSchema *schema;
				IcebergRowFilter *f;

				if (!iceberg_schema_parse(md->current_schema_json, &schema, &err))
					abort();
				if (iceberg_row_filter_bind(text, schema, &f, &err))
				{
					IcebergManifestEntry e;
					char	   *sql;
					bool		by_part;

					for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
					{
						memset(&e, 0, sizeof(e));
						e.spec_id = 0;
						e.partition = parts[i];
						e.partition_len = strlen(parts[i]);
						e.record_count = 10;
						(void) iceberg_row_filter_classify(f, md, &e, &by_part);
					}
					if ((sql = iceberg_row_filter_sql(f, "d.c")) != NULL)
						io_free(sql);
					iceberg_row_filter_free(f);
				}
				else if (err.code == ICEBERG_OK)
					abort();
				iceberg_schema_free(schema);
				break;
			}
	}
	io_free(text);
	return 0;
}
