/* h2fault.c - the HTTP rules on an HTTP/2 stream: each request, once its
 * headers are in, is forwarded (held first under slow), answered here
 * (respond; a gRPC status as Trailers-Only), reset (RST_STREAM), refused
 * by a GOAWAY, or cut after the server's headers or N bytes of its answer;
 * a gRPC status after the server's own headers is the committed form. */
#include "preload/h2/h2int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/http.h"
#include "preload/base/policy.h"
#include "preload/stats/stats.h"

#define MS 1000000ull

static bool add(struct fn_hl *l, const char *name, const char *value)
{
	return fn_hl_add(l, (const uint8_t *)name, strlen(name), (const uint8_t *)value,
			 strlen(value), 0);
}

/* grpc-message is percent-encoded (gRPC's HTTP/2 protocol): every byte
 * outside printable ASCII, and '%' itself. */
static void pct_encode(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '%')
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
	}
	out[o] = '\0';
}

/* The gRPC status headers of rule r: grpc-status, grpc-message and
 * grpc-retry-pushback-ms, as trailers or in a Trailers-Only answer. */
static bool grpc_fields(struct fn_hl *l, const struct fn_http *r)
{
	char num[24], msg[1600];
	snprintf(num, sizeof(num), "%d", r->grpc_status);
	bool ok = add(l, "grpc-status", num);
	if (ok && r->grpc_message) {
		pct_encode(r->grpc_message, msg, sizeof(msg));
		ok = add(l, "grpc-message", msg);
	}
	if (ok && r->grpc_pushback_ms >= 0) {
		snprintf(num, sizeof(num), "%lld", (long long)r->grpc_pushback_ms);
		ok = add(l, "grpc-retry-pushback-ms", num);
	}
	return ok;
}

/* A respond rule's header lines ("Name: value\r\n") as HTTP/2 fields:
 * names lowercased, the connection-specific ones HTTP/2 forbids left out. */
static bool rule_headers(struct fn_hl *l, const char *lines)
{
	static const char *const banned[] = {"connection",	  "keep-alive", "proxy-connection",
					     "transfer-encoding", "upgrade",	NULL};
	for (const char *p = lines; p && *p;) {
		const char *eol = strstr(p, "\r\n"), *colon = strchr(p, ':');
		if (!eol || !colon || colon > eol)
			break;
		char name[128];
		size_t nl =
		    (size_t)(colon - p) < sizeof(name) - 1 ? (size_t)(colon - p) : sizeof(name) - 1;
		for (size_t i = 0; i < nl; i++)
			name[i] = (char)tolower((unsigned char)p[i]);
		name[nl] = '\0';
		const char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		bool skip = false;
		for (int i = 0; banned[i]; i++)
			skip = skip || strcmp(name, banned[i]) == 0;
		if (!skip && !fn_hl_add(l, (const uint8_t *)name, nl, (const uint8_t *)v,
					(size_t)(eol - v), 0))
			return false;
		p = eol + 2;
	}
	return true;
}

/* The answer a respond rule gives s: a gRPC Trailers-Only answer, or the
 * rule's status, headers and body. */
static bool local_answer(struct fn_h2s *s, const struct fn_rule *r, bool head)
{
	const struct fn_http *hr = r->http;
	char num[24];
	snprintf(num, sizeof(num), "%d", hr->status ? hr->status : 200);
	s->kind = SK_LOCAL;
	if (!add(&s->resph, ":status", num))
		return false;
	if (hr->grpc_status >= 0)
		return add(&s->resph, "content-type", "application/grpc") &&
		       grpc_fields(&s->resph, hr);
	if (!rule_headers(&s->resph, hr->headers))
		return false;
	if (hr->retry_after >= 0) {
		snprintf(num, sizeof(num), "%lld", (long long)hr->retry_after);
		if (!add(&s->resph, "retry-after", num))
			return false;
	}
	snprintf(num, sizeof(num), "%zu", hr->bodylen);
	if (!add(&s->resph, "content-length", num))
		return false;
	if (head || !hr->bodylen)
		return true;
	s->body = malloc(hr->bodylen);
	if (!s->body)
		return false;
	memcpy(s->body, hr->body, hr->bodylen);
	s->blen = hr->bodylen;
	return true;
}

/* A slow rule's hold: its delay, jittered by the connection's draws. */
static uint64_t slow_hold(struct fn_h2 *h, const struct fn_rule *r)
{
	int64_t j = 0;
	if (r->par.jitter_ms)
		j = (int64_t)((fn_random(h->key, h->draws++) * 2 - 1) * (double)r->par.jitter_ms *
			      (double)MS);
	int64_t d = (int64_t)r->par.delay_ms * (int64_t)MS + j;
	return d > 0 ? (uint64_t)d : 0;
}

/* An abort rule on s: a reset, a GOAWAY refusing it, a cut after the
 * server's headers or after_bytes, or the connection's end (mode). */
static bool abort_stream(struct fn_h2 *h, struct fn_h2s *s, const struct fn_rule *r)
{
	const struct fn_http *hr = r->http;
	if (hr->goaway >= 0) {
		fn_h2_app_preface(h);
		h->ng->nghttp2_submit_goaway(h->app, NGHTTP2_FLAG_NONE, h->last_taken,
					     (uint32_t)hr->goaway, NULL, 0);
		h->goaway_sent = true;
		s->kind = SK_DROPPED;
		fn_stats_h2(r, &h->ep, FN_H2S_GOAWAY, hr->goaway);
		return true;
	}
	if (hr->ping_unanswered) { /* the stream goes on; PINGs go nowhere */
		h->pings_dropped = true;
		return fn_h2_forward(h, s);
	}
	s->after_bytes = hr->rst_after == FN_RST_HEADERS ? 0 : r->par.after_bytes;
	s->rst_code = hr->rst_stream;
	s->cut_mode = hr->mode;
	if (hr->rst_stream >= 0)
		fn_stats_h2(r, &h->ep, FN_H2S_RST, hr->rst_stream);
	if (s->after_bytes >= 0)
		return fn_h2_forward(h, s);
	if (hr->rst_stream >= 0) {
		s->kind = SK_DROPPED;
		fn_h2_reset(h, s, hr->rst_stream);
		return true;
	}
	s->kind = SK_DROPPED;
	h->state = hr->mode == FN_ABORT_CLOSE ? FN_H2_CLOSE : FN_H2_RESET;
	return true;
}

/* What rule r does to s; fate is how it is counted. */
static bool apply(struct fn_h2 *h, struct fn_h2s *s, const struct fn_rule *r, bool head,
		  enum fn_req_fate *fate)
{
	if (!r)
		return fn_h2_forward(h, s);
	if (r->action == FN_ACT_SLOW) {
		*fate = FN_REQ_SLOWED;
		s->due = h->now + slow_hold(h, r);
		return fn_h2_forward(h, s);
	}
	if (r->action == FN_ACT_ABORT) {
		*fate = FN_REQ_ABORTED;
		return abort_stream(h, s, r);
	}
	*fate = FN_REQ_ANSWERED;
	const struct fn_http *hr = r->http;
	if (hr->grpc_status >= 0)
		fn_stats_h2(r, &h->ep, FN_H2S_GRPC, hr->grpc_status);
	if (hr->grpc_status >= 0 && hr->grpc_after_headers) {
		s->grpc_after = hr->grpc_status;
		return grpc_fields(&s->ans_tr, hr) && fn_h2_forward(h, s);
	}
	if (!local_answer(s, r, head))
		return false;
	s->due = h->now + (uint64_t)r->par.delay_ms * MS;
	if (s->due > h->now)
		return true; /* fn_h2_tick answers it */
	s->due = 0;
	return fn_h2_respond(h, s, s->resph.nv, s->resph.n, s->blen > 0);
}

bool fn_h2_decide(struct fn_h2 *h, struct fn_h2s *s)
{
	const char *method = fn_hl_get(&s->reqh, ":method");
	const char *auth = fn_hl_get(&s->reqh, ":authority");
	if (!auth[0])
		auth = fn_hl_get(&s->reqh, "host");
	char path[1024], host[256];
	snprintf(path, sizeof(path), "%s", fn_hl_get(&s->reqh, ":path"));
	path[strcspn(path, "?#")] = '\0';
	/* Host patterns name hosts: the authority's port is not part of it. */
	snprintf(host, sizeof(host), "%s", auth);
	char *colon = strrchr(host, ':');
	if (colon && !strchr(colon, ']'))
		*colon = '\0';
	struct fn_http_req rq = {method, path, host};
	const struct fn_rule *seen = NULL, *r = NULL;
	struct fn_policy_hold hold; /* r and seen point into it: to the end */
	const struct fn_policy *pol = fn_policy_fresh(&hold);
	if (!h->goaway_sent && strcmp(method, "CONNECT") != 0)
		r = fn_http_decide(pol, &h->ep, &rq, &seen);
	enum fn_req_fate fate = FN_REQ_UNTOUCHED;
	bool ok = apply(h, s, r, strcmp(method, "HEAD") == 0, &fate);
	/* Sent on to the server: the stream was submitted upstream (s->u). */
	fn_stats_request_to(seen, r, &h->ep, method, auth, path, fate, s->u != 0);
	fn_h2_log_start(h, s, r, fate, auth, path);
	if (s->submitted) /* answered here at once, before its line began */
		fn_h2_log_answer(s, s->resph.nv, s->resph.n);
	fn_policy_exit(&hold);
	return ok;
}

bool fn_h2_on_response(struct fn_h2 *h, struct fn_h2s *s)
{
	if (s->grpc_after < 0)
		return false;
	/* The server's headers go on, then the rule's status as trailers:
	 * the call was committed, the server's stream is cancelled. */
	s->kind = SK_LOCAL;
	fn_h2_drop_answer(h, s);
	fn_h2_respond(h, s, s->resph.nv, s->resph.n, true);
	return true;
}
