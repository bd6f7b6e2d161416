/*-------------------------------------------------------------------------
 *
 * storage.c
 *		Object storage, the interface (io.h): storage URIs, the handle and
 *		its configuration, vended credentials and their refresh, and the
 *		entry points, which send local files (file:// URIs and absolute
 *		paths) to the local backend (storage_local.c), S3 (s3://, s3a://,
 *		s3n://) to the S3 backend (storage_s3.c), Azure (abfs[s]://,
 *		wasb[s]://) to the Azure backend (storage_azure.c) and Google Cloud
 *		Storage (gs://) to the GCS backend (storage_gcs.c).  Every location
 *		goes through the location rule (location.c) first.
 *
 * The backends share only this interface and the handle (storage_int.h);
 * none calls another.
 *
 * src/io/storage/storage.c
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "io/io_int.h"
#include "io/http/gcs_auth.h"
#include "io/storage/storage_int.h"

/* ----------------------------------------------------------------
 * URIs
 * ----------------------------------------------------------------
 */

void
io_uri_free(IoParsedUri *uri)
{
	if (uri == NULL)
		return;
	io_free(uri->bucket);
	io_free(uri->path);
	io_free(uri->account);
	uri->bucket = NULL;
	uri->path = NULL;
	uri->account = NULL;
}

/*
 * Parse a storage URI (see io.h): the canonical form of location.c, split
 * into bucket and key for S3.  S3 URIs need a bucket; the key may be empty
 * (a bucket-wide prefix).  Relative locations are refused here: callers
 * that have a relative root canonicalise first.
 */
int
io_uri_parse(const char *uri, IoParsedUri *out, TmsError *err)
{
	char	   *c;

	memset(out, 0, sizeof(*out));
	if (io_location_canonical(uri, NULL, &c, err) != 0)
		return -1;
	if (strncmp(c, "s3://", 5) == 0)
	{
		const char *rest = c + 5;
		const char *slash = strchr(rest, '/');
		size_t		blen = slash ? (size_t) (slash - rest) : strlen(rest);

		out->scheme = IO_URI_S3;
		out->bucket = io_strndup(rest, blen);
		out->path = io_strdup(slash ? slash + 1 : "");
		io_free(c);
	}
	else if (strncmp(c, "abfs://", 7) == 0)
	{
		/* canonical: "abfs://container@host[/key]" */
		const char *rest = c + 7;
		const char *at = strchr(rest, '@');
		const char *slash = strchr(at, '/');
		size_t		hlen = slash ? (size_t) (slash - at - 1) : strlen(at + 1);

		out->scheme = IO_URI_AZURE;
		out->bucket = io_strndup(rest, (size_t) (at - rest));
		out->account = io_strndup(at + 1, hlen);
		out->path = io_strdup(slash ? slash + 1 : "");
		io_free(c);
		if (out->account == NULL)
		{
			io_uri_free(out);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
	}
	else if (strncmp(c, "gs://", 5) == 0)
	{
		const char *rest = c + 5;
		const char *slash = strchr(rest, '/');
		size_t		blen = slash ? (size_t) (slash - rest) : strlen(rest);

		out->scheme = IO_URI_GCS;
		out->bucket = io_strndup(rest, blen);
		out->path = io_strdup(slash ? slash + 1 : "");
		io_free(c);
	}
	else
	{
		out->scheme = IO_URI_FILE;
		out->path = c;
	}
	if (out->path == NULL || (out->scheme != IO_URI_FILE && out->bucket == NULL))
	{
		io_uri_free(out);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

/* ----------------------------------------------------------------
 * Ranged reads, the part every HTTP backend shares (storage_int.h)
 * ----------------------------------------------------------------
 */

bool
io_range_value(uint64_t offset, uint64_t len, char *buf, size_t size)
{
	if (offset == 0 && len == 0)
		return false;
	if (len > 0)
		snprintf(buf, size, "bytes=%llu-%llu", (unsigned long long) offset,
				 (unsigned long long) (offset + len - 1));
	else
		snprintf(buf, size, "bytes=%llu-", (unsigned long long) offset);
	return true;
}

int
io_read_result(IoHttpResponse *resp, bool ranged, uint64_t offset, uint64_t len,
			   IoBuffer *out, TmsError *err)
{
	if (resp->status == 416)
	{
		/* offset at or past the end: an empty read */
		out->data = io_strdup("");
		out->len = 0;
		return out->data ? 0 : tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (resp->status != 200 && resp->status != 206)
		return 1;
	if (resp->status == 200 && ranged)
	{
		/* the server ignored the range: cut it out ourselves */
		size_t		from = offset < resp->body_len ? (size_t) offset : resp->body_len;
		size_t		n = resp->body_len - from;

		if (len > 0 && len < n)
			n = (size_t) len;
		memmove(resp->body, resp->body + from, n);
		resp->body[n] = '\0';
		resp->body_len = n;
	}
	out->data = resp->body;
	out->len = resp->body_len;
	resp->body = NULL;
	return 0;
}

int
io_head_size(const IoHttpResponse *resp, const char *header, const char *store,
			 uint64_t *size, TmsError *err)
{
	const char *v = io_http_header(resp, header, NULL);

	if (v == NULL)
		return tms_error_set_http(err, IO_ERR_PROTOCOL, resp->status,
								  "%s HEAD response has no %s", store, header);
	*size = strtoull(v, NULL, 10);
	return 0;
}

/* ----------------------------------------------------------------
 * Handle
 * ----------------------------------------------------------------
 */

/* Is k a vended Azure SAS token's key ("adls.sas-token.<account>")? */
static bool
azure_sas_key(const char *k)
{
	return k != NULL && strncmp(k, "adls.sas-token.", 15) == 0 && k[15] != '\0';
}

/* Copy the vended SAS tokens of kv[0..n) into st; false when out of memory. */
static bool
azure_vended_copy(IoStorage *st, const IoKeyValue *kv, size_t n)
{
	size_t		m = 0;

	for (size_t i = 0; i < n; i++)
		if (azure_sas_key(kv[i].key) && kv[i].value != NULL && kv[i].value[0] != '\0')
			m++;
	st->azure_vended = m > 0 ? io_calloc(m, sizeof(IoKeyValue)) : NULL;
	if (m > 0 && st->azure_vended == NULL)
		return false;
	for (size_t i = 0; i < n; i++)
		if (azure_sas_key(kv[i].key) && kv[i].value != NULL && kv[i].value[0] != '\0')
		{
			IoKeyValue *e = &st->azure_vended[st->nazure_vended++];

			e->key = io_strdup(kv[i].key);
			e->value = io_strdup(kv[i].value);
			if (e->key == NULL || e->value == NULL)
				return false;
		}
	return true;
}

/* Wipe and free the vended SAS tokens of st. */
static void
azure_vended_free(IoStorage *st)
{
	for (size_t i = 0; i < st->nazure_vended; i++)
	{
		io_free(st->azure_vended[i].key);
		io_wipe_free(st->azure_vended[i].value);
	}
	io_free(st->azure_vended);
	st->azure_vended = NULL;
	st->nazure_vended = 0;
}

/* The Azure part of io_storage_create.  0, or -1 with *err. */
static int
azure_create(IoStorage *st, const IoStorageConfig *cfg, TmsError *err)
{
	const char *e = cfg->azure_endpoint;

	if (e != NULL && e[0] != '\0')
	{
		size_t		n = strlen(e);

		if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0)
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "invalid Azure endpoint \"%.300s\": must start with http:// or https://",
								 e);
		while (n > 0 && e[n - 1] == '/')
			n--;
		if ((st->azure_endpoint = io_strndup(e, n)) == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (cfg->azure_client_id != NULL &&
		(cfg->azure_client_secret == NULL ||
		 (cfg->azure_tenant_id == NULL && cfg->azure_token_url == NULL)))
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "Azure client credentials need a client id, a client secret and a tenant id");
	st->azure_account_key = io_strdup(cfg->azure_account_key);
	st->azure_sas_token = io_strdup(cfg->azure_sas_token);
	st->azure_tenant_id = io_strdup(cfg->azure_tenant_id);
	st->azure_client_id = io_strdup(cfg->azure_client_id);
	st->azure_client_secret = io_strdup(cfg->azure_client_secret);
	st->azure_token_url = io_strdup(cfg->azure_token_url);
	st->azure_block_size = cfg->azure_block_size;
	if (!azure_vended_copy(st, cfg->azure_vended, cfg->nazure_vended) ||
		(cfg->azure_account_key && st->azure_account_key == NULL) ||
		(cfg->azure_sas_token && st->azure_sas_token == NULL) ||
		(cfg->azure_tenant_id && st->azure_tenant_id == NULL) ||
		(cfg->azure_client_id && st->azure_client_id == NULL) ||
		(cfg->azure_client_secret && st->azure_client_secret == NULL) ||
		(cfg->azure_token_url && st->azure_token_url == NULL))
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	st->azure_is_vended = st->nazure_vended > 0;
	if (st->azure_is_vended)
	{
		st->vended = true;
		if (cfg->azure_vended_expire_ms > 0 &&
			(st->expire_ms <= 0 || cfg->azure_vended_expire_ms < st->expire_ms))
			st->expire_ms = cfg->azure_vended_expire_ms;
	}
	return 0;
}


/* Default size of the parts of a GCS multipart upload. */
#define GCS_PART_BYTES_DEFAULT ((size_t) 32 * 1024 * 1024)

/*
 * The GCS settings of cfg into st: the endpoint (http:// or https://, no
 * path), the one way to authenticate (io.h) and the part size.  0, or -1
 * with *err (st is freed by the caller).
 */
static int
gcs_configure(IoStorage *st, const IoStorageConfig *cfg, TmsError *err)
{
	const char *ep = cfg->gcs_endpoint;

	if (ep != NULL && ep[0] != '\0')
	{
		size_t		n = strlen(ep);
		bool		web = strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0;
		const char *host = web ? strstr(ep, "://") + 3 : ep;
		const char *slash = strchr(host, '/');

		if (!web || host[0] == '\0' || host[0] == '/' ||
			(slash != NULL && slash[strspn(slash, "/")] != '\0'))
			return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								 "invalid GCS endpoint \"%.200s\": it must be http:// or https:// and a host, without a path",
								 ep);
		while (n > 0 && ep[n - 1] == '/')
			n--;
		if ((st->gcs_endpoint = io_strndup(ep, n)) == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	st->gcs_part_bytes = cfg->gcs_upload_part_bytes > 0 ?
		cfg->gcs_upload_part_bytes : GCS_PART_BYTES_DEFAULT;
	st->gcs_vended = cfg->gcs_credentials_vended && cfg->gcs_oauth2_token != NULL;
	st->gcs_expire_ms = st->gcs_vended ? cfg->gcs_token_expire_ms : 0;
	if (cfg->gcs_oauth2_token != NULL && strpbrk(cfg->gcs_oauth2_token, "\r\n") != NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "invalid GCS OAuth2 token: it contains a line break");
	if ((cfg->gcs_oauth2_token && (st->gcs_token = io_strdup(cfg->gcs_oauth2_token)) == NULL) ||
		(!st->gcs_vended && cfg->gcs_hmac_access_id &&
		 (st->gcs_hmac_access_id = io_strdup(cfg->gcs_hmac_access_id)) == NULL) ||
		(!st->gcs_vended && cfg->gcs_hmac_secret &&
		 (st->gcs_hmac_secret = io_strdup(cfg->gcs_hmac_secret)) == NULL))
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (!st->gcs_vended && cfg->gcs_service_account_key != NULL)
	{
		st->gcs_sa = io_gcs_sa_parse(cfg->gcs_service_account_key,
									 strlen(cfg->gcs_service_account_key), err);
		if (st->gcs_sa == NULL)
			return -1;
		if ((st->gcs_sa_key = io_strdup(cfg->gcs_service_account_key)) == NULL)
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	return 0;
}

IoStorage *
io_storage_create(const IoStorageConfig *cfg, TmsError *err)
{
	IoStorage  *st = io_calloc(1, sizeof(IoStorage));

	if (st == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	st->alloc = io_current_allocator();
	if (cfg->s3_endpoint != NULL && cfg->s3_endpoint[0] != '\0')
	{
		size_t		n = strlen(cfg->s3_endpoint);

		if (strncmp(cfg->s3_endpoint, "http://", 7) != 0 &&
			strncmp(cfg->s3_endpoint, "https://", 8) != 0)
		{
			io_free(st);
			tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
						  "invalid S3 endpoint \"%s\": must start with http:// or https://",
						  cfg->s3_endpoint);
			return NULL;
		}
		while (n > 0 && cfg->s3_endpoint[n - 1] == '/')
			n--;
		st->endpoint = io_strndup(cfg->s3_endpoint, n);
	}
	/* the region goes into a host name and into the signature's scope */
	if (cfg->s3_region != NULL && cfg->s3_region[0] != '\0' &&
		!io_sigv4_scope_valid(cfg->s3_region))
	{
		io_storage_free(st);
		tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
					  "invalid S3 region \"%.100s\": only letters, digits, '-', '_' and '.' are allowed",
					  cfg->s3_region);
		return NULL;
	}
	st->region = io_strdup(cfg->s3_region && cfg->s3_region[0] ? cfg->s3_region : "us-east-1");
	st->path_style = cfg->s3_path_style;
	st->list_page_size = cfg->s3_list_page_size > 0 && cfg->s3_list_page_size <= 1000 ?
		cfg->s3_list_page_size : 1000;
	st->access_key_id = io_strdup(cfg->s3_access_key_id);
	st->secret_access_key = io_strdup(cfg->s3_secret_access_key);
	st->session_token = io_strdup(cfg->s3_session_token);
	st->vended = cfg->s3_credentials_vended || cfg->gcs_credentials_vended;
	st->s3_vended = cfg->s3_credentials_vended;
	st->expire_ms = cfg->s3_credentials_expire_ms;
	st->received_ms = io_wall_ms();
	st->http = cfg->http;
	st->http.ca_file = NULL;
	st->http.ca_path = NULL;
	if (azure_create(st, cfg, err) != 0)
	{
		io_storage_free(st);
		return NULL;
	}
	if (cfg->nlocal_roots > 0)
	{
		size_t		i;

		st->local_roots = io_calloc(cfg->nlocal_roots, sizeof(char *));
		if (st->local_roots == NULL)
		{
			io_storage_free(st);
			tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			return NULL;
		}
		for (i = 0; i < cfg->nlocal_roots; i++)
		{
			const char *r = cfg->local_roots[i];

			if (r == NULL || r[0] != '/' ||
				io_location_canonical(r, NULL, &st->local_roots[i], err) != 0)
			{
				io_storage_free(st);
				if (r == NULL || r[0] != '/' || err->code == IO_ERR_INVALID_ARGUMENT)
					tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
								  "invalid allowed location \"%.300s\": it must be an absolute directory without \".\" or \"..\" segments",
								  r ? r : "");
				return NULL;
			}
			st->nlocal_roots++;
		}
	}
	if (gcs_configure(st, cfg, err) != 0)
	{
		io_storage_free(st);
		return NULL;
	}
	if (st->region == NULL ||
		(cfg->s3_access_key_id && st->access_key_id == NULL) ||
		(cfg->s3_secret_access_key && st->secret_access_key == NULL) ||
		(cfg->s3_session_token && st->session_token == NULL))
	{
		io_storage_free(st);
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	return st;
}

void
io_storage_config_get(const IoStorage *st, IoStorageConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->s3_endpoint = st->endpoint;
	cfg->s3_region = st->region;
	cfg->s3_path_style = st->path_style;
	cfg->s3_access_key_id = st->access_key_id;
	cfg->s3_secret_access_key = st->secret_access_key;
	cfg->s3_session_token = st->session_token;
	cfg->s3_list_page_size = st->list_page_size;
	cfg->local_roots = (const char *const *) st->local_roots;
	cfg->nlocal_roots = st->nlocal_roots;
	cfg->http = st->http;
	cfg->azure_endpoint = st->azure_endpoint;
	cfg->azure_account_key = st->azure_account_key;
	cfg->azure_sas_token = st->azure_sas_token;
	cfg->azure_tenant_id = st->azure_tenant_id;
	cfg->azure_client_id = st->azure_client_id;
	cfg->azure_client_secret = st->azure_client_secret;
	cfg->azure_token_url = st->azure_token_url;
	cfg->azure_vended = st->azure_vended;
	cfg->nazure_vended = st->nazure_vended;
	cfg->azure_block_size = st->azure_block_size;
	cfg->gcs_endpoint = st->gcs_endpoint;
	cfg->gcs_hmac_access_id = st->gcs_hmac_access_id;
	cfg->gcs_hmac_secret = st->gcs_hmac_secret;
	cfg->gcs_oauth2_token = st->gcs_token;
	cfg->gcs_service_account_key = st->gcs_sa_key;
	cfg->gcs_credentials_vended = st->gcs_vended;
	cfg->gcs_token_expire_ms = st->gcs_expire_ms;
	cfg->gcs_upload_part_bytes = st->gcs_part_bytes;
}

/* Free the handle; secrets are wiped first. */
void
io_storage_free(IoStorage *st)
{
	if (st == NULL)
		return;
	if (st->secret_access_key)
		memset(st->secret_access_key, 0, strlen(st->secret_access_key));
	if (st->session_token)
		memset(st->session_token, 0, strlen(st->session_token));
	if (st->refresh_free != NULL)
		st->refresh_free(st->refresh_arg);
	io_free(st->azure_endpoint);
	io_wipe_free(st->azure_account_key);
	io_wipe_free(st->azure_sas_token);
	io_free(st->azure_tenant_id);
	io_free(st->azure_client_id);
	io_wipe_free(st->azure_client_secret);
	io_free(st->azure_token_url);
	io_oauth2_forget(&st->azure_token);
	azure_vended_free(st);
	io_free(st->endpoint);
	io_free(st->region);
	io_free(st->access_key_id);
	io_free(st->secret_access_key);
	io_free(st->session_token);
	io_free(st->gcs_endpoint);
	io_free(st->gcs_hmac_access_id);
	io_wipe_free(st->gcs_hmac_secret);
	io_wipe_free(st->gcs_token);
	io_wipe_free(st->gcs_sa_key);
	io_gcs_sa_free(st->gcs_sa);
	io_oauth2_forget(&st->gcs_sa_token);
	for (size_t i = 0; i < st->nlocal_roots; i++)
		io_free(st->local_roots[i]);
	io_free(st->local_roots);
	io_free(st);
}

/* See io_int.h. */
const IoHttpOptions *
io_storage_http(const IoStorage *st)
{
	return &st->http;
}

/* See io.h. */
int
io_storage_target(IoStorage *st, const char *uri, char *buf, size_t size)
{
	IoParsedUri u;
	TmsError	err;
	int			n;

	if (io_uri_parse(uri, &u, &err) != 0)
		return -1;
	if (u.scheme == IO_URI_AZURE)
		n = io_azure_target(st, &u, buf, size) == 0 ? 0 : -1;
	else if (u.scheme == IO_URI_GCS)
		n = io_gcs_target(st, u.bucket, buf, size) == 0 ? 0 : -1;
	else if (u.scheme != IO_URI_S3)
		n = -1;
	else if (st->endpoint != NULL)
		n = snprintf(buf, size, "%s/%s", st->endpoint, u.bucket);
	else
		n = snprintf(buf, size, "https://s3.%s.amazonaws.com/%s", st->region, u.bucket);
	io_uri_free(&u);
	return n < 0 || (size_t) n >= size ? -1 : 0;
}

void
io_buffer_free(IoBuffer *buf)
{
	if (buf == NULL)
		return;
	io_free(buf->data);
	buf->data = NULL;
	buf->len = 0;
}

/*
 * Apply vended properties (see io.h).  Two passes: first find out whether
 * the catalog vended a complete pair of credentials, then apply.
 */
void
io_storage_config_apply(IoStorageConfig *cfg, const IoKeyValue *kv, size_t n,
						bool allow_vended_endpoint)
{
	const char *key_id = NULL,
			   *secret = NULL,
			   *token = NULL,
			   *endpoint = NULL,
			   *expires = NULL,
			   *gcs_token = NULL,
			   *gcs_expires = NULL,
			   *gcs_host = NULL;
	size_t		i;

	for (i = 0; i < n; i++)
	{
		const char *k = kv[i].key;
		const char *v = kv[i].value;

		if (k == NULL || v == NULL)
			continue;
		if (azure_sas_key(k) && v[0] != '\0')
		{
			/* Azure: the storage picks the tokens out of kv */
			cfg->azure_vended = kv;
			cfg->nazure_vended = n;
		}
		else if (strncmp(k, "adls.sas-token-expires-at-ms.", 29) == 0)
		{
			int64_t		e = strtoll(v, NULL, 10);

			if (e > 0 && (cfg->azure_vended_expire_ms <= 0 || e < cfg->azure_vended_expire_ms))
				cfg->azure_vended_expire_ms = e;
		}
		else if (strcmp(k, "s3.access-key-id") == 0)
			key_id = v;
		else if (strcmp(k, "s3.secret-access-key") == 0)
			secret = v;
		else if (strcmp(k, "s3.session-token") == 0)
			token = v;
		else if (strcmp(k, "s3.endpoint") == 0)
			endpoint = v;
		else if (strcmp(k, "s3.session-token-expires-at-ms") == 0)
			expires = v;
		else if ((strcmp(k, "client.region") == 0 || strcmp(k, "s3.region") == 0) &&
				 io_sigv4_scope_valid(v))
			cfg->s3_region = v;
		else if (strcmp(k, "s3.path-style-access") == 0)
			cfg->s3_path_style = strcasecmp(v, "true") == 0 ? 1 : 0;
		else if (strcmp(k, "gcs.oauth2.token") == 0)
			gcs_token = v;
		else if (strcmp(k, "gcs.oauth2.token-expires-at") == 0)
			gcs_expires = v;
		else if (strcmp(k, "gcs.service.host") == 0)
			gcs_host = v;
	}
	if (gcs_token != NULL && gcs_token[0] != '\0')
	{
		/* replaces every GCS credential of the mapping */
		cfg->gcs_oauth2_token = gcs_token;
		cfg->gcs_hmac_access_id = NULL;
		cfg->gcs_hmac_secret = NULL;
		cfg->gcs_service_account_key = NULL;
		cfg->gcs_credentials_vended = true;
		cfg->gcs_token_expire_ms = gcs_expires ? strtoll(gcs_expires, NULL, 10) : 0;
		if (cfg->gcs_token_expire_ms < 0)
			cfg->gcs_token_expire_ms = 0;
		if (gcs_host != NULL && gcs_host[0] != '\0' && allow_vended_endpoint)
			cfg->gcs_endpoint = gcs_host;
	}
	if (key_id == NULL || key_id[0] == '\0' || secret == NULL || secret[0] == '\0')
		return;					/* the mapping's credentials, the server's
								 * endpoint */
	cfg->s3_access_key_id = key_id;
	cfg->s3_secret_access_key = secret;
	/* never pair the vended key with the mapping's session token */
	cfg->s3_session_token = token != NULL && token[0] != '\0' ? token : NULL;
	cfg->s3_credentials_vended = true;
	cfg->s3_credentials_expire_ms = expires ? strtoll(expires, NULL, 10) : 0;
	if (cfg->s3_credentials_expire_ms < 0)
		cfg->s3_credentials_expire_ms = 0;
	if (endpoint != NULL && endpoint[0] != '\0' && allow_vended_endpoint)
		cfg->s3_endpoint = endpoint;
}

/* ----------------------------------------------------------------
 * Vended credentials that expire (io.h, io_storage_set_refresh)
 * ----------------------------------------------------------------
 */

/* Credentials are refreshed this long before they expire, at most. */
#define REFRESH_MARGIN_MAX_MS	(5 * 60 * 1000)

/* See io.h. */
void
io_storage_set_refresh(IoStorage *st, IoRefreshFn fn, void *arg, void (*free_arg) (void *))
{
	if (st->refresh_free != NULL)
		st->refresh_free(st->refresh_arg);
	st->refresh = st->vended ? fn : NULL;
	st->refresh_arg = st->vended ? arg : NULL;
	st->refresh_free = st->vended ? free_arg : NULL;
	if (!st->vended && free_arg != NULL)
		free_arg(arg);
}

/* See io.h. */
bool
io_storage_refreshable(const IoStorage *st)
{
	return st->refresh != NULL;
}

/* See io.h. */
int
io_storage_refresh_count(const IoStorage *st)
{
	return st->refreshes;
}

/* See io.h. */
int64_t
io_storage_credentials_expire_ms(const IoStorage *st)
{
	/* the earlier of the S3 keys' and the GCS token's */
	if (st->gcs_vended && st->gcs_expire_ms > 0 &&
		(st->expire_ms <= 0 || st->gcs_expire_ms < st->expire_ms))
		return st->gcs_expire_ms;
	return st->expire_ms;
}

/* See io.h. */
int
io_storage_refresh(IoStorage *st, TmsError *err)
{
	IoTableCredentials c;
	IoStorageConfig cfg;
	char	   *key_id = NULL,
			   *secret = NULL,
			   *token = NULL,
			   *gcs_token = NULL;
	IoStorage	az;
	bool		az_ok;
	const IoAllocator *prev;

	if (st->refresh == NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
							 "the storage credentials cannot be refreshed");
	memset(&c, 0, sizeof(c));
	if (st->refresh(st->refresh_arg, &c, err) != 0)
		return -1;
	memset(&cfg, 0, sizeof(cfg));
	io_storage_config_apply(&cfg, c.config, c.nconfig, false);
	memset(&az, 0, sizeof(az));
	if (st->gcs_vended && (!cfg.gcs_credentials_vended || cfg.gcs_oauth2_token == NULL))
	{
		io_table_credentials_free(&c);
		return tms_error_set(err, IO_ERR_PROTOCOL,
							 "the catalog vended no GCS token (gcs.oauth2.token) to refresh the storage credentials with");
	}
	if ((st->s3_vended && !cfg.s3_credentials_vended) ||
		(st->azure_is_vended && cfg.nazure_vended == 0))
	{
		io_table_credentials_free(&c);
		return tms_error_set(err, IO_ERR_PROTOCOL,
							 "the catalog vended no storage credentials (an access key id and a secret, or a SAS token) to refresh them with");
	}
	prev = io_use_allocator(st->alloc); /* the storage keeps them */
	if (st->s3_vended)
	{
		key_id = io_strdup(cfg.s3_access_key_id);
		secret = io_strdup(cfg.s3_secret_access_key);
		token = cfg.s3_session_token ? io_strdup(cfg.s3_session_token) : NULL;
	}
	if (st->gcs_vended)
		gcs_token = io_strdup(cfg.gcs_oauth2_token);
	az_ok = !st->azure_is_vended ||
		azure_vended_copy(&az, cfg.azure_vended, cfg.nazure_vended);
	io_use_allocator(prev);
	if ((st->s3_vended && (key_id == NULL || secret == NULL ||
						   (cfg.s3_session_token && token == NULL))) || !az_ok ||
		(st->gcs_vended && (gcs_token == NULL || strpbrk(gcs_token, "\r\n") != NULL)))
	{
		bool		unusable = st->gcs_vended && gcs_token != NULL &&
		strpbrk(gcs_token, "\r\n") != NULL;

		io_free(key_id);
		io_wipe_free(secret);
		io_wipe_free(token);
		io_wipe_free(gcs_token);
		azure_vended_free(&az);
		io_table_credentials_free(&c);
		if (unusable)
			return tms_error_set(err, IO_ERR_PROTOCOL,
								 "the catalog vended an unusable GCS token");
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	if (st->s3_vended)
	{
		io_free(st->access_key_id);
		io_wipe_free(st->secret_access_key);
		io_wipe_free(st->session_token);
		st->access_key_id = key_id;
		st->secret_access_key = secret;
		st->session_token = token;
		st->expire_ms = cfg.s3_credentials_expire_ms;
	}
	if (st->azure_is_vended)
	{
		azure_vended_free(st);
		st->azure_vended = az.azure_vended;
		st->nazure_vended = az.nazure_vended;
		if (!st->s3_vended || (cfg.azure_vended_expire_ms > 0 &&
							   (st->expire_ms <= 0 || cfg.azure_vended_expire_ms < st->expire_ms)))
			st->expire_ms = cfg.azure_vended_expire_ms;
	}
	if (st->gcs_vended)
	{
		/* io_storage_credentials_expire_ms takes the earlier of both */
		io_wipe_free(st->gcs_token);
		st->gcs_token = gcs_token;
		st->gcs_expire_ms = cfg.gcs_token_expire_ms;
	}
	st->received_ms = io_wall_ms();
	st->refreshes++;
	io_table_credentials_free(&c);
	return 0;
}

/* See io_int.h. */
void
io_storage_refresh_if_due(IoStorage *st)
{
	int64_t		now,
				margin;
	TmsError	err;

	int64_t		expire = io_storage_credentials_expire_ms(st);

	if (st->refresh == NULL || expire <= 0)
		return;
	now = io_wall_ms();
	margin = (expire - st->received_ms) / 4;
	if (margin > REFRESH_MARGIN_MAX_MS)
		margin = REFRESH_MARGIN_MAX_MS;
	if (margin < 0)
		margin = 0;
	if (now >= expire - margin)
		(void) io_storage_refresh(st, &err);
}

/* See io_int.h. */
bool
io_s3_credentials_refused(long status, const char *s3code)
{
	return status == 403 ||
		(s3code != NULL && (strcmp(s3code, "ExpiredToken") == 0 ||
							strcmp(s3code, "InvalidToken") == 0 ||
							strcmp(s3code, "TokenRefreshRequired") == 0));
}


/* ----------------------------------------------------------------
 * Entry points
 * ----------------------------------------------------------------
 */

int
io_storage_read(IoStorage *st, const char *uri, uint64_t offset,
				uint64_t len, IoBuffer *out, TmsError *err)
{
	IoParsedUri u;
	IoHttpOptions opt;
	int			rc;

	out->data = NULL;
	out->len = 0;
	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	io_http_options_resolve(&st->http, &opt);
	if (u.scheme == IO_URI_FILE)
		rc = io_local_read(st, uri, u.path, offset, len, out, opt.max_response_bytes, err);
	else if (u.scheme == IO_URI_AZURE)
		rc = io_azure_read(st, &u, offset, len, out, err);
	else if (u.scheme == IO_URI_GCS)
		rc = io_gcs_read(st, &u, offset, len, out, err);
	else
		rc = io_s3_read(st, &u, offset, len, out, err);
	io_uri_free(&u);
	return rc;
}

int
io_storage_read_into(IoStorage *st, const char *uri, uint64_t offset,
					 void *buf, size_t len, size_t *got, uint64_t *size,
					 TmsError *err)
{
	IoParsedUri u;
	int			rc = 0;

	*got = 0;
	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = io_local_read_into(st, uri, u.path, offset, buf, len, got, size, err) == 0 ? 1 : -1;
	io_uri_free(&u);
	return rc;
}

int
io_storage_size(IoStorage *st, const char *uri, uint64_t *size, TmsError *err)
{
	IoParsedUri u;
	int			rc = 0;

	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = io_local_size(st, uri, u.path, size, err);
	else if (u.scheme == IO_URI_AZURE)
		rc = io_azure_size(st, &u, size, err);
	else if (u.scheme == IO_URI_GCS)
		rc = io_gcs_size(st, &u, size, err);
	else
		rc = io_s3_size(st, &u, size, err);
	io_uri_free(&u);
	return rc;
}

int
io_storage_write(IoStorage *st, const char *uri, const void *data, size_t len,
				 TmsError *err)
{
	IoParsedUri u;
	int			rc;

	if (io_uri_parse(uri, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = io_local_write(st, uri, u.path, data, len, err);
	else if (u.scheme == IO_URI_AZURE)
		rc = io_azure_write(st, &u, data, len, err);
	else if (u.scheme == IO_URI_GCS)
		rc = io_gcs_write(st, &u, data, len, err);
	else if (u.path[0] == '\0')
		rc = tms_error_set(err, IO_ERR_INVALID_ARGUMENT,
						   "invalid S3 location \"%s\": missing key", uri);
	else
	{
		IoHttpResponse resp;
		IoHeader	h = {"content-type", "application/octet-stream"};

		rc = io_s3_request(st, "PUT", u.bucket, u.path, NULL, &h, 1, data ? data : "", len,
						   &resp, err);
		if (rc == 0 && resp.status != 200 && resp.status != 201 && resp.status != 204)
			rc = io_s3_status_error(&resp, "write", u.bucket, u.path, NULL, 0, err);
		io_http_response_free(&resp);
	}
	io_uri_free(&u);
	return rc;
}

int
io_storage_list(IoStorage *st, const char *prefix, IoListFn fn, void *arg,
				TmsError *err)
{
	IoParsedUri u;
	int			rc;

	if (io_uri_parse(prefix, &u, err) != 0)
		return -1;
	if (u.scheme == IO_URI_FILE)
		rc = io_local_list(st, prefix, u.path, fn, arg, err);
	else if (u.scheme == IO_URI_AZURE)
		rc = io_azure_list(st, &u, prefix, fn, arg, err);
	else if (u.scheme == IO_URI_GCS)
		rc = io_gcs_list(st, &u, fn, arg, err);
	else
		rc = io_s3_list(st, &u, prefix, fn, arg, err);
	io_uri_free(&u);
	return rc;
}

/* A local file of one io_storage_delete call: its path and its index. */
typedef struct LocalEntry
{
	const char *path;
	size_t		i;
} LocalEntry;

/* By directory, then by name: the files of one directory stand together. */
static int
local_entry_cmp(const void *a, const void *b)
{
	const char *pa = ((const LocalEntry *) a)->path;
	const char *pb = ((const LocalEntry *) b)->path;
	const char *sa = strrchr(pa, '/');
	const char *sb = strrchr(pb, '/');
	size_t		la = sa ? (size_t) (sa - pa) : 0;
	size_t		lb = sb ? (size_t) (sb - pb) : 0;
	int			c = memcmp(pa, pb, la < lb ? la : lb);

	if (c != 0)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(pa + la, pb + lb);
}

int
io_storage_delete(IoStorage *st, const char *const *uris, size_t n,
				  IoDeleteResult *results, TmsError *err)
{
	IoParsedUri *parsed;
	size_t	   *idx;
	bool	   *taken;
	LocalEntry *locals;
	size_t		nlocal = 0;
	LocalDirCache dircache = {NULL, -1};
	size_t		i;
	int			rc = 0;

	if (n == 0)
		return 0;
	parsed = io_calloc(n, sizeof(IoParsedUri));
	idx = io_calloc(n, sizeof(size_t));
	taken = io_calloc(n, sizeof(bool));
	locals = io_calloc(n, sizeof(LocalEntry));
	if (parsed == NULL || idx == NULL || taken == NULL || locals == NULL)
	{
		io_free(parsed);
		io_free(idx);
		io_free(taken);
		io_free(locals);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (i = 0; i < n; i++)
	{
		TmsError	perr;

		memset(&results[i], 0, sizeof(IoDeleteResult));
		if (io_uri_parse(uris[i], &parsed[i], &perr) != 0)
		{
			taken[i] = true;
			snprintf(results[i].code, sizeof(results[i].code), "InvalidLocation");
			snprintf(results[i].message, sizeof(results[i].message), "%.255s", perr.message);
			continue;
		}
		if (parsed[i].scheme == IO_URI_FILE)
		{
			taken[i] = true;
			locals[nlocal].path = parsed[i].path;
			locals[nlocal++].i = i;
		}
		else if (parsed[i].path[0] == '\0')
		{
			taken[i] = true;
			snprintf(results[i].code, sizeof(results[i].code), "InvalidLocation");
			snprintf(results[i].message, sizeof(results[i].message), "missing key");
		}
	}
	/* local files by directory, so that each directory is walked once */
	qsort(locals, nlocal, sizeof(LocalEntry), local_entry_cmp);
	for (i = 0; i < nlocal; i++)
		io_local_delete(st, uris[locals[i].i], locals[i].path, &dircache, &results[locals[i].i]);
	io_local_dir_cache_end(&dircache);

	/*
	 * Batches of objects of the same bucket (container and account on Azure),
	 * in input order, of up to io_storage_scheme_delete_max
	 */
	for (i = 0; i < n && rc == 0; i++)
	{
		size_t		nb = 0,
					j;
		bool		azure = parsed[i].scheme == IO_URI_AZURE;
		bool		gcs = parsed[i].scheme == IO_URI_GCS;
		size_t		max = io_storage_scheme_delete_max(st, parsed[i].scheme);

		if (taken[i])
			continue;
		for (j = i; j < n && nb < max; j++)
			if (!taken[j] && parsed[j].scheme == parsed[i].scheme &&
				strcmp(parsed[j].bucket, parsed[i].bucket) == 0 &&
				(!azure || strcmp(parsed[j].account, parsed[i].account) == 0))
			{
				idx[nb++] = j;
				taken[j] = true;
			}
		if (azure)
			rc = io_azure_delete_batch(st, parsed, idx, nb, results, err);
		else if (gcs)
			rc = io_gcs_delete_batch(st, parsed[i].bucket, parsed, idx, nb, results, err);
		else
			rc = io_s3_delete_batch(st, parsed[i].bucket, parsed, idx, nb, results, err);
	}
	for (i = 0; i < n; i++)
		io_uri_free(&parsed[i]);
	io_free(parsed);
	io_free(idx);
	io_free(taken);
	io_free(locals);
	return rc;
}

/* See storage_int.h. */
int64_t
io_rfc3339_time(const char *s)
{
	struct tm	tm;

	if (s == NULL)
		return 0;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t) timegm(&tm);
}

/* See storage_int.h. */
size_t
io_storage_scheme_delete_max(const IoStorage *st, IoUriScheme scheme)
{
	switch (scheme)
	{
		case IO_URI_S3:
			return IO_S3_DELETE_MAX_KEYS;
		case IO_URI_AZURE:
			return IO_AZURE_DELETE_MAX_KEYS;
		case IO_URI_GCS:
			return st != NULL && IO_GCS_HMAC(st) ? 1 : IO_GCS_DELETE_MAX_KEYS;
		case IO_URI_FILE:
			break;
	}
	return 0;
}

/*
 * The scheme of a canonical object-store location, and where its bucket
 * part ends; false for anything else.
 */
static bool
canonical_bucket(const char *canonical, IoUriScheme *scheme, size_t *prefix_len)
{
	const char *slash;

	if (strncmp(canonical, "s3://", 5) == 0 || strncmp(canonical, "gs://", 5) == 0)
		slash = strchr(canonical + 5, '/');
	else if (strncmp(canonical, "abfs://", 7) == 0)
		slash = strchr(canonical + 7, '/');
	else
		return false;
	*scheme = canonical[0] == 'a' ? IO_URI_AZURE : canonical[0] == 'g' ? IO_URI_GCS : IO_URI_S3;
	*prefix_len = slash ? (size_t) (slash - canonical) + 1 : strlen(canonical);
	return true;
}

/* See io.h. */
size_t
io_delete_group(const char *canonical, size_t *prefix_len)
{
	IoUriScheme scheme;

	*prefix_len = 0;
	if (!canonical_bucket(canonical, &scheme, prefix_len))
		return 0;
	return io_storage_scheme_delete_max(NULL, scheme);
}

/* See io.h. */
int
io_storage_delete_max_keys(const IoStorage *st, const char *uri)
{
	IoUriScheme scheme;
	size_t		len;

	if (!canonical_bucket(uri, &scheme, &len))
		return 0;
	return (int) io_storage_scheme_delete_max(st, scheme);
}
