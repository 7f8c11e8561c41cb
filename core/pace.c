/* pace.c - the pacing arithmetic both relays share (see pace.h). */
#include "core/pace.h"
#include "core/clock.h"

#define NS 1e9

static void wake_by(uint64_t *wake, uint64_t t)
{
	if (t < *wake)
		*wake = t;
}

/* The most the bucket saves up: 50 ms' worth, and never less than one
 * segment, or a slow rate could never send one. */
static double burst(const struct fn_params *par)
{
	double rate = (double)par->rate;
	return rate / 20 < 1460 ? 1460 : rate / 20;
}

void fn_pace_start(struct fn_pace *p, const struct fn_params *par, uint64_t now)
{
	*p = (struct fn_pace){.tokens = burst(par), .tok_ns = now, .drip_ns = now};
}

uint64_t fn_pace_due(struct fn_pace *p, const struct fn_params *par, double draw, uint64_t now)
{
	int64_t due = (int64_t)now + (int64_t)par->latency_ms * (int64_t)MS +
		      (int64_t)(draw * (double)par->jitter_ms * (double)MS);
	uint64_t u = due < (int64_t)now ? now : (uint64_t)due;
	if (u < p->last_due)
		u = p->last_due;
	return p->last_due = u;
}

/* The rate: tokens at par->rate bytes/s, at most burst() saved up. */
static uint64_t tokens(struct fn_pace *p, const struct fn_params *par, uint64_t now, uint64_t want,
		       uint64_t *wake)
{
	double rate = (double)par->rate, cap = burst(par);
	p->tokens += (double)(now - p->tok_ns) * rate / NS;
	p->tok_ns = now;
	if (p->tokens > cap)
		p->tokens = cap;
	if (p->tokens >= 1)
		return want < (uint64_t)p->tokens ? want : (uint64_t)p->tokens;
	double need = (double)want < cap ? (double)want : cap;
	wake_by(wake, now + (uint64_t)((need - p->tokens) * NS / rate) + 1);
	return 0;
}

/* The drip: par->bytes every par->every_ms, never saved up. */
static uint64_t drip(struct fn_pace *p, const struct fn_params *par, uint64_t now, uint64_t *wake)
{
	if (!p->drip_left && now >= p->drip_ns) {
		p->drip_left = par->bytes;
		p->drip_ns = now + par->every_ms * MS;
	}
	if (!p->drip_left)
		wake_by(wake, p->drip_ns);
	return p->drip_left;
}

/* Blackhole is among them: the shim's relay lets after_bytes bytes through
 * and then goes dark. The kernel-side backend never relays a blackhole
 * (bpf/compile.c refuses one after bytes or time), so one set serves both. */
bool fn_pace_after_action(enum fn_action a)
{
	return a == FN_ACT_STALL || a == FN_ACT_RESET || a == FN_ACT_CLOSE || a == FN_ACT_BLACKHOLE;
}

uint64_t fn_pace_allow(struct fn_pace *p, const struct fn_params *par, enum fn_action a,
		       uint64_t now, uint64_t out, uint64_t want, uint64_t *wake)
{
	uint64_t n = want;
	if (par->rate && n)
		n = tokens(p, par, now, n, wake);
	if (a == FN_ACT_DRIP && par->bytes && n) {
		uint64_t d = drip(p, par, now, wake);
		n = d < n ? d : n;
	}
	if (fn_pace_after_action(a) && par->after_bytes >= 0) {
		/* More out than the limit (a lower limit came in later) lets
		 * nothing more out: the subtraction must not wrap. */
		uint64_t lim = (uint64_t)par->after_bytes;
		uint64_t left = out < lim ? lim - out : 0;
		n = left < n ? left : n;
	}
	return n;
}

void fn_pace_spent(struct fn_pace *p, const struct fn_params *par, enum fn_action a, uint64_t n)
{
	if (par->rate)
		p->tokens -= (double)n;
	if (a == FN_ACT_DRIP)
		p->drip_left -= n < p->drip_left ? n : p->drip_left;
}

bool fn_pace_tripped(const struct fn_params *par, enum fn_action a, uint64_t out, uint64_t t0,
		     uint64_t now, uint64_t *wake)
{
	if (!fn_pace_after_action(a))
		return false;
	if (par->after_bytes >= 0)
		return out >= (uint64_t)par->after_bytes;
	if (par->after_ms < 0)
		return false;
	uint64_t at = t0 + (uint64_t)par->after_ms * MS;
	if (now >= at)
		return true;
	wake_by(wake, at);
	return false;
}
