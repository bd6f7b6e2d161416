/*-------------------------------------------------------------------------
 *
 * maint_compact.c
 *	  compaction on engine "local": Iceberg's bin-pack rewrite of a table's
 *	  data files, run by tms itself; and the run of position-delete-rewrite
 *	  (its plan from posdel.h, its checks and plan rows in maint_posdel.c),
 *	  whose groups of delete files go through the same helper, batches,
 *	  commits, resume and cleanup; retention's mode "rewrite" runs its plan
 *	  of straddling files through maint_compact_run_plan too (the helper
 *	  given the cutoff, the commit an "overwrite"), and its mode
 *	  "delete-files" a row delta (compact.h: the helper writes position
 *	  delete files, with the delete codec and their metrics, the commit a
 *	  "delete"; a batch that no longer fits the table is counted in
 *	  run->groups_given_up, not failed: retention plans again).
 *
 * The plan is src/iceberg/compact/compact.h's (the groups, their delete files,
 * the output file counts); tms.plan_operation shows it.  The groups are
 * committed as Iceberg's RewriteDataFilesSparkAction commits them: all in
 * one snapshot (partial-progress.enabled false, the default), or in
 * batches of ceil(groups / partial-progress.max-commits) groups, each its
 * own snapshot; a commit that cannot go on the table (a group no longer
 * fits it) fails the run without partial progress, and with it counts
 * towards partial-progress.max-failed-commits (default max-commits), past
 * which the run fails, the commits before staying.  Up to
 * max-concurrent-file-group-rewrites groups are in the helper at once (as
 * many as it grants: tms_compactor.c says how it shares its memory and
 * threads among them); the groups are sent in plan order as others end,
 * and a batch is committed once its groups are all done, while the
 * groups after it go on (Iceberg commits as groups finish, too); a failed
 * helper fails the run, and what the groups not committed wrote is
 * deleted once it is stopped.  A run then, batch after batch:
 *	 write		the compaction helper (compactor.c: a process of its own
 *				running DuckDB, capped by tms.compaction_memory_limit and
 *				tms.compaction_threads, spilling to its temporary
 *				directory) reads the group's data files, applies their
 *				deletes, writes the Parquet files (a position delete
 *				rewrite on v3: one Puffin file of deletion vectors,
 *				posdel.h) and uploads them through
 *				tms's storage; the worker checks every file it announces
 *				(its name is one the worker gave, its object exists with
 *				the size announced, the rows add up);
 *	 commit		the batch's "replace" snapshot is built on the table as it
 *				is now (iceberg_compact_commit_write: the rewritten files
 *				must still be live and no position delete file may have
 *				come to their partitions since the plan) and committed with
 *				maint.c's protocol (requirements, phase "commit" recorded
 *				first).  A conflict (409) reloads the table and builds the
 *				commit again on it; a batch that no longer fits the table
 *				is given up (its files deleted), a failed commit (above);
 *	 record		once landed, the job's counts grow by the batch's in the
 *				same short step that leaves phase "cleanup" (so a resumed
 *				job counts a landed commit once).
 * Nothing is deleted from the table's files: the rewritten data files and
 * removed delete files stay reachable from earlier snapshots until
 * snapshot expiry.  What a failed attempt wrote (data files, manifests)
 * is deleted once the commit certainly failed; after an unknown outcome
 * it stays (orphan cleanup removes it once old).
 *
 * The helper is stopped in every case (PG_FINALLY): a cancel, a lost
 * lease, an error or the end of the job kill it and remove its directory.
 * When it fails, every name the attempt may have written is deleted, and
 * beside each the temporary name of a local write of its pid (a helper
 * killed inside a write leaves that file; io_local_temp_name).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "iceberg/write/commit_request.h"
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_wire.h"
#include "iceberg/compact/posdel.h"
#include "iceberg/maint/retention.h"
#include "ops/compactor.h"
#include "ops/maint_int.h"
#include "ops/ops.h"
#include "sched/lease.h"

void
tms_compact_init(void)
{
	DefineCustomIntVariable("tms.compaction_memory_limit",
							gettext_noop("Memory the compaction helper's DuckDB may use; beyond it, it spills to disk."),
							NULL,
							&tms_compaction_memory_limit_mb,
							1024, 64, INT_MAX / 2,
							PGC_SIGHUP, GUC_UNIT_MB, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.compaction_threads",
							gettext_noop("Threads the compaction helper's DuckDB may use."),
							NULL,
							&tms_compaction_threads,
							2, 1, 64,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("tms.compaction_temp_directory",
							   gettext_noop("Where the compaction helper downloads its input and spills (empty: the database's pgsql_tmp)."),
							   NULL,
							   &tms_compaction_temp_directory,
							   "",
							   PGC_SIGHUP, 0, NULL, NULL, NULL);
}

/* ----------------------------------------------------------------
 * Options
 * ----------------------------------------------------------------
 */

/* The run's options as the plain-C planner takes them (also the position-delete rewrite's). */
void
maint_compact_options(MaintRun *run, IcebergCompactOptions *o, const IcebergPartitionFilter *where)
{
	memset(o, 0, sizeof(*o));
	o->target_file_size_bytes = run->opt.target_file_size_bytes;
	o->min_file_size_bytes = run->opt.min_file_size_bytes;
	o->max_file_size_bytes = run->opt.max_file_size_bytes;
	o->min_input_files = run->opt.min_input_files;
	o->max_file_group_size_bytes = run->opt.max_file_group_size_bytes;
	o->rewrite_all = run->opt.rewrite_all;
	o->delete_file_threshold = run->opt.delete_file_threshold;
	o->delete_ratio_threshold = run->opt.delete_ratio_threshold;
	o->remove_dangling_deletes = run->opt.remove_dangling_deletes;
	o->output_spec_id = run->opt.output_spec_id;
	o->where = where;
}

/* The bound where filter (NULL: none); false with run->result set. */
static bool
bind_where(MaintRun *run, IcebergPartitionFilter **out)
{
	TmsError	err;

	*out = NULL;
	if (run->opt.where == NULL)
		return true;
	if (!iceberg_partition_filter_parse(run->opt.where, out, &err) ||
		!iceberg_partition_filter_bind(*out, run->md, &err))
	{
		iceberg_partition_filter_free(*out);
		*out = NULL;
		maint_fail(run, MAINT_TERMINAL, "invalid option \"where\": %s%s%s", err.message,
				   err.detail[0] ? ": " : "", err.detail);
		return false;
	}
	return true;
}

/*
 * The order of strategy sort: the sort-order option bound to the schema,
 * else the table's default sort order, with the id Iceberg would stamp
 * on the files; *out NULL for bin-pack.  False with err.
 */
static bool
sort_order(MaintRun *run, const IcebergSchema *schema, IcebergSortOrder **out,
		   TmsError *err)
{
	*out = NULL;
	if (!run->opt.sort)
		return true;
	if (run->opt.sort_order != NULL ?
		!iceberg_sort_order_parse(run->opt.sort_order, schema, out, err) :
		!iceberg_sort_order_of_table(run->md, schema, out, err))
		return false;
	iceberg_sort_order_match(run->md, *out);
	return true;
}

/*
 * The where option (compaction, position-delete-rewrite) against the table
 * just loaded: its names and literals bound to the table's partition
 * fields, or 22023 naming the operation.
 */
void
maint_check_where(MaintRun *run, const char *operation)
{
	IcebergPartitionFilter *f = NULL;
	TmsError	err;

	if (run->opt.where == NULL)
		return;
	if (!iceberg_partition_filter_parse(run->opt.where, &f, &err) ||
		!iceberg_partition_filter_bind(f, run->md, &err))
	{
		iceberg_partition_filter_free(f);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"where\" of operation \"%s\"", operation),
				 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail)));
	}
	iceberg_partition_filter_free(f);
}

/*
 * tms.run_operation: the where filter's names and literals against the
 * table just loaded, the sort order's columns, the options' relations,
 * and the schema's types (a column the local engine cannot rewrite:
 * 0A000 naming it), before a job is recorded.
 */
void
maint_compact_check_table(MaintRun *run)
{
	TmsError	err;
	IcebergSchema *schema = NULL;
	IcebergCompactOptions o;

	maint_compact_options(run, &o, NULL);
	if (!iceberg_compact_check_options(run->md, &o, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid options of operation \"compaction\" on table \"%s.%s\"",
						run->ns, run->table),
				 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail)));
	maint_check_where(run, "compaction");
	if (!iceberg_schema_parse(run->md->current_schema_json, &schema, &err))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot read the schema of table \"%s.%s\"", run->ns, run->table),
				 errdetail("%s", err.message)));
	if (!iceberg_compact_check_schema(schema, &err))
	{
		iceberg_schema_free(schema);
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s", err.message),
				 errdetail("%s", err.detail),
				 errhint("Name a server of the tms_engine wrapper (Spark, Trino) as the engine for this table.")));
	}
	{
		IcebergSortOrder *so;

		if (!sort_order(run, schema, &so, &err))
		{
			iceberg_schema_free(schema);
			ereport(ERROR,
					(errcode(err.code == ICEBERG_ERR_UNSUPPORTED ? ERRCODE_FEATURE_NOT_SUPPORTED :
							 ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid option \"%s\" of operation \"compaction\"",
							run->opt.sort_order ? "sort-order" : "strategy"),
					 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail),
					 err.code == ICEBERG_ERR_UNSUPPORTED ?
					 errhint("Name a server of the tms_engine wrapper (Spark, Trino) as the engine for this table, or give a sort-order of top-level columns.") : 0));
		}
		iceberg_sort_order_free(so);
	}
	iceberg_schema_free(schema);
}

/* ----------------------------------------------------------------
 * The plan as rows
 * ----------------------------------------------------------------
 */

char *
maint_compact_reasons_json(unsigned r)
{
	StringInfoData b;
	static const struct
	{
		unsigned	bit;
		const char *name;
	}			names[] = {
		{ICEBERG_COMPACT_ENOUGH_INPUTS, "enough-input-files"},
		{ICEBERG_COMPACT_ENOUGH_CONTENT, "enough-content"},
		{ICEBERG_COMPACT_TOO_MUCH_CONTENT, "too-much-content"},
		{ICEBERG_COMPACT_DELETES, "delete-file-threshold"},
		{ICEBERG_COMPACT_DELETE_RATIO, "delete-ratio-threshold"},
		{ICEBERG_COMPACT_REWRITE_ALL, "rewrite-all"},
		{ICEBERG_COMPACT_DANGLING, "dangling"},
		{ICEBERG_COMPACT_TO_DV, "deletion-vectors"},
	};
	bool		first = true;

	initStringInfo(&b);
	appendStringInfoChar(&b, '[');
	for (int i = 0; i < (int) lengthof(names); i++)
		if (r & names[i].bit)
		{
			appendStringInfo(&b, "%s\"%s\"", first ? "" : ", ", names[i].name);
			first = false;
		}
	appendStringInfoChar(&b, ']');
	return b.data;
}

/*
 * Groups per commit: all in one without partial progress (Iceberg's
 * default), else ceil(groups / partial-progress.max-commits), as Iceberg's
 * RewriteDataFilesSparkAction divides them.
 */
static int
groups_per_commit(const MaintRun *run, int ngroups)
{
	int64		max_commits = Max(run->opt.partial_progress_max_commits, 1);

	if (!run->opt.partial_progress || ngroups <= 0)
		return Max(ngroups, 1);
	return (int) Max((ngroups + max_commits - 1) / max_commits, 1);
}

static int
commits_planned(const MaintRun *run, int ngroups)
{
	int			per = groups_per_commit(run, ngroups);

	return ngroups <= 0 ? 0 : (ngroups + per - 1) / per;
}

static void
emit_plan(MaintRun *run, const IcebergCompactPlan *p)
{
	int64		files = 0,
				bytes = 0,
				outputs = 0;

	for (int g = 0; g < p->ngroups; g++)
	{
		const IcebergCompactGroup *gr = &p->groups[g];
		int			npos = 0,
					neq = 0;

		for (int i = 0; i < gr->ndeletes; i++)
		{
			if (p->deletes[gr->deletes[i]].content == ICEBERG_CONTENT_POSITION_DELETES)
				npos++;
			else
				neq++;
		}
		for (int i = gr->first; i < gr->first + gr->nfiles; i++)
			maint_emit(run, "rewrite-file", p->files[i].path,
					   psprintf("{\"group\": %d, \"size\": " INT64_FORMAT ", \"records\": " INT64_FORMAT
								", \"deletes\": %d}",
								g, p->files[i].size, p->files[i].records, p->files[i].ndeletes));
		maint_emit(run, "rewrite-group", psprintf("group %d", g),
				   psprintf("{\"spec_id\": %d, \"partition\": %s, \"files\": %d, \"bytes\": " INT64_FORMAT
							", \"records\": " INT64_FORMAT ", \"output_files\": %d"
							", \"position_delete_files\": %d, \"equality_delete_files\": %d"
							", \"reasons\": %s}",
							gr->spec_id, gr->partition, gr->nfiles, gr->bytes, gr->records,
							gr->expected_outputs, npos, neq, maint_compact_reasons_json(gr->reasons)));
		files += gr->nfiles;
		bytes += gr->bytes;
		outputs += gr->expected_outputs;
	}
	/* the delete files the groups' commits remove, all of them committed */
	for (int d = 0; d < p->ndeletes; d++)
	{
		const IcebergCompactDelete *x = &p->deletes[d];
		int64		covered = 0;

		for (int k = 0; k < x->ngroups; k++)
			covered += x->group_files[k];
		if ((x->applies > 0 && covered == x->applies) ||
			(x->applies == 0 && p->remove_dangling_deletes && p->ngroups > 0))
			maint_emit(run, "remove-delete-file", x->path,
					   psprintf("{\"kind\": \"%s\", \"size\": " INT64_FORMAT ", \"records\": " INT64_FORMAT "}",
								x->content == ICEBERG_CONTENT_POSITION_DELETES ?
								"position-deletes" : "equality-deletes", x->size, x->records));
	}
	maint_emit(run, "summary", "compaction",
			   psprintf("{\"data_files\": " INT64_FORMAT ", \"data_bytes\": " INT64_FORMAT
						", \"filtered_out\": " INT64_FORMAT ", \"candidates\": " INT64_FORMAT
						", \"groups\": %d, \"files_rewritten\": " INT64_FORMAT
						", \"bytes_rewritten\": " INT64_FORMAT ", \"files_written\": " INT64_FORMAT
						", \"delete_files\": %d, \"target_file_size_bytes\": " INT64_FORMAT
						", \"min_file_size_bytes\": " INT64_FORMAT ", \"max_file_size_bytes\": " INT64_FORMAT
						", \"min_input_files\": %d, \"max_file_group_size_bytes\": " INT64_FORMAT
						", \"commits\": %d, \"output_spec_id\": %d"
						", \"kept_in_own_spec\": " INT64_FORMAT ", \"dangling_delete_files\": " INT64_FORMAT
						", \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
						p->data_files, p->data_bytes, p->filtered_out, p->candidates,
						p->ngroups, files, bytes, outputs, p->ndeletes, p->target_file_size_bytes,
						p->min_file_size_bytes, p->max_file_size_bytes, p->min_input_files,
						p->max_file_group_size_bytes, commits_planned(run, p->ngroups),
						(int) p->output_spec_id, p->kept_in_spec, p->dangling,
						p->base_snapshot_id));
}

/* ----------------------------------------------------------------
 * Recording a landed group
 * ----------------------------------------------------------------
 */

typedef struct CountStep
{
	MaintRun   *run;
	int64		rewritten;
	int64		added;
	int64		bytes;
	int64		deletes_removed;
	int64		deletes_added;
	bool		written;
} CountStep;

static void
step_counts(void *arg)
{
	CountStep  *s = arg;
	MaintRun   *run = s->run;
	Oid			types[9] = {INT8OID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
	INT8OID, INT8OID};
	Datum		args[9];
	int			rc;

	args[0] = Int64GetDatum(run->job_id);
	args[1] = CStringGetTextDatum(run->task->instance);
	args[2] = Int64GetDatum(run->task->version);
	args[3] = Int64GetDatum(s->rewritten);
	args[4] = Int64GetDatum(s->added);
	args[5] = Int64GetDatum(s->bytes);
	args[6] = Int64GetDatum(s->deletes_removed);
	args[7] = Int64GetDatum(s->deletes_added);
	args[8] = Int64GetDatum(run->dangling_dropped);
	rc = SPI_execute_with_args("UPDATE tms.table_maintenance_job"
							   "   SET data_files_rewritten = data_files_rewritten + $4,"
							   "       data_files_added = data_files_added + $5,"
							   "       bytes_rewritten = bytes_rewritten + $6,"
							   "       delete_files_rewritten = delete_files_rewritten + $7,"
							   "       delete_files_added = delete_files_added + $8,"
							   "       message = CASE WHEN $9 > 0 THEN format('%s dangling position deletes dropped', $9)"
							   "                      ELSE message END,"
							   "       phase = 'start', commit_state = NULL"
							   " WHERE id = $1 AND state = 'running' AND phase = 'cleanup' AND" LEASE_HELD,
							   9, types, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "could not record the counts of a compaction: %s", SPI_result_code_string(rc));
	s->written = SPI_processed == 1;
}

/*
 * Add a landed group's counts (once: only from phase cleanup): data files
 * rewritten and added, bytes rewritten, delete files removed and added,
 * dangling position deletes dropped.
 */
static bool
record_counts(MaintRun *run, int64 rewritten, int64 added, int64 bytes, int64 deletes,
			  int64 deletes_added, int64 dangling)
{
	CountStep	s = {run, rewritten, added, bytes, deletes, deletes_added, false};

	run->data_files_rewritten += rewritten;
	run->data_files_added += added;
	run->bytes_rewritten += bytes;
	run->delete_files_rewritten += deletes;
	run->delete_files_added += deletes_added;
	run->dangling_dropped += dangling;
	if (run->dry_run)
		return true;
	sched_owner_step(step_counts, &s);
	if (!s.written && sched_lease_lost())
	{
		run->result = MAINT_LEASE_LOST;
		return false;
	}
	run->phase = pstrdup("start");
	run->commit_state = NULL;
	return true;
}

/* ----------------------------------------------------------------
 * One group
 * ----------------------------------------------------------------
 */

/*
 * The bytes a landed commit rewrote: its data files' (compaction), else
 * its delete files' (position-delete-rewrite, as Spark's
 * rewritten_bytes_count).
 */
static int64
res_bytes(const IcebergCompactPlan *p, const IcebergCompactCommit *res)
{
	return p->rewrite_content == ICEBERG_CONTENT_DATA ? res->bytes_rewritten :
		res->delete_bytes_removed;
}

static char *
commit_state_json(const IcebergCompactPlan *p, int g, const IcebergCompactCommit *res,
				  char **outputs, int noutputs, int64 dangling, int64 filtered)
{
	const char *op = iceberg_compact_removes_rows(p) ? "retention" :
	p->rewrite_content == ICEBERG_CONTENT_DATA ? "compaction" : "position-delete-rewrite";
	StringInfoData b;
	bool		first = true;

	initStringInfo(&b);
	appendStringInfo(&b, "{\"operation\": \"%s\", \"group\": %d, \"snapshot_id\": " INT64_FORMAT
					 ", \"base_snapshot\": " INT64_FORMAT
					 ", \"data_files_rewritten\": " INT64_FORMAT
					 ", \"data_files_added\": " INT64_FORMAT
					 ", \"bytes_rewritten\": " INT64_FORMAT
					 ", \"delete_files_removed\": " INT64_FORMAT
					 ", \"delete_files_added\": " INT64_FORMAT
					 ", \"dangling_dropped\": " INT64_FORMAT
					 ", \"rows_filtered\": " INT64_FORMAT ", \"written\": [",
					 op, g, res->snapshot.snapshot_id, res->snapshot.parent_snapshot_id,
					 res->data_files_rewritten, res->data_files_added, res_bytes(p, res),
					 res->delete_files_removed, res->delete_files_added, dangling, filtered);
	for (int i = 0; i < noutputs; i++, first = false)
	{
		appendStringInfoString(&b, first ? "" : ", ");
		escape_json(&b, outputs[i]);
	}
	for (int i = 0; i < res->nwritten; i++, first = false)
	{
		appendStringInfoString(&b, first ? "" : ", ");
		escape_json(&b, res->written[i]);
	}
	appendStringInfoString(&b, "]}");
	return b.data;
}

/*
 * The files the helper announced for group g, checked: a name the worker
 * gave (dir + prefix + "-NNNNN." + ext, NNNNN below the group's output
 * count, each once; a Puffin file, and only it, lists deletion vectors),
 * an object that exists with the size announced.
 */
static bool
check_output(MaintRun *run, const IcebergCompactOutput *o, const char *dir, const char *prefix,
			 const char *ext, int files, bool *seen)
{
	size_t		dl = strlen(dir);
	size_t		pl = strlen(prefix);
	const char *p = o->path;
	int			n = -1;
	char		tail[32];
	char	   *c;
	uint64		size;
	TmsError	err;

	if (strncmp(p, dir, dl) != 0 || strncmp(p + dl, prefix, pl) != 0 ||
		sscanf(p + dl + pl, "-%5d.%*[a-z]%1s", &n, tail) != 1 || n < 0 || n >= files ||
		strlen(p + dl + pl) != strlen("-00000.") + strlen(ext) ||
		strcmp(p + dl + pl + strlen("-00000."), ext) != 0 || seen[n] ||
		(o->ndvs > 0) != (strcmp(ext, "puffin") == 0))
	{
		maint_fail(run, MAINT_TRANSIENT,
				   "the compaction helper announced a file it was not asked to write: \"%s\"", p);
		return false;
	}
	seen[n] = true;
	c = tms_location_canonical(run->conn->server, p, NULL);
	if (c == NULL || io_storage_size(run->storage, c, &size, &err) != 0 || (int64) size != o->size)
	{
		maint_fail(run, MAINT_TRANSIENT,
				   "the file the compaction helper wrote, \"%s\", is not in storage as announced", p);
		return false;
	}
	return true;
}

typedef enum GroupOutcome
{
	GROUP_COMMITTED,
	GROUP_GIVEN_UP,
	GROUP_FAILED,
	GROUP_NONE					/* every group of the batch failed alone */
} GroupOutcome;

/*
 * Every name the helper may have written for an attempt at a group (dir +
 * prefix + "-NNNNN." + ext, NNNNN below files), announced or not: an
 * upload can finish before its announce is read.  The prefix holds a new
 * UUID, so no other file has one of these names.
 */
static char **
attempt_names(const char *dir, const char *prefix, const char *ext, int files)
{
	char	  **names = palloc(sizeof(char *) * (files + 1));

	for (int n = 0; n < files; n++)
		names[n] = psprintf("%s%s-%05d.%s", dir, prefix, n, ext);
	return names;
}

/*
 * What the helper writes: Parquet files, or on v3 the one Puffin file of a
 * group's deletion vectors (posdel.h).
 */
static const char *
output_ext(const IcebergCompactPlan *p)
{
	return (p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES || p->row_delta) &&
		p->format_version >= 3 ? "puffin" : "parquet";
}

/*
 * The temporary files a helper of pid killed while it wrote local files
 * of names[] leaves beside them (io_local_temp_name), deleted; none for object stores.
 */
static void
delete_temporaries(MaintRun *run, char **names, int n, int pid)
{
	char	  **tmp = palloc(sizeof(char *) * (n + 1));
	int			ntmp = 0;

	if (pid <= 0)
		return;
	for (int i = 0; i < n; i++)
	{
		char	   *t = io_local_temp_name(names[i], pid);

		if (t != NULL)
		{
			tmp[ntmp++] = pstrdup(t);
			io_free(t);
		}
	}
	maint_delete_written(run, tmp, ntmp);
}

/*
 * A Parquet property of the delete files Iceberg writes: its
 * write.delete.parquet.compression-<what>, else the data files'.
 */
static const char *
delete_property(MaintRun *run, const char *what)
{
	const char *v = iceberg_metadata_property(run->md,
											  psprintf("write.delete.parquet.compression-%s", what));

	return v != NULL ? v :
		iceberg_metadata_property(run->md, psprintf("write.parquet.compression-%s", what));
}

/* A group given to the helper: what it is to write and what it wrote. */
typedef struct GroupWork
{
	bool		sent;
	bool		done;			/* its done message read, its files checked;
								 * or it failed */
	bool		failed;			/* it failed alone (partial progress) */
	bool		handled;		/* its batch's commit was tried: its files are
								 * the commit's business */
	char	   *dir;
	char	   *prefix;
	bool	   *seen;			/* the output numbers announced */
	int64		records;		/* the rows of the files announced */
	int64		dangling;		/* position deletes it dropped as dangling */
	int64		filtered;		/* rows a retention's rewrite removed
								 * (remove_older) */
	IcebergCompactOutput *out;	/* the files announced (nout) */
	char	  **paths;
	int			nout;
	char	  **written;		/* every name it may write (nwritten) */
	int			nwritten;
} GroupWork;

/*
 * Send group g to the helper (its files named, its line built).  false
 * with run->result set; w->written are the names it may have written
 * once the line may have gone.
 */
static bool
send_group(MaintRun *run, Compactor *helper, IcebergCompactPlan *p, int g,
		   const IcebergCompactJobMetric *metrics, int nmetrics, const IcebergSchema *schema,
		   GroupWork *w)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	TmsError	err;
	char	   *dir;
	char	   *upload_dir;
	const char **input_uris;
	const char **delete_uris;
	char	   *line;
	char		uuid[40];

	/* position delete files are written: a rewrite of them, a row delta */
	bool		posdel = p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES || p->row_delta;
	const char *codec = posdel ? delete_property(run, "codec") :
	iceberg_metadata_property(run->md, "write.parquet.compression-codec");
	const char *level = posdel ? delete_property(run, "level") :
	iceberg_metadata_property(run->md, "write.parquet.compression-level");
	bool		sent;

	w->seen = palloc0(sizeof(bool) * (gr->expected_outputs + 1));
	w->out = palloc0(sizeof(IcebergCompactOutput) * (gr->expected_outputs + 1));
	w->paths = palloc0(sizeof(char *) * (gr->expected_outputs + 1));
	dir = iceberg_compact_output_dir(run->md, schema, p, g, &err);
	if (dir == NULL)
	{
		maint_fail_iceberg(run, "cannot name the files of the compaction", &err);
		return false;
	}
	w->dir = pstrdup(dir);
	io_free(dir);

	/*
	 * the rule of every write of tms: below the table location and an allowed
	 * location
	 */
	upload_dir = tms_location_canonical(run->conn->server, w->dir, NULL);
	if (upload_dir == NULL || !io_location_under(upload_dir, run->location) ||
		!tms_location_allowed(run->conn->server, upload_dir))
	{
		maint_fail(run, MAINT_TERMINAL,
				   "the data location \"%s\" is not below the table location and an allowed location",
				   w->dir);
		return false;
	}

	/*
	 * one slash before the file names (an unpartitioned table's dir ends in
	 * one)
	 */
	if (upload_dir[0] == '\0' || upload_dir[strlen(upload_dir) - 1] != '/')
		upload_dir = psprintf("%s/", upload_dir);

	/*
	 * where storage reads each file (relative paths resolved, as the FileIO
	 * does)
	 */
	input_uris = palloc(sizeof(char *) * (gr->nfiles + 1));
	delete_uris = palloc(sizeof(char *) * (gr->ndeletes + 1));
	for (int i = 0; i < gr->nfiles + gr->ndeletes; i++)
	{
		const char *pth = i < gr->nfiles ? p->files[gr->first + i].path :
		p->deletes[gr->deletes[i - gr->nfiles]].path;
		char	   *c = tms_location_canonical(run->conn->server, pth, NULL);

		if (c == NULL)
		{
			maint_fail(run, MAINT_TERMINAL, "the location of \"%s\" cannot be resolved", pth);
			return false;
		}
		if (i < gr->nfiles)
			input_uris[i] = c;
		else
			delete_uris[i - gr->nfiles] = c;
	}
	if (!iceberg_make_uuid(uuid, &err))
	{
		maint_fail(run, MAINT_TRANSIENT, "no random source to name the files of the compaction");
		return false;
	}
	w->prefix = psprintf("%05d-%d-%s", g, run->attempts, uuid);
	line = iceberg_compact_job_json(run->md, p, g, metrics, nmetrics, input_uris, delete_uris,
									w->dir, upload_dir, w->prefix, codec ? codec : "zstd",
									level ? atoi(level) : -1, &err);
	if (line == NULL)
	{
		maint_fail_iceberg(run, "cannot describe the compaction group", &err);
		return false;
	}
	/* from here on, the helper may write */
	w->written = attempt_names(w->dir, w->prefix, output_ext(p), gr->expected_outputs);
	w->nwritten = gr->expected_outputs;
	w->sent = true;
	sent = compactor_send(helper, run, line);
	io_free(line);
	return sent;
}

/*
 * Read the helper's messages until a group in flight is done: its files
 * checked and kept in works[*g].  false with run->result set (the helper
 * must be stopped).  *at_once: the most groups the helper said it ran at
 * once.
 */
static bool
next_done(MaintRun *run, Compactor *helper, IcebergCompactPlan *p, GroupWork *works,
		  int nsent, TimestampTz deadline, int64 *peak_rss, int *at_once, int *g)
{
	bool		posdel = p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES;

	for (;;)
	{
		IcebergCompactMessage m;
		GroupWork  *w;
		const IcebergCompactGroup *gr;

		if (!compactor_next(helper, run, deadline, &m))
			return false;
		if (m.type == ICEBERG_MSG_ERROR &&
			!(m.alone && run->opt.partial_progress && m.group >= 0 && m.group < nsent &&
			  works[m.group].sent && !works[m.group].done))
		{
			maint_fail(run, MAINT_TRANSIENT, "the compaction helper failed: %s", m.message);
			iceberg_compact_message_free(&m);
			return false;
		}
		if (m.group < 0 || m.group >= nsent || !works[m.group].sent || works[m.group].done)
		{
			iceberg_compact_message_free(&m);
			maint_fail(run, MAINT_TRANSIENT,
					   "the compaction helper answered for a group not in flight");
			return false;
		}
		w = &works[m.group];
		gr = &p->groups[m.group];
		if (m.type == ICEBERG_MSG_ERROR)
		{
			/*
			 * partial progress: the group fails alone (as Iceberg's rewrite
			 * of a group that throws), left out of its batch's commit; what
			 * it wrote goes now
			 */
			ereport(WARNING,
					(errmsg("maintenance job " INT64_FORMAT ": group %d of the compaction failed and is left out of its commit: %s",
							run->job_id, m.group, m.message)));
			iceberg_compact_message_free(&m);
			maint_delete_written(run, w->written, w->nwritten);
			for (int i = 0; i < w->nout; i++)
				iceberg_compact_output_free(&w->out[i]);
			w->nout = 0;
			w->done = w->failed = w->handled = true;
			*g = m.group;
			return true;
		}
		if (m.type == ICEBERG_MSG_FILE)
		{
			if (!check_output(run, &m.file, w->dir, w->prefix, output_ext(p), gr->expected_outputs,
							  w->seen))
			{
				iceberg_compact_message_free(&m);
				return false;
			}
			w->records += m.file.records;
			w->paths[w->nout] = pstrdup(m.file.path);
			w->out[w->nout++] = m.file;
			memset(&m.file, 0, sizeof(m.file));
			iceberg_compact_message_free(&m);
			continue;
		}
		if (m.type == ICEBERG_MSG_DONE)
		{
			/*
			 * a row delta on v3: its deletion vectors also hold the positions
			 * deleted before (rows_out), beside the new ones
			 */
			bool		dvs = p->row_delta && p->format_version >= 3;
			bool		consistent = m.files == w->nout && m.rows_out == w->records &&
			m.rows_in == gr->records &&
			(dvs ? m.rows_deleted == m.rows_filtered && m.rows_filtered <= m.rows_out :
			 p->row_delta ? m.rows_deleted == m.rows_out :
			 m.rows_in - m.rows_deleted == m.rows_out);

			*peak_rss = Max(*peak_rss, m.peak_rss);
			*at_once = Max(*at_once, m.in_flight);
			/* a rewrite of position deletes: the dangling ones it dropped */
			if (posdel && consistent)
				w->dangling = m.rows_deleted;
			/* a retention's rewrite: the older rows it removed */
			if (iceberg_compact_removes_rows(p) && consistent)
				w->filtered = m.rows_filtered;
			else if (m.rows_filtered != 0)
				consistent = false;
			/* a row delta's rows out are the positions it deletes */
			if (p->row_delta && !dvs && m.rows_filtered != m.rows_out)
				consistent = false;
			iceberg_compact_message_free(&m);
			/* no file at all only when the deletes took every row */
			if (!consistent || (w->nout == 0) != (w->records == 0))
			{
				maint_fail(run, MAINT_TRANSIENT,
						   "the compaction helper's counts of group %d do not add up",
						   (int) (w - works));
				return false;
			}
			w->done = true;
			*g = (int) (w - works);
			return true;
		}
		iceberg_compact_message_free(&m);
		maint_fail(run, MAINT_TRANSIENT, "the compaction helper sent an unexpected message");
		return false;
	}
}

/*
 * One attempt at the commit of gs[0 .. ngs) on run->md: MAINT_COMMIT_RETRY
 * with *written false when a group no longer fits the table (the commit is
 * given up), or with *stale_out true when run->md is out of date and a file
 * of its snapshot is gone (maint_moved_on: the table is to be reloaded and
 * the commit built again).  paths: the data files the helper wrote for them.
 */
static MaintCommitOutcome
commit_attempt(MaintRun *run, IcebergCompactPlan *p, const IcebergCompactGroupOutput *gs,
			   int ngs, char **paths, int npaths, bool *written_out, bool *stale_out)
{
	IcebergWriter w = {run, maint_write_file};
	IcebergCompactCommit res;
	TmsError	err;
	int64		id = iceberg_new_snapshot_id(run->md);
	char	   *volatile body = NULL;
	volatile MaintCommitOutcome outcome = MAINT_COMMIT_FAILED;
	volatile bool written = false;
	int		   *groups = palloc(sizeof(int) * ngs);

	*stale_out = false;
	for (int k = 0; k < ngs; k++)
		groups[k] = gs[k].group;
	memset(&res, 0, sizeof(res));
	PG_TRY();
	{
		run->in_callback = true;
		/* a retention's rewrite commits an "overwrite" */
		written = iceberg_retention_rewrite_commit_write(&run->fio, &w, run->md, p, gs, ngs, id,
														 &res, &err);
		run->in_callback = false;
		CHECK_FOR_INTERRUPTS();
		if (!written)
		{
			maint_delete_written(run, res.written, res.nwritten);
			if (err.code == ICEBERG_ERR_CONFLICT || err.code == ICEBERG_ERR_UNSUPPORTED)
			{
				ereport(LOG,
						(errmsg("maintenance job " INT64_FORMAT ": compaction commit of groups %d to %d given up: %s",
								run->job_id, gs[0].group, gs[ngs - 1].group,
								tms_error_text(&err))));
				outcome = MAINT_COMMIT_RETRY;
			}
			else if (maint_moved_on(run, &err))
			{
				ereport(LOG,
						(errmsg("maintenance job " INT64_FORMAT ": compaction commit of groups %d to %d built again on the reloaded table: %s",
								run->job_id, gs[0].group, gs[ngs - 1].group,
								tms_error_text(&err))));
				*stale_out = true;
				outcome = MAINT_COMMIT_RETRY;
			}
			else
				maint_fail_iceberg(run, "cannot write the manifests of the compaction", &err);
		}
		else if ((body = iceberg_commit_snapshot(run->md->table_uuid, "main",
												 &res.snapshot, &err)) == NULL)
		{
			maint_delete_written(run, res.written, res.nwritten);
			maint_fail(run, MAINT_TERMINAL, "cannot build the commit: %s", err.message);
		}
		else
		{
			outcome = maint_commit(run, body, commit_state_json(p, gs[0].group, &res, paths, npaths,
																run->batch_dangling,
																run->batch_filtered),
								   res.written, res.nwritten, res.snapshot.parent_snapshot_id,
								   maint_snapshot_landed, &id);
			if (outcome == MAINT_COMMIT_LANDED)
			{
				TmsError	cerr;

				run->after_snapshot_id = id;
				if (!iceberg_compact_committed(p, groups, ngs, &res, &cerr))
					maint_fail_iceberg(run, "cannot follow the compaction's commit", &cerr);
				else
				{
					run->rows_filtered += run->batch_filtered;
					(void) record_counts(run, res.data_files_rewritten, res.data_files_added,
										 res_bytes(p, &res), res.delete_files_removed,
										 res.delete_files_added, run->batch_dangling);
				}
			}
		}
	}
	PG_FINALLY();
	{
		run->in_callback = false;
		io_free(body);
		iceberg_compact_commit_free(&res);
	}
	PG_END_TRY();
	*written_out = written;
	return outcome;
}

/*
 * Build and commit the snapshot of gs[0 .. ngs); retries conflicts on the
 * reloaded table.
 */
static GroupOutcome
commit_groups(MaintRun *run, IcebergCompactPlan *p, const IcebergCompactGroupOutput *gs,
			  int ngs, char **paths, int npaths)
{
	for (int retry = 1;; retry++)
	{
		bool		written;
		bool		stale;
		MaintCommitOutcome outcome = commit_attempt(run, p, gs, ngs, paths, npaths,
													&written, &stale);

		if (outcome == MAINT_COMMIT_LANDED)
			return run->result == MAINT_OK ? GROUP_COMMITTED : GROUP_FAILED;
		if (outcome == MAINT_COMMIT_FAILED || run->result != MAINT_OK)
		{
			/*
			 * certainly not landed (phase back at start): its data files go
			 * too
			 */
			if (run->phase != NULL && strcmp(run->phase, "start") == 0 &&
				run->result != MAINT_LEASE_LOST)
				maint_delete_written(run, paths, npaths);
			return GROUP_FAILED;
		}
		if (!written && !stale)
		{
			/* a group no longer fits the table */
			maint_delete_written(run, paths, npaths);
			return GROUP_GIVEN_UP;
		}
		/* a conflict, or run->md out of date: look at the table again */
		if (!maint_commit_retry_allowed(run, retry) || !maint_load(run))
		{
			maint_delete_written(run, paths, npaths);
			return GROUP_FAILED;
		}
	}
}

/*
 * Commit the batch of groups first .. first + n - 1, all done: one
 * snapshot of those that did not fail (GROUP_NONE: every one failed).
 * Their files are the commit's business from here on.
 */
static GroupOutcome
commit_batch(MaintRun *run, IcebergCompactPlan *p, GroupWork *works, int first, int n)
{
	IcebergCompactGroupOutput *gs = palloc0(sizeof(IcebergCompactGroupOutput) * n);
	char	  **paths = NULL;
	int			npaths = 0;
	int			ngs = 0;
	GroupOutcome outcome;

	run->batch_dangling = 0;
	run->batch_filtered = 0;
	for (int k = 0; k < n; k++)
	{
		GroupWork  *w = &works[first + k];

		if (w->failed)
			continue;
		run->batch_dangling += w->dangling;
		run->batch_filtered += w->filtered;
		gs[ngs].group = first + k;
		gs[ngs].outputs = w->out;
		gs[ngs++].noutputs = w->nout;
		paths = paths ? repalloc(paths, sizeof(char *) * (npaths + w->nout + 1)) :
			palloc(sizeof(char *) * (w->nout + 1));
		for (int i = 0; i < w->nout; i++)
			paths[npaths++] = w->paths[i];
		w->handled = true;
	}
	if (ngs == 0)
		return GROUP_NONE;
	outcome = commit_groups(run, p, gs, ngs, paths, npaths);
	for (int k = 0; k < ngs; k++)
		for (int i = 0; i < gs[k].noutputs; i++)
			iceberg_compact_output_free((IcebergCompactOutput *) &gs[k].outputs[i]);
	return outcome;
}

/*
 * What the groups sent but not committed may have written, once the
 * helper is stopped: their files, and the temporary files of local writes
 * it was killed in (pid: the helper's).
 */
static void
delete_unhandled(MaintRun *run, GroupWork *works, int nsent, int pid)
{
	if (run->result == MAINT_LEASE_LOST)
		return;
	for (int g = 0; g < nsent; g++)
		if (works[g].sent && !works[g].handled)
		{
			maint_delete_written(run, works[g].written, works[g].nwritten);
			delete_temporaries(run, works[g].written, works[g].nwritten, pid);
			for (int i = 0; i < works[g].nout; i++)
				iceberg_compact_output_free(&works[g].out[i]);
			works[g].nout = 0;
		}
}

/*
 * Rewrite every group with the helper, up to compactor_groups() of them
 * in flight at once (max-concurrent-file-group-rewrites), and commit them
 * in batches of per groups as each batch's groups are all done (the
 * groups of later batches go on meanwhile).  A helper that fails is
 * stopped (*helper NULL) and what the groups not committed wrote is
 * deleted.  *given_up: groups whose commit was given up; *failed_groups:
 * groups that failed alone in the helper (partial progress: left out of
 * their commit; a batch of none but them is a failed commit).
 */
static void
rewrite_all(MaintRun *run, Compactor **helper, IcebergCompactPlan *p,
			const IcebergCompactJobMetric *metrics, const IcebergSchema *schema,
			TimestampTz deadline, int64 *peak_rss, int *at_once, int *given_up,
			int *failed_groups)
{
	GroupWork  *works = palloc0(sizeof(GroupWork) * (p->ngroups + 1));
	int			per = groups_per_commit(run, p->ngroups);
	int			k = Max(Min(compactor_groups(*helper),
							run->opt.max_concurrent_group_rewrites), 1);
	int			pid = compactor_pid(*helper);	/* known once it died, too */
	int			nsent = 0;
	int			in_flight = 0;
	int			failed_commits = 0;
	int			max_failed = run->opt.partial_progress_max_failed_commits >= 0 ?
	run->opt.partial_progress_max_failed_commits : run->opt.partial_progress_max_commits;
	bool		posdel = p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES;
	const char *what = iceberg_compact_removes_rows(p) ?
	"retention's rewrite" : "compaction";
	bool		helper_ok = true;

	for (int first = 0; first < p->ngroups && run->result == MAINT_OK; first += per)
	{
		int			n = Min(per, p->ngroups - first);
		int			ndone = 0;
		GroupOutcome outcome;

		for (int g = first; g < first + n; g++)
			ndone += works[g].done ? 1 : 0;
		while (ndone < n && run->result == MAINT_OK)
		{
			int			g;

			/* keep k groups in flight */
			while (nsent < p->ngroups && in_flight < k && run->result == MAINT_OK &&
				   maint_check_now(run))
			{
				if (!send_group(run, *helper, p, nsent,
								posdel || p->row_delta ? iceberg_posdel_metrics : metrics,
								posdel || p->row_delta ? ICEBERG_POSDEL_NMETRICS : schema->nleaves,
								schema,
								&works[nsent]))
					helper_ok = false;
				if (works[nsent].sent)
				{
					nsent++;
					in_flight++;
				}
			}
			if (run->result != MAINT_OK)
				break;
			if (!next_done(run, *helper, p, works, nsent, deadline, peak_rss, at_once, &g))
			{
				helper_ok = false;
				break;
			}
			in_flight--;
			if (g >= first && g < first + n)
				ndone++;
		}
		if (run->result != MAINT_OK)
			break;
		outcome = commit_batch(run, p, works, first, n);
		for (int g = first; g < first + n; g++)
			*failed_groups += works[g].failed ? 1 : 0;
		if (outcome != GROUP_GIVEN_UP && outcome != GROUP_NONE)
			continue;
		*given_up += outcome == GROUP_GIVEN_UP ? n : 0;
		failed_commits++;
		/* a row delta that no longer fits: its caller plans again */
		if (p->row_delta && outcome == GROUP_GIVEN_UP)
			run->groups_given_up += n;
		else if (!run->opt.partial_progress && posdel)
			maint_fail(run, MAINT_TRANSIENT,
					   "the table changed under the position-delete-rewrite: a delete file it rewrote, or a data file they point at, is gone; nothing was committed");
		else if (!run->opt.partial_progress)
			maint_fail(run, MAINT_TRANSIENT,
					   "the table changed under the %s: a file it rewrote is gone, or a position delete came to its partitions; nothing was committed",
					   what);
		else if (failed_commits > max_failed)
			maint_fail(run, MAINT_TRANSIENT,
					   "%d commits of the compaction failed, more than partial-progress.max-failed-commits (%d); the commits before stay",
					   failed_commits, max_failed);
	}
	if (run->result != MAINT_OK || !helper_ok)
	{
		/* groups may be in flight: stopped before their files are deleted */
		compactor_stop(*helper);
		*helper = NULL;
		delete_unhandled(run, works, nsent, pid);
	}
}

/* ----------------------------------------------------------------
 * The run
 * ----------------------------------------------------------------
 */

/*
 * Rewrite and commit the groups of a plan already planned and shown (a
 * compaction's, a position-delete-rewrite's, a retention's rewrite of
 * straddling files): the helper, the batches, their commits.  run->result
 * says how it went.
 */
void
maint_compact_run_plan(MaintRun *run, IcebergCompactPlan *plan)
{
	IcebergSchema *volatile schema = NULL;
	IcebergCompactJobMetric *volatile metrics = NULL;
	Compactor  *volatile helper = NULL;
	TmsError	err;
	IoStorageConfig cfg;
	TimestampTz deadline;
	int		   *given_up = palloc0(sizeof(int));
	int		   *failed_groups = palloc0(sizeof(int));
	int		   *at_once = palloc0(sizeof(int)); /* groups in the helper at
												 * once, at most */
	int64	   *peak_rss = palloc0(sizeof(int64));	/* the helper's, over the
													 * groups */
	bool		posdel = plan->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES;
	const char *what = iceberg_compact_removes_rows(plan) ?
	"retention's rewrite" : "compaction";

	PG_TRY();
	{
		/* the table's schema names the partition paths of the outputs */
		if (!iceberg_schema_parse(run->md->current_schema_json, (IcebergSchema **) &schema, &err) ||
			(!posdel &&
			 !iceberg_compact_metrics_modes(run->md, schema, (IcebergCompactJobMetric **) &metrics, &err)))
			maint_fail_iceberg(run, "cannot read the table's schema", &err);
		else if (!sort_order(run, schema, &plan->sort, &err))
			maint_fail(run, MAINT_TERMINAL, "invalid sort order: %s%s%s", err.message,
					   err.detail[0] ? ": " : "", err.detail);
		if (run->result == MAINT_OK)
		{
			deadline = tms_engine_run_timeout_s > 0 ?
				TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											(int64) tms_engine_run_timeout_s * 1000) : 0;
			io_storage_config_get(run->storage, &cfg);
			helper = compactor_start(run, &cfg,
									 Min(run->opt.max_concurrent_group_rewrites, plan->ngroups));
			if (helper != NULL)
				rewrite_all(run, (Compactor **) &helper, plan, metrics, schema, deadline,
							peak_rss, at_once, given_up, failed_groups);
			if (run->result == MAINT_OK && posdel)
				ereport(LOG,
						(errmsg("maintenance job " INT64_FORMAT ": position-delete-rewrite of %d groups, %d given up (the table changed under them), %d failed, " INT64_FORMAT " dangling position deletes dropped",
								run->job_id, plan->ngroups, *given_up, *failed_groups,
								run->dangling_dropped)));
			else if (run->result == MAINT_OK)
				ereport(LOG,
						(errmsg("maintenance job " INT64_FORMAT ": %s of %d groups, %d given up (the table changed under them), %d failed, up to %d rewritten at once; the helper's peak RSS was " INT64_FORMAT " MB, its memory limit %d MB",
								run->job_id, what, plan->ngroups, *given_up, *failed_groups,
								*at_once, *peak_rss / (1024 * 1024),
								tms_compaction_memory_limit_mb)));
		}
	}
	PG_FINALLY();
	{
		compactor_stop(helper);
		io_free(metrics);
		iceberg_schema_free(schema);
	}
	PG_END_TRY();
}

void
maint_run_compact(MaintRun *run)
{
	IcebergCompactPlan *volatile plan = NULL;
	IcebergPartitionFilter *volatile where = NULL;
	IcebergCompactOptions o;
	TmsError	err;
	bool		posdel = run->opt.op == MAINT_POSDELETE;

	if (!bind_where(run, (IcebergPartitionFilter **) &where))
		return;
	maint_compact_options(run, &o, where);
	PG_TRY();
	{
		if (!(posdel ?
			  iceberg_posdel_plan(&run->fio, run->md, &o, (IcebergCompactPlan **) &plan, &err) :
			  iceberg_compact_plan(&run->fio, run->md, &o, (IcebergCompactPlan **) &plan, &err)))
		{
			if (err.code == ICEBERG_ERR_UNSUPPORTED)
				maint_fail(run, MAINT_SKIPPED, "%s", tms_error_text(&err));
			else if (err.code == ICEBERG_ERR_INVALID_ARGUMENT)
				maint_fail(run, MAINT_TERMINAL, "%s", tms_error_text(&err));
			else if (maint_moved_on(run, &err))
				maint_fail(run, MAINT_TRANSIENT, "the table changed while the compaction was planned: %s",
						   tms_error_text(&err));
			else
				maint_fail_iceberg(run, "cannot plan the compaction", &err);
		}
		else if (posdel)
			maint_posdel_emit_plan(run, plan, commits_planned(run, plan->ngroups));
		else
			emit_plan(run, plan);
		if (run->result == MAINT_OK && !run->dry_run && plan->ngroups > 0)
			maint_compact_run_plan(run, plan);
	}
	PG_FINALLY();
	{
		iceberg_compact_plan_free(plan);
		iceberg_partition_filter_free(where);
	}
	PG_END_TRY();
}

/*
 * A job found in phase "commit" or "cleanup": the group's commit landed
 * (its counts are added now, once) or not (main moved: what it wrote is
 * deleted; main unchanged: kept, the outcome unknown); then the table is
 * planned again, which leaves out the groups already compacted.
 */
void
maint_resume_compact(MaintRun *run)
{
	Jsonb	   *cs;

	switch (maint_resume_written(run, &cs))
	{
		case MAINT_RESUMED_LANDED:
			if (strcmp(run->phase, "cleanup") != 0 &&
				!maint_record_phase(run, "cleanup", run->commit_state))
				return;
			if (!record_counts(run, Max(maint_json_int(cs, "data_files_rewritten"), 0),
							   Max(maint_json_int(cs, "data_files_added"), 0),
							   Max(maint_json_int(cs, "bytes_rewritten"), 0),
							   Max(maint_json_int(cs, "delete_files_removed"), 0),
							   Max(maint_json_int(cs, "delete_files_added"), 0),
							   Max(maint_json_int(cs, "dangling_dropped"), 0)))
				return;
			break;
		case MAINT_RESUMED_AGAIN:
			break;
		case MAINT_RESUMED_STOP:
			return;
	}
	maint_run_compact(run);
}
