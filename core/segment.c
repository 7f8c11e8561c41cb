/* segment.c - a member's published state (segment.h): the rule names'
 * slots, and the control protocol's records made from a copy of it for
 * faultctl. Counters are read with relaxed loads: each is exact, a record's
 * fields together are a snapshot taken while the member runs. */
#include "core/segment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/http.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PROBES FN_SEG_RULE_PROBES

size_t fn_seg_rule_at(const char *name, unsigned i)
{
	return (size_t)((fn_hash_str(name) + i) % FN_SEG_RULES);
}

/* A new slot for name, its index entry e written last: a reader that finds
 * the entry finds the slot whole. */
static struct fn_seg_rule *claim_slot(struct fn_seg *s, uint16_t *e, const char *name)
{
	uint32_t k = s->h.rule_slots;
	if (k >= FN_SEG_RULES)
		return NULL;
	struct fn_seg_rule *r = &s->rules[k];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->order = -1;
	__atomic_store_n(&r->state, FN_SLOT_READY, __ATOMIC_RELEASE);
	__atomic_store_n(&s->h.rule_slots, k + 1, __ATOMIC_RELEASE);
	__atomic_store_n(e, (uint16_t)(k + 1), __ATOMIC_RELEASE);
	return r;
}

struct fn_seg_rule *fn_seg_rule_slot(struct fn_seg *s, const char *name, bool claim)
{
	uint64_t h = fn_hash_str(name);
	for (unsigned i = 0; i < PROBES; i++) {
		uint16_t *e = &s->rule_at[(h + i) % FN_SEG_RULES];
		unsigned v = __atomic_load_n(e, __ATOMIC_ACQUIRE);
		if (!v)
			return claim ? claim_slot(s, e, name) : NULL;
		/* A copy read from a file may hold anything: checked. */
		struct fn_seg_rule *r = v <= FN_SEG_RULES ? &s->rules[v - 1] : NULL;
		if (r && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == FN_SLOT_READY &&
		    strncmp(r->name, name, sizeof(r->name)) == 0)
			return r;
	}
	return NULL;
}

#define END(field) ((field)[sizeof(field) - 1] = '\0')

/* A bool read from a file may hold any byte, and loading one that is not 0
 * or 1 is undefined: the byte is made 0 or 1 first. */
static void fix_bool(bool *b)
{
	unsigned char c;
	memcpy(&c, b, 1);
	c = c != 0;
	memcpy(b, &c, 1);
}

void fn_seg_terminate(struct fn_seg *s, bool whole)
{
	END(s->h.group);
	END(s->h.config);
	END(s->h.start_zone);
	END(s->h.cmd);
	END(s->h.zone);
	/* Only what was read: the rest is zero, and writing it would only
	 * fault in pages nobody reads. */
	for (int i = 0; whole && i < FN_SEG_RULES; i++) {
		END(s->rules[i].name);
		END(s->rules[i].params);
	}
	for (int i = 0; whole && i <= FN_SEG_KEYS; i++) {
		END(s->keys[i].method);
		END(s->keys[i].host);
		END(s->keys[i].prefix);
	}
	for (int i = 0; whole && i <= FN_SEG_NAMES; i++)
		END(s->names[i].name);
	for (int i = 0; whole && i <= FN_SEG_DESTS; i++)
		fix_bool(&s->dests[i].ep.v4);
}

void fn_seg_info(const struct fn_seg *s, struct fn_buf *b)
{
	fn_buf_printf(b, "process pid=%d", (int)s->h.pid);
	fn_buf_field(b, "group", s->h.group);
	fn_buf_field(b, "zone", s->h.zone[0] ? s->h.zone : "-");
	fn_buf_printf(b, " rules=%u enabled=%u seq=%llu", s->h.nrules, s->h.enabled,
		      (unsigned long long)s->h.seq);
	fn_buf_field(b, "sockets",
		     s->h.unjoined	 ? "not joined: no covered call yet"
		     : s->h.sockets_seen ? "seen"
					 : "no socket calls seen");
	fn_buf_field(b, "cmd", s->h.cmd);
	fn_buf_add(b, "\nend\n", 5);
}

/* The slots of the policy in force, in its order (NULL-ended array). */
static const struct fn_seg_rule **in_order(const struct fn_seg *s)
{
	const struct fn_seg_rule **v = calloc(FN_SEG_RULES + 1, sizeof(*v));
	for (int i = 0; v && i < FN_SEG_RULES; i++) {
		int32_t o = s->rules[i].order;
		if (s->rules[i].state == FN_SLOT_READY && o >= 0 && o < FN_SEG_RULES && !v[o])
			v[o] = &s->rules[i];
	}
	/* Close the gaps a change in progress may have left. */
	int k = 0;
	for (int i = 0; v && i < FN_SEG_RULES; i++)
		if (v[i])
			v[k++] = v[i];
	if (v)
		v[k] = NULL;
	return v;
}

static void rule_head(struct fn_buf *b, const struct fn_seg *s, const struct fn_seg_rule *r)
{
	fn_buf_printf(b, "rule pid=%d", (int)s->h.pid);
	fn_buf_field(b, "name", r->name);
}

static const char *action_of(const struct fn_seg_rule *r)
{
	return r->action < FN_ACT_COUNT ? fn_action_name((enum fn_action)r->action) : "?";
}

static void unlisted_note(const struct fn_seg *s, struct fn_buf *b)
{
	if (s->h.unlisted)
		fn_buf_printf(b, "unlisted pid=%d rules=%u\n", (int)s->h.pid, s->h.unlisted);
}

/* A request rule (respond, slow, abort) counts requests; every other rule
 * (a tls rule's handshakes included) counts attempts: connects. */
static bool counts_requests(int action)
{
	return action == FN_ACT_RESPOND || action == FN_ACT_SLOW || action == FN_ACT_ABORT;
}

static void rules_record(struct fn_buf *b, const struct fn_seg *s, const char *name, int action,
			 bool enabled, const struct fn_rulecounts *n, const char *params)
{
	bool req = counts_requests(action);
	fn_buf_printf(b, "rule pid=%d", (int)s->h.pid);
	fn_buf_field(b, "name", name);
	fn_buf_printf(b, " action=%s enabled=%s faults=%llu %s=%llu",
		      (unsigned)action < FN_ACT_COUNT ? fn_action_name((enum fn_action)action)
						      : "?",
		      enabled ? "yes" : "no", (unsigned long long)(n ? LOAD(n->faults) : 0),
		      req ? "requests" : "attempts",
		      (unsigned long long)(n ? (req ? LOAD(n->requests) : LOAD(n->attempts)) : 0));
	fn_buf_field(b, "params", params);
	fn_buf_add(b, "\n", 1);
}

void fn_seg_rules(const struct fn_seg *s, struct fn_buf *b)
{
	const struct fn_seg_rule **v = in_order(s);
	for (int i = 0; v && v[i]; i++)
		rules_record(b, s, v[i]->name, v[i]->action, v[i]->enabled, &v[i]->n, v[i]->params);
	free(v);
	unlisted_note(s, b);
	fn_buf_add(b, "end\n", 4);
}

void fn_seg_rules_of(const struct fn_seg *s, const struct fn_policy *p, struct fn_buf *b)
{
	char params[FN_SEG_PARAMS];
	for (size_t i = 0; i < p->nrules; i++) {
		const struct fn_rule *r = &p->rules[i];
		/* No claim: the search only reads. */
		const struct fn_seg_rule *slot =
		    fn_seg_rule_slot((struct fn_seg *)s, r->name, false);
		fn_rule_describe(r, params, sizeof(params));
		rules_record(b, s, r->name, (int)r->action, r->enabled, slot ? &slot->n : NULL,
			     params);
	}
	fn_buf_add(b, "end\n", 4);
}

/* A request rule's line says requests (and what became of them), never
 * attempts; any other rule's says attempts, faults and bytes. */
static void rule_counts(struct fn_buf *b, const struct fn_seg *s, const struct fn_seg_rule *r)
{
	const struct fn_rulecounts *n = &r->n;
	rule_head(b, s, r);
	if (!counts_requests(r->action)) {
		fn_buf_printf(b, " action=%s attempts=%llu faults=%llu bytes=%llu\n", action_of(r),
			      (unsigned long long)LOAD(n->attempts),
			      (unsigned long long)LOAD(n->faults),
			      (unsigned long long)LOAD(n->bytes));
		return;
	}
	fn_buf_printf(b,
		      " action=%s requests=%llu faults=%llu answered=%llu slowed=%llu aborted=%llu "
		      "untouched=%llu to_server=%llu",
		      action_of(r), (unsigned long long)LOAD(n->requests),
		      (unsigned long long)LOAD(n->faults), (unsigned long long)LOAD(n->answered),
		      (unsigned long long)LOAD(n->slowed), (unsigned long long)LOAD(n->aborted),
		      (unsigned long long)LOAD(n->untouched),
		      (unsigned long long)LOAD(n->to_server));
	if (r->action == FN_ACT_RESPOND)
		fn_buf_printf(b, " status=%d", r->status);
	fn_buf_add(b, "\n", 1);
}

static void dest_record(struct fn_buf *b, const struct fn_seg *s, const struct fn_seg_dest *d,
			const char *name)
{
	fn_buf_printf(b, "dest pid=%d", (int)s->h.pid);
	fn_buf_field(b, "dest", name);
	fn_buf_printf(b,
		      " proto=%s attempts=%llu faults=%llu blackhole=%llu stall=%llu drop=%llu "
		      "bytes=%llu",
		      d->proto == FN_PROTO_UDP ? "udp" : "tcp",
		      (unsigned long long)LOAD(d->attempts), (unsigned long long)LOAD(d->faults),
		      (unsigned long long)LOAD(d->by_action[FN_ACT_BLACKHOLE]),
		      (unsigned long long)LOAD(d->by_action[FN_ACT_STALL]),
		      (unsigned long long)LOAD(d->by_action[FN_ACT_DROP]),
		      (unsigned long long)LOAD(d->bytes));
	/* The newer actions are listed only when they happened, so that the
	 * line stays short for the common ones. */
	for (int a = FN_ACT_REFUSE; a < FN_ACT_COUNT; a++) {
		uint64_t n = LOAD(d->by_action[a]);
		if (n)
			fn_buf_printf(b, " %s=%llu", fn_action_name((enum fn_action)a),
				      (unsigned long long)n);
	}
	fn_buf_add(b, "\n", 1);
}

static void dests(const struct fn_seg *s, struct fn_buf *b)
{
	char name[64];
	for (int i = 0; i < FN_SEG_DESTS; i++) {
		const struct fn_seg_dest *d = &s->dests[i];
		if (d->state != FN_SLOT_READY || !LOAD(d->attempts))
			continue;
		fn_endpoint_format(&d->ep, name, sizeof(name));
		dest_record(b, s, d, name);
	}
	if (LOAD(s->dests[FN_SEG_DESTS].attempts))
		dest_record(b, s, &s->dests[FN_SEG_DESTS], "other");
}

static void key_record(struct fn_buf *b, const struct fn_seg *s, const struct fn_seg_key *k,
		       const char *prefix)
{
	uint64_t n[5];
	for (int i = 0; i < 5; i++)
		n[i] = LOAD(k->n[i]);
	fn_buf_printf(b, "http pid=%d", (int)s->h.pid);
	fn_buf_field(b, "method", k->method[0] ? k->method : "-");
	fn_buf_field(b, "host", k->host[0] ? k->host : "-");
	fn_buf_field(b, "path", prefix);
	/* n: untouched, answered, slowed, aborted, then sent on to the server. */
	fn_buf_printf(b,
		      " requests=%llu untouched=%llu answered=%llu slowed=%llu aborted=%llu "
		      "to_server=%llu\n",
		      (unsigned long long)(n[0] + n[1] + n[2] + n[3]), (unsigned long long)n[0],
		      (unsigned long long)n[1], (unsigned long long)n[2], (unsigned long long)n[3],
		      (unsigned long long)n[4]);
}

/* The record's field names, in enum fn_seg_tls's order. */
const char *const fn_seg_tls_names[FN_SEG_TLS] = {
    "terminated",	 "passed_other_alpn", "passed_unavailable", "refused_by_app",
    "server_unverified", "alpn_downgraded",   "trusted_by_hook",    "ca_variable"};

static void tls_record(const struct fn_seg *s, struct fn_buf *b)
{
	uint64_t n[FN_SEG_TLS], any = 0;
	for (int i = 0; i < FN_SEG_TLS; i++)
		any |= n[i] = LOAD(s->h.tls[i]);
	if (!any)
		return;
	fn_buf_printf(b, "tls pid=%d", (int)s->h.pid);
	for (int i = 0; i < FN_SEG_TLS; i++)
		fn_buf_printf(b, " %s=%llu", fn_seg_tls_names[i], (unsigned long long)n[i]);
	fn_buf_add(b, "\n", 1);
}

/* A list's name for code i of n named ones (past them: any other code). */
static const char *h2_code(bool grpc, int i, int n)
{
	const char *name = grpc ? fn_grpc_status_name(i) : fn_h2_error_name(i);
	return i < n && name ? name : "other";
}

static const char *const h2_keys[] = {"grpc", "rst", "goaway"};

/* List k of h (0 gRPC statuses, 1 RST_STREAM codes, 2 GOAWAY codes); *n
 * its named codes. */
static uint64_t *h2_list(const struct fn_seg_h2 *h, int k, int *n)
{
	*n = k ? FN_SEG_H2_CODES : FN_SEG_GRPC_CODES;
	const uint64_t *v = k == 0 ? h->grpc : k == 1 ? h->rst : h->goaway;
	return (uint64_t *)v;
}

void fn_seg_h2_fields(const struct fn_seg_h2 *h, struct fn_buf *b)
{
	fn_buf_printf(b, " connections=%llu tls=%llu", (unsigned long long)LOAD(h->conns),
		      (unsigned long long)LOAD(h->tls));
	for (int k = 0; k < 3; k++) {
		int n;
		const uint64_t *v = h2_list(h, k, &n);
		bool any = false;
		for (int i = 0; i <= n; i++) {
			uint64_t c = LOAD(v[i]);
			if (!c)
				continue;
			if (!any)
				fn_buf_printf(b, " %s=", h2_keys[k]);
			fn_buf_printf(b, "%s%s:%llu", any ? "," : "", h2_code(!k, i, n),
				      (unsigned long long)c);
			any = true;
		}
	}
}

/* Adds a list's "NAME:COUNT,..." to list (n named codes). */
static void h2_add_list(uint64_t *list, int n, bool grpc, char *text)
{
	char *save = NULL;
	for (char *e = strtok_r(text, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(e, ':');
		if (!colon)
			continue;
		*colon = '\0';
		int i = grpc ? fn_grpc_status_of(e) : fn_h2_error_of(e);
		list[i >= 0 && i < n ? i : n] += strtoull(colon + 1, NULL, 10);
	}
}

void fn_seg_h2_add(struct fn_seg_h2 *h, const char *line)
{
	char *copy = strdup(line), *keys[16], *values[16];
	char *sp = copy ? strchr(copy, ' ') : NULL;
	int nf = 0;
	if (sp && fn_record_parse(sp + 1, keys, values, 16, &nf))
		for (int f = 0; f < nf; f++) {
			if (strcmp(keys[f], "connections") == 0)
				h->conns += strtoull(values[f], NULL, 10);
			else if (strcmp(keys[f], "tls") == 0)
				h->tls += strtoull(values[f], NULL, 10);
			for (int k = 0, n = 0; k < 3; k++) {
				uint64_t *list = h2_list(h, k, &n);
				if (strcmp(keys[f], h2_keys[k]) == 0)
					h2_add_list(list, n, !k, values[f]);
			}
		}
	free(copy);
}

static void h2_record(const struct fn_seg *s, struct fn_buf *b)
{
	const struct fn_seg_h2 *h = &s->h.h2;
	uint64_t any = LOAD(h->conns) | LOAD(h->tls);
	for (int k = 0, n; k < 3; k++) {
		const uint64_t *v = h2_list(h, k, &n);
		for (int i = 0; i <= n; i++)
			any |= LOAD(v[i]);
	}
	if (!any)
		return;
	fn_buf_printf(b, "h2 pid=%d", (int)s->h.pid);
	fn_seg_h2_fields(h, b);
	fn_buf_add(b, "\n", 1);
}

static void requests(const struct fn_seg *s, struct fn_buf *b)
{
	const uint64_t *u = s->h.unparsed;
	tls_record(s, b);
	h2_record(s, b);
	if (u[0] || u[1] || u[2])
		fn_buf_printf(b, "parser pid=%d not_http=%llu bad_request=%llu bad_response=%llu\n",
			      (int)s->h.pid, (unsigned long long)u[0], (unsigned long long)u[1],
			      (unsigned long long)u[2]);
	for (int i = 0; i < FN_SEG_KEYS; i++)
		if (s->keys[i].state == FN_SLOT_READY)
			key_record(b, s, &s->keys[i], s->keys[i].prefix);
	const uint64_t *o = s->keys[FN_SEG_KEYS].n;
	if (o[0] + o[1] + o[2] + o[3])
		key_record(b, s, &s->keys[FN_SEG_KEYS], "other");
}

static void name_record(struct fn_buf *b, const struct fn_seg *s, const struct fn_seg_name *n,
			const char *name)
{
	static const char *const keys[FN_LK_N] = {"lookups", "nxdomain", "servfail",
						  "nodata",  "timeout",	 "refused",
						  "delayed", "answered", "connects"};
	fn_buf_printf(b, "name pid=%d", (int)s->h.pid);
	fn_buf_field(b, "name", name);
	for (int k = 0; k < FN_LK_N; k++)
		fn_buf_printf(b, " %s=%llu", keys[k], (unsigned long long)LOAD(n->n[k]));
	fn_buf_add(b, "\n", 1);
}

static void names(const struct fn_seg *s, struct fn_buf *b)
{
	for (int i = 0; i < FN_SEG_NAMES; i++)
		if (s->names[i].state == FN_SLOT_READY)
			name_record(b, s, &s->names[i], s->names[i].name);
	const struct fn_seg_name *o = &s->names[FN_SEG_NAMES];
	if (o->n[FN_LK_LOOKUPS] || o->n[FN_LK_CONNECTS])
		name_record(b, s, o, "other");
}

void fn_seg_stats(const struct fn_seg *s, struct fn_buf *b)
{
	const struct fn_seg_rule **v = in_order(s);
	for (int i = 0; v && v[i]; i++)
		rule_counts(b, s, v[i]);
	free(v);
	/* Rules no longer in the policy keep their counts. */
	for (int i = 0; i < FN_SEG_RULES; i++)
		if (s->rules[i].state == FN_SLOT_READY && s->rules[i].order < 0)
			rule_counts(b, s, &s->rules[i]);
	unlisted_note(s, b);
	dests(s, b);
	requests(s, b);
	names(s, b);
}

static const char *event_action(const struct fn_seg_event *e)
{
	return e->action < 0 || e->action >= FN_ACT_COUNT
		   ? "none"
		   : fn_action_name((enum fn_action)e->action);
}

void fn_seg_event_record(struct fn_buf *b, const struct fn_seg_event *e, int pid, uint64_t seq)
{
	char dst[64];
	fn_endpoint_format(&e->ep, dst, sizeof(dst));
	fn_buf_printf(b, "event seq=%llu wall_us=%lld mono_us=%lld pid=%d fd=%d proto=%s",
		      (unsigned long long)seq, (long long)e->wall_us, (long long)e->mono_us, pid,
		      e->fd, e->proto == FN_PROTO_UDP ? "udp" : "tcp");
	fn_buf_field(b, "rule", e->rule);
	fn_buf_printf(b, " action=%s", event_action(e));
	fn_buf_field(b, "dest", dst);
	fn_buf_field(b, "outcome", e->outcome);
	fn_buf_add(b, "\n", 1);
}

size_t fn_seg_event_json(const struct fn_seg_event *e, int pid, char *line, size_t size)
{
	char dst[64];
	fn_endpoint_format(&e->ep, dst, sizeof(dst));
	/* Rule names and errno names need no JSON escaping: their
	 * characters are restricted to letters, digits and _.:- */
	int n = snprintf(line, size,
			 "{\"wall_us\":%lld,\"mono_us\":%lld,\"pid\":%d,\"fd\":%d,\"proto\":\"%s\","
			 "\"rule\":\"%s\",\"action\":\"%s\",\"dest\":\"%s\",\"outcome\":\"%s\"}\n",
			 (long long)e->wall_us, (long long)e->mono_us, pid, e->fd,
			 e->proto == FN_PROTO_UDP ? "udp" : "tcp", e->rule, event_action(e), dst,
			 e->outcome);
	return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

void fn_seg_events(const struct fn_seg *s, struct fn_buf *b, uint64_t *since)
{
	uint64_t head = __atomic_load_n(&s->h.ring_head, __ATOMIC_ACQUIRE);
	uint64_t from = *since;
	if (head - from > FN_SEG_EVENTS)
		from = head - FN_SEG_EVENTS; /* the older ones were overwritten */
	for (uint64_t seq = from; seq < head; seq++) {
		struct fn_seg_event copy = s->ring[seq % FN_SEG_EVENTS];
		if (__atomic_load_n(&s->ring[seq % FN_SEG_EVENTS].seq, __ATOMIC_ACQUIRE) !=
			seq + 1 ||
		    copy.seq != seq + 1)
			break; /* still being written: next time */
		copy.rule[sizeof(copy.rule) - 1] = copy.outcome[sizeof(copy.outcome) - 1] = '\0';
		fix_bool(&copy.ep.v4);
		fn_seg_event_record(b, &copy, (int)s->h.pid, seq);
		*since = seq + 1;
	}
}
