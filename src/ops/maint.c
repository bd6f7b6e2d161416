/*-------------------------------------------------------------------------
 *
 * maint.c
 *	  Maintenance jobs: the "maintenance" task kind, the life of a job of
 *	  tms.table_maintenance_job, and what every local operation shares:
 *	  loading the table, the delete queue, recording the effect.  The
 *	  commit protocol is maint_commit.c; tms.run_operation and
 *	  tms.plan_operation are maint_session.c.  The operations are
 *	  maint_expire.c, maint_orphan.c, maint_rewrite.c and maint_compact.c
 *	  (with its helper process, compactor.c); their options
 *	  maint_options.c; a job on an engine server maint_on_engine.c; the
 *	  snapshot-drift gate maint_drift.c.
 *
 * A job is recorded by a policy's evaluation (tms._record_evaluation) or
 * by tms.run_operation, with a task of kind "maintenance" (instance
 * "job-<id>"), or in a batch whose one task ("batch-<id>") runs its jobs
 * one after the other (maint_batch.c).  The kind is detached: its handler
 * runs outside transactions and records its progress in short steps, as
 * the extension's owner, conditional on the task's lease (a worker that
 * lost its lease writes nothing).  A run:
 *
 *	 start		(step) tms._start_job: a cancel request, the policy's state
 *				and window, one job per (table, operation), the budgets of
 *				its rule, policy and engine server (tms._budget_check), and
 *				tms.max_active_operations (counting only jobs whose task a
 *				live executor holds) decide whether it starts now, later
 *				or never (skipped, with the reason).
 *	 engine		a job whose engine is a tms_engine server runs there
 *				(maint_on_engine.c: submitted once under the job's tag,
 *				followed, recorded) between the steps below, as a local
 *				operation would; one of 0.2.0's handler engines ("spark",
 *				"trino" naming no server) goes to the procedure named by
 *				tms.maintenance_handler, as its owner, and stays running
 *				until tms.finish_operation, or fails after
 *				tms.handler_job_timeout.
 *	 connect	(step) as the acting role: the requester of run_operation,
 *				the owner of a policy; its USAGE on the server and its
 *				user mapping.
 *	 resume		a job on an engine found in phase "submit" or "engine" may
 *				have a run: it is followed at its engine, or the table tells
 *				what became of it, and it is never submitted again
 *				(maint_on_engine.c); once the run ended there, a cancel no
 *				longer applies.
 *				A job found in phase "commit" had a commit in flight when
 *				its executor died: the table is loaded and the commit's
 *				outcome decided before anything else (the operation's
 *				resume function); in phase "cleanup" the commit landed and
 *				the deletes it allows are done again (deleting twice is
 *				harmless).
 *	 load		the table; a policy's job whose table's data changed
 *				after the snapshot its condition was evaluated at passes
 *				the snapshot-drift gate of maint_drift.c: an operation
 *				that does not depend on that data runs, one that does
 *				runs only if its condition still holds now, else it ends
 *				skipped ("snapshot drift"), as Gravitino's table
 *				maintenance service design describes
 *				(https://github.com/apache/gravitino/pull/13386).
 *	 before		(step) the table's metrics, tms.table_snapshot_metrics.
 *	 operation	plan, commit (the protocol below), delete.
 *	 finish		(step) succeeded with its counts, the after-snapshot and
 *				its metrics, the rule's baseline reset; or the failure:
 *				back to pending with last_error (the scheduler retries
 *				after its backoff) or failed at tms.maintenance_max_attempts
 *				or at once when retrying cannot help.
 *
 * A job nothing will finish, because its task is gone or because
 * tms.maintenance_handler's executor never called tms.finish_operation
 * within tms.handler_job_timeout, is ended "failed" by the kind's sweep
 * (maintenance_sweep, run after the prune of the run history), so that its
 * table and rule are free again.
 *
 * The commit protocol (maint_commit, maint_commit.c) records phase
 * "commit" before a request is sent and decides an unknown outcome from
 * the table; see that file.
 * Files are deleted only after a commit is known to have landed, only
 * below the table's location and one of the server's allowed locations
 * (maint_delete), in canonical form, by the run's deleter (delete.h), the
 * one purges use: bulk requests in the background within the database's
 * delete pool; maint_delete_flush waits until they are all done.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/role.h"
#include "bridge/usercode.h"
#include "ops/delete.h"
#include "ops/maint.h"
#include "ops/maint_int.h"
#include "ops/ops.h"
#include "ops/outcome.h"
#include "ops/policy.h"
#include "sched/lease.h"
#include "sched/sched.h"

int			tms_maintenance_max_attempts = 3;
int			tms_maintenance_commit_retries = 4;
int			tms_snapshot_metrics_retention_s = 90 * 86400;
int			tms_maintenance_delete_batch_size = 1000;
int			tms_engine_run_timeout_s = 6 * 3600;
int			tms_handler_job_timeout_s = 3600;

/* progress, cancel requests and the lease are checked at most this often */
#define CHECK_INTERVAL_MS 1000

static SchedOutcome maintenance_handler(SchedTask *task, ErrorData **error);
static void maintenance_sweep(void);

void
tms_maint_init(void)
{
	DefineCustomIntVariable("tms.maintenance_max_attempts",
							gettext_noop("Attempts of a maintenance job before it fails."),
							NULL,
							&tms_maintenance_max_attempts,
							3, 1, 100,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.maintenance_commit_retries",
							gettext_noop("Retries of a maintenance commit that conflicted or whose outcome was unknown."),
							NULL,
							&tms_maintenance_commit_retries,
							4, 0, 100,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.snapshot_metrics_retention",
							gettext_noop("How long tms.table_snapshot_metrics keeps a row."),
							NULL,
							&tms_snapshot_metrics_retention_s,
							90 * 86400, 60, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.maintenance_delete_batch_size",
							gettext_noop("Files a maintenance job deletes per storage request."),
							NULL,
							&tms_maintenance_delete_batch_size,
							1000, 1, 1000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.engine_run_timeout",
							gettext_noop("How long a maintenance run on an engine may take before it is cancelled there (0: no limit)."),
							gettext_noop("A tms_engine server's run_timeout option overrides it."),
							&tms_engine_run_timeout_s,
							6 * 3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.handler_job_timeout",
							gettext_noop("How long a job handed to tms.maintenance_handler may run before it fails (0: no limit)."),
							NULL,
							&tms_handler_job_timeout_s,
							3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	sched_register_detached("maintenance", maintenance_handler, &tms_max_active_operations);
	sched_register_sweep("maintenance", maintenance_sweep);
}

/* ----------------------------------------------------------------
 * Outcomes and rows
 * ----------------------------------------------------------------
 */

static void maint_fail_va(MaintRun *run, MaintResult kind, int sqlerrcode, const char *fmt,
						  va_list ap) pg_attribute_printf(4, 0);

static void
maint_fail_va(MaintRun *run, MaintResult kind, int sqlerrcode, const char *fmt, va_list ap)
{
	if (run->result != MAINT_OK)
		return;
	run->result = kind;
	run->sqlerrcode = sqlerrcode;
	vsnprintf(run->error, sizeof(run->error), fmt, ap);
}

void
maint_fail(MaintRun *run, MaintResult kind, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	maint_fail_va(run, kind, 0, fmt, ap);
	va_end(ap);
}

void
maint_fail_code(MaintRun *run, MaintResult kind, int sqlerrcode, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	maint_fail_va(run, kind, sqlerrcode, fmt, ap);
	va_end(ap);
}

/* An iceberg error: transient when it came from storage or the network. */
void
maint_fail_iceberg(MaintRun *run, const char *what, const TmsError *err)
{
	bool		transient = err->code == ICEBERG_ERR_IO &&
	err->io_code != IO_ERR_NOT_FOUND && err->io_code != IO_ERR_FORBIDDEN &&
	err->io_code != IO_ERR_INVALID_ARGUMENT;

	if (err->code == ICEBERG_ERR_CANCELLED || err->io_code == IO_ERR_INTERRUPTED)
	{
		if (run->result == MAINT_OK)
			run->result = run->dry_run ? MAINT_TRANSIENT : MAINT_LEASE_LOST;
		CHECK_FOR_INTERRUPTS();
		if (!run->dry_run && !sched_lease_lost())
			maint_fail(run, MAINT_TRANSIENT, "%s: interrupted", what);
		return;
	}
	maint_fail_code(run, transient ? MAINT_TRANSIENT : MAINT_TERMINAL,
					tms_error_sqlstate(err), "%s: %s", what, tms_error_text(err));
}

void
maint_emit(MaintRun *run, const char *action, const char *target, const char *detail_json)
{
	if (run->emit)
		run->emit(run->emit_arg, action, target, detail_json);
}

/* ----------------------------------------------------------------
 * The table
 * ----------------------------------------------------------------
 */

void
maint_unload(MaintRun *run)
{
	if (run->md)
		iceberg_metadata_free(run->md);
	run->md = NULL;
	/* the deleter's requests use the storage: they go first */
	tms_deleter_free(run->deleter);
	run->deleter = NULL;
	if (run->storage)
		io_storage_free(run->storage);
	run->storage = NULL;
}

/*
 * Load the table (again) through the run's connection: metadata, its
 * location checked against the server's allowed locations, storage with
 * the catalog's vended config.  false with run->result set on failure.
 */
bool
maint_load(MaintRun *run)
{
	IoLoadedTable t;
	TmsError	err;
	TmsError	ierr;
	IcebergTableMetadata *md = NULL;
	const IcebergSnapshot *cur;
	char	   *c;
	char	   *why = NULL;
	bool		ok = false;

	/* deletes still running finish first: their storage goes */
	if (run->deleter != NULL)
		(void) maint_delete_flush(run);
	maint_unload(run);
	memset(&t, 0, sizeof(t));
	run->load_failed = false;
	io_catalog_forget(run->conn->catalog, run->ns_io, run->table);
	if (io_catalog_load_table(run->conn->catalog, run->ns_io, run->table, &t, &err) != 0)
	{
		CHECK_FOR_INTERRUPTS();
		run->load_failed = true;
		run->load_err = err;
		maint_fail_code(run, err.code == IO_ERR_NO_SUCH_TABLE || err.code == IO_ERR_NO_SUCH_NAMESPACE ||
						err.code == IO_ERR_FORBIDDEN || err.code == IO_ERR_UNAUTHORIZED
						? MAINT_TERMINAL : MAINT_TRANSIENT, tms_error_sqlstate(&err),
						"cannot load table \"%s.%s\": %s", run->ns, run->table,
						tms_error_text(&err));
		return false;
	}
	if (t.metadata_location == NULL || t.metadata_json == NULL)
		maint_fail(run, MAINT_TERMINAL, "table \"%s.%s\" has no metadata location (a staged table)",
				   run->ns, run->table);
	else if (!iceberg_metadata_parse(t.metadata_json, strlen(t.metadata_json), NULL, &md, &ierr))
	{
		md = NULL;
		maint_fail_iceberg(run, "cannot read the table's metadata", &ierr);
	}
	else if (md->location == NULL ||
			 (c = tms_location_canonical(run->conn->server, md->location, &why)) == NULL)
	{
		run->refused_location = MemoryContextStrdup(run->cxt, md->location ? md->location : "");
		maint_fail(run, MAINT_TERMINAL, "the location of table \"%s.%s\" cannot be resolved (\"%s\")",
				   run->ns, run->table, md->location ? md->location : "");
	}
	else if (!tms_location_allowed(run->conn->server, c))
	{
		run->refused_location = MemoryContextStrdup(run->cxt, md->location);
		maint_fail(run, MAINT_TERMINAL,
				   "the location of table \"%s.%s\" (\"%s\") is not below the allowed_locations of server \"%s\"",
				   run->ns, run->table, c, run->server_name);
	}
	else if ((run->storage = tms_catalog_storage(run->conn, &t, &err)) == NULL)
		maint_fail(run, MAINT_TERMINAL, "cannot set up storage access: %s", err.message);
	else
	{
		MemoryContext old = MemoryContextSwitchTo(run->cxt);

		run->md = md;
		md = NULL;
		run->location = c;
		/* vended credentials that expire are fetched again through the table */
		tms_storage_refresh_through(run->storage, run->conn, run->ns_io, run->table,
									run->md->location);
		run->metadata_location = pstrdup(t.metadata_location);
		tms_table_fileio(&run->tio, run->conn->server, run->storage, &run->fio);
		cur = iceberg_metadata_current_snapshot(run->md);
		run->before_snapshot_id = cur ? cur->snapshot_id : -1;
		run->now_ms = maint_timestamp_to_ms(GetCurrentTimestamp());
		MemoryContextSwitchTo(old);
		ok = true;
	}
	if (md)
		iceberg_metadata_free(md);
	io_loaded_table_free(&t);
	return ok;
}

/*
 * Whether a file the run's step needed was missing only because the table
 * moved on since the run loaded it: err is a "not found", and the catalog
 * now has another metadata file.  A writer's commit can make the loaded
 * snapshot old, and an expiry beside the run can then delete its manifest
 * list and manifests; the step must be planned again on the table as it
 * is (the caller reloads it), not failed.  A file missing from the table
 * the catalog still has is a real loss: false, and the caller fails.  The
 * look is a conditional load (the run's own load is in the connection's
 * cache with its ETag): a table that has not moved costs a 304, and one
 * that has is loaded in full once more by the caller's maint_load, after
 * its back-off.
 */
bool
maint_moved_on(MaintRun *run, const TmsError *err)
{
	IoLoadedTable t;
	TmsError	lerr;
	bool		moved;

	if (err->code != IO_ERR_NOT_FOUND &&
		!(err->code == ICEBERG_ERR_IO && err->io_code == IO_ERR_NOT_FOUND))
		return false;
	memset(&t, 0, sizeof(t));
	if (io_catalog_load_table(run->conn->catalog, run->ns_io, run->table, &t, &lerr) != 0)
	{
		CHECK_FOR_INTERRUPTS();
		return false;
	}
	moved = t.metadata_location != NULL && run->metadata_location != NULL &&
		strcmp(t.metadata_location, run->metadata_location) != 0;
	io_loaded_table_free(&t);
	return moved;
}

/* The metrics tms.table_snapshot_metrics records, as JSON. */
static char *
metrics_json(MaintRun *run)
{
	IcebergTableMetrics m;
	TmsError	err;
	const IcebergSnapshot *cur = iceberg_metadata_current_snapshot(run->md);
	StringInfoData b;
	static const char *const totals[][2] = {
		{"total-data-files", "dataFiles"},
		{"total-files-size", "dataFilesSize"},
		{"total-records", "dataRecords"},
		{"total-delete-files", "deleteFiles"},
		{"total-position-deletes", "positionDeleteRecords"},
		{"total-equality-deletes", "equalityDeleteRecords"},
	};

	if (!iceberg_table_metrics(&run->fio, run->md, ICEBERG_METRICS_MANIFEST_LIST,
							   run->now_ms, NULL, NULL, &m, &err))
		return NULL;			/* metrics are a record, not a reason to fail */
	initStringInfo(&b);
	appendStringInfo(&b, "{\"snapshots\": " INT64_FORMAT ", \"manifests\": " INT64_FORMAT
					 ", \"oldestSnapshotAge\": " INT64_FORMAT
					 ", \"metadataFiles\": %d, \"refs\": %d, \"statisticsFiles\": %d",
					 m.snapshots, m.manifests, m.oldest_snapshot_age_ms,
					 run->md->nmetadata_log + 1, run->md->nrefs,
					 run->md->nstatistics + run->md->npartition_statistics);
	for (int i = 0; cur && i < (int) lengthof(totals); i++)
		for (int k = 0; k < cur->nsummary; k++)
		{
			const char *v = cur->summary[k].value;
			char	   *end;
			int64		n;

			if (strcmp(cur->summary[k].key, totals[i][0]) != 0 || v == NULL)
				continue;
			errno = 0;
			n = strtoi64(v, &end, 10);
			if (*end == '\0' && errno == 0 && end != v)
				appendStringInfo(&b, ", \"%s\": " INT64_FORMAT, totals[i][1], n);
		}
	appendStringInfoChar(&b, '}');
	return b.data;
}

/* ----------------------------------------------------------------
 * Steps of a job (short transactions, as the extension owner)
 * ----------------------------------------------------------------
 */


typedef struct StartStep
{
	MaintRun   *run;
	char	   *state;
	char	   *reason;
	char	   *job;
	bool		external;		/* out: handed to tms.maintenance_handler */
} StartStep;

static void call_handler(const char *job, int64 job_id);

/* The integer at key of a job's JSON or a commit state, or -1. */
int64
maint_json_int(Jsonb *jb, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&jb->root, key, strlen(key), NULL);

	if (v == NULL || v->type != jbvNumeric)
		return -1;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
}

static void
step_start(void *arg)
{
	StartStep  *s = arg;
	MaintRun   *run = s->run;
	Oid			types[4] = {INT8OID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		args[4];
	bool		isnull;
	Datum		retry;
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	rc = SPI_execute_with_args("SELECT state, reason, retry_at, job::text,"
							   " coalesce(tms._handed_to_handler(job->>'engine'), false)"
							   " FROM tms._start_job($1)",
							   1, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not start maintenance job: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(run->cxt);
	s->state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	s->reason = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	retry = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	s->job = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
	if (strcmp(s->state, "started") == 0)
	{
		Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s->job)));
		bool		handed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
														SPI_tuptable->tupdesc, 5, &isnull));

		/*
		 * the run's row of tms.task_history names the job's policy, rule,
		 * table
		 */
		sched_task_subject(run->task, maint_json_int(jb, "policy_id"), maint_json_int(jb, "rule_id"),
						   maint_json_int(jb, "table_id"), run->job_id);

		/*
		 * Another engine's job (tms._handed_to_handler) goes to
		 * tms.maintenance_handler in this same transaction: if the handler
		 * fails, the start is rolled back with it and the job waits, pending,
		 * for the retry.
		 */
		if (handed)
		{
			s->external = true;
			if (tms_maintenance_handler != NULL && tms_maintenance_handler[0] != '\0')
				call_handler(s->job, run->job_id);
		}
	}
	else if (strcmp(s->state, "deferred") == 0)
	{
		/* a wait, not a run worth a row of tms.task_history */
		sched_task_idle(run->task);
		/* due again later: the settle keeps a row whose due time moved */
		args[0] = CStringGetTextDatum("maintenance");
		args[1] = CStringGetTextDatum(run->task->instance);
		args[2] = CStringGetTextDatum(run->task->data ? run->task->data : "{}");
		args[3] = isnull ? TimestampTzGetDatum(GetCurrentTimestamp() + 2 * USECS_PER_SEC) : retry;
		types[0] = TEXTOID;
		rc = SPI_execute_with_args("SELECT tms.schedule_task($1, $2, $3::jsonb, $4)",
								   4, types, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not defer maintenance job: %s", SPI_result_code_string(rc));
	}
	MemoryContextSwitchTo(run->cxt);
}

/* Fill run from the job JSON _start_job returned. */
static void
read_job(MaintRun *run, const char *job)
{
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(job)));
	JsonbValue *v;
	JsonbValue *opts;
	char	   *operation;
	char	   *engine;

#define FIELD(name) getKeyJsonValueFromContainer(&jb->root, name, strlen(name), NULL)
#define STR(jv) ((jv) && (jv)->type == jbvString ? pnstrdup((jv)->val.string.val, (jv)->val.string.len) : NULL)

	run->server_name = STR(FIELD("server"));
	run->ns = STR(FIELD("namespace"));
	run->table = STR(FIELD("table_name"));
	operation = STR(FIELD("operation"));
	engine = STR(FIELD("engine"));
	run->phase = STR(FIELD("phase"));
	run->engine_name = engine;
	run->statement = STR(FIELD("statement"));
	run->engine_job_id = STR(FIELD("engine_job_id"));
	run->submitted_at = STR(FIELD("submitted_at"));
	run->last_error = STR(FIELD("last_error"));
	run->submit_snapshot_id = maint_json_int(jb, "submit_snapshot_id");
	v = FIELD("commit_state");
	run->commit_state = v && v->type == jbvBinary ?
		JsonbToCString(NULL, v->val.binary.data, v->val.binary.len) : NULL;
	run->acting = (Oid) maint_json_int(jb, "acting_role");
	run->attempts = (int) maint_json_int(jb, "attempts");
	v = FIELD("rule_id");
	run->policy_job = v != NULL && v->type == jbvNumeric;
	run->evaluated_snapshot_id = maint_json_int(jb, "before_snapshot_id");
	opts = FIELD("options");
	if (opts && opts->type == jbvBinary)
	{
		Jsonb	   *o = JsonbValueToJsonb(opts);

		maint_options_parse(operation, engine, o, &run->opt);
	}
	else
		maint_options_parse(operation, engine, NULL, &run->opt);
#undef FIELD
#undef STR
}

typedef struct ReadJobStep
{
	MaintRun   *run;
	const char *job;
} ReadJobStep;

static void
step_read_job(void *arg)
{
	ReadJobStep *r = arg;
	MemoryContext old = MemoryContextSwitchTo(r->run->cxt);

	read_job(r->run, r->job);
	MemoryContextSwitchTo(old);
}

typedef struct ConnectStep
{
	MaintRun   *run;
	bool		ok;
} ConnectStep;

static void
step_connect(void *arg)
{
	ConnectStep *cs = arg;
	MaintRun   *run = cs->run;
	TmsRoleSave save;

	tms_become_role(run->acting, psprintf("maintenance job " INT64_FORMAT, run->job_id), &save);
	run->conn = tms_catalog_connect(run->server_name);
	tms_catalog_keep(run->conn);
	tms_restore_role(&save);
	cs->ok = true;
}

typedef struct PhaseStep
{
	MaintRun   *run;
	const char *phase;
	const char *commit_state;
	bool		written;
} PhaseStep;

static void
step_phase(void *arg)
{
	PhaseStep  *p = arg;
	MaintRun   *run = p->run;
	Oid			types[6] = {INT8OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, INT8OID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(p->phase);
	if (p->commit_state)
		args[4] = CStringGetTextDatum(p->commit_state);
	else
		nulls[4] = 'n';
	if (run->after_snapshot_id >= 0)
		args[5] = Int64GetDatum(run->after_snapshot_id);
	else
		nulls[5] = 'n';
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET phase = $4, commit_state = $5::jsonb,"
							   "       after_snapshot_id = coalesce($6, after_snapshot_id)"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
							   6, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the phase of a maintenance job: %s",
			 SPI_result_code_string(rc));
	p->written = SPI_processed == 1;
}

/*
 * Record the job's phase (and what a commit in flight wrote); false (and
 * run->result) when the lease is gone.  A dry run records nothing.
 */
bool
maint_record_phase(MaintRun *run, const char *phase, const char *commit_state)
{
	PhaseStep	p = {run, phase, commit_state, false};

	if (run->dry_run)
		return true;
	sched_owner_step(step_phase, &p);
	if (!p.written)
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	run->phase = pstrdup(phase);
	run->commit_state = commit_state ? MemoryContextStrdup(run->cxt, commit_state) : NULL;
	return true;
}

typedef struct MetricsStep
{
	MaintRun   *run;
	const char *phase;
	char	   *json;
} MetricsStep;

static void
step_metrics(void *arg)
{
	MetricsStep *m = arg;
	MaintRun   *run = m->run;
	const IcebergSnapshot *cur = iceberg_metadata_current_snapshot(run->md);
	Oid			types[4] = {INT8OID, TEXTOID, INT8OID, TEXTOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(m->phase);
	if (cur)
		args[2] = Int64GetDatum(cur->snapshot_id);
	else
		nulls[2] = 'n';
	args[3] = CStringGetTextDatum(m->json);
	rc = SPI_execute_with_args("INSERT INTO tms.table_snapshot_metrics"
							   " (job_id, table_id, server, namespace, table_name, phase,"
							   "  snapshot_id, metrics)"
							   " SELECT j.id, t.id, t.server, t.namespace, t.table_name, $2, $3, $4::jsonb"
							   "   FROM tms.table_maintenance_job j JOIN tms.tables t ON t.id = j.table_id"
							   "  WHERE j.id = $1"
							   " ON CONFLICT (job_id, phase) DO UPDATE"
							   " SET snapshot_id = EXCLUDED.snapshot_id, metrics = EXCLUDED.metrics,"
							   "     recorded_at = now()",
							   4, types, args, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not record snapshot metrics: %s", SPI_result_code_string(rc));
}

static void
record_metrics(MaintRun *run, const char *phase)
{
	MetricsStep m = {run, phase, NULL};

	if (run->dry_run || run->md == NULL)
		return;
	m.json = metrics_json(run);
	if (m.json)
		sched_owner_step(step_metrics, &m);
}

typedef struct ProgressStep
{
	MaintRun   *run;
	bool		cancel;			/* out: cancel requested */
	bool		held;			/* out: lease held */
} ProgressStep;

static void
step_progress(void *arg)
{
	ProgressStep *p = arg;
	MaintRun   *run = p->run;
	Oid			types[9] = {INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID,
	INT8OID, INT8OID, INT8OID};
	Datum		args[9];
	bool		isnull;
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = Int64GetDatum(run->snapshots_expired);
	args[4] = Int64GetDatum(run->manifests_rewritten);
	args[5] = Int64GetDatum(run->manifests_added);
	args[6] = Int64GetDatum(run->files_deleted);
	args[7] = Int64GetDatum(run->bytes_deleted);
	args[8] = Int64GetDatum(run->orphans_found);
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET snapshots_expired = $4, manifests_rewritten = $5,"
							   "       manifests_added = $6, files_deleted = $7,"
							   "       bytes_deleted = $8, orphans_found = $9"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD
							   " RETURNING cancel_requested",
							   9, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record maintenance progress: %s", SPI_result_code_string(rc));
	p->held = SPI_processed == 1;
	if (p->held)
		p->cancel = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Between two units of work: interrupts, the lease, and (at most once a
 * second, or when force) the counters written and a cancel request read.
 * false (run->result set) when the run must stop.
 */
static bool
check_run(MaintRun *run, bool force)
{
	TimestampTz now;
	ProgressStep p = {run, false, false};

	if (run->in_callback)
	{
		/* no step and no raise here: stop, and let the caller look */
		if (run->result != MAINT_OK)
			return false;
		if (InterruptPending || (!run->dry_run && sched_lease_lost()))
		{
			maint_fail(run, MAINT_TRANSIENT, "interrupted");
			return false;
		}
		return true;
	}
	CHECK_FOR_INTERRUPTS();
	if (run->result != MAINT_OK)
		return false;
	if (run->dry_run)
		return true;
	if (sched_lease_lost())
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	now = GetCurrentTimestamp();
	if (!force && !TimestampDifferenceExceeds(run->last_check, now, CHECK_INTERVAL_MS))
		return true;
	run->last_check = now;
	sched_owner_step(step_progress, &p);
	if (!p.held)
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	if (p.cancel && !run->ignore_cancel)
	{
		maint_fail(run, MAINT_CANCELLED, "%s",
				   strcmp(run->phase, "cleanup") == 0 ?
				   "cancelled after its commit landed; the files it unreferenced and did not delete yet are left to orphan cleanup" :
				   "cancelled before it committed anything");
		return false;
	}
	return true;
}

bool
maint_keep_going(MaintRun *run)
{
	return check_run(run, false);
}

bool
maint_check_now(MaintRun *run)
{
	return check_run(run, true);
}

/* ----------------------------------------------------------------
 * Deleting
 * ----------------------------------------------------------------
 */

/*
 * Hand the queued files to the run's deleter (delete.h: bulk requests in
 * the background, within the database's delete pool); with wait, until
 * every file handed over is deleted.  The deleter's counts go to the
 * run's.  false (run->result set) stops the run.
 */
static bool
delete_queued(MaintRun *run, bool wait)
{
	TmsDeleter *d = run->deleter;
	bool		ok = true;

	if (run->result != MAINT_OK)
		return false;
	if (run->q_n == 0 && (d == NULL || !wait))
		return true;
	if (d != NULL && d->status != TMS_DELETE_OK)
	{
		/* it stopped, and the run was told: a new one for what comes now */
		tms_deleter_free(d);
		d = run->deleter = NULL;
	}
	if (d == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(run->cxt);

		d = run->deleter = tms_deleter_create(run->storage,
											  psprintf("maintenance job " INT64_FORMAT,
													   run->job_id),
											  NULL, NULL);
		run->deleter_counted = 0;
		run->deleter_bytes_counted = 0;
		MemoryContextSwitchTo(old);
	}
	if (run->q_n > 0)
	{
		ok = tms_deleter_submit(d, 0, run->q_uris, run->q_sizes, run->q_n);
		MemoryContextReset(run->qcxt);
		run->q_n = 0;
		run->q_uris = NULL;
		run->q_sizes = NULL;
	}
	if (ok && wait)
		ok = tms_deleter_drain(d);
	run->files_deleted += d->deleted - run->deleter_counted;
	run->bytes_deleted += d->bytes - run->deleter_bytes_counted;
	run->deleter_counted = d->deleted;
	run->deleter_bytes_counted = d->bytes;
	if (ok)
		return true;
	if (d->status == TMS_DELETE_INTERRUPTED && !run->in_callback)
	{
		CHECK_FOR_INTERRUPTS();
		if (!run->dry_run && sched_lease_lost())
		{
			run->result = MAINT_LEASE_LOST;
			return false;
		}
	}
	maint_fail(run, MAINT_TRANSIENT, "%s",
			   d->status == TMS_DELETE_INTERRUPTED ? "deleting files was interrupted" : d->error);
	return false;
}

/* Delete the queued files, and wait until everything handed over is deleted. */
bool
maint_delete_flush(MaintRun *run)
{
	if (!delete_queued(run, true))
		return false;
	return check_run(run, false);
}

/*
 * Delete path (size bytes, -1 unknown; kind for a dry run's row), in a
 * batch.  Only a path that resolves to a canonical location strictly
 * below the table's location and one of the server's allowed locations
 * is deleted; any other is counted as skipped and kept.  false stops the
 * run.
 */
bool
maint_delete(MaintRun *run, const char *path, int64 size, const char *kind)
{
	return maint_delete_ex(run, path, size, kind, NULL);
}

bool
maint_delete_ex(MaintRun *run, const char *path, int64 size, const char *kind,
				const char *extra_json)
{
	char	   *c;
	MemoryContext old;

	if (run->result != MAINT_OK)
		return false;
	old = MemoryContextSwitchTo(run->qcxt);
	c = tms_location_canonical(run->conn->server, path, NULL);
	if (c == NULL || !io_location_under(c, run->location) ||
		!tms_location_allowed(run->conn->server, c))
	{
		MemoryContextSwitchTo(old);
		run->files_skipped++;
		if (run->dry_run)
			maint_emit(run, "keep-file", path,
					   psprintf("{\"kind\": \"%s\", \"reason\": \"%s\"}", kind,
								c == NULL ? "cannot be resolved" :
								!io_location_under(c, run->location) ?
								"not below the table location" : "not below the allowed_locations"));
		if (run->dry_run)
			MemoryContextReset(run->qcxt);
		return true;
	}
	if (size < 0)
	{
		/* the metadata does not say (manifest lists, metadata files): ask */
		uint64		sz;
		TmsError	err;

		if (io_storage_size(run->storage, c, &sz, &err) == 0)
			size = (int64) sz;
	}
	if (run->dry_run)
	{
		StringInfoData d;

		MemoryContextSwitchTo(old);
		initStringInfo(&d);
		appendStringInfoString(&d, "{\"kind\": ");
		escape_json(&d, kind);
		if (size >= 0)
			appendStringInfo(&d, ", \"size\": " INT64_FORMAT, size);
		if (extra_json)
			appendStringInfo(&d, ", %s", extra_json);
		appendStringInfoChar(&d, '}');
		/* the target as it is deleted: canonical, local files as file:// URIs */
		maint_emit(run, "delete-file", c[0] == '/' ? psprintf("file://%s", c) : c, d.data);
		pfree(d.data);
		run->files_deleted++;
		if (size > 0)
			run->bytes_deleted += size;
		MemoryContextReset(run->qcxt);
		return true;
	}
	if (run->q_uris == NULL)
	{
		run->q_uris = palloc(sizeof(char *) * tms_maintenance_delete_batch_size);
		run->q_sizes = palloc(sizeof(int64) * tms_maintenance_delete_batch_size);
	}
	run->q_uris[run->q_n] = c;
	run->q_sizes[run->q_n] = size;
	run->q_n++;
	MemoryContextSwitchTo(old);
	if (run->q_n >= tms_maintenance_delete_batch_size)
		return delete_queued(run, false) && check_run(run, false);
	return true;
}

/*
 * maint_delete_ex from a callback of a plain-C layer (a walk, a listing):
 * nothing may longjmp through that layer, so an error is caught, kept in
 * run->callback_error, and false returned; the caller raises it again
 * with maint_callback_rethrow() once the plain-C call returned.  No step
 * runs inside (progress is written after the call).
 */
bool
maint_callback_delete(MaintRun *run, const char *path, int64 size, const char *kind,
					  const char *extra_json)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = false;

	run->in_callback = true;
	PG_TRY();
	{
		ok = maint_delete_ex(run, path, size, kind, extra_json);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(run->cxt);
		run->callback_error = CopyErrorData();
		FlushErrorState();
		ok = false;
		if (run->result == MAINT_OK)
			run->result = MAINT_TRANSIENT;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	run->in_callback = false;
	return ok;
}

void
maint_callback_rethrow(MaintRun *run)
{
	ErrorData  *e = run->callback_error;

	run->in_callback = false;
	if (e == NULL)
		return;
	run->callback_error = NULL;
	ReThrowError(e);
}

/* ----------------------------------------------------------------
 * A job's run
 * ----------------------------------------------------------------
 */

typedef struct FinishStep
{
	MaintRun   *run;
	const char *state;			/* in: the outcome; out: the state written */
	bool		held;
} FinishStep;

static void
step_finish(void *arg)
{
	FinishStep *f = arg;
	MaintRun   *run = f->run;
	Oid			types[18] = {INT8OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, INT8OID,
		INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT4OID, BOOLOID, TEXTOID,
	INT8OID, TEXTOID, INT8OID};
	Datum		args[18];
	char		nulls[18];
	bool		failure = strcmp(f->state, "failed") == 0;
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(f->state);
	if (run->result != MAINT_OK)
		args[4] = CStringGetTextDatum(run->error);
	else
		nulls[4] = 'n';
	if (run->after_snapshot_id >= 0)
		args[5] = Int64GetDatum(run->after_snapshot_id);
	else
		nulls[5] = 'n';
	args[6] = Int64GetDatum(run->snapshots_expired);
	args[7] = Int64GetDatum(run->manifests_rewritten);
	args[8] = Int64GetDatum(run->manifests_added);
	args[9] = Int64GetDatum(run->files_deleted);
	args[10] = Int64GetDatum(run->bytes_deleted);
	args[11] = Int64GetDatum(run->orphans_found);
	args[12] = Int32GetDatum(tms_maintenance_max_attempts);
	args[13] = BoolGetDatum(failure && run->result == MAINT_TERMINAL);
	args[14] = CStringGetTextDatum("");
	args[15] = Int64GetDatum(run->files_skipped);
	/* a failure's detail and hint, for the user reading the job */
	if (run->result != MAINT_OK && (run->detail[0] || run->hint[0]))
		args[16] = CStringGetTextDatum(psprintf("%s%s%s", run->detail,
												run->detail[0] && run->hint[0] ? " " : "",
												run->hint));
	else
		nulls[16] = 'n';
	args[17] = Int64GetDatum(run->files_missing);

	/*
	 * failed: back to pending (retried) unless terminal or out of attempts,
	 * message = its detail and hint; skipped and cancelled: reason = the
	 * run's message; succeeded: the effect (files kept outside the allowed
	 * locations, files of expired snapshots found already deleted).
	 */
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET state = CASE WHEN $4 = 'failed' AND NOT $14 AND attempts < $13"
							   "                    THEN 'pending' ELSE $4 END,"
							   "       finished_at = CASE WHEN $4 = 'failed' AND NOT $14 AND attempts < $13"
							   "                          THEN NULL ELSE now() END,"
							   "       last_error = CASE WHEN $4 = 'failed' THEN $5 ELSE last_error END,"
							   "       reason = CASE WHEN $4 IN ('skipped', 'cancelled') THEN $5"
							   "                     WHEN $4 = 'succeeded' THEN NULL ELSE reason END,"
							   "       message = CASE WHEN $4 = 'succeeded' AND ($16 > 0 OR $18 > 0)"
							   "                      THEN concat_ws('; ',"
							   "                        CASE WHEN $16 > 0 THEN format('%s files outside the table location or the allowed locations were kept', $16) END,"
							   "                        CASE WHEN $18 > 0 THEN format('%s manifest lists or manifests of expired snapshots were already missing; the files only they listed are left to orphan cleanup', $18) END)"
							   "                      WHEN $4 = 'failed' AND $17 IS NOT NULL THEN $17"
							   "                      ELSE message END,"
							   "       after_snapshot_id = coalesce($6, after_snapshot_id),"
							   "       snapshots_expired = $7, manifests_rewritten = $8,"
							   "       manifests_added = $9, files_deleted = $10,"
							   "       bytes_deleted = $11, orphans_found = $12,"
							   "       phase = CASE WHEN $4 = 'failed' THEN phase ELSE 'done' END"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD
							   " RETURNING state",
							   18, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not finish maintenance job: %s", SPI_result_code_string(rc));
	f->held = SPI_processed == 1;
	if (!f->held)
		return;
	f->state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	MemoryContextSwitchTo(run->cxt);
	f->state = pstrdup(f->state);
	if (strcmp(f->state, "pending") != 0)
	{
		rc = SPI_execute_with_args("SELECT tms._job_ended($1)", 1, types, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not end maintenance job: %s", SPI_result_code_string(rc));
	}
	MemoryContextSwitchTo(run->cxt);
}

/* Run (or dry-run) the run's operation on the loaded table. */
void
maint_run_operation(MaintRun *run)
{
	switch (run->opt.op)
	{
		case MAINT_EXPIRE:
			maint_run_expire(run);
			break;
		case MAINT_ORPHAN:
			maint_run_orphan(run);
			break;
		case MAINT_REWRITE:
			maint_run_rewrite(run);
			break;
		case MAINT_COMPACTION:
		case MAINT_POSDELETE:
			maint_run_compact(run);
			break;
		case MAINT_RETENTION:
			maint_run_retention(run);
			break;
		default:
			maint_fail(run, MAINT_TERMINAL, "operation \"%s\" cannot run locally",
					   maint_op_name(run->opt.op));
	}
}

/*
 * An engine's run, then the table as the engine left it: the snapshot
 * before (as loaded at the start, or recorded by the attempt that
 * submitted) stays; the snapshot after is the table's current one.
 */
static void
run_engine(MaintRun *run)
{
	int64		before = run->before_snapshot_id;

	maint_run_engine(run);
	if (run->result != MAINT_OK)
		return;
	/* the run ended at the engine and did what it did: no cancel undoes it */
	run->ignore_cancel = true;
	if (maint_load(run))
	{
		/* the run's own commit, when the table had to tell it, stays */
		if (run->after_snapshot_id < 0)
			run->after_snapshot_id = run->before_snapshot_id;
		run->before_snapshot_id = before;
		if (run->opt.op == MAINT_RETENTION)
			maint_retention_engine_done(run, before);
	}
	else
	{
		/* it ran: what tms cannot see now is not the run's failure */
		ereport(LOG,
				(errmsg("maintenance job " INT64_FORMAT ": the table could not be loaded after its run: %s",
						run->job_id, run->error)));
		run->result = MAINT_OK;
		run->error[0] = '\0';
	}
}

/* The work of a job between start and finish; sets run->result. */
static void
run_local(MaintRun *run)
{
	ConnectStep cs = {run, false};
	ErrorData  *e = NULL;

	if (run->attempts > tms_maintenance_max_attempts)
	{
		maint_fail(run, MAINT_TERMINAL, "gave up after %d attempts; the last one did not finish",
				   run->attempts - 1);
		return;
	}
	if (!sched_owner_try_step(step_connect, &cs, &e))
	{
		maint_fail_code(run, e->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE ||
						e->sqlerrcode == ERRCODE_UNDEFINED_OBJECT ? MAINT_TERMINAL : MAINT_TRANSIENT,
						e->sqlerrcode, "%s%s%s", e->message, e->detail ? ": " : "",
						e->detail ? e->detail : "");
		return;
	}
	run->ns_io = tms_namespace_to_io(run->ns);

	/* an engine's run was submitted, or may have been: follow it, once */
	if (!run->opt.local && run->phase &&
		(strcmp(run->phase, "submit") == 0 || strcmp(run->phase, "engine") == 0))
	{
		run_engine(run);
		return;
	}

	/* a commit was in flight, or landed, when the last executor died */
	if (run->phase && strcmp(run->phase, "start") != 0 && run->commit_state != NULL)
	{
		if (run->opt.op == MAINT_EXPIRE)
			maint_resume_expire(run);
		else if (run->opt.op == MAINT_REWRITE)
			maint_resume_rewrite(run);
		else if (run->opt.op == MAINT_COMPACTION || run->opt.op == MAINT_POSDELETE)
			maint_resume_compact(run);
		else if (run->opt.op == MAINT_RETENTION)
			maint_resume_retention(run);
		return;
	}

	if (!maint_load(run))
		return;
	if (!maint_drift_gate(run))
		return;
	record_metrics(run, "before");
	if (!check_run(run, true))
		return;
	if (run->opt.local)
		maint_run_operation(run);
	else
		run_engine(run);
}

/* After the operation: flush, then the table as it is now for the record. */
static void
run_after(MaintRun *run)
{
	if (run->result == MAINT_OK)
		(void) maint_delete_flush(run);
	if (run->result == MAINT_OK && run->md != NULL)
	{
		if (run->after_snapshot_id < 0)
			run->after_snapshot_id = run->before_snapshot_id;
		record_metrics(run, "after");
	}
}

/*
 * CALL the procedure named by tms.maintenance_handler (job_id bigint, job
 * jsonb) for jobs of engines tms does not run itself: as its owner, never
 * as the worker's user, restricted and in a GUC nest level of its own, by
 * the OID the setting names (the rule of every task handler,
 * bridge/usercode.h).
 */
static void
call_handler(const char *job, int64 job_id)
{
	/* a signature names one procedure; a bare name must name only one */
	Oid			proc = DatumGetObjectId(DirectFunctionCall1(strchr(tms_maintenance_handler, '(')
															? regprocedurein : regprocin,
															CStringGetDatum(tms_maintenance_handler)));
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
	Form_pg_proc form;
	Datum		args[2];
	bool		nulls[2] = {false, false};

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for procedure %u", proc);
	form = (Form_pg_proc) GETSTRUCT(tup);
	if (form->prokind != PROKIND_PROCEDURE || form->pronargs != 2 ||
		form->proargtypes.values[0] != INT8OID || form->proargtypes.values[1] != JSONBOID)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("tms.maintenance_handler \"%s\" is not a procedure taking (bigint, jsonb)",
						tms_maintenance_handler),
				 errhint("Create it with CREATE PROCEDURE name(job_id bigint, job jsonb).")));
	}
	ReleaseSysCache(tup);
	args[0] = Int64GetDatum(job_id);
	args[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(job));
	tms_call_procedure_as_owner(proc, "tms.maintenance_handler", 2, args, nulls);
}

/*
 * The maintenance kind's sweep (sched_register_sweep), run after every prune
 * of the run history: end "failed" the jobs no task will finish, a job
 * whose task is gone and one handed to tms.maintenance_handler longer than
 * tms.handler_job_timeout ago (tms._reconcile_jobs).
 */
static void
maintenance_sweep(void)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	bool		isnull;
	int			rc;
	int			ended;

	/* a database whose tms is not updated to this version has none */
	rc = SPI_execute("SELECT 1 WHERE to_regprocedure('tms._reconcile_jobs(interval)') IS NOT NULL",
					 true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up tms._reconcile_jobs: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	args[0] = Int32GetDatum(tms_handler_job_timeout_s);
	rc = SPI_execute_with_args("SELECT tms._reconcile_jobs(make_interval(secs => $1))",
							   1, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not reconcile maintenance jobs: %s", SPI_result_code_string(rc));
	ended = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										&isnull));
	if (ended > 0)
		ereport(LOG,
				(errmsg("ended %d maintenance jobs that no task would finish", ended),
				 errdetail("Their reasons are in tms.table_maintenance_job.last_error.")));
}

/* Free what the run holds outside palloc. */
static void
run_release(MaintRun *run)
{
	maint_unload(run);
	if (run->conn)
		tms_catalog_release(run->conn);
	run->conn = NULL;
}

/*
 * The handler of the "maintenance" task kind (detached; see the file
 * header): a job's task ("job-<id>") runs its job, a batch's task
 * ("batch-<id>") the jobs of its batch (maint_batch.c).
 */
static SchedOutcome
maintenance_handler(SchedTask *task, ErrorData **error)
{
	bool		batch = strncmp(task->instance, "batch-", 6) == 0;
	const char *digits = batch ? task->instance + 6 :
	strncmp(task->instance, "job-", 4) == 0 ? task->instance + 4 : NULL;
	char	   *end = NULL;
	int64		id = 0;

	if (digits != NULL && *digits >= '0' && *digits <= '9')
		id = strtoi64(digits, &end, 10);
	if (id <= 0 || *end != '\0')
	{
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid maintenance task instance \"%s\"", task->instance),
							 NULL);
		return SCHED_FAILED;
	}
	return batch ? maint_run_batch(task, id, error) : maint_run_job(task, id, error);
}

/*
 * Run job job_id of task (its own, or its batch's): start it, run it,
 * finish it.  SCHED_DONE with *error set: it failed for good.
 */
SchedOutcome
maint_run_job(SchedTask *task, int64 job_id, ErrorData **error)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms maintenance run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	MaintRun   *run = palloc0(sizeof(MaintRun));
	StartStep	st;
	FinishStep	fin;
	OpsRunFailure failure;
	volatile SchedOutcome outcome = SCHED_DONE;

	run->cxt = cxt;
	run->qcxt = AllocSetContextCreate(cxt, "tms maintenance deletes", ALLOCSET_DEFAULT_SIZES);
	run->task = task;
	run->result = MAINT_OK;
	run->after_snapshot_id = -1;
	run->before_snapshot_id = -1;
	run->job_id = job_id;

	sched_task_subject(task, -1, -1, -1, run->job_id);

	PG_TRY();
	{
		ErrorData  *e = NULL;

		memset(&st, 0, sizeof(st));
		st.run = run;
		if (!sched_owner_try_step(step_start, &st, &e))
		{
			/* the run's context goes: the error moves to the caller's */
			MemoryContextSwitchTo(old);
			*error = sched_error(e->sqlerrcode, e->message, e->detail);
			(*error)->hint = e->hint ? pstrdup(e->hint) : NULL;
			MemoryContextSwitchTo(cxt);
			outcome = SCHED_FAILED;
		}
		else if (strcmp(st.state, "started") == 0 && !st.external)
		{
			ReadJobStep rj = {run, st.job};
			ErrorData  *re = NULL;

			/* in a step: an engine's options are checked against its server */
			if (!sched_owner_try_step(step_read_job, &rj, &re))
				maint_fail_code(run, MAINT_TERMINAL, re->sqlerrcode, "%s%s%s", re->message,
								re->detail ? ": " : "", re->detail ? re->detail : "");
			else
			{
				pgstat_report_activity(STATE_RUNNING,
									   psprintf("tms: %s of %s.%s (job " INT64_FORMAT ")",
												maint_op_name(run->opt.op), run->ns, run->table,
												run->job_id));
				run_local(run);
				run_after(run);
			}
			if (run->result == MAINT_LEASE_LOST || sched_lease_lost())
				outcome = SCHED_LEASE_LOST;
			else
			{
				fin.run = run;
				fin.held = false;
				fin.state = run->result == MAINT_OK ? "succeeded" :
					run->result == MAINT_SKIPPED ? "skipped" :
					run->result == MAINT_CANCELLED ? "cancelled" : "failed";
				sched_owner_step(step_finish, &fin);
				failure.sqlerrcode = run->sqlerrcode;
				failure.message = run->error;
				failure.detail = run->detail;
				failure.hint = run->hint;
				outcome = ops_run_outcome(!fin.held ? OPS_RUN_LEASE_LOST :
										  strcmp(fin.state, "pending") == 0 ? OPS_RUN_RETRY :
										  strcmp(fin.state, "failed") == 0 ? OPS_RUN_FAILED :
										  OPS_RUN_ENDED, &failure,
										  psprintf("maintenance job " INT64_FORMAT " (%s of %s.%s)",
												   run->job_id, maint_op_name(run->opt.op),
												   run->ns, run->table),
										  old, error);
			}
		}
	}
	PG_FINALLY();
	{
		run_release(run);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return outcome;
}
