/*-------------------------------------------------------------------------
 *
 * dv_rewrite.c
 *	  The rewrite of position deletes on a format v3 table by the
 *	  compaction helper (job->dv_output): a group's position delete files
 *	  and deletion vectors become one deletion vector per data file, all in
 *	  one Puffin file, as Iceberg's rewrite_position_delete_files does on v3;
 *	  and the reading of one deletion vector's blob (helper_dv_to_csv).
 *
 * The spec (https://iceberg.apache.org/spec/#deletion-vectors): at most one
 * deletion vector per data file in a snapshot, and a writer that adds one
 * merges the position deletes of that data file into it.  So:
 *	 - each Parquet input (a position delete file) is downloaded and its
 *	   rows (file_path, pos, read by field id) go into the table "dvpos"
 *	   with the file's sequence number; its row count must be its
 *	   manifest's;
 *	 - each deletion vector input is read from its Puffin file (its blob
 *	   at offset, length bytes), decoded (dv.c: checked, exactly its
 *	   manifest's record_count of positions) and its positions go into
 *	   "dvpos" for its one data file;
 *	 - a row is kept only when its file_path is a kept data file (the
 *	   table "keep": live, of the group's partition) whose data sequence
 *	   number is not above the row's delete (posdel.h: the others are
 *	   dangling); the positions of a data file are a set (a row deleted
 *	   twice is deleted once);
 *	 - the rows, ordered by data file and position, are encoded one data
 *	   file at a time (dv.c) and appended after the Puffin magic; the
 *	   footer names each blob's data file and cardinality; the file is
 *	   uploaded as <dir><prefix>-00000.puffin and announced as one file
 *	   message whose "dvs" give each blob's data file, offset, length and
 *	   cardinality (none when no row is kept).
 * The done message counts rows as the other rewrites do: rows_in the
 * inputs' rows, rows_out the positions written, rows_deleted the
 * difference (dangling rows and rows deleted twice).
 *
 * A row delta on v3 (retention's and tms.delete_rows' "delete-files",
 * rewrite_group.c) writes its deletion vectors with the same encoder and
 * Puffin writer (helper_row_delta_dvs): its query gives each data file's new
 * positions with the positions the group's deletes already delete in it,
 * so the one deletion vector of that data file holds them all.
 *
 * Memory: the Puffin file is built in memory (deletion vectors are
 * compressed bitmaps) with one data file's positions at a time; the rows
 * themselves are DuckDB's, under its memory limit.
 *
 * src/compactor/dv_rewrite.c
 *
 *-------------------------------------------------------------------------
 */
#include "compactor/compactor_int.h"
#include "iceberg/table/dv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DV_PATH_ID		2147483546
#define DV_POS_ID		2147483545

/* Set errors return -1 (io_error.h): false for the bool functions here. */
static bool
no(int rc)
{
	(void) rc;
	return false;
}

/* One rewrite: its helper, job, local directory and what it wrote. */
typedef struct DvRun
{
	Helper	   *h;
	const IcebergCompactJob *job;
	TmsError   *err;
	char		dir[4200];
	char		path[4400];
	Sql			q;
	int64_t		rows_in;
	int64_t		rows_out;
	int64_t		bytes_in;
	/* the Puffin file being built */
	IoStrBuf	file;
	IcebergDvBlobRef *blobs;
	int			nblobs;
	int			blobs_alloc;
	/* the positions of the data file being read */
	int64_t    *pos;
	int64_t		npos;
	int64_t		pos_alloc;
} DvRun;

/* The table "keep": the data files rows may point at, with their seqs. */
static bool
dv_keep_table(DvRun *r)
{
	const IcebergCompactJob *job = r->job;
	int			i,
				k;

	if (!helper_run(r->h, "CREATE OR REPLACE TEMP TABLE keep (path VARCHAR PRIMARY KEY, seq BIGINT)",
					NULL, r->err))
		return false;
	for (i = 0; i < job->nkeep; i += 1000)
	{
		sql_reset(&r->q);
		sql_add(&r->q, "INSERT INTO keep VALUES ");
		for (k = i; k < job->nkeep && k < i + 1000; k++)
		{
			sql_add(&r->q, "%s(", k > i ? ", " : "");
			sql_lit(&r->q, job->keep[k].path);
			sql_add(&r->q, ", %" PRId64 ")", job->keep[k].seq);
		}
		if (r->q.oom || !helper_run(r->h, r->q.data, NULL, r->err))
			return r->q.oom ? no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory")) : false;
	}
	return true;
}

/* The inserted row count of an INSERT run with res: must be want. */
static bool
dv_check_rows(DvRun *r, duckdb_result *res, int64_t want, const char *what)
{
	int64_t		n = duckdb_value_int64(res, 0, 0);

	duckdb_destroy_result(res);
	if (n == want)
		return true;
	tms_error_set(r->err, ICEBERG_ERR_MALFORMED,
				  "a position delete of the group holds %" PRId64 " rows, its manifest says %" PRId64,
				  n, want);
	tms_error_detail(r->err, "%.1000s", what);
	return false;
}

/* Position delete file i: its rows into dvpos. */
static bool
dv_read_file(DvRun *r, int i)
{
	const IcebergCompactJobInput *in = &r->job->inputs[i];
	duckdb_result res;

	snprintf(r->path, sizeof(r->path), "%s/in%d.parquet", r->dir, i);
	if (!helper_download(r->h, in->uri, r->path, r->err))
		return false;
	sql_reset(&r->q);
	sql_add(&r->q, "INSERT INTO dvpos SELECT c%d, c%d, %" PRId64 "::BIGINT FROM read_parquet(",
			DV_PATH_ID, DV_POS_ID, in->seq);
	sql_lit(&r->q, r->path);
	sql_add(&r->q, ", schema = MAP {%d: {name: 'c%d', type: 'VARCHAR', default_value: NULL},"
			" %d: {name: 'c%d', type: 'BIGINT', default_value: NULL}})",
			DV_PATH_ID, DV_PATH_ID, DV_POS_ID, DV_POS_ID);
	if (r->q.oom)
		return no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
	if (!helper_run(r->h, r->q.data, &res, r->err))
		return false;
	unlink(r->path);
	return dv_check_rows(r, &res, in->records, in->uri);
}

/* Deletion vector i: its blob decoded, its positions into dvpos. */
static bool
dv_read_vector(DvRun *r, int i)
{
	const IcebergCompactJobInput *in = &r->job->inputs[i];
	duckdb_result res;
	bool		ok;

	snprintf(r->path, sizeof(r->path), "%s/dv%d.csv", r->dir, i);
	if (!helper_dv_to_csv(r->h, in->uri, in->dv_offset, in->dv_length, in->dv_referenced,
						  in->records, in->records, r->path, r->err))
		return false;
	sql_reset(&r->q);
	sql_add(&r->q, "INSERT INTO dvpos SELECT ");
	sql_lit(&r->q, in->dv_referenced);
	sql_add(&r->q, ", column0, %" PRId64 "::BIGINT FROM read_csv(", in->seq);
	sql_lit(&r->q, r->path);
	sql_add(&r->q, ", header = false, columns = {'column0': 'BIGINT'})");
	if (r->q.oom)
		return no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
	ok = helper_run(r->h, r->q.data, &res, r->err);
	unlink(r->path);
	return ok && dv_check_rows(r, &res, in->records, in->uri);
}

/* The positions gathered for data file ref: one blob of the Puffin file. */
static bool
dv_flush(DvRun *r, const char *ref)
{
	uint8_t    *blob = NULL;
	size_t		len = 0;
	IcebergDvBlobRef *b;

	if (r->npos == 0)
		return true;
	if (r->nblobs == r->blobs_alloc)
	{
		int			na = r->blobs_alloc ? r->blobs_alloc * 2 : 64;
		IcebergDvBlobRef *nb = io_realloc(r->blobs, sizeof(*nb) * (size_t) na);

		if (nb == NULL)
			return no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
		r->blobs = nb;
		r->blobs_alloc = na;
	}
	if (!iceberg_dv_encode(r->pos, r->npos, &blob, &len, r->err))
		return false;
	b = &r->blobs[r->nblobs];
	b->referenced = io_strdup(ref);
	b->offset = (int64_t) r->file.len;
	b->length = (int64_t) len;
	b->cardinality = r->npos;
	io_sb_append(&r->file, (const char *) blob, len);
	io_free(blob);
	if (b->referenced == NULL || r->file.oom)
	{
		io_free((char *) b->referenced);
		return no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
	}
	r->nblobs++;
	r->rows_out += r->npos;
	r->npos = 0;
	return true;
}

/*
 * The rows of select (file_path, pos: distinct, ordered by both), one
 * data file at a time, into the Puffin file's blobs.
 */
static bool
dv_encode_all(DvRun *r, const char *select)
{
	duckdb_result res;
	idx_t		n,
				i;
	char	   *cur = NULL;
	bool		ok = true;

	if (!helper_run(r->h, select, &res, r->err))
		return false;
	n = duckdb_row_count(&res);
	for (i = 0; ok && i < n; i++)
	{
		char	   *fp = duckdb_value_varchar(&res, 0, i);
		int64_t		p = duckdb_value_int64(&res, 1, i);

		if (fp == NULL || p < 0)
		{
			duckdb_free(fp);
			ok = no(tms_error_set(r->err, ICEBERG_ERR_MALFORMED,
								  "a position delete without a file path or with a negative position"));
			break;
		}
		if (cur != NULL && strcmp(cur, fp) != 0)
			ok = dv_flush(r, cur);
		if (cur == NULL || strcmp(cur, fp) != 0)
		{
			duckdb_free(cur);
			cur = fp;
		}
		else
			duckdb_free(fp);
		if (ok && r->npos == r->pos_alloc)
		{
			int64_t		na = r->pos_alloc ? r->pos_alloc * 2 : 1024;
			int64_t    *np = io_realloc(r->pos, sizeof(int64_t) * (size_t) na);

			if (np == NULL)
				ok = no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
			else
			{
				r->pos = np;
				r->pos_alloc = na;
			}
		}
		if (ok)
			r->pos[r->npos++] = p;
	}
	if (ok && cur != NULL)
		ok = dv_flush(r, cur);
	duckdb_free(cur);
	duckdb_destroy_result(&res);
	return ok;
}

/* The Puffin file: its footer, uploaded, announced. */
static bool
dv_publish(DvRun *r)
{
	const IcebergCompactJob *job = r->job;
	IcebergCompactOutput out;
	uint8_t    *footer = NULL;
	size_t		flen = 0;
	TmsError	ioerr;
	char		uri[4400];
	int			i;
	bool		ok;

	if (r->nblobs == 0)
		return true;			/* every row was dangling */
	if (!iceberg_puffin_footer(r->blobs, r->nblobs, "tms", &footer, &flen, r->err))
		return false;
	io_sb_append(&r->file, (const char *) footer, flen);
	io_free(footer);
	if (r->file.oom)
		return no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
	memset(&out, 0, sizeof(out));
	if (snprintf(uri, sizeof(uri), "%s%s-00000.puffin", job->upload_dir, job->prefix) >=
		(int) sizeof(uri) ||
		snprintf(r->path, sizeof(r->path), "%s%s-00000.puffin", job->output_dir, job->prefix) >=
		(int) sizeof(r->path))
		return no(tms_error_set(r->err, ICEBERG_ERR_LIMIT, "the output file's path is too long"));
	if (io_storage_write(r->h->storage, uri, r->file.data, r->file.len, &ioerr) != 0)
		return no(tms_error_wrap(r->err, ICEBERG_ERR_IO, &ioerr, "cannot write \"%.400s\"", uri));
	out.path = io_strdup(r->path);
	out.size = (int64_t) r->file.len;
	out.records = r->rows_out;
	out.dvs = io_calloc((size_t) r->nblobs, sizeof(IcebergCompactDv));
	ok = out.path != NULL && out.dvs != NULL;
	for (i = 0; ok && i < r->nblobs; i++)
	{
		out.dvs[i].referenced = io_strdup(r->blobs[i].referenced);
		out.dvs[i].offset = r->blobs[i].offset;
		out.dvs[i].length = r->blobs[i].length;
		out.dvs[i].records = r->blobs[i].cardinality;
		ok = out.dvs[i].referenced != NULL;
		out.ndvs++;
	}
	if (ok)
		helper_send(iceberg_compact_file_json(job->group, &out));
	iceberg_compact_output_free(&out);
	return ok || no(tms_error_set(r->err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory"));
}

static void
dv_free(DvRun *r)
{
	for (int i = 0; i < r->nblobs; i++)
		io_free((char *) r->blobs[i].referenced);
	io_free(r->blobs);
	io_free(r->pos);
	io_sb_free(&r->file);
	io_sb_free(&r->q);
}

bool
helper_rewrite_dvs(Helper *h, const IcebergCompactJob *job, TmsError *err)
{
	DvRun		r;
	TmsError	ignored;		/* not to overwrite the group's error */
	int			i;
	bool		ok = false;

	memset(&r, 0, sizeof(r));
	r.h = h;
	r.job = job;
	r.err = err;
	snprintf(r.dir, sizeof(r.dir), "%s/g%d", h->temp_directory, job->group);
	if (mkdir(r.dir, 0700) != 0 && errno != EEXIST)
		return no(tms_error_set(err, ICEBERG_ERR_IO, "cannot create \"%.300s\": %s", r.dir,
								strerror(errno)));

	/*
	 * the Puffin file's magic
	 * (https://iceberg.apache.org/puffin-spec/#file-structure)
	 */
	io_sb_append(&r.file, "PFA1", 4);
	if (!dv_keep_table(&r) ||
		!helper_run(h, "CREATE OR REPLACE TEMP TABLE dvpos (file_path VARCHAR, pos BIGINT, seq BIGINT)",
					NULL, err))
		goto done;
	for (i = 0; i < job->ninputs; i++)
	{
		if (!(job->inputs[i].dv_offset >= 0 ? dv_read_vector(&r, i) : dv_read_file(&r, i)))
			goto done;
		r.rows_in += job->inputs[i].records;
		r.bytes_in += job->inputs[i].size;
		helper_progress(job->group, r.bytes_in);
	}
	if (!dv_encode_all(&r, "SELECT DISTINCT d.file_path, d.pos FROM dvpos d JOIN keep k"
					   " ON k.path = d.file_path AND k.seq <= d.seq ORDER BY 1, 2") ||
		!dv_publish(&r))
		goto done;
	helper_send(iceberg_compact_done_json(job->group, r.nblobs > 0 ? 1 : 0, r.rows_in,
										  r.rows_in - r.rows_out, r.rows_out, r.bytes_in,
										  helper_peak_rss(), helper_in_flight(job->group), 0));
	ok = true;
done:
	(void) helper_run(h, "DROP TABLE IF EXISTS dvpos", NULL, &ignored);
	(void) helper_run(h, "DROP TABLE IF EXISTS keep", NULL, &ignored);
	for (i = 0; i < job->ninputs; i++)
	{
		snprintf(r.path, sizeof(r.path), "%s/in%d.parquet", r.dir, i);
		unlink(r.path);
		snprintf(r.path, sizeof(r.path), "%s/dv%d.csv", r.dir, i);
		unlink(r.path);
	}
	rmdir(r.dir);
	dv_free(&r);
	return ok;
}

/*
 * See compactor_int.h: the deletion vectors of a row delta on v3, for each
 * data file with rows in "dvnew" one holding those and every position the
 * group's position deletes and deletion vectors already delete in it
 * ("posl", the sequence number rule applied), as the spec wants a writer
 * to merge them (https://iceberg.apache.org/spec/#deletion-vectors).
 */
bool
helper_row_delta_dvs(Helper *h, const IcebergCompactJob *job, bool has_pos, int64_t rows_in,
					 int64_t rows_filtered, int64_t bytes_in, TmsError *err)
{
	DvRun		r;
	bool		ok;

	memset(&r, 0, sizeof(r));
	r.h = h;
	r.job = job;
	r.err = err;
	io_sb_append(&r.file, "PFA1", 4);
	ok = dv_encode_all(&r, has_pos ?
					   "SELECT file_path, pos FROM dvnew UNION SELECT i.uri, p.pos FROM posl p"
					   " JOIN inputs i ON i.local = p.local"
					   " WHERE i.uri IN (SELECT file_path FROM dvnew) ORDER BY 1, 2" :
					   "SELECT DISTINCT file_path, pos FROM dvnew ORDER BY 1, 2") &&
		dv_publish(&r);
	if (ok)
		helper_send(iceberg_compact_done_json(job->group, r.nblobs > 0 ? 1 : 0, rows_in,
											  rows_filtered, r.rows_out, bytes_in,
											  helper_peak_rss(), helper_in_flight(job->group),
											  rows_filtered));
	dv_free(&r);
	return ok;
}

/*
 * See compactor_int.h: a deletion vector's blob
 * (https://iceberg.apache.org/spec/#deletion-vectors) read from its Puffin
 * file, decoded (dv.c: checked, at most cap positions) and written as the
 * local text file path, one position a line.
 */
bool
helper_dv_to_csv(Helper *h, const char *uri, int64_t offset, int64_t length,
				 const char *referenced, int64_t records, int64_t cap,
				 const char *path, TmsError *err)
{
	IoBuffer	b = {0};
	TmsError	ioerr;
	int64_t    *pos = NULL;
	int64_t		npos = 0;
	FILE	   *f;
	bool		ok;

	if (io_storage_read(h->storage, uri, (uint64_t) offset, (uint64_t) length, &b, &ioerr) != 0)
	{
		tms_error_wrap(err, ICEBERG_ERR_IO, &ioerr, "cannot read \"%.400s\"", uri);
		return false;
	}
	if ((int64_t) b.len != length)
	{
		io_buffer_free(&b);
		tms_error_set(err, ICEBERG_ERR_MALFORMED,
					  "deletion vector of \"%.400s\" ends beyond its Puffin file", referenced);
		tms_error_detail(err, "%.1000s", uri);
		return false;
	}
	ok = iceberg_dv_decode((const uint8_t *) b.data, b.len, records, cap, &pos, &npos, err);
	io_buffer_free(&b);
	if (!ok)
	{
		tms_error_detail(err, "The deletion vector of \"%.400s\" in \"%.400s\".",
						 referenced, uri);
		return false;
	}
	f = fopen(path, "we");
	ok = f != NULL;
	for (int64_t k = 0; ok && k < npos; k++)
		ok = fprintf(f, "%" PRId64 "\n", pos[k]) > 0;
	if (f != NULL && fclose(f) != 0)
		ok = false;
	io_free(pos);
	if (!ok)
		tms_error_set(err, ICEBERG_ERR_IO, "cannot write \"%.300s\": %s", path,
					  strerror(errno));
	return ok;
}
