/*-------------------------------------------------------------------------
 *
 * gcs_auth.c
 *		Google service account keys (gcs_auth.h): the key file, the
 *		RS256-signed JWT of the JWT bearer grant and its exchange for an
 *		access token through the shared OAuth2 client (oauth2.c).
 *
 * The JWT follows https://developers.google.com/identity/protocols/oauth2/
 * service-account#authorizingrequests: a header {"alg":"RS256",
 * "typ":"JWT"}, a claim set naming the account (iss), the scope, the
 * token endpoint (aud) and the times (iat, exp at most an hour later),
 * each base64url-encoded without padding, joined with '.', and the
 * RSASSA-PKCS1-v1_5 SHA-256 signature of the two with the key (OpenSSL).
 *
 * Rules: see gcs_auth.h.  The PEM, the assertion (which grants a token for
 * an hour) and the form body are wiped; errors name fields, never values.
 *
 * src/io/http/gcs_auth.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "io/http/gcs_auth.h"

/* A key file is small: a few kB. */
#define SA_KEY_MAX_JSON (1024 * 1024)

/* See gcs_auth.h. */
void
io_gcs_sa_free(IoGcsServiceAccount *sa)
{
	if (sa == NULL)
		return;
	io_free(sa->client_email);
	io_free(sa->token_uri);
	io_free(sa->private_key_id);
	io_wipe_free(sa->private_key);
	io_free(sa);
}

/* A string field of the key file, copied; NULL when missing or empty. */
static char *
sa_field(json_t *doc, const char *name)
{
	const char *v = json_string_value(json_object_get(doc, name));

	return v != NULL && v[0] != '\0' ? io_strdup(v) : NULL;
}

/* See gcs_auth.h. */
IoGcsServiceAccount *
io_gcs_sa_parse(const char *json, size_t len, TmsError *err)
{
	json_t	   *doc;
	IoGcsServiceAccount *sa;
	const char *type;
	const char *missing = NULL;

	doc = io_json_parse(json, len, SA_KEY_MAX_JSON, "service account key", err);
	if (doc == NULL)
	{
		/* the parser's message may quote the text: say only what it is */
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "the GCS service account key is not a JSON object");
		return NULL;
	}
	sa = io_calloc(1, sizeof(IoGcsServiceAccount));
	if (sa == NULL)
	{
		json_decref(doc);
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	type = json_string_value(json_object_get(doc, "type"));
	if (type == NULL || strcmp(type, "service_account") != 0)
		missing = "type";
	sa->client_email = sa_field(doc, "client_email");
	sa->token_uri = sa_field(doc, "token_uri");
	sa->private_key_id = sa_field(doc, "private_key_id");
	sa->private_key = sa_field(doc, "private_key");
	json_decref(doc);
	if (missing == NULL && sa->client_email == NULL)
		missing = "client_email";
	if (missing == NULL && sa->token_uri == NULL)
		missing = "token_uri";
	if (missing == NULL && sa->private_key == NULL)
		missing = "private_key";
	if (missing != NULL)
	{
		io_gcs_sa_free(sa);
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "the GCS service account key has no \"%s\"%s", missing,
					  strcmp(missing, "type") == 0 ? " \"service_account\"" : "");
		return NULL;
	}
	if (strncmp(sa->token_uri, "http://", 7) != 0 && strncmp(sa->token_uri, "https://", 8) != 0)
	{
		io_gcs_sa_free(sa);
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "the \"token_uri\" of the GCS service account key must start with http:// or https://");
		return NULL;
	}
	if (strstr(sa->private_key, "-----BEGIN") == NULL)
	{
		io_gcs_sa_free(sa);
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "the \"private_key\" of the GCS service account key is not a PEM key");
		return NULL;
	}
	return sa;
}

/* See gcs_auth.h. */
char *
io_base64url(const void *data, size_t len)
{
	size_t		cap = 4 * ((len + 2) / 3) + 1;
	char	   *out = io_malloc(cap);
	int			n;

	if (out == NULL)
		return NULL;
	n = EVP_EncodeBlock((unsigned char *) out, data, (int) len);
	while (n > 0 && out[n - 1] == '=')
		n--;
	out[n] = '\0';
	for (int i = 0; i < n; i++)
	{
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return out;
}

/* See gcs_auth.h. */
int
io_rs256_sign(const char *pem, const void *data, size_t len, unsigned char **sig,
			  size_t *siglen, TmsError *err)
{
	BIO		   *bio;
	EVP_PKEY   *key;
	EVP_MD_CTX *ctx;
	int			rc = -1;

	*sig = NULL;
	*siglen = 0;
	bio = BIO_new_mem_buf(pem, -1);
	if (bio == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (key == NULL || EVP_PKEY_base_id(key) != EVP_PKEY_RSA)
	{
		EVP_PKEY_free(key);
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the \"private_key\" of the GCS service account key is not an RSA private key");
	}
	ctx = EVP_MD_CTX_new();
	if (ctx != NULL &&
		EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
		EVP_DigestSign(ctx, NULL, siglen, data, len) == 1 &&
		(*sig = io_malloc(*siglen)) != NULL &&
		EVP_DigestSign(ctx, *sig, siglen, data, len) == 1)
		rc = 0;
	else
	{
		io_free(*sig);
		*sig = NULL;
		*siglen = 0;
		tms_error_set(err, IO_ERR_INTERNAL, "could not sign the GCS service account assertion");
	}
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(key);
	return rc;
}

/* Append the base64url form of the JSON text of v to sb; false on failure. */
static bool
append_json_b64(IoStrBuf *sb, json_t *v)
{
	char	   *text = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	char	   *b64 = text ? io_base64url(text, strlen(text)) : NULL;

	json_decref(v);
	io_json_free(text);
	if (b64 == NULL)
		return false;
	io_sb_puts(sb, b64);
	io_free(b64);
	return !sb->oom;
}

/* See gcs_auth.h. */
int
io_gcs_jwt(const IoGcsServiceAccount *sa, const char *scope, time_t now, char **jwt,
		   TmsError *err)
{
	IoStrBuf	sb;
	json_t	   *header;
	json_t	   *claims;
	unsigned char *sig = NULL;
	size_t		siglen = 0;
	char	   *sig64;

	*jwt = NULL;
	header = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	if (header != NULL && sa->private_key_id != NULL)
		json_object_set_new(header, "kid", json_string(sa->private_key_id));
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", sa->client_email,
					   "scope", scope, "aud", sa->token_uri,
					   "iat", (json_int_t) now,
					   "exp", (json_int_t) now + IO_GCS_JWT_LIFETIME_S);
	io_sb_init(&sb);
	if (!append_json_b64(&sb, header))
	{
		json_decref(claims);
		io_sb_free(&sb);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	io_sb_putc(&sb, '.');
	if (!append_json_b64(&sb, claims))
	{
		io_sb_free(&sb);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (io_rs256_sign(sa->private_key, sb.data, sb.len, &sig, &siglen, err) != 0)
	{
		io_sb_free(&sb);
		return -1;
	}
	sig64 = io_base64url(sig, siglen);
	io_free(sig);
	io_sb_putc(&sb, '.');
	io_sb_puts(&sb, sig64 ? sig64 : "");
	io_free(sig64);
	if (sig64 == NULL || sb.oom)
	{
		io_sb_wipe_free(&sb);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	*jwt = io_sb_steal(&sb);
	return 0;
}

/*
 * A refusal of the token endpoint: its status only (Google's error body
 * says "invalid_grant" and the like, nothing a secret could hide in, but
 * nothing the user needs either).
 */
static void
token_status_error(void *arg, const IoHttpResponse *resp, const char *what, TmsError *err)
{
	(void) arg;
	tms_error_set_http(err, io_http_status_code(resp->status), resp->status,
					   "%s of the GCS service account failed: HTTP status %ld", what,
					   resp->status);
}

/* See gcs_auth.h. */
int
io_gcs_sa_token(const IoGcsServiceAccount *sa, const IoHttpOptions *http,
				IoOAuth2Token *tok, bool force, TmsError *err)
{
	IoOAuth2Request rq;
	char	   *jwt;
	int			rc;

	if (!force && io_oauth2_fresh(tok))
		return 0;
	if (io_gcs_jwt(sa, IO_GCS_SCOPE, time(NULL), &jwt, err) != 0)
		return -1;
	memset(&rq, 0, sizeof(rq));
	rq.http = http;
	rq.url = sa->token_uri;
	rq.assertion = jwt;
	rq.status_error = token_status_error;
	rc = io_oauth2_fetch(&rq, tok, err);
	io_wipe_free(jwt);
	return rc;
}

/* See io.h. */
int
io_gcs_key_check(const char *json, TmsError *err)
{
	IoGcsServiceAccount *sa = io_gcs_sa_parse(json, strlen(json), err);
	unsigned char *sig;
	size_t		siglen;
	int			rc;

	if (sa == NULL)
		return -1;
	/* a key OpenSSL can sign with */
	rc = io_rs256_sign(sa->private_key, "tms", 3, &sig, &siglen, err);
	io_free(sig);
	io_gcs_sa_free(sa);
	return rc;
}
