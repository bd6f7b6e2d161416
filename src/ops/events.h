/*-------------------------------------------------------------------------
 *
 * events.h
 *	  The events area: state-change events of jobs and purges (the
 *	  triggers' work, events.c).
 *
 * The channel, the setting tms.events and the payload builder are
 * src/bridge/notify.h; task events are src/sched/task_events.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_EVENTS_H
#define TMS_OPS_EVENTS_H

#include "postgres.h"

#include "commands/trigger.h"

/*
 * The work of the row triggers on tms.table_maintenance_job and
 * tms.iceberg_cleanup_job (argument "job" or "purge"): the event on
 * tms_events.
 */
extern void ops_state_event(TriggerData *td);

#endif							/* TMS_OPS_EVENTS_H */
