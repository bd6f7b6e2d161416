/*-------------------------------------------------------------------------
 *
 * io_driver.c
 *		A command-line driver of src/io for the integration tests
 *		(test/integration/test_storage_s3.py, test_storage_gcs.py,
 *		test_catalog_commit.py), which compile it with the files of src/io/
 *		and run it against s3rver, a checking fake S3, the GCS test server
 *		and the test catalog.
 *
 *	io_driver [options] COMMAND ARGS...
 *	  options: -e ENDPOINT  -r REGION  -k KEY_ID  -s SECRET  -t SESSION_TOKEN
 *			   -p PATH_STYLE(0|1)  -l LIST_PAGE_SIZE  -T REQUEST_TIMEOUT_MS
 *			   -N RETRIES (of catalog requests; default 0: none)
 *			   -R LOCAL_ROOT (repeatable: the directories local access is
 *			   confined to; without one no local file is touched)
 *			   -A AZURE_ENDPOINT  -K AZURE_SHARED_KEY  -S AZURE_SAS_TOKEN
 *			   -B AZURE_BLOCK_SIZE  -V KEY=VALUE (repeatable: a vended
 *			   property, such as adls.sas-token.ACCOUNT=SAS)
 *			   GCS: -G ENDPOINT  -H ACCESS_ID:SECRET (HMAC keys)
 *			   -O OAUTH2_TOKEN  -J SERVICE_ACCOUNT_KEY_FILE  -P PART_BYTES
 *			   -X RETRIES (of storage requests; default 0: none)
 *	  put URI FILE            store FILE's bytes ("-": stdin)
 *	  get URI [OFFSET LEN]    object bytes (a range) to stdout
 *	  size URI                the size
 *	  list PREFIX             "uri<TAB>size" per object
 *	  delete URI...           "uri<TAB>deleted|failed<TAB>code<TAB>message"
 *	  delete-from FILE        as delete, URIs one per line in FILE
 *	  catalog-load CATALOG_URI NS TABLE            "location<TAB>etag"
 *	  catalog-commit CATALOG_URI NS TABLE BODYFILE "location" of the new metadata
 *	  catalog-drop CATALOG_URI NS TABLE PURGE(0|1)
 *
 * On failure: "error<TAB>code name<TAB>http status<TAB>message<TAB>detail" on
 * stderr and exit status 2.
 *
 * test/integration/io_driver.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

static int
fail(const TmsError *err)
{
	fprintf(stderr, "error\t%s\t%ld\t%s\t%s\n", tms_error_code_name(err->code),
			err->http_status, err->message, err->detail);
	return 2;
}

static int
print_obj(void *arg, const IoObjectInfo *obj)
{
	(void) arg;
	printf("%s\t%llu\n", obj->uri, (unsigned long long) obj->size);
	return 0;
}

static char *
slurp(FILE *f, size_t *len)
{
	size_t		cap = 65536,
				n = 0,
				r;
	char	   *buf = malloc(cap);

	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0)
	{
		n += r;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	*len = n;
	return buf;
}

static int
do_delete(IoStorage *st, char **uris, size_t n)
{
	IoDeleteResult *res = calloc(n ? n : 1, sizeof(IoDeleteResult));
	TmsError	err;
	int			rc = 0;

	if (io_storage_delete(st, (const char *const *) uris, n, res, &err) != 0)
		rc = fail(&err);
	for (size_t i = 0; i < n; i++)
		printf("%s\t%s\t%s\t%s\n", uris[i], res[i].deleted ? "deleted" : "failed",
			   res[i].code, res[i].message);
	free(res);
	return rc;
}

/* Catalog commands: open the catalog at uri (no auth) and run cmd. */
static int
do_catalog(const char *cmd, char **args, int nargs, long timeout_ms, int retries)
{
	IoCatalogConfig cfg;
	IoCatalog  *cat;
	TmsError	err;
	IoLoadedTable t;
	int			rc = 0;

	if (nargs < 3)
		return 64;
	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = args[0];
	cfg.http.retries = retries;
	cfg.http.retry_base_ms = 50;
	cfg.http.request_timeout_ms = timeout_ms;
	cat = io_catalog_open(&cfg, &err);
	if (cat == NULL)
		return fail(&err);
	if (strcmp(cmd, "catalog-load") == 0)
	{
		if (io_catalog_load_table(cat, args[1], args[2], &t, &err) != 0)
			rc = fail(&err);
		else
		{
			printf("%s\t%s\n", t.metadata_location ? t.metadata_location : "",
				   t.etag ? t.etag : "");
			io_loaded_table_free(&t);
		}
	}
	else if (strcmp(cmd, "catalog-commit") == 0 && nargs == 4)
	{
		FILE	   *f = fopen(args[3], "rb");
		size_t		len = 0;
		char	   *body = f ? slurp(f, &len) : NULL;

		if (f)
			fclose(f);
		if (body == NULL)
			rc = 66;
		else
		{
			body = realloc(body, len + 1);
			body[len] = '\0';
			if (io_catalog_commit_table(cat, args[1], args[2], body, &t, &err) != 0)
				rc = fail(&err);
			else
			{
				printf("%s\n", t.metadata_location ? t.metadata_location : "");
				io_loaded_table_free(&t);
			}
			free(body);
		}
	}
	else if (strcmp(cmd, "catalog-drop") == 0 && nargs == 4)
	{
		if (io_catalog_drop_table(cat, args[1], args[2], atoi(args[3]) != 0, &err) != 0)
			rc = fail(&err);
	}
	else
		rc = 64;
	io_catalog_free(cat);
	return rc;
}

int
main(int argc, char **argv)
{
	IoStorageConfig cfg;
	IoStorage  *st;
	TmsError	err;
	int			c;
	int			rc = 0;
	const char *cmd;
	const char *roots[8];
	size_t		nroots = 0;
	int			catalog_retries = 0;
	IoKeyValue	vended[8];
	size_t		nvended = 0;

	io_init();
	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_path_style = -1;
	cfg.http.retries = 0;
	while ((c = getopt(argc, argv, "e:r:k:s:t:p:l:T:R:N:A:K:S:B:V:G:H:O:J:P:X:")) != -1)
	{
		switch (c)
		{
			case 'e':
				cfg.s3_endpoint = optarg;
				break;
			case 'r':
				cfg.s3_region = optarg;
				break;
			case 'k':
				cfg.s3_access_key_id = optarg;
				break;
			case 's':
				cfg.s3_secret_access_key = optarg;
				break;
			case 't':
				cfg.s3_session_token = optarg;
				break;
			case 'p':
				cfg.s3_path_style = atoi(optarg);
				break;
			case 'l':
				cfg.s3_list_page_size = atoi(optarg);
				break;
			case 'T':
				cfg.http.request_timeout_ms = atol(optarg);
				break;
			case 'N':
				catalog_retries = atoi(optarg);
				break;
			case 'G':
				cfg.gcs_endpoint = optarg;
				break;
			case 'H':
				{
					char	   *colon = strchr(optarg, ':');

					if (colon == NULL)
						return 64;
					*colon = '\0';
					cfg.gcs_hmac_access_id = optarg;
					cfg.gcs_hmac_secret = colon + 1;
					break;
				}
			case 'O':
				cfg.gcs_oauth2_token = optarg;
				break;
			case 'J':
				{
					FILE	   *f = fopen(optarg, "rb");
					size_t		len = 0;
					char	   *key = f ? slurp(f, &len) : NULL;

					if (f)
						fclose(f);
					if (key == NULL)
						return 66;
					key = realloc(key, len + 1);
					key[len] = '\0';
					cfg.gcs_service_account_key = key;
					break;
				}
			case 'P':
				cfg.gcs_upload_part_bytes = (size_t) atol(optarg);
				break;
			case 'X':
				cfg.http.retries = atoi(optarg);
				cfg.http.retry_base_ms = 20;
				break;
			case 'R':
				if (nroots < sizeof(roots) / sizeof(roots[0]))
					roots[nroots++] = optarg;
				cfg.local_roots = roots;
				cfg.nlocal_roots = nroots;
				break;
			case 'A':
				cfg.azure_endpoint = optarg;
				break;
			case 'K':
				cfg.azure_account_key = optarg;
				break;
			case 'S':
				cfg.azure_sas_token = optarg;
				break;
			case 'B':
				cfg.azure_block_size = (size_t) atol(optarg);
				break;
			case 'V':
				if (nvended < sizeof(vended) / sizeof(vended[0]) && strchr(optarg, '=') != NULL)
				{
					vended[nvended].key = optarg;
					vended[nvended].value = strchr(optarg, '=') + 1;
					*strchr(optarg, '=') = '\0';
					nvended++;
				}
				break;
			default:
				return 64;
		}
	}
	if (nvended > 0)
		io_storage_config_apply(&cfg, vended, nvended, false);
	if (optind >= argc)
		return 64;
	cmd = argv[optind++];
	if (strncmp(cmd, "catalog-", 8) == 0)
	{
		rc = do_catalog(cmd, argv + optind, argc - optind, cfg.http.request_timeout_ms,
						catalog_retries);
		io_http_shutdown();
		return rc;
	}
	st = io_storage_create(&cfg, &err);
	if (st == NULL)
		return fail(&err);

	if (strcmp(cmd, "put") == 0 && optind + 2 == argc)
	{
		FILE	   *f = strcmp(argv[optind + 1], "-") == 0 ? stdin : fopen(argv[optind + 1], "rb");
		size_t		len = 0;
		char	   *data = f ? slurp(f, &len) : NULL;

		if (data == NULL)
			rc = 66;
		else if (io_storage_write(st, argv[optind], data, len, &err) != 0)
			rc = fail(&err);
		free(data);
		if (f && f != stdin)
			fclose(f);
	}
	else if (strcmp(cmd, "get") == 0 && (optind + 1 == argc || optind + 3 == argc))
	{
		IoBuffer	buf;
		uint64_t	off = optind + 3 == argc ? strtoull(argv[optind + 1], NULL, 10) : 0;
		uint64_t	len = optind + 3 == argc ? strtoull(argv[optind + 2], NULL, 10) : 0;

		if (io_storage_read(st, argv[optind], off, len, &buf, &err) != 0)
			rc = fail(&err);
		else
		{
			fwrite(buf.data, 1, buf.len, stdout);
			io_buffer_free(&buf);
		}
	}
	else if (strcmp(cmd, "size") == 0 && optind + 1 == argc)
	{
		uint64_t	size;

		if (io_storage_size(st, argv[optind], &size, &err) != 0)
			rc = fail(&err);
		else
			printf("%llu\n", (unsigned long long) size);
	}
	else if (strcmp(cmd, "list") == 0 && optind + 1 == argc)
	{
		if (io_storage_list(st, argv[optind], print_obj, NULL, &err) != 0)
			rc = fail(&err);
	}
	else if (strcmp(cmd, "delete") == 0)
		rc = do_delete(st, argv + optind, (size_t) (argc - optind));
	else if (strcmp(cmd, "delete-from") == 0 && optind + 1 == argc)
	{
		FILE	   *f = fopen(argv[optind], "r");
		char	  **uris = NULL;
		size_t		n = 0;
		char		line[4096];

		while (f && fgets(line, sizeof(line), f))
		{
			line[strcspn(line, "\n")] = '\0';
			uris = realloc(uris, (n + 1) * sizeof(char *));
			uris[n++] = strdup(line);
		}
		if (f)
			fclose(f);
		rc = do_delete(st, uris, n);
		for (size_t i = 0; i < n; i++)
			free(uris[i]);
		free(uris);
	}
	else
		rc = 64;
	io_storage_free(st);
	io_http_shutdown();
	return rc;
}
