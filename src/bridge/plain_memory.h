/*-------------------------------------------------------------------------
 *
 * plain_memory.h
 *	  The memory of the plain-C layers (src/io, src/iceberg, src/engine)
 *	  inside PostgreSQL: memory contexts behind their allocator
 *	  (io/util/io_memory.h), and scopes whose memory an error frees.
 *
 * tms_io_memory_init() (in _PG_init) installs the base allocator: the
 * memory context "tms io", a child of TopMemoryContext, so what io and
 * iceberg hold shows in pg_backend_memory_contexts.  Its callbacks never
 * ereport or longjmp (MemoryContextAllocExtended with MCXT_ALLOC_NO_OOM):
 * they run inside libcurl and jansson callbacks; a failed allocation is
 * an io "out of memory" error value.
 *
 * A scope (tms_io_scope_begin .. tms_io_scope_end) sends every io_malloc
 * made between them to a new context, "tms io scope", a child of the
 * caller's CurrentMemoryContext.  An ERROR (a cancel, a timeout) that
 * resets the caller's context frees what the io and iceberg results of
 * the scope held, with no PG_TRY/PG_FINALLY; the context's reset callback
 * makes the allocator point at a live target again (the innermost scope
 * still alive, else "tms io").  tms_io_scope_end() frees everything left
 * in the scope.
 *
 * Rules for a scope:
 *	- Nothing allocated in it may outlive it: copy results into palloc'd
 *	  memory before tms_io_scope_end, never keep an io or iceberg object
 *	  in a static or in a longer-lived context.
 *	- An io object that outlives calls (a cached catalog connection:
 *	  IoCatalog, with its OAuth2 token and table cache) is created with
 *	  the base allocator (tms_catalog_connect does so) and allocates its
 *	  own state later with the allocator it captured when created (rest.c),
 *	  never from the scope of the call that refreshes it.
 *	- The caller's context must be reset or deleted after an error (a
 *	  transaction's or a worker pass's context), or the scope's memory
 *	  stays until it is.
 *
 * src/bridge/plain_memory.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_PLAIN_MEMORY_H
#define TMS_BRIDGE_PLAIN_MEMORY_H

#include "postgres.h"

/* Name of the base context, as pg_backend_memory_contexts shows it. */
#define TMS_IO_CONTEXT_NAME "tms io"
#define TMS_IO_SCOPE_CONTEXT_NAME "tms io scope"

typedef struct TmsIoScope TmsIoScope;

/* Create "tms io" and install it as the base allocator; idempotent. */
extern void tms_io_memory_init(void);

/* Send io allocations to a new child of CurrentMemoryContext. */
extern TmsIoScope *tms_io_scope_begin(void);

/* Free the scope's memory; the allocator points where it did before. */
extern void tms_io_scope_end(TmsIoScope *scope);

#endif							/* TMS_BRIDGE_PLAIN_MEMORY_H */
