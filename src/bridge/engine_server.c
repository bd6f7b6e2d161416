/*-------------------------------------------------------------------------
 *
 * engine_server.c
 *	  tms_engine servers and user mappings read into engine clients, the
 *	  check that a Gravitino server offers an operation's job template,
 *	  and the engine layer's errors as PostgreSQL errors (engine_server.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <string.h>

#include "access/xact.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/syscache.h"

#include "bridge/catalog.h"
#include "bridge/engine_server.h"
#include "bridge/errors.h"
#include "bridge/fdw_options.h"
#include "bridge/jsonb_secrets.h"
#include "bridge/settings.h"
#include "observe/stats.h"

static ForeignServer *
engine_server(const char *name, bool missing_ok)
{
	ForeignServer *server = GetForeignServerByName(name, missing_ok);
	ForeignDataWrapper *fdw;

	if (server == NULL)
		return NULL;
	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, "tms_engine") != 0)
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a tms_engine server", name),
				 errdetail("It uses the foreign-data wrapper \"%s\".", fdw->fdwname)));
	}
	return server;
}

EngineType
tms_engine_type(const char *name)
{
	ForeignServer *server;

	if (name == NULL || strcmp(name, "local") == 0)
		return ENGINE_TYPE_UNKNOWN;
	server = engine_server(name, true);
	if (server == NULL)
		return ENGINE_TYPE_UNKNOWN;
	return engine_type_from_name(tms_option(server->options, "type"));
}

/* The user mapping of role (or PUBLIC's) on the server, or NULL. */
static UserMapping *
engine_mapping(Oid role, Oid serverid)
{
	HeapTuple	tp;
	Oid			user = role;

	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
						 ObjectIdGetDatum(serverid));
	if (!HeapTupleIsValid(tp))
	{
		user = InvalidOid;
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
							 ObjectIdGetDatum(serverid));
	}
	if (!HeapTupleIsValid(tp))
		return NULL;
	ReleaseSysCache(tp);
	return GetUserMapping(user, serverid);
}

static UserMapping *
check_access(ForeignServer *server, Oid role)
{
	AclResult	aclresult = pg_foreign_server_aclcheck(server->serverid, role, ACL_USAGE);
	UserMapping *um;

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);
	um = engine_mapping(role, server->serverid);
	if (um == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("user mapping not found for role \"%s\" on server \"%s\"",
						GetUserNameFromId(role, false), server->servername),
				 errhint("Create one with CREATE USER MAPPING FOR ... SERVER %s OPTIONS (...).",
						 server->servername)));
	return um;
}

void
tms_engine_check_access(const char *name, Oid role)
{
	(void) check_access(engine_server(name, false), role);
}

TmsEngine *
tms_engine_open(const char *name)
{
	ForeignServer *server = engine_server(name, false);
	UserMapping *um;
	List	   *o = server->options;
	const char *v;
	IoEngineConfig cfg;
	TmsError	err;
	TmsEngine  *volatile e;
	char	   *secrets[3] = {NULL, NULL, NULL};

	if (!IsTransactionState())
		elog(ERROR, "tms_engine_open called outside a transaction");
	um = check_access(server, GetUserId());

	e = calloc(1, sizeof(TmsEngine));
	if (e == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		e->serverid = server->serverid;
		e->name = tms_malloc_strdup(server->servername);
		e->type = engine_type_from_name(tms_option(o, "type"));
		e->catalog = tms_malloc_strdup(tms_option(o, "catalog"));
		if ((v = tms_option(o, "run_timeout")) != NULL)
			e->run_timeout_ms = tms_option_ms("run_timeout", v);

		memset(&cfg, 0, sizeof(cfg));
		cfg.type = e->type == ENGINE_TYPE_LIVY ? IO_ENGINE_LIVY :
			e->type == ENGINE_TYPE_TRINO ? IO_ENGINE_TRINO : IO_ENGINE_GRAVITINO;
		cfg.uri = tms_option(o, "uri");
		cfg.catalog = e->catalog;
		cfg.metalake = tms_option(o, "metalake");
		cfg.oauth2_server_uri = tms_option(o, "oauth2_server_uri");
		cfg.scope = tms_option(o, "scope");
		if ((v = tms_option(o, "poll_interval")) != NULL)
			cfg.poll_interval_ms = tms_option_ms("poll_interval", v);
		cfg.http.retries = -1;
		if ((v = tms_option(o, "connect_timeout")) != NULL)
			cfg.http.connect_timeout_ms = tms_option_ms("connect_timeout", v);
		if ((v = tms_option(o, "request_timeout")) != NULL)
			cfg.http.request_timeout_ms = tms_option_ms("request_timeout", v);
		/* the io layer's default when none is set */
		e->request_timeout_ms = cfg.http.request_timeout_ms > 0 ? cfg.http.request_timeout_ms : 60000;
		if ((v = tms_option(o, "retries")) != NULL)
			cfg.http.retries = tms_option_int("retries", v, 0, 10);
		cfg.http.ca_file = tms_option(o, "ca_file");
		cfg.http.ca_path = tms_option(o, "ca_path");
		cfg.http.max_response_bytes = (size_t) tms_max_response_size_kb * 1024;
		cfg.http.max_json_bytes = (size_t) tms_max_json_memory_kb * 1024;
		tms_io_set_waits(&cfg.http);
		tms_stat_observe_http(&cfg.http, e->name, "engine");
		cfg.user = tms_option(um->options, "user");
		cfg.password = secrets[0] = tms_malloc_strdup(tms_option(um->options, "password"));
		cfg.token = secrets[1] = tms_malloc_strdup(tms_option(um->options, "token"));
		cfg.credential = secrets[2] = tms_malloc_strdup(tms_option(um->options, "credential"));
		e->client = io_engine_open(&cfg, &err);
		for (int i = 0; i < 3; i++)
			tms_free_secret(secrets[i]);
		secrets[0] = secrets[1] = secrets[2] = NULL;
		if (e->client == NULL)
			tms_error_ereport(&err);
	}
	PG_CATCH();
	{
		for (int i = 0; i < 3; i++)
			tms_free_secret(secrets[i]);
		tms_engine_close(e);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return e;
}

void
tms_engine_close(TmsEngine *e)
{
	if (e == NULL)
		return;
	if (e->client)
		io_engine_free(e->client);
	free(e->name);
	free(e->catalog);
	free(e);
}

TmsTemplateCheck
tms_engine_template_check(TmsEngine *e, const char *operation, char **offered, TmsError *err)
{
	const char *tmpl;
	bool		has = false;
	char	   *names = NULL;
	int			rc;

	*offered = NULL;
	if (e->type != ENGINE_TYPE_GRAVITINO)
		return TMS_TEMPLATE_OFFERED;
	tmpl = engine_gravitino_template(engine_op_from_name(operation));
	if (tmpl == NULL)
		return TMS_TEMPLATE_OFFERED;
	rc = io_engine_offers_template(e->client, tmpl, &has, &names, err);
	if (rc != 0)
		return TMS_TEMPLATE_UNKNOWN;
	if (!has)
		*offered = pstrdup(names[0] ? names : "none");
	io_free(names);
	return has ? TMS_TEMPLATE_OFFERED : TMS_TEMPLATE_MISSING;
}

void
tms_engine_template_refuse(const TmsEngine *e, const char *operation, const char *offered)
{
	const char *tmpl = engine_gravitino_template(engine_op_from_name(operation));

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("engine \"%s\" cannot run operation \"%s\"", e->name, operation),
			 errdetail("Its Gravitino server offers no job template \"%s\"; the job templates it offers are: %s.",
					   tmpl ? tmpl : "", offered),
			 errhint("Run %s on another engine (a livy server, or \"local\" where tms runs it), or choose an operation the server has a template for.",
					 operation)));
}
