/* maps.h - a compiled policy put into the programs' maps (maps.c): at the
 * start of a run and at every live change, one set written while the other
 * is in force, then a flip (see shared.h). */
#ifndef FAULTNET_BPF_MAPS_H
#define FAULTNET_BPF_MAPS_H

#include <stdbool.h>
#include <stdint.h>

struct bpf_map;
struct fnb_plan;
struct fnb_rule;

struct fnb_maps {
	struct bpf_map *dst4, *dst6, *rules, *conds;
	volatile uint32_t *cur; /* the programs' cur_set, mapped */
	uint32_t rcap;		/* rules per set */
};

/* Puts pl in force: writes it into the set not in force, flips, and takes
 * old's prefixes out of the set that was (old: NULL at the start). False,
 * with the set in force untouched, when the maps cannot hold it. */
bool fnb_maps_install(struct fnb_maps *m, const struct fnb_plan *pl, const struct fnb_plan *old);
/* Rewrites rule i of the set in force (enable, disable). */
bool fnb_maps_rule(struct fnb_maps *m, uint32_t i, const struct fnb_rule *r);

/* A conditional rule (re-)enabled at at_ns (CLOCK_MONOTONIC): its matches
 * count from 0 and its window from then. */
bool fnb_maps_cond_reset(struct fnb_maps *m, uint32_t slot, uint64_t at_ns);

#endif
