/*-------------------------------------------------------------------------
 *
 * io_error.h
 *		The one error value of the plain-C layers (TmsError), its codes
 *		and its setters.  io, iceberg, engine and the compaction helper
 *		all report failures in a TmsError; the bridge maps one to a
 *		SQLSTATE in one place (src/bridge/errors.c).  It lives in io, the
 *		lowest of those layers, so that every one of them may include it.
 *		cron and dsl keep their own positional parse errors (a syntax
 *		error at a position), which are a different thing.
 *
 * Each layer has its own enum of codes; the ranges do not overlap (io
 * 1..99, iceberg 100..199, engine 200..299, 0 is "no error" in all three),
 * so a TmsError's code alone says which layer set it
 * (tms_error_domain).
 *
 * Rules for every message, detail and hint:
 *	- message: a lowercase one-line primary message without a trailing
 *	  period ("could not read \"s3://b/m.avro\"");
 *	- detail: full sentences naming the bad value, or a server's own text;
 *	- hint: what the user can do, a full sentence;
 *	- none of them ever contains a secret (key, token, password).
 *
 * src/io/io_error.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_ERROR_H
#define TMS_IO_ERROR_H

#include <stddef.h>

#if defined(__GNUC__)
#define TMS_ERROR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TMS_ERROR_PRINTF(f, a)
#endif

/* The codes of the io layer (HTTP, REST catalogs, storage, engines). */
typedef enum IoErrorCode
{
	IO_OK = 0,
	IO_ERR_INVALID_ARGUMENT,	/* caller gave a malformed URL, option, name */
	IO_ERR_OUT_OF_MEMORY,
	IO_ERR_INTERRUPTED,			/* the interrupt callback returned true */
	IO_ERR_TIMEOUT,				/* connect or total timeout expired */
	IO_ERR_CONNECT,				/* DNS, connection refused/reset */
	IO_ERR_TLS,					/* certificate or handshake failure */
	IO_ERR_PROTOCOL,			/* malformed response (bad JSON/XML, bad
								 * status) */
	IO_ERR_TOO_LARGE,			/* response exceeds the size cap */
	IO_ERR_BAD_REQUEST,			/* HTTP 400 (and 422) */
	IO_ERR_UNAUTHORIZED,		/* HTTP 401 (after one token refresh), 419 */
	IO_ERR_FORBIDDEN,			/* HTTP 403 */
	IO_ERR_NOT_FOUND,			/* HTTP 404 of another kind, missing file */
	IO_ERR_NO_SUCH_NAMESPACE,	/* HTTP 404 NoSuchNamespaceException */
	IO_ERR_NO_SUCH_TABLE,		/* HTTP 404 NoSuchTableException */
	IO_ERR_ALREADY_EXISTS,		/* HTTP 409 outside a commit */
	IO_ERR_CONFLICT,			/* commit 409: retry from fresh metadata */
	IO_ERR_COMMIT_STATE_UNKNOWN,	/* commit 500/502/504: reload and check */
	IO_ERR_UNAVAILABLE,			/* HTTP 503, 429 after retries */
	IO_ERR_SERVER,				/* other HTTP 5xx */
	IO_ERR_UNSUPPORTED,			/* endpoint not offered by the server (its
								 * "endpoints" list, 501), or the catalog
								 * refused the operation (406) */
	IO_ERR_STORAGE,				/* local file system or S3 error */
	IO_ERR_INTERNAL				/* can't happen */
} IoErrorCode;

/* The codes of the iceberg layer (metadata, manifests, plans, writes). */
typedef enum IcebergErrorCode
{
	ICEBERG_OK = 0,
	ICEBERG_ERR_MALFORMED = 100,	/* input violates JSON / Avro / Iceberg
									 * rules */
	ICEBERG_ERR_UNSUPPORTED,	/* well-formed but uses a feature we lack
								 * (zstd metadata, unknown codec, format v4) */
	ICEBERG_ERR_IO,				/* the IoFileIO failed (see io_code) */
	ICEBERG_ERR_NOT_FOUND,		/* a snapshot id / ref / spec is not in the
								 * metadata */
	ICEBERG_ERR_LIMIT,			/* a size or count limit was exceeded */
	ICEBERG_ERR_OUT_OF_MEMORY,	/* malloc failed */
	ICEBERG_ERR_CANCELLED,		/* interrupted() or a callback asked to stop */
	ICEBERG_ERR_INVALID_ARGUMENT,	/* the caller passed something wrong */
	ICEBERG_ERR_CONFLICT		/* the table moved on since the caller's plan
								 * (rewrite: the current snapshot is not the
								 * planned base): plan again */
} IcebergErrorCode;

/* The codes of the engine layer (options, statements, results). */
typedef enum EngineErrorCode
{
	ENGINE_OK = 0,
	ENGINE_ERR_UNKNOWN_OPERATION = 200, /* no such operation name */
	ENGINE_ERR_UNSUPPORTED,		/* this engine cannot run this operation */
	ENGINE_ERR_UNKNOWN_OPTION,	/* a key the (engine, operation) does not take */
	ENGINE_ERR_INVALID_VALUE,	/* a value of the wrong type or form */
	ENGINE_ERR_INVALID_NAME,	/* an empty name, a NUL, too long */
	ENGINE_ERR_INVALID_RESULT,	/* a result row that is not what the procedure
								 * returns (not a number ...) */
	ENGINE_ERR_OUT_OF_MEMORY
} EngineErrorCode;

/* Which layer's enum a code is of. */
typedef enum TmsErrorDomain
{
	TMS_ERROR_NONE = 0,			/* code 0: no error */
	TMS_ERROR_IO,				/* an IoErrorCode */
	TMS_ERROR_ICEBERG,			/* an IcebergErrorCode */
	TMS_ERROR_ENGINE			/* an EngineErrorCode */
} TmsErrorDomain;

typedef struct TmsError
{
	int			code;			/* IoErrorCode, IcebergErrorCode or
								 * EngineErrorCode; 0: no error */
	IoErrorCode io_code;		/* the io failure underneath, when another
								 * layer wrapped one (tms_error_wrap); else
								 * IO_OK */
	long		http_status;	/* 0 when no HTTP response was received */
	char		message[512];	/* what failed */
	char		detail[1024];	/* names the bad value, or a server's text */
	char		hint[1024];		/* what to do about it, if anything */
} TmsError;

/* Reset *err to "no error" with empty texts (NULL-safe). */
extern void tms_error_clear(TmsError *err);

/* The layer a code belongs to. */
extern TmsErrorDomain tms_error_domain(int code);

/* Short stable name of a code ("timeout", "malformed", ...). */
extern const char *tms_error_code_name(int code);

/*
 * Set code and message (a printf format); http_status, io_code, detail
 * and hint are cleared.  Returns -1, so that a function returning -1 on
 * failure can "return tms_error_set(...)"; a function returning bool sets
 * the error and then returns false.  err may be NULL.
 */
extern int	tms_error_set(TmsError *err, int code, const char *fmt,...)
			TMS_ERROR_PRINTF(3, 4);

/* tms_error_set for a failed HTTP exchange: records its status too. */
extern int	tms_error_set_http(TmsError *err, int code, long http_status,
							   const char *fmt,...) TMS_ERROR_PRINTF(4, 5);

/*
 * Wrap an io failure (*under) under another layer's code: code, message
 * (printf format), io_code = under's io code (IO_ERR_STORAGE when under
 * holds none), under's HTTP status, and "under's message: under's detail"
 * as detail.  Returns -1.
 */
extern int	tms_error_wrap(TmsError *err, int code, const TmsError *under,
						   const char *fmt,...) TMS_ERROR_PRINTF(4, 5);

/* Set the detail (printf format) of an error already set. */
extern void tms_error_detail(TmsError *err, const char *fmt,...)
			TMS_ERROR_PRINTF(2, 3);

/*
 * Set the detail to a server's own text (len bytes, truncated, control
 * characters blanked so it is safe in a log line).
 */
extern void tms_error_detail_raw(TmsError *err, const char *text, size_t len);

/* Set the hint (printf format) of an error already set. */
extern void tms_error_hint(TmsError *err, const char *fmt,...)
			TMS_ERROR_PRINTF(2, 3);

#endif							/* TMS_IO_ERROR_H */
