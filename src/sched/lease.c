/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Leases in shared memory: publishing, heartbeat renewal, lost-lease
 *	  notification, and the live set that dead-lease recovery respects
 *	  (lease.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "sched/lease.h"
#include "sched/sched.h"

typedef struct LeaseEntry
{
	int			pid;			/* 0: free */
	Oid			dboid;
	Latch	   *latch;
	bool		active;			/* a lease is published */
	pg_atomic_uint32 lost;		/* read by the holder without the lock */
	int64		version;
	TimestampTz heartbeat;		/* as last written */
	char		kind[SCHED_KIND_LEN];
	char		instance[SCHED_INSTANCE_LEN];
} LeaseEntry;

typedef struct LeaseShared
{
	LWLock	   *lock;
	int			n;
	LeaseEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} LeaseShared;

static LeaseShared *Leases = NULL;
static LeaseEntry *MyLease = NULL;
static bool exit_registered = false;

Size
sched_lease_shmem_size(int n)
{
	return add_size(offsetof(LeaseShared, entries), mul_size(n, sizeof(LeaseEntry)));
}

void
sched_lease_shmem_request(void)
{
	RequestNamedLWLockTranche("tms leases", 1);
}

void
sched_lease_shmem_init(int n)
{
	bool		found;

	Leases = ShmemInitStruct("tms leases", sched_lease_shmem_size(n), &found);
	if (!found)
	{
		memset(Leases, 0, sched_lease_shmem_size(n));
		Leases->lock = &(GetNamedLWLockTranche("tms leases"))->lock;
		Leases->n = n;
		for (int i = 0; i < n; i++)
			pg_atomic_init_u32(&Leases->entries[i].lost, 0);
	}
}

static void
lease_detach_at_exit(int code, Datum arg)
{
	sched_lease_detach();
}

bool
sched_lease_attach(void)
{
	if (Leases == NULL)
		return false;
	if (MyLease != NULL)
		return true;
	LWLockAcquire(Leases->lock, LW_EXCLUSIVE);
	for (int i = 0; i < Leases->n; i++)
	{
		LeaseEntry *e = &Leases->entries[i];

		if (e->pid == 0)
		{
			e->pid = MyProcPid;
			e->dboid = MyDatabaseId;
			e->latch = MyLatch;
			e->active = false;
			pg_atomic_write_u32(&e->lost, 0);
			MyLease = e;
			break;
		}
	}
	LWLockRelease(Leases->lock);
	if (MyLease != NULL && !exit_registered)
	{
		on_shmem_exit(lease_detach_at_exit, (Datum) 0);
		exit_registered = true;
	}
	return MyLease != NULL;
}

void
sched_lease_detach(void)
{
	if (MyLease == NULL)
		return;
	LWLockAcquire(Leases->lock, LW_EXCLUSIVE);
	MyLease->active = false;
	MyLease->pid = 0;
	MyLease->latch = NULL;
	LWLockRelease(Leases->lock);
	MyLease = NULL;
}

void
sched_lease_publish(const SchedTask *task)
{
	if (MyLease == NULL)
		return;
	LWLockAcquire(Leases->lock, LW_EXCLUSIVE);
	MyLease->active = true;
	pg_atomic_write_u32(&MyLease->lost, 0);
	MyLease->version = task->version;
	MyLease->heartbeat = task->heartbeat;
	strlcpy(MyLease->kind, task->kind, SCHED_KIND_LEN);
	strlcpy(MyLease->instance, task->instance, SCHED_INSTANCE_LEN);
	LWLockRelease(Leases->lock);
}

void
sched_lease_clear(void)
{
	if (MyLease == NULL)
		return;
	LWLockAcquire(Leases->lock, LW_EXCLUSIVE);
	MyLease->active = false;
	pg_atomic_write_u32(&MyLease->lost, 0);
	LWLockRelease(Leases->lock);
}

bool
sched_lease_lost(void)
{
	return MyLease != NULL && pg_atomic_read_u32(&MyLease->lost) != 0;
}

void
sched_check_lease(void)
{
	CHECK_FOR_INTERRUPTS();
	if (sched_lease_lost())
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lost the lease on the running task"),
				 errdetail("The task's row no longer carries the version this execution claimed; another executor or an operator changed it.")));
}

/* Copy out the published leases of this database (under the lock). */
static int
copy_live(LeaseEntry **out)
{
	LeaseEntry *copy;
	int			n = 0;

	if (Leases == NULL)
	{
		*out = NULL;
		return 0;
	}
	copy = palloc(sizeof(LeaseEntry) * Leases->n);
	LWLockAcquire(Leases->lock, LW_SHARED);
	for (int i = 0; i < Leases->n; i++)
	{
		LeaseEntry *e = &Leases->entries[i];

		if (e->pid != 0 && e->active && e->dboid == MyDatabaseId)
		{
			copy[n].version = e->version;
			strlcpy(copy[n].kind, e->kind, SCHED_KIND_LEN);
			strlcpy(copy[n].instance, e->instance, SCHED_INSTANCE_LEN);
			n++;
		}
	}
	LWLockRelease(Leases->lock);
	*out = copy;
	return n;
}

bool
sched_live_leases(Datum *kinds, Datum *instances, Datum *versions)
{
	LeaseEntry *live;
	int			n = copy_live(&live);
	Datum	   *k,
			   *i,
			   *v;

	if (Leases == NULL)
		return false;
	k = palloc(sizeof(Datum) * Max(n, 1));
	i = palloc(sizeof(Datum) * Max(n, 1));
	v = palloc(sizeof(Datum) * Max(n, 1));
	for (int j = 0; j < n; j++)
	{
		k[j] = CStringGetTextDatum(live[j].kind);
		i[j] = CStringGetTextDatum(live[j].instance);
		v[j] = Int64GetDatum(live[j].version);
	}
	*kinds = PointerGetDatum(construct_array(k, n, TEXTOID, -1, false, TYPALIGN_INT));
	*instances = PointerGetDatum(construct_array(i, n, TEXTOID, -1, false, TYPALIGN_INT));
	*versions = PointerGetDatum(construct_array(v, n, INT8OID, 8, FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	return true;
}

bool
sched_lease_is_live(const char *kind, const char *instance, int64 version)
{
	bool		live = false;

	if (Leases == NULL)
		return false;
	LWLockAcquire(Leases->lock, LW_SHARED);
	for (int i = 0; i < Leases->n && !live; i++)
	{
		LeaseEntry *e = &Leases->entries[i];

		live = e->pid != 0 && e->active && e->dboid == MyDatabaseId &&
			e->version == version && strcmp(e->kind, kind) == 0 &&
			strcmp(e->instance, instance) == 0;
	}
	LWLockRelease(Leases->lock);
	return live;
}

/*
 * One statement renews them all.  A row locked by another transaction (its
 * own executor rescheduling it, say) is skipped this round, not taken for
 * lost: "held" tells whether the row still carries the claimed version.
 */
static const char *renew_sql =
"WITH l AS ("
"  SELECT * FROM unnest($1::text[], $2::text[], $3::int8[]) AS l(kind, instance, version)"
"), locked AS ("
"  SELECT t.task_name, t.task_instance"
"    FROM tms.scheduled_tasks t JOIN l"
"      ON t.task_name = l.kind AND t.task_instance = l.instance"
"   WHERE t.version = l.version AND t.picked"
"     FOR UPDATE OF t SKIP LOCKED"
"), upd AS ("
"  UPDATE tms.scheduled_tasks t SET last_heartbeat = now()"
"    FROM locked"
"   WHERE t.task_name = locked.task_name AND t.task_instance = locked.task_instance"
"  RETURNING t.task_name, t.task_instance, t.last_heartbeat"
")"
" SELECT l.kind, l.instance, l.version, u.last_heartbeat,"
"        EXISTS (SELECT 1 FROM tms.scheduled_tasks t"
"                 WHERE t.task_name = l.kind AND t.task_instance = l.instance"
"                   AND t.version = l.version AND t.picked) AS held"
"   FROM l LEFT JOIN upd u ON u.task_name = l.kind AND u.task_instance = l.instance";

int
sched_renew_heartbeats(void)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TEXTARRAYOID, TEXTARRAYOID, INT8ARRAYOID};
	Datum		args[3];
	Latch	  **wake;
	int			nwake = 0;
	int			renewed = 0;
	int			rc;

	if (!sched_live_leases(&args[0], &args[1], &args[2]) ||
		ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(args[0])),
					   ARR_DIMS(DatumGetArrayTypeP(args[0]))) == 0)
		return 0;
	if (plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(renew_sql, 3, types);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare the heartbeat statement: %s",
				 SPI_result_code_string(SPI_result));
		plan = p;
	}
	rc = SPI_execute_plan(plan, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not renew heartbeats: %s", SPI_result_code_string(rc));

	/* copy the results out of SPI before taking the lock */
	{
		uint64		nrows = SPI_processed;
		char	  **kind = palloc(sizeof(char *) * nrows);
		char	  **inst = palloc(sizeof(char *) * nrows);
		int64	   *ver = palloc(sizeof(int64) * nrows);
		TimestampTz *hb = palloc(sizeof(TimestampTz) * nrows);
		bool	   *updated = palloc(sizeof(bool) * nrows);
		bool	   *held = palloc(sizeof(bool) * nrows);

		for (uint64 r = 0; r < nrows; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		d;

			kind[r] = SPI_getvalue(tup, desc, 1);
			inst[r] = SPI_getvalue(tup, desc, 2);
			ver[r] = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
			d = SPI_getbinval(tup, desc, 4, &isnull);
			updated[r] = !isnull;
			hb[r] = isnull ? 0 : DatumGetTimestampTz(d);
			held[r] = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
		}
		wake = palloc(sizeof(Latch *) * Max(Leases->n, 1));
		LWLockAcquire(Leases->lock, LW_EXCLUSIVE);
		for (uint64 r = 0; r < nrows; r++)
		{
			for (int i = 0; i < Leases->n; i++)
			{
				LeaseEntry *e = &Leases->entries[i];

				/* the holder may have moved on: only touch the same lease */
				if (e->pid == 0 || !e->active || e->dboid != MyDatabaseId ||
					e->version != ver[r] || strcmp(e->kind, kind[r]) != 0 ||
					strcmp(e->instance, inst[r]) != 0)
					continue;
				if (updated[r])
				{
					e->heartbeat = hb[r];
					renewed++;
				}
				else if (!held[r] && pg_atomic_read_u32(&e->lost) == 0)
				{
					pg_atomic_write_u32(&e->lost, 1);
					if (e->latch)
						wake[nwake++] = e->latch;
				}
			}
		}
		LWLockRelease(Leases->lock);
	}
	for (int i = 0; i < nwake; i++)
		SetLatch(wake[i]);
	return renewed;
}
