/* lpm.h - the rule index: for a destination address, the rules whose CIDRs
 * (or whose to_zone's CIDRs) cover it, in file order, found in a number of
 * steps that does not grow with the number of rules. A multibit trie over
 * IPv4 (strides of 16, 8 and 8 bits) and IPv6 (16 of 8 bits); each leaf slot
 * holds the sorted list of covering rule indices (prefixes are expanded to
 * the slots they cover, so coverage is exact). A rule with no destination
 * limit is a /0 of both families, so every list is complete and a lookup
 * reads one. Immutable once built; a policy's copies share it (refs). */
#ifndef FAULTNET_LPM_H
#define FAULTNET_LPM_H

#include <stddef.h>
#include <stdint.h>

#include "core/addr.h"

#define FN_LPM_ROOT4 65536 /* IPv4's first step: 16 bits */

struct fn_lpm {
	uint64_t refs;
	uint32_t *root4; /* FN_LPM_ROOT4 slots */
	uint32_t root6[256];
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
 * below 2^31 - 256: fn_lpm_build). */
static inline uint32_t fn_lpm_step(const struct fn_lpm *t, uint32_t v, uint8_t b)
{
	return *(const uint32_t *)(t->nodes_biased + (((uintptr_t)v + b) << 2));
}

/* The rules whose destinations cover ep, in file order, ended by t->end
 * (never NULL). A leaf slot holds its list's offset in the pool. */
static inline const uint32_t *fn_lpm_lookup(const struct fn_lpm *t, const struct fn_endpoint *ep)
{
	uint32_t v;
	if (ep->v4) { /* at most three steps: unrolled */
		v = t->root4[ep->ip[0] | (unsigned)ep->ip[1] << 8]; /* one load */
		if (v & 0x80000000u) {
			v = fn_lpm_step(t, v, ep->ip[2]);
			if (v & 0x80000000u)
				v = fn_lpm_step(t, v, ep->ip[3]);
		}
	} else {
		v = t->root6[ep->ip[0]];
		for (int k = 1; v & 0x80000000u; k++)
			v = fn_lpm_step(t, v, ep->ip[k]);
	}
	return &t->pool[v];
}

/* Bytes the index takes, for the benchmark. */
size_t fn_lpm_bytes(const struct fn_lpm *t);

#endif
