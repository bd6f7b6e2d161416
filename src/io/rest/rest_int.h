/*-------------------------------------------------------------------------
 *
 * rest_int.h
 *		What the files of the Iceberg REST catalog client share: the
 *		handle, its table cache, the request core, and the readers that
 *		turn a response body into values (exposed so that the unit test
 *		and the fuzz target, make fuzz-rest, can call them without a
 *		network).
 *
 * The client is split by concern:
 *	rest.c			the handle, /v1/config, errors, the request core,
 *					names and paths
 *	rest_auth.c		the headers of a request: OAuth2 tokens (the grant of
 *					oauth2.c, shared with the engine clients) and AWS
 *					SigV4 signing
 *	rest_list.c		namespace and table listings (one pager), creating a
 *					namespace
 *	rest_table.c	load, commit, drop and rename of one table, its vended
 *					credentials, the table cache
 *	rest_batch.c	many loads at once (io_catalog_load_tables_etag)
 *
 * Not part of the layer's interface (that is io.h); nothing outside
 * src/io/, its unit test and its fuzz targets includes this file.  Every
 * reader parses under the handle's JSON budget (max_json_bytes) and
 * reports failure as a TmsError; none keeps a pointer into the body.
 *
 * src/io/rest/rest_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_REST_INT_H
#define TMS_IO_REST_INT_H

#include <jansson.h>

#include "io/io_int.h"
#include "io/http/oauth2.h"

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

	/* SigV4 (rest_auth.c): signing_region NULL when requests go unsigned */
	char	   *signing_region;
	char	   *signing_name;
	char	   *aws_access_key_id;
	char	   *aws_secret_access_key;
	char	   *aws_session_token;

	IoOAuth2Token oauth;		/* the current OAuth2 token (oauth2.h) */

	IoKeyValue *props;
	size_t		nprops;
	IoStringList endpoints;
	char	   *prefix;			/* effective, "" when none */
	int64_t		idem_lifetime_ms;	/* idempotency-key-lifetime; 0: none */
	uint64_t	requests;

	TableCacheEntry *cache;
	int			ncache;

	/*
	 * What the catalog keeps for later (its OAuth2 token, its table cache) is
	 * allocated with this, the allocator current when it was opened, never
	 * with the one current during the call that fills it (io_memory.h).
	 */
	const IoAllocator *alloc;
};

/* What a 404 means, and whether 409 and 5xx are commit outcomes. */
typedef enum RestCallKind
{
	REST_CALL_GENERIC,
	REST_CALL_NAMESPACE,		/* 404 defaults to no such namespace */
	REST_CALL_TABLE,			/* 404 defaults to no such table */
	REST_CALL_COMMIT
} RestCallKind;

/* ---- rest.c: the handle, errors, requests, names ---- */


/* Free n key/value pairs, values wiped. */
extern void io_rest_kv_free(IoKeyValue *kv, size_t n);

/*
 * Add key=value to a key/value array, or replace the value of key (the old
 * value is wiped).  Returns 0, or -1 out of memory with the array
 * unchanged.
 */
extern int	io_rest_kv_put(IoKeyValue **arr, size_t *n, const char *key,
						   const char *value);

/*
 * Reader of error bodies: fill *err from a non-success response.  The
 * ErrorModel {"error": {"message", "type", "code"}}, an OAuth error
 * {"error", "error_description"}, or AWS's {"message"} with its type in
 * "__type" or the x-amzn-ErrorType header (only the message's first line)
 * becomes the detail "type: message"; a body that is not JSON, its first
 * 200 bytes.  kind says what a 404 means; a 403 whose AWS type says the
 * signature or the keys were refused (InvalidSignatureException,
 * UnrecognizedClientException, ...) is IO_ERR_UNAUTHORIZED, any other 403
 * IO_ERR_FORBIDDEN.  Always returns -1.
 */
extern int	io_rest_status_error(const IoHttpResponse *resp, RestCallKind kind,
								 const char *what, size_t max_json, TmsError *err);

/*
 * Send a catalog request: path is below the base URI ("v1/..."), already
 * encoded.  Adds the bearer token and retries once with a fresh token
 * after a 401 when client credentials are configured.  0 with *resp (any
 * status), or -1 with *err; *resp is to be freed either way.
 */
extern int	io_rest_request(IoCatalog *cat, const char *method, const char *path,
							const char *body, const char *const *extra,
							size_t nextra, bool idempotent,
							IoHttpResponse *resp, TmsError *err);

/*
 * Parse a 200 response body as a JSON object under the max_json budget:
 * the document, or NULL with *err (PROTOCOL when malformed or not an
 * object, TOO_LARGE when over the budget).
 */
extern json_t *io_rest_parse_body(const char *body, size_t len, const char *what,
								  size_t max_json, TmsError *err);

/* Append "v1/" or "v1/<prefix>/". */
extern void io_rest_v1_path(IoCatalog *cat, IoStrBuf *sb);

/* Append s percent-encoded ('/' too). */
extern void io_rest_append_encoded(IoStrBuf *sb, const char *s);

/* Append "namespaces/<ns>" with the levels encoded (%1F between). */
extern void io_rest_append_ns(IoStrBuf *sb, const char *ns);

/*
 * Check a namespace (levels joined by IO_NS_SEP) and, when table is not
 * NULL, a table name: no empty name or level, no "." or "..", none longer
 * than IO_MAX_NAME_BYTES.  Returns 0, or -1 with *err (INVALID_ARGUMENT).
 */
extern int	io_rest_check_ident(const char *ns, const char *table, TmsError *err);

/*
 * True when the server offers "METHOD /v1/{prefix}/<rest>": its
 * "endpoints", or the spec's default set when it sent none.
 */
extern bool io_rest_endpoint_offered(IoCatalog *cat, const char *endpoint);

/*
 * POST a change (body: JSON) to path, never retried (a lost answer would
 * make a retry report a false 404 or 409); 200 and 204 are success, other
 * statuses read as kind says.  Frees both buffers.  0, or -1 with *err.
 */
extern int	io_rest_post_change(IoCatalog *cat, IoStrBuf *path, IoStrBuf *body,
								RestCallKind kind, const char *what, TmsError *err);

/* Append s as a JSON string; a namespace (IO_NS_SEP levels) as a JSON array. */
extern void io_rest_append_json_string(IoStrBuf *sb, const char *s);
extern void io_rest_append_json_ns(IoStrBuf *sb, const char *ns);

/*
 * Reader of /v1/config: merge defaults < client properties (warehouse) <
 * overrides into cat->props, take "endpoints", and settle the effective
 * prefix (the configured one, else the server's "prefix" property), and
 * the top-level "idempotency-key-lifetime" (an ISO-8601 duration; absent
 * or unreadable: none, so commits send no Idempotency-Key and are never
 * retried).  Replaces what an earlier call set.  Returns 0 or -1 with *err.
 */
extern int	io_rest_read_config(IoCatalog *cat, const char *body, size_t len,
								TmsError *err);

/* ---- rest_auth.c: OAuth2, SigV4, the headers of a request ---- */

/*
 * The headers of one attempt of a catalog request to url (method, body
 * NULL or the JSON text sent, extra "Name: value" lines such as
 * If-None-Match), into *out ("Name: value" lines, malloc'd; free them
 * with io_string_list_wipe, as they carry tokens): Accept, Content-Type
 * with a body, the extra lines, and the bearer token of the handle if it
 * has one.  When the handle signs (signing_region), the request is then
 * signed with AWS SigV4 at time now, as Iceberg's RESTSigV4AuthSession
 * signs: the bearer token moves to Original-Authorization, and every
 * header so far, Host, X-Amz-Date, x-amz-content-sha256 (the body's
 * sha256) and X-Amz-Security-Token (with a session token) are signed;
 * the path is normalised and encoded twice, the query canonicalised.
 * When sig is not NULL it receives the signing details (for tests; free
 * with io_sigv4_free).  Sends nothing: call it for every attempt, so a
 * retry carries a fresh signature.  Returns 0, or -1 with *err (*out
 * then empty).
 */
extern int	io_rest_headers(IoCatalog *cat, const char *method, const char *url,
							const char *body, const char *const *extra,
							size_t nextra, time_t now, IoStringList *out,
							IoSigV4Output *sig, TmsError *err);

/* Fetch a token with the client-credentials grant. */
extern int	io_rest_fetch_token(IoCatalog *cat, TmsError *err);

/* Make sure a usable token is cached when client credentials are set. */
extern int	io_rest_ensure_token(IoCatalog *cat, TmsError *err);

/*
 * Reader of OAuth2 token responses: take "access_token" and "expires_in"
 * into cat (the previous token wiped).  Returns 0 or -1 with *err.
 */
extern int	io_rest_read_token(IoCatalog *cat, const char *body, size_t len,
							   TmsError *err);

/* ---- rest_list.c: listings ---- */

/*
 * Reader of one ListTablesResponse page: its identifiers (*items, *n,
 * each string malloc'd; free with io_rest_free_idents) and the
 * next-page-token (*next, malloc'd, NULL on the last page).  Returns 0 or
 * -1 with *err (nothing to free then).
 */
extern int	io_rest_read_tables_page(const char *body, size_t len, size_t max_json,
									 IoTableIdent **items, size_t *n,
									 char **next, TmsError *err);
extern void io_rest_free_idents(IoTableIdent *items, size_t n);

/*
 * Reader of one ListNamespacesResponse page: appends the namespaces to
 * *out (levels joined by IO_NS_SEP) and sets *next like the tables
 * reader.  Returns 0 or -1 with *err (*out keeps what it had).
 */
extern int	io_rest_read_namespaces_page(const char *body, size_t len,
										 size_t max_json, IoStringList *out,
										 char **next, TmsError *err);

/* ---- rest_table.c: one table ---- */

/*
 * Reader of a LoadTableResult (loadTable, commit): metadata-location,
 * metadata (re-serialised, at most max_json bytes), config, then the
 * storage-credentials entry whose prefix is the longest prefix of the
 * table location.  Fills *out (etag untouched); on failure *out is freed
 * and -1 returned with *err.
 */
extern int	io_rest_read_load_result(const char *body, size_t len, size_t max_json,
									 const char *what, IoLoadedTable *out,
									 TmsError *err);

/*
 * Reader of a LoadCredentialsResponse: the config of the storage
 * credential whose prefix is the longest prefix of location (the only one
 * when location is NULL and there is one) into *out.  Returns 0, or -1
 * with *err (PROTOCOL when malformed or when no credential covers the
 * location).
 */
extern int	io_rest_read_credentials(const char *body, size_t len, size_t max_json,
									 const char *location, IoTableCredentials *out,
									 TmsError *err);

/* Append the path of a table: "v1/[prefix/]namespaces/<ns>/tables/<t>". */
extern void io_rest_table_path(IoCatalog *cat, IoStrBuf *sb, const char *ns,
							   const char *table);

/*
 * Path ("v1/.../tables/t?snapshots=all") and If-None-Match header (NULL
 * when unconditional) of a load: the handle's cached ETag when its copy is
 * the version the caller knows (or the caller knows none), else
 * known_etag.  Both malloc'd.  Returns 0, or -1 with *err (names checked).
 */
extern int	io_rest_load_request(IoCatalog *cat, const char *ns, const char *table,
								 const char *known_etag, char **path, char **inm,
								 TmsError *err);

/*
 * Turn the response to a load into *out (see io_catalog_load_table_etag);
 * inm is the If-None-Match header that was sent (NULL: none).  Returns 0,
 * or -1 with *err.  resp stays the caller's.
 */
extern int	io_rest_load_response(IoCatalog *cat, const char *ns, const char *table,
								  const char *known_etag, const char *inm,
								  const IoHttpResponse *resp, IoLoadedTable *out,
								  TmsError *err);

#endif							/* TMS_IO_REST_INT_H */
