/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  State-change events on the channel tms_events: the setting
 *	  tms.events, the payload builder and the guarded NOTIFY (notify.h).
 *
 * Why a setting: PostgreSQL serialises the commits of every transaction
 * that sent a notification, cluster-wide (PreCommit_Notify in
 * src/backend/commands/async.c takes a heavyweight lock on "database 0"
 * and holds it past the commit record's flush).  Job and purge state
 * changes are a few per job, and a task's failure or released lease is
 * rare and already slow; but claims and completions come with every task,
 * on the scheduler's hottest path, so that class ("task") is off by
 * default while its failures ("task-failure") are on (bench/README.md,
 * "Events on the claim path", measures what it costs).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/fmgroids.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "observe/notify.h"

char	   *tms_events_setting = NULL;
int			tms_events_mask = TMS_EVENT_JOB | TMS_EVENT_PURGE | TMS_EVENT_TASK_FAILURE;

/* NOTIFY's limit (async.c: BLCKSZ - NAMEDATALEN - 128), as it counts it */
#define NOTIFY_PAYLOAD_LIMIT (BLCKSZ - NAMEDATALEN - 128)

/* events are dropped while the notification queue is fuller than this */
#define QUEUE_USAGE_LIMIT 0.5

/* ----------------------------------------------------------------
 * The setting
 * ----------------------------------------------------------------
 */

static const struct
{
	const char *name;
	int			mask;
}			event_classes[] = {
	{"job", TMS_EVENT_JOB},
	{"purge", TMS_EVENT_PURGE},
	{"task", TMS_EVENT_TASK | TMS_EVENT_TASK_FAILURE},
	{"task-failure", TMS_EVENT_TASK_FAILURE},
	{"all", TMS_EVENT_JOB | TMS_EVENT_PURGE | TMS_EVENT_TASK | TMS_EVENT_TASK_FAILURE},
	{"none", 0},
};

static bool
check_events(char **newval, void **extra, GucSource source)
{
	char	   *copy = pstrdup(*newval);
	List	   *names;
	ListCell   *lc;
	int			mask = 0;

	if (!SplitIdentifierString(copy, ',', &names))
	{
		GUC_check_errdetail("List syntax is invalid.");
		return false;
	}
	foreach(lc, names)
	{
		const char *name = lfirst(lc);
		int			i;

		for (i = 0; i < (int) lengthof(event_classes); i++)
			if (strcmp(name, event_classes[i].name) == 0)
				break;
		if (i == (int) lengthof(event_classes))
		{
			GUC_check_errdetail("Unrecognized event class: \"%s\".", name);
			GUC_check_errhint("Event classes are job, purge, task and task-failure; \"all\" or \"none\" name them all or none.");
			return false;
		}
		mask |= event_classes[i].mask;
	}
	/* GUC frees it with free() */
	*extra = malloc(sizeof(int));
	if (*extra == NULL)
		return false;
	*((int *) *extra) = mask;
	return true;
}

static void
assign_events(const char *newval, void *extra)
{
	tms_events_mask = *((int *) extra);
}

void
tms_events_define(void)
{
	DefineCustomStringVariable("tms.events",
							   gettext_noop("Which state changes tms sends on the channel tms_events."),
							   gettext_noop("A comma-separated list of job, purge, task (all task events) and task-failure (failures and released leases only), or all or none."),
							   &tms_events_setting,
							   "job, purge, task-failure",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_events, assign_events, NULL);
}

/* ----------------------------------------------------------------
 * Payloads
 * ----------------------------------------------------------------
 */

static void
append_key(TmsEvent *ev, const char *key)
{
	appendStringInfoString(&ev->buf, ", ");
	escape_json(&ev->buf, key);
	appendStringInfoString(&ev->buf, ": ");
}

void
tms_event_begin(TmsEvent *ev, const char *type)
{
	initStringInfo(&ev->buf);
	appendStringInfoString(&ev->buf, "{\"type\": ");
	escape_json(&ev->buf, type);
}

void
tms_event_text(TmsEvent *ev, const char *key, const char *value, int max)
{
	const char *p;
	const char *end;
	int			used = 0;
	int			clip;
	StringInfoData one;

	append_key(ev, key);
	if (value == NULL)
	{
		appendStringInfoString(&ev->buf, "null");
		return;
	}

	/*
	 * escape_json() one character at a time, to stop within the budget; a
	 * text that does not fit ends at the last character that leaves room for
	 * the "..." marking it clipped.
	 */
	initStringInfo(&one);
	appendStringInfoChar(&ev->buf, '"');
	clip = ev->buf.len;
	end = value + strlen(value);
	for (p = value; p < end;)
	{
		int			len = Min(pg_mblen(p), (int) (end - p));
		char		c[MAX_MULTIBYTE_CHAR_LEN + 1];
		int			n;

		memcpy(c, p, len);
		c[len] = '\0';
		resetStringInfo(&one);
		escape_json(&one, c);
		n = one.len - 2;		/* without its quotes */
		if (used + n > max)
		{
			ev->buf.len = clip;
			ev->buf.data[clip] = '\0';
			appendStringInfoString(&ev->buf, "...");
			break;
		}
		appendBinaryStringInfo(&ev->buf, one.data + 1, n);
		used += n;
		if (used <= max - 3)
			clip = ev->buf.len;
		p += len;
	}
	appendStringInfoChar(&ev->buf, '"');
	pfree(one.data);
}

void
tms_event_int(TmsEvent *ev, const char *key, int64 value)
{
	append_key(ev, key);
	appendStringInfo(&ev->buf, INT64_FORMAT, value);
}

void
tms_event_time(TmsEvent *ev, const char *key, TimestampTz t)
{
	const int	utc = 0;
	char		buf[MAXDATELEN + 1];

	append_key(ev, key);
	if (t == 0)
	{
		appendStringInfoString(&ev->buf, "null");
		return;
	}
	appendStringInfo(&ev->buf, "\"%s\"",
					 JsonEncodeDateTime(buf, TimestampTzGetDatum(t), TIMESTAMPTZOID, &utc));
}

char *
tms_event_end(TmsEvent *ev)
{
	tms_event_time(ev, "at", GetCurrentTimestamp());
	appendStringInfoChar(&ev->buf, '}');
	return ev->buf.data;
}

/* ----------------------------------------------------------------
 * Sending
 * ----------------------------------------------------------------
 */

void
tms_event_send(const char *payload)
{
	static TimestampTz last_warning = 0;
	double		usage;

	if (strlen(payload) >= NOTIFY_PAYLOAD_LIMIT)
	{
		/* the budgets of notify.h make this impossible; never fail for it */
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("tms event of %zu bytes not sent", strlen(payload)),
				 errdetail("NOTIFY payloads must be shorter than %d bytes.",
						   NOTIFY_PAYLOAD_LIMIT)));
		return;
	}

	/*
	 * A full queue makes every committing notifier fail ("too many
	 * notifications in the NOTIFY queue"); a listener that stopped reading in
	 * an open transaction must not make tms's own state changes fail.
	 */
	usage = DatumGetFloat8(OidFunctionCall0Coll(F_PG_NOTIFICATION_QUEUE_USAGE, InvalidOid));
	if (usage > QUEUE_USAGE_LIMIT)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (TimestampDifferenceExceeds(last_warning, now, 60 * 1000))
		{
			last_warning = now;
			ereport(WARNING,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("tms events are not sent while the notification queue is %.0f%% full",
							usage * 100),
					 errdetail("A session that listens does not read its notifications, for instance one idle in a transaction."),
					 errhint("Find it with pg_stat_activity; pg_notification_queue_usage() shows how full the queue is.")));
		}
		return;
	}
	Async_Notify(TMS_EVENTS_CHANNEL, payload);
}
