/*-------------------------------------------------------------------------
 *
 * batch_multipart.c
 *		The reader of a multipart/mixed batch answer (RFC 2046 section
 *		5.1), as Azure's Blob Batch and Google Cloud Storage's JSON API
 *		batch send them: one part per sub-request, each an application/http
 *		message holding the sub-response (a status line, headers, a body).
 *
 * It splits an answer into its parts and each part into the Content-ID of
 * its own headers and the sub-response's status, reason phrase, header
 * block and body; what a status means for a delete is its store's
 * business (azure_batch.c, gcs_batch.c).  Pure functions of their input,
 * bounded by the answer's length (the body need not be NUL-terminated),
 * unit-tested and fuzzed through both stores' readers.
 *
 * The rules: the boundary is the Content-Type's boundary parameter,
 * quoted or not, 1 to 70 characters; a delimiter is "--" boundary at the
 * start of a line, the closing one followed by "--"; lines end in CRLF or
 * LF.  A part whose sub-response has no status line "HTTP/1.x NNN" has
 * status 0, and its store reads nothing from it.
 *
 * src/io/storage/batch_multipart.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/storage/storage_int.h"

/* RFC 2046: a boundary has 1 to 70 characters. */
#define BOUNDARY_MAX 70

/*
 * The boundary parameter of a multipart Content-Type into buf: 0, or -1
 * when there is none (or it is longer than 70 characters).
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
		if (n == 0 || n > BOUNDARY_MAX || n >= size)
			return -1;
		memcpy(buf, p, n);
		buf[n] = '\0';
		return 0;
	}
	return -1;
}

/*
 * The line starting at *p within end: its start and length without CR LF;
 * *p moves past it.  False at the end.
 */
static bool
take_line(const char **p, const char *end, const char **line, size_t *len)
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

/*
 * The value of header name (any case) on line[0..len), its leading blanks
 * skipped, or NULL when the line is another header.
 */
static const char *
header_value(const char *line, size_t len, const char *name, size_t *vlen)
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

/* Does a delimiter line ("--" boundary) start at p, within end? */
static bool
at_delimiter(const char *p, const char *end, const char *delim, size_t dlen)
{
	return (size_t) (end - p) >= dlen && memcmp(p, delim, dlen) == 0;
}

/* The start of the next line at or after p that is a delimiter, or end. */
static const char *
next_delimiter(const char *p, const char *end, const char *delim, size_t dlen)
{
	while (p < end && !at_delimiter(p, end, delim, dlen))
	{
		const char *nl = memchr(p, '\n', (size_t) (end - p));

		p = nl ? nl + 1 : end;
	}
	return p;
}

/*
 * Read the part [p, end) (after its delimiter line) into *part: the
 * Content-ID of its own headers, then the sub-response.
 */
static void
read_part(const char *p, const char *end, IoBatchPart *part)
{
	const char *line;
	size_t		len,
				vlen;
	const char *v;
	long		status = 0;

	memset(part, 0, sizeof(*part));
	while (take_line(&p, end, &line, &len) && len > 0)
		if ((v = header_value(line, len, "Content-ID", &vlen)) != NULL)
		{
			part->content_id = v;
			part->content_id_len = vlen;
		}
	/* "HTTP/1.1 202 Accepted" */
	if (!take_line(&p, end, &line, &len) || len < 12 || strncmp(line, "HTTP/1.", 7) != 0 ||
		line[8] != ' ')
		return;
	for (int i = 9; i < 12; i++)
	{
		if (line[i] < '0' || line[i] > '9')
			return;
		status = status * 10 + (line[i] - '0');
	}
	if (status < 100)
		return;
	if (len > 13)
	{
		part->reason = line + 13;
		part->reason_len = len - 13;
	}
	part->headers = p;
	while (take_line(&p, end, &line, &len) && len > 0)
		;
	part->headers_end = p;
	/* the body ends before the CRLF that precedes the next delimiter */
	part->body = p;
	part->body_len = (size_t) (end - p);
	if (part->body_len > 0 && p[part->body_len - 1] == '\n')
		part->body_len--;
	if (part->body_len > 0 && p[part->body_len - 1] == '\r')
		part->body_len--;
	part->status = status;
}

/* See storage_int.h. */
const char *
io_batch_part_header(const IoBatchPart *part, const char *name, size_t *vlen)
{
	const char *p = part->headers;
	const char *line;
	size_t		len;

	if (p == NULL)
		return NULL;
	while (take_line(&p, part->headers_end, &line, &len) && len > 0)
	{
		const char *v = header_value(line, len, name, vlen);

		if (v != NULL)
			return v;
	}
	return NULL;
}

/* See storage_int.h. */
int
io_batch_parts(const char *content_type, const char *body, size_t len,
			   IoBatchPartFn fn, void *arg, const char *store, long status,
			   TmsError *err)
{
	char		boundary[BOUNDARY_MAX + 1];
	char		delim[BOUNDARY_MAX + 3];
	size_t		dlen;
	const char *p = body ? body : "";
	const char *end = p + (body ? len : 0);

	if (content_type_boundary(content_type, boundary, sizeof(boundary)) != 0)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, status,
								  "unexpected %s batch response: not multipart with a boundary",
								  store);
	dlen = (size_t) snprintf(delim, sizeof(delim), "--%s", boundary);
	p = next_delimiter(p, end, delim, dlen);
	while (p < end)
	{
		const char *start = p + dlen;
		const char *line;
		size_t		llen;
		const char *next;
		IoBatchPart part;

		if ((size_t) (end - start) >= 2 && start[0] == '-' && start[1] == '-')
			break;				/* the closing delimiter */
		(void) take_line(&start, end, &line, &llen);	/* the delimiter's line */
		next = next_delimiter(start, end, delim, dlen);
		read_part(start, next, &part);
		fn(&part, arg);
		p = next;
	}
	return 0;
}
