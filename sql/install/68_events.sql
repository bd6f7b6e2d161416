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
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).  Functions and views:
-- sql/install/functions/68_events.sql.

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
