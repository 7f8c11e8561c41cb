/* pace.c - the relay's arithmetic (see pace.h). */
#include "bpf/pace.h"

#define MS 1000000ull

static void wake_by(uint64_t *wake, uint64_t t)
{
	if (t < *wake)
		*wake = t;
}

uint64_t fnb_pace_due(struct fnb_pace *p, const struct fn_params *par, double draw, uint64_t now)
{
	int64_t due = (int64_t)now + (int64_t)par->latency_ms * (int64_t)MS +
		      (int64_t)(draw * (double)par->jitter_ms * (double)MS);
	uint64_t u = due < (int64_t)now ? now : (uint64_t)due;
	if (u < p->last_due)
		u = p->last_due;
	return p->last_due = u;
}

/* The rate: tokens at par->rate bytes/s, at most 50 ms' worth saved up. */
static size_t tokens(struct fnb_pace *p, const struct fn_params *par, uint64_t now, size_t want,
		     uint64_t *wake)
{
	double rate = (double)par->rate, cap = rate / 20 < 1460 ? 1460 : rate / 20;
	p->tokens += (double)(now - p->tok_ns) * rate / 1e9;
	p->tok_ns = now;
	if (p->tokens > cap)
		p->tokens = cap;
	if (p->tokens >= 1)
		return want < (size_t)p->tokens ? want : (size_t)p->tokens;
	double need = (double)want < cap ? (double)want : cap;
	wake_by(wake, now + (uint64_t)((need - p->tokens) * 1e9 / rate) + 1);
	return 0;
}

/* The drip: par->bytes every par->every_ms, never saved up. */
static size_t drip(struct fnb_pace *p, const struct fn_params *par, uint64_t now, uint64_t *wake)
{
	if (!p->drip_left && now >= p->drip_ns) {
		p->drip_left = par->bytes;
		p->drip_ns = now + par->every_ms * MS;
	}
	if (!p->drip_left)
		wake_by(wake, p->drip_ns);
	return (size_t)p->drip_left;
}

static bool threshold_action(enum fn_action a)
{
	return a == FN_ACT_STALL || a == FN_ACT_RESET || a == FN_ACT_CLOSE;
}

size_t fnb_pace_allow(struct fnb_pace *p, const struct fn_params *par, enum fn_action a,
		      uint64_t now, size_t want, uint64_t *wake)
{
	size_t n = want;
	if (par->rate && n)
		n = tokens(p, par, now, n, wake);
	if (a == FN_ACT_DRIP && par->bytes && n) {
		size_t d = drip(p, par, now, wake);
		n = d < n ? d : n;
	}
	if (threshold_action(a) && par->after_bytes >= 0) {
		uint64_t lim = (uint64_t)par->after_bytes;
		size_t left = p->out < lim ? (size_t)(lim - p->out) : 0;
		n = left < n ? left : n;
	}
	return n;
}

void fnb_pace_spent(struct fnb_pace *p, const struct fn_params *par, enum fn_action a, size_t n)
{
	p->out += n;
	if (par->rate)
		p->tokens -= (double)n;
	if (a == FN_ACT_DRIP)
		p->drip_left -= n < p->drip_left ? n : p->drip_left;
}

bool fnb_pace_tripped(const struct fnb_pace *p, const struct fn_params *par, enum fn_action a,
		      uint64_t t0, uint64_t now, uint64_t *wake)
{
	if (!threshold_action(a))
		return false;
	if (par->after_bytes >= 0 && p->out >= (uint64_t)par->after_bytes)
		return true;
	if (par->after_ms < 0)
		return false;
	uint64_t at = t0 + (uint64_t)par->after_ms * MS;
	if (now >= at)
		return true;
	wake_by(wake, at);
	return false;
}
