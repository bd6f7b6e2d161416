/*-------------------------------------------------------------------------
 *
 * dsl_sql.c
 *	  SQL functions over the policy condition language (src/dsl/):
 *	  tms.dsl_check(), tms.dsl_eval() and tms.dsl_explain().
 *
 * They are pure functions of their arguments and work without
 * shared_preload_libraries.  Metrics, properties and data files come in as
 * jsonb, read with PostgreSQL's jsonb API:
 *
 *	metrics		{"dataFiles": 80, "avgDataFileSize": 220200960.5, ...}
 *				keys are DSL variable names; unknown keys are ignored (so
 *				richer objects can be passed as they are); LONG variables
 *				take integers, avgDataFileSize any number; null = absent.
 *	properties	{"write.target-file-size-bytes": "536870912", ...}
 *				string values, as Iceberg stores them; numbers and booleans
 *				are taken by their JSON text; null = absent.
 *	files		[{"size": 1048576, "records": 10, "hasDeletes": false,
 *				  "hasPositionDeletes": false, "hasEqualityDeletes": false}]
 *				size and records are required when the condition reads
 *				them; absent booleans are false, except that an absent
 *				hasDeletes is hasPositionDeletes OR hasEqualityDeletes.
 *
 * A compile error raises ERRCODE_SYNTAX_ERROR or ERRCODE_DATATYPE_MISMATCH
 * (ERRCODE_STATEMENT_TOO_COMPLEX / ERRCODE_PROGRAM_LIMIT_EXCEEDED for the
 * limits) with the caret excerpt in DETAIL; a division by zero or an
 * overflow makes the condition false, as the language says.
 *
 * The compiled program lives in CurrentMemoryContext (the library is given
 * palloc-based allocation that returns NULL instead of raising), so an
 * error anywhere leaks nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "bridge/condition.h"
#include "dsl/dsl.h"

PG_FUNCTION_INFO_V1(tms_dsl_check);
PG_FUNCTION_INFO_V1(tms_dsl_eval);
PG_FUNCTION_INFO_V1(tms_dsl_explain);

/* ---------------------------------------------------------------------
 * Compiling
 * ---------------------------------------------------------------------
 */

/*
 * Compile a text condition; returns NULL with *err set when it does not
 * compile (the caller decides whether to raise).
 */
static DslProgram *
compile_text(text * t, DslError *err)
{
	return tms_condition_compile(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), err);
}

/* Compile a text condition or raise its compile error. */
static DslProgram *
compile_or_raise(text * t)
{
	return tms_condition_compile_or_raise(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/* ---------------------------------------------------------------------
 * jsonb inputs
 * ---------------------------------------------------------------------
 */

/*
 * An integer JSON number as int64, or false (not an integer, out of range).
 * "1.0" counts as an integer, "1.5" does not.
 */
static bool
jsonb_int64(const JsonbValue *v, int64 *out)
{
	char	   *s,
			   *end;
	long long	l;

	if (v->type != jbvNumeric)
		return false;
	s = numeric_normalize(v->val.numeric);
	errno = 0;
	l = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s)
		return false;
	*out = (int64) l;
	return true;
}

static const char *
jsonb_type_name(const JsonbValue *v)
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
		default:
			return "an array or object";
	}
}

/* Read the metrics object into m. */
static void
read_metrics(Jsonb *jb, DslMetrics *m)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			var = -1;

	memset(m, 0, sizeof(*m));
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metrics must be a jsonb object"),
				 errhint("Pass the table metrics keyed by variable name, for example '{\"dataFiles\": 80}'.")));
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			var = dsl_var_lookup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && var >= 0 && v.type != jbvNull)
		{
			const char *name = dsl_var_name(var);

			if (dsl_var_type(var) == DSL_DOUBLE)
			{
				double		d;

				if (v.type != jbvNumeric)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metric \"%s\" must be a number", name),
							 errdetail("The value is %s.", jsonb_type_name(&v))));
				d = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
													   NumericGetDatum(v.val.numeric)));
				dsl_metrics_set(m, var, 0, d);
			}
			else
			{
				int64		l;

				if (!jsonb_int64(&v, &l))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("metric \"%s\" must be an integer of type LONG", name),
							 v.type == jbvNumeric ?
							 errdetail("The value %s is not an integer in the range of a 64-bit integer.",
									   numeric_normalize(v.val.numeric)) :
							 errdetail("The value is %s.", jsonb_type_name(&v))));
				dsl_metrics_set(m, var, l, 0.0);
			}
		}
	}
}

/* Raise when the program reads a metric that m lacks. */
static void
check_metrics(const DslProgram *p, const DslMetrics *m)
{
	uint32		missing = dsl_program_variables(p) & ~m->present;

	for (int v = 0; v < DSL_VAR_COUNT; v++)
		if (missing & DSL_VAR_BIT(v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("metric \"%s\" is missing", dsl_var_name(v)),
					 errdetail("The condition reads \"%s\", but the metrics object has no value for it.",
							   dsl_var_name(v)),
					 errhint("Add it to the metrics argument, for example '{\"%s\": 0}'.",
							 dsl_var_name(v))));
}

typedef struct PropTable
{
	int			n;
	char	  **names;
	char	  **values;
} PropTable;

/* DslProperties.get: linear search (tables have few properties). */
static const char *
prop_get(void *arg, const char *name)
{
	PropTable  *t = arg;

	for (int i = 0; i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return t->values[i];
	return NULL;
}

/* Read the properties object (NULL: none). */
static void
read_properties(Jsonb *jb, PropTable *t)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	int			cap;

	t->n = 0;
	t->names = t->values = NULL;
	if (jb == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("properties must be a jsonb object"),
				 errhint("Pass the table properties as strings, for example '{\"write.target-file-size-bytes\": \"536870912\"}'.")));
	cap = Max(JB_ROOT_COUNT(jb), 1);
	t->names = palloc(sizeof(char *) * cap);
	t->values = palloc(sizeof(char *) * cap);
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *value;

		if (tok == WJB_KEY)
		{
			key = pnstrdup(v.val.string.val, v.val.string.len);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		switch (v.type)
		{
			case jbvNull:
				continue;
			case jbvString:
				value = pnstrdup(v.val.string.val, v.val.string.len);
				break;
			case jbvNumeric:
				value = numeric_normalize(v.val.numeric);
				break;
			case jbvBool:
				value = pstrdup(v.val.boolean ? "true" : "false");
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("property \"%s\" must be a string", key),
						 errdetail("The value is %s.", jsonb_type_name(&v))));
		}
		t->names[t->n] = key;
		t->values[t->n] = value;
		t->n++;
	}
}

typedef struct FileArray
{
	DslFile    *files;
	size_t		n;
	bool		done;
} FileArray;

/* DslFileSource.next: the whole array as one batch. */
static int
files_next(void *arg, const DslFile **files, size_t *nfiles)
{
	FileArray  *a = arg;

	if (a->done)
		return 0;
	a->done = true;
	*files = a->files;
	*nfiles = a->n;
	return 1;
}

/* Look up key in a file object; NULL if absent or null. */
static JsonbValue *
file_field(JsonbContainer *obj, const char *key, JsonbValue *buf)
{
	JsonbValue *v = getKeyJsonValueFromContainer(obj, key, strlen(key), buf);

	return v && v->type != jbvNull ? v : NULL;
}

/* A boolean field of file number i; absent -> *present = false. */
static bool
file_bool(JsonbContainer *obj, const char *key, size_t i, bool *present)
{
	JsonbValue	buf;
	JsonbValue *v = file_field(obj, key, &buf);

	*present = v != NULL;
	if (v == NULL)
		return false;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" of data file %zu must be a boolean", key, i + 1),
				 errdetail("The value is %s.", jsonb_type_name(v))));
	return v->val.boolean;
}

/* A LONG field of file number i; absent and needed -> error. */
static int64
file_long(JsonbContainer *obj, const char *key, size_t i, bool needed)
{
	JsonbValue	buf;
	JsonbValue *v = file_field(obj, key, &buf);
	int64		l;

	if (v == NULL)
	{
		if (needed)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("data file %zu has no \"%s\"", i + 1, key),
					 errdetail("The condition reads f.%s.", key)));
		return 0;
	}
	if (!jsonb_int64(v, &l))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" of data file %zu must be an integer", key, i + 1),
				 errdetail("The value is %s.", jsonb_type_name(v))));
	return l;
}

/* Read the files array. */
static void
read_files(Jsonb *jb, uint32 fields, FileArray *a)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	MemoryContext tmp,
				old;
	size_t		cap;

	a->n = 0;
	a->done = false;
	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("files must be a jsonb array"),
				 errhint("Pass one object per data file, for example '[{\"size\": 1048576, \"records\": 10}]'.")));
	cap = Max(JB_ROOT_COUNT(jb), 1);
	if (cap > MaxAllocSize / sizeof(DslFile))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many data files: %zu", cap)));
	a->files = palloc(sizeof(DslFile) * cap);
	tmp = AllocSetContextCreate(CurrentMemoryContext, "tms dsl files",
								ALLOCSET_SMALL_SIZES);
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbContainer *obj;
		DslFile    *f;
		bool		has_pos,
					has_eq,
					has_any;

		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("data file %zu must be a jsonb object", a->n + 1),
					 errdetail("The value is %s.", jsonb_type_name(&v))));
		obj = v.val.binary.data;
		f = &a->files[a->n];
		old = MemoryContextSwitchTo(tmp);
		f->size = file_long(obj, "size", a->n, fields & DSL_FIELD_BIT(DSL_FIELD_SIZE));
		f->records = file_long(obj, "records", a->n, fields & DSL_FIELD_BIT(DSL_FIELD_RECORDS));
		f->has_position_deletes = file_bool(obj, "hasPositionDeletes", a->n, &has_pos);
		f->has_equality_deletes = file_bool(obj, "hasEqualityDeletes", a->n, &has_eq);
		f->has_deletes = file_bool(obj, "hasDeletes", a->n, &has_any);
		if (!has_any)
			f->has_deletes = f->has_position_deletes || f->has_equality_deletes;
		MemoryContextSwitchTo(old);
		MemoryContextReset(tmp);
		a->n++;
	}
	MemoryContextDelete(tmp);
}

/*
 * Everything one evaluation needs, read from the function's arguments.
 * Returns false when expr or metrics is NULL (the function returns NULL).
 */
typedef struct EvalArgs
{
	DslProgram *p;
	DslMetrics	metrics;
	PropTable	props;
	DslProperties properties;
	FileArray	files;
	DslFileSource source;
	DslInput	input;
} EvalArgs;

static bool
read_eval_args(FunctionCallInfo fcinfo, EvalArgs *a)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		return false;
	a->p = compile_or_raise(PG_GETARG_TEXT_PP(0));
	read_metrics(PG_GETARG_JSONB_P(1), &a->metrics);
	check_metrics(a->p, &a->metrics);
	read_properties(PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), &a->props);
	a->properties.get = prop_get;
	a->properties.arg = &a->props;
	a->input.metrics = &a->metrics;
	a->input.properties = &a->properties;
	a->input.files = NULL;
	if (dsl_program_uses_files(a->p))
	{
		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the condition needs the list of data files"),
					 errdetail("It calls countDataFiles(), but the files argument is null."),
					 errhint("Pass a jsonb array with one object per data file, for example '[{\"size\": 1048576, \"records\": 10}]'.")));
		read_files(PG_GETARG_JSONB_P(3), dsl_program_fields(a->p), &a->files);
		a->source.next = files_next;
		a->source.arg = &a->files;
		a->input.files = &a->source;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * SQL functions
 * ---------------------------------------------------------------------
 */

/*
 * tms.dsl_check(expr text) -> (ok, type, needs, error, position, uses_files,
 * variables, hint).  Never raises for a compile error.
 */
Datum
tms_dsl_check(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8];
	DslError	err;
	DslProgram *p;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	memset(nulls, true, sizeof(nulls));

	p = compile_text(t, &err);
	if (p)
	{
		uint32		vars = dsl_program_variables(p);
		Datum		names[DSL_VAR_COUNT];
		int			n = 0;

		for (int v = 0; v < DSL_VAR_COUNT; v++)
			if (vars & DSL_VAR_BIT(v))
				names[n++] = CStringGetTextDatum(dsl_var_name(v));
		values[0] = BoolGetDatum(true);
		values[1] = CStringGetTextDatum(dsl_type_name(DSL_BOOLEAN));
		values[2] = CStringGetTextDatum(dsl_needs_name(dsl_program_needs(p)));
		values[5] = BoolGetDatum(dsl_program_uses_files(p));
		values[6] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false,
													TYPALIGN_INT));
		nulls[0] = nulls[1] = nulls[2] = nulls[5] = nulls[6] = false;
		dsl_free(p);
	}
	else
	{
		values[0] = BoolGetDatum(false);
		nulls[0] = false;
		if (err.has_type)
		{
			values[1] = CStringGetTextDatum(dsl_type_name(err.type));
			nulls[1] = false;
		}
		values[3] = CStringGetTextDatum(err.message);
		values[4] = Int32GetDatum(tms_condition_char_position(VARDATA_ANY(t),
															  VARSIZE_ANY_EXHDR(t), err.offset));
		nulls[3] = nulls[4] = false;
		if (err.hint[0])
		{
			values[7] = CStringGetTextDatum(err.hint);
			nulls[7] = false;
		}
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * tms.dsl_eval(expr, metrics, properties, files) -> boolean.  A division
 * by zero or an overflow makes the condition false.
 */
Datum
tms_dsl_eval(PG_FUNCTION_ARGS)
{
	EvalArgs	a;
	bool		result;

	if (!read_eval_args(fcinfo, &a))
		PG_RETURN_NULL();
	(void) dsl_eval(a.p, &a.input, &result);
	dsl_free(a.p);
	PG_RETURN_BOOL(result);
}

/*
 * tms.dsl_explain(expr, metrics, properties, files) -> jsonb:
 * {"result", "outcome", "text", "nodes": [...]}, nodes in pre-order with
 * "id" and "parent" (null for the whole condition).
 */
Datum
tms_dsl_explain(PG_FUNCTION_ARGS)
{
	EvalArgs	a;
	bool		result;
	DslOutcome	outcome;
	DslExplainNode *nodes;
	int32		n;
	StringInfoData b;
	size_t		len;
	char	   *text;

	if (!read_eval_args(fcinfo, &a))
		PG_RETURN_NULL();
	n = dsl_explain_count(a.p);
	nodes = palloc0(sizeof(DslExplainNode) * (n + 1));
	outcome = dsl_explain(a.p, &a.input, &result, nodes);
	len = dsl_explain_text(a.p, nodes, result, outcome, NULL, 0);
	text = palloc(len + 1);
	dsl_explain_text(a.p, nodes, result, outcome, text, len + 1);

	initStringInfo(&b);
	appendStringInfo(&b, "{\"result\": %s, \"outcome\": ", result ? "true" : "false");
	escape_json(&b, dsl_outcome_name(outcome));
	appendStringInfoString(&b, ", \"text\": ");
	escape_json(&b, text);
	appendStringInfo(&b, ", \"nodes\": %s}", tms_condition_explain_json(a.p, nodes, n));
	dsl_free(a.p);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(b.data)));
}
