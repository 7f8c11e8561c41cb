/* test_hostidx.c - the dns rules' name index against the scan in file
 * order it replaces: random policies of exact names, "*.suffix" patterns
 * and host-less dns rules (disabled ones, other zones', rules whose
 * condition always says no, non-dns rules with a host) over a few labels,
 * so that many patterns match a name; random names of those labels in any
 * case, with or without a trailing dot. fn_dns_decide and fn_dns_taken
 * must give the scan's rule and seen rule; and after rules are added and
 * removed live (core/edit.c), the rebuilt index must still agree. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/dns.h"
#include "core/edit.h"
#include "core/hostidx.h"
#include "core/rules.h"
#include "preload/dns/names.h"
#include "rnd.h"

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
	return test_rnd(&state, n);
}

static const char *const labels[] = {"a",    "b",   "api",  "example",
				     "test", "x-1", "_srv", "eu-west-1-endpoint"};

/* 1 to 4 labels, lower case. */
static void random_host(char *out, size_t len)
{
	out[0] = '\0';
	for (uint32_t k = 0, n = 1 + rnd(4); k < n; k++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", k ? "." : "",
			 labels[rnd(sizeof(labels) / sizeof(labels[0]))]);
}

static void random_rule(struct fn_rule *r, size_t i)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "r%zu", i);
	r->action = rnd(8) ? FN_ACT_DNS : FN_ACT_REFUSE;
	r->enabled = rnd(5) != 0;
	r->protos = FN_PROTO_ANY;
	r->from_zone = rnd(6) ? -1 : (int)rnd(2);
	r->to_zone = -1;
	r->stat = fn_rulestat_new();
	r->cond.probability = 1;
	r->cond.start_ms = r->cond.for_ms = -1;
	if (rnd(6) == 0) { /* never applies: the lookup goes on past it */
		r->has_cond = true;
		r->cond.probability = 0;
	}
	char host[128];
	random_host(host, sizeof(host));
	uint32_t kind = rnd(10);
	if (kind < 8) {
		char text[140];
		snprintf(text, sizeof(text), "%s%s", kind < 4 ? "*." : "", host);
		const char *why;
		r->host = fn_host_pattern(text, &why);
	}
}

static struct fn_policy *random_policy(size_t n)
{
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = (int)rnd(2);
	p->nzones = 2;
	p->zones = calloc(2, sizeof(*p->zones));
	snprintf(p->zones[0].name, FN_NAME_MAX, "z0");
	snprintf(p->zones[1].name, FN_NAME_MAX, "z1");
	p->rules = calloc(n, sizeof(*p->rules));
	p->nrules = n;
	for (size_t i = 0; i < n; i++)
		random_rule(&p->rules[i], i);
	fn_policy_finish(p);
	return p;
}

/* A name of the labels, in random case, maybe with a trailing dot. */
static void random_name(char *out, size_t len)
{
	random_host(out, len - 2);
	if (rnd(3) == 0)
		snprintf(out, len, "%s.%s", labels[rnd(8)], strcpy((char[128]){0}, out));
	for (char *c = out; *c; c++)
		if (rnd(3) == 0)
			*c = (char)toupper((unsigned char)*c);
	if (rnd(4) == 0)
		strcat(out, ".");
}

/* The index and the scan agree on names of p; returns the disagreements. */
static int compare(const struct fn_policy *p, int names)
{
	int bad = 0;
	for (int k = 0; k < names; k++) {
		char name[300];
		random_name(name, sizeof(name));
		const struct fn_rule *s1 = NULL, *s2;
		const struct fn_rule *want = fn_dns_scan(p, name, &s1, true);
		const struct fn_rule *got = fn_dns_decide(p, name, &s2);
		bool taken = fn_dns_taken(p, name);
		/* The candidates the resolver hook keeps for a name it looks
		 * up again (preload/dns/resolve.c), judged as fn_dns_pick does. */
		uint32_t cand[6];
		const struct fn_rule *s3 = NULL, *kept = want;
		int nc = fn_dns_candidates(p, name, strlen(name), cand, 6);
		if (nc >= 0)
			kept = fn_dns_pick(p, cand, nc, &s3);
		else
			s3 = s1;
		if (want != got || s1 != s2 || taken != (s1 != NULL) || kept != want || s3 != s1) {
			if (bad++ < 5)
				printf("\n  %s: scan %s/%s, index %s/%s, taken %d", name,
				       want ? want->name : "-", s1 ? s1->name : "-",
				       got ? got->name : "-", s2 ? s2->name : "-", taken);
		}
	}
	return bad;
}

static void test_index_is_the_scan(void)
{
	int bad = 0;
	for (int round = 0; round < 300; round++) {
		struct fn_policy *p = random_policy(1 + rnd(round < 200 ? 12 : 200));
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->hosts);
		bad += compare(p, 200);
		fn_policy_free(p);
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* Live adds (first or last) and removals rebuild the index with the
 * rules' new places; enable and disable keep it. */
static void test_index_after_edits(void)
{
	int bad = 0;
	for (int round = 0; round < 40; round++) {
		struct fn_policy *p = random_policy(1 + rnd(30));
		for (int e = 0; e < 20; e++) {
			char line[300], reply[256], host[128];
			struct fn_policy *q = NULL;
			uint32_t what = rnd(4);
			random_host(host, sizeof(host));
			snprintf(line, sizeof(line),
				 "%s{ name = \"e%d_%d\"; action = \"dns\";"
				 " error = \"nxdomain\"; match = { host = \"%s%s\"; }; }",
				 what == 0 ? "first " : "", round, e, rnd(2) ? "*." : "", host);
			if (what < 2)
				q = fn_edit_add(p, line, reply, sizeof(reply));
			else if (what == 2 && p->nrules)
				q = fn_edit_rm(p, p->rules[rnd((uint32_t)p->nrules)].name, reply,
					       sizeof(reply));
			else if (p->nrules) { /* a toggle: the index is shared */
				q = fn_policy_clone(p);
				struct fn_rule *r = &q->rules[rnd((uint32_t)q->nrules)];
				r->enabled = !r->enabled;
				CU_ASSERT_PTR_EQUAL(q->hosts, p->hosts);
			}
			if (!q)
				continue;
			fn_policy_free(p);
			p = q;
			bad += compare(p, 50);
		}
		fn_policy_free(p);
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* A name whose candidates are more lists than the cursor holds is
 * scanned: the same answer. */
static void test_many_suffixes(void)
{
	char name[200] = "x", pat[220];
	struct fn_policy *p = calloc(1, sizeof(*p));
	p->self_zone = -1;
	p->rules = calloc(40, sizeof(*p->rules));
	for (int i = 0; i < 40; i++) {
		struct fn_rule *r = &p->rules[p->nrules++];
		snprintf(r->name, sizeof(r->name), "s%d", i);
		r->action = FN_ACT_DNS;
		r->enabled = i == 39;
		r->from_zone = r->to_zone = -1;
		snprintf(pat, sizeof(pat), "*.l%d%s", i, i ? strchr(name, '.') : "");
		const char *why;
		r->host = fn_host_pattern(pat, &why);
		snprintf(name + 1, sizeof(name) - 1, "%s", pat + 1); /* x.l39.l38...l0 */
	}
	fn_policy_finish(p);
	const struct fn_rule *seen, *r = fn_dns_decide(p,
						       "y.l39.l38.l37.l36.l35.l34.l33.l32.l31.l30."
						       "l29.l28.l27.l26.l25.l24.l23.l22.l21.l20."
						       "l19.l18.l17.l16.l15.l14.l13.l12.l11.l10."
						       "l9.l8.l7.l6.l5.l4.l3.l2.l1.l0",
						       &seen);
	CU_ASSERT_PTR_EQUAL(r, &p->rules[39]);
	fn_policy_free(p);
}

/* ---- the resolved-name memory (preload/dns/names.c) ---------------------
 * A lookup under dns rules records the name for each address it returned;
 * when the name is already the address's newest, a lock-free test settles
 * it (a word at a time). Each name recorded must come back, newest first,
 * whatever its length and wherever it differs from the one before it. */

/* names.c counts connects per name through preload/stats/lookups.c,
 * which the unit binary links (test_lookups.c). */

struct seen_names {
	char names[4][300];
	int n;
};

static void collect(const char *name, void *arg)
{
	struct seen_names *s = arg;
	if (s->n < 4)
		snprintf(s->names[s->n++], sizeof(s->names[0]), "%s", name);
}

static struct seen_names names_of(const struct fn_endpoint *ep)
{
	struct seen_names s = {.n = 0};
	fn_names_each(ep, collect, &s);
	return s;
}

static void test_names_newest(void)
{
	int bad = 0;
	for (int round = 0; round < 3000; round++) {
		struct fn_endpoint ep = {.v4 = rnd(2) != 0};
		for (int i = 0; i < (ep.v4 ? 4 : 16); i++)
			ep.ip[i] = (uint8_t)rnd(256);
		/* A name of 1 to 40 bytes, then the same, then one that differs
		 * in one byte, or is one byte shorter or longer. */
		char a[64], b[64];
		size_t len = 1 + rnd(40);
		for (size_t i = 0; i < len; i++)
			a[i] = "abcdefgh.-0123"[rnd(14)];
		a[len] = '\0';
		memcpy(b, a, sizeof(a));
		uint32_t how = rnd(3);
		if (how == 0)
			b[rnd((uint32_t)len)] = 'Z';
		else if (how == 1 && len > 1)
			b[len - 1] = '\0';
		else
			snprintf(b + len, sizeof(b) - len, "q");
		fn_names_record(a, &ep);
		fn_names_record(a, &ep);
		struct seen_names s1 = names_of(&ep);
		fn_names_record(b, &ep);
		struct seen_names s2 = names_of(&ep);
		if (s1.n < 1 || strcmp(s1.names[0], a) != 0 || s2.n < 1 ||
		    strcmp(s2.names[0], b) != 0 ||
		    (strcmp(a, b) != 0 && (s2.n < 2 || strcmp(s2.names[1], a) != 0))) {
			if (bad++ < 5)
				printf("\n  %s then %s: newest %s, then %s", a, b,
				       s2.n ? s2.names[0] : "-", s2.n > 1 ? s2.names[1] : "-");
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* getaddrinfo's lists: each address found again as the connect
	 * path reads it (fn_endpoint_from_sockaddr), an IPv4-mapped one as
	 * the IPv4 address. */
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(80)};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6}, mapped = {.sin6_family = AF_INET6};
	inet_pton(AF_INET, "127.3.4.5", &in.sin_addr);
	inet_pton(AF_INET6, "fd00::35", &in6.sin6_addr);
	inet_pton(AF_INET6, "::ffff:127.6.7.8", &mapped.sin6_addr);
	struct addrinfo a3 = {.ai_addr = (struct sockaddr *)&mapped, .ai_addrlen = sizeof(mapped)};
	struct addrinfo a2 = {
	    .ai_addr = (struct sockaddr *)&in6, .ai_addrlen = sizeof(in6), .ai_next = &a3};
	struct addrinfo a1 = {
	    .ai_addr = (struct sockaddr *)&in, .ai_addrlen = sizeof(in), .ai_next = &a2};
	fn_names_record_ai("list.example.test", &a1);
	const char *as[] = {"127.3.4.5", "fd00::35", "127.6.7.8"};
	for (int i = 0; i < 3; i++) {
		struct fn_endpoint ep;
		struct sockaddr_storage ss = {0};
		if (strchr(as[i], ':')) {
			struct sockaddr_in6 *x = (struct sockaddr_in6 *)&ss;
			x->sin6_family = AF_INET6;
			inet_pton(AF_INET6, as[i], &x->sin6_addr);
		} else {
			struct sockaddr_in *x = (struct sockaddr_in *)&ss;
			x->sin_family = AF_INET;
			x->sin_port = htons(443);
			inet_pton(AF_INET, as[i], &x->sin_addr);
		}
		CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&ss, sizeof(ss)));
		struct seen_names s = names_of(&ep);
		CU_ASSERT(s.n == 1 && strcmp(s.names[0], "list.example.test") == 0);
	}
	/* An IPv4 address and the IPv6 one of the same first bytes are two. */
	struct fn_endpoint v4 = {.v4 = true, .ip = {127, 0, 0, 9}}, v6 = {.ip = {127, 0, 0, 9}};
	fn_names_record("four.test", &v4);
	fn_names_record("six.test", &v6);
	CU_ASSERT_STRING_EQUAL(names_of(&v4).names[0], "four.test");
	CU_ASSERT_STRING_EQUAL(names_of(&v6).names[0], "six.test");
}

/* The list a caller recorded last for a name is skipped while the table
 * has not changed (fn_names_record_kept); a change made meanwhile by
 * another path (here the gethostbyname family's fn_names_record) must
 * make the next record of the same list look again, and the name be the
 * newest again. */
static void test_names_kept_list(void)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(80)};
	inet_pton(AF_INET, "127.9.8.7", &in.sin_addr);
	struct addrinfo ai = {.ai_addr = (struct sockaddr *)&in, .ai_addrlen = sizeof(in)};
	struct fn_endpoint ep = {.v4 = true, .ip = {127, 9, 8, 7}};
	struct fn_names_kept k = {0};
	const char *name = "kept.example.test";
	for (int round = 0; round < 3; round++) {
		fn_names_record_kept(&k, name, strlen(name), &ai);
		fn_names_record_kept(&k, name, strlen(name), &ai); /* kept */
		CU_ASSERT(k.changes != 0 && k.n == 1);
		CU_ASSERT_STRING_EQUAL(names_of(&ep).names[0], name);
		fn_names_record("other.example.test", &ep);
		CU_ASSERT_STRING_EQUAL(names_of(&ep).names[0], "other.example.test");
		fn_names_record_kept(&k, name, strlen(name), &ai);
		struct seen_names s = names_of(&ep);
		CU_ASSERT(s.n == 2 && strcmp(s.names[0], name) == 0 &&
			  strcmp(s.names[1], "other.example.test") == 0);
	}
	/* Another list for the same name is recorded: a second address, and
	 * the first again after it. */
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, "fd00::9", &in6.sin6_addr);
	struct addrinfo ai6 = {.ai_addr = (struct sockaddr *)&in6, .ai_addrlen = sizeof(in6)};
	struct addrinfo both = ai;
	both.ai_next = &ai6;
	struct fn_endpoint ep6 = {.v4 = false};
	memcpy(ep6.ip, &in6.sin6_addr, 16);
	fn_names_record("other.example.test", &ep6);
	fn_names_record_kept(&k, name, strlen(name), &ai);
	fn_names_record_kept(&k, name, strlen(name), &both);
	CU_ASSERT_STRING_EQUAL(names_of(&ep6).names[0], name);
	fn_names_record("other.example.test", &ep6);
	fn_names_record_kept(&k, name, strlen(name), &both);
	fn_names_record_kept(&k, name, strlen(name), &both); /* kept: 2 addresses */
	CU_ASSERT(k.n == 2);
	CU_ASSERT_STRING_EQUAL(names_of(&ep6).names[0], name);
	/* Kept while the stamps' clock stands nearly still; once other
	 * lookups have moved it FN_NAMES_FRESH times, recorded again (its
	 * entries' stamps renewed: an address looked up again and again
	 * stays young), not only compared. */
	struct fn_endpoint far = {.v4 = true, .ip = {127, 9, 1, 1}};
	fn_names_record("far.example.test", &far);
	fn_names_record_kept(&k, name, strlen(name), &both);
	uint64_t at = k.clock;
	CU_ASSERT(k.changes != 0 && at == fn_names_clock);
	fn_names_record_kept(&k, name, strlen(name), &both);
	CU_ASSERT(k.clock == at); /* only compared */
	for (int i = 0; i < FN_NAMES_FRESH; i++)
		fn_names_record("far.example.test", &far); /* the clock moves, nothing changes */
	CU_ASSERT(k.changes == fn_names_changes + 1);
	fn_names_record_kept(&k, name, strlen(name), &both);
	CU_ASSERT(k.changes != 0 && k.clock == fn_names_clock && k.clock > at + FN_NAMES_FRESH);
}

void add_hostidx_tests(void)
{
	CU_pSuite s = CU_add_suite("hostidx", NULL, NULL);
	CU_add_test(s, "index_is_the_scan", test_index_is_the_scan);
	CU_add_test(s, "index_after_edits", test_index_after_edits);
	CU_add_test(s, "many_suffixes", test_many_suffixes);
	CU_add_test(s, "names_newest", test_names_newest);
	CU_add_test(s, "names_kept_list", test_names_kept_list);
}
