/*-------------------------------------------------------------------------
 *
 * maint_commit.c
 *	  The commit protocol of a maintenance job's local operation, and its
 *	  recovery: what an attempt writes (maint_write_file), what a resumed
 *	  job found in phase "commit" decides from its commit state
 *	  (maint_state_written, maint_drop_stale_written), and the deletion of
 *	  what a certainly failed attempt wrote.  The life of a job is maint.c.
 *
 * The commit protocol (maint_commit): before a request is sent, the job
 * records phase "commit" and what the attempt wrote and expects
 * (commit_state).  The body carries assert-table-uuid and
 * assert-ref-snapshot-id, so it can land at most once.
 *	 200		landed.
 *	 409		certainly failed: the files it wrote are deleted; the
 *				operation reloads, plans again and retries (at most
 *				tms.maintenance_commit_retries times, with backoff).
 *	 5xx, a timeout, a broken connection: unknown.  The table is loaded
 *				again: the attempt's effect is there (landed); main moved
 *				elsewhere (the requirement can no longer hold: certainly
 *				failed); main unchanged: the same body is sent again (if
 *				the first lands first, the second fails its requirement,
 *				and the reload after it finds the effect).  Still unknown
 *				after the retries: the run fails, the written files stay
 *				(a later run or orphan cleanup removes them once they are
 *				old), and nothing is deleted.
 *	 400 on a v2 table whose last-sequence-number moved since the plan:
 *				certainly failed, and a conflict: a commit to another
 *				branch landed first (main's requirement still held), and the
 *				catalog refuses the snapshot's sequence number, no longer
 *				above the table's last one, with 400 where it means 409
 *				(Iceberg's TableMetadata.Builder.addSnapshot check, see
 *				https://github.com/apache/iceberg/issues/15001); handled as
 *				409 after the table is loaded again to find that out.
 *	 other 4xx	certainly failed; the run fails.
 * Files are deleted only after a commit is known to have landed; what a
 * certainly failed attempt wrote is deleted through maint_delete (maint.c),
 * below the table's location and one of the server's allowed locations.
 * Nothing called from the plain-C layer (maint_write_file) raises.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "ops/maint_int.h"
#include "sched/lease.h"

/*
 * The IcebergWriter of a run that writes table files (compaction, manifest
 * rewrite): a path the location rule puts below the table location and an
 * allowed location is written through storage; any other is refused.
 * Called from the plain-C layer: nothing raises.
 */
int
maint_write_file(void *arg, const char *path, const void *data, size_t len, TmsError *err)
{
	MaintRun   *run = arg;
	MemoryContext cxt = CurrentMemoryContext;
	volatile int rc = -1;

	PG_TRY();
	{
		char	   *c = tms_location_canonical(run->conn->server, path, NULL);

		if (c == NULL || !io_location_under(c, run->location) ||
			!tms_location_allowed(run->conn->server, c))
		{
			memset(err, 0, sizeof(*err));
			err->code = IO_ERR_FORBIDDEN;
			snprintf(err->message, sizeof(err->message),
					 "refused to write \"%s\": not below the table location and an allowed location",
					 path);
		}
		else
			rc = io_storage_write(run->storage, c, data, len, err);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		memset(err, 0, sizeof(*err));
		err->code = IO_ERR_OUT_OF_MEMORY;
		snprintf(err->message, sizeof(err->message), "out of memory");
		rc = -1;
	}
	PG_END_TRY();
	return rc;
}

/* The MaintLandedFn of a commit adding one snapshot: arg, its int64 id. */
bool
maint_snapshot_landed(void *arg, const IcebergTableMetadata *md)
{
	return iceberg_metadata_snapshot(md, *(const int64 *) arg) != NULL;
}

/* The "written" array of a job's commit state (palloc'd; none: *n = 0). */
char	  **
maint_state_written(Jsonb *cs, int *nwritten)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&cs->root, "written", 7, NULL);
	char	  **written = NULL;

	*nwritten = 0;
	if (v && v->type == jbvBinary)
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	item;
		JsonbIteratorToken tok;

		written = palloc(sizeof(char *) * (JsonContainerSize(v->val.binary.data) + 1));
		while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
			if (tok == WJB_ELEM && item.type == jbvString)
				written[(*nwritten)++] = pnstrdup(item.val.string.val, item.val.string.len);
	}
	return written;
}

/*
 * A resumed job whose snapshot did not land: if main moved away from the
 * snapshot the old request asserted (base), that request can never land
 * and what it wrote is deleted; else it is kept (orphan cleanup).
 */
void
maint_drop_stale_written(MaintRun *run, int64 base, char **written, int nwritten)
{
	const IcebergRef *r = iceberg_metadata_ref(run->md, "main");
	int64		main_id = r ? r->snapshot_id : run->md->current_snapshot_id;

	if (main_id != base)
		maint_delete_written(run, written, nwritten);
}

/*
 * Delete what a commit attempt wrote, once it certainly failed.  The
 * counters do not count them: they were never part of the table.
 */
void
maint_delete_written(MaintRun *run, char **written, int nwritten)
{
	int64		deleted = run->files_deleted;
	int64		bytes = run->bytes_deleted;
	MaintResult saved = run->result;
	char		error[sizeof(run->error)];

	if (run->dry_run || nwritten == 0)
		return;
	memcpy(error, run->error, sizeof(error));
	run->result = MAINT_OK;
	run->ignore_cancel = true;
	for (int i = 0; i < nwritten && run->result == MAINT_OK; i++)
		(void) maint_delete(run, written[i], -1, "written");
	(void) maint_delete_flush(run);
	run->ignore_cancel = false;
	if (run->result != MAINT_OK && run->result != MAINT_LEASE_LOST)
		ereport(LOG,
				(errmsg("maintenance job " INT64_FORMAT " could not delete the files of a failed commit: %s",
						run->job_id, run->error)));
	if (run->result != MAINT_LEASE_LOST)
	{
		run->result = saved;
		memcpy(run->error, error, sizeof(error));
	}
	run->files_deleted = deleted;
	run->bytes_deleted = bytes;
}

/* ----------------------------------------------------------------
 * The commit protocol (see the file header)
 * ----------------------------------------------------------------
 */

/* Backoff before retry n (1-based): 100 ms doubling, at most 5 s. */
static void
commit_backoff(int n)
{
	long		ms = Min(100L << Min(n - 1, 6), 5000L);

	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
					 PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* main's snapshot id in md, -1: none */
static int64
main_snapshot(const IcebergTableMetadata *md)
{
	const IcebergRef *r = iceberg_metadata_ref(md, "main");

	return r ? r->snapshot_id : md->current_snapshot_id;
}

MaintCommitOutcome
maint_commit(MaintRun *run, const char *body, const char *commit_state,
			 char **written, int nwritten, int64 base_snapshot_id,
			 MaintLandedFn landed, void *arg)
{
	IoLoadedTable out;
	TmsError	err;
	int64		planned_seq = run->md != NULL ? run->md->last_sequence_number : 0;

	if (!maint_record_phase(run, "commit", commit_state))
		return MAINT_COMMIT_FAILED;
	for (int attempt = 0;; attempt++)
	{
		int			rc;

		if (attempt == 0 && !maint_check_now(run))
		{
			/* cancelled (or the lease lost) before anything was sent */
			if (run->result == MAINT_CANCELLED)
			{
				maint_delete_written(run, written, nwritten);
				(void) maint_record_phase(run, "start", NULL);
			}
			return MAINT_COMMIT_FAILED;
		}
		if (attempt > 0)
		{
			/* an unknown outcome is resolved before a cancel is honoured */
			CHECK_FOR_INTERRUPTS();
			if (sched_lease_lost())
			{
				run->result = MAINT_LEASE_LOST;
				return MAINT_COMMIT_FAILED;
			}
		}
		run->commit_attempts++;
		memset(&out, 0, sizeof(out));
		rc = io_catalog_commit_table(run->conn->catalog, run->ns_io, run->table, body, &out, &err);
		io_loaded_table_free(&out);
		CHECK_FOR_INTERRUPTS();
		if (rc == 0)
			break;
		if (err.code == IO_ERR_CONFLICT)
		{
			maint_delete_written(run, written, nwritten);
			if (!maint_record_phase(run, "start", NULL))
				return MAINT_COMMIT_FAILED;
			return MAINT_COMMIT_RETRY;
		}
		if (err.code != IO_ERR_COMMIT_STATE_UNKNOWN && err.code != IO_ERR_TIMEOUT &&
			err.code != IO_ERR_CONNECT && err.code != IO_ERR_UNAVAILABLE &&
			err.code != IO_ERR_SERVER)
		{
			/* the catalog answered no: nothing landed */
			maint_delete_written(run, written, nwritten);
			(void) maint_record_phase(run, "start", NULL);
			if (err.code == IO_ERR_BAD_REQUEST && planned_seq > 0)
			{
				/* a sequence number overtaken by a commit elsewhere? */
				if (!maint_load(run))
					return MAINT_COMMIT_FAILED;
				if (run->md->last_sequence_number != planned_seq)
					return MAINT_COMMIT_RETRY;
			}
			maint_fail_code(run, MAINT_TERMINAL, tms_error_sqlstate(&err),
							"the catalog refused the commit: %s", tms_error_text(&err));
			return MAINT_COMMIT_FAILED;
		}

		/* unknown: learn from the table whether it landed */
		if (!maint_load(run))
			return MAINT_COMMIT_FAILED;
		if (landed(arg, run->md))
			return maint_record_phase(run, "cleanup", commit_state) ?
				MAINT_COMMIT_LANDED : MAINT_COMMIT_FAILED;
		if (main_snapshot(run->md) != base_snapshot_id)
		{
			/* main moved elsewhere: the requirement can never hold again */
			maint_delete_written(run, written, nwritten);
			if (!maint_record_phase(run, "start", NULL))
				return MAINT_COMMIT_FAILED;
			return MAINT_COMMIT_RETRY;
		}
		if (attempt >= tms_maintenance_commit_retries)
		{
			maint_fail_code(run, MAINT_TRANSIENT, tms_error_sqlstate(&err),
							"the outcome of the commit is unknown after %d attempts (%s); nothing was deleted",
							attempt + 1, tms_error_text(&err));
			return MAINT_COMMIT_FAILED;
		}
		commit_backoff(attempt + 1);
	}
	/* landed: the table after it */
	if (!maint_load(run))
	{
		/* it landed; the cleanup is done by the retry, from commit_state */
		(void) maint_record_phase(run, "cleanup", commit_state);
		return MAINT_COMMIT_FAILED;
	}
	if (!landed(arg, run->md))
	{
		/* answered 200 and not visible: a catalog we cannot trust */
		maint_fail(run, MAINT_TERMINAL,
				   "the catalog accepted the commit but the table does not show it; nothing was deleted");
		return MAINT_COMMIT_FAILED;
	}
	return maint_record_phase(run, "cleanup", commit_state) ?
		MAINT_COMMIT_LANDED : MAINT_COMMIT_FAILED;
}

/* Let the operation run out its retries of a conflicting commit. */
bool
maint_commit_retry_allowed(MaintRun *run, int retry)
{
	if (retry > tms_maintenance_commit_retries)
	{
		maint_fail(run, MAINT_TRANSIENT,
				   "the commit conflicted with concurrent commits %d times", retry);
		return false;
	}
	commit_backoff(retry);
	return maint_check_now(run);
}

/* See maint_int.h: attempts until one does not conflict. */
void
maint_commit_attempts(MaintRun *run, MaintAttemptFn attempt)
{
	for (int retry = 1;; retry++)
	{
		if (attempt(run) != MAINT_COMMIT_RETRY || run->result != MAINT_OK)
			return;

		/*
		 * a concurrent commit won, or the loaded table was out of date: look
		 * again
		 */
		if (!maint_commit_retry_allowed(run, retry) || !maint_load(run))
			return;
	}
}

/* See maint_int.h: where a resumed job that wrote files stands. */
MaintResumed
maint_resume_written(MaintRun *run, Jsonb **cs)
{
	int64		id;
	int64		base;
	char	  **written;
	int			nwritten;

	*cs = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(run->commit_state)));
	id = maint_json_int(*cs, "snapshot_id");
	base = maint_json_int(*cs, "base_snapshot");
	if (id < 0)
	{
		maint_fail(run, MAINT_TERMINAL, "the job's commit state has no snapshot id");
		return MAINT_RESUMED_STOP;
	}
	written = maint_state_written(*cs, &nwritten);
	if (!maint_load(run))
		return MAINT_RESUMED_STOP;
	if (strcmp(run->phase, "cleanup") == 0 || maint_snapshot_landed(&id, run->md))
	{
		run->after_snapshot_id = id;
		return MAINT_RESUMED_LANDED;
	}
	maint_drop_stale_written(run, base, written, nwritten);
	return maint_record_phase(run, "start", NULL) ? MAINT_RESUMED_AGAIN : MAINT_RESUMED_STOP;
}

/* See maint_int.h: an attempt whose files could not all be written. */
MaintCommitOutcome
maint_unsent(MaintRun *run, const TmsError *err, const char *what,
			 char **written, int nwritten)
{
	MaintCommitOutcome outcome = MAINT_COMMIT_FAILED;

	if (err->code == ICEBERG_ERR_CONFLICT || maint_moved_on(run, err))
		outcome = MAINT_COMMIT_RETRY;
	else
		maint_fail_iceberg(run, what, err);
	/* nothing was sent: what was written is certainly unused */
	if (run->result != MAINT_LEASE_LOST)
		maint_delete_written(run, written, nwritten);
	return outcome;
}
