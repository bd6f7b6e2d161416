/*-------------------------------------------------------------------------
 *
 * engine_livy.c
 *		The Apache Livy client of engine_client.h: one interactive session of
 *		kind "sql" per run, named by the run's tag, and one statement in
 *		it.
 *
 * The protocol (Livy's REST API):
 *	submit	POST /sessions {"kind":"sql","name":<tag>, and the run's
 *			resources: driverMemory, executorCores, conf, ...} -> the Session
 *			({"id":N,"state":...}); run_id "<N>/".  Livy refuses a second
 *			session of the same name: its answer (409, or 400 "Duplicate
 *			session name") is IO_ERR_ALREADY_EXISTS.
 *	poll	before the statement: GET /sessions/{id}; not_started,
 *			starting, recovering and busy are PENDING; idle posts the
 *			statement, POST /sessions/{id}/statements {"code":<sql>,
 *			"kind":"sql"} (never retried: a post that may have reached
 *			Livy makes the next poll look at GET /sessions/{id}/statements
 *			first and adopt what it finds), run_id "<N>/<S>"; error, dead,
 *			killed, shutting_down and success are FAILED with the session
 *			log's last lines (the Session's "log", else GET
 *			/sessions/{id}/log?from=-1&size=20, best effort) or the state.
 *			After it: GET /sessions/{id}/statements/{S}: waiting PENDING,
 *			running and cancelling RUNNING, available with output.status
 *			"ok" SUCCEEDED (output.data["application/json"] = {"schema":
 *			{"fields":[{"name":..}]},"data":[[..]]} gives the columns and
 *			rows), output.status "error" FAILED with "ename: evalue",
 *			error FAILED, cancelled CANCELLED.
 *	cancel	POST /sessions/{id}/statements/{S}/cancel (when posted), then
 *			DELETE /sessions/{id}; a session gone after a cancel is
 *			CANCELLED at the next poll, a session gone otherwise is
 *			IO_ERR_NOT_FOUND (its outcome is unknown).
 *	find	GET /sessions?from=F&size=100 page by page (at most
 *			FIND_MAX_PAGES), the session named <tag>; then GET
 *			/sessions/{id}/statements: a statement there is adopted, never
 *			posted again.
 *	close	DELETE /sessions/{id} (404 is fine).
 *
 * Every request carries "X-Requested-By: tms" (Livy's CSRF protection
 * wants it on POST and DELETE).
 *
 * src/io/engines/engine_livy.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/engines/engine_client_int.h"

#define FIND_PAGE_SIZE	100
#define FIND_MAX_PAGES	1000
#define LOG_TAIL_LINES	20

static const char *const livy_extra[] = {"X-Requested-By: tms"};

/* One request to Livy (JSON both ways). */
static int
livy_request(IoEngine *eng, const char *method, const char *path, const char *body,
			 bool idempotent, const char *what, IoHttpResponse *resp, TmsError *err)
{
	return io_engine_request(eng, method, path, NULL, NULL, body, livy_extra, 1,
							 idempotent, what, resp, err);
}

/* GET path and parse a 200's body; *gone set on 404 (no error then). */
static json_t *
livy_get(IoEngine *eng, const char *path, const char *what, bool *gone,
		 IoHttpResponse *resp, TmsError *err)
{
	json_t	   *doc;

	*gone = false;
	if (livy_request(eng, "GET", path, NULL, true, what, resp, err) != 0)
		return NULL;
	if (resp->status == 404 && gone != NULL)
	{
		*gone = true;
		return NULL;
	}
	if (resp->status != 200)
	{
		io_engine_status_error(eng, resp, false, what, err);
		return NULL;
	}
	doc = io_engine_parse(eng, resp, what, err);
	if (doc != NULL && !json_is_object(doc))
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, resp->status,
						   "malformed %s response: not a JSON object", what);
		return NULL;
	}
	return doc;
}

/* Set run_id to "<session>/" or "<session>/<statement>". */
static int
set_run_id(IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	char		buf[64];

	if (priv->statement_id >= 0)
		snprintf(buf, sizeof(buf), "%ld/%ld", priv->session_id, priv->statement_id);
	else
		snprintf(buf, sizeof(buf), "%ld/", priv->session_id);
	io_free(run->run_id);
	run->run_id = io_strdup(buf);
	if (run->run_id == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

/* A non-negative integer "id" of a Livy object, or -1. */
static long
object_id(const json_t *obj)
{
	json_t	   *id = json_object_get(obj, "id");

	if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		json_integer_value(id) > 999999999999LL)
		return -1;
	return (long) json_integer_value(id);
}

typedef enum SessionKind
{
	SESSION_WAIT,				/* not ready for a statement yet */
	SESSION_IDLE,
	SESSION_ENDED,
	SESSION_UNKNOWN
} SessionKind;

static SessionKind
session_kind(const char *state)
{
	static const char *const waiting[] = {"not_started", "starting", "recovering", "busy"};
	static const char *const ended[] = {"error", "dead", "killed", "shutting_down", "success"};
	size_t		i;

	if (state == NULL)
		return SESSION_UNKNOWN;
	if (strcmp(state, "idle") == 0)
		return SESSION_IDLE;
	for (i = 0; i < sizeof(waiting) / sizeof(waiting[0]); i++)
		if (strcmp(state, waiting[i]) == 0)
			return SESSION_WAIT;
	for (i = 0; i < sizeof(ended) / sizeof(ended[0]); i++)
		if (strcmp(state, ended[i]) == 0)
			return SESSION_ENDED;
	return SESSION_UNKNOWN;
}

/* Append the last lines of a JSON array of log lines. */
static void
append_log_tail(IoStrBuf *sb, const json_t *log)
{
	size_t		n = json_array_size(log);
	size_t		i = n > LOG_TAIL_LINES ? n - LOG_TAIL_LINES : 0;
	bool		any = false;

	for (; i < n; i++)
	{
		const char *line = json_string_value(json_array_get(log, i));

		if (line == NULL || line[0] == '\0')
			continue;
		io_sb_puts(sb, any ? "\n" : ": ");
		io_sb_puts(sb, line);
		any = true;
	}
}

/* The session ended before its statement ran: FAILED, with its log. */
static int
session_failed(IoEngine *eng, IoEngineRun *run, const json_t *session, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	const char *state = json_string_value(json_object_get(session, "state"));
	json_t	   *log = json_object_get(session, "log");
	IoStrBuf	sb;
	int			rc;

	io_sb_init(&sb);
	io_sb_printf(&sb, "livy session %ld is %s", priv->session_id, state);
	if (json_array_size(log) > 0)
		append_log_tail(&sb, log);
	else
	{
		IoHttpResponse resp;
		TmsError	lerr;
		bool		gone;
		char		path[96];
		json_t	   *doc;

		snprintf(path, sizeof(path), "/sessions/%ld/log?from=-1&size=%d",
				 priv->session_id, LOG_TAIL_LINES);
		doc = livy_get(eng, path, "livy session log request", &gone, &resp, &lerr);
		io_http_response_free(&resp);
		if (doc != NULL)
			append_log_tail(&sb, json_object_get(doc, "log"));
		json_decref(doc);
	}
	if (sb.oom)
	{
		io_sb_free(&sb);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	rc = io_engine_set_message(run, sb.data);
	io_sb_free(&sb);
	if (rc != 0)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	run->state = IO_ENGINE_RUN_FAILED;
	return 0;
}

/* The session (or its statement) no longer exists. */
static int
session_gone(IoEngineRun *run, const IoHttpResponse *resp, TmsError *err)
{
	EngineRunPriv *priv = run->priv;

	if (priv->cancel_requested)
	{
		run->state = IO_ENGINE_RUN_CANCELLED;
		if (io_engine_set_message(run, "cancelled") != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return 0;
	}
	tms_error_set_http(err, IO_ERR_NOT_FOUND, resp->status,
					   "livy session %ld no longer exists", priv->session_id);
	if (resp->body_len > 0)
		tms_error_detail_raw(err, resp->body, resp->body_len > 300 ? 300 : resp->body_len);
	return -1;
}

/* The result of an available statement: output.data["application/json"]. */
static int
read_result(IoEngine *eng, IoEngineRun *run, const json_t *data, TmsError *err)
{
	json_t	   *aj = json_object_get(data, "application/json");
	json_t	   *fields;
	size_t		n,
				i;
	const char **names;
	int			rc;

	if (aj == NULL)
		return 0;				/* a statement without a table result */
	fields = json_object_get(json_object_get(aj, "schema"), "fields");
	if (!json_is_object(aj) || !json_is_array(fields))
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed livy statement output: no schema.fields");
	n = json_array_size(fields);
	names = io_calloc(n ? n : 1, sizeof(char *));
	if (names == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	for (i = 0; i < n; i++)
	{
		names[i] = json_string_value(json_object_get(json_array_get(fields, i), "name"));
		if (names[i] == NULL)
		{
			io_free(names);
			return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									  "malformed livy statement output: field %zu has no name",
									  i + 1);
		}
	}
	rc = io_engine_set_columns(run, names, n);
	io_free(names);
	if (rc != 0)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return io_engine_add_rows(eng, run, json_object_get(aj, "data"),
							  "livy statement output", err);
}

/* Take the state (and result) of a statement object into run. */
static int
apply_statement(IoEngine *eng, IoEngineRun *run, const json_t *stmt, TmsError *err)
{
	const char *state = json_string_value(json_object_get(stmt, "state"));
	json_t	   *output = json_object_get(stmt, "output");
	const char *ostatus = json_string_value(json_object_get(output, "status"));

	if (state == NULL)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed livy statement: no \"state\"");
	if (strcmp(state, "waiting") == 0)
		run->state = IO_ENGINE_RUN_PENDING;
	else if (strcmp(state, "running") == 0 || strcmp(state, "cancelling") == 0)
		run->state = IO_ENGINE_RUN_RUNNING;
	else if (strcmp(state, "cancelled") == 0)
	{
		run->state = IO_ENGINE_RUN_CANCELLED;
		if (io_engine_set_message(run, "cancelled") != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	else if ((strcmp(state, "available") == 0 || strcmp(state, "error") == 0) &&
			 ostatus != NULL && strcmp(ostatus, "error") == 0)
	{
		const char *ename = json_string_value(json_object_get(output, "ename"));
		const char *evalue = json_string_value(json_object_get(output, "evalue"));
		IoStrBuf	sb;
		int			rc;

		io_sb_init(&sb);
		io_sb_printf(&sb, "%s%s%s", ename ? ename : "", ename && evalue ? ": " : "",
					 evalue ? evalue : "");
		if (sb.len == 0)
			io_sb_puts(&sb, "livy statement failed");
		rc = sb.oom ? -1 : io_engine_set_message(run, sb.data);
		io_sb_free(&sb);
		if (rc != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		run->state = IO_ENGINE_RUN_FAILED;
	}
	else if (strcmp(state, "error") == 0)
	{
		if (io_engine_set_message(run, "livy statement failed") != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		run->state = IO_ENGINE_RUN_FAILED;
	}
	else if (strcmp(state, "available") == 0)
	{
		if (ostatus == NULL || strcmp(ostatus, "ok") != 0)
			return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									  "malformed livy statement: output status \"%.40s\"",
									  ostatus ? ostatus : "(none)");
		io_engine_clear_result(run);
		if (read_result(eng, run, json_object_get(output, "data"), err) != 0)
		{
			io_engine_clear_result(run);
			return -1;
		}
		run->state = IO_ENGINE_RUN_SUCCEEDED;
	}
	else
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "livy statement has an unknown state \"%.40s\"", state);
	return 0;
}

/* Adopt the statement stmt (from a listing or a post) as the run's. */
static int
adopt_statement(IoEngine *eng, IoEngineRun *run, const json_t *stmt, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	long		sid = object_id(stmt);

	if (sid < 0)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed livy statement: no \"id\"");
	priv->statement_id = sid;
	priv->maybe_posted = false;
	if (set_run_id(run, err) != 0)
		return -1;
	return apply_statement(eng, run, stmt, err);
}

/*
 * GET /sessions/{id}/statements: adopt the first statement there.  *any
 * says whether there was one.
 */
static int
look_for_statement(IoEngine *eng, IoEngineRun *run, bool *any, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	char		path[64];
	json_t	   *doc;
	json_t	   *list;
	json_t	   *first = NULL;
	size_t		i;
	bool		gone;
	int			rc = 0;

	*any = false;
	snprintf(path, sizeof(path), "/sessions/%ld/statements", priv->session_id);
	doc = livy_get(eng, path, "livy statement list request", &gone, &resp, err);
	if (doc == NULL)
	{
		rc = gone ? session_gone(run, &resp, err) : -1;
		io_http_response_free(&resp);
		if (gone && rc == 0)
			*any = true;		/* ended: nothing to post */
		return rc;
	}
	io_http_response_free(&resp);
	list = json_object_get(doc, "statements");
	if (!json_is_array(list))
	{
		json_decref(doc);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed livy statement list: no \"statements\"");
	}
	/* the session is the run's own: its first statement is the run's */
	for (i = 0; i < json_array_size(list); i++)
	{
		json_t	   *s = json_array_get(list, i);

		if (object_id(s) >= 0 && (first == NULL || object_id(s) < object_id(first)))
			first = s;
	}
	if (first != NULL)
	{
		*any = true;
		rc = adopt_statement(eng, run, first, err);
	}
	json_decref(doc);
	return rc;
}

/* POST the statement into the idle session. */
static int
post_statement(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	char		path[64];
	json_t	   *body;
	char	   *text;
	json_t	   *doc;
	int			rc;

	if (priv->statement == NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the statement of livy session %ld is not known: attach with the statement",
							 priv->session_id);
	body = json_pack("{s:s,s:s}", "code", priv->statement, "kind", "sql");
	text = body ? io_engine_json_dump(body) : NULL;
	json_decref(body);
	if (text == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	snprintf(path, sizeof(path), "/sessions/%ld/statements", priv->session_id);
	rc = livy_request(eng, "POST", path, text, false, "livy statement request", &resp, err);
	io_free(text);
	if (rc != 0)
	{
		if (resp.sent)
			priv->maybe_posted = true;
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status >= 500)
		priv->maybe_posted = true;
	if (resp.status == 404)
	{
		rc = session_gone(run, &resp, err);
		io_http_response_free(&resp);
		return rc;
	}
	if (resp.status != 200 && resp.status != 201)
	{
		io_engine_status_error(eng, &resp, false, "livy statement request", err);
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "livy statement", err);
	io_http_response_free(&resp);
	if (doc == NULL)
	{
		priv->maybe_posted = true;
		return -1;
	}
	rc = adopt_statement(eng, run, doc, err);
	json_decref(doc);
	if (rc != 0 && priv->statement_id < 0)
		priv->maybe_posted = true;
	return rc;
}

/* Take the state of a session object (no statement yet) into run. */
static int
apply_session(IoEngine *eng, IoEngineRun *run, const json_t *session, bool may_post,
			  TmsError *err)
{
	const char *state = json_string_value(json_object_get(session, "state"));

	switch (session_kind(state))
	{
		case SESSION_WAIT:
			run->state = IO_ENGINE_RUN_PENDING;
			return 0;
		case SESSION_IDLE:
			run->state = IO_ENGINE_RUN_PENDING;
			return may_post ? post_statement(eng, run, err) : 0;
		case SESSION_ENDED:
			return session_failed(eng, run, session, err);
		default:
			return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									  "livy session has an unknown state \"%.40s\"",
									  state ? state : "(none)");
	}
}

/*
 * The members the statement adds to the session request (its resources:
 * driverMemory, numExecutors, conf, ...), each value JSON text; "kind"
 * and "name" stay tms's.
 */
static int
livy_session_members(json_t *body, const IoKeyValue *session, size_t nsession,
					 TmsError *err)
{
	for (size_t i = 0; i < nsession; i++)
	{
		json_t	   *v;

		if (strcmp(session[i].key, "kind") == 0 || strcmp(session[i].key, "name") == 0)
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "a livy session request member \"%s\" is tms's own",
								 session[i].key);
		v = json_loads(session[i].value, JSON_DECODE_ANY, NULL);
		if (v == NULL)
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "livy session request member \"%s\" is not JSON",
								 session[i].key);
		if (json_object_set_new(body, session[i].key, v) != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* See engine_client_int.h. */
int
io_livy_submit(IoEngine *eng, const char *tag, const char *statement,
			   const IoKeyValue *session, size_t nsession,
			   IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv;
	IoHttpResponse resp;
	json_t	   *body;
	char	   *text;
	json_t	   *doc;
	int			rc;

	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	priv = run->priv;
	priv->statement = io_strdup(statement);
	body = json_pack("{s:s,s:s}", "kind", "sql", "name", tag);
	if (body != NULL && livy_session_members(body, session, nsession, err) != 0)
	{
		json_decref(body);
		return -1;
	}
	text = body ? io_engine_json_dump(body) : NULL;
	json_decref(body);
	if (text == NULL || priv->statement == NULL)
	{
		io_free(text);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	rc = livy_request(eng, "POST", "/sessions", text, false, "livy session request",
					  &resp, err);
	io_free(text);
	if (rc != 0)
	{
		io_engine_submit_lost(&resp, err);
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200 && resp.status != 201)
	{
		io_engine_status_error(eng, &resp, true, "livy session request", err);
		if (resp.status == 409 ||
			(resp.status == 400 && (strstr(err->detail, "Duplicate session name") != NULL ||
									strstr(err->detail, "duplicate session name") != NULL)))
		{
			err->code = IO_ERR_ALREADY_EXISTS;
			snprintf(err->message, sizeof(err->message),
					 "livy already has a session named \"%.200s\"", tag);
		}
		io_http_response_free(&resp);
		return -1;
	}
	doc = io_engine_parse(eng, &resp, "livy session", err);
	io_http_response_free(&resp);
	if (doc == NULL)
		return io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
	priv->session_id = object_id(doc);
	if (priv->session_id < 0)
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200, "malformed livy session: no \"id\"");
		return io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
	}
	rc = set_run_id(run, err);
	if (rc == 0)
		rc = apply_session(eng, run, doc, false, err);
	json_decref(doc);
	return rc;
}

/* See engine_client_int.h. */
int
io_livy_poll(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;
	IoHttpResponse resp;
	char		path[96];
	json_t	   *doc;
	bool		gone;
	int			rc;

	if (priv->statement_id < 0)
	{
		if (priv->maybe_posted)
		{
			bool		any;

			if (look_for_statement(eng, run, &any, err) != 0)
				return -1;
			if (any)
				return 0;
			priv->maybe_posted = false;
		}
		snprintf(path, sizeof(path), "/sessions/%ld", priv->session_id);
		doc = livy_get(eng, path, "livy session request", &gone, &resp, err);
		if (doc == NULL)
		{
			rc = gone ? session_gone(run, &resp, err) : -1;
			io_http_response_free(&resp);
			return rc;
		}
		io_http_response_free(&resp);
		rc = apply_session(eng, run, doc, true, err);
		json_decref(doc);
		return rc;
	}
	snprintf(path, sizeof(path), "/sessions/%ld/statements/%ld", priv->session_id,
			 priv->statement_id);
	doc = livy_get(eng, path, "livy statement request", &gone, &resp, err);
	if (doc == NULL)
	{
		rc = gone ? session_gone(run, &resp, err) : -1;
		io_http_response_free(&resp);
		return rc;
	}
	io_http_response_free(&resp);
	rc = apply_statement(eng, run, doc, err);
	json_decref(doc);
	return rc;
}

/* DELETE the session; 404 is fine. */
static int
delete_session(IoEngine *eng, long session_id, TmsError *err)
{
	IoHttpResponse resp;
	char		path[64];
	int			rc;

	snprintf(path, sizeof(path), "/sessions/%ld", session_id);
	rc = livy_request(eng, "DELETE", path, NULL, true, "livy session delete request",
					  &resp, err);
	if (rc == 0 && resp.status != 200 && resp.status != 204 && resp.status != 404)
		rc = io_engine_status_error(eng, &resp, false, "livy session delete request", err);
	io_http_response_free(&resp);
	return rc;
}

/* See engine_client_int.h. */
int
io_livy_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;

	if (priv->statement_id >= 0)
	{
		IoHttpResponse resp;
		TmsError	cerr;
		char		path[96];

		/* best effort: deleting the session stops the statement anyway */
		snprintf(path, sizeof(path), "/sessions/%ld/statements/%ld/cancel",
				 priv->session_id, priv->statement_id);
		livy_request(eng, "POST", path, NULL, true, "livy statement cancel request",
					 &resp, &cerr);
		io_http_response_free(&resp);
	}
	if (delete_session(eng, priv->session_id, err) != 0)
		return -1;
	priv->cancel_requested = true;
	return 0;
}

/* See engine_client_int.h. */
int
io_livy_close(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv = run->priv;

	if (priv->session_id < 0)
		return 0;
	return delete_session(eng, priv->session_id, err);
}

/* See engine_client_int.h. */
int
io_livy_find(IoEngine *eng, const char *tag, const char *statement,
			 IoEngineRun *run, bool *found, TmsError *err)
{
	EngineRunPriv *priv;
	long		from = 0;
	int			page;
	json_t	   *match = NULL;
	bool		any;
	int			rc;

	for (page = 0; page < FIND_MAX_PAGES; page++)
	{
		IoHttpResponse resp;
		char		path[96];
		json_t	   *doc;
		json_t	   *list;
		json_t	   *total;
		size_t		i;
		bool		gone;

		snprintf(path, sizeof(path), "/sessions?from=%ld&size=%d", from, FIND_PAGE_SIZE);
		doc = livy_get(eng, path, "livy session list request", &gone, &resp, err);
		if (doc == NULL && gone)
			io_engine_status_error(eng, &resp, false, "livy session list request", err);
		io_http_response_free(&resp);
		if (doc == NULL)
		{
			json_decref(match);
			return -1;
		}
		list = json_object_get(doc, "sessions");
		total = json_object_get(doc, "total");
		if (!json_is_array(list))
		{
			json_decref(doc);
			json_decref(match);
			return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									  "malformed livy session list: no \"sessions\"");
		}
		for (i = 0; i < json_array_size(list); i++)
		{
			json_t	   *s = json_array_get(list, i);
			const char *name = json_string_value(json_object_get(s, "name"));

			/* Livy keeps names unique; should two match, the newest wins */
			if (name != NULL && strcmp(name, tag) == 0 && object_id(s) >= 0 &&
				(match == NULL || object_id(s) > object_id(match)))
			{
				json_decref(match);
				match = json_incref(s);
			}
		}
		from += (long) json_array_size(list);
		if (json_array_size(list) == 0 || !json_is_integer(total) ||
			from >= (long) json_integer_value(total))
		{
			json_decref(doc);
			break;
		}
		json_decref(doc);
	}
	if (page == FIND_MAX_PAGES)
	{
		json_decref(match);
		return tms_error_set(err, IO_ERR_TOO_LARGE,
							 "livy lists more than %d sessions", FIND_PAGE_SIZE * FIND_MAX_PAGES);
	}
	if (match == NULL)
		return 0;
	if (io_engine_run_init(eng, run, err) != 0)
	{
		json_decref(match);
		return -1;
	}
	priv = run->priv;
	priv->session_id = object_id(match);
	if (statement != NULL && (priv->statement = io_strdup(statement)) == NULL)
	{
		json_decref(match);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	rc = set_run_id(run, err);
	if (rc == 0)
		rc = look_for_statement(eng, run, &any, err);
	if (rc == 0 && !any)
		rc = apply_session(eng, run, match, false, err);
	json_decref(match);
	if (rc == 0)
		*found = true;
	return rc;
}

/* Parse digits s[0..n) into *out; false unless 1..12 digits. */
static bool
parse_id(const char *s, size_t n, long *out)
{
	size_t		i;
	long		v = 0;

	if (n == 0 || n > 12)
		return false;
	for (i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

/* See engine_client_int.h: "<session>/" or "<session>/<statement>". */
int
io_livy_attach(IoEngine *eng, const char *run_id, const char *statement,
			   IoEngineRun *run, TmsError *err)
{
	EngineRunPriv *priv;
	const char *slash = strchr(run_id, '/');
	long		sid,
				stid = -1;

	if (slash == NULL || !parse_id(run_id, (size_t) (slash - run_id), &sid) ||
		(slash[1] != '\0' && !parse_id(slash + 1, strlen(slash + 1), &stid)))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid livy run id \"%.100s\": expected <session>/ or <session>/<statement>",
							 run_id);
	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	priv = run->priv;
	priv->session_id = sid;
	priv->statement_id = stid;
	/* recorded before the statement was posted: it may have been since */
	priv->maybe_posted = stid < 0;
	if (statement != NULL && (priv->statement = io_strdup(statement)) == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return set_run_id(run, err);
}
