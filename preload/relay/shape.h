/* shape.h - the relay's shaping arithmetic, kept free of sockets so that
 * unit tests can drive it with made-up clocks: latency release marks (with
 * jitter draws), the bandwidth token bucket, the drip schedule and the
 * after_bytes limit. All times are CLOCK_MONOTONIC nanoseconds. */
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
/* Bandwidth: tokens at par.rate bytes/s, at most 50 ms' worth saved up. */
uint64_t fn_shape_tokens(struct fn_conn *c, struct fn_dir *dr, uint64_t now, uint64_t want);
/* Drip: par.bytes every par.every_ms, never saved up. */
uint64_t fn_shape_drip(struct fn_conn *c, struct fn_dir *dr, uint64_t now);
/* The actions that trigger once after_bytes or after_ms is reached. */
bool fn_shape_after_rule(const struct fn_conn *c);
/* How many of the bytes waiting in dr the rule lets out now. */
uint64_t fn_shape_allowance(struct fn_conn *c, struct fn_dir *dr, uint64_t now);
/* n bytes went out: spend tokens and drip budget. */
void fn_shape_spent(struct fn_conn *c, struct fn_dir *dr, uint64_t n);

#endif
