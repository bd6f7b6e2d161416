-- Adaptive cadence (doc/policies.md): a (rule, table) pair whose jobs
-- change nothing backs off, doubling up to tms.backoff_max (7 days here),
-- and a commit to the table brings it back at once; orphan cleanup backs
-- off while it reclaims fewer bytes than its min-reclaimed-bytes.  SQL
-- only: jobs are submitted with tms._record_evaluation and ended as a
-- worker ends them (the job's effect, the table's metrics before and
-- after, tms._job_ended); commits are simulated with tms.observe_table.
CREATE EXTENSION IF NOT EXISTS tms;
\set VERBOSITY default
\set SHOW_CONTEXT never

SHOW tms.backoff_max;

CREATE SERVER cd_srv FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri 'http://127.0.0.1:9');
SELECT tms.create_object_group('cd-g', server => 'cd_srv', namespace_pattern => 'cd', table_pattern => '*') > 0 AS g;
SELECT tms.create_policy('cd-p', 'cd-g', active => false) > 0 AS p;
SELECT tms.observe_table('cd_srv', 'cd', 't', 'u-1', 'm-1', 1, 1, 0, '2026-01-01', '2026-01-01') AS tid \gset
SELECT id AS pid FROM tms.maintenance_policies WHERE name = 'cd-p' \gset

-- cadence 1 day: its min_interval (longer than the evaluation cycle)
SELECT tms.add_rule('cd-p', 'snapshot-expiry', 'local', '{"commits-added": 1}',
                    min_interval => '1 day') AS r_exp \gset
-- cadence 1 day: its crontab's period (min_interval 0)
SELECT tms.add_rule('cd-p', 'orphan-cleanup', 'local', condition => 'true',
                    options => '{"min-reclaimed-bytes": 5000}',
                    schedule => '{"crontab": "0 3 * * *"}', min_interval => '0') AS r_orph \gset
-- a job handed to tms.maintenance_handler: tms does not see the table before and after
SELECT tms.add_rule('cd-p', 'compaction', 'spark', '{"commits-added": 1}') AS r_ext \gset
-- orphan cleanup on an engine, which counts files, not bytes
SELECT tms.add_rule('cd-p', 'orphan-cleanup', 'spark', condition => 'true',
                    schedule => '{"crontab": "0 3 * * *"}', min_interval => '0') AS r_eng \gset
-- the option is checked like every other
SELECT tms.add_rule('cd-p', 'orphan-cleanup', 'local', condition => 'true',
                    options => '{"min-reclaimed-bytes": -1}', schedule => '{"crontab": "0 3 * * *"}');
\echo :LAST_ERROR_SQLSTATE

SELECT r.operation, tms._rule_cadence(r) FROM tms.maintenance_rules r
 WHERE r.id IN (:r_exp, :r_orph, :r_ext) ORDER BY r.id;

-- submit a job of rule r on the table
CREATE FUNCTION cd_submit(r bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT (tms._record_evaluation(p.id, r, t.id, '{}', '{}', true, 'ok', NULL, NULL, NULL)).job_id
      FROM tms.maintenance_policies p, tms.tables t
     WHERE p.name = 'cd-p' AND t.server = 'cd_srv' AND t.table_name = 't'
$$;

-- end job jid as a worker does: its effect, the table's metrics before
-- and after (the same unless "changed"), then tms._job_ended; returns the
-- pair's back-off
CREATE FUNCTION cd_end(jid bigint, st text, expired bigint, bytes bigint, changed boolean,
                       OUT level integer, OUT wait interval, OUT reason text, OUT message text)
LANGUAGE plpgsql AS $$
DECLARE
    j tms.table_maintenance_job;
BEGIN
    UPDATE tms.table_maintenance_job
       SET state = st, started_at = now(), finished_at = now(), snapshots_expired = expired,
           bytes_deleted = bytes, files_deleted = CASE WHEN bytes > 0 THEN 1 ELSE 0 END,
           after_snapshot_id = 1
     WHERE id = jid RETURNING * INTO j;
    -- tms reads the table before and after the jobs it runs or follows;
    -- the compaction rule's jobs here are handed to tms.maintenance_handler
    IF j.operation <> 'compaction' THEN
        INSERT INTO tms.table_snapshot_metrics (job_id, table_id, server, namespace, table_name,
                                                phase, snapshot_id, metrics)
        VALUES (jid, j.table_id, 'cd_srv', 'cd', 't', 'before', 1,
                '{"snapshots": 5, "manifests": 2, "oldestSnapshotAge": 1000}'),
               (jid, j.table_id, 'cd_srv', 'cd', 't', 'after', 1,
                CASE WHEN changed THEN '{"snapshots": 4, "manifests": 2, "oldestSnapshotAge": 900}'
                     ELSE '{"snapshots": 5, "manifests": 2, "oldestSnapshotAge": 1700}' END::jsonb);
    END IF;
    PERFORM tms._job_ended(jid);
    SELECT b.backoff_level, b.cooldown_until - CASE WHEN r.schedule ? 'crontab' AND b.backoff_level > 0
                                                    THEN tms.cron_prev('0 3 * * *', j.created_at)
                                                    ELSE j.finished_at END,
           b.backoff_reason
      INTO level, wait, reason
      FROM tms.rule_baselines b JOIN tms.maintenance_rules r ON r.id = b.rule_id
     WHERE b.rule_id = j.rule_id AND b.table_id = j.table_id;
    SELECT mj.message INTO message FROM tms.table_maintenance_job mj WHERE mj.id = jid;
    message := regexp_replace(message, 'until .* after', 'until X after');
END
$$;

-- expiry that expires nothing: 1x, 2x, 4x its cadence, then the cap
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
-- shown where an operator looks
SELECT policy, operation, table_name, noop_runs, cadence,
       regexp_replace(reason, 'until .* after', 'until X after') AS reason
  FROM tms.rule_backoffs WHERE server = 'cd_srv' ORDER BY rule_id;
-- a time-elapsed candidate that is backed off is not runnable, and says why
UPDATE tms.rule_baselines SET due_at = now() WHERE rule_id = :r_exp;
SELECT operation, runnable, regexp_replace(backoff, 'until .* after', 'until X after') AS backoff
  FROM tms.candidates WHERE server = 'cd_srv' ORDER BY rule_id;

-- a failed job leaves the level (its cooldown is the regular one)
SELECT level, wait, reason FROM cd_end(cd_submit(:r_exp), 'failed', 0, 0, false);
-- a commit ends the back-off at once; the regular cooldown (the rule's
-- min_interval from its last job's end) stays
SELECT tms.observe_table('cd_srv', 'cd', 't', 'u-1', 'm-3', 1, 1, 0, NULL, '2026-01-03') = :tid AS commit;
SELECT b.backoff_level, b.backoff_reason, b.cooldown_until - b.since AS cooldown
  FROM tms.rule_baselines b WHERE b.rule_id = :r_exp;
SELECT count(*) AS backed_off FROM tms.rule_backoffs WHERE server = 'cd_srv';
-- a cooldown of 0 is none once the commit ended the back-off
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 0, false);
SELECT tms.observe_table('cd_srv', 'cd', 't', 'u-1', 'm-4', 1, 1, 0, NULL, '2026-01-04') = :tid AS commit;
SELECT backoff_level, cooldown_until FROM tms.rule_baselines WHERE rule_id = :r_orph;
-- a refresh that sees no new commit (the same counters) ends nothing
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT tms.observe_table('cd_srv', 'cd', 't', 'u-1', 'm-4', 1, 0, 0, NULL, '2026-01-04') = :tid AS no_commit;
SELECT backoff_level FROM tms.rule_baselines WHERE rule_id = :r_exp;

-- a job that changed the table's metrics, or expired a snapshot, is back to 0
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, true);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_exp), 'succeeded', 3, 0, false);

-- orphan cleanup follows the bytes it reclaims: below min-reclaimed-bytes
-- (5000) it backs off, to firings of its crontab; above, it comes back
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 0, false);
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 4999, false);
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 100, false);
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 5000, false);
SELECT * FROM cd_end(cd_submit(:r_orph), 'succeeded', 0, 0, false);

-- on an engine: a run that deleted no file changed nothing, one that
-- deleted some changed something
SELECT level, wait, reason FROM cd_end(cd_submit(:r_eng), 'succeeded', 0, 0, false);
SELECT level, wait, reason FROM cd_end(cd_submit(:r_eng), 'succeeded', 0, 0, false);
SELECT level, reason FROM cd_end(cd_submit(:r_eng), 'succeeded', 0, 100, false);

-- a job finished by tms.maintenance_handler's executor: tms cannot tell
SELECT tms.finish_operation(cd_submit(:r_ext));
SELECT backoff_level, cooldown_until - since AS cooldown FROM tms.rule_baselines WHERE rule_id = :r_ext;

-- leave nothing behind for the tests after this one
DELETE FROM tms.scheduled_tasks s USING tms.table_maintenance_job j
 WHERE s.task_name = 'maintenance' AND s.task_instance = 'job-' || j.id AND j.table_id = :tid;
DELETE FROM tms.table_snapshot_metrics WHERE table_id = :tid;
DELETE FROM tms.evaluation_log WHERE table_id = :tid;
DELETE FROM tms.table_maintenance_job WHERE table_id = :tid;
DROP FUNCTION cd_end(bigint, text, bigint, bigint, boolean);
DROP FUNCTION cd_submit(bigint);
SELECT tms.drop_policy('cd-p');
SELECT tms.drop_object_group('cd-g');
DELETE FROM tms.tables WHERE id = :tid;
DROP SERVER cd_srv CASCADE;
