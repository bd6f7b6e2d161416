/*-------------------------------------------------------------------------
 *
 * engine_client.c
 *		The engine clients (engine_client.h), common part: the handle, the
 *		authentication of every request, the request core, the mapping of
 *		non-success responses to TmsError, result rows, io_engine_wait and
 *		the dispatch to engine_livy.c, engine_trino.c and
 *		engine_gravitino.c.
 *
 * Authentication, one kind per handle (the user mapping's): OAuth2
 * client credentials when "credential" is set (the grant of oauth2.c,
 * shared with the REST catalog client: a form POST of
 * grant_type=client_credentials, client_id, client_secret and scope, when
 * given, to oauth2_server_uri, which is then required; the token is
 * cached in the handle until a minute before its expires_in and fetched
 * again once after a 401), else a bearer "token", else HTTP basic when
 * both "user" and "password" are set.  "user" alone sends no credentials
 * (Trino still names it in X-Trino-User).
 *
 * Requests that change nothing (GET, DELETE, cancels) are marked
 * idempotent: the HTTP core retries them on connection failures and on
 * 429/500/502/503/504 with backoff and jitter.  A submit is never
 * retried once it may have reached the engine: a transport failure after
 * the request left, or a 5xx answer, is IO_ERR_COMMIT_STATE_UNKNOWN and
 * the caller finds the run by its tag.  (A 401 is answered before the
 * engine looked at the request, so a submit is sent again after the
 * token refresh.)
 *
 * Rules: the engine URI holds no credentials, query or fragment; every
 * secret is wiped before it is freed and never appears in a TmsError
 * (the Authorization header is built per request and wiped after it);
 * response bodies are capped by max_response_bytes (the HTTP core), JSON
 * by max_json_bytes, and the result rows a run collects by
 * max_response_bytes in all.
 *
 * src/io/engines/engine_client.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/engines/engine_client_int.h"

/* Default first poll delay; the delay doubles up to 10 x between polls. */
#define DEFAULT_POLL_MS			500

/* Longest run message kept. */
#define MAX_MESSAGE_BYTES		2000

/* ----------------------------------------------------------------
 * The handle
 * ----------------------------------------------------------------
 */

/* See engine_client_int.h: "scheme://host:port" of an absolute http(s) URL. */
char *
io_engine_url_origin(const char *url)
{
	const char *p;
	const char *auth_end;
	const char *host;
	const char *host_end;
	const char *port = NULL;
	size_t		port_len = 0;
	bool		https;
	IoStrBuf	sb;
	long		portnum;

	if (url == NULL)
		return NULL;
	if (strncasecmp(url, "http://", 7) == 0)
	{
		https = false;
		p = url + 7;
	}
	else if (strncasecmp(url, "https://", 8) == 0)
	{
		https = true;
		p = url + 8;
	}
	else
		return NULL;
	auth_end = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t) (auth_end - p)) != NULL || auth_end == p)
		return NULL;
	host = p;
	if (*host == '[')
	{
		const char *rb = memchr(host, ']', (size_t) (auth_end - host));

		if (rb == NULL)
			return NULL;
		host_end = rb + 1;
		if (host_end < auth_end)
		{
			if (*host_end != ':')
				return NULL;
			port = host_end + 1;
			port_len = (size_t) (auth_end - port);
		}
	}
	else
	{
		const char *colon = memchr(host, ':', (size_t) (auth_end - host));

		host_end = colon ? colon : auth_end;
		if (colon != NULL)
		{
			port = colon + 1;
			port_len = (size_t) (auth_end - port);
		}
	}
	if (host_end == host)
		return NULL;
	for (p = host; p < host_end; p++)
		if ((unsigned char) *p <= 0x20 || *p == 0x7f || *p == '%')
			return NULL;
	portnum = https ? 443 : 80;
	if (port != NULL)
	{
		size_t		i;

		if (port_len == 0 || port_len > 5)
			return NULL;
		portnum = 0;
		for (i = 0; i < port_len; i++)
		{
			if (!isdigit((unsigned char) port[i]))
				return NULL;
			portnum = portnum * 10 + (port[i] - '0');
		}
		if (portnum < 1 || portnum > 65535)
			return NULL;
	}
	io_sb_init(&sb);
	io_sb_puts(&sb, https ? "https://" : "http://");
	for (p = host; p < host_end; p++)
		io_sb_putc(&sb, (char) tolower((unsigned char) *p));
	io_sb_printf(&sb, ":%ld", portnum);
	return io_sb_steal(&sb);
}

/* See engine_client.h; secrets are wiped. */
void
io_engine_free(IoEngine *eng)
{
	if (eng == NULL)
		return;
	io_free(eng->uri);
	io_free(eng->origin);
	io_free(eng->catalog);
	io_free(eng->metalake);
	io_free(eng->user);
	io_wipe_free(eng->password);
	io_wipe_free(eng->token);
	io_free(eng->client_id);
	io_wipe_free(eng->client_secret);
	io_free(eng->oauth_uri);
	io_free(eng->scope);
	io_free(eng->ca_file);
	io_free(eng->ca_path);
	io_oauth2_forget(&eng->oauth);
	io_free(eng);
}

/* See engine_client.h. */
void
io_engine_set_http(IoEngine *eng, const IoHttpOptions *http)
{
	io_http_options_resolve(http, &eng->http);
	eng->http.ca_file = eng->ca_file;
	eng->http.ca_path = eng->ca_path;
}

/* See engine_client.h. */
uint64_t
io_engine_request_count(const IoEngine *eng)
{
	return eng->requests;
}

/* Copy s into *dst; false on oom (NULL stays NULL). */
static bool
copy_opt(char **dst, const char *s)
{
	*dst = io_strdup(s);
	return s == NULL || *dst != NULL;
}

/* See engine_client.h: check and copy the configuration; nothing is sent. */
IoEngine *
io_engine_open(const IoEngineConfig *cfg, TmsError *err)
{
	IoEngine   *eng;
	size_t		n;

	if (cfg->type != IO_ENGINE_LIVY && cfg->type != IO_ENGINE_TRINO &&
		cfg->type != IO_ENGINE_GRAVITINO)
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "unknown engine type %d",
					  (int) cfg->type);
		return NULL;
	}
	if (cfg->uri == NULL ||
		(strncmp(cfg->uri, "http://", 7) != 0 && strncmp(cfg->uri, "https://", 8) != 0))
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "engine URI must start with http:// or https://");
		return NULL;
	}
	if (strpbrk(cfg->uri, "?# \t\r\n") != NULL)
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "engine URI must not have a query, a fragment or white space");
		return NULL;
	}
	if (cfg->type == IO_ENGINE_GRAVITINO &&
		(cfg->metalake == NULL || cfg->metalake[0] == '\0'))
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "a gravitino engine needs a metalake");
		return NULL;
	}
	if (cfg->credential != NULL && strchr(cfg->credential, ':') == NULL)
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "credential must have the form client_id:client_secret");
		return NULL;
	}
	if (cfg->credential != NULL &&
		(cfg->oauth2_server_uri == NULL ||
		 (strncmp(cfg->oauth2_server_uri, "http://", 7) != 0 &&
		  strncmp(cfg->oauth2_server_uri, "https://", 8) != 0)))
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "OAuth2 client credentials need an http:// or https:// oauth2_server_uri");
		return NULL;
	}
	eng = io_calloc(1, sizeof(IoEngine));
	if (eng == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	eng->type = cfg->type;
	n = strlen(cfg->uri);
	while (n > 0 && cfg->uri[n - 1] == '/')
		n--;
	eng->uri = io_strndup(cfg->uri, n);
	eng->origin = io_engine_url_origin(cfg->uri);
	if (eng->uri == NULL)
		goto oom;
	if (eng->origin == NULL)
	{
		io_engine_free(eng);
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "engine URI must be http(s)://host[:port][/path], without user information");
		return NULL;
	}
	if (!copy_opt(&eng->catalog, cfg->catalog) ||
		!copy_opt(&eng->metalake, cfg->metalake) ||
		!copy_opt(&eng->user, cfg->user) ||
		!copy_opt(&eng->password, cfg->password) ||
		!copy_opt(&eng->token, cfg->token) ||
		!copy_opt(&eng->oauth_uri, cfg->oauth2_server_uri) ||
		!copy_opt(&eng->scope, cfg->scope) ||
		!copy_opt(&eng->ca_file, cfg->http.ca_file) ||
		!copy_opt(&eng->ca_path, cfg->http.ca_path))
		goto oom;
	if (cfg->credential != NULL)
	{
		const char *colon = strchr(cfg->credential, ':');

		eng->client_id = io_strndup(cfg->credential, (size_t) (colon - cfg->credential));
		eng->client_secret = io_strdup(colon + 1);
		if (eng->client_id == NULL || eng->client_secret == NULL)
			goto oom;
	}
	eng->poll_interval_ms = cfg->poll_interval_ms > 0 ? cfg->poll_interval_ms : DEFAULT_POLL_MS;
	io_engine_set_http(eng, &cfg->http);
	return eng;

oom:
	io_engine_free(eng);
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return NULL;
}

/* ----------------------------------------------------------------
 * Authentication
 * ----------------------------------------------------------------
 */

/* Append s[0..len) in base64 (RFC 4648, padded). */
static void
append_base64(IoStrBuf *sb, const unsigned char *s, size_t len)
{
	static const char tab[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t		i;

	for (i = 0; i + 2 < len; i += 3)
	{
		io_sb_putc(sb, tab[s[i] >> 2]);
		io_sb_putc(sb, tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)]);
		io_sb_putc(sb, tab[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)]);
		io_sb_putc(sb, tab[s[i + 2] & 63]);
	}
	if (len - i == 1)
	{
		io_sb_putc(sb, tab[s[i] >> 2]);
		io_sb_putc(sb, tab[(s[i] & 3) << 4]);
		io_sb_puts(sb, "==");
	}
	else if (len - i == 2)
	{
		io_sb_putc(sb, tab[s[i] >> 2]);
		io_sb_putc(sb, tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)]);
		io_sb_putc(sb, tab[(s[i + 1] & 15) << 2]);
		io_sb_putc(sb, '=');
	}
}

/* The engine's refusal of a token request, in the engines' error shapes. */
static void
token_status_error(void *arg, const IoHttpResponse *resp, const char *what,
				   TmsError *err)
{
	io_engine_status_error((IoEngine *) arg, resp, false, what, err);
}

/*
 * Fetch a token (oauth2.c) when none is cached or the cached one is about
 * to expire: the client credentials go to oauth2_server_uri, with the
 * scope when one is set.
 */
static int
ensure_token(IoEngine *eng, TmsError *err)
{
	IoOAuth2Request rq;

	if (eng->client_id == NULL)
		return 0;
	if (io_oauth2_fresh(&eng->oauth))
		return 0;
	memset(&rq, 0, sizeof(rq));
	rq.http = &eng->http;
	rq.url = eng->oauth_uri;
	rq.client_id = eng->client_id;
	rq.client_secret = eng->client_secret;
	rq.scope = (eng->scope != NULL && eng->scope[0] != '\0') ? eng->scope : NULL;
	rq.status_error = token_status_error;
	rq.arg = eng;
	rq.requests = &eng->requests;
	return io_oauth2_fetch(&rq, &eng->oauth, err);
}

/* The Authorization header line into sb (nothing when no credentials). */
static void
auth_header(IoEngine *eng, IoStrBuf *sb)
{
	if (eng->client_id != NULL && eng->oauth.token != NULL)
		io_sb_printf(sb, "Authorization: Bearer %s", eng->oauth.token);
	else if (eng->token != NULL)
		io_sb_printf(sb, "Authorization: Bearer %s", eng->token);
	else if (eng->user != NULL && eng->password != NULL)
	{
		IoStrBuf	up;

		io_sb_init(&up);
		io_sb_printf(&up, "%s:%s", eng->user, eng->password);
		io_sb_puts(sb, "Authorization: Basic ");
		if (up.oom)
			sb->oom = true;
		else
			append_base64(sb, (const unsigned char *) up.data, up.len);
		io_sb_wipe_free(&up);
	}
}

/* ----------------------------------------------------------------
 * Requests and errors
 * ----------------------------------------------------------------
 */

#define MAX_HEADERS 16

/* See engine_client_int.h. */
int
io_engine_request(IoEngine *eng, const char *method, const char *url,
				  const char *accept, const char *content_type,
				  const char *body, const char *const *extra, size_t nextra,
				  bool idempotent, const char *what, IoHttpResponse *resp,
				  TmsError *err)
{
	IoStrBuf	full;
	IoStrBuf	accept_line;
	IoStrBuf	ctype_line;
	int			attempt;
	int			rc = -1;

	memset(resp, 0, sizeof(*resp));
	if (nextra > MAX_HEADERS - 4)
		return tms_error_set(err, IO_ERR_INTERNAL, "too many request headers");
	io_sb_init(&full);
	io_sb_init(&accept_line);
	io_sb_init(&ctype_line);
	if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0)
		io_sb_puts(&full, url);
	else
		io_sb_printf(&full, "%s%s", eng->uri, url);
	io_sb_printf(&accept_line, "Accept: %s", accept ? accept : "application/json");
	io_sb_printf(&ctype_line, "Content-Type: %s",
				 content_type ? content_type : "application/json");
	if (full.oom || accept_line.oom || ctype_line.oom)
	{
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}
	for (attempt = 0; attempt < 2; attempt++)
	{
		const char *headers[MAX_HEADERS];
		size_t		nh = 0;
		size_t		i;
		IoStrBuf	auth;
		IoHttpRequest req;

		if (ensure_token(eng, err) != 0)
		{
			rc = -1;
			break;
		}
		io_sb_init(&auth);
		auth_header(eng, &auth);
		if (auth.oom)
		{
			io_sb_wipe_free(&auth);
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		headers[nh++] = accept_line.data;
		if (auth.len > 0)
			headers[nh++] = auth.data;
		if (body != NULL)
			headers[nh++] = ctype_line.data;
		for (i = 0; i < nextra; i++)
			headers[nh++] = extra[i];
		memset(&req, 0, sizeof(req));
		req.method = method;
		req.url = full.data;
		req.headers = headers;
		req.nheaders = nh;
		req.body = body;
		req.body_len = body ? strlen(body) : 0;
		req.idempotent = idempotent;
		req.what = what;
		io_http_response_free(resp);
		rc = io_http_perform(&eng->http, &req, resp, err);
		eng->requests++;
		io_sb_wipe_free(&auth);
		if (rc != 0)
			break;
		if (resp->status == 401 && attempt == 0 && eng->client_id != NULL)
		{
			/* token revoked or expired early: get a new one, once */
			io_oauth2_forget(&eng->oauth);
			continue;
		}
		break;
	}
done:
	io_sb_free(&full);
	io_sb_free(&accept_line);
	io_sb_free(&ctype_line);
	return rc;
}

/* See engine_client_int.h. */
int
io_engine_submit_lost(const IoHttpResponse *resp, TmsError *err)
{
	if (resp->sent && err->code != IO_ERR_OUT_OF_MEMORY &&
		err->code != IO_ERR_INVALID_ARGUMENT)
	{
		char		cause[sizeof(err->message)];

		snprintf(cause, sizeof(cause), "%s", err->message);
		err->code = IO_ERR_COMMIT_STATE_UNKNOWN;
		snprintf(err->message, sizeof(err->message),
				 "submit state unknown: %.400s", cause);
	}
	return -1;
}

/* See engine_client_int.h (the reader of error bodies). */
int
io_engine_status_error(IoEngine *eng, const IoHttpResponse *resp, bool submit,
					   const char *what, TmsError *err)
{
	long		st = resp->status;
	IoErrorCode code;
	json_t	   *doc = NULL;
	const char *etype = NULL;
	const char *emsg = NULL;

	if (resp->body_len > 0 && (resp->body[0] == '{' || resp->body[0] == '['))
	{
		TmsError	perr;

		doc = io_json_parse(resp->body, resp->body_len, eng->http.max_json_bytes,
							"error", &perr);
	}
	if (json_is_object(doc))
	{
		json_t	   *e = json_object_get(doc, "error");

		emsg = json_string_value(json_object_get(doc, "message"));
		if (emsg == NULL)
			emsg = json_string_value(json_object_get(doc, "msg"));
		etype = json_string_value(json_object_get(doc, "type"));
		if (json_is_object(e))
		{
			if (emsg == NULL)
				emsg = json_string_value(json_object_get(e, "message"));
			if (etype == NULL)
				etype = json_string_value(json_object_get(e, "type"));
			if (etype == NULL)
				etype = json_string_value(json_object_get(e, "errorName"));
		}
		else if (json_is_string(e))
		{
			/* an OAuth2 error response */
			etype = json_string_value(e);
			if (emsg == NULL)
				emsg = json_string_value(json_object_get(doc, "error_description"));
		}
	}
	code = st == 410 ? IO_ERR_NOT_FOUND : io_http_status_code(st);
	if (submit && st >= 500)
	{
		code = IO_ERR_COMMIT_STATE_UNKNOWN;
		tms_error_set_http(err, code, st, "submit state unknown: %s returned HTTP status %ld",
						   what, st);
	}
	else
		tms_error_set_http(err, code, st, "%s failed with HTTP status %ld", what, st);
	if (etype != NULL || emsg != NULL)
	{
		char		d[sizeof(err->detail)];

		snprintf(d, sizeof(d), "%s%s%s", etype ? etype : "",
				 (etype && emsg) ? ": " : "", emsg ? emsg : "");
		tms_error_detail_raw(err, d, strlen(d));
	}
	else if (resp->body_len > 0)
		tms_error_detail_raw(err, resp->body, resp->body_len > 300 ? 300 : resp->body_len);
	json_decref(doc);
	return -1;
}

/* See engine_client_int.h. */
json_t *
io_engine_parse(IoEngine *eng, const IoHttpResponse *resp, const char *what,
				TmsError *err)
{
	json_t	   *doc = io_json_parse(resp->body, resp->body_len,
									eng->http.max_json_bytes, what, err);

	if (doc == NULL)
	{
		err->http_status = resp->status;
		return NULL;
	}
	if (!json_is_object(doc) && !json_is_array(doc))
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, resp->status,
						   "malformed %s response: not a JSON object", what);
		return NULL;
	}
	return doc;
}

/* json_dump_callback's sink: append to an IoStrBuf. */
static int
dump_cb(const char *buffer, size_t size, void *data)
{
	IoStrBuf   *sb = data;

	io_sb_append(sb, buffer, size);
	return sb->oom ? -1 : 0;
}

/* See engine_client_int.h. */
char *
io_engine_json_dump(const json_t *v)
{
	IoStrBuf	sb;

	io_sb_init(&sb);
	if (json_dump_callback(v, dump_cb, &sb,
						   JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) != 0)
	{
		io_sb_free(&sb);
		return NULL;
	}
	io_sb_puts(&sb, "");
	return io_sb_steal(&sb);
}

/* The shortest "%.Ng" text of d that reads back as d. */
static void
real_text(double d, char *buf, size_t size)
{
	int			prec;

	for (prec = 15; prec <= 17; prec++)
	{
		snprintf(buf, size, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

/* See engine_client_int.h.  Returns 0, or -1 on oom. */
int
io_engine_cell_text(const json_t *v, char **out)
{
	char		buf[64];

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (json_is_string(v))
		*out = io_strndup(json_string_value(v), json_string_length(v));
	else if (json_is_integer(v))
	{
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		*out = io_strdup(buf);
	}
	else if (json_is_real(v))
	{
		real_text(json_real_value(v), buf, sizeof(buf));
		*out = io_strdup(buf);
	}
	else if (json_is_true(v))
		*out = io_strdup("true");
	else if (json_is_false(v))
		*out = io_strdup("false");
	else
		*out = io_engine_json_dump(v);
	return *out != NULL ? 0 : -1;
}

/* See engine_client_int.h. */
void
io_engine_clear_result(IoEngineRun *run)
{
	size_t		i,
				j;

	for (i = 0; i < run->nrows; i++)
	{
		for (j = 0; j < run->ncolumns; j++)
			io_free(run->rows[i][j]);
		io_free(run->rows[i]);
	}
	io_free(run->rows);
	for (j = 0; j < run->ncolumns; j++)
		io_free(run->columns[j]);
	io_free(run->columns);
	run->rows = NULL;
	run->nrows = 0;
	run->columns = NULL;
	run->ncolumns = 0;
	if (run->priv != NULL)
		((EngineRunPriv *) run->priv)->result_bytes = 0;
}

/* See engine_client_int.h.  Rows must not be collected yet. */
int
io_engine_set_columns(IoEngineRun *run, const char *const *names, size_t n)
{
	char	  **cols;
	size_t		i;

	cols = io_calloc(n ? n : 1, sizeof(char *));
	if (cols == NULL)
		return -1;
	for (i = 0; i < n; i++)
	{
		cols[i] = io_strdup(names[i] ? names[i] : "");
		if (cols[i] == NULL)
		{
			while (i > 0)
				io_free(cols[--i]);
			io_free(cols);
			return -1;
		}
	}
	for (i = 0; i < run->ncolumns; i++)
		io_free(run->columns[i]);
	io_free(run->columns);
	run->columns = cols;
	run->ncolumns = n;
	return 0;
}

/* See engine_client_int.h. */
int
io_engine_add_rows(IoEngine *eng, IoEngineRun *run, const json_t *data,
				   const char *what, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	size_t		nnew,
				i;
	char	 ***grown;

	if (data == NULL || json_is_null(data))
		return 0;
	if (!json_is_array(data))
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed %s: \"data\" is not an array", what);
	nnew = json_array_size(data);
	if (nnew == 0)
		return 0;
	for (i = 0; i < nnew; i++)
	{
		json_t	   *row = json_array_get(data, i);

		if (!json_is_array(row) || json_array_size(row) != run->ncolumns)
			return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									  "malformed %s: row %zu has %zu values, expected %zu",
									  what, run->nrows + i + 1,
									  json_is_array(row) ? json_array_size(row) : 0,
									  run->ncolumns);
	}
	grown = io_realloc(run->rows, (run->nrows + nnew) * sizeof(char **));
	if (grown == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	run->rows = grown;
	for (i = 0; i < nnew; i++)
	{
		json_t	   *row = json_array_get(data, i);
		char	  **cells = io_calloc(run->ncolumns ? run->ncolumns : 1, sizeof(char *));
		size_t		j;

		if (cells == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		/* the row is counted from here: a failure frees it with the rest */
		run->rows[run->nrows++] = cells;
		for (j = 0; j < run->ncolumns; j++)
		{
			if (io_engine_cell_text(json_array_get(row, j), &cells[j]) != 0)
				return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			priv->result_bytes += sizeof(char *) + (cells[j] ? strlen(cells[j]) + 1 : 0);
		}
		if (priv->result_bytes > eng->http.max_response_bytes)
			return tms_error_set(err, IO_ERR_TOO_LARGE,
								 "result of %s exceeds max_response_bytes (%zu bytes)",
								 what, eng->http.max_response_bytes);
	}
	return 0;
}

/* See engine_client_int.h. */
int
io_engine_set_message(IoEngineRun *run, const char *msg)
{
	size_t		n = strlen(msg);
	size_t		i;
	char	   *m;

	if (n > MAX_MESSAGE_BYTES)
		n = MAX_MESSAGE_BYTES;
	m = io_strndup(msg, n);
	if (m == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (((unsigned char) m[i] < 0x20 && m[i] != '\n') || m[i] == 0x7f)
			m[i] = ' ';
	io_free(run->message);
	run->message = m;
	return 0;
}

/* See engine_client_int.h. */
int
io_engine_run_init(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv;

	memset(run, 0, sizeof(*run));
	priv = io_calloc(1, sizeof(EngineRunPriv));
	if (priv == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	priv->type = eng->type;
	priv->session_id = -1;
	priv->statement_id = -1;
	run->priv = priv;
	run->state = IO_ENGINE_RUN_PENDING;
	return 0;
}

/* See engine_client.h. */
void
io_engine_run_free(IoEngineRun *run)
{
	EngineRunPriv *priv;

	if (run == NULL)
		return;
	io_engine_clear_result(run);
	priv = run->priv;
	if (priv != NULL)
	{
		io_free(priv->statement);
		io_free(priv->query_id);
		io_free(priv->next_uri);
		io_free(priv->template_name);
		io_free(priv);
	}
	io_free(run->run_id);
	io_free(run->message);
	memset(run, 0, sizeof(*run));
}

/* See engine_client_int.h. */
int
io_engine_check_tag(const char *tag, TmsError *err)
{
	size_t		n,
				i;

	if (tag == NULL || tag[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "a run needs a tag");
	n = strlen(tag);
	if (n > ENGINE_MAX_TAG_BYTES)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "tag must not exceed %d bytes", ENGINE_MAX_TAG_BYTES);
	for (i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) tag[i];

		if (c <= 0x20 || c >= 0x7f || c == ',')
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "tag \"%.100s\" must be printable ASCII without spaces or commas",
								 tag);
	}
	return 0;
}

/* See engine_client_int.h. */
void
io_engine_append_encoded(IoStrBuf *sb, const char *s)
{
	char	   *e = io_uri_encode(s, strlen(s), false);

	if (e == NULL)
	{
		sb->oom = true;
		return;
	}
	io_sb_puts(sb, e);
	io_free(e);
}

/* ----------------------------------------------------------------
 * The interface: dispatch
 * ----------------------------------------------------------------
 */

/* A run's handle must be of this engine. */
static int
check_run(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run ? run->priv : NULL;

	if (priv == NULL || priv->type != eng->type)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "run does not belong to this engine");
	return 0;
}

/* See engine_client.h. */
int
io_engine_submit(IoEngine *eng, const char *tag, const char *statement,
				 const IoKeyValue *session, size_t nsession,
				 IoEngineRun *run, TmsError *err)
{
	int			rc;

	memset(run, 0, sizeof(*run));
	if (io_engine_check_tag(tag, err) != 0)
		return -1;
	if (statement == NULL || statement[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "a run needs a statement");
	switch (eng->type)
	{
		case IO_ENGINE_LIVY:
			rc = io_livy_submit(eng, tag, statement, session, nsession, run, err);
			break;
		case IO_ENGINE_TRINO:
			rc = io_trino_submit(eng, tag, statement, session, nsession, run, err);
			break;
		default:
			rc = io_gravitino_submit(eng, tag, statement, run, err);
			break;
	}
	if (rc != 0)
		io_engine_run_free(run);
	return rc;
}

/* See engine_client.h. */
int
io_engine_poll(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	if (check_run(eng, run, err) != 0)
		return -1;
	if (run->state == IO_ENGINE_RUN_SUCCEEDED || run->state == IO_ENGINE_RUN_FAILED ||
		run->state == IO_ENGINE_RUN_CANCELLED)
		return 0;
	switch (eng->type)
	{
		case IO_ENGINE_LIVY:
			return io_livy_poll(eng, run, err);
		case IO_ENGINE_TRINO:
			return io_trino_poll(eng, run, err);
		default:
			return io_gravitino_poll(eng, run, err);
	}
}

/* Has the run ended? */
static bool
run_ended(const IoEngineRun *run)
{
	return run->state == IO_ENGINE_RUN_SUCCEEDED || run->state == IO_ENGINE_RUN_FAILED ||
		run->state == IO_ENGINE_RUN_CANCELLED;
}

/* See engine_client.h. */
int
io_engine_wait(IoEngine *eng, IoEngineRun *run, long wait_ms, TmsError *err)
{
	int64_t		deadline = io_now_ms() + (wait_ms > 0 ? wait_ms : 0);
	long		delay = eng->poll_interval_ms;
	long		max_delay = eng->poll_interval_ms * 10;

	if (io_engine_poll(eng, run, err) != 0)
		return -1;
	while (!run_ended(run))
	{
		int64_t		left = deadline - io_now_ms();

		if (left <= 0)
			break;
		if (io_sleep_ms(&eng->http, delay < left ? delay : (long) left, err) != 0)
			return -1;
		if (io_engine_poll(eng, run, err) != 0)
			return -1;
		delay = delay * 2 > max_delay ? max_delay : delay * 2;
	}
	return 0;
}

/* See engine_client.h. */
int
io_engine_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	if (check_run(eng, run, err) != 0)
		return -1;
	if (run_ended(run))
		return 0;
	switch (eng->type)
	{
		case IO_ENGINE_LIVY:
			return io_livy_cancel(eng, run, err);
		case IO_ENGINE_TRINO:
			return io_trino_cancel(eng, run, err);
		default:
			return io_gravitino_cancel(eng, run, err);
	}
}

/* See engine_client.h. */
int
io_engine_offers_template(IoEngine *eng, const char *template_name, bool *offered,
						  char **names, TmsError *err)
{
	*offered = false;
	*names = NULL;
	if (eng->type != IO_ENGINE_GRAVITINO)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "only a gravitino engine has job templates");
	if (template_name == NULL || template_name[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "no job template name");
	return io_gravitino_offers_template(eng, template_name, offered, names, err);
}

/* See engine_client.h. */
int
io_engine_find(IoEngine *eng, const char *tag, const char *statement,
			   const char *template_name, IoEngineRun *run, bool *found,
			   TmsError *err)
{
	int			rc;

	memset(run, 0, sizeof(*run));
	*found = false;
	if (io_engine_check_tag(tag, err) != 0)
		return -1;
	switch (eng->type)
	{
		case IO_ENGINE_LIVY:
			rc = io_livy_find(eng, tag, statement, run, found, err);
			break;
		case IO_ENGINE_TRINO:
			rc = io_trino_find(eng, tag, run, found, err);
			break;
		default:
			rc = io_gravitino_find(eng, tag, template_name, run, found, err);
			break;
	}
	if (rc != 0 || !*found)
	{
		io_engine_run_free(run);
		*found = false;
	}
	return rc;
}

/* See engine_client.h. */
int
io_engine_attach(IoEngine *eng, const char *run_id, const char *statement,
				 IoEngineRun *run, TmsError *err)
{
	int			rc;

	memset(run, 0, sizeof(*run));
	if (run_id == NULL || run_id[0] == '\0' || strlen(run_id) > 256)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "invalid run id");
	switch (eng->type)
	{
		case IO_ENGINE_LIVY:
			rc = io_livy_attach(eng, run_id, statement, run, err);
			break;
		case IO_ENGINE_TRINO:
			rc = io_trino_attach(eng, run_id, run, err);
			break;
		default:
			rc = io_gravitino_attach(eng, run_id, run, err);
			break;
	}
	if (rc != 0)
		io_engine_run_free(run);
	return rc;
}

/* See engine_client.h. */
int
io_engine_close(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	if (check_run(eng, run, err) != 0)
		return -1;
	if (eng->type == IO_ENGINE_LIVY)
		return io_livy_close(eng, run, err);
	return 0;
}
