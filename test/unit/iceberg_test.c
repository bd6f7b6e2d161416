/*-------------------------------------------------------------------------
 *
 * iceberg_test.c
 *	  Unit tests of src/iceberg/ without a server: every real fixture
 *	  table and standalone file under test/fixtures/iceberg (counts
 *	  from each PROVENANCE.md), table metrics with delete matching, the
 *	  reachable-file walk, the DSL adapters, and malformed input of every
 *	  kind (truncation at every length, flipped bytes, wrong magic, bad
 *	  sync, absurd counts, bad JSON, missing fields).
 *
 * Built by "make unit" with the files of src/iceberg/ and src/io/ (the
 * layer reads through io's IoFileIO; one test reads fixtures through the
 * io layer's confined router, io_storage_fileio).  The fixtures are
 * taken from $ICEBERG_FIXTURES, else test/fixtures/iceberg relative
 * to the repository top (where the test runs).  The last line printed is
 * "N passed, M failed"; the exit status is non-zero when M > 0.
 *
 * test/unit/iceberg_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dsl/dsl.h"
#include "iceberg/iceberg.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;

/* Path of a fixture file in a static buffer (one at a time). */
static const char *
fx(const char *rel)
{
	static char buf[2][1024];
	static int	which;

	which ^= 1;
	snprintf(buf[which], sizeof(buf[which]), "%s/%s", fixtures, rel);
	return buf[which];
}

/* Read a whole fixture file; NULL on failure. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	unsigned char *buf;
	long		n;

	*len = 0;
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = io_malloc((size_t) n + 1);
	if (buf == NULL || fread(buf, 1, (size_t) n, f) != (size_t) n)
	{
		io_free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = (size_t) n;
	return buf;
}

/* ---------------------------------------------------------------------
 * Standalone metadata files
 * ---------------------------------------------------------------------
 */

static void
test_standalone_metadata(void)
{
	static const struct
	{
		const char *file;
		int			expect;
		int			fv;
		int			nsnapshots;
	}			cases[] = {
		{"apache-iceberg/TableMetadataPartitionStatisticsFiles.json", ICEBERG_OK, 2, 1},
		{"apache-iceberg/TableMetadataStatisticsFiles.json", ICEBERG_OK, 2, 1},
		{"apache-iceberg/TableMetadataUnsupportedVersion.json", ICEBERG_ERR_UNSUPPORTED, 0, 0},
		{"apache-iceberg/TableMetadataV1MissingSchemaType.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV1Valid.json", ICEBERG_OK, 1, 0},
		{"apache-iceberg/TableMetadataV2CurrentSchemaNotFound.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV2MissingLastPartitionId.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV2MissingPartitionSpecs.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV2MissingSchemas.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV2MissingSortOrder.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"apache-iceberg/TableMetadataV2Valid.json", ICEBERG_OK, 2, 2},
		{"apache-iceberg/TableMetadataV2ValidMinimal.json", ICEBERG_OK, 2, 0},
		{"apache-iceberg/TableMetadataV3ValidMinimal.json", ICEBERG_OK, 3, 0},
		{"iceberg-go/TableMetadataV2Valid.zstd.metadata.json", ICEBERG_ERR_UNSUPPORTED, 0, 0},
		{"iceberg-go/TableMetadataV2ValidMinimal.json", ICEBERG_OK, 2, 0},
		{"iceberg-go/TableMetadataV3WithPartitionStatistics.json", ICEBERG_OK, 3, 2},
		{"iceberg-rust/TableMetadataUnsupportedVersion.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"iceberg-rust/TableMetadataV1Compat.json", ICEBERG_OK, 1, 1},
		{"iceberg-rust/TableMetadataV1NoValidSchema.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"iceberg-rust/TableMetadataV1PartitionSpecsWithoutDefaultId.json", ICEBERG_OK, 1, 0},
		{"iceberg-rust/TableMetadataV1SchemasWithoutCurrentId.json", ICEBERG_OK, 1, 0},
		{"iceberg-rust/TableMetadataV2CurrentSchemaNotFound.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"iceberg-rust/TableMetadataV3ValidEncryption.json", ICEBERG_OK, 3, 1},
		{"iceberg-rust/avro_schema_manifest_entry.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"iceberg-rust/avro_schema_manifest_file_v1.json", ICEBERG_ERR_MALFORMED, 0, 0},
		{"iceberg-rust/avro_schema_manifest_file_v2.json", ICEBERG_ERR_MALFORMED, 0, 0},
		/* templates: structurally valid JSON metadata with {{ }} strings */
		{"iceberg-rust/example_empty_table_metadata_v2.json", ICEBERG_OK, 2, 0},
		{"iceberg-rust/example_table_metadata_v2.json", ICEBERG_OK, 2, 2},
		{"iceberg-rust/example_table_metadata_v2_deep_history.json", ICEBERG_OK, 2, 5},
		{"iceberg-rust/example_table_metadata_v2_partition_evolution.json", ICEBERG_OK, 2, 3},
	};
	IcebergFileIO io;
	size_t		i;

	iceberg_local_fileio(&io, NULL);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		rel[512];
		IcebergTableMetadata *md = NULL;
		TmsError	err;
		bool		ok;

		snprintf(rel, sizeof(rel), "standalone-metadata/%s", cases[i].file);
		ok = iceberg_metadata_read(&io, fx(rel), &md, &err);
		if (cases[i].expect == ICEBERG_OK)
		{
			CHECK(ok, "%s should parse: %s (%s)", cases[i].file, err.message, err.detail);
			if (ok)
			{
				CHECK(md->format_version == cases[i].fv, "%s: format version %d",
					  cases[i].file, md->format_version);
				CHECK(md->nsnapshots == cases[i].nsnapshots, "%s: %d snapshots",
					  cases[i].file, md->nsnapshots);
			}
		}
		else
		{
			CHECK(!ok && err.code == cases[i].expect && md == NULL,
				  "%s should fail with %s, got %s: %s", cases[i].file,
				  tms_error_code_name(cases[i].expect),
				  ok ? "success" : tms_error_code_name(err.code), err.message);
			CHECK(ok || err.message[0] != '\0', "%s: empty error message", cases[i].file);
		}
		iceberg_metadata_free(md);
	}
}

/* Details of specific standalone files. */
static void
test_metadata_details(void)
{
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;

	iceberg_local_fileio(&io, NULL);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/apache-iceberg/TableMetadataV2Valid.json"),
							  &md, &err))
	{
		const IcebergRef *main_ref = iceberg_metadata_ref(md, "main");

		CHECK(md->current_snapshot_id == INT64_C(3055729675574597004), "current snapshot");
		CHECK(md->last_sequence_number == 34, "last-sequence-number %lld",
			  (long long) md->last_sequence_number);
		CHECK(md->current_schema_id == 1 && md->nschemas == 2, "schemas");
		CHECK(md->nspecs == 1 && md->specs[0].nfields == 1 &&
			  md->specs[0].fields[0].field_id == 1000 &&
			  strcmp(md->specs[0].fields[0].transform, "identity") == 0, "spec");
		CHECK(main_ref != NULL && main_ref->snapshot_id == md->current_snapshot_id &&
			  main_ref->type == ICEBERG_REF_BRANCH, "synthesized main ref");
		CHECK(md->snapshots[1].parent_snapshot_id == md->snapshots[0].snapshot_id,
			  "parent id");
		CHECK(md->snapshots[0].parent_snapshot_id == -1, "no parent");
		CHECK(md->snapshots[1].sequence_number == 1 &&
			  strcmp(md->snapshots[1].manifest_list, "s3://a/b/2.avro") == 0,
			  "snapshot 2");
		CHECK(md->snapshots[0].operation != NULL &&
			  strcmp(md->snapshots[0].operation, "append") == 0, "operation");
		CHECK(md->nsnapshot_log == 2 && md->nmetadata_log == 0, "logs %d %d",
			  md->nsnapshot_log, md->nmetadata_log);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "TableMetadataV2Valid: %s", err.message);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/apache-iceberg/TableMetadataStatisticsFiles.json"),
							  &md, &err))
	{
		CHECK(md->nstatistics == 1 && md->statistics[0].file_size_in_bytes > 0 &&
			  md->statistics[0].file_footer_size_in_bytes > 0 &&
			  strcmp(md->statistics[0].path, "s3://a/b/stats.puffin") == 0 &&
			  md->statistics[0].file_size_in_bytes == 413,
			  "statistics file %d", md->nstatistics);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "TableMetadataStatisticsFiles: %s", err.message);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/apache-iceberg/TableMetadataPartitionStatisticsFiles.json"),
							  &md, &err))
	{
		CHECK(md->npartition_statistics == 1 &&
			  md->partition_statistics[0].file_footer_size_in_bytes == -1,
			  "partition statistics %d", md->npartition_statistics);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "TableMetadataPartitionStatisticsFiles: %s", err.message);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/iceberg-rust/TableMetadataV1PartitionSpecsWithoutDefaultId.json"),
							  &md, &err))
	{
		CHECK(md->default_spec_id == 2, "default spec id falls back to the largest: %d",
			  md->default_spec_id);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "V1PartitionSpecsWithoutDefaultId: %s", err.message);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/iceberg-rust/TableMetadataV1Compat.json"),
							  &md, &err))
	{
		CHECK(md->nstatistics == 0 || md->statistics != NULL, "v1 compat statistics");
		CHECK(md->nmetadata_log == 1, "v1 compat metadata log %d", md->nmetadata_log);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "V1Compat: %s", err.message);

	if (iceberg_metadata_read(&io, fx("standalone-metadata/iceberg-go/TableMetadataV3WithPartitionStatistics.json"),
							  &md, &err))
	{
		CHECK(md->next_row_id >= 0, "v3 next-row-id");
		CHECK(md->npartition_statistics >= 1, "v3 partition statistics");
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "V3WithPartitionStatistics: %s", err.message);
}

/* Malformed JSON and hand-made metadata. */
static void
test_metadata_malformed(void)
{
	static const struct
	{
		const char *json;
		int			code;
	}			cases[] = {
		{"", ICEBERG_ERR_MALFORMED},
		{"{", ICEBERG_ERR_MALFORMED},
		{"[]", ICEBERG_ERR_MALFORMED},
		{"null", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": \"2\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 4}", ICEBERG_ERR_UNSUPPORTED},
		{"{\"format-version\": 1, \"location\": 5}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 1,"
			" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
		" \"snapshots\": {}}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 1,"
			" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
		" \"current-snapshot-id\": 7, \"snapshots\": []}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 1,"
			" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
		" \"snapshots\": [{\"snapshot-id\": 1, \"timestamp-ms\": 2}]}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 1,"
			" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
		" \"refs\": {\"main\": {\"snapshot-id\": 1, \"type\": \"trunk\"}}}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 99999999999,"
			" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": []}",
		ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 99999999999999999999999}", ICEBERG_ERR_MALFORMED},
	};
	const char *minimal_v1 =
	"{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": 1, \"last-column-id\": 1,"
	" \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
	" \"snapshots\": [{\"snapshot-id\": 1, \"timestamp-ms\": 2, \"manifests\": [\"a\", \"b\"]}],"
	" \"current-snapshot-id\": 1}";
	IcebergLimits limits;
	IcebergTableMetadata *md;
	TmsError	err;
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		bool		ok = iceberg_metadata_parse(cases[i].json, strlen(cases[i].json),
												NULL, &md, &err);

		CHECK(!ok && err.code == cases[i].code, "case %zu should fail with %s, got %s",
			  i, tms_error_code_name(cases[i].code),
			  ok ? "success" : tms_error_code_name(err.code));
		if (ok)
			iceberg_metadata_free(md);
	}
	CHECK(iceberg_metadata_parse(minimal_v1, strlen(minimal_v1), NULL, &md, &err),
		  "minimal v1: %s", err.message);
	if (err.code == ICEBERG_OK)
	{
		CHECK(md->nsnapshots == 1 && md->snapshots[0].nmanifests == 2 &&
			  md->snapshots[0].manifest_list == NULL, "inline manifests");
		iceberg_metadata_free(md);
	}

	/* limits: too large, too many elements */
	memset(&limits, 0, sizeof(limits));
	limits.max_metadata_bytes = 10;
	CHECK(!iceberg_metadata_parse(minimal_v1, strlen(minimal_v1), &limits, &md, &err) &&
		  err.code == ICEBERG_ERR_LIMIT, "size limit");
	memset(&limits, 0, sizeof(limits));
	limits.max_collection_items = 1;
	CHECK(!iceberg_metadata_parse(minimal_v1, strlen(minimal_v1), &limits, &md, &err) &&
		  err.code == ICEBERG_ERR_LIMIT, "collection limit: %s",
		  tms_error_code_name(err.code));

	/* a gzip bomb is capped */
	{
		size_t		len;
		unsigned char *gz = slurp(fx("spark-v1-gzip-metadata/metadata/v2.gz.metadata.json"), &len);

		CHECK(gz != NULL, "read gzip fixture");
		if (gz != NULL)
		{
			memset(&limits, 0, sizeof(limits));
			limits.max_metadata_bytes = 100;
			CHECK(!iceberg_metadata_parse(gz, len, &limits, &md, &err) &&
				  err.code == ICEBERG_ERR_LIMIT, "inflate cap");
			/* truncated gzip */
			CHECK(!iceberg_metadata_parse(gz, len / 2, NULL, &md, &err) &&
				  err.code == ICEBERG_ERR_MALFORMED, "truncated gzip: %s",
				  tms_error_code_name(err.code));
			io_free(gz);
		}
	}

	/* missing file: I/O error */
	{
		IcebergFileIO io;

		iceberg_local_fileio(&io, NULL);
		CHECK(!iceberg_metadata_read(&io, "/nonexistent/metadata.json", &md, &err) &&
			  err.code == ICEBERG_ERR_IO, "missing file");
		/* the IoFileIO's own code travels with the iceberg error */
		CHECK(err.io_code == IO_ERR_NOT_FOUND, "missing file: io_code %s",
			  tms_error_code_name(err.io_code));
		CHECK(!iceberg_metadata_parse("{", 1, NULL, &md, &err) &&
			  err.io_code == IO_OK, "parse error: io_code stays IO_OK");
	}
}

/* ---------------------------------------------------------------------
 * Real fixture tables
 * ---------------------------------------------------------------------
 */

typedef struct TableCase
{
	const char *folder;
	const char *prefix;
	const char *metadata;		/* current metadata, relative to folder */
	int			format_version;
	int			snapshots;
	int			manifests;		/* distinct, all snapshots */
	int			data_files;		/* distinct, all snapshots */
	int			pos_files;
	int			eq_files;
	int			deleted_entries;	/* status DELETED, all manifests */
	/* current snapshot metrics */
	int64_t		cur_manifests;
	int64_t		cur_data_files;
	int64_t		cur_data_size;
	int64_t		cur_data_records;
	int64_t		cur_pos_files;
	int64_t		cur_eq_files;
	int64_t		with_deletes;
	int64_t		with_pos;
	int64_t		with_eq;
} TableCase;

static const TableCase tables[] = {
	{"spark-v2-mor-posdeletes", "s3a://hyperparam-iceberg/spark/bunnies",
		"metadata/v5.metadata.json", 2, 3, 4, 2, 1, 0, 1,
	3, 1, 3560, 20, 1, 0, 0, 0, 0},
	{"spark-v2-partitioned-bucket-identity", "s3a://hyperparam-iceberg/spark/rename_column",
		"metadata/v3.metadata.json", 2, 1, 1, 3, 0, 0, 0,
	1, 3, 1353 + 1368 + 1430, 4, 0, 0, 0, 0, 0},
	{"java-v2-partitioned-eqdeletes",
		"data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
		"metadata/v6.metadata.json", 2, 5, 5, 6, 0, 3, 0,
	5, 6, 892 * 5 + 891, 6, 0, 3, 3, 0, 3},
	{"pyiceberg-v1-overwrite", "data/persistent/iceberg_v1_repro/repro/merch_v1",
		"metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json", 1, 3, 4, 4, 0, 0, 2,
	2, 2, 2640, 4, 0, 0, 0, 0, 0},
	{"pyiceberg-v2-partitioned-nullcodec",
		"file://data/persistent/map_stats/default.db/map_stats",
		"metadata/00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json", 2, 2, 2, 2, 0, 0, 0,
	2, 2, 4520, 2, 0, 0, 0, 0, 0},
	{"spark-v1-gzip-metadata", "lineitem_iceberg_gz",
		"metadata/v2.gz.metadata.json", 1, 1, 1, 1, 0, 0, 0,
	1, 1, 2558520, 111968, 0, 0, 0, 0, 0},
	{"spark-v1-legacy-manifests-field",
		"data/persistent/iceberg_v1_deprecated/default/legacy_v1",
		"metadata/v2.metadata.json", 1, 1, 1, 2, 0, 0, 0,
	1, 2, 935 + 878, 3, 0, 0, 0, 0, 0},
};

/* Counting walk callback: distinct paths per kind. */
typedef struct WalkCount
{
	int			n[8];
	int			deleted;
	char	   *seen[256];
	int			nseen;
	bool		missing_file;
	const IcebergFileIO *io;
} WalkCount;

static bool
count_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	WalkCount  *wc = arg;
	int			i;
	char		key[1100];

	(void) err;
	if (f->status == ICEBERG_STATUS_DELETED)
		wc->deleted++;
	snprintf(key, sizeof(key), "%d:%s", (int) f->kind, f->path);
	for (i = 0; i < wc->nseen; i++)
		if (strcmp(wc->seen[i], key) == 0)
			return true;
	if (wc->nseen < 256)
		wc->seen[wc->nseen++] = io_strdup(key);
	wc->n[f->kind]++;
	/* every reached file exists once the prefix is mapped */
	if (wc->io != NULL && f->kind != ICEBERG_FILE_METADATA)
	{
		TmsError	e2;
		char	   *data;
		size_t		len;

		if (!iceberg_read_all(wc->io, f->path, INT64_C(1) << 30, &data, &len, &e2))
		{
			printf("  missing: %s (%s)\n", f->path, e2.message);
			wc->missing_file = true;
		}
		else
		{
			if (f->size >= 0 && (int64_t) len != f->size)
			{
				printf("  size mismatch: %s %zu != %lld\n", f->path, len,
					   (long long) f->size);
				wc->missing_file = true;
			}
			io_free(data);
		}
	}
	return true;
}

static void
free_walk_count(WalkCount *wc)
{
	int			i;

	for (i = 0; i < wc->nseen; i++)
		io_free(wc->seen[i]);
}

/* countDataFiles-style callback. */
typedef struct FileTally
{
	int64_t		n,
				size,
				with_deletes;
} FileTally;

static bool
tally_cb(void *arg, const IcebergDataFileInfo *f, TmsError *err)
{
	FileTally  *t = arg;

	(void) err;
	t->n++;
	t->size += f->size;
	if (f->has_deletes)
		t->with_deletes++;
	return true;
}

/*
 * The identity scan (metadata_identity.c): the same identity as the full
 * parse on every fixture file, plain and gzip; escapes decoded; the last
 * duplicate wins (as in jansson); syntax anywhere is checked, the history
 * is not validated.
 */
static void
identity_agrees(const char *path)
{
	size_t		len;
	unsigned char *data = slurp(path, &len);
	IcebergTableMetadata *md;
	IcebergTableIdentity id;
	TmsError	err;

	CHECK(data != NULL, "read %s", path);
	if (data == NULL)
		return;
	CHECK(iceberg_metadata_parse(data, len, NULL, &md, &err), "parse %s: %s", path,
		  err.message);
	CHECK(iceberg_metadata_identity(data, len, NULL, &id, &err), "identity %s: %s", path,
		  err.message);
	/* read from the file, the head only where it can (gzip whole) */
	{
		IcebergFileIO io;
		IcebergTableIdentity rid;

		iceberg_local_fileio(&io, NULL);
		CHECK(iceberg_metadata_read_identity(&io, path, &rid, &err) &&
			  rid.location && id.location && strcmp(rid.location, id.location) == 0 &&
			  rid.format_version == id.format_version &&
			  (rid.table_uuid == NULL) == (id.table_uuid == NULL) &&
			  (rid.gc_enabled == NULL) == (id.gc_enabled == NULL),
			  "read identity of %s: %s", path, err.message);
		iceberg_table_identity_free(&rid);
	}
	if (md != NULL && id.location != NULL)
	{
		const char *gc = iceberg_metadata_property(md, "gc.enabled");

		CHECK(id.format_version == md->format_version &&
			  strcmp(id.location, md->location) == 0 &&
			  (id.table_uuid == NULL) == (md->table_uuid == NULL) &&
			  (id.table_uuid == NULL || strcmp(id.table_uuid, md->table_uuid) == 0) &&
			  (id.gc_enabled == NULL) == (gc == NULL),
			  "identity of %s agrees with the full parse", path);
	}
	iceberg_metadata_free(md);
	iceberg_table_identity_free(&id);
	io_free(data);
}

static void
test_metadata_identity(void)
{
	static const struct
	{
		const char *json;
		int			code;
	}			bad[] = {
		{"", ICEBERG_ERR_MALFORMED},
		{"[]", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 2, \"location\": \"x\"}", ICEBERG_ERR_MALFORMED},	/* no uuid */
		{"{\"format-version\": 1}", ICEBERG_ERR_MALFORMED}, /* no location */
		{"{\"location\": \"x\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 2.0, \"table-uuid\": \"u\", \"location\": \"x\"}",
		ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": \"1\", \"location\": \"x\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 4, \"table-uuid\": \"u\", \"location\": \"x\"}",
		ICEBERG_ERR_UNSUPPORTED},
		{"{\"format-version\": 1, \"location\": 5}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"properties\": []}",
		ICEBERG_ERR_MALFORMED},
		/* syntax errors in members that are skipped */
		{"{\"format-version\": 1, \"location\": \"x\", \"snapshots\": [1,]}",
		ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"snapshots\": [{\"a\" 1}]}",
		ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": 01}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": 1.}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": tru}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": \"a\tb\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": \"\\q\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\\u0000y\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"\\ud800\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"\\udc00\"}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\"", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\"} {}", ICEBERG_ERR_MALFORMED},
		{"{\"format-version\": 1, \"location\": \"x\", \"s\": \"unterminated}",
		ICEBERG_ERR_MALFORMED},
	};
	const char *good =
	"{\"format-version\": 2, \"table-uuid\": \"first\", \"location\": \"s3://b/\\u00e9\\/t\","
	" \"snapshots\": [{\"snapshot-id\": \"not checked\", \"x\": [1, -2.5e3, true, false, null, {}]}],"
	" \"properties\": {\"a\": \"b\", \"gc.enabled\": \"true\", \"gc.enabled\": \"FALSE\"},"
	" \"table-uuid\": \"\\ud83d\\ude00\"}";
	IcebergTableIdentity id;
	IcebergLimits limits;
	TmsError	err;
	char	   *deep;
	size_t		i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		bool		ok = iceberg_metadata_identity(bad[i].json, strlen(bad[i].json), NULL,
												   &id, &err);

		CHECK(!ok && err.code == bad[i].code, "identity case %zu should fail with %s, got %s",
			  i, tms_error_code_name(bad[i].code),
			  ok ? "success" : tms_error_code_name(err.code));
		if (ok)
			iceberg_table_identity_free(&id);
	}
	CHECK(iceberg_metadata_identity(good, strlen(good), NULL, &id, &err), "good: %s",
		  err.message);
	if (err.code == ICEBERG_OK)
	{
		CHECK(id.format_version == 2 && strcmp(id.location, "s3://b/\xc3\xa9/t") == 0 &&
			  strcmp(id.table_uuid, "\xf0\x9f\x98\x80") == 0 &&
			  strcmp(id.gc_enabled, "FALSE") == 0, "decoded identity, last duplicate wins");
		iceberg_table_identity_free(&id);
	}
	/* a non-string gc.enabled comes as its JSON text; v1 needs no uuid */
	{
		const char *v1 = "{\"location\": \"x\", \"format-version\": 1,"
		" \"properties\": {\"gc.enabled\": false}}";

		CHECK(iceberg_metadata_identity(v1, strlen(v1), NULL, &id, &err) &&
			  id.table_uuid == NULL && strcmp(id.gc_enabled, "false") == 0,
			  "non-string gc.enabled: %s", err.message);
		iceberg_table_identity_free(&id);
	}
	/* nesting is bounded, not recursed without limit */
	deep = malloc(100000);
	if (deep != NULL)
	{
		size_t		n = 0;

		n += sprintf(deep, "{\"format-version\": 1, \"location\": \"x\", \"s\": ");
		for (i = 0; i < 5000; i++)
			deep[n++] = '[';
		for (i = 0; i < 5000; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		CHECK(!iceberg_metadata_identity(deep, n, NULL, &id, &err) &&
			  err.code == ICEBERG_ERR_MALFORMED, "deep nesting refused");
		free(deep);
	}
	/* the size cap; zstd */
	memset(&limits, 0, sizeof(limits));
	limits.max_metadata_bytes = 10;
	CHECK(!iceberg_metadata_identity(good, strlen(good), &limits, &id, &err) &&
		  err.code == ICEBERG_ERR_LIMIT, "size limit");
	CHECK(!iceberg_metadata_identity("\x28\xb5\x2f\xfd....", 8, NULL, &id, &err) &&
		  err.code == ICEBERG_ERR_UNSUPPORTED, "zstd");
	/* the fixtures: the same identity as the full parse, gzip included */
	identity_agrees(fx("spark-v1-gzip-metadata/metadata/v2.gz.metadata.json"));
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
	{
		char		path[1200];

		snprintf(path, sizeof(path), "%s/%s", fx(tables[i].folder), tables[i].metadata);
		identity_agrees(path);
	}
}

/*
 * iceberg_metadata_read_identity reads a file's head: an IoFileIO over a
 * buffer that counts the bytes it serves and says nothing of the size.
 */
typedef struct MemFile
{
	const char *data;
	size_t		len;
	size_t		pos;
	size_t		served;
} MemFile;

static void *
mem_open(void *arg, const char *path, int64_t *size_out, TmsError *err)
{
	MemFile    *m = arg;

	(void) path;
	(void) err;
	m->pos = 0;
	m->served = 0;
	*size_out = -1;
	return m;
}

static int64_t
mem_read(void *arg, void *handle, void *buf, size_t len, TmsError *err)
{
	MemFile    *m = handle;
	size_t		n = m->len - m->pos;

	(void) arg;
	(void) err;
	if (n > len)
		n = len;
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	m->served += n;
	return (int64_t) n;
}

static void
mem_close(void *arg, void *handle)
{
	(void) arg;
	(void) handle;
}

/*
 * A metadata document: the identity (its location "s3://b/" and then loc),
 * the members "before" (raw JSON, may be empty) after it, the properties
 * unless props_last, then nsnap snapshots of about 200 bytes, the
 * properties if props_last, and tail (raw JSON).  The caller frees it.
 */
static char *
head_doc(const char *loc, const char *before, bool props_last, int nsnap,
		 const char *tail, size_t *len)
{
	size_t		cap = strlen(loc) + strlen(before) + strlen(tail) + 1024 + (size_t) nsnap * 256;
	char	   *d = malloc(cap);
	size_t		n;
	const char *props = "\"properties\": {\"a\": \"b\", \"gc.enabled\": \"false\"}";

	if (d == NULL)
		return NULL;
	n = snprintf(d, cap, "{\"format-version\": 2, \"table-uuid\": \"u-1\","
				 " \"location\": \"s3://b/%s\", %s%s%s \"snapshots\": [",
				 loc, before, props_last ? "" : props, props_last ? "" : ",");
	for (int i = 0; i < nsnap; i++)
		n += snprintf(d + n, cap - n, "%s{\"snapshot-id\": %d, \"timestamp-ms\": 1700000000000,"
					  " \"summary\": {\"operation\": \"append\", \"added-data-files\": \"1\"},"
					  " \"manifest-list\": \"s3://b/t/metadata/snap-%d-1-0b4c.avro\","
					  " \"schema-id\": 0, \"sequence-number\": %d}",
					  i ? ", " : "", i + 1, i + 1, i + 1);
	n += snprintf(d + n, cap - n, "]%s%s%s}", props_last ? ", " : "",
				  props_last ? props : "", tail);
	*len = n;
	return d;
}

static void
test_metadata_read_identity_head(void)
{
	MemFile		m;
	IcebergFileIO io;
	IcebergTableIdentity id;
	IcebergTableMetadata *md;
	TmsError	err;
	char	   *d;
	char	   *pad;
	size_t		len;

	memset(&io, 0, sizeof(io));
	io.io.arg = &m;
	io.io.open = mem_open;
	io.io.read = mem_read;
	io.io.close = mem_close;

	/* 5,000 snapshots (about 1 MB): the first 64 KB are read */
	d = head_doc("t", "", false, 5000, "", &len);
	m.data = d;
	m.len = len;
	CHECK(d && iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  strcmp(id.location, "s3://b/t") == 0 && strcmp(id.table_uuid, "u-1") == 0 &&
		  strcmp(id.gc_enabled, "false") == 0,
		  "head identity: %s", err.message);
	CHECK(m.served == 64 * 1024 && len > 16 * m.served,
		  "the head only: %zu of %zu bytes", m.served, len);
	iceberg_table_identity_free(&id);
	free(d);

	/*
	 * The history after the identity is neither read nor checked: a file cut
	 * short passes here, and the whole parse (the purge job's, before it
	 * drops the table) refuses it.
	 */
	d = head_doc("t", "", false, 5000, "", &len);
	m.data = d;
	m.len = len - 5000;
	CHECK(d && iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  m.served < m.len / 8, "broken history, identity from the head: %s", err.message);
	iceberg_table_identity_free(&id);
	CHECK(d && !iceberg_metadata_parse(d, len - 5000, NULL, &md, &err) &&
		  err.code == ICEBERG_ERR_MALFORMED, "the whole parse refuses the broken history");
	free(d);

	/* the identity across fetches: 300 KB of schemas, a location of escapes */
	pad = malloc(300 * 1024 + 64);
	if (pad != NULL)
	{
		char	   *loc = malloc(70 * 6 * 1024 + 1);
		size_t		n = (size_t) sprintf(pad, "\"schemas\": [");

		for (int i = 0; n < 300 * 1024; i++)
			n += (size_t) sprintf(pad + n, "%s{\"id\": %d}", i ? ", " : "", i);
		sprintf(pad + n, "],");
		for (int i = 0; loc && i < 70 * 1024; i++)
			memcpy(loc + 6 * i, "\\u00e9", 7);
		d = loc ? head_doc(loc, pad, false, 5000, "", &len) : NULL;
		m.data = d;
		m.len = d ? len : 0;
		CHECK(d && iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
			  strlen(id.location) == 7 + 2 * 70 * 1024 &&
			  strcmp(id.gc_enabled, "false") == 0 && m.served < len,
			  "identity across fetches: %s (%zu of %zu bytes)", err.message, m.served, len);
		iceberg_table_identity_free(&id);
		free(d);
		free(loc);
	}

	/* what the head cannot settle, the whole file decides */
	d = head_doc("t", "", true, 2000, "", &len);
	m.data = d;
	m.len = len;
	CHECK(d && iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  strcmp(id.gc_enabled, "false") == 0 && m.served == len,
		  "properties after the history: read whole: %s", err.message);
	iceberg_table_identity_free(&id);
	free(d);

	/*
	 * A duplicate after the history is not seen by the head (the whole scan
	 * and parse take the last one): the purge job's check compares the
	 * location it parses, whole, before the drop.
	 */
	d = head_doc("t", "", false, 2000, ", \"location\": \"s3://b/last\"", &len);
	m.data = d;
	m.len = len;
	CHECK(d && iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  strcmp(id.location, "s3://b/t") == 0 && m.served < len,
		  "the head's location: %s", err.message);
	iceberg_table_identity_free(&id);
	CHECK(d && iceberg_metadata_identity(d, len, NULL, &id, &err) &&
		  strcmp(id.location, "s3://b/last") == 0, "the whole scan's: %s", err.message);
	iceberg_table_identity_free(&id);
	free(d);
	d = head_doc("t", "\"schemas\": [1,],", false, 2000, "", &len);
	m.data = d;
	m.len = len;
	CHECK(d && !iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  err.code == ICEBERG_ERR_MALFORMED && m.served == len &&
		  strstr(err.detail, "m.json") != NULL,
		  "a syntax error in the head is refused as the whole scan does: %s", err.detail);
	free(d);
	d = head_doc("t", "\"format-version\": 9,", false, 2000, "", &len);
	m.data = d;
	m.len = len;
	CHECK(d && !iceberg_metadata_read_identity(&io, "m.json", &id, &err) &&
		  err.code == ICEBERG_ERR_UNSUPPORTED, "a bad identity in the head is refused");
	free(d);
	free(pad);
}

static void
test_fixture_table(const TableCase *tc)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;
	char		folder[1024];
	char		mdpath[1200];
	WalkCount	wc;
	IcebergTableMetrics m;
	FileTally	tally;

	snprintf(folder, sizeof(folder), "%s/%s", fixtures, tc->folder);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = tc->prefix;
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(mdpath, sizeof(mdpath), "%s/%s", folder, tc->metadata);
	if (!iceberg_metadata_read(&io, mdpath, &md, &err))
	{
		CHECK(false, "%s: metadata: %s (%s)", tc->folder, err.message, err.detail);
		return;
	}
	CHECK(md->format_version == tc->format_version, "%s: format version %d",
		  tc->folder, md->format_version);
	CHECK(md->nsnapshots == tc->snapshots, "%s: %d snapshots", tc->folder,
		  md->nsnapshots);

	/* everything, deleted entries included: PROVENANCE counts */
	memset(&wc, 0, sizeof(wc));
	wc.io = &io;
	CHECK(iceberg_walk(&io, md, mdpath, NULL, -1, ICEBERG_WALK_PURGE, count_cb, &wc, &err),
		  "%s: walk: %s (%s)", tc->folder, err.message, err.detail);
	CHECK(wc.n[ICEBERG_FILE_MANIFEST] == tc->manifests, "%s: %d manifests",
		  tc->folder, wc.n[ICEBERG_FILE_MANIFEST]);
	CHECK(wc.n[ICEBERG_FILE_DATA] == tc->data_files, "%s: %d data files",
		  tc->folder, wc.n[ICEBERG_FILE_DATA]);
	CHECK(wc.n[ICEBERG_FILE_POSITION_DELETES] == tc->pos_files,
		  "%s: %d position delete files", tc->folder, wc.n[ICEBERG_FILE_POSITION_DELETES]);
	CHECK(wc.n[ICEBERG_FILE_EQUALITY_DELETES] == tc->eq_files,
		  "%s: %d equality delete files", tc->folder, wc.n[ICEBERG_FILE_EQUALITY_DELETES]);
	CHECK(wc.deleted == tc->deleted_entries, "%s: %d DELETED entries", tc->folder,
		  wc.deleted);
	CHECK(wc.n[ICEBERG_FILE_METADATA] == 1 + md->nmetadata_log, "%s: metadata files",
		  tc->folder);
	CHECK(wc.n[ICEBERG_FILE_MANIFEST_LIST] ==
		  (md->snapshots[0].manifest_list ? tc->snapshots : 0),
		  "%s: %d manifest lists", tc->folder, wc.n[ICEBERG_FILE_MANIFEST_LIST]);
	CHECK(!wc.missing_file, "%s: every reached file exists with its size", tc->folder);
	free_walk_count(&wc);

	/* live entries only: no DELETED status reported */
	memset(&wc, 0, sizeof(wc));
	CHECK(iceberg_walk(&io, md, NULL, NULL, -1, ICEBERG_WALK_ALL, count_cb, &wc, &err),
		  "%s: live walk: %s", tc->folder, err.message);
	CHECK(wc.deleted == 0, "%s: live walk reports no DELETED entries", tc->folder);
	free_walk_count(&wc);

	/* metrics at every level */
	CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_METADATA,
								md->last_updated_ms + 1000, NULL, NULL, &m, &err),
		  "%s: metadata metrics", tc->folder);
	CHECK(m.snapshots == tc->snapshots && m.time_since_last_update_ms == 1000 &&
		  m.manifests == 0 && m.data_files == 0, "%s: metadata level", tc->folder);
	CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_MANIFEST_LIST, 0, NULL,
								NULL, &m, &err) && m.manifests == tc->cur_manifests &&
		  m.data_files == 0,
		  "%s: manifests %lld", tc->folder, (long long) m.manifests);
	CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_MANIFESTS, 0, NULL, NULL,
								&m, &err), "%s: manifests level: %s", tc->folder, err.message);
	CHECK(m.data_files == tc->cur_data_files && m.data_files_size == tc->cur_data_size &&
		  m.data_records == tc->cur_data_records, "%s: data %lld / %lld / %lld",
		  tc->folder, (long long) m.data_files, (long long) m.data_files_size,
		  (long long) m.data_records);
	CHECK(m.position_delete_files == tc->cur_pos_files &&
		  m.equality_delete_files == tc->cur_eq_files, "%s: deletes %lld / %lld",
		  tc->folder, (long long) m.position_delete_files,
		  (long long) m.equality_delete_files);
	CHECK(m.avg_data_file_size * (double) m.data_files == (double) m.data_files_size,
		  "%s: avgDataFileSize", tc->folder);
	CHECK(m.data_files_with_deletes == 0, "%s: no matching below DELETES", tc->folder);
	memset(&tally, 0, sizeof(tally));
	CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_DELETES, 0, tally_cb, &tally,
								&m, &err), "%s: deletes level: %s", tc->folder, err.message);
	CHECK(m.data_files_with_deletes == tc->with_deletes &&
		  m.data_files_with_position_deletes == tc->with_pos &&
		  m.data_files_with_equality_deletes == tc->with_eq,
		  "%s: with deletes %lld / pos %lld / eq %lld", tc->folder,
		  (long long) m.data_files_with_deletes,
		  (long long) m.data_files_with_position_deletes,
		  (long long) m.data_files_with_equality_deletes);
	CHECK(tally.n == tc->cur_data_files && tally.size == tc->cur_data_size &&
		  tally.with_deletes == tc->with_deletes, "%s: file stream", tc->folder);

	/* the pull stream agrees */
	{
		IcebergDataFileIter *it;
		const IcebergDataFileInfo *f;
		int64_t		n = 0,
					wd = 0;
		int			rc = -1;

		if (iceberg_data_files_open(&io, md, true, &it, &err))
		{
			while ((rc = iceberg_data_files_next(it, &f, &err)) == 1)
			{
				n++;
				wd += f->has_deletes;
			}
			iceberg_data_files_close(it);
		}
		CHECK(rc == 0 && n == tc->cur_data_files && wd == tc->with_deletes,
			  "%s: pull stream %lld files", tc->folder, (long long) n);
	}
	iceberg_metadata_free(md);
}

/* Extra per-table facts the counts do not cover. */
static void
test_fixture_details(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	IcebergManifestReader *mr;
	const IcebergManifestEntry *e;
	char		folder[1024];

	/* bucket/identity partitions with a null, rendered canonically */
	snprintf(folder, sizeof(folder), "%s/spark-v2-partitioned-bucket-identity", fixtures);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = "s3a://hyperparam-iceberg/spark/rename_column";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	if (iceberg_metadata_read(&io, "s3a://hyperparam-iceberg/spark/rename_column/metadata/v3.metadata.json",
							  &md, &err))
	{
		int			found = 0;

		CHECK(md->specs[0].nfields == 2 &&
			  strcmp(md->specs[0].fields[0].transform, "bucket[4]") == 0, "bucket spec");
		if (iceberg_manifest_list_open(&io, md, iceberg_metadata_current_snapshot(md), &lr, &err))
		{
			if (iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
				iceberg_manifest_open(&io, mf, 2, ICEBERG_READ_PARTITION, &mr, &err))
			{
				while (iceberg_manifest_next(mr, &e, &err) == 1)
				{
					if (strcmp(e->partition, "[3,null]") == 0 && strstr(e->file_path, "date=null"))
						found++;
					if (strcmp(e->partition, "[2,18994]") == 0 && strstr(e->file_path, "2022-01-02"))
						found++;
					if (strcmp(e->partition, "[0,18993]") == 0 && strstr(e->file_path, "2022-01-01"))
						found++;
					CHECK(e->partition_hash != 0 && e->spec_id == 0, "partition hash");
				}
				iceberg_manifest_close(mr);
			}
			iceberg_manifest_list_close(lr);
		}
		CHECK(found == 3, "partition tuples with a null: %d of 3", found);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "bucket-identity metadata: %s", err.message);

	/* equality ids, including the two-column key */
	snprintf(folder, sizeof(folder), "%s/java-v2-partitioned-eqdeletes", fixtures);
	fs.maps[0].from = "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned";
	fs.maps[0].to = folder;
	if (iceberg_metadata_read(&io, fx("java-v2-partitioned-eqdeletes/metadata/v6.metadata.json"),
							  &md, &err))
	{
		int			two = 0,
					one = 0;

		if (iceberg_manifest_list_open(&io, md, iceberg_metadata_current_snapshot(md), &lr, &err))
		{
			while (iceberg_manifest_list_next(lr, &mf, &err) == 1)
			{
				if (mf->content != ICEBERG_MANIFEST_CONTENT_DELETES)
					continue;
				if (!iceberg_manifest_open(&io, mf, 2, 0, &mr, &err))
					continue;
				CHECK(iceberg_manifest_content(mr) == ICEBERG_MANIFEST_CONTENT_DELETES,
					  "delete manifest header");
				while (iceberg_manifest_next(mr, &e, &err) == 1)
				{
					CHECK(e->content == ICEBERG_CONTENT_EQUALITY_DELETES, "eq content");
					if (e->nequality_ids == 2 && e->equality_ids[0] == 2 &&
						e->equality_ids[1] == 1)
						two++;
					if (e->nequality_ids == 1 && e->equality_ids[0] == 2)
						one++;
					CHECK(e->sequence_number == mf->sequence_number,
						  "inherited sequence number");
				}
				iceberg_manifest_close(mr);
			}
			iceberg_manifest_list_close(lr);
		}
		CHECK(two == 1 && one == 2, "equality ids [2,1] x1 and [2] x2: %d %d", two, one);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "eqdeletes metadata: %s", err.message);

	/* v1 inline manifests: spec id from the manifest header */
	snprintf(folder, sizeof(folder), "%s/spark-v1-legacy-manifests-field", fixtures);
	fs.maps[0].from = "data/persistent/iceberg_v1_deprecated/default/legacy_v1";
	fs.maps[0].to = folder;
	if (iceberg_metadata_read(&io, fx("spark-v1-legacy-manifests-field/metadata/v2.metadata.json"),
							  &md, &err))
	{
		const IcebergSnapshot *s = iceberg_metadata_current_snapshot(md);

		CHECK(s != NULL && s->manifest_list == NULL && s->nmanifests == 1,
			  "inline manifests field");
		if (s != NULL && iceberg_manifest_list_open(&io, md, s, &lr, &err))
		{
			CHECK(iceberg_manifest_list_format_version(lr) == 1, "inline list is v1");
			if (iceberg_manifest_list_next(lr, &mf, &err) == 1)
			{
				CHECK(mf->manifest_length == -1 && mf->partition_spec_id == -1,
					  "inline manifest has only a path");
				if (iceberg_manifest_open(&io, mf, 1, ICEBERG_READ_PARTITION, &mr, &err))
				{
					CHECK(iceberg_manifest_spec_id(mr) == 0, "spec id from header");
					CHECK(iceberg_manifest_next(mr, &e, &err) == 1 &&
						  strcmp(e->partition, "[\"alpha\"]") == 0 &&
						  e->sequence_number == 0, "v1 entry defaults");
					iceberg_manifest_close(mr);
				}
			}
			CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 0, "one inline manifest");
			iceberg_manifest_list_close(lr);
		}
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "legacy metadata: %s", err.message);
}

/* ---------------------------------------------------------------------
 * Standalone manifest lists
 * ---------------------------------------------------------------------
 */

static void
test_standalone_avro(void)
{
	IcebergFileIO io;
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	TmsError	err;
	IcebergManifestFile v1copy;
	char		path1[1024];
	int			n;

	iceberg_local_fileio(&io, NULL);

	/* DuckDB v3: no format-version key, null codec, a delete manifest */
	if (iceberg_manifest_list_open_path(&io, fx("standalone-avro/duckdb_v3_manifest_list.avro"),
										&lr, &err))
	{
		CHECK(iceberg_manifest_list_format_version(lr) == 3,
			  "duckdb list inferred v3: %d", iceberg_manifest_list_format_version(lr));
		n = 0;
		while (iceberg_manifest_list_next(lr, &mf, &err) == 1)
		{
			if (n == 0)
				CHECK(mf->content == 0 && mf->sequence_number == 1 && mf->first_row_id == 0 &&
					  strncmp(mf->manifest_path, "s3://warehouse/wh/db/logs/metadata/", 35) == 0 &&
					  mf->npartition_summaries == -1,
					  "duckdb entry 1: content %d seq %lld frid %lld parts %d", mf->content,
					  (long long) mf->sequence_number, (long long) mf->first_row_id,
					  mf->npartition_summaries);
			if (n == 1)
				CHECK(mf->content == 1 && mf->sequence_number == 2,
					  "duckdb entry 2: content %d seq %lld frid %lld", mf->content,
					  (long long) mf->sequence_number, (long long) mf->first_row_id);
			n++;
		}
		CHECK(n == 2 && err.code == ICEBERG_OK, "duckdb list has 2 entries: %d", n);
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "duckdb list: %s (%s)", err.message, err.detail);

	/* old and new field names resolve to the same ids */
	memset(&v1copy, 0, sizeof(v1copy));
	path1[0] = '\0';
	if (iceberg_manifest_list_open_path(&io, fx("standalone-avro/manifest-list-v2-1.avro"),
										&lr, &err))
	{
		CHECK(iceberg_manifest_list_format_version(lr) == 2, "v2-1 is v2");
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1, "v2-1 entry");
		if (mf != NULL)
		{
			v1copy = *mf;
			snprintf(path1, sizeof(path1), "%s", mf->manifest_path);
			CHECK(strncmp(mf->manifest_path, "iceberg-warehouse/people/metadata/", 34) == 0,
				  "v2-1 path %s", mf->manifest_path);
			CHECK(mf->added_files_count >= 0 && mf->existing_files_count >= 0 &&
				  mf->deleted_files_count >= 0,
				  "old names (added_data_files_count...) matched by id: %d %d %d",
				  mf->added_files_count, mf->existing_files_count, mf->deleted_files_count);
		}
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 0, "v2-1 has one entry");
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "v2-1: %s", err.message);
	if (iceberg_manifest_list_open_path(&io, fx("standalone-avro/manifest-list-v2-2.avro"),
										&lr, &err))
	{
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1, "v2-2 entry");
		if (mf != NULL)
		{
			CHECK(strncmp(mf->manifest_path, "iceberg-warehouse_2/people/", 27) == 0,
				  "v2-2 path");
			CHECK(mf->added_files_count == v1copy.added_files_count &&
				  mf->existing_files_count == v1copy.existing_files_count &&
				  mf->deleted_files_count == v1copy.deleted_files_count &&
				  mf->added_rows_count == v1copy.added_rows_count &&
				  mf->added_files_count >= 0,
				  "new names give the same counts as old names: %d vs %d",
				  mf->added_files_count, v1copy.added_files_count);
		}
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "v2-2: %s", err.message);
}

/* ---------------------------------------------------------------------
 * Malformed Avro
 * ---------------------------------------------------------------------
 */

/* Read every entry of a manifest (kind 1) or manifest list (kind 0). */
static int
read_avro_buffer(const void *data, size_t len, int kind, TmsError *err,
				 int *nentries)
{
	IcebergMemoryFile mem;
	IcebergFileIO io;
	int			rc = -1;

	mem.data = data;
	mem.len = len;
	iceberg_memory_fileio(&io, &mem);
	*nentries = 0;
	if (kind == 0)
	{
		IcebergManifestListReader *lr;
		const IcebergManifestFile *mf;

		if (!iceberg_manifest_list_open_path(&io, "mem", &lr, err))
			return -1;
		while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
			(*nentries)++;
		iceberg_manifest_list_close(lr);
	}
	else
	{
		IcebergManifestFile mf;
		IcebergManifestReader *mr;
		const IcebergManifestEntry *e;

		memset(&mf, 0, sizeof(mf));
		mf.manifest_path = "mem";
		mf.partition_spec_id = -1;
		mf.sequence_number = 1;
		if (!iceberg_manifest_open(&io, &mf, 2, ICEBERG_READ_PARTITION, &mr, err))
			return -1;
		while ((rc = iceberg_manifest_next(mr, &e, err)) == 1)
			(*nentries)++;
		iceberg_manifest_close(mr);
	}
	return rc;
}

static void
test_truncation_and_corruption(const char *rel, int kind)
{
	size_t		len,
				cut,
				i;
	unsigned char *data = slurp(fx(rel), &len);
	TmsError	err;
	int			full,
				n,
				bad = 0,
				crashfree = 0;

	if (data == NULL)
	{
		CHECK(false, "read %s", rel);
		return;
	}
	CHECK(read_avro_buffer(data, len, kind, &err, &full) == 0 && full > 0,
		  "%s reads whole: %s", rel, err.message);
	for (cut = 0; cut < len; cut++)
	{
		unsigned char *copy = io_malloc(cut + 1);	/* exact size for ASan */

		memcpy(copy, data, cut);
		if (read_avro_buffer(copy, cut, kind, &err, &n) == 0)
		{
			if (n >= full)
				bad++;
		}
		else if (err.code != ICEBERG_ERR_MALFORMED)
			bad++;
		io_free(copy);
	}
	CHECK(bad == 0, "%s: every truncation is a malformed error (%d not)", rel, bad);

	/* flip every byte: an error or a result, never a crash */
	for (i = 0; i < len; i++)
	{
		unsigned char *copy = io_malloc(len);

		memcpy(copy, data, len);
		copy[i] ^= 0xff;
		(void) read_avro_buffer(copy, len, kind, &err, &n);
		crashfree++;
		io_free(copy);
	}
	CHECK(crashfree == (int) len, "%s: byte flips", rel);
	io_free(data);
}

/* Varint writer for hand-made Avro files. */
static size_t
put_long(unsigned char *p, int64_t v)
{
	uint64_t	z = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
	size_t		n = 0;

	while (z >= 0x80)
	{
		p[n++] = (unsigned char) (z | 0x80);
		z >>= 7;
	}
	p[n++] = (unsigned char) z;
	return n;
}

static size_t
put_str(unsigned char *p, const char *s)
{
	size_t		n = put_long(p, (int64_t) strlen(s));

	memcpy(p + n, s, strlen(s));
	return n + strlen(s);
}

static const unsigned char sync16[16] = "0123456789abcdef";

/* Write an Avro header with the given schema and codec. */
static size_t
put_header(unsigned char *p, const char *schema, const char *codec)
{
	size_t		n = 0;

	memcpy(p, "Obj\x01", 4);
	n = 4;
	n += put_long(p + n, 2);
	n += put_str(p + n, "avro.schema");
	n += put_str(p + n, schema);
	n += put_str(p + n, "avro.codec");
	n += put_str(p + n, codec);
	n += put_long(p + n, 0);
	memcpy(p + n, sync16, 16);
	return n + 16;
}

/* A manifest_file schema without field ids and with old names. */
static const char *list_schema_noids =
"{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
"{\"name\":\"manifest_path\",\"type\":\"string\"},"
"{\"name\":\"manifest_length\",\"type\":\"long\"},"
"{\"name\":\"partition_spec_id\",\"type\":\"int\"},"
"{\"name\":\"added_snapshot_id\",\"type\":[\"null\",\"long\"]},"
"{\"name\":\"added_data_files_count\",\"type\":[\"null\",\"int\"]},"
"{\"name\":\"extra\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"z\",\"fields\":[{\"name\":\"n\",\"type\":\"null\"}]}}}"
"]}";

/* Encode one record of list_schema_noids; extra_count items. */
static size_t
put_list_record(unsigned char *p, const char *path, int64_t extra_count)
{
	size_t		n = 0;

	n += put_str(p + n, path);
	n += put_long(p + n, 1234);
	n += put_long(p + n, 0);
	n += put_long(p + n, 1);	/* union branch long */
	n += put_long(p + n, 42);
	n += put_long(p + n, 1);	/* union branch int */
	n += put_long(p + n, 7);
	if (extra_count != 0)
		n += put_long(p + n, extra_count);
	n += put_long(p + n, 0);
	return n;
}

/* Wrap records as one block. */
static size_t
put_block(unsigned char *p, const unsigned char *rec, size_t reclen, int64_t count)
{
	size_t		n = 0;

	n += put_long(p + n, count);
	n += put_long(p + n, (int64_t) reclen);
	memcpy(p + n, rec, reclen);
	n += reclen;
	memcpy(p + n, sync16, 16);
	return n + 16;
}

/* Raw-deflate (as Avro's deflate codec) in into p; returns the length. */
static size_t
put_deflate(unsigned char *p, size_t cap, const unsigned char *in, size_t len)
{
	z_stream	zs;
	size_t		n;

	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	zs.next_in = (unsigned char *) in;
	zs.avail_in = (uInt) len;
	zs.next_out = p;
	zs.avail_out = (uInt) cap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		abort();
	n = zs.total_out;
	deflateEnd(&zs);
	return n;
}

/*
 * Deflate blocks, whichever inflater the build uses (libdeflate's one-shot
 * decompressor with a growing output, or zlib): blocks that inflate to
 * many times their size (the output outgrows any first guess), a small
 * block after a large one, the block size limit on the inflated bytes,
 * and corrupt or truncated streams.
 */
static void
test_deflate_blocks(void)
{
	const int	nrec = 20000;
	size_t		reclen = 0,
				cap = 4 << 20;
	unsigned char *rec = io_malloc(cap);
	unsigned char *comp = io_malloc(cap);
	unsigned char *file = io_malloc(cap);
	char		path[200];
	size_t		c,
				n,
				r;
	int			cnt,
				i;
	TmsError	err;
	IcebergLimits lim;
	IcebergMemoryFile mem;
	IcebergFileIO io;
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;

	memset(path, 'x', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	for (i = 0; i < nrec; i++)
		reclen += put_list_record(rec + reclen, path, 0);
	c = put_deflate(comp, cap, rec, reclen);
	CHECK(reclen > 4 * c + 65536, "test block inflates beyond the first guess (%zu -> %zu)",
		  c, reclen);

	/* a large block, then a small one */
	n = put_header(file, list_schema_noids, "deflate");
	n += put_block(file + n, comp, c, nrec);
	r = put_list_record(rec, "small.avro", 0);
	n += put_block(file + n, comp + c, put_deflate(comp + c, cap - c, rec, r), 1);
	cnt = 0;
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) == 0 && cnt == nrec + 1,
		  "deflate blocks: %d records, %s", cnt, err.message);

	/* the values survive the inflating */
	mem.data = file;
	mem.len = n;
	iceberg_memory_fileio(&io, &mem);
	if (iceberg_manifest_list_open_path(&io, "mem", &lr, &err))
	{
		for (i = 0; i < nrec; i++)
			if (iceberg_manifest_list_next(lr, &mf, &err) != 1 ||
				strcmp(mf->manifest_path, path) != 0)
				break;
		CHECK(i == nrec, "large block's records intact (%d)", i);
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
			  strcmp(mf->manifest_path, "small.avro") == 0, "small block after it");
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 0, "end");
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "deflate list: %s", err.message);

	/* the limit applies to the inflated bytes, whatever the compressed size */
	memset(&lim, 0, sizeof(lim));
	lim.max_block_bytes = (int64_t) reclen - 1;
	n = put_header(file, list_schema_noids, "deflate");
	n += put_block(file + n, comp, c, nrec);
	mem.data = file;
	mem.len = n;
	iceberg_memory_fileio(&io, &mem);
	io.limits = &lim;
	if (iceberg_manifest_list_open_path(&io, "mem", &lr, &err))
	{
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) < 0 && err.code == ICEBERG_ERR_LIMIT,
			  "inflated block over the limit: %s", tms_error_code_name(err.code));
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(err.code == ICEBERG_ERR_LIMIT, "limit at open: %s", err.message);
	lim.max_block_bytes = (int64_t) reclen;
	iceberg_memory_fileio(&io, &mem);
	io.limits = &lim;
	if (iceberg_manifest_list_open_path(&io, "mem", &lr, &err))
	{
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1,
			  "inflated block at the limit exactly: %s", err.message);
		iceberg_manifest_list_close(lr);
	}

	/* truncated and corrupt streams are malformed, never a crash */
	for (i = 0; i < 3; i++)
	{
		size_t		len = i == 0 ? c / 2 : c;

		if (i == 1)
			comp[c / 3] ^= 0xff;
		if (i == 2)
			memset(comp, 0xff, 16); /* an invalid block type right away */
		n = put_header(file, list_schema_noids, "deflate");
		n += put_block(file + n, comp, len, nrec);
		CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
			  (err.code == ICEBERG_ERR_MALFORMED || err.code == ICEBERG_ERR_LIMIT),
			  "corrupt deflate %d: %s", i, tms_error_code_name(err.code));
	}
	io_free(rec);
	io_free(comp);
	io_free(file);
}

/*
 * Skipped fields of every shape the fast skips handle, before the fields
 * read: runs of multi-byte varints longer than a word ({k: int, v: long}
 * items), flat records of a varint, a byte string and fixed-size runs,
 * and a map of them.  The fields after them must read right, and a
 * record cut anywhere inside them must be refused.
 */
static void
test_skip_shapes(void)
{
	const char *schema =
	"{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
	"{\"name\":\"counts\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
	"\"name\":\"kv\",\"fields\":[{\"name\":\"k\",\"type\":\"int\"},{\"name\":\"v\",\"type\":\"long\"}]}}},"
	"{\"name\":\"bounds\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
	"\"name\":\"kb\",\"fields\":[{\"name\":\"k\",\"type\":\"int\"},{\"name\":\"v\",\"type\":\"bytes\"},"
	"{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"f3\",\"size\":3}},"
	"{\"name\":\"d\",\"type\":\"double\"},{\"name\":\"b\",\"type\":\"boolean\"}]}}},"
	"{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"kb\"}},"
	"{\"name\":\"lb\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\","
	"\"name\":\"kv2\",\"fields\":[{\"name\":\"k\",\"type\":\"int\"},{\"name\":\"v\",\"type\":\"bytes\"}]}}},"
	"{\"name\":\"manifest_path\",\"type\":\"string\"},"
	"{\"name\":\"manifest_length\",\"type\":\"long\"},"
	"{\"name\":\"partition_spec_id\",\"type\":\"int\"},"
	"{\"name\":\"added_snapshot_id\",\"type\":[\"null\",\"long\"]}"
	"]}";
	unsigned char *file = io_malloc(1 << 16);
	unsigned char rec[8192];
	size_t		n,
				r = 0,
				cut[4];
	int			cnt,
				k,
				j;
	TmsError	err;
	IcebergManifestListReader *lr;
	IcebergMemoryFile mem;
	IcebergFileIO io;
	const IcebergManifestFile *mf;
	static const unsigned char fixed_d_b[12] = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 1};

	for (k = 0; k < 2; k++)
	{
		r += put_long(rec + r, 30);
		for (j = 0; j < 30; j++)
		{
			r += put_long(rec + r, j + 1000);
			r += put_long(rec + r, (int64_t) j << 40);
		}
		r += put_long(rec + r, 0);
		cut[0] = r - 7;
		r += put_long(rec + r, 12);
		for (j = 0; j < 12; j++)
		{
			r += put_long(rec + r, j);
			r += put_str(rec + r, j % 2 ? "a-lower-bound" : "");
			memcpy(rec + r, fixed_d_b, 12);
			r += 12;
		}
		r += put_long(rec + r, 0);
		cut[1] = r - 5;
		r += put_long(rec + r, 2);
		for (j = 0; j < 2; j++)
		{
			r += put_str(rec + r, j ? "key1" : "key0");
			r += put_long(rec + r, 9);
			r += put_str(rec + r, "bytes");
			memcpy(rec + r, fixed_d_b, 12);
			r += 12;
		}
		r += put_long(rec + r, 0);
		cut[2] = r - 3;
		/* {key: int, value: bytes}, keys and lengths of one and two bytes */
		r += put_long(rec + r, 3);
		for (j = 0; j < 3; j++)
		{
			char		big[200];

			memset(big, 'b', sizeof(big) - 1);
			big[j == 1 ? sizeof(big) - 1 : 5] = '\0';
			r += put_long(rec + r, j * 5000);
			r += put_str(rec + r, big);
		}
		r += put_long(rec + r, 0);
		cut[3] = r - 100;
		r += put_str(rec + r, k ? "second.avro" : "first.avro");
		r += put_long(rec + r, 5678 + k);
		r += put_long(rec + r, 0);
		r += put_long(rec + r, 1);
		r += put_long(rec + r, 77);
	}
	n = put_header(file, schema, "null");
	n += put_block(file + n, rec, r, 2);
	mem.data = file;
	mem.len = n;
	iceberg_memory_fileio(&io, &mem);
	if (iceberg_manifest_list_open_path(&io, "mem", &lr, &err))
	{
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
			  strcmp(mf->manifest_path, "first.avro") == 0 && mf->manifest_length == 5678 &&
			  mf->added_snapshot_id == 77, "fields after skipped shapes, record 1: %s",
			  err.message);
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
			  strcmp(mf->manifest_path, "second.avro") == 0 && mf->manifest_length == 5679,
			  "fields after skipped shapes, record 2: %s", err.message);
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 0, "end after skipped shapes");
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "skip shapes: %s (%s)", err.message, err.detail);

	/* one record cut inside each skipped field */
	for (k = 0; k < 4; k++)
	{
		n = put_header(file, schema, "null");
		n += put_block(file + n, rec, cut[k], 1);
		CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && err.code == ICEBERG_ERR_MALFORMED,
			  "record cut in skipped field %d: %s", k, tms_error_code_name(err.code));
	}
	io_free(file);
}

/* Snappy-encode as literals only, with the Avro CRC-32 trailer. */
static size_t
put_snappy(unsigned char *p, const unsigned char *in, size_t len)
{
	extern unsigned long crc32(unsigned long, const unsigned char *, unsigned int);
	size_t		n = 0;
	size_t		pos = 0;
	uint64_t	v = len;
	unsigned long crc;

	while (v >= 0x80)
	{
		p[n++] = (unsigned char) (v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char) v;
	while (pos < len)
	{
		size_t		chunk = len - pos > 200 ? 200 : len - pos;

		if (chunk <= 60)
			p[n++] = (unsigned char) ((chunk - 1) << 2);
		else
		{
			p[n++] = 60 << 2;
			p[n++] = (unsigned char) (chunk - 1);
		}
		memcpy(p + n, in + pos, chunk);
		n += chunk;
		pos += chunk;
	}
	crc = crc32(0L, in, (unsigned int) len);
	p[n++] = (unsigned char) (crc >> 24);
	p[n++] = (unsigned char) (crc >> 16);
	p[n++] = (unsigned char) (crc >> 8);
	p[n++] = (unsigned char) crc;
	return n;
}

static void
test_handmade_avro(void)
{
	unsigned char *file = io_malloc(1 << 20);
	unsigned char rec[4096];
	unsigned char comp[8192];
	size_t		n,
				r,
				c;
	int			cnt;
	TmsError	err;
	IcebergManifestListReader *lr;
	IcebergMemoryFile mem;
	IcebergFileIO io;
	const IcebergManifestFile *mf;
	int			i;

	/* name fallback without field ids, two records, one block */
	n = put_header(file, list_schema_noids, "null");
	r = put_list_record(rec, "a.avro", 3);
	r += put_list_record(rec + r, "b.avro", 0);
	n += put_block(file + n, rec, r, 2);
	mem.data = file;
	mem.len = n;
	iceberg_memory_fileio(&io, &mem);
	if (iceberg_manifest_list_open_path(&io, "mem", &lr, &err))
	{
		CHECK(iceberg_manifest_list_format_version(lr) == 1, "no ids, no content: v1");
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
			  strcmp(mf->manifest_path, "a.avro") == 0 && mf->manifest_length == 1234 &&
			  mf->added_snapshot_id == 42 && mf->added_files_count == 7 &&
			  mf->content == 0 && mf->sequence_number == 0 && mf->added_rows_count == -1,
			  "name fallback record");
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 1 &&
			  strcmp(mf->manifest_path, "b.avro") == 0, "second record");
		CHECK(iceberg_manifest_list_next(lr, &mf, &err) == 0, "end");
		iceberg_manifest_list_close(lr);
	}
	else
		CHECK(false, "hand-made list: %s (%s)", err.message, err.detail);

	/* the same as snappy */
	n = put_header(file, list_schema_noids, "snappy");
	c = put_snappy(comp, rec, r);
	n += put_block(file + n, comp, c, 2);
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) == 0 && cnt == 2,
		  "snappy block: %s", err.message);
	comp[c - 1] ^= 1;			/* CRC */
	n = put_header(file, list_schema_noids, "snappy");
	n += put_block(file + n, comp, c, 2);
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && err.code == ICEBERG_ERR_MALFORMED,
		  "snappy checksum");

	/* unsupported codec */
	n = put_header(file, list_schema_noids, "zstandard");
	n += put_block(file + n, rec, r, 2);
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
		  err.code == ICEBERG_ERR_UNSUPPORTED, "zstandard codec unsupported");

	/* wrong magic */
	n = put_header(file, list_schema_noids, "null");
	n += put_block(file + n, rec, r, 2);
	file[3] = 2;
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && err.code == ICEBERG_ERR_MALFORMED &&
		  strstr(err.message, "magic") != NULL, "wrong magic: %s", err.message);
	file[3] = 1;

	/* bad sync */
	file[n - 1] ^= 1;
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && strstr(err.message, "sync") != NULL,
		  "bad sync: %s", err.message);
	file[n - 1] ^= 1;

	/* block claims more objects than it holds */
	n = put_header(file, list_schema_noids, "null");
	n += put_block(file + n, rec, r, 3);
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && err.code == ICEBERG_ERR_MALFORMED,
		  "object count > objects");
	/* block with trailing bytes */
	n = put_header(file, list_schema_noids, "null");
	n += put_block(file + n, rec, r, 1);
	CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 && err.code == ICEBERG_ERR_MALFORMED,
		  "object count < objects");

	/* absurd counts: block objects, block size, array items, string length */
	{
		int64_t		absurd[] = {INT64_C(1) << 40, INT64_MAX, -1};
		unsigned char *p;

		for (i = 0; i < 3; i++)
		{
			n = put_header(file, list_schema_noids, "null");
			n += put_long(file + n, absurd[i]);
			n += put_long(file + n, 10);
			memset(file + n, 0, 26);
			n += 26;
			CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
				  (err.code == ICEBERG_ERR_LIMIT || err.code == ICEBERG_ERR_MALFORMED),
				  "absurd block count %d", i);
			n = put_header(file, list_schema_noids, "null");
			n += put_long(file + n, 1);
			n += put_long(file + n, absurd[i]);
			memset(file + n, 0, 26);
			n += 26;
			CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
				  (err.code == ICEBERG_ERR_LIMIT || err.code == ICEBERG_ERR_MALFORMED),
				  "absurd block size %d", i);
			/* array of zero-size records with a huge count */
			r = put_list_record(rec, "a.avro", absurd[i] == -1 ? -5 : absurd[i]);
			n = put_header(file, list_schema_noids, "null");
			n += put_block(file + n, rec, r, 1);
			CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
				  err.code == ICEBERG_ERR_MALFORMED, "absurd array count %d", i);
			/* string length */
			p = rec;
			r = put_long(p, absurd[i]);
			memcpy(p + r, "abc", 3);
			r += 3;
			n = put_header(file, list_schema_noids, "null");
			n += put_block(file + n, rec, r, 1);
			CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
				  err.code == ICEBERG_ERR_MALFORMED, "absurd string length %d", i);
		}
	}

	/* schemas that are not what we need */
	{
		const char *schemas[] = {
			"not json",
			"[\"null\",\"string\"]",
			"{\"type\":\"record\",\"name\":\"x\",\"fields\":[{\"name\":\"manifest_path\",\"type\":\"long\"}]}",
			"{\"type\":\"record\",\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"nosuchtype\"}]}",
			"{\"type\":\"record\",\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"x\"}]}",
			"{\"type\":\"record\",\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"fixed\",\"name\":\"f\",\"size\":-1}}]}",
		};

		for (i = 0; i < (int) (sizeof(schemas) / sizeof(schemas[0])); i++)
		{
			n = put_header(file, schemas[i], "null");
			CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
				  err.code == ICEBERG_ERR_MALFORMED, "bad schema %d: %s", i,
				  tms_error_code_name(err.code));
		}
	}
	/* required field missing */
	{
		const char *schema = "{\"type\":\"record\",\"name\":\"x\",\"fields\":[{\"name\":\"manifest_path\",\"type\":\"string\"}]}";

		n = put_header(file, schema, "null");
		r = put_str(rec, "p");
		n += put_block(file + n, rec, r, 1);
		CHECK(read_avro_buffer(file, n, 0, &err, &cnt) < 0 &&
			  err.code == ICEBERG_ERR_MALFORMED, "missing required fields");
	}
	/* limits are honoured */
	{
		IcebergLimits lim;

		memset(&lim, 0, sizeof(lim));
		lim.max_block_bytes = 8;
		n = put_header(file, list_schema_noids, "null");
		r = put_list_record(rec, "a.avro", 0);
		n += put_block(file + n, rec, r, 1);
		mem.data = file;
		mem.len = n;
		iceberg_memory_fileio(&io, &mem);
		io.limits = &lim;
		CHECK(!iceberg_manifest_list_open_path(&io, "mem", &lr, &err) ||
			  (iceberg_manifest_list_next(lr, &mf, &err) < 0 && err.code == ICEBERG_ERR_LIMIT &&
			   (iceberg_manifest_list_close(lr), true)),
			  "block size limit");
	}
	io_free(file);
}

/* ---------------------------------------------------------------------
 * Walk selection, cancellation, DSL adapters
 * ---------------------------------------------------------------------
 */

static bool
stop_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	int		   *n = arg;

	(void) f;
	(void) err;
	return ++(*n) < 3;
}

static bool
interrupted_now(void *arg)
{
	(void) arg;
	return true;
}

static void
test_walk_and_adapters(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;
	char		folder[1024];
	WalkCount	wc;
	int64_t		first;
	int			n = 0;

	snprintf(folder, sizeof(folder), "%s/pyiceberg-v1-overwrite", fixtures);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = "data/persistent/iceberg_v1_repro/repro/merch_v1";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	if (!iceberg_metadata_read(&io, fx("pyiceberg-v1-overwrite/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json"),
							   &md, &err))
	{
		CHECK(false, "pyiceberg metadata: %s", err.message);
		return;
	}
	/* one snapshot only */
	first = md->snapshots[0].snapshot_id;
	memset(&wc, 0, sizeof(wc));
	CHECK(iceberg_walk(&io, md, NULL, &first, 1, ICEBERG_WALK_ALL, count_cb, &wc, &err),
		  "walk one snapshot");
	CHECK(wc.n[ICEBERG_FILE_MANIFEST_LIST] == 1 && wc.n[ICEBERG_FILE_MANIFEST] == 1 &&
		  wc.n[ICEBERG_FILE_DATA] == 1 && wc.n[ICEBERG_FILE_METADATA] == md->nmetadata_log,
		  "first snapshot: 1 list, 1 manifest, 1 data file");
	free_walk_count(&wc);
	/* unknown snapshot */
	first = 12345;
	CHECK(!iceberg_walk(&io, md, NULL, &first, 1, ICEBERG_WALK_ALL, count_cb, &wc, &err) &&
		  err.code == ICEBERG_ERR_NOT_FOUND, "unknown snapshot");
	/* the callback stops the walk */
	CHECK(!iceberg_walk(&io, md, NULL, NULL, -1, ICEBERG_WALK_ALL, stop_cb, &n, &err) &&
		  err.code == ICEBERG_ERR_CANCELLED && n == 3, "callback stop");
	/* interrupts */
	io.io.interrupted = interrupted_now;
	{
		IcebergTableMetrics m;

		CHECK(!iceberg_table_metrics(&io, md, ICEBERG_METRICS_MANIFESTS, 0, NULL, NULL, &m, &err) &&
			  err.code == ICEBERG_ERR_CANCELLED, "interrupted metrics: %s",
			  tms_error_code_name(err.code));
	}
	io.io.interrupted = NULL;

	/* DSL adapters */
	{
		IcebergTableMetrics m;
		DslMetrics	dm;
		DslProperties props;
		DslFileSource src;
		IcebergDataFileIter *it;
		const DslFile *files;
		size_t		nfiles;
		int64_t		total = 0;

		CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_MANIFEST_LIST, 0, NULL, NULL, &m, &err),
			  "manifest list metrics");
		iceberg_metrics_to_dsl(&m, &dm);
		CHECK((dm.present & DSL_VAR_BIT(DSL_VAR_MANIFESTS)) && dm.manifests == 2 &&
			  !(dm.present & DSL_VAR_BIT(DSL_VAR_DATA_FILES)) && dm.snapshots == 3,
			  "dsl metrics at manifest-list level");
		CHECK(iceberg_table_metrics(&io, md, ICEBERG_METRICS_DELETES, 0, NULL, NULL, &m, &err),
			  "deletes metrics");
		iceberg_metrics_to_dsl(&m, &dm);
		CHECK(dm.present == (UINT32_C(1) << DSL_VAR_FIRST_DERIVED) - 1 && dm.data_files == 2 &&
			  dm.avg_data_file_size == 1320.0, "dsl metrics complete");
		iceberg_dsl_properties(md, &props);
		CHECK(props.get(props.arg, "no.such.property") == NULL, "dsl property missing");
		if (iceberg_data_files_open(&io, md, true, &it, &err))
		{
			CHECK(iceberg_data_files_dsl_source(it, &src, &err), "dsl source");
			while (src.next(src.arg, &files, &nfiles) == 1)
				total += (int64_t) nfiles;
			CHECK(total == 2, "dsl file source yields 2 files: %lld", (long long) total);
			iceberg_data_files_close(it);
		}
	}
	iceberg_metadata_free(md);
}

/* ---------------------------------------------------------------------
 * Extreme values: timestamps out of range are rejected, metrics saturate
 * ---------------------------------------------------------------------
 */

/* A temporary file's path with the given content, in a static buffer. */
static const char *
temp_file(const char *name, const void *data, size_t len)
{
	static char path[4][1024];
	static int	next;
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char	   *p = path[next++ % 4];
	FILE	   *f;

	snprintf(p, sizeof(path[0]), "%s/tms_iceberg_test_%ld_%s", dir,
			 (long) getpid(), name);
	f = fopen(p, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len)
	{
		CHECK(false, "cannot write %s", p);
		if (f)
			fclose(f);
		return p;
	}
	fclose(f);
	return p;
}

/* v1 metadata with the four kinds of timestamp set to the given JSON numbers. */
static void
timestamps_json(char *buf, size_t cap, const char *const ts[4])
{
	snprintf(buf, cap,
			 "{\"format-version\": 1, \"location\": \"x\", \"last-updated-ms\": %s,"
			 " \"last-column-id\": 1,"
			 " \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
			 " \"snapshots\": [{\"snapshot-id\": 1, \"timestamp-ms\": %s, \"manifests\": []}],"
			 " \"current-snapshot-id\": 1,"
			 " \"snapshot-log\": [{\"timestamp-ms\": %s, \"snapshot-id\": 1}],"
			 " \"metadata-log\": [{\"timestamp-ms\": %s, \"metadata-file\": \"m.json\"}]}",
			 ts[0], ts[1], ts[2], ts[3]);
}

/* Timestamps outside [0, 9999-12-31T23:59:59.999Z] are malformed metadata. */
static void
test_metadata_timestamps(void)
{
	static const char *const bad[] = {
		"9223372036854775807", "-9223372036854775808", "-1", "253402300800000"
	};
	static const char *const field[] = {
		"\"last-updated-ms\" of table metadata", "\"timestamp-ms\" of a snapshot",
		"\"timestamp-ms\" of a snapshot-log entry", "\"timestamp-ms\" of a metadata-log entry"
	};
	char		json[1024];
	IcebergTableMetadata *md;
	TmsError	err;
	IcebergFileIO io;

	/* the two ends of the range are accepted */
	{
		const char *const lo_hi[4] = {"0", "253402300799999", "0", "253402300799999"};

		timestamps_json(json, sizeof(json), lo_hi);
		if (iceberg_metadata_parse(json, strlen(json), NULL, &md, &err))
		{
			CHECK(md->last_updated_ms == 0 &&
				  md->snapshots[0].timestamp_ms == ICEBERG_MAX_TIMESTAMP_MS &&
				  md->snapshot_log[0].timestamp_ms == 0 &&
				  md->metadata_log[0].timestamp_ms == INT64_C(253402300799999),
				  "boundary timestamps kept");
			iceberg_metadata_free(md);
		}
		else
			CHECK(false, "boundary timestamps: %s", err.message);
	}

	/* each kind, each bad value */
	for (int k = 0; k < 4; k++)
		for (int b = 0; b < 4; b++)
		{
			const char *ts[4] = {"1", "1", "1", "1"};
			char		want[160];
			bool		ok;

			ts[k] = bad[b];
			timestamps_json(json, sizeof(json), ts);
			ok = iceberg_metadata_parse(json, strlen(json), NULL, &md, &err);
			snprintf(want, sizeof(want), "field %s has out-of-range value %s",
					 field[k], bad[b]);
			CHECK(!ok && err.code == ICEBERG_ERR_MALFORMED &&
				  strstr(err.message, want) != NULL &&
				  strstr(err.detail, "9999-12-31T23:59:59.999Z") != NULL,
				  "%s = %s: %s / %s", field[k], bad[b],
				  ok ? "accepted" : err.message, ok ? "" : err.detail);
			if (ok)
				iceberg_metadata_free(md);
		}

	/* read from a file, the detail names it after the range */
	{
		const char *ts[4] = {"1", "-1", "1", "1"};
		const char *path;
		char		want[1100];

		timestamps_json(json, sizeof(json), ts);
		path = temp_file("ts.metadata.json", json, strlen(json));
		iceberg_local_fileio(&io, NULL);
		snprintf(want, sizeof(want), "(9999-12-31T23:59:59.999Z). The file is \"%s\".", path);
		CHECK(!iceberg_metadata_read(&io, path, &md, &err) &&
			  err.code == ICEBERG_ERR_MALFORMED && strstr(err.detail, want) != NULL,
			  "detail names the file: %s", err.detail);
		unlink(path);
	}
}

/* Ages and totals saturate instead of wrapping (no signed overflow). */
static void
test_metrics_saturate(void)
{
	static const struct
	{
		int64_t		ts;			/* the snapshot's timestamp */
		int64_t		updated;	/* last-updated-ms */
		int64_t		now;
		int64_t		oldest_age;
		int64_t		since_update;
	}			cases[] = {
		{0, 0, INT64_MAX, INT64_MAX, INT64_MAX},
		{INT64_MIN, INT64_MIN, INT64_MAX, INT64_MAX, INT64_MAX},
		{INT64_MIN, -1, 1, INT64_MAX, 2},
		{INT64_MIN, INT64_MIN, 0, INT64_MAX, INT64_MAX},
		{INT64_MAX, INT64_MAX, INT64_MIN, 0, 0},
		{INT64_MAX, 5, INT64_MAX, 0, INT64_MAX - 5},
		{-1, -1, INT64_MIN, 0, 0},
		{1000, ICEBERG_MAX_TIMESTAMP_MS, ICEBERG_MAX_TIMESTAMP_MS,
		ICEBERG_MAX_TIMESTAMP_MS - 1000, 0},
		{100, 50, -1, 0, 0},
	};
	IcebergTableMetadata md;
	IcebergSnapshot snap;
	IcebergTableMetrics m;
	TmsError	err;

	/* metadata built by hand: the parser would refuse these timestamps */
	memset(&md, 0, sizeof(md));
	memset(&snap, 0, sizeof(snap));
	md.format_version = 2;
	md.current_snapshot_id = -1;
	md.nsnapshots = 1;
	md.snapshots = &snap;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		snap.timestamp_ms = cases[i].ts;
		md.last_updated_ms = cases[i].updated;
		CHECK(iceberg_table_metrics(NULL, &md, ICEBERG_METRICS_METADATA, cases[i].now,
									NULL, NULL, &m, &err) &&
			  m.oldest_snapshot_age_ms == cases[i].oldest_age &&
			  m.time_since_last_update_ms == cases[i].since_update,
			  "case %zu: ages %lld %lld", i, (long long) m.oldest_snapshot_age_ms,
			  (long long) m.time_since_last_update_ms);
	}
	md.nsnapshots = 0;
	CHECK(iceberg_table_metrics(NULL, &md, ICEBERG_METRICS_METADATA, INT64_MAX,
								NULL, NULL, &m, &err) &&
		  m.oldest_snapshot_age_ms == 0, "no snapshot: age 0");

	/* totals: a v1 manifest whose sizes and counts add up past int64 */
	{
		static const char *manifest_schema =
		"{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
		"{\"name\":\"status\",\"type\":\"int\"},"
		"{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"]},"
		"{\"name\":\"data_file\",\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":["
		"{\"name\":\"file_path\",\"type\":\"string\"},"
		"{\"name\":\"file_format\",\"type\":\"string\"},"
		"{\"name\":\"partition\",\"type\":{\"type\":\"record\",\"name\":\"r102\",\"fields\":[]}},"
		"{\"name\":\"record_count\",\"type\":\"long\"},"
		"{\"name\":\"file_size_in_bytes\",\"type\":\"long\"}]}}]}";
		static const int64_t sizes[] = {INT64_MAX, INT64_MAX, 5};
		static const int64_t records[] = {INT64_MIN, -1, 7};
		unsigned char *file = io_malloc(1 << 16);
		unsigned char rec[4096];
		size_t		n = 0,
					r = 0;
		const char *list_path;
		const char *manifest_path;
		char		json[2048];
		IcebergFileIO io;
		IcebergTableMetadata *pmd;

		for (int i = 0; i < 3; i++)
		{
			r += put_long(rec + r, 1);	/* ADDED */
			r += put_long(rec + r, 1);	/* union branch long */
			r += put_long(rec + r, 1);
			r += put_str(rec + r, i == 0 ? "s3://b/t/data/a.parquet" :
						 i == 1 ? "s3://b/t/data/b.parquet" : "s3://b/t/data/c.parquet");
			r += put_str(rec + r, "PARQUET");
			r += put_long(rec + r, records[i]);
			r += put_long(rec + r, sizes[i]);
		}
		n = put_header(file, manifest_schema, "null");
		n += put_block(file + n, rec, r, 3);
		manifest_path = temp_file("m0.avro", file, n);

		r = put_list_record(rec, manifest_path, 0);
		n = put_header(file, list_schema_noids, "null");
		n += put_block(file + n, rec, r, 1);
		list_path = temp_file("snap-1.avro", file, n);
		io_free(file);

		snprintf(json, sizeof(json),
				 "{\"format-version\": 1, \"location\": \"s3://b/t\", \"last-updated-ms\": 1,"
				 " \"last-column-id\": 1,"
				 " \"schema\": {\"type\": \"struct\", \"fields\": []}, \"partition-spec\": [],"
				 " \"snapshots\": [{\"snapshot-id\": 1, \"timestamp-ms\": 1,"
				 " \"manifest-list\": \"%s\"}], \"current-snapshot-id\": 1}", list_path);
		iceberg_local_fileio(&io, NULL);
		if (iceberg_metadata_parse(json, strlen(json), NULL, &pmd, &err))
		{
			bool		ok = iceberg_table_metrics(&io, pmd, ICEBERG_METRICS_DELETES, 2,
												   NULL, NULL, &m, &err);

			CHECK(ok && m.data_files == 3 && m.data_files_size == INT64_MAX &&
				  m.data_records == INT64_MIN + 7,
				  "saturated totals: %s %lld files, size %lld, records %lld",
				  ok ? "" : err.message, (long long) m.data_files,
				  (long long) m.data_files_size, (long long) m.data_records);
			iceberg_metadata_free(pmd);
		}
		else
			CHECK(false, "totals metadata: %s", err.message);
		unlink(list_path);
		unlink(manifest_path);
	}
}

/* ---------------------------------------------------------------------
 * Reading through the io layer's router: codes travel in io_code
 * ---------------------------------------------------------------------
 */
static void
test_io_router(void)
{
	char	   *root = realpath(fixtures, NULL);
	const char *roots[1];
	IoStorageConfig cfg;
	IoStorage  *st;
	IoStorageFileIO state;
	IcebergFileIO io;
	TmsError	ioerr;
	IcebergTableMetadata *md;
	TmsError	err;
	struct
	{
		const char *path;
		IoErrorCode io_code;
	}			fails[] = {
		{"pyiceberg-v1-overwrite/metadata/no-such.metadata.json", IO_ERR_NOT_FOUND},
		{"/etc/passwd", IO_ERR_FORBIDDEN},
		{"hdfs://bucket/metadata.json", IO_ERR_INVALID_ARGUMENT},
		{"pyiceberg-v1-overwrite/../pyiceberg-v1-overwrite/metadata/x.json", IO_ERR_INVALID_ARGUMENT},
	};

	if (root == NULL)
	{
		CHECK(false, "realpath of the fixtures");
		return;
	}
	roots[0] = root;
	memset(&cfg, 0, sizeof(cfg));
	cfg.local_roots = roots;
	cfg.nlocal_roots = 1;
	st = io_storage_create(&cfg, &ioerr);
	CHECK(st != NULL, "storage: %s", st ? "" : ioerr.message);
	if (st == NULL)
	{
		free(root);
		return;
	}
	io_storage_fileio(&state, st, root, NULL, NULL, &io.io);
	io.limits = NULL;
	CHECK(iceberg_metadata_read(&io, "pyiceberg-v1-overwrite/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json",
								&md, &err), "relative read through the router: %s", err.message);
	iceberg_metadata_free(md);
	for (size_t i = 0; i < sizeof(fails) / sizeof(fails[0]); i++)
	{
		CHECK(!iceberg_metadata_read(&io, fails[i].path, &md, &err) &&
			  err.code == ICEBERG_ERR_IO && err.io_code == fails[i].io_code,
			  "\"%s\": %s / %s (%s)", fails[i].path, tms_error_code_name(err.code),
			  tms_error_code_name(err.io_code), err.detail);
	}
	io_storage_free(st);
	free(root);
}

/* metadata.json parsing is bounded by max_json_bytes (io's budget) */
static void
test_json_budget(void)
{
	IcebergLimits lim;
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md = NULL;
	TmsError	err;
	const char *path = fx("pyiceberg-v1-overwrite/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json");

	memset(&fs, 0, sizeof(fs));
	iceberg_local_fileio(&io, &fs);
	memset(&lim, 0, sizeof(lim));
	lim.max_json_bytes = 4096;
	io.limits = &lim;
	CHECK(!iceberg_metadata_read(&io, path, &md, &err) && err.code == ICEBERG_ERR_LIMIT &&
		  strstr(err.message, "max_json_bytes") != NULL,
		  "metadata over a 4 KiB JSON budget: %s", err.message);
	lim.max_json_bytes = 0;		/* the default */
	CHECK(iceberg_metadata_read(&io, path, &md, &err), "under the default budget: %s",
		  err.message);
	iceberg_metadata_free(md);
	{
		IcebergLimits d;

		iceberg_limits_default(&d);
		CHECK(d.max_json_bytes == INT64_C(256) * 1024 * 1024, "default max_json_bytes");
	}
}

/* The layer's string map (iceberg_strmap, iceberg_internal.h). */
static void
test_strmap(void)
{
	IcebergStrMap m = {0};
	IcebergStrMap b = {0};
	char		key[32];
	char		keys[200][16];
	bool		added;
	int64_t    *v;
	int			i;
	bool		ok = true;

	CHECK(iceberg_strmap_get(&m, "a") == NULL, "strmap: empty map has no key");
	/* past several growths: every key keeps its value */
	for (i = 0; i < 1000; i++)
	{
		snprintf(key, sizeof(key), "s3://b/p/%d.parquet", i);
		v = iceberg_strmap_put(&m, key, i, &added);
		ok = ok && v != NULL && added && *v == i;
	}
	CHECK(ok && m.count == 1000 && m.nslots >= 2000, "strmap: 1000 keys, load at most 1/2");
	ok = true;
	for (i = 0; i < 1000; i++)
	{
		snprintf(key, sizeof(key), "s3://b/p/%d.parquet", i);
		v = iceberg_strmap_get(&m, key);
		ok = ok && v != NULL && *v == i;
	}
	CHECK(ok, "strmap: every key found with its value");
	/* a present key: not added, its value kept, and writable */
	v = iceberg_strmap_put(&m, "s3://b/p/7.parquet", -1, &added);
	CHECK(v != NULL && !added && *v == 7, "strmap: a present key is not added again");
	*v = 70;
	CHECK(*iceberg_strmap_get(&m, "s3://b/p/7.parquet") == 70, "strmap: the value is writable");
	CHECK(iceberg_strmap_get(&m, "s3://b/p/1000.parquet") == NULL &&
		  iceberg_strmap_get(&m, "") == NULL, "strmap: absent keys");
	CHECK(iceberg_strmap_put(&m, "", 5, NULL) != NULL &&
		  *iceberg_strmap_get(&m, "") == 5, "strmap: the empty key");
	iceberg_strmap_free(&m);
	CHECK(m.count == 0 && m.nslots == 0 && iceberg_strmap_get(&m, "s3://b/p/1.parquet") == NULL,
		  "strmap: free empties the map");

	/* borrowed keys: the map keeps the caller's pointers */
	b.borrow_keys = true;
	for (i = 0; i < 200; i++)
	{
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		iceberg_strmap_put(&b, keys[i], i, NULL);
	}
	ok = b.count == 200;
	for (i = 0; i < (int) b.nslots; i++)
		if (b.keys[i] != NULL)
			ok = ok && b.keys[i] == keys[b.values[i]];
	CHECK(ok, "strmap: borrowed keys are the caller's");
	iceberg_strmap_free(&b);
	CHECK(b.borrow_keys && b.count == 0, "strmap: free keeps borrow_keys");
}

int
main(void)
{
	size_t		i;

	io_init();					/* before any jansson use */
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";

	test_standalone_metadata();
	test_metadata_details();
	test_metadata_malformed();
	test_metadata_timestamps();
	test_metadata_identity();
	test_metadata_read_identity_head();
	test_metrics_saturate();
	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		test_fixture_table(&tables[i]);
	test_fixture_details();
	test_standalone_avro();
	test_handmade_avro();
	test_deflate_blocks();
	test_skip_shapes();
	test_walk_and_adapters();
	test_io_router();
	test_json_budget();
	test_strmap();
	test_truncation_and_corruption("standalone-avro/duckdb_v3_manifest_list.avro", 0);
	test_truncation_and_corruption("standalone-avro/manifest-list-v2-1.avro", 0);
	test_truncation_and_corruption("spark-v2-partitioned-bucket-identity/metadata/abf62b15-903b-40b6-9e6b-26bcdceac9b3-m0.avro", 1);
	test_truncation_and_corruption("pyiceberg-v2-partitioned-nullcodec/metadata/8574bca8-244f-4667-965a-03a41a3e4e0e-m0.avro", 1);

	return unit_done();
}
