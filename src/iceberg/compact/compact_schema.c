/*-------------------------------------------------------------------------
 *
 * compact_schema.c
 *	  Data file compaction, the plain-C half: the Avro schemas of what a
 *	  commit writes (Iceberg's manifest_entry of format v1, v2 and v3, the
 *	  last with a deletion vector's content_offset and
 *	  content_size_in_bytes, with a spec's partition record, the v1 manifest list that replaces an inline
 *	  "manifests" array) and the size of a manifest a list record needs.
 *	  compact_commit.c writes with them.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path.
 *
 * src/iceberg/compact/compact_schema.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/write/write_internal.h"
#include "io/util/jsonmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Iceberg's manifest_entry schema (https://iceberg.apache.org/spec/#manifests)
 * for format v1, v2 or v3 (entry_fields_v3 added), its partition record taken from a manifest of the
 * same spec.
 */
static const char *const entry_schema_v2 =
"{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
"{\"name\":\"status\",\"type\":\"int\",\"field-id\":0},"
"{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1},"
"{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3},"
"{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":4},"
"{\"name\":\"data_file\",\"field-id\":2,\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":["
"{\"name\":\"content\",\"type\":\"int\",\"field-id\":134},"
"{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100},"
"{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101},"
"{\"name\":\"partition\",\"type\":null,\"field-id\":102},"
"{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
"{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104},"
"%s"
"{\"name\":\"column_sizes\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k117_v118\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":117},{\"name\":\"value\",\"type\":\"long\",\"field-id\":118}]}}],\"default\":null,\"field-id\":108},"
"{\"name\":\"value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k119_v120\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":119},{\"name\":\"value\",\"type\":\"long\",\"field-id\":120}]}}],\"default\":null,\"field-id\":109},"
"{\"name\":\"null_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k121_v122\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":121},{\"name\":\"value\",\"type\":\"long\",\"field-id\":122}]}}],\"default\":null,\"field-id\":110},"
"{\"name\":\"nan_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k138_v139\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":138},{\"name\":\"value\",\"type\":\"long\",\"field-id\":139}]}}],\"default\":null,\"field-id\":137},"
"{\"name\":\"lower_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k126_v127\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":126},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":127}]}}],\"default\":null,\"field-id\":125},"
"{\"name\":\"upper_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"logicalType\":\"map\",\"items\":{\"type\":\"record\",\"name\":\"k129_v130\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":129},{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":130}]}}],\"default\":null,\"field-id\":128},"
"{\"name\":\"key_metadata\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":131},"
"{\"name\":\"split_offsets\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"long\",\"element-id\":133}],\"default\":null,\"field-id\":132},"
"{\"name\":\"equality_ids\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"int\",\"element-id\":136}],\"default\":null,\"field-id\":135},"
"{\"name\":\"sort_order_id\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":140},"
"{\"name\":\"referenced_data_file\",\"type\":[\"null\",\"string\"],\"default\":null,\"field-id\":143}"
"%s]}}]}";

/*
 * v3's fields of a deletion vector (https://iceberg.apache.org/spec/#manifests:
 * content_offset, content_size_in_bytes), null for any other file.
 */
static const char *const entry_fields_v3 =
",{\"name\":\"content_offset\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":144},"
"{\"name\":\"content_size_in_bytes\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":145}";

/* The schema text for format_version with the partition record of schema_text. */
char *
compact_entry_schema(int format_version, const char *source_schema, const char *part_record,
					 int64_t max_json, TmsError *err)
{
	char	   *tmpl;
	json_t	   *src = NULL;
	json_t	   *root = NULL;
	json_t	   *part;
	char	   *text = NULL;
	char	   *out = NULL;
	size_t		i;

	tmpl = io_malloc(strlen(entry_schema_v2) + strlen(entry_fields_v3) + 128);
	if (tmpl == NULL)
	{
		compact_oom(err);
		return NULL;
	}
	sprintf(tmpl, entry_schema_v2,
			format_version == 1 ? "{\"name\":\"block_size_in_bytes\",\"type\":\"long\",\"field-id\":105}," : "",
			format_version >= 3 ? entry_fields_v3 : "");
	if (part_record != NULL)
	{
		/* a spec no manifest has yet: its record built from the spec */
		src = iceberg_json_load(part_record, strlen(part_record), 0, max_json,
								"partition record", err);
		part = src;
	}
	else
	{
		src = iceberg_json_load(source_schema, strlen(source_schema), 0, max_json,
								"avro.schema", err);
		part = src ? iceberg_schema_strip_null(iceberg_schema_field_type(src, 2, "data_file")) : NULL;
		part = part ? iceberg_schema_field_type(part, 102, "partition") : NULL;
	}
	if (src == NULL)
		goto done;
	if (part == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "manifest schema without a partition record");
		goto done;
	}
	root = iceberg_json_load(tmpl, strlen(tmpl), 0, max_json, "manifest schema", err);
	if (root == NULL)
		goto done;
	if (format_version == 1)
	{
		/* v1 entries: no sequence numbers, no content, no referenced file */
		json_t	   *fields = json_object_get(root, "fields");
		json_t	   *df = json_object_get(json_object_get(json_array_get(fields, 4), "type"), "fields");

		json_array_remove(fields, 3);
		json_array_remove(fields, 2);

		/*
		 * v1: snapshot_id is required
		 * (https://iceberg.apache.org/spec/#manifests)
		 */
		json_object_set_new(json_array_get(fields, 1), "type", json_string("long"));
		json_object_del(json_array_get(fields, 1), "default");
		json_array_remove(df, json_array_size(df) - 1);
		json_array_remove(df, json_array_size(df) - 2); /* equality_ids */
		json_array_remove(df, 0);
	}
	{
		json_t	   *fields = json_object_get(root, "fields");
		json_t	   *df = NULL;

		for (i = 0; i < json_array_size(fields); i++)
			if (json_integer_value(json_object_get(json_array_get(fields, i), "field-id")) == 2)
				df = json_object_get(json_object_get(json_array_get(fields, i), "type"), "fields");
		for (i = 0; i < json_array_size(df); i++)
		{
			json_t	   *f = json_array_get(df, i);

			if (json_integer_value(json_object_get(f, "field-id")) == 102 &&
				json_object_set(f, "type", part) != 0)
			{
				compact_oom(err);
				goto done;
			}
		}
	}
	text = json_dumps(root, JSON_COMPACT);
	if (text == NULL)
	{
		compact_oom(err);
		goto done;
	}
	out = iceberg_strdup(text, err);
	io_json_free(text);
done:
	io_free(tmpl);
	json_decref(src);
	json_decref(root);
	return out;
}

/*
 * The manifest list a v1 snapshot with inline "manifests" gets when it is
 * replaced: format v1 allows either (https://iceberg.apache.org/spec/#snapshots:
 * "manifest-list" optional in v1, "manifests" omitted when it is present),
 * and Iceberg's writers write a list.  Its schema is v1's manifest_file
 * (https://iceberg.apache.org/spec/#manifest-lists), as Iceberg Java's
 * V1Metadata writes it.
 */
const char *const compact_list_schema_v1 =
"{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
"{\"name\":\"manifest_path\",\"type\":\"string\",\"field-id\":500},"
"{\"name\":\"manifest_length\",\"type\":\"long\",\"field-id\":501},"
"{\"name\":\"partition_spec_id\",\"type\":\"int\",\"field-id\":502},"
"{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"field-id\":503},"
"{\"name\":\"added_files_count\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":504},"
"{\"name\":\"existing_files_count\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":505},"
"{\"name\":\"deleted_files_count\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":506},"
"{\"name\":\"partitions\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"r508\",\"fields\":["
"{\"name\":\"contains_null\",\"type\":\"boolean\",\"field-id\":509},"
"{\"name\":\"contains_nan\",\"type\":[\"null\",\"boolean\"],\"default\":null,\"field-id\":518},"
"{\"name\":\"lower_bound\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":510},"
"{\"name\":\"upper_bound\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":511}]},"
"\"element-id\":508}],\"default\":null,\"field-id\":507},"
"{\"name\":\"added_rows_count\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":512},"
"{\"name\":\"existing_rows_count\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":513},"
"{\"name\":\"deleted_rows_count\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":514},"
"{\"name\":\"key_metadata\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":519}]}";

/* The size of the object at path (read through when the store does not say). */
bool
compact_object_length(const IcebergFileIO *io, const char *path, int64_t *len, TmsError *err)
{
	TmsError	ioerr;
	void	   *h;
	int64_t		size = -1;

	tms_error_clear(&ioerr);
	h = io->io.open(io->io.arg, path, &size, &ioerr);
	if (h == NULL)
		return tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr, "could not read \"%.200s\"", path);
	if (size < 0)
	{
		char		buf[8192];
		int64_t		n;

		size = 0;
		while ((n = io->io.read(io->io.arg, h, buf, sizeof(buf), &ioerr)) > 0)
			size += n;
		if (n < 0)
		{
			io->io.close(io->io.arg, h);
			return tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr, "could not read \"%.200s\"", path);
		}
	}
	io->io.close(io->io.arg, h);
	*len = size;
	return true;
}
