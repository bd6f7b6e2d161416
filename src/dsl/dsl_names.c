/*-------------------------------------------------------------------------
 *
 * dsl_names.c
 *		The names of the policy condition language: variables, lambda
 *		fields, types, outcomes, and "did you mean" suggestions.
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <string.h>

#include "dsl/dsl_int.h"

typedef struct VarInfo
{
	const char *name;
	DslType		type;
	DslNeeds	needs;
	uint32_t	offset;
} VarInfo;

#define M(field) ((uint32_t) offsetof(DslMetrics, field))

/* Indexed by DslVar; the spec's table of variables. */
static const VarInfo vars[DSL_VAR_COUNT] = {
	{"dataFiles", DSL_LONG, DSL_NEEDS_MANIFESTS, M(data_files)},
	{"dataFilesSize", DSL_LONG, DSL_NEEDS_MANIFESTS, M(data_files_size)},
	{"dataRecords", DSL_LONG, DSL_NEEDS_MANIFESTS, M(data_records)},
	{"equalityDeleteFiles", DSL_LONG, DSL_NEEDS_MANIFESTS, M(equality_delete_files)},
	{"equalityDeleteFilesSize", DSL_LONG, DSL_NEEDS_MANIFESTS, M(equality_delete_files_size)},
	{"equalityDeleteRecords", DSL_LONG, DSL_NEEDS_MANIFESTS, M(equality_delete_records)},
	{"positionDeleteFiles", DSL_LONG, DSL_NEEDS_MANIFESTS, M(position_delete_files)},
	{"positionDeleteFilesSize", DSL_LONG, DSL_NEEDS_MANIFESTS, M(position_delete_files_size)},
	{"positionDeleteRecords", DSL_LONG, DSL_NEEDS_MANIFESTS, M(position_delete_records)},
	{"dataFilesWithDeletes", DSL_LONG, DSL_NEEDS_DELETES, M(data_files_with_deletes)},
	{"dataFilesWithPositionDeletes", DSL_LONG, DSL_NEEDS_DELETES, M(data_files_with_position_deletes)},
	{"dataFilesWithEqualityDeletes", DSL_LONG, DSL_NEEDS_DELETES, M(data_files_with_equality_deletes)},
	{"avgDataFileSize", DSL_DOUBLE, DSL_NEEDS_MANIFESTS, M(avg_data_file_size)},
	{"snapshots", DSL_LONG, DSL_NEEDS_METADATA, M(snapshots)},
	{"oldestSnapshotAge", DSL_LONG, DSL_NEEDS_METADATA, M(oldest_snapshot_age)},
	{"manifests", DSL_LONG, DSL_NEEDS_MANIFEST_LIST, M(manifests)},
	{"timeSinceLastUpdate", DSL_LONG, DSL_NEEDS_METADATA, M(time_since_last_update)},
	{"healthScore", DSL_DOUBLE, DSL_NEEDS_MANIFESTS, M(health_score)},
	{"estimatedRewriteBytes", DSL_LONG, DSL_NEEDS_MANIFESTS, M(estimated_rewrite_bytes)},
	{"estimatedFilesRemoved", DSL_LONG, DSL_NEEDS_MANIFESTS, M(estimated_files_removed)},
	{"estimatedBytesReclaimed", DSL_LONG, DSL_NEEDS_MANIFESTS, M(estimated_bytes_reclaimed)},
};

#undef M

typedef struct FieldInfo
{
	const char *name;
	DslType		type;
	uint32_t	offset;
} FieldInfo;

#define F(field) ((uint32_t) offsetof(DslFile, field))

static const FieldInfo fields[DSL_FIELD_COUNT] = {
	{"size", DSL_LONG, F(size)},
	{"records", DSL_LONG, F(records)},
	{"hasDeletes", DSL_BOOLEAN, F(has_deletes)},
	{"hasPositionDeletes", DSL_BOOLEAN, F(has_position_deletes)},
	{"hasEqualityDeletes", DSL_BOOLEAN, F(has_equality_deletes)},
};

#undef F

/* The name of a type, as the language and its error messages spell it. */
const char *
dsl_type_name(DslType type)
{
	switch (type)
	{
		case DSL_BOOLEAN:
			return "BOOLEAN";
		case DSL_LONG:
			return "LONG";
		case DSL_DOUBLE:
			return "DOUBLE";
		case DSL_STRING:
			return "STRING";
	}
	return "?";
}

/* The name of a metric level: metadata, manifest_list, manifests, deletes. */
const char *
dsl_needs_name(DslNeeds needs)
{
	switch (needs)
	{
		case DSL_NEEDS_METADATA:
			return "metadata";
		case DSL_NEEDS_MANIFEST_LIST:
			return "manifest_list";
		case DSL_NEEDS_MANIFESTS:
			return "manifests";
		case DSL_NEEDS_DELETES:
			return "deletes";
	}
	return "?";
}

/* The name of an outcome, as SQL and the evaluation log report it. */
const char *
dsl_outcome_name(DslOutcome outcome)
{
	switch (outcome)
	{
		case DSL_OK:
			return "ok";
		case DSL_DIVISION_BY_ZERO:
			return "division_by_zero";
		case DSL_OVERFLOW:
			return "overflow";
		case DSL_MISSING_METRIC:
			return "missing_metric";
		case DSL_MISSING_FILES:
			return "missing_files";
		case DSL_FILE_SOURCE_ERROR:
			return "file_source_error";
	}
	return "?";
}

/* The DSL name of a variable ("dataFiles"); NULL if out of range. */
const char *
dsl_var_name(DslVar var)
{
	if ((unsigned) var >= DSL_VAR_COUNT)
		return NULL;
	return vars[var].name;
}

/* The type of a variable. */
DslType
dsl_var_type(DslVar var)
{
	return (unsigned) var < DSL_VAR_COUNT ? vars[var].type : DSL_LONG;
}

/* The metric level a variable needs. */
DslNeeds
dsl_var_needs(DslVar var)
{
	return (unsigned) var < DSL_VAR_COUNT ? vars[var].needs : DSL_NEEDS_METADATA;
}

/* Byte offset of a variable's field in DslMetrics. */
uint32_t
dsl_var_offset(DslVar var)
{
	return vars[var].offset;
}

/* The variable called name (case-sensitive), or -1. */
int
dsl_var_lookup(const char *name, size_t len)
{
	for (int i = 0; i < DSL_VAR_COUNT; i++)
		if (strlen(vars[i].name) == len && memcmp(vars[i].name, name, len) == 0)
			return i;
	return -1;
}

/* The DSL name of a lambda field ("size"). */
const char *
dsl_field_name(DslField field)
{
	if ((unsigned) field >= DSL_FIELD_COUNT)
		return NULL;
	return fields[field].name;
}

/* The lambda field called name (case-sensitive), or -1. */
int
dsl_field_lookup(const char *name, size_t len)
{
	for (int i = 0; i < DSL_FIELD_COUNT; i++)
		if (strlen(fields[i].name) == len && memcmp(fields[i].name, name, len) == 0)
			return i;
	return -1;
}

/* Byte offset of a lambda field in DslFile. */
uint32_t
dsl_field_offset(DslField field)
{
	return fields[field].offset;
}

/* The type of a lambda field. */
DslType
dsl_field_type(DslField field)
{
	return fields[field].type;
}

/* See dsl.h. */
void
dsl_metrics_set(DslMetrics *metrics, DslVar var, int64_t value, double dvalue)
{
	char	   *p;

	if ((unsigned) var >= DSL_VAR_COUNT)
		return;
	p = (char *) metrics + vars[var].offset;
	if (vars[var].type == DSL_DOUBLE)
		memcpy(p, &dvalue, sizeof(double));
	else
		memcpy(p, &value, sizeof(int64_t));
	metrics->present |= DSL_VAR_BIT(var);
}

/* See dsl.h. */
bool
dsl_metrics_get(const DslMetrics *metrics, DslVar var, DslValue *value)
{
	const char *p;

	memset(value, 0, sizeof(*value));
	if ((unsigned) var >= DSL_VAR_COUNT ||
		!(metrics->present & DSL_VAR_BIT(var)))
		return false;
	p = (const char *) metrics + vars[var].offset;
	if (vars[var].type == DSL_DOUBLE)
		memcpy(&value->d, p, sizeof(double));
	else
		memcpy(&value->l, p, sizeof(int64_t));
	return true;
}

/*
 * Optimal string alignment distance between a[0..alen) and b (ASCII
 * case-insensitive), or a large number when a is too long to bother.
 */
static int
edit_distance(const char *a, size_t alen, const char *b)
{
	size_t		blen = strlen(b);
	int			d[3][64];		/* rows i-2, i-1, i of the DP table */

	if (alen >= 63 || blen >= 63)
		return 1000;
	for (size_t j = 0; j <= blen; j++)
		d[1][j] = (int) j;
	for (size_t i = 1; i <= alen; i++)
	{
		int		   *cur = d[(i + 1) % 3];
		int		   *prev = d[i % 3];
		int		   *prev2 = d[(i + 2) % 3];

		/* rows rotate: prev = row i-1, prev2 = row i-2, cur = row i */
		cur[0] = (int) i;
		for (size_t j = 1; j <= blen; j++)
		{
			int			ca = tolower((unsigned char) a[i - 1]);
			int			cb = tolower((unsigned char) b[j - 1]);
			int			cost = ca == cb ? 0 : 1;
			int			v = prev[j] + 1;

			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (prev[j - 1] + cost < v)
				v = prev[j - 1] + cost;
			if (i > 1 && j > 1 &&
				ca == tolower((unsigned char) b[j - 2]) &&
				tolower((unsigned char) a[i - 2]) == cb &&
				prev2[j - 2] + 1 < v)
				v = prev2[j - 2] + 1;
			cur[j] = v;
		}
	}
	return d[(alen + 1) % 3][blen];
}

/*
 * The candidate closest to name, if close enough to be a plausible typo
 * (a different case counts as no difference), else NULL.
 */
const char *
dsl_suggest(const char *name, size_t len,
			const char *const *candidates, int ncandidates)
{
	const char *best = NULL;
	int			best_d = 1000;
	int			limit = len <= 3 ? 1 : len <= 8 ? 2 : 3;

	for (int i = 0; i < ncandidates; i++)
	{
		int			dist = edit_distance(name, len, candidates[i]);

		if (dist < best_d)
		{
			best_d = dist;
			best = candidates[i];
		}
	}
	return best_d <= limit ? best : NULL;
}
