-- tms: Apache Iceberg table maintenance from inside PostgreSQL.
-- The schema "tms" is created by CREATE EXTENSION (tms.control: schema = tms).
-- Once-only part: run by the install script, changed for a new version
-- through sql/updates/ (doc/developing.md).

COMMENT ON SCHEMA tms IS 'Apache Iceberg table maintenance (tms extension)';

-- Everyone may look into the schema; each object grants its own privileges
-- (the pure functions to everyone, views and actions to chosen roles).
GRANT USAGE ON SCHEMA tms TO PUBLIC;
