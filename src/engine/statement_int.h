/*-------------------------------------------------------------------------
 *
 * statement_int.h
 *	  Private declarations shared by the files of src/engine/: error
 *	  helpers, the small JSON reader of the options (options_json.c), the
 *	  quoting of names and literals for each engine and the Trino WHERE
 *	  tokeniser (quote.c), and the checked options (engine_options.c) that
 *	  statement.c turns into statements.  Text is built in the plain-C
 *	  layers' one string buffer (io/util/strbuf.h).
 *
 * Why a JSON reader of its own rather than jansson: a number must reach
 * the checks as the text the user wrote (jansson turns an integer past
 * int64 into an error or, with JSON_DECODE_INT_AS_REAL, into a rounded
 * double), and the layer then needs no allocator set-up (src/io/util/jsonmem.h)
 * before its first call.  The reader keeps the order of an object's
 * members and refuses duplicate keys.
 *
 * Not part of the layer's interface (that is statement.h); nothing
 * outside src/engine/, its unit test and its fuzz target includes this
 * file.  Plain C: no PostgreSQL header.
 *
 * src/engine/statement_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ENGINE_INT_H
#define TMS_ENGINE_INT_H

#include "engine/statement.h"
#include "io/util/io_memory.h"
#include "io/util/strbuf.h"

/* The longest options document, name and string value taken. */
#define ENG_MAX_OPTIONS_BYTES	(64 * 1024)
#define ENG_MAX_NAME_BYTES		1024
#define ENG_MAX_VALUE_BYTES		(16 * 1024)
#define ENG_MAX_JSON_DEPTH		8
#define ENG_MAX_LIST_ITEMS		10000

/* ---- quoting (quote.c) ---- */

/*
 * A caller's text shown in a detail: at most max bytes, control bytes
 * and quotes as escapes, so that a message can never be mistaken for
 * another.  Writes into out[outsz].
 */
extern void eng_show(char *out, size_t outsz, const char *s, size_t len, size_t max);

/* ---- JSON (options_json.c) ---- */

typedef enum EngJsonKind
{
	EJ_NULL,
	EJ_TRUE,
	EJ_FALSE,
	EJ_NUMBER,
	EJ_STRING,
	EJ_ARRAY,
	EJ_OBJECT
} EngJsonKind;

typedef struct EngJson EngJson;

struct EngJson
{
	EngJsonKind kind;
	char	   *str;			/* STRING: decoded UTF-8 (no NUL inside);
								 * NUMBER: the text as written */
	size_t		len;
	bool		integer;		/* NUMBER: no fraction and no exponent */
	char	  **keys;			/* OBJECT: member names, in order */
	EngJson   **items;			/* OBJECT: member values; ARRAY: elements */
	size_t		nitems;
};

/*
 * Parse text[0..len) as one JSON value.  Returns it, or NULL with *err
 * (ENGINE_ERR_INVALID_VALUE naming the position, or OUT_OF_MEMORY).
 * Strings must be valid UTF-8 and hold no NUL; an object's keys are
 * unique; nesting is at most ENG_MAX_JSON_DEPTH.
 */
extern EngJson *eng_json_parse(const char *text, size_t len, TmsError *err);
extern void eng_json_free(EngJson *v);
extern const char *eng_json_kind_name(EngJsonKind kind);

/* ---- numbers (quote.c) ---- */

/*
 * A JSON number's text or a string of digits as int64: 1 ok, 0 not an
 * integer (fraction, exponent, other characters), -1 out of range.
 */
extern int	eng_parse_int64(const char *s, size_t len, int64_t *out);

/*
 * A number as a result cell holds it: a JSON number ("12", "12.0",
 * "1e3", "-0") or a JSON string of one, whole and within int64.
 * Returns true with *out.
 */
extern bool eng_parse_whole(const char *s, int64_t *out);

/* ---- targets (statement.c) ---- */

/*
 * The table's names: non-empty, valid UTF-8, not too long; Trino's
 * namespace one level.  0, or -1 with *err (INVALID_NAME).
 */
extern int	eng_check_target(EngineType type, const EngineTarget *t, TmsError *err);

/* ---- quoting (quote.c) ---- */

extern bool eng_utf8_valid(const char *s, size_t len);

/* Spark: `name`, backticks doubled. */
extern void eng_spark_ident(IoStrBuf *b, const char *name);

/* Spark: 'text', backslash and quote escaped, control bytes as escapes. */
extern void eng_spark_string(IoStrBuf *b, const char *s);

/* Trino: "name", double quotes doubled. */
extern void eng_trino_ident(IoStrBuf *b, const char *name);

/* Trino: 'text', single quotes doubled. */
extern void eng_trino_string(IoStrBuf *b, const char *s);

/* JSON: "text" with ", \ and control bytes escaped. */
extern void eng_json_string(IoStrBuf *b, const char *s);

/* Gravitino's table_identifier part: as is, or `quoted` when it needs it. */
extern void eng_dotted_part(IoStrBuf *b, const char *name);

/*
 * Check a Trino WHERE expression: tokenised, one expression only (no ';',
 * no comment, quotes and parentheses balanced, no non-ASCII byte outside
 * a literal or quoted identifier).  Returns 0, or -1 with *err
 * (INVALID_VALUE; the detail names the offending byte offset).
 */
extern int	eng_trino_where_check(const char *s, TmsError *err);

/* ---- checked options (engine_options.c) ---- */

typedef enum EngOptKind
{
	EOK_BOOL,
	EOK_INT,					/* range lo..hi */
	EOK_SIZE,					/* bytes: integer or "128MB" */
	EOK_DURATION,				/* ms: integer or "7 days" */
	EOK_TIME,					/* older-than: a duration (age) or timestamp */
	EOK_STRING,					/* non-empty UTF-8 */
	EOK_ENUM,					/* one of a list, case-insensitive */
	EOK_STRMAP,					/* object of string -> string */
	EOK_INTLIST,				/* array of int64 */
	EOK_REWRITE_OPTIONS,		/* object of Iceberg rewrite options */
	EOK_RESOURCES,				/* engine-resources (engine_resources.c) */
	EOK_TRINO_WHERE				/* Trino SQL expression, tokenised */
} EngOptKind;

/*
 * The checked "engine-resources" of a run (engine_resources.c), in
 * Livy's names of the session request; 0 / NULL: not given.
 */
typedef struct EngResources
{
	char	   *driver_memory;	/* canonical Spark memory string ("4g") */
	char	   *executor_memory;
	int64_t		driver_cores;
	int64_t		executor_cores;
	int64_t		num_executors;
	char	  **conf_keys;		/* Spark properties, "spark.*" */
	char	  **conf_vals;
	size_t		nconf;
} EngResources;

/* One checked value. */
typedef struct EngValue
{
	bool		present;
	bool		b;
	int64_t		i;				/* INT, SIZE, DURATION; TIME: ms */
	bool		is_timestamp;	/* TIME: i is Unix ms, else an age in ms */
	char	   *s;				/* STRING, ENUM (canonical), WHERE */
	char	  **keys;			/* STRMAP, REWRITE_OPTIONS */
	char	  **vals;
	int64_t    *ints;			/* INTLIST */
	size_t		n;
	EngResources *res;			/* RESOURCES */
} EngValue;

/* The option keys, in the order statements name their arguments. */
typedef enum EngKey
{
	EK_STRATEGY = 0,
	EK_SORT_ORDER,
	EK_WHERE,
	EK_TARGET_FILE_SIZE,
	EK_MIN_INPUT_FILES,
	EK_MAX_FILE_GROUP_SIZE,
	EK_REWRITE_ALL,
	EK_PARTIAL_PROGRESS,
	EK_DELETE_FILE_THRESHOLD,
	EK_OPTIONS,
	EK_FILE_SIZE_THRESHOLD,
	EK_USE_CACHING,
	EK_SPEC_ID,
	EK_OLDER_THAN,
	EK_RETAIN_LAST,
	EK_MAX_CONCURRENT_DELETES,
	EK_STREAM_RESULTS,
	EK_SNAPSHOT_IDS,
	EK_CLEAN_EXPIRED_METADATA,
	EK_LOCATION,
	EK_EQUAL_SCHEMES,
	EK_EQUAL_AUTHORITIES,
	EK_PREFIX_MISMATCH_MODE,
	EK_ENGINE_RESOURCES,
	EK__COUNT
} EngKey;

typedef struct EngOptions
{
	EngValue	v[EK__COUNT];
} EngOptions;

/* The option's key as users write it ("target-file-size-bytes"). */
extern const char *eng_key_name(EngKey k);

/* The Iceberg rewrite option a top-level key stands for, or NULL. */
extern const char *eng_key_iceberg_option(EngKey k);

/*
 * Check options_json for (type, op) into *out (eng_options_free it, also
 * after a failure).  Returns 0, or -1 with *err.
 */
extern int	eng_options_parse(EngineType type, EngineOperation op,
							  const char *options_json, EngOptions *out,
							  TmsError *err);
extern void eng_options_free(EngOptions *o);

/*
 * The (key, value) pairs of the options => map(...) of a rewrite, the
 * top-level rewrite options first (fixed order) then those of the
 * "options" object (as given); values rendered as Iceberg reads them.
 * Returns the count, the arrays malloc'd (free with eng_pairs_free), or
 * -1 when out of memory.
 */
extern long eng_rewrite_pairs(const EngOptions *o, char ***keys, char ***vals);
extern void eng_pairs_free(char **keys, char **vals, long n);

/* ---- engine resources (engine_resources.c) ---- */

/*
 * Check the "engine-resources" object v for an engine into *out (free
 * with eng_resources_free, also after a failure).  Returns 0, or -1 with
 * *err (ENGINE_ERR_INVALID_VALUE / UNKNOWN_OPTION naming the bad value).
 */
extern int	eng_resources_parse(EngineType type, const EngJson *v, EngResources *out,
								TmsError *err);
extern void eng_resources_free(EngResources *r);

/*
 * Livy: the members of POST /sessions the resources set, as session
 * properties of st (name: the member, value: its JSON text).  Gravitino:
 * the spark_* jobConf entries, appended to b as ,"key":"value" pairs.
 * Return 0, or -1 when out of memory.
 */
extern int	eng_resources_livy(const EngResources *r, EngineStatement *st);
extern int	eng_resources_gravitino(const EngResources *r, IoStrBuf *b);

/* Time rendering: Unix ms as "YYYY-MM-DD HH:MM:SS[.mmm]+00:00". */
extern bool eng_format_utc(int64_t ms, char *out, size_t outsz);

/* A size as Trino's DataSize: "128MB", exact ("1000B" when it must). */
extern void eng_format_datasize(int64_t bytes, char *out, size_t outsz);

/* A duration as Trino's Duration: "7.00d", exact ("1.50h", "100.00m"). */
extern void eng_format_duration(int64_t ms, char *out, size_t outsz);

#endif							/* TMS_ENGINE_INT_H */
