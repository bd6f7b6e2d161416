/*-------------------------------------------------------------------------
 *
 * io_base.c
 *		Helpers of the io layer: the error value of the plain-C layers
 *		(TmsError of io_error.h), the string buffer of the plain-C layers (strbuf.h), URI percent-encoding, sha256, clocks
 *		and interruptible sleeps, UUIDv7 idempotency keys and ISO-8601
 *		durations.
 *
 * src/io/util/io_base.c
 *
 *-------------------------------------------------------------------------
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>
#include <openssl/sha.h>

#include "io/io_int.h"

/* Reset an error value to "no error". */
void
tms_error_clear(TmsError *err)
{
	if (err == NULL)
		return;
	err->code = 0;
	err->io_code = IO_OK;
	err->http_status = 0;
	err->message[0] = '\0';
	err->detail[0] = '\0';
	err->hint[0] = '\0';
}

/* The ranges of io_error.h. */
TmsErrorDomain
tms_error_domain(int code)
{
	if (code == 0)
		return TMS_ERROR_NONE;
	if (code < ICEBERG_ERR_MALFORMED)
		return TMS_ERROR_IO;
	if (code < ENGINE_ERR_UNKNOWN_OPERATION)
		return TMS_ERROR_ICEBERG;
	return TMS_ERROR_ENGINE;
}

/* Stable short names, used in messages and by tests. */
const char *
tms_error_code_name(int code)
{
	switch (code)
	{
		case IO_OK:
			return "ok";
		case IO_ERR_INVALID_ARGUMENT:
			return "invalid argument";
		case IO_ERR_OUT_OF_MEMORY:
			return "out of memory";
		case IO_ERR_INTERRUPTED:
			return "interrupted";
		case IO_ERR_TIMEOUT:
			return "timeout";
		case IO_ERR_CONNECT:
			return "connection failure";
		case IO_ERR_TLS:
			return "TLS failure";
		case IO_ERR_PROTOCOL:
			return "protocol error";
		case IO_ERR_TOO_LARGE:
			return "response too large";
		case IO_ERR_BAD_REQUEST:
			return "bad request";
		case IO_ERR_UNAUTHORIZED:
			return "unauthorized";
		case IO_ERR_FORBIDDEN:
			return "forbidden";
		case IO_ERR_NOT_FOUND:
			return "not found";
		case IO_ERR_NO_SUCH_NAMESPACE:
			return "no such namespace";
		case IO_ERR_NO_SUCH_TABLE:
			return "no such table";
		case IO_ERR_ALREADY_EXISTS:
			return "already exists";
		case IO_ERR_CONFLICT:
			return "conflict";
		case IO_ERR_COMMIT_STATE_UNKNOWN:
			return "commit state unknown";
		case IO_ERR_UNAVAILABLE:
			return "service unavailable";
		case IO_ERR_SERVER:
			return "server error";
		case IO_ERR_UNSUPPORTED:
			return "unsupported";
		case IO_ERR_STORAGE:
			return "storage error";
		case IO_ERR_INTERNAL:
			return "internal error";
		case ICEBERG_ERR_MALFORMED:
			return "malformed";
		case ICEBERG_ERR_UNSUPPORTED:
			return "unsupported";
		case ICEBERG_ERR_IO:
			return "io";
		case ICEBERG_ERR_NOT_FOUND:
			return "not-found";
		case ICEBERG_ERR_LIMIT:
			return "limit";
		case ICEBERG_ERR_OUT_OF_MEMORY:
			return "out-of-memory";
		case ICEBERG_ERR_CANCELLED:
			return "cancelled";
		case ICEBERG_ERR_INVALID_ARGUMENT:
			return "invalid-argument";
		case ICEBERG_ERR_CONFLICT:
			return "conflict";
		case ENGINE_ERR_UNKNOWN_OPERATION:
			return "unknown operation";
		case ENGINE_ERR_UNSUPPORTED:
			return "unsupported by the engine";
		case ENGINE_ERR_UNKNOWN_OPTION:
			return "unknown option";
		case ENGINE_ERR_INVALID_VALUE:
			return "invalid value";
		case ENGINE_ERR_INVALID_NAME:
			return "invalid name";
		case ENGINE_ERR_INVALID_RESULT:
			return "invalid result";
		case ENGINE_ERR_OUT_OF_MEMORY:
			return "out of memory";
	}
	return "unknown";
}

static void set_message(TmsError *err, int code, long http_status,
						const char *fmt, va_list ap) TMS_ERROR_PRINTF(4, 0);

static void
set_message(TmsError *err, int code, long http_status, const char *fmt,
			va_list ap)
{
	err->code = code;
	err->io_code = IO_OK;
	err->http_status = http_status;
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	err->detail[0] = '\0';
	err->hint[0] = '\0';
}

/* Fill *err; always returns -1 so callers can "return tms_error_set(...)". */
int
tms_error_set(TmsError *err, int code, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	set_message(err, code, 0, fmt, ap);
	va_end(ap);
	return -1;
}

/* tms_error_set with the HTTP status of the failed exchange. */
int
tms_error_set_http(TmsError *err, int code, long http_status,
				   const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	set_message(err, code, http_status, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * An io failure under another layer's code (io_error.h).  under must not
 * be err: its texts are read after err's message is written.
 */
int
tms_error_wrap(TmsError *err, int code, const TmsError *under,
			   const char *fmt,...)
{
	va_list		ap;
	IoErrorCode ic;

	if (err == NULL)
		return -1;
	if (tms_error_domain(under->code) == TMS_ERROR_IO)
		ic = (IoErrorCode) under->code;
	else
		ic = under->io_code;
	va_start(ap, fmt);
	set_message(err, code, under->http_status, fmt, ap);
	va_end(ap);
	err->io_code = ic == IO_OK ? IO_ERR_STORAGE : ic;
	snprintf(err->detail, sizeof(err->detail), "%.500s%s%.500s", under->message,
			 under->detail[0] ? ": " : "", under->detail);
	return -1;
}

/* Set the detail of an error already set. */
void
tms_error_detail(TmsError *err, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

/*
 * Copy server-provided text into err->detail, truncated, with control
 * characters replaced by spaces so the text is safe in a log line.
 */
void
tms_error_detail_raw(TmsError *err, const char *text, size_t len)
{
	size_t		i;

	if (err == NULL)
		return;
	if (text == NULL)
		len = 0;
	if (len >= sizeof(err->detail))
		len = sizeof(err->detail) - 1;
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) text[i];

		err->detail[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char) c;
	}
	err->detail[len] = '\0';
}

/* Set the hint of an error already set. */
void
tms_error_hint(TmsError *err, const char *fmt,...)
{
	va_list		ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
	va_end(ap);
}

void
io_sb_init(IoStrBuf *sb)
{
	sb->data = NULL;
	sb->len = 0;
	sb->cap = 0;
	sb->oom = false;
}

void
io_sb_free(IoStrBuf *sb)
{
	io_free(sb->data);
	io_sb_init(sb);
}

void
io_sb_wipe_free(IoStrBuf *sb)
{
	volatile char *p = sb->data;

	/* a volatile store is not removed as dead before free() */
	for (size_t i = 0; p != NULL && i < sb->len; i++)
		p[i] = '\0';
	io_sb_free(sb);
}

/*
 * See strbuf.h: room for n more bytes plus a NUL, or oom (also when the
 * size would pass SIZE_MAX / 2).
 */
bool
io_sb_reserve(IoStrBuf *sb, size_t n)
{
	size_t		need;
	char	   *p;
	size_t		cap;

	if (sb->oom)
		return false;
	if (n > SIZE_MAX / 2 - sb->len - 1)
	{
		sb->oom = true;
		return false;
	}
	need = sb->len + n + 1;
	if (need <= sb->cap)
		return true;
	cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap *= 2;
	p = io_realloc(sb->data, cap);
	if (p == NULL)
	{
		sb->oom = true;
		return false;
	}
	sb->data = p;
	sb->cap = cap;
	return true;
}

void
io_sb_append(IoStrBuf *sb, const void *s, size_t n)
{
	if (!io_sb_reserve(sb, n))
		return;
	if (n > 0)
		memcpy(sb->data + sb->len, s, n);
	sb->len += n;
	sb->data[sb->len] = '\0';
}

void
io_sb_puts(IoStrBuf *sb, const char *s)
{
	io_sb_append(sb, s, strlen(s));
}

void
io_sb_putc(IoStrBuf *sb, char c)
{
	io_sb_append(sb, &c, 1);
}

void
io_sb_printf(IoStrBuf *sb, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	io_sb_vprintf(sb, fmt, ap);
	va_end(ap);
}

void
io_sb_vprintf(IoStrBuf *sb, const char *fmt, va_list ap)
{
	va_list		aq;
	int			n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0 || !io_sb_reserve(sb, (size_t) n))
	{
		sb->oom = true;
		return;
	}
	vsnprintf(sb->data + sb->len, (size_t) n + 1, fmt, ap);
	sb->len += (size_t) n;
}

/*
 * Return the buffer's text, malloc'd (an empty string for an empty
 * buffer), or NULL when an allocation failed on the way.
 */
char *
io_sb_steal(IoStrBuf *sb)
{
	char	   *p;

	if (sb->oom)
	{
		io_sb_free(sb);
		return NULL;
	}
	if (sb->data == NULL)
		return io_strdup("");
	p = sb->data;
	io_sb_init(sb);
	return p;
}

void
io_wipe_free(char *s)
{
	volatile char *p = s;

	if (s == NULL)
		return;
	/* a volatile store is not removed as dead before free() */
	while (*p)
		*p++ = '\0';
	io_free(s);
}

void
io_form_add(IoStrBuf *sb, const char *key, const char *value)
{
	char	   *v = io_uri_encode(value, strlen(value), false);

	if (v == NULL)
	{
		sb->oom = true;
		return;
	}
	if (sb->len > 0)
		io_sb_putc(sb, '&');
	io_sb_printf(sb, "%s=%s", key, v);
	io_wipe_free(v);
}

bool
io_str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Free a list's items (wiped first when they may hold secrets), reset it. */
static void
string_list_free(IoStringList *list, bool wipe)
{
	size_t		i;

	if (list == NULL)
		return;
	for (i = 0; i < list->n; i++)
	{
		if (wipe)
			io_wipe_free(list->items[i]);
		else
			io_free(list->items[i]);
	}
	io_free(list->items);
	list->items = NULL;
	list->n = 0;
}

/* Free a string list and reset it. */
void
io_string_list_free(IoStringList *list)
{
	string_list_free(list, false);
}

/* See io_int.h. */
void
io_string_list_wipe(IoStringList *list)
{
	string_list_free(list, true);
}

int
io_hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---------------------------------------------------------------------
 * Civil dates: days since 1970-01-01 (Iceberg's date and day transform,
 * the engines' timestamps, crontab days) from year, month and day of the proleptic Gregorian
 * calendar and back, by Howard Hinnant's algorithms
 * (https://howardhinnant.github.io/date_algorithms.html), exact for every
 * int64 day count a table can hold.
 * ---------------------------------------------------------------------
 */

/* See io.h. */
int64_t
io_days_from_civil(int64_t y, int m, int d)
{
	int64_t		era;
	int64_t		yoe,
				doy,
				doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* See io.h. */
void
io_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t		z = days + 719468;
	int64_t		era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t		doe = z - era * 146097;
	int64_t		yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t		doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t		mp = (5 * doy + 2) / 153;

	*d = (int) (doy - (153 * mp + 2) / 5 + 1);
	*m = (int) (mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

/*
 * Percent-encode per RFC 3986: A-Z a-z 0-9 - . _ ~ are kept, and '/' when
 * keep_slash; every other byte becomes %XX with uppercase hex.
 */
char *
io_uri_encode(const char *s, size_t len, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	char	   *out;
	size_t		i,
				j = 0;

	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	out = io_malloc(len * 3 + 1);
	if (out == NULL)
		return NULL;
	for (i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
			(keep_slash && c == '/'))
			out[j++] = (char) c;
		else
		{
			out[j++] = '%';
			out[j++] = hex[c >> 4];
			out[j++] = hex[c & 15];
		}
	}
	out[j] = '\0';
	return out;
}

/*
 * Percent-decode; malformed escapes are kept literally.  '+' is not
 * special (AWS canonicalisation treats it as a literal plus).
 */
char *
io_uri_decode(const char *s, size_t len)
{
	char	   *out = io_malloc(len + 1);
	size_t		i,
				j = 0;

	if (out == NULL)
		return NULL;
	for (i = 0; i < len; i++)
	{
		if (s[i] == '%' && i + 2 < len && io_hex_value((unsigned char) s[i + 1]) >= 0 &&
			io_hex_value((unsigned char) s[i + 2]) >= 0)
		{
			out[j++] = (char) (io_hex_value((unsigned char) s[i + 1]) * 16 +
							   io_hex_value((unsigned char) s[i + 2]));
			i += 2;
		}
		else
			out[j++] = s[i];
	}
	out[j] = '\0';
	return out;
}

/* Lowercase hex sha256 of data into hex[65]. */
void
io_sha256_hex(const void *data, size_t len, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[SHA256_DIGEST_LENGTH];
	int			i;

	SHA256((const unsigned char *) data, len, md);
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
	{
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}

/* "YYYYMMDDTHHMMSSZ" in UTC. */
void
io_amz_date(time_t t, char *buf)
{
	struct tm	tm;

	gmtime_r(&t, &tm);
	strftime(buf, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int64_t
io_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* See io_int.h. */
int64_t
io_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Sleep in slices of at most IO_POLL_INTERVAL_MS, checking for interrupts;
 * each slice through the options' sleep_ms when set (inside PostgreSQL a
 * WaitLatch: it ends early on a signal and exits on postmaster death).
 */
int
io_sleep_ms(const IoHttpOptions *opt, long ms, TmsError *err)
{
	int64_t		end = io_now_ms() + ms;

	for (;;)
	{
		int64_t		left;
		struct timespec ts;

		if (opt != NULL && opt->interrupted != NULL &&
			opt->interrupted(opt->interrupt_arg))
			return tms_error_set(err, IO_ERR_INTERRUPTED,
								 "request interrupted");
		left = end - io_now_ms();
		if (left <= 0)
			return 0;
		if (left > IO_POLL_INTERVAL_MS)
			left = IO_POLL_INTERVAL_MS;
		if (opt != NULL && opt->sleep_ms != NULL)
		{
			opt->sleep_ms(opt->interrupt_arg, (long) left);
			continue;
		}
		ts.tv_sec = 0;
		ts.tv_nsec = (long) left * 1000000L;
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		{
			if (opt != NULL && opt->interrupted != NULL &&
				opt->interrupted(opt->interrupt_arg))
				return tms_error_set(err, IO_ERR_INTERRUPTED,
									 "request interrupted");
		}
	}
}

/* See io_int.h. */
int
io_make_uuid7(char *out, TmsError *err)
{
	uint8_t		b[16];
	uint64_t	ms = (uint64_t) io_wall_ms();
	int			i;

	if (RAND_bytes(b + 6, 10) != 1)
		return tms_error_set(err, IO_ERR_INTERNAL,
							 "could not generate random bytes for an idempotency key");
	/* RFC 9562, 5.7: unix_ts_ms (48 bits, big-endian), ver 7, var 10 */
	for (i = 0; i < 6; i++)
		b[i] = (uint8_t) (ms >> (8 * (5 - i)));
	b[6] = (uint8_t) ((b[6] & 0x0f) | 0x70);
	b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
	io_format_uuid(b, out);
	return 0;
}

/* See io.h. */
void
io_format_uuid(const uint8_t bytes[16], char *out)
{
	static const char hex[] = "0123456789abcdef";
	int			k = 0;

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[bytes[i] >> 4];
		out[k++] = hex[bytes[i] & 15];
	}
	out[k] = '\0';
}

/* See io_int.h. */
bool
io_parse_iso_duration_ms(const char *s, int64_t *ms)
{
	/* designators in the order they may appear, and their ms */
	static const char date_units[] = "WD";
	static const int64_t date_ms[] = {7 * 86400000LL, 86400000LL};
	static const char time_units[] = "HMS";
	static const int64_t time_ms[] = {3600000LL, 60000LL, 1000LL};
	const char *p = s;
	int64_t		total = 0;
	bool		in_time = false;
	bool		any = false;
	int			next = 0;		/* index of the first designator still allowed */

	if (s == NULL || *p++ != 'P')
		return false;
	while (*p != '\0')
	{
		int64_t		whole = 0;
		int64_t		frac_ms = 0;
		int			ndig = 0;
		const char *units = in_time ? time_units : date_units;
		const int64_t *unit_ms = in_time ? time_ms : date_ms;
		const char *u;
		int			idx;

		if (*p == 'T')
		{
			if (in_time || p[1] == '\0')
				return false;
			in_time = true;
			next = 0;
			p++;
			continue;
		}
		while (*p >= '0' && *p <= '9')
		{
			if (++ndig > 9)
				return false;	/* beyond any lifetime worth honouring */
			whole = whole * 10 + (*p++ - '0');
		}
		if (ndig == 0)
			return false;
		if ((*p == '.' || *p == ',') && in_time && p[1] >= '0' && p[1] <= '9')
		{
			int64_t		scale = 100;

			/* a fraction, seconds only: keep milliseconds */
			for (p++; *p >= '0' && *p <= '9'; p++)
			{
				frac_ms += (*p - '0') * scale;
				scale /= 10;
			}
			if (*p != 'S')
				return false;
		}
		if (*p == '\0' || (u = strchr(units, *p)) == NULL)
			return false;		/* no designator, or Y/M(onth): no fixed
								 * length */
		idx = (int) (u - units);
		if (idx < next)
			return false;		/* out of order or repeated */
		next = idx + 1;
		total += whole * unit_ms[idx] + frac_ms;
		any = true;
		p++;
	}
	if (!any || total > IO_MAX_ISO_DURATION_MS)
		return false;
	*ms = total;
	return true;
}
