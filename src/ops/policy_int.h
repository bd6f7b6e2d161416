/*-------------------------------------------------------------------------
 *
 * policy_int.h
 *	  Internal interface of the policy area (src/ops/policy*.c and
 *	  src/sql_api/policy_sql.c): settings, the evaluation cycle, and the
 *	  zone-aware cron helpers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_POLICY_INT_H
#define TMS_POLICY_INT_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "pgtime.h"
#include "utils/tuplestore.h"

#include "cron/cron.h"
#include "dsl/dsl.h"

/* settings (policy.c) */
extern int	tms_evaluation_cycle_interval_ms;
extern int	tms_max_active_operations;
extern int	tms_evaluation_pool_size;
extern int	tms_evaluation_log_retention_s;
extern char *tms_maintenance_handler;

/* policy_sql.c: cron in a time zone */
extern void tms_cron_parse_or_raise(const char *text, cron_expr *out);
extern pg_tz *tms_zone_or_raise(const char *zone);
extern bool tms_cron_next_instant(const cron_expr *expr, TimestampTz after,
								  pg_tz *tz, TimestampTz *out);
extern bool tms_cron_prev_instant(const cron_expr *expr, TimestampTz before,
								  pg_tz *tz, TimestampTz *out);

/* policy_cycle.c */

/* Compile a condition (palloc'd program) or raise its compile error. */
extern dsl_program *tms_policy_compile(const char *src, size_t len);

/*
 * One cycle over every active policy whose window is open, in the
 * supervisor: owns its transactions (none may be open on entry).
 */
extern void tms_policy_cycle(void);

/*
 * One cycle for one policy inside the caller's transaction; one row per
 * evaluation into tupstore (tms.evaluate_now's columns).
 */
extern void tms_policy_evaluate_now(const char *policy, bool force,
									Tuplestorestate *tupstore, TupleDesc desc);

#endif							/* TMS_POLICY_INT_H */
