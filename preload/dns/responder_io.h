/* responder_io.h - what the responder's thread shares with the calls that
 * make nameservers: the table of servers, and the thread's loop. */
#ifndef FAULTNET_RESPONDER_IO_H
#define FAULTNET_RESPONDER_IO_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/socket.h>

#include "core/addr.h"
#include "preload/fd/fdtab.h"

#define FN_DNS_SERVERS 8

struct fn_dns_server {
	struct fn_endpoint real;  /* the nameserver the app asked for */
	struct fn_ownfd udp, tcp; /* the responder's sockets, on one port */
	struct sockaddr_storage at;
	socklen_t atlen;
	struct fn_ownfd up; /* connected to the real nameserver, at the first forward */
	int dead;	    /* the app closed one of its fds: a new one is made */
};

/* Written under the lock, entries below fn_dns_nservers never change. */
extern struct fn_dns_server fn_dns_servers[FN_DNS_SERVERS];
extern int fn_dns_nservers;

/* The thread's loop: never returns. wake is readable when a server was
 * added. */
void fn_dns_serve(const struct fn_ownfd *wake);

/* In a fork child's atfork handler: drops the thread's state (its
 * connections, queries waiting for the real nameserver, answers waiting to
 * be sent), freeing nothing. */
void fn_dns_responder_io_forget(void);

/* Frees the buffers of the entries dropped; before the thread starts. */
void fn_dns_responder_io_release(void);

#endif
