/* test_config.c - every error path of the policy parser, with the exact
 * message and line a user sees. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"

/* Parses text as file "t.conf" and returns the error ("" if it loaded). */
static const char *error_of(const char *text, const char *zone)
{
	static char err[512];
	err[0] = '\0';
	struct fn_policy *p = fn_config_load_string(text, "t.conf", zone, err, sizeof(err));
	fn_policy_free(p);
	return err;
}

#define EXPECT(text, message) CU_ASSERT_STRING_EQUAL(error_of(text, NULL), message)

static void test_syntax(void)
{
#define GENERIC ": expected KEY = VALUE; and lists as ( { ... }, { ... } ), ',' between entries"
	EXPECT("rules = (\n { name = \"a\"; action = = \"drop\"; }\n);",
	       "t.conf:2: syntax error" GENERIC);
	EXPECT("zone = \"1a\";\n\nrules = (", "t.conf:3: syntax error" GENERIC);
	EXPECT("zone = 1a;",
	       "t.conf:1: syntax error: a text value goes in double quotes (\"...\")");
	/* The two slips most met, named from the lines around the error. */
	EXPECT("rules = (\n { name = \"a\"; action = \"drop\"; },\n # the last\n\n);",
	       "t.conf:5: syntax error: a ',' after the last entry of a list (remove it)");
	EXPECT("zones = ( { name = \"z\"; cidrs = [ \"127.0.0.0/8\", ]; } );",
	       "t.conf:1: syntax error: a ',' after the last entry of a list (remove it)");
	EXPECT("rules = (\n { name = \"a\"; action = \"drop\"; }\n { name = \"b\"; action = "
	       "\"drop\"; }\n);",
	       "t.conf:3: syntax error: a ',' missing between two entries of a list (after the '}' "
	       "above)");
#undef GENERIC
}

/* Every rule is read: the file's errors are said at once, each with its
 * line, up to 20, then how many more. */
static void test_every_error(void)
{
	EXPECT("rules = (\n { name = \"a\"; action = \"drop\"; enable = false; },\n"
	       " { name = \"b\"; action = \"drop\"; match = { to = \"127.0.0.1/32\"; }; },\n"
	       " { name = \"c\"; action = \"drop\"; latency = 5; }\n);",
	       "t.conf:2: rule 'a': unknown key 'enable', did you mean 'enabled'?\n"
	       "t.conf:4: rule 'c': unknown key 'latency', did you mean 'latency_ms'?");
	char text[4096] = "rules = (\n", big[8192];
	for (int i = 0; i < 25; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 " { name = \"r%d\"; action = \"drop\"; x = 1; }%s\n", i,
			 i < 24 ? "," : "");
	strcat(text, ");");
	struct fn_policy *p = fn_config_load_string(text, "t.conf", NULL, big, sizeof(big));
	CU_ASSERT_PTR_NULL(p);
	int lines = 1;
	for (const char *q = big; *q; q++)
		lines += *q == '\n';
	CU_ASSERT_EQUAL(lines, 21);
	CU_ASSERT_PTR_NOT_NULL(
	    strstr(big, "t.conf:21: rule 'r19': unknown key 'x'\n(and 5 more errors)"));
}

static void test_unknown_keys(void)
{
	EXPECT("zone = \"1a\";\nzonez = ();",
	       "t.conf:2: top level: unknown key 'zonez', did you mean 'zone'?");
	EXPECT("rules = (\n { name = \"a\"; action = \"drop\";\n   enable = false; }\n);",
	       "t.conf:3: rule 'a': unknown key 'enable', did you mean 'enabled'?");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\";\n match = { dest = \"127.0.0.1\"; }; "
	       "} );",
	       "t.conf:2: rule 'a': match: unknown key 'dest'");
	EXPECT("zones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\";\n cidr = \"x\"; } );",
	       "t.conf:2: zone '1a': unknown key 'cidr', did you mean 'cidrs'?");
}

static void test_bad_values(void)
{
	EXPECT("rules = ( { name = \"a\"; action = \"drop\";\n match = { to = [ "
	       "\"127.66.0.0/16\",\n \"127.66.0.0/33\" ]; }; } );",
	       "t.conf:3: rule 'a': match.to: bad CIDR '127.66.0.0/33': prefix length must be 0 to "
	       "32 for IPv4");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; match = { to = 12; }; } );",
	       "t.conf:1: rule 'a': match.to must be a string or a list of strings");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; match = { port = \"80-\"; }; } );",
	       "t.conf:1: rule 'a': bad match.port '80-': port must be a number from 1 to 65535");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; match = { port = 70000; }; } );",
	       "t.conf:1: rule 'a': match.port 70000 is not from 1 to 65535");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; match = { proto = \"icmp\"; }; } );",
	       "t.conf:1: rule 'a': match.proto 'icmp' must be \"tcp\" or \"udp\"");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; enabled = \"no\"; } );",
	       "t.conf:1: rule 'a': enabled must be true or false");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; established = 1; } );",
	       "t.conf:1: rule 'a': established must be true or false");
	EXPECT("rules = ( { name = \"a\"; action = \"refuse\"; established = true; } );",
	       "t.conf:1: rule 'a': established applies to blackhole, drop, stall, reset, latency, "
	       "bandwidth and drip, not refuse");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; established = true;\n"
	       " match = { proto = \"udp\"; }; } );",
	       "t.conf:1: rule 'a': established applies to TCP connections, not proto \"udp\"");
	EXPECT("rules = ( { name = \"a\"; action = \"stall\"; match = { proto = \"udp\"; }; } );",
	       "t.conf:1: rule 'a': action stall applies to TCP only, not proto \"udp\"");
	EXPECT("rules = ( { name = \"a\"; action = \"drop\"; match = 1; } );",
	       "t.conf:1: rule 'a': match must be a group { ... }");
	EXPECT("rules = { name = \"a\"; };", "t.conf:1: rules must be a list ( { ... }, { ... } )");
}

static void test_actions_and_names(void)
{
	EXPECT("rules = (\n { name = \"a\"; action = \"explode\"; }\n);",
	       "t.conf:2: rule 'a': unknown action 'explode' (expected blackhole, stall, drop, "
	       "refuse, reset, unreachable, delay, latency, bandwidth, drip, close, respond, slow, "
	       "abort, dns or tls)");
	EXPECT("rules = ( { name = \"a\"; } );", "t.conf:1: rule 'a' has no action");
	EXPECT("rules = ( { action = \"drop\"; } );", "t.conf:1: rule without a name");
	EXPECT("rules = ( { name = \"a b\"; action = \"drop\"; } );",
	       "t.conf:1: rule name 'a b' must be 1 to 63 letters, digits or _.:-");
	EXPECT("rules = (\n { name = \"a\"; action = \"drop\"; },\n { name = \"a\"; action = "
	       "\"stall\"; }\n);",
	       "t.conf:3: duplicate rule name 'a' (first defined at line 2)");
}

static void test_zones(void)
{
	EXPECT("zone = \"1b\";\nzones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\"; } );",
	       "t.conf:1: zone: zone '1b' is not defined in zones");
	EXPECT(
	    "rules = ( { name = \"a\"; action = \"drop\";\n match = { from_zone = \"1a\"; }; } );",
	    "t.conf:2: rule 'a': match.from_zone: zone '1a' is not defined in zones");
	EXPECT("zones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\"; } );\nrules = ( { name = "
	       "\"a\"; action = \"drop\"; match = { to_zone = \"1c\"; }; } );",
	       "t.conf:2: rule 'a': match.to_zone: zone '1c' is not defined in zones");
	EXPECT("zones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\"; },\n { name = \"1a\"; cidrs "
	       "= \"127.10.2.0/24\"; } );",
	       "t.conf:2: duplicate zone name '1a'");
	EXPECT("zones = ( { name = \"1a\"; } );", "t.conf:1: zone '1a' has no cidrs");
	EXPECT("zones = ( { name = \"1a\"; cidrs = []; } );",
	       "t.conf:1: zone '1a': cidrs is empty");
	CU_ASSERT_STRING_EQUAL(
	    error_of("zones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\"; } );", "9z"),
	    "t.conf: FAULTNET_ZONE: zone '9z' is not defined in zones");
	CU_ASSERT_STRING_EQUAL(
	    error_of("zone = \"1b\";\nzones = ( { name = \"1a\"; cidrs = \"127.10.1.0/24\"; },"
		     " { name = \"1b\"; cidrs = \"127.10.2.0/24\"; } );",
		     "1a"),
	    "");
}

static void test_files(void)
{
	char err[512];
	CU_ASSERT_PTR_NULL(fn_config_load_file("/nonexistent/f.conf", NULL, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(
	    err, "/nonexistent/f.conf: cannot read the file (No such file or directory)");
	char path[] = "/tmp/faultnet-unit-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	const char text[] = "# comment\nrules = (\n  { name = \"x\"; action = \"drop\"; match = { "
			    "port = \"1-\"; }; }\n);\n";
	CU_ASSERT_EQUAL(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	CU_ASSERT_PTR_NULL(fn_config_load_file(path, NULL, err, sizeof(err)));
	char want[600];
	snprintf(want, sizeof(want),
		 "%s:3: rule 'x': bad match.port '1-': port must be a number from 1 to 65535",
		 path);
	CU_ASSERT_STRING_EQUAL(err, want);
	unlink(path);
}

/* A wrong rule whose error is longer than the room kept for the list of
 * errors (a header of 300 bytes quoted in it): the error is still said,
 * whole as far as the buffer goes, never read past (libFuzzer's fuzz_rule
 * found the list read unterminated: a heap overflow). */
static void test_long_error(void)
{
	char err[128], text[600];
	char hdr[301];
	memset(hdr, 's', 300);
	hdr[300] = '\0';
	snprintf(text, sizeof(text),
		 "rules = ( { name = \"r\"; action = \"respond\"; status = 503; headers = "
		 "[\"%s\"]; } );",
		 hdr);
	CU_ASSERT_PTR_NULL(fn_config_load_string(text, "long", NULL, err, sizeof(err)));
	CU_ASSERT_EQUAL(strncmp(err, "long:1: rule 'r': ", 18), 0);
}

static void test_full_example(void)
{
	const char text[] = "zone = \"1a\";\n"
			    "zones = (\n"
			    "  { name = \"1a\"; cidrs = [ \"127.10.1.0/24\" ]; },\n"
			    "  { name = \"1c\"; cidrs = [ \"127.10.2.0/24\" ]; }\n"
			    ");\n"
			    "rules = (\n"
			    "  { name = \"nat-lost\";  action = \"blackhole\"; match = { to = [ "
			    "\"127.66.0.0/16\" ]; port = \"443,8000-8999\"; }; },\n"
			    "  { name = \"silent-s3\"; action = \"stall\";     match = { to = [ "
			    "\"127.67.0.1/32\" ]; port = \"9000\"; }; },\n"
			    "  { name = \"az-1a\";     action = \"drop\";      match = { from_zone "
			    "= \"1a\"; }; enabled = false; }\n"
			    ");\n";
	char err[512];
	struct fn_policy *p = fn_config_load_string(text, "example.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->nrules, 3);
	CU_ASSERT_EQUAL(p->nzones, 2);
	CU_ASSERT_EQUAL(p->self_zone, 0);
	CU_ASSERT_EQUAL(p->rules[0].action, FN_ACT_BLACKHOLE);
	CU_ASSERT_EQUAL(p->rules[1].action, FN_ACT_STALL);
	CU_ASSERT_EQUAL(p->rules[1].protos, FN_PROTO_TCP);
	CU_ASSERT_EQUAL(p->rules[2].action, FN_ACT_DROP);
	CU_ASSERT_FALSE(p->rules[2].enabled);
	CU_ASSERT_EQUAL(p->rules[2].from_zone, 0);
	CU_ASSERT_EQUAL(p->rules[0].line, 7);
	fn_policy_free(p);
}

void add_config_tests(void)
{
	CU_pSuite s = CU_add_suite("config", NULL, NULL);
	CU_add_test(s, "syntax errors", test_syntax);
	CU_add_test(s, "unknown keys", test_unknown_keys);
	CU_add_test(s, "every error of a file", test_every_error);
	CU_add_test(s, "an error longer than the room for the list", test_long_error);
	CU_add_test(s, "bad values", test_bad_values);
	CU_add_test(s, "actions and names", test_actions_and_names);
	CU_add_test(s, "zones", test_zones);
	CU_add_test(s, "files", test_files);
	CU_add_test(s, "the README example", test_full_example);
}
