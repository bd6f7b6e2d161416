/*-------------------------------------------------------------------------
 *
 * purge_sql.c
 *	  tms.purge_table(): drop an Iceberg table now and have its files
 *	  deleted in the background; tms.drop_table(): the synchronous drop.
 *
 * A catalog drop is not transactional, so purge_table orders its steps so
 * that a failure at any point leaves either the table in its catalog and
 * no job, or the table dropped and its job committed:
 *
 *	 1. a check that needs no network: the server allows deleting
 *		somewhere (allowed_locations);
 *	 2. load the table through the catalog (404: an error, no job; so a
 *		second call for a purged name finds nothing), check that no active
 *		job holds the identifier and that the table's location lies under
 *		an allowed location;
 *	 3. insert the job, its captured credentials and its task, in the
 *		caller's transaction (a concurrent purge of the same identifier
 *		waits on the unique index of active jobs, then fails here);
 *	 4. drop the catalog entry without purge, last.  A drop that fails
 *		raises an error and the transaction rolls the job back; a drop
 *		whose outcome is unknown (timeout, 5xx) is settled by loading the
 *		table again: gone means dropped.
 *
 * What remains is a rollback of the caller's transaction after step 4
 * (purge_table called inside a transaction block that then aborts): the
 * table is dropped and no job exists.  Nothing is deleted by mistake, but
 * the files stay; a WARNING then names the metadata location to register
 * again.  Call purge_table on its own.
 *
 * The job table is the extension owner's: the inserts run as the owner.
 *
 * src/sql_api/purge_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "ops/purge.h"
#include "sql_api/catalog_conn.h"
#include "tms.h"

PG_FUNCTION_INFO_V1(tms_purge_table);
PG_FUNCTION_INFO_V1(tms_drop_table);

/* ----------------------------------------------------------------
 * Helpers
 * ----------------------------------------------------------------
 */

static void
become_owner(void)
{
	Oid			uid;
	int			sec;
	bool		isnull;
	Datum		d;

	if (SPI_execute("SELECT extowner FROM pg_catalog.pg_extension WHERE extname = 'tms'",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"tms\" is not installed in this database")));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	GetUserIdAndSecContext(&uid, &sec);
	SetUserIdAndSecContext(DatumGetObjectId(d), sec | SECURITY_LOCAL_USERID_CHANGE);
}

/* The vended keys that are credentials (kept out of the job row). */
static bool
secret_key(const char *key)
{
	static const char *const words[] = {"token", "secret", "credential",
	"password", "key-id", "access-key", NULL};

	for (int i = 0; words[i]; i++)
		if (strstr(key, words[i]) != NULL)
			return true;
	return false;
}

/* ----------------------------------------------------------------
 * Rollback after a drop: warn
 * ----------------------------------------------------------------
 */

static char *dropped_note = NULL;	/* TopMemoryContext */
static bool xact_cb_registered = false;

static void
purge_xact_callback(XactEvent event, void *arg)
{
	if (dropped_note == NULL)
		return;
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("a table was dropped from its catalog but its purge job was rolled back"),
				 errdetail("%s", dropped_note),
				 errhint("Register the table again from that metadata location and call tms.purge_table() on its own.")));
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
	{
		pfree(dropped_note);
		dropped_note = NULL;
	}
}

static void
note_dropped(const char *server, const char *ns, const char *table, const char *metadata)
{
	if (!xact_cb_registered)
	{
		RegisterXactCallback(purge_xact_callback, NULL);
		xact_cb_registered = true;
	}
	if (dropped_note)
		pfree(dropped_note);
	dropped_note = MemoryContextStrdup(TopMemoryContext,
									   psprintf("Table \"%s.%s\" of server \"%s\" was at metadata location \"%s\".",
												ns, table, server, metadata));
}

/* ----------------------------------------------------------------
 * tms.purge_table(server, namespace, table_name) -> job id
 * ----------------------------------------------------------------
 */

typedef struct Enqueue
{
	const char *server;
	const char *ns;
	const char *table;
	const char *uuid;
	const char *location;
	const char *metadata_location;
	char	   *storage_json;
	char	   *vended_json;	/* NULL: nothing vended */
	int64		expires_ms;		/* -1: unknown */
} Enqueue;

/* Raise if an active job holds the identifier. */
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
							   " WHERE server = $1 AND namespace = $2 AND table_name = $3"
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

/*
 * Connect SPI and check_no_active_job() as the extension owner (the user
 * is restored); on error, free the loaded table first.
 */
static pg_noinline void
check_active_freeing(IoLoadedTable *t, const char *server, const char *ns,
					 const char *table)
{
	Oid			save_uid;
	int			save_sec;

	GetUserIdAndSecContext(&save_uid, &save_sec);
	PG_TRY();
	{
		SPI_connect();
		become_owner();
		check_no_active_job(server, ns, table);
		SetUserIdAndSecContext(save_uid, save_sec);
	}
	PG_CATCH();
	{
		io_loaded_table_free(t);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* Insert the job, its credentials and its task; returns the job id. */
static int64
insert_job(const Enqueue *e)
{
	Oid			types[7] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
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
	rc = SPI_execute_with_args("INSERT INTO tms.iceberg_cleanup_job"
							   " (server, namespace, table_name, table_uuid, table_location,"
							   "  metadata_location, storage, created_by)"
							   " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, session_user)"
							   " RETURNING id",
							   7, types, args, nulls, false, 0);
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

/* The storage settings in effect for the table: non-secret ones as JSON. */
static void
describe_storage(TmsCatalogConn *conn, const IoLoadedTable *t, Enqueue *e)
{
	IoStorageConfig cfg = conn->storage;
	StringInfoData buf;
	StringInfoData secrets;
	bool		any_secret = false;

	io_storage_config_apply(&cfg, t->config, t->nconfig);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	appendStringInfoString(&buf, "\"endpoint\": ");
	if (cfg.s3_endpoint)
		escape_json(&buf, cfg.s3_endpoint);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"region\": ");
	if (cfg.s3_region)
		escape_json(&buf, cfg.s3_region);
	else
		appendStringInfoString(&buf, "null");
	appendStringInfoString(&buf, ", \"path_style\": ");
	appendStringInfoString(&buf, cfg.s3_path_style < 0 ? "null" :
						   cfg.s3_path_style ? "true" : "false");

	e->expires_ms = -1;
	initStringInfo(&secrets);
	appendStringInfoChar(&secrets, '{');
	for (size_t i = 0; i < t->nconfig; i++)
	{
		if (secret_key(t->config[i].key))
			any_secret = true;
		if (strcmp(t->config[i].key, "s3.session-token-expires-at-ms") == 0)
			e->expires_ms = strtoll(t->config[i].value, NULL, 10);
		if (i > 0)
			appendStringInfoString(&secrets, ", ");
		escape_json(&secrets, t->config[i].key);
		appendStringInfoString(&secrets, ": ");
		escape_json(&secrets, t->config[i].value);
	}
	appendStringInfoChar(&secrets, '}');
	e->vended_json = any_secret ? secrets.data : NULL;
	appendStringInfo(&buf, ", \"credentials\": \"%s\"}",
					 any_secret ? "vended at enqueue" :
					 cfg.s3_access_key_id ? "user mapping" : "none");
	e->storage_json = buf.data;
}

/* The server's allowed_locations, checked before any network call. */
static void
check_server_allows(const char *server_name, List **allowed, char **relative_root)
{
	ForeignServer *server = GetForeignServerByName(server_name, false);

	*relative_root = (char *) tms_fdw_option(server->options, "relative_path_root");
	*allowed = purge_allowed_roots(tms_fdw_option(server->options, "allowed_locations"),
								   *relative_root);
	if (*allowed == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot purge tables of server \"%s\": it has no allowed_locations", server_name),
				 errdetail("tms deletes files only under the storage roots a server allows."),
				 errhint("ALTER SERVER %s OPTIONS (ADD allowed_locations 's3://bucket/warehouse/');",
						 quote_identifier(server_name))));
}

Datum
tms_purge_table(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *ns_io;
	List	   *allowed;
	char	   *relative_root;
	TmsCatalogConn *conn;
	IoLoadedTable t;
	IcebergTableMetadata *md = NULL;
	IcebergError ierr;
	IoError		err;
	Enqueue		e;
	char	   *canon;
	bool		ok = false;
	ListCell   *lc;
	int64		id;
	Oid			save_uid;
	int			save_sec;
	MemoryContext fn_cxt = CurrentMemoryContext;

	if (ns[0] == '\0' || table[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace and table name must not be empty")));
	check_server_allows(server, &allowed, &relative_root);

	conn = tms_catalog_connect(server);
	ns_io = tms_namespace_to_io(ns);
	memset(&t, 0, sizeof(t));
	memset(&e, 0, sizeof(e));
	if (io_catalog_load_table(conn->catalog, ns_io, table, &t, &err) != 0)
		tms_io_ereport(&err);	/* 404: a clear error, no job */

	GetUserIdAndSecContext(&save_uid, &save_sec);
	check_active_freeing(&t, server, ns, table);
	/* SPI leaves its own context current; ours outlives SPI_finish */
	MemoryContextSwitchTo(fn_cxt);
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
		if (t.metadata_location == NULL || t.metadata_json == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot purge table \"%s.%s\": the catalog reports no metadata location", ns, table),
					 errdetail("A staged table has no files to purge."),
					 errhint("Drop it with tms.drop_table().")));
		if (!iceberg_metadata_parse(t.metadata_json, strlen(t.metadata_json), NULL, &md, &ierr))
			tms_iceberg_ereport(&ierr, NULL);
		e.server = server;
		e.ns = ns;
		e.table = table;
		e.uuid = md->table_uuid ? pstrdup(md->table_uuid) : NULL;
		e.metadata_location = pstrdup(t.metadata_location);
		canon = purge_canonical(md->location, relative_root);
		if (canon == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot purge table \"%s.%s\": its location cannot be resolved", ns, table),
					 errdetail("The location is \"%s\".", md->location),
					 errhint("A relative location needs the server option relative_path_root.")));
		foreach(lc, allowed)
			if (purge_path_under(canon, lfirst(lc)) || strcmp(canon, lfirst(lc)) == 0)
				ok = true;
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("cannot purge table \"%s.%s\": its location is outside the allowed_locations of server \"%s\"",
							ns, table, server),
					 errdetail("The location is \"%s\".", md->location),
					 errhint("Add its storage root to the server option allowed_locations.")));
		e.location = canon;
		describe_storage(conn, &t, &e);
	}
	PG_FINALLY();
	{
		iceberg_metadata_free(md);
		io_loaded_table_free(&t);
	}
	PG_END_TRY();

	/* the job first, in this transaction; the drop last */
	become_owner();
	id = insert_job(&e);
	SetUserIdAndSecContext(save_uid, save_sec);
	SPI_finish();

	if (io_catalog_drop_table(conn->catalog, ns_io, table, false, &err) != 0)
	{
		IoError		first = err;
		IoLoadedTable again;
		bool		gone = false;

		if (err.code == IO_ERR_TIMEOUT || err.code == IO_ERR_SERVER ||
			err.code == IO_ERR_UNAVAILABLE || err.code == IO_ERR_PROTOCOL ||
			err.code == IO_ERR_CONNECT)
		{
			/* did the drop happen?  a table that is gone was dropped */
			memset(&again, 0, sizeof(again));
			io_catalog_forget(conn->catalog, ns_io, table);
			if (io_catalog_load_table(conn->catalog, ns_io, table, &again, &err) != 0)
				gone = err.code == IO_ERR_NO_SUCH_TABLE;
			else
				io_loaded_table_free(&again);
		}
		if (!gone)
		{
			if (first.code == IO_ERR_NO_SUCH_TABLE)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("table \"%s.%s\" was dropped concurrently", ns, table),
						 errdetail("It existed when loaded, and no longer when tms dropped it; no job was recorded.")));
			tms_io_ereport(&first);
		}
	}
	io_catalog_forget(conn->catalog, ns_io, table);
	note_dropped(server, ns, table, e.metadata_location);
	PG_RETURN_INT64(id);
}

/* ----------------------------------------------------------------
 * tms.drop_table(server, namespace, table_name, purge)
 * ----------------------------------------------------------------
 */

Datum
tms_drop_table(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	bool		purge = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);
	TmsCatalogConn *conn = tms_catalog_connect(server);
	char	   *ns_io = tms_namespace_to_io(ns);
	IoError		err;

	if (io_catalog_drop_table(conn->catalog, ns_io, table, purge, &err) != 0)
		tms_io_ereport(&err);
	io_catalog_forget(conn->catalog, ns_io, table);
	PG_RETURN_VOID();
}
