/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Policies: the area's settings and task kinds, and the built-in kind
 *	  "maintenance" that a submitted operation becomes.  The evaluation of
 *	  a policy (kind "policy-expand") is policy_run.c.
 *
 * A condition that is true for a (table, rule) becomes a row of
 * tms.table_maintenance_job (state pending) and a task of kind
 * "maintenance" in one transaction.  The task's handler starts the job
 * when fewer than tms.max_active_operations jobs are running, otherwise
 * retries in two seconds; a started job is handed to the SQL procedure
 * named by tms.maintenance_handler when one is set (the engines of a later
 * version take this place).  The job stays in flight, and its (table,
 * rule) is not evaluated again, until tms.finish_operation() records its
 * outcome and resets the baseline.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "bridge/role.h"
#include "ops/ops.h"
#include "ops/policy.h"
#include "ops/policy_int.h"
#include "sched/sched.h"

int			tms_evaluation_cycle_interval_ms = 60000;
int			tms_expand_concurrency = 4;
int			tms_cron_concurrency = 8;
int			tms_commit_concurrency = 4;
int			tms_max_active_operations = 8;
int			tms_evaluation_pool_size = 4;
int			tms_evaluation_log_retention_s = 14 * 86400;
char	   *tms_maintenance_handler = NULL;

static void maintenance_task(SchedTask *task);

/*
 * CALL the procedure named by tms.maintenance_handler (job_id bigint, job
 * jsonb) as its owner.
 */
static void
call_maintenance_handler(const char *job)
{
	Oid			proc = DatumGetObjectId(DirectFunctionCall1(regprocin,
															CStringGetDatum(tms_maintenance_handler)));
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
	Form_pg_proc form;
	Oid			owner;
	char	   *sql;
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	TmsRoleSave save;
	Jsonb	   *jb;
	JsonbValue *id;
	int			rc;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for procedure %u", proc);
	form = (Form_pg_proc) GETSTRUCT(tup);
	if (form->prokind != PROKIND_PROCEDURE)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("tms.maintenance_handler \"%s\" is not a procedure", tms_maintenance_handler)));
	}
	owner = form->proowner;
	sql = psprintf("CALL %s.%s($1::bigint, $2::jsonb)",
				   quote_identifier(get_namespace_name(form->pronamespace)),
				   quote_identifier(NameStr(form->proname)));
	ReleaseSysCache(tup);

	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(job)));
	id = getKeyJsonValueFromContainer(&jb->root, "id", 2, NULL);
	if (id == NULL || id->type != jbvNumeric)
		elog(ERROR, "maintenance job without an id");
	args[0] = CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(numeric_out,
																	  NumericGetDatum(id->val.numeric))));
	args[1] = CStringGetTextDatum(job);
	tms_become_role(owner, "tms.maintenance_handler", &save);
	rc = SPI_execute_with_args(sql, 2, types, args, NULL, false, 0);
	tms_restore_role(&save);
	if (rc < 0)
		elog(ERROR, "could not call tms.maintenance_handler: %s", SPI_result_code_string(rc));
}

/*
 * Define the policy settings and declare the "maintenance" task kind.
 */
void
tms_policy_init(void)
{
	long		cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (cores < 1)
		cores = 1;
	tms_evaluation_pool_size = (int) Min(cores * 2, 256);

	DefineCustomIntVariable("tms.evaluation_cycle_interval",
							gettext_noop("Time between two evaluations of a maintenance policy."),
							gettext_noop("Each policy is evaluated by a task that runs again this long after it ended."),
							&tms_evaluation_cycle_interval_ms,
							60000, 1000, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.max_active_operations",
							gettext_noop("Maintenance operations that may run at once."),
							gettext_noop("Submitted operations beyond this wait, pending."),
							&tms_max_active_operations,
							8, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.evaluation_pool_size",
							gettext_noop("Condition evaluations in progress at once in a cycle."),
							gettext_noop("Defaults to twice the number of CPU cores."),
							&tms_evaluation_pool_size,
							tms_evaluation_pool_size, 1, 256,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.evaluation_log_retention",
							gettext_noop("How long rows of tms.evaluation_log are kept."),
							NULL,
							&tms_evaluation_log_retention_s,
							14 * 86400, 86400, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomStringVariable("tms.maintenance_handler",
							   gettext_noop("Procedure (job_id bigint, job jsonb) that runs started maintenance jobs."),
							   gettext_noop("Empty: started jobs stay running until tms.finish_operation() is called."),
							   &tms_maintenance_handler,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("tms.expand_concurrency",
							gettext_noop("Maximum policy evaluations (policy-expand tasks) running at once."),
							NULL,
							&tms_expand_concurrency,
							4, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.cron_concurrency",
							gettext_noop("Maximum cron-job tasks running at once."),
							NULL,
							&tms_cron_concurrency,
							8, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("tms.commit_concurrency",
							gettext_noop("Maximum commit-job tasks running at once."),
							NULL,
							&tms_commit_concurrency,
							4, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/* three pools; cron-job and commit-job have no executor yet */
	sched_register_detached("policy-expand", policy_expand_task, &tms_expand_concurrency);
	sched_register_builtin("cron-job", NULL, &tms_cron_concurrency);
	sched_register_builtin("commit-job", NULL, &tms_commit_concurrency);
	sched_register_builtin("maintenance", maintenance_task, &tms_max_active_operations);
}

/*
 * Handler of the "maintenance" kind: runs in the scheduler's
 * subtransaction with SPI connected.  tms._run_maintenance_task() starts
 * the job under the cap (or defers it); a started job goes to the
 * procedure named by tms.maintenance_handler, called as that procedure's
 * owner, never as the worker's user (the same rule as task handlers).
 */
static void
maintenance_task(SchedTask *task)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	char	   *state;
	char	   *job;
	int			rc;

	if (task->data == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("maintenance task \"%s\" has no data", task->instance)));
	args[0] = CStringGetTextDatum(task->instance);
	args[1] = CStringGetTextDatum(task->data);
	rc = SPI_execute_with_args("SELECT state, job::text FROM tms._run_maintenance_task($1, $2::jsonb)",
							   2, types, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not run maintenance task: %s", SPI_result_code_string(rc));
	state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	job = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (state == NULL || strcmp(state, "started") != 0 || job == NULL ||
		tms_maintenance_handler == NULL || tms_maintenance_handler[0] == '\0')
		return;
	call_maintenance_handler(job);
}
