/*-------------------------------------------------------------------------
 *
 * legacy_sql.c
 *	  C entry points that only the install scripts of earlier versions of
 *	  tms name (sql/tms--A.sql).
 *
 * An extension's install script of an earlier version must still load
 * with the current library: CREATE EXTENSION tms VERSION '0.1.0' followed
 * by ALTER EXTENSION tms UPDATE, pg_upgrade of a cluster where an earlier
 * version is installed (it creates each object of that version one by
 * one; 0.1.0 itself must be updated first, doc/architecture.md), and a
 * database of an earlier version running on this library until it is
 * updated.  PostgreSQL looks up the C symbol of every LANGUAGE c function
 * when it is created, whatever check_function_bodies says, so a symbol an
 * earlier script names may never leave the library.
 *
 * Rules: a symbol here does nothing useful any more; it raises an error
 * that says which version needs it and how to leave it.  A symbol goes
 * only when its version's scripts are removed from sql/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

PG_FUNCTION_INFO_V1(tms_policy_caller);

/*
 * tms._caller() of 0.1.0: the role that called a SECURITY DEFINER API
 * function.  0.2.0 acts for the current user instead (src/sql_api/api.c)
 * and drops tms._caller(); until the update, 0.1.0's API refuses to run
 * rather than act for the wrong role.
 */
Datum
tms_policy_caller(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("tms._caller() belongs to version 0.1.0 of extension \"tms\""),
			 errdetail("The installed library is of a later version, which acts for the current user."),
			 errhint("Run ALTER EXTENSION tms UPDATE;")));
	PG_RETURN_NULL();
}
