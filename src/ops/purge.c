/*-------------------------------------------------------------------------
 *
 * purge.c
 *	  Async purge of dropped Iceberg tables: the settings, the path rules,
 *	  and the handler of the "purge" task kind (seed 003; doc/purge.md).
 *
 * tms.purge_table() (src/sql_api/purge_sql.c) drops a table from its
 * catalog and records a row of tms.iceberg_cleanup_job with a task of kind
 * "purge" whose instance is the job id.  The task kind is detached (see
 * src/sched/sched.c): its handler runs outside transactions, so nothing
 * holds a snapshot or a lock while files are deleted, and it records its
 * progress in short steps.  A run:
 *
 *	 begin		(step) read the job, mark it RUNNING, count a previous run
 *				that never finished (its worker died) as a failed attempt,
 *				read the server's options and the requester's user mapping.
 *	 walk		re-read the metadata file and stream every file it reaches:
 *				for each snapshot its manifest list, each manifest not seen
 *				before (a set of 64-bit path hashes: the only memory that
 *				grows with the table), each manifest's entries of every
 *				status, then statistics files, then the metadata log, and
 *				the metadata file itself last.
 *	 delete		files go to three bounded queues, one per level: content
 *				files (data, deletes, statistics), manifests, manifest
 *				lists.  A full queue is deleted at once by the walking
 *				process itself (the seed's caller-runs back-pressure), in
 *				one bulk request per tms.purge_delete_batch_size files, and
 *				a queue is only deleted after the queues below it: a
 *				manifest disappears only once its entries are gone, a list
 *				only once its manifests are, and the metadata file last.
 *				So a run that stops anywhere leaves a table that the next
 *				run can walk again from its metadata file; what it finds
 *				missing on the way (a manifest, a list) was deleted with
 *				everything below it, and is counted, not an error.
 *	 progress	(step, at most once a second) counters and heartbeat_at,
 *				conditional on the task's lease; a lost lease stops the run.
 *	 finish		(step) SUCCEEDED, or the failure: attempts + 1, last_error,
 *				back to PENDING (the scheduler retries after its backoff),
 *				or FAILED at tms.purge_max_attempts or at once when the
 *				failure is terminal (metadata gone or corrupt, server
 *				dropped, captured credentials expired).  The captured
 *				credentials are deleted when the job ends.
 *
 * Safety: a file is deleted only if its canonical path lies strictly below
 * the table's location and below one of the server's allowed_locations
 * (read again at every run); anything else is counted in files_skipped,
 * with one example.  With gc.enabled=false in the table's properties, data
 * and delete files are kept (another table may share them), as Iceberg's
 * own purge does.  Deleting a file again is harmless: not-found counts as
 * deleted.
 *
 * Everything the plain-C layers return is malloc'd and freed in a
 * PG_FINALLY, so an interrupt or an error in a step leaks nothing.
 *
 * src/ops/purge.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "ops/ops.h"
#include "ops/purge.h"
#include "sched/sched.h"
#include "sql_api/catalog_conn.h"

int			tms_purge_delete_batch_size = 1000;
int			tms_purge_max_attempts = 5;
int			tms_purge_retention_s = 30 * 24 * 3600;
int			tms_purge_concurrency = 2;
int			tms_purge_batch_pause_ms = 0;

/* progress is written at most this often */
#define PROGRESS_INTERVAL_MS 1000

/* ----------------------------------------------------------------
 * Path rules
 * ----------------------------------------------------------------
 */

static char *
concat3(const char *a, const char *b, const char *c)
{
	size_t		n = strlen(a) + strlen(b) + strlen(c) + 1;
	char	   *r = malloc(n);

	if (r != NULL)
		snprintf(r, n, "%s%s%s", a, b, c);
	return r;
}

/* Remove repeated slashes (file paths only). */
static void
squeeze_slashes(char *p)
{
	char	   *w = p;
	char		prev = '\0';

	for (; *p; p++)
	{
		if (*p == '/' && prev == '/')
			continue;
		*w++ = *p;
		prev = *p;
	}
	*w = '\0';
}

char *
purge_canonical_malloc(const char *path, const char *relative_root)
{
	const char *rel = NULL;
	char	   *r;

	if (path == NULL || path[0] == '\0')
		return NULL;
	if (pg_strncasecmp(path, "s3://", 5) == 0 ||
		pg_strncasecmp(path, "s3a://", 6) == 0 ||
		pg_strncasecmp(path, "s3n://", 6) == 0)
	{
		const char *rest = strstr(path, "://") + 3;

		if (rest[0] == '\0' || rest[0] == '/')
			return NULL;		/* no bucket */
		return concat3("s3://", rest, "");
	}
	if (strncmp(path, "file:///", 8) == 0)
		r = strdup(path + 7);
	else if (strncmp(path, "file://", 7) == 0)
		rel = path + 7;			/* file://host/rest: relative, as old writers */
	else if (strncmp(path, "file:/", 6) == 0)
		r = strdup(path + 5);
	else if (strncmp(path, "file:", 5) == 0)
		rel = path + 5;
	else if (path[0] == '/')
		r = strdup(path);
	else if (strstr(path, "://") != NULL)
		return NULL;			/* a scheme tms cannot delete from */
	else
		rel = path;

	if (rel != NULL)
	{
		if (relative_root == NULL || relative_root[0] != '/')
			return NULL;
		while (rel[0] == '.' && rel[1] == '/')
			rel += 2;
		if (rel[0] == '\0' || (rel[0] == '.' && rel[1] == '\0'))
			r = strdup(relative_root);
		else
			r = concat3(relative_root, "/", rel);
	}
	if (r != NULL)
		squeeze_slashes(r);
	return r;
}

char *
purge_canonical(const char *path, const char *relative_root)
{
	char	   *m = purge_canonical_malloc(path, relative_root);
	char	   *p;

	if (m == NULL)
		return NULL;
	p = pstrdup(m);
	free(m);
	return p;
}

/* Does path have an empty-named "." or ".." segment? */
static bool
has_dot_segments(const char *path)
{
	const char *s = path;

	while (*s)
	{
		const char *e = strchr(s, '/');
		size_t		n = e ? (size_t) (e - s) : strlen(s);

		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return true;
		if (e == NULL)
			break;
		s = e + 1;
	}
	return false;
}

bool
purge_path_under(const char *path, const char *root)
{
	size_t		n = strlen(root);

	while (n > 0 && root[n - 1] == '/')
		n--;
	if (n == 0 || has_dot_segments(path) || has_dot_segments(root))
		return false;
	if (strncmp(path, root, n) != 0 || path[n] != '/')
		return false;
	return path[n + 1] != '\0';
}

/* ----------------------------------------------------------------
 * Settings and registration
 * ----------------------------------------------------------------
 */

static SchedOutcome purge_handler(SchedTask *task, char **error);

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
							gettext_noop("Pause between two delete requests of a purge."),
							gettext_noop("Throttles the load a purge puts on the storage; 0 does not pause."),
							&tms_purge_batch_pause_ms,
							0, 0, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	sched_register_detached("purge", purge_handler, &tms_purge_concurrency);
}

/* ----------------------------------------------------------------
 * A run
 * ----------------------------------------------------------------
 */

/* The three delete queues, in the order they must be emptied. */
#define Q_CONTENT	0
#define Q_MANIFESTS 1
#define Q_LISTS		2
#define Q_METADATA	3
#define NQUEUES		4

typedef struct PurgeQueue
{
	MemoryContext cxt;			/* reset after each flush */
	const char **uris;			/* canonical, in cxt */
	int64	   *sizes;			/* declared sizes, -1 unknown */
	int			n;
} PurgeQueue;

typedef enum RunResult
{
	RUN_OK,
	RUN_TRANSIENT,				/* retry later */
	RUN_TERMINAL,				/* FAILED at once */
	RUN_LEASE_LOST
} RunResult;

typedef struct PurgeRun
{
	SchedTask  *task;
	int64		job_id;
	MemoryContext cxt;

	/* the job row */
	bool		found;
	char	   *state;
	char	   *server;
	char	   *location;		/* canonical */
	char	   *metadata_location;
	char	   *created_by;
	char	   *phase;
	char	   *endpoint;		/* captured non-secret settings, or NULL */
	char	   *region;
	int			path_style;		/* -1: not captured */
	int			attempts;
	bool		vended;			/* credentials captured at enqueue */
	int			nvended;
	IoKeyValue *vended_kv;
	TimestampTz expires_at;		/* 0: unknown */

	/* the server and the requester's user mapping */
	bool		server_found;
	char	   *srv_endpoint;
	char	   *srv_region;
	int			srv_path_style;
	char	   *relative_root;
	int			nallowed;
	char	  **allowed;		/* canonical */
	char	   *ca_file;
	char	   *ca_path;
	long		connect_timeout_ms;
	long		request_timeout_ms;
	char	   *access_key_id;
	char	   *secret_access_key;
	char	   *session_token;

	/* I/O, freed in the run's PG_FINALLY */
	IoStorage  *storage;
	IoFileIO	s3state;
	IcebergFileIO s3io;
	IcebergFileIO localio;
	IcebergLocalFS localfs;
	IcebergFileIO fio;
	IcebergTableMetadata *md;
	IcebergManifestListReader *lr;
	IcebergManifestReader *mr;
	bool		gc_enabled;
	HTAB	   *seen;			/* manifest path hashes */

	PurgeQueue	q[NQUEUES];

	/* counters of this attempt */
	int64		deleted;
	int64		bytes;
	int64		skipped;
	int64		kept;
	int64		unreadable;
	int64		requests;
	char	   *skipped_example;
	TimestampTz last_progress;

	/* outcome */
	RunResult	result;
	char		error[2048];
} PurgeRun;

static void run_fail(PurgeRun *run, RunResult kind, const char *fmt,...) pg_attribute_printf(3, 4);

/* Record the first failure of a run. */
static void
run_fail(PurgeRun *run, RunResult kind, const char *fmt,...)
{
	va_list		ap;

	if (run->result != RUN_OK)
		return;
	run->result = kind;
	va_start(ap, fmt);
	vsnprintf(run->error, sizeof(run->error), fmt, ap);
	va_end(ap);
}

/* ----------------------------------------------------------------
 * Steps (short transactions)
 * ----------------------------------------------------------------
 */

/* The lease condition every job write carries: $2 instance, $3 version. */
#define LEASE_HELD \
	" EXISTS (SELECT 1 FROM tms.scheduled_tasks t" \
	"          WHERE t.task_name = 'purge' AND t.task_instance = $2" \
	"            AND t.version = $3 AND t.picked)"

/*
 * Act as the extension's owner for the rest of the step: the job and
 * credential tables are the owner's alone, whoever drives the scheduler.
 * The transaction's end restores the user.
 */
static void
become_owner(void)
{
	Oid			uid;
	int			sec;
	bool		isnull;
	Datum		d;
	int			rc;

	rc = SPI_execute("SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'tms'",
					 true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not find the owner of extension \"tms\"");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	GetUserIdAndSecContext(&uid, &sec);
	SetUserIdAndSecContext(DatumGetObjectId(d), sec | SECURITY_LOCAL_USERID_CHANGE);
}

static char *
pstrdup_or_null(const char *s)
{
	return s ? pstrdup(s) : NULL;
}

/*
 * A server's allowed_locations option as canonical roots; see purge.h.
 * The list is split as the wrapper's validator splits it.
 */
List *
purge_allowed_roots(const char *allowed_locations, const char *relative_root)
{
	List	   *roots = NIL;
	ListCell   *lc;

	if (allowed_locations == NULL)
		return NIL;
	foreach(lc, tms_fdw_option_locations("allowed_locations", allowed_locations))
	{
		char	   *c = purge_canonical((char *) lfirst(lc), relative_root);

		if (c != NULL)
			roots = lappend(roots, c);
	}
	return roots;
}

/*
 * Read the server's options and the requester's user mapping (or PUBLIC's)
 * into the run.  Missing server: run->server_found stays false.
 */
static void
read_server(PurgeRun *run)
{
	ForeignServer *server = GetForeignServerByName(run->server, true);
	Oid			roleid;
	HeapTuple	tp;
	const char *v;
	List	   *roots;
	ListCell   *lc;

	if (server == NULL)
		return;
	run->server_found = true;
	run->srv_endpoint = pstrdup_or_null(tms_fdw_option(server->options, "s3_endpoint"));
	run->srv_region = pstrdup_or_null(tms_fdw_option(server->options, "s3_region"));
	run->srv_path_style = -1;
	if ((v = tms_fdw_option(server->options, "s3_path_style")) != NULL)
		run->srv_path_style = tms_fdw_option_bool("s3_path_style", v) ? 1 : 0;
	run->relative_root = pstrdup_or_null(tms_fdw_option(server->options, "relative_path_root"));
	run->ca_file = pstrdup_or_null(tms_fdw_option(server->options, "ca_file"));
	run->ca_path = pstrdup_or_null(tms_fdw_option(server->options, "ca_path"));
	if ((v = tms_fdw_option(server->options, "connect_timeout")) != NULL)
		run->connect_timeout_ms = tms_fdw_option_ms("connect_timeout", v);
	if ((v = tms_fdw_option(server->options, "request_timeout")) != NULL)
		run->request_timeout_ms = tms_fdw_option_ms("request_timeout", v);
	roots = purge_allowed_roots(tms_fdw_option(server->options, "allowed_locations"),
								run->relative_root);
	run->nallowed = 0;
	run->allowed = palloc0(sizeof(char *) * (list_length(roots) + 1));
	foreach(lc, roots)
		run->allowed[run->nallowed++] = (char *) lfirst(lc);

	/* the requester's mapping, else PUBLIC's, as tms_catalog_connect() */
	roleid = get_role_oid(run->created_by, true);
	tp = OidIsValid(roleid)
		? SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(roleid),
						  ObjectIdGetDatum(server->serverid))
		: NULL;
	if (!HeapTupleIsValid(tp))
	{
		roleid = InvalidOid;
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(server->serverid));
	}
	if (HeapTupleIsValid(tp))
	{
		UserMapping *um;

		ReleaseSysCache(tp);
		um = GetUserMapping(roleid, server->serverid);
		run->access_key_id = pstrdup_or_null(tms_fdw_option(um->options, "s3_access_key_id"));
		run->secret_access_key = pstrdup_or_null(tms_fdw_option(um->options, "s3_secret_access_key"));
		run->session_token = pstrdup_or_null(tms_fdw_option(um->options, "s3_session_token"));
	}
}

static const char *job_sql =
"SELECT j.state, j.server, j.table_location, j.metadata_location, j.created_by,"
"       j.phase, j.storage ->> 'endpoint', j.storage ->> 'region',"
"       j.storage ->> 'path_style', j.attempts,"
"       c.job_id IS NOT NULL, c.expires_at"
"  FROM tms.iceberg_cleanup_job j"
"  LEFT JOIN tms.iceberg_cleanup_credentials c ON c.job_id = j.id"
" WHERE j.id = $1";

/*
 * Mark RUNNING; a run that found the job RUNNING already follows one that
 * never finished (its worker died, or lost its lease), which counts as a
 * failed attempt.  Counters restart: a run deletes everything again.
 */
static const char *start_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET attempts = attempts + CASE WHEN state = 'RUNNING' THEN 1 ELSE 0 END,"
"       last_error = CASE WHEN state = 'RUNNING'"
"                    THEN 'a previous attempt did not finish (its executor died or lost its lease)'"
"                    ELSE last_error END,"
"       state = 'RUNNING', started_at = coalesce(started_at, now()),"
"       heartbeat_at = now(), updated_at = now(),"
"       files_deleted = 0, bytes_freed = 0, files_skipped = 0, skipped_example = NULL,"
"       files_kept = 0, files_unreadable = 0, delete_requests = 0"
" WHERE id = $1 AND state IN ('PENDING', 'RUNNING') AND" LEASE_HELD
" RETURNING attempts";

static void
step_begin(void *arg)
{
	PurgeRun   *run = (PurgeRun *) arg;
	Oid			types[3] = {INT8OID, TEXTOID, INT8OID};
	Datum		args[3];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *v;
	int			rc;

	become_owner();
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
	run->server = SPI_getvalue(tup, desc, 2);
	run->location = SPI_getvalue(tup, desc, 3);
	run->metadata_location = SPI_getvalue(tup, desc, 4);
	run->created_by = SPI_getvalue(tup, desc, 5);
	run->phase = SPI_getvalue(tup, desc, 6);
	run->endpoint = SPI_getvalue(tup, desc, 7);
	run->region = SPI_getvalue(tup, desc, 8);
	v = SPI_getvalue(tup, desc, 9);
	run->path_style = v == NULL ? -1 : strcmp(v, "true") == 0 ? 1 : 0;
	run->attempts = DatumGetInt32(SPI_getbinval(tup, desc, 10, &isnull));
	run->vended = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
	run->expires_at = 0;
	{
		Datum		d = SPI_getbinval(tup, desc, 12, &isnull);

		if (!isnull)
			run->expires_at = DatumGetTimestampTz(d);
	}
	if (strcmp(run->state, "PENDING") != 0 && strcmp(run->state, "RUNNING") != 0)
		return;

	if (run->vended)
	{
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
	read_server(run);
}

static const char *progress_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET files_deleted = $4, bytes_freed = $5, files_skipped = $6,"
"       skipped_example = $7, files_kept = $8, files_unreadable = $9,"
"       delete_requests = $10, phase = coalesce($11, phase),"
"       heartbeat_at = now(), updated_at = now()"
" WHERE id = $1 AND state = 'RUNNING' AND" LEASE_HELD;

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
	return 11;
}

static Oid	counter_types[12] = {INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID,
	TEXTOID, INT8OID, INT8OID, INT8OID, TEXTOID, TEXTOID};

typedef struct ProgressArg
{
	PurgeRun   *run;
	const char *phase;
} ProgressArg;

static void
step_progress(void *arg)
{
	ProgressArg *p = (ProgressArg *) arg;
	Datum		args[11];
	char		nulls[11];
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	become_owner();
	fill_counter_args(p->run, args, nulls, p->phase);
	rc = SPI_execute_with_args(progress_sql, 11, counter_types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record purge progress: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		p->run->result = RUN_LEASE_LOST;
}

/*
 * The end of a run.  $12: the error (NULL: SUCCEEDED); $13: terminal;
 * $14: max attempts; $15: retention (s).  Returns the new state.
 */
static const char *finish_sql =
"UPDATE tms.iceberg_cleanup_job"
"   SET files_deleted = $4, bytes_freed = $5, files_skipped = $6,"
"       skipped_example = $7, files_kept = $8, files_unreadable = $9,"
"       delete_requests = $10, phase = coalesce($11, phase),"
"       attempts = attempts + CASE WHEN $12 IS NULL THEN 0 ELSE 1 END,"
"       last_error = $12,"
"       state = CASE WHEN $12 IS NULL THEN 'SUCCEEDED'"
"                    WHEN $13 OR attempts + 1 >= $14 THEN 'FAILED'"
"                    ELSE 'PENDING' END,"
"       finished_at = CASE WHEN $12 IS NULL OR $13 OR attempts + 1 >= $14"
"                          THEN now() END,"
"       heartbeat_at = now(), updated_at = now()"
" WHERE id = $1 AND state = 'RUNNING' AND" LEASE_HELD
" RETURNING state";

typedef struct FinishArg
{
	PurgeRun   *run;
	const char *error;
	bool		terminal;
	char	   *state;			/* out; NULL: lease lost */
} FinishArg;

static void
step_finish(void *arg)
{
	FinishArg  *f = (FinishArg *) arg;
	Oid			types[15];
	Datum		args[15];
	char		nulls[15];
	int			rc;

	memset(nulls, ' ', sizeof(nulls));
	memcpy(types, counter_types, sizeof(Oid) * 11);
	types[11] = TEXTOID;
	types[12] = BOOLOID;
	types[13] = INT4OID;
	types[14] = INT4OID;
	become_owner();
	fill_counter_args(f->run, args, nulls, NULL);
	if (f->error)
		args[11] = CStringGetTextDatum(f->error);
	else
		nulls[11] = 'n';
	args[12] = BoolGetDatum(f->terminal);
	args[13] = Int32GetDatum(tms_purge_max_attempts);
	args[14] = Int32GetDatum(tms_purge_retention_s);
	rc = SPI_execute_with_args(finish_sql, 14, types, args, nulls, false, 0);
	MemoryContextSwitchTo(f->run->cxt);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record the end of a purge attempt: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	f->state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (strcmp(f->state, "PENDING") == 0)
		return;

	/* the job ended: its captured credentials go, old rows are pruned */
	rc = SPI_execute_with_args("DELETE FROM tms.iceberg_cleanup_credentials WHERE job_id = $1",
							   1, types, args, NULL, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not delete purge credentials: %s", SPI_result_code_string(rc));
	rc = SPI_execute_with_args("DELETE FROM tms.iceberg_cleanup_job"
							   " WHERE state IN ('SUCCEEDED', 'FAILED')"
							   "   AND finished_at < now() - make_interval(secs => $15)",
							   15, types, args, nulls, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not prune purge jobs: %s", SPI_result_code_string(rc));
}

/* ----------------------------------------------------------------
 * Reading: s3 through the io layer, files through src/iceberg
 * ----------------------------------------------------------------
 */

typedef struct RunHandle
{
	const IcebergFileIO *impl;
	void	   *h;
} RunHandle;

/* IcebergFileIO.open: canonicalise, then read s3 or local.  No palloc. */
static void *
run_open(void *arg, const char *path, int64_t *size_out, IcebergError *err)
{
	PurgeRun   *run = (PurgeRun *) arg;
	char	   *c = purge_canonical_malloc(path, run->relative_root);
	RunHandle  *rh;

	if (c == NULL)
	{
		err->code = ICEBERG_ERR_IO;
		snprintf(err->message, sizeof(err->message), "cannot resolve path \"%s\"", path);
		err->detail[0] = '\0';
		return NULL;
	}
	rh = malloc(sizeof(RunHandle));
	if (rh == NULL)
	{
		free(c);
		err->code = ICEBERG_ERR_OUT_OF_MEMORY;
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->detail[0] = '\0';
		return NULL;
	}
	rh->impl = strncmp(c, "s3://", 5) == 0 ? &run->s3io : &run->localio;
	rh->h = rh->impl->open(rh->impl->arg, c, size_out, err);
	free(c);
	if (rh->h == NULL)
	{
		free(rh);
		return NULL;
	}
	return rh;
}

static int64_t
run_read(void *arg, void *handle, void *buf, size_t len, IcebergError *err)
{
	RunHandle  *rh = (RunHandle *) handle;

	return rh->impl->read(rh->impl->arg, rh->h, buf, len, err);
}

static void
run_close(void *arg, void *handle)
{
	RunHandle  *rh = (RunHandle *) handle;

	if (rh == NULL)
		return;
	rh->impl->close(rh->impl->arg, rh->h);
	free(rh);
}

static bool
run_interrupted(void *arg)
{
	return InterruptPending;
}

/*
 * Is the file behind a failed read missing?  Asks the storage directly,
 * so the answer does not depend on how the reader worded its error.
 */
static bool
file_missing(PurgeRun *run, const char *path)
{
	char	   *c = purge_canonical_malloc(path, run->relative_root);
	uint64_t	size;
	IoError		err;
	bool		missing;

	if (c == NULL)
		return false;
	missing = io_storage_size(run->storage, c, &size, &err) != 0 &&
		err.code == IO_ERR_NOT_FOUND;
	free(c);
	return missing;
}

/* Describe an iceberg error (and the storage error behind it). */
static const char *
iceberg_error_text(PurgeRun *run, const IcebergError *err)
{
	const char *io = "";

	if (err->code == ICEBERG_ERR_IO && run->s3state.last_error.code != IO_OK)
		io = run->s3state.last_error.message;
	return psprintf("%s%s%s%s%s", err->message,
					err->detail[0] ? ": " : "", err->detail,
					io[0] ? "; " : "", io);
}

/* Classify a failed read of path and record it; true if it was missing. */
static bool
read_failed(PurgeRun *run, const char *what, const char *path, const IcebergError *err)
{
	if (err->code == ICEBERG_ERR_IO && file_missing(run, path))
		return true;
	if (err->code == ICEBERG_ERR_MALFORMED || err->code == ICEBERG_ERR_UNSUPPORTED ||
		err->code == ICEBERG_ERR_LIMIT)
		run_fail(run, RUN_TERMINAL, "cannot read %s \"%s\": %s", what, path,
				 iceberg_error_text(run, err));
	else
		run_fail(run, RUN_TRANSIENT, "could not read %s \"%s\": %s", what, path,
				 iceberg_error_text(run, err));
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

static void write_progress(PurgeRun *run, const char *phase, bool force);

/* Delete one queue's files in one bulk call; false stops the run. */
static bool
flush_queue(PurgeRun *run, int level)
{
	PurgeQueue *q = &run->q[level];
	IoDeleteResult *results;
	IoError		err;
	MemoryContext old;
	int			failed = 0;
	int			first_failed = -1;
	int			rc;

	if (q->n == 0)
		return run->result == RUN_OK;
	if (run->result != RUN_OK)
		return false;
	old = MemoryContextSwitchTo(q->cxt);
	results = palloc0(sizeof(IoDeleteResult) * q->n);
	rc = io_storage_delete(run->storage, q->uris, q->n, results, &err);
	MemoryContextSwitchTo(old);
	if (strncmp(q->uris[0], "s3://", 5) == 0)
		run->requests += (q->n + 999) / 1000;
	else
		run->requests += q->n;
	for (int i = 0; i < q->n; i++)
	{
		if (results[i].deleted)
		{
			run->deleted++;
			if (q->sizes[i] > 0)
				run->bytes += q->sizes[i];
		}
		else if (rc == 0)
		{
			if (failed++ == 0)
				first_failed = i;
		}
	}
	if (rc != 0)
		run_fail(run, storage_failure_kind(run, err.http_status, NULL),
				 "could not delete files: %s%s%s%s", err.message,
				 err.detail[0] ? " (" : "", err.detail, err.detail[0] ? ")" : "");
	else if (failed > 0)
		run_fail(run, storage_failure_kind(run, 0, results[first_failed].code),
				 "could not delete %d of %d files; the first, \"%s\": %s %s%s",
				 failed, q->n, q->uris[first_failed], results[first_failed].code,
				 results[first_failed].message,
				 run->vended && storage_failure_kind(run, 0, results[first_failed].code) == RUN_TERMINAL
				 ? " (the storage credentials the catalog vended at enqueue time were refused; they may have expired)" : "");
	MemoryContextReset(q->cxt);
	q->n = 0;
	q->uris = NULL;
	q->sizes = NULL;
	if (run->result != RUN_OK)
		return false;

	/* between two requests: throttle, interrupts, the lease */
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
	write_progress(run, NULL, false);
	return run->result == RUN_OK;
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
 * Queue path for deletion at level, if it may be deleted; a full queue is
 * flushed with the ones below it.  false stops the run.
 */
static bool
queue_file(PurgeRun *run, int level, const char *path, int64 size)
{
	PurgeQueue *q = &run->q[level];
	char	   *c;
	bool		ok = false;
	MemoryContext old;

	if (path == NULL)
		return true;
	old = MemoryContextSwitchTo(q->cxt);
	c = purge_canonical(path, run->relative_root);
	if (c != NULL && purge_path_under(c, run->location))
		for (int i = 0; i < run->nallowed && !ok; i++)
			ok = purge_path_under(c, run->allowed[i]);
	if (!ok)
	{
		MemoryContextSwitchTo(old);
		run->skipped++;
		if (run->skipped_example == NULL)
			run->skipped_example =
				MemoryContextStrdup(run->cxt,
									psprintf("%s (%s)", path,
											 c == NULL ? "cannot be resolved" :
											 !purge_path_under(c, run->location)
											 ? "outside the table location"
											 : "outside the allowed_locations"));
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

/* Write the counters now (force) or if the last write is a second old. */
static void
write_progress(PurgeRun *run, const char *phase, bool force)
{
	TimestampTz now = GetCurrentTimestamp();
	ProgressArg p;

	if (!force && !TimestampDifferenceExceeds(run->last_progress, now, PROGRESS_INTERVAL_MS))
		return;
	run->last_progress = now;
	p.run = run;
	p.phase = phase;
	sched_step(step_progress, &p);
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
	IcebergError err;
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
		run_fail(run, err.code == ICEBERG_ERR_IO || err.code == ICEBERG_ERR_CANCELLED
				 ? RUN_TRANSIENT : RUN_TERMINAL,
				 "could not read manifest \"%s\": %s", mf->manifest_path,
				 iceberg_error_text(run, &err));
		return false;
	}
	return run->result == RUN_OK;
}

/* One snapshot: its new manifests (and their entries), then its list. */
static bool
walk_snapshot(PurgeRun *run, const IcebergSnapshot *s)
{
	const IcebergManifestFile *mf;
	IcebergError err;
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
			run_fail(run, RUN_TERMINAL, "cannot read the manifests of snapshot %lld: %s",
					 (long long) s->snapshot_id, iceberg_error_text(run, &err));
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
		run_fail(run, err.code == ICEBERG_ERR_IO || err.code == ICEBERG_ERR_CANCELLED
				 ? RUN_TRANSIENT : RUN_TERMINAL,
				 "could not read manifest list \"%s\": %s",
				 s->manifest_list ? s->manifest_list : "(inline)",
				 iceberg_error_text(run, &err));
		return false;
	}
	if (run->result != RUN_OK)
		return false;
	return queue_file(run, Q_LISTS, s->manifest_list, -1);
}

/* Build the storage and the FileIO of the run. */
static bool
open_storage(PurgeRun *run)
{
	IoStorageConfig cfg;
	IoError		err;

	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_endpoint = run->endpoint ? run->endpoint : run->srv_endpoint;
	cfg.s3_region = run->region ? run->region : run->srv_region;
	cfg.s3_path_style = run->path_style >= 0 ? run->path_style : run->srv_path_style;
	cfg.s3_access_key_id = run->access_key_id;
	cfg.s3_secret_access_key = run->secret_access_key;
	cfg.s3_session_token = run->session_token;
	cfg.http.retries = -1;
	cfg.http.ca_file = run->ca_file;
	cfg.http.ca_path = run->ca_path;
	cfg.http.connect_timeout_ms = run->connect_timeout_ms;
	cfg.http.request_timeout_ms = run->request_timeout_ms;
	cfg.http.interrupted = tms_io_interrupted;
	if (run->vended)
		io_storage_config_apply(&cfg, run->vended_kv, run->nvended);
	run->storage = io_storage_create(&cfg, &err);
	if (run->storage == NULL)
	{
		run_fail(run, RUN_TERMINAL, "cannot set up storage access: %s", err.message);
		return false;
	}
	io_fileio_init(&run->s3state, run->storage, tms_io_interrupted, NULL, &run->s3io);
	memset(&run->localfs, 0, sizeof(run->localfs));
	iceberg_local_fileio(&run->localio, &run->localfs);
	memset(&run->fio, 0, sizeof(run->fio));
	run->fio.arg = run;
	run->fio.open = run_open;
	run->fio.read = run_read;
	run->fio.close = run_close;
	run->fio.interrupted = run_interrupted;
	return true;
}

/*
 * The work of one run between its begin and finish steps; sets
 * run->result and run->error.
 */
static pg_noinline void
run_walk(PurgeRun *run)
{
	IcebergError err;
	const char *gc;
	HASHCTL		ctl;

	if (!open_storage(run))
		return;
	if (!iceberg_metadata_read(&run->fio, run->metadata_location, &run->md, &err))
	{
		run->md = NULL;
		if (err.code == ICEBERG_ERR_IO && file_missing(run, run->metadata_location))
		{
			if (run->phase && strcmp(run->phase, "metadata") == 0)
				return;			/* a previous run got to the very end */
			run_fail(run, RUN_TERMINAL, "metadata file \"%s\" does not exist",
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

	write_progress(run, "content", true);
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
	if (!flush_upto(run, Q_LISTS))
		return;

	write_progress(run, "metadata-log", true);
	for (int i = 0; i < run->md->nmetadata_log; i++)
		if (strcmp(run->md->metadata_log[i].metadata_file, run->metadata_location) != 0 &&
			!queue_file(run, Q_METADATA, run->md->metadata_log[i].metadata_file, -1))
			return;
	if (!flush_upto(run, Q_METADATA) || run->result != RUN_OK)
		return;

	/* the metadata file itself, last: until now a retry can start over */
	write_progress(run, "metadata", true);
	if (run->result != RUN_OK)
		return;
	if (queue_file(run, Q_METADATA, run->metadata_location, -1))
		(void) flush_upto(run, Q_METADATA);
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
	if (run->storage)
		io_storage_free(run->storage);
	run->mr = NULL;
	run->lr = NULL;
	run->md = NULL;
	run->storage = NULL;
	if (run->secret_access_key)
		explicit_bzero(run->secret_access_key, strlen(run->secret_access_key));
	if (run->session_token)
		explicit_bzero(run->session_token, strlen(run->session_token));
	for (int i = 0; i < run->nvended; i++)
		explicit_bzero(run->vended_kv[i].value, strlen(run->vended_kv[i].value));
}

/* run_walk, freeing the plain-C objects whatever happens. */
static pg_noinline void
run_walk_guarded(PurgeRun *run)
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

/*
 * The handler of the "purge" task kind (detached; see the file header).
 */
static SchedOutcome
purge_handler(SchedTask *task, char **error)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms purge run",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	PurgeRun   *run = palloc0(sizeof(PurgeRun));
	FinishArg	fin;
	char	   *end;
	SchedOutcome outcome;

	run->task = task;
	run->cxt = cxt;
	run->result = RUN_OK;
	run->job_id = strtoi64(task->instance, &end, 10);
	if (*end != '\0' || run->job_id <= 0)
	{
		*error = psprintf("invalid purge task instance \"%s\"", task->instance);
		MemoryContextSwitchTo(old);
		return SCHED_FAILED;
	}
	for (int i = 0; i < NQUEUES; i++)
		run->q[i].cxt = AllocSetContextCreate(cxt, "tms purge queue", ALLOCSET_DEFAULT_SIZES);

	sched_step(step_begin, run);
	if (run->result == RUN_LEASE_LOST)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return SCHED_LEASE_LOST;
	}
	if (!run->found || (strcmp(run->state, "PENDING") != 0 && strcmp(run->state, "RUNNING") != 0))
	{
		/* deleted by an operator, or ended already: nothing to do */
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return SCHED_DONE;
	}
	pgstat_report_activity(STATE_RUNNING,
						   psprintf("tms: purge job " INT64_FORMAT, run->job_id));

	if (!run->server_found)
		run_fail(run, RUN_TERMINAL, "foreign server \"%s\" no longer exists", run->server);
	else if (run->nallowed == 0)
		run_fail(run, RUN_TERMINAL, "server \"%s\" has no allowed_locations: tms deletes nothing for it",
				 run->server);
	else if (run->attempts >= tms_purge_max_attempts)
		run_fail(run, RUN_TERMINAL, "gave up after %d attempts; the last one did not finish",
				 run->attempts);
	else if (run->vended && run->expires_at != 0 && run->expires_at < GetCurrentTimestamp())
		run_fail(run, RUN_TERMINAL,
				 "the storage credentials the catalog vended at enqueue time expired at %s",
				 timestamptz_to_str(run->expires_at));
	else
		run_walk_guarded(run);

	if (run->result == RUN_LEASE_LOST)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return SCHED_LEASE_LOST;
	}
	fin.run = run;
	fin.error = run->result == RUN_OK ? NULL : run->error;
	fin.terminal = run->result == RUN_TERMINAL;
	fin.state = NULL;
	sched_step(step_finish, &fin);

	MemoryContextSwitchTo(old);
	if (fin.state == NULL)
		outcome = SCHED_LEASE_LOST;
	else if (strcmp(fin.state, "PENDING") == 0)
	{
		*error = pstrdup(run->error);
		outcome = SCHED_FAILED;
	}
	else
	{
		if (strcmp(fin.state, "FAILED") == 0)
			ereport(LOG,
					(errmsg("purge job " INT64_FORMAT " failed: %s", run->job_id, run->error)));
		outcome = SCHED_DONE;
	}
	MemoryContextDelete(cxt);
	return outcome;
}
