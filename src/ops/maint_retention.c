/*-------------------------------------------------------------------------
 *
 * maint_retention.c
 *	  retention on engine "local": the data files whose rows are all older
 *	  than a cutoff on a time column leave the table by one metadata-only
 *	  "delete" snapshot.
 *
 * The plan is src/iceberg/maint/retention.h's: each live data file is
 * dropped whole (its partition in its own spec, or its bounds, lie wholly
 * before the cutoff), straddling (some rows older), kept, or unknown (no
 * bounds on the column).  The files dropped whole are committed first;
 * delete files that applied only to them are removed in the same commit.
 * Mode "metadata" (the default) keeps straddling and unknown files and
 * lists them in the plan and the job's message.  Mode "rewrite" then, in
 * the same job, plans the straddling files (with "scan", the unknown ones
 * too) on the table reloaded and has the compaction helper rewrite them
 * without their older rows (maint_compact_run_plan: compaction's groups,
 * helper, checks and commit protocol, the helper given the cutoff), one
 * "overwrite" snapshot; the helper counts the rows it removed and the job
 * records them.  Mode "delete-files" plans the same files as a row delta
 * (retention.h, iceberg_retention_row_delta): the helper writes the
 * positions of the rows removed as one position delete file a group, the
 * commit is a "delete" that adds them and keeps the data files; a data
 * file it points at that went since its plan gives the commit up and the
 * job plans again (rewrite_straddling, bounded by the commit retries).
 * On a format v3 table the drops and the rewrite keep the deletion
 * vectors and row lineage as compaction does (its commit and helper);
 * mode "delete-files" there writes deletion vectors, not position delete
 * files: one Puffin file a group, one deletion vector per data file with
 * rows removed, holding those rows' positions and the positions the data
 * file's deletes already held (the helper merges them), and the commit
 * removes the data file's old deletion vector (by its Puffin file and
 * content_offset) in the same "delete" snapshot (v3 allows one per data
 * file); no row moves, so row lineage is untouched.  A deletion vector
 * added since the plan for such a data file is a conflict: the attempt's
 * Puffin file is deleted and the job plans again, as for a data file
 * gone.  Mode "delete-files" on a format v1 table (no delete files) is
 * refused with 0A000 when the options are checked.
 *
 * On a livy or trino server (maint_on_engine.c runs it) retention is one
 * DELETE FROM ... WHERE: maint_retention_engine_predicate binds the
 * where, or the column and the cutoff (resolved as here), to the table
 * and prints the predicate from the bound filter in the engine's dialect
 * (row_filter.h's printer, engine/statement.h's columns and literals);
 * maint_retention_engine_done records the rows removed: Trino's update
 * count, else what the summaries of the run's snapshots say (Spark).
 *
 * Options: column (required), older-than (required: an age before the run,
 * "90 days", or a point in time, "2026-01-01 00:00Z"), unit (for a long or
 * int epoch column: s, ms, us or ns).  The cutoff is resolved when the
 * table is loaded (again after a conflict).  Or, instead of those, a
 * where (tms.delete_rows, tms_delete_rows_submit below): the rows it
 * matches are removed by the same plan, commits and rewrite; it is bound
 * to the table when loaded (bind_where: 42703, 22023, 0A000), its files
 * that may match are all straddling (none unknown), and the helper gets
 * the where's text to parse and bind again, never SQL.
 *
 * The commit follows maint_rewrite.c: the new snapshot, assert-table-uuid
 * and assert-ref-snapshot-id (maint.c's protocol); commit_state records
 * the snapshot id, the base and every file written; a conflict deletes
 * what the attempt wrote, reloads and plans again.  Nothing is deleted
 * from storage: the dropped files stay reachable from earlier snapshots
 * until snapshot expiry, and orphan cleanup, remove them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "bridge/errors.h"
#include "engine/statement.h"
#include "iceberg/compact/row_filter.h"
#include "iceberg/maint/retention.h"
#include "iceberg/write/commit_request.h"
#include "ops/maint.h"
#include "ops/maint_int.h"
#include "sched/lease.h"

/* The cutoff as microseconds since 1970-01-01 UTC, at the run's load. */
static int64
cutoff_us(MaintRun *run)
{
	TimestampTz t = maint_time_resolve(&run->opt.older_than,
									   maint_ms_to_timestamp(run->now_ms));

	return t + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

/* Mode rewrite: can the compaction helper write every column of the table? */
static bool
rewritable(MaintRun *run, TmsError *err)
{
	IcebergSchema *schema;
	bool		ok;

	if (!iceberg_schema_parse(run->md->current_schema_json, &schema, err))
		return false;
	ok = iceberg_compact_check_schema(schema, err);
	iceberg_schema_free(schema);
	return ok;
}

/*
 * Bind a where (tms.delete_rows) to run->md: a name that is no column is
 * 42703, a column of a type not filtered 0A000, a literal not of its
 * column's type 22023, each with the DETAIL and HINT row_filter.c gives.
 */
static IcebergRetention *
bind_where(MaintRun *run, bool raise)
{
	IcebergRetention *r;
	TmsError	err;
	int			code;

	if (iceberg_retention_bind_where(run->md, run->opt.retention_where, &r, &err))
		return r;
	code = err.code == ICEBERG_ERR_NOT_FOUND ? ERRCODE_UNDEFINED_COLUMN :
		err.code == ICEBERG_ERR_UNSUPPORTED ? ERRCODE_FEATURE_NOT_SUPPORTED :
		err.code == ICEBERG_ERR_OUT_OF_MEMORY ? ERRCODE_OUT_OF_MEMORY :
		ERRCODE_INVALID_PARAMETER_VALUE;
	if (raise)
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", err.message),
				 errdetail("%s", err.detail[0] ? err.detail :
						   psprintf("The where is \"%s\".", run->opt.retention_where)),
				 err.hint[0] ? errhint("%s", err.hint) : 0));
	maint_fail_code(run, MAINT_TERMINAL, code, "invalid where of the deletion: %s",
					tms_error_text(&err));
	return NULL;
}

/*
 * Bind the column and cutoff to run->md.  raise: 22023 / 0A000 errors (the
 * checks before a job is recorded); else the run fails terminally with
 * the same SQLSTATE and NULL is returned (a job's run raises nothing).
 */
static IcebergRetention *
bind_run(MaintRun *run, bool raise)
{
	IcebergRetention *r;
	IcebergEpochUnit unit = ICEBERG_EPOCH_NONE;
	TmsError	err;

	/*
	 * format v1 has no delete files
	 * (https://iceberg.apache.org/spec/#version-2)
	 */
	if (run->md->format_version < 2 && run->opt.local && run->opt.retention_delete_files)
	{
		if (raise)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("retention mode \"delete-files\" is not supported on format v%d table \"%s.%s\"",
							run->md->format_version, run->ns, run->table),
					 errdetail("The table's format-version is %d; delete files and deletion vectors came with format v2 and v3.",
							   run->md->format_version),
					 errhint("Use \"mode\": \"rewrite\", or upgrade the table to format v2 or v3.")));
		maint_fail_code(run, MAINT_TERMINAL, ERRCODE_FEATURE_NOT_SUPPORTED,
						"retention mode \"delete-files\" is not supported on a format v%d table",
						run->md->format_version);
		return NULL;
	}
	if (run->opt.retention_unit != NULL)
		(void) iceberg_epoch_unit_parse(run->opt.retention_unit, &unit);
	if ((run->opt.retention_rewrite || run->opt.retention_delete_files) && !rewritable(run, &err))
	{
		if (raise)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("engine \"local\" cannot read the data files of table \"%s.%s\"",
							run->ns, run->table),
					 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail),
					 errhint("Leave out \"mode\" (or use \"metadata\"): only the files wholly older are dropped.")));
		maint_fail_code(run, MAINT_TERMINAL, ERRCODE_FEATURE_NOT_SUPPORTED,
						"cannot read the data files: %s", tms_error_text(&err));
		return NULL;
	}
	if (run->opt.retention_where != NULL)
		return bind_where(run, raise);
	if (!iceberg_retention_bind(run->md, run->opt.retention_column, cutoff_us(run), unit, &r, &err))
	{
		if (raise)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid options of operation \"retention\" on table \"%s.%s\"",
							run->ns, run->table),
					 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail)));
		maint_fail_code(run, MAINT_TERMINAL, ERRCODE_INVALID_PARAMETER_VALUE,
						"invalid options of retention: %s", tms_error_text(&err));
		return NULL;
	}
	return r;
}

void
maint_retention_check_table(MaintRun *run)
{
	if (run->opt.local)
		iceberg_retention_free(bind_run(run, true));
	else
		(void) maint_retention_engine_predicate(run, run->opt.engine_type, true);
}

/* ----------------------------------------------------------------
 * On a livy or trino server: the predicate of its DELETE FROM ... WHERE
 * ----------------------------------------------------------------
 */

typedef struct EnginePrinter
{
	EngineType	type;
	IcebergSchema *schema;
	TmsError	err;
	bool		failed;
} EnginePrinter;

static bool
print_column(void *arg, IoStrBuf *b, int32_t field_id, IcebergTypeId t)
{
	EnginePrinter *p = arg;

	for (int i = 0; i < p->schema->ncolumns; i++)
		if (p->schema->columns[i].id == field_id)
		{
			p->failed = engine_sql_column(p->type, b, p->schema->columns[i].name, &p->err) != 0;
			return !p->failed;
		}
	tms_error_set(&p->err, ENGINE_ERR_INVALID_NAME, "no column of field id %d", (int) field_id);
	p->failed = true;
	return false;
}

static bool
print_value(void *arg, IoStrBuf *b, IcebergTypeId t, int64_t v, const char *str)
{
	EnginePrinter *p = arg;
	EngineValueKind kind;

	switch (t)
	{
		case ICEBERG_TYPE_BOOLEAN:
			kind = ENGINE_VALUE_BOOL;
			break;
		case ICEBERG_TYPE_DATE:
			kind = ENGINE_VALUE_DATE;
			break;
		case ICEBERG_TYPE_TIMESTAMP:
			kind = ENGINE_VALUE_TIMESTAMP;
			break;
		case ICEBERG_TYPE_TIMESTAMPTZ:
			kind = ENGINE_VALUE_TIMESTAMPTZ;
			break;
		case ICEBERG_TYPE_TIMESTAMP_NS:
			kind = ENGINE_VALUE_TIMESTAMP_NS;
			break;
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			kind = ENGINE_VALUE_TIMESTAMPTZ_NS;
			break;
		case ICEBERG_TYPE_STRING:
			kind = ENGINE_VALUE_STRING;
			break;
		default:
			kind = ENGINE_VALUE_INT;	/* int, long: row_filter.c binds no
										 * other */
			break;
	}
	p->failed = engine_sql_value(p->type, b, kind, v, str, &p->err) != 0;
	return !p->failed;
}

/*
 * The predicate of the DELETE an engine of type type runs for this job,
 * printed from the filter bound to run->md (the where, or "column <
 * cutoff" with the cutoff resolved now, as locally): never the user's
 * text.  raise: errors are raised (the checks before a job is recorded);
 * else the run fails terminally and NULL is returned.
 */
char *
maint_retention_engine_predicate(MaintRun *run, EngineType type, bool raise)
{
	IcebergRetention *r = bind_run(run, raise);
	EnginePrinter p;
	IcebergRowFilterPrinter printer = {print_column, print_value, &p};
	IoStrBuf	b;
	TmsError	err;
	bool		ok;
	char	   *text = NULL;

	if (r == NULL)
		return NULL;			/* run->result says why */
	memset(&p, 0, sizeof(p));
	p.type = type;
	if (!iceberg_schema_parse(run->md->current_schema_json, &p.schema, &err))
	{
		iceberg_retention_free(r);
		if (raise)
			tms_error_ereport(&err);
		maint_fail_iceberg(run, "cannot read the table's schema", &err);
		return NULL;
	}
	io_sb_init(&b);
	ok = iceberg_row_filter_print(r->filter ? r->filter : r->older, &printer, &b);
	if (ok)
		text = pstrdup(b.data);
	io_sb_free(&b);
	iceberg_schema_free(p.schema);
	iceberg_retention_free(r);
	if (ok)
		return text;
	if (!p.failed)
		tms_error_set(&p.err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	if (raise)
		ereport(ERROR,
				(errcode(p.err.code == ENGINE_ERR_UNSUPPORTED ? ERRCODE_FEATURE_NOT_SUPPORTED :
						 ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("engine \"%s\" cannot run this retention on table \"%s.%s\": %s",
						run->engine_name ? run->engine_name : engine_type_name(type),
						run->ns, run->table, p.err.message),
				 p.err.detail[0] ? errdetail("%s", p.err.detail) : 0,
				 p.err.hint[0] ? errhint("%s", p.err.hint) : 0));
	maint_fail_code(run, MAINT_TERMINAL, p.err.code == ENGINE_ERR_UNSUPPORTED ?
					ERRCODE_FEATURE_NOT_SUPPORTED : ERRCODE_INVALID_PARAMETER_VALUE,
					"cannot write the DELETE for engine \"%s\": %s",
					run->engine_name ? run->engine_name : "", tms_error_text(&p.err));
	return NULL;
}

static char *
commit_state_json(const IcebergCompactCommit *res, int64 base, const IcebergRetentionPlan *p)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "{\"operation\": \"retention\", \"snapshot_id\": " INT64_FORMAT
					 ", \"base_snapshot\": " INT64_FORMAT
					 ", \"data_files_dropped\": " INT64_FORMAT
					 ", \"rows_removed\": " INT64_FORMAT
					 ", \"delete_files_removed\": " INT64_FORMAT
					 ", \"straddling_files\": %d, \"unknown_files\": %d, \"written\": [",
					 res->snapshot.snapshot_id, base, res->data_files_rewritten,
					 res->records_rewritten, res->delete_files_removed, p->nstraddling,
					 p->nunknown);
	for (int i = 0; i < res->nwritten; i++)
	{
		if (i)
			appendStringInfoString(&b, ", ");
		escape_json(&b, res->written[i]);
	}
	appendStringInfoString(&b, "]}");
	return b.data;
}

/* A cutoff (microseconds since 1970) as a JSON string in timestamptz's text. */
static char *
json_quote_timestamptz(int64 us)
{
	TimestampTz t = us - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	StringInfoData b;

	initStringInfo(&b);
	escape_json(&b, DatumGetCString(DirectFunctionCall1(timestamptz_out,
														TimestampTzGetDatum(t))));
	return b.data;
}

/*
 * A straddling or unknown file's plan row: kept, rewritten (mode
 * rewrite, or scan) or given position deletes (mode delete-files); a
 * straddling file's estimate of its rows removed is "rows_older_estimated"
 * for a cutoff and "rows_matching_estimated" for a where.
 */
static char *
file_json(MaintRun *run, const IcebergRetentionFile *f, bool straddling, bool where)
{
	bool		rewritten = straddling ? run->opt.retention_rewrite :
	run->opt.retention_scan && run->opt.retention_rewrite;
	bool		deletes = run->opt.retention_delete_files &&
	(straddling || run->opt.retention_scan);
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "{\"spec_id\": %d, \"partition\": %s, \"size\": " INT64_FORMAT
					 ", \"records\": " INT64_FORMAT,
					 f->spec_id, f->partition, f->size, f->records);
	/* on v3 the positions go into the data file's one deletion vector */
	if (deletes)
		appendStringInfo(&b, ", \"%s\": " INT64_FORMAT
						 ", \"kept\": true, \"%s\": true%s}",
						 where ? "rows_matching_estimated" : "rows_older_estimated",
						 f->older, run->md->format_version >= 3 ? "deletion_vector" : "position_deletes",
						 straddling ? "" : ", \"why\": \"no bounds on the column: read\"");
	if (deletes)
		return b.data;
	if (straddling)
		appendStringInfo(&b, ", \"%s\": " INT64_FORMAT ", \"kept\": %s",
						 where ? "rows_matching_estimated" : "rows_older_estimated",
						 f->older, rewritten ? "false, \"rewritten\": true" : "true");
	else if (rewritten)
		appendStringInfoString(&b, ", \"kept\": false, \"rewritten\": true, \"why\": \"no bounds on the column: read\"");
	else
		appendStringInfoString(&b, ", \"kept\": true, \"why\": \"no bounds on the column\"");
	appendStringInfoChar(&b, '}');
	return b.data;
}

/*
 * The plan as rows: each file dropped whole, each straddling and unknown
 * file (kept), and a summary with the cutoff or the where and the
 * estimate of rows removed: those of the files dropped, and with a
 * rewrite or position deletes the estimate of what they remove from the
 * straddling files.
 */
static void
emit_plan(MaintRun *run, const IcebergRetention *r, const IcebergRetentionPlan *p)
{
	const IcebergCompactPlan *d = p->drop;
	StringInfoData b;

	for (int i = 0; i < d->nfiles; i++)
		maint_emit(run, "drop-data-file", d->files[i].path,
				   psprintf("{\"spec_id\": %d, \"partition\": %s, \"size\": " INT64_FORMAT
							", \"records\": " INT64_FORMAT "}",
							d->files[i].spec_id, d->files[i].partition, d->files[i].size,
							d->files[i].records));
	for (int i = 0; i < p->nstraddling; i++)
		maint_emit(run, "straddling-data-file", p->straddling[i].path,
				   file_json(run, &p->straddling[i], true, r->where != NULL));
	for (int i = 0; i < p->nunknown; i++)
		maint_emit(run, "unknown-data-file", p->unknown[i].path,
				   file_json(run, &p->unknown[i], false, r->where != NULL));
	initStringInfo(&b);
	if (r->where != NULL)
	{
		appendStringInfoString(&b, "{\"where\": ");
		escape_json(&b, r->where);
	}
	else
	{
		appendStringInfoString(&b, "{\"column\": ");
		escape_json(&b, r->column);
		appendStringInfo(&b, ", \"cutoff\": %s, \"cutoff_in_column_units\": " INT64_FORMAT,
						 json_quote_timestamptz(r->cutoff_us), r->cutoff);
	}
	appendStringInfo(&b, ", \"mode\": \"%s\", \"scan\": %s, \"data_files\": " INT64_FORMAT
					 ", \"files_dropped\": " INT64_FORMAT ", \"files_dropped_by_partition\": " INT64_FORMAT
					 ", \"bytes_dropped\": " INT64_FORMAT ", \"rows_removed\": " INT64_FORMAT
					 ", \"straddling_files\": %d, \"straddling_rows\": " INT64_FORMAT
					 ", \"straddling_rows_%s_estimated\": " INT64_FORMAT
					 ", \"unknown_files\": %d, \"unknown_rows\": " INT64_FORMAT
					 ", \"files_kept\": " INT64_FORMAT ", \"rows_removed_estimated\": " INT64_FORMAT
					 ", \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
					 run->opt.retention_rewrite ? "rewrite" :
					 run->opt.retention_delete_files ? "delete-files" : "metadata",
					 run->opt.retention_scan ? "true" : "false", d->data_files,
					 p->dropped_files, p->dropped_by_partition, p->dropped_bytes, p->dropped_rows,
					 p->nstraddling, p->straddling_rows, r->where != NULL ? "matching" : "older",
					 p->straddling_older, p->nunknown, p->unknown_rows, p->kept_files,
					 p->dropped_rows + (run->opt.retention_rewrite || run->opt.retention_delete_files ?
										p->straddling_older : 0),
					 d->base_snapshot_id);
	maint_emit(run, "summary", "retention", b.data);
}

/* ----------------------------------------------------------------
 * The job's record of what it removed
 * ----------------------------------------------------------------
 */

typedef struct MessageStep
{
	MaintRun   *run;
	const char *message;
	int64		deletes_removed;
	int64		files;			/* data files dropped whole */
	int64		rows;			/* their rows */
	bool		written;
} MessageStep;

static void
step_message(void *arg)
{
	MessageStep *s = arg;
	MaintRun   *run = s->run;
	Oid			types[7] = {INT8OID, TEXTOID, INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID};
	Datum		args[7];
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = CStringGetTextDatum(s->message);
	args[4] = Int64GetDatum(s->deletes_removed);
	args[5] = Int64GetDatum(s->files);
	args[6] = Int64GetDatum(s->rows);
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET message = $4, delete_files_rewritten = $5,"
							   "       data_files_removed = $6, rows_removed = $7"
							   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
							   7, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the effect of a retention: %s", SPI_result_code_string(rc));
	s->written = SPI_processed == 1;
}

/*
 * The job's record: data_files_removed and rows_removed, the files dropped
 * whole and their rows (exact: the manifests' record counts);
 * delete_files_rewritten, the delete files removed; and its message,
 * which says all that and how many files were kept because they straddle
 * the cutoff or have no bounds.
 */
static void
record_effect(MaintRun *run, int64 files, int64 rows, int64 deletes, int straddling,
			  int unknown)
{
	MessageStep s = {run, NULL, deletes, files, rows, false};

	run->delete_files_rewritten = deletes;
	if (run->dry_run)
		return;
	if (run->opt.retention_where != NULL)
		s.message = psprintf("delete rows: " INT64_FORMAT " data files dropped whole, " INT64_FORMAT
							 " rows removed, " INT64_FORMAT " delete files removed; %d files may hold matching rows%s",
							 files, rows, deletes, straddling,
							 run->opt.retention_rewrite || run->opt.retention_delete_files ? "" :
							 " and were kept (mode metadata)");
	else
		s.message = psprintf("retention: " INT64_FORMAT " data files dropped whole, " INT64_FORMAT
							 " rows removed, " INT64_FORMAT " delete files removed; %d files straddling the cutoff and %d files without bounds on the column were kept",
							 files, rows, deletes, straddling, unknown);
	sched_owner_step(step_message, &s);
	if (!s.written && sched_lease_lost())
		run->result = MAINT_LEASE_LOST;
}

/*
 * A retention on a livy or trino server ended and the table was loaded
 * again: the job's rows_removed is Trino's update count; Spark's DELETE
 * answers none, so it is read from the summaries of the snapshots of
 * main committed since the submit's snapshot (else before_snapshot_id,
 * the snapshot at the job's start) whose operation removes rows
 * (delete, overwrite): deleted-records - added-records (copy-on-write)
 * + added-position-deletes (merge-on-read).  With equality deletes, or
 * no such summary, the count is unknown and the message says so.
 */
void
maint_retention_engine_done(MaintRun *run, int64 before_snapshot_id)
{
	const IcebergRef *main_ref = iceberg_metadata_ref(run->md, "main");
	int64		id = main_ref ? main_ref->snapshot_id : run->md->current_snapshot_id;
	int64		base = run->submit_snapshot_id >= 0 ? run->submit_snapshot_id :
	before_snapshot_id;
	int64		rows = 0;
	bool		known = true;
	int			seen = 0;
	MessageStep s = {run, NULL, 0, 0, 0, false};

	for (int steps = 0; id >= 0 && id != base && steps <= run->md->nsnapshots; steps++)
	{
		const IcebergSnapshot *snap = iceberg_metadata_snapshot(run->md, id);
		int64		v[4] = {0, 0, 0, 0};
		static const char *const keys[4] = {"deleted-records", "added-records",
		"added-position-deletes", "added-equality-deletes"};

		if (snap == NULL)
			break;
		id = snap->parent_snapshot_id;
		if (snap->operation == NULL || (strcmp(snap->operation, "delete") != 0 &&
										strcmp(snap->operation, "overwrite") != 0))
			continue;
		seen++;
		for (int k = 0; k < snap->nsummary; k++)
			for (int i = 0; i < 4; i++)
				if (strcmp(snap->summary[k].key, keys[i]) == 0 && snap->summary[k].value)
					v[i] = strtoi64(snap->summary[k].value, NULL, 10);
		if (v[3] > 0)
			known = false;
		rows += v[0] - v[1] + v[2];
	}
	if (run->has_update_count)
		s.message = psprintf("delete rows on engine \"%s\": " INT64_FORMAT " rows removed (the engine's update count)",
							 run->engine_name, run->update_count);
	else if (seen > 0 && known && rows >= 0)
		s.message = psprintf("delete rows on engine \"%s\": " INT64_FORMAT " rows removed (from the summaries of its %d snapshots: deleted-records - added-records + added-position-deletes)",
							 run->engine_name, rows, seen);
	else if (seen == 0)
		s.message = psprintf("delete rows on engine \"%s\": no snapshot removed rows", run->engine_name);
	else
		s.message = psprintf("delete rows on engine \"%s\": the rows removed are not known from the summaries of its %d snapshots%s",
							 run->engine_name, seen, known ? "" : " (they add equality deletes)");
	s.rows = run->has_update_count ? run->update_count : known && rows > 0 ? rows : 0;
	sched_owner_step(step_message, &s);
	if (!s.written && sched_lease_lost())
		run->result = MAINT_LEASE_LOST;
}

/* ----------------------------------------------------------------
 * The run
 * ----------------------------------------------------------------
 */

/* What one attempt holds, freed whatever happens. */
typedef struct Attempt
{
	IcebergRetention *r;
	IcebergRetentionPlan *plan;
	IcebergCompactCommit res;
	char	   *body;
	MaintCommitOutcome outcome;
} Attempt;

/* Write the delete snapshot of a plan and commit it; its outcome. */
static MaintCommitOutcome
commit_plan(MaintRun *run, Attempt *a)
{
	IcebergWriter w = {run, maint_write_file};
	IcebergRetentionPlan *plan = a->plan;
	int64		id = iceberg_new_snapshot_id(run->md);
	MaintCommitOutcome outcome = MAINT_COMMIT_FAILED;
	TmsError	err;
	bool		written;

	/* the writer is called from the plain-C layer */
	run->in_callback = true;
	written = iceberg_retention_commit_write(&run->fio, &w, run->md, plan, id, &a->res, &err);
	run->in_callback = false;
	CHECK_FOR_INTERRUPTS();
	if (!written)
	{
		return maint_unsent(run, &err, "cannot write the delete snapshot",
							a->res.written, a->res.nwritten);
	}
	a->body = iceberg_commit_snapshot(run->md->table_uuid, "main", &a->res.snapshot, &err);
	if (a->body == NULL)
	{
		maint_fail(run, MAINT_TERMINAL, "cannot build the commit: %s", err.message);
		maint_delete_written(run, a->res.written, a->res.nwritten);
		return outcome;
	}
	outcome = maint_commit(run, a->body,
						   commit_state_json(&a->res, plan->drop->base_snapshot_id, plan),
						   a->res.written, a->res.nwritten, plan->drop->base_snapshot_id,
						   maint_snapshot_landed, &id);
	if (outcome == MAINT_COMMIT_LANDED)
	{
		run->after_snapshot_id = id;
		record_effect(run, a->res.data_files_rewritten, a->res.records_rewritten,
					  a->res.delete_files_removed, plan->nstraddling, plan->nunknown);
	}
	return outcome;
}

/* Bind, plan, emit, and commit unless a dry run (not inlined into PG_TRY). */
static pg_noinline MaintCommitOutcome
attempt(MaintRun *run, Attempt *a)
{
	TmsError	err;

	a->r = bind_run(run, false);
	if (a->r == NULL)
		return MAINT_COMMIT_FAILED; /* run->result says why */
	if (!iceberg_retention_plan(&run->fio, run->md, a->r, &a->plan, &err))
	{
		if (err.code == ICEBERG_ERR_UNSUPPORTED)
			maint_fail(run, MAINT_SKIPPED, "%s%s%s", tms_error_text(&err),
					   err.hint[0] ? ". " : "", err.hint);
		else if (maint_moved_on(run, &err))
			return MAINT_COMMIT_RETRY;
		else
			maint_fail_iceberg(run, "cannot plan the retention", &err);
		return MAINT_COMMIT_FAILED;
	}
	emit_plan(run, a->r, a->plan);
	if (a->plan->drop->ngroups == 0)
	{
		/* no file is wholly older */
		record_effect(run, 0, 0, 0, a->plan->nstraddling, a->plan->nunknown);
		return MAINT_COMMIT_LANDED;
	}
	if (run->dry_run)
	{
		maint_emit(run, "commit", "delete",
				   psprintf("{\"deleted-data-files\": " INT64_FORMAT
							", \"deleted-records\": " INT64_FORMAT
							", \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
							a->plan->dropped_files, a->plan->dropped_rows,
							a->plan->drop->base_snapshot_id));
		return MAINT_COMMIT_LANDED;
	}
	return commit_plan(run, a);
}

/* One attempt; its outcome, whatever it holds freed. */
static MaintCommitOutcome
retention_once(MaintRun *run)
{
	Attempt    *a = palloc0(sizeof(Attempt));
	MaintCommitOutcome outcome;

	a->outcome = MAINT_COMMIT_FAILED;
	PG_TRY();
	{
		a->outcome = attempt(run, a);
	}
	PG_FINALLY();
	{
		run->in_callback = false;
		io_free(a->body);
		iceberg_compact_commit_free(&a->res);
		iceberg_retention_plan_free(a->plan);
		iceberg_retention_free(a->r);
	}
	PG_END_TRY();
	outcome = a->outcome;
	pfree(a);
	return outcome;
}

/* ----------------------------------------------------------------
 * Mode rewrite: the straddling files without their older rows
 * ----------------------------------------------------------------
 */

typedef struct RewriteStep
{
	MaintRun   *run;
	int64		files;
	int64		rows;
	bool		written;
} RewriteStep;

static void
step_rewrite(void *arg)
{
	RewriteStep *s = arg;
	MaintRun   *run = s->run;
	Oid			types[5] = {INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID};
	Datum		args[5];
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = Int64GetDatum(s->files);
	args[4] = Int64GetDatum(s->rows);
	if (run->opt.retention_delete_files)
		rc = SPI_execute_with_args(psprintf("UPDATE tms.table_maintenance_job"
											"   SET rows_removed = coalesce(rows_removed, 0) + $5,"
											"       message = coalesce(message || '; ', 'retention: ') ||"
											"         format('%%s data files read for ' ||"
											"                CASE WHEN options ? 'where' THEN 'matching' ELSE 'older' END ||"
											"                ' rows, %%s rows removed from them by %%s %s', $4, $5,"
											"                delete_files_added)"
											" WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
											run->md != NULL && run->md->format_version >= 3 ?
											"deletion vectors" : "position delete files"),
								   5, types, args, NULL, false, 0);
	else
		rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
								   "   SET rows_removed = coalesce(rows_removed, 0) + $5,"
								   "       message = coalesce(message || '; ', 'retention: ') ||"
								   "         format('%s data files rewritten without their ' ||"
								   "                CASE WHEN options ? 'where' THEN 'matching' ELSE 'older' END ||"
								   "                ' rows, %s rows removed from them', $4, $5)"
								   " WHERE id = $1 AND state = 'running' AND" LEASE_HELD,
								   5, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the rewrite of a retention: %s", SPI_result_code_string(rc));
	s->written = SPI_processed == 1;
}

/* The job's record of the rewrite: its files, and the rows it removed (exact: the helper's count). */
static void
record_rewrite(MaintRun *run, int64 files, int64 rows)
{
	RewriteStep s = {run, files, rows, false};

	if (run->dry_run)
		return;
	sched_owner_step(step_rewrite, &s);
	if (!s.written && sched_lease_lost())
		run->result = MAINT_LEASE_LOST;
}

/* Plan the rewrite on run->md, show it, and run it unless a dry run (not inlined into PG_TRY). */
static pg_noinline void
rewrite_planned(MaintRun *run, IcebergRetention **r, IcebergCompactPlan **plan)
{
	TmsError	err;
	int64		records = 0;
	bool		deletes = run->opt.retention_delete_files;

	*r = bind_run(run, false);
	if (*r == NULL)
		return;					/* run->result says why */
	if (!iceberg_retention_rewrite_plan(&run->fio, run->md, *r, run->opt.retention_scan, deletes,
										plan, &err) ||
		(deletes && !iceberg_retention_row_delta(*plan, &err)))
	{
		if (err.code == ICEBERG_ERR_UNSUPPORTED)
			maint_fail_code(run, MAINT_TERMINAL, ERRCODE_FEATURE_NOT_SUPPORTED, "%s: %s%s%s",
							err.message, err.detail, err.hint[0] ? " " : "", err.hint);
		else if (maint_moved_on(run, &err))
			maint_fail(run, MAINT_TRANSIENT, "the table changed while the rewrite was planned: %s",
					   tms_error_text(&err));
		else
			maint_fail_iceberg(run, "cannot plan the rewrite of the straddling files", &err);
		return;
	}
	for (int g = 0; g < (*plan)->ngroups; g++)
		records += (*plan)->groups[g].records;
	/* v3: one Puffin file a group, of one deletion vector per data file */
	if (deletes)
		maint_emit(run, "commit", "delete",
				   psprintf("{\"data-files-read\": %d, \"%s\": %d, \"records-read\": " INT64_FORMAT
							", \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
							(*plan)->nfiles,
							run->md->format_version >= 3 ? "deletion-vector-files" : "position-delete-files",
							(*plan)->ngroups, records, (*plan)->base_snapshot_id));
	else
		maint_emit(run, "commit", "overwrite",
				   psprintf("{\"rewritten-data-files\": %d, \"groups\": %d, \"records-read\": " INT64_FORMAT
							", \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
							(*plan)->nfiles, (*plan)->ngroups, records, (*plan)->base_snapshot_id));
	if (run->dry_run || (*plan)->ngroups == 0)
		return;
	run->rows_filtered = 0;
	run->groups_given_up = 0;
	maint_compact_run_plan(run, *plan);
	if (run->result == MAINT_OK && run->groups_given_up == 0)
		record_rewrite(run, (*plan)->nfiles, run->rows_filtered);
}

/*
 * After the metadata-only commit (or none): the straddling files (with
 * scan, the unknown ones too) of the table as it is now, rewritten
 * without their older rows by the compaction helper, one "overwrite";
 * or in mode delete-files given position deletes of those rows, one
 * "delete".  A row delta whose data file was removed or rewritten since
 * its plan must not commit (its deletes would miss the rows): its files
 * are deleted (maint_compact_run_plan) and it is planned again on the
 * reloaded table, as many times as a conflicting commit is retried.
 */
/* One plan and run of the straddling files on the table as it is now. */
static void
rewrite_once(MaintRun *run)
{
	IcebergRetention *volatile r = NULL;
	IcebergCompactPlan *volatile plan = NULL;

	if (!run->dry_run)
	{
		if (run->phase != NULL && strcmp(run->phase, "start") != 0 &&
			!maint_record_phase(run, "start", NULL))
			return;
		if (!maint_load(run))
			return;
	}
	PG_TRY();
	{
		rewrite_planned(run, (IcebergRetention **) &r, (IcebergCompactPlan **) &plan);
	}
	PG_FINALLY();
	{
		iceberg_compact_plan_free(plan);
		iceberg_retention_free(r);
	}
	PG_END_TRY();
}

static void
rewrite_straddling(MaintRun *run)
{
	for (int retry = 1;; retry++)
	{
		run->groups_given_up = 0;
		rewrite_once(run);
		if (run->result != MAINT_OK || run->groups_given_up == 0)
			return;
		ereport(LOG,
				(errmsg("maintenance job " INT64_FORMAT ": the position deletes of the retention no longer fit the table (a data file they point at was removed or rewritten); planned again",
						run->job_id)));
		if (!maint_commit_retry_allowed(run, retry))
			return;
	}
}

void
maint_run_retention(MaintRun *run)
{
	maint_commit_attempts(run, retention_once);
	if (run->result == MAINT_OK && (run->opt.retention_rewrite || run->opt.retention_delete_files))
		rewrite_straddling(run);
}

/*
 * A job found in phase "commit" or "cleanup" (as maint_resume_rewrite):
 * landed, done (its counts from the commit state); else what the old
 * attempt wrote is dropped when it can never land, and the job plans
 * again.
 */
void
maint_resume_retention(MaintRun *run)
{
	Jsonb	   *cs;

	switch (maint_resume_written(run, &cs))
	{
		case MAINT_RESUMED_LANDED:
			if (maint_json_int(cs, "group") >= 0)
			{
				/* the rewrite's commit (mode rewrite) landed */
				record_rewrite(run, Max(maint_json_int(cs, "data_files_rewritten"), 0),
							   Max(maint_json_int(cs, "rows_filtered"), 0));
				(void) maint_record_phase(run, "cleanup", run->commit_state);
				break;
			}
			record_effect(run, Max(maint_json_int(cs, "data_files_dropped"), 0),
						  Max(maint_json_int(cs, "rows_removed"), 0),
						  Max(maint_json_int(cs, "delete_files_removed"), 0),
						  (int) Max(maint_json_int(cs, "straddling_files"), 0),
						  (int) Max(maint_json_int(cs, "unknown_files"), 0));
			(void) maint_record_phase(run, "cleanup", run->commit_state);

			/*
			 * mode rewrite or delete-files: the straddling files after the
			 * drop
			 */
			if (run->result == MAINT_OK &&
				(run->opt.retention_rewrite || run->opt.retention_delete_files))
				rewrite_straddling(run);
			break;
		case MAINT_RESUMED_AGAIN:
			maint_run_retention(run);
			break;
		case MAINT_RESUMED_STOP:
			break;
	}
}

/* ----------------------------------------------------------------
 * tms.delete_rows: a job of retention with a where
 * ----------------------------------------------------------------
 */

int64
tms_delete_rows_submit(const char *server, const char *ns, const char *table,
					   const char *where, Jsonb *options)
{
	const char *mode = "rewrite";
	const char *engine = "local";
	bool		mode_given = false;
	StringInfoData b;

	if (where == NULL || strspn(where, " \t\r\n") == strlen(where))
		ereport(ERROR,
				(errcode(where == NULL ? ERRCODE_NULL_VALUE_NOT_ALLOWED : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the where of tms.delete_rows must not be %s", where == NULL ? "null" : "empty"),
				 errdetail("The where says which rows are deleted; without one every row would be."),
				 errhint("Give a filter such as 'user_id = 42', or drop the table's rows with DELETE FROM on an engine.")));
	if (options != NULL && (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid options of tms.delete_rows"),
				 errdetail("Options must be a JSON object such as {\"mode\": \"metadata\"}.")));
	if (options != NULL)
	{
		JsonbIterator *it = JsonbIteratorInit(&options->root);
		JsonbValue	v;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *key;

			if (tok != WJB_KEY)
				continue;
			key = pnstrdup(v.val.string.val, v.val.string.len);
			if (strcmp(key, "mode") != 0 && strcmp(key, "engine") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown option \"%s\" of tms.delete_rows", key),
						 errdetail("The options give \"%s\"; the where argument alone says which rows are deleted.", key),
						 errhint("The options are mode: \"rewrite\" (the default: files that may hold matching rows are rewritten without them), \"delete-files\" (their matching rows are deleted by position delete files, on format v3 by deletion vectors) or \"metadata\" (only files whose rows all match are dropped), and engine: \"local\" (the default) or a tms_engine server of type livy or trino, which runs DELETE FROM ... WHERE.")));
			tok = JsonbIteratorNext(&it, &v, true);
			if (tok != WJB_VALUE || v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid option \"%s\" of tms.delete_rows", key),
						 errdetail("%s", strcmp(key, "mode") == 0 ?
								   "The mode must be a string: \"rewrite\", \"delete-files\" or \"metadata\"." :
								   "The engine must be a string: \"local\" or the name of a tms_engine server.")));
			if (strcmp(key, "mode") == 0)
			{
				mode = pnstrdup(v.val.string.val, v.val.string.len);
				mode_given = true;
			}
			else
				engine = pnstrdup(v.val.string.val, v.val.string.len);
		}
	}
	/* retention's options: the where, and the mode (checked there) */
	initStringInfo(&b);
	appendStringInfoString(&b, "{\"where\": ");
	escape_json(&b, where);
	/* on an engine, a mode given is refused by retention's check */
	if (strcmp(engine, "local") == 0 || mode_given)
	{
		appendStringInfoString(&b, ", \"mode\": ");
		escape_json(&b, mode);
	}
	appendStringInfoChar(&b, '}');
	return tms_operation_submit(server, ns, table, "retention",
								DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(b.data))),
								engine);
}
