/*-------------------------------------------------------------------------
 *
 * events.h
 *	  The events area: state-change events of jobs and purges (the
 *	  triggers' work, events.c) and their webhook deliveries (webhook.c).
 *
 * The channel, the setting tms.events and the payload builder are
 * src/observe/notify.h; task events are src/sched/task_events.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_OPS_EVENTS_H
#define TMS_OPS_EVENTS_H

#include "postgres.h"

#include "commands/trigger.h"

/* settings (events.c) */
extern int	tms_webhook_concurrency;
extern int	tms_webhook_max_attempts;
extern int	tms_webhook_retention_s;

/*
 * The work of the row triggers on tms.table_maintenance_job and
 * tms.iceberg_cleanup_job (argument "job" or "purge"): the event on
 * tms_events and the webhook deliveries the change calls for.
 */
extern void ops_state_event(TriggerData *td);

/* Declare the "webhook" task kind (webhook.c). */
extern void tms_webhook_register(void);

#endif							/* TMS_OPS_EVENTS_H */
