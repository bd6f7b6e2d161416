/*-------------------------------------------------------------------------
 *
 * engine_resources.c
 *	  The "engine-resources" option of livy and gravitino runs: the Spark
 *	  resources a run asks for, checked once here for both engines, and
 *	  their rendering into Livy's session request and Gravitino's jobConf.
 *
 * The object uses the names of Livy's session request (POST /sessions,
 * https://livy.apache.org/docs/latest/rest-api.html):
 *
 *	driverMemory, executorMemory	Spark memory strings: "<n><unit>", unit
 *									k, m, g, t (kb, mb, gb, tb; any case),
 *									from 450m (Spark refuses less: 1.5 x its
 *									300 MiB of reserved memory) to
 *									2147483647m (Spark reads them as MiB in
 *									an int); sent as "<n><k|m|g|t>"
 *	driverCores, executorCores,		whole numbers from 1 to 2147483647
 *	numExecutors					(Livy's int fields)
 *	conf							an object of Spark properties "spark.*"
 *									to strings, numbers or booleans
 *
 * Livy takes them as members of the session request.  Gravitino's built-in
 * Iceberg jobs take spark_driver_memory, spark_executor_memory,
 * spark_executor_cores, spark_executor_instances and spark_conf (a JSON
 * object text) in their jobConf; they have no driver cores, and they refuse
 * spark.sql.catalog.*, spark.sql.extensions and spark.app.name in
 * spark_conf (the template sets them), so those are refused here before
 * anything is recorded.
 *
 * Rules: a property the dedicated fields set (spark.driver.memory, ...) is
 * given through its field only; a credential-shaped property name or a
 * value holding a credential (io/util/secret_names.h, the one rule of tms)
 * is refused and never shown; at most ENG_MAX_CONF properties.
 *
 * Plain C, no PostgreSQL header.
 *
 * src/engine/engine_resources.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine/statement_int.h"
#include "io/util/secret_names.h"

#define ENG_MAX_CONF 256
#define KEY "engine-resources"
#define MIN_MEMORY_MIB ((int64_t) 450)
#define MAX_MEMORY_MIB ((int64_t) 2147483647)

static const char *const resource_names = "driverMemory, driverCores, executorMemory, "
"executorCores, numExecutors, conf";

/* Spark properties the dedicated fields set, and the field of each. */
static const char *const dedicated[][2] = {
	{"spark.driver.memory", "driverMemory"},
	{"spark.driver.cores", "driverCores"},
	{"spark.executor.memory", "executorMemory"},
	{"spark.executor.cores", "executorCores"},
	{"spark.executor.instances", "numExecutors"},
};

/* What Gravitino's built-in jobs refuse in spark_conf (prefixes). */
static const char *const gravitino_managed[] = {"spark.sql.catalog.", "spark.sql.extensions",
"spark.app.name"};

static int
oom(TmsError *err)
{
	return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
}

/* "invalid value for option engine-resources", the detail naming the field. */
static int
bad(TmsError *err, const char *field, const EngJson *v, const char *must)
{
	char		shown[200];
	char		t[160];

	if (v->kind == EJ_STRING || v->kind == EJ_NUMBER)
	{
		eng_show(t, sizeof(t), v->str, v->len, 64);
		snprintf(shown, sizeof(shown), v->kind == EJ_STRING ? "\"%s\"" : "%s", t);
	}
	else
		snprintf(shown, sizeof(shown), "%s", eng_json_kind_name(v->kind));
	tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "invalid value for option \"%s\"", KEY);
	tms_error_detail(err, "\"%s\".\"%s\" %s, not %s.", KEY, field, must, shown);
	return -1;
}

/* A Spark memory string into its canonical form ("4g"); 0 or -1. */
static int
get_memory(const char *field, const EngJson *v, char **out, TmsError *err)
{
	const char *p;
	const char *unit;
	size_t		ndig;
	int64_t		n = 0;
	int64_t		mult;
	char		buf[40];

	if (v->kind != EJ_STRING)
		goto refuse;
	p = v->str;
	while (*p == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	ndig = strspn(p, "0123456789");
	if (ndig == 0 || ndig > 10)
		goto refuse;
	unit = p + ndig;
	if (strcasecmp(unit, "k") == 0 || strcasecmp(unit, "kb") == 0)
		mult = -1024;			/* KiB per MiB: divide */
	else if (strcasecmp(unit, "m") == 0 || strcasecmp(unit, "mb") == 0)
		mult = 1;
	else if (strcasecmp(unit, "g") == 0 || strcasecmp(unit, "gb") == 0)
		mult = 1024;
	else if (strcasecmp(unit, "t") == 0 || strcasecmp(unit, "tb") == 0)
		mult = 1024 * 1024;
	else
		goto refuse;
	for (size_t i = 0; i < ndig; i++)
		n = n * 10 + (p[i] - '0');
	/* in MiB, rounded down for k: what Spark's memoryStringToMb reads */
	if (mult < 0)
		n /= -mult;
	else if (n > MAX_MEMORY_MIB / mult)
		goto refuse;
	else
		n *= mult;
	if (n < MIN_MEMORY_MIB || n > MAX_MEMORY_MIB)
		goto refuse;
	snprintf(buf, sizeof(buf), "%.*s%c", (int) ndig, p, (char) (unit[0] | 0x20));
	*out = io_strdup(buf);
	return *out ? 0 : oom(err);
refuse:
	return bad(err, field, v, "must be a Spark memory string such as \"512m\" or \"4g\" "
			   "(units k, m, g, t), from 450m to 2147483647m");
}

static int
get_count(const char *field, const EngJson *v, int64_t *out, TmsError *err)
{
	int			r = 0;

	if ((v->kind == EJ_NUMBER && v->integer) || v->kind == EJ_STRING)
		r = eng_parse_int64(v->str, v->len, out);
	if (r == 1 && *out >= 1 && *out <= 2147483647)
		return 0;
	return bad(err, field, v, "must be a whole number from 1 to 2147483647");
}

static bool
push_conf(EngResources *r, const char *k, const char *val)
{
	char	  **keys = io_realloc(r->conf_keys, (r->nconf + 1) * sizeof(char *));
	char	  **vals;

	if (keys == NULL)
		return false;
	r->conf_keys = keys;
	vals = io_realloc(r->conf_vals, (r->nconf + 1) * sizeof(char *));
	if (vals == NULL)
		return false;
	r->conf_vals = vals;
	keys[r->nconf] = io_strdup(k);
	vals[r->nconf] = io_strdup(val);
	if (keys[r->nconf] == NULL || vals[r->nconf] == NULL)
	{
		io_free(keys[r->nconf]);
		io_free(vals[r->nconf]);
		return false;
	}
	r->nconf++;
	return true;
}

/* One Spark property of "conf"; 0 or -1. */
static int
get_property(EngineType type, const char *k, const EngJson *item, EngResources *r,
			 TmsError *err)
{
	char		shown[160];
	const char *val;
	size_t		i;

	eng_show(shown, sizeof(shown), k, strlen(k), 64);
	if (io_secret_key(k, strlen(k)) ||
		(item->kind == EJ_STRING && io_secret_value(item->str, item->len)))
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
					  "option \"%s\" must not hold credentials", KEY);
		if (io_secret_key(k, strlen(k)))
			tms_error_detail(err, "Spark property \"%s\" in \"%s\".\"conf\" is "
							 "credential-shaped.", shown, KEY);
		else
			tms_error_detail(err, "The value of Spark property \"%s\" in \"%s\".\"conf\" "
							 "holds a credential.", shown, KEY);
		tms_error_hint(err, "Give credentials to the engine's own configuration, or to "
					   "the user mapping of the engine server; rule options are readable.");
		return -1;
	}
	if (strncmp(k, "spark.", 6) != 0 || k[6] == '\0')
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "invalid Spark property in option \"%s\"",
					  KEY);
		tms_error_detail(err, "\"%s\".\"conf\" names \"%s\", which is not a Spark property.",
						 KEY, shown);
		tms_error_hint(err, "Spark properties start with \"spark.\".");
		return -1;
	}
	for (i = 0; i < sizeof(dedicated) / sizeof(dedicated[0]); i++)
		if (strcmp(k, dedicated[i][0]) == 0)
		{
			tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
						  "Spark property \"%s\" cannot be set through \"%s\".\"conf\"",
						  shown, KEY);
			tms_error_detail(err, "\"%s\" is what \"%s\".\"%s\" sets.", shown, KEY,
							 dedicated[i][1]);
			tms_error_hint(err, "Give it as \"%s\".", dedicated[i][1]);
			return -1;
		}
	if (type == ENGINE_TYPE_GRAVITINO)
		for (i = 0; i < sizeof(gravitino_managed) / sizeof(gravitino_managed[0]); i++)
			if (strncmp(k, gravitino_managed[i], strlen(gravitino_managed[i])) == 0)
			{
				tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
							  "Spark property \"%s\" cannot be passed to a Gravitino job",
							  shown);
				tms_error_detail(err, "Gravitino's built-in jobs set %s* themselves and "
								 "refuse it in spark_conf.", gravitino_managed[i]);
				tms_error_hint(err, "Configure it in the job template or the engine.");
				return -1;
			}
	if (type == ENGINE_TYPE_GRAVITINO && item->kind == EJ_STRING &&
		strstr(item->str, "{{") != NULL)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE,
					  "Spark property \"%s\" cannot be passed to a Gravitino job", shown);
		tms_error_detail(err, "Its value holds \"{{\", which Gravitino reads as a "
						 "template placeholder.");
		return -1;
	}
	if (item->kind == EJ_STRING && item->len > 0)
		val = item->str;
	else if (item->kind == EJ_NUMBER)
		val = item->str;
	else if (item->kind == EJ_TRUE || item->kind == EJ_FALSE)
		val = item->kind == EJ_TRUE ? "true" : "false";
	else
	{
		char		field[200];

		snprintf(field, sizeof(field), "conf\".\"%s", shown);
		return bad(err, field, item, "must be a non-empty string, a number or a boolean");
	}
	return push_conf(r, k, val) ? 0 : oom(err);
}

int
eng_resources_parse(EngineType type, const EngJson *v, EngResources *out, TmsError *err)
{
	size_t		i;

	memset(out, 0, sizeof(*out));
	if (v->kind != EJ_OBJECT)
		return bad(err, "(top level)", v, "must be an object such as "
				   "{\"executorMemory\": \"4g\", \"numExecutors\": 8}");
	for (i = 0; i < v->nitems; i++)
	{
		const char *k = v->keys[i];
		const EngJson *item = v->items[i];
		int			rc;

		if (item->kind == EJ_NULL)
			continue;
		if (strcmp(k, "driverMemory") == 0)
			rc = get_memory(k, item, &out->driver_memory, err);
		else if (strcmp(k, "executorMemory") == 0)
			rc = get_memory(k, item, &out->executor_memory, err);
		else if (strcmp(k, "driverCores") == 0 && type != ENGINE_TYPE_GRAVITINO)
			rc = get_count(k, item, &out->driver_cores, err);
		else if (strcmp(k, "executorCores") == 0)
			rc = get_count(k, item, &out->executor_cores, err);
		else if (strcmp(k, "numExecutors") == 0)
			rc = get_count(k, item, &out->num_executors, err);
		else if (strcmp(k, "conf") == 0)
		{
			if (item->kind != EJ_OBJECT)
				return bad(err, k, item, "must be an object of Spark properties");
			if (item->nitems > ENG_MAX_CONF)
			{
				tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "too many Spark properties in option \"%s\"", KEY);
				tms_error_detail(err, "\"%s\".\"conf\" has %zu, at most %d are allowed.",
								 KEY, item->nitems, ENG_MAX_CONF);
				return -1;
			}
			rc = 0;
			for (size_t j = 0; j < item->nitems && rc == 0; j++)
				if (item->items[j]->kind != EJ_NULL)
					rc = get_property(type, item->keys[j], item->items[j], out, err);
		}
		else
		{
			char		shown[160];

			eng_show(shown, sizeof(shown), k, strlen(k), 64);
			tms_error_set(err, ENGINE_ERR_UNKNOWN_OPTION, "unknown field \"%s\" in option \"%s\"",
						  shown, KEY);
			if (strcmp(k, "driverCores") == 0)
			{
				tms_error_detail(err, "Gravitino's built-in jobs take no driver cores.");
				tms_error_hint(err, "Allowed for gravitino: driverMemory, executorMemory, "
							   "executorCores, numExecutors, conf.");
			}
			else
				tms_error_hint(err, "Allowed: %s.", resource_names);
			return -1;
		}
		if (rc != 0)
			return -1;
	}
	return 0;
}

void
eng_resources_free(EngResources *r)
{
	for (size_t i = 0; i < r->nconf; i++)
	{
		io_free(r->conf_keys[i]);
		io_free(r->conf_vals[i]);
	}
	io_free(r->conf_keys);
	io_free(r->conf_vals);
	io_free(r->driver_memory);
	io_free(r->executor_memory);
	memset(r, 0, sizeof(*r));
}

/* The conf as a JSON object text, or NULL when out of memory. */
static char *
conf_json(const EngResources *r)
{
	IoStrBuf	b;

	io_sb_init(&b);
	io_sb_putc(&b, '{');
	for (size_t i = 0; i < r->nconf; i++)
	{
		if (i > 0)
			io_sb_putc(&b, ',');
		eng_json_string(&b, r->conf_keys[i]);
		io_sb_putc(&b, ':');
		eng_json_string(&b, r->conf_vals[i]);
	}
	io_sb_putc(&b, '}');
	return io_sb_steal(&b);
}

static bool
add_property(EngineStatement *st, const char *name, char *value)
{
	EngineProperty *p;

	if (value == NULL)
		return false;
	p = io_realloc(st->session, (st->nsession + 1) * sizeof(EngineProperty));
	if (p == NULL || (p[st->nsession].name = io_strdup(name)) == NULL)
	{
		if (p)
			st->session = p;
		io_free(value);
		return false;
	}
	st->session = p;
	p[st->nsession].value = value;
	st->nsession++;
	return true;
}

static char *
json_text(const char *s)
{
	IoStrBuf	b;

	io_sb_init(&b);
	eng_json_string(&b, s);
	return io_sb_steal(&b);
}

static char *
int_text(int64_t n)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%lld", (long long) n);
	return io_strdup(buf);
}

int
eng_resources_livy(const EngResources *r, EngineStatement *st)
{
	if ((r->driver_memory && !add_property(st, "driverMemory", json_text(r->driver_memory))) ||
		(r->driver_cores && !add_property(st, "driverCores", int_text(r->driver_cores))) ||
		(r->executor_memory &&
		 !add_property(st, "executorMemory", json_text(r->executor_memory))) ||
		(r->executor_cores && !add_property(st, "executorCores", int_text(r->executor_cores))) ||
		(r->num_executors && !add_property(st, "numExecutors", int_text(r->num_executors))) ||
		(r->nconf > 0 && !add_property(st, "conf", conf_json(r))))
		return -1;
	return 0;
}

static void
conf_entry(IoStrBuf *b, const char *key, const char *val)
{
	io_sb_putc(b, ',');
	eng_json_string(b, key);
	io_sb_putc(b, ':');
	eng_json_string(b, val);
}

int
eng_resources_gravitino(const EngResources *r, IoStrBuf *b)
{
	char		buf[32];

	if (r->driver_memory)
		conf_entry(b, "spark_driver_memory", r->driver_memory);
	if (r->executor_memory)
		conf_entry(b, "spark_executor_memory", r->executor_memory);
	if (r->executor_cores)
	{
		snprintf(buf, sizeof(buf), "%lld", (long long) r->executor_cores);
		conf_entry(b, "spark_executor_cores", buf);
	}
	if (r->num_executors)
	{
		snprintf(buf, sizeof(buf), "%lld", (long long) r->num_executors);
		conf_entry(b, "spark_executor_instances", buf);
	}
	if (r->nconf > 0)
	{
		char	   *c = conf_json(r);

		if (c == NULL)
			return -1;
		conf_entry(b, "spark_conf", c);
		io_free(c);
	}
	return 0;
}
