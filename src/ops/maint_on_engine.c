/*-------------------------------------------------------------------------
 *
 * maint_on_engine.c
 *	  A maintenance job on an engine server (a tms_engine server of type
 *	  livy, trino or gravitino): build the statement, submit it under the
 *	  job's tag, track the run, record what it did.  The job lifecycle
 *	  around it (start, the acting role, the table before and after, the
 *	  finish, the baseline) is maint.c's, the same as for local jobs.
 *
 * At most one engine run per job, whatever dies when:
 *	 submit		(step) a Gravitino server's job templates are read first:
 *				one it does not offer fails the job, nothing sent.  Phase
 *				"submit", the statement, submitted_at and the table's
 *				snapshot (submit_snapshot_id) are recorded and
 *				committed before anything is sent, and only while no cancel
 *				was requested (a cancel requested before it: nothing is ever
 *				sent, the job ends cancelled).  The tag "tms-job-<id>"
 *				travels with the run (Livy's session name, Trino's client
 *				tag, Gravitino's jobConf "tms_tag").  A submit that certainly
 *				did not arrive clears the marker (phase "start"): the next
 *				attempt starts afresh.
 *	 engine		(step) once the engine accepted it: phase "engine" and the
 *				engine's id of the run (engine_job_id; Livy's "<session>/"
 *				until the statement is posted, which may then have arrived).
 *	 resume		a job found in phase "submit" or "engine" (its executor
 *				died, or a submit's answer was lost) may have a run, and is
 *				never submitted again: it follows the run the engine still
 *				knows (its recorded id, else its tag); a run the engine does
 *				not know (none of its tag, or forgotten: a restarted engine)
 *				is the table's to tell (resolve_from_table).  A request of
 *				the dead executor may still be on its way (a submit, or
 *				Livy's statement post): before looking, the resumed run
 *				waits out one request_timeout, the longest such a request
 *				lives, so that what it finds is as final as it can be.
 *	 table		the snapshots of main after submit_snapshot_id, read through
 *				the catalog: one whose summary names the run (a value that
 *				is the job's tag; Trino's trino_query_id) or, for a rewrite,
 *				one of operation "replace" (one job per table and operation
 *				runs at a time) is the run's commit: the job succeeded, with
 *				it as the snapshot after.  Nothing there proves nothing: a
 *				late request may still land, so the job fails, "outcome ...
 *				is unknown" (SQLSTATE 08007), with a DETAIL naming the job,
 *				its tag and run, and a HINT.
 *	 track		polls with backoff (the server's poll_interval, doubling),
 *				between polls the lease, interrupts and a cancel request
 *				(tms.cancel_operation: sent to the engine, then the run is
 *				followed to its end); past the server's run_timeout (or
 *				tms.engine_run_timeout) the run is cancelled at the engine
 *				and the job fails.  An engine that does not answer is
 *				retried by the client; when it still does not, the job is
 *				retried later (the scheduler's backoff, up to
 *				tms.maintenance_max_attempts) and then fails with the
 *				engine's message.
 *	 record		what the run did decides the job, not what was requested: a
 *				run that succeeded is succeeded, cancel or not; one the
 *				engine reports cancelled is succeeded when the table shows
 *				its commit, else cancelled.  The procedure's result rows
 *				become the job's counts; the engine's resources are released
 *				(Livy: the session).
 *
 * What a run did to the table is also what tms sees afterwards: maint.c
 * loads the table again and records the after-snapshot and its metrics.
 *
 * Retention (and tms.delete_rows) is no procedure: its statement is a
 * DELETE FROM ... WHERE whose predicate maint_retention.c prints from the
 * filter bound to the table as loaded for this run (build_delete); a
 * resumed job follows the statement it recorded and never prints a new
 * one (the cutoff of an age would have moved).  Trino's update count is
 * kept for maint_retention_engine_done, which records the rows removed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "bridge/engine_server.h"
#include "bridge/errors.h"
#include "bridge/role.h"
#include "bridge/names.h"
#include "bridge/fdw_options.h"
#include "bridge/settings.h"
#include "foreign/foreign.h"
#include "ops/maint.h"
#include "ops/maint_int.h"
#include "sched/lease.h"

/* How long one wait on the engine lasts between two checks of the job. */
#define ENGINE_SLICE_MS 1000
/* Consecutive unanswered polls before the job is given up for now. */
#define ENGINE_MAX_POLL_ERRORS 5

typedef struct OpenStep
{
	MaintRun   *run;
	TmsEngine  *engine;
} OpenStep;

static void
step_open(void *arg)
{
	OpenStep   *o = arg;
	TmsRoleSave save;

	tms_become_role(o->run->acting,
					psprintf("maintenance job " INT64_FORMAT, o->run->job_id), &save);
	o->engine = tms_engine_open(o->run->engine_name);
	tms_restore_role(&save);
}

typedef struct RecordStep
{
	MaintRun   *run;
	const char *phase;
	const char *statement;		/* NULL: unchanged */
	const char *engine_job_id;	/* NULL: unchanged */
	bool		counts;			/* also the engine's counts */
	bool		written;
} RecordStep;

static void
step_record(void *arg)
{
	RecordStep *r = arg;
	MaintRun   *run = r->run;
	Oid			types[12] = {INT8OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID,
	BOOLOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		args[12];
	char		nulls[12];
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(r->phase);
	if (r->statement)
		args[4] = CStringGetTextDatum(r->statement);
	else
		nulls[4] = 'n';
	if (r->engine_job_id)
		args[5] = CStringGetTextDatum(r->engine_job_id);
	else
		nulls[5] = 'n';
	args[6] = BoolGetDatum(r->counts);
	args[7] = Int64GetDatum(run->data_files_rewritten);
	args[8] = Int64GetDatum(run->data_files_added);
	args[9] = Int64GetDatum(run->bytes_rewritten);
	args[10] = Int64GetDatum(run->delete_files_rewritten);
	args[11] = Int64GetDatum(run->delete_files_added);
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET phase = $4, statement = coalesce($5, statement),"
							   "       engine_job_id = coalesce($6, engine_job_id),"
							   "       data_files_rewritten = CASE WHEN $7 THEN $8 ELSE data_files_rewritten END,"
							   "       data_files_added = CASE WHEN $7 THEN $9 ELSE data_files_added END,"
							   "       bytes_rewritten = CASE WHEN $7 THEN $10 ELSE bytes_rewritten END,"
							   "       delete_files_rewritten = CASE WHEN $7 THEN $11 ELSE delete_files_rewritten END,"
							   "       delete_files_added = CASE WHEN $7 THEN $12 ELSE delete_files_added END,"
							   "       submitted_at = CASE WHEN $4 = 'start' THEN NULL ELSE submitted_at END,"
							   "       submit_snapshot_id = CASE WHEN $4 = 'start' THEN NULL"
							   "                                 ELSE submit_snapshot_id END"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
							   12, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the engine run of a maintenance job: %s",
			 SPI_result_code_string(rc));
	r->written = SPI_processed == 1;
}

static bool
record(MaintRun *run, const char *phase, const char *statement,
	   const char *engine_job_id, bool counts)
{
	RecordStep	r = {run, phase, statement, engine_job_id, counts, false};

	sched_owner_step(step_record, &r);
	if (!r.written)
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	run->phase = pstrdup(phase);
	return true;
}

typedef struct SubmitStep
{
	MaintRun   *run;
	const char *statement;
	bool		written;		/* out */
	bool		cancel;			/* out: a cancel was requested first */
	char	   *submitted_at;	/* out */
} SubmitStep;

/*
 * The marker of a run that may exist: phase "submit", the statement, when
 * and on which snapshot, committed before anything is sent; never when a
 * cancel was requested (the row lock orders this against
 * tms._cancel_operation: a cancel committed first is seen here, one
 * committed after sees phase "submit" and reaches the run at the engine).
 */
static void
step_submit(void *arg)
{
	SubmitStep *sub = arg;
	MaintRun   *run = sub->run;
	Oid			types[5] = {INT8OID, TEXTOID, INT8OID, TEXTOID, INT8OID};
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(sub->statement);
	if (run->before_snapshot_id >= 0)
		args[4] = Int64GetDatum(run->before_snapshot_id);
	else
		nulls[4] = 'n';
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET phase = 'submit', statement = $4, engine_job_id = NULL,"
							   "       submitted_at = now(), submit_snapshot_id = $5"
							   " WHERE id = $1 AND state = 'running' AND NOT cancel_requested AND"
							   LEASE_HELD
							   " RETURNING submitted_at::text",
							   5, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record the submission of a maintenance job: %s",
			 SPI_result_code_string(rc));
	sub->written = SPI_processed == 1;
	if (sub->written)
	{
		sub->submitted_at = MemoryContextStrdup(run->cxt,
												SPI_getvalue(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1));
		return;
	}
	rc = SPI_execute_with_args("SELECT cancel_requested FROM tms.table_maintenance_job"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
							   3, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read a maintenance job: %s", SPI_result_code_string(rc));
	sub->cancel = SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Record that a run may start now; false (run->result: cancelled, or the
 * lease lost) when nothing may be sent.
 */
static bool
record_submit(MaintRun *run, const char *statement)
{
	SubmitStep	sub = {run, statement, false, false, NULL};

	sched_owner_step(step_submit, &sub);
	if (sub.cancel)
	{
		maint_fail(run, MAINT_CANCELLED, "cancelled before it was submitted to engine \"%s\"",
				   run->engine_name);
		return false;
	}
	if (!sub.written)
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	run->phase = pstrdup("submit");
	run->submitted_at = sub.submitted_at;
	run->submit_snapshot_id = run->before_snapshot_id;
	return true;
}

/*
 * What the table shows of the run, read through the catalog: the newest
 * snapshot committed since the submit's snapshot (an ancestor of main)
 * that names the run (a summary value that is the job's tag; Trino's
 * trino_query_id, the run's id) or, for a rewrite (compaction, manifest
 * or position-delete rewrite), that is a "replace" (one job per table and
 * operation runs at a time).  Anything else proves nothing.
 */
typedef enum TableVerdict
{
	TABLE_COMMITTED,			/* *snapshot_id: the run's commit */
	TABLE_UNPROVEN,
	TABLE_UNREADABLE			/* run->result: the load's failure */
} TableVerdict;

static bool
summary_names_run(const IcebergSnapshot *s, const char *tag, const char *run_id)
{
	for (int k = 0; k < s->nsummary; k++)
	{
		const char *v = s->summary[k].value;

		if (v == NULL)
			continue;
		if (strcmp(v, tag) == 0)
			return true;
		if (run_id && run_id[0] && strcmp(s->summary[k].key, "trino_query_id") == 0 &&
			strcmp(v, run_id) == 0)
			return true;
	}
	return false;
}

static TableVerdict
table_shows_run(MaintRun *run, const char *tag, const char *run_id, int64 *snapshot_id)
{
	const IcebergRef *main_ref;
	int64		id;
	int64		replace = -1;
	bool		rewrite = run->opt.op == MAINT_COMPACTION || run->opt.op == MAINT_REWRITE ||
	run->opt.op == MAINT_POSDELETE;

	if (!maint_load(run))
		return TABLE_UNREADABLE;
	main_ref = iceberg_metadata_ref(run->md, "main");
	id = main_ref ? main_ref->snapshot_id : run->md->current_snapshot_id;
	for (int steps = 0; id >= 0 && id != run->submit_snapshot_id &&
		 steps <= run->md->nsnapshots; steps++)
	{
		const IcebergSnapshot *s = iceberg_metadata_snapshot(run->md, id);

		if (s == NULL)
			break;
		if (summary_names_run(s, tag, run_id))
		{
			*snapshot_id = s->snapshot_id;
			return TABLE_COMMITTED;
		}
		if (rewrite && replace < 0 && s->operation && strcmp(s->operation, "replace") == 0)
			replace = s->snapshot_id;
		id = s->parent_snapshot_id;
	}
	/* only what is known to come after the submit's snapshot counts */
	if (replace >= 0 && id == run->submit_snapshot_id)
	{
		*snapshot_id = replace;
		return TABLE_COMMITTED;
	}
	return TABLE_UNPROVEN;
}

/*
 * A run that may exist and that the engine cannot account for (it no
 * longer knows it, or cannot find it by its tag): the table decides.
 * Its commit there: the job succeeded (whatever was requested since),
 * with that snapshot as the one after.  Otherwise the outcome is unknown
 * (a request of an earlier executor may still land): the job fails and
 * says so, and nothing is submitted again.
 */
static void
resolve_from_table(MaintRun *run, const char *tag, const char *run_id, const char *why)
{
	int64		snap = -1;

	switch (table_shows_run(run, tag, run_id, &snap))
	{
		case TABLE_UNREADABLE:
			return;				/* retried: the engine is asked again then */
		case TABLE_COMMITTED:
			ereport(LOG,
					(errmsg("maintenance job " INT64_FORMAT ": %s; the table shows its commit, snapshot " INT64_FORMAT,
							run->job_id, why, snap)));
			run->result = MAINT_OK;
			run->error[0] = '\0';
			run->after_snapshot_id = snap;
			return;
		case TABLE_UNPROVEN:
			break;
	}
	maint_fail_code(run, MAINT_TERMINAL, ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN,
					"outcome of the engine run of maintenance job " INT64_FORMAT " is unknown",
					run->job_id);
	snprintf(run->detail, sizeof(run->detail),
			 "Job " INT64_FORMAT " (tag %s%s%s) may have started a run on engine \"%s\"%s%s: %s, "
			 "and table \"%s.%s\" shows no commit of it after snapshot %s.%s%s",
			 run->job_id, tag, run_id && run_id[0] ? ", run " : "", run_id ? run_id : "",
			 run->engine_name, run->submitted_at ? " at " : "",
			 run->submitted_at ? run->submitted_at : "", why, run->ns, run->table,
			 run->submit_snapshot_id >= 0 ?
			 psprintf(INT64_FORMAT, run->submit_snapshot_id) : "(none)",
			 run->last_error ? " Its last attempt: " : "",
			 run->last_error ? run->last_error : "");
	snprintf(run->hint, sizeof(run->hint),
			 "Check the table's history and the engine for the run; run the operation again if it did not commit.");
}

/* The levels of a namespace in the io layer's form (IO_NS_SEP separated). */
static const char **
namespace_levels(const char *ns_io, size_t *n)
{
	const char **levels = palloc(sizeof(char *) * (strlen(ns_io) + 1));
	char	   *s = pstrdup(ns_io);
	char	   *p = s;

	*n = 0;
	for (;;)
	{
		char	   *sep = strchr(p, IO_NS_SEP);

		if (sep)
			*sep = '\0';
		levels[(*n)++] = p;
		if (!sep)
			break;
		p = sep + 1;
	}
	return levels;
}

/* An io failure of the engine: a transient one is retried by the scheduler. */
static void
engine_failed(MaintRun *run, const char *what, const TmsError *err)
{
	bool		transient;

	switch (err->code)
	{
		case IO_ERR_TIMEOUT:
		case IO_ERR_CONNECT:
		case IO_ERR_UNAVAILABLE:
		case IO_ERR_SERVER:
		case IO_ERR_COMMIT_STATE_UNKNOWN:
		case IO_ERR_INTERRUPTED:
		case IO_ERR_PROTOCOL:
			transient = true;
			break;
		default:
			transient = false;
	}
	maint_fail_code(run, transient ? MAINT_TRANSIENT : MAINT_TERMINAL, tms_error_sqlstate(err),
					"%s engine \"%s\": %s", what, run->engine_name, tms_error_text(err));
}

/* Read the run's result rows into the run's counts. */
static void
read_counts(MaintRun *run, TmsEngine *eng, const IoEngineRun *r)
{
	EngineCounts c;
	TmsError	err;

	if (r->rows_lost || r->ncolumns == 0)
		return;
	if (run->opt.op == MAINT_RETENTION)
	{
		/* a DELETE: Trino's update count (Spark's answers nothing) */
		int64_t		n;

		if (engine_update_count_read((const char *const *) r->columns, r->ncolumns,
									 (const char *const *const *) r->rows, r->nrows, &n,
									 &err) != 0)
			ereport(WARNING,
					(errmsg("maintenance job " INT64_FORMAT ": %s", run->job_id, err.message),
					 err.detail[0] ? errdetail("%s", err.detail) : 0));
		else if (n >= 0)
		{
			run->has_update_count = true;
			run->update_count = n;
		}
		return;
	}
	if (engine_counts_read(eng->type, engine_op_from_name(maint_op_name(run->opt.op)),
						   (const char *const *) r->columns, r->ncolumns,
						   (const char *const *const *) r->rows, r->nrows, &c, &err) != 0)
	{
		ereport(WARNING,
				(errmsg("maintenance job " INT64_FORMAT ": %s", run->job_id, err.message),
				 err.detail[0] ? errdetail("%s", err.detail) : 0));
		return;
	}
#define TAKE(field, from) do { if ((from) >= 0) run->field = (from); } while (0)
	TAKE(data_files_rewritten, c.data_files_rewritten);
	TAKE(data_files_added, c.data_files_added);
	TAKE(bytes_rewritten, c.bytes_rewritten);
	TAKE(delete_files_rewritten, c.delete_files_rewritten);
	TAKE(delete_files_added, c.delete_files_added);
	TAKE(manifests_rewritten, c.manifests_rewritten);
	TAKE(manifests_added, c.manifests_added);
	TAKE(files_deleted, c.files_deleted);
	TAKE(orphans_found, c.orphans_found);
#undef TAKE
}

/*
 * Follow the run until it ends, the lease is lost or the run times out.
 * A cancel request (tms.cancel_operation) is sent on to the engine (again
 * at every check until the engine takes it), and the run is followed
 * until it ends there: what it did decides the job, not the request
 * (*cancelled says one was sent).  Returns true when the run ended at the
 * engine (any state); false otherwise, with run->result set, or left
 * MAINT_OK when the engine no longer knew the run and the table showed
 * its commit (resolve_from_table).
 */
static bool
track(MaintRun *run, TmsEngine *eng, IoEngineRun *r, TimestampTz deadline, const char *tag,
	  bool *cancelled)
{
	int			errors = 0;
	char	   *recorded_id = r->run_id ? pstrdup(r->run_id) : NULL;
	bool		cancel_sent = false;

	*cancelled = false;
	while (r->state == IO_ENGINE_RUN_PENDING || r->state == IO_ENGINE_RUN_RUNNING)
	{
		TmsError	err;

		if (io_engine_wait(eng->client, r, ENGINE_SLICE_MS, &err) != 0)
		{
			CHECK_FOR_INTERRUPTS();
			if (err.code == IO_ERR_NOT_FOUND)
			{
				/* its outcome is the table's to tell; never submitted again */
				resolve_from_table(run, tag, r->run_id ? r->run_id : run->engine_job_id,
								   psprintf("engine \"%s\" no longer knows its run (%s)",
											run->engine_name, tms_error_text(&err)));
				return false;
			}
			if (++errors >= ENGINE_MAX_POLL_ERRORS)
			{
				engine_failed(run, "lost touch with", &err);
				return false;
			}
		}
		else
			errors = 0;

		/* the engine named the run only now (Livy's statement) */
		if (r->run_id && (recorded_id == NULL || strcmp(recorded_id, r->run_id) != 0))
		{
			if (!record(run, "engine", NULL, r->run_id, false))
				return false;
			recorded_id = pstrdup(r->run_id);
		}
		if (r->state != IO_ENGINE_RUN_PENDING && r->state != IO_ENGINE_RUN_RUNNING)
			break;

		if (cancel_sent)
		{
			CHECK_FOR_INTERRUPTS();
			if (sched_lease_lost())
			{
				run->result = MAINT_LEASE_LOST;
				return false;
			}
		}
		else if (!maint_check_now(run))
		{
			if (run->result != MAINT_CANCELLED)
				return false;

			/*
			 * cancelled by the user: at the engine too, then followed to its
			 * end
			 */
			run->result = MAINT_OK;
			run->error[0] = '\0';
			*cancelled = true;
			if (io_engine_cancel(eng->client, r, &err) != 0)
				ereport(LOG,
						(errmsg("maintenance job " INT64_FORMAT ": engine \"%s\" did not take the cancel yet: %s",
								run->job_id, run->engine_name, tms_error_text(&err))));
			else
				cancel_sent = true;
		}
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
		{
			(void) io_engine_cancel(eng->client, r, &err);
			maint_fail(run, MAINT_TERMINAL,
					   "the run took longer than its timeout of %ld s and was cancelled at engine \"%s\"",
					   run->run_timeout_ms / 1000, run->engine_name);
			return false;
		}
	}
	return true;
}

/*
 * Wait ms for a request of a dead executor to land or die (see the file
 * header); interruptible.  false (run->result) when the lease is lost.
 */
static bool
wait_in_flight(MaintRun *run, long ms)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	ereport(LOG,
			(errmsg("maintenance job " INT64_FORMAT ": waiting %ld ms for a request of its last executor to land before asking engine \"%s\"",
					run->job_id, ms, run->engine_name)));
	while (GetCurrentTimestamp() < until)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (sched_lease_lost())
		{
			run->result = MAINT_LEASE_LOST;
			return false;
		}
	}
	return true;
}

/*
 * Follow the run of a resumed job (its submit was recorded): never
 * submitted again.  Wait for a request still on its way, then attach to
 * the run whose id was recorded or find it by the job's tag; without one,
 * the table decides.  false when the job ends here (run->result says how).
 */
static bool
engine_resume(MaintRun *run, TmsEngine *eng, const char *tag, EngineStatement *st,
			  IoEngineRun *r, bool *have_run)
{
	TmsError	err;
	bool		found = false;
	size_t		idlen = run->engine_job_id ? strlen(run->engine_job_id) : 0;

	/* a submit, or Livy's statement post, may still be on its way */
	if ((strcmp(run->phase, "submit") == 0 || idlen == 0 ||
		 run->engine_job_id[idlen - 1] == '/') &&
		!wait_in_flight(run, eng->request_timeout_ms))
		return false;

	if (idlen > 0 && run->engine_job_id[idlen - 1] != '/')
	{
		/* the engine's id of the run was recorded: follow it */
		if (io_engine_attach(eng->client, run->engine_job_id,
							 run->statement ? run->statement : st->text, r, &err) != 0)
		{
			engine_failed(run, "cannot follow the run of this job at", &err);
			return false;
		}
		found = true;
	}
	else if (io_engine_find(eng->client, tag, run->statement ? run->statement : st->text,
							st->template_name, r, &found, &err) != 0)
	{
		if (err.code == IO_ERR_UNSUPPORTED)
			resolve_from_table(run, tag, run->engine_job_id,
							   psprintf("engine \"%s\" cannot find a run by its tag (%s)",
										run->engine_name, tms_error_text(&err)));
		else
			engine_failed(run, "cannot look up the run of this job at", &err);
		return false;
	}
	*have_run = found;
	if (!found)
	{
		resolve_from_table(run, tag, run->engine_job_id,
						   psprintf("engine \"%s\" knows no run of its tag",
									run->engine_name));
		return false;
	}
	ereport(LOG,
			(errmsg("maintenance job " INT64_FORMAT ": following its run %s at engine \"%s\"",
					run->job_id, r->run_id ? r->run_id : "(unnamed)", run->engine_name)));
	return true;
}

/*
 * Submit the job's run: a Gravitino server's job templates are checked
 * first, the submit is recorded before anything is sent, and a submit
 * that may have arrived is looked up by its tag.  false when the job ends
 * here (run->result says how).
 */
static bool
engine_submit(MaintRun *run, TmsEngine *eng, const char *tag, EngineStatement *st,
			  IoKeyValue *session, IoEngineRun *r, bool *have_run)
{
	TmsError	err;
	char	   *offered = NULL;

	/* a Gravitino server runs only the job templates it offers */
	switch (tms_engine_template_check(eng, maint_op_name(run->opt.op), &offered, &err))
	{
		case TMS_TEMPLATE_OFFERED:
			break;
		case TMS_TEMPLATE_MISSING:
			maint_fail_code(run, MAINT_TERMINAL, ERRCODE_FEATURE_NOT_SUPPORTED,
							"engine \"%s\" cannot run operation \"%s\": its Gravitino server offers no job template \"%s\" (it offers: %s)",
							run->engine_name, maint_op_name(run->opt.op),
							st->template_name ? st->template_name : "", offered);
			return false;
		case TMS_TEMPLATE_UNKNOWN:
			engine_failed(run, "cannot read the job templates of", &err);
			return false;
	}
	/* nothing was sent: recorded first, unless a cancel came first */
	if (!record_submit(run, st->text))
		return false;
	if (io_engine_submit(eng->client, tag, st->text, session, st->nsession, r, &err) != 0)
	{
		bool		found = false;
		TmsError	ferr;

		if (err.code != IO_ERR_COMMIT_STATE_UNKNOWN && err.code != IO_ERR_ALREADY_EXISTS)
		{
			/* it certainly did not arrive: the next attempt starts afresh */
			if (!record(run, "start", NULL, NULL, false))
				return false;
			engine_failed(run, "cannot submit to", &err);
			return false;
		}

		/*
		 * It may have arrived: the tag decides, now or (the run not found
		 * yet) when the job is resumed.
		 */
		if (io_engine_find(eng->client, tag, st->text, st->template_name, r, &found, &ferr) != 0 ||
			!found)
		{
			engine_failed(run, "cannot submit to", &err);
			return false;
		}
	}
	*have_run = true;
	if (!record(run, "engine", NULL, r->run_id, false))
		return false;
	return true;
}

/*
 * What the finished run r did: counts recorded when it succeeded; when it
 * was cancelled, the table says whether it committed first; else the job
 * fails.  false when recording failed (run->result says how).
 */
static bool
engine_outcome(MaintRun *run, TmsEngine *eng, IoEngineRun *r, const char *tag,
			   bool cancelled)
{
	switch (r->state)
	{
		case IO_ENGINE_RUN_SUCCEEDED:
			/* it ran to its end: succeeded, whatever was requested since */
			read_counts(run, eng, r);
			if (!record(run, "engine", NULL, NULL, true))
				return false;
			break;
		case IO_ENGINE_RUN_CANCELLED:
			{
				int64		snap = -1;

				/* a run cancelled after its commit did what it did */
				switch (table_shows_run(run, tag, r->run_id, &snap))
				{
					case TABLE_COMMITTED:
						ereport(LOG,
								(errmsg("maintenance job " INT64_FORMAT ": its run was cancelled at engine \"%s\" after it committed snapshot " INT64_FORMAT,
										run->job_id, run->engine_name, snap)));
						run->after_snapshot_id = snap;
						break;
					case TABLE_UNPROVEN:
						maint_fail(run, MAINT_CANCELLED, cancelled ? "cancelled at engine \"%s\"" :
								   "the run was cancelled at engine \"%s\"", run->engine_name);
						break;
					case TABLE_UNREADABLE:
						break;
				}
				break;
			}
		default:
			maint_fail(run, MAINT_TERMINAL, "engine \"%s\" failed the run: %s",
					   run->engine_name, r->message ? r->message : "no reason given");
			break;
	}
	return true;
}

/*
 * Retention's statement: DELETE FROM ... WHERE with the predicate printed
 * from the filter bound to the table as loaded (the cutoff resolved now);
 * a resumed job follows the statement it recorded, never a new one.
 * false when the job ends here (run->result says why).
 */
static bool
build_delete(MaintRun *run, TmsEngine *eng, const EngineTarget *target, bool resumed,
			 EngineStatement *st)
{
	TmsError	err;
	char	   *predicate;

	if (resumed && run->statement != NULL)
	{
		memset(st, 0, sizeof(*st));
		st->type = eng->type;
		st->op = ENGINE_OP_UNKNOWN;
		st->text = io_strdup(run->statement);
		if (st->text == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		return true;
	}
	if (run->md == NULL && !maint_load(run))
		return false;
	predicate = maint_retention_engine_predicate(run, eng->type, false);
	if (predicate == NULL)
		return false;
	if (engine_delete_build(eng->type, target, predicate, st, &err) != 0)
	{
		maint_fail(run, MAINT_TERMINAL, "%s%s%s", err.message, err.detail[0] ? ": " : "",
				   err.detail);
		return false;
	}
	return true;
}

void
maint_run_engine(MaintRun *run)
{
	OpenStep	o = {run, NULL};
	ErrorData  *e = NULL;
	EngineStatement st;
	TmsError	eerr;
	EngineTarget target;
	IoEngineRun r;
	TmsError	err;
	char	   *tag = psprintf("tms-job-" INT64_FORMAT, run->job_id);
	bool		resumed = run->phase != NULL &&
	(strcmp(run->phase, "submit") == 0 || strcmp(run->phase, "engine") == 0);
	bool		have_run = false;
	bool		have_st = false;
	bool		cancelled = false;
	TimestampTz deadline;
	IoKeyValue *session = NULL;

	memset(&r, 0, sizeof(r));
	memset(&st, 0, sizeof(st));
	if (!sched_owner_try_step(step_open, &o, &e))
	{
		maint_fail_code(run, e->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE ||
						e->sqlerrcode == ERRCODE_UNDEFINED_OBJECT ||
						e->sqlerrcode == ERRCODE_WRONG_OBJECT_TYPE ? MAINT_TERMINAL : MAINT_TRANSIENT,
						e->sqlerrcode, "%s%s%s", e->message, e->detail ? ": " : "",
						e->detail ? e->detail : "");
		return;
	}

	PG_TRY();
	{
		TmsEngine  *eng = o.engine;

		run->run_timeout_ms = eng->run_timeout_ms > 0 ? eng->run_timeout_ms :
			(long) tms_engine_run_timeout_s * 1000;
		deadline = run->run_timeout_ms > 0 ?
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(), run->run_timeout_ms) : 0;

		/* the statement, from the options as they are now */
		target.catalog = eng->catalog;
		target.ns = namespace_levels(run->ns_io, &target.nns);
		target.table = run->table;
		if (run->opt.op == MAINT_RETENTION)
		{
			if (!build_delete(run, eng, &target, resumed, &st))
				goto done;
		}
		else if (engine_statement_build(eng->type, maint_op_name(run->opt.op), &target,
										run->opt.options_json, tag,
										maint_timestamp_to_ms(GetCurrentTimestamp()),
										&st, &eerr) != 0)
		{
			maint_fail(run, MAINT_TERMINAL, "%s%s%s", eerr.message,
					   eerr.detail[0] ? ": " : "", eerr.detail);
			goto done;
		}
		have_st = true;
		if (st.nsession > 0)
		{
			session = palloc(sizeof(IoKeyValue) * st.nsession);
			for (size_t i = 0; i < st.nsession; i++)
			{
				session[i].key = st.session[i].name;
				session[i].value = st.session[i].value;
			}
		}

		/*
		 * A run may exist (its submit was recorded): it is followed, or the
		 * table decides; never submitted again.
		 */
		if (resumed)
		{
			if (!engine_resume(run, eng, tag, &st, &r, &have_run))
				goto done;
		}
		else if (!engine_submit(run, eng, tag, &st, session, &r, &have_run))
			goto done;

		if (!track(run, eng, &r, deadline, tag, &cancelled))
			goto done;
		if (!engine_outcome(run, eng, &r, tag, cancelled))
			goto done;
		if (io_engine_close(eng->client, &r, &err) != 0)
			ereport(LOG,
					(errmsg("maintenance job " INT64_FORMAT ": could not release its run at engine \"%s\": %s",
							run->job_id, run->engine_name, tms_error_text(&err))));
done:
		;
	}
	PG_FINALLY();
	{
		if (have_run)
			io_engine_run_free(&r);
		if (have_st)
			engine_statement_free(&st);
		tms_engine_close(o.engine);
	}
	PG_END_TRY();
}

char *
tms_engine_statement(const char *engine, const char *ns, const char *table,
					 const char *operation, Jsonb *options)
{
	MaintOptions opt;
	EngineStatement st;
	TmsError	err;
	EngineTarget target;
	ForeignServer *server;
	char	   *text;
	char	   *tag = "tms-job-0";

	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
	maint_options_parse(operation, engine, options, &opt);
	if (opt.op == MAINT_RETENTION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the statement of operation \"retention\" is written when its job runs"),
				 errdetail("Its DELETE FROM ... WHERE is printed from the filter bound to the table's schema, with the cutoff of that moment."),
				 errhint("tms.maintenance_jobs shows the statement a job submitted (column statement).")));
	if (opt.engine_type == ENGINE_TYPE_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("engine \"%s\" is not a tms_engine server", engine),
				 errdetail("Only a tms_engine server runs statements that tms builds.")));
	/* what run_operation would check: the acting role may use the engine */
	tms_engine_check_access(engine, tms_acting_role());
	server = GetForeignServerByName(engine, false);
	target.catalog = tms_option(server->options, "catalog");
	target.ns = namespace_levels(tms_namespace_to_io(ns), &target.nns);
	target.table = table;
	if (engine_statement_build(opt.engine_type, operation, &target, opt.options_json, tag,
							   maint_timestamp_to_ms(GetCurrentTimestamp()), &st, &err) != 0)
		tms_error_ereport(&err);
	text = pstrdup(st.text);
	engine_statement_free(&st);
	return text;
}
