/*-------------------------------------------------------------------------
 *
 * storage_azure.c
 *		Object storage, the Azure backend: abfs://, abfss://, wasb://,
 *		wasbs:// over the Blob service REST API (which serves ADLS Gen2
 *		accounts too, and which Azurite speaks).  Called by the entry
 *		points of storage.c (storage_int.h) after the location rule
 *		(location.c), whose canonical form "abfs://container@host/key"
 *		is the only one seen here.
 *
 * Requests go to "https://<account>.blob.<domain>/<container>/<blob>", or,
 * with an endpoint override, to "<endpoint>/<account>/<container>/<blob>"
 * (the emulator's path style).  The blob name is encoded once with RFC
 * 3986 rules ('/' kept), as for S3: nothing is ever decoded.
 *
 * Authorisation of a request for an account, the first that applies:
 *	- a SAS token the catalog vended for the account
 *	  ("adls.sas-token.<account>[.<domain>]"), appended to the query;
 *	- the user mapping's shared key: SharedKey signing ("Authorize with
 *	  Shared Key", https://learn.microsoft.com/rest/api/storageservices/
 *	  authorize-with-shared-key), io_azure_string_to_sign;
 *	- the user mapping's SAS token;
 *	- a bearer token of the mapping's OAuth2 client credentials (Entra ID,
 *	  through oauth2.c, scope https://storage.azure.com/.default), cached
 *	  with the handle and fetched again after a 401 or 403;
 *	- nothing (a public container).
 * A SAS token travels in the URL: the HTTP core never puts a query into a
 * message, and neither does this file; keys, tokens and signatures are in
 * header lines that are wiped when freed.
 *
 * Listing uses List Blobs with a marker; writes use Put Blob, or Put Block
 * and Put Block List above the block size; deletes use Blob Batch
 * (azure_batch.c), a container's 256 blobs at most per request.
 *
 * src/io/storage/storage_azure.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "io/io_int.h"
#include "io/storage/storage_int.h"

#define AZ_DEFAULT_BLOCK_SIZE	((size_t) 32 * 1024 * 1024)
#define AZ_MAX_BLOCKS			50000
#define AZ_TOKEN_SCOPE			"https://storage.azure.com/.default"
#define AZ_LIST_PAGE			5000

/* ----------------------------------------------------------------
 * SharedKey
 * ----------------------------------------------------------------
 */

/* The value of header name among headers[0..n), or "". */
static const char *
header_value(const IoHeader *headers, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(headers[i].name, name) == 0)
			return headers[i].value ? headers[i].value : "";
	return "";
}

typedef struct AzParam
{
	char	   *name;
	char	   *value;
} AzParam;

static int
param_cmp(const void *a, const void *b)
{
	const AzParam *pa = a;
	const AzParam *pb = b;
	int			c = strcmp(pa->name, pb->name);

	return c != 0 ? c : strcmp(pa->value, pb->value);
}

static int
header_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Append "\nname:v1,v2" for the query's parameters, sorted. */
static int
canonical_query(IoStrBuf *sb, const char *query)
{
	AzParam    *p;
	size_t		n = 0,
				cap = 1,
				i;
	const char *s;
	int			rc = 0;

	if (query == NULL || query[0] == '\0')
		return 0;
	for (s = query; *s; s++)
		if (*s == '&')
			cap++;
	p = io_calloc(cap, sizeof(AzParam));
	if (p == NULL)
		return -1;
	for (s = query; *s && rc == 0;)
	{
		const char *amp = strchr(s, '&');
		size_t		len = amp ? (size_t) (amp - s) : strlen(s);
		const char *eq = memchr(s, '=', len);
		size_t		nlen = eq ? (size_t) (eq - s) : len;

		if (len > 0)
		{
			p[n].name = io_uri_decode(s, nlen);
			p[n].value = eq ? io_uri_decode(eq + 1, len - nlen - 1) : io_strdup("");
			if (p[n].name == NULL || p[n].value == NULL)
				rc = -1;
			else
				for (char *c = p[n].name; *c; c++)
					*c = (char) tolower((unsigned char) *c);
			n++;
		}
		s += len + (amp ? 1 : 0);
	}
	if (rc == 0)
	{
		qsort(p, n, sizeof(AzParam), param_cmp);
		for (i = 0; i < n; i++)
		{
			if (i > 0 && strcmp(p[i].name, p[i - 1].name) == 0)
				io_sb_printf(sb, ",%s", p[i].value);
			else
				io_sb_printf(sb, "\n%s:%s", p[i].name, p[i].value);
		}
	}
	for (i = 0; i < n; i++)
	{
		io_free(p[i].name);
		io_free(p[i].value);
	}
	io_free(p);
	return rc;
}

/* See storage_int.h. */
int
io_azure_string_to_sign(const char *method, const IoHeader *headers, size_t n,
						const char *account, const char *path, const char *query,
						IoStrBuf *out, TmsError *err)
{
	static const char *const standard[] = {
		"content-encoding", "content-language", "content-length", "content-md5",
		"content-type", "date", "if-modified-since", "if-match", "if-none-match",
		"if-unmodified-since", "range"
	};
	char	  **xms;
	size_t		nx = 0,
				i;

	io_sb_init(out);
	io_sb_printf(out, "%s\n", method);
	for (i = 0; i < sizeof(standard) / sizeof(standard[0]); i++)
	{
		const char *v = header_value(headers, n, standard[i]);

		/* version 2015-02-21 and later: an empty string when zero */
		if (i == 2 && strcmp(v, "0") == 0)
			v = "";
		io_sb_printf(out, "%s\n", v);
	}
	xms = io_calloc(n ? n : 1, sizeof(char *));
	if (xms == NULL)
	{
		io_sb_free(out);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (i = 0; i < n; i++)
	{
		IoStrBuf	h;
		const char *v = headers[i].value ? headers[i].value : "";
		size_t		vl;

		if (strncasecmp(headers[i].name, "x-ms-", 5) != 0)
			continue;
		io_sb_init(&h);
		for (const char *c = headers[i].name; *c; c++)
			io_sb_putc(&h, (char) tolower((unsigned char) *c));
		while (*v == ' ' || *v == '\t')
			v++;
		vl = strlen(v);
		while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		io_sb_putc(&h, ':');
		io_sb_append(&h, v, vl);
		xms[nx++] = io_sb_steal(&h);
		if (xms[nx - 1] == NULL)
			out->oom = true;
	}
	if (!out->oom)
		qsort(xms, nx, sizeof(char *), header_cmp);
	for (i = 0; i < nx; i++)
	{
		if (xms[i] != NULL)
			io_sb_printf(out, "%s\n", xms[i]);
		io_wipe_free(xms[i]);
	}
	io_free(xms);
	io_sb_printf(out, "/%s%s", account, path);
	if (canonical_query(out, query) != 0)
		out->oom = true;
	if (out->oom)
	{
		io_sb_wipe_free(out);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* See storage_int.h. */
int
io_azure_sign(const char *key_b64, const char *sts, size_t len, char *out,
			  size_t size, TmsError *err)
{
	size_t		klen = strlen(key_b64);
	unsigned char *key = io_malloc(klen / 4 * 3 + 4);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	int			n;

	if (key == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	n = klen % 4 == 0 && klen > 0 ?
		EVP_DecodeBlock(key, (const unsigned char *) key_b64, (int) klen) : -1;
	if (n < 0)
	{
		io_free(key);
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the Azure shared key is not valid base64");
	}
	/* EVP_DecodeBlock counts the padding's bytes too */
	if (klen >= 1 && key_b64[klen - 1] == '=')
		n--;
	if (klen >= 2 && key_b64[klen - 2] == '=')
		n--;
	if (HMAC(EVP_sha256(), key, n, (const unsigned char *) sts, len, mac, &maclen) == NULL)
	{
		memset(key, 0, klen / 4 * 3 + 4);
		io_free(key);
		return tms_error_set(err, IO_ERR_INTERNAL, "could not compute HMAC-SHA256");
	}
	memset(key, 0, klen / 4 * 3 + 4);
	io_free(key);
	if (size < 4 * ((maclen + 2) / 3) + 1)
		return tms_error_set(err, IO_ERR_INTERNAL, "signature buffer too small");
	EVP_EncodeBlock((unsigned char *) out, mac, (int) maclen);
	return 0;
}

/* ----------------------------------------------------------------
 * Requests
 * ----------------------------------------------------------------
 */

/* Length of the account name, the first label of the host. */
static size_t
account_len(const char *host)
{
	const char *dot = strchr(host, '.');

	return dot ? (size_t) (dot - host) : strlen(host);
}

/* "Sun, 11 Oct 2009 21:49:13 GMT" (RFC 1123, whatever the locale). */
static void
http_date(time_t t, char out[32])
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	struct tm	tm;

	gmtime_r(&t, &tm);
	snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
			 tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
			 tm.tm_min, tm.tm_sec);
}

/*
 * The base URL of an account ("https://a.blob.core.windows.net" or
 * "<endpoint>/a") and the wire path's prefix below the host ("" or
 * "<endpoint's path>/a").
 */
static void
account_base(IoStorage *st, const char *host, IoStrBuf *base, IoStrBuf *prefix)
{
	size_t		alen = account_len(host);

	if (st->azure_endpoint != NULL)
	{
		const char *h = strstr(st->azure_endpoint, "://") + 3;
		const char *slash = strchr(h, '/');

		io_sb_printf(base, "%s/%.*s", st->azure_endpoint, (int) alen, host);
		io_sb_printf(prefix, "%s/%.*s", slash ? slash : "", (int) alen, host);
	}
	else if (strncmp(host + alen, ".dfs.", 5) == 0)
		io_sb_printf(base, "https://%.*s.blob.%s", (int) alen, host, host + alen + 5);
	else
		io_sb_printf(base, "https://%s", host);
}

/* The SAS token the catalog vended for the account of host, or NULL. */
static const char *
vended_sas(const IoStorage *st, const char *host)
{
	size_t		alen = account_len(host);

	for (size_t i = 0; i < st->nazure_vended; i++)
	{
		const char *acct = st->azure_vended[i].key + strlen("adls.sas-token.");

		if (strncmp(acct, host, alen) == 0 && (acct[alen] == '\0' || acct[alen] == '.'))
			return st->azure_vended[i].value;
	}
	return NULL;
}

/* See storage_int.h. */
bool
io_azure_account_sas(const IoStorage *st, const char *host)
{
	const char *sas = vended_sas(st, host);

	if (sas == NULL && st->azure_account_key == NULL)
		sas = st->azure_sas_token;
	/* an account SAS names the resource types it grants (srt) */
	return sas != NULL && (strncmp(sas, "srt=", 4) == 0 || strstr(sas, "&srt=") != NULL ||
						   strncmp(sas, "?srt=", 5) == 0);
}

static void
token_status_error(void *arg, const IoHttpResponse *resp, const char *what,
				   TmsError *err)
{
	(void) arg;
	tms_error_set_http(err, io_http_status_code(resp->status), resp->status,
					   "the %s refused the Azure client credentials: HTTP status %ld",
					   what, resp->status);
}

/* A bearer token of the client credentials, fetched when not fresh. */
static int
bearer_token(IoStorage *st, TmsError *err)
{
	IoOAuth2Request rq;
	char		url[512];
	const IoAllocator *prev;
	int			rc;

	if (io_oauth2_fresh(&st->azure_token))
		return 0;
	if (st->azure_token_url != NULL)
		snprintf(url, sizeof(url), "%s", st->azure_token_url);
	else
		snprintf(url, sizeof(url), "https://login.microsoftonline.com/%s/oauth2/v2.0/token",
				 st->azure_tenant_id);
	memset(&rq, 0, sizeof(rq));
	rq.http = &st->http;
	rq.url = url;
	rq.client_id = st->azure_client_id;
	rq.client_secret = st->azure_client_secret;
	rq.scope = AZ_TOKEN_SCOPE;
	rq.status_error = token_status_error;
	prev = io_use_allocator(st->alloc); /* the token outlives the call */
	rc = io_oauth2_fetch(&rq, &st->azure_token, err);
	io_use_allocator(prev);
	return rc;
}

/*
 * See storage_int.h: key NULL addresses the container (u->bucket; an
 * empty one: the account), else the blob key of it; query is raw (already
 * encoded) or NULL.
 */
int
io_azure_request_build(IoStorage *st, const char *method, const IoParsedUri *u,
					   const char *key, const char *query, const IoHeader *extra,
					   size_t nextra, const void *body, size_t body_len,
					   IoS3Request *r, TmsError *err)
{
	IoStrBuf	base,
				prefix,
				path,
				url;
	IoHeader	hdrs[IO_S3_MAX_LINES];
	char		date[32];
	char		clen[24];
	const char *sas = vended_sas(st, u->account);
	bool		shared_key = sas == NULL && st->azure_account_key != NULL;
	bool		bearer = false;
	size_t		nh = 0,
				i;
	int			rc = -1;

	memset(r, 0, sizeof(*r));
	if (sas == NULL && !shared_key)
		sas = st->azure_sas_token;
	if (sas == NULL && !shared_key && st->azure_client_id != NULL)
	{
		if (bearer_token(st, err) != 0)
			return -1;
		bearer = true;
	}
	io_sb_init(&base);
	io_sb_init(&prefix);
	io_sb_init(&path);
	io_sb_init(&url);
	account_base(st, u->account, &base, &prefix);
	io_sb_printf(&path, "%s/%s", prefix.data ? prefix.data : "", u->bucket);
	if (u->bucket[0] == '\0' && key != NULL)
		path.oom = true;		/* a blob needs a container */
	if (key != NULL)
	{
		char	   *ek = io_uri_encode(key, strlen(key), true);

		if (ek == NULL)
			path.oom = true;
		else
			io_sb_printf(&path, "/%s", ek);
		io_free(ek);
	}
	io_sb_puts(&url, base.data ? base.data : "");
	io_sb_puts(&url, path.data + (prefix.data ? prefix.len : 0));
	if ((query != NULL && query[0] != '\0') || sas != NULL)
		io_sb_putc(&url, '?');
	if (query != NULL && query[0] != '\0')
		io_sb_puts(&url, query);
	if (sas != NULL)
		io_sb_printf(&url, "%s%s", query != NULL && query[0] != '\0' ? "&" : "",
					 sas[0] == '?' ? sas + 1 : sas);
	http_date(time(NULL), date);
	hdrs[nh].name = "x-ms-date";
	hdrs[nh++].value = date;
	hdrs[nh].name = "x-ms-version";
	hdrs[nh++].value = IO_AZURE_VERSION;
	for (i = 0; i < nextra && nh < IO_S3_MAX_LINES - 2; i++)
		hdrs[nh++] = extra[i];
	for (i = 0; i < nh; i++)
		if (!io_request_add_line(r, hdrs[i].name, hdrs[i].value))
			goto oom;
	if (shared_key)
	{
		IoStrBuf	sts;
		IoStrBuf	auth;
		char		sig[64];
		char		acct[64];
		IoHeader	signed_hdrs[IO_S3_MAX_LINES + 1];
		size_t		ns = nh;

		if (path.oom || prefix.oom)
			goto oom;
		memcpy(signed_hdrs, hdrs, sizeof(IoHeader) * nh);
		snprintf(clen, sizeof(clen), "%zu", body_len);
		signed_hdrs[ns].name = "content-length";
		signed_hdrs[ns++].value = clen;
		snprintf(acct, sizeof(acct), "%.*s", (int) account_len(u->account), u->account);
		if (io_azure_string_to_sign(method, signed_hdrs, ns, acct, path.data, query,
									&sts, err) != 0)
			goto done;
		rc = io_azure_sign(st->azure_account_key, sts.data, sts.len, sig, sizeof(sig), err);
		io_sb_wipe_free(&sts);
		if (rc != 0)
			goto done;
		rc = -1;
		io_sb_init(&auth);
		io_sb_printf(&auth, "SharedKey %s:%s", acct, sig);
		memset(sig, 0, sizeof(sig));
		if (auth.oom || !io_request_add_line(r, "Authorization", auth.data))
		{
			io_sb_wipe_free(&auth);
			goto oom;
		}
		io_sb_wipe_free(&auth);
	}
	else if (bearer)
	{
		IoStrBuf	auth;

		io_sb_init(&auth);
		io_sb_printf(&auth, "Bearer %s", st->azure_token.token);
		if (auth.oom || !io_request_add_line(r, "Authorization", auth.data))
		{
			io_sb_wipe_free(&auth);
			goto oom;
		}
		io_sb_wipe_free(&auth);
	}
	if (url.oom || path.oom || prefix.oom || base.oom)
		goto oom;
	r->url = io_sb_steal(&url);
	r->req.method = method;
	r->req.url = r->url;
	r->req.headers = (const char *const *) r->lines;
	r->req.nheaders = r->nlines;
	r->req.body = body;
	r->req.body_len = body_len;
	r->req.idempotent = true;	/* every Azure call we make is idempotent */
	r->req.what = "Azure storage";
	rc = 0;
	goto done;
oom:
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
done:
	if (rc != 0)
		io_s3_request_free(r);
	io_sb_free(&base);
	io_sb_free(&prefix);
	io_sb_free(&path);
	io_sb_wipe_free(&url);
	return rc;
}

/* See storage_int.h. */
int
io_azure_request(IoStorage *st, const char *method, const IoParsedUri *u,
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
		TmsError	scratch;
		bool		bearer;

		if (io_azure_request_build(st, method, u, key, query, extra, nextra, body,
								   body_len, &r, err) != 0)
			return -1;
		bearer = false;
		for (size_t i = 0; i < r.nlines; i++)
			if (strncmp(r.lines[i], "Authorization: Bearer ", 22) == 0)
				bearer = true;
		rc = io_http_perform(&st->http, &r.req, resp, err);
		io_s3_request_free(&r);
		if (rc != 0 || attempt > 0 || (resp->status != 401 && resp->status != 403))
			break;
		/* refused for its credentials: new ones, and once more */
		if (bearer)
			io_oauth2_forget(&st->azure_token);
		else if (st->refresh == NULL || !st->azure_is_vended ||
				 io_storage_refresh(st, &scratch) != 0)
			break;
		io_http_response_free(resp);
	}
	return rc;
}

/* See storage_int.h. */
bool
io_azure_throttled(long status, const char *code)
{
	return status == 503 || status == 429 ||
		(code != NULL && (strcmp(code, "ServerBusy") == 0 ||
						  strcmp(code, "OperationTimedOut") == 0));
}

/* See storage_int.h. */
int
io_azure_status_error(const IoHttpResponse *resp, const char *what,
					  const IoParsedUri *u, const char *key, char *code_out,
					  size_t code_size, TmsError *err)
{
	IoErrorCode code = io_http_status_code(resp->status);
	IoXmlNode  *doc = NULL;
	TmsError	xerr;
	const char *azcode = NULL;
	const char *azmsg = NULL;
	size_t		hlen = 0;
	const char *h = io_http_header(resp, "x-ms-error-code", &hlen);
	char		hcode[64];

	if (resp->status == 500 || resp->status == 502 || resp->status == 504)
		code = IO_ERR_SERVER;
	else if (resp->status >= 400 && resp->status < 500 && code == IO_ERR_PROTOCOL)
		code = IO_ERR_STORAGE;
	tms_error_set_http(err, code, resp->status, "could not %s \"abfs://%s@%s/%s\": HTTP status %ld",
					   what, u->bucket, u->account, key ? key : "", resp->status);
	if (h != NULL)
	{
		snprintf(hcode, sizeof(hcode), "%.*s", (int) (hlen < 63 ? hlen : 63), h);
		azcode = hcode;
	}
	if (resp->body_len > 0)
		doc = io_xml_parse(resp->body, resp->body_len, &xerr);
	if (doc != NULL)
	{
		if (azcode == NULL)
			azcode = io_xml_child_text(doc, "Code");
		azmsg = io_xml_child_text(doc, "Message");
	}
	if (azcode != NULL || azmsg != NULL)
	{
		char		d[sizeof(err->detail)];
		int			mlen = 0;

		/* the message's first line: the rest is a request id and a time */
		if (azmsg != NULL)
			mlen = (int) strcspn(azmsg, "\r\n");
		snprintf(d, sizeof(d), "%s%s%.*s", azcode ? azcode : "",
				 (azcode && azmsg) ? ": " : "", mlen, azmsg ? azmsg : "");
		tms_error_detail_raw(err, d, strlen(d));
	}
	if (code_out != NULL && code_size > 0)
		snprintf(code_out, code_size, "%s", azcode ? azcode : "");
	io_xml_free(doc);
	return -1;
}

/* See storage_int.h. */
int
io_azure_read(IoStorage *st, const IoParsedUri *u, uint64_t offset, uint64_t len,
			  IoBuffer *out, TmsError *err)
{
	IoHttpResponse resp;
	char		range[80];
	IoHeader	h;
	size_t		nh = 0;
	int			rc;

	if (io_range_value(offset, len, range, sizeof(range)))
	{
		h.name = "x-ms-range";
		h.value = range;
		nh = 1;
	}
	if (io_azure_request(st, "GET", u, u->path, NULL, &h, nh, NULL, 0, &resp, err) != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_read_result(&resp, nh > 0, offset, len, out, err);
	if (rc > 0)
		io_azure_status_error(&resp, "read", u, u->path, NULL, 0, err);
	io_http_response_free(&resp);
	return rc == 0 ? 0 : -1;
}

/* See storage_int.h. */
int
io_azure_size(IoStorage *st, const IoParsedUri *u, uint64_t *size, TmsError *err)
{
	IoHttpResponse resp;
	int			rc;

	rc = io_azure_request(st, "HEAD", u, u->path, NULL, NULL, 0, NULL, 0, &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = io_azure_status_error(&resp, "stat", u, u->path, NULL, 0, err);
	else if (rc == 0)
		rc = io_head_size(&resp, "content-length", "Azure", size, err);
	io_http_response_free(&resp);
	return rc;
}

/* One Put Blob, or one Put Block when query says so. */
static int
put(IoStorage *st, const IoParsedUri *u, const char *query, const char *ctype,
	const void *data, size_t len, const char *what, TmsError *err)
{
	IoHttpResponse resp;
	IoHeader	h[2];
	size_t		nh = 0;
	int			rc;

	h[nh].name = "content-type";
	h[nh++].value = ctype;
	if (query == NULL)
	{
		h[nh].name = "x-ms-blob-type";
		h[nh++].value = "BlockBlob";
	}
	rc = io_azure_request(st, "PUT", u, u->path, query, h, nh, data ? data : "", len,
						  &resp, err);
	if (rc == 0 && resp.status != 201 && resp.status != 200)
		rc = io_azure_status_error(&resp, what, u, u->path, NULL, 0, err);
	io_http_response_free(&resp);
	return rc;
}

/* The id of block i: base64 of 16 characters, the same length for all. */
static void
block_id(size_t i, char out[32])
{
	char		raw[32];

	snprintf(raw, sizeof(raw), "tms-block-%06u", (unsigned) (i % 1000000));
	EVP_EncodeBlock((unsigned char *) out, (const unsigned char *) raw, 16);
}

/* See storage_int.h. */
int
io_azure_write(IoStorage *st, const IoParsedUri *u, const void *data, size_t len,
			   TmsError *err)
{
	size_t		bs = st->azure_block_size > 0 ? st->azure_block_size : AZ_DEFAULT_BLOCK_SIZE;
	size_t		nblocks,
				i;
	IoStrBuf	list;
	int			rc = 0;

	if (u->path[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid Azure location \"abfs://%s@%s\": missing blob name",
							 u->bucket, u->account);
	if (len <= bs)
		return put(st, u, NULL, "application/octet-stream", data, len, "write", err);
	nblocks = (len + bs - 1) / bs;
	if (nblocks > AZ_MAX_BLOCKS)
		return tms_error_set(err, IO_ERR_TOO_LARGE,
							 "cannot write %zu bytes to Azure in blocks of %zu bytes: more than %d blocks",
							 len, bs, AZ_MAX_BLOCKS);
	io_sb_init(&list);
	io_sb_puts(&list, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
	for (i = 0; i < nblocks && rc == 0; i++)
	{
		char		id[32];
		char	   *eid;
		char		q[96];
		size_t		off = i * bs;

		block_id(i, id);
		eid = io_uri_encode(id, strlen(id), false);
		if (eid == NULL)
		{
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		snprintf(q, sizeof(q), "comp=block&blockid=%s", eid);
		io_free(eid);
		rc = put(st, u, q, "application/octet-stream", (const char *) data + off,
				 len - off < bs ? len - off : bs, "write a block of", err);
		io_sb_printf(&list, "<Latest>%s</Latest>", id);
		if (st->http.interrupted && rc == 0 &&
			st->http.interrupted(st->http.interrupt_arg))
			rc = tms_error_set(err, IO_ERR_INTERRUPTED, "write interrupted");
	}
	io_sb_puts(&list, "</BlockList>");
	if (rc == 0 && list.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (rc == 0)
		rc = put(st, u, "comp=blocklist", "application/xml", list.data, list.len,
				 "commit the blocks of", err);
	io_sb_free(&list);
	return rc;
}

/* Parse an HTTP date "Wed, 09 Sep 2009 09:20:02 GMT" to epoch seconds. */
static int64_t
parse_http_time(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	struct tm	tm;
	char		mon[4];
	const char *m;

	if (s == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%*3s, %2d %3s %4d %2d:%2d:%2d", &tm.tm_mday, mon, &tm.tm_year,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	mon[3] = '\0';
	m = strstr(months, mon);
	if (m == NULL || (m - months) % 3 != 0)
		return 0;
	tm.tm_mon = (int) ((m - months) / 3);
	tm.tm_year -= 1900;
	return (int64_t) timegm(&tm);
}

/* Call fn for the blobs of one List Blobs page; *next the marker or NULL. */
static int
list_page(const char *body, size_t body_len, const char *uri_base, IoListFn fn,
		  void *arg, bool *stop, char **next, TmsError *err)
{
	IoXmlNode  *doc = io_xml_parse(body, body_len, err);
	const IoXmlNode *blobs;
	const char *marker;
	int			rc = 0;

	*next = NULL;
	if (doc == NULL)
		return -1;
	if (strcmp(doc->name, "EnumerationResults") != 0)
	{
		rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								"unexpected Azure listing response: root element \"%s\"", doc->name);
		io_xml_free(doc);
		return rc;
	}
	blobs = io_xml_child(doc, "Blobs");
	for (const IoXmlNode *c = blobs ? blobs->children : NULL; c != NULL && !*stop; c = c->next)
	{
		const IoXmlNode *props;
		const char *name;
		const char *rt;
		IoStrBuf	uri;
		IoObjectInfo info;

		if (strcmp(c->name, "Blob") != 0)
			continue;
		name = io_xml_child_text(c, "Name");
		props = io_xml_child(c, "Properties");
		if (name == NULL)
		{
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									"malformed Azure listing: an entry has no Name");
			break;
		}
		/* a directory of a hierarchical namespace is no file */
		rt = props ? io_xml_child_text(props, "ResourceType") : NULL;
		if (rt != NULL && strcmp(rt, "directory") == 0)
			continue;
		io_sb_init(&uri);
		io_sb_printf(&uri, "%s/%s", uri_base, name);
		if (uri.oom)
		{
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		info.uri = uri.data;
		info.size = props && io_xml_child_text(props, "Content-Length") ?
			strtoull(io_xml_child_text(props, "Content-Length"), NULL, 10) : 0;
		info.mtime = props ? parse_http_time(io_xml_child_text(props, "Last-Modified")) : 0;
		if (fn(arg, &info) != 0)
			*stop = true;
		io_sb_free(&uri);
	}
	marker = io_xml_child_text(doc, "NextMarker");
	if (rc == 0 && !*stop && marker != NULL && marker[0] != '\0' &&
		(*next = io_strdup(marker)) == NULL)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	io_xml_free(doc);
	return rc;
}

/*
 * See storage_int.h.  The listed URIs keep the scheme and authority of
 * prefix_uri as written ("wasbs://c@a.blob..." stays so).
 */
int
io_azure_list(IoStorage *st, const IoParsedUri *u, const char *prefix_uri,
			  IoListFn fn, void *arg, TmsError *err)
{
	const char *auth = strstr(prefix_uri, "://");
	const char *slash = auth ? strchr(auth + 3, '/') : NULL;
	char	   *uri_base = slash ? io_strndup(prefix_uri, (size_t) (slash - prefix_uri)) :
	io_strdup(prefix_uri);
	char	   *marker = NULL;
	bool		stop = false;
	int			rc = 0;

	if (uri_base == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	do
	{
		IoStrBuf	q;
		IoHttpResponse resp;
		char	   *ep = io_uri_encode(u->path, strlen(u->path), false);
		char	   *next = NULL;

		io_sb_init(&q);
		io_sb_printf(&q, "restype=container&comp=list&maxresults=%d&prefix=%s",
					 st->list_page_size < AZ_LIST_PAGE ? st->list_page_size : AZ_LIST_PAGE,
					 ep ? ep : "");
		io_free(ep);
		if (marker != NULL)
		{
			char	   *em = io_uri_encode(marker, strlen(marker), false);

			io_sb_printf(&q, "&marker=%s", em ? em : "");
			if (em == NULL)
				q.oom = true;
			io_free(em);
		}
		if (q.oom || ep == NULL)
		{
			io_sb_free(&q);
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		rc = io_azure_request(st, "GET", u, NULL, q.data, NULL, 0, NULL, 0, &resp, err);
		io_sb_free(&q);
		if (rc == 0 && resp.status != 200)
			rc = io_azure_status_error(&resp, "list", u, u->path, NULL, 0, err);
		if (rc == 0)
			rc = list_page(resp.body, resp.body_len, uri_base, fn, arg, &stop, &next, err);
		io_http_response_free(&resp);
		io_free(marker);
		marker = next;
		if (rc == 0 && marker != NULL && st->http.interrupted &&
			st->http.interrupted(st->http.interrupt_arg))
			rc = tms_error_set(err, IO_ERR_INTERRUPTED, "listing interrupted");
	} while (rc == 0 && marker != NULL);
	io_free(marker);
	io_free(uri_base);
	return rc;
}

/* See storage_int.h: "<blob endpoint of the account>/<container>". */
int
io_azure_target(IoStorage *st, const IoParsedUri *u, char *buf, size_t size)
{
	IoStrBuf	base,
				prefix;
	int			n;

	io_sb_init(&base);
	io_sb_init(&prefix);
	account_base(st, u->account, &base, &prefix);
	n = base.oom ? -1 : snprintf(buf, size, "%s/%s", base.data, u->bucket);
	io_sb_free(&base);
	io_sb_free(&prefix);
	return n < 0 || (size_t) n >= size ? -1 : 0;
}

/* See storage_int.h. */
int
io_azure_delete_batch(IoStorage *st, IoParsedUri *parsed, const size_t *idx,
					  size_t n, IoDeleteResult *results, TmsError *err)
{
	IoStrBuf	body;
	char		ctype[96];
	IoHeader	h;
	IoHttpResponse resp;
	const char **keys;
	IoDeleteResult *res;
	const IoParsedUri *u = &parsed[idx[0]];
	size_t		i;
	int			rc;

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
	io_storage_refresh_if_due(st);
	rc = io_azure_batch_body(st, u, keys, n, &body, ctype, sizeof(ctype), err);
	if (rc == 0)
	{
		IoParsedUri account = *u;
		bool		whole = io_azure_account_sas(st, u->account);

		/* an account SAS: the account's batch; else the container's */
		account.bucket = "";
		h.name = "content-type";
		h.value = ctype;
		rc = io_azure_request(st, "POST", whole ? &account : u, NULL,
							  whole ? "comp=batch" : "restype=container&comp=batch", &h, 1,
							  body.data, body.len, &resp, err);
		io_sb_wipe_free(&body);
		if (rc == 0 && resp.status != 202)
			rc = io_azure_status_error(&resp, "delete blobs in", u, "", NULL, 0, err);
		else if (rc == 0)
			rc = io_azure_batch_read(&resp, n, res, err);
		io_http_response_free(&resp);
	}
	if (rc == 0)
		for (i = 0; i < n; i++)
			results[idx[i]] = res[i];
	io_free(keys);
	io_free(res);
	return rc;
}
