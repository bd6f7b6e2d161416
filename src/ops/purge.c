/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  Async purge of dropped Iceberg tables (doc/purge.md): the
 *	  settings, tms.purge_table's enqueue, and the steps of the "purge"
 *	  task kind, the catalog drop first among them.  The walk and the
 *	  deletes are purge_walk.c.
 *
 * tms.purge_table() validates (the table exists, lies strictly below an
 * allowed location, can be walked once dropped: purge_check.c, is not
 * being purged already) and records a row of
 * tms.iceberg_cleanup_job in phase "drop", the storage credentials the
 * catalog vended, and a task of kind "purge" whose instance is the job id,
 * all in the caller's transaction: a rollback leaves the table and no job.
 * The task kind is detached (src/sched/sched.c): its handler runs outside
 * transactions, records its progress in short steps conditional on the
 * task's lease, and acts as the role that requested the purge (its USAGE
 * on the server, its user mapping).  A run:
 *
 *	 begin		(step) read the job, mark it RUNNING, count a previous run
 *				that never finished (its worker died) as a failed attempt,
 *				read the server's options and the requester's user mapping.
 *	 drop		(phase "drop" only) load the table again: a table replaced
 *				since (another uuid) or moved out of its location fails the
 *				job, as does one the walk could not do (purge_check.c: the
 *				metadata file unreadable or outside the allowed roots, a
 *				symbolic link on its path, gc.enabled=false), all before
 *				anything is dropped; otherwise its current metadata
 *				location and vended
 *				credentials are recorded (step), then the catalog entry is
 *				dropped without purge.  A drop whose outcome is unknown
 *				(timeout, 5xx, a broken connection) is resolved before
 *				anything else by loading the table once more: gone means
 *				dropped, still there means the attempt failed and is
 *				retried.  A table already gone (a previous attempt's drop
 *				landed) is purged from the recorded metadata location.
 *				(step) phase "content", dropped_at.  With the server option
 *				purge_hold_namespace the entry is renamed into that
 *				namespace instead (the held name recorded first), so that
 *				vended credentials can be loaded again through it while the
 *				files are deleted; a catalog that refuses gets the drop.
 *	 walk		purge_walk.c.
 *	 release	(held tables only, phase "release") once every file is
 *				gone, the held entry is dropped.
 *	 progress	(step, at most once a second) counters and heartbeat_at.
 *	 finish		(step) SUCCEEDED, or the failure: attempts + 1, last_error,
 *				back to PENDING (the scheduler retries after its backoff),
 *				or FAILED at tms.purge_max_attempts or at once when the
 *				failure is terminal (metadata gone or corrupt, server
 *				dropped, table replaced, captured credentials expired).
 *				The captured credentials are deleted when the job ends,
 *				and the job is counted in tms.stat_purges with what its
 *				last attempt deleted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/plain_memory.h"
#include "bridge/role.h"
#include "observe/stats.h"
#include "io/util/secret_names.h"
#include "ops/ops.h"
#include "ops/outcome.h"
#include "ops/purge.h"
#include "ops/purge_int.h"
#include "sched/lease.h"
#include "sched/sched.h"

int			tms_purge_delete_batch_size = 1000;
int			tms_purge_max_attempts = 5;
int			tms_purge_retention_s = 30 * 24 * 3600;
int			tms_purge_concurrency = 2;
int			tms_purge_batch_pause_ms = 0;

/* progress is written at most this often */
#define PROGRESS_INTERVAL_MS 1000

/* ----------------------------------------------------------------
 * Settings and registration
 * ----------------------------------------------------------------
 */

static SchedOutcome purge_handler(SchedTask *task, ErrorData **error);

/*
 * Define the tms.purge_* settings and the detached "purge" task kind.
 */
void
tms_purge_init(void)
{
	DefineCustomIntVariable("tms.purge_delete_batch_size",
							gettext_noop("Files deleted per bulk request by a purge."),
							gettext_noop("S3 DeleteObjects takes at most 1000 keys; 1 deletes one file per request."),
							&tms_purge_delete_batch_size,
							1000, 1, 1000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.purge_max_attempts",
							gettext_noop("Failed attempts after which a purge job is FAILED."),
							NULL,
							&tms_purge_max_attempts,
							5, 1, 1000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.purge_retention",
							gettext_noop("How long SUCCEEDED and FAILED purge jobs are kept."),
							NULL,
							&tms_purge_retention_s,
							30 * 24 * 3600, 60, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.purge_concurrency",
							gettext_noop("Purge jobs that may run at once across all workers."),
							NULL,
							&tms_purge_concurrency,
							2, 1, 1000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.purge_batch_pause",
							gettext_noop("Pause after each batch of deletes a purge hands to its deleter."),
							gettext_noop("Throttles the rate at which a purge queues deletes; requests already in flight go on. 0 does not pause."),
							&tms_purge_batch_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	sched_register_detached("purge", purge_handler, &tms_purge_concurrency);
}

/* ----------------------------------------------------------------
 * Enqueue: tms.purge_table
 * ----------------------------------------------------------------
 */

/* Raise if an active job holds the identifier (as the extension owner). */
static void
check_no_active_job(const char *server, const char *ns, const char *table)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	int			rc;

	args[0] = CStringGetTextDatum(server);
	args[1] = CStringGetTextDatum(ns);
	args[2] = CStringGetTextDatum(table);
	rc = SPI_execute_with_args("SELECT id, state FROM tms.iceberg_cleanup_job"
							   " WHERE server = $1::name AND namespace = $2 AND table_name = $3"
							   "   AND state IN ('PENDING', 'RUNNING')",
							   3, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up purge jobs: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("table \"%s.%s\" of server \"%s\" is already being purged", ns, table, server),
				 errdetail("Purge job %s is %s.",
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2)),
				 errhint("See tms.purge_jobs; the name is free again when the job has ended.")));
}

/* What an enqueue records. */
typedef struct Enqueue
{
	const char *server;
	const char *ns;
	const char *table;
	Oid			requested_by;
	char	   *uuid;
	char	   *location;		/* canonical */
	char	   *metadata_location;
	char	   *storage_json;	/* non-secret storage settings */
	char	   *vended_json;	/* the vended config, NULL: nothing secret
								 * vended */
	int64		expires_ms;		/* -1: unknown */
	bool		delete_others;	/* delete_other_tables_files */
} Enqueue;

/*
 * The storage settings for the table: the non-secret ones as JSON for the
 * job row; the vended config, when it holds a credential, for the
 * owner-only credentials table.
 */
static void
describe_storage(const TmsCatalogConn *conn, const IoLoadedTable *t, Enqueue *e)
{
	StringInfoData buf;
	StringInfoData vended;
	bool		any_secret = false;
	const char *endpoint = conn->server->s3_endpoint;

	e->expires_ms = -1;
	initStringInfo(&vended);
	appendStringInfoChar(&vended, '{');
	for (size_t i = 0; i < t->nconfig; i++)
	{
		const char *k = t->config[i].key;

		if (io_secret_key(k, strlen(k)))
			any_secret = true;
		if (strcmp(k, "s3.session-token-expires-at-ms") == 0 ||
			strncmp(k, "adls.sas-token-expires-at-ms.", 29) == 0 ||
			strcmp(k, "gcs.oauth2.token-expires-at") == 0)
		{
			int64		x = strtoll(t->config[i].value, NULL, 10);

			/* the first of the credentials to expire */
			if (e->expires_ms < 0 || x < e->expires_ms)
				e->expires_ms = x;
		}
		if (strcmp(k, "s3.endpoint") == 0 && conn->server->s3_vended_endpoint)
			endpoint = t->config[i].value;
		if (i > 0)
			appendStringInfoString(&vended, ", ");
		escape_json(&vended, k);
		appendStringInfoString(&vended, ": ");
		escape_json(&vended, t->config[i].value);
	}
	appendStringInfoChar(&vended, '}');
	e->vended_json = any_secret ? vended.data : NULL;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"endpoint\": ");
	if (endpoint && (any_secret || endpoint == conn->server->s3_endpoint))
		escape_json(&buf, endpoint);
	else if (conn->server->s3_endpoint)
		escape_json(&buf, conn->server->s3_endpoint);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfo(&buf, ", \"credentials\": \"%s\"}",
					 any_secret ? "vended by the catalog" :
					 conn->creds.s3_access_key_id || conn->creds.azure_account_key ||
					 conn->creds.azure_sas_token || conn->creds.azure_client_id ||
					 conn->creds.gcs_hmac_access_id || conn->creds.gcs_oauth2_token ||
					 conn->creds.gcs_service_account_key ?
					 "user mapping" : "none");
	e->storage_json = buf.data;
}

/* Insert the job, its credentials and its task (as the extension owner). */
static int64
insert_job(const Enqueue *e)
{
	Oid			types[9] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, OIDOID,
	BOOLOID};
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			ctypes[3] = {INT8OID, TEXTOID, INT8OID};
	Datum		cargs[3];
	char		cnulls[3] = {' ', ' ', ' '};
	bool		isnull;
	int64		id;
	int			rc;

	args[0] = CStringGetTextDatum(e->server);
	args[1] = CStringGetTextDatum(e->ns);
	args[2] = CStringGetTextDatum(e->table);
	if (e->uuid)
		args[3] = CStringGetTextDatum(e->uuid);
	else
		nulls[3] = 'n';
	args[4] = CStringGetTextDatum(e->location);
	args[5] = CStringGetTextDatum(e->metadata_location);
	args[6] = CStringGetTextDatum(e->storage_json);
	args[7] = ObjectIdGetDatum(e->requested_by);
	args[8] = BoolGetDatum(e->delete_others);
	rc = SPI_execute_with_args("INSERT INTO tms.iceberg_cleanup_job"
							   " (server, namespace, table_name, table_uuid, table_location,"
							   "  metadata_location, storage, requested_by, phase,"
							   "  delete_other_tables_files)"
							   " VALUES ($1::name, $2, $3, $4, $5, $6, $7::jsonb, $8::regrole, 'drop', $9)"
							   " RETURNING id",
							   9, types, args, nulls, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not record purge job: %s", SPI_result_code_string(rc));
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

	if (e->vended_json)
	{
		cargs[0] = Int64GetDatum(id);
		cargs[1] = CStringGetTextDatum(e->vended_json);
		if (e->expires_ms >= 0)
			cargs[2] = Int64GetDatum(e->expires_ms);
		else
			cnulls[2] = 'n';
		rc = SPI_execute_with_args("INSERT INTO tms.iceberg_cleanup_credentials"
								   " (job_id, config, expires_at)"
								   " VALUES ($1, $2::jsonb, to_timestamp($3 / 1000.0))",
								   3, ctypes, cargs, cnulls, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "could not record purge credentials: %s", SPI_result_code_string(rc));
	}
	cargs[0] = Int64GetDatum(id);
	rc = SPI_execute_with_args("SELECT tms.schedule_task('purge', $1::text)",
							   1, ctypes, cargs, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not schedule purge task: %s", SPI_result_code_string(rc));
	return id;
}

int64
tms_purge_enqueue(const char *server, const char *ns, const char *table, bool delete_others)
{
	TmsCatalogConn *conn;
	IoLoadedTable t;
	IcebergTableIdentity ident;
	TmsIoScope *scope;
	Enqueue		e;
	TmsError	err;
	TmsRoleSave save;
	int64		id;
	MemoryContext cxt = CurrentMemoryContext;

	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
	memset(&e, 0, sizeof(e));
	e.server = server;
	e.ns = ns;
	e.table = table;
	e.requested_by = tms_acting_role();
	e.delete_others = delete_others;

	/* a check that needs no network: the server allows deleting somewhere */
	{
		TmsServer  *s = tms_server_read_by_name(server, false);
		int			nallowed = s->nallowed;
		char	   *name = pstrdup(s->name);

		tms_server_free(s);
		if (nallowed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot purge tables of server \"%s\": it has no allowed_locations", name),
					 errdetail("tms deletes files only strictly below the storage roots a server allows."),
					 errhint("ALTER SERVER %s OPTIONS (ADD allowed_locations 's3://bucket/warehouse/');",
							 quote_identifier(name))));
	}
	conn = tms_catalog_connect(server);

	/*
	 * The job needs the table's identity, not its history: a load with the
	 * referenced snapshots only, which a table of long history answers as
	 * fast as a new one.  The worker loads it whole before deleting.
	 */
	memset(&t, 0, sizeof(t));

	/*
	 * the loaded table and its metadata live in the scope: an error frees
	 * them
	 */
	scope = tms_io_scope_begin();
	if (io_catalog_load_table_refs(conn->catalog, tms_namespace_to_io(ns), table, &t, &err) != 0)
		tms_error_ereport(&err);	/* 404: a clear error, no job */
	{
		TmsError	ierr;
		PurgeCheck	check;

		CHECK_FOR_INTERRUPTS();
		if (t.metadata_location == NULL || t.metadata_json == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot purge table \"%s.%s\": the catalog reports no metadata location", ns, table),
					 errdetail("A staged table has no files to purge."),
					 errhint("Drop it with tms.drop_table().")));
		/* the identity only: what the catalog sends besides is not used */
		if (!iceberg_metadata_identity(t.metadata_json, strlen(t.metadata_json), NULL,
									   &ident, &ierr))
			tms_error_ereport(&ierr);
		e.location = tms_check_table_location(conn->server, ns, table, ident.location, "purge");
		e.uuid = ident.table_uuid ? pstrdup(ident.table_uuid) : NULL;
		e.metadata_location = pstrdup(t.metadata_location);
		/* nothing is recorded for a table the purge could not walk */
		if (!purge_check_walkable(conn->server, &conn->creds, t.config, t.nconfig, ns, table,
								  e.metadata_location, e.location, e.uuid, false, &check))
			ereport(ERROR,
					(errcode(check.sqlerrcode),
					 errmsg_internal("%s", check.message),
					 check.detail[0] ? errdetail_internal("%s", check.detail) : 0,
					 check.hint[0] ? errhint("%s", check.hint) : 0));
		describe_storage(conn, &t, &e);
		iceberg_table_identity_free(&ident);
		io_loaded_table_free(&t);
	}
	tms_io_scope_end(scope);

	/* the job, in this transaction; a worker drops the table after commit */
	SPI_connect();
	tms_become_extension_owner(&save);
	check_no_active_job(server, ns, table);
	id = insert_job(&e);
	tms_restore_role(&save);
	SPI_finish();
	MemoryContextSwitchTo(cxt);
	return id;
}

/* ----------------------------------------------------------------
 * A run
 * ----------------------------------------------------------------
 */

static void purge_run_fail_va(PurgeRun *run, RunResult kind, int sqlerrcode, const char *fmt,
							  va_list ap) pg_attribute_printf(4, 0);

static void
purge_run_fail_va(PurgeRun *run, RunResult kind, int sqlerrcode, const char *fmt, va_list ap)
{
	if (run->result != RUN_OK)
		return;
	run->result = kind;
	run->sqlerrcode = sqlerrcode;
	vsnprintf(run->error, sizeof(run->error), fmt, ap);
}

void
purge_run_fail(PurgeRun *run, RunResult kind, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	purge_run_fail_va(run, kind, 0, fmt, ap);
	va_end(ap);
}

/* The same with the SQLSTATE the failure is recorded with. */
void
purge_run_fail_code(PurgeRun *run, RunResult kind, int sqlerrcode, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	purge_run_fail_va(run, kind, sqlerrcode, fmt, ap);
	va_end(ap);
}

/* ----------------------------------------------------------------
 * Steps (short transactions)
 * ----------------------------------------------------------------
 */

/* The lease condition every job write carries: $2 instance, $3 version. */
#define LEASE_HELD SCHED_LEASE_HELD("purge")

static const char *job_sql =
"SELECT j.state, j.server, j.namespace, j.table_name, j.table_uuid,"
"       j.table_location, j.metadata_location, j.requested_by::oid,"
"       j.phase, j.attempts, c.job_id IS NOT NULL, c.expires_at,"
"       j.held_namespace, j.held_name, j.delete_other_tables_files"
"  FROM tms.iceberg_cleanup_job j"
"  LEFT JOIN tms.iceberg_cleanup_credentials c ON c.job_id = j.id"
" WHERE j.id = $1";

/*
 * Mark RUNNING; a run that found the job RUNNING already follows one that
 * never finished (its worker died), which counts as a failed attempt.
 * Counters restart: a run deletes everything again.
 */
static const char *start_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET attempts = attempts + CASE WHEN state = 'RUNNING' THEN 1 ELSE 0 END,"
"       last_error = CASE WHEN state = 'RUNNING'"
"                    THEN 'a previous attempt did not finish (its executor died)'"
"                    ELSE last_error END,"
"       state = 'RUNNING', started_at = coalesce(started_at, now()),"
"       heartbeat_at = now(), updated_at = now(),"
"       files_deleted = 0, bytes_freed = 0, files_skipped = 0, skipped_example = NULL,"
"       files_kept = 0, kept_example = NULL, files_unreadable = 0, delete_requests = 0"
" WHERE id = $1 AND state IN ('PENDING', 'RUNNING') AND" LEASE_HELD
" RETURNING attempts";

/* Read the captured vended credentials into the run. */
static void
read_vended(PurgeRun *run)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1];
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	rc = SPI_execute_with_args("SELECT key, value FROM tms.iceberg_cleanup_credentials,"
							   " jsonb_each_text(config) WHERE job_id = $1",
							   1, types, args, NULL, true, 0);
	MemoryContextSwitchTo(run->cxt);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read purge credentials: %s", SPI_result_code_string(rc));
	run->nvended = (int) SPI_processed;
	run->vended_kv = palloc0(sizeof(IoKeyValue) * (run->nvended + 1));
	for (int i = 0; i < run->nvended; i++)
	{
		run->vended_kv[i].key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		run->vended_kv[i].value = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
	}
}

static void
step_read_vended(void *arg)
{
	PurgeRun   *run = arg;

	read_vended(run);
	run->vended = run->nvended > 0;
	run->expires_at = 0;
}

static void
step_begin(void *arg)
{
	PurgeRun   *run = (PurgeRun *) arg;
	Oid			types[3] = {INT8OID, TEXTOID, INT8OID};
	Datum		args[3];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	ForeignServer *server;
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	rc = SPI_execute_with_args(job_sql, 1, types, args, NULL, true, 1);
	/* SPI leaves its own context current: what we keep goes to the run's */
	MemoryContextSwitchTo(run->cxt);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read purge job: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	run->found = true;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	run->state = SPI_getvalue(tup, desc, 1);
	run->server_name = SPI_getvalue(tup, desc, 2);
	run->ns = SPI_getvalue(tup, desc, 3);
	run->table = SPI_getvalue(tup, desc, 4);
	run->table_uuid = SPI_getvalue(tup, desc, 5);
	run->location = SPI_getvalue(tup, desc, 6);
	run->metadata_location = SPI_getvalue(tup, desc, 7);
	run->requested_by = DatumGetObjectId(SPI_getbinval(tup, desc, 8, &isnull));
	run->phase = SPI_getvalue(tup, desc, 9);
	run->attempts = DatumGetInt32(SPI_getbinval(tup, desc, 10, &isnull));
	run->vended = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
	d = SPI_getbinval(tup, desc, 12, &isnull);
	run->expires_at = isnull ? 0 : DatumGetTimestampTz(d);
	run->held_ns = SPI_getvalue(tup, desc, 13);
	run->held_name = SPI_getvalue(tup, desc, 14);
	run->delete_others = DatumGetBool(SPI_getbinval(tup, desc, 15, &isnull));
	if (strcmp(run->state, "PENDING") != 0 && strcmp(run->state, "RUNNING") != 0)
		return;
	if (run->vended)
		read_vended(run);

	rc = SPI_execute_with_args(start_sql, 3, types, args, NULL, false, 0);
	MemoryContextSwitchTo(run->cxt);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not start purge job: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		run->result = RUN_LEASE_LOST;
		return;
	}
	run->attempts = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));

	/* the server's options and the requester's user mapping */
	server = GetForeignServerByName(run->server_name, true);
	if (server != NULL)
	{
		run->server = tms_server_read(server);
		tms_credentials_read(run->requested_by, server->serverid, &run->creds);
	}
	MemoryContextSwitchTo(run->cxt);
}

static const char *progress_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET files_deleted = $4, bytes_freed = $5, files_skipped = $6,"
"       skipped_example = $7, files_kept = $8, files_unreadable = $9,"
"       delete_requests = $10, phase = coalesce($11, phase), kept_example = $12,"
"       heartbeat_at = now(), updated_at = now()"
" WHERE id = $1 AND state = 'RUNNING' AND" LEASE_HELD;

/* $1 .. $12 of progress_sql and finish_sql */
#define NCOUNTER_ARGS 12

static int
fill_counter_args(PurgeRun *run, Datum *args, char *nulls, const char *phase)
{
	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = Int64GetDatum(run->deleted);
	args[4] = Int64GetDatum(run->bytes);
	args[5] = Int64GetDatum(run->skipped);
	if (run->skipped_example)
		args[6] = CStringGetTextDatum(run->skipped_example);
	else
		nulls[6] = 'n';
	args[7] = Int64GetDatum(run->kept);
	args[8] = Int64GetDatum(run->unreadable);
	args[9] = Int64GetDatum(run->requests);
	if (phase)
		args[10] = CStringGetTextDatum(phase);
	else
		nulls[10] = 'n';
	if (run->kept_example)
		args[11] = CStringGetTextDatum(run->kept_example);
	else
		nulls[11] = 'n';
	return NCOUNTER_ARGS;
}

static Oid	counter_types[NCOUNTER_ARGS] = {INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID,
INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID, TEXTOID, TEXTOID};

typedef struct ProgressArg
{
	PurgeRun   *run;
	const char *phase;
} ProgressArg;

static void
step_progress(void *arg)
{
	ProgressArg *p = (ProgressArg *) arg;
	Datum		args[NCOUNTER_ARGS];
	char		nulls[NCOUNTER_ARGS];
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	fill_counter_args(p->run, args, nulls, p->phase);
	rc = SPI_execute_with_args(progress_sql, NCOUNTER_ARGS, counter_types, args, nulls,
							   false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record purge progress: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		p->run->result = RUN_LEASE_LOST;
}

/* Write the counters now (force) or if the last write is a second old. */
void
purge_write_progress(PurgeRun *run, const char *phase, bool force)
{
	TimestampTz now = GetCurrentTimestamp();
	ProgressArg p;

	if (!force && !TimestampDifferenceExceeds(run->last_progress, now, PROGRESS_INTERVAL_MS))
		return;
	run->last_progress = now;
	p.run = run;
	p.phase = phase;
	sched_owner_step(step_progress, &p);
}

/*
 * The end of a run.  $13: the error (NULL: SUCCEEDED); $14: terminal;
 * $15: max attempts; $16: retention (s).  Returns the new state.
 */
static const char *finish_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET files_deleted = $4, bytes_freed = $5, files_skipped = $6,"
"       skipped_example = $7, files_kept = $8, files_unreadable = $9,"
"       delete_requests = $10, phase = coalesce($11, phase), kept_example = $12,"
"       attempts = attempts + CASE WHEN $13 IS NULL THEN 0 ELSE 1 END,"
"       last_error = $13,"
"       state = CASE WHEN $13 IS NULL THEN 'SUCCEEDED'"
"                    WHEN $14 OR attempts + 1 >= $15 THEN 'FAILED'"
"                    ELSE 'PENDING' END,"
"       finished_at = CASE WHEN $13 IS NULL OR $14 OR attempts + 1 >= $15"
"                          THEN now() END,"
"       heartbeat_at = now(), updated_at = now()"
" WHERE id = $1 AND state = 'RUNNING' AND" LEASE_HELD
" RETURNING state, (extract(epoch FROM finished_at - started_at) * 1e6)::int8";

typedef struct FinishArg
{
	PurgeRun   *run;
	const char *error;
	bool		terminal;
	char	   *state;			/* out; NULL: lease lost */
} FinishArg;

/*
 * Count a purge job that ended (state SUCCEEDED or FAILED) in
 * tms.stat_purges, with what its last attempt deleted.
 */
static void
count_purge(PurgeRun *run, const char *state, int64 duration_us)
{
	int64		delta[TMS_STAT_JOB_REQUESTS + 1];

	delta[TMS_STAT_JOB_ENDED] = 1;
	delta[TMS_STAT_JOB_DURATION_US] = Max(duration_us, 0);
	delta[TMS_STAT_JOB_FILES] = run->deleted;
	delta[TMS_STAT_JOB_BYTES] = run->bytes;
	delta[TMS_STAT_JOB_SKIPPED] = run->skipped;
	delta[TMS_STAT_JOB_REQUESTS] = run->requests;
	tms_stat_add(TMS_STAT_PURGES, run->server_name,
				 strcmp(state, "SUCCEEDED") == 0 ? "succeeded" : "failed", NULL,
				 delta, lengthof(delta));
}

static void
step_finish(void *arg)
{
	FinishArg  *f = (FinishArg *) arg;
	Oid			types[NCOUNTER_ARGS + 4];
	Datum		args[NCOUNTER_ARGS + 4];
	char		nulls[NCOUNTER_ARGS + 4];
	bool		isnull;
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	memcpy(types, counter_types, sizeof(counter_types));
	types[NCOUNTER_ARGS] = TEXTOID;
	types[NCOUNTER_ARGS + 1] = BOOLOID;
	types[NCOUNTER_ARGS + 2] = INT4OID;
	types[NCOUNTER_ARGS + 3] = INT4OID;
	fill_counter_args(f->run, args, nulls, NULL);
	if (f->error)
		args[NCOUNTER_ARGS] = CStringGetTextDatum(f->error);
	else
		nulls[NCOUNTER_ARGS] = 'n';
	args[NCOUNTER_ARGS + 1] = BoolGetDatum(f->terminal);
	args[NCOUNTER_ARGS + 2] = Int32GetDatum(tms_purge_max_attempts);
	args[NCOUNTER_ARGS + 3] = Int32GetDatum(tms_purge_retention_s);
	rc = SPI_execute_with_args(finish_sql, NCOUNTER_ARGS + 3, types, args, nulls, false, 0);
	MemoryContextSwitchTo(f->run->cxt);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record the end of a purge attempt: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	f->state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (strcmp(f->state, "PENDING") == 0)
		return;
	count_purge(f->run, f->state,
				DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											2, &isnull)));

	/* the job ended: its captured credentials go, old rows are pruned */
	rc = SPI_execute_with_args("DELETE FROM tms.iceberg_cleanup_credentials WHERE job_id = $1",
							   1, types, args, NULL, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not delete purge credentials: %s", SPI_result_code_string(rc));
	rc = SPI_execute_with_args("DELETE FROM tms.iceberg_cleanup_job"
							   " WHERE state IN ('SUCCEEDED', 'FAILED')"
							   "   AND finished_at < now() - make_interval(secs => $16)",
							   NCOUNTER_ARGS + 4, types, args, nulls, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not prune purge jobs: %s", SPI_result_code_string(rc));
}


/* ----------------------------------------------------------------
 * The catalog drop
 * ----------------------------------------------------------------
 */

/* Connect as the requester (its USAGE, its mapping), pinned for the run. */
static void
step_connect(void *arg)
{
	PurgeRun   *run = arg;
	TmsRoleSave save;

	tms_become_role(run->requested_by, psprintf("purge job " INT64_FORMAT, run->job_id), &save);
	run->conn = tms_catalog_connect(run->server_name);
	tms_catalog_keep(run->conn);
	tms_restore_role(&save);
}

typedef struct DropRecord
{
	PurgeRun   *run;
	const char *metadata_location;	/* NULL: keep the recorded one */
	const char *vended_json;	/* replace the captured credentials */
	const char *phase;
	bool		dropped;
	bool		set_held;		/* record held_ns and held_name (NULL: none) */
	const char *held_ns;
	const char *held_name;
} DropRecord;

static void
step_drop_record(void *arg)
{
	DropRecord *dr = arg;
	Oid			types[9] = {INT8OID, TEXTOID, INT8OID, TEXTOID, TEXTOID, BOOLOID,
	BOOLOID, TEXTOID, TEXTOID};
	Datum		args[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			rc;

	args[0] = Int64GetDatum(dr->run->job_id);
	args[1] = CStringGetTextDatum(dr->run->task->instance);
	args[2] = Int64GetDatum(dr->run->task->version);
	if (dr->metadata_location)
		args[3] = CStringGetTextDatum(dr->metadata_location);
	else
		nulls[3] = 'n';
	args[4] = CStringGetTextDatum(dr->phase);
	args[5] = BoolGetDatum(dr->dropped);
	args[6] = BoolGetDatum(dr->set_held);
	if (dr->held_ns)
		args[7] = CStringGetTextDatum(dr->held_ns);
	else
		nulls[7] = 'n';
	if (dr->held_name)
		args[8] = CStringGetTextDatum(dr->held_name);
	else
		nulls[8] = 'n';
	rc = SPI_execute_with_args("UPDATE tms.iceberg_cleanup_job"
							   "   SET metadata_location = coalesce($4, metadata_location),"
							   "       phase = $5, updated_at = now(), heartbeat_at = now(),"
							   "       dropped_at = CASE WHEN $6 THEN now() ELSE dropped_at END,"
							   "       held_namespace = CASE WHEN $7 THEN $8 ELSE held_namespace END,"
							   "       held_name = CASE WHEN $7 THEN $9 ELSE held_name END"
							   " WHERE id = $1 AND state = 'RUNNING' AND" LEASE_HELD,
							   9, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the drop of purge job: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		dr->run->result = RUN_LEASE_LOST;
		return;
	}
	if (dr->metadata_location && dr->vended_json == NULL)
	{
		rc = SPI_execute_with_args("DELETE FROM tms.iceberg_cleanup_credentials WHERE job_id = $1",
								   1, types, args, NULL, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not delete purge credentials: %s", SPI_result_code_string(rc));
	}
	else if (dr->vended_json)
	{
		args[1] = CStringGetTextDatum(dr->vended_json);
		rc = SPI_execute_with_args("INSERT INTO tms.iceberg_cleanup_credentials (job_id, config)"
								   " VALUES ($1, $2::jsonb)"
								   " ON CONFLICT (job_id) DO UPDATE"
								   " SET config = EXCLUDED.config, expires_at = NULL",
								   2, types, args, NULL, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "could not record purge credentials: %s", SPI_result_code_string(rc));
	}
}

/* Did the table go?  Load it once more (the outcome of a drop). */
static int
table_gone(TmsCatalogConn *conn, const char *ns_io, const char *table, TmsError *err)
{
	IoLoadedTable again;

	memset(&again, 0, sizeof(again));
	io_catalog_forget(conn->catalog, ns_io, table);
	if (io_catalog_load_table(conn->catalog, ns_io, table, &again, err) == 0)
	{
		io_loaded_table_free(&again);
		return 0;				/* still there */
	}
	return err->code == IO_ERR_NO_SUCH_TABLE ? 1 : -1;	/* gone / unknown */
}

/* The vended config of a load, as JSON, when it holds a credential. */
static char *
vended_json(const IoLoadedTable *t)
{
	StringInfoData b;
	bool		secret = false;

	initStringInfo(&b);
	appendStringInfoChar(&b, '{');
	for (size_t i = 0; i < t->nconfig; i++)
	{
		secret |= io_secret_key(t->config[i].key, strlen(t->config[i].key));
		if (i > 0)
			appendStringInfoString(&b, ", ");
		escape_json(&b, t->config[i].key);
		appendStringInfoString(&b, ": ");
		escape_json(&b, t->config[i].value);
	}
	appendStringInfoChar(&b, '}');
	return secret ? b.data : NULL;
}

/*
 * Check a table loaded for the drop against the job (same uuid, same
 * location) and fill dr with where its files are now; frees *t.  false
 * (run->result set) when it must not be dropped.
 */
static pg_noinline bool
check_loaded(PurgeRun *run, IoLoadedTable *t, DropRecord *dr)
{
	IcebergTableMetadata *volatile md = NULL;
	volatile bool ok = true;

	PG_TRY();
	{
		TmsError	ierr;
		PurgeCheck	check;
		char	   *c = NULL;

		if (t->metadata_location == NULL || t->metadata_json == NULL ||
			!iceberg_metadata_parse(t->metadata_json, strlen(t->metadata_json), NULL,
									(IcebergTableMetadata **) &md, &ierr))
		{
			purge_run_fail(run, RUN_TERMINAL, "cannot read the current metadata of table \"%s.%s\"",
						   run->ns, run->table);
			ok = false;
		}
		else if (run->table_uuid && md->table_uuid &&
				 strcmp(run->table_uuid, md->table_uuid) != 0)
		{
			purge_run_fail(run, RUN_TERMINAL,
						   "table \"%s.%s\" was replaced since tms.purge_table: its uuid is now %s, not %s; it was not dropped",
						   run->ns, run->table, md->table_uuid, run->table_uuid);
			ok = false;
		}
		else if ((c = tms_location_canonical(run->server, md->location, NULL)) == NULL ||
				 strcmp(c, run->location) != 0)
		{
			purge_run_fail(run, RUN_TERMINAL,
						   "the location of table \"%s.%s\" changed since tms.purge_table (now \"%s\"); it was not dropped",
						   run->ns, run->table, md->location ? md->location : "");
			ok = false;
		}
		else if (!purge_check_walkable(run->server, &run->creds, t->config, t->nconfig,
									   run->ns, run->table, t->metadata_location,
									   run->location, md->table_uuid, true, &check))
		{
			/* what the catalog answers now could not be walked: no drop */
			purge_run_fail_code(run, check.transient ? RUN_TRANSIENT : RUN_TERMINAL,
								check.sqlerrcode, "%s; it was not dropped: %s",
								check.message, check.detail);
			ok = false;
		}
		if (ok)
		{
			dr->metadata_location = pstrdup(t->metadata_location);
			dr->vended_json = vended_json(t);
		}
	}
	PG_CATCH();
	{
		iceberg_metadata_free(md);
		io_loaded_table_free(t);
		PG_RE_THROW();
	}
	PG_END_TRY();
	iceberg_metadata_free(md);
	io_loaded_table_free(t);
	return ok;
}

/* A failed catalog change whose outcome nobody knows: read to resolve it. */
static bool
outcome_unknown(const TmsError *err)
{
	return err->code == IO_ERR_TIMEOUT || err->code == IO_ERR_SERVER ||
		err->code == IO_ERR_UNAVAILABLE || err->code == IO_ERR_PROTOCOL ||
		err->code == IO_ERR_CONNECT || err->code == IO_ERR_COMMIT_STATE_UNKNOWN;
}

/* Record the run's hold (NULL: none) in the job row. */
static bool
record_hold(PurgeRun *run, const char *held_ns, const char *held_name)
{
	DropRecord	dr;
	ErrorData  *e;

	memset(&dr, 0, sizeof(dr));
	dr.run = run;
	dr.phase = run->phase ? run->phase : "drop";
	dr.set_held = true;
	dr.held_ns = held_ns;
	dr.held_name = held_name;
	if (!sched_owner_try_step(step_drop_record, &dr, &e))
	{
		purge_run_fail_code(run, RUN_TRANSIENT, e->sqlerrcode, "%s", e->message);
		return false;
	}
	run->held_ns = held_ns ? MemoryContextStrdup(run->cxt, held_ns) : NULL;
	run->held_name = held_name ? MemoryContextStrdup(run->cxt, held_name) : NULL;
	return run->result == RUN_OK;
}

/*
 * Hold the table: move its catalog entry to the server's
 * purge_hold_namespace as run->held_name (recorded before), creating the
 * namespace if need be.  1: held; 0: the catalog will not (the caller
 * drops it instead, the hold forgotten); -1: failed (run->result set).
 */
static int
hold_table(PurgeRun *run, TmsCatalogConn *conn, const char *ns_io)
{
	char	   *hold_io = tms_namespace_to_io(run->held_ns);
	TmsError	err;
	TmsError	err2;
	int			rc;

	rc = io_catalog_rename_table(conn->catalog, ns_io, run->table, hold_io, run->held_name,
								 &err);
	if (rc != 0 && err.code == IO_ERR_NO_SUCH_NAMESPACE)
	{
		if (io_catalog_create_namespace(conn->catalog, hold_io, &err2) != 0 &&
			err2.code != IO_ERR_ALREADY_EXISTS)
		{
			purge_run_fail_code(run, RUN_TRANSIENT, tms_error_sqlstate(&err2),
								"could not create the namespace \"%s\" to hold table \"%s.%s\": %s",
								run->held_ns, run->ns, run->table, tms_error_text(&err2));
			return -1;
		}
		rc = io_catalog_rename_table(conn->catalog, ns_io, run->table, hold_io,
									 run->held_name, &err);
	}
	if (rc == 0)
		return 1;
	if (outcome_unknown(&err))
	{
		/* renamed if it is gone from its name and there under the new one */
		if (table_gone(conn, ns_io, run->table, &err2) == 1 &&
			table_gone(conn, hold_io, run->held_name, &err2) == 0)
			return 1;
		purge_run_fail_code(run, RUN_TRANSIENT, tms_error_sqlstate(&err),
							"could not move table \"%s.%s\" to \"%s.%s\": %s",
							run->ns, run->table, run->held_ns, run->held_name,
							tms_error_text(&err));
		return -1;
	}
	if (err.code != IO_ERR_BAD_REQUEST && err.code != IO_ERR_FORBIDDEN &&
		err.code != IO_ERR_NOT_FOUND && err.code != IO_ERR_UNSUPPORTED &&
		err.code != IO_ERR_NO_SUCH_TABLE)
	{
		purge_run_fail_code(run, RUN_TRANSIENT, tms_error_sqlstate(&err),
							"could not move table \"%s.%s\" to \"%s.%s\": %s",
							run->ns, run->table, run->held_ns, run->held_name,
							tms_error_text(&err));
		return -1;
	}
	/* the catalog will not (or the table went meanwhile): a plain drop */
	ereport(LOG,
			(errmsg("purge job " INT64_FORMAT ": the catalog would not move table \"%s.%s\" to namespace \"%s\" (%s); it is dropped instead",
					run->job_id, run->ns, run->table, run->held_ns, tms_error_text(&err))));
	return record_hold(run, NULL, NULL) ? 0 : -1;
}

/*
 * The "drop" phase (see the file header).  Sets run->result on failure;
 * network and catalog failures are values, never raised.
 */
static void
run_drop(PurgeRun *run, TmsCatalogConn *conn)
{
	char	   *ns_io = tms_namespace_to_io(run->ns);
	IoLoadedTable t;
	TmsError	err;
	DropRecord	dr;
	ErrorData  *e;

	memset(&dr, 0, sizeof(dr));
	dr.run = run;
	dr.phase = "drop";
	memset(&t, 0, sizeof(t));
	io_catalog_forget(conn->catalog, ns_io, run->table);
	if (io_catalog_load_table(conn->catalog, ns_io, run->table, &t, &err) != 0)
	{
		/* a namespace is dropped only when empty: its tables are gone too */
		if (err.code != IO_ERR_NO_SUCH_TABLE && err.code != IO_ERR_NO_SUCH_NAMESPACE)
		{
			/*
			 * a catalog that refuses the load (400, 403) will not change its
			 * mind
			 */
			bool		terminal = err.code == IO_ERR_BAD_REQUEST ||
			err.code == IO_ERR_FORBIDDEN;

			purge_run_fail_code(run, terminal ? RUN_TERMINAL : RUN_TRANSIENT,
								tms_error_sqlstate(&err),
								"could not load table \"%s.%s\" to drop it: %s",
								run->ns, run->table, tms_error_text(&err));
			return;
		}

		/*
		 * Gone already: a previous attempt's drop or hold landed; purge what
		 * we recorded.  A hold that never landed (the table was dropped by
		 * someone else meanwhile) is forgotten.
		 */
		if (run->held_name != NULL &&
			table_gone(conn, tms_namespace_to_io(run->held_ns), run->held_name, &err) == 1 &&
			!record_hold(run, NULL, NULL))
			return;
	}
	else if (!check_loaded(run, &t, &dr))
		return;
	else
	{
		int			held = 0;

		/* record where its files are (and where it goes) before it moves */
		if (run->server->purge_hold_namespace != NULL)
		{
			dr.set_held = true;
			dr.held_ns = run->server->purge_hold_namespace;
			dr.held_name = psprintf("tms_purge_" INT64_FORMAT, run->job_id);
		}
		if (!sched_owner_try_step(step_drop_record, &dr, &e))
		{
			purge_run_fail_code(run, RUN_TRANSIENT, e->sqlerrcode, "%s", e->message);
			return;
		}
		if (run->result != RUN_OK)
			return;
		run->metadata_location = (char *) dr.metadata_location;
		if (dr.set_held)
		{
			run->held_ns = MemoryContextStrdup(run->cxt, dr.held_ns);
			run->held_name = MemoryContextStrdup(run->cxt, dr.held_name);
			if ((held = hold_table(run, conn, ns_io)) < 0)
				return;
		}
		if (!held && io_catalog_drop_table(conn->catalog, ns_io, run->table, false, &err) != 0 &&
			err.code != IO_ERR_NO_SUCH_TABLE)
		{
			TmsError	first = err;
			int			gone = -1;

			/* an outcome we do not know is resolved before anything else */
			if (outcome_unknown(&first))
				gone = table_gone(conn, ns_io, run->table, &err);
			if (gone != 1)
			{
				purge_run_fail_code(run, RUN_TRANSIENT, tms_error_sqlstate(&first),
									"could not drop table \"%s.%s\" from its catalog%s: %s",
									run->ns, run->table,
									gone == 0 ? " (it is still there)" : "",
									tms_error_text(&first));
				return;
			}
		}
		io_catalog_forget(conn->catalog, ns_io, run->table);
	}
	dr.metadata_location = NULL;
	dr.vended_json = NULL;
	dr.set_held = false;
	dr.phase = "content";
	dr.dropped = true;
	if (!sched_owner_try_step(step_drop_record, &dr, &e))
		purge_run_fail_code(run, RUN_TRANSIENT, e->sqlerrcode, "%s", e->message);
	else if (run->result == RUN_OK)
		run->phase = "content";
}

/* The drop phase; the credentials of its last load replace the enqueue's. */
static void
run_drop_phase(PurgeRun *run)
{
	ErrorData  *e;

	run_drop(run, run->conn);
	if (run->result == RUN_OK && !sched_owner_try_step(step_read_vended, run, &e))
		purge_run_fail_code(run, RUN_TRANSIENT, e->sqlerrcode, "%s", e->message);
}

/*
 * The last phase of a held table: once every file is gone, its held entry
 * is dropped (without purge: there is nothing left to purge).
 */
static void
release_held(PurgeRun *run)
{
	char	   *hold_io = tms_namespace_to_io(run->held_ns);
	TmsError	err;
	TmsError	err2;

	purge_write_progress(run, "release", true);
	if (run->result != RUN_OK)
		return;
	if (io_catalog_drop_table(run->conn->catalog, hold_io, run->held_name, false, &err) == 0 ||
		err.code == IO_ERR_NO_SUCH_TABLE ||
		(outcome_unknown(&err) && table_gone(run->conn, hold_io, run->held_name, &err2) == 1))
		return;
	purge_run_fail_code(run, RUN_TRANSIENT, tms_error_sqlstate(&err),
						"every file is deleted, but the held catalog entry \"%s.%s\" could not be dropped: %s",
						run->held_ns, run->held_name, tms_error_text(&err));
}

/* ----------------------------------------------------------------
 * The handler
 * ----------------------------------------------------------------
 */

/* Free what the run holds outside palloc. */
static void
run_release(PurgeRun *run)
{
	tms_catalog_release(run->conn);
	run->conn = NULL;
	tms_server_free(run->server);
	run->server = NULL;
	tms_credentials_free(&run->creds);
}

/*
 * The handler of the "purge" task kind (detached; see the file header).
 */
static SchedOutcome
purge_handler(SchedTask *task, ErrorData **error)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms purge run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PurgeRun   *run = palloc0(sizeof(PurgeRun));
	FinishArg	fin;
	OpsRunFailure failure;
	char	   *end;
	volatile SchedOutcome outcome = SCHED_DONE;

	run->task = task;
	run->cxt = cxt;
	run->result = RUN_OK;
	run->job_id = strtoi64(task->instance, &end, 10);
	if (*end != '\0' || run->job_id <= 0)
	{
		MemoryContextSwitchTo(old);
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid purge task instance \"%s\"", task->instance),
							 NULL);
		MemoryContextDelete(cxt);
		return SCHED_FAILED;
	}
	for (int i = 0; i < NQUEUES; i++)
		run->q[i].cxt = AllocSetContextCreate(cxt, "tms purge queue", ALLOCSET_DEFAULT_SIZES);
	sched_task_subject(task, -1, -1, -1, run->job_id);

	PG_TRY();
	{
		sched_owner_step(step_begin, run);
		if (run->result == RUN_LEASE_LOST)
			outcome = SCHED_LEASE_LOST;
		else if (!run->found ||
				 (strcmp(run->state, "PENDING") != 0 && strcmp(run->state, "RUNNING") != 0))
			outcome = SCHED_DONE;	/* deleted by an operator, or ended
									 * already */
		else
		{
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("tms: purge job " INT64_FORMAT, run->job_id));
			if (run->server == NULL)
				purge_run_fail(run, RUN_TERMINAL, "foreign server \"%s\" no longer exists",
							   run->server_name);
			else if (run->server->nallowed == 0)
				purge_run_fail(run, RUN_TERMINAL,
							   "server \"%s\" has no allowed_locations: tms deletes nothing for it",
							   run->server_name);
			else if (run->attempts >= tms_purge_max_attempts)
				purge_run_fail(run, RUN_TERMINAL, "gave up after %d attempts; the last one did not finish",
							   run->attempts);
			else if (strcmp(run->phase, "drop") == 0 || run->held_name != NULL)
			{
				/* the requester's catalog connection: the drop, a held entry */
				ErrorData  *e;

				if (!sched_try_step(step_connect, run, &e))
					purge_run_fail(run, RUN_TRANSIENT, "%s%s%s", e->message,
								   e->detail ? ": " : "", e->detail ? e->detail : "");
				else if (strcmp(run->phase, "drop") == 0)
					run_drop_phase(run);
			}
			/* expired credentials can only be replaced through a held entry */
			if (run->result == RUN_OK && run->vended && run->held_name == NULL &&
				run->expires_at != 0 && run->expires_at < GetCurrentTimestamp())
				purge_run_fail(run, RUN_TERMINAL,
							   "the storage credentials the catalog vended expired at %s; a purge gets new ones only when the server holds the table until its files are gone (option purge_hold_namespace)",
							   timestamptz_to_str(run->expires_at));
			if (run->result == RUN_OK && strcmp(run->phase, "release") != 0)
				purge_walk(run);
			if (run->result == RUN_OK && run->held_name != NULL)
				release_held(run);

			if (run->result == RUN_LEASE_LOST || sched_lease_lost())
				outcome = SCHED_LEASE_LOST;
			else
			{
				fin.run = run;
				fin.error = run->result == RUN_OK ? NULL : run->error;
				fin.terminal = run->result == RUN_TERMINAL;
				fin.state = NULL;
				sched_owner_step(step_finish, &fin);
				failure.sqlerrcode = run->sqlerrcode;
				failure.message = run->error;
				failure.detail = NULL;
				failure.hint = NULL;
				outcome = ops_run_outcome(fin.state == NULL ? OPS_RUN_LEASE_LOST :
										  strcmp(fin.state, "PENDING") == 0 ? OPS_RUN_RETRY :
										  strcmp(fin.state, "FAILED") == 0 ? OPS_RUN_FAILED :
										  OPS_RUN_ENDED, &failure,
										  psprintf("purge job " INT64_FORMAT, run->job_id),
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
