/*-------------------------------------------------------------------------
 *
 * iceberg_manifest_bench.c
 *	  Manifest decoding benchmark of src/iceberg: a generator for a
 *	  synthetic Iceberg v2 table and the C-side measurements.
 *
 *	  gen DIR FILES PER_MANIFEST [SCHEME]
 *		write DIR/metadata/{v1.metadata.json, snap-1.avro, m-N.avro}
 *		(the paths inside them prefixed with SCHEME, e.g. file://, for a
 *		catalog to serve the table; none by default): one
 *		snapshot whose manifests hold FILES data-file entries in total,
 *		deflate, Java-like 64 KB blocks, realistic paths, a day partition
 *		and column statistics for 12 columns (column_sizes, value_counts,
 *		null_value_counts, lower/upper bounds), full Iceberg field ids;
 *	  bench DIR
 *		read every manifest (from memory, after loading the files) with
 *		(1) this layer's decoder (the fields the metrics use), (2) the same
 *		decoder made to decode every field of every entry (data_file
 *		rendered whole as canonical JSON, as a partition is: column
 *		statistics maps, bounds, split offsets...), (3) avro-c's generic
 *		reader, which decodes every field into avro_value_t, fetching the
 *		same fields, (4) raw inflate alone of the same blocks (the physical
 *		limit of a deflate reader) with zlib, and with libdeflate and
 *		ISA-L when built with them (-DBENCH_LIBDEFLATE, -DBENCH_ISAL), and
 *		print entries/s and MB/s for each, best of 3 (avro-c: one run);
 *	  core DIR
 *		the decoder (the fields the metrics use) against the inflater it
 *		is built with alone (libdeflate when built with it, else zlib),
 *		alternating, 5 rounds: best and median of each, and their ratio;
 *	  one DIR NAME
 *		load the manifests, then run one contender once (ours, full,
 *		avroc, zlib, libdeflate, isal, or none: the loading alone), for
 *		instruction counts under valgrind --tool=callgrind;
 *	  walk DIR
 *		iceberg_table_metrics() at level DELETES over the table through
 *		the local FileIO (run it under /usr/bin/time -v for the RSS peak).
 *
 * bench/iceberg_manifest_bench.sh runs it all, with icebird beside it.
 *
 * bench/iceberg_manifest_bench.c
 *
 *-------------------------------------------------------------------------
 */
#include <avro.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#ifdef BENCH_LIBDEFLATE
#include <libdeflate.h>
#endif
#ifdef BENCH_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "iceberg/iceberg.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"

#define NCOLS 12
#define BLOCK_TARGET 64000

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* ---- a tiny Avro writer ---- */

typedef struct Buf
{
	unsigned char *p;
	size_t		len,
				cap;
} Buf;

static void
put(Buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap)
	{
		b->cap = (b->len + n) * 2 + 4096;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			abort();
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void
put_long(Buf *b, int64_t v)
{
	uint64_t	z = ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
	unsigned char t[10];
	int			n = 0;

	while (z >= 0x80)
	{
		t[n++] = (unsigned char) (z | 0x80);
		z >>= 7;
	}
	t[n++] = (unsigned char) z;
	put(b, t, (size_t) n);
}

static void
put_str(Buf *b, const char *s)
{
	put_long(b, (int64_t) strlen(s));
	put(b, s, strlen(s));
}

static const char sync_marker[16] = "tms-bench-sync!!";

static void
put_header(Buf *f, const char *schema, int nmeta, const char **meta)
{
	int			i;

	put(f, "Obj\x01", 4);
	put_long(f, 2 + nmeta);
	put_str(f, "avro.schema");
	put_str(f, schema);
	put_str(f, "avro.codec");
	put_str(f, "deflate");
	for (i = 0; i < nmeta; i++)
	{
		put_str(f, meta[2 * i]);
		put_str(f, meta[2 * i + 1]);
	}
	put_long(f, 0);
	put(f, sync_marker, 16);
}

static void
flush_block(Buf *f, Buf *blk, int64_t count)
{
	z_stream	zs;
	unsigned char *out;
	size_t		outcap = blk->len + blk->len / 10 + 1024;

	if (count == 0)
		return;
	out = malloc(outcap);
	memset(&zs, 0, sizeof(zs));
	deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
	zs.next_in = blk->p;
	zs.avail_in = (uInt) blk->len;
	zs.next_out = out;
	zs.avail_out = (uInt) outcap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
		abort();
	put_long(f, count);
	put_long(f, (int64_t) zs.total_out);
	put(f, out, zs.total_out);
	put(f, sync_marker, 16);
	deflateEnd(&zs);
	free(out);
	blk->len = 0;
}

static void
write_file(const char *path, Buf *b)
{
	FILE	   *f = fopen(path, "wb");

	if (f == NULL || fwrite(b->p, 1, b->len, f) != b->len)
	{
		perror(path);
		exit(1);
	}
	fclose(f);
}

#define MAPT(name, k, v, vt) \
	"{\"name\":\"" name "\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"k" #k "_v" #v "\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":" #k "},{\"name\":\"value\",\"type\":\"" vt "\",\"field-id\":" #v "}]},\"logicalType\":\"map\"}],\"default\":null,\"field-id\":"

static const char *entry_schema =
"{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
"{\"name\":\"status\",\"type\":\"int\",\"field-id\":0},"
"{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1},"
"{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3},"
"{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":4},"
"{\"name\":\"data_file\",\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":["
"{\"name\":\"content\",\"type\":\"int\",\"field-id\":134},"
"{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100},"
"{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101},"
"{\"name\":\"partition\",\"type\":{\"type\":\"record\",\"name\":\"r102\",\"fields\":["
"{\"name\":\"event_date\",\"type\":[\"null\",{\"type\":\"int\",\"logicalType\":\"date\"}],\"default\":null,\"field-id\":1000}]},\"field-id\":102},"
"{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
"{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104},"
MAPT("column_sizes", 117, 118, "long") "108},"
MAPT("value_counts", 119, 120, "long") "109},"
MAPT("null_value_counts", 121, 122, "long") "110},"
MAPT("nan_value_counts", 138, 139, "long") "137},"
MAPT("lower_bounds", 126, 127, "bytes") "125},"
MAPT("upper_bounds", 129, 130, "bytes") "128},"
"{\"name\":\"key_metadata\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":131},"
"{\"name\":\"split_offsets\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"long\",\"element-id\":133}],\"default\":null,\"field-id\":132},"
"{\"name\":\"equality_ids\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"int\",\"element-id\":136}],\"default\":null,\"field-id\":135},"
"{\"name\":\"sort_order_id\",\"type\":[\"null\",\"int\"],\"default\":null,\"field-id\":140},"
"{\"name\":\"referenced_data_file\",\"type\":[\"null\",\"string\"],\"default\":null,\"field-id\":143}"
"]},\"field-id\":2}]}";

static const char *list_schema =
"{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
"{\"name\":\"manifest_path\",\"type\":\"string\",\"field-id\":500},"
"{\"name\":\"manifest_length\",\"type\":\"long\",\"field-id\":501},"
"{\"name\":\"partition_spec_id\",\"type\":\"int\",\"field-id\":502},"
"{\"name\":\"content\",\"type\":\"int\",\"field-id\":517},"
"{\"name\":\"sequence_number\",\"type\":\"long\",\"field-id\":515},"
"{\"name\":\"min_sequence_number\",\"type\":\"long\",\"field-id\":516},"
"{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"field-id\":503},"
"{\"name\":\"added_files_count\",\"type\":\"int\",\"field-id\":504},"
"{\"name\":\"existing_files_count\",\"type\":\"int\",\"field-id\":505},"
"{\"name\":\"deleted_files_count\",\"type\":\"int\",\"field-id\":506},"
"{\"name\":\"added_rows_count\",\"type\":\"long\",\"field-id\":512},"
"{\"name\":\"existing_rows_count\",\"type\":\"long\",\"field-id\":513},"
"{\"name\":\"deleted_rows_count\",\"type\":\"long\",\"field-id\":514}"
"]}";

/* A pseudo-random generator (deterministic output). */
static uint64_t rng = 88172645463325252ULL;
static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
put_long_map(Buf *b, int64_t base)
{
	int			c;

	put_long(b, 1);				/* union: array */
	put_long(b, NCOLS);
	for (c = 1; c <= NCOLS; c++)
	{
		put_long(b, c);
		put_long(b, base + (int64_t) (rnd() % 1000));
	}
	put_long(b, 0);
}

/*
 * Bounds as real writers produce them: 8-byte little-endian longs close to
 * a per-file base (ids, timestamps), and short strings from a small
 * vocabulary, so deflate sees the redundancy real manifests have.
 */
static void
put_bounds(Buf *b, int64_t base, bool upper)
{
	static const char *words[] = {"alpha", "bravo", "charlie", "delta", "echo",
	"foxtrot", "golf", "hotel"};
	int			c;

	put_long(b, 1);
	put_long(b, NCOLS);
	for (c = 1; c <= NCOLS; c++)
	{
		put_long(b, c);
		if (c % 3 == 0)
			put_str(b, words[(rnd() % 4) + (upper ? 4 : 0)]);
		else
		{
			int64_t		v = base * c + (int64_t) (rnd() % 100000) + (upper ? 1000000 : 0);
			unsigned char le[8];
			int			k;

			for (k = 0; k < 8; k++)
				le[k] = (unsigned char) ((uint64_t) v >> (8 * k));
			put_long(b, 8);
			put(b, le, 8);
		}
	}
	put_long(b, 0);
}

static int
cmd_gen(const char *dir, long files, long per, const char *scheme)
{
	char		path[4096];
	Buf			list = {0},
				lblk = {0};
	const char *lmeta[] = {"format-version", "2", "snapshot-id", "1",
	"sequence-number", "1"};
	const char *mmeta[] = {"format-version", "2", "partition-spec-id", "0",
		"content", "data", "schema", "{\"type\":\"struct\",\"fields\":[]}",
	"partition-spec", "[{\"name\":\"event_date\",\"transform\":\"day\",\"source-id\":2,\"field-id\":1000}]"};
	long		nman = (files + per - 1) / per;
	long		m,
				done = 0;
	int64_t		total_size = 0;
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/metadata", dir);
	mkdir(dir, 0755);
	mkdir(path, 0755);
	put_header(&list, list_schema, 3, lmeta);
	for (m = 0; m < nman; m++)
	{
		Buf			file = {0},
					blk = {0};
		long		i,
					n = files - done < per ? files - done : per;
		int64_t		inblk = 0;
		char		mpath[4096];
		char		fpath[512];
		char		job[64] = "";

		put_header(&file, entry_schema, 5, mmeta);
		for (i = 0; i < n; i++)
		{
			int64_t		recs = 100000 + (int64_t) (rnd() % 900000);
			int64_t		size = 64 * 1024 * 1024 + (int64_t) (rnd() % (64 * 1024 * 1024));
			int			day = 19700 + (int) ((done + i) / 2000);

			if (i % 200 == 0)
				snprintf(job, sizeof(job), "%08llx-%04llx-4%03llx-a%03llx-%012llx",
						 (unsigned long long) (rnd() & 0xffffffff),
						 (unsigned long long) (rnd() & 0xffff),
						 (unsigned long long) (rnd() & 0xfff),
						 (unsigned long long) (rnd() & 0xfff),
						 (unsigned long long) (rnd() & 0xffffffffffffULL));
			snprintf(fpath, sizeof(fpath),
					 "s3://warehouse/analytics/events/data/event_date=%d/%05ld-%ld-%s-%05ld.parquet",
					 day, (long) (i % 200), m * 1000 + i / 200, job, i % 7 + 1);
			put_long(&blk, 1);	/* status ADDED */
			put_long(&blk, 1);
			put_long(&blk, 1);	/* snapshot_id 1 */
			put_long(&blk, 0);	/* sequence_number null */
			put_long(&blk, 0);	/* file_sequence_number null */
			put_long(&blk, 0);	/* content */
			put_str(&blk, fpath);
			put_str(&blk, "PARQUET");
			put_long(&blk, 1);
			put_long(&blk, day);
			put_long(&blk, recs);
			put_long(&blk, size);
			put_long_map(&blk, size / NCOLS);
			put_long_map(&blk, recs);
			put_long_map(&blk, 0);
			put_long(&blk, 0);	/* nan_value_counts null */
			put_bounds(&blk, INT64_C(1700000000000000) + (done + i) * 1000, false);
			put_bounds(&blk, INT64_C(1700000000000000) + (done + i) * 1000, true);
			put_long(&blk, 0);	/* key_metadata */
			put_long(&blk, 1);	/* split_offsets [4] */
			put_long(&blk, 1);
			put_long(&blk, 4);
			put_long(&blk, 0);
			put_long(&blk, 0);	/* equality_ids */
			put_long(&blk, 1);
			put_long(&blk, 0);	/* sort_order_id 0 */
			put_long(&blk, 0);	/* referenced_data_file */
			total_size += size;
			if (++inblk, blk.len >= BLOCK_TARGET)
			{
				flush_block(&file, &blk, inblk);
				inblk = 0;
			}
		}
		flush_block(&file, &blk, inblk);
		snprintf(mpath, sizeof(mpath), "%s/metadata/m-%05ld.avro", dir, m);
		write_file(mpath, &file);
		/* manifest list entry */
		snprintf(path, sizeof(path), "%s%s", scheme, mpath);
		put_str(&lblk, path);
		put_long(&lblk, (int64_t) file.len);
		put_long(&lblk, 0);
		put_long(&lblk, 0);
		put_long(&lblk, 1);
		put_long(&lblk, 1);
		put_long(&lblk, 1);
		put_long(&lblk, n);
		put_long(&lblk, 0);
		put_long(&lblk, 0);
		put_long(&lblk, n * 500000);
		put_long(&lblk, 0);
		put_long(&lblk, 0);
		done += n;
		free(file.p);
		free(blk.p);
	}
	flush_block(&list, &lblk, nman);
	snprintf(path, sizeof(path), "%s/metadata/snap-1.avro", dir);
	write_file(path, &list);
	snprintf(path, sizeof(path), "%s/metadata/v1.metadata.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"format-version\":2,\"table-uuid\":\"5f7c1c1e-0000-4000-8000-000000000001\","
			"\"location\":\"%s%s\",\"last-sequence-number\":1,\"last-updated-ms\":1700000000000,"
			"\"last-column-id\":12,\"current-schema-id\":0,\"schemas\":[{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
			"{\"id\":1,\"name\":\"id\",\"required\":false,\"type\":\"long\"},"
			"{\"id\":2,\"name\":\"ts\",\"required\":false,\"type\":\"timestamptz\"}]}],"
			"\"default-spec-id\":0,\"partition-specs\":[{\"spec-id\":0,\"fields\":[{\"name\":\"event_date\",\"transform\":\"day\",\"source-id\":2,\"field-id\":1000}]}],"
			"\"last-partition-id\":1000,\"default-sort-order-id\":0,\"sort-orders\":[{\"order-id\":0,\"fields\":[]}],"
			"\"properties\":{},\"current-snapshot-id\":1,\"refs\":{\"main\":{\"snapshot-id\":1,\"type\":\"branch\"}},"
			"\"snapshots\":[{\"snapshot-id\":1,\"sequence-number\":1,\"timestamp-ms\":1700000000000,"
			"\"summary\":{\"operation\":\"append\"},\"manifest-list\":\"%s%s/metadata/snap-1.avro\",\"schema-id\":0}],"
			"\"snapshot-log\":[],\"metadata-log\":[]}\n", scheme, dir, scheme, dir);
	fclose(f);
	printf("wrote %ld entries in %ld manifests under %s (declared data bytes %lld)\n",
		   files, nman, dir, (long long) total_size);
	free(list.p);
	free(lblk.p);
	return 0;
}

/* ---- loading the manifests into memory ---- */

typedef struct Loaded
{
	int			n;
	unsigned char **data;
	size_t	   *len;
	size_t		total;
} Loaded;

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static void
load_manifests(const char *dir, Loaded *l)
{
	char		path[4096];
	DIR		   *d;
	struct dirent *de;
	char	   *names[100000];
	int			nn = 0,
				i;

	snprintf(path, sizeof(path), "%s/metadata", dir);
	d = opendir(path);
	if (d == NULL)
	{
		perror(path);
		exit(1);
	}
	while ((de = readdir(d)) != NULL && nn < 100000)
		if (strncmp(de->d_name, "m-", 2) == 0)
			names[nn++] = strdup(de->d_name);
	closedir(d);
	qsort(names, (size_t) nn, sizeof(char *), cmp_str);
	l->n = nn;
	l->data = calloc((size_t) nn, sizeof(unsigned char *));
	l->len = calloc((size_t) nn, sizeof(size_t));
	l->total = 0;
	for (i = 0; i < nn; i++)
	{
		FILE	   *f;
		struct stat st;

		snprintf(path, sizeof(path), "%s/metadata/%s", dir, names[i]);
		stat(path, &st);
		f = fopen(path, "rb");
		l->len[i] = (size_t) st.st_size;
		l->data[i] = malloc(l->len[i]);
		if (f == NULL || fread(l->data[i], 1, l->len[i], f) != l->len[i])
			exit(1);
		fclose(f);
		l->total += l->len[i];
		free(names[i]);
	}
}

/* ---- the three C contenders ---- */

static int64_t
run_ours(Loaded *l, int64_t *inflated, int64_t *checksum)
{
	int64_t		n = 0;
	int			i;

	*inflated = 0;
	*checksum = 0;
	for (i = 0; i < l->n; i++)
	{
		IcebergMemoryFile mem = {l->data[i], l->len[i]};
		IcebergFileIO io;
		IcebergManifestFile mf;
		IcebergManifestReader *mr;
		const IcebergManifestEntry *e;
		TmsError	err;
		int64_t		c,
					inf;
		int			rc;

		iceberg_memory_fileio(&io, &mem);
		memset(&mf, 0, sizeof(mf));
		mf.manifest_path = "m";
		mf.partition_spec_id = 0;
		mf.sequence_number = 1;
		mf.added_snapshot_id = 1;
		if (!iceberg_manifest_open(&io, &mf, 2, 0, &mr, &err))
		{
			fprintf(stderr, "ours: %s\n", err.message);
			exit(1);
		}
		while ((rc = iceberg_manifest_next(mr, &e, &err)) == 1)
		{
			n++;
			*checksum += e->file_size_in_bytes + e->record_count + (int64_t) strlen(e->file_path);
		}
		if (rc < 0)
		{
			fprintf(stderr, "ours: %s %s\n", err.message, err.detail);
			exit(1);
		}
		iceberg_manifest_byte_counts(mr, &c, &inf);
		*inflated += inf;
		iceberg_manifest_close(mr);
	}
	return n;
}

static int64_t
run_avroc(Loaded *l, int64_t *checksum)
{
	int64_t		n = 0;
	int			i;

	*checksum = 0;
	for (i = 0; i < l->n; i++)
	{
		FILE	   *fp = fmemopen(l->data[i], l->len[i], "rb");
		avro_file_reader_t reader;
		avro_schema_t schema;
		avro_value_iface_t *iface;
		avro_value_t value;

		if (fp == NULL || avro_file_reader_fp(fp, "m", 1, &reader) != 0)
		{
			fprintf(stderr, "avro-c: %s\n", avro_strerror());
			exit(1);
		}
		schema = avro_file_reader_get_writer_schema(reader);
		iface = avro_generic_class_from_schema(schema);
		avro_generic_value_new(iface, &value);
		while (avro_file_reader_read_value(reader, &value) == 0)
		{
			avro_value_t df,
						f;
			int64_t		size = 0,
						recs = 0;
			int32_t		status = 0;
			const char *path = NULL;
			size_t		plen = 0;

			avro_value_get_by_name(&value, "status", &f, NULL);
			avro_value_get_int(&f, &status);
			avro_value_get_by_name(&value, "data_file", &df, NULL);
			avro_value_get_by_name(&df, "file_path", &f, NULL);
			avro_value_get_string(&f, &path, &plen);
			avro_value_get_by_name(&df, "record_count", &f, NULL);
			avro_value_get_long(&f, &recs);
			avro_value_get_by_name(&df, "file_size_in_bytes", &f, NULL);
			avro_value_get_long(&f, &size);
			*checksum += size + recs + (int64_t) (plen ? plen - 1 : 0);
			n++;
		}
		avro_value_decref(&value);
		avro_value_iface_decref(iface);
		avro_file_reader_close(reader);	/* closes fp */
	}
	return n;
}

/*
 * This layer's decoder decoding every field: the entry's fields as ours,
 * and its data_file rendered whole (every field, every map entry) as
 * canonical JSON by the partition renderer, the way avro-c's generic
 * reader materialises every field.
 */
static const IcebergAvroTarget full_targets[] = {
	{0, "status", NULL, ICEBERG_AVRO_SLOT_LONG, 0, NULL, 0},
	{1, "snapshot_id", NULL, ICEBERG_AVRO_SLOT_LONG, 1, NULL, 0},
	{3, "sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, 2, NULL, 0},
	{4, "file_sequence_number", NULL, ICEBERG_AVRO_SLOT_LONG, 3, NULL, 0},
	{2, "data_file", NULL, ICEBERG_AVRO_SLOT_PARTITION, 4, NULL, 0},
};

static int64_t
run_full(Loaded *l, int64_t *rendered)
{
	int64_t		n = 0;
	int			i;

	*rendered = 0;
	for (i = 0; i < l->n; i++)
	{
		IcebergMemoryFile mem = {l->data[i], l->len[i]};
		IcebergFileIO io;
		IcebergAvroReader *r;
		IcebergAvroValue v[ICEBERG_AVRO_MAX_SLOTS];
		TmsError	err;
		int			rc;

		iceberg_memory_fileio(&io, &mem);
		if (!iceberg_avro_reader_open(&io, "m", "manifest", full_targets, 5, &r, &err))
		{
			fprintf(stderr, "full: %s %s\n", err.message, err.detail);
			exit(1);
		}
		while ((rc = iceberg_avro_reader_next(r, v, &err)) == 1)
		{
			n++;
			*rendered += (int64_t) v[4].slen;
		}
		if (rc < 0)
		{
			fprintf(stderr, "full: %s %s\n", err.message, err.detail);
			exit(1);
		}
		iceberg_avro_reader_close(r);
	}
	return n;
}

typedef enum Inflater
{
	INF_ZLIB, INF_LIBDEFLATE, INF_ISAL
} Inflater;

static const char *const inflater_name[] = {"zlib", "libdeflate", "isal"};

/*
 * Parse blocks by hand and raw-inflate each into one 16 MB buffer (no
 * bound checks, no growth): the limit of any reader using that inflater.
 */
static int64_t
run_inflate(Loaded *l, Inflater which)
{
	int64_t		out_total = 0;
	unsigned char *out = malloc(16 << 20);
	z_stream	zs;
#ifdef BENCH_LIBDEFLATE
	struct libdeflate_decompressor *ld = libdeflate_alloc_decompressor();
#endif
#ifdef BENCH_ISAL
	struct inflate_state *is = malloc(sizeof(struct inflate_state));
#endif
	int			i;

	memset(&zs, 0, sizeof(zs));
	inflateInit2(&zs, -15);
	for (i = 0; i < l->n; i++)
	{
		const unsigned char *p = l->data[i] + 4,
				   *end = l->data[i] + l->len[i];

#define RDL(v) do { uint64_t z_ = 0; int s_ = 0; while (*p & 0x80) { z_ |= (uint64_t) (*p++ & 0x7f) << s_; s_ += 7; } z_ |= (uint64_t) *p++ << s_; v = (int64_t) ((z_ >> 1) ^ (~(z_ & 1) + 1)); } while (0)
		/* skip the header map */
		for (;;)
		{
			int64_t		cnt,
						k,
						len;

			RDL(cnt);
			if (cnt == 0)
				break;
			for (k = 0; k < cnt * 2; k++)
			{
				RDL(len);
				p += len;
			}
		}
		p += 16;
		while (p < end)
		{
			int64_t		cnt,
						size;

			RDL(cnt);
			RDL(size);
			switch (which)
			{
				case INF_ZLIB:
					inflateReset(&zs);
					zs.next_in = (unsigned char *) p;
					zs.avail_in = (uInt) size;
					zs.next_out = out;
					zs.avail_out = 16 << 20;
					if (inflate(&zs, Z_FINISH) != Z_STREAM_END)
						abort();
					out_total += (int64_t) zs.total_out;
					break;
				case INF_LIBDEFLATE:
#ifdef BENCH_LIBDEFLATE
					{
						size_t		got;

						if (libdeflate_deflate_decompress(ld, p, (size_t) size, out, 16 << 20,
														  &got) != LIBDEFLATE_SUCCESS)
							abort();
						out_total += (int64_t) got;
					}
#endif
					break;
				case INF_ISAL:
#ifdef BENCH_ISAL
					isal_inflate_init(is);
					is->crc_flag = ISAL_DEFLATE;
					is->next_in = (uint8_t *) p;
					is->avail_in = (uint32_t) size;
					is->next_out = out;
					is->avail_out = 16 << 20;
					if (isal_inflate_stateless(is) != ISAL_DECOMP_OK)
						abort();
					out_total += (int64_t) is->total_out;
#endif
					break;
			}
			p += size + 16;
			(void) cnt;
		}
	}
	inflateEnd(&zs);
#ifdef BENCH_LIBDEFLATE
	libdeflate_free_decompressor(ld);
#endif
#ifdef BENCH_ISAL
	free(is);
#endif
	free(out);
	return out_total;
}

static bool
have_inflater(Inflater which)
{
	(void) which;
#ifndef BENCH_LIBDEFLATE
	if (which == INF_LIBDEFLATE)
		return false;
#endif
#ifndef BENCH_ISAL
	if (which == INF_ISAL)
		return false;
#endif
	return true;
}

static void
print_row(const char *what, double secs, int64_t n, size_t compressed, int64_t inflated)
{
	printf("%-34s %10.3f %12.0f %14.1f %14.1f\n", what, secs, (double) n / secs,
		   (double) compressed / 1e6 / secs, (double) inflated / 1e6 / secs);
}

static int
cmd_bench(const char *dir)
{
	Loaded		l;
	double		t0,
				t;
	int64_t		n = 0,
				nfull = 0,
				inflated = 0,
				rendered = 0,
				ck1 = 0,
				ck2,
				outb[3] = {0};
	int			rep,
				k;
	double		best_ours = 1e9,
				best_full = 1e9,
				best_avroc,
				best_inflate[3] = {1e9, 1e9, 1e9};

	load_manifests(dir, &l);
	printf("manifests: %d files, %.1f MB compressed\n", l.n, (double) l.total / 1e6);
	/* the contenders alternate, so that the machine's load falls on all */
	for (rep = 0; rep < 3; rep++)
	{
		t0 = now_s();
		n = run_ours(&l, &inflated, &ck1);
		t = now_s() - t0;
		if (t < best_ours)
			best_ours = t;
		for (k = 0; k < 3; k++)
		{
			if (!have_inflater((Inflater) k))
				continue;
			t0 = now_s();
			outb[k] = run_inflate(&l, (Inflater) k);
			t = now_s() - t0;
			if (t < best_inflate[k])
				best_inflate[k] = t;
		}
		t0 = now_s();
		nfull = run_full(&l, &rendered);
		t = now_s() - t0;
		if (t < best_full)
			best_full = t;
	}
	if (nfull != n)
		printf("WARNING: the full decode read %lld entries, not %lld\n",
			   (long long) nfull, (long long) n);
	t0 = now_s();
	if (run_avroc(&l, &ck2) != n || ck1 != ck2)
		printf("WARNING: avro-c read different values\n");
	best_avroc = now_s() - t0;
	printf("%-34s %10s %12s %14s %14s\n", "reader", "seconds", "entries/s",
		   "MB/s compr.", "MB/s inflated");
	print_row("tms decoder, fields used (best/3)", best_ours, n, l.total, inflated);
	print_row("tms decoder, every field (best/3)", best_full, n, l.total, inflated);
	print_row("avro-c generic, every field (1 run)", best_avroc, n, l.total, inflated);
	for (k = 0; k < 3; k++)
	{
		char		what[64];

		if (!have_inflater((Inflater) k))
			continue;
		snprintf(what, sizeof(what), "%s inflate only (best/3)", inflater_name[k]);
		print_row(what, best_inflate[k], n, l.total, outb[k]);
	}
	printf("entries %lld, inflated %.1f MB (%.0f bytes/entry), every field rendered %.1f MB\n",
		   (long long) n, (double) inflated / 1e6, (double) inflated / (double) n,
		   (double) rendered / 1e6);
	printf("tms / zlib inflate = %.2fx; tms every field / zlib inflate = %.2fx; "
		   "avro-c / tms every field = %.1fx\n",
		   best_ours / best_inflate[INF_ZLIB], best_full / best_inflate[INF_ZLIB],
		   best_avroc / best_full);
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* The decoder against its inflater alone, alternating. */
static int
cmd_core(const char *dir)
{
	Loaded		l;
	Inflater	inf = have_inflater(INF_LIBDEFLATE) ? INF_LIBDEFLATE : INF_ZLIB;
	double		ours[5],
				alone[5],
				t0;
	int64_t		n = 0,
				inflated,
				ck;
	int			rep;

	load_manifests(dir, &l);
	for (rep = 0; rep < 5; rep++)
	{
		t0 = now_s();
		n = run_ours(&l, &inflated, &ck);
		ours[rep] = now_s() - t0;
		t0 = now_s();
		(void) run_inflate(&l, inf);
		alone[rep] = now_s() - t0;
	}
	qsort(ours, 5, sizeof(double), cmp_double);
	qsort(alone, 5, sizeof(double), cmp_double);
	printf("entries %lld; %s inflate alone best %.3f s median %.3f s; "
		   "decoder best %.3f s median %.3f s; decoder / inflate alone: best %.2fx median %.2fx\n",
		   (long long) n, inflater_name[inf], alone[0], alone[2], ours[0], ours[2],
		   ours[0] / alone[0], ours[2] / alone[2]);
	return 0;
}

/* One contender, once, for instruction counts. */
static int
cmd_one(const char *dir, const char *name)
{
	Loaded		l;
	int64_t		a,
				b;
	int			k;

	load_manifests(dir, &l);
	if (strcmp(name, "none") == 0)
		return 0;
	if (strcmp(name, "ours") == 0)
		return run_ours(&l, &a, &b) > 0 ? 0 : 1;
	if (strcmp(name, "full") == 0)
		return run_full(&l, &a) > 0 ? 0 : 1;
	if (strcmp(name, "avroc") == 0)
		return run_avroc(&l, &a) > 0 ? 0 : 1;
	for (k = 0; k < 3; k++)
		if (strcmp(name, inflater_name[k]) == 0 && have_inflater((Inflater) k))
			return run_inflate(&l, (Inflater) k) > 0 ? 0 : 1;
	fprintf(stderr, "unknown or unavailable contender %s\n", name);
	return 2;
}

static int
cmd_walk(const char *dir)
{
	IcebergFileIO io;
	IcebergTableMetadata *md;
	IcebergTableMetrics m;
	TmsError	err;
	char		path[4096];
	double		t0 = now_s();

	iceberg_local_fileio(&io, NULL);
	snprintf(path, sizeof(path), "%s/metadata/v1.metadata.json", dir);
	if (!iceberg_metadata_read(&io, path, &md, &err) ||
		!iceberg_table_metrics(&io, md, ICEBERG_METRICS_DELETES, 1700000000000LL + 1000,
							   NULL, NULL, &m, &err))
	{
		fprintf(stderr, "walk: %s %s\n", err.message, err.detail);
		return 1;
	}
	printf("metrics walk: manifests %lld data files %lld size %lld records %lld avg %.0f in %.3f s\n",
		   (long long) m.manifests, (long long) m.data_files,
		   (long long) m.data_files_size, (long long) m.data_records,
		   m.avg_data_file_size, now_s() - t0);
	iceberg_metadata_free(md);
	return 0;
}

int
main(int argc, char **argv)
{
	io_init();					/* before any jansson use (src/io/util/jsonmem.h) */
	if (argc >= 5 && strcmp(argv[1], "gen") == 0)
		return cmd_gen(argv[2], atol(argv[3]), atol(argv[4]), argc >= 6 ? argv[5] : "");
	if (argc >= 3 && strcmp(argv[1], "bench") == 0)
		return cmd_bench(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "core") == 0)
		return cmd_core(argv[2]);
	if (argc >= 4 && strcmp(argv[1], "one") == 0)
		return cmd_one(argv[2], argv[3]);
	if (argc >= 3 && strcmp(argv[1], "walk") == 0)
		return cmd_walk(argv[2]);
	fprintf(stderr, "usage: %s gen DIR FILES PER_MANIFEST [SCHEME] | bench DIR | core DIR | one DIR NAME | walk DIR\n", argv[0]);
	return 2;
}
