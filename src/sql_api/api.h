/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the SQL-callable C functions of src/sql_api share: reading
 *	  their arguments.
 *
 * The functions of this directory are thin: they check and unpack their
 * arguments and call the layers below (bridge, sched, ops), which do the
 * work and raise the errors.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_SQL_API_H
#define TMS_SQL_API_H

#include "postgres.h"

#include "fmgr.h"

/*
 * Argument n as a palloc'd C string, raising ERRCODE_NULL_VALUE_NOT_ALLOWED
 * ("<what> must not be null") when it is NULL: for functions that cannot
 * be STRICT because other arguments may be.
 */
extern char *tms_arg_text(FunctionCallInfo fcinfo, int n, const char *what);
extern char *tms_arg_name(FunctionCallInfo fcinfo, int n, const char *what);

#endif							/* TMS_SQL_API_H */
