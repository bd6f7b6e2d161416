/*-------------------------------------------------------------------------
 *
 * events.c
 *	  The events area: the settings tms.events and tms.webhook_*, the
 *	  "webhook" task kind (webhook.c), and what the triggers on the job
 *	  tables do when a job's or a purge's state changes (events.h).
 *
 * Where events come from.  Every state change of a maintenance job
 * (tms.table_maintenance_job) and of a purge (tms.iceberg_cleanup_job)
 * goes through one of two row triggers per table
 * (sql/install/post/68_events.sql): AFTER INSERT of a pending row, AFTER
 * UPDATE OF state when the state changed.  Triggers, not calls in the
 * code that changes states: those UPDATEs are spread over C and SQL (a
 * worker's steps, tms.finish_operation, tms.cancel_operation,
 * tms.retry_purge, _start_job's gates), and a trigger is the one place
 * none of them, present or future, can miss.  Being in
 * the changing transaction, an event is sent when the change commits and
 * not at all when it rolls back.
 *
 * What the trigger does (ops_state_event):
 *
 *	 notify		when tms.events has the class (job, purge): the payload on
 *				tms_events (src/observe/notify.h);
 *	 webhook	when the change is an UPDATE into a state a tms_webhook
 *				server asks for (its option "events", by default
 *				job-failed and purge-failed): one row per server in
 *				tms.webhook_outbox with the same payload, and a task of
 *				kind "webhook" (instance: the row's id) that delivers it
 *				(webhook.c).  Writing the outbox in the same transaction
 *				is what makes a delivery exactly as durable as the state
 *				change, and leaves the network to a task of its own: a
 *				receiver that hangs or fails delays no job.
 *
 * Payloads (doc/operations.md):
 *
 *	{"type": "job", "id": 12, "table_id": 3, "server": "prod",
 *	 "namespace": "sales", "table": "orders", "operation": "snapshot-expiry",
 *	 "engine": "local", "policy_id": 1, "rule_id": 4, "old": "running",
 *	 "new": "failed", "attempts": 3, "error": "...", "reason": null,
 *	 "at": "..."}
 *	{"type": "purge", "id": 7, "server": "prod", "namespace": "sales",
 *	 "table": "orders_2019", "old": "RUNNING", "new": "SUCCEEDED",
 *	 "attempts": 0, "files_deleted": 1234, "bytes_freed": 5678,
 *	 "error": null, "at": "..."}
 *
 * "error" is the row's last_error when the change reports a failure (the
 * new state failed, or back to pending after a failed attempt); a job
 * that succeeded after a failed attempt still has last_error, which its
 * success event does not repeat.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/rel.h"

#include "observe/notify.h"
#include "bridge/fdw_options.h"
#include "bridge/role.h"
#include "ops/events.h"
#include "ops/ops.h"

int			tms_webhook_concurrency = 2;
int			tms_webhook_max_attempts = 10;
int			tms_webhook_retention_s = 7 * 24 * 3600;

void
tms_events_init(void)
{
	tms_events_define();
	DefineCustomIntVariable("tms.webhook_concurrency",
							gettext_noop("Webhook deliveries in progress at once across all workers."),
							NULL,
							&tms_webhook_concurrency,
							2, 1, 100,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.webhook_max_attempts",
							gettext_noop("Attempts after which a webhook delivery is failed."),
							gettext_noop("Between attempts the delay doubles from tms.retry_delay up to tms.retry_delay_max, with jitter."),
							&tms_webhook_max_attempts,
							10, 1, 1000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("tms.webhook_retention",
							gettext_noop("How long delivered and failed webhook deliveries are kept."),
							NULL,
							&tms_webhook_retention_s,
							7 * 24 * 3600, 60, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	tms_webhook_register();
}

/* ----------------------------------------------------------------
 * The trigger
 * ----------------------------------------------------------------
 */

/* A column of a row as text, NULL when null. */
static char *
column(HeapTuple tup, TupleDesc desc, const char *name)
{
	int			att = SPI_fnumber(desc, name);

	if (att <= 0)
		elog(ERROR, "tms events: column \"%s\" not found", name);
	return SPI_getvalue(tup, desc, att);
}

/* A column holding an integer, as a JSON number or null. */
static void
int_field(TmsEvent *ev, const char *key, HeapTuple tup, TupleDesc desc,
		  const char *name)
{
	char	   *v = column(tup, desc, name);

	if (v == NULL)
		tms_event_text(ev, key, NULL, 0);
	else
		tms_event_int(ev, key, strtoi64(v, NULL, 10));
}

/* The server, namespace and table of a job's table. */
static void
job_table(const char *table_id, char **server, char **ns, char **table)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1];
	int			rc;

	*server = *ns = *table = NULL;
	args[0] = Int64GetDatum(strtoi64(table_id, NULL, 10));
	rc = SPI_execute_with_args("SELECT server, namespace, table_name FROM tms.tables"
							   " WHERE id = $1",
							   1, types, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read the table of a job: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		*server = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		*ns = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		*table = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	}
}

/* The payload of a job's or a purge's state change (see the file header). */
static char *
state_payload(bool job, HeapTuple newtup, HeapTuple oldtup, TupleDesc desc)
{
	TmsEvent	ev;
	char	   *new_state = column(newtup, desc, "state");
	char	   *old_state = oldtup ? column(oldtup, desc, "state") : NULL;
	bool		failure;
	char	   *server;
	char	   *ns;
	char	   *table;

	failure = pg_strcasecmp(new_state, "failed") == 0 ||
		(old_state != NULL && pg_strcasecmp(old_state, "running") == 0 &&
		 pg_strcasecmp(new_state, "pending") == 0);
	if (job)
		job_table(column(newtup, desc, "table_id"), &server, &ns, &table);
	else
	{
		server = column(newtup, desc, "server");
		ns = column(newtup, desc, "namespace");
		table = column(newtup, desc, "table_name");
	}

	tms_event_begin(&ev, job ? "job" : "purge");
	int_field(&ev, "id", newtup, desc, "id");
	if (job)
		int_field(&ev, "table_id", newtup, desc, "table_id");
	tms_event_text(&ev, "server", server, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "namespace", ns, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "table", table, TMS_EVENT_NAME_MAX);
	if (job)
	{
		tms_event_text(&ev, "operation", column(newtup, desc, "operation"), TMS_EVENT_NAME_MAX);
		tms_event_text(&ev, "engine", column(newtup, desc, "engine"), TMS_EVENT_NAME_MAX);
		int_field(&ev, "policy_id", newtup, desc, "policy_id");
		int_field(&ev, "rule_id", newtup, desc, "rule_id");
	}
	tms_event_text(&ev, "old", old_state, TMS_EVENT_NAME_MAX);
	tms_event_text(&ev, "new", new_state, TMS_EVENT_NAME_MAX);
	int_field(&ev, "attempts", newtup, desc, "attempts");
	if (!job)
	{
		int_field(&ev, "files_deleted", newtup, desc, "files_deleted");
		int_field(&ev, "bytes_freed", newtup, desc, "bytes_freed");
	}
	tms_event_text(&ev, "error", failure ? column(newtup, desc, "last_error") : NULL,
				   TMS_EVENT_TEXT_MAX);
	if (job)
		tms_event_text(&ev, "reason", column(newtup, desc, "reason"), TMS_EVENT_TEXT_MAX);
	return tms_event_end(&ev);
}

/*
 * Queue the payload for every tms_webhook server that asks for event:
 * an outbox row and its delivery task each.
 */
static void
enqueue_webhooks(const char *event, const char *payload)
{
	int			bit = tms_webhook_event_bit(event);
	SPITupleTable *servers;
	uint64		nservers;
	int			rc;

	if (bit == 0)
		return;
	rc = SPI_execute("SELECT s.srvname, s.srvoptions"
					 "  FROM pg_catalog.pg_foreign_server s"
					 "  JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw"
					 " WHERE w.fdwname = 'tms_webhook'"
					 " ORDER BY s.srvname",
					 true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not list webhook servers: %s", SPI_result_code_string(rc));
	servers = SPI_tuptable;
	nservers = SPI_processed;
	for (uint64 i = 0; i < nservers; i++)
	{
		bool		isnull;
		Datum		options = SPI_getbinval(servers->vals[i], servers->tupdesc, 2, &isnull);
		List	   *list = isnull ? NIL : untransformRelOptions(options);
		Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
		Datum		args[3];

		if ((tms_webhook_events(tms_option(list, "events")) & bit) == 0)
			continue;
		args[0] = CStringGetTextDatum(SPI_getvalue(servers->vals[i], servers->tupdesc, 1));
		args[1] = CStringGetTextDatum(event);
		args[2] = CStringGetTextDatum(payload);
		rc = SPI_execute_with_args("WITH o AS ("
								   "  INSERT INTO tms.webhook_outbox (server, event, payload)"
								   "  VALUES ($1, $2, $3::jsonb) RETURNING id)"
								   " SELECT tms.schedule_task('webhook', o.id::text) FROM o",
								   3, types, args, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not queue a webhook delivery: %s", SPI_result_code_string(rc));
	}
}

void
ops_state_event(TriggerData *td)
{
	Trigger    *trigger = td->tg_trigger;
	TupleDesc	desc = td->tg_relation->rd_att;
	bool		update = TRIGGER_FIRED_BY_UPDATE(td->tg_event);
	HeapTuple	newtup = update ? td->tg_newtuple : td->tg_trigtuple;
	HeapTuple	oldtup = update ? td->tg_trigtuple : NULL;
	bool		job;
	bool		notify;
	char	   *event = NULL;
	char	   *payload;
	TmsRoleSave save;

	if (trigger->tgnargs != 1 ||
		(strcmp(trigger->tgargs[0], "job") != 0 && strcmp(trigger->tgargs[0], "purge") != 0))
		elog(ERROR, "tms._state_event() takes one argument, job or purge");
	job = strcmp(trigger->tgargs[0], "job") == 0;
	notify = tms_events_on(job ? TMS_EVENT_JOB : TMS_EVENT_PURGE);

	/* a webhook gets changes into a state, "job-failed": never inserts */
	if (update)
	{
		char	   *state = column(newtup, desc, "state");

		event = psprintf("%s-%s", trigger->tgargs[0], state);
		for (char *p = event; *p; p++)
			*p = pg_tolower((unsigned char) *p);
		if (tms_webhook_event_bit(event) == 0)
			event = NULL;
	}
	if (!notify && event == NULL)
		return;

	/* tms's own tables, whoever changed the row (only their owner can) */
	SPI_connect();
	tms_become_extension_owner(&save);
	payload = state_payload(job, newtup, oldtup, desc);
	if (notify)
		tms_event_send(payload);
	if (event != NULL)
		enqueue_webhooks(event, payload);
	tms_restore_role(&save);
	SPI_finish();
}
