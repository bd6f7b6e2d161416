-- Maintenance policies, budgets (doc/policies.md, "Budgets"): what the
-- jobs of a rule or of a policy may spend (data bytes rewritten in a
-- trailing hour, jobs started per window), and how many jobs an engine
-- server runs at once (its option max_concurrent_jobs, doc/engines.md).
-- tms._budget_check is the one implementation: tms._start_job calls it
-- under its advisory lock (so that a count and a start are one step for
-- every worker), tms.candidates and tms.maintenance_jobs show what it
-- says through tms._budget_wait and tms._budget_wait_job.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- The start of the occurrence of time_window open at "at": the latest
-- opening of one of its periods still open then; NULL when the window is
-- closed or there is none.
CREATE OR REPLACE FUNCTION tms._window_opened_at(time_window jsonb, at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT max(f)
      FROM jsonb_array_elements(time_window -> 'periods') p,
           LATERAL tms.cron_prev(p ->> 'cron', at, time_window ->> 'time-zone-id') f
     WHERE f IS NOT NULL
       AND at < f + make_interval(secs => (p ->> 'duration')::float8 / 1000.0)
$$;

-- The next opening of one of time_window's periods after "at" (NULL: none
-- within cron_next's horizon).
CREATE OR REPLACE FUNCTION tms._window_next_opening(time_window jsonb, at timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT min(tms.cron_next(p ->> 'cron', at, time_window ->> 'time-zone-id'))
      FROM jsonb_array_elements(time_window -> 'periods') p
$$;

-- Whether a job of rule p_rule on engine p_engine may start now as far as
-- budgets go.  wait NULL: it may; else "waiting for budget: ..." naming
-- the budget, key the budget's queue ("rule:7", "policy:3",
-- "engine:spark") and retry_at when to look again (when the budget frees,
-- or a short poll when that depends on a running job's end).  p_job is
-- the job asking (NULL: a job that does not exist yet, queued behind
-- every job waiting now); jobs of the same budget waiting with a smaller
-- id go first, so a waiting job keeps its place in the queue.
-- Budgets, in order: the rule's, its policy's (both apply to a job of a
-- policy; p_rule NULL, a job of tms.run_operation: none), then the
-- engine server's max_concurrent_jobs.
--   jobs_per_window: jobs of the scope first started since the opening of
--     the occurrence of the window open now (the rule's own window, else
--     its policy's, for a rule's budget; the policy's for a policy's), or
--     in the trailing hour when there is no window;
--   bytes_rewritten_per_hour: bytes_rewritten of the scope's jobs that
--     ended in the trailing hour; a running job of the scope has not told
--     its bytes yet, so the next one waits for its end: a budget is
--     exceeded by at most the bytes of the one job that started under it;
--   max_concurrent_jobs: the server's running jobs.
-- A job counts toward the rule and policy budgets once, when it first
-- starts (started_at); a retry or a resumed job is not held back.
CREATE OR REPLACE FUNCTION tms._budget_check(p_rule bigint, p_engine text, p_job bigint,
                                             OUT wait text, OUT key text,
                                             OUT retry_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r tms.maintenance_rules;
    p tms.maintenance_policies;
    b tms.maintenance_budgets;
    scope text;
    win jsonb;
    since timestamptz;
    used bigint;
    ahead bigint;
    bytes numeric;
    other bigint;
    lim integer;
BEGIN
    IF p_rule IS NOT NULL THEN
        SELECT * INTO r FROM tms.maintenance_rules WHERE id = p_rule;
        IF FOUND THEN
            SELECT * INTO p FROM tms.maintenance_policies WHERE id = r.policy_id;
        END IF;
    END IF;
    FOR b IN SELECT * FROM tms.maintenance_budgets mb
              WHERE r.id IS NOT NULL AND mb.policy_id = r.policy_id
                AND (mb.rule_id = r.id OR mb.rule_id IS NULL)
              ORDER BY mb.rule_id NULLS LAST
    LOOP
        IF b.rule_id IS NOT NULL THEN
            scope := format('rule %s', r.id);
            key := 'rule:' || r.id;
            win := coalesce(r.time_window, p.time_window);
        ELSE
            scope := format('policy "%s"', p.name);
            key := 'policy:' || p.id;
            win := p.time_window;
        END IF;
        SELECT count(*) INTO ahead FROM tms.table_maintenance_job o
         WHERE o.budget_wait = key AND o.finished_at IS NULL
           AND (p_job IS NULL OR o.id < p_job);
        IF b.jobs_per_window IS NOT NULL THEN
            since := CASE WHEN win IS NULL THEN now() - interval '1 hour'
                          ELSE tms._window_opened_at(win, now()) END;
            -- a closed window holds the job by itself (tms._start_job)
            IF since IS NOT NULL THEN
                SELECT count(*) INTO used FROM tms.table_maintenance_job o
                 WHERE o.started_at >= since AND o.id IS DISTINCT FROM p_job
                   AND o.policy_id = p.id AND (b.rule_id IS NULL OR o.rule_id = r.id);
                IF used + ahead >= b.jobs_per_window THEN
                    wait := format('waiting for budget: %s of %s jobs per window of %s started since %s',
                                   used, b.jobs_per_window, scope,
                                   CASE WHEN win IS NULL THEN 'an hour ago (no time window)'
                                        ELSE format('the window opened at %s',
                                                    to_char(since AT TIME ZONE 'UTC',
                                                            'YYYY-MM-DD"T"HH24:MI:SS"Z"')) END);
                    IF ahead > 0 THEN
                        wait := wait || format(', %s queued ahead', ahead);
                    END IF;
                    IF used < b.jobs_per_window THEN
                        retry_at := now() + tms._jitter(interval '2 seconds');
                    ELSIF win IS NULL THEN
                        -- when enough of the hour's jobs have aged out
                        SELECT o.started_at + interval '1 hour' INTO retry_at
                          FROM tms.table_maintenance_job o
                         WHERE o.started_at >= since AND o.id IS DISTINCT FROM p_job
                           AND o.policy_id = p.id AND (b.rule_id IS NULL OR o.rule_id = r.id)
                         ORDER BY o.started_at
                         OFFSET used - b.jobs_per_window LIMIT 1;
                    ELSE
                        retry_at := coalesce(tms._window_next_opening(win, now()),
                                             now() + interval '1 hour');
                    END IF;
                    RETURN;
                END IF;
            END IF;
        END IF;
        IF b.bytes_rewritten_per_hour IS NOT NULL THEN
            SELECT o.id INTO other FROM tms.table_maintenance_job o
             WHERE o.state = 'running' AND o.finished_at IS NULL
               AND o.id IS DISTINCT FROM p_job
               AND o.policy_id = p.id AND (b.rule_id IS NULL OR o.rule_id = r.id)
             ORDER BY o.id LIMIT 1;
            IF FOUND THEN
                wait := format('waiting for budget: %s bytes rewritten per hour of %s; job %s runs, its bytes count when it ends',
                               b.bytes_rewritten_per_hour, scope, other);
                retry_at := now() + tms._jitter(interval '5 seconds');
                RETURN;
            END IF;
            SELECT coalesce(sum(o.bytes_rewritten), 0) INTO bytes
              FROM tms.table_maintenance_job o
             WHERE o.finished_at > now() - interval '1 hour'
               AND o.policy_id = p.id AND (b.rule_id IS NULL OR o.rule_id = r.id);
            IF bytes >= b.bytes_rewritten_per_hour OR ahead > 0 THEN
                wait := format('waiting for budget: %s of %s bytes rewritten per hour of %s in the last hour',
                               bytes, b.bytes_rewritten_per_hour, scope);
                IF ahead > 0 THEN
                    wait := wait || format(', %s queued ahead', ahead);
                END IF;
                IF bytes < b.bytes_rewritten_per_hour THEN
                    retry_at := now() + tms._jitter(interval '2 seconds');
                ELSE
                    -- when the oldest ends age out far enough: the end of
                    -- the earliest job after whose expiry the rest is under
                    SELECT min(x.finished_at) + interval '1 hour' INTO retry_at
                      FROM (SELECT o.finished_at,
                                   bytes - sum(o.bytes_rewritten) OVER (ORDER BY o.finished_at, o.id) AS rest
                              FROM tms.table_maintenance_job o
                             WHERE o.finished_at > now() - interval '1 hour'
                               AND o.policy_id = p.id AND (b.rule_id IS NULL OR o.rule_id = r.id)) x
                     WHERE x.rest < b.bytes_rewritten_per_hour;
                END IF;
                RETURN;
            END IF;
        END IF;
    END LOOP;
    key := NULL;
    IF p_engine IS NOT NULL THEN
        SELECT split_part(o, '=', 2)::integer INTO lim
          FROM pg_foreign_server s
          JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw, unnest(s.srvoptions) o
         WHERE w.fdwname = 'tms_engine' AND s.srvname = p_engine
           AND o LIKE 'max\_concurrent\_jobs=%';
        IF lim IS NOT NULL THEN
            key := 'engine:' || p_engine;
            SELECT count(*) INTO used FROM tms.table_maintenance_job o
             WHERE o.engine = p_engine AND o.state = 'running' AND o.finished_at IS NULL
               AND o.id IS DISTINCT FROM p_job;
            SELECT count(*) INTO ahead FROM tms.table_maintenance_job o
             WHERE o.budget_wait = key AND o.finished_at IS NULL
               AND (p_job IS NULL OR o.id < p_job);
            IF used + ahead >= lim THEN
                wait := format('waiting for budget: %s of %s jobs at once on engine server "%s" (max_concurrent_jobs)',
                               used, lim, p_engine);
                IF ahead > 0 THEN
                    wait := wait || format(', %s queued ahead', ahead);
                END IF;
                retry_at := now() + tms._jitter(interval '5 seconds');
                RETURN;
            END IF;
        END IF;
    END IF;
    key := NULL;
END
$$;

-- What a new job of rule rule_id on engine_server would wait for now:
-- NULL when it is within every budget, else "waiting for budget: ..."
-- (tms._budget_check).  For views (tms.candidates, and those that show a
-- candidate's state), so it runs as the extension's owner: it reads
-- budgets and job counts only, and is granted to pg_monitor, who reads
-- those views.
CREATE OR REPLACE FUNCTION tms._budget_wait(rule_id bigint, engine_server text)
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (tms._budget_check(rule_id, engine_server, NULL)).wait
$$;

-- What queued job job_id waits for (NULL: no budget holds it); for
-- tms.maintenance_jobs, as tms._budget_wait.
CREATE OR REPLACE FUNCTION tms._budget_wait_job(job_id bigint)
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (tms._budget_check(j.rule_id, j.engine, j.id)).wait
      FROM tms.table_maintenance_job j
     WHERE j.id = job_id AND j.finished_at IS NULL AND j.state = 'pending'
       AND j.phase = 'start'
$$;

-- Set the budget of a policy (rule_id NULL) or of one of its rules:
-- exactly the limits given, NULL for none; both NULL removes it.  Only the
-- policy's owner.  Jobs waiting for budgets of the policy look again now.
CREATE OR REPLACE FUNCTION tms._set_budget(acting regrole, policy text, rule_id bigint,
                                           bytes_rewritten_per_hour bigint,
                                           jobs_per_window integer)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies;
BEGIN
    IF policy IS NULL THEN
        RAISE EXCEPTION 'policy must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    p := tms._own_policy(acting, policy);
    IF rule_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tms.maintenance_rules r
                                            WHERE r.id = _set_budget.rule_id AND r.policy_id = p.id) THEN
        RAISE EXCEPTION 'rule % does not exist in policy "%"', rule_id, policy
              USING ERRCODE = 'undefined_object',
                    HINT = format('See SELECT id FROM tms.rules WHERE policy = %L.', policy);
    END IF;
    IF bytes_rewritten_per_hour <= 0 THEN
        RAISE EXCEPTION 'invalid budget'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('bytes_rewritten_per_hour must be greater than zero, not %s.',
                                    bytes_rewritten_per_hour),
                    HINT = 'NULL removes the limit.';
    END IF;
    IF jobs_per_window <= 0 THEN
        RAISE EXCEPTION 'invalid budget'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('jobs_per_window must be greater than zero, not %s.',
                                    jobs_per_window),
                    HINT = 'NULL removes the limit.';
    END IF;
    -- the policy's row orders concurrent changes of its budgets
    PERFORM 1 FROM tms.maintenance_policies WHERE id = p.id FOR UPDATE;
    DELETE FROM tms.maintenance_budgets b
     WHERE b.policy_id = p.id AND coalesce(b.rule_id, 0) = coalesce(_set_budget.rule_id, 0);
    IF bytes_rewritten_per_hour IS NOT NULL OR jobs_per_window IS NOT NULL THEN
        INSERT INTO tms.maintenance_budgets (policy_id, rule_id, bytes_rewritten_per_hour,
                                             jobs_per_window, set_by)
        VALUES (p.id, _set_budget.rule_id, _set_budget.bytes_rewritten_per_hour,
                _set_budget.jobs_per_window, acting::text);
    END IF;
    -- a changed budget may let waiting jobs start: they look again now
    UPDATE tms.scheduled_tasks t
       SET execution_time = now()
      FROM tms.table_maintenance_job j
     WHERE j.policy_id = p.id AND j.finished_at IS NULL AND j.budget_wait IS NOT NULL
       AND t.task_name = j.task_kind AND t.task_instance = j.task_instance
       AND NOT t.picked AND t.execution_time > now();
END
$$;

CREATE OR REPLACE FUNCTION tms.set_budget(policy text, rule_id bigint DEFAULT NULL,
                                          bytes_rewritten_per_hour bigint DEFAULT NULL,
                                          jobs_per_window integer DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_budget(text, bigint, bigint, integer) IS
    'set the budget of a policy (rule_id NULL) or of one of its rules: bytes rewritten per hour, jobs per window (NULL: no limit; both NULL removes it)';

CREATE OR REPLACE VIEW tms.budgets AS
    SELECT p.name AS policy, b.rule_id, b.bytes_rewritten_per_hour, b.jobs_per_window,
           b.set_at, b.set_by
      FROM tms.maintenance_budgets b
      JOIN tms.maintenance_policies p ON p.id = b.policy_id;

COMMENT ON VIEW tms.budgets IS
    'the budgets of policies (rule_id NULL) and rules: bytes rewritten per hour, jobs per window';

-- budgets hold no credentials: everyone may read them, as policies
GRANT SELECT ON tms.budgets TO PUBLIC;
REVOKE ALL ON FUNCTION tms._budget_check(bigint, text, bigint),
                       tms._budget_wait(bigint, text), tms._budget_wait_job(bigint),
                       tms._set_budget(regrole, text, bigint, bigint, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms._budget_wait(bigint, text), tms._budget_wait_job(bigint)
    TO pg_monitor;
GRANT EXECUTE ON FUNCTION tms.set_budget(text, bigint, bigint, integer) TO PUBLIC;
