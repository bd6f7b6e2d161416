/*-------------------------------------------------------------------------
 *
 * fdw_options.h
 *	  The options of the servers and user mappings of tms_iceberg
 *	  (catalogs), tms_engine (engines) and tms_webhook (receivers of
 *	  events): what exists, where, how each value is checked, and who may
 *	  set it.
 *
 * tms_iceberg_validate() is the whole of the wrapper's validator (the SQL
 * entry point in src/sql_api/catalog_fdw.c only unpacks its arguments);
 * the readers below parse a value exactly as the validator checked it, so
 * no other code re-implements an option's syntax.
 *
 * Options that reach the server's own files need the privileges file_fdw
 * asks for: ca_file and ca_path need pg_read_server_files; a local entry
 * of allowed_locations and relative_path_root (files tms reads and may
 * delete) need pg_read_server_files and pg_write_server_files.  Superusers
 * have both.  PostgreSQL passes the validator the complete option list,
 * so an ALTER SERVER by a role without them is refused while such an
 * option is set, as with file_fdw.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_OPTIONS_H
#define TMS_BRIDGE_OPTIONS_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* Validate the options of a wrapper (catalog = its catalog's OID). */
extern void tms_iceberg_validate(List *options, Oid catalog);
extern void tms_engine_validate(List *options, Oid catalog);
extern void tms_webhook_validate(List *options, Oid catalog);

/*
 * A tms_webhook server's option "events" (NULL: the default, failed jobs
 * and purges) as a mask of tms_webhook_event_bit()s; raises on an unknown
 * event.  An event is "<job|purge>-<new state, lowercase>".
 */
extern int	tms_webhook_events(const char *value);

/* The bit of one event, 0 for one a webhook cannot receive. */
extern int	tms_webhook_event_bit(const char *event);

/* The value of an option in a DefElem list, or NULL. */
extern const char *tms_option(List *options, const char *name);

/* Parsers, raising ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE on a bad value. */
extern int	tms_option_ms(const char *name, const char *value);
extern int	tms_option_int(const char *name, const char *value, int min, int max);
extern bool tms_option_bool(const char *name, const char *value);
extern List *tms_option_locations(const char *name, const char *value);

#endif							/* TMS_BRIDGE_OPTIONS_H */
