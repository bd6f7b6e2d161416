-- The tms background processes, from the shared memory they maintain.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms.workers_internal(
    OUT pid integer,
    OUT role text,
    OUT database name,
    OUT worker_number integer,
    OUT state text,
    OUT current_task text,
    OUT started_at timestamptz,
    OUT state_since timestamptz)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_workers';

COMMENT ON FUNCTION tms.workers_internal() IS
    'tms processes from shared memory; use the view tms.workers';

CREATE OR REPLACE VIEW tms.workers AS
    SELECT pid, role, database, worker_number, state, current_task,
           started_at, state_since
      FROM tms.workers_internal()
     ORDER BY CASE role WHEN 'launcher' THEN 0 WHEN 'supervisor' THEN 1 ELSE 2 END,
              database, worker_number;

COMMENT ON VIEW tms.workers IS
    'tms launcher, supervisors and pool workers: what each is doing now';

-- A view's caller needs EXECUTE on the functions it calls.
REVOKE ALL ON FUNCTION tms.workers_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.workers_internal() TO pg_monitor;
GRANT SELECT ON tms.workers TO pg_monitor;
