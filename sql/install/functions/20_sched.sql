-- Scheduler core: db-scheduler's scheduled_tasks, task kinds with
-- concurrency caps, and the views an operator reads.
--
-- Claiming, heartbeats and completion are done by C code (src/sched/)
-- shared by the background workers and CALL tms.run_pending(); the
-- statements it runs are documented there.
-- Idempotent part, replayed by every update script: only statements
-- that may run again (doc/developing.md).  Tables: sql/install/20_sched.sql.

-- A procedure's signature as tms.task_kinds records it: schema-qualified
-- wherever it is read (regprocedure's text with only pg_catalog on the
-- search path), so that to_regprocedure() finds the same procedure in any
-- session.
CREATE OR REPLACE FUNCTION tms._procedure_signature(proc regprocedure)
RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog
AS $$ SELECT proc::text $$;

REVOKE ALL ON FUNCTION tms._procedure_signature(regprocedure) FROM PUBLIC;

-- register_task_kind(kind, handler, max_concurrency): a kind whose tasks
-- run the SQL procedure handler(task_instance text, task_data jsonb).
CREATE OR REPLACE FUNCTION tms.register_task_kind(kind text, handler regprocedure,
                                       max_concurrency integer DEFAULT 1)
RETURNS void
LANGUAGE c VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_register_task_kind';

COMMENT ON FUNCTION tms.register_task_kind(text, regprocedure, integer) IS
    'register or update a task kind run by a SQL procedure (superuser only)';

CREATE OR REPLACE FUNCTION tms.unregister_task_kind(kind text)
RETURNS void
LANGUAGE c VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_unregister_task_kind';

-- schedule_task: insert a task, or reschedule an existing one (new data and
-- due time).  A task that is running keeps running; the new due time is
-- its next run.
CREATE OR REPLACE FUNCTION tms.schedule_task(kind text, instance text,
                                  data jsonb DEFAULT NULL,
                                  run_at timestamptz DEFAULT now(),
                                  priority integer DEFAULT 0)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_schedule_task';

CREATE OR REPLACE FUNCTION tms.cancel_task(kind text, instance text)
RETURNS boolean
LANGUAGE c VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_cancel_task';

-- run_pending: the claim-execute loop in the calling session, for
-- deployments driven by pg_cron.  Commits between tasks; returns how many
-- tasks it executed and how many of them failed.
CREATE OR REPLACE PROCEDURE tms.run_pending(max_tasks integer DEFAULT 100,
                                 kinds text[] DEFAULT NULL,
                                 INOUT executed integer DEFAULT NULL,
                                 INOUT failed integer DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_run_pending';

-- run_task: execute one given task now, whether due or not; fails cleanly,
-- changing nothing, while another executor holds a live lease on it.
CREATE OR REPLACE PROCEDURE tms.run_task(kind text, instance text,
                              INOUT executed integer DEFAULT NULL,
                              INOUT failed integer DEFAULT NULL)
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_run_task';

REVOKE ALL ON FUNCTION tms.register_task_kind(text, regprocedure, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.unregister_task_kind(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.schedule_task(text, text, jsonb, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION tms.cancel_task(text, text) FROM PUBLIC;
REVOKE ALL ON PROCEDURE tms.run_pending(integer, text[], integer, integer) FROM PUBLIC;
REVOKE ALL ON PROCEDURE tms.run_task(text, text, integer, integer) FROM PUBLIC;

-- The wait before a retry: between half of wait and all of it, uniformly
-- ("equal jitter", https://aws.amazon.com/blogs/architecture/
-- exponential-backoff-and-jitter/).  Tasks that failed together (a
-- catalog down for all of them) come back spread over half their backoff
-- instead of as a herd, while each still waits at least half of it and
-- the wait still grows with the failures; with "full jitter" some would
-- come back at once, to the service that just failed them.  The retries
-- of failed tasks (src/sched/sched.c) and the deferred starts of
-- maintenance jobs (tms._start_job) wait so.
CREATE OR REPLACE FUNCTION tms._jitter(wait interval)
RETURNS interval
LANGUAGE sql VOLATILE
AS $$ SELECT wait * (0.5 + 0.5 * random()) $$;

-- Delete up to batch of the oldest history rows older than retention,
-- folding what they counted into tms.task_run_totals; returns how many.
-- Rows are taken in id order, the order of their settles, so a batch
-- reads no more than batch rows.  The supervisors call it
-- (src/sched/sched.c, prune_history).
CREATE OR REPLACE FUNCTION tms._prune_task_history(retention interval, batch integer DEFAULT 10000)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH old AS (
        SELECT o.id
          FROM (SELECT h.id, h.finished_at FROM tms.task_history h
                 ORDER BY h.id LIMIT batch) o
         WHERE o.finished_at < now() - retention
    ), gone AS (
        DELETE FROM tms.task_history h USING old
         WHERE h.id = old.id
        RETURNING h.*
    ), sums AS (
        SELECT g.kind, g.policy_id, g.rule_id,
               count(*) AS runs,
               count(*) FILTER (WHERE g.succeeded) AS successes,
               count(*) FILTER (WHERE NOT g.succeeded) AS failures,
               sum(g.finished_at - g.started_at) AS total_duration,
               (array_agg(g.started_at ORDER BY g.id DESC))[1] AS last_run_started_at,
               (array_agg(g.finished_at ORDER BY g.id DESC))[1] AS last_run_finished_at,
               (array_agg(g.succeeded ORDER BY g.id DESC))[1] AS last_run_succeeded,
               max(g.finished_at) FILTER (WHERE g.succeeded) AS last_successful_finish,
               max(g.finished_at) FILTER (WHERE NOT g.succeeded) AS last_failure_at,
               (array_agg(g.sqlstate ORDER BY g.id DESC) FILTER (WHERE NOT g.succeeded))[1]
                   AS last_sqlstate,
               (array_agg(g.error ORDER BY g.id DESC) FILTER (WHERE NOT g.succeeded))[1]
                   AS last_error
          FROM gone g
         GROUP BY g.kind, g.policy_id, g.rule_id
    ), folded AS (
        INSERT INTO tms.task_run_totals AS t
        SELECT * FROM sums
        ON CONFLICT (kind, policy_id, rule_id) DO UPDATE
           SET runs = t.runs + excluded.runs,
               successes = t.successes + excluded.successes,
               failures = t.failures + excluded.failures,
               total_duration = t.total_duration + excluded.total_duration,
               last_run_started_at = excluded.last_run_started_at,
               last_run_finished_at = excluded.last_run_finished_at,
               last_run_succeeded = excluded.last_run_succeeded,
               last_successful_finish = coalesce(excluded.last_successful_finish,
                                                 t.last_successful_finish),
               last_failure_at = coalesce(excluded.last_failure_at, t.last_failure_at),
               last_sqlstate = CASE WHEN excluded.last_failure_at IS NULL THEN t.last_sqlstate
                                    ELSE excluded.last_sqlstate END,
               last_error = CASE WHEN excluded.last_failure_at IS NULL THEN t.last_error
                                 ELSE excluded.last_error END
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

REVOKE ALL ON FUNCTION tms._prune_task_history(interval, integer) FROM PUBLIC;

-- What an operator asks: what is due, what runs (who, heartbeat age), what
-- keeps failing.
CREATE OR REPLACE VIEW tms.tasks AS
    SELECT t.task_name AS kind,
           t.task_instance AS instance,
           CASE
               WHEN t.picked THEN 'running'
               WHEN t.consecutive_failures > 0 THEN 'failing'
               WHEN t.execution_time <= now() THEN 'due'
               ELSE 'scheduled'
           END AS state,
           t.execution_time AS due_at,
           t.priority,
           t.picked_by,
           t.picked_pid AS owner_pid,
           CASE WHEN t.picked THEN now() - t.last_heartbeat END AS heartbeat_age,
           t.consecutive_failures,
           t.last_success,
           t.last_failure,
           t.last_error,
           t.task_data AS data
      FROM tms.scheduled_tasks t;

COMMENT ON VIEW tms.tasks IS 'scheduled tasks with their state: due, scheduled, running, failing';

CREATE OR REPLACE VIEW tms.task_counts AS
    SELECT k.kind,
           k.max_concurrency,
           count(t.*) FILTER (WHERE t.picked) AS running,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time <= now()) AS due,
           count(t.*) FILTER (WHERE NOT t.picked AND t.execution_time > now()) AS scheduled,
           count(t.*) FILTER (WHERE t.consecutive_failures > 0) AS failing,
           min(t.execution_time) FILTER (WHERE NOT t.picked) AS next_due
      FROM tms.task_kinds k
      LEFT JOIN tms.scheduled_tasks t ON t.task_name = k.kind
     GROUP BY k.kind, k.max_concurrency;

COMMENT ON VIEW tms.task_counts IS 'tasks per kind and state';

GRANT SELECT ON tms.tasks, tms.task_counts TO pg_monitor;
