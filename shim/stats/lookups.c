/* lookups.c - per-name counts of the resolver hooks: lookups, what the dns
 * rules did to them, and the connects made to addresses the name resolved
 * to. A fixed table of 256 names claimed with a compare-and-swap, as the
 * destination table is; the last slot is "other". */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/dns.h"
#include "shim/stats/stats.h"

#define NAMES 256

enum {
	L_LOOKUPS,
	L_NXDOMAIN,
	L_SERVFAIL,
	L_NODATA,
	L_TIMEOUT,
	L_REFUSED,
	L_DELAYED,
	L_ANSWERED,
	L_CONNECTS,
	L_N
};

static const char *const names[L_N] = {"lookups", "nxdomain", "servfail", "nodata",  "timeout",
				       "refused", "delayed",  "answered", "connects"};

struct slot {
	int state; /* 0 free, 1 being claimed, 2 ready */
	char name[128];
	uint64_t n[L_N];
};

static struct slot slots[NAMES + 1];

static struct slot *slot_for(const char *name)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)(*p | 0x20)) * 1099511628211ull;
	for (int i = 0; i < 32; i++) {
		struct slot *s = &slots[(h + (uint64_t)i) % NAMES];
		int st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
		if (st == 0) {
			int zero = 0;
			if (__atomic_compare_exchange_n(&s->state, &zero, 1, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				snprintf(s->name, sizeof(s->name), "%s", name);
				__atomic_store_n(&s->state, 2, __ATOMIC_RELEASE);
				return s;
			}
			st = zero;
		}
		while (st == 1)
			st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
		if (strncasecmp(s->name, name, sizeof(s->name) - 1) == 0)
			return s;
	}
	return &slots[NAMES];
}

void fn_stats_lookup(const char *name, const struct fn_rule *r, int what)
{
	struct slot *s = slot_for(name);
	__atomic_add_fetch(&s->n[L_LOOKUPS], 1, __ATOMIC_RELAXED);
	if (r && r->stat) {
		__atomic_add_fetch(&r->stat->attempts, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->stat->faults, 1, __ATOMIC_RELAXED);
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
	__atomic_add_fetch(&slot_for(name)->n[L_CONNECTS], 1, __ATOMIC_RELAXED);
}

static void dump(struct fn_buf *b, const struct slot *s, const char *name)
{
	fn_buf_printf(b, "name pid=%d", (int)getpid());
	fn_buf_field(b, "name", name);
	for (int k = 0; k < L_N; k++)
		fn_buf_printf(b, " %s=%llu", names[k],
			      (unsigned long long)__atomic_load_n(&s->n[k], __ATOMIC_RELAXED));
	fn_buf_add(b, "\n", 1);
}

void fn_stats_lookups_dump(struct fn_buf *b)
{
	for (int i = 0; i < NAMES; i++)
		if (__atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE) == 2)
			dump(b, &slots[i], slots[i].name);
	if (slots[NAMES].n[L_LOOKUPS] || slots[NAMES].n[L_CONNECTS])
		dump(b, &slots[NAMES], "other");
}
