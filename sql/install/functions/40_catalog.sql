-- Iceberg catalogs: the tms_iceberg foreign-data wrapper (a catalog is a
-- foreign server, its credentials a user mapping) and the functions that
-- look into catalogs and tables.  See doc/catalogs.md.
-- Idempotent: replayed by every update script, so only statements that
-- may run again (doc/developing.md).

CREATE OR REPLACE FUNCTION tms.iceberg_fdw_validator(text[], oid)
RETURNS void
LANGUAGE c STRICT
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_iceberg_fdw_validator';

COMMENT ON FUNCTION tms.iceberg_fdw_validator(text[], oid) IS
    'validates options of tms_iceberg servers and user mappings';

CREATE OR REPLACE FUNCTION tms.catalog_config(server name)
RETURNS TABLE (key text, value text)
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_catalog_config';

COMMENT ON FUNCTION tms.catalog_config(name) IS
    'the catalog''s merged configuration (/v1/config), prefix and endpoints; secrets left out';

CREATE OR REPLACE FUNCTION tms.list_namespaces(server name, parent text DEFAULT NULL)
RETURNS TABLE (namespace text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_list_namespaces';

COMMENT ON FUNCTION tms.list_namespaces(name, text) IS
    'namespaces directly under parent (top level when null); levels joined with "."';

CREATE OR REPLACE FUNCTION tms.list_tables(server name, namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, table_name text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_list_tables';

COMMENT ON FUNCTION tms.list_tables(name, text) IS
    'tables of a namespace, or of every namespace when null';

CREATE OR REPLACE FUNCTION tms.table_metadata(server name, namespace text, table_name text)
RETURNS jsonb
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_table_metadata';

COMMENT ON FUNCTION tms.table_metadata(name, text, text) IS
    'the table''s current metadata as the catalog returns it';

CREATE OR REPLACE FUNCTION tms.table_snapshots(server name, namespace text, table_name text)
RETURNS TABLE (snapshot_id bigint, parent_id bigint, sequence_number bigint,
               committed_at timestamptz, operation text, manifest_list text,
               summary jsonb, is_current boolean)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_table_snapshots';

COMMENT ON FUNCTION tms.table_snapshots(name, text, text) IS
    'the snapshots in the table''s current metadata';

CREATE OR REPLACE FUNCTION tms.table_files(server name, namespace text, table_name text,
                                snapshot_id bigint DEFAULT NULL)
RETURNS TABLE (file_path text, content text, file_format text, spec_id integer,
               partition jsonb, record_count bigint, file_size_in_bytes bigint,
               sequence_number bigint, file_sequence_number bigint,
               added_snapshot_id bigint, manifest_path text)
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_table_files';

COMMENT ON FUNCTION tms.table_files(name, text, text, bigint) IS
    'live data and delete files of a snapshot (the current one when null), read from its manifests';

CREATE OR REPLACE FUNCTION tms.table_metrics(server name, namespace text, table_name text,
                                  level text DEFAULT 'auto')
RETURNS jsonb
LANGUAGE c VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'tms_table_metrics';

COMMENT ON FUNCTION tms.table_metrics(name, text, text, text) IS
    'the policy DSL''s table variables, computed up to level (metadata, manifest_list, manifests, deletes; auto = all)';
