/* responder.h - the shim's own nameserver for the DNS queries a process
 * sends itself (c-ares, dig, a resolver of its own): the socket of a
 * nameserver a dns rule covers is connected or sent to the responder
 * instead, which answers by the dns rules or forwards to the real one. */
#ifndef FAULTNET_RESPONDER_H
#define FAULTNET_RESPONDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* The responder standing in for nameserver sa (UDP and TCP on one loopback
 * port), started at the first call for it; false with errno when it
 * cannot be. The address is given in sa's family (IPv4-mapped for an
 * IPv4 nameserver named as IPv6). */
bool fn_dns_responder_addr(const struct sockaddr *sa, socklen_t len,
			   struct sockaddr_storage *target, socklen_t *tlen);

/* A received datagram's sender: when it is a responder, the nameserver it
 * stands for, so that the app sees the answer come from the server it
 * asked. Lock-free; false (nothing changed) for any other sender. */
bool fn_dns_responder_source(struct sockaddr_storage *ss, socklen_t *len);

/* Whether any responder exists (a receive must then look at senders). */
bool fn_dns_responder_active(void);

/* The app closed or replaced fd: if it was a responder's socket, that
 * responder is given up and the next query makes a new one. */
void fn_dns_responder_lost(int fd);

/* In a fork child: the parent's responders are its own; the child starts
 * its own when it needs one. */
void fn_dns_responder_atfork_child(void);

#endif
