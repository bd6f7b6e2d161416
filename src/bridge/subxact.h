/*-------------------------------------------------------------------------
 *
 * subxact.h
 *	  Run a function in a subtransaction and get its error as a value:
 *	  the one implementation behind sched_try_step (a task's step) and the
 *	  commit-event trigger (sql_api/events_sql.c).
 *
 * Rule (which errors are values, which are raised again): an error fn
 * raises rolls its work back and is returned, except the three an
 * executor must not swallow, raised again once the subtransaction is
 * gone (tms_error_must_propagate): a query cancel or statement timeout
 * (ERRCODE_QUERY_CANCELED: the user or the scheduler asked the call to
 * stop), a termination that arrives as an ERROR (ERRCODE_ADMIN_SHUTDOWN;
 * a FATAL never comes back here) and running out of memory
 * (ERRCODE_OUT_OF_MEMORY: what comes next would likely fail too, and the
 * server must see it).
 *
 * src/bridge/subxact.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_SUBXACT_H
#define TMS_BRIDGE_SUBXACT_H

#include "postgres.h"

/* True for the SQLSTATEs tms_try_subxact raises again (see above). */
extern bool tms_error_must_propagate(int sqlerrcode);

/*
 * fn(arg) in a subtransaction of the current transaction, in the caller's
 * memory context.  True when fn returned (its work kept); false when it
 * raised an error, its work rolled back and *error the error (copied in
 * the caller's memory context).  *error is NULL on success.  The memory
 * context and resource owner are the caller's again on return.
 */
extern bool tms_try_subxact(void (*fn) (void *arg), void *arg, ErrorData **error);

#endif							/* TMS_BRIDGE_SUBXACT_H */
