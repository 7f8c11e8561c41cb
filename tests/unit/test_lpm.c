/* test_lpm.c - the rule index against the plain scan it replaces: random
 * policies (IPv4 and IPv6 prefixes of every length, ports, protocols,
 * zones, disabled rules, rules with no destination) and random
 * destinations, biased to fall inside the prefixes (half the policies with
 * every IPv6 prefix under shared bytes, or a /0); both must give the
 * same rule, the same "seen" rule, the same answer when starting past a
 * declined rule and the same established rule. Plus the index's size and a policy of 100,000 rules.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/lpm.h"
#include "core/rules.h"
#include "rnd.h"

static uint64_t state = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
	return test_rnd(&state, n);
}

/* A policy's homes: when home_len is set, every IPv6 prefix is a /0 or
 * lies under the first home_len bytes of one of nhomes sites (the index
 * then roots IPv6 after them), and destinations are near them. Sites
 * differ in the byte after the bytes they share, at a random place. In
 * half the policies the prefixes are also at least tail_len bytes long and
 * have their site's bytes up to there but at byte vary, which the home
 * then compares too (lpm.c: settled()). */
static unsigned home_len, nhomes, tail_len, vary;
static uint8_t homes[3][16];

static const uint8_t *some_home(void)
{
	return homes[rnd(nhomes)];
}

static void new_homes(void)
{
	home_len = 1 + rnd(15);
	nhomes = 1 + rnd(3);
	tail_len = rnd(2) ? home_len : home_len + rnd(17 - home_len);
	vary = home_len + rnd(tail_len - home_len + 1);
	unsigned split = rnd(home_len);
	for (int i = 0; i < 16; i++)
		homes[0][i] = (uint8_t)rnd(256);
	for (unsigned h = 1; h < nhomes; h++) {
		memcpy(homes[h], homes[0], 16);
		homes[h][split] = (uint8_t)(homes[0][split] + h);
	}
}

static void random_cidr(struct fn_cidr *c, bool v4)
{
	memset(c, 0, sizeof(*c));
	c->v4 = v4;
	c->prefix = (uint8_t)rnd(v4 ? 33 : 129);
	if (!v4 && home_len) {
		const uint8_t *home = some_home();
		c->prefix = rnd(10) ? (uint8_t)(tail_len * 8 + rnd(129 - tail_len * 8)) : 0;
		for (unsigned i = 0; i < 16; i++)
			c->ip[i] = i < tail_len && i != vary ? home[i] : (uint8_t)rnd(3);
		for (int b = c->prefix; b < 128; b++)
			c->ip[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
		return;
	}
	/* Few distinct leading bytes, so that prefixes nest and overlap; half
	 * the IPv6 ones share their middle bytes too (long runs of one-way
	 * nodes, which the index compresses). */
	bool run = !v4 && rnd(2);
	for (int i = 0; i < (v4 ? 4 : 16); i++)
		c->ip[i] = (uint8_t)(i < 2 ? rnd(3) : run && i < 14 ? 0 : rnd(256));
	for (int b = c->prefix; b < (v4 ? 32 : 128); b++)
		c->ip[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
}

static struct fn_policy *random_policy(size_t nrules)
{
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = (int)rnd(3) - 1;
	p->nzones = 2;
	p->zones = calloc(2, sizeof(*p->zones));
	for (int z = 0; z < 2; z++) {
		p->zones[z].ncidrs = 1 + rnd(3);
		p->zones[z].cidrs = calloc(p->zones[z].ncidrs, sizeof(struct fn_cidr));
		for (size_t k = 0; k < p->zones[z].ncidrs; k++)
			random_cidr(&p->zones[z].cidrs[k], rnd(2));
	}
	p->nrules = nrules;
	p->rules = calloc(nrules, sizeof(*p->rules));
	for (size_t i = 0; i < nrules; i++) {
		struct fn_rule *r = &p->rules[i];
		snprintf(r->name, sizeof(r->name), "r%zu", i);
		r->enabled = rnd(4) != 0;
		r->established = rnd(5) == 0;
		r->protos = (uint8_t)(1 + rnd(3));
		r->from_zone = rnd(5) == 0 ? (int)rnd(2) : -1;
		r->to_zone = rnd(4) == 0 ? (int)rnd(2) : -1;
		r->nto = rnd(6) == 0 ? 0 : 1 + rnd(3);
		r->to = r->nto ? calloc(r->nto, sizeof(struct fn_cidr)) : NULL;
		for (size_t k = 0; k < r->nto; k++)
			random_cidr(&r->to[k], rnd(3) != 0);
		if (rnd(3) == 0) {
			r->nports = 1;
			r->ports = calloc(1, sizeof(*r->ports));
			r->ports[0].lo = (uint16_t)rnd(4);
			r->ports[0].hi = (uint16_t)(r->ports[0].lo + rnd(2));
		}
	}
	fn_policy_finish(p);
	return p;
}

static void random_endpoint(const struct fn_policy *p, struct fn_endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	const struct fn_rule *r = &p->rules[rnd((uint32_t)p->nrules)];
	ep->v4 = rnd(3) != 0;
	/* Now and then on a run's path, or a byte off it. */
	bool run = rnd(2);
	for (int i = 0; i < 16; i++)
		ep->ip[i] = (uint8_t)(i < 2 ? rnd(3) : run && i < 14 ? 0 : rnd(256));
	if (run && rnd(2))
		ep->ip[2 + rnd(12)] = (uint8_t)rnd(3);
	if (r->nto && rnd(2)) { /* inside one of its prefixes, most of the time */
		const struct fn_cidr *c = &r->to[rnd((uint32_t)r->nto)];
		ep->v4 = c->v4;
		for (int b = 0; b < c->prefix; b++) {
			uint8_t bit = (uint8_t)(0x80u >> (b % 8));
			ep->ip[b / 8] = (uint8_t)((ep->ip[b / 8] & ~bit) | (c->ip[b / 8] & bit));
		}
	}
	if (!ep->v4 && home_len && rnd(2)) { /* at a home, or a byte off it */
		const uint8_t *home = some_home();
		for (unsigned i = 0; i < home_len; i++)
			ep->ip[i] = home[i];
		for (unsigned i = home_len; i < tail_len; i++) /* on the tail, */
			ep->ip[i] = i != vary ? home[i] : (uint8_t)rnd(3);
		if (rnd(3) == 0) /* or a byte off home or tail */
			ep->ip[rnd(tail_len)] ^= (uint8_t)(1 + rnd(255));
	}
	if (ep->v4)
		memset(ep->ip + 4, 0, 12);
	ep->port = (uint16_t)rnd(5);
}

static void test_same_as_scan(void)
{
	int mismatches = 0, hits = 0, open = 0, homed = 0, multi = 0, skipped = 0, tails = 0;
	for (int round = 0; round < 600; round++) {
		/* Half the policies keep their IPv6 prefixes at sites. */
		home_len = 0;
		if (round % 2)
			new_homes();
		struct fn_policy *p = random_policy(1 + rnd(40));
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
		homed += p->lpm->home[0].at > 0;
		multi += p->lpm->homes_end - p->lpm->home > 1;
		skipped += p->lpm->nskips > 0;
		const struct fn_lpm_home *h = &p->lpm->home[0];
		tails += h->at < 14 && ((const uint8_t *)h->mask)[h->at + 2] != 0;
		for (int k = 0; k < 300; k++) {
			struct fn_endpoint ep;
			random_endpoint(p, &ep);
			uint8_t proto = (uint8_t)(1 + rnd(3));
			size_t from = rnd(3) == 0 ? rnd((uint32_t)p->nrules) : 0;
			const struct fn_rule *s1, *s2, *a, *b;
			a = fn_policy_match_from(p, &ep, proto, from, &s1);
			struct fn_lpm *lpm = p->lpm;
			p->lpm = NULL; /* the plain scan */
			b = fn_policy_match_from(p, &ep, proto, from, &s2);
			p->lpm = lpm;
			mismatches += a != b || s1 != s2;
			hits += a != NULL;
			mismatches +=
			    fn_policy_match_from(p, &ep, proto, from, NULL) !=
			    (p->lpm = NULL, fn_policy_match_from(p, &ep, proto, from, NULL));
			p->lpm = lpm;
			/* The established rule covering a connection, from the
			 * index and by the scan. */
			const struct fn_rule *e = fn_established_covers(p, &ep);
			p->lpm = NULL;
			mismatches += e != fn_established_covers(p, &ep);
			p->lpm = lpm;
			open += e != NULL;
		}
		fn_policy_free(p);
	}
	home_len = 0;
	CU_ASSERT_EQUAL(mismatches, 0);
	CU_ASSERT(hits > 1000);	 /* the destinations did hit rules */
	CU_ASSERT(open > 1000);	 /* and established rules */
	CU_ASSERT(homed > 250);	 /* and the index rooted IPv6 after a home */
	CU_ASSERT(multi > 30);	 /* or after each of a few */
	CU_ASSERT(skipped > 30); /* and long runs were skips */
	CU_ASSERT(tails > 30);	 /* and homes compared bytes past their root's */
}

/* Policy text: n refuse rules, rule i named NAME<i> with match.to written
 * by to(i), each followed by a comma, then the rule last and ");". */
static char *refuse_rules(size_t n, const char *name, void (*to)(size_t, char *, size_t),
			  const char *last)
{
	size_t cap = n * 100 + strlen(last) + 64, at = 0;
	char *text = malloc(cap), cidr[64];
	at += (size_t)snprintf(text, cap, "rules = (\n");
	for (size_t i = 0; i < n; i++) {
		to(i, cidr, sizeof(cidr));
		at += (size_t)snprintf(text + at, cap - at,
				       "{ name = \"%s%zu\"; action = \"refuse\"; match = { to = "
				       "\"%s\"; }; },\n",
				       name, i, cidr);
	}
	snprintf(text + at, cap - at, "%s\n);\n", last);
	return text;
}

static void to_v4(size_t i, char *cidr, size_t len)
{
	snprintf(cidr, len, "127.%zu.%zu.%zu/32", 100 + (i >> 16), (i >> 8) & 255, i & 255);
}

static void to_v6(size_t i, char *cidr, size_t len)
{
	snprintf(cidr, len, "fd00:91::%zx/128", i);
}

static size_t sites; /* to_sites()'s */

static void to_two_sites(size_t i, char *cidr, size_t len)
{
	snprintf(cidr, len, "fd0%zu:91::%zx/128", i & 1, i);
}

static void test_large(void)
{
	size_t n = 100000;
	char err[256];
	char *text = refuse_rules(n, "r", to_v4,
				  "{ name = \"est\"; action = \"blackhole\"; established = true; "
				  "enabled = false; match = { to = \"127.200.0.1/32\"; }; }");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct fn_policy *p = fn_config_load_string(text, "big", NULL, err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL(p->lpm);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CU_ASSERT(s < 60); /* generous (sanitizers): make bench reports the real figure */
	struct fn_endpoint ep = {.v4 = true, .ip = {127, 100, 200, 77}, .port = 443};
	const struct fn_rule *r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(r->name, "r51277"); /* 200 * 256 + 77 */
	ep.ip[1] = 99;				   /* 127.99.200.77: below every rule */
	CU_ASSERT_PTR_NULL(fn_policy_match(p, &ep, FN_PROTO_TCP, NULL));
	/* Every uncovered connect asks for an established rule: from the
	 * index, not a pass over the 100,000 rules (2,000 passes took over a
	 * second). */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int found = 0;
	for (int i = 0; i < 2000; i++)
		found += fn_established_covers(p, &ep) != NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CU_ASSERT_EQUAL(found, 0);
	CU_ASSERT(s < 0.2);
	ep.ip[1] = 200, ep.ip[2] = 0, ep.ip[3] = 1;
	const struct fn_rule *e = fn_established_covers(p, &ep);
	CU_ASSERT(e && strcmp(e->name, "est") == 0);
	fn_policy_free(p);
	free(text);
}

/* IPv6 /128s that share 13 bytes (fd00:91::I) and a /64 around them:
 * rooted after the /64's 8 bytes, the 4 one-way nodes below stay steps (a
 * skip that short costs more than it saves: lpm.c), and addresses that
 * leave them at any byte fall back to the /64's rule or to none. */
static void test_compressed_runs(void)
{
	char err[256];
	char *text = refuse_rules(3000, "h", to_v6,
				  "{ name = \"net\"; action = \"blackhole\"; match = { to = "
				  "\"fd00:91::/64\"; }; }");
	struct fn_policy *p = fn_config_load_string(text, "runs", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
	CU_ASSERT_EQUAL(p->lpm->nskips, 0);
	struct fn_endpoint ep = {.v4 = false, .ip = {0xfd, 0, 0, 0x91}, .port = 443};
	ep.ip[14] = 0x0b, ep.ip[15] = 0xb7; /* fd00:91::bb7, the rule h2999 */
	const struct fn_rule *r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
	CU_ASSERT(r && strcmp(r->name, "h2999") == 0);
	ep.ip[14] = 0x0b, ep.ip[15] = 0xb8; /* fd00:91::bb8: only the /64 */
	r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
	CU_ASSERT(r && strcmp(r->name, "net") == 0);
	for (int k = 2; k < 14; k++) { /* off the run at byte k */
		struct fn_endpoint off = ep;
		off.ip[k] ^= 0x20;
		r = fn_policy_match(p, &off, FN_PROTO_TCP, NULL);
		CU_ASSERT(k < 8 ? r == NULL : r && strcmp(r->name, "net") == 0);
	}
	fn_policy_free(p);
	free(text);
}

/* The same /128s under fd00::/16, and a 2000::/7 that leaves IPv6 no home
 * (no whole byte shared): rooted at bytes 0 and 1, the 12 one-way nodes
 * from byte 2 to 13 are one skip, and an address that leaves it at any
 * byte meets the /16's rule. */
static void test_long_run(void)
{
	char err[256];
	char *text = refuse_rules(3000, "h", to_v6,
				  "{ name = \"net\"; action = \"blackhole\"; match = { to = "
				  "\"fd00::/16\"; }; },\n{ name = \"far\"; action = \"refuse\"; "
				  "match = { to = \"2000::/7\"; }; }");
	struct fn_policy *p = fn_config_load_string(text, "long", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
	CU_ASSERT_EQUAL(p->lpm->home[0].at, 0);
	CU_ASSERT_EQUAL(p->lpm->nskips, 1);
	struct fn_endpoint ep = {.v4 = false, .ip = {0xfd, 0, 0, 0x91}, .port = 443};
	ep.ip[14] = 0x0b, ep.ip[15] = 0xb7; /* fd00:91::bb7, the rule h2999 */
	const struct fn_rule *r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
	CU_ASSERT(r && strcmp(r->name, "h2999") == 0);
	for (int k = 2; k < 14; k++) { /* off the run at byte k */
		struct fn_endpoint off = ep;
		off.ip[k] ^= 0x20;
		r = fn_policy_match(p, &off, FN_PROTO_TCP, NULL);
		CU_ASSERT(r && strcmp(r->name, "net") == 0);
	}
	ep.ip[0] = 0x21; /* 2100:91::bb7 */
	r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
	CU_ASSERT(r && strcmp(r->name, "far") == 0);
	ep.ip[1] = 1; /* fd01:91::bb7 */
	ep.ip[0] = 0xfd;
	CU_ASSERT_PTR_NULL(fn_policy_match(p, &ep, FN_PROTO_TCP, NULL));
	fn_policy_free(p);
	free(text);
}

/* Every IPv6 prefix under fd00:91::/104: the root takes bytes 13 and 14.
 * A rule for those 13 bytes covers everything at home; an address off
 * home by any bit is covered only by the rules of every destination (an
 * explicit ::/0 and a rule without one), in file order. */
static void test_home(void)
{
	char err[256];
	const char *text = "rules = (\n"
			   "{ name = \"one\"; action = \"refuse\"; match = { to = "
			   "\"fd00:91::1:5/128\"; }; },\n"
			   "{ name = \"all6\"; action = \"refuse\"; enabled = false; "
			   "match = { to = \"::/0\"; }; },\n"
			   "{ name = \"site\"; action = \"blackhole\"; match = { to = "
			   "\"fd00:91::/104\"; }; },\n"
			   "{ name = \"any\"; action = \"blackhole\"; match = { proto = "
			   "\"udp\"; }; }\n"
			   ");\n";
	struct fn_policy *p = fn_config_load_string(text, "home", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
	CU_ASSERT_EQUAL(p->lpm->home[0].at, 13);
	struct fn_endpoint ep = {.v4 = false, .ip = {0xfd, 0, 0, 0x91}, .port = 53};
	ep.ip[13] = 1, ep.ip[15] = 5;
	const struct fn_rule *r = fn_policy_match(p, &ep, FN_PROTO_TCP, NULL), *seen;
	CU_ASSERT(r && strcmp(r->name, "one") == 0);
	ep.ip[15] = 6; /* home, not fd00:91::1:5 */
	r = fn_policy_match(p, &ep, FN_PROTO_TCP, &seen);
	CU_ASSERT(r && strcmp(r->name, "site") == 0 && seen == r);
	for (int bit = 0; bit < 104; bit++) {
		struct fn_endpoint off = ep;
		off.ip[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
		r = fn_policy_match(p, &off, FN_PROTO_TCP, &seen);
		CU_ASSERT(!r && seen && strcmp(seen->name, "all6") == 0); /* counted while off */
		r = fn_policy_match(p, &off, FN_PROTO_UDP, NULL);
		CU_ASSERT(r && strcmp(r->name, "any") == 0);
	}
	fn_policy_free(p);
}

/* The address of the prefix to() writes for rule i, port 443. */
static struct fn_endpoint address_of(void (*to)(size_t, char *, size_t), size_t i)
{
	char cidr[64];
	struct fn_cidr c;
	to(i, cidr, sizeof(cidr));
	fn_cidr_parse(&c, cidr);
	struct fn_endpoint ep = {.v4 = c.v4, .port = 443};
	memcpy(ep.ip, c.ip, 16);
	return ep;
}

/* True if ep's lookup finds the rule NAME<i> (NAME, for i SIZE_MAX). */
static bool finds(const struct fn_policy *p, const struct fn_endpoint *ep, const char *name,
		  size_t i)
{
	char want[32];
	if (i == SIZE_MAX)
		snprintf(want, sizeof(want), "%s", name);
	else
		snprintf(want, sizeof(want), "%s%zu", name, i);
	const struct fn_rule *r = fn_policy_match(p, ep, FN_PROTO_TCP, NULL);
	return r && strcmp(r->name, want) == 0;
}

static void to_sites(size_t i, char *cidr, size_t len)
{
	snprintf(cidr, len, "2a%02zx:%zx::/48", i % sites, i / sites + 1);
}

/* /48s at as many sites as a cloud's ranges (2aSS:I::/48, the sites told
 * apart by byte 1): a home per site, each found by that byte, every rule
 * found under its own and an address at no site covered only by the rule
 * of every destination; one site more than there can be homes: one home,
 * the same answers. The /48s differ in byte 3 at most and all have 0 in
 * bytes 4 and 5, which the home compares: no node is built for them (with
 * them, two per /48), a lookup reads no byte past 4 (with steps for them,
 * 6), and an address with 1 in byte 5 is under no /48. */
static void test_many_sites(void)
{
	char err[256];
	for (sites = 20; sites <= FN_LPM_HOMES + 1; sites += FN_LPM_HOMES + 1 - 20) {
		char *text = refuse_rules(sites * 50, "s", to_sites,
					  "{ name = \"end\"; action = \"refuse\"; }");
		struct fn_policy *p = fn_config_load_string(text, "sites", NULL, err, sizeof(err));
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
		bool homes = sites <= FN_LPM_HOMES;
		CU_ASSERT_EQUAL(p->lpm->homes_end - p->lpm->home, homes ? (long)sites : 1);
		CU_ASSERT_EQUAL(p->lpm->sel_at, homes ? 1u : 0u);
		size_t found = 0;
		long used = 0;
		for (size_t i = 0; i < sites * 50; i++) {
			struct fn_endpoint ep = address_of(to_sites, i);
			ep.ip[15] = (uint8_t)i; /* a host under the /48 */
			found += finds(p, &ep, "s", i);
			const uint8_t *q = ep.ip;
			fn_lpm_down6(p->lpm, ep.ip, &q);
			used = q - ep.ip > used ? q - ep.ip : used;
			ep.ip[5] = 1; /* past the /48 */
			found += finds(p, &ep, "end", SIZE_MAX);
			ep.ip[5] = 0;
			ep.ip[1] = (uint8_t)(sites + i % 7); /* at no site */
			found += finds(p, &ep, "end", SIZE_MAX);
		}
		CU_ASSERT_EQUAL(found, sites * 150);
		CU_ASSERT(used <= 5);
		CU_ASSERT(p->lpm->nnodes <= sites); /* one for byte 3 under each site at most */
		fn_policy_free(p);
		free(text);
	}
}

/* /128s at two sites, fd00:91::I and fd01:91::I: a home each, and
 * each rule found under its own. */
static void test_two_homes(void)
{
	char err[256];
	char *text =
	    refuse_rules(1000, "s", to_two_sites, "{ name = \"end\"; action = \"refuse\"; }");
	struct fn_policy *p = fn_config_load_string(text, "sites", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->lpm);
	CU_ASSERT_EQUAL(p->lpm->homes_end - p->lpm->home, 2);
	CU_ASSERT_EQUAL(p->lpm->home[0].at, 14);
	int found = 0;
	for (size_t i = 0; i < 1000; i++) {
		struct fn_endpoint ep = address_of(to_two_sites, i);
		found += finds(p, &ep, "s", i);
	}
	CU_ASSERT_EQUAL(found, 1000);
	fn_policy_free(p);
	free(text);
}

void add_lpm_tests(void)
{
	CU_pSuite s = CU_add_suite("rule index", NULL, NULL);
	CU_add_test(s, "the same answers as a scan, 90,000 random lookups", test_same_as_scan);
	CU_add_test(s, "100,000 rules: loaded, found", test_large);
	CU_add_test(s, "IPv6 short runs stepped, left at any byte", test_compressed_runs);
	CU_add_test(s, "IPv6 long runs compressed, left at any byte", test_long_run);
	CU_add_test(s, "IPv6 rooted after its home bytes, left at any bit", test_home);
	CU_add_test(s, "IPv6 at two sites: a home each", test_two_homes);
	CU_add_test(s, "IPv6 at 20 and 33 sites: a home each, found by a byte", test_many_sites);
}
