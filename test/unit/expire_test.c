/*-------------------------------------------------------------------------
 *
 * expire_test.c
 *	  Unit tests of snapshot expiry, orphan cleanup and the REST commit
 *	  bodies of src/iceberg (expire.h, orphan.h, commit_request.h): the retention
 *	  rules of Iceberg's RemoveSnapshots on hand-built metadata; the files
 *	  of expired snapshots on the real fixture tables and on synthetic
 *	  tables (test/fixtures/synth.py, when python3 is there), checked by
 *	  brute force (walk old and kept, set difference); the valid-file set
 *	  with prefix mismatches, equal schemes and authorities, version-hint
 *	  and statistics; commit JSON parsed back with jansson; and random
 *	  mutations of metadata that must never crash.
 *
 * Built by "make unit" with src/iceberg and src/io (UNIT_LAYER_expire).
 * Fixtures: $ICEBERG_FIXTURES, else test/fixtures/iceberg (run from the
 * repository top).  With EXPIRE_BENCH=<metadata.json of a big table> it
 * only measures memory (bench/expire_orphan_bench.sh).  The last line
 * printed is "N passed, M failed"; exit status non-zero when M > 0.
 *
 * test/unit/expire_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "iceberg/write/commit_request.h"
#include "iceberg/maint/expire.h"
#include "iceberg/iceberg.h"
#include "iceberg/maint/orphan.h"
#include "iceberg/maint/pathhash.h"
#include "io/io.h"
#include "unit.h"

static const char *fixtures;

/* ------------------------------------------------------------------------
 * Hand-built metadata
 * ------------------------------------------------------------------------
 */

typedef struct Snap
{
	int64_t		id;
	int64_t		parent;			/* -1 none */
	int64_t		ts;
} Snap;

/* v2 metadata JSON with these snapshots, refs (a JSON object text or
 * NULL), properties (JSON object text or NULL) and current snapshot. */
static char *
build_json(const Snap *s, int n, const char *refs, const char *props,
		   int64_t current)
{
	size_t		cap = 4096 + (size_t) n * 256 + (refs ? strlen(refs) : 0) +
	(props ? strlen(props) : 0);
	char	   *b = io_malloc(cap);
	size_t		len = 0;
	int			i;

	len += snprintf(b + len, cap - len,
					"{\"format-version\": 2, \"table-uuid\": \"9c12d441-03fe-4693-9a96-a0705ddf69c1\","
					" \"location\": \"s3://bucket/wh/t\", \"last-sequence-number\": %d,"
					" \"last-updated-ms\": 1000, \"last-column-id\": 1,"
					" \"current-schema-id\": 0, \"schemas\": [{\"type\": \"struct\", \"schema-id\": 0, \"fields\": []}],"
					" \"default-spec-id\": 0, \"partition-specs\": [{\"spec-id\": 0, \"fields\": []}],"
					" \"last-partition-id\": 999, \"default-sort-order-id\": 0,"
					" \"sort-orders\": [{\"order-id\": 0, \"fields\": []}],"
					" \"properties\": %s, \"snapshots\": [", n, props ? props : "{}");
	for (i = 0; i < n; i++)
	{
		char		parent[64] = "";

		if (s[i].parent >= 0)
			snprintf(parent, sizeof(parent), " \"parent-snapshot-id\": %lld,",
					 (long long) s[i].parent);
		len += snprintf(b + len, cap - len,
						"%s{\"snapshot-id\": %lld,%s \"sequence-number\": %d,"
						" \"timestamp-ms\": %lld, \"manifest-list\": \"s3://bucket/wh/t/metadata/snap-%lld.avro\","
						" \"summary\": {\"operation\": \"append\"}}",
						i ? ", " : "", (long long) s[i].id, parent,
						i + 1, (long long) s[i].ts, (long long) s[i].id);
	}
	if (current >= 0)
		len += snprintf(b + len, cap - len, "], \"current-snapshot-id\": %lld", (long long) current);
	else
		len += snprintf(b + len, cap - len, "]");
	if (refs != NULL)
		len += snprintf(b + len, cap - len, ", \"refs\": %s", refs);
	snprintf(b + len, cap - len, "}");
	return b;
}

static IcebergTableMetadata *
build(const Snap *s, int n, const char *refs, const char *props, int64_t current)
{
	char	   *j = build_json(s, n, refs, props, current);
	IcebergTableMetadata *md = NULL;
	TmsError	err;

	if (!iceberg_metadata_parse(j, strlen(j), NULL, &md, &err))
	{
		printf("build failed: %s (%s)\n%s\n", err.message, err.detail, j);
		md = NULL;
	}
	io_free(j);
	return md;
}

static void
opts_default(IcebergExpireOptions *o, int64_t now, int64_t older_than,
			 int32_t retain_last)
{
	memset(o, 0, sizeof(*o));
	o->now_ms = now;
	o->older_than_ms = older_than;
	o->retain_last = retain_last;
	o->max_ref_age_ms = -1;
}

/* "1,2,3" of the plan's expired ids (static buffer). */
static const char *
ids_text(const int64_t *ids, int n)
{
	static char buf[4][1024];
	static int	which;
	size_t		len = 0;
	int			i;

	which = (which + 1) % 4;
	buf[which][0] = '\0';
	for (i = 0; i < n; i++)
		len += snprintf(buf[which] + len, sizeof(buf[which]) - len, "%s%lld",
						i ? "," : "", (long long) ids[i]);
	return buf[which];
}

static const char *
refs_text(const IcebergExpirePlan *p)
{
	static char buf[1024];
	size_t		len = 0;
	int			i;

	buf[0] = '\0';
	for (i = 0; i < p->nremoved_refs; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "",
						p->removed_refs[i]);
	return buf;
}

/* Plans and compares expired ids and removed refs. */
static void
expect_plan(const char *name, const IcebergTableMetadata *md,
			const IcebergExpireOptions *o, const char *expired,
			const char *removed)
{
	IcebergExpirePlan p;
	TmsError	err;

	if (md == NULL)
	{
		CHECK(false, "%s: no metadata", name);
		return;
	}
	if (!iceberg_expire_plan(md, o, &p, &err))
	{
		CHECK(false, "%s: plan failed: %s", name, err.message);
		return;
	}
	CHECK(strcmp(ids_text(p.expired, p.nexpired), expired) == 0,
		  "%s: expired %s, want %s", name, ids_text(p.expired, p.nexpired), expired);
	CHECK(strcmp(refs_text(&p), removed) == 0, "%s: removed refs \"%s\", want \"%s\"",
		  name, refs_text(&p), removed);
	CHECK(p.nexpired + p.nretained == md->nsnapshots, "%s: expired + retained = all", name);
	iceberg_expire_plan_free(&p);
}

static void
expect_refused(const char *name, const IcebergTableMetadata *md,
			   const IcebergExpireOptions *o, int code)
{
	IcebergExpirePlan p;
	TmsError	err;
	bool		ok = iceberg_expire_plan(md, o, &p, &err);

	CHECK(!ok && err.code == code, "%s: want %s, got %s", name,
		  tms_error_code_name(code), ok ? "success" : tms_error_code_name(err.code));
	if (ok)
		iceberg_expire_plan_free(&p);
	else
		CHECK(p.nexpired == 0 && p.expired == NULL, "%s: plan zeroed on failure", name);
}

/* Chain 1 <- 2 <- 3 <- 4 <- 5 at 100..500 */
static const Snap chain[] = {
	{1, -1, 100}, {2, 1, 200}, {3, 2, 300}, {4, 3, 400}, {5, 4, 500}
};

static void
test_plan_rules(void)
{
	IcebergTableMetadata *md;
	IcebergExpireOptions o;
	IcebergExpirePlan p;
	TmsError	err;
	int64_t		ids[4];

	/* older-than and retain-last on main */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"}}", NULL, 5);
	opts_default(&o, 600, 350, 1);
	expect_plan("older-than 350", md, &o, "1,2,3", "");
	opts_default(&o, 600, 300, 1);
	expect_plan("older-than 300 (>= keeps 300)", md, &o, "1,2", "");
	opts_default(&o, 600, 1000, 3);
	expect_plan("retain-last 3", md, &o, "1,2", "");
	opts_default(&o, 600, 1000, 1);
	expect_plan("retain-last 1, all old", md, &o, "1,2,3,4", "");
	opts_default(&o, 600, 0, 1);
	expect_plan("older-than 0: nothing", md, &o, "", "");
	opts_default(&o, 600, 1000, 10);
	expect_plan("retain-last above history", md, &o, "", "");
	/* defaults: property-less table, 5 days, now far ahead */
	opts_default(&o, 500 + 432000000, -1, -1);
	expect_plan("default 5 days: 500 is exactly 5 days old", md, &o, "1,2,3,4", "");
	CHECK(iceberg_expire_plan(md, &o, &p, &err) &&
		  p.older_than_ms == 500 && p.retain_last == 1 && p.max_ref_age_ms == INT64_MAX,
		  "effective defaults: %lld %d", (long long) p.older_than_ms, p.retain_last);
	iceberg_expire_plan_free(&p);
	opts_default(&o, 400 + 432000000, -1, -1);
	expect_plan("default 5 days: 400, exactly 5 days old, is kept", md, &o, "1,2,3", "");
	opts_default(&o, 401 + 432000000, -1, -1);
	expect_plan("default 5 days, 1 ms older", md, &o, "1,2,3,4", "");

	/* option validation */
	opts_default(&o, 600, 350, 0);
	expect_refused("retain-last 0", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	opts_default(&o, 600, 350, -7);
	expect_refused("retain-last -7", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	opts_default(&o, 600, -5, 1);
	expect_refused("older-than -5", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	opts_default(&o, 600, 350, 1);
	o.nsnapshot_ids = 1;
	o.snapshot_ids = NULL;
	expect_refused("ids NULL", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	CHECK(!iceberg_expire_plan(NULL, &o, &p, &err), "NULL metadata refused");

	/* explicit ids */
	opts_default(&o, 600, 0, 1);
	ids[0] = 3;
	o.nsnapshot_ids = 1;
	o.snapshot_ids = ids;
	expect_plan("explicit 3 (young)", md, &o, "3", "");
	ids[0] = 5;
	expect_refused("explicit main head", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	ids[0] = 77;
	expect_plan("explicit unknown id ignored", md, &o, "", "");
	ids[0] = 4;
	ids[1] = 2;
	o.nsnapshot_ids = 2;
	expect_plan("explicit 4, 2 (sorted by time)", md, &o, "2,4", "");
	opts_default(&o, 600, 350, 1);
	ids[0] = 4;
	o.nsnapshot_ids = 1;
	o.snapshot_ids = ids;
	expect_plan("explicit 4 with older-than", md, &o, "1,2,3,4", "");
	iceberg_metadata_free(md);

	/* properties */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"}}",
			   "{\"history.expire.max-snapshot-age-ms\": \"250\","
			   " \"history.expire.min-snapshots-to-keep\": \"2\"}", 5);
	opts_default(&o, 600, -1, -1);
	expect_plan("properties: age 250, keep 2", md, &o, "1,2,3", "");
	CHECK(iceberg_expire_plan(md, &o, &p, &err) && p.older_than_ms == 350 && p.retain_last == 2,
		  "effective property values");
	iceberg_expire_plan_free(&p);
	opts_default(&o, 600, 1000, -1);
	expect_plan("property keep 2, option older-than", md, &o, "1,2,3", "");
	opts_default(&o, 600, -1, 4);
	expect_plan("option keep 4 beats property", md, &o, "1", "");
	iceberg_metadata_free(md);

	md = build(chain, 5, NULL, "{\"history.expire.max-snapshot-age-ms\": \"abc\"}", 5);
	opts_default(&o, 600, -1, 1);
	expect_refused("non-numeric property", md, &o, ICEBERG_ERR_MALFORMED);
	opts_default(&o, 600, 100, 1);
	/* as Iceberg, which reads the property before any option applies */
	expect_refused("non-numeric property, older-than given", md, &o, ICEBERG_ERR_MALFORMED);
	iceberg_metadata_free(md);
	md = build(chain, 5, NULL, "{\"history.expire.min-snapshots-to-keep\": \"2x\"}", 5);
	opts_default(&o, 600, 1000, -1);
	expect_refused("non-numeric keep property", md, &o, ICEBERG_ERR_MALFORMED);
	iceberg_metadata_free(md);

	/* gc.enabled */
	{
		const char *vals[] = {"false", "FALSE", "no", "0", ""};
		const char *okvals[] = {"true", "TRUE", "True"};
		char		props[128];
		size_t		k;

		for (k = 0; k < sizeof(vals) / sizeof(vals[0]); k++)
		{
			snprintf(props, sizeof(props), "{\"gc.enabled\": \"%s\"}", vals[k]);
			md = build(chain, 5, NULL, props, 5);
			opts_default(&o, 600, 350, 1);
			expect_refused(props, md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
			if (iceberg_expire_plan(md, &o, &p, &err) == false)
				CHECK(strstr(err.message, "garbage collection is disabled") != NULL,
					  "gc message: %s", err.message);
			iceberg_metadata_free(md);
		}
		for (k = 0; k < sizeof(okvals) / sizeof(okvals[0]); k++)
		{
			snprintf(props, sizeof(props), "{\"gc.enabled\": \"%s\"}", okvals[k]);
			md = build(chain, 5, NULL, props, 5);
			opts_default(&o, 600, 350, 1);
			expect_plan(props, md, &o, "1,2,3", "");
			iceberg_metadata_free(md);
		}
	}
}

static void
test_plan_refs(void)
{
	IcebergTableMetadata *md;
	IcebergExpireOptions o;
	IcebergExpirePlan p;
	TmsError	err;
	int64_t		ids[2];

	/* a branch with its own min-snapshots-to-keep */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"b\": {\"snapshot-id\": 3, \"type\": \"branch\", \"min-snapshots-to-keep\": 3}}",
			   NULL, 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("branch keeps 3 ancestors", md, &o, "4", "");
	iceberg_metadata_free(md);

	/* a branch with its own max-snapshot-age-ms: now 600 - 450 = 150 */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"b\": {\"snapshot-id\": 3, \"type\": \"branch\", \"max-snapshot-age-ms\": 450}}",
			   NULL, 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("branch max-snapshot-age", md, &o, "1,4", "");
	iceberg_metadata_free(md);

	/* branch without overrides uses the options: retain_last 2 */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"b\": {\"snapshot-id\": 2, \"type\": \"branch\"}}", NULL, 5);
	opts_default(&o, 600, 1000, 2);
	expect_plan("branch uses retain-last", md, &o, "3", "");
	iceberg_metadata_free(md);

	/* main's own settings */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\","
			   " \"min-snapshots-to-keep\": 4}}", NULL, 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("main's own min-snapshots-to-keep", md, &o, "1", "");
	iceberg_metadata_free(md);

	/* a tag keeps its snapshot only */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"t\": {\"snapshot-id\": 2, \"type\": \"tag\"}}", NULL, 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("tag", md, &o, "1,3,4", "");
	ids[0] = 2;
	o.nsnapshot_ids = 1;
	o.snapshot_ids = ids;
	expect_refused("explicit tag head", md, &o, ICEBERG_ERR_INVALID_ARGUMENT);
	/* option max-ref-age: the tag is 400 old */
	opts_default(&o, 600, 1000, 1);
	o.max_ref_age_ms = 400;
	expect_plan("tag age 400 <= 400", md, &o, "1,3,4", "");
	o.max_ref_age_ms = 399;
	expect_plan("tag age 400 > 399", md, &o, "1,2,3,4", "t");
	CHECK(iceberg_expire_plan(md, &o, &p, &err) && p.nremoved_refs == 1 &&
		  p.removed_ref_snapshot_ids[0] == 2, "removed ref's snapshot id");
	iceberg_expire_plan_free(&p);
	/* explicit id of a ref that is being removed is fine */
	ids[0] = 2;
	o.nsnapshot_ids = 1;
	o.snapshot_ids = ids;
	expect_plan("explicit head of a removed tag", md, &o, "1,2,3,4", "t");
	/* main never expires */
	o.max_ref_age_ms = 0;
	o.nsnapshot_ids = 0;
	expect_plan("max-ref-age 0: main stays", md, &o, "1,2,3,4", "t");
	iceberg_metadata_free(md);

	/* the property, and the ref's own value beating it */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"t\": {\"snapshot-id\": 2, \"type\": \"tag\"},"
			   " \"u\": {\"snapshot-id\": 1, \"type\": \"tag\", \"max-ref-age-ms\": 10000},"
			   " \"b\": {\"snapshot-id\": 3, \"type\": \"branch\", \"max-ref-age-ms\": 100}}",
			   "{\"history.expire.max-ref-age-ms\": \"350\"}", 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("property max-ref-age", md, &o, "2,3,4", "t,b");
	o.max_ref_age_ms = 10000;
	expect_plan("option max-ref-age beats the property", md, &o, "3,4", "b");
	iceberg_metadata_free(md);

	/* a ref to a missing snapshot is removed */
	md = build(chain, 5, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"},"
			   " \"gone\": {\"snapshot-id\": 99, \"type\": \"branch\"}}", NULL, 5);
	opts_default(&o, 600, 1000, 1);
	expect_plan("ref to a missing snapshot", md, &o, "1,2,3,4", "gone");
	iceberg_metadata_free(md);

	/*
	 * unreferenced snapshots: 6 hangs off 3 (a rolled-back branch), 7 stands
	 * alone
	 */
	{
		Snap		s[] = {{1, -1, 100}, {2, 1, 200}, {3, 2, 300}, {4, 3, 400},
		{5, 4, 500}, {6, 3, 550}, {7, -1, 50}};

		md = build(s, 7, "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\"}}", NULL, 5);
		opts_default(&o, 600, 540, 1);
		expect_plan("unreferenced young kept, old expired", md, &o, "7,1,2,3,4", "");
		opts_default(&o, 600, 560, 1);
		expect_plan("unreferenced old expired", md, &o, "7,1,2,3,4,6", "");
		iceberg_metadata_free(md);
	}

	/* the current snapshot, even without a ref to it */
	md = build(chain, 5, "{\"b\": {\"snapshot-id\": 3, \"type\": \"branch\"}}", NULL, 5);
	if (md != NULL)
	{
		opts_default(&o, 600, 1000, 1);
		if (iceberg_expire_plan(md, &o, &p, &err))
		{
			int			i;
			bool		has5 = false;

			for (i = 0; i < p.nretained; i++)
				has5 |= p.retained[i] == 5;
			CHECK(has5, "current snapshot retained without a main ref");
			iceberg_expire_plan_free(&p);
		}
		else
			CHECK(false, "plan: %s", err.message);
		iceberg_metadata_free(md);
	}

	/* no refs at all: the parser's synthesized main */
	md = build(chain, 5, NULL, NULL, 5);
	opts_default(&o, 600, 1000, 2);
	expect_plan("synthesized main", md, &o, "1,2,3", "");
	iceberg_metadata_free(md);

	/* no snapshots */
	md = build(chain, 0, NULL, NULL, -1);
	opts_default(&o, 600, 1000, 1);
	expect_plan("empty table", md, &o, "", "");
	iceberg_metadata_free(md);

	/* a parent cycle ends */
	{
		Snap		s[] = {{1, 2, 100}, {2, 1, 200}, {3, 2, 300}};

		md = build(s, 3, "{\"main\": {\"snapshot-id\": 3, \"type\": \"branch\"}}", NULL, 3);
		opts_default(&o, 600, 0, 1);
		expect_plan("cycle", md, &o, "", "");
		opts_default(&o, 600, 1000, 100);
		expect_plan("cycle, keep 100", md, &o, "", "");
		opts_default(&o, 600, 1000, 1);
		expect_plan("cycle, keep 1", md, &o, "1,2", "");
		iceberg_metadata_free(md);
	}
}

/* A small deterministic generator (tests must be reproducible). */
static unsigned
rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 8) & 0xffffff;
}

#define RND() rnd(&seed)

/* Random histories: invariants of every plan. */
static void
test_plan_random(void)
{
	unsigned	seed = 12345;
	int			round;
	int			bad = 0;

	for (round = 0; round < 300; round++)
	{
		Snap		s[40];
		int			n,
					i,
					k;
		char		refs[2048];
		size_t		len = 0;
		IcebergTableMetadata *md;
		IcebergExpireOptions o;
		IcebergExpirePlan p;
		TmsError	err;

		n = 1 + RND() % 40;
		for (i = 0; i < n; i++)
		{
			s[i].id = 1000 + i;
			s[i].parent = (i > 0 && RND() % 5) ? 1000 + (int64_t) (RND() % i) : -1;
			s[i].ts = 100 * (i + 1);
		}
		len += snprintf(refs + len, sizeof(refs) - len,
						"{\"main\": {\"snapshot-id\": %d, \"type\": \"branch\"}", 1000 + n - 1);
		for (k = 0; k < 3; k++)
		{
			int			target = (int) (RND() % n);
			bool		tag = RND() % 2;

			len += snprintf(refs + len, sizeof(refs) - len,
							", \"r%d\": {\"snapshot-id\": %d, \"type\": \"%s\"%s}",
							k, 1000 + target, tag ? "tag" : "branch",
							RND() % 2 ? ", \"max-ref-age-ms\": 1500" :
							(!tag && RND() % 2) ? ", \"min-snapshots-to-keep\": 3" : "");
		}
		snprintf(refs + len, sizeof(refs) - len, "}");
		md = build(s, n, refs, NULL, 1000 + n - 1);
		if (md == NULL)
		{
			bad++;
			continue;
		}
		opts_default(&o, 100 * (n + 1), (int64_t) (RND() % (100 * (n + 1))), 1 + (int32_t) (RND() % 4));
		if (!iceberg_expire_plan(md, &o, &p, &err))
		{
			bad++;
			iceberg_metadata_free(md);
			continue;
		}

		/*
		 * partition, heads of retained refs kept, current kept, young
		 * unreferenced kept
		 */
		if (p.nexpired + p.nretained != n)
			bad++;
		for (i = 0; i < p.nexpired; i++)
		{
			const IcebergSnapshot *x = iceberg_metadata_snapshot(md, p.expired[i]);
			int			r;

			if (x == NULL || x->snapshot_id == md->current_snapshot_id)
				bad++;
			for (r = 0; r < md->nrefs; r++)
			{
				int			q;
				bool		removed = false;

				for (q = 0; q < p.nremoved_refs; q++)
					removed |= strcmp(p.removed_refs[q], md->refs[r].name) == 0;
				if (!removed && md->refs[r].snapshot_id == p.expired[i])
					bad++;
			}
			if (i > 0 && iceberg_metadata_snapshot(md, p.expired[i - 1])->timestamp_ms > x->timestamp_ms)
				bad++;
		}
		iceberg_expire_plan_free(&p);
		iceberg_metadata_free(md);
	}
	CHECK(bad == 0, "random plans: %d invariant violations", bad);
}

/* ------------------------------------------------------------------------
 * Brute-force checking of iceberg_expired_files
 * ------------------------------------------------------------------------
 */

typedef struct StrList
{
	char	  **v;
	int			n;
	int			cap;
	int			dups;
	int			noncanonical;
	int			kinds[8];
	const char *root;
} StrList;

static void
strlist_add(StrList *l, const char *s)
{
	if (l->n == l->cap)
	{
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = io_realloc(l->v, sizeof(char *) * (size_t) l->cap);
	}
	l->v[l->n++] = io_strdup(s);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static void
strlist_sort_unique(StrList *l)
{
	int			i,
				w = 0;

	if (l->n == 0)
		return;
	qsort(l->v, (size_t) l->n, sizeof(char *), cmp_str);
	for (i = 0; i < l->n; i++)
	{
		if (w > 0 && strcmp(l->v[w - 1], l->v[i]) == 0)
		{
			l->dups++;
			io_free(l->v[i]);
			continue;
		}
		l->v[w++] = l->v[i];
	}
	l->n = w;
}

static bool
strlist_has(const StrList *l, const char *s)
{
	return l->n > 0 && bsearch(&s, l->v, (size_t) l->n, sizeof(char *), cmp_str) != NULL;
}

static void
strlist_free(StrList *l)
{
	int			i;

	for (i = 0; i < l->n; i++)
		io_free(l->v[i]);
	io_free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Walk callback: add the canonical path. */
static bool
collect_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	StrList    *l = arg;
	char	   *c;
	TmsError	ioerr;

	(void) err;
	if (io_location_canonical(f->path, l->root, &c, &ioerr) != 0)
	{
		l->noncanonical++;
		return true;
	}
	if (strcmp(c, f->path) != 0)
		l->noncanonical += 0;	/* walks report metadata paths */
	strlist_add(l, c);
	if ((int) f->kind >= 0 && f->kind < 8)
		l->kinds[f->kind]++;
	io_free(c);
	return true;
}

/* Stream callback: paths must already be canonical. */
static bool
stream_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	StrList    *l = arg;
	char	   *c;
	TmsError	ioerr;

	(void) err;
	if (io_location_canonical(f->path, NULL, &c, &ioerr) != 0 || strcmp(c, f->path) != 0)
		l->noncanonical++;
	io_free(c);
	strlist_add(l, f->path);
	if ((int) f->kind >= 0 && f->kind < 8)
		l->kinds[f->kind]++;
	return true;
}

/*
 * Brute force: E = live files of old's snapshots missing from kept, plus
 * old's statistics; K = live files of every kept snapshot and its
 * statistics; want E - K, each once.  Returns the number streamed (-1 on
 * error); kinds_out (may be NULL) gets the per-kind counts.
 */
static int
check_expired(const char *name, const IcebergFileIO *io,
			  const IcebergTableMetadata *old_md,
			  const IcebergTableMetadata *kept_md, const char *root,
			  int *kinds_out)
{
	StrList		e = {0},
				k = {0},
				got = {0};
	int64_t    *ids = io_malloc(sizeof(int64_t) * (size_t) (old_md->nsnapshots + 1));
	int			nids = 0,
				i,
				missing = 0,
				extra = 0,
				result;
	TmsError	err;
	unsigned	flags = ICEBERG_WALK_MANIFEST_LISTS | ICEBERG_WALK_MANIFESTS |
	ICEBERG_WALK_CONTENT_FILES | ICEBERG_WALK_STATISTICS;

	e.root = k.root = got.root = root;
	for (i = 0; i < old_md->nsnapshots; i++)
		if (iceberg_metadata_snapshot(kept_md, old_md->snapshots[i].snapshot_id) == NULL)
			ids[nids++] = old_md->snapshots[i].snapshot_id;
	if (nids > 0 &&
		!iceberg_walk(io, old_md, NULL, ids, nids, flags & ~ICEBERG_WALK_STATISTICS,
					  collect_cb, &e, &err))
	{
		CHECK(false, "%s: brute-force walk of old: %s (%s)", name, err.message, err.detail);
		io_free(ids);
		return -1;
	}
	for (i = 0; i < old_md->nstatistics; i++)
	{
		IcebergWalkFile f = {ICEBERG_FILE_STATISTICS, old_md->statistics[i].path, -1, -1, -1};

		collect_cb(&e, &f, &err);
	}
	for (i = 0; i < old_md->npartition_statistics; i++)
	{
		IcebergWalkFile f = {ICEBERG_FILE_PARTITION_STATISTICS, old_md->partition_statistics[i].path, -1, -1, -1};

		collect_cb(&e, &f, &err);
	}
	if (!iceberg_walk(io, kept_md, NULL, NULL, -1, flags, collect_cb, &k, &err))
	{
		CHECK(false, "%s: brute-force walk of kept: %s", name, err.message);
		io_free(ids);
		return -1;
	}
	strlist_sort_unique(&e);
	strlist_sort_unique(&k);
	if (!iceberg_expired_files(io, old_md, kept_md, root, stream_cb, &got, &err))
	{
		CHECK(false, "%s: iceberg_expired_files: %s (%s)", name, err.message, err.detail);
		result = -1;
		goto done;
	}
	result = got.n;
	if (kinds_out)
		memcpy(kinds_out, got.kinds, sizeof(got.kinds));
	strlist_sort_unique(&got);
	CHECK(got.dups == 0, "%s: %d files streamed twice", name, got.dups);
	CHECK(got.noncanonical == 0 && e.noncanonical == 0, "%s: non-canonical paths", name);
	for (i = 0; i < e.n; i++)
		if (!strlist_has(&k, e.v[i]) && !strlist_has(&got, e.v[i]))
		{
			missing++;
			if (missing < 4)
				printf("  %s: missing %s\n", name, e.v[i]);
		}
	for (i = 0; i < got.n; i++)
		if (!strlist_has(&e, got.v[i]) || strlist_has(&k, got.v[i]))
		{
			extra++;
			if (extra < 4)
				printf("  %s: extra %s\n", name, got.v[i]);
		}
	CHECK(missing == 0 && extra == 0, "%s: streamed %d files, %d missing, %d extra",
		  name, got.n, missing, extra);
done:
	strlist_free(&e);
	strlist_free(&k);
	strlist_free(&got);
	io_free(ids);
	return result;
}

/* Count of a kind in a stream from check_expired. */
static void
test_expired_fixtures(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md,
			   *md2,
			   *kept;
	IcebergExpireOptions o;
	IcebergExpirePlan p;
	TmsError	err;
	char		folder[1024];
	char		path[1200];
	int			kinds[8];
	int			n;

	/* pyiceberg v1: append, append, overwrite (deletes 2 data files) */
	snprintf(folder, sizeof(folder), "%s/pyiceberg-v1-overwrite", fixtures);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = "data/persistent/iceberg_v1_repro/repro/merch_v1";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json", folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "read pyiceberg: %s", err.message);
		return;
	}
	opts_default(&o, md->last_updated_ms + 1, md->last_updated_ms + 1, 1);
	CHECK(iceberg_expire_plan(md, &o, &p, &err) && p.nexpired == 2 && p.nretained == 1,
		  "pyiceberg plan: expire 2 of 3");
	kept = iceberg_metadata_without(md, &p, &err);
	CHECK(kept != NULL && kept->nsnapshots == 1 &&
		  kept->snapshots[0].snapshot_id == md->current_snapshot_id &&
		  kept->nsnapshot_log <= 1 && kept->nmetadata_log == md->nmetadata_log,
		  "metadata_without: one snapshot left");
	n = check_expired("pyiceberg expire 2", &io, md, kept, "/fixroot", kinds);
	CHECK(n > 0 && kinds[ICEBERG_FILE_DATA] == 2 && kinds[ICEBERG_FILE_MANIFEST_LIST] == 2,
		  "pyiceberg: the 2 overwritten data files and 2 manifest lists (got %d data, %d lists, %d manifests)",
		  kinds[ICEBERG_FILE_DATA], kinds[ICEBERG_FILE_MANIFEST_LIST], kinds[ICEBERG_FILE_MANIFEST]);
	/* an unrelated relative root changes nothing but the prefix */
	check_expired("pyiceberg, other root", &io, md, kept, "/elsewhere/x", NULL);
	/* relative paths without a root: refused, never guessed */
	CHECK(!iceberg_expired_files(&io, md, kept, NULL, stream_cb, &(StrList) {0}, &err) &&
		  err.code == ICEBERG_ERR_INVALID_ARGUMENT,
		  "relative paths without a root fail (%s)", tms_error_code_name(err.code));
	/* nothing expired: nothing streamed */
	n = check_expired("pyiceberg kept = old", &io, md, md, "/fixroot", NULL);
	CHECK(n == 0, "nothing expired streams nothing (%d)", n);
	iceberg_metadata_free(kept);
	iceberg_expire_plan_free(&p);

	/* kept metadata holding newer snapshots: old = 00002 (2 snapshots) */
	snprintf(path, sizeof(path), "%s/metadata/00002-60bac781-d939-4858-a95a-dd182ca383c5.metadata.json", folder);
	if (iceberg_metadata_read(&io, path, &md2, &err))
	{
		memset(&p, 0, sizeof(p));
		p.nexpired = 1;
		p.expired = &md2->snapshots[0].snapshot_id;
		kept = iceberg_metadata_without(md, &p, &err);	/* newest metadata minus
														 * snapshot 1 */
		n = check_expired("pyiceberg old=00002 kept=00003-minus-1", &io, md2, kept, "/fixroot", kinds);
		CHECK(n == 1 && kinds[ICEBERG_FILE_MANIFEST_LIST] == 1,
			  "only the manifest list of snapshot 1 (%d files)", n);
		iceberg_metadata_free(kept);
		iceberg_metadata_free(md2);
	}
	else
		CHECK(false, "read 00002: %s", err.message);
	/* every single-snapshot expiry, and every pair */
	{
		int			a,
					b;

		for (a = 0; a < md->nsnapshots; a++)
			for (b = a; b < md->nsnapshots; b++)
			{
				int64_t		ids[2] = {md->snapshots[a].snapshot_id, md->snapshots[b].snapshot_id};
				char		name[64];

				memset(&p, 0, sizeof(p));
				p.nexpired = a == b ? 1 : 2;
				p.expired = ids;
				kept = iceberg_metadata_without(md, &p, &err);
				snprintf(name, sizeof(name), "pyiceberg expire {%d,%d}", a, b);
				check_expired(name, &io, md, kept, "/fixroot", NULL);
				iceberg_metadata_free(kept);
			}
	}
	iceberg_metadata_free(md);

	/* spark v2 merge-on-read, s3a:// paths */
	snprintf(folder, sizeof(folder), "%s/spark-v2-mor-posdeletes", fixtures);
	fs.maps[0].from = "s3a://hyperparam-iceberg/spark/bunnies";
	fs.maps[0].to = folder;
	snprintf(path, sizeof(path), "%s/metadata/v5.metadata.json", folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "read spark: %s", err.message);
		return;
	}
	opts_default(&o, md->last_updated_ms + 1, md->last_updated_ms + 1, 1);
	CHECK(iceberg_expire_plan(md, &o, &p, &err) && p.nexpired == 2, "spark plan: expire 2");
	kept = iceberg_metadata_without(md, &p, &err);
	n = check_expired("spark expire 2", &io, md, kept, NULL, kinds);
	CHECK(n > 0 && kinds[ICEBERG_FILE_DATA] == 1 && kinds[ICEBERG_FILE_POSITION_DELETES] == 0,
		  "spark: the rewritten data file, not the carried delete file (%d data, %d pos)",
		  kinds[ICEBERG_FILE_DATA], kinds[ICEBERG_FILE_POSITION_DELETES]);
	iceberg_metadata_free(kept);
	iceberg_expire_plan_free(&p);
	{
		int			a;

		for (a = 0; a < md->nsnapshots; a++)
		{
			int64_t		id = md->snapshots[a].snapshot_id;

			memset(&p, 0, sizeof(p));
			p.nexpired = 1;
			p.expired = &id;
			kept = iceberg_metadata_without(md, &p, &err);
			check_expired("spark expire one", &io, md, kept, NULL, NULL);
			iceberg_metadata_free(kept);
		}
	}
	iceberg_metadata_free(md);

	/* java v2 equality deletes, 5 snapshots: expire each prefix of history */
	snprintf(folder, sizeof(folder), "%s/java-v2-partitioned-eqdeletes", fixtures);
	fs.maps[0].from = "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned";
	fs.maps[0].to = folder;
	snprintf(path, sizeof(path), "%s/metadata/v6.metadata.json", folder);
	if (iceberg_metadata_read(&io, path, &md, &err))
	{
		int			keep;

		for (keep = 1; keep <= md->nsnapshots; keep++)
		{
			char		name[64];

			opts_default(&o, md->last_updated_ms + 1, md->last_updated_ms + 1, keep);
			if (!iceberg_expire_plan(md, &o, &p, &err))
			{
				CHECK(false, "java plan: %s", err.message);
				continue;
			}
			CHECK(p.nretained == keep, "java retain-last %d: %d retained", keep, p.nretained);
			kept = iceberg_metadata_without(md, &p, &err);
			snprintf(name, sizeof(name), "java retain-last %d", keep);
			check_expired(name, &io, md, kept, "/fixroot", NULL);
			iceberg_metadata_free(kept);
			iceberg_expire_plan_free(&p);
		}
		iceberg_metadata_free(md);
	}
	else
		CHECK(false, "read java: %s", err.message);
}

/* Every fixture table: expire each snapshot alone, and all but the current. */
static void
test_expired_all_fixtures(void)
{
	static const struct
	{
		const char *folder;
		const char *prefix;
		const char *meta;
	}			t[] = {
		{"spark-v2-mor-posdeletes", "s3a://hyperparam-iceberg/spark/bunnies", "metadata/v5.metadata.json"},
		{"spark-v2-partitioned-bucket-identity", "s3a://hyperparam-iceberg/spark/rename_column", "metadata/v3.metadata.json"},
		{"java-v2-partitioned-eqdeletes", "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned", "metadata/v6.metadata.json"},
		{"pyiceberg-v1-overwrite", "data/persistent/iceberg_v1_repro/repro/merch_v1", "metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json"},
		{"pyiceberg-v2-partitioned-nullcodec", "file://data/persistent/map_stats/default.db/map_stats", "metadata/00002-0e059d4b-e5e8-41af-a763-76cbf3a3d0bc.metadata.json"},
		{"spark-v1-gzip-metadata", "lineitem_iceberg_gz", "metadata/v2.gz.metadata.json"},
		{"spark-v1-legacy-manifests-field", "data/persistent/iceberg_v1_deprecated/default/legacy_v1", "metadata/v2.metadata.json"},
	};
	size_t		k;

	for (k = 0; k < sizeof(t) / sizeof(t[0]); k++)
	{
		IcebergLocalFS fs;
		IcebergFileIO io;
		IcebergTableMetadata *md,
				   *kept;
		IcebergExpirePlan p;
		TmsError	err;
		char		folder[1024];
		char		path[1200];
		char		name[160];
		int64_t    *ids;
		int			a;

		snprintf(folder, sizeof(folder), "%s/%s", fixtures, t[k].folder);
		memset(&fs, 0, sizeof(fs));
		fs.nmaps = 1;
		fs.maps[0].from = t[k].prefix;
		fs.maps[0].to = folder;
		iceberg_local_fileio(&io, &fs);
		snprintf(path, sizeof(path), "%s/%s", folder, t[k].meta);
		if (!iceberg_metadata_read(&io, path, &md, &err))
		{
			CHECK(false, "read %s: %s", t[k].folder, err.message);
			continue;
		}
		ids = io_malloc(sizeof(int64_t) * (size_t) (md->nsnapshots + 1));
		for (a = 0; a < md->nsnapshots; a++)
		{
			memset(&p, 0, sizeof(p));
			ids[0] = md->snapshots[a].snapshot_id;
			p.nexpired = 1;
			p.expired = ids;
			kept = iceberg_metadata_without(md, &p, &err);
			snprintf(name, sizeof(name), "%s: expire snapshot %d", t[k].folder, a);
			check_expired(name, &io, md, kept, "/fixroot", NULL);
			iceberg_metadata_free(kept);
		}
		memset(&p, 0, sizeof(p));
		for (a = 0; a < md->nsnapshots; a++)
			if (md->snapshots[a].snapshot_id != md->current_snapshot_id)
				ids[p.nexpired++] = md->snapshots[a].snapshot_id;
		p.expired = ids;
		kept = iceberg_metadata_without(md, &p, &err);
		snprintf(name, sizeof(name), "%s: keep the current snapshot only", t[k].folder);
		CHECK(kept != NULL && kept->nsnapshots == 1, "%s: one snapshot left", t[k].folder);
		check_expired(name, &io, md, kept, "/fixroot", NULL);
		iceberg_metadata_free(kept);
		io_free(ids);
		iceberg_metadata_free(md);
	}
}

/* ------------------------------------------------------------------------
 * Synthetic tables (test/fixtures/synth.py)
 * ------------------------------------------------------------------------
 */

/* Runs synth.py into dir; the metadata location in meta (file:// URI). */
static bool
synth(const char *dir, const char *args, char *meta, size_t metalen)
{
	char		cmd[2048];
	FILE	   *f;
	char		line[2048];
	bool		found = false;

	snprintf(cmd, sizeof(cmd),
			 "/usr/bin/python3 test/fixtures/synth.py --out %s --seed 7 %s 2>&1", dir, args);
	f = popen(cmd, "r");
	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *m = strstr(line, "\"metadata_location\": \"");

		if (m != NULL)
		{
			char	   *q;

			m += strlen("\"metadata_location\": \"");
			q = strchr(m, '"');
			if (q != NULL && (size_t) (q - m) < metalen)
			{
				memcpy(meta, m, (size_t) (q - m));
				meta[q - m] = '\0';
				found = true;
			}
		}
	}
	return pclose(f) == 0 && found;
}

static void
test_expired_synth(void)
{
	char		tmpl[] = "/tmp/tms-expire-test.XXXXXX";
	char	   *dir;
	char		out[1200];
	char		meta[1200];
	IcebergFileIO io;
	IcebergTableMetadata *md,
			   *kept;
	IcebergExpirePlan p;
	IcebergExpireOptions o;
	TmsError	err;
	int			kinds[8];
	int			a,
				n;
	static const char *shapes[] = {
		"--format-version 2 --snapshots 6 --data-files 60 --files-per-manifest 4 --pos-deletes 3 --eq-deletes 2 --stats-files 3 --branch b@2:min-snapshots-to-keep=2 --tag t@3",
		"--format-version 1 --snapshots 5 --data-files 23 --files-per-manifest 3 --partitions 3 --codec null",
		"--format-version 2 --snapshots 4 --data-files 12 --files-per-manifest 100 --single-metadata",
	};
	size_t		sh;

	if (access("/usr/bin/python3", X_OK) != 0 || access("test/fixtures/synth.py", R_OK) != 0)
	{
		printf("SKIP synthetic tables: no python3 or synth.py\n");
		return;
	}
	dir = mkdtemp(tmpl);
	if (dir == NULL)
	{
		CHECK(false, "mkdtemp");
		return;
	}
	iceberg_local_fileio(&io, NULL);
	for (sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
	{
		snprintf(out, sizeof(out), "%s/t%zu", dir, sh);
		if (!synth(out, shapes[sh], meta, sizeof(meta)))
		{
			CHECK(false, "synth.py %s", shapes[sh]);
			continue;
		}
		if (!iceberg_metadata_read(&io, meta, &md, &err))
		{
			CHECK(false, "read synth: %s (%s)", err.message, err.detail);
			continue;
		}
		/* the real plan: everything old, keep 2 per branch */
		opts_default(&o, md->last_updated_ms + 1, md->last_updated_ms + 1, 2);
		if (iceberg_expire_plan(md, &o, &p, &err))
		{
			kept = iceberg_metadata_without(md, &p, &err);
			n = check_expired("synth plan", &io, md, kept, NULL, kinds);
			CHECK(n >= 0 && kinds[ICEBERG_FILE_MANIFEST_LIST] == p.nexpired,
				  "synth %zu: one manifest list per expired snapshot (%d of %d)",
				  sh, kinds[ICEBERG_FILE_MANIFEST_LIST], p.nexpired);
			iceberg_metadata_free(kept);
			iceberg_expire_plan_free(&p);
		}
		else
			CHECK(false, "synth plan: %s", err.message);
		/* drop the newest snapshots (a rollback): their manifests and data go */
		for (a = 1; a < md->nsnapshots; a++)
		{
			int64_t		ids[64];
			int			k;
			char		name[64];

			memset(&p, 0, sizeof(p));
			for (k = a; k < md->nsnapshots && k - a < 64; k++)
				ids[p.nexpired++] = md->snapshots[k].snapshot_id;
			p.expired = ids;
			kept = iceberg_metadata_without(md, &p, &err);
			snprintf(name, sizeof(name), "synth %zu drop from %d", sh, a);
			n = check_expired(name, &io, md, kept, NULL, kinds);
			CHECK(n > 0 && kinds[ICEBERG_FILE_DATA] + kinds[ICEBERG_FILE_POSITION_DELETES] +
				  kinds[ICEBERG_FILE_EQUALITY_DELETES] > 0,
				  "%s: content files stream (%d)", name, n);
			iceberg_metadata_free(kept);
		}
		iceberg_metadata_free(md);
	}
	snprintf(out, sizeof(out), "rm -rf '%s'", dir);
	if (system(out) != 0)
		printf("could not remove %s\n", dir);
}

/* ------------------------------------------------------------------------
 * Valid-file set
 * ------------------------------------------------------------------------
 */

static bool
valid_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	StrList    *l = arg;

	(void) err;
	strlist_add(l, f->path);
	return true;
}

static void
test_valid_set(void)
{
	IcebergLocalFS fs;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergValidSet *vs;
	IcebergOrphanOptions oo;
	TmsError	err;
	StrList		all = {0};
	char		folder[1024];
	char		path[1400];
	int			i,
				bad = 0;
	IcebergKeyValue auths[] = {{"other-bucket, alias2", "hyperparam-iceberg"}};
	IcebergKeyValue schemes[] = {{"file", "s3"}};

	/* spark: s3a:// paths in metadata */
	snprintf(folder, sizeof(folder), "%s/spark-v2-mor-posdeletes", fixtures);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = "s3a://hyperparam-iceberg/spark/bunnies";
	fs.maps[0].to = folder;
	iceberg_local_fileio(&io, &fs);
	snprintf(path, sizeof(path), "%s/metadata/v5.metadata.json", folder);
	if (!iceberg_metadata_read(&io, path, &md, &err))
	{
		CHECK(false, "read spark: %s", err.message);
		return;
	}
	memset(&oo, 0, sizeof(oo));
	vs = iceberg_valid_set_new(&oo);
	CHECK(iceberg_valid_set_check(vs, "s3://hyperparam-iceberg/x") == ICEBERG_ORPHAN_UNKNOWN,
		  "unsealed set: unknown");
	CHECK(iceberg_valid_set_add_table(vs, &io, md, "s3a://hyperparam-iceberg/spark/bunnies/metadata/v5.metadata.json",
									  NULL, &err), "add spark: %s", err.message);
	CHECK(iceberg_valid_set_seal(vs, &err), "seal");
	CHECK(!iceberg_valid_set_add_path(vs, "s3://a/b", NULL, &err), "sealed: no more additions");
	iceberg_walk(&io, md, "s3a://hyperparam-iceberg/spark/bunnies/metadata/v5.metadata.json",
				 NULL, -1, ICEBERG_WALK_PURGE, valid_cb, &all, &err);
	strlist_sort_unique(&all);
	for (i = 0; i < all.n; i++)
	{
		char		alt[1400];

		if (iceberg_valid_set_check(vs, all.v[i]) != ICEBERG_ORPHAN_VALID)
			bad++;
		/* every spelling of the scheme */
		if (strncmp(all.v[i], "s3a://", 6) == 0)
		{
			snprintf(alt, sizeof(alt), "s3://%s", all.v[i] + 6);
			bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_VALID;
			snprintf(alt, sizeof(alt), "S3N://%s", all.v[i] + 6);
			bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_VALID;
			snprintf(alt, sizeof(alt), "s3://other-bucket/%s", strchr(all.v[i] + 6, '/') + 1);
			bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_PREFIX_MISMATCH;
			snprintf(alt, sizeof(alt), "%s", strchr(all.v[i] + 6, '/'));
			bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_PREFIX_MISMATCH;
			snprintf(alt, sizeof(alt), "%s.orphan", all.v[i]);
			bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_ORPHAN;
		}
		else
			bad++;
	}
	CHECK(all.n >= 10 && bad == 0, "spark: %d referenced files, %d wrong verdicts", all.n, bad);
	CHECK(iceberg_valid_set_count(vs) == all.n + 1, "count %lld = %d files + version-hint",
		  (long long) iceberg_valid_set_count(vs), all.n);
	CHECK(iceberg_valid_set_check(vs, "s3://hyperparam-iceberg/spark/bunnies/metadata/version-hint.text") == ICEBERG_ORPHAN_VALID,
		  "version-hint is valid");
	CHECK(iceberg_valid_set_check(vs, "s3://hyperparam-iceberg/spark/bunnies/metadata/v1.metadata.json") == ICEBERG_ORPHAN_VALID,
		  "metadata-log file is valid");
	CHECK(iceberg_valid_set_check(vs, "s3://hyperparam-iceberg/spark/bunnies/data/nope.parquet") == ICEBERG_ORPHAN_ORPHAN,
		  "unknown data file is an orphan");
	CHECK(iceberg_valid_set_check(vs, "s3://hyperparam-iceberg/spark/bunnies/data/../x") == ICEBERG_ORPHAN_UNKNOWN,
		  "dot segment: unknown (kept)");
	CHECK(iceberg_valid_set_check(vs, "hdfs://hyperparam-iceberg/spark/bunnies/x") == ICEBERG_ORPHAN_UNKNOWN,
		  "other scheme: unknown (kept)");
	CHECK(strcmp(iceberg_orphan_verdict_name(ICEBERG_ORPHAN_PREFIX_MISMATCH), "prefix-mismatch") == 0,
		  "verdict names");
	iceberg_valid_set_free(vs);

	/* equal authorities (comma-separated keys, trimmed, any case) */
	oo.nequal_authorities = 1;
	oo.equal_authorities = auths;
	vs = iceberg_valid_set_new(&oo);
	iceberg_valid_set_add_table(vs, &io, md, NULL, NULL, &err);
	iceberg_valid_set_seal(vs, &err);
	for (i = 0, bad = 0; i < all.n; i++)
	{
		char		alt[1400];

		if (strncmp(all.v[i], "s3a://", 6) != 0 || strstr(all.v[i], ".metadata.json"))
			continue;
		snprintf(alt, sizeof(alt), "s3://other-bucket/%s", strchr(all.v[i] + 6, '/') + 1);
		bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_VALID;
		snprintf(alt, sizeof(alt), "s3://ALIAS2/%s", strchr(all.v[i] + 6, '/') + 1);
		bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_VALID;
		snprintf(alt, sizeof(alt), "s3://third/%s", strchr(all.v[i] + 6, '/') + 1);
		bad += iceberg_valid_set_check(vs, alt) != ICEBERG_ORPHAN_PREFIX_MISMATCH;
	}
	CHECK(bad == 0, "equal authorities: %d wrong", bad);
	iceberg_valid_set_free(vs);
	/* equal schemes: file treated as s3 still differs by authority */
	memset(&oo, 0, sizeof(oo));
	oo.nequal_schemes = 1;
	oo.equal_schemes = schemes;
	vs = iceberg_valid_set_new(&oo);
	iceberg_valid_set_add_path(vs, "s3a://bkt/a/b.parquet", NULL, &err);
	iceberg_valid_set_add_path(vs, "/local/c.parquet", NULL, &err);
	iceberg_valid_set_seal(vs, &err);
	CHECK(iceberg_valid_set_check(vs, "/a/b.parquet") == ICEBERG_ORPHAN_PREFIX_MISMATCH,
		  "file vs s3 with another authority: mismatch");
	CHECK(iceberg_valid_set_check(vs, "s3://bkt/local/c.parquet") == ICEBERG_ORPHAN_PREFIX_MISMATCH,
		  "s3 bucket vs file: mismatch");
	CHECK(iceberg_valid_set_check(vs, "file:///local/c.parquet") == ICEBERG_ORPHAN_VALID &&
		  iceberg_valid_set_check(vs, "file://localhost/local//c.parquet") == ICEBERG_ORPHAN_VALID,
		  "file spellings are one location");
	CHECK(iceberg_valid_set_check(vs, "s3://bkt//a/b.parquet") == ICEBERG_ORPHAN_ORPHAN,
		  "S3 keys are not squeezed: //a is another key");
	iceberg_valid_set_free(vs);
	strlist_free(&all);
	iceberg_metadata_free(md);

	/* pyiceberg: relative paths, resolved against the root */
	snprintf(folder, sizeof(folder), "%s/pyiceberg-v1-overwrite", fixtures);
	fs.maps[0].from = "data/persistent/iceberg_v1_repro/repro/merch_v1";
	fs.maps[0].to = folder;
	snprintf(path, sizeof(path), "%s/metadata/00003-8d01e4aa-d143-49c9-898e-b5e477577b70.metadata.json", folder);
	if (iceberg_metadata_read(&io, path, &md, &err))
	{
		memset(&oo, 0, sizeof(oo));
		vs = iceberg_valid_set_new(&oo);
		CHECK(!iceberg_valid_set_add_table(vs, &io, md, NULL, NULL, &err) &&
			  err.code == ICEBERG_ERR_INVALID_ARGUMENT, "relative paths without a root: refused");
		iceberg_valid_set_free(vs);
		vs = iceberg_valid_set_new(&oo);
		CHECK(iceberg_valid_set_add_table(vs, &io, md, NULL, "/wh", &err), "with a root: %s", err.message);
		iceberg_valid_set_seal(vs, &err);
		CHECK(iceberg_valid_set_check(vs, "/wh/data/persistent/iceberg_v1_repro/repro/merch_v1/metadata/version-hint.text") == ICEBERG_ORPHAN_VALID,
			  "relative version-hint");
		CHECK(iceberg_valid_set_check(vs, "/wh/data/persistent/iceberg_v1_repro/repro/merch_v1/metadata/snap-381223374871251311-0-2dbef94d-9ff1-478e-b122-905cbcacdee3.avro") == ICEBERG_ORPHAN_VALID,
			  "relative manifest list");
		CHECK(iceberg_valid_set_check(vs, "/wh/data/persistent/iceberg_v1_repro/repro/merch_v1/metadata/00000-c478e8ee-78c2-48c0-b618-24aa51a4b560.metadata.json") == ICEBERG_ORPHAN_VALID,
			  "metadata log (relative)");
		/* DELETED entries count as referenced: all 4 data files are valid */
		all.root = "/wh";
		iceberg_walk(&io, md, NULL, NULL, -1, ICEBERG_WALK_PURGE, collect_cb, &all, &err);
		strlist_sort_unique(&all);
		for (i = 0, bad = 0; i < all.n; i++)
			bad += iceberg_valid_set_check(vs, all.v[i]) != ICEBERG_ORPHAN_VALID;
		CHECK(bad == 0 && all.kinds[ICEBERG_FILE_DATA] >= 4, "pyiceberg: all %d valid (%d wrong)", all.n, bad);
		strlist_free(&all);
		iceberg_valid_set_free(vs);
		iceberg_metadata_free(md);
	}

	/* statistics and partition statistics */
	{
		const char *files[] = {
			"standalone-metadata/apache-iceberg/TableMetadataStatisticsFiles.json",
			"standalone-metadata/apache-iceberg/TableMetadataPartitionStatisticsFiles.json",
		};
		size_t		k;

		for (k = 0; k < 2; k++)
		{
			IcebergFileIO lio;
			int			j;

			iceberg_local_fileio(&lio, NULL);
			snprintf(path, sizeof(path), "%s/%s", fixtures, files[k]);
			if (!iceberg_metadata_read(&lio, path, &md, &err))
			{
				CHECK(false, "read %s: %s", files[k], err.message);
				continue;
			}
			memset(&oo, 0, sizeof(oo));
			vs = iceberg_valid_set_new(&oo);
			/* manifest lists do not exist: add just the statistics */
			for (j = 0; j < md->nstatistics; j++)
				iceberg_valid_set_add_path(vs, md->statistics[j].path, NULL, &err);
			for (j = 0; j < md->npartition_statistics; j++)
				iceberg_valid_set_add_path(vs, md->partition_statistics[j].path, NULL, &err);
			iceberg_valid_set_seal(vs, &err);
			CHECK(md->nstatistics + md->npartition_statistics > 0 &&
				  iceberg_valid_set_count(vs) == md->nstatistics + md->npartition_statistics,
				  "%s: statistics in the set", files[k]);
			for (j = 0; j < md->nstatistics; j++)
				CHECK(iceberg_valid_set_check(vs, md->statistics[j].path) == ICEBERG_ORPHAN_VALID,
					  "statistics file valid");
			for (j = 0; j < md->npartition_statistics; j++)
				CHECK(iceberg_valid_set_check(vs, md->partition_statistics[j].path) == ICEBERG_ORPHAN_VALID,
					  "partition statistics file valid");
			iceberg_valid_set_free(vs);
			iceberg_metadata_free(md);
		}
	}

	/* synthetic table with statistics files, walked through add_table */
	if (access("/usr/bin/python3", X_OK) == 0)
	{
		char		tmpl[] = "/tmp/tms-orphan-test.XXXXXX";
		char	   *dir = mkdtemp(tmpl);
		char		meta[1200];
		char		out[1200];

		snprintf(out, sizeof(out), "%s/t", dir ? dir : "/nonexistent");
		if (dir != NULL &&
			synth(out, "--snapshots 3 --data-files 9 --stats-files 2 --version-hint", meta, sizeof(meta)))
		{
			IcebergFileIO lio;
			int			j;

			iceberg_local_fileio(&lio, NULL);
			if (iceberg_metadata_read(&lio, meta, &md, &err))
			{
				memset(&oo, 0, sizeof(oo));
				vs = iceberg_valid_set_new(&oo);
				CHECK(iceberg_valid_set_add_table(vs, &lio, md, meta, NULL, &err),
					  "synth add: %s", err.message);
				iceberg_valid_set_seal(vs, &err);
				CHECK(md->nstatistics == 2, "synth has 2 statistics files");
				for (j = 0; j < md->nstatistics; j++)
					CHECK(iceberg_valid_set_check(vs, md->statistics[j].path) == ICEBERG_ORPHAN_VALID,
						  "synth statistics valid");
				/* every file synth wrote is valid */
				snprintf(path, sizeof(path), "cd '%s' && find \"$PWD\" -type f", out);
				{
					FILE	   *f = popen(path, "r");
					char		line[1400];
					int			nfiles = 0,
								wrong = 0;

					while (f != NULL && fgets(line, sizeof(line), f) != NULL)
					{
						line[strcspn(line, "\n")] = '\0';
						nfiles++;
						if (iceberg_valid_set_check(vs, line) != ICEBERG_ORPHAN_VALID)
						{
							wrong++;
							printf("  not valid: %s\n", line);
						}
					}
					if (f)
						pclose(f);
					CHECK(nfiles > 20 && wrong == 0, "synth: %d files on disk, %d not valid", nfiles, wrong);
				}
				iceberg_valid_set_free(vs);
				iceberg_metadata_free(md);
			}
			else
				CHECK(false, "read synth: %s", err.message);
		}
		else
			CHECK(false, "synth for valid set");
		if (dir != NULL)
		{
			snprintf(out, sizeof(out), "rm -rf '%s'", dir);
			if (system(out) != 0)
				printf("could not remove %s\n", dir);
		}
	}
}

/* ------------------------------------------------------------------------
 * Commit bodies
 * ------------------------------------------------------------------------
 */

static json_t *
load(const char *text)
{
	json_error_t je;

	return text ? json_loads(text, 0, &je) : NULL;
}

/* The object in array arr with member key == value. */
static json_t *
find_in(json_t *arr, const char *key, const char *value)
{
	size_t		i;
	json_t	   *v;

	json_array_foreach(arr, i, v)
	{
		json_t	   *k = json_object_get(v, key);

		if (json_is_string(k) && strcmp(json_string_value(k), value) == 0)
			return v;
	}
	return NULL;
}

static void
test_commit(void)
{
	IcebergExpirePlan p;
	TmsError	err;
	int64_t		expired[] = {11, 12, 9007199254740993LL};
	char	   *refs[] = {"old-tag", "dead-branch"};
	int64_t		refids[] = {11, -1};
	char	   *body;
	json_t	   *j,
			   *req,
			   *upd,
			   *x;

	memset(&p, 0, sizeof(p));
	p.nexpired = 3;
	p.expired = expired;
	p.nremoved_refs = 2;
	p.removed_refs = refs;
	p.removed_ref_snapshot_ids = refids;
	body = iceberg_commit_expire("9c12d441-03fe-4693-9a96-a0705ddf69c1", 42, &p, &err);
	j = load(body);
	CHECK(j != NULL, "expire body parses: %s", body ? body : err.message);
	if (j)
	{
		req = json_object_get(j, "requirements");
		upd = json_object_get(j, "updates");
		CHECK(json_array_size(req) == 4 && json_array_size(upd) == 3, "expire: 4 requirements, 3 updates");
		x = find_in(req, "type", "assert-table-uuid");
		CHECK(x && strcmp(json_string_value(json_object_get(x, "uuid")), "9c12d441-03fe-4693-9a96-a0705ddf69c1") == 0,
			  "assert-table-uuid");
		x = find_in(req, "ref", "main");
		CHECK(x && strcmp(json_string_value(json_object_get(x, "type")), "assert-ref-snapshot-id") == 0 &&
			  json_integer_value(json_object_get(x, "snapshot-id")) == 42, "assert main = 42");
		x = find_in(req, "ref", "old-tag");
		CHECK(x && json_integer_value(json_object_get(x, "snapshot-id")) == 11, "assert old-tag = 11");
		x = find_in(req, "ref", "dead-branch");
		CHECK(x && json_is_null(json_object_get(x, "snapshot-id")), "assert dead-branch = null");
		x = json_array_get(upd, 0);
		CHECK(strcmp(json_string_value(json_object_get(x, "action")), "remove-snapshot-ref") == 0 &&
			  strcmp(json_string_value(json_object_get(x, "ref-name")), "old-tag") == 0, "first: remove old-tag");
		x = json_array_get(upd, 1);
		CHECK(strcmp(json_string_value(json_object_get(x, "ref-name")), "dead-branch") == 0, "second: remove dead-branch");
		x = json_array_get(upd, 2);
		CHECK(strcmp(json_string_value(json_object_get(x, "action")), "remove-snapshots") == 0 &&
			  json_array_size(json_object_get(x, "snapshot-ids")) == 3 &&
			  json_integer_value(json_array_get(json_object_get(x, "snapshot-ids"), 2)) == 9007199254740993LL,
			  "remove-snapshots with exact 64-bit ids");
		json_decref(j);
	}
	io_free(body);

	/* main absent: null; no uuid: no assert-table-uuid; refs only */
	p.nexpired = 0;
	p.nremoved_refs = 1;
	body = iceberg_commit_expire(NULL, -1, &p, &err);
	j = load(body);
	if (j)
	{
		req = json_object_get(j, "requirements");
		x = find_in(req, "ref", "main");
		CHECK(x && json_is_null(json_object_get(x, "snapshot-id")), "main = null");
		CHECK(find_in(req, "type", "assert-table-uuid") == NULL, "no uuid assertion without a uuid");
		CHECK(json_array_size(json_object_get(j, "updates")) == 1, "refs only: one update");
		json_decref(j);
	}
	else
		CHECK(false, "refs-only body: %s", err.message);
	io_free(body);
	p.nremoved_refs = 0;
	body = iceberg_commit_expire("u", 1, &p, &err);
	CHECK(body == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "empty plan refused");
	io_free(body);
	p.nremoved_refs = 1;
	refs[0] = "main";
	body = iceberg_commit_expire("u", 1, &p, &err);
	CHECK(body == NULL, "removing main refused");
	io_free(body);
	refs[0] = "\xff\xfe";
	body = iceberg_commit_expire("u", 1, &p, &err);
	CHECK(body == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "invalid UTF-8 refused");
	io_free(body);

	/* add-snapshot */
	{
		IcebergKeyValue sum[] = {{"added-data-files", "3"}, {"operation", "ignored"}, {"total-records", "100"}};
		IcebergNewSnapshot s;

		memset(&s, 0, sizeof(s));
		s.snapshot_id = 777;
		s.parent_snapshot_id = 42;
		s.sequence_number = 9;
		s.timestamp_ms = 1700000000000LL;
		s.manifest_list = "s3://b/t/metadata/snap-777.avro";
		s.schema_id = 3;
		s.operation = "replace";
		s.nsummary = 3;
		s.summary = sum;
		body = iceberg_commit_snapshot("uuid-1", "main", &s, &err);
		j = load(body);
		CHECK(j != NULL, "snapshot body parses: %s", body ? body : err.message);
		if (j)
		{
			json_t	   *snap,
					   *summary;

			req = json_object_get(j, "requirements");
			upd = json_object_get(j, "updates");
			x = find_in(req, "type", "assert-ref-snapshot-id");
			CHECK(x && strcmp(json_string_value(json_object_get(x, "ref")), "main") == 0 &&
				  json_integer_value(json_object_get(x, "snapshot-id")) == 42, "asserts parent");
			CHECK(find_in(req, "type", "assert-table-uuid") != NULL, "asserts uuid");
			x = json_array_get(upd, 0);
			snap = json_object_get(x, "snapshot");
			summary = json_object_get(snap, "summary");
			CHECK(strcmp(json_string_value(json_object_get(x, "action")), "add-snapshot") == 0 &&
				  json_integer_value(json_object_get(snap, "snapshot-id")) == 777 &&
				  json_integer_value(json_object_get(snap, "parent-snapshot-id")) == 42 &&
				  json_integer_value(json_object_get(snap, "sequence-number")) == 9 &&
				  json_integer_value(json_object_get(snap, "timestamp-ms")) == 1700000000000LL &&
				  json_integer_value(json_object_get(snap, "schema-id")) == 3 &&
				  strcmp(json_string_value(json_object_get(snap, "manifest-list")), "s3://b/t/metadata/snap-777.avro") == 0,
				  "add-snapshot fields");
			CHECK(strcmp(json_string_value(json_object_get(summary, "operation")), "replace") == 0 &&
				  strcmp(json_string_value(json_object_get(summary, "added-data-files")), "3") == 0 &&
				  json_object_size(summary) == 3, "summary: operation wins, entries kept");
			x = json_array_get(upd, 1);
			CHECK(strcmp(json_string_value(json_object_get(x, "action")), "set-snapshot-ref") == 0 &&
				  strcmp(json_string_value(json_object_get(x, "ref-name")), "main") == 0 &&
				  strcmp(json_string_value(json_object_get(x, "type")), "branch") == 0 &&
				  json_integer_value(json_object_get(x, "snapshot-id")) == 777, "set-snapshot-ref");
			json_decref(j);
		}
		io_free(body);
		/* v1: no sequence number, no parent, no schema id */
		s.parent_snapshot_id = -1;
		s.sequence_number = 0;
		s.schema_id = -1;
		s.nsummary = 0;
		body = iceberg_commit_snapshot(NULL, "audit", &s, &err);
		j = load(body);
		if (j)
		{
			json_t	   *snap = json_object_get(json_array_get(json_object_get(j, "updates"), 0), "snapshot");

			x = find_in(json_object_get(j, "requirements"), "ref", "audit");
			CHECK(x && json_is_null(json_object_get(x, "snapshot-id")), "new branch: null");
			CHECK(json_object_get(snap, "sequence-number") == NULL &&
				  json_object_get(snap, "parent-snapshot-id") == NULL &&
				  json_object_get(snap, "schema-id") == NULL, "v1 omissions");
			json_decref(j);
		}
		else
			CHECK(false, "v1 body: %s", err.message);
		io_free(body);
		s.manifest_list = NULL;
		body = iceberg_commit_snapshot("u", "main", &s, &err);
		CHECK(body == NULL && err.code == ICEBERG_ERR_INVALID_ARGUMENT, "no manifest list refused");
		io_free(body);
		s.manifest_list = "x";
		body = iceberg_commit_snapshot("u", "", &s, &err);
		CHECK(body == NULL, "empty ref refused");
		io_free(body);
	}
}

/* ------------------------------------------------------------------------
 * The hash sets and in-place sorts under both
 * ------------------------------------------------------------------------
 */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static void
test_hash_sets(void)
{
	unsigned	seed = 5;
	size_t		sizes[] = {0, 1, 2, 3, 10, 1000, 5001};
	size_t		k,
				i;
	int			bad = 0;
	IcebergHashArray a = {0};
	IcebergHashTable t = {0};
	TmsError	err;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
	{
		size_t		n = sizes[k];
		uint64_t   *v = io_malloc(sizeof(uint64_t) * 2 * (n + 1));
		uint64_t   *w = io_malloc(sizeof(uint64_t) * 2 * (n + 1));

		for (i = 0; i < 2 * n; i++)
			v[i] = w[i] = (uint64_t) (RND() % 50);	/* many duplicates */
		iceberg_sort_u64(v, 2 * n);
		qsort(w, 2 * n, sizeof(uint64_t), cmp_u64);
		bad += 2 * n > 0 && memcmp(v, w, sizeof(uint64_t) * 2 * n) != 0;
		iceberg_sort_u64_pairs(v, n);	/* already sorted as singles */
		for (i = 1; i < n; i++)
			bad += v[2 * i - 2] > v[2 * i] ||
				(v[2 * i - 2] == v[2 * i] && v[2 * i - 1] > v[2 * i + 1]);
		for (i = 0; i < 2 * n; i++)
			v[i] = ((uint64_t) RND() << 40) ^ RND();
		iceberg_sort_u64_pairs(v, n);
		for (i = 1; i < n; i++)
			bad += v[2 * i - 2] > v[2 * i] ||
				(v[2 * i - 2] == v[2 * i] && v[2 * i - 1] > v[2 * i + 1]);
		io_free(v);
		io_free(w);
	}
	CHECK(bad == 0, "in-place sorts: %d misordered", bad);

	/* 200,000 additions of 30,000 distinct values: compaction keeps it small */
	for (i = 0, bad = 0; i < 200000; i++)
	{
		uint64_t	x = iceberg_path_hash(&(uint64_t) {i % 30000}, sizeof(uint64_t), 0);
		bool		added = false;

		if (!iceberg_hash_array_add(&a, x, &err) || !iceberg_hash_table_add(&t, x, &added, &err))
			bad++;
		bad += (i < 30000) != added;
	}
	iceberg_hash_array_seal(&a);
	CHECK(bad == 0 && a.n == 30000 && t.count == 30000, "distinct members: %zu %zu", a.n, t.count);
	CHECK(a.cap < 30000 * 2, "array capacity %zu for 30000 distinct of 200000 added", a.cap);
	for (i = 0, bad = 0; i < 60000; i++)
	{
		uint64_t	x = iceberg_path_hash(&(uint64_t) {i}, sizeof(uint64_t), 0);

		bad += iceberg_hash_array_has(&a, x) != (i < 30000);
		bad += iceberg_hash_table_has(&t, x) != (i < 30000);
	}
	CHECK(bad == 0, "membership: %d wrong", bad);
	CHECK(iceberg_path_hash("s3://b/x", 8, 0) != iceberg_path_hash("s3://b/y", 8, 0), "hash differs");
	iceberg_hash_array_free(&a);
	iceberg_hash_table_free(&t);
}

/* ------------------------------------------------------------------------
 * Robustness: mutated metadata never crashes
 * ------------------------------------------------------------------------
 */

static bool
null_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	(void) arg;
	(void) f;
	(void) err;
	return true;
}

static void
test_robustness(void)
{
	static const Snap s[] = {{1, -1, 100}, {2, 1, 200}, {3, 2, 300}, {4, 9, 400}, {5, 4, 500}};
	char	   *base = build_json(s, 5,
								  "{\"main\": {\"snapshot-id\": 5, \"type\": \"branch\", \"min-snapshots-to-keep\": 2},"
								  " \"t\": {\"snapshot-id\": 2, \"type\": \"tag\", \"max-ref-age-ms\": 7}}",
								  "{\"history.expire.max-ref-age-ms\": \"10\"}", 5);
	size_t		len = strlen(base);
	unsigned	seed = 99;
	int			round,
				parsed = 0;
	IcebergMemoryFile mem = {"garbage", 7};
	IcebergFileIO io;

	iceberg_memory_fileio(&io, &mem);
	for (round = 0; round < 3000; round++)
	{
		char	   *m = io_malloc(len + 1);
		int			k,
					nmut = 1 + (int) (RND() % 4);
		IcebergTableMetadata *md;
		TmsError	err;

		memcpy(m, base, len + 1);
		for (k = 0; k < nmut; k++)
		{
			size_t		pos = RND() % len;
			static const char alphabet[] = "0123456789-{}[]\",: abz9e";

			m[pos] = alphabet[RND() % (sizeof(alphabet) - 1)];
		}
		if (iceberg_metadata_parse(m, len, NULL, &md, &err))
		{
			IcebergExpireOptions o;
			IcebergExpirePlan p;
			IcebergTableMetadata *kept;

			parsed++;
			opts_default(&o, 1000, (int64_t) (RND() % 600), 1 + (int32_t) (RND() % 3));
			if (iceberg_expire_plan(md, &o, &p, &err))
			{
				char	   *body;

				kept = iceberg_metadata_without(md, &p, &err);
				if (kept != NULL)
				{
					/* every read fails or finds garbage: an error, no crash */
					(void) iceberg_expired_files(&io, md, kept, "/r", null_cb, NULL, &err);
					iceberg_metadata_free(kept);
				}
				body = iceberg_commit_expire(md->table_uuid, md->current_snapshot_id, &p, &err);
				io_free(body);
				iceberg_expire_plan_free(&p);
			}
			iceberg_metadata_free(md);
		}
		io_free(m);
	}
	CHECK(parsed > 100, "robustness: %d of 3000 mutations parsed and went through", parsed);
	io_free(base);
}

/* ------------------------------------------------------------------------
 * Memory benchmark (EXPIRE_BENCH=<metadata.json>)
 * ------------------------------------------------------------------------
 */

static long
peak_rss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static bool
count_cb(void *arg, const IcebergWalkFile *f, TmsError *err)
{
	(void) f;
	(void) err;
	(*(int64_t *) arg)++;
	return true;
}

/* One phase per process (EXPIRE_BENCH_PHASE=walk|expired|expired-most|valid), so that
 * each peak RSS is that phase's own. */
static int
bench(const char *meta)
{
	const char *phase = getenv("EXPIRE_BENCH_PHASE");
	IcebergFileIO io;
	IcebergTableMetadata *md,
			   *kept;
	TmsError	err;
	IcebergValidSet *vs;
	IcebergOrphanOptions oo;
	IcebergExpirePlan p;
	int64_t		nstream = 0,
				nwalk = 0;
	long		base_kb,
				walk_kb,
				vs_kb,
				exp_kb;

	(void) walk_kb;
	int64_t		id;

	iceberg_local_fileio(&io, NULL);
	if (!iceberg_metadata_read(&io, meta, &md, &err))
	{
		printf("read: %s\n", err.message);
		return 1;
	}
	base_kb = peak_rss_kb();
	if (phase == NULL)
		phase = "walk";
	if (strcmp(phase, "expired") == 0 || strcmp(phase, "expired-most") == 0)
		goto expired;
	if (strcmp(phase, "valid") == 0)
		goto valid;
	/* the walk alone: its own footprint, for reference */
	if (!iceberg_walk(&io, md, NULL, NULL, -1, ICEBERG_WALK_PURGE, count_cb, &nwalk, &err))
	{
		printf("walk: %s\n", err.message);
		return 1;
	}
	walk_kb = peak_rss_kb();
	printf("walk: %lld files reported, peak RSS %ld kB (after reading the metadata %ld kB)\n",
		   (long long) nwalk, walk_kb, base_kb);
	iceberg_metadata_free(md);
	return 0;

expired:

	/* expire the first snapshot: the kept set holds every file of the rest */
	memset(&p, 0, sizeof(p));
	if (strcmp(phase, "expired-most") == 0)
	{
		/* keep only the first snapshot: nearly every file streams */
		int			k;

		p.expired = io_malloc(sizeof(int64_t) * (size_t) md->nsnapshots);
		for (k = 1; k < md->nsnapshots; k++)
			p.expired[p.nexpired++] = md->snapshots[k].snapshot_id;
	}
	else
	{
		id = md->snapshots[0].snapshot_id;
		p.nexpired = 1;
		p.expired = &id;
	}
	kept = iceberg_metadata_without(md, &p, &err);
	if (p.expired != &id)
		io_free(p.expired);
	if (!iceberg_expired_files(&io, md, kept, NULL, count_cb, &nstream, &err))
	{
		printf("expired files: %s\n", err.message);
		return 1;
	}
	exp_kb = peak_rss_kb();
	printf("expired files (%s): %lld streamed, peak RSS %ld kB (after reading the metadata %ld kB)\n",
		   phase, (long long) nstream, exp_kb, base_kb);
	iceberg_metadata_free(kept);
	iceberg_metadata_free(md);
	return 0;

valid:

	memset(&oo, 0, sizeof(oo));
	vs = iceberg_valid_set_new(&oo);
	if (!iceberg_valid_set_add_table(vs, &io, md, meta, NULL, &err) ||
		!iceberg_valid_set_seal(vs, &err))
	{
		printf("valid set: %s\n", err.message);
		return 1;
	}
	vs_kb = peak_rss_kb();
	printf("valid set: %lld files, %lld bytes allocated (%.1f bytes/file), peak RSS %ld kB (after reading the metadata %ld kB)\n",
		   (long long) iceberg_valid_set_count(vs), (long long) iceberg_valid_set_bytes(vs),
		   (double) iceberg_valid_set_bytes(vs) / (double) iceberg_valid_set_count(vs),
		   vs_kb, base_kb);
	iceberg_valid_set_free(vs);
	iceberg_metadata_free(md);
	return 0;
}

int
main(void)
{
	const char *b;

	io_init();					/* before any jansson use */
	b = getenv("EXPIRE_BENCH");
	if (b != NULL)
		return bench(b);
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";

	test_plan_rules();
	test_plan_refs();
	test_plan_random();
	test_expired_fixtures();
	test_expired_all_fixtures();
	test_expired_synth();
	test_valid_set();
	test_commit();
	test_hash_sets();
	test_robustness();

	return unit_done();
}
