/* sink.h - the shim's loopback endpoints that make faults out of real kernel
 * behaviour. A redirected socket stays the app's own socket; only the address
 * it connects or sends to changes:
 *   blackhole  a listener whose accept queue is full, so the kernel drops
 *              every SYN and the socket sits in SYN_SENT as on a dead route;
 *   stall      a listener that never accepts: the handshake completes, what
 *              the app sends is buffered, and nothing ever comes back;
 *   udp        a bound datagram socket that is never read. */
#ifndef FAULTNET_SINK_H
#define FAULTNET_SINK_H

#include <stdbool.h>
#include <sys/socket.h>

/*   hold       a blackhole the relay can complete handshakes from (relay.h);
 *   refuse     a bound socket that does not listen: SYNs meet a reset. */
enum fn_sink_kind {
	FN_SINK_BLACKHOLE,
	FN_SINK_STALL,
	FN_SINK_UDP,
	FN_SINK_HOLD,
	FN_SINK_REFUSE,
	FN_SINK_KINDS
};

/* The address a socket of this family (AF_INET or AF_INET6) must use to reach
 * the sink, creating or repairing the sink first. False with errno set when
 * the sink cannot be set up. */
bool fn_sink_addr(enum fn_sink_kind kind, int family, struct sockaddr_storage *addr,
		  socklen_t *len);

/* The app closed (or dup2'd over) fd, which was one of the shim's: rebuild
 * that sink on the same port so that pending connections keep their fate. */
void fn_sink_lost(int fd);

/* The app closed a stalled connection whose sink address was target. */
void fn_sink_stall_closed(const struct sockaddr_storage *target);

/* After fork, in the child: forget creations that were in progress. */
void fn_sink_atfork_child(void);

#endif
