/* endpoints.h - the loopback endpoints a kernel-side run holds, where its
 * BPF programs send a covered TCP connect (endpoints.c). */
#ifndef FAULTNET_BPF_ENDPOINTS_H
#define FAULTNET_BPF_ENDPOINTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fnb_plan;

enum { FNB_EP_REFUSE, FNB_EP_STALL, FNB_EP_RESET, FNB_EP_KINDS };

struct fnb_endpoints {
	int fd[FNB_EP_KINDS][2]; /* [kind][0 = IPv4, 1 = IPv6]; -1 when missing */
	uint16_t port[FNB_EP_KINDS][2];
	pthread_t thread; /* accepts on the reset endpoints */
	bool running, stop;
};

/* A TCP socket bound to a free port of 127.0.0.1 or ::1 (family), listening
 * (a queue of 4,096) or not, with rcvbuf (0: the default) and the extra
 * socket flags (SOCK_NONBLOCK); -1 (and *port 0) when it cannot be had.
 * Bound without SO_REUSEADDR: no other account can take the port. */
int fnb_loopback_socket(int family, int flags, int rcvbuf, bool listening, uint16_t *port);
/* Closes fd with a zero linger, which makes the close a reset. */
void fnb_reset_close(int fd);
/* Binds every endpoint it can and starts the reset endpoints' thread. */
void fnb_endpoints_open(struct fnb_endpoints *e);
/* Whether every endpoint the plan's rules send connects to is there. */
bool fnb_endpoints_ready(const struct fnb_endpoints *e, const struct fnb_plan *pl);
/* Stops the thread and closes every endpoint. */
void fnb_endpoints_close(struct fnb_endpoints *e);

#endif
