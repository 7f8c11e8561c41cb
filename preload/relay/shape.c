/* shape.c - the shim's relay on top of core/pace.c: the latency release
 * marks of the bytes in a direction's buffer, and how many bytes latency,
 * bandwidth, drip and after_bytes let out now. No sockets and no clock of
 * its own: the pump passes the time in, so tests can too. */
#include "preload/relay/shape.h"

#include "core/chance.h"
#include "core/pace.h"

void fn_shape_wake(struct fn_conn *c, uint64_t t)
{
	if (t < c->wake_ns)
		c->wake_ns = t;
}

/* Latency: each read gets a release time, never earlier than the one
 * before, so that jitter cannot reorder bytes. A draw is taken only under
 * jitter, so that draws count the jittered reads (as in bpf/pump.c). */
void fn_shape_mark(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	double draw = c->par.jitter_ms ? fn_random(c->key, c->draws++) * 2 - 1 : 0;
	struct fn_mark *m = &dr->marks[(dr->mhead + dr->mcount++) % FN_MARKS];
	m->end = dr->in;
	m->due = fn_pace_due(&dr->pace, &c->par, draw, now);
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

/* How many bytes the rule lets out now. */
uint64_t fn_shape_allowance(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	uint64_t n = dr->hi - dr->lo;
	if (!dr->faulted || !n)
		return n;
	uint64_t lim = n;
	if (c->par.latency_ms)
		lim = fn_shape_released(c, dr, now);
	if (lim)
		lim = fn_pace_allow(&dr->pace, &c->par, c->action, now, dr->out, lim, &c->wake_ns);
	return lim < n ? lim : n;
}

void fn_shape_spent(struct fn_conn *c, struct fn_dir *dr, uint64_t n)
{
	if (dr->faulted)
		fn_pace_spent(&dr->pace, &c->par, c->action, n);
}
