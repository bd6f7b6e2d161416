/*-------------------------------------------------------------------------
 *
 * crontz.c
 *	  Cron expressions (src/cron) in a time zone: parsing with a proper
 *	  error, and the next and previous firing as instants.
 *
 * Time zones go through PostgreSQL's own timezone library: src/cron finds
 * candidate firings in local wall-clock minutes, and this file maps them
 * to instants.  The daylight-saving rule is PostgreSQL's rule for reading
 * a local timestamp in a zone (doc/policies.md):
 *
 *	- a local time that does not exist (the spring-forward gap) is read
 *	  with the UTC offset in force before the transition, so "30 2 * * *"
 *	  fires at 03:30 summer time on that day;
 *	- a local time that occurs twice (fall back) is read with the offset
 *	  in force after the transition, so it fires once, at the second
 *	  occurrence.
 *
 * Because that mapping is not monotonic around transitions, the next
 * firing after t is the smallest mapped instant > t among the local
 * candidates from three hours before t's local time until three hours
 * after the first hit (no zone moves by more than that), and symmetrically
 * for the previous firing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgtime.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "bridge/crontz.h"

#define SCAN_MARGIN_MINUTES (3 * 60)

/*
 * Parse a cron expression or raise 22023 with a caret excerpt.
 */
void
tms_cron_parse_or_raise(const char *text, CronExpr *out)
{
	CronError	err;

	if (!cron_parse(text, out, &err))
	{
		int			pos = err.position > 0 ? err.position - 1 : 0;
		StringInfoData caret;

		initStringInfo(&caret);
		appendStringInfo(&caret, "%s\n", text);
		for (int i = 0; i < pos; i++)
			appendStringInfoChar(&caret, ' ');
		appendStringInfoChar(&caret, '^');
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cron expression \"%s\": %s", text, err.message),
				 errdetail("At character %d:\n%s", err.position, caret.data),
				 errhint("A cron expression has five fields: minute hour day-of-month month day-of-week, e.g. \"0 2 * * 1-5\".")));
	}
}

/* Look up a time zone or raise 22023. */
pg_tz *
tms_zone_or_raise(const char *zone)
{
	pg_tz	   *tz = pg_tzset(zone);

	if (tz == NULL || zone[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" not recognized", zone),
				 errhint("Use an IANA time zone name such as \"Europe/Moscow\" or \"UTC\"; see pg_timezone_names.")));
	return tz;
}

/* The local calendar minute of an instant in tz. */
static CronTime
local_of(TimestampTz ts, pg_tz *tz)
{
	pg_time_t	t = timestamptz_to_time_t(ts);
	struct pg_tm *tm = pg_localtime(&t, tz);
	CronTime	c;

	if (tm == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	c.year = tm->tm_year + 1900;
	c.month = tm->tm_mon + 1;
	c.day = tm->tm_mday;
	c.hour = tm->tm_hour;
	c.minute = tm->tm_min;
	return c;
}

/* The instant of a local calendar minute in tz, by PostgreSQL's rule. */
static TimestampTz
instant_of(const CronTime *c, pg_tz *tz)
{
	struct pg_tm tm;
	int			offset;
	TimestampTz result;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = c->year;
	tm.tm_mon = c->month;
	tm.tm_mday = c->day;
	tm.tm_hour = c->hour;
	tm.tm_min = c->minute;
	tm.tm_sec = 0;
	offset = DetermineTimeZoneOffset(&tm, tz);
	if (tm2timestamp(&tm, 0, &offset, &result) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return result;
}

/*
 * The first firing strictly after "after"; false if none within the
 * search horizon.
 */
bool
tms_cron_next_instant(const CronExpr *expr, TimestampTz after, pg_tz *tz,
					  TimestampTz *out)
{
	CronTime	cur = local_of(after, tz);
	CronTime	limit = {0};
	bool		have = false;

	cron_time_add_minutes(&cur, -SCAN_MARGIN_MINUTES);
	for (;;)
	{
		CronTime	nxt;
		TimestampTz u;

		if (!cron_next_local(expr, &cur, &nxt))
			break;
		if (have && cron_time_cmp(&nxt, &limit) > 0)
			break;
		u = instant_of(&nxt, tz);
		if (u > after)
		{
			if (!have || u < *out)
				*out = u;
			if (!have)
			{
				limit = nxt;
				cron_time_add_minutes(&limit, SCAN_MARGIN_MINUTES);
				have = true;
			}
		}
		cur = nxt;
		CHECK_FOR_INTERRUPTS();
	}
	return have;
}

/*
 * The last firing at or before "before"; false if none within the search
 * horizon.
 */
bool
tms_cron_prev_instant(const CronExpr *expr, TimestampTz before, pg_tz *tz,
					  TimestampTz *out)
{
	CronTime	cur = local_of(before, tz);
	CronTime	limit = {0};
	bool		have = false;

	/* cron_prev_local is strict: start one minute past the margin */
	cron_time_add_minutes(&cur, SCAN_MARGIN_MINUTES + 1);
	for (;;)
	{
		CronTime	prv;
		TimestampTz u;

		if (!cron_prev_local(expr, &cur, &prv))
			break;
		if (have && cron_time_cmp(&prv, &limit) < 0)
			break;
		u = instant_of(&prv, tz);
		if (u <= before)
		{
			if (!have || u > *out)
				*out = u;
			if (!have)
			{
				limit = prv;
				cron_time_add_minutes(&limit, -SCAN_MARGIN_MINUTES);
				have = true;
			}
		}
		cur = prv;
		CHECK_FOR_INTERRUPTS();
	}
	return have;
}
