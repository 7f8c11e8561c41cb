/* shape.h - the shim's relay on top of the shared pacing arithmetic
 * (core/pace.h): the latency release marks a direction keeps for the bytes
 * in its buffer, and the allowance of bytes that may go out now. Kept free
 * of sockets so that unit tests can drive it with made-up clocks. All
 * times are CLOCK_MONOTONIC nanoseconds. */
#ifndef FAULTNET_SHAPE_H
#define FAULTNET_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/relay/relay_conn.h"

/* c must wake by t at the latest. */
void fn_shape_wake(struct fn_conn *c, uint64_t t);
/* Latency: bytes read up to dr->in get a release time (latency plus a
 * jitter draw), never earlier than the one before, so bytes keep order. */
void fn_shape_mark(struct fn_conn *c, struct fn_dir *dr, uint64_t now);
/* Latency and bandwidth each apply when set, on faulted directions. */
bool fn_shape_has_latency(const struct fn_conn *c, const struct fn_dir *dr);
/* How many waiting bytes latency lets out now. */
uint64_t fn_shape_released(struct fn_conn *c, struct fn_dir *dr, uint64_t now);
/* How many of the bytes waiting in dr the rule lets out now. */
uint64_t fn_shape_allowance(struct fn_conn *c, struct fn_dir *dr, uint64_t now);
/* n bytes went out: spend tokens and drip budget. */
void fn_shape_spent(struct fn_conn *c, struct fn_dir *dr, uint64_t n);

#endif
