/* test_compile.c - the kernel-side backend's map contents (bpf/compile.c)
 * against the shim's own matcher: for random policies of the actions the
 * backend carries out and random destinations, the longest prefix entry's
 * first enabled candidate whose protocol and ports match (what the BPF
 * programs do) must be the rule fn_policy_match picks. Plus the messages
 * for what the backend refuses. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/compile.h"
#include "core/chance.h"
#include "core/config.h"
#include "core/rules.h"
#include "rnd.h"

static uint64_t seed = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	return test_rnd(&seed, n);
}

static void some_cidr(struct fn_cidr *c, bool v4)
{
	memset(c, 0, sizeof(*c));
	c->v4 = v4;
	c->prefix = (uint8_t)rnd(v4 ? 33 : 129);
	for (int i = 0; i < (v4 ? 4 : 16); i++)
		c->ip[i] = (uint8_t)(i < 2 ? rnd(2) : rnd(256));
	for (int b = c->prefix; b < (v4 ? 32 : 128); b++)
		c->ip[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
}

static struct fn_policy *some_policy(void)
{
	static const enum fn_action acts[] = {FN_ACT_BLACKHOLE, FN_ACT_DROP, FN_ACT_REFUSE,
					      FN_ACT_STALL, FN_ACT_RESET};
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = (int)rnd(2) - 1; /* none, or zone 0 */
	p->nzones = 1;
	p->zones = calloc(1, sizeof(*p->zones));
	p->zones[0].ncidrs = 1;
	p->zones[0].cidrs = calloc(1, sizeof(struct fn_cidr));
	some_cidr(p->zones[0].cidrs, true);
	p->nrules = 1 + rnd(6); /* at most 8 rules may cover one prefix */
	p->rules = calloc(p->nrules, sizeof(*p->rules));
	for (size_t i = 0; i < p->nrules; i++) {
		struct fn_rule *r = &p->rules[i];
		snprintf(r->name, sizeof(r->name), "r%zu", i);
		r->action = acts[rnd(5)];
		r->par.after_bytes = r->par.after_ms = -1; /* stall and reset at connect */
		r->enabled = rnd(4) != 0;
		r->protos = (uint8_t)(1 + rnd(3));
		r->from_zone = rnd(4) == 0 ? 0 : -1;
		r->to_zone = rnd(5) == 0 ? 0 : -1;
		r->nto = rnd(6) == 0 ? 0 : 1 + rnd(2);
		r->to = r->nto ? calloc(r->nto, sizeof(struct fn_cidr)) : NULL;
		for (size_t k = 0; k < r->nto; k++)
			some_cidr(&r->to[k], rnd(3) != 0);
		if (rnd(3) == 0) {
			r->nports = 1 + rnd(2);
			r->ports = calloc(r->nports, sizeof(*r->ports));
			for (size_t k = 0; k < r->nports; k++) {
				r->ports[k].lo = (uint16_t)rnd(4);
				r->ports[k].hi = (uint16_t)(r->ports[k].lo + rnd(2));
			}
		}
	}
	fn_policy_finish(p);
	return p;
}

static bool inside(const struct fnb_prefix *e, const struct fn_endpoint *ep)
{
	if (e->v4 != ep->v4)
		return false;
	for (unsigned b = 0; b < e->len; b++) {
		uint8_t bit = (uint8_t)(0x80u >> (b % 8));
		if ((e->addr[b / 8] & bit) != (ep->ip[b / 8] & bit))
			return false;
	}
	return true;
}

/* What the programs decide: the longest entry, then its candidates. */
static int kernel_decides(const struct fnb_plan *pl, const struct fn_endpoint *ep, uint8_t proto)
{
	const struct fnb_prefix *best = NULL;
	for (size_t i = 0; i < pl->n; i++)
		if (inside(&pl->e[i], ep) && (!best || pl->e[i].len > best->len))
			best = &pl->e[i];
	for (uint32_t k = 0; best && k < best->cands.n; k++) {
		const struct fnb_rule *r = &pl->rules[best->cands.rule[k]];
		bool port = !r->nports;
		for (int j = 0; j < r->nports; j++)
			port |= ep->port >= r->port_lo[j] && ep->port <= r->port_hi[j];
		if (r->on && (r->protos & proto) && port)
			return (int)best->cands.rule[k];
	}
	return -1;
}

static void some_endpoint(const struct fn_policy *p, struct fn_endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	const struct fn_rule *r = &p->rules[rnd((uint32_t)p->nrules)];
	ep->v4 = rnd(3) != 0;
	for (int i = 0; i < 16; i++)
		ep->ip[i] = (uint8_t)(i < 2 ? rnd(2) : rnd(256));
	if (r->nto && rnd(3)) {
		const struct fn_cidr *c = &r->to[rnd((uint32_t)r->nto)];
		ep->v4 = c->v4;
		memcpy(ep->ip, c->ip, 16);
		for (int b = c->prefix + (int)rnd(3); b < 128; b++)
			if (rnd(2))
				ep->ip[b / 8] ^= (uint8_t)(0x80u >> (b % 8));
	}
	if (ep->v4)
		memset(ep->ip + 4, 0, 12);
	ep->port = (uint16_t)rnd(5);
}

static void test_same_as_matcher(void)
{
	int wrong = 0, hits = 0;
	for (int round = 0; round < 400; round++) {
		struct fn_policy *p = some_policy();
		struct fnb_plan pl;
		char err[256];
		bool built = fnb_plan_build(&pl, p, err, sizeof(err));
		if (!built)
			fprintf(stderr, "\nplan refused: %s\n", err);
		CU_ASSERT_FATAL(built);
		for (int k = 0; k < 200; k++) {
			struct fn_endpoint ep;
			some_endpoint(p, &ep);
			uint8_t proto = (uint8_t)(1 + rnd(2));
			const struct fn_rule *want = fn_policy_match(p, &ep, proto, NULL);
			int got = kernel_decides(&pl, &ep, proto);
			wrong += got != (want ? (int)(want - p->rules) : -1);
			hits += got >= 0;
		}
		fnb_plan_free(&pl);
		fn_policy_free(p);
	}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT(hits > 2000); /* the comparison covered matches, not only misses */
}

static void expect_refused(const char *text, const char *part)
{
	char err[512];
	struct fn_policy *p = fn_config_load_string(text, "t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fnb_plan pl;
	bool ok = fnb_plan_build(&pl, p, err, sizeof(err));
	CU_ASSERT_FALSE(ok);
	if (!ok && !strstr(err, part))
		fprintf(stderr, "\nmessage: %s\nwanted: %s\n", err, part);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, part));
	fnb_plan_free(&pl);
	fn_policy_free(p);
}

static void test_refusals(void)
{
	expect_refused("rules = ( { name = \"ok\"; action = \"blackhole\"; },\n"
		       "  { name = \"un\"; action = \"unreachable\"; } );",
		       "rule 'un' (line 2, unreachable): its action is not one");
	expect_refused("rules = ( { name = \"bh\"; action = \"blackhole\"; after_ms = 5; } );",
		       "rule 'bh' (line 1, blackhole): a blackhole after bytes or time");
	expect_refused("rules = ( { name = \"d\"; action = \"delay\"; delay_ms = 5; } );",
		       "rule 'd' (line 1, delay): the backend delays TCP handshakes, not UDP");
	expect_refused("rules = ( { name = \"e\"; action = \"stall\"; established = true; } );",
		       "rule 'e' (line 1, stall): established = true is the shim's");
	expect_refused(
	    "rules = ( { name = \"h\"; action = \"refuse\"; match = { host = \"a.test\"; }; } );",
	    "rule 'h' (line 1, refuse): match.host needs the shim's resolver hooks");
	char many[2048] = "rules = (";
	for (int i = 0; i < 9; i++)
		snprintf(
		    many + strlen(many), sizeof(many) - strlen(many),
		    "%s{ name = \"r%d\"; action = \"drop\"; match = { to = \"127.%d.0.0/16\"; }; "
		    "}, "
		    "{ name = \"w%d\"; action = \"drop\"; match = { to = \"127.0.0.0/8\"; }; }",
		    i ? ", " : "", i, i, i);
	strcat(many, " );");
	expect_refused(many, "more than 8 rules cover the same destinations");
}

/* delay keeps its numbers for the SYN timeout; latency and bandwidth go
 * to the relay, which reads theirs from the policy. */
static void test_shaping_actions(void)
{
	char err[512];
	struct fn_policy *p = fn_config_load_string(
	    "rules = ( { name = \"d\"; action = \"delay\"; delay_ms = 400; jitter_ms = 30; "
	    "match = { proto = \"tcp\"; }; },\n"
	    "  { name = \"l\"; action = \"latency\"; latency_ms = 5; },\n"
	    "  { name = \"b\"; action = \"bandwidth\"; rate = 1000; },\n"
	    "  { name = \"s\"; action = \"stall\"; after_bytes = 10; },\n"
	    "  { name = \"s0\"; action = \"stall\"; } );",
	    "t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fnb_plan pl;
	CU_ASSERT_FATAL(fnb_plan_build(&pl, p, err, sizeof(err)));
	CU_ASSERT_EQUAL(pl.rules[0].action, FNB_DELAY);
	CU_ASSERT_EQUAL(pl.rules[0].delay_ms, 400);
	CU_ASSERT_EQUAL(pl.rules[0].jitter_ms, 30);
	CU_ASSERT_EQUAL(pl.rules[0].protos, FNB_TCP);
	CU_ASSERT_EQUAL(pl.rules[1].action, FNB_RELAY);
	CU_ASSERT_EQUAL(pl.rules[2].action, FNB_RELAY);
	CU_ASSERT_EQUAL(pl.rules[3].action, FNB_RELAY); /* a stall after bytes: the relay's */
	CU_ASSERT_EQUAL(pl.rules[4].action, FNB_STALL); /* at connect: the endpoint's */
	fnb_plan_free(&pl);
	fn_policy_free(p);
}

/* HTTP rules go to the relay (and on to the pump) only in a run that has
 * the pump; their conditions count requests, judged by the pump's shim,
 * never the programs' connects. dns rules are refused by name. */
static void test_http_rules(void)
{
	const char *text = "rules = ( { name = \"r\"; action = \"respond\"; status = 503; "
			   "first = 2; match = { to = \"127.0.0.1/32\"; }; } );";
	fnb_http_pump = false;
	expect_refused(text, "rule 'r' (line 1, respond): HTTP rules reach a run of the "
			     "kernel-side backend only when");
	expect_refused("rules = ( { name = \"nx\"; action = \"dns\"; error = \"nxdomain\"; "
		       "match = { host = \"*.test\"; }; } );",
		       "rule 'nx' (line 1, dns): dns rules act on the shim's resolver hooks");
	char err[512];
	struct fn_policy *p = fn_config_load_string(text, "t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fnb_plan pl;
	fnb_http_pump = true;
	bool ok = fnb_plan_build(&pl, p, err, sizeof(err));
	fnb_http_pump = false;
	CU_ASSERT_FATAL(ok);
	CU_ASSERT_EQUAL(pl.rules[0].action, FNB_HTTP);
	CU_ASSERT_FALSE(pl.rules[0].has_cond);
	fnb_plan_free(&pl);
	fn_policy_free(p);
}

/* Conditions carried as the programs judge them: probability as a 53-bit
 * threshold, rounded up, so that a draw passes exactly when core's
 * fn_random(key, n) < probability does. */
static void test_conditions(void)
{
	char err[512];
	struct fn_policy *p = fn_config_load_string(
	    "rules = ( { name = \"c\"; action = \"refuse\"; probability = 0.5; every = 3; "
	    "start_ms = 10; },\n  { name = \"n\"; action = \"refuse\"; } );",
	    "t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fnb_plan pl;
	CU_ASSERT_FATAL(fnb_plan_build(&pl, p, err, sizeof(err)));
	CU_ASSERT_TRUE(pl.rules[0].has_cond);
	CU_ASSERT_FALSE(pl.rules[0].prob_all);
	CU_ASSERT_EQUAL(pl.rules[0].prob, 1ull << 52);
	CU_ASSERT_EQUAL(pl.rules[0].every, 3);
	CU_ASSERT_EQUAL(pl.rules[0].start_ns, 10000000);
	CU_ASSERT_EQUAL(pl.rules[0].for_ns, -1);
	CU_ASSERT_EQUAL(pl.rules[0].key, fn_random_base(fn_rule_key(&p->rules[0])));
	CU_ASSERT_FALSE(pl.rules[1].has_cond);
	CU_ASSERT_TRUE(pl.rules[1].prob_all);
	for (uint64_t n = 1; n < 2000; n++) { /* the programs' test, against core's draw */
		uint64_t x = pl.rules[0].key + n;
		x += 0x9e3779b97f4a7c15ull;
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
		x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
		x ^= x >> 31;
		CU_ASSERT_EQUAL((x >> 11) < pl.rules[0].prob,
				fn_random(fn_rule_key(&p->rules[0]), n) < 0.5);
	}
	fnb_plan_free(&pl);
	fn_policy_free(p);
}

void add_compile_tests(void)
{
	CU_pSuite s = CU_add_suite("bpfplan", NULL, NULL);
	CU_add_test(s, "the backend's maps decide as the shim's matcher", test_same_as_matcher);
	CU_add_test(s, "what the backend cannot carry out is refused, named", test_refusals);
	CU_add_test(s, "delay, latency and bandwidth become the hold and the relay",
		    test_shaping_actions);
	CU_add_test(s, "conditions: the programs' draws are core's", test_conditions);
	CU_add_test(s, "HTTP rules go to the pump, dns rules are refused", test_http_rules);
}
