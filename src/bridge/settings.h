/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  Settings every PostgreSQL-facing layer of tms reads, and how a
 *	  function says that it needs tms to be preloaded.
 *
 * tms is loaded in two ways: through shared_preload_libraries, which starts
 * the background workers and sets up shared memory, or on demand by the
 * first call of one of its SQL functions, which is enough for the pure
 * functions (DSL checks, metadata inspection).  tms_require_preload() is how
 * a function that needs the workers says so.
 *
 * The variables are defined here and registered as GUCs by _PG_init
 * (src/tms.c), which gives each one its description, unit and context.
 * Settings of one area (the scheduler, purge, policies) live with that
 * area instead.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_SETTINGS_H
#define TMS_BRIDGE_SETTINGS_H

#include "postgres.h"

#include "utils/guc.h"

extern char *tms_database_name;
extern bool tms_enabled;
extern int	tms_max_workers;
extern int	tms_naptime_ms;

/* bounds on what one catalog response may cost (bytes; see doc/catalogs.md) */
extern int	tms_max_response_size_kb;
extern int	tms_max_json_memory_kb;

/*
 * tms.allowed_hosts: the hosts, addresses and networks every outbound
 * connection of tms (catalog, storage, engine, webhook) is limited to;
 * empty: no limit.  The hooks parse it once into the io layer's list
 * (io/http/reach.h), which every request of the process is checked against.
 */
extern char *tms_allowed_hosts;
extern bool tms_check_allowed_hosts(char **newval, void **extra, GucSource source);
extern void tms_assign_allowed_hosts(const char *newval, void *extra);

/* true when the library was loaded through shared_preload_libraries */
extern bool tms_preloaded;

/*
 * Raise ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE unless tms was preloaded,
 * naming the calling feature.
 */
extern void tms_require_preload(const char *feature);

#endif							/* TMS_BRIDGE_SETTINGS_H */
