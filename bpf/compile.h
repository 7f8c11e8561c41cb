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

/* Whether HTTP rules compile (to FNB_HTTP): set by the run whose pump is
 * up (httppump.c); else they are refused. */
extern bool fnb_http_pump;

/* Fills pl from p; false with a message naming the rule (and its line) the
 * backend cannot carry out, or a prefix covered by too many rules. */
bool fnb_plan_build(struct fnb_plan *pl, const struct fn_policy *p, char *err, size_t errlen);
void fnb_plan_free(struct fnb_plan *pl);
/* Whether some rule of the plan has this FNB_* action. */
bool fnb_plan_has(const struct fnb_plan *pl, int action);
/* Why a delay cannot be carried out on a kernel whose CONFIG_HZ is not
 * known. */
#define FNB_NO_HZ                                                                \
	"a delay needs the kernel's CONFIG_HZ, and neither /proc/config.gz nor " \
	"/boot/config-RELEASE gives it"

/* Rule i of p as the rules map holds it (on: enabled, and its from_zone
 * allows it here); out's slot is kept. */
void fnb_rule_entry(const struct fn_policy *p, size_t i, struct fnb_rule *out);

#endif
