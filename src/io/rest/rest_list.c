/*-------------------------------------------------------------------------
 *
 * rest_list.c
 *		Listings of an Iceberg REST catalog: namespaces and tables, both
 *		through one pager (pageToken / next-page-token, pageSize), and the
 *		readers of their response pages; creating a namespace.
 *
 * Tables stream: io_catalog_list_tables_paged hands each page to the
 * caller and keeps nothing of it, so a caller's memory does not grow with
 * the number of tables (only one response body, its parsed tree and its
 * identifiers are held at a time); io_catalog_list_tables collects the
 * pages into one list for callers that want it.
 *
 * Rules: a listing ends after at most MAX_PAGES pages, and a page token
 * the server repeats is a protocol error (no endless loop); the first
 * request sends an empty pageToken, which tells the server that the
 * client pages.
 *
 * src/io/rest/rest_list.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "io/rest/rest_int.h"

/* Pages a listing may take before the server is deemed broken. */
#define MAX_PAGES				100000

/* See io.h. */
void
io_table_list_free(IoTableList *list)
{
	if (list == NULL)
		return;
	io_rest_free_idents(list->items, list->n);
	list->items = NULL;
	list->n = 0;
}

/* See rest_int.h. */
void
io_rest_free_idents(IoTableIdent *items, size_t n)
{
	size_t		i;

	for (i = 0; items != NULL && i < n; i++)
	{
		io_free(items[i].ns);
		io_free(items[i].name);
	}
	io_free(items);
}

/*
 * Join a JSON array of strings with IO_NS_SEP: malloc'd, or NULL with
 * *malformed set when arr is not an array of strings (else out of memory).
 */
static char *
join_levels(json_t *arr, bool *malformed)
{
	IoStrBuf	sb;
	size_t		i;
	json_t	   *e;

	*malformed = false;
	if (!json_is_array(arr))
	{
		*malformed = true;
		return NULL;
	}
	io_sb_init(&sb);
	json_array_foreach(arr, i, e)
	{
		if (!json_is_string(e))
		{
			*malformed = true;
			io_sb_free(&sb);
			return NULL;
		}
		if (i > 0)
			io_sb_putc(&sb, IO_NS_SEP);
		io_sb_puts(&sb, json_string_value(e));
	}
	return io_sb_steal(&sb);
}

/*
 * Parse one listing page: the document (the caller json_decrefs it and
 * *array borrows from it), the array under key, and *next, a malloc'd copy
 * of the next-page-token or NULL on the last page.  NULL with *err on any
 * failure.
 */
static json_t *
read_page(const char *body, size_t len, size_t max_json, const char *what,
		  const char *key, json_t **array, char **next, TmsError *err)
{
	json_t	   *doc;
	json_t	   *token;

	*next = NULL;
	doc = io_rest_parse_body(body, len, what, max_json, err);
	if (doc == NULL)
		return NULL;
	*array = json_object_get(doc, key);
	if (!json_is_array(*array))
	{
		json_decref(doc);
		tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
						   "malformed %s response: \"%s\" is not an array", what, key);
		return NULL;
	}
	token = json_object_get(doc, "next-page-token");
	if (json_is_string(token) && json_string_value(token)[0] != '\0')
	{
		*next = io_strdup(json_string_value(token));
		if (*next == NULL)
		{
			json_decref(doc);
			tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			return NULL;
		}
	}
	return doc;
}

/* See rest_int.h (the reader of ListTablesResponse pages). */
int
io_rest_read_tables_page(const char *body, size_t len, size_t max_json,
						 IoTableIdent **items, size_t *n, char **next,
						 TmsError *err)
{
	json_t	   *doc;
	json_t	   *ids;
	json_t	   *e;
	size_t		i;
	IoTableIdent *out;

	*items = NULL;
	*n = 0;
	doc = read_page(body, len, max_json, "list tables", "identifiers", &ids, next, err);
	if (doc == NULL)
		return -1;
	out = io_calloc(json_array_size(ids) + 1, sizeof(IoTableIdent));
	if (out == NULL)
		goto oom;
	json_array_foreach(ids, i, e)
	{
		bool		bad;
		char	   *tns = join_levels(json_object_get(e, "namespace"), &bad);
		const char *name = json_string_value(json_object_get(e, "name"));

		if (tns == NULL || name == NULL)
		{
			io_free(tns);
			if (bad || name == NULL)
			{
				tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								   "malformed list tables response: invalid table identifier");
				goto fail;
			}
			goto oom;
		}
		out[i].ns = tns;
		out[i].name = io_strdup(name);
		if (out[i].name == NULL)
		{
			*n = i + 1;
			goto oom;
		}
		*n = i + 1;
	}
	json_decref(doc);
	*items = out;
	return 0;

oom:
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
fail:
	json_decref(doc);
	io_rest_free_idents(out, *n);
	*n = 0;
	io_free(*next);
	*next = NULL;
	return -1;
}

/* See rest_int.h (the reader of ListNamespacesResponse pages). */
int
io_rest_read_namespaces_page(const char *body, size_t len, size_t max_json,
							 IoStringList *out, char **next, TmsError *err)
{
	json_t	   *doc;
	json_t	   *nss;
	json_t	   *e;
	size_t		i;
	size_t		n0 = out->n;
	char	  **grown;

	doc = read_page(body, len, max_json, "list namespaces", "namespaces", &nss, next, err);
	if (doc == NULL)
		return -1;
	grown = io_realloc(out->items, (out->n + json_array_size(nss) + 1) * sizeof(char *));
	if (grown == NULL)
		goto oom;
	out->items = grown;
	json_array_foreach(nss, i, e)
	{
		bool		bad;
		char	   *ns = join_levels(e, &bad);

		if (ns == NULL)
		{
			if (bad)
			{
				tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
								   "malformed list namespaces response: a namespace is not an array of strings");
				goto fail;
			}
			goto oom;
		}
		out->items[out->n++] = ns;
	}
	json_decref(doc);
	return 0;

oom:
	tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
fail:
	json_decref(doc);
	while (out->n > n0)
		io_free(out->items[--out->n]);
	io_free(*next);
	*next = NULL;
	return -1;
}

/*
 * What the pager does with one 200 page: read it, hand it on, set *next.
 * Returns 0 to go on, 1 to stop early (not an error), -1 with *err.
 */
typedef int (*PageFn) (void *state, const char *body, size_t len,
					   size_t max_json, char **next, TmsError *err);

/*
 * The one pager: GET base?pageToken=<token>[&pageSize=N]<extra> until the
 * server sends no next-page-token (or fn stops), one page at a time.  base
 * is a path below the catalog URI, extra an encoded query tail ("&k=v")
 * or NULL.  Returns 0, or -1 with *err.
 */
static int
list_pages(IoCatalog *cat, const char *base, const char *extra, const char *what,
		   PageFn fn, void *state, TmsError *err)
{
	char	   *token = NULL;
	int			pages = 0;
	int			rc = 0;

	do
	{
		IoStrBuf	path;
		IoHttpResponse resp;
		char	   *next = NULL;

		io_sb_init(&path);
		io_sb_puts(&path, base);
		io_sb_puts(&path, "?pageToken=");
		if (token != NULL)
			io_rest_append_encoded(&path, token);
		if (cat->page_size > 0)
			io_sb_printf(&path, "&pageSize=%d", cat->page_size);
		if (extra != NULL)
			io_sb_puts(&path, extra);
		if (path.oom)
		{
			io_sb_free(&path);
			rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
			break;
		}
		rc = io_rest_request(cat, "GET", path.data, NULL, NULL, 0, true, &resp, err);
		io_sb_free(&path);
		if (rc == 0 && resp.status != 200)
			rc = io_rest_status_error(&resp, REST_CALL_NAMESPACE, what,
									  cat->http.max_json_bytes, err);
		if (rc == 0)
			rc = fn(state, resp.body, resp.body_len, cat->http.max_json_bytes,
					&next, err);
		io_http_response_free(&resp);
		if (rc == 0 && next != NULL && token != NULL && strcmp(next, token) == 0)
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									"malformed %s response: the catalog repeats its page token",
									what);
		if (rc == 0 && next != NULL && ++pages >= MAX_PAGES)
			rc = tms_error_set_http(err, IO_ERR_PROTOCOL, 200,
									"catalog keeps returning page tokens after %d pages", MAX_PAGES);
		io_wipe_free(token);
		token = next;
		if (rc != 0)
			break;
	} while (token != NULL);
	io_wipe_free(token);
	return rc < 0 ? -1 : 0;
}

/* The pager's state for namespaces: everything goes into one list. */
static int
namespaces_page(void *state, const char *body, size_t len, size_t max_json,
				char **next, TmsError *err)
{
	return io_rest_read_namespaces_page(body, len, max_json, state, next, err);
}

/* See io.h. */
int
io_catalog_list_namespaces(IoCatalog *cat, const char *parent,
						   IoStringList *out, TmsError *err)
{
	IoStrBuf	base;
	IoStrBuf	extra;
	int			rc;

	out->items = NULL;
	out->n = 0;
	if (parent != NULL && parent[0] != '\0' && io_rest_check_ident(parent, NULL, err) != 0)
		return -1;
	if (!io_rest_endpoint_offered(cat, "GET /v1/{prefix}/namespaces"))
		return tms_error_set(err, IO_ERR_UNSUPPORTED,
							 "catalog does not offer listing namespaces");
	io_sb_init(&base);
	io_sb_init(&extra);
	io_rest_v1_path(cat, &base);
	io_sb_puts(&base, "namespaces");
	if (parent != NULL && parent[0] != '\0')
	{
		io_sb_puts(&extra, "&parent=");
		io_rest_append_encoded(&extra, parent);
	}
	if (base.oom || extra.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	else
		rc = list_pages(cat, base.data, extra.data, "list namespaces", namespaces_page,
						out, err);
	io_sb_free(&base);
	io_sb_free(&extra);
	if (rc != 0)
		io_string_list_free(out);
	return rc;
}

/* The pager's state for tables: the caller's page callback. */
typedef struct TablesState
{
	IoTablePageFn fn;
	void	   *arg;
} TablesState;

static int
tables_page(void *state, const char *body, size_t len, size_t max_json,
			char **next, TmsError *err)
{
	TablesState *s = state;
	IoTableIdent *items;
	size_t		n;
	int			stop;

	if (io_rest_read_tables_page(body, len, max_json, &items, &n, next, err) != 0)
		return -1;
	stop = s->fn(s->arg, items, n);
	io_rest_free_idents(items, n);
	return stop != 0 ? 1 : 0;
}

/* See io.h. */
int
io_catalog_list_tables_paged(IoCatalog *cat, const char *ns, IoTablePageFn fn,
							 void *arg, TmsError *err)
{
	IoStrBuf	base;
	TablesState state;
	int			rc;

	if (io_rest_check_ident(ns, NULL, err) != 0)
		return -1;
	if (!io_rest_endpoint_offered(cat, "GET /v1/{prefix}/namespaces/{namespace}/tables"))
		return tms_error_set(err, IO_ERR_UNSUPPORTED,
							 "catalog does not offer listing tables");
	io_sb_init(&base);
	io_rest_v1_path(cat, &base);
	io_rest_append_ns(&base, ns);
	io_sb_puts(&base, "/tables");
	state.fn = fn;
	state.arg = arg;
	if (base.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	else
		rc = list_pages(cat, base.data, NULL, "list tables", tables_page, &state, err);
	io_sb_free(&base);
	return rc;
}

/* io_catalog_list_tables' page callback: copy the page into the list. */
typedef struct CollectState
{
	IoTableList *out;
	size_t		cap;
	bool		oom;
} CollectState;

static int
collect_page(void *arg, const IoTableIdent *items, size_t n)
{
	CollectState *c = arg;
	size_t		i;

	if (c->out->n + n > c->cap)
	{
		size_t		cap = c->cap ? c->cap : 16;
		IoTableIdent *grown;

		while (cap < c->out->n + n)
			cap *= 2;
		grown = io_realloc(c->out->items, cap * sizeof(IoTableIdent));
		if (grown == NULL)
		{
			c->oom = true;
			return 1;
		}
		c->out->items = grown;
		c->cap = cap;
	}
	for (i = 0; i < n; i++)
	{
		IoTableIdent *t = &c->out->items[c->out->n];

		t->ns = io_strdup(items[i].ns);
		t->name = io_strdup(items[i].name);
		c->out->n++;
		if (t->ns == NULL || t->name == NULL)
		{
			c->oom = true;
			return 1;
		}
	}
	return 0;
}

/* See io.h: a thin user of io_catalog_list_tables_paged. */
int
io_catalog_list_tables(IoCatalog *cat, const char *ns, IoTableList *out,
					   TmsError *err)
{
	CollectState c;
	int			rc;

	out->items = NULL;
	out->n = 0;
	c.out = out;
	c.cap = 0;
	c.oom = false;
	rc = io_catalog_list_tables_paged(cat, ns, collect_page, &c, err);
	if (rc == 0 && c.oom)
		rc = tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
	if (rc != 0)
		io_table_list_free(out);
	return rc;
}

/* See io.h. */
int
io_catalog_create_namespace(IoCatalog *cat, const char *ns, TmsError *err)
{
	IoStrBuf	path;
	IoStrBuf	body;

	if (io_rest_check_ident(ns, NULL, err) != 0)
		return -1;
	io_sb_init(&path);
	io_sb_init(&body);
	io_rest_v1_path(cat, &path);
	io_sb_puts(&path, "namespaces");
	io_sb_puts(&body, "{\"namespace\": ");
	io_rest_append_json_ns(&body, ns);
	io_sb_puts(&body, ", \"properties\": {}}");
	return io_rest_post_change(cat, &path, &body, REST_CALL_NAMESPACE, "create namespace",
							   err);
}
