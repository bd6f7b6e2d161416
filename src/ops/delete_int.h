/*-------------------------------------------------------------------------
 *
 * delete_int.h
 *	  What the deleter (delete.c) asks of the delete pool (delete_pool.c);
 *	  not an interface for anyone else (that is delete.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_DELETE_INT_H
#define TMS_OPS_DELETE_INT_H

#include "postgres.h"

/* How a request that held a permit ended, for the target's window. */
typedef enum PoolOutcome
{
	POOL_SUCCEEDED,				/* answered, nothing refused to slow down */
	POOL_THROTTLED,				/* refused (wholly or some keys) to slow down */
	POOL_FAILED,				/* failed otherwise: no effect on the window */
	POOL_ABANDONED				/* given back unanswered */
} PoolOutcome;

/*
 * Take this process's entry of the pool (once; kept until exit) and name
 * what it does now.  Without shared memory, or with every entry taken,
 * the process gets a pool of its own (bounded by the setting, but not
 * shared with anyone).
 */
extern void delete_pool_enter(const char *label);

/* The index of target name ("endpoint/bucket") in this database's pool. */
extern int	delete_pool_target(const char *name);

/*
 * Take a permit to start a request on target, or queue for one: true with
 * *epoch (the target window's epoch at the start); false when not now,
 * with *retry_ms the latest time (io_now_ms()) worth trying again by
 * itself (the process's latch is set when a permit is handed to it).
 */
extern bool delete_pool_acquire(int target, uint32 *epoch, int64 *retry_ms);

/* No longer queued for a permit (one handed over meanwhile goes back). */
extern void delete_pool_stop_waiting(void);

/*
 * Give back a permit of target after its request: outcome feeds the
 * window (epoch as acquire gave it, retry_after_ms what the storage asked,
 * retried_keys the keys to send again).
 */
extern void delete_pool_release(int target, PoolOutcome outcome, uint32 epoch,
								long retry_after_ms, int retried_keys);

#endif							/* TMS_OPS_DELETE_INT_H */
