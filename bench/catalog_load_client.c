/*
 * catalog_load_client.c -- the physical limit of a refresh against a REST
 * catalog: table loads, K in flight on kept-alive connections, as fast as
 * the catalog answers them, with nothing else done per table.
 *
 *	catalog_load_client URL_PREFIX FIRST COUNT IN_FLIGHT
 *
 * URL_PREFIX is the tables' URL up to the table number, e.g.
 * http://127.0.0.1:PORT/v1/bench/namespaces/bench/tables/t ; the tables are
 * URL_PREFIX followed by FIRST .. FIRST+COUNT-1 in six digits (the names
 * bench/policy_cycle.py gives them).  Two passes: the first loads every
 * table without a condition and keeps its ETag, the second loads every
 * table again with If-None-Match: that ETag (Iceberg REST, loadTable: 304
 * Not Modified when the ETag still matches).  Prints one JSON line per
 * pass: requests, statuses, seconds, requests per second, and this
 * client's own CPU seconds.  Plain C and libcurl; built and run by
 * bench/policy_refresh_bench.py (gcc -O2 ... -lcurl).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

typedef struct Slot
{
	CURL	   *easy;
	struct curl_slist *hdr;
	long		table;			/* index, -1: idle */
	char		url[512];
	char		inm[160];
}			Slot;

static char **etags;
static long first;

static size_t
discard(char *p, size_t s, size_t n, void *arg)
{
	(void) p;
	(void) arg;
	return s * n;
}

static size_t
header(char *p, size_t s, size_t n, void *arg)
{
	Slot	   *sl = arg;
	size_t		len = s * n;

	if (len > 6 && strncasecmp(p, "ETag:", 5) == 0 && etags[sl->table] == NULL)
	{
		const char *v = p + 5;
		size_t		vl = len - 5;

		while (vl > 0 && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		etags[sl->table] = strndup(v, vl);
	}
	return len;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
start(CURLM *m, Slot * sl, const char *prefix, long table, int conditional)
{
	sl->table = table;
	snprintf(sl->url, sizeof(sl->url), "%s%06ld", prefix, first + table);
	curl_easy_setopt(sl->easy, CURLOPT_URL, sl->url);
	curl_slist_free_all(sl->hdr);
	sl->hdr = NULL;
	if (conditional && etags[table] != NULL)
	{
		snprintf(sl->inm, sizeof(sl->inm), "If-None-Match: %s", etags[table]);
		sl->hdr = curl_slist_append(NULL, sl->inm);
	}
	curl_easy_setopt(sl->easy, CURLOPT_HTTPHEADER, sl->hdr);
	curl_multi_add_handle(m, sl->easy);
}

static void
pass(CURLM *m, Slot * slots, int k, const char *prefix, long count, int conditional)
{
	long		next = 0,
				done = 0,
				s200 = 0,
				s304 = 0,
				other = 0;
	double		t0 = now(),
				c0 = cpu(),
				t;

	for (int i = 0; i < k && next < count; i++)
		start(m, &slots[i], prefix, next++, conditional);
	while (done < count)
	{
		int			running,
					left;
		CURLMsg    *msg;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL)
		{
			Slot	   *sl = NULL;
			long		code = 0;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &sl);
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
			if (msg->data.result == CURLE_OK && code == 200)
				s200++;
			else if (msg->data.result == CURLE_OK && code == 304)
				s304++;
			else
				other++;
			curl_multi_remove_handle(m, msg->easy_handle);
			done++;
			if (next < count)
				start(m, sl, prefix, next++, conditional);
		}
		if (done < count)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	t = now() - t0;
	printf("{\"pass\": \"%s\", \"requests\": %ld, \"status_200\": %ld, \"status_304\": %ld,"
		   " \"other\": %ld, \"in_flight\": %d, \"seconds\": %.3f, \"per_second\": %.0f,"
		   " \"client_cpu_seconds\": %.3f}\n",
		   conditional ? "conditional" : "full", count, s200, s304, other, k, t,
		   count / t, cpu() - c0);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	const char *prefix;
	long		count;
	int			k;
	Slot	   *slots;
	CURLM	   *m;

	if (argc != 5)
	{
		fprintf(stderr, "usage: %s URL_PREFIX FIRST COUNT IN_FLIGHT\n", argv[0]);
		return 2;
	}
	prefix = argv[1];
	first = atol(argv[2]);
	count = atol(argv[3]);
	k = atoi(argv[4]);
	if (count < 1 || k < 1 || k > 256 || strlen(prefix) > 400)
	{
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	etags = calloc(count, sizeof(char *));
	slots = calloc(k, sizeof(Slot));
	m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long) k);
	for (int i = 0; i < k; i++)
	{
		CURL	   *e = curl_easy_init();

		slots[i].easy = e;
		slots[i].table = -1;
		curl_easy_setopt(e, CURLOPT_PRIVATE, &slots[i]);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, &slots[i]);
		curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
	}
	pass(m, slots, k, prefix, count, 0);
	pass(m, slots, k, prefix, count, 1);
	return 0;
}
