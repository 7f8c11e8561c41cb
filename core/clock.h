/* clock.h - the one clock of the tree: CLOCK_MONOTONIC in nanoseconds,
 * which every timer, release time and rule window counts in, and MS, the
 * nanoseconds of a millisecond, the unit rules give their times in. */
#ifndef FAULTNET_CLOCK_H
#define FAULTNET_CLOCK_H

#include <stdint.h>

#define MS 1000000ull

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fn_now_ns(void);

#endif
