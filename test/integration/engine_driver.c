/*-------------------------------------------------------------------------
 *
 * engine_driver.c
 *		A command-line driver of the engine clients of src/io (engine_client.h)
 *		for the integration tests (test/integration/test_engine_clients.py),
 *		which compile it with the files of src/io/ and run it against stub
 *		Livy, Trino and Gravitino servers.
 *
 *	engine_driver [options] STEP...
 *	  options: -t livy|trino|gravitino  -u URI  -c CATALOG  -m METALAKE
 *			   -U USER  -P PASSWORD  -K TOKEN  -C CLIENT_ID:SECRET
 *			   -O OAUTH2_SERVER_URI  -S SCOPE  -T REQUEST_TIMEOUT_MS
 *			   -r RETRIES  -b RETRY_BASE_MS  -i POLL_INTERVAL_MS
 *			   -B MAX_RESPONSE_BYTES  -q STATEMENT (for find and attach)
 *			   -j TEMPLATE (gravitino find)  -s NAME=VALUE (a trino
 *			   session property, or a livy session request member
 *			   with a JSON value; repeatable)
 *	  steps, run in order on one handle and one run:
 *		submit TAG STATEMENT	poll	wait MS		cancel
 *		find TAG				attach RUN_ID		close	count
 *
 * Each step prints one JSON line: {"step":..,"ok":true,"run":{...}} (find
 * adds "found"; count prints "requests") or {"step":..,"ok":false,
 * "error":{"code":..,"http_status":..,"message":..,"detail":..}}; a
 * failed step does not stop the others.  Exit status 0, or 2 on bad
 * usage.
 *
 * test/integration/engine_driver.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/engines/engine_client.h"

/* Print s as a JSON string (NULL: null). */
static void
put_json_string(const char *s)
{
	const unsigned char *p;

	if (s == NULL)
	{
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (p = (const unsigned char *) s; *p; p++)
	{
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", stdout);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static const char *
state_name(IoEngineRunState s)
{
	switch (s)
	{
		case IO_ENGINE_RUN_PENDING:
			return "pending";
		case IO_ENGINE_RUN_RUNNING:
			return "running";
		case IO_ENGINE_RUN_SUCCEEDED:
			return "succeeded";
		case IO_ENGINE_RUN_FAILED:
			return "failed";
		case IO_ENGINE_RUN_CANCELLED:
			return "cancelled";
	}
	return "?";
}

static void
put_run(const IoEngineRun *run)
{
	size_t		i,
				j;

	fputs("{\"run_id\":", stdout);
	put_json_string(run->run_id);
	printf(",\"state\":\"%s\",\"message\":", state_name(run->state));
	put_json_string(run->message);
	printf(",\"rows_lost\":%s,\"columns\":[", run->rows_lost ? "true" : "false");
	for (i = 0; i < run->ncolumns; i++)
	{
		if (i > 0)
			putchar(',');
		put_json_string(run->columns[i]);
	}
	fputs("],\"rows\":[", stdout);
	for (i = 0; i < run->nrows; i++)
	{
		if (i > 0)
			putchar(',');
		putchar('[');
		for (j = 0; j < run->ncolumns; j++)
		{
			if (j > 0)
				putchar(',');
			put_json_string(run->rows[i][j]);
		}
		putchar(']');
	}
	fputs("]}", stdout);
}

static void
put_result(const char *step, int rc, const IoEngineRun *run, const TmsError *err,
		   const bool *found)
{
	printf("{\"step\":\"%s\",\"ok\":%s", step, rc == 0 ? "true" : "false");
	if (rc != 0)
	{
		printf(",\"error\":{\"code\":\"%s\",\"http_status\":%ld,\"message\":",
			   tms_error_code_name(err->code), err->http_status);
		put_json_string(err->message);
		fputs(",\"detail\":", stdout);
		put_json_string(err->detail);
		putchar('}');
	}
	else
	{
		if (found != NULL)
			printf(",\"found\":%s", *found ? "true" : "false");
		if (run != NULL && run->priv != NULL)
		{
			fputs(",\"run\":", stdout);
			put_run(run);
		}
	}
	fputs("}\n", stdout);
	fflush(stdout);
}

static int
usage(void)
{
	fprintf(stderr, "usage: engine_driver [options] STEP...\n");
	return 2;
}

int
main(int argc, char **argv)
{
	IoEngineConfig cfg;
	IoKeyValue	session[16];
	size_t		nsession = 0;
	const char *statement = NULL;
	const char *template_name = NULL;
	IoEngine   *eng;
	IoEngineRun run;
	TmsError	err;
	int			opt;
	int			i;

	io_init();
	memset(&cfg, 0, sizeof(cfg));
	memset(&run, 0, sizeof(run));
	cfg.http.retries = -1;
	while ((opt = getopt(argc, argv, "t:u:c:m:U:P:K:C:O:S:T:r:b:i:B:q:j:s:")) != -1)
	{
		switch (opt)
		{
			case 't':
				if (strcmp(optarg, "livy") == 0)
					cfg.type = IO_ENGINE_LIVY;
				else if (strcmp(optarg, "trino") == 0)
					cfg.type = IO_ENGINE_TRINO;
				else if (strcmp(optarg, "gravitino") == 0)
					cfg.type = IO_ENGINE_GRAVITINO;
				else
					return usage();
				break;
			case 'u':
				cfg.uri = optarg;
				break;
			case 'c':
				cfg.catalog = optarg;
				break;
			case 'm':
				cfg.metalake = optarg;
				break;
			case 'U':
				cfg.user = optarg;
				break;
			case 'P':
				cfg.password = optarg;
				break;
			case 'K':
				cfg.token = optarg;
				break;
			case 'C':
				cfg.credential = optarg;
				break;
			case 'O':
				cfg.oauth2_server_uri = optarg;
				break;
			case 'S':
				cfg.scope = optarg;
				break;
			case 'T':
				cfg.http.request_timeout_ms = atol(optarg);
				break;
			case 'r':
				cfg.http.retries = atoi(optarg);
				break;
			case 'b':
				cfg.http.retry_base_ms = atol(optarg);
				break;
			case 'i':
				cfg.poll_interval_ms = atol(optarg);
				break;
			case 'B':
				cfg.http.max_response_bytes = (size_t) atol(optarg);
				break;
			case 'q':
				statement = optarg;
				break;
			case 'j':
				template_name = optarg;
				break;
			case 's':
				{
					char	   *eq = strchr(optarg, '=');

					if (eq == NULL || nsession == 16)
						return usage();
					*eq = '\0';
					session[nsession].key = optarg;
					session[nsession].value = eq + 1;
					nsession++;
				}
				break;
			default:
				return usage();
		}
	}
	eng = io_engine_open(&cfg, &err);
	if (eng == NULL)
	{
		put_result("open", -1, NULL, &err, NULL);
		return 0;
	}
	for (i = optind; i < argc; i++)
	{
		const char *step = argv[i];
		int			rc;

		tms_error_clear(&err);
		if (strcmp(step, "submit") == 0 && i + 2 < argc)
		{
			io_engine_run_free(&run);
			rc = io_engine_submit(eng, argv[i + 1], argv[i + 2], session, nsession,
								  &run, &err);
			i += 2;
			put_result(step, rc, &run, &err, NULL);
		}
		else if (strcmp(step, "poll") == 0)
		{
			rc = io_engine_poll(eng, &run, &err);
			put_result(step, rc, &run, &err, NULL);
		}
		else if (strcmp(step, "wait") == 0 && i + 1 < argc)
		{
			rc = io_engine_wait(eng, &run, atol(argv[++i]), &err);
			put_result(step, rc, &run, &err, NULL);
		}
		else if (strcmp(step, "cancel") == 0)
		{
			rc = io_engine_cancel(eng, &run, &err);
			put_result(step, rc, &run, &err, NULL);
		}
		else if (strcmp(step, "find") == 0 && i + 1 < argc)
		{
			bool		found;

			io_engine_run_free(&run);
			rc = io_engine_find(eng, argv[++i], statement, template_name, &run,
								&found, &err);
			put_result(step, rc, &run, &err, &found);
		}
		else if (strcmp(step, "attach") == 0 && i + 1 < argc)
		{
			io_engine_run_free(&run);
			rc = io_engine_attach(eng, argv[++i], statement, &run, &err);
			put_result(step, rc, &run, &err, NULL);
		}
		else if (strcmp(step, "close") == 0)
		{
			rc = io_engine_close(eng, &run, &err);
			put_result(step, rc, NULL, &err, NULL);
		}
		else if (strcmp(step, "count") == 0)
			printf("{\"step\":\"count\",\"ok\":true,\"requests\":%llu}\n",
				   (unsigned long long) io_engine_request_count(eng));
		else
		{
			io_engine_run_free(&run);
			io_engine_free(eng);
			return usage();
		}
	}
	io_engine_run_free(&run);
	io_engine_free(eng);
	io_http_shutdown();
	return 0;
}
