/* maps.c - writes a plan into one set of the programs' maps and flips the
 * set in force (see maps.h). The programs read cur_set once per call, so a
 * connect or packet is decided by one set, whole; the set written is
 * never the one in force. Only the control thread calls these once it
 * runs (before that, the run's main thread). */
#include "bpf/maps.h"

#include <errno.h>
#include <string.h>

#include "bpf/lbpf.h"

#include "bpf/compile.h"
#include "core/rules.h"

static int prefix(struct fnb_maps *m, const struct fnb_prefix *e, uint32_t set, bool del)
{
	if (e->v4) {
		struct fnb_key4 k = {.prefixlen = 32 + e->len, .set = set};
		memcpy(&k.addr, e->addr, 4);
		return del ? bpf_map__delete_elem(m->dst4, &k, sizeof(k), 0)
			   : bpf_map__update_elem(m->dst4, &k, sizeof(k), &e->cands,
						  sizeof(e->cands), BPF_ANY);
	}
	struct fnb_key6 k = {.prefixlen = 32 + e->len, .set = set};
	memcpy(k.addr, e->addr, 16);
	return del ? bpf_map__delete_elem(m->dst6, &k, sizeof(k), 0)
		   : bpf_map__update_elem(m->dst6, &k, sizeof(k), &e->cands, sizeof(e->cands),
					  BPF_ANY);
}

static void clear(struct fnb_maps *m, const struct fnb_plan *pl, size_t upto, uint32_t set)
{
	for (size_t i = 0; i < upto; i++)
		prefix(m, &pl->e[i], set, true);
}

bool fnb_maps_install(struct fnb_maps *m, const struct fnb_plan *pl, const struct fnb_plan *old)
{
	uint32_t set = old ? 1 - *m->cur : 0;
	if (pl->policy->nrules > m->rcap) {
		errno = E2BIG;
		return false;
	}
	for (uint32_t i = 0; i < pl->policy->nrules; i++) {
		uint32_t k = set * m->rcap + i;
		if (bpf_map__update_elem(m->rules, &k, sizeof(k), &pl->rules[i],
					 sizeof(pl->rules[i]), BPF_ANY))
			return false;
	}
	for (size_t i = 0; i < pl->n; i++)
		if (prefix(m, &pl->e[i], set, false)) {
			int e = errno;
			clear(m, pl, i, set);
			errno = e;
			return false;
		}
	__atomic_store_n(m->cur, set, __ATOMIC_RELEASE);
	if (old)
		clear(m, old, old->n, 1 - set);
	return true;
}

bool fnb_maps_rule(struct fnb_maps *m, uint32_t i, const struct fnb_rule *r)
{
	uint32_t k = *m->cur * m->rcap + i;
	return bpf_map__update_elem(m->rules, &k, sizeof(k), r, sizeof(*r), BPF_ANY) == 0;
}

bool fnb_maps_cond_reset(struct fnb_maps *m, uint32_t slot, uint64_t at_ns)
{
	struct fnb_cond_state st = {.matches = 0, .enabled_ns = at_ns};
	return bpf_map__update_elem(m->conds, &slot, sizeof(slot), &st, sizeof(st), BPF_ANY) == 0;
}
