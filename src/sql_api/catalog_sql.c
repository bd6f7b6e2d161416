/*-------------------------------------------------------------------------
 *
 * catalog_sql.c
 *	  SQL functions to look into Iceberg catalogs and tables: namespaces,
 *	  tables, a table's metadata, snapshots, files and metrics.
 *
 * They work without shared_preload_libraries.  Each one connects through
 * tms_catalog_connect() (USAGE on the server and a user mapping needed),
 * calls the plain-C io and iceberg layers, and raises errors only after
 * those calls returned: every malloc'd io/iceberg object is freed in a
 * PG_FINALLY block, so an error or a query cancel leaks nothing.  Long
 * work (HTTP, manifest streaming) checks InterruptPending through the
 * layers' interrupt callbacks and ends with CHECK_FOR_INTERRUPTS().
 *
 * Namespaces are written with '.' between levels ("db.schema").
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

#include "sql_api/catalog_conn.h"
#include "tms.h"

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
 * Load a table through the catalog.  *out is malloc'd by the io layer:
 * free it with io_loaded_table_free (the caller's PG_FINALLY).
 */
static void
load_table(TmsCatalogConn *conn, const char *ns, const char *table,
		   IoLoadedTable *out)
{
	IoError		err;

	if (io_catalog_load_table(conn->catalog, tms_namespace_to_io(ns), table,
							  out, &err) != 0)
		tms_io_ereport(&err);
	CHECK_FOR_INTERRUPTS();
	if (out->metadata_json == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("catalog returned no metadata for table \"%s.%s\"", ns, table)));
}

static bool
iceberg_interrupted(void *arg)
{
	return QueryCancelPending || ProcDiePending;	/* see tms_io_interrupted */
}

/*
 * An IcebergFileIO that sends s3:// s3a:// s3n:// paths to the io layer's
 * S3 reader and everything else to src/iceberg's local reader (which also
 * knows the relative and "file://host/x" paths of old local writers).
 * Handles are malloc'd wrappers: no palloc inside callbacks.
 */
typedef struct TmsFileHandle
{
	const IcebergFileIO *impl;
	void	   *h;
} TmsFileHandle;

static const IcebergFileIO *
pick_io(TmsFileIO *t, const char *path)
{
	if (pg_strncasecmp(path, "s3://", 5) == 0 ||
		pg_strncasecmp(path, "s3a://", 6) == 0 ||
		pg_strncasecmp(path, "s3n://", 6) == 0)
		return &t->s3;
	return &t->local;
}

/*
 * The path relative_root/rel for a relative path ("a/b", "file://a/b",
 * "file:a/b"), malloc'd; NULL when path is not relative or there is no
 * root.
 */
static char *
resolve_relative(const TmsFileIO *t, const char *path)
{
	const char *rel = NULL;
	char	   *r;
	size_t		n;

	if (t->relative_root == NULL)
		return NULL;
	if (strncmp(path, "file://", 7) == 0 && path[7] != '/')
		rel = path + 7;
	else if (strncmp(path, "file:", 5) == 0 && path[5] != '/')
		rel = path + 5;
	else if (path[0] != '/' && strstr(path, "://") == NULL)
		rel = path;
	if (rel == NULL)
		return NULL;
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	n = strlen(t->relative_root) + strlen(rel) + 2;
	r = malloc(n);
	if (r != NULL)
		snprintf(r, n, "%s/%s", t->relative_root, rel);
	return r;
}

static void *
tfio_open(void *arg, const char *path, int64_t *size_out, IcebergError *err)
{
	TmsFileIO  *t = arg;
	const IcebergFileIO *impl = pick_io(t, path);
	TmsFileHandle *fh = malloc(sizeof(TmsFileHandle));
	char	   *resolved = NULL;

	if (impl == &t->local)
		resolved = resolve_relative(t, path);
	if (fh == NULL)
	{
		free(resolved);
		err->code = ICEBERG_ERR_OUT_OF_MEMORY;
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->detail[0] = '\0';
		return NULL;
	}
	fh->impl = impl;
	fh->h = impl->open(impl->arg, resolved ? resolved : path, size_out, err);
	free(resolved);
	if (fh->h == NULL)
	{
		free(fh);
		return NULL;
	}
	return fh;
}

static int64_t
tfio_read(void *arg, void *handle, void *buf, size_t len, IcebergError *err)
{
	TmsFileHandle *fh = handle;

	return fh->impl->read(fh->impl->arg, fh->h, buf, len, err);
}

static void
tfio_close(void *arg, void *handle)
{
	TmsFileHandle *fh = handle;

	if (fh == NULL)
		return;
	fh->impl->close(fh->impl->arg, fh->h);
	free(fh);
}

void
tms_fileio_init(TmsFileIO *t, TmsCatalogConn *conn, IoStorage *storage,
				IcebergFileIO *out)
{
	memset(t, 0, sizeof(*t));
	t->relative_root = conn->relative_root;
	io_fileio_init(&t->s3state, storage, tms_io_interrupted, NULL, &t->s3);
	iceberg_local_fileio(&t->local, &t->localfs);
	memset(out, 0, sizeof(*out));
	out->arg = t;
	out->open = tfio_open;
	out->read = tfio_read;
	out->close = tfio_close;
	out->interrupted = iceberg_interrupted;
	out->limits = NULL;
}

/* Parse the loaded metadata JSON (ereport on failure). */
static IcebergTableMetadata *
parse_metadata(const IoLoadedTable *t)
{
	IcebergTableMetadata *md = NULL;
	IcebergError err;

	if (!iceberg_metadata_parse(t->metadata_json, strlen(t->metadata_json),
								NULL, &md, &err))
		tms_iceberg_ereport(&err, NULL);
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

/* Keys whose values could be credentials are not shown. */
static bool
secret_key(const char *key)
{
	static const char *const words[] = {"token", "secret", "credential",
	"password", "key-id", "access-key", NULL};
	int			i;

	for (i = 0; words[i]; i++)
		if (strstr(key, words[i]) != NULL)
			return true;
	return false;
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
		if (secret_key(props[i].key))
			continue;
		values[0] = CStringGetTextDatum(props[i].key);
		values[1] = CStringGetTextDatum(props[i].value);
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
	IoError		err;
	List	   *volatile result = NIL;
	size_t		i;

	if (io_catalog_list_namespaces(conn->catalog, parent_io, &list, &err) != 0)
		tms_io_ereport(&err);
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
		for (i = 0; i < list.n; i++)
			result = lappend(result, pstrdup(list.items[i]));
	}
	PG_FINALLY();
	{
		io_string_list_free(&list);
	}
	PG_END_TRY();
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
	IoError		err;
	size_t		i;

	if (io_catalog_list_tables(conn->catalog, ns_io, &list, &err) != 0)
		tms_io_ereport(&err);
	PG_TRY();
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
	PG_FINALLY();
	{
		io_table_list_free(&list);
	}
	PG_END_TRY();
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
	TmsCatalogConn *conn;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	if (PG_ARGISNULL(1))
		put_tables_recursive(rsinfo, conn, NULL, 0);
	else
		put_tables(rsinfo, conn,
				   tms_namespace_to_io(text_to_cstring(PG_GETARG_TEXT_PP(1))));
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
	TmsCatalogConn *conn = tms_catalog_connect(server);
	IoLoadedTable t;
	char	   *volatile json = NULL;

	memset(&t, 0, sizeof(t));
	PG_TRY();
	{
		load_table(conn, ns, table, &t);
		json = pstrdup(t.metadata_json);
	}
	PG_FINALLY();
	{
		io_loaded_table_free(&t);
	}
	PG_END_TRY();
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
	IcebergTableMetadata *volatile md = NULL;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	memset(&t, 0, sizeof(t));
	PG_TRY();
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
	PG_FINALLY();
	{
		iceberg_metadata_free(md);
		io_loaded_table_free(&t);
	}
	PG_END_TRY();
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
raise_iceberg(const IcebergError *err, TmsFileIO *tio)
{
	tms_iceberg_ereport(err, &tio->s3state.last_error);
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
	IcebergTableMetadata *volatile md = NULL;
	IoStorage  *volatile storage = NULL;
	IcebergManifestListReader *volatile mlr = NULL;
	IcebergManifestReader *volatile mr = NULL;
	TmsFileIO  *tio = palloc0(sizeof(TmsFileIO));
	IcebergFileIO fio;
	MemoryContext rowcxt;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	conn = tms_catalog_connect(server);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "tms table_files rows",
								   ALLOCSET_DEFAULT_SIZES);
	memset(&t, 0, sizeof(t));
	PG_TRY();
	{
		const IcebergSnapshot *snap;
		const IcebergManifestFile *mf;
		IcebergError err;
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
			storage = tms_catalog_storage(conn, &t);
			tms_fileio_init(tio, conn, storage, &fio);
			if (!iceberg_manifest_list_open(&fio, md, snap,
											(IcebergManifestListReader **) &mlr, &err))
				raise_iceberg(&err, tio);
			while ((rc = iceberg_manifest_list_next(mlr, &mf, &err)) == 1)
			{
				const IcebergManifestEntry *e;
				char	   *manifest_path = pstrdup(mf->manifest_path);

				if (!iceberg_manifest_open(&fio, mf, md->format_version,
										   ICEBERG_READ_PARTITION,
										   (IcebergManifestReader **) &mr, &err))
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
	PG_FINALLY();
	{
		iceberg_manifest_close(mr);
		iceberg_manifest_list_close(mlr);
		io_storage_free(storage);
		iceberg_metadata_free(md);
		io_loaded_table_free(&t);
	}
	PG_END_TRY();
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
	IcebergTableMetadata *volatile md = NULL;
	IoStorage  *volatile storage = NULL;
	TmsFileIO  *tio = palloc0(sizeof(TmsFileIO));
	IcebergFileIO fio;
	IcebergTableMetrics m;
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

	conn = tms_catalog_connect(server);
	memset(&t, 0, sizeof(t));
	memset(&m, 0, sizeof(m));
	PG_TRY();
	{
		IcebergError err;

		load_table(conn, ns, table, &t);
		md = parse_metadata(&t);
		storage = tms_catalog_storage(conn, &t);
		tms_fileio_init(tio, conn, storage, &fio);
		if (!iceberg_table_metrics(&fio, md, level,
								   (int64_t) (GetCurrentTimestamp() / 1000 +
											  (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000),
								   NULL, NULL, &m, &err))
			raise_iceberg(&err, tio);
	}
	PG_FINALLY();
	{
		io_storage_free(storage);
		iceberg_metadata_free(md);
		io_loaded_table_free(&t);
	}
	PG_END_TRY();

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
						 ", \"avgDataFileSize\": %.17g",
						 m.data_files, m.data_files_size, m.data_records,
						 m.equality_delete_files, m.equality_delete_files_size,
						 m.equality_delete_records, m.position_delete_files,
						 m.position_delete_files_size, m.position_delete_records,
						 m.avg_data_file_size);
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
