-- tms 0.4.0 -> 0.5.0
--
-- What changed, and what this script does about it:
--
--   - compaction on engine 'local' (issue 17): runs in the helper
--     $libdir/tms/tms_compactor; its settings tms.compaction_memory_limit,
--     tms.compaction_threads and tms.compaction_temp_directory are the
--     library's, and the catalog already accepts engine 'local' for every
--     operation: no schema change, nothing to do here.
--

\echo Use "ALTER EXTENSION tms UPDATE TO '0.5.0'" to load this file. \quit
