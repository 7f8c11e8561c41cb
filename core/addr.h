/* addr.h - network addresses as faultnet compares them: a normalized endpoint
 * (IPv4-mapped IPv6 folded into IPv4), CIDR prefixes and port sets, plus the
 * parsers for their text forms used by the config file and faultctl. */
#ifndef FAULTNET_ADDR_H
#define FAULTNET_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address family-independent endpoint. IPv4 lives in ip[0..3]. */
struct fn_endpoint {
	bool v4;
	uint8_t ip[16];
	uint16_t port; /* host order */
};

struct fn_cidr {
	bool v4;
	uint8_t prefix;
	uint8_t ip[16];
};

struct fn_portrange {
	uint16_t lo, hi;
};

/* Fills ep from an AF_INET or AF_INET6 sockaddr; false for anything else
 * (AF_UNIX, AF_UNSPEC, a short length). */
bool fn_endpoint_from_sockaddr(struct fn_endpoint *ep, const struct sockaddr *sa, socklen_t len);

/* ep as a sockaddr, IPv4-mapped (::ffff:a.b.c.d) when v6 and ep is IPv4. */
void fn_endpoint_to_sockaddr(const struct fn_endpoint *ep, bool v6, struct sockaddr_storage *ss,
			     socklen_t *len);

/* The loopback address of family (127.0.0.1 or ::1) with port (host order). */
void fn_sockaddr_loopback(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *len);

/* The IPv4 address in *ss (AF_INET) rewritten in place as its IPv4-mapped
 * IPv6 address, port kept: how an AF_INET6 socket reaches an IPv4 endpoint. */
void fn_sockaddr_map_v4(struct sockaddr_storage *ss, socklen_t *len);

bool fn_cidr_contains(const struct fn_cidr *c, const struct fn_endpoint *ep);

/* Parsers return NULL on success or a static message describing the problem. */
const char *fn_cidr_parse(struct fn_cidr *c, const char *text);

/* "443", "443,8000-8999". *out is malloc'd; *n is its length. */
const char *fn_ports_parse(const char *text, struct fn_portrange **out, size_t *n);

bool fn_ports_contain(const struct fn_portrange *p, size_t n, uint16_t port);

/* "a.b.c.d:port" or "[v6]:port" into buf, for messages and events. */
void fn_endpoint_format(const struct fn_endpoint *ep, char *buf, size_t len);

#endif
