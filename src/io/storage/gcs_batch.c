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
 * line, headers and a body.  The reader is strict about the boundary and
 * bounded by the answer's length; a part it cannot read answers nothing
 * (its key stays "NoResult"), it never guesses.
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

/*
 * The boundary parameter of a multipart Content-Type into buf: 0, or -1
 * when there is none (or it is longer than RFC 2046's 70 characters).
 */
static int
content_type_boundary(const char *ct, char *buf, size_t size)
{
	const char *p;
	size_t		n = 0;

	if (ct == NULL || strncasecmp(ct, "multipart/", 10) != 0)
		return -1;
	for (p = ct; (p = strchr(p, ';')) != NULL;)
	{
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) != 0)
			continue;
		p += 9;
		if (*p == '"')
		{
			p++;
			while (p[n] != '\0' && p[n] != '"')
				n++;
		}
		else
			while (p[n] != '\0' && p[n] != ';' && p[n] != ' ' && p[n] != '\t' &&
				   p[n] != '\r' && p[n] != '\n')
				n++;
		if (n == 0 || n > 70 || n >= size)
			return -1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		return 0;
	}
	return -1;
}

/* The end of the line starting at p (its '\n' or end), within end. */
static const char *
line_end(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t) (end - p));

	return nl ? nl : end;
}

/* The start of the line after the one starting at p (end: none). */
static const char *
next_line(const char *p, const char *end)
{
	const char *e = line_end(p, end);

	return e < end ? e + 1 : end;
}

/*
 * The decimal number of at most 9 digits at p, read no further than end
 * (the answer is not NUL-terminated): -1 when there is none; *stop after it.
 */
static long
bounded_number(const char *p, const char *end, const char **stop)
{
	long		v = 0;
	int			n = 0;

	while (p < end && n < 9 && *p >= '0' && *p <= '9')
	{
		v = v * 10 + (*p++ - '0');
		n++;
	}
	*stop = p;
	return n > 0 ? v : -1;
}

/* Length of the line p..e without its CR. */
static size_t
line_len(const char *p, const char *e)
{
	return (size_t) (e - p) - (e > p && e[-1] == '\r' ? 1 : 0);
}

/*
 * The header block starting at *p (up to its blank line, which is
 * skipped): the Content-ID's item number, if any, into *item (else left).
 * Returns false when the block does not end within end.
 */
static bool
skip_headers(const char **p, const char *end, long *item)
{
	while (*p < end)
	{
		const char *e = line_end(*p, end);
		size_t		len = line_len(*p, e);

		if (len == 0)
		{
			*p = e < end ? e + 1 : end;
			return true;
		}
		if (item != NULL && len > 11 && strncasecmp(*p, "Content-ID:", 11) == 0)
		{
			const char *v = *p + 11;
			const char *ve = *p + len;
			const char *r = NULL;

			/* "<response-item-I>" */
			for (const char *q = v; q + 5 <= ve; q++)
				if (strncmp(q, "item-", 5) == 0)
					r = q + 5;
			if (r != NULL && r < ve)
			{
				const char *stop;
				long		v2 = bounded_number(r, ve, &stop);

				if (v2 >= 0 && (stop == ve || *stop == '>'))
					*item = v2;
			}
		}
		if (e >= end)
			break;
		*p = e + 1;
	}
	return false;
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

/* See storage_int.h. */
int
io_gcs_batch_read(const char *content_type, const char *body, size_t len, size_t n,
				  IoDeleteResult *results, TmsError *err)
{
	char		boundary[80];
	char		delim[84];
	size_t		dlen;
	const char *p;
	const char *end = body + len;
	bool	   *done;
	size_t		pos = 0;

	if (content_type_boundary(content_type, boundary, sizeof(boundary)) != 0)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "unexpected GCS batch response: not multipart with a boundary");
	dlen = (size_t) snprintf(delim, sizeof(delim), "--%s", boundary);
	done = io_calloc(n ? n : 1, sizeof(bool));
	if (done == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	p = body ? body : "";
	end = p + (body ? len : 0);
	/* to the first delimiter: a line starting with it */
	while (p < end && !((size_t) (end - p) >= dlen && memcmp(p, delim, dlen) == 0 &&
						(p == body || p[-1] == '\n')))
		p = next_line(p, end);
	while (p < end && (size_t) (end - p) >= dlen && memcmp(p, delim, dlen) == 0)
	{
		const char *next;
		const char *q;
		long		item = -1;
		long		status = 0;
		size_t		blen;

		p += dlen;
		if ((size_t) (end - p) >= 2 && p[0] == '-' && p[1] == '-')
			break;				/* the closing delimiter */
		p = next_line(p, end);
		/* the part runs to the next line that starts with the delimiter */
		for (next = p; next < end; next = next_line(next, end))
			if ((size_t) (end - next) >= dlen && memcmp(next, delim, dlen) == 0)
				break;
		q = p;
		if (skip_headers(&q, next, &item) &&
			(size_t) (next - q) > 12 && strncmp(q, "HTTP/1.1 ", 9) == 0)
		{
			const char *stop;

			status = bounded_number(q + 9, next, &stop);
			q = next_line(q, next);
			if (!skip_headers(&q, next, NULL))
				status = 0;
		}
		/* the body ends before the CRLF that precedes the delimiter */
		blen = (size_t) (next - q);
		if (blen > 0 && q[blen - 1] == '\n')
			blen--;
		if (blen > 0 && q[blen - 1] == '\r')
			blen--;
		if (status >= 100 && status <= 599)
		{
			size_t		i = item >= 0 ? (size_t) item : pos;

			if (i < n && !done[i])
			{
				part_result(status, q, blen, &results[i]);
				done[i] = true;
			}
		}
		pos++;
		p = next;
	}
	for (size_t i = 0; i < n; i++)
		if (!done[i])
		{
			results[i].deleted = false;
			snprintf(results[i].code, sizeof(results[i].code), "NoResult");
			snprintf(results[i].message, sizeof(results[i].message),
					 "the server's batch answer does not mention this object");
		}
	io_free(done);
	return 0;
}
