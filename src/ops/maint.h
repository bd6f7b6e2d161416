/*-------------------------------------------------------------------------
 *
 * maint.h
 *	  Maintenance operations run by tms itself (the "local" engine):
 *	  snapshot expiry, orphan cleanup and manifest rewrite, as jobs of
 *	  tms.table_maintenance_job run by the "maintenance" task kind, as
 *	  dry runs, and on demand.  What sql_api calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_MAINT_H
#define TMS_OPS_MAINT_H

#include "postgres.h"

#include "funcapi.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

/* Raise unless engine can run operation with options (NULL: names only). */
extern void tms_operation_check(const char *operation, const char *engine,
								Jsonb *options);

/*
 * tms.run_operation: validate everything as the acting role (names,
 * options, USAGE and user mapping, the table exists and lies below the
 * server's allowed locations), then record the job and its task in the
 * caller's transaction.  Returns the job id.
 */
extern int64 tms_operation_submit(const char *server, const char *ns,
								  const char *table, const char *operation,
								  Jsonb *options, const char *engine);

/*
 * tms.delete_rows: a job of operation retention on engine local whose
 * options are the where and the mode (default "rewrite"), submitted as
 * tms.run_operation submits; where and options are checked first (22004,
 * 22023), the where's columns and literals when the table is loaded
 * (42703, 22023, 0A000).  Returns the job id.
 */
extern int64 tms_delete_rows_submit(const char *server, const char *ns, const char *table,
									const char *where, Jsonb *options);

/*
 * tms.plan_operation: plan as the acting role and put one row (action,
 * target, detail) per effect into ts; commits and deletes nothing.
 */
extern void tms_operation_plan(const char *server, const char *ns,
							   const char *table, const char *operation,
							   Jsonb *options, Tuplestorestate *ts,
							   TupleDesc desc);

/*
 * tms.engine_statement: the statement a job of operation with options on
 * the engine server would submit now for table ns.table (for Gravitino
 * the body of its jobs API), built and checked by the code that submits;
 * the server's type and catalog options only, nothing is sent.  The
 * acting role needs USAGE on the server and a user mapping, as for a job.
 */
extern char *tms_engine_statement(const char *engine, const char *ns,
								  const char *table, const char *operation,
								  Jsonb *options);

#endif							/* TMS_OPS_MAINT_H */
