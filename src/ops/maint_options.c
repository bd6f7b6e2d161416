/*-------------------------------------------------------------------------
 *
 * maint_options.c
 *	  The one check of maintenance operation names, engines and options:
 *	  tms.add_rule and tms.run_operation validate with it, and a worker
 *	  parses a job's options with it before running the job.
 *
 * Operations and engines:
 *	  every operation runs on "local" (tms itself; compaction and
 *	  position-delete-rewrite in its DuckDB helper process, refused with
 *	  0A000 when tms was built without libduckdb) or on an engine.  An
 *	  engine is
 *	  "local" or the name of a tms_engine server (bridge/engine_server.h), whose
 *	  type (livy, trino, gravitino) decides which operations it runs and
 *	  which options they take: src/engine/statement.c checks those, the
 *	  same code that later builds the statement.  The names "spark" and
 *	  "trino", when no server has them, are 0.2.0's handler engines: their
 *	  jobs go to tms.maintenance_handler and their options are not checked.
 *
 * Options of the local operations, hyphenated like Iceberg's action
 * options; an absent option takes the table property, then Iceberg's
 * default (the operation files say which):
 *	  snapshot-expiry  older-than (interval or timestamp), retain-last
 *					   (integer >= 1), max-ref-age-ms (integer >= 0),
 *					   snapshot-ids (array of integers),
 *					   clean-expired-files (boolean), batch-size
 *					   (integer 1 .. 1000; not the run's: its rule's
 *					   batches, tms._open_batch; a job of
 *					   tms.run_operation is one table and ignores it;
 *					   on any engine but local 0A000: an engine server's
 *					   run is one table's submission, followed and
 *					   recovered under that job's own tag)
 *	  orphan-cleanup   older-than (interval or timestamp; default 3 days;
 *					   less than 1 day ago needs "force": true), force,
 *					   location (a path), prefix-mismatch-mode ("error",
 *					   "ignore", "delete"), equal-schemes and
 *					   equal-authorities (objects of strings),
 *					   min-reclaimed-bytes (integer >= 0; not the run's:
 *					   its rule's adaptive cadence, 63_cadence.sql)
 *	  manifest-rewrite spec-id (integer >= 0), target-size-bytes
 *					   (integer >= 1024)
 *	  compaction	   target-file-size-bytes, min-file-size-bytes,
 *					   max-file-size-bytes, max-file-group-size-bytes (sizes:
 *					   bytes, or strings such as "128MB", "1GiB", binary
 *					   units), min-input-files (integer >= 1), rewrite-all
 *					   (boolean), delete-file-threshold (integer >= 0),
 *					   delete-ratio-threshold (number in (0, 1]),
 *					   remove-dangling-deletes (boolean), output-spec-id
 *					   (integer >= 0, a spec of the table),
 *					   partial-progress.enabled (boolean),
 *					   partial-progress.max-commits (integer >= 1),
 *					   partial-progress.max-failed-commits (integer >= 0),
 *					   max-concurrent-file-group-rewrites (integer >= 1),
 *					   where (a filter on partitions, its syntax checked
 *					   here and its names against the table when it is
 *					   loaded), strategy ("binpack", "sort"), sort-order
 *					   (Spark's syntax, "id DESC NULLS LAST, name" or
 *					   "zorder(a, b)"; implies sort; its syntax checked
 *					   here, its columns when the table is loaded);
 *					   Iceberg's names, meanings and defaults
 *					   (https://iceberg.apache.org/docs/latest/spark-procedures/#rewrite_data_files);
 *					   the sizes set must keep min < target < max
 *	  position-delete-rewrite  compaction's target-file-size-bytes,
 *					   min-file-size-bytes, max-file-size-bytes,
 *					   max-file-group-size-bytes, min-input-files,
 *					   rewrite-all, partial-progress.*,
 *					   max-concurrent-file-group-rewrites and where, with
 *					   the meanings of Iceberg's rewrite_position_delete_files
 *					   (https://iceberg.apache.org/docs/latest/spark-procedures/#rewrite_position_delete_files)
 *	  retention		   column and older-than (both required), unit (a long
 *					   or int epoch column's: s, ms, us, ns), or instead
 *					   of those three a where (row_filter.h's grammar,
 *					   parsed here, bound to the table when it is
 *					   loaded: tms.delete_rows's jobs), mode
 *					   (metadata, rewrite, delete-files: position
 *					   deletes; on a v3 table 0A000 when bound), scan
 *					   (true needs mode rewrite or delete-files); the
 *					   column and unit are checked when the table is
 *					   loaded.  On a livy or trino server retention is
 *					   one DELETE FROM ... WHERE (maint_on_engine.c):
 *					   the same options but mode and scan (0A000);
 *					   on gravitino and the handler engines 0A000
 * An unknown key or a value of the wrong type is SQLSTATE 22023 with the
 * key in DETAIL; nothing runs and no job is recorded.  On a gravitino
 * engine the check with options (tms.run_operation, tms.add_rule) also
 * reads the server's job templates and refuses (0A000) an operation whose
 * template it does not offer; a server that does not answer passes (the
 * worker reads the list again before it submits).
 *
 * A relative older-than (an interval) is kept as such and resolved
 * against the time the operation plans, so a rule's "7 days" means seven
 * days before each run.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "bridge/engine_server.h"
#include "bridge/errors.h"
#include "bridge/role.h"
#include "iceberg/compact/compact.h"
#include "iceberg/maint/retention.h"
#include "ops/compactor.h"
#include "ops/maint.h"
#include "ops/maint_int.h"

#define MS_PER_DAY INT64CONST(86400000)

static const char *const operations[] = {
	"snapshot-expiry", "orphan-cleanup", "manifest-rewrite", "compaction",
	"position-delete-rewrite", "retention"
};
static const char *const handler_engines[] = {"spark", "trino"};

/* the local operations the helper tms_compactor rewrites files for */
#define REWRITES_FILES(op) ((op) == MAINT_COMPACTION || (op) == MAINT_POSDELETE)

MaintOp
maint_op_from_name(const char *operation)
{
	for (int i = 0; i < (int) lengthof(operations); i++)
		if (strcmp(operation, operations[i]) == 0)
			return (MaintOp) i;
	return MAINT_OP_UNKNOWN;
}

const char *
maint_op_name(MaintOp op)
{
	return (int) op >= 0 && (int) op < (int) lengthof(operations) ? operations[op] : "unknown";
}

/*
 * Raise unless operation and engine name a pair tms can run; *type is the
 * engine server's type (ENGINE_TYPE_UNKNOWN for local and the handler
 * engines).
 */
static MaintOp
check_names(const char *operation, const char *engine, EngineType *type)
{
	MaintOp		op;
	bool		handler = false;

	*type = ENGINE_TYPE_UNKNOWN;
	if (operation == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a maintenance operation must not be null")));
	op = maint_op_from_name(operation);
	if (op == MAINT_OP_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown maintenance operation \"%s\"", operation),
				 errhint("Operations are compaction, position-delete-rewrite, manifest-rewrite, snapshot-expiry, orphan-cleanup and retention.")));
	if (engine == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a maintenance engine must not be null")));
	if (strcmp(engine, "local") == 0)
	{
		if (REWRITES_FILES(op) && tms_compactor_path() == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("engine \"local\" cannot run operation \"%s\"", operation),
					 errdetail("tms was built without libduckdb, so its compaction helper tms_compactor is not installed."),
					 errhint("Build tms with libduckdb (make install-deps fetches it; see README), or name a server of the tms_engine wrapper as the engine.")));
		return op;
	}
	*type = tms_engine_type(engine);
	if (*type == ENGINE_TYPE_UNKNOWN)
	{
		for (int i = 0; i < (int) lengthof(handler_engines); i++)
			handler |= strcmp(engine, handler_engines[i]) == 0;
		if (!handler)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("unknown maintenance engine \"%s\"", engine),
					 errdetail("An engine is \"local\" or the name of a server of the tms_engine wrapper."),
					 errhint("Create it with CREATE SERVER %s FOREIGN DATA WRAPPER tms_engine OPTIONS (type ..., uri ..., catalog ...).",
							 quote_identifier(engine))));
	}
	if (op == MAINT_RETENTION && *type == ENGINE_TYPE_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("engine \"%s\" cannot run operation \"retention\"", engine),
				 errdetail("\"%s\" is a handler engine of 0.2.0; tms hands retention only to tms_engine servers of type livy or trino (DELETE FROM ... WHERE).",
						   engine),
				 errhint("Use engine \"local\", or a tms_engine server of type livy or trino.")));
	if (op == MAINT_RETENTION && *type == ENGINE_TYPE_GRAVITINO)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("engine \"%s\" cannot run operation \"retention\"", engine),
				 errdetail("\"%s\" is a gravitino engine: Gravitino has no job template for DELETE FROM ... WHERE.",
						   engine),
				 errhint("Use a tms_engine server of type livy or trino, or engine \"local\".")));
	if (*type == ENGINE_TYPE_UNKNOWN)
		return op;				/* a handler engine of 0.2.0 */
	if (op == MAINT_RETENTION)
		return op;				/* livy, trino: DELETE FROM ... WHERE */
	if (!engine_supports(*type, engine_op_from_name(operation)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("engine \"%s\" cannot run operation \"%s\"", engine, operation),
				 errdetail("\"%s\" is a %s engine, which has no procedure for %s.",
						   engine, engine_type_name(*type), operation),
				 op != MAINT_COMPACTION && op != MAINT_POSDELETE ?
				 errhint("Engine \"local\" (tms itself) runs %s.", operation) :
				 errhint("Use an engine of type livy (Spark) for %s.", operation)));
	return op;
}

static void bad_option(const char *operation, const char *key, const char *fmt,...) pg_attribute_printf(3, 4) pg_attribute_noreturn();

static void
bad_option(const char *operation, const char *key, const char *fmt,...)
{
	char		detail[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid option \"%s\" of operation \"%s\"", key, operation),
			 errdetail("%s", detail)));
}

static const char *
jbv_type_name(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a JSON value";
	}
}

/* An integer option in [min, max]. */
static int64
opt_int(const char *operation, const char *key, const JsonbValue *v, int64 min, int64 max)
{
	char	   *s;
	char	   *end;
	int64		n;

	if (v->type != jbvNumeric)
		bad_option(operation, key, "The value is %s; it must be a whole number.", jbv_type_name(v));
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	n = strtoi64(s, &end, 10);
	if (*end != '\0' || errno != 0)
		bad_option(operation, key, "The value is %s; it must be a whole number.", s);
	if (n < min || n > max)
		bad_option(operation, key, "The value is %s; it must lie between " INT64_FORMAT " and " INT64_FORMAT ".",
				   s, min, max);
	return n;
}

static bool
opt_bool(const char *operation, const char *key, const JsonbValue *v)
{
	if (v->type != jbvBool)
		bad_option(operation, key, "The value is %s; it must be true or false.", jbv_type_name(v));
	return v->val.boolean;
}

static char *
opt_string(const char *operation, const char *key, const JsonbValue *v)
{
	if (v->type != jbvString)
		bad_option(operation, key, "The value is %s; it must be a string.", jbv_type_name(v));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * older-than: an interval ("7 days") or a timestamp ("2026-11-01 00:00Z").
 * A string that starts like a date (four digits and a dash) is a
 * timestamp; anything else is read as an interval.  Either input function
 * raises on bad input (22007 / 22008), with the option named in CONTEXT.
 */
typedef struct OptContext
{
	const char *operation;
	const char *key;
} OptContext;

static void
option_context(void *arg)
{
	OptContext *c = arg;

	errcontext("option \"%s\" of operation \"%s\"", c->key, c->operation);
}

static void
opt_time(const char *operation, const char *key, const JsonbValue *v, MaintTime *out)
{
	char	   *s = opt_string(operation, key, v);
	ErrorContextCallback cb;
	OptContext	oc = {operation, key};

	cb.callback = option_context;
	cb.arg = &oc;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	if (strlen(s) >= 5 && isdigit((unsigned char) s[0]) && isdigit((unsigned char) s[1]) &&
		isdigit((unsigned char) s[2]) && isdigit((unsigned char) s[3]) && s[4] == '-')
	{
		TimestampTz ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
																 CStringGetDatum(s),
																 ObjectIdGetDatum(InvalidOid),
																 Int32GetDatum(-1)));

		if (TIMESTAMP_NOT_FINITE(ts))
			bad_option(operation, key, "The value is \"%s\"; it must be a finite time.", s);
		out->absolute = true;
		out->at = ts;
	}
	else
	{
		Interval   *iv = DatumGetIntervalP(DirectFunctionCall3(interval_in,
															   CStringGetDatum(s),
															   ObjectIdGetDatum(InvalidOid),
															   Int32GetDatum(-1)));

		if (iv->month < 0 || iv->day < 0 || iv->time < 0)
			bad_option(operation, key, "The value is \"%s\"; an age must not be negative.", s);
		out->absolute = false;
		out->age = *iv;
	}
	out->set = true;
	out->text = s;
	error_context_stack = cb.previous;
}

/*
 * A size: a whole number of bytes, or a string of digits with a unit
 * (B, KB/KiB, MB/MiB, GB/GiB, TB/TiB: binary units, as the engines' options).
 */
static int64
opt_size(const char *operation, const char *key, const JsonbValue *v, int64 min)
{
	char	   *s;
	char	   *end;
	int64		n;
	int64		mult = 1;
	static const struct
	{
		const char *unit;
		int64		mult;
	}			units[] = {
		{"", 1}, {"B", 1}, {"KB", INT64CONST(1) << 10}, {"KiB", INT64CONST(1) << 10},
		{"MB", INT64CONST(1) << 20}, {"MiB", INT64CONST(1) << 20},
		{"GB", INT64CONST(1) << 30}, {"GiB", INT64CONST(1) << 30},
		{"TB", INT64CONST(1) << 40}, {"TiB", INT64CONST(1) << 40},
	};
	int			i;

	if (v->type == jbvNumeric)
		return opt_int(operation, key, v, min, PG_INT64_MAX);
	if (v->type != jbvString)
		bad_option(operation, key, "The value is %s; it must be a size in bytes, or a string such as \"128MB\".",
				   jbv_type_name(v));
	s = pnstrdup(v->val.string.val, v->val.string.len);
	errno = 0;
	n = strtoi64(s, &end, 10);
	if (end == s || errno != 0 || n < 0)
		bad_option(operation, key, "The value is \"%s\"; it must be a size such as \"128MB\".", s);
	while (*end == ' ')
		end++;
	for (i = 0; i < (int) lengthof(units); i++)
		if (pg_strcasecmp(end, units[i].unit) == 0)
			break;
	if (i == (int) lengthof(units))
		bad_option(operation, key, "The value is \"%s\"; units are B, KB, MB, GB and TB.", s);
	mult = units[i].mult;
	if (n > PG_INT64_MAX / mult || n * mult < min)
		bad_option(operation, key, "The value is \"%s\"; it must lie between " INT64_FORMAT " bytes and 8 EiB.",
				   s, min);
	return n * mult;
}

/* {"from": "to", ...} of strings */
static void
opt_string_map(const char *operation, const char *key, const JsonbValue *v,
			   int *n, char ***keys, char ***values)
{
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	val;
	JsonbIteratorToken tok;
	int			cap = 0;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		bad_option(operation, key, "The value is %s; it must be an object of strings, such as {\"s3a\": \"s3\"}.",
				   jbv_type_name(v));
	*n = 0;
	*keys = NULL;
	*values = NULL;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &val, true);
		if (val.type != jbvString || k.val.string.len == 0 || val.val.string.len == 0)
			bad_option(operation, key, "The entry \"%.*s\" is %s; entries must map a non-empty string to a non-empty string.",
					   k.val.string.len, k.val.string.val, jbv_type_name(&val));
		if (*n == cap)
		{
			cap = cap ? cap * 2 : 4;
			*keys = *keys ? repalloc(*keys, sizeof(char *) * cap) : palloc(sizeof(char *) * cap);
			*values = *values ? repalloc(*values, sizeof(char *) * cap) : palloc(sizeof(char *) * cap);
		}
		(*keys)[*n] = pnstrdup(k.val.string.val, k.val.string.len);
		(*values)[*n] = pnstrdup(val.val.string.val, val.val.string.len);
		(*n)++;
	}
}

static void
opt_id_array(const char *operation, const char *key, const JsonbValue *v,
			 int *n, int64 **ids)
{
	JsonbIterator *it;
	JsonbValue	item;
	JsonbIteratorToken tok;
	int			count;
	int			i = 0;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		bad_option(operation, key, "The value is %s; it must be an array of snapshot ids.",
				   jbv_type_name(v));
	count = JsonContainerSize(v->val.binary.data);
	*ids = palloc(sizeof(int64) * Max(count, 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &item, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (i >= count)
			break;
		(*ids)[i++] = opt_int(operation, key, &item, 1, PG_INT64_MAX);
	}
	*n = i;
}

/*
 * Parse and check options of a local operation into *out (palloc'd in the
 * current context).  Raises on anything wrong.
 */
static void
parse_local(MaintOp op, Jsonb *options, MaintOptions *out)
{
	const char *operation = maint_op_name(op);
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		binpack = false;

	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		(void) JsonbIteratorNext(&it, &v, true);
		if (op == MAINT_EXPIRE && strcmp(key, "older-than") == 0)
			opt_time(operation, key, &v, &out->older_than);
		else if (op == MAINT_EXPIRE && strcmp(key, "retain-last") == 0)
			out->retain_last = (int32) opt_int(operation, key, &v, 1, PG_INT32_MAX);
		else if (op == MAINT_EXPIRE && strcmp(key, "max-ref-age-ms") == 0)
			out->max_ref_age_ms = opt_int(operation, key, &v, 0, PG_INT64_MAX);
		else if (op == MAINT_EXPIRE && strcmp(key, "snapshot-ids") == 0)
			opt_id_array(operation, key, &v, &out->nsnapshot_ids, &out->snapshot_ids);
		else if (op == MAINT_EXPIRE && strcmp(key, "clean-expired-files") == 0)
			out->clean_expired_files = opt_bool(operation, key, &v);
		else if (op == MAINT_EXPIRE && strcmp(key, "batch-size") == 0)
			(void) opt_int(operation, key, &v, 1, MAINT_BATCH_MAX); /* read by
																	 * tms._open_batch */
		else if (op == MAINT_ORPHAN && strcmp(key, "older-than") == 0)
			opt_time(operation, key, &v, &out->older_than);
		else if (op == MAINT_ORPHAN && strcmp(key, "min-reclaimed-bytes") == 0)
			(void) opt_int(operation, key, &v, 0, PG_INT64_MAX);	/* read by tms._job_noop */
		else if (op == MAINT_ORPHAN && strcmp(key, "force") == 0)
			out->force = opt_bool(operation, key, &v);
		else if (op == MAINT_ORPHAN && strcmp(key, "location") == 0)
			out->location = opt_string(operation, key, &v);
		else if (op == MAINT_ORPHAN && strcmp(key, "prefix-mismatch-mode") == 0)
		{
			char	   *m = opt_string(operation, key, &v);

			if (strcmp(m, "error") == 0)
				out->prefix_mode = MAINT_PREFIX_ERROR;
			else if (strcmp(m, "ignore") == 0)
				out->prefix_mode = MAINT_PREFIX_IGNORE;
			else if (strcmp(m, "delete") == 0)
				out->prefix_mode = MAINT_PREFIX_DELETE;
			else
				bad_option(operation, key, "The value is \"%s\"; modes are error, ignore and delete.", m);
		}
		else if (op == MAINT_ORPHAN && strcmp(key, "equal-schemes") == 0)
			opt_string_map(operation, key, &v, &out->nequal_schemes,
						   &out->equal_scheme_from, &out->equal_scheme_to);
		else if (op == MAINT_ORPHAN && strcmp(key, "equal-authorities") == 0)
			opt_string_map(operation, key, &v, &out->nequal_authorities,
						   &out->equal_authority_from, &out->equal_authority_to);
		else if (op == MAINT_REWRITE && strcmp(key, "spec-id") == 0)
			out->spec_id = (int32) opt_int(operation, key, &v, 0, PG_INT32_MAX);
		else if (op == MAINT_REWRITE && strcmp(key, "target-size-bytes") == 0)
			out->target_size_bytes = opt_int(operation, key, &v, 1024, PG_INT64_MAX);
		else if (REWRITES_FILES(op) && strcmp(key, "target-file-size-bytes") == 0)
			out->target_file_size_bytes = opt_size(operation, key, &v, 1);
		else if (REWRITES_FILES(op) && strcmp(key, "min-file-size-bytes") == 0)
			out->min_file_size_bytes = opt_size(operation, key, &v, 0);
		else if (REWRITES_FILES(op) && strcmp(key, "max-file-size-bytes") == 0)
			out->max_file_size_bytes = opt_size(operation, key, &v, 1);
		else if (REWRITES_FILES(op) && strcmp(key, "max-file-group-size-bytes") == 0)
			out->max_file_group_size_bytes = opt_size(operation, key, &v, 1);
		else if (REWRITES_FILES(op) && strcmp(key, "min-input-files") == 0)
			out->min_input_files = (int32) opt_int(operation, key, &v, 1, PG_INT32_MAX);
		else if (REWRITES_FILES(op) && strcmp(key, "rewrite-all") == 0)
			out->rewrite_all = opt_bool(operation, key, &v);
		else if (op == MAINT_COMPACTION && strcmp(key, "delete-file-threshold") == 0)
			out->delete_file_threshold = (int32) opt_int(operation, key, &v, 0, PG_INT32_MAX);
		else if (op == MAINT_COMPACTION && strcmp(key, "delete-ratio-threshold") == 0)
		{
			char	   *t;

			if (v.type != jbvNumeric)
				bad_option(operation, key, "The value is %s; it must be a number in (0, 1].",
						   jbv_type_name(&v));
			t = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
			out->delete_ratio_threshold = strtod(t, NULL);
			if (!(out->delete_ratio_threshold > 0 && out->delete_ratio_threshold <= 1))
				bad_option(operation, key, "The value is %s; it must be a number in (0, 1].", t);
		}
		else if (op == MAINT_COMPACTION && strcmp(key, "output-spec-id") == 0)
			out->output_spec_id = (int32) opt_int(operation, key, &v, 0, PG_INT32_MAX);
		else if (op == MAINT_COMPACTION && strcmp(key, "remove-dangling-deletes") == 0)
			out->remove_dangling_deletes = opt_bool(operation, key, &v);
		else if (REWRITES_FILES(op) && strcmp(key, "partial-progress.enabled") == 0)
			out->partial_progress = opt_bool(operation, key, &v);
		else if (REWRITES_FILES(op) && strcmp(key, "partial-progress.max-commits") == 0)
			out->partial_progress_max_commits = (int32) opt_int(operation, key, &v, 1, PG_INT32_MAX);
		else if (REWRITES_FILES(op) && strcmp(key, "partial-progress.max-failed-commits") == 0)
			out->partial_progress_max_failed_commits = (int32) opt_int(operation, key, &v, 0, PG_INT32_MAX);
		else if (REWRITES_FILES(op) && strcmp(key, "max-concurrent-file-group-rewrites") == 0)
			out->max_concurrent_group_rewrites = (int32) opt_int(operation, key, &v, 1, PG_INT32_MAX);
		else if (REWRITES_FILES(op) && strcmp(key, "where") == 0)
		{
			IcebergPartitionFilter *f;
			TmsError	err;

			out->where = opt_string(operation, key, &v);
			if (!iceberg_partition_filter_parse(out->where, &f, &err))
				bad_option(operation, key, "The filter is \"%s\"; %s (%s).", out->where,
						   err.message, err.detail);
			iceberg_partition_filter_free(f);
		}
		else if (op == MAINT_COMPACTION && strcmp(key, "strategy") == 0)
		{
			char	   *st = opt_string(operation, key, &v);

			if (strcmp(st, "binpack") != 0 && strcmp(st, "sort") != 0)
				bad_option(operation, key, "The value is \"%s\"; strategies are binpack and sort (z-order is sort with sort-order \"zorder(a, b)\").", st);
			out->sort = strcmp(st, "sort") == 0;
			binpack = !out->sort;
		}
		else if (op == MAINT_COMPACTION && strcmp(key, "sort-order") == 0)
		{
			IcebergSortOrder *so;
			TmsError	err;

			out->sort_order = opt_string(operation, key, &v);
			if (!iceberg_sort_order_parse(out->sort_order, NULL, &so, &err))
				bad_option(operation, key, "%s: %s", err.message, err.detail);
			iceberg_sort_order_free(so);
		}
		else if (op == MAINT_RETENTION && strcmp(key, "column") == 0)
			out->retention_column = opt_string(operation, key, &v);
		else if (op == MAINT_RETENTION && strcmp(key, "older-than") == 0)
			opt_time(operation, key, &v, &out->older_than);
		else if (op == MAINT_RETENTION && strcmp(key, "unit") == 0)
		{
			IcebergEpochUnit u;

			out->retention_unit = opt_string(operation, key, &v);
			if (!iceberg_epoch_unit_parse(out->retention_unit, &u))
				bad_option(operation, key, "The value is \"%s\"; units of an epoch column are s, ms, us and ns.",
						   out->retention_unit);
		}
		else if (op == MAINT_RETENTION && strcmp(key, "mode") == 0)
		{
			char	   *m = opt_string(operation, key, &v);

			if (strcmp(m, "rewrite") == 0)
				out->retention_rewrite = true;
			else if (strcmp(m, "delete-files") == 0)
				out->retention_delete_files = true;
			else if (strcmp(m, "metadata") != 0)
				bad_option(operation, key, "The value is \"%s\"; modes are metadata, rewrite and delete-files.", m);
		}
		else if (op == MAINT_RETENTION && strcmp(key, "scan") == 0)
			out->retention_scan = opt_bool(operation, key, &v);
		else if (op == MAINT_RETENTION && strcmp(key, "where") == 0)
		{
			IcebergPartitionFilter *f;
			TmsError	err;

			/* its syntax here; its columns and literals with the table */
			out->retention_where = opt_string(operation, key, &v);
			if (!iceberg_partition_filter_parse(out->retention_where, &f, &err))
				bad_option(operation, key, "The filter is \"%s\"; %s (%s).",
						   out->retention_where, err.message, err.detail);
			iceberg_partition_filter_free(f);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\" of operation \"%s\"", key, operation),
					 errhint("%s",
							 op == MAINT_EXPIRE ?
							 "Options of snapshot-expiry are older-than, retain-last, max-ref-age-ms, snapshot-ids, clean-expired-files and batch-size." :
							 op == MAINT_ORPHAN ?
							 "Options of orphan-cleanup are older-than, force, location, prefix-mismatch-mode, equal-schemes, equal-authorities and min-reclaimed-bytes." :
							 op == MAINT_POSDELETE ?
							 "Options of position-delete-rewrite on engine local are target-file-size-bytes, min-file-size-bytes, max-file-size-bytes, min-input-files, max-file-group-size-bytes, rewrite-all, partial-progress.enabled, partial-progress.max-commits, partial-progress.max-failed-commits, max-concurrent-file-group-rewrites and where." :
							 op == MAINT_RETENTION ?
							 "Options of retention are column, older-than, unit, mode and scan, or where and mode; mode and scan on engine local only." :
							 op == MAINT_COMPACTION ?
							 "Options of compaction on engine local are target-file-size-bytes, min-file-size-bytes, max-file-size-bytes, min-input-files, max-file-group-size-bytes, rewrite-all, delete-file-threshold, delete-ratio-threshold, remove-dangling-deletes, output-spec-id, partial-progress.enabled, partial-progress.max-commits, partial-progress.max-failed-commits, max-concurrent-file-group-rewrites, where, strategy and sort-order." :
							 "Options of manifest-rewrite are spec-id and target-size-bytes.")));
	}
	/* as Spark's rewrite_data_files: a sort order means strategy sort */
	if (out->sort_order != NULL && binpack)
		bad_option(operation, "sort-order", "Strategy binpack takes no sort order; the sort order is \"%s\".",
				   out->sort_order);
	if (out->sort_order != NULL)
		out->sort = true;
}

/*
 * Iceberg's checks of the sizes given (SizeBasedFileRewritePlanner):
 * min-file-size-bytes < target-file-size-bytes < max-file-size-bytes among
 * those set; those left to the table are checked against it when the
 * table is loaded (maint_compact_check_table).
 */
static void
check_compaction_sizes(const MaintOptions *o)
{
	const char *operation = maint_op_name(o->op);
	int64		min = o->min_file_size_bytes;
	int64		max = o->max_file_size_bytes;
	int64		target = o->target_file_size_bytes;

	if (min >= 0 && max >= 0 && min >= max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"min-file-size-bytes\" of operation \"%s\"", operation),
				 errdetail("min-file-size-bytes is " INT64_FORMAT " and max-file-size-bytes " INT64_FORMAT "; the minimum must be below the maximum.",
						   min, max)));
	if (target > 0 && min >= 0 && target <= min)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"target-file-size-bytes\" of operation \"%s\"", operation),
				 errdetail("target-file-size-bytes is " INT64_FORMAT " and min-file-size-bytes " INT64_FORMAT "; the target must be above the minimum.",
						   target, min)));
	if (target > 0 && max >= 0 && target >= max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid option \"target-file-size-bytes\" of operation \"%s\"", operation),
				 errdetail("target-file-size-bytes is " INT64_FORMAT " and max-file-size-bytes " INT64_FORMAT "; the target must be below the maximum.",
						   target, max)));
}

/* retention needs its column and its cutoff, or a where alone */
static void
check_retention(const MaintOptions *o)
{
	if (o->retention_where != NULL)
	{
		if (o->retention_column != NULL || o->older_than.set || o->retention_unit != NULL ||
			o->retention_scan)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("retention option \"where\" takes no %s",
							o->retention_column != NULL ? "\"column\"" :
							o->older_than.set ? "\"older-than\"" :
							o->retention_unit != NULL ? "\"unit\"" : "\"scan\""),
					 errdetail("The where is \"%s\"; it says alone which rows are removed.",
							   o->retention_where),
					 errhint("Give either a where or a column with older-than.")));
		return;
	}
	if (o->retention_column == NULL || o->retention_column[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("operation \"retention\" needs option \"column\""),
				 errdetail("The options give %s; \"column\" names the timestamp, date or long epoch column a row's age is read from.",
						   o->retention_column == NULL ? "no column" : "an empty column name"),
				 errhint("For example {\"column\": \"event_ts\", \"older-than\": \"90 days\"}.")));
	if (!o->older_than.set)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("operation \"retention\" needs option \"older-than\""),
				 errdetail("The column is \"%s\"; \"older-than\" is the cutoff: an age (\"90 days\") or a point in time (\"2026-01-01 00:00Z\").",
						   o->retention_column),
				 errhint("For example {\"column\": \"%s\", \"older-than\": \"90 days\"}.",
						 o->retention_column)));
	if (o->retention_scan && !o->retention_rewrite && !o->retention_delete_files)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retention option \"scan\" needs mode \"rewrite\" or \"delete-files\""),
				 errdetail("The options give \"scan\": true and mode \"metadata\", which reads no data file."),
				 errhint("Add \"mode\": \"rewrite\" (or \"delete-files\"): the files without bounds on the column are then read and their older rows removed.")));
}

/*
 * Retention on a livy or trino server is one DELETE FROM ... WHERE: the
 * options that say how tms itself removes rows (mode, scan) have no
 * meaning there and are refused before anything runs.
 */
static void
check_retention_on_engine(const char *engine, Jsonb *options)
{
	static const char *const local_only[] = {"mode", "scan"};

	for (int i = 0; i < (int) lengthof(local_only); i++)
		if (getKeyJsonValueFromContainer(&options->root, local_only[i],
										 strlen(local_only[i]), NULL) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("retention option \"%s\" is supported only on engine local",
							local_only[i]),
					 errdetail("The engine is \"%s\", which runs retention as one DELETE FROM ... WHERE; the engine decides how the rows go.",
							   engine),
					 errhint("Leave out \"%s\", or use engine \"local\".", local_only[i])));
}

void
maint_options_parse(const char *operation, const char *engine, Jsonb *options,
					MaintOptions *out)
{
	memset(out, 0, sizeof(*out));
	out->op = check_names(operation, engine, &out->engine_type);
	out->local = strcmp(engine, "local") == 0;
	out->retain_last = -1;
	out->max_ref_age_ms = -1;
	out->clean_expired_files = true;
	out->prefix_mode = MAINT_PREFIX_ERROR;
	out->spec_id = -1;
	out->target_size_bytes = -1;
	out->target_file_size_bytes = -1;
	out->min_file_size_bytes = -1;
	out->max_file_size_bytes = -1;
	out->min_input_files = -1;
	out->max_file_group_size_bytes = -1;
	out->delete_file_threshold = -1;
	out->delete_ratio_threshold = -1;
	out->output_spec_id = -1;
	out->partial_progress_max_commits = 10;
	out->partial_progress_max_failed_commits = -1;
	out->max_concurrent_group_rewrites = 5;
	if (options == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid options of operation \"%s\"", operation),
				 errdetail("Options must be a JSON object such as {\"retain-last\": 5}.")));
	if (out->op == MAINT_RETENTION && !out->local)
	{
		/* tms's options, checked as locally; the DELETE is built at the run */
		check_retention_on_engine(engine, options);
		parse_local(out->op, options, out);
		check_retention(out);
		out->options_json = JsonbToCString(NULL, &options->root, VARSIZE(options));
		return;
	}
	if (out->local)
	{
		parse_local(out->op, options, out);
		if (REWRITES_FILES(out->op))
			check_compaction_sizes(out);
		if (out->op == MAINT_RETENTION)
			check_retention(out);
	}
	else if (out->op == MAINT_EXPIRE &&
			 getKeyJsonValueFromContainer(&options->root, "batch-size", strlen("batch-size"),
										  NULL) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"batch-size\" of operation \"%s\" is supported only on engine local",
						operation),
				 errdetail("The engine is \"%s\".", engine),
				 errhint("A job on an engine is one table's submission, followed and recovered under its own tag; leave out \"batch-size\", or use engine local.")));
	else if (out->engine_type != ENGINE_TYPE_UNKNOWN)
	{
		/* the engine layer's check, the one its statement builder applies */
		TmsError	err;
		char	   *json = JsonbToCString(NULL, &options->root, VARSIZE(options));

		if (engine_options_check(out->engine_type, operation, json, &err) != 0)
			tms_error_ereport(&err);
		out->options_json = json;
		return;
	}

	/* Iceberg refuses orphan cleanup of files younger than a day */
	if (out->op == MAINT_ORPHAN && out->older_than.set && !out->force)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (maint_time_resolve(&out->older_than, now) > now - USECS_PER_DAY)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("orphan-cleanup refuses files younger than one day"),
					 errdetail("older-than is \"%s\".", out->older_than.text),
					 errhint("Files that young may belong to a write in progress; give \"force\": true to delete them anyway.")));
	}
}

TimestampTz
maint_time_resolve(const MaintTime *t, TimestampTz now)
{
	if (t->absolute)
		return t->at;
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_mi_interval,
												   TimestampTzGetDatum(now),
												   PointerGetDatum(&t->age)));
}

int64
maint_timestamp_to_ms(TimestampTz t)
{
	/* PostgreSQL epoch 2000-01-01 to Unix epoch milliseconds */
	return t / 1000 + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * MS_PER_DAY;
}

TimestampTz
maint_ms_to_timestamp(int64 ms)
{
	return (ms - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * MS_PER_DAY) * 1000;
}

/*
 * A Gravitino server runs only the job templates it offers (its release
 * decides which built-in ones): read its list as the acting role and
 * refuse (0A000) an operation whose template it lacks, before anything is
 * recorded.  A server that does not answer now is not a refusal: the
 * worker reads the list again before it submits.
 */
static void
check_gravitino_template(const char *operation, const char *engine)
{
	TmsRoleSave save;
	TmsEngine  *volatile e = NULL;

	tms_become_role(tms_acting_role(), "the check of a gravitino engine", &save);
	PG_TRY();
	{
		char	   *offered = NULL;
		TmsError	err;

		e = tms_engine_open(engine);
		if (tms_engine_template_check(e, operation, &offered, &err) == TMS_TEMPLATE_MISSING)
			tms_engine_template_refuse(e, operation, offered);
		/* an interrupted request is the interrupt's error, not a pass */
		CHECK_FOR_INTERRUPTS();
	}
	PG_FINALLY();
	{
		tms_engine_close(e);
		tms_restore_role(&save);
	}
	PG_END_TRY();
}

/*
 * tms._check_operation(operation, engine, options): raise unless valid
 * (options NULL: the names only).
 */
void
tms_operation_check(const char *operation, const char *engine, Jsonb *options)
{
	MaintOptions o;

	maint_options_parse(operation, engine, options, &o);
	if (o.engine_type != ENGINE_TYPE_UNKNOWN)
		tms_engine_check_access(engine, tms_acting_role());
	if (o.engine_type == ENGINE_TYPE_GRAVITINO && options != NULL)
		check_gravitino_template(operation, engine);
}
