-- tms 0.3.0 -> 0.4.0
--
-- What changed, and what this script does about it:
--
--  * Rules have a schedule (a crontab in a time zone, on-commit, or NULL:
--    the evaluation cycle, as before) and a min_interval cooldown; the
--    counters become optional for rules with a schedule.  Their crontab
--    expansion state (cron_fired_at, cron_cursor) and the baselines'
--    cooldown_until are new columns.
--  * tms.add_rule takes schedule and min_interval; tms.observe_table takes
--    the base counters its caller read, so two observers count a commit
--    once.
--  * The cron-job and commit-job task kinds have handlers: the crontab
--    expansion (tms._expand_cron) and commit events (tms._commit_event)
--    make their tasks.
--  * Commit events: tms.commit_sources, tms.attach_jdbc_catalog with its
--    trigger, tms.attach_commit_listener, tms.detach_commit_source,
--    tms.notify_commit and tms.notify_drop.

\echo Use "ALTER EXTENSION tms UPDATE TO '0.4.0'" to load this file. \quit

-- ---------------------------------------------------------------------
-- Rules and baselines
-- ---------------------------------------------------------------------

ALTER TABLE tms.maintenance_rules
    ADD COLUMN schedule jsonb,
    ADD COLUMN min_interval_ms bigint CHECK (min_interval_ms >= 0),
    ADD COLUMN cron_fired_at timestamptz,
    ADD COLUMN cron_cursor bigint,
    DROP CONSTRAINT maintenance_rules_check,
    ADD CONSTRAINT maintenance_rules_check
        CHECK (schedule IS NOT NULL
               OR num_nonnulls(commits_threshold, bytes_threshold, time_threshold_ms) > 0);

ALTER TABLE tms.rule_baselines ADD COLUMN cooldown_until timestamptz;

-- ---------------------------------------------------------------------
-- Observations, schedules and cooldowns
-- ---------------------------------------------------------------------

DROP FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text);

-- Record what a policy's refresh or a commit-job observed of a table:
-- upsert tms.tables with the commits seen since the last observation,
-- attach it to the groups it belongs to (creating baselines), and mark the
-- (table, rule) pairs whose commit or byte threshold it now reaches.
-- base_commits and base_bytes, when given, are the counters the caller
-- read before it counted new_commits and new_bytes: the counters become
-- base + new unless another observer already counted further, so two
-- observers of one commit (a refresh and a commit-job) count it once.
-- Returns the table id.
CREATE FUNCTION tms.observe_table(server name, namespace text, table_name text,
                                  table_uuid text, metadata_location text,
                                  snapshot_id bigint,
                                  new_commits bigint DEFAULT 0,
                                  new_bytes bigint DEFAULT 0,
                                  first_commit_at timestamptz DEFAULT NULL,
                                  last_commit_at timestamptz DEFAULT NULL,
                                  etag text DEFAULT NULL,
                                  base_commits bigint DEFAULT NULL,
                                  base_bytes bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    tid bigint;
    is_new boolean;
BEGIN
    -- commit times come from snapshots (1970 to 9999); nothing infinite
    IF NOT isfinite(coalesce(first_commit_at, now()))
       OR NOT isfinite(coalesce(last_commit_at, now())) THEN
        RAISE EXCEPTION 'commit times must be finite'
              USING ERRCODE = 'datetime_field_overflow',
                    DETAIL = format('first_commit_at is %s, last_commit_at is %s.',
                                    first_commit_at, last_commit_at);
    END IF;
    INSERT INTO tms.tables AS t (server, namespace, table_name, table_uuid,
                                 metadata_location, snapshot_id, commits,
                                 bytes_added, first_commit_at, last_commit_at, etag)
    VALUES (observe_table.server, observe_table.namespace, observe_table.table_name,
            observe_table.table_uuid, observe_table.metadata_location,
            observe_table.snapshot_id, greatest(new_commits, 0), greatest(new_bytes, 0),
            observe_table.first_commit_at, observe_table.last_commit_at, observe_table.etag)
    ON CONFLICT ON CONSTRAINT tables_server_namespace_table_name_key DO UPDATE
       SET table_uuid = EXCLUDED.table_uuid,
           metadata_location = EXCLUDED.metadata_location,
           snapshot_id = EXCLUDED.snapshot_id,
           commits = CASE WHEN base_commits IS NULL THEN t.commits + EXCLUDED.commits
                          ELSE greatest(t.commits, base_commits + EXCLUDED.commits) END,
           bytes_added = CASE WHEN base_bytes IS NULL THEN t.bytes_added + EXCLUDED.bytes_added
                              ELSE greatest(t.bytes_added, base_bytes + EXCLUDED.bytes_added) END,
           first_commit_at = coalesce(t.first_commit_at, EXCLUDED.first_commit_at),
           last_commit_at = greatest(t.last_commit_at, EXCLUDED.last_commit_at),
           etag = EXCLUDED.etag,
           changed_at = now(),
           dropped_at = NULL
    RETURNING t.id, (xmax = 0) INTO tid, is_new;

    -- a new table (or one back from the dead) joins its groups now
    PERFORM tms._attach(NULL, tid);
    IF new_commits > 0 OR new_bytes > 0 THEN
        UPDATE tms.rule_baselines b
           SET triggered = true
          FROM tms.tables t
         WHERE b.table_id = tid AND t.id = tid AND NOT b.triggered
           AND (t.commits >= b.due_commits OR t.bytes_added >= b.due_bytes);
    END IF;
    RETURN tid;
END
$$;

COMMENT ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) IS
    'record commits observed on a table (used by the policy evaluation; tests may simulate commits with it)';

REVOKE ALL ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) FROM PUBLIC;

-- Validate a rule's schedule document (NULL: the policy's evaluation
-- cycle) for its operation; returns the time zone of its crontab (NULL:
-- none).
CREATE FUNCTION tms._check_schedule(operation text, schedule jsonb)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    zone text;
BEGIN
    IF schedule IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(schedule) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The schedule must be a JSON object, not %s.', jsonb_typeof(schedule)),
                    HINT = 'Examples: {"crontab": "0 2 * * *", "time-zone": "Europe/Berlin"}, {"on-commit": true}.';
    END IF;
    FOR k IN SELECT jsonb_object_keys(schedule) LOOP
        IF k NOT IN ('crontab', 'time-zone', 'on-commit') THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Unknown key "%s".', k),
                        HINT = 'A schedule has the keys "crontab", "time-zone" and "on-commit".';
        END IF;
    END LOOP;
    IF schedule ? 'on-commit' AND jsonb_typeof(schedule -> 'on-commit') <> 'boolean' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('"on-commit" is %s; it must be true or false.', schedule -> 'on-commit');
    END IF;
    IF schedule ? 'crontab' AND jsonb_typeof(schedule -> 'crontab') <> 'string' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('"crontab" is %s; it must be a string of five cron fields.', schedule -> 'crontab');
    END IF;
    IF schedule ? 'time-zone' THEN
        IF NOT schedule ? 'crontab' THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = 'A "time-zone" is given without a "crontab".';
        END IF;
        IF jsonb_typeof(schedule -> 'time-zone') <> 'string' THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('"time-zone" is %s; it must be a string such as "Europe/Berlin".', schedule -> 'time-zone');
        END IF;
    END IF;
    IF NOT schedule ? 'crontab' AND schedule -> 'on-commit' IS DISTINCT FROM 'true' THEN
        RAISE EXCEPTION 'invalid rule schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The schedule has neither a "crontab" nor "on-commit": true.',
                    HINT = 'Leave the schedule out (NULL) to evaluate the rule at every evaluation cycle.';
    END IF;
    IF operation = 'orphan-cleanup' AND schedule -> 'on-commit' = 'true' THEN
        RAISE EXCEPTION 'orphan-cleanup cannot run on commit'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'orphan-cleanup scans storage; it runs on a crontab or the evaluation cycle only.',
                    HINT = 'Give it a "crontab" schedule instead.';
    END IF;
    IF schedule ? 'crontab' THEN
        zone := coalesce(schedule ->> 'time-zone', 'UTC');
        -- raises on a bad expression (caret in DETAIL) or an unknown zone
        IF tms.cron_next(schedule ->> 'crontab', now(), zone) IS NULL THEN
            RAISE EXCEPTION 'invalid rule schedule'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The crontab "%s" never fires.', schedule ->> 'crontab');
        END IF;
    END IF;
    RETURN zone;
END
$$;

-- The cooldown of an operation when its rule gives no min_interval: the
-- setting tms.<operation>_min_interval, in milliseconds
-- (src/ops/policy.c).
CREATE FUNCTION tms._default_min_interval(operation text)
RETURNS bigint
LANGUAGE c STABLE STRICT
AS 'MODULE_PATHNAME', 'tms_default_min_interval';

-- Reset a baseline to the table's current counters when the rule's job
-- on the table ended, and start the rule's cooldown there (its
-- min_interval, or the operation's setting).
CREATE OR REPLACE FUNCTION tms._reset_baseline(rid bigint, tid bigint)
RETURNS void
LANGUAGE sql
AS $$
    UPDATE tms.rule_baselines b
       SET base_commits = t.commits, base_bytes = t.bytes_added, since = now(),
           due_commits = t.commits + r.commits_threshold,
           due_bytes = t.bytes_added + r.bytes_threshold,
           due_at = now() + make_interval(secs => r.time_threshold_ms / 1000.0),
           triggered = false, pending_job = NULL,
           cooldown_until = now() + make_interval(secs =>
               coalesce(r.min_interval_ms, tms._default_min_interval(r.operation)) / 1000.0)
      FROM tms.tables t, tms.maintenance_rules r
     WHERE b.rule_id = rid AND b.table_id = tid AND t.id = tid AND r.id = rid;
$$;

-- ---------------------------------------------------------------------
-- tms.add_rule: schedule and min_interval
-- ---------------------------------------------------------------------

DROP FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb);
DROP FUNCTION tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb);

CREATE FUNCTION tms._add_rule(acting regrole, policy_name text, operation text, engine text, counters jsonb, condition text, baseline_mode text, options jsonb, schedule jsonb, min_interval interval)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, policy_name);
    k text;
    v jsonb;
    thr jsonb := '{}';
    needs text;
    rid bigint;
BEGIN
    PERFORM tms._check_operation(operation, engine, NULL);   -- names first
    PERFORM tms._check_schedule(operation, schedule);

    -- counters: each a positive integer; at least one unless a schedule
    -- says when to look
    IF counters IS NULL THEN
        counters := '{}';
    END IF;
    IF jsonb_typeof(counters) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule counters'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'Counters must be a JSON object such as {"commits-added": 100}.';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(counters) LOOP
        IF k NOT IN ('commits-added', 'bytes-added', 'time-elapsed') THEN
            RAISE EXCEPTION 'unknown activity counter "%"', k
                  USING ERRCODE = 'invalid_parameter_value',
                        HINT = 'Counters are commits-added, bytes-added and time-elapsed (milliseconds).';
        END IF;
        IF jsonb_typeof(v) <> 'number' OR (v::text)::numeric <> trunc((v::text)::numeric)
           OR (v::text)::numeric > 9223372036854775807 THEN
            RAISE EXCEPTION 'invalid threshold for counter "%"', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The threshold is %s; it must be a whole number.', v);
        END IF;
        IF (v::text)::numeric <= 0 THEN
            RAISE EXCEPTION 'threshold for counter "%" must be greater than zero', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The threshold is %s.', v);
        END IF;
    END LOOP;
    IF schedule IS NULL
       AND NOT (counters ? 'commits-added' OR counters ? 'bytes-added' OR counters ? 'time-elapsed') THEN
        RAISE EXCEPTION 'a rule needs at least one counter threshold or a schedule'
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Give commits-added, bytes-added or time-elapsed, e.g. {"commits-added": 100}, or a schedule such as {"crontab": "0 2 * * *"}.';
    END IF;
    IF min_interval IS NOT NULL AND (NOT isfinite(min_interval) OR min_interval < interval '0'
                                     OR min_interval > interval '100 years') THEN
        RAISE EXCEPTION 'invalid min_interval'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('min_interval is %s; it must be between zero and 100 years.', min_interval);
    END IF;
    -- orphan-cleanup scans storage: schedule only, never on commits
    IF operation = 'orphan-cleanup' AND (counters ? 'commits-added' OR counters ? 'bytes-added') THEN
        RAISE EXCEPTION 'orphan-cleanup cannot be triggered by commits'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The rule has a commits-added or bytes-added threshold; orphan-cleanup scans storage and runs on a schedule only.',
                    HINT = 'Use only the time-elapsed counter for orphan-cleanup.';
    END IF;

    IF baseline_mode IS NULL OR baseline_mode NOT IN ('catch-up', 'going-forward') THEN
        RAISE EXCEPTION 'invalid baseline mode "%"', baseline_mode
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Baseline modes are catch-up and going-forward.';
    END IF;
    PERFORM tms._check_options(coalesce(options, '{}'));
    PERFORM tms._check_operation(operation, engine, coalesce(options, '{}'));
    IF condition IS NULL THEN
        RAISE EXCEPTION 'a rule needs a condition' USING ERRCODE = 'null_value_not_allowed',
              HINT = 'Use ''true'' to act whenever the counters fire.';
    END IF;
    needs := tms._compile_condition(condition);

    INSERT INTO tms.maintenance_rules (policy_id, operation, engine, options,
                                       commits_threshold, bytes_threshold,
                                       time_threshold_ms, condition, needs,
                                       baseline_mode, schedule, min_interval_ms)
    VALUES (p.id, operation, engine, coalesce(options, '{}'),
            (counters ->> 'commits-added')::bigint, (counters ->> 'bytes-added')::bigint,
            (counters ->> 'time-elapsed')::bigint, condition, needs, baseline_mode,
            schedule,
            (extract(epoch FROM min_interval) * 1000)::bigint)
    RETURNING id INTO rid;
    PERFORM tms._attach(rid, NULL);
    -- the policy's task is due at its rules' next firing: look again now
    IF schedule ? 'crontab' THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
    RETURN rid;
END
$$;

CREATE FUNCTION tms.add_rule(policy_name text, operation text, engine text,
                             counters jsonb DEFAULT NULL,
                             condition text DEFAULT 'true',
                             baseline_mode text DEFAULT 'catch-up',
                             options jsonb DEFAULT '{}',
                             schedule jsonb DEFAULT NULL,
                             min_interval interval DEFAULT NULL)
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval) IS
    'add a rule to a policy: operation, engine, counter thresholds, DSL condition, baseline mode, options, schedule (crontab, on-commit; NULL: every evaluation cycle), cooldown';

REVOKE ALL ON FUNCTION tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb, jsonb, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval) TO PUBLIC;

-- ---------------------------------------------------------------------
-- Views: schedules and cooldowns
-- ---------------------------------------------------------------------

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

REVOKE ALL ON FUNCTION tms._check_schedule(text, jsonb) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Schedules and commit events (sql/install/67_schedules.sql)
-- ---------------------------------------------------------------------

-- Catalog servers whose commits reach tms as events: a table of pointers
-- in this database in Iceberg's JdbcCatalog layout, with tms's trigger
-- (jdbc), or an event listener calling tms.notify_commit (listener).  The
-- policy cycle does not poll them; it refreshes their groups once after
-- the source is attached and then every tms.commit_event_resync_interval.
CREATE TABLE tms.commit_sources (
    server          name PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('jdbc', 'listener')),
    pointers        regclass,               -- jdbc: the table of pointers
    catalog_name    text,                   -- jdbc: its catalog_name rows (NULL: all)
    attached_by     regrole NOT NULL,
    attached_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'jdbc') = (pointers IS NOT NULL)),
    CHECK (kind = 'jdbc' OR catalog_name IS NULL)
);

CREATE INDEX commit_sources_pointers_idx ON tms.commit_sources (pointers);

COMMENT ON TABLE tms.commit_sources IS
    'catalog servers whose commits arrive as events (JdbcCatalog trigger, event listener) and are not polled';

SELECT pg_catalog.pg_extension_config_dump('tms.commit_sources', '');

GRANT SELECT ON tms.commit_sources TO PUBLIC;

-- Wake the idle pool workers of this database when the transaction
-- commits (src/sql_api/sched_sql.c), so work it made due is claimed at
-- once rather than after a tms.naptime.
CREATE FUNCTION tms._wake_at_commit()
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_wake_at_commit';

-- A commit (or, dropped, the drop) of a table of a catalog server,
-- recorded in the committing transaction: a table new to tms joins its
-- groups, and a table some rule watches gets its commit-job, one per
-- table, coalescing every event until it runs.  A job picked while events
-- arrive runs again afterwards (its due time moves past the claim's).
-- Returns the table's id, NULL when no rule watches it.
CREATE FUNCTION tms._commit_event(srv name, ns text, tbl text, location text, dropped boolean)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tid bigint;
    at timestamptz := clock_timestamp();
BEGIN
    IF dropped THEN
        SELECT t.id INTO tid FROM tms.tables t
         WHERE t.server = srv AND t.namespace = ns AND t.table_name = tbl
           AND t.dropped_at IS NULL;
        IF FOUND THEN
            PERFORM tms._table_dropped(tid);
            DELETE FROM tms.scheduled_tasks
             WHERE task_name = 'commit-job' AND task_instance = tid::text AND NOT picked;
        END IF;
        RETURN NULL;
    END IF;
    INSERT INTO tms.tables AS t (server, namespace, table_name)
    VALUES (srv, ns, tbl)
    ON CONFLICT ON CONSTRAINT tables_server_namespace_table_name_key DO UPDATE
       SET dropped_at = NULL, changed_at = now()
     WHERE t.dropped_at IS NOT NULL
    RETURNING t.id INTO tid;
    IF FOUND THEN
        PERFORM tms._attach(NULL, tid);     -- new, or back: it joins its groups
    ELSE
        SELECT t.id INTO tid FROM tms.tables t
         WHERE t.server = srv AND t.namespace = ns AND t.table_name = tbl;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tms.rule_baselines b WHERE b.table_id = tid) THEN
        RETURN NULL;
    END IF;
    INSERT INTO tms.scheduled_tasks AS s (task_name, task_instance, task_data, execution_time)
    VALUES ('commit-job', tid::text,
            jsonb_build_object('table_id', tid, 'events', 1, 'first_event_at', at,
                               'metadata_location', location),
            at + coalesce(current_setting('tms.commit_job_delay', true), '0')::interval)
    ON CONFLICT (task_name, task_instance) DO UPDATE
       SET task_data = s.task_data
                       || jsonb_build_object('events', coalesce((s.task_data ->> 'events')::bigint, 0) + 1,
                                             'metadata_location', location),
           execution_time = CASE WHEN s.picked THEN EXCLUDED.execution_time
                                 ELSE least(s.execution_time, EXCLUDED.execution_time) END,
           version = CASE WHEN s.picked THEN s.version ELSE s.version + 1 END;
    PERFORM tms._wake_at_commit();
    RETURN tid;
END
$$;

-- The trigger's call for one row event of a table of pointers (relid):
-- the commit sources attached to it whose catalog name matches.
CREATE FUNCTION tms._jdbc_event(relid oid, catalog text, ns text, tbl text,
                                location text, dropped boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    srv name;
BEGIN
    FOR srv IN SELECT c.server FROM tms.commit_sources c
                WHERE c.pointers = relid::regclass
                  AND (c.catalog_name IS NULL OR c.catalog_name = catalog) LOOP
        PERFORM tms._commit_event(srv, ns, tbl, location, dropped);
    END LOOP;
END
$$;

-- The trigger tms.attach_jdbc_catalog puts on a table of pointers
-- (src/sql_api/events_sql.c): every inserted, changed, renamed or deleted
-- pointer becomes a commit event in the same transaction.
CREATE FUNCTION tms._jdbc_commit_trigger()
RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'tms_jdbc_commit_trigger';

CREATE FUNCTION tms._attach_jdbc_catalog(acting regrole, pointers regclass, server name,
                                         catalog_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind "char";
    col text;
    missing text;
BEGIN
    IF pointers IS NULL OR server IS NULL THEN
        RAISE EXCEPTION 'the table of pointers and the server must not be null'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = pointers;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', pointers
              USING ERRCODE = 'wrong_object_type',
                    DETAIL = 'Commit events come from a trigger on a table of pointers.';
    END IF;
    IF NOT has_table_privilege(acting, pointers, 'TRIGGER') THEN
        RAISE EXCEPTION 'permission denied for table %', pointers
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('Role %s may not create triggers on the table.', acting),
                    HINT = format('The owner may run GRANT TRIGGER ON %s TO %I;', pointers, acting::text);
    END IF;
    FOREACH col IN ARRAY ARRAY['catalog_name', 'table_namespace', 'table_name', 'metadata_location'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_attribute a
                        WHERE a.attrelid = pointers AND a.attname = col AND NOT a.attisdropped
                          AND a.attnum > 0
                          AND a.atttypid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype)) THEN
            missing := concat_ws(', ', missing, col);
        END IF;
    END LOOP;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'table % does not have the layout of an Iceberg JdbcCatalog', pointers
              USING ERRCODE = 'invalid_table_definition',
                    DETAIL = format('Missing text columns: %s.', missing),
                    HINT = 'The table needs catalog_name, table_namespace, table_name and metadata_location (and may have previous_metadata_location and iceberg_type), as JdbcCatalog creates iceberg_tables.';
    END IF;
    IF EXISTS (SELECT 1 FROM tms.commit_sources c WHERE c.server = _attach_jdbc_catalog.server) THEN
        RAISE EXCEPTION 'commit events of server "%" are already attached', server
              USING ERRCODE = 'duplicate_object',
                    HINT = 'Detach them first with tms.detach_commit_source().';
    END IF;
    INSERT INTO tms.commit_sources (server, kind, pointers, catalog_name, attached_by)
    VALUES (server, 'jdbc', pointers, catalog_name, acting);
    IF NOT EXISTS (SELECT 1 FROM pg_trigger t
                    WHERE t.tgrelid = pointers AND t.tgname = 'tms_commit_events') THEN
        EXECUTE format('CREATE TRIGGER tms_commit_events AFTER INSERT OR UPDATE OR DELETE ON %s'
                       ' FOR EACH ROW EXECUTE FUNCTION tms._jdbc_commit_trigger()', pointers);
    END IF;
    -- the groups of the server are refreshed once more: commits before now
    PERFORM tms.schedule_task('policy-expand', p.id::text)
       FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id
      WHERE g.server = _attach_jdbc_catalog.server;
END
$$;

CREATE FUNCTION tms._attach_commit_listener(acting regrole, server name)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL THEN
        RAISE EXCEPTION 'server must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    IF EXISTS (SELECT 1 FROM tms.commit_sources c WHERE c.server = _attach_commit_listener.server) THEN
        RAISE EXCEPTION 'commit events of server "%" are already attached', server
              USING ERRCODE = 'duplicate_object',
                    HINT = 'Detach them first with tms.detach_commit_source().';
    END IF;
    INSERT INTO tms.commit_sources (server, kind, attached_by)
    VALUES (server, 'listener', acting);
END
$$;

CREATE FUNCTION tms._detach_commit_source(acting regrole, server name)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c tms.commit_sources;
BEGIN
    SELECT * INTO c FROM tms.commit_sources s WHERE s.server = _detach_commit_source.server;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT pg_has_role(acting, c.attached_by, 'USAGE') THEN
        RAISE EXCEPTION 'must be the role that attached the commit events of server "%"', server
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('They were attached by role %s.', c.attached_by);
    END IF;
    DELETE FROM tms.commit_sources s WHERE s.server = c.server;
    IF c.kind = 'jdbc'
       AND NOT EXISTS (SELECT 1 FROM tms.commit_sources s WHERE s.pointers = c.pointers) THEN
        EXECUTE format('DROP TRIGGER IF EXISTS tms_commit_events ON %s', c.pointers);
    END IF;
    -- polled again from the next cycle on
    PERFORM tms.schedule_task('policy-expand', p.id::text)
       FROM tms.maintenance_policies p JOIN tms.object_groups g ON g.id = p.group_id
      WHERE g.server = c.server;
    RETURN true;
END
$$;

CREATE FUNCTION tms._notify_commit(acting regrole, server name, namespace text,
                                   table_name text, metadata_location text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL OR namespace IS NULL OR table_name IS NULL
       OR namespace = '' OR table_name = '' THEN
        RAISE EXCEPTION 'a commit needs a server, a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    RETURN tms._commit_event(server, namespace, table_name, metadata_location, false) IS NOT NULL;
END
$$;

CREATE FUNCTION tms._notify_drop(acting regrole, server name, namespace text, table_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF server IS NULL OR namespace IS NULL OR table_name IS NULL THEN
        RAISE EXCEPTION 'a drop needs a server, a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, acting);
    PERFORM tms._commit_event(server, namespace, table_name, NULL, true);
END
$$;

CREATE FUNCTION tms.attach_jdbc_catalog(pointers regclass, server name,
                                        catalog_name text DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_jdbc_catalog(regclass, name, text) IS
    'turn every pointer change of a JdbcCatalog table of pointers in this database into a commit event of a catalog server, in the committing transaction; the server is no longer polled';

CREATE FUNCTION tms.attach_commit_listener(server name)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_commit_listener(name) IS
    'declare that an event listener reports every commit of a catalog server through tms.notify_commit; the server is no longer polled';

CREATE FUNCTION tms.detach_commit_source(server name)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.detach_commit_source(name) IS
    'stop taking the commits of a catalog server as events (drops the trigger); the server is polled again';

CREATE FUNCTION tms.notify_commit(server name, namespace text, table_name text,
                                  metadata_location text DEFAULT NULL)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.notify_commit(name, text, text, text) IS
    'report a commit to a table (namespace levels joined with "."); its commit-job runs the table''s on-commit rules; false: no rule watches the table';

CREATE FUNCTION tms.notify_drop(server name, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.notify_drop(name, text, text) IS
    'report that a table was dropped from its catalog: it leaves every group';

-- The crontab expansion of policy p_policy, one pick of its policy-expand
-- task: for each crontab rule whose latest firing is due and not yet
-- expanded (a firing missed while nothing ran fires once, late; one
-- before the rule existed never), enqueue the cron-jobs of its tables in
-- table id order, at most p_batch in all, remembering how far it got
-- (cron_cursor); a firing of an inactive policy (p_skip) is passed over.
-- A cron-job is per (policy, table) and carries the rules that fired.
-- Returns how many it enqueued, whether some remain (the task is due again
-- at once), and the next firing of any of the rules.
CREATE FUNCTION tms._expand_cron(p_policy integer, p_batch integer, p_skip boolean,
                                 OUT enqueued integer, OUT more boolean,
                                 OUT next_at timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r tms.maintenance_rules;
    zone text;
    fire timestamptz;
    want integer;
    n integer;
    last bigint;
BEGIN
    enqueued := 0;
    more := false;
    FOR r IN SELECT * FROM tms.maintenance_rules m
              WHERE m.policy_id = p_policy AND m.schedule ? 'crontab'
              ORDER BY m.id FOR UPDATE LOOP
        zone := coalesce(r.schedule ->> 'time-zone', 'UTC');
        IF r.cron_cursor IS NULL THEN
            fire := tms.cron_prev(r.schedule ->> 'crontab', now(), zone);
            IF fire IS NOT NULL AND fire >= r.created_at
               AND fire > coalesce(r.cron_fired_at, '-infinity') THEN
                r.cron_fired_at := fire;
                r.cron_cursor := CASE WHEN p_skip THEN NULL ELSE 0 END;
            END IF;
        END IF;
        IF r.cron_cursor IS NOT NULL THEN
            want := p_batch - enqueued;
            IF want <= 0 THEN
                more := true;
            ELSE
                WITH due AS (
                    SELECT b.table_id FROM tms.rule_baselines b
                      JOIN tms.tables t ON t.id = b.table_id
                     WHERE b.rule_id = r.id AND b.table_id > r.cron_cursor
                       AND t.dropped_at IS NULL
                     ORDER BY b.table_id
                     LIMIT want),
                ins AS (
                    INSERT INTO tms.scheduled_tasks AS s
                           (task_name, task_instance, task_data, execution_time)
                    SELECT 'cron-job', p_policy || ':' || due.table_id,
                           jsonb_build_object('policy_id', p_policy, 'table_id', due.table_id,
                                              'rules', jsonb_build_array(r.id),
                                              'fired_at', r.cron_fired_at),
                           now()
                      FROM due
                    ON CONFLICT (task_name, task_instance) DO UPDATE
                       SET task_data = s.task_data || jsonb_build_object('rules',
                               (SELECT jsonb_agg(DISTINCT x)
                                  FROM jsonb_array_elements(coalesce(s.task_data -> 'rules', '[]')
                                                            || (EXCLUDED.task_data -> 'rules')) x)),
                           execution_time = CASE WHEN s.picked THEN clock_timestamp()
                                                 ELSE least(s.execution_time, EXCLUDED.execution_time) END,
                           version = CASE WHEN s.picked THEN s.version ELSE s.version + 1 END
                    RETURNING 1)
                SELECT count(*)::integer, max(due.table_id) INTO n, last FROM due;
                enqueued := enqueued + n;
                IF n < want THEN
                    r.cron_cursor := NULL;          -- the firing is expanded
                ELSE
                    r.cron_cursor := last;
                    more := true;
                END IF;
            END IF;
        END IF;
        UPDATE tms.maintenance_rules m
           SET cron_fired_at = r.cron_fired_at, cron_cursor = r.cron_cursor
         WHERE m.id = r.id;
        next_at := least(next_at, tms.cron_next(r.schedule ->> 'crontab',
                                                greatest(now(), r.cron_fired_at), zone));
    END LOOP;
    IF enqueued > 0 THEN
        PERFORM tms._wake_at_commit();
    END IF;
END
$$;

REVOKE ALL ON FUNCTION
    tms._wake_at_commit(),
    tms._jdbc_commit_trigger(),
    tms._commit_event(name, text, text, text, boolean),
    tms._jdbc_event(oid, text, text, text, text, boolean),
    tms._attach_jdbc_catalog(regrole, regclass, name, text),
    tms._attach_commit_listener(regrole, name),
    tms._detach_commit_source(regrole, name),
    tms._notify_commit(regrole, name, text, text, text),
    tms._notify_drop(regrole, name, text, text),
    tms._expand_cron(integer, integer, boolean)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    tms.attach_jdbc_catalog(regclass, name, text),
    tms.attach_commit_listener(name),
    tms.detach_commit_source(name),
    tms.notify_commit(name, text, text, text),
    tms.notify_drop(name, text, text)
  TO PUBLIC;
