/*-------------------------------------------------------------------------
 *
 * rest.c
 *		Iceberg REST catalog client (jansson + the HTTP core): the handle,
 *		the /v1/config handshake, status mapping, the request core, and
 *		the rules for names and paths.  The other concerns live in
 *		rest_auth.c, rest_list.c, rest_table.c and rest_batch.c
 *		(rest_int.h lists what they share).
 *
 * Follows the Iceberg REST OpenAPI spec: GET /v1/config handshake
 * (defaults < client properties < overrides, "prefix", "endpoints",
 * "idempotency-key-lifetime"),
 * bearer tokens and SigV4 (rest_auth.c, whose io_rest_headers makes the
 * headers of every attempt), and the ErrorModel of every non-success
 * response (or AWS's own error shape, for requests AWS's front end
 * refused), mapped to IoErrorCode in io_rest_status_error() with the
 * type and message in TmsError.detail.  Tokens, client secrets and AWS
 * keys are never put into an error.
 *
 * Names cannot change a request's target: table names and namespace
 * levels are checked (io_rest_check_ident) and every path segment is
 * percent-encoded; the prefix keeps only characters that cannot end the
 * path, and no dot segment.
 *
 * src/io/rest/rest.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/rest/rest_int.h"

/* See rest_int.h. */
void
io_rest_kv_free(IoKeyValue *kv, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		io_free(kv[i].key);
		io_wipe_free(kv[i].value);
	}
	io_free(kv);
}

/* See io.h; secrets are wiped. */
void
io_catalog_free(IoCatalog *cat)
{
	if (cat == NULL)
		return;
	io_catalog_forget(cat, NULL, NULL);
	io_free(cat->uri);
	io_free(cat->warehouse);
	io_free(cat->prefix_option);
	io_free(cat->client_id);
	io_wipe_free(cat->client_secret);
	io_wipe_free(cat->static_token);
	io_free(cat->oauth_uri);
	io_free(cat->scope);
	io_free(cat->ca_file);
	io_free(cat->ca_path);
	io_free(cat->signing_region);
	io_free(cat->signing_name);
	io_free(cat->aws_access_key_id);
	io_wipe_free(cat->aws_secret_access_key);
	io_wipe_free(cat->aws_session_token);
	io_oauth2_forget(&cat->oauth);
	io_rest_kv_free(cat->props, cat->nprops);
	io_string_list_free(&cat->endpoints);
	io_free(cat->prefix);
	io_free(cat);
}

/* See io.h. */
void
io_catalog_set_http(IoCatalog *cat, const IoHttpOptions *http)
{
	cat->http = *http;
	cat->http.ca_file = cat->ca_file;
	cat->http.ca_path = cat->ca_path;
}

/* See io.h. */
const IoKeyValue *
io_catalog_properties(const IoCatalog *cat, size_t *n)
{
	*n = cat->nprops;
	return cat->props;
}

/* See io.h. */
const char *
io_catalog_property(const IoCatalog *cat, const char *key)
{
	size_t		i;

	for (i = 0; i < cat->nprops; i++)
		if (strcmp(cat->props[i].key, key) == 0)
			return cat->props[i].value;
	return NULL;
}

/* See io.h. */
const IoStringList *
io_catalog_endpoints(const IoCatalog *cat)
{
	return &cat->endpoints;
}

/* See io.h. */
const char *
io_catalog_prefix(const IoCatalog *cat)
{
	return cat->prefix ? cat->prefix : "";
}

/* See io.h. */
uint64_t
io_catalog_request_count(const IoCatalog *cat)
{
	return cat->requests;
}

/* ----------------------------------------------------------------
 * Errors
 * ----------------------------------------------------------------
 */

/*
 * Is an AWS error type one of authentication (the request's signature or
 * keys), as opposed to authorisation (AccessDeniedException: the keys are
 * fine, their policy does not allow the call)?  AWS answers both with 403.
 */
static bool
aws_authentication_failure(const char *type)
{
	static const char *const types[] = {
		"InvalidSignatureException", "SignatureDoesNotMatch",
		"IncompleteSignatureException", "IncompleteSignature",
		"MissingAuthenticationTokenException", "MissingAuthenticationToken",
		"UnrecognizedClientException", "InvalidClientTokenId",
		"InvalidAccessKeyId", "ExpiredTokenException", "ExpiredToken",
		NULL
	};

	for (int i = 0; types[i] != NULL; i++)
		if (strcmp(type, types[i]) == 0)
			return true;
	return false;
}

/*
 * An AWS error type as a bare name: "com.amazon.coral.service#X" (a body's
 * "__type") and "X:http://internal.amazon.com/..." (the x-amzn-ErrorType
 * header) are X.  Into buf; NULL when there is none.
 */
static const char *
aws_error_type(const char *raw, size_t len, char *buf, size_t size)
{
	const char *hash;
	size_t		n;

	if (raw == NULL)
		return NULL;
	hash = memchr(raw, '#', len);
	if (hash != NULL)
	{
		len -= (size_t) (hash + 1 - raw);
		raw = hash + 1;
	}
	n = strcspn(raw, ":");
	if (n > len)
		n = len;
	if (n == 0 || n >= size)
		return NULL;
	memcpy(buf, raw, n);
	buf[n] = '\0';
	return buf;
}

/* See rest_int.h (the reader of error bodies). */
int
io_rest_status_error(const IoHttpResponse *resp, RestCallKind kind,
					 const char *what, size_t max_json, TmsError *err)
{
	long		st = resp->status;
	IoErrorCode code;
	json_t	   *doc = NULL;
	const char *etype = NULL;
	const char *emsg = NULL;
	size_t		emsg_len = SIZE_MAX;	/* how much of emsg to show */
	char		typebuf[128];

	if (resp->body_len > 0)
	{
		TmsError	perr;

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
		else
		{
			/*
			 * AWS's own shape, from its front end before the catalog saw the
			 * request (a bad signature, unknown keys): {"message"} or
			 * {"Message"} with the type in "__type" or the x-amzn-ErrorType
			 * header.  Only the message's first line is kept: AWS may append
			 * the canonical request it expected, whose headers hold the
			 * session token and the bearer token.
			 */
			const char *t = json_string_value(json_object_get(doc, "__type"));
			size_t		tlen = 0;

			emsg = json_string_value(json_object_get(doc, "message"));
			if (emsg == NULL)
				emsg = json_string_value(json_object_get(doc, "Message"));
			if (emsg != NULL)
				emsg_len = strcspn(emsg, "\r\n");
			if (t != NULL)
				tlen = strlen(t);
			else
				t = io_http_header(resp, "x-amzn-ErrorType", &tlen);
			etype = aws_error_type(t, tlen, typebuf, sizeof(typebuf));
		}
	}

	/*
	 * A refused signature's message may go on with the canonical request AWS
	 * expected, whose headers hold the session token and the bearer token, in
	 * whatever shape it comes: its first line only.
	 */
	if (emsg != NULL && etype != NULL && aws_authentication_failure(etype))
		emsg_len = strcspn(emsg, "\r\n");

	code = io_http_status_code(st);
	if (st == 404)
	{
		if (etype && strstr(etype, "NoSuchNamespace"))
			code = IO_ERR_NO_SUCH_NAMESPACE;
		else if (etype && (strstr(etype, "NoSuchTable") || strstr(etype, "NoSuchIcebergTable")))
			code = IO_ERR_NO_SUCH_TABLE;
		else if (kind == REST_CALL_NAMESPACE)
			code = IO_ERR_NO_SUCH_NAMESPACE;
		else if (kind == REST_CALL_TABLE || kind == REST_CALL_COMMIT)
			code = IO_ERR_NO_SUCH_TABLE;
	}
	else if (st == 403 && etype != NULL && aws_authentication_failure(etype))
		code = IO_ERR_UNAUTHORIZED; /* the keys, not what they may do */
	else if (st == 406)
		code = IO_ERR_UNSUPPORTED;
	else if (kind == REST_CALL_COMMIT && st == 409)
		code = IO_ERR_CONFLICT;
	else if (kind == REST_CALL_COMMIT && st >= 500 && st != 501)
		code = IO_ERR_COMMIT_STATE_UNKNOWN;
	if (st == 406)
	{
		/*
		 * The REST spec's UnsupportedOperationResponse: "Not Acceptable /
		 * Unsupported Operation.  The server does not support this
		 * operation."  The catalog answered and said no: not a fault of the
		 * connection nor of this client's request format.
		 */
		tms_error_set_http(err, code, st,
						   "catalog refused %s: it does not support this operation (HTTP status 406)",
						   what);
	}
	else if (code == IO_ERR_COMMIT_STATE_UNKNOWN)
		tms_error_set_http(err, code, st, "commit state unknown: %s returned HTTP status %ld",
						   what, st);
	else if (code == IO_ERR_CONFLICT)
		tms_error_set_http(err, code, st, "commit conflict: %s returned HTTP status 409", what);
	else
		tms_error_set_http(err, code, st, "%s failed with HTTP status %ld", what, st);
	if (etype != NULL || emsg != NULL)
	{
		char		d[sizeof(err->detail)];

		size_t		shown = emsg == NULL ? 0 :
		emsg_len == SIZE_MAX ? strlen(emsg) : emsg_len;

		snprintf(d, sizeof(d), "%s%s%.*s", etype ? etype : "",
				 (etype && emsg) ? ": " : "",
				 (int) (shown < sizeof(d) ? shown : sizeof(d)), emsg ? emsg : "");
		tms_error_detail_raw(err, d, strlen(d));
	}
	else if (resp->body_len > 0 && doc == NULL)
		tms_error_detail_raw(err, resp->body, resp->body_len > 200 ? 200 : resp->body_len);
	json_decref(doc);
	return -1;
}

/* ----------------------------------------------------------------
 * Requests
 * ----------------------------------------------------------------
 */

/* What the headers of each attempt of io_rest_request are made from. */
typedef struct RestAttempt
{
	IoCatalog  *cat;
	const char *method;
	const char *url;
	const char *body;
	const char *const *extra;
	size_t		nextra;
} RestAttempt;

/* IoHttpRequest.attempt_headers: the headers, signed now when SigV4 is on. */
static int
attempt_headers(void *arg, IoStringList *lines, TmsError *err)
{
	RestAttempt *a = arg;

	return io_rest_headers(a->cat, a->method, a->url, a->body, a->extra,
						   a->nextra, time(NULL), lines, NULL, err);
}

/* See rest_int.h. */
int
io_rest_request(IoCatalog *cat, const char *method, const char *path,
				const char *body, const char *const *extra, size_t nextra,
				bool idempotent, IoHttpResponse *resp, TmsError *err)
{
	IoStrBuf	url;
	int			attempt;
	int			rc = -1;

	memset(resp, 0, sizeof(*resp));
	io_sb_init(&url);
	io_sb_printf(&url, "%s/%s", cat->uri, path);
	if (url.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	for (attempt = 0; attempt < 2; attempt++)
	{
		RestAttempt a = {cat, method, url.data, body, extra, nextra};
		IoHttpRequest req;

		if (io_rest_ensure_token(cat, err) != 0)
			break;
		memset(&req, 0, sizeof(req));
		req.method = method;
		req.url = url.data;
		req.attempt_headers = attempt_headers;
		req.attempt_arg = &a;
		req.body = body;
		req.body_len = body ? strlen(body) : 0;
		req.idempotent = idempotent;
		req.what = "catalog";
		io_http_response_free(resp);
		rc = io_http_perform(&cat->http, &req, resp, err);
		cat->requests++;
		if (rc != 0)
			break;
		if (resp->status == 401 && attempt == 0 && cat->client_id != NULL)
		{
			/* token revoked or expired early: get a new one, once */
			io_oauth2_forget(&cat->oauth);
			continue;
		}
		break;
	}
	io_sb_free(&url);
	return rc;
}

/* See rest_int.h. */
json_t *
io_rest_parse_body(const char *body, size_t len, const char *what,
				   size_t max_json, TmsError *err)
{
	json_t	   *doc = io_json_parse(body, len, max_json, what, err);

	if (doc == NULL)
	{
		err->http_status = 200;
		return NULL;
	}
	if (!json_is_object(doc))
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
						   "malformed %s response: not a JSON object", what);
		return NULL;
	}
	return doc;
}

/* See rest_int.h. */
void
io_rest_v1_path(IoCatalog *cat, IoStrBuf *sb)
{
	if (cat->prefix != NULL && cat->prefix[0] != '\0')
		io_sb_printf(sb, "v1/%s/", cat->prefix);
	else
		io_sb_puts(sb, "v1/");
}

/* See rest_int.h. */
void
io_rest_append_encoded(IoStrBuf *sb, const char *s)
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

/* See rest_int.h. */
void
io_rest_append_ns(IoStrBuf *sb, const char *ns)
{
	io_sb_puts(sb, "namespaces/");
	io_rest_append_encoded(sb, ns);
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
		   TmsError *err)
{
	char		shown[128];

	name_for_message(whole, strlen(whole), shown, sizeof(shown));
	if (len == 0)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid %s \"%s\": a name must not be empty", what, shown);
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid %s \"%s\": \".\" and \"..\" are not allowed as names",
							 what, shown);
	if (len > IO_MAX_NAME_BYTES)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid %s \"%s...\": a name must not exceed %d bytes",
							 what, shown, IO_MAX_NAME_BYTES);
	return 0;
}

/* See rest_int.h. */
int
io_rest_check_ident(const char *ns, const char *table, TmsError *err)
{
	const char *p;

	if (ns == NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
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
prefix_clean(const char *raw, IoErrorCode bad_code, TmsError *err)
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
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
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
				tms_error_set(err, bad_code,
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

/* See rest_int.h. */
int
io_rest_kv_put(IoKeyValue **arr, size_t *n, const char *key,
			   const char *value)
{
	char	   *nv = io_strdup(value);
	char	   *nk;
	IoKeyValue *grown;

	if (nv == NULL)
		return -1;
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*arr)[i].key, key) == 0)
		{
			io_wipe_free((*arr)[i].value);
			(*arr)[i].value = nv;
			return 0;
		}
	nk = io_strdup(key);
	grown = nk ? io_realloc(*arr, (*n + 1) * sizeof(IoKeyValue)) : NULL;
	if (grown == NULL)
	{
		io_free(nk);
		io_wipe_free(nv);
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
	return io_rest_kv_put(&cat->props, &cat->nprops, key, value);
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

/* See rest_int.h (the reader of /v1/config). */
int
io_rest_read_config(IoCatalog *cat, const char *body, size_t len, TmsError *err)
{
	json_t	   *doc;
	json_t	   *eps;
	const char *prefix;

	doc = io_rest_parse_body(body, len, "catalog configuration",
							 cat->http.max_json_bytes, err);
	if (doc == NULL)
		return -1;
	io_rest_kv_free(cat->props, cat->nprops);
	cat->props = NULL;
	cat->nprops = 0;
	io_string_list_free(&cat->endpoints);
	io_free(cat->prefix);
	cat->prefix = NULL;

	/*
	 * defaults < client properties < overrides.  (No json_object() here:
	 * inside the server that name resolves to PostgreSQL's own function.)
	 */
	if (merge_props(cat, json_object_get(doc, "defaults")) != 0 ||
		(cat->warehouse != NULL && props_set(cat, "warehouse", cat->warehouse) != 0) ||
		merge_props(cat, json_object_get(doc, "overrides")) != 0)
	{
		json_decref(doc);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}

	/*
	 * ConfigResponse."idempotency-key-lifetime": the catalog honours an
	 * Idempotency-Key for that long.  A value we cannot read counts as none:
	 * then no key is sent and commits keep never being retried.
	 */
	cat->idem_lifetime_ms = 0;
	{
		json_t	   *lt = json_object_get(doc, "idempotency-key-lifetime");
		int64_t		ms;

		if (json_is_string(lt) &&
			io_parse_iso_duration_ms(json_string_value(lt), &ms) && ms > 0)
			cat->idem_lifetime_ms = ms;
	}
	eps = json_object_get(doc, "endpoints");
	if (json_is_array(eps))
	{
		size_t		i;
		json_t	   *e;

		cat->endpoints.items = io_calloc(json_array_size(eps) + 1, sizeof(char *));
		if (cat->endpoints.items == NULL)
		{
			json_decref(doc);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
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

/* GET /v1/config and read it. */
static int
handshake(IoCatalog *cat, TmsError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	int			rc;

	io_sb_init(&path);
	io_sb_puts(&path, "v1/config");
	if (cat->warehouse != NULL)
	{
		io_sb_puts(&path, "?warehouse=");
		io_rest_append_encoded(&path, cat->warehouse);
	}
	if (path.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = io_rest_request(cat, "GET", path.data, NULL, NULL, 0, true, &resp, err);
	io_sb_free(&path);
	if (rc == 0 && resp.status != 200)
		rc = io_rest_status_error(&resp, REST_CALL_GENERIC, "catalog configuration request",
								  cat->http.max_json_bytes, err);
	if (rc == 0)
		rc = io_rest_read_config(cat, resp.body, resp.body_len, err);
	io_http_response_free(&resp);
	return rc;
}

/*
 * What a server that sends no "endpoints" offers: the spec's default set
 * (the description of ConfigResponse.endpoints).
 */
static const char *const default_endpoints[] = {
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/register",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/transactions/commit",
};

/*
 * See rest_int.h.  When the server sent no "endpoints", the spec's
 * default set is assumed (loadCredentials, say, is not in it).
 */
bool
io_rest_endpoint_offered(IoCatalog *cat, const char *endpoint)
{
	size_t		i;

	if (cat->endpoints.n == 0)
	{
		for (i = 0; i < sizeof(default_endpoints) / sizeof(default_endpoints[0]); i++)
			if (strcmp(default_endpoints[i], endpoint) == 0)
				return true;
		return false;
	}
	for (i = 0; i < cat->endpoints.n; i++)
		if (strcmp(cat->endpoints.items[i], endpoint) == 0)
			return true;
	return false;
}

/* See rest_int.h. */
int
io_rest_post_change(IoCatalog *cat, IoStrBuf *path, IoStrBuf *body, RestCallKind kind,
					const char *what, TmsError *err)
{
	IoHttpResponse resp;
	int			rc;

	if (path->oom || body->oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	else
	{
		rc = io_rest_request(cat, "POST", path->data, body->data, NULL, 0, false, &resp, err);
		if (rc == 0 && resp.status != 200 && resp.status != 204)
			rc = io_rest_status_error(&resp, kind, what, cat->http.max_json_bytes, err);
		io_http_response_free(&resp);
	}
	io_sb_free(path);
	io_sb_free(body);
	return rc;
}

/* See rest_int.h. */
void
io_rest_append_json_string(IoStrBuf *sb, const char *s)
{
	io_sb_putc(sb, '"');
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
		{
			io_sb_putc(sb, '\\');
			io_sb_putc(sb, (char) c);
		}
		else if (c < 0x20)
			io_sb_printf(sb, "\\u%04x", c);
		else
			io_sb_putc(sb, (char) c);
	}
	io_sb_putc(sb, '"');
}

/* See rest_int.h. */
void
io_rest_append_json_ns(IoStrBuf *sb, const char *ns)
{
	const char *p = ns;

	io_sb_putc(sb, '[');
	for (;;)
	{
		const char *sep = strchr(p, IO_NS_SEP);
		char	   *level = io_strndup(p, sep ? (size_t) (sep - p) : strlen(p));

		if (level == NULL)
		{
			sb->oom = true;
			return;
		}
		if (p != ns)
			io_sb_puts(sb, ", ");
		io_rest_append_json_string(sb, level);
		io_free(level);
		if (sep == NULL)
			break;
		p = sep + 1;
	}
	io_sb_putc(sb, ']');
}

/* See io.h: copy the configuration, fetch a token if needed, handshake. */
IoCatalog *
io_catalog_open(const IoCatalogConfig *cfg, TmsError *err)
{
	IoCatalog  *cat;
	size_t		n;

	if (cfg->uri == NULL ||
		(strncmp(cfg->uri, "http://", 7) != 0 && strncmp(cfg->uri, "https://", 8) != 0))
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "catalog URI must start with http:// or https://");
		return NULL;
	}
	cat = io_calloc(1, sizeof(IoCatalog));
	if (cat == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	cat->alloc = io_current_allocator();
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
			tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
						  "credential must have the form client_id:client_secret");
			return NULL;
		}
		cat->client_id = io_strndup(cfg->credential, (size_t) (colon - cfg->credential));
		cat->client_secret = io_strdup(colon + 1);
		if (cat->client_id == NULL || cat->client_secret == NULL)
			goto oom;
	}
	if (cfg->signing_region != NULL)
	{
		const char *why = NULL;

		if (!io_sigv4_scope_valid(cfg->signing_region))
			why = "the signing region must be 1 to 64 letters, digits, '-', '_' or '.'";
		else if (cfg->signing_name != NULL && !io_sigv4_scope_valid(cfg->signing_name))
			why = "the signing name must be 1 to 64 letters, digits, '-', '_' or '.'";
		else if (cfg->aws_access_key_id == NULL || cfg->aws_access_key_id[0] == '\0' ||
				 cfg->aws_secret_access_key == NULL || cfg->aws_secret_access_key[0] == '\0')
			why = "signing requests needs an AWS access key id and secret access key";
		if (why != NULL)
		{
			io_catalog_free(cat);
			tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "%s", why);
			return NULL;
		}
		cat->signing_region = io_strdup(cfg->signing_region);
		cat->signing_name = io_strdup(cfg->signing_name ? cfg->signing_name : "execute-api");
		cat->aws_access_key_id = io_strdup(cfg->aws_access_key_id);
		cat->aws_secret_access_key = io_strdup(cfg->aws_secret_access_key);
		cat->aws_session_token = io_strdup(cfg->aws_session_token);
		if (cat->signing_region == NULL || cat->signing_name == NULL ||
			cat->aws_access_key_id == NULL || cat->aws_secret_access_key == NULL ||
			(cfg->aws_session_token && !cat->aws_session_token))
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
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return NULL;
}
