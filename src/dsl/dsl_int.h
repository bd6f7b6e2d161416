/*-------------------------------------------------------------------------
 *
 * dsl_int.h
 *		Internals shared by the files of the DSL layer (not a public API:
 *		everything outside src/dsl/ uses dsl.h).
 *
 * A compiled program is a typed expression tree living in one arena.  Each
 * node carries two operator codes:
 *
 *	- op: what the fast evaluator (dsl_eval.c) executes.  It is fully
 *	  specialised by type (ADD_LL, CMP_LT_DD, ...), comparisons of two
 *	  leaves are fused into one node that loads both operands directly
 *	  (CMPK_*, CMPX_*), a comparison with a constant keeps the constant in
 *	  the node (CMPE_*), and lambda sub-expressions that do not depend on the file
 *	  are "hoisted": their op becomes SLOT_*, a read of a value computed once
 *	  per countDataFiles() pass.
 *	- gop: the plain typed operator, before fusing and hoisting.  The
 *	  generic evaluator runs it; it serves explanations, computes hoisted
 *	  values, and evaluates a lambda whose hoisted values failed (so that a
 *	  division by zero that no file reaches stays unreached).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_DSL_INT_H
#define TMS_DSL_INT_H

#include "dsl/dsl.h"

/* Maximum number of hoisted lambda sub-expressions (more are not hoisted). */
#define DSL_MAX_SLOTS	64

/* Bases a fused comparison loads its operands from. */
#define BASE_METRICS	0
#define BASE_FILE		1
#define BASE_SLOTS		2

/* Comparison kinds, in the order of the CMP_* opcode blocks. */
enum
{
	CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP__N
};

typedef enum dsl_op
{
	/* leaves */
	OP_CONST_B, OP_CONST_L, OP_CONST_D, OP_CONST_S,
	OP_VAR_L, OP_VAR_D,
	OP_FIELD_L, OP_FIELD_B,
	OP_SLOT_B, OP_SLOT_L, OP_SLOT_D, OP_SLOT_S,
	/* conversions and unary */
	OP_I2D,
	OP_NEG_L, OP_NEG_D,
	OP_NOT,
	/* arithmetic */
	OP_ADD_LL, OP_SUB_LL, OP_MUL_LL,
	OP_ADD_DD, OP_SUB_DD, OP_MUL_DD, OP_DIV_DD,
	OP_UNIT_L, OP_UNIT_D,		/* KB() ... days(): times k.l / k.d */
	/* logic */
	OP_AND, OP_OR,
	/* comparisons: base + CMP_xx */
	OP_CMP_LL = 40,
	OP_CMP_DD = OP_CMP_LL + CMP__N,
	OP_CMP_SS = OP_CMP_DD + CMP__N,
	OP_CMP_BB = OP_CMP_SS + CMP__N,
	/* fused: leaf (base, offset) against a constant in k */
	OP_CMPK_L = OP_CMP_BB + CMP__N,
	OP_CMPK_D = OP_CMPK_L + CMP__N,
	/* fused: leaf against leaf */
	OP_CMPX_L = OP_CMPK_D + CMP__N,
	OP_CMPX_D = OP_CMPX_L + CMP__N,
	/* fused: any expression (child a) against a constant in k */
	OP_CMPE_L = OP_CMPX_D + CMP__N,
	OP_CMPE_D = OP_CMPE_L + CMP__N,
	/* functions */
	OP_PROP_B = OP_CMPE_D + CMP__N, OP_PROP_L, OP_PROP_D, OP_PROP_S,
	OP_COUNT
} dsl_op;

typedef struct dsl_node dsl_node;

struct dsl_node
{
	uint8_t		op;				/* fast operator */
	uint8_t		gop;			/* generic operator */
	uint8_t		type;			/* dsl_type of the result */
	uint8_t		kind;			/* dsl_node_kind, for explanations */
	uint8_t		abase;			/* fused comparisons: operand bases */
	uint8_t		bbase;
	bool		uses_param;		/* reads the lambda parameter */
	bool		constant;		/* a literal or folded constant */
	uint32_t	aoff;			/* fused: operand offsets; VAR/FIELD: offset */
	uint32_t	boff;
	int32_t		slot;			/* hoisted: slot index, else -1 */
	int32_t		lambda;			/* OP_COUNT: lambda index */
	int32_t		xid;			/* explanation index, -1 for implicit */
	int32_t		offset;			/* source span */
	int32_t		length;
	int32_t		depth;			/* tree depth below and including this */
	const char *opname;			/* operator text for explanations */
	dsl_value	k;				/* constant / unit factor / property name */
	dsl_node   *a;				/* children: operands, property default */
	dsl_node   *b;
};

typedef struct dsl_lambda
{
	dsl_node   *body;			/* BOOLEAN predicate */
	dsl_node   *hoisted[DSL_MAX_SLOTS];	/* nodes whose slot to compute */
	int			nhoisted;
} dsl_lambda;

typedef struct dsl_chunk
{
	struct dsl_chunk *next;
	size_t		size;
	size_t		used;
	/* data follows, max_align_t aligned */
} dsl_chunk;

struct dsl_program
{
	dsl_allocator alloc;
	dsl_chunk  *chunks;
	dsl_node   *root;
	char	   *source;			/* NUL-terminated copy */
	size_t		source_len;
	dsl_needs	needs;
	uint32_t	vars;
	uint32_t	fields;
	bool		uses_properties;
	int			nlambdas;
	int			nslots;
	int32_t		nexplain;
	dsl_lambda	lambdas[DSL_MAX_LAMBDAS];
};

/* dsl_compile.c */
extern void *dsl_arena_alloc(dsl_program *p, size_t size);

/* dsl_eval.c: convert a property's text; false when it does not convert */
extern bool dsl_parse_long(const char *s, int64_t *out);
extern bool dsl_parse_double(const char *s, double *out);
extern bool dsl_parse_bool(const char *s, bool *out);

/* dsl_names.c */
extern uint32_t dsl_var_offset(dsl_var var);
extern int	dsl_field_lookup(const char *name, size_t len);
extern uint32_t dsl_field_offset(dsl_field field);
extern dsl_type dsl_field_type(dsl_field field);
extern const char *dsl_suggest(const char *name, size_t len,
							   const char *const *candidates, int ncandidates);

#endif							/* TMS_DSL_INT_H */
