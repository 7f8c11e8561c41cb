/* addr.c - parsing and matching of endpoints, CIDR prefixes and port sets.
 * Pure functions: no I/O, no locks, safe on the shim's hot path. */
#include "core/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool fn_endpoint_from_sockaddr(struct fn_endpoint *ep, const struct sockaddr *sa, socklen_t len)
{
	/* The length first: a receive from an unnamed sender leaves the
	 * address, family included, unwritten. */
	if (!sa || len < sizeof(sa_family_t))
		return false;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		ep->v4 = true;
		memset(ep->ip, 0, sizeof(ep->ip));
		memcpy(ep->ip, &in->sin_addr, 4);
		ep->port = ntohs(in->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;
		ep->port = ntohs(in6->sin6_port);
		/* Java and dual-stack clients reach IPv4 peers as ::ffff:a.b.c.d;
		 * IPv4 rules must still see an IPv4 address. */
		ep->v4 = memcmp(b, v4_mapped_prefix, 12) == 0;
		memset(ep->ip, 0, sizeof(ep->ip));
		memcpy(ep->ip, ep->v4 ? b + 12 : b, ep->v4 ? 4 : 16);
		return true;
	}
	return false;
}

/* The first bits of a big-endian 64-bit word, as a mask in host order. */
static uint64_t top_bits(unsigned bits)
{
	return bits == 0 ? 0 : bits >= 64 ? ~0ull : ~0ull << (64 - bits);
}

static uint64_t load_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}

/* Word-wide compares: a policy of many rules is scanned on every matched
 * connect, so this runs once per rule passed over. */
bool fn_cidr_contains(const struct fn_cidr *c, const struct fn_endpoint *ep)
{
	if (c->v4 != ep->v4)
		return false;
	if (c->v4) {
		uint32_t a, b;
		memcpy(&a, c->ip, 4);
		memcpy(&b, ep->ip, 4);
		uint32_t mask = (uint32_t)(top_bits(c->prefix) >> 32);
		return ((__builtin_bswap32(a) ^ __builtin_bswap32(b)) & mask) == 0;
	}
	unsigned hi = c->prefix > 64 ? 64 : c->prefix, lo = c->prefix > 64 ? c->prefix - 64u : 0;
	return ((load_be64(c->ip) ^ load_be64(ep->ip)) & top_bits(hi)) == 0 &&
	       ((load_be64(c->ip + 8) ^ load_be64(ep->ip + 8)) & top_bits(lo)) == 0;
}

static const char *parse_prefix(const char *s, unsigned max, unsigned *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return "prefix length is not a number";
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0')
		return "prefix length is not a number";
	if (v > max)
		return max == 32 ? "prefix length must be 0 to 32 for IPv4"
				 : "prefix length must be 0 to 128 for IPv6";
	*out = (unsigned)v;
	return NULL;
}

/* Host bits set below the prefix usually mean a typo (127.66.0.1/16 meant
 * 127.66.0.0/16 or 127.66.0.1/32): refuse rather than guess. */
static bool host_bits_clear(const struct fn_cidr *c)
{
	unsigned bytes = c->v4 ? 4 : 16;
	for (unsigned bit = c->prefix; bit < bytes * 8; bit++)
		if (c->ip[bit / 8] & (0x80 >> (bit % 8)))
			return false;
	return true;
}

const char *fn_cidr_parse(struct fn_cidr *c, const char *text)
{
	char buf[INET6_ADDRSTRLEN + 8];
	if (strlen(text) >= sizeof(buf))
		return "not an address or CIDR";
	strcpy(buf, text);
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	memset(c, 0, sizeof(*c));
	unsigned prefix;
	const char *err;
	if (inet_pton(AF_INET, buf, c->ip) == 1) {
		c->v4 = true;
		prefix = 32;
		if (slash && (err = parse_prefix(slash + 1, 32, &prefix)))
			return err;
	} else if (inet_pton(AF_INET6, buf, c->ip) == 1) {
		prefix = 128;
		if (slash && (err = parse_prefix(slash + 1, 128, &prefix)))
			return err;
		if (memcmp(c->ip, v4_mapped_prefix, 12) == 0 && prefix >= 96) {
			memmove(c->ip, c->ip + 12, 4);
			memset(c->ip + 4, 0, 12);
			c->v4 = true;
			prefix -= 96;
		}
	} else {
		return "not an IPv4 or IPv6 address";
	}
	c->prefix = (uint8_t)prefix;
	if (!host_bits_clear(c))
		return "address has bits set beyond the prefix length";
	return NULL;
}

static const char *parse_port(const char **s, uint16_t *out)
{
	const char *p = *s;
	unsigned long v = 0;
	if (*p < '0' || *p > '9')
		return "port must be a number from 1 to 65535";
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > 65535)
			return "port must be a number from 1 to 65535";
		p++;
	}
	if (v == 0)
		return "port must be a number from 1 to 65535";
	*out = (uint16_t)v;
	*s = p;
	return NULL;
}

const char *fn_ports_parse(const char *text, struct fn_portrange **out, size_t *n)
{
	size_t cap = 1;
	for (const char *p = text; *p; p++)
		cap += *p == ',';
	struct fn_portrange *r = calloc(cap, sizeof(*r));
	if (!r)
		return "out of memory";
	size_t k = 0;
	const char *p = text, *err;
	for (;;) {
		while (*p == ' ')
			p++;
		if ((err = parse_port(&p, &r[k].lo)))
			goto fail;
		r[k].hi = r[k].lo;
		if (*p == '-') {
			p++;
			if ((err = parse_port(&p, &r[k].hi)))
				goto fail;
			if (r[k].hi < r[k].lo) {
				err = "port range is reversed";
				goto fail;
			}
		}
		k++;
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		if (*p != ',') {
			err = "ports are written as 443 or 443,8000-8999";
			goto fail;
		}
		p++;
	}
	*out = r;
	*n = k;
	return NULL;
fail:
	free(r);
	return err;
}

bool fn_ports_contain(const struct fn_portrange *p, size_t n, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (port >= p[i].lo && port <= p[i].hi)
			return true;
	return false;
}

void fn_endpoint_format(const struct fn_endpoint *ep, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	inet_ntop(ep->v4 ? AF_INET : AF_INET6, ep->ip, ip, sizeof(ip));
	snprintf(buf, len, ep->v4 ? "%s:%u" : "[%s]:%u", ip, ep->port);
}

void fn_endpoint_to_sockaddr(const struct fn_endpoint *ep, bool v6, struct sockaddr_storage *ss,
			     socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (ep->v4) {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(ep->port);
		memcpy(&a->sin_addr, ep->ip, 4);
		*len = sizeof(*a);
		if (v6)
			fn_sockaddr_map_v4(ss, len);
		return;
	}
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	a->sin6_family = AF_INET6;
	a->sin6_port = htons(ep->port);
	memcpy(&a->sin6_addr, ep->ip, 16);
	*len = sizeof(*a);
}

void fn_sockaddr_map_v4(struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in in = *(const struct sockaddr_in *)ss;
	struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof(*ss));
	a->sin6_family = AF_INET6;
	a->sin6_port = in.sin_port;
	a->sin6_addr.s6_addr[10] = a->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&a->sin6_addr.s6_addr[12], &in.sin_addr, 4);
	*len = sizeof(*a);
}

void fn_sockaddr_loopback(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct fn_endpoint ep = {.v4 = family == AF_INET, .port = port};
	if (ep.v4)
		ep.ip[0] = 127, ep.ip[3] = 1;
	else
		ep.ip[15] = 1;
	fn_endpoint_to_sockaddr(&ep, false, ss, len);
}
