/* The clocks of the tests and their tools, once: monotonic milliseconds and
 * a sleep that survives signals. Header-only (static inline): the tools
 * link no test library. */
#ifndef INBOX_TESTS_CLOCK_H
#define INBOX_TESTS_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The wall clock in ms, to compare with a database's now(). */
static inline int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000),
	                      (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

#endif
