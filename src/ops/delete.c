/*-------------------------------------------------------------------------
 *
 * delete.c
 *	  The deleter of purges and maintenance operations (delete.h): files
 *	  handed over in batches, s3 objects deleted by several DeleteObjects
 *	  requests (Azure blobs by Blob Batch requests, gs objects by several
 *	  GCS batches) in flight at once within the database's delete pool
 *	  (delete_pool.c), refusals to slow down sent again, the settings.
 *
 * A deleter has tms.delete_concurrency slots (read when it is created),
 * each holding one batch: free, ready (queued for a permit, or waiting
 * for its retry time) or in flight (a permit held, a request running in
 * the io layer's deleter of the same slot).  Everything happens in the
 * calling process, in pump(): ready batches take permits in the order
 * they were handed over, answers are read as they arrive, and when there
 * is nothing to read the process sleeps on its latch until a permit is
 * handed to it or a retry is due.
 *
 * An answer:
 *	 200		deleted keys are counted; keys refused to slow down
 *				(io_delete_code_throttled) stay in the batch, which is
 *				ready again; any other refusal goes to the caller's
 *				refused callback, and is a failure unless it says "skip".
 *	 503/429	(SlowDown; Azure's ServerBusy, OperationTimedOut) the whole
 *				batch is ready again.
 *	 timeout	the request took longer than the server's request_timeout
 *				(a slow store working through a Blob Batch of 256
 *				sub-requests, several in flight): taken as a refusal to
 *				slow down, the whole batch is ready again (deleting a
 *				file twice is harmless: the second time it is gone).
 *	 403, ExpiredToken: when the storage holds vended credentials it can
 *				refresh (io_storage_set_refresh), new ones are fetched and
 *				the batch is sent again (with the newer ones another
 *				batch fetched meanwhile, else new ones, at most
 *				CREDENTIAL_REFRESHES times in a row: a batch held back by
 *				throttling may outlive several vended tokens); so are
 *				the keys of a 200 or 202 refused for their credentials
 *				inside it (an Azure Blob Batch or GCS batch authorises
 *				each sub-request on its own).
 *	 transport failures, 500, 502, 504: sent again after a backoff, at
 *				most the storage's retry count; other failures stop the
 *				deleter.
 * A refusal feeds the target's window (delete_pool_release); with a fixed
 * window (tms.delete_adaptive off) a refused batch also backs off
 * (doubling per refusal), as a client without adaptation would.  What a
 * Retry-After asks is honoured either way.  Refusals with no success in
 * between for tms.delete_throttle_patience stop the deleter
 * (TMS_DELETE_THROTTLED): its caller fails the attempt as transient and
 * the job is retried later, with whatever the storage accepts then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "bridge/catalog.h"
#include "ops/delete.h"
#include "ops/delete_int.h"
#include "ops/ops.h"

int			tms_delete_concurrency = 4;
bool		tms_delete_adaptive = true;
int			tms_delete_throttle_patience_s = 600;

#define MAX_SLOTS 64

/*
 * Vended credentials fetched again for one batch in a row at most: a batch
 * held back (throttled, waiting for a permit) may outlive several tokens.
 */
#define CREDENTIAL_REFRESHES 3

typedef enum BatchState
{
	BATCH_FREE,
	BATCH_READY,				/* queued for a permit, or its retry time */
	BATCH_IN_FLIGHT,			/* a permit held, its request running */
	BATCH_ANSWERED				/* its answer being read */
} BatchState;

typedef struct DeleteBatch
{
	BatchState	state;
	int			level;
	uint64		seq;			/* order of hand-over */
	MemoryContext cxt;			/* its files, reset when free again */
	char	  **uris;
	int64	   *sizes;
	IoDeleteResult *results;
	int			n;
	int			target;			/* in the pool */
	uint32		epoch;			/* the target window's, at its start */
	int			attempts;		/* failed sends retried */
	int			refusals;		/* refused in a row */
	int			refreshes;		/* credentials fetched again for it, in a row */
	int			sent_gen;		/* io_storage_refresh_count() when sent */
	bool		refresh_due;	/* fetch new credentials before sending it */
	int64		not_before_ms;	/* io_now_ms() */
} DeleteBatch;

struct TmsDeleterPrivate
{
	IoStorage  *storage;
	IoDeleter  *io;				/* created with the first s3 batch */
	MemoryContext cxt;
	TmsDeleteRefusedFn refused;
	void	   *refused_arg;
	int			nslots;
	DeleteBatch *batches;
	uint64		next_seq;
	int64		refused_since_ms;	/* first refusal since the last success */
};

/* ----------------------------------------------------------------
 * Settings
 * ----------------------------------------------------------------
 */

void
tms_delete_init(void)
{
	DefineCustomIntVariable("tms.delete_concurrency",
							gettext_noop("Bulk delete requests in flight at once in a database, across purges and maintenance operations."),
							gettext_noop("One job alone may use all of them; jobs deleting at the same time share them."),
							&tms_delete_concurrency,
							4, 1, MAX_SLOTS,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("tms.delete_adaptive",
							 gettext_noop("Adapts the delete rate to the storage's throttling (additive increase, multiplicative decrease)."),
							 gettext_noop("Off: every job uses its share of tms.delete_concurrency whatever the storage answers, and a refused request backs off alone."),
							 &tms_delete_adaptive,
							 true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.delete_throttle_patience",
							gettext_noop("How long deletes may go on being refused to slow down, without a success, before the attempt fails."),
							gettext_noop("The job is then retried later, like after any transient failure."),
							&tms_delete_throttle_patience_s,
							600, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
}

/* ----------------------------------------------------------------
 * Outcomes
 * ----------------------------------------------------------------
 */

static void stop(TmsDeleter *d, TmsDeleteStatus status, long http_status, const char *code,
				 const char *uri, const char *fmt,...) pg_attribute_printf(6, 7);

static void
stop(TmsDeleter *d, TmsDeleteStatus status, long http_status, const char *code,
	 const char *uri, const char *fmt,...)
{
	va_list		ap;

	if (d->status != TMS_DELETE_OK)
		return;
	d->status = status;
	d->error_status = http_status;
	strlcpy(d->error_code, code ? code : "", sizeof(d->error_code));
	strlcpy(d->error_uri, uri ? uri : "", sizeof(d->error_uri));
	va_start(ap, fmt);
	vsnprintf(d->error, sizeof(d->error), fmt, ap);
	va_end(ap);
}

/* A file the storage would not delete: the caller's to skip, or a failure. */
static void
refused(TmsDeleter *d, const char *uri, const IoDeleteResult *r)
{
	TmsDeleterPrivate *p = d->priv;

	if (p->refused != NULL && p->refused(p->refused_arg, uri, r))
		return;
	stop(d, TMS_DELETE_FAILED, 0, r->code, uri, "could not delete \"%s\": %s %s",
		 uri, r->code, r->message);
}

/* ----------------------------------------------------------------
 * Batches
 * ----------------------------------------------------------------
 */

static bool
is_s3(const char *uri)
{
	size_t		len;

	/* S3, Azure or GCS: an object store's, deleted by bulk requests */
	return io_delete_group(uri, &len) > 0;
}

/* Length of "s3://bucket/" ("gs://bucket/", "abfs://container@host/"). */
static size_t
bucket_prefix_len(const char *uri)
{
	size_t		len;

	(void) io_delete_group(uri, &len);
	return len;
}

static bool
any_active(TmsDeleter *d, int below_level)
{
	TmsDeleterPrivate *p = d->priv;

	for (int i = 0; i < p->nslots; i++)
		if (p->batches[i].state != BATCH_FREE &&
			(below_level < 0 || p->batches[i].level < below_level))
			return true;
	return false;
}

static void
batch_free(DeleteBatch *b)
{
	MemoryContextReset(b->cxt);
	b->state = BATCH_FREE;
	b->uris = NULL;
	b->sizes = NULL;
	b->results = NULL;
	b->n = 0;
}

/*
 * Keep the batch's keys refused to slow down (and, with credentials, those
 * refused for their credentials); the number kept.
 */
static int
keep_throttled(DeleteBatch *b, bool credentials)
{
	int			kept = 0;

	for (int i = 0; i < b->n; i++)
		if (!b->results[i].deleted &&
			(io_delete_code_throttled(b->results[i].code) ||
			 (credentials && b->results[i].credentials)))
		{
			b->uris[kept] = b->uris[i];
			b->sizes[kept] = b->sizes[i];
			kept++;
		}
	return kept;
}

/*
 * A batch was refused for its credentials: may it go again?  True when
 * the storage holds newer ones than it was sent with (another batch
 * fetched them), or new ones are to be fetched right before it is sent
 * (refresh_due: it may wait for a permit longer than a token lives);
 * false when there is nothing to refresh, or they were fetched
 * CREDENTIAL_REFRESHES times in a row for this batch already (a storage
 * that keeps refusing fresh ones refuses them for good).
 */
static bool
credentials_renewed(TmsDeleterPrivate *p, DeleteBatch *b)
{
	if (!io_storage_refreshable(p->storage))
		return false;
	if (io_storage_refresh_count(p->storage) != b->sent_gen)
		return true;
	if (b->refreshes >= CREDENTIAL_REFRESHES)
		return false;
	b->refreshes++;
	b->refresh_due = true;
	return true;
}

/* Ready again after a refusal to slow down. */
static void
batch_refused(TmsDeleter *d, DeleteBatch *b, long retry_after_ms)
{
	TmsDeleterPrivate *p = d->priv;
	int64		now = io_now_ms();
	long		delay = retry_after_ms > 0 ? retry_after_ms : 0;

	b->refusals++;
	/* a fixed window: each refused request backs off on its own */
	if (!tms_delete_adaptive)
		delay = Max(delay, io_deleter_backoff_ms(p->io, b->refusals - 1));
	b->not_before_ms = now + delay;
	b->state = BATCH_READY;
	d->throttled++;
	if (p->refused_since_ms == 0)
		p->refused_since_ms = now;
}

/* Read the answer of the batch in slot done->slot. */
static void
batch_answered(TmsDeleter *d, const IoDeleteDone *done)
{
	TmsDeleterPrivate *p = d->priv;
	DeleteBatch *b = &p->batches[done->slot];
	PoolOutcome outcome;
	bool		renew = false;

	/* a request that timed out: the storage is slower than we ask of it */
	bool		slow = done->rc != 0 && done->err.code == IO_ERR_TIMEOUT;

	if (done->rc == 0)
		outcome = done->nthrottled > 0 ? POOL_THROTTLED : POOL_SUCCEEDED;
	else
		outcome = done->throttled || slow ? POOL_THROTTLED : POOL_FAILED;
	/* the permit goes back first: nothing below may leave it held */
	b->state = BATCH_ANSWERED;
	delete_pool_release(b->target, outcome, b->epoch, done->retry_after_ms,
						(int) done->nthrottled);

	if (done->rc != 0 && (done->throttled || slow))
	{
		/*
		 * Held back, it may outlive the credentials it was last sent with: a
		 * refusal for them after this may fetch new ones again.
		 */
		b->refreshes = 0;
		batch_refused(d, b, done->retry_after_ms);
		return;
	}
	if (done->rc != 0 && done->credentials && credentials_renewed(p, b))
	{
		/* vended credentials expired: new ones from the catalog */
		b->not_before_ms = 0;
		b->state = BATCH_READY;
		return;
	}
	if (done->rc != 0)
	{
		bool		retry = done->err.code == IO_ERR_CONNECT || done->err.code == IO_ERR_SERVER;

		if (retry && b->attempts < io_deleter_retries(p->io))
		{
			b->not_before_ms = io_now_ms() + io_deleter_backoff_ms(p->io, b->attempts);
			b->attempts++;
			b->state = BATCH_READY;
			return;
		}
		stop(d, TMS_DELETE_FAILED, done->err.http_status, done->s3code, NULL,
			 "could not delete files: %s%s%s%s", done->err.message,
			 done->err.detail[0] ? " (" : "", done->err.detail,
			 done->err.detail[0] ? ")" : "");
		batch_free(b);
		return;
	}

	/*
	 * Keys refused for their credentials inside the answer (a SAS that
	 * expired while the storage worked through the batch): new credentials,
	 * and those keys go again.
	 */
	if (done->ncredentials > 0)
		renew = credentials_renewed(p, b);
	else
		b->refreshes = 0;
	for (int i = 0; i < b->n; i++)
	{
		const IoDeleteResult *r = &b->results[i];

		if (r->deleted)
		{
			d->deleted++;
			if (b->sizes[i] > 0)
				d->bytes += b->sizes[i];
		}
		else if (!io_delete_code_throttled(r->code) && !(renew && r->credentials))
			refused(d, b->uris[i], r);
	}
	if (done->nthrottled > 0 || renew)
	{
		b->n = keep_throttled(b, renew);
		d->retried_keys += b->n;
		b->attempts = 0;
		if (done->nthrottled > 0)
			batch_refused(d, b, done->retry_after_ms);
		else
		{
			b->not_before_ms = 0;
			b->state = BATCH_READY;
		}
		return;
	}
	p->refused_since_ms = 0;
	batch_free(b);
}

/* Start what may start: ready batches, in order, as permits come. */
static void
start_ready(TmsDeleter *d, int64 *wake_ms)
{
	TmsDeleterPrivate *p = d->priv;
	int64		now = io_now_ms();
	bool		queued = false;

	for (;;)
	{
		DeleteBatch *b = NULL;
		int			slot = -1;
		int64		retry_ms;
		TmsError	err;

		for (int i = 0; i < p->nslots; i++)
		{
			DeleteBatch *c = &p->batches[i];

			if (c->state != BATCH_READY)
				continue;
			if (c->not_before_ms > now)
			{
				*wake_ms = Min(*wake_ms, c->not_before_ms);
				continue;
			}
			if (b == NULL || c->seq < b->seq)
			{
				b = c;
				slot = i;
			}
		}
		if (b == NULL)
			break;
		if (!delete_pool_acquire(b->target, &b->epoch, &retry_ms))
		{
			queued = true;
			*wake_ms = Min(*wake_ms, retry_ms);
			break;
		}
		if (b->refresh_due)
		{
			b->refresh_due = false;
			if (io_storage_refresh_count(p->storage) == b->sent_gen &&
				io_storage_refresh(p->storage, &err) != 0)
			{
				delete_pool_release(b->target, POOL_ABANDONED, b->epoch, -1, 0);
				stop(d, TMS_DELETE_FAILED, 0, NULL, NULL,
					 "could not delete files: the storage refused the vended credentials, and they could not be refreshed: %s",
					 err.message);
				batch_free(b);
				break;
			}
		}
		memset(b->results, 0, sizeof(IoDeleteResult) * b->n);
		if (io_deleter_start(p->io, slot, (const char *const *) b->uris, b->n, b->results,
							 &err) == 0)
			b->sent_gen = io_storage_refresh_count(p->storage);
		else
		{
			delete_pool_release(b->target, POOL_ABANDONED, b->epoch, -1, 0);
			stop(d, TMS_DELETE_FAILED, 0, NULL, NULL, "could not delete files: %s",
				 err.message);
			batch_free(b);
			break;
		}
		b->state = BATCH_IN_FLIGHT;
		d->requests++;
	}
	if (!queued)
		delete_pool_stop_waiting();
}

/*
 * One round: start what may start, then wait for answers (or, with none
 * in flight, for a permit or a retry time) and read them.  With block
 * false nothing is waited for.  Stops the deleter when interrupted or out
 * of patience.
 */
static void
pump(TmsDeleter *d, bool block)
{
	TmsDeleterPrivate *p = d->priv;
	int64		wake_ms = io_now_ms() + 1000;
	bool		in_flight = false;
	IoDeleteDone done;
	TmsError	err;

	if (d->status != TMS_DELETE_OK)
		return;
	start_ready(d, &wake_ms);
	for (int i = 0; i < p->nslots; i++)
		in_flight |= p->batches[i].state == BATCH_IN_FLIGHT;
	if (in_flight)
	{
		if (io_deleter_wait(p->io, block ? IO_POLL_INTERVAL_MS : 0, &err) != 0 &&
			err.code != IO_ERR_INTERRUPTED)
			stop(d, TMS_DELETE_FAILED, 0, NULL, NULL, "could not delete files: %s",
				 err.message);
		while (io_deleter_done(p->io, &done))
			batch_answered(d, &done);
	}
	else if (block && any_active(d, -1))
	{
		long		timeout = (long) Max(1, wake_ms - io_now_ms());

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(timeout, 1000), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	if (tms_io_interrupted(NULL))
		stop(d, TMS_DELETE_INTERRUPTED, 0, NULL, NULL, "interrupted");
	else if (p->refused_since_ms > 0 &&
			 io_now_ms() - p->refused_since_ms > (int64) tms_delete_throttle_patience_s * 1000)
		stop(d, TMS_DELETE_THROTTLED, 503, "SlowDown", NULL,
			 "the storage refused deletes to slow down for more than %d s without accepting one",
			 tms_delete_throttle_patience_s);
}

/* A free slot, waiting for one if need be; NULL when the deleter stopped. */
static DeleteBatch *
free_batch(TmsDeleter *d)
{
	TmsDeleterPrivate *p = d->priv;

	for (;;)
	{
		for (int i = 0; i < p->nslots; i++)
			if (p->batches[i].state == BATCH_FREE)
				return &p->batches[i];
		pump(d, true);
		if (d->status != TMS_DELETE_OK)
			return NULL;
	}
}

/* Delete local files at once (the io layer confines them). */
static void
delete_local(TmsDeleter *d, const char **uris, const int64 *sizes, int n)
{
	IoDeleteResult *results = palloc0(sizeof(IoDeleteResult) * n);
	TmsError	err;

	d->requests += n;
	if (io_storage_delete(d->priv->storage, uris, n, results, &err) != 0)
	{
		stop(d, TMS_DELETE_FAILED, err.http_status, NULL, NULL,
			 "could not delete files: %s", err.message);
		pfree(results);
		return;
	}
	for (int i = 0; i < n; i++)
	{
		if (results[i].deleted)
		{
			d->deleted++;
			if (sizes[i] > 0)
				d->bytes += sizes[i];
		}
		else
			refused(d, uris[i], &results[i]);
	}
	pfree(results);
}

/* ----------------------------------------------------------------
 * The interface (delete.h)
 * ----------------------------------------------------------------
 */

TmsDeleter *
tms_deleter_create(IoStorage *storage, const char *label, TmsDeleteRefusedFn refused_fn,
				   void *arg)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms deleter",
											  ALLOCSET_DEFAULT_SIZES);
	TmsDeleter *d = MemoryContextAllocZero(cxt, sizeof(TmsDeleter));
	TmsDeleterPrivate *p = MemoryContextAllocZero(cxt, sizeof(TmsDeleterPrivate));

	d->priv = p;
	d->status = TMS_DELETE_OK;
	p->cxt = cxt;
	p->storage = storage;
	p->refused = refused_fn;
	p->refused_arg = arg;
	p->nslots = Min(Max(tms_delete_concurrency, 1), MAX_SLOTS);
	p->batches = MemoryContextAllocZero(cxt, sizeof(DeleteBatch) * p->nslots);
	for (int i = 0; i < p->nslots; i++)
		p->batches[i].cxt = AllocSetContextCreate(cxt, "tms delete batch",
												  ALLOCSET_SMALL_SIZES);
	delete_pool_enter(label);
	return d;
}

bool
tms_deleter_submit(TmsDeleter *d, int level, const char *const *uris, const int64 *sizes,
				   int n)
{
	TmsDeleterPrivate *p = d->priv;
	const char **local;
	int64	   *local_sizes;
	bool	   *taken;
	int			nlocal = 0;

	if (d->status != TMS_DELETE_OK)
		return false;
	/* lower levels first: a manifest goes after its entries */
	while (any_active(d, level))
	{
		pump(d, true);
		if (d->status != TMS_DELETE_OK)
			return false;
	}

	local = palloc(sizeof(char *) * Max(n, 1));
	local_sizes = palloc(sizeof(int64) * Max(n, 1));
	taken = palloc0(sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (!is_s3(uris[i]))
		{
			local[nlocal] = uris[i];
			local_sizes[nlocal++] = sizes ? sizes[i] : -1;
			taken[i] = true;
		}
	if (nlocal > 0)
		delete_local(d, local, local_sizes, nlocal);

	/*
	 * s3: requests of at most 1000 keys of one bucket; Azure: of at most 256
	 * blobs of one container; gs: of at most 100 objects (1 with HMAC keys)
	 */
	for (int i = 0; i < n && d->status == TMS_DELETE_OK; i++)
	{
		DeleteBatch *b;
		MemoryContext old;
		size_t		blen;
		int			max;
		char		target[TMS_DELETE_TARGET_LEN];
		TmsError	err;

		if (taken[i])
			continue;
		max = Max(1, io_storage_delete_max_keys(p->storage, uris[i]));
		if (p->io == NULL && (p->io = io_deleter_create(p->storage, p->nslots, &err)) == NULL)
		{
			stop(d, TMS_DELETE_FAILED, 0, NULL, NULL, "could not delete files: %s",
				 err.message);
			break;
		}
		if ((b = free_batch(d)) == NULL)
			break;
		(void) io_delete_group(uris[i], &blen);
		old = MemoryContextSwitchTo(b->cxt);
		b->uris = palloc(sizeof(char *) * Min(n - i, max));
		b->sizes = palloc(sizeof(int64) * Min(n - i, max));
		b->n = 0;
		for (int j = i; j < n && b->n < max; j++)
			if (!taken[j] && strncmp(uris[j], uris[i], blen) == 0 &&
				bucket_prefix_len(uris[j]) == blen)
			{
				b->uris[b->n] = pstrdup(uris[j]);
				b->sizes[b->n++] = sizes ? sizes[j] : -1;
				taken[j] = true;
			}
		b->results = palloc0(sizeof(IoDeleteResult) * b->n);
		MemoryContextSwitchTo(old);
		if (io_storage_target(p->storage, b->uris[0], target, sizeof(target)) != 0)
			strlcpy(target, "s3", sizeof(target));
		b->target = delete_pool_target(target);
		b->level = level;
		b->seq = p->next_seq++;
		b->attempts = 0;
		b->refusals = 0;
		b->refreshes = 0;
		b->refresh_due = false;
		b->not_before_ms = 0;
		b->state = BATCH_READY;
	}
	pfree(local);
	pfree(local_sizes);
	pfree(taken);
	pump(d, false);
	return d->status == TMS_DELETE_OK;
}

bool
tms_deleter_drain(TmsDeleter *d)
{
	while (d->status == TMS_DELETE_OK && any_active(d, -1))
		pump(d, true);
	delete_pool_stop_waiting();
	return d->status == TMS_DELETE_OK;
}

void
tms_deleter_free(TmsDeleter *d)
{
	TmsDeleterPrivate *p;

	if (d == NULL)
		return;
	p = d->priv;

	/*
	 * the requests first (their bodies live in the io deleter), then the
	 * permits
	 */
	io_deleter_free(p->io);
	p->io = NULL;
	for (int i = 0; i < p->nslots; i++)
		if (p->batches[i].state == BATCH_IN_FLIGHT)
			delete_pool_release(p->batches[i].target, POOL_ABANDONED, p->batches[i].epoch,
								-1, 0);
	delete_pool_stop_waiting();
	MemoryContextDelete(p->cxt);
}
