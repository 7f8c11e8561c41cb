/* hostidx.h - the dns rules' name index: for a name looked up, the dns
 * rules whose host pattern may match it, in file order, found in a number
 * of steps that grows with the name's labels and not with the number of
 * rules. Exact names and "*.suffix" patterns are hashed eight bytes at a
 * time from their end (hostidx.c), so that one pass over a name from its
 * last word meets the key of every suffix at its dots, and the name's own
 * key at its start; dns rules without a host are one more
 * list. Each key holds the sorted indices of the rules that have it; every
 * dns rule is indexed, enabled or not, of any zone: a lookup judges them
 * (so enable, disable and zone need no rebuild; add and rm do, as for the
 * address index). Immutable once built; a policy's copies share it (refs). */
#ifndef FAULTNET_HOSTIDX_H
#define FAULTNET_HOSTIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fn_policy;

#define FN_HOSTIDX_END UINT32_MAX /* a list's end */

struct fn_hostidx_slot {
	uint64_t key;
	uint32_t list; /* offset in lists; FN_HOSTIDX_END: an empty slot */
};

struct fn_hostidx {
	uint64_t refs;
	struct fn_hostidx_slot *slots;
	size_t mask;	/* slots - 1, a power of two less one */
	unsigned shift; /* 64 - log2(slots): a key's slot from a product's top bits */
	uint32_t *lists;
	uint32_t any;	  /* the list of dns rules without a host */
	uint8_t *hostlen; /* by rule: its host pattern's length (at most 253) */
};

/* The candidates of one name: up to FN_HOSTIDX_LISTS lists (its own key's,
 * one per suffix key some rule has, the host-less rules'), merged by
 * fn_hostidx_next. */
#define FN_HOSTIDX_LISTS 16
struct fn_hostidx_cur {
	const uint32_t *at[FN_HOSTIDX_LISTS];
	int n;
};

/* The index of p's dns rules; NULL when memory is short (then a scan). */
struct fn_hostidx *fn_hostidx_build(const struct fn_policy *p);
void fn_hostidx_put(struct fn_hostidx *x);

/* Starts c on the candidates for the n bytes of name (any case, no
 * trailing dot); false when they span more lists than c holds (a name of
 * many labels most of which some rule names): the caller scans. */
bool fn_hostidx_start(const struct fn_hostidx *x, const char *name, size_t n,
		      struct fn_hostidx_cur *c);

/* The next candidate's rule index, ascending; FN_HOSTIDX_END after the
 * last. A candidate's pattern is still to be checked (keys can collide). */
uint32_t fn_hostidx_next(struct fn_hostidx_cur *c);

#endif
