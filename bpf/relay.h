/* relay.h - the kernel-side backend's relay (relay.c): where a connect under
 * latency or bandwidth is sent, and from where it goes on to the address
 * the app asked for, its bytes shaped by the rule. */
#ifndef FAULTNET_BPF_RELAY_H
#define FAULTNET_BPF_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fnb_slots;

struct fnb_relay {
	/* Filled by the caller before fnb_relay_start. */
	struct fnb_slots *slots; /* per rule: its numbers, on or off, bytes */
	int pending_fd;		 /* the BPF map of connects sent here */
	int http_fd;		 /* the HTTP pump's socket (httppump.h), or -1 */
	/* Owned by the relay. */
	int lfd[2]; /* listeners: [0] 127.0.0.1, [1] ::1 */
	uint16_t port[2];
	int ep, wake;
	int spare;	 /* an fd given up to accept (and reset) when out of fds */
	uint64_t serial; /* connections accepted */
	pthread_t thread;
	bool running;
	struct fnb_conn *conns;
};

/* Binds the listeners (their ports are known on return); false if it
 * cannot. */
bool fnb_relay_open(struct fnb_relay *r);
/* Starts the thread once the BPF map is there. */
bool fnb_relay_start(struct fnb_relay *r);
/* Stops the thread, resets every relayed connection and closes all. */
void fnb_relay_close(struct fnb_relay *r);

#endif
