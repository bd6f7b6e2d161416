/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The variables behind the settings of settings.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bridge/settings.h"

char	   *tms_database_name = NULL;
bool		tms_enabled = true;
int			tms_max_workers = 4;
int			tms_naptime_ms = 1000;
int			tms_max_response_size_kb = 64 * 1024;
int			tms_max_json_memory_kb = 256 * 1024;
bool		tms_preloaded = false;

void
tms_require_preload(const char *feature)
{
	if (!tms_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s requires tms to be loaded via \"shared_preload_libraries\"",
						feature),
				 errhint("Add \"tms\" to \"shared_preload_libraries\" in postgresql.conf "
						 "and restart the server.")));
}
