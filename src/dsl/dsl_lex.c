/*-------------------------------------------------------------------------
 *
 * dsl_lex.c
 *		Lexer of the policy condition language: numbers with their size
 *		and duration suffixes, quoted strings with their escapes, names,
 *		keywords (AND, OR, true, false; any case) and operators.
 *
 * The parser pulls tokens one at a time (dsl_advance()) with one token of
 * lookahead (dsl_peek()).  The source is the program's NUL-terminated copy
 * with a spare NUL, so the lexer may look one byte past any character.  A
 * bad token is reported through dsl_error_at() at its position; the
 * messages also point at the usual mistakes ("=", "<>", "&&", "||").
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl_int.h"

/* Whether c may start an identifier: an ASCII letter or "_". */
static bool
is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Whether c may continue an identifier: a letter, a digit or "_". */
static bool
is_ident_char(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Whether c is an ASCII digit. */
static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* See dsl_int.h. */
bool
dsl_word_is(const char *s, int32_t len, const char *word)
{
	size_t		wl = strlen(word);

	if ((size_t) len != wl)
		return false;
	for (size_t i = 0; i < wl; i++)
	{
		char		c = s[i];

		if (c >= 'A' && c <= 'Z')
			c = (char) (c - 'A' + 'a');
		if (c != word[i])
			return false;
	}
	return true;
}

/* Lex a number starting at ps->pos into t: digits, fraction, suffix. */
static bool
lex_number(DslParser *ps, DslToken *t)
{
	const char *s = ps->src;
	int32_t		i = ps->pos;
	int32_t		suffix_start,
				end;
	bool		is_double = false;
	int64_t		mult = 1;
	int64_t		v = 0;
	bool		overflow = false;

	while (is_digit(s[i]))
	{
		int			d = s[i] - '0';

		if (v > (INT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
		i++;
	}
	if (s[i] == '.' && is_digit(s[i + 1]))
	{
		is_double = true;
		i++;
		while (is_digit(s[i]))
			i++;
	}
	suffix_start = i;
	while (is_ident_char(s[i]))
		i++;
	end = i;
	t->offset = ps->pos;
	t->length = end - ps->pos;
	if (end > suffix_start)
	{
		const char *sf = s + suffix_start;
		int32_t		sl = end - suffix_start;

		if (sl == 2 && (memcmp(sf, "KB", 2) == 0 || memcmp(sf, "kb", 2) == 0))
			mult = INT64_C(1024);
		else if (sl == 2 && (memcmp(sf, "MB", 2) == 0 || memcmp(sf, "mb", 2) == 0))
			mult = INT64_C(1024) * 1024;
		else if (sl == 2 && (memcmp(sf, "GB", 2) == 0 || memcmp(sf, "gb", 2) == 0))
			mult = INT64_C(1024) * 1024 * 1024;
		else if (sl == 1 && sf[0] == 'm')
			mult = INT64_C(60000);
		else if (sl == 1 && sf[0] == 'h')
			mult = INT64_C(3600000);
		else if (sl == 1 && sf[0] == 'd')
			mult = INT64_C(86400000);
		else
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, suffix_start,
						 "Size suffixes are KB, MB and GB (or kb, mb, gb); duration suffixes are m, h and d.",
						 "invalid suffix \"%.*s\" on numeric literal",
						 sl > 40 ? 40 : (int) sl, sf);
			return false;
		}
	}
	if (is_double)
	{
		char	   *endp;
		double		d = strtod(s + ps->pos, &endp);

		if (endp != s + suffix_start)
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, ps->pos, NULL,
						 "invalid numeric literal \"" TOKFMT "\"", TOKARG(t));
			return false;
		}
		d *= (double) mult;
		if (!isfinite(d))
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, ps->pos, NULL,
						 "numeric literal \"" TOKFMT "\" is out of range for type DOUBLE",
						 TOKARG(t));
			return false;
		}
		t->kind = T_DOUBLE;
		t->d = d;
	}
	else
	{
		if (overflow || v > INT64_MAX / mult)
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, ps->pos,
						 "LONG values range from -9223372036854775808 to 9223372036854775807.",
						 "numeric literal \"" TOKFMT "\" is out of range for type LONG",
						 TOKARG(t));
			return false;
		}
		t->kind = T_LONG;
		t->l = v * mult;
	}
	ps->pos = end;
	return true;
}

/*
 * Lex a quoted string starting at ps->pos: find its end first (so the
 * decoded copy is sized by the string, not by the rest of the input), then
 * decode the escapes into the arena.
 */
static bool
lex_string(DslParser *ps, DslToken *t)
{
	const char *s = ps->src;
	char		q = s[ps->pos];
	int32_t		i = ps->pos + 1;
	int32_t		end;
	char	   *out;
	size_t		n = 0;

	for (;;)
	{
		if (i >= ps->len)
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, ps->pos,
						 "Close the string with the quote that opened it.",
						 "unterminated quoted string");
			return false;
		}
		if (s[i] == q)
			break;
		if (s[i] == '\0')
		{
			dsl_error_at(ps, DSL_ERROR_SYNTAX, i, NULL,
						 "invalid character 0x00 in quoted string");
			return false;
		}
		if (s[i] == '\\')
		{
			char		e = s[i + 1];

			if (i + 1 >= ps->len)
			{
				i++;			/* reported as unterminated next round */
				continue;
			}
			if (e != '\\' && e != '\'' && e != '"' && e != 'n' && e != 't' && e != 'r')
			{
				dsl_error_at(ps, DSL_ERROR_SYNTAX, i,
							 "Valid escapes are \\\\, \\', \\\", \\n, \\t and \\r.",
							 "invalid escape sequence \"\\%c\"",
							 (e >= 0x20 && e < 0x7f) ? e : '?');
				return false;
			}
			i += 2;
		}
		else
			i++;
	}
	end = i;
	out = dsl_arena_alloc(ps->p, (size_t) (end - ps->pos));
	if (out == NULL)
	{
		dsl_out_of_memory(ps);
		return false;
	}
	for (i = ps->pos + 1; i < end; i++)
	{
		char		c = s[i];

		if (c == '\\')
		{
			c = s[++i];
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	t->kind = T_STRING;
	t->s = out;
	t->offset = ps->pos;
	t->length = end + 1 - ps->pos;
	ps->pos = end + 1;
	return true;
}

/* Lex the next token into t.  False (with the error set) on a bad token. */
static bool
lex(DslParser *ps, DslToken *t)
{
	const char *s = ps->src;
	char		c;
	int32_t		start;

	while (ps->pos < ps->len &&
		   (s[ps->pos] == ' ' || s[ps->pos] == '\t' || s[ps->pos] == '\n' ||
			s[ps->pos] == '\r' || s[ps->pos] == '\f' || s[ps->pos] == '\v'))
		ps->pos++;
	memset(t, 0, sizeof(*t));
	start = ps->pos;
	t->offset = start;
	if (start >= ps->len)
	{
		t->kind = T_END;
		return true;
	}
	c = s[start];
	if (is_digit(c))
		return lex_number(ps, t);
	if (c == '\'' || c == '"')
		return lex_string(ps, t);
	if (is_ident_start(c))
	{
		int32_t		i = start;

		while (i < ps->len && is_ident_char(s[i]))
			i++;
		t->length = i - start;
		ps->pos = i;
		if (dsl_word_is(s + start, t->length, "and"))
			t->kind = T_AND;
		else if (dsl_word_is(s + start, t->length, "or"))
			t->kind = T_OR;
		else if (dsl_word_is(s + start, t->length, "true"))
			t->kind = T_TRUE;
		else if (dsl_word_is(s + start, t->length, "false"))
			t->kind = T_FALSE;
		else
			t->kind = T_IDENT;
		return true;
	}

	t->length = 1;
	switch (c)
	{
		case '(':
			t->kind = T_LPAREN;
			break;
		case ')':
			t->kind = T_RPAREN;
			break;
		case ',':
			t->kind = T_COMMA;
			break;
		case '.':
			t->kind = T_DOT;
			break;
		case '+':
			t->kind = T_PLUS;
			break;
		case '*':
			t->kind = T_STAR;
			break;
		case '/':
			t->kind = T_SLASH;
			break;
		case '-':
			if (s[start + 1] == '>')
			{
				t->kind = T_ARROW;
				t->length = 2;
			}
			else
				t->kind = T_MINUS;
			break;
		case '!':
			if (s[start + 1] == '=')
			{
				t->kind = T_NE;
				t->length = 2;
			}
			else
				t->kind = T_NOT;
			break;
		case '=':
			if (s[start + 1] == '=')
			{
				t->kind = T_EQ;
				t->length = 2;
				break;
			}
			dsl_error_at(ps, DSL_ERROR_SYNTAX, start,
						 "Use == to compare for equality.",
						 "syntax error at or near \"=\"");
			return false;
		case '<':
			if (s[start + 1] == '=')
			{
				t->kind = T_LE;
				t->length = 2;
			}
			else if (s[start + 1] == '>')
			{
				dsl_error_at(ps, DSL_ERROR_SYNTAX, start,
							 "Use != to compare for inequality.",
							 "syntax error at or near \"<>\"");
				return false;
			}
			else
				t->kind = T_LT;
			break;
		case '>':
			if (s[start + 1] == '=')
			{
				t->kind = T_GE;
				t->length = 2;
			}
			else
				t->kind = T_GT;
			break;
		case '&':
			dsl_error_at(ps, DSL_ERROR_SYNTAX, start,
						 "Use AND for logical conjunction.",
						 "syntax error at or near \"%s\"",
						 s[start + 1] == '&' ? "&&" : "&");
			return false;
		case '|':
			dsl_error_at(ps, DSL_ERROR_SYNTAX, start,
						 "Use OR for logical disjunction.",
						 "syntax error at or near \"%s\"",
						 s[start + 1] == '|' ? "||" : "|");
			return false;
		default:
			if ((unsigned char) c >= 0x21 && (unsigned char) c < 0x7f)
				dsl_error_at(ps, DSL_ERROR_SYNTAX, start, NULL,
							 "invalid character \"%c\"", c);
			else
				dsl_error_at(ps, DSL_ERROR_SYNTAX, start, NULL,
							 "invalid character 0x%02x", (unsigned char) c);
			return false;
	}
	ps->pos = start + t->length;
	return true;
}

/* See dsl_int.h. */
bool
dsl_advance(DslParser *ps)
{
	if (ps->has_ahead)
	{
		ps->tok = ps->ahead;
		ps->has_ahead = false;
		return true;
	}
	return lex(ps, &ps->tok);
}

/* See dsl_int.h. */
const DslToken *
dsl_peek(DslParser *ps)
{
	if (!ps->has_ahead)
	{
		if (!lex(ps, &ps->ahead))
			return NULL;
		ps->has_ahead = true;
	}
	return &ps->ahead;
}
