/* lpm.h - the rule index: for a destination address, the rules whose CIDRs
 * (or whose to_zone's CIDRs) cover it, in file order, found in a number of
 * steps that does not grow with the number of rules. A multibit trie over
 * IPv4 and IPv6 alike: the first 16 bits in one step, then 8 bits a step;
 * each leaf slot holds the sorted list of covering rule indices (prefixes
 * are expanded to the slots they cover, so coverage is exact). IPv6 starts
 * after the bytes its prefixes share (a home, or a home per site: see
 * struct fn_lpm_home), compared at once; below, a run of nodes that each
 * have one child and the same list in every other slot is one skip, which
 * also compares its bytes at once. A rule with no destination is a /0 of
 * both families, so every list is complete and a lookup reads one.
 * Immutable once built; a policy's copies share it (refs). */
#ifndef FAULTNET_LPM_H
#define FAULTNET_LPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/addr.h"

#define FN_LPM_ROOT 65536 /* the first step: 16 bits */

/* A slot's value: a list's offset in the pool, or FN_LPM_CHILD | the first
 * slot's offset of the node under it, or skip0 + a skip's index. A skip is
 * not a child, so that a walk down plain nodes tests one bit a step and
 * stops at a skip as at a leaf; read as a list, it holds end + 1, a rule
 * index no rule has and that is not the end: the caller's first-candidate
 * test fails and it goes on from the skip (fn_lpm_resume). Offsets stay
 * below FN_LPM_SKIP. */
#define FN_LPM_CHILD 0x80000000u
#define FN_LPM_SKIP 0x40000000u

/* A compressed run of IPv6 nodes: the address's bytes under mask must equal
 * pattern's (both in address order, two 64-bit words); then the walk goes
 * on at next with byte to, else it ends with the list miss. */
struct fn_lpm_skip {
	uint64_t pattern[2], mask[2];
	uint32_t next, miss, to;
};

/* IPv6 homes: the bytes a group of a policy's IPv6 prefixes share (a
 * site's), at most this many groups. */
#define FN_LPM_HOMES 32

/* A home: its at bytes, and any later byte all its prefixes have whole
 * and alike (pattern under mask, in address order), and the root indexed
 * by the two bytes after the at bytes. A policy's IPv6 rules are mostly a
 * site's or a few sites': their shared bytes cost one comparison instead
 * of a step each, and no node is built for the later ones (a prefix
 * whose remaining bytes are all such is a leaf where they start: lpm.c,
 * settled()). */
struct fn_lpm_home {
	uint64_t pattern[2], mask[2];
	uint32_t *root; /* FN_LPM_ROOT slots */
	uint32_t at;
};

struct fn_lpm {
	uint64_t refs;
	uint32_t *root4; /* FN_LPM_ROOT slots */
	/* IPv6's homes, one per site; every IPv6 prefix but a /0 is under
	 * one of them. The sites differ in their byte sel_at, and sel gives
	 * the home for each value of it: the only one an address can be
	 * under (a value no site has gets home[0], whose bytes include
	 * sel_at: the address is under none). An address under none is
	 * covered only by the rules of every destination: the list out6. */
	const struct fn_lpm_home *sel[256];
	uint32_t sel_at;
	struct fn_lpm_home home[FN_LPM_HOMES];
	const struct fn_lpm_home *homes_end;
	uint32_t out6;
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
	uint32_t skip0; /* the first skip's slot value */
	/* A large policy's: its arrays and its build's are mappings of their
	 * own (core/bigalloc.h: fn_map_realloc), not heap chunks. */
	bool mapped;
};

struct fn_policy;

/* Builds the index of p's rules; NULL when memory is short (callers then
 * scan, which gives the same answers). */
struct fn_lpm *fn_lpm_build(const struct fn_policy *p);
/* Indexes this thread has built. For tests. */
extern _Thread_local size_t fn_lpm_builds;
void fn_lpm_put(struct fn_lpm *t);

/* One step down: v is a child slot (the child mark | the child's first
 * slot's offset in nodes), b the address's byte. The mark is not masked
 * off: nodes_biased is nodes moved back by as many slots (offsets stay
 * below FN_LPM_SKIP: fn_lpm_build). */
static inline uint32_t fn_lpm_step(const struct fn_lpm *t, uint32_t v, uint8_t b)
{
	return *(const uint32_t *)(t->nodes_biased + (((uintptr_t)v + b) << 2));
}

/* True if ip's bytes under mask are not pattern's (a skip's run, a
 * home's bytes). */
static inline __attribute__((always_inline)) bool
fn_lpm_differs(const uint64_t pattern[2], const uint64_t mask[2], const uint8_t *ip)
{
	uint64_t a, b;
	__builtin_memcpy(&a, ip, 8);
	__builtin_memcpy(&b, ip + 8, 8);
	return ((a ^ pattern[0]) & mask[0]) | ((b ^ pattern[1]) & mask[1]);
}

/* Past a skip: its next slot, with *q at the byte after those it
 * compared, or its miss list when the address leaves the run. */
static inline uint32_t fn_lpm_skip(const struct fn_lpm *t, uint32_t v, const uint8_t *ip,
				   const uint8_t **q)
{
	const struct fn_lpm_skip *s = &t->skips[v - t->skip0];
	if (fn_lpm_differs(s->pattern, s->mask, ip))
		return s->miss;
	*q = ip + s->to;
	return s->next;
}

/* IPv6 down to a leaf or a skip, whichever comes first: under no home,
 * the list out6; under one (its site's, picked by one byte), its root at
 * the two bytes after its bytes, then a step a byte. *q is the byte after
 * those used. A skip's value reads as the list {end + 1, end}. */
static inline __attribute__((always_inline)) uint32_t
fn_lpm_down6(const struct fn_lpm *t, const uint8_t *ip, const uint8_t **q)
{
	const struct fn_lpm_home *h = t->sel[ip[t->sel_at]];
	if (__builtin_expect(fn_lpm_differs(h->pattern, h->mask, ip), 0)) /* under none */
		return t->out6;
	size_t k = h->at;
	uint16_t key;
	__builtin_memcpy(&key, ip + k, 2);
	uint32_t v = h->root[key];
	for (k += 2; v & FN_LPM_CHILD; k++)
		v = fn_lpm_step(t, v, ip[k]);
	*q = ip + k;
	return v;
}

/* IPv6 on from slot v (q the byte after those used) to a leaf, past
 * skips: down6's way on when it stopped at a skip. */
static inline uint32_t fn_lpm_resume(const struct fn_lpm *t, uint32_t v, const uint8_t *ip,
				     const uint8_t *q)
{
	for (;;) {
		while (v & FN_LPM_CHILD)
			v = fn_lpm_step(t, v, *q++);
		if (v < t->skip0)
			return v;
		v = fn_lpm_skip(t, v, ip, &q);
	}
}

/* IPv4 down to a leaf: at most three steps, unrolled. */
static inline __attribute__((always_inline)) uint32_t fn_lpm_leaf4(const struct fn_lpm *t,
								   const uint8_t *ip)
{
	uint32_t v = t->root4[ip[0] | (unsigned)ip[1] << 8];
	if (v & FN_LPM_CHILD) {
		v = fn_lpm_step(t, v, ip[2]);
		if (v & FN_LPM_CHILD)
			v = fn_lpm_step(t, v, ip[3]);
	}
	return v;
}

/* The rules whose destinations cover ep, in file order, ended by t->end
 * (never NULL). A leaf slot holds its list's offset in the pool. Both
 * roots are indexed by two bytes in little-endian order, which is one
 * load on the machines we run on: IPv4's first two, IPv6's two after a
 * home's bytes. */
static inline __attribute__((always_inline)) const uint32_t *
fn_lpm_lookup(const struct fn_lpm *t, const struct fn_endpoint *ep)
{
	if (ep->v4)
		return &t->pool[fn_lpm_leaf4(t, ep->ip)];
	const uint8_t *q = ep->ip; /* out6 is a leaf: no step reads q */
	uint32_t v = fn_lpm_down6(t, ep->ip, &q);
	return &t->pool[fn_lpm_resume(t, v, ep->ip, q)];
}

/* Bytes the index takes, for the benchmark. */
size_t fn_lpm_bytes(const struct fn_lpm *t);

#endif
