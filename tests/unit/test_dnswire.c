/* test_dnswire.c - the responder's DNS messages: which queries are read
 * (and which refused as not a query), the name and type read through
 * compression-free and odd-case names, the answers built for each rcode
 * and for A / AAAA / other types; and which nameservers a dns rule covers.
 * Also fn_dnswire_query against the libresolv reading it replaced
 * (ns_initparse, ns_parserr, dn_skipname; kept here only, the shim no longer
 * links libresolv): on valid queries and many malformed ones (cut, counts
 * changed, bytes flipped, compression pointers and loops, reserved label
 * types, records after the question) both accept the same messages and read
 * the same id, type, name and end. */
#include <CUnit/CUnit.h>
#include <arpa/nameser.h>
#include <ctype.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/dns.h"
#include "core/dnswire.h"
#include "rnd.h"

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

/* The reading the shim had before, word for word. */
static bool old_query(const uint8_t *m, size_t n, struct fn_dnsq *q)
{
	ns_msg msg;
	ns_rr rr;
	if (n < NS_HFIXEDSZ || n > 65535 || ns_initparse(m, (int)n, &msg) < 0)
		return false;
	if ((m[2] & 0x80) || ((m[2] >> 3) & 0xf) || ns_msg_count(msg, ns_s_qd) != 1 ||
	    ns_parserr(&msg, ns_s_qd, 0, &rr) < 0)
		return false;
	int skip = dn_skipname(m + NS_HFIXEDSZ, m + n);
	if (skip < 0 || NS_HFIXEDSZ + (size_t)skip + 4 > n)
		return false;
	q->id = ns_msg_id(msg);
	q->qtype = ns_rr_type(rr);
	q->end = NS_HFIXEDSZ + (size_t)skip + 4;
	size_t k = 0;
	for (const char *p = ns_rr_name(rr); *p && k + 1 < sizeof(q->name); p++)
		q->name[k++] = (char)tolower((unsigned char)*p);
	if (k == 1 && q->name[0] == '.')
		k = 0;
	q->name[k] = '\0';
	return true;
}

/* Seeds: a plain query, one with odd characters in a label (escaped in
 * the name's text), the root, a question whose name is a pointer, one
 * with an EDNS OPT record, one with an answer record and a pointer in it. */
static const uint8_t seeds[][64] = {
    {0xbe, 0xef, 1,   0, 0,   1,   0,	0,   0, 0, 0, 0, 3,
     'A',  'p',	 'i', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1},
    {0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4, 'a', '.', '\\', 0xff, 2, '(', ' ', 0, 0, 28, 0, 1},
    {0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1},
    {0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1},
    {0, 10, 1, 0x20, 0, 1, 0,  0,    0, 0, 0, 1, 1, 'x', 0,
     0, 1,  0, 1,    0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0},
    {0, 11,   1,  0, 0, 1, 0, 1, 0, 0, 0,  0, 1, 'y', 0, 0, 1, 0,
     1, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1},
};
static const size_t seed_len[] = {26, 25, 17, 18, 29, 35};

/* One mutation of m (length *n) from state. */
static void mutate(uint8_t *m, size_t *n, uint64_t *state)
{
	switch (test_rnd(state, 7)) {
	case 0: /* cut short, or grown by a byte */
		if (*n > 0 && test_rnd(state, 2))
			(*n) -= 1 + test_rnd(state, (uint32_t)*n);
		else if (*n < 64)
			m[(*n)++] = (uint8_t)test_rnd(state, 256);
		break;
	case 1: /* a count of one section changed */
		m[4 + 2 * test_rnd(state, 4) + test_rnd(state, 2)] = (uint8_t)test_rnd(state, 3);
		break;
	case 2: /* a flag byte */
		m[2 + test_rnd(state, 2)] = (uint8_t)test_rnd(state, 256);
		break;
	case 3: /* a pointer somewhere, maybe to itself */
		if (*n > 13) {
			size_t at = 12 + test_rnd(state, (uint32_t)*n - 13);
			m[at] = (uint8_t)(0xc0 | test_rnd(state, 2));
			m[at + 1] = (uint8_t)(test_rnd(state, 2) ? at : test_rnd(state, 64));
		}
		break;
	case 4: /* a label type 01 or 10, or a long label */
		if (*n > 12)
			m[12 + test_rnd(state, (uint32_t)*n - 12)] =
			    (uint8_t)(0x40 * (1 + test_rnd(state, 2)) | test_rnd(state, 64));
		break;
	default: /* any byte */
		if (*n > 0)
			m[test_rnd(state, (uint32_t)*n)] = (uint8_t)test_rnd(state, 256);
	}
}

static int accepted;

static void same(const uint8_t *m, size_t n)
{
	struct fn_dnsq a, b;
	memset(&a, 0x5a, sizeof(a));
	memset(&b, 0x5a, sizeof(b));
	bool was = old_query(m, n, &a), is = fn_dnswire_query(m, n, &b);
	CU_ASSERT_EQUAL(was, is);
	if (was != is) {
		fprintf(stderr, "\ndnswire differs (old %d, new %d) on", was, is);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " %02x", m[i]);
		fprintf(stderr, "\n");
	}
	if (!was || !is)
		return;
	accepted++;
	CU_ASSERT_EQUAL(a.id, b.id);
	CU_ASSERT_EQUAL(a.qtype, b.qtype);
	CU_ASSERT_EQUAL(a.end, b.end);
	CU_ASSERT_STRING_EQUAL(a.name, b.name);
}

static void test_same_as_libresolv(void)
{
	uint64_t state = 0x5eed5eedULL;
	int runs = 0;
	for (size_t s = 0; s < sizeof(seed_len) / sizeof(seed_len[0]); s++) {
		same(seeds[s], seed_len[s]);
		for (int i = 0; i < 20000; i++, runs++) {
			uint8_t m[80];
			size_t n = seed_len[s];
			memcpy(m, seeds[s], n);
			for (uint32_t k = 1 + test_rnd(&state, 3); k > 0; k--)
				mutate(m, &n, &state);
			same(m, n);
		}
	}
	/* The corpus reaches both sides: a fifth or so of the mutants are
	 * still queries both read. */
	CU_ASSERT_TRUE(accepted > runs / 20);
	CU_ASSERT_TRUE(accepted < runs);
}

/* The seeds as the old reading had them, named: the escapes of the name's
 * text and the root as "". */
static void test_names(void)
{
	struct fn_dnsq q;
	CU_ASSERT_TRUE(fn_dnswire_query(seeds[1], seed_len[1], &q));
	CU_ASSERT_STRING_EQUAL(q.name, "a\\.\\\\\\255.\\(\\032");
	CU_ASSERT_TRUE(fn_dnswire_query(seeds[2], seed_len[2], &q));
	CU_ASSERT_STRING_EQUAL(q.name, "");
	CU_ASSERT_FALSE(fn_dnswire_query(seeds[3], seed_len[3], &q)); /* a pointer to itself */
}

void add_dnswire_tests(void)
{
	CU_pSuite s = CU_add_suite("dns messages", NULL, NULL);
	CU_add_test(s, "queries read", test_query);
	CU_add_test(s, "answers built", test_answer);
	CU_add_test(s, "nameservers a rule covers", test_nameservers);
	CU_add_test(s, "the same queries read as libresolv read them", test_same_as_libresolv);
	CU_add_test(s, "names escaped as libresolv did", test_names);
}
