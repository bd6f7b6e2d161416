/*-------------------------------------------------------------------------
 *
 * statement.c
 *	  The statements of statement.h: for each engine and operation, the
 *	  checked options (engine_options.c) turned into the SQL or JSON an engine
 *	  runs, every name and value escaped for it (quote.c); and a
 *	  procedure's result rows read back as EngineCounts.
 *
 * What each engine gets (doc/engines.md has one example of each):
 *	livy		CALL `cat`.system.<proc>(table => '`ns`.`t`', arg => ...):
 *				named arguments only, only those the user gave; the table
 *				is a Spark string literal holding a multipart identifier.
 *	trino		ALTER TABLE "cat"."ns"."t" EXECUTE <proc>[(arg => ...)]
 *				[WHERE expr]; a target file size is a session property.
 *	gravitino	{"jobTemplateName": "builtin-iceberg-...", "jobConf":
 *				{...}}: every jobConf value a string, "tms_tag" always.
 *				Gravitino's built-in jobs paste jobConf values into Spark
 *				SQL themselves (a catalog bare, other values inside '...'
 *				with '' doubled), so this layer refuses what that pasting
 *				would mangle or let escape: a catalog that is not a plain
 *				identifier, a quote or backslash in any other value, and
 *				"{{" anywhere.
 *
 * "engine-resources" (engine_resources.c) become, for livy, members of
 * the session request (session properties of the statement, their values
 * JSON text: driverMemory, numExecutors, conf, ...), for gravitino the
 * spark_* keys of jobConf (spark_executor_memory, spark_conf, ...).
 *
 * Plain C, no PostgreSQL header; errors are values.
 *
 * src/engine/statement.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/statement_int.h"

static const char *const type_names[] = {"livy", "trino", "gravitino"};
static const char *const op_names[] = {"compaction", "position-delete-rewrite",
"manifest-rewrite", "snapshot-expiry", "orphan-cleanup"};

EngineType
engine_type_from_name(const char *name)
{
	int			i;

	for (i = 0; name && i < 3; i++)
		if (strcmp(name, type_names[i]) == 0)
			return (EngineType) i;
	return ENGINE_TYPE_UNKNOWN;
}

const char *
engine_type_name(EngineType type)
{
	if (type < ENGINE_TYPE_LIVY || type > ENGINE_TYPE_GRAVITINO)
		return NULL;
	return type_names[type];
}

EngineOperation
engine_op_from_name(const char *name)
{
	int			i;

	for (i = 0; name && i < 5; i++)
		if (strcmp(name, op_names[i]) == 0)
			return (EngineOperation) i;
	return ENGINE_OP_UNKNOWN;
}

const char *
engine_op_name(EngineOperation op)
{
	if (op < ENGINE_OP_COMPACTION || op > ENGINE_OP_ORPHAN_CLEANUP)
		return NULL;
	return op_names[op];
}

/* ---- names ---- */

static int
check_name(const char *what, const char *name, TmsError *err)
{
	size_t		len;

	if (name == NULL || name[0] == '\0')
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the %s name is empty", what);
	len = strlen(name);
	if (len > ENG_MAX_NAME_BYTES)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the %s name is too long", what);
		tms_error_detail(err, "It takes %zu bytes, at most %d are allowed.", len, ENG_MAX_NAME_BYTES);
		return -1;
	}
	if (!eng_utf8_valid(name, len))
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the %s name is not valid UTF-8", what);
	return 0;
}

int
eng_check_target(EngineType type, const EngineTarget *t, TmsError *err)
{
	size_t		i;

	if (t == NULL)
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "no table given");
	if (check_name("catalog", t->catalog, err) != 0)
		return -1;
	if (t->nns == 0 || t->ns == NULL)
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the table has no namespace");
	if (type == ENGINE_TYPE_TRINO && t->nns != 1)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_NAME,
					  "trino cannot name a table in a namespace of %zu levels", t->nns);
		tms_error_detail(err, "A Trino schema is one level; the table's namespace has %zu.", t->nns);
		tms_error_hint(err, "Use an engine of type livy for this table.");
		return -1;
	}
	if (t->nns > 64)
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the namespace has too many levels");
	for (i = 0; i < t->nns; i++)
		if (check_name("namespace", t->ns[i], err) != 0)
			return -1;
	return check_name("table", t->table, err);
}

/* ---- livy ---- */

static void
spark_arg(IoStrBuf *b, const char *name)
{
	io_sb_printf(b, ", %s => ", name);
}

static void
spark_map(IoStrBuf *b, char **keys, char **vals, size_t n)
{
	size_t		i;

	io_sb_puts(b, "map(");
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			io_sb_puts(b, ", ");
		eng_spark_string(b, keys[i]);
		io_sb_puts(b, ", ");
		eng_spark_string(b, vals[i]);
	}
	io_sb_putc(b, ')');
}

/* The point in time of older-than, rendered; -1 with *err when out of range. */
static int
older_than_text(const EngValue *v, int64_t now_ms, char *out, size_t outsz, TmsError *err)
{
	int64_t		at = v->is_timestamp ? v->i : now_ms - v->i;

	if ((!v->is_timestamp && (now_ms < 0 || v->i > now_ms)) || !eng_format_utc(at, out, outsz))
	{
		tms_error_set(err, ENGINE_ERR_INVALID_VALUE, "invalid value for option \"older-than\"");
		tms_error_detail(err, "The point in time is out of range (1970 to 9999).");
		return -1;
	}
	return 0;
}

static int
build_livy(EngineOperation op, const EngineTarget *t, const EngOptions *o, int64_t now_ms,
		   IoStrBuf *b, TmsError *err)
{
	static const char *const procs[] = {"rewrite_data_files", "rewrite_position_delete_files",
	"rewrite_manifests", "expire_snapshots", "remove_orphan_files"};
	IoStrBuf	ident;
	size_t		i;
	const EngValue *v = o->v;
	char	   *id;

	io_sb_init(&ident);
	for (i = 0; i < t->nns; i++)
	{
		eng_spark_ident(&ident, t->ns[i]);
		io_sb_putc(&ident, '.');
	}
	eng_spark_ident(&ident, t->table);
	id = io_sb_steal(&ident);
	if (id == NULL)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");

	io_sb_puts(b, "CALL ");
	eng_spark_ident(b, t->catalog);
	io_sb_printf(b, ".system.%s(table => ", procs[op]);
	eng_spark_string(b, id);
	io_free(id);

	switch (op)
	{
		case ENGINE_OP_COMPACTION:
		case ENGINE_OP_POSITION_DELETE_REWRITE:
			{
				char	  **keys,
						  **vals;
				long		n;

				if (op == ENGINE_OP_COMPACTION && v[EK_STRATEGY].present)
				{
					spark_arg(b, "strategy");
					eng_spark_string(b, v[EK_STRATEGY].s);
				}
				if (op == ENGINE_OP_COMPACTION && v[EK_SORT_ORDER].present)
				{
					spark_arg(b, "sort_order");
					eng_spark_string(b, v[EK_SORT_ORDER].s);
				}
				if (v[EK_WHERE].present)
				{
					spark_arg(b, "where");
					eng_spark_string(b, v[EK_WHERE].s);
				}
				n = eng_rewrite_pairs(o, &keys, &vals);
				if (n < 0)
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
				if (n > 0)
				{
					spark_arg(b, "options");
					spark_map(b, keys, vals, (size_t) n);
				}
				eng_pairs_free(keys, vals, n);
				break;
			}
		case ENGINE_OP_MANIFEST_REWRITE:
			if (v[EK_USE_CACHING].present)
			{
				spark_arg(b, "use_caching");
				io_sb_puts(b, v[EK_USE_CACHING].b ? "true" : "false");
			}
			if (v[EK_SPEC_ID].present)
			{
				spark_arg(b, "spec_id");
				io_sb_printf(b, "%lld", (long long) v[EK_SPEC_ID].i);
			}
			break;
		case ENGINE_OP_SNAPSHOT_EXPIRY:
		case ENGINE_OP_ORPHAN_CLEANUP:
			if (v[EK_OLDER_THAN].present)
			{
				char		ts[64];

				if (older_than_text(&v[EK_OLDER_THAN], now_ms, ts, sizeof(ts), err) != 0)
					return -1;
				spark_arg(b, "older_than");
				io_sb_puts(b, "TIMESTAMP ");
				eng_spark_string(b, ts);
			}
			if (op == ENGINE_OP_SNAPSHOT_EXPIRY && v[EK_RETAIN_LAST].present)
			{
				spark_arg(b, "retain_last");
				io_sb_printf(b, "%lld", (long long) v[EK_RETAIN_LAST].i);
			}
			if (op == ENGINE_OP_ORPHAN_CLEANUP && v[EK_LOCATION].present)
			{
				spark_arg(b, "location");
				eng_spark_string(b, v[EK_LOCATION].s);
			}
			if (v[EK_MAX_CONCURRENT_DELETES].present)
			{
				spark_arg(b, "max_concurrent_deletes");
				io_sb_printf(b, "%lld", (long long) v[EK_MAX_CONCURRENT_DELETES].i);
			}
			if (op == ENGINE_OP_SNAPSHOT_EXPIRY)
			{
				if (v[EK_STREAM_RESULTS].present)
				{
					spark_arg(b, "stream_results");
					io_sb_puts(b, v[EK_STREAM_RESULTS].b ? "true" : "false");
				}
				if (v[EK_SNAPSHOT_IDS].present)
				{
					spark_arg(b, "snapshot_ids");
					io_sb_puts(b, "array(");
					for (i = 0; i < v[EK_SNAPSHOT_IDS].n; i++)
						io_sb_printf(b, "%s%lldL", i ? ", " : "",
									 (long long) v[EK_SNAPSHOT_IDS].ints[i]);
					io_sb_putc(b, ')');
				}
				if (v[EK_CLEAN_EXPIRED_METADATA].present)
				{
					spark_arg(b, "clean_expired_metadata");
					io_sb_puts(b, v[EK_CLEAN_EXPIRED_METADATA].b ? "true" : "false");
				}
			}
			else
			{
				if (v[EK_EQUAL_SCHEMES].present)
				{
					spark_arg(b, "equal_schemes");
					spark_map(b, v[EK_EQUAL_SCHEMES].keys, v[EK_EQUAL_SCHEMES].vals,
							  v[EK_EQUAL_SCHEMES].n);
				}
				if (v[EK_EQUAL_AUTHORITIES].present)
				{
					spark_arg(b, "equal_authorities");
					spark_map(b, v[EK_EQUAL_AUTHORITIES].keys, v[EK_EQUAL_AUTHORITIES].vals,
							  v[EK_EQUAL_AUTHORITIES].n);
				}
				if (v[EK_PREFIX_MISMATCH_MODE].present)
				{
					spark_arg(b, "prefix_mismatch_mode");
					eng_spark_string(b, v[EK_PREFIX_MISMATCH_MODE].s);
				}
			}
			break;
		default:
			break;
	}
	io_sb_putc(b, ')');
	return 0;
}

/* ---- trino ---- */

static int
build_trino(EngineOperation op, const EngineTarget *t, const EngOptions *o,
			IoStrBuf *b, EngineStatement *st, TmsError *err)
{
	const EngValue *v = o->v;
	char		text[64];

	io_sb_puts(b, "ALTER TABLE ");
	eng_trino_ident(b, t->catalog);
	io_sb_putc(b, '.');
	eng_trino_ident(b, t->ns[0]);
	io_sb_putc(b, '.');
	eng_trino_ident(b, t->table);
	io_sb_puts(b, " EXECUTE ");
	switch (op)
	{
		case ENGINE_OP_COMPACTION:
			io_sb_puts(b, "optimize");
			if (v[EK_FILE_SIZE_THRESHOLD].present)
			{
				eng_format_datasize(v[EK_FILE_SIZE_THRESHOLD].i, text, sizeof(text));
				io_sb_puts(b, "(file_size_threshold => ");
				eng_trino_string(b, text);
				io_sb_putc(b, ')');
			}
			if (v[EK_WHERE].present)
			{
				io_sb_puts(b, " WHERE ");
				io_sb_puts(b, v[EK_WHERE].s);
			}
			if (v[EK_TARGET_FILE_SIZE].present)
			{
				const char *p;
				IoStrBuf	name;

				/* X-Trino-Session "name=value": a catalog name plain */
				for (p = t->catalog; *p; p++)
					if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
						  (*p >= '0' && *p <= '9') || *p == '_'))
					{
						tms_error_set(err, ENGINE_ERR_INVALID_NAME,
									  "catalog name cannot name a session property");
						tms_error_detail(err, "Option \"target-file-size-bytes\" sets the session "
										 "property <catalog>.target_max_file_size, and the "
										 "catalog name holds other characters than letters, "
										 "digits and '_'.");
						return -1;
					}
				st->session = io_calloc(1, sizeof(EngineProperty));
				if (st->session == NULL)
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
				st->nsession = 1;
				io_sb_init(&name);
				io_sb_printf(&name, "%s.target_max_file_size", t->catalog);
				st->session[0].name = io_sb_steal(&name);
				snprintf(text, sizeof(text), "%lldB", (long long) v[EK_TARGET_FILE_SIZE].i);
				st->session[0].value = io_strdup(text);
				if (st->session[0].name == NULL || st->session[0].value == NULL)
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			}
			break;
		case ENGINE_OP_MANIFEST_REWRITE:
			io_sb_puts(b, "optimize_manifests");
			break;
		case ENGINE_OP_SNAPSHOT_EXPIRY:
		case ENGINE_OP_ORPHAN_CLEANUP:
			io_sb_puts(b, op == ENGINE_OP_SNAPSHOT_EXPIRY ? "expire_snapshots" :
					   "remove_orphan_files");
			if (v[EK_OLDER_THAN].present)
			{
				eng_format_duration(v[EK_OLDER_THAN].i, text, sizeof(text));
				io_sb_puts(b, "(retention_threshold => ");
				eng_trino_string(b, text);
				io_sb_putc(b, ')');
			}
			break;
		default:
			break;
	}
	return 0;
}

/* ---- gravitino ---- */

/* A value a built-in job pastes into a Spark literal: nothing it would mangle. */
static int
gravitino_safe(const char *what, const char *s, EngineErrorCode code, TmsError *err)
{
	if (strpbrk(s, "'\\") == NULL && strstr(s, "{{") == NULL)
		return 0;
	tms_error_set(err, code, "%s cannot be passed to a Gravitino job", what);
	tms_error_detail(err, "It holds a single quote, a backslash or \"{{\", which Gravitino's "
					 "built-in job would not escape in the Spark SQL it builds.");
	tms_error_hint(err, "Use an engine of type livy for this.");
	return -1;
}

static void
conf_put(IoStrBuf *b, const char *key, const char *val)
{
	io_sb_putc(b, ',');
	eng_json_string(b, key);
	io_sb_putc(b, ':');
	eng_json_string(b, val);
}

/*
 * The built-in Gravitino job template of each operation.  Which of them a
 * server offers depends on its release (rewrite-manifests came later than
 * rewrite-data-files and expire-snapshots), so a caller reads the server's
 * list before submitting (engine_client.h's io_engine_offers_template).
 */
static const char *const gravitino_templates[] = {"builtin-iceberg-rewrite-data-files", NULL,
"builtin-iceberg-rewrite-manifests", "builtin-iceberg-expire-snapshots", NULL};

const char *
engine_gravitino_template(EngineOperation op)
{
	if (op < ENGINE_OP_COMPACTION || op > ENGINE_OP_ORPHAN_CLEANUP)
		return NULL;
	return gravitino_templates[op];
}

static int
build_gravitino(EngineOperation op, const EngineTarget *t, const EngOptions *o,
				const char *tag, int64_t now_ms, IoStrBuf *b, EngineStatement *st,
				TmsError *err)
{
	const char *const *templates = gravitino_templates;
	const EngValue *v = o->v;
	const char *p;
	IoStrBuf	id;
	char	   *ids;
	size_t		i;
	char		text[64];

	if (tag == NULL || tag[0] == '\0' || !eng_utf8_valid(tag, strlen(tag)) ||
		strlen(tag) > ENG_MAX_NAME_BYTES)
		return tms_error_set(err, ENGINE_ERR_INVALID_NAME, "the job tag is empty or not valid UTF-8");
	/* the job writes the catalog bare into CALL <catalog>.system... */
	for (p = t->catalog; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
			  (p > t->catalog && *p >= '0' && *p <= '9')))
		{
			tms_error_set(err, ENGINE_ERR_INVALID_NAME,
						  "the catalog name cannot be passed to a Gravitino job");
			tms_error_detail(err, "Gravitino's built-in job writes the catalog name unquoted; "
							 "it must be letters, digits and '_', not starting with a digit.");
			return -1;
		}
	for (i = 0; i < t->nns; i++)
		if (gravitino_safe("the namespace name", t->ns[i], ENGINE_ERR_INVALID_NAME, err) != 0)
			return -1;
	if (gravitino_safe("the table name", t->table, ENGINE_ERR_INVALID_NAME, err) != 0 ||
		gravitino_safe("the job tag", tag, ENGINE_ERR_INVALID_NAME, err) != 0 ||
		(v[EK_WHERE].present &&
		 gravitino_safe("option \"where\"", v[EK_WHERE].s, ENGINE_ERR_INVALID_VALUE, err) != 0) ||
		(v[EK_SORT_ORDER].present &&
		 gravitino_safe("option \"sort-order\"", v[EK_SORT_ORDER].s, ENGINE_ERR_INVALID_VALUE, err) != 0))
		return -1;

	io_sb_init(&id);
	for (i = 0; i < t->nns; i++)
	{
		eng_dotted_part(&id, t->ns[i]);
		io_sb_putc(&id, '.');
	}
	eng_dotted_part(&id, t->table);
	ids = io_sb_steal(&id);
	if (ids == NULL)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");

	st->template_name = io_strdup(templates[op]);
	io_sb_puts(b, "{\"jobTemplateName\":");
	eng_json_string(b, templates[op]);
	io_sb_puts(b, ",\"jobConf\":{");
	eng_json_string(b, "catalog_name");
	io_sb_putc(b, ':');
	eng_json_string(b, t->catalog);
	conf_put(b, "table_identifier", ids);
	io_free(ids);
	switch (op)
	{
		case ENGINE_OP_COMPACTION:
			{
				char	  **keys,
						  **vals;
				long		n;

				if (v[EK_STRATEGY].present)
					conf_put(b, "strategy", v[EK_STRATEGY].s);
				if (v[EK_SORT_ORDER].present)
					conf_put(b, "sort_order", v[EK_SORT_ORDER].s);
				if (v[EK_WHERE].present)
					conf_put(b, "where_clause", v[EK_WHERE].s);
				n = eng_rewrite_pairs(o, &keys, &vals);
				if (n < 0)
					return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
				if (n > 0)
				{
					IoStrBuf	obj;
					char	   *objs;
					long		k;

					io_sb_init(&obj);
					io_sb_putc(&obj, '{');
					for (k = 0; k < n; k++)
					{
						if (k > 0)
							io_sb_putc(&obj, ',');
						eng_json_string(&obj, keys[k]);
						io_sb_putc(&obj, ':');
						eng_json_string(&obj, vals[k]);
					}
					io_sb_putc(&obj, '}');
					objs = io_sb_steal(&obj);
					if (objs == NULL)
					{
						eng_pairs_free(keys, vals, n);
						return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
					}
					conf_put(b, "options", objs);
					io_free(objs);
				}
				eng_pairs_free(keys, vals, n);
				break;
			}
		case ENGINE_OP_MANIFEST_REWRITE:
			if (v[EK_USE_CACHING].present)
				conf_put(b, "use_caching", v[EK_USE_CACHING].b ? "true" : "false");
			if (v[EK_SPEC_ID].present)
			{
				snprintf(text, sizeof(text), "%lld", (long long) v[EK_SPEC_ID].i);
				conf_put(b, "spec_id", text);
			}
			break;
		case ENGINE_OP_SNAPSHOT_EXPIRY:
			if (v[EK_OLDER_THAN].present)
			{
				if (older_than_text(&v[EK_OLDER_THAN], now_ms, text, sizeof(text), err) != 0)
					return -1;
				conf_put(b, "older_than", text);
			}
			if (v[EK_RETAIN_LAST].present)
			{
				snprintf(text, sizeof(text), "%lld", (long long) v[EK_RETAIN_LAST].i);
				conf_put(b, "retain_last", text);
			}
			if (v[EK_STREAM_RESULTS].present)
				conf_put(b, "stream_results", v[EK_STREAM_RESULTS].b ? "true" : "false");
			break;
		default:
			break;
	}
	if (v[EK_ENGINE_RESOURCES].present &&
		eng_resources_gravitino(v[EK_ENGINE_RESOURCES].res, b) != 0)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	conf_put(b, "tms_tag", tag);
	io_sb_puts(b, "}}");
	if (st->template_name == NULL)
		return tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

/* ---- the entry points ---- */

int
engine_statement_build(EngineType type, const char *operation, const EngineTarget *target,
					   const char *options_json, const char *tag, int64_t now_ms,
					   EngineStatement *out, TmsError *err)
{
	EngineOperation op = engine_op_from_name(operation);
	EngOptions	o;
	IoStrBuf	b;
	int			rc = -1;

	memset(out, 0, sizeof(*out));
	out->type = type;
	out->op = op;
	if (op == ENGINE_OP_UNKNOWN)
		return engine_options_check(type, operation, options_json, err);
	if (eng_options_parse(type, op, options_json, &o, err) != 0)
	{
		eng_options_free(&o);
		return -1;
	}
	io_sb_init(&b);
	if (eng_check_target(type, target, err) != 0)
		goto done;
	switch (type)
	{
		case ENGINE_TYPE_LIVY:
			rc = build_livy(op, target, &o, now_ms, &b, err);
			if (rc == 0 && o.v[EK_ENGINE_RESOURCES].present &&
				eng_resources_livy(o.v[EK_ENGINE_RESOURCES].res, out) != 0)
				rc = tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		case ENGINE_TYPE_TRINO:
			rc = build_trino(op, target, &o, &b, out, err);
			break;
		case ENGINE_TYPE_GRAVITINO:
			rc = build_gravitino(op, target, &o, tag, now_ms, &b, out, err);
			break;
		default:
			rc = tms_error_set(err, ENGINE_ERR_UNSUPPORTED, "unknown engine type");
			break;
	}
	if (rc == 0)
	{
		out->text = io_sb_steal(&b);
		if (out->text == NULL)
			rc = tms_error_set(err, ENGINE_ERR_OUT_OF_MEMORY, "out of memory");
	}
done:
	io_sb_free(&b);
	eng_options_free(&o);
	if (rc != 0)
	{
		engine_statement_free(out);
		out->type = type;
		out->op = op;
	}
	return rc;
}

void
engine_statement_free(EngineStatement *st)
{
	size_t		i;

	if (st == NULL)
		return;
	io_free(st->text);
	io_free(st->template_name);
	for (i = 0; i < st->nsession && st->session; i++)
	{
		io_free(st->session[i].name);
		io_free(st->session[i].value);
	}
	io_free(st->session);
	st->text = NULL;
	st->template_name = NULL;
	st->session = NULL;
	st->nsession = 0;
}

/* ---- counts ---- */

typedef enum CountField
{
	CF_NONE = 0,
	CF_CHECK,					/* a number, read and checked, not kept */
	CF_DATA_REWRITTEN,
	CF_DATA_ADDED,
	CF_BYTES,
	CF_DELETE_REWRITTEN,
	CF_DELETE_ADDED,
	CF_MANIFESTS_REWRITTEN,
	CF_MANIFESTS_ADDED,
	CF_FILES_DELETED,
	CF_ORPHANS,
	CF_ORPHAN_ROW				/* Spark: one row per orphan file */
} CountField;

static bool
has_suffix(const char *s, const char *suffix)
{
	size_t		n = strlen(s),
				m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* What a column (Spark) or metric (Trino) of op's result counts. */
static CountField
count_field(EngineOperation op, const char *name)
{
	if (name == NULL)
		return CF_NONE;
	switch (op)
	{
		case ENGINE_OP_COMPACTION:
			if (strcmp(name, "rewritten_data_files_count") == 0)
				return CF_DATA_REWRITTEN;
			if (strcmp(name, "added_data_files_count") == 0)
				return CF_DATA_ADDED;
			if (strcmp(name, "rewritten_bytes_count") == 0)
				return CF_BYTES;
			if (strcmp(name, "removed_delete_files_count") == 0)
				return CF_DELETE_REWRITTEN;
			if (strcmp(name, "failed_data_files_count") == 0)
				return CF_CHECK;
			break;
		case ENGINE_OP_POSITION_DELETE_REWRITE:
			if (strcmp(name, "rewritten_delete_files_count") == 0)
				return CF_DELETE_REWRITTEN;
			if (strcmp(name, "added_delete_files_count") == 0)
				return CF_DELETE_ADDED;
			if (strcmp(name, "rewritten_bytes_count") == 0)
				return CF_BYTES;
			if (strcmp(name, "added_bytes_count") == 0)
				return CF_CHECK;
			break;
		case ENGINE_OP_MANIFEST_REWRITE:
			if (strcmp(name, "rewritten_manifests_count") == 0)
				return CF_MANIFESTS_REWRITTEN;
			if (strcmp(name, "added_manifests_count") == 0)
				return CF_MANIFESTS_ADDED;
			break;
		case ENGINE_OP_SNAPSHOT_EXPIRY:
			if (strncmp(name, "deleted_", 8) == 0 && has_suffix(name, "_count"))
				return CF_FILES_DELETED;
			break;
		case ENGINE_OP_ORPHAN_CLEANUP:
			if (strcmp(name, "orphan_file_location") == 0)
				return CF_ORPHAN_ROW;
			if (strcmp(name, "deleted_files_count") == 0)
				return CF_ORPHANS;
			if (strcmp(name, "processed_manifests_count") == 0 ||
				strcmp(name, "active_files_count") == 0 ||
				strcmp(name, "scanned_files_count") == 0 ||
				strcmp(name, "deleted_bytes") == 0)
				return CF_CHECK;
			break;
		default:
			break;
	}
	return CF_NONE;
}

static int64_t *
field_slot(EngineCounts *c, CountField f)
{
	switch (f)
	{
		case CF_DATA_REWRITTEN:
			return &c->data_files_rewritten;
		case CF_DATA_ADDED:
			return &c->data_files_added;
		case CF_BYTES:
			return &c->bytes_rewritten;
		case CF_DELETE_REWRITTEN:
			return &c->delete_files_rewritten;
		case CF_DELETE_ADDED:
			return &c->delete_files_added;
		case CF_MANIFESTS_REWRITTEN:
			return &c->manifests_rewritten;
		case CF_MANIFESTS_ADDED:
			return &c->manifests_added;
		case CF_FILES_DELETED:
			return &c->files_deleted;
		case CF_ORPHANS:
		case CF_ORPHAN_ROW:
			return &c->orphans_found;
		default:
			return NULL;
	}
}

void
engine_counts_init(EngineCounts *c)
{
	c->data_files_rewritten = -1;
	c->data_files_added = -1;
	c->bytes_rewritten = -1;
	c->delete_files_rewritten = -1;
	c->delete_files_added = -1;
	c->manifests_rewritten = -1;
	c->manifests_added = -1;
	c->files_deleted = -1;
	c->orphans_found = -1;
}

static int
bad_result(TmsError *err, const char *name, const char *cell, size_t row)
{
	char		shown[160];

	eng_show(shown, sizeof(shown), cell, strlen(cell), 64);
	tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the engine returned a count that is not a count");
	tms_error_detail(err, "Row %zu, \"%s\": \"%s\".", row + 1, name, shown);
	return -1;
}

/* Add the cell's count to the field; -1 with *err when not a count. */
static int
add_count(EngineCounts *c, CountField f, const char *name, const char *cell, size_t row,
		  TmsError *err)
{
	int64_t		n;
	int64_t    *slot;

	if (cell == NULL)
		return 0;
	if (f == CF_ORPHAN_ROW)
		n = 1;
	else if (!eng_parse_whole(cell, &n) || n < 0)
		return bad_result(err, name, cell, row);
	slot = field_slot(c, f);
	if (slot == NULL)
		return 0;
	if (*slot < 0)
		*slot = 0;
	if (n > INT64_MAX - *slot)
	{
		tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the engine's counts overflow");
		tms_error_detail(err, "The sum of \"%s\" passes 2^63.", name);
		return -1;
	}
	*slot += n;
	return 0;
}

int
engine_counts_read(EngineType type, EngineOperation op, const char *const *columns,
				   size_t ncolumns, const char *const *const *rows, size_t nrows,
				   EngineCounts *out, TmsError *err)
{
	size_t		ci;
	size_t		r;
	long		mname = -1,
				mvalue = -1;

	engine_counts_init(out);
	if (op < ENGINE_OP_COMPACTION || op > ENGINE_OP_ORPHAN_CLEANUP)
		return tms_error_set(err, ENGINE_ERR_UNKNOWN_OPERATION, "unknown operation");
	if (ncolumns > 0 && columns == NULL)
		return tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the result has no column names");
	if (nrows > 0 && rows == NULL)
		return tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the result has no rows");
	for (ci = 0; ci < ncolumns; ci++)
	{
		if (columns[ci] && strcmp(columns[ci], "metric_name") == 0)
			mname = (long) ci;
		if (columns[ci] && strcmp(columns[ci], "metric_value") == 0)
			mvalue = (long) ci;
	}

	if (type == ENGINE_TYPE_TRINO && mname >= 0 && mvalue >= 0)
	{
		/* Trino: one row per metric, (metric_name, metric_value) */
		for (r = 0; r < nrows; r++)
		{
			const char *name;
			CountField	f;

			if (rows[r] == NULL)
				return tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the result has a missing row");
			name = rows[r][mname];
			f = count_field(op, name);
			if (f == CF_NONE || f == CF_ORPHAN_ROW)
				continue;
			if (add_count(out, f, name, rows[r][mvalue], r, err) != 0)
				return -1;
		}
		return 0;
	}

	/* Spark (and a Trino of one row of columns): one column per count */
	for (ci = 0; ci < ncolumns; ci++)
	{
		CountField	f = count_field(op, columns[ci]);

		if (f == CF_NONE)
			continue;
		if (f == CF_ORPHAN_ROW && out->orphans_found < 0)
			out->orphans_found = 0;
		for (r = 0; r < nrows; r++)
		{
			if (rows[r] == NULL)
				return tms_error_set(err, ENGINE_ERR_INVALID_RESULT, "the result has a missing row");
			if (add_count(out, f, columns[ci], rows[r][ci], r, err) != 0)
				return -1;
		}
	}
	return 0;
}
