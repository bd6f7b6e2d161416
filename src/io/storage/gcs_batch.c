/*-------------------------------------------------------------------------
 *
 * gcs_batch.c
 *		Google Cloud Storage, the JSON API batch of deletes
 *		(https://cloud.google.com/storage/docs/batch): the multipart/mixed
 *		body of up to IO_GCS_DELETE_MAX_KEYS DELETE requests and the reader
 *		of the multipart/mixed answer (storage_int.h).
 *
 * Pure functions of their input (no request is sent here), shared by the
 * one-request-at-a-time deletes of storage_gcs.c and the bulk deleter;
 * unit-tested and fuzzed.  Each part of the body is
 *
 *		--BOUNDARY
 *		Content-Type: application/http
 *		Content-Transfer-Encoding: binary
 *		Content-ID: <item-I>
 *
 *		DELETE /storage/v1/b/BUCKET/o/NAME HTTP/1.1
 *
 * with NAME percent-encoded ('/' too), and each part of the answer names
 * its request in "Content-ID: <response-item-I>" before an HTTP status
 * line, headers and a body.  The answer's parts are split by
 * batch_multipart.c (strict about the boundary, bounded by the answer's
 * length); a part without a status answers nothing (its key stays
 * "NoResult"): the reader never guesses.
 *
 * src/io/storage/gcs_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "io/storage/storage_int.h"

/* See storage_int.h. */
int
io_gcs_batch_body(const char *bucket, const char *const *keys, size_t n,
				  IoStrBuf *body, TmsError *err)
{
	char	   *eb = io_uri_encode(bucket, strlen(bucket), false);

	io_sb_init(body);
	if (eb == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	for (size_t i = 0; i < n; i++)
	{
		char	   *ek = io_uri_encode(keys[i], strlen(keys[i]), false);

		if (ek == NULL)
		{
			body->oom = true;
			break;
		}
		io_sb_printf(body,
					 "--%s\r\n"
					 "Content-Type: application/http\r\n"
					 "Content-Transfer-Encoding: binary\r\n"
					 "Content-ID: <item-%zu>\r\n"
					 "\r\n"
					 "DELETE /storage/v1/b/%s/o/%s HTTP/1.1\r\n"
					 "\r\n",
					 IO_GCS_BATCH_BOUNDARY, i, eb, ek);
		io_free(ek);
	}
	io_sb_printf(body, "--%s--\r\n", IO_GCS_BATCH_BOUNDARY);
	io_free(eb);
	if (body->oom)
	{
		io_sb_free(body);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* The result of one part: its status and, for a refusal, its JSON error. */
static void
part_result(long status, const char *body, size_t len, IoDeleteResult *r)
{
	TmsError	jerr;
	json_t	   *doc;
	const char *reason = NULL;
	const char *message = NULL;

	memset(r, 0, sizeof(*r));
	if ((status >= 200 && status < 300) || status == 404)
	{
		/* an object already gone is what we wanted */
		r->deleted = true;
		return;
	}
	if (status == 429 || status == 503)
	{
		snprintf(r->code, sizeof(r->code), "SlowDown");
		snprintf(r->message, sizeof(r->message), "HTTP status %ld", status);
		return;
	}
	doc = len > 0 ? io_json_parse(body, len, 65536, "GCS batch part", &jerr) : NULL;
	if (doc != NULL)
	{
		json_t	   *e = json_object_get(doc, "error");
		json_t	   *errs = json_object_get(e, "errors");

		message = json_string_value(json_object_get(e, "message"));
		reason = json_string_value(json_object_get(json_array_get(errs, 0), "reason"));
	}
	r->credentials = status == 401;
	snprintf(r->code, sizeof(r->code), "%s", reason ? reason : "HTTP");
	snprintf(r->message, sizeof(r->message), "HTTP status %ld%s%.200s", status,
			 message ? ": " : "", message ? message : "");
	json_decref(doc);
}

/* The state of reading an answer: the results, which are done. */
typedef struct GcsBatchRead
{
	size_t		n;
	IoDeleteResult *results;
	bool	   *done;
	size_t		pos;			/* the part's position, for one without an
								 * item */
} GcsBatchRead;

/*
 * The item number of a Content-ID "<response-item-I>", or -1.
 */
static long
content_item(const char *v, size_t len)
{
	const char *ve = v + len;
	const char *r = NULL;
	long		item = 0;
	int			digits = 0;

	for (const char *q = v; q + 5 <= ve; q++)
		if (strncmp(q, "item-", 5) == 0)
			r = q + 5;
	if (r == NULL)
		return -1;
	while (r < ve && digits < 9 && *r >= '0' && *r <= '9')
	{
		item = item * 10 + (*r++ - '0');
		digits++;
	}
	return digits > 0 && (r == ve || *r == '>') ? item : -1;
}

/* One part of the answer: the result of its item (or of its position). */
static void
gcs_part(const IoBatchPart *part, void *arg)
{
	GcsBatchRead *rd = arg;
	long		item = part->content_id ? content_item(part->content_id, part->content_id_len) : -1;
	size_t		i = item >= 0 ? (size_t) item : rd->pos;

	rd->pos++;
	if (part->status == 0 || i >= rd->n || rd->done[i])
		return;
	part_result(part->status, part->body, part->body_len, &rd->results[i]);
	rd->done[i] = true;
}

/* See storage_int.h. */
int
io_gcs_batch_read(const char *content_type, const char *body, size_t len, size_t n,
				  IoDeleteResult *results, TmsError *err)
{
	GcsBatchRead rd = {n, results, NULL, 0};
	int			rc;

	rd.done = io_calloc(n ? n : 1, sizeof(bool));
	if (rd.done == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = io_batch_parts(content_type, body, len, gcs_part, &rd, "GCS", 200, err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!rd.done[i])
		{
			results[i].deleted = false;
			snprintf(results[i].code, sizeof(results[i].code), "NoResult");
			snprintf(results[i].message, sizeof(results[i].message),
					 "the server's batch answer does not mention this object");
		}
	io_free(rd.done);
	return rc;
}
