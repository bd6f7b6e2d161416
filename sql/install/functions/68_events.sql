-- State-change events (doc/operations.md, "Events"): NOTIFY tms_events
-- with a JSON payload for every state change of a maintenance job, a purge
-- and (tms.events = '..., task') a task, and webhook deliveries of the
-- changes a tms_webhook server asks for.
--
-- Jobs and purges notify from the row triggers below (their work is C:
-- src/ops/events.c); tasks notify from the scheduler's own statements
-- (src/sched/task_events.c).  A webhook delivery is a row of
-- tms.webhook_outbox written in the transaction of the change, delivered
-- by a task of kind "webhook" (src/ops/webhook.c).
-- Idempotent part, replayed by every update script: only statements
-- that may run again (doc/developing.md).  Tables: sql/install/68_events.sql.

-- The receivers of webhooks: a server names which events it gets; the
-- user mapping of its owner (or PUBLIC) holds the URL, which may carry a
-- secret, and an optional bearer token.  USAGE on the wrapper is not
-- granted to anyone: a webhook receives every job's and purge's outcome.
CREATE OR REPLACE FUNCTION tms.webhook_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_webhook_fdw_validator';

COMMENT ON FUNCTION tms.webhook_fdw_validator(text[], oid) IS
    'validator of the tms_webhook foreign-data wrapper';

-- What an operator reads: state ("retrying": pending after a failed
-- attempt), attempts, the last answer and error; never the URL.
CREATE OR REPLACE VIEW tms.webhook_deliveries AS
    SELECT o.id, o.server, o.event,
           CASE WHEN o.state = 'pending' AND o.attempts > 0 THEN 'retrying'
                ELSE o.state END AS state,
           o.attempts, o.last_status, o.last_error,
           o.created_at, o.last_attempt_at,
           CASE WHEN o.state = 'pending' THEN o.next_attempt_at END AS next_attempt_at,
           o.finished_at,
           t.picked_by AS running_on,
           o.payload
      FROM tms.webhook_outbox o
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'webhook' AND t.task_instance = o.id::text;

COMMENT ON VIEW tms.webhook_deliveries IS
    'webhook deliveries of state-change events: state, attempts, last answer and error (never the URL)';

GRANT SELECT ON tms.webhook_deliveries TO pg_monitor;

-- The triggers: a job or purge recorded pending, and every change of its
-- state.  The INSERT triggers ignore rows recorded in another state (a
-- restored dump's finished jobs).
CREATE OR REPLACE FUNCTION tms._state_event()
RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_state_event';

REVOKE ALL ON FUNCTION tms._state_event() FROM PUBLIC;
