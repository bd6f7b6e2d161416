/*-------------------------------------------------------------------------
 *
 * engine_options.c
 *	  The options of each (engine, operation): which keys it accepts, how
 *	  each value is checked and parsed (booleans, integers of any width,
 *	  sizes, durations, points in time, names, maps, lists, Iceberg's
 *	  rewrite options), and the renderings of sizes, durations and times.
 *
 * The allowed keys of an (engine, operation) are one string each
 * (allowed_table): engine_allowed_options returns it and the check reads
 * it, so that the hint of an error and the check cannot disagree.
 *
 * Rules (statement.h): every key is checked before anything is built;
 * JSON null and a string that is wholly "{{name}}" count as absent;
 * booleans are JSON true/false; integers are JSON integers or strings of
 * digits, read from their text and range-checked (never rounded); sizes
 * are bytes or "<n><unit>" with binary units (KB = KiB = 1024, as Spark
 * and Trino read them); durations are ms or "<n> <unit>"; a fraction must
 * come out whole (1.5h is 5400000 ms, 1.5B is refused).  The
 * "engine-resources" object of livy and gravitino is checked by
 * engine_resources.c.
 *
 * Plain C, no PostgreSQL header.
 *
 * src/engine/engine_options.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/statement_int.h"
#include "io/io.h"

#define I32MAX ((int64_t) 2147483647)

typedef struct KeySpec
{
	const char *name;
	EngOptKind	kind;
	int64_t		lo;
	int64_t		hi;
	const char *const *choices; /* ENUM: canonical spellings, NULL-ended */
	const char *iceberg;		/* the Iceberg rewrite option it stands for */
} KeySpec;

static const char *const strategy_choices[] = {"binpack", "sort", NULL};
static const char *const prefix_choices[] = {"ERROR", "IGNORE", "DELETE", NULL};
static const char *const job_order_choices[] = {"bytes-asc", "bytes-desc", "files-asc",
"files-desc", "none", NULL};

/* Indexed by EngKey. */
static const KeySpec key_specs[EK__COUNT] = {
	[EK_STRATEGY] = {"strategy", EOK_ENUM, 0, 0, strategy_choices, NULL},
	[EK_SORT_ORDER] = {"sort-order", EOK_STRING, 0, 0, NULL, NULL},
	[EK_WHERE] = {"where", EOK_STRING, 0, 0, NULL, NULL},
	[EK_TARGET_FILE_SIZE] = {"target-file-size-bytes", EOK_SIZE, 1, INT64_MAX, NULL,
	"target-file-size-bytes"},
	[EK_MIN_INPUT_FILES] = {"min-input-files", EOK_INT, 1, I32MAX, NULL, "min-input-files"},
	[EK_MAX_FILE_GROUP_SIZE] = {"max-file-group-size-bytes", EOK_SIZE, 1, INT64_MAX, NULL,
	"max-file-group-size-bytes"},
	[EK_REWRITE_ALL] = {"rewrite-all", EOK_BOOL, 0, 0, NULL, "rewrite-all"},
	[EK_PARTIAL_PROGRESS] = {"partial-progress-enabled", EOK_BOOL, 0, 0, NULL,
	"partial-progress.enabled"},
	[EK_DELETE_FILE_THRESHOLD] = {"delete-file-threshold", EOK_INT, 0, I32MAX, NULL,
	"delete-file-threshold"},
	[EK_OPTIONS] = {"options", EOK_REWRITE_OPTIONS, 0, 0, NULL, NULL},
	[EK_FILE_SIZE_THRESHOLD] = {"file-size-threshold", EOK_SIZE, 1, INT64_MAX, NULL, NULL},
	[EK_USE_CACHING] = {"use-caching", EOK_BOOL, 0, 0, NULL, NULL},
	[EK_SPEC_ID] = {"spec-id", EOK_INT, 0, I32MAX, NULL, NULL},
	[EK_OLDER_THAN] = {"older-than", EOK_TIME, 0, INT64_MAX, NULL, NULL},
	[EK_RETAIN_LAST] = {"retain-last", EOK_INT, 1, I32MAX, NULL, NULL},
	[EK_MAX_CONCURRENT_DELETES] = {"max-concurrent-deletes", EOK_INT, 1, I32MAX, NULL, NULL},
	[EK_STREAM_RESULTS] = {"stream-results", EOK_BOOL, 0, 0, NULL, NULL},
	[EK_SNAPSHOT_IDS] = {"snapshot-ids", EOK_INTLIST, 0, INT64_MAX, NULL, NULL},
	[EK_CLEAN_EXPIRED_METADATA] = {"clean-expired-metadata", EOK_BOOL, 0, 0, NULL, NULL},
	[EK_LOCATION] = {"location", EOK_STRING, 0, 0, NULL, NULL},
	[EK_EQUAL_SCHEMES] = {"equal-schemes", EOK_STRMAP, 0, 0, NULL, NULL},
	[EK_EQUAL_AUTHORITIES] = {"equal-authorities", EOK_STRMAP, 0, 0, NULL, NULL},
	[EK_PREFIX_MISMATCH_MODE] = {"prefix-mismatch-mode", EOK_ENUM, 0, 0, prefix_choices, NULL},
	[EK_ENGINE_RESOURCES] = {"engine-resources", EOK_RESOURCES, 0, 0, NULL, NULL},
};

/*
 * Iceberg's documented options of RewriteDataFiles (and, where
 * data_only is false, of RewritePositionDeleteFiles), for the "options"
 * object.  kind EOK_STRING here means a double (a JSON number).
 */
typedef struct RewriteSpec
{
	const char *name;
	EngOptKind	kind;
	int64_t		lo;
	int64_t		hi;
	const char *const *choices;
	bool		data_only;
} RewriteSpec;

#define EOK_DOUBLE EOK_STRING

static const RewriteSpec rewrite_specs[] = {
	{"max-concurrent-file-group-rewrites", EOK_INT, 1, I32MAX, NULL, false},
	{"partial-progress.enabled", EOK_BOOL, 0, 0, NULL, false},
	{"partial-progress.max-commits", EOK_INT, 1, I32MAX, NULL, false},
	{"partial-progress.max-failed-commits", EOK_INT, 0, I32MAX, NULL, true},
	{"use-starting-sequence-number", EOK_BOOL, 0, 0, NULL, true},
	{"rewrite-job-order", EOK_ENUM, 0, 0, job_order_choices, false},
	{"target-file-size-bytes", EOK_SIZE, 1, INT64_MAX, NULL, false},
	{"min-file-size-bytes", EOK_SIZE, 0, INT64_MAX, NULL, false},
	{"max-file-size-bytes", EOK_SIZE, 1, INT64_MAX, NULL, false},
	{"min-input-files", EOK_INT, 1, I32MAX, NULL, false},
	{"rewrite-all", EOK_BOOL, 0, 0, NULL, false},
	{"max-file-group-size-bytes", EOK_SIZE, 1, INT64_MAX, NULL, false},
	{"delete-file-threshold", EOK_INT, 0, I32MAX, NULL, true},
	{"delete-ratio-threshold", EOK_DOUBLE, 0, 0, NULL, true},
	{"output-spec-id", EOK_INT, 0, I32MAX, NULL, true},
	{"remove-dangling-deletes", EOK_BOOL, 0, 0, NULL, true},
	{"max-files-to-rewrite", EOK_INT, 1, I32MAX, NULL, true},
	{"compression-factor", EOK_DOUBLE, 0, 0, NULL, true},
	{"shuffle-partitions-per-file", EOK_INT, 1, I32MAX, NULL, true},
	{"var-length-contribution", EOK_INT, 1, I32MAX, NULL, true},
	{"max-output-size", EOK_INT, 1, I32MAX, NULL, true},
};
#define N_REWRITE_SPECS (sizeof(rewrite_specs) / sizeof(rewrite_specs[0]))

#define COMPACTION_KEYS "strategy, sort-order, where, target-file-size-bytes, " \
	"min-input-files, max-file-group-size-bytes, rewrite-all, " \
	"partial-progress-enabled, delete-file-threshold, options, engine-resources"

/* [engine][operation]; NULL: unsupported. */
static const char *const allowed_table[3][5] = {
	[ENGINE_TYPE_LIVY] = {
		[ENGINE_OP_COMPACTION] = COMPACTION_KEYS,
		[ENGINE_OP_POSITION_DELETE_REWRITE] = "where, target-file-size-bytes, "
		"min-input-files, max-file-group-size-bytes, rewrite-all, "
		"partial-progress-enabled, options, engine-resources",
		[ENGINE_OP_MANIFEST_REWRITE] = "use-caching, spec-id, engine-resources",
		[ENGINE_OP_SNAPSHOT_EXPIRY] = "older-than, retain-last, max-concurrent-deletes, "
		"stream-results, snapshot-ids, clean-expired-metadata, engine-resources",
		[ENGINE_OP_ORPHAN_CLEANUP] = "older-than, location, max-concurrent-deletes, "
		"equal-schemes, equal-authorities, prefix-mismatch-mode, engine-resources",
	},
	[ENGINE_TYPE_TRINO] = {
		[ENGINE_OP_COMPACTION] = "file-size-threshold, where, target-file-size-bytes",
		[ENGINE_OP_POSITION_DELETE_REWRITE] = NULL,
		[ENGINE_OP_MANIFEST_REWRITE] = "",
		[ENGINE_OP_SNAPSHOT_EXPIRY] = "older-than",
		[ENGINE_OP_ORPHAN_CLEANUP] = "older-than",
	},
	[ENGINE_TYPE_GRAVITINO] = {
		[ENGINE_OP_COMPACTION] = COMPACTION_KEYS,
		[ENGINE_OP_POSITION_DELETE_REWRITE] = NULL,
		[ENGINE_OP_MANIFEST_REWRITE] = "use-caching, spec-id, engine-resources",
		[ENGINE_OP_SNAPSHOT_EXPIRY] = "older-than, retain-last, stream-results, "
		"engine-resources",
		[ENGINE_OP_ORPHAN_CLEANUP] = NULL,
	},
};

static bool
valid_pair(EngineType type, EngineOperation op)
{
	return type >= ENGINE_TYPE_LIVY && type <= ENGINE_TYPE_GRAVITINO &&
		op >= ENGINE_OP_COMPACTION && op <= ENGINE_OP_ORPHAN_CLEANUP;
}

bool
engine_supports(EngineType type, EngineOperation op)
{
	return valid_pair(type, op) && allowed_table[type][op] != NULL;
}

const char *
engine_allowed_options(EngineType type, EngineOperation op)
{
	if (!engine_supports(type, op))
		return "";
	return allowed_table[type][op];
}

const char *
eng_key_name(EngKey k)
{
	return key_specs[k].name;
}

const char *
eng_key_iceberg_option(EngKey k)
{
	return key_specs[k].iceberg;
}

/* Whether name is one of the ", " separated words of list. */
static bool
in_list(const char *list, const char *name)
{
	size_t		n = strlen(name);
	const char *p = list;

	while (*p)
	{
		const char *e = strstr(p, ", ");
		size_t		w = e ? (size_t) (e - p) : strlen(p);

		if (w == n && memcmp(p, name, n) == 0)
			return true;
		if (e == NULL)
			break;
		p = e + 2;
	}
	return false;
}

/* ---- values ---- */

static bool
is_placeholder(const EngJson *v)
{
	size_t		i;

	if (v->kind != EJ_STRING || v->len < 5 || strncmp(v->str, "{{", 2) != 0 ||
		strcmp(v->str + v->len - 2, "}}") != 0)
		return false;
	for (i = 2; i < v->len - 2; i++)
		if (v->str[i] == '{' || v->str[i] == '}')
			return false;
	return true;
}

static bool
absent(const EngJson *v)
{
	return v->kind == EJ_NULL || is_placeholder(v);
}

/* The value as shown in a detail: its text, or its JSON kind. */
static void
show_value(const EngJson *v, char *out, size_t outsz)
{
	char		t[200];

	if (v->kind == EJ_STRING)
	{
		eng_show(t, sizeof(t), v->str, v->len, 64);
		snprintf(out, outsz, "\"%s\"", t);
	}
	else if (v->kind == EJ_NUMBER)
	{
		eng_show(t, sizeof(t), v->str, v->len, 64);
		snprintf(out, outsz, "%s", t);
	}
	else if (v->kind == EJ_TRUE || v->kind == EJ_FALSE)
		snprintf(out, outsz, "%s", v->kind == EJ_TRUE ? "true" : "false");
	else
		snprintf(out, outsz, "%s", eng_json_kind_name(v->kind));
}

static int
bad_value(TmsError *err, const char *key, const EngJson *v, const char *fmt_must)
{
	char		shown[256];

	show_value(v, shown, sizeof(shown));
	tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "invalid value for option \"%s\"", key);
	tms_error_detail(err, "\"%s\" %s, not %s.", key, fmt_must, shown);
	return -1;
}

/*
 * "<digits>[.<digits>]" then optional spaces then the unit, into
 * *num / 10^*scale and the unit text.  False when malformed.
 */
static bool
split_number_unit(const char *s, uint64_t *num, int *scale, const char **unit)
{
	const char *p = s;
	uint64_t	v = 0;
	int			digits = 0;
	int			sc = 0;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
	{
		if (digits >= 18)
			return false;
		if (v > 0 || *p != '0')
			digits++;
		v = v * 10 + (uint64_t) (*p - '0');
		p++;
	}
	if (*p == '.')
	{
		p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
		{
			if (digits >= 18 || sc >= 9)
				return false;
			digits++;
			v = v * 10 + (uint64_t) (*p - '0');
			sc++;
			p++;
		}
	}
	while (*p == ' ')
		p++;
	*num = v;
	*scale = sc;
	*unit = p;
	return true;
}

/* num / 10^scale * mult exactly into *out; false when not whole or too big. */
static bool
scale_exact(uint64_t num, int scale, int64_t mult, int64_t *out)
{
	unsigned __int128 v = (unsigned __int128) num * (unsigned __int128) mult;
	unsigned __int128 div = 1;
	int			i;

	for (i = 0; i < scale; i++)
		div *= 10;
	if (v % div != 0)
		return false;
	v /= div;
	if (v > (unsigned __int128) INT64_MAX)
		return false;
	*out = (int64_t) v;
	return true;
}

typedef struct UnitSpec
{
	const char *name;
	int64_t		mult;
} UnitSpec;

static const UnitSpec size_units[] = {
	{"b", 1}, {"k", 1024}, {"kb", 1024}, {"kib", 1024},
	{"m", 1024 * 1024}, {"mb", 1024 * 1024}, {"mib", 1024 * 1024},
	{"g", INT64_C(1) << 30}, {"gb", INT64_C(1) << 30}, {"gib", INT64_C(1) << 30},
	{"t", INT64_C(1) << 40}, {"tb", INT64_C(1) << 40}, {"tib", INT64_C(1) << 40},
	{"p", INT64_C(1) << 50}, {"pb", INT64_C(1) << 50}, {"pib", INT64_C(1) << 50},
	{NULL, 0}
};

static const UnitSpec duration_units[] = {
	{"ms", 1}, {"msec", 1}, {"millisecond", 1}, {"milliseconds", 1},
	{"s", 1000}, {"sec", 1000}, {"secs", 1000}, {"second", 1000}, {"seconds", 1000},
	{"m", 60000}, {"min", 60000}, {"mins", 60000}, {"minute", 60000}, {"minutes", 60000},
	{"h", 3600000}, {"hr", 3600000}, {"hrs", 3600000}, {"hour", 3600000},
	{"hours", 3600000},
	{"d", 86400000}, {"day", 86400000}, {"days", 86400000},
	{"w", 604800000}, {"week", 604800000}, {"weeks", 604800000},
	{NULL, 0}
};

/* "<n>[ ]<unit>" (or "<n>" meaning unit 1) as an int64, exactly. */
static bool
parse_with_unit(const char *s, const UnitSpec *units, int64_t *out)
{
	uint64_t	num;
	int			scale;
	const char *unit;
	const UnitSpec *u;

	if (!split_number_unit(s, &num, &scale, &unit))
		return false;
	if (*unit == '\0')
		return scale_exact(num, scale, 1, out);
	for (u = units; u->name; u++)
		if (strcasecmp(unit, u->name) == 0)
			return scale_exact(num, scale, u->mult, out);
	return false;
}

static bool
digits_at(const char *s, int n, int *out)
{
	int			v = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

/*
 * "YYYY-MM-DD[T ]HH:MM:SS[.f{1,3}](Z|+HH:MM|-HH:MM)" as Unix ms.  The
 * zone is required: a point in time is never read in an unknown zone.
 */
static bool
parse_timestamp(const char *s, int64_t *out)
{
	int			y,
				mo,
				d,
				h,
				mi,
				se,
				ms = 0;
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	const char *p;
	int64_t		v;
	int			maxd;

	if (strlen(s) < 20)
		return false;
	if (!digits_at(s, 4, &y) || s[4] != '-' || !digits_at(s + 5, 2, &mo) || s[7] != '-' ||
		!digits_at(s + 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') ||
		!digits_at(s + 11, 2, &h) || s[13] != ':' || !digits_at(s + 14, 2, &mi) ||
		s[16] != ':' || !digits_at(s + 17, 2, &se))
		return false;
	if (y < 1970 || mo < 1 || mo > 12 || h > 23 || mi > 59 || se > 59)
		return false;
	maxd = mdays[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0));
	if (d < 1 || d > maxd)
		return false;
	p = s + 19;
	if (*p == '.')
	{
		int			n = 0;

		p++;
		while (p[n] >= '0' && p[n] <= '9')
			n++;
		if (n < 1 || n > 3)
			return false;
		digits_at(p, n, &ms);
		ms *= (n == 1) ? 100 : (n == 2) ? 10 : 1;
		p += n;
	}
	v = ((io_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + se;
	v = v * 1000 + ms;
	if (strcmp(p, "Z") == 0)
		;
	else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && p[3] == ':')
	{
		int			oh,
					om;

		if (!digits_at(p + 1, 2, &oh) || !digits_at(p + 4, 2, &om) || oh > 23 || om > 59)
			return false;
		v += (p[0] == '+' ? -1 : 1) * ((int64_t) oh * 60 + om) * 60000;
	}
	else
		return false;
	if (v < 0)
		return false;
	*out = v;
	return true;
}

/* An integer value (JSON integer or string of digits) in lo..hi. */
static int
get_int(const char *key, const EngJson *v, int64_t lo, int64_t hi, int64_t *out,
		TmsError *err)
{
	char		must[160];
	int			r = 0;

	if (hi == INT64_MAX && lo == INT64_MIN)
		snprintf(must, sizeof(must), "must be a whole number");
	else if (hi == INT64_MAX)
		snprintf(must, sizeof(must), "must be a whole number of at least %lld",
				 (long long) lo);
	else
		snprintf(must, sizeof(must), "must be a whole number from %lld to %lld",
				 (long long) lo, (long long) hi);
	if ((v->kind == EJ_NUMBER && v->integer) || v->kind == EJ_STRING)
		r = eng_parse_int64(v->str, v->len, out);
	if (r == 1 && *out >= lo && *out <= hi)
		return 0;
	if (r == -1)
	{
		char		m2[200];

		snprintf(m2, sizeof(m2), "%s (it is out of range)", must);
		return bad_value(err, key, v, m2);
	}
	return bad_value(err, key, v, must);
}

/* One scalar value of kind into val; 0 or -1 with *err. */
static int
get_scalar(const char *key, EngOptKind kind, int64_t lo, int64_t hi,
		   const char *const *choices, const EngJson *v, EngValue *val,
		   TmsError *err)
{
	switch (kind)
	{
		case EOK_BOOL:
			if (v->kind != EJ_TRUE && v->kind != EJ_FALSE)
				return bad_value(err, key, v, "must be true or false");
			val->b = (v->kind == EJ_TRUE);
			break;
		case EOK_INT:
			if (get_int(key, v, lo, hi, &val->i, err) != 0)
				return -1;
			break;
		case EOK_SIZE:
			if (v->kind == EJ_NUMBER)
			{
				if (get_int(key, v, lo, hi, &val->i, err) != 0)
					return -1;
			}
			else if (v->kind != EJ_STRING ||
					 !parse_with_unit(v->str, size_units, &val->i) ||
					 val->i < lo || val->i > hi)
				return bad_value(err, key, v, lo > 0 ?
								 "must be a positive size in bytes, or a string such as \"128MB\" or \"1GiB\"" :
								 "must be a size in bytes, or a string such as \"128MB\" or \"1GiB\"");
			break;
		case EOK_DURATION:
		case EOK_TIME:
			val->is_timestamp = false;
			if (v->kind == EJ_NUMBER)
			{
				if (get_int(key, v, 0, INT64_MAX, &val->i, err) != 0)
					return -1;
			}
			else if (v->kind == EJ_STRING && kind == EOK_TIME &&
					 v->len >= 5 && v->str[4] == '-')
			{
				if (!parse_timestamp(v->str, &val->i))
					return bad_value(err, key, v,
									 "must be a timestamp with a zone such as \"2026-11-01T00:00:00Z\"");
				val->is_timestamp = true;
			}
			else if (v->kind != EJ_STRING || !parse_with_unit(v->str, duration_units, &val->i))
				return bad_value(err, key, v, kind == EOK_TIME ?
								 "must be an age such as \"7 days\", \"12h\" or a number of milliseconds, or a timestamp such as \"2026-11-01T00:00:00Z\"" :
								 "must be a duration such as \"7 days\", \"12h\" or a number of milliseconds");
			break;
		case EOK_STRING:
		case EOK_TRINO_WHERE:
			if (v->kind != EJ_STRING || v->len == 0)
				return bad_value(err, key, v, "must be a non-empty string");
			if (kind == EOK_TRINO_WHERE && eng_trino_where_check(v->str, err) != 0)
				return -1;
			break;
		case EOK_ENUM:
			{
				const char *const *c;

				if (v->kind == EJ_STRING)
					for (c = choices; *c; c++)
						if (strcasecmp(*c, v->str) == 0)
						{
							val->s = io_strdup(*c);
							if (val->s == NULL)
								return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
							return 0;
						}
				{
					char		must[200];
					size_t		o = 0;

					o += (size_t) snprintf(must + o, sizeof(must) - o, "must be one of");
					for (c = choices; *c && o < sizeof(must); c++)
						o += (size_t) snprintf(must + o, sizeof(must) - o, "%s %s",
											   c == choices ? "" : ",", *c);
					return bad_value(err, key, v, must);
				}
			}
		default:
			return tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "option \"%s\" has no scalar value", key);
	}
	return 0;
}

/* A double, re-rendered in its shortest exact form. */
static int
get_double(const char *key, const EngJson *v, char **out, TmsError *err)
{
	double		d;
	char	   *end;
	char		buf[40];
	int			prec;

	if (v->kind != EJ_NUMBER && v->kind != EJ_STRING)
		return bad_value(err, key, v, "must be a number");
	if (strspn(v->str, "0123456789.eE+-") != v->len)
		return bad_value(err, key, v, "must be a non-negative number");
	d = strtod(v->str, &end);
	if (v->len == 0 || *end != '\0' || !isfinite(d) || d < 0 ||
		(v->kind == EJ_STRING && !(isdigit((unsigned char) v->str[0]))))
		return bad_value(err, key, v, "must be a non-negative number");
	for (prec = 1; prec <= 17; prec++)
	{
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	*out = io_strdup(buf);
	if (*out == NULL)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

static bool
push_pair(EngValue *val, char *k, char *s)
{
	char	  **keys = io_realloc(val->keys, (val->n + 1) * sizeof(char *));
	char	  **vals;

	if (keys != NULL)
		val->keys = keys;
	vals = keys ? io_realloc(val->vals, (val->n + 1) * sizeof(char *)) : NULL;
	if (vals != NULL)
		val->vals = vals;
	if (keys == NULL || vals == NULL || k == NULL || s == NULL)
	{
		io_free(k);
		io_free(s);
		return false;
	}
	val->keys[val->n] = k;
	val->vals[val->n] = s;
	val->n++;
	return true;
}

/* The "options" object: Iceberg rewrite options, values rendered. */
static int
get_rewrite_options(EngineOperation op, const EngJson *v, EngValue *val, TmsError *err)
{
	size_t		i;

	if (v->kind != EJ_OBJECT)
		return bad_value(err, "options", v, "must be an object of Iceberg rewrite options");
	for (i = 0; i < v->nitems; i++)
	{
		const char *k = v->keys[i];
		const EngJson *item = v->items[i];
		const RewriteSpec *rs = NULL;
		size_t		j;
		EngValue	one;
		char		full[160];
		char	   *rendered = NULL;
		char		num[32];

		for (j = 0; j < N_REWRITE_SPECS; j++)
			if (strcmp(rewrite_specs[j].name, k) == 0 &&
				(op == ENGINE_OP_COMPACTION || !rewrite_specs[j].data_only))
				rs = &rewrite_specs[j];
		if (rs == NULL)
		{
			char		shown[160];
			IoStrBuf	hint;

			eng_show(shown, sizeof(shown), k, strlen(k), 64);
			tms_error_set(err, ENGINE_ERR_UNKNOWN_OPTION,
						  "unknown Iceberg rewrite option \"%s\" in option \"options\"", shown);
			tms_error_detail(err, "%s does not take \"%s\".",
							 op == ENGINE_OP_COMPACTION ? "rewrite_data_files" :
							 "rewrite_position_delete_files", shown);
			io_sb_init(&hint);
			for (j = 0; j < N_REWRITE_SPECS; j++)
				if (op == ENGINE_OP_COMPACTION || !rewrite_specs[j].data_only)
				{
					io_sb_puts(&hint, hint.len ? ", " : "");
					io_sb_puts(&hint, rewrite_specs[j].name);
				}
			tms_error_hint(err, "Allowed in \"options\": %s.", hint.data ? hint.data : "");
			io_sb_free(&hint);
			return -1;
		}
		if (absent(item))
			continue;
		snprintf(full, sizeof(full), "options.%s", k);
		memset(&one, 0, sizeof(one));
		if (rs->kind == EOK_DOUBLE)
		{
			if (get_double(full, item, &rendered, err) != 0)
				return -1;
		}
		else
		{
			if (get_scalar(full, rs->kind, rs->lo, rs->hi, rs->choices, item, &one, err) != 0)
				return -1;
			if (rs->kind == EOK_BOOL)
				rendered = io_strdup(one.b ? "true" : "false");
			else if (rs->kind == EOK_ENUM)
				rendered = one.s;
			else
			{
				snprintf(num, sizeof(num), "%lld", (long long) one.i);
				rendered = io_strdup(num);
			}
		}
		if (!push_pair(val, io_strdup(k), rendered))
			return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	}
	val->present = val->n > 0;
	return 0;
}

static int
get_value(EngineType type, EngineOperation op, EngKey key, const EngJson *v,
		  EngValue *val, TmsError *err)
{
	const KeySpec *ks = &key_specs[key];
	EngOptKind	kind = ks->kind;
	size_t		i;

	if (key == EK_WHERE && type == ENGINE_TYPE_TRINO)
		kind = EOK_TRINO_WHERE;
	switch (kind)
	{
		case EOK_STRMAP:
			if (v->kind != EJ_OBJECT || v->nitems == 0)
				return bad_value(err, ks->name, v, "must be a non-empty object of strings");
			for (i = 0; i < v->nitems; i++)
			{
				const EngJson *item = v->items[i];

				if (absent(item))
					continue;
				if (item->kind != EJ_STRING || item->len == 0 || v->keys[i][0] == '\0')
					return bad_value(err, ks->name, item,
									 "must map non-empty strings to non-empty strings");
				if (!push_pair(val, io_strdup(v->keys[i]), io_strdup(item->str)))
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			}
			val->present = val->n > 0;
			return 0;
		case EOK_INTLIST:
			if (v->kind != EJ_ARRAY || v->nitems == 0)
				return bad_value(err, ks->name, v, "must be a non-empty array of snapshot ids");
			val->ints = io_malloc(v->nitems * sizeof(int64_t));
			if (val->ints == NULL)
				return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			for (i = 0; i < v->nitems; i++)
			{
				if (absent(v->items[i]))
					continue;
				if (get_int(ks->name, v->items[i], ks->lo, ks->hi, &val->ints[val->n], err) != 0)
					return -1;
				val->n++;
			}
			val->present = val->n > 0;
			return 0;
		case EOK_REWRITE_OPTIONS:
			return get_rewrite_options(op, v, val, err);
		case EOK_RESOURCES:
			val->res = io_calloc(1, sizeof(EngResources));
			if (val->res == NULL)
				return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			if (eng_resources_parse(type, v, val->res, err) != 0)
				return -1;
			val->present = true;
			return 0;
		default:
			if (get_scalar(ks->name, kind, ks->lo, ks->hi, ks->choices, v, val, err) != 0)
				return -1;
			if ((kind == EOK_STRING || kind == EOK_TRINO_WHERE) && val->s == NULL)
			{
				/* a WHERE keeps its text, without surrounding whitespace */
				const char *b = v->str;
				size_t		n = v->len;

				while (n > 0 && (*b == ' ' || *b == '\t' || *b == '\n' || *b == '\r'))
				{
					b++;
					n--;
				}
				while (n > 0 && (b[n - 1] == ' ' || b[n - 1] == '\t' ||
								 b[n - 1] == '\n' || b[n - 1] == '\r'))
					n--;
				if (n == 0)
					return bad_value(err, ks->name, v, "must be a non-empty string");
				val->s = io_strndup(b, n);
				if (val->s == NULL)
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			}
			val->present = true;
			return 0;
	}
}

static const char *
type_label(EngineType type)
{
	const char *n = engine_type_name(type);

	return n ? n : "unknown";
}

int
eng_options_parse(EngineType type, EngineOperation op, const char *options_json,
				  EngOptions *out, TmsError *err)
{
	EngJson    *doc = NULL;
	size_t		len;
	size_t		i;
	const char *allowed;
	int			rc = -1;

	memset(out, 0, sizeof(*out));
	if (!valid_pair(type, op))
		return tms_error_set(err, type < 0 || type > ENGINE_TYPE_GRAVITINO ?
							 ENGINE_ERR_UNSUPPORTED : ENGINE_ERR_UNKNOWN_OPERATION,
							 type < 0 || type > ENGINE_TYPE_GRAVITINO ?
							 "unknown engine type" : "unknown operation");
	if (!engine_supports(type, op))
	{
		tms_error_set(err, ENGINE_ERR_UNSUPPORTED, "engine %s cannot run %s",
					  type_label(type), engine_op_name(op));
		if (op == ENGINE_OP_POSITION_DELETE_REWRITE)
			tms_error_hint(err, "Use an engine of type livy, or compaction, which "
						   "applies delete files as it rewrites data files.");
		else
			tms_error_hint(err, "Use an engine of type livy, or the engine local.");
		return -1;
	}
	allowed = allowed_table[type][op];
	if (options_json == NULL)
		return 0;
	len = strlen(options_json);
	if (len > ENG_MAX_OPTIONS_BYTES)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "options are too long");
		tms_error_detail(err, "The options take %zu bytes, at most %d are allowed.",
						 len, ENG_MAX_OPTIONS_BYTES);
		return -1;
	}
	for (i = 0; i < len; i++)
		if (options_json[i] != ' ' && options_json[i] != '\t' &&
			options_json[i] != '\n' && options_json[i] != '\r')
			break;
	if (i == len)
		return 0;
	doc = eng_json_parse(options_json, len, err);
	if (doc == NULL)
		return -1;
	if (doc->kind != EJ_OBJECT)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "options must be a JSON object");
		tms_error_detail(err, "The options are %s.", eng_json_kind_name(doc->kind));
		goto done;
	}
	for (i = 0; i < doc->nitems; i++)
	{
		const char *k = doc->keys[i];
		int			key;

		for (key = 0; key < EK__COUNT; key++)
			if (strcmp(key_specs[key].name, k) == 0)
				break;
		if (key == EK__COUNT || !in_list(allowed, k))
		{
			char		shown[160];

			eng_show(shown, sizeof(shown), k, strlen(k), 64);
			tms_error_set(err, ENGINE_ERR_UNKNOWN_OPTION,
						  "unknown option \"%s\" for %s on %s", shown,
						  engine_op_name(op), type_label(type));
			if (key < EK__COUNT)
				tms_error_detail(err, "Option \"%s\" is not one of %s's for %s.", shown,
								 type_label(type), engine_op_name(op));
			if (allowed[0])
				tms_error_hint(err, "Allowed options: %s.", allowed);
			else
				tms_error_hint(err, "%s on %s takes no options.", engine_op_name(op),
							   type_label(type));
			goto done;
		}
		if (absent(doc->items[i]))
			continue;
		if (get_value(type, op, (EngKey) key, doc->items[i], &out->v[key], err) != 0)
			goto done;
	}

	/* checks across options */
	if (out->v[EK_SORT_ORDER].present && out->v[EK_STRATEGY].present &&
		strcmp(out->v[EK_STRATEGY].s, "sort") != 0)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "option \"sort-order\" needs strategy \"sort\"");
		tms_error_detail(err, "The strategy is \"%s\".", out->v[EK_STRATEGY].s);
		goto done;
	}
	if (type == ENGINE_TYPE_TRINO && out->v[EK_OLDER_THAN].present &&
		out->v[EK_OLDER_THAN].is_timestamp)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "invalid value for option \"older-than\"");
		tms_error_detail(err, "Trino takes a retention threshold, not a point in time.");
		tms_error_hint(err, "Give an age such as \"7 days\".");
		goto done;
	}
	if (out->v[EK_OPTIONS].present)
	{
		const EngValue *ov = &out->v[EK_OPTIONS];
		int			key;

		for (key = 0; key < EK__COUNT; key++)
		{
			if (!out->v[key].present || key_specs[key].iceberg == NULL)
				continue;
			for (i = 0; i < ov->n; i++)
				if (strcmp(ov->keys[i], key_specs[key].iceberg) == 0)
				{
					tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
								  "Iceberg option \"%s\" is given twice",
								  key_specs[key].iceberg);
					tms_error_detail(err, "Both option \"%s\" and \"options\".\"%s\" set it.",
									 key_specs[key].name, ov->keys[i]);
					tms_error_hint(err, "Give it once.");
					goto done;
				}
		}
	}
	rc = 0;
done:
	eng_json_free(doc);
	return rc;
}

void
eng_options_free(EngOptions *o)
{
	int			k;
	size_t		i;

	for (k = 0; k < EK__COUNT; k++)
	{
		EngValue   *v = &o->v[k];

		io_free(v->s);
		for (i = 0; i < v->n && v->keys; i++)
		{
			io_free(v->keys[i]);
			io_free(v->vals[i]);
		}
		io_free(v->keys);
		io_free(v->vals);
		io_free(v->ints);
		if (v->res)
			eng_resources_free(v->res);
		io_free(v->res);
	}
	memset(o, 0, sizeof(*o));
}

int
engine_options_check(EngineType type, const char *operation, const char *options_json,
					 TmsError *err)
{
	EngOptions	o;
	int			rc;
	EngineOperation op = engine_op_from_name(operation);

	if (op == ENGINE_OP_UNKNOWN)
	{
		char		shown[160];

		eng_show(shown, sizeof(shown), operation ? operation : "", operation ? strlen(operation) : 0, 64);
		tms_error_set(err, ENGINE_ERR_UNKNOWN_OPERATION, "unknown operation \"%s\"", shown);
		tms_error_hint(err, "Operations: compaction, position-delete-rewrite, manifest-rewrite, "
					   "snapshot-expiry, orphan-cleanup.");
		return -1;
	}
	rc = eng_options_parse(type, op, options_json, &o, err);
	eng_options_free(&o);
	return rc;
}

long
eng_rewrite_pairs(const EngOptions *o, char ***keysp, char ***valsp)
{
	size_t		max = EK__COUNT + o->v[EK_OPTIONS].n;
	char	  **keys = io_calloc(max ? max : 1, sizeof(char *));
	char	  **vals = io_calloc(max ? max : 1, sizeof(char *));
	long		n = 0;
	int			k;
	size_t		i;

	if (keys == NULL || vals == NULL)
		goto oom;
	for (k = 0; k < EK__COUNT; k++)
	{
		const EngValue *v = &o->v[k];
		char		num[32];

		if (!v->present || key_specs[k].iceberg == NULL)
			continue;
		if (key_specs[k].kind == EOK_BOOL)
			snprintf(num, sizeof(num), "%s", v->b ? "true" : "false");
		else
			snprintf(num, sizeof(num), "%lld", (long long) v->i);
		keys[n] = io_strdup(key_specs[k].iceberg);
		vals[n] = io_strdup(num);
		n++;
		if (keys[n - 1] == NULL || vals[n - 1] == NULL)
			goto oom;
	}
	for (i = 0; i < o->v[EK_OPTIONS].n; i++)
	{
		keys[n] = io_strdup(o->v[EK_OPTIONS].keys[i]);
		vals[n] = io_strdup(o->v[EK_OPTIONS].vals[i]);
		n++;
		if (keys[n - 1] == NULL || vals[n - 1] == NULL)
			goto oom;
	}
	*keysp = keys;
	*valsp = vals;
	return n;
oom:
	eng_pairs_free(keys, vals, n);
	return -1;
}

void
eng_pairs_free(char **keys, char **vals, long n)
{
	long		i;

	for (i = 0; i < n; i++)
	{
		if (keys)
			io_free(keys[i]);
		if (vals)
			io_free(vals[i]);
	}
	io_free(keys);
	io_free(vals);
}

/* ---- renderings ---- */

bool
eng_format_utc(int64_t ms, char *out, size_t outsz)
{
	int64_t		days,
				secs;
	int64_t		z,
				era;
	unsigned	doe,
				yoe,
				doy,
				mp,
				d,
				m;
	int64_t		y;
	int			msr;

	if (ms < 0)
		return false;
	days = ms / 86400000;
	secs = (ms % 86400000) / 1000;
	msr = (int) (ms % 1000);
	z = days + 719468;
	era = z / 146097;
	doe = (unsigned) (z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = (int64_t) yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y += (m <= 2);
	if (y > 9999)
		return false;
	if (msr)
		snprintf(out, outsz, "%04lld-%02u-%02u %02d:%02d:%02d.%03d+00:00", (long long) y, m, d,
				 (int) (secs / 3600), (int) (secs / 60 % 60), (int) (secs % 60), msr);
	else
		snprintf(out, outsz, "%04lld-%02u-%02u %02d:%02d:%02d+00:00", (long long) y, m, d,
				 (int) (secs / 3600), (int) (secs / 60 % 60), (int) (secs % 60));
	return true;
}

void
eng_format_datasize(int64_t bytes, char *out, size_t outsz)
{
	static const char *const names[] = {"PB", "TB", "GB", "MB", "kB"};
	int			i;

	for (i = 0; i < 5; i++)
	{
		int64_t		unit = INT64_C(1) << (10 * (5 - i));

		if (bytes >= unit && bytes % unit == 0)
		{
			snprintf(out, outsz, "%lld%s", (long long) (bytes / unit), names[i]);
			return;
		}
	}
	snprintf(out, outsz, "%lldB", (long long) bytes);
}

void
eng_format_duration(int64_t ms, char *out, size_t outsz)
{
	static const struct
	{
		const char *name;
		int64_t		ms;
	}			units[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}
	};
	int			i;

	if (ms == 0)
	{
		snprintf(out, outsz, "0.00s");
		return;
	}
	for (i = 0; i < 5; i++)
	{
		int64_t		u = units[i].ms;

		/* two decimals, exact: 100 * ms divisible by the unit */
		if (ms >= u && ((unsigned __int128) ms * 100) % (unsigned __int128) u == 0)
		{
			int64_t		hundredths = (int64_t) (((unsigned __int128) ms * 100) / (unsigned __int128) u);

			snprintf(out, outsz, "%lld.%02lld%s", (long long) (hundredths / 100),
					 (long long) (hundredths % 100), units[i].name);
			return;
		}
	}
	snprintf(out, outsz, "%lld.00ms", (long long) ms);
}
