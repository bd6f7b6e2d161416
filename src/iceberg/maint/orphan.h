/*-------------------------------------------------------------------------
 *
 * orphan.h
 *	  Orphan-file cleanup, the plain-C half: the set of every file a
 *	  table references (its "valid files"), and the verdict on one file
 *	  that storage lists, matched as Apache Iceberg's
 *	  DeleteOrphanFilesSparkAction matches them.
 *
 * The PostgreSQL side lists the table location, skips files younger than
 * its older-than bound, asks iceberg_valid_set_check() about each listed
 * file and deletes the orphans (and, by prefix-mismatch mode, fails,
 * keeps or deletes a PREFIX_MISMATCH).
 *
 * Matching (https://github.com/apache/iceberg/blob/main/spark/v3.5/spark/src/main/java/org/apache/iceberg/spark/actions/DeleteOrphanFilesSparkAction.java):
 * both sides are put in canonical form (io_location_canonical,
 * src/io/storage/location.c; a relative valid path resolves against the table's
 * relative root) and split into scheme ("s3" or "file"), authority (the
 * bucket; "" for files) and path (the key with a leading '/', or the
 * absolute file path).  Scheme and authority go through equal_schemes /
 * equal_authorities (keys may list several names separated by commas,
 * "s3a,s3n" -> "s3", as in Iceberg; s3a and s3n are s3 anyway) and are
 * compared ignoring case.  A listed file whose path no valid file has is
 * an ORPHAN; one whose path a valid file has with the same scheme and
 * authority is VALID; otherwise (same path, another scheme or authority)
 * PREFIX_MISMATCH.
 *
 * Memory: 16 bytes per distinct valid file (a 64-bit hash of the path and
 * one of scheme + authority) times the growth slack (at most 1.5).  A
 * collision of path hashes can only make an orphan look valid (or a
 * mismatch), never a valid file look orphaned: a valid file's own pair is
 * always in the set.
 *
 * Rules: plain C, no PostgreSQL header, errors as TmsError values,
 * everything returned freed by its *_free.
 *
 * src/iceberg/maint/orphan.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_ICEBERG_ORPHAN_H
#define TMS_ICEBERG_ORPHAN_H

#include "iceberg/iceberg.h"

typedef enum IcebergPrefixMismatchMode
{
	ICEBERG_PREFIX_ERROR,		/* a mismatch fails the run (Iceberg's
								 * default) */
	ICEBERG_PREFIX_IGNORE,		/* keep the file */
	ICEBERG_PREFIX_DELETE		/* delete the file */
} IcebergPrefixMismatchMode;

typedef struct IcebergOrphanOptions
{
	int			nequal_schemes;
	const IcebergKeyValue *equal_schemes;	/* key scheme(s) treated as value;
											 * s3a,s3n -> s3 always */
	int			nequal_authorities;
	const IcebergKeyValue *equal_authorities;
	IcebergPrefixMismatchMode mode; /* for the caller; the set does not act on
									 * it */
} IcebergOrphanOptions;

typedef struct IcebergValidSet IcebergValidSet;

/* A new empty set (the options are copied); NULL when out of memory. */
extern IcebergValidSet *iceberg_valid_set_new(const IcebergOrphanOptions *opt);

/*
 * Adds everything the table references: metadata_location (may be NULL)
 * and every metadata-log file, every snapshot's manifest list, every
 * manifest, every data and delete file of every entry (DELETED entries
 * too), statistics, partition statistics, and
 * "<location>/metadata/version-hint.text".  May be called for several
 * tables before sealing.  A referenced path that cannot be canonicalised
 * fails the call (ICEBERG_ERR_INVALID_ARGUMENT): without knowing what
 * the table references, nothing can be called an orphan.
 */
extern bool iceberg_valid_set_add_table(IcebergValidSet *vs,
										const IcebergFileIO *io,
										const IcebergTableMetadata *md,
										const char *metadata_location,
										const char *relative_root,
										TmsError *err);

/* Adds one more valid location (e.g. a file another process is writing). */
extern bool iceberg_valid_set_add_path(IcebergValidSet *vs, const char *path,
									   const char *relative_root,
									   TmsError *err);

/* Sorts and deduplicates; required before checks, ends additions. */
extern bool iceberg_valid_set_seal(IcebergValidSet *vs, TmsError *err);

typedef enum IcebergOrphanVerdict
{
	ICEBERG_ORPHAN_VALID,
	ICEBERG_ORPHAN_ORPHAN,
	ICEBERG_ORPHAN_PREFIX_MISMATCH,
	ICEBERG_ORPHAN_UNKNOWN		/* the listed location has no canonical form
								 * (e.g. a key with a ".." segment), or the
								 * set is not sealed: keep the file */
} IcebergOrphanVerdict;

/* The verdict on listed_uri, as storage lists it (absolute). */
extern IcebergOrphanVerdict iceberg_valid_set_check(const IcebergValidSet *vs,
													const char *listed_uri);

/* "valid", "orphan", "prefix-mismatch", "unknown" */
extern const char *iceberg_orphan_verdict_name(IcebergOrphanVerdict v);

/* Distinct valid files (after sealing; before: entries added so far). */
extern int64_t iceberg_valid_set_count(const IcebergValidSet *vs);

/* Bytes the set holds (for reports and the memory test). */
extern int64_t iceberg_valid_set_bytes(const IcebergValidSet *vs);

extern void iceberg_valid_set_free(IcebergValidSet *vs);

#endif							/* TMS_ICEBERG_ORPHAN_H */
