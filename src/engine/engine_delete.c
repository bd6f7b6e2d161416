/*-------------------------------------------------------------------------
 *
 * engine_delete.c
 *	  The DELETE FROM ... WHERE that retention and tms.delete_rows hand to
 *	  an engine: the statement around a predicate, and the pieces a
 *	  predicate is printed from (a column, a typed literal), each in the
 *	  engine's own syntax; and the update count of Trino's answer.
 *
 *	livy	DELETE FROM `cat`.`ns`.`t` WHERE <predicate>   (Spark SQL)
 *	trino	DELETE FROM "cat"."ns"."t" WHERE <predicate>   (Trino SQL)
 *
 * The predicate is printed by the caller from a filter bound to the
 * table's schema (iceberg/compact/row_filter.h walks it), never from a
 * user's text: every column goes through engine_sql_column, every
 * literal through engine_sql_value, which writes it from its value:
 *	- numbers as decimal digits (INT64_MIN as (-9223372036854775807 - 1):
 *	  its digits alone are no bigint literal);
 *	- booleans as true / false;
 *	- strings quoted as quote.c does (Spark: backslash escapes; Trino:
 *	  quotes doubled);
 *	- dates as DATE 'YYYY-MM-DD';
 *	- a timestamp without zone as Spark's TIMESTAMP_NTZ '...' (Iceberg's
 *	  timestamp is Spark's TimestampNTZType) or Trino's TIMESTAMP '...';
 *	- a timestamp with zone (an instant) as Spark's TIMESTAMP
 *	  '...+00:00' or Trino's TIMESTAMP '... UTC', so that the session's
 *	  time zone never moves it;
 *	- fractions of a second with six digits (nine for the nanosecond
 *	  types on Trino; Spark has no nanosecond timestamps, so a value that
 *	  is not a whole microsecond is refused there).
 * Years outside 0001..9999 are refused (neither engine parses them).
 *
 * Plain C, no PostgreSQL header; errors are values.
 *
 * src/engine/engine_delete.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/statement_int.h"
#include "io/io.h"

#define US_PER_DAY	INT64_C(86400000000)

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int
bad_type(EngineType type, TmsError *err)
{
	tms_error_set(err, ENGINE_ERR_UNSUPPORTED, "engine %s has no DELETE FROM ... WHERE",
				  engine_type_name(type) ? engine_type_name(type) : "(unknown)");
	tms_error_hint(err, "Use an engine of type livy or trino, or the engine local.");
	return -1;
}

int
engine_sql_column(EngineType type, IoStrBuf *b, const char *name, TmsError *err)
{
	size_t		len = name ? strlen(name) : 0;

	if (len == 0 || len > ENG_MAX_NAME_BYTES || !eng_utf8_valid(name, len))
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME,
							 "the column name is empty, too long or not valid UTF-8");
	if (type == ENGINE_TYPE_LIVY)
		eng_spark_ident(b, name);
	else if (type == ENGINE_TYPE_TRINO)
		eng_trino_ident(b, name);
	else
		return bad_type(type, err);
	return 0;
}

/* 'YYYY-MM-DD' of days since 1970; false when the year is not 1..9999. */
static bool
date_text(int64_t days, char *out, size_t outsz)
{
	int64_t		y;
	int			m,
				d;

	if (days < INT64_C(-719162) || days > INT64_C(2932896))
		return false;			/* 0001-01-01 .. 9999-12-31 */
	io_civil_from_days(days, &y, &m, &d);
	snprintf(out, outsz, "%04d-%02d-%02d", (int) y, m, d);
	return true;
}

/*
 * 'YYYY-MM-DD HH:MM:SS.ffffff' (digits: 6 or 9) of v units (10^digits a
 * second) since 1970; false when out of range.
 */
static bool
timestamp_text(int64_t v, int digits, char *out, size_t outsz)
{
	int64_t		per_sec = digits == 9 ? INT64_C(1000000000) : INT64_C(1000000);
	int64_t		secs = floor_div(v, per_sec);
	int64_t		frac = v - secs * per_sec;
	int64_t		days = floor_div(secs, 86400);
	int64_t		sod = secs - days * 86400;
	char		date[16];

	if (!date_text(days, date, sizeof(date)))
		return false;
	snprintf(out, outsz, "%s %02d:%02d:%02d.%0*" PRId64, date, (int) (sod / 3600),
			 (int) (sod / 60 % 60), (int) (sod % 60), digits, frac);
	return true;
}

static int
out_of_range(const char *what, int64_t v, TmsError *err)
{
	tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "a %s cannot be written for the engine", what);
	tms_error_detail(err, "The value %" PRId64 " lies outside the years 1 to 9999.", v);
	return -1;
}

int
engine_sql_value(EngineType type, IoStrBuf *b, EngineValueKind kind, int64_t v, const char *s,
				 TmsError *err)
{
	bool		spark = type == ENGINE_TYPE_LIVY;
	char		text[64];

	if (type != ENGINE_TYPE_LIVY && type != ENGINE_TYPE_TRINO)
		return bad_type(type, err);
	switch (kind)
	{
		case ENGINE_VALUE_BOOL:
			io_sb_puts(b, v ? "true" : "false");
			return 0;
		case ENGINE_VALUE_INT:
			if (v == INT64_MIN)
				io_sb_puts(b, "(-9223372036854775807 - 1)");
			else
				io_sb_printf(b, "%" PRId64, v);
			return 0;
		case ENGINE_VALUE_STRING:
			if (s == NULL || !eng_utf8_valid(s, strlen(s)))
				return tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
									 "a string literal is not valid UTF-8");
			if (spark)
				eng_spark_string(b, s);
			else
				eng_trino_string(b, s);
			return 0;
		case ENGINE_VALUE_DATE:
			if (!date_text(v, text, sizeof(text)))
				return out_of_range("date", v, err);
			io_sb_puts(b, "DATE ");
			break;
		case ENGINE_VALUE_TIMESTAMP:
		case ENGINE_VALUE_TIMESTAMPTZ:
			if (!timestamp_text(v, 6, text, sizeof(text)))
				return out_of_range("timestamp", v, err);
			break;
		case ENGINE_VALUE_TIMESTAMP_NS:
		case ENGINE_VALUE_TIMESTAMPTZ_NS:
			if (spark && v % 1000 != 0)
			{
				tms_error_set(err, ENGINE_ERR_UNSUPPORTED,
							  "spark cannot compare a nanosecond timestamp exactly");
				tms_error_detail(err, "The value %" PRId64 " ns is not a whole microsecond; Spark's timestamps hold microseconds.", v);
				tms_error_hint(err, "Use an engine of type trino, or a cutoff of whole microseconds.");
				return -1;
			}
			if (!(spark ? timestamp_text(v / 1000, 6, text, sizeof(text)) :
				  timestamp_text(v, 9, text, sizeof(text))))
				return out_of_range("timestamp", v, err);
			break;
		default:
			return tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "unknown kind of literal");
	}
	if (kind != ENGINE_VALUE_DATE)
	{
		bool		zoned = kind == ENGINE_VALUE_TIMESTAMPTZ ||
		kind == ENGINE_VALUE_TIMESTAMPTZ_NS;

		io_sb_puts(b, spark && !zoned ? "TIMESTAMP_NTZ " : "TIMESTAMP ");
		if (zoned)
			strncat(text, spark ? "+00:00" : " UTC", sizeof(text) - strlen(text) - 1);
	}

	/*
	 * the text is digits, '-', ':', '.', ' ', '+' and "UTC": no quoting
	 * needed
	 */
	io_sb_putc(b, '\'');
	io_sb_puts(b, text);
	io_sb_putc(b, '\'');
	return 0;
}

int
engine_delete_build(EngineType type, const EngineTarget *t, const char *predicate,
					EngineStatement *out, TmsError *err)
{
	IoStrBuf	b;
	size_t		i;

	memset(out, 0, sizeof(*out));
	out->type = type;
	out->op = ENGINE_OP_UNKNOWN;
	if (type != ENGINE_TYPE_LIVY && type != ENGINE_TYPE_TRINO)
		return bad_type(type, err);
	if (predicate == NULL || predicate[0] == '\0')
		return tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
							 "a DELETE needs a predicate: without one every row would go");
	if (eng_check_target(type, t, err) != 0)
		return -1;
	io_sb_init(&b);
	io_sb_puts(&b, "DELETE FROM ");
	if (type == ENGINE_TYPE_LIVY)
	{
		eng_spark_ident(&b, t->catalog);
		for (i = 0; i < t->nns; i++)
		{
			io_sb_putc(&b, '.');
			eng_spark_ident(&b, t->ns[i]);
		}
		io_sb_putc(&b, '.');
		eng_spark_ident(&b, t->table);
	}
	else
	{
		eng_trino_ident(&b, t->catalog);
		io_sb_putc(&b, '.');
		eng_trino_ident(&b, t->ns[0]);
		io_sb_putc(&b, '.');
		eng_trino_ident(&b, t->table);
	}
	io_sb_puts(&b, " WHERE ");
	io_sb_puts(&b, predicate);
	out->text = io_sb_steal(&b);
	io_sb_free(&b);
	if (out->text == NULL)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

int
engine_update_count_read(const char *const *columns, size_t ncolumns,
						 const char *const *const *rows, size_t nrows, int64_t *out,
						 TmsError *err)
{
	*out = -1;
	for (size_t c = 0; c < ncolumns && columns; c++)
	{
		if (columns[c] == NULL || strcmp(columns[c], "rows") != 0)
			continue;
		if (nrows != 1 || rows == NULL || rows[0] == NULL || rows[0][c] == NULL ||
			!eng_parse_whole(rows[0][c], out) || *out < 0)
		{
			*out = -1;
			tms_error_set(err, ENGINE_ERR_INVALID_RESULT,
						  "the engine's update count is not a count");
			tms_error_detail(err, "Column \"rows\" of %zu rows.", nrows);
			return -1;
		}
		return 0;
	}
	return 0;
}
