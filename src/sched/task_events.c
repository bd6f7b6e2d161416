/*-------------------------------------------------------------------------
 *
 * task_events.c
 *	  Task events on the channel tms_events (task_events.h).
 *
 * The payload (doc/operations.md, Events):
 *
 *	{"type": "task", "event": "failed", "kind": "purge", "instance": "7",
 *	 "old": "running", "new": "failing", "by": null, "failures": 2,
 *	 "error": "...", "retry_at": "...", "at": "..."}
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "observe/notify.h"
#include "sched/task_events.h"

/* The state tms.tasks shows for a task that is not running. */
static const char *
waiting_state(const SchedTask *task)
{
	if (task->consecutive_failures > 0)
		return "failing";
	if (task->execution_time <= GetCurrentTimestamp())
		return "due";
	return "scheduled";
}

static void
send_task_event(const char *event, const char *kind, const char *instance,
				const char *old_state, const char *new_state, const char *by,
				int failures, const char *error, TimestampTz retry_at)
{
	TmsEvent	ev;

	tms_event_begin(&ev, "task");
	tms_event_text(&ev, "event", event, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "kind", kind, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "instance", instance, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "old", old_state, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "new", new_state, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "by", by, TMS_EVENT_NAME_MAX);
	tms_event_int(&ev, "failures", failures);
	tms_event_text(&ev, "error", error, TMS_EVENT_TEXT_MAX);
	tms_event_time(&ev, "retry_at", retry_at);
	tms_event_send(tms_event_end(&ev));
}

void
sched_event_task(const SchedTask *task, const char *event,
				 const char *old_state, const char *new_state,
				 const char *error, int failures, TimestampTz retry_at)
{
	if (!tms_events_on(error != NULL ? TMS_EVENT_TASK_FAILURE : TMS_EVENT_TASK))
		return;
	send_task_event(event, task->kind, task->instance, old_state, new_state, NULL,
					failures, error, retry_at);
}

void
sched_event_claimed(const SchedTask *task, const char *by, bool took_over)
{
	/* tested first: the claim path pays no more than this when it is off */
	if (!tms_events_on(TMS_EVENT_TASK))
		return;
	send_task_event("claimed", task->kind, task->instance,
					took_over ? "running" : waiting_state(task), "running", by,
					task->consecutive_failures, NULL, 0);
}

void
sched_event_released(const char *kind, const char *instance, int failures)
{
	if (!tms_events_on(TMS_EVENT_TASK_FAILURE))
		return;
	/* the due time is unchanged, so past: due again at once */
	send_task_event("released", kind, instance, "running",
					failures > 0 ? "failing" : "due", NULL, failures, NULL, 0);
}
