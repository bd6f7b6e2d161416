/*-------------------------------------------------------------------------
 *
 * errors.h
 *	  The error value of the plain-C layers (TmsError, io/io_error.h) as
 *	  a PostgreSQL error: one mapping of its domain and code to a SQLSTATE
 *	  (doc/catalogs.md has the table), raised with ereport or kept as
 *	  text.
 *
 * Code that runs outside a transaction or must not raise (a task handler
 * collecting a failure, an io callback) uses the _text form and raises or
 * records later; everything else raises.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_BRIDGE_ERRORS_H
#define TMS_BRIDGE_ERRORS_H

#include "postgres.h"

#include "iceberg/iceberg.h"
#include "io/io.h"

/*
 * SQLSTATE of an error of any plain-C layer: by its code, for an iceberg
 * ICEBERG_ERR_IO by the io failure underneath (io_code).
 */
extern int	tms_error_sqlstate(const TmsError *err);

/*
 * Raise *err as an ERROR: CHECK_FOR_INTERRUPTS() first (an interrupted
 * call ends as the pending cancel), then the mapped SQLSTATE, the message
 * as primary message, the detail as DETAIL, and the hint as HINT; an io
 * error without a hint of its own gets one for commit conflicts, unknown
 * commit states, timeouts, refused credentials, size caps and refused
 * operations.
 */
extern void tms_error_ereport(const TmsError *err) pg_attribute_noreturn();

/* "message: detail" of an error, palloc'd. */
extern char *tms_error_text(const TmsError *err);

#endif							/* TMS_BRIDGE_ERRORS_H */
