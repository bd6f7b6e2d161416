/*-------------------------------------------------------------------------
 *
 * compact_dv.c
 *	  Deletion vectors written by the rewrite of position deletes on format
 *	  v3 tables (posdel.h): the helper's report of the blobs of the Puffin
 *	  file it wrote, the fields of their manifest entries, the key of a
 *	  deletion vector among the files of a plan, the commit's check that
 *	  no delete of their data files was added since the plan, the
 *	  deletes a row delta's deletion vectors replace, and the free of an
 *	  output.
 *
 * A deletion vector is a blob of a Puffin file, found by the file's path
 * and its content_offset: several deletion vectors share one Puffin file,
 * so a plan's file that is a deletion vector is keyed by both
 * (compact_dv_key).  Its manifest entry
 * (https://iceberg.apache.org/spec/#deletion-vectors) is a position delete
 * (content 1) of file_format PUFFIN whose referenced_data_file is the one
 * data file it deletes rows of, content_offset and content_size_in_bytes
 * the blob's place, record_count its cardinality and file_size_in_bytes
 * the Puffin file's size.
 *
 * Rules of this file: plain C, errors as TmsError values, every
 * allocation freed on every path; the helper's report is untrusted: every
 * field checked for type and range.
 *
 * src/iceberg/compact/compact_dv.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"
#include "iceberg/iceberg_internal.h"
#include "iceberg/write/write_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define MAX_DVS			10000000
#define MAX_DV_PATH		4096

void
iceberg_compact_output_free(IcebergCompactOutput *o)
{
	int			i;

	if (o == NULL)
		return;
	io_free(o->path);
	for (i = 0; i < o->nmetrics; i++)
	{
		io_free(o->metrics[i].lower);
		io_free(o->metrics[i].upper);
	}
	io_free(o->metrics);
	io_free(o->split_offsets);
	for (i = 0; i < o->ndvs; i++)
		io_free(o->dvs[i].referenced);
	io_free(o->dvs);
	memset(o, 0, sizeof(*o));
}

struct json_t *
compact_dvs_json(const IcebergCompactOutput *f)
{
	json_t	   *a = json_array();
	int			i;

	for (i = 0; a != NULL && i < f->ndvs; i++)
	{
		const IcebergCompactDv *d = &f->dvs[i];

		if (json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I}", "referenced", d->referenced,
											   "offset", (json_int_t) d->offset,
											   "length", (json_int_t) d->length,
											   "records", (json_int_t) d->records)) != 0)
		{
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* A non-negative integer member of o, or -1. */
static int64_t
member(json_t *o, const char *key)
{
	json_t	   *v = json_object_get(o, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t) json_integer_value(v) : -1;
}

bool
compact_dvs_parse(struct json_t *a, IcebergCompactOutput *f, TmsError *err)
{
	size_t		i;

	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MAX_DVS)
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: dvs");
		return false;
	}
	f->dvs = io_calloc(json_array_size(a) + 1, sizeof(IcebergCompactDv));
	if (f->dvs == NULL)
		return compact_oom(err);
	for (i = 0; i < json_array_size(a); i++)
	{
		json_t	   *o = json_array_get(a, i);
		const char *ref = json_string_value(json_object_get(o, "referenced"));
		IcebergCompactDv *d = &f->dvs[f->ndvs];

		d->offset = member(o, "offset");
		d->length = member(o, "length");
		d->records = member(o, "records");
		/* a blob inside the file, after its 4-byte magic */
		if (ref == NULL || ref[0] == '\0' || strlen(ref) > MAX_DV_PATH || d->offset < 4 ||
			d->length <= 0 || d->records <= 0 || d->offset > f->size - d->length)
		{
			tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid compaction message: dvs");
			return false;
		}
		d->referenced = io_strdup(ref);
		if (d->referenced == NULL)
			return compact_oom(err);
		f->ndvs++;
	}
	return true;
}

const char *
compact_dv_key(const char *path, int64_t offset, char *buf, size_t n)
{
	int			len;

	if (offset < 0)
		return path;
	len = snprintf(buf, n, "%s\n%" PRId64, path, offset);
	return len >= 0 && (size_t) len < n ? buf : NULL;
}

int
compact_dv_fields(IcebergAvroWField *df, const IcebergCompactDv *dv)
{
	memset(df, 0, sizeof(*df) * 3);
	df[0].field_id = 143;
	df[0].name = "referenced_data_file";
	df[0].v.kind = AVW_STRING;
	df[0].v.p = dv->referenced;
	df[0].v.len = strlen(dv->referenced);
	df[1].field_id = 144;
	df[1].name = "content_offset";
	df[1].v.kind = AVW_LONG;
	df[1].v.l = dv->offset;
	df[2].field_id = 145;
	df[2].name = "content_size_in_bytes";
	df[2].v.kind = AVW_LONG;
	df[2].v.l = dv->length;
	return 3;
}

/*
 * The commit's check of a v3 rewrite: every deletion vector written is for
 * a data file its group keeps (the helper is not trusted: else
 * ICEBERG_ERR_MALFORMED); no delete naming a data file the
 * outputs write a deletion vector for was added since the plan (a
 * deletion vector or a position delete file with that
 * referenced_data_file, not one of the groups' files).  The new deletion
 * vector would be a second one for that data file, which the spec forbids
 * (https://iceberg.apache.org/spec/#deletion-vectors), and would not hold
 * the added deletes: ICEBERG_ERR_CONFLICT, as Iceberg's
 * validateNoNewDeletesForDataFiles.
 */
bool
compact_dv_check_added(const IcebergFileIO *io, const IcebergTableMetadata *md,
					   const IcebergSnapshot *snap, const IcebergCompactPlan *p,
					   const IcebergCompactGroupOutput *groups, int ngroups, TmsError *err)
{
	StrMap		refs = {0};
	StrMap		mine = {0};
	StrMap		kept = {0};
	ListRec    *recs = NULL;
	int			nrecs = 0,
				i,
				j,
				k;
	char		kb[COMPACT_DV_KEY_MAX];
	bool		ok = false;

	for (j = 0; j < ngroups; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[groups[j].group];

		iceberg_strmap_free(&kept);
		for (i = 0; i < gr->nkeep; i++)
			if (!compact_map_put(&kept, gr->keep[i].path, 1))
				goto nomem;
		for (i = gr->first; i < gr->first + gr->nfiles; i++)
			if (!compact_map_put(&mine, p->files[i].dv_key ? p->files[i].dv_key : p->files[i].path, 1))
				goto nomem;
		for (i = 0; i < groups[j].noutputs; i++)
			for (k = 0; k < groups[j].outputs[i].ndvs; k++)
			{
				const char *ref = groups[j].outputs[i].dvs[k].referenced;

				if (compact_map_get(&kept, ref) < 0)
				{
					tms_error_set(err, ICEBERG_ERR_MALFORMED,
								  "the helper wrote a deletion vector for a data file outside its group");
					tms_error_detail(err, "\"%.1000s\"", ref);
					goto done;
				}
				if (!compact_map_put(&refs, ref, 1))
					goto nomem;
			}
	}
	if (refs.count == 0)
	{
		ok = true;
		goto done;
	}
	if (!compact_read_list(io, md, snap, &recs, &nrecs, err))
		goto done;
	for (i = 0; i < nrecs; i++)
	{
		IcebergManifestReader *r;
		const IcebergManifestEntry *e;
		int			rc = 0;
		bool		added = false;

		if (recs[i].mf.content != ICEBERG_MANIFEST_CONTENT_DELETES)
			continue;
		if (iceberg_check_interrupt(io, err) ||
			!iceberg_manifest_open(io, &recs[i].mf, md->format_version, 0, &r, err))
			goto done;
		while (!added && (rc = iceberg_manifest_next(r, &e, err)) == 1)
		{
			const char *key = compact_dv_key(e->file_path, e->content_offset, kb, sizeof(kb));

			added = e->status != ICEBERG_STATUS_DELETED &&
				e->content == ICEBERG_CONTENT_POSITION_DELETES &&
				e->referenced_data_file != NULL &&
				compact_map_get(&refs, e->referenced_data_file) >= 0 &&
				(key == NULL || compact_map_get(&mine, key) < 0);
			if (added)
			{
				tms_error_set(err, ICEBERG_ERR_CONFLICT,
							  "a delete of a data file the rewrite writes a deletion vector for was added since the plan");
				tms_error_detail(err, "\"%s\" deletes rows of \"%s\".", e->file_path,
								 e->referenced_data_file);
			}
		}
		iceberg_manifest_close(r);
		if (added || rc < 0)
			goto done;
	}
	ok = true;
	goto done;
nomem:
	compact_oom(err);
done:
	compact_free_recs(recs, nrecs);
	iceberg_strmap_free(&refs);
	iceberg_strmap_free(&mine);
	iceberg_strmap_free(&kept);
	return ok;
}

/*
 * A row delta on v3 (compact_commit.c): the deletes its deletion vectors
 * replace, into (*rm, *nrm) as indexes into plan->deletes.  Each deletion vector written must
 * be for a data file of its group (the helper is not trusted: else
 * ICEBERG_ERR_MALFORMED); it holds every position the deletes of that
 * data file delete, so the data file's old deletion vector, and a
 * position delete file of that data file alone (its referenced_data_file,
 * left from before an upgrade to v3), are removed in the same commit, as
 * Iceberg's RowDelta removes the deletes a deletion vector merged (one
 * per data file: https://iceberg.apache.org/spec/#deletion-vectors).  A
 * position delete file of the whole partition stays (it deletes rows of
 * other files too); readers ignore it for a data file with a deletion
 * vector.
 */
bool
compact_dv_replaced(const IcebergCompactPlan *p, const IcebergCompactGroupOutput *gs, int ngs,
					int **rm, int *nrm, TmsError *err)
{
	StrMap		files = {0};
	bool	   *taken = io_calloc((size_t) p->ndeletes + 1, sizeof(bool));
	int			alloc = 0;
	bool		ok = false;

	*rm = NULL;
	*nrm = 0;
	if (taken == NULL)
		return compact_oom(err);
	for (int j = 0; j < ngs; j++)
	{
		const IcebergCompactGroup *gr = &p->groups[gs[j].group];

		iceberg_strmap_free(&files);
		for (int i = gr->first; i < gr->first + gr->nfiles; i++)
			if (!compact_map_put(&files, p->files[i].path, i))
				goto nomem;
		for (int o = 0; o < gs[j].noutputs; o++)
			for (int k = 0; k < gs[j].outputs[o].ndvs; k++)
			{
				const char *ref = gs[j].outputs[o].dvs[k].referenced;
				int			fi = compact_map_get(&files, ref);
				const IcebergCompactFile *f;

				if (fi < 0)
				{
					tms_error_set(err, ICEBERG_ERR_MALFORMED,
								  "the helper wrote a deletion vector for a data file outside its group");
					tms_error_detail(err, "\"%.1000s\"", ref);
					goto done;
				}
				f = &p->files[fi];
				for (int x = 0; x < f->ndeletes; x++)
				{
					int			di = f->deletes[x];
					const IcebergCompactDelete *d = &p->deletes[di];

					if (taken[di] || d->content != ICEBERG_CONTENT_POSITION_DELETES ||
						d->referenced == NULL || strcmp(d->referenced, f->path) != 0)
						continue;
					if (*nrm == alloc)
					{
						int			na = alloc ? alloc * 2 : 16;
						int		   *nr = io_realloc(*rm, sizeof(int) * (size_t) na);

						if (nr == NULL)
							goto nomem;
						*rm = nr;
						alloc = na;
					}
					(*rm)[(*nrm)++] = di;
					taken[di] = true;
				}
			}
	}
	ok = true;
	goto done;
nomem:
	compact_oom(err);
done:
	if (!ok)
	{
		io_free(*rm);
		*rm = NULL;
		*nrm = 0;
	}
	io_free(taken);
	iceberg_strmap_free(&files);
	return ok;
}
