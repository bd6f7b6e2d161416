-- Rule scores: score => on tms.add_rule and tms.alter_rule (a numeric DSL
-- expression, refused before anything is stored otherwise), the derived
-- variables in conditions and scores, jobs ranked by score (their task's
-- due time back-dated by score x tms.score_aging), a slot freed under
-- tms.max_active_operations making the deferred jobs due at their rank,
-- and tms.table_health.  Commits are simulated with tms.observe_table.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE SERVER ps_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('ps-all', server => 'ps_srv', namespace_pattern => '*') > 0 AS g;
SELECT tms.create_policy('ps-all', 'ps-all', active => false) > 0 AS p;
SELECT tms.observe_table('ps_srv', 'ps', t, 'u-' || t, 'm-1', 1, 50, 0,
                         '2026-01-01', '2026-06-01') > 0 AS observed
  FROM unnest(ARRAY['a', 'b', 'c', 'd']) t;

-- a score compiles as a numeric expression; the rule shows it
SELECT tms.add_rule('ps-all', 'compaction', 'spark', '{"commits-added": 1}',
                    condition => 'healthScore < 80 AND estimatedFilesRemoved > 10',
                    score => '100 - healthScore') AS r_comp \gset
SELECT operation, condition, needs, score FROM tms.rules WHERE id = :r_comp;
SELECT definition ->> 'score' AS score FROM tms.rule_versions WHERE rule_id = :r_comp;
-- without a score: none (its jobs rank by submission time alone)
SELECT tms.add_rule('ps-all', 'snapshot-expiry', 'local', '{"commits-added": 1}') AS r_exp \gset
SELECT score IS NULL AS no_score, definition ? 'score' AS in_definition
  FROM tms.rules r JOIN tms.rule_versions v ON v.rule_id = r.id WHERE r.id = :r_exp;

-- refused, and nothing stored: a BOOLEAN or STRING score, an unknown
-- variable, a syntax error, an empty score
SELECT count(*) AS rules_before FROM tms.maintenance_rules \gset
SELECT tms.add_rule('ps-all', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                    score => 'dataFiles > 10');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('ps-all', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                    score => 'property(''tier'', ''gold'')');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('ps-all', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                    score => '100 - helthScore');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('ps-all', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                    score => 'manifests *');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.add_rule('ps-all', 'manifest-rewrite', 'local', '{"commits-added": 1}',
                    score => '   ');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) = :rules_before AS nothing_stored FROM tms.maintenance_rules;

-- alter_rule sets, replaces and clears it (reset), with the same check
SELECT tms.alter_rule(:r_exp, score => 'estimatedBytesReclaimed / 1GB') AS version;
SELECT tms.alter_rule(:r_exp, score => 'snapshots > 3');
\echo :LAST_ERROR_SQLSTATE
SELECT tms.alter_rule(:r_exp, score => 'snapshots', reset => '{score}');
\echo :LAST_ERROR_SQLSTATE
SELECT version, score FROM tms.rules WHERE id = :r_exp;
SELECT tms.alter_rule(:r_exp, reset => '{score}') AS version;
SELECT version, changes FROM tms.rule_versions WHERE rule_id = :r_exp ORDER BY version;
SELECT score IS NULL AS cleared FROM tms.rules WHERE id = :r_exp;

-- the derived variables are variables like the others
SELECT ok, type, needs, variables
  FROM tms.dsl_check('healthScore < 50 OR estimatedRewriteBytes > 1GB OR estimatedBytesReclaimed > 0');
SELECT tms.dsl_eval('healthScore < 50 AND estimatedFilesRemoved > 5',
                    '{"healthScore": 42.5, "estimatedFilesRemoved": 9}');

-- a job's task is due at its rank, now() - score x tms.score_aging (1 min
-- by default), the score clamped to 0 .. 10000; the claim order of the
-- tasks is the order of the scores
SELECT tms._score_clamp(-5) AS neg, tms._score_clamp('NaN') AS nan,
       tms._score_clamp(NULL) AS null, tms._score_clamp(1e9) AS huge,
       tms._score_clamp(12.5) AS mid;
BEGIN;
SELECT t.table_name, d.decision
  FROM tms.maintenance_policies p, tms.tables t,
       (VALUES ('a', 10.0::float8), ('b', 90.0), ('c', 50.0)) s(tn, score),
       LATERAL tms._record_evaluation(p.id, :r_comp, t.id, '{}', '{}', true, 'ok', NULL, NULL,
                                      NULL, NULL, s.score, 'score: ' || s.score) d
 WHERE p.name = 'ps-all' AND t.server = 'ps_srv' AND t.table_name = s.tn
 ORDER BY t.table_name;
SELECT t.table_name, j.score, extract(epoch FROM now() - j.rank_at) / 60 AS minutes_back,
       s.execution_time = j.rank_at AS task_due_at_rank
  FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id
  JOIN tms.scheduled_tasks s ON s.task_name = 'maintenance' AND s.task_instance = j.task_instance
 WHERE j.rule_id = :r_comp
 ORDER BY s.priority DESC, s.execution_time;
COMMIT;
SELECT table_name, score, score_explanation, decision FROM tms.evaluation_log
 WHERE rule_id = :r_comp ORDER BY table_name;

-- tms.table_health: the next operation of each table and why it waits
SELECT table_name, next_operation, next_state, next_score, waiting_for
  FROM tms.table_health WHERE server = 'ps_srv' ORDER BY table_name;

-- a job deferred for want of a place under tms.max_active_operations
-- waits for its deferral; when a job ends, it is due at its rank again
UPDATE tms.table_maintenance_job j SET reason = '1 operations run (tms.max_active_operations)'
  FROM tms.tables t WHERE t.id = j.table_id AND t.table_name IN ('a', 'c') AND j.rule_id = :r_comp;
UPDATE tms.scheduled_tasks s SET execution_time = now() + interval '1 hour'
  FROM tms.table_maintenance_job j, tms.tables t
 WHERE s.task_name = 'maintenance' AND s.task_instance = j.task_instance
   AND t.id = j.table_id AND t.table_name IN ('a', 'c') AND j.rule_id = :r_comp;
SELECT table_name, waiting_for FROM tms.table_health
 WHERE server = 'ps_srv' AND table_name IN ('a', 'c') ORDER BY table_name;
SELECT tms.finish_operation(j.id, 'succeeded') FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id WHERE t.table_name = 'b' AND j.rule_id = :r_comp;
SELECT t.table_name, s.execution_time = j.rank_at AS due_at_rank
  FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id
  JOIN tms.scheduled_tasks s ON s.task_name = 'maintenance' AND s.task_instance = j.task_instance
 WHERE j.rule_id = :r_comp ORDER BY s.execution_time;

-- the health of a table comes from its latest evaluation that read the
-- manifests (the terms the evaluation computed); debt = 100 - health
SELECT (tms._record_evaluation(p.id, :r_exp, t.id, '{}',
        '{"healthScore": 62.5, "healthTerms": {"smallFileRatio": 0.5, "positionDeleteRatio": 0.5, "equalityDeleteRatio": 0}}',
        false, 'ok', NULL, NULL, NULL)).decision
  FROM tms.maintenance_policies p, tms.tables t
 WHERE p.name = 'ps-all' AND t.server = 'ps_srv' AND t.table_name = 'd';
SELECT table_name, health_score, small_file_ratio, position_delete_ratio,
       equality_delete_ratio, debt, next_operation, waiting_for
  FROM tms.table_health WHERE server = 'ps_srv' AND table_name = 'd';
-- a table in cooldown says until when
UPDATE tms.rule_baselines b SET cooldown_until = '2999-01-01 00:00+00', triggered = true
  FROM tms.tables t WHERE t.id = b.table_id AND t.table_name = 'd' AND b.rule_id = :r_comp;
SELECT table_name, next_operation, next_state, waiting_for
  FROM tms.table_health WHERE server = 'ps_srv' AND table_name = 'd';

-- clean up
SELECT tms.finish_operation(j.id, 'cancelled') FROM tms.table_maintenance_job j
  JOIN tms.tables t ON t.id = j.table_id WHERE t.server = 'ps_srv' AND j.finished_at IS NULL;
DELETE FROM tms.scheduled_tasks s USING tms.table_maintenance_job j, tms.tables t
 WHERE s.task_name = 'maintenance' AND s.task_instance = j.task_instance
   AND t.id = j.table_id AND t.server = 'ps_srv';
SELECT tms.drop_policy('ps-all');
SELECT tms.drop_object_group('ps-all');
