/* h2log.c - FAULTNET_REQUESTS for HTTP/2: a line per stream, as the HTTP/1.1
 * engine writes one per request (preload/stats' reqlog.c): its request
 * head at the decision, its answer's status, headers and first byte as they
 * go to the app, written when the app's stream closes. */
#include "preload/h2/h2int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/http.h"

#define MS 1000000ull

/* The kept headers of l (pseudo-headers are the line's own fields). */
static void kept(char *buf, size_t cap, size_t *len, const struct fn_hl *l)
{
	buf[0] = '\0';
	*len = 0;
	for (size_t i = 0; i < l->n; i++) {
		const nghttp2_nv *nv = &l->nv[i];
		if (nv->name[0] != ':' && fn_reqlog_wants((const char *)nv->name, nv->namelen))
			fn_reqlog_header(buf, cap, len, (const char *)nv->name, nv->namelen,
					 (const char *)nv->value, nv->valuelen, nv->valuelen);
	}
}

void fn_h2_log_start(struct fn_h2 *h, struct fn_h2s *s, const struct fn_rule *r,
		     enum fn_req_fate fate, const char *host, const char *path)
{
	if (!h->logging)
		return;
	const char *q = strchr(fn_hl_get(&s->reqh, ":path"), '?');
	char query[1024], reqh[FN_REQLOG_HDRS];
	snprintf(query, sizeof(query), "%.*s", q ? (int)strcspn(q + 1, "#") : 0, q ? q + 1 : "");
	size_t reqhlen;
	kept(reqh, sizeof(reqh), &reqhlen, &s->reqh);
	struct fn_reqhead hd = {h->conn_id,
				++h->nreq,
				fn_now_ns(),
				h->tls,
				fn_hl_get(&s->reqh, ":method"),
				host,
				path,
				query,
				r ? r->name : NULL,
				reqh,
				reqhlen};
	struct fn_reqrec *lg = s->log = fn_reqlog_begin(&hd);
	if (!lg)
		return;
	lg->fate = fn_req_fate_names[fate];
	lg->rule_status = fate == FN_REQ_ANSWERED ? (r->http->status ? r->http->status : 200) : 0;
	lg->slowed_ms =
	    fate == FN_REQ_SLOWED && s->due > h->now ? (int64_t)((s->due - h->now) / MS) : 0;
}

void fn_h2_log_answer(struct fn_h2s *s, const nghttp2_nv *nv, size_t n)
{
	struct fn_reqrec *lg = s->log;
	if (!lg || lg->first_ns)
		return;
	lg->first_ns = fn_now_ns();
	struct fn_hl l = {(nghttp2_nv *)nv, n, n};
	lg->status = atoi(fn_hl_get(&l, ":status"));
	for (size_t i = 0; i < n; i++)
		if (nv[i].name[0] != ':' &&
		    fn_reqlog_wants((const char *)nv[i].name, nv[i].namelen))
			fn_reqlog_resp_header(lg, (const char *)nv[i].name, nv[i].namelen,
					      (const char *)nv[i].value, nv[i].valuelen,
					      nv[i].valuelen);
}

void fn_h2_log_end(struct fn_h2s *s, const char *unanswered)
{
	struct fn_reqrec *lg = s->log;
	if (!lg)
		return;
	lg->end_ns = unanswered ? 0 : fn_now_ns();
	lg->reached = s->u != 0;
	lg->resp_bytes = s->kind == SK_LOCAL ? s->boff : s->sent;
	s->log = NULL;
	fn_reqlog_end(lg, unanswered);
}
