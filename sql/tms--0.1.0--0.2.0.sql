-- tms 0.1.0 -> 0.2.0
--
-- What changed, and what this script does about it:
--
--  * Policies are evaluated by tasks of kind policy-expand run by the pool
--    workers, no longer by the supervisor: every policy gets its task.
--  * One acting role: the SQL API functions are no longer SECURITY
--    DEFINER; each is a C entry point that calls an internal function
--    with the acting role (src/sql_api/api.c).  tms._caller() is gone.
--  * Object groups are used with their owner's consent (grantees).
--  * Purge jobs record the requesting role by OID (requested_by replaces
--    created_by), the catalog drop is the job's first step (phase
--    "drop"), and job ids come from a sequence pg_dump keeps.
--  * One glob matcher and one credential check, both in C.
--  * Every sequence of a dumped table is dumped with it.
--  * A task kind's SQL handler is recorded by its signature (text), not
--    as a regprocedure, which pg_upgrade refuses in a table.

\echo Use "ALTER EXTENSION tms UPDATE TO '0.2.0'" to load this file. \quit

-- ---------------------------------------------------------------------
-- Task kinds: the handler by its signature
-- ---------------------------------------------------------------------

CREATE FUNCTION tms._procedure_signature(proc regprocedure)
RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog
AS $$ SELECT proc::text $$;

REVOKE ALL ON FUNCTION tms._procedure_signature(regprocedure) FROM PUBLIC;

ALTER TABLE tms.task_kinds ALTER COLUMN handler TYPE text
    USING tms._procedure_signature(handler);

-- ---------------------------------------------------------------------
-- Purge jobs
-- ---------------------------------------------------------------------

-- job ids from a sequence of the extension (an identity sequence cannot
-- be passed to pg_extension_config_dump)
ALTER TABLE tms.iceberg_cleanup_job ALTER COLUMN id DROP IDENTITY;
CREATE SEQUENCE tms.iceberg_cleanup_job_id_seq OWNED BY tms.iceberg_cleanup_job.id;
SELECT pg_catalog.setval('tms.iceberg_cleanup_job_id_seq',
                         coalesce(max(id), 0) + 1, false)
  FROM tms.iceberg_cleanup_job;
ALTER TABLE tms.iceberg_cleanup_job
    ALTER COLUMN id SET DEFAULT nextval('tms.iceberg_cleanup_job_id_seq'::regclass);

-- the requester by OID; a name that no longer names a role falls to the
-- extension's owner
ALTER TABLE tms.iceberg_cleanup_job ADD COLUMN requested_by regrole;
UPDATE tms.iceberg_cleanup_job j
   SET requested_by = coalesce((SELECT r.oid FROM pg_catalog.pg_roles r
                                 WHERE r.rolname = j.created_by),
                               (SELECT e.extowner FROM pg_catalog.pg_extension e
                                 WHERE e.extname = 'tms'));
ALTER TABLE tms.iceberg_cleanup_job ALTER COLUMN requested_by SET NOT NULL;

-- jobs of 0.1.0 were dropped from their catalog when they were recorded
ALTER TABLE tms.iceberg_cleanup_job ADD COLUMN dropped_at timestamptz;
UPDATE tms.iceberg_cleanup_job SET dropped_at = created_at,
                                   phase = coalesce(phase, 'content');
ALTER TABLE tms.iceberg_cleanup_job ALTER COLUMN phase SET DEFAULT 'drop';
ALTER TABLE tms.iceberg_cleanup_job ALTER COLUMN phase SET NOT NULL;

DROP VIEW tms.purge_jobs;
ALTER TABLE tms.iceberg_cleanup_job DROP COLUMN created_by;

CREATE VIEW tms.purge_jobs AS
    SELECT j.id, j.server, j.namespace, j.table_name, j.state, j.phase,
           j.attempts, j.last_error,
           j.files_deleted, j.bytes_freed, j.files_skipped, j.skipped_example,
           j.files_kept, j.files_unreadable, j.delete_requests,
           j.requested_by, j.created_at, j.dropped_at, j.started_at, j.finished_at,
           j.updated_at,
           t.picked_by AS running_on,
           CASE WHEN t.picked THEN now() - t.last_heartbeat END AS heartbeat_age,
           CASE WHEN NOT t.picked THEN t.execution_time END AS next_attempt_at,
           j.table_location, j.metadata_location, j.table_uuid
      FROM tms.iceberg_cleanup_job j
      LEFT JOIN tms.scheduled_tasks t
        ON t.task_name = 'purge' AND t.task_instance = j.id::text;

COMMENT ON VIEW tms.purge_jobs IS 'async purge jobs with their progress and lease';

GRANT SELECT ON tms.purge_jobs TO pg_monitor;

SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_credentials', '');

COMMENT ON FUNCTION tms.purge_table(name, text, text) IS
    'drop an Iceberg table from its catalog and delete its files asynchronously (the drop follows the commit); returns the job id';

DROP FUNCTION tms.purge_status(name, text, text);
DROP FUNCTION tms.retry_purge(bigint);
DROP FUNCTION tms.prune_purge_jobs();

CREATE FUNCTION tms._may_see_job(acting regrole, j tms.iceberg_cleanup_job)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(acting, j.requested_by, 'USAGE')
        OR pg_has_role(acting, 'pg_monitor', 'USAGE')
        OR EXISTS (SELECT 1 FROM pg_foreign_server s
                    WHERE s.srvname = j.server AND pg_has_role(acting, s.srvowner, 'USAGE'))
$$;

CREATE FUNCTION tms._purge_status(acting regrole, server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.id, j.state, j.state IN ('PENDING', 'RUNNING'), j.attempts,
           j.last_error, j.files_deleted, j.created_at, j.finished_at
      FROM tms.iceberg_cleanup_job j
     WHERE j.server = $2 AND j.namespace = $3 AND j.table_name = $4
       AND tms._may_see_job($1, j)
     ORDER BY (j.state IN ('PENDING', 'RUNNING')) DESC, j.id DESC
     LIMIT 1
$$;

CREATE FUNCTION tms.purge_status(server name, namespace text, table_name text)
RETURNS TABLE (job_id bigint, state text, blocks_recreate boolean, attempts integer,
               last_error text, files_deleted bigint, created_at timestamptz,
               finished_at timestamptz)
LANGUAGE c STABLE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.purge_status(name, text, text) IS
    'latest purge job of a table identifier (one the caller requested, owns the server of, or monitors); blocks_recreate while it is PENDING or RUNNING';

CREATE FUNCTION tms._retry_purge(acting regrole, job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j tms.iceberg_cleanup_job;
BEGIN
    SELECT * INTO j FROM tms.iceberg_cleanup_job WHERE id = job_id FOR UPDATE;
    IF NOT FOUND OR NOT (pg_has_role(acting, j.requested_by, 'USAGE')
                         OR EXISTS (SELECT 1 FROM pg_foreign_server s
                                     WHERE s.srvname = j.server
                                       AND pg_has_role(acting, s.srvowner, 'USAGE'))) THEN
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = format('purge job %s does not exist', job_id),
            HINT = 'A job is visible to its requester, the owner of its server and pg_monitor.';
    END IF;
    IF j.state <> 'FAILED' THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('purge job %s is %s, not FAILED', job_id, j.state),
            HINT = 'Only a FAILED job can be retried; a PENDING or RUNNING one is retried by the workers.';
    END IF;
    UPDATE tms.iceberg_cleanup_job
       SET state = 'PENDING', attempts = 0, finished_at = NULL,
           phase = CASE WHEN dropped_at IS NULL THEN 'drop' ELSE 'content' END,
           last_error = 'retried by ' || acting::text || ' after: ' || coalesce(j.last_error, ''),
           updated_at = now()
     WHERE id = job_id;
    PERFORM tms.schedule_task('purge', job_id::text);
END
$$;

CREATE FUNCTION tms.retry_purge(job_id bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.retry_purge(bigint) IS 're-drive a FAILED purge job';

CREATE FUNCTION tms._prune_purge_jobs(acting regrole)
RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM tms.iceberg_cleanup_job
         WHERE state IN ('SUCCEEDED', 'FAILED')
           AND finished_at < now() -
               coalesce(current_setting('tms.purge_retention', true), '30d')::interval
        RETURNING 1)
    SELECT count(*) FROM gone
$$;

CREATE FUNCTION tms.prune_purge_jobs()
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

REVOKE ALL ON FUNCTION tms._may_see_job(regrole, tms.iceberg_cleanup_job),
                       tms._purge_status(regrole, name, text, text),
                       tms._retry_purge(regrole, bigint),
                       tms._prune_purge_jobs(regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.purge_status(name, text, text),
                          tms.retry_purge(bigint) TO PUBLIC;
REVOKE ALL ON FUNCTION tms.prune_purge_jobs() FROM PUBLIC;

CREATE OR REPLACE FUNCTION tms.refuse_purging_tables()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r jsonb := to_jsonb(NEW);
    j record;
BEGIN
    IF TG_NARGS < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tms.refuse_purging_tables() needs the tms server name as trigger argument',
            HINT = 'CREATE TRIGGER ... EXECUTE FUNCTION tms.refuse_purging_tables(''server'').';
    END IF;
    IF TG_NARGS >= 2 AND r ->> 'catalog_name' IS DISTINCT FROM TG_ARGV[1] THEN
        RETURN NEW;
    END IF;
    IF upper(coalesce(r ->> 'iceberg_type', 'TABLE')) <> 'TABLE' THEN
        RETURN NEW;
    END IF;
    SELECT id, state INTO j FROM tms.iceberg_cleanup_job
     WHERE server = TG_ARGV[0] AND namespace = r ->> 'table_namespace'
       AND table_name = r ->> 'table_name' AND state IN ('PENDING', 'RUNNING');
    IF FOUND THEN
        -- an integrity violation: a JDBC catalog reports it as a conflict
        RAISE EXCEPTION USING ERRCODE = 'integrity_constraint_violation',
            MESSAGE = format('table %s.%s is being purged by tms purge job %s (%s)',
                             r ->> 'table_namespace', r ->> 'table_name', j.id, j.state),
            DETAIL = 'Its files are still being deleted; the name is free again when the job has SUCCEEDED or FAILED.',
            HINT = format('SELECT * FROM tms.purge_jobs WHERE id = %s;', j.id);
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION tms.refuse_purging_tables() IS
    'trigger for a JDBC-layout iceberg_tables table: refuses re-creating a table whose purge is active';


-- ---------------------------------------------------------------------
-- Policies: tables
-- ---------------------------------------------------------------------

ALTER TABLE tms.object_groups ADD COLUMN grantees regrole[] NOT NULL DEFAULT '{}';
ALTER TABLE tms.object_groups ADD COLUMN refreshed_at timestamptz;

SELECT pg_catalog.pg_extension_config_dump('tms.tables_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.object_groups_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_policies_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.maintenance_rules_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.table_maintenance_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.evaluation_log_id_seq', '');

-- ---------------------------------------------------------------------
-- Policies: internals
-- ---------------------------------------------------------------------

DROP FUNCTION tms._caller();
DROP FUNCTION tms._in_group(tms.object_groups, tms.tables);
DROP FUNCTION tms._glob_like(text);
DROP FUNCTION tms._own_policy(text);
DROP FUNCTION tms._own_group(text);
DROP FUNCTION tms._check_options(jsonb);
DROP FUNCTION tms._attach(bigint, bigint);
DROP FUNCTION tms._run_maintenance_task(text, jsonb);

CREATE FUNCTION tms._glob_match(pattern text, s text)
RETURNS boolean
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_glob_match_sql';

CREATE FUNCTION tms._find_credential(doc jsonb)
RETURNS text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'tms_find_credential_sql';

CREATE FUNCTION tms._in_group(g tms.object_groups, t tms.tables)
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

CREATE FUNCTION tms._attach(rule_filter bigint, table_filter bigint)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- tms.tables grows during a discovery
AS $$
DECLARE
    n bigint;
BEGIN
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

CREATE FUNCTION tms._own_policy(acting regrole, policy_name text)
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

CREATE FUNCTION tms._check_options(options jsonb)
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

CREATE FUNCTION tms._own_group(acting regrole, group_name text)
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

CREATE FUNCTION tms._may_use_group(acting regrole, g tms.object_groups)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(acting, g.owner, 'USAGE')
        OR EXISTS (SELECT 1 FROM unnest(g.grantees) r WHERE pg_has_role(acting, r, 'USAGE'))
$$;

CREATE FUNCTION tms._run_maintenance_task(instance text, data jsonb,
                                          OUT state text, OUT job jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    jid bigint := (data ->> 'job_id')::bigint;
BEGIN
    state := tms._start_job(jid);
    IF state = 'deferred' THEN
        PERFORM tms.schedule_task('maintenance', instance, data, now() + interval '2 seconds');
    ELSIF state = 'started' THEN
        SELECT to_jsonb(mj) || jsonb_build_object('namespace', t.namespace,
                                                  'table_name', t.table_name,
                                                  'server', t.server)
          INTO job
          FROM tms.table_maintenance_job mj JOIN tms.tables t ON t.id = mj.table_id
         WHERE mj.id = jid;
    END IF;
END
$$;

DROP FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text);
CREATE FUNCTION tms.observe_table(server name, namespace text, table_name text,
                                  table_uuid text, metadata_location text,
                                  snapshot_id bigint,
                                  new_commits bigint DEFAULT 0,
                                  new_bytes bigint DEFAULT 0,
                                  first_commit_at timestamptz DEFAULT NULL,
                                  last_commit_at timestamptz DEFAULT NULL,
                                  etag text DEFAULT NULL)
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
           commits = t.commits + EXCLUDED.commits,
           bytes_added = t.bytes_added + EXCLUDED.bytes_added,
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

COMMENT ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text) IS
    'record commits observed on a table (used by the policy evaluation; tests may simulate commits with it)';

REVOKE ALL ON FUNCTION tms.observe_table(name, text, text, text, text, bigint, bigint, bigint, timestamptz, timestamptz, text) FROM PUBLIC;

COMMENT ON FUNCTION tms.evaluate_now(text, boolean) IS
    'evaluate one policy now (as its owner): refresh its tables, evaluate its candidates, submit; one row per evaluation';
GRANT EXECUTE ON FUNCTION tms.evaluate_now(text, boolean) TO PUBLIC;

-- ---------------------------------------------------------------------
-- Policies: the SQL API, as C entry points over internal functions
-- ---------------------------------------------------------------------

DROP FUNCTION tms.create_object_group(text, name, text, text);
DROP FUNCTION tms.add_group_member(text, text, text);
DROP FUNCTION tms.remove_group_member(text, text, text);
DROP FUNCTION tms.drop_object_group(text);
DROP FUNCTION tms.create_policy(text, text, text, jsonb, boolean);
DROP FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb);
DROP FUNCTION tms.drop_rule(bigint);
DROP FUNCTION tms.set_policy_active(text, boolean);
DROP FUNCTION tms.set_policy_window(text, jsonb);
DROP FUNCTION tms.drop_policy(text);

CREATE FUNCTION tms._create_object_group(acting regrole, name text, server name, namespace_pattern text, table_pattern text)
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

CREATE FUNCTION tms._add_group_member(acting regrole, group_name text, namespace text, table_name text)
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

CREATE FUNCTION tms._remove_group_member(acting regrole, group_name text, namespace text, table_name text)
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

CREATE FUNCTION tms._drop_object_group(acting regrole, name text)
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

CREATE FUNCTION tms._grant_object_group(acting regrole, group_name text, grantee regrole)
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

CREATE FUNCTION tms._revoke_object_group(acting regrole, group_name text, grantee regrole)
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

CREATE FUNCTION tms._create_policy(acting regrole, name text, group_name text, description text, time_window jsonb, active boolean)
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

CREATE FUNCTION tms._add_rule(acting regrole, policy_name text, operation text, engine text, counters jsonb, condition text, baseline_mode text, options jsonb)
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
    ops CONSTANT text[] := ARRAY['compaction', 'manifest-rewrite', 'snapshot-expiry', 'orphan-cleanup'];
    engines CONSTANT text[] := ARRAY['local', 'spark', 'trino'];
BEGIN
    IF operation IS NULL OR NOT operation = ANY (ops) THEN
        RAISE EXCEPTION 'unknown maintenance operation "%"', operation
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Operations are compaction, manifest-rewrite, snapshot-expiry and orphan-cleanup.';
    END IF;
    IF engine IS NULL OR NOT engine = ANY (engines) THEN
        RAISE EXCEPTION 'unknown maintenance engine "%"', engine
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Engines are local, spark and trino.';
    END IF;
    IF engine = 'local' AND operation IN ('compaction', 'manifest-rewrite') THEN
        RAISE EXCEPTION 'engine "local" cannot run operation "%"', operation
              USING ERRCODE = 'feature_not_supported',
                    DETAIL = 'The local engine runs only light operations: snapshot-expiry and orphan-cleanup.',
                    HINT = 'Use engine "spark".';
    END IF;

    -- counters: at least one threshold, each a positive integer
    IF counters IS NULL OR jsonb_typeof(counters) <> 'object' THEN
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
    IF NOT (counters ? 'commits-added' OR counters ? 'bytes-added' OR counters ? 'time-elapsed') THEN
        RAISE EXCEPTION 'a rule needs at least one counter threshold'
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'Give commits-added, bytes-added or time-elapsed, e.g. {"commits-added": 100}.';
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
    IF condition IS NULL THEN
        RAISE EXCEPTION 'a rule needs a condition' USING ERRCODE = 'null_value_not_allowed',
              HINT = 'Use ''true'' to act whenever the counters fire.';
    END IF;
    needs := tms._compile_condition(condition);

    INSERT INTO tms.maintenance_rules (policy_id, operation, engine, options,
                                       commits_threshold, bytes_threshold,
                                       time_threshold_ms, condition, needs,
                                       baseline_mode)
    VALUES (p.id, operation, engine, coalesce(options, '{}'),
            (counters ->> 'commits-added')::bigint, (counters ->> 'bytes-added')::bigint,
            (counters ->> 'time-elapsed')::bigint, condition, needs, baseline_mode)
    RETURNING id INTO rid;
    PERFORM tms._attach(rid, NULL);
    RETURN rid;
END
$$;

CREATE FUNCTION tms._drop_rule(acting regrole, rule_id bigint)
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

CREATE FUNCTION tms._set_policy_active(acting regrole, name text, active boolean)
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

CREATE FUNCTION tms._set_policy_window(acting regrole, name text, time_window jsonb)
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

CREATE FUNCTION tms._drop_policy(acting regrole, name text)
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

CREATE FUNCTION tms.create_object_group(name text, server name,
                                        namespace_pattern text DEFAULT NULL,
                                        table_pattern text DEFAULT '*')
RETURNS integer
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_object_group(text, name, text, text) IS
    'create a target group: the tables of a catalog server whose namespace and name match glob patterns, plus explicit members';

CREATE FUNCTION tms.add_group_member(group_name text, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_group_member(text, text, text) IS
    'add an explicit member table to an object group';

CREATE FUNCTION tms.remove_group_member(group_name text, namespace text, table_name text)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.remove_group_member(text, text, text) IS
    'remove an explicit member table from an object group';

CREATE FUNCTION tms.drop_object_group(name text)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_object_group(text) IS
    'drop an object group no policy uses';

CREATE FUNCTION tms.grant_object_group(group_name text, grantee regrole)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.grant_object_group(text, regrole) IS
    'let a role build policies on an object group';

CREATE FUNCTION tms.revoke_object_group(group_name text, grantee regrole)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.revoke_object_group(text, regrole) IS
    'take back a grant of an object group';

CREATE FUNCTION tms.create_policy(name text, group_name text,
                                  description text DEFAULT NULL,
                                  time_window jsonb DEFAULT NULL,
                                  active boolean DEFAULT true)
RETURNS integer
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.create_policy(text, text, text, jsonb, boolean) IS
    'create a maintenance policy over an object group, owned by (and run as) the acting role';

CREATE FUNCTION tms.add_rule(policy_name text, operation text, engine text,
                             counters jsonb,
                             condition text DEFAULT 'true',
                             baseline_mode text DEFAULT 'catch-up',
                             options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.add_rule(text, text, text, jsonb, text, text, jsonb) IS
    'add a rule to a policy: operation, engine, counter thresholds, DSL condition, baseline mode, options';

CREATE FUNCTION tms.drop_rule(rule_id bigint)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.drop_rule(bigint) IS
    'drop a rule of a policy';

CREATE FUNCTION tms.set_policy_active(name text, active boolean)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_active(text, boolean) IS
    'activate or deactivate a policy';

CREATE FUNCTION tms.set_policy_window(name text, time_window jsonb)
RETURNS void
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.set_policy_window(text, jsonb) IS
    'set (NULL: remove) the time window of a policy';

CREATE FUNCTION tms.drop_policy(name text)
RETURNS void
LANGUAGE c VOLATILE
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
    tms._add_rule(regrole, text, text, text, jsonb, text, text, jsonb),
    tms._drop_rule(regrole, bigint),
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
    tms.add_rule(text, text, text, jsonb, text, text, jsonb),
    tms.drop_rule(bigint),
    tms.set_policy_active(text, boolean),
    tms.set_policy_window(text, jsonb),
    tms.drop_policy(text)
  TO PUBLIC;

REVOKE ALL ON FUNCTION tms._compile_condition(text), tms._glob_match(text, text),
                       tms._find_credential(jsonb),
                       tms._in_group(tms.object_groups, tms.tables),
                       tms._attach(bigint, bigint), tms._table_dropped(bigint),
                       tms._reset_baseline(bigint, bigint),
                       tms._own_policy(regrole, text), tms._own_group(regrole, text),
                       tms._may_use_group(regrole, tms.object_groups),
                       tms._check_server(name, regrole), tms._check_window(jsonb),
                       tms._check_options(jsonb),
                       tms._record_evaluation(integer, bigint, bigint, jsonb, jsonb, boolean, text, text, jsonb, text),
                       tms._start_job(bigint), tms._run_maintenance_task(text, jsonb)
    FROM PUBLIC;

-- every policy is evaluated by a task of its own from now on
SELECT tms.schedule_task('policy-expand', id::text) FROM tms.maintenance_policies;
