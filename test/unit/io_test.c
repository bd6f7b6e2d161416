/*-------------------------------------------------------------------------
 *
 * io_test.c
 *		Unit tests of src/io/ without a server: the whole AWS SigV4 test
 *		suite (header and presigned-query modes), the location rule and
 *		storage URI parsing, the S3 XML reader on good and malformed
 *		input, local file storage, and, against a small forked HTTP server
 *		of this file, batches of concurrent table loads and the exact
 *		request paths that names and keys produce, bulk deletes with
 *		several requests in flight (S3 DeleteObjects answers of every
 *		kind) and the AIMD window of a storage target, vended credentials
 *		refreshed before they expire and after a refusal; the pieces of the
 *		engine clients that need no server (origins, result cells and
 *		rows, tags); idempotency keys (UUIDv7) and the ISO-8601 durations
 *		of idempotency-key-lifetime.
 *
 * The driver asserts behaviour only.  Upper bounds of timing windows (a
 * timeout ending by 1.5 s, requests in flight at once ending sooner than
 * one after the other) and glibc heap sizes are figures, not behaviour: a
 * loaded machine or a sanitizer's allocator moves them.  They are
 * BENCH_CHECKs, asserted only when bench/io_bench.sh builds this file with
 * -DIO_BENCH (plain -O2, no sanitizer); in the unit drivers (make unit,
 * make unit-san) they are printed, not checked.  Lower bounds (no timeout
 * or interrupt before its time) are behaviour and stay checked.
 *
 * Built by "make unit" with the files of src/io/.  The SigV4 suite directory is
 * taken from $SIGV4_SUITE, else test/fixtures/sigv4/v4 relative to
 * the repository top (where the test runs).  The last line printed is
 * "N passed, M failed"; the exit status is non-zero when M > 0.
 *
 * test/unit/io_test.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE				/* memmem, strcasestr */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <jansson.h>
#include <zlib.h>

#include "io/io.h"
#include "io/io_int.h"
#include "io/rest/rest_int.h"
#include "io/engines/engine_client_int.h"
#include "io/http/oauth2.h"
#include "unit.h"

/* A timing window's upper bound or a heap size: checked in bench/io_bench.sh. */
#ifdef IO_BENCH
#define BENCH_CHECK(cond, ...) CHECK(cond, __VA_ARGS__)
#else
#define BENCH_CHECK(cond, ...) do { if (0) CHECK(cond, __VA_ARGS__); } while (0)
#endif

/* Read a whole file into a malloc'd NUL-terminated buffer, or NULL. */
static char *
read_file(const char *dir, const char *name, size_t *len)
{
	char		path[4096];
	FILE	   *f;
	char	   *buf;
	long		n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = io_malloc((size_t) n + 1);
	if (buf == NULL || fread(buf, 1, (size_t) n, f) != (size_t) n)
	{
		io_free(buf);
		fclose(f);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t) n;
	return buf;
}

/* ----------------------------------------------------------------
 * SigV4 suite
 * ----------------------------------------------------------------
 */

typedef struct SuiteRequest
{
	char	   *method;
	char	   *path;
	char	   *query;
	IoHeader	headers[32];
	char	   *names[32];
	char	   *values[32];
	size_t		nheaders;
	char	   *body;
	size_t		body_len;
} SuiteRequest;

/*
 * Parse the suite's request.txt: "METHOD target HTTP/1.1", header lines
 * "Name:value" (a line starting with whitespace continues the previous
 * value), an empty line, the body.  The target may contain raw spaces.
 */
static bool
parse_request(char *text, SuiteRequest *r)
{
	char	   *line = text;
	char	   *nl = strchr(line, '\n');
	char	   *sp1,
			   *sp2,
			   *q;

	memset(r, 0, sizeof(*r));
	if (nl == NULL)
		return false;
	*nl = '\0';
	sp1 = strchr(line, ' ');
	sp2 = strrchr(line, ' ');
	if (sp1 == NULL || sp2 == NULL || sp2 <= sp1)
		return false;
	r->method = io_strndup(line, (size_t) (sp1 - line));
	r->path = io_strndup(sp1 + 1, (size_t) (sp2 - sp1 - 1));
	q = strchr(r->path, '?');
	if (q != NULL)
	{
		r->query = io_strdup(q + 1);
		*q = '\0';
	}
	line = nl + 1;
	while (*line != '\0' && *line != '\n')
	{
		char	   *colon;

		nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		if ((*line == ' ' || *line == '\t') && r->nheaders > 0)
		{
			char	   *prev = r->values[r->nheaders - 1];
			size_t		n = strlen(prev) + strlen(line) + 2;
			char	   *v = io_malloc(n);

			snprintf(v, n, "%s\n%s", prev, line);
			io_free(prev);
			r->values[r->nheaders - 1] = v;
		}
		else
		{
			colon = strchr(line, ':');
			if (colon == NULL || r->nheaders == 32)
				return false;
			r->names[r->nheaders] = io_strndup(line, (size_t) (colon - line));
			r->values[r->nheaders] = io_strdup(colon + 1);
			r->nheaders++;
		}
		if (nl == NULL)
		{
			line = nl;
			break;
		}
		line = nl + 1;
	}
	if (line != NULL && *line == '\n')
	{
		r->body = io_strdup(line + 1);
		r->body_len = strlen(line + 1);
	}
	else
	{
		r->body = io_strdup("");
		r->body_len = 0;
	}
	for (size_t i = 0; i < r->nheaders; i++)
	{
		r->headers[i].name = r->names[i];
		r->headers[i].value = r->values[i];
	}
	return true;
}

static void
free_request(SuiteRequest *r)
{
	io_free(r->method);
	io_free(r->path);
	io_free(r->query);
	io_free(r->body);
	for (size_t i = 0; i < r->nheaders; i++)
	{
		io_free(r->names[i]);
		io_free(r->values[i]);
	}
}

/* Strip one trailing newline run (expected files have none, but be lenient). */
static void
chomp(char *s)
{
	size_t		n = strlen(s);

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
}

/* Percent-decode in place (the expected files keep raw UTF-8 in queries). */
static char *
pct_decode(const char *s)
{
	char	   *out = io_malloc(strlen(s) + 1);
	size_t		j = 0;
	unsigned int c;

	for (size_t i = 0; s[i]; i++)
	{
		if (s[i] == '%' && s[i + 1] && s[i + 2] && sscanf(s + i + 1, "%2x", &c) == 1)
		{
			out[j++] = (char) c;
			i += 2;
		}
		else
			out[j++] = s[i];
	}
	out[j] = '\0';
	return out;
}

/*
 * Compare two query strings as unordered sets of parameters, keys and
 * values case-insensitively and percent-decoded (as aws-c-auth's harness
 * does; its expected files keep the request's raw UTF-8).
 */
static bool
same_query_set(const char *a, const char *b)
{
	char	   *ca = io_strdup(a),
			   *cb = io_strdup(b);
	char	   *pa[64],
			   *pb[64];
	int			na = 0,
				nb = 0;
	bool		ok = true;
	char	   *save;

	for (char *t = strtok_r(ca, "&", &save); t && na < 64; t = strtok_r(NULL, "&", &save))
		pa[na++] = t;
	for (char *t = strtok_r(cb, "&", &save); t && nb < 64; t = strtok_r(NULL, "&", &save))
		pb[nb++] = t;
	if (na != nb)
		ok = false;
	for (int i = 0; ok && i < na; i++)
	{
		bool		found = false;

		for (int j = 0; j < nb && !found; j++)
		{
			char	   *da,
					   *db;

			if (pb[j] == NULL)
				continue;
			da = pct_decode(pa[i]);
			db = pct_decode(pb[j]);
			if (strcasecmp(da, db) == 0)
			{
				pb[j] = NULL;
				found = true;
			}
			io_free(da);
			io_free(db);
		}
		if (!found)
			ok = false;
	}
	io_free(ca);
	io_free(cb);
	return ok;
}

/* Value of a header line "Name:value" in a signed-request file, or NULL. */
static char *
signed_request_header(const char *text, const char *name)
{
	const char *p = strchr(text, '\n');
	size_t		n = strlen(name);

	while (p != NULL && p[1] != '\0' && p[1] != '\n')
	{
		const char *line = p + 1;
		const char *end = strchr(line, '\n');

		if (strncasecmp(line, name, n) == 0 && line[n] == ':')
			return io_strndup(line + n + 1, end ? (size_t) (end - line - n - 1) : strlen(line + n + 1));
		p = end;
	}
	return NULL;
}

static void
run_sigv4_case(const char *dir, const char *name, int *cases_ok, int *cases)
{
	char		cdir[4096];
	char	   *ctx_text,
			   *req_text;
	json_t	   *ctx;
	json_error_t jerr;
	SuiteRequest req;
	const char *modes[2] = {"header", "query"};

	snprintf(cdir, sizeof(cdir), "%s/%s", dir, name);
	ctx_text = read_file(cdir, "context.json", NULL);
	req_text = read_file(cdir, "request.txt", NULL);
	if (ctx_text == NULL || req_text == NULL)
	{
		CHECK(0, "%s: cannot read case files", name);
		io_free(ctx_text);
		io_free(req_text);
		return;
	}
	ctx = json_loads(ctx_text, 0, &jerr);
	if (ctx == NULL || !parse_request(req_text, &req))
	{
		CHECK(0, "%s: cannot parse case input", name);
		json_decref(ctx);
		io_free(ctx_text);
		io_free(req_text);
		return;
	}

	for (int m = 0; m < 2; m++)
	{
		IoSigV4Input in;
		IoSigV4Output out;
		TmsError	err;
		char		fname[128];
		char	   *creq,
				   *sts,
				   *sig,
				   *sreq;
		char		body_hash[65];
		json_t	   *cred = json_object_get(ctx, "credentials");
		bool		case_ok = true;

		memset(&in, 0, sizeof(in));
		in.method = req.method;
		in.path = req.path;
		in.query = req.query;
		in.headers = req.headers;
		in.nheaders = req.nheaders;
		if (json_is_true(json_object_get(ctx, "sign_body")))
			io_sha256_hex(req.body, req.body_len, body_hash);
		else
			io_sha256_hex("", 0, body_hash);
		in.payload_hash = body_hash;
		in.access_key_id = json_string_value(json_object_get(cred, "access_key_id"));
		in.secret_access_key = json_string_value(json_object_get(cred, "secret_access_key"));
		in.session_token = json_string_value(json_object_get(cred, "token"));
		in.region = json_string_value(json_object_get(ctx, "region"));
		in.service = json_string_value(json_object_get(ctx, "service"));
		in.amz_date = "20150830T123600Z";
		in.normalize_path = json_is_true(json_object_get(ctx, "normalize"));
		in.double_encode_path = true;
		in.sign_session_token = !json_is_true(json_object_get(ctx, "omit_session_token"));
		in.add_content_sha256 = (m == 0) && json_is_true(json_object_get(ctx, "sign_body"));
		in.query_mode = (m == 1);
		in.expires_seconds = (long) json_integer_value(json_object_get(ctx, "expiration_in_seconds"));

		snprintf(fname, sizeof(fname), "%s-canonical-request.txt", modes[m]);
		creq = read_file(cdir, fname, NULL);
		snprintf(fname, sizeof(fname), "%s-string-to-sign.txt", modes[m]);
		sts = read_file(cdir, fname, NULL);
		snprintf(fname, sizeof(fname), "%s-signature.txt", modes[m]);
		sig = read_file(cdir, fname, NULL);
		snprintf(fname, sizeof(fname), "%s-signed-request.txt", modes[m]);
		sreq = read_file(cdir, fname, NULL);

		if (io_sigv4_sign(&in, &out, &err) != 0)
		{
			CHECK(0, "%s/%s: sign failed: %s", name, modes[m], err.message);
			case_ok = false;
		}
		else if (creq == NULL || sts == NULL || sig == NULL || sreq == NULL)
		{
			CHECK(0, "%s/%s: expected files missing", name, modes[m]);
			case_ok = false;
		}
		else
		{
			chomp(sig);
			if (strcmp(out.canonical_request, creq) != 0)
			{
				CHECK(0, "%s/%s: canonical request differs:\n--- got\n%s\n--- want\n%s",
					  name, modes[m], out.canonical_request, creq);
				case_ok = false;
			}
			if (strcmp(out.string_to_sign, sts) != 0)
			{
				CHECK(0, "%s/%s: string to sign differs", name, modes[m]);
				case_ok = false;
			}
			if (strcmp(out.signature, sig) != 0)
			{
				CHECK(0, "%s/%s: signature %s, want %s", name, modes[m], out.signature, sig);
				case_ok = false;
			}
			if (m == 0)
			{
				/* every header the signed request adds, by value */
				for (size_t i = 0; i < out.nadd_headers; i++)
				{
					char	   *want = signed_request_header(sreq, out.add_headers[i].key);

					if (want == NULL || strcmp(want, out.add_headers[i].value) != 0)
					{
						CHECK(0, "%s/header: header %s is \"%s\", want \"%s\"", name,
							  out.add_headers[i].key, out.add_headers[i].value,
							  want ? want : "(absent)");
						case_ok = false;
					}
					io_free(want);
				}
				/* and no header the expected request adds is missing */
				{
					const char *must[] = {"X-Amz-Date", "X-Amz-Security-Token",
					"x-amz-content-sha256", "Authorization"};

					for (int k = 0; k < 4; k++)
					{
						char	   *want = signed_request_header(sreq, must[k]);
						bool		have = false;

						for (size_t i = 0; i < out.nadd_headers; i++)
							if (strcasecmp(out.add_headers[i].key, must[k]) == 0)
								have = true;
						/* headers present in the input request don't count */
						for (size_t i = 0; i < req.nheaders; i++)
							if (strcasecmp(req.names[i], must[k]) == 0)
								have = true;
						if (want != NULL && !have)
						{
							CHECK(0, "%s/header: %s not produced", name, must[k]);
							case_ok = false;
						}
						io_free(want);
					}
				}
			}
			else
			{
				/* presigned query vs the request line's query, as a set */
				char	   *q = strchr(sreq, '?');
				char	   *end = q ? strstr(q, " HTTP/1.1") : NULL;

				if (q == NULL || end == NULL)
				{
					CHECK(0, "%s/query: expected request line unparsable", name);
					case_ok = false;
				}
				else
				{
					char	   *want = io_strndup(q + 1, (size_t) (end - q - 1));

					if (!same_query_set(out.presigned_query, want))
					{
						CHECK(0, "%s/query: presigned query differs:\n got  %s\n want %s",
							  name, out.presigned_query, want);
						case_ok = false;
					}
					io_free(want);
				}
			}
			io_sigv4_free(&out);
		}
		if (case_ok)
		{
			npassed++;
			(*cases_ok)++;
		}
		(*cases)++;
		io_free(creq);
		io_free(sts);
		io_free(sig);
		io_free(sreq);
	}
	free_request(&req);
	json_decref(ctx);
	io_free(ctx_text);
	io_free(req_text);
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static void
test_sigv4_suite(void)
{
	const char *dir = getenv("SIGV4_SUITE");
	DIR		   *d;
	struct dirent *de;
	char	   *names[256];
	int			n = 0;
	int			ok = 0,
				total = 0;

	if (dir == NULL)
		dir = "test/fixtures/sigv4/v4";
	d = opendir(dir);
	if (d == NULL)
	{
		CHECK(0, "cannot open SigV4 suite at \"%s\" (set SIGV4_SUITE)", dir);
		return;
	}
	while ((de = readdir(d)) != NULL && n < 256)
		if (de->d_name[0] != '.')
			names[n++] = io_strdup(de->d_name);
	closedir(d);
	qsort(names, (size_t) n, sizeof(char *), cmp_names);
	for (int i = 0; i < n; i++)
	{
		run_sigv4_case(dir, names[i], &ok, &total);
		io_free(names[i]);
	}
	printf("sigv4 suite: %d cases, %d/%d (case, mode) pairs pass\n", n, ok, total);
	CHECK(n == 38, "expected 38 suite cases, found %d", n);
	CHECK(ok == total && total == 2 * n, "sigv4 suite has failures");
}

/* ----------------------------------------------------------------
 * URIs
 * ----------------------------------------------------------------
 */
static void
test_uri_parse(void)
{
	IoParsedUri u;
	TmsError	err;
	struct
	{
		const char *uri;
		int			ok;
		IoUriScheme scheme;
		const char *bucket;
		const char *path;
	}			cases[] = {
		{"s3://bucket/a/b.parquet", 1, IO_URI_S3, "bucket", "a/b.parquet"},
		{"s3a://bucket/a/", 1, IO_URI_S3, "bucket", "a/"},
		{"s3n://b", 1, IO_URI_S3, "b", ""},
		{"S3://b/k", 1, IO_URI_S3, "b", "k"},
		{"s3:///key", 0, 0, NULL, NULL},
		{"file:///tmp/x", 1, IO_URI_FILE, NULL, "/tmp/x"},
		{"file:/tmp/x", 1, IO_URI_FILE, NULL, "/tmp/x"},
		{"file://localhost/tmp/x", 1, IO_URI_FILE, NULL, "/tmp/x"},
		{"file://otherhost/tmp/x", 0, 0, NULL, NULL},	/* relative, no root */
		{"s3a://b//k", 1, IO_URI_S3, "b", "/k"},
		{"file://localhost//tmp//x", 1, IO_URI_FILE, NULL, "/tmp/x"},
		{"/tmp/../etc/passwd", 0, 0, NULL, NULL},
		{"s3://b/a/../k", 0, 0, NULL, NULL},
		{"s3://b/%2e%2e/k", 1, IO_URI_S3, "b", "%2e%2e/k"},
		{"/var/data/f", 1, IO_URI_FILE, NULL, "/var/data/f"},
		{"relative/path", 0, 0, NULL, NULL},
		{"hdfs://bucket/x", 0, 0, NULL, NULL},
		{"", 0, 0, NULL, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		int			rc = io_uri_parse(cases[i].uri, &u, &err);

		if (!cases[i].ok)
		{
			CHECK(rc != 0 && err.code == IO_ERR_INVALID_ARGUMENT,
				  "uri \"%s\" should be rejected", cases[i].uri);
			continue;
		}
		CHECK(rc == 0, "uri \"%s\" rejected: %s", cases[i].uri, err.message);
		if (rc != 0)
			continue;
		CHECK(u.scheme == cases[i].scheme, "uri \"%s\": scheme", cases[i].uri);
		CHECK((cases[i].bucket == NULL && u.bucket == NULL) ||
			  (cases[i].bucket && u.bucket && strcmp(cases[i].bucket, u.bucket) == 0),
			  "uri \"%s\": bucket %s", cases[i].uri, u.bucket ? u.bucket : "(null)");
		CHECK(strcmp(cases[i].path, u.path) == 0, "uri \"%s\": path %s", cases[i].uri, u.path);
		io_uri_free(&u);
	}

	{
		char	   *e = io_uri_encode("a b/c~d+e\xe1\x88\xb4", 12, true);

		CHECK(e && strcmp(e, "a%20b/c~d%2Be%E1%88%B4") == 0, "uri encode: %s", e ? e : "(null)");
		io_free(e);
		e = io_uri_encode("a/b", 3, false);
		CHECK(e && strcmp(e, "a%2Fb") == 0, "uri encode without slash: %s", e ? e : "(null)");
		io_free(e);
	}
}

/* ----------------------------------------------------------------
 * Locations (location.c)
 * ----------------------------------------------------------------
 */
static void
test_location_canonical(void)
{
	struct
	{
		const char *path;
		const char *root;
		const char *want;		/* NULL: refused with INVALID_ARGUMENT */
	}			cases[] = {
		/* S3 */
		{"s3://b/k", NULL, "s3://b/k"},
		{"s3a://b/a/b.parquet", NULL, "s3://b/a/b.parquet"},
		{"s3n://b/a/", NULL, "s3://b/a/"},
		{"S3A://b/k", NULL, "s3://b/k"},
		{"S3://b/k", NULL, "s3://b/k"},
		{"s3://b", NULL, "s3://b"},
		{"s3://b/", NULL, "s3://b/"},
		{"s3://b/a//k", NULL, "s3://b/a//k"},	/* keys keep their slashes */
		{"s3://b/a/%2e%2e/k", NULL, "s3://b/a/%2e%2e/k"},
		{"s3://b/a%2Fb", NULL, "s3://b/a%2Fb"},
		{"s3://b/\xc3\xa9t\xc3\xa9/\xe4\xb8\xad", NULL, "s3://b/\xc3\xa9t\xc3\xa9/\xe4\xb8\xad"},
		{"s3://my.bucket-1_x/k", NULL, "s3://my.bucket-1_x/k"},
		{"s3:///key", NULL, NULL},
		{"s3://", NULL, NULL},
		{"s3a:///k", NULL, NULL},
		{"s3://b/../k", NULL, NULL},
		{"s3://b/a/./k", NULL, NULL},
		{"s3://b/a/..", NULL, NULL},
		{"s3://b/a/.", NULL, NULL},
		{"s3://../k", NULL, NULL},
		{"s3://./k", NULL, NULL},
		{"s3://b:80/k", NULL, NULL},
		{"s3://user@b/k", NULL, NULL},
		{"s3://b?x/k", NULL, NULL},
		{"s3:b/k", NULL, NULL},
		{"s3:/b/k", NULL, NULL},
		/* absolute files */
		{"/abs/x", NULL, "/abs/x"},
		{"/abs//x///y", NULL, "/abs/x/y"},
		{"/abs/x/", NULL, "/abs/x/"},
		{"file:/abs/x", NULL, "/abs/x"},
		{"file:///abs/x", NULL, "/abs/x"},
		{"file:////abs/x", NULL, "/abs/x"},
		{"FILE:///abs/x", NULL, "/abs/x"},
		{"file://localhost/abs/x", NULL, "/abs/x"},
		{"file://LocalHost/abs/x", NULL, "/abs/x"},
		{"file://localhost", NULL, "/"},
		{"/", NULL, "/"},
		{"/abs/%2e%2e/x", NULL, "/abs/%2e%2e/x"},
		{"/abs/..x/x..", NULL, "/abs/..x/x.."},
		{"/abs/.hidden", NULL, "/abs/.hidden"},
		{"/\xc3\xa9/\xe2\x82\xac", NULL, "/\xc3\xa9/\xe2\x82\xac"},
		{"/abs/../etc/passwd", NULL, NULL},
		{"/abs/./x", NULL, NULL},
		{"/abs/x/..", NULL, NULL},
		{"/abs/x/.", NULL, NULL},
		{"file:///abs/../x", NULL, NULL},
		{"file://localhost/../x", NULL, NULL},
		/* relative, resolved against the root */
		{"a/b", "/wh", "/wh/a/b"},
		{"./a/b", "/wh", "/wh/a/b"},
		{"././a//b", "/wh/", "/wh/a/b"},
		{"file:a/b", "/wh", "/wh/a/b"},
		{"file:./a/b", "/wh", "/wh/a/b"},
		{"file://host/rest/x", "/wh", "/wh/host/rest/x"},
		{"file://warehouse", "/wh", "/wh/warehouse"},
		{"a/b", "file:///wh", "/wh/a/b"},
		{"a/b", "file://localhost/wh", "/wh/a/b"},
		{"%2e%2e/x", "/wh", "/wh/%2e%2e/x"},
		{"a/b", NULL, NULL},
		{"a/b", "", NULL},
		{"a/b", "wh", NULL},
		{"a/b", "s3://b/wh", NULL},
		{"a/b", "/wh/../x", NULL},
		{"file://host/rest", NULL, NULL},
		{"file:a", NULL, NULL},
		{"../x", "/wh", NULL},
		{"a/../../x", "/wh", NULL},
		{"a/./x", "/wh", NULL},
		{"./", "/wh", NULL},
		{".", "/wh", NULL},
		{"..", "/wh", NULL},
		{"file:", "/wh", NULL},
		{"file://", "/wh", NULL},
		{"a", "file://", NULL}, /* found by fuzz_location */
		{"file://.", "/wh", NULL},
		{"file://../x", "/wh", NULL},
		/* other schemes, empty */
		{"", "/wh", NULL},
		{"http://host/x", "/wh", NULL},
		{"https://host/x", "/wh", NULL},
		{"hdfs://b/x", "/wh", NULL},
		{"abfs://c@a.dfs.core.windows.net/x", "/wh", NULL},
		{"hdfs://nn/x", "/wh", NULL},
		{"c:/x", "/wh", NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char	   *out = NULL;
		TmsError	err;
		int			rc;

		tms_error_clear(&err);
		rc = io_location_canonical(cases[i].path, cases[i].root, &out, &err);
		if (cases[i].want == NULL)
		{
			CHECK(rc == -1 && out == NULL && err.code == IO_ERR_INVALID_ARGUMENT &&
				  strncmp(err.message, "invalid location", 16) == 0,
				  "location \"%s\" (root %s) should be refused, got %s",
				  cases[i].path, cases[i].root ? cases[i].root : "none",
				  out ? out : err.message);
		}
		else
		{
			CHECK(rc == 0 && out != NULL && strcmp(out, cases[i].want) == 0,
				  "location \"%s\" (root %s): got \"%s\", want \"%s\"",
				  cases[i].path, cases[i].root ? cases[i].root : "none",
				  rc == 0 ? out : err.message, cases[i].want);
			if (rc == 0)
			{
				char	   *again = NULL;

				/* idempotent, and needs no root any more */
				CHECK(io_location_canonical(out, NULL, &again, &err) == 0 &&
					  strcmp(again, out) == 0, "canonical of \"%s\" is not a fixpoint",
					  out);
				io_free(again);
			}
		}
		io_free(out);
	}

	/* the message says why */
	{
		char	   *out;
		TmsError	err;

		io_location_canonical("s3://b/a/../k", NULL, &out, &err);
		CHECK(strstr(err.message, "\"..\" segment") != NULL, "dot message: %s", err.message);
		io_location_canonical("a/b", NULL, &out, &err);
		CHECK(strstr(err.message, "relative") != NULL, "relative message: %s", err.message);
		io_location_canonical("hdfs://b/k", NULL, &out, &err);
		CHECK(strstr(err.message, "supported") != NULL, "scheme message: %s", err.message);
		io_location_canonical(NULL, NULL, &out, &err);
		CHECK(err.code == IO_ERR_INVALID_ARGUMENT && strstr(err.message, "empty") != NULL,
			  "NULL location: %s", err.message);
	}
}

static void
test_location_under(void)
{
	struct
	{
		const char *path;
		const char *root;
		bool		under;
	}			cases[] = {
		{"s3://b/wh/x", "s3://b/wh", true},
		{"s3://b/wh/x", "s3://b/wh/", true},
		{"s3://b/wh/x", "s3://b/wh//", true},
		{"s3://b/wh/a/b/c", "s3://b/wh", true},
		{"s3://b/wh2/x", "s3://b/wh", false},
		{"s3://b/wh", "s3://b/wh", false},
		{"s3://b/wh/", "s3://b/wh", false},
		{"s3://b/wh/", "s3://b/wh/", false},
		{"s3://b/wh//", "s3://b/wh", false},
		{"s3://b/w", "s3://b/wh", false},
		{"s3://b2/wh/x", "s3://b/wh", false},
		{"s3://b/x", "s3://b", true},
		{"s3://b/x", "s3://b/", true},
		{"s3://bb/x", "s3://b", false},
		{"s3://b/wh/x", "/b/wh", false},
		{"/b/wh/x", "s3://b/wh", false},
		{"/wh/x", "/wh", true},
		{"/wh/x", "/wh/", true},
		{"/wh2/x", "/wh", false},
		{"/wh", "/wh", false},
		{"/wh/", "/wh", false},
		{"/x", "/", true},
		{"/", "/", false},
		{"/wh/../etc", "/wh", false},
		{"/wh/./x", "/wh", false},
		{"/wh/x", "/wh/..", false},
		{"/wh/%2e%2e/x", "/wh", true},
		{"/wh/x", "", false},
		{"/wh/x", "wh", false},
		{"s3://b/x", "s3://", false},
		{"s3://b/x", "s3:", false},
		{"s3:///x", "s3://", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(io_location_under(cases[i].path, cases[i].root) == cases[i].under,
			  "under(\"%s\", \"%s\") should be %s", cases[i].path, cases[i].root,
			  cases[i].under ? "true" : "false");
	CHECK(!io_location_under(NULL, "/wh") && !io_location_under("/wh/x", NULL), "NULL");
}

/* ----------------------------------------------------------------
 * XML
 * ----------------------------------------------------------------
 */
static void
test_xml(void)
{
	TmsError	err;
	const char *list =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>bucket</Name><IsTruncated>true</IsTruncated>"
	"<Contents><Key>a&amp;b/&lt;c&gt; &#233;&#x4E2D;</Key><Size>12</Size></Contents>"
	"<!-- comment --><Contents><Key><![CDATA[x<y]]></Key><Size>0</Size></Contents>"
	"<NextContinuationToken>tok==</NextContinuationToken><Empty/></ListBucketResult>\n";
	IoXmlNode  *doc = io_xml_parse(list, strlen(list), &err);
	const IoXmlNode *c;
	int			n = 0;

	CHECK(doc != NULL, "list result parses: %s", doc ? "" : err.message);
	if (doc != NULL)
	{
		CHECK(strcmp(doc->name, "ListBucketResult") == 0, "root name");
		CHECK(strcmp(io_xml_child_text(doc, "IsTruncated"), "true") == 0, "IsTruncated");
		CHECK(strcmp(io_xml_child_text(doc, "NextContinuationToken"), "tok==") == 0, "token");
		CHECK(io_xml_child(doc, "Empty") != NULL &&
			  strcmp(io_xml_child_text(doc, "Empty"), "") == 0, "empty element");
		for (c = doc->children; c; c = c->next)
			if (strcmp(c->name, "Contents") == 0)
			{
				const char *k = io_xml_child_text(c, "Key");

				if (n == 0)
					CHECK(strcmp(k, "a&b/<c> \xc3\xa9\xe4\xb8\xad") == 0, "entities decoded: %s", k);
				else
					CHECK(strcmp(k, "x<y") == 0, "cdata: %s", k);
				n++;
			}
		CHECK(n == 2, "two Contents, got %d", n);
		io_xml_free(doc);
	}

	{
		const char *del =
		"<DeleteResult><Deleted><Key>k1</Key></Deleted>"
		"<Error><Key>k2</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
		"</DeleteResult>";

		doc = io_xml_parse(del, strlen(del), &err);
		CHECK(doc != NULL, "delete result parses");
		if (doc)
		{
			const IoXmlNode *e = io_xml_child(doc, "Error");

			CHECK(e && strcmp(io_xml_child_text(e, "Code"), "AccessDenied") == 0, "error code");
			CHECK(strcmp(io_xml_child_text(io_xml_child(doc, "Deleted"), "Key"), "k1") == 0, "deleted key");
			io_xml_free(doc);
		}
	}

	{
		const char *bad[] = {
			"",
			"   ",
			"<a>",
			"<a></b>",
			"<a><b></a></b>",
			"<a>&unknown;</a>",
			"<a>&#0;</a>",
			"<a>&#x110000;</a>",
			"<a>&amp</a>",
			"<a x=1></a>",
			"<a x=\"1></a>",
			"<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>",
			"<a></a><b></b>",
			"text<a></a>",
			"<a><!-- unterminated </a>",
			"<a><![CDATA[ unterminated </a>",
			"<>",
			"<a/ >",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		{
			doc = io_xml_parse(bad[i], strlen(bad[i]), &err);
			CHECK(doc == NULL && err.code == IO_ERR_PROTOCOL,
				  "malformed xml #%zu \"%s\" must fail", i, bad[i]);
			io_xml_free(doc);
		}
	}

	{
		/* deep nesting is refused, not a stack overflow */
		char	   *deep = io_malloc(200 * 7 + 1);
		size_t		len = 0;

		for (int i = 0; i < 200; i++)
			len += (size_t) sprintf(deep + len, "<a>");
		for (int i = 0; i < 200; i++)
			len += (size_t) sprintf(deep + len, "</a>");
		doc = io_xml_parse(deep, len, &err);
		CHECK(doc == NULL, "deep nesting refused");
		io_xml_free(doc);
		io_free(deep);
	}
}

/* Bytes in use on the heap now (defined with the listing tests below). */
static size_t heap_in_use(void);

/*
 * The XML budget: a response may cost at most twice its size (plus a
 * small base).  8 MB of <a/> used to take some 224 MB; now the parse
 * stops with IO_ERR_TOO_LARGE having held no more than the budget, as
 * the parser's allocator counts it.  A real listing of 1000 keys fits,
 * and what it holds afterwards, as malloc itself reports, is within the
 * budget too.
 */
static void
test_xml_budget(void)
{
	TmsError	err;
	IoXmlStats	st;
	IoXmlNode  *doc;
	size_t		n = 2 * 1024 * 1024;	/* 8 MB of <a/> */
	size_t		len = 0;
	char	   *flood = io_malloc(n * 4 + 16);

	len += (size_t) sprintf(flood, "<r>");
	for (size_t i = 0; i < n; i++)
	{
		memcpy(flood + len, "<a/>", 4);
		len += 4;
	}
	len += (size_t) sprintf(flood + len, "</r>");
	tms_error_clear(&err);
	doc = io_xml_parse_stats(flood, len, &st, &err);
	CHECK(doc == NULL && err.code == IO_ERR_TOO_LARGE,
		  "an <a/> flood of %zu bytes fails with a budget error (code %d: %s)",
		  len, (int) err.code, err.message);
	CHECK(strstr(err.message, "twice its size") != NULL,
		  "the budget error says what the budget is: %s", err.message);
	CHECK(st.limit == 2 * len + 16 * 1024, "budget is 2x the input plus 16 kB: %zu", st.limit);
	CHECK(st.peak <= st.limit && st.peak > len,
		  "the flood's peak %zu stays within the budget %zu", st.peak, st.limit);
	printf("%zu bytes of <a/>: stopped with %s after holding %zu bytes (budget %zu)\n",
		   len, tms_error_code_name(err.code), st.peak, st.limit);
	io_xml_free(doc);
	io_free(flood);

	{
		/* a ListObjectsV2 page of 1000 keys, as S3 answers */
		IoStrBuf	sb;
		size_t		before;
		size_t		held;
		int			keys = 0;
		const IoXmlNode *c;

		io_sb_init(&sb);
		io_sb_puts(&sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
				   "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
				   "<Name>b</Name><Prefix>w/</Prefix><KeyCount>1000</KeyCount>"
				   "<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>");
		for (int i = 0; i < 1000; i++)
			io_sb_printf(&sb, "<Contents><Key>w/d/%05d.parquet</Key>"
						 "<LastModified>2024-01-01T00:00:00.000Z</LastModified>"
						 "<ETag>&quot;%032x&quot;</ETag><Size>%d</Size>"
						 "<StorageClass>STANDARD</StorageClass></Contents>",
						 i, (unsigned) i, i);
		io_sb_puts(&sb, "</ListBucketResult>");
		CHECK(!sb.oom, "listing built");
		before = heap_in_use();
		doc = io_xml_parse_stats(sb.data, sb.len, &st, &err);
		held = heap_in_use() - before;
		CHECK(doc != NULL, "a 1000-key listing parses within its budget: %s",
			  doc ? "" : err.message);
		CHECK(st.peak <= st.limit, "listing peak %zu within %zu", st.peak, st.limit);
		CHECK(held <= 2 * sb.len + 16 * 1024,
			  "the parsed listing holds %zu bytes of heap for %zu of input", held, sb.len);
		for (c = doc ? doc->children : NULL; c; c = c->next)
			keys += strcmp(c->name, "Contents") == 0 && io_xml_child_text(c, "Key") != NULL;
		CHECK(keys == 1000, "1000 keys read, got %d", keys);
		printf("a 1000-key listing of %zu bytes: peak %zu, holds %zu of heap\n",
			   sb.len, st.peak, held);
		io_xml_free(doc);
		io_sb_free(&sb);
	}

	{
		/* text heavy: entities only shrink, so the text fits too */
		size_t		m = 1024 * 1024;
		char	   *amp = io_malloc(m * 5 + 16);

		len = (size_t) sprintf(amp, "<a>");
		for (size_t i = 0; i < m; i++)
		{
			memcpy(amp + len, "&amp;", 5);
			len += 5;
		}
		len += (size_t) sprintf(amp + len, "</a>");
		doc = io_xml_parse_stats(amp, len, &st, &err);
		CHECK(doc != NULL && strlen(doc->text) == m,
			  "a megabyte of entities decodes within the budget");
		CHECK(st.peak <= st.limit, "entity peak %zu within %zu", st.peak, st.limit);
		io_xml_free(doc);
		io_free(amp);
	}
}

/* ----------------------------------------------------------------
 * Vended storage config: the catalog never redirects the mapping's keys
 * ----------------------------------------------------------------
 */

/* A mapping's settings: server endpoint, mapping keys and token. */
static void
mapping_config(IoStorageConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->s3_endpoint = "https://s3.server.example";
	cfg->s3_region = "us-east-1";
	cfg->s3_access_key_id = "MAPPINGKEY";
	cfg->s3_secret_access_key = "mapping-secret";
	cfg->s3_session_token = "mapping-token";
	cfg->s3_path_style = -1;
}

#define STREQ_OR_NULL(a, b) ((a) == NULL ? (b) == NULL : (b) != NULL && strcmp((a), (b)) == 0)

static void
test_config_apply(void)
{
	struct
	{
		const char *name;
		IoKeyValue	kv[6];
		size_t		n;
		bool		allow_endpoint;
		const char *endpoint;
		const char *key;
		const char *secret;
		const char *token;
		const char *region;
	}			cases[] = {
		{"nothing vended", {{NULL, NULL}}, 0, true,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
		{"endpoint alone: ignored", {{"s3.endpoint", "https://evil.example"}}, 1, true,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
		{"endpoint and half a key pair: ignored",
			{{"s3.endpoint", "https://evil.example"}, {"s3.access-key-id", "VENDED"}}, 2, true,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
		{"secret alone: ignored", {{"s3.secret-access-key", "vs"}, {"s3.session-token", "vt"}}, 2, true,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
		{"empty vended key: ignored",
			{{"s3.access-key-id", ""}, {"s3.secret-access-key", "vs"}, {"s3.endpoint", "https://evil.example"}}, 3, true,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
		{"vended credentials, endpoints not allowed",
			{{"s3.endpoint", "https://vended.example"}, {"s3.access-key-id", "VENDED"},
			{"s3.secret-access-key", "vs"}, {"s3.session-token", "vt"}}, 4, false,
		"https://s3.server.example", "VENDED", "vs", "vt", "us-east-1"},
		{"vended credentials and endpoint, allowed",
			{{"s3.endpoint", "https://vended.example"}, {"s3.access-key-id", "VENDED"},
			{"s3.secret-access-key", "vs"}, {"s3.session-token", "vt"}}, 4, true,
		"https://vended.example", "VENDED", "vs", "vt", "us-east-1"},
		{"vended credentials without a token: the mapping's token is not kept",
			{{"s3.access-key-id", "VENDED"}, {"s3.secret-access-key", "vs"}}, 2, true,
		"https://s3.server.example", "VENDED", "vs", NULL, "us-east-1"},
		{"region applies",
			{{"client.region", "eu-central-1"}}, 1, false,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "eu-central-1"},
		{"a region that could change the host: ignored",
			{{"client.region", "x.evil.example/"}, {"s3.region", "a:b@c"}}, 2, false,
		"https://s3.server.example", "MAPPINGKEY", "mapping-secret", "mapping-token", "us-east-1"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		IoStorageConfig cfg;

		mapping_config(&cfg);
		io_storage_config_apply(&cfg, cases[i].kv, cases[i].n, cases[i].allow_endpoint);
		CHECK(STREQ_OR_NULL(cases[i].endpoint, cfg.s3_endpoint), "%s: endpoint %s",
			  cases[i].name, cfg.s3_endpoint ? cfg.s3_endpoint : "(null)");
		CHECK(STREQ_OR_NULL(cases[i].key, cfg.s3_access_key_id) &&
			  STREQ_OR_NULL(cases[i].secret, cfg.s3_secret_access_key),
			  "%s: key %s", cases[i].name, cfg.s3_access_key_id ? cfg.s3_access_key_id : "(null)");
		CHECK(STREQ_OR_NULL(cases[i].token, cfg.s3_session_token), "%s: token %s",
			  cases[i].name, cfg.s3_session_token ? cfg.s3_session_token : "(null)");
		CHECK(STREQ_OR_NULL(cases[i].region, cfg.s3_region), "%s: region %s",
			  cases[i].name, cfg.s3_region ? cfg.s3_region : "(null)");
	}
	/* path style applies either way */
	{
		IoStorageConfig cfg;
		IoKeyValue	kv[1] = {{"s3.path-style-access", "true"}};

		mapping_config(&cfg);
		io_storage_config_apply(&cfg, kv, 1, false);
		CHECK(cfg.s3_path_style == 1, "path style");
	}
	/* the server's own region is checked too */
	{
		IoStorageConfig cfg;
		IoStorage  *st;
		TmsError	err;

		mapping_config(&cfg);
		cfg.s3_region = "us-east-1/../x";
		st = io_storage_create(&cfg, &err);
		CHECK(st == NULL && err.code == IO_ERR_INVALID_ARGUMENT, "bad region refused");
		io_storage_free(st);
	}
}

/* ----------------------------------------------------------------
 * Local file storage
 * ----------------------------------------------------------------
 */
static int
count_cb(void *arg, const IoObjectInfo *obj)
{
	int		   *n = arg;

	(void) obj;
	(*n)++;
	return 0;
}

static void
test_file_storage(void)
{
	char		dir[] = "/tmp/io_test_XXXXXX";
	const char *roots[1] = {dir};
	IoStorageConfig cfg;
	IoStorage  *st;
	TmsError	err;
	IoBuffer	buf;
	char		uri[256];
	uint64_t	size = 0;
	int			n = 0;

	if (mkdtemp(dir) == NULL)
	{
		CHECK(0, "mkdtemp");
		return;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.local_roots = roots;
	cfg.nlocal_roots = 1;
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL, "storage create");
	if (st == NULL)
		return;
	snprintf(uri, sizeof(uri), "file://%s/a/b/c.txt", dir);
	CHECK(io_storage_write(st, uri, "hello world", 11, &err) == 0, "write: %s", err.message);
	CHECK(io_storage_read(st, uri, 6, 5, &buf, &err) == 0 && buf.len == 5 &&
		  memcmp(buf.data, "world", 5) == 0, "ranged read");
	io_buffer_free(&buf);
	CHECK(io_storage_read(st, uri, 0, 0, &buf, &err) == 0 && buf.len == 11, "full read");
	io_buffer_free(&buf);
	CHECK(io_storage_read(st, uri, 20, 5, &buf, &err) == 0 && buf.len == 0, "read past end");
	io_buffer_free(&buf);
	CHECK(io_storage_size(st, uri, &size, &err) == 0 && size == 11, "size");
	snprintf(uri, sizeof(uri), "%s/a/d.txt", dir);
	CHECK(io_storage_write(st, uri, "x", 1, &err) == 0, "write plain path");
	snprintf(uri, sizeof(uri), "file://%s/a", dir);
	CHECK(io_storage_list(st, uri, count_cb, &n, &err) == 0 && n == 2, "list finds 2, got %d", n);
	{
		char		u1[256],
					u2[256],
					u3[256];
		const char *uris[3] = {u1, u2, u3};
		IoDeleteResult res[3];

		snprintf(u1, sizeof(u1), "file://%s/a/b/c.txt", dir);
		snprintf(u2, sizeof(u2), "%s/a/missing", dir);
		snprintf(u3, sizeof(u3), "relative/x");
		CHECK(io_storage_delete(st, uris, 3, res, &err) == 0, "delete");
		CHECK(res[0].deleted && res[1].deleted && !res[2].deleted,
			  "delete results (missing = ok, relative refused)");
		CHECK(io_storage_read(st, u1, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_NOT_FOUND,
			  "deleted file is gone");
	}
	/* "%2e%2e" is a name, not "..": it never reaches a file outside */
	snprintf(uri, sizeof(uri), "%s/secret", dir);
	CHECK(io_storage_write(st, uri, "s", 1, &err) == 0, "write secret: %s", err.message);
	snprintf(uri, sizeof(uri), "%s/a/%%2e%%2e/secret", dir);
	CHECK(io_storage_read(st, uri, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_NOT_FOUND,
		  "%%2e%%2e does not traverse: %s", err.message);
	snprintf(uri, sizeof(uri), "file://%s/a/%%2E%%2E/secret", dir);
	CHECK(io_storage_read(st, uri, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_NOT_FOUND,
		  "%%2E%%2E does not traverse: %s", err.message);
	snprintf(uri, sizeof(uri), "%s/a/../secret", dir);
	CHECK(io_storage_read(st, uri, 0, 0, &buf, &err) != 0 &&
		  err.code == IO_ERR_INVALID_ARGUMENT, "\"..\" refused: %s", err.message);
	n = 0;
	snprintf(uri, sizeof(uri), "file://%s/nonexistent", dir);
	CHECK(io_storage_list(st, uri, count_cb, &n, &err) == 0 && n == 0, "list of missing dir is empty");
	io_storage_free(st);
	{
		char		cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			printf("warning: could not remove %s\n", dir);
	}
}

/* ----------------------------------------------------------------
 * Local access confined to the allowed roots, never through a symlink
 * ----------------------------------------------------------------
 */

/* Does path exist (without following a final symlink)? */
static bool
exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

/* Write a small file with stdio, outside io (the test's own setup). */
static void
put_file(const char *path, const char *text)
{
	FILE	   *f = fopen(path, "w");

	if (f != NULL)
	{
		fputs(text, f);
		fclose(f);
	}
}

static void
test_local_confinement(void)
{
	char		dir[] = "/tmp/io_conf_XXXXXX";
	char		wh[256],
				wh_slash[260],
				p[512],
				q[512],
				want[700];
	const char *roots[1];
	IoStorageConfig cfg;
	IoStorage  *st;
	TmsError	err;
	IoBuffer	buf;
	uint64_t	size;
	int			n;

	if (mkdtemp(dir) == NULL)
	{
		CHECK(0, "mkdtemp");
		return;
	}
	/* dir/wh/t/paths/link -> dir/elsewhere; dir/elsewhere/v5 */
	snprintf(wh, sizeof(wh), "%s/wh", dir);
	snprintf(wh_slash, sizeof(wh_slash), "%s/", wh);
	snprintf(p, sizeof(p), "mkdir -p %s/wh/t/paths %s/elsewhere %s/wh2", dir, dir, dir);
	CHECK(system(p) == 0, "mkdir");
	snprintf(p, sizeof(p), "%s/elsewhere/v5", dir);
	put_file(p, "precious");
	snprintf(p, sizeof(p), "%s/wh2/f", dir);
	put_file(p, "sibling");
	snprintf(p, sizeof(p), "%s/wh/t/data.txt", dir);
	put_file(p, "inside");
	snprintf(p, sizeof(p), "%s/elsewhere", dir);
	snprintf(q, sizeof(q), "%s/wh/t/paths/link", dir);
	CHECK(symlink(p, q) == 0, "symlink dir");
	snprintf(p, sizeof(p), "%s/elsewhere/v5", dir);
	snprintf(q, sizeof(q), "%s/wh/t/flink", dir);
	CHECK(symlink(p, q) == 0, "symlink file");
	snprintf(q, sizeof(q), "%s/wh/t/fifo", dir);
	CHECK(mkfifo(q, 0600) == 0, "mkfifo");

	roots[0] = wh_slash;		/* a root may end in '/' */
	memset(&cfg, 0, sizeof(cfg));
	cfg.local_roots = roots;
	cfg.nlocal_roots = 1;
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL, "storage create: %s", st ? "" : err.message);
	if (st == NULL)
		goto out;

	/* inside: fine */
	snprintf(p, sizeof(p), "%s/wh/t/data.txt", dir);
	CHECK(io_storage_read(st, p, 0, 0, &buf, &err) == 0 && buf.len == 6, "read inside: %s",
		  err.message);
	io_buffer_free(&buf);

	/* the reproduction: deleting through a symlinked directory */
	{
		char		u[512];
		const char *uris[1] = {u};
		IoDeleteResult res[1];

		snprintf(u, sizeof(u), "%s/wh/t/paths/link/v5", dir);
		CHECK(io_storage_delete(st, uris, 1, res, &err) == 0, "delete call");
		snprintf(p, sizeof(p), "%s/elsewhere/v5", dir);
		CHECK(exists(p), "delete through a symlinked directory removed the target");
		CHECK(!res[0].deleted && strstr(res[0].message, "symbolic link") != NULL,
			  "delete through a symlink reported: %s %s", res[0].code, res[0].message);

		/* a symlink as the final component: the link goes, the target stays */
		snprintf(u, sizeof(u), "file://%s/wh/t/flink", dir);
		CHECK(io_storage_delete(st, uris, 1, res, &err) == 0 && res[0].deleted,
			  "delete of a final symlink");
		snprintf(q, sizeof(q), "%s/wh/t/flink", dir);
		CHECK(!exists(q) && exists(p), "the link is gone, its target stays");
		CHECK(symlink(p, q) == 0, "symlink file again");

		/* outside */
		snprintf(u, sizeof(u), "%s/elsewhere/v5", dir);
		CHECK(io_storage_delete(st, uris, 1, res, &err) == 0 && !res[0].deleted &&
			  strstr(res[0].message, "outside the allowed locations") != NULL,
			  "delete outside refused: %s", res[0].message);
		CHECK(exists(p), "file outside kept");
	}

	/*
	 * One batch, as a purge sends it: files of one directory (the second and
	 * later take the kept directory), a file through a symlinked directory
	 * between them, ".." and "." as final names, a file outside. Only the
	 * plain files below the root go.
	 */
	{
		char		u[8][512];
		const char *uris[8];
		IoDeleteResult res[8];

		snprintf(p, sizeof(p), "mkdir -p %s/wh/t/batch", dir);
		CHECK(system(p) == 0, "mkdir batch");
		for (int i = 0; i < 3; i++)
		{
			snprintf(p, sizeof(p), "%s/wh/t/batch/f%d", dir, i);
			put_file(p, "x");
		}
		snprintf(u[0], sizeof(u[0]), "%s/wh/t/batch/f0", dir);
		snprintf(u[1], sizeof(u[1]), "file://%s/wh/t/batch/f1", dir);
		snprintf(u[2], sizeof(u[2]), "%s/wh/t/paths/link/v5", dir);
		snprintf(u[3], sizeof(u[3]), "%s/wh/t/batch/..", dir);
		snprintf(u[4], sizeof(u[4]), "%s/wh/t/batch/f2", dir);
		snprintf(u[5], sizeof(u[5]), "%s/wh/t/batch/.", dir);
		snprintf(u[6], sizeof(u[6]), "%s/wh/t/batch/missing", dir);
		snprintf(u[7], sizeof(u[7]), "%s/elsewhere/v5", dir);
		for (int i = 0; i < 8; i++)
			uris[i] = u[i];
		CHECK(io_storage_delete(st, uris, 8, res, &err) == 0, "batch delete call");
		CHECK(res[0].deleted && res[1].deleted && res[4].deleted && res[6].deleted,
			  "batch: the plain files are deleted (%s / %s / %s / %s)",
			  res[0].message, res[1].message, res[4].message, res[6].message);
		CHECK(!res[2].deleted && strstr(res[2].message, "symbolic link") != NULL,
			  "batch: through a link refused: %s", res[2].message);
		CHECK(!res[3].deleted && !res[5].deleted, "batch: \".\" and \"..\" not deleted: %s / %s",
			  res[3].message, res[5].message);
		CHECK(!res[7].deleted && strstr(res[7].message, "outside the allowed locations") != NULL,
			  "batch: outside refused: %s", res[7].message);
		snprintf(p, sizeof(p), "%s/elsewhere/v5", dir);
		CHECK(exists(p), "batch: the file outside stays");
		snprintf(p, sizeof(p), "%s/wh/t/batch", dir);
		CHECK(exists(p), "batch: the directory stays");
		for (int i = 0; i < 3; i++)
		{
			snprintf(p, sizeof(p), "%s/wh/t/batch/f%d", dir, i);
			CHECK(!exists(p), "batch: f%d is gone", i);
		}
	}

	/* reading through symlinks fails */
	snprintf(p, sizeof(p), "%s/wh/t/flink", dir);
	CHECK(io_storage_read(st, p, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_FORBIDDEN &&
		  strstr(err.message, "symbolic link") != NULL, "read of a symlink: %s", err.message);
	CHECK(io_storage_size(st, p, &size, &err) != 0 && err.code == IO_ERR_FORBIDDEN,
		  "size of a symlink: %s", err.message);
	snprintf(p, sizeof(p), "%s/wh/t/paths/link/v5", dir);
	CHECK(io_storage_read(st, p, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_FORBIDDEN,
		  "read through a symlinked directory: %s", err.message);
	snprintf(p, sizeof(p), "%s/wh/t/paths/link/new", dir);
	CHECK(io_storage_write(st, p, "x", 1, &err) != 0 && err.code == IO_ERR_FORBIDDEN,
		  "write through a symlinked directory: %s", err.message);
	snprintf(q, sizeof(q), "%s/elsewhere/new", dir);
	CHECK(!exists(q), "nothing written outside");
	snprintf(p, sizeof(p), "%s/wh/t/paths/link", dir);
	n = 0;
	CHECK(io_storage_list(st, p, count_cb, &n, &err) != 0 && err.code == IO_ERR_FORBIDDEN &&
		  n == 0, "list through a symlink: %s", err.message);
	snprintf(p, sizeof(p), "%s/wh/t", dir);
	n = 0;
	CHECK(io_storage_list(st, p, count_cb, &n, &err) == 0 && n == 1,
		  "list skips symlinks and fifos: %d (%s)", n, err.message);

	/* a fifo is refused without blocking */
	snprintf(p, sizeof(p), "%s/wh/t/fifo", dir);
	CHECK(io_storage_read(st, p, 0, 0, &buf, &err) != 0 && err.code == IO_ERR_STORAGE,
		  "read of a fifo: %s", err.message);

	/* outside: one message, whether the file exists or not */
	{
		const char *outside[] = {"/etc/passwd", "/etc/no-such-file", "file:///etc/passwd",
		"/tmp", NULL, NULL, NULL, NULL};
		char		o1[300],
					o2[300],
					o3[300],
					o4[300];

		snprintf(o1, sizeof(o1), "%s/elsewhere/v5", dir);
		snprintf(o2, sizeof(o2), "%s/elsewhere/missing", dir);
		snprintf(o3, sizeof(o3), "%s/wh2/f", dir);	/* wh2 is not under wh */
		snprintf(o4, sizeof(o4), "%s/wh", dir); /* the root itself */
		outside[4] = o1;
		outside[5] = o2;
		outside[6] = o3;
		outside[7] = o4;
		for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		{
			snprintf(want, sizeof(want), "path \"%s\" is outside the allowed locations",
					 outside[i]);
			CHECK(io_storage_read(st, outside[i], 0, 0, &buf, &err) != 0 &&
				  err.code == IO_ERR_FORBIDDEN && strcmp(err.message, want) == 0,
				  "read \"%s\": %s", outside[i], err.message);
			CHECK(io_storage_size(st, outside[i], &size, &err) != 0 &&
				  err.code == IO_ERR_FORBIDDEN && strcmp(err.message, want) == 0,
				  "size \"%s\": %s", outside[i], err.message);
			n = 0;
			CHECK(io_storage_list(st, outside[i], count_cb, &n, &err) != 0 &&
				  err.code == IO_ERR_FORBIDDEN && strcmp(err.message, want) == 0 && n == 0,
				  "list \"%s\": %s", outside[i], err.message);
		}
		snprintf(p, sizeof(p), "%s/wh2/new", dir);
		CHECK(io_storage_write(st, p, "x", 1, &err) != 0 && err.code == IO_ERR_FORBIDDEN &&
			  !exists(p), "write outside: %s", err.message);
		CHECK(io_storage_read(st, "/etc/../etc/passwd", 0, 0, &buf, &err) != 0 &&
			  err.code == IO_ERR_INVALID_ARGUMENT, "dot segments refused: %s", err.message);
	}

	/* writes create directories below the root */
	snprintf(p, sizeof(p), "%s/wh/new/deep/er/f", dir);
	CHECK(io_storage_write(st, p, "x", 1, &err) == 0 && exists(p), "write creates dirs: %s",
		  err.message);
	io_storage_free(st);

	/* a root reached through a symlink is resolved once, with realpath() */
	snprintf(p, sizeof(p), "%s/wh", dir);
	snprintf(q, sizeof(q), "%s/whlink", dir);
	CHECK(symlink(p, q) == 0, "symlink root");
	roots[0] = q;
	st = io_storage_create(&cfg, &err);
	snprintf(p, sizeof(p), "%s/whlink/t/data.txt", dir);
	CHECK(st && io_storage_read(st, p, 0, 0, &buf, &err) == 0 && buf.len == 6,
		  "read below a symlinked root: %s", err.message);
	io_buffer_free(&buf);
	io_storage_free(st);

	/* no roots: no local access */
	cfg.nlocal_roots = 0;
	cfg.local_roots = NULL;
	st = io_storage_create(&cfg, &err);
	snprintf(p, sizeof(p), "%s/wh/t/data.txt", dir);
	snprintf(want, sizeof(want), "path \"%s\" is outside the allowed locations", p);
	CHECK(st && io_storage_read(st, p, 0, 0, &buf, &err) != 0 &&
		  err.code == IO_ERR_FORBIDDEN && strcmp(err.message, want) == 0,
		  "no roots: %s", err.message);
	io_storage_free(st);

	/* roots must be absolute and canonical */
	{
		const char *bad[] = {"relative/wh", "/wh/../etc", "s3://b/wh", ""};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		{
			roots[0] = bad[i];
			cfg.local_roots = roots;
			cfg.nlocal_roots = 1;
			st = io_storage_create(&cfg, &err);
			CHECK(st == NULL && err.code == IO_ERR_INVALID_ARGUMENT,
				  "root \"%s\" refused: %s", bad[i], st ? "accepted" : err.message);
			io_storage_free(st);
		}
	}

out:
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	if (system(p) != 0)
		printf("warning: could not remove %s\n", dir);
}

/* ----------------------------------------------------------------
 * The FileIO router: canonicalise against the root, read through storage
 * ----------------------------------------------------------------
 */

/* Read a whole object through an IoFileIO; malloc'd or NULL with *err. */
static char *
fileio_slurp(const IoFileIO *fio, const char *path, size_t *len, TmsError *err)
{
	int64_t		size;
	void	   *h = fio->open(fio->arg, path, &size, err);
	char	   *data = NULL;
	size_t		n = 0;

	if (h == NULL)
		return NULL;
	for (;;)
	{
		char	   *nd = io_realloc(data, n + 65536 + 1);
		int64_t		r;

		if (nd == NULL)
			break;
		data = nd;
		r = fio->read(fio->arg, h, data + n, 65536, err);
		if (r < 0)
		{
			io_free(data);
			data = NULL;
			break;
		}
		if (r == 0)
			break;
		n += (size_t) r;
	}
	fio->close(fio->arg, h);
	if (data != NULL)
		data[n] = '\0';
	*len = n;
	return data;
}

static void
test_storage_fileio(void)
{
	char		dir[] = "/tmp/io_fileio_XXXXXX";
	char		root[256],
				path[512];
	const char *roots[1] = {dir};
	IoStorageConfig cfg;
	IoStorage  *st;
	IoStorageFileIO state;
	IoFileIO	fio;
	TmsError	err;
	char	   *big,
			   *got;
	size_t		len,
				biglen = (size_t) IO_FILEIO_CHUNK + 12345;
	const char *forms[] = {
		"t/metadata/v1.json", "./t/metadata/v1.json", "file:t/metadata/v1.json",
		"file://t/metadata/v1.json", NULL, NULL, NULL
	};

	if (mkdtemp(dir) == NULL)
	{
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(root, sizeof(root), "%s/wh", dir);
	memset(&cfg, 0, sizeof(cfg));
	cfg.local_roots = roots;
	cfg.nlocal_roots = 1;
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL, "storage create: %s", st ? "" : err.message);
	if (st == NULL)
		return;
	snprintf(path, sizeof(path), "%s/t/metadata/v1.json", root);
	CHECK(io_storage_write(st, path, "{\"v\": 1}", 8, &err) == 0, "write: %s", err.message);
	big = io_malloc(biglen);
	for (size_t i = 0; big && i < biglen; i++)
		big[i] = (char) ('a' + i % 26);
	snprintf(path, sizeof(path), "%s/t/data/big.bin", root);
	CHECK(big && io_storage_write(st, path, big, biglen, &err) == 0, "write big");

	io_storage_fileio(&state, st, root, NULL, NULL, &fio);
	{
		char		abs1[512],
					abs2[512],
					abs3[512];

		snprintf(abs1, sizeof(abs1), "%s/t/metadata/v1.json", root);
		snprintf(abs2, sizeof(abs2), "file://%s//t/metadata/v1.json", root);
		snprintf(abs3, sizeof(abs3), "file://localhost%s/t/metadata/v1.json", root);
		forms[4] = abs1;
		forms[5] = abs2;
		forms[6] = abs3;
		for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
		{
			got = fileio_slurp(&fio, forms[i], &len, &err);
			CHECK(got && len == 8 && memcmp(got, "{\"v\": 1}", 8) == 0,
				  "router reads \"%s\": %s", forms[i], got ? "" : err.message);
			io_free(got);
		}
	}
	/* across a chunk boundary */
	state.bytes_read = 0;
	got = fileio_slurp(&fio, "t/data/big.bin", &len, &err);
	CHECK(got && big && len == biglen && memcmp(got, big, biglen) == 0,
		  "router reads %zu bytes across chunks: %zu", biglen, got ? len : 0);
	CHECK(state.bytes_read == biglen, "bytes_read %llu", (unsigned long long) state.bytes_read);
	io_free(got);
	/* a reader of heads: the first fetch is small, the next ones double */
	state.first_chunk = 64 * 1024;
	state.bytes_read = 0;
	{
		int64_t		size;
		char		head[16];
		void	   *h = fio.open(fio.arg, "t/data/big.bin", &size, &err);

		/* a local file is sized at open, and nothing read */
		CHECK(h != NULL && size == (int64_t) biglen && state.bytes_read == 0 &&
			  fio.read(fio.arg, h, head, sizeof(head), &err) == (int64_t) sizeof(head) &&
			  big && memcmp(head, big, sizeof(head)) == 0 &&
			  state.bytes_read == 64 * 1024,
			  "the head costs one fetch of first_chunk bytes: %llu",
			  (unsigned long long) state.bytes_read);
		if (h != NULL)
			fio.close(fio.arg, h);
	}
	state.bytes_read = 0;
	got = fileio_slurp(&fio, "t/data/big.bin", &len, &err);
	CHECK(got && big && len == biglen && memcmp(got, big, biglen) == 0 &&
		  state.bytes_read == biglen,
		  "growing fetches read the same %zu bytes: %zu", biglen, got ? len : 0);
	io_free(got);
	state.first_chunk = 0;
	/* small reads through a chunk, then large ones straight into the buffer */
	{
		int64_t		size;
		void	   *h = fio.open(fio.arg, "t/data/big.bin", &size, &err);
		char	   *all = io_malloc(biglen + 1);
		size_t		n = 0;
		int64_t		r = 0;

		while (h != NULL && all != NULL && n < 1000 &&
			   (r = fio.read(fio.arg, h, all + n, 7, &err)) > 0)
			n += (size_t) r;
		while (h != NULL && all != NULL && n < biglen &&
			   (r = fio.read(fio.arg, h, all + n, biglen - n < 65536 ? biglen - n : 65536,
							 &err)) > 0)
			n += (size_t) r;
		CHECK(h != NULL && all != NULL && big && n == biglen &&
			  memcmp(all, big, biglen) == 0 &&
			  fio.read(fio.arg, h, all, 65536, &err) == 0,
			  "small then large reads give the file: %zu of %zu", n, biglen);
		if (h != NULL)
			fio.close(fio.arg, h);
		io_free(all);
	}
	io_free(big);

	/* refusals and missing files keep their codes */
	CHECK(fileio_slurp(&fio, "t/../t/metadata/v1.json", &len, &err) == NULL &&
		  err.code == IO_ERR_INVALID_ARGUMENT, "dot segment refused: %s", err.message);
	CHECK(fileio_slurp(&fio, "hdfs://b/x", &len, &err) == NULL &&
		  err.code == IO_ERR_INVALID_ARGUMENT, "other scheme refused: %s", err.message);
	CHECK(fileio_slurp(&fio, "t/metadata/v9.json", &len, &err) == NULL &&
		  err.code == IO_ERR_NOT_FOUND, "missing: %s", tms_error_code_name(err.code));
	io_storage_fileio(&state, st, NULL, NULL, NULL, &fio);
	CHECK(fileio_slurp(&fio, "t/metadata/v1.json", &len, &err) == NULL &&
		  err.code == IO_ERR_INVALID_ARGUMENT, "relative without a root: %s", err.message);
	io_storage_free(st);
	{
		char		cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			printf("warning: could not remove %s\n", dir);
	}
}

/* ----------------------------------------------------------------
 * HTTP timeouts and interrupts against a socket that never answers
 * ----------------------------------------------------------------
 */
static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct Deadline
{
	int64_t		at;
	int			calls;
	/* the waiting callback's view */
	int			waits;			/* network waits begun */
	bool		in_wait;
	bool		nested;			/* a wait began inside a wait */
	bool		checked_in_wait;	/* the interrupt check ran inside one */
	/* the sleep callback's view */
	int			sleeps;
	long		longest_sleep;
	int			late_sleeps;	/* slices begun once the interrupt was due */
} Deadline;

static int
interrupt_after(void *arg)
{
	Deadline   *d = arg;

	d->calls++;
	if (d->in_wait)
		d->checked_in_wait = true;
	return now_ms() >= d->at;
}

/* IoHttpOptions.waiting: what the bridge turns into a wait event. */
static void
waiting_seen(void *arg, bool waiting)
{
	Deadline   *d = arg;

	if (waiting)
	{
		if (d->in_wait)
			d->nested = true;
		d->waits++;
	}
	d->in_wait = waiting;
}

/* IoHttpOptions.sleep_ms: what the bridge turns into a WaitLatch. */
static void
sleep_seen(void *arg, long ms)
{
	Deadline   *d = arg;
	struct timespec ts;

	d->sleeps++;
	if (now_ms() >= d->at)
		d->late_sleeps++;
	if (ms > d->longest_sleep)
		d->longest_sleep = ms;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

static void
test_http_interrupts(void)
{
	int			lsock = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr;
	socklen_t	alen = sizeof(addr);
	char		uri[128];
	IoCatalogConfig cfg;
	IoCatalog  *cat;
	TmsError	err;
	Deadline	d = {0};
	int64_t		t0,
				el;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lsock < 0 || bind(lsock, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(lsock, 16) != 0 || getsockname(lsock, (struct sockaddr *) &addr, &alen) != 0)
	{
		CHECK(0, "cannot open a listening socket");
		return;
	}
	/* the kernel completes connections; nobody ever answers */
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d", ntohs(addr.sin_port));

	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = uri;
	cfg.http.retries = 0;
	cfg.http.request_timeout_ms = 600;
	t0 = now_ms();
	cat = io_catalog_open(&cfg, &err);
	el = now_ms() - t0;
	CHECK(cat == NULL && err.code == IO_ERR_TIMEOUT, "hang ends in a timeout (%s)", err.message);
	CHECK(el >= 550, "no timeout before 600 ms, took %lld ms", (long long) el);
	BENCH_CHECK(el < 1500, "timeout after ~600 ms, took %lld ms", (long long) el);
	printf("hang with 600 ms timeout ended after %lld ms\n", (long long) el);

	cfg.http.request_timeout_ms = 30000;
	d.at = now_ms() + 300;
	d.calls = 0;
	cfg.http.interrupted = interrupt_after;
	cfg.http.interrupt_arg = &d;
	t0 = now_ms();
	cat = io_catalog_open(&cfg, &err);
	el = now_ms() - t0;
	CHECK(cat == NULL && err.code == IO_ERR_INTERRUPTED, "interrupt ends the request (%s)", err.message);
	CHECK(el >= 290, "not interrupted before 300 ms: %lld ms", (long long) el);
	BENCH_CHECK(el < 300 + 2 * IO_POLL_INTERVAL_MS + 50,
				"interrupted within a poll interval: %lld ms", (long long) el);
	printf("interrupt requested at 300 ms, request ended after %lld ms (%d checks)\n",
		   (long long) el, d.calls);

	/*
	 * Every network wait is told to the waiting callback (the wait event
	 * inside PostgreSQL), begun and ended in pairs, and the interrupt check
	 * (which may end the process) runs only between waits.
	 */
	memset(&d, 0, sizeof(d));
	d.at = now_ms() + 300;
	cfg.http.waiting = waiting_seen;
	cat = io_catalog_open(&cfg, &err);
	CHECK(cat == NULL && err.code == IO_ERR_INTERRUPTED, "interrupted again (%s)", err.message);
	CHECK(d.waits >= 3 && !d.in_wait && !d.nested,
		  "network waits told in pairs: %d waits, ended %d, nested %d",
		  d.waits, !d.in_wait, d.nested);
	CHECK(!d.checked_in_wait, "the interrupt check runs between waits, never inside one");
	cfg.http.waiting = NULL;
	close(lsock);

	/* backoff and Retry-After pauses go through sleep_ms, in short slices */
	{
		IoHttpOptions opt;

		memset(&opt, 0, sizeof(opt));
		memset(&d, 0, sizeof(d));
		d.at = now_ms() + 60000;
		opt.interrupted = interrupt_after;
		opt.sleep_ms = sleep_seen;
		opt.interrupt_arg = &d;
		t0 = now_ms();
		CHECK(io_sleep_ms(&opt, 200, &err) == 0, "a 200 ms pause completes");
		el = now_ms() - t0;
		CHECK(d.sleeps >= 4 && d.longest_sleep <= IO_POLL_INTERVAL_MS && el >= 190,
			  "the pause slept through the callback: %d slices, longest %ld ms, %lld ms",
			  d.sleeps, d.longest_sleep, (long long) el);
		d.at = now_ms() + 100;
		t0 = now_ms();
		CHECK(io_sleep_ms(&opt, 5000, &err) != 0 && err.code == IO_ERR_INTERRUPTED,
			  "an interrupt ends a pause");
		el = now_ms() - t0;

		/*
		 * The behaviour, not the wall time (a loaded or sanitized run may
		 * oversleep a slice): once the interrupt is due, at most the slice
		 * that was already being decided begins.
		 */
		CHECK(d.late_sleeps <= 1, "no pause slice begins after the interrupt: %d did",
			  d.late_sleeps);
		BENCH_CHECK(el < 100 + 2 * IO_POLL_INTERVAL_MS, "pause interrupted after %lld ms",
					(long long) el);
	}

	/* a port nobody listens on: connection refused, quickly, no retry delay */
	cfg.http.interrupted = NULL;
	cfg.http.retries = 0;
	t0 = now_ms();
	cat = io_catalog_open(&cfg, &err);
	el = now_ms() - t0;
	CHECK(cat == NULL && err.code == IO_ERR_CONNECT, "refused connection: %s", err.message);
	BENCH_CHECK(el < 1000, "refused connection fails fast: %lld ms", (long long) el);

	io_http_shutdown();
}

/* ----------------------------------------------------------------
 * Batches of table loads against a forked catalog server
 * ----------------------------------------------------------------
 */

/* Counters shared with the server's processes (MAP_SHARED). */
typedef struct ServerStats
{
	int			requests;		/* table loads answered or started */
	int			in_flight;
	int			max_in_flight;
	int			connections;
	int			tokens;			/* tokens issued: "tok<N>" */
	int			min_valid_token;	/* loads with an older token: 401 */
	int			flaky_left;		/* 503s still to give for "flaky" */
	char		last_request[1024]; /* "METHOD path" of the last request */
	char		hook_request[4096]; /* head and body of the last /hook/
									 * request */
	int			hook_requests;
	int			overlap_wanted; /* slow requests wait for this many at once */
} ServerStats;

static ServerStats *stats;

/*
 * A slow request ("slow*" tables, bucket "slowly") first waits until
 * overlap_wanted requests have been in flight at once, or 5 s have passed,
 * then takes its 100 ms.  So a client that overlaps its requests is seen to
 * do so however loaded the machine is, and one that sends them one after
 * the other is caught, late, but surely.  Tests that want no wait leave
 * overlap_wanted at 0.
 */
static void
slow_request(void)
{
	for (int waited = 0; waited < 5000 && stats->overlap_wanted > 0 &&
		 stats->max_in_flight < stats->overlap_wanted; waited++)
		usleep(1000);
	usleep(100 * 1000);
}

/* Write all of buf to fd. */
static void
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = write(fd, buf, len);

		if (n <= 0)
			return;
		buf += n;
		len -= (size_t) n;
	}
}

/* Send a response with a JSON (or empty) body. */
static void
respond(int fd, int status, const char *extra, const char *body)
{
	char		head[512];

	snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n",
			 status, extra ? extra : "", body ? strlen(body) : 0);
	write_all(fd, head, strlen(head));
	if (body)
		write_all(fd, body, strlen(body));
}

/* 4 MiB of 'a' sent as about 4 KB with Content-Encoding: deflate. */
static void
respond_deflate_bomb(int fd)
{
	size_t		n = 4 * 1024 * 1024;
	char	   *plain = io_malloc(n);
	uLongf		zlen = compressBound((uLong) n);
	Bytef	   *z = io_malloc(zlen);
	char		head[256];

	if (plain == NULL || z == NULL)
		_exit(1);
	memset(plain, 'a', n);
	if (compress2(z, &zlen, (const Bytef *) plain, (uLong) n, 9) != Z_OK)
		_exit(1);
	snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: deflate\r\n"
			 "Content-Length: %lu\r\n\r\n", (unsigned long) zlen);
	write_all(fd, head, strlen(head));
	write_all(fd, (const char *) z, zlen);
	io_free(plain);
	io_free(z);
}

/*
 * One page of a listing of MANY_TABLES tables: pageToken is the offset,
 * pageSize the page's length (default 1000).
 */
#define MANY_TABLES 100000

static void
respond_many_page(int fd, const char *path)
{
	const char *t = strstr(path, "pageToken=");
	const char *ps = strstr(path, "pageSize=");
	long		from = t ? atol(t + 10) : 0;
	long		size = ps ? atol(ps + 9) : 1000;
	IoStrBuf	sb;
	char		head[256];
	long		i;

	if (size <= 0)
		size = 1000;
	io_sb_init(&sb);
	io_sb_puts(&sb, "{\"identifiers\": [");
	for (i = from; i < from + size && i < MANY_TABLES; i++)
		io_sb_printf(&sb, "%s{\"namespace\": [\"many\"], \"name\": \"t%06ld\"}",
					 i > from ? ", " : "", i);
	io_sb_puts(&sb, "]");
	if (from + size < MANY_TABLES)
		io_sb_printf(&sb, ", \"next-page-token\": \"%ld\"", from + size);
	io_sb_puts(&sb, "}");
	if (sb.oom)
		_exit(1);
	snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			 sb.len);
	write_all(fd, head, strlen(head));
	write_all(fd, sb.data, sb.len);
	io_sb_free(&sb);
}

/* A table listing of 20,000 small identifiers (about 1 MB of JSON). */
static void
respond_big_listing(int fd)
{
	IoStrBuf	sb;
	char		head[256];

	io_sb_init(&sb);
	io_sb_puts(&sb, "{\"identifiers\": [");
	for (int i = 0; i < 20000; i++)
		io_sb_printf(&sb, "%s{\"namespace\": [\"big\"], \"name\": \"t%05d\"}",
					 i ? ", " : "", i);
	io_sb_puts(&sb, "]}");
	if (sb.oom)
		_exit(1);
	snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			 sb.len);
	write_all(fd, head, strlen(head));
	write_all(fd, sb.data, sb.len);
	io_sb_free(&sb);
}

/*
 * S3 DeleteObjects on bucket path /<bucket>?delete=: bucket "busy" is
 * refused as a whole (503 SlowDown, Retry-After: 2); "slowly" answers
 * after 100 ms; keys containing "slow" are refused SlowDown, "deny"
 * AccessDenied, the others deleted.  Counts requests in flight.
 */
static void
respond_delete(int fd, const char *path, const char *body, size_t body_len)
{
	IoStrBuf	sb;
	char		head[256];
	const char *p = body;
	const char *stop = body + body_len;
	int			now = __sync_add_and_fetch(&stats->in_flight, 1);
	int			max;

	__sync_add_and_fetch(&stats->requests, 1);
	while ((max = stats->max_in_flight) < now &&
		   !__sync_bool_compare_and_swap(&stats->max_in_flight, max, now))
		;
	if (strncmp(path, "/busy?", 6) == 0)
	{
		const char *doc = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";

		snprintf(head, sizeof(head),
				 "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nRetry-After: 2\r\n"
				 "Content-Length: %zu\r\n\r\n", strlen(doc));
		__sync_sub_and_fetch(&stats->in_flight, 1); /* before the answer */
		write_all(fd, head, strlen(head));
		write_all(fd, doc, strlen(doc));
		return;
	}
	if (strncmp(path, "/slowly?", 8) == 0)
		slow_request();
	io_sb_init(&sb);
	io_sb_puts(&sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult>");
	while ((p = memmem(p, stop - p, "<Key>", 5)) != NULL)
	{
		const char *k = p + 5;
		const char *e = memmem(k, stop - k, "</Key>", 6);
		int			n;

		if (e == NULL)
			break;
		n = (int) (e - k);
		if (memmem(k, n, "slow", 4))
			io_sb_printf(&sb, "<Error><Key>%.*s</Key><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>", n, k);
		else if (memmem(k, n, "deny", 4))
			io_sb_printf(&sb, "<Error><Key>%.*s</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>", n, k);
		else
			io_sb_printf(&sb, "<Deleted><Key>%.*s</Key></Deleted>", n, k);
		p = e + 6;
	}
	io_sb_puts(&sb, "</DeleteResult>");
	snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n\r\n",
			 sb.len);
	__sync_sub_and_fetch(&stats->in_flight, 1); /* before the answer */
	write_all(fd, head, strlen(head));
	write_all(fd, sb.data, sb.len);
	io_sb_free(&sb);
}

/*
 * Serve one keep-alive connection: POST v1/oauth/tokens, GET v1/config,
 * GET v1/namespaces/ns/tables/<name>: "missing" 404, "flaky" 503 while
 * flaky_left > 0, "hang" never answers, "slow*" answers after 100 ms;
 * If-None-Match "e1" gets 304, a token older than min_valid_token 401.
 */
static void
serve_connection(int fd)
{
	char		buf[16384];
	size_t		len = 0;

	for (;;)
	{
		char	   *end;
		char	   *cl;
		size_t		body_len = 0;
		size_t		used;
		char		method[16];
		char		path[512];
		char		name[256];
		char		body[1024];

		while ((end = memmem(buf, len, "\r\n\r\n", 4)) == NULL)
		{
			ssize_t		n = read(fd, buf + len, sizeof(buf) - 1 - len);

			if (n <= 0)
				return;
			len += (size_t) n;
		}
		buf[len] = '\0';
		*end = '\0';
		cl = strcasestr(buf, "Content-Length:");
		if (cl)
			body_len = (size_t) atol(cl + 15);
		used = (size_t) (end + 4 - buf) + body_len;
		while (len < used)
		{
			ssize_t		n = read(fd, buf + len, sizeof(buf) - 1 - len);

			if (n <= 0)
				return;
			len += (size_t) n;
		}
		if (sscanf(buf, "%15s %511s", method, path) != 2)
			return;
		snprintf(stats->last_request, sizeof(stats->last_request), "%s %s",
				 method, path);
		if (strncmp(path, "/hook/", 6) == 0)
		{
			/* the head's NUL is at end: put the blank line back */
			memcpy(end, "\r\n\r\n", 4);
			snprintf(stats->hook_request, sizeof(stats->hook_request), "%.*s",
					 (int) used, buf);
			__sync_add_and_fetch(&stats->hook_requests, 1);
		}
		if (strncmp(buf, "POST", 4) == 0 && strstr(path, "oauth/tokens"))
		{
			int			t = __sync_add_and_fetch(&stats->tokens, 1);

			snprintf(body, sizeof(body),
					 "{\"access_token\": \"tok%d\", \"token_type\": \"bearer\", \"expires_in\": 3600}", t);
			respond(fd, 200, NULL, body);
		}
		else if (strncmp(buf, "POST", 4) == 0 && strstr(path, "?delete=") != NULL)
			respond_delete(fd, path, end + 4, body_len);
		else if (strncmp(path, "/vended/", 8) == 0)
		{
			/* S3 with temporary credentials: only key id FRESH is good */
			const char *doc = "<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>";
			char		head[256];

			__sync_add_and_fetch(&stats->requests, 1);
			if (strstr(buf, "Credential=FRESH/") != NULL)
				snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
			else
				snprintf(head, sizeof(head),
						 "HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\n"
						 "Content-Length: %zu\r\n\r\n%s", strlen(doc), doc);
			write_all(fd, head, strlen(head));
		}
		else if (strncmp(path, "/v1/config", 10) == 0)
			respond(fd, 200, NULL, "{\"defaults\": {}, \"overrides\": {}}");
		else if (strcmp(path, "/deflate-bomb") == 0 || strncmp(path, "/hook/big", 9) == 0)
			respond_deflate_bomb(fd);
		else if (strncmp(path, "/hook/ok", 8) == 0)
			respond(fd, 200, NULL, "{\"ok\": true}");
		else if (strncmp(path, "/hook/busy", 10) == 0)
			respond(fd, 503, "Retry-After: 2\r\n", "{\"error\": \"busy, path was /hook/busy\"}");
		else if (strncmp(path, "/hook/moved", 11) == 0)
			respond(fd, 302, "Location: http://127.0.0.1:9/elsewhere\r\n", NULL);
		else if (strncmp(path, "/hook/hang", 10) == 0)
			sleep(30);
		else if (strncmp(path, "/v1/namespaces/big/tables", 25) == 0)
			respond_big_listing(fd);
		else if (strncmp(path, "/v1/namespaces/many/tables?", 27) == 0)
			respond_many_page(fd, path);
		else if (sscanf(path, "/v1/namespaces/ns/tables/%255[^?]", name) == 1)
		{
			int			now = __sync_add_and_fetch(&stats->in_flight, 1);
			int			max;
			const char *auth = strcasestr(buf, "Authorization: Bearer tok");

			__sync_add_and_fetch(&stats->requests, 1);
			while ((max = stats->max_in_flight) < now &&
				   !__sync_bool_compare_and_swap(&stats->max_in_flight, max, now))
				;
			if (strcmp(name, "hang") == 0)
				sleep(30);
			if (strncmp(name, "slow", 4) == 0)
				slow_request();

			/*
			 * The request ends here, before its answer is written: once the
			 * client has the answer it may send the next one, which must not
			 * find this one still counted.
			 */
			__sync_sub_and_fetch(&stats->in_flight, 1);
			if (auth && atoi(auth + 25) < stats->min_valid_token)
				respond(fd, 401, NULL, "{\"error\": {\"message\": \"expired\", \"type\": \"NotAuthorizedException\", \"code\": 401}}");
			else if (strcmp(name, "unsupported") == 0)
				respond(fd, 406, NULL, "{\"error\": {\"message\": \"The server does not support this operation\", \"type\": \"UnsupportedOperationException\", \"code\": 406}}");
			else if (strcmp(name, "missing") == 0)
				respond(fd, 404, NULL, "{\"error\": {\"message\": \"no\", \"type\": \"NoSuchTableException\", \"code\": 404}}");
			else if (strcmp(name, "flaky") == 0 &&
					 __sync_sub_and_fetch(&stats->flaky_left, 1) >= 0)
				respond(fd, 503, NULL, "{}");
			else if (strcasestr(buf, "If-None-Match: \"e1\""))
				respond(fd, 304, "ETag: \"e1\"\r\n", NULL);
			else
			{
				snprintf(body, sizeof(body),
						 "{\"metadata-location\": \"file:///m/%s.json\", \"metadata\": "
						 "{\"format-version\": 2, \"table-uuid\": \"u\", \"location\": \"file:///t\"}}",
						 name);
				respond(fd, 200, "ETag: \"e1\"\r\n", body);
			}
		}
		else
			respond(fd, 404, NULL, "{}");
		memmove(buf, buf + used, len - used);
		len -= used;
	}
}

/* Fork the server on a free loopback port; returns its pid (a process group). */
static pid_t
start_server(int *port)
{
	int			lsock = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in addr;
	socklen_t	alen = sizeof(addr);
	pid_t		pid;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lsock < 0 || bind(lsock, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(lsock, 64) != 0 || getsockname(lsock, (struct sockaddr *) &addr, &alen) != 0)
		return -1;
	*port = ntohs(addr.sin_port);
	pid = fork();
	if (pid != 0)
	{
		close(lsock);
		return pid;
	}
	setpgid(0, 0);
	/* never outlive the test, even when it crashes */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(600);
	signal(SIGCHLD, SIG_IGN);
	for (;;)
	{
		int			fd = accept(lsock, NULL, NULL);

		if (fd < 0)
			continue;
		__sync_add_and_fetch(&stats->connections, 1);
		if (fork() == 0)
		{
			close(lsock);
			alarm(60);
			serve_connection(fd);
			_exit(0);
		}
		close(fd);
	}
}

typedef struct BatchResults
{
	int			ok;				/* 200 */
	int			not_modified;	/* 304 */
	int			missing;
	int			failed;
	int			calls;
	int			stop_after;		/* > 0: stop after this many results */
	char		first_error[512];
} BatchResults;

static int
collect_result(void *arg, size_t index, IoLoadedTable *t, const TmsError *err)
{
	BatchResults *r = arg;

	(void) index;
	r->calls++;
	if (t != NULL && t->not_modified)
		r->not_modified++;
	else if (t != NULL && t->metadata_json != NULL && t->etag != NULL)
		r->ok++;
	else if (err != NULL && err->code == IO_ERR_NO_SUCH_TABLE)
		r->missing++;
	else
	{
		r->failed++;
		if (err != NULL && r->first_error[0] == '\0')
			snprintf(r->first_error, sizeof(r->first_error), "%s", err->message);
	}
	return r->stop_after > 0 && r->calls >= r->stop_after;
}

static void
test_load_batches(void)
{
	int			port;
	pid_t		server;
	char		uri[128];
	IoCatalogConfig cfg;
	IoCatalog  *cat;
	TmsError	err;
	IoLoadRequest reqs[20];
	char		names[20][16];
	BatchResults r;
	int64_t		t0,
				el;
	uint64_t	req0;
	int			conn0;
	int			rc;

	stats = mmap(NULL, sizeof(ServerStats), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED || (server = start_server(&port)) < 0)
	{
		CHECK(0, "cannot start the test server");
		return;
	}
	memset(stats, 0, sizeof(*stats));
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d", port);
	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = uri;
	cfg.http.retries = 2;
	cfg.http.retry_base_ms = 10;
	cat = io_catalog_open(&cfg, &err);
	CHECK(cat != NULL, "open: %s", err.message);
	if (cat == NULL)
		goto out;

	/* 20 loads taking 100 ms each, 8 at a time: ~300 ms, not 2 s */
	for (int i = 0; i < 20; i++)
	{
		snprintf(names[i], sizeof(names[i]), "slow%02d", i);
		reqs[i].ns = "ns";
		reqs[i].table = names[i];
		reqs[i].known_etag = NULL;
	}
	memset(&r, 0, sizeof(r));
	req0 = io_catalog_request_count(cat);
	conn0 = stats->connections;
	stats->overlap_wanted = 2;
	t0 = now_ms();
	rc = io_catalog_load_tables_etag(cat, reqs, 20, 8, collect_result, &r, &err);
	el = now_ms() - t0;
	stats->overlap_wanted = 0;
	CHECK(rc == 0 && r.ok == 20 && r.calls == 20, "batch of 20: rc %d, %d ok, %d calls (%s)",
		  rc, r.ok, r.calls, rc ? err.message : r.first_error);
	CHECK(io_catalog_request_count(cat) - req0 == 20, "one request per table: %llu",
		  (unsigned long long) (io_catalog_request_count(cat) - req0));
	CHECK(stats->max_in_flight > 1 && stats->max_in_flight <= 8,
		  "requests overlap, at most 8: %d", stats->max_in_flight);
	BENCH_CHECK(el < 1000, "8 at a time is faster than one after the other: %lld ms", (long long) el);
	CHECK(stats->connections - conn0 <= 8, "connections reused: %d new for 20 requests",
		  stats->connections - conn0);
	printf("20 loads of 100 ms, 8 at a time: %lld ms, max %d in flight, %d connections\n",
		   (long long) el, stats->max_in_flight, stats->connections - conn0);

	/* the same with the ETag: 304 each, still one request per table */
	for (int i = 0; i < 20; i++)
		reqs[i].known_etag = "\"e1\"";
	memset(&r, 0, sizeof(r));
	req0 = io_catalog_request_count(cat);
	conn0 = stats->connections;
	rc = io_catalog_load_tables_etag(cat, reqs, 20, 4, collect_result, &r, &err);
	CHECK(rc == 0 && r.not_modified == 20, "304s: rc %d, %d not modified", rc, r.not_modified);
	CHECK(io_catalog_request_count(cat) - req0 == 20, "one request per table");
	CHECK(stats->connections == conn0, "the next batch reuses the connections: %d new",
		  stats->connections - conn0);

	/* concurrency 1: one at a time */
	stats->max_in_flight = 0;
	memset(&r, 0, sizeof(r));
	rc = io_catalog_load_tables_etag(cat, reqs, 5, 1, collect_result, &r, &err);
	CHECK(rc == 0 && r.not_modified == 5 && stats->max_in_flight == 1,
		  "concurrency 1: rc %d, max in flight %d", rc, stats->max_in_flight);

	/* one missing table, one 503 then 200: neither fails the batch */
	reqs[0].table = "missing";
	reqs[1].table = "flaky";
	reqs[1].known_etag = NULL;
	stats->flaky_left = 1;
	memset(&r, 0, sizeof(r));
	req0 = io_catalog_request_count(cat);
	rc = io_catalog_load_tables_etag(cat, reqs, 6, 3, collect_result, &r, &err);
	CHECK(rc == 0 && r.missing == 1 && r.ok == 1 && r.not_modified == 4 && r.failed == 0,
		  "mixed: rc %d missing %d ok %d 304 %d failed %d (%s)", rc, r.missing, r.ok,
		  r.not_modified, r.failed, r.first_error);
	CHECK(io_catalog_request_count(cat) - req0 == 7, "the 503 was retried once: %llu requests",
		  (unsigned long long) (io_catalog_request_count(cat) - req0));

	/* the callback stops the batch */
	memset(&r, 0, sizeof(r));
	r.stop_after = 2;
	rc = io_catalog_load_tables_etag(cat, reqs + 2, 18, 2, collect_result, &r, &err);
	CHECK(rc == -1 && err.code == IO_ERR_INTERRUPTED && r.calls == 2,
		  "stopped by the callback: rc %d, %d calls", rc, r.calls);

	/* an interrupt ends a batch of hanging requests within a poll interval */
	{
		Deadline	d = {0};
		IoHttpOptions http = cfg.http;

		for (int i = 0; i < 4; i++)
		{
			reqs[i].table = "hang";
			reqs[i].known_etag = NULL;
		}
		d.at = now_ms() + 300;
		d.calls = 0;
		http.interrupted = interrupt_after;
		http.interrupt_arg = &d;
		io_catalog_set_http(cat, &http);
		memset(&r, 0, sizeof(r));
		t0 = now_ms();
		rc = io_catalog_load_tables_etag(cat, reqs, 4, 4, collect_result, &r, &err);
		el = now_ms() - t0;
		CHECK(rc == -1 && err.code == IO_ERR_INTERRUPTED && r.calls == 0,
			  "interrupted batch: rc %d (%s), %d results", rc, err.message, r.calls);
		CHECK(el >= 290, "batch not interrupted before 300 ms: %lld ms", (long long) el);
		BENCH_CHECK(el < 300 + 2 * IO_POLL_INTERVAL_MS + 50,
					"batch interrupted within a poll interval: %lld ms", (long long) el);
	}
	io_catalog_free(cat);

	/* OAuth: one token for the batch; after a 401, one refresh and retries */
	cfg.credential = "client:secret";
	stats->tokens = 0;
	cat = io_catalog_open(&cfg, &err);
	CHECK(cat != NULL && stats->tokens == 1, "open with a credential: %s",
		  cat ? "" : err.message);
	if (cat == NULL)
		goto out;
	stats->min_valid_token = 2;
	for (int i = 0; i < 6; i++)
	{
		reqs[i].table = names[i];
		reqs[i].known_etag = NULL;
	}
	memset(&r, 0, sizeof(r));
	req0 = io_catalog_request_count(cat);
	rc = io_catalog_load_tables_etag(cat, reqs, 6, 3, collect_result, &r, &err);
	CHECK(rc == 0 && r.ok == 6 && stats->tokens == 2,
		  "401 in a batch: rc %d, %d ok, %d tokens (%s)", rc, r.ok, stats->tokens,
		  rc ? err.message : r.first_error);
	/* a token that is never good enough: each load fails alone, one refresh */
	stats->min_valid_token = 1000;
	memset(&r, 0, sizeof(r));
	rc = io_catalog_load_tables_etag(cat, reqs, 6, 3, collect_result, &r, &err);
	CHECK(rc == 0 && r.failed == 6 && stats->tokens == 3,
		  "401 for good: rc %d, %d failed, %d tokens", rc, r.failed, stats->tokens);
	io_catalog_free(cat);

out:
	kill(-server, SIGKILL);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	io_http_shutdown();
}

/*
 * The forked server with zeroed stats, its endpoint into endpoint; -1
 * (and a failed check) when it cannot start.
 */
static pid_t
server_up(char *endpoint, size_t size)
{
	int			port;
	pid_t		server;

	stats = mmap(NULL, sizeof(ServerStats), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED || (server = start_server(&port)) < 0)
	{
		CHECK(0, "cannot start the test server");
		return -1;
	}
	memset(stats, 0, sizeof(*stats));
	snprintf(endpoint, size, "http://127.0.0.1:%d", port);
	return server;
}

static void
server_down(pid_t server)
{
	kill(-server, SIGKILL);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	io_http_shutdown();
}

/* Run a deleter until every request started is done; the outcomes in order of arrival. */
static int
deleter_finish(IoDeleter *d, int started, IoDeleteDone *out)
{
	int			got = 0;
	int64_t		until = now_ms() + 10000;
	TmsError	err;

	while (got < started && now_ms() < until)
	{
		if (io_deleter_wait(d, IO_POLL_INTERVAL_MS, &err) != 0)
			break;
		while (got < started && io_deleter_done(d, &out[got]))
			got++;
	}
	return got;
}

/*
 * Bulk deletes with several requests in flight (bulk_delete.c) against the
 * forked server: concurrency, keys refused to slow down, a request refused
 * as a whole with its Retry-After, bad input.
 */
static void
test_deleter(void)
{
	pid_t		server;
	char		endpoint[128];
	IoStorageConfig cfg;
	IoStorage  *st;
	IoDeleter  *d;
	TmsError	err;
	IoDeleteResult res[4][3];
	IoDeleteDone done[4];
	const char *uris[4][2];
	char		u[4][2][64];
	char		target[256];
	int64_t		t0;
	int			got;

	if ((server = server_up(endpoint, sizeof(endpoint))) < 0)
		return;
	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_endpoint = endpoint;
	cfg.s3_path_style = 1;
	cfg.s3_access_key_id = "AKID";
	cfg.s3_secret_access_key = "SECRET";
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL, "storage: %s", st ? "" : err.message);
	if (st == NULL)
		goto out;
	CHECK(io_storage_target(st, "s3a://slowly/a/b", target, sizeof(target)) == 0 &&
		  strcmp(target, strcat(strcpy(u[0][0], endpoint), "/slowly")) == 0,
		  "target of a URI: %s", target);
	CHECK(io_storage_target(st, "/tmp/x", target, sizeof(target)) == -1,
		  "a local file has no storage target");

	d = io_deleter_create(st, 4, &err);
	CHECK(d != NULL, "deleter: %s", d ? "" : err.message);
	if (d == NULL)
		goto out;

	/* four requests of 100 ms at once */
	stats->max_in_flight = 0;
	stats->overlap_wanted = 2;
	for (int i = 0; i < 4; i++)
	{
		for (int k = 0; k < 2; k++)
		{
			snprintf(u[i][k], sizeof(u[i][k]), "s3://slowly/t/%d-%d.parquet", i, k);
			uris[i][k] = u[i][k];
		}
		memset(res[i], 0, sizeof(res[i]));
		CHECK(io_deleter_start(d, i, uris[i], 2, res[i], &err) == 0, "start %d: %s", i,
			  err.message);
	}
	CHECK(io_deleter_start(d, 2, uris[0], 2, res[0], &err) == -1 &&
		  err.code == IO_ERR_INTERNAL, "a busy slot is refused");
	t0 = now_ms();
	got = deleter_finish(d, 4, done);
	stats->overlap_wanted = 0;
	CHECK(got == 4, "four answers: %d", got);
	CHECK(stats->max_in_flight > 1 && stats->max_in_flight <= 4,
		  "requests overlap, at most 4: %d", stats->max_in_flight);
	BENCH_CHECK(stats->max_in_flight == 4, "four in flight at once: %d", stats->max_in_flight);
	BENCH_CHECK(now_ms() - t0 < 350, "at once, not one after the other: %lld ms",
				(long long) (now_ms() - t0));
	for (int i = 0; i < got; i++)
		CHECK(done[i].rc == 0 && !done[i].throttled && done[i].nthrottled == 0 &&
			  res[done[i].slot][0].deleted && res[done[i].slot][1].deleted,
			  "request in slot %d: rc %d", done[i].slot, done[i].rc);

	/* keys refused to slow down, and a key refused for good */
	{
		const char *mixed[3] = {"s3://b/t/ok", "s3://b/t/slow-1", "s3://b/t/deny-1"};

		memset(res[0], 0, sizeof(res[0]));
		CHECK(io_deleter_start(d, 0, mixed, 3, res[0], &err) == 0, "start mixed: %s",
			  err.message);
		got = deleter_finish(d, 1, done);
		CHECK(got == 1 && done[0].rc == 0 && done[0].nthrottled == 1 && !done[0].throttled,
			  "per key: %d answers, rc %d, %zu throttled", got, done[0].rc, done[0].nthrottled);
		CHECK(res[0][0].deleted && !res[0][1].deleted && !res[0][2].deleted &&
			  strcmp(res[0][1].code, "SlowDown") == 0 &&
			  strcmp(res[0][2].code, "AccessDenied") == 0,
			  "per key results: %s %s", res[0][1].code, res[0][2].code);
		CHECK(io_delete_code_throttled("SlowDown") && io_delete_code_throttled("InternalError") &&
			  io_delete_code_throttled("ServiceUnavailable") &&
			  !io_delete_code_throttled("AccessDenied") && !io_delete_code_throttled(NULL),
			  "throttling codes");
	}

	/* refused as a whole: throttled, with what Retry-After asks */
	{
		const char *busy[1] = {"s3://busy/t/x"};

		memset(res[1], 0, sizeof(res[1]));
		CHECK(io_deleter_start(d, 1, busy, 1, res[1], &err) == 0, "start busy");
		got = deleter_finish(d, 1, done);
		CHECK(got == 1 && done[0].rc == -1 && done[0].throttled &&
			  done[0].retry_after_ms == 2000 && strcmp(done[0].s3code, "SlowDown") == 0 &&
			  done[0].err.code == IO_ERR_UNAVAILABLE && done[0].slot == 1 && !res[1][0].deleted,
			  "503 SlowDown: rc %d throttled %d retry-after %ld code %s",
			  done[0].rc, done[0].throttled, done[0].retry_after_ms, done[0].s3code);
	}

	/* bad input: mixed buckets, a local file, too many keys */
	{
		const char *two[2] = {"s3://b/x", "s3://c/y"};
		const char *local[1] = {"/tmp/x"};

		CHECK(io_deleter_start(d, 0, two, 2, res[0], &err) == -1 &&
			  err.code == IO_ERR_INVALID_ARGUMENT, "two buckets refused");
		CHECK(io_deleter_start(d, 0, local, 1, res[0], &err) == -1 &&
			  err.code == IO_ERR_INVALID_ARGUMENT, "a local file refused");
		CHECK(io_deleter_start(d, 0, two, IO_S3_DELETE_MAX_KEYS + 1, res[0], &err) == -1 &&
			  err.code == IO_ERR_INVALID_ARGUMENT, "more than 1000 keys refused");
		CHECK(io_deleter_start(d, 0, two, 1, res[0], &err) == 0, "the slot is free again");
		got = deleter_finish(d, 1, done);
		CHECK(got == 1 && done[0].rc == 0, "and works");
	}
	io_deleter_free(d);

	/* a deleter freed with requests in flight abandons them */
	d = io_deleter_create(st, 2, &err);
	if (d != NULL)
	{
		const char *one[1] = {"s3://slowly/t/abandoned"};

		CHECK(io_deleter_start(d, 0, one, 1, res[0], &err) == 0, "start to abandon");
		io_deleter_free(d);
	}
	io_storage_free(st);

out:
	server_down(server);
}

/* A refresh callback vending key id "FRESH" (or an incomplete config). */
typedef struct RefreshArg
{
	int			calls;
	bool		incomplete;
	int64_t		expires_ms;
} RefreshArg;

static int
vend_fresh(void *arg, IoTableCredentials *out, TmsError *err)
{
	RefreshArg *r = arg;
	char		exp[32];
	IoKeyValue *kv = io_calloc(4, sizeof(IoKeyValue));

	(void) err;
	r->calls++;
	snprintf(exp, sizeof(exp), "%lld", (long long) r->expires_ms);
	kv[0].key = io_strdup("s3.access-key-id");
	kv[0].value = io_strdup("FRESH");
	kv[1].key = io_strdup(r->incomplete ? "s3.region" : "s3.secret-access-key");
	kv[1].value = io_strdup(r->incomplete ? "us-east-1" : "fresh-secret");
	kv[2].key = io_strdup("s3.session-token");
	kv[2].value = io_strdup("fresh-token");
	kv[3].key = io_strdup("s3.session-token-expires-at-ms");
	kv[3].value = io_strdup(exp);
	out->config = kv;
	out->nconfig = 4;
	return 0;
}

/*
 * Vended credentials that expire (storage.c): refreshed before they expire,
 * once after a request refused for them, never from an incomplete config,
 * never on credentials that were not vended; the reader of
 * LoadCredentialsResponse and the spec's default endpoints.
 */
static void
test_credentials_refresh(void)
{
	pid_t		server;
	char		endpoint[128];
	IoStorageConfig cfg;
	IoKeyValue	vended[4] = {
		{"s3.access-key-id", "STALE"}, {"s3.secret-access-key", "stale-secret"},
	{"s3.session-token", "stale-token"}, {"s3.session-token-expires-at-ms", "4102444800000"}};
	IoStorage  *st;
	IoBuffer	buf;
	TmsError	err;
	RefreshArg	ra;
	IoTableCredentials c;
	const char *creds_body =
	"{\"storage-credentials\": ["
	"{\"prefix\": \"s3://b/\", \"config\": {\"s3.access-key-id\": \"WIDE\"}},"
	"{\"prefix\": \"s3://b/wh/t\", \"config\": {\"s3.access-key-id\": \"NARROW\"}}]}";

	/* the reader: the longest prefix of the location */
	CHECK(io_rest_read_credentials(creds_body, strlen(creds_body), 0, "s3://b/wh/t/data", &c,
								   &err) == 0 && c.nconfig == 1 &&
		  strcmp(c.config[0].value, "NARROW") == 0, "longest prefix");
	io_table_credentials_free(&c);
	CHECK(io_rest_read_credentials(creds_body, strlen(creds_body), 0, "s3://other/x", &c,
								   &err) == -1 && err.code == IO_ERR_PROTOCOL,
		  "no credential for the location: %s", err.message);
	CHECK(io_rest_read_credentials("{\"storage-credentials\": 3}", 26, 0, NULL, &c, &err) == -1 &&
		  err.code == IO_ERR_PROTOCOL, "malformed");
	/* a prefix as the catalog writes the location covers its canonical form */
	{
		const char *az = "{\"storage-credentials\": ["
		"{\"prefix\": \"abfss://lake@acct.dfs.core.windows.net/\", \"config\": {\"k\": \"AZ\"}},"
		"{\"prefix\": \"s3a://b/wh/t\", \"config\": {\"k\": \"S3A\"}},"
		"{\"prefix\": \"abfss://lake@other.dfs.core.windows.net/\", \"config\": {\"k\": \"NO\"}}]}";

		CHECK(io_rest_read_credentials(az, strlen(az), 0,
									   "abfs://lake@acct.dfs.core.windows.net/t/data", &c,
									   &err) == 0 && c.nconfig == 1 &&
			  strcmp(c.config[0].value, "AZ") == 0, "canonical Azure location: %s", err.message);
		io_table_credentials_free(&c);
		CHECK(io_rest_read_credentials(az, strlen(az), 0,
									   "wasbs://lake@acct.blob.core.windows.net/t", &c,
									   &err) == 0 && c.nconfig == 1 &&
			  strcmp(c.config[0].value, "AZ") == 0, "wasbs spelling: %s", err.message);
		io_table_credentials_free(&c);
		CHECK(io_rest_read_credentials(az, strlen(az), 0, "s3://b/wh/t/x", &c, &err) == 0 &&
			  c.nconfig == 1 && strcmp(c.config[0].value, "S3A") == 0,
			  "canonical S3 location: %s", err.message);
		io_table_credentials_free(&c);
		{
			/* the narrower prefix wins whatever each is spelt in */
			const char *mixed = "{\"storage-credentials\": ["
			"{\"prefix\": \"s3a://b/wh/\", \"config\": {\"k\": \"WIDE\"}},"
			"{\"prefix\": \"s3://b/wh/t\", \"config\": {\"k\": \"NARROW\"}}]}";

			CHECK(io_rest_read_credentials(mixed, strlen(mixed), 0, "s3a://b/wh/t/x", &c,
										   &err) == 0 && c.nconfig == 1 &&
				  strcmp(c.config[0].value, "NARROW") == 0, "longest in canonical form: %s",
				  c.nconfig == 1 ? c.config[0].value : err.message);
			io_table_credentials_free(&c);
		}
		CHECK(io_rest_read_credentials(az, strlen(az), 0, "abfs://lake@acct2.dfs.core.windows.net/t",
									   &c, &err) == -1 && err.code == IO_ERR_PROTOCOL,
			  "another account is not covered");
	}

	/* loadCredentials is used only when a server lists it: not a default */
	{
		IoCatalog  *cat = io_calloc(1, sizeof(IoCatalog));
		const char *listed = "{\"endpoints\": [\"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials\"]}";
		const char *creds_ep = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials";

		CHECK(io_rest_read_config(cat, "{}", 2, &err) == 0 &&
			  io_rest_endpoint_offered(cat, "POST /v1/{prefix}/tables/rename") &&
			  !io_rest_endpoint_offered(cat, creds_ep), "default endpoints");
		CHECK(io_rest_read_config(cat, listed, strlen(listed), &err) == 0 &&
			  io_rest_endpoint_offered(cat, creds_ep) &&
			  !io_rest_endpoint_offered(cat, "POST /v1/{prefix}/tables/rename"),
			  "listed endpoints only");
		io_catalog_free(cat);
	}

	if ((server = server_up(endpoint, sizeof(endpoint))) < 0)
		return;

	/* credentials of the user mapping: never refreshed */
	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_endpoint = endpoint;
	cfg.s3_path_style = 1;
	cfg.s3_access_key_id = "MAPPING";
	cfg.s3_secret_access_key = "mapping-secret";
	st = io_storage_create(&cfg, &err);
	memset(&ra, 0, sizeof(ra));
	io_storage_set_refresh(st, vend_fresh, &ra, NULL);
	CHECK(!io_storage_refreshable(st), "a mapping's credentials are not refreshed");
	CHECK(io_storage_read(st, "s3://vended/x", 0, 0, &buf, &err) == -1 && ra.calls == 0 &&
		  err.http_status == 400 && strstr(err.detail, "ExpiredToken") != NULL,
		  "refused, no refresh: %s", err.detail);
	io_storage_free(st);

	/* vended: a request refused ExpiredToken refreshes once and is sent again */
	io_storage_config_apply(&cfg, vended, 4, false);
	CHECK(cfg.s3_credentials_vended && cfg.s3_credentials_expire_ms == 4102444800000LL,
		  "vended credentials and their expiry: %lld",
		  (long long) cfg.s3_credentials_expire_ms);
	st = io_storage_create(&cfg, &err);
	ra.expires_ms = 4102444800000LL;
	io_storage_set_refresh(st, vend_fresh, &ra, NULL);
	CHECK(io_storage_refreshable(st), "vended credentials can be refreshed");
	stats->requests = 0;
	CHECK(io_storage_read(st, "s3://vended/x", 0, 0, &buf, &err) == 0 &&
		  strcmp(buf.data, "ok") == 0 && ra.calls == 1 && stats->requests == 2 &&
		  io_storage_refresh_count(st) == 1,
		  "refreshed after ExpiredToken: %d calls, %d requests (%s)", ra.calls,
		  stats->requests, err.message);
	io_buffer_free(&buf);
	CHECK(io_storage_read(st, "s3://vended/x", 0, 0, &buf, &err) == 0 && ra.calls == 1,
		  "the fresh ones serve the next request");
	io_buffer_free(&buf);
	io_storage_free(st);

	/* about to expire: refreshed before the request (within the margin) */
	{
		char		soon[32];
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		snprintf(soon, sizeof(soon), "%lld", (long long) now.tv_sec * 1000 + 500);
		vended[3].value = soon;
		memset(&cfg, 0, sizeof(cfg));
		cfg.s3_endpoint = endpoint;
		cfg.s3_path_style = 1;
		io_storage_config_apply(&cfg, vended, 4, false);
		st = io_storage_create(&cfg, &err);
		memset(&ra, 0, sizeof(ra));
		ra.expires_ms = 4102444800000LL;
		io_storage_set_refresh(st, vend_fresh, &ra, NULL);
		usleep(400 * 1000);		/* inside the last quarter of their life */
		stats->requests = 0;
		CHECK(io_storage_read(st, "s3://vended/x", 0, 0, &buf, &err) == 0 && ra.calls == 1 &&
			  stats->requests == 1 && io_storage_credentials_expire_ms(st) == ra.expires_ms,
			  "refreshed before: %d calls, %d requests", ra.calls, stats->requests);
		io_buffer_free(&buf);
		io_storage_free(st);
		vended[3].value = "4102444800000";
	}

	/* an incomplete config is a failure; the old credentials stay */
	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_endpoint = endpoint;
	cfg.s3_path_style = 1;
	io_storage_config_apply(&cfg, vended, 4, false);
	st = io_storage_create(&cfg, &err);
	memset(&ra, 0, sizeof(ra));
	ra.incomplete = true;
	io_storage_set_refresh(st, vend_fresh, &ra, NULL);
	CHECK(io_storage_refresh(st, &err) == -1 && err.code == IO_ERR_PROTOCOL &&
		  io_storage_refresh_count(st) == 0, "incomplete: %s", err.message);
	CHECK(io_storage_read(st, "s3://vended/x", 0, 0, &buf, &err) == -1 && ra.calls == 2 &&
		  err.http_status == 400, "still refused, one refresh tried");
	io_storage_free(st);
	server_down(server);
}

/* The request window of a storage target (aimd_window.c). */
static void
test_aimd(void)
{
	IoAimd		a;
	int64_t		now = 1000000;

	io_aimd_init(&a, 4);
	CHECK(a.window == 4 && io_aimd_allowed(&a, 4) == 4 && io_aimd_pause_ms(&a) == 0,
		  "starts at the limit");
	CHECK(io_aimd_allowed(&a, 2) == 2, "never above the limit");

	/* the refusals of one round halve once */
	CHECK(io_aimd_refused(&a, 0, true, -1, now) && a.window == 2 && a.epoch == 1,
		  "halved: %g", a.window);
	CHECK(!io_aimd_refused(&a, 0, true, -1, now) && a.window == 2,
		  "a request started before the decrease does not decrease again");
	CHECK(io_aimd_refused(&a, 1, true, -1, now) && a.window == 1 && io_aimd_allowed(&a, 4) == 1,
		  "next round: %g", a.window);

	/* below one: one in flight and a growing pause */
	CHECK(io_aimd_refused(&a, 2, true, -1, now) && a.window == 0.5 &&
		  io_aimd_allowed(&a, 4) == 1 && io_aimd_pause_ms(&a) == IO_AIMD_PACE_MS,
		  "window 1/2: pause %ld", io_aimd_pause_ms(&a));
	io_aimd_started(&a, now);
	CHECK(a.next_start_ms == now + IO_AIMD_PACE_MS, "the next start waits the pause");
	for (uint32_t e = 3; e < 20; e++)
		(void) io_aimd_refused(&a, e, true, -1, now);
	CHECK(a.window == IO_AIMD_MIN_WINDOW && io_aimd_pause_ms(&a) == 6300,
		  "floor: %g, pause %ld", a.window, io_aimd_pause_ms(&a));

	/* additive increase: 1/32 a success below one, 1/w above */
	for (int i = 0; i < 32; i++)
		io_aimd_succeeded(&a, 4);
	CHECK(a.window > 1.0 && a.window < 1.02, "32 successes from the floor reach 1: %g",
		  a.window);
	io_aimd_succeeded(&a, 4);
	io_aimd_succeeded(&a, 4);
	CHECK(a.window > 2.0 && a.window < 2.6 && io_aimd_allowed(&a, 4) == 2,
		  "then about one per window: %g", a.window);
	for (int i = 0; i < 100; i++)
		io_aimd_succeeded(&a, 4);
	CHECK(a.window == 4, "up to the limit: %g", a.window);

	/* a Retry-After holds starts; a fixed window does not adapt */
	io_aimd_init(&a, 4);
	CHECK(!io_aimd_refused(&a, 0, false, 2000, now) && a.window == 4 &&
		  a.next_start_ms == now + 2000, "fixed window, Retry-After honoured");
	io_aimd_started(&a, now + 10);
	CHECK(a.next_start_ms == now + 2000, "a start at full window does not move it");
}

/* ----------------------------------------------------------------
 * Webhook POSTs against the forked server
 * ----------------------------------------------------------------
 */

/* Does the error say nothing of the URL's path, query or user info? */
static bool
error_keeps_secret(const TmsError *err)
{
	return strstr(err->message, "SECRET") == NULL && strstr(err->detail, "SECRET") == NULL &&
		strstr(err->message, "hook/") == NULL && strstr(err->message, "user:") == NULL;
}

static void
test_webhook(void)
{
	int			port;
	pid_t		server;
	char		url[256];
	char		origin[64];
	const char *body = "{\"type\": \"job\", \"id\": 7, \"new\": \"failed\"}";
	IoWebhookRequest req;
	TmsError	err;
	long		status;
	long		retry_after;
	int64_t		t0,
				el;
	int			rc;

	/* origins: no user info, path, query or fragment */
	CHECK(io_webhook_origin("https://u:p@h.example:8443/a/SECRET?k=SECRET#x", origin,
							sizeof(origin)) && strcmp(origin, "https://h.example:8443") == 0,
		  "origin: %s", origin);
	CHECK(io_webhook_origin("http://h.example?t=SECRET", origin, sizeof(origin)) &&
		  strcmp(origin, "http://h.example") == 0, "origin without a path: %s", origin);
	CHECK(!io_webhook_origin("ftp://h.example/x", origin, sizeof(origin)), "ftp is no origin");
	CHECK(!io_webhook_origin("https:///x", origin, sizeof(origin)), "no host, no origin");

	memset(&req, 0, sizeof(req));
	req.body = body;
	req.body_len = strlen(body);
	req.url = "ftp://h.example/SECRET";
	CHECK(io_webhook_post(&req, &status, &retry_after, &err) == -1 &&
		  err.code == IO_ERR_INVALID_ARGUMENT && error_keeps_secret(&err),
		  "not http(s): %s", err.message);

	stats = mmap(NULL, sizeof(ServerStats), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED || (server = start_server(&port)) < 0)
	{
		CHECK(0, "cannot start the test server");
		return;
	}
	memset(stats, 0, sizeof(*stats));

	/* 2xx: one POST with the body, its type and the bearer token */
	snprintf(url, sizeof(url), "http://user:SECRET@127.0.0.1:%d/hook/ok/SECRET-path?k=SECRET", port);
	req.url = url;
	req.token = "tok-SECRET";
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == 0 && status == 200, "delivered: %ld %s", status, rc ? err.message : "");
	CHECK(stats->hook_requests == 1, "one request: %d", stats->hook_requests);
	CHECK(strncmp(stats->hook_request, "POST /hook/ok/SECRET-path?k=SECRET HTTP/1.1\r\n",
				  strlen("POST /hook/ok/SECRET-path?k=SECRET HTTP/1.1\r\n")) == 0,
		  "a POST of the URL's path and query: %.60s", stats->hook_request);
	CHECK(strcasestr(stats->hook_request, "\r\nContent-Type: application/json\r\n") != NULL,
		  "JSON content type");
	CHECK(strcasestr(stats->hook_request, "\r\nAuthorization: Bearer tok-SECRET\r\n") != NULL,
		  "bearer token");
	CHECK(strstr(stats->hook_request, "\r\n\r\n") != NULL &&
		  strcmp(strstr(stats->hook_request, "\r\n\r\n") + 4, body) == 0,
		  "the body as given: %s", stats->hook_request);

	/* no token (and no user info, which libcurl would send), no Authorization */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/ok/SECRET", port);
	req.token = NULL;
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == 0 && strcasestr(stats->hook_request, "Authorization") == NULL,
		  "no token sent when none is set");

	/* 503 with Retry-After: an error with the status, what it asked, once */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/busy/SECRET", port);
	stats->hook_requests = 0;
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == -1 && err.code == IO_ERR_UNAVAILABLE && err.http_status == 503 &&
		  status == 503 && retry_after == 2000 && stats->hook_requests == 1,
		  "503: rc %d code %s status %ld retry-after %ld, %d requests", rc,
		  tms_error_code_name(err.code), err.http_status, retry_after, stats->hook_requests);
	CHECK(error_keeps_secret(&err) && strstr(err.message, "127.0.0.1") != NULL &&
		  strstr(err.message, "503") != NULL, "503 message: %s / %s", err.message, err.detail);

	/* a redirect is not followed */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/moved/SECRET", port);
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == -1 && err.http_status == 302 && retry_after == -1 && error_keeps_secret(&err),
		  "302 not followed: rc %d status %ld (%s)", rc, err.http_status, err.message);

	/* a 404 */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/gone/SECRET", port);
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == -1 && err.code == IO_ERR_NOT_FOUND && err.http_status == 404 &&
		  error_keeps_secret(&err), "404: rc %d (%s)", rc, err.message);

	/* an answer over the cap (4 MiB decoded) */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/big/SECRET", port);
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == -1 && err.code == IO_ERR_TOO_LARGE && error_keeps_secret(&err),
		  "big answer: rc %d (%s)", rc, err.message);

	/* a receiver that hangs: the timeout, then an interrupt */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/hang/SECRET", port);
	req.http.request_timeout_ms = 500;
	t0 = now_ms();
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	el = now_ms() - t0;
	CHECK(rc == -1 && err.code == IO_ERR_TIMEOUT && el >= 450 &&
		  error_keeps_secret(&err), "hang: rc %d after %lld ms (%s)", rc, (long long) el,
		  err.message);
	BENCH_CHECK(el < 2000, "webhook timeout after ~500 ms: %lld ms", (long long) el);
	{
		Deadline	d = {0};

		d.at = now_ms() + 200;
		d.calls = 0;
		req.http.request_timeout_ms = 30000;
		req.http.interrupted = interrupt_after;
		req.http.interrupt_arg = &d;
		t0 = now_ms();
		rc = io_webhook_post(&req, &status, &retry_after, &err);
		el = now_ms() - t0;
		CHECK(rc == -1 && err.code == IO_ERR_INTERRUPTED && error_keeps_secret(&err),
			  "interrupted: rc %d after %lld ms (%s)", rc, (long long) el, err.message);
		BENCH_CHECK(el < 200 + 2 * IO_POLL_INTERVAL_MS + 50,
					"webhook interrupted within a poll interval: %lld ms", (long long) el);
		req.http.interrupted = NULL;
	}

	kill(-server, SIGKILL);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);

	/* nobody listens any more: refused, the path kept out of the message */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/ok/SECRET", port);
	rc = io_webhook_post(&req, &status, &retry_after, &err);
	CHECK(rc == -1 && err.code == IO_ERR_CONNECT && err.http_status == 0 && status == 0 &&
		  error_keeps_secret(&err), "refused: rc %d (%s / %s)", rc, err.message, err.detail);
	io_http_shutdown();
}

/* ----------------------------------------------------------------
 * Memory bounds of JSON parsing (the parse path of the catalog client)
 * ----------------------------------------------------------------
 */
static void
test_json_budget(void)
{
	IoHttpOptions def;
	IoStrBuf	sb;
	TmsError	err;
	json_t	   *doc;
	IoJsonBudget b;
	size_t		n = 200000;

	io_http_options_resolve(NULL, &def);
	CHECK(def.max_response_bytes == (size_t) 64 * 1024 * 1024,
		  "default response cap %zu", def.max_response_bytes);
	CHECK(def.max_json_bytes == (size_t) 256 * 1024 * 1024,
		  "default JSON budget %zu", def.max_json_bytes);

	/* about 9 MB of small objects, like a big listing */
	io_sb_init(&sb);
	io_sb_puts(&sb, "{\"identifiers\": [");
	for (size_t i = 0; i < n; i++)
		io_sb_printf(&sb, "%s{\"namespace\": [\"ns\"], \"name\": \"t%07zu\"}",
					 i ? "," : "", i);
	io_sb_puts(&sb, "]}");
	CHECK(!sb.oom, "build the document");
	if (sb.oom)
		return;

	doc = io_json_parse(sb.data, sb.len, 4 * 1024 * 1024, "list tables", &err);
	CHECK(doc == NULL && err.code == IO_ERR_TOO_LARGE &&
		  strstr(err.message, "max_json_bytes (4194304 bytes)") != NULL,
		  "%zu bytes of JSON under a 4 MiB budget: %s", sb.len, doc ? "parsed" : err.message);
	json_decref(doc);
	doc = io_json_parse(sb.data, sb.len, 0, "list tables", &err);
	CHECK(doc != NULL && json_array_size(json_object_get(doc, "identifiers")) == n,
		  "the same under the default budget: %s", doc ? "" : err.message);
	json_decref(doc);

	/* the figure: what the parse costs, as counted */
	CHECK(io_json_budget_begin(&b, 0), "budget begins after io_init()");
	doc = json_loadb(sb.data, sb.len, 0, NULL);
	io_json_budget_end(&b);
	CHECK(doc != NULL && !b.exceeded && b.peak > sb.len, "counted parse");
	printf("%zu bytes of JSON (%zu small objects) took %zu bytes as counted (%.1fx)\n",
		   sb.len, n, b.peak, (double) b.peak / (double) sb.len);
	/* freeing after the budget ended must not touch it */
	{
		size_t		used = b.used;

		json_decref(doc);
		CHECK(b.used == used, "budget untouched after its end");
	}

	/*
	 * Every budget, from far too small to enough: the parse stops cleanly.
	 * (jansson 2.14 crashes when an allocation fails inside its lexer; the
	 * budget never fails one, it stops feeding input.  Found by fuzz_rest;
	 * the input is in test/fuzz/corpus/rest/regress-*.)
	 */
	{
		IoStrBuf	small;
		int			stopped = 0,
					parsed = 0;

		io_sb_init(&small);
		io_sb_puts(&small, "{\"namespaces\": [");
		for (int i = 0; i < 300; i++)
			io_sb_printf(&small, "%s[\"tax%d\", \"%*s\"]", i ? ", " : "", i, i % 40, "");
		io_sb_puts(&small, "], \"next-page-token\": \"x\"}");
		for (size_t lim = 512; lim < 400000; lim += 997)
		{
			doc = io_json_parse(small.data, small.len, lim, "list namespaces", &err);
			if (doc != NULL)
				parsed++;
			else if (err.code == IO_ERR_TOO_LARGE)
				stopped++;
			else
				CHECK(0, "budget %zu: unexpected %s", lim, err.message);
			json_decref(doc);
		}
		CHECK(stopped > 0 && parsed > 0, "budgets: %d stopped, %d parsed", stopped, parsed);
		io_sb_free(&small);
	}

	/* a truncated document is a protocol error, not a crash */
	doc = io_json_parse(sb.data, sb.len / 2, 0, "list tables", &err);
	CHECK(doc == NULL && err.code == IO_ERR_PROTOCOL, "truncated: %s", err.message);
	io_sb_free(&sb);

	/* jansson's own output is freed with io_json_free */
	{
		json_t	   *v = json_pack("{s:i}", "a", 1);
		char	   *text = json_dumps(v, JSON_COMPACT);

		CHECK(text != NULL && strcmp(text, "{\"a\":1}") == 0, "dumps");
		io_json_free(text);
		json_decref(v);
	}
}

/* ----------------------------------------------------------------
 * Streaming table listings: one page at a time
 * ----------------------------------------------------------------
 */

/* Bytes in use on the heap now (glibc). */
static size_t
heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

typedef struct PageCount
{
	int			pages;
	size_t		items;
	size_t		max_n;
	int			stop_after;		/* > 0: stop after this many pages */
	size_t		heap0;			/* heap in use before the listing */
	size_t		heap_peak;		/* most heap in use seen in a callback */
	bool		ordered;		/* names arrived in order */
} PageCount;

static int
count_page(void *arg, const IoTableIdent *items, size_t n)
{
	PageCount  *c = arg;
	size_t		h = heap_in_use();
	char		want[16];

	for (size_t i = 0; i < n; i++)
	{
		snprintf(want, sizeof(want), "t%06zu", c->items + i);
		if (strcmp(items[i].name, want) != 0 || strcmp(items[i].ns, "many") != 0)
			c->ordered = false;
	}
	c->pages++;
	c->items += n;
	if (n > c->max_n)
		c->max_n = n;
	if (h > c->heap_peak)
		c->heap_peak = h;
	return c->stop_after > 0 && c->pages >= c->stop_after;
}

static void
test_paged_listing(const char *uri)
{
	IoCatalogConfig ccfg;
	IoCatalog  *cat;
	TmsError	err;
	PageCount	c;
	IoTableList tl;
	uint64_t	before;
	size_t		full_heap;

	memset(&ccfg, 0, sizeof(ccfg));
	ccfg.uri = uri;
	ccfg.http.retries = 0;
	ccfg.page_size = 1000;
	cat = io_catalog_open(&ccfg, &err);
	CHECK(cat != NULL, "open: %s", cat ? "" : err.message);
	if (cat == NULL)
		return;

	memset(&c, 0, sizeof(c));
	c.ordered = true;
	c.heap0 = heap_in_use();
	before = io_catalog_request_count(cat);
	CHECK(io_catalog_list_tables_paged(cat, "many", count_page, &c, &err) == 0 &&
		  c.items == MANY_TABLES && c.pages == MANY_TABLES / 1000 && c.max_n == 1000 &&
		  c.ordered, "paged: rc %s, %zu items in %d pages (max %zu), ordered %d",
		  err.message, c.items, c.pages, c.max_n, c.ordered);
	CHECK(io_catalog_request_count(cat) - before == (uint64_t) c.pages,
		  "one request per page");

	/* stopping early is not an error, and no further page is fetched */
	memset(&c, 0, sizeof(c));
	c.ordered = true;
	c.stop_after = 3;
	before = io_catalog_request_count(cat);
	CHECK(io_catalog_list_tables_paged(cat, "many", count_page, &c, &err) == 0 &&
		  c.pages == 3 && c.items == 3000 && io_catalog_request_count(cat) - before == 3,
		  "stopped after 3 pages: %d pages, %llu requests", c.pages,
		  (unsigned long long) (io_catalog_request_count(cat) - before));

	/* the collecting listing holds everything; the paged one one page */
	memset(&c, 0, sizeof(c));
	c.ordered = true;
	c.heap0 = heap_in_use();
	(void) io_catalog_list_tables_paged(cat, "many", count_page, &c, &err);
	full_heap = heap_in_use();
	CHECK(io_catalog_list_tables(cat, "many", &tl, &err) == 0 && tl.n == MANY_TABLES &&
		  strcmp(tl.items[MANY_TABLES - 1].name, "t099999") == 0,
		  "list_tables: %zu (%s)", tl.n, err.message);
	full_heap = heap_in_use() > full_heap ? heap_in_use() - full_heap : 0;
	printf("listing %d tables, pages of 1000: paged peak heap +%zu bytes, collected list +%zu bytes\n",
		   MANY_TABLES, c.heap_peak > c.heap0 ? c.heap_peak - c.heap0 : 0, full_heap);
	BENCH_CHECK((c.heap_peak > c.heap0 ? c.heap_peak - c.heap0 : 0) < full_heap,
				"paged listing holds less than the whole list");
	io_table_list_free(&tl);
	io_catalog_free(cat);
}

/* ----------------------------------------------------------------
 * What reaches the wire: names and keys cannot change a request's target
 * ----------------------------------------------------------------
 */
static void
test_wire_paths(void)
{
	int			port;
	pid_t		server;
	char		uri[128];
	IoStorageConfig scfg;
	IoStorage  *st;
	TmsError	err;
	IoBuffer	buf;

	if (stats == NULL)
		stats = mmap(NULL, sizeof(ServerStats), PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED || (server = start_server(&port)) < 0)
	{
		CHECK(0, "cannot start the test server");
		return;
	}
	memset(stats, 0, sizeof(*stats));
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d", port);

	/* S3: a key's percent signs are literal and sent encoded */
	memset(&scfg, 0, sizeof(scfg));
	scfg.s3_endpoint = uri;
	scfg.s3_path_style = 1;
	scfg.http.retries = 0;
	st = io_storage_create(&scfg, &err);
	CHECK(st != NULL, "S3 storage: %s", st ? "" : err.message);
	if (st != NULL)
	{
		(void) io_storage_read(st, "s3://bkt/wh/%2e%2e/%2E%2E/secret", 0, 0, &buf, &err);
		io_buffer_free(&buf);
		CHECK(strcmp(stats->last_request, "GET /bkt/wh/%252e%252e/%252E%252E/secret") == 0,
			  "S3 key sent literally: %s", stats->last_request);
		stats->last_request[0] = '\0';
		CHECK(io_storage_read(st, "s3://bkt/wh/../secret", 0, 0, &buf, &err) != 0 &&
			  err.code == IO_ERR_INVALID_ARGUMENT && stats->last_request[0] == '\0',
			  "S3 key with \"..\" refused before any request: %s", stats->last_request);
		io_storage_free(st);
	}

	/* libcurl sends a path as built (CURLOPT_PATH_AS_IS) */
	{
		char		url[256];
		IoHttpOptions opt;
		IoHttpRequest req;
		IoHttpResponse resp;

		snprintf(url, sizeof(url), "%s/v1/a/../b/./c", uri);
		memset(&opt, 0, sizeof(opt));
		opt.retries = 0;
		memset(&req, 0, sizeof(req));
		req.method = "GET";
		req.url = url;
		req.idempotent = true;
		req.what = "test";
		CHECK(io_http_perform(&opt, &req, &resp, &err) == 0 &&
			  strcmp(stats->last_request, "GET /v1/a/../b/./c") == 0,
			  "path sent as is: %s", stats->last_request);
		io_http_response_free(&resp);
	}

	/* the response cap holds for the decoded body, not the wire bytes */
	{
		char		url[256];
		IoHttpOptions opt;
		IoHttpRequest req;
		IoHttpResponse resp;

		snprintf(url, sizeof(url), "%s/deflate-bomb", uri);
		memset(&opt, 0, sizeof(opt));
		opt.retries = 0;
		opt.max_response_bytes = 1024 * 1024;
		memset(&req, 0, sizeof(req));
		req.method = "GET";
		req.url = url;
		req.idempotent = true;
		req.what = "test";
		CHECK(io_http_perform(&opt, &req, &resp, &err) != 0 && err.code == IO_ERR_TOO_LARGE &&
			  strstr(err.message, "max_response_bytes") != NULL,
			  "4 MiB inflated from 4 KB over a 1 MiB cap: %s", err.message);
		io_http_response_free(&resp);
		opt.max_response_bytes = 0;
		CHECK(io_http_perform(&opt, &req, &resp, &err) == 0 && resp.status == 200 &&
			  resp.body_len == 4 * 1024 * 1024, "under the default cap: %zu bytes", resp.body_len);
		io_http_response_free(&resp);
	}

	test_paged_listing(uri);

	/* 406: the catalog refused the operation */
	{
		IoCatalogConfig ccfg;
		IoCatalog  *cat;
		IoLoadedTable t;

		memset(&ccfg, 0, sizeof(ccfg));
		ccfg.uri = uri;
		ccfg.http.retries = 0;
		cat = io_catalog_open(&ccfg, &err);
		CHECK(cat != NULL && io_catalog_load_table(cat, "ns", "unsupported", &t, &err) != 0 &&
			  err.code == IO_ERR_UNSUPPORTED && err.http_status == 406 &&
			  strcmp(err.message, "catalog refused load table: it does not support this operation (HTTP status 406)") == 0 &&
			  strstr(err.detail, "UnsupportedOperationException") != NULL,
			  "406: %s (%s)", err.message, err.detail);
		io_catalog_free(cat);
	}

	/* the JSON budget of the catalog client */
	{
		IoCatalogConfig ccfg;
		IoCatalog  *cat;
		IoTableList tl;

		memset(&ccfg, 0, sizeof(ccfg));
		ccfg.uri = uri;
		ccfg.http.retries = 0;
		ccfg.http.max_json_bytes = 512 * 1024;
		cat = io_catalog_open(&ccfg, &err);
		CHECK(cat != NULL, "open: %s", cat ? "" : err.message);
		if (cat != NULL)
		{
			CHECK(io_catalog_list_tables(cat, "big", &tl, &err) != 0 &&
				  err.code == IO_ERR_TOO_LARGE && strstr(err.message, "max_json_bytes") != NULL,
				  "1 MB listing over a 512 KiB budget: %s", err.message);
			ccfg.http.max_json_bytes = 0;
			io_catalog_set_http(cat, &ccfg.http);
			CHECK(io_catalog_list_tables(cat, "big", &tl, &err) == 0 && tl.n == 20000,
				  "the same listing under the default budget: %s", err.message);
			io_table_list_free(&tl);
			io_catalog_free(cat);
		}
	}

	/* REST: names are checked, every segment encoded, nothing normalised */
	{
		IoCatalogConfig ccfg;
		IoCatalog  *cat;
		IoLoadedTable t;
		IoTableList tl;
		IoStringList nl;
		char		longname[IO_MAX_NAME_BYTES + 2];
		uint64_t	before;
		struct
		{
			const char *ns;
			const char *table;
		}			bad[] = {
			{"ns", ".."}, {"ns", "."}, {"ns", ""}, {"..", "t"}, {".", "t"}, {"", "t"},
			{"ns\x1f..", "t"}, {"ns\x1f", "t"}, {"\x1fns", "t"}, {"a\x1f\x1f" "b", "t"},
			{"ns", longname}, {NULL, "t"}, {"ns", NULL},
		};
		struct
		{
			const char *ns;
			const char *table;
			const char *want;
		}			good[] = {
			{"ns", "a/b", "DELETE /v1/namespaces/ns/tables/a%2Fb?purgeRequested=false"},
			{"ns", "%2e%2e", "DELETE /v1/namespaces/ns/tables/%252e%252e?purgeRequested=false"},
			{"ns", "...", "DELETE /v1/namespaces/ns/tables/...?purgeRequested=false"},
			{"a\x1f" "b", "t?x#y", "DELETE /v1/namespaces/a%1Fb/tables/t%3Fx%23y?purgeRequested=false"},
			{"a/..", "t", "DELETE /v1/namespaces/a%2F../tables/t?purgeRequested=false"},
		};

		memset(longname, 'n', IO_MAX_NAME_BYTES + 1);
		longname[IO_MAX_NAME_BYTES + 1] = '\0';
		memset(&ccfg, 0, sizeof(ccfg));
		ccfg.uri = uri;
		ccfg.http.retries = 0;
		cat = io_catalog_open(&ccfg, &err);
		CHECK(cat != NULL, "catalog open: %s", cat ? "" : err.message);
		if (cat != NULL)
		{
			for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			{
				before = io_catalog_request_count(cat);
				CHECK(io_catalog_drop_table(cat, bad[i].ns, bad[i].table, false, &err) != 0 &&
					  err.code == IO_ERR_INVALID_ARGUMENT &&
					  io_catalog_request_count(cat) == before,
					  "drop %zu refused before any request: %s", i, err.message);
				CHECK(io_catalog_load_table(cat, bad[i].ns, bad[i].table, &t, &err) != 0 &&
					  err.code == IO_ERR_INVALID_ARGUMENT &&
					  io_catalog_request_count(cat) == before, "load %zu refused", i);
				CHECK(io_catalog_commit_table(cat, bad[i].ns, bad[i].table, "{}", &t, &err) != 0 &&
					  err.code == IO_ERR_INVALID_ARGUMENT &&
					  io_catalog_request_count(cat) == before, "commit %zu refused", i);
				if (bad[i].table != NULL && strcmp(bad[i].table, "t") == 0)
				{
					CHECK(io_catalog_list_tables(cat, bad[i].ns, &tl, &err) != 0 &&
						  err.code == IO_ERR_INVALID_ARGUMENT &&
						  io_catalog_request_count(cat) == before, "list tables %zu refused", i);
					if (bad[i].ns != NULL && bad[i].ns[0] != '\0')
						CHECK(io_catalog_list_namespaces(cat, bad[i].ns, &nl, &err) != 0 &&
							  err.code == IO_ERR_INVALID_ARGUMENT &&
							  io_catalog_request_count(cat) == before,
							  "list namespaces under %zu refused", i);
				}
			}
			CHECK(strncmp(stats->last_request, "GET /v1/config", 14) == 0,
				  "nothing but the handshake was sent: %s", stats->last_request);
			for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
			{
				(void) io_catalog_drop_table(cat, good[i].ns, good[i].table, false, &err);
				CHECK(strcmp(stats->last_request, good[i].want) == 0, "sent \"%s\", want \"%s\"",
					  stats->last_request, good[i].want);
			}
			longname[IO_MAX_NAME_BYTES] = '\0';
			before = io_catalog_request_count(cat);
			(void) io_catalog_drop_table(cat, "ns", longname, false, &err);
			CHECK(io_catalog_request_count(cat) == before + 1, "a name of %d bytes is sent",
				  IO_MAX_NAME_BYTES);
			/* a batch: the bad request fails alone, without a request */
			{
				IoLoadRequest reqs[2] = {{"ns", "..", NULL}, {"ns", "fine", NULL}};
				BatchResults r;

				memset(&r, 0, sizeof(r));
				before = io_catalog_request_count(cat);
				CHECK(io_catalog_load_tables_etag(cat, reqs, 2, 2, collect_result, &r, &err) == 0 &&
					  r.calls == 2 && r.failed == 1 && io_catalog_request_count(cat) == before + 1,
					  "batch: %d calls, %d failed, %llu requests", r.calls, r.failed,
					  (unsigned long long) (io_catalog_request_count(cat) - before));
				CHECK(strcmp(stats->last_request,
							 "GET /v1/namespaces/ns/tables/fine?snapshots=all") == 0,
					  "batch sent: %s", stats->last_request);
			}
			/* a load without the history asks for the referenced snapshots */
			{
				IoLoadedTable lt;

				(void) io_catalog_load_table_refs(cat, "ns", "fine", &lt, &err);
				io_loaded_table_free(&lt);
				CHECK(strcmp(stats->last_request,
							 "GET /v1/namespaces/ns/tables/fine?snapshots=refs") == 0,
					  "refs load sent: %s", stats->last_request);
				before = io_catalog_request_count(cat);
				CHECK(io_catalog_load_table_refs(cat, "ns", "..", &lt, &err) != 0 &&
					  io_catalog_request_count(cat) == before, "refs load checks the name");
			}
			io_catalog_free(cat);
		}

		/* the prefix: unsafe characters encoded, dot segments refused */
		ccfg.prefix = "/a b?c#d/x%20y/";
		cat = io_catalog_open(&ccfg, &err);
		CHECK(cat != NULL && strcmp(io_catalog_prefix(cat), "a%20b%3Fc%23d/x%20y") == 0,
			  "prefix cleaned: %s", cat ? io_catalog_prefix(cat) : err.message);
		if (cat != NULL)
		{
			(void) io_catalog_list_namespaces(cat, NULL, &nl, &err);
			CHECK(strcmp(stats->last_request, "GET /v1/a%20b%3Fc%23d/x%20y/namespaces?pageToken=") == 0,
				  "prefix on the wire: %s", stats->last_request);
			io_catalog_free(cat);
		}
		{
			const char *badp[] = {"x/../y", "..", "x/.", "x/%2e%2E/y", "%2e", ".%2e"};

			for (size_t i = 0; i < sizeof(badp) / sizeof(badp[0]); i++)
			{
				ccfg.prefix = badp[i];
				cat = io_catalog_open(&ccfg, &err);
				CHECK(cat == NULL && err.code == IO_ERR_INVALID_ARGUMENT,
					  "prefix \"%s\" refused: %s", badp[i], cat ? "accepted" : err.message);
				io_catalog_free(cat);
			}
		}
	}

	kill(-server, SIGKILL);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	io_http_shutdown();
}

/*
 * The OAuth2 token reader both clients share (oauth2.c): what a token
 * response must hold, the lifetime clamp, the cache's freshness and the
 * refusal of a token that would break its header line.
 */
static void
test_oauth2_read(void)
{
	static const struct
	{
		const char *body;
		bool		ok;
		int			code;
	}			cases[] = {
		{"{\"access_token\": \"t1\", \"expires_in\": 3600}", true, IO_OK},
		{"{\"access_token\": \"t2\"}", true, IO_OK},
		{"{\"access_token\": \"\"}", false, IO_ERR_PROTOCOL},
		{"{\"token_type\": \"bearer\"}", false, IO_ERR_PROTOCOL},
		{"{\"access_token\": 7}", false, IO_ERR_PROTOCOL},
		{"{\"access_token\": \"a\\r\\nX-Injected: 1\"}", false, IO_ERR_PROTOCOL},
		{"{\"access_token\": \"a\\nb\"}", false, IO_ERR_PROTOCOL},
		{"[\"access_token\"]", false, IO_ERR_PROTOCOL},
		{"not json", false, IO_ERR_PROTOCOL},
	};
	IoOAuth2Token tok;
	TmsError	err;
	const char *body;
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		int			rc;

		memset(&tok, 0, sizeof(tok));
		tms_error_clear(&err);
		rc = io_oauth2_read(&tok, cases[i].body, strlen(cases[i].body), 1 << 20, &err);
		CHECK((rc == 0) == cases[i].ok, "oauth2 read %s: rc %d", cases[i].body, rc);
		if (cases[i].ok)
			CHECK(tok.token != NULL && tok.fetches == 1 && io_oauth2_fresh(&tok),
				  "oauth2 read %s: token cached and fresh", cases[i].body);
		else
		{
			CHECK(err.code == cases[i].code && err.http_status == 200 &&
				  tok.token == NULL && tok.fetches == 0,
				  "oauth2 read %s: code %s status %ld", cases[i].body,
				  tms_error_code_name(err.code), err.http_status);
			CHECK(strstr(err.message, "X-Injected") == NULL,
				  "oauth2 read %s: the token is not in the message", cases[i].body);
		}
		io_oauth2_forget(&tok);
		CHECK(tok.token == NULL && !io_oauth2_fresh(&tok), "oauth2 forget");
	}

	/* expires_in: trusted up to a year; within the refresh margin: stale */
	memset(&tok, 0, sizeof(tok));
	body = "{\"access_token\": \"t\", \"expires_in\": 9223372036854775807}";
	CHECK(io_oauth2_read(&tok, body, strlen(body), 1 << 20, &err) == 0 &&
		  tok.expires_ms - io_now_ms() <= (int64_t) IO_OAUTH2_MAX_LIFETIME_S * 1000 &&
		  tok.expires_ms - io_now_ms() > (int64_t) (IO_OAUTH2_MAX_LIFETIME_S - 60) * 1000,
		  "oauth2: a huge expires_in is clamped to a year");
	body = "{\"access_token\": \"u\", \"expires_in\": 30}";
	CHECK(io_oauth2_read(&tok, body, strlen(body), 1 << 20, &err) == 0 &&
		  tok.fetches == 2 && strcmp(tok.token, "u") == 0 && !io_oauth2_fresh(&tok),
		  "oauth2: a token expiring within the margin is not fresh");
	io_oauth2_forget(&tok);
}

/* The engine clients' origins, result cells and rows (engine_client_int.h). */
static void
test_engine_results(void)
{
	static const char *const origins[][2] = {
		{"http://Trino.Example:8080/v1/statement/x", "http://trino.example:8080"},
		{"https://h/a?b", "https://h:443"},
		{"http://h", "http://h:80"},
		{"HTTP://[::1]:81/x", "http://[::1]:81"},
		{"http://u@h:1/", NULL},
		{"http://h:0/", NULL},
		{"http://h:99999/", NULL},
		{"http://h:1x/", NULL},
		{"ftp://h/", NULL},
		{"http:///x", NULL},
		{"http://h%2f:1/", NULL},
		{"http://[::1/", NULL},
	};
	static const char *const cells[][2] = {
		{"\"txt\"", "txt"}, {"12", "12"}, {"-9223372036854775807", "-9223372036854775807"},
		{"0.1", "0.1"}, {"1e20", "1e+20"}, {"true", "true"}, {"false", "false"},
		{"null", NULL}, {"[1,\"a\"]", "[1,\"a\"]"}, {"{\"k\":1}", "{\"k\":1}"},
	};
	IoEngineConfig cfg;
	IoEngine   *eng;
	IoEngineRun run;
	TmsError	err;
	const char *names[2] = {"a", "b"};
	json_t	   *data;
	size_t		i;

	for (i = 0; i < sizeof(origins) / sizeof(origins[0]); i++)
	{
		char	   *o = io_engine_url_origin(origins[i][0]);

		CHECK((o == NULL && origins[i][1] == NULL) ||
			  (o != NULL && origins[i][1] != NULL && strcmp(o, origins[i][1]) == 0),
			  "origin of %s is %s", origins[i][0], o ? o : "NULL");
		io_free(o);
	}
	for (i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
	{
		json_t	   *v = json_loads(cells[i][0], JSON_DECODE_ANY, NULL);
		char	   *t = NULL;

		CHECK(v != NULL && io_engine_cell_text(v, &t) == 0 &&
			  ((t == NULL && cells[i][1] == NULL) ||
			   (t != NULL && cells[i][1] != NULL && strcmp(t, cells[i][1]) == 0)),
			  "cell %s is %s", cells[i][0], t ? t : "NULL");
		io_free(t);
		json_decref(v);
	}

	memset(&cfg, 0, sizeof(cfg));
	cfg.type = IO_ENGINE_TRINO;
	cfg.uri = "http://127.0.0.1:1/";
	cfg.http.max_response_bytes = 200;
	eng = io_engine_open(&cfg, &err);
	CHECK(eng != NULL, "engine open: %s", err.message);
	if (eng == NULL)
		return;
	CHECK(io_engine_run_init(eng, &run, &err) == 0, "run init");
	CHECK(io_engine_set_columns(&run, names, 2) == 0, "set columns");
	data = json_loads("[[1, null], [\"x\", 2.5]]", 0, NULL);
	CHECK(io_engine_add_rows(eng, &run, data, "test", &err) == 0 && run.nrows == 2 &&
		  strcmp(run.rows[0][0], "1") == 0 && run.rows[0][1] == NULL &&
		  strcmp(run.rows[1][0], "x") == 0 && strcmp(run.rows[1][1], "2.5") == 0,
		  "rows: %s", err.message);
	json_decref(data);
	data = json_loads("[[1]]", 0, NULL);
	CHECK(io_engine_add_rows(eng, &run, data, "test", &err) == -1 &&
		  err.code == IO_ERR_PROTOCOL && run.nrows == 2 &&
		  strcmp(err.message, "malformed test: row 3 has 1 values, expected 2") == 0,
		  "short row: %s", err.message);
	json_decref(data);
	data = json_loads("[[\"0123456789012345678901234567890123456789\", 1],"
					  " [\"0123456789012345678901234567890123456789\", 2],"
					  " [\"0123456789012345678901234567890123456789\", 3]]", 0, NULL);
	CHECK(io_engine_add_rows(eng, &run, data, "test", &err) == -1 &&
		  err.code == IO_ERR_TOO_LARGE, "result bound: %s", err.message);
	json_decref(data);
	CHECK(io_engine_set_message(&run, "a\tb\nc") == 0 && strcmp(run.message, "a b\nc") == 0,
		  "message %s", run.message);
	io_engine_run_free(&run);
	CHECK(run.priv == NULL && run.rows == NULL, "run freed");

	CHECK(io_engine_check_tag("tms-job-1", &err) == 0, "tag");
	CHECK(io_engine_check_tag("a,b", &err) == -1 && err.code == IO_ERR_INVALID_ARGUMENT,
		  "tag with a comma");
	CHECK(io_engine_check_tag("", &err) == -1, "empty tag");
	CHECK(io_engine_check_tag("a\r\nX-Evil: 1", &err) == -1, "tag with a newline");
	io_engine_free(eng);
}

/* Retry-After (RFC 9110 10.2.3) of 429 and 503: seconds or an HTTP date. */
static void
test_retry_after(void)
{
	/* 2015-10-21 07:28:00 UTC */
	const int64_t now = (int64_t) 1445412480 * 1000;
	struct
	{
		long		status;
		const char *header;
		long		want;
	}			cases[] = {
		{503, "Retry-After: 7", 7000},
		{429, "retry-after:  0 ", 0},
		{503, "Retry-After: Wed, 21 Oct 2015 07:28:05 GMT", 5000},
		{503, "Retry-After: Wed, 21 Oct 2015 07:27:00 GMT", 0}, /* past */
		{503, "Retry-After: 3600", 60000},	/* capped at a minute */
		{503, "Retry-After: 99999999999999999999", 60000},
		{503, "Retry-After: -5", -1},
		{503, "Retry-After: soon", -1},
		{503, "Retry-After: Wed, 21 Oct 2015 07:28:05 GMT junk", -1},
		{503, "Retry-After:", -1},
		{503, "X-Other: 7", -1},
		{500, "Retry-After: 7", -1},	/* only 429 and 503 ask */
		{200, "Retry-After: 7", -1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		IoHttpResponse r;
		char	   *items[1];

		memset(&r, 0, sizeof(r));
		r.status = cases[i].status;
		items[0] = (char *) cases[i].header;
		r.headers.items = items;
		r.headers.n = 1;
		CHECK(io_http_retry_after_ms(&r, now) == cases[i].want,
			  "retry-after %ld \"%s\": %ld, want %ld", cases[i].status, cases[i].header,
			  io_http_retry_after_ms(&r, now), cases[i].want);
	}
	CHECK(io_http_retry_after_ms(NULL, now) == -1, "no response");
}

/* What an observer saw: one line per exchange. */
typedef struct Observed
{
	int			n;
	struct
	{
		char		what[32];
		char		method[8];
		int			attempt;
		long		status;
		IoErrorCode error;
		int64_t		elapsed_us;
	}			obs[32];
} Observed;

static void
observe_into(void *arg, const IoHttpObservation *o)
{
	Observed   *seen = arg;

	if (seen->n >= 32)
		return;
	snprintf(seen->obs[seen->n].what, sizeof(seen->obs[0].what), "%s", o->what);
	snprintf(seen->obs[seen->n].method, sizeof(seen->obs[0].method), "%s", o->method);
	seen->obs[seen->n].attempt = o->attempt;
	seen->obs[seen->n].status = o->status;
	seen->obs[seen->n].error = o->error;
	seen->obs[seen->n].elapsed_us = o->elapsed_us;
	seen->n++;
}

/*
 * The observer of IoHttpOptions hears of every exchange, retries one by
 * one, in single requests and in batches, with transport errors too.
 */
static void
test_http_observer(void)
{
	int			port;
	pid_t		server;
	char		uri[128];
	IoCatalogConfig cfg;
	IoCatalog  *cat = NULL;
	IoLoadedTable t;
	TmsError	err;
	IoLoadRequest reqs[2];
	BatchResults r;
	Observed	seen;
	int			rc;

	stats = mmap(NULL, sizeof(ServerStats), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stats == MAP_FAILED || (server = start_server(&port)) < 0)
	{
		CHECK(0, "cannot start the test server");
		return;
	}
	memset(stats, 0, sizeof(*stats));
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d", port);
	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = uri;
	cfg.http.retries = 2;
	cfg.http.retry_base_ms = 10;
	cfg.http.observe = observe_into;
	cfg.http.observe_arg = &seen;
	memset(&seen, 0, sizeof(seen));
	cat = io_catalog_open(&cfg, &err);
	CHECK(cat != NULL, "open: %s", err.message);
	if (cat == NULL)
		goto out;
	CHECK(seen.n == 1 && strcmp(seen.obs[0].what, "catalog") == 0 &&
		  strcmp(seen.obs[0].method, "GET") == 0 && seen.obs[0].status == 200 &&
		  seen.obs[0].error == IO_OK && seen.obs[0].attempt == 0,
		  "the config request is observed: %d seen, status %ld", seen.n, seen.obs[0].status);

	/* a 503 then a 200: two exchanges, the second one a retry */
	memset(&seen, 0, sizeof(seen));
	stats->flaky_left = 1;
	rc = io_catalog_load_table(cat, "ns", "flaky", &t, &err);
	if (rc == 0)
		io_loaded_table_free(&t);
	CHECK(rc == 0 && seen.n == 2 && seen.obs[0].status == 503 && seen.obs[0].attempt == 0 &&
		  seen.obs[1].status == 200 && seen.obs[1].attempt == 1,
		  "a retried load: rc %d, %d seen, statuses %ld/%ld, attempts %d/%d", rc, seen.n,
		  seen.obs[0].status, seen.obs[1].status, seen.obs[0].attempt, seen.obs[1].attempt);

	/* a 404 is an exchange with a response; the latency is libcurl's */
	memset(&seen, 0, sizeof(seen));
	rc = io_catalog_load_table(cat, "ns", "missing", &t, &err);
	CHECK(rc == -1 && seen.n == 1 && seen.obs[0].status == 404 && seen.obs[0].error == IO_OK,
		  "a 404: rc %d, %d seen, status %ld", rc, seen.n, seen.obs[0].status);
	memset(&seen, 0, sizeof(seen));
	rc = io_catalog_load_table(cat, "ns", "slow1", &t, &err);
	if (rc == 0)
		io_loaded_table_free(&t);
	CHECK(rc == 0 && seen.n == 1 && seen.obs[0].elapsed_us >= 100000,
		  "a load of 100 ms: %lld us", (long long) seen.obs[0].elapsed_us);
	BENCH_CHECK(seen.obs[0].elapsed_us < 10000000,
				"a load of 100 ms: %lld us", (long long) seen.obs[0].elapsed_us);

	/* a batch: each exchange, the retry with its attempt number */
	memset(&seen, 0, sizeof(seen));
	stats->flaky_left = 1;
	reqs[0].ns = "ns";
	reqs[0].table = "flaky";
	reqs[0].known_etag = NULL;
	reqs[1].ns = "ns";
	reqs[1].table = "slow2";
	reqs[1].known_etag = NULL;
	memset(&r, 0, sizeof(r));
	rc = io_catalog_load_tables_etag(cat, reqs, 2, 2, collect_result, &r, &err);
	{
		int			retried = 0,
					ok = 0;

		for (int i = 0; i < seen.n; i++)
		{
			/* (the retry may be answered 304: the first load left an ETag) */
			retried += seen.obs[i].attempt == 1 && seen.obs[i].status < 400;
			ok += seen.obs[i].status == 200 || seen.obs[i].status == 304;
		}
		CHECK(rc == 0 && r.ok + r.not_modified == 2 && seen.n == 3 && ok == 2 && retried == 1,
			  "a batch with a retry: rc %d, %d seen, %d ok, %d retried (%ld/%d %ld/%d %ld/%d)",
			  rc, seen.n, ok, retried, seen.obs[0].status, seen.obs[0].attempt,
			  seen.obs[1].status, seen.obs[1].attempt, seen.obs[2].status, seen.obs[2].attempt);
	}
	io_catalog_free(cat);
	cat = NULL;

	/* nobody listens: a transport error, no status */
	kill(-server, SIGKILL);
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	server = -1;
	memset(&seen, 0, sizeof(seen));
	cfg.http.retries = 0;
	cat = io_catalog_open(&cfg, &err);
	CHECK(cat == NULL && seen.n == 1 && seen.obs[0].status == 0 &&
		  seen.obs[0].error == IO_ERR_CONNECT,
		  "connection refused: %d seen, status %ld, error %s", seen.n, seen.obs[0].status,
		  tms_error_code_name(seen.obs[0].error));

out:
	if (cat != NULL)
		io_catalog_free(cat);
	if (server > 0)
	{
		kill(-server, SIGKILL);
		kill(server, SIGKILL);
		waitpid(server, NULL, 0);
	}
	io_http_shutdown();
}

/*
 * Idempotency keys: the UUIDv7 format (RFC 9562, 5.7), its timestamp
 * and uniqueness; the ISO-8601 durations of idempotency-key-lifetime;
 * the /v1/config reader taking the lifetime from the top level only.
 */
static void
test_idempotency(void)
{
	char		a[40],
				b[40];
	TmsError	err;
	int64_t		before = io_wall_ms();
	int64_t		ms;
	uint64_t	ts = 0;
	int			i;
	bool		format_ok = true;
	static const struct
	{
		const char *text;
		int64_t		ms;			/* -1: refused */
	}			durations[] = {
		{"PT30M", 1800000}, {"PT1H", 3600000}, {"P1D", 86400000},
		{"P1DT2H3M4S", 93784000}, {"PT1.5S", 1500}, {"PT0,25S", 250},
		{"P2W", 1209600000}, {"PT90S", 90000}, {"PT0S", 0},
		{"P1Y", -1}, {"P1M", -1}, {"PT", -1}, {"P", -1}, {"", -1},
		{"30M", -1}, {"PT30", -1}, {"PTM", -1}, {"-PT1M", -1},
		{"PT1M1H", -1}, {"PT1H1H", -1}, {"P1DT", -1}, {"PT1.5M", -1},
		{"PT1M ", -1}, {"P400D", -1}, {"PT9999999999S", -1},
		{"P1H", -1}, {"PT1D", -1}, {"P1DT1HT1M", -1},
	};

	CHECK(io_make_uuid7(a, &err) == 0 && io_make_uuid7(b, &err) == 0,
		  "uuid7: %s", err.message);
	CHECK(strlen(a) == 36 && strcmp(a, b) != 0, "uuid7 length and uniqueness: %s %s", a, b);
	for (i = 0; i < 36; i++)
	{
		bool		dash = (i == 8 || i == 13 || i == 18 || i == 23);

		if (dash ? a[i] != '-' : strchr("0123456789abcdef", a[i]) == NULL)
			format_ok = false;
	}
	CHECK(format_ok, "uuid7 8-4-4-4-12 lowercase hex: %s", a);
	CHECK(a[14] == '7', "uuid7 version nibble: %s", a);
	CHECK(strchr("89ab", a[19]) != NULL, "uuid7 variant bits 10: %s", a);
	for (i = 0; i < 13; i++)
	{
		if (a[i] == '-')
			continue;
		ts = ts * 16 + (uint64_t) (strchr("0123456789abcdef", a[i]) - "0123456789abcdef");
	}
	CHECK((int64_t) ts >= before && (int64_t) ts <= io_wall_ms(),
		  "uuid7 carries the unix time in ms: %llu not in [%lld, now]",
		  (unsigned long long) ts, (long long) before);

	for (i = 0; i < (int) (sizeof(durations) / sizeof(durations[0])); i++)
	{
		bool		ok;

		ms = -7;
		ok = io_parse_iso_duration_ms(durations[i].text, &ms);
		if (durations[i].ms < 0)
			CHECK(!ok && ms == -7, "duration %s refused", durations[i].text);
		else
			CHECK(ok && ms == durations[i].ms, "duration %s = %lld ms, got %lld",
				  durations[i].text, (long long) durations[i].ms, (long long) ms);
	}
	CHECK(!io_parse_iso_duration_ms(NULL, &ms), "NULL duration refused");

	{
		IoCatalog  *cat = io_calloc(1, sizeof(IoCatalog));
		const char *top = "{\"idempotency-key-lifetime\": \"PT30M\"}";
		const char *nested = "{\"defaults\": {\"idempotency-key-lifetime\": \"PT30M\"}}";
		const char *bad = "{\"idempotency-key-lifetime\": \"30 minutes\"}";
		const char *zero = "{\"idempotency-key-lifetime\": \"PT0S\"}";

		CHECK(io_rest_read_config(cat, top, strlen(top), &err) == 0 &&
			  cat->idem_lifetime_ms == 1800000, "lifetime from the top level: %lld",
			  (long long) cat->idem_lifetime_ms);
		CHECK(io_rest_read_config(cat, "{}", 2, &err) == 0 && cat->idem_lifetime_ms == 0,
			  "a later config without it: none");
		CHECK(io_rest_read_config(cat, nested, strlen(nested), &err) == 0 &&
			  cat->idem_lifetime_ms == 0, "a property named so is not the advertisement");
		CHECK(io_rest_read_config(cat, bad, strlen(bad), &err) == 0 &&
			  cat->idem_lifetime_ms == 0, "an unreadable lifetime: none, config still read");
		CHECK(io_rest_read_config(cat, zero, strlen(zero), &err) == 0 &&
			  cat->idem_lifetime_ms == 0, "a zero lifetime: none");
		io_catalog_free(cat);
	}
}

/*
 * The one error value of the plain-C layers (io_error.h): each layer's
 * codes have their own domain, the setters clear what they do not set,
 * and a wrapped io failure keeps its code, status and texts.
 */
static void
test_tms_error(void)
{
	TmsError	err;
	TmsError	under;
	TmsError	none;

	CHECK(tms_error_domain(0) == TMS_ERROR_NONE &&
		  tms_error_domain(IO_ERR_INVALID_ARGUMENT) == TMS_ERROR_IO &&
		  tms_error_domain(IO_ERR_INTERNAL) == TMS_ERROR_IO &&
		  tms_error_domain(ICEBERG_ERR_MALFORMED) == TMS_ERROR_ICEBERG &&
		  tms_error_domain(ICEBERG_ERR_CONFLICT) == TMS_ERROR_ICEBERG &&
		  tms_error_domain(ENGINE_ERR_UNKNOWN_OPERATION) == TMS_ERROR_ENGINE &&
		  tms_error_domain(ENGINE_ERR_OUT_OF_MEMORY) == TMS_ERROR_ENGINE,
		  "each layer's codes are in its own domain");
	CHECK(strcmp(tms_error_code_name(IO_ERR_CONFLICT), "conflict") == 0 &&
		  strcmp(tms_error_code_name(ICEBERG_ERR_NOT_FOUND), "not-found") == 0 &&
		  strcmp(tms_error_code_name(ENGINE_ERR_UNKNOWN_OPTION),
				 "unknown option") == 0 &&
		  strcmp(tms_error_code_name(0), "ok") == 0,
		  "code names of every layer");

	tms_error_set_http(&err, IO_ERR_FORBIDDEN, 403, "access to \"%s\" refused",
					   "s3://b/k");
	tms_error_detail_raw(&err, "Access\nDenied", 13);
	CHECK(err.code == IO_ERR_FORBIDDEN && err.http_status == 403 &&
		  strcmp(err.message, "access to \"s3://b/k\" refused") == 0 &&
		  strcmp(err.detail, "Access Denied") == 0,
		  "set_http and a server's text: %s / %s", err.message, err.detail);
	under = err;

	CHECK(tms_error_wrap(&err, ICEBERG_ERR_IO, &under, "could not read \"%s\"",
						 "m.avro") == -1 &&
		  err.code == ICEBERG_ERR_IO && err.io_code == IO_ERR_FORBIDDEN &&
		  err.http_status == 403 &&
		  strcmp(err.message, "could not read \"m.avro\"") == 0 &&
		  strcmp(err.detail, "access to \"s3://b/k\" refused: Access Denied") == 0,
		  "wrap keeps the io code, status and texts: %s", err.detail);

	tms_error_clear(&none);
	tms_error_wrap(&err, ICEBERG_ERR_IO, &none, "could not read");
	CHECK(err.io_code == IO_ERR_STORAGE && err.detail[0] == '\0',
		  "an io failure that said nothing is a storage error");

	tms_error_hint(&err, "do %s", "this");
	CHECK(strcmp(err.hint, "do this") == 0, "hint set");
	CHECK(tms_error_set(&err, ENGINE_ERR_INVALID_VALUE, "invalid %s", "x") == -1 &&
		  err.code == ENGINE_ERR_INVALID_VALUE && err.io_code == IO_OK &&
		  err.http_status == 0 && err.detail[0] == '\0' && err.hint[0] == '\0',
		  "set clears io code, status, detail and hint");
	CHECK(tms_error_set(NULL, IO_ERR_INTERNAL, "x") == -1, "NULL err");
	tms_error_clear(&err);
	CHECK(err.code == 0 && err.message[0] == '\0' && err.hint[0] == '\0',
		  "clear");
}

int
main(void)
{
	io_init();					/* before any jansson use */
	srandom((unsigned) time(NULL));
	test_sigv4_suite();
	test_uri_parse();
	test_location_canonical();
	test_location_under();
	test_xml();
	test_xml_budget();
	test_config_apply();
	test_file_storage();
	test_local_confinement();
	test_storage_fileio();
	test_http_interrupts();
	test_load_batches();
	test_http_observer();
	test_json_budget();
	test_wire_paths();
	test_engine_results();
	test_oauth2_read();
	test_retry_after();
	test_deleter();
	test_aimd();
	test_credentials_refresh();
	test_webhook();
	test_idempotency();
	test_tms_error();
	return unit_done();
}
