/*-------------------------------------------------------------------------
 *
 * purge_walk.c
 *	  The work of a purge run between its steps: walk everything the
 *	  table's metadata reaches and delete it, bottom up, in bulk.
 *
 *	 walk		re-read the metadata file and stream every file it reaches:
 *				for each snapshot its manifest list, each manifest not seen
 *				before (a set of 64-bit path hashes: the only memory that
 *				grows with the table), each manifest's entries of every
 *				status, then statistics files, then the metadata log, and
 *				the metadata file itself last.
 *	 delete		files go to bounded queues, one per level: content files
 *				(data, deletes, statistics), manifests, manifest lists,
 *				metadata files.  A full queue of tms.purge_delete_batch_size
 *				files is handed to the run's deleter (delete.h): its bulk
 *				requests run in the background, several at once within the
 *				database's delete pool, while the walk goes on; the walk
 *				waits when every slot of the deleter is busy (back-pressure,
 *				bounded memory).  A level is only deleted after the levels
 *				below it: a manifest disappears only once its entries are
 *				gone, a list only once its manifests are, and the metadata
 *				file last, after everything else was deleted.
 *				So a run that stops anywhere leaves a table that the next
 *				run can walk again from its metadata file; what it finds
 *				missing on the way (a manifest, a list) was deleted with
 *				everything below it, and is counted, not an error.
 *
 * Safety: a file is deleted only if its canonical path (the io layer's
 * location rule) lies strictly below the table's location and strictly
 * below one of the server's allowed_locations (read again at every run);
 * anything else is counted in files_skipped, with one example.  Local
 * files are also confined by the io layer itself, which never follows a
 * symbolic link below an allowed root.  A file at or below the location of
 * another table of the server that tms knows (tms.tables; step
 * known_tables) may be that table's: it is kept and counted in files_kept,
 * with one example, unless the job says delete_other_tables_files.
 * tms.purge_table refuses a table with gc.enabled=false (purge_check.c);
 * should the metadata file say so anyway, data and delete files are kept
 * (another table may share them).  Deleting a file again is harmless:
 * not-found counts as deleted.
 *
 * Everything the plain-C layers return is malloc'd and freed in a
 * PG_FINALLY, so an interrupt or an error leaks nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "ops/delete.h"
#include "ops/purge.h"
#include "ops/purge_int.h"
#include "sched/lease.h"

/* ----------------------------------------------------------------
 * Reading: s3 through the io layer, files through src/iceberg
 * ----------------------------------------------------------------
 */

/*
 * Is the file behind a failed read missing?  Asks the storage directly,
 * so the answer does not depend on how the reader worded its error.
 */
static bool
file_missing(PurgeRun *run, const char *path)
{
	char	   *c = tms_location_canonical(run->server, path, NULL);
	uint64_t	size;
	TmsError	err;

	if (c == NULL)
		return false;
	return io_storage_size(run->storage, c, &size, &err) != 0 &&
		err.code == IO_ERR_NOT_FOUND;
}

/* What to say when the storage refused the credentials the catalog vended. */
static const char *
vended_refused(PurgeRun *run)
{
	return run->held_name != NULL ?
		" (the storage credentials the catalog vended were refused, also after getting them again through the held table)" :
		" (the storage credentials the catalog vended were refused; they may have expired, and a purge gets new ones only when the server holds the table until its files are gone: option purge_hold_namespace)";
}

/* Classify a failed read of path and record it; true if it was missing. */
static bool
read_failed(PurgeRun *run, const char *what, const char *path, const TmsError *err)
{
	if (err->code == ICEBERG_ERR_IO && file_missing(run, path))
		return true;
	if (run->vended && err->code == ICEBERG_ERR_IO &&
		(err->io_code == IO_ERR_FORBIDDEN || err->io_code == IO_ERR_UNAUTHORIZED ||
		 (err->io_code == IO_ERR_BAD_REQUEST && strstr(err->detail, "ExpiredToken") != NULL)))
		purge_run_fail(run, RUN_TERMINAL, "could not read %s \"%s\": %s%s", what, path,
					   tms_error_text(err), vended_refused(run));
	else if (err->code == ICEBERG_ERR_MALFORMED || err->code == ICEBERG_ERR_UNSUPPORTED ||
			 err->code == ICEBERG_ERR_LIMIT)
		purge_run_fail(run, RUN_TERMINAL, "cannot read %s \"%s\": %s", what, path,
					   tms_error_text(err));
	else
		purge_run_fail(run, RUN_TRANSIENT, "could not read %s \"%s\": %s", what, path,
					   tms_error_text(err));
	return false;
}

/* ----------------------------------------------------------------
 * Deleting
 * ----------------------------------------------------------------
 */

/* Credentials the catalog vended are used, and refused: say so. */
static RunResult
storage_failure_kind(PurgeRun *run, long http_status, const char *code)
{
	if (run->vended &&
		(http_status == 401 || http_status == 403 ||
		 (code && (strcmp(code, "ExpiredToken") == 0 || strcmp(code, "AccessDenied") == 0 ||
				   strcmp(code, "InvalidAccessKeyId") == 0 ||
				   strcmp(code, "TokenRefreshRequired") == 0))))
		return RUN_TERMINAL;
	return RUN_TRANSIENT;
}

/*
 * A file the storage did not delete: a local file the io layer would not
 * reach (a symbolic link on the way) is skipped, anything else fails.
 */
static bool
delete_refused(void *arg, const char *uri, const IoDeleteResult *r)
{
	PurgeRun   *run = arg;

	if (uri[0] != '/' ||
		(strcmp(r->code, "AccessDenied") != 0 && strcmp(r->code, "InvalidLocation") != 0))
		return false;
	run->skipped++;
	if (run->skipped_example == NULL)
		run->skipped_example = MemoryContextStrdup(run->cxt,
												   psprintf("%s (%s)", uri, r->message));
	return true;
}

/* The deleter's counts into the run's; false (run->result set) if it stopped. */
static bool
deleter_went_on(PurgeRun *run, bool ok)
{
	TmsDeleter *d = run->deleter;

	run->deleted = d->deleted;
	run->bytes = d->bytes;
	run->requests = d->requests;
	if (ok)
		return true;
	switch (d->status)
	{
		case TMS_DELETE_INTERRUPTED:
			CHECK_FOR_INTERRUPTS();
			if (sched_lease_lost())
				run->result = RUN_LEASE_LOST;
			else
				purge_run_fail(run, RUN_TRANSIENT, "deleting files was interrupted");
			break;
		case TMS_DELETE_THROTTLED:
			purge_run_fail(run, RUN_TRANSIENT, "%s", d->error);
			break;
		default:
			{
				RunResult	kind = storage_failure_kind(run, d->error_status, d->error_code);

				purge_run_fail(run, kind, "%s%s", d->error,
							   run->vended && kind == RUN_TERMINAL ? vended_refused(run) : "");
			}
	}
	return false;
}

/*
 * Hand one queue's files to the deleter (it deletes them in the background,
 * in bulk requests, after the queues below; see delete.h); false stops the
 * run.
 */
static bool
flush_queue(PurgeRun *run, int level)
{
	PurgeQueue *q = &run->q[level];
	bool		ok;

	if (q->n == 0)
		return run->result == RUN_OK;
	if (run->result != RUN_OK)
		return false;
	ok = tms_deleter_submit(run->deleter, level, q->uris, q->sizes, q->n);
	MemoryContextReset(q->cxt);
	q->n = 0;
	q->uris = NULL;
	q->sizes = NULL;
	if (!deleter_went_on(run, ok))
		return false;

	/* after a batch handed to the deleter: throttle, interrupts, the lease */
	if (tms_purge_batch_pause_ms > 0)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 tms_purge_batch_pause_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	if (sched_lease_lost())
	{
		run->result = RUN_LEASE_LOST;
		return false;
	}
	purge_write_progress(run, NULL, false);
	return run->result == RUN_OK;
}

/* Wait until every file handed over is deleted; false stops the run. */
static bool
drain(PurgeRun *run)
{
	if (run->result != RUN_OK)
		return false;
	return deleter_went_on(run, tms_deleter_drain(run->deleter));
}

/* Empty the queues up to level, lowest first. */
static bool
flush_upto(PurgeRun *run, int level)
{
	for (int i = 0; i <= level; i++)
		if (!flush_queue(run, i))
			return false;
	return true;
}

/*
 * Is canonical path at or below the location of another table tms knows
 * (see known_tables)?  Then it may be that table's file.
 */
static const char *
other_table_at(PurgeRun *run, const char *c)
{
	for (int i = 0; i < run->nothers; i++)
		if (io_location_under(c, run->others[i]))
			return run->others[i];
	return NULL;
}

/*
 * Queue path for deletion at level, if it may be deleted; a full queue is
 * flushed with the ones below it.  false stops the run.
 */
static bool
queue_file(PurgeRun *run, int level, const char *path, int64 size)
{
	PurgeQueue *q = &run->q[level];
	char	   *c;
	const char *other;
	bool		ok = false;
	MemoryContext old;

	if (path == NULL)
		return true;
	old = MemoryContextSwitchTo(q->cxt);
	c = tms_location_canonical(run->server, path, NULL);
	ok = c != NULL && io_location_under(c, run->location) &&
		tms_location_allowed(run->server, c);
	if (!ok)
	{
		MemoryContextSwitchTo(old);
		run->skipped++;
		if (run->skipped_example == NULL)
			run->skipped_example =
				MemoryContextStrdup(run->cxt,
									psprintf("%s (%s)", path,
											 c == NULL ? "cannot be resolved" :
											 !io_location_under(c, run->location)
											 ? "not below the table location"
											 : "not below the allowed_locations"));
		return true;
	}
	if (!run->delete_others && (other = other_table_at(run, c)) != NULL)
	{
		MemoryContextSwitchTo(old);
		run->kept++;
		if (run->kept_example == NULL)
			run->kept_example =
				MemoryContextStrdup(run->cxt,
									psprintf("%s (under \"%s\", the location of another table of the server)",
											 path, other));
		return true;
	}
	if (q->uris == NULL)
	{
		q->uris = palloc(sizeof(char *) * tms_purge_delete_batch_size);
		q->sizes = palloc(sizeof(int64) * tms_purge_delete_batch_size);
	}
	q->uris[q->n] = c;
	q->sizes[q->n] = size;
	q->n++;
	MemoryContextSwitchTo(old);
	if (q->n >= tms_purge_delete_batch_size)
		return flush_upto(run, level);
	return true;
}


/* ----------------------------------------------------------------
 * The walk
 * ----------------------------------------------------------------
 */

/* First time this manifest path is seen in the run? */
static bool
first_sight(PurgeRun *run, const char *path)
{
	uint64		h = hash_bytes_extended((const unsigned char *) path, strlen(path), 0);
	bool		found;

	(void) hash_search(run->seen, &h, HASH_ENTER, &found);
	return !found;
}

/* One manifest: its entries to the content queue (or counted as kept). */
static bool
walk_manifest(PurgeRun *run, const IcebergManifestFile *mf)
{
	const IcebergManifestEntry *e;
	TmsError	err;
	int			rc;

	if (!iceberg_manifest_open(&run->fio, mf, run->md->format_version, 0, &run->mr, &err))
	{
		run->mr = NULL;
		if (read_failed(run, "manifest", mf->manifest_path, &err))
		{
			run->unreadable++;
			return true;
		}
		return false;
	}
	while ((rc = iceberg_manifest_next(run->mr, &e, &err)) == 1)
	{
		if (!run->gc_enabled)
			run->kept++;
		else if (!queue_file(run, Q_CONTENT, e->file_path, e->file_size_in_bytes))
			break;
	}
	iceberg_manifest_close(run->mr);
	run->mr = NULL;
	if (rc < 0)
	{
		purge_run_fail(run, err.code == ICEBERG_ERR_IO || err.code == ICEBERG_ERR_CANCELLED
					   ? RUN_TRANSIENT : RUN_TERMINAL,
					   "could not read manifest \"%s\": %s", mf->manifest_path,
					   tms_error_text(&err));
		return false;
	}
	return run->result == RUN_OK;
}

/* One snapshot: its new manifests (and their entries), then its list. */
static bool
walk_snapshot(PurgeRun *run, const IcebergSnapshot *s)
{
	const IcebergManifestFile *mf;
	TmsError	err;
	int			rc;

	if (!iceberg_manifest_list_open(&run->fio, run->md, s, &run->lr, &err))
	{
		run->lr = NULL;
		if (s->manifest_list != NULL &&
			read_failed(run, "manifest list", s->manifest_list, &err))
		{
			run->unreadable++;
			return true;
		}
		if (s->manifest_list == NULL)
			purge_run_fail(run, RUN_TERMINAL, "cannot read the manifests of snapshot %lld: %s",
						   (long long) s->snapshot_id, tms_error_text(&err));
		return false;
	}
	while ((rc = iceberg_manifest_list_next(run->lr, &mf, &err)) == 1)
	{
		if (!first_sight(run, mf->manifest_path))
			continue;
		if (!walk_manifest(run, mf) ||
			!queue_file(run, Q_MANIFESTS, mf->manifest_path, mf->manifest_length))
			break;
	}
	iceberg_manifest_list_close(run->lr);
	run->lr = NULL;
	if (rc < 0)
	{
		purge_run_fail(run, err.code == ICEBERG_ERR_IO || err.code == ICEBERG_ERR_CANCELLED
					   ? RUN_TRANSIENT : RUN_TERMINAL,
					   "could not read manifest list \"%s\": %s",
					   s->manifest_list ? s->manifest_list : "(inline)",
					   tms_error_text(&err));
		return false;
	}
	if (run->result != RUN_OK)
		return false;
	return queue_file(run, Q_LISTS, s->manifest_list, -1);
}

/* Strip trailing slashes (but keep a lone "/"), in place. */
static char *
trim_slashes(char *s)
{
	size_t		n = strlen(s);

	while (n > 1 && s[n - 1] == '/')
		s[--n] = '\0';
	return s;
}

/*
 * Step: the locations of the other tables of the server that tms knows
 * (tms.tables, not dropped; neither this table nor its held entry) which
 * lie at or below this table's location.  A table's location is read off
 * the metadata location tms recorded for it: the directory holding its
 * metadata/ directory (Iceberg's layout:
 * https://iceberg.apache.org/spec/#file-system-operations), else, for a
 * table with write.metadata.path, the metadata file's directory.
 */
static void
step_known_tables(void *arg)
{
	PurgeRun   *run = arg;
	Oid			types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	char	   *loc;
	int			rc;

	args[0] = CStringGetTextDatum(run->server_name);
	args[1] = CStringGetTextDatum(run->ns);
	args[2] = CStringGetTextDatum(run->table);
	if (run->held_name)
	{
		args[3] = CStringGetTextDatum(run->held_ns);
		args[4] = CStringGetTextDatum(run->held_name);
	}
	else
		nulls[3] = nulls[4] = 'n';
	rc = SPI_execute_with_args("SELECT metadata_location FROM tms.tables"
							   " WHERE server = $1::name AND dropped_at IS NULL"
							   "   AND metadata_location IS NOT NULL"
							   "   AND (namespace, table_name) <> ($2, $3)"
							   "   AND (namespace, table_name) IS DISTINCT FROM ($4, $5)",
							   5, types, args, nulls, true, 0);
	MemoryContextSwitchTo(run->cxt);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read the tables tms knows: %s", SPI_result_code_string(rc));
	loc = trim_slashes(pstrdup(run->location));
	run->nothers = 0;
	run->others = palloc(sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *ml = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		char	   *c = tms_location_canonical(run->server, ml, NULL);
		char	   *slash;

		if (c == NULL || (slash = strrchr(c, '/')) == NULL || slash == c)
			continue;
		*slash = '\0';
		slash = strrchr(c, '/');
		if (slash != NULL && slash != c && strcmp(slash, "/metadata") == 0)
			*slash = '\0';
		trim_slashes(c);
		if (strcmp(c, loc) == 0 || io_location_under(c, loc))
			run->others[run->nothers++] = c;
	}
}

/* Build the storage and the FileIO of the run. */
static bool
open_storage(PurgeRun *run)
{
	TmsError	err;

	run->storage = tms_storage_open(run->server, &run->creds, run->vended_kv,
									run->nvended, &err);
	if (run->storage == NULL)
	{
		purge_run_fail(run, RUN_TERMINAL, "cannot set up storage access: %s", err.message);
		return false;
	}
	/* vended credentials that expire: new ones through the held entry */
	if (run->held_name != NULL && run->conn != NULL)
		tms_storage_refresh_through(run->storage, run->conn,
									tms_namespace_to_io(run->held_ns), run->held_name,
									run->location);
	tms_table_fileio(&run->tio, run->server, run->storage, &run->fio);
	run->deleter = tms_deleter_create(run->storage,
									  psprintf("purge job " INT64_FORMAT, run->job_id),
									  delete_refused, run);
	return true;
}

/*
 * The work of one run between its begin and finish steps; sets
 * run->result and run->error.
 */
static pg_noinline void
run_walk(PurgeRun *run)
{
	TmsError	err;
	const char *gc;
	HASHCTL		ctl;

	if (!open_storage(run))
		return;
	sched_owner_step(step_known_tables, run);
	if (!iceberg_metadata_read(&run->fio, run->metadata_location, &run->md, &err))
	{
		run->md = NULL;
		if (err.code == ICEBERG_ERR_IO && file_missing(run, run->metadata_location))
		{
			if (run->phase && strcmp(run->phase, "metadata") == 0)
				return;			/* a previous run got to the very end */
			purge_run_fail(run, RUN_TERMINAL, "metadata file \"%s\" does not exist",
						   run->metadata_location);
		}
		else
			(void) read_failed(run, "metadata file", run->metadata_location, &err);
		return;
	}
	gc = iceberg_metadata_property(run->md, "gc.enabled");
	run->gc_enabled = !(gc && pg_strcasecmp(gc, "false") == 0);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(uint64);
	ctl.hcxt = run->cxt;
	run->seen = hash_create("tms purge manifests", 1024, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	purge_write_progress(run, "content", true);
	for (int i = 0; i < run->md->nsnapshots && run->result == RUN_OK; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!walk_snapshot(run, &run->md->snapshots[i]))
			break;
	}
	if (run->result != RUN_OK)
		return;
	for (int i = 0; i < run->md->nstatistics && run->gc_enabled; i++)
		if (!queue_file(run, Q_CONTENT, run->md->statistics[i].path,
						run->md->statistics[i].file_size_in_bytes))
			return;
	for (int i = 0; i < run->md->npartition_statistics && run->gc_enabled; i++)
		if (!queue_file(run, Q_CONTENT, run->md->partition_statistics[i].path,
						run->md->partition_statistics[i].file_size_in_bytes))
			return;
	if (!flush_upto(run, Q_LISTS) || !drain(run))
		return;

	purge_write_progress(run, "metadata-log", true);
	for (int i = 0; i < run->md->nmetadata_log; i++)
		if (strcmp(run->md->metadata_log[i].metadata_file, run->metadata_location) != 0 &&
			!queue_file(run, Q_METADATA, run->md->metadata_log[i].metadata_file, -1))
			return;
	if (!flush_upto(run, Q_METADATA) || !drain(run))
		return;

	/* the metadata file itself, last: until now a retry can start over */
	purge_write_progress(run, "metadata", true);
	if (run->result != RUN_OK)
		return;
	if (queue_file(run, Q_METADATA, run->metadata_location, -1) &&
		flush_upto(run, Q_METADATA))
		(void) drain(run);
}

/* Free what the plain-C layers gave the run. */
static pg_noinline void
run_cleanup(PurgeRun *run)
{
	if (run->mr)
		iceberg_manifest_close(run->mr);
	if (run->lr)
		iceberg_manifest_list_close(run->lr);
	if (run->md)
		iceberg_metadata_free(run->md);
	/* the deleter's requests use the storage: they go first */
	tms_deleter_free(run->deleter);
	run->deleter = NULL;
	if (run->storage)
		io_storage_free(run->storage);
	run->mr = NULL;
	run->lr = NULL;
	run->md = NULL;
	run->storage = NULL;
	for (int i = 0; i < run->nvended; i++)
		explicit_bzero(run->vended_kv[i].value, strlen(run->vended_kv[i].value));
}

/* Walk and delete, freeing the plain-C objects whatever happens. */
void
purge_walk(PurgeRun *run)
{
	PG_TRY();
	{
		run_walk(run);
	}
	PG_CATCH();
	{
		run_cleanup(run);
		PG_RE_THROW();
	}
	PG_END_TRY();
	run_cleanup(run);
}
