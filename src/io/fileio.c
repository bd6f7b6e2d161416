/*-------------------------------------------------------------------------
 *
 * fileio.c
 *		The IcebergFileIO interface of src/iceberg/iceberg.h over IoStorage:
 *		sequential reads served from ranged GETs (S3) or preads (files) of
 *		IO_FILEIO_CHUNK bytes.
 *
 * Only the interface's types are used from iceberg.h, no function, so the
 * io layer still links and tests on its own.  The last storage error is
 * kept in the IoFileIO so a caller can map it (timeout, interrupt, 403 ...)
 * to its own error codes after the Iceberg call returned.
 *
 * src/io/fileio.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_int.h"

typedef struct FileIOHandle
{
	char	   *uri;
	uint64_t	pos;			/* object offset of buf[0] */
	IoBuffer	buf;
	size_t		off;			/* consumed bytes of buf */
	bool		eof;
} FileIOHandle;

static void
to_iceberg_error(const IoError *ioerr, const char *uri, IcebergError *err)
{
	if (err == NULL)
		return;
	err->code = ioerr->code == IO_ERR_INTERRUPTED ? ICEBERG_ERR_CANCELLED :
		ioerr->code == IO_ERR_OUT_OF_MEMORY ? ICEBERG_ERR_OUT_OF_MEMORY :
		ICEBERG_ERR_IO;
	snprintf(err->message, sizeof(err->message), "could not read \"%.200s\"", uri);
	snprintf(err->detail, sizeof(err->detail), "%.300s%s%.200s", ioerr->message,
			 ioerr->detail[0] ? ": " : "", ioerr->detail);
}

static void *
fileio_open(void *arg, const char *path, int64_t *size_out, IcebergError *err)
{
	IoFileIO   *fio = arg;
	FileIOHandle *h = calloc(1, sizeof(FileIOHandle));

	*size_out = -1;
	if (h == NULL || (h->uri = io_strdup(path)) == NULL)
	{
		free(h);
		io_set_error(&fio->last_error, IO_ERR_OUT_OF_MEMORY, 0, "out of memory");
		to_iceberg_error(&fio->last_error, path, err);
		return NULL;
	}
	/* fetch the first chunk now so a missing object fails at open */
	if (io_storage_read(fio->storage, path, 0, IO_FILEIO_CHUNK, &h->buf,
						&fio->last_error) != 0)
	{
		to_iceberg_error(&fio->last_error, path, err);
		free(h->uri);
		free(h);
		return NULL;
	}
	if (h->buf.len < IO_FILEIO_CHUNK)
	{
		h->eof = true;
		*size_out = (int64_t) h->buf.len;
	}
	fio->bytes_read += h->buf.len;
	return h;
}

static int64_t
fileio_read(void *arg, void *handle, void *buf, size_t len, IcebergError *err)
{
	IoFileIO   *fio = arg;
	FileIOHandle *h = handle;
	size_t		avail;

	if (h->off == h->buf.len)
	{
		if (h->eof)
			return 0;
		h->pos += h->buf.len;
		io_buffer_free(&h->buf);
		h->off = 0;
		if (io_storage_read(fio->storage, h->uri, h->pos, IO_FILEIO_CHUNK,
							&h->buf, &fio->last_error) != 0)
		{
			to_iceberg_error(&fio->last_error, h->uri, err);
			return -1;
		}
		fio->bytes_read += h->buf.len;
		if (h->buf.len < IO_FILEIO_CHUNK)
			h->eof = true;
		if (h->buf.len == 0)
			return 0;
	}
	avail = h->buf.len - h->off;
	if (len > avail)
		len = avail;
	memcpy(buf, h->buf.data + h->off, len);
	h->off += len;
	return (int64_t) len;
}

static void
fileio_close(void *arg, void *handle)
{
	FileIOHandle *h = handle;

	(void) arg;
	if (h == NULL)
		return;
	io_buffer_free(&h->buf);
	free(h->uri);
	free(h);
}

static bool
fileio_interrupted(void *arg)
{
	IoFileIO   *fio = arg;

	return fio->interrupted != NULL && fio->interrupted(fio->interrupt_arg);
}

/* See io_fileio.h. */
void
io_fileio_init(IoFileIO *fio, IoStorage *storage, IoInterruptFn interrupted,
			   void *interrupt_arg, IcebergFileIO *out)
{
	memset(fio, 0, sizeof(*fio));
	fio->storage = storage;
	fio->interrupted = interrupted;
	fio->interrupt_arg = interrupt_arg;
	io_error_clear(&fio->last_error);
	memset(out, 0, sizeof(*out));
	out->arg = fio;
	out->open = fileio_open;
	out->read = fileio_read;
	out->close = fileio_close;
	out->interrupted = fileio_interrupted;
	out->limits = NULL;
}
