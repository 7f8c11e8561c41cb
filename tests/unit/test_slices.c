/* test_slices.c - a large rules list parsed a slice of rules at a time
 * (core/slices.c, parse_cut in core/config.c) gives the policy, the lines
 * and the errors the whole file gives; what the cutter cannot be sure of
 * makes it decline. */
#include <CUnit/CUnit.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/slices.h"

/* Comments, strings holding the list's own punctuation, a rule over
 * several lines, zones before and a setting after the list, CRLF. */
static const char *const texts[] = {
    "zone = \"1a\";\n"
    "zones = ( { name = \"1a\"; cidrs = [ \"127.10.1.0/24\" ]; } );\n"
    "# rules = ( { name = \"not\"; } )\n"
    "rules = (\n"
    "  { name = \"a\"; action = \"drop\"; match = { from_zone = \"1a\"; }; }, // one ) }\n"
    "  /* a comment with ( { , and\n   a newline */\n"
    "  { name = \"b\"; action = \"respond\"; status = 500; body = \"b,)\\\"}# /* (\";\n"
    "    match = { to = \"127.0.0.2/32\"; port = \"80,443\"; }; },\n"
    "  { name = \"c\";\n"
    "    action = \"latency\"; latency_ms = 5;\n"
    "    enabled = false; }\n"
    ");\n",
    "rules: ( {name=\"x\";action=\"blackhole\";},{name=\"y\";action=\"stall\";},\r\n"
    "{name=\"z\";action=\"reset\";match={to=[\"127.1.0.0/16\",\"::1/128\"];};} );\r\n",
    "rules = ( { name = \"h\"; action = \"respond\"; status = 503; match = { to = "
    "\"127.0.0.1/32\"; path = \"/a(b)\"; }; },\n"
    "  { name = \"d\"; action = \"delay\"; delay_ms = 10; probability = 0.5; } );\n",
};

static void same_rule(const struct fn_rule *a, const struct fn_rule *b)
{
	CU_ASSERT_STRING_EQUAL(a->name, b->name);
	CU_ASSERT_EQUAL(a->line, b->line);
	CU_ASSERT_EQUAL(a->action, b->action);
	CU_ASSERT_EQUAL(a->enabled, b->enabled);
	CU_ASSERT_EQUAL(a->protos, b->protos);
	CU_ASSERT_EQUAL(a->from_zone, b->from_zone);
	CU_ASSERT_EQUAL(a->to_zone, b->to_zone);
	CU_ASSERT_EQUAL(a->established, b->established);
	CU_ASSERT_EQUAL(a->has_cond, b->has_cond);
	CU_ASSERT_EQUAL_FATAL(a->nto, b->nto);
	CU_ASSERT_EQUAL_FATAL(a->nports, b->nports);
	CU_ASSERT(!a->nto || memcmp(a->to, b->to, a->nto * sizeof(*a->to)) == 0);
	CU_ASSERT(!a->nports || memcmp(a->ports, b->ports, a->nports * sizeof(*a->ports)) == 0);
	CU_ASSERT(memcmp(&a->par, &b->par, sizeof(a->par)) == 0);
	CU_ASSERT(memcmp(&a->cond, &b->cond, sizeof(a->cond)) == 0);
	CU_ASSERT_EQUAL(!a->http, !b->http);
	CU_ASSERT_EQUAL(!a->dns, !b->dns);
	CU_ASSERT_EQUAL(!a->host, !b->host);
	if (a->host && b->host)
		CU_ASSERT_STRING_EQUAL(a->host, b->host);
}

/* Loads text whole and cut every k rules (k = 1, 2, 3): the same policy or
 * the same error. Returns the slices the cut loads parsed. */
static size_t same_both_ways(const char *text)
{
	char e1[512] = "", e2[512] = "";
	fn_config_slice_rules(1000000);
	fn_config_slices = 0;
	struct fn_policy *whole = fn_config_load_string(text, "t.conf", NULL, e1, sizeof(e1));
	CU_ASSERT_EQUAL(fn_config_slices, 0);
	size_t cuts = 0;
	for (size_t k = 1; k <= 3; k++) {
		fn_config_slice_rules(k);
		fn_config_slices = 0;
		e2[0] = '\0';
		struct fn_policy *cut = fn_config_load_string(text, "t.conf", NULL, e2, sizeof(e2));
		cuts += fn_config_slices;
		CU_ASSERT_EQUAL(!whole, !cut);
		CU_ASSERT_STRING_EQUAL(e1, e2);
		if (whole && cut) {
			CU_ASSERT_EQUAL_FATAL(whole->nrules, cut->nrules);
			CU_ASSERT_EQUAL(whole->nzones, cut->nzones);
			CU_ASSERT_EQUAL(whole->self_zone, cut->self_zone);
			for (size_t i = 0; i < whole->nrules; i++)
				same_rule(&whole->rules[i], &cut->rules[i]);
		}
		fn_policy_free(cut);
	}
	fn_policy_free(whole);
	fn_config_slice_rules(1000);
	return cuts;
}

static void test_same_policy(void)
{
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char err[512] = "";
		struct fn_policy *p =
		    fn_config_load_string(texts[i], "t.conf", NULL, err, sizeof(err));
		CU_ASSERT_STRING_EQUAL(err, "");
		fn_policy_free(p);
		CU_ASSERT(same_both_ways(texts[i]) > 0); /* it was cut */
	}
}

/* Every policy file shipped: the cutter finds each rule the parser finds
 * (most have one rule, which is never cut; see same_both_ways for that). */
static void test_shipped_policies(void)
{
	glob_t g;
	CU_ASSERT_EQUAL_FATAL(glob("policies/*.conf", 0, NULL, &g), 0);
	CU_ASSERT(g.gl_pathc >= 10);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		FILE *f = fopen(g.gl_pathv[i], "r");
		char *text = calloc(1, 1 << 20), err[512];
		size_t n = f && text ? fread(text, 1, (1 << 20) - 1, f) : 0;
		if (f)
			fclose(f);
		CU_ASSERT_FATAL(n > 0);
		struct fn_policy *p =
		    fn_config_load_string(text, g.gl_pathv[i], NULL, err, sizeof(err));
		struct fn_slices s;
		CU_ASSERT_FATAL(p && fn_slices_find(text, &s));
		CU_ASSERT_EQUAL(s.n, p->nrules);
		CU_ASSERT_EQUAL(s.line[0], p->rules[0].line - (text[s.open + 1] != '\n' ? 0 : 1));
		fn_slices_free(&s);
		fn_policy_free(p);
		same_both_ways(text);
		free(text);
	}
	globfree(&g);
}

static void test_where(void)
{
	struct fn_slices s;
	CU_ASSERT_FATAL(fn_slices_find(texts[0], &s));
	CU_ASSERT_EQUAL(s.n, 3);
	CU_ASSERT_EQUAL(s.open_line, 4);
	CU_ASSERT_EQUAL(s.line[0], 4);
	CU_ASSERT_EQUAL(s.line[1], 5);
	CU_ASSERT_EQUAL(s.line[2], 9);
	CU_ASSERT_EQUAL(texts[0][s.open], '(');
	CU_ASSERT_EQUAL(texts[0][s.close], ')');
	CU_ASSERT_EQUAL(texts[0][s.at[1] - 1], ',');
	CU_ASSERT_EQUAL(texts[0][s.at[3] - 1], ')');
	fn_slices_free(&s);
}

/* What the cutter cannot be sure of: it declines, and the whole file is
 * parsed (same_both_ways then sees no slice). */
static void test_declines(void)
{
	static const char *const no[] = {
	    "@include \"x.conf\"\nrules = ( { name = \"a\"; action = \"drop\"; } );",
	    "rules = ( { name = \"a\"; action = \"drop\"; }, );",
	    "rules = ( { name = \"a\"; action = \"drop\"; }, \"b\" );",
	    "rules = ( { name = \"a\"; action = \"drop\"; } );\nrules = ( );",
	    "rules = [ ];",
	    "x = { rules = ( { name = \"a\"; action = \"drop\"; } ); };",
	    "rules = ( { name = \"a\"; action = \"drop\"; } /* never ends",
	    "rules = ( { name = \"a\"; action = \"drop; } );",
	    "rules = ( { name = \"a\"; action = \"drop\"; }",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		struct fn_slices s;
		CU_ASSERT_FALSE(fn_slices_find(no[i], &s));
		CU_ASSERT_EQUAL(same_both_ways(no[i]), 0);
	}
}

/* An error anywhere: the message the whole file gives, whichever slice
 * holds it, and whichever of two errors libconfig meets first. */
static void test_errors(void)
{
	static const char *const bad[] = {
	    "rules = ( { name = \"a\"; action = \"drop\"; },\n { name = \"b\"; action = \"x\"; } "
	    ");",
	    "rules = ( { name = \"a\"; action = \"drop\"; },\n { name = \"b\"; action = \"drop\"; "
	    "},\n"
	    " { name = \"a\"; action = \"drop\"; } );",
	    "zones = 5;\nrules = ( { name = \"a\"; action = \"drop\"; },\n { name = \"b\"; = } );",
	    "rules = ( { name = \"a\"; action = \"drop\"; },\n { name = \"b\"; action = \"drop\"; "
	    "bogus = 1; } );\nzone = 1a;",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[512] = "";
		fn_config_slice_rules(1);
		struct fn_policy *p =
		    fn_config_load_string(bad[i], "t.conf", NULL, err, sizeof(err));
		CU_ASSERT_PTR_NULL(p);
		CU_ASSERT(strncmp(err, "t.conf:", 7) == 0);
		fn_policy_free(p);
		same_both_ways(bad[i]);
	}
	fn_config_slice_rules(1000);
}

/* 5,000 rules at the default 1,000 a slice: five slices, every rule where
 * the file has it. */
static void test_large(void)
{
	size_t n = 5000, cap = n * 100 + 64, at = 0;
	char *text = malloc(cap), err[512] = "";
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	at += (size_t)snprintf(text, cap, "# a large list\nrules = (\n");
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(text + at, cap - at,
				       "{ name = \"r%zu\"; action = \"refuse\"; match = { to = "
				       "\"127.9.%zu.%zu/32\"; }; }%s\n",
				       i, i / 256, i % 256, i + 1 < n ? "," : "");
	snprintf(text + at, cap - at, ");\n");
	fn_config_slices = 0;
	fn_config_scans = 0;
	struct fn_policy *p = fn_config_load_string(text, "big.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(fn_config_slices, 5);
	CU_ASSERT_EQUAL(fn_config_scans, 1);
	CU_ASSERT_EQUAL_FATAL(p->nrules, n);
	for (size_t i = 0; i < n; i += 999) {
		char name[32];
		snprintf(name, sizeof(name), "r%zu", i);
		CU_ASSERT_STRING_EQUAL(p->rules[i].name, name);
		CU_ASSERT_EQUAL(p->rules[i].line, (int)i + 3);
		CU_ASSERT_EQUAL(p->rules[i].to[0].ip[3], i % 256);
	}
	fn_policy_free(p);
	/* A duplicate name in the last slice names the first one's line. */
	memcpy(strstr(text, "\"r4999\""), "\"r0\"   ", 7);
	CU_ASSERT_PTR_NULL(fn_config_load_string(text, "big.conf", NULL, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err,
			       "big.conf:5002: duplicate rule name 'r0' (first defined at line 3)");
	free(text);
}

/* A text too short to hold two slices of rules is never scanned: the
 * shim's own policy at start and faultctl's replays pay nothing for the
 * cutter. */
static void test_short_not_scanned(void)
{
	char err[512] = "";
	fn_config_scans = 0;
	struct fn_policy *p = fn_config_load_string(texts[0], "t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(p);
	fn_policy_free(p);
	CU_ASSERT_EQUAL(fn_config_scans, 0);
	fn_config_slice_rules(1);
	p = fn_config_load_string(texts[0], "t.conf", NULL, err, sizeof(err));
	fn_policy_free(p);
	CU_ASSERT_EQUAL(fn_config_scans, 1);
	fn_config_slice_rules(1000);
}

void add_slices_tests(void)
{
	CU_pSuite s = CU_add_suite("config slices", NULL, NULL);
	CU_add_test(s, "cut at every rule: the same policy", test_same_policy);
	CU_add_test(s, "the shipped policies, cut and whole", test_shipped_policies);
	CU_add_test(s, "where each rule starts", test_where);
	CU_add_test(s, "what the cutter declines", test_declines);
	CU_add_test(s, "errors say what the whole file says", test_errors);
	CU_add_test(s, "5,000 rules in five slices", test_large);
	CU_add_test(s, "a short text is not scanned", test_short_not_scanned);
}
