/*-------------------------------------------------------------------------
 *
 * azure_test.c
 *		Unit tests of the Azure storage of src/io: the SharedKey
 *		string-to-sign against the examples of Microsoft's "Authorize with
 *		Shared Key" (https://learn.microsoft.com/rest/api/storageservices/
 *		authorize-with-shared-key) and its signature; Azure locations
 *		(abfs[s]://, wasb[s]://: their canonical form, which spellings are
 *		one object, what is refused, containment under allowed roots);
 *		the Blob Batch body (one authorised Delete Blob per blob, at most
 *		256) and the reader of its multipart answer (Microsoft's "Blob
 *		Batch" example answer, throttled sub-requests, missing ones); the
 *		grouping of bulk deletes and the vended SAS tokens of a catalog.
 *
 * Built by "make unit" with the files of src/io/.  No server.  The last
 * line printed is "N passed, M failed"; the exit status is non-zero when
 * M > 0.
 *
 * test/unit/azure_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "io/io_int.h"
#include "io/storage/storage_int.h"
#include "unit.h"

/* Azurite's documented development key: not a secret. */
#define AZURITE_KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/* ---- SharedKey ---- */

static void
check_sts(const char *method, const IoHeader *h, size_t n, const char *account,
		  const char *path, const char *query, const char *want)
{
	IoStrBuf	sb;
	TmsError	err;

	if (io_azure_string_to_sign(method, h, n, account, path, query, &sb, &err) != 0)
	{
		FAIL("string-to-sign failed: %s", err.message);
		return;
	}
	CHECK(strcmp(sb.data, want) == 0, "string-to-sign\n got: [%s]\nwant: [%s]", sb.data, want);
	io_sb_free(&sb);
}

static void
test_string_to_sign(void)
{
	/* the documented Blob service example (Get Container Metadata) */
	IoHeader	h[] = {
		{"x-ms-version", "2009-09-19"},
		{"x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"},
	};
	IoHeader	put[] = {
		{"Content-Type", "text/plain; charset=UTF-8"},
		{"Content-Length", "11"},
		{"x-ms-meta-m2", "v2"},
		{"X-MS-Date", "  Sun, 20 Sep 2009 20:36:40 GMT "},
		{"x-ms-meta-m1", "v1"},
		{"x-ms-version", "2009-09-19"},
		{"x-ms-range", "bytes=0-9"},
		{"host", "ignored"},
	};
	IoHeader	zero[] = {{"content-length", "0"}, {"range", "bytes=1-2"}};
	IoStrBuf	sb;
	TmsError	err;
	char		sig[64];

	check_sts("GET", h, 2, "myaccount", "/myaccount/mycontainer",
			  "restype=container&comp=metadata&timeout=20",
			  "GET\n\n\n\n\n\n\n\n\n\n\n\n"
			  "x-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n"
			  "/myaccount/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20");
	/* the documented canonicalized resources */
	check_sts("GET", NULL, 0, "myaccount", "/mycontainer",
			  "restype=container&comp=list&include=snapshots&include=metadata&include=uncommittedblobs",
			  "GET\n\n\n\n\n\n\n\n\n\n\n\n/myaccount/mycontainer\ncomp:list\n"
			  "include:metadata,snapshots,uncommittedblobs\nrestype:container");
	check_sts("GET", NULL, 0, "myaccount", "/mycontainer/myblob", NULL,
			  "GET\n\n\n\n\n\n\n\n\n\n\n\n/myaccount/mycontainer/myblob");
	/* standard headers in their places, x-ms- headers sorted and trimmed */
	check_sts("PUT", put, 8, "myaccount", "/mycontainer/hello.txt", NULL,
			  "PUT\n\n\n11\n\ntext/plain; charset=UTF-8\n\n\n\n\n\n\n"
			  "x-ms-date:Sun, 20 Sep 2009 20:36:40 GMT\nx-ms-meta-m1:v1\nx-ms-meta-m2:v2\n"
			  "x-ms-range:bytes=0-9\nx-ms-version:2009-09-19\n/myaccount/mycontainer/hello.txt");
	/* a zero Content-Length is an empty string; query values are decoded */
	check_sts("DELETE", zero, 2, "a", "/c/k%20x", "Prefix=a%2Fb&marker=",
			  "DELETE\n\n\n\n\n\n\n\n\n\n\nbytes=1-2\n/a/c/k%20x\nmarker:\nprefix:a/b");

	/* the signature: base64 HMAC-SHA256 under the decoded key */
	if (io_azure_string_to_sign("GET", h, 2, "myaccount", "/myaccount/mycontainer",
								"restype=container&comp=metadata&timeout=20", &sb, &err) == 0)
	{
		CHECK(io_azure_sign(AZURITE_KEY, sb.data, sb.len, sig, sizeof(sig), &err) == 0);
		CHECK(strcmp(sig, "Su5rvibNeMxB7A4I87rOtEgCDtdICsL8v5H+yJs0W+M=") == 0, "signature %s", sig);
		io_sb_free(&sb);
	}
	CHECK(io_azure_sign("not base64!", "x", 1, sig, sizeof(sig), &err) != 0 &&
		  err.code == IO_ERR_INVALID_ARGUMENT && strstr(err.message, "not base64") == NULL);
}

/* ---- Locations ---- */

static void
canon_is(const char *in, const char *want)
{
	char	   *c = NULL;
	TmsError	err;

	if (io_location_canonical(in, NULL, &c, &err) != 0)
	{
		FAIL("canonical(%s): %s", in, err.message);
		return;
	}
	CHECK(strcmp(c, want) == 0, "canonical(%s) = %s, want %s", in, c, want);
	io_free(c);
}

static void
canon_bad(const char *in, const char *fragment)
{
	char	   *c = NULL;
	TmsError	err;

	if (io_location_canonical(in, NULL, &c, &err) == 0)
	{
		FAIL("canonical(%s) accepted: %s", in, c);
		io_free(c);
		return;
	}
	CHECK(err.code == IO_ERR_INVALID_ARGUMENT && strstr(err.message, fragment) != NULL,
		  "canonical(%s): %s", in, err.message);
}

static void
test_locations(void)
{
	const char *same[] = {
		"abfs://whs@acct.dfs.core.windows.net/t/data/f.parquet",
		"abfss://whs@acct.dfs.core.windows.net/t/data/f.parquet",
		"ABFSS://whs@ACCT.DFS.core.windows.net/t/data/f.parquet",
		"wasb://whs@acct.blob.core.windows.net/t/data/f.parquet",
		"wasbs://whs@acct.blob.core.windows.net/t/data/f.parquet",
		"abfss://whs@acct/t/data/f.parquet",
	};
	IoParsedUri u;
	TmsError	err;

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		canon_is(same[i], "abfs://whs@acct.dfs.core.windows.net/t/data/f.parquet");
	/* other clouds keep their domain; keys are kept as they are */
	canon_is("wasbs://whs@acct.blob.core.chinacloudapi.cn/a//b%2e",
			 "abfs://whs@acct.dfs.core.chinacloudapi.cn/a//b%2e");
	canon_is("abfss://whs@acct.dfs.core.windows.net", "abfs://whs@acct.dfs.core.windows.net");
	canon_is("abfs://$root@acct.dfs.core.windows.net/x", "abfs://$root@acct.dfs.core.windows.net/x");
	/* idempotent */
	canon_is("abfs://whs@acct.dfs.core.windows.net/x", "abfs://whs@acct.dfs.core.windows.net/x");

	canon_bad("abfss://acct.dfs.core.windows.net/x", "names its container");
	canon_bad("abfss://@acct.dfs.core.windows.net/x", "3 to 63");
	canon_bad("abfss://ab@acct.dfs.core.windows.net/x", "3 to 63");
	canon_bad("abfss://Wh1@acct.dfs.core.windows.net/x", "lower-case");
	canon_bad("abfss://wh_1@acct.dfs.core.windows.net/x", "lower-case");
	canon_bad("abfss://wh1@/x", "host is empty");
	canon_bad("abfss://wh1@.dfs.core.windows.net/x", "3 to 24");
	canon_bad("abfss://wh1@ab.dfs.core.windows.net/x", "3 to 24");
	canon_bad("abfss://wh1@a1234567890123456789012345/x", "3 to 24");
	canon_bad("abfss://wh1@acct./x", "ends in");
	canon_bad("abfss://wh1@ac-ct.dfs.core.windows.net/x", "account name");
	canon_bad("abfss://wh1@acct.dfs.core.windows.net:443/x", "account host");
	canon_bad("abfss://wh1@acct.dfs.core.windows.net/a/../b", "segment");
	canon_bad("abfss://wh1@acct.dfs.core.windows.net/./b", "segment");
	canon_bad("adl://wh1@acct.azuredatalakestore.net/x", "abfs[s]://");

	/* containment: one account's spellings, at '/' boundaries only */
	CHECK(io_location_under("abfs://whs@acct.dfs.core.windows.net/t/f",
							"abfs://whs@acct.dfs.core.windows.net/t"));
	CHECK(io_location_under("abfs://whs@acct.dfs.core.windows.net/t/f",
							"abfs://whs@acct.dfs.core.windows.net/"));
	CHECK(!io_location_under("abfs://whs@acct.dfs.core.windows.net/t2/f",
							 "abfs://whs@acct.dfs.core.windows.net/t"));
	CHECK(!io_location_under("abfs://whs@acct.dfs.core.windows.net/t",
							 "abfs://whs@acct.dfs.core.windows.net/t"));
	CHECK(!io_location_under("abfs://whs@other.dfs.core.windows.net/t/f",
							 "abfs://whs@acct.dfs.core.windows.net/t"));
	CHECK(!io_location_under("abfs://wh2x@acct.dfs.core.windows.net/t/f",
							 "abfs://whs@acct.dfs.core.windows.net/"));
	CHECK(!io_location_under("abfs://whs@acct.dfs.core.windows.net/t/f", "abfs://"));

	/* parsing */
	if (io_uri_parse("wasbs://whs@acct.blob.core.windows.net/t/f.avro", &u, &err) == 0)
	{
		CHECK(u.scheme == IO_URI_AZURE);
		CHECK(strcmp(u.bucket, "whs") == 0, "container %s", u.bucket);
		CHECK(strcmp(u.account, "acct.dfs.core.windows.net") == 0, "account %s", u.account);
		CHECK(strcmp(u.path, "t/f.avro") == 0, "path %s", u.path);
		io_uri_free(&u);
	}
	else
		FAIL("parse: %s", err.message);
}

/* ---- Blob Batch ---- */

static IoStorage *
azurite_storage(const char *sas, const IoKeyValue *vended, size_t nvended)
{
	IoStorageConfig cfg;
	TmsError	err;
	IoStorage  *st;

	memset(&cfg, 0, sizeof(cfg));
	cfg.azure_endpoint = "http://127.0.0.1:10000/";
	cfg.azure_account_key = sas ? NULL : AZURITE_KEY;
	cfg.azure_sas_token = sas;
	if (nvended > 0)
		io_storage_config_apply(&cfg, vended, nvended, false);
	st = io_storage_create(&cfg, &err);
	CHECK(st != NULL, "create: %s", err.message);
	return st;
}

static size_t
count(const char *s, const char *what)
{
	size_t		n = 0;

	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static void
test_batch_body(void)
{
	IoStorage  *st = azurite_storage(NULL, NULL, 0);
	IoParsedUri u;
	TmsError	err;
	IoStrBuf	body;
	char		ctype[96];
	const char *keys[3] = {"t/a.parquet", "t/b c.parquet", "t/d"};
	const char *many[257];
	char		boundary[80];

	if (st == NULL || io_uri_parse("abfss://warehouse@devstoreaccount1/t/", &u, &err) != 0)
		return;
	CHECK(io_azure_batch_body(st, &u, keys, 3, &body, ctype, sizeof(ctype), &err) == 0,
		  "%s", err.message);
	CHECK(strncmp(ctype, "multipart/mixed; boundary=batch_", 32) == 0, "%s", ctype);
	snprintf(boundary, sizeof(boundary), "--%s\r\n", ctype + 26);
	CHECK(count(body.data, boundary) == 3, "parts:\n%s", body.data);
	snprintf(boundary, sizeof(boundary), "--%s--\r\n", ctype + 26);
	CHECK(strstr(body.data, boundary) != NULL && strcmp(body.data + body.len - strlen(boundary),
														boundary) == 0);
	CHECK(strstr(body.data, "Content-ID: 0\r\n") && strstr(body.data, "Content-ID: 2\r\n"));
	CHECK(count(body.data, "Content-Type: application/http\r\n"
				"Content-Transfer-Encoding: binary\r\n") == 3);
	CHECK(strstr(body.data, "\r\nDELETE /devstoreaccount1/warehouse/t/a.parquet HTTP/1.1\r\n") != NULL,
		  "%s", body.data);
	CHECK(strstr(body.data, "\r\nDELETE /devstoreaccount1/warehouse/t/b%20c.parquet HTTP/1.1\r\n") != NULL);
	CHECK(count(body.data, "Authorization: SharedKey devstoreaccount1:") == 3);
	CHECK(count(body.data, "x-ms-date: ") == 3 && count(body.data, "Content-Length: 0\r\n\r\n") == 3);
	io_sb_wipe_free(&body);

	for (size_t i = 0; i < 257; i++)
		many[i] = "t/x";
	CHECK(io_azure_batch_body(st, &u, many, 257, &body, ctype, sizeof(ctype), &err) != 0 &&
		  err.code == IO_ERR_INVALID_ARGUMENT);
	CHECK(io_azure_batch_body(st, &u, many, 256, &body, ctype, sizeof(ctype), &err) == 0);
	io_sb_wipe_free(&body);
	CHECK(io_azure_batch_body(st, &u, many, 0, &body, ctype, sizeof(ctype), &err) != 0);
	io_storage_free(st);

	/* with a SAS token: in every sub-request's URL, no signature */
	st = azurite_storage("sv=2021-08-06&ss=b&sig=abc%2Bdef", NULL, 0);
	if (st != NULL)
	{
		CHECK(io_azure_batch_body(st, &u, keys, 1, &body, ctype, sizeof(ctype), &err) == 0);
		CHECK(strstr(body.data, "DELETE /devstoreaccount1/warehouse/t/a.parquet?sv=2021-08-06&ss=b&sig=abc%2Bdef HTTP/1.1\r\n") != NULL,
			  "%s", body.data);
		CHECK(strstr(body.data, "Authorization") == NULL);
		io_sb_wipe_free(&body);
		io_storage_free(st);
	}
	io_uri_free(&u);
}

static void
batch_answer(const char *ctype, const char *body, size_t n, IoDeleteResult *r)
{
	IoHttpResponse resp;
	TmsError	err;
	char		line[200];
	char	   *items[1];

	memset(&resp, 0, sizeof(resp));
	snprintf(line, sizeof(line), "content-type: %s", ctype);
	items[0] = line;
	resp.status = 202;
	resp.body = (char *) body;
	resp.body_len = strlen(body);
	resp.headers.items = items;
	resp.headers.n = 1;
	memset(r, 0, n * sizeof(IoDeleteResult));
	CHECK(io_azure_batch_read(&resp, n, r, &err) == 0, "%s", err.message);
}

static void
test_batch_read(void)
{
	/* Microsoft's "Blob Batch" example answer (three deletes) */
	const char *doc =
	"--batchresponse_66925647-d0cb-4109-b6d3-28efe3e1e5ed\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: 0\r\n"
	"\r\n"
	"HTTP/1.1 202 Accepted\r\n"
	"x-ms-delete-type-permanent: true\r\n"
	"x-ms-request-id: 778fdc83-801e-0000-62ff-0334671e284f\r\n"
	"x-ms-version: 2018-11-09\r\n"
	"\r\n"
	"--batchresponse_66925647-d0cb-4109-b6d3-28efe3e1e5ed\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: 1\r\n"
	"\r\n"
	"HTTP/1.1 202 Accepted\r\n"
	"x-ms-delete-type-permanent: true\r\n"
	"x-ms-request-id: 778fdc83-801e-0000-62ff-0334671e2851\r\n"
	"x-ms-version: 2018-11-09\r\n"
	"\r\n"
	"--batchresponse_66925647-d0cb-4109-b6d3-28efe3e1e5ed\r\n"
	"Content-Type: application/http\r\n"
	"Content-ID: 2\r\n"
	"\r\n"
	"HTTP/1.1 404 The specified blob does not exist.\r\n"
	"x-ms-error-code: BlobNotFound\r\n"
	"x-ms-request-id: 778fdc83-801e-0000-62ff-0334671e2852\r\n"
	"x-ms-version: 2018-11-09\r\n"
	"Content-Length: 216\r\n"
	"Content-Type: application/xml\r\n"
	"\r\n"
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.\n"
	"RequestId:778fdc83-801e-0000-62ff-0334671e2852\n"
	"Time:2018-06-14T16:46:54.6040685Z</Message></Error>\r\n"
	"--batchresponse_66925647-d0cb-4109-b6d3-28efe3e1e5ed--";

	/* out of order, LF only, throttled, a code only in the body, one missing */
	const char *mixed =
	"preamble\n--b1\nContent-Type: application/http\nContent-ID: 2\n\n"
	"HTTP/1.1 503 The server is busy.\nx-ms-error-code: ServerBusy\n\n"
	"--b1\nContent-Type: application/http\nContent-ID: 0\n\n"
	"HTTP/1.1 500 Operation could not be completed within the specified time.\n\n"
	"<Error><Code>OperationTimedOut</Code></Error>\n"
	"--b1\nContent-Type: application/http\nContent-ID: 3\n\n"
	"HTTP/1.1 403 Forbidden\nx-ms-error-code: AuthorizationPermissionMismatch\n\n"
	"--b1--\n";
	IoDeleteResult r[4];

	batch_answer("multipart/mixed; boundary=batchresponse_66925647-d0cb-4109-b6d3-28efe3e1e5ed",
				 doc, 3, r);
	CHECK(r[0].deleted && r[0].code[0] == '\0');
	CHECK(r[1].deleted);
	CHECK(r[2].deleted && strcmp(r[2].code, "BlobNotFound") == 0, "%s", r[2].code);

	batch_answer("multipart/mixed; boundary=\"b1\"", mixed, 4, r);
	CHECK(!r[0].deleted && strcmp(r[0].code, "OperationTimedOut") == 0, "%s", r[0].code);
	CHECK(io_delete_code_throttled(r[0].code));
	CHECK(!r[1].deleted && strcmp(r[1].code, "NoResult") == 0, "%s", r[1].code);
	CHECK(!io_delete_code_throttled(r[1].code));
	CHECK(!r[2].deleted && strcmp(r[2].code, "ServerBusy") == 0 &&
		  strcmp(r[2].message, "The server is busy.") == 0, "%s %s", r[2].code, r[2].message);
	CHECK(io_delete_code_throttled(r[2].code));
	CHECK(!r[3].deleted && strcmp(r[3].code, "AuthorizationPermissionMismatch") == 0);

	/* no Content-ID: by order */
	batch_answer("multipart/mixed; boundary=x",
				 "--x\r\n\r\nHTTP/1.1 202 Accepted\r\n\r\n--x\r\n\r\nHTTP/1.1 409 Conflict\r\n"
				 "x-ms-error-code: LeaseIdMissing\r\n\r\n--x--\r\n", 2, r);
	CHECK(r[0].deleted && !r[1].deleted && strcmp(r[1].code, "LeaseIdMissing") == 0);

	CHECK(io_azure_throttled(503, NULL) && io_azure_throttled(500, "OperationTimedOut") &&
		  io_azure_throttled(500, "ServerBusy") && !io_azure_throttled(500, "InternalError") &&
		  !io_azure_throttled(403, "AuthenticationFailed"));
}

/* ---- Bulk delete groups, vended SAS tokens ---- */

static void
test_groups_and_vending(void)
{
	size_t		len;
	IoKeyValue	kv[] = {
		{"adls.sas-token.other.dfs.core.windows.net", "sv=1&sig=OTHER"},
		{"adls.sas-token.devstoreaccount1", "sv=1&sig=MINE"},
		{"adls.sas-token-expires-at-ms.devstoreaccount1", "1900000000000"},
		{"adls.sas-token-expires-at-ms.other", "1800000000000"},
	};
	IoStorage  *st;
	IoParsedUri u;
	IoS3Request r;
	TmsError	err;

	CHECK(io_delete_group("abfs://wh1@a.dfs.core.windows.net/t/f", &len) == 256 &&
		  len == strlen("abfs://wh1@a.dfs.core.windows.net/"));
	CHECK(io_delete_group("s3://b/t/f", &len) == 1000 && len == 7);
	CHECK(io_delete_group("/tmp/x", &len) == 0);

	st = azurite_storage(NULL, kv, 4);
	if (st == NULL)
		return;
	CHECK(io_storage_credentials_expire_ms(st) == 1800000000000LL);
	if (io_uri_parse("abfs://warehouse@devstoreaccount1.dfs.core.windows.net/t/f", &u, &err) == 0)
	{
		/* the vended token of the account wins over the shared key */
		CHECK(io_azure_request_build(st, "GET", &u, u.path, NULL, NULL, 0, NULL, 0, &r, &err) == 0);
		CHECK(strcmp(r.url, "http://127.0.0.1:10000/devstoreaccount1/warehouse/t/f?sv=1&sig=MINE") == 0,
			  "%s", r.url);
		for (size_t i = 0; i < r.nlines; i++)
			CHECK(strncmp(r.lines[i], "Authorization", 13) != 0, "%s", r.lines[i]);
		io_s3_request_free(&r);
		io_uri_free(&u);
	}
	if (io_uri_parse("abfs://warehouse@third.dfs.core.windows.net/t/f", &u, &err) == 0)
	{
		/* another account: the shared key */
		CHECK(io_azure_request_build(st, "GET", &u, u.path, "comp=x", NULL, 0, NULL, 0, &r, &err) == 0);
		CHECK(strcmp(r.url, "http://127.0.0.1:10000/third/warehouse/t/f?comp=x") == 0, "%s", r.url);
		CHECK(r.nlines == 3 && strncmp(r.lines[2], "Authorization: SharedKey third:", 31) == 0);
		io_s3_request_free(&r);
		io_uri_free(&u);
	}
	io_storage_free(st);
}

int
main(void)
{
	io_init();
	test_string_to_sign();
	test_locations();
	test_batch_body();
	test_batch_read();
	test_groups_and_vending();
	io_http_shutdown();
	return unit_done();
}
