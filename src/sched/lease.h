/*-------------------------------------------------------------------------
 *
 * lease.h
 *	  Leases on rows of tms.scheduled_tasks as shared memory knows them:
 *	  which live process holds which task, so that its heartbeat is
 *	  renewed, so that it is told at once when its lease is lost, and so
 *	  that a lease held by a live process is never taken for dead.
 *
 * A process that executes tasks (a pool worker, a backend in CALL
 * tms.run_pending or tms.run_task) attaches to one lease entry and
 * publishes there the task it claimed (kind, instance, the version its
 * claim wrote).  The supervisor of the database renews the heartbeat of
 * every published lease in one statement each heartbeat interval
 * (sched_renew_heartbeats); when the row no longer carries that version
 * the entry is marked lost and the holder's latch set, and the holder
 * learns it from sched_lease_lost() (between steps, and through the
 * interrupt callbacks of its network waits).
 *
 * Dead-lease recovery (sched_maintain) never releases a lease that an
 * entry here publishes: a lease is dead only when no live process of this
 * server holds it and its heartbeat is older than the dead-lease age.  So
 * a slow supervisor, a long transaction or a stalled catalog can delay a
 * heartbeat without ever causing a second execution; only a process that
 * is gone (crash, exit) lets its task run again.  A backend without an
 * entry (tms not preloaded, or all entries busy) is covered by its
 * heartbeat alone and must finish within the dead-lease age.
 *
 * The entries are protected by one LWLock, held only to copy a few
 * fields in or out; latches are set after it is released.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_SCHED_LEASE_H
#define TMS_SCHED_LEASE_H

#include "postgres.h"

#include "datatype/timestamp.h"

struct SchedTask;

/* Shared memory for n entries; call from the shmem request/startup hooks. */
extern Size sched_lease_shmem_size(int n);
extern void sched_lease_shmem_request(void);
extern void sched_lease_shmem_init(int n);

/*
 * Take an entry for this process (once; released at process exit or by
 * sched_lease_detach).  Returns false when tms is not preloaded or every
 * entry is taken.
 */
extern bool sched_lease_attach(void);
extern void sched_lease_detach(void);

/* Publish the lease of a committed claim; clear it when the task is done. */
extern void sched_lease_publish(const struct SchedTask *task);
extern void sched_lease_clear(void);

/* Has the supervisor found this process's published lease gone? */
extern bool sched_lease_lost(void);

/* Raise ERRCODE_LOCK_NOT_AVAILABLE if it has; service interrupts first. */
extern void sched_check_lease(void);

/*
 * Supervisor: renew the heartbeat of every lease published in this
 * database, flag the lost ones and wake their holders.  Needs a
 * transaction with SPI connected.  Returns the number renewed.
 */
extern int	sched_renew_heartbeats(void);

/*
 * The leases published in this database, as arrays for the statements of
 * sched.c (text[] kinds, text[] instances, int8[] versions, palloc'd);
 * false when there is no shared memory.
 */
extern bool sched_live_leases(Datum *kinds, Datum *instances, Datum *versions);

/* Is (kind, instance, version) published by a live process of this server? */
extern bool sched_lease_is_live(const char *kind, const char *instance, int64 version);

#endif							/* TMS_SCHED_LEASE_H */
