/*-------------------------------------------------------------------------
 *
 * cron.h
 *		Five-field cron expressions: parsing, matching, and the next and
 *		previous firing in local wall-clock time.
 *
 * An expression has five fields separated by blanks:
 *
 *		minute (0-59)  hour (0-23)  day of month (1-31)  month (1-12)
 *		day of week (0-7, 0 and 7 are Sunday)
 *
 * Each field is "*" or a comma-separated list of items; an item is a value,
 * a range "a-b", or either of them ("*" included) followed by a step
 * "/n".  Months take the names JAN-DEC and days of week SUN-SAT (any case)
 * wherever a number is allowed.  As in Vixie cron, when both the day of
 * month and the day of week are restricted (neither starts with "*"), a
 * day matches when EITHER matches; otherwise both must.
 *
 * This layer knows nothing about time zones: cron_next_local() and
 * cron_prev_local() step over local calendar minutes.  Mapping them to
 * absolute instants in a zone (with daylight-saving transitions) is the
 * caller's job; inside tms that is src/sql_api/cron_sql.c, which uses
 * PostgreSQL's timezone library.
 *
 * Plain C: no PostgreSQL headers, no allocation, errors as values.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_CRON_H
#define TMS_CRON_H

#include <stdbool.h>
#include <stdint.h>

/* How far cron_next_local / cron_prev_local search, in years. */
#define CRON_SEARCH_YEARS 30

/* A parsed expression: one bit per allowed value of each field. */
typedef struct CronExpr
{
	uint64_t	minutes;		/* bits 0-59 */
	uint32_t	hours;			/* bits 0-23 */
	uint32_t	days;			/* bits 1-31 */
	uint16_t	months;			/* bits 1-12 */
	uint8_t		weekdays;		/* bits 0-6, Sunday = 0 */
	bool		days_star;		/* day-of-month field starts with '*' */
	bool		weekdays_star;	/* day-of-week field starts with '*' */
} CronExpr;

/*
 * A parse error: message is lowercase without a trailing period; position
 * is the 1-based character offset of the offending text in the expression.
 */
typedef struct CronError
{
	int			position;
	char		message[200];
} CronError;

/* A local calendar minute. */
typedef struct CronTime
{
	int			year;
	int			month;			/* 1-12 */
	int			day;			/* 1-31 */
	int			hour;			/* 0-23 */
	int			minute;			/* 0-59 */
} CronTime;

/*
 * Parse a NUL-terminated expression.  Returns true and fills *out, or
 * false with *err (which may be NULL) filled in.
 */
extern bool cron_parse(const char *text, CronExpr *out, CronError *err);

/* Does the expression fire at this local minute? */
extern bool cron_matches(const CronExpr *expr, const CronTime *t);

/* Does the expression fire on some minute of this local day? */
extern bool cron_matches_day(const CronExpr *expr, int year, int month, int day);

/*
 * The first firing strictly after *after (whose seconds are ignored), in
 * local calendar time.  Returns false when there is none within
 * CRON_SEARCH_YEARS years (e.g. "0 0 30 2 *").
 */
extern bool cron_next_local(const CronExpr *expr, const CronTime *after,
							CronTime *out);

/*
 * The last firing strictly before *before, in local calendar time.
 * Returns false when there is none within CRON_SEARCH_YEARS years.
 */
extern bool cron_prev_local(const CronExpr *expr, const CronTime *before,
							CronTime *out);

/* Day of week of a date, Sunday = 0 (proleptic Gregorian calendar). */
extern int	cron_weekday(int year, int month, int day);

/* Days in a month of a year. */
extern int	cron_days_in_month(int year, int month);

/* Compare two local times: <0, 0, >0. */
extern int	cron_time_cmp(const CronTime *a, const CronTime *b);

/* Add a number of minutes (may be negative) to a local time. */
extern void cron_time_add_minutes(CronTime *t, int64_t minutes);

#endif							/* TMS_CRON_H */
