/*-------------------------------------------------------------------------
 *
 * delete_pool.c
 *	  The delete pool of each database, in shared memory: permits for bulk
 *	  delete requests in flight, shared fairly by the processes deleting,
 *	  and the request window of every storage target (delete.h says what
 *	  they are for; the deleter that uses them is delete.c).
 *
 * One entry per process that deletes (a holder: pool workers and the
 * backends running tasks) and a table of storage targets (endpoint +
 * bucket, per database) with their IoAimd window and counters, under one
 * LWLock held only to read and write these fields (no I/O, no
 * allocation, no ereport below it).
 *
 * Permits are handed over, never grabbed: a process that wants one is
 * queued (waiting, for a target), and whenever permits may have become
 * free (a request ended, a process asks) assign() gives them to the
 * queued processes whose target has room (fewer requests in flight than
 * its window allows, its pause over), the one holding the fewest first,
 * then the one queued longest, while the database holds fewer than
 * tms.delete_concurrency.  So a process alone gets them all, two
 * processes that keep asking hold half each, and a process waiting on a
 * throttled target never keeps a permit from a process deleting
 * elsewhere.  A permit is counted as held from the moment it is handed
 * over; the receiver's latch is set (after the lock is released), and it
 * takes the permit at its next look, or gives it back.
 *
 * A process's permits are given back when its requests end, by
 * tms_deleter_free() after an error, and by an on_shmem_exit callback
 * when it exits (a FATAL, a SIGTERM); a crash resets shared memory.  The
 * holder entry records the permits it has per target, so that the exit
 * callback can undo them without the process's own state.
 *
 * A target's window goes back to the pool size after a minute without
 * requests: what the storage wanted an hour ago says little about now.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "ops/delete.h"
#include "ops/delete_int.h"

#define POOL_TARGETS		128
#define HOLDER_TARGETS		8
#define IDLE_RESET_MS		(60 * 1000)
#define MAX_WAKE			64

typedef struct HolderTarget
{
	int			target;			/* -1: unused */
	int			n;				/* permits held on it */
} HolderTarget;

typedef struct PoolHolder
{
	int			pid;			/* 0: free */
	Oid			dboid;
	Latch	   *latch;
	char		label[64];
	int			held;			/* permits held, handed over ones included */
	bool		waiting;		/* queued for a permit */
	int			want;			/* ... on this target */
	int64		wait_since_ms;	/* io_now_ms() */
	TimestampTz wait_since;
	bool		granted;		/* a permit handed over, not taken yet */
	int			granted_target;
	uint32		granted_epoch;
	int64		requests;		/* permits taken */
	HolderTarget on[HOLDER_TARGETS];
} PoolHolder;

typedef struct PoolTarget
{
	char		name[TMS_DELETE_TARGET_LEN];	/* "": free */
	Oid			dboid;
	IoAimd		aimd;
	int			in_flight;
	int64		last_used_ms;
	int64		requests;
	int64		succeeded;
	int64		throttled;
	int64		decreases;
	int64		retried_keys;
	TimestampTz last_throttled_at;
} PoolTarget;

typedef struct DeletePool
{
	LWLock	   *lock;			/* NULL: a pool of this process alone */
	int			nholders;
	PoolTarget	targets[POOL_TARGETS];
	PoolHolder	holders[FLEXIBLE_ARRAY_MEMBER];
} DeletePool;

static DeletePool *SharedPool = NULL;
static DeletePool *Pool = NULL; /* SharedPool, or a private one */
static PoolHolder *Me = NULL;

/* Latches to set once the lock is released. */
typedef struct Wake
{
	Latch	   *latches[MAX_WAKE];
	int			n;
} Wake;

/* ----------------------------------------------------------------
 * Shared memory
 * ----------------------------------------------------------------
 */

Size
tms_delete_pool_shmem_size(int n)
{
	return add_size(offsetof(DeletePool, holders), mul_size(n, sizeof(PoolHolder)));
}

void
tms_delete_pool_shmem_request(void)
{
	RequestNamedLWLockTranche("tms delete pool", 1);
}

void
tms_delete_pool_shmem_init(int n)
{
	bool		found;

	SharedPool = ShmemInitStruct("tms delete pool", tms_delete_pool_shmem_size(n), &found);
	if (!found)
	{
		memset(SharedPool, 0, tms_delete_pool_shmem_size(n));
		SharedPool->lock = &(GetNamedLWLockTranche("tms delete pool"))->lock;
		SharedPool->nholders = n;
	}
}

static void
pool_lock(void)
{
	if (Pool->lock)
		LWLockAcquire(Pool->lock, LW_EXCLUSIVE);
}

static void
pool_unlock(Wake *w)
{
	if (Pool->lock)
		LWLockRelease(Pool->lock);
	for (int i = 0; w && i < w->n; i++)
		SetLatch(w->latches[i]);
}

static int
pool_limit(void)
{
	return Max(1, tms_delete_concurrency);
}

/* ----------------------------------------------------------------
 * Holders and targets (under the lock)
 * ----------------------------------------------------------------
 */

static HolderTarget *
holder_on(PoolHolder *h, int target, bool add)
{
	HolderTarget *free_slot = NULL;

	for (int i = 0; i < HOLDER_TARGETS; i++)
	{
		if (h->on[i].target == target)
			return &h->on[i];
		if (h->on[i].target < 0 && free_slot == NULL)
			free_slot = &h->on[i];
	}
	if (add && free_slot)
	{
		free_slot->target = target;
		free_slot->n = 0;
	}
	return add ? free_slot : NULL;
}

/* One permit of h on target less (given back, or its request ended). */
static void
holder_drop(PoolHolder *h, int target)
{
	HolderTarget *o = holder_on(h, target, false);

	if (o != NULL && --o->n <= 0)
		o->target = -1;
	if (h->held > 0)
		h->held--;
	if (Pool->targets[target].in_flight > 0)
		Pool->targets[target].in_flight--;
}

/* Requests target t may have in flight now. */
static int
target_allowed(const PoolTarget *t)
{
	return tms_delete_adaptive ? io_aimd_allowed(&t->aimd, pool_limit()) : pool_limit();
}

/*
 * Hand free permits of database db to the queued holders whose target has
 * room, the one holding the fewest first (see the file header).
 */
static void
assign(Oid db, int64 now, Wake *w)
{
	int			limit = pool_limit();
	int			in_use = 0;

	for (int i = 0; i < Pool->nholders; i++)
		if (Pool->holders[i].pid != 0 && Pool->holders[i].dboid == db)
			in_use += Pool->holders[i].held;
	while (in_use < limit)
	{
		PoolHolder *best = NULL;
		PoolTarget *t;
		HolderTarget *o;

		for (int i = 0; i < Pool->nholders; i++)
		{
			PoolHolder *h = &Pool->holders[i];
			PoolTarget *ht;

			if (h->pid == 0 || h->dboid != db || !h->waiting || h->granted)
				continue;
			ht = &Pool->targets[h->want];
			if (ht->in_flight >= target_allowed(ht) || ht->aimd.next_start_ms > now)
				continue;
			/* room in its list of targets (a free entry has target -1) */
			if (holder_on(h, h->want, false) == NULL && holder_on(h, -1, false) == NULL)
				continue;
			if (best == NULL || h->held < best->held ||
				(h->held == best->held && h->wait_since_ms < best->wait_since_ms))
				best = h;
		}
		if (best == NULL)
			break;
		t = &Pool->targets[best->want];
		o = holder_on(best, best->want, true);
		o->n++;
		best->held++;
		best->granted = true;
		best->granted_target = best->want;
		best->granted_epoch = t->aimd.epoch;
		best->waiting = false;
		t->in_flight++;
		t->last_used_ms = now;
		if (tms_delete_adaptive)
			io_aimd_started(&t->aimd, now);
		in_use++;
		if (best != Me && best->latch != NULL && w->n < MAX_WAKE)
			w->latches[w->n++] = best->latch;
	}
}

/* Give back a permit handed over and not taken. */
static void
give_back(PoolHolder *h)
{
	if (!h->granted)
		return;
	h->granted = false;
	holder_drop(h, h->granted_target);
}

static void
holder_exit(int code, Datum arg)
{
	Wake		w = {{0}, 0};

	if (Me == NULL || Pool != SharedPool)
		return;
	pool_lock();
	for (int i = 0; i < HOLDER_TARGETS; i++)
		if (Me->on[i].target >= 0)
		{
			PoolTarget *t = &Pool->targets[Me->on[i].target];

			t->in_flight = Max(0, t->in_flight - Me->on[i].n);
			Me->on[i].target = -1;
		}
	Me->held = 0;
	Me->granted = false;
	Me->waiting = false;
	assign(Me->dboid, io_now_ms(), &w);
	Me->pid = 0;
	Me->latch = NULL;
	pool_unlock(&w);
	Me = NULL;
}

static void
holder_init(PoolHolder *h)
{
	memset(h, 0, sizeof(*h));
	h->pid = MyProcPid;
	h->dboid = MyDatabaseId;
	h->latch = MyLatch;
	for (int i = 0; i < HOLDER_TARGETS; i++)
		h->on[i].target = -1;
}

/* ----------------------------------------------------------------
 * What the deleter asks (delete_int.h)
 * ----------------------------------------------------------------
 */

void
delete_pool_enter(const char *label)
{
	if (Me == NULL && SharedPool != NULL)
	{
		Pool = SharedPool;
		pool_lock();
		for (int i = 0; i < Pool->nholders; i++)
			if (Pool->holders[i].pid == 0)
			{
				Me = &Pool->holders[i];
				holder_init(Me);
				break;
			}
		pool_unlock(NULL);
		if (Me != NULL)
			on_shmem_exit(holder_exit, (Datum) 0);
	}
	if (Me == NULL)
	{
		/* no shared memory, or every entry taken: a pool of this process */
		Pool = MemoryContextAllocZero(TopMemoryContext, offsetof(DeletePool, holders) +
									  sizeof(PoolHolder));
		Pool->nholders = 1;
		Me = &Pool->holders[0];
		holder_init(Me);
	}
	pool_lock();
	strlcpy(Me->label, label, sizeof(Me->label));
	pool_unlock(NULL);
}

int
delete_pool_target(const char *name)
{
	int64		now = io_now_ms();
	int			found = -1;
	int			lru = -1;

	pool_lock();
	for (int i = 0; i < POOL_TARGETS && found < 0; i++)
	{
		PoolTarget *t = &Pool->targets[i];

		if (t->name[0] != '\0' && t->dboid == Me->dboid && strcmp(t->name, name) == 0)
			found = i;
		else if (t->name[0] == '\0' && (lru < 0 || Pool->targets[lru].name[0] != '\0'))
			lru = i;
		else if (t->name[0] != '\0' && t->in_flight == 0 &&
				 (lru < 0 || (Pool->targets[lru].name[0] != '\0' &&
							  t->last_used_ms < Pool->targets[lru].last_used_ms)))
			lru = i;
	}
	if (found < 0 && lru >= 0)
	{
		/* a target not queued for by anyone may be taken over */
		for (int i = 0; i < Pool->nholders; i++)
			if (Pool->holders[i].pid != 0 && Pool->holders[i].waiting &&
				Pool->holders[i].want == lru)
				lru = -1;
		if (lru >= 0)
		{
			PoolTarget *t = &Pool->targets[lru];

			memset(t, 0, sizeof(*t));
			t->dboid = Me->dboid;
			strlcpy(t->name, name, sizeof(t->name));
			io_aimd_init(&t->aimd, pool_limit());
			t->last_used_ms = now;
			found = lru;
		}
	}
	pool_unlock(NULL);
	if (found < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many storage targets are being deleted from at once"),
				 errdetail("The delete pool tracks %d targets (endpoint and bucket).", POOL_TARGETS)));
	return found;
}

bool
delete_pool_acquire(int target, uint32 *epoch, int64 *retry_ms)
{
	Wake		w = {{0}, 0};
	int64		now = io_now_ms();
	PoolTarget *t = &Pool->targets[target];
	bool		got = false;

	pool_lock();
	if (Me->granted && Me->granted_target != target)
		give_back(Me);
	if (!Me->granted)
	{
		if (!Me->waiting)
		{
			Me->waiting = true;
			Me->wait_since_ms = now;
			Me->wait_since = GetCurrentTimestamp();
		}
		Me->want = target;
		if (t->in_flight == 0 && now - t->last_used_ms > IDLE_RESET_MS)
			io_aimd_init(&t->aimd, pool_limit());
		assign(Me->dboid, now, &w);
	}
	if (Me->granted)
	{
		Me->granted = false;
		Me->requests++;
		t->requests++;
		*epoch = Me->granted_epoch;
		got = true;
	}
	*retry_ms = now + 1000;
	if (!got && t->aimd.next_start_ms > now && t->aimd.next_start_ms < *retry_ms)
		*retry_ms = t->aimd.next_start_ms;
	pool_unlock(&w);
	return got;
}

void
delete_pool_stop_waiting(void)
{
	Wake		w = {{0}, 0};

	if (Me == NULL || (!Me->waiting && !Me->granted))
		return;
	pool_lock();
	Me->waiting = false;
	if (Me->granted)
	{
		give_back(Me);
		assign(Me->dboid, io_now_ms(), &w);
	}
	pool_unlock(&w);
}

void
delete_pool_release(int target, PoolOutcome outcome, uint32 epoch,
					long retry_after_ms, int retried_keys)
{
	Wake		w = {{0}, 0};
	int64		now = io_now_ms();
	PoolTarget *t = &Pool->targets[target];

	pool_lock();
	holder_drop(Me, target);
	t->last_used_ms = now;
	switch (outcome)
	{
		case POOL_SUCCEEDED:
			t->succeeded++;
			if (tms_delete_adaptive)
				io_aimd_succeeded(&t->aimd, pool_limit());
			break;
		case POOL_THROTTLED:
			t->throttled++;
			t->retried_keys += retried_keys;
			t->last_throttled_at = GetCurrentTimestamp();
			if (io_aimd_refused(&t->aimd, epoch, tms_delete_adaptive, retry_after_ms, now))
				t->decreases++;
			break;
		case POOL_FAILED:
		case POOL_ABANDONED:
			break;
	}
	assign(Me->dboid, now, &w);
	pool_unlock(&w);
}

/* ----------------------------------------------------------------
 * The views
 * ----------------------------------------------------------------
 */

/* The shared pool, locked for a view; NULL without shared memory. */
static DeletePool *
view_begin(void)
{
	DeletePool *pool = SharedPool;

	if (pool != NULL && pool->lock)
		LWLockAcquire(pool->lock, LW_SHARED);
	return pool;
}

static void
view_end(DeletePool *pool)
{
	if (pool != NULL && pool->lock)
		LWLockRelease(pool->lock);
}

int
tms_delete_pool_holders(TmsDeleteHolderInfo **out)
{
	DeletePool *pool;
	int			n = 0;

	*out = palloc0(sizeof(TmsDeleteHolderInfo) *
				   Max(1, SharedPool ? SharedPool->nholders : 1));
	pool = view_begin();
	for (int i = 0; pool != NULL && i < pool->nholders; i++)
	{
		PoolHolder *h = &pool->holders[i];
		TmsDeleteHolderInfo *o = &(*out)[n];

		if (h->pid == 0)
			continue;
		o->pid = h->pid;
		o->dboid = h->dboid;
		strlcpy(o->label, h->label, sizeof(o->label));
		o->held = h->held;
		o->waiting = h->waiting;
		o->wait_since = h->waiting ? h->wait_since : 0;
		o->requests = h->requests;
		n++;
	}
	view_end(pool);
	return n;
}

int
tms_delete_pool_targets(TmsDeleteTargetInfo **out)
{
	DeletePool *pool;
	int			n = 0;

	*out = palloc0(sizeof(TmsDeleteTargetInfo) * POOL_TARGETS);
	pool = view_begin();
	for (int i = 0; pool != NULL && i < POOL_TARGETS; i++)
	{
		PoolTarget *t = &pool->targets[i];
		TmsDeleteTargetInfo *o = &(*out)[n];

		if (t->name[0] == '\0')
			continue;
		o->dboid = t->dboid;
		strlcpy(o->name, t->name, sizeof(o->name));
		o->window = tms_delete_adaptive ? t->aimd.window : pool_limit();
		o->allowed = target_allowed(t);
		o->in_flight = t->in_flight;
		o->pause_ms = tms_delete_adaptive ? io_aimd_pause_ms(&t->aimd) : 0;
		o->requests = t->requests;
		o->succeeded = t->succeeded;
		o->throttled = t->throttled;
		o->decreases = t->decreases;
		o->retried_keys = t->retried_keys;
		o->last_throttled_at = t->last_throttled_at;
		n++;
	}
	view_end(pool);
	return n;
}
