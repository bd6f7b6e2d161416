-- Async purge of dropped Iceberg tables (doc/purge.md).
--
-- tms.purge_table() records a job here in the caller's transaction; the
-- job's task (kind "purge", instance = job id) is run by the pool workers
-- or CALL tms.run_pending(): its first step drops the table from its
-- catalog, then every reachable file is deleted in bulk batches
-- (src/ops/purge.c, purge_walk.c).
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).  Functions and views:
-- sql/install/functions/50_purge.sql.

CREATE TABLE tms.iceberg_cleanup_job (
    id                bigserial PRIMARY KEY,
    server            name NOT NULL,        -- the tms_iceberg foreign server
    namespace         text NOT NULL,        -- levels joined by '.'
    table_name        text NOT NULL,
    table_uuid        text,
    table_location    text NOT NULL,        -- nothing outside it is deleted
    metadata_location text NOT NULL,
    -- non-secret storage settings in effect at enqueue time: endpoint,
    -- region, path_style, and where credentials come from
    storage           jsonb NOT NULL DEFAULT '{}',
    state             text NOT NULL DEFAULT 'PENDING'
                      CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED')),
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text,
    heartbeat_at      timestamptz,          -- last progress written by a worker
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    -- progress and outcome (counts of the latest attempt)
    phase             text NOT NULL DEFAULT 'drop',  -- drop, content, metadata-log, metadata
    files_deleted     bigint NOT NULL DEFAULT 0,    -- includes not-found
    bytes_freed       bigint NOT NULL DEFAULT 0,    -- declared sizes where known
    files_skipped     bigint NOT NULL DEFAULT 0,    -- outside location/allowed roots
    skipped_example   text,
    files_kept        bigint NOT NULL DEFAULT 0,    -- another known table's, or gc.enabled=false
    kept_example      text,
    files_unreadable  bigint NOT NULL DEFAULT 0,    -- manifests/lists already gone
    delete_requests   bigint NOT NULL DEFAULT 0,
    requested_by      regrole NOT NULL,     -- the acting role: its user mapping is used
    dropped_at        timestamptz,          -- when the catalog entry was dropped (or held)
    -- with the server option purge_hold_namespace: where the catalog entry
    -- is held (renamed) until the files are gone, so that vended storage
    -- credentials can be loaded again; NULL: dropped
    held_namespace    text,
    held_name         text,
    -- purge_table(delete_other_tables_files => true): files at or below
    -- the location of another table tms knows are deleted too
    delete_other_tables_files boolean NOT NULL DEFAULT false,
    CHECK ((state IN ('SUCCEEDED', 'FAILED')) = (finished_at IS NOT NULL))
);

COMMENT ON TABLE tms.iceberg_cleanup_job IS
    'async purge jobs of dropped Iceberg tables: PENDING -> RUNNING -> SUCCEEDED | FAILED';

CREATE INDEX iceberg_cleanup_job_state_idx ON tms.iceberg_cleanup_job (state, updated_at);
-- the tombstone: at most one active job per identifier, found by one probe
CREATE UNIQUE INDEX iceberg_cleanup_job_active_idx ON tms.iceberg_cleanup_job
    (server, namespace, table_name) WHERE state IN ('PENDING', 'RUNNING');
CREATE INDEX iceberg_cleanup_job_object_idx ON tms.iceberg_cleanup_job
    (server, namespace, table_name, id);
-- the finished jobs by their end, for their prune (tms._prune_purge_jobs)
CREATE INDEX iceberg_cleanup_job_finished_idx ON tms.iceberg_cleanup_job (finished_at)
    WHERE state IN ('SUCCEEDED', 'FAILED');

-- Storage credentials a catalog vended at enqueue time, for the workers;
-- readable by the extension owner only, deleted when the job ends.
CREATE TABLE tms.iceberg_cleanup_credentials (
    job_id      bigint PRIMARY KEY REFERENCES tms.iceberg_cleanup_job ON DELETE CASCADE,
    config      jsonb NOT NULL,     -- the vended key/values (secrets included)
    expires_at  timestamptz         -- from s3.session-token-expires-at-ms, if given
);

REVOKE ALL ON tms.iceberg_cleanup_job, tms.iceberg_cleanup_credentials FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_job', '');
SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('tms.iceberg_cleanup_credentials', '');

-- The built-in task kind; its cap follows tms.purge_concurrency.
INSERT INTO tms.task_kinds (kind, handler, max_concurrency, builtin)
    VALUES ('purge', NULL, 2, true);
INSERT INTO tms.task_slots (kind, slot)
    SELECT 'purge', s FROM generate_series(1, 2) s;
