/*-------------------------------------------------------------------------
 *
 * engine_server.h
 *	  Engines as PostgreSQL sees them: an engine is a foreign server of the
 *	  tms_engine wrapper (fdw_options.c validates it), its credentials a user
 *	  mapping.  This is the one place that reads their options, opens an
 *	  engine client (io/engines/engine_client.h) for the acting role, and maps the engine
 *	  layer's errors (engine/statement.h) to PostgreSQL errors.
 *
 * Rules held here for every caller:
 *	- An engine is used as one role, the role current when it is opened
 *	  (tms_acting_role(), or the recorded role a worker switched to): that
 *	  role needs USAGE on the server and a user mapping (its own or
 *	  PUBLIC's), exactly as for a catalog.
 *	- Credentials are copied into the client and wiped when it is closed;
 *	  they never reach a row, a log line or an error.
 *	- "local" is tms itself and never a server; a job whose engine names
 *	  no tms_engine server is one of 0.2.0's handler engines (spark, trino
 *	  handed to tms.maintenance_handler).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_ENGINE_H
#define TMS_BRIDGE_ENGINE_H

#include "postgres.h"

#include "engine/statement.h"
#include "io/engines/engine_client.h"

/* An engine opened for one role (malloc'd; tms_engine_close). */
typedef struct TmsEngine
{
	Oid			serverid;
	char	   *name;
	EngineType	type;
	char	   *catalog;		/* the engine's name of the Iceberg catalog */
	long		run_timeout_ms; /* 0: none */
	long		request_timeout_ms; /* one request's limit, as the client has
									 * it */
	IoEngine   *client;
} TmsEngine;

/*
 * The type of the tms_engine server called name, or ENGINE_TYPE_UNKNOWN
 * when there is no such server (or it is another wrapper's).
 */
extern EngineType tms_engine_type(const char *name);

/*
 * Open the engine as the current role, in a transaction: USAGE on the
 * server and a user mapping are required (42501, 42704).  The result can
 * be used outside transactions.
 */
extern TmsEngine *tms_engine_open(const char *name);

/* Only the privilege and mapping checks of tms_engine_open. */
extern void tms_engine_check_access(const char *name, Oid role);

extern void tms_engine_close(TmsEngine *e);

/*
 * Whether a gravitino engine's server offers the job template of an
 * operation (its list, read now; doc/engines.md): TMS_TEMPLATE_OFFERED
 * (also for another engine type, or an operation without a template),
 * TMS_TEMPLATE_MISSING with *offered (palloc'd: the names the server
 * lists), or TMS_TEMPLATE_UNKNOWN with *err when the list could not be
 * read.
 */
typedef enum TmsTemplateCheck
{
	TMS_TEMPLATE_OFFERED,
	TMS_TEMPLATE_MISSING,
	TMS_TEMPLATE_UNKNOWN
} TmsTemplateCheck;

extern TmsTemplateCheck tms_engine_template_check(TmsEngine *e, const char *operation,
												  char **offered, TmsError *err);

/* Refuse the operation (0A000) for a template the server does not offer. */
extern void tms_engine_template_refuse(const TmsEngine *e, const char *operation,
									   const char *offered) pg_attribute_noreturn();

#endif							/* TMS_BRIDGE_ENGINE_H */
