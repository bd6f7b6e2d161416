/*-------------------------------------------------------------------------
 *
 * unit.h
 *	  The harness of the plain-C unit drivers (test/unit/<name>_test.c):
 *	  checks, their counts, failure reports and the exit status, one copy
 *	  for every driver.
 *
 *	  CHECK(cond, fmt, ...)	a check: counted as passed when cond holds,
 *							else counted as failed and reported as
 *							"FAIL file:line: " and the printf-style message
 *	  CHECK(cond)			the same, the message being "check failed: "
 *							and the text of cond
 *	  FAIL(fmt, ...)		a failed check reported by a helper that tests
 *							a case itself (a bad parse, a wrong result)
 *	  unit_done()			main's last statement: prints "N passed, M
 *							failed" as the last line and returns the exit
 *							status, non-zero when M > 0
 *
 * Reports go to standard output, in order with what a driver prints
 * itself.  A driver includes this header once, after its system headers;
 * the counters npassed and nfailed are its own (static), and a driver may
 * read them (to print a report, or skip what needs an earlier success).
 *
 * Rules: the harness has no dependency beyond the C library, and CHECK
 * evaluates cond exactly once and its message only on failure.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TMS_TEST_UNIT_H
#define TMS_TEST_UNIT_H

#include <stdarg.h>
#include <stdio.h>

static int	npassed;
static int	nfailed;

/*
 * CHECK(cond) passes "" as the format of its message, and the drivers are
 * built with -Wall -Werror, which includes -Wformat-zero-length.
 */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

static void unit_fail_at(const char *file, int line, const char *cond,
						 const char *fmt,...)
			__attribute__((format(printf, 4, 5)));

static void
unit_fail_at(const char *file, int line, const char *cond, const char *fmt,...)
{
	va_list		ap;

	nfailed++;
	printf("FAIL %s:%d: ", file, line);
	if (fmt[0] == '\0')
		printf("check failed: %s", cond);
	else
	{
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			npassed++; \
		else \
			unit_fail_at(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
	} while (0)

#define FAIL(...) unit_fail_at(__FILE__, __LINE__, "", __VA_ARGS__)

static int
unit_done(void)
{
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed > 0 ? 1 : 0;
}

#endif							/* TMS_TEST_UNIT_H */
