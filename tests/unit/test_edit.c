/* test_edit.c - live changes as pure functions (core/edit.c): what add,
 * rm, load and zone make of a policy, the replies the control protocol
 * sends, and that the policy they start from is never changed; and the
 * same changes in place, as faultctl replays a journal. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <string.h>

#include "core/config.h"
#include "core/edit.h"
#include "core/lpm.h"
#include "core/rules.h"

static struct fn_policy *base(void)
{
	char err[256];
	return fn_config_load_string("zones = ( { name = \"a\"; cidrs = [ \"127.1.0.0/16\" ]; }, "
				     "{ name = \"b\"; cidrs = [ \"127.2.0.0/16\" ]; } );\n"
				     "rules = ( { name = \"one\"; action = \"refuse\"; match = { "
				     "to = \"127.3.0.1\"; }; } );",
				     "t.conf", NULL, err, sizeof(err));
}

static void test_add_rm(void)
{
	char reply[1200];
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_policy *q =
	    fn_edit_add(p, "first { name = \"two\"; action = \"drop\"; }", reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_STRING_EQUAL(reply, "ok added two");
	CU_ASSERT_EQUAL(q->nrules, 2);
	CU_ASSERT_STRING_EQUAL(q->rules[0].name, "two");
	CU_ASSERT_EQUAL(p->nrules, 1); /* the base is untouched */
	CU_ASSERT_PTR_NULL(
	    fn_edit_add(q, "{ name = \"two\"; action = \"drop\"; }", reply, sizeof(reply)));
	CU_ASSERT_STRING_EQUAL(reply, "error a rule named 'two' exists already");
	CU_ASSERT_PTR_NULL(fn_edit_add(q,
				       "{ name = \"x\"; action = \"drop\"; }, "
				       "{ name = \"y\"; action = \"drop\"; }",
				       reply, sizeof(reply)));
	CU_ASSERT_STRING_EQUAL(reply, "error add takes exactly one rule and nothing else");
	struct fn_policy *r = fn_edit_rm(q, "one", reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(reply, "ok removed one");
	CU_ASSERT_EQUAL(r->nrules, 1);
	CU_ASSERT_PTR_NULL(fn_edit_rm(r, "one", reply, sizeof(reply)));
	CU_ASSERT_STRING_EQUAL(reply, "error no rule named 'one'");
	fn_policy_free(r);
	fn_policy_free(q);
	fn_policy_free(p);
}

static void test_load_zone(void)
{
	char reply[1200];
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_policy *q = fn_edit_load(
	    p, "rules = ( { name = \"z\"; action = \"drop\"; match = { from_zone = \"b\"; }; } );",
	    reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_STRING_EQUAL(reply, "ok loaded 1 rules");
	CU_ASSERT_EQUAL(q->nzones, 2); /* the zones come from the base */
	CU_ASSERT_PTR_NULL(fn_edit_load(q, "rules = ( { name = \"z\"; } );", reply, sizeof(reply)));
	CU_ASSERT_EQUAL(strncmp(reply, "error ", 6), 0);
	struct fn_policy *r = fn_edit_zone(q, "b", reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(reply, "ok zone b");
	CU_ASSERT_EQUAL(r->self_zone, 1);
	CU_ASSERT_EQUAL(q->self_zone, -1);
	CU_ASSERT_PTR_NULL(fn_edit_zone(r, "c", reply, sizeof(reply)));
	CU_ASSERT_STRING_EQUAL(reply, "error zone 'c' is not defined in this process's zones");
	struct fn_policy *e = fn_edit_add(NULL, "{ name = \"n\"; action = \"drop\"; }", reply,
					  sizeof(reply)); /* no policy yet */
	CU_ASSERT_PTR_NOT_NULL(e);
	CU_ASSERT_STRING_EQUAL(reply, "ok added n");
	fn_policy_free(e);
	fn_policy_free(r);
	fn_policy_free(q);
	fn_policy_free(p);
}

/* A change line as the journal holds it: the verb picks the edit, enable
 * and disable name the rule they switched, and every refusal is a reply. */
static void test_line(void)
{
	char reply[1200], line[200];
	int rule;
	uint64_t at;
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	strcpy(line, "disable one");
	struct fn_policy *q = fn_edit_line(p, line, &rule, &at, reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_STRING_EQUAL(reply, "ok one disabled");
	CU_ASSERT(rule == 0 && at == 0 && !q->rules[0].enabled && p->rules[0].enabled);
	strcpy(line, "enable one since=1");
	struct fn_policy *r = fn_edit_line(q, line, &rule, &at, reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(reply, "ok one enabled");
	CU_ASSERT(rule == 0 && at != 0 && r->rules[0].enabled && !q->rules[0].enabled);
	static const char *const refused[][2] = {
	    {"enable two", "error no rule named 'two'"},
	    {"rm", "error rm needs an argument"},
	    {"rm ", "error rm needs an argument"},
	    {"frob one", "error unknown verb 'frob'"},
	    {"7 refused", "error unknown verb '7'"},
	    {"zone c", "error zone 'c' is not defined in this process's zones"}};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		strcpy(line, refused[i][0]);
		CU_ASSERT_PTR_NULL(fn_edit_line(r, line, &rule, &at, reply, sizeof(reply)));
		CU_ASSERT_STRING_EQUAL(reply, refused[i][1]);
		CU_ASSERT_EQUAL(rule, -1);
	}
	strcpy(line, "add { name = \"two\"; action = \"drop\"; }");
	struct fn_policy *s = fn_edit_line(r, line, &rule, &at, reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL(s);
	CU_ASSERT_STRING_EQUAL(reply, "ok added two");
	CU_ASSERT(rule == -1 && s && s->nrules == 2 && r->nrules == 1);
	fn_policy_free(s);
	fn_policy_free(r);
	fn_policy_free(q);
	fn_policy_free(p);
}

/* reset is each caller's to carry out; they tell it the same way. */
static void test_is_reset(void)
{
	CU_ASSERT(fn_edit_is_reset("reset"));
	CU_ASSERT(fn_edit_is_reset("reset to base"));
	CU_ASSERT(!fn_edit_is_reset("resets"));
	CU_ASSERT(!fn_edit_is_reset("rese"));
	CU_ASSERT(!fn_edit_is_reset("enable reset"));
}

static const struct fn_rule *match(const struct fn_policy *p, const char *ip)
{
	struct fn_endpoint ep = {.v4 = true, .port = 80};
	inet_pton(AF_INET, ip, ep.ip);
	return fn_policy_match(p, &ep, FN_PROTO_TCP, NULL);
}

/* In place: p itself changes, its index waits for fn_policy_finish, and
 * what the index then finds is what the copies would have found. */
static void test_in_place(void)
{
	char reply[1200];
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	char add[] = "add first { name = \"two\"; action = \"drop\"; match = { to = "
		     "\"127.4.0.0/16\"; }; }";
	CU_ASSERT_EQUAL(fn_edit_in_place(p, add, reply, sizeof(reply)), 1);
	CU_ASSERT_STRING_EQUAL(reply, "ok added two");
	CU_ASSERT_EQUAL(p->nrules, 2);
	CU_ASSERT(p->lpm_stale);
	char rm[] = "rm one", again[] = "rm one", zone[] = "zone b", nozone[] = "zone c";
	CU_ASSERT_EQUAL(fn_edit_in_place(p, rm, reply, sizeof(reply)), 1);
	CU_ASSERT_EQUAL(fn_edit_in_place(p, again, reply, sizeof(reply)), 0);
	CU_ASSERT_STRING_EQUAL(reply, "error no rule named 'one'");
	CU_ASSERT_EQUAL(fn_edit_in_place(p, zone, reply, sizeof(reply)), 1);
	CU_ASSERT_EQUAL(fn_edit_in_place(p, nozone, reply, sizeof(reply)), 0);
	CU_ASSERT_EQUAL(p->self_zone, 1);
	char off[] = "disable two", on[] = "enable two since=1";
	CU_ASSERT_EQUAL(fn_edit_in_place(p, off, reply, sizeof(reply)), 1);
	fn_policy_finish(p);
	CU_ASSERT_FALSE(p->lpm_stale);
	CU_ASSERT_PTR_NULL(match(p, "127.4.0.9"));
	CU_ASSERT_EQUAL(fn_edit_in_place(p, on, reply, sizeof(reply)), 1);
	CU_ASSERT_STRING_EQUAL(reply, "ok two enabled");
	fn_policy_finish(p);
	const struct fn_rule *r = match(p, "127.4.0.9");
	CU_ASSERT(r && strcmp(r->name, "two") == 0);
	CU_ASSERT_PTR_NULL(match(p, "127.3.0.1")); /* "one" is gone */
	char load[] = "load rules = ( );", reset[] = "reset";
	CU_ASSERT_EQUAL(fn_edit_in_place(p, load, reply, sizeof(reply)), -1);
	CU_ASSERT_EQUAL(fn_edit_in_place(p, reset, reply, sizeof(reply)), -1);
	CU_ASSERT_EQUAL(p->nrules, 1);
	fn_policy_free(p);
}

/* 1,000 adds and rms on one policy, as a journal's replay makes them: the
 * rules array grows by half at a time, not by one rule a realloc (which
 * copied the array each time where realloc could not grow it in place),
 * and every rule added is there after. */
static void test_many_adds(void)
{
	char reply[1200], line[200];
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	int moves = 0;
	for (int i = 0; i < 1000; i++) {
		const struct fn_rule *before = p->rules;
		snprintf(line, sizeof(line), "add { name = \"x%d\"; action = \"refuse\"; }", i);
		CU_ASSERT_EQUAL(fn_edit_in_place(p, line, reply, sizeof(reply)), 1);
		moves += p->rules != before;
		if (i % 2) {
			snprintf(line, sizeof(line), "rm x%d", i - 1);
			CU_ASSERT_EQUAL(fn_edit_in_place(p, line, reply, sizeof(reply)), 1);
		}
	}
	CU_ASSERT_EQUAL(p->nrules, 501);
	CU_ASSERT(p->rules_room >= p->nrules);
	CU_ASSERT(moves <= 20);
	CU_ASSERT_STRING_EQUAL(p->rules[500].name, "x999");
	CU_ASSERT_STRING_EQUAL(p->rules[1].name, "x1");
	struct fn_policy *c = fn_policy_clone(p); /* a copy's room is its own */
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->rules_room, 502);
	snprintf(line, sizeof(line), "add { name = \"z\"; action = \"refuse\"; }");
	CU_ASSERT_EQUAL(fn_edit_in_place(c, line, reply, sizeof(reply)), 1);
	snprintf(line, sizeof(line), "add { name = \"z2\"; action = \"refuse\"; }");
	CU_ASSERT_EQUAL(fn_edit_in_place(c, line, reply, sizeof(reply)), 1);
	CU_ASSERT_STRING_EQUAL(c->rules[502].name, "z2");
	fn_policy_free(c);
	fn_policy_free(p);
}

/* An add's text is parsed into a policy of its own only for its rule: no
 * index is built for that one (a root of 256 KiB each, built and freed for
 * every add of a replayed journal; a rule without "to" filled all of it),
 * and the policy's own, built once after, finds the rule. The same from a
 * copy (fn_edit_add): one index, the copy's. */
static void test_add_builds_once(void)
{
	char reply[1200];
	struct fn_policy *p = base();
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	char add[] =
	    "add { name = \"two\"; action = \"drop\"; match = { to = \"127.4.0.0/16\"; }; }",
	     all[] = "add { name = \"all\"; action = \"drop\"; }";
	size_t before = fn_lpm_builds;
	CU_ASSERT_EQUAL(fn_edit_in_place(p, add, reply, sizeof(reply)), 1);
	CU_ASSERT_EQUAL(fn_edit_in_place(p, all, reply, sizeof(reply)), 1);
	CU_ASSERT_EQUAL(fn_lpm_builds, before);
	fn_policy_finish(p);
	CU_ASSERT_EQUAL(fn_lpm_builds, before + 1);
	const struct fn_rule *r = match(p, "127.4.0.9"), *a = match(p, "127.9.0.1");
	CU_ASSERT(r && strcmp(r->name, "two") == 0);
	CU_ASSERT(a && strcmp(a->name, "all") == 0);
	struct fn_policy *q =
	    fn_edit_add(p, "{ name = \"three\"; action = \"drop\"; }", reply, sizeof(reply));
	CU_ASSERT_PTR_NOT_NULL_FATAL(q);
	CU_ASSERT_EQUAL(fn_lpm_builds, before + 2);
	CU_ASSERT_PTR_NOT_NULL(q->lpm);
	CU_ASSERT_FALSE(q->lpm_stale);
	fn_policy_free(q);
	fn_policy_free(p);
}

/* The kind of a change line is its first word, with its space: what the
 * shim's catch-up batch goes by. */
/* A journal entry for one process names it as it sees itself: pid,
 * start time and, since pid namespaces, its namespace; an entry without
 * one (an earlier faultctl's) names the pid in any namespace. */
static void test_target(void)
{
	struct fn_member_id id;
	char a[] = "pid=1.77.4026532370 enable x", b[] = "pid=12.5 disable y", c[] = "enable z",
	     bad[] = "pid=1.x enable x";
	CU_ASSERT_STRING_EQUAL(fn_edit_target(a, &id), "enable x");
	CU_ASSERT_TRUE(id.pid == 1 && id.start == 77 && id.ns == 4026532370u);
	CU_ASSERT_STRING_EQUAL(fn_edit_target(b, &id), "disable y");
	CU_ASSERT_TRUE(id.pid == 12 && id.start == 5 && id.ns == 0);
	CU_ASSERT_STRING_EQUAL(fn_edit_target(c, &id), "enable z");
	CU_ASSERT_EQUAL(id.pid, 0);
	CU_ASSERT_PTR_NULL(fn_edit_target(bad, &id));
}

static void test_kind(void)
{
	CU_ASSERT_EQUAL(fn_edit_kind("enable x since=2", NULL), FN_EDIT_ENABLE);
	CU_ASSERT_EQUAL(fn_edit_kind("disable x", NULL), FN_EDIT_DISABLE);
	CU_ASSERT_EQUAL(fn_edit_kind("add first { }", NULL), FN_EDIT_ADD);
	CU_ASSERT_EQUAL(fn_edit_kind("rm x", NULL), FN_EDIT_RM);
	CU_ASSERT_EQUAL(fn_edit_kind("zone b", NULL), FN_EDIT_ZONE);
	CU_ASSERT_EQUAL(fn_edit_kind("load rules = ( );", NULL), FN_EDIT_OTHER);
	CU_ASSERT_EQUAL(fn_edit_kind("reset", NULL), FN_EDIT_OTHER);
	CU_ASSERT_EQUAL(fn_edit_kind("enabled x", NULL), FN_EDIT_OTHER);
	CU_ASSERT_EQUAL(fn_edit_kind("rm", NULL), FN_EDIT_OTHER); /* no argument: not in place */
	CU_ASSERT_EQUAL(fn_edit_kind("", NULL), FN_EDIT_OTHER);
	size_t arg = 0;
	CU_ASSERT_EQUAL(fn_edit_kind("disable r7", &arg), FN_EDIT_DISABLE);
	CU_ASSERT_EQUAL(arg, 8); /* the rule's name */
}

void add_edit_tests(void)
{
	CU_pSuite s = CU_add_suite("edit", NULL, NULL);
	CU_add_test(s, "add and rm: copies, replies, refusals", test_add_rm);
	CU_add_test(s, "an entry's target: pid, start and pid namespace", test_target);
	CU_add_test(s, "load and zone: copies, replies, refusals", test_load_zone);
	CU_add_test(s, "a change line: verb, rule switched, refusals", test_line);
	CU_add_test(s, "reset, told apart from other lines", test_is_reset);
	CU_add_test(s, "in place: replies, refusals, the index after", test_in_place);
	CU_add_test(s, "kind: a change line's verb", test_kind);
	CU_add_test(s, "an add builds no index of its own", test_add_builds_once);
	CU_add_test(s, "many adds: the array grows by half, the rules stay", test_many_adds);
}
