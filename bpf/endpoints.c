/* endpoints.c - the loopback endpoints a kernel-side run holds (see
 * endpoints.h), each a real socket whose kernel behaviour is the fault:
 *  - refuse: bound, never listening: the SYN is answered with a reset;
 *  - stall: listening, never accepting: the handshake completes, nothing
 *    answers, and the connection's buffer takes 256 KiB of what the app
 *    writes; the queue holds 4,096 connections;
 *  - reset: listening; a thread accepts each connection and closes it with
 *    a zero linger, so the app's connect succeeds and its next read or
 *    write meets ECONNRESET, as from a server that resets at accept.
 * All are bound without SO_REUSEADDR, so that no other account can take a
 * port while the run holds it, and close-on-exec. */
#include "bpf/endpoints.h"

#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bpf/compile.h"
#include "core/addr.h"
#include "core/rules.h"

int fnb_loopback_socket(int family, int flags, int rcvbuf, bool listening, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	fn_sockaddr_loopback(family, 0, &ss, &len);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
	if (fd >= 0 && rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (listening && listen(fd, 4096) < 0) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		if (fd >= 0)
			close(fd);
		*port = 0;
		return -1;
	}
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int endpoint(int family, int kind, uint16_t *port)
{
	return fnb_loopback_socket(family, 0, kind == FNB_EP_STALL ? FN_STALL_RCVBUF : 0,
				   kind != FNB_EP_REFUSE, port);
}

/* Accepts on the reset endpoints and resets each connection. */
static void *resetter(void *arg)
{
	struct fnb_endpoints *e = arg;
	struct pollfd p[2] = {{.fd = e->fd[FNB_EP_RESET][0], .events = POLLIN},
			      {.fd = e->fd[FNB_EP_RESET][1], .events = POLLIN}};
	struct linger zero = {.l_onoff = 1, .l_linger = 0};
	while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
		if (poll(p, 2, 50) <= 0)
			continue;
		for (int f = 0; f < 2; f++) {
			int c =
			    p[f].revents & POLLIN ? accept4(p[f].fd, NULL, NULL, SOCK_CLOEXEC) : -1;
			if (c < 0)
				continue;
			setsockopt(c, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
			close(c);
		}
	}
	return NULL;
}

void fnb_endpoints_open(struct fnb_endpoints *e)
{
	memset(e, 0, sizeof(*e));
	for (int k = 0; k < FNB_EP_KINDS; k++)
		for (int f = 0; f < 2; f++)
			e->fd[k][f] = endpoint(f ? AF_INET6 : AF_INET, k, &e->port[k][f]);
	e->running =
	    e->fd[FNB_EP_RESET][0] >= 0 && pthread_create(&e->thread, NULL, resetter, e) == 0;
}

bool fnb_endpoints_ready(const struct fnb_endpoints *e, const struct fnb_plan *pl)
{
	for (size_t i = 0; i < pl->policy->nrules; i++) {
		int a = pl->rules[i].action;
		int k = a == FNB_REFUSE	 ? FNB_EP_REFUSE
			: a == FNB_STALL ? FNB_EP_STALL
			: a == FNB_RESET ? FNB_EP_RESET
					 : -1;
		/* ::1 may be missing (no IPv6): its connects go nowhere anyway,
		 * and the programs leave a connect alone when the port is 0. */
		if (k >= 0 && e->fd[k][0] < 0)
			return false;
		if (k == FNB_EP_RESET && !e->running)
			return false;
	}
	return true;
}

void fnb_endpoints_close(struct fnb_endpoints *e)
{
	if (e->running) {
		__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
		pthread_join(e->thread, NULL);
	}
	for (int k = 0; k < FNB_EP_KINDS; k++)
		for (int f = 0; f < 2; f++)
			if (e->fd[k][f] >= 0)
				close(e->fd[k][f]);
}
