/* requests.c - per-request counts of the HTTP relay: per rule (in the
 * rule's counters, which outlive policy versions) and per method, Host and
 * path prefix, so that a test can say "the SDK sent 3 requests for this
 * call". The relay thread is the only writer; the control thread reads. */
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "core/http.h"
#include "shim/stats/stats.h"

#define KEYS 256 /* beyond this many, counts go to the last slot, "other" */

struct reqkey {
	int state; /* 0 free, 2 ready (one writer: no claiming step) */
	char method[16], host[64], prefix[64];
	uint64_t n[4]; /* by enum fn_req_fate */
};

static struct reqkey keys[KEYS + 1];
static uint64_t unparsed[3]; /* by enum fn_unparsed */

void fn_stats_unparsed(const struct fn_endpoint *ep, enum fn_unparsed what)
{
	static const char *const names[] = {"not-http", "bad-request", "bad-response"};
	__atomic_add_fetch(&unparsed[what], 1, __ATOMIC_RELAXED);
	fn_stats_event(NULL, NULL, ep, names[what]);
}
static uint64_t nrequests;

uint64_t fn_stats_requests_seen(void)
{
	return __atomic_load_n(&nrequests, __ATOMIC_RELAXED);
}

static struct reqkey *key_for(const char *method, const char *host, const char *prefix)
{
	for (int i = 0; i < KEYS; i++) {
		struct reqkey *k = &keys[i];
		if (__atomic_load_n(&k->state, __ATOMIC_ACQUIRE) == 0) {
			snprintf(k->method, sizeof(k->method), "%s", method);
			snprintf(k->host, sizeof(k->host), "%s", host);
			snprintf(k->prefix, sizeof(k->prefix), "%s", prefix);
			__atomic_store_n(&k->state, 2, __ATOMIC_RELEASE);
			return k;
		}
		if (strncmp(k->method, method, sizeof(k->method) - 1) == 0 &&
		    strncmp(k->host, host, sizeof(k->host) - 1) == 0 &&
		    strncmp(k->prefix, prefix, sizeof(k->prefix) - 1) == 0)
			return k;
	}
	return &keys[KEYS];
}

static void add(uint64_t *v)
{
	__atomic_add_fetch(v, 1, __ATOMIC_RELAXED);
}

/* A rule's attempts are the requests its match covered, its faults the
 * requests it faulted; forwarded ones count against the rule that saw them. */
static void count_rule(const struct fn_rule *seen, const struct fn_rule *r, enum fn_req_fate f)
{
	struct fn_rulestat *s = seen ? seen->stat : NULL, *t = r ? r->stat : NULL;
	if (s) {
		add(&s->requests);
		add(&s->attempts);
	}
	if (t && t != s) {
		add(&t->requests);
		add(&t->attempts);
	}
	uint64_t *slot[] = {NULL, t ? &t->answered : NULL, t ? &t->slowed : NULL,
			    t ? &t->aborted : NULL};
	if (t) {
		add(&t->faults);
		add(slot[f]);
	} else if (s) {
		add(&s->forwarded);
	}
}

void fn_stats_request(const struct fn_rule *seen, const struct fn_rule *r,
		      const struct fn_endpoint *ep, const char *method, const char *host,
		      const char *path, enum fn_req_fate fate)
{
	char prefix[64];
	fn_http_prefix(path, prefix, sizeof(prefix));
	struct reqkey *k = key_for(method, host, prefix);
	__atomic_add_fetch(&nrequests, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&k->n[fate], 1, __ATOMIC_RELAXED);
	count_rule(seen, r, fate);
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

static void dump_key(struct fn_buf *b, const struct reqkey *k, const char *prefix)
{
	uint64_t n[4];
	for (int i = 0; i < 4; i++)
		n[i] = __atomic_load_n(&k->n[i], __ATOMIC_RELAXED);
	fn_buf_printf(b, "http pid=%d", (int)getpid());
	fn_buf_field(b, "method", k->method[0] ? k->method : "-");
	fn_buf_field(b, "host", k->host[0] ? k->host : "-");
	fn_buf_field(b, "path", prefix);
	fn_buf_printf(b, " requests=%llu forwarded=%llu answered=%llu slowed=%llu aborted=%llu\n",
		      (unsigned long long)(n[0] + n[1] + n[2] + n[3]), (unsigned long long)n[0],
		      (unsigned long long)n[1], (unsigned long long)n[2], (unsigned long long)n[3]);
}

void fn_stats_requests_dump(struct fn_buf *b)
{
	uint64_t u[3];
	for (int i = 0; i < 3; i++)
		u[i] = __atomic_load_n(&unparsed[i], __ATOMIC_RELAXED);
	if (u[0] || u[1] || u[2])
		fn_buf_printf(b, "parser pid=%d not_http=%llu bad_request=%llu bad_response=%llu\n",
			      (int)getpid(), (unsigned long long)u[0], (unsigned long long)u[1],
			      (unsigned long long)u[2]);
	for (int i = 0; i < KEYS; i++)
		if (__atomic_load_n(&keys[i].state, __ATOMIC_ACQUIRE) == 2)
			dump_key(b, &keys[i], keys[i].prefix);
	if (keys[KEYS].n[0] + keys[KEYS].n[1] + keys[KEYS].n[2] + keys[KEYS].n[3])
		dump_key(b, &keys[KEYS], "other");
}
