/* dnswire.c - DNS queries read with libresolv, answers built from them (see
 * dnswire.h). */
#include "core/dnswire.h"

#include <arpa/nameser.h>
#include <ctype.h>
#include <resolv.h>
#include <string.h>

uint16_t fn_dnswire_id(const uint8_t *m)
{
	return (uint16_t)(m[0] << 8 | m[1]);
}

void fn_dnswire_set_id(uint8_t *m, uint16_t id)
{
	m[0] = (uint8_t)(id >> 8);
	m[1] = (uint8_t)id;
}

bool fn_dnswire_query(const uint8_t *m, size_t n, struct fn_dnsq *q)
{
	ns_msg msg;
	ns_rr rr;
	if (n < NS_HFIXEDSZ || n > 65535 || ns_initparse(m, (int)n, &msg) < 0)
		return false;
	/* QR clear (a query), opcode 0 (QUERY), one question. */
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

static uint8_t *put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return p + 2;
}

size_t fn_dnswire_answer(const uint8_t *m, const struct fn_dnsq *q, int rcode,
			 const struct fn_endpoint *addrs, int naddrs, uint32_t ttl, uint8_t *out,
			 size_t cap)
{
	if (q->end > cap)
		return 0;
	memcpy(out, m, q->end);
	/* QR, the query's opcode and RD, RA set; AA, TC and AD clear. */
	out[2] = (uint8_t)(0x80 | (m[2] & 0x79));
	out[3] = (uint8_t)(0x80 | (rcode & 0xf));
	memset(out + 6, 0, 6); /* no answer, authority or additional records yet */
	uint8_t *p = out + q->end;
	uint16_t count = 0;
	bool v4 = q->qtype == ns_t_a, v6 = q->qtype == ns_t_aaaa;
	for (int i = 0; rcode == FN_RCODE_NOERROR && i < naddrs; i++) {
		if (addrs[i].v4 ? !v4 : !v6)
			continue;
		size_t len = addrs[i].v4 ? 4 : 16;
		if ((size_t)(p - out) + 12 + len > cap)
			return 0;
		p = put16(p, 0xc000 | NS_HFIXEDSZ); /* the question's name */
		p = put16(p, q->qtype);
		p = put16(p, ns_c_in);
		p = put16(p, (uint16_t)(ttl >> 16));
		p = put16(p, (uint16_t)ttl);
		p = put16(p, (uint16_t)len);
		memcpy(p, addrs[i].ip, len);
		p += len;
		count++;
	}
	put16(out + 6, count);
	return (size_t)(p - out);
}
