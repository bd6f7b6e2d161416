/*-------------------------------------------------------------------------
 *
 * strbuf.h
 *		The one growable byte buffer of the plain-C layers: io and engine
 *		(IoStrBuf, io_sb_*), iceberg (IcebergBuf, functions that return
 *		whether they succeeded) and the compaction helper (its SQL text)
 *		share this implementation (src/io/util/io_base.c).  The lowest layer
 *		all of them may include is io (scripts/check-layers.sh); dsl and
 *		cron build no text of unbounded size.
 *
 * Rules: the text is always NUL-terminated once anything was appended
 * (data is NULL before); it grows by doubling from 64 bytes; a failed
 * allocation, or a size that would overflow, sets oom, which sticks: every
 * later call does nothing, and the owner checks oom once at the end.
 * Plain C, memory from io_malloc (io_memory.h), no PostgreSQL header.
 *
 * src/io/util/strbuf.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_IO_STRBUF_H
#define TMS_IO_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
#define IO_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define IO_PRINTF(f, a)
#endif

/* A growable NUL-terminated byte buffer; oom sticks once set. */
typedef struct IoStrBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		oom;
} IoStrBuf;

extern void io_sb_init(IoStrBuf *sb);
extern void io_sb_free(IoStrBuf *sb);

/* io_sb_free for a buffer that held a secret: its bytes are overwritten
 * first, by stores the compiler may not remove as dead before free(). */
extern void io_sb_wipe_free(IoStrBuf *sb);

/* Room for n more bytes and the NUL; false (and oom) when there is none. */
extern bool io_sb_reserve(IoStrBuf *sb, size_t n);
extern void io_sb_append(IoStrBuf *sb, const void *s, size_t n);
extern void io_sb_puts(IoStrBuf *sb, const char *s);
extern void io_sb_putc(IoStrBuf *sb, char c);
extern void io_sb_printf(IoStrBuf *sb, const char *fmt,...) IO_PRINTF(2, 3);
extern void io_sb_vprintf(IoStrBuf *sb, const char *fmt, va_list ap) IO_PRINTF(2, 0);

/*
 * Hand the text over, malloc'd (an empty string for an empty buffer), or
 * NULL when oom; the buffer is reset either way.
 */
extern char *io_sb_steal(IoStrBuf *sb);

#endif							/* TMS_IO_STRBUF_H */
