/*-------------------------------------------------------------------------
 *
 * fuzz_iceberg.c
 *	  libFuzzer target for the Iceberg model layer's parsers.
 *
 * The first input byte selects the parser, the rest is the file:
 *	0: metadata.json (plain or gzip), via iceberg_metadata_parse, then its
 *	   metadata-level metrics at the extremes of the clock (ages must
 *	   saturate, never overflow); and via iceberg_metadata_identity, which
 *	   must accept what the full parse accepts, with the same identity;
 *	1: a manifest list (Avro), read to the end;
 *	2: a manifest (Avro), read to the end with partition rendering and
 *	   its column metrics (null counts, bounds) looked up;
 *	3: both Avro readers on the same bytes (cheap cross-check of limits).
 * Small limits make the cap paths reachable.  Every error must be a value:
 * ASan/UBSan and the leak checker do the rest.
 *
 * Build: make fuzz-iceberg, which compiles this file with every .c file of
 * src/iceberg and src/io (iceberg reads through io's IoFileIO) using clang
 * -fsanitize=fuzzer,address,undefined.
 * Seed corpus: test/fuzz/corpus/iceberg/ (fixture files with their selector).
 *
 * test/fuzz/fuzz_iceberg.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/iceberg.h"
#include "io/io.h"

/* Read a manifest list from the buffer to its end. */
static void
fuzz_list(const IcebergFileIO *io)
{
	IcebergManifestListReader *lr;
	const IcebergManifestFile *mf;
	TmsError	err;

	if (!iceberg_manifest_list_open_path(io, "fuzz", &lr, &err))
		return;
	while (iceberg_manifest_list_next(lr, &mf, &err) == 1)
	{
		/* touch the borrowed strings */
		if (strlen(mf->manifest_path) == (size_t) -1)
			abort();
	}
	iceberg_manifest_list_close(lr);
}

/* Read a manifest from the buffer to its end. */
static void
fuzz_manifest(const IcebergFileIO *io)
{
	IcebergManifestFile mf;
	IcebergManifestReader *mr;
	const IcebergManifestEntry *e;
	TmsError	err;

	memset(&mf, 0, sizeof(mf));
	mf.manifest_path = "fuzz";
	mf.partition_spec_id = -1;
	mf.sequence_number = 3;
	mf.added_snapshot_id = 7;
	if (!iceberg_manifest_open(io, &mf, 2, ICEBERG_READ_PARTITION | ICEBERG_READ_BOUNDS, &mr, &err))
		return;
	while (iceberg_manifest_next(mr, &e, &err) == 1)
	{
		int			i;
		long		sum = 0;

		if (strlen(e->file_path) + strlen(e->partition) + strlen(e->file_format) ==
			(size_t) -1)
			abort();
		for (i = 0; i < e->nequality_ids; i++)
			sum += e->equality_ids[i];
		if (e->referenced_data_file != NULL && strlen(e->referenced_data_file) == (size_t) -1)
			abort();
		for (int32_t id = 0; id < 4; id++)
		{
			int64_t		count;
			const uint8_t *val;
			size_t		vlen;

			if (iceberg_metric_count(e->null_value_counts, e->null_value_counts_len, id,
									 &count) == 1)
				sum += (long) count;
			if (iceberg_metric_bound(e->lower_bounds, e->lower_bounds_len, id, &val, &vlen) == 1)
				for (size_t k = 0; k < vlen; k++)
					sum += val[k];
			if (iceberg_metric_bound(e->upper_bounds, e->upper_bounds_len, id, &val, &vlen) == 1)
				for (size_t k = 0; k < vlen; k++)
					sum += val[k];
		}
		(void) sum;
	}
	iceberg_manifest_close(mr);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	IcebergLimits limits;
	IcebergMemoryFile mem;
	IcebergFileIO io;
	IcebergTableMetadata *md;
	TmsError	err;

	io_init();					/* idempotent; before any jansson use */
	if (size < 1)
		return 0;
	memset(&limits, 0, sizeof(limits));
	limits.max_metadata_bytes = 1 << 20;
	limits.max_header_bytes = 1 << 20;
	limits.max_block_bytes = 4 << 20;
	limits.max_block_items = 1 << 16;
	limits.max_string_bytes = 1 << 16;
	limits.max_collection_items = 1 << 16;
	mem.data = data + 1;
	mem.len = size - 1;
	iceberg_memory_fileio(&io, &mem);
	io.limits = &limits;

	switch (data[0] & 3)
	{
		case 0:
			{
				/*
				 * the identity scan: whatever the full parse accepts, it
				 * accepts, with the same identity
				 */
				IcebergTableIdentity id;
				bool		have_id = iceberg_metadata_identity(data + 1, size - 1, &limits,
																&id, &err);

				if (iceberg_metadata_parse(data + 1, size - 1, &limits, &md, &err))
				{
					static const int64_t nows[] = {INT64_MIN, -1, 0, INT64_MAX};
					IcebergTableMetrics m;
					const char *gc = iceberg_metadata_property(md, "gc.enabled");

					if (!have_id || id.format_version != md->format_version ||
						strcmp(id.location, md->location) != 0 ||
						(id.table_uuid == NULL) != (md->table_uuid == NULL) ||
						(id.table_uuid && strcmp(id.table_uuid, md->table_uuid) != 0) ||
						(id.gc_enabled == NULL) != (gc == NULL))
						abort();
					(void) iceberg_metadata_current_snapshot(md);
					(void) iceberg_metadata_ref(md, "main");
					for (size_t i = 0; i < sizeof(nows) / sizeof(nows[0]); i++)
						(void) iceberg_table_metrics(&io, md, ICEBERG_METRICS_METADATA,
													 nows[i], NULL, NULL, &m, &err);
					iceberg_metadata_free(md);
				}
				if (have_id)
					iceberg_table_identity_free(&id);
			}
			break;
		case 1:
			fuzz_list(&io);
			break;
		case 2:
			fuzz_manifest(&io);
			break;
		case 3:
			fuzz_list(&io);
			fuzz_manifest(&io);
			break;
	}
	return 0;
}
