/*-------------------------------------------------------------------------
 *
 * dsl_explain.c
 *		Render an explanation (dsl_explain()) as text for the evaluation
 *		log and for operators: one line per comparison or boolean leaf,
 *		with the values that decided it, then the result.
 *
 *		dataFiles = 80 (> 100 is false)
 *		avgDataFileSize < 128MB: not evaluated
 *		result: false
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl_int.h"

typedef struct OutBuf
{
	char	   *buf;
	size_t		cap;
	size_t		len;			/* length the full text needs */
} OutBuf;

static void out(OutBuf *o, const char *fmt,...) __attribute__((format(printf, 2, 3)));

/* Append formatted text, snprintf-style (counting what does not fit). */
static void
out(OutBuf *o, const char *fmt,...)
{
	va_list		ap;
	size_t		room = o->len < o->cap ? o->cap - o->len : 0;
	int			n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t) n;
}

/* Shortest text that reads back as d, with ".0" when it looks integral. */
static void
format_double(double d, char *buf, size_t size)
{
	for (int digits = 15; digits <= 17; digits++)
	{
		snprintf(buf, size, "%.*g", digits, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (strpbrk(buf, ".eEni") == NULL && strlen(buf) + 2 < size)
		strcat(buf, ".0");
}

/* Append the value of an evaluated node. */
static void
out_value(OutBuf *o, const DslExplainNode *e)
{
	char		d[40];

	switch (e->type)
	{
		case DSL_BOOLEAN:
			out(o, "%s", e->value.b ? "true" : "false");
			break;
		case DSL_LONG:
			out(o, "%" PRId64, e->value.l);
			break;
		case DSL_DOUBLE:
			format_double(e->value.d, d, sizeof(d));
			out(o, "%s", d);
			break;
		case DSL_STRING:
			out(o, "'%s'", e->value.s ? e->value.s : "");
			break;
	}
}

/* Append the source text of a node. */
static void
out_text(OutBuf *o, const char *src, const DslExplainNode *e)
{
	out(o, "%.*s", (int) e->length, src + e->offset);
}

static const char *
outcome_text(DslOutcome o)
{
	switch (o)
	{
		case DSL_DIVISION_BY_ZERO:
			return "division by zero";
		case DSL_OVERFLOW:
			return "numeric overflow";
		case DSL_MISSING_METRIC:
			return "a metric the condition needs is missing";
		case DSL_MISSING_FILES:
			return "the condition needs the data file list, which was not provided";
		case DSL_FILE_SOURCE_ERROR:
			return "the data file list could not be read";
		default:
			return "ok";
	}
}

/* "name = value" with provenance for properties and file counts. */
static void
out_binding(OutBuf *o, const char *src, const DslExplainNode *nodes, int32_t i)
{
	const DslExplainNode *e = &nodes[i];

	out_text(o, src, e);
	if (e->state == DSL_NODE_NOT_EVALUATED)
	{
		out(o, " not evaluated");
		return;
	}
	if (e->state == DSL_NODE_PER_FILE)
	{
		out(o, " per file");
		return;
	}
	if (e->state == DSL_NODE_FAILED)
	{
		out(o, " failed: %s", outcome_text(e->outcome));
		return;
	}
	out(o, " = ");
	out_value(o, e);
	if (e->kind == DSL_KIND_PROPERTY)
	{
		if (e->property_found)
			out(o, " (table property)");
		else if (e->raw)
			out(o, " (default: the property value \"%s\" is not a %s)",
				e->raw, dsl_type_name(e->type));
		else
			out(o, " (default: no such table property)");
	}
	else if (e->kind == DSL_KIND_COUNT)
		out(o, " (of %" PRId64 " data files)", e->files);
}

/* Whether node i is worth naming with its value inside a larger one. */
static bool
is_binding(const DslExplainNode *e)
{
	return e->kind == DSL_KIND_VARIABLE || e->kind == DSL_KIND_PROPERTY ||
		e->kind == DSL_KIND_COUNT ||
		(e->kind == DSL_KIND_FUNCTION && e->state == DSL_NODE_EVALUATED);
}

/*
 * Collect the bindings below node i (not i itself), in source order, as
 * " where a = 1, b = 2"; does not descend into bindings, except into
 * countDataFiles() for the values its lambda computed once per call.
 */
static void
out_where(OutBuf *o, const char *src, const DslExplainNode *nodes, int32_t i,
		  bool *first)
{
	const DslExplainNode *e = &nodes[i];
	int32_t		kids[2] = {e->left, e->right};

	for (int k = 0; k < 2; k++)
	{
		int32_t		c = kids[k];

		if (c < 0)
			continue;
		if (is_binding(&nodes[c]) && nodes[c].state != DSL_NODE_PER_FILE)
		{
			out(o, "%s", *first ? " where " : ", ");
			*first = false;
			out_binding(o, src, nodes, c);
			/* values computed once inside a lambda are worth showing too */
			if (nodes[c].kind != DSL_KIND_COUNT)
				continue;
		}
		out_where(o, src, nodes, c, first);
	}
}

/* One line for a comparison or another boolean leaf. */
static void
out_line(OutBuf *o, const char *src, const DslExplainNode *nodes, int32_t i)
{
	const DslExplainNode *e = &nodes[i];
	bool		first = true;

	if (e->state == DSL_NODE_NOT_EVALUATED)
	{
		out_text(o, src, e);
		out(o, ": not evaluated\n");
		return;
	}
	if (e->state == DSL_NODE_FAILED)
	{
		out_text(o, src, e);
		out(o, ": %s", outcome_text(e->outcome));
		out_where(o, src, nodes, i, &first);
		out(o, "\n");
		return;
	}
	if (e->kind == DSL_KIND_COMPARISON)
	{
		const DslExplainNode *l = &nodes[e->left];
		const DslExplainNode *r = &nodes[e->right];

		if (r->kind == DSL_KIND_LITERAL && l->kind != DSL_KIND_LITERAL)
		{
			out_binding(o, src, nodes, e->left);
			out(o, " (%s ", e->op);
			out_text(o, src, r);
			out(o, " is %s)", e->value.b ? "true" : "false");
			if (!is_binding(l) || l->kind == DSL_KIND_COUNT)
				out_where(o, src, nodes, e->left, &first);
		}
		else
		{
			out_text(o, src, e);
			out(o, " is %s", e->value.b ? "true" : "false");
			out_where(o, src, nodes, i, &first);
		}
		out(o, "\n");
		return;
	}
	out_binding(o, src, nodes, i);
	out_where(o, src, nodes, i, &first);
	out(o, "\n");
}

/* Walk the logical structure down to the lines. */
static void
out_tree(OutBuf *o, const char *src, const DslExplainNode *nodes, int32_t i)
{
	const DslExplainNode *e = &nodes[i];

	if (e->kind == DSL_KIND_LOGICAL && e->state != DSL_NODE_NOT_EVALUATED)
	{
		out_tree(o, src, nodes, e->left);
		out_tree(o, src, nodes, e->right);
		return;
	}
	if (e->kind == DSL_KIND_UNARY && e->type == DSL_BOOLEAN &&
		e->state != DSL_NODE_NOT_EVALUATED &&
		(nodes[e->left].kind == DSL_KIND_LOGICAL ||
		 nodes[e->left].kind == DSL_KIND_COMPARISON))
	{
		out_tree(o, src, nodes, e->left);
		return;
	}
	out_line(o, src, nodes, i);
}

/* See dsl.h. */
size_t
dsl_explain_text(const DslProgram *p, const DslExplainNode *nodes,
				 bool result, DslOutcome outcome, char *buf, size_t buflen)
{
	OutBuf		o = {buf, buflen, 0};

	if (buflen > 0)
		buf[0] = '\0';
	if (outcome != DSL_MISSING_METRIC && outcome != DSL_MISSING_FILES &&
		p->nexplain > 0)
		out_tree(&o, p->source, nodes, 0);
	if (outcome == DSL_OK)
		out(&o, "result: %s", result ? "true" : "false");
	else
		out(&o, "result: false (%s)", outcome_text(outcome));
	return o.len;
}

/* See dsl.h. */
size_t
dsl_explain_score_text(const DslProgram *p, const DslExplainNode *nodes,
					   double score, DslOutcome outcome, char *buf, size_t buflen)
{
	OutBuf		o = {buf, buflen, 0};
	char		num[64];

	if (buflen > 0)
		buf[0] = '\0';
	if (outcome != DSL_MISSING_METRIC && outcome != DSL_MISSING_FILES &&
		p->nexplain > 0)
		out_tree(&o, p->source, nodes, 0);
	format_double(score, num, sizeof(num));
	if (outcome == DSL_OK)
		out(&o, "score: %s", num);
	else
		out(&o, "score: 0 (%s)", outcome_text(outcome));
	return o.len;
}
