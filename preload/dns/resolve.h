/* resolve.h - the resolver hooks' internal functions (see resolve.c). */
#ifndef FAULTNET_RESOLVE_H
#define FAULTNET_RESOLVE_H

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>

int fn_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		   struct addrinfo **res);
/* has_af: gethostbyname2(_r), else gethostbyname(_r) (af is AF_INET). */
struct hostent *fn_gethostbyname2(const char *name, int af, bool has_af);
int fn_gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
			struct hostent **result, int *h_errnop, bool has_af);

/* resolve_async.c: getaddrinfo_a, gai_suspend, gai_cancel. */
int fn_getaddrinfo_a(int mode, struct gaicb *list[], int n, struct sigevent *sevp);
int fn_gai_suspend(const struct gaicb *const list[], int n, const struct timespec *timeout);
int fn_gai_cancel(struct gaicb *g);
void fn_resolve_async_atfork_child(void);

#endif
