/*-------------------------------------------------------------------------
 *
 * dsl_test.c
 *		Unit tests of the policy condition language (src/dsl/), plain C.
 *
 * Build and run: make unit (or
 *   gcc -std=gnu99 -Wall -Wextra -Werror -Isrc test/unit/dsl_test.c src/dsl/[a-z]*.c -lm)
 * Prints each failure and "N passed, N failed" last; exits non-zero on a
 * failure.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl.h"
#include "unit.h"

/* ---- inputs ---- */

static const char *props[16][2];
static int	nprops;

static const char *
get_prop(void *arg, const char *name)
{
	(void) arg;
	for (int i = 0; i < nprops; i++)
		if (strcmp(props[i][0], name) == 0)
			return props[i][1];
	return NULL;
}

static void
set_props(const char *const *kv)
{
	nprops = 0;
	while (kv && kv[0])
	{
		props[nprops][0] = kv[0];
		props[nprops][1] = kv[1];
		nprops++;
		kv += 2;
	}
}

typedef struct file_iter
{
	const DslFile *files;
	size_t		n;
	size_t		pos;
	size_t		batch;
	int			calls;
	bool		fail;
} file_iter;

static int
next_files(void *arg, const DslFile **files, size_t *nfiles)
{
	file_iter  *it = arg;
	size_t		k;

	it->calls++;
	if (it->fail)
		return -1;
	if (it->pos >= it->n)
		return 0;
	k = it->n - it->pos < it->batch ? it->n - it->pos : it->batch;
	*files = it->files + it->pos;
	*nfiles = k;
	it->pos += k;
	return 1;
}

static DslMetrics metrics;
static DslFile files[8];
static size_t nfiles;
static file_iter iter;
static DslProperties properties = {get_prop, NULL};
static DslFileSource source = {next_files, &iter};

static void
reset_inputs(void)
{
	memset(&metrics, 0, sizeof(metrics));
	for (int v = 0; v < DSL_VAR_COUNT; v++)
		dsl_metrics_set(&metrics, v, 0, 0.0);
	set_props(NULL);
	nfiles = 0;
}

static void
add_file(int64_t size, int64_t records, bool pos, bool eq)
{
	DslFile		f = {size, records, pos || eq, pos, eq};

	files[nfiles++] = f;
}

static void
setm(DslVar v, int64_t l)
{
	dsl_metrics_set(&metrics, v, l, (double) l);
}

/*
 * Compile src and evaluate it in both modes; check that they agree and
 * return the outcome, with *result set.
 */
static DslOutcome
run(const char *src, bool *result, char *text, size_t textlen)
{
	DslError	err;
	DslProgram *p = dsl_compile(src, strlen(src), NULL, &err);
	DslInput	in = {&metrics, &properties, &source};
	DslOutcome	o1,
				o2;
	bool		r1,
				r2;
	DslExplainNode *nodes;

	if (p == NULL)
	{
		printf("  compile error for %s: %s\n%s\n", src, err.message, err.excerpt);
		*result = false;
		return (DslOutcome) -1;
	}
	memset(&iter, 0, sizeof(iter));
	iter.files = files;
	iter.n = nfiles;
	iter.batch = 3;
	o1 = dsl_eval(p, &in, &r1);
	CHECK(iter.calls <= (int) (nfiles / 3 + 2), "%s: stream read more than once", src);
	nodes = calloc((size_t) dsl_explain_count(p) + 1, sizeof(*nodes));
	memset(&iter, 0, sizeof(iter));
	iter.files = files;
	iter.n = nfiles;
	iter.batch = 2;
	o2 = dsl_explain(p, &in, &r2, nodes);
	CHECK(o1 == o2 && r1 == r2, "%s: eval (%d,%d) and explain (%d,%d) disagree",
		  src, o1, r1, o2, r2);
	if (text)
		dsl_explain_text(p, nodes, r2, o2, text, textlen);
	free(nodes);
	dsl_free(p);
	*result = r1;
	return o1;
}

static void
expect(const char *src, bool want)
{
	bool		r;
	DslOutcome	o = run(src, &r, NULL, 0);

	CHECK(o == DSL_OK && r == want, "%s: want %s, got %s (outcome %s)",
		  src, want ? "true" : "false", r ? "true" : "false",
		  (int) o < 0 ? "compile error" : dsl_outcome_name(o));
}

static void
expect_outcome(const char *src, DslOutcome want)
{
	bool		r;
	DslOutcome	o = run(src, &r, NULL, 0);

	CHECK(o == want && !r, "%s: want outcome %s, got %s", src,
		  dsl_outcome_name(want), (int) o < 0 ? "compile error" : dsl_outcome_name(o));
}

static void
expect_error(const char *src, DslErrorKind kind, const char *msg,
			 int line, int column, const char *hint)
{
	DslError	err;
	DslProgram *p = dsl_compile(src, strlen(src), NULL, &err);

	CHECK(p == NULL, "%s: compiled, want error \"%s\"", src, msg);
	if (p)
	{
		dsl_free(p);
		return;
	}
	CHECK(err.kind == kind, "%s: kind %d, want %d (%s)", src, err.kind, kind, err.message);
	CHECK(strstr(err.message, msg) != NULL, "%s: message \"%s\", want \"%s\"",
		  src, err.message, msg);
	if (line > 0)
		CHECK(err.line == line && err.column == column,
			  "%s: at %d:%d, want %d:%d (%s)", src, err.line, err.column,
			  line, column, err.message);
	if (hint)
		CHECK(strstr(err.hint, hint) != NULL, "%s: hint \"%s\", want \"%s\"",
			  src, err.hint, hint);
}

/* ---- tests ---- */

static void
test_literals(void)
{
	reset_inputs();
	expect("1KB == 1024", true);
	expect("1kb == 1024 AND 1mb == 1048576 AND 1gb == 1073741824", true);
	expect("512MB == 536870912", true);
	expect("100KB == 102400", true);
	expect("1GB == 1073741824", true);
	expect("30m == 1800000 AND 2h == 7200000 AND 7d == 604800000", true);
	expect("1.5KB == 1536.0", true);
	expect("0.5 + 0.25 == 0.75", true);
	expect("100.0 == 100", true);
	expect("'it\\'s' == \"it's\"", true);
	expect("'a\\\\b' == \"a\\\\b\"", true);
	expect("'tab\\there' == \"tab\there\"", true);
	expect("true AND !false", true);
	expect("TRUE == true AND False == false", true);
	expect("9223372036854775807 > 0", true);
	expect("8589934591GB > 0", true);
	expect("'abc' < 'abd' AND 'b' > 'a' AND 'x' <= 'x' AND 'x' >= 'x'", true);
	expect("007 == 7", true);
}

static void
test_precedence(void)
{
	reset_inputs();
	/* * binds tighter than + */
	expect("2 + 3 * 4 == 14", true);
	/* - is left-associative */
	expect("10 - 4 - 3 == 3", true);
	expect("100 / 10 / 5 == 2", true);
	/* unary minus binds tighter than * and + */
	expect("-2 * 3 == -6 AND -2 + 5 == 3", true);
	/* + - bind tighter than comparisons */
	expect("1 + 1 > 1", true);
	/* comparisons bind tighter than == */
	expect("1 < 2 == 3 < 4", true);
	expect("true == 1 < 2", true);
	/* == binds tighter than AND */
	expect("false == false AND true", true);
	/* AND binds tighter than OR: true OR (false AND false) */
	expect("true OR false AND false", true);
	expect("false AND false OR true", true);
	/* ! binds tighter than AND / OR / == */
	expect("!false AND true", true);
	expect("!true == false", true);
	expect("!(true AND false)", true);
	expect("(2 + 3) * 4 == 20", true);
	/* keywords in any case */
	expect("true and false or true", true);
	expect("TRUE Or FALSE", true);
}

static void
test_arithmetic(void)
{
	reset_inputs();
	expect("7 / 2 == 3.5", true);	/* / is DOUBLE */
	expect("7 / 2 > 3", true);
	expect("1 + 0.5 == 1.5", true);
	expect("3 * 0.5 == 1.5", true);
	expect("-(-5) == 5", true);
	setm(DSL_VAR_DATA_FILES, 0);
	expect_outcome("dataFilesSize / dataFiles > 1", DSL_DIVISION_BY_ZERO);
	expect_outcome("1 / 0 > 0 OR true", DSL_DIVISION_BY_ZERO);
	expect("true OR 1 / 0 > 0", true);	/* short-circuit: never divided */
	expect("false AND 1 / 0 > 0", false);
	expect_outcome("1.0 / 0.0 == 1", DSL_DIVISION_BY_ZERO);
	expect_outcome("9223372036854775807 + 1 > 0", DSL_OVERFLOW);
	expect_outcome("-9223372036854775807 - 2 < 0", DSL_OVERFLOW);
	expect_outcome("9223372036854775807 * 2 > 0", DSL_OVERFLOW);
	expect_outcome("GB(9223372036854775807) > 0", DSL_OVERFLOW);
	setm(DSL_VAR_DATA_FILES, INT64_MAX);
	expect_outcome("dataFiles + 1 > 0", DSL_OVERFLOW);
	expect_outcome("-dataFiles - 2 < 0", DSL_OVERFLOW);
	expect("-dataFiles < 0", true);
	expect_outcome("MB(dataFiles) > 0", DSL_OVERFLOW);
	expect("dataFiles * 1.0 > 0", true);
}

static void
test_functions(void)
{
	reset_inputs();
	expect("KB(1) == 1024 AND MB(1) == 1048576 AND GB(1) == 1073741824", true);
	expect("hours(1) == 3600000 AND days(1) == 86400000", true);
	expect("MB(1.5) == 1572864.0", true);
	expect("hours(0.5) == 1800000", true);
	setm(DSL_VAR_DATA_FILES, 3);
	expect("KB(dataFiles) == 3072", true);
	expect("MB(64) == 64MB", true);
}

static void
test_properties(void)
{
	static const char *const p1[] = {
		"write.target-file-size-bytes", "1048576",
		"maintenance.disabled", "TRUE",
		"bad.long", "512MB",
		"spaced.long", " 42",
		"neg.long", "-17",
		"double.v", "0.25",
		"exp.v", "1e3",
		"nan.v", "nan",
		"owner.team", "data-eng",
		"bool.bad", "yes",
		"huge.long", "99999999999999999999",
		"min.long", "-9223372036854775808",
		NULL
	};

	reset_inputs();
	set_props(p1);
	expect("property('write.target-file-size-bytes', 512MB) == 1048576", true);
	expect("property('missing', 512MB) == 536870912", true);
	expect("property('maintenance.disabled', false)", true);
	expect("!property('maintenance.disabled', false)", false);
	expect("property('bad.long', 7) == 7", true);	/* no suffixes */
	expect("property('spaced.long', 7) == 7", true);	/* no whitespace */
	expect("property('neg.long', 7) == -17", true);
	expect("property('min.long', 7) < 0", true);
	expect("property('huge.long', 7) == 7", true);
	expect("property('double.v', 1.0) == 0.25", true);
	expect("property('exp.v', 1.0) == 1000.0", true);
	expect("property('neg.long', 1.0) == -17.0", true);
	expect("property('nan.v', 2.5) == 2.5", true);
	expect("property('double.v', 5) == 5", true);	/* LONG default: 0.25
													 * fails */
	expect("property('owner.team', 'default') == 'data-eng'", true);
	expect("property('nobody', 'default') == 'default'", true);
	expect("property('bool.bad', true)", true);
	expect("property('bool.bad', false)", false);
	expect("property(\"owner.team\", 'x') != 'x'", true);
	expect("MB(property('target-file-size-mb', 128)) == 128MB", true);
	/* the default is only evaluated when needed */
	expect("property('maintenance.disabled', 1 / 0 > 0)", true);
	expect("property('neg.long', 1 / 0) < 0", true);
	expect_outcome("property('absent', 1 / 0) < 0", DSL_DIVISION_BY_ZERO);
}

static void
test_variables(void)
{
	const char *src;

	reset_inputs();
	for (int v = 0; v < DSL_VAR_COUNT; v++)
	{
		char		buf[128];
		DslError	err;
		DslProgram *p;

		snprintf(buf, sizeof(buf), "%s == 0", dsl_var_name(v));
		p = dsl_compile(buf, strlen(buf), NULL, &err);
		CHECK(p != NULL, "%s: %s", buf, err.message);
		if (p)
		{
			CHECK(dsl_program_variables(p) == DSL_VAR_BIT(v), "%s: variables", buf);
			CHECK(dsl_program_needs(p) == dsl_var_needs(v), "%s: needs", buf);
			CHECK(!dsl_program_uses_files(p), "%s: files", buf);
			dsl_free(p);
		}
		expect(buf, true);
	}
	CHECK(dsl_var_needs(DSL_VAR_SNAPSHOTS) == DSL_NEEDS_METADATA, "snapshots needs");
	CHECK(dsl_var_needs(DSL_VAR_MANIFESTS) == DSL_NEEDS_MANIFEST_LIST, "manifests needs");
	CHECK(dsl_var_needs(DSL_VAR_DATA_FILES_WITH_DELETES) == DSL_NEEDS_DELETES, "deletes needs");
	CHECK(dsl_var_type(DSL_VAR_AVG_DATA_FILE_SIZE) == DSL_DOUBLE, "avg type");

	/* a missing metric is an evaluation error, not a silent 0 */
	metrics.present &= ~DSL_VAR_BIT(DSL_VAR_SNAPSHOTS);
	expect_outcome("snapshots == 0", DSL_MISSING_METRIC);
	expect_outcome("dataFiles == 0 OR snapshots == 0", DSL_MISSING_METRIC);
	expect("dataFiles == 0", true);

	src = "countDataFiles(f -> true) == 0";
	{
		DslProgram *p = dsl_compile(src, strlen(src), NULL, NULL);
		DslInput	in = {&metrics, NULL, NULL};
		bool		r;

		CHECK(p && dsl_eval(p, &in, &r) == DSL_MISSING_FILES, "missing files");
		dsl_free(p);
	}
}

/* dsl_metrics_get() reads each variable's own field, in its own type. */
static void
test_metrics_get(void)
{
	DslMetrics	m;
	DslValue	v;

	/* one distinct value per field, set directly, not through the table */
	static const struct
	{
		DslVar		var;
		const char *name;
		int64_t		l;
	}			want[] = {
		{DSL_VAR_DATA_FILES, "dataFiles", 101},
		{DSL_VAR_DATA_FILES_SIZE, "dataFilesSize", INT64_MAX},
		{DSL_VAR_DATA_RECORDS, "dataRecords", 103},
		{DSL_VAR_EQUALITY_DELETE_FILES, "equalityDeleteFiles", 104},
		{DSL_VAR_EQUALITY_DELETE_FILES_SIZE, "equalityDeleteFilesSize", 105},
		{DSL_VAR_EQUALITY_DELETE_RECORDS, "equalityDeleteRecords", 106},
		{DSL_VAR_POSITION_DELETE_FILES, "positionDeleteFiles", 107},
		{DSL_VAR_POSITION_DELETE_FILES_SIZE, "positionDeleteFilesSize", 108},
		{DSL_VAR_POSITION_DELETE_RECORDS, "positionDeleteRecords", 109},
		{DSL_VAR_DATA_FILES_WITH_DELETES, "dataFilesWithDeletes", 110},
		{DSL_VAR_DATA_FILES_WITH_POSITION_DELETES, "dataFilesWithPositionDeletes", 111},
		{DSL_VAR_DATA_FILES_WITH_EQUALITY_DELETES, "dataFilesWithEqualityDeletes", 112},
		{DSL_VAR_AVG_DATA_FILE_SIZE, "avgDataFileSize", 0},
		{DSL_VAR_SNAPSHOTS, "snapshots", 114},
		{DSL_VAR_OLDEST_SNAPSHOT_AGE, "oldestSnapshotAge", INT64_MIN},
		{DSL_VAR_MANIFESTS, "manifests", -1},
		{DSL_VAR_TIME_SINCE_LAST_UPDATE, "timeSinceLastUpdate", 117},
		{DSL_VAR_HEALTH_SCORE, "healthScore", 0},
		{DSL_VAR_ESTIMATED_REWRITE_BYTES, "estimatedRewriteBytes", 119},
		{DSL_VAR_ESTIMATED_FILES_REMOVED, "estimatedFilesRemoved", 120},
		{DSL_VAR_ESTIMATED_BYTES_RECLAIMED, "estimatedBytesReclaimed", 121},
	};

	CHECK(sizeof(want) / sizeof(want[0]) == DSL_VAR_COUNT, "a case per variable");
	memset(&m, 0, sizeof(m));
	m.data_files = 101;
	m.data_files_size = INT64_MAX;
	m.data_records = 103;
	m.equality_delete_files = 104;
	m.equality_delete_files_size = 105;
	m.equality_delete_records = 106;
	m.position_delete_files = 107;
	m.position_delete_files_size = 108;
	m.position_delete_records = 109;
	m.data_files_with_deletes = 110;
	m.data_files_with_position_deletes = 111;
	m.data_files_with_equality_deletes = 112;
	m.avg_data_file_size = 113.25;
	m.snapshots = 114;
	m.oldest_snapshot_age = INT64_MIN;
	m.manifests = -1;
	m.time_since_last_update = 117;
	m.health_score = 113.25;
	m.estimated_rewrite_bytes = 119;
	m.estimated_files_removed = 120;
	m.estimated_bytes_reclaimed = 121;

	/* nothing present: every metric is absent, the value zeroed */
	for (int i = 0; i < DSL_VAR_COUNT; i++)
	{
		v.l = 42;
		CHECK(!dsl_metrics_get(&m, want[i].var, &v) && v.l == 0,
			  "%s absent", want[i].name);
	}

	/* each present alone: that one reads its field, the others are absent */
	for (int i = 0; i < DSL_VAR_COUNT; i++)
	{
		DslVar		var = want[i].var;

		CHECK(strcmp(dsl_var_name(var), want[i].name) == 0, "%s: name %s",
			  want[i].name, dsl_var_name(var));
		m.present = DSL_VAR_BIT(var);
		CHECK(dsl_metrics_get(&m, var, &v), "%s present", want[i].name);
		if (var == DSL_VAR_AVG_DATA_FILE_SIZE || var == DSL_VAR_HEALTH_SCORE)
			CHECK(dsl_var_type(var) == DSL_DOUBLE && v.d == 113.25,
				  "%s: %g", want[i].name, v.d);
		else
			CHECK(dsl_var_type(var) == DSL_LONG && v.l == want[i].l,
				  "%s: %" PRId64 ", want %" PRId64, want[i].name, v.l, want[i].l);
		for (int j = 0; j < DSL_VAR_COUNT; j++)
			if (j != i)
				CHECK(!dsl_metrics_get(&m, want[j].var, &v),
					  "%s present: %s absent", want[i].name, want[j].name);
	}

	/* what dsl_metrics_set() writes, dsl_metrics_get() reads back */
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < DSL_VAR_COUNT; i++)
		dsl_metrics_set(&m, want[i].var, want[i].l, 113.25);
	CHECK(m.present == (UINT32_C(1) << DSL_VAR_COUNT) - 1, "all present");
	for (int i = 0; i < DSL_VAR_COUNT; i++)
		CHECK(dsl_metrics_get(&m, want[i].var, &v) &&
			  (dsl_var_type(want[i].var) == DSL_DOUBLE ? v.d == 113.25 : v.l == want[i].l),
			  "%s: set then get", want[i].name);

	/* not a variable */
	CHECK(!dsl_metrics_get(&m, DSL_VAR_COUNT, &v), "DSL_VAR_COUNT");
	CHECK(!dsl_metrics_get(&m, (DslVar) -1, &v), "-1");
}

static void
test_spec_examples(void)
{
	static const char *const tprops[] = {"write.target-file-size-bytes", "104857600", NULL};

	reset_inputs();
	setm(DSL_VAR_DATA_FILES, 150);
	dsl_metrics_set(&metrics, DSL_VAR_AVG_DATA_FILE_SIZE, 0, 64.0 * 1048576);
	expect("dataFiles > 100 AND avgDataFileSize < 128MB", true);
	setm(DSL_VAR_DATA_FILES, 80);
	expect("dataFiles > 100 AND avgDataFileSize < 128MB", false);

	/* 12 files, 7 under the 100 MiB target: 7/12 > 0.5 */
	set_props(tprops);
	setm(DSL_VAR_DATA_FILES, 8);
	for (int i = 0; i < 7; i++)
		add_file((int64_t) (i + 1) * 10 * 1048576, 1000, false, false);
	add_file(200 * 1048576LL, 1000, false, false);
	expect("dataFiles > 10 AND countDataFiles(f -> f.size < property('write.target-file-size-bytes', 512MB)) / dataFiles > 0.5", false);
	setm(DSL_VAR_DATA_FILES, 12);
	expect("dataFiles > 10 AND countDataFiles(f -> f.size < property('write.target-file-size-bytes', 512MB)) / dataFiles > 0.5", true);
	set_props(NULL);			/* 512MB default: 8 / 12 */
	expect("countDataFiles(f -> f.size < property('write.target-file-size-bytes', 512MB)) == 8", true);
	set_props(tprops);
	expect("countDataFiles(f -> f.size < property('write.target-file-size-bytes', 512MB)) == 7", true);

	setm(DSL_VAR_EQUALITY_DELETE_FILES, 11);
	expect("equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000", true);
	setm(DSL_VAR_EQUALITY_DELETE_FILES, 10);
	expect("equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000", false);
	setm(DSL_VAR_EQUALITY_DELETE_RECORDS, 100001);
	expect("equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000", true);

	setm(DSL_VAR_EQUALITY_DELETE_FILES_SIZE, 512 * 1048576LL);
	setm(DSL_VAR_POSITION_DELETE_FILES_SIZE, 512 * 1048576LL);
	expect("equalityDeleteFilesSize + positionDeleteFilesSize > 1GB", false);
	setm(DSL_VAR_POSITION_DELETE_FILES_SIZE, 512 * 1048576LL + 1);
	expect("equalityDeleteFilesSize + positionDeleteFilesSize > 1GB", true);

	setm(DSL_VAR_DATA_FILES_WITH_DELETES, 100000);
	expect("dataFilesWithDeletes > 100000", false);
	setm(DSL_VAR_DATA_FILES_WITH_DELETES, 100001);
	expect("dataFilesWithDeletes > 100000", true);

	nfiles = 0;
	for (int i = 0; i < 6; i++)
		add_file(10 * 1048576, 10, i % 2 == 0, i % 2 == 1);
	expect("countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5", true);
	files[0].has_deletes = false;
	expect("countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5", false);
	expect("countDataFiles(f -> f.hasPositionDeletes) == 3 AND countDataFiles(x -> x.hasEqualityDeletes) == 3", true);

	{
		const char *combined = "!property('maintenance.disabled', false) AND (\n"
		"    (dataFiles > 100 AND avgDataFileSize < 128MB)\n"
		"    OR equalityDeleteFiles > 50\n"
		"    OR (timeSinceLastUpdate > 3d AND snapshots > 50)\n)";
		static const char *const off[] = {"maintenance.disabled", "true", NULL};

		set_props(NULL);
		reset_inputs();
		expect(combined, false);
		setm(DSL_VAR_TIME_SINCE_LAST_UPDATE, 3 * 86400000LL + 1);
		setm(DSL_VAR_SNAPSHOTS, 51);
		expect(combined, true);
		set_props(off);
		expect(combined, false);
		set_props(NULL);
		setm(DSL_VAR_SNAPSHOTS, 50);
		expect(combined, false);
		setm(DSL_VAR_EQUALITY_DELETE_FILES, 51);
		expect(combined, true);
	}

	reset_inputs();
	setm(DSL_VAR_SNAPSHOTS, 2);
	setm(DSL_VAR_OLDEST_SNAPSHOT_AGE, 5 * 86400000LL + 1);
	expect("snapshots > 1 AND oldestSnapshotAge > days(5)", true);
	setm(DSL_VAR_OLDEST_SNAPSHOT_AGE, 5 * 86400000LL);
	expect("snapshots > 1 AND oldestSnapshotAge > days(5)", false);

	nfiles = 0;
	for (int i = 0; i < 8; i++)
		add_file(i < 7 ? 2 * 1073741824LL : 1, i < 7 ? 999 : 5000, false, false);
	expect("countDataFiles(f -> f.size > 1GB) > 10", false);
	expect("countDataFiles(f -> f.size > 1GB) == 7", true);
	expect("countDataFiles(f -> f.records < 1000) > 50", false);
	expect("countDataFiles(f -> f.records < 1000) == 7", true);
	expect("countDataFiles(f -> true) == 8", true);
	expect("countDataFiles(f -> f.size < 512MB AND f.records < 10000) == 1", true);
}

static void
test_lambdas(void)
{
	static const char *const kb[] = {"small-file-threshold-kb", "2", NULL};

	reset_inputs();
	add_file(1024, 1, false, false);
	add_file(2048, 0, false, false);
	add_file(4096, 2, true, true);
	setm(DSL_VAR_DATA_FILES, 3);
	/* outer variables inside the lambda */
	expect("countDataFiles(f -> f.size * dataFiles > 6000) == 2", true);
	expect("countDataFiles(file -> file.size > dataFiles) == 3", true);
	expect("countDataFiles(f -> 2048 <= f.size) == 2", true);
	set_props(kb);
	expect("countDataFiles(f -> f.size < KB(property('small-file-threshold-kb', 512))) > 0", true);
	expect("countDataFiles(f -> f.size < KB(property('small-file-threshold-kb', 512))) == 1", true);
	/* a parameter named like a variable shadows it inside the lambda */
	expect("countDataFiles(dataFiles -> dataFiles.size > 0) == dataFiles", true);
	/* division by zero per file: the condition is false */
	expect_outcome("countDataFiles(f -> f.size / f.records > 1) > 0", DSL_DIVISION_BY_ZERO);
	/* ... unless that countDataFiles is not reached */
	expect("true OR countDataFiles(f -> f.size / f.records > 1) > 0", true);
	expect("countDataFiles(f -> f.size > 0) == 3 OR countDataFiles(f -> f.size / f.records > 1) > 0", true);
	/* a hoisted division no file reaches is never a failure */
	setm(DSL_VAR_MANIFESTS, 0);
	expect("countDataFiles(f -> f.size > 1000000 AND f.size / manifests > 1) == 0", true);
	expect_outcome("countDataFiles(f -> f.size > 0 AND f.size / manifests > 1) == 0", DSL_DIVISION_BY_ZERO);
	/* conjunctions of per-file tests (the tight loop) against the tree */
	expect("countDataFiles(f -> f.size != 2048 AND !f.hasDeletes) == 1", true);
	expect("countDataFiles(f -> !f.hasPositionDeletes AND f.records >= 0 AND f.size <= 2048 AND 1 <= f.size) == 2", true);
	expect("countDataFiles(f -> f.size > 1024 AND f.records == 0 AND !f.hasEqualityDeletes AND f.size < 4096 AND true) == 1", true);
	expect("countDataFiles(f -> f.size < -9223372036854775807 - 1) == 0", true);
	expect("countDataFiles(f -> f.size > 9223372036854775807) == 0", true);
	expect("countDataFiles(f -> f.size >= -9223372036854775807 - 1 AND f.size <= 9223372036854775807) == 3", true);
	expect("countDataFiles(f -> f.size == (dataFiles - 1) * 1024 AND f.hasDeletes == false) == 1", true);
	expect("countDataFiles(f -> dataFiles < f.records) == 0 AND countDataFiles(f -> 1 < f.records) == 1", true);
	/* empty stream */
	nfiles = 0;
	expect("countDataFiles(f -> true) == 0", true);
	/* stream failure */
	{
		const char *src = "countDataFiles(f -> true) >= 0";
		DslProgram *p = dsl_compile(src, strlen(src), NULL, NULL);
		DslInput	in = {&metrics, &properties, &source};
		bool		r = true;

		memset(&iter, 0, sizeof(iter));
		iter.fail = true;
		CHECK(p && dsl_eval(p, &in, &r) == DSL_FILE_SOURCE_ERROR && !r, "stream error");
		dsl_free(p);
	}
	{
		const char *src = "countDataFiles(f -> f.hasDeletes) > 0";
		DslProgram *p = dsl_compile(src, strlen(src), NULL, NULL);

		CHECK(p && dsl_program_uses_files(p) && dsl_program_needs(p) == DSL_NEEDS_DELETES &&
			  dsl_program_fields(p) == DSL_FIELD_BIT(DSL_FIELD_HAS_DELETES), "lambda needs");
		dsl_free(p);
		src = "countDataFiles(f -> f.size > 0) > snapshots";
		p = dsl_compile(src, strlen(src), NULL, NULL);
		CHECK(p && dsl_program_needs(p) == DSL_NEEDS_MANIFESTS &&
			  dsl_program_variables(p) == DSL_VAR_BIT(DSL_VAR_SNAPSHOTS), "lambda needs manifests");
		dsl_free(p);
	}
}

static void
test_errors(void)
{
	expect_error("", DSL_ERROR_SYNTAX, "policy condition is empty", 1, 1, NULL);
	expect_error("  \n ", DSL_ERROR_SYNTAX, "policy condition is empty", 0, 0, NULL);
	expect_error("dataFiles >", DSL_ERROR_SYNTAX, "syntax error at end of input", 1, 12, NULL);
	expect_error("dataFiles > 100 100", DSL_ERROR_SYNTAX, "syntax error at or near \"100\"", 1, 17,
				 "end of the condition");
	expect_error("dataFiles > 100)", DSL_ERROR_SYNTAX, "syntax error at or near \")\"", 1, 16, NULL);
	expect_error("(dataFiles > 100", DSL_ERROR_SYNTAX, "at end of input", 1, 17, "\")\"");
	expect_error("datafiles > 100", DSL_ERROR_SYNTAX, "unrecognized variable \"datafiles\"", 1, 1,
				 "Did you mean \"dataFiles\"?");
	expect_error("dataFile > 100", DSL_ERROR_SYNTAX, "unrecognized variable", 1, 1, "\"dataFiles\"");
	expect_error("snapshots > 1 AND\n  oldestSnapshotAg > 5", DSL_ERROR_SYNTAX,
				 "unrecognized variable \"oldestSnapshotAg\"", 2, 3, "\"oldestSnapshotAge\"");
	expect_error("zzz > 1", DSL_ERROR_SYNTAX, "unrecognized variable \"zzz\"", 1, 1, "");
	expect_error("mb(64) > 1", DSL_ERROR_SYNTAX, "unrecognized function \"mb\"", 1, 1, "\"MB\"");
	expect_error("dayz(5) > 1", DSL_ERROR_SYNTAX, "unrecognized function \"dayz\"", 1, 1, "\"days\"");
	expect_error("dataFiles(1) > 1", DSL_ERROR_SYNTAX, "is a variable, not a function", 1, 1, NULL);
	expect_error("days > 1", DSL_ERROR_SYNTAX, "used without arguments", 1, 1, NULL);
	expect_error("countDataFiles(f -> f.sise < 1) > 1", DSL_ERROR_SYNTAX,
				 "unrecognized field \"sise\"", 1, 23, "\"size\"");
	expect_error("countDataFiles(f -> f.hasdeletes) > 1", DSL_ERROR_SYNTAX,
				 "unrecognized field", 1, 23, "\"hasDeletes\"");
	expect_error("countDataFiles(f -> f) > 1", DSL_ERROR_SYNTAX, "must be followed by a field", 1, 21, NULL);
	expect_error("f.size > 1", DSL_ERROR_SYNTAX, "unrecognized variable \"f\"", 1, 1, "countDataFiles");
	expect_error("countDataFiles(f -> countDataFiles(g -> true) > 0) > 1", DSL_ERROR_SYNTAX,
				 "cannot be nested", 1, 21, NULL);
	expect_error("countDataFiles(f.size) > 1", DSL_ERROR_SYNTAX, "takes a lambda", 1, 16, NULL);
	expect_error("countDataFiles(f -> f.size) > 1", DSL_ERROR_TYPE,
				 "predicate of countDataFiles() must be of type BOOLEAN, not LONG", 1, 21, NULL);
	expect_error("countDataFiles(f -> true, 1) > 1", DSL_ERROR_TYPE, "takes 1 argument", 1, 25, NULL);
	expect_error("MB(1, 2) > 1", DSL_ERROR_TYPE, "function MB() takes 1 argument, not 2", 1, 1, NULL);
	expect_error("days() > 1", DSL_ERROR_TYPE, "function days() takes 1 argument, not 0", 1, 1, NULL);
	expect_error("property('x') > 1", DSL_ERROR_TYPE, "takes 2 arguments, not 1", 1, 1, NULL);
	expect_error("property(dataFiles, 1) > 1", DSL_ERROR_TYPE, "must be a string literal", 1, 10, NULL);
	expect_error("MB('x') > 1", DSL_ERROR_TYPE, "argument of MB() must be of type LONG or DOUBLE, not STRING",
				 1, 4, NULL);
	expect_error("dataFiles > 'many'", DSL_ERROR_TYPE, "operator does not exist: LONG > STRING", 1, 11, NULL);
	expect_error("true > false", DSL_ERROR_TYPE, "operator does not exist: BOOLEAN > BOOLEAN", 1, 6, NULL);
	expect_error("dataFiles AND true", DSL_ERROR_TYPE, "argument of AND must be of type BOOLEAN, not LONG",
				 1, 1, NULL);
	expect_error("true OR 'x'", DSL_ERROR_TYPE, "argument of OR must be of type BOOLEAN, not STRING", 1, 9, NULL);
	expect_error("'a' + 'b' == 'ab'", DSL_ERROR_TYPE, "operator does not exist: STRING + STRING", 1, 5, NULL);
	expect_error("!dataFiles", DSL_ERROR_TYPE, "argument of ! must be of type BOOLEAN, not LONG", 1, 2, NULL);
	expect_error("!dataFiles > 5", DSL_ERROR_TYPE, "argument of ! must be", 1, 2, NULL);
	expect_error("-true", DSL_ERROR_TYPE, "argument of unary - must be", 1, 2, NULL);
	expect_error("dataFiles + 1", DSL_ERROR_TYPE, "policy condition must be of type BOOLEAN, not LONG", 1, 1, NULL);
	expect_error("'x'", DSL_ERROR_TYPE, "must be of type BOOLEAN, not STRING", 1, 1, NULL);
	expect_error("dataFiles > 'unterminated", DSL_ERROR_SYNTAX, "unterminated quoted string", 1, 13, NULL);
	expect_error("\"abc\\", DSL_ERROR_SYNTAX, "unterminated quoted string", 1, 1, NULL);
	expect_error("'a\\qb' == 'x'", DSL_ERROR_SYNTAX, "invalid escape sequence \"\\q\"", 1, 3, NULL);
	expect_error("dataFiles > 10XB", DSL_ERROR_SYNTAX, "invalid suffix \"XB\"", 1, 15, "KB, MB and GB");
	expect_error("dataFiles > 10Mb", DSL_ERROR_SYNTAX, "invalid suffix \"Mb\"", 1, 15, NULL);
	expect_error("dataFiles > 1e6", DSL_ERROR_SYNTAX, "invalid suffix \"e6\"", 1, 14, NULL);
	expect_error("dataFiles > 9223372036854775808", DSL_ERROR_SYNTAX, "out of range for type LONG", 1, 13, NULL);
	expect_error("dataFiles > 8589934592GB", DSL_ERROR_SYNTAX, "out of range for type LONG", 1, 13, NULL);
	expect_error("dataFiles > 106751991167301d", DSL_ERROR_SYNTAX, "out of range", 1, 13, NULL);
	expect_error("dataFiles = 100", DSL_ERROR_SYNTAX, "syntax error at or near \"=\"", 1, 11, "==");
	expect_error("dataFiles > 1 && true", DSL_ERROR_SYNTAX, "\"&&\"", 1, 15, "AND");
	expect_error("dataFiles > 1 || true", DSL_ERROR_SYNTAX, "\"||\"", 1, 15, "OR");
	expect_error("dataFiles <> 1", DSL_ERROR_SYNTAX, "\"<>\"", 1, 11, "!=");
	expect_error("dataFiles > 1 # x", DSL_ERROR_SYNTAX, "invalid character \"#\"", 1, 15, NULL);
	expect_error("dataFiles > \xc3\xa9", DSL_ERROR_SYNTAX, "invalid character 0xc3", 1, 13, NULL);
	expect_error("not true", DSL_ERROR_SYNTAX, "unrecognized variable \"not\"", 1, 1, "!");
	/* columns count characters, not bytes */
	expect_error("'\xc3\xa9\xc3\xa9' == 'x' AND zz", DSL_ERROR_SYNTAX, "unrecognized variable", 1, 17, NULL);
	/* nesting */
	{
		size_t		n = 10000;
		char	   *s = malloc(2 * n + 16);

		memset(s, '(', n);
		strcpy(s + n, "true");
		memset(s + n + 4, ')', n);
		s[2 * n + 4] = '\0';
		expect_error(s, DSL_ERROR_TOO_COMPLEX, "nested too deeply", 1, 101, NULL);
		memset(s, '!', n);
		strcpy(s + n, "true");
		expect_error(s, DSL_ERROR_TOO_COMPLEX, "nested too deeply", 1, 101, NULL);
		memset(s, '-', n);
		strcpy(s + n, "1 > 0");
		expect_error(s, DSL_ERROR_TOO_COMPLEX, "nested too deeply", 1, 101, NULL);
		free(s);
	}
	{
		/* a long chain is a deep tree */
		char	   *s = malloc(40000);
		size_t		k = 0;

		for (int i = 0; i < 1500; i++)
			k += (size_t) sprintf(s + k, "%ssnapshots", i ? "+" : "");
		strcpy(s + k, " > 0");
		expect_error(s, DSL_ERROR_TOO_COMPLEX, "too complex", 0, 0, NULL);
		k = 0;
		for (int i = 0; i < 500; i++)
			k += (size_t) sprintf(s + k, "%sdataFiles", i ? "+" : "");
		strcpy(s + k, " > 0");
		{
			DslProgram *p = dsl_compile(s, strlen(s), NULL, NULL);

			CHECK(p != NULL, "500-term chain compiles");
			dsl_free(p);
		}
		free(s);
	}
	{
		char	   *s = malloc(DSL_MAX_SOURCE_LEN + 10);

		memset(s, ' ', DSL_MAX_SOURCE_LEN + 1);
		memcpy(s, "true", 4);
		s[DSL_MAX_SOURCE_LEN + 1] = '\0';
		expect_error(s, DSL_ERROR_TOO_LONG, "too long", 1, 1, NULL);
		s[DSL_MAX_SOURCE_LEN] = '\0';
		{
			DslProgram *p = dsl_compile(s, strlen(s), NULL, NULL);

			CHECK(p != NULL, "65536 bytes compile");
			dsl_free(p);
		}
		free(s);
	}
	{
		char		s[2000] = "";

		for (int i = 0; i < 17; i++)
			strcat(s, "countDataFiles(f -> true) > 0 AND ");
		strcat(s, "true");
		expect_error(s, DSL_ERROR_TOO_COMPLEX, "too many countDataFiles", 0, 0, NULL);
	}
	/* caret excerpt */
	{
		DslError	err;
		const char *src = "snapshots > 1 AND\n\toldestSnapshotAg > 5";

		CHECK(dsl_compile(src, strlen(src), NULL, &err) == NULL, "excerpt compile");
		CHECK(strcmp(err.excerpt, "\toldestSnapshotAg > 5\n\t^") == 0,
			  "excerpt: [%s]", err.excerpt);
		CHECK(err.position == 20 && err.offset == 19, "position %d offset %d", err.position, err.offset);
	}
	{
		/* long lines are windowed */
		DslError	err;
		char		s[400];

		memset(s, ' ', sizeof(s));
		memcpy(s, "true AND", 8);
		memcpy(s + 300, "bogus", 6);
		CHECK(dsl_compile(s, strlen(s), NULL, &err) == NULL, "window compile");
		CHECK(strlen(err.excerpt) < 200 && strncmp(err.excerpt, "...", 3) == 0 &&
			  strstr(err.excerpt, "bogus\n") != NULL, "window excerpt: [%s]", err.excerpt);
	}
	{
		DslError	err;

		CHECK(dsl_compile("dataFiles + 1", 13, NULL, &err) == NULL && err.has_type &&
			  err.type == DSL_LONG, "non-boolean type reported");
	}
	{
		DslError	err;

		CHECK(dsl_compile("true\0", 5, NULL, &err) == NULL &&
			  strstr(err.message, "invalid character 0x00"), "NUL byte: %s", err.message);
	}
}

static void
test_explain(void)
{
	char		text[2000];
	bool		r;

	reset_inputs();
	setm(DSL_VAR_DATA_FILES, 80);
	dsl_metrics_set(&metrics, DSL_VAR_AVG_DATA_FILE_SIZE, 0, 210.0 * 1048576);
	run("dataFiles > 100 AND avgDataFileSize < 128MB", &r, text, sizeof(text));
	CHECK(strcmp(text, "dataFiles = 80 (> 100 is false)\n"
				 "avgDataFileSize < 128MB: not evaluated\n"
				 "result: false") == 0, "explain 1: [%s]", text);
	setm(DSL_VAR_DATA_FILES, 180);
	run("dataFiles > 100 AND avgDataFileSize < 128MB", &r, text, sizeof(text));
	CHECK(strcmp(text, "dataFiles = 180 (> 100 is true)\n"
				 "avgDataFileSize = 220200960.0 (< 128MB is false)\n"
				 "result: false") == 0, "explain 2: [%s]", text);
	setm(DSL_VAR_DATA_FILES, 0);
	run("dataFilesSize / dataFiles > 5 OR true", &r, text, sizeof(text));
	CHECK(strstr(text, "dataFilesSize / dataFiles > 5: division by zero where dataFilesSize = 0, dataFiles = 0\n") &&
		  strstr(text, "true: not evaluated") &&
		  strstr(text, "result: false (division by zero)"), "explain 3: [%s]", text);
	add_file(10, 1, false, false);
	add_file(20, 1, false, false);
	setm(DSL_VAR_DATA_FILES, 2);
	run("countDataFiles(f -> f.size < property('target', 15)) / dataFiles > 0.4", &r, text, sizeof(text));
	CHECK(strstr(text, "= 0.5 (> 0.4 is true) where countDataFiles(f -> f.size < property('target', 15)) = 1 (of 2 data files), property('target', 15) = 15 (default: no such table property), dataFiles = 2") != NULL,
		  "explain 4: [%s]", text);
	run("!property('maintenance.disabled', false) AND snapshots >= 0", &r, text, sizeof(text));
	CHECK(strstr(text, "!property('maintenance.disabled', false) = true where property('maintenance.disabled', false) = false (default: no such table property)") != NULL,
		  "explain 5: [%s]", text);

	/* explain nodes */
	{
		const char *src = "countDataFiles(f -> f.size < property('target', 15)) > 0 AND dataFiles == 2";
		DslProgram *p = dsl_compile(src, strlen(src), NULL, NULL);
		DslExplainNode nodes[32];
		DslInput	in = {&metrics, &properties, &source};
		int			hoisted = -1,
					field = -1;

		memset(&iter, 0, sizeof(iter));
		iter.files = files;
		iter.n = nfiles;
		iter.batch = 10;
		CHECK(p && dsl_explain_count(p) <= 32, "explain count");
		CHECK(dsl_explain(p, &in, &r, nodes) == DSL_OK && r, "explain eval");
		CHECK(nodes[0].kind == DSL_KIND_LOGICAL && nodes[0].parent == -1 &&
			  strcmp(nodes[0].op, "AND") == 0, "root node");
		for (int i = 0; i < dsl_explain_count(p); i++)
		{
			if (nodes[i].kind == DSL_KIND_PROPERTY)
				hoisted = i;
			if (nodes[i].kind == DSL_KIND_FIELD)
				field = i;
		}
		CHECK(hoisted >= 0 && nodes[hoisted].state == DSL_NODE_EVALUATED &&
			  nodes[hoisted].value.l == 15 && !nodes[hoisted].property_found, "hoisted recorded");
		CHECK(field >= 0 && nodes[field].state == DSL_NODE_PER_FILE, "field per file");
		dsl_free(p);
	}
}

/* A failing allocator: every allocation after the first n fails. */
static int	alloc_budget;
static int	alloc_live;

static void *
budget_alloc(void *arg, size_t size)
{
	(void) arg;
	if (alloc_budget-- <= 0)
		return NULL;
	alloc_live++;
	return malloc(size);
}

static void
budget_free(void *arg, void *ptr)
{
	(void) arg;
	alloc_live--;
	free(ptr);
}

static void
test_allocator(void)
{
	DslAllocator a = {budget_alloc, budget_free, NULL};
	char		src[3000] = "";
	int			ok_at = -1;

	for (int i = 0; i < 60; i++)
		strcat(src, "'abcdefghijklmnopqrstuvwxyz0123456789' == 'x' OR ");
	strcat(src, "dataFiles > 1");
	for (int budget = 0; budget < 100; budget++)
	{
		DslError	err;
		DslProgram *p;

		alloc_budget = budget;
		alloc_live = 0;
		p = dsl_compile(src, strlen(src), &a, &err);
		if (p)
		{
			ok_at = budget;
			dsl_free(p);
			CHECK(alloc_live == 0, "leak after free: %d", alloc_live);
			break;
		}
		CHECK(err.kind == DSL_ERROR_OUT_OF_MEMORY, "budget %d: kind %d %s", budget, err.kind, err.message);
		CHECK(alloc_live == 0, "budget %d: %d blocks leaked", budget, alloc_live);
	}
	CHECK(ok_at > 1, "compiles with enough memory (%d)", ok_at);
}

int
main(void)
{
	test_literals();
	test_precedence();
	test_arithmetic();
	test_functions();
	test_properties();
	test_variables();
	test_metrics_get();
	test_spec_examples();
	test_lambdas();
	test_errors();
	test_explain();
	test_allocator();
	return unit_done();
}
