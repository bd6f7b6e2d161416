/*-------------------------------------------------------------------------
 *
 * dsl.h
 *		The policy condition language: compiler, evaluator, explanations.
 *
 * A policy rule's condition is a small typed expression over the metrics of
 * one Iceberg table, for example
 *
 *		dataFiles > 100 AND avgDataFileSize < 128MB
 *
 * (doc/dsl.md is the language's reference).  dsl_compile() turns the text into a DslProgram, or
 * into a DslError that carries the position of the offending token, a
 * caret excerpt and a "did you mean" hint.  The program says what it needs
 * (metric level, variables, whether it reads the per-file stream), so the
 * caller loads only that, and then evaluates it as often as it likes:
 *
 *	- dsl_eval(): the fast path.  It never allocates, and runs a typed tree
 *	  whose operators were specialised at compile time.
 *	- dsl_explain(): the same result plus the value of every sub-expression,
 *	  for the evaluation log; dsl_explain_text() renders it as text such as
 *	  "dataFiles = 80 (> 100 is false)".
 *
 * This is a plain-C layer: no PostgreSQL headers, errors are values, nothing
 * aborts or longjmps.  A program is thread-compatible: any number of threads
 * may evaluate the same program at once (evaluation state lives on the
 * caller's stack).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_DSL_H
#define TMS_DSL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits.  All of them are compile errors, never crashes. */
#define DSL_MAX_SOURCE_LEN	65536	/* bytes of condition text */
#define DSL_MAX_NESTING		100 /* parentheses, calls, unary operators */
#define DSL_MAX_DEPTH		1000	/* depth of the expression tree */
#define DSL_MAX_LAMBDAS		16	/* countDataFiles() calls per condition */

/* Value types.  Every expression's type is known at compile time. */
typedef enum DslType
{
	DSL_BOOLEAN,
	DSL_LONG,					/* int64_t */
	DSL_DOUBLE,
	DSL_STRING
} DslType;

/*
 * Metric levels, cheapest first: what the caller must load from the table
 * to evaluate a program.  Each level includes the ones before it.
 */
typedef enum DslNeeds
{
	DSL_NEEDS_METADATA,			/* metadata.json (and table properties) */
	DSL_NEEDS_MANIFEST_LIST,	/* the current snapshot's manifest list */
	DSL_NEEDS_MANIFESTS,		/* every manifest of the current snapshot */
	DSL_NEEDS_DELETES			/* delete files matched to data files */
} DslNeeds;

/* The variables of the language, in the order of the spec's table. */
typedef enum DslVar
{
	DSL_VAR_DATA_FILES,
	DSL_VAR_DATA_FILES_SIZE,
	DSL_VAR_DATA_RECORDS,
	DSL_VAR_EQUALITY_DELETE_FILES,
	DSL_VAR_EQUALITY_DELETE_FILES_SIZE,
	DSL_VAR_EQUALITY_DELETE_RECORDS,
	DSL_VAR_POSITION_DELETE_FILES,
	DSL_VAR_POSITION_DELETE_FILES_SIZE,
	DSL_VAR_POSITION_DELETE_RECORDS,
	DSL_VAR_DATA_FILES_WITH_DELETES,
	DSL_VAR_DATA_FILES_WITH_POSITION_DELETES,
	DSL_VAR_DATA_FILES_WITH_EQUALITY_DELETES,
	DSL_VAR_AVG_DATA_FILE_SIZE,
	DSL_VAR_SNAPSHOTS,
	DSL_VAR_OLDEST_SNAPSHOT_AGE,
	DSL_VAR_MANIFESTS,
	DSL_VAR_TIME_SINCE_LAST_UPDATE,
	/* derived from the ones above by dsl_metrics_derive() (dsl_health.c) */
	DSL_VAR_HEALTH_SCORE,
	DSL_VAR_ESTIMATED_REWRITE_BYTES,
	DSL_VAR_ESTIMATED_FILES_REMOVED,
	DSL_VAR_ESTIMATED_BYTES_RECLAIMED,
	DSL_VAR_COUNT
} DslVar;

/* The variables read from the table; the ones after are derived. */
#define DSL_VAR_FIRST_DERIVED DSL_VAR_HEALTH_SCORE
#define DSL_VAR_DERIVED_BITS \
	(DSL_VAR_BIT(DSL_VAR_HEALTH_SCORE) | \
	 DSL_VAR_BIT(DSL_VAR_ESTIMATED_REWRITE_BYTES) | \
	 DSL_VAR_BIT(DSL_VAR_ESTIMATED_FILES_REMOVED) | \
	 DSL_VAR_BIT(DSL_VAR_ESTIMATED_BYTES_RECLAIMED))

#define DSL_VAR_BIT(v)	(UINT32_C(1) << (v))

/* Fields of the countDataFiles() lambda parameter. */
typedef enum DslField
{
	DSL_FIELD_SIZE,
	DSL_FIELD_RECORDS,
	DSL_FIELD_HAS_DELETES,
	DSL_FIELD_HAS_POSITION_DELETES,
	DSL_FIELD_HAS_EQUALITY_DELETES,
	DSL_FIELD_COUNT
} DslField;

#define DSL_FIELD_BIT(f)	(UINT32_C(1) << (f))

/*
 * The metrics of one table.  Set the fields the program reads (see
 * dsl_program_variables()) and their bits in "present"; dsl_eval() refuses
 * to run (DSL_MISSING_METRIC) rather than read an unset metric as 0.
 * avg_data_file_size and health_score are the DOUBLEs; every other variable
 * is a LONG.
 */
typedef struct DslMetrics
{
	uint32_t	present;		/* DSL_VAR_BIT() of every field set */
	int64_t		data_files;
	int64_t		data_files_size;
	int64_t		data_records;
	int64_t		equality_delete_files;
	int64_t		equality_delete_files_size;
	int64_t		equality_delete_records;
	int64_t		position_delete_files;
	int64_t		position_delete_files_size;
	int64_t		position_delete_records;
	int64_t		data_files_with_deletes;
	int64_t		data_files_with_position_deletes;
	int64_t		data_files_with_equality_deletes;
	double		avg_data_file_size;
	int64_t		snapshots;
	int64_t		oldest_snapshot_age;
	int64_t		manifests;
	int64_t		time_since_last_update;
	double		health_score;	/* derived: dsl_metrics_derive() */
	int64_t		estimated_rewrite_bytes;
	int64_t		estimated_files_removed;
	int64_t		estimated_bytes_reclaimed;
} DslMetrics;

/*
 * Table properties, looked up by property(name, default).  get() returns the
 * property's value as a NUL-terminated string, or NULL when the table has no
 * such property; the string must stay valid until the evaluation returns.
 */
typedef struct DslProperties
{
	const char *(*get) (void *arg, const char *name);
	void	   *arg;
} DslProperties;

/* One data file, as the countDataFiles() lambda sees it. */
typedef struct DslFile
{
	int64_t		size;			/* file_size_in_bytes */
	int64_t		records;		/* record_count */
	bool		has_deletes;	/* some delete file applies to it */
	bool		has_position_deletes;
	bool		has_equality_deletes;
} DslFile;

/*
 * The per-file stream.  next() hands out the next batch of files: it returns
 * 1 with *files / *nfiles set (the batch must stay valid until the next call),
 * 0 at the end of the stream, or -1 when the caller failed to produce it
 * (the evaluation then ends with DSL_FILE_SOURCE_ERROR; the caller keeps its
 * own error message).  A batch may be empty.  The stream is read at most
 * once per evaluation, and only if a countDataFiles() call is reached: all
 * countDataFiles() calls of a condition are computed in that one pass.
 */
typedef struct DslFileSource
{
	int			(*next) (void *arg, const DslFile **files, size_t *nfiles);
	void	   *arg;
} DslFileSource;

/* Everything an evaluation reads.  properties and files may be NULL. */
typedef struct DslInput
{
	const DslMetrics *metrics;
	const DslProperties *properties;	/* NULL: the table has none */
	const DslFileSource *files; /* NULL: no stream available */
} DslInput;

/*
 * How an evaluation ended.  Anything but DSL_OK makes the condition false.
 * Division by zero and overflow are the language's run-time outcomes (the
 * spec makes them "false, not an error"); the others are caller mistakes
 * that dsl_eval() detects before evaluating anything.
 */
typedef enum DslOutcome
{
	DSL_OK,
	DSL_DIVISION_BY_ZERO,		/* x / 0 */
	DSL_OVERFLOW,				/* LONG overflow, or a DOUBLE not finite */
	DSL_MISSING_METRIC,			/* a variable the program reads is unset */
	DSL_MISSING_FILES,			/* the program needs the file stream */
	DSL_FILE_SOURCE_ERROR		/* the file stream's next() failed */
} DslOutcome;

/* Compile error kinds, so a caller can choose its error code. */
typedef enum DslErrorKind
{
	DSL_ERROR_NONE,
	DSL_ERROR_SYNTAX,			/* lexical or grammar error, unknown name */
	DSL_ERROR_TYPE,				/* type mismatch, arity, non-BOOLEAN */
	DSL_ERROR_TOO_COMPLEX,		/* nesting or tree depth, too many lambdas */
	DSL_ERROR_TOO_LONG,			/* more than DSL_MAX_SOURCE_LEN bytes */
	DSL_ERROR_OUT_OF_MEMORY
} DslErrorKind;

/*
 * A compile error.  offset is 0-based in bytes; line, column and position
 * are 1-based and count characters (UTF-8 code points), position over the
 * whole text like PostgreSQL's error cursor.  message is lowercase without a
 * trailing period (PostgreSQL style); hint is a full sentence or "".
 * excerpt is the source line (shortened around the error if long), a
 * newline and a caret under the offending character.  When the only problem
 * is a non-BOOLEAN condition, has_type is set and type is its type.
 */
typedef struct DslError
{
	DslErrorKind kind;
	int32_t		offset;
	int32_t		line;
	int32_t		column;
	int32_t		position;
	bool		has_type;
	DslType		type;
	char		message[256];
	char		hint[256];
	char		excerpt[512];
} DslError;

/*
 * Optional allocator for everything a program owns.  alloc() returns NULL on
 * failure (the compiler then reports DSL_ERROR_OUT_OF_MEMORY); it must not
 * longjmp.  Without one, malloc() and free() are used.
 */
typedef struct DslAllocator
{
	void	   *(*alloc) (void *arg, size_t size);
	void		(*free) (void *arg, void *ptr);
	void	   *arg;
} DslAllocator;

typedef struct DslProgram DslProgram;

/*
 * Compile len bytes of src (need not be NUL-terminated).  Returns the
 * program, or NULL with *err filled in; nothing is left allocated on error.
 * err may be NULL.  dsl_compile() compiles BOOLEAN conditions only.
 */
extern DslProgram *dsl_compile(const char *src, size_t len,
							   const DslAllocator *allocator,
							   DslError *err);

/*
 * The same for a rule's score: a numeric (LONG or DOUBLE) expression; any
 * other type is a DSL_ERROR_TYPE error with has_type set.  Such a program
 * is evaluated with dsl_eval_score() / dsl_explain_score(), never with
 * dsl_eval().
 */
extern DslProgram *dsl_compile_score(const char *src, size_t len,
									 const DslAllocator *allocator,
									 DslError *err);

/* Whether the program is a score (dsl_compile_score). */
extern bool dsl_program_is_score(const DslProgram *program);

/* Free a program and everything it owns.  NULL is allowed. */
extern void dsl_free(DslProgram *program);

/* What the program needs, so the caller loads only that. */
extern DslNeeds dsl_program_needs(const DslProgram *program);
extern uint32_t dsl_program_variables(const DslProgram *program);	/* DSL_VAR_BIT()s */
extern uint32_t dsl_program_fields(const DslProgram *program);	/* DSL_FIELD_BIT()s */
extern bool dsl_program_uses_files(const DslProgram *program);
extern bool dsl_program_uses_properties(const DslProgram *program);

/* The compiled text, NUL-terminated; explanation spans index into it. */
extern const char *dsl_program_source(const DslProgram *program);

/*
 * Evaluate.  Returns the outcome; *result is the condition's value, false
 * unless the outcome is DSL_OK.  Never allocates.  The stream, if reached,
 * is read once from its current position.
 */
extern DslOutcome dsl_eval(const DslProgram *program, const DslInput *input,
						   bool *result);

/*
 * Evaluate a score program.  Returns the outcome; *score is its value (a
 * LONG converted to double), 0 unless the outcome is DSL_OK.
 */
extern DslOutcome dsl_eval_score(const DslProgram *program,
								 const DslInput *input, double *score);

/* ---- explanations ---- */

typedef union DslValue
{
	bool		b;
	int64_t		l;
	double		d;
	const char *s;				/* points into the program or the properties */
} DslValue;

/* What an explained node is. */
typedef enum DslNodeKind
{
	DSL_KIND_LITERAL,			/* a literal or a folded constant */
	DSL_KIND_VARIABLE,
	DSL_KIND_FIELD,				/* f.size, inside a lambda */
	DSL_KIND_UNARY,				/* ! or - */
	DSL_KIND_ARITHMETIC,		/* + - * / */
	DSL_KIND_COMPARISON,		/* == != > >= < <= */
	DSL_KIND_LOGICAL,			/* AND, OR */
	DSL_KIND_FUNCTION,			/* KB MB GB hours days */
	DSL_KIND_PROPERTY,
	DSL_KIND_COUNT				/* countDataFiles() */
} DslNodeKind;

/* What an explanation knows about a node. */
typedef enum DslNodeState
{
	DSL_NODE_NOT_EVALUATED,		/* skipped by AND / OR short-circuit */
	DSL_NODE_EVALUATED,			/* value is valid */
	DSL_NODE_FAILED,			/* its evaluation ended with outcome */
	DSL_NODE_PER_FILE			/* inside a lambda: one value per file */
} DslNodeState;

/*
 * One node of an explanation; dsl_explain() fills an array of
 * dsl_explain_count() of them, in pre-order (index 0 is the whole condition).
 * offset/length locate the node's text in dsl_program_source(); op is the
 * operator or function name ("" for leaves); left/right are child indexes
 * or -1.  For a property, property_found says whether the value came from
 * the table (true) or the default (false) and raw is the property's text
 * (NULL if missing).  For countDataFiles, files is the number of files read.
 */
typedef struct DslExplainNode
{
	int32_t		parent;
	int32_t		left;
	int32_t		right;
	int32_t		offset;
	int32_t		length;
	DslNodeKind kind;
	DslType		type;
	const char *op;
	DslNodeState state;
	DslOutcome	outcome;		/* DSL_NODE_FAILED: why */
	DslValue	value;			/* DSL_NODE_EVALUATED: the value */
	bool		property_found;
	const char *raw;
	int64_t		files;
} DslExplainNode;

extern int32_t dsl_explain_count(const DslProgram *program);

/*
 * Evaluate like dsl_eval() (same result and outcome) and record every
 * node in nodes[0 .. dsl_explain_count() - 1].  Slower: use it for logging.
 */
extern DslOutcome dsl_explain(const DslProgram *program, const DslInput *input,
							  bool *result, DslExplainNode *nodes);

/* dsl_explain() of a score program (dsl_eval_score's result). */
extern DslOutcome dsl_explain_score(const DslProgram *program,
									const DslInput *input, double *score,
									DslExplainNode *nodes);

/*
 * Render an explanation as text, one line per comparison or boolean leaf,
 * then a "result:" line, e.g.
 *
 *		dataFiles = 80 (> 100 is false)
 *		avgDataFileSize < 128MB: not evaluated
 *		result: false
 *
 * snprintf() conventions: writes at most buflen bytes including the NUL,
 * returns the length the full text needs.
 */
extern size_t dsl_explain_text(const DslProgram *program,
							   const DslExplainNode *nodes,
							   bool result, DslOutcome outcome,
							   char *buf, size_t buflen);

/*
 * The same for a score: the lines of its comparisons and variables (the
 * values it read), then "score: <value>" (or "score: 0 (<outcome>)").
 */
extern size_t dsl_explain_score_text(const DslProgram *program,
									 const DslExplainNode *nodes,
									 double score, DslOutcome outcome,
									 char *buf, size_t buflen);

/* ---- names ---- */

extern const char *dsl_type_name(DslType type); /* "BOOLEAN", ... */
extern const char *dsl_needs_name(DslNeeds needs);	/* "metadata", ... */
extern const char *dsl_outcome_name(DslOutcome outcome);	/* "ok", ... */
extern const char *dsl_var_name(DslVar var);	/* "dataFiles", ... */
extern DslType dsl_var_type(DslVar var);
extern DslNeeds dsl_var_needs(DslVar var);
extern int	dsl_var_lookup(const char *name, size_t len);	/* DslVar or -1 */
extern const char *dsl_field_name(DslField field);

/*
 * Set a metric by variable: the LONG variables take value converted from
 * int64_t, avgDataFileSize takes dvalue.  Also sets the present bit.
 */
extern void dsl_metrics_set(DslMetrics *metrics, DslVar var,
							int64_t value, double dvalue);

/*
 * Read a metric by variable.  Returns false, with *value zeroed, when var is
 * not a variable or its bit in metrics->present is unset (the metric is
 * absent).  Otherwise *value holds the metric in the member of the
 * variable's type, dsl_var_type(var): value->d for avgDataFileSize (the
 * only DSL_DOUBLE), value->l for every other variable (DSL_LONG).
 */
extern bool dsl_metrics_get(const DslMetrics *metrics, DslVar var,
							DslValue *value);

/* ---- derived variables (dsl_health.c) ---- */

/*
 * The operation a rule runs, for the estimates of the derived variables
 * (each operation estimates what it would rewrite, remove and reclaim).
 */
typedef enum DslOperation
{
	DSL_OP_NONE,				/* unknown: the estimates are 0 */
	DSL_OP_COMPACTION,
	DSL_OP_POSITION_DELETE_REWRITE,
	DSL_OP_MANIFEST_REWRITE,
	DSL_OP_SNAPSHOT_EXPIRY,
	DSL_OP_ORPHAN_CLEANUP
} DslOperation;

/* "compaction", ... -> DslOperation; DSL_OP_NONE for anything else. */
extern DslOperation dsl_operation_lookup(const char *name);

/*
 * What the derived variables read beyond DslMetrics: the live data files
 * under the target file size (count and bytes), the target size itself,
 * and the totals of the snapshot summaries' removals ("deleted-data-files"
 * + "removed-delete-files", "removed-files-size") over the snapshots that
 * are not the oldest (files that only older snapshots still reference).
 */
typedef struct DslTableFacts
{
	int64_t		small_files;
	int64_t		small_files_size;
	int64_t		target_file_size;	/* > 0 */
	int64_t		removed_files;
	int64_t		removed_bytes;
	/* set by dsl_metrics_derive(): the terms of healthScore, 0 .. 1 */
	double		small_file_ratio;
	double		position_delete_ratio;
	double		equality_delete_ratio;
} DslTableFacts;

/* Weights of the health score (doc/dsl.md states the formula). */
#define DSL_HEALTH_SMALL_FILES_WEIGHT	50.0
#define DSL_HEALTH_POSITION_DELETES_WEIGHT 25.0
#define DSL_HEALTH_EQUALITY_DELETES_WEIGHT 25.0

/*
 * Set the four derived variables of m (and their present bits) for a rule
 * of operation op.  They need the manifests level: returns false, setting
 * nothing, unless every manifest-level variable is present in m.  The
 * health score's terms are left in facts.
 */
extern bool dsl_metrics_derive(DslMetrics *m, DslOperation op,
							   DslTableFacts *facts);

#endif							/* TMS_DSL_H */
