/*-------------------------------------------------------------------------
 *
 * http.c
 *		The HTTP core of the io layer over libcurl.
 *
 * One multi handle and one easy handle per process are kept for the
 * process's life: connections (and TLS sessions, DNS entries) are reused
 * from request to request.  Every transfer runs through curl_multi with
 * curl_multi_poll() waking at least every IO_POLL_INTERVAL_MS, so the
 * caller's interrupt callback is checked during DNS resolution (the
 * threaded resolver), connect, TLS and transfer alike; an interrupted
 * request ends within one poll interval.  Every curl_multi_poll is
 * bracketed by the options' waiting callback (inside PostgreSQL: the wait
 * event pg_stat_activity shows), and the interrupt callback, polled
 * between them, may end the process (when the postmaster died).
 *
 * Batches (io_http_batch_*) run several transfers at once on a second
 * multi handle, also kept for the process's life so that the connections
 * of one batch serve the next.
 *
 * Requests marked idempotent are retried on connection failures and on
 * 429/500/502/503/504 with exponential backoff and jitter, up to the
 * configured count, waiting at least what a 429 or 503 asks for in its
 * Retry-After (RFC 9110 10.2.3: seconds or an HTTP date; at most
 * IO_MAX_RETRY_AFTER_MS); a timeout is never retried (the timeout is the
 * caller's budget), and non-idempotent requests (commits) never are.
 * A request may have its headers made anew for every attempt (a SigV4
 * signature covers the date, so a retry is signed again).
 * Every connection is checked against the hosts tms may reach
 * (tms.allowed_hosts, reach.h) before it is made and before each request
 * on a reused one: a refused one fails the transfer with IO_ERR_FORBIDDEN,
 * never retried.
 * Redirects are not followed (they would carry credentials elsewhere),
 * only http and https are allowed, TLS peers and host names are verified,
 * and every easy handle has CURLOPT_PATH_AS_IS: libcurl sends the path as
 * built and never normalises dot segments out of it.
 *
 * Every exchange that ends, with a response or a transport error, is told
 * to the options' observer, if any (its attempt, status or error code and
 * libcurl's total time): what the server side counts as requests, errors
 * and latencies.
 *
 * No callback here calls back into the caller except the interrupt check
 * and the observer, and nothing longjmps: the callbacks only copy bytes
 * into buffers.
 *
 * src/io/http/http.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "io/io_int.h"
#include "io/http/reach.h"

#define IO_DEFAULT_CONNECT_TIMEOUT_MS	10000
#define IO_DEFAULT_REQUEST_TIMEOUT_MS	60000
#define IO_DEFAULT_RETRIES				2
#define IO_DEFAULT_RETRY_BASE_MS		200
#define IO_DEFAULT_MAX_RESPONSE			((size_t) 64 * 1024 * 1024)
#define IO_MAX_BACKOFF_MS				5000
/* the longest Retry-After honoured: a longer one waits this long */
#define IO_MAX_RETRY_AFTER_MS			60000
#define IO_MAX_HEADER_BYTES				(256 * 1024)

static bool curl_initialised = false;
static CURLM *proc_multi = NULL;
static CURL *proc_easy = NULL;
static bool proc_busy = false;

/*
 * The multi handle of batches, kept for the process's life like the one
 * above: its connection cache keeps the connections of one batch open for
 * the next (no new TCP and TLS handshakes every batch).
 */
static CURLM *batch_multi = NULL;
static long batch_maxconnects = 0;
static bool batch_busy = false;

/* State the libcurl callbacks write into. */
typedef struct Transfer
{
	IoStrBuf	body;
	size_t		max_body;
	bool		too_large;
	IoStringList headers;
	size_t		header_bytes;
	bool		header_oom;
	struct curl_slist *hdrs;	/* request headers, freed after the transfer */
	char		errbuf[CURL_ERROR_SIZE];
	char		where[256];		/* URL for messages */
	/* for the observer (the request is gone by the end of a batch's) */
	char		what[64];
	char		method[16];
	int			attempt;
	IoReach		reach;			/* tms.allowed_hosts' check (reach.h) */
} Transfer;

/* Fill in defaults for zero/negative fields. */
void
io_http_options_resolve(const IoHttpOptions *in, IoHttpOptions *out)
{
	if (in != NULL)
		*out = *in;
	else
		memset(out, 0, sizeof(*out));
	if (out->connect_timeout_ms <= 0)
		out->connect_timeout_ms = IO_DEFAULT_CONNECT_TIMEOUT_MS;
	if (out->request_timeout_ms <= 0)
		out->request_timeout_ms = IO_DEFAULT_REQUEST_TIMEOUT_MS;
	if (out->retries < 0)
		out->retries = IO_DEFAULT_RETRIES;
	if (out->retry_base_ms <= 0)
		out->retry_base_ms = IO_DEFAULT_RETRY_BASE_MS;
	if (out->max_response_bytes == 0)
		out->max_response_bytes = IO_DEFAULT_MAX_RESPONSE;
	if (out->max_json_bytes == 0)
		out->max_json_bytes = IO_DEFAULT_MAX_JSON_BYTES;
}

/*
 * libcurl write callback: append to the body unless over the cap.  With
 * CURLOPT_ACCEPT_ENCODING libcurl hands this callback the decoded bytes,
 * so the cap bounds the body after gzip/deflate/br are undone, not the
 * bytes on the wire (a small compressed bomb is refused as well).
 */
static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Transfer   *t = userdata;
	size_t		n = size * nmemb;

	if (t->body.len + n > t->max_body)
	{
		t->too_large = true;
		return 0;				/* makes libcurl fail with CURLE_WRITE_ERROR */
	}
	io_sb_append(&t->body, ptr, n);
	if (t->body.oom)
		return 0;
	return n;
}

/*
 * libcurl header callback: keep "name: value" lines of the final
 * response (a new status line starts over, e.g. after 100 Continue).
 */
static size_t
header_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Transfer   *t = userdata;
	size_t		n = size * nmemb;
	size_t		len = n;
	char	  **items;

	while (len > 0 && (ptr[len - 1] == '\n' || ptr[len - 1] == '\r'))
		len--;
	if (len >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
	{
		io_string_list_free(&t->headers);
		t->header_bytes = 0;
		return n;
	}
	if (len == 0)
		return n;
	t->header_bytes += len;
	if (t->header_bytes > IO_MAX_HEADER_BYTES)
		return n;				/* ignore absurd header volumes */
	items = io_realloc(t->headers.items, (t->headers.n + 1) * sizeof(char *));
	if (items == NULL)
	{
		t->header_oom = true;
		return 0;
	}
	t->headers.items = items;
	items[t->headers.n] = io_strndup(ptr, len);
	if (items[t->headers.n] == NULL)
	{
		t->header_oom = true;
		return 0;
	}
	t->headers.n++;
	return n;
}

/* Value of a response header, case-insensitive; borrowed, or NULL. */
const char *
io_http_header(const IoHttpResponse *resp, const char *name, size_t *len)
{
	size_t		nlen = strlen(name);
	size_t		i;

	for (i = 0; i < resp->headers.n; i++)
	{
		const char *h = resp->headers.items[i];

		if (strncasecmp(h, name, nlen) == 0 && h[nlen] == ':')
		{
			const char *v = h + nlen + 1;
			size_t		vlen;

			while (*v == ' ' || *v == '\t')
				v++;
			vlen = strlen(v);
			while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
				vlen--;
			if (len)
				*len = vlen;
			return v;
		}
	}
	return NULL;
}

void
io_http_response_free(IoHttpResponse *resp)
{
	if (resp == NULL)
		return;
	io_free(resp->body);
	io_string_list_free(&resp->headers);
	memset(resp, 0, sizeof(*resp));
}

/*
 * Write "scheme://host[:port]/path" of url into buf, without user info or
 * query string, for messages.
 */
static void
url_for_message(const char *url, char *buf, size_t size)
{
	const char *scheme_end = strstr(url, "://");
	const char *host = scheme_end ? scheme_end + 3 : url;
	const char *at;
	const char *slash = strchr(host, '/');
	const char *q;
	size_t		n;

	at = strchr(host, '@');
	if (at != NULL && (slash == NULL || at < slash))
		host = at + 1;
	q = strpbrk(host, "?#");
	n = q ? (size_t) (q - host) : strlen(host);
	if (scheme_end != NULL)
		snprintf(buf, size, "%.*s://%.*s", (int) (scheme_end - url), url, (int) n, host);
	else
		snprintf(buf, size, "%.*s", (int) n, host);
}

/* Create the per-process handles on first use. */
static bool
ensure_global(void)
{
	if (!curl_initialised)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return false;
		curl_initialised = true;
	}
	if (proc_multi == NULL)
		proc_multi = curl_multi_init();
	if (proc_easy == NULL)
		proc_easy = curl_easy_init();
	return proc_multi != NULL && proc_easy != NULL;
}

/* Release the cached handles and libcurl's global state. */
void
io_http_shutdown(void)
{
	if (proc_busy)
		return;
	if (proc_easy != NULL)
		curl_easy_cleanup(proc_easy);
	if (proc_multi != NULL)
		curl_multi_cleanup(proc_multi);
	proc_easy = NULL;
	proc_multi = NULL;
	if (batch_busy)
		return;
	if (batch_multi != NULL)
		curl_multi_cleanup(batch_multi);
	batch_multi = NULL;
	batch_maxconnects = 0;
	if (curl_initialised)
		curl_global_cleanup();
	curl_initialised = false;
}

/* Map a libcurl result to an error code. */
static IoErrorCode
map_curl_code(CURLcode rc)
{
	switch (rc)
	{
		case CURLE_OPERATION_TIMEDOUT:
			return IO_ERR_TIMEOUT;
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
		case CURLE_COULDNT_CONNECT:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			return IO_ERR_CONNECT;
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CIPHER:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_ISSUER_ERROR:
		case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		case CURLE_SSL_INVALIDCERTSTATUS:
		case CURLE_SSL_CRL_BADFILE:
			return IO_ERR_TLS;
		case CURLE_OUT_OF_MEMORY:
			return IO_ERR_OUT_OF_MEMORY;
		case CURLE_URL_MALFORMAT:
		case CURLE_UNSUPPORTED_PROTOCOL:
			return IO_ERR_INVALID_ARGUMENT;
		case CURLE_WEIRD_SERVER_REPLY:
		case CURLE_BAD_CONTENT_ENCODING:
			return IO_ERR_PROTOCOL;
		default:
			return IO_ERR_CONNECT;
	}
}

/*
 * Prepare easy for req: reset it, then set the URL, the headers (built
 * into t->hdrs), timeouts, TLS checks and the callbacks writing into *t.
 * *t must stay at the same address until transfer_finish or
 * transfer_discard (libcurl keeps pointers to it and to t->errbuf).  The
 * URL and the headers are copied; a request body must outlive the
 * transfer.  Returns 0, or -1 with *err (nothing left to free).
 */
static int
transfer_setup(CURL *easy, const IoHttpOptions *opt, const IoHttpRequest *req,
			   Transfer *t, TmsError *err)
{
	struct curl_slist *hdrs = NULL;
	size_t		i;

	memset(t, 0, sizeof(*t));
	io_sb_init(&t->body);
	t->max_body = opt->max_response_bytes;
	url_for_message(req->url, t->where, sizeof(t->where));
	snprintf(t->what, sizeof(t->what), "%s", req->what ? req->what : "");
	snprintf(t->method, sizeof(t->method), "%s", req->method);
	t->attempt = req->attempt;

	curl_easy_reset(easy);
	/* every connection checked against the hosts tms may reach */
	if (io_reach_attach(easy, req->url, &t->reach, err) != 0)
		return -1;
	for (i = 0; i <= req->nheaders; i++)
	{
		/* last: never send "Expect: 100-continue", one round trip less */
		struct curl_slist *n = curl_slist_append(hdrs, i < req->nheaders ?
												 req->headers[i] : "Expect:");

		if (n == NULL)
		{
			curl_slist_free_all(hdrs);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
		hdrs = n;
	}
	t->hdrs = hdrs;

	curl_easy_setopt(easy, CURLOPT_URL, req->url);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, opt->request_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
	if (opt->ca_file != NULL)
		curl_easy_setopt(easy, CURLOPT_CAINFO, opt->ca_file);
	if (opt->ca_path != NULL)
		curl_easy_setopt(easy, CURLOPT_CAPATH, opt->ca_path);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(easy, CURLOPT_USERAGENT, "tms/0.1");
	curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
	/* send the path exactly as built: never squash "/../" or "/./" */
	curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);

	/*
	 * A request that must not be repeated gets a connection of its own:
	 * libcurl silently resends a request whose reused connection turns out
	 * dead, which is fine for a GET and wrong for a commit.
	 */
	if (!req->idempotent)
		curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);

	if (strcmp(req->method, "GET") == 0)
		curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
	else if (strcmp(req->method, "HEAD") == 0)
		curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
	else
	{
		curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req->method);
		if (req->body != NULL || strcmp(req->method, "POST") == 0 ||
			strcmp(req->method, "PUT") == 0)
		{
			curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
							 (curl_off_t) req->body_len);
			curl_easy_setopt(easy, CURLOPT_POSTFIELDS,
							 req->body ? req->body : "");
		}
	}
	return 0;
}

/*
 * Release what transfer_setup attached to easy and *t, without a result
 * (the transfer was abandoned).  easy must no longer be in a multi handle.
 */
static void
transfer_discard(CURL *easy, Transfer *t)
{
	curl_slist_free_all(t->hdrs);
	t->hdrs = NULL;
	/* the error buffer lives in *t: detach it */
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
	io_sb_free(&t->body);
	io_string_list_free(&t->headers);
}

/* What a finished transfer came to: the work of transfer_finish. */
static int
transfer_finish_result(CURL *easy, const IoHttpOptions *opt, Transfer *t, CURLcode rc,
					   IoHttpResponse *resp, TmsError *err)
{
	long		request_size = 0;

	curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
	resp->sent = request_size > 0;
	curl_slist_free_all(t->hdrs);
	t->hdrs = NULL;
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
	if (rc != CURLE_OK)
	{
		IoErrorCode code = map_curl_code(rc);

		io_sb_free(&t->body);
		io_string_list_free(&t->headers);
		if (t->too_large)
			return tms_error_set(err, IO_ERR_TOO_LARGE,
								 "response from %s exceeds max_response_bytes (%zu bytes, after decompression)",
								 t->where, opt->max_response_bytes);
		if (t->body.oom || t->header_oom)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY,
								 "out of memory reading response from %s", t->where);
		if (io_reach_refused(&t->reach, t->where, err))
			return -1;
		if (code == IO_ERR_TIMEOUT)
			tms_error_set(err, code, "request to %s timed out", t->where);
		else
			tms_error_set(err, code, "could not reach %s: %s", t->where,
						  curl_easy_strerror(rc));
		/* libcurl's own text (with timings) goes to the detail */
		if (t->errbuf[0] != '\0')
			tms_error_detail_raw(err, t->errbuf, strlen(t->errbuf));
		return -1;
	}
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp->status);
	if (t->body.data == NULL)
		io_sb_puts(&t->body, "");
	resp->body_len = t->body.len;
	resp->body = io_sb_steal(&t->body);
	resp->headers = t->headers;
	memset(&t->headers, 0, sizeof(t->headers));
	if (resp->body == NULL)
	{
		io_http_response_free(resp);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* Tell the options' observer, if any, what a finished transfer did. */
static void
transfer_observe(CURL *easy, const IoHttpOptions *opt, const Transfer *t,
				 long status, IoErrorCode error)
{
	IoHttpObservation obs;
	curl_off_t	us = 0;

	if (opt->observe == NULL)
		return;
	curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &us);
	obs.what = t->what;
	obs.method = t->method;
	obs.attempt = t->attempt;
	obs.status = status;
	obs.error = error;
	obs.elapsed_us = (int64_t) us;
	opt->observe(opt->observe_arg, &obs);
}

/*
 * Turn a finished transfer (libcurl result rc; easy already removed from
 * its multi handle) into *resp, or into *err, and tell the observer.
 * Releases *t either way.  Returns 0 with a response, -1 with *err.
 */
static int
transfer_finish(CURL *easy, const IoHttpOptions *opt, Transfer *t, CURLcode rc,
				IoHttpResponse *resp, TmsError *err)
{
	int			result = transfer_finish_result(easy, opt, t, rc, resp, err);

	transfer_observe(easy, opt, t, result == 0 ? resp->status : 0,
					 result == 0 ? IO_OK : err->code);
	return result;
}

/*
 * curl_multi_poll for up to timeout_ms, told to the options' waiting
 * callback as a network wait.
 */
static CURLMcode
poll_waiting(CURLM *multi, const IoHttpOptions *opt, int timeout_ms)
{
	CURLMcode	mc;

	if (opt->waiting != NULL)
		opt->waiting(opt->interrupt_arg, true);
	mc = curl_multi_poll(multi, NULL, 0, timeout_ms, NULL);
	if (opt->waiting != NULL)
		opt->waiting(opt->interrupt_arg, false);
	return mc;
}

/*
 * One attempt: run the transfer on (multi, easy) and fill resp.  Returns
 * 0 with a response, -1 with *err.
 */
static int
perform_once(CURLM *multi, CURL *easy, const IoHttpOptions *opt,
			 const IoHttpRequest *req, IoHttpResponse *resp, TmsError *err)
{
	Transfer	t;
	CURLcode	rc = CURLE_OK;
	CURLMcode	mc;
	int			running = 1;
	bool		interrupted = false;

	if (transfer_setup(easy, opt, req, &t, err) != 0)
		return -1;
	mc = curl_multi_add_handle(multi, easy);
	if (mc != CURLM_OK)
	{
		transfer_discard(easy, &t);
		return tms_error_set(err, IO_ERR_INTERNAL,
							 "could not start request to %s: %s", t.where,
							 curl_multi_strerror(mc));
	}

	while (running)
	{
		mc = curl_multi_perform(multi, &running);
		if (mc != CURLM_OK)
			break;
		if (!running)
			break;
		if (opt->interrupted != NULL && opt->interrupted(opt->interrupt_arg))
		{
			interrupted = true;
			break;
		}
		mc = poll_waiting(multi, opt, IO_POLL_INTERVAL_MS);
		if (mc != CURLM_OK)
			break;
		if (opt->interrupted != NULL && opt->interrupted(opt->interrupt_arg))
		{
			interrupted = true;
			break;
		}
	}

	if (!interrupted && mc == CURLM_OK)
	{
		CURLMsg    *msg;
		int			left;

		rc = CURLE_GOT_NOTHING;
		while ((msg = curl_multi_info_read(multi, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy)
				rc = msg->data.result;
	}
	curl_multi_remove_handle(multi, easy);
	/* a commit interrupted after it was sent has an unknown outcome */
	{
		long		request_size = 0;

		curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
		resp->sent = request_size > 0;
	}

	if (interrupted)
	{
		transfer_discard(easy, &t);
		return tms_error_set(err, IO_ERR_INTERRUPTED,
							 "request to %s interrupted", t.where);
	}
	if (mc != CURLM_OK)
	{
		transfer_discard(easy, &t);
		return tms_error_set(err, IO_ERR_INTERNAL, "request to %s failed: %s",
							 t.where, curl_multi_strerror(mc));
	}
	return transfer_finish(easy, opt, &t, rc, resp, err);
}

/* See io_int.h. */
bool
io_http_retryable_status(long status)
{
	return status == 429 || status == 500 || status == 502 ||
		status == 503 || status == 504;
}

/* See io_int.h. */
IoErrorCode
io_http_status_code(long status)
{
	switch (status)
	{
		case 400:
		case 422:
			return IO_ERR_BAD_REQUEST;
		case 401:
		case 419:
			return IO_ERR_UNAUTHORIZED;
		case 403:
			return IO_ERR_FORBIDDEN;
		case 404:
			return IO_ERR_NOT_FOUND;
		case 409:
			return IO_ERR_ALREADY_EXISTS;
		case 429:
		case 503:
			return IO_ERR_UNAVAILABLE;
		case 501:
			return IO_ERR_UNSUPPORTED;
		default:
			return status >= 500 ? IO_ERR_SERVER : IO_ERR_PROTOCOL;
	}
}

/* See io_int.h. */
long
io_http_backoff_ms(const IoHttpOptions *opt, int attempt)
{
	long		delay = opt->retry_base_ms;
	int			k;

	/* base * 2^attempt, capped, plus up to 50% jitter */
	for (k = 0; k < attempt && delay < IO_MAX_BACKOFF_MS; k++)
		delay *= 2;
	if (delay > IO_MAX_BACKOFF_MS)
		delay = IO_MAX_BACKOFF_MS;
	return delay + (long) (random() % (delay / 2 + 1));
}

/* See io_int.h. */
long
io_http_retry_after_ms(const IoHttpResponse *resp, int64_t now_ms)
{
	size_t		len;
	const char *v;
	char		buf[64];
	int64_t		ms = -1;

	if (resp == NULL || (resp->status != 429 && resp->status != 503))
		return -1;
	v = io_http_header(resp, "Retry-After", &len);
	if (v == NULL || len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (strspn(buf, "0123456789") == len)
	{
		/* delta-seconds; more digits than a day's worth are just long */
		ms = len > 9 ? IO_MAX_RETRY_AFTER_MS : strtoll(buf, NULL, 10) * 1000;
	}
	else
	{
		/* an HTTP date, IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
		static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
		struct tm	tm;
		char		wday[4],
					mon[4];
		const char *m;
		int			used = -1;

		memset(&tm, 0, sizeof(tm));
		if (sscanf(buf, "%3s, %2d %3s %4d %2d:%2d:%2d GMT%n", wday, &tm.tm_mday, mon,
				   &tm.tm_year, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 7 ||
			used != (int) len || strlen(wday) != 3 || buf[3] != ',' ||
			(m = strstr(months, mon)) == NULL || (m - months) % 3 != 0 ||
			strlen(mon) != 3 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
			tm.tm_min > 59 || tm.tm_sec > 60)
			return -1;
		tm.tm_mon = (int) (m - months) / 3;
		tm.tm_year -= 1900;
		ms = (int64_t) timegm(&tm) * 1000 - now_ms;
		if (ms < 0)
			ms = 0;
	}
	return (long) (ms > IO_MAX_RETRY_AFTER_MS ? IO_MAX_RETRY_AFTER_MS : ms);
}

/* See io_int.h. */
long
io_http_retry_delay_ms(const IoHttpOptions *opt, int attempt, const IoHttpResponse *resp)
{
	long		delay = io_http_backoff_ms(opt, attempt);

	/* an HTTP date is wall-clock time (io_now_ms() is monotonic) */
	long		asked = io_http_retry_after_ms(resp, io_wall_ms());

	return asked > delay ? asked : delay;
}

/* See io_int.h. */
int
io_http_perform(const IoHttpOptions *options, const IoHttpRequest *req,
				IoHttpResponse *resp, TmsError *err)
{
	IoHttpOptions opt;
	CURLM	   *multi;
	CURL	   *easy;
	bool		own = false;
	int			attempt;
	int			rc = -1;

	io_http_options_resolve(options, &opt);
	memset(resp, 0, sizeof(*resp));
	if (!ensure_global())
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY,
							 "could not initialise libcurl");
	if (proc_busy)
	{
		/* re-entered (should not happen): use private handles */
		multi = curl_multi_init();
		easy = curl_easy_init();
		own = true;
		if (multi == NULL || easy == NULL)
		{
			if (easy)
				curl_easy_cleanup(easy);
			if (multi)
				curl_multi_cleanup(multi);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY,
								 "could not initialise libcurl");
		}
	}
	else
	{
		multi = proc_multi;
		easy = proc_easy;
		proc_busy = true;
	}

	for (attempt = 0;; attempt++)
	{
		IoHttpRequest this_attempt = *req;
		bool		retry = false;
		IoStringList lines = {NULL, 0};

		io_http_response_free(resp);
		tms_error_clear(err);
		this_attempt.attempt = attempt;
		if (req->attempt_headers != NULL)
		{
			/* headers made for this attempt (a fresh signature) */
			if (req->attempt_headers(req->attempt_arg, &lines, err) != 0)
			{
				io_string_list_wipe(&lines);
				rc = -1;
				break;
			}
			this_attempt.headers = (const char *const *) lines.items;
			this_attempt.nheaders = lines.n;
		}
		rc = perform_once(multi, easy, &opt, &this_attempt, resp, err);
		/* the lines may carry a token or a signature */
		io_string_list_wipe(&lines);
		if (attempt >= opt.retries || !req->idempotent)
			break;
		if (rc != 0)
			retry = (err->code == IO_ERR_CONNECT);
		else
			retry = io_http_retryable_status(resp->status);
		if (!retry)
			break;
		if (io_sleep_ms(&opt, io_http_retry_delay_ms(&opt, attempt, rc == 0 ? resp : NULL),
						err) != 0)
		{
			io_http_response_free(resp);
			rc = -1;
			break;
		}
	}

	if (own)
	{
		curl_easy_cleanup(easy);
		curl_multi_cleanup(multi);
	}
	else
		proc_busy = false;
	return rc;
}

/* ----------------------------------------------------------------
 * Batches: several transfers at once on one multi handle
 * ----------------------------------------------------------------
 */

typedef struct BatchSlot
{
	CURL	   *easy;			/* reused from transfer to transfer */
	Transfer	t;
	bool		busy;			/* in the multi handle */
} BatchSlot;

struct IoHttpBatch
{
	IoHttpOptions opt;
	CURLM	   *multi;
	bool		own_multi;		/* false: batch_multi, kept after the batch */
	int			nslots;
	BatchSlot  *slots;
};

/* See io_int.h. */
IoHttpBatch *
io_http_batch_create(const IoHttpOptions *options, int nslots, TmsError *err)
{
	IoHttpBatch *b;
	int			i;

	if (nslots < 1)
	{
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "a batch needs at least one transfer slot");
		return NULL;
	}
	if (!ensure_global())
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "could not initialise libcurl");
		return NULL;
	}
	b = io_calloc(1, sizeof(IoHttpBatch));
	if (b == NULL)
		goto oom;
	io_http_options_resolve(options, &b->opt);
	b->nslots = nslots;
	b->slots = io_calloc(nslots, sizeof(BatchSlot));
	if (b->slots == NULL)
		goto oom;
	if (!batch_busy)
	{
		if (batch_multi == NULL)
			batch_multi = curl_multi_init();
		if (batch_multi == NULL)
			goto oom;
		b->multi = batch_multi;
		batch_busy = true;
		/* every slot may keep a connection of its own, across batches too */
		if (nslots > batch_maxconnects)
		{
			batch_maxconnects = nslots;
			curl_multi_setopt(b->multi, CURLMOPT_MAXCONNECTS, batch_maxconnects);
		}
	}
	else
	{
		/* nested batches (should not happen): a multi handle of its own */
		b->multi = curl_multi_init();
		b->own_multi = true;
		if (b->multi == NULL)
			goto oom;
		curl_multi_setopt(b->multi, CURLMOPT_MAXCONNECTS, (long) nslots);
	}
	for (i = 0; i < nslots; i++)
	{
		b->slots[i].easy = curl_easy_init();
		if (b->slots[i].easy == NULL)
			goto oom;
	}
	return b;
oom:
	io_http_batch_free(b);
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	return NULL;
}

/* See io_int.h. */
void
io_http_batch_free(IoHttpBatch *b)
{
	int			i;

	if (b == NULL)
		return;
	for (i = 0; b->slots != NULL && i < b->nslots; i++)
	{
		BatchSlot  *s = &b->slots[i];

		if (s->easy == NULL)
			continue;
		if (s->busy)
		{
			curl_multi_remove_handle(b->multi, s->easy);
			transfer_discard(s->easy, &s->t);
		}
		curl_easy_cleanup(s->easy);
	}
	if (b->multi != NULL && b->own_multi)
		curl_multi_cleanup(b->multi);
	else if (b->multi != NULL)
		batch_busy = false;
	io_free(b->slots);
	io_free(b);
}

/* See io_int.h. */
int
io_http_batch_start(IoHttpBatch *b, int slot, const IoHttpRequest *req,
					TmsError *err)
{
	BatchSlot  *s;
	CURLMcode	mc;

	if (slot < 0 || slot >= b->nslots || b->slots[slot].busy)
		return tms_error_set(err, IO_ERR_INTERNAL,
							 "transfer slot %d is not free", slot);
	s = &b->slots[slot];
	if (transfer_setup(s->easy, &b->opt, req, &s->t, err) != 0)
		return -1;
	curl_easy_setopt(s->easy, CURLOPT_PRIVATE, (char *) s);
	mc = curl_multi_add_handle(b->multi, s->easy);
	if (mc != CURLM_OK)
	{
		transfer_discard(s->easy, &s->t);
		return tms_error_set(err, IO_ERR_INTERNAL,
							 "could not start request to %s: %s", s->t.where,
							 curl_multi_strerror(mc));
	}
	s->busy = true;
	return 0;
}

/* true when the interrupt callback asks to stop */
static bool
batch_interrupted(IoHttpBatch *b)
{
	return b->opt.interrupted != NULL && b->opt.interrupted(b->opt.interrupt_arg);
}

/* See io_int.h. */
int
io_http_batch_wait(IoHttpBatch *b, long timeout_ms, TmsError *err)
{
	CURLMcode	mc;
	int			running;

	if (timeout_ms < 0 || timeout_ms > IO_POLL_INTERVAL_MS)
		timeout_ms = IO_POLL_INTERVAL_MS;
	if (batch_interrupted(b))
		return tms_error_set(err, IO_ERR_INTERRUPTED, "requests interrupted");
	mc = poll_waiting(b->multi, &b->opt, (int) timeout_ms);
	if (mc == CURLM_OK)
		mc = curl_multi_perform(b->multi, &running);
	if (mc != CURLM_OK)
		return tms_error_set(err, IO_ERR_INTERNAL, "requests failed: %s",
							 curl_multi_strerror(mc));
	if (batch_interrupted(b))
		return tms_error_set(err, IO_ERR_INTERRUPTED, "requests interrupted");
	return 0;
}

/* See io_int.h. */
bool
io_http_batch_done(IoHttpBatch *b, int *slot, int *rc, IoHttpResponse *resp,
				   TmsError *err)
{
	CURLMsg    *msg;
	int			left;

	while ((msg = curl_multi_info_read(b->multi, &left)) != NULL)
	{
		BatchSlot  *s = NULL;
		CURLcode	result = msg->data.result;
		CURL	   *easy = msg->easy_handle;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &s);
		if (s == NULL || !s->busy)
			continue;
		curl_multi_remove_handle(b->multi, easy);
		s->busy = false;
		memset(resp, 0, sizeof(*resp));
		tms_error_clear(err);
		*slot = (int) (s - b->slots);
		*rc = transfer_finish(easy, &b->opt, &s->t, result, resp, err);
		return true;
	}
	return false;
}
