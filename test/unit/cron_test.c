/*-------------------------------------------------------------------------
 *
 * cron_test.c
 *		Unit tests of src/cron: parsing, errors, matching, next and
 *		previous firing in local time.  Built and run by "make unit".
 *		Prints each failure and "N passed, M failed" last; the exit
 *		status is non-zero when M > 0 (the harness: test/unit/unit.h).
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <string.h>

#include "cron/cron.h"
#include "unit.h"

/* Parse or report. */
static CronExpr
parse_ok(const char *text)
{
	CronExpr	e;
	CronError	err;

	if (!cron_parse(text, &e, &err))
	{
		FAIL("unexpected parse error for \"%s\": %s", text, err.message);
	}
	return e;
}

/* The parse must fail with a message containing want at position pos. */
static void
parse_bad(const char *text, const char *want, int pos)
{
	CronExpr	e;
	CronError	err;

	if (cron_parse(text, &e, &err))
	{
		FAIL("\"%s\" parsed, expected an error", text);
		return;
	}
	if (strstr(err.message, want) == NULL || (pos > 0 && err.position != pos))
	{
		FAIL("\"%s\": got \"%s\" at %d, expected \"%s\" at %d",
			 text, err.message, err.position, want, pos);
	}
}

static CronTime
T(int y, int mo, int d, int h, int mi)
{
	CronTime	t = {y, mo, d, h, mi};

	return t;
}

static void
next_is(const char *text, CronTime after, CronTime want)
{
	CronExpr	e = parse_ok(text);
	CronTime	got;

	if (!cron_next_local(&e, &after, &got) || cron_time_cmp(&got, &want) != 0)
	{
		FAIL("next(\"%s\"): got %04d-%02d-%02d %02d:%02d", text,
			 got.year, got.month, got.day, got.hour, got.minute);
	}
}

static void
prev_is(const char *text, CronTime before, CronTime want)
{
	CronExpr	e = parse_ok(text);
	CronTime	got;

	if (!cron_prev_local(&e, &before, &got) || cron_time_cmp(&got, &want) != 0)
	{
		FAIL("prev(\"%s\"): got %04d-%02d-%02d %02d:%02d", text,
			 got.year, got.month, got.day, got.hour, got.minute);
	}
}

int
main(void)
{
	CronExpr	e;
	CronTime	t;

	/* fields, lists, ranges, steps, names */
	e = parse_ok("*/15 2-4,22 1,15 JAN-mar,dec mon-fri");
	CHECK(e.minutes == ((1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45)));
	CHECK(e.hours == ((1u << 2) | (1u << 3) | (1u << 4) | (1u << 22)));
	CHECK(e.days == ((1u << 1) | (1u << 15)));
	CHECK(e.months == ((1u << 1) | (1u << 2) | (1u << 3) | (1u << 12)));
	CHECK(e.weekdays == 0x3e);
	CHECK(!e.days_star && !e.weekdays_star);
	e = parse_ok("5/20 * * * 7");
	CHECK(e.minutes == ((1ull << 5) | (1ull << 25) | (1ull << 45)));
	CHECK(e.weekdays == 1);
	e = parse_ok("  0   2\t* * 1-5  ");
	CHECK(e.days_star && !e.weekdays_star);
	e = parse_ok("0-59/30 0 * * 0,6");
	CHECK(e.weekdays == 0x41);

	/* errors */
	parse_bad("", "has 0 fields", 1);
	parse_bad("* * * *", "has 4 fields", 8);
	parse_bad("* * * * * *", "more than five fields", 11);
	parse_bad("60 * * * *", "minute value \"60\" is out of range 0-59", 1);
	parse_bad("* 24 * * *", "hour value \"24\" is out of range 0-23", 3);
	parse_bad("* * 0 * *", "day of month value \"0\" is out of range 1-31", 5);
	parse_bad("* * * 13 *", "month value \"13\" is out of range 1-12", 7);
	parse_bad("* * * * 8", "day of week value \"8\"", 9);
	parse_bad("* * * foo *", "unknown month name \"foo\"", 7);
	parse_bad("* * * * 5-1", "runs backwards", 9);
	parse_bad("*/0 * * * *", "invalid step", 3);
	parse_bad("1,,2 * * * *", "expected a number", 3);
	parse_bad("1x * * * *", "unexpected \"x\"", 2);

	/* matching and the calendar */
	CHECK(cron_weekday(2024, 3, 31) == 0);
	CHECK(cron_weekday(1970, 1, 1) == 4);
	CHECK(cron_days_in_month(2024, 2) == 29);
	CHECK(cron_days_in_month(2100, 2) == 28);
	e = parse_ok("0 2 * * 1-5");
	t = T(2026, 11, 30, 2, 0);	/* a Monday */
	CHECK(cron_matches(&e, &t));
	t = T(2026, 11, 29, 2, 0);	/* a Sunday */
	CHECK(!cron_matches(&e, &t));
	/* both day fields restricted: either matches */
	e = parse_ok("0 0 13 * 5");
	CHECK(cron_matches_day(&e, 2026, 11, 13));
	CHECK(cron_matches_day(&e, 2026, 11, 6));
	CHECK(!cron_matches_day(&e, 2026, 11, 7));

	/* next / previous */
	next_is("0 2 * * 1-5", T(2026, 11, 27, 2, 0), T(2026, 11, 30, 2, 0));
	next_is("0 2 * * 1-5", T(2026, 11, 27, 1, 59), T(2026, 11, 27, 2, 0));
	next_is("*/15 * * * *", T(2026, 12, 31, 23, 50), T(2027, 1, 1, 0, 0));
	next_is("0 0 29 2 *", T(2025, 3, 1, 0, 0), T(2028, 2, 29, 0, 0));
	prev_is("0 2 * * 1-5", T(2026, 11, 30, 2, 0), T(2026, 11, 27, 2, 0));
	prev_is("0 2 * * 1-5", T(2026, 11, 30, 2, 1), T(2026, 11, 30, 2, 0));
	prev_is("0 0 29 2 *", T(2028, 2, 28, 0, 0), T(2024, 2, 29, 0, 0));
	prev_is("59 23 31 12 *", T(2027, 1, 1, 0, 0), T(2026, 12, 31, 23, 59));
	e = parse_ok("0 0 30 2 *");
	t = T(2026, 1, 1, 0, 0);
	{
		CronTime	out;

		CHECK(!cron_next_local(&e, &t, &out));
		CHECK(!cron_prev_local(&e, &t, &out));
	}
	t = T(2026, 1, 1, 0, 0);
	cron_time_add_minutes(&t, -1);
	CHECK(cron_time_cmp(&t, &(CronTime) {2025, 12, 31, 23, 59}) == 0);

	return unit_done();
}
