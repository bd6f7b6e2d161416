/*-------------------------------------------------------------------------
 *
 * dsl_compile.c
 *		Lexer, parser, type checker and optimiser of the policy condition
 *		language.
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
 * After parsing, finish() hoists the file-independent parts of each lambda,
 * fuses comparisons of two leaves, and numbers the nodes for explanations
 * (see dsl_int.h).
 *
 * All memory comes from the program's arena; an error frees the program.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl_int.h"

typedef enum tok_kind
{
	T_END, T_LONG, T_DOUBLE, T_STRING, T_IDENT,
	T_AND, T_OR, T_TRUE, T_FALSE,
	T_LPAREN, T_RPAREN, T_COMMA, T_DOT, T_ARROW,
	T_NOT, T_PLUS, T_MINUS, T_STAR, T_SLASH,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE
} tok_kind;

typedef struct token
{
	tok_kind	kind;
	int32_t		offset;
	int32_t		length;
	int64_t		l;
	double		d;
	const char *s;				/* T_STRING: decoded, NUL-terminated */
} token;

typedef struct parser
{
	dsl_program *p;
	const char *src;			/* the program's NUL-terminated copy */
	int32_t		len;
	int32_t		pos;			/* lexer position */
	token		tok;			/* current token */
	token		ahead;			/* lookahead, valid if has_ahead */
	bool		has_ahead;
	dsl_error  *err;
	bool		failed;
	int			nesting;
	int			lambda;			/* index of the lambda being parsed, or -1 */
	const char *param;			/* its parameter name */
	int32_t		param_len;
} parser;

static const char *const function_names[] = {
	"KB", "MB", "GB", "hours", "days", "property", "countDataFiles"
};

#define NFUNCTIONS ((int) (sizeof(function_names) / sizeof(function_names[0])))

/* ---------------------------------------------------------------------
 * Arena
 * ---------------------------------------------------------------------
 */

#define ARENA_ALIGN 16

static void *
default_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

static void
default_free(void *arg, void *ptr)
{
	(void) arg;
	free(ptr);
}

/*
 * Allocate size bytes, zeroed, from the program's arena; NULL when the
 * allocator fails.  Freed only as a whole by dsl_free().
 */
void *
dsl_arena_alloc(dsl_program *p, size_t size)
{
	dsl_chunk  *c = p->chunks;
	size_t		hdr = (sizeof(dsl_chunk) + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1);
	char	   *mem;

	size = (size + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1);
	if (c == NULL || c->size - c->used < size)
	{
		size_t		csize = c ? c->size * 2 : 4096;

		if (csize > 1024 * 1024)
			csize = 1024 * 1024;
		if (csize < size)
			csize = size;
		c = p->alloc.alloc(p->alloc.arg, hdr + csize);
		if (c == NULL)
			return NULL;
		c->next = p->chunks;
		c->size = csize;
		c->used = 0;
		p->chunks = c;
	}
	mem = (char *) c + hdr + c->used;
	c->used += size;
	memset(mem, 0, size);
	return mem;
}

/* See dsl.h. */
void
dsl_free(dsl_program *p)
{
	dsl_chunk  *c;

	if (p == NULL)
		return;
	c = p->chunks;
	while (c)
	{
		dsl_chunk  *next = c->next;

		p->alloc.free(p->alloc.arg, c);
		c = next;
	}
	p->alloc.free(p->alloc.arg, p);
}

/* ---------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------
 */

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
fill_position(dsl_error *err, const char *src, int32_t len, int32_t off)
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

static void *error_at(parser *ps, dsl_error_kind kind, int32_t off,
					  const char *hint, const char *fmt,...)
			__attribute__((format(printf, 5, 6)));

/*
 * Record an error at byte offset off (only the first error counts) and
 * return NULL, so callers can "return error_at(...)".
 */
static void *
error_at(parser *ps, dsl_error_kind kind, int32_t off, const char *hint,
		 const char *fmt,...)
{
	va_list		ap;
	dsl_error  *err = ps->err;

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

static void *
out_of_memory(parser *ps)
{
	return error_at(ps, DSL_ERROR_OUT_OF_MEMORY, ps->tok.offset, NULL,
					"out of memory");
}

/* Printable text of a token for messages, shortened to 40 bytes. */
#define TOKFMT "%.*s"
#define TOKARG(t) ((t)->length > 40 ? 40 : (int) (t)->length), (ps->src + (t)->offset)

static void *
syntax_error(parser *ps, const token *t, const char *hint)
{
	if (t->kind == T_END)
		return error_at(ps, DSL_ERROR_SYNTAX, t->offset, hint,
						"syntax error at end of input");
	return error_at(ps, DSL_ERROR_SYNTAX, t->offset, hint,
					"syntax error at or near \"" TOKFMT "\"", TOKARG(t));
}

/* ---------------------------------------------------------------------
 * Lexer
 * ---------------------------------------------------------------------
 */

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

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
word_is(const char *s, int32_t len, const char *word)
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
lex_number(parser *ps, token *t)
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
			error_at(ps, DSL_ERROR_SYNTAX, suffix_start,
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
			error_at(ps, DSL_ERROR_SYNTAX, ps->pos, NULL,
					 "invalid numeric literal \"" TOKFMT "\"", TOKARG(t));
			return false;
		}
		d *= (double) mult;
		if (!isfinite(d))
		{
			error_at(ps, DSL_ERROR_SYNTAX, ps->pos, NULL,
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
			error_at(ps, DSL_ERROR_SYNTAX, ps->pos,
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
lex_string(parser *ps, token *t)
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
			error_at(ps, DSL_ERROR_SYNTAX, ps->pos,
					 "Close the string with the quote that opened it.",
					 "unterminated quoted string");
			return false;
		}
		if (s[i] == q)
			break;
		if (s[i] == '\0')
		{
			error_at(ps, DSL_ERROR_SYNTAX, i, NULL,
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
				error_at(ps, DSL_ERROR_SYNTAX, i,
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
		out_of_memory(ps);
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
lex(parser *ps, token *t)
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
		if (word_is(s + start, t->length, "and"))
			t->kind = T_AND;
		else if (word_is(s + start, t->length, "or"))
			t->kind = T_OR;
		else if (word_is(s + start, t->length, "true"))
			t->kind = T_TRUE;
		else if (word_is(s + start, t->length, "false"))
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
			error_at(ps, DSL_ERROR_SYNTAX, start,
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
				error_at(ps, DSL_ERROR_SYNTAX, start,
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
			error_at(ps, DSL_ERROR_SYNTAX, start,
					 "Use AND for logical conjunction.",
					 "syntax error at or near \"%s\"",
					 s[start + 1] == '&' ? "&&" : "&");
			return false;
		case '|':
			error_at(ps, DSL_ERROR_SYNTAX, start,
					 "Use OR for logical disjunction.",
					 "syntax error at or near \"%s\"",
					 s[start + 1] == '|' ? "||" : "|");
			return false;
		default:
			if ((unsigned char) c >= 0x21 && (unsigned char) c < 0x7f)
				error_at(ps, DSL_ERROR_SYNTAX, start, NULL,
						 "invalid character \"%c\"", c);
			else
				error_at(ps, DSL_ERROR_SYNTAX, start, NULL,
						 "invalid character 0x%02x", (unsigned char) c);
			return false;
	}
	ps->pos = start + t->length;
	return true;
}

/* Move to the next token. */
static bool
advance(parser *ps)
{
	if (ps->has_ahead)
	{
		ps->tok = ps->ahead;
		ps->has_ahead = false;
		return true;
	}
	return lex(ps, &ps->tok);
}

/* The token after the current one (lexed once). */
static const token *
peek(parser *ps)
{
	if (!ps->has_ahead)
	{
		if (!lex(ps, &ps->ahead))
			return NULL;
		ps->has_ahead = true;
	}
	return &ps->ahead;
}

/* ---------------------------------------------------------------------
 * Nodes and type checking
 * ---------------------------------------------------------------------
 */

static bool
is_numeric(const dsl_node *n)
{
	return n->type == DSL_LONG || n->type == DSL_DOUBLE;
}

/* A new node spanning [off, off + len) with no children yet. */
static dsl_node *
new_node(parser *ps, dsl_op op, dsl_type type, dsl_node_kind kind,
		 int32_t off, int32_t len)
{
	dsl_node   *n = dsl_arena_alloc(ps->p, sizeof(dsl_node));

	if (n == NULL)
		return out_of_memory(ps);
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
static dsl_node *
attach(parser *ps, dsl_node *n, dsl_node *a, dsl_node *b, int32_t err_off)
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
		return error_at(ps, DSL_ERROR_TOO_COMPLEX, err_off,
						"Split long chains of operators; an expression may be at most 1000 levels deep.",
						"expression is too complex");
	return n;
}

/* Turn n into a constant of its type holding v (a folded expression). */
static void
make_constant(dsl_node *n, dsl_value v)
{
	static const dsl_op ops[] = {OP_CONST_B, OP_CONST_L, OP_CONST_D, OP_CONST_S};

	n->op = n->gop = (uint8_t) ops[n->type];
	n->kind = DSL_KIND_LITERAL;
	n->constant = true;
	n->k = v;
	n->a = n->b = NULL;
	n->depth = 1;
}

/* n as a DOUBLE: itself, a converted constant, or an implicit I2D node. */
static dsl_node *
to_double(parser *ps, dsl_node *n)
{
	dsl_node   *c;

	if (n->type == DSL_DOUBLE)
		return n;
	if (n->constant)
	{
		dsl_value	v;

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

static const char *
tok_text(tok_kind k)
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

static int
cmp_kind(tok_kind k)
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
fold_arith(dsl_node *n)
{
	dsl_value	v;
	const dsl_node *a = n->a,
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
static dsl_node *
make_binary(parser *ps, const token *op, dsl_node *l, dsl_node *r)
{
	dsl_node   *n;
	int32_t		off = l->offset;
	int32_t		len = r->offset + r->length - l->offset;
	const char *name = tok_text(op->kind);

	switch (op->kind)
	{
		case T_AND:
		case T_OR:
			if (l->type != DSL_BOOLEAN || r->type != DSL_BOOLEAN)
			{
				const dsl_node *bad = l->type != DSL_BOOLEAN ? l : r;

				return error_at(ps, DSL_ERROR_TYPE, bad->offset, NULL,
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
					return error_at(ps, DSL_ERROR_TYPE, op->offset,
									"Compare two numbers, two strings, or two booleans with == or !=.",
									"operator does not exist: %s %s %s",
									dsl_type_name(l->type), name,
									dsl_type_name(r->type));
				n = new_node(ps, (dsl_op) (base + ck), DSL_BOOLEAN,
							 DSL_KIND_COMPARISON, off, len);
				break;
			}

		default:				/* + - * / */
			if (!is_numeric(l) || !is_numeric(r))
				return error_at(ps, DSL_ERROR_TYPE, op->offset,
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

static dsl_node *parse_expr(parser *ps);

/* Enter one level of nesting at token t; false (error set) if too deep. */
static bool
nest(parser *ps, const token *t)
{
	if (++ps->nesting > DSL_MAX_NESTING)
	{
		error_at(ps, DSL_ERROR_TOO_COMPLEX, t->offset,
				 "At most 100 levels of parentheses, function calls and unary operators are allowed.",
				 "expression is nested too deeply");
		return false;
	}
	return true;
}

/* Expect a ")" closing the "(" at open_off; consume it. */
static bool
expect_rparen(parser *ps, int32_t open_off, const char *what)
{
	(void) open_off;
	if (ps->tok.kind != T_RPAREN)
	{
		char		hint[128];

		snprintf(hint, sizeof(hint), "Expected \")\" to close %s.", what);
		syntax_error(ps, &ps->tok, hint);
		return false;
	}
	return advance(ps);
}

/* A unit function (KB ... days) applied to arg. */
static dsl_node *
make_unit(parser *ps, const token *name, dsl_node *arg, int64_t factor,
		  int32_t end)
{
	dsl_node   *n;
	char		fname[16];

	snprintf(fname, sizeof(fname), "%.*s", (int) name->length, ps->src + name->offset);
	if (!is_numeric(arg))
		return error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
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
static dsl_node *
parse_count(parser *ps, const token *name)
{
	token		param;
	dsl_node   *body,
			   *n;
	int			index;

	if (ps->lambda >= 0)
		return error_at(ps, DSL_ERROR_SYNTAX, name->offset,
						"Count files in a separate countDataFiles() call outside the lambda.",
						"countDataFiles() cannot be nested");
	if (ps->tok.kind != T_IDENT || peek(ps) == NULL || ps->ahead.kind != T_ARROW)
	{
		if (ps->failed)
			return NULL;
		return error_at(ps, DSL_ERROR_SYNTAX, ps->tok.offset,
						"Write countDataFiles(f -> f.size < 64MB): a parameter name, \"->\" and a BOOLEAN predicate.",
						"countDataFiles() takes a lambda as its argument");
	}
	if (ps->p->nlambdas >= DSL_MAX_LAMBDAS)
		return error_at(ps, DSL_ERROR_TOO_COMPLEX, name->offset,
						"At most 16 countDataFiles() calls are allowed in one condition.",
						"too many countDataFiles() calls");
	index = ps->p->nlambdas++;
	param = ps->tok;
	if (!advance(ps) || !advance(ps))	/* parameter, "->" */
		return NULL;
	ps->lambda = index;
	ps->param = ps->src + param.offset;
	ps->param_len = param.length;
	body = parse_expr(ps);
	ps->lambda = -1;
	if (body == NULL)
		return NULL;
	if (body->type != DSL_BOOLEAN)
		return error_at(ps, DSL_ERROR_TYPE, body->offset, NULL,
						"predicate of countDataFiles() must be of type BOOLEAN, not %s",
						dsl_type_name(body->type));
	if (ps->tok.kind == T_COMMA)
		return error_at(ps, DSL_ERROR_TYPE, ps->tok.offset, NULL,
						"function countDataFiles() takes 1 argument");
	if (ps->tok.kind != T_RPAREN)
		return syntax_error(ps, &ps->tok, "Expected \")\" to close countDataFiles(.");
	n = new_node(ps, OP_COUNT, DSL_LONG, DSL_KIND_COUNT, name->offset,
				 ps->tok.offset + 1 - name->offset);
	if (n == NULL || attach(ps, n, body, NULL, name->offset) == NULL)
		return NULL;
	if (!advance(ps))
		return NULL;
	n->lambda = index;
	n->opname = "countDataFiles";
	ps->p->lambdas[index].body = body;
	return n;
}

/* A function call; the current token is the name, the next one "(". */
static dsl_node *
parse_call(parser *ps)
{
	token		name = ps->tok;
	const char *s = ps->src + name.offset;
	int32_t		len = name.length;
	dsl_node   *args[2] = {NULL, NULL};
	int			nargs = 0;
	int32_t		end;
	int			fn = -1;
	dsl_node   *n;

	for (int i = 0; i < NFUNCTIONS; i++)
		if ((int32_t) strlen(function_names[i]) == len &&
			memcmp(function_names[i], s, len) == 0)
			fn = i;
	if (fn < 0)
	{
		const char *sugg;
		char		hint[160] = "";

		if (dsl_var_lookup(s, len) >= 0)
			return error_at(ps, DSL_ERROR_SYNTAX, name.offset,
							"Variables are used without parentheses.",
							"\"%.*s\" is a variable, not a function", (int) len, s);
		sugg = dsl_suggest(s, len, function_names, NFUNCTIONS);
		if (sugg)
			snprintf(hint, sizeof(hint), "Did you mean \"%s\"?", sugg);
		else
			snprintf(hint, sizeof(hint),
					 "The functions are KB, MB, GB, hours, days, property and countDataFiles.");
		return error_at(ps, DSL_ERROR_SYNTAX, name.offset, hint,
						"unrecognized function \"%.*s\"", len > 40 ? 40 : (int) len, s);
	}
	if (!nest(ps, &name))
		return NULL;
	if (!advance(ps) || !advance(ps))	/* name, "(" */
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
			dsl_node   *arg = parse_expr(ps);

			if (arg == NULL)
				return NULL;
			if (nargs < 2)
				args[nargs] = arg;
			nargs++;
			if (ps->tok.kind != T_COMMA)
				break;
			if (!advance(ps))
				return NULL;
		}
	}
	if (ps->tok.kind != T_RPAREN)
		return syntax_error(ps, &ps->tok, "Expected \",\" or \")\" in the argument list.");
	end = ps->tok.offset + 1;
	if (!advance(ps))
		return NULL;
	ps->nesting--;

	if (fn <= 4)
	{
		static const int64_t factors[] = {
			INT64_C(1024), INT64_C(1048576), INT64_C(1073741824),
			INT64_C(3600000), INT64_C(86400000)
		};

		if (nargs != 1)
			return error_at(ps, DSL_ERROR_TYPE, name.offset, NULL,
							"function %s() takes 1 argument, not %d",
							function_names[fn], nargs);
		n = make_unit(ps, &name, args[0], factors[fn], end);
		if (n)
			n->opname = function_names[fn];
		return n;
	}

	/* property(name, default) */
	if (nargs != 2)
		return error_at(ps, DSL_ERROR_TYPE, name.offset, NULL,
						"function property() takes 2 arguments, not %d", nargs);
	if (args[0]->gop != OP_CONST_S)
		return error_at(ps, DSL_ERROR_TYPE, args[0]->offset,
						"Write the property name as a quoted string, for example property('write.target-file-size-bytes', 512MB).",
						"first argument of property() must be a string literal");
	n = new_node(ps, (dsl_op) (OP_PROP_B + args[1]->type), args[1]->type,
				 DSL_KIND_PROPERTY, name.offset, end - name.offset);
	if (n == NULL || attach(ps, n, args[1], NULL, name.offset) == NULL)
		return NULL;
	n->k.s = args[0]->k.s;
	n->opname = "property";
	ps->p->uses_properties = true;
	return n;
}

/* An identifier that is not a call: a variable or a lambda field. */
static dsl_node *
parse_name(parser *ps)
{
	token		id = ps->tok;
	const char *s = ps->src + id.offset;
	int32_t		len = id.length;
	const token *next;
	int			v;
	dsl_node   *n;

	if ((next = peek(ps)) == NULL)
		return NULL;
	if (ps->lambda >= 0 && len == ps->param_len && memcmp(s, ps->param, len) == 0)
	{
		token		field;
		int			f;

		if (next->kind != T_DOT)
			return error_at(ps, DSL_ERROR_SYNTAX, id.offset,
							"Use a field such as f.size, f.records or f.hasDeletes.",
							"lambda parameter \"%.*s\" must be followed by a field",
							len > 40 ? 40 : (int) len, s);
		if (!advance(ps) || !advance(ps))
			return NULL;
		field = ps->tok;
		if (field.kind != T_IDENT)
			return syntax_error(ps, &field, "Expected a field name after \".\".");
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
			return error_at(ps, DSL_ERROR_SYNTAX, field.offset, hint,
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
		return advance(ps) ? n : NULL;
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
				return error_at(ps, DSL_ERROR_SYNTAX, id.offset,
								"Call it with parentheses, for example days(7).",
								"function \"%.*s\" is used without arguments", (int) len, s);
		if (sugg)
			snprintf(hint, sizeof(hint), "Did you mean \"%s\"?", sugg);
		else if (word_is(s, len, "not"))
			snprintf(hint, sizeof(hint), "Use ! for logical negation.");
		else if (next->kind == T_DOT)
			snprintf(hint, sizeof(hint),
					 "Fields such as f.size exist only inside countDataFiles(f -> ...).");
		return error_at(ps, DSL_ERROR_SYNTAX, id.offset, hint[0] ? hint : NULL,
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
	return advance(ps) ? n : NULL;
}

/* literal | name | call | "(" expr ")" */
static dsl_node *
parse_primary(parser *ps)
{
	token		t = ps->tok;
	dsl_node   *n;

	switch (t.kind)
	{
		case T_LONG:
		case T_DOUBLE:
		case T_STRING:
		case T_TRUE:
		case T_FALSE:
			{
				static const dsl_type types[] = {
					[T_LONG] = DSL_LONG,[T_DOUBLE] = DSL_DOUBLE,
					[T_STRING] = DSL_STRING,[T_TRUE] = DSL_BOOLEAN,
					[T_FALSE] = DSL_BOOLEAN
				};
				dsl_value	v;

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
				return advance(ps) ? n : NULL;
			}
		case T_LPAREN:
			if (!nest(ps, &t) || !advance(ps))
				return NULL;
			if ((n = parse_expr(ps)) == NULL)
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
				const token *next = peek(ps);

				if (next == NULL)
					return NULL;
				if (next->kind == T_LPAREN)
					return parse_call(ps);
				return parse_name(ps);
			}
		default:
			return syntax_error(ps, &t,
								"Expected a value: a number, a string, true, false, a variable, a function call or \"(\".");
	}
}

/* ("!" | "-") unary | primary */
static dsl_node *
parse_unary(parser *ps)
{
	token		t = ps->tok;
	dsl_node   *arg,
			   *n;

	if (t.kind != T_NOT && t.kind != T_MINUS)
		return parse_primary(ps);
	if (!nest(ps, &t) || !advance(ps))
		return NULL;
	if ((arg = parse_unary(ps)) == NULL)
		return NULL;
	ps->nesting--;
	if (t.kind == T_NOT)
	{
		if (arg->type != DSL_BOOLEAN)
			return error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
							"argument of ! must be of type BOOLEAN, not %s",
							dsl_type_name(arg->type));
		n = new_node(ps, OP_NOT, DSL_BOOLEAN, DSL_KIND_UNARY, t.offset,
					 arg->offset + arg->length - t.offset);
	}
	else
	{
		if (!is_numeric(arg))
			return error_at(ps, DSL_ERROR_TYPE, arg->offset, NULL,
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
at_level(tok_kind k, int level)
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
static dsl_node *
parse_level(parser *ps, int level)
{
	dsl_node   *l;

	l = level == 5 ? parse_unary(ps) : parse_level(ps, level + 1);
	while (l && at_level(ps->tok.kind, level))
	{
		token		op = ps->tok;
		dsl_node   *r;

		if (!advance(ps))
			return NULL;
		r = level == 5 ? parse_unary(ps) : parse_level(ps, level + 1);
		if (r == NULL)
			return NULL;
		l = make_binary(ps, &op, l, r);
	}
	return l;
}

static dsl_node *
parse_expr(parser *ps)
{
	return parse_level(ps, 0);
}

/* ---------------------------------------------------------------------
 * Optimisation and numbering
 * ---------------------------------------------------------------------
 */

/*
 * Hoist the maximal file-independent, non-constant sub-expressions of a
 * lambda body into slots (variables are read directly and stay).
 */
static void
hoist(dsl_program *p, dsl_lambda *lam, dsl_node *n)
{
	if (n == NULL || n->constant)
		return;
	if (!n->uses_param)
	{
		if (n->gop == OP_VAR_L || n->gop == OP_VAR_D || p->nslots >= DSL_MAX_SLOTS)
			return;
		n->slot = p->nslots++;
		n->op = (uint8_t) (OP_SLOT_B + n->type);
		lam->hoisted[lam->nhoisted++] = n;
		return;
	}
	hoist(p, lam, n->a);
	hoist(p, lam, n->b);
}

/* Whether n can be an operand of a fused comparison; sets base / offset. */
static bool
leaf(const dsl_node *n, uint8_t *base, uint32_t *off)
{
	switch (n->op)
	{
		case OP_VAR_L:
		case OP_VAR_D:
			*base = BASE_METRICS;
			*off = n->aoff;
			return true;
		case OP_FIELD_L:
			*base = BASE_FILE;
			*off = n->aoff;
			return true;
		case OP_SLOT_L:
		case OP_SLOT_D:
			*base = BASE_SLOTS;
			*off = (uint32_t) (n->slot * sizeof(dsl_value));
			return true;
		default:
			return false;
	}
}

/* Mirror a comparison so that its operands can swap sides. */
static int
mirror(int ck)
{
	switch (ck)
	{
		case CMP_LT:
			return CMP_GT;
		case CMP_LE:
			return CMP_GE;
		case CMP_GT:
			return CMP_LT;
		case CMP_GE:
			return CMP_LE;
		default:
			return ck;
	}
}

/*
 * Fuse numeric comparisons of two leaves, of a leaf and a constant, or of
 * an expression and a constant.
 */
static void
fuse(dsl_node *n)
{
	int			gop;
	bool		is_l;
	int			ck;
	dsl_node   *a,
			   *b;

	if (n == NULL)
		return;
	gop = n->gop;
	fuse(n->a);
	fuse(n->b);
	if (n->slot >= 0)
		return;					/* evaluated through its slot */
	if (gop >= OP_CMP_LL && gop < OP_CMP_LL + CMP__N)
		is_l = true;
	else if (gop >= OP_CMP_DD && gop < OP_CMP_DD + CMP__N)
		is_l = false;
	else
		return;
	ck = gop - (is_l ? OP_CMP_LL : OP_CMP_DD);
	a = n->a;
	b = n->b;
	if (a->constant && !b->constant)
	{
		dsl_node   *t = a;

		a = b;
		b = t;
		ck = mirror(ck);
	}
	if (!leaf(a, &n->abase, &n->aoff))
	{
		if (b->constant && a == n->a)
		{
			/* expression against a constant: one call less */
			n->op = (uint8_t) ((is_l ? OP_CMPE_L : OP_CMPE_D) + ck);
			n->k = b->k;
		}
		return;
	}
	if (b->constant)
	{
		n->op = (uint8_t) ((is_l ? OP_CMPK_L : OP_CMPK_D) + ck);
		n->k = b->k;
	}
	else if (leaf(b, &n->bbase, &n->boff))
		n->op = (uint8_t) ((is_l ? OP_CMPX_L : OP_CMPX_D) + ck);
}

/* Number explainable nodes in pre-order; implicit conversions get -1. */
static void
number(dsl_program *p, dsl_node *n)
{
	if (n == NULL)
		return;
	if (n->gop == OP_I2D)
		n->xid = -1;
	else
		n->xid = p->nexplain++;
	number(p, n->a);
	number(p, n->b);
}

/* ---------------------------------------------------------------------
 * Entry point
 * ---------------------------------------------------------------------
 */

/* See dsl.h. */
dsl_program *
dsl_compile(const char *src, size_t len, const dsl_allocator *allocator,
			dsl_error *err)
{
	dsl_error	dummy;
	dsl_allocator alloc;
	dsl_program *p;
	parser		ps;
	dsl_node   *root;
	bool		blank = true;

	if (err == NULL)
		err = &dummy;
	memset(err, 0, sizeof(*err));
	if (allocator)
		alloc = *allocator;
	else
	{
		alloc.alloc = default_alloc;
		alloc.free = default_free;
		alloc.arg = NULL;
	}

	memset(&ps, 0, sizeof(ps));
	ps.err = err;
	ps.lambda = -1;
	ps.src = src ? src : "";
	if (src == NULL)
		len = 0;
	if (len > DSL_MAX_SOURCE_LEN)
	{
		ps.len = 0;
		err->line = err->column = err->position = 1;
		error_at(&ps, DSL_ERROR_TOO_LONG, 0,
				 "A condition may be at most 65536 bytes long.",
				 "policy condition is too long (%zu bytes)", len);
		return NULL;
	}
	ps.len = (int32_t) len;

	p = alloc.alloc(alloc.arg, sizeof(dsl_program));
	if (p == NULL)
	{
		error_at(&ps, DSL_ERROR_OUT_OF_MEMORY, 0, NULL, "out of memory");
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	p->alloc = alloc;
	ps.p = p;

	/* a NUL-terminated copy with a spare NUL, so the lexer may peek one past */
	p->source = dsl_arena_alloc(p, len + 2);
	if (p->source == NULL)
	{
		error_at(&ps, DSL_ERROR_OUT_OF_MEMORY, 0, NULL, "out of memory");
		dsl_free(p);
		return NULL;
	}
	if (len)
		memcpy(p->source, src, len);
	p->source_len = len;
	ps.src = p->source;

	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\n\r\f\v", src[i]) || src[i] == '\0')
			blank = false;
	if (blank)
	{
		error_at(&ps, DSL_ERROR_SYNTAX, (int32_t) len,
				 "Write a BOOLEAN expression, for example dataFiles > 100.",
				 "policy condition is empty");
		dsl_free(p);
		return NULL;
	}

	root = NULL;
	if (advance(&ps))
		root = parse_expr(&ps);
	if (root && ps.tok.kind != T_END)
		root = syntax_error(&ps, &ps.tok,
							"Expected an operator or the end of the condition.");
	if (root && root->type != DSL_BOOLEAN)
	{
		error_at(&ps, DSL_ERROR_TYPE, root->offset,
				 "A condition is a comparison or a logical combination of comparisons, such as dataFiles > 100.",
				 "policy condition must be of type BOOLEAN, not %s",
				 dsl_type_name(root->type));
		err->has_type = true;
		err->type = root->type;
		root = NULL;
	}
	if (root == NULL)
	{
		dsl_free(p);
		return NULL;
	}

	if (p->nlambdas > 0)
	{
		if (p->needs < DSL_NEEDS_MANIFESTS)
			p->needs = DSL_NEEDS_MANIFESTS;
		if (p->fields & (DSL_FIELD_BIT(DSL_FIELD_HAS_DELETES) |
						 DSL_FIELD_BIT(DSL_FIELD_HAS_POSITION_DELETES) |
						 DSL_FIELD_BIT(DSL_FIELD_HAS_EQUALITY_DELETES)))
			p->needs = DSL_NEEDS_DELETES;
	}
	for (int i = 0; i < p->nlambdas; i++)
		hoist(p, &p->lambdas[i], p->lambdas[i].body);
	fuse(root);
	number(p, root);
	p->root = root;
	return p;
}

/* See dsl.h. */
dsl_needs
dsl_program_needs(const dsl_program *p)
{
	return p->needs;
}

/* See dsl.h. */
uint32_t
dsl_program_variables(const dsl_program *p)
{
	return p->vars;
}

/* See dsl.h. */
uint32_t
dsl_program_fields(const dsl_program *p)
{
	return p->fields;
}

/* See dsl.h. */
bool
dsl_program_uses_files(const dsl_program *p)
{
	return p->nlambdas > 0;
}

/* See dsl.h. */
bool
dsl_program_uses_properties(const dsl_program *p)
{
	return p->uses_properties;
}

/* See dsl.h. */
const char *
dsl_program_source(const dsl_program *p)
{
	return p->source;
}

/* See dsl.h. */
int32_t
dsl_explain_count(const dsl_program *p)
{
	return p->nexplain;
}
