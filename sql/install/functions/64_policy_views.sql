-- Maintenance policies, part 5: the views an operator reads, and who may
-- read what.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE VIEW tms.policies AS
    SELECT p.name, g.name AS group_name, g.server, p.owner, p.description,
           p.active, p.time_window,
           tms.window_open(p.time_window, now()) AS window_open,
           (SELECT count(*) FROM tms.maintenance_rules r WHERE r.policy_id = p.id) AS rules,
           p.created_at, p.id
      FROM tms.maintenance_policies p
      JOIN tms.object_groups g ON g.id = p.group_id;

COMMENT ON VIEW tms.policies IS 'maintenance policies with their group, owner, window state and rule count';

CREATE OR REPLACE VIEW tms.rules AS
    SELECT r.id, p.name AS policy, r.operation, r.engine, r.options,
           r.commits_threshold AS commits_added,
           r.bytes_threshold AS bytes_added,
           r.time_threshold_ms AS time_elapsed_ms,
           r.condition, r.needs, r.baseline_mode, r.created_at,
           (SELECT count(*) FROM tms.rule_baselines b
             WHERE b.rule_id = r.id AND b.pending_job IS NOT NULL) AS in_flight,
           r.schedule,
           make_interval(secs => coalesce(r.min_interval_ms,
                                          tms._default_min_interval(r.operation)) / 1000.0) AS min_interval,
           CASE WHEN r.schedule ? 'crontab'
                THEN tms.cron_next(r.schedule ->> 'crontab', greatest(now(), r.cron_fired_at),
                                   coalesce(r.schedule ->> 'time-zone', 'UTC')) END AS next_firing,
           r.cron_fired_at AS last_firing
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id;

COMMENT ON VIEW tms.rules IS 'rules of every policy: operation, engine, thresholds, condition, baseline mode, schedule, cooldown, next crontab firing';

-- What the next cycle would evaluate, and why.
CREATE OR REPLACE VIEW tms.candidates AS
    SELECT p.name AS policy, r.id AS rule_id, r.operation,
           t.server, t.namespace, t.table_name,
           t.commits - b.base_commits AS commits_added,
           t.bytes_added - b.base_bytes AS bytes_added,
           (extract(epoch FROM now() - b.since) * 1000)::bigint AS time_elapsed_ms,
           concat_ws(', ',
               CASE WHEN t.commits >= b.due_commits
                    THEN format('commits-added %s >= %s', t.commits - b.base_commits, r.commits_threshold) END,
               CASE WHEN t.bytes_added >= b.due_bytes
                    THEN format('bytes-added %s >= %s', t.bytes_added - b.base_bytes, r.bytes_threshold) END,
               CASE WHEN b.due_at <= now()
                    THEN format('time-elapsed %s ms >= %s', (extract(epoch FROM now() - b.since) * 1000)::bigint, r.time_threshold_ms) END,
               CASE WHEN b.triggered AND NOT (t.commits >= b.due_commits OR t.bytes_added >= b.due_bytes) IS TRUE
                    THEN 'triggered' END) AS reason,
           p.active AND tms.window_open(p.time_window, now())
             AND (b.cooldown_until IS NULL OR b.cooldown_until <= now()) AS runnable,
           r.schedule,
           b.cooldown_until
      FROM tms.rule_baselines b
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE b.pending_job IS NULL AND (b.triggered OR b.due_at <= now())
       AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.candidates IS
    '(table, rule) pairs whose counters reached a threshold: what the next cycle (schedule null), firing or commit evaluates (runnable: policy active, window open, no cooldown)';

CREATE OR REPLACE VIEW tms.maintenance_jobs AS
    SELECT j.id, p.name AS policy, j.rule_id, j.operation, j.engine, t.server,
           t.namespace, t.table_name, j.state, j.reason, j.attempts, j.last_error,
           j.phase, j.cancel_requested,
           j.before_snapshot_id, j.after_snapshot_id,
           j.created_at, j.started_at, j.finished_at,
           j.snapshots_expired, j.manifests_rewritten, j.manifests_added,
           j.files_deleted, j.bytes_deleted, j.orphans_found,
           j.data_files_rewritten, j.data_files_added, j.bytes_rewritten,
           j.delete_files_rewritten, j.delete_files_added,
           j.options, j.requested_by::regrole AS requested_by, j.statement, j.message
      FROM tms.table_maintenance_job j
      JOIN tms.tables t ON t.id = j.table_id
      LEFT JOIN tms.maintenance_policies p ON p.id = j.policy_id;

COMMENT ON VIEW tms.maintenance_jobs IS
    'maintenance runs, from policies and from tms.run_operation: state with its reason, attempts, effect; finished_at null: in flight';

-- policy content holds no credentials: everyone may read policies and rules
GRANT SELECT ON tms.policies, tms.rules TO PUBLIC;
GRANT SELECT ON tms.candidates, tms.evaluation_log, tms.maintenance_jobs,
                tms.tables, tms.table_snapshot_metrics TO pg_monitor;

REVOKE ALL ON FUNCTION tms._compile_condition(text), tms._glob_match(text, text),
                       tms._find_credential(jsonb),
                       tms._in_group(tms.object_groups, tms.tables),
                       tms._attach(bigint, bigint), tms._table_dropped(bigint),
                       tms._reset_baseline(bigint, bigint),
                       tms._own_policy(regrole, text), tms._own_group(regrole, text),
                       tms._may_use_group(regrole, tms.object_groups),
                       tms._check_server(name, regrole), tms._check_window(jsonb),
                       tms._check_options(jsonb), tms._check_schedule(text, jsonb),
                       tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text),
                       tms._start_job(bigint), tms._job_ended(bigint)
    FROM PUBLIC;
