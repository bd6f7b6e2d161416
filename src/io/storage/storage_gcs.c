/*-------------------------------------------------------------------------
 *
 * storage_gcs.c
 *		Object storage, the Google Cloud Storage backend: gs:// over the
 *		HTTP core.  Called by the entry points of storage.c
 *		(storage_int.h) after the location rule (location.c).
 *
 * Objects are read (ranged GET), sized (HEAD) and written (PUT; an XML
 * multipart upload above the part size) through the XML API,
 * "ENDPOINT/BUCKET/NAME" with the name encoded once (RFC 3986, '/'
 * kept).  A request is authenticated by one of:
 *	- HMAC keys: a V4 signature, GOOG4-HMAC-SHA256 over region "auto" and
 *	  service "storage" (aws_sigv4.c's algorithm in Google's dialect), with
 *	  the payload's sha256 in x-goog-content-sha256 (signed);
 *	- an OAuth2 access token ("Authorization: Bearer"): the catalog's
 *	  (vended, refreshed as S3's vended keys are), the user mapping's, or
 *	  one a service account key gets for itself (gcs_auth.c);
 *	- nothing (public buckets).
 * Listing and deleting use the JSON API with a token: objects.list with
 * prefix and pageToken, and batches of up to IO_GCS_DELETE_MAX_KEYS
 * deletes (gcs_batch.c); HMAC keys reach only the XML API, so with them
 * listing is the XML ListObjectsV2 (list-type=2, continuation-token) and
 * deleting is one DELETE per object.  A request refused with 401 gets a
 * new token (vended: refreshed; service account: fetched again) and is
 * sent once more.  429 and 503 are retried by the HTTP core (idempotent
 * requests, backoff, Retry-After); the bulk deleter leaves them to the
 * delete pool's window.
 *
 * Secrets (the HMAC secret, tokens, the key) go into headers and are
 * wiped with them (io_s3_request_free); no message quotes them.
 *
 * src/io/storage/storage_gcs.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "io/http/gcs_auth.h"
#include "io/storage/storage_int.h"

#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"

/* Objects one JSON API listing page returns at most (Google's limit). */
#define GCS_LIST_PAGE_MAX 1000

/* ----------------------------------------------------------------
 * Requests
 * ----------------------------------------------------------------
 */

static const char *
gcs_endpoint(const IoStorage *st)
{
	return st->gcs_endpoint != NULL ? st->gcs_endpoint : GCS_DEFAULT_ENDPOINT;
}

/* See storage_int.h. */
int
io_gcs_target(const IoStorage *st, const char *bucket, char *buf, size_t size)
{
	int			n = snprintf(buf, size, "%s/%s", gcs_endpoint(st), bucket);

	return n < 0 || (size_t) n >= size ? -1 : 0;
}

/*
 * The bearer token of a request into *tok (borrowed; NULL: none, an
 * anonymous request): the vended or fixed one, else the service
 * account's (fetched when not fresh, or when force).
 */
static int
gcs_bearer(IoStorage *st, bool force, const char **tok, TmsError *err)
{
	*tok = NULL;
	if (st->gcs_token != NULL)
		*tok = st->gcs_token;
	else if (st->gcs_sa != NULL)
	{
		const IoAllocator *prev;
		int			rc;

		prev = io_use_allocator(st->alloc); /* the token outlives the call */
		rc = io_gcs_sa_token(st->gcs_sa, &st->http, &st->gcs_sa_token, force, err);
		io_use_allocator(prev);
		if (rc != 0)
			return -1;
		*tok = st->gcs_sa_token.token;
	}
	return 0;
}

/* Sign r's request with the HMAC keys (V4, Google's dialect). */
static int
gcs_sign(IoStorage *st, const char *method, const char *path, const char *query,
		 const IoHeader *hdrs, size_t nh, const void *body, size_t body_len,
		 IoS3Request *r, TmsError *err)
{
	IoSigV4Input in;
	IoSigV4Output out;
	char		payload_hash[65];
	char		date[17];
	bool		ok = true;

	io_sha256_hex(body ? body : "", body ? body_len : 0, payload_hash);
	io_amz_date(time(NULL), date);
	memset(&in, 0, sizeof(in));
	in.dialect = &io_sigv4_goog;
	in.method = method;
	in.path = path;
	in.query = query;
	in.headers = hdrs;
	in.nheaders = nh;
	in.payload_hash = payload_hash;
	in.access_key_id = st->gcs_hmac_access_id;
	in.secret_access_key = st->gcs_hmac_secret;
	in.region = "auto";
	in.service = "storage";
	in.amz_date = date;
	in.add_content_sha256 = true;
	if (io_sigv4_sign(&in, &out, err) != 0)
		return -1;
	for (size_t i = 0; i < out.nadd_headers && ok; i++)
		ok = io_request_add_line(r, out.add_headers[i].key, out.add_headers[i].value);
	io_sigv4_free(&out);
	return ok ? 0 : tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
}

/*
 * Build one request: path (encoded, from '/') and raw query (or NULL) on
 * the endpoint, the extra headers, and the authentication of the moment
 * (force: a new service account token).  0 (free with
 * io_s3_request_free), or -1 with *err.
 */
static int
gcs_request_build(IoStorage *st, const char *method, const char *path, const char *query,
				  const IoHeader *extra, size_t nextra, const void *body,
				  size_t body_len, bool force, IoS3Request *r, TmsError *err)
{
	const char *ep = gcs_endpoint(st);
	const char *host = strstr(ep, "://") + 3;
	size_t		hlen = strcspn(host, "/");
	char		hostbuf[256];
	IoHeader	hdrs[8];
	size_t		nh = 0;
	IoStrBuf	url;
	bool		ok = true;

	memset(r, 0, sizeof(*r));
	if (hlen >= sizeof(hostbuf))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "the GCS endpoint's host is too long");
	memcpy(hostbuf, host, hlen);
	hostbuf[hlen] = '\0';
	hdrs[nh].name = "host";
	hdrs[nh++].value = hostbuf;
	for (size_t i = 0; i < nextra && nh < 8; i++)
		hdrs[nh++] = extra[i];
	for (size_t i = 0; i < nh && ok; i++)
		ok = io_request_add_line(r, i == 0 ? "Host" : hdrs[i].name, hdrs[i].value);
	if (!ok)
	{
		io_s3_request_free(r);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (IO_GCS_HMAC(st))
	{
		if (gcs_sign(st, method, path, query, hdrs, nh, body, body_len, r, err) != 0)
		{
			io_s3_request_free(r);
			return -1;
		}
	}
	else
	{
		const char *tok;
		IoStrBuf	a;

		if (gcs_bearer(st, force, &tok, err) != 0)
		{
			io_s3_request_free(r);
			return -1;
		}
		io_sb_init(&a);
		if (tok != NULL)
			io_sb_printf(&a, "Bearer %s", tok);
		if (tok != NULL && (a.oom || !io_request_add_line(r, "Authorization", a.data)))
			ok = false;
		io_sb_wipe_free(&a);
		if (!ok)
		{
			io_s3_request_free(r);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
	}
	io_sb_init(&url);
	io_sb_printf(&url, "%.*s%s", (int) (host - ep) + (int) hlen, ep, path);
	if (query != NULL && query[0] != '\0')
		io_sb_printf(&url, "?%s", query);
	if (url.oom)
	{
		io_sb_free(&url);
		io_s3_request_free(r);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	r->url = io_sb_steal(&url);
	r->req.method = method;
	r->req.url = r->url;
	r->req.headers = (const char *const *) r->lines;
	r->req.nheaders = r->nlines;
	r->req.body = body;
	r->req.body_len = body_len;
	r->req.idempotent = true;
	r->req.what = "GCS";
	return 0;
}

/* May a request refused with this status be sent again with a new token? */
static bool
gcs_can_renew(const IoStorage *st, long status)
{
	if (status != 401 || IO_GCS_HMAC(st))
		return false;
	return (st->gcs_vended && st->refresh != NULL) || (st->gcs_token == NULL && st->gcs_sa != NULL);
}

/* Renew the token after a 401: refresh the vended one, or fetch anew. */
static int
gcs_renew(IoStorage *st, TmsError *err)
{
	if (st->gcs_vended)
		return io_storage_refresh(st, err);
	io_oauth2_forget(&st->gcs_sa_token);
	return 0;
}

/*
 * Send one request (the HTTP core retries transport failures, 429 and
 * 5xx); a 401 gets a new token and one more try.  0 with a response of
 * any status, -1 with *err.
 */
static int
gcs_request(IoStorage *st, const char *method, const char *path, const char *query,
			const IoHeader *extra, size_t nextra, const void *body, size_t body_len,
			IoHttpResponse *resp, TmsError *err)
{
	IoS3Request r;
	int			rc;

	memset(resp, 0, sizeof(*resp));
	io_storage_refresh_if_due(st);
	for (int attempt = 0;; attempt++)
	{
		TmsError	scratch;

		if (gcs_request_build(st, method, path, query, extra, nextra, body, body_len,
							  false, &r, err) != 0)
			return -1;
		rc = io_http_perform(&st->http, &r.req, resp, err);
		io_s3_request_free(&r);
		if (rc != 0 || attempt > 0 || !gcs_can_renew(st, resp->status))
			break;
		if (gcs_renew(st, &scratch) != 0)
			break;
		io_http_response_free(resp);
	}
	return rc;
}

/* "/BUCKET/NAME" of the XML API (name encoded, '/' kept), or NULL. */
static char *
xml_path(const char *bucket, const char *key)
{
	char	   *ek = io_uri_encode(key, strlen(key), true);
	IoStrBuf	p;

	if (ek == NULL)
		return NULL;
	io_sb_init(&p);
	io_sb_printf(&p, "/%s/%s", bucket, ek);
	io_free(ek);
	return io_sb_steal(&p);
}

/*
 * Turn a refused GCS response into *err (always -1): the code of the
 * status; the XML API's Code and Message, or the JSON API's error message,
 * in the detail.
 */
static int
gcs_status_error(const IoHttpResponse *resp, const char *what, const char *bucket,
				 const char *key, TmsError *err)
{
	TmsError	perr;
	char		d[sizeof(err->detail)];

	d[0] = '\0';
	tms_error_set_http(err, io_http_status_code(resp->status), resp->status,
					   "could not %s \"gs://%s/%s\": HTTP status %ld", what, bucket,
					   key ? key : "", resp->status);
	if (resp->body_len > 0 && resp->body[0] == '<')
	{
		IoXmlNode  *doc = io_xml_parse(resp->body, resp->body_len, &perr);
		const char *code = doc ? io_xml_child_text(doc, "Code") : NULL;
		const char *msg = doc ? io_xml_child_text(doc, "Message") : NULL;

		if (code != NULL || msg != NULL)
			snprintf(d, sizeof(d), "%s%s%s", code ? code : "", (code && msg) ? ": " : "",
					 msg ? msg : "");
		io_xml_free(doc);
	}
	else if (resp->body_len > 0 && resp->body[0] == '{')
	{
		json_t	   *doc = io_json_parse(resp->body, resp->body_len, 65536, "GCS error", &perr);
		const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"),
															"message"));

		if (msg != NULL)
			snprintf(d, sizeof(d), "%s", msg);
		json_decref(doc);
	}
	if (d[0] != '\0')
		tms_error_detail_raw(err, d, strlen(d));
	return -1;
}

/* ----------------------------------------------------------------
 * Read, size, write
 * ----------------------------------------------------------------
 */

/* See storage_int.h. */
int
io_gcs_read(IoStorage *st, const IoParsedUri *u, uint64_t offset, uint64_t len,
			IoBuffer *out, TmsError *err)
{
	IoHttpResponse resp;
	char		range[80];
	IoHeader	h;
	size_t		nh = 0;
	char	   *path = xml_path(u->bucket, u->path);
	int			rc;

	if (path == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (io_range_value(offset, len, range, sizeof(range)))
	{
		h.name = "range";
		h.value = range;
		nh = 1;
	}
	rc = gcs_request(st, "GET", path, NULL, &h, nh, NULL, 0, &resp, err);
	io_free(path);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_read_result(&resp, nh > 0, offset, len, out, err);
	if (rc > 0)
		gcs_status_error(&resp, "read", u->bucket, u->path, err);
	io_http_response_free(&resp);
	return rc == 0 ? 0 : -1;
}

/* See storage_int.h. */
int
io_gcs_size(IoStorage *st, const IoParsedUri *u, uint64_t *size, TmsError *err)
{
	IoHttpResponse resp;
	char	   *path = xml_path(u->bucket, u->path);
	int			rc;

	if (path == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = gcs_request(st, "HEAD", path, NULL, NULL, 0, NULL, 0, &resp, err);
	io_free(path);
	if (rc == 0 && resp.status != 200)
		rc = gcs_status_error(&resp, "stat", u->bucket, u->path, err);
	else if (rc == 0)
		/* the stored size, when GCS serves the object decompressed */
		rc = io_head_size(&resp,
						  io_http_header(&resp, "x-goog-stored-content-length", NULL) ?
						  "x-goog-stored-content-length" : "content-length",
						  "GCS", size, err);
	io_http_response_free(&resp);
	return rc;
}

/* One PUT of data as the object at path (or a part: query). */
static int
gcs_put(IoStorage *st, const IoParsedUri *u, const char *path, const char *query,
		const void *data, size_t len, char *etag, size_t etag_size, TmsError *err)
{
	IoHttpResponse resp;
	IoHeader	h = {"content-type", "application/octet-stream"};
	int			rc;

	rc = gcs_request(st, "PUT", path, query, &h, 1, data ? data : "", len, &resp, err);
	if (rc == 0 && resp.status != 200 && resp.status != 201 && resp.status != 204)
		rc = gcs_status_error(&resp, "write", u->bucket, u->path, err);
	else if (rc == 0 && etag != NULL)
	{
		const char *e = io_http_header(&resp, "etag", NULL);

		if (e == NULL || strlen(e) >= etag_size || strpbrk(e, "<>&") != NULL)
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, resp.status,
									"GCS answered an upload part without a usable ETag");
		else
			snprintf(etag, etag_size, "%s", e);
	}
	io_http_response_free(&resp);
	return rc;
}

/* Abandon a multipart upload (its parts are dropped); errors ignored. */
static void
gcs_abort_upload(IoStorage *st, const char *path, const char *upload_id)
{
	IoHttpResponse resp;
	TmsError	ignored;
	IoStrBuf	q;
	char	   *eid = io_uri_encode(upload_id, strlen(upload_id), false);

	memset(&resp, 0, sizeof(resp));
	io_sb_init(&q);
	io_sb_printf(&q, "uploadId=%s", eid ? eid : "");
	io_free(eid);
	if (!q.oom)
		(void) gcs_request(st, "DELETE", path, q.data, NULL, 0, NULL, 0, &resp, &ignored);
	io_http_response_free(&resp);
	io_sb_free(&q);
}

/*
 * Start a multipart upload: its id (the InitiateMultipartUploadResult's
 * UploadId) into *upload_id (malloc'd).
 */
static int
gcs_start_upload(IoStorage *st, const IoParsedUri *u, const char *path, char **upload_id,
				 TmsError *err)
{
	IoHttpResponse resp;
	IoHeader	h = {"content-type", "application/octet-stream"};
	IoXmlNode  *doc;
	const char *id;
	int			rc;

	*upload_id = NULL;
	rc = gcs_request(st, "POST", path, "uploads", &h, 1, "", 0, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = gcs_status_error(&resp, "start an upload of", u->bucket, u->path, err);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_xml_parse(resp.body, resp.body_len, err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return -1;
	id = io_xml_child_text(doc, "UploadId");
	if (id == NULL || id[0] == '\0')
		rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								"GCS answered the start of an upload without an UploadId");
	else if ((*upload_id = io_strdup(id)) == NULL)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	io_xml_free(doc);
	return rc;
}

/*
 * Write data as an XML API multipart upload: parts of st->gcs_part_bytes,
 * then the list of their ETags; abandoned (DELETE ?uploadId) on failure.
 */
static int
gcs_multipart(IoStorage *st, const IoParsedUri *u, const char *path, const char *data,
			  size_t len, TmsError *err)
{
	char	   *upload_id;
	char	   *eid;
	IoStrBuf	done;
	size_t		part = st->gcs_part_bytes;
	int			rc = 0;
	IoHttpResponse resp;
	IoHeader	h = {"content-type", "application/xml"};
	IoStrBuf	q;

	if (gcs_start_upload(st, u, path, &upload_id, err) != 0)
		return -1;
	eid = io_uri_encode(upload_id, strlen(upload_id), false);
	io_sb_init(&done);
	io_sb_puts(&done, "<CompleteMultipartUpload>");
	for (size_t off = 0, no = 1; rc == 0 && off < len; off += part, no++)
	{
		char		etag[256];
		size_t		n = len - off < part ? len - off : part;

		io_sb_init(&q);
		io_sb_printf(&q, "partNumber=%zu&uploadId=%s", no, eid ? eid : "");
		rc = q.oom || eid == NULL ?
			tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory") :
			gcs_put(st, u, path, q.data, data + off, n, etag, sizeof(etag), err);
		io_sb_free(&q);
		if (rc == 0)
			io_sb_printf(&done, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
						 no, etag);
	}
	io_sb_puts(&done, "</CompleteMultipartUpload>");
	io_sb_init(&q);
	io_sb_printf(&q, "uploadId=%s", eid ? eid : "");
	if (rc == 0 && (done.oom || q.oom))
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (rc == 0)
	{
		rc = gcs_request(st, "POST", path, q.data, &h, 1, done.data, done.len, &resp, err);
		if (rc == 0 && resp.status != 200)
			rc = gcs_status_error(&resp, "complete the upload of", u->bucket, u->path, err);
		io_http_response_free(&resp);
	}
	if (rc != 0)
		gcs_abort_upload(st, path, upload_id);
	io_sb_free(&q);
	io_sb_free(&done);
	io_free(eid);
	io_free(upload_id);
	return rc;
}

/* See storage_int.h. */
int
io_gcs_write(IoStorage *st, const IoParsedUri *u, const void *data, size_t len,
			 TmsError *err)
{
	char	   *path;
	int			rc;

	if (u->path[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid GCS location \"gs://%s/\": missing object name", u->bucket);
	path = xml_path(u->bucket, u->path);
	if (path == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (len > st->gcs_part_bytes)
		rc = gcs_multipart(st, u, path, data, len, err);
	else
		rc = gcs_put(st, u, path, NULL, data, len, NULL, 0, err);
	io_free(path);
	return rc;
}

/* ----------------------------------------------------------------
 * Listing
 * ----------------------------------------------------------------
 */

/* Hand one listed object to fn: 1 to stop, 0 to go on, -1 with *err. */
static int
list_one(const char *bucket, const char *name, uint64_t size, int64_t mtime,
		 IoListFn fn, void *arg, TmsError *err)
{
	IoStrBuf	uri;
	IoObjectInfo info;
	int			stop;

	io_sb_init(&uri);
	io_sb_printf(&uri, "gs://%s/%s", bucket, name);
	if (uri.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	info.uri = uri.data;
	info.size = size;
	info.mtime = mtime;
	stop = fn(arg, &info) != 0;
	io_sb_free(&uri);
	return stop ? 1 : 0;
}

/*
 * One page of a listing's answer: the JSON API's objects (items, with
 * the nextPageToken into *next) or the XML API's ListBucketResult (with
 * its NextContinuationToken when IsTruncated).  0 (1: stopped by fn), or
 * -1 with *err.
 */
static int
list_page(const IoParsedUri *u, const IoHttpResponse *resp, bool xml, size_t max_json,
		  IoListFn fn, void *arg, char **next, TmsError *err)
{
	int			rc = 0;

	*next = NULL;
	if (xml)
	{
		IoXmlNode  *doc = io_xml_parse(resp->body, resp->body_len, err);
		const char *t;

		if (doc == NULL)
			return -1;
		if (strcmp(doc->name, "ListBucketResult") != 0)
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									"unexpected GCS listing response: root element \"%s\"", doc->name);
		for (const IoXmlNode *c = doc->children; c != NULL && rc == 0; c = c->next)
		{
			const char *key = io_xml_child_text(c, "Key");
			const char *size = io_xml_child_text(c, "Size");

			if (strcmp(c->name, "Contents") != 0)
				continue;
			if (key == NULL)
				rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
										"malformed GCS listing: an entry has no Key");
			else
				rc = list_one(u->bucket, key, size ? strtoull(size, NULL, 10) : 0,
							  io_rfc3339_time(io_xml_child_text(c, "LastModified")), fn, arg, err);
		}
		t = io_xml_child_text(doc, "IsTruncated");
		if (rc == 0 && t != NULL && strcmp(t, "true") == 0 &&
			(t = io_xml_child_text(doc, "NextContinuationToken")) != NULL && t[0] != '\0')
			*next = io_strdup(t);
		io_xml_free(doc);
	}
	else
	{
		json_t	   *doc = io_json_parse(resp->body, resp->body_len, max_json, "GCS listing", err);
		json_t	   *items;
		json_t	   *o;
		size_t		i;
		const char *t;

		if (doc == NULL)
			return -1;
		items = json_object_get(doc, "items");
		if (!json_is_object(doc) || (items != NULL && !json_is_array(items)))
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200, "malformed GCS listing: no object with items");
		json_array_foreach(items, i, o)
		{
			const char *name = json_string_value(json_object_get(o, "name"));
			const char *size = json_string_value(json_object_get(o, "size"));

			if (rc != 0)
				break;
			if (name == NULL)
				rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
										"malformed GCS listing: an item has no name");
			else
				rc = list_one(u->bucket, name, size ? strtoull(size, NULL, 10) : 0,
							  io_rfc3339_time(json_string_value(json_object_get(o, "updated"))),
							  fn, arg, err);
		}
		t = json_string_value(json_object_get(doc, "nextPageToken"));
		if (rc == 0 && t != NULL && t[0] != '\0')
			*next = io_strdup(t);
		json_decref(doc);
	}
	return rc;
}

/* See storage_int.h. */
int
io_gcs_list(IoStorage *st, const IoParsedUri *u, IoListFn fn, void *arg, TmsError *err)
{
	bool		xml = IO_GCS_HMAC(st);
	char	   *token = NULL;
	char	   *ep = io_uri_encode(u->path, strlen(u->path), false);
	char	   *eb = io_uri_encode(u->bucket, strlen(u->bucket), false);
	int			page = st->list_page_size < GCS_LIST_PAGE_MAX ? st->list_page_size : GCS_LIST_PAGE_MAX;
	IoHttpOptions opt;
	int			rc = 0;

	io_http_options_resolve(&st->http, &opt);
	if (ep == NULL || eb == NULL)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	do
	{
		IoStrBuf	path,
					q;
		IoHttpResponse resp;
		char	   *et = token ? io_uri_encode(token, strlen(token), false) : NULL;

		if (rc != 0)
			break;
		memset(&resp, 0, sizeof(resp));
		io_sb_init(&path);
		io_sb_init(&q);
		if (xml)
		{
			io_sb_printf(&path, "/%s", u->bucket);
			io_sb_printf(&q, "list-type=2&max-keys=%d&prefix=%s", page, ep);
			if (token != NULL)
				io_sb_printf(&q, "&continuation-token=%s", et ? et : "");
		}
		else
		{
			io_sb_printf(&path, "/storage/v1/b/%s/o", eb);
			io_sb_printf(&q, "maxResults=%d&prefix=%s", page, ep);
			if (token != NULL)
				io_sb_printf(&q, "&pageToken=%s", et ? et : "");
		}
		if (path.oom || q.oom || (token != NULL && et == NULL))
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		else
			rc = gcs_request(st, "GET", path.data, q.data, NULL, 0, NULL, 0, &resp, err);
		io_free(et);
		io_free(token);
		token = NULL;
		io_sb_free(&path);
		io_sb_free(&q);
		if (rc == 0 && resp.status != 200)
			rc = gcs_status_error(&resp, "list", u->bucket, u->path, err);
		else if (rc == 0)
			rc = list_page(u, &resp, xml, opt.max_json_bytes, fn, arg, &token, err);
		io_http_response_free(&resp);
		if (rc == 0 && token != NULL && st->http.interrupted &&
			st->http.interrupted(st->http.interrupt_arg))
			rc = tms_error_set(err, IO_ERR_INTERRUPTED, "listing interrupted");
	} while (rc == 0 && token != NULL);
	io_free(token);
	io_free(ep);
	io_free(eb);
	return rc < 0 ? -1 : 0;
}

/* ----------------------------------------------------------------
 * Deleting
 * ----------------------------------------------------------------
 */

/* See storage_int.h. */
int
io_gcs_delete_request(IoStorage *st, const char *bucket, const char *const *keys,
					  size_t n, IoStrBuf *body, IoS3Request *r, TmsError *err)
{
	static const IoHeader batch_ct = {"content-type",
	"multipart/mixed; boundary=" IO_GCS_BATCH_BOUNDARY};
	char	   *path;
	int			rc;

	io_sb_init(body);
	if (IO_GCS_HMAC(st))
	{
		if (n != 1)
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "with HMAC keys a GCS delete takes one object, not %zu", n);
		path = xml_path(bucket, keys[0]);
		if (path == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		rc = gcs_request_build(st, "DELETE", path, NULL, NULL, 0, NULL, 0, false, r, err);
		io_free(path);
		return rc;
	}
	if (n < 1 || n > IO_GCS_DELETE_MAX_KEYS)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "a GCS batch takes 1 to %d objects, not %zu", IO_GCS_DELETE_MAX_KEYS, n);
	if (io_gcs_batch_body(bucket, keys, n, body, err) != 0)
		return -1;
	return gcs_request_build(st, "POST", "/batch/storage/v1", NULL, &batch_ct, 1,
							 body->data, body->len, false, r, err);
}

/* See storage_int.h. */
int
io_gcs_delete_answer(IoStorage *st, const IoHttpResponse *resp, const char *bucket,
					 const char *const *keys, size_t n, IoDeleteResult *results,
					 bool *throttled, bool *credentials, TmsError *err)
{
	*throttled = false;
	*credentials = false;
	if (IO_GCS_HMAC(st) && n == 1 &&
		(resp->status == 200 || resp->status == 204 || resp->status == 404))
	{
		memset(&results[0], 0, sizeof(IoDeleteResult));
		results[0].deleted = true;
		return 0;
	}
	if (!IO_GCS_HMAC(st) && resp->status == 200)
		return io_gcs_batch_read(io_http_header(resp, "content-type", NULL), resp->body,
								 resp->body_len, n, results, err);
	*throttled = resp->status == 429 || resp->status == 503;
	*credentials = resp->status == 401;
	return gcs_status_error(resp, n == 1 ? "delete" : "delete objects in", bucket,
							n == 1 ? keys[0] : "", err);
}

/* See storage_int.h: one request (HMAC: one per object) for the objects. */
int
io_gcs_delete_batch(IoStorage *st, const char *bucket, IoParsedUri *parsed,
					const size_t *idx, size_t n, IoDeleteResult *results, TmsError *err)
{
	size_t		per = IO_GCS_HMAC(st) ? 1 : n;
	int			rc = 0;

	io_storage_refresh_if_due(st);
	for (size_t from = 0; from < n && rc == 0; from += per)
	{
		const char *keys[IO_GCS_DELETE_MAX_KEYS];
		IoDeleteResult res[IO_GCS_DELETE_MAX_KEYS];
		size_t		k = n - from < per ? n - from : per;

		for (size_t i = 0; i < k; i++)
			keys[i] = parsed[idx[from + i]].path;
		for (int attempt = 0;; attempt++)
		{
			IoStrBuf	body;
			IoS3Request r;
			IoHttpResponse resp;
			bool		throttled = false,
						credentials = false;
			TmsError	scratch;

			memset(&resp, 0, sizeof(resp));
			rc = io_gcs_delete_request(st, bucket, keys, k, &body, &r, err);
			if (rc == 0)
			{
				rc = io_http_perform(&st->http, &r.req, &resp, err);
				io_s3_request_free(&r);
			}
			io_sb_free(&body);
			if (rc == 0)
				rc = io_gcs_delete_answer(st, &resp, bucket, keys, k, res, &throttled,
										  &credentials, err);
			if (rc == 0 || attempt > 0 || !credentials || !gcs_can_renew(st, resp.status) ||
				gcs_renew(st, &scratch) != 0)
			{
				io_http_response_free(&resp);
				break;
			}
			io_http_response_free(&resp);
		}
		for (size_t i = 0; rc == 0 && i < k; i++)
			results[idx[from + i]] = res[i];
	}
	return rc;
}
