/*-------------------------------------------------------------------------
 *
 * engine_gravitino.c
 *		The Apache Gravitino client of engine_client.h: its jobs API.
 *
 * The protocol (Gravitino's REST API, Accept:
 * application/vnd.gravitino.v1+json; every answer an envelope with
 * "code" 0 on success, else {"code":N,"type":..,"message":..}):
 *	submit	POST /api/metalakes/{m}/jobs/runs with the statement, a
 *			JobRunRequest {"jobTemplateName":..,"jobConf":{..}}; its
 *			jobConf must carry "tms_tag": the tag (added when absent, a
 *			different one refused), so that the run can be found again.
 *			The answer {"code":0,"job":{"jobId":..,"jobTemplateName":..,
 *			"status":..,"audit":..}}; run_id is the jobId.
 *	poll	GET /api/metalakes/{m}/jobs/runs/{jobId}: status queued
 *			PENDING, started and cancelling RUNNING, succeeded SUCCEEDED,
 *			failed FAILED, cancelled CANCELLED.  No result rows.
 *	cancel	POST /api/metalakes/{m}/jobs/runs/{jobId} (no body).
 *	find	GET /api/metalakes/{m}/jobs/runs?jobTemplateName=<t>: the run
 *			whose jobConf.tms_tag is the tag (one not ended first, then
 *			the newest audit.createTime).  When the listing carries no
 *			jobConf, each run is read with GET (newest first, at most
 *			FIND_MAX_GETS); when Gravitino shows no jobConf there either,
 *			a run cannot be told apart from another: IO_ERR_UNSUPPORTED,
 *			never "not found" (a caller would submit a second run).
 *	templates	GET /api/metalakes/{m}/jobs/templates: {"code":0,"names":
 *			[..]}, the job templates the server offers (which built-in
 *			ones depends on its release); read before a submit.
 *
 * src/io/engines/engine_gravitino.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/engines/engine_client_int.h"

#define GRAVITINO_ACCEPT	"application/vnd.gravitino.v1+json"
#define FIND_MAX_GETS		50
#define MAX_JOB_ID_BYTES	200

/* A jobId: printable ASCII without '/', '?', '#', '%' or spaces. */
static bool
valid_job_id(const char *id)
{
	size_t		n = id ? strlen(id) : 0,
				i;

	if (n == 0 || n > MAX_JOB_ID_BYTES || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return false;
	for (i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) id[i];

		if (c <= 0x20 || c >= 0x7f || strchr("/?#%\\", c) != NULL)
			return false;
	}
	return true;
}

/* "/api/metalakes/{m}/jobs/runs" (+ "/" + jobId) into sb. */
static void
runs_path(IoEngine *eng, IoStrBuf *sb, const char *job_id)
{
	io_sb_puts(sb, "/api/metalakes/");
	io_engine_append_encoded(sb, eng->metalake);
	io_sb_puts(sb, "/jobs/runs");
	if (job_id != NULL)
	{
		io_sb_putc(sb, '/');
		io_engine_append_encoded(sb, job_id);
	}
}

/*
 * Send a request and read the envelope of a 200: the document with
 * "code" 0, or NULL with *err.
 */
static json_t *
gravitino_call(IoEngine *eng, const char *method, const char *path, const char *body,
			   bool idempotent, bool submit, const char *what, TmsError *err)
{
	IoHttpResponse resp;
	json_t	   *doc;
	json_t	   *code;

	if (io_engine_request(eng, method, path, GRAVITINO_ACCEPT, NULL, body, NULL, 0,
						  idempotent, what, &resp, err) != 0)
	{
		if (submit)
			io_engine_submit_lost(&resp, err);
		io_http_response_free(&resp);
		return NULL;
	}
	if (resp.status != 200)
	{
		io_engine_status_error(eng, &resp, submit, what, err);
		io_http_response_free(&resp);
		return NULL;
	}
	doc = io_engine_parse(eng, &resp, what, err);
	io_http_response_free(&resp);
	if (doc != NULL && !json_is_object(doc))
	{
		json_decref(doc);
		doc = NULL;
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200, "malformed %s response: not a JSON object",
						   what);
	}
	if (doc == NULL)
	{
		if (submit)
			io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
		return NULL;
	}
	code = json_object_get(doc, "code");
	if (json_is_integer(code) && json_integer_value(code) != 0)
	{
		const char *type = json_string_value(json_object_get(doc, "type"));
		const char *msg = json_string_value(json_object_get(doc, "message"));
		char		d[sizeof(err->detail)];

		tms_error_set_http(err, submit ? IO_ERR_COMMIT_STATE_UNKNOWN : IO_ERR_SERVER, 200,
						   "%s failed with gravitino error code %lld", what,
						   (long long) json_integer_value(code));
		snprintf(d, sizeof(d), "%s%s%s", type ? type : "", type && msg ? ": " : "",
				 msg ? msg : "");
		tms_error_detail_raw(err, d, strlen(d));
		json_decref(doc);
		return NULL;
	}
	return doc;
}

/* Take a JobDTO's status into run. */
static int
apply_job(IoEngineRun *run, const json_t *job, TmsError *err)
{
	const char *status = json_string_value(json_object_get(job, "status"));

	if (status == NULL)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed gravitino job: no \"status\"");
	if (strcasecmp(status, "queued") == 0)
		run->state = IO_ENGINE_RUN_PENDING;
	else if (strcasecmp(status, "started") == 0 || strcasecmp(status, "cancelling") == 0)
		run->state = IO_ENGINE_RUN_RUNNING;
	else if (strcasecmp(status, "succeeded") == 0)
		run->state = IO_ENGINE_RUN_SUCCEEDED;
	else if (strcasecmp(status, "cancelled") == 0)
	{
		run->state = IO_ENGINE_RUN_CANCELLED;
		if (io_engine_set_message(run, "cancelled") != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	else if (strcasecmp(status, "failed") == 0)
	{
		char		msg[300];

		snprintf(msg, sizeof(msg), "gravitino job %.200s failed", run->run_id);
		if (io_engine_set_message(run, msg) != 0)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		run->state = IO_ENGINE_RUN_FAILED;
	}
	else
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "gravitino job has an unknown status \"%.40s\"", status);
	return 0;
}

/* Fill run from a JobDTO (id, template, status). */
static int
take_job(IoEngine *eng, IoEngineRun *run, const json_t *job, TmsError *err)
{
	EngineRunPriv *priv;
	const char *id = json_string_value(json_object_get(job, "jobId"));
	const char *tmpl = json_string_value(json_object_get(job, "jobTemplateName"));

	if (!valid_job_id(id))
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed gravitino job: no valid \"jobId\"");
	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	priv = run->priv;
	run->run_id = io_strdup(id);
	if (run->run_id == NULL || (tmpl != NULL && (priv->template_name = io_strdup(tmpl)) == NULL))
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return apply_job(run, job, err);
}

/* See engine_client_int.h. */
int
io_gravitino_submit(IoEngine *eng, const char *tag, const char *statement,
					IoEngineRun *run, TmsError *err)
{
	json_t	   *req;
	json_t	   *conf;
	json_t	   *have;
	char	   *body;
	IoStrBuf	path;
	json_t	   *doc;
	int			rc;

	req = io_json_parse(statement, strlen(statement), eng->http.max_json_bytes,
						"gravitino job request", err);
	if (req == NULL)
	{
		err->code = IO_ERR_INVALID_ARGUMENT;
		return -1;
	}
	if (!json_is_object(req) || json_string_value(json_object_get(req, "jobTemplateName")) == NULL)
	{
		json_decref(req);
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "a gravitino job request must be a JSON object with a \"jobTemplateName\"");
	}
	conf = json_object_get(req, "jobConf");
	if (conf == NULL)
	{
		conf = json_pack("{}");
		if (conf == NULL || json_object_set_new(req, "jobConf", conf) != 0)
		{
			json_decref(req);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
	}
	if (!json_is_object(conf))
	{
		json_decref(req);
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the \"jobConf\" of a gravitino job request must be an object");
	}
	have = json_object_get(conf, "tms_tag");
	if (have != NULL && (!json_is_string(have) || strcmp(json_string_value(have), tag) != 0))
	{
		json_decref(req);
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the jobConf \"tms_tag\" of the gravitino job request is not the run's tag");
	}
	if (have == NULL && json_object_set_new(conf, "tms_tag", json_string(tag)) != 0)
	{
		json_decref(req);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	body = have != NULL ? io_strdup(statement) : io_engine_json_dump(req);
	json_decref(req);
	io_sb_init(&path);
	runs_path(eng, &path, NULL);
	if (body == NULL || path.oom)
	{
		io_free(body);
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	doc = gravitino_call(eng, "POST", path.data, body, false, true,
						 "gravitino job run request", err);
	io_free(body);
	io_sb_free(&path);
	if (doc == NULL)
		return -1;
	rc = take_job(eng, run, json_object_get(doc, "job"), err);
	json_decref(doc);
	if (rc != 0 && run->run_id == NULL)
		io_engine_submit_lost(&(IoHttpResponse) {.sent = true}, err);
	return rc;
}

/* GET or POST (cancel) one run and take its status. */
static int
job_call(IoEngine *eng, IoEngineRun *run, const char *method, const char *what,
		 TmsError *err)
{
	IoStrBuf	path;
	json_t	   *doc;
	json_t	   *job;
	int			rc;

	io_sb_init(&path);
	runs_path(eng, &path, run->run_id);
	if (path.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	doc = gravitino_call(eng, method, path.data, NULL, true, false, what, err);
	io_sb_free(&path);
	if (doc == NULL)
		return -1;
	job = json_object_get(doc, "job");
	rc = json_is_object(job) ? apply_job(run, job, err) :
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200, "malformed %s response: no \"job\"", what);
	json_decref(doc);
	return rc;
}

/* See engine_client_int.h. */
int
io_gravitino_poll(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	return job_call(eng, run, "GET", "gravitino job request", err);
}

/* See engine_client_int.h. */
int
io_gravitino_cancel(IoEngine *eng, IoEngineRun *run, TmsError *err)
{
	return job_call(eng, run, "POST", "gravitino job cancel request", err);
}

/* The createTime of a JobDTO ("" when none). */
static const char *
create_time(const json_t *job)
{
	const char *t = json_string_value(json_object_get(json_object_get(job, "audit"),
													  "createTime"));

	return t ? t : "";
}

/* Is a JobDTO's status one of an ended run? */
static bool
job_ended(const json_t *job)
{
	const char *s = json_string_value(json_object_get(job, "status"));

	return s != NULL && (strcasecmp(s, "succeeded") == 0 || strcasecmp(s, "failed") == 0 ||
						 strcasecmp(s, "cancelled") == 0);
}

/* Is a the better match than b (NULL)? */
static bool
better_match(const json_t *a, const json_t *b)
{
	if (b == NULL)
		return true;
	if (job_ended(a) != job_ended(b))
		return !job_ended(a);
	return strcmp(create_time(a), create_time(b)) > 0;
}

/* qsort: newest createTime first. */
static int
newest_first(const void *a, const void *b)
{
	return strcmp(create_time(*(json_t *const *) b), create_time(*(json_t *const *) a));
}

/* 1: jobConf holds tms_tag == tag, 0: it does not, -1: no jobConf. */
static int
job_has_tag(const json_t *job, const char *tag)
{
	json_t	   *conf = json_object_get(job, "jobConf");
	const char *t;

	if (!json_is_object(conf))
		return -1;
	t = json_string_value(json_object_get(conf, "tms_tag"));
	return t != NULL && strcmp(t, tag) == 0 ? 1 : 0;
}

/* See engine_client_int.h. */
int
io_gravitino_find(IoEngine *eng, const char *tag, const char *template_name,
				  IoEngineRun *run, bool *found, TmsError *err)
{
	IoStrBuf	path;
	json_t	   *doc;
	json_t	   *jobs;
	json_t	   *best = NULL;
	json_t	  **unknown = NULL;
	json_t	   *fetched = NULL;
	size_t		nunknown = 0,
				i;
	int			rc = 0;

	if (template_name == NULL || template_name[0] == '\0')
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "finding a gravitino run needs its job template name");
	io_sb_init(&path);
	runs_path(eng, &path, NULL);
	io_sb_puts(&path, "?jobTemplateName=");
	io_engine_append_encoded(&path, template_name);
	if (path.oom)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	doc = gravitino_call(eng, "GET", path.data, NULL, true, false,
						 "gravitino job list request", err);
	io_sb_free(&path);
	if (doc == NULL)
		return -1;
	jobs = json_object_get(doc, "jobs");
	if (!json_is_array(jobs))
	{
		json_decref(doc);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed gravitino job list: no \"jobs\"");
	}
	unknown = io_calloc(json_array_size(jobs) + 1, sizeof(json_t *));
	if (unknown == NULL)
	{
		json_decref(doc);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (i = 0; i < json_array_size(jobs); i++)
	{
		json_t	   *job = json_array_get(jobs, i);
		int			has = job_has_tag(job, tag);

		if (!valid_job_id(json_string_value(json_object_get(job, "jobId"))))
			continue;
		if (has == 1 && better_match(job, best))
			best = job;
		else if (has == -1)
			unknown[nunknown++] = job;
	}
	if (best == NULL && nunknown > 0)
	{
		/* the listing has no jobConf: read the runs, newest first */
		qsort(unknown, nunknown, sizeof(json_t *), newest_first);
		for (i = 0; i < nunknown && rc == 0; i++)
		{
			json_t	   *one;
			int			has;

			if (i == FIND_MAX_GETS)
			{
				rc = tms_error_set(err, IO_ERR_UNSUPPORTED,
								   "gravitino lists more than %d runs of job template \"%.100s\" without their jobConf: cannot find the run of tag \"%.100s\"",
								   FIND_MAX_GETS, template_name, tag);
				break;
			}
			io_sb_init(&path);
			runs_path(eng, &path, json_string_value(json_object_get(unknown[i], "jobId")));
			if (path.oom)
			{
				rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
				break;
			}
			one = gravitino_call(eng, "GET", path.data, NULL, true, false,
								 "gravitino job request", err);
			io_sb_free(&path);
			if (one == NULL)
			{
				rc = -1;
				break;
			}
			has = job_has_tag(json_object_get(one, "job"), tag);
			if (has == -1)
				rc = tms_error_set(err, IO_ERR_UNSUPPORTED,
								   "gravitino does not show the jobConf of its runs: cannot find the run of tag \"%.100s\"",
								   tag);
			else if (has == 1)
			{
				fetched = json_incref(json_object_get(one, "job"));
				best = fetched;
			}
			json_decref(one);
			if (best != NULL)
				break;
		}
	}
	if (rc == 0 && best != NULL)
	{
		rc = take_job(eng, run, best, err);
		if (rc == 0)
			*found = true;
	}
	json_decref(fetched);
	io_free(unknown);
	json_decref(doc);
	return rc;
}

/* See engine_client_int.h. */
int
io_gravitino_attach(IoEngine *eng, const char *run_id, IoEngineRun *run, TmsError *err)
{
	if (!valid_job_id(run_id))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid gravitino job id \"%.100s\"", run_id);
	if (io_engine_run_init(eng, run, err) != 0)
		return -1;
	run->run_id = io_strdup(run_id);
	if (run->run_id == NULL)
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return 0;
}

/* See engine_client_int.h. */
int
io_gravitino_offers_template(IoEngine *eng, const char *template_name, bool *offered,
							 char **names, TmsError *err)
{
	IoStrBuf	path;
	IoStrBuf	list;
	json_t	   *doc;
	json_t	   *arr;
	size_t		i;
	bool		cut = false;

	io_sb_init(&path);
	io_sb_puts(&path, "/api/metalakes/");
	io_engine_append_encoded(&path, eng->metalake);
	io_sb_puts(&path, "/jobs/templates");
	if (path.oom)
	{
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	doc = gravitino_call(eng, "GET", path.data, NULL, true, false,
						 "gravitino job template list request", err);
	io_sb_free(&path);
	if (doc == NULL)
		return -1;
	arr = json_object_get(doc, "names");
	if (!json_is_array(arr))
	{
		json_decref(doc);
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed gravitino job template list: no \"names\"");
	}
	io_sb_init(&list);
	for (i = 0; i < json_array_size(arr); i++)
	{
		const char *n = json_string_value(json_array_get(arr, i));

		if (n == NULL)
			continue;
		if (strcmp(n, template_name) == 0)
			*offered = true;
		if (cut)
			continue;
		if (list.len + strlen(n) + 2 > IO_ENGINE_TEMPLATE_LIST_MAX)
		{
			io_sb_puts(&list, list.len ? ", ..." : "...");
			cut = true;
			continue;
		}
		if (list.len)
			io_sb_puts(&list, ", ");
		io_sb_puts(&list, n);
	}
	json_decref(doc);
	*names = list.oom ? NULL : io_sb_steal(&list);
	io_sb_free(&list);
	if (*names == NULL)
	{
		*offered = false;
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}
