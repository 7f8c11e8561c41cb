/* lpm.h - the rule index: for a destination address, the rules whose CIDRs
 * (or whose to_zone's CIDRs) cover it, in file order, found in a number of
 * steps that does not grow with the number of rules. A multibit trie over
 * IPv4 and IPv6 alike: the first 16 bits in one step, then 8 bits a step;
 * each leaf slot holds the sorted list of covering rule indices (prefixes
 * are expanded to the slots they cover, so coverage is exact). IPv6 paths
 * are also compressed: a run of nodes that each have one child and the
 * same list in every other slot (the bytes every prefix under them shares,
 * fd00:91:: of a policy of /128s, say) is one skip, which compares those
 * bytes at once. A rule with no destination is a /0 of both families, so
 * every list is complete and a lookup reads one. Immutable once built; a
 * policy's copies share it (refs). */
#ifndef FAULTNET_LPM_H
#define FAULTNET_LPM_H

#include <stddef.h>
#include <stdint.h>

#include "core/addr.h"

#define FN_LPM_ROOT 65536 /* the first step: 16 bits */

/* A slot's value: a list's offset in the pool, or FN_LPM_CHILD | the first
 * slot's offset of the node under it, or FN_LPM_CHILD | FN_LPM_SKIP | a skip's
 * index. */
#define FN_LPM_CHILD 0x80000000u
#define FN_LPM_SKIP 0x40000000u

/* A compressed run of IPv6 nodes: the address's bytes under mask must equal
 * pattern's (both in address order, two 64-bit words); then the walk goes
 * on at next with byte to, else it ends with the list miss. */
struct fn_lpm_skip {
	uint64_t pattern[2], mask[2];
	uint32_t next, miss, to;
};

struct fn_lpm {
	uint64_t refs;
	uint32_t *root4, *root6; /* FN_LPM_ROOT slots each */
	struct fn_lpm_skip *skips;
	size_t nskips;
	uint32_t *nodes; /* 256 slots per node */
	size_t nnodes;
	uintptr_t nodes_biased; /* nodes minus the child mark's worth of slots:
				   a child slot indexes it as it is */
	uint32_t *pool;		/* candidate lists, each ended by end; the empty list at
				   offset 0 */
	uint32_t end;		/* the number of rules: the index no rule has */
	size_t npool;
	size_t prefixes;
};

struct fn_policy;

/* Builds the index of p's rules; NULL when memory is short (callers then
 * scan, which gives the same answers). */
struct fn_lpm *fn_lpm_build(const struct fn_policy *p);
void fn_lpm_put(struct fn_lpm *t);

/* One step down: v is a child slot (the child mark | the child's first
 * slot's offset in nodes), b the address's byte. The mark is not masked
 * off: nodes_biased is nodes moved back by as many slots (offsets stay
 * below FN_LPM_SKIP: fn_lpm_build). */
static inline uint32_t fn_lpm_step(const struct fn_lpm *t, uint32_t v, uint8_t b)
{
	return *(const uint32_t *)(t->nodes_biased + (((uintptr_t)v + b) << 2));
}

/* Past a skip: its next slot, with *k moved past the bytes it compared, or
 * its miss list when the address leaves the run. */
static inline uint32_t fn_lpm_skip(const struct fn_lpm *t, uint32_t v, const uint8_t ip[16],
				   unsigned *k)
{
	const struct fn_lpm_skip *s = &t->skips[v & (FN_LPM_SKIP - 1)];
	uint64_t a, b;
	__builtin_memcpy(&a, ip, 8);
	__builtin_memcpy(&b, ip + 8, 8);
	if (((a ^ s->pattern[0]) & s->mask[0]) | ((b ^ s->pattern[1]) & s->mask[1]))
		return s->miss;
	*k = s->to;
	return s->next;
}

/* The rules whose destinations cover ep, in file order, ended by t->end
 * (never NULL). A leaf slot holds its list's offset in the pool. Both
 * roots are indexed by the first two bytes in little-endian order, which
 * is one load on the machines we run on. */
static inline const uint32_t *fn_lpm_lookup(const struct fn_lpm *t, const struct fn_endpoint *ep)
{
	uint32_t v;
	if (ep->v4) { /* at most three steps: unrolled */
		v = t->root4[ep->ip[0] | (unsigned)ep->ip[1] << 8];
		if (v & FN_LPM_CHILD) {
			v = fn_lpm_step(t, v, ep->ip[2]);
			if (v & FN_LPM_CHILD)
				v = fn_lpm_step(t, v, ep->ip[3]);
		}
	} else {
		v = t->root6[ep->ip[0] | (unsigned)ep->ip[1] << 8];
		for (unsigned k = 2; v & FN_LPM_CHILD;)
			v = v & FN_LPM_SKIP ? fn_lpm_skip(t, v, ep->ip, &k)
					    : fn_lpm_step(t, v, ep->ip[k++]);
	}
	return &t->pool[v];
}

/* Bytes the index takes, for the benchmark. */
size_t fn_lpm_bytes(const struct fn_lpm *t);

#endif
