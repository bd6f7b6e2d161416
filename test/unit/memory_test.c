/*-------------------------------------------------------------------------
 *
 * memory_test.c
 *		Unit tests of the plain-C layers' allocator (io/util/io_memory.h):
 *		io_malloc and friends, blocks that go back to the allocator they
 *		came from, and, with a counting allocator installed, that every
 *		block of representative io and iceberg calls is freed, on success,
 *		on their error paths and when any one allocation fails.
 *
 * Run: make unit (test/unit/build/memory_test); the fixtures are those of
 * iceberg_test.c (ICEBERG_FIXTURES, default test/fixtures/iceberg).
 *
 * test/unit/memory_test.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iceberg/iceberg.h"
#include "io/io.h"
#include "unit.h"

/* A counting allocator; fail_at > 0: the fail_at-th allocation fails. */
typedef struct Counter
{
	long		live;			/* blocks not freed */
	long		allocs;			/* allocations asked for */
	long		frees;
	long		fail_at;
	long		failed;
} Counter;

static void *
count_alloc(void *arg, size_t size)
{
	Counter    *c = arg;

	c->allocs++;
	if (c->fail_at > 0 && c->allocs == c->fail_at)
	{
		c->failed++;
		return NULL;
	}
	c->live++;
	return malloc(size);
}

static void
count_free(void *arg, void *ptr)
{
	Counter    *c = arg;

	c->live--;
	c->frees++;
	free(ptr);
}

static const char *fixtures;

#define EQ_TABLE "java-v2-partitioned-eqdeletes"
#define EQ_LOCATION "data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned"

static void
test_basics(void)
{
	Counter		a = {0},
				b = {0};
	IoAllocator aa = {count_alloc, count_free, &a};
	IoAllocator ab = {count_alloc, count_free, &b};
	const IoAllocator *prev;
	char	   *s;
	char	   *t;
	char	   *u;
	int		   *v;

	CHECK(io_current_allocator() == io_base_allocator(), "no scope: the base");
	io_set_allocator(&aa);
	CHECK(io_current_allocator() == &aa && io_base_allocator() == &aa, "installed");
	s = io_strdup("hello");
	t = io_strndup("abcdef", 3);
	CHECK(s && strcmp(s, "hello") == 0 && t && strcmp(t, "abc") == 0, "strdup, strndup");
	u = io_strndup("ab", 10);
	CHECK(u && strcmp(u, "ab") == 0 && a.live == 3, "strndup stops at the NUL");
	io_free(io_realloc(NULL, 0));	/* realloc of NULL allocates */
	CHECK(io_calloc(SIZE_MAX / 2, 4) == NULL, "calloc overflow refused");
	CHECK(io_malloc(SIZE_MAX - 4) == NULL, "size past the header refused");
	v = io_calloc(4, sizeof(int));
	CHECK(v && v[0] == 0 && v[3] == 0, "calloc zeroes");

	/* another allocator current: blocks still go back where they came from */
	prev = io_use_allocator(&ab);
	CHECK(prev == &aa, "use returns the previous one");
	s = io_realloc(s, 64 * 1024);
	CHECK(s && strcmp(s, "hello") == 0 && b.allocs == 0, "realloc stays in its allocator");
	io_free(s);
	io_free(t);
	io_free(v);
	t = io_strdup("in b");
	CHECK(b.live == 1, "new blocks from the current one");
	io_use_allocator(NULL);
	CHECK(io_current_allocator() == &aa, "NULL: back to the base");
	io_free(t);
	CHECK(b.live == 0 && b.frees == 1, "b's block went back to b");
	CHECK(a.live == 1, "a: only the \"ab\" copy left (%ld)", a.live);
	io_free(u);
	CHECK(a.live == 0, "a: nothing left");
	io_set_allocator(NULL);
	CHECK(io_current_allocator() != &aa, "uninstalled: malloc again");
}

/* Local storage over the fixtures, and the FileIO iceberg reads through. */
typedef struct Reader
{
	char	   *root;
	const char *roots[1];
	IoStorage  *st;
	IoStorageFileIO state;
	IcebergFileIO io;
} Reader;

static bool
reader_open(Reader *r, TmsError *ioerr)
{
	IoStorageConfig cfg;

	memset(r, 0, sizeof(*r));
	r->root = realpath(fixtures, NULL);
	if (r->root == NULL)
		return false;
	r->roots[0] = r->root;
	memset(&cfg, 0, sizeof(cfg));
	cfg.local_roots = r->roots;
	cfg.nlocal_roots = 1;
	r->st = io_storage_create(&cfg, ioerr);
	if (r->st == NULL)
	{
		free(r->root);
		return false;
	}
	io_storage_fileio(&r->state, r->st, r->root, NULL, NULL, &r->io.io);
	r->io.limits = NULL;
	return true;
}

static void
reader_close(Reader *r)
{
	io_storage_free(r->st);
	free(r->root);
}

/*
 * One representative run: storage, metadata read through it, the metrics
 * of every manifest (Avro, deletes; the table's absolute locations mapped
 * to its fixture folder), a missing file and a path outside the root.
 * True when every step succeeded.
 */
static bool
run_calls(const char *table, const char *location, const char *metadata)
{
	Reader		r;
	TmsError	ioerr;
	TmsError	err;
	IcebergTableMetadata *md = NULL;
	IcebergTableMetrics m;
	IcebergLocalFS fs;
	IcebergFileIO lio;
	char		path[512];
	char		folder[512];
	char	   *canon = NULL;
	bool		ok = true;

	if (!reader_open(&r, &ioerr))
		return false;
	snprintf(path, sizeof(path), "%s/metadata/%s", table, metadata);
	snprintf(folder, sizeof(folder), "%s/%s", fixtures, table);
	memset(&fs, 0, sizeof(fs));
	fs.nmaps = 1;
	fs.maps[0].from = location;
	fs.maps[0].to = folder;
	iceberg_local_fileio(&lio, &fs);
	if (!iceberg_metadata_read(&r.io, path, &md, &err))
		ok = false;
	else
	{
		ok = iceberg_table_metrics(&lio, md, ICEBERG_METRICS_DELETES, 0, NULL, NULL,
								   &m, &err) && ok;
		iceberg_metadata_free(md);
	}
	/* error paths: a missing file, a path outside the root */
	snprintf(path, sizeof(path), "%s/metadata/no-such.metadata.json", table);
	if (iceberg_metadata_read(&r.io, path, &md, &err))
	{
		iceberg_metadata_free(md);
		ok = false;
	}
	if (iceberg_metadata_read(&r.io, "/etc/passwd", &md, &err))
	{
		iceberg_metadata_free(md);
		ok = false;
	}
	if (io_location_canonical("s3://b/x/../y", NULL, &canon, &ioerr) == 0)
	{
		io_free(canon);
		ok = false;
	}
	if (io_location_canonical("s3://b//x/y/", NULL, &canon, &ioerr) != 0)
		ok = false;
	io_free(canon);
	reader_close(&r);
	return ok;
}

static void
test_every_block_freed(void)
{
	Counter		c = {0};
	IoAllocator a = {count_alloc, count_free, &c};

	io_set_allocator(&a);
	CHECK(run_calls("spark-v2-mor-posdeletes", "s3a://hyperparam-iceberg/spark/bunnies",
					"v5.metadata.json"), "the calls succeed");
	CHECK(c.allocs > 100, "they allocate through the allocator (%ld)", c.allocs);
	CHECK(c.live == 0, "every block freed: %ld live of %ld", c.live, c.allocs);
	io_set_allocator(NULL);
}

/*
 * Fail each allocation in turn: the calls end (with an error or, when the
 * failed allocation was optional, not) and leave nothing allocated.
 */
static void
test_failed_allocations(void)
{
	Counter		c = {0};
	IoAllocator a = {count_alloc, count_free, &c};
	long		total;
	long		leaks = 0;
	long		k;

	io_set_allocator(&a);
	CHECK(run_calls(EQ_TABLE, EQ_LOCATION, "v6.metadata.json"), "the calls succeed");
	total = c.allocs;
	for (k = 1; k <= total; k++)
	{
		memset(&c, 0, sizeof(c));
		c.fail_at = k;
		(void) run_calls(EQ_TABLE, EQ_LOCATION, "v6.metadata.json");
		if (c.live != 0 && leaks++ < 5)
			CHECK(false, "allocation %ld of %ld failed: %ld blocks left", k, total, c.live);
	}
	CHECK(leaks == 0, "no leak when any one of %ld allocations fails", total);
	io_set_allocator(NULL);
}

int
main(void)
{
	io_init();
	fixtures = getenv("ICEBERG_FIXTURES");
	if (fixtures == NULL)
		fixtures = "test/fixtures/iceberg";
	test_basics();
	test_every_block_freed();
	test_failed_allocations();
	return unit_done();
}
