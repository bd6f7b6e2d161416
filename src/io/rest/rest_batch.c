/*-------------------------------------------------------------------------
 *
 * rest_batch.c
 *		Many table loads at once (io_catalog_load_tables_etag): up to
 *		"concurrency" GETs in flight on the HTTP core's batch multi
 *		handle, each load like io_catalog_load_table_etag, results handed
 *		to the caller's callback as they complete.
 *
 * Rules: only the bodies of the requests in flight are held; each request
 * is retried alone (connection failures, 429/5xx with backoff or the
 * longer wait a Retry-After asks for, never a timeout), each attempt
 * with headers made when it is sent (io_rest_headers: a fresh SigV4
 * signature); one OAuth token serves the batch and is refreshed at most
 * once after a 401; the callback runs in the calling thread between two
 * polls, never inside libcurl.
 *
 * src/io/rest/rest_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/rest/rest_int.h"

/* One transfer slot of a batch of loads. */
typedef struct LoadSlot
{
	bool		used;			/* holds a request (in flight or waiting) */
	bool		in_flight;
	size_t		idx;			/* index into the requests */
	int			attempt;		/* transport/5xx retries so far */
	bool		auth_retried;	/* retried once after a 401 */
	uint64_t	token_gen;		/* cat->oauth.fetches when sent */
	int64_t		ready_ms;		/* waiting: backoff ends */
	char	   *path;
	char	   *inm;
} LoadSlot;

/*
 * Send the slot's request (a new attempt, with headers made now: a
 * signature is fresh on every retry).  Returns 0 or -1 with *err.
 */
static int
load_slot_send(IoCatalog *cat, IoHttpBatch *b, int i, LoadSlot *s, TmsError *err)
{
	const char *extra[2];
	size_t		nextra = 0;
	IoStringList headers = {NULL, 0};
	IoStrBuf	url;
	IoHttpRequest req;
	int			rc;

	if (io_rest_ensure_token(cat, err) != 0)
		return -1;
	io_sb_init(&url);
	io_sb_printf(&url, "%s/%s", cat->uri, s->path);
	extra[nextra++] = "X-Iceberg-Access-Delegation: vended-credentials";
	if (s->inm != NULL)
		extra[nextra++] = s->inm;
	if (url.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	else
		rc = io_rest_headers(cat, "GET", url.data, NULL, extra, nextra, time(NULL),
							 &headers, NULL, err);
	if (rc == 0)
	{
		memset(&req, 0, sizeof(req));
		req.method = "GET";
		req.url = url.data;
		req.headers = (const char *const *) headers.items;
		req.nheaders = headers.n;
		req.idempotent = true;
		req.what = "catalog";
		req.attempt = s->attempt;
		rc = io_http_batch_start(b, i, &req, err);
	}
	/* the batch copied the headers, which carry the token */
	io_string_list_wipe(&headers);
	io_sb_free(&url);
	if (rc == 0)
	{
		cat->requests++;
		s->in_flight = true;
		s->token_gen = cat->oauth.fetches;
	}
	return rc;
}

/* Release a slot's request. */
static void
load_slot_clear(LoadSlot *s)
{
	io_free(s->path);
	io_free(s->inm);
	memset(s, 0, sizeof(*s));
}

/*
 * A request of the batch finished (rc 0: resp; -1: *rerr).  Decide: retry
 * (returns 1, the slot stays used), or deliver the result to fn (returns
 * 0, the slot is cleared), or stop the batch (-1 with *err: the callback
 * asked to, or the token could not be refreshed).  *refreshed tells
 * whether the batch already fetched a new token after a 401.
 */
static int
load_slot_finished(IoCatalog *cat, const IoLoadRequest *reqs, LoadSlot *s,
				   int rc, IoHttpResponse *resp, TmsError *rerr,
				   const IoHttpOptions *opt, bool *refreshed, IoLoadResultFn fn,
				   void *arg, TmsError *err)
{
	const IoLoadRequest *r = &reqs[s->idx];
	IoLoadedTable t;
	int			stop;

	s->in_flight = false;
	if (rc == 0 && resp->status == 401 && cat->client_id != NULL && !s->auth_retried &&
		(s->token_gen != cat->oauth.fetches || !*refreshed))
	{
		/*
		 * Token revoked or expired early: one new token for the batch (a
		 * request sent with an older token than the current one is just sent
		 * again).
		 */
		if (s->token_gen == cat->oauth.fetches)
		{
			io_oauth2_forget(&cat->oauth);
			*refreshed = true;
			if (io_rest_fetch_token(cat, err) != 0)
				return -1;
		}
		s->auth_retried = true;
		s->ready_ms = 0;
		return 1;
	}
	if (s->attempt < opt->retries &&
		((rc != 0 && rerr->code == IO_ERR_CONNECT) ||
		 (rc == 0 && io_http_retryable_status(resp->status))))
	{
		s->ready_ms = io_now_ms() +
			io_http_retry_delay_ms(opt, s->attempt, rc == 0 ? resp : NULL);
		s->attempt++;
		return 1;
	}
	memset(&t, 0, sizeof(t));
	if (rc == 0)
		rc = io_rest_load_response(cat, r->ns, r->table, r->known_etag, s->inm,
								   resp, &t, rerr);
	stop = fn(arg, s->idx, rc == 0 ? &t : NULL, rc == 0 ? NULL : rerr);
	io_loaded_table_free(&t);
	load_slot_clear(s);
	if (stop)
		return tms_error_set(err, IO_ERR_INTERRUPTED,
							 "loading tables stopped by the caller");
	return 0;
}

/* See io.h. */
int
io_catalog_load_tables_etag(IoCatalog *cat, const IoLoadRequest *reqs, size_t n,
							int concurrency, IoLoadResultFn fn, void *arg,
							TmsError *err)
{
	IoHttpOptions opt;
	IoHttpBatch *b;
	LoadSlot   *slots;
	size_t		next = 0;
	size_t		done = 0;
	bool		refreshed = false;
	int			nslots;
	int			rc = 0;
	int			i;

	tms_error_clear(err);
	if (n == 0)
		return 0;
	if (concurrency < 1)
		concurrency = 1;
	nslots = (size_t) concurrency < n ? concurrency : (int) n;
	io_http_options_resolve(&cat->http, &opt);
	/* one token for the whole batch, fetched before the first request */
	if (io_rest_ensure_token(cat, err) != 0)
		return -1;
	b = io_http_batch_create(&cat->http, nslots, err);
	if (b == NULL)
		return -1;
	slots = io_calloc(nslots, sizeof(LoadSlot));
	if (slots == NULL)
	{
		io_http_batch_free(b);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}

	while (done < n)
	{
		int64_t		now = io_now_ms();
		long		timeout = IO_POLL_INTERVAL_MS;
		int			slot;
		int			trc;
		IoHttpResponse resp;
		TmsError	rerr;

		/* start what is ready: new requests into free slots, retries due */
		for (i = 0; i < nslots && rc == 0; i++)
		{
			LoadSlot   *s = &slots[i];

			if (!s->used && next < n)
			{
				const IoLoadRequest *r = &reqs[next];

				s->used = true;
				s->idx = next++;
				if (io_rest_load_request(cat, r->ns, r->table, r->known_etag,
										 &s->path, &s->inm, &rerr) != 0)
				{
					/* a bad request fails alone */
					int			stop = fn(arg, s->idx, NULL, &rerr);

					load_slot_clear(s);
					done++;
					if (stop)
						rc = tms_error_set(err, IO_ERR_INTERRUPTED,
										   "loading tables stopped by the caller");
					i--;		/* this slot is free again */
					continue;
				}
				s->ready_ms = 0;
			}
			if (s->used && !s->in_flight)
			{
				if (s->ready_ms <= now)
					rc = load_slot_send(cat, b, i, s, err);
				else if (s->ready_ms - now < timeout)
					timeout = (long) (s->ready_ms - now);
			}
		}
		if (rc != 0 || done >= n)
			break;

		if (io_http_batch_wait(b, timeout, err) != 0)
		{
			rc = -1;
			break;
		}
		while (rc == 0 && io_http_batch_done(b, &slot, &trc, &resp, &rerr))
		{
			int			r = load_slot_finished(cat, reqs, &slots[slot], trc,
											   &resp, &rerr, &opt, &refreshed, fn,
											   arg, err);

			io_http_response_free(&resp);
			if (r < 0)
				rc = -1;
			else if (r == 0)
				done++;
		}
		if (rc != 0)
			break;
	}

	/* abandon what is still in flight (interrupt, stop) */
	io_http_batch_free(b);
	for (i = 0; i < nslots; i++)
		load_slot_clear(&slots[i]);
	io_free(slots);
	return rc;
}
