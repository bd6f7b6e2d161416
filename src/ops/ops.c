/*-------------------------------------------------------------------------
 *
 * ops.c
 *	  Initialisation of the operation areas of tms.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ops/ops.h"

/*
 * Call the init function of every operation area; see ops.h.
 */
void
tms_ops_init(void)
{
	tms_purge_init();
	tms_policy_init();
	tms_roles_init();
	tms_maint_init();
	tms_delete_init();
	tms_events_init();
	tms_compact_init();
}
