/*-------------------------------------------------------------------------
 *
 * bulk_delete.c
 *		Bulk deletes with several requests in flight (io.h, IoDeleter):
 *		S3 DeleteObjects requests, Azure Blob Batch requests or GCS
 *		deletes (JSON API batches, or one XML API DELETE with HMAC keys),
 *		one per slot, run at once on the HTTP core's batch multi handle,
 *		each answer read into the caller's results as it arrives.
 *
 * The request body and the reader of its answer are storage_s3.c's (and
 * azure_batch.c's, storage_gcs.c's), the same as io_storage_delete's (one
 * rule, one implementation).  Nothing is
 * retried here: the caller decides what to send again and when, because
 * the answer to "the storage asks us to slow down" is a matter of the
 * whole process (and, inside PostgreSQL, of every process deleting on the
 * same storage), not of one request.  So every answer is classified for
 * it: refused as a whole for throttling (503, 429, SlowDown, Azure's
 * ServerBusy and OperationTimedOut, with what a Retry-After asks), keys
 * refused for throttling inside a 200 or 202 (io_delete_code_throttled),
 * or failed.
 *
 * A request is signed when it starts, with the storage's credentials of
 * that moment (refreshed first when they are about to expire, see
 * io_storage_set_refresh); a request refused for its credentials says so
 * (IoDeleteDone.credentials), and so do keys of a batch refused for them
 * inside its answer (IoDeleteDone.ncredentials): the caller may refresh
 * them and send the request, or those keys, again.  Everything runs in
 * the caller's thread; the storage's interrupt callback is polled in
 * every wait.
 *
 * src/io/storage/bulk_delete.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_int.h"
#include "io/storage/storage_int.h"

typedef struct DeleterSlot
{
	bool		busy;
	bool		azure;			/* a Blob Batch request */
	bool		gcs;			/* a GCS delete */
	char		bucket[256];
	IoParsedUri *parsed;		/* n parsed URIs */
	const char **keys;			/* their keys */
	size_t		n;
	IoDeleteResult *results;	/* the caller's */
	IoStrBuf	body;			/* must outlive the transfer */
} DeleterSlot;

struct IoDeleter
{
	IoStorage  *st;
	IoHttpBatch *batch;
	int			nslots;
	DeleterSlot *slots;
};

/* See io.h. */
bool
io_delete_code_throttled(const char *code)
{
	return code != NULL &&
		(strcmp(code, "SlowDown") == 0 || strcmp(code, "ServiceUnavailable") == 0 ||
		 strcmp(code, "InternalError") == 0 || strcmp(code, "ServerBusy") == 0 ||
		 strcmp(code, "OperationTimedOut") == 0);
}

static void
slot_clear(DeleterSlot *s)
{
	if (s->parsed != NULL)
		for (size_t i = 0; i < s->n; i++)
			io_uri_free(&s->parsed[i]);
	io_free(s->parsed);
	io_free(s->keys);
	io_sb_wipe_free(&s->body);
	memset(s, 0, sizeof(*s));
}

/* See io.h. */
IoDeleter *
io_deleter_create(IoStorage *st, int nslots, TmsError *err)
{
	IoDeleter  *d;

	if (nslots < 1)
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "a deleter needs at least one slot");
		return NULL;
	}
	d = io_calloc(1, sizeof(IoDeleter));
	if (d == NULL || (d->slots = io_calloc(nslots, sizeof(DeleterSlot))) == NULL)
	{
		io_free(d);
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	d->st = st;
	d->nslots = nslots;
	d->batch = io_http_batch_create(io_storage_http(st), nslots, err);
	if (d->batch == NULL)
	{
		io_free(d->slots);
		io_free(d);
		return NULL;
	}
	return d;
}

/* See io.h. */
void
io_deleter_free(IoDeleter *d)
{
	if (d == NULL)
		return;
	/* abandons the transfers in flight first: their bodies go after */
	io_http_batch_free(d->batch);
	for (int i = 0; i < d->nslots; i++)
		slot_clear(&d->slots[i]);
	io_free(d->slots);
	io_free(d);
}

/* See io.h. */
int
io_deleter_start(IoDeleter *d, int slot, const char *const *uris, size_t n,
				 IoDeleteResult *results, TmsError *err)
{
	DeleterSlot *s;
	char		md5b64[32];
	IoHeader	h[2];
	IoS3Request req;
	int			rc;

	if (slot < 0 || slot >= d->nslots || d->slots[slot].busy)
		return tms_error_set(err, IO_ERR_INTERNAL, "delete slot %d is not free", slot);
	if (n < 1 || n > IO_S3_DELETE_MAX_KEYS)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "a delete request takes 1 to %d objects of one bucket, not %zu",
							 IO_S3_DELETE_MAX_KEYS, n);
	s = &d->slots[slot];
	s->parsed = io_calloc(n, sizeof(IoParsedUri));
	s->keys = io_calloc(n, sizeof(char *));
	if (s->parsed == NULL || s->keys == NULL)
	{
		slot_clear(s);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
	{
		const IoParsedUri *p0 = &s->parsed[0];
		const IoParsedUri *pi = &s->parsed[i];

		if (io_uri_parse(uris[i], &s->parsed[i], err) != 0)
		{
			slot_clear(s);
			return -1;
		}
		s->n = i + 1;
		if (pi->scheme == IO_URI_FILE || pi->path[0] == '\0' ||
			(i > 0 && (pi->scheme != p0->scheme || strcmp(pi->bucket, p0->bucket) != 0 ||
					   (pi->scheme == IO_URI_AZURE && strcmp(pi->account, p0->account) != 0))) ||
			strlen(pi->bucket) >= sizeof(s->bucket) ||
			n > io_storage_scheme_delete_max(d->st, pi->scheme))
		{
			slot_clear(s);
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "\"%.300s\" is not an object of the request's bucket", uris[i]);
		}
		s->keys[i] = s->parsed[i].path;
	}
	snprintf(s->bucket, sizeof(s->bucket), "%s", s->parsed[0].bucket);
	s->azure = s->parsed[0].scheme == IO_URI_AZURE;
	s->gcs = s->parsed[0].scheme == IO_URI_GCS;
	io_storage_refresh_if_due(d->st);
	if (s->gcs)
		rc = io_gcs_delete_request(d->st, s->bucket, s->keys, n, &s->body, &req, err);
	else if (s->azure)
	{
		char		ctype[96];
		IoParsedUri account = s->parsed[0];
		bool		whole = io_azure_account_sas(d->st, account.account);

		if (io_azure_batch_body(d->st, &s->parsed[0], s->keys, n, &s->body, ctype,
								sizeof(ctype), err) != 0)
		{
			slot_clear(s);
			return -1;
		}
		/* an account SAS: the account's batch; else the container's */
		account.bucket = "";
		h[0].name = "content-type";
		h[0].value = ctype;
		rc = io_azure_request_build(d->st, "POST", whole ? &account : &s->parsed[0], NULL,
									whole ? "comp=batch" : "restype=container&comp=batch",
									h, 1, s->body.data, s->body.len, &req, err);
	}
	else
	{
		if (io_s3_delete_body(s->keys, n, &s->body, md5b64, err) != 0)
		{
			slot_clear(s);
			return -1;
		}
		h[0].name = "content-md5";
		h[0].value = md5b64;
		h[1].name = "content-type";
		h[1].value = "application/xml";
		rc = io_s3_request_build(d->st, "POST", s->bucket, "", "delete=", h, 2, s->body.data,
								 s->body.len, &req, err);
	}
	if (rc != 0)
	{
		slot_clear(s);
		return -1;
	}
	/* the URL and the header lines are copied: the signed lines go at once */
	rc = io_http_batch_start(d->batch, slot, &req.req, err);
	io_s3_request_free(&req);
	if (rc != 0)
	{
		slot_clear(s);
		return -1;
	}
	s->results = results;
	s->busy = true;
	return 0;
}

/* See io.h. */
int
io_deleter_retries(const IoDeleter *d)
{
	IoHttpOptions opt;

	io_http_options_resolve(io_storage_http(d->st), &opt);
	return opt.retries;
}

/* See io.h. */
long
io_deleter_backoff_ms(const IoDeleter *d, int attempt)
{
	IoHttpOptions opt;

	io_http_options_resolve(io_storage_http(d->st), &opt);
	return io_http_backoff_ms(&opt, attempt);
}

/* See io.h. */
int
io_deleter_wait(IoDeleter *d, long timeout_ms, TmsError *err)
{
	return io_http_batch_wait(d->batch, timeout_ms, err);
}

/* See io.h. */
bool
io_deleter_done(IoDeleter *d, IoDeleteDone *out)
{
	IoHttpResponse resp;
	TmsError	rerr;
	int			slot;
	int			rc;
	DeleterSlot *s;

	if (!io_http_batch_done(d->batch, &slot, &rc, &resp, &rerr))
		return false;
	s = &d->slots[slot];
	memset(out, 0, sizeof(*out));
	out->slot = slot;
	out->retry_after_ms = -1;
	tms_error_clear(&out->err);
	if (rc != 0)
	{
		out->rc = -1;
		out->err = rerr;
	}
	else if (s->azure && resp.status == 202)
	{
		out->rc = io_azure_batch_read(&resp, s->n, s->results, &out->err);
		for (size_t i = 0; out->rc == 0 && i < s->n; i++)
			if (!s->results[i].deleted && io_delete_code_throttled(s->results[i].code))
				out->nthrottled++;
			else if (!s->results[i].deleted && s->results[i].credentials)
				out->ncredentials++;
	}
	else if (s->azure)
	{
		char		code[64];

		out->rc = io_azure_status_error(&resp, "delete blobs in", &s->parsed[0], "", code,
										sizeof(code), &out->err);
		snprintf(out->s3code, sizeof(out->s3code), "%s", code);
		out->throttled = io_azure_throttled(resp.status, code);
		out->credentials = resp.status == 401 || resp.status == 403;
		out->retry_after_ms = io_http_retry_after_ms(&resp, io_wall_ms());
	}
	else if (s->gcs)
	{
		out->rc = io_gcs_delete_answer(d->st, &resp, s->bucket, s->keys, s->n, s->results,
									   &out->throttled, &out->credentials, &out->err);
		if (out->rc != 0)
			out->retry_after_ms = io_http_retry_after_ms(&resp, io_wall_ms());
		for (size_t i = 0; out->rc == 0 && i < s->n; i++)
			if (!s->results[i].deleted && io_delete_code_throttled(s->results[i].code))
				out->nthrottled++;
			else if (!s->results[i].deleted && s->results[i].credentials)
				out->ncredentials++;
	}
	else if (resp.status == 200)
	{
		out->rc = io_s3_delete_read(&resp, s->keys, s->n, s->results, &out->err);
		for (size_t i = 0; out->rc == 0 && i < s->n; i++)
			if (!s->results[i].deleted && io_delete_code_throttled(s->results[i].code))
				out->nthrottled++;
			else if (!s->results[i].deleted && s->results[i].credentials)
				out->ncredentials++;
	}
	else
	{
		char		code[64];

		out->rc = io_s3_status_error(&resp, "delete objects in", s->bucket, "", code,
									 sizeof(code), &out->err);
		snprintf(out->s3code, sizeof(out->s3code), "%s", code);
		out->throttled = resp.status == 503 || resp.status == 429 ||
			strcmp(code, "SlowDown") == 0;
		out->credentials = io_s3_credentials_refused(resp.status, code);
		out->retry_after_ms = io_http_retry_after_ms(&resp, io_wall_ms());
	}
	io_http_response_free(&resp);
	slot_clear(s);
	return true;
}
