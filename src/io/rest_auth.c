/*-------------------------------------------------------------------------
 *
 * rest_auth.c
 *		OAuth2 for the Iceberg REST catalog client: the client-credentials
 *		grant against "oauth2_server_uri" or the spec's default
 *		v1/oauth/tokens, a token cache refreshed a minute before expiry
 *		(and once after a 401, by the callers), and the reader of token
 *		responses.
 *
 * Rules: the client secret and every token are wiped before their memory
 * is freed and never appear in an IoError; an "expires_in" is trusted up
 * to TOKEN_MAX_LIFETIME_S.
 *
 * src/io/rest_auth.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "rest_int.h"

/* Refresh a token this long before it expires. */
#define TOKEN_REFRESH_MARGIN_MS	60000

/* The longest token lifetime believed (a year): no overflow, no forever. */
#define TOKEN_MAX_LIFETIME_S	(365 * 24 * 3600)

/*
 * See rest_int.h: POST the client credentials to oauth2_server_uri (an
 * absolute URL, or a path below the catalog URI) or to the spec's
 * default v1/oauth/tokens.  The form body holds the secret and is wiped.
 */
int
io_rest_fetch_token(IoCatalog *cat, IoError *err)
{
	IoStrBuf	body;
	IoStrBuf	url;
	IoHttpRequest req;
	IoHttpResponse resp;
	const char *headers[2] = {"Content-Type: application/x-www-form-urlencoded",
	"Accept: application/json"};
	int			rc;

	io_sb_init(&body);
	io_sb_init(&url);
	io_form_add(&body, "grant_type", "client_credentials");
	io_form_add(&body, "client_id", cat->client_id);
	io_form_add(&body, "client_secret", cat->client_secret);
	io_form_add(&body, "scope", cat->scope ? cat->scope : "catalog");
	if (cat->oauth_uri != NULL && strstr(cat->oauth_uri, "://") != NULL)
		io_sb_puts(&url, cat->oauth_uri);
	else if (cat->oauth_uri != NULL)
		io_sb_printf(&url, "%s/%s", cat->uri,
					 cat->oauth_uri[0] == '/' ? cat->oauth_uri + 1 : cat->oauth_uri);
	else
		io_sb_printf(&url, "%s/v1/oauth/tokens", cat->uri);
	if (body.oom || url.oom)
	{
		if (body.data)
			memset(body.data, 0, body.len);
		io_sb_free(&body);
		io_sb_free(&url);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	memset(&req, 0, sizeof(req));
	req.method = "POST";
	req.url = url.data;
	req.headers = headers;
	req.nheaders = 2;
	req.body = body.data;
	req.body_len = body.len;
	req.idempotent = true;		/* asking for a token twice is harmless */
	req.what = "OAuth2 token endpoint";
	rc = io_http_perform(&cat->http, &req, &resp, err);
	cat->requests++;
	memset(body.data, 0, body.len);
	io_sb_free(&body);
	io_sb_free(&url);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		io_rest_status_error(&resp, REST_CALL_GENERIC, "OAuth2 token request",
							 cat->http.max_json_bytes, err);
		if (resp.status == 400 || resp.status == 401 || resp.status == 403)
			err->code = IO_ERR_UNAUTHORIZED;
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_rest_read_token(cat, resp.body, resp.body_len, err);
	io_http_response_free(&resp);
	return rc;
}

/*
 * See rest_int.h: a token is fetched when none is cached or when the
 * cached one expires within TOKEN_REFRESH_MARGIN_MS.
 */
int
io_rest_ensure_token(IoCatalog *cat, IoError *err)
{
	if (cat->client_id == NULL)
		return 0;
	if (cat->token != NULL &&
		(cat->token_expires_ms == 0 ||
		 io_now_ms() < cat->token_expires_ms - TOKEN_REFRESH_MARGIN_MS))
		return 0;
	return io_rest_fetch_token(cat, err);
}

/* See rest_int.h (the reader of OAuth2 token responses). */
int
io_rest_read_token(IoCatalog *cat, const char *body, size_t len, IoError *err)
{
	json_t	   *doc;
	const char *tok;
	json_t	   *exp;
	json_int_t	secs;

	doc = io_json_parse(body, len, cat->http.max_json_bytes, "OAuth2 token", err);
	if (doc == NULL && err->code != IO_ERR_PROTOCOL)
		return -1;
	tok = json_string_value(json_object_get(doc, "access_token"));
	if (tok == NULL || tok[0] == '\0')
	{
		json_decref(doc);
		return io_set_error(err, IO_ERR_PROTOCOL, 200,
							"OAuth2 token response has no \"access_token\"");
	}
	io_wipe_free(cat->token);
	cat->token = io_strdup(tok);
	cat->token_fetches++;
	exp = json_object_get(doc, "expires_in");
	secs = json_is_integer(exp) ? json_integer_value(exp) : 0;
	if (secs > TOKEN_MAX_LIFETIME_S)
		secs = TOKEN_MAX_LIFETIME_S;
	cat->token_expires_ms = secs > 0 ? io_now_ms() + (int64_t) secs * 1000 : 0;
	json_decref(doc);
	if (cat->token == NULL)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	return 0;
}
