/*-------------------------------------------------------------------------
 *
 * compact_summary.c
 *	  The snapshot summary of a commit of compact_commit.c (a compaction's
 *	  "replace", a retention's "overwrite" or "delete", a row delta's
 *	  "delete", a rewrite of position deletes): Iceberg's SnapshotSummary
 *	  names, the data file counts only for a commit that rewrites data
 *	  files, the delete file counts when non-zero (deletion vectors
 *	  counted apart: added-dvs, removed-dvs), and the totals carried from
 *	  the parent's summary when it has them
 *	  (https://iceberg.apache.org/spec/#optional-snapshot-summary-fields).
 *
 * Rules of this file: plain C, errors as TmsError values.
 *
 * src/iceberg/compact/compact_summary.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/compact.h"
#include "iceberg/compact/compact_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
compact_fill_summary(IcebergNewSnapshot *s, const IcebergCompactCommit *r,
					 const CompactSummaryCounts *c, bool data, int64_t changed_partitions,
					 const IcebergSnapshot *parent, TmsError *err)
{
	char		num[32];
	int			i;
	struct
	{
		const char *key;
		int64_t		v;
		bool		always;
	}			k[] = {
		{"added-data-files", r->data_files_added, data},
		{"deleted-data-files", r->data_files_rewritten, data},
		{"added-records", r->records_added, data},
		{"deleted-records", r->records_rewritten, data},
		{"added-delete-files", r->delete_files_added, false},
		/* deletion vectors are counted apart, as Iceberg's SnapshotSummary */
		{"added-position-delete-files", r->delete_files_added - c->added_dvs, false},
		{"added-dvs", c->added_dvs, false},
		{"added-position-deletes", r->delete_records_added, false},
		{"added-files-size", r->bytes_added, true},
		{"removed-files-size", r->bytes_rewritten + c->removed_delete_bytes, true},
		{"removed-delete-files", c->removed_pos_files + c->removed_eq_files, false},
		{"removed-position-delete-files", c->removed_pos_files - c->removed_dvs, false},
		{"removed-dvs", c->removed_dvs, false},
		{"removed-equality-delete-files", c->removed_eq_files, false},
		{"removed-position-deletes", c->removed_pos_records, false},
		{"removed-equality-deletes", c->removed_eq_records, false},
		{"changed-partition-count", changed_partitions, true},
	};
	struct
	{
		const char *key;
		int64_t		delta;
	}			t[] = {
		{"total-data-files", r->data_files_added - r->data_files_rewritten},
		{"total-records", r->records_added - r->records_rewritten},
		{"total-files-size", r->bytes_added - r->bytes_rewritten - c->removed_delete_bytes},
		{"total-delete-files", r->delete_files_added - (c->removed_pos_files + c->removed_eq_files)},
		{"total-position-deletes", r->delete_records_added - c->removed_pos_records},
		{"total-equality-deletes", -c->removed_eq_records},
	};
	int			nk = (int) (sizeof(k) / sizeof(k[0]));
	int			nt = (int) (sizeof(t) / sizeof(t[0]));

	s->summary = io_calloc((size_t) (nk + nt + 1), sizeof(IcebergKeyValue));
	if (s->summary == NULL)
		return compact_oom(err);
	for (i = 0; i < nk; i++)
	{
		if (!k[i].always && k[i].v == 0)
			continue;
		snprintf(num, sizeof(num), "%" PRId64, k[i].v);
		if (!iceberg_kv_set(s->summary, &s->nsummary, k[i].key, num, true, err))
			return false;
	}
	for (i = 0; i < nt; i++)
	{
		int			j;

		for (j = 0; j < parent->nsummary; j++)
		{
			char	   *end;
			long long	v;

			if (strcmp(parent->summary[j].key, t[i].key) != 0 || parent->summary[j].value == NULL)
				continue;
			v = strtoll(parent->summary[j].value, &end, 10);
			if (*end != '\0' || end == parent->summary[j].value)
				continue;
			snprintf(num, sizeof(num), "%lld", v + (long long) t[i].delta);
			if (!iceberg_kv_set(s->summary, &s->nsummary, t[i].key, num, true, err))
				return false;
		}
	}
	return true;
}
