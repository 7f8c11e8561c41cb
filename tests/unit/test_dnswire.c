/* test_dnswire.c - the responder's DNS messages: which queries are read
 * (and which refused as not a query), the name and type read through
 * compression-free and odd-case names, the answers built for each rcode
 * and for A / AAAA / other types; and which nameservers a dns rule covers. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "core/config.h"
#include "core/dns.h"
#include "core/dnswire.h"

/* A query for name (dotted) of type qtype, id 0xbeef, RD set. */
static size_t make_query(uint8_t *m, const char *name, uint16_t qtype)
{
	static const uint8_t head[12] = {0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	memcpy(m, head, 12);
	size_t at = 12;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t n = dot ? (size_t)(dot - name) : strlen(name);
		m[at++] = (uint8_t)n;
		memcpy(m + at, name, n);
		at += n;
		name += n + (dot != NULL);
	}
	m[at++] = 0;
	m[at++] = (uint8_t)(qtype >> 8);
	m[at++] = (uint8_t)qtype;
	m[at++] = 0;
	m[at++] = 1;
	return at;
}

static void test_query(void)
{
	uint8_t m[512];
	struct fn_dnsq q;
	size_t n = make_query(m, "Api.Example.TEST", 1);
	CU_ASSERT_TRUE(fn_dnswire_query(m, n, &q));
	CU_ASSERT_STRING_EQUAL(q.name, "api.example.test");
	CU_ASSERT_EQUAL(q.id, 0xbeef);
	CU_ASSERT_EQUAL(q.qtype, 1);
	CU_ASSERT_EQUAL(q.end, n);
	CU_ASSERT_FALSE(fn_dnswire_query(m, n - 1, &q)); /* cut short */
	CU_ASSERT_FALSE(fn_dnswire_query(m, 11, &q));
	m[2] |= 0x80; /* an answer, not a query */
	CU_ASSERT_FALSE(fn_dnswire_query(m, n, &q));
	m[2] = 0x01;
	m[5] = 2; /* two questions */
	CU_ASSERT_FALSE(fn_dnswire_query(m, n, &q));
	m[5] = 1;
	m[12] = 70; /* a label longer than the message */
	CU_ASSERT_FALSE(fn_dnswire_query(m, n, &q));
}

static void test_answer(void)
{
	uint8_t m[512], out[512];
	struct fn_dnsq q;
	struct fn_endpoint a[2] = {{.v4 = true, .ip = {127, 66, 0, 1}},
				   {.v4 = false, .ip = {[15] = 1}}};
	size_t n = make_query(m, "s.test", 1);
	CU_ASSERT_TRUE(fn_dnswire_query(m, n, &q));
	size_t k = fn_dnswire_answer(m, &q, FN_RCODE_NXDOMAIN, a, 2, 60, out, sizeof(out));
	CU_ASSERT_EQUAL(k, n);
	CU_ASSERT_EQUAL(out[2], 0x81); /* QR, RD kept */
	CU_ASSERT_EQUAL(out[3], 0x83); /* RA, NXDOMAIN */
	CU_ASSERT_EQUAL(out[7], 0);    /* no records with an error */
	k = fn_dnswire_answer(m, &q, FN_RCODE_NOERROR, a, 2, 60, out, sizeof(out));
	CU_ASSERT_EQUAL(k, n + 16); /* one A record: the AAAA address is left out */
	CU_ASSERT_EQUAL(out[7], 1);
	CU_ASSERT_EQUAL(memcmp(out + n + 12, a[0].ip, 4), 0);
	n = make_query(m, "s.test", 28);
	fn_dnswire_query(m, n, &q);
	k = fn_dnswire_answer(m, &q, FN_RCODE_NOERROR, a, 2, 60, out, sizeof(out));
	CU_ASSERT_EQUAL(k, n + 28);
	CU_ASSERT_EQUAL(out[n + 27], 1); /* ::1 */
	n = make_query(m, "s.test", 16); /* TXT: NOERROR, no records */
	fn_dnswire_query(m, n, &q);
	CU_ASSERT_EQUAL(fn_dnswire_answer(m, &q, FN_RCODE_NOERROR, a, 2, 60, out, sizeof(out)), n);
	CU_ASSERT_EQUAL(fn_dnswire_answer(m, &q, 0, a, 2, 60, out, n - 1), 0); /* no room */
}

static void test_nameservers(void)
{
	char err[256];
	struct fn_policy *p =
	    fn_config_load_string("rules = ( { name = \"a\"; action = \"dns\"; error = \"refused\";"
				  " match = { to = \"127.0.0.53/32\"; }; },"
				  " { name = \"b\"; action = \"dns\"; error = \"nxdomain\"; match "
				  "= { port = \"5353\"; }; } );",
				  "/tmp/t.conf", NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	struct fn_endpoint ns = {.v4 = true, .ip = {127, 0, 0, 53}, .port = 53};
	CU_ASSERT_STRING_EQUAL(fn_dns_nameserver(p, &ns)->name, "a");
	ns.ip[3] = 54;
	CU_ASSERT_PTR_NULL(fn_dns_nameserver(p, &ns)); /* a: other address; b: port 5353 */
	ns.port = 5353;
	CU_ASSERT_STRING_EQUAL(fn_dns_nameserver(p, &ns)->name, "b");
	CU_ASSERT_EQUAL(p->rules[0].dns->error, FN_DNS_REFUSED);
	fn_policy_free(p);
}

void add_dnswire_tests(void)
{
	CU_pSuite s = CU_add_suite("dns messages", NULL, NULL);
	CU_add_test(s, "queries read", test_query);
	CU_add_test(s, "answers built", test_answer);
	CU_add_test(s, "nameservers a rule covers", test_nameservers);
}
