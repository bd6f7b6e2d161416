/*-------------------------------------------------------------------------
 *
 * DslError.c
 *		Compile errors of the policy condition language: the message, the
 *		hint, and the position of the offending token (line, column, a
 *		caret excerpt of the source line).
 *
 * Only the first error of a compilation is recorded: the lexer and the
 * parser stop at it, and every later report is ignored.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dsl/dsl_int.h"

/* Whether c is a UTF-8 continuation byte. */
static bool
is_cont(unsigned char c)
{
	return (c & 0xC0) == 0x80;
}

/*
 * Fill the position fields and the caret excerpt of err for byte offset
 * off of src[0 .. len).
 */
static void
fill_position(DslError *err, const char *src, int32_t len, int32_t off)
{
	int32_t		line = 1,
				col = 1,
				chars = 0,
				line_start = 0,
				line_end,
				from,
				to;
	size_t		n = 0;
	char	   *x = err->excerpt;
	size_t		cap = sizeof(err->excerpt);
	int			window = 72;
	int			k;

	if (off > len)
		off = len;
	for (int32_t i = 0; i < off; i++)
	{
		unsigned char c = (unsigned char) src[i];

		if (is_cont(c))
			continue;
		chars++;
		if (c == '\n')
		{
			line++;
			col = 1;
			line_start = i + 1;
		}
		else
			col++;
	}
	err->offset = off;
	err->line = line;
	err->column = col;
	err->position = chars + 1;

	/* the excerpt: a window of the line around the error */
	line_end = line_start;
	while (line_end < len && src[line_end] != '\n')
		line_end++;
	from = line_start;
	k = 0;
	for (int32_t i = off; i > line_start; i--)
		if (!is_cont((unsigned char) src[i]) && ++k > window / 2)
		{
			from = i;
			break;
		}
	to = from;
	k = 0;
	while (to < line_end && k < window)
	{
		to++;
		while (to < line_end && is_cont((unsigned char) src[to]))
			to++;
		k++;
	}
	if (from > line_start)
	{
		memcpy(x, "...", 3);
		n = 3;
	}
	for (int32_t i = from; i < to && n + 8 < cap; i++)
	{
		unsigned char c = (unsigned char) src[i];

		x[n++] = (c < 0x20 && c != '\t') || c == 0x7f ? ' ' : (char) c;
	}
	if (to < line_end && n + 4 < cap)
	{
		memcpy(x + n, "...", 3);
		n += 3;
	}
	x[n++] = '\n';
	if (from > line_start)
		for (k = 0; k < 3 && n + 2 < cap; k++)
			x[n++] = ' ';
	for (int32_t i = from; i < off && n + 2 < cap; i++)
	{
		unsigned char c = (unsigned char) src[i];

		if (is_cont(c))
			continue;
		x[n++] = c == '\t' ? '\t' : ' ';
	}
	x[n++] = '^';
	x[n] = '\0';
}

/* See dsl_int.h. */
void *
dsl_error_at(DslParser *ps, DslErrorKind kind, int32_t off, const char *hint,
			 const char *fmt,...)
{
	va_list		ap;
	DslError   *err = ps->err;

	if (ps->failed)
		return NULL;
	ps->failed = true;
	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	snprintf(err->hint, sizeof(err->hint), "%s", hint ? hint : "");
	fill_position(err, ps->src, ps->len, off);
	return NULL;
}

/* See dsl_int.h. */
void *
dsl_out_of_memory(DslParser *ps)
{
	return dsl_error_at(ps, DSL_ERROR_OUT_OF_MEMORY, ps->tok.offset, NULL,
						"out of memory");
}

/* See dsl_int.h. */
void *
dsl_syntax_error(DslParser *ps, const DslToken *t, const char *hint)
{
	if (t->kind == T_END)
		return dsl_error_at(ps, DSL_ERROR_SYNTAX, t->offset, hint,
							"syntax error at end of input");
	return dsl_error_at(ps, DSL_ERROR_SYNTAX, t->offset, hint,
						"syntax error at or near \"" TOKFMT "\"", TOKARG(t));
}
