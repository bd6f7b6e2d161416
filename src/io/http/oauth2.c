/*-------------------------------------------------------------------------
 *
 * oauth2.c
 *		The OAuth2 client-credentials grant shared by the REST catalog
 *		client and the engine clients: the token request (a form POST of
 *		grant_type=client_credentials, client_id, client_secret and,
 *		when given, scope; or, for a Google service account, of
 *		grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer and the
 *		signed assertion), the reader of token responses and the cache.
 *
 * Rules: see oauth2.h.  The secret lives only in the form body, which is
 * wiped; no error message quotes the body, the secret or a token.
 *
 * src/io/http/oauth2.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io/http/oauth2.h"

/* See oauth2.h. */
int
io_oauth2_fetch(const IoOAuth2Request *rq, IoOAuth2Token *tok, TmsError *err)
{
	IoStrBuf	body;
	IoHttpRequest req;
	IoHttpResponse resp;
	const char *headers[2] = {"Content-Type: application/x-www-form-urlencoded",
	"Accept: application/json"};
	int			rc;

	io_sb_init(&body);
	if (rq->assertion != NULL)
	{
		io_form_add(&body, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
		io_form_add(&body, "assertion", rq->assertion);
	}
	else
	{
		io_form_add(&body, "grant_type", "client_credentials");
		io_form_add(&body, "client_id", rq->client_id);
		io_form_add(&body, "client_secret", rq->client_secret);
		if (rq->scope != NULL)
			io_form_add(&body, "scope", rq->scope);
	}
	if (body.oom)
	{
		io_sb_wipe_free(&body);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = rq->url;
	req.headers = headers;
	req.nheaders = 2;
	req.body = body.data;
	req.body_len = body.len;
	req.idempotent = true;		/* asking for a token twice is harmless */
	req.what = "OAuth2 token endpoint";
	rc = io_http_perform(rq->http, &req, &resp, err);
	if (rq->requests != NULL)
		(*rq->requests)++;
	io_sb_wipe_free(&body);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		rq->status_error(rq->arg, &resp, "OAuth2 token request", err);
		if (resp.status == 400 || resp.status == 401 || resp.status == 403)
			err->code = IO_ERR_UNAUTHORIZED;
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_oauth2_read(tok, resp.body, resp.body_len, rq->http->max_json_bytes, err);
	io_http_response_free(&resp);
	return rc;
}

/* See oauth2.h. */
bool
io_oauth2_fresh(const IoOAuth2Token *tok)
{
	return tok->token != NULL &&
		(tok->expires_ms == 0 ||
		 io_now_ms() < tok->expires_ms - IO_OAUTH2_REFRESH_MARGIN_MS);
}

/* See oauth2.h. */
int
io_oauth2_read(IoOAuth2Token *tok, const char *body, size_t len,
			   size_t max_json, TmsError *err)
{
	json_t	   *doc;
	const char *t;
	json_t	   *exp;
	json_int_t	secs;

	doc = io_json_parse(body, len, max_json, "OAuth2 token", err);
	if (doc == NULL)
	{
		err->http_status = 200;
		return -1;
	}
	t = json_string_value(json_object_get(doc, "access_token"));
	if (t == NULL || t[0] == '\0' || strpbrk(t, "\r\n") != NULL)
	{
		json_decref(doc);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "OAuth2 token response has no usable \"access_token\"");
	}
	io_wipe_free(tok->token);
	tok->token = io_strdup(t);
	tok->fetches++;
	exp = json_object_get(doc, "expires_in");
	secs = json_is_integer(exp) ? json_integer_value(exp) : 0;
	if (secs > IO_OAUTH2_MAX_LIFETIME_S)
		secs = IO_OAUTH2_MAX_LIFETIME_S;
	tok->expires_ms = secs > 0 ? io_now_ms() + (int64_t) secs * 1000 : 0;
	json_decref(doc);
	if (tok->token == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

/* See oauth2.h. */
void
io_oauth2_forget(IoOAuth2Token *tok)
{
	io_wipe_free(tok->token);
	tok->token = NULL;
	tok->expires_ms = 0;
}
