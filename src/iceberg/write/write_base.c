/*-------------------------------------------------------------------------
 *
 * write_base.c
 *	  What the writers of src/iceberg share: partition values and
 *	  summaries, new manifest-list records, header metadata, codecs,
 *	  UUIDs, and the steps of writing a new snapshot: its target, entry
 *	  fields, manifest list and record (write_internal.h says what each is
 *	  for).
 *
 * Rules: plain C, errors as TmsError values, every allocation freed
 * on every path.
 *
 * src/iceberg/write/write_base.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/write/write_internal.h"
#include "io/io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARTITION_FIELDS	1024

static bool
oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

/* ---------------------------------------------------------------------
 * Partition values and summaries
 * ---------------------------------------------------------------------
 */


/* Strip a ["null", T] union to T; NULL for other unions. */
json_t *
iceberg_schema_strip_null(json_t *t)
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
		return iceberg_schema_strip_null(json_object_get(t, "type"));
	return t;
}

/* The record field with this id (or name) of a record schema. */
json_t *
iceberg_schema_field_type(json_t *rec, int32_t id, const char *name)
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

static IcebergPartType
part_type(json_t *t)
{
	const char *type;
	const char *logical;

	t = iceberg_schema_strip_null(t);
	if (t == NULL)
		return ICEBERG_PT_UNSUPPORTED;
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
		return ICEBERG_PT_UNSUPPORTED;
	if (type == NULL)
		return ICEBERG_PT_UNSUPPORTED;
	if (logical != NULL && strcmp(logical, "decimal") == 0 &&
		(strcmp(type, "fixed") == 0 || strcmp(type, "bytes") == 0))
	{
		json_t	   *sz = json_object_get(t, "size");

		if (strcmp(type, "fixed") == 0 &&
			(!json_is_integer(sz) || json_integer_value(sz) > ICEBERG_DEC_BYTES))
			return ICEBERG_PT_UNSUPPORTED;
		return ICEBERG_PT_DECIMAL;
	}
	if (strcmp(type, "boolean") == 0)
		return ICEBERG_PT_BOOL;
	if (strcmp(type, "int") == 0)
		return ICEBERG_PT_INT;	/* int, date */
	if (strcmp(type, "long") == 0)
		return ICEBERG_PT_LONG; /* long, time, timestamp(tz) */
	if (strcmp(type, "float") == 0)
		return ICEBERG_PT_FLOAT;
	if (strcmp(type, "double") == 0)
		return ICEBERG_PT_DOUBLE;
	if (strcmp(type, "string") == 0)
		return logical != NULL && strcmp(logical, "uuid") == 0 ? ICEBERG_PT_UNSUPPORTED : ICEBERG_PT_STRING;
	if (strcmp(type, "bytes") == 0 || strcmp(type, "fixed") == 0)
		return ICEBERG_PT_BYTES;
	return ICEBERG_PT_UNSUPPORTED;
}

/*
 * The partition field types of a manifest writer schema.  *ntypes -1 when
 * some field is unsupported (summaries are then written null).
 */
bool
iceberg_partition_types(const char *schema_text, int64_t max_json, IcebergPartType **types,
						int *ntypes, TmsError *err)
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
	df = iceberg_schema_strip_null(iceberg_schema_field_type(s, 2, "data_file"));
	part = df ? iceberg_schema_strip_null(iceberg_schema_field_type(df, 102, "partition")) : NULL;
	fields = part ? json_object_get(part, "fields") : NULL;
	if (!json_is_array(fields) || json_array_size(fields) > MAX_PARTITION_FIELDS)
	{
		json_decref(s);
		return true;
	}
	n = json_array_size(fields);
	*types = io_calloc(n + 1, sizeof(IcebergPartType));
	if (*types == NULL)
	{
		json_decref(s);
		return oom(err);
	}
	*ntypes = (int) n;
	for (i = 0; i < n; i++)
	{
		(*types)[i] = part_type(json_object_get(json_array_get(fields, i), "type"));
		if ((*types)[i] == ICEBERG_PT_UNSUPPORTED)
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
bool
iceberg_partition_next(const char **pp, const char *end, const char **tok, size_t *len)
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

/* Decode a JSON string token (quotes included) into b. */
bool
iceberg_json_unescape(const char *t, size_t len, IcebergBuf *b)
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
					int			h = io_hex_value((unsigned char) t[i + k]);

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
bool
iceberg_json_unhex(const char *t, size_t len, IcebergBuf *b)
{
	size_t		i;

	b->len = 0;
	if (len < 4 || t[0] != '"' || t[1] != '0' || t[2] != 'x' || (len - 4) % 2 != 0)
		return false;
	if (!iceberg_buf_reserve(b, len / 2))
		return false;
	for (i = 3; i + 1 < len - 1; i += 2)
	{
		int			h = io_hex_value((unsigned char) t[i]),
					l = io_hex_value((unsigned char) t[i + 1]);
		uint8_t		v;

		if (h < 0 || l < 0)
			return false;
		v = (uint8_t) (h * 16 + l);
		if (!iceberg_buf_append(b, &v, 1))
			return false;
	}
	return true;
}

/* Sign-extend a big-endian two's complement value to ICEBERG_DEC_BYTES. */
static bool
dec_normalize(const IcebergBuf *in, uint8_t *out)
{
	uint8_t		fill;

	if (in->len > ICEBERG_DEC_BYTES)
		return false;
	fill = (in->len > 0 && (in->data[0] & 0x80)) ? 0xff : 0x00;
	memset(out, fill, ICEBERG_DEC_BYTES - in->len);
	memcpy(out + ICEBERG_DEC_BYTES - in->len, in->data, in->len);
	return true;
}

static int
dec_cmp(const uint8_t *a, const uint8_t *b)
{
	if ((int8_t) a[0] != (int8_t) b[0])
		return (int8_t) a[0] < (int8_t) b[0] ? -1 : 1;
	return memcmp(a + 1, b + 1, ICEBERG_DEC_BYTES - 1);
}

int
iceberg_bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
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
bool
iceberg_part_sum_add(IcebergPartSum *fs, const IcebergPartType *types, int ntypes, const char *text,
					 size_t len, IcebergBuf *tmp, bool *bad)
{
	const char *p = text;
	const char *end = text + len;
	const char *tok;
	size_t		tl;
	int			i;

	for (i = 0; i < ntypes; i++)
	{
		IcebergPartSum *f = &fs[i];
		char		num[64];

		if (!iceberg_partition_next(&p, end, &tok, &tl))
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
			case ICEBERG_PT_BOOL:
			case ICEBERG_PT_INT:
			case ICEBERG_PT_LONG:
				{
					int64_t		v;
					char	   *e;

					if (types[i] == ICEBERG_PT_BOOL)
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
			case ICEBERG_PT_FLOAT:
			case ICEBERG_PT_DOUBLE:
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
					if (types[i] == ICEBERG_PT_FLOAT)
						v = (double) (float) v;
					if (!f->has_bound || dbl_less(v, f->dlo))
						f->dlo = v;
					if (!f->has_bound || dbl_less(f->dhi, v))
						f->dhi = v;
					f->has_bound = true;
					break;
				}
			case ICEBERG_PT_STRING:
			case ICEBERG_PT_BYTES:
				if (tl < 2 || tok[0] != '"')
				{
					*bad = true;
					return true;
				}
				if (!(types[i] == ICEBERG_PT_STRING ? iceberg_json_unescape(tok, tl, tmp) : iceberg_json_unhex(tok, tl, tmp)))
				{
					if (tmp->cap < tl)
						return false;	/* allocation failed */
					*bad = true;
					return true;
				}
				if (!f->has_bound ||
					iceberg_bytes_cmp(tmp->data, tmp->len, f->blo.data, f->blo.len) < 0)
					if (!buf_set(&f->blo, tmp->data, tmp->len))
						return false;
				if (!f->has_bound ||
					iceberg_bytes_cmp(tmp->data, tmp->len, f->bhi.data, f->bhi.len) > 0)
					if (!buf_set(&f->bhi, tmp->data, tmp->len))
						return false;
				f->has_bound = true;
				break;
			case ICEBERG_PT_DECIMAL:
				{
					uint8_t		v[ICEBERG_DEC_BYTES];

					if (!iceberg_json_unhex(tok, tl, tmp) || !dec_normalize(tmp, v))
					{
						*bad = true;
						return true;
					}
					if (!f->has_bound || dec_cmp(v, (const uint8_t *) f->blo.data) < 0)
						if (!buf_set(&f->blo, v, ICEBERG_DEC_BYTES))
							return false;
					if (!f->has_bound || dec_cmp(v, (const uint8_t *) f->bhi.data) > 0)
						if (!buf_set(&f->bhi, v, ICEBERG_DEC_BYTES))
							return false;
					f->has_bound = true;
					break;
				}
			case ICEBERG_PT_UNSUPPORTED:
				*bad = true;
				return true;
		}
	}
	if (iceberg_partition_next(&p, end, &tok, &tl))
		*bad = true;			/* more values than fields */
	return true;
}

/* Iceberg single-value serialization of a bound into out. */
bool
iceberg_part_bound(IcebergPartType t, const IcebergPartSum *f, bool upper, IcebergBuf *out)
{
	uint8_t		b[8];
	int64_t		l = upper ? f->lhi : f->llo;
	double		d = upper ? f->dhi : f->dlo;
	const IcebergBuf *bb = upper ? &f->bhi : &f->blo;
	int			i;

	out->len = 0;
	switch (t)
	{
		case ICEBERG_PT_BOOL:
			b[0] = l ? 1 : 0;
			return iceberg_buf_append(out, b, 1);
		case ICEBERG_PT_INT:
		case ICEBERG_PT_LONG:
			for (i = 0; i < 8; i++)
				b[i] = (uint8_t) ((uint64_t) l >> (8 * i));
			return iceberg_buf_append(out, b, t == ICEBERG_PT_INT ? 4 : 8);
		case ICEBERG_PT_FLOAT:
			{
				float		fv = (float) d;

				return iceberg_buf_append(out, &fv, 4); /* little-endian host */
			}
		case ICEBERG_PT_DOUBLE:
			return iceberg_buf_append(out, &d, 8);
		case ICEBERG_PT_STRING:
		case ICEBERG_PT_BYTES:
			return iceberg_buf_append(out, bb->data ? bb->data : "", bb->len);
		case ICEBERG_PT_DECIMAL:
			{
				const uint8_t *v = (const uint8_t *) bb->data;
				int			k = 0;

				/* minimal two's complement: drop redundant sign bytes */
				while (k < ICEBERG_DEC_BYTES - 1 &&
					   ((v[k] == 0x00 && !(v[k + 1] & 0x80)) ||
						(v[k] == 0xff && (v[k + 1] & 0x80))))
					k++;
				return iceberg_buf_append(out, v + k, (size_t) (ICEBERG_DEC_BYTES - k));
			}
		case ICEBERG_PT_UNSUPPORTED:
			break;
	}
	return false;
}

void
iceberg_part_sums_free(IcebergPartSum *s, int n)
{
	int			i;

	if (s == NULL)
		return;
	for (i = 0; i < n; i++)
	{
		iceberg_buf_free(&s[i].blo);
		iceberg_buf_free(&s[i].bhi);
	}
	io_free(s);
}

/* ---------------------------------------------------------------------
 * New manifest-list records
 * ---------------------------------------------------------------------
 */

bool
iceberg_new_manifest_summaries(IcebergNewManifest *n, const IcebergPartType *types,
							   int ntypes, const IcebergPartSum *sums, bool bad,
							   TmsError *err)
{
	int			i;

	n->nsumm = -1;
	if (bad || ntypes < 0)
		return true;
	n->contains_null = io_calloc((size_t) ntypes + 1, sizeof(bool));
	n->contains_nan = io_calloc((size_t) ntypes + 1, sizeof(bool));
	n->has_bound = io_calloc((size_t) ntypes + 1, sizeof(bool));
	n->lower = io_calloc((size_t) ntypes + 1, sizeof(IcebergBuf));
	n->upper = io_calloc((size_t) ntypes + 1, sizeof(IcebergBuf));
	if (!n->contains_null || !n->contains_nan || !n->has_bound || !n->lower || !n->upper)
		return oom(err);
	n->nsumm = ntypes;
	for (i = 0; i < ntypes; i++)
	{
		n->contains_null[i] = sums[i].has_null;
		n->contains_nan[i] = sums[i].has_nan;
		n->has_bound[i] = sums[i].has_bound;
		if (sums[i].has_bound &&
			(!iceberg_part_bound(types[i], &sums[i], false, &n->lower[i]) ||
			 !iceberg_part_bound(types[i], &sums[i], true, &n->upper[i])))
			return oom(err);
	}
	return true;
}

void
iceberg_new_manifest_free(IcebergNewManifest *n)
{
	int			i;

	if (n == NULL)
		return;
	io_free(n->path);
	for (i = 0; i < n->nsumm; i++)
	{
		iceberg_buf_free(&n->lower[i]);
		iceberg_buf_free(&n->upper[i]);
	}
	io_free(n->contains_null);
	io_free(n->contains_nan);
	io_free(n->lower);
	io_free(n->upper);
	io_free(n->has_bound);
	memset(n, 0, sizeof(*n));
	n->nsumm = -1;
}

bool
iceberg_manifest_list_add_new(IcebergAvroWriter *lw, const IcebergNewManifest *n,
							  int64_t seq, int64_t snapshot_id, TmsError *err)
{
	IcebergAvroWField f[15];
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
	LONGF(515, "sequence_number", seq);
	LONGF(516, "min_sequence_number", n->min_seq);
	LONGF(503, "added_snapshot_id", snapshot_id);
	LONGF(504, "added_files_count", n->added_files);
	LONGF(505, "existing_files_count", n->existing_files);
	LONGF(506, "deleted_files_count", n->deleted_files);
	LONGF(512, "added_rows_count", n->added_rows);
	LONGF(513, "existing_rows_count", n->existing_rows);
	LONGF(514, "deleted_rows_count", n->deleted_rows);
	if (n->has_first_row_id)
		LONGF(520, "first_row_id", n->first_row_id);
#undef LONGF
	f[nf].field_id = 507;
	f[nf].name = "partitions";
	if (n->nsumm >= 0)
	{
		items = io_calloc((size_t) n->nsumm + 1, sizeof(IcebergAvroWValue));
		sf = io_calloc((size_t) n->nsumm * 4 + 1, sizeof(IcebergAvroWField));
		if (items == NULL || sf == NULL)
		{
			io_free(items);
			io_free(sf);
			return oom(err);
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
	ok = iceberg_avro_writer_add(lw, f, nf, err);
	io_free(items);
	io_free(sf);
	return ok;
}

/* ---------------------------------------------------------------------
 * Header metadata, codecs, UUIDs, the clock
 * ---------------------------------------------------------------------
 */

void
iceberg_kv_free(IcebergKeyValue *kv, int n)
{
	int			i;

	if (kv == NULL)
		return;
	for (i = 0; i < n; i++)
	{
		io_free(kv[i].key);
		io_free(kv[i].value);
	}
	io_free(kv);
}

bool
iceberg_kv_set(IcebergKeyValue *kv, int *n, const char *key, const char *value, bool add,
			   TmsError *err)
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
			io_free(v);
			return false;
		}
		(*n)++;
	}
	else
		io_free(kv[i].value);
	kv[i].value = v;
	return true;
}

void
iceberg_avro_codec_from_properties(const IcebergTableMetadata *md, int *codec, int *level)
{
	const char *c = iceberg_metadata_property(md, "write.avro.compression-codec");
	const char *l = iceberg_metadata_property(md, "write.avro.compression-level");

	*codec = (c != NULL && strcmp(c, "uncompressed") == 0)
		? ICEBERG_AVRO_WRITE_NULL : ICEBERG_AVRO_WRITE_DEFLATE;
	*level = (l != NULL && l[0] >= '0' && l[0] <= '9' && l[1] == '\0') ? l[0] - '0' : -1;
}

bool
iceberg_write_object(const IcebergWriter *w, char ***written, int *nwritten,
					 const char *path, const void *data, size_t len, TmsError *err)
{
	char	  **nw = io_realloc(*written, sizeof(char *) * (size_t) (*nwritten + 1));
	TmsError	ioerr;

	if (nw == NULL)
		return oom(err);
	*written = nw;
	nw[*nwritten] = iceberg_strdup(path, err);
	if (nw[*nwritten] == NULL)
		return false;
	(*nwritten)++;
	memset(&ioerr, 0, sizeof(ioerr));
	if (w->write(w->arg, path, data, len, &ioerr) != 0)
	{
		tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
					   "could not write \"%.200s\"", path);
		return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Writing a new snapshot
 * ---------------------------------------------------------------------
 */

bool
iceberg_write_check_table(const IcebergTableMetadata *md, const char *what,
						  const char *v3_detail, const char *inline_hint,
						  const IcebergSnapshot **snap, TmsError *err)
{
	*snap = NULL;
	if (md == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no table metadata given");
		return false;
	}
	if (md->format_version > 3 || (md->format_version == 3 && v3_detail != NULL))
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "%s does not support table format version %d",
					  what, md->format_version);
		tms_error_detail(err, "%s", v3_detail != NULL ? v3_detail
						 : "Only format versions 1 to 3 are known.");
		return false;
	}
	if (md->current_snapshot_id < 0)
		return true;
	*snap = iceberg_metadata_current_snapshot(md);
	if (*snap == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "current snapshot %" PRId64 " is not in the table metadata",
					  md->current_snapshot_id);
		return false;
	}
	if ((*snap)->manifest_list == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "%s does not support snapshots without a manifest list", what);
		tms_error_detail(err, "Snapshot %" PRId64 " lists its manifests inline (v1 \"manifests\")%s.",
						 (*snap)->snapshot_id, inline_hint);
		return false;
	}
	return true;
}

bool
iceberg_write_target_init(IcebergWriteTarget *t, const IcebergFileIO *io,
						  const IcebergTableMetadata *md, int64_t new_snapshot_id,
						  TmsError *err)
{
	size_t		dl;

	memset(t, 0, sizeof(*t));
	iceberg_effective_limits(io->limits, &t->lim);
	t->snapshot_id = new_snapshot_id;
	t->seq = md->format_version >= 2 ? md->last_sequence_number + 1 : 0;
	/* https://iceberg.apache.org/spec/#snapshot-row-ids */
	t->first_row_id = md->format_version >= 3 ? md->next_row_id : -1;
	if (md->format_version >= 3 && t->first_row_id < 0)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "format v3 table metadata without next-row-id");
		return false;
	}
	iceberg_avro_codec_from_properties(md, &t->codec, &t->level);
	dl = strlen(md->location);
	while (dl > 0 && md->location[dl - 1] == '/')
		dl--;
	if (dl + 20 > sizeof(t->dir))
	{
		tms_error_set(err, ICEBERG_ERR_LIMIT, "table location too long");
		return false;
	}
	snprintf(t->dir, sizeof(t->dir), "%.*s/metadata", (int) dl, md->location);
	return iceberg_make_uuid(t->uuid, err);
}

static void
long_field(IcebergAvroWField *f, int32_t id, const char *name, int64_t v)
{
	memset(f, 0, sizeof(*f));
	f->field_id = id;
	f->name = name;
	f->v.kind = AVW_LONG;
	f->v.l = v;
}

int
iceberg_manifest_entry_fields(IcebergAvroWField *f, int status, int64_t snapshot_id,
							  int nseq, int64_t seq, int64_t file_seq,
							  const IcebergAvroWValue *data_file)
{
	int			n = 0;

	long_field(&f[n++], 0, "status", status);
	long_field(&f[n++], 1, "snapshot_id", snapshot_id);
	if (nseq >= 1)
		long_field(&f[n++], 3, "sequence_number", seq);
	if (nseq >= 2)
		long_field(&f[n++], 4, "file_sequence_number", file_seq);
	memset(&f[n], 0, sizeof(f[n]));
	f[n].field_id = 2;
	f[n].name = "data_file";
	f[n].v = *data_file;
	return n + 1;
}

bool
iceberg_manifest_list_begin(const IcebergFileIO *io, const IcebergTableMetadata *md,
							const IcebergSnapshot *snap, int64_t parent_snapshot_id,
							const IcebergWriteTarget *t, IcebergManifestListReader **lr,
							IcebergAvroWriter **lw, TmsError *err)
{
	const IcebergKeyValue *hkv;
	IcebergKeyValue *meta = NULL;
	int			nmeta = 0,
				nh,
				i;
	char		num[32];
	bool		ok = false;

	*lr = NULL;
	*lw = NULL;
	if (!iceberg_manifest_list_open(io, md, snap, lr, err))
		return false;
	nh = iceberg_manifest_list_header_all(*lr, &hkv);
	meta = io_calloc((size_t) nh + 5, sizeof(IcebergKeyValue));
	if (meta == NULL)
	{
		oom(err);
		goto done;
	}
	for (i = 0; i < nh; i++)
		if (!iceberg_kv_set(meta, &nmeta, hkv[i].key, hkv[i].value, true, err))
			goto done;
	snprintf(num, sizeof(num), "%" PRId64, t->snapshot_id);
	if (!iceberg_kv_set(meta, &nmeta, "snapshot-id", num, true, err))
		goto done;
	snprintf(num, sizeof(num), "%" PRId64, parent_snapshot_id);
	if (!iceberg_kv_set(meta, &nmeta, "parent-snapshot-id", num, true, err))
		goto done;
	snprintf(num, sizeof(num), "%" PRId64, t->seq);
	if (!iceberg_kv_set(meta, &nmeta, "sequence-number", num, md->format_version >= 2, err))
		goto done;
	snprintf(num, sizeof(num), "%" PRId64, t->first_row_id);
	if (t->first_row_id >= 0 &&
		!iceberg_kv_set(meta, &nmeta, "first-row-id", num, true, err))
		goto done;
	if (iceberg_manifest_list_header(*lr, "avro.schema") == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "manifest list without avro.schema");
		goto done;
	}
	ok = iceberg_avro_writer_create(iceberg_manifest_list_header(*lr, "avro.schema"),
									meta, nmeta, t->codec, t->level,
									t->lim.max_json_bytes, lw, err);
done:
	iceberg_kv_free(meta, nmeta);
	if (!ok)
	{
		iceberg_avro_writer_free(*lw);
		*lw = NULL;
		iceberg_manifest_list_close(*lr);
		*lr = NULL;
	}
	return ok;
}

bool
iceberg_manifest_list_end(const IcebergWriteTarget *t, IcebergAvroWriter *lw,
						  const IcebergWriter *w, char ***written, int *nwritten,
						  char **path_out, TmsError *err)
{
	char		path[2300];
	const uint8_t *data;
	size_t		len;

	if (!iceberg_avro_writer_finish(lw, &data, &len, err))
		return false;
	snprintf(path, sizeof(path), "%s/snap-%" PRId64 "-1-%s.avro", t->dir, t->snapshot_id, t->uuid);
	*path_out = iceberg_strdup(path, err);
	if (*path_out == NULL)
		return false;
	return iceberg_write_object(w, written, nwritten, path, data, len, err);
}

bool
iceberg_new_snapshot_replace(IcebergNewSnapshot *s, const IcebergWriteTarget *t,
							 int64_t parent_snapshot_id, int64_t timestamp_ms,
							 int32_t schema_id, char **list_path, TmsError *err)
{
	s->snapshot_id = t->snapshot_id;
	s->parent_snapshot_id = parent_snapshot_id;
	s->sequence_number = t->seq;
	s->timestamp_ms = timestamp_ms;
	s->manifest_list = *list_path;
	*list_path = NULL;
	s->schema_id = schema_id;
	s->operation = iceberg_strdup("replace", err);
	return s->operation != NULL;
}

void
iceberg_write_result_free(char **written, int nwritten, IcebergNewSnapshot *snapshot)
{
	int			i;

	for (i = 0; i < nwritten; i++)
		io_free(written[i]);
	io_free(written);
	io_free(snapshot->manifest_list);
	io_free(snapshot->operation);
	iceberg_kv_free(snapshot->summary, snapshot->nsummary);
}

bool
iceberg_make_uuid(char *out, TmsError *err)
{
	uint8_t		b[16];

	if (!iceberg_random_bytes(b, sizeof(b), err))
		return false;
	b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
	io_format_uuid(b, out);
	return true;
}

int64_t
iceberg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
