/*-------------------------------------------------------------------------
 *
 * pathhash.h
 *	  Compact sets of 64-bit path hashes for expiry and orphan cleanup
 *	  (expire.c, orphan.c), and the canonical-location helper they share.
 *
 * Internal to src/iceberg/ (like iceberg_internal.h; a header of its own
 * so that these files stay independent of the rest of the layer).
 *
 * Rules: a set stores hashes, never strings, so its memory is 8 (or 16)
 * bytes per distinct member times the growth slack (at most 1.5).  A hash
 * collision makes two paths look equal; every caller arranges that this
 * can only keep a file, never delete one.  Every path is hashed in its
 * canonical form (io_location_canonical, src/io/storage/location.c): the one rule
 * for locations, so "s3a://b/x" and "s3://b/x" are the same member.
 *
 * src/iceberg/maint/pathhash.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_PATHHASH_H
#define TMS_ICEBERG_PATHHASH_H

#include "iceberg/iceberg.h"

/* 64-bit hash of bytes (FNV-1a, then a splitmix64 finaliser), seeded. */
extern uint64_t iceberg_path_hash(const void *data, size_t len, uint64_t seed);

/*
 * In-place sorts (heapsort: no allocation, unlike glibc's qsort, which
 * copies the array): n uint64 values, or n pairs of uint64 stored as
 * v[2i], v[2i+1] and ordered by both.
 */
extern void iceberg_sort_u64(uint64_t *v, size_t n);
extern void iceberg_sort_u64_pairs(uint64_t *v, size_t n);

/*
 * A set of uint64 built by appending, then sealed (sorted, deduplicated)
 * and probed by binary search.  Before it grows, the array is sorted and
 * deduplicated in place, and it only grows (by half) when that leaves it
 * more than two-thirds full: memory stays within 12 bytes per distinct
 * member (realloc of a large block is an mremap in glibc, not a copy).
 */
typedef struct IcebergHashArray
{
	uint64_t   *v;
	size_t		n;
	size_t		cap;
	size_t		max;			/* refuse more distinct members (LIMIT) */
} IcebergHashArray;

/* Appends x; false when out of memory or over max (err filled). */
extern bool iceberg_hash_array_add(IcebergHashArray *a, uint64_t x,
								   TmsError *err);

/* Sorts and deduplicates; afterwards _has() works. */
extern void iceberg_hash_array_seal(IcebergHashArray *a);
extern bool iceberg_hash_array_has(const IcebergHashArray *a, uint64_t x);
extern void iceberg_hash_array_free(IcebergHashArray *a);

/*
 * An open-addressing set of uint64 for membership while streaming
 * (load at most 1/2: 16 to 32 bytes per member).
 */
typedef struct IcebergHashTable
{
	uint64_t   *slots;			/* 0: empty (members are never 0) */
	size_t		nslots;
	size_t		count;
} IcebergHashTable;

/* Inserts x; *added tells whether it was new.  False on OOM (err). */
extern bool iceberg_hash_table_add(IcebergHashTable *t, uint64_t x,
								   bool *added, TmsError *err);
extern bool iceberg_hash_table_has(const IcebergHashTable *t, uint64_t x);
extern void iceberg_hash_table_free(IcebergHashTable *t);

/*
 * io_location_canonical as a TmsError: ICEBERG_ERR_INVALID_ARGUMENT
 * ("cannot canonicalise location", the io message as detail) or
 * ICEBERG_ERR_OUT_OF_MEMORY.  *out is malloc'd.
 */
extern bool iceberg_location_canonical(const char *path,
									   const char *relative_root,
									   char **out, TmsError *err);

#endif							/* TMS_ICEBERG_PATHHASH_H */
