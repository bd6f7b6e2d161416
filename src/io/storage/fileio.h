/*-------------------------------------------------------------------------
 *
 * fileio.h
 *		IoFileIO: the sequential read interface through which other layers
 *		(src/iceberg) read objects by path without knowing where they live.
 *
 * The io layer owns this interface and provides the implementation over
 * its storage (io.h); the iceberg layer consumes it and
 * adds an implementation of its own for tests and tools.  The dependency
 * goes one way only: iceberg includes this header, nothing in src/io/
 * includes an iceberg header.
 *
 * Rules: plain C, no PostgreSQL header; the callbacks never longjmp and
 * report failure as a TmsError value (no secrets in it).
 *
 * src/io/storage/fileio.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_FILEIO_H
#define TMS_IO_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/io_error.h"

/*
 * Sequential reading of one object by path.  Paths are passed exactly as
 * they appear in Iceberg metadata (s3://..., s3a://..., file:/...,
 * relative ones); resolving them is the implementation's job.
 *
 * open:	 start reading "path"; return an opaque non-NULL handle, or NULL
 *			 with *err filled (a storage code such as IO_ERR_NOT_FOUND,
 *			 IO_ERR_FORBIDDEN, IO_ERR_TIMEOUT, IO_ERR_INTERRUPTED).
 *			 *size_out receives the object size if known cheaply, else -1.
 * read:	 copy up to "len" bytes into "buf"; return the number copied,
 *			 0 at end of object, -1 with *err filled on failure.  Short
 *			 reads are fine.
 * close:	 release the handle (never fails, always called once per
 *			 successful open).
 * interrupted: optional (NULL: never); polled by long-running readers
 *			 between units of work.  It must only read state (inside
 *			 PostgreSQL: return InterruptPending), never ereport.
 */
typedef struct IoFileIO
{
	void	   *arg;
	void	   *(*open) (void *arg, const char *path, int64_t *size_out,
						 TmsError *err);
	int64_t		(*read) (void *arg, void *handle, void *buf, size_t len,
						 TmsError *err);
	void		(*close) (void *arg, void *handle);
	bool		(*interrupted) (void *arg);
} IoFileIO;

#endif							/* TMS_IO_FILEIO_H */
