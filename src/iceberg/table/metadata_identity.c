/*-------------------------------------------------------------------------
 *
 * metadata_identity.c
 *	  A table's identity from its metadata.json, without its history.
 *
 * tms.purge_table() checks, before it records a job, that the metadata file
 * the catalog names describes the table (its UUID and location) and allows
 * garbage collection (the property gc.enabled).  A full parse builds every
 * snapshot, log entry and schema of the file through jansson's tree: at
 * 5,000 snapshots (4 MB of JSON) that is most of the call.  This reader
 * scans the document once without building anything: it checks the JSON
 * syntax of the whole document (so a file that is not JSON is refused as
 * before) and decodes only the top-level members "format-version",
 * "table-uuid", "location" and the entry "gc.enabled" of "properties".
 *
 * Rules: the same size cap and gzip handling as iceberg_metadata_parse();
 * the same required fields and types for what it reads (format-version an
 * integer in 1..3, location a string, table-uuid a string required from v2,
 * properties an object); a duplicate member counts by its last occurrence,
 * as in jansson.  It does not validate what it skips beyond its syntax (the
 * snapshots' fields, timestamps): whoever acts on the history (the purge
 * worker, which reads the file whole before it drops or deletes anything)
 * parses it in full.  Nesting deeper than ICEBERG_IDENTITY_MAX_DEPTH is
 * refused; nothing here recurses without that bound.
 *
 * iceberg_metadata_read_identity() reads the file's head only, when it can:
 * Iceberg's writers put the identity members first (format-version,
 * table-uuid, location, then the schemas, specs and properties, then the
 * snapshots and the logs: TableMetadataParser.toJson of
 * https://github.com/apache/iceberg), so it reads ICEBERG_IDENTITY_HEAD
 * bytes, then twice as many each time, and stops once the four members
 * have been seen, each followed by a ','.  The members after them (the
 * history) are then neither read nor checked, and a later duplicate of an
 * identity member is not seen: the purge worker's whole parse before the
 * drop is the check of those.  Whatever the head scan cannot settle (a
 * syntax or type error, a missing member, gzip) is decided by the scan of
 * the whole file above, so the head read refuses nothing the whole scan
 * accepts.
 *
 * src/iceberg/table/metadata_identity.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "io/io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Containers nested deeper are refused: a little above jansson's own limit
 * (JSON_PARSER_MAX_DEPTH, 2048 values), so that whatever the full parse
 * accepts this scan accepts too; about 100 bytes of stack a level.
 */
#define ICEBERG_IDENTITY_MAX_DEPTH 2100

/* The first read of iceberg_metadata_read_identity(), in bytes. */
#define ICEBERG_IDENTITY_HEAD (64 * 1024)

typedef struct IdScan
{
	const char *p;
	const char *end;
	const char *start;
	TmsError   *err;
	bool		head;			/* stop once the identity has been seen */
	bool		stopped;		/* did (the rest is not scanned) */
} IdScan;

/* Syntax error at the scan position. */
static bool
id_syntax(IdScan *s, const char *what)
{
	tms_error_set(s->err, ICEBERG_ERR_MALFORMED,
				  "invalid table metadata: not valid JSON");
	tms_error_detail(s->err, "JSON error at byte %lld: %s.",
					 (long long) (s->p - s->start), what);
	return false;
}

/*
 * Eight bytes at a time where that is cheap: the runs of spaces of an
 * indented document and the runs of plain characters of its strings.
 */
#define ID_ONES UINT64_C(0x0101010101010101)
#define ID_HIGHS UINT64_C(0x8080808080808080)
#define ID_HAS_ZERO(x) (((x) - ID_ONES) & ~(x) & ID_HIGHS)
#define ID_HAS_LESS(x, n) (((x) - ID_ONES * (n)) & ~(x) & ID_HIGHS)

static inline uint64_t
id_load8(const char *p)
{
	uint64_t	v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void
id_ws(IdScan *s)
{
	while (s->p < s->end)
	{
		if (s->end - s->p >= 8 && id_load8(s->p) == UINT64_C(0x2020202020202020))
			s->p += 8;
		else if (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')
			s->p++;
		else
			break;
	}
}

/* Four hex digits at p (p + 4 <= end), or -1. */
static long
id_hex4(const char *p)
{
	long		v = 0;

	for (int i = 0; i < 4; i++)
	{
		int			h = io_hex_value((unsigned char) p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* Append code point cp as UTF-8. */
static void
id_utf8(IcebergBuf *b, long cp)
{
	char		u[4];
	size_t		n;

	if (cp < 0x80)
	{
		u[0] = (char) cp;
		n = 1;
	}
	else if (cp < 0x800)
	{
		u[0] = (char) (0xc0 | (cp >> 6));
		u[1] = (char) (0x80 | (cp & 0x3f));
		n = 2;
	}
	else if (cp < 0x10000)
	{
		u[0] = (char) (0xe0 | (cp >> 12));
		u[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char) (0x80 | (cp & 0x3f));
		n = 3;
	}
	else
	{
		u[0] = (char) (0xf0 | (cp >> 18));
		u[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char) (0x80 | (cp & 0x3f));
		n = 4;
	}
	iceberg_buf_append(b, u, n);
}

/*
 * A string at s->p (the opening quote).  With out, its decoded text is
 * appended to *out (escapes resolved); without, it is only checked.
 */
static bool
id_string(IdScan *s, IcebergBuf *out)
{
	const char *run;

	s->p++;						/* the quote */
	run = s->p;
	for (;;)
	{
		unsigned char c;

		/* eight bytes with no quote, backslash or control character */
		while (s->end - s->p >= 8)
		{
			uint64_t	v = id_load8(s->p);

			if (ID_HAS_ZERO(v ^ (ID_ONES * '"')) | ID_HAS_ZERO(v ^ (ID_ONES * '\\')) |
				ID_HAS_LESS(v, 0x20))
				break;
			s->p += 8;
		}
		while (s->p < s->end && (unsigned char) *s->p >= 0x20 &&
			   *s->p != '"' && *s->p != '\\')
			s->p++;
		if (s->p >= s->end)
			return id_syntax(s, "unterminated string");
		c = (unsigned char) *s->p;
		if (c < 0x20)
			return id_syntax(s, "control character in a string");
		if (out != NULL && s->p > run)
			iceberg_buf_append(out, run, s->p - run);
		if (c == '"')
		{
			s->p++;
			return true;
		}
		/* an escape */
		if (s->end - s->p < 2)
			return id_syntax(s, "unterminated string");
		switch (s->p[1])
		{
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				if (out != NULL)
				{
					static const char from[] = "\"\\/bfnrt";
					static const char to[] = "\"\\/\b\f\n\r\t";

					iceberg_buf_append(out, &to[strchr(from, s->p[1]) - from], 1);
				}
				s->p += 2;
				break;
			case 'u':
				{
					long		cp;

					if (s->end - s->p < 6 || (cp = id_hex4(s->p + 2)) < 0)
						return id_syntax(s, "invalid \\u escape");
					s->p += 6;
					if (cp >= 0xd800 && cp <= 0xdbff)
					{
						long		lo;

						if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' ||
							(lo = id_hex4(s->p + 2)) < 0xdc00 || lo > 0xdfff)
							return id_syntax(s, "invalid surrogate pair");
						cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
						s->p += 6;
					}
					else if (cp >= 0xdc00 && cp <= 0xdfff)
						return id_syntax(s, "invalid surrogate pair");
					else if (cp == 0)
						return id_syntax(s, "\\u0000 is not allowed");
					if (out != NULL)
						id_utf8(out, cp);
					break;
				}
			default:
				return id_syntax(s, "invalid escape");
		}
		run = s->p;
	}
}

/* A number at s->p; *integer says whether it has no fraction or exponent. */
static bool
id_number(IdScan *s, bool *integer)
{
	const char *d;

	*integer = true;
	if (s->p < s->end && *s->p == '-')
		s->p++;
	d = s->p;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	if (s->p == d || (*d == '0' && s->p - d > 1))
		return id_syntax(s, "invalid number");
	if (s->p < s->end && *s->p == '.')
	{
		*integer = false;
		d = ++s->p;
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
		if (s->p == d)
			return id_syntax(s, "invalid number");
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E'))
	{
		*integer = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		d = s->p;
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			s->p++;
		if (s->p == d)
			return id_syntax(s, "invalid number");
	}
	return true;
}

/* Skip any value, checking its syntax; depth counts enclosing containers. */
static bool
id_skip(IdScan *s, int depth)
{
	bool		integer;

	id_ws(s);
	if (s->p >= s->end)
		return id_syntax(s, "unexpected end of input");
	switch (*s->p)
	{
		case '"':
			return id_string(s, NULL);
		case '{':
		case '[':
			{
				char		close = *s->p == '{' ? '}' : ']';

				if (depth >= ICEBERG_IDENTITY_MAX_DEPTH)
					return id_syntax(s, "too deeply nested");
				s->p++;
				id_ws(s);
				if (s->p < s->end && *s->p == close)
				{
					s->p++;
					return true;
				}
				for (;;)
				{
					if (close == '}')
					{
						id_ws(s);
						if (s->p >= s->end || *s->p != '"')
							return id_syntax(s, "expected a member name");
						if (!id_string(s, NULL))
							return false;
						id_ws(s);
						if (s->p >= s->end || *s->p != ':')
							return id_syntax(s, "expected ':'");
						s->p++;
					}
					if (!id_skip(s, depth + 1))
						return false;
					id_ws(s);
					if (s->p < s->end && *s->p == ',')
						s->p++;
					else if (s->p < s->end && *s->p == close)
					{
						s->p++;
						return true;
					}
					else
						return id_syntax(s, "expected ',' or the end of a container");
				}
			}
		case 't':
			if (s->end - s->p >= 4 && memcmp(s->p, "true", 4) == 0)
				return (s->p += 4, true);
			break;
		case 'f':
			if (s->end - s->p >= 5 && memcmp(s->p, "false", 5) == 0)
				return (s->p += 5, true);
			break;
		case 'n':
			if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0)
				return (s->p += 4, true);
			break;
		default:
			if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
				return id_number(s, &integer);
			break;
	}
	return id_syntax(s, "unexpected character");
}

/* Is the value at s->p (after whitespace) null?  Consumes it if so. */
static bool
id_null(IdScan *s)
{
	id_ws(s);
	if (s->end - s->p >= 4 && memcmp(s->p, "null", 4) == 0)
	{
		s->p += 4;
		return true;
	}
	return false;
}

static bool
id_wrong_type(IdScan *s, const char *field, const char *type)
{
	tms_error_set(s->err, ICEBERG_ERR_MALFORMED,
				  "invalid table metadata: field \"%s\" is not %s", field, type);
	tms_error_detail(s->err, "The field belongs to table metadata.");
	return false;
}

/* A string member's value into *dst (replacing it); null leaves it NULL. */
static bool
id_string_member(IdScan *s, const char *field, char **dst)
{
	IcebergBuf	b = {0};

	io_free(*dst);
	*dst = NULL;
	if (id_null(s))
		return true;
	if (s->p >= s->end || *s->p != '"')
		return id_wrong_type(s, field, "a string");
	iceberg_buf_reserve(&b, 64);
	if (!id_string(s, &b))
	{
		iceberg_buf_free(&b);
		return false;
	}
	if (b.oom)
	{
		iceberg_buf_free(&b);
		return tms_error_set(s->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"), false;
	}
	*dst = b.data;
	return true;
}

/* A member name into b (reset first). */
static bool
id_name(IdScan *s, IcebergBuf *b)
{
	b->len = 0;
	id_ws(s);
	if (s->p >= s->end || *s->p != '"')
		return id_syntax(s, "expected a member name");
	if (!iceberg_buf_reserve(b, 32))
		return tms_error_set(s->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"), false;
	if (!id_string(s, b) || !iceberg_buf_append(b, "", 0))
		return false;
	id_ws(s);
	if (s->p >= s->end || *s->p != ':')
		return id_syntax(s, "expected ':'");
	s->p++;
	id_ws(s);
	return true;
}

/* After a member: ',' (true, *more) or the object's end (true, !*more). */
static bool
id_next(IdScan *s, bool *more)
{
	id_ws(s);
	if (s->p < s->end && (*s->p == ',' || *s->p == '}'))
	{
		*more = *s->p++ == ',';
		return true;
	}
	return id_syntax(s, "expected ',' or '}'");
}

/*
 * The "properties" object: gc.enabled's value into out (a string decoded,
 * any other value as its text, like jansson's compact dump of a scalar).
 */
static bool
id_properties(IdScan *s, IcebergBuf *name, IcebergTableIdentity *out)
{
	bool		more = true;

	if (id_null(s))
		return true;
	if (s->p >= s->end || *s->p != '{')
		return id_wrong_type(s, "properties", "an object");
	s->p++;
	id_ws(s);
	if (s->p < s->end && *s->p == '}')
	{
		s->p++;
		return true;
	}
	while (more)
	{
		if (!id_name(s, name))
			return false;
		if (name->len == strlen("gc.enabled") &&
			memcmp(name->data, "gc.enabled", name->len) == 0)
		{
			if (s->p < s->end && *s->p == '"')
			{
				if (!id_string_member(s, "properties", &out->gc_enabled))
					return false;
			}
			else
			{
				const char *v = s->p;

				if (!id_skip(s, 2))
					return false;
				io_free(out->gc_enabled);
				out->gc_enabled = io_strndup(v, s->p - v);
				if (out->gc_enabled == NULL)
					return tms_error_set(s->err, ICEBERG_ERR_OUT_OF_MEMORY,
										 "out of memory"), false;
			}
		}
		else if (!id_skip(s, 2))
			return false;
		if (!id_next(s, &more))
			return false;
	}
	return true;
}

/* The root object's members. */
static bool
id_root(IdScan *s, IcebergTableIdentity *out, bool *have_fv)
{
	IcebergBuf	name = {0};
	bool		more = true;
	bool		ok = true;
	int			seen = 0;		/* bits: the members below, by position */

	id_ws(s);
	if (s->p >= s->end || *s->p != '{')
	{
		tms_error_set(s->err, ICEBERG_ERR_MALFORMED,
					  "invalid table metadata: the document is not a JSON object");
		return false;
	}
	s->p++;
	id_ws(s);
	if (s->p < s->end && *s->p == '}')
	{
		s->p++;
		more = false;
	}
	while (ok && more)
	{
		if (!id_name(s, &name))
			ok = false;
		else if (strcmp(name.data, "format-version") == 0)
		{
			const char *v = s->p;
			bool		integer;

			*have_fv = false;
			if (id_null(s))
				;
			else if (s->p >= s->end || !(*s->p == '-' || (*s->p >= '0' && *s->p <= '9')))
				ok = id_wrong_type(s, "format-version", "an integer");
			else if (!id_number(s, &integer))
				ok = false;
			else if (!integer)
				ok = id_wrong_type(s, "format-version", "an integer");
			else
			{
				/* 1..3 are short; anything longer is out of range anyway */
				out->format_version = (s->p - v <= 4) ? atoi(v) : 99;
				*have_fv = true;
			}
			seen |= 1;
		}
		else if (strcmp(name.data, "table-uuid") == 0)
			ok = id_string_member(s, "table-uuid", &out->table_uuid), seen |= 2;
		else if (strcmp(name.data, "location") == 0)
			ok = id_string_member(s, "location", &out->location), seen |= 4;
		else if (strcmp(name.data, "properties") == 0)
		{
			io_free(out->gc_enabled);
			out->gc_enabled = NULL;
			ok = id_properties(s, &name, out);
			seen |= 8;
		}
		else
			ok = id_skip(s, 1);
		if (ok)
			ok = id_next(s, &more);
		/* a ',' ends the last member read: its value is whole */
		if (ok && more && s->head && seen == 15)
		{
			s->stopped = true;
			break;
		}
	}
	iceberg_buf_free(&name);
	if (!ok)
		return false;
	if (s->stopped)
		return true;
	id_ws(s);
	if (s->p != s->end)
		return id_syntax(s, "end of file expected");
	return true;
}

/* A required member that is absent. */
static bool
id_missing(TmsError *err, const char *field, const char *where)
{
	tms_error_set(err, ICEBERG_ERR_MALFORMED,
				  "invalid table metadata: missing required field \"%s\"", field);
	tms_error_detail(err, "The field is required in %s.", where);
	return false;
}

static bool id_checked(bool ok, bool have_fv, IcebergTableIdentity *out,
					   TmsError *err);

/*
 * iceberg_metadata_identity: see iceberg.h.
 */
bool
iceberg_metadata_identity(const void *data, size_t len, const IcebergLimits *limits,
						  IcebergTableIdentity *out, TmsError *err)
{
	IcebergLimits lim;
	const char *text;
	size_t		text_len;
	char	   *inflated = NULL;
	IdScan		s;
	bool		have_fv = false;
	bool		ok;

	tms_error_clear(err);
	memset(out, 0, sizeof(*out));
	iceberg_effective_limits(limits, &lim);
	if (!iceberg_metadata_text(data, len, lim.max_metadata_bytes, &text, &text_len,
							   &inflated, err))
		return false;
	memset(&s, 0, sizeof(s));
	s.start = s.p = text;
	s.end = s.p + text_len;
	s.err = err;
	ok = id_root(&s, out, &have_fv);
	io_free(inflated);
	return id_checked(ok, have_fv, out, err);
}

/*
 * The requirements on what id_root() decoded (ok: it succeeded); frees
 * *out on failure.
 */
static bool
id_checked(bool ok, bool have_fv, IcebergTableIdentity *out, TmsError *err)
{
	if (ok && !have_fv)
		ok = id_missing(err, "format-version", "table metadata");
	else if (ok && (out->format_version < 1 || out->format_version > 3))
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "unsupported table format version %d", out->format_version);
		tms_error_detail(err, "This reader supports format versions 1 to 3.");
		ok = false;
	}
	else if (ok && out->table_uuid == NULL && out->format_version >= 2)
		ok = id_missing(err, "table-uuid", "v2 table metadata");
	else if (ok && out->location == NULL)
		ok = id_missing(err, "location", "table metadata");
	if (!ok)
		iceberg_table_identity_free(out);
	return ok;
}

/*
 * The identity from the head of a file, data[0..len) (complete: the whole
 * file): true when the four members were seen and pass the checks, else
 * false with *out empty and nothing in *err (the whole scan decides).
 */
static bool
id_head(const char *data, size_t len, IcebergTableIdentity *out, TmsError *err)
{
	IdScan		s;
	bool		have_fv = false;

	memset(out, 0, sizeof(*out));
	/* gzip and zstd: the whole scan handles them */
	if (len >= 2 && (unsigned char) data[0] == 0x1f && (unsigned char) data[1] == 0x8b)
		return false;
	if (len >= 4 && (unsigned char) data[0] == 0x28 && (unsigned char) data[1] == 0xb5 &&
		(unsigned char) data[2] == 0x2f && (unsigned char) data[3] == 0xfd)
		return false;
	memset(&s, 0, sizeof(s));
	s.start = s.p = data;
	s.end = s.p + len;
	s.err = err;
	s.head = true;
	if (id_root(&s, out, &have_fv) && s.stopped &&
		id_checked(true, have_fv, out, err))
		return true;
	iceberg_table_identity_free(out);
	tms_error_clear(err);
	return false;
}

/*
 * Read from h into b until it holds want bytes or the file ends (*eof);
 * false with *err on a read error, the size cap or an interrupt.
 */
static bool
id_read_upto(const IcebergFileIO *io, void *h, const char *path, int64_t cap,
			 IcebergBuf *b, size_t want, bool *eof, TmsError *err)
{
	while (!*eof && b->len < want)
	{
		TmsError	ioerr;
		int64_t		n;

		tms_error_clear(&ioerr);
		if (!iceberg_buf_reserve(b, want - b->len))
			return tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"), false;
		n = io->io.read(io->io.arg, h, b->data + b->len, want - b->len, &ioerr);
		if (n < 0)
		{
			tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
						   "could not read \"%.200s\"", path);
			return false;
		}
		if (n == 0)
			*eof = true;
		if ((size_t) n > want - b->len)
			n = (int64_t) (want - b->len);
		b->len += (size_t) n;
		if ((int64_t) b->len > cap)
		{
			tms_error_set(err, ICEBERG_ERR_LIMIT, "file \"%s\" is too large", path);
			tms_error_detail(err, "The limit is %lld bytes.", (long long) cap);
			return false;
		}
		if (iceberg_check_interrupt(io, err))
			return false;
	}
	return true;
}

/*
 * iceberg_metadata_read_identity: see iceberg.h and the file header.
 */
bool
iceberg_metadata_read_identity(const IcebergFileIO *io, const char *path,
							   IcebergTableIdentity *out, TmsError *err)
{
	IcebergLimits limits;
	IcebergBuf	b = {0};
	TmsError	ioerr;
	void	   *h;
	int64_t		size;
	size_t		want = ICEBERG_IDENTITY_HEAD;
	bool		eof = false;
	bool		ok = true;
	bool		have = false;

	tms_error_clear(err);
	memset(out, 0, sizeof(*out));
	iceberg_effective_limits(io ? io->limits : NULL, &limits);
	if (io == NULL || io->io.open == NULL || io->io.read == NULL ||
		io->io.close == NULL || path == NULL)
		return tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
							 "no file reader given"), false;
	tms_error_clear(&ioerr);
	h = io->io.open(io->io.arg, path, &size, &ioerr);
	if (h == NULL)
	{
		tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
					   "could not read \"%.200s\"", path);
		return false;
	}
	if (size > limits.max_metadata_bytes)
	{
		tms_error_set(err, ICEBERG_ERR_LIMIT, "file \"%s\" is too large", path);
		tms_error_detail(err, "The file has %lld bytes; the limit is %lld.",
						 (long long) size, (long long) limits.max_metadata_bytes);
		ok = false;
	}
	/* the head, twice as much each time, until the identity is seen */
	while (ok && !have && !eof)
	{
		ok = id_read_upto(io, h, path, limits.max_metadata_bytes, &b, want, &eof, err);
		if (ok)
			have = id_head(b.data, b.len, out, err);
		want = want > SIZE_MAX / 4 ? SIZE_MAX / 2 : want * 2;
	}
	io->io.close(io->io.arg, h);
	/* the head did not settle it: the whole file decides, as it is */
	if (ok && !have)
		ok = iceberg_metadata_identity(b.data ? b.data : "", b.len, &limits, out, err);
	iceberg_buf_free(&b);
	if (!ok && err)
	{
		char		said[sizeof(err->detail)];

		snprintf(said, sizeof(said), "%s", err->detail);
		tms_error_detail(err, "%s%sThe file is \"%s\".", said,
						 said[0] ? " " : "", path);
	}
	return ok;
}

/*
 * iceberg_table_identity_free: see iceberg.h.
 */
void
iceberg_table_identity_free(IcebergTableIdentity *id)
{
	if (id == NULL)
		return;
	io_free(id->table_uuid);
	io_free(id->location);
	io_free(id->gc_enabled);
	memset(id, 0, sizeof(*id));
}
