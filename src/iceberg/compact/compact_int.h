/*-------------------------------------------------------------------------
 *
 * compact_int.h
 *	  What compact_plan.c shares with compact_commit.c: a map from strings
 *	  to indexes, the manifest-list records kept for a second look and the
 *	  checks of the table (not part of the API; compact.h is).
 *
 * Rules of this file: plain C, errors as IcebergError values; include it
 * only from src/iceberg/compact/compact_*.c.
 *
 * src/iceberg/compact/compact_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_COMPACT_INT_H
#define TMS_ICEBERG_COMPACT_INT_H

#include "iceberg/compact/compact.h"
#include "iceberg/write/write_internal.h"

#define MIB						(INT64_C(1024) * 1024)

/*
 * A map from strings to indexes: the layer's string map (iceberg_strmap,
 * iceberg_internal.h), its keys borrowed (they must outlive the map).
 */
typedef IcebergStrMap StrMap;

/* A manifest-list record kept for a second look: its fields and raw bytes. */
typedef struct ListRec
{
	IcebergManifestFile mf;		/* manifest_path points to path */
	char	   *path;
	uint8_t    *raw;
	size_t		raw_len;
} ListRec;

extern bool compact_oom(IcebergError *err);
extern bool compact_map_put(StrMap *m, const char *key, int value);
extern int	compact_map_get(const StrMap *m, const char *key);
extern bool compact_check_table(const IcebergTableMetadata *md,
								const IcebergSnapshot **snap, IcebergError *err);
extern void compact_free_recs(ListRec *r, int n);
extern char *compact_part_key(int32_t spec_id, const char *partition, size_t len);
extern bool compact_read_list(const IcebergFileIO *io, const IcebergTableMetadata *md,
							  const IcebergSnapshot *snap, ListRec **out, int *nout,
							  IcebergError *err);

#endif							/* TMS_ICEBERG_COMPACT_INT_H */
