/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  tms background workers: launcher, per-database supervisors, pool
 *	  workers, and the shared memory through which they are seen.
 *
 * Process tree (all are PostgreSQL background workers):
 *
 *	 tms launcher          static, registered by _PG_init; connected to no
 *	   |                   database; starts and restarts one supervisor per
 *	   |                   database named in tms.database_name
 *	   +- tms supervisor   one per database; starts and restarts the pool,
 *	        |              renews leases, releases dead ones
 *	        +- tms worker  tms.max_workers per database; claims one task at
 *	                       a time and runs it
 *
 * Every process owns one slot of TmsShared->slots while it runs.  The slot
 * is the source of truth for "is there a supervisor for database X" and for
 * the tms.workers view; it is cleared by an on_shmem_exit callback, so an
 * orderly exit (including SIGTERM) frees it, and a crash resets all of
 * shared memory anyway.  The leases of the tasks a process runs are the
 * scheduler's (src/sched/lease.h), not kept here.
 *
 * The supervisor does only leases, dead-lease recovery and the pool: every
 * piece of work, policy evaluation included, is a task a pool worker
 * claims, so nothing the supervisor does can wait on a catalog or storage.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_WORKER_H
#define TMS_WORKER_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"

/* what a tms process is; shown in tms.workers.role */
typedef enum TmsRole
{
	TMS_ROLE_NONE = 0,
	TMS_ROLE_LAUNCHER,
	TMS_ROLE_SUPERVISOR,
	TMS_ROLE_WORKER
} TmsRole;

/* what it is doing; shown in tms.workers.state */
typedef enum TmsState
{
	TMS_STATE_STARTING = 0,
	TMS_STATE_IDLE,				/* waiting for work */
	TMS_STATE_RUNNING,			/* running a task */
	TMS_STATE_DISABLED,			/* tms.enabled = off */
	TMS_STATE_STANDBY,			/* server in recovery */
	TMS_STATE_NO_EXTENSION		/* database lacks CREATE EXTENSION tms */
} TmsState;

#define TMS_TASK_DESC_LEN 128

/* lease entries for backends in CALL tms.run_pending() / tms.run_task() */
#define TMS_SESSION_LEASES 16

typedef struct TmsSlot
{
	slock_t		mutex;			/* protects every field below */
	TmsRole		role;			/* TMS_ROLE_NONE: slot is free */
	int			pid;
	Oid			dboid;			/* InvalidOid for the launcher */
	int			index;			/* pool worker number, from 0 */
	TmsState	state;
	TimestampTz started_at;
	TimestampTz state_since;
	char		task[TMS_TASK_DESC_LEN];	/* current task, "" if none */
	Latch	   *latch;			/* the owner's latch, to wake it */
} TmsSlot;

typedef struct TmsShared
{
	LWLock	   *lock;			/* serialises slot allocation */
	int			nslots;
	TmsSlot		slots[FLEXIBLE_ARRAY_MEMBER];
} TmsShared;

/* NULL unless tms was loaded through shared_preload_libraries */
extern TmsShared *TmsSharedState;

/* this process's slot, or NULL */
extern TmsSlot *MyTmsSlot;

/* shmem.c */
extern Size tms_slots_shmem_size(void);
extern void tms_slots_shmem_request(void);
extern void tms_slots_shmem_init(void);
extern int	tms_lease_entry_count(void);
extern int	tms_database_count(void);
extern TmsSlot *tms_slot_acquire(TmsRole role, Oid dboid, int index);
extern void tms_slot_release(void);
extern void tms_wake_workers(Oid dboid);
extern bool tms_slot_in_use(TmsRole role, Oid dboid, int index);
extern void tms_slot_set_state(TmsState state, const char *task);
extern const char *tms_role_name(TmsRole role);
extern const char *tms_state_name(TmsState state);

/* launcher.c, supervisor.c, pool.c: background worker entry points */
extern void tms_register_launcher(void);
extern PGDLLEXPORT void tms_launcher_main(Datum main_arg);
extern PGDLLEXPORT void tms_supervisor_main(Datum main_arg);
extern PGDLLEXPORT void tms_worker_main(Datum main_arg);

/* worker_base.c: helpers shared by the three loops */
typedef struct TmsWorkerExtra
{
	Oid			dboid;
	int			index;
} TmsWorkerExtra;

extern void tms_worker_setup_signals(void);
extern void tms_worker_handle_reload(void);
extern int	tms_wait(long timeout_ms, uint32 wait_event_info);
extern bool tms_extension_present(void);
extern bool tms_run_guarded(void (*fn) (void *arg), void *arg);
extern bool tms_start_dynamic_worker(const char *function_name,
									 const char *type, const char *name,
									 const TmsWorkerExtra *extra,
									 BackgroundWorkerHandle **handle);

#endif							/* TMS_WORKER_H */
