/*-------------------------------------------------------------------------
 *
 * duckdb_capi.h
 *	  The few functions of DuckDB's C API the compaction helper calls,
 *	  declared here rather than shipping duckdb.h.
 *
 * Written against DuckDB 1.5.6 (the libduckdb.so of the npm package
 * @duckdb/node-bindings-linux-x64 1.5.6-r.1, which scripts/install-deps.sh
 * installs and the Makefile links), after the declarations of
 * https://github.com/duckdb/duckdb/blob/v1.5.6/src/include/duckdb.h.
 * The C API is stable across releases (DuckDB's promise since 1.1); the
 * structs below are allocated by the caller, so their layout must match:
 * duckdb_result (six words) and duckdb_query_progress_type.  Everything
 * else is an opaque handle.  tms_compactor checks the library's version
 * at start (duckdb_library_version) and reports it in its ready line.
 *
 * src/compactor/duckdb_capi.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_COMPACTOR_DUCKDB_CAPI_H
#define TMS_COMPACTOR_DUCKDB_CAPI_H

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t idx_t;

typedef enum duckdb_state
{
	DuckDBSuccess = 0,
	DuckDBError = 1
} duckdb_state;

typedef struct _duckdb_database
{
	void	   *internal_ptr;
}		   *duckdb_database;

typedef struct _duckdb_connection
{
	void	   *internal_ptr;
}		   *duckdb_connection;

typedef struct _duckdb_config
{
	void	   *internal_ptr;
}		   *duckdb_config;

typedef struct duckdb_result
{
	idx_t		deprecated_column_count;
	idx_t		deprecated_row_count;
	idx_t		deprecated_rows_changed;
	void	   *deprecated_columns;
	char	   *deprecated_error_message;
	void	   *internal_data;
} duckdb_result;

typedef struct duckdb_query_progress_type
{
	double		percentage;
	uint64_t	rows_processed;
	uint64_t	total_rows_to_process;
} duckdb_query_progress_type;

extern const char *duckdb_library_version(void);

extern duckdb_state duckdb_create_config(duckdb_config *out_config);
extern duckdb_state duckdb_set_config(duckdb_config config, const char *name,
									  const char *option);
extern void duckdb_destroy_config(duckdb_config *config);

extern duckdb_state duckdb_open_ext(const char *path, duckdb_database *out_database,
									duckdb_config config, char **out_error);
extern void duckdb_close(duckdb_database *database);
extern duckdb_state duckdb_connect(duckdb_database database, duckdb_connection *out_connection);
extern void duckdb_disconnect(duckdb_connection *connection);
extern duckdb_query_progress_type duckdb_query_progress(duckdb_connection connection);

extern duckdb_state duckdb_query(duckdb_connection connection, const char *query,
								 duckdb_result *out_result);
extern void duckdb_destroy_result(duckdb_result *result);
extern const char *duckdb_result_error(duckdb_result *result);
extern idx_t duckdb_row_count(duckdb_result *result);
extern idx_t duckdb_column_count(duckdb_result *result);
extern bool duckdb_value_is_null(duckdb_result *result, idx_t col, idx_t row);
extern int64_t duckdb_value_int64(duckdb_result *result, idx_t col, idx_t row);
extern char *duckdb_value_varchar(duckdb_result *result, idx_t col, idx_t row);
extern void duckdb_free(void *ptr);

#endif							/* TMS_COMPACTOR_DUCKDB_CAPI_H */
