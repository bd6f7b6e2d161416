/*-------------------------------------------------------------------------
 *
 * dsl_bench.c
 *		Throughput of the policy condition language (src/dsl/) against
 *		hand-written C predicates computing the same thing (the limit).
 *
 * For every example condition of the DSL's design (the ones
 * test/regress/sql/dsl_examples.sql checks): evaluations per second of dsl_eval() over
 * fixed metrics that vary a little per iteration (so that neither side can
 * be folded away), next to a hand-written function of the same predicate,
 * compiled with the same flags and kept out of line.
 * Examples that count files run over 1,000,000 synthetic data files,
 * handed out in batches of 1024 through the DslFileSource interface the
 * real caller uses; the hand-written side reads the same batches.  Also
 * the explain-mode rate for one example.  Build and run: bench/dsl.sh.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsl/dsl.h"

#define NFILES	1000000
#define BATCH	1024

static volatile int64_t sink;
static DslFile *files;

/* ---- inputs ---- */

static const char *
get_prop(void *arg, const char *name)
{
	(void) arg;
	if (strcmp(name, "write.target-file-size-bytes") == 0)
		return "104857600";
	return NULL;
}

typedef struct iter
{
	size_t		pos;
} iter;

static int
next_files(void *arg, const DslFile **out, size_t *n)
{
	iter	   *it = arg;
	size_t		k;

	if (it->pos >= NFILES)
		return 0;
	k = NFILES - it->pos < BATCH ? NFILES - it->pos : BATCH;
	*out = files + it->pos;
	*n = k;
	it->pos += k;
	return 1;
}

static DslProperties props = {get_prop, NULL};

static void
set_metrics(DslMetrics *m, int64_t i)
{
	memset(m, 0, sizeof(*m));
	for (int v = 0; v < DSL_VAR_COUNT; v++)
		dsl_metrics_set(m, v, 0, 0.0);
	m->data_files = 90 + (i & 31);
	m->data_files_size = m->data_files * 100 * 1048576;
	m->avg_data_file_size = 100.0 * 1048576 + (double) (i & 7);
	m->equality_delete_files = 5 + (i & 15);
	m->equality_delete_records = 99990 + (i & 31);
	m->equality_delete_files_size = 512 * 1048576LL + (i & 1023);
	m->position_delete_files_size = 512 * 1048576LL - 512 + (i & 1023);
	m->data_files_with_deletes = 99990 + (i & 31);
	m->snapshots = 40 + (i & 15);
	m->oldest_snapshot_age = 5 * 86400000LL - 8 + (i & 15);
	m->time_since_last_update = 3 * 86400000LL - 8 + (i & 15);
}

/* ---- hand-written predicates ---- */

static int64_t
prop_long(const char *name, int64_t dflt)
{
	const char *s = get_prop(NULL, name);
	char	   *end;
	long long	v;

	if (s == NULL)
		return dflt;
	v = strtoll(s, &end, 10);
	return *end == '\0' && end != s ? v : dflt;
}

static bool
prop_bool(const char *name, bool dflt)
{
	const char *s = get_prop(NULL, name);

	if (s && strcasecmp(s, "true") == 0)
		return true;
	if (s && strcasecmp(s, "false") == 0)
		return false;
	return dflt;
}

typedef int64_t (*count_fn) (const DslFile *f, size_t n, int64_t arg);

/* Count over the same batched stream; the lambda is count_fn. */
static int64_t
count_files(count_fn fn, int64_t arg)
{
	iter		it = {0};
	const DslFile *b;
	size_t		n;
	int64_t		c = 0;

	while (next_files(&it, &b, &n) > 0)
		c += fn(b, n, arg);
	return c;
}

static int64_t
cnt_size_lt(const DslFile *f, size_t n, int64_t k)
{
	int64_t		c = 0;

	for (size_t i = 0; i < n; i++)
		c += f[i].size < k;
	return c;
}

static int64_t
cnt_small_del(const DslFile *f, size_t n, int64_t k)
{
	int64_t		c = 0;

	for (size_t i = 0; i < n; i++)
		c += f[i].size < k && f[i].has_deletes;
	return c;
}

static int64_t
cnt_size_gt(const DslFile *f, size_t n, int64_t k)
{
	int64_t		c = 0;

	for (size_t i = 0; i < n; i++)
		c += f[i].size > k;
	return c;
}

static int64_t
cnt_records_lt(const DslFile *f, size_t n, int64_t k)
{
	int64_t		c = 0;

	for (size_t i = 0; i < n; i++)
		c += f[i].records < k;
	return c;
}

__attribute__((noinline)) static bool
h1(const DslMetrics *m)
{
	return m->data_files > 100 && m->avg_data_file_size < 128.0 * 1048576;
}

__attribute__((noinline)) static bool
h2(const DslMetrics *m)
{
	return m->data_files > 10 &&
		(double) count_files(cnt_size_lt,
							 prop_long("write.target-file-size-bytes", 512 * 1048576LL)) /
		(double) m->data_files > 0.5;
}

__attribute__((noinline)) static bool
h3(const DslMetrics *m)
{
	return m->equality_delete_files > 10 || m->equality_delete_records > 100000;
}

__attribute__((noinline)) static bool
h4(const DslMetrics *m)
{
	return m->equality_delete_files_size + m->position_delete_files_size > 1073741824LL;
}

__attribute__((noinline)) static bool
h5(const DslMetrics *m)
{
	return m->data_files_with_deletes > 100000;
}

__attribute__((noinline)) static bool
h6(const DslMetrics *m)
{
	(void) m;
	return count_files(cnt_small_del, 64 * 1048576LL) > 5;
}

__attribute__((noinline)) static bool
h7(const DslMetrics *m)
{
	return !prop_bool("maintenance.disabled", false) &&
		((m->data_files > 100 && m->avg_data_file_size < 128.0 * 1048576) ||
		 m->equality_delete_files > 50 ||
		 (m->time_since_last_update > 3 * 86400000LL && m->snapshots > 50));
}

__attribute__((noinline)) static bool
h8(const DslMetrics *m)
{
	return m->snapshots > 1 && m->oldest_snapshot_age > 5 * 86400000LL;
}

__attribute__((noinline)) static bool
h9(const DslMetrics *m)
{
	(void) m;
	return count_files(cnt_size_gt, 1073741824LL) > 10;
}

__attribute__((noinline)) static bool
h10(const DslMetrics *m)
{
	(void) m;
	return count_files(cnt_records_lt, 1000) > 50;
}

typedef struct example
{
	const char *expr;
	bool		(*hand) (const DslMetrics *m);
	bool		files;
} example;

static const example examples[] = {
	{"dataFiles > 100 AND avgDataFileSize < 128MB", h1, false},
	{"dataFiles > 10 AND countDataFiles(f -> f.size < property('write.target-file-size-bytes', 512MB)) / dataFiles > 0.5", h2, true},
	{"equalityDeleteFiles > 10 OR equalityDeleteRecords > 100000", h3, false},
	{"equalityDeleteFilesSize + positionDeleteFilesSize > 1GB", h4, false},
	{"dataFilesWithDeletes > 100000", h5, false},
	{"countDataFiles(f -> f.size < MB(64) AND f.hasDeletes) > 5", h6, true},
	{"!property('maintenance.disabled', false) AND ((dataFiles > 100 AND avgDataFileSize < 128MB) OR equalityDeleteFiles > 50 OR (timeSinceLastUpdate > 3d AND snapshots > 50))", h7, false},
	{"snapshots > 1 AND oldestSnapshotAge > days(5)", h8, false},
	{"countDataFiles(f -> f.size > 1GB) > 10", h9, true},
	{"countDataFiles(f -> f.records < 1000) > 50", h10, true},
};

/* ---- timing ---- */

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

#define MODE_DSL 0
#define MODE_HAND 1
#define MODE_EXPLAIN 2

/* Evaluations per second of one side, over at least min_seconds. */
static double
rate(const DslProgram *p, const example *ex, int mode, double min_seconds)
{
	int64_t		iters = ex->files ? 1 : 1 << 16;
	DslMetrics m[64];
	DslExplainNode *nodes = NULL;

	for (int i = 0; i < 64; i++)
		set_metrics(&m[i], i);
	if (mode == MODE_EXPLAIN)
		nodes = malloc(sizeof(*nodes) * (size_t) dsl_explain_count(p));
	for (;;)
	{
		double		t0 = now(),
					t;
		int64_t		hits = 0;

		for (int64_t i = 0; i < iters; i++)
		{
			const DslMetrics *mi = &m[i & 63];
			bool		r = false;

			if (mode == MODE_HAND)
				r = ex->hand(mi);
			else
			{
				iter		it = {0};
				DslFileSource src = {next_files, &it};
				DslInput	in = {mi, &props, &src};

				if (mode == MODE_DSL)
					dsl_eval(p, &in, &r);
				else
					dsl_explain(p, &in, &r, nodes);
			}
			hits += r;
		}
		t = now() - t0;
		sink = hits;
		if (t >= min_seconds)
		{
			free(nodes);
			return (double) iters / t;
		}
		iters *= t < min_seconds / 8 ? 8 : 2;
	}
}

/* Check that both sides agree on every metrics variant. */
static bool
agree(const DslProgram *p, const example *ex)
{
	for (int i = 0; i < 64; i++)
	{
		DslMetrics m;
		iter		it = {0};
		DslFileSource src = {next_files, &it};
		DslInput	in = {&m, &props, &src};
		bool		r;

		set_metrics(&m, i);
		if (dsl_eval(p, &in, &r) != DSL_OK || r != ex->hand(&m))
			return false;
	}
	return true;
}

static void
human(double r, char *buf, size_t n)
{
	if (r >= 1e6)
		snprintf(buf, n, "%.1fM", r / 1e6);
	else if (r >= 1e3)
		snprintf(buf, n, "%.1fk", r / 1e3);
	else
		snprintf(buf, n, "%.1f", r);
}

int
main(int argc, char **argv)
{
	double		secs = argc > 1 ? atof(argv[1]) : 0.5;
	int			failures = 0;

	files = malloc(sizeof(DslFile) * NFILES);
	srand(42);
	for (size_t i = 0; i < NFILES; i++)
	{
		int			r = rand();

		files[i].size = (int64_t) (r % 2048) * 1048576 + (r % 1000);
		files[i].records = (r >> 3) % 100000;
		files[i].has_position_deletes = (r >> 5) % 7 == 0;
		files[i].has_equality_deletes = (r >> 7) % 11 == 0;
		files[i].has_deletes = files[i].has_position_deletes || files[i].has_equality_deletes;
	}

	printf("%-4s %-14s %-14s %-7s %s\n", "#", "dsl evals/s", "hand evals/s", "ratio", "expression");
	for (size_t e = 0; e < sizeof(examples) / sizeof(examples[0]); e++)
	{
		const example *ex = &examples[e];
		DslError	err;
		DslProgram *p = dsl_compile(ex->expr, strlen(ex->expr), NULL, &err);
		double		d,
					h;
		char		ds[32],
					hs[32];

		if (p == NULL)
		{
			printf("compile error: %s\n", err.message);
			return 1;
		}
		if (!agree(p, ex))
		{
			printf("MISMATCH: %s\n", ex->expr);
			failures++;
		}
		d = rate(p, ex, MODE_DSL, secs);
		h = rate(p, ex, MODE_HAND, secs);
		human(d, ds, sizeof(ds));
		human(h, hs, sizeof(hs));
		if (ex->files)
		{
			char		fd[32],
						fh[32];

			human(d * NFILES, fd, sizeof(fd));
			human(h * NFILES, fh, sizeof(fh));
			printf("%-4zu %-14s %-14s %-7.2f %s\n", e + 1, ds, hs, h / d, ex->expr);
			printf("%-4s %-14s %-14s %-7s   (files/s over %d files)\n", "", fd, fh, "", NFILES);
		}
		else
			printf("%-4zu %-14s %-14s %-7.2f %s\n", e + 1, ds, hs, h / d, ex->expr);
		if (e == 0)
		{
			double		x = rate(p, ex, MODE_EXPLAIN, secs);
			char		xs[32];

			human(x, xs, sizeof(xs));
			printf("%-4s %-14s %-14s %-7.2f   (explain mode, same expression)\n", "1x", xs, hs, h / x);
		}
		dsl_free(p);
	}
	free(files);
	return failures ? 1 : 0;
}
