/* h2sent.c - the "h2" record's counts: HTTP/2 connections the engine
 * (preload/h2/) carried, and the gRPC statuses, RST_STREAMs and GOAWAYs it
 * sent, by code, so that a test can say "the client met two UNAVAILABLE
 * and retried". A stream itself, and the fault its rule made of it, are
 * counted by fn_stats_request (per rule: requests, faults, answered or
 * aborted), once: the frame counted here is how that fault went out. */
#include <stdio.h>

#include "core/http.h"
#include "preload/stats/stats.h"

static void add(uint64_t *v)
{
	__atomic_add_fetch(v, 1, __ATOMIC_RELAXED);
}

/* The event's outcome: "grpc-UNAVAILABLE", "rst-REFUSED_STREAM",
 * "goaway-NO_ERROR"; the code's number where its name does not fit. */
static void outcome_of(enum fn_h2_sent what, int code, char *out, size_t len)
{
	static const char *const prefix[] = {"", "grpc-", "rst-", "goaway-"};
	const char *name = what == FN_H2S_GRPC ? fn_grpc_status_name(code) : fn_h2_error_name(code);
	int n = name ? snprintf(out, len, "%s%s", prefix[what], name) : -1;
	if (n < 0 || (size_t)n >= len)
		snprintf(out, len, "%s%d", prefix[what], code);
}

void fn_stats_h2(const struct fn_rule *r, const struct fn_endpoint *ep, enum fn_h2_sent what,
		 int code)
{
	struct fn_seg_h2 *h = &fn_seg->h.h2;
	uint64_t *list = what == FN_H2S_GRPC ? h->grpc : what == FN_H2S_RST ? h->rst : h->goaway;
	int n = what == FN_H2S_GRPC ? FN_SEG_GRPC_CODES : FN_SEG_H2_CODES;
	if (what == FN_H2S_CONN) {
		add(&h->conns);
		if (code)
			add(&h->tls);
		return;
	}
	add(&list[code >= 0 && code < n ? code : n]);
	char outcome[24];
	outcome_of(what, code, outcome, sizeof(outcome));
	/* A frame a rule made is an event of that rule; one the engine sent
	 * of its own (a reset relayed, a GOAWAY at its end) an event too. */
	fn_stats_event(r, r, ep, outcome);
}
