/*-------------------------------------------------------------------------
 *
 * subxact.c
 *	  A function in a subtransaction, its error as a value (subxact.h,
 *	  which states the rule for the errors raised again).
 *
 * src/bridge/subxact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "bridge/subxact.h"

/* See subxact.h. */
bool
tms_error_must_propagate(int sqlerrcode)
{
	return sqlerrcode == ERRCODE_QUERY_CANCELED ||
		sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
		sqlerrcode == ERRCODE_OUT_OF_MEMORY;
}

/* See subxact.h. */
bool
tms_try_subxact(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	*error = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/* the executor must stop: raise it again, out of the subtransaction */
		if (tms_error_must_propagate(e->sqlerrcode))
			ReThrowError(e);
		*error = e;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}
