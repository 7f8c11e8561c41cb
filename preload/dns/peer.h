/* peer.h - whether a query that reached the responder's loopback port came
 * from a socket of this process. Any local account can send to a loopback
 * port; only the process that owns the responder may be answered, or
 * another account could spend its rules' budgets, inflate its counts and
 * have queries forwarded as it. */
#ifndef FAULTNET_PEER_H
#define FAULTNET_PEER_H

#include <stdbool.h>
#include <sys/socket.h>

/* from: a UDP query's sender. True when every socket bound to its address
 * and port (/proc/net/udp, udp6) is one of this process's fds, and there
 * is at least one. True as well when /proc/net cannot be read (no /proc:
 * the responder answers as before rather than leave the app unanswered). */
bool fn_dns_peer_udp(const struct sockaddr_storage *from);

/* The same for a TCP client connected from `from` to the responder at `at`. */
bool fn_dns_peer_tcp(const struct sockaddr_storage *from, const struct sockaddr_storage *at);

#endif
