/*-------------------------------------------------------------------------
 *
 * rewrite.c
 *	  Iceberg manifest rewrite: plan (which manifests to merge) and
 *	  execute (write the merged manifests and the new manifest list).
 *	  rewrite.h states the semantics, the limits and the memory bounds.
 *
 * Rules of this file: plain C, errors as IcebergError values, every
 * allocation freed on every path; nothing here commits, retries or
 * deletes (the caller does, with the list of written objects).  Inputs
 * are read with the layer's streaming readers (manifest.c) using raw
 * spans (ICEBERG_READ_RAW), so data_file records and kept manifest-list
 * records are copied byte for byte; outputs go through avro_write.c and
 * the caller's IcebergWriter.
 *
 * src/iceberg/rewrite.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro_write.h"
#include "iceberg/rewrite.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TARGET_BYTES	(INT64_C(8) * 1024 * 1024)
#define DEFAULT_BUDGET_BYTES	(INT64_C(32) * 1024 * 1024)
#define MAX_PARTITION_FIELDS	1024

static bool
oom(IcebergError *err)
{
	return iceberg_set_error(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
}

/* ---------------------------------------------------------------------
 * Plan
 * ---------------------------------------------------------------------
 */

void
iceberg_rewrite_plan_free(IcebergRewritePlan *p)
{
	int			i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nmanifests; i++)
		free(p->manifests[i].path);
	free(p->manifests);
	free(p->groups);
	free(p);
}

/* The target size: option, table property, default. */
static int64_t
resolve_target(const IcebergTableMetadata *md, const IcebergRewriteOptions *opt)
{
	const char *prop;

	if (opt != NULL && opt->target_size_bytes > 0)
		return opt->target_size_bytes;
	prop = iceberg_metadata_property(md, "commit.manifest.target-size-bytes");
	if (prop != NULL)
	{
		char	   *end;
		long long	v = strtoll(prop, &end, 10);

		if (end != prop && *end == '\0' && v > 0)
			return (int64_t) v;
	}
	return DEFAULT_TARGET_BYTES;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Common refusals of plan and execute. */
static bool
check_table(const IcebergTableMetadata *md, const IcebergSnapshot **snap,
			IcebergError *err)
{
	*snap = NULL;
	if (md == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "no table metadata given");
	if (md->format_version >= 3)
	{
		iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
						  "manifest rewrite does not support table format version %d",
						  md->format_version);
		iceberg_set_detail(err, "Format v3 adds row lineage (first_row_id), which this rewrite does not maintain.");
		return false;
	}
	if (md->current_snapshot_id < 0)
		return true;
	*snap = iceberg_metadata_current_snapshot(md);
	if (*snap == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_MALFORMED,
								 "current snapshot %" PRId64 " is not in the table metadata",
								 md->current_snapshot_id);
	if ((*snap)->manifest_list == NULL)
	{
		iceberg_set_error(err, ICEBERG_ERR_UNSUPPORTED,
						  "manifest rewrite does not support snapshots without a manifest list");
		iceberg_set_detail(err, "Snapshot %" PRId64 " lists its manifests inline (v1 \"manifests\"); a writer that upgrades it is needed first.",
						   (*snap)->snapshot_id);
		return false;
	}
	return true;
}

/* Does a manifest's writer schema have a top-level field with this id? */
static bool
schema_has_top_id(const char *schema_text, int32_t id, int64_t max_json,
				  bool *has, IcebergError *err)
{
	json_t	   *s = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
									  max_json, "avro.schema", err);
	json_t	   *fields;
	size_t		i;

	*has = false;
	if (s == NULL)
		return false;
	fields = json_object_get(s, "fields");
	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *fid = json_object_get(json_array_get(fields, i), "field-id");

		if (json_is_integer(fid) && json_integer_value(fid) == id)
			*has = true;
	}
	json_decref(s);
	return true;
}

/* An IcebergManifestFile for reading a planned manifest. */
static void
plan_manifest_file(const IcebergRewriteManifest *m, IcebergManifestFile *mf)
{
	memset(mf, 0, sizeof(*mf));
	mf->manifest_path = m->path;
	mf->manifest_length = m->length;
	mf->partition_spec_id = m->spec_id;
	mf->content = m->content;
	mf->sequence_number = m->sequence_number;
	mf->min_sequence_number = m->sequence_number;
	mf->added_snapshot_id = m->added_snapshot_id;
	mf->npartition_summaries = -1;
	mf->first_row_id = -1;
}

/*
 * Reads a candidate manifest's header: its schema hash, and whether it
 * can be rewritten in this table (v2: needs sequence number fields).
 */
static bool
probe_manifest(const IcebergFileIO *io, const IcebergTableMetadata *md,
			   IcebergRewriteManifest *m, bool *rewritable, IcebergError *err)
{
	IcebergManifestReader *r;
	IcebergManifestFile mf;
	IcebergLimits lim;
	const char *schema;
	bool		has = true;

	*rewritable = false;
	iceberg_effective_limits(io->limits, &lim);
	plan_manifest_file(m, &mf);
	if (!iceberg_manifest_open(io, &mf, md->format_version, 0, &r, err))
		return false;
	schema = iceberg_manifest_header(r, "avro.schema");
	if (schema == NULL)
	{
		iceberg_manifest_close(r);
		return iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "manifest without avro.schema");
	}
	m->schema_hash = iceberg_hash_bytes(ICEBERG_HASH_INIT, schema, strlen(schema));
	if (md->format_version >= 2 &&
		!schema_has_top_id(schema, 3, lim.max_json_bytes, &has, err))
	{
		iceberg_manifest_close(r);
		return false;
	}
	iceberg_manifest_close(r);
	*rewritable = has;
	return true;
}

/* See rewrite.h. */
bool
iceberg_rewrite_plan(const IcebergFileIO *io, const IcebergTableMetadata *md,
					 const IcebergRewriteOptions *opt, IcebergRewritePlan **out,
					 IcebergError *err)
{
	IcebergRewritePlan *p;
	const IcebergSnapshot *snap;
	IcebergManifestListReader *lr = NULL;
	const IcebergManifestFile *mf;
	int			alloc = 0;
	int			rc,
				i,
				g;

	iceberg_error_clear(err);
	*out = NULL;
	if (io == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "no file io given");
	if (!check_table(md, &snap, err))
		return false;
	p = calloc(1, sizeof(IcebergRewritePlan));
	if (p == NULL)
		return oom(err);
	p->base_snapshot_id = snap ? snap->snapshot_id : -1;
	p->target_size_bytes = resolve_target(md, opt);
	p->now_ms = (opt != NULL && opt->now_ms > 0) ? opt->now_ms : now_ms();
	p->memory_budget_bytes = (opt != NULL && opt->memory_budget_bytes > 0)
		? opt->memory_budget_bytes : DEFAULT_BUDGET_BYTES;
	if (snap == NULL)
	{
		*out = p;
		return true;
	}
	if (!iceberg_manifest_list_open(io, md, snap, &lr, err))
		goto fail;
	while ((rc = iceberg_manifest_list_next(lr, &mf, err)) == 1)
	{
		IcebergRewriteManifest *m;

		if (p->nmanifests == alloc)
		{
			int			na = alloc ? alloc * 2 : 64;
			IcebergRewriteManifest *nm;

			if (na > INT32_MAX / 2)
			{
				iceberg_set_error(err, ICEBERG_ERR_LIMIT, "too many manifests");
				goto fail;
			}
			nm = realloc(p->manifests, sizeof(*nm) * (size_t) na);
			if (nm == NULL)
			{
				oom(err);
				goto fail;
			}
			p->manifests = nm;
			alloc = na;
		}
		m = &p->manifests[p->nmanifests];
		memset(m, 0, sizeof(*m));
		m->path = iceberg_strdup(mf->manifest_path, err);
		if (m->path == NULL)
			goto fail;
		p->nmanifests++;
		m->length = mf->manifest_length;
		m->spec_id = mf->partition_spec_id;
		m->content = mf->content;
		m->live_entries = (mf->added_files_count >= 0 && mf->existing_files_count >= 0)
			? (int64_t) mf->added_files_count + mf->existing_files_count : -1;
		m->group = -1;
		m->sequence_number = mf->sequence_number;
		m->added_snapshot_id = mf->added_snapshot_id;
	}
	if (rc < 0)
		goto fail;
	iceberg_manifest_list_close(lr);
	lr = NULL;

	/* candidates, grouped by (spec, content, schema) */
	for (i = 0; i < p->nmanifests; i++)
	{
		IcebergRewriteManifest *m = &p->manifests[i];
		bool		ok;

		if ((opt != NULL && opt->spec_id >= 0 && m->spec_id != opt->spec_id) ||
			m->length < 0 || m->length >= p->target_size_bytes)
			continue;
		if (iceberg_check_interrupt(io, err))
			goto fail;
		if (!probe_manifest(io, md, m, &ok, err))
			goto fail;
		if (!ok)
			continue;
		for (g = 0; g < p->ngroups; g++)
			if (p->groups[g].spec_id == m->spec_id && p->groups[g].content == m->content &&
				p->groups[g].schema_hash == m->schema_hash)
				break;
		if (g == p->ngroups)
		{
			IcebergRewriteGroup *ng;

			/* at most one group per candidate: bounded by nmanifests */
			ng = realloc(p->groups, sizeof(*ng) * (size_t) (p->ngroups + 1));
			if (ng == NULL)
			{
				oom(err);
				goto fail;
			}
			p->groups = ng;
			memset(&ng[g], 0, sizeof(ng[g]));
			ng[g].spec_id = m->spec_id;
			ng[g].content = m->content;
			ng[g].schema_hash = m->schema_hash;
			p->ngroups++;
		}
		m->group = g;
		p->groups[g].nreplaced++;
		p->groups[g].live_entries += m->live_entries > 0 ? m->live_entries : 0;
		p->groups[g].bytes += m->length;
	}
	/* groups of one are kept; renumber the rest */
	{
		int			ng = 0;
		int		   *map = calloc((size_t) p->ngroups + 1, sizeof(int));

		if (map == NULL)
		{
			oom(err);
			goto fail;
		}
		for (g = 0; g < p->ngroups; g++)
		{
			if (p->groups[g].nreplaced >= 2)
			{
				map[g] = ng;
				p->groups[ng] = p->groups[g];
				p->groups[ng].expected_outputs = (int)
					((p->groups[ng].bytes + p->target_size_bytes - 1) / p->target_size_bytes);
				if (p->groups[ng].expected_outputs < 1)
					p->groups[ng].expected_outputs = 1;
				ng++;
			}
			else
				map[g] = -1;
		}
		for (i = 0; i < p->nmanifests; i++)
		{
			IcebergRewriteManifest *m = &p->manifests[i];

			if (m->group >= 0)
				m->group = map[m->group];
			if (m->group >= 0)
				p->nreplaced++;
			else
				p->nkept++;
		}
		free(map);
		p->ngroups = ng;
	}
	*out = p;
	return true;

fail:
	iceberg_manifest_list_close(lr);
	iceberg_rewrite_plan_free(p);
	return false;
}

/* ---------------------------------------------------------------------
 * Partition summaries
 * ---------------------------------------------------------------------
 */

typedef enum PartType
{
	PT_UNSUPPORTED,
	PT_BOOL,
	PT_INT,
	PT_LONG,
	PT_FLOAT,
	PT_DOUBLE,
	PT_STRING,
	PT_BYTES,					/* bytes, fixed, uuid: unsigned bytes */
	PT_DECIMAL					/* two's complement big-endian */
} PartType;

#define DEC_BYTES 32

typedef struct FieldSum
{
	bool		has_null;
	bool		has_nan;
	bool		has_bound;
	int64_t		llo,
				lhi;
	double		dlo,
				dhi;
	IcebergBuf	blo,
				bhi;
} FieldSum;

/* Strip a ["null", T] union to T; NULL for other unions. */
static json_t *
strip_null(json_t *t)
{
	if (json_is_array(t))
	{
		json_t	   *other = NULL;
		size_t		i;

		for (i = 0; i < json_array_size(t); i++)
		{
			json_t	   *b = json_array_get(t, i);

			if (json_is_string(b) && strcmp(json_string_value(b), "null") == 0)
				continue;
			if (other != NULL)
				return NULL;
			other = b;
		}
		return other;
	}
	if (json_is_object(t) && !json_is_string(json_object_get(t, "type")))
		return strip_null(json_object_get(t, "type"));
	return t;
}

/* The record field with this id (or name) of a record schema. */
static json_t *
record_field_type(json_t *rec, int32_t id, const char *name)
{
	json_t	   *fields = json_object_get(rec, "fields");
	size_t		i;

	for (i = 0; i < json_array_size(fields); i++)
	{
		json_t	   *f = json_array_get(fields, i);
		json_t	   *fid = json_object_get(f, "field-id");
		const char *fname = json_string_value(json_object_get(f, "name"));

		if (json_is_integer(fid) ? json_integer_value(fid) == id
			: (fname != NULL && strcmp(fname, name) == 0))
			return json_object_get(f, "type");
	}
	return NULL;
}

static PartType
part_type(json_t *t)
{
	const char *type;
	const char *logical;

	t = strip_null(t);
	if (t == NULL)
		return PT_UNSUPPORTED;
	if (json_is_string(t))
	{
		type = json_string_value(t);
		logical = NULL;
	}
	else if (json_is_object(t))
	{
		type = json_string_value(json_object_get(t, "type"));
		logical = json_string_value(json_object_get(t, "logicalType"));
	}
	else
		return PT_UNSUPPORTED;
	if (type == NULL)
		return PT_UNSUPPORTED;
	if (logical != NULL && strcmp(logical, "decimal") == 0 &&
		(strcmp(type, "fixed") == 0 || strcmp(type, "bytes") == 0))
	{
		json_t	   *sz = json_object_get(t, "size");

		if (strcmp(type, "fixed") == 0 &&
			(!json_is_integer(sz) || json_integer_value(sz) > DEC_BYTES))
			return PT_UNSUPPORTED;
		return PT_DECIMAL;
	}
	if (strcmp(type, "boolean") == 0)
		return PT_BOOL;
	if (strcmp(type, "int") == 0)
		return PT_INT;			/* int, date */
	if (strcmp(type, "long") == 0)
		return PT_LONG;			/* long, time, timestamp(tz) */
	if (strcmp(type, "float") == 0)
		return PT_FLOAT;
	if (strcmp(type, "double") == 0)
		return PT_DOUBLE;
	if (strcmp(type, "string") == 0)
		return logical != NULL && strcmp(logical, "uuid") == 0 ? PT_UNSUPPORTED : PT_STRING;
	if (strcmp(type, "bytes") == 0 || strcmp(type, "fixed") == 0)
		return PT_BYTES;
	return PT_UNSUPPORTED;
}

/*
 * The partition field types of a manifest writer schema.  *ntypes -1 when
 * some field is unsupported (summaries are then written null).
 */
static bool
partition_types(const char *schema_text, int64_t max_json, PartType **types,
				int *ntypes, IcebergError *err)
{
	json_t	   *s = iceberg_json_load(schema_text, strlen(schema_text), JSON_DECODE_ANY,
									  max_json, "avro.schema", err);
	json_t	   *df,
			   *part,
			   *fields;
	size_t		i,
				n;

	*types = NULL;
	*ntypes = -1;
	if (s == NULL)
		return false;
	df = strip_null(record_field_type(s, 2, "data_file"));
	part = df ? strip_null(record_field_type(df, 102, "partition")) : NULL;
	fields = part ? json_object_get(part, "fields") : NULL;
	if (!json_is_array(fields) || json_array_size(fields) > MAX_PARTITION_FIELDS)
	{
		json_decref(s);
		return true;
	}
	n = json_array_size(fields);
	*types = calloc(n + 1, sizeof(PartType));
	if (*types == NULL)
	{
		json_decref(s);
		return oom(err);
	}
	*ntypes = (int) n;
	for (i = 0; i < n; i++)
	{
		(*types)[i] = part_type(json_object_get(json_array_get(fields, i), "type"));
		if ((*types)[i] == PT_UNSUPPORTED)
			*ntypes = -1;
	}
	json_decref(s);
	return true;
}

/*
 * Next element of a canonical partition array text (manifest.c renders
 * it: numbers, true/false/null, JSON strings; no nesting).  False at the
 * end or on anything unexpected.
 */
static bool
next_elem(const char **pp, const char *end, const char **tok, size_t *len)
{
	const char *p = *pp;

	if (p < end && (*p == '[' || *p == ','))
		p++;
	if (p >= end || *p == ']')
		return false;
	*tok = p;
	if (*p == '"')
	{
		p++;
		while (p < end && *p != '"')
			p += (*p == '\\' && p + 1 < end) ? 2 : 1;
		if (p >= end)
			return false;
		p++;
	}
	else
		while (p < end && *p != ',' && *p != ']')
		{
			if (*p == '[' || *p == '{')
				return false;
			p++;
		}
	*len = (size_t) (p - *tok);
	*pp = p;
	return true;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode a JSON string token (quotes included) into b. */
static bool
unescape(const char *t, size_t len, IcebergBuf *b)
{
	size_t		i;

	b->len = 0;
	if (!iceberg_buf_reserve(b, len))
		return false;
	for (i = 1; i + 1 < len; i++)
	{
		char		c = t[i];

		if (c == '\\' && i + 2 < len)
		{
			c = t[++i];
			if (c == 'u' && i + 4 < len)
			{
				int			v = 0,
							k;
				char		u[3];
				size_t		ul;

				for (k = 1; k <= 4; k++)
				{
					int			h = hexval(t[i + k]);

					if (h < 0)
						return false;
					v = v * 16 + h;
				}
				i += 4;
				if (v < 0x80)
				{
					u[0] = (char) v;
					ul = 1;
				}
				else if (v < 0x800)
				{
					u[0] = (char) (0xc0 | (v >> 6));
					u[1] = (char) (0x80 | (v & 0x3f));
					ul = 2;
				}
				else
				{
					u[0] = (char) (0xe0 | (v >> 12));
					u[1] = (char) (0x80 | ((v >> 6) & 0x3f));
					u[2] = (char) (0x80 | (v & 0x3f));
					ul = 3;
				}
				if (!iceberg_buf_append(b, u, ul))
					return false;
				continue;
			}
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' :
				c == 'b' ? '\b' : c == 'f' ? '\f' : c;
		}
		if (!iceberg_buf_append(b, &c, 1))
			return false;
	}
	return true;
}

/* Decode a "0x<hex>" string token into b. */
static bool
unhex(const char *t, size_t len, IcebergBuf *b)
{
	size_t		i;

	b->len = 0;
	if (len < 4 || t[0] != '"' || t[1] != '0' || t[2] != 'x' || (len - 4) % 2 != 0)
		return false;
	if (!iceberg_buf_reserve(b, len / 2))
		return false;
	for (i = 3; i + 1 < len - 1; i += 2)
	{
		int			h = hexval(t[i]),
					l = hexval(t[i + 1]);
		uint8_t		v;

		if (h < 0 || l < 0)
			return false;
		v = (uint8_t) (h * 16 + l);
		if (!iceberg_buf_append(b, &v, 1))
			return false;
	}
	return true;
}

/* Sign-extend a big-endian two's complement value to DEC_BYTES. */
static bool
dec_normalize(const IcebergBuf *in, uint8_t *out)
{
	uint8_t		fill;

	if (in->len > DEC_BYTES)
		return false;
	fill = (in->len > 0 && (in->data[0] & 0x80)) ? 0xff : 0x00;
	memset(out, fill, DEC_BYTES - in->len);
	memcpy(out + DEC_BYTES - in->len, in->data, in->len);
	return true;
}

static int
dec_cmp(const uint8_t *a, const uint8_t *b)
{
	if ((int8_t) a[0] != (int8_t) b[0])
		return (int8_t) a[0] < (int8_t) b[0] ? -1 : 1;
	return memcmp(a + 1, b + 1, DEC_BYTES - 1);
}

static int
bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int			c = memcmp(a, b, al < bl ? al : bl);

	if (c != 0)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

/* Float order with -0.0 below 0.0 (as Java's Double.compare). */
static bool
dbl_less(double a, double b)
{
	return a < b || (a == b && signbit(a) && !signbit(b));
}

static bool
buf_set(IcebergBuf *dst, const void *p, size_t len)
{
	dst->len = 0;
	return iceberg_buf_append(dst, p, len);
}

/*
 * Add one entry's partition text to the summaries.  False on allocation
 * failure; a value that does not parse marks *bad (summaries then null).
 */
static bool
summ_add(FieldSum *fs, const PartType *types, int ntypes, const char *text,
		 size_t len, IcebergBuf *tmp, bool *bad)
{
	const char *p = text;
	const char *end = text + len;
	const char *tok;
	size_t		tl;
	int			i;

	for (i = 0; i < ntypes; i++)
	{
		FieldSum   *f = &fs[i];
		char		num[64];

		if (!next_elem(&p, end, &tok, &tl))
		{
			*bad = true;
			return true;
		}
		if (tl == 4 && memcmp(tok, "null", 4) == 0)
		{
			f->has_null = true;
			continue;
		}
		if (tl < sizeof(num))
		{
			memcpy(num, tok, tl);
			num[tl] = '\0';
		}
		else
			num[0] = '\0';
		switch (types[i])
		{
			case PT_BOOL:
			case PT_INT:
			case PT_LONG:
				{
					int64_t		v;
					char	   *e;

					if (types[i] == PT_BOOL)
					{
						if (strcmp(num, "true") != 0 && strcmp(num, "false") != 0)
						{
							*bad = true;
							return true;
						}
						v = num[0] == 't';
					}
					else
					{
						v = strtoll(num, &e, 10);
						if (num[0] == '\0' || *e != '\0')
						{
							*bad = true;
							return true;
						}
					}
					if (!f->has_bound || v < f->llo)
						f->llo = v;
					if (!f->has_bound || v > f->lhi)
						f->lhi = v;
					f->has_bound = true;
					break;
				}
			case PT_FLOAT:
			case PT_DOUBLE:
				{
					double		v;
					char	   *e;

					if (strcmp(num, "\"NaN\"") == 0)
					{
						f->has_nan = true;
						continue;
					}
					if (strcmp(num, "\"Infinity\"") == 0)
						v = INFINITY;
					else if (strcmp(num, "\"-Infinity\"") == 0)
						v = -INFINITY;
					else
					{
						v = strtod(num, &e);
						if (num[0] == '\0' || *e != '\0')
						{
							*bad = true;
							return true;
						}
					}
					if (types[i] == PT_FLOAT)
						v = (double) (float) v;
					if (!f->has_bound || dbl_less(v, f->dlo))
						f->dlo = v;
					if (!f->has_bound || dbl_less(f->dhi, v))
						f->dhi = v;
					f->has_bound = true;
					break;
				}
			case PT_STRING:
			case PT_BYTES:
				if (tl < 2 || tok[0] != '"')
				{
					*bad = true;
					return true;
				}
				if (!(types[i] == PT_STRING ? unescape(tok, tl, tmp) : unhex(tok, tl, tmp)))
				{
					if (tmp->alloc < tl)
						return false;	/* allocation failed */
					*bad = true;
					return true;
				}
				if (!f->has_bound ||
					bytes_cmp(tmp->data, tmp->len, f->blo.data, f->blo.len) < 0)
					if (!buf_set(&f->blo, tmp->data, tmp->len))
						return false;
				if (!f->has_bound ||
					bytes_cmp(tmp->data, tmp->len, f->bhi.data, f->bhi.len) > 0)
					if (!buf_set(&f->bhi, tmp->data, tmp->len))
						return false;
				f->has_bound = true;
				break;
			case PT_DECIMAL:
				{
					uint8_t		v[DEC_BYTES];

					if (!unhex(tok, tl, tmp) || !dec_normalize(tmp, v))
					{
						*bad = true;
						return true;
					}
					if (!f->has_bound || dec_cmp(v, (const uint8_t *) f->blo.data) < 0)
						if (!buf_set(&f->blo, v, DEC_BYTES))
							return false;
					if (!f->has_bound || dec_cmp(v, (const uint8_t *) f->bhi.data) > 0)
						if (!buf_set(&f->bhi, v, DEC_BYTES))
							return false;
					f->has_bound = true;
					break;
				}
			case PT_UNSUPPORTED:
				*bad = true;
				return true;
		}
	}
	if (next_elem(&p, end, &tok, &tl))
		*bad = true;			/* more values than fields */
	return true;
}

/* Iceberg single-value serialization of a bound into out. */
static bool
serialize_bound(PartType t, const FieldSum *f, bool upper, IcebergBuf *out)
{
	uint8_t		b[8];
	int64_t		l = upper ? f->lhi : f->llo;
	double		d = upper ? f->dhi : f->dlo;
	const IcebergBuf *bb = upper ? &f->bhi : &f->blo;
	int			i;

	out->len = 0;
	switch (t)
	{
		case PT_BOOL:
			b[0] = l ? 1 : 0;
			return iceberg_buf_append(out, b, 1);
		case PT_INT:
		case PT_LONG:
			for (i = 0; i < 8; i++)
				b[i] = (uint8_t) ((uint64_t) l >> (8 * i));
			return iceberg_buf_append(out, b, t == PT_INT ? 4 : 8);
		case PT_FLOAT:
			{
				float		fv = (float) d;

				return iceberg_buf_append(out, &fv, 4); /* little-endian host */
			}
		case PT_DOUBLE:
			return iceberg_buf_append(out, &d, 8);
		case PT_STRING:
		case PT_BYTES:
			return iceberg_buf_append(out, bb->data ? bb->data : "", bb->len);
		case PT_DECIMAL:
			{
				const uint8_t *v = (const uint8_t *) bb->data;
				int			k = 0;

				/* minimal two's complement: drop redundant sign bytes */
				while (k < DEC_BYTES - 1 &&
					   ((v[k] == 0x00 && !(v[k + 1] & 0x80)) ||
						(v[k] == 0xff && (v[k + 1] & 0x80))))
					k++;
				return iceberg_buf_append(out, v + k, (size_t) (DEC_BYTES - k));
			}
		case PT_UNSUPPORTED:
			break;
	}
	return false;
}

/* ---------------------------------------------------------------------
 * Execute
 * ---------------------------------------------------------------------
 */

/* A manifest written by this rewrite, for the new manifest list. */
typedef struct NewManifest
{
	char	   *path;
	int64_t		length;
	int32_t		spec_id;
	int32_t		content;
	int64_t		files;
	int64_t		rows;
	int64_t		min_seq;
	int			nsumm;			/* -1: partitions null */
	bool	   *contains_null;
	bool	   *contains_nan;
	IcebergBuf *lower;			/* len 0 and data NULL: no bound */
	IcebergBuf *upper;
	bool	   *has_bound;
} NewManifest;

/* One clustered entry, in the arena: header, partition text, raw bytes. */
typedef struct EntryHdr
{
	int64_t		snapshot_id;
	int64_t		seq;
	int64_t		file_seq;
	int64_t		records;
	uint64_t	order;
	uint32_t	part_len;
	uint32_t	raw_len;
} EntryHdr;

typedef struct Exec
{
	const IcebergFileIO *io;
	const IcebergWriter *wr;
	const IcebergTableMetadata *md;
	const IcebergRewritePlan *plan;
	IcebergRewriteResult *res;
	IcebergError *err;
	IcebergLimits lim;
	char		uuid[40];
	char		dir[2048];
	int64_t		snapshot_id;
	int64_t		seq;
	int			codec;			/* ICEBERG_AVRO_WRITE_* */
	int			level;			/* deflate level, -1: default */

	/* new manifests */
	NewManifest *news;
	int			nnews;
	int			news_alloc;

	/* the group being processed */
	char	   *schema;			/* writer schema text of the group */
	int			nmeta;
	IcebergKeyValue *meta;		/* header metadata of its first manifest */
	PartType   *types;
	int			ntypes;			/* -1: summaries unsupported */

	/* clustering */
	IcebergBuf	arena;
	size_t	   *idx;
	size_t		nidx;
	size_t		idx_alloc;
	uint64_t	order;

	/* the output manifest being built */
	IcebergAvroWriter *w;
	int64_t		out_files;
	int64_t		out_rows;
	int64_t		out_min_seq;
	FieldSum   *summ;
	bool		summ_bad;
	IcebergBuf	tmp;
} Exec;

static void
free_kv(IcebergKeyValue *kv, int n)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

static void
free_summ(Exec *x)
{
	int			i;

	if (x->summ == NULL)
		return;
	for (i = 0; i < x->ntypes; i++)
	{
		iceberg_buf_free(&x->summ[i].blo);
		iceberg_buf_free(&x->summ[i].bhi);
	}
	free(x->summ);
	x->summ = NULL;
}

static void
free_new(NewManifest *n)
{
	int			i;

	free(n->path);
	for (i = 0; i < n->nsumm; i++)
	{
		iceberg_buf_free(&n->lower[i]);
		iceberg_buf_free(&n->upper[i]);
	}
	free(n->contains_null);
	free(n->contains_nan);
	free(n->lower);
	free(n->upper);
	free(n->has_bound);
}

/* Remember a path as written (before the write: a failed write may leave it). */
static bool
add_written(IcebergRewriteResult *res, const char *path, IcebergError *err)
{
	char	  **nw = realloc(res->written, sizeof(char *) * (size_t) (res->nwritten + 1));

	if (nw == NULL)
		return oom(err);
	res->written = nw;
	nw[res->nwritten] = iceberg_strdup(path, err);
	if (nw[res->nwritten] == NULL)
		return false;
	res->nwritten++;
	return true;
}

/* Write an object through the caller's writer. */
static bool
write_object(Exec *x, const char *path, const uint8_t *data, size_t len)
{
	IoError		ioerr;

	if (!add_written(x->res, path, x->err))
		return false;
	memset(&ioerr, 0, sizeof(ioerr));
	if (x->wr->write(x->wr->arg, path, data, len, &ioerr) != 0)
	{
		IoErrorCode ic = ioerr.code == IO_OK ? IO_ERR_STORAGE : ioerr.code;

		x->err->code = ic == IO_ERR_INTERRUPTED ? ICEBERG_ERR_CANCELLED :
			ic == IO_ERR_OUT_OF_MEMORY ? ICEBERG_ERR_OUT_OF_MEMORY : ICEBERG_ERR_IO;
		x->err->io_code = ic;
		snprintf(x->err->message, sizeof(x->err->message), "could not write \"%.200s\"", path);
		snprintf(x->err->detail, sizeof(x->err->detail), "%.300s%s%.200s",
				 ioerr.message, ioerr.detail[0] ? ": " : "", ioerr.detail);
		return false;
	}
	return true;
}

/* Start an output manifest for the current group. */
static bool
out_start(Exec *x)
{
	if (!iceberg_avro_writer_create(x->schema, x->meta, x->nmeta, x->codec, x->level,
									x->lim.max_json_bytes, &x->w, x->err))
		return false;
	x->out_files = 0;
	x->out_rows = 0;
	x->out_min_seq = INT64_MAX;
	x->summ_bad = x->ntypes < 0;
	free_summ(x);
	if (x->ntypes > 0)
	{
		x->summ = calloc((size_t) x->ntypes, sizeof(FieldSum));
		if (x->summ == NULL)
			return oom(x->err);
	}
	return true;
}

/* Finish the output manifest: write it and note it for the list. */
static bool
out_finish(Exec *x, int32_t spec_id, int32_t content)
{
	const uint8_t *data;
	size_t		len;
	char		path[2200];
	NewManifest *n;
	int			i;

	if (x->w == NULL)
		return true;
	if (x->out_files == 0)
	{
		iceberg_avro_writer_free(x->w);
		x->w = NULL;
		return true;
	}
	if (!iceberg_avro_writer_finish(x->w, &data, &len, x->err))
		return false;
	snprintf(path, sizeof(path), "%s/%s-m%d.avro", x->dir, x->uuid, x->nnews);
	if (x->nnews == x->news_alloc)
	{
		int			na = x->news_alloc ? x->news_alloc * 2 : 16;
		NewManifest *nn = realloc(x->news, sizeof(NewManifest) * (size_t) na);

		if (nn == NULL)
			return oom(x->err);
		x->news = nn;
		x->news_alloc = na;
	}
	n = &x->news[x->nnews];
	memset(n, 0, sizeof(*n));
	n->nsumm = -1;
	n->path = iceberg_strdup(path, x->err);
	if (n->path == NULL)
		return false;
	x->nnews++;
	n->length = (int64_t) len;
	n->spec_id = spec_id;
	n->content = content;
	n->files = x->out_files;
	n->rows = x->out_rows;
	n->min_seq = x->out_min_seq == INT64_MAX ? 0 : x->out_min_seq;
	if (!x->summ_bad && x->ntypes >= 0)
	{
		int			k = x->ntypes;

		n->contains_null = calloc((size_t) k + 1, sizeof(bool));
		n->contains_nan = calloc((size_t) k + 1, sizeof(bool));
		n->has_bound = calloc((size_t) k + 1, sizeof(bool));
		n->lower = calloc((size_t) k + 1, sizeof(IcebergBuf));
		n->upper = calloc((size_t) k + 1, sizeof(IcebergBuf));
		if (!n->contains_null || !n->contains_nan || !n->has_bound || !n->lower || !n->upper)
			return oom(x->err);
		n->nsumm = k;
		for (i = 0; i < k; i++)
		{
			n->contains_null[i] = x->summ[i].has_null;
			n->contains_nan[i] = x->summ[i].has_nan;
			n->has_bound[i] = x->summ[i].has_bound;
			if (x->summ[i].has_bound &&
				(!serialize_bound(x->types[i], &x->summ[i], false, &n->lower[i]) ||
				 !serialize_bound(x->types[i], &x->summ[i], true, &n->upper[i])))
				return oom(x->err);
		}
	}
	if (!write_object(x, path, data, len))
		return false;
	iceberg_avro_writer_free(x->w);
	x->w = NULL;
	x->res->manifests_added++;
	return true;
}

/* Write one clustered entry into the current output, rolling at target. */
static bool
emit_entry(Exec *x, const EntryHdr *h, int32_t spec_id, int32_t content)
{
	const char *part = (const char *) (h + 1);
	const uint8_t *raw = (const uint8_t *) part + h->part_len;
	IcebergAvroWField f[5];

	if (x->w == NULL && !out_start(x))
		return false;
	memset(f, 0, sizeof(f));
	f[0].field_id = 0;
	f[0].name = "status";
	f[0].v.kind = AVW_LONG;
	f[0].v.l = ICEBERG_STATUS_EXISTING;
	f[1].field_id = 1;
	f[1].name = "snapshot_id";
	f[1].v.kind = AVW_LONG;
	f[1].v.l = h->snapshot_id;
	f[2].field_id = 3;
	f[2].name = "sequence_number";
	f[2].v.kind = AVW_LONG;
	f[2].v.l = h->seq;
	f[3].field_id = 4;
	f[3].name = "file_sequence_number";
	f[3].v.kind = AVW_LONG;
	f[3].v.l = h->file_seq;
	f[4].field_id = 2;
	f[4].name = "data_file";
	f[4].v.kind = AVW_RAW;
	f[4].v.p = raw;
	f[4].v.len = h->raw_len;
	if (!iceberg_avro_writer_add(x->w, f, 5, x->err))
		return false;
	x->out_files++;
	x->out_rows += h->records;
	if (h->seq < x->out_min_seq)
		x->out_min_seq = h->seq;
	if (!x->summ_bad && x->ntypes > 0 &&
		!summ_add(x->summ, x->types, x->ntypes, part, h->part_len, &x->tmp, &x->summ_bad))
		return oom(x->err);
	x->res->entries_rewritten++;
	if (iceberg_avro_writer_size(x->w) >= x->plan->target_size_bytes)
		return out_finish(x, spec_id, content);
	return true;
}

static const char *sort_base;

static int
cmp_entries(const void *a, const void *b)
{
	const EntryHdr *ha = (const EntryHdr *) (sort_base + *(const size_t *) a);
	const EntryHdr *hb = (const EntryHdr *) (sort_base + *(const size_t *) b);
	int			c = bytes_cmp((const char *) (ha + 1), ha->part_len,
							  (const char *) (hb + 1), hb->part_len);

	if (c != 0)
		return c;
	return ha->order < hb->order ? -1 : ha->order > hb->order ? 1 : 0;
}

/* Sort the held chunk by partition and write it out. */
static bool
flush_chunk(Exec *x, int32_t spec_id, int32_t content)
{
	size_t		i;

	if (x->nidx == 0)
		return true;
	x->res->cluster_chunks++;
	sort_base = x->arena.data;
	qsort(x->idx, x->nidx, sizeof(size_t), cmp_entries);
	for (i = 0; i < x->nidx; i++)
		if (!emit_entry(x, (const EntryHdr *) (x->arena.data + x->idx[i]), spec_id, content))
			return false;
	x->nidx = 0;
	x->arena.len = 0;
	return true;
}

/* Hold one live entry for clustering; flushes the chunk at the budget. */
static bool
hold_entry(Exec *x, const IcebergManifestEntry *e, int32_t spec_id, int32_t content)
{
	size_t		need = sizeof(EntryHdr) + e->partition_len + e->raw_data_file_len;
	size_t		budget = (size_t) x->plan->memory_budget_bytes;
	EntryHdr	h;
	size_t		held;

	need = (need + 7) & ~(size_t) 7;
	if (x->nidx > 0 &&
		x->arena.len + need + (x->nidx + 1) * sizeof(size_t) > budget)
	{
		if (!flush_chunk(x, spec_id, content))
			return false;
	}
	if (x->nidx == x->idx_alloc)
	{
		size_t		na = x->idx_alloc ? x->idx_alloc * 2 : 1024;
		size_t	   *ni;

		if (na * sizeof(size_t) > budget && x->idx_alloc * sizeof(size_t) < budget)
			na = budget / sizeof(size_t) + 1;
		ni = realloc(x->idx, na * sizeof(size_t));
		if (ni == NULL)
			return oom(x->err);
		x->idx = ni;
		x->idx_alloc = na;
	}
	if (x->arena.alloc < x->arena.len + need + 1)
	{
		/* grow by doubling, but not past the budget (unless one entry) */
		size_t		want = x->arena.alloc ? x->arena.alloc * 2 : 64 * 1024;
		char	   *nd;

		if (want > budget)
			want = budget;
		if (want < x->arena.len + need + 1)
			want = x->arena.len + need + 1;
		nd = realloc(x->arena.data, want);
		if (nd == NULL)
			return oom(x->err);
		x->arena.data = nd;
		x->arena.alloc = want;
	}
	memset(&h, 0, sizeof(h));
	h.snapshot_id = e->snapshot_id;
	h.seq = e->sequence_number;
	h.file_seq = e->file_sequence_number;
	h.records = e->record_count;
	h.order = x->order++;
	h.part_len = (uint32_t) e->partition_len;
	h.raw_len = (uint32_t) e->raw_data_file_len;
	x->idx[x->nidx++] = x->arena.len;
	memcpy(x->arena.data + x->arena.len, &h, sizeof(h));
	memcpy(x->arena.data + x->arena.len + sizeof(h), e->partition, e->partition_len);
	memcpy(x->arena.data + x->arena.len + sizeof(h) + e->partition_len,
		   e->raw_data_file, e->raw_data_file_len);
	x->arena.len += need;
	held = x->arena.len + x->nidx * sizeof(size_t);
	if ((int64_t) held > x->res->cluster_peak_bytes)
		x->res->cluster_peak_bytes = (int64_t) held;
	return true;
}

/* Copy a reader's header metadata (without avro.*) into the group state. */
static bool
copy_meta(Exec *x, IcebergManifestReader *r)
{
	const IcebergKeyValue *kv;
	int			n = iceberg_manifest_header_all(r, &kv);
	int			i;

	x->meta = calloc((size_t) n + 1, sizeof(IcebergKeyValue));
	if (x->meta == NULL)
		return oom(x->err);
	for (i = 0; i < n; i++)
	{
		if (strncmp(kv[i].key, "avro.", 5) == 0)
			continue;
		x->meta[x->nmeta].key = iceberg_strdup(kv[i].key, x->err);
		x->meta[x->nmeta].value = iceberg_strdup(kv[i].value, x->err);
		x->nmeta++;
		if (x->meta[x->nmeta - 1].key == NULL || x->meta[x->nmeta - 1].value == NULL)
			return false;
	}
	return true;
}

static void
group_reset(Exec *x)
{
	free(x->schema);
	x->schema = NULL;
	free_kv(x->meta, x->nmeta);
	x->meta = NULL;
	x->nmeta = 0;
	free(x->types);
	x->types = NULL;
	free_summ(x);
	x->ntypes = -1;
	iceberg_avro_writer_free(x->w);
	x->w = NULL;
	x->nidx = 0;
	x->arena.len = 0;
}

/* Merge the manifests of group g. */
static bool
process_group(Exec *x, int g)
{
	const IcebergRewritePlan *p = x->plan;
	const IcebergRewriteGroup *grp = &p->groups[g];
	int			i;

	for (i = 0; i < p->nmanifests; i++)
	{
		const IcebergRewriteManifest *m = &p->manifests[i];
		IcebergManifestReader *r;
		IcebergManifestFile mf;
		const IcebergManifestEntry *e;
		const char *schema;
		int			rc;

		if (m->group != g)
			continue;
		if (iceberg_check_interrupt(x->io, x->err))
			return false;
		plan_manifest_file(m, &mf);
		if (!iceberg_manifest_open(x->io, &mf, x->md->format_version,
								   ICEBERG_READ_PARTITION | ICEBERG_READ_RAW, &r, x->err))
			return false;
		schema = iceberg_manifest_header(r, "avro.schema");
		if (schema == NULL ||
			iceberg_hash_bytes(ICEBERG_HASH_INIT, schema, strlen(schema)) != grp->schema_hash ||
			(x->schema != NULL && strcmp(schema, x->schema) != 0))
		{
			iceberg_manifest_close(r);
			iceberg_set_error(x->err, ICEBERG_ERR_CONFLICT,
							  "manifest changed since the rewrite was planned");
			iceberg_set_detail(x->err, "The writer schema of \"%s\" is not the planned one.", m->path);
			return false;
		}
		if (x->schema == NULL)
		{
			x->schema = iceberg_strdup(schema, x->err);
			if (x->schema == NULL || !copy_meta(x, r) ||
				!partition_types(schema, x->lim.max_json_bytes, &x->types, &x->ntypes, x->err))
			{
				iceberg_manifest_close(r);
				return false;
			}
		}
		while ((rc = iceberg_manifest_next(r, &e, x->err)) == 1)
		{
			if (e->status == ICEBERG_STATUS_DELETED)
			{
				x->res->entries_dropped++;
				continue;
			}
			if (x->md->format_version >= 2 &&
				(e->sequence_number < 0 || e->file_sequence_number < 0))
			{
				iceberg_manifest_close(r);
				iceberg_set_error(x->err, ICEBERG_ERR_MALFORMED,
								  "manifest entry without a sequence number");
				iceberg_set_detail(x->err, "Entry \"%s\" of \"%s\" has no sequence number and cannot inherit one.",
								   e->file_path, m->path);
				return false;
			}
			if (e->raw_data_file_len > UINT32_MAX || e->partition_len > UINT32_MAX)
			{
				iceberg_manifest_close(r);
				return iceberg_set_error(x->err, ICEBERG_ERR_LIMIT, "manifest entry too large");
			}
			if (!hold_entry(x, e, grp->spec_id, grp->content))
			{
				iceberg_manifest_close(r);
				return false;
			}
		}
		iceberg_manifest_close(r);
		if (rc < 0)
			return false;
		x->res->manifests_replaced++;
	}
	if (!flush_chunk(x, grp->spec_id, grp->content) ||
		!out_finish(x, grp->spec_id, grp->content))
		return false;
	return true;
}

/* A new manifest-list record's values. */
static bool
write_new_record(Exec *x, IcebergAvroWriter *lw, const NewManifest *n)
{
	IcebergAvroWField f[14];
	IcebergAvroWValue *items = NULL;
	IcebergAvroWField *sf = NULL;
	int			nf = 0,
				i;
	bool		ok;

#define LONGF(id, nm, val) do { f[nf].field_id = (id); f[nf].name = (nm); \
		f[nf].v.kind = AVW_LONG; f[nf].v.l = (val); nf++; } while (0)
	memset(f, 0, sizeof(f));
	f[nf].field_id = 500;
	f[nf].name = "manifest_path";
	f[nf].v.kind = AVW_STRING;
	f[nf].v.p = n->path;
	f[nf].v.len = strlen(n->path);
	nf++;
	LONGF(501, "manifest_length", n->length);
	LONGF(502, "partition_spec_id", n->spec_id);
	LONGF(517, "content", n->content);
	LONGF(515, "sequence_number", x->seq);
	LONGF(516, "min_sequence_number", n->min_seq);
	LONGF(503, "added_snapshot_id", x->snapshot_id);
	LONGF(504, "added_files_count", 0);
	LONGF(505, "existing_files_count", n->files);
	LONGF(506, "deleted_files_count", 0);
	LONGF(512, "added_rows_count", 0);
	LONGF(513, "existing_rows_count", n->rows);
	LONGF(514, "deleted_rows_count", 0);
#undef LONGF
	f[nf].field_id = 507;
	f[nf].name = "partitions";
	if (n->nsumm >= 0)
	{
		items = calloc((size_t) n->nsumm + 1, sizeof(IcebergAvroWValue));
		sf = calloc((size_t) n->nsumm * 4 + 1, sizeof(IcebergAvroWField));
		if (items == NULL || sf == NULL)
		{
			free(items);
			free(sf);
			return oom(x->err);
		}
		for (i = 0; i < n->nsumm; i++)
		{
			IcebergAvroWField *s = &sf[i * 4];

			s[0].field_id = 509;
			s[0].name = "contains_null";
			s[0].v.kind = AVW_BOOL;
			s[0].v.l = n->contains_null[i];
			s[1].field_id = 518;
			s[1].name = "contains_nan";
			s[1].v.kind = AVW_BOOL;
			s[1].v.l = n->contains_nan[i];
			s[2].field_id = 510;
			s[2].name = "lower_bound";
			s[3].field_id = 511;
			s[3].name = "upper_bound";
			if (n->has_bound[i])
			{
				s[2].v.kind = AVW_BYTES;
				s[2].v.p = n->lower[i].data ? n->lower[i].data : "";
				s[2].v.len = n->lower[i].len;
				s[3].v.kind = AVW_BYTES;
				s[3].v.p = n->upper[i].data ? n->upper[i].data : "";
				s[3].v.len = n->upper[i].len;
			}
			items[i].kind = AVW_RECORD;
			items[i].fields = s;
			items[i].nfields = 4;
		}
		f[nf].v.kind = AVW_ARRAY;
		f[nf].v.items = items;
		f[nf].v.nitems = n->nsumm;
	}
	nf++;
	ok = iceberg_avro_writer_add(lw, f, nf, x->err);
	free(items);
	free(sf);
	return ok;
}

/* Set or add a header key in a metadata array (room for it reserved). */
static bool
kv_set(IcebergKeyValue *kv, int *n, const char *key, const char *value, bool add,
	   IcebergError *err)
{
	int			i;
	char	   *v;

	for (i = 0; i < *n; i++)
		if (strcmp(kv[i].key, key) == 0)
			break;
	if (i == *n && !add)
		return true;
	v = iceberg_strdup(value, err);
	if (v == NULL)
		return false;
	if (i == *n)
	{
		kv[i].key = iceberg_strdup(key, err);
		if (kv[i].key == NULL)
		{
			free(v);
			return false;
		}
		(*n)++;
	}
	else
		free(kv[i].value);
	kv[i].value = v;
	return true;
}

/* Write the new manifest list; its path into *path. */
static bool
write_list(Exec *x, char **path_out)
{
	const IcebergRewritePlan *p = x->plan;
	const IcebergSnapshot *snap = iceberg_metadata_current_snapshot(x->md);
	IcebergManifestListReader *lr = NULL;
	IcebergAvroWriter *lw = NULL;
	const IcebergManifestFile *mf;
	const IcebergKeyValue *hkv;
	IcebergKeyValue *meta = NULL;
	int			nmeta = 0,
				nh,
				i,
				rc;
	char		num[32];
	char		path[2200];
	const uint8_t *data;
	size_t		len;
	bool		ok = false;

	if (!iceberg_manifest_list_open(x->io, x->md, snap, &lr, x->err))
		return false;
	nh = iceberg_manifest_list_header_all(lr, &hkv);
	meta = calloc((size_t) nh + 4, sizeof(IcebergKeyValue));
	if (meta == NULL)
	{
		oom(x->err);
		goto done;
	}
	for (i = 0; i < nh; i++)
		if (!kv_set(meta, &nmeta, hkv[i].key, hkv[i].value, true, x->err))
			goto done;
	snprintf(num, sizeof(num), "%" PRId64, x->snapshot_id);
	if (!kv_set(meta, &nmeta, "snapshot-id", num, true, x->err))
		goto done;
	snprintf(num, sizeof(num), "%" PRId64, p->base_snapshot_id);
	if (!kv_set(meta, &nmeta, "parent-snapshot-id", num, true, x->err))
		goto done;
	snprintf(num, sizeof(num), "%" PRId64, x->seq);
	if (!kv_set(meta, &nmeta, "sequence-number", num, x->md->format_version >= 2, x->err))
		goto done;
	if (iceberg_manifest_list_header(lr, "avro.schema") == NULL)
	{
		iceberg_set_error(x->err, ICEBERG_ERR_MALFORMED, "manifest list without avro.schema");
		goto done;
	}
	if (!iceberg_avro_writer_create(iceberg_manifest_list_header(lr, "avro.schema"),
									meta, nmeta, x->codec, x->level,
									x->lim.max_json_bytes, &lw, x->err))
		goto done;
	for (i = 0; i < x->nnews; i++)
		if (!write_new_record(x, lw, &x->news[i]))
			goto done;
	i = 0;
	while ((rc = iceberg_manifest_list_next(lr, &mf, x->err)) == 1)
	{
		if (i >= p->nmanifests || strcmp(mf->manifest_path, p->manifests[i].path) != 0)
		{
			iceberg_set_error(x->err, ICEBERG_ERR_CONFLICT,
							  "manifest list changed since the rewrite was planned");
			iceberg_set_detail(x->err, "Manifest %d is \"%s\".", i, mf->manifest_path);
			goto done;
		}
		if (p->manifests[i].group < 0 &&
			!iceberg_avro_writer_add_raw(lw, mf->raw, mf->raw_len, x->err))
			goto done;
		i++;
	}
	if (rc < 0)
		goto done;
	if (i != p->nmanifests)
	{
		iceberg_set_error(x->err, ICEBERG_ERR_CONFLICT,
						  "manifest list changed since the rewrite was planned");
		goto done;
	}
	if (!iceberg_avro_writer_finish(lw, &data, &len, x->err))
		goto done;
	snprintf(path, sizeof(path), "%s/snap-%" PRId64 "-1-%s.avro", x->dir, x->snapshot_id, x->uuid);
	*path_out = iceberg_strdup(path, x->err);
	if (*path_out == NULL)
		goto done;
	ok = write_object(x, path, data, len);
done:
	iceberg_avro_writer_free(lw);
	iceberg_manifest_list_close(lr);
	free_kv(meta, nmeta);
	return ok;
}

/* The snapshot summary. */
static bool
fill_summary(Exec *x, const IcebergSnapshot *parent)
{
	IcebergNewSnapshot *s = &x->res->snapshot;
	int			ntotal = 0,
				i;
	char		num[32];
	int64_t		vals[4];
	static const char *const keys[4] = {"manifests-created", "manifests-kept",
	"manifests-replaced", "entries-processed"};

	for (i = 0; i < parent->nsummary; i++)
		if (strncmp(parent->summary[i].key, "total-", 6) == 0)
			ntotal++;
	s->summary = calloc((size_t) ntotal + 4, sizeof(IcebergKeyValue));
	if (s->summary == NULL)
		return oom(x->err);
	vals[0] = x->res->manifests_added;
	vals[1] = x->plan->nkept;
	vals[2] = x->res->manifests_replaced;
	vals[3] = x->res->entries_rewritten;
	for (i = 0; i < 4; i++)
	{
		snprintf(num, sizeof(num), "%" PRId64, vals[i]);
		if (!kv_set(s->summary, &s->nsummary, keys[i], num, true, x->err))
			return false;
	}
	for (i = 0; i < parent->nsummary; i++)
		if (strncmp(parent->summary[i].key, "total-", 6) == 0 &&
			!kv_set(s->summary, &s->nsummary, parent->summary[i].key,
					parent->summary[i].value, true, x->err))
			return false;
	return true;
}

/*
 * The Avro codec of the files written, from the table properties that
 * Iceberg's writers honour: write.avro.compression-codec "uncompressed"
 * gives null, anything else deflate ("gzip", the default; snappy and zstd
 * are not written here); write.avro.compression-level 0-9, else zlib's
 * default.
 */
static void
codec_from_properties(const IcebergTableMetadata *md, int *codec, int *level)
{
	const char *c = iceberg_metadata_property(md, "write.avro.compression-codec");
	const char *l = iceberg_metadata_property(md, "write.avro.compression-level");

	*codec = (c != NULL && strcmp(c, "uncompressed") == 0)
		? ICEBERG_AVRO_WRITE_NULL : ICEBERG_AVRO_WRITE_DEFLATE;
	*level = (l != NULL && l[0] >= '0' && l[0] <= '9' && l[1] == '\0') ? l[0] - '0' : -1;
}

/* A random v4 UUID in text form. */
static bool
make_uuid(char *out, IcebergError *err)
{
	uint8_t		b[16];
	static const char hex[] = "0123456789abcdef";
	int			i,
				k = 0;

	if (!iceberg_random_bytes(b, sizeof(b), err))
		return false;
	b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
	for (i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[b[i] >> 4];
		out[k++] = hex[b[i] & 15];
	}
	out[k] = '\0';
	return true;
}

/* See rewrite.h. */
bool
iceberg_rewrite_execute(const IcebergFileIO *io, const IcebergWriter *w,
						const IcebergTableMetadata *md,
						const IcebergRewritePlan *plan, int64_t new_snapshot_id,
						IcebergRewriteResult *res, IcebergError *err)
{
	Exec		x;
	const IcebergSnapshot *snap;
	char	   *list_path = NULL;
	size_t		dl;
	int			g;
	bool		ok = false;

	iceberg_error_clear(err);
	if (res == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT, "no result given");
	memset(res, 0, sizeof(*res));
	res->snapshot.parent_snapshot_id = -1;
	res->snapshot.schema_id = -1;
	if (io == NULL || w == NULL || w->write == NULL || plan == NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "rewrite needs a file io, a writer and a plan");
	if (!check_table(md, &snap, err))
		return false;
	if (md->current_snapshot_id != plan->base_snapshot_id)
	{
		iceberg_set_error(err, ICEBERG_ERR_CONFLICT,
						  "the table's current snapshot is not the one the rewrite was planned on");
		iceberg_set_detail(err, "Planned on snapshot %" PRId64 ", current is %" PRId64 ".",
						   plan->base_snapshot_id, md->current_snapshot_id);
		return false;
	}
	if (snap == NULL || plan->nreplaced == 0 || plan->ngroups == 0)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "the rewrite plan replaces no manifest");
	if (new_snapshot_id <= 0 || iceberg_metadata_snapshot(md, new_snapshot_id) != NULL)
		return iceberg_set_error(err, ICEBERG_ERR_INVALID_ARGUMENT,
								 "invalid new snapshot id %" PRId64, new_snapshot_id);
	if (md->location == NULL || md->location[0] == '\0')
		return iceberg_set_error(err, ICEBERG_ERR_MALFORMED, "table metadata without a location");

	memset(&x, 0, sizeof(x));
	x.io = io;
	x.wr = w;
	x.md = md;
	x.plan = plan;
	x.res = res;
	x.err = err;
	x.ntypes = -1;
	iceberg_effective_limits(io->limits, &x.lim);
	x.snapshot_id = new_snapshot_id;
	x.seq = md->format_version >= 2 ? md->last_sequence_number + 1 : 0;
	codec_from_properties(md, &x.codec, &x.level);
	dl = strlen(md->location);
	while (dl > 0 && md->location[dl - 1] == '/')
		dl--;
	if (dl + 20 > sizeof(x.dir))
		return iceberg_set_error(err, ICEBERG_ERR_LIMIT, "table location too long");
	snprintf(x.dir, sizeof(x.dir), "%.*s/metadata", (int) dl, md->location);
	if (!make_uuid(x.uuid, err))
		return false;

	for (g = 0; g < plan->ngroups; g++)
	{
		if (!process_group(&x, g))
			goto done;
		group_reset(&x);
	}
	if (!write_list(&x, &list_path))
		goto done;

	res->snapshot.snapshot_id = new_snapshot_id;
	res->snapshot.parent_snapshot_id = plan->base_snapshot_id;
	res->snapshot.sequence_number = x.seq;
	res->snapshot.timestamp_ms = plan->now_ms > 0 ? plan->now_ms : now_ms();
	res->snapshot.manifest_list = list_path;
	list_path = NULL;
	res->snapshot.schema_id = md->current_schema_id;
	res->snapshot.operation = iceberg_strdup("replace", err);
	if (res->snapshot.operation == NULL || !fill_summary(&x, snap))
		goto done;
	ok = true;
done:
	free(list_path);
	group_reset(&x);
	for (g = 0; g < x.nnews; g++)
		free_new(&x.news[g]);
	free(x.news);
	iceberg_buf_free(&x.arena);
	iceberg_buf_free(&x.tmp);
	free(x.idx);
	return ok;
}

void
iceberg_rewrite_result_free(IcebergRewriteResult *res)
{
	int			i;

	if (res == NULL)
		return;
	for (i = 0; i < res->nwritten; i++)
		free(res->written[i]);
	free(res->written);
	free(res->snapshot.manifest_list);
	free(res->snapshot.operation);
	free_kv(res->snapshot.summary, res->snapshot.nsummary);
	memset(res, 0, sizeof(*res));
}

/* See rewrite.h. */
int64_t
iceberg_new_snapshot_id(const IcebergTableMetadata *md)
{
	int			tries;

	for (tries = 0; tries < 100; tries++)
	{
		uint64_t	v;
		int64_t		id;

		if (!iceberg_random_bytes(&v, sizeof(v), NULL))
			return 0;
		id = (int64_t) (v & INT64_MAX);
		if (id > 0 && (md == NULL || iceberg_metadata_snapshot(md, id) == NULL))
			return id;
	}
	return 0;
}
