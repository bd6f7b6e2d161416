/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Shared memory of the tms processes: one slot per running process.
 *
 * The slot array is sized at server start for one launcher and, for every
 * database in tms.database_name, one supervisor and tms.max_workers pool
 * workers (both settings are PGC_POSTMASTER for that reason).  A process
 * takes its slot once connected and gives it back in an on_shmem_exit
 * callback.  Slot allocation holds TmsShared->lock exclusively; the fields
 * of a slot are guarded by its spinlock, written only by its owner and read
 * by anyone (the tms.workers view, the launcher and supervisors looking for
 * missing processes).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "bridge/settings.h"
#include "worker/worker.h"

TmsShared  *TmsSharedState = NULL;
TmsSlot    *MyTmsSlot = NULL;

static bool exit_callback_registered = false;

static void tms_slot_release_at_exit(int code, Datum arg);

/*
 * Number of databases named in tms.database_name (at least one, so that a
 * malformed list still leaves room for the launcher's complaint).
 */
int
tms_database_count(void)
{
	char	   *raw;
	List	   *names;
	int			n;

	if (tms_database_name == NULL)
		return 1;
	raw = pstrdup(tms_database_name);
	if (!SplitIdentifierString(raw, ',', &names))
		n = 1;
	else
		n = Max(list_length(names), 1);
	list_free(names);
	pfree(raw);
	return n;
}

static int
tms_slot_count(void)
{
	return 1 + tms_database_count() * (1 + tms_max_workers);
}

/*
 * Lease entries the scheduler needs: one per pool worker, and some for
 * backends running CALL tms.run_pending() or tms.run_task().
 */
int
tms_lease_entry_count(void)
{
	return tms_database_count() * tms_max_workers + TMS_SESSION_LEASES;
}

Size
tms_slots_shmem_size(void)
{
	return add_size(offsetof(TmsShared, slots),
					mul_size(tms_slot_count(), sizeof(TmsSlot)));
}

void
tms_slots_shmem_request(void)
{
	RequestNamedLWLockTranche("tms", 1);
}

/* In the shmem startup hook, with AddinShmemInitLock held. */
void
tms_slots_shmem_init(void)
{
	bool		found;

	TmsSharedState = ShmemInitStruct("tms", tms_slots_shmem_size(), &found);
	if (!found)
	{
		int			n = tms_slot_count();

		memset(TmsSharedState, 0, tms_slots_shmem_size());
		TmsSharedState->lock = &(GetNamedLWLockTranche("tms"))->lock;
		TmsSharedState->nslots = n;
		for (int i = 0; i < n; i++)
			SpinLockInit(&TmsSharedState->slots[i].mutex);
	}
}

/*
 * Take a free slot for this process, unless another live process already
 * holds the same (role, database, index); returns NULL in that case, and
 * the caller should exit quietly: a duplicate was started by a race between
 * a restarted parent and a still-running child.
 *
 * When no slot is free it raises an error, which cannot happen while the
 * slot count follows the settings.
 */
TmsSlot *
tms_slot_acquire(TmsRole role, Oid dboid, int index)
{
	TmsSlot    *free_slot = NULL;
	TimestampTz now = GetCurrentTimestamp();

	Assert(TmsSharedState != NULL && MyTmsSlot == NULL);

	LWLockAcquire(TmsSharedState->lock, LW_EXCLUSIVE);
	for (int i = 0; i < TmsSharedState->nslots; i++)
	{
		TmsSlot    *slot = &TmsSharedState->slots[i];

		if (slot->role == TMS_ROLE_NONE)
		{
			if (free_slot == NULL)
				free_slot = slot;
		}
		else if (slot->role == role && slot->dboid == dboid &&
				 slot->index == index)
		{
			LWLockRelease(TmsSharedState->lock);
			return NULL;
		}
	}
	if (free_slot == NULL)
	{
		LWLockRelease(TmsSharedState->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no free tms worker slot"),
				 errdetail("All %d slots are in use.", TmsSharedState->nslots)));
	}

	SpinLockAcquire(&free_slot->mutex);
	free_slot->role = role;
	free_slot->pid = MyProcPid;
	free_slot->dboid = dboid;
	free_slot->index = index;
	free_slot->state = TMS_STATE_STARTING;
	free_slot->started_at = now;
	free_slot->state_since = now;
	free_slot->task[0] = '\0';
	free_slot->latch = MyLatch;
	SpinLockRelease(&free_slot->mutex);
	LWLockRelease(TmsSharedState->lock);

	MyTmsSlot = free_slot;
	if (!exit_callback_registered)
	{
		on_shmem_exit(tms_slot_release_at_exit, (Datum) 0);
		exit_callback_registered = true;
	}
	return free_slot;
}

/*
 * Give this process's slot back, if it holds one (at exit).
 */
void
tms_slot_release(void)
{
	TmsSlot    *slot = MyTmsSlot;

	if (slot == NULL)
		return;
	LWLockAcquire(TmsSharedState->lock, LW_EXCLUSIVE);
	SpinLockAcquire(&slot->mutex);
	slot->role = TMS_ROLE_NONE;
	slot->pid = 0;
	slot->dboid = InvalidOid;
	slot->task[0] = '\0';
	slot->latch = NULL;
	SpinLockRelease(&slot->mutex);
	LWLockRelease(TmsSharedState->lock);
	MyTmsSlot = NULL;
}

static void
tms_slot_release_at_exit(int code, Datum arg)
{
	tms_slot_release();
}

/*
 * Set the latch of every idle pool worker of a database, so that newly due
 * work is claimed without waiting for tms.naptime.
 */
void
tms_wake_workers(Oid dboid)
{
	if (TmsSharedState == NULL)
		return;
	for (int i = 0; i < TmsSharedState->nslots; i++)
	{
		TmsSlot    *slot = &TmsSharedState->slots[i];
		Latch	   *latch = NULL;

		SpinLockAcquire(&slot->mutex);
		if (slot->role == TMS_ROLE_WORKER && slot->dboid == dboid &&
			slot->state == TMS_STATE_IDLE)
			latch = slot->latch;
		SpinLockRelease(&slot->mutex);
		if (latch)
			SetLatch(latch);
	}
}

/*
 * Is a process of this (role, database, index) running?
 */
bool
tms_slot_in_use(TmsRole role, Oid dboid, int index)
{
	bool		found = false;

	LWLockAcquire(TmsSharedState->lock, LW_SHARED);
	for (int i = 0; i < TmsSharedState->nslots && !found; i++)
	{
		TmsSlot    *slot = &TmsSharedState->slots[i];

		SpinLockAcquire(&slot->mutex);
		found = (slot->role == role && slot->dboid == dboid &&
				 slot->index == index);
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(TmsSharedState->lock);
	return found;
}

/*
 * Publish this process's state and current task (NULL: none).  Cheap
 * enough to call on every loop iteration; the timestamp moves only when the
 * state or the task changes.
 */
void
tms_slot_set_state(TmsState state, const char *task)
{
	TmsSlot    *slot = MyTmsSlot;
	const char *t = task ? task : "";
	TimestampTz now;
	bool		changed;

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	changed = slot->state != state || strncmp(slot->task, t, TMS_TASK_DESC_LEN - 1) != 0;
	SpinLockRelease(&slot->mutex);
	if (!changed)
		return;
	now = GetCurrentTimestamp();
	SpinLockAcquire(&slot->mutex);
	slot->state = state;
	strlcpy(slot->task, t, TMS_TASK_DESC_LEN);
	slot->state_since = now;
	SpinLockRelease(&slot->mutex);
}

const char *
tms_role_name(TmsRole role)
{
	switch (role)
	{
		case TMS_ROLE_LAUNCHER:
			return "launcher";
		case TMS_ROLE_SUPERVISOR:
			return "supervisor";
		case TMS_ROLE_WORKER:
			return "worker";
		case TMS_ROLE_NONE:
			break;
	}
	return "none";
}

const char *
tms_state_name(TmsState state)
{
	switch (state)
	{
		case TMS_STATE_STARTING:
			return "starting";
		case TMS_STATE_IDLE:
			return "idle";
		case TMS_STATE_RUNNING:
			return "running";
		case TMS_STATE_DISABLED:
			return "disabled";
		case TMS_STATE_STANDBY:
			return "standby";
		case TMS_STATE_NO_EXTENSION:
			return "waiting for extension";
	}
	return "unknown";
}
