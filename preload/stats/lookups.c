/* lookups.c - per-name counts of the resolver hooks: lookups, what the dns
 * rules did to them, and the connects made to addresses the name resolved
 * to. A fixed table of names in the member's published state (fn_seg),
 * claimed with a compare-and-swap as the destination table is; the last
 * slot is "other". */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/dns.h"
#include "core/hash.h"
#include "preload/stats/stats.h"

static const char *const names[FN_LK_N] = {"lookups", "nxdomain", "servfail", "nodata",	 "timeout",
					   "refused", "delayed",  "answered", "connects"};

static struct fn_seg_name *slot_for(const char *name)
{
	uint64_t h = fn_hash_name(name);
	for (int i = 0; i < 32; i++) {
		struct fn_seg_name *s = &fn_seg->names[(h + (uint64_t)i) % FN_SEG_NAMES];
		fn_seg_touch(s, sizeof(*s));
		if (fn_slot_claim(&s->state)) {
			snprintf(s->name, sizeof(s->name), "%s", name);
			fn_slot_ready(&s->state);
			return s;
		}
		if (strncasecmp(s->name, name, sizeof(s->name) - 1) == 0)
			return s;
	}
	fn_seg_touch(&fn_seg->names[FN_SEG_NAMES], sizeof(fn_seg->names[0]));
	return &fn_seg->names[FN_SEG_NAMES];
}

void fn_stats_lookup(const char *name, const struct fn_rule *r, int what)
{
	struct fn_seg_name *s = slot_for(name);
	__atomic_add_fetch(&s->n[FN_LK_LOOKUPS], 1, __ATOMIC_RELAXED);
	if (r && r->stat) {
		__atomic_add_fetch(&r->stat->n->attempts, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->stat->n->faults, 1, __ATOMIC_RELAXED);
	}
	if (what == FN_LOOKUP_REAL)
		return;
	__atomic_add_fetch(&s->n[what], 1, __ATOMIC_RELAXED);
	char outcome[24];
	snprintf(outcome, sizeof(outcome), "dns-%s", names[what]);
	struct fn_endpoint none = {0};
	fn_stats_event(r, r, &none, outcome);
}

void fn_stats_name_connect(const char *name, void *unused)
{
	(void)unused;
	__atomic_add_fetch(&slot_for(name)->n[FN_LK_CONNECTS], 1, __ATOMIC_RELAXED);
}
