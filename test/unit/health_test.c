/*-------------------------------------------------------------------------
 *
 * health_test.c
 *	  Unit tests of a rule's score: the derived variables of the DSL
 *	  (healthScore and the estimates per operation, dsl_health.c) and
 *	  score programs (dsl_compile_score, dsl_eval_score, their explanation).
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <string.h>

#include "dsl/dsl.h"
#include "unit.h"

#define MB (INT64_C(1024) * 1024)

/* Metrics at the manifests level: every manifest-level variable set. */
static void
manifest_metrics(DslMetrics *m, int64_t files, int64_t records,
				 int64_t pos_files, int64_t pos_size, int64_t pos_records,
				 int64_t eq_records, int64_t manifests)
{
	memset(m, 0, sizeof(*m));
	dsl_metrics_set(m, DSL_VAR_DATA_FILES, files, 0);
	dsl_metrics_set(m, DSL_VAR_DATA_FILES_SIZE, files * 10 * MB, 0);
	dsl_metrics_set(m, DSL_VAR_DATA_RECORDS, records, 0);
	dsl_metrics_set(m, DSL_VAR_EQUALITY_DELETE_FILES, eq_records > 0, 0);
	dsl_metrics_set(m, DSL_VAR_EQUALITY_DELETE_FILES_SIZE, 0, 0);
	dsl_metrics_set(m, DSL_VAR_EQUALITY_DELETE_RECORDS, eq_records, 0);
	dsl_metrics_set(m, DSL_VAR_POSITION_DELETE_FILES, pos_files, 0);
	dsl_metrics_set(m, DSL_VAR_POSITION_DELETE_FILES_SIZE, pos_size, 0);
	dsl_metrics_set(m, DSL_VAR_POSITION_DELETE_RECORDS, pos_records, 0);
	dsl_metrics_set(m, DSL_VAR_AVG_DATA_FILE_SIZE, 0, 10.0 * MB);
	dsl_metrics_set(m, DSL_VAR_SNAPSHOTS, 3, 0);
	dsl_metrics_set(m, DSL_VAR_OLDEST_SNAPSHOT_AGE, 0, 0);
	dsl_metrics_set(m, DSL_VAR_TIME_SINCE_LAST_UPDATE, 0, 0);
	dsl_metrics_set(m, DSL_VAR_MANIFESTS, manifests, 0);
}

static DslTableFacts
facts(int64_t small, int64_t small_size, int64_t target)
{
	DslTableFacts f;

	memset(&f, 0, sizeof(f));
	f.small_files = small;
	f.small_files_size = small_size;
	f.target_file_size = target;
	return f;
}

static void
test_health_score(void)
{
	DslMetrics	m;
	DslTableFacts f;

	/* a healthy table: no small files, no deletes */
	manifest_metrics(&m, 10, 1000, 0, 0, 0, 0, 2);
	f = facts(0, 0, 512 * MB);
	CHECK(dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f), "derived");
	CHECK(m.health_score == 100.0, "healthy: %g", m.health_score);
	CHECK((m.present & DSL_VAR_DERIVED_BITS) == DSL_VAR_DERIVED_BITS, "present bits");

	/* half the files small: 100 - 50 * 0.5 */
	f = facts(5, 50 * MB, 512 * MB);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.health_score == 75.0, "half small: %g", m.health_score);

	/* one small file alone cannot be merged: no penalty */
	f = facts(1, 10 * MB, 512 * MB);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.health_score == 100.0, "one small file: %g", m.health_score);
	CHECK(m.estimated_rewrite_bytes == 0 && m.estimated_files_removed == 0,
		  "one small file: nothing to rewrite");

	/* all small, position deletes of 40% of the rows, equality 20% */
	manifest_metrics(&m, 10, 1000, 4, 4 * MB, 400, 200, 2);
	f = facts(10, 100 * MB, 512 * MB);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(fabs(m.health_score - (100.0 - 50.0 - 10.0 - 5.0)) < 1e-9,
		  "weighted: %g", m.health_score);
	CHECK(f.small_file_ratio == 1.0 && f.position_delete_ratio == 0.4 &&
		  f.equality_delete_ratio == 0.2, "terms %g %g %g", f.small_file_ratio,
		  f.position_delete_ratio, f.equality_delete_ratio);

	/* deletes beyond the rows saturate at the weight: 0 at worst */
	manifest_metrics(&m, 10, 1000, 4, 4 * MB, 5000, 5000, 2);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.health_score == 0.0, "worst: %g", m.health_score);

	/* deletes over no rows count fully; no deletes over no rows, not at all */
	manifest_metrics(&m, 0, 0, 1, MB, 10, 0, 1);
	f = facts(0, 0, 512 * MB);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.health_score == 75.0, "deletes of nothing: %g", m.health_score);
	manifest_metrics(&m, 0, 0, 0, 0, 0, 0, 0);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.health_score == 100.0, "empty table: %g", m.health_score);

	/* below the manifests level nothing is derived */
	memset(&m, 0, sizeof(m));
	dsl_metrics_set(&m, DSL_VAR_SNAPSHOTS, 3, 0);
	CHECK(!dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f), "metadata level: refused");
	CHECK((m.present & DSL_VAR_DERIVED_BITS) == 0, "metadata level: absent");
}

static void
test_estimates(void)
{
	DslMetrics	m;
	DslTableFacts f;

	/* compaction: 10 small files of 300 MB in all, target 128 MB -> 3 files */
	manifest_metrics(&m, 12, 1000, 5, 5 * MB, 10, 0, 7);
	f = facts(10, 300 * MB, 128 * MB);
	f.removed_files = 9;
	f.removed_bytes = 900;
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.estimated_rewrite_bytes == 300 * MB, "compaction rewrite %lld",
		  (long long) m.estimated_rewrite_bytes);
	CHECK(m.estimated_files_removed == 7, "compaction removed %lld",
		  (long long) m.estimated_files_removed);
	CHECK(m.estimated_bytes_reclaimed == 0, "compaction reclaims nothing yet");

	/* position-delete rewrite: 5 files of 5 MB into one */
	dsl_metrics_derive(&m, DSL_OP_POSITION_DELETE_REWRITE, &f);
	CHECK(m.estimated_rewrite_bytes == 5 * MB && m.estimated_files_removed == 4,
		  "posdel: %lld %lld", (long long) m.estimated_rewrite_bytes,
		  (long long) m.estimated_files_removed);

	/* manifest rewrite: all but one manifest */
	dsl_metrics_derive(&m, DSL_OP_MANIFEST_REWRITE, &f);
	CHECK(m.estimated_files_removed == 6 && m.estimated_rewrite_bytes == 0,
		  "manifests: %lld", (long long) m.estimated_files_removed);

	/* expiry: the snapshot summaries' removals */
	dsl_metrics_derive(&m, DSL_OP_SNAPSHOT_EXPIRY, &f);
	CHECK(m.estimated_files_removed == 9 && m.estimated_bytes_reclaimed == 900 &&
		  m.estimated_rewrite_bytes == 0, "expiry");

	/* orphans are not in the metadata: no estimate */
	dsl_metrics_derive(&m, DSL_OP_ORPHAN_CLEANUP, &f);
	CHECK(m.estimated_files_removed == 0 && m.estimated_bytes_reclaimed == 0 &&
		  m.estimated_rewrite_bytes == 0, "orphans");

	/* packing never removes more files than there are */
	f = facts(3, INT64_MAX, 1);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	CHECK(m.estimated_files_removed == 0, "huge files: %lld",
		  (long long) m.estimated_files_removed);

	CHECK(dsl_operation_lookup("snapshot-expiry") == DSL_OP_SNAPSHOT_EXPIRY &&
		  dsl_operation_lookup("compaction") == DSL_OP_COMPACTION &&
		  dsl_operation_lookup("vacuum") == DSL_OP_NONE &&
		  dsl_operation_lookup(NULL) == DSL_OP_NONE, "operation names");
}

static void
test_score_programs(void)
{
	DslMetrics	m;
	DslTableFacts f;
	DslInput	in;
	DslError	err;
	DslProgram *p;
	double		score;
	DslExplainNode nodes[32];
	char		text[512];

	/* numeric expressions compile, others do not */
	p = dsl_compile_score("100 - healthScore", 17, NULL, &err);
	CHECK(p != NULL && dsl_program_is_score(p), "double score: %s", err.message);
	CHECK(p && dsl_program_needs(p) == DSL_NEEDS_MANIFESTS, "needs manifests");
	CHECK(dsl_compile_score("dataFiles > 3", 13, NULL, &err) == NULL &&
		  err.kind == DSL_ERROR_TYPE && err.has_type && err.type == DSL_BOOLEAN &&
		  strstr(err.message, "LONG or DOUBLE, not BOOLEAN") != NULL,
		  "boolean refused: %s", err.message);
	CHECK(dsl_compile_score("'x'", 3, NULL, &err) == NULL && err.kind == DSL_ERROR_TYPE,
		  "string refused");
	CHECK(dsl_compile_score("healthScor", 10, NULL, &err) == NULL &&
		  err.kind == DSL_ERROR_SYNTAX && strstr(err.hint, "healthScore") != NULL,
		  "unknown variable: %s / %s", err.message, err.hint);
	CHECK(dsl_compile_score("  ", 2, NULL, &err) == NULL &&
		  strcmp(err.message, "rule score is empty") == 0, "empty: %s", err.message);
	CHECK(dsl_compile("100 - healthScore", 17, NULL, &err) == NULL &&
		  err.kind == DSL_ERROR_TYPE, "a score is not a condition");

	/* evaluated over the derived variables */
	manifest_metrics(&m, 10, 1000, 0, 0, 0, 0, 2);
	f = facts(5, 50 * MB, 512 * MB);
	dsl_metrics_derive(&m, DSL_OP_COMPACTION, &f);
	memset(&in, 0, sizeof(in));
	in.metrics = &m;
	CHECK(p && dsl_eval_score(p, &in, &score) == DSL_OK && score == 25.0, "score %g", score);
	CHECK(p && dsl_explain_count(p) <= 32, "nodes");
	if (p && dsl_explain_count(p) <= 32)
	{
		CHECK(dsl_explain_score(p, &in, &score, nodes) == DSL_OK && score == 25.0,
			  "explained score %g", score);
		dsl_explain_score_text(p, nodes, score, DSL_OK, text, sizeof(text));
		CHECK(strstr(text, "healthScore = 75.0") != NULL && strstr(text, "score: 25.0") != NULL,
			  "explanation: %s", text);
	}
	dsl_free(p);

	/* a LONG score; a failure is an outcome, the score 0 */
	p = dsl_compile_score("estimatedFilesRemoved * 2", 25, NULL, &err);
	CHECK(p != NULL && dsl_eval_score(p, &in, &score) == DSL_OK && score == 8.0,
		  "long score %g", score);
	dsl_free(p);
	p = dsl_compile_score("estimatedRewriteBytes / (dataFiles - 10)", 40, NULL, &err);
	CHECK(p != NULL && dsl_eval_score(p, &in, &score) == DSL_DIVISION_BY_ZERO && score == 0.0,
		  "division by zero");
	dsl_free(p);

	/* a derived variable not derived is missing, not 0 */
	memset(&m, 0, sizeof(m));
	p = dsl_compile_score("healthScore", 11, NULL, &err);
	CHECK(p != NULL && dsl_eval_score(p, &in, &score) == DSL_MISSING_METRIC, "missing");
	dsl_free(p);
}

int
main(void)
{
	test_health_score();
	test_estimates();
	test_score_programs();
	return unit_done();
}
