/*-------------------------------------------------------------------------
 *
 * catalog_fdw.c
 *	  The tms_iceberg foreign-data wrapper: its option validator, the
 *	  lookup of server and user mapping for the acting role, a per-backend
 *	  cache of catalog connections, and the mapping of io / iceberg error
 *	  values to ereport with SQLSTATEs.
 *
 * A catalog is "CREATE SERVER s FOREIGN DATA WRAPPER tms_iceberg OPTIONS
 * (uri '...', ...)"; credentials live in "CREATE USER MAPPING FOR role
 * SERVER s OPTIONS (credential 'id:secret' | token '...', s3_...)", where
 * PostgreSQL keeps them from other roles (pg_user_mappings).  Secret
 * option values are never printed: not in errors, not in logs.
 *
 * src/sql_api/catalog_fdw.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "access/reloptions.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "sql_api/catalog_conn.h"

PG_FUNCTION_INFO_V1(tms_iceberg_fdw_validator);

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
	OPT_SECRET
} OptKind;

typedef struct TmsOption
{
	const char *name;
	int			where;
	OptKind		kind;
} TmsOption;

static const TmsOption tms_options[] = {
	{"uri", OPT_SERVER, OPT_URL},
	{"warehouse", OPT_SERVER, OPT_TEXT},
	{"prefix", OPT_SERVER, OPT_TEXT},
	{"oauth2_server_uri", OPT_SERVER, OPT_TEXT},
	{"scope", OPT_SERVER, OPT_TEXT},
	{"connect_timeout", OPT_SERVER, OPT_MS},
	{"request_timeout", OPT_SERVER, OPT_MS},
	{"retries", OPT_SERVER, OPT_INT},
	{"page_size", OPT_SERVER, OPT_INT},
	{"ca_file", OPT_SERVER, OPT_TEXT},
	{"ca_path", OPT_SERVER, OPT_TEXT},
	{"s3_endpoint", OPT_SERVER, OPT_URL},
	{"s3_region", OPT_SERVER, OPT_TEXT},
	{"s3_path_style", OPT_SERVER, OPT_BOOL},
	{"allowed_locations", OPT_SERVER, OPT_LOCATIONS},
	{"relative_path_root", OPT_SERVER, OPT_ABSPATH},
	{"credential", OPT_MAPPING, OPT_CREDENTIAL},
	{"token", OPT_MAPPING, OPT_SECRET},
	{"s3_access_key_id", OPT_MAPPING, OPT_TEXT},
	{"s3_secret_access_key", OPT_MAPPING, OPT_SECRET},
	{"s3_session_token", OPT_MAPPING, OPT_SECRET},
	{NULL, 0, 0}
};

/* The option names valid in a context, comma separated (palloc'd). */
static char *
valid_option_names(int where)
{
	StringInfoData buf;
	const TmsOption *o;

	initStringInfo(&buf);
	for (o = tms_options; o->name; o++)
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
closest_option(const char *name, int where)
{
	const TmsOption *o;
	const char *best = NULL;
	int			best_d = 4;

	for (o = tms_options; o->name; o++)
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

/* Check a value that must be an http(s) URL with a host. */
static void
check_url(const char *name, const char *value)
{
	const char *host;

	if (strncmp(value, "http://", 7) == 0)
		host = value + 7;
	else if (strncmp(value, "https://", 8) == 0)
		host = value + 8;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" is not an http:// or https:// URL.", value)));
	if (*host == '\0' || *host == '/' || *host == ':' || strpbrk(value, " \t\r\n") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" has no host name or contains white space.", value)));
}

/* Parse a duration in ms (units allowed: "500ms", "10s", "1min"). */
int
tms_fdw_option_ms(const char *name, const char *value)
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

static int
parse_int_option(const char *name, const char *value, int min, int max)
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
tms_fdw_option_bool(const char *name, const char *value)
{
	bool		result;

	if (!parse_bool(value, &result))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("\"%s\" is not a Boolean value.", value)));
	return result;
}

/* Split a comma list of storage locations; each must parse as a URI. */
List *
tms_fdw_option_locations(const char *name, const char *value)
{
	List	   *result = NIL;
	char	   *copy = pstrdup(value);
	char	   *tok;
	char	   *save;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		IoParsedUri u;
		IoError		err;
		char	   *t = tok;
		size_t		n;

		while (*t == ' ' || *t == '\t')
			t++;
		n = strlen(t);
		while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
			t[--n] = '\0';
		if (n == 0)
			continue;
		if (io_uri_parse(t, &u, &err) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"%s\"", name),
					 errdetail("\"%s\" is neither an absolute path, a file:// URI nor an s3:// URI.", t)));
		if ((u.scheme == IO_URI_S3 && u.path[0] == '\0' && strchr(t + 5, '/') == NULL) ||
			(u.scheme == IO_URI_FILE && strcmp(u.path, "/") == 0))
		{
			/* a whole bucket is allowed; the file-system root is not */
			if (u.scheme == IO_URI_FILE)
			{
				io_uri_free(&u);
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\"", name),
						 errdetail("The file system root cannot be an allowed location.")));
			}
		}
		io_uri_free(&u);
		result = lappend(result, pstrdup(t));
	}
	if (result == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\"", name),
				 errdetail("The list of locations is empty.")));
	return result;
}

/*
 * Validate the options of the wrapper, a server or a user mapping.
 * PostgreSQL passes the complete resulting list (also for ALTER), so
 * required options and combinations can be checked here.
 */
Datum
tms_iceberg_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	int			where;
	ListCell   *lc;
	bool		have_uri = false;
	bool		have_credential = false;
	bool		have_token = false;
	bool		have_key_id = false;
	bool		have_secret = false;
	bool		have_session = false;

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

		for (o = tms_options; o->name; o++)
			if (strcmp(o->name, def->defname) == 0 && (o->where & where))
				break;
		if (o->name == NULL)
		{
			const char *closest = where ? closest_option(def->defname, where) : NULL;

			if (where == 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 errdetail("A %s of tms_iceberg takes no options.",
								   catalog == ForeignDataWrapperRelationId ?
								   "foreign-data wrapper" : "foreign table")));
			else if (closest != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 errhint("Perhaps you meant the option \"%s\".", closest)));
			else
			{
				/* an option of the other context? say where it belongs */
				for (o = tms_options; o->name; o++)
					if (strcmp(o->name, def->defname) == 0)
						break;
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\"", def->defname),
						 o->name ?
						 errdetail("Option \"%s\" belongs to a %s, not a %s.", def->defname,
								   context_name(o->where), context_name(where)) : 0,
						 errhint("Valid options in this context are: %s.",
								 valid_option_names(where))));
			}
		}
		value = defGetString(def);
		switch (o->kind)
		{
			case OPT_URL:
				check_url(o->name, value);
				break;
			case OPT_MS:
				(void) tms_fdw_option_ms(o->name, value);
				break;
			case OPT_INT:
				if (strcmp(o->name, "page_size") == 0)
					(void) parse_int_option(o->name, value, 1, 100000);
				else
					(void) parse_int_option(o->name, value, 0, 10);
				break;
			case OPT_BOOL:
				(void) tms_fdw_option_bool(o->name, value);
				break;
			case OPT_LOCATIONS:
				(void) tms_fdw_option_locations(o->name, value);
				break;
			case OPT_ABSPATH:
				if (value[0] != '/')
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("\"%s\" is not an absolute path.", value)));
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
				if (value[0] == '\0')
					ereport(ERROR,
							(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
							 errmsg("invalid value for option \"%s\"", o->name),
							 errdetail("The value must not be empty.")));
				break;
		}
		if (strcmp(o->name, "uri") == 0)
			have_uri = true;
		else if (strcmp(o->name, "credential") == 0)
			have_credential = true;
		else if (strcmp(o->name, "token") == 0)
			have_token = true;
		else if (strcmp(o->name, "s3_access_key_id") == 0)
			have_key_id = true;
		else if (strcmp(o->name, "s3_secret_access_key") == 0)
			have_secret = true;
		else if (strcmp(o->name, "s3_session_token") == 0)
			have_session = true;
	}

	if (where == OPT_SERVER && !have_uri)
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
	if (have_session && !have_key_id)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"s3_session_token\" requires \"s3_access_key_id\" and \"s3_secret_access_key\"")));

	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 * Error mapping
 * ----------------------------------------------------------------
 */

int
tms_io_sqlstate(IoErrorCode code)
{
	switch (code)
	{
		case IO_OK:
			return ERRCODE_INTERNAL_ERROR;
		case IO_ERR_INVALID_ARGUMENT:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case IO_ERR_OUT_OF_MEMORY:
			return ERRCODE_OUT_OF_MEMORY;
		case IO_ERR_INTERRUPTED:
			return ERRCODE_QUERY_CANCELED;
		case IO_ERR_TIMEOUT:
			return ERRCODE_CONNECTION_FAILURE;
		case IO_ERR_CONNECT:
		case IO_ERR_TLS:
			return ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION;
		case IO_ERR_PROTOCOL:
			return ERRCODE_PROTOCOL_VIOLATION;
		case IO_ERR_TOO_LARGE:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case IO_ERR_BAD_REQUEST:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case IO_ERR_UNAUTHORIZED:
			return ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		case IO_ERR_FORBIDDEN:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case IO_ERR_NOT_FOUND:
			return ERRCODE_UNDEFINED_OBJECT;
		case IO_ERR_NO_SUCH_NAMESPACE:
			return ERRCODE_INVALID_SCHEMA_NAME;
		case IO_ERR_NO_SUCH_TABLE:
			return ERRCODE_UNDEFINED_TABLE;
		case IO_ERR_ALREADY_EXISTS:
			return ERRCODE_DUPLICATE_OBJECT;
		case IO_ERR_CONFLICT:
			return ERRCODE_T_R_SERIALIZATION_FAILURE;
		case IO_ERR_COMMIT_STATE_UNKNOWN:
			return ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN;
		case IO_ERR_UNAVAILABLE:
			return ERRCODE_CANNOT_CONNECT_NOW;
		case IO_ERR_SERVER:
			return ERRCODE_FDW_ERROR;
		case IO_ERR_UNSUPPORTED:
			return ERRCODE_FEATURE_NOT_SUPPORTED;
		case IO_ERR_STORAGE:
			return ERRCODE_IO_ERROR;
		case IO_ERR_INTERNAL:
			return ERRCODE_INTERNAL_ERROR;
	}
	return ERRCODE_INTERNAL_ERROR;
}

void
tms_io_ereport(const IoError *err)
{
	CHECK_FOR_INTERRUPTS();
	ereport(ERROR,
			(errcode(tms_io_sqlstate(err->code)),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0,
			 err->code == IO_ERR_CONFLICT ?
			 errhint("Another writer changed the table; reload its metadata and retry.") :
			 err->code == IO_ERR_COMMIT_STATE_UNKNOWN ?
			 errhint("The commit may or may not have been applied; reload the table and check before retrying.") :
			 err->code == IO_ERR_TIMEOUT ?
			 errhint("The server options \"connect_timeout\" and \"request_timeout\" set the limits.") :
			 err->code == IO_ERR_UNAUTHORIZED ?
			 errhint("Check the \"credential\" or \"token\" option of the user mapping.") : 0));
	pg_unreachable();
}

void
tms_iceberg_ereport(const IcebergError *err, const IoError *io_err)
{
	int			code;

	CHECK_FOR_INTERRUPTS();
	switch (err->code)
	{
		case ICEBERG_ERR_MALFORMED:
			code = ERRCODE_DATA_EXCEPTION;
			break;
		case ICEBERG_ERR_UNSUPPORTED:
			code = ERRCODE_FEATURE_NOT_SUPPORTED;
			break;
		case ICEBERG_ERR_IO:
			code = (io_err != NULL && io_err->code != IO_OK) ?
				tms_io_sqlstate(io_err->code) : ERRCODE_IO_ERROR;
			break;
		case ICEBERG_ERR_NOT_FOUND:
			code = ERRCODE_UNDEFINED_OBJECT;
			break;
		case ICEBERG_ERR_LIMIT:
			code = ERRCODE_PROGRAM_LIMIT_EXCEEDED;
			break;
		case ICEBERG_ERR_OUT_OF_MEMORY:
			code = ERRCODE_OUT_OF_MEMORY;
			break;
		case ICEBERG_ERR_CANCELLED:
			code = ERRCODE_QUERY_CANCELED;
			break;
		case ICEBERG_ERR_INVALID_ARGUMENT:
			code = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
		default:
			code = ERRCODE_INTERNAL_ERROR;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0));
	pg_unreachable();
}

/* ----------------------------------------------------------------
 * Connections
 * ----------------------------------------------------------------
 */

#define MAX_CACHED_CONNS 32

static TmsCatalogConn *conn_cache[MAX_CACHED_CONNS];
static int	nconn_cache = 0;
static bool callbacks_registered = false;

int
tms_io_interrupted(void *arg)
{
	(void) arg;
	/*
	 * Only a cancel or termination ends a request: InterruptPending alone is
	 * also set by benign interrupts (the idle statistics timeout fires 10 s
	 * after the session's last idle time, during a long statement).
	 */
	return (QueryCancelPending || ProcDiePending) ? 1 : 0;
}

/* Free everything a connection owns (malloc'd). */
static void
conn_free(TmsCatalogConn *c)
{
	int			i;

	if (c == NULL)
		return;
	io_catalog_free(c->catalog);
	free(c->server_name);
	free((char *) c->storage.s3_endpoint);
	free((char *) c->storage.s3_region);
	free((char *) c->storage.s3_access_key_id);
	if (c->storage.s3_secret_access_key)
		explicit_bzero((char *) c->storage.s3_secret_access_key,
					   strlen(c->storage.s3_secret_access_key));
	free((char *) c->storage.s3_secret_access_key);
	if (c->storage.s3_session_token)
		explicit_bzero((char *) c->storage.s3_session_token,
					   strlen(c->storage.s3_session_token));
	free((char *) c->storage.s3_session_token);
	free(c->relative_root);
	free((char *) c->http.ca_file);
	free((char *) c->http.ca_path);
	for (i = 0; i < c->nallowed; i++)
		free(c->allowed[i]);
	free(c->allowed);
	free(c);
}

/* Syscache callback: any change to a server or user mapping invalidates. */
static void
invalidate_conns(Datum arg, int cacheid, uint32 hashvalue)
{
	int			i;

	for (i = 0; i < nconn_cache; i++)
		conn_cache[i]->valid = false;
}

/* malloc'd copy or ereport on OOM. */
static char *
xstrdup(const char *s)
{
	char	   *p;

	if (s == NULL)
		return NULL;
	p = strdup(s);
	if (p == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	return p;
}

/* The value of option name in a server's or mapping's options, or NULL. */
const char *
tms_fdw_option(List *options, const char *name)
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

/* Build a connection's settings (no network yet) from server + mapping. */
static void
conn_fill(TmsCatalogConn *c, ForeignServer *server, UserMapping *um)
{
	const char *v;

	c->server_name = xstrdup(server->servername);
	memset(&c->http, 0, sizeof(c->http));
	c->http.retries = -1;
	if ((v = tms_fdw_option(server->options, "connect_timeout")) != NULL)
		c->http.connect_timeout_ms = tms_fdw_option_ms("connect_timeout", v);
	if ((v = tms_fdw_option(server->options, "request_timeout")) != NULL)
		c->http.request_timeout_ms = tms_fdw_option_ms("request_timeout", v);
	if ((v = tms_fdw_option(server->options, "retries")) != NULL)
		c->http.retries = parse_int_option("retries", v, 0, 10);
	c->relative_root = xstrdup(tms_fdw_option(server->options, "relative_path_root"));
	c->http.ca_file = xstrdup(tms_fdw_option(server->options, "ca_file"));
	c->http.ca_path = xstrdup(tms_fdw_option(server->options, "ca_path"));
	c->http.interrupted = tms_io_interrupted;
	c->http.interrupt_arg = NULL;

	memset(&c->storage, 0, sizeof(c->storage));
	c->storage.s3_endpoint = xstrdup(tms_fdw_option(server->options, "s3_endpoint"));
	c->storage.s3_region = xstrdup(tms_fdw_option(server->options, "s3_region"));
	c->storage.s3_path_style = -1;
	if ((v = tms_fdw_option(server->options, "s3_path_style")) != NULL)
		c->storage.s3_path_style = tms_fdw_option_bool("s3_path_style", v) ? 1 : 0;
	c->storage.s3_access_key_id = xstrdup(tms_fdw_option(um->options, "s3_access_key_id"));
	c->storage.s3_secret_access_key = xstrdup(tms_fdw_option(um->options, "s3_secret_access_key"));
	c->storage.s3_session_token = xstrdup(tms_fdw_option(um->options, "s3_session_token"));
	c->storage.http = c->http;

	if ((v = tms_fdw_option(server->options, "allowed_locations")) != NULL)
	{
		List	   *locs = tms_fdw_option_locations("allowed_locations", v);
		ListCell   *lc;

		c->allowed = calloc(list_length(locs), sizeof(char *));
		if (c->allowed == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		foreach(lc, locs)
			c->allowed[c->nallowed++] = xstrdup(lfirst(lc));
	}
}

TmsCatalogConn *
tms_catalog_connect(const char *server_name)
{
	ForeignServer *server;
	ForeignDataWrapper *fdw;
	UserMapping *um;
	AclResult	aclresult;
	Oid			userid = GetUserId();
	HeapTuple	tp;
	int			i;
	TmsCatalogConn *volatile c = NULL;
	IoCatalogConfig cfg;
	IoError		err;
	IoCatalog  *cat;

	if (!callbacks_registered)
	{
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID, invalidate_conns, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID, invalidate_conns, (Datum) 0);
		callbacks_registered = true;
	}

	server = GetForeignServerByName(server_name, false);
	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, "tms_iceberg") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a tms_iceberg server", server_name),
				 errdetail("It uses the foreign-data wrapper \"%s\".", fdw->fdwname)));
	aclresult = pg_foreign_server_aclcheck(server->serverid, userid, ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);

	/* a mapping for the user or for PUBLIC is required */
	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
						 ObjectIdGetDatum(server->serverid));
	if (!HeapTupleIsValid(tp))
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(server->serverid));
	if (!HeapTupleIsValid(tp))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("user mapping not found for role \"%s\" on server \"%s\"",
						GetUserNameFromId(userid, false), server->servername),
				 errhint("Create one with CREATE USER MAPPING FOR %s SERVER %s OPTIONS (credential 'client_id:client_secret'); it may have no options when the catalog needs no credentials.",
						 quote_identifier(GetUserNameFromId(userid, false)),
						 quote_identifier(server->servername))));
	ReleaseSysCache(tp);
	um = GetUserMapping(userid, server->serverid);

	/* cached? drop invalidated entries on the way */
	for (i = 0; i < nconn_cache;)
	{
		TmsCatalogConn *e = conn_cache[i];

		if (!e->valid)
		{
			conn_free(e);
			conn_cache[i] = conn_cache[--nconn_cache];
			continue;
		}
		if (e->serverid == server->serverid && e->userid == userid)
		{
			io_catalog_set_http(e->catalog, &e->http);
			return e;
		}
		i++;
	}

	c = calloc(1, sizeof(TmsCatalogConn));
	if (c == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		c->serverid = server->serverid;
		c->userid = userid;
		conn_fill(c, server, um);
	}
	PG_CATCH();
	{
		conn_free(c);
		PG_RE_THROW();
	}
	PG_END_TRY();

	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = tms_fdw_option(server->options, "uri");
	cfg.warehouse = tms_fdw_option(server->options, "warehouse");
	cfg.prefix = tms_fdw_option(server->options, "prefix");
	cfg.oauth2_server_uri = tms_fdw_option(server->options, "oauth2_server_uri");
	cfg.scope = tms_fdw_option(server->options, "scope");
	cfg.credential = tms_fdw_option(um->options, "credential");
	cfg.token = tms_fdw_option(um->options, "token");
	cfg.http = c->http;
	if (tms_fdw_option(server->options, "page_size") != NULL)
		cfg.page_size = parse_int_option("page_size",
										 tms_fdw_option(server->options, "page_size"), 1, 100000);
	if (cfg.uri == NULL)
	{
		conn_free(c);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("server \"%s\" has no option \"uri\"", server_name)));
	}

	cat = io_catalog_open(&cfg, &err);
	if (cat == NULL)
	{
		conn_free(c);
		tms_io_ereport(&err);
	}
	c->catalog = cat;
	c->valid = true;
	if (nconn_cache == MAX_CACHED_CONNS)
	{
		conn_free(conn_cache[0]);
		conn_cache[0] = conn_cache[--nconn_cache];
	}
	conn_cache[nconn_cache++] = c;
	return c;
}

IoStorage *
tms_catalog_storage(TmsCatalogConn *conn, const IoLoadedTable *table)
{
	IoStorageConfig cfg = conn->storage;
	IoStorage  *st;
	IoError		err;

	cfg.http = conn->http;
	if (table != NULL)
		io_storage_config_apply(&cfg, table->config, table->nconfig);
	st = io_storage_create(&cfg, &err);
	if (st == NULL)
		tms_io_ereport(&err);
	return st;
}

char *
tms_namespace_to_io(const char *ns)
{
	char	   *r = pstrdup(ns);
	char	   *p;

	for (p = r; *p; p++)
		if (*p == '.')
			*p = IO_NS_SEP;
	return r;
}

char *
tms_namespace_from_io(const char *ns)
{
	char	   *r = pstrdup(ns);
	char	   *p;

	for (p = r; *p; p++)
		if (*p == IO_NS_SEP)
			*p = '.';
	return r;
}

bool
tms_location_allowed(const TmsCatalogConn *conn, const char *location)
{
	int			i;

	for (i = 0; i < conn->nallowed; i++)
	{
		const char *a = conn->allowed[i];
		size_t		n = strlen(a);

		if (strncmp(location, a, n) == 0 &&
			(n == 0 || a[n - 1] == '/' || location[n] == '\0' || location[n] == '/'))
			return true;
	}
	return false;
}
