-- tms 0.4.0 -> 0.5.0
--
-- What changed, and what this script does about it:
--
--  * Events: every state change of a maintenance job and of a purge is
--    sent on the channel tms_events (triggers on their tables; tasks from
--    the scheduler when tms.events has "task").

\echo Use "ALTER EXTENSION tms UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------------
-- Events: NOTIFY tms_events (sql/install/68_events.sql)
-- ---------------------------------------------------------------------

-- The triggers: a job or purge recorded pending, and every change of its
-- state.  The INSERT triggers ignore rows recorded in another state (a
-- restored dump's finished jobs).
CREATE FUNCTION tms._state_event()
RETURNS trigger
LANGUAGE c
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
