/*-------------------------------------------------------------------------
 *
 * compact_transform.c
 *	  Iceberg's partition transforms (https://iceberg.apache.org/spec/#partition-transforms)
 *	  for the compaction's output spec (output-spec-id): identity, bucket
 *	  (Murmur3 x86 32-bit of the single-value hashing of Appendix B,
 *	  https://iceberg.apache.org/spec/#appendix-b-32-bit-hash-requirements),
 *	  truncate, year, month, day and hour; the projection of a file's
 *	  partition in an older spec into the output spec; and the Avro type of
 *	  each output partition field (the partition record of a manifest of a
 *	  spec no manifest of the table has yet).
 *
 * Every source type the spec allows: bucket of int, long, date, time,
 * timestamp(tz) and timestamp(tz)_ns (hashLong of the value, of its
 * microseconds for _ns), string (UTF-8), uuid (its 16 big-endian bytes),
 * fixed, binary and decimal (the unscaled value's fewest two's complement
 * big-endian bytes, whatever the width of the manifest's fixed); truncate
 * of int, long, decimal (on the unscaled value, written back at the
 * width of the precision), string (code points) and binary (bytes).
 *
 * A file's rows are not read here: a partition value of the output spec
 * is computed from the file's partition in its own spec, where that value
 * fixes it (the source column's identity value, or a coarser transform of
 * a finer one on the same source: day from hour, month from day,
 * truncate[20] of a number from truncate[10] (W a multiple of W'),
 * truncate[3] of a string from truncate[5], bucket[4] from bucket[16] (N
 * dividing N'), the same transform).  A file whose partition does not fix
 * every output field (an unpartitioned file, truncate[5] from
 * truncate[10], bucket[3] from bucket[16]) holds rows of several output
 * partitions; iceberg_partition_project() says so and the plan keeps the
 * file in its own spec, or refuses it when output-spec-id was given.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path.  Values in partition texts are in the
 * canonical form of the manifest reader (iceberg.h: numbers, quoted
 * strings, "0x..." hex for binary and decimals, null).
 *
 * src/iceberg/compact/compact_transform.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/write/write_internal.h"
#include "io/io.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USECS_PER_HOUR	INT64_C(3600000000)
#define USECS_PER_DAY	(USECS_PER_HOUR * 24)

/* ---------------------------------------------------------------------
 * The transforms
 * ---------------------------------------------------------------------
 */

static uint32_t
rotl32(uint32_t x, int r)
{
	return (x << r) | (x >> (32 - r));
}

static uint32_t
mix_k1(uint32_t k1)
{
	k1 *= 0xcc9e2d51u;
	k1 = rotl32(k1, 15);
	return k1 * 0x1b873593u;
}

uint32_t
iceberg_murmur3_32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t	h1 = 0;			/* seed 0, as Iceberg's Guava murmur3_32 */
	uint32_t	k1 = 0;
	size_t		i;
	size_t		nblocks = len / 4;

	for (i = 0; i < nblocks; i++)
	{
		uint32_t	k = (uint32_t) p[i * 4] | ((uint32_t) p[i * 4 + 1] << 8) |
		((uint32_t) p[i * 4 + 2] << 16) | ((uint32_t) p[i * 4 + 3] << 24);

		h1 ^= mix_k1(k);
		h1 = rotl32(h1, 13);
		h1 = h1 * 5 + 0xe6546b64u;
	}
	switch (len & 3)
	{
		case 3:
			k1 ^= (uint32_t) p[nblocks * 4 + 2] << 16;
			/* FALLTHROUGH */
		case 2:
			k1 ^= (uint32_t) p[nblocks * 4 + 1] << 8;
			/* FALLTHROUGH */
		case 1:
			k1 ^= (uint32_t) p[nblocks * 4];
			h1 ^= mix_k1(k1);
	}
	h1 ^= (uint32_t) len;
	h1 ^= h1 >> 16;
	h1 *= 0x85ebca6bu;
	h1 ^= h1 >> 13;
	h1 *= 0xc2b2ae35u;
	h1 ^= h1 >> 16;
	return h1;
}

uint32_t
iceberg_hash_long(int64_t v)
{
	uint8_t		b[8];
	uint64_t	u = (uint64_t) v;
	int			i;

	/* hashLong: the 8 bytes little-endian (int, date and time promote) */
	for (i = 0; i < 8; i++)
		b[i] = (uint8_t) (u >> (8 * i));
	return iceberg_murmur3_32(b, 8);
}

int32_t
iceberg_bucket_of_hash(uint32_t hash, int32_t n)
{
	return (int32_t) ((hash & INT32_MAX) % (uint32_t) n);
}

int64_t
iceberg_truncate_long(int64_t v, int64_t w)
{
	/* v - (((v % W) + W) % W): toward negative infinity */
	return v - (((v % w) + w) % w);
}

size_t
iceberg_truncate_utf8(const char *s, size_t len, int64_t w)
{
	size_t		i = 0;
	int64_t		n = 0;

	/* the first w code points */
	while (i < len && n < w)
	{
		i++;
		while (i < len && ((unsigned char) s[i] & 0xc0) == 0x80)
			i++;
		n++;
	}
	return i;
}

size_t
iceberg_decimal_min_bytes(const uint8_t *b, size_t len, size_t *start)
{
	size_t		i = 0;

	/* drop a leading 0x00 (0xff) while the next byte keeps the sign */
	while (i + 1 < len &&
		   ((b[i] == 0x00 && (b[i + 1] & 0x80) == 0) ||
			(b[i] == 0xff && (b[i + 1] & 0x80) != 0)))
		i++;
	*start = i;
	return len - i;
}

int
iceberg_decimal_bytes(int precision)
{
	/*
	 * Iceberg's fixed of the fewest bytes for the precision
	 * (TypeUtil.decimalRequiredBytes): 2^(8 bytes - 1) > 10^p
	 */
	int			bytes = 1;
	double		ten = 1;
	int			i;

	for (i = 0; i < precision; i++)
		ten *= 10;
	while (bytes < 16 && ldexp(1.0, 8 * bytes - 1) <= ten)
		bytes++;
	return bytes;
}

bool
iceberg_truncate_decimal(const uint8_t *in, size_t len, int64_t w, int out_len, uint8_t *out)
{
	__int128	v = 0;
	__int128	r;
	__int128	lim;
	size_t		i;

	if (len == 0 || len > 16 || out_len < 1 || out_len > 16 || w <= 0)
		return false;
	v = (in[0] & 0x80) ? -1 : 0;
	for (i = 0; i < len; i++)
		v = (__int128) (((unsigned __int128) v << 8) | in[i]);
	/* v - (((v % W) + W) % W), on the unscaled value */
	r = v - (((v % w) + w) % w);
	/* the result must fit out_len bytes of two's complement */
	lim = (__int128) 1 << (8 * out_len - 1 < 126 ? 8 * out_len - 1 : 126);
	if (out_len < 16 && (r < -lim || r >= lim))
		return false;
	for (i = 0; i < (size_t) out_len; i++)
		out[out_len - 1 - i] = (uint8_t) ((unsigned __int128) r >> (8 * i));
	return true;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t
iceberg_years_from_days(int64_t days)
{
	int64_t		y;
	int			m,
				d;

	io_civil_from_days(days, &y, &m, &d);
	return y - 1970;
}

int64_t
iceberg_months_from_days(int64_t days)
{
	int64_t		y;
	int			m,
				d;

	io_civil_from_days(days, &y, &m, &d);
	return (y - 1970) * 12 + (m - 1);
}

/* ---------------------------------------------------------------------
 * Values of a partition text
 * ---------------------------------------------------------------------
 */

typedef enum TransformKind
{
	TK_IDENTITY, TK_BUCKET, TK_TRUNCATE, TK_YEAR, TK_MONTH, TK_DAY, TK_HOUR, TK_VOID,
	TK_OTHER
} TransformKind;

static TransformKind
transform_kind(const char *t, int64_t *arg)
{
	char	   *end;

	*arg = 0;
	if (strcmp(t, "identity") == 0)
		return TK_IDENTITY;
	if (strcmp(t, "year") == 0)
		return TK_YEAR;
	if (strcmp(t, "month") == 0)
		return TK_MONTH;
	if (strcmp(t, "day") == 0)
		return TK_DAY;
	if (strcmp(t, "hour") == 0)
		return TK_HOUR;
	if (strcmp(t, "void") == 0)
		return TK_VOID;
	if (strncmp(t, "bucket[", 7) == 0 || strncmp(t, "truncate[", 9) == 0)
	{
		const char *n = strchr(t, '[') + 1;

		*arg = strtoll(n, &end, 10);
		if (end == n || *arg <= 0 || *arg > INT32_MAX || strcmp(end, "]") != 0)
			return TK_OTHER;
		return t[0] == 'b' ? TK_BUCKET : TK_TRUNCATE;
	}
	return TK_OTHER;
}

/* The n-th token of a partition text. */
static bool
nth_token(const char *text, size_t len, int n, const char **tok, size_t *tl)
{
	const char *pp = text;
	int			i;

	for (i = 0; i <= n; i++)
		if (!iceberg_partition_next(&pp, text + len, tok, tl))
			return false;
	return true;
}

static bool
token_long(const char *tok, size_t tl, int64_t *v)
{
	char		num[32];
	char	   *end;

	if (tl == 0 || tl >= sizeof(num))
		return false;
	memcpy(num, tok, tl);
	num[tl] = '\0';
	errno = 0;
	*v = strtoll(num, &end, 10);
	return *end == '\0' && errno == 0;
}

static bool
append_long(IcebergBuf *b, int64_t v)
{
	char		num[32];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return iceberg_buf_append(b, num, strlen(num));
}

/* Is t one of the types whose values are longs in a partition text? */
static bool
long_typed(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_INT || t == ICEBERG_TYPE_LONG || t == ICEBERG_TYPE_DATE ||
		t == ICEBERG_TYPE_TIME || t == ICEBERG_TYPE_TIMESTAMP || t == ICEBERG_TYPE_TIMESTAMPTZ ||
		t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS;
}

static bool
nanos_typed(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS;
}

static bool
time_typed(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_TIMESTAMP || t == ICEBERG_TYPE_TIMESTAMPTZ || nanos_typed(t);
}

/* Microseconds of a timestamp value (Iceberg's nanosToMicros: floor). */
static int64_t
micros_of(IcebergTypeId t, int64_t v)
{
	return nanos_typed(t) ? floor_div(v, 1000) : v;
}

/* Days of a date or timestamp value (micros or nanos). */
static int64_t
days_of(IcebergTypeId t, int64_t v)
{
	return t == ICEBERG_TYPE_DATE ? v : floor_div(micros_of(t, v), USECS_PER_DAY);
}

/*
 * bucket[n] of the bytes of a value (Appendix B): a string's UTF-8, a
 * uuid's 16 big-endian bytes, fixed and binary as they are, a decimal's
 * unscaled value in its fewest two's complement big-endian bytes.
 */
static bool
bucket_of_bytes(IcebergTypeId t, const char *tok, size_t tl, int32_t n, IcebergBuf *b, bool *ok)
{
	IcebergBuf	raw = {0};
	const uint8_t *p;
	size_t		len;
	size_t		start = 0;
	bool		r;

	if (!(t == ICEBERG_TYPE_STRING ? iceberg_json_unescape(tok, tl, &raw) :
		  iceberg_json_unhex(tok, tl, &raw)) ||
		(t == ICEBERG_TYPE_UUID && raw.len != 16) ||
		(t == ICEBERG_TYPE_DECIMAL && (raw.len == 0 || raw.len > 16)))
	{
		iceberg_buf_free(&raw);
		*ok = false;
		return false;
	}
	p = raw.data ? (const uint8_t *) raw.data : (const uint8_t *) "";
	len = raw.len;
	if (t == ICEBERG_TYPE_DECIMAL)
		len = iceberg_decimal_min_bytes(p, len, &start);
	r = append_long(b, iceberg_bucket_of_hash(iceberg_murmur3_32(p + start, len), n));
	iceberg_buf_free(&raw);
	return r;
}

/* truncate[w] of a string, binary or decimal value of column c. */
static bool
truncate_bytes(const IcebergColumn *c, const char *tok, size_t tl, int64_t w, IcebergBuf *b,
			   bool *ok)
{
	IcebergBuf	raw = {0};
	const char *p;
	uint8_t		dec[16];
	bool		r;

	if (!(c->type == ICEBERG_TYPE_STRING ? iceberg_json_unescape(tok, tl, &raw) :
		  iceberg_json_unhex(tok, tl, &raw)))
	{
		iceberg_buf_free(&raw);
		*ok = false;
		return false;
	}
	p = raw.data ? raw.data : "";
	if (c->type == ICEBERG_TYPE_STRING)
		r = iceberg_render_json_string(b, (const uint8_t *) p, iceberg_truncate_utf8(p, raw.len, w));
	else if (c->type == ICEBERG_TYPE_BINARY)
		r = iceberg_render_hex(b, (const uint8_t *) p, raw.len < (size_t) w ? (int64_t) raw.len : w);
	else if (iceberg_truncate_decimal((const uint8_t *) p, raw.len, w,
									  iceberg_decimal_bytes(c->precision), dec))
		r = iceberg_render_hex(b, dec, iceberg_decimal_bytes(c->precision));
	else
	{
		/* outside the decimal's precision: not computed here */
		iceberg_buf_free(&raw);
		*ok = false;
		return false;
	}
	iceberg_buf_free(&raw);
	return r;
}

/*
 * Append the value of transform (kind, arg) of the identity value tok of
 * column c; false: not computed here (*ok false) or out of memory (*ok
 * true).
 */
static bool
apply_transform(TransformKind kind, int64_t arg, const IcebergColumn *c, const char *tok,
				size_t tl, IcebergBuf *b, bool *ok)
{
	IcebergTypeId t = c->type;
	int64_t		v = 0;

	*ok = true;
	if (tl == 4 && memcmp(tok, "null", 4) == 0)
		return iceberg_buf_append(b, "null", 4);	/* every transform of null */
	if (long_typed(t) && !token_long(tok, tl, &v))
		goto no;
	switch (kind)
	{
		case TK_IDENTITY:
			return iceberg_buf_append(b, tok, tl);
		case TK_BUCKET:
			if (long_typed(t))
				return append_long(b, iceberg_bucket_of_hash(iceberg_hash_long(micros_of(t, v)),
															 (int32_t) arg));
			if (t == ICEBERG_TYPE_STRING || t == ICEBERG_TYPE_BINARY ||
				t == ICEBERG_TYPE_FIXED || t == ICEBERG_TYPE_UUID || t == ICEBERG_TYPE_DECIMAL)
				return bucket_of_bytes(t, tok, tl, (int32_t) arg, b, ok);
			goto no;
		case TK_TRUNCATE:
			if (t == ICEBERG_TYPE_INT || t == ICEBERG_TYPE_LONG)
				return append_long(b, iceberg_truncate_long(v, arg));
			if (t == ICEBERG_TYPE_STRING || t == ICEBERG_TYPE_BINARY || t == ICEBERG_TYPE_DECIMAL)
				return truncate_bytes(c, tok, tl, arg, b, ok);
			goto no;
		case TK_YEAR:
		case TK_MONTH:
		case TK_DAY:
			if (t != ICEBERG_TYPE_DATE && !time_typed(t))
				goto no;
			v = days_of(t, v);
			return append_long(b, kind == TK_YEAR ? iceberg_years_from_days(v) :
							   kind == TK_MONTH ? iceberg_months_from_days(v) : v);
		case TK_HOUR:
			if (!time_typed(t))
				goto no;
			return append_long(b, floor_div(micros_of(t, v), USECS_PER_HOUR));
		default:
			goto no;
	}
no:
	*ok = false;
	return false;
}

/*
 * Append the output field (kind, arg) from the value tok of a field of
 * the file's spec of transform (fkind, farg) on the same source column c;
 * false with *ok false when that value does not fix it.
 */
static bool
derive(TransformKind kind, int64_t arg, TransformKind fkind, int64_t farg, const IcebergColumn *c,
	   const char *tok, size_t tl, IcebergBuf *b, bool *ok)
{
	IcebergTypeId t = c->type;
	int64_t		v;

	*ok = true;
	if (fkind == TK_IDENTITY)
		return apply_transform(kind, arg, c, tok, tl, b, ok);
	if (fkind == kind && farg == arg)
		return iceberg_buf_append(b, tok, tl);	/* the same transform */
	if (tl == 4 && memcmp(tok, "null", 4) == 0)
		return iceberg_buf_append(b, "null", 4);
	if (fkind == TK_TRUNCATE && kind == TK_TRUNCATE)
	{
		/*
		 * truncate[W] of truncate[W'](v): numbers when W is a multiple of W'
		 * (every v of [x, x + W') has the same truncate[W]; truncate[5] of
		 * truncate[10] is not fixed: 10 and 15 share truncate[10]), strings
		 * and binary when W <= W' (a prefix of the prefix)
		 */
		if ((t == ICEBERG_TYPE_INT || t == ICEBERG_TYPE_LONG || t == ICEBERG_TYPE_DECIMAL) &&
			arg % farg == 0)
			return apply_transform(kind, arg, c, tok, tl, b, ok);
		if ((t == ICEBERG_TYPE_STRING || t == ICEBERG_TYPE_BINARY) && arg <= farg)
			return apply_transform(kind, arg, c, tok, tl, b, ok);
	}
	else if (token_long(tok, tl, &v))
	{
		/* bucket[N] of bucket[N'](v), N dividing N': (h mod N') mod N */
		if (fkind == TK_BUCKET && kind == TK_BUCKET && farg % arg == 0 && v >= 0)
			return append_long(b, v % arg);
		/* a coarser time of a finer one */
		if (fkind == TK_HOUR && (kind == TK_DAY || kind == TK_MONTH || kind == TK_YEAR))
		{
			v = floor_div(v, 24);
			return append_long(b, kind == TK_DAY ? v : kind == TK_MONTH ?
							   iceberg_months_from_days(v) : iceberg_years_from_days(v));
		}
		if (fkind == TK_DAY && (kind == TK_MONTH || kind == TK_YEAR))
			return append_long(b, kind == TK_MONTH ? iceberg_months_from_days(v) :
							   iceberg_years_from_days(v));
		if (fkind == TK_MONTH && kind == TK_YEAR)
			return append_long(b, floor_div(v, 12));
	}
	*ok = false;
	return false;
}

bool
iceberg_partition_project(const IcebergTableMetadata *md, const IcebergSchema *schema,
						  int32_t from_spec, const char *text, size_t len, int32_t to_spec,
						  char **out, TmsError *err)
{
	const IcebergPartitionSpec *from = iceberg_metadata_spec(md, from_spec);
	const IcebergPartitionSpec *to = iceberg_metadata_spec(md, to_spec);
	IcebergBuf	b = {0};
	int			i,
				k;

	*out = NULL;
	if (from == NULL || to == NULL)
		return true;
	if (!iceberg_buf_append(&b, "[", 1))
		return compact_oom(err);
	for (i = 0; i < to->nfields; i++)
	{
		const IcebergPartitionField *of = &to->fields[i];
		const IcebergColumn *col = iceberg_schema_column(schema, of->source_id);
		int64_t		arg;
		TransformKind kind = transform_kind(of->transform, &arg);
		bool		done = false;
		bool		ok = false;

		if (i > 0 && !iceberg_buf_append(&b, ",", 1))
			goto nomem;
		if (kind == TK_VOID)
		{
			/* void: always null */
			if (!iceberg_buf_append(&b, "null", 4))
				goto nomem;
			continue;
		}
		if (col == NULL || kind == TK_OTHER)
			goto not_fixed;
		for (k = 0; k < from->nfields && !done; k++)
		{
			const IcebergPartitionField *ff = &from->fields[k];
			int64_t		farg;
			TransformKind fkind = transform_kind(ff->transform, &farg);
			const char *tok;
			size_t		tl;

			if (ff->source_id != of->source_id || fkind == TK_VOID || fkind == TK_OTHER ||
				!nth_token(text, len, k, &tok, &tl))
				continue;
			done = derive(kind, arg, fkind, farg, col, tok, tl, &b, &ok);
			if (!done && ok)
				goto nomem;
		}
		if (!done)
			goto not_fixed;
	}
	if (!iceberg_buf_append(&b, "]", 1))
		goto nomem;
	*out = iceberg_strdup(b.data, err);
	iceberg_buf_free(&b);
	return *out != NULL;
not_fixed:
	iceberg_buf_free(&b);
	return true;
nomem:
	iceberg_buf_free(&b);
	return compact_oom(err);
}

/* ---------------------------------------------------------------------
 * The partition record of a spec
 * ---------------------------------------------------------------------
 */

/* The Avro type of a column of type t as a partition value (NULL: none). */
static const char *
avro_type_of(const IcebergColumn *c, char *buf, size_t size)
{
	switch (c->type)
	{
		case ICEBERG_TYPE_BOOLEAN:
			return "\"boolean\"";
		case ICEBERG_TYPE_INT:
			return "\"int\"";
		case ICEBERG_TYPE_LONG:
			return "\"long\"";
		case ICEBERG_TYPE_FLOAT:
			return "\"float\"";
		case ICEBERG_TYPE_DOUBLE:
			return "\"double\"";
		case ICEBERG_TYPE_DATE:
			return "{\"type\":\"int\",\"logicalType\":\"date\"}";
		case ICEBERG_TYPE_TIME:
			return "{\"type\":\"long\",\"logicalType\":\"time-micros\"}";
		case ICEBERG_TYPE_TIMESTAMP:
			return "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\",\"adjust-to-utc\":false}";
		case ICEBERG_TYPE_TIMESTAMPTZ:
			return "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\",\"adjust-to-utc\":true}";
		case ICEBERG_TYPE_STRING:
			return "\"string\"";
		case ICEBERG_TYPE_BINARY:
			return "\"bytes\"";
		case ICEBERG_TYPE_TIMESTAMP_NS:
			return "{\"type\":\"long\",\"logicalType\":\"timestamp-nanos\",\"adjust-to-utc\":false}";
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			return "{\"type\":\"long\",\"logicalType\":\"timestamp-nanos\",\"adjust-to-utc\":true}";
		case ICEBERG_TYPE_UUID:
			return "{\"type\":\"fixed\",\"name\":\"uuid_fixed\",\"size\":16,\"logicalType\":\"uuid\"}";
		case ICEBERG_TYPE_FIXED:
			if (c->length <= 0)
				return NULL;
			snprintf(buf, size, "{\"type\":\"fixed\",\"name\":\"fixed_%d\",\"size\":%d}",
					 c->length, c->length);
			return buf;
		case ICEBERG_TYPE_DECIMAL:
			{
				int			bytes = iceberg_decimal_bytes(c->precision);

				snprintf(buf, size, "{\"type\":\"fixed\",\"name\":\"decimal_%d_%d\",\"size\":%d,"
						 "\"logicalType\":\"decimal\",\"precision\":%d,\"scale\":%d}",
						 c->precision, c->scale, bytes, c->precision, c->scale);
				return buf;
			}
		default:
			return NULL;
	}
}

char *
iceberg_partition_record_schema(const IcebergTableMetadata *md, const IcebergSchema *schema,
								int32_t spec_id, TmsError *err)
{
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(md, spec_id);
	IcebergBuf	b = {0};
	char		rec[64];
	int			i;

	if (spec == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "partition spec %d is not in the table metadata", (int) spec_id);
		return NULL;
	}
	snprintf(rec, sizeof(rec), "{\"type\":\"record\",\"name\":\"r102\",\"fields\":[");
	if (!iceberg_buf_append(&b, rec, strlen(rec)))
		goto nomem;
	for (i = 0; i < spec->nfields; i++)
	{
		const IcebergPartitionField *f = &spec->fields[i];
		const IcebergColumn *col = iceberg_schema_column(schema, f->source_id);
		int64_t		arg;
		TransformKind kind = transform_kind(f->transform, &arg);
		const char *type = NULL;
		char		tbuf[256];
		char		head[64];

		if (kind == TK_BUCKET || kind == TK_YEAR || kind == TK_MONTH || kind == TK_HOUR ||
			kind == TK_VOID)
			type = "\"int\"";
		else if (kind == TK_DAY)
			type = "{\"type\":\"int\",\"logicalType\":\"date\"}";
		else if ((kind == TK_IDENTITY || kind == TK_TRUNCATE) && col != NULL)
			type = avro_type_of(col, tbuf, sizeof(tbuf));
		if (type == NULL)
		{
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "partition field \"%s\" of spec %d has a type this writer cannot write",
						  f->name, (int) spec_id);
			return NULL;
		}
		if ((i > 0 && !iceberg_buf_append(&b, ",", 1)) ||
			!iceberg_buf_append(&b, "{\"name\":", 8) ||
			!iceberg_render_json_string(&b, (const uint8_t *) f->name, (int64_t) strlen(f->name)) ||
			!iceberg_buf_append(&b, ",\"type\":[\"null\",", 16) ||
			!iceberg_buf_append(&b, type, strlen(type)))
			goto nomem;
		snprintf(head, sizeof(head), "],\"default\":null,\"field-id\":%d}", (int) f->field_id);
		if (!iceberg_buf_append(&b, head, strlen(head)))
			goto nomem;
	}
	if (!iceberg_buf_append(&b, "]}", 2))
		goto nomem;
	{
		char	   *out = iceberg_strdup(b.data, err);

		iceberg_buf_free(&b);
		return out;
	}
nomem:
	iceberg_buf_free(&b);
	compact_oom(err);
	return NULL;
}

char *
iceberg_partition_spec_json(const IcebergTableMetadata *md, int32_t spec_id, TmsError *err)
{
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(md, spec_id);
	IcebergBuf	b = {0};
	int			i;
	char	   *out;

	if (spec == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "partition spec %d is not in the table metadata", (int) spec_id);
		return NULL;
	}
	if (!iceberg_buf_append(&b, "[", 1))
		goto nomem;
	for (i = 0; i < spec->nfields; i++)
	{
		const IcebergPartitionField *f = &spec->fields[i];
		char		ids[96];

		snprintf(ids, sizeof(ids), ",\"source-id\":%d,\"field-id\":%d}",
				 (int) f->source_id, (int) f->field_id);
		if ((i > 0 && !iceberg_buf_append(&b, ",", 1)) ||
			!iceberg_buf_append(&b, "{\"name\":", 8) ||
			!iceberg_render_json_string(&b, (const uint8_t *) f->name, (int64_t) strlen(f->name)) ||
			!iceberg_buf_append(&b, ",\"transform\":", 13) ||
			!iceberg_render_json_string(&b, (const uint8_t *) f->transform, (int64_t) strlen(f->transform)) ||
			!iceberg_buf_append(&b, ids, strlen(ids)))
			goto nomem;
	}
	if (!iceberg_buf_append(&b, "]", 1))
		goto nomem;
	out = iceberg_strdup(b.data, err);
	iceberg_buf_free(&b);
	return out;
nomem:
	iceberg_buf_free(&b);
	compact_oom(err);
	return NULL;
}
