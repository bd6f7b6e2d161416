/*-------------------------------------------------------------------------
 *
 * iceberg_base.c
 *	  The code of a wrapped io failure, limits, hashing, the string map, and the
 *	  two IoFileIO implementations of this layer (unconfined local files,
 *	  for tests and tools only, and an in-memory buffer).
 *
 * src/iceberg/iceberg_base.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/iceberg_internal.h"
#include "io/util/jsonmem.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * iceberg_code_of_io: see iceberg_internal.h.
 */
IcebergErrorCode
iceberg_code_of_io(const TmsError *ioerr)
{
	if (ioerr->code == IO_ERR_INTERRUPTED)
		return ICEBERG_ERR_CANCELLED;
	if (ioerr->code == IO_ERR_OUT_OF_MEMORY)
		return ICEBERG_ERR_OUT_OF_MEMORY;
	return ICEBERG_ERR_IO;
}

/*
 * iceberg_limits_default: the default caps (see iceberg.h).
 */
void
iceberg_limits_default(IcebergLimits *limits)
{
	limits->max_metadata_bytes = INT64_C(256) * 1024 * 1024;
	limits->max_header_bytes = INT64_C(16) * 1024 * 1024;
	limits->max_block_bytes = INT64_C(64) * 1024 * 1024;
	limits->max_block_items = INT64_C(16) * 1024 * 1024;
	limits->max_string_bytes = INT64_C(16) * 1024 * 1024;
	limits->max_collection_items = INT64_C(16) * 1024 * 1024;
	limits->max_json_bytes = INT64_C(256) * 1024 * 1024;
}

/*
 * iceberg_effective_limits: "in" with every zero (or negative) field
 * replaced by its default; in may be NULL.
 */
void
iceberg_effective_limits(const IcebergLimits *in, IcebergLimits *out)
{
	IcebergLimits def;

	iceberg_limits_default(&def);
	*out = def;
	if (in == NULL)
		return;
#define PICK(f) out->f = in->f > 0 ? in->f : def.f
	PICK(max_metadata_bytes);
	PICK(max_header_bytes);
	PICK(max_block_bytes);
	PICK(max_block_items);
	PICK(max_string_bytes);
	PICK(max_collection_items);
	PICK(max_json_bytes);
#undef PICK
}

/*
 * iceberg_json_load: see iceberg_internal.h.  The budget is io's
 * (src/io/util/jsonmem.h): jansson's allocations are counted while it runs.
 */
struct json_t *
iceberg_json_load(const char *text, size_t len, size_t flags,
				  int64_t max_json_bytes, const char *what, TmsError *err)
{
	IoJsonLoadInfo info;
	json_t	   *doc;

	doc = io_json_load(text, len, flags,
					   max_json_bytes > 0 ? (size_t) max_json_bytes : 0, &info);
	if (doc != NULL)
		return doc;
	if (info.not_initialised)
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "cannot parse %s: io_init() was not called", what);
	else if (info.exceeded)
		tms_error_set(err, ICEBERG_ERR_LIMIT,
					  "%s needs more than max_json_bytes (%zu bytes) of memory to parse",
					  what, info.limit);
	else
	{
		tms_error_set(err, ICEBERG_ERR_MALFORMED, "invalid %s: not valid JSON", what);
		tms_error_detail(err, "JSON error at line %d, column %d: %s.",
						 info.line, info.column, info.text);
	}
	return NULL;
}

/*
 * iceberg_check_interrupt: poll io->interrupted; on an interrupt fill err
 * with ICEBERG_ERR_CANCELLED and return true.
 */
bool
iceberg_check_interrupt(const IcebergFileIO *io, TmsError *err)
{
	if (io != NULL && io->io.interrupted != NULL &&
		io->io.interrupted(io->io.arg))
	{
		tms_error_set(err, ICEBERG_ERR_CANCELLED, "operation interrupted");
		return true;
	}
	return false;
}

/*
 * iceberg_strdup: copy a string, reporting OOM through err.
 */
char *
iceberg_strdup(const char *s, TmsError *err)
{
	char	   *r;
	size_t		n;

	if (s == NULL)
		return NULL;
	n = strlen(s);
	r = io_malloc(n + 1);
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	memcpy(r, s, n + 1);
	return r;
}

/*
 * iceberg_hash_bytes: FNV-1a 64, chained through h.
 */
uint64_t
iceberg_hash_bytes(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t		i;

	for (i = 0; i < len; i++)
	{
		h ^= p[i];
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* Grows the string map's table to nslots (a power of two). */
static bool
strmap_grow(IcebergStrMap *m, size_t nslots)
{
	char	  **keys = io_calloc(nslots, sizeof(char *));
	uint64_t   *hashes = io_calloc(nslots, sizeof(uint64_t));
	int64_t    *values = io_calloc(nslots, sizeof(int64_t));
	size_t		i;

	if (keys == NULL || hashes == NULL || values == NULL)
	{
		io_free(keys);
		io_free(hashes);
		io_free(values);
		return false;
	}
	for (i = 0; i < m->nslots; i++)
	{
		size_t		j;

		if (m->keys[i] == NULL)
			continue;
		j = m->hashes[i] & (nslots - 1);
		while (keys[j] != NULL)
			j = (j + 1) & (nslots - 1);
		keys[j] = m->keys[i];
		hashes[j] = m->hashes[i];
		values[j] = m->values[i];
	}
	io_free(m->keys);
	io_free(m->hashes);
	io_free(m->values);
	m->keys = keys;
	m->hashes = hashes;
	m->values = values;
	m->nslots = nslots;
	return true;
}

/* The slot of key (h its hash) or the empty slot where it would go. */
static size_t
strmap_slot(const IcebergStrMap *m, const char *key, uint64_t h)
{
	size_t		j = h & (m->nslots - 1);

	while (m->keys[j] != NULL &&
		   !(m->hashes[j] == h && strcmp(m->keys[j], key) == 0))
		j = (j + 1) & (m->nslots - 1);
	return j;
}

/*
 * iceberg_strmap_get: the value of key, or NULL.
 */
int64_t *
iceberg_strmap_get(const IcebergStrMap *m, const char *key)
{
	size_t		j;

	if (m->nslots == 0)
		return NULL;
	j = strmap_slot(m, key, iceberg_hash_bytes(ICEBERG_HASH_INIT, key, strlen(key)));
	return m->keys[j] != NULL ? &m->values[j] : NULL;
}

/*
 * iceberg_strmap_put: the value of key, inserted (a copy of key, unless
 * borrowed) with the value init when absent.
 */
int64_t *
iceberg_strmap_put(IcebergStrMap *m, const char *key, int64_t init, bool *added)
{
	size_t		len = strlen(key);
	uint64_t	h = iceberg_hash_bytes(ICEBERG_HASH_INIT, key, len);
	size_t		j;
	char	   *copy;

	if (added != NULL)
		*added = false;
	if ((m->count + 1) * 2 > m->nslots)
	{
		if (!strmap_grow(m, m->nslots ? m->nslots * 2 : 64))
			return NULL;
	}
	j = strmap_slot(m, key, h);
	if (m->keys[j] != NULL)
		return &m->values[j];
	if (m->borrow_keys)
		copy = (char *) key;
	else
	{
		copy = io_malloc(len + 1);
		if (copy == NULL)
			return NULL;
		memcpy(copy, key, len + 1);
	}
	m->keys[j] = copy;
	m->hashes[j] = h;
	m->values[j] = init;
	m->count++;
	if (added != NULL)
		*added = true;
	return &m->values[j];
}

/*
 * iceberg_strmap_free: free the table and every key it copied; the map
 * is empty again (borrow_keys kept).
 */
void
iceberg_strmap_free(IcebergStrMap *m)
{
	bool		borrow = m->borrow_keys;
	size_t		i;

	if (!borrow)
		for (i = 0; i < m->nslots; i++)
			io_free(m->keys[i]);
	io_free(m->keys);
	io_free(m->hashes);
	io_free(m->values);
	memset(m, 0, sizeof(*m));
	m->borrow_keys = borrow;
}

/* ---------------------------------------------------------------------
 * Local files
 * ---------------------------------------------------------------------
 */

/*
 * Resolve an Iceberg path to a local one: apply the first prefix map,
 * then strip a file: scheme.  Returns a malloc'ed string or NULL (OOM).
 */
static char *
local_resolve(const IcebergLocalFS *fs, const char *path)
{
	const char *rest = path;
	const char *to = "";
	char	   *mapped;
	char	   *out;
	const char *p;
	int			i;

	if (fs != NULL)
	{
		for (i = 0; i < fs->nmaps && i < ICEBERG_LOCAL_MAX_MAPS; i++)
		{
			size_t		n;

			if (fs->maps[i].from == NULL || fs->maps[i].to == NULL)
				continue;
			n = strlen(fs->maps[i].from);
			if (strncmp(path, fs->maps[i].from, n) == 0)
			{
				rest = path + n;
				to = fs->maps[i].to;
				break;
			}
		}
	}
	mapped = io_malloc(strlen(to) + strlen(rest) + 1);
	if (mapped == NULL)
		return NULL;
	strcpy(mapped, to);
	strcat(mapped, rest);

	/* strip a file: scheme */
	p = mapped;
	if (strncmp(p, "file:", 5) == 0)
	{
		p += 5;
		if (strncmp(p, "///", 3) == 0)
			p += 2;				/* file:///abs -> /abs */
		else if (strncmp(p, "//", 2) == 0)
			p += 2;				/* file://host/rest -> host/rest */
	}
	out = io_malloc(strlen(p) + 1);
	if (out != NULL)
		strcpy(out, p);
	io_free(mapped);
	return out;
}

/* IoFileIO.open for local files. */
static void *
local_open(void *arg, const char *path, int64_t *size_out, TmsError *err)
{
	char	   *local = local_resolve(arg, path);
	FILE	   *f;

	*size_out = -1;
	if (local == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	f = fopen(local, "rb");
	if (f == NULL)
	{
		int			e = errno;

		tms_error_set(err, e == ENOENT ? IO_ERR_NOT_FOUND : IO_ERR_STORAGE,
					  "could not open file \"%.400s\": %s", local, strerror(e));
		io_free(local);
		return NULL;
	}
	io_free(local);
	if (fseek(f, 0, SEEK_END) == 0)
	{
		long		n = ftell(f);

		if (n >= 0)
			*size_out = n;
		if (fseek(f, 0, SEEK_SET) != 0)
		{
			fclose(f);
			tms_error_set(err, IO_ERR_STORAGE, "could not seek in file \"%.400s\"",
						  path);
			return NULL;
		}
	}
	return f;
}

/* IoFileIO.read for local files. */
static int64_t
local_read(void *arg, void *handle, void *buf, size_t len, TmsError *err)
{
	size_t		n;

	(void) arg;
	n = fread(buf, 1, len, (FILE *) handle);
	if (n == 0 && ferror((FILE *) handle))
	{
		tms_error_set(err, IO_ERR_STORAGE, "could not read file: %s",
					  strerror(errno));
		return -1;
	}
	return (int64_t) n;
}

/* IoFileIO.close for local files. */
static void
local_close(void *arg, void *handle)
{
	(void) arg;
	fclose((FILE *) handle);
}

/*
 * iceberg_local_fileio: fill io with the local implementation.  For unit
 * tests, the fuzzer's tools and benchmarks only: it reads any path the
 * process can, follows symbolic links and knows no allowed roots.  The
 * server reads local files through io_storage_fileio (src/io), which is
 * confined.
 */
void
iceberg_local_fileio(IcebergFileIO *io, IcebergLocalFS *fs)
{
	memset(io, 0, sizeof(*io));
	io->io.arg = fs;
	io->io.open = local_open;
	io->io.read = local_read;
	io->io.close = local_close;
	io->limits = NULL;
}

/* ---------------------------------------------------------------------
 * In-memory buffer
 * ---------------------------------------------------------------------
 */

typedef struct MemHandle
{
	const IcebergMemoryFile *file;
	size_t		pos;
} MemHandle;

static void *
mem_open(void *arg, const char *path, int64_t *size_out, TmsError *err)
{
	MemHandle  *h = io_malloc(sizeof(MemHandle));

	(void) path;
	if (h == NULL)
	{
		tms_error_set(err, IO_ERR_OUT_OF_MEMORY, "out of memory");
		return NULL;
	}
	h->file = arg;
	h->pos = 0;
	*size_out = (int64_t) h->file->len;
	return h;
}

static int64_t
mem_read(void *arg, void *handle, void *buf, size_t len, TmsError *err)
{
	MemHandle  *h = handle;
	size_t		n = h->file->len - h->pos;

	(void) arg;
	(void) err;
	if (n > len)
		n = len;
	if (n > 0)
		memcpy(buf, (const char *) h->file->data + h->pos, n);
	h->pos += n;
	return (int64_t) n;
}

static void
mem_close(void *arg, void *handle)
{
	(void) arg;
	io_free(handle);
}

/*
 * iceberg_memory_fileio: fill io so that every path reads *buf.
 */
void
iceberg_memory_fileio(IcebergFileIO *io, IcebergMemoryFile *buf)
{
	memset(io, 0, sizeof(*io));
	io->io.arg = buf;
	io->io.open = mem_open;
	io->io.read = mem_read;
	io->io.close = mem_close;
	io->limits = NULL;
}

/*
 * iceberg_read_all: read a whole object, at most max_bytes.
 */
bool
iceberg_read_all(const IcebergFileIO *io, const char *path, int64_t max_bytes,
				 char **data_out, size_t *len_out, TmsError *err)
{
	IcebergBuf	b = {0};
	TmsError	ioerr;
	void	   *h;
	int64_t		size;

	*data_out = NULL;
	*len_out = 0;
	if (io == NULL || io->io.open == NULL || io->io.read == NULL ||
		io->io.close == NULL || path == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "no file reader given");
		return false;
	}
	tms_error_clear(&ioerr);
	h = io->io.open(io->io.arg, path, &size, &ioerr);
	if (h == NULL)
	{
		tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
					   "could not read \"%.200s\"", path);
		return false;
	}
	if (size > max_bytes)
	{
		io->io.close(io->io.arg, h);
		tms_error_set(err, ICEBERG_ERR_LIMIT,
					  "file \"%s\" is too large", path);
		tms_error_detail(err, "The file has %lld bytes; the limit is %lld.",
						 (long long) size, (long long) max_bytes);
		return false;
	}
	for (;;)
	{
		int64_t		n;
		size_t		want = ICEBERG_READ_CHUNK;

		if (!iceberg_buf_reserve(&b, want))
		{
			io->io.close(io->io.arg, h);
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		n = io->io.read(io->io.arg, h, b.data + b.len, want, &ioerr);
		if (n < 0)
		{
			io->io.close(io->io.arg, h);
			iceberg_buf_free(&b);
			tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
						   "could not read \"%.200s\"", path);
			return false;
		}
		if (n == 0)
			break;
		if ((size_t) n > want)
			n = (int64_t) want;
		b.len += (size_t) n;
		if ((int64_t) b.len > max_bytes)
		{
			io->io.close(io->io.arg, h);
			iceberg_buf_free(&b);
			tms_error_set(err, ICEBERG_ERR_LIMIT,
						  "file \"%s\" is too large", path);
			tms_error_detail(err, "The limit is %lld bytes.", (long long) max_bytes);
			return false;
		}
		if (iceberg_check_interrupt(io, err))
		{
			io->io.close(io->io.arg, h);
			iceberg_buf_free(&b);
			return false;
		}
	}
	io->io.close(io->io.arg, h);
	if (b.data == NULL && !iceberg_buf_reserve(&b, 0))
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	b.data[b.len] = '\0';
	*data_out = b.data;
	*len_out = b.len;
	return true;
}
