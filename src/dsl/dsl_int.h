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

typedef enum DslOp
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
} DslOp;

typedef struct DslNode DslNode;

struct DslNode
{
	uint8_t		op;				/* fast operator */
	uint8_t		gop;			/* generic operator */
	uint8_t		type;			/* DslType of the result */
	uint8_t		kind;			/* DslNodeKind, for explanations */
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
	DslValue	k;				/* constant / unit factor / property name */
	DslNode    *a;				/* children: operands, property default */
	DslNode    *b;
};

typedef struct DslLambda
{
	DslNode    *body;			/* BOOLEAN predicate */
	DslNode    *hoisted[DSL_MAX_SLOTS]; /* nodes whose slot to compute */
	int			nhoisted;
} DslLambda;

typedef struct DslChunk
{
	struct DslChunk *next;
	size_t		size;
	size_t		used;
	/* data follows, max_align_t aligned */
} DslChunk;

struct DslProgram
{
	DslAllocator alloc;
	DslChunk   *chunks;
	DslNode    *root;
	char	   *source;			/* NUL-terminated copy */
	size_t		source_len;
	DslNeeds	needs;
	uint32_t	vars;
	uint32_t	fields;
	bool		uses_properties;
	bool		score;			/* numeric: dsl_compile_score() */
	int			nlambdas;
	int			nslots;
	int32_t		nexplain;
	DslLambda	lambdas[DSL_MAX_LAMBDAS];
};

/* ---- the compiler ---- */

/* Token kinds of the lexer (dsl_lex.c). */
typedef enum DslTokKind
{
	T_END, T_LONG, T_DOUBLE, T_STRING, T_IDENT,
	T_AND, T_OR, T_TRUE, T_FALSE,
	T_LPAREN, T_RPAREN, T_COMMA, T_DOT, T_ARROW,
	T_NOT, T_PLUS, T_MINUS, T_STAR, T_SLASH,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE
} DslTokKind;

typedef struct DslToken
{
	DslTokKind	kind;
	int32_t		offset;
	int32_t		length;
	int64_t		l;
	double		d;
	const char *s;				/* T_STRING: decoded, NUL-terminated */
} DslToken;

/*
 * The state of one compilation, shared by the lexer, the parser and the
 * error reporting; dsl_compile() sets it up.
 */
typedef struct DslParser
{
	DslProgram *p;
	const char *src;			/* the program's NUL-terminated copy */
	int32_t		len;
	int32_t		pos;			/* lexer position */
	DslToken	tok;			/* current token */
	DslToken	ahead;			/* lookahead, valid if has_ahead */
	bool		has_ahead;
	DslError   *err;
	bool		failed;
	int			nesting;
	int			lambda;			/* index of the lambda being parsed, or -1 */
	const char *param;			/* its parameter name */
	int32_t		param_len;
} DslParser;

/* Printable text of a token for messages, shortened to 40 bytes (uses ps). */
#define TOKFMT "%.*s"
#define TOKARG(t) ((t)->length > 40 ? 40 : (int) (t)->length), (ps->src + (t)->offset)

/*
 * dsl_compile.c: allocate size bytes, zeroed, from the program's arena;
 * NULL when the allocator fails.  Freed only as a whole by dsl_free().
 */
extern void *dsl_arena_alloc(DslProgram *p, size_t size);

/*
 * DslError.c: record an error at byte offset off of the source (only the
 * first error of a compilation counts) and return NULL, so that callers
 * can "return dsl_error_at(...)".  hint may be NULL.
 */
extern void *dsl_error_at(DslParser *ps, DslErrorKind kind, int32_t off,
						  const char *hint, const char *fmt,...)
			__attribute__((format(printf, 5, 6)));

/* DslError.c: DSL_ERROR_OUT_OF_MEMORY at the current token; NULL. */
extern void *dsl_out_of_memory(DslParser *ps);

/* DslError.c: "syntax error at or near" token t, with hint; NULL. */
extern void *dsl_syntax_error(DslParser *ps, const DslToken *t,
							  const char *hint);

/*
 * dsl_lex.c: move to the next token (ps->tok).  False, with the error
 * recorded, on a bad token.
 */
extern bool dsl_advance(DslParser *ps);

/* dsl_lex.c: the token after the current one (lexed once); NULL on error. */
extern const DslToken *dsl_peek(DslParser *ps);

/* dsl_lex.c: whether s[0 .. len) is word (lowercase), in any ASCII case. */
extern bool dsl_word_is(const char *s, int32_t len, const char *word);

/*
 * dsl_parse.c: parse and type-check an expression starting at the current
 * token; NULL with the error recorded.  The caller checks what follows.
 */
extern DslNode *dsl_parse_expr(DslParser *ps);

/*
 * dsl_optimize.c: hoist, fuse and number the parsed tree of p (root and
 * p->lambdas).  Cannot fail.
 */
extern void dsl_optimize(DslProgram *p, DslNode *root);

/* dsl_eval.c: convert a property's text; false when it does not convert */
extern bool dsl_parse_long(const char *s, int64_t *out);
extern bool dsl_parse_double(const char *s, double *out);
extern bool dsl_parse_bool(const char *s, bool *out);

/* dsl_names.c */
extern uint32_t dsl_var_offset(DslVar var);
extern int	dsl_field_lookup(const char *name, size_t len);
extern uint32_t dsl_field_offset(DslField field);
extern DslType dsl_field_type(DslField field);
extern const char *dsl_suggest(const char *name, size_t len,
							   const char *const *candidates, int ncandidates);

#endif							/* TMS_DSL_INT_H */
