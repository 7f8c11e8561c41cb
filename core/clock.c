/* clock.c - the monotonic clock in nanoseconds (see clock.h). */
#include "core/clock.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t ns_of(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

uint64_t fn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ns_of(&ts);
}

uint64_t fn_now_ns_once(void)
{
	struct timespec ts;
	if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0)
		return fn_now_ns();
	return ns_of(&ts);
}
