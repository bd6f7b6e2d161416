/*-------------------------------------------------------------------------
 *
 * io_int.h
 *		Private declarations shared by the files of src/io/: the growable
 *		string buffer (strbuf.h, shared with the layers above), error
 *		helpers, JSON parsing under a budget and the
 *		HTTP core.
 *
 * Not part of the layer's interface (that is io.h); nothing outside
 * src/io/, its unit test and its fuzz targets includes this file.
 *
 * src/io/io_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_INT_H
#define TMS_IO_INT_H

#include "io/io.h"
#include "io/util/jsonmem.h"
#include "io/util/strbuf.h"

/* Overwrite a secret's bytes (not optimised away), then free it; NULL-safe. */
extern void io_wipe_free(char *s);

/* io_string_list_free for lists that may hold secrets: every item wiped. */
extern void io_string_list_wipe(IoStringList *list);

/* Append key=value to an application/x-www-form-urlencoded body, the value
 * percent-encoded (sb->oom on failure; the encoded copy is wiped). */
extern void io_form_add(IoStrBuf *sb, const char *key, const char *value);
extern bool io_str_has_prefix(const char *s, const char *prefix);

/*
 * Percent-decode s[0..len) into a malloc'd string (no '+' handling).  For
 * SigV4's canonical query string only: no path or location is ever
 * decoded in this layer.
 */
extern char *io_uri_decode(const char *s, size_t len);

/* ---- JSON under a memory budget (jsonmem.c) ---- */

struct json_t;

/*
 * Parse text[0..len) with jansson under a budget of max_bytes (0: the
 * default): the document (any JSON value), or NULL with *err:
 * IO_ERR_TOO_LARGE naming max_json_bytes when the budget was exceeded,
 * IO_ERR_PROTOCOL when the text is not JSON, IO_ERR_INTERNAL when
 * io_init() was not called.  what names the response in messages.
 */
extern struct json_t *io_json_parse(const char *text, size_t len,
									size_t max_bytes, const char *what,
									TmsError *err);


/*
 * Sleep ms milliseconds in slices, polling the interrupt callback.
 * Returns -1 (with *err INTERRUPTED) when interrupted.
 */
extern int	io_sleep_ms(const IoHttpOptions *opt, long ms, TmsError *err);

/* ---- HTTP core (http.c) ---- */

typedef struct IoHttpRequest
{
	const char *method;			/* "GET", "PUT", ... */
	const char *url;
	const char *const *headers; /* "Name: value" lines */
	size_t		nheaders;
	const void *body;
	size_t		body_len;
	bool		idempotent;		/* may be retried after failures */
	const char *what;			/* "catalog", "S3": for messages */
	int			attempt;		/* for the observer: 0 the first, n the n-th
								 * retry (io_http_perform counts its own) */

	/*
	 * NULL, or a function that makes the headers of every attempt anew, in
	 * place of headers (io_http_perform only): a signature over the current
	 * date must be fresh on each retry.  It fills *lines ("Name: value",
	 * malloc'd), which the core wipes and frees after the attempt; it must
	 * not send requests itself.  0, or -1 with *err, which ends the request.
	 */
	int			(*attempt_headers) (void *arg, IoStringList *lines, TmsError *err);
	void	   *attempt_arg;
} IoHttpRequest;

typedef struct IoHttpResponse
{
	long		status;
	char	   *body;			/* NUL-terminated, malloc'd */
	size_t		body_len;
	IoStringList headers;		/* "name: value" lines, as received */
	bool		sent;			/* request may have reached the server */
} IoHttpResponse;

/*
 * Perform a request, retrying idempotent ones on transport errors and on
 * 429/500/502/503/504 with exponential backoff and jitter.  Returns 0 when a
 * response arrived (any status; caller checks resp->status), -1 with *err
 * on transport failure, timeout, interrupt or oversize.  resp must be
 * freed with io_http_response_free in both cases.
 */
extern int	io_http_perform(const IoHttpOptions *opt, const IoHttpRequest *req,
							IoHttpResponse *resp, TmsError *err);
extern void io_http_response_free(IoHttpResponse *resp);

/* Value of a response header (case-insensitive), borrowed, or NULL. */
extern const char *io_http_header(const IoHttpResponse *resp, const char *name,
								  size_t *len);

/* Is an HTTP status worth retrying (429, 500, 502, 503, 504)? */
extern bool io_http_retryable_status(long status);

/*
 * Wall-clock milliseconds since the epoch (CLOCK_REALTIME): for what a
 * peer dates (an HTTP date, a credential's expiry), never for intervals
 * (io_now_ms).
 */
extern int64_t io_wall_ms(void);

/*
 * A UUIDv7 (RFC 9562, 5.7: the unix time in ms in the first 48 bits,
 * version 7, variant 10, the rest from RAND_bytes) as 36 lowercase
 * characters and a NUL into out (at least 37 bytes): the Idempotency-Key
 * of a catalog request.  0, or -1 with *err when no randomness is had.
 */
extern int	io_make_uuid7(char *out, TmsError *err);

/* Longest ISO-8601 duration io_parse_iso_duration_ms accepts: a year. */
#define IO_MAX_ISO_DURATION_MS	(366LL * 86400000LL)

/*
 * Parse an ISO-8601 duration of fixed length ("PT30M", "P1DT2H",
 * "PT1.5S", "P2W": weeks, days, hours, minutes, seconds with a fraction
 * kept to the ms) into *ms.  Years and months (no fixed length), signs,
 * an empty "P" or "PT", designators out of order and anything over
 * IO_MAX_ISO_DURATION_MS are refused: false, *ms untouched.
 */
extern bool io_parse_iso_duration_ms(const char *s, int64_t *ms);

/*
 * What a 429 or 503 response asks for in its Retry-After header, in ms
 * from now_ms (wall-clock ms since the epoch; an HTTP date in the past: 0), at most
 * a minute; -1 when it asks nothing (no header, another status, or a
 * value that is neither seconds nor an HTTP date).
 */
extern long io_http_retry_after_ms(const IoHttpResponse *resp, int64_t now_ms);

/*
 * The wait before retry number attempt + 1 after resp (NULL: a transport
 * failure): the backoff (io_http_backoff_ms), or what the response's
 * Retry-After asks for when that is longer.
 */
extern long io_http_retry_delay_ms(const IoHttpOptions *opt, int attempt,
								   const IoHttpResponse *resp);

/*
 * The error code of an HTTP error status, as every client of this layer
 * reads it (callers refine it: the catalog's 404 kinds and commits):
 * 400/422 bad request, 401/419 unauthorized, 403 forbidden, 404 not
 * found, 409 already exists, 429 and 503 unavailable, 501 unsupported,
 * other 5xx server, anything else a protocol error.
 */
extern IoErrorCode io_http_status_code(long status);

/* Backoff before retry attempt+1: base * 2^attempt, capped, with jitter. */
extern long io_http_backoff_ms(const IoHttpOptions *opt, int attempt);

/*
 * A batch: up to nslots transfers in flight at once on one multi handle
 * (kept for the process's life, so its open connections serve the next
 * batch too), each slot with an easy handle reused from transfer to
 * transfer.  No retries here:
 * the caller decides per request.  The usage is
 *
 *		b = io_http_batch_create(opt, n, err);
 *		loop:
 *			io_http_batch_start(b, free_slot, req, err);	(any number)
 *			io_http_batch_wait(b, timeout, err);	(-1: interrupted, stop)
 *			while (io_http_batch_done(b, &slot, &rc, &resp, &rerr))
 *				... slot is free again; free resp ...
 *		io_http_batch_free(b);	(abandons transfers still in flight)
 *
 * Everything runs in the caller's thread: libcurl's callbacks only copy
 * bytes, and the interrupt callback of opt is polled in every wait.
 */
typedef struct IoHttpBatch IoHttpBatch;

extern IoHttpBatch *io_http_batch_create(const IoHttpOptions *opt, int nslots,
										 TmsError *err);
extern void io_http_batch_free(IoHttpBatch *b);

/*
 * Start req in a free slot.  The URL and headers are copied; a body must
 * outlive the transfer.  Returns 0, or -1 with *err.
 */
extern int	io_http_batch_start(IoHttpBatch *b, int slot, const IoHttpRequest *req,
								TmsError *err);

/*
 * Wait up to timeout_ms (at most IO_POLL_INTERVAL_MS) for network
 * activity and advance the transfers.  Returns 0, or -1 with *err when
 * interrupted (IO_ERR_INTERRUPTED) or libcurl failed as a whole.
 */
extern int	io_http_batch_wait(IoHttpBatch *b, long timeout_ms, TmsError *err);

/*
 * Hand back one finished transfer, if any: true with *slot (now free) and
 * *rc (0: *resp holds a response to free; -1: *err says why not).
 */
extern bool io_http_batch_done(IoHttpBatch *b, int *slot, int *rc,
							   IoHttpResponse *resp, TmsError *err);

/* ---- S3 requests (storage.c, storage_s3.c), shared with bulk_delete.c ---- */

#define IO_S3_MAX_LINES 16

/* A signed S3 request ready to send; req points into the fields below. */
typedef struct IoS3Request
{
	IoHttpRequest req;
	char	   *url;
	char	   *lines[IO_S3_MAX_LINES]; /* "Name: value", wiped when freed */
	size_t		nlines;
} IoS3Request;

/*
 * Refresh st's credentials when they expire within the margin (see
 * io_storage_set_refresh); a failure is left to the request that follows.
 */
extern void io_storage_refresh_if_due(IoStorage *st);

/* Was a response refused for its credentials (403, ExpiredToken, ...)? */
extern bool io_s3_credentials_refused(long status, const char *s3code);

/* The HTTP options of a storage handle (timeouts, interrupt callback). */
extern const IoHttpOptions *io_storage_http(const IoStorage *st);

/*
 * Build and sign (with the storage's current credentials) one request for
 * bucket/key; query is raw (already encoded) or NULL; extra headers are
 * signed too.  body must outlive the request.  Returns 0 (free with
 * io_s3_request_free), or -1 with *err.
 */
extern int	io_s3_request_build(IoStorage *st, const char *method, const char *bucket,
								const char *key, const char *query,
								const IoHeader *extra, size_t nextra,
								const void *body, size_t body_len,
								IoS3Request *r, TmsError *err);
extern void io_s3_request_free(IoS3Request *r);

/*
 * Append the header line "name: value" to r (S3, Azure and GCS requests
 * alike); false when r is full or out of memory (the request is then
 * freed by its builder).
 */
extern bool io_request_add_line(IoS3Request *r, const char *name, const char *value);

/*
 * Turn a non-2xx S3 response into *err (always -1): the code of the
 * status, the S3 error document's Code and Message in the detail, its
 * Code also into s3code_out when that is not NULL.
 */
extern int	io_s3_status_error(const IoHttpResponse *resp, const char *what,
							   const char *bucket, const char *key,
							   char *s3code_out, size_t s3code_size, TmsError *err);

/*
 * The DeleteObjects body for keys[0..n) (Quiet false) into *body (free
 * with io_sb_free) and its base64 Content-MD5 into md5b64.  0 or -1.
 */
extern int	io_s3_delete_body(const char *const *keys, size_t n, IoStrBuf *body,
							  char md5b64[32], TmsError *err);

/*
 * Read a 200 answer to DeleteObjects for keys[0..n) into results[0..n):
 * every key the answer names Deleted (or Error NoSuchKey) is deleted,
 * every other Error keeps its Code and Message, a key it does not name is
 * "NoResult".  0, or -1 with *err when the answer is not a DeleteResult.
 */
extern int	io_s3_delete_read(const IoHttpResponse *resp, const char *const *keys,
							  size_t n, IoDeleteResult *results, TmsError *err);

/* Options with defaults filled in. */
extern void io_http_options_resolve(const IoHttpOptions *in, IoHttpOptions *out);

#endif							/* TMS_IO_INT_H */
