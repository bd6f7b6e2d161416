/*-------------------------------------------------------------------------
 *
 * posdel_test.c
 *	  Unit driver of the rewrite of position delete files, the plain-C half
 *	  (src/iceberg/compact/posdel_plan.c): the plan on the Spark fixture
 *	  whose position delete file is dangling (its data file was replaced:
 *	  proven by the sequence numbers; sizes, rewrite-all,
 *	  min-input-files), the group line of such a plan and its strict
 *	  decoding (schema, order, keep list, and any group line's name
 *	  mapping), the metrics a new delete file's
 *	  entry keeps, and the refusal of format v3.  Built by "make unit"
 *	  with the iceberg layer (UNIT_LAYER_posdel).  Prints "N passed, M
 *	  failed" last.
 *
 * test/unit/posdel_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_wire.h"
#include "iceberg/compact/posdel.h"
#include "iceberg/iceberg.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;

static void test_line(const IcebergTableMetadata *md, const IcebergCompactPlan *p);

static void
default_options(IcebergCompactOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->delete_file_threshold = -1;
	o->min_file_size_bytes = -1;
	o->max_file_size_bytes = -1;
	o->output_spec_id = -1;
}

/* Open the Spark fixture (one data file, one position delete file). */
static IcebergTableMetadata *
open_fixture(IcebergLocalFS *fs, IcebergFileIO *io)
{
	IcebergTableMetadata *md;
	TmsError	err;
	static char folder[1024];
	char		path[1200];

	memset(fs, 0, sizeof(*fs));
	snprintf(folder, sizeof(folder), "%s/spark-v2-mor-posdeletes", fixtures);
	fs->nmaps = 1;
	fs->maps[0].from = "s3a://hyperparam-iceberg/spark/bunnies";
	fs->maps[0].to = folder;
	iceberg_local_fileio(io, fs);
	snprintf(path, sizeof(path), "%s/metadata/v5.metadata.json", folder);
	if (!iceberg_metadata_read(io, path, &md, &err))
	{
		CHECK(false, "fixture: %s %s", err.message, err.detail);
		return NULL;
	}
	return md;
}

static void
test_plan(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md = open_fixture(&fs, &io);
	IcebergCompactPlan *p = NULL;
	IcebergCompactOptions o;
	TmsError	err;

	if (md == NULL)
		return;
	default_options(&o);

	/*
	 * The fixture's delete file (sequence number 2) points at a data file
	 * that a copy-on-write commit (3) replaced: the live data file is newer,
	 * so no delete of it can apply; it is proven dangling, and a group of it
	 * alone is rewritten into nothing, whatever min-input-files says.
	 */
	CHECK(iceberg_posdel_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		CHECK(p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES && p->ngroups == 1 &&
			  p->candidates == 1 && p->dangling == 1 && p->data_files == 1 &&
			  p->groups[0].reasons == ICEBERG_COMPACT_DANGLING &&
			  p->groups[0].ndangling == 1 && p->groups[0].nkeep == 0,
			  "one dangling file, its own group: %d groups, %" PRId64 " candidates, %" PRId64
			  " data files", p->ngroups, p->candidates, p->data_files);
		CHECK(p->target_file_size_bytes == ICEBERG_POSDEL_DEFAULT_TARGET,
			  "the delete files' target: %" PRId64, p->target_file_size_bytes);
		iceberg_compact_plan_free(p);
	}
	/* rewrite-all: the same group, for both reasons */
	o.rewrite_all = true;
	o.min_input_files = 10;
	CHECK(iceberg_posdel_plan(&io, md, &o, &p, &err), "plan: %s", err.message);
	if (p)
	{
		CHECK(p->ngroups == 1 && p->nfiles == 1 && p->groups[0].nfiles == 1 &&
			  p->groups[0].reasons == (ICEBERG_COMPACT_REWRITE_ALL | ICEBERG_COMPACT_DANGLING) &&
			  p->groups[0].expected_outputs == 1 && p->groups[0].nkeep == 0,
			  "rewrite-all: one group, no data file kept (%d groups)", p->ngroups);
		if (p->ngroups == 1)
		{
			/* a kept data file, to see it on the line */
			IcebergPosdelKeep k = {(char *) "s3a://b/t/data/x.parquet", 1};

			p->groups[0].keep = &k;
			p->groups[0].nkeep = 1;
			test_line(md, p);
			p->groups[0].keep = NULL;
			p->groups[0].nkeep = 0;
		}
		iceberg_compact_plan_free(p);
	}
	/* sizes: inside [min, max], the dangling file is still a candidate */
	default_options(&o);
	o.min_file_size_bytes = 0;
	o.max_file_size_bytes = INT64_C(1) << 40;
	CHECK(iceberg_posdel_plan(&io, md, &o, &p, &err) && p->candidates == 1 && p->ngroups == 1,
		  "a dangling file inside the size range");
	iceberg_compact_plan_free(p);
	/* a target that is not between min and max */
	o.target_file_size_bytes = 100;
	o.min_file_size_bytes = 200;
	o.max_file_size_bytes = -1;
	CHECK(!iceberg_posdel_plan(&io, md, &o, &p, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "min above the target refused");
	CHECK(!iceberg_posdel_check_options(md, &o, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "check_options agrees");
	iceberg_metadata_free(md);
}

/* The group line of a rewrite of position deletes, and its decoding. */
static void
test_line(const IcebergTableMetadata *md, const IcebergCompactPlan *p)
{
	const char *uris[1] = {"file:///tmp/d.parquet"};
	TmsError	err;
	char	   *line;
	IcebergCompactJob *job = NULL;

	line = iceberg_compact_job_json(md, p, 0, iceberg_posdel_metrics, ICEBERG_POSDEL_NMETRICS,
									uris, NULL, "s3a://b/t/data/", "file:///tmp/out/", "x",
									"zstd", -1, &err);
	CHECK(line != NULL, "group line: %s", err.message);
	if (line == NULL)
		return;
	CHECK(iceberg_compact_job_parse(line, strlen(line), &job, &err), "parse: %s %s",
		  err.message, err.detail);
	if (job != NULL)
	{
		CHECK(job->filter_live && job->nkeep == p->groups[0].nkeep &&
			  strcmp(job->keep[0].path, p->groups[0].keep[0].path) == 0 &&
			  job->keep[0].seq == p->groups[0].keep[0].seq, "the keep list");
		CHECK(job->schema->ncolumns == 2 && job->schema->columns[0].id == ICEBERG_POS_PATH_ID &&
			  job->schema->columns[1].id == ICEBERG_POS_POS_ID &&
			  job->schema->columns[0].required, "the position delete schema");
		CHECK(job->sort != NULL && !job->sort->zorder && job->sort->nfields == 2 &&
			  job->sort->fields[0].source_id == ICEBERG_POS_PATH_ID &&
			  job->sort->fields[1].source_id == ICEBERG_POS_POS_ID &&
			  !job->sort->fields[0].descending, "sorted by file_path, pos");
		CHECK(job->nmetrics == 2 && job->metrics[0].mode == ICEBERG_METRICS_FULL &&
			  job->metrics[1].mode == ICEBERG_METRICS_FULL, "full metrics");
		CHECK(job->ninputs == 1 && job->ndeletes == 0, "the delete file is the input");
		iceberg_compact_job_free(job);
	}
	io_free(line);

	/* a bad keep list is refused */
	{
		static const char *bad[] = {
			"\"keep\": 3",
			"\"keep\": [{\"path\": 1, \"seq\": 1}]",
			"\"keep\": [{\"path\": \"a\", \"seq\": -1}]",
			"\"keep\": [{\"path\": \"a\"}]",
		};

		for (int i = 0; i < (int) (sizeof(bad) / sizeof(bad[0])); i++)
		{
			char		text[2048];

			snprintf(text, sizeof(text),
					 "{\"type\": \"group\", \"group\": 0, \"schema\": %s,"
					 " \"inputs\": [{\"path\": \"a\", \"uri\": \"a\", \"records\": 1, \"size\": 1, \"seq\": 1}],"
					 " \"deletes\": [], \"output\": {\"dir\": \"d/\", \"upload_dir\": \"d/\", \"prefix\": \"p\","
					 " \"files\": 1, \"compression\": \"zstd\", \"metrics\": []}, %s}",
					 "{\"type\": \"struct\", \"schema-id\": 0, \"fields\": [{\"id\": 2147483546,"
					 " \"name\": \"file_path\", \"required\": true, \"type\": \"string\"}]}", bad[i]);
			job = NULL;
			CHECK(!iceberg_compact_job_parse(text, strlen(text), &job, &err) &&
				  err.code == ICEBERG_ERR_MALFORMED, "bad keep %d refused", i);
			iceberg_compact_job_free(job);
		}
	}

	/* a group line's name mapping (any group line): a JSON array as text */
	{
		static const char *nm[] = {
			"\"name_mapping\": \"[{\\\"field-id\\\": 1, \\\"names\\\": [\\\"a\\\"]}]\"",
			"\"name_mapping\": \"{}\"",
			"\"name_mapping\": \"[\"",
			"\"name_mapping\": []",
		};

		for (int i = 0; i < (int) (sizeof(nm) / sizeof(nm[0])); i++)
		{
			char		text[2048];
			bool		ok;

			snprintf(text, sizeof(text),
					 "{\"type\": \"group\", \"group\": 0, \"schema\": %s,"
					 " \"inputs\": [{\"path\": \"a\", \"uri\": \"a\", \"records\": 1, \"size\": 1, \"seq\": 1}],"
					 " \"deletes\": [], \"output\": {\"dir\": \"d/\", \"upload_dir\": \"d/\", \"prefix\": \"p\","
					 " \"files\": 1, \"compression\": \"zstd\", \"metrics\": []}, %s}",
					 "{\"type\": \"struct\", \"schema-id\": 0, \"fields\": [{\"id\": 1,"
					 " \"name\": \"a\", \"required\": true, \"type\": \"string\"}]}", nm[i]);
			job = NULL;
			ok = iceberg_compact_job_parse(text, strlen(text), &job, &err);
			if (i == 0)
				CHECK(ok && job->name_mapping != NULL &&
					  strcmp(job->name_mapping, "[{\"field-id\": 1, \"names\": [\"a\"]}]") == 0,
					  "a name mapping kept as its text: %s", ok ? "" : err.message);
			else
				CHECK(!ok && err.code == ICEBERG_ERR_MALFORMED, "bad name mapping %d refused", i);
			iceberg_compact_job_free(job);
		}
	}
}

/* As Iceberg's PositionDeleteWriter: counts never, bounds for one data file. */
static void
test_metrics(void)
{
	IcebergColumnMetrics m[3];
	IcebergCompactOutput o;
	uint8_t		a[] = "s3://b/t/data/a.parquet";
	uint8_t		b[] = "s3://b/t/data/b.parquet";
	uint8_t		p0[8] = {0};

	memset(m, 0, sizeof(m));
	memset(&o, 0, sizeof(o));
	o.metrics = m;
	o.nmetrics = 3;
	m[0].id = ICEBERG_POS_PATH_ID;
	m[0].has_lower = m[0].has_upper = true;
	m[0].lower = a;
	m[0].lower_len = sizeof(a) - 1;
	m[0].upper = a;
	m[0].upper_len = sizeof(a) - 1;
	m[1].id = ICEBERG_POS_POS_ID;
	m[1].has_lower = m[1].has_upper = true;
	m[1].lower = m[1].upper = p0;
	m[1].lower_len = m[1].upper_len = 8;
	m[2].id = 7;
	for (int which = 0; which < 4; which++)
		CHECK(!iceberg_posdel_metric_kept(&o, &m[0], which) &&
			  !iceberg_posdel_metric_kept(&o, &m[1], which) &&
			  iceberg_posdel_metric_kept(&o, &m[2], which), "counts of kind %d", which);
	CHECK(iceberg_posdel_metric_kept(&o, &m[0], 4) && iceberg_posdel_metric_kept(&o, &m[1], 5),
		  "one data file: its bounds are kept");
	m[0].upper = b;
	CHECK(!iceberg_posdel_metric_kept(&o, &m[0], 4) && !iceberg_posdel_metric_kept(&o, &m[1], 5) &&
		  !iceberg_posdel_metric_kept(&o, &m[0], 5), "several data files: no bounds");
	m[0].has_upper = false;
	CHECK(!iceberg_posdel_metric_kept(&o, &m[1], 4), "no file_path bound: none kept");
}

/* Format v3 is planned (its deletes become deletion vectors). */
static void
test_versions(void)
{
	static const char *md_text =
	"{\"format-version\": %d, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
	" \"location\": \"s3://b/t\", \"last-sequence-number\": 0, \"last-updated-ms\": 1,"
	" \"last-column-id\": 1, \"current-schema-id\": 0, %s"
	" \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": ["
	"  {\"id\": 1, \"name\": \"id\", \"required\": true, \"type\": \"long\"}]}],"
	" \"default-spec-id\": 0, \"last-partition-id\": 999,"
	" \"partition-specs\": [{\"spec-id\": 0, \"fields\": []}],"
	" \"properties\": {\"write.delete.target-file-size-bytes\": \"1000\"},"
	" \"current-snapshot-id\": -1, \"snapshots\": [], \"snapshot-log\": [], \"metadata-log\": [],"
	" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}], \"default-sort-order-id\": 0}";
	IcebergLocalFS fs;
	IcebergFileIO io;
	char		text[4096];
	IcebergTableMetadata *md;
	IcebergCompactPlan *p = NULL;
	IcebergCompactOptions o;
	TmsError	err;

	memset(&fs, 0, sizeof(fs));
	iceberg_local_fileio(&io, &fs);
	default_options(&o);
	snprintf(text, sizeof(text), md_text, 3, "\"next-row-id\": 0,");
	if (iceberg_metadata_parse(text, strlen(text), NULL, &md, &err))
	{
		CHECK(iceberg_posdel_plan(&io, md, &o, &p, &err) && p->ngroups == 0 &&
			  p->format_version == 3, "an empty v3 table: no group: %s", err.message);
		iceberg_compact_plan_free(p);
		p = NULL;
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "v3 metadata: %s", err.message);
	snprintf(text, sizeof(text), md_text, 2, "");
	if (iceberg_metadata_parse(text, strlen(text), NULL, &md, &err))
	{
		CHECK(iceberg_posdel_plan(&io, md, &o, &p, &err) && p->ngroups == 0 &&
			  p->target_file_size_bytes == 1000 && p->min_file_size_bytes == 750 &&
			  p->max_file_size_bytes == 1800,
			  "an empty v2 table: no group, the table's delete target");
		iceberg_compact_plan_free(p);
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "v2 metadata: %s", err.message);
}

int
main(void)
{
	io_init();
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";
	test_plan();
	test_metrics();
	test_versions();
	return unit_done();
}
