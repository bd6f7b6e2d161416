/*-------------------------------------------------------------------------
 *
 * fuzz_dsl.c
 *		libFuzzer target for the policy condition language (src/dsl/).
 *
 * Compiles arbitrary bytes.  When they compile, evaluates the program over
 * three fixed inputs (ordinary values; zeros, so divisions fail; extreme
 * values, so arithmetic overflows), in fast mode and in explain mode, and
 * aborts if the two modes disagree on the result or the outcome; renders
 * the explanation as text too.  Run with `make fuzz-dsl`.
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/dsl.h"

static const char *
get_prop(void *arg, const char *name)
{
	static const char *const kv[][2] = {
		{"write.target-file-size-bytes", "536870912"},
		{"maintenance.disabled", "false"},
		{"target-file-size-mb", "128"},
		{"x", "0"},
		{"d", "0.5"},
		{"s", "text"},
		{"big", "9223372036854775807"},
	};

	(void) arg;
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (strcmp(kv[i][0], name) == 0)
			return kv[i][1];
	return NULL;
}

typedef struct iter
{
	const DslFile *files;
	size_t		n;
	size_t		pos;
}			iter;

static int
next_files(void *arg, const DslFile **files, size_t *nfiles)
{
	iter	   *it = arg;
	size_t		k;

	if (it->pos >= it->n)
		return 0;
	k = it->n - it->pos < 3 ? it->n - it->pos : 3;
	*files = it->files + it->pos;
	*nfiles = k;
	it->pos += k;
	return 1;
}

static void
fill(DslMetrics *m, int64_t base)
{
	memset(m, 0, sizeof(*m));
	for (int v = 0; v < DSL_VAR_COUNT; v++)
		dsl_metrics_set(m, (DslVar) v, base == INT64_MAX ? base : base * (v + 1),
						base == INT64_MAX ? 1e300 : (double) base * 1.5);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	DslError	err;
	DslProgram *p = dsl_compile((const char *) data, size, NULL, &err);
	static const DslFile files[] = {
		{0, 0, false, false, false},
		{1048576, 10, true, true, false},
		{INT64_MAX, INT64_MAX, true, false, true},
		{536870911, 1, false, false, false},
		{2147483648LL, 100000, true, true, true},
	};
	static const int64_t bases[] = {100, 0, INT64_MAX};
	DslExplainNode *nodes;
	char		text[4096];

	if (p == NULL)
	{
		if (err.kind == DSL_ERROR_NONE || err.message[0] == '\0' ||
			strchr(err.excerpt, '^') == NULL)
			abort();
		return 0;
	}
	nodes = malloc(sizeof(*nodes) * (size_t) (dsl_explain_count(p) + 1));
	for (int i = 0; i < 3; i++)
	{
		DslMetrics	m;
		DslProperties props = {get_prop, NULL};
		iter		it1 = {files, i == 1 ? 0 : 5, 0};
		iter		it2 = it1;
		DslFileSource src1 = {next_files, &it1};
		DslFileSource src2 = {next_files, &it2};
		DslInput	in1 = {&m, &props, &src1};
		DslInput	in2 = {&m, &props, &src2};
		bool		r1,
					r2;
		DslOutcome	o1,
					o2;

		fill(&m, bases[i]);
		o1 = dsl_eval(p, &in1, &r1);
		o2 = dsl_explain(p, &in2, &r2, nodes);
		if (o1 != o2 || r1 != r2)
		{
			fprintf(stderr, "fast (%d, %d) and explain (%d, %d) disagree\n",
					o1, r1, o2, r2);
			abort();
		}
		dsl_explain_text(p, nodes, r2, o2, text, sizeof(text));
	}
	free(nodes);
	dsl_free(p);
	return 0;
}
