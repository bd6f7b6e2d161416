/*-------------------------------------------------------------------------
 *
 * rest_auth.c
 *		How the Iceberg REST catalog client authenticates: OAuth2 (the
 *		client-credentials grant of oauth2.c against "oauth2_server_uri"
 *		or the spec's default v1/oauth/tokens, the token renewed a minute
 *		before expiry and once after a 401, by the callers), AWS SigV4
 *		signing, and the one function that
 *		makes the headers of every catalog request (io_rest_headers), which
 *		the request core and the batches of loads both call.
 *
 * SigV4 follows Iceberg's RESTSigV4AuthSession (aws module): the request
 * is first given its bearer token, then signed; an Authorization header
 * already there moves to Original-Authorization and is signed with the
 * rest; x-amz-content-sha256 carries the body's sha256 and is signed;
 * the service is the server's signing name ("execute-api" by default,
 * "glue", "s3tables"), the path is normalised and encoded twice (the rule
 * of every service but S3).  The OAuth2 token request is not signed, as
 * in Iceberg, where the OAuth2 manager fetches tokens itself.
 *
 * Rules: the client secret, the AWS secret key, session tokens and every
 * token are wiped before their memory is freed and never appear in an
 * TmsError; an "expires_in" is trusted up to IO_OAUTH2_MAX_LIFETIME_S.
 *
 * src/io/rest/rest_auth.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "io/rest/rest_int.h"

/* The catalog's refusal of a token request, in the catalog's error shapes. */
static void
token_status_error(void *arg, const IoHttpResponse *resp, const char *what,
				   TmsError *err)
{
	IoCatalog  *cat = arg;

	io_rest_status_error(resp, REST_CALL_GENERIC, what,
						 cat->http.max_json_bytes, err);
}

/*
 * See rest_int.h: POST the client credentials (oauth2.c) to
 * oauth2_server_uri (an absolute URL, or a path below the catalog URI) or
 * to the spec's default v1/oauth/tokens, with the scope "catalog" unless
 * another is set.
 */
int
io_rest_fetch_token(IoCatalog *cat, TmsError *err)
{
	IoStrBuf	url;
	IoOAuth2Request rq;
	const IoAllocator *prev;
	int			rc;

	io_sb_init(&url);
	if (cat->oauth_uri != NULL && strstr(cat->oauth_uri, "://") != NULL)
		io_sb_puts(&url, cat->oauth_uri);
	else if (cat->oauth_uri != NULL)
		io_sb_printf(&url, "%s/%s", cat->uri,
					 cat->oauth_uri[0] == '/' ? cat->oauth_uri + 1 : cat->oauth_uri);
	else
		io_sb_printf(&url, "%s/v1/oauth/tokens", cat->uri);
	if (url.oom)
	{
		io_sb_free(&url);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	memset(&rq, 0, sizeof(rq));
	rq.http = &cat->http;
	rq.url = url.data;
	rq.client_id = cat->client_id;
	rq.client_secret = cat->client_secret;
	rq.scope = cat->scope ? cat->scope : "catalog";
	rq.status_error = token_status_error;
	rq.arg = cat;
	rq.requests = &cat->requests;
	prev = io_use_allocator(cat->alloc);	/* the token outlives the call */
	rc = io_oauth2_fetch(&rq, &cat->oauth, err);
	io_use_allocator(prev);
	io_sb_free(&url);
	return rc;
}

/*
 * See rest_int.h: a token is fetched when none is cached or when the
 * cached one expires within IO_OAUTH2_REFRESH_MARGIN_MS.
 */
int
io_rest_ensure_token(IoCatalog *cat, TmsError *err)
{
	if (cat->client_id == NULL)
		return 0;
	if (io_oauth2_fresh(&cat->oauth))
		return 0;
	return io_rest_fetch_token(cat, err);
}

/* See rest_int.h (the reader of OAuth2 token responses). */
int
io_rest_read_token(IoCatalog *cat, const char *body, size_t len, TmsError *err)
{
	const IoAllocator *prev = io_use_allocator(cat->alloc);
	int			rc;

	rc = io_oauth2_read(&cat->oauth, body, len, cat->http.max_json_bytes, err);
	io_use_allocator(prev);
	return rc;
}

/* ----------------------------------------------------------------
 * The headers of a request, SigV4
 * ----------------------------------------------------------------
 */

/* Append "name: value" to *l (the text is wiped if it cannot be kept). */
static bool
add_line(IoStringList *l, const char *name, const char *value)
{
	IoStrBuf	sb;
	char	  **grown;

	io_sb_init(&sb);
	io_sb_printf(&sb, "%s: %s", name, value);
	grown = sb.oom ? NULL : io_realloc(l->items, (l->n + 1) * sizeof(char *));
	if (grown == NULL)
	{
		io_sb_wipe_free(&sb);
		return false;
	}
	l->items = grown;
	l->items[l->n++] = io_sb_steal(&sb);
	return true;
}

/*
 * Split url ("scheme://[user@]host[:port]/path?query") into the Host
 * header's value and the path and query as sent (all malloc'd; *query
 * NULL without a query).  The catalog URI was checked to start with
 * http:// or https://.
 */
static bool
split_url(const char *url, char **host, char **path, char **query)
{
	const char *h = strstr(url, "://");
	const char *end;
	const char *at;
	const char *q;

	*host = *path = *query = NULL;
	h = h ? h + 3 : url;
	end = h + strcspn(h, "/?#");
	at = memchr(h, '@', (size_t) (end - h));
	if (at != NULL)
		h = at + 1;
	*host = io_strndup(h, (size_t) (end - h));
	q = strchr(end, '?');
	if (*end == '/')
		*path = io_strndup(end, q ? (size_t) (q - end) : strlen(end));
	else
		*path = io_strdup("/");
	if (q != NULL)
		*query = io_strdup(q + 1);
	return *host != NULL && *path != NULL && (q == NULL || *query != NULL);
}

/*
 * Sign the request whose headers are lines[0..n) with SigV4 at time now
 * and append Host, the signer's headers and Authorization to *lines.
 */
static int
sign_request(IoCatalog *cat, const char *method, const char *url,
			 const char *body, time_t now, IoStringList *lines,
			 IoSigV4Output *sig, TmsError *err)
{
	size_t		nlines = lines->n;
	IoHeader   *hdrs;
	char	  **names;
	size_t		nh = 0,
				i;
	char	   *host = NULL,
			   *path = NULL,
			   *query = NULL;
	char		payload_hash[65];
	char		amz_date[17];
	IoSigV4Input in;
	IoSigV4Output out;
	int			rc = -1;

	memset(&out, 0, sizeof(out));
	hdrs = io_calloc(nlines + 1, sizeof(IoHeader));
	names = io_calloc(nlines + 1, sizeof(char *));
	if (hdrs == NULL || names == NULL || !split_url(url, &host, &path, &query))
	{
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}

	/* every header so far is signed, and Host */
	hdrs[nh].name = "host";
	hdrs[nh++].value = host;
	for (i = 0; i < nlines; i++)
	{
		const char *line = lines->items[i];
		const char *colon = strchr(line, ':');
		const char *v;

		if (colon == NULL)
			continue;
		names[i] = io_strndup(line, (size_t) (colon - line));
		if (names[i] == NULL)
		{
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			goto done;
		}
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		hdrs[nh].name = names[i];
		hdrs[nh++].value = v;
	}
	io_sha256_hex(body ? body : "", body ? strlen(body) : 0, payload_hash);
	io_amz_date(now, amz_date);

	memset(&in, 0, sizeof(in));
	in.method = method;
	in.path = path;
	in.query = query;
	in.headers = hdrs;
	in.nheaders = nh;
	in.payload_hash = payload_hash;
	in.access_key_id = cat->aws_access_key_id;
	in.secret_access_key = cat->aws_secret_access_key;
	in.session_token = cat->aws_session_token;
	in.region = cat->signing_region;
	in.service = cat->signing_name ? cat->signing_name : "execute-api";
	in.amz_date = amz_date;
	in.normalize_path = true;
	in.double_encode_path = true;
	in.sign_session_token = true;
	in.add_content_sha256 = true;
	if (io_sigv4_sign(&in, &out, err) != 0)
		goto done;
	if (!add_line(lines, "Host", host))
	{
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}
	for (i = 0; i < out.nadd_headers; i++)
		if (!add_line(lines, out.add_headers[i].key, out.add_headers[i].value))
		{
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			goto done;
		}
	rc = 0;
	if (sig != NULL)
	{
		*sig = out;
		memset(&out, 0, sizeof(out));
	}

done:
	io_sigv4_free(&out);
	for (i = 0; names != NULL && i < nlines; i++)
		io_free(names[i]);
	io_free(names);
	io_free(hdrs);
	io_free(host);
	io_free(path);
	io_free(query);
	return rc;
}

/* See rest_int.h. */
int
io_rest_headers(IoCatalog *cat, const char *method, const char *url,
				const char *body, const char *const *extra, size_t nextra,
				time_t now, IoStringList *out, IoSigV4Output *sig, TmsError *err)
{
	const char *bearer = cat->oauth.token ? cat->oauth.token : cat->static_token;
	IoStrBuf	auth;
	bool		ok;
	size_t		i;

	memset(out, 0, sizeof(*out));
	if (sig != NULL)
		memset(sig, 0, sizeof(*sig));
	ok = add_line(out, "Accept", "application/json");
	if (ok && body != NULL)
		ok = add_line(out, "Content-Type", "application/json");
	for (i = 0; ok && i < nextra; i++)
	{
		char	   *copy = io_strdup(extra[i]);
		char	  **grown = copy ? io_realloc(out->items, (out->n + 1) * sizeof(char *)) : NULL;

		ok = grown != NULL;
		if (!ok)
		{
			io_wipe_free(copy);
			break;
		}
		out->items = grown;
		out->items[out->n++] = copy;
	}
	if (ok && bearer != NULL)
	{
		/* SigV4 takes Authorization: the bearer token moves, and is signed */
		io_sb_init(&auth);
		io_sb_printf(&auth, "Bearer %s", bearer);
		ok = !auth.oom &&
			add_line(out, cat->signing_region ? "Original-Authorization" : "Authorization",
					 auth.data);
		io_sb_wipe_free(&auth);
	}
	if (!ok)
	{
		io_string_list_wipe(out);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (cat->signing_region != NULL &&
		sign_request(cat, method, url, body, now, out, sig, err) != 0)
	{
		io_string_list_wipe(out);
		return -1;
	}
	return 0;
}
