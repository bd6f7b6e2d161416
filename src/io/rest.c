/*-------------------------------------------------------------------------
 *
 * rest.c
 *		Iceberg REST catalog client (jansson + the HTTP core).
 *
 * Follows the Iceberg REST OpenAPI spec: GET /v1/config handshake
 * (defaults < client properties < overrides, "prefix", "endpoints"),
 * OAuth2 client credentials against "oauth2_server_uri" or the spec's
 * default v1/oauth/tokens, token cache refreshed a minute before expiry
 * and once after a 401, static bearer tokens, namespace and table
 * listings with pageToken / next-page-token pagination, loadTable with
 * If-None-Match and a per-table cache (304: the cached copy), dropTable,
 * and commit where 409 means "retry from fresh metadata" and 500/502/
 * 503/504 or a lost response mean "state unknown".
 *
 * Status mapping to IoErrorCode is in status_error(); the ErrorModel's
 * type and message go to IoError.detail.  Tokens and client secrets are
 * never put into an error.
 *
 * src/io/rest.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "io_int.h"

#define TOKEN_REFRESH_MARGIN_MS	60000
#define TABLE_CACHE_MAX			256
#define MAX_PAGES				100000

typedef struct TableCacheEntry
{
	char	   *ns;
	char	   *name;
	char	   *etag;
	IoLoadedTable table;
	struct TableCacheEntry *next;
} TableCacheEntry;

struct IoCatalog
{
	char	   *uri;			/* without trailing slash */
	char	   *warehouse;
	char	   *prefix_option;
	char	   *client_id;
	char	   *client_secret;
	char	   *static_token;
	char	   *oauth_uri;
	char	   *scope;
	char	   *ca_file;
	char	   *ca_path;
	int			page_size;
	IoHttpOptions http;

	char	   *token;			/* current bearer token */
	int64_t		token_expires_ms;	/* monotonic; 0 = no known expiry */
	uint64_t	token_fetches;	/* tokens fetched so far */

	IoKeyValue *props;
	size_t		nprops;
	IoStringList endpoints;
	char	   *prefix;			/* effective, "" when none */
	uint64_t	requests;

	TableCacheEntry *cache;
	int			ncache;
};

static void
wipe_free(char *s)
{
	if (s != NULL)
	{
		memset(s, 0, strlen(s));
		free(s);
	}
}

static void
kv_free(IoKeyValue *kv, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		free(kv[i].key);
		wipe_free(kv[i].value);
	}
	free(kv);
}

void
io_loaded_table_free(IoLoadedTable *t)
{
	if (t == NULL)
		return;
	free(t->metadata_location);
	free(t->metadata_json);
	free(t->etag);
	kv_free(t->config, t->nconfig);
	memset(t, 0, sizeof(*t));
}

void
io_table_list_free(IoTableList *list)
{
	size_t		i;

	if (list == NULL)
		return;
	for (i = 0; i < list->n; i++)
	{
		free(list->items[i].ns);
		free(list->items[i].name);
	}
	free(list->items);
	list->items = NULL;
	list->n = 0;
}

/* Deep copy of a loaded table. */
static int
loaded_copy(const IoLoadedTable *src, IoLoadedTable *dst)
{
	size_t		i;

	memset(dst, 0, sizeof(*dst));
	dst->not_modified = src->not_modified;
	if ((src->metadata_location && !(dst->metadata_location = io_strdup(src->metadata_location))) ||
		(src->metadata_json && !(dst->metadata_json = io_strdup(src->metadata_json))) ||
		(src->etag && !(dst->etag = io_strdup(src->etag))))
		goto oom;
	if (src->nconfig > 0)
	{
		dst->config = calloc(src->nconfig, sizeof(IoKeyValue));
		if (dst->config == NULL)
			goto oom;
		for (i = 0; i < src->nconfig; i++)
		{
			dst->config[i].key = io_strdup(src->config[i].key);
			dst->config[i].value = io_strdup(src->config[i].value);
			dst->nconfig++;
			if (!dst->config[i].key || !dst->config[i].value)
				goto oom;
		}
	}
	return 0;
oom:
	io_loaded_table_free(dst);
	return -1;
}

static void
cache_entry_free(TableCacheEntry *e)
{
	free(e->ns);
	free(e->name);
	free(e->etag);
	io_loaded_table_free(&e->table);
	free(e);
}

void
io_catalog_forget(IoCatalog *cat, const char *ns, const char *table)
{
	TableCacheEntry **pp = &cat->cache;

	while (*pp != NULL)
	{
		TableCacheEntry *e = *pp;

		if (ns == NULL || (strcmp(e->ns, ns) == 0 &&
						   (table == NULL || strcmp(e->name, table) == 0)))
		{
			*pp = e->next;
			cache_entry_free(e);
			cat->ncache--;
		}
		else
			pp = &e->next;
	}
}

void
io_catalog_free(IoCatalog *cat)
{
	if (cat == NULL)
		return;
	io_catalog_forget(cat, NULL, NULL);
	free(cat->uri);
	free(cat->warehouse);
	free(cat->prefix_option);
	free(cat->client_id);
	wipe_free(cat->client_secret);
	wipe_free(cat->static_token);
	free(cat->oauth_uri);
	free(cat->scope);
	free(cat->ca_file);
	free(cat->ca_path);
	wipe_free(cat->token);
	kv_free(cat->props, cat->nprops);
	io_string_list_free(&cat->endpoints);
	free(cat->prefix);
	free(cat);
}

void
io_catalog_set_http(IoCatalog *cat, const IoHttpOptions *http)
{
	cat->http = *http;
	cat->http.ca_file = cat->ca_file;
	cat->http.ca_path = cat->ca_path;
}

const IoKeyValue *
io_catalog_properties(const IoCatalog *cat, size_t *n)
{
	*n = cat->nprops;
	return cat->props;
}

const char *
io_catalog_property(const IoCatalog *cat, const char *key)
{
	size_t		i;

	for (i = 0; i < cat->nprops; i++)
		if (strcmp(cat->props[i].key, key) == 0)
			return cat->props[i].value;
	return NULL;
}

const IoStringList *
io_catalog_endpoints(const IoCatalog *cat)
{
	return &cat->endpoints;
}

const char *
io_catalog_prefix(const IoCatalog *cat)
{
	return cat->prefix ? cat->prefix : "";
}

uint64_t
io_catalog_request_count(const IoCatalog *cat)
{
	return cat->requests;
}

/* ----------------------------------------------------------------
 * Errors
 * ----------------------------------------------------------------
 */

typedef enum CallKind
{
	CALL_GENERIC,
	CALL_NAMESPACE,				/* 404 defaults to no such namespace */
	CALL_TABLE,					/* 404 defaults to no such table */
	CALL_COMMIT
} CallKind;

/*
 * Fill *err from a non-success response.  The ErrorModel
 * {"error": {"message", "type", "code"}} (or an OAuth error) becomes the
 * detail "type: message".
 */
static int
status_error(const IoHttpResponse *resp, CallKind kind, const char *what,
			 size_t max_json, IoError *err)
{
	long		st = resp->status;
	IoErrorCode code;
	json_t	   *doc = NULL;
	const char *etype = NULL;
	const char *emsg = NULL;

	if (resp->body_len > 0)
	{
		IoError		perr;

		doc = io_json_parse(resp->body, resp->body_len, max_json, "error", &perr);
	}
	if (json_is_object(doc))
	{
		json_t	   *e = json_object_get(doc, "error");

		if (json_is_object(e))
		{
			etype = json_string_value(json_object_get(e, "type"));
			emsg = json_string_value(json_object_get(e, "message"));
		}
		else if (json_is_string(e))
		{
			/* OAuth error response */
			etype = json_string_value(e);
			emsg = json_string_value(json_object_get(doc, "error_description"));
		}
	}

	switch (st)
	{
		case 400:
		case 422:
			code = IO_ERR_BAD_REQUEST;
			break;
		case 401:
		case 419:
			code = IO_ERR_UNAUTHORIZED;
			break;
		case 403:
			code = IO_ERR_FORBIDDEN;
			break;
		case 404:
			if (etype && strstr(etype, "NoSuchNamespace"))
				code = IO_ERR_NO_SUCH_NAMESPACE;
			else if (etype && (strstr(etype, "NoSuchTable") || strstr(etype, "NoSuchIcebergTable")))
				code = IO_ERR_NO_SUCH_TABLE;
			else if (kind == CALL_NAMESPACE)
				code = IO_ERR_NO_SUCH_NAMESPACE;
			else if (kind == CALL_TABLE || kind == CALL_COMMIT)
				code = IO_ERR_NO_SUCH_TABLE;
			else
				code = IO_ERR_NOT_FOUND;
			break;
		case 406:
		case 501:
			code = IO_ERR_UNSUPPORTED;
			break;
		case 409:
			code = kind == CALL_COMMIT ? IO_ERR_CONFLICT : IO_ERR_ALREADY_EXISTS;
			break;
		case 429:
			code = IO_ERR_UNAVAILABLE;
			break;
		case 500:
		case 502:
		case 503:
		case 504:
			if (kind == CALL_COMMIT)
				code = IO_ERR_COMMIT_STATE_UNKNOWN;
			else
				code = st == 503 ? IO_ERR_UNAVAILABLE : IO_ERR_SERVER;
			break;
		default:
			if (kind == CALL_COMMIT && st >= 500)
				code = IO_ERR_COMMIT_STATE_UNKNOWN;
			else if (st >= 500)
				code = IO_ERR_SERVER;
			else
				code = IO_ERR_PROTOCOL;
			break;
	}
	if (st == 406)
	{
		/*
		 * The REST spec's UnsupportedOperationResponse: "Not Acceptable /
		 * Unsupported Operation.  The server does not support this
		 * operation."  The catalog answered and said no: not a fault of
		 * the connection nor of this client's request format.
		 */
		io_set_error(err, code, st,
					 "catalog refused %s: it does not support this operation (HTTP status 406)",
					 what);
	}
	else if (code == IO_ERR_COMMIT_STATE_UNKNOWN)
		io_set_error(err, code, st, "commit state unknown: %s returned HTTP status %ld",
					 what, st);
	else if (code == IO_ERR_CONFLICT)
		io_set_error(err, code, st, "commit conflict: %s returned HTTP status 409", what);
	else
		io_set_error(err, code, st, "%s failed with HTTP status %ld", what, st);
	if (etype != NULL || emsg != NULL)
	{
		char		d[sizeof(err->detail)];

		snprintf(d, sizeof(d), "%s%s%s", etype ? etype : "",
				 (etype && emsg) ? ": " : "", emsg ? emsg : "");
		io_set_detail(err, d, strlen(d));
	}
	else if (resp->body_len > 0 && doc == NULL)
		io_set_detail(err, resp->body, resp->body_len > 200 ? 200 : resp->body_len);
	json_decref(doc);
	return -1;
}

/* ----------------------------------------------------------------
 * Requests
 * ----------------------------------------------------------------
 */

/* Percent-encode a form value (application/x-www-form-urlencoded). */
static void
form_add(IoStrBuf *sb, const char *key, const char *value)
{
	char	   *v = io_uri_encode(value, strlen(value), false);

	if (v == NULL)
	{
		sb->oom = true;
		return;
	}
	if (sb->len > 0)
		io_sb_putc(sb, '&');
	io_sb_printf(sb, "%s=%s", key, v);
	wipe_free(v);
}

/* Fetch a token with the client-credentials grant. */
static int
fetch_token(IoCatalog *cat, IoError *err)
{
	IoStrBuf	body;
	IoStrBuf	url;
	IoHttpRequest req;
	IoHttpResponse resp;
	const char *headers[2] = {"Content-Type: application/x-www-form-urlencoded",
	"Accept: application/json"};
	json_t	   *doc;
	const char *tok;
	json_t	   *exp;
	int			rc;

	io_sb_init(&body);
	io_sb_init(&url);
	form_add(&body, "grant_type", "client_credentials");
	form_add(&body, "client_id", cat->client_id);
	form_add(&body, "client_secret", cat->client_secret);
	form_add(&body, "scope", cat->scope ? cat->scope : "catalog");
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
		status_error(&resp, CALL_GENERIC, "OAuth2 token request", cat->http.max_json_bytes, err);
		if (resp.status == 400 || resp.status == 401 || resp.status == 403)
			err->code = IO_ERR_UNAUTHORIZED;
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_json_parse(resp.body, resp.body_len, cat->http.max_json_bytes,
						"OAuth2 token", err);
	io_http_response_free(&resp);
	if (doc == NULL && err->code != IO_ERR_PROTOCOL)
		return -1;
	tok = json_string_value(json_object_get(doc, "access_token"));
	if (tok == NULL || tok[0] == '\0')
	{
		json_decref(doc);
		return io_set_error(err, IO_ERR_PROTOCOL, 200,
							"OAuth2 token response has no \"access_token\"");
	}
	wipe_free(cat->token);
	cat->token = io_strdup(tok);
	cat->token_fetches++;
	exp = json_object_get(doc, "expires_in");
	cat->token_expires_ms = json_is_integer(exp) && json_integer_value(exp) > 0 ?
		io_now_ms() + (int64_t) json_integer_value(exp) * 1000 : 0;
	json_decref(doc);
	if (cat->token == NULL)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	return 0;
}

/* Make sure a usable token is cached when client credentials are set. */
static int
ensure_token(IoCatalog *cat, IoError *err)
{
	if (cat->client_id == NULL)
		return 0;
	if (cat->token != NULL &&
		(cat->token_expires_ms == 0 ||
		 io_now_ms() < cat->token_expires_ms - TOKEN_REFRESH_MARGIN_MS))
		return 0;
	return fetch_token(cat, err);
}

/*
 * Send a catalog request: path is below the base URI ("v1/..."), already
 * encoded.  Adds the bearer token and retries once with a fresh token
 * after a 401 when client credentials are configured.
 */
static int
cat_request(IoCatalog *cat, const char *method, const char *path,
			const char *body, const char *const *extra, size_t nextra,
			bool idempotent, IoHttpResponse *resp, IoError *err)
{
	IoStrBuf	url;
	int			attempt;
	int			rc = -1;

	memset(resp, 0, sizeof(*resp));
	io_sb_init(&url);
	io_sb_printf(&url, "%s/%s", cat->uri, path);
	if (url.oom)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	for (attempt = 0; attempt < 2; attempt++)
	{
		const char *headers[8];
		size_t		nh = 0;
		size_t		i;
		IoStrBuf	auth;
		IoHttpRequest req;

		if (ensure_token(cat, err) != 0)
			break;
		io_sb_init(&auth);
		headers[nh++] = "Accept: application/json";
		if (cat->token != NULL || cat->static_token != NULL)
		{
			io_sb_printf(&auth, "Authorization: Bearer %s",
						 cat->token ? cat->token : cat->static_token);
			if (auth.oom)
			{
				rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
				break;
			}
			headers[nh++] = auth.data;
		}
		if (body != NULL)
			headers[nh++] = "Content-Type: application/json";
		for (i = 0; i < nextra && nh < 8; i++)
			headers[nh++] = extra[i];
		memset(&req, 0, sizeof(req));
		req.method = method;
		req.url = url.data;
		req.headers = headers;
		req.nheaders = nh;
		req.body = body;
		req.body_len = body ? strlen(body) : 0;
		req.idempotent = idempotent;
		req.what = "catalog";
		io_http_response_free(resp);
		rc = io_http_perform(&cat->http, &req, resp, err);
		cat->requests++;
		if (auth.data)
			memset(auth.data, 0, auth.len);
		io_sb_free(&auth);
		if (rc != 0)
			break;
		if (resp->status == 401 && attempt == 0 && cat->client_id != NULL)
		{
			/* token revoked or expired early: get a new one, once */
			wipe_free(cat->token);
			cat->token = NULL;
			continue;
		}
		break;
	}
	io_sb_free(&url);
	return rc;
}

/*
 * Parse a JSON body under the max_json budget; PROTOCOL error when
 * malformed or not an object, TOO_LARGE when over the budget.
 */
static json_t *
parse_body(const IoHttpResponse *resp, const char *what, size_t max_json,
		   IoError *err)
{
	json_t	   *doc = io_json_parse(resp->body, resp->body_len, max_json, what, err);

	if (doc == NULL)
	{
		err->http_status = resp->status;
		return NULL;
	}
	if (!json_is_object(doc))
	{
		json_decref(doc);
		io_set_error(err, IO_ERR_PROTOCOL, resp->status,
					 "malformed %s response: not a JSON object", what);
		return NULL;
	}
	return doc;
}

/* "v1/" or "v1/<prefix>/" */
static void
v1_path(IoCatalog *cat, IoStrBuf *sb)
{
	if (cat->prefix != NULL && cat->prefix[0] != '\0')
		io_sb_printf(sb, "v1/%s/", cat->prefix);
	else
		io_sb_puts(sb, "v1/");
}

static void
append_encoded(IoStrBuf *sb, const char *s)
{
	char	   *e = io_uri_encode(s, strlen(s), false);

	if (e == NULL)
	{
		sb->oom = true;
		return;
	}
	io_sb_puts(sb, e);
	free(e);
}

/*
 * A name for a message: at most 100 bytes, control characters (the
 * namespace separator among them) shown as '.'.
 */
static void
name_for_message(const char *s, size_t len, char *buf, size_t size)
{
	size_t		i,
				n = len < size - 1 ? len : size - 1;

	if (n > 100)
		n = 100;
	for (i = 0; i < n; i++)
		buf[i] = (unsigned char) s[i] < 0x20 || s[i] == 0x7f ? '.' : s[i];
	buf[n] = '\0';
}

/* Check one name (table, or a namespace level) of len bytes. */
static int
check_name(const char *what, const char *whole, const char *s, size_t len,
		   IoError *err)
{
	char		shown[128];

	name_for_message(whole, strlen(whole), shown, sizeof(shown));
	if (len == 0)
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
							"invalid %s \"%s\": a name must not be empty", what, shown);
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
							"invalid %s \"%s\": \".\" and \"..\" are not allowed as names",
							what, shown);
	if (len > IO_MAX_NAME_BYTES)
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
							"invalid %s \"%s...\": a name must not exceed %d bytes",
							what, shown, IO_MAX_NAME_BYTES);
	return 0;
}

/*
 * Check a namespace (levels joined by IO_NS_SEP) and, when table is not
 * NULL, a table name.  Returns 0, or -1 with *err (INVALID_ARGUMENT).
 */
static int
check_ident(const char *ns, const char *table, IoError *err)
{
	const char *p;

	if (ns == NULL)
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
							"namespace must not be empty");
	p = ns;
	for (;;)
	{
		const char *sep = strchr(p, IO_NS_SEP);
		size_t		n = sep ? (size_t) (sep - p) : strlen(p);

		if (check_name("namespace", ns, p, n, err) != 0)
			return -1;
		if (sep == NULL)
			break;
		p = sep + 1;
	}
	if (table != NULL)
		return check_name("table name", table, table, strlen(table), err);
	return 0;
}

/*
 * The prefix as it goes into request paths: slashes around it removed;
 * characters that could end the path or start a query ('?', '#', spaces,
 * controls, non-ASCII) percent-encoded, while an already encoded prefix
 * ('%XX') is kept as the server (or the administrator) wrote it, as other
 * Iceberg clients send it; "." and ".." segments refused.  Returns a
 * malloc'd string, or NULL with *err.
 */
static char *
prefix_clean(const char *raw, IoErrorCode bad_code, IoError *err)
{
	IoStrBuf	sb;
	size_t		n = strlen(raw);
	size_t		start = 0,
				i;

	while (n > 0 && raw[n - 1] == '/')
		n--;
	while (start < n && raw[start] == '/')
		start++;
	io_sb_init(&sb);
	io_sb_puts(&sb, "");
	for (i = start; i < n; i++)
	{
		unsigned char c = (unsigned char) raw[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			strchr("-._~!$&'()*+,;=:@/%", c) != NULL)
			io_sb_putc(&sb, (char) c);
		else
			io_sb_printf(&sb, "%%%02X", c);
	}
	if (sb.oom)
	{
		io_sb_free(&sb);
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	/* refuse dot segments, also encoded: they would move the request */
	for (i = 0, start = 0; i <= sb.len; i++)
	{
		if (i == sb.len || sb.data[i] == '/')
		{
			char		seg[8];
			size_t		k = start,
						m = 0;

			/* the segment with %2e / %2E read as '.', when short */
			while (k < i && m < sizeof(seg) - 1)
			{
				if (k + 2 < i && sb.data[k] == '%' && sb.data[k + 1] == '2' &&
					(sb.data[k + 2] == 'e' || sb.data[k + 2] == 'E'))
				{
					seg[m++] = '.';
					k += 3;
				}
				else
					seg[m++] = sb.data[k++];
			}
			seg[m] = '\0';
			if (k == i && (strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0))
			{
				io_sb_free(&sb);
				io_set_error(err, bad_code, 0,
							 "invalid catalog prefix \"%.200s\": \".\" and \"..\" segments are not allowed",
							 raw);
				return NULL;
			}
			start = i + 1;
		}
	}
	return io_sb_steal(&sb);
}

/* ----------------------------------------------------------------
 * Handshake
 * ----------------------------------------------------------------
 */

/*
 * Add key=value to a key/value array, or replace the value of key (the old
 * value is wiped: it may be a secret).  Returns 0, or -1 out of memory
 * with the array unchanged.
 */
static int
kv_put(IoKeyValue **arr, size_t *n, const char *key, const char *value)
{
	char	   *nv = io_strdup(value);
	char	   *nk;
	IoKeyValue *grown;

	if (nv == NULL)
		return -1;
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*arr)[i].key, key) == 0)
		{
			wipe_free((*arr)[i].value);
			(*arr)[i].value = nv;
			return 0;
		}
	nk = io_strdup(key);
	grown = nk ? realloc(*arr, (*n + 1) * sizeof(IoKeyValue)) : NULL;
	if (grown == NULL)
	{
		free(nk);
		wipe_free(nv);
		return -1;
	}
	*arr = grown;
	(*arr)[*n].key = nk;
	(*arr)[*n].value = nv;
	(*n)++;
	return 0;
}

/* Set one merged property (replacing an earlier value). */
static int
props_set(IoCatalog *cat, const char *key, const char *value)
{
	return kv_put(&cat->props, &cat->nprops, key, value);
}

/* Merge one JSON object of string properties into cat->props. */
static int
merge_props(IoCatalog *cat, json_t *obj)
{
	const char *k;
	json_t	   *v;

	if (!json_is_object(obj))
		return 0;
	json_object_foreach(obj, k, v)
	{
		if (json_is_string(v) && props_set(cat, k, json_string_value(v)) != 0)
			return -1;
	}
	return 0;
}

static int
handshake(IoCatalog *cat, IoError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	json_t	   *doc;
	json_t	   *eps;
	const char *prefix;
	int			rc;

	io_sb_init(&path);
	io_sb_puts(&path, "v1/config");
	if (cat->warehouse != NULL)
	{
		io_sb_puts(&path, "?warehouse=");
		append_encoded(&path, cat->warehouse);
	}
	if (path.oom)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	rc = cat_request(cat, "GET", path.data, NULL, NULL, 0, true, &resp, err);
	io_sb_free(&path);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		status_error(&resp, CALL_GENERIC, "catalog configuration request",
					 cat->http.max_json_bytes, err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = parse_body(&resp, "catalog configuration", cat->http.max_json_bytes, err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return -1;
	/*
	 * defaults < client properties < overrides.  (No json_object() here:
	 * inside the server that name resolves to PostgreSQL's own function.)
	 */
	if (merge_props(cat, json_object_get(doc, "defaults")) != 0 ||
		(cat->warehouse != NULL && props_set(cat, "warehouse", cat->warehouse) != 0) ||
		merge_props(cat, json_object_get(doc, "overrides")) != 0)
	{
		json_decref(doc);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	eps = json_object_get(doc, "endpoints");
	if (json_is_array(eps))
	{
		size_t		i;
		json_t	   *e;

		cat->endpoints.items = calloc(json_array_size(eps) + 1, sizeof(char *));
		if (cat->endpoints.items == NULL)
		{
			json_decref(doc);
			return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		}
		json_array_foreach(eps, i, e)
		{
			if (json_is_string(e))
			{
				cat->endpoints.items[cat->endpoints.n] = io_strdup(json_string_value(e));
				if (cat->endpoints.items[cat->endpoints.n] != NULL)
					cat->endpoints.n++;
			}
		}
	}
	json_decref(doc);
	prefix = cat->prefix_option ? cat->prefix_option : io_catalog_property(cat, "prefix");
	cat->prefix = prefix_clean(prefix ? prefix : "",
							   cat->prefix_option ? IO_ERR_INVALID_ARGUMENT : IO_ERR_PROTOCOL,
							   err);
	return cat->prefix != NULL ? 0 : -1;
}

/*
 * True when the server offers "METHOD /v1/{prefix}/<rest>" (spec default
 * set when it sent no list).
 */
static bool
endpoint_offered(IoCatalog *cat, const char *endpoint)
{
	size_t		i;

	if (cat->endpoints.n == 0)
		return true;
	for (i = 0; i < cat->endpoints.n; i++)
		if (strcmp(cat->endpoints.items[i], endpoint) == 0)
			return true;
	return false;
}

IoCatalog *
io_catalog_open(const IoCatalogConfig *cfg, IoError *err)
{
	IoCatalog  *cat;
	size_t		n;

	if (cfg->uri == NULL ||
		(strncmp(cfg->uri, "http://", 7) != 0 && strncmp(cfg->uri, "https://", 8) != 0))
	{
		io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
					 "catalog URI must start with http:// or https://");
		return NULL;
	}
	cat = calloc(1, sizeof(IoCatalog));
	if (cat == NULL)
	{
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	n = strlen(cfg->uri);
	while (n > 0 && cfg->uri[n - 1] == '/')
		n--;
	cat->uri = io_strndup(cfg->uri, n);
	cat->warehouse = io_strdup(cfg->warehouse);
	cat->prefix_option = io_strdup(cfg->prefix);
	cat->static_token = io_strdup(cfg->token);
	cat->oauth_uri = io_strdup(cfg->oauth2_server_uri);
	cat->scope = io_strdup(cfg->scope);
	cat->ca_file = io_strdup(cfg->http.ca_file);
	cat->ca_path = io_strdup(cfg->http.ca_path);
	cat->page_size = cfg->page_size;
	if (cfg->credential != NULL)
	{
		const char *colon = strchr(cfg->credential, ':');

		if (colon == NULL)
		{
			io_catalog_free(cat);
			io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0,
						 "credential must have the form client_id:client_secret");
			return NULL;
		}
		cat->client_id = io_strndup(cfg->credential, (size_t) (colon - cfg->credential));
		cat->client_secret = io_strdup(colon + 1);
		if (cat->client_id == NULL || cat->client_secret == NULL)
			goto oom;
	}
	if (cat->uri == NULL ||
		(cfg->warehouse && !cat->warehouse) || (cfg->prefix && !cat->prefix_option) ||
		(cfg->token && !cat->static_token) ||
		(cfg->oauth2_server_uri && !cat->oauth_uri) || (cfg->scope && !cat->scope) ||
		(cfg->http.ca_file && !cat->ca_file) || (cfg->http.ca_path && !cat->ca_path))
		goto oom;
	io_catalog_set_http(cat, &cfg->http);
	if (handshake(cat, err) != 0)
	{
		io_catalog_free(cat);
		return NULL;
	}
	return cat;

oom:
	io_catalog_free(cat);
	io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	return NULL;
}

/* ----------------------------------------------------------------
 * Listings
 * ----------------------------------------------------------------
 */

/* Join a JSON array of strings with IO_NS_SEP; NULL when malformed. */
static char *
join_levels(json_t *arr, bool *malformed)
{
	IoStrBuf	sb;
	size_t		i;
	json_t	   *e;

	*malformed = false;
	if (!json_is_array(arr))
	{
		*malformed = true;
		return NULL;
	}
	io_sb_init(&sb);
	json_array_foreach(arr, i, e)
	{
		if (!json_is_string(e))
		{
			*malformed = true;
			io_sb_free(&sb);
			return NULL;
		}
		if (i > 0)
			io_sb_putc(&sb, IO_NS_SEP);
		io_sb_puts(&sb, json_string_value(e));
	}
	return io_sb_steal(&sb);
}

/*
 * Fetch one page of a listing: GET path (the caller built it, and it is
 * freed here), check the status, parse, and find the array under key.
 * Returns the document, which the caller json_decrefs and *array borrows
 * from; *next is a malloc'd copy of the next-page-token, or NULL on the
 * last page.  Returns NULL with err set on any failure.
 */
static json_t *
list_page(IoCatalog *cat, IoStrBuf *path, const char *what, const char *key,
		  json_t **array, char **next, IoError *err)
{
	IoHttpResponse resp;
	json_t	   *doc;
	json_t	   *token;

	*next = NULL;
	if (path->oom)
	{
		io_sb_free(path);
		io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		return NULL;
	}
	if (cat_request(cat, "GET", path->data, NULL, NULL, 0, true, &resp, err) != 0)
	{
		io_sb_free(path);
		io_http_response_free(&resp);
		return NULL;
	}
	io_sb_free(path);
	if (resp.status != 200)
	{
		status_error(&resp, CALL_NAMESPACE, what, cat->http.max_json_bytes, err);
		io_http_response_free(&resp);
		return NULL;
	}
	doc = parse_body(&resp, what, cat->http.max_json_bytes, err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return NULL;
	*array = json_object_get(doc, key);
	if (!json_is_array(*array))
	{
		json_decref(doc);
		io_set_error(err, IO_ERR_PROTOCOL, 200,
					 "malformed %s response: \"%s\" is not an array", what, key);
		return NULL;
	}
	token = json_object_get(doc, "next-page-token");
	if (json_is_string(token) && json_string_value(token)[0] != '\0')
	{
		*next = io_strdup(json_string_value(token));
		if (*next == NULL)
		{
			json_decref(doc);
			io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			return NULL;
		}
	}
	return doc;
}

int
io_catalog_list_namespaces(IoCatalog *cat, const char *parent,
						   IoStringList *out, IoError *err)
{
	char	   *page = NULL;
	int			pages = 0;
	size_t		cap = 0;

	out->items = NULL;
	out->n = 0;
	if (parent != NULL && parent[0] != '\0' && check_ident(parent, NULL, err) != 0)
		return -1;
	if (!endpoint_offered(cat, "GET /v1/{prefix}/namespaces"))
		return io_set_error(err, IO_ERR_UNSUPPORTED, 0,
							"catalog does not offer listing namespaces");
	do
	{
		IoStrBuf	path;
		json_t	   *doc;
		json_t	   *nss;
		char	   *next;
		size_t		i;
		json_t	   *e;

		io_sb_init(&path);
		v1_path(cat, &path);
		io_sb_puts(&path, "namespaces?pageToken=");
		if (page)
			append_encoded(&path, page);
		if (cat->page_size > 0)
			io_sb_printf(&path, "&pageSize=%d", cat->page_size);
		if (parent != NULL && parent[0] != '\0')
		{
			io_sb_puts(&path, "&parent=");
			append_encoded(&path, parent);
		}
		free(page);
		page = NULL;
		doc = list_page(cat, &path, "list namespaces", "namespaces", &nss, &next, err);
		if (doc == NULL)
			goto fail;
		page = next;			/* freed at "fail" if this page goes wrong */
		json_array_foreach(nss, i, e)
		{
			bool		bad;
			char	   *ns = join_levels(e, &bad);

			if (ns == NULL)
			{
				json_decref(doc);
				if (bad)
				{
					io_set_error(err, IO_ERR_PROTOCOL, 200,
								 "malformed list namespaces response: a namespace is not an array of strings");
					goto fail;
				}
				goto oom;
			}
			if (out->n == cap)
			{
				char	  **ni;

				cap = cap ? cap * 2 : 16;
				ni = realloc(out->items, cap * sizeof(char *));
				if (ni == NULL)
				{
					free(ns);
					json_decref(doc);
					goto oom;
				}
				out->items = ni;
			}
			out->items[out->n++] = ns;
		}
		json_decref(doc);
		if (++pages > MAX_PAGES)
		{
			io_set_error(err, IO_ERR_PROTOCOL, 200, "catalog keeps returning page tokens");
			goto fail;
		}
	} while (page != NULL);
	return 0;

oom:
	io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
fail:
	free(page);
	io_string_list_free(out);
	return -1;
}

/* Append "namespaces/<ns>" with the levels encoded (%1F between). */
static void
append_ns(IoStrBuf *sb, const char *ns)
{
	io_sb_puts(sb, "namespaces/");
	append_encoded(sb, ns);
}

int
io_catalog_list_tables(IoCatalog *cat, const char *ns, IoTableList *out,
					   IoError *err)
{
	char	   *page = NULL;
	int			pages = 0;
	size_t		cap = 0;

	out->items = NULL;
	out->n = 0;
	if (check_ident(ns, NULL, err) != 0)
		return -1;
	if (!endpoint_offered(cat, "GET /v1/{prefix}/namespaces/{namespace}/tables"))
		return io_set_error(err, IO_ERR_UNSUPPORTED, 0,
							"catalog does not offer listing tables");
	do
	{
		IoStrBuf	path;
		json_t	   *doc;
		json_t	   *ids;
		char	   *next;
		size_t		i;
		json_t	   *e;

		io_sb_init(&path);
		v1_path(cat, &path);
		append_ns(&path, ns);
		io_sb_puts(&path, "/tables?pageToken=");
		if (page)
			append_encoded(&path, page);
		if (cat->page_size > 0)
			io_sb_printf(&path, "&pageSize=%d", cat->page_size);
		free(page);
		page = NULL;
		doc = list_page(cat, &path, "list tables", "identifiers", &ids, &next, err);
		if (doc == NULL)
			goto fail;
		page = next;			/* freed at "fail" if this page goes wrong */
		json_array_foreach(ids, i, e)
		{
			bool		bad;
			char	   *tns = join_levels(json_object_get(e, "namespace"), &bad);
			const char *name = json_string_value(json_object_get(e, "name"));

			if (tns == NULL || name == NULL)
			{
				free(tns);
				json_decref(doc);
				if (bad || name == NULL)
				{
					io_set_error(err, IO_ERR_PROTOCOL, 200,
								 "malformed list tables response: invalid table identifier");
					goto fail;
				}
				goto oom;
			}
			if (out->n == cap)
			{
				IoTableIdent *ni;

				cap = cap ? cap * 2 : 16;
				ni = realloc(out->items, cap * sizeof(IoTableIdent));
				if (ni == NULL)
				{
					free(tns);
					json_decref(doc);
					goto oom;
				}
				out->items = ni;
			}
			out->items[out->n].ns = tns;
			out->items[out->n].name = io_strdup(name);
			out->n++;
			if (out->items[out->n - 1].name == NULL)
			{
				json_decref(doc);
				goto oom;
			}
		}
		json_decref(doc);
		if (++pages > MAX_PAGES)
		{
			io_set_error(err, IO_ERR_PROTOCOL, 200, "catalog keeps returning page tokens");
			goto fail;
		}
	} while (page != NULL);
	return 0;

oom:
	io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
fail:
	free(page);
	io_table_list_free(out);
	return -1;
}

/* ----------------------------------------------------------------
 * Tables
 * ----------------------------------------------------------------
 */

static void
table_path(IoCatalog *cat, IoStrBuf *sb, const char *ns, const char *table)
{
	v1_path(cat, sb);
	append_ns(sb, ns);
	io_sb_puts(sb, "/tables/");
	append_encoded(sb, table);
}

/* Add or replace key=value in a loaded table's config. */
static int
config_put(IoLoadedTable *t, const char *key, const char *value)
{
	return kv_put(&t->config, &t->nconfig, key, value);
}

/* Where json_dump_callback writes: a plain-malloc buffer with a cap. */
typedef struct DumpBuf
{
	IoStrBuf	sb;
	size_t		cap;
	bool		over;
} DumpBuf;

static int
dump_cb(const char *buffer, size_t size, void *data)
{
	DumpBuf    *d = data;

	if (d->sb.len + size > d->cap)
	{
		d->over = true;
		return -1;
	}
	io_sb_append(&d->sb, buffer, size);
	return d->sb.oom ? -1 : 0;
}

/*
 * Fill a LoadTableResult into *t: metadata-location, metadata
 * (re-serialised), config, then the storage-credentials entry whose
 * prefix is the longest prefix of the table location.
 */
static int
parse_load_result(json_t *doc, IoLoadedTable *t, const char *what,
				  size_t max_json, IoError *err)
{
	json_t	   *md = json_object_get(doc, "metadata");
	json_t	   *loc = json_object_get(doc, "metadata-location");
	json_t	   *cfg = json_object_get(doc, "config");
	json_t	   *creds = json_object_get(doc, "storage-credentials");
	const char *k;
	json_t	   *v;
	const char *table_location;

	if (!json_is_object(md))
		return io_set_error(err, IO_ERR_PROTOCOL, 200,
							"malformed %s response: \"metadata\" is not an object", what);
	if (loc != NULL && !json_is_null(loc) && !json_is_string(loc))
		return io_set_error(err, IO_ERR_PROTOCOL, 200,
							"malformed %s response: \"metadata-location\" is not a string", what);
	if (json_is_string(loc))
	{
		t->metadata_location = io_strdup(json_string_value(loc));
		if (t->metadata_location == NULL)
			goto oom;
	}
	{
		DumpBuf		d;

		io_sb_init(&d.sb);
		d.cap = max_json > 0 ? max_json : IO_DEFAULT_MAX_JSON_BYTES;
		d.over = false;
		if (json_dump_callback(md, dump_cb, &d, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
			d.sb.oom)
		{
			io_sb_free(&d.sb);
			if (d.over)
				return io_set_error(err, IO_ERR_TOO_LARGE, 0,
									"the %s metadata is larger than max_json_bytes (%zu bytes)",
									what, d.cap);
			goto oom;
		}
		t->metadata_json = io_sb_steal(&d.sb);
	}
	if (t->metadata_json == NULL)
		goto oom;
	if (json_is_object(cfg))
	{
		json_object_foreach(cfg, k, v)
		{
			if (json_is_string(v) && config_put(t, k, json_string_value(v)) != 0)
				goto oom;
		}
	}
	table_location = json_string_value(json_object_get(md, "location"));
	if (json_is_array(creds) && table_location != NULL)
	{
		size_t		i,
					best_len = 0;
		json_t	   *c,
				   *best = NULL;

		json_array_foreach(creds, i, c)
		{
			const char *prefix = json_string_value(json_object_get(c, "prefix"));

			if (prefix != NULL && io_str_has_prefix(table_location, prefix) &&
				(best == NULL || strlen(prefix) > best_len))
			{
				best = c;
				best_len = strlen(prefix);
			}
		}
		if (best != NULL && json_is_object(json_object_get(best, "config")))
		{
			json_object_foreach(json_object_get(best, "config"), k, v)
			{
				if (json_is_string(v) && config_put(t, k, json_string_value(v)) != 0)
					goto oom;
			}
		}
	}
	return 0;
oom:
	return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
}

static TableCacheEntry *
cache_find(IoCatalog *cat, const char *ns, const char *table)
{
	TableCacheEntry *e;

	for (e = cat->cache; e != NULL; e = e->next)
		if (strcmp(e->ns, ns) == 0 && strcmp(e->name, table) == 0)
			return e;
	return NULL;
}

/* Remember a loaded table with its ETag (drops the oldest beyond the cap). */
static void
cache_store(IoCatalog *cat, const char *ns, const char *table,
			const IoLoadedTable *t)
{
	TableCacheEntry *e;

	io_catalog_forget(cat, ns, table);
	if (t->etag == NULL)
		return;
	e = calloc(1, sizeof(TableCacheEntry));
	if (e == NULL)
		return;
	e->ns = io_strdup(ns);
	e->name = io_strdup(table);
	e->etag = io_strdup(t->etag);
	if (e->ns == NULL || e->name == NULL || e->etag == NULL ||
		loaded_copy(t, &e->table) != 0)
	{
		cache_entry_free(e);
		return;
	}
	e->next = cat->cache;
	cat->cache = e;
	cat->ncache++;
	if (cat->ncache > TABLE_CACHE_MAX)
	{
		TableCacheEntry **pp = &cat->cache;

		while ((*pp)->next != NULL)
			pp = &(*pp)->next;
		cache_entry_free(*pp);
		*pp = NULL;
		cat->ncache--;
	}
}

int
io_catalog_load_table(IoCatalog *cat, const char *ns, const char *table,
					  IoLoadedTable *out, IoError *err)
{
	return io_catalog_load_table_etag(cat, ns, table, NULL, out, err);
}

/*
 * Path ("v1/.../tables/t?snapshots=all") and If-None-Match header (NULL
 * when unconditional) of a load: the handle's cached ETag when its copy is
 * the version the caller knows (or the caller knows none), else
 * known_etag.  Both malloc'd.  Returns 0, or -1 with *err.
 */
static int
load_request(IoCatalog *cat, const char *ns, const char *table,
			 const char *known_etag, char **path, char **inm, IoError *err)
{
	IoStrBuf	p;
	IoStrBuf	h;
	TableCacheEntry *cached;

	*path = *inm = NULL;
	if (check_ident(ns, table ? table : "", err) != 0)
		return -1;
	cached = cache_find(cat, ns, table);
	if (cached != NULL && known_etag != NULL &&
		strcmp(cached->etag, known_etag) != 0)
		cached = NULL;			/* the caller knows another version */
	io_sb_init(&p);
	io_sb_init(&h);
	table_path(cat, &p, ns, table);
	io_sb_puts(&p, "?snapshots=all");
	if (cached != NULL)
		io_sb_printf(&h, "If-None-Match: %s", cached->etag);
	else if (known_etag != NULL)
		io_sb_printf(&h, "If-None-Match: %s", known_etag);
	if (p.oom || h.oom)
	{
		io_sb_free(&p);
		io_sb_free(&h);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}
	*path = io_sb_steal(&p);
	*inm = h.len > 0 ? io_sb_steal(&h) : NULL;
	io_sb_free(&h);
	return 0;
}

/*
 * Turn the response to a load into *out (see io_catalog_load_table_etag);
 * inm is the If-None-Match header that was sent (NULL: none).  Returns 0,
 * or -1 with *err.  resp stays the caller's.
 */
static int
load_response(IoCatalog *cat, const char *ns, const char *table,
			  const char *known_etag, const char *inm,
			  const IoHttpResponse *resp, IoLoadedTable *out, IoError *err)
{
	TableCacheEntry *cached;
	json_t	   *doc;
	const char *etag;
	size_t		etag_len;

	memset(out, 0, sizeof(*out));
	if (resp->status == 304 && inm != NULL)
	{
		const char *sent = inm + strlen("If-None-Match: ");

		cached = cache_find(cat, ns, table);
		if (cached != NULL && strcmp(cached->etag, sent) == 0)
		{
			if (loaded_copy(&cached->table, out) != 0)
				return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			out->not_modified = true;
			return 0;
		}
		if (known_etag != NULL && strcmp(known_etag, sent) == 0)
		{
			/* unchanged since the caller's version; no cached body */
			out->not_modified = true;
			out->etag = io_strdup(known_etag);
			if (out->etag == NULL)
				return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
			return 0;
		}
	}
	if (resp->status != 200)
	{
		if (resp->status == 404)
			io_catalog_forget(cat, ns, table);
		return status_error(resp, CALL_TABLE, "load table", cat->http.max_json_bytes, err);
	}
	doc = parse_body(resp, "load table", cat->http.max_json_bytes, err);
	if (doc == NULL)
		return -1;
	etag = io_http_header(resp, "etag", &etag_len);
	if (etag != NULL && etag_len > 0)
	{
		out->etag = io_strndup(etag, etag_len);
		if (out->etag == NULL)
		{
			json_decref(doc);
			return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		}
	}
	if (parse_load_result(doc, out, "load table", cat->http.max_json_bytes, err) != 0)
	{
		json_decref(doc);
		io_loaded_table_free(out);
		return -1;
	}
	json_decref(doc);
	cache_store(cat, ns, table, out);
	return 0;
}

int
io_catalog_load_table_etag(IoCatalog *cat, const char *ns, const char *table,
						   const char *known_etag, IoLoadedTable *out,
						   IoError *err)
{
	IoHttpResponse resp;
	char	   *path;
	char	   *inm;
	const char *extra[2];
	int			rc;

	memset(out, 0, sizeof(*out));
	if (load_request(cat, ns, table, known_etag, &path, &inm, err) != 0)
		return -1;
	extra[0] = "X-Iceberg-Access-Delegation: vended-credentials";
	extra[1] = inm;
	rc = cat_request(cat, "GET", path, NULL, extra, inm ? 2 : 1, true, &resp, err);
	free(path);
	if (rc == 0)
		rc = load_response(cat, ns, table, known_etag, inm, &resp, out, err);
	free(inm);
	io_http_response_free(&resp);
	return rc;
}

/* ----------------------------------------------------------------
 * Many loads at once
 * ----------------------------------------------------------------
 */

/* One transfer slot of a batch of loads. */
typedef struct LoadSlot
{
	bool		used;			/* holds a request (in flight or waiting) */
	bool		in_flight;
	size_t		idx;			/* index into the requests */
	int			attempt;		/* transport/5xx retries so far */
	bool		auth_retried;	/* retried once after a 401 */
	uint64_t	token_gen;		/* cat->token_fetches when sent */
	int64_t		ready_ms;		/* waiting: backoff ends */
	char	   *path;
	char	   *inm;
} LoadSlot;

/* Send the slot's request (a new attempt).  Returns 0 or -1 with *err. */
static int
load_slot_send(IoCatalog *cat, IoHttpBatch *b, int i, LoadSlot *s, IoError *err)
{
	const char *headers[4];
	size_t		nh = 0;
	IoStrBuf	url;
	IoStrBuf	auth;
	IoHttpRequest req;
	int			rc;

	if (ensure_token(cat, err) != 0)
		return -1;
	io_sb_init(&url);
	io_sb_init(&auth);
	io_sb_printf(&url, "%s/%s", cat->uri, s->path);
	headers[nh++] = "Accept: application/json";
	if (cat->token != NULL || cat->static_token != NULL)
	{
		io_sb_printf(&auth, "Authorization: Bearer %s",
					 cat->token ? cat->token : cat->static_token);
		headers[nh++] = auth.data;
	}
	headers[nh++] = "X-Iceberg-Access-Delegation: vended-credentials";
	if (s->inm != NULL)
		headers[nh++] = s->inm;
	if (url.oom || auth.oom)
		rc = io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	else
	{
		memset(&req, 0, sizeof(req));
		req.method = "GET";
		req.url = url.data;
		req.headers = headers;
		req.nheaders = nh;
		req.idempotent = true;
		req.what = "catalog";
		rc = io_http_batch_start(b, i, &req, err);
	}
	if (auth.data)
		memset(auth.data, 0, auth.len);
	io_sb_free(&auth);
	io_sb_free(&url);
	if (rc == 0)
	{
		cat->requests++;
		s->in_flight = true;
		s->token_gen = cat->token_fetches;
	}
	return rc;
}

/* Release a slot's request. */
static void
load_slot_clear(LoadSlot *s)
{
	free(s->path);
	free(s->inm);
	memset(s, 0, sizeof(*s));
}

/*
 * A request of the batch finished (rc 0: resp; -1: *rerr).  Decide: retry
 * (returns 1, the slot stays used), or deliver the result to fn (returns
 * 0, the slot is cleared), or stop the batch (-1 with *err: the callback
 * asked to, or the token could not be refreshed).  *refreshed tells
 * whether the batch already fetched a new token after a 401.
 */
static int
load_slot_finished(IoCatalog *cat, const IoLoadRequest *reqs, LoadSlot *s,
				   int rc, IoHttpResponse *resp, IoError *rerr,
				   const IoHttpOptions *opt, bool *refreshed, IoLoadResultFn fn,
				   void *arg, IoError *err)
{
	const IoLoadRequest *r = &reqs[s->idx];
	IoLoadedTable t;
	int			stop;

	s->in_flight = false;
	if (rc == 0 && resp->status == 401 && cat->client_id != NULL && !s->auth_retried &&
		(s->token_gen != cat->token_fetches || !*refreshed))
	{
		/*
		 * Token revoked or expired early: one new token for the batch (a
		 * request sent with an older token than the current one is just
		 * sent again).
		 */
		if (s->token_gen == cat->token_fetches)
		{
			wipe_free(cat->token);
			cat->token = NULL;
			*refreshed = true;
			if (fetch_token(cat, err) != 0)
				return -1;
		}
		s->auth_retried = true;
		s->ready_ms = 0;
		return 1;
	}
	if (s->attempt < opt->retries &&
		((rc != 0 && rerr->code == IO_ERR_CONNECT) ||
		 (rc == 0 && io_http_retryable_status(resp->status))))
	{
		s->ready_ms = io_now_ms() + io_http_backoff_ms(opt, s->attempt);
		s->attempt++;
		return 1;
	}
	memset(&t, 0, sizeof(t));
	if (rc == 0)
		rc = load_response(cat, r->ns, r->table, r->known_etag, s->inm, resp,
						   &t, rerr);
	stop = fn(arg, s->idx, rc == 0 ? &t : NULL, rc == 0 ? NULL : rerr);
	io_loaded_table_free(&t);
	load_slot_clear(s);
	if (stop)
		return io_set_error(err, IO_ERR_INTERRUPTED, 0,
							"loading tables stopped by the caller");
	return 0;
}

/* See io.h. */
int
io_catalog_load_tables_etag(IoCatalog *cat, const IoLoadRequest *reqs, size_t n,
							int concurrency, IoLoadResultFn fn, void *arg,
							IoError *err)
{
	IoHttpOptions opt;
	IoHttpBatch *b;
	LoadSlot   *slots;
	size_t		next = 0;
	size_t		done = 0;
	bool		refreshed = false;
	int			nslots;
	int			rc = 0;
	int			i;

	io_error_clear(err);
	if (n == 0)
		return 0;
	if (concurrency < 1)
		concurrency = 1;
	nslots = (size_t) concurrency < n ? concurrency : (int) n;
	io_http_options_resolve(&cat->http, &opt);
	/* one token for the whole batch, fetched before the first request */
	if (ensure_token(cat, err) != 0)
		return -1;
	b = io_http_batch_create(&cat->http, nslots, err);
	if (b == NULL)
		return -1;
	slots = calloc(nslots, sizeof(LoadSlot));
	if (slots == NULL)
	{
		io_http_batch_free(b);
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	}

	while (done < n)
	{
		int64_t		now = io_now_ms();
		long		timeout = IO_POLL_INTERVAL_MS;
		int			slot;
		int			trc;
		IoHttpResponse resp;
		IoError		rerr;

		/* start what is ready: new requests into free slots, retries due */
		for (i = 0; i < nslots && rc == 0; i++)
		{
			LoadSlot   *s = &slots[i];

			if (!s->used && next < n)
			{
				const IoLoadRequest *r = &reqs[next];

				s->used = true;
				s->idx = next++;
				if (load_request(cat, r->ns, r->table, r->known_etag,
								 &s->path, &s->inm, &rerr) != 0)
				{
					/* a bad request fails alone */
					int			stop = fn(arg, s->idx, NULL, &rerr);

					load_slot_clear(s);
					done++;
					if (stop)
						rc = io_set_error(err, IO_ERR_INTERRUPTED, 0,
										  "loading tables stopped by the caller");
					i--;		/* this slot is free again */
					continue;
				}
				s->ready_ms = 0;
			}
			if (s->used && !s->in_flight)
			{
				if (s->ready_ms <= now)
					rc = load_slot_send(cat, b, i, s, err);
				else if (s->ready_ms - now < timeout)
					timeout = (long) (s->ready_ms - now);
			}
		}
		if (rc != 0 || done >= n)
			break;

		if (io_http_batch_wait(b, timeout, err) != 0)
		{
			rc = -1;
			break;
		}
		while (rc == 0 && io_http_batch_done(b, &slot, &trc, &resp, &rerr))
		{
			int			r = load_slot_finished(cat, reqs, &slots[slot], trc,
											   &resp, &rerr, &opt, &refreshed, fn,
											   arg, err);

			io_http_response_free(&resp);
			if (r < 0)
				rc = -1;
			else if (r == 0)
				done++;
		}
		if (rc != 0)
			break;
	}

	/* abandon what is still in flight (interrupt, stop) */
	io_http_batch_free(b);
	for (i = 0; i < nslots; i++)
		load_slot_clear(&slots[i]);
	free(slots);
	return rc;
}

int
io_catalog_drop_table(IoCatalog *cat, const char *ns, const char *table,
					  bool purge, IoError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	int			rc;

	if (check_ident(ns, table ? table : "", err) != 0)
		return -1;
	io_sb_init(&path);
	table_path(cat, &path, ns, table);
	io_sb_printf(&path, "?purgeRequested=%s", purge ? "true" : "false");
	if (path.oom)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	/* not retried: a retry after a lost 204 would report a false 404 */
	rc = cat_request(cat, "DELETE", path.data, NULL, NULL, 0, false, &resp, err);
	io_sb_free(&path);
	io_catalog_forget(cat, ns, table);
	if (rc == 0 && resp.status != 204 && resp.status != 200)
		rc = status_error(&resp, CALL_TABLE, "drop table", cat->http.max_json_bytes, err);
	io_http_response_free(&resp);
	return rc;
}

int
io_catalog_commit_table(IoCatalog *cat, const char *ns, const char *table,
						const char *body, IoLoadedTable *out, IoError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	json_t	   *doc;
	int			rc;
	const char *etag;
	size_t		etag_len;

	memset(out, 0, sizeof(*out));
	if (check_ident(ns, table ? table : "", err) != 0)
		return -1;
	if (body == NULL)
		return io_set_error(err, IO_ERR_INVALID_ARGUMENT, 0, "commit body is required");
	io_sb_init(&path);
	table_path(cat, &path, ns, table);
	if (path.oom)
		return io_set_error(err, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
	rc = cat_request(cat, "POST", path.data, body, NULL, 0, false, &resp, err);
	io_sb_free(&path);
	io_catalog_forget(cat, ns, table);
	if (rc != 0)
	{
		/* the request may have reached the catalog: nobody knows */
		if (resp.sent || err->code == IO_ERR_TIMEOUT || err->code == IO_ERR_INTERRUPTED)
		{
			if (err->code != IO_ERR_INTERRUPTED || resp.sent)
			{
				char		msg[sizeof(err->message)];

				snprintf(msg, sizeof(msg), "%s", err->message);
				io_set_error(err, IO_ERR_COMMIT_STATE_UNKNOWN, 0,
							 "commit state unknown: %.400s", msg);
			}
		}
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		status_error(&resp, CALL_COMMIT, "commit", cat->http.max_json_bytes, err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_json_parse(resp.body, resp.body_len, cat->http.max_json_bytes,
						"commit", err);
	etag = io_http_header(&resp, "etag", &etag_len);
	if (etag != NULL && etag_len > 0)
		out->etag = io_strndup(etag, etag_len);
	io_http_response_free(&resp);
	if (!json_is_object(doc) ||
		parse_load_result(doc, out, "commit", cat->http.max_json_bytes, err) != 0)
	{
		/* applied (200) but unreadable: the caller must reload */
		json_decref(doc);
		io_loaded_table_free(out);
		return io_set_error(err, IO_ERR_COMMIT_STATE_UNKNOWN, 200,
							"commit state unknown: the catalog accepted the commit but its response is malformed");
	}
	json_decref(doc);
	return 0;
}
