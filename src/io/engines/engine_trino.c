/*-------------------------------------------------------------------------
 *
 * engine_trino.c
 *		The Trino client of engine_client.h: the client REST protocol.
 *
 * The protocol (Trino's "client REST API"):
 *	submit	POST /v1/statement, the SQL as the body (text/plain), with
 *			X-Trino-User (the mapping's user, or "tms"), X-Trino-Source:
 *			tms, X-Trino-Catalog (the server's catalog, when set),
 *			X-Trino-Client-Tags: <tag> and one X-Trino-Session header of
 *			name=value pairs (names of letters, digits, '_' and '.';
 *			values percent-encoded, as Trino's own clients send them).
 *			The answer is a QueryResults document; run_id is its "id".
 *	poll	GET nextUri: each page may bring "columns" and "data" (rows
 *			collected, at most max_response_bytes in all); stats.state
 *			QUEUED, WAITING_FOR_RESOURCES and DISPATCHING are PENDING,
 *			the others RUNNING while there is a nextUri; no nextUri and no
 *			"error" is SUCCEEDED; an "error" is FAILED with "message
 *			(errorName)" (USER_CANCELED: CANCELLED).  A nextUri is followed
 *			only when it has the scheme, host and port of the engine URI
 *			(else IO_ERR_PROTOCOL: the client would send its credentials
 *			elsewhere; at submit the query is then cancelled with DELETE
 *			/v1/query/{id} at the engine, best effort).  A nextUri
 *			answered 404 or 410 (the query expired on the coordinator)
 *			switches the run to the query's info, as after a restart.
 *	cancel	DELETE nextUri; without one (found or attached runs) DELETE
 *			/v1/query/{id}.  The run then follows GET /v1/query/{id}.
 *	find	GET /v1/query: the BasicQueryInfo whose session.clientTags
 *			holds the tag (a query not ended before one that ended, then
 *			the greatest queryId, i.e. the newest); its state then comes
 *			from GET /v1/query/{id} ("state"; FAILED with
 *			failureInfo.message or errorCode.name).  Its rows are gone: a
 *			FINISHED query found so is SUCCEEDED with rows_lost.
 *
 * Every request carries X-Trino-User; the nextUri requests carry nothing
 * else of the session (the protocol needs the headers only on the POST).
 * Trino abandons a query whose client stops following nextUri
 * (query.client.timeout): a run found after a restart reports that
 * outcome as the engine does.
 *
 * src/io/engines/engine_trino.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/engines/engine_client_int.h"

#define MAX_QUERY_ID_BYTES	128

/* A query id: letters, digits, '_' (Trino's QueryId). */
static bool
valid_query_id(const char *id)
{
	size_t		n = id ? strlen(id) : 0,
				i;

	if (n == 0 || n > MAX_QUERY_ID_BYTES)
		return false;
	for (i = 0; i < n; i++)
	{
		char		c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* "X-Trino-User: <user or tms>" into sb. */
static void
user_header(IoEngine *eng, IoStrBuf *sb)
{
	io_sb_printf(sb, "X-Trino-User: %s", eng->user ? eng->user : "tms");
}

/* A request other than the submit (GET/DELETE, retried by the core). */
static int
trino_request(IoEngine *eng, const char *method, const char *url, const char *what,
			  IoHttpResponse *resp, TmsError *err)
{
	IoStrBuf	user;
	const char *extra[1];
	int			rc;

	io_sb_init(&user);
	user_header(eng, &user);
	if (user.oom)
	{
		memset(resp, 0, sizeof(*resp));
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	extra[0] = user.data;
	rc = io_engine_request(eng, method, url, NULL, NULL, NULL, extra, 1, true, what,
						   resp, err);
	io_sb_free(&user);
	return rc;
}

/* Is url one to follow: absolute, on the engine's own scheme/host/port? */
static bool
same_server(IoEngine *eng, const char *url)
{
	char	   *origin;
	bool		same;
	const char *p;

	for (p = url; *p; p++)
		if ((unsigned char) *p <= 0x20 || *p == 0x7f)
			return false;
	origin = io_engine_url_origin(url);
	same = origin != NULL && strcmp(origin, eng->origin) == 0;
	io_free(origin);
	return same;
}

/* Free the rows of run past the first n, and the columns when ncols0 is 0. */
static void
truncate_result(IoEngineRun *run, size_t nrows0, size_t ncols0, size_t bytes0)
{
	if (ncols0 == 0 && run->ncolumns > 0 && nrows0 == 0)
	{
		io_engine_clear_result(run);
		return;
	}
	while (run->nrows > nrows0)
	{
		size_t		j;

		run->nrows--;
		for (j = 0; j < run->ncolumns; j++)
			io_free(run->rows[run->nrows][j]);
		io_free(run->rows[run->nrows]);
	}
	((EngineRunPriv *) run->priv)->result_bytes = bytes0;
}

/* FAILED (or CANCELLED for USER_CANCELED) with "message (name)". */
static int
set_failed(IoEngineRun *run, const char *msg, const char *name, TmsError *err)
{
	IoStrBuf	sb;
	int			rc;

	io_sb_init(&sb);
	if (msg != NULL && name != NULL)
		io_sb_printf(&sb, "%s (%s)", msg, name);
	else if (msg != NULL || name != NULL)
		io_sb_puts(&sb, msg ? msg : name);
	else
		io_sb_puts(&sb, "trino query failed");
	rc = sb.oom ? -1 : io_engine_set_message(run, sb.data);
	io_sb_free(&sb);
	if (rc != 0)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	run->state = name != NULL && strcmp(name, "USER_CANCELED") == 0 ?
		IO_ENGINE_RUN_CANCELLED : IO_ENGINE_RUN_FAILED;
	return 0;
}

/* PENDING or RUNNING for a state of a query not ended. */
static IoEngineRunState
live_state(const char *state)
{
	if (state != NULL &&
		(strcmp(state, "QUEUED") == 0 || strcmp(state, "WAITING_FOR_RESOURCES") == 0 ||
		 strcmp(state, "DISPATCHING") == 0))
		return IO_ENGINE_RUN_PENDING;
	return IO_ENGINE_RUN_RUNNING;
}

/*
 * Take one QueryResults page into run: columns, data, nextUri, state,
 * error.  On failure the run is as it was.
 */
static int
apply_page(IoEngine *eng, IoEngineRun *run, const json_t *doc, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	json_t	   *error = json_object_get(doc, "error");
	json_t	   *columns = json_object_get(doc, "columns");
	const char *next = json_string_value(json_object_get(doc, "nextUri"));
	const char *state = json_string_value(json_object_get(json_object_get(doc, "stats"),
														  "state"));
	size_t		nrows0 = run->nrows,
				ncols0 = run->ncolumns,
				bytes0 = priv->result_bytes;
	char	   *next_copy = NULL;

	if (json_is_object(error))
	{
		json_t	   *fi = json_object_get(error, "failureInfo");
		const char *msg = json_string_value(json_object_get(error, "message"));

		if (msg == NULL)
			msg = json_string_value(json_object_get(fi, "message"));
		if (set_failed(run, msg, json_string_value(json_object_get(error, "errorName")),
					   err) != 0)
			return -1;
		io_free(priv->next_uri);
		priv->next_uri = NULL;
		return 0;
	}
	if (next != NULL)
	{
		if (!same_server(eng, next))
		{
			char	   *origin = io_engine_url_origin(next);

			tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
							   "refusing to follow a trino nextUri to another server (%.120s)",
							   origin ? origin : "not an http(s) URL");
			io_free(origin);
			return -1;
		}
		if ((next_copy = io_strdup(next)) == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (json_is_array(columns) && run->ncolumns == 0)
	{
		size_t		n = json_array_size(columns),
					i;
		const char **names = io_calloc(n ? n : 1, sizeof(char *));
		int			rc;

		if (names == NULL)
		{
			io_free(next_copy);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
		for (i = 0; i < n; i++)
			names[i] = json_string_value(json_object_get(json_array_get(columns, i), "name"));
		for (i = 0; i < n && names[i] != NULL; i++)
			;
		rc = i < n ? -2 : io_engine_set_columns(run, names, n);
		io_free(names);
		if (rc != 0)
		{
			io_free(next_copy);
			if (rc == -2)
				return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
										  "malformed trino results: a column has no name");
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
	}
	if (json_array_size(json_object_get(doc, "data")) > 0 && run->ncolumns == 0)
	{
		io_free(next_copy);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed trino results: data before columns");
	}
	if (io_engine_add_rows(eng, run, json_object_get(doc, "data"), "trino results",
						   err) != 0)
	{
		io_free(next_copy);
		truncate_result(run, nrows0, ncols0, bytes0);
		return -1;
	}
	io_free(priv->next_uri);
	priv->next_uri = next_copy;
	if (next_copy == NULL)
		run->state = IO_ENGINE_RUN_SUCCEEDED;
	else
		run->state = live_state(state);
	return 0;
}

/* Take a (Basic)QueryInfo's state into run (rows lost when FINISHED). */
static int
apply_query_info(IoEngineRun *run, const json_t *info, TmsError *err)
{
	const char *state = json_string_value(json_object_get(info, "state"));

	if (state == NULL)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed trino query info: no \"state\"");
	if (strcmp(state, "FINISHED") == 0)
	{
		run->state = IO_ENGINE_RUN_SUCCEEDED;
		run->rows_lost = true;
		io_engine_clear_result(run);
	}
	else if (strcmp(state, "FAILED") == 0)
	{
		const char *msg = json_string_value(json_object_get(json_object_get(info, "failureInfo"),
															"message"));
		const char *name = json_string_value(json_object_get(json_object_get(info, "errorCode"),
															 "name"));

		return set_failed(run, msg, name, err);
	}
	else
		run->state = live_state(state);
	return 0;
}

/* GET /v1/query/{id} and take its state. */
static int
poll_query_info(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	IoStrBuf	path;
	json_t	   *doc;
	int			rc;

	io_sb_init(&path);
	io_sb_printf(&path, "/v1/query/%s", priv->query_id);
	if (path.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = trino_request(eng, "GET", path.data, "trino query info request", &resp, err);
	io_sb_free(&path);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status == 404 || resp.status == 410)
	{
		tms_error_set_http(err, IO_ERR_NOT_FOUND, resp.status,
						   "trino no longer knows query %s", priv->query_id);
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		io_engine_status_error(eng, &resp, false, "trino query info request", err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "trino query info", err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return -1;
	rc = apply_query_info(run, doc, err);
	json_decref(doc);
	return rc;
}

/* A session property name: letters, digits, '_' and '.'. */
static bool
valid_property_name(const char *s)
{
	size_t		n = s ? strlen(s) : 0,
				i;

	if (n == 0 || n > 200)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
			  (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

/* Best effort: DELETE /v1/query/{id} at the engine itself. */
static void
cancel_at_engine(IoEngine *eng, const char *query_id)
{
	IoHttpResponse resp;
	TmsError	cerr;
	IoStrBuf	path;

	io_sb_init(&path);
	io_sb_printf(&path, "/v1/query/%s", query_id);
	if (!path.oom)
		trino_request(eng, "DELETE", path.data, "trino query cancel request", &resp, &cerr);
	io_http_response_free(&resp);
	io_sb_free(&path);
}

/* See engine_client_int.h. */
int
io_trino_submit(IoEngine *eng, const char *tag, const char *statement,
				const IoKeyValue *session, size_t nsession,
				IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv;
	IoStrBuf	user,
				tags,
				catalog,
				props;
	const char *extra[6];
	size_t		nextra = 0;
	size_t		i;
	IoHttpResponse resp;
	json_t	   *doc;
	const char *id;
	int			rc;

	for (i = 0; i < nsession; i++)
		if (!valid_property_name(session[i].key) || session[i].value == NULL)
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "invalid trino session property name \"%.100s\"",
								 session[i].key ? session[i].key : "");
	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	priv = run->priv;
	io_sb_init(&user);
	io_sb_init(&tags);
	io_sb_init(&catalog);
	io_sb_init(&props);
	user_header(eng, &user);
	extra[nextra++] = user.data;
	extra[nextra++] = "X-Trino-Source: tms";
	if (eng->catalog != NULL)
	{
		io_sb_printf(&catalog, "X-Trino-Catalog: %s", eng->catalog);
		extra[nextra++] = catalog.data;
	}
	io_sb_printf(&tags, "X-Trino-Client-Tags: %s", tag);
	extra[nextra++] = tags.data;
	if (nsession > 0)
	{
		io_sb_puts(&props, "X-Trino-Session: ");
		for (i = 0; i < nsession; i++)
		{
			io_sb_printf(&props, "%s%s=", i > 0 ? "," : "", session[i].key);
			io_engine_append_encoded(&props, session[i].value);
		}
		extra[nextra++] = props.data;
	}
	if (user.oom || tags.oom || catalog.oom || props.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	else
		rc = io_engine_request(eng, "POST", "/v1/statement", NULL,
							   "text/plain; charset=utf-8", statement, extra, nextra,
							   false, "trino statement request", &resp, err);
	io_sb_free(&user);
	io_sb_free(&tags);
	io_sb_free(&catalog);
	io_sb_free(&props);
	if (rc != 0)
	{
		io_engine_submit_lost(&resp, err);
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		io_engine_status_error(eng, &resp, true, "trino statement request", err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "trino results", err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
	id = json_string_value(json_object_get(doc, "id"));
	if (!valid_query_id(id))
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200, "malformed trino results: no valid \"id\"");
		return io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
	}
	priv->query_id = io_strdup(id);
	run->run_id = io_strdup(id);
	if (priv->query_id == NULL || run->run_id == NULL)
	{
		json_decref(doc);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	rc = apply_page(eng, run, doc, err);
	json_decref(doc);
	if (rc != 0 && err->code == IO_ERR_PROTOCOL)
		cancel_at_engine(eng, priv->query_id);
	return rc;
}

/* See engine_client_int.h. */
int
io_trino_poll(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	json_t	   *doc;
	int			rc;

	if (priv->by_query_info || priv->next_uri == NULL)
		return poll_query_info(eng, run, err);
	rc = trino_request(eng, "GET", priv->next_uri, "trino results request", &resp, err);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status == 404 || resp.status == 410)
	{
		/* the coordinator dropped the results: follow the query's info */
		io_http_response_free(&resp);
		io_free(priv->next_uri);
		priv->next_uri = NULL;
		priv->by_query_info = true;
		return poll_query_info(eng, run, err);
	}
	if (resp.status != 200)
	{
		io_engine_status_error(eng, &resp, false, "trino results request", err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "trino results", err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return -1;
	rc = apply_page(eng, run, doc, err);
	json_decref(doc);
	return rc;
}

/* See engine_client_int.h. */
int
io_trino_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	IoStrBuf	path;
	int			rc;

	io_sb_init(&path);
	if (priv->next_uri != NULL && !priv->by_query_info)
		io_sb_puts(&path, priv->next_uri);
	else
		io_sb_printf(&path, "/v1/query/%s", priv->query_id);
	if (path.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	rc = trino_request(eng, "DELETE", path.data, "trino query cancel request", &resp, err);
	io_sb_free(&path);
	if (rc == 0 && resp.status != 200 && resp.status != 204 &&
		resp.status != 404 && resp.status != 410)
		rc = io_engine_status_error(eng, &resp, false, "trino query cancel request", err);
	io_http_response_free(&resp);
	if (rc == 0)
	{
		/* the nextUri chain ends with the cancel: follow the query's info */
		io_free(priv->next_uri);
		priv->next_uri = NULL;
		priv->by_query_info = true;
	}
	return rc;
}

/* Is a BasicQueryInfo's state one of an ended query? */
static bool
ended_state(const char *state)
{
	return state != NULL && (strcmp(state, "FINISHED") == 0 || strcmp(state, "FAILED") == 0);
}

/* Does a JSON array of strings hold s? */
static bool
array_has(const json_t *arr, const char *s)
{
	size_t		i;

	for (i = 0; i < json_array_size(arr); i++)
	{
		const char *v = json_string_value(json_array_get(arr, i));

		if (v != NULL && strcmp(v, s) == 0)
			return true;
	}
	return false;
}

/* See engine_client_int.h. */
int
io_trino_find(IoEngine *eng, const char *tag, IoEngineRun *run, bool *found,
			  TmsError *err)
{
	EngineRunPriv *priv;
	IoHttpResponse resp;
	json_t	   *doc;
	json_t	   *best = NULL;
	const char *best_id = NULL;
	size_t		i;
	int			rc;

	rc = trino_request(eng, "GET", "/v1/query", "trino query list request", &resp, err);
	if (rc == 0 && resp.status != 200)
		rc = io_engine_status_error(eng, &resp, false, "trino query list request", err);
	if (rc != 0)
	{
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "trino query list", err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return -1;
	if (!json_is_array(doc))
	{
		json_decref(doc);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed trino query list: not an array");
	}
	for (i = 0; i < json_array_size(doc); i++)
	{
		json_t	   *q = json_array_get(doc, i);
		const char *id = json_string_value(json_object_get(q, "queryId"));
		json_t	   *ctags = json_object_get(json_object_get(q, "session"), "clientTags");
		bool		better;

		if (!valid_query_id(id) || !array_has(ctags, tag))
			continue;
		if (best == NULL)
			better = true;
		else
		{
			bool		e_new = ended_state(json_string_value(json_object_get(q, "state")));
			bool		e_old = ended_state(json_string_value(json_object_get(best, "state")));

			better = e_new != e_old ? !e_new : strcmp(id, best_id) > 0;
		}
		if (better)
		{
			best = q;
			best_id = id;
		}
	}
	if (best == NULL)
	{
		json_decref(doc);
		return 0;
	}
	if (io_engine_run_init(eng, run, err) != 0)
	{
		json_decref(doc);
		return -1;
	}
	priv = run->priv;
	priv->by_query_info = true;
	priv->query_id = io_strdup(best_id);
	run->run_id = io_strdup(best_id);
	if (priv->query_id == NULL || run->run_id == NULL)
	{
		json_decref(doc);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	json_decref(doc);
	rc = poll_query_info(eng, run, err);
	if (rc == 0)
		*found = true;
	return rc;
}

/* See engine_client_int.h. */
int
io_trino_attach(IoEngine *eng, const char *run_id, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv;

	if (!valid_query_id(run_id))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid trino query id \"%.100s\"", run_id);
	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	priv = run->priv;
	priv->by_query_info = true;
	priv->query_id = io_strdup(run_id);
	run->run_id = io_strdup(run_id);
	if (priv->query_id == NULL || run->run_id == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}
