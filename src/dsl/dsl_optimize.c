/*-------------------------------------------------------------------------
 *
 * dsl_optimize.c
 *		Optimisation and numbering of a parsed policy condition.
 *
 * After parsing, dsl_optimize() hoists the file-independent parts of each
 * lambda into slots, fuses comparisons of two leaves (or of a leaf or an
 * expression and a constant) into single nodes, and numbers the nodes for
 * explanations (see dsl_int.h for the two operator codes of a node).  It
 * rewrites only the fast operator (op) and the slot and explanation
 * indexes: the generic operator (gop) stays what the parser built.
 *
 *-------------------------------------------------------------------------
 */
#include "dsl/dsl_int.h"

/*
 * Hoist the maximal file-independent, non-constant sub-expressions of a
 * lambda body into slots (variables are read directly and stay).
 */
static void
hoist(DslProgram *p, DslLambda *lam, DslNode *n)
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
leaf(const DslNode *n, uint8_t *base, uint32_t *off)
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
			*off = (uint32_t) (n->slot * sizeof(DslValue));
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
fuse(DslNode *n)
{
	int			gop;
	bool		is_l;
	int			ck;
	DslNode    *a,
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
		DslNode    *t = a;

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
number(DslProgram *p, DslNode *n)
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

/* See dsl_int.h. */
void
dsl_optimize(DslProgram *p, DslNode *root)
{
	for (int i = 0; i < p->nlambdas; i++)
		hoist(p, &p->lambdas[i], p->lambdas[i].body);
	fuse(root);
	number(p, root);
}
