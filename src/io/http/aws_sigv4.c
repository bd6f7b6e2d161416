/*-------------------------------------------------------------------------
 *
 * aws_sigv4.c
 *		AWS Signature Version 4 (HMAC-SHA256), header and presigned-query
 *		forms, and its Google Cloud Storage dialect (V4 signing with HMAC
 *		keys, GOOG4-HMAC-SHA256).
 *
 * Built from the published algorithm and checked against every case of
 * the AWS SigV4 test suite (test/unit/io_test.c) and the canonical
 * requests and strings to sign of Google's V4 signing conformance cases
 * (test/unit/gcs_test.c).  The two differ only in names (IoSigV4Dialect):
 * the algorithm, the prefix of the signing key, the scope's terminator,
 * the x-amz- / x-goog- headers and the X-Amz- / X-Goog- query parameters
 * (https://cloud.google.com/storage/docs/authentication/signatures).  libcurl's own
 * CURLOPT_AWS_SIGV4 is not used: it signs the query string as written,
 * without the canonical sorting and encoding the algorithm requires.
 *
 * Canonical request:
 *		METHOD \n canonical URI \n canonical query \n canonical headers \n
 *		\n signed headers \n payload hash
 * where the URI is optionally normalised (dot segments, duplicate slashes)
 * and encoded a second time for non-S3 services; query parameters are
 * decoded, re-encoded per RFC 3986 and sorted by name then value; header
 * names are lowercased, values trimmed with inner whitespace runs
 * collapsed, repeated headers joined with ',' in order, sorted by name.
 *
 * src/io/http/aws_sigv4.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "io/io_int.h"

/* See io.h. */
const IoSigV4Dialect io_sigv4_aws = {
	"AWS4-HMAC-SHA256", "AWS4", "aws4_request", "x-amz", "X-Amz"
};
const IoSigV4Dialect io_sigv4_goog = {
	"GOOG4-HMAC-SHA256", "GOOG4", "goog4_request", "x-goog", "X-Goog"
};

/* The dialect of a signing input: AWS unless it names another. */
#define DIALECT(in) ((in)->dialect != NULL ? (in)->dialect : &io_sigv4_aws)

typedef struct SigParam
{
	char	   *key;			/* encoded */
	char	   *value;			/* encoded */
} SigParam;

typedef struct SigHeader
{
	char	   *name;			/* lowercase */
	char	   *value;			/* canonical value */
	size_t		order;			/* input position, for a stable sort */
} SigHeader;

static int
param_cmp(const void *a, const void *b)
{
	const SigParam *pa = a;
	const SigParam *pb = b;
	int			c = strcmp(pa->key, pb->key);

	return c != 0 ? c : strcmp(pa->value, pb->value);
}

static int
header_cmp(const void *a, const void *b)
{
	const SigHeader *ha = a;
	const SigHeader *hb = b;
	int			c = strcmp(ha->name, hb->name);

	if (c != 0)
		return c;
	return ha->order < hb->order ? -1 : ha->order > hb->order;
}

/* Trim and collapse every run of whitespace (incl. folded lines) to one space. */
static char *
canonical_header_value(const char *v)
{
	size_t		n = strlen(v);
	char	   *out = io_malloc(n + 1);
	size_t		j = 0;
	bool		pending_space = false;

	if (out == NULL)
		return NULL;
	for (; *v; v++)
	{
		if (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r')
		{
			pending_space = (j > 0);
			continue;
		}
		if (pending_space)
			out[j++] = ' ';
		pending_space = false;
		out[j++] = *v;
	}
	out[j] = '\0';
	return out;
}

/*
 * Remove dot segments and merge duplicate slashes (RFC 3986 5.2.4 plus
 * slash merging).  Returns malloc'd text.
 */
static char *
normalize_path(const char *path)
{
	size_t		n = strlen(path);
	const char **segs;
	size_t	   *lens;
	size_t		nseg = 0;
	const char *p = path;
	bool		trailing = false;
	IoStrBuf	sb;
	size_t		i;

	segs = io_malloc((n + 1) * sizeof(char *));
	lens = io_malloc((n + 1) * sizeof(size_t));
	if (segs == NULL || lens == NULL)
	{
		io_free(segs);
		io_free(lens);
		return NULL;
	}
	while (*p)
	{
		const char *start;
		size_t		len;

		while (*p == '/')
			p++;
		if (*p == '\0')
		{
			trailing = true;
			break;
		}
		start = p;
		while (*p && *p != '/')
			p++;
		len = (size_t) (p - start);
		trailing = false;
		if (len == 1 && start[0] == '.')
			trailing = true;
		else if (len == 2 && start[0] == '.' && start[1] == '.')
		{
			if (nseg > 0)
				nseg--;
			trailing = true;
		}
		else
		{
			segs[nseg] = start;
			lens[nseg] = len;
			nseg++;
		}
		if (*p == '\0')
			break;
	}
	io_sb_init(&sb);
	for (i = 0; i < nseg; i++)
	{
		io_sb_putc(&sb, '/');
		io_sb_append(&sb, segs[i], lens[i]);
	}
	if (nseg == 0 || trailing)
		io_sb_putc(&sb, '/');
	io_free(segs);
	io_free(lens);
	return io_sb_steal(&sb);
}

/* Parse and canonicalise a raw query into a sorted array of params. */
static int
parse_query(const char *query, SigParam **out, size_t *nout)
{
	SigParam   *params = NULL;
	size_t		n = 0,
				cap = 0;
	const char *p = query;

	*out = NULL;
	*nout = 0;
	if (query == NULL || *query == '\0')
		return 0;
	while (p != NULL)
	{
		const char *amp = strchr(p, '&');
		size_t		len = amp ? (size_t) (amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t		klen = eq ? (size_t) (eq - p) : len;
		char	   *k,
				   *v;

		if (len > 0)
		{
			if (n == cap)
			{
				SigParam   *np;

				cap = cap ? cap * 2 : 8;
				np = io_realloc(params, cap * sizeof(SigParam));
				if (np == NULL)
					goto oom;
				params = np;
			}
			k = io_uri_decode(p, klen);
			v = eq ? io_uri_decode(eq + 1, len - klen - 1) : io_strdup("");
			params[n].key = k ? io_uri_encode(k, strlen(k), false) : NULL;
			params[n].value = v ? io_uri_encode(v, strlen(v), false) : NULL;
			io_free(k);
			io_free(v);
			n++;
			if (params[n - 1].key == NULL || params[n - 1].value == NULL)
				goto oom;
		}
		p = amp ? amp + 1 : NULL;
	}
	if (n > 1)					/* "&" alone leaves params NULL */
		qsort(params, n, sizeof(SigParam), param_cmp);
	*out = params;
	*nout = n;
	return 0;

oom:
	while (n > 0)
	{
		n--;
		io_free(params[n].key);
		io_free(params[n].value);
	}
	io_free(params);
	return -1;
}

static void
free_params(SigParam *p, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		io_free(p[i].key);
		io_free(p[i].value);
	}
	io_free(p);
}

static void
free_headers(SigHeader *h, size_t n)
{
	size_t		i;

	for (i = 0; i < n; i++)
	{
		io_free(h[i].name);
		io_free(h[i].value);
	}
	io_free(h);
}

static void
hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t		i;

	for (i = 0; i < n; i++)
	{
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static bool
hmac256(const void *key, size_t keylen, const char *msg, unsigned char *out)
{
	unsigned int len = 32;

	return HMAC(EVP_sha256(), key, (int) keylen, (const unsigned char *) msg,
				strlen(msg), out, &len) != NULL;
}

/* Add one header to the array (name lowercased, value canonicalised). */
static bool
add_header(SigHeader *h, size_t *n, const char *name, const char *value)
{
	size_t		i;
	char	   *lname = io_strdup(name);
	char	   *cval = canonical_header_value(value);

	if (lname == NULL || cval == NULL)
	{
		io_free(lname);
		io_free(cval);
		return false;
	}
	for (i = 0; lname[i]; i++)
		lname[i] = (char) tolower((unsigned char) lname[i]);
	/* header names are trimmed too ("Name :value" style input) */
	while (i > 0 && (lname[i - 1] == ' ' || lname[i - 1] == '\t'))
		lname[--i] = '\0';
	h[*n].name = lname;
	h[*n].value = cval;
	h[*n].order = *n;
	(*n)++;
	return true;
}

static bool
add_out_header(IoSigV4Output *out, const char *name, const char *value)
{
	IoKeyValue *kv = &out->add_headers[out->nadd_headers];

	kv->key = io_strdup(name);
	kv->value = io_strdup(value);
	if (kv->key == NULL || kv->value == NULL)
	{
		io_free(kv->key);
		io_free(kv->value);
		return false;
	}
	out->nadd_headers++;
	return true;
}

/* See io.h. */
bool
io_sigv4_scope_valid(const char *s)
{
	size_t		n = 0;

	for (; s[n] != '\0'; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
			  (s[n] >= '0' && s[n] <= '9') || s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return false;
	return n > 0 && n <= 64;
}

/* Free a signing result; what holds a token is wiped. */
void
io_sigv4_free(IoSigV4Output *out)
{
	size_t		i;

	if (out == NULL)
		return;
	/* its canonical headers hold the session token (and a bearer token) */
	io_wipe_free(out->canonical_request);
	io_free(out->string_to_sign);
	io_free(out->signed_headers);
	io_free(out->presigned_query);
	for (i = 0; i < out->nadd_headers; i++)
	{
		io_free(out->add_headers[i].key);
		io_wipe_free(out->add_headers[i].value);
	}
	io_free(out->add_headers);
	memset(out, 0, sizeof(*out));
}

/*
 * The canonical URI: the path, normalised if asked ("/" when empty), then
 * encoded a second time if asked.  NULL when out of memory.
 */
static char *
sig_canonical_uri(const IoSigV4Input *in)
{
	char	   *path;
	char	   *enc_path;

	path = in->normalize_path ? normalize_path(in->path) : io_strdup(in->path);
	if (path == NULL)
		return NULL;
	if (path[0] == '\0')
	{
		io_free(path);
		path = io_strdup("/");
		if (path == NULL)
			return NULL;
	}
	enc_path = in->double_encode_path ?
		io_uri_encode(path, strlen(path), true) : io_strdup(path);
	io_free(path);
	return enc_path;
}

/*
 * The headers signed, sorted by name: the caller's plus the ones the
 * algorithm adds in the header form, into *hdrs and *nhdrs (which the
 * caller frees, also on failure), and their distinct names joined with
 * ';' into signed_hdrs.  False when out of memory.
 */
static bool
sig_headers(const IoSigV4Input *in, bool token, SigHeader **hdrs, size_t *nhdrs,
			IoStrBuf *signed_hdrs)
{
	SigHeader  *h;
	size_t		i;

	h = *hdrs = io_calloc(in->nheaders + 4, sizeof(SigHeader));
	if (h == NULL)
		return false;
	for (i = 0; i < in->nheaders; i++)
		if (!add_header(h, nhdrs, in->headers[i].name, in->headers[i].value))
			return false;
	if (!in->query_mode)
	{
		const char *hp = DIALECT(in)->header_prefix;
		char		name[64];

		snprintf(name, sizeof(name), "%s-date", hp);
		if (!add_header(h, nhdrs, name, in->amz_date))
			return false;
		snprintf(name, sizeof(name), "%s-security-token", hp);
		if (token && in->sign_session_token &&
			!add_header(h, nhdrs, name, in->session_token))
			return false;
		snprintf(name, sizeof(name), "%s-content-sha256", hp);
		if (in->add_content_sha256 &&
			!add_header(h, nhdrs, name, in->payload_hash))
			return false;
	}
	qsort(h, *nhdrs, sizeof(SigHeader), header_cmp);
	for (i = 0; i < *nhdrs; i++)
	{
		if (i > 0 && strcmp(h[i].name, h[i - 1].name) == 0)
			continue;
		if (signed_hdrs->len > 0)
			io_sb_putc(signed_hdrs, ';');
		io_sb_puts(signed_hdrs, h[i].name);
	}
	return !signed_hdrs->oom;
}

/*
 * The canonical query into query: the caller's parameters plus, in the
 * presigned form, the presigning ones, decoded, re-encoded and sorted.
 * False when out of memory.
 */
static bool
sig_canonical_query(const IoSigV4Input *in, bool token, const char *credential,
					const IoStrBuf *signed_hdrs, IoStrBuf *query)
{
	SigParam   *params = NULL;
	size_t		nparams = 0;
	IoStrBuf	raw;
	char	   *enc;
	size_t		i;

	io_sb_init(&raw);
	if (in->query != NULL)
		io_sb_puts(&raw, in->query);
	if (in->query_mode)
	{
		char	   *c = io_uri_encode(credential, strlen(credential), false);
		char	   *s = io_uri_encode(signed_hdrs->data, signed_hdrs->len, false);
		const char *pp = DIALECT(in)->param_prefix;

		if (raw.len > 0)
			io_sb_putc(&raw, '&');
		io_sb_printf(&raw,
					 "%s-Algorithm=%s&%s-Credential=%s"
					 "&%s-Date=%s&%s-Expires=%ld&%s-SignedHeaders=%s",
					 pp, DIALECT(in)->algorithm, pp, c ? c : "",
					 pp, in->amz_date, pp, in->expires_seconds,
					 pp, s ? s : "");
		if (c == NULL || s == NULL)
			raw.oom = true;
		io_free(c);
		io_free(s);
		if (token && in->sign_session_token)
		{
			enc = io_uri_encode(in->session_token,
								strlen(in->session_token), false);
			if (enc == NULL)
				raw.oom = true;
			io_sb_printf(&raw, "&%s-Security-Token=%s", DIALECT(in)->param_prefix,
						 enc ? enc : "");
			io_free(enc);
		}
	}
	if (raw.oom || parse_query(raw.data ? raw.data : "", &params, &nparams) != 0)
	{
		io_sb_free(&raw);
		free_params(params, nparams);
		return false;
	}
	io_sb_free(&raw);
	for (i = 0; i < nparams; i++)
	{
		if (i > 0)
			io_sb_putc(query, '&');
		io_sb_printf(query, "%s=%s", params[i].key, params[i].value);
	}
	if (query->data == NULL)
		io_sb_puts(query, "");
	free_params(params, nparams);
	return true;
}

/*
 * The canonical request: method, URI, query, headers (repeated ones
 * joined with ','), signed header names and payload hash.  NULL when out
 * of memory.
 */
static char *
sig_canonical_request(const IoSigV4Input *in, const char *enc_path,
					  const IoStrBuf *query, const SigHeader *hdrs, size_t nhdrs,
					  const IoStrBuf *signed_hdrs)
{
	IoStrBuf	sb;
	size_t		i;

	io_sb_init(&sb);
	io_sb_printf(&sb, "%s\n%s\n%s\n", in->method, enc_path, query->data ? query->data : "");
	for (i = 0; i < nhdrs; i++)
	{
		if (i > 0 && strcmp(hdrs[i].name, hdrs[i - 1].name) == 0)
		{
			io_sb_printf(&sb, ",%s", hdrs[i].value);
			continue;
		}
		if (i > 0)
			io_sb_putc(&sb, '\n');
		io_sb_printf(&sb, "%s:%s", hdrs[i].name, hdrs[i].value);
	}
	io_sb_printf(&sb, "\n\n%s\n%s", signed_hdrs->data, in->payload_hash);
	return io_sb_steal(&sb);
}

/*
 * The signing key (from the secret key, date, region and service) and the
 * signature of string_to_sign with it, hex-encoded into signature (65
 * bytes); the key material is wiped.  False when out of memory.
 */
static bool
sig_signature(const IoSigV4Input *in, const char *date8, const char *string_to_sign,
			  char *signature)
{
	IoStrBuf	sb;
	unsigned char k1[32],
				k2[32],
				k3[32],
				k4[32],
				sig[32];
	char	   *kdate;

	io_sb_init(&sb);
	io_sb_printf(&sb, "%s%s", DIALECT(in)->key_prefix, in->secret_access_key);
	kdate = io_sb_steal(&sb);
	if (kdate == NULL ||
		!hmac256(kdate, strlen(kdate), date8, k1) ||
		!hmac256(k1, 32, in->region, k2) ||
		!hmac256(k2, 32, in->service, k3) ||
		!hmac256(k3, 32, DIALECT(in)->terminator, k4) ||
		!hmac256(k4, 32, string_to_sign, sig))
	{
		if (kdate != NULL)
		{
			memset(kdate, 0, strlen(kdate));
			io_free(kdate);
		}
		return false;
	}
	memset(kdate, 0, strlen(kdate));
	io_free(kdate);
	memset(k1, 0, sizeof(k1));
	memset(k2, 0, sizeof(k2));
	memset(k3, 0, sizeof(k3));
	memset(k4, 0, sizeof(k4));
	hex_encode(sig, 32, signature);
	return true;
}

/*
 * The presigned form's result: the canonical query with the signature
 * (and an unsigned session token) appended.  False when out of memory.
 */
static bool
sig_presigned_query(const IoSigV4Input *in, bool token, const IoStrBuf *query,
					IoSigV4Output *out)
{
	IoStrBuf	sb;

	io_sb_init(&sb);
	io_sb_printf(&sb, "%s&%s-Signature=%s", query->data, DIALECT(in)->param_prefix,
				 out->signature);
	if (token && !in->sign_session_token)
	{
		char	   *enc = io_uri_encode(in->session_token,
										strlen(in->session_token), false);

		if (enc == NULL)
		{
			io_sb_free(&sb);
			return false;
		}
		io_sb_printf(&sb, "&%s-Security-Token=%s", DIALECT(in)->param_prefix, enc);
		io_free(enc);
	}
	out->presigned_query = io_sb_steal(&sb);
	return out->presigned_query != NULL;
}

/*
 * The header form's result: the headers to add to the request (date,
 * session token, payload hash, Authorization).  False when out of memory.
 */
static bool
sig_auth_headers(const IoSigV4Input *in, bool token, const char *credential,
				 IoSigV4Output *out)
{
	IoStrBuf	sb;
	char	   *p;
	const IoSigV4Dialect *d = DIALECT(in);
	char		name[64];

	out->add_headers = io_calloc(4, sizeof(IoKeyValue));
	if (out->add_headers == NULL)
		return false;
	snprintf(name, sizeof(name), "%s-Date", d->param_prefix);
	if (!add_out_header(out, name, in->amz_date))
		return false;
	snprintf(name, sizeof(name), "%s-Security-Token", d->param_prefix);
	if (token && !add_out_header(out, name, in->session_token))
		return false;
	snprintf(name, sizeof(name), "%s-content-sha256", d->header_prefix);
	if (in->add_content_sha256 &&
		!add_out_header(out, name, in->payload_hash))
		return false;
	io_sb_init(&sb);
	io_sb_printf(&sb, "%s Credential=%s, SignedHeaders=%s, Signature=%s",
				 d->algorithm, credential, out->signed_headers, out->signature);
	p = io_sb_steal(&sb);
	if (p == NULL || !add_out_header(out, "Authorization", p))
	{
		io_free(p);
		return false;
	}
	io_free(p);
	return true;
}

/*
 * Sign a request (see io.h).  Every output string is malloc'd into *out;
 * on failure *out is left empty.
 */
int
io_sigv4_sign(const IoSigV4Input *in, IoSigV4Output *out, TmsError *err)
{
	SigHeader  *hdrs = NULL;
	size_t		nhdrs = 0;
	char	   *enc_path = NULL;
	char		date8[9];
	char	   *scope = NULL;
	char	   *credential = NULL;
	IoStrBuf	sb;
	IoStrBuf	query;
	IoStrBuf	signed_hdrs;
	char		creq_hash[65];
	bool		token = in->session_token != NULL && in->session_token[0] != '\0';

	memset(out, 0, sizeof(*out));
	io_sb_init(&sb);
	io_sb_init(&query);
	io_sb_init(&signed_hdrs);

	if (in->method == NULL || in->path == NULL || in->amz_date == NULL ||
		strlen(in->amz_date) != 16 || in->access_key_id == NULL ||
		in->secret_access_key == NULL || in->region == NULL ||
		in->service == NULL || in->payload_hash == NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "incomplete signing input");
	memcpy(date8, in->amz_date, 8);
	date8[8] = '\0';

	/* canonical URI */
	enc_path = sig_canonical_uri(in);
	if (enc_path == NULL)
		goto oom;

	/* scope and credential */
	io_sb_printf(&sb, "%s/%s/%s/%s", date8, in->region, in->service,
				 DIALECT(in)->terminator);
	scope = io_sb_steal(&sb);
	io_sb_printf(&sb, "%s/%s", in->access_key_id, scope ? scope : "");
	credential = io_sb_steal(&sb);
	if (scope == NULL || credential == NULL)
		goto oom;

	/* headers: caller's plus the ones the algorithm adds */
	if (!sig_headers(in, token, &hdrs, &nhdrs, &signed_hdrs))
		goto oom;

	/* query: caller's plus the presigning parameters */
	if (!sig_canonical_query(in, token, credential, &signed_hdrs, &query))
		goto oom;

	/* canonical request */
	out->canonical_request = sig_canonical_request(in, enc_path, &query, hdrs, nhdrs,
												   &signed_hdrs);
	if (out->canonical_request == NULL)
		goto oom;

	/* string to sign */
	io_sha256_hex(out->canonical_request, strlen(out->canonical_request), creq_hash);
	io_sb_printf(&sb, "%s\n%s\n%s\n%s", DIALECT(in)->algorithm, in->amz_date, scope,
				 creq_hash);
	out->string_to_sign = io_sb_steal(&sb);
	if (out->string_to_sign == NULL)
		goto oom;

	/* signing key and signature */
	if (!sig_signature(in, date8, out->string_to_sign, out->signature))
		goto oom;
	out->signed_headers = io_sb_steal(&signed_hdrs);
	if (out->signed_headers == NULL)
		goto oom;

	if (in->query_mode)
	{
		if (!sig_presigned_query(in, token, &query, out))
			goto oom;
	}
	else if (!sig_auth_headers(in, token, credential, out))
		goto oom;

	io_free(enc_path);
	io_free(scope);
	io_free(credential);
	free_headers(hdrs, nhdrs);
	io_sb_free(&query);
	return 0;

oom:
	io_free(enc_path);
	io_free(scope);
	io_free(credential);
	free_headers(hdrs, nhdrs);
	io_sb_free(&sb);
	io_sb_free(&query);
	io_sb_free(&signed_hdrs);
	io_sigv4_free(out);
	return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory while signing a request");
}
