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
-- Once-only objects that need the functions (run after them):
-- changed for a new version through sql/updates/ (doc/developing.md).

CREATE FOREIGN DATA WRAPPER tms_webhook
    VALIDATOR tms.webhook_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_webhook IS
    'webhook receivers of tms events: CREATE SERVER ... FOREIGN DATA WRAPPER tms_webhook OPTIONS (events ''job-failed, purge-failed''); the URL in the user mapping';

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
