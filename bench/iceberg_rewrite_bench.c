/*-------------------------------------------------------------------------
 *
 * iceberg_rewrite_bench.c
 *	  Manifest rewrite benchmark of src/iceberg (rewrite_manifests.c): the rewrite of
 *	  a table's manifests next to the decoder's own throughput on the same
 *	  bytes.
 *
 *	  decode DIR
 *		read every manifest of DIR/metadata/v1.metadata.json's current
 *		snapshot through the local FileIO, best of 3, (1) as the metrics
 *		read them (flags 0) and (2) as the rewrite reads them
 *		(ICEBERG_READ_PARTITION | ICEBERG_READ_RAW); entries/s, MB/s;
 *	  rewrite DIR [BUDGET_MB [TARGET_MB]]
 *		plan and execute a manifest rewrite of that table, writing the
 *		results beside it, timed; the written files are deleted after.
 *		Run it under /usr/bin/time -v for the peak RSS.
 *
 * The table is bench/iceberg_manifest_bench.c's (realistic data_file
 * records: paths, a day partition, 12 columns of statistics);
 * bench/iceberg_rewrite_bench.sh generates it and runs both modes.
 *
 * bench/iceberg_rewrite_bench.c
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iceberg/iceberg.h"
#include "iceberg/maint/rewrite_manifests.h"
#include "io/io.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
die(const char *what, const TmsError *err)
{
	fprintf(stderr, "%s: %s (%s)\n", what, err->message, err->detail);
	exit(1);
}

/* Plain local path of a metadata path. */
static const char *
local_path(const char *p)
{
	if (strncmp(p, "file://", 7) == 0)
		return p + 7;
	return p;
}

static int
local_write(void *arg, const char *path, const void *data, size_t len, TmsError *err)
{
	FILE	   *f = fopen(local_path(path), "wb");

	(void) arg;
	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0)
	{
		err->code = IO_ERR_STORAGE;
		snprintf(err->message, sizeof(err->message), "cannot write");
		return -1;
	}
	return 0;
}

/* One pass over every manifest with flags; entries and inflated bytes. */
static void
decode_pass(const IcebergFileIO *io, const IcebergTableMetadata *md, unsigned flags,
			int64_t *entries, int64_t *inflated)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	TmsError	err;
	int			rc;

	*entries = *inflated = 0;
	if (!iceberg_manifest_list_open(io, md, iceberg_metadata_current_snapshot(md), &lr, &err))
		die("list", &err);
	while ((rc = iceberg_manifest_list_next(lr, &mf, &err)) == 1)
	{
		IcebergManifestReader *r;
		const IcebergManifestEntry *e;
		IcebergManifestFile copy = *mf;
		int64_t		c,
					i;

		if (!iceberg_manifest_open(io, &copy, md->format_version, flags, &r, &err))
			die("manifest", &err);
		while ((rc = iceberg_manifest_next(r, &e, &err)) == 1)
			(*entries)++;
		if (rc < 0)
			die("entry", &err);
		iceberg_manifest_byte_counts(r, &c, &i);
		*inflated += i;
		iceberg_manifest_close(r);
	}
	if (rc < 0)
		die("list", &err);
	iceberg_manifest_list_close(lr);
}

int
main(int argc, char **argv)
{
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;
	char		mdpath[1024];

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s decode|rewrite DIR [BUDGET_MB [TARGET_MB]]\n", argv[0]);
		return 2;
	}
	io_init();
	iceberg_local_fileio(&io, NULL);
	snprintf(mdpath, sizeof(mdpath), "%s/metadata/v1.metadata.json", argv[2]);
	if (!iceberg_metadata_read(&io, mdpath, &md, &err))
		die("metadata", &err);

	if (strcmp(argv[1], "decode") == 0)
	{
		static const struct
		{
			const char *name;
			unsigned	flags;
		}			modes[] = {
			{"decode, flags 0 (metrics)", 0},
			{"decode, PARTITION|RAW (rewrite)", ICEBERG_READ_PARTITION | ICEBERG_READ_RAW},
		};
		size_t		m;

		printf("%-34s %9s %12s %14s\n", "reader", "seconds", "entries/s", "MB/s inflated");
		for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		{
			double		best = 1e9;
			int64_t		n = 0,
						infl = 0;
			int			k;

			for (k = 0; k < 3; k++)
			{
				double		t0 = now_s();

				decode_pass(&io, md, modes[m].flags, &n, &infl);
				if (now_s() - t0 < best)
					best = now_s() - t0;
			}
			printf("%-34s %9.3f %12.0f %14.1f\n", modes[m].name, best, n / best,
				   infl / best / 1e6);
		}
	}
	else if (strcmp(argv[1], "rewrite") == 0)
	{
		IcebergRewriteOptions opt;
		IcebergRewritePlan *plan;
		IcebergRewriteResult res;
		IcebergWriter w = {NULL, local_write};
		double		t0,
					t1,
					t2;
		int			i;
		int64_t		in_bytes = 0,
					out_bytes = 0;

		memset(&opt, 0, sizeof(opt));
		opt.spec_id = -1;
		opt.memory_budget_bytes = argc > 3 ? atoll(argv[3]) * 1024 * 1024 : 0;
		opt.target_size_bytes = argc > 4 ? atoll(argv[4]) * 1024 * 1024 : 0;
		t0 = now_s();
		if (!iceberg_rewrite_plan(&io, md, &opt, &plan, &err))
			die("plan", &err);
		t1 = now_s();
		if (!iceberg_rewrite_execute(&io, &w, md, plan, iceberg_new_snapshot_id(md), &res, &err))
			die("execute", &err);
		t2 = now_s();
		for (i = 0; i < plan->nmanifests; i++)
			if (plan->manifests[i].group >= 0)
				in_bytes += plan->manifests[i].length;
		for (i = 0; i < res.nwritten; i++)
		{
			FILE	   *f = fopen(local_path(res.written[i]), "rb");

			if (f != NULL)
			{
				fseek(f, 0, SEEK_END);
				out_bytes += ftell(f);
				fclose(f);
			}
			unlink(local_path(res.written[i]));
		}
		printf("rewrite: %d manifests (%.1f MB) -> %" PRId64 " manifests + list (%.1f MB), "
			   "%" PRId64 " entries, %" PRId64 " sorted chunks\n",
			   plan->nreplaced, in_bytes / 1e6, res.manifests_added, out_bytes / 1e6,
			   res.entries_rewritten, res.cluster_chunks);
		printf("rewrite: plan %.3f s, execute %.3f s, %.0f entries/s, peak clustering %.1f MB\n",
			   t1 - t0, t2 - t1, res.entries_rewritten / (t2 - t1),
			   res.cluster_peak_bytes / 1e6);
		iceberg_rewrite_result_free(&res);
		iceberg_rewrite_plan_free(plan);
	}
	iceberg_metadata_free(md);
	return 0;
}
