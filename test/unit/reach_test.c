/*-------------------------------------------------------------------------
 *
 * reach_test.c
 *		Unit tests of what tms may reach and what it may show: the list of
 *		tms.allowed_hosts (src/io/http/reach.c: parsing, names, addresses,
 *		networks, ports, IPv4-mapped IPv6) and its check on real
 *		connections (a request to 127.0.0.1 refused before it connects
 *		when the list names other hosts, let through when it names the
 *		address, its network or the name "localhost"); and the one list of
 *		credential shapes (src/io/util/secret_names.c: URL logins, Azure keys and SAS
 *		tokens, GCS tokens, fs.gs.auth.*).
 *
 * Built by "make unit" with the files of src/io/.  No server: the requests
 * go to a port nothing listens on, so an allowed one fails to connect and
 * a refused one never tries.  The last line printed is "N passed, M
 * failed"; the exit status is non-zero when M > 0.
 *
 * test/unit/reach_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io.h"
#include "io/io_int.h"
#include "io/http/reach.h"
#include "io/util/secret_names.h"
#include "unit.h"

static IoReachRules *
parse_ok(const char *text)
{
	IoReachRules *r = NULL;
	char		why[300];
	int			rc = io_reach_parse(text, &r, why, sizeof(why));

	CHECK(rc == 0, "parse \"%s\": %s", text, why);
	return r;
}

static void
parse_bad(const char *text, const char *fragment)
{
	IoReachRules *r = NULL;
	char		why[300];
	int			rc = io_reach_parse(text, &r, why, sizeof(why));

	CHECK(rc == -1 && r == NULL && strstr(why, fragment) != NULL,
		  "parse \"%s\" refused with \"%s\" (got rc %d, \"%s\")", text, fragment, rc, why);
}

/* Does rules allow the address text on port? */
static bool
addr_allowed(const IoReachRules *rules, const char *addr, int port)
{
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;

	memset(&a6, 0, sizeof(a6));
	memset(&a4, 0, sizeof(a4));
	if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1)
	{
		a4.sin_family = AF_INET;
		a4.sin_port = htons(port);
		return io_reach_allows_addr(rules, (struct sockaddr *) &a4);
	}
	if (inet_pton(AF_INET6, addr, &a6.sin6_addr) != 1)
		abort();
	a6.sin6_family = AF_INET6;
	a6.sin6_port = htons(port);
	return io_reach_allows_addr(rules, (struct sockaddr *) &a6);
}

static void
test_parse(void)
{
	IoReachRules *r;

	r = parse_ok("");
	CHECK(r == NULL && io_reach_count(r) == 0, "empty: no list");
	r = parse_ok(" ,  , ");
	CHECK(r == NULL, "separators only: no list");

	r = parse_ok("catalog.example.com, *.storage.example:443 10.0.0.0/8 "
				 "192.168.1.7:8181,fd00::/8, ::1, [fe80::1]:80, [2001:db8::/32]:443,"
				 "host1,Mixed.Case.Example.");
	CHECK(io_reach_count(r) == 10, "ten entries, got %d", io_reach_count(r));

	/* names: exact, case-insensitive, trailing dot; suffix below only */
	CHECK(io_reach_allows_name(r, "catalog.example.com", 8181), "exact name");
	CHECK(io_reach_allows_name(r, "CATALOG.example.com.", 80), "name, case and root dot");
	CHECK(!io_reach_allows_name(r, "evil-catalog.example.com", 80), "no partial name");
	CHECK(!io_reach_allows_name(r, "catalog.example.com.evil", 80), "no prefix name");
	CHECK(io_reach_allows_name(r, "a.storage.example", 443), "suffix");
	CHECK(io_reach_allows_name(r, "a.b.storage.example", 443), "deeper suffix");
	CHECK(!io_reach_allows_name(r, "storage.example", 443), "suffix needs a label more");
	CHECK(!io_reach_allows_name(r, "xstorage.example", 443), "suffix at a dot only");
	CHECK(!io_reach_allows_name(r, "a.storage.example", 80), "suffix: other port");
	CHECK(io_reach_allows_name(r, "host1", 1), "name ending in a digit");
	CHECK(io_reach_allows_name(r, "mixed.case.example", 1), "listed name lowercased");

	/* addresses and networks, ports, IPv4-mapped IPv6 */
	CHECK(addr_allowed(r, "10.200.3.4", 80), "IPv4 network");
	CHECK(!addr_allowed(r, "11.0.0.1", 80), "outside the network");
	CHECK(addr_allowed(r, "::ffff:10.1.1.1", 80), "IPv4-mapped IPv6 in an IPv4 network");
	CHECK(addr_allowed(r, "192.168.1.7", 8181), "address and port");
	CHECK(!addr_allowed(r, "192.168.1.7", 8182), "address, other port");
	CHECK(!addr_allowed(r, "192.168.1.8", 8181), "other address");
	CHECK(addr_allowed(r, "fd12:3456::1", 443), "IPv6 network");
	CHECK(addr_allowed(r, "::1", 9), "IPv6 address");
	CHECK(!addr_allowed(r, "::2", 9), "other IPv6 address");
	CHECK(addr_allowed(r, "fe80::1", 80) && !addr_allowed(r, "fe80::1", 81), "bracketed with port");
	CHECK(addr_allowed(r, "2001:db8:ffff::1", 443) && !addr_allowed(r, "2001:db9::1", 443),
		  "bracketed network with port");
	CHECK(!addr_allowed(r, "127.0.0.1", 80), "loopback not listed");
	CHECK(!io_reach_allows_name(r, "10.0.0.1", 80), "an address is no name");
	free(r);

	r = parse_ok("::ffff:127.0.0.1, [::ffff:10.0.0.0/104]:80");
	CHECK(addr_allowed(r, "127.0.0.1", 1) && addr_allowed(r, "::ffff:127.0.0.1", 1) &&
		  addr_allowed(r, "10.1.1.1", 80) && !addr_allowed(r, "10.1.1.1", 81) &&
		  !addr_allowed(r, "127.0.0.2", 1), "an IPv4-mapped entry is its IPv4 address");
	free(r);
	r = parse_ok("0.0.0.0/0");
	CHECK(addr_allowed(r, "203.0.113.9", 1) && !addr_allowed(r, "::1", 1), "/0: every IPv4");
	free(r);
	r = parse_ok("10.1.2.128/25");
	CHECK(addr_allowed(r, "10.1.2.200", 1) && !addr_allowed(r, "10.1.2.127", 1), "/25");
	free(r);

	parse_bad("catalog.example.com:0", "port");
	parse_bad("catalog.example.com:65536", "port");
	parse_bad("catalog.example.com:http", "port");
	parse_bad("10.0.0.0/33", "at most 32");
	parse_bad("fd00::/129", "at most 128");
	parse_bad("10.0.0.256", "not an IPv4 address");
	parse_bad("10.0.0.0/x", "prefix length");
	parse_bad("[::1", "without");
	parse_bad("[::1]8181", "port");
	parse_bad("[10.0.0.1]", "not an IPv6 address");
	parse_bad("*", "leave the setting empty");
	parse_bad("*.", "entry \"*.\"");
	parse_bad("*.a..b", "below");
	parse_bad("http://catalog.example.com", "entry \"http://catalog.example.com\": a URL");
	parse_bad("ok.example, bad..example", "entry \"bad..example\"");
	parse_bad(":80", "no host");
}

/*
 * A port on 127.0.0.1 nothing listens on (bound, never listening: the
 * kernel refuses connections to it).
 */
static int
dead_port(int *fd)
{
	struct sockaddr_in a;
	socklen_t	len = sizeof(a);

	*fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (*fd < 0 || bind(*fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		getsockname(*fd, (struct sockaddr *) &a, &len) != 0)
		abort();
	return ntohs(a.sin_port);
}

/* GET url with rules in force: the error code of the attempt. */
static IoErrorCode
get_with(const char *rules_text, const char *url, TmsError *err)
{
	IoReachRules *rules = parse_ok(rules_text);
	IoHttpRequest req;
	IoHttpResponse resp;
	IoHttpOptions opt;
	int			rc;

	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	memset(&opt, 0, sizeof(opt));
	opt.retries = 0;
	opt.connect_timeout_ms = 2000;
	req.method = "GET";
	req.url = url;
	req.idempotent = true;
	io_reach_set_rules(rules);
	rc = io_http_perform(&opt, &req, &resp, err);
	io_reach_set_rules(NULL);
	free(rules);
	if (rc == 0)
	{
		io_http_response_free(&resp);
		return IO_OK;
	}
	return err->code;
}

static void
test_connections(void)
{
	int			fd;
	int			port = dead_port(&fd);
	char		url[128];
	char		named[128];
	char		listed[64];
	TmsError	err;
	IoErrorCode code;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/config", port);
	snprintf(named, sizeof(named), "http://localhost:%d/v1/config", port);

	/* no list: the connection is tried (and refused by the kernel) */
	code = get_with("", url, &err);
	CHECK(code == IO_ERR_CONNECT, "no list: tried, got %s", tms_error_code_name(code));

	/* another host only: refused before connecting, naming host and address */
	code = get_with("10.9.9.9, catalog.example.com", url, &err);
	CHECK(code == IO_ERR_FORBIDDEN && err.http_status == 0 &&
		  strstr(err.message, "tms.allowed_hosts") != NULL &&
		  strstr(err.message, "127.0.0.1") != NULL &&
		  strstr(err.detail, "Address 127.0.0.1 port") != NULL,
		  "refused: %s: %s / %s", tms_error_code_name(code), err.message, err.detail);
	code = get_with("10.9.9.9", named, &err);
	CHECK(code == IO_ERR_FORBIDDEN && strstr(err.detail, "Neither host \"localhost\"") != NULL,
		  "a name resolving to an unlisted address: %s / %s", err.message, err.detail);

	/* the address, its network, or the name in the URL: tried */
	code = get_with("127.0.0.1", url, &err);
	CHECK(code == IO_ERR_CONNECT, "listed address: %s", tms_error_code_name(code));
	code = get_with("127.0.0.0/8, ::1", url, &err);
	CHECK(code == IO_ERR_CONNECT, "listed network: %s", tms_error_code_name(code));
	code = get_with("127.0.0.0/8", named, &err);
	CHECK(code == IO_ERR_CONNECT, "a name resolving to a listed network: %s",
		  tms_error_code_name(code));
	snprintf(listed, sizeof(listed), "localhost:%d", port);
	code = get_with(listed, named, &err);
	CHECK(code == IO_ERR_CONNECT, "listed name and port: %s", tms_error_code_name(code));

	/* the port counts */
	snprintf(listed, sizeof(listed), "127.0.0.1:%d", port == 65535 ? 1 : port + 1);
	code = get_with(listed, url, &err);
	CHECK(code == IO_ERR_FORBIDDEN, "listed address, other port: %s", tms_error_code_name(code));
	code = get_with("localhost:1", named, &err);
	CHECK(code == IO_ERR_FORBIDDEN, "listed name, other port: %s", tms_error_code_name(code));
	close(fd);
}

static void
test_secret_shapes(void)
{
	static const char *const keys[] = {
		"fs.azure.account.key.acct.dfs.core.windows.net",
		"spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net",
		"fs.azure.account.keyprovider.acct",
		"fs.azure.sas.container.acct.blob.core.windows.net",
		"fs.azure.sas.fixed.token",
		"adls.sas-token.acct.dfs.core.windows.net",
		"adls.auth.shared-key.account.key",
		"gcs.oauth2.token",
		"fs.gs.auth.service.account.email",
		"spark.hadoop.fs.gs.auth.type",
		"google.cloud.auth.service.account.json.keyfile",
		"fs.s3a.secret.key", "s3.secret-access-key", "password", NULL
	};
	static const char *const plain_keys[] = {
		"fs.azure.account.auth.type", "warehouse", "uri", "basis",
		"s3.endpoint", "gcs.project-id", "saskatoon", "signal", NULL
	};
	static const char *const values[] = {
		"https://user:password@catalog.example/v1",
		"s3://key:secret@bucket/path",
		"http://alice@hooks.example/x",
		"--conf x=https://u:p@h.example",
		"https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=abc",
		"spark.hadoop.fs.azure.account.key.acct=abc",
		"Bearer abc", NULL
	};
	static const char *const plain_values[] = {
		"abfss://container@acct.dfs.core.windows.net/wh",
		"wasbs://container@acct.blob.core.windows.net/wh",
		"https://catalog.example:8443/v1?x=1",
		"https://***@catalog.example/v1",
		"mailto:someone@example.com",
		"user@example.com", NULL
	};
	const char *v = "a https://u:p@h/x and ftp://v@w/y";
	size_t		s,
				e;

	for (int i = 0; keys[i]; i++)
		CHECK(io_secret_key(keys[i], strlen(keys[i])), "key %s is credential-shaped", keys[i]);
	for (int i = 0; plain_keys[i]; i++)
		CHECK(!io_secret_key(plain_keys[i], strlen(plain_keys[i])), "key %s is not", plain_keys[i]);
	for (int i = 0; values[i]; i++)
		CHECK(io_secret_value(values[i], strlen(values[i])), "value %s holds one", values[i]);
	for (int i = 0; plain_values[i]; i++)
		CHECK(!io_secret_value(plain_values[i], strlen(plain_values[i])),
			  "value %s does not", plain_values[i]);

	/* the spans a redaction replaces */
	CHECK(io_find_userinfo(v, strlen(v), 0, &s, &e) && e - s == 3 &&
		  strncmp(v + s, "u:p", 3) == 0, "first login");
	CHECK(io_find_userinfo(v, strlen(v), e, &s, &e) && e - s == 1 && v[s] == 'v',
		  "second login");
	CHECK(!io_find_userinfo(v, strlen(v), e, &s, &e), "no third");
}

int
main(void)
{
	io_init();
	test_parse();
	test_connections();
	test_secret_shapes();
	return unit_done();
}
