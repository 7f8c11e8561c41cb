/* compile.h - a policy as the kernel-side backend's maps hold it: one entry
 * per distinct destination prefix with the rules covering it in file order,
 * and one entry per rule. Pure: no kernel call, unit-tested. */
#ifndef FAULTNET_BPF_COMPILE_H
#define FAULTNET_BPF_COMPILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/shared.h"

struct fn_policy;

struct fnb_prefix {
	bool v4;
	unsigned len;
	uint8_t addr[16]; /* masked to len */
	uint32_t rule;	  /* while building: the rule that listed it */
	struct fnb_cands cands;
};

struct fnb_plan {
	const struct fn_policy *policy;
	struct fnb_prefix *e; /* IPv4 entries first */
	size_t n, cap, n4, n6;
	struct fnb_rule *rules; /* one per policy rule */
};

/* Fills pl from p; false with a message naming the rule (and its line) the
 * backend cannot carry out, or a prefix covered by too many rules. */
bool fnb_plan_build(struct fnb_plan *pl, const struct fn_policy *p, char *err, size_t errlen);
void fnb_plan_free(struct fnb_plan *pl);

#endif
