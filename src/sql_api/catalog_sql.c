/*-------------------------------------------------------------------------
 *
 * catalog_sql.c
 *	  SQL functions to look into Iceberg catalogs and tables: namespaces,
 *	  tables, a table's metadata, snapshots, files and metrics.
 *
 * They work without shared_preload_libraries.  Each one connects through
 * tms_catalog_connect() (USAGE on the server and a user mapping needed),
 * reads files through tms_table_fileio() (the one location rule; local
 * files only below the server's allowed_locations), calls the plain-C io
 * and iceberg layers, and raises errors only after those calls returned:
 * each function runs its io and iceberg calls in a scope
 * (bridge/plain_memory.h), whose memory context an error or a query
 * cancel frees (wiped first), so nothing leaks and no PG_TRY is needed;
 * the results are copied into palloc'd memory inside the scope.  Long
 * work (HTTP, manifest streaming) checks InterruptPending through the
 * layers' interrupt callbacks and ends with CHECK_FOR_INTERRUPTS().
 *
 * Namespaces are written with '.' between levels ("db.schema").
 *
 * tms.catalog_config shows what the catalog answered without its
 * credentials (io/util/secret_names.h, the one list): credential-shaped keys and
 * values are left out, and a URL's login user info ("user:password@") is
 * shown as "***@".
 *
 * src/sql_api/catalog_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/plain_memory.h"
#include "io/util/secret_names.h"
#include "sql_api/api.h"

PG_FUNCTION_INFO_V1(tms_catalog_config);
PG_FUNCTION_INFO_V1(tms_list_namespaces);
PG_FUNCTION_INFO_V1(tms_list_tables);
PG_FUNCTION_INFO_V1(tms_table_metadata);
PG_FUNCTION_INFO_V1(tms_table_snapshots);
PG_FUNCTION_INFO_V1(tms_table_files);
PG_FUNCTION_INFO_V1(tms_table_metrics);

/* Namespace nesting followed by list_tables(server, NULL). */
#define MAX_NAMESPACE_DEPTH 16

/* ----------------------------------------------------------------
 * Helpers
 * ----------------------------------------------------------------
 */

static Datum
jsonb_from_cstring(const char *s)
{
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(s));
}

static TimestampTz
ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms * 1000) -
		(TimestampTz) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

/*
 * Check a table identifier from SQL.  Callers do it before
 * tms_catalog_connect: a name that cannot be sent must not cause any
 * request, not even a new connection's /v1/config handshake.
 */
static void
check_ident(const char *ns, const char *table)
{
	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
}

/*
 * Load a table through the catalog.  *out is allocated by the io layer,
 * in the caller's scope: free it with io_loaded_table_free.
 */
static void
load_table(TmsCatalogConn *conn, const char *ns, const char *table,
		   IoLoadedTable *out)
{
	TmsError	err;

	check_ident(ns, table);
	if (io_catalog_load_table(conn->catalog, tms_namespace_to_io(ns), table,
							  out, &err) != 0)
		tms_error_ereport(&err);
	CHECK_FOR_INTERRUPTS();
	if (out->metadata_json == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("catalog returned no metadata for table \"%s.%s\"", ns, table)));
}

/* Parse the loaded metadata JSON (ereport on failure). */
static IcebergTableMetadata *
parse_metadata(const IoLoadedTable *t)
{
	IcebergTableMetadata *md = NULL;
	TmsError	err;

	if (!iceberg_metadata_parse(t->metadata_json, strlen(t->metadata_json),
								NULL, &md, &err))
		tms_error_ereport(&err);
	return md;
}

static void
append_json_string(StringInfo buf, const char *s)
{
	if (s == NULL)
		appendStringInfoString(buf, "null");
	else
		escape_json(buf, s);
}

/* ----------------------------------------------------------------
 * tms.catalog_config(server) -> (key, value)
 * ----------------------------------------------------------------
 */

/*
 * value with the user info of every URL in it that carries a login
 * ("https://user:password@host/...") replaced by "***": the URL stays
 * readable, its credential does not.  palloc'd when changed.
 */
static char *
redact_userinfo(const char *value)
{
	size_t		len = strlen(value);
	size_t		from = 0,
				start,
				end;
	StringInfoData b;

	if (!io_find_userinfo(value, len, 0, &start, &end))
		return (char *) value;
	initStringInfo(&b);
	while (io_find_userinfo(value, len, from, &start, &end))
	{
		appendBinaryStringInfo(&b, value + from, start - from);
		appendStringInfoString(&b, "***");
		from = end;
	}
	appendBinaryStringInfo(&b, value + from, len - from);
	return b.data;
}

Datum
tms_catalog_config(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	TmsCatalogConn *conn;
	const IoKeyValue *props;
	const IoStringList *eps;
	size_t		n,
				i;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	props = io_catalog_properties(conn->catalog, &n);
	for (i = 0; i < n; i++)
	{
		char	   *value = redact_userinfo(props[i].value);

		if (io_secret_key(props[i].key, strlen(props[i].key)) ||
			io_secret_value(value, strlen(value)))
			continue;
		values[0] = CStringGetTextDatum(props[i].key);
		values[1] = CStringGetTextDatum(value);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	values[0] = CStringGetTextDatum("(prefix)");
	values[1] = CStringGetTextDatum(io_catalog_prefix(conn->catalog));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	eps = io_catalog_endpoints(conn->catalog);
	for (i = 0; i < eps->n; i++)
	{
		values[0] = CStringGetTextDatum("(endpoint)");
		values[1] = CStringGetTextDatum(eps->items[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 * tms.list_namespaces(server, parent) -> namespace
 * ----------------------------------------------------------------
 */

/* Fetch a namespace listing into a palloc'd list of io-form names. */
static List *
fetch_namespaces(TmsCatalogConn *conn, const char *parent_io)
{
	IoStringList list;
	TmsError	err;
	List	   *result = NIL;
	size_t		i;
	TmsIoScope *scope = tms_io_scope_begin();

	if (io_catalog_list_namespaces(conn->catalog, parent_io, &list, &err) != 0)
		tms_error_ereport(&err);
	{
		CHECK_FOR_INTERRUPTS();
		for (i = 0; i < list.n; i++)
			result = lappend(result, pstrdup(list.items[i]));
	}
	io_string_list_free(&list);
	tms_io_scope_end(scope);
	return result;
}

Datum
tms_list_namespaces(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *parent = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	TmsCatalogConn *conn;
	List	   *nss;
	ListCell   *lc;

	if (parent)
		tms_check_namespace(parent);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	nss = fetch_namespaces(conn, parent ? tms_namespace_to_io(parent) : NULL);
	foreach(lc, nss)
	{
		Datum		v = CStringGetTextDatum(tms_namespace_from_io(lfirst(lc)));
		bool		null = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &null);
	}
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 * tms.list_tables(server, namespace) -> (namespace, table_name)
 * ----------------------------------------------------------------
 */

static void
put_tables(ReturnSetInfo *rsinfo, TmsCatalogConn *conn, const char *ns_io)
{
	IoTableList list;
	TmsError	err;
	size_t		i;
	TmsIoScope *scope = tms_io_scope_begin();

	if (io_catalog_list_tables(conn->catalog, ns_io, &list, &err) != 0)
		tms_error_ereport(&err);
	{
		CHECK_FOR_INTERRUPTS();
		for (i = 0; i < list.n; i++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			values[0] = CStringGetTextDatum(tms_namespace_from_io(list.items[i].ns));
			values[1] = CStringGetTextDatum(list.items[i].name);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	io_table_list_free(&list);
	tms_io_scope_end(scope);
}

/* Depth-first over the namespace tree, tables of each namespace. */
static void
put_tables_recursive(ReturnSetInfo *rsinfo, TmsCatalogConn *conn,
					 const char *parent_io, int depth)
{
	List	   *nss;
	ListCell   *lc;

	if (depth > MAX_NAMESPACE_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("namespaces nested deeper than %d levels", MAX_NAMESPACE_DEPTH)));
	nss = fetch_namespaces(conn, parent_io);
	foreach(lc, nss)
	{
		const char *ns = lfirst(lc);

		put_tables(rsinfo, conn, ns);
		put_tables_recursive(rsinfo, conn, ns, depth + 1);
	}
}

Datum
tms_list_tables(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	TmsCatalogConn *conn;

	if (ns != NULL)
		tms_check_namespace(ns);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	if (ns == NULL)
		put_tables_recursive(rsinfo, conn, NULL, 0);
	else
		put_tables(rsinfo, conn, tms_namespace_to_io(ns));
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 * tms.table_metadata(server, namespace, table) -> jsonb
 * ----------------------------------------------------------------
 */
Datum
tms_table_metadata(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	TmsCatalogConn *conn;
	IoLoadedTable t;
	char	   *json = NULL;
	TmsIoScope *scope;

	check_ident(ns, table);
	conn = tms_catalog_connect(server);
	memset(&t, 0, sizeof(t));
	scope = tms_io_scope_begin();
	{
		load_table(conn, ns, table, &t);
		json = pstrdup(t.metadata_json);
	}
	io_loaded_table_free(&t);
	tms_io_scope_end(scope);
	PG_RETURN_DATUM(jsonb_from_cstring(json));
}

/* ----------------------------------------------------------------
 * tms.table_snapshots(server, namespace, table)
 * ----------------------------------------------------------------
 */
Datum
tms_table_snapshots(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	TmsCatalogConn *conn;
	IoLoadedTable t;
	IcebergTableMetadata *md = NULL;
	TmsIoScope *scope;

	check_ident(ns, table);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	memset(&t, 0, sizeof(t));
	scope = tms_io_scope_begin();
	{
		int			i;

		load_table(conn, ns, table, &t);
		md = parse_metadata(&t);
		for (i = 0; i < md->nsnapshots; i++)
		{
			const IcebergSnapshot *s = &md->snapshots[i];
			Datum		values[8];
			bool		nulls[8];
			StringInfoData buf;
			int			k;

			memset(nulls, 0, sizeof(nulls));
			values[0] = Int64GetDatum(s->snapshot_id);
			values[1] = Int64GetDatum(s->parent_snapshot_id);
			nulls[1] = s->parent_snapshot_id < 0;
			values[2] = Int64GetDatum(s->sequence_number);
			values[3] = TimestampTzGetDatum(ms_to_timestamptz(s->timestamp_ms));
			values[4] = s->operation ? CStringGetTextDatum(s->operation) : (Datum) 0;
			nulls[4] = s->operation == NULL;
			values[5] = s->manifest_list ? CStringGetTextDatum(s->manifest_list) : (Datum) 0;
			nulls[5] = s->manifest_list == NULL;
			initStringInfo(&buf);
			appendStringInfoChar(&buf, '{');
			for (k = 0; k < s->nsummary; k++)
			{
				if (k > 0)
					appendStringInfoString(&buf, ", ");
				append_json_string(&buf, s->summary[k].key);
				appendStringInfoString(&buf, ": ");
				append_json_string(&buf, s->summary[k].value);
			}
			appendStringInfoChar(&buf, '}');
			values[6] = jsonb_from_cstring(buf.data);
			values[7] = BoolGetDatum(s->snapshot_id == md->current_snapshot_id);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	iceberg_metadata_free(md);
	io_loaded_table_free(&t);
	tms_io_scope_end(scope);
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 * tms.table_files(server, namespace, table, snapshot_id)
 * ----------------------------------------------------------------
 */

static const char *
content_name(int32_t content)
{
	switch (content)
	{
		case ICEBERG_CONTENT_DATA:
			return "data";
		case ICEBERG_CONTENT_POSITION_DELETES:
			return "position_deletes";
		case ICEBERG_CONTENT_EQUALITY_DELETES:
			return "equality_deletes";
	}
	return "unknown";
}

/* Raise an iceberg error, with the storage error behind it if any. */
static void
raise_iceberg(const TmsError *err, TmsTableFileIO *tio)
{
	tms_error_ereport(err);
}

/* Storage for a loaded table, or raise. */
static IoStorage *
table_storage(TmsCatalogConn *conn, const IoLoadedTable *t)
{
	TmsError	err;
	IoStorage  *st = tms_catalog_storage(conn, t, &err);

	if (st == NULL)
		tms_error_ereport(&err);
	return st;
}

Datum
tms_table_files(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	bool		have_snapshot = !PG_ARGISNULL(3);
	int64		snapshot_id = have_snapshot ? PG_GETARG_INT64(3) : 0;
	TmsCatalogConn *conn;
	IoLoadedTable t;
	IcebergTableMetadata *md = NULL;
	IoStorage  *storage = NULL;
	IcebergManifestListReader *mlr = NULL;
	IcebergManifestReader *mr = NULL;
	TmsTableFileIO *tio = palloc0(sizeof(TmsTableFileIO));
	IcebergFileIO fio;
	MemoryContext rowcxt;
	TmsIoScope *scope;

	check_ident(ns, table);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "tms table_files rows",
								   ALLOCSET_DEFAULT_SIZES);
	memset(&t, 0, sizeof(t));
	scope = tms_io_scope_begin();
	{
		const IcebergSnapshot *snap;
		const IcebergManifestFile *mf;
		TmsError	err;
		int			rc;

		load_table(conn, ns, table, &t);
		md = parse_metadata(&t);
		snap = have_snapshot ? iceberg_metadata_snapshot(md, snapshot_id) :
			iceberg_metadata_current_snapshot(md);
		if (snap == NULL && have_snapshot)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("snapshot %lld not found in table \"%s.%s\"",
							(long long) snapshot_id, ns, table)));
		if (snap != NULL)
		{
			storage = table_storage(conn, &t);
			tms_table_fileio(tio, conn->server, storage, &fio);
			if (!iceberg_manifest_list_open(&fio, md, snap,
											&mlr, &err))
				raise_iceberg(&err, tio);
			while ((rc = iceberg_manifest_list_next(mlr, &mf, &err)) == 1)
			{
				const IcebergManifestEntry *e;
				char	   *manifest_path = pstrdup(mf->manifest_path);

				if (!iceberg_manifest_open(&fio, mf, md->format_version,
										   ICEBERG_READ_PARTITION,
										   &mr, &err))
					raise_iceberg(&err, tio);
				while ((rc = iceberg_manifest_next(mr, &e, &err)) == 1)
				{
					Datum		values[11];
					bool		nulls[11];
					MemoryContext old;

					if (e->status == ICEBERG_STATUS_DELETED)
						continue;
					old = MemoryContextSwitchTo(rowcxt);
					memset(nulls, 0, sizeof(nulls));
					values[0] = CStringGetTextDatum(e->file_path);
					values[1] = CStringGetTextDatum(content_name(e->content));
					values[2] = e->file_format ? CStringGetTextDatum(e->file_format) : (Datum) 0;
					nulls[2] = e->file_format == NULL;
					values[3] = Int32GetDatum(e->spec_id);
					if (e->partition != NULL && e->partition_len > 0)
						values[4] = jsonb_from_cstring(pnstrdup(e->partition, e->partition_len));
					else
						nulls[4] = true;
					values[5] = Int64GetDatum(e->record_count);
					values[6] = Int64GetDatum(e->file_size_in_bytes);
					values[7] = Int64GetDatum(e->sequence_number);
					nulls[7] = e->sequence_number < 0;
					values[8] = Int64GetDatum(e->file_sequence_number);
					nulls[8] = e->file_sequence_number < 0;
					values[9] = Int64GetDatum(e->snapshot_id);
					nulls[9] = e->snapshot_id < 0;
					values[10] = CStringGetTextDatum(manifest_path);
					tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
					MemoryContextSwitchTo(old);
					MemoryContextReset(rowcxt);
				}
				if (rc < 0)
					raise_iceberg(&err, tio);
				iceberg_manifest_close(mr);
				mr = NULL;
				pfree(manifest_path);
				CHECK_FOR_INTERRUPTS();
			}
			if (rc < 0)
				raise_iceberg(&err, tio);
		}
	}
	iceberg_manifest_close(mr);
	iceberg_manifest_list_close(mlr);
	io_storage_free(storage);
	iceberg_metadata_free(md);
	io_loaded_table_free(&t);
	tms_io_scope_end(scope);
	MemoryContextDelete(rowcxt);
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 * tms.table_metrics(server, namespace, table, level) -> jsonb
 * ----------------------------------------------------------------
 */
Datum
tms_table_metrics(PG_FUNCTION_ARGS)
{
	char	   *server = tms_arg_name(fcinfo, 0, "server name");
	char	   *ns = tms_arg_text(fcinfo, 1, "namespace");
	char	   *table = tms_arg_text(fcinfo, 2, "table name");
	char	   *level_name = PG_ARGISNULL(3) ? "auto" : text_to_cstring(PG_GETARG_TEXT_PP(3));
	IcebergMetricsLevel level;
	TmsCatalogConn *conn;
	IoLoadedTable t;
	IcebergTableMetadata *md = NULL;
	IoStorage  *storage = NULL;
	TmsTableFileIO *tio = palloc0(sizeof(TmsTableFileIO));
	IcebergFileIO fio;
	IcebergTableMetrics m;
	TmsIoScope *scope;
	StringInfoData buf;
	static const char *const level_names[] = {"metadata", "manifest_list",
	"manifests", "deletes"};

	if (strcmp(level_name, "metadata") == 0)
		level = ICEBERG_METRICS_METADATA;
	else if (strcmp(level_name, "manifest_list") == 0)
		level = ICEBERG_METRICS_MANIFEST_LIST;
	else if (strcmp(level_name, "manifests") == 0)
		level = ICEBERG_METRICS_MANIFESTS;
	else if (strcmp(level_name, "deletes") == 0 || strcmp(level_name, "auto") == 0)
		level = ICEBERG_METRICS_DELETES;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid metrics level \"%s\"", level_name),
				 errhint("Valid levels are \"metadata\", \"manifest_list\", \"manifests\", \"deletes\" and \"auto\".")));

	check_ident(ns, table);
	conn = tms_catalog_connect(server);
	memset(&t, 0, sizeof(t));
	memset(&m, 0, sizeof(m));
	scope = tms_io_scope_begin();
	{
		TmsError	err;

		load_table(conn, ns, table, &t);
		md = parse_metadata(&t);
		storage = table_storage(conn, &t);
		tms_table_fileio(tio, conn->server, storage, &fio);
		if (!iceberg_table_metrics(&fio, md, level,
								   (int64_t) (GetCurrentTimestamp() / 1000 +
											  (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000),
								   NULL, NULL, &m, &err))
			raise_iceberg(&err, tio);
	}
	io_storage_free(storage);
	iceberg_metadata_free(md);
	io_loaded_table_free(&t);
	tms_io_scope_end(scope);

	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"level\": \"%s\", \"snapshots\": " INT64_FORMAT
					 ", \"oldestSnapshotAge\": " INT64_FORMAT
					 ", \"timeSinceLastUpdate\": " INT64_FORMAT,
					 level_names[m.level], m.snapshots, m.oldest_snapshot_age_ms,
					 m.time_since_last_update_ms);
	if (m.level >= ICEBERG_METRICS_MANIFEST_LIST)
		appendStringInfo(&buf, ", \"manifests\": " INT64_FORMAT, m.manifests);
	if (m.level >= ICEBERG_METRICS_MANIFESTS)
		appendStringInfo(&buf,
						 ", \"dataFiles\": " INT64_FORMAT ", \"dataFilesSize\": " INT64_FORMAT
						 ", \"dataRecords\": " INT64_FORMAT
						 ", \"equalityDeleteFiles\": " INT64_FORMAT
						 ", \"equalityDeleteFilesSize\": " INT64_FORMAT
						 ", \"equalityDeleteRecords\": " INT64_FORMAT
						 ", \"positionDeleteFiles\": " INT64_FORMAT
						 ", \"positionDeleteFilesSize\": " INT64_FORMAT
						 ", \"positionDeleteRecords\": " INT64_FORMAT
						 ", \"avgDataFileSize\": %.17g"
						 ", \"deletionVectors\": " INT64_FORMAT
						 ", \"deletionVectorRecords\": " INT64_FORMAT
						 ", \"deletedRecordRatio\": %.17g",
						 m.data_files, m.data_files_size, m.data_records,
						 m.equality_delete_files, m.equality_delete_files_size,
						 m.equality_delete_records, m.position_delete_files,
						 m.position_delete_files_size, m.position_delete_records,
						 m.avg_data_file_size, m.deletion_vectors,
						 m.deletion_vector_records, m.deleted_record_ratio);
	if (m.level >= ICEBERG_METRICS_DELETES)
		appendStringInfo(&buf,
						 ", \"dataFilesWithDeletes\": " INT64_FORMAT
						 ", \"dataFilesWithPositionDeletes\": " INT64_FORMAT
						 ", \"dataFilesWithEqualityDeletes\": " INT64_FORMAT,
						 m.data_files_with_deletes, m.data_files_with_position_deletes,
						 m.data_files_with_equality_deletes);
	appendStringInfoChar(&buf, '}');
	PG_RETURN_DATUM(jsonb_from_cstring(buf.data));
}
