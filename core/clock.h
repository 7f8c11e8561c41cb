/* clock.h - the one clock of the tree: CLOCK_MONOTONIC in nanoseconds,
 * which every timer, release time and rule window counts in, and MS, the
 * nanoseconds of a millisecond, the unit rules give their times in. */
#ifndef FAULTNET_CLOCK_H
#define FAULTNET_CLOCK_H

#include <stdint.h>

#define MS 1000000ull

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fn_now_ns(void);

/* The same clock read by a system call, for a process's start, which may
 * read it only once: the vDSO's first reading touches three pages (libc's
 * wrapper and the kernel's two data pages), each a page fault, which costs
 * several system calls' time in a virtual machine. */
uint64_t fn_now_ns_once(void);

#endif
