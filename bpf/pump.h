/* pump.h - one connection through the kernel-side backend's relay
 * (pump.c): the app's accepted socket, the socket to the address it asked
 * for, and the bytes waiting each way. Only the relay thread touches one. */
#ifndef FAULTNET_BPF_PUMP_H
#define FAULTNET_BPF_PUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pace.h"
#include "core/rules.h"

struct fnb_relay;
struct fnb_chunk;

/* One direction: what was read from its source, waiting for its time. */
struct fnb_dir {
	struct fnb_chunk *head, *tail;
	size_t queued;
	uint64_t eof_due;
	uint64_t out; /* bytes sent */
	struct fn_pace pace;
	bool eof, shut, blocked;
	bool cut; /* a stall, close or reset reached its threshold: nothing more */
};

/* fd[0] is the app's connection, fd[1] the peer's; d[0] carries the app's
 * bytes to the peer (up), d[1] the peer's to the app (down). */
struct fnb_conn {
	struct fnb_conn *next;
	int fd[2];
	uint32_t watched[2];
	bool registered[2]; /* in the relay's epoll set */
	struct fnb_dir d[2];
	uint32_t slot;
	struct fn_params par; /* the rule's, when the relay accepted */
	enum fn_action action;
	uint64_t key, draws, t0;
	uint64_t reset_at; /* a reset waits until its bytes left, or this */
	int reset_fd;
	bool connected;
};

/* One pass: reads, sends what is due, applies thresholds, and says what to
 * wait for; false when the connection is over (and freed). *wake: when to
 * come back at the latest. */
bool fnb_pump_step(struct fnb_relay *r, struct fnb_conn *c, uint64_t now, uint64_t *wake);
/* Closes both ends (with a reset when failed) and frees c. */
void fnb_pump_drop(struct fnb_conn *c, bool reset);

#endif
