/* h2log.c - FAULTNET_REQUESTS for HTTP/2: a line per stream, as the HTTP/1.1
 * engine writes one per request (preload/stats' reqlog.c): its request
 * head at the decision, its answer's status, headers and first byte as they
 * go to the app, written when the app's stream closes. */
#include "preload/h2/h2int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/http.h"

#define MS 1000000ull

static void copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* The kept headers of l (pseudo-headers are the line's own fields). */
static void kept(char *buf, size_t cap, size_t *len, const struct fn_hl *l)
{
	buf[0] = '\0';
	*len = 0;
	for (size_t i = 0; i < l->n; i++) {
		const nghttp2_nv *nv = &l->nv[i];
		if (nv->name[0] != ':' && fn_reqlog_wants((const char *)nv->name, nv->namelen))
			fn_reqlog_header(buf, cap, len, (const char *)nv->name,
					 (const char *)nv->value, nv->valuelen, nv->valuelen);
	}
}

void fn_h2_log_start(struct fn_h2 *h, struct fn_h2s *s, const struct fn_rule *r,
		     enum fn_req_fate fate, const char *host, const char *path)
{
	static const char *const fates[] = {"forwarded", "answered", "slowed", "aborted"};
	if (!h->logging || !(s->log = calloc(1, sizeof(*s->log))))
		return;
	struct fn_reqrec *lg = s->log;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	lg->wall_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	lg->req_ns = fn_now_ns();
	lg->conn = h->conn_id;
	lg->n = ++h->nreq;
	lg->https = h->tls;
	copy(lg->method, sizeof(lg->method), fn_hl_get(&s->reqh, ":method"));
	copy(lg->host, sizeof(lg->host), host);
	copy(lg->path, sizeof(lg->path), path);
	const char *q = strchr(fn_hl_get(&s->reqh, ":path"), '?');
	char query[1024];
	snprintf(query, sizeof(query), "%.*s", q ? (int)strcspn(q + 1, "#") : 0, q ? q + 1 : "");
	fn_reqlog_query(lg->query, sizeof(lg->query), query);
	copy(lg->rule, sizeof(lg->rule), r ? r->name : "");
	lg->fate = fates[fate];
	lg->rule_status = fate == FN_REQ_ANSWERED ? (r->http->status ? r->http->status : 200) : 0;
	lg->slowed_ms =
	    fate == FN_REQ_SLOWED && s->due > h->now ? (int64_t)((s->due - h->now) / MS) : 0;
	kept(lg->reqh, sizeof(lg->reqh), &lg->reqhlen, &s->reqh);
}

void fn_h2_log_answer(struct fn_h2s *s, const nghttp2_nv *nv, size_t n)
{
	struct fn_reqrec *lg = s->log;
	if (!lg || lg->first_ns)
		return;
	lg->first_ns = fn_now_ns();
	struct fn_hl l = {(nghttp2_nv *)nv, n, n};
	lg->status = atoi(fn_hl_get(&l, ":status"));
	kept(lg->resph, sizeof(lg->resph), &lg->resphlen, &l);
}

void fn_h2_log_end(struct fn_h2s *s)
{
	struct fn_reqrec *lg = s->log;
	if (!lg)
		return;
	lg->end_ns = fn_now_ns();
	lg->reached = s->u != 0;
	lg->resp_bytes = s->kind == SK_LOCAL ? s->boff : s->sent;
	fn_reqlog_write(lg);
	free(lg);
	s->log = NULL;
}
