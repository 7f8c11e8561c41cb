/* names.h - what this process resolved: each address a lookup returned,
 * with up to four names that resolved to it (the most recent kept), so
 * that rules with match.host can apply to connects made to those
 * addresses. Writers are the resolver hooks (under a mutex); readers (the
 * connect path) never lock: each entry is a seqlock. */
#ifndef FAULTNET_NAMES_H
#define FAULTNET_NAMES_H

#include <netdb.h>
#include <stdbool.h>

#include "core/addr.h"

/* Remembers that name resolved to each address of the list. */
void fn_names_record_ai(const char *name, const struct addrinfo *ai);
/* The same for a caller that has strlen(name) at hand. */
void fn_names_record_ai_len(const char *name, size_t len, const struct addrinfo *ai);
void fn_names_record(const char *name, const struct fn_endpoint *ep);

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
