/*-------------------------------------------------------------------------
 *
 * condition.h
 *	  Policy conditions and rule scores (the DSL of src/dsl) inside
 *	  PostgreSQL: compiling
 *	  with palloc, the compile error as an ereport, and an evaluation's
 *	  explanation and metrics as JSON.  Used by the SQL functions of the
 *	  DSL, by rule validation and by the policy evaluation, so that all of
 *	  them report and record a condition the same way.
 *
 * The allocator hands the DSL palloc'd memory that returns NULL instead of
 * raising, so the plain-C compiler never longjmps; a compiled program
 * lives in the memory context current at compile time.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_CONDITION_H
#define TMS_BRIDGE_CONDITION_H

#include "postgres.h"

#include "dsl/dsl.h"

/* palloc-based allocation for the DSL (returns NULL when out of memory) */
extern const DslAllocator tms_dsl_allocator;

/* Compile, or return NULL with *err set; raises nothing but out-of-memory. */
extern DslProgram *tms_condition_compile(const char *src, size_t len,
										 DslError *err);

/*
 * Compile or raise the compile error: syntax 42601, datatype 42804,
 * 54001 / 54000 for the limits, with the caret excerpt in DETAIL.
 */
extern DslProgram *tms_condition_compile_or_raise(const char *src, size_t len);

/*
 * The same for a rule's score (dsl_compile_score: LONG or DOUBLE), raising
 * "invalid rule score: ..." with the same SQLSTATEs.
 */
extern DslProgram *tms_score_compile(const char *src, size_t len,
									 DslError *err);
extern DslProgram *tms_score_compile_or_raise(const char *src, size_t len);

/* SQLSTATE of a compile error kind. */
extern int	tms_condition_sqlstate(DslErrorKind kind);

/* 1-based character position of byte offset off of src (database encoding). */
extern int	tms_condition_char_position(const char *src, int len, int off);

/*
 * The explanation nodes of an evaluation as a JSON array, in pre-order:
 * {"id", "parent" (null at the root), "expr", "kind", "type", "op",
 * "state", "value" | "outcome", "from"/"raw" for properties, "files" for
 * counts}.  Non-finite doubles are null.  palloc'd.
 */
extern char *tms_condition_explain_json(const DslProgram *prog,
										const DslExplainNode *nodes, int32 n);

/* The metric values the program reads, as a JSON object.  palloc'd. */
extern char *tms_condition_metrics_json(const DslProgram *prog,
										const DslMetrics *m);

/* The values of the variables vars (DSL_VAR_BIT()s) present in m. */
extern char *tms_metrics_json(uint32 vars, const DslMetrics *m);

#endif							/* TMS_BRIDGE_CONDITION_H */
