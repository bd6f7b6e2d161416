/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The variables behind the settings of settings.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bridge/settings.h"
#include "io/http/reach.h"

char	   *tms_database_name = NULL;
bool		tms_enabled = true;
int			tms_max_workers = 4;
int			tms_naptime_ms = 1000;
int			tms_max_response_size_kb = 64 * 1024;
int			tms_max_json_memory_kb = 256 * 1024;
bool		tms_preloaded = false;
char	   *tms_allowed_hosts = NULL;

/*
 * Check hook of tms.allowed_hosts: a malformed entry is refused with the
 * entry and why in the detail; the parsed list (one malloc'd block, as
 * PostgreSQL wants a setting's extra) goes to the assign hook.
 */
bool
tms_check_allowed_hosts(char **newval, void **extra, GucSource source)
{
	IoReachRules *rules;
	char		why[300];

	if (io_reach_parse(*newval, &rules, why, sizeof(why)) != 0)
	{
		if (strcmp(why, "out of memory") == 0)
		{
			GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
			GUC_check_errmsg("out of memory");
			return false;
		}
		GUC_check_errdetail("Invalid %s.", why);
		GUC_check_errhint("List host names (exact, or \"*.example.com\"), IP addresses and "
						  "networks (\"10.0.0.0/8\", \"fd00::/8\"), each with an optional "
						  "\":port\" (\"[::1]:8181\" for IPv6), separated by commas.");
		return false;
	}
	*extra = rules;
	return true;
}

/* Assign hook of tms.allowed_hosts: the list every connection is checked against. */
void
tms_assign_allowed_hosts(const char *newval, void *extra)
{
	io_reach_set_rules((const IoReachRules *) extra);
}

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
