/* dns.h - names in rules: the dns action (what a lookup of a matching name
 * returns: an error, the real answer late, or addresses of the rule's own),
 * host patterns ("api.example.test", "*.example.test"; any case, a trailing
 * dot ignored), the per-lookup decision, and the resolver's own timeout as
 * /etc/resolv.conf sets it. Pure: the shim's resolver hooks use it. */
#ifndef FAULTNET_DNS_H
#define FAULTNET_DNS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/chance.h"
#include "core/rules.h"

enum fn_dns_error {
	FN_DNS_NONE,
	FN_DNS_NXDOMAIN,
	FN_DNS_SERVFAIL,
	FN_DNS_NODATA,
	FN_DNS_TIMEOUT,
	FN_DNS_REFUSED
};

#define FN_DNS_ANSWERS_MAX 16

/* A dns rule's own part, shared by copies of the rule (refs). */
struct fn_dns {
	uint64_t refs;
	enum fn_dns_error error;
	struct fn_endpoint answer[FN_DNS_ANSWERS_MAX]; /* ports unused */
	int nanswer;
};

struct fn_dns *fn_dns_new(void);
void fn_dns_get(struct fn_dns *d);
void fn_dns_put(struct fn_dns *d);

/* "nxdomain" ... as the enum; FN_DNS_NONE for an unknown word. */
enum fn_dns_error fn_dns_error_parse(const char *word);
const char *fn_dns_error_name(enum fn_dns_error e);

/* A pattern as stored: lower case, without a trailing dot. NULL when it is
 * not an exact name or "*." and a suffix (message in *why). */
char *fn_host_pattern(const char *text, const char **why);
/* Whether name (any case, trailing dot or not) matches pattern. */
bool fn_host_match(const char *pattern, const char *name);

/* Whether r is an enabled dns rule of this process's zone whose host
 * pattern (if any) matches name; its conditions are not drawn. */
bool fn_dns_rule_covers(const struct fn_policy *p, const struct fn_rule *r, const char *name);

/* The first enabled dns rule whose host pattern matches name and whose
 * conditions (counted per lookup) let it apply; NULL to resolve as usual.
 * *seen gets the first dns rule whose pattern matched. Judges only the
 * rules the policy's name index (core/hostidx.h) gives for name, so that
 * its cost does not grow with the number of dns rules. */
const struct fn_rule *fn_dns_decide(const struct fn_policy *p, const char *name,
				    const struct fn_rule **seen);
/* The same for a caller that has name's length (strlen) at hand. */
const struct fn_rule *fn_dns_decide_len(const struct fn_policy *p, const char *name, size_t len,
					const struct fn_rule **seen);

/* The dns rules whose host pattern matches the len bytes of name (or
 * that have none), in file order, whatever their state or zone: their
 * indices in out, and how many; -1 when there are more than max or the
 * policy has no index. A pure function of the policy's rules and the
 * name, so that a caller may keep the list while the policy stays in
 * force (preload/dns/resolve.c keeps its thread's last name's). */
int fn_dns_candidates(const struct fn_policy *p, const char *name, size_t len, uint32_t *out,
		      int max);
/* fn_dns_decide_len over such a list: the first candidate enabled, of
 * this zone, whose conditions (drawn) let it apply; *seen as there (seen
 * may be NULL). In line: a lookup judges one candidate or none, mostly. */
static inline const struct fn_rule *fn_dns_pick(const struct fn_policy *p, const uint32_t *cand,
						int n, const struct fn_rule **seen)
{
	if (seen)
		*seen = NULL;
	for (int k = 0; k < n; k++) {
		const struct fn_rule *r = &p->rules[cand[k]];
		if (!r->enabled || (r->from_zone >= 0 && r->from_zone != p->self_zone))
			continue;
		if (seen && !*seen)
			*seen = r;
		if (fn_cond_pass(r))
			return r;
	}
	return NULL;
}

/* The same by a scan of every rule in file order (the index's fallback,
 * and the reference its unit test compares it with); *seen must start
 * NULL. draw: conditions are drawn, else the first covering rule. */
const struct fn_rule *fn_dns_scan(const struct fn_policy *p, const char *name,
				  const struct fn_rule **seen, bool draw);

/* Whether some enabled dns rule of this zone covers name (fn_dns_rule_covers),
 * its conditions not drawn. */
bool fn_dns_taken(const struct fn_policy *p, const char *name);

/* The first dns rule, enabled or not, whose nameservers (match.to, any
 * address when unset; match.port, 53 when unset) include ep: queries a
 * process sends there itself go to the shim's responder. NULL for none. */
const struct fn_rule *fn_dns_nameserver(const struct fn_policy *p, const struct fn_endpoint *ep);

/* How long glibc's resolver waits before giving up on silent nameservers:
 * per attempt, each nameserver's timeout as res_send computes it, times
 * attempts, from /etc/resolv.conf and RES_OPTIONS (default 5 s, 2
 * attempts, one server). */
unsigned fn_resolver_timeout_ms(const char *resolv_conf);

/* Set by the shim: whether any name this process resolved to ep's
 * address matches pattern (rules with match.host on connects). NULL until
 * set: such rules then match nothing. */
extern bool (*fn_host_resolved)(const struct fn_endpoint *ep, const char *pattern);

#endif
