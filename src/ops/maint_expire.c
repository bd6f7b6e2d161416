/*-------------------------------------------------------------------------
 *
 * maint_expire.c
 *	  snapshot-expiry: remove old snapshots and expired refs from a table,
 *	  then delete the files only they reached (Iceberg's ExpireSnapshots).
 *
 * Which snapshots and refs expire is src/iceberg/maint/expire.h's decision,
 * with Iceberg's rules: options older-than (else the table property
 * history.expire.max-snapshot-age-ms, else 5 days), retain-last (else
 * history.expire.min-snapshots-to-keep, else 1), max-ref-age-ms (else
 * history.expire.max-ref-age-ms, else never), each ref's own
 * min-snapshots-to-keep, max-snapshot-age-ms and max-ref-age-ms first;
 * branch and tag heads and the ancestors a branch retains never expire;
 * gc.enabled=false refuses (the plan, and the deletes after a commit that
 * landed, should the property have changed meanwhile: the files stay).
 *
 * The commit removes the expired refs and snapshots, with
 * assert-table-uuid and assert-ref-snapshot-id on main (maint.c's commit
 * protocol).  commit_state records the metadata file the plan was made
 * on and the snapshots to expire.  Once the commit is known to have
 * landed, the files to delete are those reachable from the snapshots of
 * that earlier metadata which the table no longer has, and from none of
 * the snapshots it has now (iceberg_expired_files: the table as it is
 * after the commit, newer commits included, is what is kept).  A resumed
 * job computes the same from commit_state, so a crash between the commit
 * and the deletes, or in the middle of them, deletes exactly the same
 * files.  "clean-expired-files": false commits and deletes nothing.
 * A manifest list or manifest of an expired snapshot found missing then
 * (a concurrent orphan cleanup may delete them once the commit landed)
 * is skipped and counted in files_missing, as Iceberg's cleanup ignores
 * failures to read expired manifests; a missing file of a kept snapshot
 * fails before anything is deleted.  Every failure after the commit says
 * that the commit landed (the job also stays in phase "cleanup").
 *
 * A dry run plans the same, computes the files against the metadata as
 * the commit would leave it (iceberg_metadata_without), and emits rows.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "iceberg/write/commit_request.h"
#include "iceberg/maint/expire.h"
#include "ops/maint_int.h"

/* The walk's callback: each file only the expired snapshots reached. */
static bool
expired_file(void *arg, const IcebergWalkFile *file, TmsError *err)
{
	MaintRun   *run = arg;

	(void) err;
	return maint_callback_delete(run, file->path, file->size,
								 iceberg_file_kind_name(file->kind), NULL);
}

/*
 * Delete what the snapshots of old_md that the table (run->md) no longer
 * has reached alone.
 */
static void
delete_expired_files(MaintRun *run, const IcebergTableMetadata *old_md,
					 const IcebergTableMetadata *kept)
{
	TmsError	err;
	bool		ok;
	const char *gc = iceberg_metadata_property(kept, ICEBERG_PROP_GC_ENABLED);
	const char *landed = run->dry_run ? "" : " after the expiry commit landed";

	/* gc.enabled may have turned false since the plan: the files stay */
	if (gc == NULL || pg_strcasecmp(gc, "true") == 0)
		gc = iceberg_metadata_property(old_md, ICEBERG_PROP_GC_ENABLED);
	if (gc != NULL && pg_strcasecmp(gc, "true") != 0)
	{
		maint_fail_code(run, MAINT_TERMINAL, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						"cannot delete the files of the expired snapshots of table \"%s.%s\"%s: garbage collection is disabled for it (gc.enabled is \"%s\"); deleting files may corrupt other tables",
						run->ns, run->table, landed, gc);
		return;
	}
	run->in_callback = true;
	ok = iceberg_expired_files(&run->fio, old_md, kept, run->conn->server->relative_root,
							   expired_file, run,
							   run->dry_run ? NULL : &run->files_missing, &err);
	run->in_callback = false;
	maint_callback_rethrow(run);
	CHECK_FOR_INTERRUPTS();
	if (!ok && run->result == MAINT_OK)
		maint_fail_iceberg(run, psprintf("cannot list the files of the expired snapshots%s",
										 landed), &err);
	if (run->files_missing > 0)
		elog(DEBUG1, "snapshot expiry of table \"%s.%s\": " INT64_FORMAT " manifest lists or manifests of expired snapshots were already missing",
			 run->ns, run->table, run->files_missing);
	if (run->result == MAINT_OK)
		(void) maint_delete_flush(run);
}

/* Did a version of the table take the expiry in?  None of them is left. */
typedef struct ExpireLanded
{
	int			nexpired;
	int64	   *expired;
	int			nrefs;
	char	  **refs;
} ExpireLanded;

static bool
expire_landed(void *arg, const IcebergTableMetadata *md)
{
	ExpireLanded *l = arg;

	for (int i = 0; i < l->nexpired; i++)
		if (iceberg_metadata_snapshot(md, l->expired[i]) != NULL)
			return false;
	for (int i = 0; i < l->nrefs; i++)
		if (iceberg_metadata_ref(md, l->refs[i]) != NULL)
			return false;
	return true;
}

static char *
commit_state_json(MaintRun *run, const IcebergExpirePlan *plan, int64 main_id)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "{\"operation\": \"snapshot-expiry\", \"base_metadata\": ");
	escape_json(&b, run->metadata_location);
	appendStringInfo(&b, ", \"base_snapshot\": " INT64_FORMAT ", \"expired\": [", main_id);
	for (int i = 0; i < plan->nexpired; i++)
		appendStringInfo(&b, "%s" INT64_FORMAT, i ? ", " : "", plan->expired[i]);
	appendStringInfoString(&b, "], \"refs\": [");
	for (int i = 0; i < plan->nremoved_refs; i++)
	{
		if (i)
			appendStringInfoString(&b, ", ");
		escape_json(&b, plan->removed_refs[i]);
	}
	appendStringInfo(&b, "], \"clean\": %s}", run->opt.clean_expired_files ? "true" : "false");
	return b.data;
}

static int64
main_id_of(const IcebergTableMetadata *md)
{
	const IcebergRef *r = iceberg_metadata_ref(md, "main");

	return r ? r->snapshot_id : md->current_snapshot_id;
}

static void
emit_plan(MaintRun *run, const IcebergExpirePlan *plan)
{
	for (int i = 0; i < plan->nexpired; i++)
	{
		const IcebergSnapshot *s = iceberg_metadata_snapshot(run->md, plan->expired[i]);

		maint_emit(run, "expire-snapshot", psprintf(INT64_FORMAT, plan->expired[i]),
				   s ? psprintf("{\"timestamp\": \"%s\", \"operation\": %s}",
								timestamptz_to_str(maint_ms_to_timestamp(s->timestamp_ms)),
								s->operation ? psprintf("\"%s\"", s->operation) : "null")
				   : NULL);
	}
	for (int i = 0; i < plan->nremoved_refs; i++)
		maint_emit(run, "remove-ref", plan->removed_refs[i], NULL);
}

/*
 * After the commit landed: read the metadata file the plan was made on
 * and delete what only its vanished snapshots reached.
 */
static void
expire_cleanup(MaintRun *run, const char *base_metadata)
{
	IcebergTableMetadata *volatile old_md = NULL;
	TmsError	err;

	if (!iceberg_metadata_read(&run->fio, base_metadata, (IcebergTableMetadata **) &old_md, &err))
	{
		maint_fail_iceberg(run, "cannot read the metadata the expiry was planned on after the expiry commit landed", &err);
		return;
	}
	/* not a scope: the deletes may create run->deleter (io), kept past here */
	PG_TRY();
	{
		delete_expired_files(run, old_md, run->md);
	}
	PG_FINALLY();
	{
		iceberg_metadata_free(old_md);
	}
	PG_END_TRY();
}

/* One plan and (unless a dry run) one commit; the outcome of the commit. */
static MaintCommitOutcome
expire_once(MaintRun *run)
{
	IcebergExpireOptions o;
	IcebergExpirePlan plan;
	TmsError	err;
	char	   *volatile body = NULL;
	IcebergTableMetadata *volatile kept = NULL;
	int64		main_id = main_id_of(run->md);
	char	   *base_metadata = pstrdup(run->metadata_location);
	volatile MaintCommitOutcome outcome = MAINT_COMMIT_FAILED;
	volatile bool committed = false;
	ExpireLanded landed;

	memset(&o, 0, sizeof(o));
	o.now_ms = run->now_ms;
	o.older_than_ms = run->opt.older_than.set ?
		maint_timestamp_to_ms(maint_time_resolve(&run->opt.older_than,
												 maint_ms_to_timestamp(run->now_ms))) : -1;
	o.retain_last = run->opt.retain_last;
	o.max_ref_age_ms = run->opt.max_ref_age_ms;
	o.nsnapshot_ids = run->opt.nsnapshot_ids;
	o.snapshot_ids = run->opt.snapshot_ids;
	memset(&plan, 0, sizeof(plan));
	if (!iceberg_expire_plan(run->md, &o, &plan, &err))
	{
		maint_fail(run, MAINT_TERMINAL, "cannot expire snapshots of table \"%s.%s\": %s",
				   run->ns, run->table, tms_error_text(&err));
		return MAINT_COMMIT_FAILED;
	}
	/* not a scope: maint_commit reloads run->md and run->storage (kept) */
	PG_TRY();
	{
		emit_plan(run, &plan);
		if (plan.nexpired == 0 && plan.nremoved_refs == 0)
			outcome = MAINT_COMMIT_LANDED;	/* nothing to do */
		else if (run->dry_run)
		{
			maint_emit(run, "commit", "remove-snapshots",
					   psprintf("{\"snapshots\": %d, \"refs\": %d, \"assert-ref-snapshot-id\": " INT64_FORMAT "}",
								plan.nexpired, plan.nremoved_refs, main_id));
			run->snapshots_expired = plan.nexpired;
			if (run->opt.clean_expired_files)
			{
				kept = iceberg_metadata_without(run->md, &plan, &err);
				if (kept == NULL)
					maint_fail_iceberg(run, "cannot plan the expiry", &err);
				else
					delete_expired_files(run, run->md, kept);
			}
			outcome = MAINT_COMMIT_LANDED;
		}
		else if ((body = iceberg_commit_expire(run->md->table_uuid, main_id, &plan, &err)) == NULL)
			maint_fail(run, MAINT_TERMINAL, "cannot build the commit: %s", err.message);
		else
		{
			landed.nexpired = plan.nexpired;
			landed.expired = plan.expired;
			landed.nrefs = plan.nremoved_refs;
			landed.refs = plan.removed_refs;
			outcome = maint_commit(run, body, commit_state_json(run, &plan, main_id),
								   NULL, 0, main_id, expire_landed, &landed);
			if (outcome == MAINT_COMMIT_LANDED)
			{
				committed = true;
				run->snapshots_expired = plan.nexpired;
				run->after_snapshot_id = main_id_of(run->md);
			}
		}
	}
	PG_FINALLY();
	{
		io_free(body);
		iceberg_metadata_free(kept);
		iceberg_expire_plan_free(&plan);
	}
	PG_END_TRY();
	if (committed && run->opt.clean_expired_files)
		expire_cleanup(run, base_metadata);
	return outcome;
}

void
maint_run_expire(MaintRun *run)
{
	maint_commit_attempts(run, expire_once);
}

/*
 * A job found in phase "commit" or "cleanup": its commit_state says what
 * the commit in flight was to do.  Landed (the snapshots and refs are
 * gone): delete, as after any landed commit.  Not landed: nothing was
 * written, so the job simply plans again from the table as it is (if
 * the old request lands later, the new commit fails its requirement and
 * the retry finds the table expired).
 */
void
maint_resume_expire(MaintRun *run)
{
	Jsonb	   *cs = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(run->commit_state)));
	JsonbValue *v;
	ExpireLanded landed;
	char	   *base_metadata;
	bool		clean = true;
	JsonbIterator *it;
	JsonbValue	item;
	JsonbIteratorToken tok;
	int			n = 0;

	v = getKeyJsonValueFromContainer(&cs->root, "base_metadata", 13, NULL);
	if (v == NULL || v->type != jbvString)
	{
		maint_fail(run, MAINT_TERMINAL, "the job's commit state has no base metadata");
		return;
	}
	base_metadata = pnstrdup(v->val.string.val, v->val.string.len);
	v = getKeyJsonValueFromContainer(&cs->root, "clean", 5, NULL);
	if (v && v->type == jbvBool)
		clean = v->val.boolean;
	memset(&landed, 0, sizeof(landed));
	v = getKeyJsonValueFromContainer(&cs->root, "expired", 7, NULL);
	if (v && v->type == jbvBinary)
	{
		landed.expired = palloc(sizeof(int64) * (JsonContainerSize(v->val.binary.data) + 1));
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
			if (tok == WJB_ELEM && item.type == jbvNumeric)
				landed.expired[n++] = DatumGetInt64(DirectFunctionCall1(numeric_int8,
																		NumericGetDatum(item.val.numeric)));
	}
	landed.nexpired = n;
	n = 0;
	v = getKeyJsonValueFromContainer(&cs->root, "refs", 4, NULL);
	if (v && v->type == jbvBinary)
	{
		landed.refs = palloc(sizeof(char *) * (JsonContainerSize(v->val.binary.data) + 1));
		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
			if (tok == WJB_ELEM && item.type == jbvString)
				landed.refs[n++] = pnstrdup(item.val.string.val, item.val.string.len);
	}
	landed.nrefs = n;

	if (!maint_load(run))
		return;
	if (strcmp(run->phase, "cleanup") == 0 || expire_landed(&landed, run->md))
	{
		if (!maint_record_phase(run, "cleanup", run->commit_state))
			return;
		run->snapshots_expired = landed.nexpired;
		run->after_snapshot_id = main_id_of(run->md);
		if (clean)
			expire_cleanup(run, base_metadata);
		return;
	}
	if (!maint_record_phase(run, "start", NULL))
		return;
	maint_run_expire(run);
}
