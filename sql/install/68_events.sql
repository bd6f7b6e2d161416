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

-- The receivers of webhooks: a server names which events it gets; the
-- user mapping of its owner (or PUBLIC) holds the URL, which may carry a
-- secret, and an optional bearer token.  USAGE on the wrapper is not
-- granted to anyone: a webhook receives every job's and purge's outcome.
CREATE FUNCTION tms.webhook_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_webhook_fdw_validator';

COMMENT ON FUNCTION tms.webhook_fdw_validator(text[], oid) IS
    'validator of the tms_webhook foreign-data wrapper';

CREATE FOREIGN DATA WRAPPER tms_webhook
    VALIDATOR tms.webhook_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_webhook IS
    'webhook receivers of tms events: CREATE SERVER ... FOREIGN DATA WRAPPER tms_webhook OPTIONS (events ''job-failed, purge-failed''); the URL in the user mapping';

-- One row per (event, webhook server) to deliver; readable by the
-- extension owner only (the view below is what others read).
CREATE TABLE tms.webhook_outbox (
    id              bigserial PRIMARY KEY,
    server          name NOT NULL,          -- the tms_webhook server
    event           text NOT NULL,          -- job-failed, purge-failed ...
    payload         jsonb NOT NULL,         -- the body POSTed: the tms_events payload
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    last_status     integer,                -- HTTP status of the last answer
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    next_attempt_at timestamptz DEFAULT now(),
    finished_at     timestamptz,
    CHECK ((state = 'pending') = (finished_at IS NULL))
);

COMMENT ON TABLE tms.webhook_outbox IS
    'webhook deliveries of state-change events: pending -> delivered | failed';

CREATE INDEX webhook_outbox_finished_idx ON tms.webhook_outbox (finished_at)
    WHERE finished_at IS NOT NULL;

REVOKE ALL ON tms.webhook_outbox FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('tms.webhook_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('tms.webhook_outbox_id_seq', '');

-- The built-in task kind; its cap follows tms.webhook_concurrency.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('webhook', NULL, 2, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'webhook', s FROM generate_series(1, 2) s;

-- What an operator reads: state ("retrying": pending after a failed
-- attempt), attempts, the last answer and error; never the URL.
CREATE VIEW tms.webhook_deliveries AS
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
CREATE FUNCTION tms._state_event()
RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_state_event';

REVOKE ALL ON FUNCTION tms._state_event() FROM PUBLIC;

CREATE TRIGGER tms_job_created
    AFTER INSERT ON tms.table_maintenance_job
    FOR EACH ROW WHEN (NEW.state = 'pending')
    EXECUTE FUNCTION tms._state_event('job');
CREATE TRIGGER tms_job_state
    AFTER UPDATE OF state ON tms.table_maintenance_job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION tms._state_event('job');
CREATE TRIGGER tms_purge_created
    AFTER INSERT ON tms.iceberg_cleanup_job
    FOR EACH ROW WHEN (NEW.state = 'PENDING')
    EXECUTE FUNCTION tms._state_event('purge');
CREATE TRIGGER tms_purge_state
    AFTER UPDATE OF state ON tms.iceberg_cleanup_job
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION tms._state_event('purge');
