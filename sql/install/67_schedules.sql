-- Schedules and commit events (doc/schedules.md).  A rule is evaluated at
-- its policy's evaluation cycle, at the firings of its crontab, or after
-- each commit to a table; here are the two entry points of commits (a
-- trigger on a JdbcCatalog's table of pointers, tms.notify_commit), the
-- catalogs whose commits arrive as events and are therefore not polled,
-- and the crontab expansion of the policy-expand task.  The handlers of
-- the task kinds are C (src/ops/policy_run.c for policy-expand,
-- src/ops/policy_tasks.c for cron-job and commit-job).
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).  Functions and views:
-- sql/install/functions/67_schedules.sql.

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
