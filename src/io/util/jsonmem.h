/*-------------------------------------------------------------------------
 *
 * jsonmem.h
 *		Bounded memory for jansson: counting allocators and a budgeted
 *		parse, for the io layer's catalog client and for src/iceberg's
 *		metadata.json and Avro schema parsing.
 *
 * jansson's allocators are process-global (json_set_alloc_funcs), so they
 * are installed once by io_init() (io.h), which the server calls first
 * thing in _PG_init and every unit driver and fuzz target calls before
 * anything else: no jansson allocation may happen before it (a block
 * from the plain allocator handed to the counting free would corrupt the
 * heap).  After that, every jansson allocation in the process carries a
 * small header, and the bytes allocated while a budget is active are
 * counted (an estimate of the heap they take, headers and the
 * allocator's own overhead included).
 *
 * The budget never makes an allocation fail: jansson 2.14 does not
 * survive failed allocations in its lexer (it ignores a failed buffer
 * growth and reads past the buffer; the fuzz target found it).  Instead
 * io_json_load feeds the text to jansson in chunks of about 1 KB and
 * stops feeding once the budget is exceeded, which jansson handles as a
 * read error; the overshoot is what one chunk can make jansson allocate
 * (one chunk of small values, or the doubling of one long string).
 *
 * Memory that jansson returns to its caller (json_dumps) comes from the
 * counting allocator too: free it with io_json_free, never free().
 *
 * This header names no jansson type, so that io.h users (PostgreSQL-facing
 * files, where jansson's json_object clashes) need not include jansson.
 *
 * The one pitfall of jansson in tms: the postgres executable exports the
 * SQL function json_object(), an unversioned symbol, and a call to
 * jansson's json_object() from tms.so binds at run time to the
 * executable's function first (calls inside libjansson, as json_loads
 * makes, bind to jansson's own).  So tms code never calls json_object():
 * an empty object is json_pack("{}"), and the Makefile refuses a tms.so
 * that references json_object at all.
 *
 * Rules: plain C; single-threaded use (the active budget is one per
 * process, as a PostgreSQL backend is); budgets end in the reverse order
 * of their beginning, and only the innermost one counts.
 *
 * src/io/util/jsonmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_JSONMEM_H
#define TMS_IO_JSONMEM_H

#include <stdbool.h>
#include <stddef.h>

/* The default budget of one parse (IoHttpOptions.max_json_bytes, etc.). */
#define IO_DEFAULT_MAX_JSON_BYTES ((size_t) 256 * 1024 * 1024)

typedef struct IoJsonBudget
{
	size_t		limit;			/* bytes */
	size_t		used;			/* live bytes allocated under this budget */
	size_t		peak;			/* the most used was at any time */
	bool		exceeded;		/* used went past limit at some point */
	unsigned	gen;			/* tags the blocks allocated under it */
	struct IoJsonBudget *prev;	/* the budget active before this one */
} IoJsonBudget;

/*
 * Install the counting allocators (idempotent); io_init() calls this.
 * Must run before the first jansson allocation of the process.
 */
extern void io_jsonmem_install(void);

/*
 * Start counting jansson allocations against limit bytes (0: the
 * default).  Returns false, with nothing started, when the counting
 * allocators are not installed (io_init() was not called): the caller
 * must then refuse to parse.
 */
extern bool io_json_budget_begin(IoJsonBudget *b, size_t limit);

/* Stop counting; b->exceeded and b->peak stay readable. */
extern void io_json_budget_end(IoJsonBudget *b);

/* What io_json_load says besides its result. */
typedef struct IoJsonLoadInfo
{
	bool		not_initialised;	/* io_init() was not called: nothing done */
	bool		exceeded;		/* stopped: the budget was exceeded */
	size_t		limit;			/* the budget that applied */
	size_t		peak;			/* the most the parse held, as counted */
	int			line;			/* jansson's error position and text */
	int			column;
	char		text[160];
} IoJsonLoadInfo;

struct json_t;

/*
 * json_loadb(text, len, flags) under a budget of max_bytes (0: the
 * default): the document, or NULL with *info saying why (not initialised,
 * over the budget, or jansson's parse error).
 */
extern struct json_t *io_json_load(const char *text, size_t len, size_t flags,
								   size_t max_bytes, IoJsonLoadInfo *info);

/*
 * Free memory jansson handed out (json_dumps' result): once io_init() ran
 * it carries the counting header and must not go to free().
 */
extern void io_json_free(void *ptr);

#endif							/* TMS_IO_JSONMEM_H */
