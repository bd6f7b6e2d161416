/*-------------------------------------------------------------------------
 *
 * statement.h
 *	  What tms submits to an engine for a maintenance operation: the
 *	  options an (engine, operation) accepts and how each is checked, the
 *	  statement built from them with every name and value escaped for its
 *	  engine, and the engine's result rows read back as counts.
 *
 * Engines (the "type" option of a tms_engine server):
 *	 livy		Spark SQL through Apache Livy: CALL `catalog`.system.<procedure>(...)
 *	 trino		Trino SQL: ALTER TABLE "catalog"."ns"."t" EXECUTE <procedure>(...)
 *	 gravitino	Apache Gravitino's jobs API: a JSON body of POST
 *				/api/metalakes/{metalake}/jobs/runs, {"jobTemplateName": ...,
 *				"jobConf": {...}}
 *
 * Operations: compaction, position-delete-rewrite, manifest-rewrite,
 * snapshot-expiry, orphan-cleanup (the names of tms.run_operation).
 * Retention and tms.delete_rows are not procedures but a DELETE FROM
 * ... WHERE whose predicate the caller prints from a filter bound to the
 * table (engine_delete_build, engine_delete.c): livy and trino only.
 *
 * Livy and Gravitino runs also take "engine-resources" (driverMemory,
 * driverCores, executorMemory, executorCores, numExecutors, conf: the
 * names of Livy's session request), checked by engine_resources.c.
 *
 * The rules (for every operation and engine; as in Gravitino's design of
 * the Iceberg rewrite-manifests job,
 * https://github.com/apache/gravitino/pull/12942):
 *	- every option is checked before anything is built: an unknown key is
 *	  refused with the list of allowed ones; booleans are JSON true/false
 *	  only; whole numbers are JSON integers (or strings of digits) of any
 *	  width, range-checked to int64; sizes ("128MB", 134217728) and
 *	  durations ("7 days", "12h", 86400000 as ms) parse; the message names
 *	  the bad value;
 *	- absent means default: the statement names only the arguments the
 *	  user gave; a value that is wholly an unresolved placeholder
 *	  ("{{name}}") counts as absent;
 *	- no caller text reaches a statement unescaped: identifiers are quoted
 *	  for the engine (Spark: backticks, doubled inside; Trino: double
 *	  quotes, doubled inside), string literals likewise (Spark: backslash
 *	  escapes, since Spark joins adjacent literals; Trino: doubled single
 *	  quotes), numbers and booleans are re-rendered from their parsed
 *	  value; a Trino WHERE expression is tokenised and refused if it holds
 *	  anything but one expression (a ';', a comment, an unbalanced quote
 *	  or parenthesis).
 *
 * Plain C: no PostgreSQL header; errors are values (TmsError).
 * Everything returned is allocated with io_malloc (io/util/io_memory.h)
 * and freed by its *_free function (or io_free).
 *
 * src/engine/statement.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ENGINE_STATEMENT_H
#define TMS_ENGINE_STATEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/io_error.h"
#include "io/util/strbuf.h"

typedef enum EngineType
{
	ENGINE_TYPE_LIVY = 0,
	ENGINE_TYPE_TRINO,
	ENGINE_TYPE_GRAVITINO,
	ENGINE_TYPE_UNKNOWN = -1
} EngineType;

typedef enum EngineOperation
{
	ENGINE_OP_COMPACTION = 0,
	ENGINE_OP_POSITION_DELETE_REWRITE,
	ENGINE_OP_MANIFEST_REWRITE,
	ENGINE_OP_SNAPSHOT_EXPIRY,
	ENGINE_OP_ORPHAN_CLEANUP,
	ENGINE_OP_UNKNOWN = -1
} EngineOperation;

/*
 * Errors are TmsError values (io/io_error.h) with an EngineErrorCode;
 * messages follow PostgreSQL's style: lowercase, no trailing period; the
 * detail names the bad value, the hint e.g. the allowed keys.
 */

/* "livy" -> ENGINE_TYPE_LIVY ...; unknown: ENGINE_TYPE_UNKNOWN */
extern EngineType engine_type_from_name(const char *name);
extern const char *engine_type_name(EngineType type);
extern EngineOperation engine_op_from_name(const char *name);
extern const char *engine_op_name(EngineOperation op);

/* Whether the engine can run the operation at all. */
extern bool engine_supports(EngineType type, EngineOperation op);

/*
 * The built-in Gravitino job template an operation runs as, or NULL when
 * there is none.  A Gravitino server offers only some of them (its
 * release decides): read its list before submitting.
 */
extern const char *engine_gravitino_template(EngineOperation op);

/* The option keys an (engine, operation) accepts, ", " separated (static). */
extern const char *engine_allowed_options(EngineType type, EngineOperation op);

/* The table a statement is about. */
typedef struct EngineTarget
{
	const char *catalog;		/* the engine's name of the Iceberg catalog */
	const char *const *ns;		/* namespace levels, outermost first */
	size_t		nns;
	const char *table;
} EngineTarget;

/*
 * A session property (Trino: X-Trino-Session "name=value"; Livy: a member
 * of the session request, POST /sessions, value its JSON text, such as
 * "executorMemory" = "\"4g\"" or "conf" = "{...}").
 */
typedef struct EngineProperty
{
	char	   *name;
	char	   *value;
} EngineProperty;

typedef struct EngineStatement
{
	EngineType	type;
	EngineOperation op;
	char	   *text;			/* livy, trino: the SQL; gravitino: the JSON
								 * body of POST .../jobs/runs */
	char	   *template_name;	/* gravitino: jobTemplateName; else NULL */
	EngineProperty *session;	/* trino: session properties to send; livy:
								 * session request members (resources) */
	size_t		nsession;
} EngineStatement;

/*
 * Check options_json (a JSON object, NULL or "" meaning {}) for the
 * (engine, operation) and build the statement.  tag is tms's tag of the
 * job ("tms-job-<id>"); gravitino carries it in jobConf as "tms_tag"
 * (livy and trino carry it outside the statement: the session name, the
 * client tag).  now_ms (Unix ms) turns an "older-than" age into the
 * point in time Spark takes.  Returns 0 and fills *out (free with
 * engine_statement_free), or -1 with *err.
 */
extern int	engine_statement_build(EngineType type, const char *operation,
								   const EngineTarget *target,
								   const char *options_json, const char *tag,
								   int64_t now_ms,
								   EngineStatement *out, TmsError *err);
extern void engine_statement_free(EngineStatement *st);

/*
 * Only the checks of engine_statement_build (no target needed): what
 * tms.run_operation calls before it records a job.
 */
extern int	engine_options_check(EngineType type, const char *operation,
								 const char *options_json, TmsError *err);

/* The effect of a run, read from the procedure's result rows; -1: not reported. */
typedef struct EngineCounts
{
	int64_t		data_files_rewritten;
	int64_t		data_files_added;
	int64_t		bytes_rewritten;
	int64_t		delete_files_rewritten; /* also removed_delete_files_count */
	int64_t		delete_files_added;
	int64_t		manifests_rewritten;
	int64_t		manifests_added;
	int64_t		files_deleted;	/* expiry: every deleted_*_count summed */
	int64_t		orphans_found;	/* orphan cleanup: one row per file */
} EngineCounts;

extern void engine_counts_init(EngineCounts *c);	/* all -1 */

/*
 * Read a procedure's result: column names and rows of text (NULL: SQL
 * null), as an engine client returns them.  Numbers are read whatever
 * their width or JSON form ("12", 12, 12.0 refused when not whole) and
 * summed over rows; unknown columns are ignored (a later engine version
 * may add some).  Returns 0, or -1 with *err (ENGINE_ERR_INVALID_RESULT).
 */
extern int	engine_counts_read(EngineType type, EngineOperation op,
							   const char *const *columns, size_t ncolumns,
							   const char *const *const *rows, size_t nrows,
							   EngineCounts *out, TmsError *err);

/* ---- DELETE FROM ... WHERE (engine_delete.c) ---- */

/* The kind of a literal in a predicate, by the Iceberg type it compares to. */
typedef enum EngineValueKind
{
	ENGINE_VALUE_BOOL,			/* v: 0 or 1 */
	ENGINE_VALUE_INT,			/* int or long: v */
	ENGINE_VALUE_DATE,			/* v: days since 1970-01-01 */
	ENGINE_VALUE_TIMESTAMP,		/* v: microseconds, no zone */
	ENGINE_VALUE_TIMESTAMPTZ,	/* v: microseconds since 1970-01-01 UTC */
	ENGINE_VALUE_TIMESTAMP_NS,	/* v: nanoseconds, no zone */
	ENGINE_VALUE_TIMESTAMPTZ_NS,	/* v: nanoseconds since 1970-01-01 UTC */
	ENGINE_VALUE_STRING			/* s (UTF-8) */
} EngineValueKind;

/*
 * Append a column reference, or a literal written from its value, in the
 * engine's SQL (livy: Spark SQL; trino: Trino SQL).  0, or -1 with *err:
 * another engine type (UNSUPPORTED), a name or string that is not valid
 * UTF-8, a date or timestamp outside the years 1..9999 (INVALID_VALUE), a
 * nanosecond value Spark cannot hold (UNSUPPORTED).
 */
extern int	engine_sql_column(EngineType type, IoStrBuf *b, const char *name, TmsError *err);
extern int	engine_sql_value(EngineType type, IoStrBuf *b, EngineValueKind kind, int64_t v,
							 const char *s, TmsError *err);

/*
 * DELETE FROM <catalog>.<ns>.<table> WHERE <predicate>: predicate is text
 * printed with the two functions above (appended as is).  Returns 0 and
 * fills *out (op ENGINE_OP_UNKNOWN; free with engine_statement_free), or
 * -1 with *err.
 */
extern int	engine_delete_build(EngineType type, const EngineTarget *target,
								const char *predicate, EngineStatement *out, TmsError *err);

/*
 * Trino's answer to a DELETE: one row of one column "rows", the rows
 * deleted.  *out -1 when the result has no such column (Spark's DELETE
 * returns nothing); -1 with *err when it is not a count.
 */
extern int	engine_update_count_read(const char *const *columns, size_t ncolumns,
									 const char *const *const *rows, size_t nrows,
									 int64_t *out, TmsError *err);

#endif							/* TMS_ENGINE_STATEMENT_H */
