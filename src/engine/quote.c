/*-------------------------------------------------------------------------
 *
 * quote.c
 *	  Escaping for each engine (Spark and Trino identifiers and string
 *	  literals, JSON strings), the tokeniser that checks a Trino WHERE
 *	  expression, and exact number reading (its string buffer is
 *	  io/util/strbuf.h's, its error value io/io_error.h's TmsError).
 *
 * The escaping rules (statement.h):
 *	- Spark identifier: `name`, a backtick doubled;
 *	- Spark string literal: '...', backslash and single quote escaped with
 *	  a backslash (Spark joins adjacent literals, so '' would end the
 *	  literal and start another), newline, CR and tab as \n \r \t, every
 *	  other control byte as \u00XX: the literal is one line;
 *	- Trino identifier: "name", a double quote doubled;
 *	- Trino string literal: '...', a single quote doubled (newlines may
 *	  stay: Trino literals span lines);
 *	- JSON string: ", \ and control bytes escaped, UTF-8 kept.
 * Every function takes a NUL-terminated string that the caller has
 * checked to be valid UTF-8.
 *
 * The Trino WHERE check is a tokeniser, not a parser: it proves that the
 * text is a sequence of tokens of one expression (identifiers, quoted
 * identifiers, string literals, numbers, operators, balanced parentheses
 * and brackets) with no statement separator or comment, so that appended
 * after "WHERE" it cannot end the statement or hide text from it.
 *
 * Plain C, no PostgreSQL header.
 *
 * src/engine/quote.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/statement_int.h"

void
eng_show(char *out, size_t outsz, const char *s, size_t len, size_t max)
{
	size_t		o = 0;
	size_t		i;

	if (outsz == 0)
		return;
	for (i = 0; i < len && i < max; i++)
	{
		unsigned char c = (unsigned char) s[i];
		char		tmp[8];
		size_t		n;

		if (c == '"' || c == '\\')
			n = (size_t) snprintf(tmp, sizeof(tmp), "\\%c", c);
		else if (c == '\n')
			n = (size_t) snprintf(tmp, sizeof(tmp), "\\n");
		else if (c < 0x20 || c == 0x7F)
			n = (size_t) snprintf(tmp, sizeof(tmp), "\\x%02x", c);
		else
		{
			tmp[0] = (char) c;
			n = 1;
		}
		if (o + n + 4 >= outsz)
			break;
		memcpy(out + o, tmp, n);
		o += n;
	}
	if (i < len && o + 4 < outsz)
	{
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

/* ---- numbers ---- */

int
eng_parse_int64(const char *s, size_t len, int64_t *out)
{
	size_t		i = 0;
	bool		neg = false;
	uint64_t	v = 0;
	uint64_t	limit;

	if (len > 0 && s[0] == '-')
	{
		neg = true;
		i = 1;
	}
	if (i >= len)
		return 0;
	for (; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	limit = neg ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
	for (i = neg ? 1 : 0; i < len; i++)
	{
		unsigned	d = (unsigned) (s[i] - '0');

		if (v > (limit - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (neg)
		*out = (v == (uint64_t) INT64_MAX + 1) ? INT64_MIN : -(int64_t) v;
	else
		*out = (int64_t) v;
	return 1;
}

bool
eng_parse_whole(const char *s, int64_t *out)
{
	size_t		len;
	const char *p;
	const char *end;
	bool		neg = false;
	char		digits[40];
	size_t		nd = 0;
	long		exp10 = 0;
	bool		overflow = false;
	uint64_t	v = 0;
	size_t		i;

	if (s == NULL)
		return false;
	len = strlen(s);
	p = s;
	end = s + len;
	/* a JSON string holding a number: no escapes in a number */
	if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
	{
		p = s + 1;
		end = s + len - 1;
	}
	if (p < end && *p == '-')
	{
		neg = true;
		p++;
	}
	if (p >= end || *p < '0' || *p > '9')
		return false;
	/* integer part, then fraction: significant digits into digits[] */
	while (p < end && *p >= '0' && *p <= '9')
	{
		if (nd > 0 || *p != '0')
		{
			if (nd < sizeof(digits))
				digits[nd++] = *p;
			else
			{
				overflow = true;
				exp10++;
			}
		}
		p++;
	}
	if (p < end && *p == '.')
	{
		p++;
		if (p >= end || *p < '0' || *p > '9')
			return false;
		while (p < end && *p >= '0' && *p <= '9')
		{
			if (nd > 0 || *p != '0')
			{
				if (nd < sizeof(digits))
					digits[nd++] = *p;
				else if (*p != '0')
					return false;	/* a non-zero digit far right */
				else
				{
					/* a zero past the buffer: no effect on value */
					p++;
					continue;
				}
			}
			exp10--;
			p++;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E'))
	{
		bool		eneg = false;
		long		e = 0;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = (*p++ == '-');
		if (p >= end || *p < '0' || *p > '9')
			return false;
		while (p < end && *p >= '0' && *p <= '9')
		{
			if (e < 100000)
				e = e * 10 + (*p - '0');
			p++;
		}
		exp10 += eneg ? -e : e;
	}
	if (p != end)
		return false;
	/* trailing zeros of the significant digits move into the exponent */
	while (nd > 0 && digits[nd - 1] == '0')
	{
		nd--;
		exp10++;
	}
	if (nd == 0)
	{
		*out = 0;
		return true;
	}
	if (overflow || exp10 < 0 || (long) nd + exp10 > 19)
		return false;
	for (i = 0; i < nd + (size_t) exp10; i++)
	{
		unsigned	d = i < nd ? (unsigned) (digits[i] - '0') : 0;
		uint64_t	limit = neg ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;

		if (v > (limit - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg)
		*out = (v == (uint64_t) INT64_MAX + 1) ? INT64_MIN : -(int64_t) v;
	else
		*out = (int64_t) v;
	return true;
}

/* ---- UTF-8 ---- */

bool
eng_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		i = 0;

	while (i < len)
	{
		unsigned char c = p[i];
		size_t		n;
		unsigned	cp;
		size_t		k;

		if (c < 0x80)
		{
			if (c == 0)
				return false;
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
		{
			n = 1;
			cp = c & 0x1F;
		}
		else if (c >= 0xE0 && c <= 0xEF)
		{
			n = 2;
			cp = c & 0x0F;
		}
		else if (c >= 0xF0 && c <= 0xF4)
		{
			n = 3;
			cp = c & 0x07;
		}
		else
			return false;
		if (i + n >= len)
			return false;
		for (k = 1; k <= n; k++)
		{
			if (i + k >= len || (p[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3F);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
			(cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += n + 1;
	}
	return true;
}

/* ---- quoting ---- */

/* s between two q, each q inside doubled (SQL's rule for its quotes) */
static void
quote_doubling(IoStrBuf *b, const char *s, char q)
{
	io_sb_putc(b, q);
	for (const char *p = s; *p; p++)
	{
		if (*p == q)
			io_sb_putc(b, q);
		io_sb_putc(b, *p);
	}
	io_sb_putc(b, q);
}

void
eng_spark_ident(IoStrBuf *b, const char *name)
{
	quote_doubling(b, name, '`');
}

void
eng_spark_string(IoStrBuf *b, const char *s)
{
	const unsigned char *p;

	io_sb_putc(b, '\'');
	for (p = (const unsigned char *) s; *p; p++)
	{
		switch (*p)
		{
			case '\\':
				io_sb_puts(b, "\\\\");
				break;
			case '\'':
				io_sb_puts(b, "\\'");
				break;
			case '\n':
				io_sb_puts(b, "\\n");
				break;
			case '\r':
				io_sb_puts(b, "\\r");
				break;
			case '\t':
				io_sb_puts(b, "\\t");
				break;
			default:
				if (*p < 0x20 || *p == 0x7F)
					io_sb_printf(b, "\\u%04x", *p);
				else
					io_sb_putc(b, (char) *p);
		}
	}
	io_sb_putc(b, '\'');
}

void
eng_trino_ident(IoStrBuf *b, const char *name)
{
	quote_doubling(b, name, '"');
}

void
eng_trino_string(IoStrBuf *b, const char *s)
{
	quote_doubling(b, s, '\'');
}

void
eng_json_string(IoStrBuf *b, const char *s)
{
	const unsigned char *p;

	io_sb_putc(b, '"');
	for (p = (const unsigned char *) s; *p; p++)
	{
		switch (*p)
		{
			case '"':
				io_sb_puts(b, "\\\"");
				break;
			case '\\':
				io_sb_puts(b, "\\\\");
				break;
			case '\n':
				io_sb_puts(b, "\\n");
				break;
			case '\r':
				io_sb_puts(b, "\\r");
				break;
			case '\t':
				io_sb_puts(b, "\\t");
				break;
			default:
				if (*p < 0x20 || *p == 0x7F)
					io_sb_printf(b, "\\u%04x", *p);
				else
					io_sb_putc(b, (char) *p);
		}
	}
	io_sb_putc(b, '"');
}

static bool
is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool
is_ident_char(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

void
eng_dotted_part(IoStrBuf *b, const char *name)
{
	const char *p;
	bool		plain = is_ident_start(name[0]);

	for (p = name; plain && *p; p++)
		plain = is_ident_char(*p);
	if (plain)
		io_sb_puts(b, name);
	else
		eng_spark_ident(b, name);
}

/* ---- the Trino WHERE tokeniser ---- */

static int
where_fail(TmsError *err, const char *s, size_t at, const char *what)
{
	char		shown[160];
	size_t		len = strlen(s);

	eng_show(shown, sizeof(shown), s + at, len - at, 40);
	tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
				  "option \"where\" is not a single SQL expression");
	tms_error_detail(err, "%s at byte %zu: \"%s\".", what, at, shown);
	tms_error_hint(err, "Give one boolean expression over the table's columns, "
				   "without ';' or comments.");
	return -1;
}

int
eng_trino_where_check(const char *s, TmsError *err)
{
	size_t		i = 0;
	size_t		len = strlen(s);
	char		stack[64];
	size_t		depth = 0;
	size_t		ntokens = 0;

	while (i < len)
	{
		char		c = s[i];
		size_t		start = i;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		{
			i++;
			continue;
		}
		ntokens++;
		if (c == '\'' || c == '"')
		{
			/* a string literal or quoted identifier: the quote doubled */
			i++;
			for (;;)
			{
				if (i >= len)
					return where_fail(err, s, start,
									  c == '\'' ? "unterminated string literal"
									  : "unterminated quoted identifier");
				if (s[i] == c)
				{
					if (i + 1 < len && s[i + 1] == c)
					{
						i += 2;
						continue;
					}
					i++;
					break;
				}
				i++;
			}
			continue;
		}
		if (is_ident_start(c))
		{
			while (i < len && is_ident_char(s[i]))
				i++;
			continue;
		}
		if ((c >= '0' && c <= '9') || (c == '.' && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9'))
		{
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			if (i < len && s[i] == '.')
			{
				i++;
				while (i < len && s[i] >= '0' && s[i] <= '9')
					i++;
			}
			if (i < len && (s[i] == 'e' || s[i] == 'E'))
			{
				i++;
				if (i < len && (s[i] == '+' || s[i] == '-'))
					i++;
				if (i >= len || s[i] < '0' || s[i] > '9')
					return where_fail(err, s, start, "invalid number");
				while (i < len && s[i] >= '0' && s[i] <= '9')
					i++;
			}
			if (i < len && (is_ident_char(s[i]) || s[i] == '.'))
				return where_fail(err, s, start, "invalid number");
			continue;
		}
		switch (c)
		{
			case ';':
				return where_fail(err, s, i, "statement separator");
			case '-':
				if (i + 1 < len && s[i + 1] == '-')
					return where_fail(err, s, i, "comment");
				i++;
				continue;
			case '/':
				if (i + 1 < len && s[i + 1] == '*')
					return where_fail(err, s, i, "comment");
				i++;
				continue;
			case '(':
			case '[':
				if (depth >= sizeof(stack))
					return where_fail(err, s, i, "nested too deeply");
				stack[depth++] = c;
				i++;
				continue;
			case ')':
			case ']':
				if (depth == 0 || stack[depth - 1] != (c == ')' ? '(' : '['))
					return where_fail(err, s, i, "unbalanced parenthesis");
				depth--;
				i++;
				continue;
			case '<':
				i += (i + 1 < len && (s[i + 1] == '=' || s[i + 1] == '>')) ? 2 : 1;
				continue;
			case '>':
				i += (i + 1 < len && s[i + 1] == '=') ? 2 : 1;
				continue;
			case '!':
				if (i + 1 < len && s[i + 1] == '=')
				{
					i += 2;
					continue;
				}
				break;
			case '|':
				if (i + 1 < len && s[i + 1] == '|')
				{
					i += 2;
					continue;
				}
				break;
			case '=':
			case '+':
			case '*':
			case '%':
			case ',':
			case '.':
				i++;
				continue;
			default:
				break;
		}
		if ((unsigned char) c >= 0x80)
			return where_fail(err, s, i, "non-ASCII character outside a literal");
		return where_fail(err, s, i, "unexpected character");
	}
	if (depth > 0)
		return where_fail(err, s, len, "unbalanced parenthesis");
	if (ntokens == 0)
		return where_fail(err, s, 0, "empty expression");
	return 0;
}
