/* reinject.h - delay for datagrams the app receives. A datagram already in
 * the app's socket cannot be made to arrive later from its sender's
 * address without privileges, so the receive hook takes it off, and after
 * the delay the relay sends it again to the app's socket from a loopback
 * socket of the shim's; when the app receives it, the hook puts the real
 * sender's address back. The kernel still makes every readiness change. */
#ifndef FAULTNET_REINJECT_H
#define FAULTNET_REINJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct fn_dgram;

/* Queues a datagram for fd (which received it from `from`) to be delivered
 * again after delay_ns. False (errno set) if it cannot be: the app's socket
 * is connected to one peer (the kernel would refuse the shim's datagram),
 * or no memory or fd is left; the caller then hands it over at once. */
bool fn_reinject_later(int fd, const void *buf, size_t n, const struct sockaddr *from,
		       socklen_t fromlen, uint64_t delay_ns);

/* Relay thread: sends d from the shim's socket and remembers its sender. */
void fn_reinject_send(struct fn_dgram *d);

/* Receive hook: if *src is the shim's socket, the datagram of n bytes that
 * fd just received is one sent again: *src and *len become its real
 * sender's, and true is returned. With peek the datagram stays queued, and
 * so does what is known of its sender, for the receive that follows. */
bool fn_reinject_source(int fd, struct sockaddr_storage *src, socklen_t *len, size_t n, bool peek);

void fn_reinject_atfork_child(void);

/* The app closed fd: if it was one of the shim's sending sockets, forget it. */
void fn_reinject_lost(int fd);

#endif
