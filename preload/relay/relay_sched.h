/* relay_sched.h - which relayed connections the relay thread steps in a
 * round: those an event or a change marked ready, and those whose timer is
 * due (a min-heap on wake_ns). A round then costs what it carries, not the
 * number of connections: at 1,000 keep-alive connections a walk over all of
 * them on every wake-up was the relay's own largest cost (issue 42).
 * Each relay shard (relay_shard.h) has one schedule; a connection's is its
 * shard's. That shard's thread or mutex held, as for the connections. */
#ifndef FAULTNET_RELAY_SCHED_H
#define FAULTNET_RELAY_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fn_conn;

/* One shard's schedule: ready_head lists the ready connections; heap[0]
 * has the earliest wake_ns, c->heap_at is c's index + 1 (0: not in it);
 * cap is reserved ahead, one slot per live connection. Zero: empty. */
struct fn_sched {
	struct fn_conn *ready_head;
	struct fn_conn **heap;
	size_t count, cap, reserved;
};

/* Room for one more connection's timer, taken before the connection is
 * added, so that setting a timer later never fails. False when out of
 * memory. fn_sched_release gives it back when the connection is freed. */
bool fn_sched_reserve(struct fn_sched *s);
void fn_sched_release(struct fn_sched *s);

/* c is to be stepped in its shard's next round (c->ready set): a no-op when it
 * already is. */
void fn_sched_ready(struct fn_conn *c);

/* Takes the connections to step now: every ready one and every one whose
 * wake_ns is at most now, each once, as a list through ready_next with
 * ready set; the ready set starts empty again for the next round. */
struct fn_conn *fn_sched_take(struct fn_sched *s, uint64_t now);

/* After c was stepped: its timer follows c->wake_ns (UINT64_MAX: none). */
void fn_sched_timer(struct fn_conn *c);

/* c is about to be freed: no timer of its own any more. */
void fn_sched_forget(struct fn_conn *c);

/* The earliest timer, UINT64_MAX when there is none. */
uint64_t fn_sched_next(const struct fn_sched *s);

/* After fork, in the child: every connection is gone. */
void fn_sched_atfork_child(struct fn_sched *s);

#endif
