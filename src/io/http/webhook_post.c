/*-------------------------------------------------------------------------
 *
 * webhook_post.c
 *		One POST of a JSON document to a webhook receiver (io.h).
 *
 * A webhook URL is a credential: chat services and incident tools put
 * their secret in its path or query.  So no message of this file names
 * more of it than its origin (scheme://host[:port]), and the messages of
 * the HTTP core, which name the path, are replaced rather than passed on;
 * libcurl's own text (the detail) is dropped too, and so is the
 * receiver's answer, which may echo the request.
 *
 * One attempt only: the request is not idempotent as far as this layer
 * knows (a receiver may act twice), so retries are the caller's, with its
 * own backoff across attempts.  The response body is read up to
 * IO_WEBHOOK_MAX_RESPONSE and ignored.
 *
 * src/io/http/webhook_post.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_int.h"

/* a receiver's answer is not read further than this */
#define IO_WEBHOOK_MAX_RESPONSE ((size_t) 64 * 1024)

/*
 * "scheme://host[:port]" of url into buf: no user info, path, query or
 * fragment.  Returns false when url is not http:// or https://.
 */
bool
io_webhook_origin(const char *url, char *buf, size_t size)
{
	const char *host;
	const char *end;
	const char *at;
	size_t		scheme_len;

	if (strncmp(url, "http://", 7) == 0)
		scheme_len = 4;
	else if (strncmp(url, "https://", 8) == 0)
		scheme_len = 5;
	else
		return false;
	host = url + scheme_len + 3;
	end = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t) (end - host));
	while (at != NULL)
	{
		host = at + 1;
		at = memchr(host, '@', (size_t) (end - host));
	}
	if (end == host)
		return false;
	snprintf(buf, size, "%.*s://%.*s", (int) scheme_len, url, (int) (end - host), host);
	return true;
}

int
io_webhook_post(const IoWebhookRequest *req, long *status, long *retry_after_ms,
				TmsError *err)
{
	char		origin[256];
	char	   *auth = NULL;
	const char *headers[2];
	IoHttpOptions opt;
	IoHttpRequest hr;
	IoHttpResponse resp;
	int			rc;

	tms_error_clear(err);
	*status = 0;
	*retry_after_ms = -1;
	if (req->url == NULL || !io_webhook_origin(req->url, origin, sizeof(origin)))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "webhook URL is not an http:// or https:// URL with a host");

	headers[0] = "Content-Type: application/json";
	if (req->token != NULL)
	{
		IoStrBuf	sb;

		io_sb_init(&sb);
		io_sb_puts(&sb, "Authorization: Bearer ");
		io_sb_puts(&sb, req->token);
		if (sb.oom)
		{
			io_wipe_free(sb.data);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
		auth = io_sb_steal(&sb);
		headers[1] = auth;
	}

	opt = req->http;
	opt.retries = 0;
	if (opt.max_response_bytes == 0 || opt.max_response_bytes > IO_WEBHOOK_MAX_RESPONSE)
		opt.max_response_bytes = IO_WEBHOOK_MAX_RESPONSE;
	memset(&hr, 0, sizeof(hr));
	hr.method = "POST";
	hr.url = req->url;
	hr.headers = headers;
	hr.nheaders = auth != NULL ? 2 : 1;
	hr.body = req->body;
	hr.body_len = req->body_len;
	hr.idempotent = false;
	hr.what = "webhook";

	rc = io_http_perform(&opt, &hr, &resp, err);
	io_wipe_free(auth);
	if (rc != 0)
	{
		IoErrorCode code = err->code;
		IoHttpOptions resolved;

		/* the core's message names the path: say it again without */
		io_http_options_resolve(&opt, &resolved);
		io_http_response_free(&resp);
		switch (code)
		{
			case IO_ERR_TIMEOUT:
				return tms_error_set(err, code,
									 "webhook receiver %s did not answer within %ld ms",
									 origin, resolved.request_timeout_ms);
			case IO_ERR_INTERRUPTED:
				return tms_error_set(err, code, "request to webhook receiver %s interrupted",
									 origin);
			case IO_ERR_TOO_LARGE:
				return tms_error_set(err, code,
									 "answer of webhook receiver %s exceeds %zu bytes",
									 origin, resolved.max_response_bytes);
			case IO_ERR_OUT_OF_MEMORY:
				return tms_error_set(err, code, "out of memory");
			default:
				return tms_error_set(err, code, "could not reach webhook receiver %s (%s)",
									 origin, tms_error_code_name(code));
		}
	}
	*status = resp.status;
	if (resp.status >= 200 && resp.status < 300)
	{
		io_http_response_free(&resp);
		return 0;
	}
	*retry_after_ms = io_http_retry_after_ms(&resp, io_wall_ms());
	tms_error_set_http(err, io_http_status_code(resp.status), resp.status,
					   "webhook receiver %s answered HTTP %ld", origin, resp.status);
	io_http_response_free(&resp);
	return -1;
}
