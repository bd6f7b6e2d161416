/*-------------------------------------------------------------------------
 *
 * compactor_int.h
 *	  What the files of the compaction helper share: tms_compactor.c (the
 *	  process: the protocol loop, its output, the heartbeat),
 *	  rewrite_group.c (the rewrite of one group with DuckDB),
 *	  dv_rewrite.c (position deletes into deletion vectors, v3),
 *	  field_sql.c (the SQL of a schema at every depth: types, reading by
 *	  field id, field ids written, the leaves' metrics), file_metrics.c
 *	  (the metrics of a file written) and compactor_sort.c (the ORDER BY
 *	  of strategies sort and zorder).
 *
 * The helper is a separate program, never loaded into PostgreSQL: it
 * links libduckdb and tms's plain-C layers (io for storage, iceberg for
 * the protocol, the schema and Iceberg's values), nothing of the server.
 * A worker starts one per compaction job; src/iceberg/compact/compact_wire.h is
 * the protocol and doc/architecture.md the process model.
 *
 * src/compactor/compactor_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_COMPACTOR_H
#define TMS_COMPACTOR_H

#include "compactor/duckdb_capi.h"
#include "iceberg/compact/compact_wire.h"
#include "io/io.h"
#include "io/util/strbuf.h"

typedef struct Helper
{
	IoStorage  *storage;
	duckdb_database db;
	duckdb_connection con;		/* the group's own (each thread copies the
								 * Helper) */
	char	   *temp_directory;
	int64_t		memory_limit;
	int			threads;
} Helper;

/* Send one line to the worker (thread-safe); exits if the pipe is gone. */
extern void helper_send(char *line);

/* What the heartbeat reports: bytes of the group done so far. */
extern void helper_progress(int group, int64_t done);

/* The most groups running at once while group ran, itself included. */
extern int	helper_in_flight(int group);

/*
 * Run one DuckDB statement on h's connection (duckdb_query into res),
 * the helper's lock released meanwhile and at most `threads` statements
 * at once (tms_compactor.c).  The caller holds that lock: every thread of
 * a group does but inside this.
 */
extern bool helper_statement(Helper *h, const char *sql, duckdb_result *res);

/*
 * Ask for (keep) or give back DuckDB's preserve_insertion_order, a
 * setting of the whole database: on while any group in flight asked for
 * it (tms_compactor.c).  The caller holds the helper's lock.
 */
extern bool helper_insertion_order(Helper *h, bool keep, TmsError *err);

/*
 * Rewrite one group (rewrite_group.c): every file message is sent as its file is
 * uploaded, then the done message.  False with err set on failure.
 */
extern bool helper_rewrite_group(Helper *h, const IcebergCompactJob *job,
								 TmsError *err);

/*
 * A rewrite of position deletes on v3 (job->dv_output, dv_rewrite.c): the
 * group's position delete files and deletion vectors into one Puffin file
 * of one deletion vector per data file; its file message, then done.
 */
extern bool helper_rewrite_dvs(Helper *h, const IcebergCompactJob *job, TmsError *err);

/*
 * A row delta on v3 (rewrite_group.c, after its reads): the positions of
 * the table "dvnew" (file_path as the metadata spells the data file, pos)
 * with those the group's deletes already delete in those files (the table
 * "posl", when has_pos) as one deletion vector per data file in one Puffin
 * file <output dir><prefix>-00000.puffin (none when "dvnew" is empty),
 * announced by its file message, then the done message: rows_deleted and
 * rows_filtered the new positions, rows_out every position written
 * (dv_rewrite.c).
 */
extern bool helper_row_delta_dvs(Helper *h, const IcebergCompactJob *job, bool has_pos,
								 int64_t rows_in, int64_t rows_filtered, int64_t bytes_in,
								 TmsError *err);

/* Copy an object from storage to a local file; upload one (its *size). */
extern bool helper_download(Helper *h, const char *uri, const char *local, TmsError *err);

/*
 * A deletion vector (its Puffin file uri, the blob's offset and length, the
 * data file it references, its record count) read, decoded with at most
 * cap positions, and written to the local text file path, one position a
 * line (dv_rewrite.c).  false with err set on any failure.
 */
extern bool helper_dv_to_csv(Helper *h, const char *uri, int64_t offset, int64_t length,
							 const char *referenced, int64_t records, int64_t cap,
							 const char *path, TmsError *err);
extern bool helper_upload(Helper *h, const char *local, const char *uri, int64_t *size,
						  TmsError *err);

/* Peak resident set size of this process, in bytes. */
extern int64_t helper_peak_rss(void);

/* Run a statement (res NULL: its result dropped); false with err set on failure. */
extern bool helper_run(Helper *h, const char *sql, duckdb_result *res, TmsError *err);

/*
 * The same for a light statement (a file's footer or schema, a table of a
 * few rows: milliseconds of work), run without waiting for a turn among
 * the `threads` statements at once (tms_compactor.c).
 */
extern bool helper_run_light(Helper *h, const char *sql, duckdb_result *res,
							 TmsError *err);

/*
 * A statement's end, for both: ok, or false with err set from r's error
 * (r destroyed); r is destroyed too when the caller wants no result (res
 * NULL).
 */
extern bool helper_result(bool ok, duckdb_result *r, duckdb_result *res, TmsError *err);

/*
 * The metrics of a file written (file_metrics.c) into out: records,
 * metrics per primitive field, split offsets.
 */
extern bool file_metrics(Helper *h, const IcebergCompactJob *job, const char *local,
						 IcebergCompactOutput *out, TmsError *err);

/* ---- SQL for a schema at every depth (field_sql.c) ---- */

/* A growable SQL text: the plain-C layers' one buffer (io/util/strbuf.h). */
typedef IoStrBuf Sql;

extern void sql_add(Sql *q, const char *fmt,...) __attribute__((format(printf, 2, 3)));
extern void sql_lit(Sql *q, const char *s); /* a string literal */
extern void sql_ident(Sql *q, const char *s);	/* a quoted identifier */
extern void sql_reset(Sql *q);

/*
 * The Parquet name Iceberg's writers give a field: its name made
 * Avro-compatible (AvroSchemaUtil.makeCompatibleName): a first character
 * that is not a letter or '_' and any later one that is not a letter,
 * digit or '_' becomes "_x" and its code in upper-case hex (a leading
 * digit becomes '_' and the digit).
 */
extern void avro_name(Sql *q, const char *name);

/* DuckDB's type of a primitive field (NULL: none), of any field (false: none). */
extern const char *duck_primitive(const IcebergColumn *c, char *buf, size_t len);
extern bool duck_type_sql(Sql *q, const IcebergColumn *c);

/* COPY's FIELD_IDS value for the schema, every depth. */
extern void field_ids_sql(Sql *q, const IcebergSchema *s);

/* A Parquet file's schema (parquet_schema()) as a tree. */
typedef struct FileNode
{
	char	   *name;
	int32_t		field_id;		/* -1: none; FIELD_UNMAPPED: none, and the
								 * name mapping names it not */
	char		kind;			/* 'P' primitive, 'S' struct, 'L' list, 'M'
								 * map */
	bool		repeated;
	int			leaf;			/* a primitive's column index in the file */
	int			nleaves;		/* the root: the file's primitive columns */
	int			nchildren;
	struct FileNode *children;
} FileNode;

/* *sig: a text that differs for files whose schemas differ (malloc'd). */
extern bool file_schema_read(Helper *h, const char *local, FileNode *root, char **sig,
							 TmsError *err);
extern void file_schema_free(FileNode *root);

#define FIELD_UNMAPPED (-2)

/*
 * Give the fields of root without a field id those of the table's name
 * mapping (a JSON array; NULL: none), FIELD_UNMAPPED where it has none.
 */
extern bool file_schema_map_names(FileNode *root, const char *mapping, TmsError *err);

/*
 * The select list reading a file of schema root by field id into schema
 * s: one expression "... AS c<id>" per top-level column.
 */
extern bool read_projection(Sql *q, const IcebergSchema *s, const FileNode *root,
							TmsError *err);

/*
 * The read_parquet schema map (MAP {id: {name: 'c<id>', type, ...}}) of
 * the top-level primitive columns ids[0..n) of s (NULL: all); false when
 * one is not such a column.
 */
extern bool schema_map_sql(Sql *q, const IcebergSchema *s, const int32_t *ids, int n);

/*
 * Equality deletes by fields inside structs: "SELECT <field> AS c<id>, ...,
 * '<local>' AS filename FROM read_parquet('<local>')" of the delete file
 * local, each of ids[0..n) (a top-level column or a primitive of structs
 * at any depth) found by field id at every level through the file's
 * Parquet schema, as the schema's type (eq_file_select; false with err
 * when the file lacks one); and the SQL of its value in a row read by
 * read_projection under alias (field_row_sql: alias.c<id>, struct_extract
 * below; false when the schema has no such field).
 */
extern bool eq_file_select(Sql *q, Helper *h, const IcebergSchema *s, const char *local,
						   const int32_t *ids, int n, TmsError *err);
extern bool field_row_sql(Sql *q, const IcebergSchema *s, const char *alias, int32_t id);

/*
 * Row lineage: ", <stored _row_id or null> AS __rid, <stored
 * _last_updated_sequence_number or null> AS __lus" of a file of schema root.
 */
extern void lineage_projection(Sql *q, const FileNode *root);

/*
 * Leaf ids of the file written (leaf_ids[column index]; -1: none) and
 * whether it carries every field id of s.
 */
extern bool file_leaf_ids(const IcebergSchema *s, const FileNode *root, int32_t *leaf_ids,
						  int nleaf_ids, TmsError *err);

/*
 * A primitive field of the schema and the SQL of its values in a file
 * written (table alias t): the value itself, or, under a list or a map
 * (repeated), a list of every value it has in the row.
 */
typedef struct Leaf
{
	const IcebergColumn *c;
	bool		repeated;
	char	   *expr;
} Leaf;

extern bool schema_leaves(const IcebergSchema *s, Leaf **out, int *n);
extern void leaves_free(Leaf *l, int n);


/*
 * Strategies sort and zorder (compactor_sort.c): the z-order keys
 * ", <key> AS tms_z<j>" over the inputs' d.c<id> (nothing for sort), and
 * " ORDER BY ..." over the subquery s (false: none, the rows unordered).
 */
extern void compactor_sort_keys(IoStrBuf *q, const IcebergCompactJob *job);
extern bool compactor_order_by(IoStrBuf *q, const IcebergCompactJob *job);

#endif							/* TMS_COMPACTOR_H */
