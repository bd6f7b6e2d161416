/*-------------------------------------------------------------------------
 *
 * fdw_options.c
 *	  The options of the servers and user mappings of tms's wrappers,
 *	  tms_iceberg (catalogs), tms_engine (Spark through Livy, Trino,
 *	  Gravitino) and tms_webhook (receivers of events) (fdw_options.h).  One
 *	  table of options per wrapper; one checker of names, values and
 *	  privileges for all.
 *
 * Secret option values are never printed: not in errors, not in logs.
 * A server's URL options (readable by everyone) must not carry a login.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "bridge/names.h"
#include "bridge/fdw_options.h"
#include "io/io.h"
#include "io/util/secret_names.h"

/* Where an option may appear. */
#define OPT_SERVER	0x01
#define OPT_MAPPING 0x02

typedef enum OptKind
{
	OPT_TEXT,
	OPT_URL,					/* http:// or https:// */
	OPT_MS,						/* duration, default unit ms */
	OPT_INT,
	OPT_BOOL,
	OPT_LOCATIONS,				/* comma list of storage URIs */
	OPT_ABSPATH,				/* absolute directory */
	OPT_CREDENTIAL,				/* id:secret */
	OPT_SECRET,
	OPT_SECRET_URL,				/* http:// or https://, never echoed */
	OPT_ENGINE_TYPE,			/* livy, trino, gravitino */
	OPT_NAMESPACE,				/* a catalog namespace, levels joined by '.' */
	OPT_SIGV4_SCOPE,			/* a region or service of a SigV4 scope */
	OPT_WEBHOOK_EVENTS			/* comma list of webhook_events[] */
} OptKind;

/* What an option reaches on the server's own file system. */
#define PRIV_NONE	0
#define PRIV_READ	0x01		/* pg_read_server_files */
#define PRIV_WRITE	0x02		/* pg_write_server_files */

typedef struct TmsOption
{
	const char *name;
	int			where;
	OptKind		kind;
	int			files;			/* PRIV_* it needs (for locations: if local) */
} TmsOption;

static const TmsOption tms_options[] = {
	{"uri", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"warehouse", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"prefix", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"oauth2_server_uri", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"scope", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"signing_region", OPT_SERVER, OPT_SIGV4_SCOPE, PRIV_NONE},
	{"signing_name", OPT_SERVER, OPT_SIGV4_SCOPE, PRIV_NONE},
	{"connect_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"request_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"retries", OPT_SERVER, OPT_INT, PRIV_NONE},
	{"page_size", OPT_SERVER, OPT_INT, PRIV_NONE},
	{"ca_file", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"ca_path", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"s3_endpoint", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"s3_region", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"s3_path_style", OPT_SERVER, OPT_BOOL, PRIV_NONE},
	{"s3_vended_endpoint", OPT_SERVER, OPT_BOOL, PRIV_NONE},
	{"azure_endpoint", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"azure_token_url", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"gcs_endpoint", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"allowed_locations", OPT_SERVER, OPT_LOCATIONS, PRIV_READ | PRIV_WRITE},
	{"relative_path_root", OPT_SERVER, OPT_ABSPATH, PRIV_READ | PRIV_WRITE},
	{"purge_hold_namespace", OPT_SERVER, OPT_NAMESPACE, PRIV_NONE},
	{"credential", OPT_MAPPING, OPT_CREDENTIAL, PRIV_NONE},
	{"token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"s3_access_key_id", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"s3_secret_access_key", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"s3_session_token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"aws_access_key_id", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"aws_secret_access_key", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"aws_session_token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"azure_account_key", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"azure_sas_token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"azure_tenant_id", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"azure_client_id", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"azure_client_secret", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"gcs_hmac_access_id", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"gcs_hmac_secret", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"gcs_oauth2_token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"gcs_service_account_key", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{NULL, 0, 0, PRIV_NONE}
};

static const TmsOption engine_options[] = {
	{"type", OPT_SERVER, OPT_ENGINE_TYPE, PRIV_NONE},
	{"uri", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"catalog", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"metalake", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"oauth2_server_uri", OPT_SERVER, OPT_URL, PRIV_NONE},
	{"scope", OPT_SERVER, OPT_TEXT, PRIV_NONE},
	{"connect_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"request_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"retries", OPT_SERVER, OPT_INT, PRIV_NONE},
	{"poll_interval", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"run_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"max_concurrent_jobs", OPT_SERVER, OPT_INT, PRIV_NONE},
	{"ca_file", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"ca_path", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"user", OPT_MAPPING, OPT_TEXT, PRIV_NONE},
	{"password", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{"credential", OPT_MAPPING, OPT_CREDENTIAL, PRIV_NONE},
	{NULL, 0, 0, PRIV_NONE}
};

/*
 * A webhook's URL may carry its secret in the path (as chat services'
 * incoming webhooks do), so it lives in the user mapping with the token.
 */
static const TmsOption webhook_options[] = {
	{"events", OPT_SERVER, OPT_WEBHOOK_EVENTS, PRIV_NONE},
	{"connect_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"request_timeout", OPT_SERVER, OPT_MS, PRIV_NONE},
	{"ca_file", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"ca_path", OPT_SERVER, OPT_TEXT, PRIV_READ},
	{"url", OPT_MAPPING, OPT_SECRET_URL, PRIV_NONE},
	{"token", OPT_MAPPING, OPT_SECRET, PRIV_NONE},
	{NULL, 0, 0, PRIV_NONE}
};

/* What a webhook server may ask for, and its default. */
static const char *const webhook_events[] = {
	"job-succeeded", "job-failed", "job-skipped", "job-cancelled",
	"purge-succeeded", "purge-failed", NULL
};

#define WEBHOOK_DEFAULT_EVENTS "job-failed, purge-failed"

/* A wrapper: its name and its options. */
typedef struct TmsWrapper
{
	const char *name;
	const TmsOption *options;
} TmsWrapper;

static const TmsWrapper iceberg_wrapper = {"tms_iceberg", tms_options};
static const TmsWrapper engine_wrapper = {"tms_engine", engine_options};
static const TmsWrapper webhook_wrapper = {"tms_webhook", webhook_options};

/* The option names valid in a context, comma separated (palloc'd). */
static char *
valid_option_names(const TmsWrapper *w, int where)
{
	StringInfoData buf;
	const TmsOption *o;

	initStringInfo(&buf);
	for (o = w->options; o->name; o++)
	{
		if (!(o->where & where))
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, o->name);
	}
	return buf.data;
}

/* The closest valid option name (Levenshtein distance <= 3), or NULL. */
static const char *
closest_option(const TmsWrapper *w, const char *name, int where)
{
	const TmsOption *o;
	const char *best = NULL;
	int			best_d = 4;

	for (o = w->options; o->name; o++)
	{
		int			d;

		if (!(o->where & where))
			continue;
		d = varstr_levenshtein(name, strlen(name), o->name, strlen(o->name),
							   1, 1, 1, false);
		if (d < best_d)
		{
			best_d = d;
			best = o->name;
		}
	}
	return best;
}

static const char *
context_name(int where)
{
	return where == OPT_SERVER ? "foreign server" :
		where == OPT_MAPPING ? "user mapping" : "foreign-data wrapper";
}

/*
 * Check a value that must be an http(s) URL with a host; a secret one is
 * never echoed.  A server's options are readable by everyone
 * (pg_foreign_server), so a URL there must not carry a login
 * ("https://user:password@host", io/util/secret_names.h): checked first, before
 * any message could echo it.
 */
static void
check_url(const char *name, const char *value, bool secret)
{
	const char *host;
	size_t		start,
				end;

	if (!secret && io_find_userinfo(value, strlen(value), 0, &start, &end))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("The URL holds a user name or password (\"user:password@\")."),
				 errhint("Credentials belong in a user mapping (CREATE USER MAPPING ... OPTIONS (...)), "
						 "which only its user and superusers can read.")));

	if (strncmp(value, "http://", 7) == 0)
		host = value + 7;
	else if (strncmp(value, "https://", 8) == 0)
		host = value + 8;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 secret ? errdetail("The value is not an http:// or https:// URL.") :
				 errdetail("\"%s\" is not an http:// or https:// URL.", value)));
	if (*host == '\0' || *host == '/' || *host == ':' || strpbrk(value, " \t\r\n") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 secret ? errdetail("The value has no host name or contains white space.") :
				 errdetail("\"%s\" has no host name or contains white space.", value)));
}

/* Parse a duration in ms (units allowed: "500ms", "10s", "1min"). */
int
tms_option_ms(const char *name, const char *value)
{
	int			result;
	const char *hint = NULL;

	if (!parse_int(value, &result, GUC_UNIT_MS, &hint) || result < 1)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" is not a positive duration.", value),
				 errhint("Give milliseconds, or a number with a unit such as \"10s\".")));
	return result;
}

int
tms_option_int(const char *name, const char *value, int min, int max)
{
	int			result;

	if (!parse_int(value, &result, 0, NULL) || result < min || result > max)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" is not an integer between %d and %d.", value, min, max)));
	return result;
}

bool
tms_option_bool(const char *name, const char *value)
{
	bool		result;

	if (!parse_bool(value, &result))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" is not a Boolean value.", value)));
	return result;
}

/*
 * Split a comma list of storage locations into their canonical forms (the
 * io layer's location rule), palloc'd.  Each must be absolute (an s3://
 * URI, an absolute path or file URI); the file system root is refused.
 */
List *
tms_option_locations(const char *name, const char *value)
{
	List	   *result = NIL;
	char	   *copy = pstrdup(value);
	char	   *tok;
	char	   *save;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		TmsError	err;
		char	   *t = tok;
		char	   *canonical;
		size_t		n;

		while (*t == ' ' || *t == '\t')
			t++;
		n = strlen(t);
		while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
			t[--n] = '\0';
		if (n == 0)
			continue;
		if (io_location_canonical(t, NULL, &canonical, &err) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"%s\"", name),
					 errdetail("\"%s\" is neither an absolute path, a file:// URI, an s3:// URI, an Azure URI (abfss://container@account.dfs.core.windows.net/path) nor a gs:// URI without \".\" or \"..\" segments.",
							   t)));
		if (strcmp(canonical, "/") == 0)
		{
			io_free(canonical);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"%s\"", name),
					 errdetail("The file system root cannot be an allowed location.")));
		}
		result = lappend(result, pstrdup(canonical));
		io_free(canonical);
	}
	if (result == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("The list of locations is empty.")));
	return result;
}

/* Does a canonical location name the server's own file system? */
static bool
location_is_local(const char *canonical)
{
	return canonical[0] == '/';
}

/*
 * Raise unless the current user may set an option that reaches the
 * server's files with the given PRIV_* needs (see the file header).
 */
static void
check_file_privileges(const char *name, int needs)
{
	Oid			user = GetUserId();

	if ((needs & PRIV_READ) && !has_privs_of_role(user, ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set option \"%s\"", name),
				 errdetail("Only roles with privileges of the \"%s\" role may set an option that reads the server's files.",
						   "pg_read_server_files")));
	if ((needs & PRIV_WRITE) && !has_privs_of_role(user, ROLE_PG_WRITE_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set option \"%s\"", name),
				 errdetail("Only roles with privileges of the \"%s\" role may set an option that lets tms delete the server's files.",
						   "pg_write_server_files")));
}

/*
 * Check every option of a wrapper, a server or a user mapping: a known
 * name in its context, a value of the right form, the privileges an
 * option that reaches the server's files needs.  PostgreSQL passes the
 * complete resulting list (also for ALTER), so the callers can then check
 * required options and combinations.  Returns the context (OPT_SERVER,
 * OPT_MAPPING, or 0 for the wrapper itself and foreign tables).
 */
static int
validate_options(const TmsWrapper *w, List *options, Oid catalog)
{
	int			where;
	ListCell   *lc;

	if (catalog == ForeignServerRelationId)
		where = OPT_SERVER;
	else if (catalog == UserMappingRelationId)
		where = OPT_MAPPING;
	else
		where = 0;				/* the wrapper itself and foreign tables */

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		const TmsOption *o;
		const char *value;

		for (o = w->options; o->name; o++)
			if (strcmp(o->name, def->defname) == 0 && (o->where & where))
				break;
		if (o->name == NULL)
		{
			const char *closest = where ? closest_option(w, def->defname, where) : NULL;

			if (where == 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 errdetail("A %s of %s takes no options.",
								   catalog == ForeignDataWrapperRelationId ?
								   "foreign-data wrapper" : "foreign table", w->name)));
			else if (closest != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 errhint("Perhaps you meant the option \"%s\".", closest)));
			else
			{
				/* an option of the other context? say where it belongs */
				for (o = w->options; o->name; o++)
					if (strcmp(o->name, def->defname) == 0)
						break;
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 o->name ?
						 errdetail("Option \"%s\" belongs to a %s, not a %s.", def->defname,
								   context_name(o->where), context_name(where)) : 0,
						 errhint("Valid options in this context are: %s.",
								 valid_option_names(w, where))));
			}
		}
		value = defGetString(def);
		switch (o->kind)
		{
			case OPT_URL:
				check_url(o->name, value, false);
				break;
			case OPT_SECRET_URL:
				check_url(o->name, value, true);
				break;
			case OPT_WEBHOOK_EVENTS:
				(void) tms_webhook_events(value);
				break;
			case OPT_MS:
				(void) tms_option_ms(o->name, value);
				break;
			case OPT_INT:
				if (strcmp(o->name, "max_concurrent_jobs") == 0)
				{
					/*
					 * read by SQL (tms._budget_check): decimal, no leading
					 * zero
					 */
					if (value[0] < '1' || value[0] > '9' || strspn(value, "0123456789") != strlen(value))
						ereport(ERROR,
								(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
								 errmsg("invalid value for option \"%s\"", o->name),
								 errdetail("\"%s\" is not an integer between %d and %d.",
										   value, 1, 100000)));
					(void) tms_option_int(o->name, value, 1, 100000);
				}
				else if (strcmp(o->name, "page_size") == 0)
					(void) tms_option_int(o->name, value, 1, 100000);
				else
					(void) tms_option_int(o->name, value, 0, 10);
				break;
			case OPT_BOOL:
				(void) tms_option_bool(o->name, value);
				break;
			case OPT_ENGINE_TYPE:
				if (strcmp(value, "livy") != 0 && strcmp(value, "trino") != 0 &&
					strcmp(value, "gravitino") != 0)
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("\"%s\" is not an engine type.", value),
							 errhint("Engine types are livy (Spark through Apache Livy), trino and gravitino.")));
				break;
			case OPT_NAMESPACE:
				tms_check_namespace(value);
				break;
			case OPT_SIGV4_SCOPE:
				if (!io_sigv4_scope_valid(value))
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("\"%s\" is not a name of a SigV4 scope: 1 to 64 letters, digits, '-', '_' or '.'.",
									   value),
							 errhint(strcmp(o->name, "signing_region") == 0 ?
									 "Give the AWS region of the catalog, for example 'us-east-1'." :
									 "Give the service the catalog signs for: 'glue' (AWS Glue), 's3tables' (S3 Tables) or 'execute-api' (API Gateway).")));
				break;
			case OPT_LOCATIONS:
				{
					ListCell   *lc2;
					bool		local = false;

					foreach(lc2, tms_option_locations(o->name, value))
						local |= location_is_local(lfirst(lc2));
					if (local)
						check_file_privileges(o->name, o->files);
					break;
				}
			case OPT_ABSPATH:
				if (value[0] != '/')
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("\"%s\" is not an absolute path.", value)));
				check_file_privileges(o->name, o->files);
				break;
			case OPT_CREDENTIAL:
				{
					const char *colon = strchr(value, ':');

					/* never echo the value: it holds the secret */
					if (colon == NULL || colon == value || colon[1] == '\0')
						ereport(ERROR,
								(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
								 errmsg("invalid value for option \"credential\""),
								 errdetail("The value must have the form client_id:client_secret."),
								 errhint("Use option \"token\" for a bearer token.")));
					break;
				}
			case OPT_SECRET:
			case OPT_TEXT:
				if (o->files)
					check_file_privileges(o->name, o->files);
				if (value[0] == '\0')
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("The value must not be empty.")));
				break;
		}
	}
	return where;
}

/*
 * The Azure options of a user mapping: the shared key is base64 (checked
 * without showing it), and the client credentials go together.
 */
static void
tms_azure_validate(List *options)
{
	const char *key = tms_option(options, "azure_account_key");
	int			nclient = (tms_option(options, "azure_tenant_id") != NULL) +
	(tms_option(options, "azure_client_id") != NULL) +
	(tms_option(options, "azure_client_secret") != NULL);

	if (key != NULL)
	{
		size_t		n = strlen(key);
		size_t		pad = 0;

		while (pad < 2 && pad < n && key[n - 1 - pad] == '=')
			pad++;
		if (n == 0 || n % 4 != 0 ||
			strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != n - pad)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"azure_account_key\""),
					 errdetail("The value is not base64, as the storage account's access keys are."),
					 errhint("Copy an access key of the storage account as the portal or \"az storage account keys list\" shows it.")));
	}
	if (nclient != 0 && nclient != 3)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"azure_tenant_id\", \"azure_client_id\" and \"azure_client_secret\" must be given together"),
				 errhint("They are the client credentials of a service principal of Microsoft Entra ID.")));
}

/*
 * The GCS credentials of a user mapping: HMAC keys come as a pair, one
 * way to authenticate at most, and a service account key that tms can
 * sign with (never echoed).
 */
static void
tms_gcs_validate(List *options)
{
	const char *key = tms_option(options, "gcs_service_account_key");
	bool		have_id = tms_option(options, "gcs_hmac_access_id") != NULL;
	int			ways = (have_id || tms_option(options, "gcs_hmac_secret") != NULL) +
	(tms_option(options, "gcs_oauth2_token") != NULL) + (key != NULL);
	TmsError	err;
	char		detail[sizeof(err.message)];

	if (have_id != (tms_option(options, "gcs_hmac_secret") != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"gcs_hmac_access_id\" and \"gcs_hmac_secret\" must be given together")));
	if (ways > 1)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("only one of HMAC keys, \"gcs_oauth2_token\" and \"gcs_service_account_key\" can be used"),
				 errhint("Use HMAC keys (gcs_hmac_access_id and gcs_hmac_secret), an OAuth2 access token, or a service account key.")));
	if (key == NULL || io_gcs_key_check(key, &err) == 0)
		return;
	/* the reason as a sentence: io's messages start in lowercase */
	strlcpy(detail, err.message, sizeof(detail));
	detail[0] = pg_toupper((unsigned char) detail[0]);
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid value for option \"gcs_service_account_key\""),
			 errdetail("%s.", detail),
			 errhint("Give the text of the service account's JSON key file.")));
}

void
tms_iceberg_validate(List *options, Oid catalog)
{
	int			where = validate_options(&iceberg_wrapper, options, catalog);
	bool		have_credential = tms_option(options, "credential") != NULL;
	bool		have_token = tms_option(options, "token") != NULL;
	bool		have_key_id = tms_option(options, "s3_access_key_id") != NULL;
	bool		have_secret = tms_option(options, "s3_secret_access_key") != NULL;

	if (where == OPT_SERVER && tms_option(options, "uri") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"uri\" is required for a tms_iceberg server"),
				 errhint("Give the base URI of the Iceberg REST catalog, for example OPTIONS (uri 'https://catalog.example.com/api/catalog').")));
	if (have_credential && have_token)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"credential\" and \"token\" cannot be used together"),
				 errhint("Use \"credential\" for OAuth2 client credentials or \"token\" for a fixed bearer token.")));
	if (have_key_id != have_secret)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"s3_access_key_id\" and \"s3_secret_access_key\" must be given together")));
	if (tms_option(options, "s3_session_token") != NULL && !have_key_id)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"s3_session_token\" requires \"s3_access_key_id\" and \"s3_secret_access_key\"")));
	if ((tms_option(options, "aws_access_key_id") != NULL) !=
		(tms_option(options, "aws_secret_access_key") != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"aws_access_key_id\" and \"aws_secret_access_key\" must be given together")));
	if (tms_option(options, "aws_session_token") != NULL &&
		tms_option(options, "aws_access_key_id") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"aws_session_token\" requires \"aws_access_key_id\" and \"aws_secret_access_key\"")));
	tms_azure_validate(options);
	tms_gcs_validate(options);
	if (tms_option(options, "signing_name") != NULL &&
		tms_option(options, "signing_region") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"signing_name\" requires \"signing_region\""),
				 errhint("A server signs its catalog requests with AWS SigV4 when it sets signing_region.")));
}

void
tms_engine_validate(List *options, Oid catalog)
{
	int			where = validate_options(&engine_wrapper, options, catalog);
	const char *type = tms_option(options, "type");
	int			auths = (tms_option(options, "password") != NULL) +
	(tms_option(options, "token") != NULL) +
	(tms_option(options, "credential") != NULL);

	if (where == OPT_SERVER)
	{
		if (type == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"type\" is required for a tms_engine server"),
					 errhint("Engine types are livy (Spark through Apache Livy), trino and gravitino.")));
		if (tms_option(options, "uri") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"uri\" is required for a tms_engine server"),
					 errhint("Give the engine's REST endpoint, for example OPTIONS (uri 'https://livy.example.com:8998').")));
		if (strcmp(type, "gravitino") == 0 && tms_option(options, "metalake") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"metalake\" is required for a gravitino engine"),
					 errhint("Name the metalake whose jobs API runs the job templates.")));
		if (tms_option(options, "catalog") == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"catalog\" is required for a %s engine", type),
					 errhint("Give the name under which the engine knows the Iceberg catalog, for example OPTIONS (ADD catalog 'lake').")));
	}
	if (auths > 1)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("options \"password\", \"token\" and \"credential\" cannot be used together"),
				 errhint("Use \"user\" and \"password\" for basic authentication, \"token\" for a bearer token, or \"credential\" for OAuth2 client credentials.")));
	if (tms_option(options, "password") != NULL && tms_option(options, "user") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"password\" requires \"user\"")));
}

void
tms_webhook_validate(List *options, Oid catalog)
{
	int			where = validate_options(&webhook_wrapper, options, catalog);

	if (where == OPT_MAPPING && tms_option(options, "url") == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"url\" is required for a user mapping of a tms_webhook server"),
				 errhint("Give the receiver's URL, for example OPTIONS (url 'https://hooks.example.com/tms').")));
}

int
tms_webhook_events(const char *value)
{
	char	   *copy = pstrdup(value ? value : WEBHOOK_DEFAULT_EVENTS);
	char	   *tok;
	char	   *save;
	int			mask = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		int			bit;
		size_t		n;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		n = strlen(tok);
		while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
			tok[--n] = '\0';
		if (n == 0)
			continue;
		bit = tms_webhook_event_bit(tok);
		if (bit == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"events\""),
					 errdetail("\"%s\" is not an event a webhook receives.", tok),
					 errhint("Events are job-succeeded, job-failed, job-skipped, job-cancelled, purge-succeeded and purge-failed.")));
		mask |= bit;
	}
	if (mask == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"events\""),
				 errdetail("The list of events is empty.")));
	return mask;
}

int
tms_webhook_event_bit(const char *event)
{
	for (int i = 0; webhook_events[i] != NULL; i++)
		if (strcmp(event, webhook_events[i]) == 0)
			return 1 << i;
	return 0;
}

const char *
tms_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}
