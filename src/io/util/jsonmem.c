/*-------------------------------------------------------------------------
 *
 * jsonmem.c
 *		Counting allocators for jansson and per-parse memory budgets (see
 *		jsonmem.h for the rules: install once, before any jansson use).
 *
 * Every block jansson allocates gets a header of JSONMEM_HEADER bytes
 * holding its size and the generation of the budget it was counted
 * against (0: none), so that freeing it gives the bytes back to that
 * budget while it is active, and to nobody after it ended.  Allocations
 * are counted, never refused for the budget; a budgeted parse stops by
 * starving jansson of input (io_json_load).
 *
 * src/io/util/jsonmem.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io/io_int.h"
#include "io/util/jsonmem.h"

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

/*
 * jansson's malloc: never refuses because of a budget (see jsonmem.h),
 * only counts; fails only when malloc itself does.
 */
static void *
counting_malloc(size_t n)
{
	IoJsonBudget *b = active;
	char	   *p;
	BlockHeader h;

	if (n > SIZE_MAX - JSONMEM_HEADER - JSONMEM_OVERHEAD)
		return NULL;
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
		if (b->used > b->limit)
			b->exceeded = true;
	}
	return p + JSONMEM_HEADER;
}

/* jansson's free: gives the bytes back to the budget still counting them. */
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

/* What json_load_callback reads from: the text, fed in chunks. */
typedef struct Feed
{
	const char *text;
	size_t		len;
	size_t		pos;
	const IoJsonBudget *budget;
} Feed;

/*
 * json_load_callback's source: the next chunk (jansson asks for about
 * 1 KB), or (size_t) -1, a read error to jansson, once over the budget.
 */
static size_t
feed_cb(void *buffer, size_t buflen, void *data)
{
	Feed	   *f = data;
	size_t		n = f->len - f->pos;

	if (f->budget->exceeded)
		return (size_t) -1;
	if (n > buflen)
		n = buflen;
	memcpy(buffer, f->text + f->pos, n);
	f->pos += n;
	return n;
}

/* See jsonmem.h. */
struct json_t *
io_json_load(const char *text, size_t len, size_t flags, size_t max_bytes,
			 IoJsonLoadInfo *info)
{
	IoJsonBudget b;
	json_error_t jerr;
	json_t	   *doc;
	Feed		f;

	memset(info, 0, sizeof(*info));
	if (!io_json_budget_begin(&b, max_bytes))
	{
		info->not_initialised = true;
		return NULL;
	}
	f.text = text;
	f.len = len;
	f.pos = 0;
	f.budget = &b;
	doc = json_load_callback(feed_cb, &f, flags, &jerr);
	io_json_budget_end(&b);
	info->limit = b.limit;
	info->peak = b.peak;
	if (doc != NULL && b.exceeded)
	{
		/* the last chunk went over and the document ended in it */
		json_decref(doc);
		doc = NULL;
	}
	if (doc != NULL)
		return doc;
	info->exceeded = b.exceeded;
	info->line = jerr.line;
	info->column = jerr.column;
	snprintf(info->text, sizeof(info->text), "%s", jerr.text);
	return NULL;
}

/* See io_int.h. */
struct json_t *
io_json_parse(const char *text, size_t len, size_t max_bytes, const char *what,
			  TmsError *err)
{
	IoJsonLoadInfo info;
	json_t	   *doc = io_json_load(text, len, 0, max_bytes, &info);

	if (doc != NULL)
		return doc;
	if (info.not_initialised)
		tms_error_set(err, IO_ERR_INTERNAL,
					  "cannot parse the %s response: io_init() was not called", what);
	else if (info.exceeded)
		tms_error_set(err, IO_ERR_TOO_LARGE,
					  "the %s response needs more than max_json_bytes (%zu bytes) of memory to parse",
					  what, info.limit);
	else
		tms_error_set(err, IO_ERR_PROTOCOL, "malformed JSON in %s response: %s (line %d)",
					  what, info.text, info.line);
	return NULL;
}
