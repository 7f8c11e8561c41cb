/* names.h - what this process resolved: each address a lookup returned,
 * with up to four names that resolved to it (the most recent kept), so
 * that rules with match.host can apply to connects made to those
 * addresses. Writers are the resolver hooks (under a mutex); readers (the
 * connect path) never lock: each entry is a seqlock. */
#ifndef FAULTNET_NAMES_H
#define FAULTNET_NAMES_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/addr.h"

/* Remembers that name resolved to each address of the list. */
void fn_names_record_ai(const char *name, const struct addrinfo *ai);
/* The same for a caller that has strlen(name) at hand. */
void fn_names_record_ai_len(const char *name, size_t len, const struct addrinfo *ai);
void fn_names_record(const char *name, const struct fn_endpoint *ep);

/* What a caller keeps of the last list it recorded for one name: its
 * addresses, and the table's change count when each had that name as
 * its newest (0: nothing kept). */
#define FN_NAMES_KEPT 8
struct fn_names_kept {
	uint64_t changes;
	uint64_t clock; /* the stamps' clock after the list was recorded */
	int n;
	uint64_t addr[FN_NAMES_KEPT][3];
};
/* The table's change count (names.c), raised before each change and
 * after it (odd while an entry changes), and
 * the clock of its entries' stamps (their ages for replacement). */
extern uint64_t fn_names_changes, fn_names_clock;

/* A list kept is recorded again once the stamps' clock has moved this
 * much since: its entries' stamps are renewed then. 1: any move. While the
 * clock stands still, the list's entries are still the youngest of the
 * table, as each lookup's renewal would leave them, so a replacement (the
 * oldest of a window goes) picks the same slot. With a lag (it was 8),
 * another thread's lookups renewing the same window in between left the
 * name's address the oldest, replaced by the next new address: forgotten
 * by a match.host rule (tests/dns/dns_test.py test_memo_eviction). */
#define FN_NAMES_FRESH 1

/* Whether k shows ai as recorded with the table unchanged since and its
 * stamps still young: every address IPv4 and k's, in order (any other
 * family: false, and fn_names_record_kept looks). Only reads; in line,
 * without a call. */
static inline bool fn_names_kept_same(const struct fn_names_kept *k, const struct addrinfo *ai)
{
	if (k->changes != __atomic_load_n(&fn_names_changes, __ATOMIC_SEQ_CST) + 1 ||
	    __atomic_load_n(&fn_names_clock, __ATOMIC_RELAXED) - k->clock >= FN_NAMES_FRESH)
		return false;
	int n = 0;
	for (; ai; ai = ai->ai_next, n++) {
		const struct sockaddr *sa = ai->ai_addr;
		if (n == k->n || !sa || ai->ai_addrlen < sizeof(struct sockaddr_in) ||
		    sa->sa_family != AF_INET)
			return false;
		uint32_t ip;
		memcpy(&ip, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		if (k->addr[n][2] != 1 || k->addr[n][0] != ip || k->addr[n][1])
			return false;
	}
	return n == k->n;
}

/* fn_names_record_ai_len for a caller that keeps k for name alone (its
 * thread's last name: zeroed when the name is another): the same list
 * again, the table unchanged since, is already recorded, and costs a
 * comparison. Not reentrant on the same k. */
void fn_names_record_kept(struct fn_names_kept *k, const char *name, size_t len,
			  const struct addrinfo *ai);

/* Whether a name remembered for ep's address matches pattern (dns.h). */
bool fn_names_match(const struct fn_endpoint *ep, const char *pattern);

/* Calls fn(name, arg) for each name remembered for ep's address; false if
 * none is. */
bool fn_names_each(const struct fn_endpoint *ep, void (*fn)(const char *, void *), void *arg);

/* A connect to sa: counted for each name remembered for its address. */
void fn_names_connect(const struct sockaddr *sa, socklen_t len);

/* In a fork child: the lock free, an entry left half written forgotten. */
void fn_names_atfork_child(void);

/* Installs fn_names_match as core's fn_host_resolved. */
void fn_names_init(void);

#endif
