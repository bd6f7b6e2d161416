/*-------------------------------------------------------------------------
 *
 * compact_filter.c
 *	  The "where" of a compaction: a filter on partition values, parsed,
 *	  bound to a table's schema and partition specs, and evaluated on a
 *	  data file's partition (compact.h gives the grammar and semantics).
 *
 * Rules: plain C; user input is bounded (1 KiB of text, 256 nodes) and
 * parsed by recursive descent with a depth limit; every failure is an
 * TmsError naming the offending token.  Binding gives each leaf, per
 * partition spec, the position of its partition field and its literals
 * converted to that field's type, so that evaluation does no parsing of
 * the filter, only of the partition text.
 *
 * src/iceberg/compact/compact_filter.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/filter_tree.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"
#include "iceberg/write/write_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_TEXT	1024
#define MAX_NODES	256
#define MAX_DEPTH	32

typedef IcebergFilterLit Lit;

/* A literal converted to a partition field's value type. */
typedef enum VKind
{
	V_INT,						/* int, long, date, time, timestamps, bool */
	V_DOUBLE,
	V_BYTES,					/* string, uuid, binary */
	V_DECIMAL					/* unscaled */
} VKind;

typedef struct Value
{
	VKind		kind;
	int64_t		i;
	double		d;
	__int128	dec;
	char	   *bytes;
	size_t		len;
} Value;

/* A leaf bound to one spec. */
typedef struct SpecBinding
{
	int32_t		spec_id;
	int			field;			/* position in the spec, -1: not in it */
	IcebergTypeId type;			/* the partition value's type */
	VKind		kind;
	int			nvalues;
	Value	   *values;
} SpecBinding;

typedef IcebergFilterNode Node;

struct IcebergPartitionFilter
{
	Node	   *root;
	int			nnodes;
	bool		bound;
};

/* ---------------------------------------------------------------------
 * Lexer
 * ---------------------------------------------------------------------
 */

typedef enum TokKind
{
	T_END,
	T_NAME,
	T_STRING,
	T_NUMBER,
	T_LPAREN,
	T_RPAREN,
	T_COMMA,
	T_OP
} TokKind;

typedef struct Parser
{
	const char *s;
	size_t		pos;
	TokKind		tok;
	char	   *text;			/* of T_NAME, T_STRING, T_NUMBER, T_OP */
	bool		quoted;			/* a quoted name */
	size_t		tok_pos;
	int			nnodes;
	int			depth;
	TmsError   *err;
} Parser;

static bool
syntax(Parser *p, const char *what)
{
	tms_error_set(p->err, ICEBERG_ERR_INVALID_ARGUMENT, "invalid where filter: %s", what);
	tms_error_detail(p->err, "at character %zu", p->tok_pos + 1);
	return false;
}

static bool
next(Parser *p)
{
	const char *s = p->s;
	size_t		i = p->pos;
	size_t		start;

	io_free(p->text);
	p->text = NULL;
	p->quoted = false;
	while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
		i++;
	p->tok_pos = i;
	start = i;
	if (s[i] == '\0')
	{
		p->tok = T_END;
		p->pos = i;
		return true;
	}
	if (s[i] == '(' || s[i] == ')' || s[i] == ',')
	{
		p->tok = s[i] == '(' ? T_LPAREN : s[i] == ')' ? T_RPAREN : T_COMMA;
		p->pos = i + 1;
		return true;
	}
	if (s[i] == '\'' || s[i] == '"')
	{
		char		q = s[i];
		IcebergBuf	b = {0};

		for (i++;; i++)
		{
			if (s[i] == '\0')
			{
				iceberg_buf_free(&b);
				return syntax(p, q == '\'' ? "unterminated string" : "unterminated quoted name");
			}
			if (s[i] == q)
			{
				if (s[i + 1] != q)
					break;
				i++;
			}
			if (!iceberg_buf_append(&b, &s[i], 1))
			{
				iceberg_buf_free(&b);
				tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				return false;
			}
		}
		if (!iceberg_buf_append(&b, "", 1))
		{
			iceberg_buf_free(&b);
			tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		p->text = b.data;
		p->tok = q == '\'' ? T_STRING : T_NAME;
		p->quoted = q == '"';
		p->pos = i + 1;
		if (p->quoted && p->text[0] == '\0')
			return syntax(p, "empty quoted name");
		return true;
	}
	if (strchr("=<>!", s[i]) != NULL)
	{
		if ((s[i] == '<' && (s[i + 1] == '=' || s[i + 1] == '>')) ||
			(s[i] == '>' && s[i + 1] == '=') || (s[i] == '!' && s[i + 1] == '='))
			i += 2;
		else if (s[i] == '!')
			return syntax(p, "unexpected \"!\"");
		else
			i++;
		p->tok = T_OP;
	}
	else if (isdigit((unsigned char) s[i]) || ((s[i] == '-' || s[i] == '+' || s[i] == '.') &&
											   (isdigit((unsigned char) s[i + 1]) || s[i + 1] == '.')))
	{
		i++;
		while (isdigit((unsigned char) s[i]) || s[i] == '.' ||
			   ((s[i] == 'e' || s[i] == 'E') && (isdigit((unsigned char) s[i + 1]) ||
												 s[i + 1] == '-' || s[i + 1] == '+')) ||
			   ((s[i] == '-' || s[i] == '+') && (s[i - 1] == 'e' || s[i - 1] == 'E')))
			i++;
		p->tok = T_NUMBER;
	}
	else if (isalpha((unsigned char) s[i]) || s[i] == '_')
	{
		while (isalnum((unsigned char) s[i]) || s[i] == '_')
			i++;
		p->tok = T_NAME;
	}
	else
		return syntax(p, "unexpected character");
	p->text = io_malloc(i - start + 1);
	if (p->text == NULL)
	{
		tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	memcpy(p->text, s + start, i - start);
	p->text[i - start] = '\0';
	p->pos = i;
	return true;
}

/* Is the current token the (unquoted) keyword kw? */
static bool
is_kw(const Parser *p, const char *kw)
{
	return p->tok == T_NAME && !p->quoted && strcasecmp(p->text, kw) == 0;
}

static bool
is_reserved(const Parser *p)
{
	static const char *const kw[] = {"and", "or", "not", "in", "between", "is",
	"null", "true", "false"};
	size_t		i;

	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
		if (is_kw(p, kw[i]))
			return true;
	return false;
}

/* ---------------------------------------------------------------------
 * Parser
 * ---------------------------------------------------------------------
 */

static void
free_values(SpecBinding *b)
{
	int			i;

	for (i = 0; i < b->nvalues; i++)
		io_free(b->values[i].bytes);
	io_free(b->values);
	b->values = NULL;
	b->nvalues = 0;
}

static void
free_node(Node *n)
{
	int			i;

	if (n == NULL)
		return;
	free_node(n->a);
	free_node(n->b);
	io_free(n->name);
	for (i = 0; i < n->nlits; i++)
		io_free(n->lits[i].text);
	io_free(n->lits);
	for (i = 0; i < n->nbind; i++)
		free_values(&n->bind[i]);
	io_free(n->bind);
	io_free(n);
}

static Node *
new_node(Parser *p, IcebergFilterKind kind)
{
	Node	   *n;

	if (++p->nnodes > MAX_NODES)
	{
		syntax(p, "too many terms");
		return NULL;
	}
	n = io_calloc(1, sizeof(Node));
	if (n == NULL)
		tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	else
		n->kind = kind;
	return n;
}

static Node *parse_or(Parser *p);

/* A literal at the current token, appended to n's. */
static bool
parse_lit(Parser *p, Node *n)
{
	Lit		   *nl;
	Lit		   *l;

	if (p->tok != T_STRING && p->tok != T_NUMBER && !is_kw(p, "true") && !is_kw(p, "false"))
		return syntax(p, is_kw(p, "null") ? "compare with null by IS NULL" : "a literal expected");
	nl = io_realloc(n->lits, sizeof(Lit) * (size_t) (n->nlits + 1));
	if (nl == NULL)
	{
		tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	n->lits = nl;
	l = &nl[n->nlits++];
	memset(l, 0, sizeof(*l));
	if (p->tok == T_NAME)
	{
		l->kind = IF_BOOL;
		l->b = is_kw(p, "true");
	}
	else
	{
		l->kind = p->tok == T_STRING ? IF_STRING : IF_NUMBER;
		l->text = p->text;
		p->text = NULL;
	}
	return next(p);
}

static Node *
parse_factor(Parser *p)
{
	Node	   *n;

	if (++p->depth > MAX_DEPTH)
	{
		syntax(p, "nested too deeply");
		return NULL;
	}
	if (is_kw(p, "not"))
	{
		if (!next(p) || (n = new_node(p, IF_NOT)) == NULL)
			return NULL;
		if ((n->a = parse_factor(p)) == NULL)
		{
			free_node(n);
			return NULL;
		}
		p->depth--;
		return n;
	}
	if (p->tok == T_LPAREN)
	{
		if (!next(p) || (n = parse_or(p)) == NULL)
			return NULL;
		if (p->tok != T_RPAREN)
		{
			syntax(p, "\")\" expected");
			free_node(n);
			return NULL;
		}
		if (!next(p))
		{
			free_node(n);
			return NULL;
		}
		p->depth--;
		return n;
	}
	if (p->tok != T_NAME || is_reserved(p))
	{
		syntax(p, "a column expected");
		return NULL;
	}
	if ((n = new_node(p, IF_CMP)) == NULL)
		return NULL;
	n->name = p->text;
	p->text = NULL;
	if (!next(p))
		goto fail;
	if (is_kw(p, "is"))
	{
		n->kind = IF_NULL;
		if (!next(p))
			goto fail;
		if (is_kw(p, "not"))
		{
			n->negate = true;
			if (!next(p))
				goto fail;
		}
		if (!is_kw(p, "null"))
		{
			syntax(p, "NULL expected after IS");
			goto fail;
		}
		if (!next(p))
			goto fail;
	}
	else if (p->tok == T_OP)
	{
		const char *o = p->text;

		n->op = strcmp(o, "=") == 0 ? IF_EQ : strcmp(o, "<") == 0 ? IF_LT :
			strcmp(o, "<=") == 0 ? IF_LE : strcmp(o, ">") == 0 ? IF_GT :
			strcmp(o, ">=") == 0 ? IF_GE : IF_NE;
		if (!next(p) || !parse_lit(p, n))
			goto fail;
	}
	else
	{
		bool		negate = false;

		if (is_kw(p, "not"))
		{
			negate = true;
			if (!next(p))
				goto fail;
		}
		if (is_kw(p, "in"))
		{
			n->kind = IF_IN;
			n->negate = negate;
			if (!next(p))
				goto fail;
			if (p->tok != T_LPAREN)
			{
				syntax(p, "\"(\" expected after IN");
				goto fail;
			}
			do
			{
				if (!next(p) || !parse_lit(p, n))
					goto fail;
			} while (p->tok == T_COMMA);
			if (p->tok != T_RPAREN)
			{
				syntax(p, "\")\" expected");
				goto fail;
			}
			if (!next(p))
				goto fail;
		}
		else if (is_kw(p, "between"))
		{
			Node	   *lo = n;
			Node	   *hi;
			Node	   *both;

			lo->op = IF_GE;
			if (!next(p) || !parse_lit(p, lo))
				goto fail;
			if (!is_kw(p, "and"))
			{
				syntax(p, "AND expected in BETWEEN");
				goto fail;
			}
			if ((hi = new_node(p, IF_CMP)) == NULL)
				goto fail;
			hi->op = IF_LE;
			hi->name = io_strdup(lo->name);
			both = new_node(p, IF_AND);
			if (both == NULL || hi->name == NULL)
			{
				if (hi->name == NULL)
					tms_error_set(p->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				free_node(hi);
				io_free(both);
				goto fail;
			}
			both->a = lo;
			both->b = hi;
			n = both;
			if (!next(p) || !parse_lit(p, hi))
				goto fail;
			if (negate)
			{
				Node	   *not = new_node(p, IF_NOT);

				if (not == NULL)
					goto fail;
				not->a = n;
				n = not;
			}
		}
		else
		{
			syntax(p, "a comparison, IN, BETWEEN or IS expected after a column");
			goto fail;
		}
	}
	p->depth--;
	return n;
fail:
	free_node(n);
	return NULL;
}

static Node *
parse_and(Parser *p)
{
	Node	   *n = parse_factor(p);

	while (n != NULL && is_kw(p, "and"))
	{
		Node	   *a = new_node(p, IF_AND);

		if (a == NULL || !next(p) || (a->b = parse_factor(p)) == NULL)
		{
			free_node(a);
			free_node(n);
			return NULL;
		}
		a->a = n;
		n = a;
	}
	return n;
}

static Node *
parse_or(Parser *p)
{
	Node	   *n;

	if (++p->depth > MAX_DEPTH)
	{
		syntax(p, "nested too deeply");
		return NULL;
	}
	n = parse_and(p);
	while (n != NULL && is_kw(p, "or"))
	{
		Node	   *o = new_node(p, IF_OR);

		if (o == NULL || !next(p) || (o->b = parse_and(p)) == NULL)
		{
			free_node(o);
			free_node(n);
			return NULL;
		}
		o->a = n;
		n = o;
	}
	p->depth--;
	return n;
}

bool
iceberg_partition_filter_parse(const char *text, IcebergPartitionFilter **out,
							   TmsError *err)
{
	Parser		p;
	Node	   *root;

	tms_error_clear(err);
	*out = NULL;
	if (text == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT, "no where filter given");
		return false;
	}
	if (strlen(text) > MAX_TEXT)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "invalid where filter: longer than %d bytes", MAX_TEXT);
		return false;
	}
	memset(&p, 0, sizeof(p));
	p.s = text;
	p.err = err;
	if (!next(&p))
	{
		io_free(p.text);
		return false;
	}
	if (p.tok == T_END)
		return syntax(&p, "empty");
	root = parse_or(&p);
	if (root != NULL && p.tok != T_END)
	{
		syntax(&p, "unexpected text after the filter");
		free_node(root);
		root = NULL;
	}
	io_free(p.text);
	if (root == NULL)
		return false;
	*out = io_calloc(1, sizeof(IcebergPartitionFilter));
	if (*out == NULL)
	{
		free_node(root);
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	(*out)->root = root;
	(*out)->nnodes = p.nnodes;
	return true;
}

void
iceberg_partition_filter_free(IcebergPartitionFilter *f)
{
	if (f == NULL)
		return;
	free_node(f->root);
	io_free(f);
}

/* ---------------------------------------------------------------------
 * Binding
 * ---------------------------------------------------------------------
 */

/* The value type of a partition field (its transform over its source). */
static bool
field_type(const IcebergPartitionField *pf, const IcebergSchema *schema,
		   IcebergTypeId *type, const IcebergColumn **src)
{
	const char *t = pf->transform;

	*src = iceberg_schema_field(schema, pf->source_id, NULL);
	if (strncmp(t, "bucket", 6) == 0 || strcmp(t, "year") == 0 ||
		strcmp(t, "month") == 0 || strcmp(t, "hour") == 0)
		*type = ICEBERG_TYPE_INT;
	else if (strcmp(t, "day") == 0)
		*type = ICEBERG_TYPE_DATE;
	else if (*src != NULL && (strcmp(t, "identity") == 0 || strncmp(t, "truncate", 8) == 0 ||
							  strcmp(t, "void") == 0))
		*type = (*src)->type;
	else
		return false;
	return true;
}

/* 'YYYY-MM-DD' at s; the rest in *rest. */
static bool
parse_date(const char *s, int64_t *days, const char **rest)
{
	int			y,
				m,
				d,
				n = 0;

	if (sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || n != 10 ||
		m < 1 || m > 12 || d < 1 || d > 31)
		return false;
	*days = io_days_from_civil(y, m, d);
	*rest = s + n;
	return true;
}

/* 'HH:MM[:SS[.ffffff]]' at s, in microseconds. */
static bool
parse_time(const char *s, int64_t *us, const char **rest)
{
	int			h,
				mi,
				n = 0;
	int64_t		v;

	if (sscanf(s, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5 || h > 23 || mi > 59)
		return false;
	v = ((int64_t) h * 60 + mi) * 60 * 1000000;
	s += n;
	if (*s == ':')
	{
		int			sec;
		int64_t		frac = 0;
		int			digits = 0;

		if (!isdigit((unsigned char) s[1]) || !isdigit((unsigned char) s[2]))
			return false;
		sec = (s[1] - '0') * 10 + (s[2] - '0');
		if (sec > 59)
			return false;
		s += 3;
		if (*s == '.')
		{
			for (s++; isdigit((unsigned char) *s); s++)
				if (digits++ < 6)
					frac = frac * 10 + (*s - '0');
			if (digits == 0 || digits > 6)
				return false;
			while (digits++ < 6)
				frac *= 10;
		}
		v += (int64_t) sec * 1000000 + frac;
	}
	*us = v;
	*rest = s;
	return true;
}

static bool
parse_timestamp(const char *s, bool with_zone, int64_t *us)
{
	int64_t		days,
				t = 0;
	const char *r;

	if (!parse_date(s, &days, &r))
		return false;
	if (*r == ' ' || *r == 'T')
	{
		if (!parse_time(r + 1, &t, &r))
			return false;
	}
	if (*r == 'Z' || *r == '+' || *r == '-')
	{
		int			oh = 0,
					om = 0;

		if (!with_zone)
			return false;
		if (*r != 'Z')
		{
			if (sscanf(r + 1, "%2d:%2d", &oh, &om) != 2 || strlen(r) != 6)
				return false;
			t -= (*r == '+' ? 1 : -1) * ((int64_t) oh * 60 + om) * 60 * 1000000;
			r += 6;
		}
		else
			r++;
	}
	if (*r != '\0')
		return false;
	*us = days * INT64_C(86400000000) + t;
	return true;
}

/* An exact decimal literal as an unscaled value of the given scale. */
static bool
parse_decimal(const char *s, int scale, __int128 *out)
{
	__int128	v = 0;
	bool		neg = false;
	bool		point = false;
	int			frac = 0;
	int			digits = 0;

	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	for (; *s; s++)
	{
		if (*s == '.' && !point)
		{
			point = true;
			continue;
		}
		if (!isdigit((unsigned char) *s) || ++digits > 38)
			return false;
		if (point && ++frac > scale)
		{
			if (*s != '0')
				return false;
			continue;
		}
		v = v * 10 + (*s - '0');
	}
	if (digits == 0 || digits - (frac < scale ? frac : scale) + scale > 38)
		return false;
	for (; frac < scale; frac++)
		v *= 10;
	*out = neg ? -v : v;
	return true;
}

static bool
parse_int(const char *s, int64_t *out)
{
	char	   *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return *s != '\0' && *end == '\0' && errno == 0;
}

static int
hexdigit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A literal as a value of type t; false: it is not one. */
static bool
convert(const Lit *l, IcebergTypeId t, const char *transform, Value *v, bool *oom)
{
	const char *s = l->text;

	memset(v, 0, sizeof(*v));
	*oom = false;
	switch (t)
	{
		case ICEBERG_TYPE_BOOLEAN:
			v->kind = V_INT;
			if (l->kind == IF_BOOL)
				v->i = l->b;
			else if (l->kind == IF_STRING && (strcasecmp(s, "true") == 0 || strcasecmp(s, "false") == 0))
				v->i = strcasecmp(s, "true") == 0;
			else
				return false;
			return true;
		case ICEBERG_TYPE_INT:
		case ICEBERG_TYPE_LONG:
			v->kind = V_INT;
			if (l->kind == IF_BOOL)
				return false;
			if (parse_int(s, &v->i))
				return t == ICEBERG_TYPE_LONG || (v->i >= INT32_MIN && v->i <= INT32_MAX);
			if (l->kind == IF_STRING && strcmp(transform, "month") == 0)
			{
				int			y,
							m,
							n = 0;

				if (sscanf(s, "%4d-%2d%n", &y, &m, &n) == 2 && s[n] == '\0' && m >= 1 && m <= 12)
				{
					v->i = ((int64_t) y - 1970) * 12 + (m - 1);
					return true;
				}
			}
			if (l->kind == IF_STRING && strcmp(transform, "year") == 0)
			{
				int			y,
							n = 0;

				if (sscanf(s, "%4d%n", &y, &n) == 1 && s[n] == '\0')
				{
					v->i = (int64_t) y - 1970;
					return true;
				}
			}
			return false;
		case ICEBERG_TYPE_DATE:
			{
				const char *r;

				v->kind = V_INT;
				if (l->kind == IF_NUMBER)
					return parse_int(s, &v->i);
				return l->kind == IF_STRING && parse_date(s, &v->i, &r) && *r == '\0';
			}
		case ICEBERG_TYPE_TIME:
			{
				const char *r;

				v->kind = V_INT;
				if (l->kind == IF_NUMBER)
					return parse_int(s, &v->i);
				return l->kind == IF_STRING && parse_time(s, &v->i, &r) && *r == '\0';
			}
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
		case ICEBERG_TYPE_TIMESTAMP_NS:
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			v->kind = V_INT;
			if (l->kind == IF_NUMBER)
				return parse_int(s, &v->i);
			if (l->kind != IF_STRING ||
				!parse_timestamp(s, t == ICEBERG_TYPE_TIMESTAMPTZ || t == ICEBERG_TYPE_TIMESTAMPTZ_NS,
								 &v->i))
				return false;
			if (t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS)
				v->i *= 1000;
			return true;
		case ICEBERG_TYPE_FLOAT:
		case ICEBERG_TYPE_DOUBLE:
			{
				char	   *end;

				v->kind = V_DOUBLE;
				if (l->kind != IF_NUMBER)
					return false;
				v->d = strtod(s, &end);
				if (*end != '\0')
					return false;
				if (t == ICEBERG_TYPE_FLOAT)
					v->d = (double) (float) v->d;
				return true;
			}
		case ICEBERG_TYPE_DECIMAL:
			/* read at the column's scale by the caller */
			v->kind = V_DECIMAL;
			return l->kind == IF_NUMBER;
		case ICEBERG_TYPE_STRING:
			if (l->kind != IF_STRING)
				return false;
			v->kind = V_BYTES;
			v->len = strlen(s);
			v->bytes = io_strdup(s);
			*oom = v->bytes == NULL;
			return !*oom;
		case ICEBERG_TYPE_UUID:
			{
				int			k = 0;

				if (l->kind != IF_STRING || strlen(s) != 36)
					return false;
				v->kind = V_BYTES;
				v->bytes = io_malloc(16);
				if (v->bytes == NULL)
				{
					*oom = true;
					return false;
				}
				v->len = 16;
				for (int i = 0; i < 36; i++)
				{
					int			h,
								lo;

					if (i == 8 || i == 13 || i == 18 || i == 23)
					{
						if (s[i] != '-')
							return false;
						continue;
					}
					h = hexdigit(s[i]);
					lo = hexdigit(s[i + 1]);
					if (h < 0 || lo < 0)
						return false;
					v->bytes[k++] = (char) (h * 16 + lo);
					i++;
				}
				return k == 16;
			}
		default:
			return false;
	}
}

static const char *
type_name(IcebergTypeId t, const IcebergColumn *src)
{
	switch (t)
	{
		case ICEBERG_TYPE_DATE:
			return "date";
		case ICEBERG_TYPE_INT:
			return "int";
		default:
			return src ? src->type_text : "the partition's type";
	}
}

/* Bind one leaf for every spec. */
static bool
bind_leaf(Node *n, const IcebergTableMetadata *md, const IcebergSchema *schema,
		  TmsError *err)
{
	bool		known = false;
	int			s,
				k;

	n->bind = io_calloc((size_t) md->nspecs + 1, sizeof(SpecBinding));
	if (n->bind == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	n->nbind = md->nspecs;
	for (s = 0; s < md->nspecs; s++)
	{
		const IcebergPartitionSpec *spec = &md->specs[s];
		SpecBinding *b = &n->bind[s];

		b->spec_id = spec->spec_id;
		b->field = -1;
		for (k = 0; k < spec->nfields && b->field < 0; k++)
		{
			const IcebergPartitionField *pf = &spec->fields[k];
			const IcebergColumn *src = iceberg_schema_column(schema, pf->source_id);

			if (strcmp(pf->name, n->name) == 0 ||
				(strcmp(pf->transform, "identity") == 0 && src != NULL &&
				 strcmp(src->name, n->name) == 0))
				b->field = k;
		}
		if (b->field < 0)
			continue;
		known = true;
		{
			const IcebergPartitionField *pf = &spec->fields[b->field];
			const IcebergColumn *src;
			IcebergTypeId t;
			int			i;

			if (!field_type(pf, schema, &t, &src))
			{
				tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
							  "partition field \"%s\" cannot be filtered", pf->name);
				tms_error_detail(err, "Its transform \"%s\" or source column is not known.",
								 pf->transform);
				return false;
			}
			b->type = t;
			b->kind = t == ICEBERG_TYPE_FLOAT || t == ICEBERG_TYPE_DOUBLE ? V_DOUBLE :
				t == ICEBERG_TYPE_DECIMAL ? V_DECIMAL :
				t == ICEBERG_TYPE_STRING || t == ICEBERG_TYPE_UUID ? V_BYTES : V_INT;
			b->values = io_calloc((size_t) n->nlits + 1, sizeof(Value));
			if (b->values == NULL)
			{
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				return false;
			}
			for (i = 0; i < n->nlits; i++)
			{
				bool		oom;

				b->nvalues++;
				if (!convert(&n->lits[i], t, pf->transform, &b->values[i], &oom))
				{
					if (oom)
					{
						tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
						return false;
					}
					tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
								  "invalid literal for \"%s\" in the where filter", n->name);
					tms_error_detail(err, "%s%s%s is not a value of type %s.",
									 n->lits[i].kind == IF_STRING ? "'" : "",
									 n->lits[i].kind == IF_BOOL ? (n->lits[i].b ? "true" : "false")
									 : n->lits[i].text,
									 n->lits[i].kind == IF_STRING ? "'" : "",
									 type_name(t, src));
					return false;
				}
			}
			if (t == ICEBERG_TYPE_DECIMAL)
			{
				/* again at the scale of the column */
				for (i = 0; i < n->nlits; i++)
					if (!parse_decimal(n->lits[i].text, src->scale, &b->values[i].dec))
					{
						tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
									  "invalid literal for \"%s\" in the where filter", n->name);
						tms_error_detail(err, "%s has more digits than %s.",
										 n->lits[i].text, src->type_text);
						return false;
					}
			}
		}
	}
	if (!known)
	{
		const IcebergColumn *c = NULL;

		for (k = 0; k < schema->ncolumns && c == NULL; k++)
			if (strcmp(schema->columns[k].name, n->name) == 0)
				c = &schema->columns[k];
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  c ? "column \"%s\" is not a partition column" :
					  "\"%s\" is neither a partition field nor a column", n->name);
		tms_error_detail(err, "A where filter of a compaction selects partitions: name a partition field, or a column an identity partition field has as its source.");
		return false;
	}
	return true;
}

static bool
bind_node(Node *n, const IcebergTableMetadata *md, const IcebergSchema *schema,
		  TmsError *err)
{
	int			i;

	if (n == NULL)
		return true;
	if (n->kind == IF_AND || n->kind == IF_OR || n->kind == IF_NOT)
		return bind_node(n->a, md, schema, err) && bind_node(n->b, md, schema, err);
	for (i = 0; i < n->nbind; i++)
		free_values(&n->bind[i]);
	io_free(n->bind);
	n->bind = NULL;
	n->nbind = 0;
	return bind_leaf(n, md, schema, err);
}

bool
iceberg_partition_filter_bind(IcebergPartitionFilter *f, const IcebergTableMetadata *md,
							  TmsError *err)
{
	IcebergSchema *schema;
	bool		ok;

	tms_error_clear(err);
	if (!iceberg_schema_parse(md->current_schema_json, &schema, err))
		return false;
	ok = bind_node(f->root, md, schema, err);
	iceberg_schema_free(schema);
	f->bound = ok;
	return ok;
}

/* ---------------------------------------------------------------------
 * Evaluation: 1 true, 0 false, -1 unknown
 * ---------------------------------------------------------------------
 */

/* The partition value at position field, as kind; false: null. */
static bool
partition_value(const char *text, size_t len, int field, IcebergTypeId type, VKind kind,
				Value *v, IcebergBuf *tmp, bool *bad)
{
	const char *p = text;
	const char *tok = NULL;
	size_t		tl = 0;
	int			i;
	char		num[64];

	*bad = false;
	for (i = 0; i <= field; i++)
		if (!iceberg_partition_next(&p, text + len, &tok, &tl))
		{
			*bad = true;
			return false;
		}
	if (tl == 4 && memcmp(tok, "null", 4) == 0)
		return false;
	memset(v, 0, sizeof(*v));
	v->kind = kind;
	if (kind == V_BYTES)
	{
		if (tok[0] != '"' || !(type == ICEBERG_TYPE_UUID ? iceberg_json_unhex(tok, tl, tmp) :
							   iceberg_json_unescape(tok, tl, tmp)))
		{
			*bad = true;
			return false;
		}
		v->bytes = tmp->data;
		v->len = tmp->len;
		return true;
	}
	if (kind == V_DECIMAL)
	{
		__int128	d = 0;

		if (!iceberg_json_unhex(tok, tl, tmp) || tmp->len == 0 || tmp->len > 16)
		{
			*bad = true;
			return false;
		}
		d = (tmp->data[0] & 0x80) ? -1 : 0;
		for (i = 0; i < (int) tmp->len; i++)
			d = (__int128) ((unsigned __int128) d << 8) | (uint8_t) tmp->data[i];
		v->dec = d;
		return true;
	}
	if (tl >= sizeof(num))
	{
		*bad = true;
		return false;
	}
	memcpy(num, tok, tl);
	num[tl] = '\0';
	if (kind == V_DOUBLE)
	{
		char	   *end;

		if (strcmp(num, "\"NaN\"") == 0)
			return false;		/* compares as unknown */
		v->d = strcmp(num, "\"Infinity\"") == 0 ? 1.0 / 0.0 :
			strcmp(num, "\"-Infinity\"") == 0 ? -1.0 / 0.0 : strtod(num, &end);
		return true;
	}
	if (strcmp(num, "true") == 0 || strcmp(num, "false") == 0)
		v->i = num[0] == 't';
	else if (!parse_int(num, &v->i))
	{
		*bad = true;
		return false;
	}
	return true;
}

static int
compare(const Value *a, const Value *b)
{
	switch (a->kind)
	{
		case V_INT:
			return a->i < b->i ? -1 : a->i > b->i;
		case V_DOUBLE:
			return a->d < b->d ? -1 : a->d > b->d;
		case V_DECIMAL:
			return a->dec < b->dec ? -1 : a->dec > b->dec;
		case V_BYTES:
			return iceberg_bytes_cmp(a->bytes, a->len, b->bytes, b->len);
	}
	return 0;
}

static int
eval(const Node *n, int32_t spec_id, const char *text, size_t len, IcebergBuf *tmp)
{
	const SpecBinding *b = NULL;
	Value		v;
	bool		bad;
	int			i,
				x,
				y;

	switch (n->kind)
	{
		case IF_AND:
			x = eval(n->a, spec_id, text, len, tmp);
			if (x == 0)
				return 0;
			y = eval(n->b, spec_id, text, len, tmp);
			return y == 0 ? 0 : (x == 1 && y == 1) ? 1 : -1;
		case IF_OR:
			x = eval(n->a, spec_id, text, len, tmp);
			if (x == 1)
				return 1;
			y = eval(n->b, spec_id, text, len, tmp);
			return y == 1 ? 1 : (x == 0 && y == 0) ? 0 : -1;
		case IF_NOT:
			x = eval(n->a, spec_id, text, len, tmp);
			return x < 0 ? -1 : !x;
		default:
			break;
	}
	for (i = 0; i < n->nbind; i++)
		if (n->bind[i].spec_id == spec_id)
			b = &n->bind[i];
	if (b == NULL || b->field < 0)
		return -1;
	if (n->kind == IF_NULL)
	{
		const char *p = text;
		const char *tok = NULL;
		size_t		tl = 0;

		for (i = 0; i <= b->field; i++)
			if (!iceberg_partition_next(&p, text + len, &tok, &tl))
				return -1;
		return (tl == 4 && memcmp(tok, "null", 4) == 0) != n->negate;
	}
	if (!partition_value(text, len, b->field, b->type, b->kind, &v, tmp, &bad))
		return -1;
	if (n->kind == IF_IN)
	{
		for (i = 0; i < b->nvalues; i++)
			if (compare(&v, &b->values[i]) == 0)
				return !n->negate;
		return n->negate;
	}
	x = compare(&v, &b->values[0]);
	switch (n->op)
	{
		case IF_EQ:
			return x == 0;
		case IF_NE:
			return x != 0;
		case IF_LT:
			return x < 0;
		case IF_LE:
			return x <= 0;
		case IF_GT:
			return x > 0;
		case IF_GE:
			return x >= 0;
	}
	return -1;
}

bool
iceberg_partition_filter_match(const IcebergPartitionFilter *f, int32_t spec_id,
							   const char *partition, size_t len)
{
	IcebergBuf	tmp = {0};
	int			r;

	if (f == NULL)
		return true;
	if (!f->bound)
		return false;
	r = eval(f->root, spec_id, partition, len, &tmp);
	iceberg_buf_free(&tmp);
	return r == 1;
}

const IcebergFilterNode *
iceberg_partition_filter_root(const IcebergPartitionFilter *f)
{
	return f == NULL ? NULL : f->root;
}

bool
iceberg_filter_lit_int(const IcebergFilterLit *l, IcebergTypeId t, int64_t *out)
{
	Value		v;
	bool		oom;
	bool		ok = convert(l, t, "identity", &v, &oom) && v.kind == V_INT;

	io_free(v.bytes);
	if (ok)
		*out = v.i;
	return ok;
}
