-- Maintenance policies, part 2: internals.  Helpers in C, group
-- membership and windows, baselines and observations, the checks the API
-- makes (one check of a rule, tms._check_rule), and the precedence
-- between groups (tms._rule_precedence).  None of these is for PUBLIC.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

-- Next / previous firing of a 5-field cron expression in a time zone.
CREATE OR REPLACE FUNCTION tms.cron_next(expr text, after timestamptz DEFAULT now(),
                              zone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_cron_next';

COMMENT ON FUNCTION tms.cron_next(text, timestamptz, text) IS
    'the first firing of a 5-field cron expression strictly after "after", in time zone "zone" (null: none within 30 years)';

CREATE OR REPLACE FUNCTION tms.cron_prev(expr text, before timestamptz DEFAULT now(),
                              zone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_cron_prev';

COMMENT ON FUNCTION tms.cron_prev(text, timestamptz, text) IS
    'the last firing of a 5-field cron expression at or before "before", in time zone "zone"';

GRANT EXECUTE ON FUNCTION tms.cron_next(text, timestamptz, text),
                          tms.cron_prev(text, timestamptz, text) TO PUBLIC;

-- Does s match the glob pattern ("*" any run of characters, "?" one
-- character)?  The one implementation is C's (src/bridge/names.c), which
-- the policy evaluation uses too.
CREATE OR REPLACE FUNCTION tms._glob_match(pattern text, s text)
RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_glob_match_sql';

-- The path of the first credential in a JSON document, or NULL
-- (src/bridge/jsonb_secrets.c).
CREATE OR REPLACE FUNCTION tms._find_credential(doc jsonb)
RETURNS text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_find_credential_sql';

-- The cooldown of an operation when its rule gives no min_interval: the
-- setting tms.<operation>_min_interval, in milliseconds
-- (src/ops/policy.c).
CREATE OR REPLACE FUNCTION tms._default_min_interval(operation text)
RETURNS bigint
LANGUAGE c STABLE STRICT
AS 'MODULE_PATHNAME', 'tms_default_min_interval';

-- Compile a condition; returns the metric level it needs, or raises the
-- compile error (SQLSTATE, caret excerpt in DETAIL).
CREATE OR REPLACE FUNCTION tms._compile_condition(condition text)
RETURNS text
LANGUAGE c IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'tms_policy_compile_condition';

-- Compile a rule's score (a numeric expression); returns the metric level
-- it needs, or raises the compile error as "invalid rule score" (a
-- BOOLEAN or STRING score is 42804).
CREATE OR REPLACE FUNCTION tms._compile_score(score text)
RETURNS text
LANGUAGE c IMMUTABLE STRICT
AS 'MODULE_PATHNAME', 'tms_policy_compile_score';

-- Is table t in group g?
CREATE OR REPLACE FUNCTION tms._in_group(g tms.object_groups, t tms.tables)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT g.server = t.server AND t.dropped_at IS NULL AND (
           (g.namespace_pattern IS NOT NULL
            AND tms._glob_match(g.namespace_pattern, t.namespace)
            AND tms._glob_match(g.table_pattern, t.table_name))
        OR EXISTS (SELECT 1 FROM tms.object_group_members m
                    WHERE m.group_id = g.id AND m.namespace = t.namespace
                      AND m.table_name = t.table_name))
$$;

-- Is a time window open at "at"?  NULL window: always.
CREATE OR REPLACE FUNCTION tms.window_open(time_window jsonb, at timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT time_window IS NULL OR EXISTS (
        SELECT 1
          FROM jsonb_array_elements(time_window -> 'periods') p,
               LATERAL tms.cron_prev(p ->> 'cron', at, time_window ->> 'time-zone-id') f
         WHERE f IS NOT NULL
           AND at < f + make_interval(secs => (p ->> 'duration')::float8 / 1000.0))
$$;

COMMENT ON FUNCTION tms.window_open(jsonb, timestamptz) IS
    'true when "at" lies in a period of the window: previous firing <= at < previous firing + duration';

GRANT EXECUTE ON FUNCTION tms.window_open(jsonb, timestamptz) TO PUBLIC;

-- Baseline values for new (rule, table) pairs: of one rule (table_filter
-- NULL) or of one table (rule_filter NULL).  A rule being added and a
-- table being discovered at the same time must not miss each other (each
-- transaction would see the other's row only after it committed, and the
-- pair would never get a baseline): the rule side takes an exclusive lock,
-- the table side a shared one, and the INSERT below, a new statement with
-- a new snapshot, then sees whatever the other side committed first.  catch-up: zero counters, time
-- counted from the table's first known commit; going-forward: the table's
-- current counters, time from now.  Planned for the filters it is given
-- (custom plans), so each call uses the index its filter needs: a table
-- joining is the common case, one row of tms.tables.
CREATE OR REPLACE FUNCTION tms._attach(rule_filter bigint, table_filter bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    n bigint;
BEGIN
    IF table_filter IS NULL THEN
        PERFORM pg_advisory_xact_lock(7367, 2);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(7367, 2);
    END IF;
    INSERT INTO tms.rule_baselines AS b
           (rule_id, table_id, base_commits, base_bytes, since,
            due_commits, due_bytes, due_at, triggered)
    SELECT r.id, t.id, x.c, x.b, x.s,
           x.c + r.commits_threshold, x.b + r.bytes_threshold,
           x.s + make_interval(secs => r.time_threshold_ms / 1000.0),
           (t.commits >= x.c + r.commits_threshold) IS TRUE
             OR (t.bytes_added >= x.b + r.bytes_threshold) IS TRUE
      FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.object_groups g ON g.id = p.group_id
      JOIN tms.tables t ON t.server = g.server AND tms._in_group(g, t)
      CROSS JOIN LATERAL (
          SELECT CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.commits END AS c,
                 CASE WHEN r.baseline_mode = 'catch-up' THEN 0 ELSE t.bytes_added END AS b,
                 CASE WHEN r.baseline_mode = 'catch-up'
                      THEN least(coalesce(t.first_commit_at, now()), now())
                      ELSE now() END AS s) x
     WHERE (rule_filter IS NULL OR r.id = rule_filter)
       AND (table_filter IS NULL OR t.id = table_filter)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Record what a policy's refresh or a commit-job observed of a table:
-- upsert tms.tables with the commits seen since the last observation,
-- attach it to the groups it belongs to (creating baselines), and mark the
-- (table, rule) pairs whose commit or byte threshold it now reaches; a
-- commit ends the back-off of every rule on the table (63_cadence.sql).
-- base_commits and base_bytes, when given, are the counters the caller
-- read before it counted new_commits and new_bytes: the counters become
-- base + new unless another observer already counted further, so two
-- observers of one commit (a refresh and a commit-job) count it once.
-- Returns the table id.
CREATE OR REPLACE FUNCTION tms.observe_table(server name, namespace text, table_name text,
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
        PERFORM tms._end_backoff(tid);  -- a commit ends every back-off on the table
    END IF;
    RETURN tid;
END
$$;

COMMENT ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) IS
    'record commits observed on a table (used by the policy evaluation; tests may simulate commits with it)';

REVOKE ALL ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text, bigint, bigint) FROM PUBLIC;

-- Mark a table dropped: it leaves every group.
CREATE OR REPLACE FUNCTION tms._table_dropped(tid bigint)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE tms.tables SET dropped_at = now() WHERE id = tid AND dropped_at IS NULL;
    DELETE FROM tms.rule_baselines WHERE table_id = tid AND pending_job IS NULL;
$$;

-- Reset a baseline to the table's current counters when the rule's job
-- on the table ended, and start the rule's cooldown there (its
-- min_interval, or the operation's setting).
CREATE OR REPLACE FUNCTION tms._reset_baseline(rid bigint, tid bigint)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
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

-- The policy's row: raise unless it exists and the acting role owns it
-- (has the privileges of its owner role).
CREATE OR REPLACE FUNCTION tms._own_policy(acting regrole, policy_name text)
RETURNS tms.maintenance_policies
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies;
BEGIN
    SELECT * INTO p FROM tms.maintenance_policies WHERE name = policy_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'policy "%" does not exist', policy_name
              USING ERRCODE = 'undefined_object',
                    HINT = 'See SELECT name FROM tms.policies.';
    END IF;
    IF NOT pg_has_role(acting, p.owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of policy "%"', policy_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The policy is owned by role %s.', p.owner);
    END IF;
    RETURN p;
END
$$;

-- The server must be a tms_iceberg server the role may use.
CREATE OR REPLACE FUNCTION tms._check_server(srv name, who regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wrapper name;
BEGIN
    SELECT w.fdwname INTO wrapper
      FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
     WHERE s.srvname = srv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'server "%" does not exist', srv
              USING ERRCODE = 'undefined_object',
                    HINT = 'Create it with CREATE SERVER ... FOREIGN DATA WRAPPER tms_iceberg.';
    END IF;
    IF wrapper <> 'tms_iceberg' THEN
        RAISE EXCEPTION 'server "%" is not a tms_iceberg server', srv
              USING ERRCODE = 'wrong_object_type',
                    DETAIL = format('It uses the foreign-data wrapper "%s".', wrapper);
    END IF;
    IF NOT has_server_privilege(who, srv, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied for foreign server %', srv
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('Role %s has no USAGE privilege on the server; a policy acts with its owner''s user mapping.', who),
                    HINT = format('GRANT USAGE ON FOREIGN SERVER %I TO %I;', srv, who::text);
    END IF;
END
$$;

-- Validate a time window document.
CREATE OR REPLACE FUNCTION tms._check_window(w jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    p jsonb;
    zone text;
    i integer := 0;
BEGIN
    IF w IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(w) <> 'object' THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The window must be a JSON object, not %s.', jsonb_typeof(w)),
                    HINT = 'Example: {"time-zone-id": "Europe/Moscow", "periods": [{"cron": "0 2 * * 1-5", "duration": 14400000}]}';
    END IF;
    FOR k IN SELECT jsonb_object_keys(w) LOOP
        IF k NOT IN ('time-zone-id', 'periods') THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Unknown key "%s".', k),
                        HINT = 'A window has the keys "time-zone-id" and "periods".';
        END IF;
    END LOOP;
    IF jsonb_typeof(w -> 'time-zone-id') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The window has no "time-zone-id" string.';
    END IF;
    zone := w ->> 'time-zone-id';
    PERFORM tms.cron_next('* * * * *', now(), zone);   -- raises on an unknown zone
    IF jsonb_typeof(w -> 'periods') IS DISTINCT FROM 'array'
       OR jsonb_array_length(w -> 'periods') = 0 THEN
        RAISE EXCEPTION 'invalid time window'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'The window needs a non-empty "periods" array.';
    END IF;
    FOR p IN SELECT jsonb_array_elements(w -> 'periods') LOOP
        i := i + 1;
        IF jsonb_typeof(p) <> 'object' OR jsonb_typeof(p -> 'cron') IS DISTINCT FROM 'string'
           OR jsonb_typeof(p -> 'duration') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Period %s must be an object with a "cron" string and a "duration" number of milliseconds.', i);
        END IF;
        FOR k IN SELECT jsonb_object_keys(p) LOOP
            IF k NOT IN ('cron', 'duration') THEN
                RAISE EXCEPTION 'invalid time window'
                      USING ERRCODE = 'invalid_parameter_value',
                            DETAIL = format('Period %s has the unknown key "%s".', i, k);
            END IF;
        END LOOP;
        IF (p ->> 'duration')::numeric <= 0 OR (p ->> 'duration')::numeric <> trunc((p ->> 'duration')::numeric)
           OR (p ->> 'duration')::numeric > 31622400000 THEN
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('Period %s has duration %s; it must be a whole number of milliseconds between 1 and 31622400000 (366 days).', i, p ->> 'duration');
        END IF;
        IF tms.cron_next(p ->> 'cron', now(), zone) IS NULL THEN   -- raises when invalid
            RAISE EXCEPTION 'invalid time window'
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('The cron expression "%s" of period %s never fires.', p ->> 'cron', i);
        END IF;
    END LOOP;
END
$$;

-- Validate a rule's schedule document (NULL: the policy's evaluation
-- cycle) for its operation; returns the time zone of its crontab (NULL:
-- none).
CREATE OR REPLACE FUNCTION tms._check_schedule(operation text, schedule jsonb)
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

-- Reject credentials anywhere in an options document: a credential-shaped
-- key, or a string value holding one ("...secret.key=..."), at any depth.
-- The one list of credential-shaped names is C's (src/io/util/secret_names.c).
CREATE OR REPLACE FUNCTION tms._check_options(options jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found text;
BEGIN
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'invalid rule options'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('Options must be a JSON object, not %s.', jsonb_typeof(options));
    END IF;
    found := tms._find_credential(options);
    IF found IS NOT NULL THEN
        RAISE EXCEPTION 'rule options must not contain credentials'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = format('The %s looks like a credential.', found),
                    HINT = 'Credentials belong in the user mapping of the policy owner for the catalog server (CREATE USER MAPPING ... OPTIONS (...)), never in policy content.';
    END IF;
END
$$;

-- The group's row: raise unless it exists and the acting role owns it.
CREATE OR REPLACE FUNCTION tms._own_group(acting regrole, group_name text)
RETURNS tms.object_groups
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups;
BEGIN
    SELECT * INTO g FROM tms.object_groups WHERE name = group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object group "%" does not exist', group_name
              USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_has_role(acting, g.owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of object group "%"', group_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The group is owned by role %s.', g.owner);
    END IF;
    RETURN g;
END
$$;

-- May the acting role build a policy on the group?  Its owner may, and the
-- roles the owner granted it to (tms.grant_object_group).
CREATE OR REPLACE FUNCTION tms._may_use_group(acting regrole, g tms.object_groups)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(acting, g.owner, 'USAGE')
        OR EXISTS (SELECT 1 FROM unnest(g.grantees) r WHERE pg_has_role(acting, r, 'USAGE'))
$$;

-- Validate a rule's definition; returns the metric level its condition
-- needs (tms._compile_condition).  score NULL: none; else it must compile
-- as a numeric expression (tms._compile_score).  The one check of a rule: tms.add_rule
-- runs it on the new rule, tms.alter_rule on the rule as it would be after
-- the change, so both reject the same values with the same errors.
-- counters NULL: none.
CREATE OR REPLACE FUNCTION tms._check_rule(operation text, engine text, counters jsonb,
                                condition text, baseline_mode text, options jsonb,
                                schedule jsonb, min_interval interval, time_window jsonb,
                                score text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
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
                    DETAIL = format('Counters are %s; they must be a JSON object such as {"commits-added": 100}.', counters);
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
    PERFORM tms._check_window(time_window);
    IF condition IS NULL THEN
        RAISE EXCEPTION 'a rule needs a condition' USING ERRCODE = 'null_value_not_allowed',
              HINT = 'Use ''true'' to act whenever the counters fire.';
    END IF;
    k := tms._compile_condition(condition);
    IF score IS NOT NULL THEN
        PERFORM tms._compile_score(score);
    END IF;
    RETURN k;
END
$$;

-- A rule's definition as one document (tms.rule_versions); "score" only
-- when the rule has one.
CREATE OR REPLACE FUNCTION tms._rule_definition(r tms.maintenance_rules)
RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object('operation', r.operation, 'engine', r.engine,
                              'counters', jsonb_strip_nulls(jsonb_build_object(
                                  'commits-added', r.commits_threshold,
                                  'bytes-added', r.bytes_threshold,
                                  'time-elapsed', r.time_threshold_ms)),
                              'condition', r.condition, 'baseline_mode', r.baseline_mode,
                              'options', r.options, 'schedule', r.schedule,
                              'time_window', r.time_window,
                              'min_interval_ms', r.min_interval_ms, 'active', r.active)
           || CASE WHEN r.score IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('score', r.score) END
$$;

-- The precedence of the rules attached to each table (those with a
-- baseline there), per operation.  How closely a rule's group names the
-- table (specificity): 3, the table itself (an explicit member, or
-- patterns without "*" or "?"); 1, the whole server (both patterns "*");
-- 2, anything between (a namespace or table pattern).  The nearest
-- attachment wins, as in Gravitino's table maintenance design
-- (https://github.com/apache/gravitino/pull/13386): a table's own policy
-- over its schema's over its catalog's.  The groups are ranked by
-- specificity, then priority (higher first), then age (the older group
-- first); every rule of the first group (group_rank 1) runs, the others
-- are overridden.  Whether a policy or rule is active or its window open
-- does not matter: a table's own policy, while inactive, still keeps a
-- wider group's rule of that operation away.
-- The one implementation: the evaluation's candidates and the start of a
-- job (tms._rule_wins), tms.candidates and tms.effective_rules all read
-- it.  A view, so that the views built on it read tms's tables with their
-- owner's rights; a condition on table_id is pushed into it (it is a
-- column of the window's partition), so one table costs an index scan.
CREATE OR REPLACE VIEW tms._rule_precedence AS
    SELECT b.table_id, r.operation, r.id AS rule_id, g.id AS group_id,
           s.level AS specificity, g.priority,
           dense_rank() OVER (PARTITION BY b.table_id, r.operation
                              ORDER BY s.level DESC, g.priority DESC, g.id) AS group_rank
      FROM tms.rule_baselines b
      JOIN tms.tables t ON t.id = b.table_id
      JOIN tms.maintenance_rules r ON r.id = b.rule_id
      JOIN tms.maintenance_policies p ON p.id = r.policy_id
      JOIN tms.object_groups g ON g.id = p.group_id
      CROSS JOIN LATERAL (
          SELECT CASE
                 WHEN EXISTS (SELECT 1 FROM tms.object_group_members m
                               WHERE m.group_id = g.id AND m.namespace = t.namespace
                                 AND m.table_name = t.table_name)
                      OR (g.namespace_pattern !~ '[*?]' AND g.table_pattern !~ '[*?]') THEN 3
                 WHEN g.namespace_pattern = '*' AND g.table_pattern = '*' THEN 1
                 ELSE 2 END AS level) s
     WHERE t.dropped_at IS NULL;

-- Does rule rid run on table tid, or does a nearer group's rule of the
-- same operation override it?  A pair with no baseline: it runs.
CREATE OR REPLACE FUNCTION tms._rule_wins(rid bigint, tid bigint)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT NOT EXISTS (SELECT 1 FROM tms._rule_precedence x
                        WHERE x.table_id = tid AND x.rule_id = rid AND x.group_rank > 1)
$$;
