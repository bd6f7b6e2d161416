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
 * Lines end in CRLF; the answer is read with CRLF or LF.
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

/*
 * The next line of [*p, end): its start and length without CR LF; *p
 * moves past it.  False at the end.
 */
static bool
next_line(const char **p, const char *end, const char **line, size_t *len)
{
	const char *nl;

	if (*p >= end)
		return false;
	*line = *p;
	nl = memchr(*p, '\n', (size_t) (end - *p));
	*len = nl ? (size_t) (nl - *p) : (size_t) (end - *p);
	*p = nl ? nl + 1 : end;
	if (*len > 0 && (*line)[*len - 1] == '\r')
		(*len)--;
	return true;
}

/* Is line[0..len) header name (any case) with a ':'?  Its value then. */
static const char *
header_is(const char *line, size_t len, const char *name, size_t *vlen)
{
	size_t		nl = strlen(name);
	const char *v;

	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return NULL;
	v = line + nl + 1;
	while (v < line + len && (*v == ' ' || *v == '\t'))
		v++;
	*vlen = (size_t) (line + len - v);
	return v;
}

/* Read one part [p, end) into results (n entries, done marks). */
static void
read_part(const char *p, const char *end, size_t n, size_t *order,
		  IoDeleteResult *results, bool *done)
{
	const char *line;
	size_t		len,
				vlen;
	const char *v;
	long		id = -1;
	long		status = 0;
	char		reason[128] = "";
	char		code[64] = "";
	IoDeleteResult *r;

	/* the rest of the delimiter's line, then the part's own headers */
	(void) next_line(&p, end, &line, &len);
	while (next_line(&p, end, &line, &len) && len > 0)
		if ((v = header_is(line, len, "Content-ID", &vlen)) != NULL)
			id = vlen > 0 && vlen < 12 ? strtol(v, NULL, 10) : -1;
	/* the status line of the sub-response */
	if (!next_line(&p, end, &line, &len) || len < 12 || strncmp(line, "HTTP/1.", 7) != 0)
		return;
	status = strtol(line + 9, NULL, 10);
	if (len > 13)
		snprintf(reason, sizeof(reason), "%.*s", (int) (len - 13), line + 13);
	while (next_line(&p, end, &line, &len) && len > 0)
		if ((v = header_is(line, len, "x-ms-error-code", &vlen)) != NULL)
			snprintf(code, sizeof(code), "%.*s", (int) (vlen < 63 ? vlen : 63), v);
	if (code[0] == '\0' && p < end)
	{
		const char *c = strstr(p, "<Code>");
		const char *ce = c ? strstr(c, "</Code>") : NULL;

		if (c != NULL && ce != NULL && ce < end)
			snprintf(code, sizeof(code), "%.*s", (int) (ce - c - 6 < 63 ? ce - c - 6 : 63), c + 6);
	}
	if (id < 0 || (size_t) id >= n || done[id])
	{
		/* no usable Content-ID: by order */
		while (*order < n && done[*order])
			(*order)++;
		if (*order >= n)
			return;
		id = (long) *order;
	}
	done[id] = true;
	r = &results[id];
	r->deleted = status == 202 || status == 200 || status == 404;
	if (status == 202 || status == 200)
	{
		r->code[0] = '\0';
		r->message[0] = '\0';
		return;
	}
	r->credentials = status == 401 || status == 403;
	if (code[0] == '\0')
		snprintf(code, sizeof(code), "HTTP %ld", status);
	snprintf(r->code, sizeof(r->code), "%s", code);
	snprintf(r->message, sizeof(r->message), "%s", reason);
}

/* See storage_int.h. */
int
io_azure_batch_read(const IoHttpResponse *resp, size_t n, IoDeleteResult *results,
					TmsError *err)
{
	size_t		blen = 0;
	const char *ct = io_http_header(resp, "content-type", &blen);
	const char *b;
	char		delim[128];
	size_t		dlen;
	const char *p;
	const char *end = resp->body + resp->body_len;
	size_t		order = 0;
	bool	   *done;

	b = ct ? strstr(ct, "boundary=") : NULL;
	if (b == NULL || b >= ct + blen)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, resp->status,
								  "unexpected Azure batch response: no multipart boundary");
	b += 9;
	blen = (size_t) (ct + blen - b);
	if (blen > 0 && b[0] == '"')
	{
		b++;
		blen = strcspn(b, "\"");
	}
	else
		blen = strcspn(b, "; \r\n") < blen ? strcspn(b, "; \r\n") : blen;
	if (blen == 0 || blen > 100)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, resp->status,
								  "unexpected Azure batch response: bad multipart boundary");
	dlen = (size_t) snprintf(delim, sizeof(delim), "--%.*s", (int) blen, b);
	done = io_calloc(n ? n : 1, sizeof(bool));
	if (done == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	p = resp->body ? strstr(resp->body, delim) : NULL;
	while (p != NULL && p + dlen <= end)
	{
		const char *start = p + dlen;
		const char *next;

		if (start + 2 <= end && start[0] == '-' && start[1] == '-')
			break;				/* the closing delimiter */
		next = strstr(start, delim);
		read_part(start, next ? next : end, n, &order, results, done);
		p = next;
	}
	for (size_t i = 0; i < n; i++)
		if (!done[i])
		{
			results[i].deleted = false;
			snprintf(results[i].code, sizeof(results[i].code), "NoResult");
			snprintf(results[i].message, sizeof(results[i].message),
					 "the server's batch answer does not mention this blob");
		}
	io_free(done);
	return 0;
}
