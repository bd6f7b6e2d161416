/*-------------------------------------------------------------------------
 *
 * storage_s3.c
 *		Object storage, the S3 backend: s3://, s3a://, s3n:// over the
 *		HTTP core with SigV4 signing.  Called by the entry points of
 *		storage.c (storage_int.h) after the location rule (location.c).
 *
 * S3 requests are signed for service "s3" with single URI encoding, no
 * path normalisation and the payload's sha256 in x-amz-content-sha256
 * (signed).  The object key is encoded once with RFC 3986 rules, which
 * makes the wire path its own canonical form.  Addressing is path style
 * ("endpoint/bucket/key") or virtual host ("bucket.endpoint/key"); by
 * default path style when a custom endpoint is configured and virtual
 * host on AWS (path style for bucket names with dots).
 *
 * Listing uses ListObjectsV2 with continuation tokens; deletion uses
 * DeleteObjects with up to 1000 keys per request, a Content-MD5 header
 * (required by AWS, ignored by s3rver), and reports every key's outcome.
 * The building and signing of a request, the DeleteObjects body and the
 * reader of its answer are shared with the bulk deleter (bulk_delete.c), which
 * runs several such requests at once (io_int.h).
 *
 * src/io/storage/storage_s3.c
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "io/io_int.h"
#include "io/storage/storage_int.h"

/* ----------------------------------------------------------------
 * S3
 * ----------------------------------------------------------------
 */

/* The scheme prefix of uri ("s3a://") for building listing results. */
static size_t
uri_scheme_len(const char *uri)
{
	const char *p = strstr(uri, "://");

	return p ? (size_t) (p - uri) + 3 : 0;
}

/* Split "scheme://host[:port][/base]" of the endpoint. */
static void
split_endpoint(const char *endpoint, const char **scheme_end,
			   const char **host, size_t *host_len, const char **base)
{
	const char *h = strstr(endpoint, "://") + 3;
	const char *slash = strchr(h, '/');

	*scheme_end = h;
	*host = h;
	*host_len = slash ? (size_t) (slash - h) : strlen(h);
	*base = slash ? slash : "";
}

/*
 * Build the URL, Host header value and wire path of a request for
 * bucket/key.  All outputs malloc'd.
 */
static int
s3_target(IoStorage *st, const char *bucket, const char *key,
		  char **url, char **host, char **wire_path, TmsError *err)
{
	IoStrBuf	u,
				h,
				p;
	char	   *ekey = io_uri_encode(key ? key : "", key ? strlen(key) : 0, true);
	bool		path_style;

	if (ekey == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	path_style = st->path_style == 1 ||
		(st->path_style < 0 && (st->endpoint != NULL || strchr(bucket, '.') != NULL));
	io_sb_init(&u);
	io_sb_init(&h);
	io_sb_init(&p);
	if (st->endpoint != NULL)
	{
		const char *scheme_end,
				   *hp,
				   *base;
		size_t		hlen;

		split_endpoint(st->endpoint, &scheme_end, &hp, &hlen, &base);
		if (path_style)
			io_sb_append(&h, hp, hlen);
		else
			io_sb_printf(&h, "%s.%.*s", bucket, (int) hlen, hp);
		io_sb_puts(&p, base);
		if (path_style)
			io_sb_printf(&p, "/%s", bucket);
		if (!path_style || ekey[0] != '\0')
			io_sb_printf(&p, "/%s", ekey);
		io_sb_append(&u, st->endpoint, (size_t) (scheme_end - st->endpoint));
	}
	else
	{
		if (path_style)
			io_sb_printf(&h, "s3.%s.amazonaws.com", st->region);
		else
			io_sb_printf(&h, "%s.s3.%s.amazonaws.com", bucket, st->region);
		if (path_style)
			io_sb_printf(&p, "/%s", bucket);
		if (!path_style || ekey[0] != '\0')
			io_sb_printf(&p, "/%s", ekey);
		io_sb_puts(&u, "https://");
	}
	io_free(ekey);
	io_sb_puts(&u, h.data ? h.data : "");
	io_sb_puts(&u, p.data ? p.data : "/");
	if (u.oom || h.oom || p.oom)
	{
		io_sb_free(&u);
		io_sb_free(&h);
		io_sb_free(&p);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	*url = io_sb_steal(&u);
	*host = io_sb_steal(&h);
	*wire_path = io_sb_steal(&p);
	return 0;
}

/* See io_int.h: wipe and free what io_s3_request_build made. */
void
io_s3_request_free(IoS3Request *r)
{
	for (size_t i = 0; i < r->nlines; i++)
	{
		/* lines carry the signature and maybe the token: wipe them */
		if (r->lines[i])
			memset(r->lines[i], 0, strlen(r->lines[i]));
		io_free(r->lines[i]);
	}
	io_free(r->url);
	memset(r, 0, sizeof(*r));
}

/* See io_int.h: one header line of a request. */
bool
io_request_add_line(IoS3Request *r, const char *name, const char *value)
{
	IoStrBuf	l;

	if (r->nlines >= IO_S3_MAX_LINES)
		return false;
	io_sb_init(&l);
	io_sb_printf(&l, "%s: %s", name, value);
	r->lines[r->nlines] = io_sb_steal(&l);
	return r->lines[r->nlines++] != NULL;
}

/*
 * See io_int.h: build one signed S3 request.  query is the raw (already
 * encoded) query or NULL; extra headers are signed too.
 */
int
io_s3_request_build(IoStorage *st, const char *method, const char *bucket,
					const char *key, const char *query, const IoHeader *extra,
					size_t nextra, const void *body, size_t body_len,
					IoS3Request *r, TmsError *err)
{
	char	   *url = NULL,
			   *host = NULL,
			   *wire = NULL;
	char		payload_hash[65];
	char		amz_date[17];
	IoHeader	hdrs[8];
	size_t		nh = 0,
				i;
	IoSigV4Input in;
	IoSigV4Output out;
	IoStrBuf	full_url;
	bool		ok;
	int			rc = -1;

	memset(&out, 0, sizeof(out));
	memset(r, 0, sizeof(*r));
	if (s3_target(st, bucket, key, &url, &host, &wire, err) != 0)
		return -1;
	io_sha256_hex(body ? body : "", body ? body_len : 0, payload_hash);
	io_amz_date(time(NULL), amz_date);

	hdrs[nh].name = "host";
	hdrs[nh++].value = host;
	for (i = 0; i < nextra && nh < 8; i++)
		hdrs[nh++] = extra[i];

	io_sb_init(&full_url);
	io_sb_puts(&full_url, url);
	if (query != NULL && query[0] != '\0')
		io_sb_printf(&full_url, "?%s", query);

	if (st->access_key_id != NULL && st->secret_access_key != NULL)
	{
		memset(&in, 0, sizeof(in));
		in.method = method;
		in.path = wire;
		in.query = query;
		in.headers = hdrs;
		in.nheaders = nh;
		in.payload_hash = payload_hash;
		in.access_key_id = st->access_key_id;
		in.secret_access_key = st->secret_access_key;
		in.session_token = st->session_token;
		in.region = st->region;
		in.service = "s3";
		in.amz_date = amz_date;
		in.normalize_path = false;
		in.double_encode_path = false;
		in.sign_session_token = true;
		in.add_content_sha256 = true;
		if (io_sigv4_sign(&in, &out, err) != 0)
			goto done;
	}

	/* header lines for libcurl */
	ok = true;
	for (i = 0; i < nh && ok; i++)
		ok = io_request_add_line(r, i == 0 ? "Host" : hdrs[i].name, hdrs[i].value);
	if (out.nadd_headers > 0)
	{
		for (i = 0; i < out.nadd_headers && ok; i++)
			ok = io_request_add_line(r, out.add_headers[i].key, out.add_headers[i].value);
	}
	else if (ok)
		ok = io_request_add_line(r, "x-amz-content-sha256", payload_hash);
	if (!ok || full_url.oom)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}
	r->url = io_sb_steal(&full_url);
	r->req.method = method;
	r->req.url = r->url;
	r->req.headers = (const char *const *) r->lines;
	r->req.nheaders = r->nlines;
	r->req.body = body;
	r->req.body_len = body_len;
	r->req.idempotent = true;	/* every S3 call we make is idempotent */
	r->req.what = "S3";
	rc = 0;

done:
	if (rc != 0)
		io_s3_request_free(r);
	io_sigv4_free(&out);
	io_sb_free(&full_url);
	io_free(url);
	io_free(host);
	io_free(wire);
	return rc;
}

/*
 * Send one signed S3 request (io_s3_request_build, then the HTTP core with
 * its retries).  Returns 0 with a response of any status, -1 with *err.
 */
int
io_s3_request(IoStorage *st, const char *method, const char *bucket,
			  const char *key, const char *query, const IoHeader *extra,
			  size_t nextra, const void *body, size_t body_len,
			  IoHttpResponse *resp, TmsError *err)
{
	IoS3Request r;
	int			rc;

	memset(resp, 0, sizeof(*resp));
	io_storage_refresh_if_due(st);
	for (int attempt = 0;; attempt++)
	{
		char		code[64];
		TmsError	scratch;

		if (io_s3_request_build(st, method, bucket, key, query, extra, nextra, body,
								body_len, &r, err) != 0)
			return -1;
		rc = io_http_perform(&st->http, &r.req, resp, err);
		io_s3_request_free(&r);
		if (rc != 0 || attempt > 0 || st->refresh == NULL ||
			(resp->status != 400 && resp->status != 403))
			break;
		(void) io_s3_status_error(resp, "access", bucket, key, code, sizeof(code), &scratch);
		if (!io_s3_credentials_refused(resp->status, code))
			break;
		/* refused for its credentials: new ones, and once more */
		if (io_storage_refresh(st, &scratch) != 0)
			break;
		io_http_response_free(resp);
	}
	return rc;
}

/*
 * See io_int.h: turn a non-2xx S3 response into *err; the S3 error
 * document's Code and Message go to the detail, its Code also to
 * s3code_out when given.
 */
int
io_s3_status_error(const IoHttpResponse *resp, const char *what,
				   const char *bucket, const char *key, char *s3code_out,
				   size_t s3code_size, TmsError *err)
{
	IoErrorCode code;
	IoXmlNode  *doc = NULL;
	TmsError	xerr;
	const char *s3code = NULL;
	const char *s3msg = NULL;

	switch (resp->status)
	{
		case 400:
			code = IO_ERR_BAD_REQUEST;
			break;
		case 401:
			code = IO_ERR_UNAUTHORIZED;
			break;
		case 403:
			code = IO_ERR_FORBIDDEN;
			break;
		case 404:
			code = IO_ERR_NOT_FOUND;
			break;
		case 429:
		case 503:
			code = IO_ERR_UNAVAILABLE;
			break;
		default:
			code = resp->status >= 500 ? IO_ERR_SERVER : IO_ERR_STORAGE;
			break;
	}
	tms_error_set_http(err, code, resp->status, "could not %s \"s3://%s/%s\": HTTP status %ld",
					   what, bucket, key ? key : "", resp->status);
	if (resp->body_len > 0)
		doc = io_xml_parse(resp->body, resp->body_len, &xerr);
	if (doc != NULL)
	{
		s3code = io_xml_child_text(doc, "Code");
		s3msg = io_xml_child_text(doc, "Message");
	}
	if (s3code != NULL || s3msg != NULL)
	{
		char		d[sizeof(err->detail)];

		snprintf(d, sizeof(d), "%s%s%s", s3code ? s3code : "",
				 (s3code && s3msg) ? ": " : "", s3msg ? s3msg : "");
		tms_error_detail_raw(err, d, strlen(d));
	}
	if (s3code_out != NULL && s3code_size > 0)
		snprintf(s3code_out, s3code_size, "%s", s3code ? s3code : "");
	io_xml_free(doc);
	return -1;
}

int
io_s3_read(IoStorage *st, const IoParsedUri *u, uint64_t offset, uint64_t len,
		   IoBuffer *out, TmsError *err)
{
	IoHttpResponse resp;
	char		range[80];
	IoHeader	h;
	size_t		nh = 0;
	int			rc;

	if (io_range_value(offset, len, range, sizeof(range)))
	{
		h.name = "range";
		h.value = range;
		nh = 1;
	}
	if (io_s3_request(st, "GET", u->bucket, u->path, NULL, &h, nh, NULL, 0, &resp, err) != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_read_result(&resp, nh > 0, offset, len, out, err);
	if (rc > 0)
		io_s3_status_error(&resp, "read", u->bucket, u->path, NULL, 0, err);
	io_http_response_free(&resp);
	return rc == 0 ? 0 : -1;
}

int
io_s3_size(IoStorage *st, const IoParsedUri *u, uint64_t *size, TmsError *err)
{
	IoHttpResponse resp;
	int			rc;

	rc = io_s3_request(st, "HEAD", u->bucket, u->path, NULL, NULL, 0, NULL, 0, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = io_s3_status_error(&resp, "stat", u->bucket, u->path, NULL, 0, err);
	else if (rc == 0)
		rc = io_head_size(&resp, "content-length", "S3", size, err);
	io_http_response_free(&resp);
	return rc;
}

int
io_s3_list(IoStorage *st, const IoParsedUri *u, const char *prefix_uri,
		   IoListFn fn, void *arg, TmsError *err)
{
	char	   *token = NULL;
	size_t		scheme_len = uri_scheme_len(prefix_uri);
	int			rc = 0;
	bool		stop = false;

	do
	{
		IoStrBuf	q;
		IoHttpResponse resp;
		IoXmlNode  *doc;
		const IoXmlNode *c;
		const char *truncated;
		const char *next;
		char	   *ep = io_uri_encode(u->path, strlen(u->path), false);

		io_sb_init(&q);
		io_sb_printf(&q, "list-type=2&max-keys=%d&prefix=%s", st->list_page_size,
					 ep ? ep : "");
		io_free(ep);
		if (token != NULL)
		{
			char	   *et = io_uri_encode(token, strlen(token), false);

			io_sb_printf(&q, "&continuation-token=%s", et ? et : "");
			if (et == NULL)
				q.oom = true;
			io_free(et);
		}
		if (q.oom || ep == NULL)
		{
			io_sb_free(&q);
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		rc = io_s3_request(st, "GET", u->bucket, "", q.data, NULL, 0, NULL, 0, &resp, err);
		io_sb_free(&q);
		if (rc != 0)
		{
			io_http_response_free(&resp);
			break;
		}
		if (resp.status != 200)
		{
			rc = io_s3_status_error(&resp, "list", u->bucket, u->path, NULL, 0, err);
			io_http_response_free(&resp);
			break;
		}
		doc = io_xml_parse(resp.body, resp.body_len, err);
		io_http_response_free(&resp);
		if (doc == NULL)
		{
			rc = -1;
			break;
		}
		if (strcmp(doc->name, "ListBucketResult") != 0)
		{
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									"unexpected S3 listing response: root element \"%s\"",
									doc->name);
			io_xml_free(doc);
			break;
		}
		for (c = doc->children; c != NULL && !stop; c = c->next)
		{
			IoStrBuf	uri;
			IoObjectInfo info;
			const char *key;
			const char *size;

			if (strcmp(c->name, "Contents") != 0)
				continue;
			key = io_xml_child_text(c, "Key");
			size = io_xml_child_text(c, "Size");
			if (key == NULL)
			{
				rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
										"malformed S3 listing: an entry has no Key");
				break;
			}
			io_sb_init(&uri);
			io_sb_append(&uri, prefix_uri, scheme_len);
			io_sb_printf(&uri, "%s/%s", u->bucket, key);
			if (uri.oom)
			{
				rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
				break;
			}
			info.uri = uri.data;
			info.size = size ? strtoull(size, NULL, 10) : 0;
			info.mtime = io_rfc3339_time(io_xml_child_text(c, "LastModified"));
			if (fn(arg, &info) != 0)
				stop = true;
			io_sb_free(&uri);
		}
		truncated = io_xml_child_text(doc, "IsTruncated");
		next = io_xml_child_text(doc, "NextContinuationToken");
		io_free(token);
		token = NULL;
		if (rc == 0 && !stop && truncated != NULL && strcmp(truncated, "true") == 0)
		{
			if (next == NULL || next[0] == '\0')
				rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
										"malformed S3 listing: truncated without a continuation token");
			else
			{
				token = io_strdup(next);
				if (token == NULL)
					rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			}
		}
		io_xml_free(doc);
		if (st->http.interrupted && token != NULL &&
			st->http.interrupted(st->http.interrupt_arg))
			rc = tms_error_set(err, IO_ERR_INTERRUPTED, "listing interrupted");
	} while (rc == 0 && token != NULL);
	io_free(token);
	return rc;
}

/* Escape text for an XML element body. */
static void
xml_escape(IoStrBuf *sb, const char *s)
{
	for (; *s; s++)
	{
		switch (*s)
		{
			case '<':
				io_sb_puts(sb, "&lt;");
				break;
			case '>':
				io_sb_puts(sb, "&gt;");
				break;
			case '&':
				io_sb_puts(sb, "&amp;");
				break;
			case '"':
				io_sb_puts(sb, "&quot;");
				break;
			case '\'':
				io_sb_puts(sb, "&apos;");
				break;
			default:
				if ((unsigned char) *s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r')
					io_sb_printf(sb, "&#%d;", (unsigned char) *s);
				else
					io_sb_putc(sb, *s);
		}
	}
}

/* See io_int.h: the DeleteObjects body of keys[0..n) and its Content-MD5. */
int
io_s3_delete_body(const char *const *keys, size_t n, IoStrBuf *body,
				  char md5b64[32], TmsError *err)
{
	unsigned char md5[16];
	size_t		i;

	io_sb_init(body);
	io_sb_puts(body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			   "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>false</Quiet>");
	for (i = 0; i < n; i++)
	{
		io_sb_puts(body, "<Object><Key>");
		xml_escape(body, keys[i]);
		io_sb_puts(body, "</Key></Object>");
	}
	io_sb_puts(body, "</Delete>");
	if (body->oom)
	{
		io_sb_free(body);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (EVP_Digest(body->data, body->len, md5, NULL, EVP_md5(), NULL) != 1)
	{
		io_sb_free(body);
		return tms_error_set(err, IO_ERR_INTERNAL, "could not compute MD5");
	}
	EVP_EncodeBlock((unsigned char *) md5b64, md5, 16);
	return 0;
}

/*
 * See io_int.h: read a 200 answer to DeleteObjects for keys[0..n) into
 * results[0..n).
 */
int
io_s3_delete_read(const IoHttpResponse *resp, const char *const *keys, size_t n,
				  IoDeleteResult *results, TmsError *err)
{
	IoXmlNode  *doc;
	const IoXmlNode *c;
	size_t		i;
	bool	   *done;

	doc = io_xml_parse(resp->body, resp->body_len, err);
	if (doc == NULL)
		return -1;
	if (strcmp(doc->name, "DeleteResult") != 0)
	{
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
						   "unexpected S3 delete response: root element \"%s\"", doc->name);
		io_xml_free(doc);
		return -1;
	}
	done = io_calloc(n ? n : 1, sizeof(bool));
	if (done == NULL)
	{
		io_xml_free(doc);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (c = doc->children; c != NULL; c = c->next)
	{
		bool		is_deleted = strcmp(c->name, "Deleted") == 0;
		const char *key;

		if (!is_deleted && strcmp(c->name, "Error") != 0)
			continue;
		key = io_xml_child_text(c, "Key");
		if (key == NULL)
			continue;
		for (i = 0; i < n; i++)
		{
			IoDeleteResult *r = &results[i];

			if (done[i] || strcmp(keys[i], key) != 0)
				continue;
			done[i] = true;
			if (is_deleted)
			{
				r->deleted = true;
				r->code[0] = '\0';
				r->message[0] = '\0';
			}
			else
			{
				const char *code = io_xml_child_text(c, "Code");
				const char *msg = io_xml_child_text(c, "Message");

				/* a key that is already gone is what we wanted */
				r->deleted = code != NULL && strcmp(code, "NoSuchKey") == 0;
				snprintf(r->code, sizeof(r->code), "%s", code ? code : "Unknown");
				snprintf(r->message, sizeof(r->message), "%s", msg ? msg : "");
			}
			break;
		}
	}
	for (i = 0; i < n; i++)
		if (!done[i])
		{
			IoDeleteResult *r = &results[i];

			r->deleted = false;
			snprintf(r->code, sizeof(r->code), "NoResult");
			snprintf(r->message, sizeof(r->message),
					 "the server's delete result does not mention this key");
		}
	io_free(done);
	io_xml_free(doc);
	return 0;
}

/*
 * One DeleteObjects request for keys[idx[0..n)] of one bucket; fills
 * results[idx[i]].
 */
int
io_s3_delete_batch(IoStorage *st, const char *bucket, IoParsedUri *parsed,
				   const size_t *idx, size_t n, IoDeleteResult *results,
				   TmsError *err)
{
	IoStrBuf	body;
	char		md5b64[32];
	IoHeader	h[2];
	IoHttpResponse resp;
	const char **keys;
	IoDeleteResult *res;
	size_t		i;
	int			rc = 0;

	keys = io_calloc(n ? n : 1, sizeof(char *));
	res = io_calloc(n ? n : 1, sizeof(IoDeleteResult));
	if (keys == NULL || res == NULL)
	{
		io_free(keys);
		io_free(res);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (i = 0; i < n; i++)
		keys[i] = parsed[idx[i]].path;
	if (io_s3_delete_body(keys, n, &body, md5b64, err) != 0)
	{
		io_free(keys);
		io_free(res);
		return -1;
	}
	h[0].name = "content-md5";
	h[0].value = md5b64;
	h[1].name = "content-type";
	h[1].value = "application/xml";

	rc = io_s3_request(st, "POST", bucket, "", "delete=", h, 2, body.data, body.len,
					   &resp, err);
	io_sb_free(&body);
	if (rc == 0 && resp.status != 200)
		rc = io_s3_status_error(&resp, "delete objects in", bucket, "", NULL, 0, err);
	else if (rc == 0)
		rc = io_s3_delete_read(&resp, keys, n, res, err);
	io_http_response_free(&resp);
	if (rc == 0)
		for (i = 0; i < n; i++)
			results[idx[i]] = res[i];
	io_free(keys);
	io_free(res);
	return rc;
}
