/*-------------------------------------------------------------------------
 *
 * aimd_window.c
 *		The additive-increase / multiplicative-decrease rule of a storage
 *		target's request window (io.h, IoAimd): how many requests may be
 *		in flight to one endpoint and bucket, and below one, how long to
 *		wait between two.
 *
 * The window w is a real number between IO_AIMD_MIN_WINDOW and the limit
 * the caller passes (its pool size).  floor(w) requests may be in flight
 * at once, at least one; below 1 a single request is in flight and each
 * start waits IO_AIMD_PACE_MS * (1/w - 1) after the previous one (0 at
 * w = 1, 100 ms at 1/2, 6.3 s at the floor 1/64): the window becomes a
 * pause that grows as it shrinks.
 *
 *	refused		(a whole request answered 503 or 429, SlowDown, or keys of
 *				a DeleteObjects refused SlowDown, ServiceUnavailable or
 *				InternalError) w halves, once per round: a refusal of a
 *				request started before the last decrease does not decrease
 *				again, so that the requests in flight when the storage
 *				began to refuse count as one signal (TCP's rule).  A
 *				Retry-After holds every start until it has passed.
 *	succeeded	w grows by 1/w above 1 (about one more request in flight
 *				per window of successes), by 1/32 below 1.
 *
 * The struct holds no pointer, so it can live in shared memory; callers
 * serialise access to it.  Times are io_now_ms() (CLOCK_MONOTONIC, the
 * same clock in every process of the machine).
 *
 * src/io/storage/aimd_window.c
 *
 *-------------------------------------------------------------------------
 */
#include "io/io_int.h"

/* additive increase below a window of 1 */
#define IO_AIMD_SUB_STEP (1.0 / 32)

/* See io.h. */
void
io_aimd_init(IoAimd *a, int limit)
{
	a->window = limit < 1 ? 1.0 : (double) limit;
	a->epoch = 0;
	a->next_start_ms = 0;
}

/* See io.h. */
int
io_aimd_allowed(const IoAimd *a, int limit)
{
	int			n = (int) a->window;	/* positive: truncation is floor */

	if (limit < 1)
		limit = 1;
	if (n < 1)
		n = 1;
	return n > limit ? limit : n;
}

/* See io.h. */
long
io_aimd_pause_ms(const IoAimd *a)
{
	if (a->window >= 1.0)
		return 0;
	return (long) (IO_AIMD_PACE_MS * (1.0 / a->window - 1.0));
}

/* See io.h. */
void
io_aimd_started(IoAimd *a, int64_t now_ms)
{
	long		pause = io_aimd_pause_ms(a);

	if (pause > 0 && a->next_start_ms < now_ms + pause)
		a->next_start_ms = now_ms + pause;
}

/* See io.h. */
void
io_aimd_succeeded(IoAimd *a, int limit)
{
	if (a->window < 1.0)
		a->window += IO_AIMD_SUB_STEP;
	else
		a->window += 1.0 / a->window;
	if (limit < 1)
		limit = 1;
	if (a->window > limit)
		a->window = limit;
}

/* See io.h. */
bool
io_aimd_refused(IoAimd *a, uint32_t started_epoch, bool adapt,
				long retry_after_ms, int64_t now_ms)
{
	bool		decreased = false;

	if (retry_after_ms > 0 && a->next_start_ms < now_ms + retry_after_ms)
		a->next_start_ms = now_ms + retry_after_ms;
	if (adapt && started_epoch == a->epoch)
	{
		a->window /= 2;
		if (a->window < IO_AIMD_MIN_WINDOW)
			a->window = IO_AIMD_MIN_WINDOW;
		a->epoch++;
		decreased = true;
	}
	return decreased;
}
