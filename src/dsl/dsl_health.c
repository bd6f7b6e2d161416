/*-------------------------------------------------------------------------
 *
 * dsl_health.c
 *		The derived variables of the policy language: healthScore and the
 *		estimates of what a rule's operation would rewrite, remove and
 *		reclaim (estimatedRewriteBytes, estimatedFilesRemoved,
 *		estimatedBytesReclaimed), computed from the table's metrics.
 *
 * This is the only computation of these values: the policy evaluation
 * calls dsl_metrics_derive() before it evaluates a condition or a score,
 * and anything else that shows them (SQL) reads what it recorded.
 * doc/dsl.md states the formulas; keep it in step.
 *
 *		s = small files / data files   (0 with fewer than 2 small files)
 *		p = min(1, position-delete records / data records)
 *		e = min(1, equality-delete records / data records)
 *		healthScore = 100 - 50 s - 25 p - 25 e            (0 .. 100)
 *
 * A ratio over 0 data records is 1 when there are delete records, else 0.
 * Every sum saturates at the LONG range; nothing here allocates.
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "dsl/dsl.h"

#define MANIFEST_BITS \
	(DSL_VAR_BIT(DSL_VAR_DATA_FILES) | DSL_VAR_BIT(DSL_VAR_DATA_FILES_SIZE) | \
	 DSL_VAR_BIT(DSL_VAR_DATA_RECORDS) | \
	 DSL_VAR_BIT(DSL_VAR_EQUALITY_DELETE_RECORDS) | \
	 DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_FILES) | \
	 DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_FILES_SIZE) | \
	 DSL_VAR_BIT(DSL_VAR_POSITION_DELETE_RECORDS) | \
	 DSL_VAR_BIT(DSL_VAR_MANIFESTS))

/* See dsl.h. */
DslOperation
dsl_operation_lookup(const char *name)
{
	static const struct
	{
		const char *name;
		DslOperation op;
	}			ops[] = {
		{"compaction", DSL_OP_COMPACTION},
		{"position-delete-rewrite", DSL_OP_POSITION_DELETE_REWRITE},
		{"manifest-rewrite", DSL_OP_MANIFEST_REWRITE},
		{"snapshot-expiry", DSL_OP_SNAPSHOT_EXPIRY},
		{"orphan-cleanup", DSL_OP_ORPHAN_CLEANUP},
	};

	if (name == NULL)
		return DSL_OP_NONE;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(ops[i].name, name) == 0)
			return ops[i].op;
	return DSL_OP_NONE;
}

/* part / whole in 0 .. 1: 1 for parts of nothing, 0 for nothing. */
static double
ratio(int64_t part, int64_t whole)
{
	double		r;

	if (part <= 0)
		return 0.0;
	if (whole <= 0)
		return 1.0;
	r = (double) part / (double) whole;
	return r > 1.0 ? 1.0 : r;
}

/*
 * The files that remain when n files of bytes in total are packed into
 * files of target bytes: n - ceil(bytes / target), at least 0; nothing is
 * merged out of fewer than 2 files.
 */
static int64_t
files_merged_away(int64_t n, int64_t bytes, int64_t target)
{
	int64_t		out;

	if (n < 2 || bytes < 0)
		return 0;
	if (target <= 0)
		target = 1;
	out = bytes / target + (bytes % target != 0 ? 1 : 0);
	if (out < 1)
		out = 1;
	return n > out ? n - out : 0;
}

/* See dsl.h. */
bool
dsl_metrics_derive(DslMetrics *m, DslOperation op, DslTableFacts *f)
{
	double		s,
				p,
				e,
				h;
	int64_t		small = f->small_files;

	if ((m->present & MANIFEST_BITS) != MANIFEST_BITS)
		return false;

	s = small >= 2 ? ratio(small, m->data_files) : 0.0;
	p = ratio(m->position_delete_records, m->data_records);
	e = ratio(m->equality_delete_records, m->data_records);
	h = 100.0 - DSL_HEALTH_SMALL_FILES_WEIGHT * s -
		DSL_HEALTH_POSITION_DELETES_WEIGHT * p -
		DSL_HEALTH_EQUALITY_DELETES_WEIGHT * e;
	m->health_score = h < 0.0 ? 0.0 : (h > 100.0 ? 100.0 : h);
	f->small_file_ratio = s;
	f->position_delete_ratio = p;
	f->equality_delete_ratio = e;

	m->estimated_rewrite_bytes = 0;
	m->estimated_files_removed = 0;
	m->estimated_bytes_reclaimed = 0;
	switch (op)
	{
		case DSL_OP_COMPACTION:
			if (small >= 2)
				m->estimated_rewrite_bytes = f->small_files_size;
			m->estimated_files_removed =
				files_merged_away(small, f->small_files_size, f->target_file_size);
			break;
		case DSL_OP_POSITION_DELETE_REWRITE:
			if (m->position_delete_files >= 2)
				m->estimated_rewrite_bytes = m->position_delete_files_size;
			m->estimated_files_removed =
				files_merged_away(m->position_delete_files,
								  m->position_delete_files_size, f->target_file_size);
			break;
		case DSL_OP_MANIFEST_REWRITE:
			m->estimated_files_removed = m->manifests > 1 ? m->manifests - 1 : 0;
			break;
		case DSL_OP_SNAPSHOT_EXPIRY:
			m->estimated_files_removed = f->removed_files > 0 ? f->removed_files : 0;
			m->estimated_bytes_reclaimed = f->removed_bytes > 0 ? f->removed_bytes : 0;
			break;
		case DSL_OP_ORPHAN_CLEANUP:
		case DSL_OP_NONE:
			break;
	}
	m->present |= DSL_VAR_DERIVED_BITS;
	return true;
}
