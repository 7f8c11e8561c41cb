/* rules.c - first-match evaluation of a policy against a peer endpoint.
 * Runs on every connect and every addressed send, so it allocates nothing
 * and takes no lock. */
#include "rules.h"

#include <stdlib.h>
#include <string.h>

const char *fn_action_name(enum fn_action a)
{
	switch (a) {
	case FN_ACT_BLACKHOLE:
		return "blackhole";
	case FN_ACT_STALL:
		return "stall";
	case FN_ACT_DROP:
		return "drop";
	}
	return "?";
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

static bool rule_matches(const struct fn_policy *p, const struct fn_rule *r,
			 const struct fn_endpoint *peer, uint8_t proto)
{
	if (!r->enabled || !(r->protos & proto))
		return false;
	if (r->from_zone >= 0 && r->from_zone != p->self_zone)
		return false;
	if (r->nto && !in_any_cidr(r->to, r->nto, peer))
		return false;
	if (r->nports && !fn_ports_contain(r->ports, r->nports, peer->port))
		return false;
	if (r->to_zone >= 0 && !in_zone(p, r->to_zone, peer))
		return false;
	return true;
}

const struct fn_rule *fn_policy_match(const struct fn_policy *p, const struct fn_endpoint *peer,
				      uint8_t proto)
{
	if (!p || !(p->active_protos & proto))
		return NULL;
	for (size_t i = 0; i < p->nrules; i++)
		if (rule_matches(p, &p->rules[i], peer, proto))
			return &p->rules[i];
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
	p->active_protos = 0;
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		/* A from_zone rule for another zone can never match here. */
		if (r->enabled && (r->from_zone < 0 || r->from_zone == p->self_zone))
			p->active_protos |= r->protos;
	}
}

void fn_policy_free(struct fn_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrules; i++) {
		free(p->rules[i].to);
		free(p->rules[i].ports);
	}
	for (size_t i = 0; i < p->nzones; i++)
		free(p->zones[i].cidrs);
	free(p->rules);
	free(p->zones);
	free(p);
}
