-- tms 0.5.0 -> 0.6.0
--
-- What changed, and what this script does about it:
--

-- An engine job records, before the first request that may start a run on
-- the engine, that a run may exist (submitted_at) and the table's snapshot
-- then (submit_snapshot_id): a recovered job never submits again, it
-- follows the run or looks at the snapshots committed after that one.
-- A job in flight on an engine when the update runs has its request's
-- snapshot as the best base known.
ALTER TABLE tms.table_maintenance_job
    ADD COLUMN submitted_at timestamptz,
    ADD COLUMN submit_snapshot_id bigint;
UPDATE tms.table_maintenance_job
   SET submitted_at = coalesce(started_at, created_at),
       submit_snapshot_id = before_snapshot_id
 WHERE finished_at IS NULL AND phase IN ('submit', 'engine');
