/*-------------------------------------------------------------------------
 *
 * errors.h
 *	  The errors of the plain-C layers (io and iceberg error values) as
 *	  PostgreSQL errors: one mapping to SQLSTATEs (doc/catalogs.md has the
 *	  table), raised with ereport or kept as text.
 *
 * Code that runs outside a transaction or must not raise (a task handler
 * collecting a failure, an io callback) uses the _text forms and raises or
 * records later; everything else raises.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_ERRORS_H
#define TMS_BRIDGE_ERRORS_H

#include "postgres.h"

#include "iceberg/iceberg.h"
#include "io/io.h"

/* SQLSTATE for an io error code. */
extern int	tms_io_sqlstate(IoErrorCode code);

/* SQLSTATE for an iceberg error (its storage error's, for ICEBERG_ERR_IO). */
extern int	tms_iceberg_sqlstate(const IcebergError *err);

/*
 * Raise *err as an ERROR: CHECK_FOR_INTERRUPTS() first (an interrupted
 * call ends as the pending cancel), then the mapped SQLSTATE, the io
 * message as primary message, the server's text as DETAIL, and a HINT for
 * commit conflicts, unknown commit states, timeouts and refused
 * credentials.
 */
extern void tms_io_ereport(const IoError *err) pg_attribute_noreturn();

/* Raise an iceberg error (its SQLSTATE from its io_code, for a read). */
extern void tms_iceberg_ereport(const IcebergError *err) pg_attribute_noreturn();

/* "message: detail" of an io / iceberg error, palloc'd. */
extern char *tms_io_error_text(const IoError *err);
extern char *tms_iceberg_error_text(const IcebergError *err);

#endif							/* TMS_BRIDGE_ERRORS_H */
