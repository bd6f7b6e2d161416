/*-------------------------------------------------------------------------
 *
 * webhook.c
 *	  The "webhook" task kind: deliver one row of tms.webhook_outbox to
 *	  its tms_webhook server by an HTTP POST of its payload (events.h).
 *
 * The outbox row is written by the trigger of the state change it
 * reports (events.c), in that change's transaction; its task (instance:
 * the row's id) is detached (src/sched/sched.c), so the POST runs outside
 * any transaction and a receiver that hangs holds one pool worker for at
 * most the server's request_timeout, never a job.  A run:
 *
 *	 read		(step, as the extension owner) the row; gone, or no longer
 *				pending: nothing to do.  Its server, which must still be a
 *				tms_webhook server, and the user mapping of the server's
 *				owner (or PUBLIC): url and token, copied into malloc'd
 *				memory that is wiped when the run ends.  No server or no
 *				mapping fails the delivery for good.
 *	 post		io_webhook_post() with the server's connect_timeout and
 *				request_timeout (default 10 s), ca_file and ca_path; ended
 *				by a query cancel, a termination or a lost lease.
 *	 record		(step, conditional on the lease) delivered on a 2xx; or
 *				the attempt's error and status, and the task due again
 *				after a backoff with jitter: tms.retry_delay doubling per
 *				attempt up to tms.retry_delay_max, spread by tms._jitter
 *				like a task's retry, or what a 429 or 503 asked for in Retry-After
 *				when that is longer; failed after tms.webhook_max_attempts,
 *				or at once on a 4xx other than 408 and 429 (the receiver
 *				refuses this request: sending it again cannot help).
 *				Delivered and failed rows older than tms.webhook_retention
 *				are deleted.
 *
 * The task reschedules itself (tms.schedule_task on its own picked row,
 * which the settle then keeps) rather than failing: the backoff must
 * follow the receiver's Retry-After, and a receiver that is down is the
 * delivery's state (tms.webhook_deliveries), not the scheduler's.
 *
 * Secrets: the URL and the token are never written to a table, a log or
 * a message (io_webhook_post names the receiver by its origin only); the
 * outbox holds the server's name and the payload, which holds none.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "bridge/catalog.h"
#include "bridge/fdw_options.h"
#include "bridge/jsonb_secrets.h"
#include "io/io.h"
#include "ops/events.h"
#include "sched/lease.h"
#include "sched/sched.h"

/* the request timeout of a server that sets none */
#define WEBHOOK_DEFAULT_TIMEOUT_MS 10000

typedef struct Delivery
{
	SchedTask  *task;
	int64		id;
	MemoryContext cxt;

	/* read */
	bool		pending;		/* the row exists and is pending */
	char	   *server_name;
	char	   *payload;
	int			attempts;		/* before this one */
	char	   *url;			/* malloc'd, wiped */
	char	   *token;			/* malloc'd, wiped; NULL: none */
	IoHttpOptions http;
	char	   *terminal;		/* why it can never be delivered */

	/* post */
	int			status;			/* HTTP status of the answer, 0: none */
	char	   *error;			/* NULL: delivered */
	long		retry_after_ms;

	/* record */
	bool		held;			/* the lease was held */
} Delivery;

static SchedOutcome webhook_handler(SchedTask *task, ErrorData **error);

void
tms_webhook_register(void)
{
	sched_register_detached("webhook", webhook_handler, &tms_webhook_concurrency);
}

/*
 * The options of the user mapping of user (or else PUBLIC) on a server;
 * *found false when there is neither.
 */
static List *
mapping_options(Oid user, Oid serverid, bool *found)
{
	HeapTuple	tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
									 ObjectIdGetDatum(serverid));
	Datum		d;
	bool		isnull;
	List	   *options;

	if (!HeapTupleIsValid(tp))
		tp = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							 ObjectIdGetDatum(serverid));
	*found = HeapTupleIsValid(tp);
	if (!*found)
		return NIL;
	d = SysCacheGetAttr(USERMAPPINGUSERSERVER, tp, Anum_pg_user_mapping_umoptions, &isnull);
	options = isnull ? NIL : untransformRelOptions(d);
	ReleaseSysCache(tp);
	return options;
}

static void
step_read(void *arg)
{
	Delivery   *d = arg;
	Oid			types[1] = {INT8OID};
	Datum		args[1];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	ForeignServer *server;
	List	   *um;
	bool		found;
	const char *v;
	int			rc;

	args[0] = Int64GetDatum(d->id);
	rc = SPI_execute_with_args("SELECT server, payload::text, attempts"
							   "  FROM tms.webhook_outbox WHERE id = $1 AND state = 'pending'",
							   1, types, args, NULL, true, 1);
	MemoryContextSwitchTo(d->cxt);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read webhook delivery: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return;
	d->pending = true;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	d->server_name = SPI_getvalue(tup, desc, 1);
	d->payload = SPI_getvalue(tup, desc, 2);
	d->attempts = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));

	server = GetForeignServerByName(d->server_name, true);
	if (server == NULL ||
		strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "tms_webhook") != 0)
	{
		d->terminal = psprintf("tms_webhook server \"%s\" no longer exists", d->server_name);
		return;
	}
	um = mapping_options(server->owner, server->serverid, &found);
	MemoryContextSwitchTo(d->cxt);
	if (!found || tms_option(um, "url") == NULL)
	{
		d->terminal = psprintf("no user mapping with a url for the owner of tms_webhook server \"%s\"",
							   d->server_name);
		return;
	}
	d->url = tms_malloc_strdup(tms_option(um, "url"));
	d->token = tms_malloc_strdup(tms_option(um, "token"));

	memset(&d->http, 0, sizeof(d->http));
	d->http.request_timeout_ms = WEBHOOK_DEFAULT_TIMEOUT_MS;
	if ((v = tms_option(server->options, "connect_timeout")) != NULL)
		d->http.connect_timeout_ms = tms_option_ms("connect_timeout", v);
	if ((v = tms_option(server->options, "request_timeout")) != NULL)
		d->http.request_timeout_ms = tms_option_ms("request_timeout", v);
	if ((v = tms_option(server->options, "ca_file")) != NULL)
		d->http.ca_file = pstrdup(v);
	if ((v = tms_option(server->options, "ca_path")) != NULL)
		d->http.ca_path = pstrdup(v);
	tms_io_set_waits(&d->http);
}

/* Is a failed attempt worth repeating? */
static bool
retryable(const Delivery *d)
{
	if (d->terminal != NULL)
		return false;
	if (d->status >= 400 && d->status < 500)
		return d->status == 408 || d->status == 429;
	return true;
}

#define LEASE_HELD SCHED_LEASE_HELD("webhook")

static void
step_record(void *arg)
{
	Delivery   *d = arg;
	Oid			types[10] = {INT8OID, TEXTOID, INT8OID, INT4OID, TEXTOID, BOOLOID,
	INT4OID, INT4OID, INT4OID, INT8OID};
	Datum		args[10];
	char		nulls[10] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	char	   *state;
	int			rc;

	args[0] = Int64GetDatum(d->id);
	args[1] = CStringGetTextDatum(d->task->instance);
	args[2] = Int64GetDatum(d->task->version);
	args[3] = Int32GetDatum(d->status);
	if (d->status == 0)
		nulls[3] = 'n';
	if (d->error)
		args[4] = CStringGetTextDatum(d->error);
	else
		nulls[4] = 'n';
	args[5] = BoolGetDatum(!retryable(d));
	args[6] = Int32GetDatum(tms_webhook_max_attempts);
	args[7] = Int32GetDatum(tms_retry_delay_ms);
	args[8] = Int32GetDatum(tms_retry_delay_max_ms);
	args[9] = Int64GetDatum(d->retry_after_ms);
	rc = SPI_execute_with_args("UPDATE tms.webhook_outbox"
							   "   SET attempts = attempts + 1, last_status = $4,"
							   "       last_error = $5, last_attempt_at = now(),"
							   "       state = CASE WHEN $5 IS NULL THEN 'delivered'"
							   "                    WHEN $6 OR attempts + 1 >= $7 THEN 'failed'"
							   "                    ELSE 'pending' END,"
							   "       finished_at = CASE WHEN $5 IS NULL OR $6 OR attempts + 1 >= $7"
							   "                          THEN now() END,"
							   "       next_attempt_at = CASE WHEN $5 IS NULL OR $6 OR attempts + 1 >= $7"
							   "                              THEN NULL"
							   "                              ELSE now() + greatest("
							   "                  tms._jitter(make_interval(secs =>"
							   "                      least($9::float8, $8::float8 * power(2, least(attempts, 30)))"
							   "                      / 1000.0)),"
							   "                  make_interval(secs => $10::float8 / 1000.0)) END"
							   " WHERE id = $1 AND state = 'pending' AND" LEASE_HELD
							   " RETURNING state, next_attempt_at",
							   10, types, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record a webhook delivery: %s", SPI_result_code_string(rc));
	d->held = SPI_processed == 1;
	if (!d->held)
		return;
	state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (strcmp(state, "pending") == 0)
	{
		bool		isnull;
		Datum		sargs[2];
		Oid			stypes[2] = {TEXTOID, TIMESTAMPTZOID};

		/* due again then: the settle keeps a row whose due time moved */
		sargs[0] = args[1];
		sargs[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
		rc = SPI_execute_with_args("SELECT tms.schedule_task('webhook', $1, NULL, $2)",
								   2, stypes, sargs, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not reschedule a webhook delivery: %s",
				 SPI_result_code_string(rc));
		return;
	}
	if (strcmp(state, "failed") == 0)
		ereport(LOG,
				(errmsg("webhook delivery " INT64_FORMAT " to server \"%s\" failed for good: %s",
						d->id, d->server_name, d->error)));
	types[0] = INT4OID;
	args[0] = Int32GetDatum(tms_webhook_retention_s);
	rc = SPI_execute_with_args("DELETE FROM tms.webhook_outbox"
							   " WHERE state <> 'pending'"
							   "   AND finished_at < now() - make_interval(secs => $1)",
							   1, types, args, NULL, false, 0);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "could not prune webhook deliveries: %s", SPI_result_code_string(rc));
}

static void
post(Delivery *d)
{
	IoWebhookRequest req;
	TmsError	err;
	long		status;

	memset(&req, 0, sizeof(req));
	req.url = d->url;
	req.token = d->token;
	req.body = d->payload;
	req.body_len = strlen(d->payload);
	req.http = d->http;
	if (io_webhook_post(&req, &status, &d->retry_after_ms, &err) != 0)
		d->error = pstrdup(err.message);
	d->status = (int) status;
}

static SchedOutcome
webhook_handler(SchedTask *task, ErrorData **error)
{
	MemoryContext old = CurrentMemoryContext;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tms webhook delivery",
											  ALLOCSET_DEFAULT_SIZES);
	Delivery   *d;
	char	   *end;
	volatile SchedOutcome outcome = SCHED_DONE;

	MemoryContextSwitchTo(cxt);
	d = palloc0(sizeof(Delivery));
	d->task = task;
	d->cxt = cxt;
	d->retry_after_ms = -1;
	d->id = strtoi64(task->instance, &end, 10);
	if (*end != '\0' || d->id <= 0)
	{
		MemoryContextSwitchTo(old);
		*error = sched_error(ERRCODE_INVALID_PARAMETER_VALUE,
							 psprintf("invalid webhook task instance \"%s\"", task->instance),
							 NULL);
		MemoryContextDelete(cxt);
		return SCHED_FAILED;
	}

	PG_TRY();
	{
		sched_owner_step(step_read, d);
		if (d->pending)
		{
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("tms: webhook delivery " INT64_FORMAT, d->id));
			if (d->terminal != NULL)
				d->error = d->terminal;
			else
				post(d);
			tms_free_secret(d->url);
			tms_free_secret(d->token);
			d->url = d->token = NULL;
			CHECK_FOR_INTERRUPTS();
			if (sched_lease_lost())
				outcome = SCHED_LEASE_LOST;
			else
			{
				sched_owner_step(step_record, d);
				if (!d->held)
					outcome = SCHED_LEASE_LOST;
			}
		}
	}
	PG_FINALLY();
	{
		tms_free_secret(d->url);
		tms_free_secret(d->token);
		MemoryContextSwitchTo(old);
	}
	PG_END_TRY();
	MemoryContextDelete(cxt);
	return outcome;
}
