/*-------------------------------------------------------------------------
 *
 * policy_sql.c
 *	  SQL functions of the policy area: cron firings in a time zone
 *	  (tms.cron_next, tms.cron_prev), condition and score compilation for rule
 *	  validation, the operations' default cooldowns, and tms.evaluate_now.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "bridge/condition.h"
#include "bridge/crontz.h"
#include "ops/policy.h"

PG_FUNCTION_INFO_V1(tms_cron_next);
PG_FUNCTION_INFO_V1(tms_cron_prev);
PG_FUNCTION_INFO_V1(tms_policy_compile_condition);
PG_FUNCTION_INFO_V1(tms_policy_compile_score);
PG_FUNCTION_INFO_V1(tms_evaluate_now);
PG_FUNCTION_INFO_V1(tms_default_min_interval);

/*
 * tms._default_min_interval(operation) -> bigint: milliseconds
 */
Datum
tms_default_min_interval(PG_FUNCTION_ARGS)
{
	char	   *op = text_to_cstring(PG_GETARG_TEXT_PP(0));

	PG_RETURN_INT64(tms_policy_default_min_interval_ms(op));
}

/*
 * tms.cron_next(expr, after, zone) -> timestamptz or NULL
 */
Datum
tms_cron_next(PG_FUNCTION_ARGS)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz after = PG_GETARG_TIMESTAMPTZ(1);
	char	   *zone = text_to_cstring(PG_GETARG_TEXT_PP(2));
	CronExpr	e;
	pg_tz	   *tz;
	TimestampTz out;

	tms_cron_parse_or_raise(expr, &e);
	tz = tms_zone_or_raise(zone);
	if (TIMESTAMP_NOT_FINITE(after))
		PG_RETURN_NULL();
	if (!tms_cron_next_instant(&e, after, tz, &out))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(out);
}

/*
 * tms.cron_prev(expr, before, zone) -> timestamptz or NULL
 */
Datum
tms_cron_prev(PG_FUNCTION_ARGS)
{
	char	   *expr = text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz before = PG_GETARG_TIMESTAMPTZ(1);
	char	   *zone = text_to_cstring(PG_GETARG_TEXT_PP(2));
	CronExpr	e;
	pg_tz	   *tz;
	TimestampTz out;

	tms_cron_parse_or_raise(expr, &e);
	tz = tms_zone_or_raise(zone);
	if (TIMESTAMP_NOT_FINITE(before))
		PG_RETURN_NULL();
	if (!tms_cron_prev_instant(&e, before, tz, &out))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(out);
}

/*
 * tms._compile_condition(condition) -> the metric level it needs.
 * Raises the DSL's compile error (syntax 42601 or datatype 42804, with
 * the caret excerpt in DETAIL).
 */
Datum
tms_policy_compile_condition(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	DslProgram *p = tms_condition_compile_or_raise(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	const char *needs = dsl_needs_name(dsl_program_needs(p));
	bool		files = dsl_program_uses_files(p);

	dsl_free(p);
	PG_RETURN_TEXT_P(cstring_to_text(files ? psprintf("%s+files", needs) : needs));
}

/*
 * tms._compile_score(score) -> the metric level it needs.  Raises the
 * DSL's compile error as "invalid rule score" (a BOOLEAN or STRING score
 * is 42804).
 */
Datum
tms_policy_compile_score(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	DslProgram *p = tms_score_compile_or_raise(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	const char *needs = dsl_needs_name(dsl_program_needs(p));
	bool		files = dsl_program_uses_files(p);

	dsl_free(p);
	PG_RETURN_TEXT_P(cstring_to_text(files ? psprintf("%s+files", needs) : needs));
}

/*
 * tms.evaluate_now(policy, force) -> one row per evaluation.
 * Runs inside the caller's transaction (an interactive tool: unlike the
 * supervisor's cycle it holds its transaction across the catalog calls).
 */
Datum
tms_evaluate_now(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *policy;
	bool		force = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("policy name must not be null")));
	policy = text_to_cstring(PG_GETARG_TEXT_PP(0));
	InitMaterializedSRF(fcinfo, 0);
	tms_policy_evaluate_now(policy, force, rsinfo->setResult,
							rsinfo->setDesc);
	return (Datum) 0;
}
