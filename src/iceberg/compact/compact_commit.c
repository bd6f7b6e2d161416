/*-------------------------------------------------------------------------
 *
 * compact_commit.c
 *	  Data file compaction, the plain-C half, part two: the commit of one
 *	  rewritten group (its manifests, manifest list and summary) and the
 *	  update of the plan once it landed (compact.h states the semantics,
 *	  the refusals and the memory bounds; compact_plan.c holds the plan).
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path; nothing here runs the rewrite of the
 * rows, commits, retries or deletes.  Manifests are read with the
 * layer's streaming readers; entries carried into a rewritten manifest
 * keep their data_file bytes (ICEBERG_READ_RAW); the new data files'
 * entries are encoded from values by field id (avro_write.c) in the
 * manifest schema of the spec (Iceberg's, with the partition record of
 * the manifests the files came from).
 *
 * src/iceberg/compact/compact_commit.c
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

/* ---------------------------------------------------------------------
 * The commit of one group
 * ---------------------------------------------------------------------
 */

void
iceberg_compact_output_free(IcebergCompactOutput *o)
{
	int			i;

	if (o == NULL)
		return;
	io_free(o->path);
	for (i = 0; i < o->nmetrics; i++)
	{
		io_free(o->metrics[i].lower);
		io_free(o->metrics[i].upper);
	}
	io_free(o->metrics);
	io_free(o->split_offsets);
	memset(o, 0, sizeof(*o));
}

void
iceberg_compact_commit_free(IcebergCompactCommit *res)
{
	int			i;

	if (res == NULL)
		return;
	iceberg_write_result_free(res->written, res->nwritten, &res->snapshot);
	for (i = 0; i < res->nreplaced; i++)
	{
		io_free(res->replaced_old[i]);
		io_free(res->replaced_new[i]);
	}
	io_free(res->replaced_old);
	io_free(res->replaced_new);
	io_free(res->removed);
	memset(res, 0, sizeof(*res));
}

/* A manifest being written, with its list record's counts and summaries. */
typedef struct MOut
{
	IcebergAvroWriter *w;
	IcebergPartType *types;
	int			ntypes;
	IcebergPartSum *sums;
	bool		bad;
	IcebergBuf	tmp;
	IcebergNewManifest n;
	int64_t		min_seq;
} MOut;

static void
mout_free(MOut *o)
{
	iceberg_avro_writer_free(o->w);
	io_free(o->types);
	iceberg_part_sums_free(o->sums, o->ntypes > 0 ? o->ntypes : 0);
	iceberg_buf_free(&o->tmp);
	iceberg_new_manifest_free(&o->n);
	memset(o, 0, sizeof(*o));
}

static bool
mout_start(MOut *o, const char *schema, const IcebergKeyValue *meta, int nmeta,
		   int codec, int level, int64_t max_json, int32_t spec_id, int32_t content,
		   TmsError *err)
{
	memset(o, 0, sizeof(*o));
	o->n.nsumm = -1;
	o->n.spec_id = spec_id;
	o->n.content = content;
	o->min_seq = INT64_MAX;
	if (!iceberg_avro_writer_create(schema, meta, nmeta, codec, level, max_json, &o->w, err) ||
		!iceberg_partition_types(schema, max_json, &o->types, &o->ntypes, err))
		return false;
	o->bad = o->ntypes < 0;
	if (o->ntypes > 0 && (o->sums = io_calloc((size_t) o->ntypes, sizeof(IcebergPartSum))) == NULL)
		return compact_oom(err);
	return true;
}

/* Count an entry written (status, its partition text, records, data seq). */
static bool
mout_note(MOut *o, int status, const char *part, size_t part_len, int64_t records,
		  int64_t seq, TmsError *err)
{
	if (status == ICEBERG_STATUS_DELETED)
	{
		o->n.deleted_files++;
		o->n.deleted_rows += records;
	}
	else
	{
		if (status == ICEBERG_STATUS_ADDED)
		{
			o->n.added_files++;
			o->n.added_rows += records;
		}
		else
		{
			o->n.existing_files++;
			o->n.existing_rows += records;
		}
		if (seq >= 0 && seq < o->min_seq)
			o->min_seq = seq;
	}
	if (!o->bad && o->ntypes > 0 &&
		!iceberg_part_sum_add(o->sums, o->types, o->ntypes, part, part_len, &o->tmp, &o->bad))
		return compact_oom(err);
	return true;
}

/* Finish, write at path (noted in written), fill the list record. */
static bool
mout_finish(MOut *o, const IcebergWriter *wr, const char *path, int64_t new_seq,
			char ***written, int *nwritten, TmsError *err)
{
	const uint8_t *data;
	size_t		len;

	if (!iceberg_avro_writer_finish(o->w, &data, &len, err))
		return false;
	o->n.path = iceberg_strdup(path, err);
	if (o->n.path == NULL)
		return false;
	o->n.length = (int64_t) len;
	o->n.min_seq = o->min_seq == INT64_MAX ? new_seq : o->min_seq;
	if (!iceberg_new_manifest_summaries(&o->n, o->types, o->ntypes, o->sums, o->bad, err))
		return false;
	return iceberg_write_object(wr, written, nwritten, path, data, len, err);
}

/* Copy a reader's header (without avro.*) into a new array with room for extra. */
static bool
copy_header(IcebergManifestReader *r, int extra, IcebergKeyValue **out, int *nout,
			TmsError *err)
{
	const IcebergKeyValue *kv;
	int			n = iceberg_manifest_header_all(r, &kv);
	int			i;

	*nout = 0;
	*out = io_calloc((size_t) (n + extra + 1), sizeof(IcebergKeyValue));
	if (*out == NULL)
		return compact_oom(err);
	for (i = 0; i < n; i++)
		if (strncmp(kv[i].key, "avro.", 5) != 0 &&
			!iceberg_kv_set(*out, nout, kv[i].key, kv[i].value, true, err))
			return false;
	return true;
}

/*
 * Iceberg's manifest_entry schema (https://iceberg.apache.org/spec/#manifests)
 * for format v1 or v2, its partition record taken from a manifest of the
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
"]}}]}";

/* The schema text for format_version with the partition record of schema_text. */
static char *
entry_schema(int format_version, const char *source_schema, int64_t max_json,
			 TmsError *err)
{
	char	   *tmpl;
	json_t	   *src = NULL;
	json_t	   *root = NULL;
	json_t	   *part;
	char	   *text = NULL;
	char	   *out = NULL;
	size_t		i;

	tmpl = io_malloc(strlen(entry_schema_v2) + 128);
	if (tmpl == NULL)
	{
		compact_oom(err);
		return NULL;
	}
	sprintf(tmpl, entry_schema_v2,
			format_version == 1 ? "{\"name\":\"block_size_in_bytes\",\"type\":\"long\",\"field-id\":105}," : "");
	src = iceberg_json_load(source_schema, strlen(source_schema), 0, max_json, "avro.schema", err);
	if (src == NULL)
		goto done;
	part = iceberg_schema_strip_null(iceberg_schema_field_type(src, 2, "data_file"));
	part = part ? iceberg_schema_field_type(part, 102, "partition") : NULL;
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

/* A map<int, long> field of counts (AVW_ARRAY of key/value records). */
typedef struct MapField
{
	IcebergAvroWValue *items;
	IcebergAvroWField *kv;
	int			n;
} MapField;

static bool
map_field(MapField *m, const IcebergCompactOutput *o, int which, TmsError *err)
{
	int			i;

	m->n = 0;
	m->items = io_calloc((size_t) o->nmetrics + 1, sizeof(IcebergAvroWValue));
	m->kv = io_calloc((size_t) o->nmetrics * 2 + 2, sizeof(IcebergAvroWField));
	if (m->items == NULL || m->kv == NULL)
		return compact_oom(err);
	for (i = 0; i < o->nmetrics; i++)
	{
		const IcebergColumnMetrics *c = &o->metrics[i];
		IcebergAvroWField *kv = &m->kv[m->n * 2];
		static const int32_t key_ids[] = {117, 119, 121, 138, 126, 129};
		int64_t		v = which == 0 ? c->column_size : which == 1 ? c->value_count :
		which == 2 ? c->null_count : c->nan_count;

		if (which <= 3 && v < 0)
			continue;
		if (which == 4 && !c->has_lower)
			continue;
		if (which == 5 && !c->has_upper)
			continue;
		kv[0].field_id = key_ids[which];
		kv[0].name = "key";
		kv[0].v.kind = AVW_LONG;
		kv[0].v.l = c->id;
		kv[1].field_id = key_ids[which] + 1;
		kv[1].name = "value";
		if (which <= 3)
		{
			kv[1].v.kind = AVW_LONG;
			kv[1].v.l = v;
		}
		else
		{
			kv[1].v.kind = AVW_BYTES;
			kv[1].v.p = which == 4 ? (const void *) c->lower : (const void *) c->upper;
			kv[1].v.len = which == 4 ? c->lower_len : c->upper_len;
			if (kv[1].v.p == NULL)
				kv[1].v.p = "";
		}
		m->items[m->n].kind = AVW_RECORD;
		m->items[m->n].fields = kv;
		m->items[m->n].nfields = 2;
		m->n++;
	}
	return true;
}

/*
 * The partition record of the group as values, from its canonical text,
 * typed by the manifest schema's partition record (types/ntypes) and the
 * spec's field ids.
 */
static bool
partition_values(const IcebergPartitionSpec *spec, const IcebergPartType *types, int ntypes,
				 const char *text, IcebergAvroWField *f, IcebergBuf *bufs, TmsError *err)
{
	const char *pp = text;
	const char *end = text + strlen(text);
	int			k;

	if (ntypes != spec->nfields)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "the partition record of spec %d cannot be written", (int) spec->spec_id);
		return false;
	}
	for (k = 0; k < spec->nfields; k++)
	{
		const char *tok;
		size_t		tl;
		char		num[64];

		f[k].field_id = spec->fields[k].field_id;
		f[k].name = spec->fields[k].name;
		if (!iceberg_partition_next(&pp, end, &tok, &tl))
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid partition \"%.200s\"", text);
			return false;
		}
		if (tl == 4 && memcmp(tok, "null", 4) == 0)
		{
			f[k].v.kind = AVW_NULL;
			continue;
		}
		if (tl < sizeof(num))
		{
			memcpy(num, tok, tl);
			num[tl] = '\0';
		}
		else
			num[0] = '\0';
		switch (types[k])
		{
			case ICEBERG_PT_BOOL:
				f[k].v.kind = AVW_BOOL;
				f[k].v.l = num[0] == 't';
				break;
			case ICEBERG_PT_INT:
			case ICEBERG_PT_LONG:
				f[k].v.kind = AVW_LONG;
				f[k].v.l = strtoll(num, NULL, 10);
				break;
			case ICEBERG_PT_FLOAT:
			case ICEBERG_PT_DOUBLE:
				f[k].v.kind = AVW_DOUBLE;
				f[k].v.d = strcmp(num, "\"NaN\"") == 0 ? 0.0 / 0.0 :
					strcmp(num, "\"Infinity\"") == 0 ? 1.0 / 0.0 :
					strcmp(num, "\"-Infinity\"") == 0 ? -1.0 / 0.0 : strtod(num, NULL);
				break;
			case ICEBERG_PT_STRING:
				if (!iceberg_json_unescape(tok, tl, &bufs[k]))
					return compact_oom(err);
				f[k].v.kind = AVW_STRING;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			case ICEBERG_PT_BYTES:
			case ICEBERG_PT_DECIMAL:
				if (!iceberg_json_unhex(tok, tl, &bufs[k]))
				{
					tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid partition value in \"%.200s\"", text);
					return false;
				}
				f[k].v.kind = AVW_BYTES;
				f[k].v.p = bufs[k].data ? bufs[k].data : "";
				f[k].v.len = bufs[k].len;
				break;
			default:
				tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
							  "partition field \"%s\" has a type this writer cannot write",
							  spec->fields[k].name);
				return false;
		}
	}
	return true;
}

/* Write the ADDED entry of one output into o. */
static bool
add_output(MOut *o, const IcebergCompactOutput *out, const IcebergTableMetadata *md,
		   const IcebergPartitionSpec *spec, const char *partition, int64_t snapshot_id,
		   int64_t data_seq, const IcebergSortOrder *sort, TmsError *err)
{
	IcebergAvroWField entry[5];
	IcebergAvroWField df[20];
	IcebergAvroWField *pf = NULL;
	IcebergBuf *bufs = NULL;
	IcebergAvroWValue *splits = NULL;
	MapField	maps[6];
	int			ne = 0,
				nd = 0,
				i;
	bool		ok = false;
	static const int32_t map_ids[] = {108, 109, 110, 137, 125, 128};
	static const char *const map_names[] = {"column_sizes", "value_counts", "null_value_counts",
	"nan_value_counts", "lower_bounds", "upper_bounds"};

	memset(entry, 0, sizeof(entry));
	memset(df, 0, sizeof(df));
	memset(maps, 0, sizeof(maps));
	pf = io_calloc((size_t) spec->nfields + 1, sizeof(IcebergAvroWField));
	bufs = io_calloc((size_t) spec->nfields + 1, sizeof(IcebergBuf));
	if (pf == NULL || bufs == NULL)
	{
		compact_oom(err);
		goto done;
	}
	if (spec->nfields > 0 && o->types == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "the partition record of spec %d cannot be written", (int) spec->spec_id);
		goto done;
	}
	if (!partition_values(spec, o->types, o->ntypes < 0 ? spec->nfields : o->ntypes,
						  partition, pf, bufs, err))
		goto done;

#define DF(id, nm, kind_, val) do { df[nd].field_id = (id); df[nd].name = (nm); \
		df[nd].v.kind = (kind_); df[nd].v.l = (val); nd++; } while (0)
	if (md->format_version >= 2)
		DF(134, "content", AVW_LONG, 0);
	df[nd].field_id = 100;
	df[nd].name = "file_path";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = out->path;
	df[nd].v.len = strlen(out->path);
	nd++;
	df[nd].field_id = 101;
	df[nd].name = "file_format";
	df[nd].v.kind = AVW_STRING;
	df[nd].v.p = "PARQUET";
	df[nd].v.len = 7;
	nd++;
	df[nd].field_id = 102;
	df[nd].name = "partition";
	df[nd].v.kind = AVW_RECORD;
	df[nd].v.fields = pf;
	df[nd].v.nfields = spec->nfields;
	nd++;
	DF(103, "record_count", AVW_LONG, out->records);
	DF(104, "file_size_in_bytes", AVW_LONG, out->size);
	if (md->format_version == 1)
		DF(105, "block_size_in_bytes", AVW_LONG, 64 * MIB);
	for (i = 0; i < 6; i++)
	{
		if (!map_field(&maps[i], out, i, err))
			goto done;
		df[nd].field_id = map_ids[i];
		df[nd].name = map_names[i];
		if (maps[i].n > 0)
		{
			df[nd].v.kind = AVW_ARRAY;
			df[nd].v.items = maps[i].items;
			df[nd].v.nitems = maps[i].n;
		}
		nd++;
	}
	if (out->nsplit_offsets > 0)
	{
		splits = io_calloc((size_t) out->nsplit_offsets, sizeof(IcebergAvroWValue));
		if (splits == NULL)
		{
			compact_oom(err);
			goto done;
		}
		for (i = 0; i < out->nsplit_offsets; i++)
		{
			splits[i].kind = AVW_LONG;
			splits[i].l = out->split_offsets[i];
		}
		df[nd].field_id = 132;
		df[nd].name = "split_offsets";
		df[nd].v.kind = AVW_ARRAY;
		df[nd].v.items = splits;
		df[nd].v.nitems = out->nsplit_offsets;
		nd++;
	}
	/* sorted or z-ordered files: the id Iceberg stamps (compact_sort.c) */
	if (sort != NULL)
		DF(140, "sort_order_id", AVW_LONG, sort->order_id);
#undef DF

	{
		IcebergAvroWValue dfv;

		memset(&dfv, 0, sizeof(dfv));
		dfv.kind = AVW_RECORD;
		dfv.fields = df;
		dfv.nfields = nd;
		ne = iceberg_manifest_entry_fields(entry, ICEBERG_STATUS_ADDED, snapshot_id,
										   md->format_version >= 2 ? 1 : 0, data_seq, 0, &dfv);
	}
	if (!iceberg_avro_writer_add(o->w, entry, ne, err) ||
		!mout_note(o, ICEBERG_STATUS_ADDED, partition, strlen(partition), out->records,
				   md->format_version >= 2 ? data_seq : 0, err))
		goto done;
	ok = true;
done:
	for (i = 0; i < 6; i++)
	{
		io_free(maps[i].items);
		io_free(maps[i].kv);
	}
	for (i = 0; pf && bufs && i < spec->nfields; i++)
		iceberg_buf_free(&bufs[i]);
	io_free(bufs);
	io_free(pf);
	io_free(splits);
	return ok;
}

/* Copy an entry (raw data_file) into o with status, snapshot and seqs. */
static bool
copy_entry(MOut *o, const IcebergManifestEntry *e, int status, int64_t snapshot_id,
		   int format_version, TmsError *err)
{
	IcebergAvroWField f[5];
	IcebergAvroWValue df;
	int			n;

	memset(&df, 0, sizeof(df));
	df.kind = AVW_RAW;
	df.p = e->raw_data_file;
	df.len = e->raw_data_file_len;
	n = iceberg_manifest_entry_fields(f, status, snapshot_id, format_version >= 2 ? 2 : 0,
									  e->sequence_number, e->file_sequence_number, &df);
	if (!iceberg_avro_writer_add(o->w, f, n, err))
		return false;
	return mout_note(o, status, e->partition, e->partition_len, e->record_count,
					 e->sequence_number, err);
}

/* Per-call state of a commit. */
typedef struct Commit
{
	const IcebergFileIO *io;
	const IcebergWriter *wr;
	const IcebergTableMetadata *md;
	IcebergCompactPlan *p;
	int			g;
	IcebergCompactCommit *res;
	TmsError   *err;
	IcebergWriteTarget t;		/* the new snapshot's id, seq, codec, names */
	int			nout;			/* manifests written so far */
	StrMap		group_files;	/* path -> index in the group */
	bool	   *found;
	StrMap		removable;		/* delete path -> plan index */
	bool	   *removed_found;
	StrMap		known_deletes;	/* every plan delete path */
	/* the rewritten manifests' list records (by index into recs) */
	IcebergNewManifest *news;	/* indexed like recs; path NULL: kept */
	char	   *source_schema;	/* writer schema of a manifest of the spec */
	IcebergKeyValue *source_meta;
	int			nsource_meta;
	/* the summary */
	int64_t		removed_pos_files,
				removed_eq_files,
				removed_pos_records,
				removed_eq_records,
				removed_delete_bytes;
} Commit;

/*
 * Finish o as the commit's next manifest (<dir>/<uuid>-m<n>.avro), written
 * and noted; its list record moves into *n.
 */
static bool
commit_manifest(Commit *c, MOut *o, IcebergNewManifest *n)
{
	char		path[2300];
	int			len = snprintf(path, sizeof(path), "%s/%s-m%d.avro", c->t.dir, c->t.uuid, c->nout++);

	if (len < 0 || (size_t) len >= sizeof(path))
	{
		tms_error_set(c->err, ICEBERG_ERR_LIMIT, "table location too long");
		return false;
	}
	if (!mout_finish(o, c->wr, path, c->t.seq, &c->res->written, &c->res->nwritten, c->err))
		return false;
	*n = o->n;
	memset(&o->n, 0, sizeof(o->n));
	o->n.nsumm = -1;
	return true;
}

/*
 * Read one manifest of the current list, writing a filtered copy: entries
 * of group files (data) or removable delete files become DELETED, the
 * other live ones EXISTING.  The copy is kept (news[i]) only if an entry
 * changed.  A position delete file added since the plan that touches the
 * group is ICEBERG_ERR_CONFLICT.
 */
static bool
filter_manifest(Commit *c, const ListRec *rec, IcebergNewManifest *news)
{
	IcebergManifestReader *r;
	const IcebergManifestEntry *e;
	const IcebergCompactGroup *gr = &c->p->groups[c->g];
	MOut		o;
	IcebergKeyValue *meta = NULL;
	int			nmeta = 0;
	const char *schema;
	bool		changed = false;
	int			has_seq = -1;	/* -1: not looked at yet */
	int			rc;
	bool		ok = false;

	memset(&o, 0, sizeof(o));
	if (!iceberg_manifest_open(c->io, &rec->mf, c->md->format_version,
							   ICEBERG_READ_PARTITION | ICEBERG_READ_RAW, &r, c->err))
		return false;
	schema = iceberg_manifest_header(r, "avro.schema");
	if (schema == NULL)
	{
		iceberg_manifest_close(r);
		tms_error_set(c->err, ICEBERG_ERR_MALFORMED, "manifest without avro.schema");
		return false;
	}
	if (!copy_header(r, 0, &meta, &nmeta, c->err) ||
		!mout_start(&o, schema, meta, nmeta, c->t.codec, c->t.level, c->t.lim.max_json_bytes,
					rec->mf.partition_spec_id, rec->mf.content, c->err))
		goto done;
	if (c->source_schema == NULL && rec->mf.content == ICEBERG_MANIFEST_CONTENT_DATA &&
		rec->mf.partition_spec_id == gr->spec_id)
	{
		c->source_schema = iceberg_strdup(schema, c->err);
		if (c->source_schema == NULL || !copy_header(r, 4, &c->source_meta, &c->nsource_meta, c->err))
			goto done;
	}
	while ((rc = iceberg_manifest_next(r, &e, c->err)) == 1)
	{
		int			status = ICEBERG_STATUS_EXISTING;
		int64_t		snap = e->snapshot_id;

		if (e->status == ICEBERG_STATUS_DELETED)
			continue;
		if (e->content == ICEBERG_CONTENT_DATA)
		{
			int			k = compact_map_get(&c->group_files, e->file_path);

			if (k >= 0)
			{
				c->found[k] = true;
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				c->res->data_files_rewritten++;
				c->res->bytes_rewritten += e->file_size_in_bytes;
				c->res->records_rewritten += e->record_count;
			}
		}
		else
		{
			int			k = compact_map_get(&c->removable, e->file_path);

			if (k >= 0)
			{
				c->removed_found[k] = true;
				status = ICEBERG_STATUS_DELETED;
				snap = c->t.snapshot_id;
				if (e->content == ICEBERG_CONTENT_POSITION_DELETES)
				{
					c->removed_pos_files++;
					c->removed_pos_records += e->record_count;
				}
				else
				{
					c->removed_eq_files++;
					c->removed_eq_records += e->record_count;
				}
				c->removed_delete_bytes += e->file_size_in_bytes;
			}
			else if (compact_map_get(&c->known_deletes, e->file_path) < 0 &&
					 e->content == ICEBERG_CONTENT_POSITION_DELETES &&
					 ((e->spec_id == gr->spec_id && e->partition_len == strlen(gr->partition) &&
					   memcmp(e->partition, gr->partition, e->partition_len) == 0) ||
					  (e->referenced_data_file != NULL &&
					   compact_map_get(&c->group_files, e->referenced_data_file) >= 0)))
			{
				tms_error_set(c->err, ICEBERG_ERR_CONFLICT,
							  "a position delete file was added to the partition since the plan");
				tms_error_detail(c->err, "\"%s\" may delete rows of the files being rewritten.",
								 e->file_path);
				goto done;
			}
		}
		if (status == ICEBERG_STATUS_DELETED)
		{
			changed = true;
			if (c->md->format_version >= 2 && has_seq < 0)
			{
				json_t	   *root = iceberg_json_load(schema, strlen(schema), 0,
													 c->t.lim.max_json_bytes, "avro.schema", c->err);

				if (root == NULL)
					goto done;
				has_seq = iceberg_schema_field_type(root, 3, "sequence_number") != NULL;
				json_decref(root);
			}
			if (c->md->format_version >= 2 && !has_seq)
			{
				tms_error_set(c->err, ICEBERG_ERR_UNSUPPORTED,
							  "cannot rewrite a manifest written without sequence numbers");
				tms_error_detail(c->err, "\"%s\" of this format v2 table has no sequence_number field; rewrite the table's manifests first.",
								 rec->path);
				goto done;
			}
		}
		if (c->md->format_version >= 2 && (e->sequence_number < 0 || e->file_sequence_number < 0))
		{
			tms_error_set(c->err, ICEBERG_ERR_MALFORMED, "manifest entry without a sequence number");
			tms_error_detail(c->err, "Entry \"%s\" of \"%s\" has no sequence number and cannot inherit one.",
							 e->file_path, rec->path);
			goto done;
		}
		if (!copy_entry(&o, e, status, snap, c->md->format_version, c->err))
			goto done;
	}
	if (rc < 0)
		goto done;
	if (changed)
	{
		if (!commit_manifest(c, &o, news))
			goto done;
	}
	ok = true;
done:
	iceberg_manifest_close(r);
	iceberg_kv_free(meta, nmeta);
	mout_free(&o);
	return ok;
}

/* The manifest of the added files. */
static bool
write_added(Commit *c, const IcebergCompactOutput *outputs, int noutputs, IcebergNewManifest *n)
{
	const IcebergCompactGroup *gr = &c->p->groups[c->g];
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(c->md, gr->spec_id);
	char	   *schema = NULL;
	MOut		o;
	char		num[32];
	int			i;
	bool		ok = false;

	memset(&o, 0, sizeof(o));
	if (spec == NULL)
	{
		tms_error_set(c->err, ICEBERG_ERR_MALFORMED,
					  "partition spec %d is not in the table metadata", (int) gr->spec_id);
		return false;
	}
	if (c->source_schema == NULL)
	{
		tms_error_set(c->err, ICEBERG_ERR_CONFLICT,
					  "no manifest of the group's files was found");
		return false;
	}
	schema = entry_schema(c->md->format_version, c->source_schema, c->t.lim.max_json_bytes, c->err);
	if (schema == NULL)
		return false;
	snprintf(num, sizeof(num), "%d", (int) c->md->current_schema_id);
	if (!iceberg_kv_set(c->source_meta, &c->nsource_meta, "schema", c->md->current_schema_json,
						true, c->err) ||
		!iceberg_kv_set(c->source_meta, &c->nsource_meta, "schema-id", num, true, c->err) ||
		(c->md->format_version >= 2 &&
		 !iceberg_kv_set(c->source_meta, &c->nsource_meta, "content", "data", true, c->err)))
		goto done;
	if (!mout_start(&o, schema, c->source_meta, c->nsource_meta, c->t.codec, c->t.level,
					c->t.lim.max_json_bytes, gr->spec_id, ICEBERG_MANIFEST_CONTENT_DATA, c->err))
		goto done;
	for (i = 0; i < noutputs; i++)
	{
		if (!add_output(&o, &outputs[i], c->md, spec, gr->partition, c->t.snapshot_id,
						c->p->base_sequence_number, c->p->sort, c->err))
			goto done;
		c->res->data_files_added++;
		c->res->bytes_added += outputs[i].size;
		c->res->records_added += outputs[i].records;
	}
	if (!commit_manifest(c, &o, n))
		goto done;
	ok = true;
done:
	io_free(schema);
	mout_free(&o);
	return ok;
}

/* The new manifest list; its path into *path_out. */
static bool
write_list(Commit *c, const IcebergSnapshot *snap, const ListRec *recs, int nrecs,
		   const IcebergNewManifest *added, char **path_out)
{
	IcebergManifestListReader *lr;
	IcebergAvroWriter *lw;
	int			i;
	bool		ok = false;

	if (!iceberg_manifest_list_begin(c->io, c->md, snap, snap->snapshot_id, &c->t,
									 &lr, &lw, c->err))
		return false;
	if (added->path != NULL &&
		!iceberg_manifest_list_add_new(lw, added, c->t.seq, c->t.snapshot_id, c->err))
		goto done;
	for (i = 0; i < nrecs; i++)
	{
		if (c->news[i].path != NULL)
		{
			if (!iceberg_manifest_list_add_new(lw, &c->news[i], c->t.seq, c->t.snapshot_id, c->err))
				goto done;
		}
		else if (!iceberg_avro_writer_add_raw(lw, recs[i].raw, recs[i].raw_len, c->err))
			goto done;
	}
	ok = iceberg_manifest_list_end(&c->t, lw, c->wr, &c->res->written, &c->res->nwritten,
								   path_out, c->err);
done:
	iceberg_avro_writer_free(lw);
	iceberg_manifest_list_close(lr);
	return ok;
}

/* The snapshot summary: Iceberg's names, totals carried from the parent. */
static bool
fill_summary(Commit *c, const IcebergSnapshot *parent)
{
	IcebergNewSnapshot *s = &c->res->snapshot;
	IcebergCompactCommit *r = c->res;
	char		num[32];
	int			i;
	struct
	{
		const char *key;
		int64_t		v;
		bool		always;
	}			k[] = {
		{"added-data-files", r->data_files_added, true},
		{"deleted-data-files", r->data_files_rewritten, true},
		{"added-records", r->records_added, true},
		{"deleted-records", r->records_rewritten, true},
		{"added-files-size", r->bytes_added, true},
		{"removed-files-size", r->bytes_rewritten + c->removed_delete_bytes, true},
		{"removed-delete-files", c->removed_pos_files + c->removed_eq_files, false},
		{"removed-position-delete-files", c->removed_pos_files, false},
		{"removed-equality-delete-files", c->removed_eq_files, false},
		{"removed-position-deletes", c->removed_pos_records, false},
		{"removed-equality-deletes", c->removed_eq_records, false},
		{"changed-partition-count", 1, true},
	};
	struct
	{
		const char *key;
		int64_t		delta;
	}			t[] = {
		{"total-data-files", r->data_files_added - r->data_files_rewritten},
		{"total-records", r->records_added - r->records_rewritten},
		{"total-files-size", r->bytes_added - r->bytes_rewritten - c->removed_delete_bytes},
		{"total-delete-files", -(c->removed_pos_files + c->removed_eq_files)},
		{"total-position-deletes", -c->removed_pos_records},
		{"total-equality-deletes", -c->removed_eq_records},
	};
	int			nk = (int) (sizeof(k) / sizeof(k[0]));
	int			nt = (int) (sizeof(t) / sizeof(t[0]));

	s->summary = io_calloc((size_t) (nk + nt + 1), sizeof(IcebergKeyValue));
	if (s->summary == NULL)
		return compact_oom(c->err);
	for (i = 0; i < nk; i++)
	{
		if (!k[i].always && k[i].v == 0)
			continue;
		snprintf(num, sizeof(num), "%" PRId64, k[i].v);
		if (!iceberg_kv_set(s->summary, &s->nsummary, k[i].key, num, true, c->err))
			return false;
	}
	for (i = 0; i < nt; i++)
	{
		int			j;

		for (j = 0; j < parent->nsummary; j++)
		{
			char	   *end;
			long long	v;

			if (strcmp(parent->summary[j].key, t[i].key) != 0 || parent->summary[j].value == NULL)
				continue;
			v = strtoll(parent->summary[j].value, &end, 10);
			if (*end != '\0' || end == parent->summary[j].value)
				continue;
			snprintf(num, sizeof(num), "%lld", v + (long long) t[i].delta);
			if (!iceberg_kv_set(s->summary, &s->nsummary, t[i].key, num, true, c->err))
				return false;
		}
	}
	return true;
}

bool
iceberg_compact_commit_write(const IcebergFileIO *io, const IcebergWriter *w,
							 const IcebergTableMetadata *md, IcebergCompactPlan *p, int g,
							 const IcebergCompactOutput *outputs, int noutputs,
							 int64_t new_snapshot_id, IcebergCompactCommit *res,
							 TmsError *err)
{
	Commit		c;
	const IcebergSnapshot *snap;
	const IcebergCompactGroup *gr;
	ListRec    *recs = NULL;
	int			nrecs = 0;
	int		   *rm = NULL;
	int			nrm = 0;
	IcebergNewManifest added;
	StrMap		wanted = {0};
	bool		fallback = false;
	char	   *list_path = NULL;
	int			i;
	bool		ok = false;

	tms_error_clear(err);
	if (res == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no result given");
		return false;
	}
	memset(res, 0, sizeof(*res));
	res->snapshot.parent_snapshot_id = -1;
	res->snapshot.schema_id = -1;
	memset(&added, 0, sizeof(added));
	added.nsumm = -1;
	if (io == NULL || w == NULL || w->write == NULL || p == NULL || g < 0 || g >= p->ngroups)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "a commit needs a file io, a writer, a plan and a group");
		return false;
	}
	if (!compact_check_table(md, &snap, err))
		return false;
	if (snap == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_CONFLICT, "the table has no current snapshot");
		return false;
	}
	if (new_snapshot_id <= 0 || iceberg_metadata_snapshot(md, new_snapshot_id) != NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid new snapshot id %" PRId64, new_snapshot_id);
		return false;
	}
	if (noutputs < 0 || (noutputs > 0 && outputs == NULL))
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid output files");
		return false;
	}
	gr = &p->groups[g];
	memset(&c, 0, sizeof(c));
	c.io = io;
	c.wr = w;
	c.md = md;
	c.p = p;
	c.g = g;
	c.res = res;
	c.err = err;
	if (!iceberg_write_target_init(&c.t, io, md, new_snapshot_id, err))
		return false;

	/* what to look for */
	c.found = io_calloc((size_t) gr->nfiles + 1, sizeof(bool));
	if (c.found == NULL)
		goto nomem;
	for (i = 0; i < gr->nfiles; i++)
		if (!compact_map_put(&c.group_files, p->files[gr->first + i].path, i) ||
			!compact_map_put(&wanted, p->manifests[p->files[gr->first + i].manifest], 1))
			goto nomem;
	for (i = 0; i < p->ndeletes; i++)
		if (!compact_map_put(&c.known_deletes, p->deletes[i].path, i))
			goto nomem;
	if (!iceberg_compact_removable(p, g, &rm, &nrm, err))
		goto done;
	c.removed_found = io_calloc((size_t) nrm + 1, sizeof(bool));
	if (c.removed_found == NULL)
		goto nomem;
	for (i = 0; i < nrm; i++)
		if (!compact_map_put(&c.removable, p->deletes[rm[i]].path, i))
			goto nomem;

	/*
	 * the current manifests: those of the group's files, and every delete
	 * manifest
	 */
	if (!compact_read_list(io, md, snap, &recs, &nrecs, err))
		goto done;
	c.news = io_calloc((size_t) nrecs + 1, sizeof(IcebergNewManifest));
	if (c.news == NULL)
		goto nomem;
	for (i = 0; i < nrecs; i++)
		c.news[i].nsumm = -1;
	{
		int			present = 0;

		for (i = 0; i < nrecs; i++)
			if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA &&
				compact_map_get(&wanted, recs[i].path) >= 0)
				present++;

		/*
		 * a manifest of the plan is gone (rewritten meanwhile): look
		 * everywhere
		 */
		fallback = present < (int) wanted.count;
	}
	for (i = 0; i < nrecs; i++)
	{
		bool		look;

		if (recs[i].mf.content == ICEBERG_MANIFEST_CONTENT_DATA)
			look = fallback ? recs[i].mf.partition_spec_id == gr->spec_id :
				compact_map_get(&wanted, recs[i].path) >= 0;
		else
			look = true;
		if (!look)
			continue;
		if (iceberg_check_interrupt(io, err) || !filter_manifest(&c, &recs[i], &c.news[i]))
			goto done;
	}
	for (i = 0; i < gr->nfiles; i++)
		if (!c.found[i])
		{
			tms_error_set(err, ICEBERG_ERR_CONFLICT,
						  "a file of the group is no longer live in the table");
			tms_error_detail(err, "\"%s\" was removed or rewritten by another commit.",
							 p->files[gr->first + i].path);
			goto done;
		}

	/*
	 * the new files (none when the deletes took every row of the group: the
	 * commit only removes), the list, the snapshot
	 */
	if ((noutputs > 0 && !write_added(&c, outputs, noutputs, &added)) ||
		!write_list(&c, snap, recs, nrecs, &added, &list_path))
		goto done;
	if (!iceberg_new_snapshot_replace(&res->snapshot, &c.t, snap->snapshot_id, iceberg_now_ms(),
									  md->current_schema_id, &list_path, err) ||
		!fill_summary(&c, snap))
		goto done;
	/* the manifests replaced, and the delete files removed */
	for (i = 0; i < nrecs; i++)
		if (c.news[i].path != NULL)
		{
			char	  **no = io_realloc(res->replaced_old, sizeof(char *) * (size_t) (res->nreplaced + 1));
			char	  **nn = no ? io_realloc(res->replaced_new, sizeof(char *) * (size_t) (res->nreplaced + 1)) : NULL;

			if (no != NULL)
				res->replaced_old = no;
			if (nn == NULL)
				goto nomem;
			res->replaced_new = nn;
			no[res->nreplaced] = io_strdup(recs[i].path);
			nn[res->nreplaced] = io_strdup(c.news[i].path);
			res->nreplaced++;
			if (no[res->nreplaced - 1] == NULL || nn[res->nreplaced - 1] == NULL)
				goto nomem;
		}
	res->removed = io_calloc((size_t) nrm + 1, sizeof(int));
	if (res->removed == NULL)
		goto nomem;
	for (i = 0; i < nrm; i++)
		if (c.removed_found[i])
			res->removed[res->nremoved++] = rm[i];
	res->delete_files_removed = res->nremoved;
	ok = true;
	goto done;
nomem:
	compact_oom(err);
done:
	io_free(list_path);
	iceberg_new_manifest_free(&added);
	for (i = 0; c.news && i < nrecs; i++)
		iceberg_new_manifest_free(&c.news[i]);
	io_free(c.news);
	compact_free_recs(recs, nrecs);
	io_free(rm);
	io_free(c.found);
	io_free(c.removed_found);
	io_free(c.source_schema);
	iceberg_kv_free(c.source_meta, c.nsource_meta);
	iceberg_strmap_free(&c.group_files);
	iceberg_strmap_free(&c.removable);
	iceberg_strmap_free(&c.known_deletes);
	iceberg_strmap_free(&wanted);
	return ok;
}

bool
iceberg_compact_committed(IcebergCompactPlan *p, int g, const IcebergCompactCommit *res,
						  TmsError *err)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	StrMap		old = {0};
	int			i,
				k;

	for (i = 0; i < gr->ndeletes; i++)
	{
		IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];

		for (k = 0; k < d->ngroups; k++)
			if (d->groups[k] == g)
				d->covered += d->group_files[k];
	}
	for (i = 0; i < res->nreplaced; i++)
		if (!compact_map_put(&old, res->replaced_old[i], i))
		{
			iceberg_strmap_free(&old);
			return compact_oom(err);
		}
	for (i = 0; i < p->nmanifests; i++)
	{
		int			k2 = compact_map_get(&old, p->manifests[i]);
		char	   *np;

		if (k2 < 0)
			continue;
		np = io_strdup(res->replaced_new[k2]);
		if (np == NULL)
		{
			iceberg_strmap_free(&old);
			return compact_oom(err);
		}
		io_free(p->manifests[i]);
		p->manifests[i] = np;
	}
	iceberg_strmap_free(&old);
	return true;
}
