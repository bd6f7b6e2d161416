/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Catalog servers, their credentials, locations and storage, and the
 *	  per-backend connection cache (catalog.h).
 *
 * Everything a connection or a TmsServer owns is malloc'd, so it can live
 * in the cache across transactions; reading options (which may raise) is
 * done into palloc'd memory first and copied once it is complete.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>
#include <string.h>

#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/wait_event.h"

#include "bridge/catalog.h"
#include "bridge/errors.h"
#include "bridge/names.h"
#include "bridge/fdw_options.h"
#include "bridge/jsonb_secrets.h"
#include "bridge/settings.h"
#include "observe/stats.h"

/* ----------------------------------------------------------------
 * Servers and credentials
 * ----------------------------------------------------------------
 */

/* The memory limits of every request are the settings of the moment. */
static void
set_memory_limits(IoHttpOptions *http)
{
	http->max_response_bytes = (size_t) tms_max_response_size_kb * 1024;
	http->max_json_bytes = (size_t) tms_max_json_memory_kb * 1024;
}

void
tms_server_free(TmsServer *s)
{
	if (s == NULL)
		return;
	free(s->name);
	free(s->uri);
	free(s->warehouse);
	free(s->prefix);
	free(s->oauth2_server_uri);
	free(s->scope);
	free(s->signing_region);
	free(s->signing_name);
	free((char *) s->http.ca_file);
	free((char *) s->http.ca_path);
	free(s->s3_endpoint);
	free(s->s3_region);
	free(s->azure_endpoint);
	free(s->azure_token_url);
	free(s->gcs_endpoint);
	free(s->relative_root);
	free(s->purge_hold_namespace);
	for (int i = 0; i < s->nallowed; i++)
		free(s->allowed[i]);
	free(s->allowed);
	free(s->local);				/* its strings are allowed[]'s */
	free(s);
}

TmsServer *
tms_server_read(ForeignServer *server)
{
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);
	List	   *o = server->options;
	const char *v;
	List	   *allowed = NIL;
	TmsServer  *volatile s;

	if (strcmp(fdw->fdwname, "tms_iceberg") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a tms_iceberg server", server->servername),
				 errdetail("It uses the foreign-data wrapper \"%s\".", fdw->fdwname)));
	if ((v = tms_option(o, "allowed_locations")) != NULL)
		allowed = tms_option_locations("allowed_locations", v);

	s = calloc(1, sizeof(TmsServer));
	if (s == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		ListCell   *lc;

		s->serverid = server->serverid;
		s->owner = server->owner;
		s->name = tms_malloc_strdup(server->servername);
		s->uri = tms_malloc_strdup(tms_option(o, "uri"));
		s->warehouse = tms_malloc_strdup(tms_option(o, "warehouse"));
		s->prefix = tms_malloc_strdup(tms_option(o, "prefix"));
		s->oauth2_server_uri = tms_malloc_strdup(tms_option(o, "oauth2_server_uri"));
		s->scope = tms_malloc_strdup(tms_option(o, "scope"));
		s->signing_region = tms_malloc_strdup(tms_option(o, "signing_region"));
		s->signing_name = tms_malloc_strdup(tms_option(o, "signing_name"));
		if ((v = tms_option(o, "page_size")) != NULL)
			s->page_size = tms_option_int("page_size", v, 1, 100000);
		s->http.retries = -1;
		if ((v = tms_option(o, "connect_timeout")) != NULL)
			s->http.connect_timeout_ms = tms_option_ms("connect_timeout", v);
		if ((v = tms_option(o, "request_timeout")) != NULL)
			s->http.request_timeout_ms = tms_option_ms("request_timeout", v);
		if ((v = tms_option(o, "retries")) != NULL)
			s->http.retries = tms_option_int("retries", v, 0, 10);
		s->http.ca_file = tms_malloc_strdup(tms_option(o, "ca_file"));
		s->http.ca_path = tms_malloc_strdup(tms_option(o, "ca_path"));
		set_memory_limits(&s->http);
		tms_io_set_waits(&s->http);
		tms_stat_observe_http(&s->http, s->name, "catalog");
		s->s3_endpoint = tms_malloc_strdup(tms_option(o, "s3_endpoint"));
		s->s3_region = tms_malloc_strdup(tms_option(o, "s3_region"));
		s->s3_path_style = -1;
		if ((v = tms_option(o, "s3_path_style")) != NULL)
			s->s3_path_style = tms_option_bool("s3_path_style", v) ? 1 : 0;
		if ((v = tms_option(o, "s3_vended_endpoint")) != NULL)
			s->s3_vended_endpoint = tms_option_bool("s3_vended_endpoint", v);
		s->azure_endpoint = tms_malloc_strdup(tms_option(o, "azure_endpoint"));
		s->azure_token_url = tms_malloc_strdup(tms_option(o, "azure_token_url"));
		s->gcs_endpoint = tms_malloc_strdup(tms_option(o, "gcs_endpoint"));
		s->relative_root = tms_malloc_strdup(tms_option(o, "relative_path_root"));
		s->purge_hold_namespace = tms_malloc_strdup(tms_option(o, "purge_hold_namespace"));

		s->allowed = calloc(list_length(allowed) + 1, sizeof(char *));
		s->local = calloc(list_length(allowed) + 1, sizeof(char *));
		if (s->allowed == NULL || s->local == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		foreach(lc, allowed)
		{
			char	   *c = tms_malloc_strdup(lfirst(lc));

			s->allowed[s->nallowed++] = c;
			if (c[0] == '/')
				s->local[s->nlocal++] = c;
		}
	}
	PG_CATCH();
	{
		tms_server_free(s);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return s;
}

TmsServer *
tms_server_read_by_name(const char *name, bool missing_ok)
{
	ForeignServer *server = GetForeignServerByName(name, missing_ok);

	return server ? tms_server_read(server) : NULL;
}

void
tms_credentials_free(TmsCredentials *c)
{
	tms_free_secret(c->credential);
	tms_free_secret(c->token);
	free(c->s3_access_key_id);
	tms_free_secret(c->s3_secret_access_key);
	tms_free_secret(c->s3_session_token);
	free(c->aws_access_key_id);
	tms_free_secret(c->aws_secret_access_key);
	tms_free_secret(c->aws_session_token);
	tms_free_secret(c->azure_account_key);
	tms_free_secret(c->azure_sas_token);
	free(c->azure_tenant_id);
	free(c->azure_client_id);
	tms_free_secret(c->azure_client_secret);
	free(c->gcs_hmac_access_id);
	tms_free_secret(c->gcs_hmac_secret);
	tms_free_secret(c->gcs_oauth2_token);
	tms_free_secret(c->gcs_service_account_key);
	memset(c, 0, sizeof(*c));
}

void
tms_credentials_read(Oid role, Oid serverid, TmsCredentials *out)
{
	HeapTuple	tp;
	UserMapping *um;
	Oid			user = role;

	memset(out, 0, sizeof(*out));
	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
						 ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
	{
		user = InvalidOid;
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
							 ObjectIdGetDatum(serverid));
	}
	if (!HeapTupleIsValid(tp))
		return;
	ReleaseSysCache(tp);
	um = GetUserMapping(user, serverid);
	out->found = true;
	out->mapping_user = user;
	PG_TRY();
	{
		out->credential = tms_malloc_strdup(tms_option(um->options, "credential"));
		out->token = tms_malloc_strdup(tms_option(um->options, "token"));
		out->s3_access_key_id = tms_malloc_strdup(tms_option(um->options, "s3_access_key_id"));
		out->s3_secret_access_key = tms_malloc_strdup(tms_option(um->options, "s3_secret_access_key"));
		out->s3_session_token = tms_malloc_strdup(tms_option(um->options, "s3_session_token"));
		out->aws_access_key_id = tms_malloc_strdup(tms_option(um->options, "aws_access_key_id"));
		out->aws_secret_access_key = tms_malloc_strdup(tms_option(um->options, "aws_secret_access_key"));
		out->aws_session_token = tms_malloc_strdup(tms_option(um->options, "aws_session_token"));
		out->azure_account_key = tms_malloc_strdup(tms_option(um->options, "azure_account_key"));
		out->azure_sas_token = tms_malloc_strdup(tms_option(um->options, "azure_sas_token"));
		out->azure_tenant_id = tms_malloc_strdup(tms_option(um->options, "azure_tenant_id"));
		out->azure_client_id = tms_malloc_strdup(tms_option(um->options, "azure_client_id"));
		out->azure_client_secret = tms_malloc_strdup(tms_option(um->options, "azure_client_secret"));
		out->gcs_hmac_access_id = tms_malloc_strdup(tms_option(um->options, "gcs_hmac_access_id"));
		out->gcs_hmac_secret = tms_malloc_strdup(tms_option(um->options, "gcs_hmac_secret"));
		out->gcs_oauth2_token = tms_malloc_strdup(tms_option(um->options, "gcs_oauth2_token"));
		out->gcs_service_account_key = tms_malloc_strdup(tms_option(um->options, "gcs_service_account_key"));
	}
	PG_CATCH();
	{
		tms_credentials_free(out);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* ----------------------------------------------------------------
 * Locations and storage
 * ----------------------------------------------------------------
 */

char *
tms_location_canonical(const TmsServer *s, const char *path, char **why)
{
	TmsError	err;
	char	   *c;
	char	   *r;

	if (io_location_canonical(path, s->relative_root, &c, &err) != 0)
	{
		if (why)
			*why = pstrdup(err.message);
		return NULL;
	}
	r = pstrdup(c);
	io_free(c);
	return r;
}

bool
tms_location_allowed(const TmsServer *s, const char *canonical)
{
	for (int i = 0; i < s->nallowed; i++)
		if (io_location_under(canonical, s->allowed[i]))
			return true;
	return false;
}

char *
tms_check_table_location(const TmsServer *s, const char *ns, const char *table,
						 const char *location, const char *what)
{
	char	   *why = NULL;
	char	   *c;

	if (s->nallowed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot %s tables of server \"%s\": it has no allowed_locations",
						what, s->name),
				 errdetail("tms deletes files only strictly below the storage roots a server allows."),
				 errhint("ALTER SERVER %s OPTIONS (ADD allowed_locations 's3://bucket/warehouse/');",
						 quote_identifier(s->name))));
	if (location == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("cannot %s table \"%s.%s\": its metadata has no location", what, ns, table)));
	c = tms_location_canonical(s, location, &why);
	if (c == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot %s table \"%s.%s\": its location cannot be resolved", what, ns, table),
				 errdetail("The location is \"%s\": %s.", location, why),
				 errhint("A relative location needs the server option relative_path_root.")));
	if (!tms_location_allowed(s, c))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot %s table \"%s.%s\": its location is not below the allowed_locations of server \"%s\"",
						what, ns, table, s->name),
				 errdetail("The location is \"%s\"; a table must lie strictly below an allowed location.",
						   location),
				 errhint("Add a storage root above it to the server option allowed_locations.")));
	return c;
}

IoStorage *
tms_storage_open(const TmsServer *s, const TmsCredentials *c,
				 const IoKeyValue *vended, size_t n, TmsError *err)
{
	IoStorageConfig cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.s3_endpoint = s->s3_endpoint;
	cfg.s3_region = s->s3_region;
	cfg.s3_path_style = s->s3_path_style;
	if (c != NULL)
	{
		cfg.s3_access_key_id = c->s3_access_key_id;
		cfg.s3_secret_access_key = c->s3_secret_access_key;
		cfg.s3_session_token = c->s3_session_token;
		cfg.azure_account_key = c->azure_account_key;
		cfg.azure_sas_token = c->azure_sas_token;
		cfg.azure_tenant_id = c->azure_tenant_id;
		cfg.azure_client_id = c->azure_client_id;
		cfg.azure_client_secret = c->azure_client_secret;
		cfg.gcs_hmac_access_id = c->gcs_hmac_access_id;
		cfg.gcs_hmac_secret = c->gcs_hmac_secret;
		cfg.gcs_oauth2_token = c->gcs_oauth2_token;
		cfg.gcs_service_account_key = c->gcs_service_account_key;
	}
	cfg.azure_endpoint = s->azure_endpoint;
	cfg.azure_token_url = s->azure_token_url;
	cfg.gcs_endpoint = s->gcs_endpoint;
	cfg.local_roots = (const char *const *) s->local;
	cfg.nlocal_roots = s->nlocal;
	cfg.http = s->http;
	tms_stat_observe_http(&cfg.http, s->name, "storage");
	if (n > 0)
		io_storage_config_apply(&cfg, vended, n, s->s3_vended_endpoint);
	return io_storage_create(&cfg, err);
}

void
tms_table_fileio(TmsTableFileIO *tio, const TmsServer *s, IoStorage *storage,
				 IcebergFileIO *out)
{
	memset(out, 0, sizeof(*out));
	io_storage_fileio(&tio->state, storage, s->relative_root, tms_io_interrupted,
					  NULL, &out->io);
	iceberg_limits_default(&tio->limits);
	tio->limits.max_json_bytes = (int64) tms_max_json_memory_kb * 1024;
	out->limits = &tio->limits;
}

/* ----------------------------------------------------------------
 * Connections
 * ----------------------------------------------------------------
 */

#define MAX_CACHED_CONNS 32

static TmsCatalogConn *conn_cache[MAX_CACHED_CONNS];
static int	nconn_cache = 0;
static bool callbacks_registered = false;

bool		(*tms_io_extra_interrupt) (void) = NULL;

int
tms_io_interrupted(void *arg)
{
	(void) arg;
	/* as a WaitLatch with WL_EXIT_ON_PM_DEATH does (never inside libcurl) */
	if (!PostmasterIsAlive())
		proc_exit(1);
	if (QueryCancelPending || ProcDiePending)
		return 1;
	return (tms_io_extra_interrupt != NULL && tms_io_extra_interrupt()) ? 1 : 0;
}

/* IoHttpOptions.sleep_ms: a latch wait, as pg_sleep does. */
static void
tms_io_sleep(void *arg, long ms)
{
	(void) arg;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/* IoHttpOptions.waiting: the wait event of a network wait. */
static void
tms_io_waiting(void *arg, bool waiting)
{
	(void) arg;
	if (waiting)
		pgstat_report_wait_start(PG_WAIT_EXTENSION);
	else
		pgstat_report_wait_end();
}

void
tms_io_set_waits(IoHttpOptions *http)
{
	http->interrupted = tms_io_interrupted;
	http->interrupt_arg = NULL;
	http->sleep_ms = tms_io_sleep;
	http->waiting = tms_io_waiting;
}

static void
conn_free(TmsCatalogConn *c)
{
	if (c == NULL)
		return;
	io_catalog_free(c->catalog);
	tms_server_free(c->server);
	tms_credentials_free(&c->creds);
	free(c);
}

/* Free unpinned invalid connections. */
static void
conn_sweep(void)
{
	for (int i = 0; i < nconn_cache;)
	{
		TmsCatalogConn *e = conn_cache[i];

		if (!e->valid && e->pins == 0 && e->xact_pins == 0)
		{
			conn_free(e);
			conn_cache[i] = conn_cache[--nconn_cache];
			continue;
		}
		i++;
	}
}

/* Syscache callback: any change to a server or user mapping invalidates. */
static void
invalidate_conns(Datum arg, int cacheid, uint32 hashvalue)
{
	for (int i = 0; i < nconn_cache; i++)
		conn_cache[i]->valid = false;
}

/* At the end of every transaction, the transaction's pins go. */
static void
conn_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		for (int i = 0; i < nconn_cache; i++)
			conn_cache[i]->xact_pins = 0;
}

/*
 * SigV4 needs both halves: the server's signing_region and the AWS keys of
 * the user mapping.  Each validator sees only its own object's options, so
 * the pair is checked here, before anything is sent.
 */
static void
check_signing(const TmsServer *s, const TmsCredentials *c, Oid userid)
{
	const char *role = c->mapping_user == InvalidOid ? "public" :
	GetUserNameFromId(userid, false);

	if (s->signing_region != NULL && c->aws_access_key_id == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("user mapping for \"%s\" on server \"%s\" has no option \"aws_access_key_id\"",
						role, s->name),
				 errdetail("The server signs catalog requests with AWS SigV4 (option \"signing_region\")."),
				 errhint("ALTER USER MAPPING FOR %s SERVER %s OPTIONS (ADD aws_access_key_id '...', ADD aws_secret_access_key '...');",
						 c->mapping_user == InvalidOid ? "PUBLIC" : quote_identifier(role),
						 quote_identifier(s->name))));
	if (s->signing_region == NULL && c->aws_access_key_id != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("server \"%s\" has no option \"signing_region\"", s->name),
				 errdetail("The user mapping for \"%s\" has AWS keys, which sign catalog requests only when the server sets a signing region.",
						   role),
				 errhint("ALTER SERVER %s OPTIONS (ADD signing_region 'us-east-1', ADD signing_name 'glue');",
						 quote_identifier(s->name))));
}

TmsCatalogConn *
tms_catalog_connect(const char *server_name)
{
	ForeignServer *server;
	AclResult	aclresult;
	Oid			userid = GetUserId();
	TmsCatalogConn *volatile c = NULL;
	IoCatalogConfig cfg;
	TmsError	err;
	IoCatalog  *cat;
	const IoAllocator *prev;

	if (!IsTransactionState())
		elog(ERROR, "tms_catalog_connect called outside a transaction");
	if (!callbacks_registered)
	{
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID, invalidate_conns, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID, invalidate_conns, (Datum) 0);
		RegisterXactCallback(conn_xact_callback, NULL);
		callbacks_registered = true;
	}

	server = GetForeignServerByName(server_name, false);
	aclresult = pg_foreign_server_aclcheck(server->serverid, userid, ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);

	conn_sweep();
	for (int i = 0; i < nconn_cache; i++)
	{
		TmsCatalogConn *e = conn_cache[i];

		if (e->valid && e->serverid == server->serverid && e->userid == userid)
		{
			/*
			 * the memory limits are settings: a superuser's SET applies at
			 * once
			 */
			set_memory_limits(&e->server->http);
			io_catalog_set_http(e->catalog, &e->server->http);
			e->xact_pins++;
			return e;
		}
	}

	/* room in the cache: evict an unpinned connection, never one in use */
	for (int i = 0; i < nconn_cache && nconn_cache == MAX_CACHED_CONNS; i++)
		if (conn_cache[i]->pins == 0 && conn_cache[i]->xact_pins == 0)
		{
			conn_free(conn_cache[i]);
			conn_cache[i] = conn_cache[--nconn_cache];
		}
	if (nconn_cache == MAX_CACHED_CONNS)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many catalog connections in use"),
				 errdetail("All %d cached connections of this session are in use.",
						   MAX_CACHED_CONNS)));

	c = calloc(1, sizeof(TmsCatalogConn));
	if (c == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		c->serverid = server->serverid;
		c->userid = userid;
		c->server = tms_server_read(server);
		tms_credentials_read(userid, server->serverid, &c->creds);
		if (!c->creds.found)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("user mapping not found for role \"%s\" on server \"%s\"",
							GetUserNameFromId(userid, false), server->servername),
					 errhint("Create one with CREATE USER MAPPING FOR %s SERVER %s OPTIONS (credential 'client_id:client_secret'); it may have no options when the catalog needs no credentials.",
							 quote_identifier(GetUserNameFromId(userid, false)),
							 quote_identifier(server->servername))));
		if (c->server->uri == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("server \"%s\" has no option \"uri\"", server_name)));
		check_signing(c->server, &c->creds, userid);
	}
	PG_CATCH();
	{
		conn_free(c);
		PG_RE_THROW();
	}
	PG_END_TRY();

	memset(&cfg, 0, sizeof(cfg));
	cfg.uri = c->server->uri;
	cfg.warehouse = c->server->warehouse;
	cfg.prefix = c->server->prefix;
	cfg.oauth2_server_uri = c->server->oauth2_server_uri;
	cfg.scope = c->server->scope;
	cfg.credential = c->creds.credential;
	cfg.token = c->creds.token;
	cfg.signing_region = c->server->signing_region;
	cfg.signing_name = c->server->signing_name;
	cfg.aws_access_key_id = c->creds.aws_access_key_id;
	cfg.aws_secret_access_key = c->creds.aws_secret_access_key;
	cfg.aws_session_token = c->creds.aws_session_token;
	cfg.page_size = c->server->page_size;
	cfg.http = c->server->http;
	/* cached: never from a scope (plain_memory.h); open never longjmps */
	prev = io_use_allocator(NULL);
	cat = io_catalog_open(&cfg, &err);
	io_use_allocator(prev);
	if (cat == NULL)
	{
		conn_free(c);
		tms_error_ereport(&err);
	}
	c->catalog = cat;
	c->valid = true;
	c->xact_pins = 1;
	conn_cache[nconn_cache++] = c;
	return c;
}

void
tms_catalog_keep(TmsCatalogConn *conn)
{
	conn->pins++;
}

void
tms_catalog_release(TmsCatalogConn *conn)
{
	if (conn != NULL && conn->pins > 0)
		conn->pins--;
}

IoStorage *
tms_catalog_storage(TmsCatalogConn *conn, const IoLoadedTable *table, TmsError *err)
{
	return tms_storage_open(conn->server, &conn->creds,
							table ? table->config : NULL,
							table ? table->nconfig : 0, err);
}

/* Where a storage gets a table's vended credentials again (io_malloc'd). */
typedef struct VendedSource
{
	IoCatalog  *catalog;		/* of a pinned connection */
	char	   *ns;
	char	   *table;
	char	   *location;
} VendedSource;

static void
vended_source_free(void *arg)
{
	VendedSource *v = arg;

	io_free(v->ns);
	io_free(v->table);
	io_free(v->location);
	io_free(v);
}

/* The refresh callback: no ereport, only the io layer. */
static int
vended_source_refresh(void *arg, IoTableCredentials *out, TmsError *err)
{
	VendedSource *v = arg;

	return io_catalog_load_credentials(v->catalog, v->ns, v->table, v->location, out, err);
}

void
tms_storage_refresh_through(IoStorage *storage, TmsCatalogConn *conn, const char *ns_io,
							const char *table, const char *location)
{
	VendedSource *v;

	if (storage == NULL || conn == NULL)
		return;
	v = io_calloc(1, sizeof(VendedSource)); /* the storage's, like it */
	if (v == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	v->catalog = conn->catalog;
	v->ns = io_strdup(ns_io);
	v->table = io_strdup(table);
	v->location = io_strdup(location);
	if (v->ns == NULL || v->table == NULL || (location && v->location == NULL))
	{
		vended_source_free(v);
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}
	/* a storage without vended credentials frees v at once */
	io_storage_set_refresh(storage, vended_source_refresh, v, vended_source_free);
}

void
tms_catalog_drop_table(TmsCatalogConn *conn, const char *ns, const char *table, bool purge)
{
	char	   *ns_io;
	TmsError	err;

	tms_check_namespace(ns);
	tms_check_table_name("table name", table);
	ns_io = tms_namespace_to_io(ns);
	if (io_catalog_drop_table(conn->catalog, ns_io, table, purge, &err) != 0)
		tms_error_ereport(&err);
	io_catalog_forget(conn->catalog, ns_io, table);
}
