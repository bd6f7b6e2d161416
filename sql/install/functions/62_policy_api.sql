-- Maintenance policies, part 3: the SQL API.  Each public function is a
-- C entry point (tms_api_call) that takes the acting role, switches to the
-- extension owner and calls the internal function of the same name with a
-- leading underscore, which checks that role's privileges and does the
-- work; no function here is SECURITY DEFINER.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms._create_object_group(acting regrole, name text, server name, namespace_pattern text, table_pattern text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gid integer;
    who regrole := acting;
BEGIN
    IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
        RAISE EXCEPTION 'invalid object group name "%"', name
              USING ERRCODE = 'invalid_name',
                    HINT = 'Use up to 63 letters, digits, "_", "." and "-", starting with a letter or digit.';
    END IF;
    IF server IS NULL THEN
        RAISE EXCEPTION 'an object group needs a server' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM tms._check_server(server, who);
    IF table_pattern IS NULL OR table_pattern = '' OR namespace_pattern = '' THEN
        RAISE EXCEPTION 'invalid object group pattern'
              USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = 'Patterns must not be empty.',
                    HINT = 'Use "*" to match every namespace or table.';
    END IF;
    IF EXISTS (SELECT 1 FROM tms.object_groups g WHERE g.name = _create_object_group.name) THEN
        RAISE EXCEPTION 'object group "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.object_groups (name, server, namespace_pattern, table_pattern, owner)
    VALUES (_create_object_group.name, _create_object_group.server,
            _create_object_group.namespace_pattern, _create_object_group.table_pattern, who)
    RETURNING id INTO gid;
    RETURN gid;
END
$$;

CREATE OR REPLACE FUNCTION tms._add_group_member(acting regrole, group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
    tid bigint;
BEGIN
    IF namespace IS NULL OR table_name IS NULL OR namespace = '' OR table_name = '' THEN
        RAISE EXCEPTION 'a group member needs a namespace and a table name'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    INSERT INTO tms.object_group_members VALUES (g.id, namespace, table_name)
    ON CONFLICT DO NOTHING;
    SELECT id INTO tid FROM tms.tables t
     WHERE t.server = g.server AND t.namespace = _add_group_member.namespace
       AND t.table_name = _add_group_member.table_name;
    IF FOUND THEN
        PERFORM tms._attach(NULL, tid);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION tms._remove_group_member(acting regrole, group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
BEGIN
    DELETE FROM tms.object_group_members m
     WHERE m.group_id = g.id AND m.namespace = _remove_group_member.namespace
       AND m.table_name = _remove_group_member.table_name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- pairs of tables no longer in the group go, unless an operation is in flight
    DELETE FROM tms.rule_baselines b
     USING tms.maintenance_rules r, tms.maintenance_policies p, tms.tables t
     WHERE b.rule_id = r.id AND r.policy_id = p.id AND p.group_id = g.id
       AND t.id = b.table_id AND b.pending_job IS NULL AND NOT tms._in_group(g, t);
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION tms._drop_object_group(acting regrole, name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, name);
    users text;
BEGIN
    SELECT string_agg(p.name, ', ' ORDER BY p.name) INTO users
      FROM tms.maintenance_policies p WHERE p.group_id = g.id;
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot drop object group "%" because policies use it', name
              USING ERRCODE = 'dependent_objects_still_exist',
                    DETAIL = format('Used by: %s.', users),
                    HINT = 'Drop those policies first.';
    END IF;
    DELETE FROM tms.object_groups WHERE id = g.id;
END
$$;

CREATE OR REPLACE FUNCTION tms._create_policy(acting regrole, name text, group_name text, description text, time_window jsonb, active boolean)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who regrole := acting;
    g tms.object_groups;
    pid integer;
BEGIN
    IF name IS NULL OR name !~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$' OR length(name) > 63 THEN
        RAISE EXCEPTION 'invalid policy name "%"', name
              USING ERRCODE = 'invalid_name',
                    HINT = 'Use up to 63 letters, digits, "_", "." and "-", starting with a letter or digit.';
    END IF;
    SELECT * INTO g FROM tms.object_groups WHERE object_groups.name = group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'object group "%" does not exist', group_name
              USING ERRCODE = 'undefined_object',
                    HINT = 'Create it with tms.create_object_group().';
    END IF;
    -- a group is used with its owner's consent: ownership or a grant
    IF NOT tms._may_use_group(who, g) THEN
        RAISE EXCEPTION 'permission denied for object group "%"', group_name
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = format('The group is owned by role %s, which has not granted it to role %s.', g.owner, who),
                    HINT = format('The owner may run SELECT tms.grant_object_group(%L, %L);', g.name, who::text);
    END IF;
    -- the policy runs as its owner: the owner must be able to use the catalog
    PERFORM tms._check_server(g.server, who);
    PERFORM tms._check_window(time_window);
    IF EXISTS (SELECT 1 FROM tms.maintenance_policies p WHERE p.name = _create_policy.name) THEN
        RAISE EXCEPTION 'policy "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO tms.maintenance_policies (name, group_id, owner, description, active, time_window)
    VALUES (_create_policy.name, g.id, who, _create_policy.description,
            coalesce(_create_policy.active, true), time_window)
    RETURNING id INTO pid;
    -- its evaluation: a task the pool runs now and every evaluation interval
    PERFORM tms.schedule_task('policy-expand', pid::text);
    RETURN pid;
END
$$;

CREATE OR REPLACE FUNCTION tms._add_rule(acting regrole, policy_name text, operation text, engine text, counters jsonb, condition text, baseline_mode text, options jsonb, schedule jsonb, min_interval interval, score text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, policy_name);
    needs text;
    r tms.maintenance_rules;
BEGIN
    needs := tms._check_rule(operation, engine, counters, condition, baseline_mode,
                             options, schedule, min_interval, NULL, score);
    counters := coalesce(counters, '{}');
    INSERT INTO tms.maintenance_rules (policy_id, operation, engine, options,
                                       commits_threshold, bytes_threshold,
                                       time_threshold_ms, condition, needs,
                                       baseline_mode, schedule, min_interval_ms, score)
    VALUES (p.id, operation, engine, coalesce(options, '{}'),
            (counters ->> 'commits-added')::bigint, (counters ->> 'bytes-added')::bigint,
            (counters ->> 'time-elapsed')::bigint, condition, needs, baseline_mode,
            schedule,
            (extract(epoch FROM min_interval) * 1000)::bigint, _add_rule.score)
    RETURNING * INTO r;
    INSERT INTO tms.rule_versions (rule_id, version, policy_id, policy_name, changed_by,
                                   definition)
    VALUES (r.id, r.version, p.id, p.name, acting::text, tms._rule_definition(r));
    PERFORM tms._attach(r.id, NULL);
    -- the policy's task is due at its rules' next firing: look again now
    IF schedule ? 'crontab' THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
    RETURN r.id;
END
$$;

-- Change a rule in place: a new version of the same rule, so its
-- baselines (what it has counted on each table) and cooldowns stay.  An
-- argument left NULL keeps its value; reset names the ones to set back
-- to none (schedule, time_window, score) or to the operation's setting
-- (min_interval).  The rule as it would be is checked as tms.add_rule
-- checks a new one.  The rule's row is locked first, so a concurrent
-- evaluation records its result either before (with the old version) or
-- after (finding a version newer than the one it evaluated: it submits
-- nothing; tms._record_evaluation).  New thresholds apply to the
-- baselines' counts so far.  Returns the rule's version.
CREATE OR REPLACE FUNCTION tms._alter_rule(acting regrole, rule_id bigint, counters jsonb, condition text, options jsonb, schedule jsonb, time_window jsonb, min_interval interval, active boolean, reset text[], score text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old tms.maintenance_rules;
    r tms.maintenance_rules;
    p tms.maintenance_policies;
    k text;
    changes jsonb := '{}';
    d0 jsonb;
    d1 jsonb;
BEGIN
    IF rule_id IS NULL THEN
        RAISE EXCEPTION 'rule_id must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO old FROM tms.maintenance_rules m WHERE m.id = _alter_rule.rule_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rule % does not exist', rule_id
              USING ERRCODE = 'undefined_object',
                    HINT = 'See SELECT id, policy FROM tms.rules.';
    END IF;
    SELECT * INTO p FROM tms.maintenance_policies mp WHERE mp.id = old.policy_id;
    PERFORM tms._own_policy(acting, p.name);
    FOREACH k IN ARRAY coalesce(reset, '{}') LOOP
        IF k IS NULL OR k NOT IN ('schedule', 'time_window', 'min_interval', 'score') THEN
            RAISE EXCEPTION 'cannot reset "%" of a rule', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('reset is %s.', reset),
                        HINT = 'reset takes schedule, time_window, min_interval and score; give other values as arguments.';
        END IF;
        IF (k = 'schedule' AND schedule IS NOT NULL)
           OR (k = 'time_window' AND time_window IS NOT NULL)
           OR (k = 'min_interval' AND min_interval IS NOT NULL)
           OR (k = 'score' AND score IS NOT NULL) THEN
            RAISE EXCEPTION 'cannot both set and reset "%"', k
                  USING ERRCODE = 'invalid_parameter_value',
                        DETAIL = format('reset is %s and %s is given.', reset, k);
        END IF;
    END LOOP;

    r := old;
    IF counters IS NOT NULL THEN
        r.commits_threshold := NULL;
        r.bytes_threshold := NULL;
        r.time_threshold_ms := NULL;
    END IF;
    r.condition := coalesce(condition, old.condition);
    r.options := coalesce(options, old.options);
    r.schedule := CASE WHEN 'schedule' = ANY (reset) THEN NULL
                       ELSE coalesce(schedule, old.schedule) END;
    r.time_window := CASE WHEN 'time_window' = ANY (reset) THEN NULL
                          ELSE coalesce(time_window, old.time_window) END;
    r.active := coalesce(active, old.active);
    r.score := CASE WHEN 'score' = ANY (reset) THEN NULL
                    ELSE coalesce(_alter_rule.score, old.score) END;
    -- the one check of a rule, on the rule as it would be
    r.needs := tms._check_rule(r.operation, r.engine,
                               coalesce(counters, tms._rule_definition(old) -> 'counters'),
                               r.condition, r.baseline_mode, r.options, r.schedule,
                               CASE WHEN 'min_interval' = ANY (reset) THEN NULL
                                    WHEN min_interval IS NOT NULL THEN min_interval
                                    ELSE make_interval(secs => old.min_interval_ms / 1000.0) END,
                               r.time_window, r.score);
    IF counters IS NOT NULL THEN
        r.commits_threshold := (counters ->> 'commits-added')::bigint;
        r.bytes_threshold := (counters ->> 'bytes-added')::bigint;
        r.time_threshold_ms := (counters ->> 'time-elapsed')::bigint;
    END IF;
    r.min_interval_ms := CASE WHEN 'min_interval' = ANY (reset) THEN NULL
                              WHEN min_interval IS NOT NULL
                              THEN (extract(epoch FROM min_interval) * 1000)::bigint
                              ELSE old.min_interval_ms END;

    d0 := tms._rule_definition(old);
    d1 := tms._rule_definition(r);
    FOR k IN SELECT jsonb_object_keys(d0 || d1) LOOP
        IF d0 -> k IS DISTINCT FROM d1 -> k THEN
            changes := changes || jsonb_build_object(k, jsonb_build_object('from', d0 -> k,
                                                                           'to', d1 -> k));
        END IF;
    END LOOP;
    IF changes = '{}' THEN
        RETURN old.version;             -- nothing changes: no new version
    END IF;
    r.version := old.version + 1;
    UPDATE tms.maintenance_rules m
       SET commits_threshold = r.commits_threshold, bytes_threshold = r.bytes_threshold,
           time_threshold_ms = r.time_threshold_ms, condition = r.condition,
           needs = r.needs, options = r.options, schedule = r.schedule,
           time_window = r.time_window, min_interval_ms = r.min_interval_ms,
           active = r.active, version = r.version, score = r.score
     WHERE m.id = old.id;
    INSERT INTO tms.rule_versions (rule_id, version, policy_id, policy_name, changed_by,
                                   changes, definition)
    VALUES (old.id, r.version, p.id, p.name, acting::text, changes, d1);
    -- the counts so far stay; the new thresholds say when they fire
    IF changes ? 'counters' THEN
        UPDATE tms.rule_baselines b
           SET due_commits = b.base_commits + r.commits_threshold,
               due_bytes = b.base_bytes + r.bytes_threshold,
               due_at = b.since + make_interval(secs => r.time_threshold_ms / 1000.0),
               triggered = CASE WHEN b.pending_job IS NOT NULL THEN b.triggered
                                ELSE (t.commits >= b.base_commits + r.commits_threshold) IS TRUE
                                  OR (t.bytes_added >= b.base_bytes + r.bytes_threshold) IS TRUE END
          FROM tms.tables t
         WHERE b.rule_id = old.id AND t.id = b.table_id;
    END IF;
    IF r.schedule ? 'crontab' OR (changes ? 'active' AND r.active) THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
    RETURN r.version;
END
$$;

-- Set an object group's priority: between groups that name a table
-- equally closely, the higher priority's rules run there
-- (tms.effective_rules).
CREATE OR REPLACE FUNCTION tms._set_group_priority(acting regrole, group_name text, priority integer)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
BEGIN
    IF priority IS NULL THEN
        RAISE EXCEPTION 'priority must not be null'
              USING ERRCODE = 'null_value_not_allowed',
                    HINT = 'The default priority is 0; a higher priority wins.';
    END IF;
    UPDATE tms.object_groups SET priority = _set_group_priority.priority WHERE id = g.id;
END
$$;

CREATE OR REPLACE FUNCTION tms._drop_rule(acting regrole, rule_id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pname text;
BEGIN
    SELECT p.name INTO pname FROM tms.maintenance_rules r
      JOIN tms.maintenance_policies p ON p.id = r.policy_id WHERE r.id = rule_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rule % does not exist', rule_id USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM tms._own_policy(acting, pname);
    DELETE FROM tms.maintenance_rules WHERE id = rule_id;
END
$$;

CREATE OR REPLACE FUNCTION tms._set_policy_active(acting regrole, name text, active boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    IF active IS NULL THEN
        RAISE EXCEPTION 'active must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE tms.maintenance_policies SET active = _set_policy_active.active WHERE id = p.id;
    IF active THEN
        PERFORM tms.schedule_task('policy-expand', p.id::text);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION tms._set_policy_window(acting regrole, name text, time_window jsonb)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    PERFORM tms._check_window(time_window);
    UPDATE tms.maintenance_policies SET time_window = _set_policy_window.time_window WHERE id = p.id;
    PERFORM tms.schedule_task('policy-expand', p.id::text);
END
$$;

CREATE OR REPLACE FUNCTION tms._drop_policy(acting regrole, name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p tms.maintenance_policies := tms._own_policy(acting, name);
BEGIN
    DELETE FROM tms.maintenance_policies WHERE id = p.id;
    -- its evaluation task; a running one ends by itself, finding no policy
    DELETE FROM tms.scheduled_tasks
     WHERE task_name = 'policy-expand' AND task_instance = p.id::text AND NOT picked;
END
$$;

CREATE OR REPLACE FUNCTION tms._grant_object_group(acting regrole, group_name text, grantee regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
BEGIN
    IF grantee IS NULL THEN
        RAISE EXCEPTION 'grantee must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE tms.object_groups
       SET grantees = array_append(grantees, grantee)
     WHERE id = g.id AND NOT grantee = ANY (grantees);
END
$$;

CREATE OR REPLACE FUNCTION tms._revoke_object_group(acting regrole, group_name text, grantee regrole)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g tms.object_groups := tms._own_group(acting, group_name);
    users text;
BEGIN
    SELECT string_agg(p.name, ', ' ORDER BY p.name) INTO users
      FROM tms.maintenance_policies p
     WHERE p.group_id = g.id AND p.owner = grantee AND NOT pg_has_role(grantee, g.owner, 'USAGE');
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'cannot revoke object group "%" from role % because its policies use it',
                        group_name, grantee
              USING ERRCODE = 'dependent_objects_still_exist',
                    DETAIL = format('Policies of role %s on the group: %s.', grantee, users),
                    HINT = 'Drop those policies first.';
    END IF;
    UPDATE tms.object_groups SET grantees = array_remove(grantees, grantee)
     WHERE id = g.id AND grantee = ANY (grantees);
    RETURN FOUND;
END
$$;

-- ---------------------------------------------------------------------
-- The public functions: each calls its internal function above as the
-- extension owner, passing the acting role first (src/sql_api/api.c).
-- ---------------------------------------------------------------------

CREATE OR REPLACE FUNCTION tms.create_object_group(name text, server name,
                                        namespace_pattern text DEFAULT NULL,
                                        table_pattern text DEFAULT '*')
RETURNS integer
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_object_group(text, name, text, text) IS
    'create a target group: the tables of a catalog server whose namespace and name match glob patterns, plus explicit members';

CREATE OR REPLACE FUNCTION tms.add_group_member(group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_group_member(text, text, text) IS
    'add an explicit member table to an object group';

CREATE OR REPLACE FUNCTION tms.remove_group_member(group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.remove_group_member(text, text, text) IS
    'remove an explicit member table from an object group';

CREATE OR REPLACE FUNCTION tms.drop_object_group(name text)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_object_group(text) IS
    'drop an object group no policy uses';

CREATE OR REPLACE FUNCTION tms.grant_object_group(group_name text, grantee regrole)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.grant_object_group(text, regrole) IS
    'let a role build policies on an object group';

CREATE OR REPLACE FUNCTION tms.revoke_object_group(group_name text, grantee regrole)
RETURNS boolean
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.revoke_object_group(text, regrole) IS
    'take back a grant of an object group';

CREATE OR REPLACE FUNCTION tms.create_policy(name text, group_name text,
                                  description text DEFAULT NULL,
                                  time_window jsonb DEFAULT NULL,
                                  active boolean DEFAULT true)
RETURNS integer
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_policy(text, text, text, jsonb, boolean) IS
    'create a maintenance policy over an object group, owned by (and run as) the acting role';

CREATE OR REPLACE FUNCTION tms.add_rule(policy_name text, operation text, engine text,
                             counters jsonb DEFAULT NULL,
                             condition text DEFAULT 'true',
                             baseline_mode text DEFAULT 'catch-up',
                             options jsonb DEFAULT '{}',
                             schedule jsonb DEFAULT NULL,
                             min_interval interval DEFAULT NULL,
                             score text DEFAULT NULL)
RETURNS bigint
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval, text) IS
    'add a rule to a policy: operation, engine, counter thresholds, DSL condition, baseline mode, options, schedule (crontab, on-commit; NULL: every evaluation cycle), cooldown, score (DSL, numeric: the rank of its jobs)';

CREATE OR REPLACE FUNCTION tms.alter_rule(rule_id bigint,
                               counters jsonb DEFAULT NULL,
                               condition text DEFAULT NULL,
                               options jsonb DEFAULT NULL,
                               schedule jsonb DEFAULT NULL,
                               time_window jsonb DEFAULT NULL,
                               min_interval interval DEFAULT NULL,
                               active boolean DEFAULT NULL,
                               reset text[] DEFAULT NULL,
                               score text DEFAULT NULL)
RETURNS integer
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.alter_rule(bigint, jsonb, text, jsonb, jsonb, jsonb, interval, boolean, text[], text) IS
    'change a rule, keeping its baselines and cooldowns: a new version in tms.rule_versions (NULL arguments keep their value; reset: schedule, time_window, min_interval, score); returns the version';

CREATE OR REPLACE FUNCTION tms.set_group_priority(group_name text, priority integer)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_group_priority(text, integer) IS
    'set the priority of an object group: it breaks ties of specificity between groups (tms.effective_rules)';

CREATE OR REPLACE FUNCTION tms.drop_rule(rule_id bigint)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_rule(bigint) IS
    'drop a rule of a policy';

CREATE OR REPLACE FUNCTION tms.set_policy_active(name text, active boolean)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_active(text, boolean) IS
    'activate or deactivate a policy';

CREATE OR REPLACE FUNCTION tms.set_policy_window(name text, time_window jsonb)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_window(text, jsonb) IS
    'set (NULL: remove) the time window of a policy';

CREATE OR REPLACE FUNCTION tms.drop_policy(name text)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_policy(text) IS
    'drop a policy with its rules';

REVOKE ALL ON FUNCTION
    tms._create_object_group(regrole, text, name, text, text),
    tms._add_group_member(regrole, text, text, text),
    tms._remove_group_member(regrole, text, text, text),
    tms._drop_object_group(regrole, text),
    tms._grant_object_group(regrole, text, regrole),
    tms._revoke_object_group(regrole, text, regrole),
    tms._create_policy(regrole, text, text, text, jsonb, boolean),
    tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb, jsonb, interval, text),
    tms._drop_rule(regrole, bigint),
    tms._alter_rule(regrole, bigint, jsonb, text, jsonb, jsonb, jsonb, interval, boolean, text[], text),
    tms._set_group_priority(regrole, text, integer),
    tms._set_policy_active(regrole, text, boolean),
    tms._set_policy_window(regrole, text, jsonb),
    tms._drop_policy(regrole, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    tms.create_object_group(text, name, text, text),
    tms.add_group_member(text, text, text),
    tms.remove_group_member(text, text, text),
    tms.drop_object_group(text),
    tms.grant_object_group(text, regrole),
    tms.revoke_object_group(text, regrole),
    tms.create_policy(text, text, text, jsonb, boolean),
    tms.add_rule(text, text, text, jsonb, text, text, jsonb, jsonb, interval, text),
    tms.drop_rule(bigint),
    tms.alter_rule(bigint, jsonb, text, jsonb, jsonb, jsonb, interval, boolean, text[], text),
    tms.set_group_priority(text, integer),
    tms.set_policy_active(text, boolean),
    tms.set_policy_window(text, jsonb),
    tms.drop_policy(text)
  TO PUBLIC;
