/*-------------------------------------------------------------------------
 *
 * dsl_compile.c
 *		The compiler's entry point, dsl_compile(), and the compiled program:
 *		its arena, dsl_free() and the accessors of dsl.h.
 *
 * dsl_compile() copies the source, runs the parser (dsl_parse.c, which
 * pulls tokens from dsl_lex.c and reports through DslError.c), checks that
 * the condition is BOOLEAN (a rule's score, dsl_compile_score(): LONG or
 * DOUBLE), works out what the program needs, and hands
 * the tree to dsl_optimize() (dsl_optimize.c).
 *
 * All memory of a program comes from its arena, allocated in chunks through
 * the caller's allocator and freed only as a whole by dsl_free(); an error
 * frees the program.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl_int.h"

/* ---------------------------------------------------------------------
 * Arena
 * ---------------------------------------------------------------------
 */

#define ARENA_ALIGN 16

/* The default allocator: malloc() and free(). */
static void *
default_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

/* The default allocator's free(). */
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
dsl_arena_alloc(DslProgram *p, size_t size)
{
	DslChunk   *c = p->chunks;
	size_t		hdr = (sizeof(DslChunk) + ARENA_ALIGN - 1) & ~(size_t) (ARENA_ALIGN - 1);
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
dsl_free(DslProgram *p)
{
	DslChunk   *c;

	if (p == NULL)
		return;
	c = p->chunks;
	while (c)
	{
		DslChunk   *next = c->next;

		p->alloc.free(p->alloc.arg, c);
		c = next;
	}
	p->alloc.free(p->alloc.arg, p);
}

/* ---------------------------------------------------------------------
 * Entry point
 * ---------------------------------------------------------------------
 */

/*
 * Compile a condition (BOOLEAN) or a score (LONG or DOUBLE): dsl_compile()
 * and dsl_compile_score().
 */
static DslProgram *
compile(const char *src, size_t len, const DslAllocator *allocator,
		DslError *err, bool score)
{
	const char *what = score ? "rule score" : "policy condition";
	DslError	dummy;
	DslAllocator alloc;
	DslProgram *p;
	DslParser	ps;
	DslNode    *root;
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
		dsl_error_at(&ps, DSL_ERROR_TOO_LONG, 0,
					 "A condition may be at most 65536 bytes long.",
					 "%s is too long (%zu bytes)", what, len);
		return NULL;
	}
	ps.len = (int32_t) len;

	p = alloc.alloc(alloc.arg, sizeof(DslProgram));
	if (p == NULL)
	{
		dsl_error_at(&ps, DSL_ERROR_OUT_OF_MEMORY, 0, NULL, "out of memory");
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	p->alloc = alloc;
	ps.p = p;

	/* a NUL-terminated copy with a spare NUL, so the lexer may peek one past */
	p->source = dsl_arena_alloc(p, len + 2);
	if (p->source == NULL)
	{
		dsl_error_at(&ps, DSL_ERROR_OUT_OF_MEMORY, 0, NULL, "out of memory");
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
		dsl_error_at(&ps, DSL_ERROR_SYNTAX, (int32_t) len,
					 score ? "Write a numeric expression, for example 100 - healthScore." :
					 "Write a BOOLEAN expression, for example dataFiles > 100.",
					 "%s is empty", what);
		dsl_free(p);
		return NULL;
	}

	root = NULL;
	if (dsl_advance(&ps))
		root = dsl_parse_expr(&ps);
	if (root && ps.tok.kind != T_END)
		root = dsl_syntax_error(&ps, &ps.tok,
								"Expected an operator or the end of the condition.");
	if (root && score && root->type != DSL_LONG && root->type != DSL_DOUBLE)
	{
		dsl_error_at(&ps, DSL_ERROR_TYPE, root->offset,
					 "A score is a number, such as 100 - healthScore or estimatedFilesRemoved / 1000.",
					 "rule score must be of type LONG or DOUBLE, not %s",
					 dsl_type_name(root->type));
		err->has_type = true;
		err->type = root->type;
		root = NULL;
	}
	else if (root && !score && root->type != DSL_BOOLEAN)
	{
		dsl_error_at(&ps, DSL_ERROR_TYPE, root->offset,
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
	dsl_optimize(p, root);
	p->root = root;
	p->score = score;
	return p;
}

/* See dsl.h. */
DslProgram *
dsl_compile(const char *src, size_t len, const DslAllocator *allocator,
			DslError *err)
{
	return compile(src, len, allocator, err, false);
}

/* See dsl.h. */
DslProgram *
dsl_compile_score(const char *src, size_t len, const DslAllocator *allocator,
				  DslError *err)
{
	return compile(src, len, allocator, err, true);
}

/* See dsl.h. */
bool
dsl_program_is_score(const DslProgram *p)
{
	return p->score;
}

/* See dsl.h. */
DslNeeds
dsl_program_needs(const DslProgram *p)
{
	return p->needs;
}

/* See dsl.h. */
uint32_t
dsl_program_variables(const DslProgram *p)
{
	return p->vars;
}

/* See dsl.h. */
uint32_t
dsl_program_fields(const DslProgram *p)
{
	return p->fields;
}

/* See dsl.h. */
bool
dsl_program_uses_files(const DslProgram *p)
{
	return p->nlambdas > 0;
}

/* See dsl.h. */
bool
dsl_program_uses_properties(const DslProgram *p)
{
	return p->uses_properties;
}

/* See dsl.h. */
const char *
dsl_program_source(const DslProgram *p)
{
	return p->source;
}

/* See dsl.h. */
int32_t
dsl_explain_count(const DslProgram *p)
{
	return p->nexplain;
}
