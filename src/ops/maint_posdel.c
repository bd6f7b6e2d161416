/*-------------------------------------------------------------------------
 *
 * maint_posdel.c
 *	  position-delete-rewrite on engine "local": Iceberg's
 *	  RewritePositionDeleteFiles, run by tms itself.
 *
 * The plan is src/iceberg/compact/posdel.h's; the run is compaction's
 * (maint_compact.c: the helper tms_compactor writes each group's new
 * delete files, sorted by file_path and pos, without the dangling
 * deletes; the batches are committed as "replace" snapshots with
 * compaction's protocol, conflicts, partial progress, resume and
 * cleanup).  This file holds what differs: the checks before a job is
 * recorded and the plan as rows of tms.plan_operation.
 *
 * On format v3 the helper writes deletion vectors instead (posdel.h):
 * position delete files are converted and a data file's deletion vectors
 * merged, one per data file.
 *
 * Refused before anything runs (tms.run_operation, tms.add_rule's
 * checks with the table loaded): invalid sizes and a where filter that
 * does not bind to the table (22023).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "bridge/errors.h"
#include "iceberg/compact/posdel.h"
#include "ops/maint_int.h"

void
maint_posdel_check_table(MaintRun *run)
{
	IcebergCompactOptions o;
	TmsError	err;

	maint_compact_options(run, &o, NULL);
	if (!iceberg_posdel_check_options(run->md, &o, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid options of operation \"position-delete-rewrite\" on table \"%s.%s\"",
						run->ns, run->table),
				 errdetail("%s%s%s", err.message, err.detail[0] ? ": " : "", err.detail)));
	maint_check_where(run, "position-delete-rewrite");
}

/*
 * The plan as rows: each delete file rewritten, each group (its partition,
 * files, bytes, output files, files proven dangling, data files its rows
 * may point at, why it is rewritten), and a summary.
 */
void
maint_posdel_emit_plan(MaintRun *run, const IcebergCompactPlan *p, int commits)
{
	int64		files = 0,
				bytes = 0,
				outputs = 0,
				dangling = 0;

	for (int g = 0; g < p->ngroups; g++)
	{
		const IcebergCompactGroup *gr = &p->groups[g];

		for (int i = gr->first; i < gr->first + gr->nfiles; i++)
			maint_emit(run, "rewrite-delete-file", p->files[i].path,
					   psprintf("{\"group\": %d, \"size\": " INT64_FORMAT ", \"records\": " INT64_FORMAT
								", \"sequence_number\": " INT64_FORMAT "}",
								g, p->files[i].size, p->files[i].records, p->files[i].seq));
		maint_emit(run, "rewrite-group", psprintf("group %d", g),
				   psprintf("{\"spec_id\": %d, \"partition\": %s, \"files\": %d, \"bytes\": " INT64_FORMAT
							", \"records\": " INT64_FORMAT ", \"output_files\": %d"
							", \"dangling_delete_files\": %d, \"data_files_kept\": %d, \"reasons\": %s}",
							gr->spec_id, gr->partition, gr->nfiles, gr->bytes, gr->records,
							gr->expected_outputs, gr->ndangling, gr->nkeep,
							maint_compact_reasons_json(gr->reasons)));
		files += gr->nfiles;
		bytes += gr->bytes;
		outputs += gr->expected_outputs;
		dangling += gr->ndangling;
	}
	maint_emit(run, "summary", "position-delete-rewrite",
			   psprintf("{\"data_files\": " INT64_FORMAT ", \"filtered_out\": " INT64_FORMAT
						", \"candidates\": " INT64_FORMAT ", \"groups\": %d"
						", \"files_rewritten\": " INT64_FORMAT ", \"bytes_rewritten\": " INT64_FORMAT
						", \"files_written\": " INT64_FORMAT
						", \"dangling_delete_files\": " INT64_FORMAT
						", \"dangling_delete_files_removed\": " INT64_FORMAT
						", \"target_file_size_bytes\": " INT64_FORMAT
						", \"min_file_size_bytes\": " INT64_FORMAT ", \"max_file_size_bytes\": " INT64_FORMAT
						", \"min_input_files\": %d, \"max_file_group_size_bytes\": " INT64_FORMAT
						", \"commits\": %d, \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
						p->data_files, p->filtered_out, p->candidates, p->ngroups, files, bytes,
						outputs, p->dangling, dangling, p->target_file_size_bytes,
						p->min_file_size_bytes, p->max_file_size_bytes, p->min_input_files,
						p->max_file_group_size_bytes, commits, p->base_snapshot_id));
}
