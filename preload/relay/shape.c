/* shape.c - the relay's shaping arithmetic: when bytes may go out under
 * latency, bandwidth, drip and after_bytes. No sockets and no clock of its
 * own: the pump passes the time in, so tests can too. */
#include "preload/relay/shape.h"

#include "core/chance.h"

#define MS 1000000ull
#define NS 1000000000.0

void fn_shape_wake(struct fn_conn *c, uint64_t t)
{
	if (t < c->wake_ns)
		c->wake_ns = t;
}

/* Latency: each read gets a release time, never earlier than the one
 * before, so that jitter cannot reorder bytes. */
void fn_shape_mark(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	int64_t j = 0;
	if (c->par.jitter_ms) {
		double u = fn_random(c->key, c->draws++) * 2 - 1;
		j = (int64_t)(u * (double)c->par.jitter_ms * (double)MS);
	}
	int64_t due = (int64_t)now + (int64_t)c->par.latency_ms * (int64_t)MS + j;
	uint64_t udue = due < (int64_t)now ? now : (uint64_t)due;
	if (udue < dr->last_due)
		udue = dr->last_due;
	dr->last_due = udue;
	struct fn_mark *m = &dr->marks[(dr->mhead + dr->mcount++) % FN_MARKS];
	m->end = dr->in;
	m->due = udue;
}

/* Latency and bandwidth combine (a slow link has both); each applies when
 * its number is set. */
bool fn_shape_has_latency(const struct fn_conn *c, const struct fn_dir *dr)
{
	return dr->faulted && c->par.latency_ms;
}

/* How many of the waiting bytes may go out now under latency. */
uint64_t fn_shape_released(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	while (dr->mcount) {
		struct fn_mark *m = &dr->marks[dr->mhead];
		if (m->due > now) {
			fn_shape_wake(c, m->due);
			break;
		}
		dr->released = m->end;
		dr->mhead = (dr->mhead + 1) % FN_MARKS;
		dr->mcount--;
	}
	return dr->released > dr->out ? dr->released - dr->out : 0;
}

uint64_t fn_shape_tokens(struct fn_conn *c, struct fn_dir *dr, uint64_t now, uint64_t want)
{
	double rate = (double)c->par.rate, cap = rate / 20 < 1460 ? 1460 : rate / 20;
	dr->tokens += (double)(now - dr->tok_ns) * rate / NS;
	dr->tok_ns = now;
	if (dr->tokens > cap)
		dr->tokens = cap;
	if (dr->tokens >= 1)
		return (uint64_t)dr->tokens;
	uint64_t need = want < (uint64_t)cap ? want : (uint64_t)cap;
	fn_shape_wake(c, now + (uint64_t)(((double)need - dr->tokens) * NS / rate) + 1);
	return 0;
}

/* Drip: bytes every every_ms, never saved up. */
uint64_t fn_shape_drip(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	if (!dr->drip_left && now >= dr->drip_ns) {
		dr->drip_left = c->par.bytes;
		dr->drip_ns = now + c->par.every_ms * MS;
	}
	if (!dr->drip_left)
		fn_shape_wake(c, dr->drip_ns);
	return dr->drip_left;
}

bool fn_shape_after_rule(const struct fn_conn *c)
{
	return c->action == FN_ACT_STALL || c->action == FN_ACT_RESET ||
	       c->action == FN_ACT_CLOSE || c->action == FN_ACT_BLACKHOLE;
}

/* How many bytes the rule lets out now. */
uint64_t fn_shape_allowance(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	uint64_t n = dr->hi - dr->lo;
	if (!dr->faulted || !n)
		return n;
	uint64_t lim = n;
	if (c->par.latency_ms)
		lim = fn_shape_released(c, dr, now);
	if (c->par.rate && lim) {
		uint64_t t = fn_shape_tokens(c, dr, now, lim);
		lim = t < lim ? t : lim;
	}
	if (c->action == FN_ACT_DRIP && lim) {
		uint64_t d = fn_shape_drip(c, dr, now);
		lim = d < lim ? d : lim;
	}
	if (fn_shape_after_rule(c) && c->par.after_bytes >= 0) {
		uint64_t left = (uint64_t)c->par.after_bytes - dr->out;
		lim = lim < left ? lim : left;
	}
	return lim < n ? lim : n;
}

void fn_shape_spent(struct fn_conn *c, struct fn_dir *dr, uint64_t n)
{
	if (!dr->faulted)
		return;
	if (c->par.rate)
		dr->tokens -= (double)n;
	if (c->action == FN_ACT_DRIP)
		dr->drip_left -= n;
}
