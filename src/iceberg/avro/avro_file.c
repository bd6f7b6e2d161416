/*-------------------------------------------------------------------------
 *
 * avro_file.c
 *	  The Avro object container file: the reader's life cycle (open,
 *	  header metadata, byte counts, close), its errors, the source buffer
 *	  that reads the file through the IcebergFileIO, the header, and the
 *	  blocks with their sync markers and codec dispatch (null, deflate
 *	  here, with libdeflate or else zlib; snappy in avro_snappy.c).
 *
 * Blocks are read whole into the source buffer (capped by
 * max_block_bytes), checked against the header's sync marker, and
 * decompressed into the inflate buffer; avro_decode.c decodes their
 * records.  See avro_internal.h for the reader as a whole.
 *
 * src/iceberg/avro/avro_file.c
 *
 *-------------------------------------------------------------------------
 */
#include "iceberg/avro/avro_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------
 */

/* See avro_internal.h. */
bool
iceberg_avro_error(IcebergAvroReader *r, TmsError *err,
				   IcebergErrorCode code, const char *msg)
{
	tms_error_set(err, code, "%s in %s", msg, r->what);
	tms_error_detail(err, "The file is \"%s\"%s.", r->path,
					 r->nblocks > 0 ? " (after its first block)" : "");
	return false;
}

/* ---------------------------------------------------------------------
 * Source buffer
 * ---------------------------------------------------------------------
 */

/*
 * Make at least "need" unconsumed bytes available, unless the object
 * ends first (then fewer are available and r->eof is set).  need must
 * already be within the caller's limit.
 */
static bool
src_fill(IcebergAvroReader *r, size_t need, TmsError *err)
{
	while (r->end - r->pos < need && !r->eof)
	{
		TmsError	ioerr;
		int64_t		n;
		size_t		want;

		if (r->pos > 0 && r->alloc - r->end < r->chunk)
		{
			memmove(r->buf, r->buf + r->pos, r->end - r->pos);
			r->end -= r->pos;
			r->pos = 0;
		}
		if (r->alloc - r->end < r->chunk || r->alloc < need)
		{
			/*
			 * A file read in several chunks needs room for a chunk beside the
			 * bytes kept: two from the start, not one grown (copied)
			 */
			size_t		na = r->alloc ? r->alloc
			: r->chunk >= ICEBERG_READ_CHUNK ? 2 * r->chunk : r->chunk;
			uint8_t    *nb;

			while (na < r->end + r->chunk || na < need)
				na *= 2;
			nb = io_realloc(r->buf, na);
			if (nb == NULL)
			{
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				return false;
			}
			r->buf = nb;
			r->alloc = na;
		}
		want = r->alloc - r->end;
		if (want > r->chunk)
			want = r->chunk;
		tms_error_clear(&ioerr);
		n = r->io->io.read(r->io->io.arg, r->handle, r->buf + r->end, want,
						   &ioerr);
		if (n < 0)
		{
			tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr,
						   "could not read \"%.200s\"", r->path);
			return false;
		}
		if (n == 0)
			r->eof = true;
		if ((size_t) n > want)
			n = (int64_t) want;
		r->end += (size_t) n;
		r->bytes_compressed += n;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Header
 * ---------------------------------------------------------------------
 */

/*
 * Parse the header from the buffered bytes.  Returns 1 parsed, 0 need
 * more bytes, -1 malformed (err set).  *used receives the header size.
 */
static int
parse_header(IcebergAvroReader *r, TmsError *err, size_t *used)
{
	IcebergAvroCursor c;
	int			cap_items = 0;

	c.p = r->buf + r->pos;
	c.end = r->buf + r->end;
	if (c.end - c.p < 4)
		return r->eof ? (iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
											"file too short for an avro header"), -1) : 0;
	if (memcmp(c.p, "Obj\x01", 4) != 0)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro magic");
		return -1;
	}
	c.p += 4;
	/* discard what a previous partial attempt kept */
	if (r->meta != NULL)
	{
		int			i;

		for (i = 0; i < r->nmeta; i++)
		{
			io_free(r->meta[i].key);
			io_free(r->meta[i].value);
		}
		io_free(r->meta);
		r->meta = NULL;
		r->nmeta = 0;
	}
	for (;;)
	{
		int64_t		count,
					bsize,
					i;

		if (!rd_long(&c, &count))
			goto need_more;
		if (count < 0)
		{
			if (count == INT64_MIN)
				goto bad;
			count = -count;
			if (!rd_long(&c, &bsize))
				goto need_more;
		}
		if (count == 0)
			break;
		if (count > 100000 || cap_items + count > 100000)
			goto bad;
		for (i = 0; i < count; i++)
		{
			const uint8_t *k,
					   *v;
			int64_t		klen,
						vlen;
			IcebergKeyValue *kv;

			if (!rd_bytes(&c, &k, &klen) || !rd_bytes(&c, &v, &vlen))
				goto need_more;
			if (r->nmeta % 8 == 0)
			{
				IcebergKeyValue *nm = io_realloc(r->meta, sizeof(IcebergKeyValue) * (size_t) (r->nmeta + 8));

				if (nm == NULL)
					goto oom;
				r->meta = nm;
			}
			kv = &r->meta[r->nmeta];
			kv->key = io_malloc((size_t) klen + 1);
			kv->value = io_malloc((size_t) vlen + 1);
			if (kv->key == NULL || kv->value == NULL)
			{
				io_free(kv->key);
				io_free(kv->value);
				goto oom;
			}
			memcpy(kv->key, k, (size_t) klen);
			kv->key[klen] = '\0';
			memcpy(kv->value, v, (size_t) vlen);
			kv->value[vlen] = '\0';
			r->nmeta++;
			cap_items++;
		}
	}
	if (c.end - c.p < 16)
		goto need_more;
	memcpy(r->sync, c.p, 16);
	c.p += 16;
	*used = (size_t) (c.p - (r->buf + r->pos));
	return 1;

need_more:
	if (r->eof)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro header");
		return -1;
	}
	return 0;
bad:
	iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro header");
	return -1;
oom:
	tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
	return -1;
}

/* See iceberg_internal.h. */
const char *
iceberg_avro_reader_meta(const IcebergAvroReader *r, const char *key)
{
	int			i;

	for (i = 0; i < r->nmeta; i++)
		if (strcmp(r->meta[i].key, key) == 0)
			return r->meta[i].value;
	return NULL;
}

/* See iceberg_internal.h. */
int
iceberg_avro_reader_meta_all(const IcebergAvroReader *r, const IcebergKeyValue **kv)
{
	*kv = r->meta;
	return r->nmeta;
}

/* The block codec the header's avro.codec names (absent or empty: null). */
static bool
select_codec(IcebergAvroReader *r, TmsError *err)
{
	const char *codec = iceberg_avro_reader_meta(r, "avro.codec");

	if (codec == NULL || codec[0] == '\0' || strcmp(codec, "null") == 0)
		r->codec = CODEC_NULL;
	else if (strcmp(codec, "deflate") == 0)
		r->codec = CODEC_DEFLATE;
	else if (strcmp(codec, "snappy") == 0)
		r->codec = CODEC_SNAPPY;
	else
	{
		tms_error_set(err, ICEBERG_ERR_UNSUPPORTED,
					  "unsupported avro codec \"%.40s\" in %s", codec, r->what);
		tms_error_detail(err, "The file is \"%s\"; supported codecs are null, deflate and snappy.",
						 r->path);
		return false;
	}
	return true;
}

/*
 * iceberg_avro_reader_open: see iceberg_internal.h.
 */
bool
iceberg_avro_reader_open(const IcebergFileIO *io, const char *path,
						 const char *what, const IcebergAvroTarget *targets,
						 int ntargets, IcebergAvroReader **out,
						 TmsError *err)
{
	IcebergAvroReader *r;
	TmsError	ioerr;
	int64_t		size;
	size_t		need = 4096;

	*out = NULL;
	if (io == NULL || io->io.open == NULL || io->io.read == NULL ||
		io->io.close == NULL || path == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_INVALID_ARGUMENT,
					  "no file reader given");
		return false;
	}
	r = io_calloc(1, sizeof(IcebergAvroReader));
	if (r == NULL)
	{
		tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
		return false;
	}
	r->io = io;
	r->what = what;
	snprintf(r->path, sizeof(r->path), "%s", path);
	iceberg_effective_limits(io->limits, &r->limits);
	r->string_cap = r->limits.max_string_bytes;
	r->coll_cap = r->limits.max_collection_items;
	tms_error_clear(&ioerr);
	r->handle = io->io.open(io->io.arg, path, &size, &ioerr);
	if (r->handle == NULL)
	{
		tms_error_wrap(err, iceberg_code_of_io(&ioerr), &ioerr, "could not read \"%.200s\"", path);
		io_free(r);
		return false;
	}

	/*
	 * Read in chunks of ICEBERG_READ_CHUNK, or of the whole file when it is
	 * smaller: most manifests and manifest lists are a few kilobytes, and a
	 * buffer of a megabyte for each is a mapping of its own (malloc's mmap
	 * threshold) made and unmade for every file.  The size only sizes the
	 * buffer; the end of the file is where a read returns nothing.
	 */
	r->chunk = size >= 0 && size < ICEBERG_READ_CHUNK ? (size_t) size + 1 : ICEBERG_READ_CHUNK;
	for (;;)
	{
		size_t		used;
		int			rc;

		if (!src_fill(r, need, err))
			goto fail;
		rc = parse_header(r, err, &used);
		if (rc < 0)
			goto fail;
		if (rc > 0)
		{
			r->pos += used;
			break;
		}
		if ((int64_t) need >= r->limits.max_header_bytes)
		{
			iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro header too large");
			goto fail;
		}
		need *= 4;
		if ((int64_t) need > r->limits.max_header_bytes)
			need = (size_t) r->limits.max_header_bytes;
	}
	if (!select_codec(r, err) ||
		!iceberg_avro_build_plan(r, targets, ntargets, err))
		goto fail;
	*out = r;
	return true;

fail:
	iceberg_avro_reader_close(r);
	return false;
}

/* ---------------------------------------------------------------------
 * Blocks
 * ---------------------------------------------------------------------
 */

#ifdef TMS_HAVE_LIBDEFLATE

/*
 * Raw-inflate "in" into r->inflated, capped by max_block_bytes, with
 * libdeflate's one-shot decompressor (a block is whole in memory).  It
 * needs the output's size beforehand, which Avro does not record: the
 * block is inflated into the buffer as it is (its size from earlier
 * blocks, or 4 times the input plus 64 KB for the first), and if that is
 * too small, again into one twice as large, up to the cap.  Memory stays
 * under the cap plus one byte, and a block that would inflate beyond the
 * cap costs at most about twice the cap's worth of inflating before it is
 * refused.
 */
static bool
deflate_block(IcebergAvroReader *r, const uint8_t *in, size_t inlen,
			  TmsError *err)
{
	size_t		cap = (size_t) r->limits.max_block_bytes;
	size_t		want = r->inflated.cap > 0 ? r->inflated.cap - 1
	: (inlen < cap / 4 ? inlen * 4 + 65536 : cap);

	if (r->ld == NULL)
	{
		r->ld = libdeflate_alloc_decompressor();
		if (r->ld == NULL)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY,
						  "could not initialise libdeflate");
			return false;
		}
	}
	r->inflated.len = 0;
	for (;;)
	{
		size_t		got;
		enum libdeflate_result rc;

		if (want > cap)
			want = cap;
		if (!iceberg_buf_reserve(&r->inflated, want))
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
			return false;
		}
		rc = libdeflate_deflate_decompress(r->ld, in, inlen, r->inflated.data, want, &got);
		if (rc == LIBDEFLATE_SUCCESS)
		{
			r->inflated.len = got;
			return true;
		}
		if (rc != LIBDEFLATE_INSUFFICIENT_SPACE)
			return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid deflate block");
		if (want >= cap)
			return iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
		want = want > cap / 2 ? cap : want * 2;
	}
}

#else							/* zlib */

/* Raw-inflate "in" into r->inflated, capped by max_block_bytes. */
static bool
deflate_block(IcebergAvroReader *r, const uint8_t *in, size_t inlen,
			  TmsError *err)
{
	int			rc;
	size_t		cap = (size_t) r->limits.max_block_bytes;

	if (!r->zs_ready)
	{
		memset(&r->zs, 0, sizeof(r->zs));
		r->zs.zalloc = io_zalloc;
		r->zs.zfree = io_zfree;
		if (inflateInit2(&r->zs, -15) != Z_OK)
		{
			tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY,
						  "could not initialise zlib");
			return false;
		}
		r->zs_ready = true;
	}
	else
		inflateReset(&r->zs);
	r->inflated.len = 0;
	r->zs.next_in = (unsigned char *) in;
	r->zs.avail_in = (uInt) inlen;
	for (;;)
	{
		size_t		room;

		if (r->inflated.cap - r->inflated.len < 65536 + 1)
		{
			/* the whole buffer's size: doubled, or a first guess */
			size_t		want = r->inflated.cap ? r->inflated.cap * 2 : inlen * 4 + 65536;

			if (want > cap + 1)
				want = cap + 1;
			if (want <= r->inflated.len + 1)
				return iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
			if (!iceberg_buf_reserve(&r->inflated, want - r->inflated.len))
			{
				tms_error_set(err, ICEBERG_ERR_OUT_OF_MEMORY, "out of memory");
				return false;
			}
		}
		room = r->inflated.cap - r->inflated.len - 1;
		if (r->inflated.len + room > cap)
			room = cap - r->inflated.len;
		if (room == 0)
			return iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
		r->zs.next_out = (unsigned char *) r->inflated.data + r->inflated.len;
		r->zs.avail_out = (uInt) room;
		rc = inflate(&r->zs, Z_NO_FLUSH);
		r->inflated.len += room - r->zs.avail_out;
		if (rc == Z_STREAM_END)
			break;
		if (rc == Z_OK && r->zs.avail_out == 0)
			continue;
		if (rc == Z_OK || rc == Z_BUF_ERROR)
		{
			/* input exhausted without the end marker */
			if (r->zs.avail_in == 0)
				return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED,
										  "truncated deflate block");
			if (r->zs.avail_out == 0)
				continue;
		}
		return iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid deflate block");
	}
	return true;
}

#endif							/* TMS_HAVE_LIBDEFLATE */

/* See avro_internal.h. */
int
iceberg_avro_next_block(IcebergAvroReader *r, TmsError *err)
{
	IcebergAvroCursor c;
	int64_t		count,
				size;
	size_t		hdr;
	const uint8_t *data;

	if (iceberg_check_interrupt(r->io, err))
		return -1;
	if (!src_fill(r, 20, err))
		return -1;
	if (r->end == r->pos && r->eof)
		return 0;
	c.p = r->buf + r->pos;
	c.end = r->buf + r->end;
	if (!rd_long(&c, &count) || !rd_long(&c, &size))
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro block header");
		return -1;
	}
	if (count < 0 || size < 0)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "invalid avro block header");
		return -1;
	}
	if (count > r->limits.max_block_items)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "too many objects in an avro block");
		return -1;
	}
	if (size > r->limits.max_block_bytes)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_LIMIT, "avro block too large");
		return -1;
	}
	hdr = (size_t) (c.p - (r->buf + r->pos));
	if (!src_fill(r, hdr + (size_t) size + 16, err))
		return -1;
	if (r->end - r->pos < hdr + (size_t) size + 16)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "truncated avro block");
		return -1;
	}
	data = r->buf + r->pos + hdr;
	if (memcmp(data + size, r->sync, 16) != 0)
	{
		iceberg_avro_error(r, err, ICEBERG_ERR_MALFORMED, "avro sync marker mismatch");
		return -1;
	}
	r->pos += hdr + (size_t) size + 16;
	switch (r->codec)
	{
		case CODEC_NULL:
			r->cur.p = data;
			r->cur.end = data + size;
			break;
		case CODEC_DEFLATE:
			if (!deflate_block(r, data, (size_t) size, err))
				return -1;
			r->cur.p = (const uint8_t *) r->inflated.data;
			r->cur.end = r->cur.p + r->inflated.len;
			break;
		case CODEC_SNAPPY:
			if (!iceberg_avro_snappy_block(r, data, (size_t) size, err))
				return -1;
			r->cur.p = (const uint8_t *) r->inflated.data;
			r->cur.end = r->cur.p + r->inflated.len;
			break;
	}
	r->bytes_inflated += r->cur.end - r->cur.p;
	r->left = count;
	r->nblocks++;
	return 1;
}

/* See iceberg_internal.h. */
void
iceberg_avro_reader_byte_counts(const IcebergAvroReader *r,
								int64_t *compressed, int64_t *inflated)
{
	if (compressed)
		*compressed = r->bytes_compressed;
	if (inflated)
		*inflated = r->bytes_inflated;
}

/*
 * iceberg_avro_reader_close: see iceberg_internal.h.
 */
void
iceberg_avro_reader_close(IcebergAvroReader *r)
{
	int			i;

	if (r == NULL)
		return;
	if (r->handle != NULL)
		r->io->io.close(r->io->io.arg, r->handle);
	for (i = 0; i < r->nmeta; i++)
	{
		io_free(r->meta[i].key);
		io_free(r->meta[i].value);
	}
	io_free(r->meta);
	io_free(r->top_ids);
	iceberg_avro_free_plan(r->root);
	io_free(r->buf);
	iceberg_buf_free(&r->inflated);
	iceberg_buf_free(&r->scratch);
#ifdef TMS_HAVE_LIBDEFLATE
	if (r->ld != NULL)
		libdeflate_free_decompressor(r->ld);
#else
	if (r->zs_ready)
		inflateEnd(&r->zs);
#endif
	io_free(r);
}
