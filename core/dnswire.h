/* dnswire.h - DNS messages as the shim's responder reads and writes them: a
 * query's id, name and type (parsed here, its name by libc), and an answer
 * built from the query: an rcode, no records, or the A / AAAA records of a
 * dns rule. Pure: no sockets. */
#ifndef FAULTNET_DNSWIRE_H
#define FAULTNET_DNSWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/addr.h"

/* rcodes (RFC 1035 4.1.1) */
enum { FN_RCODE_NOERROR = 0, FN_RCODE_SERVFAIL = 2, FN_RCODE_NXDOMAIN = 3, FN_RCODE_REFUSED = 5 };

struct fn_dnsq {
	uint16_t id, qtype;
	char name[256]; /* lower case, no trailing dot; "" for the root */
	size_t end;	/* where the question ends */
};

/* False unless m is a query (QR clear, standard opcode) with exactly one
 * well-formed question. */
bool fn_dnswire_query(const uint8_t *m, size_t n, struct fn_dnsq *q);

/* The answer to query m (q as parsed): its header and question, with
 * rcode and, for NOERROR, the addresses of addrs[] whose family the
 * question asked for (A: IPv4, AAAA: IPv6, other types: none), each with
 * a TTL of ttl seconds. Its length, or 0 when out is too short. */
size_t fn_dnswire_answer(const uint8_t *m, const struct fn_dnsq *q, int rcode,
			 const struct fn_endpoint *addrs, int naddrs, uint32_t ttl, uint8_t *out,
			 size_t cap);

/* A message's id, read and written in place (n >= 2). */
uint16_t fn_dnswire_id(const uint8_t *m);
void fn_dnswire_set_id(uint8_t *m, uint16_t id);

#endif
