/*-------------------------------------------------------------------------
 *
 * dsl_eval.c
 *		Evaluation of compiled policy conditions: the fast evaluator, the
 *		generic (explaining) evaluator, and the countDataFiles() pass.
 *
 * The fast evaluator is four mutually recursive functions, one per result
 * type, each a switch over the node's specialised operator: no type tests
 * at run time, no allocation.  Run-time failures (division by zero, LONG
 * overflow, a DOUBLE that is not finite) record the first outcome in the
 * evaluation context and yield 0; the caller turns any outcome into
 * "false".  Recursion depth is bounded by DSL_MAX_DEPTH.
 *
 * The generic evaluator runs the unspecialised operators (gop), stops at
 * the first failure, and can record every node for an explanation.
 *
 * countDataFiles(): the first call reached during an evaluation reads the
 * whole file stream once and computes every lambda of the condition in
 * that single pass; each lambda keeps its own count and its own outcome,
 * so a failure inside a lambda only matters if the condition reaches that
 * countDataFiles() call.  File-independent parts of a lambda were hoisted
 * at compile time and are computed once per pass; if computing one fails,
 * that lambda is evaluated per file with the generic evaluator instead, so
 * a failure no file reaches stays unreached.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl_int.h"

typedef struct EvalCtx
{
	const char *base[3];		/* BASE_METRICS, BASE_FILE, BASE_SLOTS */
	DslOutcome	outcome;		/* first failure, or DSL_OK */
	const DslProgram *p;
	const DslInput *in;
	bool		pass_done;
	bool		explain;		/* generic per-file evaluation, recording */
	bool		recording;		/* record nodes into rec now */
	DslExplainNode *rec;
	int64_t		files;			/* files read by the pass */
	int64_t		counts[DSL_MAX_LAMBDAS];
	DslOutcome	lam_outcome[DSL_MAX_LAMBDAS];
	DslValue	slots[DSL_MAX_SLOTS];
} EvalCtx;

static inline void
fail(EvalCtx *c, DslOutcome o)
{
	if (c->outcome == DSL_OK)
		c->outcome = o;
}

/* ---------------------------------------------------------------------
 * Property conversion (the Iceberg way: properties are strings)
 * ---------------------------------------------------------------------
 */

/*
 * A whole base-10 integer: optional sign, digits, nothing else (no
 * whitespace, no size suffix: Iceberg parses with Long.parseLong).
 */
bool
dsl_parse_long(const char *s, int64_t *out)
{
	bool		neg = false;
	uint64_t	v = 0;
	uint64_t	limit;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (*s == '\0')
		return false;
	limit = neg ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;
	for (; *s; s++)
	{
		if (*s < '0' || *s > '9')
			return false;
		if (v > (limit - (uint64_t) (*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t) (*s - '0');
	}
	if (neg)
		*out = v == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) v;
	else
		*out = (int64_t) v;
	return true;
}

/*
 * A finite decimal number: [+-] digits [. digits] [e [+-] digits], with at
 * least one digit before the exponent.  No hex, inf or nan, no whitespace.
 */
bool
dsl_parse_double(const char *s, double *out)
{
	const char *p = s;
	int			digits = 0;
	char	   *end;
	double		d;

	if (*p == '+' || *p == '-')
		p++;
	while (*p >= '0' && *p <= '9')
		p++, digits++;
	if (*p == '.')
	{
		p++;
		while (*p >= '0' && *p <= '9')
			p++, digits++;
	}
	if (digits == 0)
		return false;
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p != '\0')
		return false;
	d = strtod(s, &end);
	if (end != p || !isfinite(d))
		return false;
	*out = d;
	return true;
}

/* "true" or "false", in any case. */
bool
dsl_parse_bool(const char *s, bool *out)
{
	const char *w[2] = {"false", "true"};

	for (int i = 0; i < 2; i++)
	{
		const char *a = s,
				   *b = w[i];

		while (*a && *b && (*a | 0x20) == *b)
			a++, b++;
		if (*a == '\0' && *b == '\0')
		{
			*out = i == 1;
			return true;
		}
	}
	return false;
}

/* The raw text of a property, or NULL if missing. */
static inline const char *
prop_raw(const EvalCtx *c, const DslNode *n)
{
	const DslProperties *pr = c->in->properties;

	if (pr == NULL || pr->get == NULL)
		return NULL;
	return pr->get(pr->arg, n->k.s);
}

/* ---------------------------------------------------------------------
 * Fast evaluator
 * ---------------------------------------------------------------------
 */

static int64_t ev_l(const DslNode *n, EvalCtx *c);
static double ev_d(const DslNode *n, EvalCtx *c);
static bool ev_b(const DslNode *n, EvalCtx *c);
static const char *ev_s(const DslNode *n, EvalCtx *c);
static void run_pass(EvalCtx *c);

#define LOAD_L(c, b_, off) (*(const int64_t *) ((c)->base[b_] + (off)))
#define LOAD_D(c, b_, off) (*(const double *) ((c)->base[b_] + (off)))

/* The value of countDataFiles() number lambda. */
static int64_t
count_value(const DslNode *n, EvalCtx *c)
{
	if (c->outcome != DSL_OK)
		return 0;
	if (!c->pass_done)
		run_pass(c);
	if (c->lam_outcome[n->lambda] != DSL_OK)
	{
		fail(c, c->lam_outcome[n->lambda]);
		return 0;
	}
	return c->counts[n->lambda];
}

static int64_t
ev_l(const DslNode *n, EvalCtx *c)
{
	int64_t		x,
				r;
	const char *raw;

	switch ((DslOp) n->op)
	{
		case OP_CONST_L:
			return n->k.l;
		case OP_VAR_L:
			return LOAD_L(c, BASE_METRICS, n->aoff);
		case OP_FIELD_L:
			return LOAD_L(c, BASE_FILE, n->aoff);
		case OP_SLOT_L:
			return c->slots[n->slot].l;
		case OP_NEG_L:
			x = ev_l(n->a, c);
			if (x == INT64_MIN)
			{
				fail(c, DSL_OVERFLOW);
				return 0;
			}
			return -x;
		case OP_ADD_LL:
			x = ev_l(n->a, c);
			if (__builtin_add_overflow(x, ev_l(n->b, c), &r))
				break;
			return r;
		case OP_SUB_LL:
			x = ev_l(n->a, c);
			if (__builtin_sub_overflow(x, ev_l(n->b, c), &r))
				break;
			return r;
		case OP_MUL_LL:
			x = ev_l(n->a, c);
			if (__builtin_mul_overflow(x, ev_l(n->b, c), &r))
				break;
			return r;
		case OP_UNIT_L:
			if (__builtin_mul_overflow(ev_l(n->a, c), n->k.l, &r))
				break;
			return r;
		case OP_PROP_L:
			raw = prop_raw(c, n);
			if (raw && dsl_parse_long(raw, &r))
				return r;
			return ev_l(n->a, c);
		case OP_COUNT:
			return count_value(n, c);
		default:
			return 0;
	}
	fail(c, DSL_OVERFLOW);
	return 0;
}

/* A DOUBLE result: finite, or an overflow. */
static inline double
finite_or_fail(double d, EvalCtx *c)
{
	if (!isfinite(d))
	{
		fail(c, DSL_OVERFLOW);
		return 0.0;
	}
	return d;
}

static double
ev_d(const DslNode *n, EvalCtx *c)
{
	double		x,
				y;
	const char *raw;

	switch ((DslOp) n->op)
	{
		case OP_CONST_D:
			return n->k.d;
		case OP_VAR_D:
			return LOAD_D(c, BASE_METRICS, n->aoff);
		case OP_SLOT_D:
			return c->slots[n->slot].d;
		case OP_I2D:
			return (double) ev_l(n->a, c);
		case OP_NEG_D:
			return -ev_d(n->a, c);
		case OP_ADD_DD:
			x = ev_d(n->a, c);
			return finite_or_fail(x + ev_d(n->b, c), c);
		case OP_SUB_DD:
			x = ev_d(n->a, c);
			return finite_or_fail(x - ev_d(n->b, c), c);
		case OP_MUL_DD:
			x = ev_d(n->a, c);
			return finite_or_fail(x * ev_d(n->b, c), c);
		case OP_DIV_DD:
			x = ev_d(n->a, c);
			y = ev_d(n->b, c);
			if (y == 0.0)
			{
				fail(c, DSL_DIVISION_BY_ZERO);
				return 0.0;
			}
			return finite_or_fail(x / y, c);
		case OP_UNIT_D:
			return finite_or_fail(ev_d(n->a, c) * n->k.d, c);
		case OP_PROP_D:
			raw = prop_raw(c, n);
			if (raw && dsl_parse_double(raw, &x))
				return x;
			return ev_d(n->a, c);
		default:
			return 0.0;
	}
}

static const char *
ev_s(const DslNode *n, EvalCtx *c)
{
	const char *raw;

	switch ((DslOp) n->op)
	{
		case OP_CONST_S:
			return n->k.s;
		case OP_SLOT_S:
			return c->slots[n->slot].s;
		case OP_PROP_S:
			raw = prop_raw(c, n);
			return raw ? raw : ev_s(n->a, c);
		default:
			return "";
	}
}

/* The six comparisons of x and y, for the opcode block starting at base. */
#define CMP_CASES(base, T, X, Y) \
	case (base) + CMP_EQ: { T x_ = (X); return x_ == (Y); } \
	case (base) + CMP_NE: { T x_ = (X); return x_ != (Y); } \
	case (base) + CMP_LT: { T x_ = (X); return x_ < (Y); } \
	case (base) + CMP_LE: { T x_ = (X); return x_ <= (Y); } \
	case (base) + CMP_GT: { T x_ = (X); return x_ > (Y); } \
	case (base) + CMP_GE: { T x_ = (X); return x_ >= (Y); }

static bool
ev_b(const DslNode *n, EvalCtx *c)
{
	const char *raw;
	bool		b;

	switch (n->op)
	{
		case OP_CONST_B:
			return n->k.b;
		case OP_FIELD_B:
			return *(const bool *) (c->base[BASE_FILE] + n->aoff);
		case OP_SLOT_B:
			return c->slots[n->slot].b;
		case OP_NOT:
			return !ev_b(n->a, c);
		case OP_AND:
			return ev_b(n->a, c) && ev_b(n->b, c);
		case OP_OR:
			return ev_b(n->a, c) || ev_b(n->b, c);
			CMP_CASES(OP_CMPK_L, int64_t, LOAD_L(c, n->abase, n->aoff), n->k.l)
				CMP_CASES(OP_CMPK_D, double, LOAD_D(c, n->abase, n->aoff), n->k.d)
				CMP_CASES(OP_CMPX_L, int64_t, LOAD_L(c, n->abase, n->aoff), LOAD_L(c, n->bbase, n->boff))
				CMP_CASES(OP_CMPX_D, double, LOAD_D(c, n->abase, n->aoff), LOAD_D(c, n->bbase, n->boff))
				CMP_CASES(OP_CMPE_L, int64_t, ev_l(n->a, c), n->k.l)
				CMP_CASES(OP_CMPE_D, double, ev_d(n->a, c), n->k.d)
				CMP_CASES(OP_CMP_LL, int64_t, ev_l(n->a, c), ev_l(n->b, c))
				CMP_CASES(OP_CMP_DD, double, ev_d(n->a, c), ev_d(n->b, c))
				CMP_CASES(OP_CMP_BB, bool, ev_b(n->a, c), ev_b(n->b, c))
				CMP_CASES(OP_CMP_SS, int, strcmp(ev_s(n->a, c), ev_s(n->b, c)), 0)
		case OP_PROP_B:
			raw = prop_raw(c, n);
			if (raw && dsl_parse_bool(raw, &b))
				return b;
			return ev_b(n->a, c);
		default:
			return false;
	}
}

/* ---------------------------------------------------------------------
 * Generic evaluator
 * ---------------------------------------------------------------------
 */

/* Record n's value (or failure) in the explanation, if recording. */
static inline void
record(EvalCtx *c, const DslNode *n, DslValue v)
{
	DslExplainNode *e;

	if (!c->recording || n->xid < 0)
		return;
	e = &c->rec[n->xid];
	if (c->outcome != DSL_OK)
	{
		e->state = DSL_NODE_FAILED;
		e->outcome = c->outcome;
	}
	else
	{
		e->state = DSL_NODE_EVALUATED;
		e->value = v;
	}
}

static int
compare_values(int gop, DslValue x, DslValue y)
{
	if (gop >= OP_CMP_LL && gop < OP_CMP_LL + CMP__N)
		return x.l < y.l ? -1 : x.l > y.l;
	if (gop >= OP_CMP_DD && gop < OP_CMP_DD + CMP__N)
		return x.d < y.d ? -1 : x.d > y.d ? 1 : x.d == y.d ? 0 : 2;
	if (gop >= OP_CMP_SS && gop < OP_CMP_SS + CMP__N)
	{
		int			r = strcmp(x.s, y.s);

		return r < 0 ? -1 : r > 0;
	}
	return (int) x.b - (int) y.b;
}

/*
 * Evaluate n with the generic operators.  Stops at the first failure
 * (c->outcome), recording nodes when c->recording.
 */
static DslValue
gev(const DslNode *n, EvalCtx *c)
{
	DslValue	v,
				x,
				y;
	const char *raw;
	int			gop = n->gop;

	v.l = 0;
	switch (gop)
	{
		case OP_CONST_B:
		case OP_CONST_L:
		case OP_CONST_D:
		case OP_CONST_S:
			v = n->k;
			break;
		case OP_VAR_L:
			v.l = LOAD_L(c, BASE_METRICS, n->aoff);
			break;
		case OP_VAR_D:
			v.d = LOAD_D(c, BASE_METRICS, n->aoff);
			break;
		case OP_FIELD_L:
			v.l = LOAD_L(c, BASE_FILE, n->aoff);
			break;
		case OP_FIELD_B:
			v.b = *(const bool *) (c->base[BASE_FILE] + n->aoff);
			break;
		case OP_I2D:
			x = gev(n->a, c);
			v.d = (double) x.l;
			break;
		case OP_NEG_L:
			x = gev(n->a, c);
			if (c->outcome == DSL_OK && x.l == INT64_MIN)
				fail(c, DSL_OVERFLOW);
			else
				v.l = -x.l;
			break;
		case OP_NEG_D:
			x = gev(n->a, c);
			v.d = -x.d;
			break;
		case OP_NOT:
			x = gev(n->a, c);
			v.b = !x.b;
			break;
		case OP_AND:
		case OP_OR:
			x = gev(n->a, c);
			if (c->outcome != DSL_OK)
				break;
			if (x.b == (gop == OP_OR))
			{
				v.b = x.b;		/* the right side is not evaluated */
				break;
			}
			v = gev(n->b, c);
			break;
		case OP_ADD_LL:
		case OP_SUB_LL:
		case OP_MUL_LL:
		case OP_ADD_DD:
		case OP_SUB_DD:
		case OP_MUL_DD:
		case OP_DIV_DD:
			x = gev(n->a, c);
			if (c->outcome != DSL_OK)
				break;
			y = gev(n->b, c);
			if (c->outcome != DSL_OK)
				break;
			switch (gop)
			{
				case OP_ADD_LL:
					if (__builtin_add_overflow(x.l, y.l, &v.l))
						fail(c, DSL_OVERFLOW);
					break;
				case OP_SUB_LL:
					if (__builtin_sub_overflow(x.l, y.l, &v.l))
						fail(c, DSL_OVERFLOW);
					break;
				case OP_MUL_LL:
					if (__builtin_mul_overflow(x.l, y.l, &v.l))
						fail(c, DSL_OVERFLOW);
					break;
				case OP_ADD_DD:
					v.d = x.d + y.d;
					break;
				case OP_SUB_DD:
					v.d = x.d - y.d;
					break;
				case OP_MUL_DD:
					v.d = x.d * y.d;
					break;
				default:
					if (y.d == 0.0)
						fail(c, DSL_DIVISION_BY_ZERO);
					else
						v.d = x.d / y.d;
					break;
			}
			if (c->outcome == DSL_OK && n->type == DSL_DOUBLE && !isfinite(v.d))
				fail(c, DSL_OVERFLOW);
			break;
		case OP_UNIT_L:
			x = gev(n->a, c);
			if (c->outcome == DSL_OK && __builtin_mul_overflow(x.l, n->k.l, &v.l))
				fail(c, DSL_OVERFLOW);
			break;
		case OP_UNIT_D:
			x = gev(n->a, c);
			v.d = x.d * n->k.d;
			if (c->outcome == DSL_OK && !isfinite(v.d))
				fail(c, DSL_OVERFLOW);
			break;
		case OP_PROP_B:
		case OP_PROP_L:
		case OP_PROP_D:
		case OP_PROP_S:
			{
				bool		found;

				raw = prop_raw(c, n);
				found = raw != NULL;
				if (found)
				{
					if (gop == OP_PROP_B)
						found = dsl_parse_bool(raw, &v.b);
					else if (gop == OP_PROP_L)
						found = dsl_parse_long(raw, &v.l);
					else if (gop == OP_PROP_D)
						found = dsl_parse_double(raw, &v.d);
					else
						v.s = raw;
				}
				if (!found)
					v = gev(n->a, c);
				if (c->recording)
				{
					c->rec[n->xid].raw = raw;
					c->rec[n->xid].property_found = found;
				}
				break;
			}
		case OP_COUNT:
			v.l = count_value(n, c);
			if (c->recording)
				c->rec[n->xid].files = c->files;
			break;
		default:
			if (gop >= OP_CMP_LL && gop < OP_CMP_BB + CMP__N)
			{
				int			ck = (gop - OP_CMP_LL) % CMP__N;
				int			r;

				x = gev(n->a, c);
				if (c->outcome != DSL_OK)
					break;
				y = gev(n->b, c);
				if (c->outcome != DSL_OK)
					break;
				r = compare_values(gop, x, y);
				/* r == 2: unordered (cannot happen: doubles are finite) */
				switch (ck)
				{
					case CMP_EQ:
						v.b = r == 0;
						break;
					case CMP_NE:
						v.b = r != 0;
						break;
					case CMP_LT:
						v.b = r == -1;
						break;
					case CMP_LE:
						v.b = r == -1 || r == 0;
						break;
					case CMP_GT:
						v.b = r == 1;
						break;
					default:
						v.b = r == 1 || r == 0;
						break;
				}
			}
			break;
	}
	record(c, n, v);
	return v;
}

/* ---------------------------------------------------------------------
 * The countDataFiles() pass
 * ---------------------------------------------------------------------
 */

/*
 * A lambda predicate that is a conjunction of simple per-file tests runs as
 * a tight loop without the tree.  Each test is "the file's value at off,
 * shifted and masked, lies in [lo, lo + span]", possibly negated: every
 * comparison of a LONG field with a value fixed for the pass (a constant,
 * a metric, a hoisted value) is such a range, and so is a BOOLEAN field
 * (read as a byte out of the 8-byte word that holds it; the mask drops the
 * neighbouring bytes and the struct padding).
 */
typedef struct FileTerm
{
	uint32_t	off;			/* 8-byte word offset in DslFile */
	uint32_t	shift;
	uint64_t	mask;
	uint64_t	lo;
	uint64_t	span;
	uint64_t	neg;			/* 1: the test is negated */
} FileTerm;

#define MAX_FTERMS 4

/* Set t to the range test "field ck k" (!= is a negated range). */
static void
range_term(FileTerm *t, int ck, int64_t k)
{
	int64_t		lo = INT64_MIN,
				hi = INT64_MAX;
	bool		never = false;

	switch (ck)
	{
		case CMP_EQ:
		case CMP_NE:
			lo = hi = k;
			break;
		case CMP_LT:
			never = k == INT64_MIN;
			hi = never ? hi : k - 1;
			break;
		case CMP_LE:
			hi = k;
			break;
		case CMP_GT:
			never = k == INT64_MAX;
			lo = never ? lo : k + 1;
			break;
		default:
			lo = k;
			break;
	}
	t->lo = (uint64_t) lo;
	t->span = (uint64_t) hi - (uint64_t) lo;
	t->neg ^= (uint64_t) (never || ck == CMP_NE);
}

/* Describe n as a per-file test; false if it is not one. */
static bool
make_term(const DslNode *n, const EvalCtx *c, FileTerm *t, bool negate)
{
	static const int mirrored[CMP__N] = {CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE};
	int			op = n->op;
	int			ck;
	uint32_t	off;
	int64_t		k;

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	return false;
#endif
	t->neg = negate;
	if (op == OP_NOT)
		return make_term(n->a, c, t, !negate);
	if (op == OP_FIELD_B)
	{
		t->off = n->aoff & ~UINT32_C(7);
		t->shift = (n->aoff & 7) * 8;
		t->mask = 0xFF;
		t->lo = 1;
		t->span = 0;
		return true;
	}
	if (op >= OP_CMPK_L && op < OP_CMPK_L + CMP__N && n->abase == BASE_FILE)
	{
		ck = op - OP_CMPK_L;
		off = n->aoff;
		k = n->k.l;
	}
	else if (op >= OP_CMPX_L && op < OP_CMPX_L + CMP__N &&
			 (n->abase == BASE_FILE) != (n->bbase == BASE_FILE))
	{
		ck = op - OP_CMPX_L;
		if (n->abase == BASE_FILE)
		{
			off = n->aoff;
			k = LOAD_L(c, n->bbase, n->boff);
		}
		else
		{
			off = n->boff;
			k = LOAD_L(c, n->abase, n->aoff);
			ck = mirrored[ck];
		}
	}
	else
		return false;
	if (off % 8 != 0)
		return false;
	t->off = off;
	t->shift = 0;
	t->mask = ~UINT64_C(0);
	range_term(t, ck, k);
	return true;
}

/* Flatten an AND tree of per-file tests into terms; false if it is not one. */
static bool
collect_terms(const DslNode *n, const EvalCtx *c, FileTerm *terms, int *nterms)
{
	if (n->op == OP_AND)
		return collect_terms(n->a, c, terms, nterms) &&
			collect_terms(n->b, c, terms, nterms);
	if (*nterms >= MAX_FTERMS)
		return false;
	return make_term(n, c, &terms[(*nterms)++], false);
}

static inline uint64_t
test_term(const FileTerm *t, const char *f)
{
	uint64_t	w;

	memcpy(&w, f + t->off, sizeof(w));
	w = (w >> t->shift) & t->mask;
	return (uint64_t) (w - t->lo <= t->span) ^ t->neg;
}

/*
 * Count the files of a batch for which body holds, with the fast evaluator
 * (a tight loop when body is a conjunction of simple tests).
 */
static int64_t
count_batch(const DslNode *body, const DslFile *files, size_t n, EvalCtx *c)
{
	int64_t		cnt = 0;
	FileTerm	t[MAX_FTERMS];
	int			nt = 0;

	if (collect_terms(body, c, t, &nt))
	{
		const char *f = (const char *) files;
		FileTerm	t0 = t[0],
					t1 = t[nt > 1 ? 1 : 0];

		if (nt == 1)
			for (size_t i = 0; i < n; i++, f += sizeof(DslFile))
				cnt += (int64_t) test_term(&t0, f);
		else if (nt == 2)
			for (size_t i = 0; i < n; i++, f += sizeof(DslFile))
				cnt += (int64_t) (test_term(&t0, f) & test_term(&t1, f));
		else
			for (size_t i = 0; i < n; i++, f += sizeof(DslFile))
			{
				uint64_t	ok = 1;

				for (int k = 0; k < nt; k++)
					ok &= test_term(&t[k], f);
				cnt += (int64_t) ok;
			}
		return cnt;
	}
	for (size_t i = 0; i < n; i++)
	{
		c->base[BASE_FILE] = (const char *) &files[i];
		cnt += ev_b(body, c);
	}
	return cnt;
}

/* Mark the nodes of a lambda body as per-file in the explanation. */
static void
mark_per_file(EvalCtx *c, const DslNode *n)
{
	if (n == NULL)
		return;
	if (n->xid >= 0)
		c->rec[n->xid].state = DSL_NODE_PER_FILE;
	mark_per_file(c, n->a);
	mark_per_file(c, n->b);
}

/*
 * Read the file stream once and compute every lambda of the program.
 * Leaves c->outcome as it found it (DSL_OK); each lambda's failure goes to
 * c->lam_outcome.
 */
static void
run_pass(EvalCtx *c)
{
	const DslProgram *p = c->p;
	const DslFileSource *src = c->in->files;
	bool		generic[DSL_MAX_LAMBDAS];
	bool		was_recording = c->recording;
	int			active = p->nlambdas;

	c->pass_done = true;
	c->recording = false;
	for (int j = 0; j < p->nlambdas; j++)
	{
		const DslLambda *lam = &p->lambdas[j];

		c->counts[j] = 0;
		c->lam_outcome[j] = DSL_OK;
		generic[j] = c->explain;
		for (int h = 0; h < lam->nhoisted && !generic[j]; h++)
		{
			DslValue	v = gev(lam->hoisted[h], c);

			if (c->outcome != DSL_OK)
			{
				generic[j] = true;
				c->outcome = DSL_OK;
			}
			else
				c->slots[lam->hoisted[h]->slot] = v;
		}
	}

	while (active > 0)
	{
		const DslFile *files = NULL;
		size_t		n = 0;
		int			r = src->next(src->arg, &files, &n);

		if (r <= 0)
		{
			if (r < 0)
				for (int j = 0; j < p->nlambdas; j++)
					if (c->lam_outcome[j] == DSL_OK)
						c->lam_outcome[j] = DSL_FILE_SOURCE_ERROR;
			break;
		}
		if (files == NULL)
			n = 0;
		c->files += (int64_t) n;
		for (int j = 0; j < p->nlambdas; j++)
		{
			const DslNode *body = p->lambdas[j].body;

			if (c->lam_outcome[j] != DSL_OK)
				continue;
			if (generic[j])
			{
				for (size_t i = 0; i < n; i++)
				{
					DslValue	v;

					c->base[BASE_FILE] = (const char *) &files[i];
					v = gev(body, c);
					if (c->outcome != DSL_OK)
						break;
					c->counts[j] += v.b;
				}
			}
			else
				c->counts[j] += count_batch(body, files, n, c);
			if (c->outcome != DSL_OK)
			{
				c->lam_outcome[j] = c->outcome;
				c->outcome = DSL_OK;
				active--;
			}
		}
	}
	c->base[BASE_FILE] = NULL;

	/* explanations: lambda bodies are per file; hoisted values are shown */
	c->recording = was_recording;
	if (c->recording)
	{
		for (int j = 0; j < p->nlambdas; j++)
		{
			const DslLambda *lam = &p->lambdas[j];

			mark_per_file(c, lam->body);
			if (c->lam_outcome[j] != DSL_OK)
				continue;
			for (int h = 0; h < lam->nhoisted; h++)
			{
				gev(lam->hoisted[h], c);
				if (c->outcome != DSL_OK)
				{
					/* reached by no file: not part of the story */
					mark_per_file(c, lam->hoisted[h]);
					c->outcome = DSL_OK;
				}
			}
		}
	}
}

/* ---------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------
 */

/* Check what an evaluation needs before running anything. */
static DslOutcome
check_input(const DslProgram *p, const DslInput *in)
{
	uint32_t	present = in->metrics ? in->metrics->present : 0;

	if (p->vars & ~present)
		return DSL_MISSING_METRIC;
	if (p->nlambdas > 0 && (in->files == NULL || in->files->next == NULL))
		return DSL_MISSING_FILES;
	return DSL_OK;
}

/*
 * Start an evaluation context of p on in: everything but the slots, the
 * lambdas' counts and outcomes, which the evaluation writes before it
 * reads them (the pass over the files sets the counts).
 */
static void
eval_start(EvalCtx *c, const DslProgram *p, const DslInput *in)
{
	c->base[BASE_METRICS] = (const char *) in->metrics;
	c->base[BASE_FILE] = NULL;
	c->base[BASE_SLOTS] = (const char *) c->slots;
	c->outcome = DSL_OK;
	c->p = p;
	c->in = in;
	c->pass_done = false;
	c->explain = false;
	c->recording = false;
	c->rec = NULL;
	c->files = 0;
}

/* See dsl.h. */
DslOutcome
dsl_eval(const DslProgram *p, const DslInput *in, bool *result)
{
	EvalCtx		c;
	bool		r;
	DslOutcome	o;

	*result = false;
	if ((o = check_input(p, in)) != DSL_OK)
		return o;
	eval_start(&c, p, in);
	r = ev_b(p->root, &c);
	if (c.outcome != DSL_OK)
		return c.outcome;
	*result = r;
	return DSL_OK;
}

/* See dsl.h. */
DslOutcome
dsl_eval_score(const DslProgram *p, const DslInput *in, double *score)
{
	EvalCtx		c;
	double		r;
	DslOutcome	o;

	*score = 0.0;
	if ((o = check_input(p, in)) != DSL_OK)
		return o;
	eval_start(&c, p, in);
	if (p->root->type == DSL_LONG)
		r = (double) ev_l(p->root, &c);
	else
		r = ev_d(p->root, &c);
	if (c.outcome != DSL_OK)
		return c.outcome;
	*score = r;
	return DSL_OK;
}

/* The explanation index of n, looking through implicit conversions. */
static int32_t
xid_of(const DslNode *n)
{
	while (n && n->gop == OP_I2D)
		n = n->a;
	return n ? n->xid : -1;
}

/* Fill the structural fields of the explanation for n and below. */
static void
explain_init(const DslNode *n, int32_t parent, DslExplainNode *rec)
{
	DslExplainNode *e;

	if (n == NULL)
		return;
	if (n->gop == OP_I2D)
	{
		explain_init(n->a, parent, rec);
		return;
	}
	e = &rec[n->xid];
	memset(e, 0, sizeof(*e));
	e->parent = parent;
	e->left = xid_of(n->a);
	e->right = xid_of(n->b);
	e->offset = n->offset;
	e->length = n->length;
	e->kind = (DslNodeKind) n->kind;
	e->type = (DslType) n->type;
	e->op = n->opname;
	e->state = DSL_NODE_NOT_EVALUATED;
	e->outcome = DSL_OK;
	explain_init(n->a, n->xid, rec);
	explain_init(n->b, n->xid, rec);
}

/*
 * Evaluate p on in, recording every node's value and outcome in nodes:
 * the one explained evaluation of dsl_explain and dsl_explain_score.
 */
static DslOutcome
explain_eval(const DslProgram *p, const DslInput *in, DslExplainNode *nodes, DslValue *v)
{
	EvalCtx		c;
	DslOutcome	o;

	explain_init(p->root, -1, nodes);
	if ((o = check_input(p, in)) != DSL_OK)
		return o;
	eval_start(&c, p, in);
	c.explain = true;
	c.recording = true;
	c.rec = nodes;
	*v = gev(p->root, &c);
	return c.outcome;
}

/* See dsl.h. */
DslOutcome
dsl_explain(const DslProgram *p, const DslInput *in, bool *result,
			DslExplainNode *nodes)
{
	DslValue	v;
	DslOutcome	o;

	*result = false;
	if ((o = explain_eval(p, in, nodes, &v)) != DSL_OK)
		return o;
	*result = v.b;
	return DSL_OK;
}

/* See dsl.h. */
DslOutcome
dsl_explain_score(const DslProgram *p, const DslInput *in, double *score,
				  DslExplainNode *nodes)
{
	DslValue	v;
	DslOutcome	o;

	*score = 0.0;
	if ((o = explain_eval(p, in, nodes, &v)) != DSL_OK)
		return o;
	*score = p->root->type == DSL_LONG ? (double) v.l : v.d;
	return DSL_OK;
}
