/*-------------------------------------------------------------------------
 *
 * notify.h
 *	  State-change events on the channel tms_events: which classes are
 *	  sent (the setting tms.events), their JSON payloads, and the one
 *	  function that hands a payload to NOTIFY (doc/operations.md, Events).
 *
 * A payload is built with tms_event_begin(), the tms_event_*() fields and
 * tms_event_end(); every text field is JSON-escaped and clipped to a
 * budget of escaped bytes, so that no payload can reach NOTIFY's limit
 * (8000 bytes) whatever the names and errors it carries.  Payloads never
 * hold a credential: they name objects and states, and error texts are
 * the ones tms records in its tables, which hold none.
 *
 * tms_event_send() is transactional like NOTIFY itself: the event goes
 * out when the transaction commits, and not at all when it (or the
 * subtransaction that sent it) rolls back.  It never raises: a payload it
 * cannot send (over the limit, or a notification queue more than half
 * full because a listener stopped reading) is dropped with a WARNING, so
 * that an event can never make the state change it reports fail.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_NOTIFY_H
#define TMS_BRIDGE_NOTIFY_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"

#define TMS_EVENTS_CHANNEL "tms_events"

/* The classes of tms.events, as bits of tms_events_mask. */
typedef enum TmsEventClass
{
	TMS_EVENT_JOB = 0x01,		/* tms.table_maintenance_job.state */
	TMS_EVENT_PURGE = 0x02,		/* tms.iceberg_cleanup_job.state */
	TMS_EVENT_TASK = 0x04,		/* claims and completions of
								 * tms.scheduled_tasks */
	TMS_EVENT_TASK_FAILURE = 0x08	/* their failures and released leases */
} TmsEventClass;

/* the setting, and the mask its assign hook keeps */
extern char *tms_events_setting;
extern int	tms_events_mask;

/* Define tms.events (from the events area's init function). */
extern void tms_events_define(void);

static inline bool
tms_events_on(TmsEventClass c)
{
	return (tms_events_mask & c) != 0;
}

/* Budgets of one text field, in bytes after JSON escaping. */
#define TMS_EVENT_NAME_MAX	256 /* names, kinds, instances, states */
#define TMS_EVENT_TEXT_MAX	1024	/* error texts and reasons */

typedef struct TmsEvent
{
	StringInfoData buf;
} TmsEvent;

/* {"type": type */
extern void tms_event_begin(TmsEvent *ev, const char *type);

/* , "key": "value" (NULL: null), escaped and clipped to max bytes */
extern void tms_event_text(TmsEvent *ev, const char *key, const char *value, int max);
extern void tms_event_int(TmsEvent *ev, const char *key, int64 value);

/* , "key": "2026-12-01T10:00:00.123456+00:00" (UTC); 0: null */
extern void tms_event_time(TmsEvent *ev, const char *key, TimestampTz t);

/* , "at": now}; returns the payload (palloc'd) */
extern char *tms_event_end(TmsEvent *ev);

/* NOTIFY tms_events with payload, at commit; never raises (see above). */
extern void tms_event_send(const char *payload);

#endif							/* TMS_BRIDGE_NOTIFY_H */
