/*-------------------------------------------------------------------------
 *
 * oauth2.h
 *		The OAuth2 client-credentials grant (RFC 6749 section 4.4) shared
 *		by the Iceberg REST catalog client (rest/rest_auth.c) and the engine
 *		clients (engines/engine_client.c), and the JWT bearer grant (RFC
 *		7523) of Google service accounts (http/gcs_auth.c): the token
 *		request, the reader of token responses, the token cache and its
 *		expiry.
 *
 * The caller says where to ask (an absolute URL), with which credentials
 * and scope, and how a refused request becomes a TmsError (each client
 * has its own error shapes); everything else is here, once.
 *
 * Rules: the form body (it holds the client secret) is wiped before it
 * is freed, the token is wiped when replaced or forgotten, and neither
 * ever appears in a TmsError.  An "access_token" that is empty or holds
 * CR or LF (it goes into a header line) is refused; "expires_in" is
 * trusted up to IO_OAUTH2_MAX_LIFETIME_S, and a cached token is renewed
 * IO_OAUTH2_REFRESH_MARGIN_MS before it expires.
 *
 * Private to src/io/ (its unit test and fuzz targets too), as io_int.h.
 *
 * src/io/http/oauth2.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_OAUTH2_H
#define TMS_IO_OAUTH2_H

#include "io/io_int.h"

/* Renew a cached token this long before it expires. */
#define IO_OAUTH2_REFRESH_MARGIN_MS	60000

/* The longest token lifetime believed (a year): no overflow, no forever. */
#define IO_OAUTH2_MAX_LIFETIME_S	(365 * 24 * 3600)

/* A cached token; all zero: none yet. */
typedef struct IoOAuth2Token
{
	char	   *token;			/* the current token, NULL: none */
	int64_t		expires_ms;		/* monotonic; 0: no known expiry */
	uint64_t	fetches;		/* tokens fetched so far */
} IoOAuth2Token;

/*
 * How a non-200 answer of the token endpoint becomes *err (the client's
 * own error shapes); the status 400, 401 and 403 are then reported as
 * IO_ERR_UNAUTHORIZED whatever the callback chose.
 */
typedef void (*IoOAuth2StatusError) (void *arg, const IoHttpResponse *resp,
									 const char *what, TmsError *err);

/* One token request: where, with what, and how a refusal is reported. */
typedef struct IoOAuth2Request
{
	const IoHttpOptions *http;
	const char *url;			/* the token endpoint, absolute */
	const char *client_id;
	const char *client_secret;
	const char *scope;			/* NULL: no scope parameter */
	const char *assertion;		/* non-NULL: the JWT bearer grant with this
								 * signed JWT, client_id, client_secret and
								 * scope unused */
	IoOAuth2StatusError status_error;
	void	   *arg;			/* status_error's first argument */
	uint64_t   *requests;		/* incremented per HTTP request, or NULL */
} IoOAuth2Request;

/* Ask for a new token and cache it in *tok.  Returns 0 or -1 with *err. */
extern int	io_oauth2_fetch(const IoOAuth2Request *rq, IoOAuth2Token *tok,
							TmsError *err);

/* True when *tok holds a token that is not about to expire. */
extern bool io_oauth2_fresh(const IoOAuth2Token *tok);

/*
 * Read a token response (the body of a 200): "access_token" and
 * "expires_in" into *tok, the previous token wiped; fetches counted.
 * Returns 0 or -1 with *err.
 */
extern int	io_oauth2_read(IoOAuth2Token *tok, const char *body, size_t len,
						   size_t max_json, TmsError *err);

/* Wipe and drop the cached token (after a 401, or when closing). */
extern void io_oauth2_forget(IoOAuth2Token *tok);

#endif							/* TMS_IO_OAUTH2_H */
