/* test_actions.c - the fault catalogue's keys and conditions: each action's
 * numbers, the messages for misplaced or missing ones, and the decisions of
 * probability, first, every, after and the time window, seed included. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/chance.h"
#include "core/config.h"

static char err[512];

static struct fn_policy *parse(const char *text)
{
	err[0] = '\0';
	return fn_config_load_string(text, "t.conf", NULL, err, sizeof(err));
}

static const char *error_of(const char *text)
{
	fn_policy_free(parse(text));
	return err;
}

#define RULE(body) "rules = ( { name = \"a\"; " body " } );"
#define EXPECT(body, message) CU_ASSERT_STRING_EQUAL(error_of(RULE(body)), message)

static void test_params_parsed(void)
{
	struct fn_policy *p = parse(
	    "rules = (\n"
	    " { name = \"l\"; action = \"latency\"; latency_ms = 50; jitter_ms = 5; },\n"
	    " { name = \"b\"; action = \"bandwidth\"; rate = 65536; direction = \"down\"; },\n"
	    " { name = \"d\"; action = \"drip\"; bytes = 1; every_ms = 1000; },\n"
	    " { name = \"s\"; action = \"stall\"; after_bytes = 100; },\n"
	    " { name = \"r\"; action = \"reset\"; after_ms = 20; direction = \"up\"; },\n"
	    " { name = \"c\"; action = \"close\"; after_bytes = 0; },\n"
	    " { name = \"u\"; action = \"unreachable\"; error = \"net\"; },\n"
	    " { name = \"k\"; action = \"blackhole\"; after_ms = 9; },\n"
	    " { name = \"y\"; action = \"delay\"; delay_ms = 300; match = { proto = \"udp\"; }; "
	    "probability = 0.25; first = 3; every = 2; after = 1; start_ms = 10; for_ms = 20; }\n"
	    ");");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_STRING_EQUAL(err, "");
	const struct fn_rule *r = p->rules;
	CU_ASSERT(r[0].par.latency_ms == 50 && r[0].par.jitter_ms == 5);
	CU_ASSERT(r[0].par.direction == FN_DIR_BOTH && r[0].protos == FN_PROTO_TCP);
	CU_ASSERT(r[1].par.rate == 65536 && r[1].par.direction == FN_DIR_DOWN);
	CU_ASSERT(r[2].par.bytes == 1 && r[2].par.every_ms == 1000);
	CU_ASSERT(r[3].par.after_bytes == 100 && r[3].par.after_ms == -1 &&
		  r[3].par.direction == FN_DIR_DOWN);
	CU_ASSERT(fn_rule_relayed(&r[3]) && fn_rule_relayed(&r[4]) && fn_rule_relayed(&r[5]));
	CU_ASSERT(r[4].par.after_ms == 20 && r[4].par.direction == FN_DIR_UP);
	CU_ASSERT(r[5].par.after_bytes == 0);
	CU_ASSERT(r[6].par.net_unreachable && !fn_rule_relayed(&r[6]));
	CU_ASSERT(fn_rule_relayed(&r[7]) && r[7].protos == FN_PROTO_TCP &&
		  r[7].par.direction == FN_DIR_BOTH);
	r++; /* the rest as before the blackhole */
	CU_ASSERT(r[7].protos == FN_PROTO_UDP && r[7].has_cond && r[7].cond.probability == 0.25);
	CU_ASSERT(r[7].cond.first == 3 && r[7].cond.every == 2 && r[7].cond.after == 1);
	CU_ASSERT(r[7].cond.start_ms == 10 && r[7].cond.for_ms == 20);
	CU_ASSERT(!r[0].has_cond);
	fn_policy_free(p);
}

static void test_param_errors(void)
{
	EXPECT("action = \"latency\";", "t.conf:1: rule 'a': action latency needs latency_ms (more "
					"than 0)");
	EXPECT("action = \"drip\"; bytes = 1;",
	       "t.conf:1: rule 'a': action drip needs bytes and every_ms (both more than 0)");
	EXPECT("action = \"close\";", "t.conf:1: rule 'a': action close needs after_bytes");
	EXPECT("action = \"refuse\"; latency_ms = 5;",
	       "t.conf:1: rule 'a': latency_ms does not apply to action refuse");
	EXPECT("action = \"latency\"; latency_ms = \"5\";",
	       "t.conf:1: rule 'a': latency_ms must be a whole number");
	EXPECT("action = \"latency\"; latency_ms = -5;",
	       "t.conf:1: rule 'a': latency_ms -5 is not from 0 to 86400000");
	EXPECT("action = \"stall\"; after_bytes = 1; after_ms = 2;",
	       "t.conf:1: rule 'a': action stall takes after_bytes or after_ms, not both");
	EXPECT("action = \"latency\"; latency_ms = 5; direction = \"sideways\";",
	       "t.conf:1: rule 'a': direction 'sideways' must be \"up\", \"down\" or \"both\"");
	EXPECT("action = \"unreachable\"; error = \"route\";",
	       "t.conf:1: rule 'a': error 'route' must be \"host\" (EHOSTUNREACH) or \"net\" "
	       "(ENETUNREACH)");
	EXPECT("action = \"drop\"; probability = 1.5;",
	       "t.conf:1: rule 'a': probability 1.5 is not from 0 to 1");
	EXPECT("action = \"drop\"; probability = \"half\";",
	       "t.conf:1: rule 'a': probability must be a number from 0 to 1");
	EXPECT("action = \"refuse\"; match = { proto = \"udp\"; };",
	       "t.conf:1: rule 'a': action refuse applies to TCP only, not proto \"udp\"");
	EXPECT("action = \"blackhole\"; after_ms = 5; match = { proto = \"udp\"; };",
	       "t.conf:1: rule 'a': action blackhole applies to TCP only, not proto \"udp\"");
	EXPECT("action = \"drop\"; chance = 0.5;", "t.conf:1: rule 'a': unknown key 'chance'");
	/* libconfig keeps 32 bits of an integer without L: never silently. */
	CU_ASSERT_STRING_EQUAL(
	    error_of("# 4294967296 in a comment is fine\nrules = (\n { name = \"a\"; action = "
		     "\"bandwidth\";\n   rate = 4294967296; } );"),
	    "t.conf:4: 4294967296 does not fit in 32 bits: libconfig would truncate it; write "
	    "4294967296L");
	CU_ASSERT_STRING_EQUAL(error_of(RULE("action = \"bandwidth\"; rate = 0x100000000;")),
			       "t.conf:1: 0x100000000 does not fit in 32 bits: libconfig would "
			       "truncate it; write 0x100000000L");
	CU_ASSERT_STRING_EQUAL(
	    error_of(RULE("action = \"bandwidth\"; rate = 4294967296L; "
			  "match = { to = \"127.72.9.1/32\"; port = 2147483647; };")),
	    "t.conf:1: rule 'a': match.port 2147483647 is not from 1 to 65535");
	struct fn_policy *p = parse(RULE("action = \"bandwidth\"; rate = 4294967296L;"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->rules[0].par.rate, 4294967296ull);
	fn_policy_free(p);
	CU_ASSERT_STRING_EQUAL(error_of("/* 99999999999 */ rules = ( { name = \"x99999999999\"; "
					"action = \"drop\"; probability = 0.99999999999; } );"),
			       "");
}

/* Decisions of rule r over n matches, as a string of 0 and 1. */
static void decisions(const struct fn_rule *r, int n, char *out)
{
	for (int i = 0; i < n; i++)
		out[i] = fn_cond_pass(r) ? '1' : '0';
	out[n] = '\0';
}

static struct fn_policy *one_rule(const char *cond)
{
	char text[256];
	snprintf(text, sizeof(text), "rules = ( { name = \"c\"; action = \"drop\"; %s } );", cond);
	struct fn_policy *p = parse(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

static void test_counting_conditions(void)
{
	char got[16];
	struct fn_policy *p = one_rule("first = 3;");
	decisions(&p->rules[0], 6, got);
	CU_ASSERT_STRING_EQUAL(got, "111000");
	fn_policy_free(p);
	p = one_rule("after = 2;");
	decisions(&p->rules[0], 5, got);
	CU_ASSERT_STRING_EQUAL(got, "00111");
	fn_policy_free(p);
	p = one_rule("every = 3;");
	decisions(&p->rules[0], 7, got);
	CU_ASSERT_STRING_EQUAL(got, "0010010");
	fn_policy_free(p);
	/* Re-enabling starts the count again. */
	p = one_rule("first = 1;");
	decisions(&p->rules[0], 2, got);
	fn_rulestat_restart(p->rules[0].stat);
	decisions(&p->rules[0], 2, got + 2);
	CU_ASSERT_STRING_EQUAL(got, "1010");
	fn_policy_free(p);
}

static void test_time_window(void)
{
	char got[4];
	struct fn_policy *p = one_rule("start_ms = 100; for_ms = 200;");
	decisions(&p->rules[0], 1, got);
	CU_ASSERT_STRING_EQUAL(got, "0"); /* before the window */
	usleep(150 * 1000);
	decisions(&p->rules[0], 1, got);
	CU_ASSERT_STRING_EQUAL(got, "1"); /* inside it */
	usleep(250 * 1000);
	decisions(&p->rules[0], 1, got);
	CU_ASSERT_STRING_EQUAL(got, "0"); /* after it */
	fn_policy_free(p);
}

static void test_probability_and_seed(void)
{
	char a[201], b[201], c[201];
	setenv("FAULTNET_SEED", "42", 1);
	CU_ASSERT_PTR_NULL(fn_seed_init());
	struct fn_policy *p = one_rule("probability = 0.3;");
	decisions(&p->rules[0], 200, a);
	fn_rulestat_restart(p->rules[0].stat);
	decisions(&p->rules[0], 200, b);
	CU_ASSERT_STRING_EQUAL(a, b); /* same seed, same sequence */
	int ones = 0;
	for (int i = 0; i < 200; i++)
		ones += a[i] == '1';
	CU_ASSERT(ones > 30 && ones < 90); /* about 60 */
	setenv("FAULTNET_SEED", "43", 1);
	CU_ASSERT_PTR_NULL(fn_seed_init());
	fn_rulestat_restart(p->rules[0].stat);
	decisions(&p->rules[0], 200, c);
	CU_ASSERT_STRING_NOT_EQUAL(a, c);
	fn_policy_free(p);
	setenv("FAULTNET_SEED", "-1", 1);
	CU_ASSERT_STRING_EQUAL(
	    fn_seed_init(), "FAULTNET_SEED: must be a whole number from 0 to 18446744073709551615");
	unsetenv("FAULTNET_SEED");
}

void add_action_tests(void)
{
	CU_pSuite s = CU_add_suite("actions and conditions", NULL, NULL);
	CU_add_test(s, "each action's numbers", test_params_parsed);
	CU_add_test(s, "missing, misplaced and bad numbers", test_param_errors);
	CU_add_test(s, "first, after, every, re-enable", test_counting_conditions);
	CU_add_test(s, "start_ms and for_ms", test_time_window);
	CU_add_test(s, "probability with FAULTNET_SEED", test_probability_and_seed);
}
