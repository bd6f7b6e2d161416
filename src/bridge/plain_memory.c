/*-------------------------------------------------------------------------
 *
 * plain_memory.c
 *	  Memory contexts behind the allocator of the plain-C layers, and
 *	  scopes (plain_memory.h has the rules).
 *
 * The live scopes form a list in the order they began; the current io
 * allocator is the last live one's, or the base.  A scope leaves the list
 * when its context goes (tms_io_scope_end, or the reset of its parent
 * after an error), in any order, so the allocator never points at freed
 * memory.  A scope also leaves the list when the (sub)transaction it
 * began in aborts: an error caught as a value (tms_try_subxact) may leave
 * the caller's context, and the scope's, alive, and io memory allocated
 * after that must not go to a scope nobody ends; the scope's memory is
 * freed (and wiped) with that context.
 *
 * A scope's blocks are linked (ScopeBlock before each), so that when its
 * context goes they are wiped first: what an error leaves unfreed (a
 * loaded table's vended credentials, a token) is overwritten, as the io
 * layer's own free functions would have done.
 *
 * src/bridge/plain_memory.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"

#include "bridge/plain_memory.h"
#include "io/util/io_memory.h"

typedef struct ScopeBlock
{
	struct ScopeBlock *prev;
	struct ScopeBlock *next;
	size_t		size;			/* the bytes after this header */
} ScopeBlock;

struct TmsIoScope
{
	MemoryContext cxt;
	IoAllocator alloc;
	MemoryContextCallback cb;
	ScopeBlock *blocks;			/* live blocks, newest first */
	int			nest_level;		/* of the transaction it began in */
	bool		listed;			/* in the live list */
	TmsIoScope *prev;			/* the live list, in the order begun */
	TmsIoScope *next;
};

static MemoryContext io_cxt = NULL;
static IoAllocator base_alloc;
static TmsIoScope *last_scope = NULL;

static void memory_xact_callback(XactEvent event, void *arg);
static void memory_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									SubTransactionId parentSubid, void *arg);

/*
 * The allocator's callbacks: NULL instead of an error, never a longjmp
 * (a size past MaxAllocHugeSize would make MemoryContextAllocExtended
 * raise one, so it is refused here).
 */
static void *
cxt_alloc(void *arg, size_t size)
{
	if (size > MaxAllocHugeSize)
		return NULL;
	return MemoryContextAllocExtended((MemoryContext) arg, size,
									  MCXT_ALLOC_NO_OOM | MCXT_ALLOC_HUGE);
}

static void
cxt_free(void *arg, void *ptr)
{
	(void) arg;
	pfree(ptr);
}

/* A scope's callbacks: cxt_alloc and cxt_free with the block linked. */
static void *
scope_alloc(void *arg, size_t size)
{
	TmsIoScope *s = arg;
	ScopeBlock *b;

	if (size > MaxAllocHugeSize - sizeof(ScopeBlock))
		return NULL;
	b = cxt_alloc(s->cxt, sizeof(ScopeBlock) + size);
	if (b == NULL)
		return NULL;
	b->size = size;
	b->prev = NULL;
	b->next = s->blocks;
	if (s->blocks != NULL)
		s->blocks->prev = b;
	s->blocks = b;
	return b + 1;
}

static void
scope_free(void *arg, void *ptr)
{
	TmsIoScope *s = arg;
	ScopeBlock *b = (ScopeBlock *) ptr - 1;

	if (b->prev != NULL)
		b->prev->next = b->next;
	else
		s->blocks = b->next;
	if (b->next != NULL)
		b->next->prev = b->prev;
	pfree(b);
}

void
tms_io_memory_init(void)
{
	if (io_cxt != NULL)
		return;
	io_cxt = AllocSetContextCreate(TopMemoryContext, TMS_IO_CONTEXT_NAME,
								   ALLOCSET_DEFAULT_SIZES);
	base_alloc.alloc = cxt_alloc;
	base_alloc.free = cxt_free;
	base_alloc.arg = io_cxt;
	io_set_allocator(&base_alloc);
	RegisterXactCallback(memory_xact_callback, NULL);
	RegisterSubXactCallback(memory_subxact_callback, NULL);
}

/* Point the io allocator at the last live scope, or at the base. */
static void
retarget(void)
{
	io_use_allocator(last_scope != NULL ? &last_scope->alloc : NULL);
}

/* Take s out of the live list. */
static void
unlist(TmsIoScope *s)
{
	if (!s->listed)
		return;
	if (s->next != NULL)
		s->next->prev = s->prev;
	else
		last_scope = s->prev;
	if (s->prev != NULL)
		s->prev->next = s->next;
	s->prev = s->next = NULL;
	s->listed = false;
}

/*
 * The scope's context goes (runs on every reset path, before its memory
 * is freed): wipe what is left, leave the list.
 */
static void
scope_gone(void *arg)
{
	TmsIoScope *s = arg;

	for (ScopeBlock *b = s->blocks; b != NULL; b = b->next)
		explicit_bzero(b + 1, b->size);
	s->blocks = NULL;
	unlist(s);
	retarget();
}

/* An abort: the scopes begun at level or deeper leave the list. */
static void
abandon_scopes(int level)
{
	while (last_scope != NULL && last_scope->nest_level >= level)
		unlist(last_scope);
	retarget();
}

static void
memory_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		abandon_scopes(0);
}

static void
memory_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		abandon_scopes(GetCurrentTransactionNestLevel());
}

TmsIoScope *
tms_io_scope_begin(void)
{
	MemoryContext cxt;
	TmsIoScope *s;

	cxt = AllocSetContextCreate(CurrentMemoryContext, TMS_IO_SCOPE_CONTEXT_NAME,
								ALLOCSET_DEFAULT_SIZES);
	s = MemoryContextAllocZero(cxt, sizeof(TmsIoScope));
	s->cxt = cxt;
	s->alloc.alloc = scope_alloc;
	s->alloc.free = scope_free;
	s->alloc.arg = s;
	s->cb.func = scope_gone;
	s->cb.arg = s;
	MemoryContextRegisterResetCallback(cxt, &s->cb);
	s->nest_level = GetCurrentTransactionNestLevel();
	s->listed = true;
	s->prev = last_scope;
	if (last_scope != NULL)
		last_scope->next = s;
	last_scope = s;
	retarget();
	return s;
}

void
tms_io_scope_end(TmsIoScope *scope)
{
	MemoryContextDelete(scope->cxt);	/* scope_gone() retargets */
}
