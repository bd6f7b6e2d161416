/*-------------------------------------------------------------------------
 *
 * compact_refusals.c
 *	  What the local engine's compaction helper cannot rewrite, found
 *	  before anything runs: the types of a table's schema
 *	  (iceberg_compact_check_schema) and the equality deletes of a plan's
 *	  groups (iceberg_compact_check_deletes: a field the current schema
 *	  lacks, one inside a list or a map, or one not primitive; a
 *	  top-level column or a field of structs at any depth is applied).  Each is ICEBERG_ERR_UNSUPPORTED
 *	  (0A000 above) naming the field or the file and why, so that the user
 *	  is sent to an engine server rather than to a failed group.
 *
 * Rules of this file: plain C, errors as TmsError values, nothing
 * allocated.
 *
 * src/iceberg/compact/compact_refusals.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"

#include <stdio.h>
#include <string.h>

#define MAX_EQ_DEPTH	64		/* as deep as iceberg_schema_parse reads */

/*
 * The first field under c[0..n) (full names below prefix) of a type the
 * helper does not write: timestamptz_ns (DuckDB has no UTC-adjusted
 * nanosecond type: its values would lose their nanoseconds), a struct
 * without fields (DuckDB has no empty struct), and types this code does
 * not know (v3's unknown, variant, geometry, geography).
 */
static bool
check_fields(const IcebergColumn *c, int n, const char *prefix, TmsError *err)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		char		name[512];
		const char *why = NULL;

		snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", c[i].name);
		if (c[i].type == ICEBERG_TYPE_TIMESTAMPTZ_NS)
			why = "DuckDB, which the local engine rewrites with, has no type for timestamps with time zone in nanoseconds.";
		else if (c[i].type == ICEBERG_TYPE_STRUCT && c[i].nchildren == 0)
			why = "DuckDB, which the local engine rewrites with, has no struct without fields.";
		else if (c[i].type == ICEBERG_TYPE_OTHER)
			why = "The local engine rewrites the types of the Iceberg spec's formats v1 and v2, nested ones included, and timestamp_ns.";
		if (why == NULL && ICEBERG_TYPE_IS_NESTED(c[i].type) && c[i].initial_default != NULL &&
			strcmp(c[i].initial_default, "null") != 0)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "compaction on engine \"local\" does not support the initial-default of column \"%s\"",
						  name);
			tms_error_detail(err, "Column \"%s\" of type %s has initial-default %.200s; the local engine fills a field a data file lacks with a primitive's default or null only.",
							 name, c[i].type_text, c[i].initial_default);
			return false;
		}
		if (why != NULL)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "compaction on engine \"local\" does not support column \"%s\" of type %s",
						  name, c[i].type_text);
			tms_error_detail(err, "Column \"%s\" is of type %s. %s", name, c[i].type_text, why);
			return false;
		}
		if (!check_fields(c[i].children, c[i].nchildren, name, err))
			return false;
	}
	return true;
}

bool
iceberg_compact_check_schema(const IcebergSchema *s, TmsError *err)
{
	return check_fields(s->columns, s->ncolumns, "", err);
}

bool
iceberg_compact_check_deletes(const IcebergCompactPlan *p, const IcebergSchema *s,
							  TmsError *err)
{
	for (int i = 0; i < p->ndeletes; i++)
	{
		const IcebergCompactDelete *d = &p->deletes[i];

		if (d->content != ICEBERG_CONTENT_EQUALITY_DELETES || d->ngroups == 0)
			continue;
		for (int k = 0; k < d->nequality_ids; k++)
		{
			const IcebergColumn *path[MAX_EQ_DEPTH];
			int			n = iceberg_schema_field_path(s, d->equality_ids[k], path, MAX_EQ_DEPTH);
			const IcebergColumn *under = NULL;	/* a list or a map above it */

			for (int a = 0; a + 1 < n; a++)
				if (under == NULL && path[a]->type != ICEBERG_TYPE_STRUCT)
					under = path[a];
			if (n > 0 && under == NULL && !ICEBERG_TYPE_IS_NESTED(path[n - 1]->type))
				continue;
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "compaction on engine \"local\" cannot apply equality delete file \"%.400s\"",
						  d->path);
			if (n == 0)
				tms_error_detail(err, "It deletes rows by field id %d, which the table's current schema does not have.",
								 (int) d->equality_ids[k]);
			else if (under != NULL)
				tms_error_detail(err, "It deletes rows by field \"%s\" (id %d) inside %s \"%s\"; the local engine matches equality deletes on top-level columns and fields of structs only.",
								 path[n - 1]->name, (int) path[n - 1]->id, under->type_text,
								 under->name);
			else
				tms_error_detail(err, "It deletes rows by field \"%s\" (id %d) of type %s; equality deletes match primitive fields only.",
								 path[n - 1]->name, (int) path[n - 1]->id, path[n - 1]->type_text);
			tms_error_hint(err, "Compact the table with an engine (Spark's rewrite_data_files), or rewrite its equality deletes there first.");
			return false;
		}
	}
	return true;
}
