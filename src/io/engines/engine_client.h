/*-------------------------------------------------------------------------
 *
 * engine_client.h
 *	  Clients of the engines that run maintenance for tms: Apache Livy
 *	  (Spark SQL in an interactive session), Trino (the client REST
 *	  protocol) and Apache Gravitino (its jobs API).  One interface for the
 *	  three: submit a statement under tms's tag, poll its run, cancel it,
 *	  and find a run by its tag after a restart.
 *
 * Protocols (each as its project documents it):
 *	 livy		POST /sessions {"kind":"sql","name":<tag>} (Livy refuses a
 *				second session of the same name); when the session is idle,
 *				POST /sessions/{id}/statements {"code":<sql>,"kind":"sql"};
 *				GET /sessions/{id}/statements/{sid} until available, error
 *				or cancelled; the result is output.data["application/json"]
 *				{schema.fields[].name, data[][]}; then DELETE /sessions/{id}.
 *				Cancel: POST .../statements/{sid}/cancel, DELETE the session.
 *				Find: GET /sessions (paged with from/size), by name.
 *	 trino		POST /v1/statement with X-Trino-User, X-Trino-Catalog,
 *				X-Trino-Client-Tags: <tag>, X-Trino-Session; follow nextUri
 *				(GET) until there is none, collecting columns and data; an
 *				"error" object is the failure.  Cancel: DELETE nextUri (or
 *				DELETE /v1/query/{id}).  Find: GET /v1/query, the query
 *				whose session.clientTags holds the tag; its state then
 *				comes from GET /v1/query/{id} (its rows are gone: a caller
 *				takes the effect from the table).
 *	 gravitino	POST /api/metalakes/{m}/jobs/runs <body>; GET
 *				/api/metalakes/{m}/jobs/runs/{jobId} (status queued,
 *				started, succeeded, failed, cancelling, cancelled); cancel
 *				POST /api/metalakes/{m}/jobs/runs/{jobId}; find: GET
 *				/api/metalakes/{m}/jobs/runs?jobTemplateName=..., the run
 *				whose jobConf "tms_tag" is the tag (each run read with GET
 *				when the listing has no jobConf; IO_ERR_UNSUPPORTED when
 *				Gravitino shows no jobConf at all).  No result rows.
 *				Templates: GET /api/metalakes/{m}/jobs/templates, the
 *				names of the job templates the server offers.
 *
 * The details each client chose are in the header of its file
 * (engine_livy.c, engine_trino.c, engine_gravitino.c).
 *
 * Authentication (the user mapping): HTTP basic (user, password), a
 * bearer token, or OAuth2 client credentials exchanged at
 * oauth2_server_uri (grant_type=client_credentials, scope), refreshed
 * once on a 401.  Trino's X-Trino-User is "user", or "tms".
 *
 * Requests that change nothing are retried on 5xx, 429 and network
 * errors (retries, backoff with jitter); a submit is never retried
 * blindly: after an unanswered submit the caller finds by tag.
 *
 * Plain C, no PostgreSQL header, errors as values (TmsError), interrupts
 * through IoHttpOptions as everywhere in io.  Secrets never appear in an
 * TmsError.
 *
 * src/io/engines/engine_client.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_ENGINE_H
#define TMS_IO_ENGINE_H

#include "io/io.h"

typedef enum IoEngineType
{
	IO_ENGINE_LIVY = 0,
	IO_ENGINE_TRINO,
	IO_ENGINE_GRAVITINO
} IoEngineType;

typedef struct IoEngineConfig
{
	IoEngineType type;
	const char *uri;			/* http(s)://host:port[/base] */
	const char *catalog;		/* trino: X-Trino-Catalog */
	const char *metalake;		/* gravitino */
	const char *user;
	const char *password;		/* basic, with user */
	const char *token;			/* bearer */
	const char *credential;		/* client_id:client_secret */
	const char *oauth2_server_uri;
	const char *scope;
	long		poll_interval_ms;	/* first poll delay; 0: 500 ms (backoff
									 * doubles up to 10 x, in io_engine_wait) */
	IoHttpOptions http;
} IoEngineConfig;

typedef struct IoEngine IoEngine;

/* Copies every string of cfg; sends nothing.  NULL with *err. */
extern IoEngine *io_engine_open(const IoEngineConfig *cfg, TmsError *err);
extern void io_engine_free(IoEngine *eng);
extern void io_engine_set_http(IoEngine *eng, const IoHttpOptions *http);

/* Requests sent through this handle so far (for tests and benches). */
extern uint64_t io_engine_request_count(const IoEngine *eng);

typedef enum IoEngineRunState
{
	IO_ENGINE_RUN_PENDING = 0,	/* accepted, not yet running (livy session
								 * starting, gravitino queued, trino queued) */
	IO_ENGINE_RUN_RUNNING,
	IO_ENGINE_RUN_SUCCEEDED,
	IO_ENGINE_RUN_FAILED,		/* message says why, in the engine's words */
	IO_ENGINE_RUN_CANCELLED
} IoEngineRunState;

typedef struct IoEngineRun
{
	char	   *run_id;			/* the engine's id, stable across restarts
								 * (livy "<session>/<statement>" or
								 * "<session>/", trino query id, gravitino
								 * jobId): what a job row records */
	IoEngineRunState state;
	char	   *message;		/* failure text, NULL */
	bool		rows_lost;		/* succeeded, but its rows were not read
								 * (found after a restart: trino) */
	/* result of a succeeded run (none for gravitino) */
	size_t		ncolumns;
	char	  **columns;
	size_t		nrows;
	char	 ***rows;			/* rows[i][j], NULL: SQL null; numbers as
								 * their JSON text */

	/* the client's own (the next URI to follow, the statement) */
	void	   *priv;
} IoEngineRun;

/*
 * Submit statement (SQL; for gravitino the JSON body) under tag, with
 * session properties (trino: X-Trino-Session; livy: members of the
 * session request, each value JSON text; ignored by gravitino).  Returns 0 with *run
 * (PENDING or RUNNING, run_id set once the engine gave one), or -1 with
 * *err.  IO_ERR_COMMIT_STATE_UNKNOWN: the request may have reached the
 * engine (timeout, 5xx, broken connection): find by tag before anything
 * else.  IO_ERR_ALREADY_EXISTS: a run of this tag exists (livy's name).
 */
extern int	io_engine_submit(IoEngine *eng, const char *tag, const char *statement,
							 const IoKeyValue *session, size_t nsession,
							 IoEngineRun *run, TmsError *err);

/*
 * Advance a run by one request (livy: post the statement once the
 * session is idle; trino: follow nextUri; gravitino: GET the status).
 * Returns 0 with run->state updated, or -1 with *err (the run is
 * unchanged; a caller retries later or gives up).  IO_ERR_NOT_FOUND: the
 * engine no longer knows the run (livy session deleted, trino query
 * expired), so its outcome is unknown.  An ended run is not polled.
 */
extern int	io_engine_poll(IoEngine *eng, IoEngineRun *run, TmsError *err);

/*
 * Poll until the run ends or wait_ms passed (0: one poll), sleeping
 * poll_interval_ms doubling up to 10 x between polls, interruptible.
 */
extern int	io_engine_wait(IoEngine *eng, IoEngineRun *run, long wait_ms, TmsError *err);

/*
 * Ask the engine to cancel; the run's state follows at the next poll
 * (CANCELLED, or the outcome the run reached first).
 */
extern int	io_engine_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err);

/*
 * Find the run of tag.  Returns 0 with *found and, when found, *run (its
 * state as the engine says; for livy a session with no statement yet is
 * PENDING with the statement still to post: give it as statement, or
 * NULL when unknown), or -1 with *err.
 */
extern int	io_engine_find(IoEngine *eng, const char *tag, const char *statement,
						   const char *template_name,
						   IoEngineRun *run, bool *found, TmsError *err);

/*
 * Rebuild a run from its run_id (a job row's engine_job_id) to poll or
 * cancel it; statement as for io_engine_find.  Sends nothing: the run is
 * PENDING until its first poll (livy "<session>/" then first looks at the
 * session's statements, so a statement posted before is adopted).
 */
extern int	io_engine_attach(IoEngine *eng, const char *run_id, const char *statement,
							 IoEngineRun *run, TmsError *err);

/*
 * Gravitino only: whether the server offers job template template_name
 * (GET /api/metalakes/{m}/jobs/templates, its "names").  Returns 0 with
 * *offered and *names (malloc'd, the names it lists, ", " separated, cut
 * at IO_ENGINE_TEMPLATE_LIST_MAX bytes with "..."), or -1 with *err.
 */
#define IO_ENGINE_TEMPLATE_LIST_MAX 2000
extern int	io_engine_offers_template(IoEngine *eng, const char *template_name,
									  bool *offered, char **names, TmsError *err);

/* Release the engine's resources of an ended run (livy: DELETE the session). */
extern int	io_engine_close(IoEngine *eng, IoEngineRun *run, TmsError *err);

extern void io_engine_run_free(IoEngineRun *run);

#endif							/* TMS_IO_ENGINE_H */
