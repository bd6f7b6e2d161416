/*-------------------------------------------------------------------------
 *
 * fileio.c
 *		The FileIO router of tms: the IoFileIO interface of fileio.h over
 *		IoStorage.  Every path is canonicalised with the location rule
 *		(location.c) against the table's relative root, then read as
 *		sequential chunks of IO_FILEIO_CHUNK bytes served from ranged GETs
 *		(object stores), or read straight into the reader's buffer (local
 *		files, confined as storage_local.c confines them: a read of
 *		IO_FILEIO_DIRECT_MIN bytes or more is one pread into it, no chunk
 *		buffer and no copy; smaller reads go through a chunk).  A reader
 *		that needs only a file's head sets first_chunk: the chunks (and the
 *		direct reads) then start that small and double up to IO_FILEIO_CHUNK.
 *
 * A failed open or read hands the storage's TmsError to the reader, which
 * carries its code on (src/iceberg: TmsError.io_code) so a caller can
 * map it (timeout, interrupt, 403 ...) to its own error codes.
 *
 * src/io/storage/fileio.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_int.h"

typedef struct FileIOHandle
{
	char	   *uri;
	uint64_t	pos;			/* object offset of buf[0] */
	IoBuffer	buf;
	size_t		off;			/* consumed bytes of buf */
	uint64_t	chunk;			/* bytes asked for by the last fetch */
	bool		eof;
	bool		direct;			/* storage reads into the caller's buffer */
} FileIOHandle;

/* A local read at least this large goes straight into the reader's buffer. */
#define IO_FILEIO_DIRECT_MIN ((size_t) 64 * 1024)

/* The size of the fetch after one of "last" bytes (0: the first). */
static uint64_t
fileio_next_chunk(const IoStorageFileIO *fio, uint64_t last)
{
	if (fio->first_chunk == 0 || fio->first_chunk >= IO_FILEIO_CHUNK)
		return IO_FILEIO_CHUNK;
	if (last == 0)
		return fio->first_chunk;
	return last >= IO_FILEIO_CHUNK / 2 ? IO_FILEIO_CHUNK : last * 2;
}

/*
 * IoFileIO.open: a local file is opened and sized (nothing read); from
 * other storage the first chunk is fetched.  Either way a missing object
 * fails here.
 */
static void *
fileio_open(void *arg, const char *path, int64_t *size_out, TmsError *err)
{
	IoStorageFileIO *fio = arg;
	FileIOHandle *h = io_calloc(1, sizeof(FileIOHandle));
	uint64_t	size = 0;
	size_t		got;
	int			rc;

	*size_out = -1;
	if (h == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	if (io_location_canonical(path, fio->relative_root, &h->uri, err) != 0)
	{
		io_free(h);
		return NULL;
	}
	rc = io_storage_read_into(fio->storage, h->uri, 0, NULL, 0, &got, &size, err);
	if (rc > 0)
	{
		h->direct = true;
		*size_out = (int64_t) size;
		return h;
	}
	h->chunk = fileio_next_chunk(fio, 0);
	if (rc < 0 ||
		io_storage_read(fio->storage, h->uri, 0, h->chunk, &h->buf, err) != 0)
	{
		io_free(h->uri);
		io_free(h);
		return NULL;
	}
	if (h->buf.len < h->chunk)
	{
		h->eof = true;
		*size_out = (int64_t) h->buf.len;
	}
	fio->bytes_read += h->buf.len;
	return h;
}

/* A direct read of up to len bytes at the handle's position. */
static int64_t
fileio_read_direct(IoStorageFileIO *fio, FileIOHandle *h, void *buf,
				   size_t len, TmsError *err)
{
	uint64_t	chunk = fileio_next_chunk(fio, h->chunk);
	size_t		got;

	if (len > chunk)
		len = (size_t) chunk;
	h->chunk = len;
	if (io_storage_read_into(fio->storage, h->uri, h->pos, buf, len, &got, NULL,
							 err) < 0)
		return -1;
	h->pos += got;
	fio->bytes_read += got;
	if (got < len)
		h->eof = true;
	return (int64_t) got;
}

/*
 * IoFileIO.read: serve from the current chunk; when it is empty, read a
 * large request of a local file straight into buf, else fetch the next.
 */
static int64_t
fileio_read(void *arg, void *handle, void *buf, size_t len, TmsError *err)
{
	IoStorageFileIO *fio = arg;
	FileIOHandle *h = handle;
	size_t		avail;

	if (h->off == h->buf.len)
	{
		if (h->eof)
			return 0;
		h->pos += h->buf.len;
		io_buffer_free(&h->buf);
		h->off = 0;
		if (h->direct && len >= IO_FILEIO_DIRECT_MIN)
			return fileio_read_direct(fio, h, buf, len, err);
		h->chunk = fileio_next_chunk(fio, h->chunk);
		if (io_storage_read(fio->storage, h->uri, h->pos, h->chunk,
							&h->buf, err) != 0)
			return -1;
		fio->bytes_read += h->buf.len;
		if (h->buf.len < h->chunk)
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

/* IoFileIO.close */
static void
fileio_close(void *arg, void *handle)
{
	FileIOHandle *h = handle;

	(void) arg;
	if (h == NULL)
		return;
	io_buffer_free(&h->buf);
	io_free(h->uri);
	io_free(h);
}

/* IoFileIO.interrupted: the caller's callback. */
static bool
fileio_interrupted(void *arg)
{
	IoStorageFileIO *fio = arg;

	return fio->interrupted != NULL && fio->interrupted(fio->interrupt_arg);
}

/* See io.h. */
void
io_storage_fileio(IoStorageFileIO *state, IoStorage *storage,
				  const char *relative_root, IoInterruptFn interrupted,
				  void *interrupt_arg, IoFileIO *out)
{
	memset(state, 0, sizeof(*state));
	state->storage = storage;
	state->relative_root = relative_root;
	state->interrupted = interrupted;
	state->interrupt_arg = interrupt_arg;
	memset(out, 0, sizeof(*out));
	out->arg = state;
	out->open = fileio_open;
	out->read = fileio_read;
	out->close = fileio_close;
	out->interrupted = fileio_interrupted;
}
