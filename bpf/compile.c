/* compile.c - turns a policy into the kernel-side backend's map contents
 * (see compile.h), and says which rules the backend cannot carry out.
 * Every distinct destination prefix becomes one LPM entry listing, in file
 * order, the rules whose CIDRs contain it: the kernel's trie returns the
 * longest prefix containing an address, and the rules covering that
 * address are exactly those containing that prefix. */
#include "bpf/compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/rules.h"

bool fnb_http_pump;

/* What the backend does: packet drops, refused, stalled, reset and delayed
 * connects, and connects sent to its relay (the stream faults, and the
 * HTTP rules when the run has its pump). */
static int action_of(const struct fn_rule *r)
{
	if (fn_rule_http(r))
		return fnb_http_pump ? FNB_HTTP : 0;
	if (r->action != FN_ACT_DELAY && r->action != FN_ACT_BLACKHOLE && fn_rule_relayed(r))
		return FNB_RELAY;
	switch (r->action) {
	case FN_ACT_BLACKHOLE:
		return fn_rule_relayed(r) ? 0 : FNB_BLACKHOLE;
	case FN_ACT_DROP:
		return FNB_DROP;
	case FN_ACT_REFUSE:
		return FNB_REFUSE;
	case FN_ACT_STALL:
		return FNB_STALL;
	case FN_ACT_RESET:
		return FNB_RESET;
	case FN_ACT_DELAY:
		return FNB_DELAY;
	default:
		return 0;
	}
}

/* Why rule r cannot be carried out by the backend; NULL when it can. */
static const char *unsupported(const struct fn_rule *r)
{
	if (r->action == FN_ACT_BLACKHOLE && fn_rule_relayed(r))
		return "a blackhole after bytes or time stops the app's own acknowledgements, "
		       "which only the shim's relay does";
	if (r->action == FN_ACT_DNS)
		return "dns rules act on the shim's resolver hooks, and a Go program resolves "
		       "by itself: the kernel-side backend does not carry them out";
	if (fn_rule_http(r) && !fnb_http_pump)
		return "HTTP rules reach a run of the kernel-side backend only when its --config "
		       "has one at the start or it was started with --ca-vars (either starts the "
		       "run's HTTP pump)";
	if (!action_of(r))
		return "its action is not one the kernel-side backend carries out yet "
		       "(it does blackhole, drop, refuse, stall, reset, delay, latency, "
		       "bandwidth, drip, close and the HTTP rules)";
	if (r->action == FN_ACT_DELAY && (uint64_t)r->par.delay_ms + r->par.jitter_ms > 120000)
		return "the kernel's SYN timeout stops at 120 s: the backend delays a handshake "
		       "by at most delay_ms + jitter_ms = 120000";
	if (r->action == FN_ACT_DELAY && (r->protos & FN_PROTO_UDP))
		return "the backend delays TCP handshakes, not UDP datagrams "
		       "(give it match.proto = \"tcp\")";
	if (r->established && r->action != FN_ACT_BLACKHOLE && r->action != FN_ACT_DROP)
		return "established = true is the shim's (the backend's blackhole and drop "
		       "reach open connections without it)";
	if (r->host)
		return "match.host needs the shim's resolver hooks";
	if (r->nports > FNB_PORTS)
		return "it gives more port ranges than the backend's 4";
	return NULL;
}

static int cmp_prefix(const void *a, const void *b)
{
	const struct fnb_prefix *x = a, *y = b;
	if (x->v4 != y->v4)
		return x->v4 ? -1 : 1;
	int c = memcmp(x->addr, y->addr, 16);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static void masked(const uint8_t *in, unsigned len, uint8_t *out)
{
	memset(out, 0, 16);
	for (unsigned i = 0; i < 16 && len; i++) {
		unsigned take = len >= 8 ? 8 : len;
		out[i] = in[i] & (uint8_t)(0xff << (8 - take));
		len -= take;
	}
}

static bool add(struct fnb_plan *pl, bool v4, const uint8_t *ip, unsigned len, uint32_t rule)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 64;
		struct fnb_prefix *e = realloc(pl->e, cap * sizeof(*e));
		if (!e)
			return false;
		pl->e = e;
		pl->cap = cap;
	}
	struct fnb_prefix *e = &pl->e[pl->n++];
	memset(e, 0, sizeof(*e));
	e->v4 = v4;
	e->len = len;
	e->rule = rule;
	masked(ip, len, e->addr);
	return true;
}

/* Whether prefix a contains prefix b. */
static bool contains(const struct fn_cidr *a, const struct fn_cidr *b)
{
	uint8_t x[16], y[16];
	if (a->v4 != b->v4 || a->prefix > b->prefix)
		return false;
	masked(a->ip, a->prefix, x);
	masked(b->ip, a->prefix, y);
	return memcmp(x, y, 16) == 0;
}

/* The prefixes a rule covers: its own CIDRs, its to_zone's, both (their
 * intersection: of two prefixes that overlap, the longer), or all. */
static bool add_rule(struct fnb_plan *pl, const struct fn_policy *p, uint32_t i)
{
	const struct fn_rule *r = &p->rules[i];
	const struct fn_zone *z = r->to_zone >= 0 ? &p->zones[r->to_zone] : NULL;
	if (!r->nto && !z) {
		static const uint8_t zero[16];
		return add(pl, true, zero, 0, i) && add(pl, false, zero, 0, i);
	}
	const struct fn_cidr *c = r->nto ? r->to : z->cidrs;
	size_t n = r->nto ? r->nto : z->ncidrs;
	for (size_t k = 0; k < n; k++) {
		if (!r->nto || !z) {
			if (!add(pl, c[k].v4, c[k].ip, c[k].prefix, i))
				return false;
			continue;
		}
		for (size_t j = 0; j < z->ncidrs; j++) {
			const struct fn_cidr *zc = &z->cidrs[j];
			const struct fn_cidr *in = contains(&c[k], zc)	 ? zc
						   : contains(zc, &c[k]) ? &c[k]
									 : NULL;
			if (in && !add(pl, in->v4, in->ip, in->prefix, i))
				return false;
		}
	}
	return true;
}

static const struct fnb_prefix *find(const struct fnb_plan *pl, bool v4, const uint8_t *ip,
				     unsigned len)
{
	struct fnb_prefix key = {.v4 = v4, .len = len};
	masked(ip, len, key.addr);
	size_t lo = 0, hi = pl->n;
	while (lo < hi) { /* the first entry not below key, rule ignored */
		size_t mid = (lo + hi) / 2;
		key.rule = pl->e[mid].rule;
		if (cmp_prefix(&pl->e[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < pl->n && pl->e[lo].v4 == v4 && pl->e[lo].len == len &&
	    memcmp(pl->e[lo].addr, key.addr, 16) == 0)
		return &pl->e[lo];
	return NULL;
}

/* Fills e->cands with the rules of every entry containing e, sorted. */
static bool gather(const struct fnb_plan *pl, struct fnb_prefix *e, char *err, size_t errlen)
{
	e->cands.n = 0;
	unsigned max = e->v4 ? 32 : 128;
	for (unsigned len = 0; len <= e->len && len <= max; len++) {
		const struct fnb_prefix *a = find(pl, e->v4, e->addr, len);
		uint8_t m[16];
		masked(e->addr, len, m);
		for (; a && a < pl->e + pl->n && a->v4 == e->v4 && a->len == len &&
		       memcmp(a->addr, m, 16) == 0;
		     a++) {
			uint32_t k = 0;
			while (k < e->cands.n && e->cands.rule[k] < a->rule)
				k++;
			if (k < e->cands.n && e->cands.rule[k] == a->rule)
				continue;
			if (e->cands.n == FNB_CANDS) {
				snprintf(err, errlen,
					 "more than %d rules cover the same destinations "
					 "(rule '%s' and the ones before it)",
					 FNB_CANDS, pl->policy->rules[a->rule].name);
				return false;
			}
			memmove(&e->cands.rule[k + 1], &e->cands.rule[k],
				(e->cands.n - k) * sizeof(uint32_t));
			e->cands.rule[k] = a->rule;
			e->cands.n++;
		}
	}
	return true;
}

static bool same_prefix(const struct fnb_prefix *a, const struct fnb_prefix *b)
{
	return a->v4 == b->v4 && a->len == b->len && memcmp(a->addr, b->addr, 16) == 0;
}

/* Drops repeated prefixes (several rules on one prefix: one entry). */
static void unique(struct fnb_plan *pl)
{
	size_t out = 0;
	for (size_t i = 0; i < pl->n; i++)
		if (!out || !same_prefix(&pl->e[out - 1], &pl->e[i]))
			pl->e[out++] = pl->e[i];
	pl->n = out;
}

/* A rule's conditions as the programs judge them (see shared.h): the same
 * draws as core's fn_random for the same FAULTNET_SEED. */
static void conditions(const struct fn_rule *r, struct fnb_rule *out)
{
	const struct fn_cond *c = &r->cond;
	/* An HTTP rule's conditions count requests, judged by the engine. */
	out->has_cond = r->has_cond && !fn_rule_http(r);
	out->first = c->first;
	out->every = c->every;
	out->after = c->after;
	double below = c->probability * 9007199254740992.0; /* 2^53: exact */
	out->prob_all = c->probability >= 1;
	out->prob = (uint64_t)below;
	if ((double)out->prob < below) /* rounded up: a draw k passes when k < below */
		out->prob++;
	out->key = fn_random_base(fn_rule_key(r));
	out->start_ns = c->start_ms < 0 ? -1 : c->start_ms * 1000000;
	out->for_ns = c->for_ms < 0 ? -1 : c->for_ms * 1000000;
}

void fnb_rule_entry(const struct fn_policy *p, size_t i, struct fnb_rule *out)
{
	const struct fn_rule *r = &p->rules[i];
	uint32_t slot = out->slot;
	memset(out, 0, sizeof(*out));
	out->slot = slot;
	out->action = (uint8_t)action_of(r);
	out->protos = r->protos;
	out->on = r->enabled && (r->from_zone < 0 || r->from_zone == p->self_zone);
	out->nports = (uint8_t)r->nports;
	for (size_t k = 0; k < r->nports; k++) {
		out->port_lo[k] = r->ports[k].lo;
		out->port_hi[k] = r->ports[k].hi;
	}
	out->delay_ms = r->par.delay_ms;
	out->jitter_ms = r->action == FN_ACT_DELAY ? r->par.jitter_ms : 0;
	conditions(r, out);
}

bool fnb_plan_build(struct fnb_plan *pl, const struct fn_policy *p, char *err, size_t errlen)
{
	memset(pl, 0, sizeof(*pl));
	pl->policy = p;
	for (size_t i = 0; i < p->nrules; i++) {
		const char *why = unsupported(&p->rules[i]);
		if (why) {
			snprintf(err, errlen, "rule '%s' (line %d, %s): %s", p->rules[i].name,
				 p->rules[i].line, fn_action_name(p->rules[i].action), why);
			return false;
		}
	}
	pl->rules = calloc(p->nrules ? p->nrules : 1, sizeof(*pl->rules));
	if (!pl->rules)
		goto oom;
	for (uint32_t i = 0; i < p->nrules; i++) {
		fnb_rule_entry(p, i, &pl->rules[i]);
		if (!add_rule(pl, p, i))
			goto oom;
	}
	if (pl->n) /* no rule has an address: e is NULL, which qsort may not be given */
		qsort(pl->e, pl->n, sizeof(*pl->e), cmp_prefix);
	/* Candidates are gathered before repeats go: find() lands on the first
	 * entry of a prefix and gather() walks every rule listed on it. */
	for (size_t i = 0; i < pl->n; i++)
		if (i && same_prefix(&pl->e[i - 1], &pl->e[i])) /* repeats are adjacent */
			pl->e[i].cands = pl->e[i - 1].cands;
		else if (!gather(pl, &pl->e[i], err, errlen))
			return false;
	unique(pl);
	for (size_t i = 0; i < pl->n; i++)
		pl->e[i].v4 ? pl->n4++ : pl->n6++;
	return true;
oom:
	snprintf(err, errlen, "out of memory");
	return false;
}

bool fnb_plan_has(const struct fnb_plan *pl, int action)
{
	for (size_t i = 0; i < pl->policy->nrules; i++)
		if (pl->rules[i].action == action)
			return true;
	return false;
}

void fnb_plan_free(struct fnb_plan *pl)
{
	free(pl->e);
	free(pl->rules);
	memset(pl, 0, sizeof(*pl));
}
