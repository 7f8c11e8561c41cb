/* relay.h - the shim's relay for faults on established streams (latency,
 * bandwidth, drip, stall/reset/close after N bytes or ms) and for connect-time
 * delay and reset. The app's socket stays a real TCP socket: it connects to a
 * "hold" sink that drops its SYNs, and the relay thread completes that
 * handshake itself (a TCP simultaneous open from the sink's address) once the
 * real peer has answered and any delay has passed. From then on the relay
 * carries the bytes between the app's connection and the real peer, shaped
 * as the rule says. Connections no rule matches never come here. */
#ifndef FAULTNET_RELAY_H
#define FAULTNET_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/rules.h"

/* Prepares fd (binds it to loopback if it is unbound), hands the connection
 * to a relay thread (its shard's, relay_shard.h), and fills hold with the
 * address fd must connect to. dest is the real peer. False with errno when
 * it cannot be set up. */
bool fn_relay_start(int fd, const struct sockaddr *dest, socklen_t destlen, const struct fn_rule *r,
		    struct sockaddr_storage *hold, socklen_t *holdlen);

/* After the app's connect of fd to the hold port returned rc (errno err):
 * on EINPROGRESS, waits briefly for the relay to complete it when the peer
 * had already accepted; on an error that started no handshake, drops the
 * connection set up for it (relay.c). errno is err again on return. */
void fn_relay_connected(int fd, int rc, int err);

/* A UDP datagram to send from fd after delay_ns: queued, sent by the relay
 * thread through a duplicate of fd. False with errno if it cannot be. */
bool fn_relay_datagram(int fd, const void *buf, size_t n, const struct sockaddr *to,
		       socklen_t tolen, const void *ctl, size_t ctllen, uint64_t delay_ns);

/* Hands a datagram to the relay thread; with dup_of >= 0 it is sent from a
 * duplicate of that socket. Takes d (freed on failure, errno set). */
struct fn_dgram;
bool fn_relay_queue(struct fn_dgram *d, int dup_of);

/* The app closed fd, which may be one of the relay's: forget it first. */
void fn_relay_lost(int fd);

/* After fork, in the child: the relay threads are gone; drop every
 * shard's connections and fds. */
void fn_relay_atfork_child(void);

#endif
