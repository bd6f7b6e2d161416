/*-------------------------------------------------------------------------
 *
 * tms.h
 *	  Settings and helpers shared by every PostgreSQL-facing part of tms.
 *
 * tms is loaded in two ways: through shared_preload_libraries, which starts
 * the background workers and sets up shared memory, or on demand by the
 * first call of one of its SQL functions, which is enough for the pure
 * functions (DSL checks, metadata inspection).  tms_require_preload() is how
 * a function that needs the workers says so.
 *
 * Only files that may include PostgreSQL headers include this one; the
 * plain-C layers (src/dsl, src/iceberg, src/io, src/cron) never do.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_H
#define TMS_H

#include "postgres.h"

#include "fmgr.h"

/* GUC variables (src/tms.c) */
extern char *tms_database_name;
extern bool tms_enabled;
extern int	tms_max_workers;
extern int	tms_naptime_ms;

/* true when the library was loaded through shared_preload_libraries */
extern bool tms_preloaded;

/*
 * Raise ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE unless tms was preloaded,
 * naming the calling feature.
 */
extern void tms_require_preload(const char *feature);

/*
 * Argument n of a SQL function as a palloc'd C string, raising
 * ERRCODE_NULL_VALUE_NOT_ALLOWED ("<what> must not be null") when it is
 * NULL: for functions that cannot be STRICT because other arguments may be.
 */
extern char *tms_arg_text(FunctionCallInfo fcinfo, int n, const char *what);
extern char *tms_arg_name(FunctionCallInfo fcinfo, int n, const char *what);

#endif							/* TMS_H */
