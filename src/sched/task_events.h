/*-------------------------------------------------------------------------
 *
 * task_events.h
 *	  Task events on the channel tms_events: a claim and a completion
 *	  (class "task" of tms.events), a failure with its retry time and a
 *	  dead lease released (class "task-failure"), each sent in the
 *	  transaction that wrote it.
 *
 * The scheduler calls these right after the statement that changed the
 * row, so an event is sent exactly when that change commits: a settle
 * rolled back with a lost lease sends nothing.  Each returns at once when
 * its class is off ("task" is by default: see src/observe/notify.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_SCHED_TASK_EVENTS_H
#define TMS_SCHED_TASK_EVENTS_H

#include "postgres.h"

#include "sched/sched.h"

/*
 * A task claimed by by: from the state tms.tasks showed ("due", "failing",
 * "scheduled"; "running" when took_over, a dead lease taken over by
 * tms.run_task) to "running".
 */
extern void sched_event_claimed(const SchedTask *task, const char *by, bool took_over);

/*
 * Another event of a claimed task: event "succeeded" or "failed";
 * old and new states as tms.tasks names them ("done": deleted); error
 * the failure.  failures and retry_at are what the settle statement left
 * in the row (the count of consecutive failures, its due time; 0: none),
 * which the event carries.
 */
extern void sched_event_task(const SchedTask *task, const char *event,
							 const char *old_state, const char *new_state,
							 const char *error, int failures, TimestampTz retry_at);

/*
 * Dead-lease recovery released the lease on (kind, instance), whose row
 * holds failures consecutive failures.
 */
extern void sched_event_released(const char *kind, const char *instance, int failures);

#endif							/* TMS_SCHED_TASK_EVENTS_H */
