/* rnd.h - the unit tests' reproducible random numbers (xorshift64): each
 * test file keeps its own state, so that adding draws to one leaves the
 * others' sequences as they were. */
#ifndef FAULTNET_TEST_RND_H
#define FAULTNET_TEST_RND_H

#include <stdint.h>

/* A number in [0, n), from *state. */
static inline uint32_t test_rnd(uint64_t *state, uint32_t n)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state % n);
}

#endif
