/* relay_follow.c - connections an established rule covers. They are relayed
 * from their first byte even while the rule is off, and carried untouched;
 * when the rule is enabled, the open connection meets what a route or ACL
 * change does to it (the first established rule in force that covers it,
 * in file order): blackhole and drop stop both directions and stop
 * acknowledging (go_dark), stall stops what the peer sends, reset resets,
 * latency, bandwidth and drip start shaping. When it is disabled again, the
 * flow comes back as it would with the route: the app's waiting bytes go
 * on (the relay's own filler thrown away), shaping stops; a reset stays
 * done. The relay looks again whenever the policy changed, and every 100 ms
 * while the rule is in force, so that a disable reaches a connection that
 * waits in silence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/actions.h"
#include "core/clock.h"
#include "preload/base/policy.h"
#include "preload/relay/relay_conn.h"
#include "preload/relay/shape.h"
#include "preload/stats/stats.h"

/* The first enabled established rule covering the connection: the fault
 * its route has now, in file order as for a new connection. */
static const struct fn_rule *in_force(const struct fn_policy *p, const struct fn_conn *c)
{
	for (size_t i = 0; p && i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		if (r->established && r->enabled &&
		    fn_rule_covers(p, r, &c->follow.peer, FN_PROTO_TCP))
			return r;
	}
	return NULL;
}

static void shape_from_now(struct fn_dir *dr, const struct fn_rule *r, int d, uint64_t now)
{
	if (!(r->par.direction & (d ? FN_DIR_DOWN : FN_DIR_UP)))
		return;
	if (r->par.latency_ms && !dr->marks &&
	    !(dr->marks = calloc(FN_MARKS, sizeof(struct fn_mark))))
		return; /* no memory for it: carried as before */
	/* What was read before the rule came in goes out as it would have. */
	dr->mhead = dr->mcount = 0;
	dr->released = dr->in;
	fn_pace_start(&dr->pace, &r->par, now);
	dr->faulted = true;
}

static void apply(struct fn_conn *c, const struct fn_rule *r, uint64_t now)
{
	c->action = r->action;
	c->par = r->par;
	switch (r->action) {
	case FN_ACT_BLACKHOLE:
	case FN_ACT_DROP:
		fn_conn_go_dark(c);
		c->follow.dark = true;
		break;
	case FN_ACT_STALL:
		c->dir[1].stopped = true;
		break;
	case FN_ACT_RESET:
		c->reset_pending = true;
		break;
	default: /* latency, bandwidth, drip: on what is read from now on */
		for (int d = 0; d < 2; d++)
			shape_from_now(&c->dir[d], r, d, now);
	}
	if (r->stat)
		__atomic_add_fetch(&r->stat->n->faults, 1, __ATOMIC_RELAXED);
	/* And an event: a pooled connection a live rule cut or slowed shows
	 * in faultctl events, not only in a count. */
	char outcome[40];
	snprintf(outcome, sizeof(outcome), "established-%s", fn_action_name(r->action));
	fn_stats_event(r, r, &c->follow.peer, outcome);
}

static void undo(struct fn_conn *c)
{
	if (c->follow.dark) {
		setsockopt(c->app, SOL_SOCKET, SO_RCVBUF, &c->follow.rcvbuf,
			   sizeof(c->follow.rcvbuf));
		c->follow.dark = false;
	}
	/* What a stopped direction missed is still in its socket. */
	for (int d = 0; d < 2; d++) {
		c->dir[d].stopped = false;
		c->dir[d].faulted = false;
	}
}

/* A look at p, which the caller holds a section on. */
static void look(struct fn_conn *c, const struct fn_policy *p, uint64_t now)
{
	const struct fn_rule *r = in_force(p, c);
	if (strcmp(r ? r->name : "", c->follow.rule) == 0)
		return;
	if (c->follow.on)
		undo(c);
	snprintf(c->follow.rule, sizeof(c->follow.rule), "%s", r ? r->name : "");
	c->follow.on = r != NULL;
	if (r) {
		apply(c, r, now);
		fn_shape_wake(c, now + 100 * MS);
	}
}

void fn_conn_follow(struct fn_conn *c, uint64_t now)
{
	struct fn_policy_hold h;
	const struct fn_policy *p = fn_policy_fresh(&h);
	if (c->follow.on)
		fn_shape_wake(c, now + 100 * MS);
	if (h.serial != c->follow.serial && !c->reset_pending) {
		c->follow.serial = h.serial;
		look(c, p, now);
	}
	fn_policy_exit(&h);
}
