/*-------------------------------------------------------------------------
 *
 * engine_client_int.h
 *		What the files of the engine clients (engine_client.h) share: the handle,
 *		a run's private state, the request core with its authentication,
 *		the reading of error bodies, and the building of result rows.
 *
 * The clients are split by engine:
 *	engine_client.c			the handle, authentication (basic, bearer, OAuth2
 *						client credentials), the request core, errors,
 *						results, io_engine_wait and the dispatch
 *	engine_livy.c		Apache Livy interactive sessions of kind "sql"
 *	engine_trino.c		the Trino client protocol
 *	engine_gravitino.c	Apache Gravitino's jobs API
 *
 * Not part of the layer's interface (that is engine_client.h); nothing outside
 * src/io/, its unit test and its drivers includes this file.  Secrets
 * (password, token, client secret, the OAuth2 token) are wiped before
 * their memory is freed and never appear in a TmsError.
 *
 * src/io/engines/engine_client_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_ENGINE_INT_H
#define TMS_IO_ENGINE_INT_H

#include <jansson.h>

#include "io/engines/engine_client.h"
#include "io/io_int.h"
#include "io/http/oauth2.h"

/* Longest tag accepted (a Livy session name, a Trino client tag). */
#define ENGINE_MAX_TAG_BYTES	200

struct IoEngine
{
	IoEngineType type;
	char	   *uri;			/* without trailing slash */
	char	   *origin;			/* "scheme://host:port", lowercase, port
								 * always given: what a Trino nextUri must
								 * start with */
	char	   *catalog;
	char	   *metalake;
	char	   *user;
	char	   *password;
	char	   *token;
	char	   *client_id;
	char	   *client_secret;
	char	   *oauth_uri;
	char	   *scope;
	char	   *ca_file;
	char	   *ca_path;
	long		poll_interval_ms;
	IoHttpOptions http;

	IoOAuth2Token oauth;		/* the current OAuth2 token (oauth2.h) */
	uint64_t	requests;
};

/* IoEngineRun.priv: one struct for the three engines. */
typedef struct EngineRunPriv
{
	IoEngineType type;
	/* livy */
	char	   *statement;		/* the SQL still to post, NULL: unknown */
	long		session_id;
	long		statement_id;	/* -1: not posted (as far as known) */
	bool		maybe_posted;	/* a post may have reached the session: look
								 * at its statements before posting */
	bool		cancel_requested;
	/* trino */
	char	   *query_id;
	char	   *next_uri;		/* NULL: none (ended, or found/attached) */
	bool		by_query_info;	/* poll GET /v1/query/{id}: rows lost */
	size_t		result_bytes;	/* bytes of the cells collected so far */
	/* gravitino */
	char	   *template_name;
} EngineRunPriv;

/* ---- engine_client.c ---- */


/*
 * Send a request: url is absolute ("http...") or a path below the
 * engine's URI ("/sessions").  Adds Accept (accept; NULL: application/
 * json), the authorization header and Content-Type (content_type, when a
 * body is given), then extra ("Name: value" lines).  An OAuth2 token is
 * fetched when needed and refreshed once after a 401.  idempotent
 * requests are retried by the HTTP core (5xx, 429, connection failures).
 * Returns 0 with *resp (any status), or -1 with *err (resp->sent tells
 * whether the request may have reached the engine).  resp must be freed
 * in both cases.
 */
extern int	io_engine_request(IoEngine *eng, const char *method, const char *url,
							  const char *accept, const char *content_type,
							  const char *body, const char *const *extra,
							  size_t nextra, bool idempotent, const char *what,
							  IoHttpResponse *resp, TmsError *err);

/*
 * A non-success response as a TmsError: the status mapped to a code (a
 * submit's 5xx is IO_ERR_COMMIT_STATE_UNKNOWN), the engine's own text
 * (Livy "msg", Gravitino "type" and "message", Trino's plain text) in
 * detail.  Returns -1.
 */
extern int	io_engine_status_error(IoEngine *eng, const IoHttpResponse *resp,
								   bool submit, const char *what, TmsError *err);

/*
 * After a failed submit request (rc -1 of io_engine_request): when the
 * request may have reached the engine, turn *err into
 * IO_ERR_COMMIT_STATE_UNKNOWN (keeping the cause in the message).
 * Returns -1.
 */
extern int	io_engine_submit_lost(const IoHttpResponse *resp, TmsError *err);

/* Parse a response body under the JSON budget; NULL with *err. */
extern json_t *io_engine_parse(IoEngine *eng, const IoHttpResponse *resp,
							   const char *what, TmsError *err);

/* Serialise a JSON value compactly into malloc'd text (NULL: oom). */
extern char *io_engine_json_dump(const json_t *v);

/* A result cell: strings as they are, numbers as JSON text, null NULL. */
extern int	io_engine_cell_text(const json_t *v, char **out);

/* Set the result columns of run (names copied); -1 on oom. */
extern int	io_engine_set_columns(IoEngineRun *run, const char *const *names,
								  size_t n);

/*
 * Append the rows of data (a JSON array of arrays of ncolumns values) to
 * run, counting their bytes in priv->result_bytes against the
 * max_response_bytes of the handle.  Returns 0, or -1 with *err
 * (PROTOCOL: not rows of the column count; TOO_LARGE).
 */
extern int	io_engine_add_rows(IoEngine *eng, IoEngineRun *run, const json_t *data,
							   const char *what, TmsError *err);

/* Drop the collected result of run. */
extern void io_engine_clear_result(IoEngineRun *run);

/*
 * Set run->message (copied, at most 2000 bytes, control characters but
 * newlines as spaces); -1 on oom.
 */
extern int	io_engine_set_message(IoEngineRun *run, const char *msg);

/* Allocate run->priv for eng's type; -1 with *err on oom. */
extern int	io_engine_run_init(IoEngine *eng, IoEngineRun *run, TmsError *err);

/* Check a tag: 1..ENGINE_MAX_TAG_BYTES printable ASCII, no ','. */
extern int	io_engine_check_tag(const char *tag, TmsError *err);

/* Append s percent-encoded (nothing kept but unreserved characters). */
extern void io_engine_append_encoded(IoStrBuf *sb, const char *s);

/* "scheme://host:port" of an absolute http(s) URL into a malloc'd string,
 * lowercase; NULL when url is not one (userinfo refused). */
extern char *io_engine_url_origin(const char *url);

/* ---- per engine ---- */

extern int	io_livy_submit(IoEngine *eng, const char *tag, const char *statement,
						   const IoKeyValue *session, size_t nsession,
						   IoEngineRun *run, TmsError *err);
extern int	io_livy_poll(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_livy_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_livy_find(IoEngine *eng, const char *tag, const char *statement,
						 IoEngineRun *run, bool *found, TmsError *err);
extern int	io_livy_attach(IoEngine *eng, const char *run_id, const char *statement,
						   IoEngineRun *run, TmsError *err);
extern int	io_livy_close(IoEngine *eng, IoEngineRun *run, TmsError *err);

extern int	io_trino_submit(IoEngine *eng, const char *tag, const char *statement,
							const IoKeyValue *session, size_t nsession,
							IoEngineRun *run, TmsError *err);
extern int	io_trino_poll(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_trino_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_trino_find(IoEngine *eng, const char *tag, IoEngineRun *run,
						  bool *found, TmsError *err);
extern int	io_trino_attach(IoEngine *eng, const char *run_id, IoEngineRun *run,
							TmsError *err);

extern int	io_gravitino_submit(IoEngine *eng, const char *tag, const char *statement,
								IoEngineRun *run, TmsError *err);
extern int	io_gravitino_poll(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_gravitino_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err);
extern int	io_gravitino_find(IoEngine *eng, const char *tag, const char *template_name,
							  IoEngineRun *run, bool *found, TmsError *err);
extern int	io_gravitino_attach(IoEngine *eng, const char *run_id, IoEngineRun *run,
								TmsError *err);
extern int	io_gravitino_offers_template(IoEngine *eng, const char *template_name,
										 bool *offered, char **names, TmsError *err);

#endif							/* TMS_IO_ENGINE_INT_H */
