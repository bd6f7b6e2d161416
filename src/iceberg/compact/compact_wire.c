/*-------------------------------------------------------------------------
 *
 * compact_wire.c
 *	  The worker <-> compaction helper protocol: encoders and strict
 *	  decoders of its lines and the metrics modes of a table's columns
 *	  (compact_wire.h describes the messages; the bounds the helper sends
 *	  become Iceberg values in compact_values.c).
 *
 * Rules: plain C; JSON documents are built with json_pack (never
 * json_object(), see src/io/util/jsonmem.h) and parsed with io_json_load
 * under a budget; a decoder checks every field it reads (type, range,
 * length) and fails with ICEBERG_ERR_MALFORMED naming the field, never
 * trusting the other side.
 *
 * src/iceberg/compact/compact_wire.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact_wire.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/compact/posdel.h"
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PATH		4096
#define MAX_ITEMS		1000000
#define MAX_METRICS		100000
#define MAX_TEXT		4096
#define MAX_NAME_MAPPING (16 * 1024 * 1024)

/* https://iceberg.apache.org/spec/#column-projection */
#define ICEBERG_NAME_MAPPING_PROPERTY "schema.name-mapping.default"

static bool
oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

static bool
bad(TmsError *err, const char *what)
{
	tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: %s", what);
	return false;
}

/* Dump and copy to malloc'd memory; consumes doc. */
static char *
dump(json_t *doc, TmsError *err)
{
	char	   *text;
	char	   *r = NULL;

	if (doc == NULL)
	{
		oom(err);
		return NULL;
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (text != NULL)
	{
		r = io_strdup(text);
		io_json_free(text);
	}
	if (r == NULL)
		oom(err);
	return r;
}

static bool
set(json_t *obj, const char *key, json_t *v)
{
	return v != NULL && json_object_set_new(obj, key, v) == 0;
}

static bool
append(json_t *arr, json_t *v)
{
	return v != NULL && json_array_append_new(arr, v) == 0;
}

/* A string field (or NULL when absent and optional); *ok false on a bad one. */
static char *
get_str(json_t *o, const char *key, bool required, size_t max, bool *ok, TmsError *err)
{
	json_t	   *v = json_object_get(o, key);
	char	   *s;

	if (v == NULL || json_is_null(v))
	{
		if (required)
		{
			*ok = false;
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: \"%s\" missing", key);
		}
		return NULL;
	}
	if (!json_is_string(v) || json_string_length(v) > max ||
		strlen(json_string_value(v)) != json_string_length(v))
	{
		*ok = false;
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: \"%s\" is not a string of at most %zu bytes", key, max);
		return NULL;
	}
	s = io_strdup(json_string_value(v));
	if (s == NULL)
	{
		*ok = false;
		oom(err);
	}
	return s;
}

/* An integer field in [min, max]; dflt when absent and not required. */
static int64_t
get_int(json_t *o, const char *key, bool required, int64_t min, int64_t max, int64_t dflt,
		bool *ok, TmsError *err)
{
	json_t	   *v = json_object_get(o, key);

	if (v == NULL || json_is_null(v))
	{
		if (required)
		{
			*ok = false;
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: \"%s\" missing", key);
		}
		return dflt;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
	{
		*ok = false;
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "invalid compaction message: \"%s\" is not an integer in [%" PRId64 ", %" PRId64 "]",
					  key, min, max);
		return dflt;
	}
	return (int64_t) json_integer_value(v);
}

static json_t *
load(const char *text, size_t len, int64_t max_json, TmsError *err)
{
	json_t	   *root = iceberg_json_load(text, len, 0, max_json, "compaction message", err);

	if (root != NULL && !json_is_object(root))
	{
		json_decref(root);
		bad(err, "not an object");
		return NULL;
	}
	return root;
}

/* ---------------------------------------------------------------------
 * hello
 * ---------------------------------------------------------------------
 */

char *
iceberg_compact_hello_json(const IoStorageConfig *cfg, int64_t memory_limit, int threads,
						   int groups, const char *temp_directory, const char *allowed_hosts,
						   TmsError *err)
{
	json_t	   *st = json_pack("{s:i, s:I, s:I, s:i}", "s3_path_style", cfg->s3_path_style,
							   "connect_timeout_ms", (json_int_t) cfg->http.connect_timeout_ms,
							   "request_timeout_ms", (json_int_t) cfg->http.request_timeout_ms,
							   "retries", cfg->http.retries);
	json_t	   *roots = json_array();
	json_t	   *doc;
	size_t		i;
	bool		ok = st != NULL && roots != NULL;

#define OPT(k, v) do { if (ok && (v) != NULL) ok = set(st, k, json_string(v)); } while (0)
	OPT("s3_endpoint", cfg->s3_endpoint);
	OPT("s3_region", cfg->s3_region);
	OPT("s3_access_key_id", cfg->s3_access_key_id);
	OPT("s3_secret_access_key", cfg->s3_secret_access_key);
	OPT("s3_session_token", cfg->s3_session_token);
	OPT("azure_endpoint", cfg->azure_endpoint);
	OPT("azure_account_key", cfg->azure_account_key);
	OPT("azure_sas_token", cfg->azure_sas_token);
	OPT("azure_tenant_id", cfg->azure_tenant_id);
	OPT("azure_client_id", cfg->azure_client_id);
	OPT("azure_client_secret", cfg->azure_client_secret);
	OPT("azure_token_url", cfg->azure_token_url);
	if (ok && cfg->nazure_vended > 0)
	{
		json_t	   *v = json_pack("{}");

		ok = v != NULL;
		for (i = 0; ok && i < cfg->nazure_vended; i++)
			if (cfg->azure_vended[i].key != NULL && cfg->azure_vended[i].value != NULL &&
				strncmp(cfg->azure_vended[i].key, "adls.sas-token.", 15) == 0)
				ok = set(v, cfg->azure_vended[i].key, json_string(cfg->azure_vended[i].value));
		if (ok)
			ok = set(st, "azure_vended", v);
		else
			json_decref(v);
	}
	OPT("gcs_endpoint", cfg->gcs_endpoint);
	OPT("gcs_hmac_access_id", cfg->gcs_hmac_access_id);
	OPT("gcs_hmac_secret", cfg->gcs_hmac_secret);
	OPT("gcs_oauth2_token", cfg->gcs_oauth2_token);
	OPT("gcs_service_account_key", cfg->gcs_service_account_key);
	if (ok && cfg->gcs_credentials_vended)
		ok = set(st, "gcs_credentials_vended", json_true());
	if (ok && cfg->gcs_upload_part_bytes > 0)
		ok = set(st, "gcs_upload_part_bytes", json_integer((json_int_t) cfg->gcs_upload_part_bytes));
	if (allowed_hosts != NULL && allowed_hosts[0] != '\0')
		OPT("allowed_hosts", allowed_hosts);
#undef OPT
	for (i = 0; ok && i < cfg->nlocal_roots; i++)
		ok = append(roots, json_string(cfg->local_roots[i]));
	if (ok)
	{
		ok = set(st, "local_roots", roots);
		roots = NULL;
	}
	if (!ok)
	{
		json_decref(st);
		json_decref(roots);
		oom(err);
		return NULL;
	}
	doc = json_pack("{s:s, s:i, s:I, s:i, s:i, s:s, s:o}", "type", "hello",
					"protocol", ICEBERG_COMPACT_PROTOCOL, "memory_limit", (json_int_t) memory_limit,
					"threads", threads, "groups", groups, "temp_directory", temp_directory,
					"storage", st);
	return dump(doc, err);
}

/* The vended SAS tokens of a hello: an object of at most 1000 strings. */
static bool
hello_azure_vended(json_t *v, IcebergCompactHello *h, TmsError *err)
{
	const char *k;
	json_t	   *val;

	if (v == NULL)
		return true;
	if (!json_is_object(v) || json_object_size(v) > 1000)
		return bad(err, "azure_vended");
	h->azure_vended = io_calloc(json_object_size(v) + 1, sizeof(IoKeyValue));
	if (h->azure_vended == NULL)
		return oom(err);
	json_object_foreach(v, k, val)
	{
		IoKeyValue *e = &h->azure_vended[h->nazure_vended];

		if (!json_is_string(val) || json_string_length(val) > 65536)
			return bad(err, "azure_vended");
		e->key = io_strdup(k);
		e->value = io_strdup(json_string_value(val));
		h->nazure_vended++;
		if (e->key == NULL || e->value == NULL)
			return oom(err);
	}
	return true;
}

bool
iceberg_compact_hello_parse(const char *text, size_t len, IcebergCompactHello *h,
							TmsError *err)
{
	json_t	   *root = load(text, len, 0, err);
	json_t	   *st;
	json_t	   *roots;
	const char *type;
	bool		ok = true;
	size_t		i;

	memset(h, 0, sizeof(*h));
	if (root == NULL)
		return false;
	type = json_string_value(json_object_get(root, "type"));
	if (type == NULL || strcmp(type, "hello") != 0 ||
		get_int(root, "protocol", true, 0, INT32_MAX, 0, &ok, err) != ICEBERG_COMPACT_PROTOCOL)
	{
		json_decref(root);
		return ok ? bad(err, "not a hello of this protocol") : false;
	}
	h->memory_limit = get_int(root, "memory_limit", true, 1 << 20, INT64_MAX, 0, &ok, err);
	h->threads = (int) get_int(root, "threads", true, 1, 1024, 1, &ok, err);
	h->groups = (int) get_int(root, "groups", false, 1, ICEBERG_COMPACT_MAX_GROUPS, 1, &ok, err);
	h->temp_directory = get_str(root, "temp_directory", true, MAX_PATH, &ok, err);
	st = json_object_get(root, "storage");
	if (ok && !json_is_object(st))
		ok = bad(err, "no storage");
	if (ok)
	{
		h->s3_endpoint = get_str(st, "s3_endpoint", false, MAX_TEXT, &ok, err);
		h->s3_region = get_str(st, "s3_region", false, MAX_TEXT, &ok, err);
		h->s3_path_style = (int) get_int(st, "s3_path_style", false, -1, 1, -1, &ok, err);
		h->s3_access_key_id = get_str(st, "s3_access_key_id", false, MAX_TEXT, &ok, err);
		h->s3_secret_access_key = get_str(st, "s3_secret_access_key", false, MAX_TEXT, &ok, err);
		h->s3_session_token = get_str(st, "s3_session_token", false, 65536, &ok, err);
		h->gcs_endpoint = get_str(st, "gcs_endpoint", false, MAX_TEXT, &ok, err);
		h->gcs_hmac_access_id = get_str(st, "gcs_hmac_access_id", false, MAX_TEXT, &ok, err);
		h->gcs_hmac_secret = get_str(st, "gcs_hmac_secret", false, MAX_TEXT, &ok, err);
		h->gcs_oauth2_token = get_str(st, "gcs_oauth2_token", false, 65536, &ok, err);
		h->gcs_service_account_key = get_str(st, "gcs_service_account_key", false, 65536, &ok, err);
		h->gcs_credentials_vended = json_is_true(json_object_get(st, "gcs_credentials_vended"));
		h->gcs_upload_part_bytes = get_int(st, "gcs_upload_part_bytes", false, 0, INT64_MAX, 0, &ok, err);
		h->connect_timeout_ms = (long) get_int(st, "connect_timeout_ms", false, 0, INT32_MAX, 0, &ok, err);
		h->request_timeout_ms = (long) get_int(st, "request_timeout_ms", false, 0, INT32_MAX, 0, &ok, err);
		h->retries = (int) get_int(st, "retries", false, -1, 100, -1, &ok, err);
		h->allowed_hosts = get_str(st, "allowed_hosts", false, 65536, &ok, err);
		h->azure_endpoint = get_str(st, "azure_endpoint", false, MAX_TEXT, &ok, err);
		h->azure_account_key = get_str(st, "azure_account_key", false, MAX_TEXT, &ok, err);
		h->azure_sas_token = get_str(st, "azure_sas_token", false, 65536, &ok, err);
		h->azure_tenant_id = get_str(st, "azure_tenant_id", false, MAX_TEXT, &ok, err);
		h->azure_client_id = get_str(st, "azure_client_id", false, MAX_TEXT, &ok, err);
		h->azure_client_secret = get_str(st, "azure_client_secret", false, MAX_TEXT, &ok, err);
		h->azure_token_url = get_str(st, "azure_token_url", false, MAX_TEXT, &ok, err);
		if (ok)
			ok = hello_azure_vended(json_object_get(st, "azure_vended"), h, err);
		roots = json_object_get(st, "local_roots");
		if (ok && roots != NULL && (!json_is_array(roots) || json_array_size(roots) > 1000))
			ok = bad(err, "local_roots");
		if (ok && json_array_size(roots) > 0)
		{
			h->local_roots = io_calloc(json_array_size(roots), sizeof(char *));
			if (h->local_roots == NULL)
				ok = oom(err);
			for (i = 0; ok && i < json_array_size(roots); i++)
			{
				json_t	   *r = json_array_get(roots, i);

				if (!json_is_string(r) || (h->local_roots[i] = io_strdup(json_string_value(r))) == NULL)
					ok = json_is_string(r) ? oom(err) : bad(err, "local_roots");
				else
					h->nlocal_roots++;
			}
		}
	}
	json_decref(root);
	if (!ok)
		iceberg_compact_hello_free(h);
	return ok;
}

void
iceberg_compact_hello_storage(const IcebergCompactHello *h, IoStorageConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->s3_endpoint = h->s3_endpoint;
	cfg->s3_region = h->s3_region;
	cfg->s3_path_style = h->s3_path_style;
	cfg->s3_access_key_id = h->s3_access_key_id;
	cfg->s3_secret_access_key = h->s3_secret_access_key;
	cfg->s3_session_token = h->s3_session_token;
	cfg->azure_endpoint = h->azure_endpoint;
	cfg->azure_account_key = h->azure_account_key;
	cfg->azure_sas_token = h->azure_sas_token;
	cfg->azure_tenant_id = h->azure_tenant_id;
	cfg->azure_client_id = h->azure_client_id;
	cfg->azure_client_secret = h->azure_client_secret;
	cfg->azure_token_url = h->azure_token_url;
	cfg->azure_vended = h->azure_vended;
	cfg->nazure_vended = (size_t) h->nazure_vended;
	cfg->gcs_endpoint = h->gcs_endpoint;
	cfg->gcs_hmac_access_id = h->gcs_hmac_access_id;
	cfg->gcs_hmac_secret = h->gcs_hmac_secret;
	cfg->gcs_oauth2_token = h->gcs_oauth2_token;
	cfg->gcs_service_account_key = h->gcs_service_account_key;
	cfg->gcs_credentials_vended = h->gcs_credentials_vended;
	cfg->gcs_upload_part_bytes = (size_t) h->gcs_upload_part_bytes;
	cfg->local_roots = (const char *const *) h->local_roots;
	cfg->nlocal_roots = (size_t) h->nlocal_roots;
	cfg->http.connect_timeout_ms = h->connect_timeout_ms;
	cfg->http.request_timeout_ms = h->request_timeout_ms;
	cfg->http.retries = h->retries;
}

static void
wipe_free(char *s)
{
	if (s != NULL)
	{
		volatile char *v = s;

		while (*v)
			*v++ = '\0';
		io_free(s);
	}
}

void
iceberg_compact_hello_free(IcebergCompactHello *h)
{
	int			i;

	io_free(h->temp_directory);
	io_free(h->allowed_hosts);
	io_free(h->s3_endpoint);
	io_free(h->s3_region);
	wipe_free(h->s3_access_key_id);
	wipe_free(h->s3_secret_access_key);
	wipe_free(h->s3_session_token);
	io_free(h->azure_endpoint);
	wipe_free(h->azure_account_key);
	wipe_free(h->azure_sas_token);
	io_free(h->azure_tenant_id);
	io_free(h->azure_client_id);
	wipe_free(h->azure_client_secret);
	io_free(h->azure_token_url);
	for (i = 0; i < h->nazure_vended; i++)
	{
		io_free(h->azure_vended[i].key);
		wipe_free(h->azure_vended[i].value);
	}
	io_free(h->azure_vended);
	io_free(h->gcs_endpoint);
	wipe_free(h->gcs_hmac_access_id);
	wipe_free(h->gcs_hmac_secret);
	wipe_free(h->gcs_oauth2_token);
	wipe_free(h->gcs_service_account_key);
	for (i = 0; i < h->nlocal_roots; i++)
		io_free(h->local_roots[i]);
	io_free(h->local_roots);
	memset(h, 0, sizeof(*h));
}

/* ---------------------------------------------------------------------
 * group
 * ---------------------------------------------------------------------
 */

/* "truncate(N)", "full", "counts", "none"; false when none of them. */
static bool
parse_mode(const char *s, IcebergCompactJobMetric *m)
{
	int			n,
				k = 0;

	while (isspace((unsigned char) *s))
		s++;
	if (strcasecmp(s, "none") == 0)
		m->mode = ICEBERG_METRICS_NONE;
	else if (strcasecmp(s, "counts") == 0)
		m->mode = ICEBERG_METRICS_COUNTS;
	else if (strcasecmp(s, "full") == 0)
		m->mode = ICEBERG_METRICS_FULL;
	else if (sscanf(s, "truncate(%d)%n", &n, &k) == 1 && k > 0 && s[k] == '\0' && n > 0)
	{
		m->mode = ICEBERG_METRICS_TRUNCATE;
		m->length = n;
	}
	else
		return false;
	return true;
}

/* The metrics modes being worked out: one per primitive leaf. */
typedef struct ModeWalk
{
	const IcebergTableMetadata *md;
	IcebergCompactJobMetric dflt;
	bool		have_default;	/* write.metadata.metrics.default is set */
	long		max_inferred;
	long		inferred;		/* leaves given the default so far */
	IcebergCompactJobMetric *out;
	char	   *flag;			/* per leaf: 'o' its own mode, 'i' inferred */
	int			n;
	int			cap;
} ModeWalk;

/*
 * Iceberg's MetricsConfig.limitFieldIds: without a default mode of the
 * table's, the first max-inferred-column-defaults primitive fields get
 * truncate(16), taken breadth first (a struct's primitive fields, then
 * its nested fields' in order; a list's element, a map's key and value),
 * the others none.  Marks them 'i' in w->flag.
 */
static void
modes_infer(ModeWalk *w, const IcebergColumn *c, int n)
{
	int			i,
				k;

	for (i = 0; i < n && w->inferred < w->max_inferred; i++)
		if (!ICEBERG_TYPE_IS_NESTED(c[i].type))
			for (k = 0; k < w->n; k++)
				if (w->out[k].id == c[i].id)
				{
					if (w->flag[k] == '\0')
						w->flag[k] = 'i';
					w->inferred++;
				}
	for (i = 0; i < n && w->inferred < w->max_inferred; i++)
		if (ICEBERG_TYPE_IS_NESTED(c[i].type))
			modes_infer(w, c[i].children, c[i].nchildren);
}

/* The leaves under c[0..n), their full names below prefix, into w->out. */
static void
modes_leaves(ModeWalk *w, const IcebergColumn *c, int n, const char *prefix)
{
	int			i;

	for (i = 0; i < n && w->n < w->cap; i++)
	{
		char		name[1100];

		snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", c[i].name);
		if (ICEBERG_TYPE_IS_NESTED(c[i].type))
			modes_leaves(w, c[i].children, c[i].nchildren, name);
		else if (c[i].type != ICEBERG_TYPE_OTHER)
		{
			char		key[1200];
			const char *own;
			IcebergCompactJobMetric *m = &w->out[w->n++];

			*m = w->dflt;
			m->id = c[i].id;
			snprintf(key, sizeof(key), "write.metadata.metrics.column.%s", name);
			own = iceberg_metadata_property(w->md, key);
			if (own != NULL && parse_mode(own, m))
				w->flag[w->n - 1] = 'o';
			else
				*m = w->dflt, m->id = c[i].id;
		}
	}
}

bool
iceberg_compact_metrics_modes(const IcebergTableMetadata *md, const IcebergSchema *schema,
							  IcebergCompactJobMetric **out, TmsError *err)
{
	const char *d = iceberg_metadata_property(md, "write.metadata.metrics.default");
	const char *mx = iceberg_metadata_property(md, "write.metadata.metrics.max-inferred-column-defaults");
	ModeWalk	w;
	int			i;

	memset(&w, 0, sizeof(w));
	w.md = md;
	w.dflt.mode = ICEBERG_METRICS_TRUNCATE;
	w.dflt.length = 16;
	w.max_inferred = 100;
	w.cap = schema->nleaves;
	*out = w.out = io_calloc((size_t) schema->nleaves + 1, sizeof(IcebergCompactJobMetric));
	w.flag = io_calloc((size_t) schema->nleaves + 1, 1);
	if (*out == NULL || w.flag == NULL)
	{
		io_free(w.flag);
		io_free(*out);
		*out = NULL;
		return oom(err);
	}
	/* a default that does not parse is truncate(16), as Iceberg reads it */
	w.have_default = d != NULL;
	if (d != NULL && !parse_mode(d, &w.dflt))
		w.dflt.mode = ICEBERG_METRICS_TRUNCATE, w.dflt.length = 16;
	if (mx != NULL)
	{
		char	   *end;
		long		v = strtol(mx, &end, 10);

		if (*end == '\0' && end != mx && v >= 0)
			w.max_inferred = v;
	}
	modes_leaves(&w, schema->columns, schema->ncolumns, "");
	if (!w.have_default)
		modes_infer(&w, schema->columns, schema->ncolumns);
	for (i = 0; i < w.n; i++)
		if (!w.have_default && w.flag[i] == '\0')
		{
			w.out[i].mode = ICEBERG_METRICS_NONE;
			w.out[i].length = 0;
		}
	io_free(w.flag);
	return true;
}

/* The kinds of a remove_older, as the group line names them. */
static const char *const cutoff_kind_names[] = {"none", "value", "us", "ns", "days"};

char *
iceberg_compact_job_json(const IcebergTableMetadata *md, const IcebergCompactPlan *p, int g,
						 const IcebergCompactJobMetric *metrics, int nmetrics,
						 const char *const *input_uris, const char *const *delete_uris,
						 const char *output_dir, const char *upload_dir, const char *prefix,
						 const char *compression, int compression_level, TmsError *err)
{
	const IcebergCompactGroup *gr = &p->groups[g];
	bool		posdel = p->rewrite_content == ICEBERG_CONTENT_POSITION_DELETES;
	const char *schema_text = posdel ? compact_posdel_schema_json : md->current_schema_json;
	const IcebergSortOrder *sort = posdel ? &compact_posdel_order : p->sort;
	json_t	   *schema = iceberg_json_load(schema_text, strlen(schema_text), 0, 0, "schema", err);
	json_t	   *inputs = json_array();
	json_t	   *deletes = json_array();
	json_t	   *mets = json_array();
	json_t	   *output;
	json_t	   *line;
	bool		ok = schema != NULL && inputs != NULL && deletes != NULL && mets != NULL;

	/* a row delta writes no row: no lineage (its files may have no row ids) */
	bool		lineage = !posdel && !p->row_delta && p->format_version >= 3;
	int			i,
				k;

	for (i = 0; ok && i < gr->nfiles; i++)
	{
		const IcebergCompactFile *f = &p->files[gr->first + i];

		/* (a missing first_row_id fails the helper's parse of the line) */
		ok = append(inputs, json_pack("{s:s, s:s, s:I, s:I, s:I, s:o*, s:o*}", "path", f->path,
									  "uri", input_uris[i], "records", (json_int_t) f->records,
									  "size", (json_int_t) f->size, "seq", (json_int_t) f->seq,
									  "first_row_id", lineage ? json_integer(f->first_row_id) : NULL,
									  "dv", f->dv_length <= 0 ? NULL :
									  json_pack("{s:I, s:I, s:s}", "offset", (json_int_t) f->dv_offset,
												"length", (json_int_t) f->dv_length,
												"referenced", f->referenced ? f->referenced : "")));
	}
	for (i = 0; ok && i < gr->ndeletes; i++)
	{
		const IcebergCompactDelete *d = &p->deletes[gr->deletes[i]];
		json_t	   *ids = json_array();
		json_t	   *dv;

		for (k = 0; ok && ids != NULL && k < d->nequality_ids; k++)
			ok = append(ids, json_integer(d->equality_ids[k]));
		dv = d->dv_offset < 0 ? NULL :
			json_pack("{s:I, s:I, s:I, s:s}", "offset", (json_int_t) d->dv_offset,
					  "length", (json_int_t) d->dv_length, "records", (json_int_t) d->records,
					  "referenced", d->referenced ? d->referenced : "");
		if (!ok || ids == NULL || (dv == NULL && d->dv_offset >= 0))
		{
			json_decref(dv);
			ok = false;
		}
		else
			ok = append(deletes, json_pack("{s:s, s:i, s:I, s:o, s:o*}", "uri", delete_uris[i],
										   "content", (int) d->content, "seq", (json_int_t) d->seq,
										   "equality_ids", ids, "dv", dv));
	}
	for (i = 0; ok && i < nmetrics; i++)
		ok = append(mets, json_pack("{s:i, s:s, s:i}", "id", (int) metrics[i].id,
									"mode", metrics[i].mode == ICEBERG_METRICS_NONE ? "none" :
									metrics[i].mode == ICEBERG_METRICS_COUNTS ? "counts" :
									metrics[i].mode == ICEBERG_METRICS_FULL ? "full" : "truncate",
									"length", metrics[i].length));
	if (!ok)
	{
		json_decref(schema);
		json_decref(inputs);
		json_decref(deletes);
		json_decref(mets);
		if (err->code == ICEBERG_OK)
			oom(err);
		return NULL;
	}
	output = json_pack("{s:s, s:s, s:s, s:i, s:s, s:i, s:o}", "dir", output_dir,
					   "upload_dir", upload_dir, "prefix", prefix,
					   "files", gr->expected_outputs, "compression", compression,
					   "compression_level", compression_level, "metrics", mets);
	if (output != NULL && sort != NULL &&
		json_object_set_new(output, "sort", compact_sort_json(sort)) != 0)
	{
		json_decref(output);
		output = NULL;
	}
	line = json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:o*}", "type", "group", "group", g,
					 "schema", schema, "inputs", inputs, "deletes", deletes, "output", output,
					 "row_lineage", lineage ? json_true() : NULL);

	/*
	 * v3: the position deletes become deletion vectors (posdel.h), and a row
	 * delta writes deletion vectors (compact.h)
	 */
	if (line != NULL && (posdel || p->row_delta) && p->format_version >= 3 &&
		!set(line, "dv_output", json_true()))
	{
		json_decref(line);
		line = NULL;
	}
	if (line != NULL && posdel && !set(line, "keep", compact_posdel_keep_json(gr)))
	{
		json_decref(line);
		line = NULL;
	}
	if (line != NULL && p->remove_older.kind != ICEBERG_CUTOFF_NONE &&
		!set(line, "remove_older",
			 json_pack("{s:i, s:s, s:I}", "id", (int) p->remove_older.field_id, "kind",
					   cutoff_kind_names[p->remove_older.kind],
					   "cutoff", (json_int_t) p->remove_older.cutoff)))
	{
		json_decref(line);
		line = NULL;
	}
	if (line != NULL && p->remove_where != NULL &&
		!set(line, "remove_where", json_string(p->remove_where)))
	{
		json_decref(line);
		line = NULL;
	}
	/* a row delta: the removed rows' positions are the output (compact.h) */
	if (line != NULL && p->row_delta && !set(line, "positions_output", json_true()))
	{
		json_decref(line);
		line = NULL;
	}
	/* data files without field ids are read through it, as Iceberg does */
	if (line != NULL && !posdel &&
		iceberg_metadata_property(md, ICEBERG_NAME_MAPPING_PROPERTY) != NULL &&
		!set(line, "name_mapping",
			 json_string(iceberg_metadata_property(md, ICEBERG_NAME_MAPPING_PROPERTY))))
	{
		json_decref(line);
		line = NULL;
	}
	return dump(line, err);
}

void
iceberg_compact_job_free(IcebergCompactJob *job)
{
	int			i;

	if (job == NULL)
		return;
	io_free(job->schema_json);
	iceberg_schema_free(job->schema);
	for (i = 0; i < job->ninputs; i++)
	{
		io_free(job->inputs[i].path);
		io_free(job->inputs[i].uri);
		io_free(job->inputs[i].dv_referenced);
	}
	io_free(job->inputs);
	for (i = 0; i < job->ndeletes; i++)
	{
		io_free(job->deletes[i].uri);
		io_free(job->deletes[i].equality_ids);
		io_free(job->deletes[i].dv_referenced);
	}
	io_free(job->deletes);
	io_free(job->output_dir);
	io_free(job->upload_dir);
	io_free(job->prefix);
	io_free(job->compression);
	io_free(job->metrics);
	iceberg_sort_order_free(job->sort);
	for (i = 0; i < job->nkeep; i++)
		io_free(job->keep[i].path);
	io_free(job->keep);
	io_free(job->name_mapping);
	iceberg_row_filter_free(job->remove_where);
	io_free(job);
}

/* A group line's remove_older: {"id","kind","cutoff"}, the column a top-level one. */
static bool
parse_remove_older(json_t *o, IcebergCompactJob *job, TmsError *err)
{
	const char *kind = json_string_value(json_object_get(o, "kind"));
	IcebergRowCutoff *c = &job->remove_older;
	bool		ok = json_is_object(o);

	c->kind = ICEBERG_CUTOFF_NONE;
	for (int i = 1; ok && kind != NULL && i < 5; i++)
		if (strcmp(kind, cutoff_kind_names[i]) == 0)
			c->kind = (IcebergCutoffKind) i;
	if (!ok || c->kind == ICEBERG_CUTOFF_NONE)
		return bad(err, "remove_older");
	c->field_id = (int32_t) get_int(o, "id", true, 1, INT32_MAX, 1, &ok, err);
	c->cutoff = get_int(o, "cutoff", true, INT64_MIN, INT64_MAX, 0, &ok, err);
	if (ok && iceberg_schema_column(job->schema, c->field_id) == NULL)
		ok = bad(err, "remove_older column");
	return ok;
}

/* The "output" object of a group line: where and how the files are written. */
static bool
parse_output(json_t *o, IcebergCompactJob *job, TmsError *err)
{
	json_t	   *a;
	bool		ok = true;

	if (!json_is_object(o))
		return bad(err, "output");
	job->output_dir = get_str(o, "dir", true, MAX_PATH, &ok, err);
	job->upload_dir = get_str(o, "upload_dir", true, MAX_PATH, &ok, err);
	job->prefix = get_str(o, "prefix", true, 256, &ok, err);
	job->files = (int) get_int(o, "files", true, 1, 1000000, 1, &ok, err);
	job->compression = get_str(o, "compression", true, 64, &ok, err);
	job->compression_level = (int) get_int(o, "compression_level", false, -1, 22, -1, &ok, err);
	a = json_object_get(o, "metrics");
	if (ok && (!json_is_array(a) || json_array_size(a) > MAX_METRICS))
		ok = bad(err, "metrics");
	if (ok && (job->metrics = io_calloc(json_array_size(a) + 1, sizeof(IcebergCompactJobMetric))) == NULL)
		ok = oom(err);
	for (size_t i = 0; ok && i < json_array_size(a); i++)
	{
		IcebergCompactJobMetric *m = &job->metrics[i];
		json_t	   *mo = json_array_get(a, i);
		const char *mode = json_string_value(json_object_get(mo, "mode"));

		job->nmetrics++;
		m->id = (int32_t) get_int(mo, "id", true, 1, INT32_MAX, 1, &ok, err);
		m->length = (int) get_int(mo, "length", false, 0, 1 << 20, 16, &ok, err);
		if (ok && mode == NULL)
			ok = bad(err, "metrics mode");
		else if (ok)
		{
			m->mode = strcmp(mode, "none") == 0 ? ICEBERG_METRICS_NONE :
				strcmp(mode, "counts") == 0 ? ICEBERG_METRICS_COUNTS :
				strcmp(mode, "full") == 0 ? ICEBERG_METRICS_FULL : ICEBERG_METRICS_TRUNCATE;
			if (m->mode == ICEBERG_METRICS_TRUNCATE && m->length <= 0)
				ok = bad(err, "metrics length");
		}
	}
	/* strategy sort or zorder: how to order the group's rows */
	if (ok && json_object_get(o, "sort") != NULL)
		ok = compact_sort_from_json(json_object_get(o, "sort"), job->schema, &job->sort, err);
	return ok;
}

bool
iceberg_compact_job_parse(const char *text, size_t len, IcebergCompactJob **out,
						  TmsError *err)
{
	json_t	   *root = load(text, len, 0, err);
	json_t	   *a;
	json_t	   *o;
	IcebergCompactJob *job;
	bool		ok = true;
	size_t		i,
				k;
	const char *type;

	*out = NULL;
	if (root == NULL)
		return false;
	type = json_string_value(json_object_get(root, "type"));
	job = io_calloc(1, sizeof(IcebergCompactJob));
	if (job == NULL)
	{
		json_decref(root);
		return oom(err);
	}
	if (type == NULL || strcmp(type, "group") != 0)
		ok = bad(err, "not a group");
	job->group = (int) get_int(root, "group", true, 0, INT32_MAX, 0, &ok, err);
	if (ok)
	{
		char	   *s = json_dumps(json_object_get(root, "schema"), JSON_COMPACT);

		if (s == NULL)
			ok = bad(err, "no schema");
		else
		{
			job->schema_json = io_strdup(s);
			io_json_free(s);
			ok = job->schema_json != NULL ? iceberg_schema_parse(job->schema_json, &job->schema, err) : oom(err);
		}
	}
	o = json_object_get(root, "row_lineage");
	if (ok && o != NULL && !json_is_boolean(o))
		ok = bad(err, "row_lineage");
	job->row_lineage = json_is_true(o);
	a = json_object_get(root, "inputs");
	if (ok && (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MAX_ITEMS))
		ok = bad(err, "inputs");
	if (ok && (job->inputs = io_calloc(json_array_size(a), sizeof(IcebergCompactJobInput))) == NULL)
		ok = oom(err);
	for (i = 0; ok && i < json_array_size(a); i++)
	{
		IcebergCompactJobInput *in = &job->inputs[i];

		o = json_array_get(a, i);
		job->ninputs++;
		in->path = get_str(o, "path", true, MAX_PATH, &ok, err);
		in->uri = get_str(o, "uri", true, MAX_PATH, &ok, err);
		in->records = get_int(o, "records", true, 0, INT64_MAX, 0, &ok, err);
		in->size = get_int(o, "size", true, 0, INT64_MAX, 0, &ok, err);
		in->seq = get_int(o, "seq", true, 0, INT64_MAX, 0, &ok, err);
		in->first_row_id = get_int(o, "first_row_id", job->row_lineage, 0, INT64_MAX - 1, -1,
								   &ok, err);
		if (ok && job->row_lineage && in->records > INT64_MAX - in->first_row_id)
			ok = bad(err, "first_row_id");
		in->dv_offset = in->dv_length = -1;
		if (ok && json_object_get(o, "dv") != NULL)
		{
			json_t	   *dv = json_object_get(o, "dv");

			if (!json_is_object(dv))
				ok = bad(err, "dv");
			in->dv_offset = get_int(dv, "offset", true, 0, INT64_MAX, 0, &ok, err);
			in->dv_length = get_int(dv, "length", true, 1, ICEBERG_DV_MAX_BYTES, 1, &ok, err);
			in->dv_referenced = get_str(dv, "referenced", true, MAX_PATH, &ok, err);
		}
	}
	a = json_object_get(root, "deletes");
	if (ok && (!json_is_array(a) || json_array_size(a) > MAX_ITEMS))
		ok = bad(err, "deletes");
	if (ok && (job->deletes = io_calloc(json_array_size(a) + 1, sizeof(IcebergCompactJobDelete))) == NULL)
		ok = oom(err);
	for (i = 0; ok && i < json_array_size(a); i++)
	{
		IcebergCompactJobDelete *d = &job->deletes[i];
		json_t	   *ids;

		o = json_array_get(a, i);
		job->ndeletes++;
		d->uri = get_str(o, "uri", true, MAX_PATH, &ok, err);
		d->content = (int32_t) get_int(o, "content", true, 1, 2, 1, &ok, err);
		d->seq = get_int(o, "seq", true, 0, INT64_MAX, 0, &ok, err);
		d->dv_offset = d->dv_length = d->dv_records = -1;
		if (ok && json_object_get(o, "dv") != NULL)
		{
			json_t	   *dv = json_object_get(o, "dv");

			if (!json_is_object(dv) || d->content != ICEBERG_CONTENT_POSITION_DELETES)
				ok = bad(err, "dv");
			d->dv_offset = get_int(dv, "offset", true, 0, INT64_MAX, 0, &ok, err);
			d->dv_length = get_int(dv, "length", true, 1, ICEBERG_DV_MAX_BYTES, 1, &ok, err);
			d->dv_records = get_int(dv, "records", true, 0, INT64_MAX, 0, &ok, err);
			d->dv_referenced = get_str(dv, "referenced", true, MAX_PATH, &ok, err);
		}
		ids = json_object_get(o, "equality_ids");
		if (ok && ids != NULL && (!json_is_array(ids) || json_array_size(ids) > 10000))
			ok = bad(err, "equality_ids");
		if (ok && d->content == 2 && json_array_size(ids) == 0)
			ok = bad(err, "an equality delete without equality_ids");
		if (ok && json_array_size(ids) > 0)
		{
			d->equality_ids = io_calloc(json_array_size(ids), sizeof(int32_t));
			if (d->equality_ids == NULL)
				ok = oom(err);
			for (k = 0; ok && k < json_array_size(ids); k++)
			{
				json_t	   *v = json_array_get(ids, k);

				if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > INT32_MAX)
					ok = bad(err, "equality_ids");
				else
					d->equality_ids[d->nequality_ids++] = (int32_t) json_integer_value(v);
			}
		}
	}
	o = json_object_get(root, "output");
	if (ok)
		ok = parse_output(o, job, err);
	/* a rewrite of position deletes: the data files its rows may point at */
	o = json_object_get(root, "dv_output");
	if (ok && o != NULL && !json_is_boolean(o))
		ok = bad(err, "dv_output");
	job->dv_output = json_is_true(o);
	if (ok && json_object_get(root, "keep") != NULL)
	{
		job->filter_live = true;
		ok = compact_posdel_keep_parse(json_object_get(root, "keep"), &job->keep, &job->nkeep, err);
	}
	o = json_object_get(root, "positions_output");
	if (ok && o != NULL && !json_is_boolean(o))
		ok = bad(err, "positions_output");
	job->positions_output = json_is_true(o);
	if (ok && json_object_get(root, "remove_older") != NULL)
		ok = parse_remove_older(json_object_get(root, "remove_older"), job, err);
	if (ok && json_object_get(root, "remove_where") != NULL)
	{
		const char *w = json_string_value(json_object_get(root, "remove_where"));

		/* bound to the line's schema by the one parser of where texts */
		ok = w != NULL ? iceberg_row_filter_bind(w, job->schema, &job->remove_where, err) :
			bad(err, "remove_where");
	}
	/* the table's name mapping: a JSON array */
	if (ok)
		job->name_mapping = get_str(root, "name_mapping", false, MAX_NAME_MAPPING, &ok, err);
	if (ok && job->name_mapping != NULL)
	{
		json_t	   *nm = iceberg_json_load(job->name_mapping, strlen(job->name_mapping), 0, 0,
										   "name mapping", err);

		if (nm == NULL)
			ok = false;
		else if (!json_is_array(nm))
			ok = bad(err, "name_mapping");
		json_decref(nm);
	}
	json_decref(root);
	if (!ok)
	{
		iceberg_compact_job_free(job);
		return false;
	}
	*out = job;
	return true;
}

/* ---------------------------------------------------------------------
 * The helper's lines
 * ---------------------------------------------------------------------
 */

char *
iceberg_compact_ready_json(const char *version, int groups)
{
	TmsError	err;

	return dump(json_pack("{s:s, s:i, s:s, s:i}", "type", "ready", "protocol",
						  ICEBERG_COMPACT_PROTOCOL, "duckdb", version ? version : "",
						  "groups", groups), &err);
}

/*
 * Into buf, without jansson or io_malloc: the helper's heartbeat thread
 * sends it while a group's thread may be inside them (their allocator
 * hooks are process-wide, for one thread).
 */
void
iceberg_compact_progress_line(char *buf, size_t len, int group, int64_t done)
{
	snprintf(buf, len, "{\"type\":\"progress\",\"group\":%d,\"done\":%lld}", group,
			 (long long) done);
}

static json_t *
hex(const uint8_t *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char	   *s = io_malloc(n * 2 + 1);
	json_t	   *v;
	size_t		i;

	if (s == NULL)
		return NULL;
	for (i = 0; i < n; i++)
	{
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	v = json_string(s);
	io_free(s);
	return v;
}

char *
iceberg_compact_file_json(int group, const IcebergCompactOutput *f)
{
	TmsError	err;
	json_t	   *mets = json_array();
	json_t	   *splits = json_array();
	json_t	   *dvs;
	bool		ok = mets != NULL && splits != NULL;
	int			i;

	for (i = 0; ok && i < f->nmetrics; i++)
	{
		const IcebergColumnMetrics *m = &f->metrics[i];
		json_t	   *o = json_pack("{s:i}", "id", (int) m->id);

		ok = o != NULL;
#define NUM(k, v) do { if (ok && (v) >= 0) ok = set(o, k, json_integer((json_int_t) (v))); } while (0)
		NUM("column_size", m->column_size);
		NUM("value_count", m->value_count);
		NUM("null_count", m->null_count);
		NUM("nan_count", m->nan_count);
#undef NUM
		if (ok && m->has_lower)
			ok = set(o, "lower", hex(m->lower, m->lower_len));
		if (ok && m->has_upper)
			ok = set(o, "upper", hex(m->upper, m->upper_len));
		ok = ok && append(mets, o);
		if (!ok && o != NULL)
			json_decref(o);
	}
	for (i = 0; ok && i < f->nsplit_offsets; i++)
		ok = append(splits, json_integer((json_int_t) f->split_offsets[i]));
	dvs = f->ndvs > 0 ? compact_dvs_json(f) : NULL;
	if (!ok || (f->ndvs > 0 && dvs == NULL))
	{
		json_decref(mets);
		json_decref(splits);
		json_decref(dvs);
		return NULL;
	}
	return dump(json_pack("{s:s, s:i, s:s, s:I, s:I, s:o, s:o, s:o*}", "type", "file", "group", group,
						  "path", f->path, "size", (json_int_t) f->size,
						  "records", (json_int_t) f->records, "metrics", mets,
						  "split_offsets", splits, "dvs", dvs), &err);
}

char *
iceberg_compact_done_json(int group, int files, int64_t rows_in, int64_t rows_deleted,
						  int64_t rows_out, int64_t bytes_in, int64_t peak_rss, int in_flight,
						  int64_t rows_filtered)
{
	TmsError	err;

	return dump(json_pack("{s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:i, s:I}", "type", "done",
						  "group", group, "files", files, "rows_in", (json_int_t) rows_in,
						  "rows_deleted", (json_int_t) rows_deleted,
						  "rows_out", (json_int_t) rows_out, "bytes_in", (json_int_t) bytes_in,
						  "peak_rss", (json_int_t) peak_rss, "in_flight", in_flight,
						  "rows_filtered", (json_int_t) rows_filtered), &err);
}

char *
iceberg_compact_error_json(int group, const char *message)
{
	return iceberg_compact_group_error_json(group, message, false);
}

char *
iceberg_compact_group_error_json(int group, const char *message, bool alone)
{
	TmsError	err;
	size_t		n = strnlen(message, 2000);
	json_t	   *m = json_stringn(message, n);

	if (m == NULL)
	{
		/* not valid UTF-8: the bytes above ASCII become '?' */
		char	   *copy = io_strndup(message, n);

		if (copy != NULL)
		{
			for (size_t i = 0; i < n; i++)
				if ((unsigned char) copy[i] >= 0x80)
					copy[i] = '?';
			m = json_string(copy);
			io_free(copy);
		}
	}
	return dump(json_pack("{s:s, s:i, s:o, s:b}", "type", "error", "group", group,
						  "message", m ? m : json_string("(no message)"), "alone", alone),
				&err);
}

/* ---------------------------------------------------------------------
 * Parsing what the helper says
 * ---------------------------------------------------------------------
 */

static bool
parse_file(json_t *root, IcebergCompactOutput *f, TmsError *err)
{
	json_t	   *a;
	bool		ok = true;
	size_t		i;

	f->path = get_str(root, "path", true, MAX_PATH, &ok, err);
	f->size = get_int(root, "size", true, 1, INT64_MAX, 0, &ok, err);
	f->records = get_int(root, "records", true, 0, INT64_MAX, 0, &ok, err);
	a = json_object_get(root, "metrics");
	if (ok && (!json_is_array(a) || json_array_size(a) > MAX_METRICS))
		return bad(err, "metrics");
	if (ok && (f->metrics = io_calloc(json_array_size(a) + 1, sizeof(IcebergColumnMetrics))) == NULL)
		return oom(err);
	for (i = 0; ok && i < json_array_size(a); i++)
	{
		json_t	   *o = json_array_get(a, i);
		IcebergColumnMetrics *m = &f->metrics[i];
		const char *lo;
		const char *up;

		f->nmetrics++;
		if (!json_is_object(o))
			return bad(err, "a metric is not an object");
		m->id = (int32_t) get_int(o, "id", true, 1, INT32_MAX, 1, &ok, err);
		m->column_size = get_int(o, "column_size", false, 0, INT64_MAX, -1, &ok, err);
		m->value_count = get_int(o, "value_count", false, 0, INT64_MAX, -1, &ok, err);
		m->null_count = get_int(o, "null_count", false, 0, INT64_MAX, -1, &ok, err);
		m->nan_count = get_int(o, "nan_count", false, 0, INT64_MAX, -1, &ok, err);
		lo = json_string_value(json_object_get(o, "lower"));
		up = json_string_value(json_object_get(o, "upper"));
		if (ok && ((json_object_get(o, "lower") && lo == NULL) ||
				   (json_object_get(o, "upper") && up == NULL)))
			return bad(err, "a bound is not a string");
		if (ok && lo != NULL)
		{
			if (!iceberg_compact_unhex(lo, &m->lower, &m->lower_len))
				return bad(err, "a lower bound is not hex of at most 64 KiB");
			m->has_lower = true;
		}
		if (ok && up != NULL)
		{
			if (!iceberg_compact_unhex(up, &m->upper, &m->upper_len))
				return bad(err, "an upper bound is not hex of at most 64 KiB");
			m->has_upper = true;
		}
		if (ok && m->value_count >= 0 && m->null_count > m->value_count)
			return bad(err, "more nulls than values");
	}
	a = json_object_get(root, "split_offsets");
	if (ok && a != NULL)
	{
		if (!json_is_array(a) || json_array_size(a) > MAX_METRICS)
			return bad(err, "split_offsets");
		f->split_offsets = io_calloc(json_array_size(a) + 1, sizeof(int64_t));
		if (f->split_offsets == NULL)
			return oom(err);
		for (i = 0; i < json_array_size(a); i++)
		{
			json_t	   *v = json_array_get(a, i);

			if (!json_is_integer(v) || json_integer_value(v) < 4 ||
				json_integer_value(v) >= f->size ||
				(i > 0 && json_integer_value(v) <= f->split_offsets[i - 1]))
				return bad(err, "split_offsets are not increasing offsets inside the file");
			f->split_offsets[f->nsplit_offsets++] = (int64_t) json_integer_value(v);
		}
	}
	/* a Puffin file of deletion vectors: its blobs (compact_dv.c) */
	if (ok && json_object_get(root, "dvs") != NULL)
		ok = compact_dvs_parse(json_object_get(root, "dvs"), f, err);
	return ok;
}

bool
iceberg_compact_message_parse(const char *line, size_t len, int64_t max_json,
							  IcebergCompactMessage *m, TmsError *err)
{
	json_t	   *root;
	const char *type;
	bool		ok = true;

	tms_error_clear(err);
	memset(m, 0, sizeof(*m));
	if (len > ICEBERG_COMPACT_MAX_LINE)
		return bad(err, "too long");
	root = load(line, len, max_json, err);
	if (root == NULL)
		return false;
	type = json_string_value(json_object_get(root, "type"));
	m->group = (int) get_int(root, "group", false, 0, INT32_MAX, -1, &ok, err);
	if (!ok)
		;
	else if (type == NULL)
		ok = bad(err, "no type");
	else if (strcmp(type, "ready") == 0)
	{
		m->type = ICEBERG_MSG_READY;
		m->protocol = (int) get_int(root, "protocol", true, 0, INT32_MAX, 0, &ok, err);
		m->version = get_str(root, "duckdb", false, 64, &ok, err);
		m->groups = (int) get_int(root, "groups", false, 1, ICEBERG_COMPACT_MAX_GROUPS, 1, &ok, err);
	}
	else if (strcmp(type, "progress") == 0)
	{
		m->type = ICEBERG_MSG_PROGRESS;
		m->done = get_int(root, "done", true, 0, INT64_MAX, 0, &ok, err);
	}
	else if (strcmp(type, "file") == 0)
	{
		m->type = ICEBERG_MSG_FILE;
		ok = parse_file(root, &m->file, err);
	}
	else if (strcmp(type, "done") == 0)
	{
		m->type = ICEBERG_MSG_DONE;
		m->files = (int) get_int(root, "files", true, 0, INT32_MAX, 0, &ok, err);
		m->rows_in = get_int(root, "rows_in", true, 0, INT64_MAX, 0, &ok, err);
		m->rows_deleted = get_int(root, "rows_deleted", true, 0, INT64_MAX, 0, &ok, err);
		m->rows_out = get_int(root, "rows_out", true, 0, INT64_MAX, 0, &ok, err);
		m->bytes_in = get_int(root, "bytes_in", true, 0, INT64_MAX, 0, &ok, err);
		m->peak_rss = get_int(root, "peak_rss", true, 0, INT64_MAX, 0, &ok, err);
		m->in_flight = (int) get_int(root, "in_flight", false, 1, ICEBERG_COMPACT_MAX_GROUPS, 1,
									 &ok, err);
		m->rows_filtered = get_int(root, "rows_filtered", false, 0, INT64_MAX, 0, &ok, err);
		if (ok && m->rows_deleted > m->rows_in)
			ok = bad(err, "more rows deleted than read");
		if (ok && m->rows_filtered > m->rows_deleted)
			ok = bad(err, "more rows filtered than deleted");
	}
	else if (strcmp(type, "error") == 0)
	{
		m->type = ICEBERG_MSG_ERROR;
		m->message = get_str(root, "message", true, 4096, &ok, err);
		if (ok && json_object_get(root, "alone") != NULL &&
			!json_is_boolean(json_object_get(root, "alone")))
			ok = bad(err, "alone");
		m->alone = json_is_true(json_object_get(root, "alone"));
	}
	else
		ok = bad(err, "unknown type");
	json_decref(root);
	if (!ok)
		iceberg_compact_message_free(m);
	return ok;
}

void
iceberg_compact_message_free(IcebergCompactMessage *m)
{
	if (m == NULL)
		return;
	io_free(m->version);
	io_free(m->message);
	iceberg_compact_output_free(&m->file);
	memset(m, 0, sizeof(*m));
}
