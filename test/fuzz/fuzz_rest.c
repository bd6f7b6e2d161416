/*-------------------------------------------------------------------------
 *
 * fuzz_rest.c
 *	  libFuzzer target for the JSON readers of the Iceberg REST catalog
 *	  client (src/io/rest/rest_int.h), without a network.
 *
 * The first input byte selects the reader, the rest is the response body:
 *	0: /v1/config (io_rest_read_config), with and without a warehouse
 *	   and a configured prefix;
 *	1: an OAuth2 token response (io_rest_read_token);
 *	2: an error body (io_rest_status_error), the status and call kind
 *	   taken from the selector's upper bits;
 *	3: a ListTablesResponse page (io_rest_read_tables_page);
 *	4: a ListNamespacesResponse page (io_rest_read_namespaces_page);
 *	5: a LoadTableResult (io_rest_read_load_result); with the selector's
 *	   bit 3 set a LoadCredentialsResponse (io_rest_read_credentials), for
 *	   a location, or for none with bit 4 set;
 *	6: the name checks (io_rest_check_ident) on the body as a namespace
 *	   and as a table name;
 *	7: the headers of a request (io_rest_headers): the body's first line
 *	   is the URL, the others extra header lines; signed with SigV4 (and
 *	   a bearer token) when the selector's bit 3 is set.
 * A small JSON budget (64 KiB) makes the max_json_bytes paths reachable.
 * Every reader must end in a value: 0, or -1 with an TmsError whose code is
 * set; ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-rest (this file with every .c file of src/io).
 * Seed corpus: test/fuzz/corpus/rest/ (selector byte + a real-looking
 * response).
 *
 * test/fuzz/fuzz_rest.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/rest/rest_int.h"

#define FUZZ_MAX_JSON (64 * 1024)

/* A handle as io_catalog_open leaves it, without the network. */
static IoCatalog *
fake_catalog(bool warehouse, bool prefix)
{
	IoCatalog  *cat = io_calloc(1, sizeof(IoCatalog));

	if (cat == NULL)
		abort();
	cat->uri = io_strdup("http://127.0.0.1:1");
	cat->warehouse = warehouse ? io_strdup("s3://wh/") : NULL;
	cat->prefix_option = prefix ? io_strdup("cat/a b") : NULL;
	cat->http.max_json_bytes = FUZZ_MAX_JSON;
	return cat;
}

/* A failed reader must say why. */
static void
check_rc(int rc, const TmsError *err)
{
	if (rc != 0 && (rc != -1 || err->code == IO_OK || err->message[0] == '\0'))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long statuses[] = {400, 401, 403, 404, 406, 409, 419, 422,
	429, 500, 501, 502, 503, 504, 418, 599};
	const char *body;
	size_t		len;
	TmsError	err;
	int			rc;

	io_init();					/* idempotent; before any jansson use */
	if (size < 1)
		return 0;
	body = (const char *) data + 1;
	len = size - 1;
	tms_error_clear(&err);
	switch (data[0] & 7)
	{
		case 0:
			{
				IoCatalog  *cat = fake_catalog(data[0] & 8, data[0] & 16);

				rc = io_rest_read_config(cat, body, len, &err);
				check_rc(rc, &err);
				if (rc == 0)
				{
					size_t		n;

					(void) io_catalog_properties(cat, &n);
					(void) io_rest_endpoint_offered(cat, "GET /v1/{prefix}/namespaces");
					if (cat->prefix == NULL)
						abort();
					/* a second config replaces the first */
					rc = io_rest_read_config(cat, body, len, &err);
					check_rc(rc, &err);
				}
				io_catalog_free(cat);
				break;
			}
		case 1:
			{
				IoCatalog  *cat = fake_catalog(false, false);

				rc = io_rest_read_token(cat, body, len, &err);
				check_rc(rc, &err);
				if (rc == 0 && (cat->oauth.token == NULL || cat->oauth.expires_ms < 0))
					abort();
				io_catalog_free(cat);
				break;
			}
		case 2:
			{
				IoHttpResponse resp;

				memset(&resp, 0, sizeof(resp));
				resp.status = statuses[(data[0] >> 3) & 15];
				resp.body = (char *) body;
				resp.body_len = len;
				rc = io_rest_status_error(&resp, (RestCallKind) ((data[0] >> 7) * 3),
										  "fuzz", FUZZ_MAX_JSON, &err);
				if (rc != -1 || err.code == IO_OK || err.http_status != resp.status)
					abort();
				break;
			}
		case 3:
			{
				IoTableIdent *items;
				size_t		n;
				char	   *next;

				rc = io_rest_read_tables_page(body, len, FUZZ_MAX_JSON, &items, &n,
											  &next, &err);
				check_rc(rc, &err);
				if (rc == 0)
				{
					for (size_t i = 0; i < n; i++)
						if (items[i].ns == NULL || items[i].name == NULL)
							abort();
					io_rest_free_idents(items, n);
					io_free(next);
				}
				else if (items != NULL || n != 0 || next != NULL)
					abort();
				break;
			}
		case 4:
			{
				IoStringList out = {NULL, 0};
				char	   *next;

				rc = io_rest_read_namespaces_page(body, len, FUZZ_MAX_JSON, &out,
												  &next, &err);
				check_rc(rc, &err);
				if (rc == 0)
					io_free(next);
				else if (next != NULL || out.n != 0)
					abort();
				io_string_list_free(&out);
				break;
			}
		case 5:
			if (data[0] & 8)
			{
				IoTableCredentials c;

				rc = io_rest_read_credentials(body, len, FUZZ_MAX_JSON,
											  (data[0] & 16) ? NULL : "s3://b/wh/t",
											  &c, &err);
				check_rc(rc, &err);
				if (rc != 0 && (c.config != NULL || c.nconfig != 0))
					abort();
				io_table_credentials_free(&c);
				break;
			}
			else
			{
				IoLoadedTable t;

				memset(&t, 0, sizeof(t));
				rc = io_rest_read_load_result(body, len, FUZZ_MAX_JSON, "load table",
											  &t, &err);
				check_rc(rc, &err);
				if (rc == 0 && t.metadata_json == NULL)
					abort();
				io_loaded_table_free(&t);
				break;
			}
		case 7:
			{
				IoCatalog  *cat = fake_catalog(false, false);
				char	   *s = io_malloc(len + 1);
				const char *extra[8];
				size_t		nextra = 0;
				IoStringList lines;
				IoSigV4Output sig;
				char	   *p;

				if (s == NULL)
					abort();
				memcpy(s, body, len);
				s[len] = '\0';
				/* the URL, then up to 8 extra lines */
				for (p = strchr(s, '\n'); p != NULL && nextra < 8; p = strchr(p, '\n'))
				{
					*p++ = '\0';
					extra[nextra++] = p;
				}
				if (data[0] & 8)
				{
					cat->static_token = io_strdup("tok");
					cat->signing_region = io_strdup("eu-west-1");
					cat->signing_name = io_strdup("glue");
					cat->aws_access_key_id = io_strdup("AKID");
					cat->aws_secret_access_key = io_strdup("secret");
					cat->aws_session_token = io_strdup("session");
				}
				rc = io_rest_headers(cat, data[0] & 16 ? "POST" : "GET", s,
									 data[0] & 16 ? "{}" : NULL, extra, nextra,
									 (time_t) 1440938160, &lines, &sig, &err);
				check_rc(rc, &err);
				if (rc == 0 && (data[0] & 8) &&
					(sig.canonical_request == NULL || lines.n < nextra + 6))
					abort();
				io_sigv4_free(&sig);
				io_string_list_wipe(&lines);
				io_catalog_free(cat);
				io_free(s);
				break;
			}
		default:
			{
				char	   *s = io_malloc(len + 1);

				if (s == NULL)
					return 0;
				memcpy(s, body, len);
				s[len] = '\0';
				rc = io_rest_check_ident(s, NULL, &err);
				check_rc(rc, &err);
				rc = io_rest_check_ident("ns", s, &err);
				check_rc(rc, &err);
				io_free(s);
				break;
			}
	}
	return 0;
}
