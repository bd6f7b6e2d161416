/*-------------------------------------------------------------------------
 *
 * usercode.h
 *	  Running user code, and tms's own SQL, so that neither can change
 *	  what the other runs.
 *
 * User code is a procedure a user wrote that tms calls: the handler of a
 * task kind (tms.register_task_kind) and tms.maintenance_handler.  tms
 * calls it as PostgreSQL calls user code during VACUUM, ANALYZE and
 * REFRESH MATERIALIZED VIEW since CVE-2022-1552:
 *
 *	 - as the procedure's owner, in a security-restricted operation
 *	   (SECURITY_RESTRICTED_OPERATION: no SET ROLE, no SET SESSION
 *	   AUTHORIZATION, no temporary objects, no cursors WITH HOLD);
 *	 - in a GUC nest level of its own, undone after the call whatever the
 *	   procedure set (set_config(..., false) and SET included): nothing it
 *	   sets reaches tms's next statement or the next task;
 *	 - found by its OID and called through fmgr, never by a name looked up
 *	   again, so an overload or a function of the same name in another
 *	   schema is never the one that runs.
 *
 * tms's own SQL runs with search_path = pg_catalog, pg_temp
 * (TMS_SAFE_SEARCH_PATH), whoever called it: a function of the extension
 * declares it (SET search_path in sql/install/), the background workers
 * keep it for their whole session (tms_pin_search_path), and the
 * procedures that commit as they go (CALL tms.run_pending, run_task), which
 * can carry no SET clause, set it for each of their transactions
 * (tms_push_safe_search_path).  A function of an untrusted schema named
 * like a built-in one (now(), =) is then never what tms's statements run.
 * User code runs with the search_path a new session would have (the
 * setting's reset value: postgresql.conf, ALTER DATABASE or ALTER ROLE),
 * as if pg_cron had connected to run it: neither tms's nor what the
 * previous handler set.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_USERCODE_H
#define TMS_BRIDGE_USERCODE_H

#include "postgres.h"

#define TMS_SAFE_SEARCH_PATH "pg_catalog, pg_temp"

/*
 * CALL procedure proc with the given arguments as described in the file
 * header.  what names the caller for messages ("the handler of task kind
 * \"k\"").  Raises ERRCODE_UNDEFINED_FUNCTION when proc is gone and
 * ERRCODE_UNDEFINED_OBJECT when its owner is; an error of the procedure
 * propagates, and the (sub)transaction's abort undoes the identity and GUC
 * switches then.  The caller checks the signature (the argument types must
 * be those of args).  Needs a transaction.
 */
extern void tms_call_procedure_as_owner(Oid proc, const char *what, int nargs,
										Datum *args, bool *nulls);

/*
 * The owner of procedure proc; raises ERRCODE_UNDEFINED_FUNCTION when it
 * no longer exists (what names the caller for the message).
 */
extern Oid	tms_procedure_owner(Oid proc, const char *what);

/*
 * Set search_path to TMS_SAFE_SEARCH_PATH for the rest of this session (a
 * background worker, right after connecting).
 */
extern void tms_pin_search_path(void);

/*
 * Set search_path to TMS_SAFE_SEARCH_PATH in a new GUC nest level of the
 * current transaction; returns the level for tms_pop_search_path().  The
 * end of the transaction pops it too.
 */
extern int	tms_push_safe_search_path(void);
extern void tms_pop_search_path(int nestlevel);

#endif							/* TMS_BRIDGE_USERCODE_H */
