-- Maintenance policies: adaptive cadence (doc/policies.md, "Adaptive
-- cadence").  A (rule, table) pair whose jobs change nothing backs off:
-- after the Nth such job in a row its next job waits the rule's cadence
-- times 2^(N-1), at most tms.backoff_max; a job that changes something
-- brings it back to its cadence, and so does a commit to the table
-- (tms.observe_table, whoever observed it: a refresh, a commit-job).
-- The state is the pair's row of tms.rule_baselines: backoff_level (N),
-- backoff_reason, and cooldown_until, which every evaluation (cycle,
-- crontab firing, commit-job, tms.evaluate_now) already honours.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- The rule's cadence, the unit of its back-off: the longest of its
-- cooldown (min_interval, or the operation's setting), its time-elapsed
-- threshold, and its schedule's period: the time between its crontab's
-- next two firings, or, without a crontab, tms.evaluation_cycle_interval.
CREATE OR REPLACE FUNCTION tms._rule_cadence(r tms.maintenance_rules)
RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT greatest(
        make_interval(secs => coalesce(r.min_interval_ms,
                                       tms._default_min_interval(r.operation)) / 1000.0),
        make_interval(secs => coalesce(r.time_threshold_ms, 0) / 1000.0),
        CASE WHEN r.schedule ? 'crontab'
             THEN (SELECT tms.cron_next(c.e, n.first, c.z) - n.first
                     FROM (SELECT r.schedule ->> 'crontab' AS e,
                                  coalesce(r.schedule ->> 'time-zone', 'UTC') AS z) c,
                          LATERAL (SELECT tms.cron_next(c.e, now(), c.z) AS first) n)
             ELSE current_setting('tms.evaluation_cycle_interval')::interval END)
$$;

-- Why job j changed nothing, or NULL when it changed something or when
-- tms cannot tell.  Only a succeeded job whose table tms read before and
-- after it (tms.table_snapshot_metrics: the jobs tms runs or follows, not
-- those handed to tms.maintenance_handler) can count, and only when the
-- table's current snapshot and metrics (but the age of its oldest
-- snapshot, which grows by itself) are the same after as before; then by
-- operation: snapshot expiry expired no snapshot and deleted no file;
-- orphan cleanup reclaimed fewer bytes than its option
-- min-reclaimed-bytes (default 1 MiB: a listing of the whole table
-- location is not worth less), or on an engine server, which counts
-- files and not bytes, deleted no file; any other operation rewrote,
-- added and deleted nothing.
CREATE OR REPLACE FUNCTION tms._job_noop(j tms.table_maintenance_job)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN j.operation = 'orphan-cleanup' AND j.engine = 'local'
        THEN CASE WHEN j.bytes_deleted < o.min_reclaimed
                  THEN format('reclaimed %s bytes, less than min-reclaimed-bytes %s',
                              j.bytes_deleted, o.min_reclaimed) END
        WHEN j.operation = 'orphan-cleanup'
        THEN CASE WHEN j.files_deleted = 0 AND j.bytes_deleted = 0
                  THEN 'deleted no file' END
        WHEN j.operation = 'snapshot-expiry'
        THEN CASE WHEN j.snapshots_expired = 0 AND j.files_deleted = 0
                  THEN 'expired no snapshot' END
        WHEN j.manifests_rewritten = 0 AND j.manifests_added = 0 AND j.data_files_rewritten = 0
             AND j.data_files_added = 0 AND j.delete_files_rewritten = 0
             AND j.delete_files_added = 0 AND j.files_deleted = 0
        THEN 'committed nothing' END
      FROM tms.table_snapshot_metrics b
      JOIN tms.table_snapshot_metrics a ON a.job_id = b.job_id AND a.phase = 'after'
      CROSS JOIN LATERAL (
          SELECT coalesce(CASE WHEN jsonb_typeof(j.options -> 'min-reclaimed-bytes') = 'number'
                               THEN (j.options ->> 'min-reclaimed-bytes')::numeric END,
                          1048576) AS min_reclaimed) o
     WHERE b.job_id = j.id AND b.phase = 'before' AND j.state = 'succeeded'
       AND a.snapshot_id IS NOT DISTINCT FROM b.snapshot_id
       AND coalesce(j.after_snapshot_id, b.snapshot_id) IS NOT DISTINCT FROM b.snapshot_id
       AND a.metrics - 'oldestSnapshotAge' = b.metrics - 'oldestSnapshotAge'
$$;

-- After job jid of a rule ended and its baseline was reset
-- (tms._job_ended): a job that changed nothing raises the pair's level
-- to N and moves its cooldown to the end of the back-off, and says so in
-- the job's message; one that changed something sets the level back to
-- 0 (its cooldown is the regular one _reset_baseline set); one that did
-- not succeed leaves the level as it is.  The back-off, the rule's
-- cadence times 2^(N-1) but at most tms.backoff_max (and never less than
-- the cadence), counts from the job's end; for a crontab rule from the
-- firing before the job was submitted, to a firing, so that at 1x the
-- next firing runs and at 2x one is skipped.  tms.backoff_max = 0: no
-- back-off.
CREATE OR REPLACE FUNCTION tms._adapt_cadence(jid bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.table_maintenance_job;
    r tms.maintenance_rules;
    why text;
    lvl integer;
    base_s double precision;
    cap_s double precision;
    delay interval;
    e text;
    z text;
    until timestamptz;
BEGIN
    SELECT * INTO j FROM tms.table_maintenance_job WHERE id = jid;
    SELECT * INTO r FROM tms.maintenance_rules WHERE id = j.rule_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    why := tms._job_noop(j);
    cap_s := extract(epoch FROM current_setting('tms.backoff_max')::interval);
    IF why IS NULL OR cap_s <= 0 THEN
        IF j.state = 'succeeded' THEN
            UPDATE tms.rule_baselines
               SET backoff_level = 0, backoff_reason = NULL
             WHERE rule_id = j.rule_id AND table_id = j.table_id AND backoff_level > 0;
        END IF;
        RETURN;
    END IF;
    UPDATE tms.rule_baselines
       SET backoff_level = least(backoff_level, 1000000) + 1
     WHERE rule_id = j.rule_id AND table_id = j.table_id
    RETURNING backoff_level INTO lvl;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    base_s := extract(epoch FROM tms._rule_cadence(r));
    delay := make_interval(secs => least(base_s * power(2::double precision, least(lvl - 1, 62)),
                                         greatest(cap_s, base_s)));
    IF r.schedule ? 'crontab' THEN
        e := r.schedule ->> 'crontab';
        z := coalesce(r.schedule ->> 'time-zone', 'UTC');
        until := tms.cron_next(e, coalesce(tms.cron_prev(e, j.created_at, z), j.created_at)
                                  + delay - interval '1 microsecond', z);
    END IF;
    until := coalesce(until, now() + delay);
    UPDATE tms.rule_baselines
       SET cooldown_until = greatest(cooldown_until, until), backoff_reason = why
     WHERE rule_id = j.rule_id AND table_id = j.table_id
    RETURNING cooldown_until INTO until;
    UPDATE tms.table_maintenance_job
       SET message = concat_ws('; ', message,
                               format('backed off until %s after %s no-op run%s (%s)',
                                      until, lvl, CASE WHEN lvl = 1 THEN '' ELSE 's' END, why))
     WHERE id = jid;
END
$$;

-- A commit observed on table tid (tms.observe_table) brings every rule
-- backed off there back to its cadence at once: the back-off ends, and
-- what stays of the cooldown is the regular one (min_interval from the
-- last job's end, tms._reset_baseline's "since").  One statement over the
-- table's baselines (rule_baselines_table_idx).
CREATE OR REPLACE FUNCTION tms._end_backoff(tid bigint)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE tms.rule_baselines b
       SET backoff_level = 0, backoff_reason = NULL,
           cooldown_until = nullif(greatest(b.since + make_interval(secs =>
                                      coalesce(r.min_interval_ms,
                                               tms._default_min_interval(r.operation)) / 1000.0),
                                            now()), now())
      FROM tms.maintenance_rules r
     WHERE b.table_id = tid AND b.backoff_level > 0 AND r.id = b.rule_id;
$$;

-- The pairs backed off now, and why.
CREATE OR REPLACE VIEW tms.rule_backoffs AS
    SELECT p.name AS policy, r.id AS rule_id, r.operation,
           t.server, t.namespace, t.table_name,
           b.backoff_level AS noop_runs, b.cooldown_until AS backoff_until,
           tms._rule_cadence(r) AS cadence,
           format('backed off until %s after %s no-op run%s (%s)', b.cooldown_until,
                  b.backoff_level, CASE WHEN b.backoff_level = 1 THEN '' ELSE 's' END,
                  b.backoff_reason) AS reason
      FROM tms.rule_baselines b
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE b.backoff_level > 0 AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.rule_backoffs IS
    '(table, rule) pairs whose last jobs changed nothing: how many in a row, until when the next waits, and why (adaptive cadence)';

GRANT SELECT ON tms.rule_backoffs TO pg_monitor;

REVOKE ALL ON FUNCTION tms._rule_cadence(tms.maintenance_rules),
                       tms._job_noop(tms.table_maintenance_job),
                       tms._adapt_cadence(bigint), tms._end_backoff(bigint)
    FROM PUBLIC;
