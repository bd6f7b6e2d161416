/*-------------------------------------------------------------------------
 *
 * metadata.c
 *	  Parse Iceberg table metadata (metadata.json, v1 to v3) with jansson.
 *
 * The whole file is read into memory under a size cap; gzip input is
 * recognised by its magic bytes and inflated under the same cap; zstd
 * (which some writers use, magic 28 b5 2f fd) is reported as unsupported.
 * Validation follows the spec's "required" columns per format version and
 * the reference implementations' behaviour on their invalid test files:
 * a required field that is missing or has the wrong JSON type, a current
 * schema id that names no schema, or an array larger than the collection
 * limit is an error value, never a crash.  Fields this layer does not use
 * (schemas' columns, sort orders, encryption keys) are checked for shape
 * where the spec requires them and otherwise ignored.
 *
 * src/iceberg/table/metadata.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* State shared by the parse helpers. */
typedef struct MdParse
{
	IcebergLimits limits;
	TmsError   *err;
} MdParse;

/* Error helper: malformed metadata, naming what is wrong. */
static bool
md_malformed(MdParse *p, const char *what, const char *field)
{
	tms_error_set(p->err, ICEBERG_ERR_MALFORMED, "invalid table metadata: %s",
				  what);
	if (field != NULL)
		tms_error_detail(p->err, "The offending field is \"%s\".", field);
	return false;
}

/* Fetch a required member; NULL (and error set) when missing. */
static json_t *
md_required(MdParse *p, json_t *obj, const char *key, const char *where)
{
	json_t	   *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: missing required field \"%s\"",
					  key);
		tms_error_detail(p->err, "The field is required in %s.", where);
		return NULL;
	}
	return v;
}

/* Read an integer member.  absent → *out = dflt (unless required). */
static bool
md_int64(MdParse *p, json_t *obj, const char *key, bool required,
		 int64_t dflt, int64_t *out, const char *where)
{
	json_t	   *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
	{
		if (required)
			return md_required(p, obj, key, where) != NULL;
		*out = dflt;
		return true;
	}
	if (!json_is_integer(v))
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" is not an integer",
					  key);
		tms_error_detail(p->err, "The field belongs to %s.", where);
		return false;
	}
	*out = (int64_t) json_integer_value(v);
	return true;
}

/*
 * Read a required timestamp member (milliseconds since the epoch).  Values
 * outside [0, ICEBERG_MAX_TIMESTAMP_MS] are malformed: no writer produces
 * them, and an age computed from them (now - timestamp) would overflow.
 */
static bool
md_timestamp(MdParse *p, json_t *obj, const char *key, int64_t *out,
			 const char *where)
{
	if (!md_int64(p, obj, key, true, 0, out, where))
		return false;
	if (*out < 0 || *out > ICEBERG_MAX_TIMESTAMP_MS)
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" of %s has out-of-range value %lld",
					  key, where, (long long) *out);
		tms_error_detail(p->err, "A timestamp must lie between 0 (1970-01-01T00:00:00Z) and %lld (9999-12-31T23:59:59.999Z).",
						 (long long) ICEBERG_MAX_TIMESTAMP_MS);
		return false;
	}
	return true;
}

/* Read an int32 member (range-checked). */
static bool
md_int32(MdParse *p, json_t *obj, const char *key, bool required,
		 int32_t dflt, int32_t *out, const char *where)
{
	int64_t		v;

	if (!md_int64(p, obj, key, required, dflt, &v, where))
		return false;
	if (v < INT32_MIN || v > INT32_MAX)
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" is out of range",
					  key);
		tms_error_detail(p->err, "The value %lld does not fit a 32-bit integer.",
						 (long long) v);
		return false;
	}
	*out = (int32_t) v;
	return true;
}

/*
 * Read a string member into a malloc'ed copy; *out = NULL when absent and
 * not required.
 */
static bool
md_string(MdParse *p, json_t *obj, const char *key, bool required,
		  char **out, const char *where)
{
	json_t	   *v = json_object_get(obj, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
	{
		if (required)
			return md_required(p, obj, key, where) != NULL;
		return true;
	}
	if (!json_is_string(v))
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" is not a string",
					  key);
		tms_error_detail(p->err, "The field belongs to %s.", where);
		return false;
	}
	*out = iceberg_strdup(json_string_value(v), p->err);
	return *out != NULL;
}

/*
 * Check an optional array member: *arr = NULL when absent, error when not
 * an array or larger than the collection limit.
 */
static bool
md_array(MdParse *p, json_t *obj, const char *key, bool required,
		 json_t **arr, const char *where)
{
	json_t	   *v = json_object_get(obj, key);

	*arr = NULL;
	if (v == NULL || json_is_null(v))
	{
		if (required)
			return md_required(p, obj, key, where) != NULL;
		return true;
	}
	if (!json_is_array(v))
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" is not an array",
					  key);
		tms_error_detail(p->err, "The field belongs to %s.", where);
		return false;
	}
	if ((int64_t) json_array_size(v) > p->limits.max_collection_items)
	{
		tms_error_set(p->err, ICEBERG_ERR_LIMIT,
					  "table metadata field \"%s\" has too many elements", key);
		tms_error_detail(p->err, "It has %zu elements; the limit is %lld.",
						 json_array_size(v),
						 (long long) p->limits.max_collection_items);
		return false;
	}
	*arr = v;
	return true;
}

/* Allocate n zeroed elements (n may be 0: returns NULL, no error). */
static void *
md_calloc(MdParse *p, size_t n, size_t size, bool *ok)
{
	void	   *r;

	*ok = true;
	if (n == 0)
		return NULL;
	r = io_calloc(n, size);
	if (r == NULL)
	{
		tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		*ok = false;
	}
	return r;
}

/*
 * Parse a JSON object of string values into key/value pairs (properties,
 * snapshot summary).  Non-string values are kept as their JSON text,
 * since some writers put numbers in summaries.
 */
static bool
md_string_map(MdParse *p, json_t *obj, const char *key, int *n_out,
			  IcebergKeyValue **out, const char *where)
{
	json_t	   *m = json_object_get(obj, key);
	const char *k;
	json_t	   *v;
	int			i = 0;
	bool		ok;

	*n_out = 0;
	*out = NULL;
	if (m == NULL || json_is_null(m))
		return true;
	if (!json_is_object(m))
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: field \"%s\" is not an object",
					  key);
		tms_error_detail(p->err, "The field belongs to %s.", where);
		return false;
	}
	if ((int64_t) json_object_size(m) > p->limits.max_collection_items)
	{
		tms_error_set(p->err, ICEBERG_ERR_LIMIT,
					  "table metadata field \"%s\" has too many entries", key);
		return false;
	}
	*out = md_calloc(p, json_object_size(m), sizeof(IcebergKeyValue), &ok);
	if (!ok)
		return false;
	json_object_foreach(m, k, v)
	{
		IcebergKeyValue *kv = &(*out)[i];

		kv->key = iceberg_strdup(k, p->err);
		if (kv->key == NULL)
			return false;
		*n_out = ++i;
		if (json_is_string(v))
			kv->value = iceberg_strdup(json_string_value(v), p->err);
		else
		{
			char	   *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

			if (text == NULL)
			{
				tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY,
							  "out of memory");
				return false;
			}
			kv->value = iceberg_strdup(text, p->err);
			io_json_free(text); /* jansson's allocator (io_init) */
		}
		if (kv->value == NULL)
			return false;
	}
	return true;
}

/*
 * Validate one schema object: {"type": "struct", "fields": [...]} as the
 * spec requires (Java rejects a schema without its type).  Returns its
 * schema-id in *id (default dflt).
 */
static bool
md_check_schema(MdParse *p, json_t *s, int32_t dflt, int32_t *id)
{
	json_t	   *t;
	json_t	   *fields;

	if (!json_is_object(s))
		return md_malformed(p, "a schema is not an object", "schemas");
	t = json_object_get(s, "type");
	if (!json_is_string(t) || strcmp(json_string_value(t), "struct") != 0)
		return md_malformed(p, "a schema is not of type \"struct\"", "type");
	if (!md_array(p, s, "fields", true, &fields, "a schema"))
		return false;
	return md_int32(p, s, "schema-id", false, dflt, id, "a schema");
}

/* Parse a partition field list into spec (v1 ids default to 1000+i). */
static bool
md_partition_fields(MdParse *p, json_t *fields, IcebergPartitionSpec *spec)
{
	size_t		i;
	bool		ok;

	spec->nfields = 0;
	spec->fields = md_calloc(p, json_array_size(fields),
							 sizeof(IcebergPartitionField), &ok);
	if (!ok)
		return false;
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		IcebergPartitionField *pf = &spec->fields[i];
		json_t	   *ids;

		if (!json_is_object(f))
			return md_malformed(p, "a partition field is not an object",
								"partition-spec");
		spec->nfields = (int) i + 1;
		if (!md_string(p, f, "name", true, &pf->name, "a partition field") ||
			!md_string(p, f, "transform", true, &pf->transform,
					   "a partition field") ||
			!md_int32(p, f, "field-id", false, (int32_t) (1000 + i),
					  &pf->field_id, "a partition field"))
			return false;
		ids = json_object_get(f, "source-ids");
		if (json_is_array(ids) && json_array_size(ids) > 0 &&
			json_is_integer(json_array_get(ids, 0)))
			pf->source_id = (int32_t) json_integer_value(json_array_get(ids, 0));
		else if (!md_int32(p, f, "source-id", true, 0, &pf->source_id,
						   "a partition field"))
			return false;
	}
	return true;
}

/* Parse "partition-specs" (or the legacy "partition-spec" field list). */
static bool
md_specs(MdParse *p, json_t *root, IcebergTableMetadata *md)
{
	json_t	   *specs;
	json_t	   *legacy;
	size_t		i;
	bool		ok;
	int32_t		maxid = -1;

	if (!md_array(p, root, "partition-specs", md->format_version >= 2, &specs,
				  "table metadata"))
		return false;
	if (specs != NULL && json_array_size(specs) > 0)
	{
		md->specs = md_calloc(p, json_array_size(specs),
							  sizeof(IcebergPartitionSpec), &ok);
		if (!ok)
			return false;
		for (i = 0; i < json_array_size(specs); i++)
		{
			json_t	   *s = json_array_get(specs, i);
			json_t	   *fields;
			IcebergPartitionSpec *spec = &md->specs[i];

			if (!json_is_object(s))
				return md_malformed(p, "a partition spec is not an object",
									"partition-specs");
			md->nspecs = (int) i + 1;
			if (!md_int32(p, s, "spec-id", true, 0, &spec->spec_id,
						  "a partition spec") ||
				!md_array(p, s, "fields", true, &fields, "a partition spec") ||
				!md_partition_fields(p, fields, spec))
				return false;
			if (spec->spec_id > maxid)
				maxid = spec->spec_id;
		}
		/* without default-spec-id, use the largest id (as iceberg-rust) */
		if (!md_int32(p, root, "default-spec-id", md->format_version >= 2,
					  maxid, &md->default_spec_id, "table metadata"))
			return false;
		return true;
	}
	if (specs != NULL && md->format_version >= 2)
		return md_malformed(p, "\"partition-specs\" is empty",
							"partition-specs");
	if (!md_array(p, root, "partition-spec", true, &legacy, "v1 table metadata"))
		return false;
	md->specs = md_calloc(p, 1, sizeof(IcebergPartitionSpec), &ok);
	if (!ok)
		return false;
	md->nspecs = 1;
	md->specs[0].spec_id = 0;
	md->default_spec_id = 0;
	return md_partition_fields(p, legacy, &md->specs[0]);
}

/* Keep the current schema's JSON text (compact) in md. */
static bool
md_keep_schema(MdParse *p, json_t *s, IcebergTableMetadata *md)
{
	char	   *text = json_dumps(s, JSON_COMPACT);

	if (text != NULL)
	{
		md->current_schema_json = io_strdup(text);
		io_json_free(text);
	}
	if (md->current_schema_json == NULL)
	{
		tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	return true;
}

/* Validate schemas and find the current schema id. */
static bool
md_schemas(MdParse *p, json_t *root, IcebergTableMetadata *md)
{
	json_t	   *schemas;
	json_t	   *cur;
	json_t	   *legacy;
	size_t		i;
	bool		found = false;

	if (!md_array(p, root, "schemas", md->format_version >= 2, &schemas,
				  "table metadata"))
		return false;
	cur = json_object_get(root, "current-schema-id");
	legacy = json_object_get(root, "schema");

	if (schemas != NULL && json_array_size(schemas) > 0 &&
		cur != NULL && !json_is_null(cur))
	{
		if (!md_int32(p, root, "current-schema-id", true, 0,
					  &md->current_schema_id, "table metadata"))
			return false;
		for (i = 0; i < json_array_size(schemas); i++)
		{
			int32_t		id;

			if (!md_check_schema(p, json_array_get(schemas, i), (int32_t) i, &id))
				return false;
			if (id == md->current_schema_id && !found)
			{
				found = true;
				if (!md_keep_schema(p, json_array_get(schemas, i), md))
					return false;
			}
		}
		md->nschemas = (int) json_array_size(schemas);
		if (!found)
		{
			tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
						  "invalid table metadata: current schema not found");
			tms_error_detail(p->err, "No schema has \"schema-id\" %d.",
							 (int) md->current_schema_id);
			return false;
		}
		return true;
	}
	if (md->format_version >= 2)
	{
		if (cur == NULL || json_is_null(cur))
			return md_required(p, root, "current-schema-id", "v2 table metadata") != NULL;
		return md_malformed(p, "\"schemas\" is empty", "schemas");
	}
	/* v1: fall back to the legacy single schema */
	if (legacy == NULL || json_is_null(legacy))
		return md_malformed(p, "no valid schema configuration found", "schema");
	if (!md_check_schema(p, legacy, 0, &md->current_schema_id))
		return false;
	md->nschemas = 1;
	return md_keep_schema(p, legacy, md);
}

/* Parse one snapshot object. */
static bool
md_snapshot(MdParse *p, json_t *s, IcebergTableMetadata *md,
			IcebergSnapshot *snap)
{
	json_t	   *list;
	json_t	   *manifests;
	int32_t		schema_id;
	size_t		i;
	bool		ok;

	if (!json_is_object(s))
		return md_malformed(p, "a snapshot is not an object", "snapshots");
	if (!md_int64(p, s, "snapshot-id", true, 0, &snap->snapshot_id, "a snapshot") ||
		!md_int64(p, s, "parent-snapshot-id", false, -1,
				  &snap->parent_snapshot_id, "a snapshot") ||
		!md_int64(p, s, "sequence-number", md->format_version >= 2, 0,
				  &snap->sequence_number, "a v2 snapshot") ||
		!md_timestamp(p, s, "timestamp-ms", &snap->timestamp_ms, "a snapshot") ||
		!md_int32(p, s, "schema-id", false, -1, &schema_id, "a snapshot") ||
		!md_int64(p, s, "first-row-id", false, -1, &snap->first_row_id,
				  "a snapshot") ||
		!md_int64(p, s, "added-rows", false, -1, &snap->added_rows, "a snapshot"))
		return false;
	snap->schema_id = schema_id;
	list = json_object_get(s, "manifest-list");
	if (list != NULL && !json_is_null(list))
	{
		if (!md_string(p, s, "manifest-list", true, &snap->manifest_list,
					   "a snapshot"))
			return false;
	}
	else
	{
		if (md->format_version >= 2)
			return md_required(p, s, "manifest-list", "a v2 snapshot") != NULL;
		if (!md_array(p, s, "manifests", false, &manifests, "a v1 snapshot"))
			return false;
		if (manifests == NULL)
			return md_malformed(p, "a v1 snapshot has neither \"manifest-list\" nor \"manifests\"",
								"manifests");
		snap->manifests = md_calloc(p, json_array_size(manifests), sizeof(char *),
									&ok);
		if (!ok)
			return false;
		for (i = 0; i < json_array_size(manifests); i++)
		{
			json_t	   *m = json_array_get(manifests, i);

			if (!json_is_string(m))
				return md_malformed(p, "a manifest path is not a string",
									"manifests");
			snap->manifests[i] = iceberg_strdup(json_string_value(m), p->err);
			if (snap->manifests[i] == NULL)
				return false;
			snap->nmanifests = (int) i + 1;
		}
	}
	if (md->format_version >= 2 && json_object_get(s, "summary") == NULL)
		return md_required(p, s, "summary", "a v2 snapshot") != NULL;
	if (!md_string_map(p, s, "summary", &snap->nsummary, &snap->summary,
					   "a snapshot"))
		return false;
	for (i = 0; i < (size_t) snap->nsummary; i++)
		if (strcmp(snap->summary[i].key, "operation") == 0)
			snap->operation = snap->summary[i].value;
	return true;
}

/* Parse the "refs" map; add "main" when absent but a snapshot is current. */
static bool
md_refs(MdParse *p, json_t *root, IcebergTableMetadata *md)
{
	json_t	   *refs = json_object_get(root, "refs");
	const char *name;
	json_t	   *r;
	bool		ok;
	bool		have_main = false;
	size_t		n = 0;

	if (refs != NULL && !json_is_null(refs) && !json_is_object(refs))
		return md_malformed(p, "\"refs\" is not an object", "refs");
	if (refs != NULL && json_is_object(refs))
		n = json_object_size(refs);
	if ((int64_t) n > p->limits.max_collection_items)
	{
		tms_error_set(p->err, ICEBERG_ERR_LIMIT,
					  "table metadata has too many refs");
		return false;
	}
	md->refs = md_calloc(p, n + 1, sizeof(IcebergRef), &ok);
	if (!ok)
		return false;
	if (n > 0)
	{
		json_object_foreach(refs, name, r)
		{
			IcebergRef *ref = &md->refs[md->nrefs];
			char	   *type;

			if (!json_is_object(r))
				return md_malformed(p, "a ref is not an object", name);
			ref->name = iceberg_strdup(name, p->err);
			if (ref->name == NULL)
				return false;
			md->nrefs++;
			if (!md_int64(p, r, "snapshot-id", true, 0, &ref->snapshot_id, "a ref") ||
				!md_string(p, r, "type", true, &type, "a ref"))
				return false;
			if (strcmp(type, "branch") == 0)
				ref->type = ICEBERG_REF_BRANCH;
			else if (strcmp(type, "tag") == 0)
				ref->type = ICEBERG_REF_TAG;
			else
			{
				io_free(type);
				return md_malformed(p, "a ref type is neither \"branch\" nor \"tag\"",
									name);
			}
			io_free(type);
			if (!md_int32(p, r, "min-snapshots-to-keep", false, -1,
						  &ref->min_snapshots_to_keep, "a ref") ||
				!md_int64(p, r, "max-snapshot-age-ms", false, -1,
						  &ref->max_snapshot_age_ms, "a ref") ||
				!md_int64(p, r, "max-ref-age-ms", false, -1,
						  &ref->max_ref_age_ms, "a ref"))
				return false;
			if (strcmp(ref->name, "main") == 0)
				have_main = true;
		}
	}
	if (!have_main && md->current_snapshot_id >= 0)
	{
		IcebergRef *ref = &md->refs[md->nrefs];

		ref->name = iceberg_strdup("main", p->err);
		if (ref->name == NULL)
			return false;
		md->nrefs++;
		ref->type = ICEBERG_REF_BRANCH;
		ref->snapshot_id = md->current_snapshot_id;
		ref->min_snapshots_to_keep = -1;
		ref->max_snapshot_age_ms = -1;
		ref->max_ref_age_ms = -1;
	}
	return true;
}

/* Parse "statistics" or "partition-statistics" (or its alias). */
static bool
md_statistics(MdParse *p, json_t *root, const char *key, const char *alias,
			  bool partition, int *n_out, IcebergStatisticsFile **out)
{
	json_t	   *arr;
	size_t		i;
	bool		ok;

	if (!md_array(p, root, key, false, &arr, "table metadata"))
		return false;
	if (arr == NULL && alias != NULL &&
		!md_array(p, root, alias, false, &arr, "table metadata"))
		return false;
	if (arr == NULL)
		return true;
	*out = md_calloc(p, json_array_size(arr), sizeof(IcebergStatisticsFile), &ok);
	if (!ok)
		return false;
	for (i = 0; i < json_array_size(arr); i++)
	{
		json_t	   *s = json_array_get(arr, i);
		IcebergStatisticsFile *st = &(*out)[i];

		if (!json_is_object(s))
			return md_malformed(p, "a statistics entry is not an object", key);
		*n_out = (int) i + 1;
		if (!md_int64(p, s, "snapshot-id", true, 0, &st->snapshot_id,
					  "a statistics entry") ||
			!md_string(p, s, "statistics-path", true, &st->path,
					   "a statistics entry") ||
			!md_int64(p, s, "file-size-in-bytes", true, 0,
					  &st->file_size_in_bytes, "a statistics entry") ||
			!md_int64(p, s, "file-footer-size-in-bytes", !partition, -1,
					  &st->file_footer_size_in_bytes, "a statistics entry"))
			return false;
	}
	return true;
}

/* Parse snapshot-log and metadata-log. */
static bool
md_logs(MdParse *p, json_t *root, IcebergTableMetadata *md)
{
	json_t	   *arr;
	size_t		i;
	bool		ok;

	if (!md_array(p, root, "snapshot-log", false, &arr, "table metadata"))
		return false;
	if (arr != NULL)
	{
		md->snapshot_log = md_calloc(p, json_array_size(arr),
									 sizeof(IcebergSnapshotLogEntry), &ok);
		if (!ok)
			return false;
		for (i = 0; i < json_array_size(arr); i++)
		{
			json_t	   *e = json_array_get(arr, i);

			if (!json_is_object(e))
				return md_malformed(p, "a snapshot-log entry is not an object",
									"snapshot-log");
			if (!md_timestamp(p, e, "timestamp-ms",
							  &md->snapshot_log[i].timestamp_ms, "a snapshot-log entry") ||
				!md_int64(p, e, "snapshot-id", true, 0,
						  &md->snapshot_log[i].snapshot_id, "a snapshot-log entry"))
				return false;
			md->nsnapshot_log = (int) i + 1;
		}
	}
	if (!md_array(p, root, "metadata-log", false, &arr, "table metadata"))
		return false;
	if (arr != NULL)
	{
		md->metadata_log = md_calloc(p, json_array_size(arr),
									 sizeof(IcebergMetadataLogEntry), &ok);
		if (!ok)
			return false;
		for (i = 0; i < json_array_size(arr); i++)
		{
			json_t	   *e = json_array_get(arr, i);

			if (!json_is_object(e))
				return md_malformed(p, "a metadata-log entry is not an object",
									"metadata-log");
			md->nmetadata_log = (int) i + 1;
			if (!md_timestamp(p, e, "timestamp-ms",
							  &md->metadata_log[i].timestamp_ms, "a metadata-log entry") ||
				!md_string(p, e, "metadata-file", true,
						   &md->metadata_log[i].metadata_file,
						   "a metadata-log entry"))
				return false;
		}
	}
	return true;
}

/* Parse the root object into md. */
static bool
md_parse_root(MdParse *p, json_t *root, IcebergTableMetadata *md)
{
	int64_t		fv;
	json_t	   *snaps;
	json_t	   *sorts;
	size_t		i;
	bool		ok;

	if (!json_is_object(root))
		return md_malformed(p, "the document is not a JSON object", NULL);
	if (!md_int64(p, root, "format-version", true, 0, &fv, "table metadata"))
		return false;
	if (fv < 1 || fv > 3)
	{
		tms_error_set(p->err, ICEBERG_ERR_UNSUPPORTED,
					  "unsupported table format version %lld", (long long) fv);
		tms_error_detail(p->err, "This reader supports format versions 1 to 3.");
		return false;
	}
	md->format_version = (int) fv;
	if (!md_string(p, root, "table-uuid", fv >= 2, &md->table_uuid,
				   "v2 table metadata") ||
		!md_string(p, root, "location", true, &md->location, "table metadata") ||
		!md_timestamp(p, root, "last-updated-ms", &md->last_updated_ms,
					  "table metadata") ||
		!md_int64(p, root, "last-sequence-number", fv >= 2, 0,
				  &md->last_sequence_number, "v2 table metadata") ||
		!md_int32(p, root, "last-column-id", true, 0, &md->last_column_id,
				  "table metadata") ||
		!md_int64(p, root, "next-row-id", fv >= 3, -1, &md->next_row_id,
				  "v3 table metadata") ||
		!md_int64(p, root, "current-snapshot-id", false, -1,
				  &md->current_snapshot_id, "table metadata"))
		return false;
	if (md->current_snapshot_id < 0)
		md->current_snapshot_id = -1;
	/* structure before the remaining scalars, for the clearest error */
	if (!md_schemas(p, root, md) || !md_specs(p, root, md) ||
		!md_int32(p, root, "last-partition-id", fv >= 2, -1,
				  &md->last_partition_id, "v2 table metadata"))
		return false;
	if (!md_array(p, root, "sort-orders", fv >= 2, &sorts, "v2 table metadata"))
		return false;
	if (!md_int32(p, root, "default-sort-order-id", fv >= 2, 0,
				  &md->default_sort_order_id, "v2 table metadata"))
		return false;
	if (sorts != NULL)
	{
		/* kept as text: compaction's sort strategy reads it (compact_sort.c) */
		char	   *text = json_dumps(sorts, JSON_COMPACT);

		if (text != NULL)
		{
			md->sort_orders_json = io_strdup(text);
			io_json_free(text);
		}
		if (md->sort_orders_json == NULL)
		{
			tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
	}
	if (!md_string_map(p, root, "properties", &md->nproperties, &md->properties,
					   "table metadata"))
		return false;
	if (!md_array(p, root, "snapshots", false, &snaps, "table metadata"))
		return false;
	if (snaps != NULL)
	{
		md->snapshots = md_calloc(p, json_array_size(snaps), sizeof(IcebergSnapshot),
								  &ok);
		if (!ok)
			return false;
		for (i = 0; i < json_array_size(snaps); i++)
		{
			md->nsnapshots = (int) i + 1;
			if (!md_snapshot(p, json_array_get(snaps, i), md, &md->snapshots[i]))
				return false;
		}
	}
	if (md->current_snapshot_id >= 0 &&
		iceberg_metadata_snapshot(md, md->current_snapshot_id) == NULL)
	{
		tms_error_set(p->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: current snapshot not found");
		tms_error_detail(p->err, "No snapshot has id %lld.",
						 (long long) md->current_snapshot_id);
		return false;
	}
	if (!md_refs(p, root, md) || !md_logs(p, root, md) ||
		!md_statistics(p, root, "statistics", "statistics-files", false,
					   &md->nstatistics, &md->statistics) ||
		!md_statistics(p, root, "partition-statistics",
					   "partition-statistics-files", true,
					   &md->npartition_statistics, &md->partition_statistics))
		return false;
	return true;
}

/*
 * Inflate gzip data into a malloc'ed buffer, refusing more than cap bytes.
 */
static bool
metadata_gunzip(const unsigned char *in, size_t inlen, int64_t cap, char **out,
				size_t *outlen, TmsError *err)
{
	z_stream	zs;
	IcebergBuf	b = {0};
	int			rc;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 15 + 16) != Z_OK)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY,
					  "could not initialise zlib");
		return false;
	}
	zs.next_in = (unsigned char *) in;
	zs.avail_in = (uInt) (inlen > UINT32_MAX ? UINT32_MAX : inlen);
	do
	{
		if (!iceberg_buf_reserve(&b, 65536))
		{
			inflateEnd(&zs);
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		zs.next_out = (unsigned char *) b.data + b.len;
		zs.avail_out = 65536;
		rc = inflate(&zs, Z_NO_FLUSH);
		b.len += 65536 - zs.avail_out;
		if ((int64_t) b.len > cap)
		{
			inflateEnd(&zs);
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_LIMIT,
						  "gzip-compressed table metadata is too large");
			tms_error_detail(err, "The limit is %lld bytes after decompression.",
							 (long long) cap);
			return false;
		}
		if (rc == Z_BUF_ERROR && zs.avail_in == 0)
			break;				/* truncated */
	} while (rc == Z_OK);
	inflateEnd(&zs);
	if (rc != Z_STREAM_END)
	{
		iceberg_buf_free(&b);
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "invalid gzip-compressed table metadata");
		tms_error_detail(err, "zlib reported: %s.",
						 zs.msg ? zs.msg : "truncated input");
		return false;
	}
	*out = b.data;
	*outlen = b.len;
	return true;
}

/*
 * iceberg_metadata_text: see iceberg_internal.h.
 */
bool
iceberg_metadata_text(const void *data, size_t len, int64_t cap, const char **text,
					  size_t *text_len, char **inflated, TmsError *err)
{
	const unsigned char *bytes = data;
	size_t		inflated_len = 0;

	*inflated = NULL;
	if (data == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no table metadata given");
		return false;
	}
	if ((int64_t) len > cap)
	{
		tms_error_set(err, ICEBERG_ERR_LIMIT, "table metadata is too large");
		return false;
	}
	if (len >= 4 && bytes[0] == 0x28 && bytes[1] == 0xb5 && bytes[2] == 0x2f &&
		bytes[3] == 0xfd)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "zstd-compressed table metadata is not supported");
		tms_error_detail(err, "Only plain and gzip-compressed metadata.json files can be read.");
		return false;
	}
	*text = (const char *) bytes;
	*text_len = len;
	if (len >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b)
	{
		if (!metadata_gunzip(bytes, len, cap, inflated, &inflated_len, err))
			return false;
		*text = *inflated;
		*text_len = inflated_len;
	}
	return true;
}

/*
 * iceberg_metadata_parse: see iceberg.h.
 */
bool
iceberg_metadata_parse(const void *data, size_t len, const IcebergLimits *limits,
					   IcebergTableMetadata **out, TmsError *err)
{
	MdParse		p;
	const char *text;
	size_t		text_len;
	char	   *inflated = NULL;
	json_t	   *root;
	IcebergTableMetadata *md;
	bool		ok;

	tms_error_clear(err);
	*out = NULL;
	iceberg_effective_limits(limits, &p.limits);
	p.err = err;
	if (!iceberg_metadata_text(data, len, p.limits.max_metadata_bytes, &text, &text_len,
							   &inflated, err))
		return false;
	root = iceberg_json_load(text, text_len, 0, p.limits.max_json_bytes,
							 "table metadata", err);
	io_free(inflated);
	if (root == NULL)
		return false;
	md = io_calloc(1, sizeof(IcebergTableMetadata));
	if (md == NULL)
	{
		json_decref(root);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	md->current_snapshot_id = -1;
	ok = md_parse_root(&p, root, md);
	json_decref(root);
	if (!ok)
	{
		iceberg_metadata_free(md);
		return false;
	}
	*out = md;
	return true;
}

/*
 * iceberg_metadata_read: see iceberg.h.
 */
bool
iceberg_metadata_read(const IcebergFileIO *io, const char *path,
					  IcebergTableMetadata **out, TmsError *err)
{
	IcebergLimits limits;
	char	   *data;
	size_t		len;
	bool		ok;

	tms_error_clear(err);
	*out = NULL;
	iceberg_effective_limits(io ? io->limits : NULL, &limits);
	if (!iceberg_read_all(io, path, limits.max_metadata_bytes, &data, &len, err))
		return false;
	ok = iceberg_metadata_parse(data, len, &limits, out, err);
	io_free(data);
	if (!ok && err)
	{
		/* name the file, after what the parser said if anything */
		char		said[sizeof(err->detail)];

		snprintf(said, sizeof(said), "%s", err->detail);
		tms_error_detail(err, "%s%sThe file is \"%s\".", said,
						 said[0] ? " " : "", path);
	}
	return ok;
}

/* Free an array of key/value pairs. */
static void
free_kv(IcebergKeyValue *kv, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		io_free(kv[i].key);
		io_free(kv[i].value);
	}
	io_free(kv);
}

/*
 * iceberg_metadata_free: see iceberg.h.
 */
void
iceberg_metadata_free(IcebergTableMetadata *md)
{
	int			i,
				j;

	if (md == NULL)
		return;
	io_free(md->current_schema_json);
	io_free(md->sort_orders_json);
	io_free(md->table_uuid);
	io_free(md->location);
	free_kv(md->properties, md->nproperties);
	for (i = 0; i < md->nspecs; i++)
	{
		for (j = 0; j < md->specs[i].nfields; j++)
		{
			io_free(md->specs[i].fields[j].name);
			io_free(md->specs[i].fields[j].transform);
		}
		io_free(md->specs[i].fields);
	}
	io_free(md->specs);
	for (i = 0; i < md->nsnapshots; i++)
	{
		IcebergSnapshot *s = &md->snapshots[i];

		io_free(s->manifest_list);
		for (j = 0; j < s->nmanifests; j++)
			io_free(s->manifests[j]);
		io_free(s->manifests);
		free_kv(s->summary, s->nsummary);
	}
	io_free(md->snapshots);
	for (i = 0; i < md->nrefs; i++)
		io_free(md->refs[i].name);
	io_free(md->refs);
	io_free(md->snapshot_log);
	for (i = 0; i < md->nmetadata_log; i++)
		io_free(md->metadata_log[i].metadata_file);
	io_free(md->metadata_log);
	for (i = 0; i < md->nstatistics; i++)
		io_free(md->statistics[i].path);
	io_free(md->statistics);
	for (i = 0; i < md->npartition_statistics; i++)
		io_free(md->partition_statistics[i].path);
	io_free(md->partition_statistics);
	io_free(md);
}

/* Lookups (see iceberg.h). */
const IcebergSnapshot *
iceberg_metadata_snapshot(const IcebergTableMetadata *md, int64_t snapshot_id)
{
	int			i;

	for (i = 0; i < md->nsnapshots; i++)
		if (md->snapshots[i].snapshot_id == snapshot_id)
			return &md->snapshots[i];
	return NULL;
}

const IcebergSnapshot *
iceberg_metadata_current_snapshot(const IcebergTableMetadata *md)
{
	if (md->current_snapshot_id < 0)
		return NULL;
	return iceberg_metadata_snapshot(md, md->current_snapshot_id);
}

const IcebergPartitionSpec *
iceberg_metadata_spec(const IcebergTableMetadata *md, int32_t spec_id)
{
	int			i;

	for (i = 0; i < md->nspecs; i++)
		if (md->specs[i].spec_id == spec_id)
			return &md->specs[i];
	return NULL;
}

const IcebergRef *
iceberg_metadata_ref(const IcebergTableMetadata *md, const char *name)
{
	int			i;

	for (i = 0; i < md->nrefs; i++)
		if (strcmp(md->refs[i].name, name) == 0)
			return &md->refs[i];
	return NULL;
}

const char *
iceberg_metadata_property(const IcebergTableMetadata *md, const char *key)
{
	int			i;

	for (i = 0; i < md->nproperties; i++)
		if (strcmp(md->properties[i].key, key) == 0)
			return md->properties[i].value;
	return NULL;
}
