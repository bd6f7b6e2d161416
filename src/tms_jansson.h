/*-------------------------------------------------------------------------
 *
 * tms_jansson.h
 *	  The one place where jansson and PostgreSQL headers may meet.
 *
 * jansson declares json_object(), and PostgreSQL's utils/fmgrprotos.h
 * (pulled in by utils/builtins.h and many others) declares the SQL-callable
 * json_object() with a different signature.  Plain-C layers include
 * <jansson.h> alone and never see the clash.  A PostgreSQL-facing file that
 * really needs both includes this header instead of <jansson.h>, right after
 * "postgres.h" and before any other PostgreSQL header: fmgrprotos.h is then
 * read once, here, with PostgreSQL's json_object renamed to
 * pg_fmgr_json_object, and jansson's names stay jansson's.
 *
 * It also brings tms_json.h: never call json_object() from tms.so.
 *
 * Prefer not to need it: keep jansson work in the plain-C layers and hand
 * the PostgreSQL side plain strings and structs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_JANSSON_H
#define TMS_JANSSON_H

#ifdef FMGRPROTOS_H
#error "include tms_jansson.h right after postgres.h, before other PostgreSQL headers"
#endif

/* Hide PostgreSQL's declaration, if it has been seen, under another name. */
#define json_object pg_fmgr_json_object
#include "utils/fmgrprotos.h"
#undef json_object

#include "tms_json.h"

#endif							/* TMS_JANSSON_H */
