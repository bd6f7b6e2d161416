/*-------------------------------------------------------------------------
 *
 * cron.c
 *		Five-field cron expressions: parser, matcher, and the search for
 *		the next and previous firing in local calendar time (see cron.h).
 *
 * The search walks days, skipping whole days that cannot match, and scans
 * the allowed hours and minutes only inside matching days, so even a
 * sparse expression ("0 0 29 2 1": Feb 29 or a Monday... or both) is found
 * in a few thousand steps.
 *
 *-------------------------------------------------------------------------
 */
#include "cron/cron.h"
#include "io/io.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

typedef struct FieldDef
{
	const char *name;
	int			min;
	int			max;
	const char *const *names;	/* names[i] is value min + i, or NULL */
} FieldDef;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};

static const char *const weekday_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const FieldDef fields[5] = {
	{"minute", 0, 59, NULL},
	{"hour", 0, 23, NULL},
	{"day of month", 1, 31, NULL},
	{"month", 1, 12, month_names},
	{"day of week", 0, 7, weekday_names}
};

/* Fill *err (if any) with a message about position pos (0-based). */
static bool
fail(CronError *err, int pos, const char *fmt, const char *field, const char *text, int len)
{
	if (err != NULL)
	{
		char		item[40];

		if (len > (int) sizeof(item) - 1)
			len = sizeof(item) - 1;
		memcpy(item, text, len);
		item[len] = '\0';
		snprintf(err->message, sizeof(err->message), fmt, field, item);
		err->position = pos + 1;
	}
	return false;
}

/*
 * Read one value (number or name) of field f at s[*i]; returns false when
 * there is none or it is out of range.
 */
static bool
read_value(const char *s, int *i, const FieldDef *f, int *value, int start,
		   CronError *err)
{
	int			p = *i;

	if (isdigit((unsigned char) s[p]))
	{
		long		v = 0;

		while (isdigit((unsigned char) s[p]))
		{
			v = v * 10 + (s[p] - '0');
			if (v > 1000)
				v = 1000;
			p++;
		}
		if (v < f->min || v > f->max)
		{
			char		fmt[120];

			snprintf(fmt, sizeof(fmt), "%%s value \"%%s\" is out of range %d-%d",
					 f->min, f->max);
			return fail(err, *i, fmt, f->name, s + *i, p - *i);
		}
		*value = (int) v;
		*i = p;
		return true;
	}
	if (f->names != NULL && isalpha((unsigned char) s[p]))
	{
		int			len = 0;

		while (isalpha((unsigned char) s[p + len]))
			len++;
		if (len == 3)
		{
			for (int k = 0; f->names[k] != NULL; k++)
			{
				if (tolower((unsigned char) s[p]) == f->names[k][0] &&
					tolower((unsigned char) s[p + 1]) == f->names[k][1] &&
					tolower((unsigned char) s[p + 2]) == f->names[k][2])
				{
					*value = f->min + k;
					*i = p + 3;
					return true;
				}
			}
		}
		return fail(err, p, "unknown %s name \"%s\"", f->name, s + p, len);
	}
	(void) start;
	return fail(err, p, "%s field: expected a number at \"%s\"", f->name,
				s + p, (int) strcspn(s + p, " \t,"));
}

/*
 * Parse one field s[0..len) (at offset base of the whole text) into a bit
 * set.  *star is set when the field starts with '*'.
 */
static bool
parse_field(const char *s, int len, int base, const FieldDef *f,
			uint64_t *bits, bool *star, CronError *err)
{
	char		buf[128];
	int			i = 0;

	if (len >= (int) sizeof(buf))
		return fail(err, base, "%s field \"%s\" is too long", f->name, s, len);
	memcpy(buf, s, len);
	buf[len] = '\0';
	*bits = 0;
	*star = (buf[0] == '*');

	for (;;)
	{
		int			lo,
					hi,
					step = 1;
		int			item_start = i;

		if (buf[i] == '*')
		{
			lo = f->min;
			hi = f->max;
			i++;
		}
		else
		{
			if (!read_value(buf, &i, f, &lo, item_start, err))
			{
				if (err)
					err->position += base;
				return false;
			}
			hi = lo;
			if (buf[i] == '-')
			{
				i++;
				if (!read_value(buf, &i, f, &hi, item_start, err))
				{
					if (err)
						err->position += base;
					return false;
				}
				if (hi < lo)
					return fail(err, base + item_start,
								"%s range \"%s\" runs backwards", f->name,
								buf + item_start, i - item_start);
			}
			else if (buf[i] == '/')
				hi = f->max;	/* "a/n" is "a-max/n" */
		}
		if (buf[i] == '/')
		{
			long		v = 0;
			int			p = ++i;

			while (isdigit((unsigned char) buf[i]))
			{
				v = v * 10 + (buf[i] - '0');
				if (v > 1000)
					v = 1000;
				i++;
			}
			if (i == p || v < 1 || v > f->max - f->min + 1)
				return fail(err, base + p, "%s field: invalid step \"%s\"",
							f->name, buf + p, (int) strcspn(buf + p, ","));
			step = (int) v;
		}
		for (int v = lo; v <= hi; v += step)
			*bits |= UINT64_C(1) << v;
		if (buf[i] == ',')
		{
			i++;
			continue;
		}
		if (buf[i] != '\0')
			return fail(err, base + i, "%s field: unexpected \"%s\"", f->name,
						buf + i, (int) strcspn(buf + i, ","));
		return true;
	}
}

/*
 * Parse an expression; see cron.h.
 */
bool
cron_parse(const char *text, CronExpr *out, CronError *err)
{
	int			i = 0;
	int			nfield = 0;
	uint64_t	bits[5];
	bool		star[5];

	memset(out, 0, sizeof(*out));
	if (text == NULL)
		return fail(err, 0, "%s%s", "empty cron expression", "", 0);
	for (;;)
	{
		int			start;

		while (text[i] == ' ' || text[i] == '\t')
			i++;
		if (text[i] == '\0')
			break;
		start = i;
		while (text[i] != '\0' && text[i] != ' ' && text[i] != '\t')
			i++;
		if (nfield == 5)
			return fail(err, start,
						"cron expression has more than five fields: unexpected \"%s%s\"",
						"", text + start, i - start);
		if (!parse_field(text + start, i - start, start, &fields[nfield],
						 &bits[nfield], &star[nfield], err))
			return false;
		nfield++;
	}
	if (nfield < 5)
	{
		if (err != NULL)
		{
			snprintf(err->message, sizeof(err->message),
					 "cron expression has %d field%s, expected five (minute hour day-of-month month day-of-week)",
					 nfield, nfield == 1 ? "" : "s");
			err->position = i + 1;
		}
		return false;
	}
	out->minutes = bits[0];
	out->hours = (uint32_t) bits[1];
	out->days = (uint32_t) bits[2];
	out->months = (uint16_t) bits[3];
	/* 7 is Sunday too */
	out->weekdays = (uint8_t) ((bits[4] & 0x7f) | ((bits[4] >> 7) & 1));
	out->days_star = star[2];
	out->weekdays_star = star[4];
	return true;
}

/* ---- calendar arithmetic: io_days_from_civil and io_civil_from_days ---- */

static void
civil_from_days(int64_t days, int *y, int *m, int *d)
{
	int64_t		year;

	io_civil_from_days(days, &year, m, d);
	*y = (int) year;
}

/* Day of week, Sunday = 0. */
int
cron_weekday(int year, int month, int day)
{
	int64_t		z = io_days_from_civil(year, month, day);

	/* 1970-01-01 was a Thursday (4) */
	return (int) (((z % 7) + 7 + 4) % 7);
}

int
cron_days_in_month(int year, int month)
{
	static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
		return 29;
	return dim[month - 1];
}

int
cron_time_cmp(const CronTime *a, const CronTime *b)
{
	if (a->year != b->year)
		return a->year < b->year ? -1 : 1;
	if (a->month != b->month)
		return a->month < b->month ? -1 : 1;
	if (a->day != b->day)
		return a->day < b->day ? -1 : 1;
	if (a->hour != b->hour)
		return a->hour < b->hour ? -1 : 1;
	if (a->minute != b->minute)
		return a->minute < b->minute ? -1 : 1;
	return 0;
}

void
cron_time_add_minutes(CronTime *t, int64_t minutes)
{
	int64_t		total = io_days_from_civil(t->year, t->month, t->day) * 1440 +
	t->hour * 60 + t->minute + minutes;
	int64_t		days = total >= 0 ? total / 1440 : -((-total + 1439) / 1440);
	int64_t		rem = total - days * 1440;

	civil_from_days(days, &t->year, &t->month, &t->day);
	t->hour = (int) (rem / 60);
	t->minute = (int) (rem % 60);
}

/* ---- matching ---- */

bool
cron_matches_day(const CronExpr *expr, int year, int month, int day)
{
	bool		dom,
				dow;

	if (!(expr->months & (1u << month)))
		return false;
	dom = (expr->days >> day) & 1;
	dow = (expr->weekdays >> cron_weekday(year, month, day)) & 1;
	if (!expr->days_star && !expr->weekdays_star)
		return dom || dow;
	return dom && dow;
}

bool
cron_matches(const CronExpr *expr, const CronTime *t)
{
	return ((expr->minutes >> t->minute) & 1) &&
		((expr->hours >> t->hour) & 1) &&
		cron_matches_day(expr, t->year, t->month, t->day);
}

/* ---- search ---- */

/*
 * Scan forward from *from (inclusive) for a matching minute.
 */
static bool
scan_forward(const CronExpr *expr, CronTime from, CronTime *out)
{
	int64_t		day = io_days_from_civil(from.year, from.month, from.day);
	int64_t		last = day + (int64_t) CRON_SEARCH_YEARS * 366;
	int			h0 = from.hour,
				m0 = from.minute;

	for (; day <= last; day++, h0 = 0, m0 = 0)
	{
		int			y,
					mo,
					d;

		civil_from_days(day, &y, &mo, &d);
		if (!cron_matches_day(expr, y, mo, d))
			continue;
		for (int h = h0; h < 24; h++)
		{
			if (!((expr->hours >> h) & 1))
				continue;
			for (int mi = (h == h0 ? m0 : 0); mi < 60; mi++)
			{
				if ((expr->minutes >> mi) & 1)
				{
					out->year = y;
					out->month = mo;
					out->day = d;
					out->hour = h;
					out->minute = mi;
					return true;
				}
			}
		}
	}
	return false;
}

/*
 * Scan backward from *from (inclusive) for a matching minute.
 */
static bool
scan_backward(const CronExpr *expr, CronTime from, CronTime *out)
{
	int64_t		day = io_days_from_civil(from.year, from.month, from.day);
	int64_t		last = day - (int64_t) CRON_SEARCH_YEARS * 366;
	int			h0 = from.hour,
				m0 = from.minute;

	for (; day >= last; day--, h0 = 23, m0 = 59)
	{
		int			y,
					mo,
					d;

		civil_from_days(day, &y, &mo, &d);
		if (!cron_matches_day(expr, y, mo, d))
			continue;
		for (int h = h0; h >= 0; h--)
		{
			if (!((expr->hours >> h) & 1))
				continue;
			for (int mi = (h == h0 ? m0 : 59); mi >= 0; mi--)
			{
				if ((expr->minutes >> mi) & 1)
				{
					out->year = y;
					out->month = mo;
					out->day = d;
					out->hour = h;
					out->minute = mi;
					return true;
				}
			}
		}
	}
	return false;
}

bool
cron_next_local(const CronExpr *expr, const CronTime *after, CronTime *out)
{
	CronTime	from = *after;

	cron_time_add_minutes(&from, 1);
	return scan_forward(expr, from, out);
}

bool
cron_prev_local(const CronExpr *expr, const CronTime *before, CronTime *out)
{
	CronTime	from = *before;

	cron_time_add_minutes(&from, -1);
	return scan_backward(expr, from, out);
}
