/* pace.h - when the kernel-side backend's relay lets bytes go (pace.c):
 * latency release times, the rate's token bucket, the drip schedule and
 * the after_bytes and after_ms thresholds. No sockets and no clock: the
 * relay passes the time in, and the unit tests do too. Times are
 * CLOCK_MONOTONIC nanoseconds. */
#ifndef FAULTNET_BPF_PACE_H
#define FAULTNET_BPF_PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rules.h"

/* One direction of one connection. */
struct fnb_pace {
	uint64_t last_due, tok_ns, drip_ns, drip_left, out;
	double tokens;
};

/* The release time of bytes read now: latency plus draw (in [-1, 1)) times
 * the jitter, never before the bytes read before them. */
uint64_t fnb_pace_due(struct fnb_pace *p, const struct fn_params *par, double draw, uint64_t now);
/* How many of want due bytes may go now under the rate, the drip and
 * after_bytes; when fewer than want, *wake says when to look again. */
size_t fnb_pace_allow(struct fnb_pace *p, const struct fn_params *par, enum fn_action a,
		      uint64_t now, size_t want, uint64_t *wake);
/* n bytes went out. */
void fnb_pace_spent(struct fnb_pace *p, const struct fn_params *par, enum fn_action a, size_t n);
/* Whether a stall, reset or close has reached its threshold: after_bytes
 * bytes out, or after_ms since t0 (when *wake is told). */
bool fnb_pace_tripped(const struct fnb_pace *p, const struct fn_params *par, enum fn_action a,
		      uint64_t t0, uint64_t now, uint64_t *wake);

#endif
