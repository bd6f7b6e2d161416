/*-------------------------------------------------------------------------
 *
 * crontz.h
 *	  Cron expressions in a time zone, through PostgreSQL's timezone code:
 *	  for the SQL functions tms.cron_next/cron_prev, policy windows and
 *	  schedules.  The daylight-saving rule is documented in crontz.c and
 *	  doc/policies.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_CRONTZ_H
#define TMS_BRIDGE_CRONTZ_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "pgtime.h"

#include "cron/cron.h"

/* Parse a cron expression or raise 22023 with a caret excerpt. */
extern void tms_cron_parse_or_raise(const char *text, CronExpr *out);

/* Look up a time zone or raise 22023. */
extern pg_tz *tms_zone_or_raise(const char *zone);

/* The first firing strictly after "after"; false if none within the horizon. */
extern bool tms_cron_next_instant(const CronExpr *expr, TimestampTz after,
								  pg_tz *tz, TimestampTz *out);

/* The last firing at or before "before"; false if none within the horizon. */
extern bool tms_cron_prev_instant(const CronExpr *expr, TimestampTz before,
								  pg_tz *tz, TimestampTz *out);

#endif							/* TMS_BRIDGE_CRONTZ_H */
