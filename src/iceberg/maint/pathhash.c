/*-------------------------------------------------------------------------
 *
 * pathhash.c
 *	  Compact sets of 64-bit path hashes (see pathhash.h) and the
 *	  canonical-location helper of expiry and orphan cleanup.
 *
 * Rules: plain C, no allocation in proportion to anything but the members
 * actually added; every failure is a TmsError value.
 *
 * src/iceberg/maint/pathhash.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "iceberg/maint/pathhash.h"
#include "io/io.h"

#include <stdlib.h>
#include <string.h>

/* See pathhash.h. */
uint64_t
iceberg_path_hash(const void *data, size_t len, uint64_t seed)
{
	uint64_t	h = iceberg_hash_bytes(ICEBERG_HASH_INIT ^ seed, data, len);

	/* splitmix64 finaliser: FNV-1a's high bits mix poorly on their own */
	h ^= (uint64_t) len;
	h += UINT64_C(0x9e3779b97f4a7c15);
	h = (h ^ (h >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	h = (h ^ (h >> 27)) * UINT64_C(0x94d049bb133111eb);
	h ^= h >> 31;
	return h;
}

/*
 * In-place heapsort: glibc's qsort is a merge sort that mallocs a copy of
 * the array, which would double the peak memory these sets exist to keep
 * small.
 */
static void
sift_down(uint64_t *v, size_t start, size_t n)
{
	size_t		root = start;

	for (;;)
	{
		size_t		child = 2 * root + 1;
		uint64_t	t;

		if (child >= n)
			return;
		if (child + 1 < n && v[child + 1] > v[child])
			child++;
		if (v[root] >= v[child])
			return;
		t = v[root];
		v[root] = v[child];
		v[child] = t;
		root = child;
	}
}

void
iceberg_sort_u64(uint64_t *v, size_t n)
{
	size_t		i;

	if (n < 2)
		return;
	for (i = n / 2; i-- > 0;)
		sift_down(v, i, n);
	for (i = n - 1; i > 0; i--)
	{
		uint64_t	t = v[0];

		v[0] = v[i];
		v[i] = t;
		sift_down(v, 0, i);
	}
}

/* The same for pairs, ordered by (a[0], a[1]). */
static bool
pair_less(const uint64_t *x, const uint64_t *y)
{
	return x[0] < y[0] || (x[0] == y[0] && x[1] < y[1]);
}

static void
pair_swap(uint64_t *x, uint64_t *y)
{
	uint64_t	t0 = x[0],
				t1 = x[1];

	x[0] = y[0];
	x[1] = y[1];
	y[0] = t0;
	y[1] = t1;
}

static void
sift_down_pairs(uint64_t *v, size_t start, size_t n)
{
	size_t		root = start;

	for (;;)
	{
		size_t		child = 2 * root + 1;

		if (child >= n)
			return;
		if (child + 1 < n && pair_less(&v[2 * child], &v[2 * (child + 1)]))
			child++;
		if (!pair_less(&v[2 * root], &v[2 * child]))
			return;
		pair_swap(&v[2 * root], &v[2 * child]);
		root = child;
	}
}

void
iceberg_sort_u64_pairs(uint64_t *v, size_t n)
{
	size_t		i;

	if (n < 2)
		return;
	for (i = n / 2; i-- > 0;)
		sift_down_pairs(v, i, n);
	for (i = n - 1; i > 0; i--)
	{
		pair_swap(&v[0], &v[2 * i]);
		sift_down_pairs(v, 0, i);
	}
}

/* Sort and deduplicate a->v[0..n). */
static void
compact(IcebergHashArray *a)
{
	size_t		i,
				w = 0;

	if (a->n < 2)
		return;
	iceberg_sort_u64(a->v, a->n);
	for (i = 0; i < a->n; i++)
		if (w == 0 || a->v[w - 1] != a->v[i])
			a->v[w++] = a->v[i];
	a->n = w;
}

bool
iceberg_hash_array_add(IcebergHashArray *a, uint64_t x, TmsError *err)
{
	if (a->n == a->cap)
	{
		size_t		ncap;
		uint64_t   *nv;

		compact(a);
		if (a->max > 0 && a->n >= a->max)
		{
			tms_error_set(err, ICEBERG_ERR_LIMIT,
						  "more than %zu distinct files", a->max);
			return false;
		}
		if (a->n * 3 < a->cap * 2)
			goto append;
		ncap = a->cap < 1024 ? 1024 : a->cap + a->cap / 2;
		if (ncap > SIZE_MAX / sizeof(uint64_t))
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		nv = io_realloc(a->v, ncap * sizeof(uint64_t));
		if (nv == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		a->v = nv;
		a->cap = ncap;
	}
append:
	a->v[a->n++] = x;
	return true;
}

void
iceberg_hash_array_seal(IcebergHashArray *a)
{
	compact(a);
}

bool
iceberg_hash_array_has(const IcebergHashArray *a, uint64_t x)
{
	size_t		lo = 0,
				hi = a->n;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (a->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n && a->v[lo] == x;
}

void
iceberg_hash_array_free(IcebergHashArray *a)
{
	io_free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

/* Slot of x in t (its own or the empty one where it would go). */
static size_t
probe(const uint64_t *slots, size_t nslots, uint64_t x)
{
	size_t		mask = nslots - 1;
	size_t		i = (size_t) (x ^ (x >> 32)) & mask;

	while (slots[i] != 0 && slots[i] != x)
		i = (i + 1) & mask;
	return i;
}

bool
iceberg_hash_table_add(IcebergHashTable *t, uint64_t x, bool *added,
					   TmsError *err)
{
	size_t		i;

	if (x == 0)
		x = 1;
	if ((t->count + 1) * 2 > t->nslots)
	{
		size_t		n = t->nslots ? t->nslots * 2 : 1024;
		uint64_t   *s;
		size_t		k;

		if (n > SIZE_MAX / sizeof(uint64_t))
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		s = io_calloc(n, sizeof(uint64_t));
		if (s == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		for (k = 0; k < t->nslots; k++)
			if (t->slots[k] != 0)
				s[probe(s, n, t->slots[k])] = t->slots[k];
		io_free(t->slots);
		t->slots = s;
		t->nslots = n;
	}
	i = probe(t->slots, t->nslots, x);
	*added = t->slots[i] == 0;
	if (*added)
	{
		t->slots[i] = x;
		t->count++;
	}
	return true;
}

bool
iceberg_hash_table_has(const IcebergHashTable *t, uint64_t x)
{
	if (x == 0)
		x = 1;
	if (t->nslots == 0)
		return false;
	return t->slots[probe(t->slots, t->nslots, x)] == x;
}

void
iceberg_hash_table_free(IcebergHashTable *t)
{
	io_free(t->slots);
	t->slots = NULL;
	t->nslots = t->count = 0;
}

bool
iceberg_location_canonical(const char *path, const char *relative_root,
						   char **out, TmsError *err)
{
	TmsError	ioerr;

	*out = NULL;
	tms_error_clear(&ioerr);
	if (io_location_canonical(path, relative_root, out, &ioerr) == 0)
		return true;
	if (ioerr.code == IO_ERR_OUT_OF_MEMORY)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
				  "cannot canonicalise location \"%.150s\"", path ? path : "");
	tms_error_detail(err, "%s", ioerr.message);
	return false;
}
