/*-------------------------------------------------------------------------
 *
 * condition.c
 *	  Policy conditions inside PostgreSQL (condition.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "bridge/condition.h"

static void *
dsl_palloc(void *arg, size_t size)
{
	return palloc_extended(size, MCXT_ALLOC_NO_OOM);
}

static void
dsl_pfree(void *arg, void *ptr)
{
	pfree(ptr);
}

const DslAllocator tms_dsl_allocator = {dsl_palloc, dsl_pfree, NULL};

int
tms_condition_sqlstate(DslErrorKind kind)
{
	switch (kind)
	{
		case DSL_ERROR_TYPE:
			return ERRCODE_DATATYPE_MISMATCH;
		case DSL_ERROR_TOO_COMPLEX:
			return ERRCODE_STATEMENT_TOO_COMPLEX;
		case DSL_ERROR_TOO_LONG:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case DSL_ERROR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
		default:
			return ERRCODE_SYNTAX_ERROR;
	}
}

int
tms_condition_char_position(const char *src, int len, int off)
{
	if (off > len)
		off = len;
	if (off < 0)
		off = 0;
	return pg_mbstrlen_with_len(src, off) + 1;
}

DslProgram *
tms_condition_compile(const char *src, size_t len, DslError *err)
{
	DslProgram *p = dsl_compile(src, len, &tms_dsl_allocator, err);

	if (p == NULL && err->kind == DSL_ERROR_OUT_OF_MEMORY)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Compiling a policy condition of %zu bytes.", len)));
	return p;
}

/* Raise a compile error of a condition or a score ("what" says which). */
static void
raise_compile_error(const char *what, const DslError *err)
{
	ereport(ERROR,
			(errcode(tms_condition_sqlstate(err->kind)),
			 errmsg("invalid %s: %s", what, err->message),
			 err->kind == DSL_ERROR_TOO_LONG ? 0 :
			 errdetail("At line %d, column %d:\n%s", err->line, err->column, err->excerpt),
			 err->hint[0] ? errhint("%s", err->hint) : 0));
}

DslProgram *
tms_condition_compile_or_raise(const char *src, size_t len)
{
	DslError	err;
	DslProgram *p = tms_condition_compile(src, len, &err);

	if (p == NULL)
		raise_compile_error("policy condition", &err);
	return p;
}

DslProgram *
tms_score_compile(const char *src, size_t len, DslError *err)
{
	DslProgram *p = dsl_compile_score(src, len, &tms_dsl_allocator, err);

	if (p == NULL && err->kind == DSL_ERROR_OUT_OF_MEMORY)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Compiling a rule score of %zu bytes.", len)));
	return p;
}

DslProgram *
tms_score_compile_or_raise(const char *src, size_t len)
{
	DslError	err;
	DslProgram *p = tms_score_compile(src, len, &err);

	if (p == NULL)
		raise_compile_error("rule score", &err);
	return p;
}

static const char *
kind_name(DslNodeKind k)
{
	static const char *const names[] = {
		"literal", "variable", "field", "unary", "arithmetic",
		"comparison", "logical", "function", "property", "count"
	};

	return (unsigned) k < lengthof(names) ? names[k] : "?";
}

static const char *
state_name(DslNodeState s)
{
	switch (s)
	{
		case DSL_NODE_EVALUATED:
			return "evaluated";
		case DSL_NODE_FAILED:
			return "failed";
		case DSL_NODE_PER_FILE:
			return "per_file";
		default:
			return "not_evaluated";
	}
}

/* A double as JSON: the shortest exact text, null when not finite. */
static void
append_double(StringInfo b, double d)
{
	if (isfinite(d))
		appendStringInfoString(b, float8out_internal(d));
	else
		appendStringInfoString(b, "null");
}

static void
append_value(StringInfo b, const DslExplainNode *e)
{
	switch (e->type)
	{
		case DSL_BOOLEAN:
			appendStringInfoString(b, e->value.b ? "true" : "false");
			break;
		case DSL_LONG:
			appendStringInfo(b, INT64_FORMAT, e->value.l);
			break;
		case DSL_DOUBLE:
			append_double(b, e->value.d);
			break;
		case DSL_STRING:
			escape_json(b, e->value.s ? e->value.s : "");
			break;
	}
}

char *
tms_condition_explain_json(const DslProgram *prog,
						   const DslExplainNode *nodes, int32 n)
{
	StringInfoData b;
	const char *src = dsl_program_source(prog);

	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	for (int32 i = 0; i < n; i++)
	{
		const DslExplainNode *e = &nodes[i];
		char	   *expr = pnstrdup(src + e->offset, e->length);

		appendStringInfo(&b, "%s{\"id\": %d, \"parent\": ", i ? ", " : "", i);
		if (e->parent < 0)
			appendStringInfoString(&b, "null");
		else
			appendStringInfo(&b, "%d", e->parent);
		appendStringInfoString(&b, ", \"expr\": ");
		escape_json(&b, expr);
		appendStringInfo(&b, ", \"kind\": \"%s\", \"type\": \"%s\"",
						 kind_name(e->kind), dsl_type_name(e->type));
		if (e->op && e->op[0])
		{
			appendStringInfoString(&b, ", \"op\": ");
			escape_json(&b, e->op);
		}
		appendStringInfo(&b, ", \"state\": \"%s\"", state_name(e->state));
		if (e->state == DSL_NODE_EVALUATED)
		{
			appendStringInfoString(&b, ", \"value\": ");
			append_value(&b, e);
		}
		else if (e->state == DSL_NODE_FAILED)
			appendStringInfo(&b, ", \"outcome\": \"%s\"", dsl_outcome_name(e->outcome));
		if (e->kind == DSL_KIND_PROPERTY && e->state == DSL_NODE_EVALUATED)
		{
			appendStringInfo(&b, ", \"from\": \"%s\"", e->property_found ? "table" : "default");
			if (e->raw)
			{
				appendStringInfoString(&b, ", \"raw\": ");
				escape_json(&b, e->raw);
			}
		}
		if (e->kind == DSL_KIND_COUNT && e->state != DSL_NODE_NOT_EVALUATED)
			appendStringInfo(&b, ", \"files\": " INT64_FORMAT, e->files);
		appendStringInfoChar(&b, '}');
		pfree(expr);
	}
	appendStringInfoChar(&b, ']');
	return b.data;
}

/* The metric values a program reads, through the DSL's accessor. */
char *
tms_condition_metrics_json(const DslProgram *prog, const DslMetrics *m)
{
	return tms_metrics_json(dsl_program_variables(prog), m);
}

/* The metric values of the variables vars (DSL_VAR_BIT()s). */
char *
tms_metrics_json(uint32 vars, const DslMetrics *m)
{
	StringInfoData b;
	bool		first = true;

	initStringInfo(&b);
	appendStringInfoChar(&b, '{');
	for (int v = 0; v < DSL_VAR_COUNT; v++)
	{
		DslValue	val;

		if (!(vars & DSL_VAR_BIT(v)) || !dsl_metrics_get(m, (DslVar) v, &val))
			continue;
		appendStringInfo(&b, "%s\"%s\": ", first ? "" : ", ", dsl_var_name((DslVar) v));
		first = false;
		if (dsl_var_type((DslVar) v) == DSL_DOUBLE)
			append_double(&b, val.d);
		else
			appendStringInfo(&b, INT64_FORMAT, val.l);
	}
	appendStringInfoChar(&b, '}');
	return b.data;
}
