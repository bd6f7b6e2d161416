-- Iceberg catalogs: the tms_iceberg foreign-data wrapper (a catalog is a
-- foreign server, its credentials a user mapping) and the functions that
-- look into catalogs and tables.  See doc/catalogs.md.
-- Once-only objects that need the functions (run after them):
-- changed for a new version through sql/updates/ (doc/developing.md).

CREATE FOREIGN DATA WRAPPER tms_iceberg
    VALIDATOR tms.iceberg_fdw_validator;

COMMENT ON FOREIGN DATA WRAPPER tms_iceberg IS
    'Iceberg REST catalogs: CREATE SERVER ... FOREIGN DATA WRAPPER tms_iceberg OPTIONS (uri ''...'')';
