/*-------------------------------------------------------------------------
 *
 * dv.h
 *	  Iceberg v3 deletion vectors: decoding a Puffin "deletion-vector-v1"
 *	  blob into the sorted row positions it deletes, encoding positions
 *	  into one, and the footer of a Puffin file of such blobs.
 *
 * The blob (https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type):
 *	  4 bytes big-endian: the length of the magic and the vector;
 *	  magic D1 D3 39 64; the vector, a roaring bitmap of 64-bit positions in
 *	  the portable format (8 bytes little-endian: the number of 32-bit
 *	  bitmaps; per bitmap its key, the high 32 bits, 4 bytes little-endian,
 *	  keys increasing, then a 32-bit roaring bitmap in the portable
 *	  serialization with array, bitmap and run containers); 4 bytes
 *	  big-endian: the CRC-32 of the magic and the vector.
 *
 * A data file's rows are deleted at most once (positions are a set) and
 * its DV's record_count is the cardinality
 * (https://iceberg.apache.org/spec/#deletion-vectors).
 *
 * src/iceberg/table/dv.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_DV_H
#define TMS_ICEBERG_DV_H

#include "iceberg/iceberg.h"

/*
 * Decode blob[0..len) (the bytes at the manifest entry's content_offset,
 * content_size_in_bytes long).  cardinality: the entry's record_count, which
 * the vector must hold exactly (-1: not checked); at most max_positions
 * positions are accepted (ICEBERG_ERR_LIMIT beyond).  *positions (malloc'd
 * with io_malloc, free with io_free; NULL when none) gets them ascending,
 * *npositions their number.  Anything malformed (length, magic, CRC,
 * cookies, unordered keys or values, a position above INT64_MAX, trailing
 * bytes) is ICEBERG_ERR_MALFORMED; nothing is allocated then.
 */
extern bool iceberg_dv_decode(const uint8_t *blob, size_t len, int64_t cardinality,
							  int64_t max_positions, int64_t **positions,
							  int64_t *npositions, TmsError *err);

/* The reserved field id of a position, a deletion vector's "fields" */
#define ICEBERG_DV_ROW_POS_ID	2147483645

/*
 * Encode positions[0 .. n) (distinct, ascending, not negative; else
 * ICEBERG_ERR_INVALID_ARGUMENT) as a deletion-vector-v1 blob, in the form
 * iceberg_dv_decode reads: the portable format without run containers
 * (array containers up to 4096 values, bitmap containers above), as
 * Iceberg's writer serializes before runOptimize.  *blob is malloc'd
 * (io_free), *len its size.
 */
extern bool iceberg_dv_encode(const int64_t *positions, int64_t n, uint8_t **blob,
							  size_t *len, TmsError *err);

/* One blob of a Puffin file: the data file it deletes rows of, where. */
typedef struct IcebergDvBlobRef
{
	const char *referenced;		/* as the table's metadata spells it */
	int64_t		offset;			/* from the file's start */
	int64_t		length;
	int64_t		cardinality;
} IcebergDvBlobRef;

/*
 * The footer of a Puffin file of blobs[0 .. n)
 * (https://iceberg.apache.org/puffin-spec/#footer-structure): magic, the
 * uncompressed JSON payload (each blob's type deletion-vector-v1, fields
 * [2147483645], snapshot-id and sequence-number -1 as the spec says for
 * deletion vectors, offset, length, properties referenced-data-file and
 * cardinality; the file's created-by), its length 4 bytes little-endian,
 * flags 0, magic.  The file is "PFA1", the blobs, this footer.  *footer is
 * malloc'd (io_free).
 */
extern bool iceberg_puffin_footer(const IcebergDvBlobRef *blobs, int n, const char *created_by,
								  uint8_t **footer, size_t *len, TmsError *err);

#endif							/* TMS_ICEBERG_DV_H */
