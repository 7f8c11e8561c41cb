/* test_addr.c - CIDR and port parsing and containment. */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "core/addr.h"

static struct fn_endpoint ep4(const char *ip, uint16_t port)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, ip, &in.sin_addr);
	struct fn_endpoint ep;
	CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&in, sizeof(in)));
	return ep;
}

static struct fn_endpoint ep6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	inet_pton(AF_INET6, ip, &in6.sin6_addr);
	struct fn_endpoint ep;
	CU_ASSERT_FATAL(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&in6, sizeof(in6)));
	return ep;
}

static bool contains(const char *cidr, struct fn_endpoint ep)
{
	struct fn_cidr c;
	CU_ASSERT_PTR_NULL_FATAL(fn_cidr_parse(&c, cidr));
	return fn_cidr_contains(&c, &ep);
}

static void test_cidr_v4(void)
{
	CU_ASSERT_TRUE(contains("127.66.0.0/16", ep4("127.66.200.3", 1)));
	CU_ASSERT_FALSE(contains("127.66.0.0/16", ep4("127.67.0.1", 1)));
	CU_ASSERT_TRUE(contains("127.66.0.1", ep4("127.66.0.1", 1)));
	CU_ASSERT_FALSE(contains("127.66.0.1", ep4("127.66.0.2", 1)));
	CU_ASSERT_TRUE(contains("0.0.0.0/0", ep4("127.1.2.3", 1)));
	CU_ASSERT_TRUE(contains("127.64.0.0/10", ep4("127.127.255.255", 1)));
	CU_ASSERT_FALSE(contains("127.64.0.0/10", ep4("127.128.0.0", 1)));
}

static void test_cidr_v6_and_mapped(void)
{
	CU_ASSERT_TRUE(contains("::1/128", ep6("::1", 1)));
	CU_ASSERT_FALSE(contains("::1/128", ep6("::2", 1)));
	CU_ASSERT_TRUE(contains("fd00::/8", ep6("fd12::1", 1)));
	/* IPv4 rules see IPv4-mapped IPv6 destinations. */
	CU_ASSERT_TRUE(contains("127.66.0.0/16", ep6("::ffff:127.66.1.1", 1)));
	CU_ASSERT_FALSE(contains("127.66.0.0/16", ep6("::ffff:127.67.1.1", 1)));
	/* A mapped CIDR is an IPv4 CIDR. */
	CU_ASSERT_TRUE(contains("::ffff:127.66.0.0/112", ep4("127.66.9.9", 1)));
	/* Families never cross otherwise. */
	CU_ASSERT_FALSE(contains("::/0", ep4("127.0.0.1", 1)));
	CU_ASSERT_FALSE(contains("0.0.0.0/0", ep6("::1", 1)));
}

static void test_cidr_errors(void)
{
	struct fn_cidr c;
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "127.66.0.0/33"),
			       "prefix length must be 0 to 32 for IPv4");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "::1/129"),
			       "prefix length must be 0 to 128 for IPv6");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "127.66.0.0/x"), "prefix length is not a number");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "127.66.0.0/"), "prefix length is not a number");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "127.666.0.0/16"), "not an IPv4 or IPv6 address");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "localhost"), "not an IPv4 or IPv6 address");
	CU_ASSERT_STRING_EQUAL(fn_cidr_parse(&c, "127.66.0.1/16"),
			       "address has bits set beyond the prefix length");
}

static void test_ports(void)
{
	struct fn_portrange *p;
	size_t n;
	CU_ASSERT_PTR_NULL_FATAL(fn_ports_parse("443,8000-8999, 22", &p, &n));
	CU_ASSERT_EQUAL(n, 3);
	CU_ASSERT_TRUE(fn_ports_contain(p, n, 443));
	CU_ASSERT_TRUE(fn_ports_contain(p, n, 8000));
	CU_ASSERT_TRUE(fn_ports_contain(p, n, 8999));
	CU_ASSERT_TRUE(fn_ports_contain(p, n, 22));
	CU_ASSERT_FALSE(fn_ports_contain(p, n, 9000));
	CU_ASSERT_FALSE(fn_ports_contain(p, n, 444));
	free(p);
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("0", &p, &n),
			       "port must be a number from 1 to 65535");
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("65536", &p, &n),
			       "port must be a number from 1 to 65535");
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("9000-8000", &p, &n), "port range is reversed");
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("443,", &p, &n),
			       "port must be a number from 1 to 65535");
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("https", &p, &n),
			       "port must be a number from 1 to 65535");
	CU_ASSERT_STRING_EQUAL(fn_ports_parse("443;80", &p, &n),
			       "ports are written as 443 or 443,8000-8999");
}

static void test_endpoint_rejects_non_inet(void)
{
	struct sockaddr_un {
		sa_family_t f;
		char p[108];
	} un = {.f = AF_UNIX};
	struct fn_endpoint ep;
	CU_ASSERT_FALSE(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&un, sizeof(un)));
	struct sockaddr_in in = {.sin_family = AF_INET};
	CU_ASSERT_FALSE(fn_endpoint_from_sockaddr(&ep, (struct sockaddr *)&in, 4));
	CU_ASSERT_FALSE(fn_endpoint_from_sockaddr(&ep, NULL, 0));
	char buf[64];
	struct fn_endpoint a = ep4("127.66.0.1", 443), b = ep6("::1", 8443);
	fn_endpoint_format(&a, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "127.66.0.1:443");
	fn_endpoint_format(&b, buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf, "[::1]:8443");
}

static void test_endpoint_to_sockaddr(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64];
	struct fn_endpoint a = ep4("127.66.0.1", 443), b = ep6("::1", 8443), back;
	fn_endpoint_to_sockaddr(&a, false, &ss, &len);
	CU_ASSERT_EQUAL(ss.ss_family, AF_INET);
	CU_ASSERT_EQUAL(len, sizeof(struct sockaddr_in));
	/* On an AF_INET6 socket, an IPv4 endpoint is IPv4-mapped, port kept. */
	fn_endpoint_to_sockaddr(&a, true, &ss, &len);
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
	CU_ASSERT_EQUAL(ss.ss_family, AF_INET6);
	CU_ASSERT_EQUAL(len, sizeof(struct sockaddr_in6));
	CU_ASSERT_EQUAL(ntohs(in6->sin6_port), 443);
	inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "::ffff:127.66.0.1");
	/* ... and reads back as the same IPv4 endpoint. */
	CU_ASSERT_TRUE(fn_endpoint_from_sockaddr(&back, (struct sockaddr *)&ss, len));
	CU_ASSERT_TRUE(back.v4 && back.port == 443 && memcmp(back.ip, a.ip, 4) == 0);
	fn_endpoint_to_sockaddr(&b, true, &ss, &len);
	inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "::1");
	/* In place, as the sinks use it. */
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(9);
	in->sin_addr.s_addr = htonl(0x7f000001);
	len = sizeof(*in);
	fn_sockaddr_map_v4(&ss, &len);
	inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
	CU_ASSERT_STRING_EQUAL(text, "::ffff:127.0.0.1");
	CU_ASSERT_EQUAL(ntohs(in6->sin6_port), 9);
	CU_ASSERT_EQUAL(len, sizeof(struct sockaddr_in6));
	fn_sockaddr_loopback(AF_INET, 7, &ss, &len);
	CU_ASSERT_TRUE(len == sizeof(*in) && in->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
		       ntohs(in->sin_port) == 7);
	fn_sockaddr_loopback(AF_INET6, 8, &ss, &len);
	CU_ASSERT_TRUE(len == sizeof(*in6) && IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) &&
		       ntohs(in6->sin6_port) == 8);
}

void add_addr_tests(void)
{
	CU_pSuite s = CU_add_suite("addr", NULL, NULL);
	CU_add_test(s, "IPv4 CIDR containment", test_cidr_v4);
	CU_add_test(s, "IPv6 and IPv4-mapped containment", test_cidr_v6_and_mapped);
	CU_add_test(s, "CIDR errors", test_cidr_errors);
	CU_add_test(s, "port sets", test_ports);
	CU_add_test(s, "non-inet endpoints and formatting", test_endpoint_rejects_non_inet);
	CU_add_test(s, "endpoints as sockaddrs, IPv4-mapped", test_endpoint_to_sockaddr);
}
