/* dnswire.c - DNS queries read (with libc's dn_expand, no libresolv),
 * answers built from them (see dnswire.h). */
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

/* Where the name at m[at] ends (past its zero label or its compression
 * pointer), or -1: the rule of libresolv's dn_skipname, which ns_initparse
 * applied. A name cut short by the end of the message without its zero
 * label passes, as it did there; dn_expand refuses it later. */
static long skip_name(const uint8_t *m, size_t at, size_t n)
{
	while (at < n) {
		uint8_t len = m[at++];
		if (len == 0)
			break;
		if ((len & NS_CMPRSFLGS) == 0) {
			at += len;
			continue;
		}
		if ((len & NS_CMPRSFLGS) != NS_CMPRSFLGS)
			return -1; /* the reserved label types 01 and 10 */
		at++;
		break;
	}
	return at > n ? -1 : (long)at;
}

/* Where count entries of a section starting at m[at] end, or -1: a
 * question is a name, a type and a class; a record adds a TTL, a length
 * and that many bytes (ns_initparse's walk, which took libresolv). */
static long skip_section(const uint8_t *m, size_t at, size_t n, bool question, unsigned count)
{
	for (; count > 0; count--) {
		long end = skip_name(m, at, n);
		if (end < 0)
			return -1;
		at = (size_t)end + 4;
		if (!question) {
			if (at + 6 > n)
				return -1;
			at += 6 + (size_t)(m[at + 4] << 8 | m[at + 5]);
		}
	}
	return at > n ? -1 : (long)at;
}

/* True when the four sections the header counts fill the message exactly,
 * each entry well formed. */
static bool sections_fill(const uint8_t *m, size_t n)
{
	size_t at = NS_HFIXEDSZ;
	for (int s = 0; s < 4; s++) {
		long end =
		    skip_section(m, at, n, s == 0, (unsigned)(m[4 + 2 * s] << 8 | m[5 + 2 * s]));
		if (end < 0)
			return false;
		at = (size_t)end;
	}
	return at == n;
}

bool fn_dnswire_query(const uint8_t *m, size_t n, struct fn_dnsq *q)
{
	/* QR clear (a query), opcode 0 (QUERY), one question, and sections
	 * that parse as libresolv's ns_initparse required. */
	if (n < NS_HFIXEDSZ || n > 65535 || (m[2] & 0x80) || ((m[2] >> 3) & 0xf) ||
	    (m[4] << 8 | m[5]) != 1 || !sections_fill(m, n))
		return false;
	/* The name, its compression followed and its text escaped, by libc's
	 * own dn_expand (glibc 2.34 moved it out of libresolv): the shim needs
	 * no libresolv mapped and relocated at every start. */
	char name[NS_MAXDNAME];
	int len = dn_expand(m, m + n, m + NS_HFIXEDSZ, name, sizeof(name));
	if (len < 0 || NS_HFIXEDSZ + (size_t)len + 4 > n)
		return false;
	long skip = skip_name(m, NS_HFIXEDSZ, n);
	if (skip < 0 || (size_t)skip + 4 > n)
		return false;
	q->id = fn_dnswire_id(m);
	q->qtype = (uint16_t)(m[skip] << 8 | m[skip + 1]);
	q->end = (size_t)skip + 4;
	size_t k = 0;
	for (const char *p = name; *p && k + 1 < sizeof(q->name); p++)
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
