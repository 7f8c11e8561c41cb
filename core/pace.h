/* pace.h - when a relay lets bytes go: latency release times (with jitter
 * draws), the bandwidth token bucket, the drip schedule and the after_bytes
 * and after_ms thresholds. One copy for both relays, the shim's
 * (preload/relay/shape.c) and the kernel-side backend's (bpf/pump.c), so
 * that one rule paces alike under either. No sockets and no clock: the
 * relay passes the time in, and the unit tests do too. Times are
 * CLOCK_MONOTONIC nanoseconds. */
#ifndef FAULTNET_PACE_H
#define FAULTNET_PACE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rules.h"

/* One direction of one connection. */
struct fn_pace {
	uint64_t last_due;  /* latency: the latest release time handed out */
	double tokens;	    /* bandwidth: what the bucket holds, in bytes */
	uint64_t tok_ns;    /* when it was last filled */
	uint64_t drip_ns;   /* drip: when the next tick's bytes come */
	uint64_t drip_left; /* what is left of this tick's */
};

/* A direction that starts being paced at now: its bucket full (as a
 * token bucket starts: the first small message goes whole, as over a slow
 * link, not in pieces of what accrued since the accept), its drip's first
 * tick due, no release time handed out. */
void fn_pace_start(struct fn_pace *p, const struct fn_params *par, uint64_t now);
/* The release time of bytes read now: latency plus draw (in [-1, 1)) times
 * the jitter, never before the bytes read before them, so bytes keep
 * their order. */
uint64_t fn_pace_due(struct fn_pace *p, const struct fn_params *par, double draw, uint64_t now);
/* The actions that trigger once after_bytes or after_ms is reached. */
bool fn_pace_after_action(enum fn_action a);
/* How many of want due bytes may go now under the rate, the drip and
 * after_bytes, when out bytes went before; when fewer than want, *wake
 * (lowered only) says when to look again. */
uint64_t fn_pace_allow(struct fn_pace *p, const struct fn_params *par, enum fn_action a,
		       uint64_t now, uint64_t out, uint64_t want, uint64_t *wake);
/* n bytes went out: spends tokens and the drip's budget. */
void fn_pace_spent(struct fn_pace *p, const struct fn_params *par, enum fn_action a, uint64_t n);
/* Whether a threshold action has reached its threshold: after_bytes bytes
 * out, or after_ms since t0 (when not yet, *wake is told when). */
bool fn_pace_tripped(const struct fn_params *par, enum fn_action a, uint64_t out, uint64_t t0,
		     uint64_t now, uint64_t *wake);

#endif
