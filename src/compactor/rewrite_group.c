/*-------------------------------------------------------------------------
 *
 * rewrite_group.c
 *	  The rewrite of one file group by the compaction helper, with DuckDB.
 *
 * The group's rows are split into job->files outputs by row position:
 * the inputs in the worker's order make one sequence of rows (the row
 * counts of their manifests), output i takes rows [T*i/k, T*(i+1)/k),
 * and the last slice of every file is open-ended, so a row past its
 * manifest's count is never dropped.  For each output:
 *	 - its inputs are downloaded through tms's storage into the
 *	   temporary directory (each file once; removed after its last slice);
 *	 - one COPY statement reads them by Iceberg field id at every depth
 *	   (field_sql.c: each input's Parquet schema read once, its fields
 *	   projected into the current schema; renamed, moved, promoted,
 *	   added and dropped fields resolve as Iceberg says; one read_parquet
 *	   for the inputs of one Parquet schema), keeps the slice, drops
 *	   the rows deleted by the group's delete files (position deletes:
 *	   same file path and position, delete sequence number >= the data
 *	   file's; equality deletes: equal on their columns with nulls equal,
 *	   a column a top-level one or a field of structs at any depth,
 *	   delete sequence number > the data file's) by equi-joins against
 *	   small tables built once per group (the deleted positions by local
 *	   file; each equality key with its newest delete's sequence number),
 *	   so that the rows stream (a read of whole files that needs no row's
 *	   file or position, as a sort's without deletes, joins nothing: the
 *	   join costs a sort about a fifth more CPU), and writes Parquet with
 *	   the schema's field ids at every depth, Avro-compatible names (as
 *	   Iceberg's writers name them), the table's codec and the
 *	   iceberg.schema key-value metadata;
 *	 - file_metrics.c measures the written file: the metrics of every
 *	   primitive field as Iceberg Java reports them, the split offsets,
 *	   and that every field carries its field id;
 *	 - the file is uploaded through tms's storage (mapped, not copied),
 *	   removed locally, and announced to the worker.
 * Strategies sort and zorder (job->sort; compactor_sort.c is their ORDER
 * BY): the group is read once, all its inputs, and its rows, less the
 * deleted ones, sorted by DuckDB (spilling below the temporary directory
 * beyond the memory limit).  With one output the sorted rows go straight
 * into it; with k, into one local LZ4 Parquet file, then output i takes
 * its rows [T'*i/k, T'*(i+1)/k) of it in order (preserve_insertion_order
 * for those reads), so the outputs are sorted and consecutive: DuckDB's
 * own file rotation (ROW_GROUPS_PER_FILE) does not keep an ORDER BY's
 * row groups in order within a file.
 * Deletion vectors (v3) join the position deletes: each blob is read from
 * its Puffin file, decoded by dv.c and its positions added to "pos" for
 * its one data file.  A v3 table's rows keep their row lineage
 * (job->row_lineage): _row_id and _last_updated_sequence_number, stored
 * or inherited (the file's first_row_id + position, its data sequence
 * number), are written as the reserved columns of field ids 2147483540
 * and 2147483539.
 * A retention's rewrite (job->remove_older) also drops the rows whose
 * column is below the cutoff (NULLs stay), a deletion's
 * (job->remove_where) the rows its where is TRUE for (row_filter.c
 * writes the predicate from the bound filter, never from the text), and
 * each counts them first with a query of its own over the same rows
 * (rows_filtered of "done").
 * A row delta (job->positions_output, retention's "delete-files") writes
 * no rows: each output is a position delete file (file_path as the
 * metadata spells the data file, pos its file_row_number; sorted; the
 * position delete schema and metrics) of the rows the same predicate
 * removes among those no delete of the group deletes already, so each
 * position is counted once (rows_filtered and rows_out of "done").
 * A rewrite of position deletes (job->filter_live: its inputs are position
 * delete files, its schema file_path and pos, its order theirs) keeps a
 * row only when its file_path is in the table "keep" with a sequence
 * number not above the row's delete file's (an equi-join): the others
 * point at no live data file (dangling) and count as deleted rows.
 * On a v3 table (job->dv_output) that rewrite is dv_rewrite.c's instead:
 * deletion vectors, one per data file, in one Puffin file.  A row delta
 * on v3 (job->positions_output and job->dv_output) writes no position
 * delete file: the positions go into a table, and once every read is
 * done each data file with new positions gets one deletion vector of
 * them and of the positions the group's deletes already delete in it
 * (v3 allows one per data file; the commit removes the old one), all in
 * one Puffin file written by dv_rewrite.c's encoder.
 * Before the first output the inputs' row counts (their Parquet footers)
 * are compared with their manifests': a file that disagrees fails the
 * group.  DuckDB's memory limit applies to all of it; what does not fit
 * spills below the temporary directory.
 *
 * src/compactor/rewrite_group.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"
#include "iceberg/compact/posdel.h"
#include "iceberg/table/dv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define POS_PATH_ID		2147483546
#define POS_POS_ID		2147483545
#define ROW_ID_ID		2147483540
#define LAST_SEQ_ID		2147483539
#define DOWNLOAD_CHUNK	((uint64_t) 8 * 1024 * 1024)

bool
helper_result(bool ok, duckdb_result *r, duckdb_result *res, TmsError *err)
{
	if (!ok)
	{
		const char *e = duckdb_result_error(r);

		tms_error_set(err, ICEBERG_ERR_IO, "DuckDB failed");
		tms_error_detail(err, "%.1000s", e ? e : "unknown error");
		duckdb_destroy_result(r);
		return false;
	}
	if (res == NULL)
		duckdb_destroy_result(r);
	return true;
}

bool
helper_run(Helper *h, const char *sql, duckdb_result *res, TmsError *err)
{
	duckdb_result local;
	duckdb_result *r = res ? res : &local;

	return helper_result(helper_statement(h, sql, r), r, res, err);
}

/* Copy an object from storage to a local file, in chunks. */
bool
helper_download(Helper *h, const char *uri, const char *local, TmsError *err)
{
	int			fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint64_t	off = 0;

	if (fd < 0)
	{
		tms_error_set(err, ICEBERG_ERR_IO, "cannot create \"%.300s\": %s", local, strerror(errno));
		return false;
	}
	for (;;)
	{
		IoBuffer	b = {0};
		TmsError	ioerr;
		size_t		done = 0;

		if (io_storage_read(h->storage, uri, off, DOWNLOAD_CHUNK, &b, &ioerr) != 0)
		{
			tms_error_wrap(err, ICEBERG_ERR_IO, &ioerr, "cannot read \"%.400s\"", uri);
			close(fd);
			return false;
		}
		while (done < b.len)
		{
			ssize_t		n = write(fd, b.data + done, b.len - done);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
			{
				tms_error_set(err, ICEBERG_ERR_IO,
							  "cannot write \"%.300s\": %s", local, strerror(errno));
				io_buffer_free(&b);
				close(fd);
				return false;
			}
			done += (size_t) n;
		}
		off += b.len;
		io_buffer_free(&b);
		if (done < DOWNLOAD_CHUNK)
			break;
	}
	if (close(fd) != 0)
	{
		tms_error_set(err, ICEBERG_ERR_IO, "cannot write \"%.300s\": %s", local, strerror(errno));
		return false;
	}
	return true;
}

/* Upload a local file through storage, mapped. */
bool
helper_upload(Helper *h, const char *local, const char *uri, int64_t *size, TmsError *err)
{
	int			fd = open(local, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	void	   *map;
	TmsError	ioerr;
	int			rc;

	if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0)
	{
		tms_error_set(err, ICEBERG_ERR_IO, "cannot open \"%.300s\": %s", local, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	map = mmap(NULL, (size_t) sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
	{
		tms_error_set(err, ICEBERG_ERR_IO, "cannot map \"%.300s\": %s", local, strerror(errno));
		return false;
	}
	rc = io_storage_write(h->storage, uri, map, (size_t) sb.st_size, &ioerr);
	munmap(map, (size_t) sb.st_size);
	if (rc != 0)
	{
		tms_error_wrap(err, ICEBERG_ERR_IO, &ioerr, "cannot write \"%.400s\"", uri);
		return false;
	}
	*size = (int64_t) sb.st_size;
	return true;
}

/* The output containing global row position x (T rows in k outputs). */
static int
output_of(int64_t x, int64_t total, int k)
{
	int			i;

	if (total <= 0 || x >= total)
		return k - 1;
	i = (int) ((__int128) x * k / total);
	while (i > 0 && (int64_t) ((__int128) total * i / k) > x)
		i--;
	while (i < k - 1 && (int64_t) ((__int128) total * (i + 1) / k) <= x)
		i++;
	return i;
}

/* A Parquet codec name of DuckDB's for an Iceberg one. */
static const char *
codec(const char *c)
{
	static const char *const map[][2] = {
		{"zstd", "zstd"}, {"gzip", "gzip"}, {"snappy", "snappy"}, {"lz4", "lz4"},
		{"uncompressed", "uncompressed"}, {"none", "uncompressed"}, {"brotli", "brotli"},
	};
	size_t		i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcasecmp(c, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* The state of one group's rewrite, shared by its steps. */
typedef struct GroupRun
{
	Helper	   *h;
	const IcebergCompactJob *job;
	const IcebergCompactJob *out;	/* the outputs' schema and metrics: job,
									 * or for positions_output its copy with
									 * the position delete schema */
	const char *cc;				/* DuckDB's name of the output codec */
	char		dir[4300];		/* the group's temporary directory */
	char		path[4400];		/* scratch: a local file's path */
	Sql			q;				/* scratch: the statement being built */
	int			nparts;			/* the reads: job->files, or 1 for a sort */
	int64_t		total;			/* the rows of all inputs */
	int64_t    *offset;			/* global position of input i's first row */
	int		   *first_out;		/* the first output that reads input i */
	int		   *last_out;		/* the last output that reads input i */
	bool	   *have;			/* input i is downloaded */
	char	  **proj;			/* input i's select list by field id */
	char	  **sig;			/* input i's Parquet schema, as a key */
	int32_t   **eq_sets;		/* the distinct equality column sets */
	int		   *eq_nids;		/* the number of columns of each */
	int			neq_sets;
	bool		has_pos;		/* the group has position deletes */
	bool		has_pos_files;	/* of them, Parquet position delete files */
	int64_t		rows_in;
	int64_t		rows_out;
	int64_t		rows_filtered;	/* removed by job->remove_older or
								 * remove_where */
	int64_t		bytes_in;
	int64_t		done_bytes;
	int			files_written;
	TmsError   *err;			/* why it failed */
} GroupRun;

/*
 * Where each input's rows fall: its first row's global position and the
 * first and last outputs that read it.
 */
static void
group_place_inputs(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i;

	for (i = 0; i < job->ninputs; i++)
	{
		g->offset[i] = g->total;
		g->total += job->inputs[i].records;
	}
	for (i = 0; i < job->ninputs; i++)
	{
		g->first_out[i] = output_of(g->offset[i], g->total, g->nparts);
		g->last_out[i] = job->inputs[i].records > 0 ?
			output_of(g->offset[i] + job->inputs[i].records - 1, g->total, g->nparts) : g->first_out[i];
	}
}

/* The table "inputs": each input's local file, URI and sequence number. */
static bool
group_inputs_table(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i;

	if (!helper_run_light(g->h, "CREATE OR REPLACE TEMP TABLE inputs (local VARCHAR, uri VARCHAR, seq BIGINT)",
						  NULL, g->err))
		return false;
	sql_add(&g->q, "INSERT INTO inputs VALUES ");
	for (i = 0; i < job->ninputs; i++)
	{
		snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, i);
		sql_add(&g->q, "%s(", i ? ", " : "");
		sql_lit(&g->q, g->path);
		sql_add(&g->q, ", ");
		sql_lit(&g->q, job->inputs[i].path);
		sql_add(&g->q, ", %" PRId64 ")", job->inputs[i].seq);
	}
	if (g->q.oom || !helper_run_light(g->h, g->q.data, NULL, g->err))
		return false;
	return true;
}

/*
 * Deletion vector i: its positions as the local text file del<i>.csv, for
 * group_pos_tables; at most the referenced input's row count of them.
 */
static bool
group_fetch_dv(GroupRun *g, int i)
{
	const IcebergCompactJobDelete *d = &g->job->deletes[i];
	int64_t		cap = -1;

	for (int k = 0; k < g->job->ninputs; k++)
		if (strcmp(g->job->inputs[k].path, d->dv_referenced) == 0)
			cap = g->job->inputs[k].records;
	if (cap < 0)
	{
		tms_error_set(g->err, ICEBERG_ERR_MALFORMED,
					  "a deletion vector of the group references a data file outside it");
		tms_error_detail(g->err, "%.1000s", d->dv_referenced);
		return false;
	}
	snprintf(g->path, sizeof(g->path), "%s/del%d.csv", g->dir, i);
	return helper_dv_to_csv(g->h, d->uri, d->dv_offset, d->dv_length, d->dv_referenced,
							d->dv_records, cap, g->path, g->err);
}

/*
 * Download the delete files and sort them: whether there are position
 * deletes, and each distinct set of equality columns once.
 */
static bool
group_fetch_deletes(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i,
				j;

	for (i = 0; i < job->ndeletes; i++)
	{
		const IcebergCompactJobDelete *d = &job->deletes[i];

		if (d->dv_offset >= 0)
		{
			if (!group_fetch_dv(g, i))
				return false;
			g->has_pos = true;
			continue;
		}
		snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
		if (!helper_download(g->h, d->uri, g->path, g->err))
			return false;
		if (d->content == ICEBERG_CONTENT_POSITION_DELETES)
			g->has_pos = g->has_pos_files = true;
		else
		{
			for (j = 0; j < g->neq_sets; j++)
				if (g->eq_nids[j] == d->nequality_ids &&
					memcmp(g->eq_sets[j], d->equality_ids, sizeof(int32_t) * (size_t) d->nequality_ids) == 0)
					break;
			if (j == g->neq_sets)
			{
				g->eq_sets[g->neq_sets] = d->equality_ids;
				g->eq_nids[g->neq_sets] = d->nequality_ids;
				g->neq_sets++;
			}
		}
	}
	return true;
}

/*
 * The tables of the position deletes: "pos", the delete rows naming one of
 * the group's files with their delete file's sequence number, and "posl",
 * the rows deleted by local file (the sequence number rule applied once).
 */
static bool
group_pos_tables(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i,
				j;

	if (!helper_run(g->h, "CREATE OR REPLACE TEMP TABLE pos (file_path VARCHAR, pos BIGINT, seq BIGINT)",
					NULL, g->err))
		return false;
	/* deletion vectors: their positions, of their one data file */
	for (i = 0; i < job->ndeletes; i++)
		if (job->deletes[i].dv_offset >= 0)
		{
			sql_reset(&g->q);
			sql_add(&g->q, "INSERT INTO pos SELECT ");
			sql_lit(&g->q, job->deletes[i].dv_referenced);
			sql_add(&g->q, ", column0, %" PRId64 "::BIGINT FROM read_csv(", job->deletes[i].seq);
			snprintf(g->path, sizeof(g->path), "%s/del%d.csv", g->dir, i);
			sql_lit(&g->q, g->path);
			sql_add(&g->q, ", header = false, columns = {'column0': 'BIGINT'})");
			if (g->q.oom || !helper_run(g->h, g->q.data, NULL, g->err))
				return false;
		}
	sql_reset(&g->q);
	sql_add(&g->q, "INSERT INTO pos SELECT p.file_path, p.pos, v.seq FROM read_parquet([");
	for (i = 0, j = 0; i < job->ndeletes; i++)
		if (job->deletes[i].content == ICEBERG_CONTENT_POSITION_DELETES &&
			job->deletes[i].dv_offset < 0)
		{
			snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
			sql_add(&g->q, "%s", j++ ? ", " : "");
			sql_lit(&g->q, g->path);
		}
	sql_add(&g->q, "], filename = true, schema = MAP {%d: {name: 'file_path', type: 'VARCHAR', default_value: NULL},"
			" %d: {name: 'pos', type: 'BIGINT', default_value: NULL}}) p JOIN (VALUES ",
			POS_PATH_ID, POS_POS_ID);
	for (i = 0, j = 0; i < job->ndeletes; i++)
		if (job->deletes[i].content == ICEBERG_CONTENT_POSITION_DELETES &&
			job->deletes[i].dv_offset < 0)
		{
			snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
			sql_add(&g->q, "%s(", j++ ? ", " : "");
			sql_lit(&g->q, g->path);
			sql_add(&g->q, ", %" PRId64 "::BIGINT)", job->deletes[i].seq);
		}
	sql_add(&g->q, ") v(local, seq) ON p.filename = v.local"
			" WHERE p.file_path IN (SELECT uri FROM inputs)");
	if (g->has_pos_files && (g->q.oom || !helper_run(g->h, g->q.data, NULL, g->err)))
		return false;
	/* the rows deleted, by local file: the sequence number rule applied once */
	if (!helper_run(g->h, "CREATE OR REPLACE TEMP TABLE posl AS SELECT DISTINCT i.local, p.pos"
					" FROM pos p JOIN inputs i ON p.file_path = i.uri AND p.seq >= i.seq",
					NULL, g->err))
		return false;
	return true;
}

/*
 * The rows of the delete files of equality column set j, "c<id>" each and
 * filename, appended to g->q.  Top-level columns only: one read_parquet
 * mapping them by field id.  A field inside structs: each file through
 * its Parquet schema, the field found by id at every level (field_sql.c).
 */
static bool
eq_files_sql(GroupRun *g, int j)
{
	const IcebergCompactJob *job = g->job;
	bool		top = true;
	int			i,
				k,
				n = 0;

	for (k = 0; k < g->eq_nids[j]; k++)
		top &= iceberg_schema_column(job->schema, g->eq_sets[j][k]) != NULL;
	sql_add(&g->q, top ? "read_parquet([" : "(");
	for (i = 0; i < job->ndeletes; i++)
		if (job->deletes[i].content == ICEBERG_CONTENT_EQUALITY_DELETES &&
			job->deletes[i].nequality_ids == g->eq_nids[j] &&
			memcmp(job->deletes[i].equality_ids, g->eq_sets[j], sizeof(int32_t) * (size_t) g->eq_nids[j]) == 0)
		{
			snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
			sql_add(&g->q, "%s", n++ ? (top ? ", " : " UNION ALL ") : "");
			if (top)
				sql_lit(&g->q, g->path);
			else if (!eq_file_select(&g->q, g->h, job->schema, g->path, g->eq_sets[j],
									 g->eq_nids[j], g->err))
			{
				tms_error_detail(g->err, "The delete file is \"%.400s\".", job->deletes[i].uri);
				return false;
			}
		}
	if (top)
	{
		sql_add(&g->q, "], filename = true, schema = ");
		if (!schema_map_sql(&g->q, job->schema, g->eq_sets[j], g->eq_nids[j]))
		{
			tms_error_set(g->err, ICEBERG_ERR_MALFORMED,
						  "an equality delete file names a column that is not in the schema");
			return false;
		}
	}
	sql_add(&g->q, ")");
	return true;
}

/*
 * The tables of equality column set j: "eqJ", the rows of its delete files
 * with their sequence numbers, and "eqmJ", one row per key (nulls equal)
 * with the newest delete of it.
 */
static bool
group_eq_tables(GroupRun *g, int j)
{
	const IcebergCompactJob *job = g->job;
	int			i,
				k,
				n = 0;

	sql_reset(&g->q);
	sql_add(&g->q, "CREATE OR REPLACE TEMP TABLE eq%d AS SELECT ", j);
	for (k = 0; k < g->eq_nids[j]; k++)
		sql_add(&g->q, "e.c%d, ", (int) g->eq_sets[j][k]);
	sql_add(&g->q, "v.seq FROM ");
	if (!eq_files_sql(g, j))
		return false;
	sql_add(&g->q, " e JOIN (VALUES ");
	for (i = 0, n = 0; i < job->ndeletes; i++)
		if (job->deletes[i].content == ICEBERG_CONTENT_EQUALITY_DELETES)
		{
			snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
			sql_add(&g->q, "%s(", n++ ? ", " : "");
			sql_lit(&g->q, g->path);
			sql_add(&g->q, ", %" PRId64 "::BIGINT)", job->deletes[i].seq);
		}
	sql_add(&g->q, ") v(local, seq) ON e.filename = v.local");
	if (g->q.oom || !helper_run(g->h, g->q.data, NULL, g->err))
		return false;
	/* one row per key (nulls equal), with the newest delete of it */
	sql_reset(&g->q);
	sql_add(&g->q, "CREATE OR REPLACE TEMP TABLE eqm%d AS SELECT ", j);
	for (k = 0; k < g->eq_nids[j]; k++)
		sql_add(&g->q, "c%d, ", (int) g->eq_sets[j][k]);
	sql_add(&g->q, "max(seq) AS maxseq FROM eq%d GROUP BY ALL", j);
	if (g->q.oom || !helper_run(g->h, g->q.data, NULL, g->err))
		return false;
	return true;
}

/*
 * A rewrite of position deletes (job->filter_live): the table "keep" of
 * the data files its rows may point at, each with its sequence number.
 */
static bool
group_keep_table(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i;

	if (!helper_run(g->h, "CREATE OR REPLACE TEMP TABLE keep (path VARCHAR PRIMARY KEY, seq BIGINT)",
					NULL, g->err))
		return false;
	for (i = 0; i < job->nkeep; i += 1000)
	{
		int			k;

		sql_reset(&g->q);
		sql_add(&g->q, "INSERT INTO keep VALUES ");
		for (k = i; k < job->nkeep && k < i + 1000; k++)
		{
			sql_add(&g->q, "%s(", k > i ? ", " : "");
			sql_lit(&g->q, job->keep[k].path);
			sql_add(&g->q, ", %" PRId64 ")", job->keep[k].seq);
		}
		if (g->q.oom)
		{
			tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		if (!helper_run(g->h, g->q.data, NULL, g->err))
			return false;
	}
	return true;
}

/*
 * The delete files, once: the tables "inputs", "pos" and "posl" (position
 * deletes of the group's files) and "eqJ", "eqmJ" (equality deletes by
 * column set); the local delete files are removed once they are read.
 */
static bool
group_delete_tables(GroupRun *g)
{
	int			i,
				j;

	if (!group_inputs_table(g))
		return false;
	if (g->job->filter_live && !group_keep_table(g))
		return false;
	if (!group_fetch_deletes(g))
		return false;
	if (g->has_pos && !group_pos_tables(g))
		return false;
	for (j = 0; j < g->neq_sets; j++)
		if (!group_eq_tables(g, j))
			return false;
	for (i = 0; i < g->job->ndeletes; i++)
	{
		snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
		unlink(g->path);
		snprintf(g->path, sizeof(g->path), "%s/del%d.csv", g->dir, i);
		unlink(g->path);
	}
	return true;
}

/*
 * The select list reading downloaded input i (g->path) by field id into
 * the job's schema, and its Parquet schema as a key: inputs of one key
 * are read by one read_parquet.
 */
static bool
group_input_projection(GroupRun *g, int i)
{
	FileNode	root;
	Sql			p = {0};
	bool		ok;

	io_free(g->proj[i]);
	io_free(g->sig[i]);
	g->proj[i] = g->sig[i] = NULL;
	if (!file_schema_read(g->h, g->path, &root, &g->sig[i], g->err))
		return false;
	ok = file_schema_map_names(&root, g->job->name_mapping, g->err) &&
		read_projection(&p, g->job->schema, &root, g->err);
	if (ok && g->job->row_lineage)
		lineage_projection(&p, &root);
	file_schema_free(&root);
	if (ok && p.oom)
	{
		tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		ok = false;
	}
	if (!ok)
	{
		/* a refusal of the file names it */
		if (strncmp(g->err->message, "the data file", 13) == 0 && g->err->detail[0] == '\0')
			tms_error_detail(g->err, "%.1000s", g->job->inputs[i].path);
		io_sb_free(&p);
		return false;
	}
	g->proj[i] = p.data;
	return true;
}

/*
 * Download the inputs output o reads that are not here yet, and check
 * their row counts (their Parquet footers) against their manifests'.
 */
static bool
group_fetch_inputs(GroupRun *g, int o)
{
	const IcebergCompactJob *job = g->job;
	duckdb_result r;
	int			i,
				n = 0;

	sql_reset(&g->q);
	sql_add(&g->q, "SELECT file_name, num_rows FROM parquet_file_metadata([");
	for (i = 0; i < job->ninputs; i++)
	{
		if (g->first_out[i] > o || g->last_out[i] < o)
			continue;
		snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, i);
		if (!g->have[i])
		{
			if (!helper_download(g->h, job->inputs[i].uri, g->path, g->err))
				return false;
			g->have[i] = true;
			g->bytes_in += job->inputs[i].size;
			if (!group_input_projection(g, i))
				return false;
			sql_add(&g->q, "%s", n++ ? ", " : "");
			sql_lit(&g->q, g->path);
		}
	}
	sql_add(&g->q, "])");
	if (n == 0)
		return true;
	if (g->q.oom || !helper_run_light(g->h, g->q.data, &r, g->err))
		return false;
	for (idx_t row = 0; row < duckdb_row_count(&r); row++)
	{
		char	   *fname = duckdb_value_varchar(&r, 0, row);
		int64_t		rows = duckdb_value_int64(&r, 1, row);
		int			k = -1;

		if (fname != NULL && sscanf(fname + strlen(g->dir), "/in%d.parquet", &k) == 1 &&
			k >= 0 && k < job->ninputs && rows != job->inputs[k].records)
		{
			tms_error_set(g->err, ICEBERG_ERR_MALFORMED,
						  "data file \"%.1000s\" has %" PRId64 " rows; its manifest says %" PRId64,
						  job->inputs[k].path, rows, job->inputs[k].records);
			duckdb_free(fname);
			duckdb_destroy_result(&r);
			return false;
		}
		g->rows_in += rows;
		duckdb_free(fname);
	}
	duckdb_destroy_result(&r);
	return true;
}

/*
 * The table "slices": the rows output o takes of each input it reads
 * (file row positions [lo, hi), hi NULL for the rest of the file).
 * *nslices is the number of those inputs; with none the table stays empty.
 */
static bool
group_slices_table(GroupRun *g, int o, int *nslices)
{
	const IcebergCompactJob *job = g->job;
	int64_t		lo = (int64_t) ((__int128) g->total * o / g->nparts);
	int64_t		hi = (int64_t) ((__int128) g->total * (o + 1) / g->nparts);
	int			i,
				n = 0;

	*nslices = 0;
	if (!helper_run_light(g->h, "CREATE OR REPLACE TEMP TABLE slices (local VARCHAR, lo BIGINT, hi BIGINT, seq BIGINT, frid BIGINT, path VARCHAR)",
						  NULL, g->err))
		return false;
	sql_reset(&g->q);
	sql_add(&g->q, "INSERT INTO slices VALUES ");
	for (i = 0; i < job->ninputs; i++)
	{
		int64_t		from,
					to;

		if (g->first_out[i] > o || g->last_out[i] < o)
			continue;
		from = o == g->first_out[i] ? 0 : lo - g->offset[i];
		to = o == g->last_out[i] ? -1 : hi - g->offset[i];
		snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, i);
		sql_add(&g->q, "%s(", n++ ? ", " : "");
		sql_lit(&g->q, g->path);
		if (to < 0)
			sql_add(&g->q, ", %" PRId64 ", NULL, %" PRId64, from, job->inputs[i].seq);
		else
			sql_add(&g->q, ", %" PRId64 ", %" PRId64 ", %" PRId64, from, to,
					job->inputs[i].seq);
		sql_add(&g->q, ", %" PRId64 ", ", job->inputs[i].first_row_id);
		sql_lit(&g->q, job->inputs[i].path);
		sql_add(&g->q, ")");
	}
	*nslices = n;
	if (n == 0)
		return true;
	if (g->q.oom || !helper_run_light(g->h, g->q.data, NULL, g->err))
		return false;
	return true;
}

/*
 * Does read o take whole files and nothing but their columns?  Every
 * input it reads falls in it alone (no slice of a file), and nothing asks
 * for a row's file or position: no position or equality deletes, no row
 * lineage, no rewrite of position deletes, no row delta's positions.
 * Then the rows need no join with "slices" (a sort reads the group in
 * one: every file whole).
 */
static bool
group_whole_read(GroupRun *g, int o)
{
	const IcebergCompactJob *job = g->job;
	int			i;

	if (g->has_pos || g->neq_sets > 0 || job->row_lineage || job->filter_live ||
		job->positions_output)
		return false;
	for (i = 0; i < job->ninputs; i++)
		if (g->first_out[i] <= o && g->last_out[i] >= o &&
			(g->first_out[i] != o || g->last_out[i] != o))
			return false;
	return true;
}

/*
 * The rows of the inputs output o reads, by field id (c<id>, filename,
 * file_row_number; only c<id> for a whole read), into g->q: one
 * read_parquet for the inputs of one Parquet schema, UNION ALL of those.
 */
static void
group_read_sql(GroupRun *g, int o)
{
	const IcebergCompactJob *job = g->job;
	Sql		   *q = &g->q;
	bool		whole = group_whole_read(g, o);
	int			i,
				k,
				n,
				parts = 0;

	for (i = 0; i < job->ninputs; i++)
	{
		if (g->first_out[i] > o || g->last_out[i] < o)
			continue;
		/* the first input of its schema among those output o reads */
		for (k = 0; k < i; k++)
			if (g->first_out[k] <= o && g->last_out[k] >= o && strcmp(g->sig[k], g->sig[i]) == 0)
				break;
		if (k < i)
			continue;
		sql_add(q, "%sSELECT %s%s FROM read_parquet([", parts++ ? " UNION ALL " : "",
				g->proj[i], whole ? "" : ", __tms_filename AS filename, file_row_number");
		for (k = i, n = 0; k < job->ninputs; k++)
			if (g->first_out[k] <= o && g->last_out[k] >= o && strcmp(g->sig[k], g->sig[i]) == 0)
			{
				snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, k);
				sql_add(q, "%s", n++ ? ", " : "");
				sql_lit(q, g->path);
			}
		/* a table may have a column "filename" */
		sql_add(q, whole ? "])" : "], filename = '__tms_filename', file_row_number = true)");
	}
}

/* The select list of the written columns (from c<id>), renamed as Iceberg's writers name them. */
static void
select_renamed(Sql *q, const IcebergSchema *s, const char *from)
{
	int			i;

	for (i = 0; i < s->ncolumns; i++)
	{
		Sql			nm = {0};

		sql_add(q, "%s%sc%d AS ", i ? ", " : "", from, (int) s->columns[i].id);
		avro_name(&nm, s->columns[i].name);
		if (nm.oom)
			q->oom = true;
		else
			sql_ident(q, nm.data ? nm.data : "_");
		io_sb_free(&nm);
	}
}

/* The COPY options of an output file: codec, field ids, iceberg.schema. */
static void
output_options(GroupRun *g, Sql *q)
{
	const IcebergCompactJob *job = g->out;

	sql_add(q, " (FORMAT parquet, COMPRESSION %s", g->cc);
	if (job->compression_level >= 0 && strcmp(g->cc, "zstd") == 0)
		sql_add(q, ", COMPRESSION_LEVEL %d", job->compression_level);
	sql_add(q, ", FIELD_IDS ");
	if (job->row_lineage)
	{
		/* the schema's ids and the reserved columns' */
		Sql			ids = {0};

		field_ids_sql(&ids, job->schema);
		if (ids.oom || ids.len < 2)
			q->oom = true;
		else
			sql_add(q, "%.*s, \"_row_id\": %d, \"_last_updated_sequence_number\": %d}",
					(int) ids.len - 1, ids.data, ROW_ID_ID, LAST_SEQ_ID);
		io_sb_free(&ids);
	}
	else
		field_ids_sql(q, job->schema);
	sql_add(q, ", KV_METADATA {'iceberg.schema': ");
	sql_lit(q, job->schema_json);
	sql_add(q, "})");
}

static void group_rows_sql(GroupRun *g, int o);
static void removed_rows_sql(Sql *q, const IcebergCompactJob *job, bool removed);

/*
 * The value of a retention's column in the units of its cutoff (d.c<id>:
 * an integer as it is, a timestamp's microseconds or nanoseconds since
 * 1970, a date's days since 1970).
 */
static void
older_value_sql(Sql *q, const IcebergRowCutoff *c)
{
	int			id = (int) c->field_id;

	switch (c->kind)
	{
		case ICEBERG_CUTOFF_US:
			sql_add(q, "epoch_us(d.c%d)", id);
			break;
		case ICEBERG_CUTOFF_NS:
			sql_add(q, "epoch_ns(d.c%d)", id);
			break;
		case ICEBERG_CUTOFF_DAYS:
			sql_add(q, "date_diff('day', DATE '1970-01-01', d.c%d)", id);
			break;
		default:
			sql_add(q, "CAST(d.c%d AS BIGINT)", id);
			break;
	}
}

/*
 * The COPY statement writing read o to local_out, built in g->q
 * (g->q.oom when out of memory): the slices' rows read by Iceberg field
 * id, less the deleted ones, in the strategy's order (sort, zorder), as
 * Parquet with the schema's field ids, Avro-compatible column names, the
 * codec and the iceberg.schema metadata; or, sorted (a sort into several
 * files, split after), as a plain fast Parquet file of columns c<id>.
 */
static void
group_copy_sql(GroupRun *g, int o, const char *local_out, bool sorted)
{
	const IcebergCompactJob *job = g->job;
	const IcebergSchema *s = job->schema;
	Sql		   *q = &g->q;
	int			i;

	sql_reset(q);
	sql_add(q, "COPY (SELECT ");
	if (sorted)
		for (i = 0; i < s->ncolumns; i++)
			sql_add(q, "%ss.c%d", i ? ", " : "", (int) s->columns[i].id);
	else
		select_renamed(q, s, "s.");
	if (job->row_lineage)
		sql_add(q, sorted ? ", s.__rid, s.__lus" :
				", s.__rid AS _row_id, s.__lus AS _last_updated_sequence_number");
	sql_add(q, " FROM (SELECT ");
	for (i = 0; i < s->ncolumns; i++)
		sql_add(q, "%sd.c%d AS c%d", i ? ", " : "", (int) s->columns[i].id,
				(int) s->columns[i].id);

	/*
	 * https://iceberg.apache.org/spec/#row-lineage: a null _row_id is the
	 * file's first_row_id plus the row's position, a null
	 * _last_updated_sequence_number the file's data sequence number
	 */
	if (job->row_lineage)
		sql_add(q, ", coalesce(d.__rid, sl.frid + d.file_row_number) AS __rid,"
				" coalesce(d.__lus, sl.seq) AS __lus");
	compactor_sort_keys(q, job);
	group_rows_sql(g, o);
	removed_rows_sql(q, job, false);
	sql_add(q, ") s");
	(void) compactor_order_by(q, job);
	sql_add(q, ") TO ");
	sql_lit(q, local_out);
	if (sorted)
		sql_add(q, " (FORMAT parquet, COMPRESSION lz4)");
	else
		output_options(g, q);
}

/*
 * The rows of read o, less the deleted ones: " FROM (...) d JOIN slices
 * sl ... WHERE ..." appended to g->q (the caller may add " AND ..."); for
 * a whole read (group_whole_read) " FROM (...) d WHERE true".
 */
static void
group_rows_sql(GroupRun *g, int o)
{
	const IcebergCompactJob *job = g->job;
	Sql		   *q = &g->q;
	int			j;

	sql_add(q, " FROM (");
	group_read_sql(g, o);
	if (group_whole_read(g, o))
	{
		sql_add(q, ") d WHERE true");	/* whole files: no slice to keep */
		return;
	}

	/*
	 * Equi-joins only, each against a small table built above: DuckDB streams
	 * the rows through them (a correlated NOT EXISTS would make it hold every
	 * row's keys).
	 */
	sql_add(q, ") d JOIN slices sl ON d.filename = sl.local");
	/* a rewrite of position deletes keeps the rows that point at a live file */
	if (job->filter_live)
		sql_add(q, " JOIN keep k ON k.path = d.c%d AND k.seq <= sl.seq", POS_PATH_ID);
	if (g->has_pos)
		sql_add(q, " LEFT JOIN posl p ON p.local = d.filename AND p.pos = d.file_row_number");
	for (j = 0; j < g->neq_sets; j++)
	{
		int			k;

		sql_add(q, " LEFT JOIN eqm%d e%d ON", j, j);
		for (k = 0; k < g->eq_nids[j]; k++)
		{
			sql_add(q, "%s e%d.c%d IS NOT DISTINCT FROM ", k ? " AND" : "", j,
					(int) g->eq_sets[j][k]);
			/* false: not reached (a column the read could not map) */
			q->oom |= !field_row_sql(q, job->schema, "d", g->eq_sets[j][k]);
		}
	}
	sql_add(q, " WHERE d.file_row_number >= sl.lo AND (sl.hi IS NULL OR d.file_row_number < sl.hi)");
	if (g->has_pos)
		sql_add(q, " AND p.pos IS NULL");
	for (j = 0; j < g->neq_sets; j++)
		sql_add(q, " AND (e%d.maxseq IS NULL OR e%d.maxseq <= sl.seq)", j, j);
}

/*
 * " AND <the rows a retention or a deletion removes>" (removed) or " AND
 * <the rows it keeps>" appended to q; nothing for a compaction.  A row
 * whose where is NULL (a NULL compared) is kept, as DELETE keeps it.
 */
static void
removed_rows_sql(Sql *q, const IcebergCompactJob *job, bool removed)
{
	if (job->remove_older.kind != ICEBERG_CUTOFF_NONE)
	{
		/* a retention's rewrite keeps the rows not older (and NULLs) */
		if (removed)
		{
			sql_add(q, " AND ");
			older_value_sql(q, &job->remove_older);
			sql_add(q, " < %" PRId64, job->remove_older.cutoff);
		}
		else
		{
			sql_add(q, " AND (d.c%d IS NULL OR ", (int) job->remove_older.field_id);
			older_value_sql(q, &job->remove_older);
			sql_add(q, " >= %" PRId64 ")", job->remove_older.cutoff);
		}
	}
	if (job->remove_where != NULL)
	{
		char	   *pred = iceberg_row_filter_sql(job->remove_where, "d.c");

		if (pred == NULL)
		{
			q->oom = true;
			return;
		}
		sql_add(q, removed ? " AND coalesce(%s, false)" : " AND NOT coalesce(%s, false)", pred);
		io_free(pred);
	}
}

/*
 * How many rows of read o a retention's rewrite removes (older than the
 * cutoff, not deleted already) into g->rows_filtered; the rows' one
 * column is read again, before the COPY.
 */
static bool
group_count_older(GroupRun *g, int o)
{
	duckdb_result r;

	if (g->job->remove_older.kind == ICEBERG_CUTOFF_NONE && g->job->remove_where == NULL)
		return true;
	sql_reset(&g->q);
	sql_add(&g->q, "SELECT count(*)");
	group_rows_sql(g, o);
	removed_rows_sql(&g->q, g->job, true);
	if (g->q.oom)
	{
		tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	if (!helper_run(g->h, g->q.data, &r, g->err))
		return false;
	g->rows_filtered += duckdb_value_int64(&r, 0, 0);
	duckdb_destroy_result(&r);
	return true;
}

static bool group_publish_output(GroupRun *g, int o, const char *local_out, int64_t written);

/*
 * A row delta (job->positions_output): the COPY of read o's rows removed
 * that no delete of the group deletes already, as (file_path, pos) of
 * their data file (as the metadata spells it), sorted as the spec wants
 * position delete files (https://iceberg.apache.org/spec/#position-delete-files).
 */
static void
group_positions_sql(GroupRun *g, int o, const char *local_out)
{
	Sql		   *q = &g->q;

	sql_reset(q);
	sql_add(q, "COPY (SELECT sl.path AS file_path, d.file_row_number AS pos");
	group_rows_sql(g, o);
	removed_rows_sql(q, g->job, true);
	sql_add(q, " ORDER BY 1, 2) TO ");
	sql_lit(q, local_out);
	output_options(g, q);
}

/*
 * A row delta on v3 (job->dv_output too): read o's rows removed that no
 * delete of the group deletes already, into the table "dvnew" (the
 * deletion vectors are written once every read is done).
 */
static void
group_dv_positions_sql(GroupRun *g, int o)
{
	Sql		   *q = &g->q;

	sql_reset(q);
	sql_add(q, "INSERT INTO dvnew SELECT sl.path, d.file_row_number");
	group_rows_sql(g, o);
	removed_rows_sql(q, g->job, true);
}

/*
 * A sort into several files: the sorted rows (written) of local_sorted
 * split into job->files outputs of consecutive rows, in order, each
 * published as it is written.
 */
static bool
group_split_sorted(GroupRun *g, const char *local_sorted, int64_t written)
{
	const IcebergCompactJob *job = g->job;
	char		local_out[4400];
	int			o;
	bool		ok = true;
	TmsError	ignored;		/* not to overwrite the group's error */

	/* one file read in order, written in order */
	if (!helper_insertion_order(g->h, true, g->err))
		return false;
	for (o = 0; ok && o < job->files; o++)
	{
		int64_t		lo = (int64_t) ((__int128) written * o / job->files);
		int64_t		hi = (int64_t) ((__int128) written * (o + 1) / job->files);
		duckdb_result r;
		int64_t		n;

		if (hi <= lo)
			continue;
		snprintf(local_out, sizeof(local_out), "%s/out%d.parquet", g->dir, o);
		sql_reset(&g->q);
		sql_add(&g->q, "COPY (SELECT ");
		select_renamed(&g->q, job->schema, "");
		if (job->row_lineage)
			sql_add(&g->q, ", __rid AS _row_id, __lus AS _last_updated_sequence_number");
		sql_add(&g->q, " FROM read_parquet(");
		sql_lit(&g->q, local_sorted);
		sql_add(&g->q, ", file_row_number = true) WHERE file_row_number >= %" PRId64
				" AND file_row_number < %" PRId64 ") TO ", lo, hi);
		sql_lit(&g->q, local_out);
		output_options(g, &g->q);
		if (g->q.oom)
		{
			tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			ok = false;
			break;
		}
		ok = helper_run(g->h, g->q.data, &r, g->err);
		if (!ok)
			break;
		n = duckdb_value_int64(&r, 0, 0);
		duckdb_destroy_result(&r);
		ok = group_publish_output(g, o, local_out, n);
	}
	unlink(local_sorted);
	if (!helper_insertion_order(g->h, false, ok ? g->err : &ignored))
		ok = false;
	return ok;
}

/* Remove the inputs no output after o reads, and report the progress. */
static void
group_release_inputs(GroupRun *g, int o)
{
	const IcebergCompactJob *job = g->job;
	int			i;

	for (i = 0; i < job->ninputs; i++)
		if (g->have[i] && g->last_out[i] <= o)
		{
			snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, i);
			unlink(g->path);
			g->have[i] = false;
			g->done_bytes += job->inputs[i].size;
		}
	helper_progress(job->group, g->done_bytes);
}

/*
 * Measure the file local_out written for output o (written rows), check
 * its row count, upload it, remove it and announce it to the worker.
 */
static bool
group_publish_output(GroupRun *g, int o, const char *local_out, int64_t written)
{
	const IcebergCompactJob *job = g->job;
	IcebergCompactOutput out;
	char		path2[4400];

	memset(&out, 0, sizeof(out));
	if (!file_metrics(g->h, g->out, local_out, &out, g->err))
	{
		iceberg_compact_output_free(&out);
		return false;
	}
	if (out.records != written)
	{
		tms_error_set(g->err, ICEBERG_ERR_MALFORMED,
					  "the file written holds %" PRId64 " rows, the rewrite wrote %" PRId64,
					  out.records, written);
		iceberg_compact_output_free(&out);
		return false;
	}
	if (snprintf(g->path, sizeof(g->path), "%s%s-%05d.parquet", job->upload_dir, job->prefix, o) >=
		(int) sizeof(g->path) ||
		snprintf(path2, sizeof(path2), "%s%s-%05d.parquet", job->output_dir, job->prefix, o) >=
		(int) sizeof(path2))
	{
		tms_error_set(g->err, ICEBERG_ERR_LIMIT, "the output file's path is too long");
		iceberg_compact_output_free(&out);
		return false;
	}
	/* helper_upload() says why it failed; only strdup's failure is memory */
	if (!helper_upload(g->h, local_out, g->path, &out.size, g->err))
	{
		iceberg_compact_output_free(&out);
		return false;
	}
	if ((out.path = io_strdup(path2)) == NULL)
	{
		tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		iceberg_compact_output_free(&out);
		return false;
	}
	unlink(local_out);
	g->rows_out += written;
	g->files_written++;
	helper_send(iceberg_compact_file_json(job->group, &out));
	iceberg_compact_output_free(&out);
	return true;
}

/*
 * Write read o: download what it reads, run the COPY of its slices,
 * drop the inputs no later output reads, and publish the file (none when
 * no row falls in it or every row of it was deleted).  A sort reads the
 * whole group once (o = 0): into its one output, or, for several, into a
 * sorted file split after into the outputs.
 */
static bool
group_write_output(GroupRun *g, int o)
{
	char		local_out[4400];
	duckdb_result r;
	int			n;
	int64_t		written;
	bool		split = g->job->sort != NULL && g->job->files > 1;

	/* download what this output reads, and check the row counts */
	if (!group_fetch_inputs(g, o))
		return false;
	/* the slices of this output */
	if (!group_slices_table(g, o, &n))
		return false;
	if (n == 0)
		return true;			/* no rows fall in this output */

	/* the rewrite */
	if (split)
		snprintf(local_out, sizeof(local_out), "%s/sorted.parquet", g->dir);
	else
		snprintf(local_out, sizeof(local_out), "%s/out%d.parquet", g->dir, o);
	if (g->job->positions_output && g->job->dv_output)
		group_dv_positions_sql(g, o);
	else if (g->job->positions_output)
		group_positions_sql(g, o, local_out);
	else if (!group_count_older(g, o))
		return false;
	else
		group_copy_sql(g, o, local_out, split);
	if (g->q.oom)
	{
		tms_error_set(g->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	if (!helper_run(g->h, g->q.data, &r, g->err))
		return false;
	written = duckdb_value_int64(&r, 0, 0);
	duckdb_destroy_result(&r);
	/* a row delta's positions are the rows it removes */
	if (g->job->positions_output)
		g->rows_filtered += written;

	/* inputs no later output reads */
	group_release_inputs(g, o);
	if (g->job->positions_output && g->job->dv_output)
		return true;			/* deletion vectors: written after the reads */

	if (written == 0)
	{
		unlink(local_out);		/* every row of the slice was deleted */
		return true;
	}
	if (split)
		return group_split_sorted(g, local_out, written);
	return group_publish_output(g, o, local_out, written);
}

/*
 * Drop the group's delete tables, remove its local files and directory and
 * free its state.
 */
static void
group_cleanup(GroupRun *g)
{
	const IcebergCompactJob *job = g->job;
	int			i,
				j,
				o;
	TmsError	ignored;		/* not to overwrite the group's error */

	(void) helper_run(g->h, "DROP TABLE IF EXISTS pos", NULL, &ignored);
	(void) helper_run(g->h, "DROP TABLE IF EXISTS posl", NULL, &ignored);
	(void) helper_run(g->h, "DROP TABLE IF EXISTS keep", NULL, &ignored);
	(void) helper_run(g->h, "DROP TABLE IF EXISTS dvnew", NULL, &ignored);
	for (j = 0; j < g->neq_sets; j++)
	{
		char		drop[64];

		snprintf(drop, sizeof(drop), "DROP TABLE IF EXISTS eq%d", j);
		(void) helper_run(g->h, drop, NULL, &ignored);
		snprintf(drop, sizeof(drop), "DROP TABLE IF EXISTS eqm%d", j);
		(void) helper_run(g->h, drop, NULL, &ignored);
	}
	for (i = 0; i < job->ninputs; i++)
		if (g->have && g->have[i])
		{
			snprintf(g->path, sizeof(g->path), "%s/in%d.parquet", g->dir, i);
			unlink(g->path);
		}
	for (i = 0; i < job->ndeletes; i++)
	{
		snprintf(g->path, sizeof(g->path), "%s/del%d.parquet", g->dir, i);
		unlink(g->path);
		snprintf(g->path, sizeof(g->path), "%s/del%d.csv", g->dir, i);
		unlink(g->path);
	}
	for (o = 0; o < job->files; o++)
	{
		snprintf(g->path, sizeof(g->path), "%s/out%d.parquet", g->dir, o);
		unlink(g->path);
	}
	snprintf(g->path, sizeof(g->path), "%s/sorted.parquet", g->dir);
	unlink(g->path);
	rmdir(g->dir);
	io_sb_free(&g->q);
	free(g->offset);
	free(g->first_out);
	free(g->last_out);
	free(g->have);
	for (i = 0; i < job->ninputs; i++)
	{
		if (g->proj)
			io_free(g->proj[i]);
		if (g->sig)
			io_free(g->sig[i]);
	}
	free(g->proj);
	free(g->sig);
	free(g->eq_sets);
	free(g->eq_nids);
}

bool
helper_rewrite_group(Helper *h, const IcebergCompactJob *job, TmsError *err)
{
	const IcebergSchema *s = job->schema;
	GroupRun	g;
	IcebergCompactJob pos_job;	/* a row delta's outputs */
	IcebergSchema *pos_schema = NULL;
	const char *cc = codec(job->compression);
	int			i,
				o;
	bool		ok = false;

	/* v3: position deletes into deletion vectors (dv_rewrite.c) */
	if (job->dv_output && !job->positions_output)
		return helper_rewrite_dvs(h, job, err);
	if (cc == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "compression codec \"%s\" is not supported", job->compression);
		return false;
	}
	for (i = 0; i < s->ncolumns; i++)
	{
		Sql			tq = {0};
		bool		known = duck_type_sql(&tq, &s->columns[i]);

		io_sb_free(&tq);
		if (!known)
		{
			tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
						  "column \"%s\" of type %s cannot be rewritten",
						  s->columns[i].name, s->columns[i].type_text);
			return false;
		}
	}
	memset(&g, 0, sizeof(g));
	g.h = h;
	g.job = job;
	g.out = job;
	g.cc = cc;
	g.err = err;
	if (job->positions_output)
	{
		/* the rows are read in the table's schema, written as positions */
		if (!iceberg_schema_parse(compact_posdel_schema_json, &pos_schema, err))
			return false;
		pos_job = *job;
		pos_job.schema = pos_schema;
		pos_job.schema_json = (char *) compact_posdel_schema_json;
		pos_job.row_lineage = false;
		g.out = &pos_job;
	}
	snprintf(g.dir, sizeof(g.dir), "%s/g%d", h->temp_directory, job->group);
	if (mkdir(g.dir, 0700) != 0 && errno != EEXIST)
	{
		tms_error_set(err, ICEBERG_ERR_IO, "cannot create \"%.300s\": %s", g.dir, strerror(errno));
		return false;
	}
	g.offset = calloc((size_t) job->ninputs + 1, sizeof(int64_t));
	g.first_out = calloc((size_t) job->ninputs + 1, sizeof(int));
	g.last_out = calloc((size_t) job->ninputs + 1, sizeof(int));
	g.have = calloc((size_t) job->ninputs + 1, sizeof(bool));
	g.proj = calloc((size_t) job->ninputs + 1, sizeof(char *));
	g.sig = calloc((size_t) job->ninputs + 1, sizeof(char *));
	g.eq_sets = calloc((size_t) job->ndeletes + 1, sizeof(int32_t *));
	g.eq_nids = calloc((size_t) job->ndeletes + 1, sizeof(int));
	if (!g.offset || !g.first_out || !g.last_out || !g.have || !g.proj || !g.sig ||
		!g.eq_sets || !g.eq_nids)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		goto done;
	}
	g.nparts = job->sort != NULL ? 1 : job->files;
	group_place_inputs(&g);

	/*
	 * the delete files, once: position deletes of the group's files, equality
	 * deletes by column set
	 */
	if (!group_delete_tables(&g))
		goto done;

	/* a row delta on v3: the positions gathered, then its deletion vectors */
	if (job->positions_output && job->dv_output &&
		!helper_run(h, "CREATE OR REPLACE TEMP TABLE dvnew (file_path VARCHAR, pos BIGINT)",
					NULL, err))
		goto done;

	/* the outputs (a sort reads the group once) */
	for (o = 0; o < g.nparts; o++)
		if (!group_write_output(&g, o))
			goto done;
	if (job->positions_output && job->dv_output)
	{
		ok = helper_row_delta_dvs(h, job, g.has_pos, g.rows_in, g.rows_filtered, g.bytes_in, err);
		goto done;
	}
	/* a row delta deletes the rows it writes the positions of */
	helper_send(iceberg_compact_done_json(job->group, g.files_written, g.rows_in,
										  job->positions_output ? g.rows_out :
										  g.rows_in - g.rows_out, g.rows_out, g.bytes_in,
										  helper_peak_rss(), helper_in_flight(job->group),
										  g.rows_filtered));
	ok = true;
done:
	group_cleanup(&g);
	iceberg_schema_free(pos_schema);
	return ok;
}
