/*-------------------------------------------------------------------------
 *
 * io_error.h
 *		The error value of the io layer (IoError), on its own so that
 *		fileio.h, and through it the iceberg layer, can name it without
 *		the rest of io.h.
 *
 * Rules: plain C, no PostgreSQL header.  An IoError message is a
 * lowercase one-line primary message without a trailing period; detail
 * holds a server's own text, if any.  Neither ever contains a secret
 * (key, token, password).
 *
 * src/io/io_error.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_ERROR_H
#define TMS_IO_ERROR_H

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

typedef struct IoError
{
	IoErrorCode code;
	long		http_status;	/* 0 when no HTTP response was received */
	char		message[512];	/* what failed, no secrets */
	char		detail[1024];	/* the server's own error text, if any */
} IoError;

/* Clear an IoError to IO_OK. */
extern void io_error_clear(IoError *err);

/* Short stable name of an error code ("timeout", "conflict", ...). */
extern const char *io_error_code_name(IoErrorCode code);

#endif							/* TMS_IO_ERROR_H */
