/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Cumulative statistics in shared memory (stats.h): the table, its
 *	  file across restarts, counting by transactions and by the io
 *	  layer's observer, reading and resetting.
 *
 * The file pg_stat/tms.stat is written by the postmaster when it exits
 * cleanly (an on_shmem_exit callback, as pg_stat_statements does) and
 * read, then removed, when shared memory is made at the next start: a
 * crash (the postmaster's reinitialisation, or its death) leaves no file,
 * so the counters start from zero rather than from a stale copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "observe/stats.h"

#define STATS_FILE			PGSTAT_STAT_PERMANENT_DIRECTORY "/tms.stat"
#define STATS_FILE_MAGIC	0x746d7301	/* "tms" and a 1 */
#define STATS_FILE_VERSION	1

#define OVERFLOW_LABEL		"(other)"

int			tms_stat_max_entries = 1000;

static const char *const area_names[TMS_STAT_NAREAS] = {
	"tasks", "maintenance", "purges", "requests"
};

typedef struct StatKey
{
	Oid			dboid;			/* InvalidOid: the area's overflow row */
	int32		area;
	char		labels[TMS_STAT_NLABELS][NAMEDATALEN];
} StatKey;

typedef struct StatEntry
{
	StatKey		key;
	TimestampTz reset;			/* under the lock */
	pg_atomic_uint64 counters[TMS_STAT_NCOUNTERS];
} StatEntry;

typedef struct StatShared
{
	LWLock	   *lock;
} StatShared;

static StatShared *Stats = NULL;
static HTAB *StatHash = NULL;

/* rows this backend found already (they are never removed), by key */
typedef struct LocalEntry
{
	StatKey		key;
	StatEntry  *entry;
} LocalEntry;

static HTAB *LocalEntries = NULL;

/* ----------------------------------------------------------------
 * Shared memory and the file
 * ----------------------------------------------------------------
 */

/* rows in the table: the setting's, and one overflow row per area */
static int
stat_capacity(void)
{
	return tms_stat_max_entries + TMS_STAT_NAREAS;
}

Size
tms_stat_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(StatShared)),
					hash_estimate_size(stat_capacity(), sizeof(StatEntry)));
}

void
tms_stat_shmem_request(void)
{
	RequestNamedLWLockTranche("tms stats", 1);
}

static void
key_init(StatKey *key, Oid dboid, int area, const char *l1, const char *l2,
		 const char *l3)
{
	const char *labels[TMS_STAT_NLABELS] = {l1, l2, l3};

	memset(key, 0, sizeof(*key));
	key->dboid = dboid;
	key->area = area;
	for (int i = 0; i < TMS_STAT_NLABELS; i++)
		if (labels[i] != NULL)
			strlcpy(key->labels[i], labels[i], NAMEDATALEN);
}

static void
overflow_key(StatKey *key, int area)
{
	key_init(key, InvalidOid, area, OVERFLOW_LABEL,
			 area == TMS_STAT_TASKS ? NULL : OVERFLOW_LABEL,
			 area == TMS_STAT_JOBS ? OVERFLOW_LABEL : NULL);
}

/* A new entry, zeroed (the caller holds the lock exclusively, or is alone). */
static StatEntry *
entry_enter(const StatKey *key, TimestampTz now)
{
	bool		found;
	StatEntry  *e = hash_search(StatHash, key, HASH_ENTER, &found);

	if (!found)
	{
		e->reset = now;
		for (int i = 0; i < TMS_STAT_NCOUNTERS; i++)
			pg_atomic_init_u64(&e->counters[i], 0);
	}
	return e;
}

/* The row of key, or its area's overflow row when the table is full. */
static StatEntry *
entry_find_or_enter(const StatKey *key, TimestampTz now)
{
	StatEntry  *e = hash_search(StatHash, key, HASH_FIND, NULL);
	StatKey		ok;

	if (e != NULL)
		return e;
	if (hash_get_num_entries(StatHash) < stat_capacity())
		return entry_enter(key, now);
	overflow_key(&ok, key->area);
	return hash_search(StatHash, &ok, HASH_FIND, NULL);
}

/*
 * Read the file the last clean shutdown wrote, then remove it.  Runs in
 * the postmaster: any trouble is logged and the counters start from zero.
 */
static void
stats_load(void)
{
	FILE	   *file = AllocateFile(STATS_FILE, PG_BINARY_R);
	uint32		header[3];
	int32		n;
	TimestampTz now = GetCurrentTimestamp();

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", STATS_FILE)));
		return;
	}
	if (fread(header, sizeof(header), 1, file) != 1 ||
		header[0] != STATS_FILE_MAGIC || header[1] != STATS_FILE_VERSION ||
		header[2] != TMS_STAT_NCOUNTERS || fread(&n, sizeof(n), 1, file) != 1 || n < 0)
		goto bad;
	for (int32 i = 0; i < n; i++)
	{
		StatKey		key;
		TimestampTz reset;
		uint64		counters[TMS_STAT_NCOUNTERS];
		StatEntry  *e;

		if (fread(&key, sizeof(key), 1, file) != 1 ||
			fread(&reset, sizeof(reset), 1, file) != 1 ||
			fread(counters, sizeof(counters), 1, file) != 1 ||
			key.area < 0 || key.area >= TMS_STAT_NAREAS)
			goto bad;
		for (int l = 0; l < TMS_STAT_NLABELS; l++)
			key.labels[l][NAMEDATALEN - 1] = '\0';
		e = entry_find_or_enter(&key, now);
		/* a row the smaller table has no room for adds to the overflow row */
		if (memcmp(&e->key, &key, sizeof(key)) == 0)
			e->reset = reset;
		for (int c = 0; c < TMS_STAT_NCOUNTERS; c++)
			pg_atomic_fetch_add_u64(&e->counters[c], counters[c]);
	}
	FreeFile(file);
	unlink(STATS_FILE);
	return;

bad:
	ereport(LOG,
			(errmsg("ignoring the tms statistics file \"%s\": it is damaged or of another version",
					STATS_FILE)));
	FreeFile(file);
	unlink(STATS_FILE);
}

/*
 * At the postmaster's exit: write the counters for the next start, unless
 * it exits after a crash.
 */
static void
stats_save(int code, Datum arg)
{
	const char *tmp = STATS_FILE ".tmp";
	FILE	   *file;
	HASH_SEQ_STATUS seq;
	StatEntry  *e;
	uint32		header[3] = {STATS_FILE_MAGIC, STATS_FILE_VERSION, TMS_STAT_NCOUNTERS};
	int32		n;

	if (code != 0 || Stats == NULL)
		return;
	file = AllocateFile(tmp, PG_BINARY_W);
	if (file == NULL)
		goto error;
	n = (int32) hash_get_num_entries(StatHash);
	if (fwrite(header, sizeof(header), 1, file) != 1 ||
		fwrite(&n, sizeof(n), 1, file) != 1)
		goto error;
	hash_seq_init(&seq, StatHash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		uint64		counters[TMS_STAT_NCOUNTERS];

		for (int c = 0; c < TMS_STAT_NCOUNTERS; c++)
			counters[c] = pg_atomic_read_u64(&e->counters[c]);
		if (fwrite(&e->key, sizeof(e->key), 1, file) != 1 ||
			fwrite(&e->reset, sizeof(e->reset), 1, file) != 1 ||
			fwrite(counters, sizeof(counters), 1, file) != 1)
		{
			hash_seq_term(&seq);
			goto error;
		}
	}
	if (FreeFile(file) != 0)
	{
		file = NULL;
		goto error;
	}
	(void) durable_rename(tmp, STATS_FILE, LOG);
	return;

error:
	ereport(LOG,
			(errcode_for_file_access(),
			 errmsg("could not write file \"%s\": %m", tmp)));
	if (file != NULL)
		FreeFile(file);
	unlink(tmp);
}

/*
 * Attach to (or, first, make) the table, with the overflow rows and what
 * the file holds.  From the shmem startup hook, under AddinShmemInitLock.
 */
void
tms_stat_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	Stats = ShmemInitStruct("tms stats", sizeof(StatShared), &found);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StatKey);
	info.entrysize = sizeof(StatEntry);
	StatHash = ShmemInitHash("tms stats hash", stat_capacity(), stat_capacity(),
							 &info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	if (!found)
	{
		TimestampTz now = GetCurrentTimestamp();

		Stats->lock = &(GetNamedLWLockTranche("tms stats"))->lock;
		for (int a = 0; a < TMS_STAT_NAREAS; a++)
		{
			StatKey		key;

			overflow_key(&key, a);
			(void) entry_enter(&key, now);
		}
		stats_load();
	}
	if (!IsUnderPostmaster)
		on_shmem_exit(stats_save, (Datum) 0);
}

int
tms_stat_area_by_name(const char *name)
{
	for (int a = 0; a < TMS_STAT_NAREAS; a++)
		if (strcmp(area_names[a], name) == 0)
			return a;
	return -1;
}

/* ----------------------------------------------------------------
 * Finding a row
 * ----------------------------------------------------------------
 */

/*
 * The row of (this database, area, labels), made if need be; NULL when
 * there is no shared memory.  Found rows are remembered by the backend.
 */
static StatEntry *
entry_for(int area, const char *l1, const char *l2, const char *l3)
{
	StatKey		key;
	LocalEntry *local;
	StatEntry  *e;

	if (Stats == NULL)
		return NULL;
	if (LocalEntries == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(StatKey);
		info.entrysize = sizeof(LocalEntry);
		info.hcxt = TopMemoryContext;
		LocalEntries = hash_create("tms stats of this backend", 64, &info,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	key_init(&key, MyDatabaseId, area, l1, l2, l3);
	local = hash_search(LocalEntries, &key, HASH_FIND, NULL);
	if (local != NULL)
		return local->entry;

	LWLockAcquire(Stats->lock, LW_SHARED);
	e = hash_search(StatHash, &key, HASH_FIND, NULL);
	LWLockRelease(Stats->lock);
	if (e == NULL)
	{
		LWLockAcquire(Stats->lock, LW_EXCLUSIVE);
		e = entry_find_or_enter(&key, GetCurrentTimestamp());
		LWLockRelease(Stats->lock);
	}
	local = hash_search(LocalEntries, &key, HASH_ENTER, NULL);
	local->entry = e;
	return e;
}

/* ----------------------------------------------------------------
 * Counting by transactions
 * ----------------------------------------------------------------
 */

typedef struct Pending
{
	StatEntry  *entry;
	int			counter;
	int64		delta;
	int			level;			/* the (sub)transaction's nesting level */
} Pending;

static Pending *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;
static bool callbacks_registered = false;

static void
stats_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int i = 0; i < npending; i++)
				pg_atomic_fetch_add_u64(&pending[i].entry->counters[pending[i].counter],
										(uint64) pending[i].delta);
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			npending = 0;
			break;
		default:
			break;
	}
}

static void
stats_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		int			kept = 0;

		for (int i = 0; i < npending; i++)
			if (pending[i].level < level)
				pending[kept++] = pending[i];
		npending = kept;
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = 0; i < npending; i++)
			if (pending[i].level >= level)
				pending[i].level = level - 1;
	}
}

void
tms_stat_add(TmsStatArea area, const char *l1, const char *l2, const char *l3,
			 const int64 *delta, int n)
{
	StatEntry  *e = entry_for(area, l1, l2, l3);

	if (e == NULL)
		return;
	if (!IsTransactionState())
	{
		for (int i = 0; i < n; i++)
			if (delta[i] > 0)
				pg_atomic_fetch_add_u64(&e->counters[i], (uint64) delta[i]);
		return;
	}
	if (!callbacks_registered)
	{
		RegisterXactCallback(stats_xact_callback, NULL);
		RegisterSubXactCallback(stats_subxact_callback, NULL);
		callbacks_registered = true;
	}
	for (int i = 0; i < n; i++)
	{
		if (delta[i] <= 0)
			continue;
		if (npending == maxpending)
		{
			int			more = Max(16, maxpending * 2);

			pending = pending == NULL ?
				MemoryContextAlloc(TopMemoryContext, more * sizeof(Pending)) :
				repalloc(pending, more * sizeof(Pending));
			maxpending = more;
		}
		pending[npending].entry = e;
		pending[npending].counter = i;
		pending[npending].delta = delta[i];
		pending[npending].level = GetCurrentTransactionNestLevel();
		npending++;
	}
}

/* ----------------------------------------------------------------
 * HTTP exchanges
 * ----------------------------------------------------------------
 */

/* The error class of an exchange (TMS_STAT_HTTP_CLASS_NAMES), or -1. */
static int
http_error_class(const IoHttpObservation *o)
{
	if (o->status == 0)
		return o->error == IO_ERR_TIMEOUT ? 0 : o->error == IO_ERR_CONNECT ? 1 : 5;
	if (o->status == 429 || o->status == 503)
		return 2;
	if (o->status >= 400 && o->status < 500)
		return 3;
	if (o->status >= 500)
		return 4;
	return -1;
}

/*
 * The io layer's observer: atomic additions only (it runs inside
 * libcurl's transfer loop; see io.h).
 */
static void
http_observe(void *arg, const IoHttpObservation *o)
{
	static const int64 bounds[] = TMS_STAT_LATENCY_BOUNDS_US;
	StatEntry  *e = arg;
	int			class = http_error_class(o);
	int			bucket = 0;
	int64		us = Max(o->elapsed_us, 0);

	pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_REQUESTS], 1);
	if (o->attempt > 0)
		pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_RETRIES], 1);
	if (class >= 0)
	{
		pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_ERRORS], 1);
		pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_ERROR_CLASS + class], 1);
	}
	while (bucket < (int) lengthof(bounds) && us > bounds[bucket])
		bucket++;
	pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_LATENCY_US], (uint64) us);
	pg_atomic_fetch_add_u64(&e->counters[TMS_STAT_HTTP_BUCKET + bucket], 1);
}

void
tms_stat_observe_http(IoHttpOptions *http, const char *server, const char *service)
{
	StatEntry  *e = entry_for(TMS_STAT_REQUESTS, server, service, NULL);

	http->observe = e ? http_observe : NULL;
	http->observe_arg = e;
}

/* ----------------------------------------------------------------
 * Reading and resetting
 * ----------------------------------------------------------------
 */

int
tms_stat_rows(TmsStatArea area, TmsStatRow **rows)
{
	HASH_SEQ_STATUS seq;
	StatEntry  *e;
	int			n = 0;

	*rows = NULL;
	if (Stats == NULL)
		return 0;
	LWLockAcquire(Stats->lock, LW_SHARED);
	*rows = palloc(sizeof(TmsStatRow) * hash_get_num_entries(StatHash));
	hash_seq_init(&seq, StatHash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		TmsStatRow *r = &(*rows)[n];

		if (e->key.area != (int32) area)
			continue;
		r->dboid = e->key.dboid;
		for (int l = 0; l < TMS_STAT_NLABELS; l++)
			r->labels[l] = pstrdup(e->key.labels[l]);
		for (int c = 0; c < TMS_STAT_NCOUNTERS; c++)
			r->counters[c] = (int64) pg_atomic_read_u64(&e->counters[c]);
		r->reset = e->reset;
		n++;
	}
	LWLockRelease(Stats->lock);
	return n;
}

void
tms_stat_reset(int area, Oid dboid)
{
	HASH_SEQ_STATUS seq;
	StatEntry  *e;
	TimestampTz now = GetCurrentTimestamp();

	if (Stats == NULL)
		return;
	LWLockAcquire(Stats->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, StatHash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if ((area >= 0 && e->key.area != area) ||
			(e->key.dboid != dboid && e->key.dboid != InvalidOid))
			continue;
		for (int c = 0; c < TMS_STAT_NCOUNTERS; c++)
			pg_atomic_write_u64(&e->counters[c], 0);
		e->reset = now;
	}
	LWLockRelease(Stats->lock);
}
