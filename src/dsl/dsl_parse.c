/*-------------------------------------------------------------------------
 *
 * dsl_parse.c
 *		Parser and type checker of the policy condition language.
 *
 * The parser is recursive descent with one function per precedence level
 * (OR, AND, == !=, < <= > >=, + -, * /, then ! and unary -).  It type-checks
 * each node as it builds it, so every error points at the token that caused
 * it, and inserts the LONG -> DOUBLE conversions the operators need.
 * Constant sub-expressions made of literals and unit functions (MB(64)) are
 * folded.  Recursion is bounded twice: DSL_MAX_NESTING counts parentheses,
 * calls and unary operators on the way down, DSL_MAX_DEPTH bounds the tree
 * that left-associative chains (a + b + c ...) build, so that neither this
 * file nor the evaluators can overflow the stack.
 *
 * The nodes come out with their generic operator (gop) and an identical
 * fast one (op); dsl_optimize() specialises the fast ones afterwards.  All
 * nodes live in the program's arena.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsl/dsl_int.h"

static const char *const function_names[] = {
	"KB", "MB", "GB", "hours", "days", "property", "countDataFiles"
};

#define NFUNCTIONS ((int) (sizeof(function_names) / sizeof(function_names[0])))

/* ---------------------------------------------------------------------
 * Nodes and type checking
 * ---------------------------------------------------------------------
 */

/* Whether n is a LONG or a DOUBLE. */
static bool
is_numeric(const DslNode *n)
{
	return n->type == DSL_LONG || n->type == DSL_DOUBLE;
}

/* A new node spanning [off, off + len) with no children yet. */
static DslNode *
new_node(DslParser *ps, DslOp op, DslType type, DslNodeKind kind,
		 int32_t off, int32_t len)
{
	DslNode    *n = dsl_arena_alloc(ps->p, sizeof(DslNode));

	if (n == NULL)
		return dsl_out_of_memory(ps);
	n->op = n->gop = (uint8_t) op;
	n->type = (uint8_t) type;
	n->kind = (uint8_t) kind;
	n->slot = -1;
	n->lambda = -1;
	n->xid = -1;
	n->offset = off;
	n->length = len;
	n->depth = 1;
	n->opname = "";
	return n;
}

/* Attach children, propagate flags, and enforce DSL_MAX_DEPTH. */
static DslNode *
attach(DslParser *ps, DslNode *n, DslNode *a, DslNode *b, int32_t err_off)
{
	n->a = a;
	n->b = b;
	if (a)
	{
		n->depth = a->depth + 1;
		n->uses_param |= a->uses_param;
	}
	if (b)
	{
		if (b->depth + 1 > n->depth)
			n->depth = b->depth + 1;
		n->uses_param |= b->uses_param;
	}
	if (n->depth > DSL_MAX_DEPTH)
		return dsl_error_at(ps, DSL_ERROR_TOO_COMPLEX, err_off,
							"Split long chains of operators; an expression may be at most 1000 levels deep.",
							"expression is too complex");
	return n;
}

/* Turn n into a constant of its type holding v (a folded expression). */
static void
make_constant(DslNode *n, DslValue v)
{
	static const DslOp ops[] = {OP_CONST_B, OP_CONST_L, OP_CONST_D, OP_CONST_S};

	n->op = n->gop = (uint8_t) ops[n->type];
	n->kind = DSL_KIND_LITERAL;
	n->constant = true;
	n->k = v;
	n->a = n->b = NULL;
	n->depth = 1;
}

/* n as a DOUBLE: itself, a converted constant, or an implicit I2D node. */
static DslNode *
to_double(DslParser *ps, DslNode *n)
{
	DslNode    *c;

	if (n->type == DSL_DOUBLE)
		return n;
	if (n->constant)
	{
		DslValue	v;

		v.d = (double) n->k.l;
		n->type = DSL_DOUBLE;
		make_constant(n, v);
		return n;
	}
	c = new_node(ps, OP_I2D, DSL_DOUBLE, n->kind, n->offset, n->length);
	if (c == NULL)
		return NULL;
	return attach(ps, c, n, NULL, n->offset);
}

/* The text of an operator token, for messages and explanations. */
static const char *
tok_text(DslTokKind k)
{
	switch (k)
	{
		case T_AND:
			return "AND";
		case T_OR:
			return "OR";
		case T_EQ:
			return "==";
		case T_NE:
			return "!=";
		case T_LT:
			return "<";
		case T_LE:
			return "<=";
		case T_GT:
			return ">";
		case T_GE:
			return ">=";
		case T_PLUS:
			return "+";
		case T_MINUS:
			return "-";
		case T_STAR:
			return "*";
		case T_SLASH:
			return "/";
		case T_NOT:
			return "!";
		default:
			return "?";
	}
}

/* The CMP_* kind of a comparison token. */
static int
cmp_kind(DslTokKind k)
{
	switch (k)
	{
		case T_EQ:
			return CMP_EQ;
		case T_NE:
			return CMP_NE;
		case T_LT:
			return CMP_LT;
		case T_LE:
			return CMP_LE;
		case T_GT:
			return CMP_GT;
		default:
			return CMP_GE;
	}
}

/*
 * Fold a LONG or DOUBLE arithmetic node whose operands are constants.
 * Leaves the node alone when the operation would fail at run time
 * (overflow, division by zero): the failure then happens, with its
 * outcome, when the condition is evaluated.
 */
static void
fold_arith(DslNode *n)
{
	DslValue	v;
	const DslNode *a = n->a,
			   *b = n->b;

	if (!a->constant || (b && !b->constant))
		return;
	switch (n->op)
	{
		case OP_ADD_LL:
			if (__builtin_add_overflow(a->k.l, b->k.l, &v.l))
				return;
			break;
		case OP_SUB_LL:
			if (__builtin_sub_overflow(a->k.l, b->k.l, &v.l))
				return;
			break;
		case OP_MUL_LL:
			if (__builtin_mul_overflow(a->k.l, b->k.l, &v.l))
				return;
			break;
		case OP_ADD_DD:
			v.d = a->k.d + b->k.d;
			break;
		case OP_SUB_DD:
			v.d = a->k.d - b->k.d;
			break;
		case OP_MUL_DD:
			v.d = a->k.d * b->k.d;
			break;
		case OP_DIV_DD:
			if (b->k.d == 0.0)
				return;
			v.d = a->k.d / b->k.d;
			break;
		case OP_NEG_L:
			if (a->k.l == INT64_MIN)
				return;
			v.l = -a->k.l;
			break;
		case OP_NEG_D:
			v.d = -a->k.d;
			break;
		case OP_UNIT_L:
			if (__builtin_mul_overflow(a->k.l, n->k.l, &v.l))
				return;
			break;
		case OP_UNIT_D:
			v.d = a->k.d * n->k.d;
			break;
		default:
			return;
	}
	if (n->type == DSL_DOUBLE && !isfinite(v.d))
		return;
	make_constant(n, v);
}

/* Build and type-check the binary operator op applied to l and r. */
static DslNode *
make_binary(DslParser *ps, const DslToken *op, DslNode *l, DslNode *r)
{
	DslNode    *n;
	int32_t		off = l->offset;
	int32_t		len = r->offset + r->length - l->offset;
	const char *name = tok_text(op->kind);

	switch (op->kind)
	{
		case T_AND:
		case T_OR:
			if (l->type != DSL_BOOLEAN || r->type != DSL_BOOLEAN)
			{
				const DslNode *bad = l->type != DSL_BOOLEAN ? l : r;

				return dsl_error_at(ps, DSL_ERROR_TYPE, bad->offset, NULL,
									"argument of %s must be of type BOOLEAN, not %s",
									name, dsl_type_name(bad->type));
			}
			n = new_node(ps, op->kind == T_AND ? OP_AND : OP_OR, DSL_BOOLEAN,
						 DSL_KIND_LOGICAL, off, len);
			break;

		case T_EQ:
		case T_NE:
		case T_LT:
		case T_LE:
		case T_GT:
		case T_GE:
			{
				int			ck = cmp_kind(op->kind);
				int			base;

				if (is_numeric(l) && is_numeric(r))
				{
					if (l->type == DSL_LONG && r->type == DSL_LONG)
						base = OP_CMP_LL;
					else
					{
						if ((l = to_double(ps, l)) == NULL ||
							(r = to_double(ps, r)) == NULL)
							return NULL;
						base = OP_CMP_DD;
					}
				}
				else if (l->type == DSL_STRING && r->type == DSL_STRING)
					base = OP_CMP_SS;
				else if (l->type == DSL_BOOLEAN && r->type == DSL_BOOLEAN &&
						 (ck == CMP_EQ || ck == CMP_NE))
					base = OP_CMP_BB;
				else
					return dsl_error_at(ps, DSL_ERROR_TYPE, op->offset,
										"Compare two numbers, two strings, or two booleans with == or !=.",
										"operator does not exist: %s %s %s",
										dsl_type_name(l->type), name,
										dsl_type_name(r->type));
				n = new_node(ps, (DslOp) (base + ck), DSL_BOOLEAN,
							 DSL_KIND_COMPARISON, off, len);
				break;
			}

		default:				/* + - * / */
			if (!is_numeric(l) || !is_numeric(r))
				return dsl_error_at(ps, DSL_ERROR_TYPE, op->offset,
									"Arithmetic needs LONG or DOUBLE operands.",
									"operator does not exist: %s %s %s",
									dsl_type_name(l->type), name,
									dsl_type_name(r->type));
			if (op->kind != T_SLASH && l->type == DSL_LONG && r->type == DSL_LONG)
				n = new_node(ps, op->kind == T_PLUS ? OP_ADD_LL :
							 op->kind == T_MINUS ? OP_SUB_LL : OP_MUL_LL,
							 DSL_LONG, DSL_KIND_ARITHMETIC, off, len);
			else
			{
				if ((l = to_double(ps, l)) == NULL || (r = to_double(ps, r)) == NULL)
					return NULL;
				n = new_node(ps, op->kind == T_PLUS ? OP_ADD_DD :
							 op->kind == T_MINUS ? OP_SUB_DD :
							 op->kind == T_STAR ? OP_MUL_DD : OP_DIV_DD,
							 DSL_DOUBLE, DSL_KIND_ARITHMETIC, off, len);
			}
			break;
	}
	if (n == NULL)
		return NULL;
	n->opname = name;
	if (attach(ps, n, l, r, op->offset) == NULL)
		return NULL;
	if (n->kind == DSL_KIND_ARITHMETIC)
		fold_arith(n);
	return n;
}

/* ---------------------------------------------------------------------
 * Parser
 * ---------------------------------------------------------------------
 */

/* Enter one level of nesting at token t; false (error set) if too deep. */
static bool
nest(DslParser *ps, const DslToken *t)
{
	if (++ps->nesting > DSL_MAX_NESTING)
	{
		dsl_error_at(ps, DSL_ERROR_TOO_COMPLEX, t->offset,
					 "At most 100 levels of parentheses, function calls and unary operators are allowed.",
					 "expression is nested too deeply");
		return false;
	}
	return true;
}

/* Expect a ")" closing the "(" at open_off; consume it. */
static bool
expect_rparen(DslParser *ps, int32_t open_off, const char *what)
{
	(void) open_off;
	if (ps->tok.kind != T_RPAREN)
	{
		char		hint[128];

		snprintf(hint, sizeof(hint), "Expected \")\" to close %s.", what);
		dsl_syntax_error(ps, &ps->tok, hint);
		return false;
	}
	return dsl_advance(ps);
}

/* A unit function (KB ... days) applied to arg. */
static DslNode *
make_unit(DslParser *ps, const DslToken *name, DslNode *arg, int64_t factor,
		  int32_t end)
{
	DslNode    *n;
	char		fname[16];

	snprintf(fname, sizeof(fname), "%.*s", (int) name->length, ps->src + name->offset);
	if (!is_numeric(arg))
		return dsl_error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
							"argument of %s() must be of type LONG or DOUBLE, not %s",
							fname, dsl_type_name(arg->type));
	n = new_node(ps, arg->type == DSL_LONG ? OP_UNIT_L : OP_UNIT_D,
				 arg->type, DSL_KIND_FUNCTION, name->offset, end - name->offset);
	if (n == NULL)
		return NULL;
	if (arg->type == DSL_LONG)
		n->k.l = factor;
	else
		n->k.d = (double) factor;
	if (attach(ps, n, arg, NULL, name->offset) == NULL)
		return NULL;
	fold_arith(n);
	return n;
}

/* countDataFiles(param -> predicate); the current token is after "(". */
static DslNode *
parse_count(DslParser *ps, const DslToken *name)
{
	DslToken	param;
	DslNode    *body,
			   *n;
	int			index;

	if (ps->lambda >= 0)
		return dsl_error_at(ps, DSL_ERROR_SYNTAX, name->offset,
							"Count files in a separate countDataFiles() call outside the lambda.",
							"countDataFiles() cannot be nested");
	if (ps->tok.kind != T_IDENT || dsl_peek(ps) == NULL || ps->ahead.kind != T_ARROW)
	{
		if (ps->failed)
			return NULL;
		return dsl_error_at(ps, DSL_ERROR_SYNTAX, ps->tok.offset,
							"Write countDataFiles(f -> f.size < 64MB): a parameter name, \"->\" and a BOOLEAN predicate.",
							"countDataFiles() takes a lambda as its argument");
	}
	if (ps->p->nlambdas >= DSL_MAX_LAMBDAS)
		return dsl_error_at(ps, DSL_ERROR_TOO_COMPLEX, name->offset,
							"At most 16 countDataFiles() calls are allowed in one condition.",
							"too many countDataFiles() calls");
	index = ps->p->nlambdas++;
	param = ps->tok;
	if (!dsl_advance(ps) || !dsl_advance(ps))	/* parameter, "->" */
		return NULL;
	ps->lambda = index;
	ps->param = ps->src + param.offset;
	ps->param_len = param.length;
	body = dsl_parse_expr(ps);
	ps->lambda = -1;
	if (body == NULL)
		return NULL;
	if (body->type != DSL_BOOLEAN)
		return dsl_error_at(ps, DSL_ERROR_TYPE, body->offset, NULL,
							"predicate of countDataFiles() must be of type BOOLEAN, not %s",
							dsl_type_name(body->type));
	if (ps->tok.kind == T_COMMA)
		return dsl_error_at(ps, DSL_ERROR_TYPE, ps->tok.offset, NULL,
							"function countDataFiles() takes 1 argument");
	if (ps->tok.kind != T_RPAREN)
		return dsl_syntax_error(ps, &ps->tok, "Expected \")\" to close countDataFiles(.");
	n = new_node(ps, OP_COUNT, DSL_LONG, DSL_KIND_COUNT, name->offset,
				 ps->tok.offset + 1 - name->offset);
	if (n == NULL || attach(ps, n, body, NULL, name->offset) == NULL)
		return NULL;
	if (!dsl_advance(ps))
		return NULL;
	n->lambda = index;
	n->opname = "countDataFiles";
	ps->p->lambdas[index].body = body;
	return n;
}

/* A function call; the current token is the name, the next one "(". */
static DslNode *
parse_call(DslParser *ps)
{
	DslToken	name = ps->tok;
	const char *s = ps->src + name.offset;
	int32_t		len = name.length;
	DslNode    *args[2] = {NULL, NULL};
	int			nargs = 0;
	int32_t		end;
	int			fn = -1;
	DslNode    *n;

	for (int i = 0; i < NFUNCTIONS; i++)
		if ((int32_t) strlen(function_names[i]) == len &&
			memcmp(function_names[i], s, len) == 0)
			fn = i;
	if (fn < 0)
	{
		const char *sugg;
		char		hint[160] = "";

		if (dsl_var_lookup(s, len) >= 0)
			return dsl_error_at(ps, DSL_ERROR_SYNTAX, name.offset,
								"Variables are used without parentheses.",
								"\"%.*s\" is a variable, not a function", (int) len, s);
		sugg = dsl_suggest(s, len, function_names, NFUNCTIONS);
		if (sugg)
			snprintf(hint, sizeof(hint), "Did you mean \"%s\"?", sugg);
		else
			snprintf(hint, sizeof(hint),
					 "The functions are KB, MB, GB, hours, days, property and countDataFiles.");
		return dsl_error_at(ps, DSL_ERROR_SYNTAX, name.offset, hint,
							"unrecognized function \"%.*s\"", len > 40 ? 40 : (int) len, s);
	}
	if (!nest(ps, &name))
		return NULL;
	if (!dsl_advance(ps) || !dsl_advance(ps))	/* name, "(" */
		return NULL;
	if (fn == 6)
	{
		n = parse_count(ps, &name);
		ps->nesting--;
		return n;
	}
	if (ps->tok.kind != T_RPAREN)
	{
		for (;;)
		{
			DslNode    *arg = dsl_parse_expr(ps);

			if (arg == NULL)
				return NULL;
			if (nargs < 2)
				args[nargs] = arg;
			nargs++;
			if (ps->tok.kind != T_COMMA)
				break;
			if (!dsl_advance(ps))
				return NULL;
		}
	}
	if (ps->tok.kind != T_RPAREN)
		return dsl_syntax_error(ps, &ps->tok, "Expected \",\" or \")\" in the argument list.");
	end = ps->tok.offset + 1;
	if (!dsl_advance(ps))
		return NULL;
	ps->nesting--;

	if (fn <= 4)
	{
		static const int64_t factors[] = {
			INT64_C(1024), INT64_C(1048576), INT64_C(1073741824),
			INT64_C(3600000), INT64_C(86400000)
		};

		if (nargs != 1)
			return dsl_error_at(ps, DSL_ERROR_TYPE, name.offset, NULL,
								"function %s() takes 1 argument, not %d",
								function_names[fn], nargs);
		n = make_unit(ps, &name, args[0], factors[fn], end);
		if (n)
			n->opname = function_names[fn];
		return n;
	}

	/* property(name, default) */
	if (nargs != 2)
		return dsl_error_at(ps, DSL_ERROR_TYPE, name.offset, NULL,
							"function property() takes 2 arguments, not %d", nargs);
	if (args[0]->gop != OP_CONST_S)
		return dsl_error_at(ps, DSL_ERROR_TYPE, args[0]->offset,
							"Write the property name as a quoted string, for example property('write.target-file-size-bytes', 512MB).",
							"first argument of property() must be a string literal");
	n = new_node(ps, (DslOp) (OP_PROP_B + args[1]->type), args[1]->type,
				 DSL_KIND_PROPERTY, name.offset, end - name.offset);
	if (n == NULL || attach(ps, n, args[1], NULL, name.offset) == NULL)
		return NULL;
	n->k.s = args[0]->k.s;
	n->opname = "property";
	ps->p->uses_properties = true;
	return n;
}

/* An identifier that is not a call: a variable or a lambda field. */
static DslNode *
parse_name(DslParser *ps)
{
	DslToken	id = ps->tok;
	const char *s = ps->src + id.offset;
	int32_t		len = id.length;
	const DslToken *next;
	int			v;
	DslNode    *n;

	if ((next = dsl_peek(ps)) == NULL)
		return NULL;
	if (ps->lambda >= 0 && len == ps->param_len && memcmp(s, ps->param, len) == 0)
	{
		DslToken	field;
		int			f;

		if (next->kind != T_DOT)
			return dsl_error_at(ps, DSL_ERROR_SYNTAX, id.offset,
								"Use a field such as f.size, f.records or f.hasDeletes.",
								"lambda parameter \"%.*s\" must be followed by a field",
								len > 40 ? 40 : (int) len, s);
		if (!dsl_advance(ps) || !dsl_advance(ps))
			return NULL;
		field = ps->tok;
		if (field.kind != T_IDENT)
			return dsl_syntax_error(ps, &field, "Expected a field name after \".\".");
		f = dsl_field_lookup(ps->src + field.offset, field.length);
		if (f < 0)
		{
			static const char *const fnames[] = {
				"size", "records", "hasDeletes", "hasPositionDeletes", "hasEqualityDeletes"
			};
			const char *sugg = dsl_suggest(ps->src + field.offset, field.length,
										   fnames, DSL_FIELD_COUNT);
			char		hint[160];

			if (sugg)
				snprintf(hint, sizeof(hint), "Did you mean \"%s\"?", sugg);
			else
				snprintf(hint, sizeof(hint),
						 "The fields are size, records, hasDeletes, hasPositionDeletes and hasEqualityDeletes.");
			return dsl_error_at(ps, DSL_ERROR_SYNTAX, field.offset, hint,
								"unrecognized field \"%.*s\" of lambda parameter \"%.*s\"",
								field.length > 40 ? 40 : (int) field.length,
								ps->src + field.offset,
								len > 40 ? 40 : (int) len, s);
		}
		n = new_node(ps, dsl_field_type(f) == DSL_LONG ? OP_FIELD_L : OP_FIELD_B,
					 dsl_field_type(f), DSL_KIND_FIELD, id.offset,
					 field.offset + field.length - id.offset);
		if (n == NULL)
			return NULL;
		n->aoff = dsl_field_offset(f);
		n->uses_param = true;
		ps->p->fields |= DSL_FIELD_BIT(f);
		return dsl_advance(ps) ? n : NULL;
	}

	v = dsl_var_lookup(s, len);
	if (v < 0)
	{
		char		hint[200] = "";
		const char *vnames[DSL_VAR_COUNT];
		const char *sugg;

		for (int i = 0; i < DSL_VAR_COUNT; i++)
			vnames[i] = dsl_var_name(i);
		sugg = dsl_suggest(s, len, vnames, DSL_VAR_COUNT);
		for (int i = 0; i < NFUNCTIONS; i++)
			if ((int32_t) strlen(function_names[i]) == len &&
				memcmp(function_names[i], s, len) == 0)
				return dsl_error_at(ps, DSL_ERROR_SYNTAX, id.offset,
									"Call it with parentheses, for example days(7).",
									"function \"%.*s\" is used without arguments", (int) len, s);
		if (sugg)
			snprintf(hint, sizeof(hint), "Did you mean \"%s\"?", sugg);
		else if (dsl_word_is(s, len, "not"))
			snprintf(hint, sizeof(hint), "Use ! for logical negation.");
		else if (next->kind == T_DOT)
			snprintf(hint, sizeof(hint),
					 "Fields such as f.size exist only inside countDataFiles(f -> ...).");
		return dsl_error_at(ps, DSL_ERROR_SYNTAX, id.offset, hint[0] ? hint : NULL,
							"unrecognized variable \"%.*s\"", len > 40 ? 40 : (int) len, s);
	}
	n = new_node(ps, dsl_var_type(v) == DSL_LONG ? OP_VAR_L : OP_VAR_D,
				 dsl_var_type(v), DSL_KIND_VARIABLE, id.offset, len);
	if (n == NULL)
		return NULL;
	n->aoff = dsl_var_offset(v);
	ps->p->vars |= DSL_VAR_BIT(v);
	if (dsl_var_needs(v) > ps->p->needs)
		ps->p->needs = dsl_var_needs(v);
	return dsl_advance(ps) ? n : NULL;
}

/* literal | name | call | "(" expr ")" */
static DslNode *
parse_primary(DslParser *ps)
{
	DslToken	t = ps->tok;
	DslNode    *n;

	switch (t.kind)
	{
		case T_LONG:
		case T_DOUBLE:
		case T_STRING:
		case T_TRUE:
		case T_FALSE:
			{
				static const DslType types[] = {
					[T_LONG] = DSL_LONG,[T_DOUBLE] = DSL_DOUBLE,
					[T_STRING] = DSL_STRING,[T_TRUE] = DSL_BOOLEAN,
					[T_FALSE] = DSL_BOOLEAN
				};
				DslValue	v;

				n = new_node(ps, OP_CONST_B, types[t.kind], DSL_KIND_LITERAL,
							 t.offset, t.length);
				if (n == NULL)
					return NULL;
				if (t.kind == T_LONG)
					v.l = t.l;
				else if (t.kind == T_DOUBLE)
					v.d = t.d;
				else if (t.kind == T_STRING)
					v.s = t.s;
				else
					v.b = t.kind == T_TRUE;
				make_constant(n, v);
				return dsl_advance(ps) ? n : NULL;
			}
		case T_LPAREN:
			if (!nest(ps, &t) || !dsl_advance(ps))
				return NULL;
			if ((n = dsl_parse_expr(ps)) == NULL)
				return NULL;
			/* the parentheses belong to the node's text in explanations */
			n->offset = t.offset;
			n->length = ps->tok.offset + 1 - t.offset;
			if (!expect_rparen(ps, t.offset, "the \"(\""))
				return NULL;
			ps->nesting--;
			return n;
		case T_IDENT:
			{
				const DslToken *next = dsl_peek(ps);

				if (next == NULL)
					return NULL;
				if (next->kind == T_LPAREN)
					return parse_call(ps);
				return parse_name(ps);
			}
		default:
			return dsl_syntax_error(ps, &t,
									"Expected a value: a number, a string, true, false, a variable, a function call or \"(\".");
	}
}

/* ("!" | "-") unary | primary */
static DslNode *
parse_unary(DslParser *ps)
{
	DslToken	t = ps->tok;
	DslNode    *arg,
			   *n;

	if (t.kind != T_NOT && t.kind != T_MINUS)
		return parse_primary(ps);
	if (!nest(ps, &t) || !dsl_advance(ps))
		return NULL;
	if ((arg = parse_unary(ps)) == NULL)
		return NULL;
	ps->nesting--;
	if (t.kind == T_NOT)
	{
		if (arg->type != DSL_BOOLEAN)
			return dsl_error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
								"argument of ! must be of type BOOLEAN, not %s",
								dsl_type_name(arg->type));
		n = new_node(ps, OP_NOT, DSL_BOOLEAN, DSL_KIND_UNARY, t.offset,
					 arg->offset + arg->length - t.offset);
	}
	else
	{
		if (!is_numeric(arg))
			return dsl_error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
								"argument of unary - must be of type LONG or DOUBLE, not %s",
								dsl_type_name(arg->type));
		n = new_node(ps, arg->type == DSL_LONG ? OP_NEG_L : OP_NEG_D, arg->type,
					 DSL_KIND_UNARY, t.offset, arg->offset + arg->length - t.offset);
	}
	if (n == NULL || attach(ps, n, arg, NULL, t.offset) == NULL)
		return NULL;
	n->opname = t.kind == T_NOT ? "!" : "-";
	fold_arith(n);
	return n;
}

/* Binary precedence levels, lowest first. */
static bool
at_level(DslTokKind k, int level)
{
	switch (level)
	{
		case 0:
			return k == T_OR;
		case 1:
			return k == T_AND;
		case 2:
			return k == T_EQ || k == T_NE;
		case 3:
			return k == T_LT || k == T_LE || k == T_GT || k == T_GE;
		case 4:
			return k == T_PLUS || k == T_MINUS;
		default:
			return k == T_STAR || k == T_SLASH;
	}
}

/* One left-associative precedence level. */
static DslNode *
parse_level(DslParser *ps, int level)
{
	DslNode    *l;

	l = level == 5 ? parse_unary(ps) : parse_level(ps, level + 1);
	while (l && at_level(ps->tok.kind, level))
	{
		DslToken	op = ps->tok;
		DslNode    *r;

		if (!dsl_advance(ps))
			return NULL;
		r = level == 5 ? parse_unary(ps) : parse_level(ps, level + 1);
		if (r == NULL)
			return NULL;
		l = make_binary(ps, &op, l, r);
	}
	return l;
}

/* See dsl_int.h. */
DslNode *
dsl_parse_expr(DslParser *ps)
{
	return parse_level(ps, 0);
}
