/*-------------------------------------------------------------------------
 *
 * gcs_auth.h
 *		Google service account keys: the JSON key file, the RS256-signed
 *		JWT of the OAuth2 JWT bearer grant (RFC 7523) and the access
 *		token it is exchanged for at the key's token_uri (gcs_auth.c).
 *
 * Rules: the private key is wiped when freed, and neither it nor a token
 * nor the signed assertion ever appears in an TmsError; a key file whose
 * fields are missing is refused with the field's name only.
 *
 * Private to src/io/ (its unit test too), as io_int.h.
 *
 * src/io/http/gcs_auth.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_GCS_AUTH_H
#define TMS_IO_GCS_AUTH_H

#include <time.h>

#include "io/http/oauth2.h"

/* The scope tms asks for: reading, writing and deleting objects. */
#define IO_GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"

/* The lifetime of an assertion (Google accepts at most an hour). */
#define IO_GCS_JWT_LIFETIME_S 3600

/* What tms uses of a service account key file. */
typedef struct IoGcsServiceAccount
{
	char	   *client_email;
	char	   *token_uri;		/* http:// or https:// */
	char	   *private_key_id; /* NULL: none (no "kid" in the JWT) */
	char	   *private_key;	/* PEM (PKCS#8 or PKCS#1), wiped when freed */
} IoGcsServiceAccount;

/*
 * Parse a key file's JSON text: "type" "service_account", "client_email",
 * "private_key" (PEM), "token_uri" (http:// or https://), optionally
 * "private_key_id".  NULL with *err (IO_ERR_INVALID_ARGUMENT naming the
 * field, never its value) on failure.
 */
extern IoGcsServiceAccount *io_gcs_sa_parse(const char *json, size_t len,
											TmsError *err);
extern void io_gcs_sa_free(IoGcsServiceAccount *sa);

/* base64url without padding (RFC 7515, 2) of data; malloc'd or NULL. */
extern char *io_base64url(const void *data, size_t len);

/*
 * RSASSA-PKCS1-v1_5 with SHA-256 (RS256) of data with the PEM private
 * key: *sig (malloc'd) and *siglen.  0, or -1 with *err (a key OpenSSL
 * cannot read, or not RSA).
 */
extern int	io_rs256_sign(const char *pem, const void *data, size_t len,
						  unsigned char **sig, size_t *siglen, TmsError *err);

/*
 * The signed JWT (header.claims.signature) asserting sa for scope at now:
 * {"alg":"RS256","typ":"JWT"[,"kid":...]} and {"iss":client_email,
 * "scope":scope,"aud":token_uri,"iat":now,"exp":now+IO_GCS_JWT_LIFETIME_S}.
 * 0 with *jwt (malloc'd; wipe it) or -1 with *err.
 */
extern int	io_gcs_jwt(const IoGcsServiceAccount *sa, const char *scope, time_t now,
					   char **jwt, TmsError *err);

/*
 * A usable token of sa in *tok: the cached one while fresh (unless
 * force), else a new one from the key's token_uri (the JWT bearer grant).
 * 0, or -1 with *err.
 */
extern int	io_gcs_sa_token(const IoGcsServiceAccount *sa, const IoHttpOptions *http,
							IoOAuth2Token *tok, bool force, TmsError *err);

#endif							/* TMS_IO_GCS_AUTH_H */
