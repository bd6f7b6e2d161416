/*-------------------------------------------------------------------------
 *
 * maint_rewrite.c
 *	  manifest-rewrite: merge a table's small manifests into manifests
 *	  near the target size and commit them as a "replace" snapshot
 *	  (Iceberg's RewriteManifests).
 *
 * The plan and the writing are src/iceberg/maint/rewrite_manifests.h's: per partition
 * spec, data and delete manifests apart, manifests smaller than
 * "target-size-bytes" (else the table property
 * commit.manifest.target-size-bytes, else 8 MB) are merged; every live
 * entry is carried as EXISTING with its original snapshot id and
 * sequence numbers; a new manifest list keeps the other manifests.  Files
 * are written under the table's metadata directory, only below the
 * table location and an allowed location.
 *
 * The commit adds the snapshot and moves main to it, with
 * assert-table-uuid and assert-ref-snapshot-id (maint.c's protocol);
 * commit_state records the new snapshot's id, the snapshot it replaces
 * and every file written.  A conflict (a writer committed meanwhile)
 * deletes what the attempt wrote, reloads, plans again and retries.
 * Nothing is deleted after a landed rewrite: the replaced manifests stay
 * reachable from earlier snapshots until snapshot expiry removes them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "iceberg/write/commit_request.h"
#include "iceberg/maint/rewrite_manifests.h"
#include "ops/maint_int.h"

static char *
commit_state_json(const IcebergRewriteResult *res, int64 base_snapshot)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfo(&b, "{\"operation\": \"manifest-rewrite\", \"snapshot_id\": " INT64_FORMAT
					 ", \"base_snapshot\": " INT64_FORMAT
					 ", \"manifests_replaced\": " INT64_FORMAT
					 ", \"manifests_added\": " INT64_FORMAT ", \"written\": [",
					 res->snapshot.snapshot_id, base_snapshot,
					 res->manifests_replaced, res->manifests_added);
	for (int i = 0; i < res->nwritten; i++)
	{
		if (i)
			appendStringInfoString(&b, ", ");
		escape_json(&b, res->written[i]);
	}
	appendStringInfoString(&b, "]}");
	return b.data;
}

static void
emit_plan(MaintRun *run, const IcebergRewritePlan *plan)
{
	for (int i = 0; i < plan->nmanifests; i++)
	{
		const IcebergRewriteManifest *m = &plan->manifests[i];

		if (m->group < 0)
			continue;
		maint_emit(run, "replace-manifest", m->path,
				   psprintf("{\"spec_id\": %d, \"content\": %d, \"entries\": " INT64_FORMAT
							", \"length\": " INT64_FORMAT ", \"group\": %d}",
							m->spec_id, m->content, m->live_entries, m->length, m->group));
	}
	for (int g = 0; g < plan->ngroups; g++)
	{
		const IcebergRewriteGroup *gr = &plan->groups[g];

		maint_emit(run, "write-manifest", psprintf("group %d", g),
				   psprintf("{\"spec_id\": %d, \"content\": %d, \"entries\": " INT64_FORMAT
							", \"replaces\": %d, \"manifests\": %d}",
							gr->spec_id, gr->content, gr->live_entries, gr->nreplaced,
							gr->expected_outputs));
	}
}

/* One plan and (unless a dry run) one write and commit; its outcome. */
static MaintCommitOutcome
rewrite_once(MaintRun *run)
{
	IcebergRewriteOptions o;
	IcebergRewritePlan *volatile plan = NULL;
	IcebergRewriteResult res;
	IcebergWriter w = {run, maint_write_file};
	TmsError	err;
	char	   *volatile body = NULL;
	volatile MaintCommitOutcome outcome = MAINT_COMMIT_FAILED;

	memset(&o, 0, sizeof(o));
	o.target_size_bytes = run->opt.target_size_bytes;
	o.spec_id = run->opt.spec_id;
	o.now_ms = run->now_ms;
	memset(&res, 0, sizeof(res));
	if (!iceberg_rewrite_plan(&run->fio, run->md, &o, (IcebergRewritePlan **) &plan, &err))
	{
		/*
		 * a table tms cannot rewrite is skipped, with the reason (and what to
		 * do about it), not retried
		 */
		if (err.code == ICEBERG_ERR_UNSUPPORTED)
			maint_fail(run, MAINT_SKIPPED, "%s%s%s", tms_error_text(&err),
					   err.hint[0] ? ". " : "", err.hint);
		else if (maint_moved_on(run, &err))
			return MAINT_COMMIT_RETRY;
		else
			maint_fail_iceberg(run, "cannot plan the manifest rewrite", &err);
		return MAINT_COMMIT_FAILED;
	}
	PG_TRY();
	{
		emit_plan(run, plan);
		if (plan->nreplaced == 0)
			outcome = MAINT_COMMIT_LANDED;	/* nothing to merge */
		else if (run->dry_run)
		{
			run->manifests_rewritten = plan->nreplaced;
			maint_emit(run, "commit", "replace",
					   psprintf("{\"manifests-replaced\": %d, \"manifests-kept\": %d, \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
								plan->nreplaced, plan->nkept, plan->base_snapshot_id));
			outcome = MAINT_COMMIT_LANDED;
		}
		else
		{
			int64		id = iceberg_new_snapshot_id(run->md);
			bool		written;

			/* the writer is called from the plain-C layer */
			run->in_callback = true;
			written = iceberg_rewrite_execute(&run->fio, &w, run->md, plan, id, &res, &err);
			run->in_callback = false;
			CHECK_FOR_INTERRUPTS();
			if (!written)
			{
				outcome = maint_unsent(run, &err, "cannot write the new manifests",
									   res.written, res.nwritten);
			}
			else if ((body = iceberg_commit_snapshot(run->md->table_uuid, "main",
													 &res.snapshot, &err)) == NULL)
			{
				maint_fail(run, MAINT_TERMINAL, "cannot build the commit: %s", err.message);
				maint_delete_written(run, res.written, res.nwritten);
			}
			else
			{
				outcome = maint_commit(run, body, commit_state_json(&res, plan->base_snapshot_id),
									   res.written, res.nwritten, plan->base_snapshot_id,
									   maint_snapshot_landed, &id);
				if (outcome == MAINT_COMMIT_LANDED)
				{
					run->manifests_rewritten = res.manifests_replaced;
					run->manifests_added = res.manifests_added;
					run->after_snapshot_id = id;
				}
			}
		}
	}
	PG_FINALLY();
	{
		run->in_callback = false;
		io_free(body);
		iceberg_rewrite_result_free(&res);
		iceberg_rewrite_plan_free(plan);
	}
	PG_END_TRY();
	return outcome;
}

void
maint_run_rewrite(MaintRun *run)
{
	maint_commit_attempts(run, rewrite_once);
}

/*
 * A job found in phase "commit" or "cleanup".  Landed (the snapshot is
 * in the table): done.  main moved elsewhere: the old request can never
 * land; what it wrote is deleted and the job plans again.  main
 * unchanged and the snapshot absent: the old request is long dead (its
 * executor's lease expired) but that is not certain, so what it wrote is
 * kept (orphan cleanup removes it once old) and the job plans again with
 * a new snapshot id.
 */
void
maint_resume_rewrite(MaintRun *run)
{
	Jsonb	   *cs;

	switch (maint_resume_written(run, &cs))
	{
		case MAINT_RESUMED_LANDED:
			run->manifests_rewritten = Max(maint_json_int(cs, "manifests_replaced"), 0);
			run->manifests_added = Max(maint_json_int(cs, "manifests_added"), 0);
			(void) maint_record_phase(run, "cleanup", run->commit_state);
			break;
		case MAINT_RESUMED_AGAIN:
			maint_run_rewrite(run);
			break;
		case MAINT_RESUMED_STOP:
			break;
	}
}
