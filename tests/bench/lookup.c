/* lookup.c - rule lookup cost and the rule index's size: builds a policy of
 * N /32 CIDR rules on loopback (127.100.0.0/32, 127.100.0.1/32, ...) and looks up one
 * destination K times: "hit", an address only the last rule covers, or
 * "miss", one no rule covers. Run under callgrind with
 * --toggle-collect=fn_policy_match, the instructions divided by K are the
 * cost of one lookup. "load" times parsing N such rules from policy text.
 *
 *   lookup N K hit|miss     prints the index's build time and bytes per prefix
 *   lookup N K hit6|miss6   the same with N IPv6 /128 rules (fd00:91::I)
 *   lookup N K hit6x        the IPv6 rules at two sites (fd00:91::I for even
 *                           I, fd01:91::I for odd), the last rule's address
 *   lookup N K hit6m        N IPv6 /48s at 16 sites that differ in their
 *                           first bytes, as a cloud's published ranges do
 *                           (2a0S:I::/48 for site S = I mod 16)
 *   lookup N 0 load         prints the seconds a policy file of N rules takes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/lpm.h"
#include "core/rules.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void prefix_of(long i, uint8_t ip[4])
{
	ip[0] = 127;
	ip[1] = (uint8_t)(100 + (i >> 16));
	ip[2] = (uint8_t)((i >> 8) & 255);
	ip[3] = (uint8_t)(i & 255);
}

/* The IPv6 rules: fd00:91::I/128 (or fd01:91::I for odd I at two sites),
 * never an address anything is sent to (the program only looks up). */
static bool two_sites, many_sites;

static void prefix6_of(long i, uint8_t ip[16])
{
	memset(ip, 0, 16);
	if (many_sites) {
		ip[0] = 0x2a;
		ip[1] = (uint8_t)(i & 15);
		ip[2] = (uint8_t)(i >> 12);
		ip[3] = (uint8_t)((i >> 4) & 255);
		ip[4] = (uint8_t)(i >> 20);
		return;
	}
	ip[0] = 0xfd;
	ip[1] = (uint8_t)(two_sites && (i & 1));
	ip[3] = 0x91;
	ip[13] = (uint8_t)(i >> 16);
	ip[14] = (uint8_t)((i >> 8) & 255);
	ip[15] = (uint8_t)(i & 255);
}

static int load(long n)
{
	size_t cap = (size_t)n * 96 + 64, at = 0;
	char *text = malloc(cap), err[512];
	at += (size_t)snprintf(text, cap, "rules = (\n");
	for (long i = 0; i < n; i++) {
		uint8_t ip[4];
		prefix_of(i, ip);
		at += (size_t)snprintf(text + at, cap - at,
				       "{ name = \"r%ld\"; action = \"refuse\"; match = { to = "
				       "\"%d.%d.%d.%d/32\"; }; }%s\n",
				       i, ip[0], ip[1], ip[2], ip[3], i + 1 < n ? "," : "");
	}
	snprintf(text + at, cap - at, ");\n");
	double t0 = now();
	struct fn_policy *p = fn_config_load_string(text, "lookup", NULL, err, sizeof(err));
	printf("load %ld rules: %.3f s\n", n, now() - t0);
	fn_policy_free(p);
	free(text);
	return p ? 0 : 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000, k = argc > 2 ? atol(argv[2]) : 1000;
	const char *mode = argc > 3 ? argv[3] : "hit";
	if (strcmp(mode, "load") == 0)
		return load(n);
	bool v6 = strncmp(mode, "hit6", 4) == 0 || strcmp(mode, "miss6") == 0,
	     miss = strncmp(mode, "miss", 4) == 0;
	two_sites = strcmp(mode, "hit6x") == 0;
	many_sites = strcmp(mode, "hit6m") == 0;
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = -1;
	p->nrules = (size_t)n;
	p->rules = calloc((size_t)n, sizeof(*p->rules));
	for (long i = 0; i < n; i++) {
		struct fn_rule *r = &p->rules[i];
		snprintf(r->name, sizeof(r->name), "r%ld", i);
		r->action = FN_ACT_REFUSE;
		r->enabled = true;
		r->protos = FN_PROTO_TCP;
		r->from_zone = r->to_zone = -1;
		r->nto = 1;
		r->to = calloc(1, sizeof(*r->to));
		r->to->v4 = !v6;
		r->to->prefix = v6 ? (many_sites ? 48 : 128) : 32;
		if (v6)
			prefix6_of(i, r->to->ip);
		else
			prefix_of(i, r->to->ip);
	}
	double t0 = now();
	fn_policy_finish(p);
	double built = now() - t0;
	struct fn_endpoint ep = {.v4 = !v6, .port = 443};
	if (v6)
		prefix6_of(n - 1, ep.ip);
	else
		prefix_of(n - 1, ep.ip);
	if (miss && !v6)
		ep.ip[1] = 99; /* 127.99.x.y: below every rule's prefix */
	if (many_sites)
		ep.ip[15] = 7; /* a host under the /48 */
	if (miss && v6)
		ep.ip[12] = 1; /* byte 12 set: off the bytes every rule shares */
	long hits = 0;
	for (long i = 0; i < k; i++) { /* as the shim calls it: with the rule seen */
		const struct fn_rule *seen;
		hits += fn_policy_match(p, &ep, FN_PROTO_TCP, &seen) != NULL;
	}
	printf("%ld rules: index built in %.3f s, %zu bytes (%.1f per prefix); %ld lookups, %ld "
	       "hits\n",
	       n, built, p->lpm ? fn_lpm_bytes(p->lpm) : 0,
	       p->lpm ? (double)fn_lpm_bytes(p->lpm) / (double)n : 0.0, k, hits);
	fn_policy_free(p);
	return hits == (miss ? 0 : k) ? 0 : 1;
}
