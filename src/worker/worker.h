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
 *	        |              renews leases, runs the evaluation cycle
 *	        +- tms worker  tms.max_workers per database; claims one task at
 *	                       a time and runs it
 *
 * Every process owns one slot of TmsShared->slots while it runs.  The slot
 * is the source of truth for "is there a supervisor for database X" and for
 * the tms.workers view; it is cleared by an on_shmem_exit callback, so an
 * orderly exit (including SIGTERM) frees it, and a crash resets all of
 * shared memory anyway.
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
	TMS_ROLE_WORKER,
	TMS_ROLE_SESSION			/* a backend inside CALL tms.run_pending() */
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
#define TMS_KIND_LEN 64
#define TMS_INSTANCE_LEN 1024

/* slots for backends running CALL tms.run_pending(), per server */
#define TMS_SESSION_SLOTS 16

/*
 * A lease on one row of tms.scheduled_tasks, published by the process that
 * holds it so that its supervisor can renew the heartbeat.  The supervisor
 * writes heartbeat (the value it last wrote, for its compare-and-swap) and
 * lost; the holder writes the rest.
 */
typedef struct TmsLease
{
	bool		active;
	bool		lost;			/* the heartbeat CAS found the lease gone */
	int64		version;
	TimestampTz heartbeat;
	char		kind[TMS_KIND_LEN];
	char		instance[TMS_INSTANCE_LEN];
} TmsLease;

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
	TmsLease	lease;
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
extern void tms_shmem_register(void);
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

/* common.c: helpers shared by the three loops */
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
