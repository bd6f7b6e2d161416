-- The delete pool of each database (src/ops/delete_pool.c, doc/purge.md
-- "Deleting"): the bulk delete requests of purges and maintenance
-- operations in flight at once, bounded by tms.delete_concurrency and
-- shared fairly, and the request window of every storage target, which
-- shrinks when the storage asks to slow down (SlowDown, 503) and grows
-- back with each success.  Both views read shared memory.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms.delete_pool_internal(
    OUT pid integer,
    OUT database name,
    OUT job text,
    OUT requests_in_flight integer,
    OUT waiting boolean,
    OUT waiting_since timestamptz,
    OUT requests bigint)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_delete_pool';

COMMENT ON FUNCTION tms.delete_pool_internal() IS
    'the processes of the delete pools, from shared memory; use the view tms.delete_pool';

CREATE OR REPLACE VIEW tms.delete_pool AS
    SELECT pid, database, job, requests_in_flight, waiting, waiting_since, requests
      FROM tms.delete_pool_internal()
     ORDER BY database, pid;

COMMENT ON VIEW tms.delete_pool IS
    'processes that delete files: their requests in flight (permits of tms.delete_concurrency), whether they wait for one, permits taken so far';

CREATE OR REPLACE FUNCTION tms.delete_targets_internal(
    OUT database name,
    OUT target text,
    OUT request_window double precision,
    OUT allowed_in_flight integer,
    OUT in_flight integer,
    OUT pause_ms bigint,
    OUT requests bigint,
    OUT succeeded bigint,
    OUT throttled bigint,
    OUT window_decreases bigint,
    OUT retried_keys bigint,
    OUT last_throttled_at timestamptz)
RETURNS SETOF record
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'tms_delete_targets';

COMMENT ON FUNCTION tms.delete_targets_internal() IS
    'storage targets of the delete pools, from shared memory; use the view tms.delete_targets';

CREATE OR REPLACE VIEW tms.delete_targets AS
    SELECT database, target, request_window, allowed_in_flight, in_flight, pause_ms,
           requests, succeeded, throttled, window_decreases, retried_keys,
           last_throttled_at
      FROM tms.delete_targets_internal()
     ORDER BY database, target;

COMMENT ON VIEW tms.delete_targets IS
    'storage targets (endpoint/bucket) deleted from: the request window (halved when the storage refuses to slow down, grown back by successes), requests in flight, throttled requests, keys sent again';

-- A view's caller needs EXECUTE on the functions it calls.
REVOKE ALL ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION tms.delete_pool_internal(), tms.delete_targets_internal() TO pg_monitor;
GRANT SELECT ON tms.delete_pool, tms.delete_targets TO pg_monitor;
