/*-------------------------------------------------------------------------
 *
 * rewrite_test.c
 *	  Unit driver of the manifest rewrite (src/iceberg/maint/rewrite_manifests.c), the Avro
 *	  writer (avro_write.c) and the readers' raw spans: built by "make unit"
 *	  with the iceberg layer (UNIT_LAYER_rewrite).
 *
 * Tables are copies of the real fixtures (test/fixtures/iceberg) and
 * synthetic tables written by test/fixtures/synth.py into temporary
 * directories; a local IcebergWriter writes the results there.  Each
 * rewrite is checked with the C reader (the multiset of live entries by
 * raw data_file bytes, snapshot id and sequence numbers; EXISTING status;
 * kept records byte-identical) and with an independent reader,
 * test/unit/rewrite_check.py over test/catalog/avro_codec.py (also the
 * exact partition summaries).  Temporary directories are removed at the
 * end.  Prints "N passed, M failed" last.
 *
 * test/unit/rewrite_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iceberg/avro/avro_write.h"
#include "iceberg/iceberg.h"
#include "iceberg/maint/rewrite_manifests.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;
static char tmproot[256];

/* ---- a table in a temporary folder ---- */

typedef struct Table
{
	char		folder[512];
	char		prefix[512];	/* path prefix in metadata mapped to folder */
	char		mdpath[1024];
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
} Table;

/* Writer: map the prefix like IcebergLocalFS, strip file://, write. */
static int
local_write(void *arg, const char *path, const void *data, size_t len, TmsError *err)
{
	Table	   *t = arg;
	char		p[2048];
	FILE	   *f;

	if (t->prefix[0] && strncmp(path, t->prefix, strlen(t->prefix)) == 0)
		snprintf(p, sizeof(p), "%s%s", t->folder, path + strlen(t->prefix));
	else if (strncmp(path, "file://", 7) == 0)
		snprintf(p, sizeof(p), "%s", path + 7);
	else
		snprintf(p, sizeof(p), "%s", path);
	f = fopen(p, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
	{
		err->code = IO_ERR_STORAGE;
		snprintf(err->message, sizeof(err->message), "cannot write %.300s: %.100s", p, strerror(errno));
		return -1;
	}
	return 0;
}

/* A writer that always fails. */
static int
failing_write(void *arg, const char *path, const void *data, size_t len, TmsError *err)
{
	(void) arg;
	(void) path;
	(void) data;
	(void) len;
	err->code = IO_ERR_FORBIDDEN;
	snprintf(err->message, sizeof(err->message), "no writes here");
	return -1;
}

static int
run(const char *cmd)
{
	int			rc = system(cmd);

	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* Read metadata and set up io; false on failure. */
static bool
table_load(Table *t)
{
	TmsError	err;

	memset(&t->fs, 0, sizeof(t->fs));
	if (t->prefix[0])
	{
		t->fs.nmaps = 1;
		t->fs.maps[0].from = t->prefix;
		t->fs.maps[0].to = t->folder;
	}
	iceberg_local_fileio(&t->io, &t->fs);
	iceberg_metadata_free(t->md);
	t->md = NULL;
	if (!iceberg_metadata_read(&t->io, t->mdpath, &t->md, &err))
	{
		CHECK(false, "metadata %s: %s (%s)", t->mdpath, err.message, err.detail);
		return false;
	}
	return true;
}

/* Copy a fixture into a fresh temporary folder. */
static bool
table_fixture(Table *t, const char *name, const char *prefix, const char *md)
{
	char		cmd[2048];

	memset(t, 0, sizeof(*t));
	snprintf(t->folder, sizeof(t->folder), "%s/%s", tmproot, name);
	snprintf(t->prefix, sizeof(t->prefix), "%s", prefix);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s/%s' '%s'", t->folder, fixtures, name,
			 t->folder);
	if (run(cmd) != 0)
	{
		CHECK(false, "copy fixture %s", name);
		return false;
	}
	snprintf(t->mdpath, sizeof(t->mdpath), "%s/%s", t->folder, md);
	return table_load(t);
}

/* A synthetic table by synth.py; its last metadata file. */
static bool
table_synth(Table *t, const char *name, const char *opts)
{
	char		cmd[2048];
	FILE	   *p;

	memset(t, 0, sizeof(*t));
	snprintf(t->folder, sizeof(t->folder), "%s/%s", tmproot, name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && /usr/bin/python3 test/fixtures/synth.py --out '%s' "
			 "--no-data-bytes --seed 7 %s > /dev/null", t->folder, t->folder, opts);
	if (run(cmd) != 0)
	{
		CHECK(false, "synth %s", name);
		return false;
	}
	snprintf(cmd, sizeof(cmd), "ls '%s'/metadata/*.metadata.json | sort | tail -1", t->folder);
	p = popen(cmd, "r");
	if (p == NULL || fgets(t->mdpath, sizeof(t->mdpath), p) == NULL)
	{
		if (p)
			pclose(p);
		CHECK(false, "synth %s: no metadata", name);
		return false;
	}
	pclose(p);
	t->mdpath[strcspn(t->mdpath, "\n")] = '\0';
	return table_load(t);
}

static void
table_free(Table *t)
{
	iceberg_metadata_free(t->md);
	t->md = NULL;
}

/* ---- the C reader's view of a manifest list ---- */

typedef struct LiveSet
{
	int64_t		n;
	uint64_t	sum1,
				sum2;			/* multiset hashes */
	int64_t		not_existing_in_new;	/* entries of new manifests not
										 * EXISTING */
	int64_t		manifests;
	int64_t		new_manifests;
	int64_t		max_new_length;
	uint64_t	kept_raw;		/* hash of kept records' raw bytes */
} LiveSet;

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t		i;

	for (i = 0; i < n; i++)
	{
		h ^= b[i];
		h *= UINT64_C(1099511628211);
	}
	return h;
}

static uint64_t
mix(uint64_t h)
{
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	return h;
}

/*
 * Walks a manifest list (path) and its manifests; new_id marks the new
 * manifests (added_snapshot_id).  False on a read error.
 */
static bool
live_set(Table *t, const char *list_path, int64_t new_id, LiveSet *ls, TmsError *err)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	int			rc;

	memset(ls, 0, sizeof(*ls));
	if (!iceberg_manifest_list_open_path(&t->io, list_path, &lr, err))
		return false;
	while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
	{
		IcebergManifestReader *r;
		const IcebergManifestEntry *e;
		IcebergManifestFile copy = *mf;
		bool		is_new = mf->added_snapshot_id == new_id;
		int			rc2;

		ls->manifests++;
		if (is_new)
		{
			ls->new_manifests++;
			if (mf->manifest_length > ls->max_new_length)
				ls->max_new_length = mf->manifest_length;
		}
		else
			ls->kept_raw += mix(fnv(UINT64_C(1469598103934665603), mf->raw, mf->raw_len));
		if (!iceberg_manifest_open(&t->io, &copy, t->md->format_version,
								   ICEBERG_READ_RAW | ICEBERG_READ_PARTITION, &r, err))
		{
			iceberg_manifest_list_close(lr);
			return false;
		}
		while ((rc2 = iceberg_manifest_next(r, &e, err)) == 1)
		{
			uint64_t	h = UINT64_C(1469598103934665603);

			if (e->status == ICEBERG_STATUS_DELETED)
				continue;
			if (is_new && e->status != ICEBERG_STATUS_EXISTING)
				ls->not_existing_in_new++;
			h = fnv(h, &e->snapshot_id, 8);
			h = fnv(h, &e->sequence_number, 8);
			h = fnv(h, &e->file_sequence_number, 8);
			h = fnv(h, e->raw_data_file, e->raw_data_file_len);
			ls->n++;
			ls->sum1 += mix(h);
			ls->sum2 ^= mix(h ^ UINT64_C(0x9e3779b97f4a7c15)) * 3;
		}
		iceberg_manifest_close(r);
		if (rc2 < 0)
		{
			iceberg_manifest_list_close(lr);
			return false;
		}
	}
	iceberg_manifest_list_close(lr);
	return rc == 0;
}

/* ---- one rewrite, checked ---- */

typedef struct Expect
{
	int64_t		target;			/* option */
	int64_t		budget;
	int			min_replaced;	/* plan->nreplaced at least */
	int			max_new;		/* new manifests at most (0: no check) */
	int			min_new;
	int			kept;			/* -1: no check */
	bool		check_roll;		/* new manifests near the target */
	bool		expect_chunks;	/* budget smaller than the entries */
	bool		summaries;		/* new manifests must have partition summaries */
} Expect;

static bool
rewrite_and_check(Table *t, const char *label, const Expect *ex)
{
	IcebergRewriteOptions opt;
	IcebergRewritePlan *plan = NULL;
	IcebergRewriteResult res;
	IcebergWriter w = {t, local_write};
	TmsError	err;
	const IcebergSnapshot *cur = iceberg_metadata_current_snapshot(t->md);
	LiveSet		before,
				after;
	int64_t		id;
	bool		ok;
	char		cmd[4096];

	memset(&opt, 0, sizeof(opt));
	opt.target_size_bytes = ex->target;
	opt.spec_id = -1;
	opt.now_ms = 1700000000000;
	opt.memory_budget_bytes = ex->budget;
	if (!iceberg_rewrite_plan(&t->io, t->md, &opt, &plan, &err))
	{
		CHECK(false, "%s: plan: %s (%s)", label, err.message, err.detail);
		return false;
	}
	CHECK(plan->base_snapshot_id == t->md->current_snapshot_id, "%s: base", label);
	CHECK(plan->nreplaced + plan->nkept == plan->nmanifests, "%s: counts", label);
	CHECK(plan->nreplaced >= ex->min_replaced, "%s: %d replaced", label, plan->nreplaced);
	if (ex->kept >= 0)
		CHECK(plan->nkept == ex->kept, "%s: %d kept", label, plan->nkept);
	printf("  %s: %d manifests, %d to replace in %d groups, %d kept\n", label,
		   plan->nmanifests, plan->nreplaced, plan->ngroups, plan->nkept);
	if (plan->nreplaced == 0)
	{
		id = iceberg_new_snapshot_id(t->md);
		CHECK(!iceberg_rewrite_execute(&t->io, &w, t->md, plan, id, &res, &err) &&
			  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "%s: nothing to do refused", label);
		iceberg_rewrite_result_free(&res);
		iceberg_rewrite_plan_free(plan);
		return true;
	}
	if (!live_set(t, cur->manifest_list, -2, &before, &err))
	{
		CHECK(false, "%s: read before: %s (%s)", label, err.message, err.detail);
		iceberg_rewrite_plan_free(plan);
		return false;
	}
	id = iceberg_new_snapshot_id(t->md);
	CHECK(id > 0 && iceberg_metadata_snapshot(t->md, id) == NULL, "%s: snapshot id", label);
	ok = iceberg_rewrite_execute(&t->io, &w, t->md, plan, id, &res, &err);
	CHECK(ok, "%s: execute: %s (%s)", label, err.message, err.detail);
	if (!ok)
	{
		iceberg_rewrite_result_free(&res);
		iceberg_rewrite_plan_free(plan);
		return false;
	}
	CHECK(res.nwritten == res.manifests_added + 1, "%s: written %d", label, res.nwritten);
	CHECK(strcmp(res.written[res.nwritten - 1], res.snapshot.manifest_list) == 0,
		  "%s: list written last", label);
	CHECK(strstr(res.snapshot.manifest_list, "/metadata/snap-") != NULL, "%s: list name %s",
		  label, res.snapshot.manifest_list);
	CHECK(res.snapshot.parent_snapshot_id == cur->snapshot_id, "%s: parent", label);
	CHECK(res.snapshot.sequence_number ==
		  (t->md->format_version >= 2 ? t->md->last_sequence_number + 1 : 0), "%s: seq", label);
	CHECK(strcmp(res.snapshot.operation, "replace") == 0, "%s: operation", label);
	CHECK(res.snapshot.timestamp_ms == 1700000000000, "%s: timestamp", label);
	CHECK(res.manifests_replaced == plan->nreplaced, "%s: replaced %" PRId64, label,
		  res.manifests_replaced);
	if (ex->max_new > 0)
		CHECK(res.manifests_added <= ex->max_new, "%s: %" PRId64 " new manifests", label,
			  res.manifests_added);
	CHECK(res.manifests_added >= ex->min_new, "%s: %" PRId64 " new manifests (min %d)", label,
		  res.manifests_added, ex->min_new);
	if (ex->budget > 0)
		CHECK(res.cluster_peak_bytes <= ex->budget, "%s: peak %" PRId64 " over budget %" PRId64,
			  label, res.cluster_peak_bytes, ex->budget);
	if (ex->expect_chunks)
		CHECK(res.cluster_chunks > plan->ngroups, "%s: %" PRId64 " chunks", label,
			  res.cluster_chunks);
	{
		int			i;
		bool		has_created = false,
					has_total = false;

		for (i = 0; i < res.snapshot.nsummary; i++)
		{
			if (strcmp(res.snapshot.summary[i].key, "manifests-created") == 0)
				has_created = atoll(res.snapshot.summary[i].value) == res.manifests_added;
			if (strncmp(res.snapshot.summary[i].key, "total-", 6) == 0)
				has_total = true;
		}
		CHECK(has_created, "%s: summary manifests-created", label);
		CHECK(has_total || cur->nsummary <= 1, "%s: summary total-*", label);
	}

	/* the C reader's view */
	if (!live_set(t, res.snapshot.manifest_list, id, &after, &err))
		CHECK(false, "%s: read after: %s (%s)", label, err.message, err.detail);
	else
	{
		CHECK(after.n == before.n && after.sum1 == before.sum1 && after.sum2 == before.sum2,
			  "%s: live entries %" PRId64 " -> %" PRId64 " (multiset differs?)", label,
			  before.n, after.n);
		CHECK(after.n == res.entries_rewritten + (before.n - res.entries_rewritten),
			  "%s: entries", label);
		CHECK(after.not_existing_in_new == 0, "%s: non-EXISTING rewritten entries", label);
		CHECK(after.new_manifests == res.manifests_added, "%s: new manifests in list", label);
		CHECK(after.manifests == plan->nkept + res.manifests_added, "%s: list size", label);
		if (ex->check_roll)
			CHECK(after.max_new_length <= ex->target + 64 * 1024,
				  "%s: a new manifest of %" PRId64 " bytes, target %" PRId64, label,
				  after.max_new_length, ex->target);
	}

	/* the independent reader */
	snprintf(cmd, sizeof(cmd),
			 "%s/usr/bin/python3 test/unit/rewrite_check.py '%s' '%s' %" PRId64 " %d '%s' '%s'",
			 ex->summaries ? "REWRITE_CHECK_SUMMARIES=1 " : "", cur->manifest_list, res.snapshot.manifest_list, id, t->md->format_version,
			 t->prefix[0] ? t->prefix : "-", t->folder);
	CHECK(run(cmd) == 0, "%s: independent reader: %s", label, cmd);
	printf("  %s: %" PRId64 " entries rewritten into %" PRId64 " manifests (%" PRId64 " chunks, peak %" PRId64 " bytes)\n",
		   label, res.entries_rewritten, res.manifests_added, res.cluster_chunks,
		   res.cluster_peak_bytes);

	iceberg_rewrite_result_free(&res);
	iceberg_rewrite_plan_free(plan);
	return true;
}

/* ---- tests ---- */

static void
test_fixtures(void)
{
	static const struct
	{
		const char *folder;
		const char *prefix;
		const char *md;
	}			fx[] = {
		{"spark-v2-mor-posdeletes", "s3a://hyperparam-iceberg/spark/bunnies",
		"metadata/v5.metadata.json"},
		{"spark-v2-partitioned-bucket-identity", "s3a://hyperparam-iceberg/spark/rename_column",
		"metadata/v3.metadata.json"},
		{"java-v2-partitioned-eqdeletes",
			"data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
		"metadata/v6.metadata.json"},
		{"pyiceberg-v1-overwrite", "data/persistent/iceberg_v1_repro/repro/merch_v1",
		"metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json"},
		{"pyiceberg-v2-partitioned-nullcodec",
			"file://data/persistent/map_stats/default.db/map_stats",
		"metadata/00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json"},
		{"spark-v1-gzip-metadata", "lineitem_iceberg_gz", "metadata/v2.gz.metadata.json"},
		{"spark-v1-legacy-manifests-field",
			"data/persistent/iceberg_v1_deprecated/default/legacy_v1",
		"metadata/v2.metadata.json"},
	};
	size_t		i;
	int			rewritten = 0;

	for (i = 0; i < sizeof(fx) / sizeof(fx[0]); i++)
	{
		Table		t;
		Expect		ex;
		const IcebergSnapshot *cur;

		if (!table_fixture(&t, fx[i].folder, fx[i].prefix, fx[i].md))
			continue;
		cur = iceberg_metadata_current_snapshot(t.md);
		if (cur != NULL && cur->manifest_list == NULL)
		{
			IcebergRewritePlan *plan;
			TmsError	err;

			CHECK(!iceberg_rewrite_plan(&t.io, t.md, NULL, &plan, &err) &&
				  err.code == ICEBERG_ERR_UNSUPPORTED, "%s: inline manifests refused",
				  fx[i].folder);
			table_free(&t);
			continue;
		}
		memset(&ex, 0, sizeof(ex));
		ex.kept = -1;
		if (rewrite_and_check(&t, fx[i].folder, &ex))
			rewritten++;
		table_free(&t);
	}
	CHECK(rewritten >= 5, "%d fixture tables rewritten or rightly left alone", rewritten);
}

static void
test_thousand(void)
{
	Table		t;
	Expect		ex;

	/* 1,000 one-file data manifests (4 partitions) and one delete manifest */
	if (!table_synth(&t, "thousand", "--data-files 1000 --files-per-manifest 1 "
					 "--partitions 4 --pos-deletes 1 --codec deflate"))
		return;
	memset(&ex, 0, sizeof(ex));
	ex.min_replaced = 1000;
	ex.max_new = 2;
	ex.min_new = 1;
	ex.kept = 1;				/* the lone delete manifest */
	ex.summaries = true;
	rewrite_and_check(&t, "1000 manifests", &ex);

	/* again with a small target: the outputs roll */
	table_load(&t);
	memset(&ex, 0, sizeof(ex));
	ex.target = 48 * 1024;
	ex.min_replaced = 1000;
	ex.min_new = 3;
	ex.kept = 1;
	ex.check_roll = true;
	rewrite_and_check(&t, "1000 manifests, 48 KiB target", &ex);
	table_free(&t);
}

static void
test_v1_and_unpartitioned(void)
{
	Table		t;
	Expect		ex;

	if (table_synth(&t, "v1", "--format-version 1 --snapshots 3 --data-files 300 "
					"--files-per-manifest 10 --partitions 3 --codec null"))
	{
		memset(&ex, 0, sizeof(ex));
		ex.min_replaced = 30;
		ex.max_new = 1;
		ex.min_new = 1;
		ex.kept = 0;
		rewrite_and_check(&t, "v1 table", &ex);
		table_free(&t);
	}
	if (table_synth(&t, "unpart", "--snapshots 4 --data-files 400 --files-per-manifest 7 "
					"--pos-deletes 20 --eq-deletes 20"))
	{
		memset(&ex, 0, sizeof(ex));
		ex.min_replaced = 40;
		ex.max_new = 2;			/* data + deletes apart */
		ex.min_new = 2;
		ex.kept = 0;
		rewrite_and_check(&t, "unpartitioned with deletes", &ex);
		table_free(&t);
	}
}

static void
test_budget(void)
{
	Table		t;
	Expect		ex;

	if (!table_synth(&t, "budget", "--snapshots 2 --data-files 20000 --files-per-manifest 100 "
					 "--partitions 50"))
		return;
	memset(&ex, 0, sizeof(ex));
	ex.budget = 256 * 1024;
	ex.min_replaced = 200;
	ex.min_new = 1;
	ex.kept = 0;
	ex.expect_chunks = true;
	rewrite_and_check(&t, "20,000 entries in a 256 KiB budget", &ex);
	table_free(&t);
}

/*
 * Every partition type the summaries support (rewrite_types.py), nulls,
 * NaN, -0.0, negative decimals; two v1-schema manifests in the v2 table
 * must be kept.
 */
static void
test_types(void)
{
	Table		t;
	Expect		ex;
	char		cmd[1200];

	memset(&t, 0, sizeof(t));
	snprintf(t.folder, sizeof(t.folder), "%s/types", tmproot);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 test/unit/rewrite_types.py '%s' > /dev/null",
			 t.folder);
	if (run(cmd) != 0)
	{
		CHECK(false, "rewrite_types.py");
		return;
	}
	snprintf(t.mdpath, sizeof(t.mdpath), "%s/metadata/v1.metadata.json", t.folder);
	if (!table_load(&t))
		return;
	memset(&ex, 0, sizeof(ex));
	ex.min_replaced = 12;
	ex.max_new = 1;
	ex.min_new = 1;
	ex.kept = 2;
	ex.summaries = true;
	rewrite_and_check(&t, "typed partitions", &ex);
	table_free(&t);
}

/* Conflicts, refusals, failing writers, truncated and garbage inputs. */
static void
test_failures(void)
{
	Table		t;
	IcebergRewritePlan *plan;
	IcebergRewriteResult res;
	TmsError	err;
	IcebergWriter w = {NULL, local_write};
	IcebergWriter fw = {NULL, failing_write};
	int64_t		base;
	int			fv;
	int			i,
				victim = -1;
	char		local[2048];
	FILE	   *f;
	long		sz;

	if (!table_synth(&t, "fail", "--data-files 40 --files-per-manifest 2 --partitions 2"))
		return;
	w.arg = &t;
	CHECK(iceberg_rewrite_plan(&t.io, t.md, NULL, &plan, &err), "fail: plan: %s", err.message);
	if (plan == NULL)
		return;
	CHECK(plan->ngroups == 1 && plan->groups[0].nreplaced == 20 &&
		  plan->groups[0].expected_outputs == 1, "fail: one group of 20");

	/* conflict: the table moved */
	base = plan->base_snapshot_id;
	plan->base_snapshot_id = base + 1;
	CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, 12345, &res, &err) &&
		  err.code == ICEBERG_ERR_CONFLICT, "fail: conflict (%s)", err.message);
	iceberg_rewrite_result_free(&res);
	plan->base_snapshot_id = base;

	/* bad snapshot ids */
	CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, base, &res, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "fail: existing snapshot id");
	iceberg_rewrite_result_free(&res);
	CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, -5, &res, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "fail: negative snapshot id");
	iceberg_rewrite_result_free(&res);

	/*
	 * format v3 whose snapshot has no first-row-id (upgraded from v2, no row
	 * ids assigned yet) refused; so is a format above 3
	 */
	fv = t.md->format_version;
	t.md->format_version = 3;
	CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, 12345, &res, &err) &&
		  err.code == ICEBERG_ERR_UNSUPPORTED && strstr(err.message, "row ids") != NULL &&
		  err.hint[0] != '\0', "fail: v3 execute refused (%s)", err.message);
	iceberg_rewrite_result_free(&res);
	{
		IcebergRewritePlan *p3;

		CHECK(!iceberg_rewrite_plan(&t.io, t.md, NULL, &p3, &err) &&
			  err.code == ICEBERG_ERR_UNSUPPORTED && strstr(err.message, "row ids") != NULL,
			  "fail: v3 plan refused (%s)", err.message);
	}
	t.md->format_version = 4;
	CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, 12345, &res, &err) &&
		  err.code == ICEBERG_ERR_UNSUPPORTED, "fail: v4 execute refused");
	iceberg_rewrite_result_free(&res);
	t.md->format_version = fv;

	/* a failing writer: the error is an io error, the attempted object listed */
	CHECK(!iceberg_rewrite_execute(&t.io, &fw, t.md, plan, 12345, &res, &err) &&
		  err.code == ICEBERG_ERR_IO && err.io_code == IO_ERR_FORBIDDEN &&
		  res.nwritten == 1, "fail: failing writer (%s, %d written)", err.message, res.nwritten);
	iceberg_rewrite_result_free(&res);

	/* truncate then garble one planned manifest */
	for (i = 0; i < plan->nmanifests; i++)
		if (plan->manifests[i].group == 0)
			victim = i;
	snprintf(local, sizeof(local), "%s", plan->manifests[victim].path + strlen("file://"));
	f = fopen(local, "r+b");
	if (f != NULL)
	{
		unsigned char *buf;

		fseek(f, 0, SEEK_END);
		sz = ftell(f);
		buf = io_malloc((size_t) sz);
		fseek(f, 0, SEEK_SET);
		if (buf != NULL && fread(buf, 1, (size_t) sz, f) == (size_t) sz)
		{
			long		cut;

			fclose(f);
			for (cut = sz - 1; cut > 0; cut = cut * 2 / 3)
			{
				f = fopen(local, "wb");
				fwrite(buf, 1, (size_t) cut, f);
				fclose(f);
				CHECK(!iceberg_rewrite_execute(&t.io, &w, t.md, plan, 12345, &res, &err) &&
					  err.code != ICEBERG_OK, "fail: truncated to %ld accepted", cut);
				iceberg_rewrite_result_free(&res);
			}
			for (i = 0; i < 40; i++)
			{
				unsigned char *g = io_malloc((size_t) sz);
				long		k;

				memcpy(g, buf, (size_t) sz);
				srand((unsigned) i);
				for (k = 0; k < 1 + i % 5; k++)
					g[200 + rand() % (sz - 200)] ^= (unsigned char) (1 + rand() % 255);
				f = fopen(local, "wb");
				fwrite(g, 1, (size_t) sz, f);
				fclose(f);
				/* may succeed when the flipped bytes are in a string */
				if (!iceberg_rewrite_execute(&t.io, &w, t.md, plan, 12345, &res, &err))
					CHECK(err.code != ICEBERG_OK, "fail: garbage error has a code");
				else
					CHECK(res.snapshot.manifest_list != NULL, "fail: garbage ok has a list");
				iceberg_rewrite_result_free(&res);
				io_free(g);
			}
			f = fopen(local, "wb");
			fwrite(buf, 1, (size_t) sz, f);
			fclose(f);
		}
		else
			fclose(f);
		io_free(buf);
	}
	else
		CHECK(false, "fail: open %s", local);

	/* a garbage manifest list: plan fails cleanly */
	{
		const IcebergSnapshot *cur = iceberg_metadata_current_snapshot(t.md);
		IcebergRewritePlan *p2;

		snprintf(local, sizeof(local), "%s", cur->manifest_list + strlen("file://"));
		f = fopen(local, "r+b");
		if (f != NULL)
		{
			fseek(f, 0, SEEK_END);
			sz = ftell(f);
			if (ftruncate(fileno(f), sz / 2) != 0)
				CHECK(false, "truncate");
			fclose(f);
			CHECK(!iceberg_rewrite_plan(&t.io, t.md, NULL, &p2, &err) && err.code != ICEBERG_OK,
				  "fail: truncated list accepted");
		}
	}
	iceberg_rewrite_plan_free(plan);
	table_free(&t);
}

/* Empty table; the writer's own errors; raw spans of the reader. */
static void
test_small_things(void)
{
	IcebergAvroWriter *aw;
	TmsError	err;
	const uint8_t *data;
	size_t		len;
	IcebergAvroWField f[3];
	const char *schema =
	"{\"type\":\"record\",\"name\":\"r\",\"fields\":["
	"{\"name\":\"a\",\"type\":\"int\",\"field-id\":1},"
	"{\"name\":\"b\",\"type\":[\"null\",\"string\"],\"field-id\":2},"
	"{\"name\":\"c\",\"type\":{\"type\":\"array\",\"items\":\"long\"},\"field-id\":3}]}";
	IcebergAvroWValue items[2];

	CHECK(iceberg_avro_writer_create(schema, NULL, 0, ICEBERG_AVRO_WRITE_DEFLATE, -1, 0, &aw, &err),
		  "writer create: %s", err.message);
	if (aw == NULL)
		return;
	memset(f, 0, sizeof(f));
	memset(items, 0, sizeof(items));
	f[0].field_id = 2;
	f[0].v.kind = AVW_STRING;
	f[0].v.p = "x";
	f[0].v.len = 1;
	CHECK(!iceberg_avro_writer_add(aw, f, 1, &err) && strstr(err.message, "required field absent"),
		  "absent required field: %s", err.message);
	f[1].field_id = 1;
	f[1].v.kind = AVW_LONG;
	f[1].v.l = INT64_C(1) << 40;
	CHECK(!iceberg_avro_writer_add(aw, f, 2, &err), "int out of range");
	f[1].v.l = -7;
	items[0].kind = AVW_LONG;
	items[0].l = 1;
	items[1].kind = AVW_LONG;
	items[1].l = -300;
	f[2].field_id = 3;
	f[2].v.kind = AVW_ARRAY;
	f[2].v.items = items;
	f[2].v.nitems = 2;
	CHECK(iceberg_avro_writer_add(aw, f, 3, &err), "add: %s", err.message);
	CHECK(iceberg_avro_writer_count(aw) == 1, "count");
	CHECK(iceberg_avro_writer_finish(aw, &data, &len, &err), "finish");
	{
		FILE	   *o;
		char		path[600],
					cmd[1400];

		snprintf(path, sizeof(path), "%s/small.avro", tmproot);
		o = fopen(path, "wb");
		fwrite(data, 1, len, o);
		fclose(o);
		snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c \"import sys; sys.path.insert(0,'test/catalog'); "
				 "import avro_codec; s,m,r=avro_codec.read_container(open('%s','rb').read()); "
				 "assert r==[{'a':-7,'b':'x','c':[1,-300]}], r; assert m['avro.codec']==b'deflate'\"",
				 path);
		CHECK(run(cmd) == 0, "python reads the writer's file");
	}
	iceberg_avro_writer_free(aw);
	CHECK(!iceberg_avro_writer_create("{\"type\":\"record\",\"fields\":[{\"name\":\"a\",\"type\":\"nope\"}],\"name\":\"x\"}",
									  NULL, 0, 0, -1, 0, &aw, &err) && err.code == ICEBERG_ERR_MALFORMED,
		  "bad schema refused");
	CHECK(!iceberg_avro_writer_create("[1,", NULL, 0, 0, -1, 0, &aw, &err), "bad json refused");

	/* an empty table: nothing to do */
	{
		Table		t;
		IcebergRewritePlan *plan;

		if (table_synth(&t, "empty", "--snapshots 0 --data-files 0") ||
			table_fixture(&t, "pyiceberg-v1-overwrite", "data/persistent/iceberg_v1_repro/repro/merch_v1",
						  "metadata/00000-c478e8ee-78c2-48c0-b618-24aa51a4b560.metadata.json"))
		{
			CHECK(iceberg_rewrite_plan(&t.io, t.md, NULL, &plan, &err) &&
				  plan->base_snapshot_id == -1 && plan->nmanifests == 0, "empty table plan");
			iceberg_rewrite_plan_free(plan);
			table_free(&t);
		}
	}
}

int
main(void)
{
	char		cmd[512];

	io_init();
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";
	snprintf(tmproot, sizeof(tmproot), "/tmp/tms-rewrite-test-XXXXXX");
	if (mkdtemp(tmproot) == NULL)
	{
		FAIL("cannot make a temporary directory");
		return unit_done();
	}
	test_small_things();
	test_fixtures();
	test_thousand();
	test_v1_and_unpartitioned();
	test_budget();
	test_types();
	test_failures();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmproot);
	if (nfailed == 0)
		(void) run(cmd);
	else
		printf("(left %s for inspection)\n", tmproot);
	return unit_done();
}
