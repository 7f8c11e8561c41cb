/* rules.c - first-match evaluation of a policy against a peer endpoint.
 * Runs on every connect and every addressed send, so it allocates nothing
 * and takes no lock. */
#include "core/rules.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/dns.h"
#include "core/hostidx.h"
#include "core/http.h"
#include "core/lpm.h"

void fn_rulestat_restart(struct fn_rulestat *s)
{
	__atomic_store_n(&s->matches, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->enabled_ns, fn_now_ns(), __ATOMIC_RELEASE);
}

bool fn_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= FN_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("_.:-", *s)))
			return false;
	return true;
}

static bool in_any_cidr(const struct fn_cidr *c, size_t n, const struct fn_endpoint *ep)
{
	for (size_t i = 0; i < n; i++)
		if (fn_cidr_contains(&c[i], ep))
			return true;
	return false;
}

static bool in_zone(const struct fn_policy *p, int zone, const struct fn_endpoint *ep)
{
	const struct fn_zone *z = &p->zones[zone];
	return in_any_cidr(z->cidrs, z->ncidrs, ep);
}

/* match.host on a connect or datagram: a name the process resolved to the
 * peer's address matches. HTTP rules look at the Host header instead. */
static bool host_ok(const struct fn_rule *r, const struct fn_endpoint *peer)
{
	return fn_rule_http(r) || (fn_host_resolved && fn_host_resolved(peer, r->host));
}

bool fn_rule_covers(const struct fn_policy *p, const struct fn_rule *r,
		    const struct fn_endpoint *peer, uint8_t proto)
{
	if (!(r->protos & proto))
		return false;
	if (r->from_zone >= 0 && r->from_zone != p->self_zone)
		return false;
	if (r->nto && !in_any_cidr(r->to, r->nto, peer))
		return false;
	if (r->nports && !fn_ports_contain(r->ports, r->nports, peer->port))
		return false;
	if (r->to_zone >= 0 && !in_zone(p, r->to_zone, peer))
		return false;
	return !r->host || host_ok(r, peer);
}

/* fn_rule_covers for a rule the index already found covering peer by its
 * CIDRs: the rest of its match. */
static inline __attribute__((always_inline)) bool covers_rest(const struct fn_policy *p,
							      const struct fn_rule *r,
							      const struct fn_endpoint *peer,
							      uint8_t proto)
{
	if (!(r->protos & proto))
		return false;
	if (r->from_zone >= 0 && r->from_zone != p->self_zone)
		return false;
	if (r->nports && !fn_ports_contain(r->ports, r->nports, peer->port))
		return false;
	/* Indexed by its to CIDRs: the zone is a second condition. */
	if (r->nto && r->to_zone >= 0 && !in_zone(p, r->to_zone, peer))
		return false;
	return !r->host || host_ok(r, peer);
}

/* One candidate: true when it decides (returned in *out). */
static inline __attribute__((always_inline)) bool
consider(const struct fn_policy *p, const struct fn_rule *r, const struct fn_endpoint *peer,
	 uint8_t proto, const struct fn_rule **seen, const struct fn_rule **off)
{
	if (!r->enabled && (!seen || *off))
		return false;
	if (!covers_rest(p, r, peer, proto))
		return false;
	if (!r->enabled) {
		*off = r;
		return false;
	}
	return true;
}

/* The candidates after the first, or a first that needs the whole check:
 * kept out of line, so that the common answers stay short (its arguments
 * in the order that leaves match_from's in their registers). */
static __attribute__((noinline)) const struct fn_rule *
walk(const struct fn_policy *p, const struct fn_endpoint *peer, unsigned proto,
     const struct fn_rule **seen, size_t from)
{
	const struct fn_rule *off = NULL;
	/* Looked up again: keeping the list across the quick test would cost
	 * the common path a saved register. */
	for (const uint32_t *a = fn_lpm_lookup(p->lpm, peer); *a != p->lpm->end; a++) {
		uint32_t i = *a;
		if (i >= from && consider(p, &p->rules[i], peer, proto, seen, &off)) {
			if (seen)
				*seen = &p->rules[i];
			return &p->rules[i];
		}
	}
	if (seen)
		*seen = off;
	return NULL;
}

/* Without an index (memory was short when the policy was built). Out of
 * line too: inlined, its loop would make the common path save registers. */
static __attribute__((noinline)) const struct fn_rule *
scan(const struct fn_policy *p, const struct fn_endpoint *peer, unsigned proto,
     const struct fn_rule **seen, size_t from)
{
	const struct fn_rule *off = NULL;
	for (size_t i = from; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (fn_rule_covers(p, r, peer, proto) && consider(p, r, peer, proto, seen, &off)) {
			if (seen)
				*seen = r;
			return r;
		}
	}
	if (seen)
		*seen = off;
	return NULL;
}

/* The first candidate i judged: taken when it is enabled and its CIDR is
 * all its match; none when i is the index's end (no rule covers peer);
 * else the whole walk. */
static inline __attribute__((always_inline)) const struct fn_rule *
first(const struct fn_policy *p, const struct fn_endpoint *peer, unsigned proto,
      const struct fn_rule **seen, size_t from, uint32_t i)
{
	if ((p->quick[i] & proto) && i >= from) {
		const struct fn_rule *r = &p->rules[i];
		if (seen)
			*seen = r;
		return r;
	}
	if (i == p->nrules) {
		if (seen)
			*seen = NULL;
		return NULL;
	}
	return walk(p, peer, proto, seen, from);
}

/* first() out of line, for past_skip(). */
static __attribute__((noinline)) const struct fn_rule *
judge(const struct fn_policy *p, const struct fn_endpoint *peer, unsigned proto,
      const struct fn_rule **seen, size_t from, uint32_t i)
{
	return first(p, peer, proto, seen, from, i);
}

/* An IPv6 address whose way down met skip v: on from there, then its
 * first candidate judged apart (inlined here, it made this save six
 * registers). */
static __attribute__((noinline)) const struct fn_rule *
past_skip(const struct fn_policy *p, const struct fn_endpoint *peer, unsigned proto,
	  const struct fn_rule **seen, size_t from, uint32_t v)
{
	const struct fn_lpm *t = p->lpm;
	return judge(p, peer, proto, seen, from, t->pool[fn_lpm_resume(t, v, peer->ip, peer->ip)]);
}

/* The common answers in few instructions: no rule covers the address, or
 * the first candidate is enabled and its CIDR is all its match; the rest
 * goes to walk() or scan(), as tail calls, and so does an IPv6 address
 * whose way down meets a skip (its first candidate reads end + 1, which
 * quick says nothing of) to past_skip(). */
static inline __attribute__((always_inline)) const struct fn_rule *
match_from(const struct fn_policy *p, const struct fn_endpoint *peer, uint8_t proto, size_t from,
	   const struct fn_rule **seen)
{
	if (!((seen ? p->watch_protos : p->active_protos) & proto)) {
		if (seen)
			*seen = NULL;
		return NULL;
	}
	const struct fn_lpm *t = p->lpm;
	if (__builtin_expect(!t, 0))
		return scan(p, peer, proto, seen, from);
	uint32_t v;
	if (peer->v4) {
		v = fn_lpm_leaf4(t, peer->ip);
	} else {
		const uint8_t *q;
		v = fn_lpm_down6(t, peer->ip, &q);
	}
	uint32_t i = t->pool[v];
	if ((p->quick[i] & proto) && i >= from) {
		const struct fn_rule *r = &p->rules[i];
		if (seen)
			*seen = r;
		return r;
	}
	if (__builtin_expect(i > p->nrules, 0))
		return past_skip(p, peer, proto, seen, from, v);
	return first(p, peer, proto, seen, from, i);
}

const struct fn_rule *fn_policy_match_from(const struct fn_policy *p,
					   const struct fn_endpoint *peer, uint8_t proto,
					   size_t from, const struct fn_rule **seen)
{
	if (!p) {
		if (seen)
			*seen = NULL;
		return NULL;
	}
	return match_from(p, peer, proto, from, seen);
}

/* The copy for callers that want no report of the rule seen, apart: the
 * shim's calls (seen given) then carry no test of it. */
static __attribute__((noinline)) const struct fn_rule *
match_unseen(const struct fn_policy *p, const struct fn_endpoint *peer, uint8_t proto)
{
	return match_from(p, peer, proto, 0, NULL);
}

const struct fn_rule *fn_policy_match(const struct fn_policy *p, const struct fn_endpoint *peer,
				      uint8_t proto, const struct fn_rule **seen)
{
	if (__builtin_expect(!seen, 0))
		return match_unseen(p, peer, proto);
	return match_from(p, peer, proto, 0, seen);
}

const struct fn_rule *fn_established_covers(const struct fn_policy *p, const struct fn_endpoint *ep)
{
	if (!p || !p->established_rules)
		return NULL;
	if (!p->lpm) { /* memory was short when the index was built */
		for (size_t i = 0; i < p->nrules; i++)
			if (p->rules[i].established &&
			    fn_rule_covers(p, &p->rules[i], ep, FN_PROTO_TCP))
				return &p->rules[i];
		return NULL;
	}
	/* Only the rules whose destinations cover ep, from the index: every
	 * uncovered connect asks, so this must not grow with the policy. */
	for (const uint32_t *a = fn_lpm_lookup(p->lpm, ep); *a != p->lpm->end; a++) {
		const struct fn_rule *r = &p->rules[*a];
		if (r->established && covers_rest(p, r, ep, FN_PROTO_TCP))
			return r;
	}
	return NULL;
}

int fn_policy_zone_index(const struct fn_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nzones; i++)
		if (strcmp(p->zones[i].name, name) == 0)
			return (int)i;
	return -1;
}

void fn_policy_finish(struct fn_policy *p)
{
	if (!p->hosts || p->lpm_stale) {
		fn_hostidx_put(p->hosts);
		p->hosts = fn_hostidx_build(p); /* NULL when memory is short: then a scan */
	}
	if (!p->lpm || p->lpm_stale) {
		fn_lpm_put(p->lpm);
		p->lpm = fn_lpm_build(p); /* NULL when memory is short: then a scan */
		p->lpm_stale = false;
	}
	uint8_t *q = p->lpm ? realloc(p->quick, p->nrules + 2) : NULL;
	if (!q && p->lpm) { /* the scan needs no quick array */
		fn_lpm_put(p->lpm);
		p->lpm = NULL;
	}
	if (!q)
		free(p->quick);
	p->quick = q;
	for (size_t i = 0; q && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		/* Its CIDRs (which the index matched) are all its match. */
		bool simple =
		    !r->nports && r->from_zone < 0 && !(r->nto && r->to_zone >= 0) && !r->host;
		q[i] = simple && r->enabled ? r->protos & FN_PROTO_ANY : 0;
	}
	if (q) /* a list's end, and a skip's mark (core/lpm.h) */
		q[p->nrules] = q[p->nrules + 1] = 0;
	p->active_protos = p->watch_protos = 0;
	p->dns_rules = p->host_rules = p->established_rules = false;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		/* A from_zone rule for another zone can never match here. */
		if (r->from_zone >= 0 && r->from_zone != p->self_zone)
			continue;
		p->watch_protos |= r->protos;
		p->dns_rules |= r->action == FN_ACT_DNS;
		p->established_rules |= r->established;
		/* An HTTP rule's host is its requests' Host header, but one that
		 * answers them stands for the server where the app resolved the
		 * peer from that name (fn_http_answers_all): names are wanted. */
		p->host_rules |= r->host && r->action != FN_ACT_DNS;
		if (r->enabled)
			p->active_protos |= r->protos;
	}
}

struct fn_rulestat *fn_rulestat_new(void)
{
	struct fn_rulestat *s = calloc(1, sizeof(*s));
	static uint64_t ids;
	if (s) {
		s->refs = 1;
		s->id = __atomic_add_fetch(&ids, 1, __ATOMIC_RELAXED);
		s->n = &s->own;
		fn_rulestat_restart(s);
	}
	return s;
}

static void rulestat_put(struct fn_rulestat *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(s);
}

static void rule_free(struct fn_rule *r)
{
	free(r->to);
	free(r->ports);
	rulestat_put(r->stat);
	fn_http_put(r->http);
	fn_dns_put(r->dns);
	free(r->host);
}

void fn_policy_free(struct fn_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrules; i++)
		rule_free(&p->rules[i]);
	for (size_t i = 0; i < p->nzones; i++)
		free(p->zones[i].cidrs);
	free(p->rules);
	free(p->zones);
	fn_lpm_put(p->lpm);
	fn_hostidx_put(p->hosts);
	free(p->quick);
	free(p);
}

static void *dup_array(const void *a, size_t n, size_t size, bool *ok)
{
	if (!n)
		return NULL;
	void *b = malloc(n * size);
	if (!b)
		*ok = false;
	else
		memcpy(b, a, n * size);
	return b;
}

struct fn_policy *fn_policy_clone(const struct fn_policy *p)
{
	struct fn_policy *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	*c = *p;
	if (c->lpm) /* the same rules and CIDRs: the same index */
		__atomic_add_fetch(&c->lpm->refs, 1, __ATOMIC_RELAXED);
	if (c->hosts) /* the same for the names */
		__atomic_add_fetch(&c->hosts->refs, 1, __ATOMIC_RELAXED);
	bool ok = true;
	/* A stale policy's quick array is of its last finish, not of its rules
	 * now: the copy gets its own at its finish. */
	c->quick = p->quick && !p->lpm_stale ? dup_array(p->quick, p->nrules + 2, 1, &ok) : NULL;
	c->rules = calloc(p->nrules + 1, sizeof(*c->rules));
	c->rules_room = p->nrules + 1;
	c->zones = calloc(p->nzones + 1, sizeof(*c->zones));
	c->nrules = c->nzones = 0;
	if (!c->rules || !c->zones)
		ok = false;
	for (size_t i = 0; ok && i < p->nzones; i++, c->nzones++) {
		c->zones[i] = p->zones[i];
		c->zones[i].cidrs =
		    dup_array(p->zones[i].cidrs, p->zones[i].ncidrs, sizeof(struct fn_cidr), &ok);
	}
	for (size_t i = 0; ok && i < p->nrules; i++, c->nrules++) {
		struct fn_rule *r = &c->rules[i];
		*r = p->rules[i];
		r->to = dup_array(r->to, r->nto, sizeof(*r->to), &ok);
		r->ports = dup_array(r->ports, r->nports, sizeof(*r->ports), &ok);
		if (r->stat)
			__atomic_add_fetch(&r->stat->refs, 1, __ATOMIC_RELAXED);
		fn_http_get(r->http);
		fn_dns_get(r->dns);
		if (r->host && !(r->host = strdup(r->host)))
			ok = false;
	}
	if (!ok) {
		fn_policy_free(c);
		return NULL;
	}
	return c;
}

int fn_policy_rule_index(const struct fn_policy *p, const char *name)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (strcmp(p->rules[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The rules array grows by half at a time: a journal's adds are replayed
 * one by one on one policy (core/edit.c), and a realloc for each copied the
 * whole array where realloc cannot grow it in place (under ASan, always:
 * 1,000 adds to 1,000 rules took 1.6 s there). */
bool fn_policy_insert(struct fn_policy *p, struct fn_rule *r, bool first)
{
	size_t room = p->rules_room > p->nrules ? p->rules_room : p->nrules;
	if (p->nrules + 1 > room) {
		size_t want = room + room / 2 + 8;
		struct fn_rule *grown = realloc(p->rules, want * sizeof(*grown));
		if (!grown)
			return false;
		p->rules = grown;
		p->rules_room = want;
	}
	size_t at = first ? 0 : p->nrules;
	memmove(&p->rules[at + 1], &p->rules[at], (p->nrules - at) * sizeof(*r));
	p->rules[at] = *r;
	memset(r, 0, sizeof(*r));
	p->nrules++;
	p->lpm_stale = true;
	return true;
}

void fn_policy_remove(struct fn_policy *p, size_t i)
{
	rule_free(&p->rules[i]);
	memmove(&p->rules[i], &p->rules[i + 1], (p->nrules - i - 1) * sizeof(p->rules[0]));
	p->nrules--;
	p->lpm_stale = true;
}
