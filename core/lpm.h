/* lpm.h - the rule index: for a destination address, the rules whose CIDRs
 * (or whose to_zone's CIDRs) cover it, in file order, found in a number of
 * steps that does not grow with the number of rules. A multibit trie of
 * 8-bit strides over IPv4 (4 levels) and IPv6 (16 levels); each leaf slot
 * holds the sorted list of covering rule indices (prefixes are expanded to
 * the slots they cover, so coverage is exact). Rules with no destination
 * limit are kept apart, in one list merged in at lookup. Immutable once
 * built; a policy's copies share it (refs). */
#ifndef FAULTNET_LPM_H
#define FAULTNET_LPM_H

#include <stddef.h>
#include <stdint.h>

#include "core/addr.h"

#define FN_LPM_END UINT32_MAX /* ends every candidate list */

struct fn_lpm {
	uint64_t refs;
	uint32_t root4[256], root6[256];
	uint32_t *nodes; /* 256 slots per node */
	size_t nnodes;
	uint32_t *pool; /* candidate lists, each ended by FN_LPM_END */
	size_t npool;
	uint32_t *any;	 /* rules that cover every destination, ended by FN_LPM_END */
	uint8_t *simple; /* per rule: its protocols, and FN_LPM_SIMPLE when the CIDR
			    is all its match (no ports, no zones): checked in a load */
	size_t prefixes;
};

#define FN_LPM_SIMPLE 0x80

struct fn_policy;

/* Builds the index of p's rules; NULL when memory is short (callers then
 * scan, which gives the same answers). */
struct fn_lpm *fn_lpm_build(const struct fn_policy *p);
void fn_lpm_put(struct fn_lpm *t);

/* The rules whose destinations cover ep, in file order, ended by
 * FN_LPM_END (never NULL). A child slot holds CHILD | the child's first
 * slot's offset in nodes, so a step is a mask, an add and a load. */
static inline const uint32_t *fn_lpm_lookup(const struct fn_lpm *t, const struct fn_endpoint *ep)
{
	static const uint32_t none = FN_LPM_END;
	uint32_t v;
	if (ep->v4) { /* at most four steps: unrolled */
		v = t->root4[ep->ip[0]];
		if (v & 0x80000000u) {
			v = t->nodes[(v & 0x7fffffffu) + ep->ip[1]];
			if (v & 0x80000000u) {
				v = t->nodes[(v & 0x7fffffffu) + ep->ip[2]];
				if (v & 0x80000000u)
					v = t->nodes[(v & 0x7fffffffu) + ep->ip[3]];
			}
		}
	} else {
		v = t->root6[ep->ip[0]];
		for (int k = 1; v & 0x80000000u; k++)
			v = t->nodes[(v & 0x7fffffffu) + ep->ip[k]];
	}
	return v ? &t->pool[v - 1] : &none;
}

/* Bytes the index takes, for the benchmark. */
size_t fn_lpm_bytes(const struct fn_lpm *t);

#endif
