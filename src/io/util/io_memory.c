/*-------------------------------------------------------------------------
 *
 * io_memory.c
 *		io_malloc and friends over the current allocator (io_memory.h has
 *		the rules).
 *
 * A block is [header][user bytes]; the header holds the user size and the
 * allocator the block came from.  The current allocator is a process
 * global: the plain-C layers run in one thread.
 *
 * src/io/util/io_memory.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/util/io_memory.h"

typedef struct IoBlockHeader
{
	size_t		size;
	const IoAllocator *from;
} IoBlockHeader;

static void *
malloc_alloc(void *arg, size_t size)
{
	(void) arg;
	return malloc(size);
}

static void
malloc_free(void *arg, void *ptr)
{
	(void) arg;
	free(ptr);
}

static const IoAllocator malloc_allocator = {malloc_alloc, malloc_free, NULL};

static const IoAllocator *base = &malloc_allocator;
static const IoAllocator *current = &malloc_allocator;

void
io_set_allocator(const IoAllocator *a)
{
	base = a != NULL ? a : &malloc_allocator;
	current = base;
}

const IoAllocator *
io_base_allocator(void)
{
	return base;
}

const IoAllocator *
io_current_allocator(void)
{
	return current;
}

const IoAllocator *
io_use_allocator(const IoAllocator *a)
{
	const IoAllocator *prev = current;

	current = a != NULL ? a : base;
	return prev;
}

static IoBlockHeader *
header_of(void *ptr)
{
	return (IoBlockHeader *) ((char *) ptr - IO_MEMORY_HEADER);
}

/* A block of size bytes from a, or NULL. */
static void *
alloc_from(const IoAllocator *a, size_t size)
{
	char	   *p;
	IoBlockHeader h;

	if (size > SIZE_MAX - IO_MEMORY_HEADER)
		return NULL;
	p = a->alloc(a->arg, size + IO_MEMORY_HEADER);
	if (p == NULL)
		return NULL;
	h.size = size;
	h.from = a;
	memcpy(p, &h, sizeof(h));
	return p + IO_MEMORY_HEADER;
}

void *
io_malloc(size_t size)
{
	return alloc_from(current, size);
}

void *
io_calloc(size_t n, size_t size)
{
	void	   *p;

	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	p = io_malloc(n * size);
	if (p != NULL)
		memset(p, 0, n * size);
	return p;
}

void *
io_realloc(void *ptr, size_t size)
{
	IoBlockHeader *h;
	void	   *p;

	if (ptr == NULL)
		return io_malloc(size);
	h = header_of(ptr);
	p = alloc_from(h->from, size);
	if (p == NULL)
		return NULL;
	memcpy(p, ptr, h->size < size ? h->size : size);
	io_free(ptr);
	return p;
}

char *
io_strdup(const char *s)
{
	if (s == NULL)
		return NULL;
	return io_strndup(s, strlen(s));
}

char *
io_strndup(const char *s, size_t n)
{
	char	   *p;

	n = strnlen(s, n);
	p = io_malloc(n + 1);
	if (p == NULL)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void *
io_zalloc(void *opaque, unsigned int items, unsigned int size)
{
	(void) opaque;
	return io_calloc(items, size);
}

void
io_zfree(void *opaque, void *ptr)
{
	(void) opaque;
	io_free(ptr);
}

void
io_free(void *ptr)
{
	IoBlockHeader *h;

	if (ptr == NULL)
		return;
	h = header_of(ptr);
	h->from->free(h->from->arg, h);
}
