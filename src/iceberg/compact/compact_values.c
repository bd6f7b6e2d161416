/*-------------------------------------------------------------------------
 *
 * compact_values.c
 *	  Iceberg's single-value serialization of the column bounds the
 *	  compaction helper reports (lower and upper bounds as Iceberg Java
 *	  writes them, strings and binaries truncated as its
 *	  MetricsConfig's truncate(n) does), and the hex the helper sends
 *	  binary values in.
 *
 * Rules: plain C; a value that cannot be serialized is refused (false),
 * never guessed; out of memory is told apart (*oom).
 *
 * https://iceberg.apache.org/spec/#binary-single-value-serialization
 *
 * src/iceberg/compact/compact_values.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact_wire.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* See compact_int.h. */
bool
iceberg_compact_unhex(const char *s, uint8_t **out, size_t *n)
{
	size_t		len = strlen(s);
	size_t		i;

	*out = NULL;
	*n = 0;
	if (len % 2 != 0 || len / 2 > ICEBERG_COMPACT_MAX_BOUND)
		return false;
	*out = io_malloc(len / 2 + 1);
	if (*out == NULL)
		return false;
	for (i = 0; i < len; i += 2)
	{
		int			h = io_hex_value((unsigned char) s[i]);
		int			l = io_hex_value((unsigned char) s[i + 1]);

		if (h < 0 || l < 0)
		{
			io_free(*out);
			*out = NULL;
			return false;
		}
		(*out)[i / 2] = (uint8_t) (h * 16 + l);
	}
	*n = len / 2;
	return true;
}

/* ---------------------------------------------------------------------
 * Iceberg values
 * ---------------------------------------------------------------------
 */

static bool
put(uint8_t **out, size_t *out_len, const void *p, size_t n)
{
	*out = io_malloc(n + 1);
	if (*out == NULL)
		return false;
	memcpy(*out, p, n);
	*out_len = n;
	return true;
}

static bool
le(uint8_t **out, size_t *out_len, int64_t v, int n)
{
	uint8_t		b[8];
	int			i;

	for (i = 0; i < 8; i++)
		b[i] = (uint8_t) ((uint64_t) v >> (8 * i));
	return put(out, out_len, b, (size_t) n);
}

/* Length of the UTF-8 sequence starting with byte c (1 for a stray byte). */
static int
utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

static uint32_t
utf8_decode(const unsigned char *s, int n)
{
	uint32_t	v = n == 1 ? s[0] : n == 2 ? (s[0] & 0x1f) : n == 3 ? (s[0] & 0x0f) : (s[0] & 0x07);
	int			i;

	for (i = 1; i < n; i++)
		v = (v << 6) | (s[i] & 0x3f);
	return v;
}

static int
utf8_encode(uint32_t v, unsigned char *o)
{
	if (v < 0x80)
	{
		o[0] = (unsigned char) v;
		return 1;
	}
	if (v < 0x800)
	{
		o[0] = (unsigned char) (0xc0 | (v >> 6));
		o[1] = (unsigned char) (0x80 | (v & 0x3f));
		return 2;
	}
	if (v < 0x10000)
	{
		o[0] = (unsigned char) (0xe0 | (v >> 12));
		o[1] = (unsigned char) (0x80 | ((v >> 6) & 0x3f));
		o[2] = (unsigned char) (0x80 | (v & 0x3f));
		return 3;
	}
	o[0] = (unsigned char) (0xf0 | (v >> 18));
	o[1] = (unsigned char) (0x80 | ((v >> 12) & 0x3f));
	o[2] = (unsigned char) (0x80 | ((v >> 6) & 0x3f));
	o[3] = (unsigned char) (0x80 | (v & 0x3f));
	return 4;
}

/* Truncate a UTF-8 string to n characters (Iceberg's truncate). */
static bool
truncate_string(const char *s, size_t len, int n, bool upper, uint8_t **out, size_t *out_len,
				bool *oom_out)
{
	size_t		offs[1024 + 1];
	int			chars = 0;
	size_t		i = 0;

	if (n > 1024)
		n = 1024;
	while (i < len && chars < n)
	{
		size_t		step = (size_t) utf8_len((unsigned char) s[i]);

		offs[chars++] = i;
		i += step < len - i ? step : len - i;
	}
	offs[chars] = i;
	if (i >= len)
	{
		/* no longer than the limit: the value itself */
		if (!put(out, out_len, s, len))
			*oom_out = true;
		return !*oom_out;
	}
	if (!upper)
	{
		if (!put(out, out_len, s, i))
			*oom_out = true;
		return !*oom_out;
	}

	/*
	 * the prefix with its last character incremented, dropping those at the
	 * top
	 */
	while (chars > 0)
	{
		size_t		at = offs[chars - 1];
		int			cl = (int) (offs[chars] - at);
		uint32_t	cp = utf8_decode((const unsigned char *) s + at, cl) + 1;
		unsigned char enc[4];
		int			el;

		if (cp >= 0xD800 && cp <= 0xDFFF)
			cp = 0xE000;
		if (cp <= 0x10FFFF)
		{
			el = utf8_encode(cp, enc);
			*out = io_malloc(at + (size_t) el + 1);
			if (*out == NULL)
			{
				*oom_out = true;
				return false;
			}
			memcpy(*out, s, at);
			memcpy(*out + at, enc, (size_t) el);
			*out_len = at + (size_t) el;
			return true;
		}
		chars--;
	}
	*out = NULL;				/* no upper bound */
	*out_len = 0;
	return true;
}

bool
iceberg_value_serialize(const IcebergColumn *c, const char *text, size_t len, bool upper,
						int truncate_length, uint8_t **out, size_t *out_len, bool *oom_out)
{
	char		buf[128];
	char	   *end;

	*out = NULL;
	*out_len = 0;
	*oom_out = false;
	if (c->type != ICEBERG_TYPE_STRING && c->type != ICEBERG_TYPE_BINARY &&
		c->type != ICEBERG_TYPE_FIXED)
	{
		if (len >= sizeof(buf))
			return false;
		memcpy(buf, text, len);
		buf[len] = '\0';
	}
	switch (c->type)
	{
		case ICEBERG_TYPE_BOOLEAN:
			if (strcmp(buf, "true") != 0 && strcmp(buf, "false") != 0)
				return false;
			return le(out, out_len, buf[0] == 't', 1) || (*oom_out = true, false);
		case ICEBERG_TYPE_INT:
		case ICEBERG_TYPE_DATE:
		case ICEBERG_TYPE_LONG:
		case ICEBERG_TYPE_TIME:
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
		case ICEBERG_TYPE_TIMESTAMP_NS:
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			{
				long long	v;
				bool		four = c->type == ICEBERG_TYPE_INT || c->type == ICEBERG_TYPE_DATE;

				errno = 0;
				v = strtoll(buf, &end, 10);
				if (buf[0] == '\0' || *end != '\0' || errno != 0 ||
					(four && (v < INT32_MIN || v > INT32_MAX)))
					return false;
				return le(out, out_len, v, four ? 4 : 8) || (*oom_out = true, false);
			}
		case ICEBERG_TYPE_FLOAT:
		case ICEBERG_TYPE_DOUBLE:
			{
				double		d = strtod(buf, &end);

				if (buf[0] == '\0' || *end != '\0' || isnan(d))
					return false;
				if (c->type == ICEBERG_TYPE_FLOAT)
				{
					float		f = (float) d;

					return put(out, out_len, &f, 4) || (*oom_out = true, false);
				}
				return put(out, out_len, &d, 8) || (*oom_out = true, false);
			}
		case ICEBERG_TYPE_DECIMAL:
			{
				__int128	v = 0;
				const char *s = buf;
				bool		neg = false;
				bool		point = false;
				int			frac = 0,
							digits = 0;
				uint8_t		be[16];
				int			k = 0,
							i;

				if (*s == '-' || *s == '+')
					neg = *s++ == '-';
				for (; *s; s++)
				{
					if (*s == '.' && !point)
					{
						point = true;
						continue;
					}
					if (!isdigit((unsigned char) *s) || ++digits > 38 || (point && ++frac > c->scale))
						return false;
					v = v * 10 + (*s - '0');
				}
				/* at most the column's precision once at its scale (and 38) */
				if (digits == 0 || digits - frac + c->scale > (c->precision > 0 ? c->precision : 38) ||
					digits - frac + c->scale > 38)
					return false;
				for (; frac < c->scale; frac++)
					v *= 10;
				if (neg)
					v = -v;
				for (i = 0; i < 16; i++)
					be[15 - i] = (uint8_t) ((unsigned __int128) v >> (8 * i));
				/* minimal two's complement */
				while (k < 15 && ((be[k] == 0x00 && !(be[k + 1] & 0x80)) ||
								  (be[k] == 0xff && (be[k + 1] & 0x80))))
					k++;
				return put(out, out_len, be + k, (size_t) (16 - k)) || (*oom_out = true, false);
			}
		case ICEBERG_TYPE_STRING:
			if (truncate_length > 0)
				return truncate_string(text, len, truncate_length, upper, out, out_len, oom_out);
			return put(out, out_len, text, len) || (*oom_out = true, false);
		case ICEBERG_TYPE_BINARY:
		case ICEBERG_TYPE_FIXED:
			{
				uint8_t    *b;
				size_t		n;
				size_t		keep;

				if (len % 2 != 0)
					return false;
				{
					char	   *copy = io_strndup(text, len);
					bool		h;

					if (copy == NULL)
					{
						*oom_out = true;
						return false;
					}
					for (size_t i = 0; copy[i]; i++)
						copy[i] = (char) tolower((unsigned char) copy[i]);
					h = iceberg_compact_unhex(copy, &b, &n);
					io_free(copy);
					if (!h)
						return false;
				}
				keep = truncate_length > 0 && n > (size_t) truncate_length ? (size_t) truncate_length : n;
				if (keep < n && upper)
				{
					while (keep > 0 && b[keep - 1] == 0xff)
						keep--;
					if (keep == 0)
					{
						io_free(b);
						return true;	/* no upper bound */
					}
					b[keep - 1]++;
				}
				*out = b;
				*out_len = keep;
				return true;
			}
		case ICEBERG_TYPE_UUID:
			{
				uint8_t		u[16];
				int			k = 0;
				size_t		i;

				if (len != 36)
					return false;
				for (i = 0; i < 36; i++)
				{
					int			h,
								l;

					if (i == 8 || i == 13 || i == 18 || i == 23)
					{
						if (buf[i] != '-')
							return false;
						continue;
					}
					h = isdigit((unsigned char) buf[i]) ? buf[i] - '0' : tolower((unsigned char) buf[i]) - 'a' + 10;
					l = isdigit((unsigned char) buf[i + 1]) ? buf[i + 1] - '0' : tolower((unsigned char) buf[i + 1]) - 'a' + 10;
					if (h < 0 || h > 15 || l < 0 || l > 15)
						return false;
					u[k++] = (uint8_t) (h * 16 + l);
					i++;
				}
				return put(out, out_len, u, 16) || (*oom_out = true, false);
			}
		default:
			return false;
	}
}
