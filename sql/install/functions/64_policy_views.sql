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
           r.cron_fired_at AS last_firing,
           r.version, r.active, r.time_window, r.score
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id;

COMMENT ON VIEW tms.rules IS 'rules of every policy: operation, engine, thresholds, condition, baseline mode, schedule, cooldown, next crontab firing, version, active, window, score';

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
             AND r.active AND tms.window_open(r.time_window, now())
             AND (b.cooldown_until IS NULL OR b.cooldown_until <= now())
             AND NOT EXISTS (SELECT 1 FROM tms._rule_precedence x
                              WHERE x.table_id = t.id AND x.rule_id = r.id
                                AND x.group_rank > 1) AS runnable,
           r.schedule,
           b.cooldown_until,
           tms._budget_wait(r.id, r.engine) AS waiting_for,
           CASE WHEN b.backoff_level > 0
                THEN format('backed off until %s after %s no-op run%s (%s)', b.cooldown_until,
                            b.backoff_level, CASE WHEN b.backoff_level = 1 THEN '' ELSE 's' END,
                            b.backoff_reason) END AS backoff
      FROM tms.rule_baselines b
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.tables t ON t.id = b.table_id
     WHERE b.pending_job IS NULL AND (b.triggered OR b.due_at <= now())
       AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.candidates IS
    '(table, rule) pairs whose counters reached a threshold: what the next cycle (schedule null), firing or commit evaluates (runnable: policy and rule active, windows open, no cooldown, not overridden; waiting_for: the budget its job would wait for)';

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
           j.options, j.requested_by::regrole AS requested_by, j.statement, j.message,
           j.rule_version,
           CASE WHEN j.finished_at IS NULL AND j.state = 'pending'
                THEN tms._budget_wait_job(j.id) END AS waiting_for,
           j.score, j.rank_at, j.data_files_removed, j.rows_removed, j.batch_id
      FROM tms.table_maintenance_job j
      JOIN tms.tables t ON t.id = j.table_id
      LEFT JOIN tms.maintenance_policies p ON p.id = j.policy_id;

COMMENT ON VIEW tms.maintenance_jobs IS
    'maintenance runs, from policies and from tms.run_operation: state with its reason, attempts, effect (retention: data files and rows removed), score and rank; finished_at null: in flight (waiting_for: the budget a queued job waits for; batch_id: the batch whose one task runs it with the other tables of its batch)';

-- Every known table: its health from its latest evaluation that read the
-- manifests (the terms dsl_metrics_derive computed; debt = 100 -
-- healthScore), its next planned operation (its best-ranked job in
-- flight, else its candidate of highest last score) and why that has not
-- run yet.  doc/policies.md, "tms.table_health".
CREATE OR REPLACE VIEW tms.table_health AS
    SELECT t.id AS table_id, t.server, t.namespace, t.table_name,
           h.evaluated_at AS health_at,
           (h.metrics ->> 'healthScore')::float8 AS health_score,
           (h.metrics -> 'healthTerms' ->> 'smallFileRatio')::float8 AS small_file_ratio,
           (h.metrics -> 'healthTerms' ->> 'positionDeleteRatio')::float8 AS position_delete_ratio,
           (h.metrics -> 'healthTerms' ->> 'equalityDeleteRatio')::float8 AS equality_delete_ratio,
           100 - (h.metrics ->> 'healthScore')::float8 AS debt,
           coalesce(j.operation, c.operation) AS next_operation,
           coalesce(j.rule_id, c.rule_id) AS next_rule_id,
           coalesce(j.policy, c.policy) AS next_policy,
           coalesce(j.score, c.score) AS next_score,
           j.id AS next_job_id,
           CASE WHEN j.id IS NOT NULL THEN j.state
                WHEN c.rule_id IS NOT NULL THEN 'candidate' END AS next_state,
           CASE
             WHEN j.state = 'running' THEN format('in flight since %s', j.started_at)
             WHEN j.id IS NOT NULL THEN
               concat_ws('; ', j.reason,
                         CASE WHEN j.ahead > 0
                              THEN format('lower score (%s ahead of it)', j.ahead) END,
                         CASE WHEN j.reason IS NULL AND j.ahead = 0 THEN 'starts next' END)
             WHEN c.rule_id IS NOT NULL THEN
               CASE WHEN c.cooldown_until > now() AND c.backoff_level > 0
                         THEN format('backed off until %s after %s no-op run%s (%s)',
                                     c.cooldown_until, c.backoff_level,
                                     CASE WHEN c.backoff_level = 1 THEN '' ELSE 's' END,
                                     c.backoff_reason)
                    WHEN c.cooldown_until > now()
                         THEN format('cooldown until %s', c.cooldown_until)
                    WHEN c.overridden_by IS NOT NULL
                         THEN format('overridden by rule %s (tms.effective_rules)', c.overridden_by)
                    WHEN NOT c.policy_active THEN format('policy "%s" is inactive', c.policy)
                    WHEN NOT c.rule_active THEN format('rule %s is inactive', c.rule_id)
                    WHEN NOT c.window_open THEN 'window closed'
                    WHEN tms._budget_wait(c.rule_id, c.engine) IS NOT NULL
                         THEN tms._budget_wait(c.rule_id, c.engine)
                    ELSE format('evaluated at the next run of policy "%s"', c.policy) END
           END AS waiting_for
      FROM tms.tables t
      LEFT JOIN LATERAL (
          SELECT l.evaluated_at, l.metrics
            FROM tms.evaluation_log l
           WHERE l.table_name = t.table_name AND l.table_id = t.id
             AND l.metrics ? 'healthScore'
           ORDER BY l.evaluated_at DESC
           LIMIT 1) h ON true
      LEFT JOIN LATERAL (
          SELECT o.id, o.operation, o.rule_id, p.name AS policy, o.score, o.state,
                 o.reason, o.started_at,
                 (SELECT count(*)
                    FROM tms.table_maintenance_job a
                   WHERE a.finished_at IS NULL AND a.state = 'pending'
                     AND a.id <> o.id AND a.rank_at < o.rank_at) AS ahead
            FROM tms.table_maintenance_job o
            LEFT JOIN tms.maintenance_policies p ON p.id = o.policy_id
           WHERE o.table_id = t.id AND o.finished_at IS NULL
           ORDER BY o.state = 'running' DESC, o.rank_at NULLS LAST, o.id
           LIMIT 1) j ON true
      LEFT JOIN LATERAL (
          SELECT r.id AS rule_id, r.operation, r.engine, p.name AS policy, b.cooldown_until,
                 b.backoff_level, b.backoff_reason,
                 p.active AS policy_active, r.active AS rule_active,
                 tms.window_open(p.time_window, now())
                   AND tms.window_open(r.time_window, now()) AS window_open,
                 (SELECT x2.rule_id FROM tms._rule_precedence x
                    JOIN tms._rule_precedence x2
                      ON x2.table_id = x.table_id AND x2.operation = x.operation
                     AND x2.group_rank = 1
                   WHERE x.table_id = t.id AND x.rule_id = r.id AND x.group_rank > 1
                   LIMIT 1) AS overridden_by,
                 (SELECT l.score FROM tms.evaluation_log l
                   WHERE l.table_name = t.table_name AND l.table_id = t.id
                     AND l.rule_id = r.id AND l.score IS NOT NULL
                   ORDER BY l.evaluated_at DESC LIMIT 1) AS score
            FROM tms.rule_baselines b
            JOIN tms.maintenance_rules r ON r.id = b.rule_id
            JOIN tms.maintenance_policies p ON p.id = r.policy_id
           WHERE b.table_id = t.id AND b.pending_job IS NULL
             AND (b.triggered OR b.due_at <= now())
           ORDER BY score DESC NULLS LAST, tms._chain_rank(r.operation), r.id
           LIMIT 1) c ON j.id IS NULL
     WHERE t.dropped_at IS NULL;

COMMENT ON VIEW tms.table_health IS
    'every known table: health score and its terms from its latest evaluation, debt (100 - health), its next planned operation and why it has not run yet';

-- Which rules run on each table, per operation, and which they override
-- (the view tms._rule_precedence, the one implementation the evaluation uses
-- too): the rules of the group that names the table most closely, then
-- the group of highest priority, then the oldest group.  One row per
-- winning rule; reason compares the winner's group with the next one.
CREATE OR REPLACE VIEW tms.effective_rules AS
    SELECT t.server, t.namespace, t.table_name, w.operation, w.rule_id,
           p.name AS policy, g.name AS group_name, ws.label AS specificity, w.priority,
           coalesce(l.rules, '{}') AS overridden_rules,
           coalesce(l.groups, '{}') AS overridden_groups,
           CASE WHEN l.rules IS NULL
                THEN format('no other group has a rule of %s for the table', w.operation)
                WHEN w.specificity > l.specificity
                THEN format('group "%s" names the table more closely (%s) than group "%s" (%s)',
                            g.name, ws.label, l.next_group, ls.label)
                WHEN w.priority > l.priority
                THEN format('group "%s" has a higher priority (%s) than group "%s" (%s); both name the table by %s',
                            g.name, w.priority, l.next_group, l.priority, ws.label)
                ELSE format('groups "%s" and "%s" name the table alike (%s) with the same priority (%s); the older group wins',
                            g.name, l.next_group, ws.label, w.priority)
           END AS reason,
           t.id AS table_id
      FROM tms.tables t
      JOIN tms._rule_precedence w ON w.table_id = t.id
      JOIN tms.maintenance_rules r ON r.id = w.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.object_groups g ON g.id = w.group_id
      LEFT JOIN LATERAL (
          SELECT array_agg(y.rule_id ORDER BY y.group_rank, y.rule_id) AS rules,
                 array_agg(DISTINCT yg.name) AS groups,
                 (array_agg(yg.name ORDER BY y.group_rank, y.rule_id))[1] AS next_group,
                 (array_agg(y.specificity ORDER BY y.group_rank, y.rule_id))[1] AS specificity,
                 (array_agg(y.priority ORDER BY y.group_rank, y.rule_id))[1] AS priority
            FROM tms._rule_precedence y
            JOIN tms.object_groups yg ON yg.id = y.group_id
           WHERE y.table_id = t.id AND y.operation = w.operation AND y.group_rank > 1
          HAVING count(*) > 0) l ON true
      CROSS JOIN LATERAL (
          SELECT CASE w.specificity WHEN 3 THEN 'exact table' WHEN 2 THEN 'pattern'
                                    ELSE 'server-wide' END AS label) ws
      LEFT JOIN LATERAL (
          SELECT CASE l.specificity WHEN 3 THEN 'exact table' WHEN 2 THEN 'pattern'
                                    ELSE 'server-wide' END AS label) ls ON true
     WHERE w.group_rank = 1 AND t.dropped_at IS NULL;

COMMENT ON VIEW tms.effective_rules IS
    'per table and operation, the rules that run there and the rules of other groups they override, with the reason (specificity, then priority, then the older group)';

-- policy content holds no credentials: everyone may read policies and rules
GRANT SELECT ON tms.policies, tms.rules, tms.rule_versions TO PUBLIC;
REVOKE ALL ON tms._rule_precedence FROM PUBLIC;
GRANT SELECT ON tms.candidates, tms.evaluation_log, tms.maintenance_jobs,
                tms.tables, tms.table_snapshot_metrics, tms.effective_rules,
                tms.table_health TO pg_monitor;

REVOKE ALL ON FUNCTION tms._compile_condition(text), tms._compile_score(text),
                       tms._glob_match(text, text),
                       tms._find_credential(jsonb),
                       tms._in_group(tms.object_groups, tms.tables),
                       tms._attach(bigint, bigint), tms._table_dropped(bigint),
                       tms._reset_baseline(bigint, bigint),
                       tms._own_policy(regrole, text), tms._own_group(regrole, text),
                       tms._may_use_group(regrole, tms.object_groups),
                       tms._check_server(name, regrole), tms._check_window(jsonb),
                       tms._check_options(jsonb), tms._check_schedule(text, jsonb),
                       tms._check_rule(text, text, jsonb, text, text, jsonb, jsonb, interval, jsonb, text),
                       tms._rule_definition(tms.maintenance_rules),
                       tms._rule_wins(bigint, bigint),
                       tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text, integer, double precision, text),
                       tms._start_job(bigint), tms._job_ended(bigint)
    FROM PUBLIC;
