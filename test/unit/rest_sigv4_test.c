/*-------------------------------------------------------------------------
 *
 * rest_sigv4_test.c
 *		Unit tests of the headers the Iceberg REST catalog client sends
 *		(io_rest_headers, src/io/rest/rest_auth.c) without a server: a catalog
 *		request signed with AWS SigV4 for known inputs (the canonical
 *		request, the string to sign, the signature and the header lines),
 *		as AWS Glue's and S3 Tables' Iceberg REST endpoints and API
 *		Gateway verify them; the bearer token relocated to
 *		Original-Authorization; the unsigned form; the settings the
 *		handle refuses; and how AWS's error shapes are read (the type,
 *		the first line of the message only, 403 of a refused signature
 *		versus 403 of a refused permission).
 *
 * The expected canonical requests are written out by hand below from the
 * SigV4 rules; the expected signatures were computed from them by the
 * test catalog's independent verifier (test/catalog/sigv4.py: signing_key,
 * Python's hmac), not by the C signer.
 *
 * Built by "make unit" with the files of src/io/.  The last line printed
 * is "N passed, M failed"; the exit status is non-zero when M > 0.
 *
 * test/unit/rest_sigv4_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"
#include "io/rest/rest_int.h"
#include "unit.h"

/* 2015-08-30T12:36:00Z, the AWS suite's time */
#define SUITE_TIME ((time_t) 1440938160)
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* A handle as io_catalog_open leaves it, without the handshake. */
static IoCatalog *
catalog(const char *uri, const char *region, const char *service,
		const char *token, const char *session_token)
{
	IoCatalog  *cat = io_calloc(1, sizeof(IoCatalog));

	cat->uri = io_strdup(uri);
	if (token != NULL)
		cat->static_token = io_strdup(token);
	if (region != NULL)
	{
		cat->signing_region = io_strdup(region);
		cat->signing_name = io_strdup(service);
		cat->aws_access_key_id = io_strdup("AKIDEXAMPLE");
		cat->aws_secret_access_key = io_strdup(SECRET);
		if (session_token != NULL)
			cat->aws_session_token = io_strdup(session_token);
	}
	return cat;
}

/* The header line named name ("Name: value"), or NULL. */
static const char *
line(const IoStringList *l, const char *name)
{
	size_t		n = strlen(name);

	for (size_t i = 0; i < l->n; i++)
		if (strncasecmp(l->items[i], name, n) == 0 && l->items[i][n] == ':')
			return l->items[i];
	return NULL;
}

static int
count_lines(const IoStringList *l, const char *name)
{
	size_t		n = strlen(name);
	int			c = 0;

	for (size_t i = 0; i < l->n; i++)
		if (strncasecmp(l->items[i], name, n) == 0 && l->items[i][n] == ':')
			c++;
	return c;
}

/* A load through AWS Glue: bearer token, session token, a conditional GET. */
static void
test_glue_load(void)
{
	IoCatalog  *cat = catalog("https://glue.eu-west-1.amazonaws.com/iceberg",
							  "eu-west-1", "glue", "tok-123", "SESSION/TOKEN+1=");
	const char *extra[] = {"X-Iceberg-Access-Delegation: vended-credentials",
	"If-None-Match: \"v1-abc\""};
	IoStringList l;
	IoSigV4Output sig;
	TmsError	err;
	int			rc;

	rc = io_rest_headers(cat, "GET",
						 "https://glue.eu-west-1.amazonaws.com/iceberg/v1/catalogs%2F123456789012/namespaces/db%1Fsales/tables/orders?snapshots=all",
						 NULL, extra, 2, SUITE_TIME, &l, &sig, &err);
	CHECK(rc == 0, "glue load signed: %s", err.message);
	if (rc != 0)
		return;
	CHECK(strcmp(sig.canonical_request,
				 "GET\n"
				 "/iceberg/v1/catalogs%252F123456789012/namespaces/db%251Fsales/tables/orders\n"
				 "snapshots=all\n"
				 "accept:application/json\n"
				 "host:glue.eu-west-1.amazonaws.com\n"
				 "if-none-match:\"v1-abc\"\n"
				 "original-authorization:Bearer tok-123\n"
				 "x-amz-content-sha256:" EMPTY_SHA256 "\n"
				 "x-amz-date:20150830T123600Z\n"
				 "x-amz-security-token:SESSION/TOKEN+1=\n"
				 "x-iceberg-access-delegation:vended-credentials\n"
				 "\n"
				 "accept;host;if-none-match;original-authorization;x-amz-content-sha256;"
				 "x-amz-date;x-amz-security-token;x-iceberg-access-delegation\n"
				 EMPTY_SHA256) == 0,
		  "glue canonical request:\n%s", sig.canonical_request);
	CHECK(strncmp(sig.string_to_sign,
				  "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/eu-west-1/glue/aws4_request\n",
				  71) == 0 && strlen(sig.string_to_sign) == 71 + 64,
		  "glue string to sign:\n%s", sig.string_to_sign);
	CHECK(strcmp(sig.signature,
				 "75db75894cf8ee8c95b8b9b5693c635097da98e6f4489c838cfb93a397593cf6") == 0,
		  "glue signature %s", sig.signature);

	/* what goes on the wire */
	CHECK(line(&l, "Host") && strcmp(line(&l, "Host"), "Host: glue.eu-west-1.amazonaws.com") == 0,
		  "Host line %s", line(&l, "Host") ? line(&l, "Host") : "(none)");
	CHECK(line(&l, "Original-Authorization") &&
		  strcmp(line(&l, "Original-Authorization"), "Original-Authorization: Bearer tok-123") == 0,
		  "the bearer token is relocated");
	CHECK(count_lines(&l, "Authorization") == 1 &&
		  strcmp(line(&l, "Authorization"),
				 "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/eu-west-1/glue/aws4_request, "
				 "SignedHeaders=accept;host;if-none-match;original-authorization;x-amz-content-sha256;"
				 "x-amz-date;x-amz-security-token;x-iceberg-access-delegation, "
				 "Signature=75db75894cf8ee8c95b8b9b5693c635097da98e6f4489c838cfb93a397593cf6") == 0,
		  "one Authorization, the signature: %s", line(&l, "Authorization"));
	CHECK(line(&l, "X-Amz-Date") && strcmp(line(&l, "X-Amz-Date"), "X-Amz-Date: 20150830T123600Z") == 0,
		  "X-Amz-Date");
	CHECK(line(&l, "X-Amz-Security-Token") &&
		  strcmp(line(&l, "X-Amz-Security-Token"), "X-Amz-Security-Token: SESSION/TOKEN+1=") == 0,
		  "the session token is sent");
	CHECK(line(&l, "x-amz-content-sha256") &&
		  strcmp(line(&l, "x-amz-content-sha256"), "x-amz-content-sha256: " EMPTY_SHA256) == 0,
		  "the payload hash is sent");
	CHECK(line(&l, "If-None-Match") && line(&l, "X-Iceberg-Access-Delegation") &&
		  line(&l, "Accept") && !line(&l, "Content-Type"),
		  "the caller's headers stay, no Content-Type without a body");
	CHECK(l.n == 9, "9 header lines, not %zu", l.n);
	io_sigv4_free(&sig);
	io_string_list_wipe(&l);

	/* one second later: another date, another signature (a retry) */
	rc = io_rest_headers(cat, "GET",
						 "https://glue.eu-west-1.amazonaws.com/iceberg/v1/config", NULL,
						 NULL, 0, SUITE_TIME + 1, &l, NULL, &err);
	CHECK(rc == 0 && line(&l, "X-Amz-Date") &&
		  strcmp(line(&l, "X-Amz-Date"), "X-Amz-Date: 20150830T123601Z") == 0,
		  "the date is the attempt's");
	io_string_list_wipe(&l);
	io_catalog_free(cat);
}

/* A commit to S3 Tables: a body, no bearer, no session token. */
static void
test_s3tables_commit(void)
{
	IoCatalog  *cat = catalog("https://s3tables.us-east-1.amazonaws.com/iceberg",
							  "us-east-1", "s3tables", NULL, NULL);
	const char *body = "{\"requirements\":[],\"updates\":[]}";
	IoStringList l;
	IoSigV4Output sig;
	TmsError	err;
	int			rc;

	rc = io_rest_headers(cat, "POST",
						 "https://s3tables.us-east-1.amazonaws.com/iceberg/v1/arn%3Aaws%3As3tables%3Aus-east-1%3A111122223333%3Abucket%2Flake/namespaces/sales/tables/orders",
						 body, NULL, 0, SUITE_TIME, &l, &sig, &err);
	CHECK(rc == 0, "s3tables commit signed: %s", err.message);
	if (rc != 0)
		return;
	CHECK(strcmp(sig.canonical_request,
				 "POST\n"
				 "/iceberg/v1/arn%253Aaws%253As3tables%253Aus-east-1%253A111122223333%253Abucket%252Flake/namespaces/sales/tables/orders\n"
				 "\n"
				 "accept:application/json\n"
				 "content-type:application/json\n"
				 "host:s3tables.us-east-1.amazonaws.com\n"
				 "x-amz-content-sha256:fdf67518d4c158c461fed04f3428d44ed841333ecbe6d01e7f5b6e1c5937dc45\n"
				 "x-amz-date:20150830T123600Z\n"
				 "\n"
				 "accept;content-type;host;x-amz-content-sha256;x-amz-date\n"
				 "fdf67518d4c158c461fed04f3428d44ed841333ecbe6d01e7f5b6e1c5937dc45") == 0,
		  "s3tables canonical request:\n%s", sig.canonical_request);
	CHECK(strcmp(sig.signature,
				 "a3bd530fd4c50739adf217a9bc6cf40efea5fd13c65e659d197a418dfa61a76b") == 0,
		  "s3tables signature %s", sig.signature);
	CHECK(!line(&l, "Original-Authorization") && !line(&l, "X-Amz-Security-Token"),
		  "no bearer, no session token: neither header");
	CHECK(line(&l, "Content-Type") != NULL, "the body's Content-Type");
	io_sigv4_free(&sig);
	io_string_list_wipe(&l);
	io_catalog_free(cat);
}

/*
 * A listing page behind API Gateway (the default service): the query is
 * canonicalised (sorted, encoded once more only where RFC 3986 wants), the
 * port is part of Host.
 */
static void
test_listing_query(void)
{
	IoCatalog  *cat = catalog("http://127.0.0.1:8181", "us-east-1", "execute-api", NULL, NULL);
	IoStringList l;
	IoSigV4Output sig;
	TmsError	err;
	int			rc;

	rc = io_rest_headers(cat, "GET",
						 "http://127.0.0.1:8181/v1/tms/namespaces/a%20b/tables?pageToken=a%2Bb%3D%3D&pageSize=100",
						 NULL, NULL, 0, SUITE_TIME, &l, &sig, &err);
	CHECK(rc == 0, "listing signed: %s", err.message);
	if (rc != 0)
		return;
	CHECK(strcmp(sig.canonical_request,
				 "GET\n"
				 "/v1/tms/namespaces/a%2520b/tables\n"
				 "pageSize=100&pageToken=a%2Bb%3D%3D\n"
				 "accept:application/json\n"
				 "host:127.0.0.1:8181\n"
				 "x-amz-content-sha256:" EMPTY_SHA256 "\n"
				 "x-amz-date:20150830T123600Z\n"
				 "\n"
				 "accept;host;x-amz-content-sha256;x-amz-date\n"
				 EMPTY_SHA256) == 0,
		  "listing canonical request:\n%s", sig.canonical_request);
	CHECK(strcmp(sig.signature,
				 "7564e896202fd3bdc07b47106b8360f3eb0422c983d76e08829fe4890a4d79ce") == 0,
		  "listing signature %s", sig.signature);
	CHECK(line(&l, "Host") && strcmp(line(&l, "Host"), "Host: 127.0.0.1:8181") == 0,
		  "Host with the port");
	io_sigv4_free(&sig);
	io_string_list_wipe(&l);
	io_catalog_free(cat);
}

/* Without signing: the bearer token in Authorization, nothing AWS. */
static void
test_unsigned(void)
{
	IoCatalog  *cat = catalog("http://127.0.0.1:8181", NULL, NULL, "tok-123", NULL);
	const char *extra[] = {"If-None-Match: \"e\""};
	IoStringList l;
	IoSigV4Output sig;
	TmsError	err;
	int			rc;

	rc = io_rest_headers(cat, "POST", "http://127.0.0.1:8181/v1/tms/namespaces/db/tables/t",
						 "{}", extra, 1, SUITE_TIME, &l, &sig, &err);
	CHECK(rc == 0, "unsigned headers: %s", err.message);
	CHECK(l.n == 4 && strcmp(l.items[0], "Accept: application/json") == 0 &&
		  strcmp(l.items[1], "Content-Type: application/json") == 0 &&
		  strcmp(l.items[2], "If-None-Match: \"e\"") == 0 &&
		  strcmp(l.items[3], "Authorization: Bearer tok-123") == 0,
		  "Accept, Content-Type, the extra line, the bearer token (%zu lines)", l.n);
	CHECK(!line(&l, "X-Amz-Date") && !line(&l, "Host") && sig.canonical_request == NULL,
		  "nothing signed");
	io_string_list_wipe(&l);
	io_catalog_free(cat);
}

/* The handle refuses signing settings it cannot use, before any request. */
static void
test_open_refuses(void)
{
	IoCatalogConfig cfg;
	TmsError	err;

	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = "http://127.0.0.1:1";
	cfg.signing_region = "eu-west-1";
	cfg.http.retries = 0;
	CHECK(io_catalog_open(&cfg, &err) == NULL && err.code == IO_ERR_INVALID_ARGUMENT &&
		  strstr(err.message, "access key") != NULL,
		  "a signing region without keys: %s", err.message);
	cfg.aws_access_key_id = "AKID";
	cfg.aws_secret_access_key = "s3cr3t";
	cfg.signing_region = "eu west/1";
	CHECK(io_catalog_open(&cfg, &err) == NULL && err.code == IO_ERR_INVALID_ARGUMENT &&
		  strstr(err.message, "region") != NULL && strstr(err.message, "s3cr3t") == NULL,
		  "a region that would split the scope: %s", err.message);
	cfg.signing_region = "eu-west-1";
	cfg.signing_name = "glue/x";
	CHECK(io_catalog_open(&cfg, &err) == NULL && err.code == IO_ERR_INVALID_ARGUMENT &&
		  strstr(err.message, "signing name") != NULL,
		  "a bad signing name: %s", err.message);
	CHECK(io_sigv4_scope_valid("us-gov-west-1") && io_sigv4_scope_valid("execute-api") &&
		  !io_sigv4_scope_valid("") && !io_sigv4_scope_valid("a b") &&
		  !io_sigv4_scope_valid("a/b"), "scope names");
}

/* A response of status st with body and one header line (or NULL). */
static void
response(IoHttpResponse *r, long st, const char *body, const char *header)
{
	memset(r, 0, sizeof(*r));
	r->status = st;
	r->body = io_strdup(body);
	r->body_len = strlen(body);
	if (header != NULL)
	{
		r->headers.items = io_calloc(1, sizeof(char *));
		r->headers.items[0] = io_strdup(header);
		r->headers.n = 1;
	}
}

/* AWS's error shapes: type, first line of the message, the SQLSTATE class. */
static void
test_aws_errors(void)
{
	IoHttpResponse r;
	TmsError	err;

	/* API Gateway / REST-JSON: {"message"} and x-amzn-ErrorType */
	response(&r, 403,
			 "{\"message\": \"The request signature we calculated does not match the signature you provided.\\n\\n"
			 "The Canonical String for this request should have been\\n'GET\\n/v1/config\\n\\n"
			 "original-authorization:Bearer tok-SECRET\\nx-amz-security-token:SESSION-SECRET'\"}",
			 "x-amzn-ErrorType: InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/");
	io_rest_status_error(&r, REST_CALL_GENERIC, "catalog configuration request", 0, &err);
	CHECK(err.code == IO_ERR_UNAUTHORIZED && err.http_status == 403,
		  "a refused signature is an authentication failure (%s)", tms_error_code_name(err.code));
	CHECK(strcmp(err.detail, "InvalidSignatureException: The request signature we calculated "
				 "does not match the signature you provided.") == 0,
		  "type and first line only: %s", err.detail);
	CHECK(strstr(err.detail, "SECRET") == NULL, "no echoed token in the detail");
	io_http_response_free(&r);

	/* JSON 1.1: "__type" with a namespace */
	response(&r, 403, "{\"__type\": \"com.amazon.coral.service#UnrecognizedClientException\","
			 " \"message\": \"The security token included in the request is invalid.\"}", NULL);
	io_rest_status_error(&r, REST_CALL_TABLE, "load of table", 0, &err);
	CHECK(err.code == IO_ERR_UNAUTHORIZED &&
		  strcmp(err.detail, "UnrecognizedClientException: The security token included in the request is invalid.") == 0,
		  "unknown keys: %s %s", tms_error_code_name(err.code), err.detail);
	io_http_response_free(&r);

	/* the keys are fine, their policy is not */
	response(&r, 403, "{\"Message\": \"User: arn:aws:iam::1:user/m is not authorized to perform: glue:GetTable\"}",
			 "x-amzn-ErrorType: AccessDeniedException");
	io_rest_status_error(&r, REST_CALL_TABLE, "load of table", 0, &err);
	CHECK(err.code == IO_ERR_FORBIDDEN && strncmp(err.detail, "AccessDeniedException: User:", 28) == 0,
		  "a refused permission stays forbidden: %s %s", tms_error_code_name(err.code), err.detail);
	io_http_response_free(&r);

	/* the Iceberg error model wrapping the same type */
	response(&r, 403, "{\"error\": {\"message\": \"Signature expired\\n\\nThe Canonical String "
			 "... x-amz-security-token:SESSION-SECRET\", \"type\": "
			 "\"InvalidSignatureException\", \"code\": 403}}", NULL);
	io_rest_status_error(&r, REST_CALL_GENERIC, "catalog request", 0, &err);
	CHECK(err.code == IO_ERR_UNAUTHORIZED &&
		  strcmp(err.detail, "InvalidSignatureException: Signature expired") == 0,
		  "the error model's type counts too, its first line only: %s", err.detail);
	io_http_response_free(&r);

	/* a 403 of the Iceberg kind is still insufficient privilege */
	response(&r, 403, "{\"error\": {\"message\": \"no\", \"type\": \"ForbiddenException\", \"code\": 403}}",
			 NULL);
	io_rest_status_error(&r, REST_CALL_GENERIC, "catalog request", 0, &err);
	CHECK(err.code == IO_ERR_FORBIDDEN, "ForbiddenException: %s", tms_error_code_name(err.code));
	io_http_response_free(&r);
}

int
main(void)
{
	io_init();
	test_glue_load();
	test_s3tables_commit();
	test_listing_query();
	test_unsigned();
	test_open_refuses();
	test_aws_errors();
	return unit_done();
}
