/*-------------------------------------------------------------------------
 *
 * io_memory.h
 *		The allocator of the plain-C layers src/io, src/iceberg and
 *		src/engine: every block they allocate, and every result they return,
 *		comes from io_malloc and friends and goes back through io_free.
 *
 * The allocator has the shape of DslAllocator (dsl.h): alloc() returns NULL
 * on failure and never longjmps, free() gives a block back, arg is theirs.
 * Both may run inside a libcurl or jansson callback, so they must never
 * longjmp, ereport or block.  Without an installed allocator the process
 * uses malloc() and free() (unit drivers, fuzz targets, tms_compactor).
 *
 * Each block carries a header of IO_MEMORY_HEADER bytes: its size (so
 * io_realloc works over any alloc/free pair: alloc, copy, free) and the
 * allocator it came from.  io_free and io_realloc use that allocator, not
 * the current one, so a block may be freed or grown wherever it goes; a
 * block grown by io_realloc stays with the allocator it came from.  A
 * block from io_malloc must never reach free(), nor a block from malloc
 * io_free.
 *
 * The libraries: the inflate state of an Avro reader (kept between calls)
 * goes through io_zalloc/io_zfree.  jansson keeps malloc (jsonmem.c counts
 * it against the JSON budget; its documents live within one io call, and
 * text it returns goes back through io_json_free); libcurl's handles,
 * OpenSSL's and the short-lived zlib streams of one call (gzip metadata,
 * Avro writers) keep their own memory too.  The reach rules block
 * (reach.c) is malloc'd: a PostgreSQL setting keeps it and frees it with
 * free().
 *
 * The current allocator: io_set_allocator() installs one for the process
 * (the base; inside PostgreSQL a memory context that lives as long as the
 * backend) and io_use_allocator() switches the target for a while, e.g.
 * to a scope whose memory goes away with the caller's memory context.
 * An object that outlives a call (a catalog client with its token cache,
 * a storage client with its credentials) captures io_current_allocator()
 * when it is created, and everything it allocates later for itself is
 * allocated with io_use_allocator(its allocator) around it (the plain-C
 * code never longjmps, so such a switch is always undone), so memory an
 * object keeps never comes from a shorter-lived scope.
 *
 * src/io/util/io_memory.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_MEMORY_H
#define TMS_IO_MEMORY_H

#include <stddef.h>

typedef struct IoAllocator
{
	void	   *(*alloc) (void *arg, size_t size);
	void		(*free) (void *arg, void *ptr);
	void	   *arg;
} IoAllocator;

/* Bytes before each block: keeps the block aligned for any type. */
#define IO_MEMORY_HEADER 16

/*
 * Install a as the process's base allocator (NULL: malloc/free) and make
 * it the current one.  a must live as long as any block it gave out.
 */
extern void io_set_allocator(const IoAllocator *a);

/* The base allocator (never NULL: the malloc one when none is installed). */
extern const IoAllocator *io_base_allocator(void);

/* The allocator io_malloc uses now (never NULL). */
extern const IoAllocator *io_current_allocator(void);

/*
 * Make a (NULL: the base) the current allocator; returns the one it
 * replaced, to be given back to io_use_allocator when done.
 */
extern const IoAllocator *io_use_allocator(const IoAllocator *a);

/* NULL on failure (and for n or size 0 never: a distinct block). */
extern void *io_malloc(size_t size);
extern void *io_calloc(size_t n, size_t size);	/* NULL when n * size
												 * overflows */

/*
 * realloc(): NULL ptr allocates; on failure NULL and ptr untouched.  The
 * new block comes from ptr's allocator.
 */
extern void *io_realloc(void *ptr, size_t size);

extern char *io_strdup(const char *s);	/* NULL-safe; NULL on oom too */
extern char *io_strndup(const char *s, size_t n);
extern void io_free(void *ptr); /* NULL-safe */

/*
 * zlib's alloc_func and free_func (z_stream.zalloc, .zfree) over io_malloc:
 * a stream kept between calls (an Avro reader's inflate state) is then
 * memory of the reader's allocator like the rest of it.
 */
extern void *io_zalloc(void *opaque, unsigned int items, unsigned int size);
extern void io_zfree(void *opaque, void *ptr);

#endif							/* TMS_IO_MEMORY_H */
