/*-------------------------------------------------------------------------
 *
 * row_filter.c
 *	  The "where" of a deletion: the parsed filter bound to a table's
 *	  columns, judged per data file on its partition and metrics, and
 *	  written as a DuckDB predicate (row_filter.h gives the grammar and
 *	  semantics).
 *
 * Rules: plain C; the text is parsed by compact_filter.c's bounded parser
 * only; each leaf is bound once (its field id, type and literals as
 * int64 or bytes), so judging a file parses nothing of the filter; a file
 * is ALL or NONE only when proven (three-valued: may a row be TRUE, FALSE,
 * NULL), an unreadable metric or partition value proves nothing; the
 * DuckDB text is printed from bound values only.
 *
 * src/iceberg/compact/row_filter.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/compact/row_filter.h"
#include "iceberg/compact/filter_tree.h"
#include "iceberg/iceberg_internal.h"
#include "io/io.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define US_PER_DAY	INT64_C(86400000000)
#define US_PER_HOUR INT64_C(3600000000)

typedef struct RNode
{
	IcebergFilterKind kind;
	bool		negate;
	IcebergFilterOp op;
	struct RNode *a;
	struct RNode *b;
	/* leaves */
	int32_t		field_id;
	IcebergTypeId type;
	bool		required;
	int			nvals;
	int64_t    *ints;			/* non-string columns */
	char	  **strs;			/* string columns */
} RNode;

struct IcebergRowFilter
{
	RNode	   *root;
};

static bool
rf_oom(TmsError *err)
{
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return false;
}

static void
free_rnode(RNode *n)
{
	if (n == NULL)
		return;
	free_rnode(n->a);
	free_rnode(n->b);
	for (int i = 0; n->strs != NULL && i < n->nvals; i++)
		io_free(n->strs[i]);
	io_free(n->strs);
	io_free(n->ints);
	io_free(n);
}

void
iceberg_row_filter_free(IcebergRowFilter *f)
{
	if (f == NULL)
		return;
	free_rnode(f->root);
	io_free(f);
}

static bool
is_time_type(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_TIMESTAMP || t == ICEBERG_TYPE_TIMESTAMPTZ ||
		t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS;
}

static bool
is_nanos(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_TIMESTAMP_NS || t == ICEBERG_TYPE_TIMESTAMPTZ_NS;
}

static bool
filterable(IcebergTypeId t)
{
	return t == ICEBERG_TYPE_BOOLEAN || t == ICEBERG_TYPE_INT || t == ICEBERG_TYPE_LONG ||
		t == ICEBERG_TYPE_DATE || is_time_type(t) || t == ICEBERG_TYPE_STRING;
}

/* The column a leaf names: exact, else the one case-insensitive match. */
static const IcebergColumn *
find_column(const IcebergSchema *s, const char *name, int *nfold)
{
	const IcebergColumn *c = NULL;

	*nfold = 0;
	for (int i = 0; i < s->ncolumns; i++)
		if (strcmp(s->columns[i].name, name) == 0)
		{
			*nfold = 1;
			return &s->columns[i];
		}
	for (int i = 0; i < s->ncolumns; i++)
		if (strcasecmp(s->columns[i].name, name) == 0)
		{
			c = &s->columns[i];
			(*nfold)++;
		}
	return *nfold == 1 ? c : NULL;
}

/* "a, b, c" (the first columns of the schema) into buf. */
static void
column_list(const IcebergSchema *s, char *buf, size_t size)
{
	size_t		used = 0;

	buf[0] = '\0';
	for (int i = 0; i < s->ncolumns && used + 1 < size; i++)
	{
		int			n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
								 s->columns[i].name);

		if (n < 0 || (size_t) n >= size - used)
		{
			if (size > 4)
				strcpy(buf + size - 4, "...");
			return;
		}
		used += (size_t) n;
	}
}

static bool
bind_lits(RNode *r, const IcebergFilterNode *n, const IcebergColumn *c, TmsError *err)
{
	bool		str = c->type == ICEBERG_TYPE_STRING;

	r->nvals = n->nlits;
	if (str)
		r->strs = io_calloc((size_t) n->nlits + 1, sizeof(char *));
	else
		r->ints = io_calloc((size_t) n->nlits + 1, sizeof(int64_t));
	if (r->strs == NULL && r->ints == NULL)
		return rf_oom(err);
	for (int i = 0; i < n->nlits; i++)
	{
		const IcebergFilterLit *l = &n->lits[i];
		bool		ok;

		if (str)
		{
			ok = l->kind == IF_STRING;
			if (ok && (r->strs[i] = io_strdup(l->text)) == NULL)
				return rf_oom(err);
		}
		else
			ok = iceberg_filter_lit_int(l, c->type, &r->ints[i]);
		if (!ok)
		{
			tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
						  "invalid literal for column \"%.200s\" in the where filter", c->name);
			tms_error_detail(err, "%s%.200s%s is not a value of type %.100s.",
							 l->kind == IF_STRING ? "'" : "",
							 l->kind == IF_BOOL ? (l->b ? "true" : "false") : l->text,
							 l->kind == IF_STRING ? "'" : "", c->type_text);
			tms_error_hint(err, "%s",
						   str ? "Quote a string: name = 'text'." :
						   c->type == ICEBERG_TYPE_BOOLEAN ? "Write true or false." :
						   c->type == ICEBERG_TYPE_DATE ? "Write a date as 'YYYY-MM-DD'." :
						   is_time_type(c->type) ?
						   "Write a timestamp as 'YYYY-MM-DD HH:MM:SS' (with Z or +HH:MM for a zoned column)." :
						   "Write an integer without quotes.");
			return false;
		}
	}
	return true;
}

static RNode *
bind_node(const IcebergFilterNode *n, const IcebergSchema *s, TmsError *err)
{
	RNode	   *r = io_calloc(1, sizeof(RNode));
	const IcebergColumn *c;
	int			nfold;

	if (r == NULL)
	{
		rf_oom(err);
		return NULL;
	}
	r->kind = n->kind;
	r->negate = n->negate;
	r->op = n->op;
	if (n->kind == IF_AND || n->kind == IF_OR || n->kind == IF_NOT)
	{
		if ((r->a = bind_node(n->a, s, err)) == NULL ||
			(n->b != NULL && (r->b = bind_node(n->b, s, err)) == NULL))
		{
			free_rnode(r);
			return NULL;
		}
		return r;
	}
	c = find_column(s, n->name, &nfold);
	if (c == NULL)
	{
		char		cols[512];

		column_list(s, cols, sizeof(cols));
		tms_error_set(err, nfold > 1 ? ICEBERG_ERR_INVALID_ARGUMENT : ICEBERG_ERR_NOT_FOUND,
					  nfold > 1 ? "column \"%.200s\" of the where filter is ambiguous" :
					  "column \"%.200s\" of the where filter does not exist", n->name);
		tms_error_detail(err, "The table's columns are %s.", cols);
		tms_error_hint(err, "%s", nfold > 1 ?
					   "Quote the name as the schema spells it: \"Name\"." :
					   "Name a top-level column of the table's current schema.");
		free_rnode(r);
		return NULL;
	}
	if (!filterable(c->type))
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "column \"%.200s\" of type %.100s cannot be filtered in a where", c->name,
					  c->type_text);
		tms_error_detail(err, "A deletion filters columns of type boolean, int, long, date, timestamp, timestamptz, timestamp_ns, timestamptz_ns and string.");
		tms_error_hint(err, "Delete these rows with DELETE FROM ... WHERE on Spark or Trino.");
		free_rnode(r);
		return NULL;
	}
	r->field_id = c->id;
	r->type = c->type;
	r->required = c->required;
	if (!bind_lits(r, n, c, err))
	{
		free_rnode(r);
		return NULL;
	}
	return r;
}

bool
iceberg_row_filter_bind(const char *text, const IcebergSchema *schema, IcebergRowFilter **out,
						TmsError *err)
{
	IcebergPartitionFilter *parsed;
	IcebergRowFilter *f;

	*out = NULL;
	if (!iceberg_partition_filter_parse(text, &parsed, err))
		return false;
	f = io_calloc(1, sizeof(IcebergRowFilter));
	if (f == NULL)
	{
		iceberg_partition_filter_free(parsed);
		return rf_oom(err);
	}
	f->root = bind_node(iceberg_partition_filter_root(parsed), schema, err);
	iceberg_partition_filter_free(parsed);
	if (f->root == NULL)
	{
		io_free(f);
		return false;
	}
	*out = f;
	return true;
}

IcebergRowFilter *
iceberg_row_filter_less_than(int32_t field_id, IcebergTypeId t, bool required, int64_t value)
{
	IcebergRowFilter *f = io_calloc(1, sizeof(IcebergRowFilter));
	RNode	   *n = io_calloc(1, sizeof(RNode));
	int64_t    *v = io_calloc(1, sizeof(int64_t));

	if (f == NULL || n == NULL || v == NULL)
	{
		io_free(f);
		io_free(n);
		io_free(v);
		return NULL;
	}
	n->kind = IF_CMP;
	n->op = IF_LT;
	n->field_id = field_id;
	n->type = t;
	n->required = required;
	n->nvals = 1;
	n->ints = v;
	v[0] = value;
	f->root = n;
	return f;
}

/* ---------------------------------------------------------------------
 * Partition values (shared with retention)
 * ---------------------------------------------------------------------
 */

static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t		q = a / b;

	return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int
iceberg_partition_long(const char *text, size_t len, int n, int64_t *out)
{
	size_t		i;
	int			k = 0;

	if (text == NULL || len == 0 || text[0] != '[')
		return -1;
	i = 1;
	while (i < len)
	{
		size_t		start = i;

		/* one value: a string (skipped with its escapes) or a bare token */
		if (text[i] == '"')
		{
			for (i++; i < len && text[i] != '"'; i++)
				if (text[i] == '\\')
					i++;
			i++;
		}
		else
			while (i < len && text[i] != ',' && text[i] != ']')
				i++;
		if (k == n)
		{
			char		buf[32];
			char	   *end;
			size_t		tl = i - start;

			if (tl == 4 && strncmp(text + start, "null", 4) == 0)
				return 0;
			if (tl == 0 || tl >= sizeof(buf))
				return -1;
			memcpy(buf, text + start, tl);
			buf[tl] = '\0';
			*out = strtoll(buf, &end, 10);
			return *end == '\0' && (buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')) ? 1 : -1;
		}
		if (i >= len || text[i] != ',')
			return -1;
		i++;
		k++;
	}
	return -1;
}

bool
iceberg_transform_range(IcebergTypeId t, const char *transform, int64_t v, int64_t *lo,
						int64_t *hi)
{
	int64_t		lo_days,
				hi_days;
	int64_t		scale = is_nanos(t) ? 1000 : 1;

	if (strcmp(transform, "identity") == 0)
	{
		*lo = v;
		return !__builtin_add_overflow(v, 1, hi);
	}
	if (t != ICEBERG_TYPE_DATE && !is_time_type(t))
		return false;
	if (v < -INT64_C(1000000000) || v > INT64_C(1000000000))
		return false;			/* beyond any instant a timestamp holds */
	if (strcmp(transform, "year") == 0)
	{
		lo_days = io_days_from_civil(1970 + v, 1, 1);
		hi_days = io_days_from_civil(1970 + v + 1, 1, 1);
	}
	else if (strcmp(transform, "month") == 0)
	{
		int64_t		y = 1970 + floor_div(v, 12);
		unsigned	m = (unsigned) (v - floor_div(v, 12) * 12) + 1;

		lo_days = io_days_from_civil(y, m, 1);
		hi_days = m == 12 ? io_days_from_civil(y + 1, 1, 1) : io_days_from_civil(y, m + 1, 1);
	}
	else if (strcmp(transform, "day") == 0)
	{
		lo_days = v;
		hi_days = v + 1;
	}
	else if (strcmp(transform, "hour") == 0 && is_time_type(t))
		return !__builtin_mul_overflow(v, US_PER_HOUR * scale, lo) &&
			!__builtin_mul_overflow(v + 1, US_PER_HOUR * scale, hi);
	else
		return false;
	if (t == ICEBERG_TYPE_DATE)
	{
		*lo = lo_days;
		*hi = hi_days;
		return true;
	}
	return !__builtin_mul_overflow(lo_days, US_PER_DAY * scale, lo) &&
		!__builtin_mul_overflow(hi_days, US_PER_DAY * scale, hi);
}

/* ---------------------------------------------------------------------
 * Judging a data file
 * ---------------------------------------------------------------------
 */

/* What a file tells of one column: its non-null values lie in [lo, hi]. */
typedef struct ColFacts
{
	int64_t		records;
	bool		nulls_known;
	int64_t		nulls;
	bool		has_lo;
	bool		has_hi;
	int64_t		lo;
	int64_t		hi;
	const uint8_t *slo;			/* string bounds */
	size_t		llo;
	const uint8_t *shi;
	size_t		lhi;
} ColFacts;

/* May some row be TRUE, FALSE, NULL? */
typedef struct May
{
	bool		t;
	bool		f;
	bool		n;
} May;

/* A bound of a non-string column (4 or 8 bytes little-endian, 1 for boolean). */
static bool
decode_bound(IcebergTypeId t, const uint8_t *b, size_t n, int64_t *out)
{
	uint64_t	u = 0;

	if (t == ICEBERG_TYPE_BOOLEAN)
	{
		if (n != 1)
			return false;
		*out = b[0] != 0;
		return true;
	}
	if (t == ICEBERG_TYPE_INT || t == ICEBERG_TYPE_DATE)
	{
		if (n != 4)
			return false;
		u = (uint64_t) b[0] | (uint64_t) b[1] << 8 | (uint64_t) b[2] << 16 |
			(uint64_t) b[3] << 24;
		*out = (int64_t) (int32_t) (uint32_t) u;
		return true;
	}
	if (n != 8)
		return false;
	for (int i = 7; i >= 0; i--)
		u = u << 8 | b[i];
	*out = (int64_t) u;
	return true;
}

static int	partition_string(const char *text, size_t len, int n, const uint8_t **s,
							 size_t *slen);

/* The facts of leaf n's column in file e; metrics: read its metrics too. */
static void
col_facts(const RNode *n, const IcebergTableMetadata *md, const IcebergManifestEntry *e,
		  bool metrics, ColFacts *cf)
{
	const IcebergPartitionSpec *spec = iceberg_metadata_spec(md, e->spec_id);
	bool		str = n->type == ICEBERG_TYPE_STRING;

	memset(cf, 0, sizeof(*cf));
	cf->records = e->record_count;
	if (n->required)
	{
		cf->nulls_known = true;
		cf->nulls = 0;
	}
	for (int k = 0; spec != NULL && k < spec->nfields; k++)
	{
		const IcebergPartitionField *pf = &spec->fields[k];
		int64_t		v = 0,
					lo,
					hi;
		int			rc;

		if (pf->source_id != n->field_id)
			continue;
		if (str)
		{
			/* identity of a string: the value itself (when unescaped) */
			rc = strcmp(pf->transform, "identity") != 0 ? -1 :
				partition_string(e->partition, e->partition_len, k, &cf->slo, &cf->llo);
			cf->nulls_known |= rc >= 0;
			cf->nulls = rc == 0 ? cf->records : rc == 1 ? 0 : cf->nulls;
			if (rc == 1)
			{
				cf->shi = cf->slo;
				cf->lhi = cf->llo;
				cf->has_lo = cf->has_hi = true;
				return;			/* exact: the metrics add nothing */
			}
			cf->slo = NULL;
			continue;
		}
		rc = iceberg_partition_long(e->partition, e->partition_len, k, &v);
		if (rc == 0 && (strcmp(pf->transform, "identity") == 0 || strcmp(pf->transform, "year") == 0 ||
						strcmp(pf->transform, "month") == 0 || strcmp(pf->transform, "day") == 0 ||
						strcmp(pf->transform, "hour") == 0))
		{
			/* a null partition value: the column is null in every row */
			cf->nulls_known = true;
			cf->nulls = cf->records;
			continue;
		}
		if (rc != 1 || !iceberg_transform_range(n->type, pf->transform, v, &lo, &hi))
			continue;
		cf->nulls_known = true; /* a non-null value: no row is null */
		cf->nulls = 0;
		if (!cf->has_lo || lo > cf->lo)
			cf->lo = lo;
		if (!cf->has_hi || hi - 1 < cf->hi)
			cf->hi = hi - 1;
		cf->has_lo = cf->has_hi = true;
	}
	if (!metrics)
		return;
	if (!cf->nulls_known &&
		iceberg_metric_count(e->null_value_counts, e->null_value_counts_len, n->field_id,
							 &cf->nulls) == 1 && cf->nulls >= 0)
		cf->nulls_known = true;
	{
		const uint8_t *b;
		size_t		len;
		int64_t		v;

		if (iceberg_metric_bound(e->lower_bounds, e->lower_bounds_len, n->field_id, &b, &len) == 1)
		{
			if (str)
			{
				cf->slo = b;
				cf->llo = len;
			}
			else if (decode_bound(n->type, b, len, &v) && (!cf->has_lo || v > cf->lo))
			{
				cf->lo = v;
				cf->has_lo = true;
			}
		}
		if (iceberg_metric_bound(e->upper_bounds, e->upper_bounds_len, n->field_id, &b, &len) == 1)
		{
			if (str)
			{
				cf->shi = b;
				cf->lhi = len;
			}
			else if (decode_bound(n->type, b, len, &v) && (!cf->has_hi || v < cf->hi))
			{
				cf->hi = v;
				cf->has_hi = true;
			}
		}
	}
	if (str)
	{
		cf->has_lo = cf->slo != NULL;
		cf->has_hi = cf->shi != NULL;
	}
}

/*
 * The n-th value of a partition's canonical JSON array as a string
 * without escapes (*s, *len borrowed): 1; 0 when null; -1 otherwise (a
 * string with an escape proves nothing here).
 */
static int
partition_string(const char *text, size_t len, int n, const uint8_t **s, size_t *slen)
{
	size_t		i = 1;
	int			k = 0;

	if (text == NULL || len == 0 || text[0] != '[')
		return -1;
	while (i < len)
	{
		size_t		start = i;
		bool		escaped = false;

		if (text[i] == '"')
		{
			for (i++; i < len && text[i] != '"'; i++)
				if (text[i] == '\\')
				{
					escaped = true;
					i++;
				}
			if (i >= len)
				return -1;
			i++;
		}
		else
			while (i < len && text[i] != ',' && text[i] != ']')
				i++;
		if (k == n)
		{
			if (i - start == 4 && strncmp(text + start, "null", 4) == 0)
				return 0;
			if (text[start] != '"' || escaped)
				return -1;
			*s = (const uint8_t *) text + start + 1;
			*slen = i - start - 2;
			return 1;
		}
		if (i >= len || text[i] != ',')
			return -1;
		i++;
		k++;
	}
	return -1;
}

static int
bytes_cmp(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	int			c = memcmp(a, b, la < lb ? la : lb);

	return c != 0 ? c : la < lb ? -1 : la > lb ? 1 : 0;
}

/* Compare the file's lower (lower) or upper bound with literal i. */
static int
bound_cmp(const RNode *n, const ColFacts *cf, bool lower, int i)
{
	if (n->type == ICEBERG_TYPE_STRING)
	{
		const char *s = n->strs[i];

		return lower ? bytes_cmp(cf->slo, cf->llo, (const uint8_t *) s, strlen(s)) :
			bytes_cmp(cf->shi, cf->lhi, (const uint8_t *) s, strlen(s));
	}
	{
		int64_t		b = lower ? cf->lo : cf->hi;

		return b < n->ints[i] ? -1 : b > n->ints[i] ? 1 : 0;
	}
}

/* For the non-null values of a file: may col = literal i, may col <> it. */
static void
may_eq(const RNode *n, const ColFacts *cf, int i, bool *t, bool *f)
{
	int			lo = cf->has_lo ? bound_cmp(n, cf, true, i) : -1;
	int			hi = cf->has_hi ? bound_cmp(n, cf, false, i) : 1;

	*t = lo <= 0 && hi >= 0;
	*f = !(lo == 0 && hi == 0);
}

static May
judge_leaf(const RNode *n, const ColFacts *cf)
{
	May			m = {false, false, false};
	bool		some_null = !(cf->nulls_known && cf->nulls == 0);
	bool		some_value = !(cf->nulls_known && cf->nulls >= cf->records);

	if (cf->records <= 0)
		return m;
	if (n->kind == IF_NULL)
	{
		m.t = n->negate ? some_value : some_null;
		m.f = n->negate ? some_null : some_value;
		return m;
	}
	m.n = some_null;
	if (!some_value)
		return m;
	if (n->kind == IF_IN)
	{
		bool		all_one = false;

		for (int i = 0; i < n->nvals; i++)
		{
			bool		t,
						f;

			may_eq(n, cf, i, &t, &f);
			m.t |= t;
			all_one |= !f;
		}
		m.f = !all_one;
		if (n->negate)
		{
			bool		x = m.t;

			m.t = m.f;
			m.f = x;
		}
		return m;
	}
	switch (n->op)
	{
		case IF_EQ:
			may_eq(n, cf, 0, &m.t, &m.f);
			break;
		case IF_NE:
			may_eq(n, cf, 0, &m.f, &m.t);
			break;
		case IF_LT:
			m.t = !cf->has_lo || bound_cmp(n, cf, true, 0) < 0;
			m.f = !cf->has_hi || bound_cmp(n, cf, false, 0) >= 0;
			break;
		case IF_LE:
			m.t = !cf->has_lo || bound_cmp(n, cf, true, 0) <= 0;
			m.f = !cf->has_hi || bound_cmp(n, cf, false, 0) > 0;
			break;
		case IF_GT:
			m.t = !cf->has_hi || bound_cmp(n, cf, false, 0) > 0;
			m.f = !cf->has_lo || bound_cmp(n, cf, true, 0) <= 0;
			break;
		case IF_GE:
			m.t = !cf->has_hi || bound_cmp(n, cf, false, 0) >= 0;
			m.f = !cf->has_lo || bound_cmp(n, cf, true, 0) < 0;
			break;
	}
	return m;
}

/*
 * SQL's three-valued AND, OR and NOT over what may hold in some row; the
 * rows of the two sides are not known to be the same ones, so every
 * combination that some row could make is taken.
 */
static May
judge(const RNode *n, const IcebergTableMetadata *md, const IcebergManifestEntry *e,
	  bool metrics)
{
	May			a,
				b,
				m;

	switch (n->kind)
	{
		case IF_AND:
			a = judge(n->a, md, e, metrics);
			b = judge(n->b, md, e, metrics);
			m.t = a.t && b.t;
			m.f = a.f || b.f;
			m.n = (a.n && (b.t || b.n)) || (b.n && (a.t || a.n));
			return m;
		case IF_OR:
			a = judge(n->a, md, e, metrics);
			b = judge(n->b, md, e, metrics);
			m.t = a.t || b.t;
			m.f = a.f && b.f;
			m.n = (a.n && (b.f || b.n)) || (b.n && (a.f || a.n));
			return m;
		case IF_NOT:
			a = judge(n->a, md, e, metrics);
			m.t = a.f;
			m.f = a.t;
			m.n = a.n;
			return m;
		default:
			{
				ColFacts	cf;

				col_facts(n, md, e, metrics, &cf);
				return judge_leaf(n, &cf);
			}
	}
}

static IcebergRowMatch
match_of(May m)
{
	if (!m.t)
		return ICEBERG_ROWS_NONE;
	if (!m.f && !m.n)
		return ICEBERG_ROWS_ALL;
	return ICEBERG_ROWS_SOME;
}

IcebergRowMatch
iceberg_row_filter_classify(const IcebergRowFilter *f, const IcebergTableMetadata *md,
							const IcebergManifestEntry *e, bool *by_partition)
{
	IcebergRowMatch m = match_of(judge(f->root, md, e, false));

	*by_partition = m != ICEBERG_ROWS_SOME;
	if (*by_partition)
		return m;
	return match_of(judge(f->root, md, e, true));
}

/* ---------------------------------------------------------------------
 * The estimate of the rows matched
 * ---------------------------------------------------------------------
 */

/*
 * Of a file's rows, the fractions for which a node is TRUE and NULL (the
 * rest are FALSE), the columns taken as independent and their values as
 * spread evenly between their bounds, as PostgreSQL's clause selectivity
 * does with a histogram (src/backend/optimizer/path/clausesel.c); without
 * bounds its defaults: 1/3 for a range, 1/200 for an equality.
 */
typedef struct Frac
{
	double		t;
	double		n;
} Frac;

#define EST_DEFAULT_INEQ (1.0 / 3.0)
#define EST_DEFAULT_EQ 0.005

static double
clamp01(double x)
{
	return x < 0 ? 0 : x > 1 ? 1 : x;
}

/*
 * A string as a number in [0, 1): its bytes after the common prefix of
 * the bounds lo and hi, base 256 (PostgreSQL's convert_string_to_scalar,
 * on bytes).
 */
static double
string_scalar(const uint8_t *s, size_t len, size_t skip)
{
	double		v = 0,
				scale = 1.0 / 256;

	for (size_t i = skip; i < len && i < skip + 8; i++, scale /= 256)
		v += s[i] * scale;
	return v;
}

/* The fraction of the non-null values of a column below literal i (or at it: le). */
static double
frac_below(const RNode *n, const ColFacts *cf, int i, bool le)
{
	if (!cf->has_lo || !cf->has_hi)
		return EST_DEFAULT_INEQ;
	if (n->type == ICEBERG_TYPE_STRING)
	{
		const uint8_t *v = (const uint8_t *) n->strs[i];
		size_t		lv = strlen(n->strs[i]),
					skip = 0;
		double		lo,
					hi,
					x;

		while (skip < cf->llo && skip < cf->lhi && cf->slo[skip] == cf->shi[skip])
			skip++;
		if (bytes_cmp(v, lv, cf->slo, cf->llo) < 0 || (!le && bytes_cmp(v, lv, cf->slo, cf->llo) == 0))
			return 0;
		if (bytes_cmp(v, lv, cf->shi, cf->lhi) > 0 || (le && bytes_cmp(v, lv, cf->shi, cf->lhi) == 0))
			return 1;
		lo = string_scalar(cf->slo, cf->llo, skip);
		hi = string_scalar(cf->shi, cf->lhi, skip);
		x = string_scalar(v, lv, skip);
		return hi > lo ? clamp01((x - lo) / (hi - lo)) : 0.5;
	}
	{
		/* the values lo .. hi, each as likely: those below v (v + 1: le) */
		double		span = (double) cf->hi - (double) cf->lo + 1;
		double		below = (double) n->ints[i] - (double) cf->lo + (le ? 1 : 0);

		return span > 0 ? clamp01(below / span) : EST_DEFAULT_INEQ;
	}
}

/* The fraction of the non-null values equal to literal i. */
static double
frac_equal(const RNode *n, const ColFacts *cf, int i)
{
	bool		t,
				f;

	may_eq(n, cf, i, &t, &f);
	if (!t)
		return 0;
	if (!f)
		return 1;
	if (!cf->has_lo || !cf->has_hi)
		return EST_DEFAULT_EQ;
	if (n->type == ICEBERG_TYPE_STRING)
		return EST_DEFAULT_EQ;
	return clamp01(1.0 / ((double) cf->hi - (double) cf->lo + 1));
}

static Frac
estimate_leaf(const RNode *n, const ColFacts *cf)
{
	Frac		r = {0, 0};
	double		nf,
				v = 0;

	if (cf->records <= 0)
		return r;
	nf = cf->nulls_known ? clamp01((double) cf->nulls / (double) cf->records) : 0;
	if (n->kind == IF_NULL)
	{
		r.t = n->negate ? 1 - nf : nf;
		return r;
	}
	if (n->kind == IF_IN)
	{
		for (int i = 0; i < n->nvals; i++)
			v += frac_equal(n, cf, i);
		v = clamp01(v);
		if (n->negate)
			v = 1 - v;
	}
	else
		switch (n->op)
		{
			case IF_EQ:
				v = frac_equal(n, cf, 0);
				break;
			case IF_NE:
				v = 1 - frac_equal(n, cf, 0);
				break;
			case IF_LT:
				v = frac_below(n, cf, 0, false);
				break;
			case IF_LE:
				v = frac_below(n, cf, 0, true);
				break;
			case IF_GT:
				v = 1 - frac_below(n, cf, 0, true);
				break;
			case IF_GE:
				v = 1 - frac_below(n, cf, 0, false);
				break;
		}
	r.t = v * (1 - nf);
	r.n = nf;
	return r;
}

static Frac
estimate(const RNode *n, const IcebergTableMetadata *md, const IcebergManifestEntry *e)
{
	Frac		a,
				b,
				r;

	switch (n->kind)
	{
		case IF_AND:
			a = estimate(n->a, md, e);
			b = estimate(n->b, md, e);
			r.t = a.t * b.t;
			/* not FALSE on either side, not TRUE on both */
			r.n = clamp01((a.t + a.n) * (b.t + b.n) - r.t);
			return r;
		case IF_OR:
			a = estimate(n->a, md, e);
			b = estimate(n->b, md, e);
			r.t = 1 - (1 - a.t) * (1 - b.t);
			/* not TRUE on either side, not FALSE on both */
			r.n = clamp01(1 - r.t - (1 - a.t - a.n) * (1 - b.t - b.n));
			return r;
		case IF_NOT:
			a = estimate(n->a, md, e);
			r.t = clamp01(1 - a.t - a.n);
			r.n = a.n;
			return r;
		default:
			{
				ColFacts	cf;

				col_facts(n, md, e, true, &cf);
				return estimate_leaf(n, &cf);
			}
	}
}

int64_t
iceberg_row_filter_estimate(const IcebergRowFilter *f, const IcebergTableMetadata *md,
							const IcebergManifestEntry *e)
{
	double		rows;

	if (e->record_count <= 0)
		return 0;
	rows = estimate(f->root, md, e).t * (double) e->record_count + 0.5;
	return rows >= (double) e->record_count ? e->record_count : (int64_t) rows;
}

/* ---------------------------------------------------------------------
 * The DuckDB predicate
 * ---------------------------------------------------------------------
 */

static void
sql_column(IoStrBuf *b, const RNode *n, const char *prefix)
{
	switch (n->type)
	{
		case ICEBERG_TYPE_DATE:
			io_sb_printf(b, "date_diff('day', DATE '1970-01-01', %s%d)", prefix, (int) n->field_id);
			break;
		case ICEBERG_TYPE_TIMESTAMP:
		case ICEBERG_TYPE_TIMESTAMPTZ:
			io_sb_printf(b, "epoch_us(%s%d)", prefix, (int) n->field_id);
			break;
		case ICEBERG_TYPE_TIMESTAMP_NS:
		case ICEBERG_TYPE_TIMESTAMPTZ_NS:
			io_sb_printf(b, "epoch_ns(%s%d)", prefix, (int) n->field_id);
			break;
		default:
			io_sb_printf(b, "%s%d", prefix, (int) n->field_id);
			break;
	}
}

static void
sql_literal(IoStrBuf *b, const RNode *n, int i)
{
	if (n->type == ICEBERG_TYPE_STRING)
	{
		io_sb_append(b, "'", 1);
		for (const char *s = n->strs[i]; *s; s++)
			io_sb_append(b, *s == '\'' ? "''" : s, *s == '\'' ? 2 : 1);
		io_sb_append(b, "'", 1);
	}
	else if (n->type == ICEBERG_TYPE_BOOLEAN)
		io_sb_printf(b, "%s", n->ints[i] ? "true" : "false");
	else
		io_sb_printf(b, "CAST('%" PRId64 "' AS BIGINT)", n->ints[i]);
}

static void
sql_node(IoStrBuf *b, const RNode *n, const char *prefix)
{
	static const char *const ops[] = {"=", "<>", "<", "<=", ">", ">="};

	io_sb_append(b, "(", 1);
	switch (n->kind)
	{
		case IF_AND:
		case IF_OR:
			sql_node(b, n->a, prefix);
			io_sb_printf(b, n->kind == IF_AND ? " AND " : " OR ");
			sql_node(b, n->b, prefix);
			break;
		case IF_NOT:
			io_sb_printf(b, "NOT ");
			sql_node(b, n->a, prefix);
			break;
		case IF_NULL:
			sql_column(b, n, prefix);
			io_sb_printf(b, n->negate ? " IS NOT NULL" : " IS NULL");
			break;
		case IF_IN:
			sql_column(b, n, prefix);
			io_sb_printf(b, n->negate ? " NOT IN (" : " IN (");
			for (int i = 0; i < n->nvals; i++)
			{
				if (i)
					io_sb_append(b, ", ", 2);
				sql_literal(b, n, i);
			}
			io_sb_append(b, ")", 1);
			break;
		case IF_CMP:
			sql_column(b, n, prefix);
			io_sb_printf(b, " %s ", ops[n->op]);
			sql_literal(b, n, 0);
			break;
	}
	io_sb_append(b, ")", 1);
}

char *
iceberg_row_filter_sql(const IcebergRowFilter *f, const char *prefix)
{
	IoStrBuf	b = {0};

	sql_node(&b, f->root, prefix);
	io_sb_append(&b, "", 1);
	if (b.oom)
	{
		io_sb_free(&b);
		return NULL;
	}
	return b.data;
}

/* ---------------------------------------------------------------------
 * The predicate in another engine's SQL (row_filter.h)
 * ---------------------------------------------------------------------
 */

static bool
print_value(const IcebergRowFilterPrinter *p, IoStrBuf *b, const RNode *n, int i)
{
	return p->value(p->arg, b, n->type, n->ints ? n->ints[i] : 0, n->strs ? n->strs[i] : NULL);
}

static bool
print_node(const IcebergRowFilterPrinter *p, IoStrBuf *b, const RNode *n)
{
	static const char *const ops[] = {"=", "<>", "<", "<=", ">", ">="};
	bool		ok = true;

	io_sb_putc(b, '(');
	switch (n->kind)
	{
		case IF_AND:
		case IF_OR:
			ok = print_node(p, b, n->a);
			io_sb_puts(b, n->kind == IF_AND ? " AND " : " OR ");
			ok = ok && print_node(p, b, n->b);
			break;
		case IF_NOT:
			io_sb_puts(b, "NOT ");
			ok = print_node(p, b, n->a);
			break;
		case IF_NULL:
			ok = p->column(p->arg, b, n->field_id, n->type);
			io_sb_puts(b, n->negate ? " IS NOT NULL" : " IS NULL");
			break;
		case IF_IN:
			ok = p->column(p->arg, b, n->field_id, n->type);
			io_sb_puts(b, n->negate ? " NOT IN (" : " IN (");
			for (int i = 0; ok && i < n->nvals; i++)
			{
				if (i)
					io_sb_puts(b, ", ");
				ok = print_value(p, b, n, i);
			}
			io_sb_putc(b, ')');
			break;
		case IF_CMP:
			ok = p->column(p->arg, b, n->field_id, n->type);
			io_sb_printf(b, " %s ", ops[n->op]);
			ok = ok && print_value(p, b, n, 0);
			break;
	}
	io_sb_putc(b, ')');
	return ok && !b->oom;
}

bool
iceberg_row_filter_print(const IcebergRowFilter *f, const IcebergRowFilterPrinter *p,
						 IoStrBuf *b)
{
	return f != NULL && f->root != NULL && print_node(p, b, f->root);
}
