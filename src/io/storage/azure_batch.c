/*-------------------------------------------------------------------------
 *
 * azure_batch.c
 *		Azure Blob Batch (https://learn.microsoft.com/rest/api/
 *		storageservices/blob-batch): the multipart/mixed body of Delete
 *		Blob sub-requests and the reader of its multipart/mixed answer,
 *		shared by io_storage_delete (storage_azure.c) and the bulk deleter
 *		(bulk_delete.c).
 *
 * Every sub-request is authorised as a request of its own: it is built
 * by io_azure_request_build exactly as a lone Delete Blob would be, and
 * its path, query (a SAS token) and header lines are copied into the
 * body, which therefore holds secrets: callers wipe it (io_sb_wipe_free).
 * Lines end in CRLF; the answer's parts are split by batch_multipart.c.
 *
 * A sub-response is matched to its sub-request by its Content-ID (the
 * index we gave), else by its order.  202 is deleted; 404 (BlobNotFound)
 * is what we wanted too; anything else keeps its Azure error code
 * (x-ms-error-code, else the Code of its error document, else
 * "HTTP <status>") and its reason phrase; a 401 or 403 is marked refused
 * for its credentials (a SAS that expired while the batch ran: Azure
 * authorises every sub-request on its own).  A sub-request the answer does
 * not mention is "NoResult", never deleted.
 *
 * src/io/storage/azure_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io_int.h"
#include "io/storage/storage_int.h"

/* Append one sub-request (Content-ID id) for key to body. */
static int
sub_request(IoStorage *st, const IoParsedUri *u, const char *key, size_t id,
			const char *boundary, IoStrBuf *body, TmsError *err)
{
	IoS3Request r;
	const char *p;

	if (io_azure_request_build(st, "DELETE", u, key, NULL, NULL, 0, NULL, 0, &r, err) != 0)
		return -1;
	p = strstr(r.url, "://");
	p = p ? strchr(p + 3, '/') : NULL;
	io_sb_printf(body, "--%s\r\nContent-Type: application/http\r\n"
				 "Content-Transfer-Encoding: binary\r\nContent-ID: %zu\r\n\r\n"
				 "DELETE %s HTTP/1.1\r\n", boundary, id, p ? p : "/");
	for (size_t i = 0; i < r.nlines; i++)
		io_sb_printf(body, "%s\r\n", r.lines[i]);
	io_sb_puts(body, "Content-Length: 0\r\n\r\n");
	io_s3_request_free(&r);
	return 0;
}

/* See storage_int.h. */
int
io_azure_batch_body(IoStorage *st, const IoParsedUri *u, const char *const *keys,
					size_t n, IoStrBuf *body, char *ctype, size_t ctype_size,
					TmsError *err)
{
	char		uuid[40];
	char		boundary[48];

	io_sb_init(body);
	if (n < 1 || n > IO_AZURE_DELETE_MAX_KEYS)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "a Blob Batch request takes 1 to %d blobs, not %zu",
							 IO_AZURE_DELETE_MAX_KEYS, n);
	if (io_make_uuid7(uuid, err) != 0)
		return -1;
	snprintf(boundary, sizeof(boundary), "batch_%s", uuid);
	snprintf(ctype, ctype_size, "multipart/mixed; boundary=%s", boundary);
	for (size_t i = 0; i < n; i++)
		if (sub_request(st, u, keys[i], i, boundary, body, err) != 0)
		{
			io_sb_wipe_free(body);
			return -1;
		}
	io_sb_printf(body, "--%s--\r\n", boundary);
	if (body->oom)
	{
		io_sb_wipe_free(body);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* The state of reading an answer: the results, which are done. */
typedef struct AzureBatchRead
{
	size_t		n;
	IoDeleteResult *results;
	bool	   *done;
	size_t		order;			/* the next result not done, for a part
								 * without an id */
} AzureBatchRead;

/* n, at most max. */
static int
clipped(size_t n, size_t max)
{
	return (int) (n < max ? n : max);
}

/* The Code of an error document body[0..len), into code; false: none. */
static bool
document_code(const char *body, size_t len, char *code, size_t size)
{
	const char *end = body + len;
	const char *c = NULL;
	const char *ce = NULL;

	for (const char *q = body; q + 6 <= end; q++)
		if (memcmp(q, "<Code>", 6) == 0)
		{
			c = q + 6;
			break;
		}
	for (const char *q = c; q != NULL && q + 7 <= end; q++)
		if (memcmp(q, "</Code>", 7) == 0)
		{
			ce = q;
			break;
		}
	if (ce == NULL)
		return false;
	snprintf(code, size, "%.*s", clipped((size_t) (ce - c), size - 1), c);
	return true;
}

/* One part of the answer: the result of its Content-ID (or the next one). */
static void
azure_part(const IoBatchPart *part, void *arg)
{
	AzureBatchRead *rd = arg;
	long		id = -1;
	char		code[64] = "";
	const char *v;
	size_t		vlen;
	IoDeleteResult *r;

	if (part->status == 0)
		return;
	if (part->content_id != NULL && part->content_id_len > 0 && part->content_id_len < 12)
	{
		char		buf[12];
		char	   *stop;

		memcpy(buf, part->content_id, part->content_id_len);
		buf[part->content_id_len] = '\0';
		id = strtol(buf, &stop, 10);
		if (stop == buf || *stop != '\0')
			id = -1;
	}
	if (id < 0 || (size_t) id >= rd->n || rd->done[id])
	{
		/* no usable Content-ID: by order */
		while (rd->order < rd->n && rd->done[rd->order])
			rd->order++;
		if (rd->order >= rd->n)
			return;
		id = (long) rd->order;
	}
	rd->done[id] = true;
	r = &rd->results[id];
	r->deleted = part->status == 202 || part->status == 200 || part->status == 404;
	if (part->status == 202 || part->status == 200)
	{
		r->code[0] = '\0';
		r->message[0] = '\0';
		return;
	}
	r->credentials = part->status == 401 || part->status == 403;
	if ((v = io_batch_part_header(part, "x-ms-error-code", &vlen)) != NULL)
		snprintf(code, sizeof(code), "%.*s", clipped(vlen, sizeof(code) - 1), v);
	else if (!document_code(part->body, part->body_len, code, sizeof(code)))
		snprintf(code, sizeof(code), "HTTP %ld", part->status);
	snprintf(r->code, sizeof(r->code), "%s", code);
	snprintf(r->message, sizeof(r->message), "%.*s",
			 clipped(part->reason_len, sizeof(r->message) - 1),
			 part->reason ? part->reason : "");
}

/* See storage_int.h. */
int
io_azure_batch_read(const IoHttpResponse *resp, size_t n, IoDeleteResult *results,
					TmsError *err)
{
	AzureBatchRead rd = {n, results, NULL, 0};
	int			rc;

	rd.done = io_calloc(n ? n : 1, sizeof(bool));
	if (rd.done == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = io_batch_parts(io_http_header(resp, "content-type", NULL), resp->body,
						resp->body_len, azure_part, &rd, "Azure", resp->status, err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (!rd.done[i])
		{
			results[i].deleted = false;
			snprintf(results[i].code, sizeof(results[i].code), "NoResult");
			snprintf(results[i].message, sizeof(results[i].message),
					 "the server's batch answer does not mention this blob");
		}
	io_free(rd.done);
	return rc;
}
