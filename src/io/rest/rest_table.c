/*-------------------------------------------------------------------------
 *
 * rest_table.c
 *		One table of an Iceberg REST catalog: loadTable with If-None-Match
 *		and a per-handle cache (304: the cached copy), dropTable,
 *		renameTable, loadCredentials (a table load where the catalog does
 *		not offer it), and commit where 409 means "retry from fresh
 *		metadata" and 500/502/503/504 or a lost response mean "state
 *		unknown"; the readers of LoadTableResult and LoadCredentialsResponse
 *		bodies.
 *
 * Rules: a commit is never assumed failed when its outcome is unknown,
 * and is retried only when the catalog advertised an
 * idempotency-key-lifetime in /v1/config: then each commit carries one
 * UUIDv7 Idempotency-Key (REST spec, ConfigResponse), and after a
 * transport error or a 500/502/503/504 the same request with the same
 * key is sent again (bounded, with backoff, only while the key is still
 * remembered), since the catalog answers a key it has seen with the
 * first outcome instead of applying it twice; without the advertisement
 * a commit is sent exactly once.  The loaded metadata is re-serialised into a capped
 * plain-malloc buffer (max_json_bytes), never through json_dumps (whose
 * memory belongs to jansson's counting allocator); vended credentials
 * found in config are wiped when freed.
 *
 * src/io/rest/rest_table.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/rest/rest_int.h"

/* Tables whose last load a handle keeps (with its ETag). */
#define TABLE_CACHE_MAX			256

/* See io.h. */
void
io_loaded_table_free(IoLoadedTable *t)
{
	if (t == NULL)
		return;
	io_free(t->metadata_location);
	io_free(t->metadata_json);
	io_free(t->etag);
	io_rest_kv_free(t->config, t->nconfig);
	memset(t, 0, sizeof(*t));
}

/* Deep copy of a loaded table. */
static int
loaded_copy(const IoLoadedTable *src, IoLoadedTable *dst)
{
	size_t		i;

	memset(dst, 0, sizeof(*dst));
	dst->not_modified = src->not_modified;
	if ((src->metadata_location && !(dst->metadata_location = io_strdup(src->metadata_location))) ||
		(src->metadata_json && !(dst->metadata_json = io_strdup(src->metadata_json))) ||
		(src->etag && !(dst->etag = io_strdup(src->etag))))
		goto oom;
	if (src->nconfig > 0)
	{
		dst->config = io_calloc(src->nconfig, sizeof(IoKeyValue));
		if (dst->config == NULL)
			goto oom;
		for (i = 0; i < src->nconfig; i++)
		{
			dst->config[i].key = io_strdup(src->config[i].key);
			dst->config[i].value = io_strdup(src->config[i].value);
			dst->nconfig++;
			if (!dst->config[i].key || !dst->config[i].value)
				goto oom;
		}
	}
	return 0;
oom:
	io_loaded_table_free(dst);
	return -1;
}

/* Free one cache entry and what it holds. */
static void
cache_entry_free(TableCacheEntry *e)
{
	io_free(e->ns);
	io_free(e->name);
	io_free(e->etag);
	io_loaded_table_free(&e->table);
	io_free(e);
}

/* See io.h. */
void
io_catalog_forget(IoCatalog *cat, const char *ns, const char *table)
{
	TableCacheEntry **pp = &cat->cache;

	while (*pp != NULL)
	{
		TableCacheEntry *e = *pp;

		if (ns == NULL || (strcmp(e->ns, ns) == 0 &&
						   (table == NULL || strcmp(e->name, table) == 0)))
		{
			*pp = e->next;
			cache_entry_free(e);
			cat->ncache--;
		}
		else
			pp = &e->next;
	}
}

/* See rest_int.h. */
void
io_rest_table_path(IoCatalog *cat, IoStrBuf *sb, const char *ns, const char *table)
{
	io_rest_v1_path(cat, sb);
	io_rest_append_ns(sb, ns);
	io_sb_puts(sb, "/tables/");
	io_rest_append_encoded(sb, table);
}

/* Add or replace key=value in a loaded table's config. */
static int
config_put(IoLoadedTable *t, const char *key, const char *value)
{
	return io_rest_kv_put(&t->config, &t->nconfig, key, value);
}

/* Where json_dump_callback writes: a plain-malloc buffer with a cap. */
typedef struct DumpBuf
{
	IoStrBuf	sb;
	size_t		cap;
	bool		over;
} DumpBuf;

/* json_dump_callback's sink: append, or fail past the cap. */
static int
dump_cb(const char *buffer, size_t size, void *data)
{
	DumpBuf    *d = data;

	if (d->sb.len + size > d->cap)
	{
		d->over = true;
		return -1;
	}
	io_sb_append(&d->sb, buffer, size);
	return d->sb.oom ? -1 : 0;
}

/*
 * The canonical form of a location prefix (io_location_canonical, which
 * takes whole locations only: the prefix with one character appended, and
 * that character taken off again), so that "abfss://c@a.dfs.core.windows.net/"
 * and "s3a://b/wh" cover the canonical "abfs://c@a.dfs.core.windows.net/x"
 * and "s3://b/wh/x".  NULL when it has none (or out of memory).
 */
static char *
canonical_prefix(const char *prefix)
{
	size_t		n = strlen(prefix);
	char	   *probe = io_malloc(n + 2);
	char	   *out = NULL;
	TmsError	err;

	if (probe == NULL)
		return NULL;
	memcpy(probe, prefix, n);
	probe[n] = 'x';
	probe[n + 1] = '\0';
	if (io_location_canonical(probe, NULL, &out, &err) != 0)
		out = NULL;
	else if (out[0] != '\0' && out[strlen(out) - 1] == 'x')
		out[strlen(out) - 1] = '\0';
	else
	{
		io_free(out);
		out = NULL;
	}
	io_free(probe);
	return out;
}

/*
 * The entry of a storage-credentials array (may be anything) whose prefix
 * is the longest prefix of location, as written or in canonical form (a
 * catalog vends the prefix as the table's location is written, abfss://
 * or s3a://, and tms may ask with the canonical location), the lengths
 * compared in canonical form; with location NULL, the only entry.  NULL
 * when none.
 */
static json_t *
storage_credential(json_t *creds, const char *location)
{
	size_t		i,
				best_len = 0;
	json_t	   *c,
			   *best = NULL;
	char	   *canon = NULL;
	TmsError	err;

	if (!json_is_array(creds))
		return NULL;
	if (location == NULL)
		return json_array_size(creds) == 1 ? json_array_get(creds, 0) : NULL;
	if (io_location_canonical(location, NULL, &canon, &err) != 0)
		canon = NULL;
	json_array_foreach(creds, i, c)
	{
		const char *prefix = json_string_value(json_object_get(c, "prefix"));
		size_t		len;

		char	   *cp;
		bool		match;

		if (prefix == NULL)
			continue;
		cp = canon != NULL ? canonical_prefix(prefix) : NULL;
		match = io_str_has_prefix(location, prefix) ||
			(cp != NULL && io_str_has_prefix(canon, cp));

		/*
		 * lengths compared in one form: "s3a://b/wh/" is shorter than
		 * "s3://b/wh/t"
		 */
		len = cp != NULL ? strlen(cp) : strlen(prefix);
		io_free(cp);
		if (!match)
			continue;
		if (best == NULL || len > best_len)
		{
			best = c;
			best_len = len;
		}
	}
	io_free(canon);
	return best;
}

/*
 * Put the config of the storage credential of location (if any) on top of
 * *kv.  0, or -1 out of memory.
 */
static int
put_storage_credential(json_t *creds, const char *location, IoKeyValue **kv, size_t *n)
{
	json_t	   *best = storage_credential(creds, location);
	const char *k;
	json_t	   *v;

	if (best == NULL || !json_is_object(json_object_get(best, "config")))
		return 0;
	json_object_foreach(json_object_get(best, "config"), k, v)
	{
		if (json_is_string(v) && io_rest_kv_put(kv, n, k, json_string_value(v)) != 0)
			return -1;
	}
	return 0;
}

/*
 * Fill a LoadTableResult into *t: metadata-location, metadata
 * (re-serialised), config, then the storage-credentials entry whose
 * prefix is the longest prefix of the table location.
 */
static int
parse_load_result(json_t *doc, IoLoadedTable *t, const char *what,
				  size_t max_json, TmsError *err)
{
	json_t	   *md = json_object_get(doc, "metadata");
	json_t	   *loc = json_object_get(doc, "metadata-location");
	json_t	   *cfg = json_object_get(doc, "config");
	json_t	   *creds = json_object_get(doc, "storage-credentials");
	const char *k;
	json_t	   *v;
	const char *table_location;

	if (!json_is_object(md))
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed %s response: \"metadata\" is not an object", what);
	if (loc != NULL && !json_is_null(loc) && !json_is_string(loc))
		return tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								  "malformed %s response: \"metadata-location\" is not a string", what);
	if (json_is_string(loc))
	{
		t->metadata_location = io_strdup(json_string_value(loc));
		if (t->metadata_location == NULL)
			goto oom;
	}
	{
		DumpBuf		d;

		io_sb_init(&d.sb);
		d.cap = max_json > 0 ? max_json : IO_DEFAULT_MAX_JSON_BYTES;
		d.over = false;
		if (json_dump_callback(md, dump_cb, &d, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
			d.sb.oom)
		{
			io_sb_free(&d.sb);
			if (d.over)
				return tms_error_set(err, IO_ERR_TOO_LARGE,
									 "the %s metadata is larger than max_json_bytes (%zu bytes)",
									 what, d.cap);
			goto oom;
		}
		t->metadata_json = io_sb_steal(&d.sb);
	}
	if (t->metadata_json == NULL)
		goto oom;
	if (json_is_object(cfg))
	{
		json_object_foreach(cfg, k, v)
		{
			if (json_is_string(v) && config_put(t, k, json_string_value(v)) != 0)
				goto oom;
		}
	}
	table_location = json_string_value(json_object_get(md, "location"));
	if (table_location != NULL &&
		put_storage_credential(creds, table_location, &t->config, &t->nconfig) != 0)
		goto oom;
	return 0;
oom:
	return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
}

/* See rest_int.h (the reader of LoadTableResult bodies). */
int
io_rest_read_load_result(const char *body, size_t len, size_t max_json,
						 const char *what, IoLoadedTable *out, TmsError *err)
{
	json_t	   *doc = io_rest_parse_body(body, len, what, max_json, err);
	int			rc;

	if (doc == NULL)
	{
		io_loaded_table_free(out);
		return -1;
	}
	rc = parse_load_result(doc, out, what, max_json, err);
	json_decref(doc);
	if (rc != 0)
		io_loaded_table_free(out);
	return rc;
}

static TableCacheEntry *
cache_find(IoCatalog *cat, const char *ns, const char *table)
{
	TableCacheEntry *e;

	for (e = cat->cache; e != NULL; e = e->next)
		if (strcmp(e->ns, ns) == 0 && strcmp(e->name, table) == 0)
			return e;
	return NULL;
}

/* Remember a loaded table with its ETag (drops the oldest beyond the cap). */
static void
cache_put(IoCatalog *cat, const char *ns, const char *table,
		  const IoLoadedTable *t)
{
	TableCacheEntry *e;

	io_catalog_forget(cat, ns, table);
	if (t->etag == NULL)
		return;
	e = io_calloc(1, sizeof(TableCacheEntry));
	if (e == NULL)
		return;
	e->ns = io_strdup(ns);
	e->name = io_strdup(table);
	e->etag = io_strdup(t->etag);
	if (e->ns == NULL || e->name == NULL || e->etag == NULL ||
		loaded_copy(t, &e->table) != 0)
	{
		cache_entry_free(e);
		return;
	}
	e->next = cat->cache;
	cat->cache = e;
	cat->ncache++;
	if (cat->ncache > TABLE_CACHE_MAX)
	{
		TableCacheEntry **pp = &cat->cache;

		while ((*pp)->next != NULL)
			pp = &(*pp)->next;
		cache_entry_free(*pp);
		*pp = NULL;
		cat->ncache--;
	}
}

/* cache_put in the catalog's own allocator: the entry outlives the call. */
static void
cache_store(IoCatalog *cat, const char *ns, const char *table,
			const IoLoadedTable *t)
{
	const IoAllocator *prev = io_use_allocator(cat->alloc);

	cache_put(cat, ns, table, t);
	io_use_allocator(prev);
}

/* See io.h. */
int
io_catalog_load_table(IoCatalog *cat, const char *ns, const char *table,
					  IoLoadedTable *out, TmsError *err)
{
	return io_catalog_load_table_etag(cat, ns, table, NULL, out, err);
}

/* See rest_int.h. */
int
io_rest_load_request(IoCatalog *cat, const char *ns, const char *table,
					 const char *known_etag, char **path, char **inm, TmsError *err)
{
	IoStrBuf	p;
	IoStrBuf	h;
	TableCacheEntry *cached;

	*path = *inm = NULL;
	if (io_rest_check_ident(ns, table ? table : "", err) != 0)
		return -1;
	cached = cache_find(cat, ns, table);
	if (cached != NULL && known_etag != NULL &&
		strcmp(cached->etag, known_etag) != 0)
		cached = NULL;			/* the caller knows another version */
	io_sb_init(&p);
	io_sb_init(&h);
	io_rest_table_path(cat, &p, ns, table);
	io_sb_puts(&p, "?snapshots=all");
	if (cached != NULL)
		io_sb_printf(&h, "If-None-Match: %s", cached->etag);
	else if (known_etag != NULL)
		io_sb_printf(&h, "If-None-Match: %s", known_etag);
	if (p.oom || h.oom)
	{
		io_sb_free(&p);
		io_sb_free(&h);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	*path = io_sb_steal(&p);
	*inm = h.len > 0 ? io_sb_steal(&h) : NULL;
	io_sb_free(&h);
	return 0;
}

/* See rest_int.h. */
int
io_rest_load_response(IoCatalog *cat, const char *ns, const char *table,
					  const char *known_etag, const char *inm,
					  const IoHttpResponse *resp, IoLoadedTable *out, TmsError *err)
{
	TableCacheEntry *cached;
	const char *etag;
	size_t		etag_len;

	memset(out, 0, sizeof(*out));
	if (resp->status == 304 && inm != NULL)
	{
		const char *sent = inm + strlen("If-None-Match: ");

		cached = cache_find(cat, ns, table);
		if (cached != NULL && strcmp(cached->etag, sent) == 0)
		{
			if (loaded_copy(&cached->table, out) != 0)
				return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			out->not_modified = true;
			return 0;
		}
		if (known_etag != NULL && strcmp(known_etag, sent) == 0)
		{
			/* unchanged since the caller's version; no cached body */
			out->not_modified = true;
			out->etag = io_strdup(known_etag);
			if (out->etag == NULL)
				return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			return 0;
		}
	}
	if (resp->status != 200)
	{
		if (resp->status == 404)
			io_catalog_forget(cat, ns, table);
		return io_rest_status_error(resp, REST_CALL_TABLE, "load table",
									cat->http.max_json_bytes, err);
	}
	if (io_rest_read_load_result(resp->body, resp->body_len, cat->http.max_json_bytes,
								 "load table", out, err) != 0)
		return -1;
	etag = io_http_header(resp, "etag", &etag_len);
	if (etag != NULL && etag_len > 0)
	{
		out->etag = io_strndup(etag, etag_len);
		if (out->etag == NULL)
		{
			io_loaded_table_free(out);
			return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		}
	}
	cache_store(cat, ns, table, out);
	return 0;
}

/* See io.h. */
int
io_catalog_load_table_etag(IoCatalog *cat, const char *ns, const char *table,
						   const char *known_etag, IoLoadedTable *out,
						   TmsError *err)
{
	IoHttpResponse resp;
	char	   *path;
	char	   *inm;
	const char *extra[2];
	int			rc;

	memset(out, 0, sizeof(*out));
	if (io_rest_load_request(cat, ns, table, known_etag, &path, &inm, err) != 0)
		return -1;
	extra[0] = "X-Iceberg-Access-Delegation: vended-credentials";
	extra[1] = inm;
	rc = io_rest_request(cat, "GET", path, NULL, extra, inm ? 2 : 1, true, &resp, err);
	io_free(path);
	if (rc == 0)
		rc = io_rest_load_response(cat, ns, table, known_etag, inm, &resp, out, err);
	io_free(inm);
	io_http_response_free(&resp);
	return rc;
}

/* See io.h. */
int
io_catalog_load_table_refs(IoCatalog *cat, const char *ns, const char *table,
						   IoLoadedTable *out, TmsError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	const char *extra[1] = {"X-Iceberg-Access-Delegation: vended-credentials"};
	int			rc;

	memset(out, 0, sizeof(*out));
	if (io_rest_check_ident(ns, table ? table : "", err) != 0)
		return -1;
	io_sb_init(&path);
	io_rest_table_path(cat, &path, ns, table);
	io_sb_puts(&path, "?snapshots=refs");
	if (path.oom)
	{
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	/* no If-None-Match and nothing cached: the cache holds snapshots=all */
	rc = io_rest_request(cat, "GET", path.data, NULL, extra, 1, true, &resp, err);
	io_sb_free(&path);
	if (rc == 0 && resp.status != 200)
	{
		if (resp.status == 404)
			io_catalog_forget(cat, ns, table);
		rc = io_rest_status_error(&resp, REST_CALL_TABLE, "load table",
								  cat->http.max_json_bytes, err);
	}
	else if (rc == 0)
		rc = io_rest_read_load_result(resp.body, resp.body_len, cat->http.max_json_bytes,
									  "load table", out, err);
	io_http_response_free(&resp);
	return rc;
}

/* See io.h.  Not retried: a retry after a lost 204 would report a 404. */
int
io_catalog_drop_table(IoCatalog *cat, const char *ns, const char *table,
					  bool purge, TmsError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	int			rc;

	if (io_rest_check_ident(ns, table ? table : "", err) != 0)
		return -1;
	io_sb_init(&path);
	io_rest_table_path(cat, &path, ns, table);
	io_sb_printf(&path, "?purgeRequested=%s", purge ? "true" : "false");
	if (path.oom)
	{
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	/* not retried: a retry after a lost 204 would report a false 404 */
	rc = io_rest_request(cat, "DELETE", path.data, NULL, NULL, 0, false, &resp, err);
	io_sb_free(&path);
	io_catalog_forget(cat, ns, table);
	if (rc == 0 && resp.status != 204 && resp.status != 200)
		rc = io_rest_status_error(&resp, REST_CALL_TABLE, "drop table",
								  cat->http.max_json_bytes, err);
	io_http_response_free(&resp);
	return rc;
}

/* See io.h. */
void
io_table_credentials_free(IoTableCredentials *c)
{
	if (c == NULL)
		return;
	io_rest_kv_free(c->config, c->nconfig);
	memset(c, 0, sizeof(*c));
}

/* See rest_int.h (the reader of LoadCredentialsResponse bodies). */
int
io_rest_read_credentials(const char *body, size_t len, size_t max_json,
						 const char *location, IoTableCredentials *out, TmsError *err)
{
	json_t	   *doc = io_rest_parse_body(body, len, "load credentials", max_json, err);
	json_t	   *creds;
	int			rc = 0;

	memset(out, 0, sizeof(*out));
	if (doc == NULL)
		return -1;
	creds = json_object_get(doc, "storage-credentials");
	if (!json_is_array(creds))
		rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								"malformed load credentials response: \"storage-credentials\" is not an array");
	else if (storage_credential(creds, location) == NULL)
		rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								"the catalog vended no storage credentials for \"%.300s\"",
								location ? location : "the table");
	else if (put_storage_credential(creds, location, &out->config, &out->nconfig) != 0)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	json_decref(doc);
	if (rc != 0)
		io_table_credentials_free(out);
	return rc;
}

/* See io.h. */
int
io_catalog_load_credentials(IoCatalog *cat, const char *ns, const char *table,
							const char *location, IoTableCredentials *out, TmsError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	const char *extra[1] = {"X-Iceberg-Access-Delegation: vended-credentials"};
	int			rc;

	memset(out, 0, sizeof(*out));
	if (io_rest_check_ident(ns, table ? table : "", err) != 0)
		return -1;
	if (!io_rest_endpoint_offered(cat, "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"))
	{
		/*
		 * A catalog without loadCredentials vends them with the table: a load
		 * of its referenced snapshots only, whose cost does not grow with its
		 * history.  The cached copy holds the old credentials: it goes.
		 */
		IoLoadedTable t;

		io_catalog_forget(cat, ns, table);
		if (io_catalog_load_table_refs(cat, ns, table, &t, err) != 0)
			return -1;
		out->config = t.config;
		out->nconfig = t.nconfig;
		t.config = NULL;
		t.nconfig = 0;
		io_loaded_table_free(&t);
		return 0;
	}
	io_sb_init(&path);
	io_rest_table_path(cat, &path, ns, table);
	io_sb_puts(&path, "/credentials");
	if (path.oom)
	{
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	rc = io_rest_request(cat, "GET", path.data, NULL, extra, 1, true, &resp, err);
	io_sb_free(&path);
	if (rc == 0 && resp.status != 200)
		rc = io_rest_status_error(&resp, REST_CALL_TABLE, "load credentials",
								  cat->http.max_json_bytes, err);
	else if (rc == 0)
		rc = io_rest_read_credentials(resp.body, resp.body_len, cat->http.max_json_bytes,
									  location, out, err);
	if (rc == 0)
		out->from_endpoint = true;
	io_http_response_free(&resp);
	return rc;
}

/* See io.h. */
int
io_catalog_rename_table(IoCatalog *cat, const char *ns, const char *table,
						const char *to_ns, const char *to_table, TmsError *err)
{
	IoStrBuf	path;
	IoStrBuf	body;
	int			rc;

	if (io_rest_check_ident(ns, table ? table : "", err) != 0 ||
		io_rest_check_ident(to_ns, to_table ? to_table : "", err) != 0)
		return -1;
	if (!io_rest_endpoint_offered(cat, "POST /v1/{prefix}/tables/rename"))
		return tms_error_set(err, IO_ERR_UNSUPPORTED, "catalog does not offer renaming tables");
	io_sb_init(&path);
	io_sb_init(&body);
	io_rest_v1_path(cat, &path);
	io_sb_puts(&path, "tables/rename");
	io_sb_puts(&body, "{\"source\": {\"namespace\": ");
	io_rest_append_json_ns(&body, ns);
	io_sb_puts(&body, ", \"name\": ");
	io_rest_append_json_string(&body, table);
	io_sb_puts(&body, "}, \"destination\": {\"namespace\": ");
	io_rest_append_json_ns(&body, to_ns);
	io_sb_puts(&body, ", \"name\": ");
	io_rest_append_json_string(&body, to_table);
	io_sb_puts(&body, "}}");
	rc = io_rest_post_change(cat, &path, &body, REST_CALL_TABLE, "rename table", err);
	io_catalog_forget(cat, ns, table);
	io_catalog_forget(cat, to_ns, to_table);
	return rc;
}

/*
 * May a commit sent with an Idempotency-Key be sent again after this
 * outcome?  Yes after a transport failure (no answer, or a timeout) and
 * after 500/502/503/504; never after an interrupt or any other answer.
 */
static bool
commit_retryable(int rc, const IoHttpResponse *resp, const TmsError *err)
{
	if (rc != 0)
		return err->code == IO_ERR_CONNECT || err->code == IO_ERR_TIMEOUT;
	return resp->status == 500 || resp->status == 502 ||
		resp->status == 503 || resp->status == 504;
}

/* See io.h. */
int
io_catalog_commit_table(IoCatalog *cat, const char *ns, const char *table,
						const char *body, IoLoadedTable *out, TmsError *err)
{
	IoStrBuf	path;
	IoHttpResponse resp;
	IoHttpOptions opt;
	int			rc;
	const char *etag;
	size_t		etag_len;
	char		uuid[40];
	char		key_line[64];
	const char *extra[1];
	size_t		nextra = 0;
	int64_t		key_until = 0;
	bool		maybe_applied = false;	/* an earlier attempt may have landed */
	int			attempt;

	memset(out, 0, sizeof(*out));
	if (io_rest_check_ident(ns, table ? table : "", err) != 0)
		return -1;
	if (body == NULL)
		return tms_error_set(err, IO_ERR_INVALID_ARGUMENT, "commit body is required");
	if (cat->idem_lifetime_ms > 0)
	{
		/* one key for this commit, resent unchanged by every retry */
		if (io_make_uuid7(uuid, err) != 0)
			return -1;
		snprintf(key_line, sizeof(key_line), "Idempotency-Key: %s", uuid);
		extra[0] = key_line;
		nextra = 1;
		key_until = io_now_ms() + cat->idem_lifetime_ms;
	}
	io_http_options_resolve(&cat->http, &opt);
	io_sb_init(&path);
	io_rest_table_path(cat, &path, ns, table);
	if (path.oom)
	{
		io_sb_free(&path);
		return tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	}
	for (attempt = 0;; attempt++)
	{
		long		delay;

		rc = io_rest_request(cat, "POST", path.data, body, nextra ? extra : NULL,
							 nextra, false, &resp, err);
		if (nextra == 0 || attempt >= opt.retries || !commit_retryable(rc, &resp, err))
			break;
		delay = io_http_retry_delay_ms(&opt, attempt, rc == 0 ? &resp : NULL);

		/*
		 * Only while the catalog surely still remembers the key: it saw the
		 * key no earlier than key_until - lifetime (key_until was taken
		 * before the first send), and the retry reaches it after the delay
		 * plus at most a connect timeout.  Past that a retry could be applied
		 * a second time.
		 */
		if (io_now_ms() + delay + opt.connect_timeout_ms >= key_until)
			break;
		maybe_applied = true;
		io_http_response_free(&resp);
		if (io_sleep_ms(&opt, delay, err) != 0)
		{
			rc = -1;
			memset(&resp, 0, sizeof(resp));
			break;
		}
	}
	io_sb_free(&path);
	io_catalog_forget(cat, ns, table);
	if (rc != 0)
	{
		/* the request may have reached the catalog: nobody knows */
		if (resp.sent || maybe_applied || err->code == IO_ERR_TIMEOUT ||
			err->code == IO_ERR_INTERRUPTED)
		{
			if (err->code != IO_ERR_INTERRUPTED || resp.sent || maybe_applied)
			{
				char		msg[sizeof(err->message)];

				snprintf(msg, sizeof(msg), "%s", err->message);
				tms_error_set(err, IO_ERR_COMMIT_STATE_UNKNOWN,
							  "commit state unknown: %.400s", msg);
			}
		}
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200 && maybe_applied && resp.status < 500)
	{
		/*
		 * A refusal of a retry after an attempt that may have landed (a 409
		 * because it did, with a catalog that forgot the key): not a conflict
		 * to rebase on, the caller must reload and check.
		 */
		io_rest_status_error(&resp, REST_CALL_COMMIT, "commit", cat->http.max_json_bytes,
							 err);
		{
			char		msg[sizeof(err->message)];
			char		detail[sizeof(err->detail)];

			snprintf(msg, sizeof(msg), "%s", err->message);
			snprintf(detail, sizeof(detail), "%s", err->detail);
			tms_error_set_http(err, IO_ERR_COMMIT_STATE_UNKNOWN, resp.status,
							   "commit state unknown: a retry with the same Idempotency-Key was refused after an earlier attempt may have been applied: %.300s",
							   msg);
			snprintf(err->detail, sizeof(err->detail), "%s", detail);
		}
		io_http_response_free(&resp);
		return -1;
	}
	if (resp.status != 200)
	{
		io_rest_status_error(&resp, REST_CALL_COMMIT, "commit", cat->http.max_json_bytes,
							 err);
		io_http_response_free(&resp);
		return -1;
	}
	rc = io_rest_read_load_result(resp.body, resp.body_len, cat->http.max_json_bytes,
								  "commit", out, err);
	etag = io_http_header(&resp, "etag", &etag_len);
	if (rc == 0 && etag != NULL && etag_len > 0 &&
		(out->etag = io_strndup(etag, etag_len)) == NULL)
	{
		io_loaded_table_free(out);
		rc = -1;
	}
	io_http_response_free(&resp);
	if (rc != 0)
	{
		/* applied (200) but unreadable: the caller must reload */
		char		msg[sizeof(err->message)];

		snprintf(msg, sizeof(msg), "%s", err->message);
		return tms_error_set_http(err, IO_ERR_COMMIT_STATE_UNKNOWN, 200,
								  "commit state unknown: the catalog accepted the commit but its response could not be read: %.300s",
								  msg);
	}
	return 0;
}
