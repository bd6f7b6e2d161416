/*-------------------------------------------------------------------------
 *
 * delete.h
 *	  The one implementation of bulk deletes of purges and maintenance
 *	  operations (doc/purge.md, "Deleting"): a deleter that keeps several
 *	  S3 DeleteObjects requests in flight from one process, within the
 *	  database's delete pool and the request window of each storage
 *	  target, both in shared memory.
 *
 * The pool (delete_pool.c) bounds the bulk delete requests in flight at
 * once across every purge and every operation of a database to
 * tms.delete_concurrency; a process alone may use all of it, processes
 * deleting at the same time share it (a free permit goes to the waiting
 * process that holds the fewest).  Each storage target (endpoint +
 * bucket) has a window shared by every process of the database deleting
 * there (src/io/storage/aimd_window.c): a request refused to slow down halves it, a
 * success adds back, so the delete rate follows what the storage accepts
 * instead of failing a purge.
 *
 * The deleter (delete.c) takes files in batches: local files are deleted
 * at once (no pool: no request to throttle), s3 objects go into requests
 * of at most 1000 keys of one bucket, which start when a permit is free.
 * A caller hands a batch over with tms_deleter_submit(), which returns as
 * soon as the batch is queued: the caller goes on producing while the
 * requests run, and is held only when every slot of its deleter is busy
 * (back-pressure: memory stays at tms.delete_concurrency batches).  A
 * batch of level L starts only after every batch of a lower level
 * finished (a manifest is deleted after its entries, the metadata file
 * last).  Keys refused to slow down are sent again, never counted as
 * failed; refusals that go on for tms.delete_throttle_patience fail the
 * deleter (TMS_DELETE_THROTTLED: a transient failure, retried later).
 *
 * Waits (for a permit, for answers) end when tms_io_interrupted() says so:
 * a query cancel, a termination, or the running task's lost lease; the
 * deleter then stops with TMS_DELETE_INTERRUPTED and raises nothing, so it
 * may be driven from a callback of a plain-C layer.  Permits are given
 * back by tms_deleter_free() (call it in a PG_FINALLY) and, should the
 * process exit, by an on_shmem_exit callback.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_DELETE_H
#define TMS_OPS_DELETE_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "io/io.h"

/* settings (delete.c) */
extern int	tms_delete_concurrency;
extern bool tms_delete_adaptive;
extern int	tms_delete_throttle_patience_s;

/* Shared memory of the pool, for n processes (tms.c's hooks). */
extern Size tms_delete_pool_shmem_size(int n);
extern void tms_delete_pool_shmem_request(void);
extern void tms_delete_pool_shmem_init(int n);

/*
 * A storage target's name ("endpoint/bucket", io_storage_target) fits in
 * this; a longer one is counted under the target "s3".
 */
#define TMS_DELETE_TARGET_LEN 256

typedef enum TmsDeleteStatus
{
	TMS_DELETE_OK,
	TMS_DELETE_FAILED,			/* a request or a key failed: error */
	TMS_DELETE_THROTTLED,		/* refused to slow down for longer than the
								 * patience: error */
	TMS_DELETE_INTERRUPTED		/* a cancel, a termination, a lost lease */
} TmsDeleteStatus;

/*
 * Called for a file the storage did not delete (and that is not to be
 * sent again); true: the caller counts it (skipped) and it is no failure.
 * May raise (it runs in the deleter's caller's context).
 */
typedef bool (*TmsDeleteRefusedFn) (void *arg, const char *uri, const IoDeleteResult *r);

typedef struct TmsDeleterPrivate TmsDeleterPrivate;

typedef struct TmsDeleter
{
	/* read by the caller, counted as answers arrive */
	int64		deleted;		/* files deleted (or gone already) */
	int64		bytes;			/* their declared sizes, where known */
	int64		requests;		/* DeleteObjects requests sent, retries
								 * included; a local file counts one */
	int64		throttled;		/* requests refused (wholly or some keys) to
								 * slow down */
	int64		retried_keys;	/* keys sent again after such a refusal */
	TmsDeleteStatus status;
	char		error[1024];	/* FAILED, THROTTLED: what */
	long		error_status;	/* its HTTP status, 0: none */
	char		error_code[64]; /* the S3 code of the failed key or request */
	char		error_uri[1024];	/* a failed key: which */

	TmsDeleterPrivate *priv;
} TmsDeleter;

/*
 * A deleter over storage (which must outlive it), in the current memory
 * context; label names the work in tms.delete_pool ("purge job 12").
 * refused (may be NULL: every refusal is a failure) sees the files the
 * storage did not delete.
 */
extern TmsDeleter *tms_deleter_create(IoStorage *storage, const char *label,
									  TmsDeleteRefusedFn refused, void *arg);

/*
 * Hand over n files of level (canonical locations, declared sizes, -1
 * unknown; both copied).  Waits while lower levels are unfinished or
 * every slot is busy.  false when the deleter stopped (status).
 */
extern bool tms_deleter_submit(TmsDeleter *d, int level, const char *const *uris,
							   const int64 *sizes, int n);

/* Wait until everything handed over is done; false when it stopped. */
extern bool tms_deleter_drain(TmsDeleter *d);

/* Abandon what is in flight, give the permits back, free. */
extern void tms_deleter_free(TmsDeleter *d);

/* What the views tms.delete_pool and tms.delete_targets show. */
typedef struct TmsDeleteHolderInfo
{
	int			pid;
	Oid			dboid;
	char		label[64];
	int			held;			/* requests in flight */
	bool		waiting;
	TimestampTz wait_since;		/* waiting: since when */
	int64		requests;		/* permits granted so far */
} TmsDeleteHolderInfo;

typedef struct TmsDeleteTargetInfo
{
	Oid			dboid;
	char		name[TMS_DELETE_TARGET_LEN];
	double		window;
	int			allowed;		/* requests in flight it allows now */
	int			in_flight;
	long		pause_ms;
	int64		requests;
	int64		succeeded;
	int64		throttled;
	int64		decreases;
	int64		retried_keys;
	TimestampTz last_throttled_at;	/* 0: never */
} TmsDeleteTargetInfo;

/* Copies for the views (palloc'd); the number of entries. */
extern int	tms_delete_pool_holders(TmsDeleteHolderInfo **out);
extern int	tms_delete_pool_targets(TmsDeleteTargetInfo **out);

#endif							/* TMS_OPS_DELETE_H */
