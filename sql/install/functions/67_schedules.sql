-- Schedules and commit events (doc/schedules.md).  A rule is evaluated at
-- its policy's evaluation cycle, at the firings of its crontab, or after
-- each commit to a table; here are the two entry points of commits (a
-- trigger on a JdbcCatalog's table of pointers, tms.notify_commit), the
-- catalogs whose commits arrive as events and are therefore not polled,
-- and the crontab expansion of the policy-expand task.  The handlers of
-- the task kinds are C (src/ops/policy_run.c for policy-expand,
-- src/ops/policy_tasks.c for cron-job and commit-job).
-- Idempotent part, replayed by every update script: only statements
-- that may run again (doc/developing.md).  Tables: sql/install/67_schedules.sql.

-- Wake the idle pool workers of this database when the transaction
-- commits (src/sql_api/sched_sql.c), so work it made due is claimed at
-- once rather than after a tms.naptime.
CREATE OR REPLACE FUNCTION tms._wake_at_commit()
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_wake_at_commit';

-- A commit (or, dropped, the drop) of a table of a catalog server,
-- recorded in the committing transaction: a table new to tms joins its
-- groups, and a table some rule watches gets its commit-job, one per
-- table, coalescing every event until it runs.  A job picked while events
-- arrive runs again afterwards (its due time moves past the claim's).
-- Returns the table's id, NULL when no rule watches it.
CREATE OR REPLACE FUNCTION tms._commit_event(srv name, ns text, tbl text, location text, dropped boolean)
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
CREATE OR REPLACE FUNCTION tms._jdbc_event(relid oid, catalog text, ns text, tbl text,
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
CREATE OR REPLACE FUNCTION tms._jdbc_commit_trigger()
RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_jdbc_commit_trigger';

CREATE OR REPLACE FUNCTION tms._attach_jdbc_catalog(acting regrole, pointers regclass, server name,
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

CREATE OR REPLACE FUNCTION tms._attach_commit_listener(acting regrole, server name)
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

CREATE OR REPLACE FUNCTION tms._detach_commit_source(acting regrole, server name)
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

CREATE OR REPLACE FUNCTION tms._notify_commit(acting regrole, server name, namespace text,
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

CREATE OR REPLACE FUNCTION tms._notify_drop(acting regrole, server name, namespace text, table_name text)
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

CREATE OR REPLACE FUNCTION tms.attach_jdbc_catalog(pointers regclass, server name,
                                        catalog_name text DEFAULT NULL)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_jdbc_catalog(regclass, name, text) IS
    'turn every pointer change of a JdbcCatalog table of pointers in this database into a commit event of a catalog server, in the committing transaction; the server is no longer polled';

CREATE OR REPLACE FUNCTION tms.attach_commit_listener(server name)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.attach_commit_listener(name) IS
    'declare that an event listener reports every commit of a catalog server through tms.notify_commit; the server is no longer polled';

CREATE OR REPLACE FUNCTION tms.detach_commit_source(server name)
RETURNS boolean
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.detach_commit_source(name) IS
    'stop taking the commits of a catalog server as events (drops the trigger); the server is polled again';

CREATE OR REPLACE FUNCTION tms.notify_commit(server name, namespace text, table_name text,
                                  metadata_location text DEFAULT NULL)
RETURNS boolean
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_api_call';

COMMENT ON FUNCTION tms.notify_commit(name, text, text, text) IS
    'report a commit to a table (namespace levels joined with "."); its commit-job runs the table''s on-commit rules; false: no rule watches the table';

CREATE OR REPLACE FUNCTION tms.notify_drop(server name, namespace text, table_name text)
RETURNS void
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
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
CREATE OR REPLACE FUNCTION tms._expand_cron(p_policy integer, p_batch integer, p_skip boolean,
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
