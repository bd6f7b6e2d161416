/*-------------------------------------------------------------------------
 *
 * jsonmem.c
 *		Counting allocators for jansson and per-parse memory budgets (see
 *		jsonmem.h for the rules: install once, before any jansson use).
 *
 * Every block jansson allocates gets a header of JSONMEM_HEADER bytes
 * holding its size and the generation of the budget it was counted
 * against (0: none), so that freeing it gives the bytes back to that
 * budget while it is active, and to nobody after it ended.
 *
 * src/io/jsonmem.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io_int.h"
#include "jsonmem.h"

/* Header size: keeps the block aligned for any type jansson stores. */
#define JSONMEM_HEADER		16

/* What malloc itself costs per block, about (glibc: 8 to 16 bytes). */
#define JSONMEM_OVERHEAD	16

typedef struct BlockHeader
{
	size_t		size;
	unsigned	gen;
} BlockHeader;

static bool installed = false;
static IoJsonBudget *active = NULL;
static unsigned next_gen = 1;

/* The bytes a block of n counts for. */
static size_t
block_cost(size_t n)
{
	return n + JSONMEM_HEADER + JSONMEM_OVERHEAD;
}

static void *
counting_malloc(size_t n)
{
	IoJsonBudget *b = active;
	char	   *p;
	BlockHeader h;

	if (n > SIZE_MAX - JSONMEM_HEADER - JSONMEM_OVERHEAD)
		return NULL;
	if (b != NULL && (block_cost(n) > b->limit || b->used > b->limit - block_cost(n)))
	{
		b->exceeded = true;
		return NULL;
	}
	p = malloc(n + JSONMEM_HEADER);
	if (p == NULL)
		return NULL;
	h.size = n;
	h.gen = b != NULL ? b->gen : 0;
	memcpy(p, &h, sizeof(h));
	if (b != NULL)
	{
		b->used += block_cost(n);
		if (b->used > b->peak)
			b->peak = b->used;
	}
	return p + JSONMEM_HEADER;
}

static void
counting_free(void *ptr)
{
	char	   *p;
	BlockHeader h;
	IoJsonBudget *b;

	if (ptr == NULL)
		return;
	p = (char *) ptr - JSONMEM_HEADER;
	memcpy(&h, p, sizeof(h));
	if (h.gen != 0)
	{
		for (b = active; b != NULL; b = b->prev)
			if (b->gen == h.gen)
			{
				b->used -= block_cost(h.size) <= b->used ? block_cost(h.size) : b->used;
				break;
			}
	}
	free(p);
}

/* See jsonmem.h. */
void
io_json_free(void *ptr)
{
	if (installed)
		counting_free(ptr);
	else
		free(ptr);
}

/* See jsonmem.h. */
void
io_jsonmem_install(void)
{
	if (installed)
		return;
	json_set_alloc_funcs(counting_malloc, counting_free);
	installed = true;
}

/* See io.h. */
void
io_init(void)
{
	io_jsonmem_install();
}

/* See jsonmem.h. */
bool
io_json_budget_begin(IoJsonBudget *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	if (!installed)
		return false;
	b->limit = limit > 0 ? limit : IO_DEFAULT_MAX_JSON_BYTES;
	b->gen = next_gen++;
	if (next_gen == 0)
		next_gen = 1;
	b->prev = active;
	active = b;
	return true;
}

/* See jsonmem.h. */
void
io_json_budget_end(IoJsonBudget *b)
{
	if (active == b)
		active = b->prev;
	b->prev = NULL;
}

/* See io_int.h. */
struct json_t *
io_json_parse(const char *text, size_t len, size_t max_bytes, const char *what,
			  IoError *err)
{
	IoJsonBudget b;
	json_error_t jerr;
	json_t	   *doc;

	if (!io_json_budget_begin(&b, max_bytes))
	{
		io_set_error(err, IO_ERR_INTERNAL, 0,
					 "cannot parse the %s response: io_init() was not called", what);
		return NULL;
	}
	doc = json_loadb(text, len, 0, &jerr);
	io_json_budget_end(&b);
	if (doc != NULL)
		return doc;
	if (b.exceeded)
		io_set_error(err, IO_ERR_TOO_LARGE, 0,
					 "the %s response needs more than max_json_bytes (%zu bytes) of memory to parse",
					 what, b.limit);
	else
		io_set_error(err, IO_ERR_PROTOCOL, 0, "malformed JSON in %s response: %s (line %d)",
					 what, jerr.text, jerr.line);
	return NULL;
}
