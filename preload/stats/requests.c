/* requests.c - per-request counts of the HTTP relay: per rule (in the
 * rule's counters, which outlive policy versions) and per method, Host and
 * path prefix, so that a test can say "the SDK sent 3 requests for this
 * call". The relay thread is the only writer; faultctl reads them from
 * the member's published state (fn_seg). */
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "core/http.h"
#include "preload/stats/stats.h"

void fn_stats_unparsed(const struct fn_endpoint *ep, enum fn_unparsed what)
{
	static const char *const names[] = {"not-http", "bad-request", "bad-response"};
	__atomic_add_fetch(&fn_seg->h.unparsed[what], 1, __ATOMIC_RELAXED);
	fn_stats_event(NULL, NULL, ep, names[what]);
}
void fn_stats_tls(const struct fn_endpoint *ep, enum fn_seg_tls what)
{
	__atomic_add_fetch(&fn_seg->h.tls[what], 1, __ATOMIC_RELAXED);
	if (what == FN_TLS_TERMINATED)
		return;
	char outcome[24];
	snprintf(outcome, sizeof(outcome), "tls-%s", fn_seg_tls_names[what]);
	for (char *p = outcome; *p; p++)
		*p = *p == '_' ? '-' : *p;
	fn_stats_event(NULL, NULL, ep, outcome);
}

void fn_stats_tls_set(enum fn_seg_tls what, uint64_t v)
{
	__atomic_store_n(&fn_seg->h.tls[what], v, __ATOMIC_RELAXED);
}

/* Beyond FN_SEG_KEYS keys, counts go to the last slot, "other". */
static struct fn_seg_key *key_for(const char *method, const char *host, const char *prefix)
{
	struct fn_seg_key *keys = fn_seg->keys;
	for (int i = 0; i < FN_SEG_KEYS; i++) {
		struct fn_seg_key *k = &keys[i];
		fn_seg_touch(k, sizeof(*k));
		if (__atomic_load_n(&k->state, __ATOMIC_ACQUIRE) == FN_SLOT_FREE) {
			snprintf(k->method, sizeof(k->method), "%s", method);
			snprintf(k->host, sizeof(k->host), "%s", host);
			snprintf(k->prefix, sizeof(k->prefix), "%s", prefix);
			fn_slot_ready(&k->state);
			return k;
		}
		if (strncmp(k->method, method, sizeof(k->method) - 1) == 0 &&
		    strncmp(k->host, host, sizeof(k->host) - 1) == 0 &&
		    strncmp(k->prefix, prefix, sizeof(k->prefix) - 1) == 0)
			return k;
	}
	fn_seg_touch(&keys[FN_SEG_KEYS], sizeof(keys[0]));
	return &keys[FN_SEG_KEYS];
}

const char *const fn_req_fate_names[4] = {"untouched", "answered", "slowed", "aborted"};

static void add(uint64_t *v)
{
	__atomic_add_fetch(v, 1, __ATOMIC_RELAXED);
}

/* A rule's requests are those its match covered, its faults the requests
 * it faulted; untouched ones count against the rule that saw them. A
 * request is never an attempt (attempts are connects), and to_server
 * counts it whatever the rule did to it, once it was sent on. */
static void count_rule(const struct fn_rule *seen, const struct fn_rule *r, enum fn_req_fate f,
		       bool to_server)
{
	struct fn_rulecounts *s = seen && seen->stat ? seen->stat->n : NULL,
			     *t = r && r->stat ? r->stat->n : NULL;
	if (s) {
		add(&s->requests);
		if (to_server)
			add(&s->to_server);
	}
	if (t && t != s) {
		add(&t->requests);
		if (to_server)
			add(&t->to_server);
	}
	uint64_t *slot[] = {NULL, t ? &t->answered : NULL, t ? &t->slowed : NULL,
			    t ? &t->aborted : NULL};
	if (t) {
		add(&t->faults);
		add(slot[f]);
	} else if (s) {
		add(&s->untouched);
	}
}

/* HTTP/1.1 (the relay): a request goes on to the server unless a respond
 * rule answered it or an abort rule cut it before any byte of an answer
 * (after_bytes not given). */
static bool h1_to_server(const struct fn_rule *r, enum fn_req_fate fate)
{
	if (fate == FN_REQ_ANSWERED)
		return false;
	return fate != FN_REQ_ABORTED || (r && r->par.after_bytes >= 0);
}

void fn_stats_request(const struct fn_rule *seen, const struct fn_rule *r,
		      const struct fn_endpoint *ep, const char *method, const char *host,
		      const char *path, enum fn_req_fate fate)
{
	fn_stats_request_to(seen, r, ep, method, host, path, fate, h1_to_server(r, fate));
}

void fn_stats_request_to(const struct fn_rule *seen, const struct fn_rule *r,
			 const struct fn_endpoint *ep, const char *method, const char *host,
			 const char *path, enum fn_req_fate fate, bool to_server)
{
	char prefix[64];
	fn_http_prefix(path, prefix, sizeof(prefix));
	struct fn_seg_key *k = key_for(method, host, prefix);
	__atomic_add_fetch(&fn_seg->h.requests, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&k->n[fate], 1, __ATOMIC_RELAXED);
	if (to_server)
		__atomic_add_fetch(&k->n[FN_REQ_TO_SERVER], 1, __ATOMIC_RELAXED);
	count_rule(seen, r, fate, to_server);
	if (!r)
		return;
	char outcome[24];
	if (fate == FN_REQ_ANSWERED)
		snprintf(outcome, sizeof(outcome), "http-%d", r->http->status);
	else
		snprintf(outcome, sizeof(outcome), "%s",
			 fate == FN_REQ_SLOWED		   ? "slowed"
			 : r->http->mode == FN_ABORT_CLOSE ? "aborted-close"
							   : "aborted-reset");
	fn_stats_event(r, r, ep, outcome);
}
