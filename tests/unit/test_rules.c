/* test_rules.c - rule matching (core/rules.c): ports, protocols, zones, order, enabled. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "core/config.h"

static const char conf[] =
    "zone = \"1a\";\n"
    "zones = ( { name = \"1a\"; cidrs = [ \"127.10.1.0/24\" ]; },\n"
    "          { name = \"1c\"; cidrs = [ \"127.10.2.0/24\", \"::1/128\" ]; } );\n"
    "rules = (\n"
    "  { name = \"first\"; action = \"stall\"; match = { to = \"127.66.0.1\"; port = 443; }; },\n"
    "  { name = \"wide\"; action = \"blackhole\"; match = { to = [ \"127.66.0.0/16\" ]; port = "
    "\"443,8000-8999\"; }; },\n"
    "  { name = \"off\"; action = \"blackhole\"; match = { to = \"127.70.0.0/16\"; }; enabled = "
    "false; },\n"
    "  { name = \"udp\"; action = \"drop\"; match = { to = \"127.68.0.0/16\"; proto = \"udp\"; }; "
    "},\n"
    "  { name = \"tcp\"; action = \"blackhole\"; match = { to = \"127.68.0.0/16\"; proto = "
    "\"tcp\"; port = 80; }; },\n"
    "  { name = \"to1c\"; action = \"blackhole\"; match = { to_zone = \"1c\"; }; },\n"
    "  { name = \"from1a\"; action = \"drop\"; match = { from_zone = \"1a\"; to = "
    "\"127.69.0.0/16\"; }; },\n"
    "  { name = \"from1c\"; action = \"drop\"; match = { from_zone = \"1c\"; to = "
    "\"127.71.0.0/16\"; }; }\n"
    ");\n";

static struct fn_policy *load(const char *zone)
{
	char err[512];
	struct fn_policy *p = fn_config_load_string(conf, "match.conf", zone, err, sizeof(err));
	if (!p)
		CU_FAIL_FATAL(err);
	return p;
}

static const char *hit(const struct fn_policy *p, const char *ip, uint16_t port, uint8_t proto)
{
	union {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} sa;
	memset(&sa, 0, sizeof(sa));
	struct fn_endpoint ep;
	if (strchr(ip, ':')) {
		sa.in6.sin6_family = AF_INET6;
		sa.in6.sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &sa.in6.sin6_addr);
		fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sa, sizeof(sa.in6));
	} else {
		sa.in.sin_family = AF_INET;
		sa.in.sin_port = htons(port);
		inet_pton(AF_INET, ip, &sa.in.sin_addr);
		fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&sa, sizeof(sa.in));
	}
	const struct fn_rule *r = fn_policy_match(p, &ep, proto, NULL);
	return r ? r->name : "-";
}

static void test_order_and_ports(void)
{
	struct fn_policy *p = load(NULL);
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 443, FN_PROTO_TCP), "first");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.2", 443, FN_PROTO_TCP), "wide");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 8500, FN_PROTO_TCP), "wide");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 9000, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(p, "::ffff:127.66.0.1", 443, FN_PROTO_TCP), "first");
	CU_ASSERT_STRING_EQUAL(hit(p, "::ffff:127.66.3.3", 8999, FN_PROTO_TCP), "wide");
	fn_policy_free(p);
}

static void test_enabled_and_proto(void)
{
	struct fn_policy *p = load(NULL);
	CU_ASSERT_STRING_EQUAL(hit(p, "127.70.0.1", 80, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.68.0.1", 53, FN_PROTO_UDP), "udp");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.68.0.1", 53, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.68.0.1", 80, FN_PROTO_TCP), "tcp");
	/* stall is TCP only, so a datagram to its destination falls through. */
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 443, FN_PROTO_UDP), "wide");
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 443, FN_PROTO_ANY), "first");
	fn_policy_free(p);
}

static void test_zones(void)
{
	struct fn_policy *a = load(NULL), *c = load("1c");
	CU_ASSERT_STRING_EQUAL(hit(a, "127.10.2.7", 1, FN_PROTO_TCP), "to1c");
	CU_ASSERT_STRING_EQUAL(hit(a, "::1", 1, FN_PROTO_TCP), "to1c");
	CU_ASSERT_STRING_EQUAL(hit(a, "127.10.1.7", 1, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(a, "127.69.0.1", 80, FN_PROTO_TCP), "from1a");
	CU_ASSERT_STRING_EQUAL(hit(a, "127.71.0.1", 80, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(c, "127.69.0.1", 80, FN_PROTO_TCP), "-");
	CU_ASSERT_STRING_EQUAL(hit(c, "127.71.0.1", 80, FN_PROTO_UDP), "from1c");
	CU_ASSERT_EQUAL(a->self_zone, 0);
	CU_ASSERT_EQUAL(c->self_zone, 1);
	fn_policy_free(a);
	fn_policy_free(c);
}

static void test_empty_policy(void)
{
	char err[256];
	struct fn_policy *p = fn_config_load_string("", "empty.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->active_protos, 0);
	CU_ASSERT_STRING_EQUAL(hit(p, "127.66.0.1", 443, FN_PROTO_TCP), "-");
	fn_policy_free(p);
	p = fn_config_load_string(
	    "rules = ( { name = \"x\"; action = \"drop\"; enabled = false; } );", "off.conf", NULL,
	    err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->active_protos, 0);
	fn_policy_free(p);
}

void add_rules_tests(void)
{
	CU_pSuite s = CU_add_suite("match", NULL, NULL);
	CU_add_test(s, "first match wins; ports; IPv4-mapped", test_order_and_ports);
	CU_add_test(s, "enabled flag and protocol", test_enabled_and_proto);
	CU_add_test(s, "from_zone and to_zone", test_zones);
	CU_add_test(s, "empty and all-disabled policies", test_empty_policy);
}
