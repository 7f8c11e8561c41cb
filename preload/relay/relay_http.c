/* relay_http.c - per-request HTTP faults (see relay_http.h). The app's
 * bytes are parsed with libhttp-parser; each request is decided once its
 * head is read, and its bytes (head and body) then go to the server or are
 * read and dropped. The server's bytes are parsed too, so that each answer
 * is known to end where it ends, and released to the app in request order:
 * an answer faultnet writes waits for the server's answers before it. */
#include "preload/relay/relay_http.h"

#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <linux/sockios.h>

#include "core/chance.h"
#include "core/clock.h"
#include "core/hparse.h"
#include "core/http.h"
#include "core/pathcat.h"
#include "core/rundir.h"
#include "core/startdata.h"
#include "preload/base/queue.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/base/say.h"
#include "preload/h2/h2.h"
#include "preload/relay/relay_tls.h"
#include "preload/relay/shape.h"
#include "preload/stats/stats.h"
#include "preload/tls/trust.h"

#define IN_BUF (128 * 1024) /* holds a request head up to the parser's limit */
#define OUT_MAX (256 * 1024)

enum hkind { HK_FORWARD, HK_ANSWER, HK_ABORT };

/* One request, from its head to the end of its answer. */
struct hreq {
	struct hreq *next;
	enum hkind kind;
	bool complete;	/* the request's last byte was read */
	bool head;	/* a HEAD request: its answer has no body */
	bool expect;	/* answered here, and the app waits for 100 Continue */
	bool started;	/* forward: the server's answer has begun */
	bool resp_done; /* forward: the server's final answer was parsed whole */
	bool resp_last; /* forward: and the server closes after it */
	uint64_t done_ns, first_ns, delay_ns;
	int mode;	     /* abort: FN_ABORT_*, also after after_bytes */
	int64_t after_bytes; /* forward: cut the answer after this many bytes */
	uint64_t resp_end;   /* forward: where its answer ends in the server's stream */
	uint64_t sent;	     /* forward: bytes of its answer passed on */
	char *answer;	     /* answer: the bytes faultnet sends */
	size_t alen;
	bool close_after;
	bool broken; /* taken here, and its body is one the parser rejects */
	/* Taken here behind a forwarded request still to be answered: its
	 * bytes, and all after, are held (see route) until it is the
	 * oldest request, so that they can still go to the server if the
	 * answers before it turn out to be unframeable (see unframed). */
	bool gate;
	uint64_t hold_from, hold_to; /* its bytes in the held stream */
	struct fn_reqrec *log;	     /* FAULTNET_REQUESTS: its line, or NULL */
};

struct fn_hconn {
	const struct fn_hparse *lib;
	http_parser req, res;
	struct fn_endpoint ep;
	struct hreq *head, *tail;
	struct hreq *parsing;	/* the request whose bytes are being read */
	struct hreq *answering; /* the forwarded request the server answers now */
	size_t uparsed;		/* dir[0]: [lo, lo + uparsed) parsed, not yet routed */
	uint64_t rabs;		/* server stream: bytes parsed */
	/* The request head being read. */
	char path[1024], host[256], field[64], expect[32];
	size_t pathlen, hostlen, expectlen, fieldlen;
	/* FAULTNET_REQUESTS (logging): the header being read, when kept, and
	 * the kept ones of the request head being read. */
	bool logging;
	uint64_t conn_id, nreq;
	char query[1024], val[512], rfield[64], rval[512];
	size_t vallen, valtotal, rfieldlen, rvallen, rvaltotal;
	bool rin_value;
	bool keep, rkeep; /* the header being read is kept (fn_reqlog_wants) */
	char reqh[FN_REQLOG_HDRS];
	size_t reqhlen;
	bool in_value, saw_url, not_http, upgrading;
	bool opaque_said; /* say_opaque has seen this connection */
	struct fn_queue toup, toapp;
	bool passthrough;     /* requests go on as bytes, untouched */
	bool down_raw;	      /* the server's bytes go on as bytes, untouched */
	bool fin_wanted;      /* FIN to the app once toapp is written */
	bool app_fin;	      /* FIN sent: what the app sends now is dropped, */
	bool up_fin;	      /* unless the FIN was the server's: then it goes on */
	bool app_dropped;     /* a request taken here went wrong: ditto */
	bool rules_off;	      /* the server's answers are unframeable: no rule */
	struct fn_queue held; /* app bytes behind a gate: [held_out, held_in) */
	uint64_t held_in, held_out;
	int gates; /* requests with gate set */
	bool up_started, up_ok, up_failed, up_shut;
	bool up_reset;	/* the server reset the connection: read to its end */
	bool app_reset; /* the app reset it: its last bytes go on, then the reset */
	bool up_last;	/* the server's last answer is out: it closes next */
	bool up_tcp;	/* the server's connect succeeded (up_ok: and its TLS) */
	bool up_paused; /* its TLS handshake waits for the app's (relay_tls.h) */
	int up_err;
	/* TLS (relay_tls.h): the first bytes were looked at; tls is set when
	 * they were a ClientHello the relay terminates, whose two handshakes
	 * are done once app_hs and up_hs are. */
	bool sniffed, app_hs, up_hs;
	struct fn_tls *tls;
	/* A tls rule's stall, reset or alert (core/http.h's FN_TLSF_), met at
	 * the ClientHello; the alert's code. */
	int tls_fault, tls_alert;
	/* HTTP/2 (preload/h2/h2.h): the app's first bytes were looked at for
	 * its preface, or its TLS handshake for ALPN h2; h2 is its engine. */
	bool h2_checked;
	struct fn_h2 *h2;
	/* h2c: the request head's Upgrade and HTTP2-Settings values; the
	 * forwarded request asking for it (its answer decides), the app's
	 * bytes held after it (h2c_wait), its 101 parsed (h2c_go). */
	char upg[32], h2set[300];
	size_t upglen, h2setlen;
	ptrdiff_t h2set_off; /* its value's offset from dir[0].lo, -1: unknown */
	struct hreq *h2c;
	bool h2c_wait, h2c_go, h2c_head;
};

static http_parser_settings req_settings, res_settings;

/* ---- buffers ------------------------------------------------------------ */

/* The app's (0) or the server's (1) socket, read and written as recv and
 * send do: through the TLS ends when the relay terminates the connection.
 * A socket whose queue a read emptied (it came back short, or found
 * nothing) is not read again until epoll reports input on it (its
 * direction's quiet, cleared by relay.c): that read would only fail with
 * EAGAIN. The level-triggered epoll reports whatever came since, also
 * what a read stopped short of (an urgent mark). */
static ssize_t io_recv(struct fn_conn *c, int side, int fd, void *buf, size_t n)
{
	struct fn_tls *t = c->http->tls;
	bool *quiet = &c->dir[side].quiet;
	if (t)
		return fn_tls_recv(t, side, fd, buf, n, quiet);
	if (*quiet) {
		errno = EAGAIN;
		return -1;
	}
	ssize_t k = LIBC(recv)(fd, buf, n, MSG_DONTWAIT);
	*quiet = k < 0 ? errno == EAGAIN : k > 0 && (size_t)k < n;
	return k;
}

static ssize_t io_send(struct fn_conn *c, int side, int fd, const void *buf, size_t n)
{
	struct fn_tls *t = c->http->tls;
	return t ? fn_tls_send(t, side, fd, buf, n)
		 : LIBC(sendto)(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
}

/* TLS records of side's still wait for room in its socket. */
static bool records_wait(const struct fn_conn *c, int side)
{
	return c->http->tls && fn_tls_waiting(c->http->tls, side);
}

/* Writes what the socket takes. False on a fatal error. */
static bool obuf_flush(struct fn_conn *c, int side, struct fn_queue *b, int fd, bool *blocked)
{
	*blocked = false;
	if (c->http->tls && !fn_tls_flush(c->http->tls, side, fd, blocked))
		return false;
	while (!*blocked && fn_queue_pending(b)) {
		ssize_t w = io_send(c, side, fd, b->s + b->lo, fn_queue_pending(b));
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				*blocked = true;
				return true;
			}
			return false;
		}
		b->lo += (size_t)w;
	}
	*blocked = *blocked || records_wait(c, side);
	return true;
}

/* ---- the request side ----------------------------------------------------- */

static void append(char *dst, size_t cap, size_t *len, const char *p, size_t n)
{
	if (*len + n >= cap)
		n = *len < cap - 1 ? cap - 1 - *len : 0;
	memcpy(dst + *len, p, n);
	*len += n;
	dst[*len] = '\0';
}

static int on_req_begin(http_parser *p)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	h->pathlen = h->hostlen = h->expectlen = h->fieldlen = 0;
	h->path[0] = h->host[0] = h->expect[0] = h->field[0] = '\0';
	h->in_value = h->keep = false;
	h->reqhlen = h->vallen = h->valtotal = 0;
	h->reqh[0] = '\0';
	h->upglen = h->h2setlen = 0;
	h->upg[0] = h->h2set[0] = '\0';
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	h->saw_url = true;
	append(h->path, sizeof(h->path), &h->pathlen, at, n);
	return 0;
}

/* A value chunk of a kept header: its first bytes kept, all counted (a
 * credential's length is what the log says of it). */
static void keep_value(char *val, size_t cap, size_t *len, size_t *total, const char *at, size_t n)
{
	size_t room = cap - 1 - *len, k = n < room ? n : room;
	memcpy(val + *len, at, k);
	*len += k;
	*total += n;
}

/* The request header just read, if the log keeps it. */
static void req_header_done(struct fn_hconn *h)
{
	if (h->keep && h->in_value)
		fn_reqlog_header(h->reqh, sizeof(h->reqh), &h->reqhlen, h->field, h->fieldlen,
				 h->val, h->vallen, h->valtotal);
	h->vallen = h->valtotal = 0;
	h->keep = false;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	if (h->in_value) {
		req_header_done(h);
		h->fieldlen = 0;
	}
	h->in_value = false;
	append(h->field, sizeof(h->field), &h->fieldlen, at, n);
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	/* Whether the log keeps it, asked once, at its value's first bytes. */
	if (!h->in_value && h->logging)
		h->keep = fn_reqlog_wants(h->field, h->fieldlen);
	h->in_value = true;
	if (strcasecmp(h->field, "host") == 0)
		append(h->host, sizeof(h->host), &h->hostlen, at, n);
	else if (strcasecmp(h->field, "expect") == 0)
		append(h->expect, sizeof(h->expect), &h->expectlen, at, n);
	else if (strcasecmp(h->field, "upgrade") == 0)
		append(h->upg, sizeof(h->upg), &h->upglen, at, n);
	else if (strcasecmp(h->field, "http2-settings") == 0) {
		/* Where it is among the bytes not yet routed, when it came in
		 * one piece: rewritten there for the server (decide). */
		struct fn_dir *dr = &((struct fn_conn *)p->data)->dir[0];
		h->h2set_off = h->h2setlen ? -1 : at - (dr->buf + dr->lo);
		append(h->h2set, sizeof(h->h2set), &h->h2setlen, at, n);
	}
	if (h->keep)
		keep_value(h->val, sizeof(h->val), &h->vallen, &h->valtotal, at, n);
	return 0;
}

/* The path part of the request target: "/a/b" of "/a/b?x=1" or of
 * "http://host/a/b?x=1". */
static void target_path(char *t)
{
	char *start = t;
	if (strncasecmp(t, "http://", 7) == 0) {
		char *slash = strchr(t + 7, '/');
		start = slash ? slash : (char *)"/";
	}
	size_t n = strcspn(start, "?#");
	memmove(t, start, n);
	t[n] = '\0';
	if (!t[0])
		strcpy(t, "/");
}

static void ensure_upstream(struct fn_conn *c);
static struct hreq *awaiting(struct fn_hconn *h);

/* The request's line for FAULTNET_REQUESTS, begun once it is decided;
 * NULL when memory is short (the request goes unlogged, nothing else). */
static struct fn_reqrec *log_start(struct fn_hconn *h, const char *method, const struct fn_rule *r,
				   enum fn_req_fate fate, const struct hreq *e, uint64_t now)
{
	struct fn_reqhead hd = {h->conn_id, ++h->nreq, now,	 h->tls != NULL,     method,
				h->host,    h->path,   h->query, r ? r->name : NULL, h->reqh,
				h->reqhlen};
	struct fn_reqrec *lg = fn_reqlog_begin(&hd);
	if (!lg)
		return NULL;
	lg->fate = fn_req_fate_names[fate];
	lg->rule_status = fate == FN_REQ_ANSWERED ? r->http->status : 0;
	lg->slowed_ms = fate == FN_REQ_SLOWED ? (int64_t)(e->delay_ns / MS) : 0;
	return lg;
}

/* What the rules say of one request; its entry joins the queue. */
static struct hreq *decide(struct fn_conn *c, http_parser *p, uint64_t now)
{
	struct fn_hconn *h = c->http;
	struct hreq *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->after_bytes = -1;
	e->head = p->method == HTTP_HEAD;
	if (h->logging) {
		char *q = strchr(h->path, '?');
		h->query[0] = '\0';
		if (q) { /* h->path and h->query are the same size */
			size_t n = strcspn(q + 1, "#");
			memcpy(h->query, q + 1, n);
			h->query[n] = '\0';
		}
	}
	target_path(h->path);
	const char *method = h->lib->method_str((enum http_method)p->method);
	/* Host patterns name hosts: the header's port is not part of it. */
	char host[sizeof(h->host)];
	snprintf(host, sizeof(host), "%s", h->host);
	char *colon = strrchr(host, ':');
	if (colon && !strchr(colon, ']'))
		*colon = '\0';
	struct fn_http_req rq = {method, h->path, host};
	const struct fn_rule *seen = NULL, *r = NULL;
	struct fn_policy_hold hold; /* r and seen point into it: to the end */
	const struct fn_policy *pol = fn_policy_fresh(&hold);
	/* No rule decides once rules_off (see unframed), nor after the
	 * server's FIN was passed on: a request is then the server's, as
	 * directly (an answer could no longer reach the app, and a server that
	 * closed resets the app only if the request reaches it). */
	bool ruled = !h->rules_off && !(h->up_fin && h->app_fin);
	/* Upgrade: h2c is HTTP/2 to come, which the engine reads: the rules
	 * take the request as any other, and a 101 turns the rest into
	 * streams (h2c_switch). Other upgrades go on as bytes. */
	bool h2c = p->upgrade && p->method != HTTP_CONNECT && strcasestr(h->upg, "h2c") &&
		   h->h2setlen && h->h2setlen < sizeof(h->h2set) - 1;
	if ((p->upgrade && !h2c) || p->method == HTTP_CONNECT)
		h->upgrading = true; /* after it, bytes go through untouched */
	else if (ruled)
		r = fn_http_decide(pol, &h->ep, &rq, &seen);
	enum fn_req_fate fate = FN_REQ_UNTOUCHED;
	if (r && r->action == FN_ACT_RESPOND) {
		e->kind = HK_ANSWER;
		e->answer = fn_http_answer(r, e->head, &e->alen);
		e->delay_ns = r->par.delay_ms * MS;
		e->close_after = r->http->close;
		fate = FN_REQ_ANSWERED;
		if (!e->answer) {
			fn_policy_exit(&hold);
			free(e);
			return NULL;
		}
	} else if (r && r->action == FN_ACT_SLOW) {
		int64_t j = 0;
		if (r->par.jitter_ms)
			j = (int64_t)((fn_random(c->key, c->draws++) * 2 - 1) *
				      (double)r->par.jitter_ms * (double)MS);
		int64_t d = (int64_t)r->par.delay_ms * (int64_t)MS + j;
		e->delay_ns = d > 0 ? (uint64_t)d : 0;
		fate = FN_REQ_SLOWED;
	} else if (r && r->action == FN_ACT_ABORT && r->http->ping_unanswered) {
		r = NULL; /* HTTP/1.1 has no PING: the request goes on */
	} else if (r && r->action == FN_ACT_ABORT) {
		e->mode = r->http->mode;
		e->after_bytes = r->par.after_bytes;
		e->kind = e->after_bytes >= 0 ? HK_FORWARD : HK_ABORT;
		fate = FN_REQ_ABORTED;
	}
	e->expect = e->kind != HK_FORWARD && strcasecmp(h->expect, "100-continue") == 0;
	if (h2c && e->kind == HK_FORWARD && h->h2set_off >= 0) {
		h->h2c = e;
		h->h2c_head = e->head;
		struct fn_dir *dr = &c->dir[0];
		fn_h2_settings_for_server(dr->buf + dr->lo + h->h2set_off, h->h2setlen);
	}
	fn_stats_request(seen, r, &h->ep, method, h->host, h->path, fate);
	if (h->logging)
		e->log = log_start(h, method, r, fate, e, now);
	fn_policy_exit(&hold);
	return e;
}

static int on_req_headers(http_parser *p)
{
	struct fn_conn *c = p->data;
	struct fn_hconn *h = c->http;
	if (p->http_major != 1) {
		h->not_http = true; /* HTTP/2 or later: handled as a parse failure */
		return -1;
	}
	req_header_done(h);
	struct hreq *e = decide(c, p, fn_now_ns());
	if (!e)
		return -1;
	if (h->tail)
		h->tail->next = e;
	else
		h->head = e;
	h->tail = e;
	h->parsing = e;
	if (e->kind != HK_FORWARD && (h->gates || awaiting(h))) {
		e->gate = true;
		e->hold_from = e->hold_to = h->held_in;
		h->gates++;
	}
	if (e->kind == HK_FORWARD)
		ensure_upstream(c);
	return 0;
}

static int on_req_complete(http_parser *p)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	h->lib->pause(p, 1); /* the caller routes the request's last bytes */
	return 0;
}

/* App bytes bound for the server: held while a gate is closed. */
static void to_server(struct fn_conn *c, const char *p, size_t n)
{
	struct fn_hconn *h = c->http;
	if (!h->gates) {
		fn_queue_add(&h->toup, p, n);
		return;
	}
	if (fn_queue_add(&h->held, p, n))
		h->held_in += n;
}

/* The held stream's next n bytes go to the server, or nowhere. */
static void unhold(struct fn_hconn *h, uint64_t n, bool send)
{
	if (send && n)
		fn_queue_add(&h->toup, h->held.s + h->held.lo, (size_t)n);
	h->held.lo += (size_t)n;
	h->held_out += n;
}

/* Bytes [lo, lo + n) of the app's stream belong to the request being read:
 * to the server if it is forwarded (or held), else nowhere. */
static void route(struct fn_conn *c, size_t n)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[0];
	struct hreq *e = h->parsing;
	bool taken = !h->passthrough && e && e->kind != HK_FORWARD;
	bool forward = h->passthrough || (e && e->kind == HK_FORWARD);
	if (n && (forward || (taken && e->gate)))
		to_server(c, dr->buf + dr->lo, n);
	if (taken && e->gate)
		e->hold_to = h->held_in;
	if (e && e->log)
		e->log->req_bytes += n;
	dr->lo += n;
	h->uparsed -= n;
	if (dr->lo == dr->hi)
		dr->lo = dr->hi = 0;
}

static bool strict FN_START_DATA, ca_variable FN_START_DATA;

void fn_http_env_init(void)
{
	const char *v = secure_getenv("FAULTNET_STRICT");
	strict = v && *v && !fn_same(v, "0");
	const char *ca = secure_getenv("NODE_EXTRA_CA_CERTS");
	const char *java = secure_getenv("JAVA_TOOL_OPTIONS");
	/* Tested by hand (core/pathcat.h): a start with a CA bundle of its
	 * own named there paid strrchr, strcmp and strncmp's first calls. */
	const char *base = ca ? fn_last_slash(ca) : NULL;
	bool node = base && (fn_same(base, "/ca.pem") || fn_starts(base, "/ca.node-"));
	char dir[4096], store[4200];
	if ((!node && !(java && strstr(java, "/ca.java-"))) || fn_rundir(dir, sizeof(dir)))
		return;
	snprintf(store, sizeof(store), "-Djavax.net.ssl.trustStore=%s/ca.java-", dir);
	ca_variable =
	    (node && strlen(dir) == (size_t)(base - ca) && strncmp(ca, dir, strlen(dir)) == 0) ||
	    (java && strstr(java, store));
}

/* How the run's CA reached the process, as of this handshake: the trust
 * hook's count, and the variable. */
static void note_trust(void)
{
	fn_stats_tls_set(FN_TLS_TRUSTED_BY_HOOK, fn_trust_count());
	fn_stats_tls_set(FN_TLS_CA_VARIABLE, ca_variable);
}

/* Under --strict, the first connection of the process that HTTP rules
 * cover and cannot read, said once on stderr: where their faults did not
 * reach, not only that the run failed. */
static void say_opaque(struct fn_hconn *h, const char *what)
{
	static atomic_bool said;
	if (h->opaque_said || !strict)
		return;
	h->opaque_said = true;
	if (atomic_exchange(&said, true))
		return;
	char dest[80];
	fn_endpoint_format(&h->ep, dest, sizeof(dest));
	fn_say("faultnet: --strict: HTTP rules cover a connection to %s they cannot read (%s): "
	       "their faults do not reach it",
	       dest, what);
}

/* The parser gave up: what it has not routed, and all that follows, goes
 * to the server untouched. Reported once. */
static void give_up_parsing(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	/* Not HTTP when its very first line is not a request line (TLS, any
	 * other protocol) or names another version (HTTP/2's preface). */
	fn_stats_unparsed(&h->ep,
			  h->saw_url && !h->not_http ? FN_UNPARSED_REQUEST : FN_UNPARSED_NOT_HTTP);
	if (!(h->saw_url && !h->not_http))
		say_opaque(h, h->not_http ? "HTTP/2" : "not HTTP");
	if (h->parsing && h->parsing->kind != HK_FORWARD) {
		/* Inside a request a rule took: its bytes, and what follows,
		 * never were the server's. Faultnet, its server, ends the
		 * connection there (see release), as a server does on a
		 * request it cannot read. */
		h->parsing->broken = true;
		h->parsing = NULL;
		h->app_dropped = true;
		return;
	}
	h->passthrough = true;
	h->parsing = NULL;
	ensure_upstream(c);
	route(c, c->dir[0].hi - c->dir[0].lo);
	h->uparsed = 0;
}

static void parse_requests(struct fn_conn *c, uint64_t now)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[0];
	bool ended = (h->app_fin && !h->up_fin) || h->app_dropped;
	while (!h->passthrough && !ended && !h->h2c_wait && dr->lo + h->uparsed < dr->hi) {
		size_t n = h->lib->execute(&h->req, &req_settings, dr->buf + dr->lo + h->uparsed,
					   dr->hi - dr->lo - h->uparsed);
		h->uparsed += n;
		enum http_errno e = HTTP_PARSER_ERRNO(&h->req);
		if (e == HPE_PAUSED) { /* a request ends here */
			route(c, h->uparsed);
			if (h->parsing) {
				h->parsing->complete = true;
				h->parsing->done_ns = now;
			}
			h->parsing = NULL;
			h->lib->pause(&h->req, 0);
			if (h->upgrading)
				h->passthrough = true;
			/* Its answer says which protocol the app's next bytes are. */
			if (h->h2c)
				h->h2c_wait = true;
		} else if (e != HPE_OK) {
			give_up_parsing(c);
		} else {
			if (h->parsing) /* decided: its bytes go on as they come */
				route(c, h->uparsed);
			break;
		}
	}
	/* The app ended its side inside a request's head (a client that sends
	 * "G" and closes): no rule can decide on it any more, and the server
	 * reads those bytes and then the FIN, as it would directly. */
	if (dr->eof && !h->passthrough && !ended && !h->h2c_wait && !h->parsing &&
	    dr->lo < dr->hi) {
		h->passthrough = true;
		ensure_upstream(c);
	}
	bool drop = ended;
	if ((h->passthrough || drop) && dr->lo < dr->hi) {
		h->parsing = NULL;
		if (!drop)
			to_server(c, dr->buf + dr->lo, dr->hi - dr->lo);
		dr->lo = dr->hi = 0;
		h->uparsed = 0;
	}
}

/* ---- the server side ------------------------------------------------------ */

/* The forwarded request the server's next bytes answer. */
static struct hreq *awaiting(struct fn_hconn *h)
{
	if (h->answering)
		return h->answering;
	for (struct hreq *e = h->head; e; e = e->next)
		if (e->kind == HK_FORWARD && !e->resp_done)
			return h->answering = e;
	return NULL;
}

static int on_res_begin(http_parser *p)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	struct hreq *e = awaiting(h);
	if (e && !e->started) {
		e->started = true;
		e->first_ns = fn_now_ns();
	}
	h->rfieldlen = h->rvallen = h->rvaltotal = 0;
	h->rin_value = h->rkeep = false;
	h->rfield[0] = '\0';
	return 0;
}

/* The answer header just read, kept in its request's line if the log
 * keeps it. */
static void res_header_done(struct fn_hconn *h)
{
	struct hreq *e = h->rkeep && h->rin_value ? awaiting(h) : NULL;
	if (e && e->log)
		fn_reqlog_resp_header(e->log, h->rfield, h->rfieldlen, h->rval, h->rvallen,
				      h->rvaltotal);
	h->rvallen = h->rvaltotal = 0;
	h->rin_value = h->rkeep = false;
}

static int on_res_field(http_parser *p, const char *at, size_t n)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	if (!h->logging)
		return 0;
	if (h->rin_value) {
		res_header_done(h);
		h->rfieldlen = 0;
	}
	append(h->rfield, sizeof(h->rfield), &h->rfieldlen, at, n);
	return 0;
}

static int on_res_value(http_parser *p, const char *at, size_t n)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	if (!h->logging)
		return 0;
	if (!h->rin_value)
		h->rkeep = fn_reqlog_wants(h->rfield, h->rfieldlen);
	h->rin_value = true;
	if (h->rkeep)
		keep_value(h->rval, sizeof(h->rval), &h->rvallen, &h->rvaltotal, at, n);
	return 0;
}

static int on_res_headers(http_parser *p)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	struct hreq *e = awaiting(h);
	/* 1: this answer has no body, whatever its Content-Length says: the
	 * answer to a HEAD, a 204 or a 304 (RFC 9112 6.3). */
	bool bodyless = p->status_code == 204 || p->status_code == 304;
	res_header_done(h);
	if (e && e->log && p->status_code / 100 != 1)
		e->log->status = p->status_code;
	return e && (e->head || bodyless) ? 1 : 0;
}

static int on_res_complete(http_parser *p)
{
	struct fn_hconn *h = ((struct fn_conn *)p->data)->http;
	h->lib->pause(p, 1);
	return 0;
}

/* One of the server's answers was parsed whole, up to h->rabs. */
static void answer_parsed(struct fn_hconn *h)
{
	struct hreq *e = awaiting(h);
	int status = h->res.status_code;
	if (e && e == h->h2c && status / 100 != 1) { /* declined: HTTP/1.1 goes on */
		h->h2c = NULL;
		h->h2c_wait = false;
	}
	if (h->res.upgrade && e && e == h->h2c && status == 101)
		h->h2c_go = true; /* the rest is HTTP/2: h2c_switch */
	else if (h->res.upgrade)
		h->down_raw = true; /* 101: the rest is another protocol */
	if (!e || (status / 100 == 1 && status != 101))
		return; /* an interim answer (100 Continue): the final one follows */
	e->resp_done = true;
	/* Connection: close, HTTP/1.0 without keep-alive, or a body that
	 * runs to the server's close: nothing the server sends follows. */
	e->resp_last = !h->lib->keep_alive(&h->res);
	e->resp_end = h->rabs;
	h->answering = NULL;
}

/* The server's bytes go on unframed from here (an answer the parser
 * rejects, bytes no request asked for, a 101): no answer of faultnet's can
 * be placed after them any more. Requests still held behind a gate go to
 * the server after all, in their order, and no rule applies to the
 * connection from now on: it is relayed as bytes, as the app's answers
 * would come from the server directly. */
static void unframed(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	h->rules_off = true;
	for (struct hreq *e = h->head; e; e = e->next) {
		if (!e->gate)
			continue;
		e->gate = false;
		e->kind = HK_FORWARD;
		e->expect = false;
		if (e->log)
			e->log->fate = fn_req_fate_names[FN_REQ_UNTOUCHED];
		ensure_upstream(c);
	}
	h->gates = 0;
	unhold(h, h->held_in - h->held_out, true);
}

static void parse_answers(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[1];
	while (!h->down_raw && !h->h2c_go && h->rabs < dr->in) {
		if (!awaiting(h)) {
			/* Bytes no request asked for: passed on as they are. */
			h->down_raw = true;
			break;
		}
		const char *at = dr->buf + dr->lo + (h->rabs - dr->out);
		size_t n = h->lib->execute(&h->res, &res_settings, at, dr->in - h->rabs);
		h->rabs += n;
		enum http_errno e = HTTP_PARSER_ERRNO(&h->res);
		if (e == HPE_PAUSED) {
			answer_parsed(h);
			h->lib->pause(&h->res, 0);
		} else if (e != HPE_OK) {
			fn_stats_unparsed(&h->ep, FN_UNPARSED_RESPONSE);
			h->down_raw = true;
		} else {
			break;
		}
	}
	if (dr->eof && !h->down_raw && !h->h2c_go && !h->up_reset) {
		/* An answer that runs to the server's close ends here (not
		 * at a reset, which cuts it). */
		h->lib->execute(&h->res, &res_settings, NULL, 0);
		if (HTTP_PARSER_ERRNO(&h->res) == HPE_PAUSED) {
			answer_parsed(h);
			h->lib->pause(&h->res, 0);
		}
	}
	if (h->down_raw) {
		h->rabs = dr->in;
		if (!h->rules_off)
			unframed(c);
	}
}

/* ---- answers back to the app, in request order ---------------------------- */

/* The request's line, once its answer has ended (end_ns set), or its
 * connection has (unanswered says so). */
static void log_end(struct fn_hconn *h, struct hreq *e, const char *unanswered)
{
	struct fn_reqrec *lg = e->log;
	lg->reached = e->kind == HK_FORWARD && (e->started || h->up_ok);
	/* Done with, yet no byte of an answer came, and no rule cut it: the
	 * server (or the app) ended the connection first. */
	if (!unanswered && !lg->first_ns && strcmp(lg->fate, "aborted") != 0)
		unanswered = "connection closed";
	fn_reqlog_end(lg, unanswered);
	e->log = NULL;
}

/* The oldest request is done with; closed: its connection ended first. */
static void pop_as(struct fn_hconn *h, const char *closed)
{
	struct hreq *e = h->head;
	if (e->log)
		log_end(h, e, closed);
	h->head = e->next;
	if (!h->head)
		h->tail = NULL;
	if (h->answering == e)
		h->answering = NULL;
	if (h->h2c == e)
		h->h2c = NULL;
	if (h->parsing == e)
		h->parsing = NULL;
	free(e->answer);
	free(e);
}

static void pop(struct fn_hconn *h)
{
	pop_as(h, NULL);
}

/* An answer faultnet wrote: its status and kept headers, from its head. */
static void log_answer(struct hreq *e)
{
	struct fn_reqrec *lg = e->log;
	lg->first_ns = lg->end_ns = fn_now_ns();
	lg->resp_bytes = e->alen;
	lg->status = lg->rule_status;
	const char *p = memchr(e->answer, '\n', e->alen), *end = e->answer + e->alen;
	while (p && ++p < end && *p != '\r' && *p != '\n') {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon;
		eol = eol ? eol : end;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon && fn_reqlog_wants(p, (size_t)(colon - p))) {
			const char *v = colon + 1, *ve = eol;
			while (v < ve && *v == ' ')
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
				ve--;
			fn_reqlog_resp_header(lg, p, (size_t)(colon - p), v, (size_t)(ve - v),
					      (size_t)(ve - v));
		}
		p = eol;
	}
}

/* abort: a reset once the app has what went before, or a FIN. */
static void cut(struct fn_conn *c, int mode)
{
	struct fn_hconn *h = c->http;
	if (mode == FN_ABORT_CLOSE)
		h->fin_wanted = true;
	else
		c->reset_pending = true;
	if (c->up >= 0 && !h->up_shut) {
		/* The server's side of a cut request is of no more use. */
		fn_relay_watch(c, 1, 0);
		fn_relay_close(c, c->up, true);
		c->up = -1;
		h->up_failed = true;
		h->up_err = ECONNABORTED;
	}
}

/* The server is gone and the app has all it sent: the app's side ends
 * too, once the bytes before are out, as the server ended it (a FIN, or a
 * reset), and nothing queued after is answered. */
static void server_gone(struct fn_conn *c)
{
	if (c->http->up_reset) {
		c->reset_pending = true;
	} else {
		/* A server that only half-closed still reads: what the app
		 * sends after goes on to it, as it would directly. */
		c->http->fin_wanted = true;
		c->http->up_fin = true;
	}
}

/* Whether the server closed and the app has all it sent: then the app's
 * side ends too (see server_gone), as nothing queued after would be
 * answered by the server itself. */
static bool server_closed(struct fn_conn *c, const struct fn_dir *dr)
{
	if (!dr->eof || dr->out != dr->in)
		return false;
	server_gone(c);
	return true;
}

/* Passes on the head request's answer from the server; true when the
 * request is done with. */
static bool release_forward(struct fn_conn *c, struct hreq *e, uint64_t now)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[1];
	if (!e->started && !h->down_raw) {
		if (h->up_failed) {
			/* The server is gone: a reset, as the app would meet
			 * talking to it. */
			c->reset_pending = true;
			if (h->up_err)
				fn_stats_event(NULL, NULL, &h->ep,
					       h->up_err == ECONNABORTED ? "aborted"
									 : fn_errname(h->up_err));
			return false;
		}
		/* A server that closed (FIN) without answering: EOF, as the
		 * app would meet it, never a reset. */
		return server_closed(c, dr);
	}
	if (e->delay_ns && now < e->first_ns + e->delay_ns) {
		fn_shape_wake(c, e->first_ns + e->delay_ns);
		return false;
	}
	uint64_t end = h->down_raw ? dr->in : e->resp_done ? e->resp_end : h->rabs;
	if (e->after_bytes >= 0 && end - dr->out > (uint64_t)e->after_bytes - e->sent)
		end = dr->out + ((uint64_t)e->after_bytes - e->sent);
	size_t room = OUT_MAX - fn_queue_pending(&h->toapp);
	size_t n = end - dr->out < room ? (size_t)(end - dr->out) : room;
	if (n && !fn_queue_add(&h->toapp, dr->buf + dr->lo, n))
		return false;
	dr->lo += n;
	dr->out += n;
	e->sent += n;
	/* The step's time (the relay passes the bytes on in this step), never
	 * before the request's own, read later in the step. */
	uint64_t at = e->log && now < e->log->req_ns ? e->log->req_ns : now;
	if (e->log && n) {
		e->log->first_ns = e->log->first_ns ? e->log->first_ns : at;
		e->log->resp_bytes += n;
	}
	if (e->after_bytes >= 0 && e->sent >= (uint64_t)e->after_bytes) {
		if (e->log)
			e->log->end_ns = at;
		cut(c, e->mode);
		return true;
	}
	if (e->resp_done && dr->out == e->resp_end) {
		if (e->log)
			e->log->end_ns = at;
		/* The server said it closes after this answer: nothing
		 * after it is answered, and the app's side ends as the
		 * server's does (release). */
		c->http->up_last = e->resp_last;
		return true;
	}
	/* The server closed inside the answer (a body cut short, or one
	 * the parser could not frame): its bytes, then EOF. */
	return server_closed(c, dr);
}

/* e, taken here behind a gate, is now the oldest request: every answer
 * before it was framed. Its own bytes are dropped, as a request taken here
 * is, and the bytes after it go to the server up to the next gate. */
static void open_gate(struct fn_hconn *h, struct hreq *e)
{
	e->gate = false;
	h->gates--;
	unhold(h, e->hold_to - h->held_out, false);
	struct hreq *next = e->next;
	while (next && !next->gate)
		next = next->next;
	unhold(h, (next ? next->hold_from : h->held_in) - h->held_out, true);
}

/* The server answers nothing more (it said so, or closed): the requests
 * held behind a gate never will be answered, and the bytes after them go
 * on to the server as they would directly, so that the app's FIN reaches
 * it too (half_closes waits for no gate). */
static void open_gates(struct fn_hconn *h)
{
	for (struct hreq *e = h->head; e && h->gates; e = e->next)
		if (e->gate)
			open_gate(h, e);
}

/* The app closed its side and every byte it sent was parsed. */
static bool app_stream_over(const struct fn_conn *c)
{
	return c->dir[0].eof && c->dir[0].lo == c->dir[0].hi && !c->http->uparsed;
}

static void release(struct fn_conn *c, uint64_t now)
{
	struct fn_hconn *h = c->http;
	struct hreq *e;
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	while ((e = h->head) && !h->fin_wanted && !c->reset_pending && !h->up_last &&
	       fn_queue_pending(&h->toapp) < OUT_MAX) {
		if (e->gate)
			open_gate(h, e);
		if (e->expect) {
			fn_queue_add(&h->toapp, cont, sizeof(cont) - 1);
			e->expect = false;
		}
		if (e->kind == HK_FORWARD) {
			if (!release_forward(c, e, now))
				break;
			/* Answered before its body was all read (an early 401
			 * or 413): the rest of the body is still its own and
			 * goes on to the server; done with once read, or once
			 * the server closed (the app ended inside that body). */
			if (e == h->parsing && !h->fin_wanted) {
				server_closed(c, &c->dir[1]);
				break;
			}
			pop(h);
			continue;
		}
		if (!e->complete) {
			/* A request taken here that never completes (the app
			 * ended its side inside it, or sent a body the parser
			 * rejects): the connection ends there, as a server
			 * ends it on a client that stops mid-request or sends
			 * what it cannot read; an abort rule's cut for it. */
			if (e->broken && e->kind == HK_ABORT)
				cut(c, e->mode);
			else if (e->broken || app_stream_over(c))
				h->fin_wanted = true;
			else
				break;
			pop(h);
			break;
		}
		if (e->kind == HK_ABORT) {
			if (e->log)
				e->log->end_ns = fn_now_ns();
			cut(c, e->mode);
			pop(h);
			break;
		}
		if (now < e->done_ns + e->delay_ns) {
			fn_shape_wake(c, e->done_ns + e->delay_ns);
			break;
		}
		fn_queue_add(&h->toapp, e->answer, e->alen);
		if (e->log)
			log_answer(e);
		if (e->close_after)
			h->fin_wanted = true;
		pop(h);
	}
	struct fn_dir *dr = &c->dir[1];
	if (!h->head && !h->fin_wanted && !c->reset_pending && !h->h2c_go && dr->out < dr->in &&
	    (h->down_raw || !awaiting(h))) {
		size_t room = OUT_MAX - fn_queue_pending(&h->toapp);
		size_t n = dr->in - dr->out < room ? (size_t)(dr->in - dr->out) : room;
		fn_queue_add(&h->toapp, dr->buf + dr->lo, n);
		dr->lo += n;
		dr->out += n;
	}
	if (dr->lo == dr->hi)
		dr->lo = dr->hi = 0;
	/* Bytes passed through (not HTTP, TLS not terminated) to a server out
	 * of reach: the app meets a reset, as it would talking to it, rather
	 * than waiting for ever. */
	if (h->passthrough && h->up_failed && !h->head && !c->reset_pending) {
		c->reset_pending = true;
		if (h->up_err)
			fn_stats_event(NULL, NULL, &h->ep, fn_errname(h->up_err));
	}
	/* The server closed and every answer is out: so does the app's side. */
	if ((!h->head || h->up_last) && dr->eof && dr->out == dr->in && h->up_ok)
		server_gone(c);
	if (h->gates && (h->up_last || (dr->eof && dr->out == dr->in)))
		open_gates(h);
}

/* ---- sockets ---------------------------------------------------------------- */

/* Urgent data (MSG_OOB) is read in line, as a byte of the stream: the
 * engine carries bytes, not marks, and out of line the urgent byte would
 * be left in the relay's socket and lost. The other side gets it as an
 * ordinary byte (docs/relay-limits.md). */
static void inline_urgent(int fd)
{
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
}

static void ensure_upstream(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	if (h->up_started)
		return;
	h->up_started = true;
	if (c->up >= 0) { /* dialled at the app's connect (fn_conn_dial) */
		inline_urgent(c->up);
		return;
	}
	c->up = fn_conn_socket(c->dest.ss_family);
	inline_urgent(c->up);
	if (c->up < 0 || !fn_conn_connect(c->up, &c->dest, c->destlen)) {
		h->up_failed = true;
		h->up_err = errno;
		return;
	}
	c->watching[1] = FN_WATCH_NONE;
	fn_relay_watch(c, 1, EPOLLOUT);
}

/* The server's connect finished, one way or the other. */
static void upstream_progress(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	if (c->up < 0 || h->up_tcp || h->up_failed)
		return;
	int err = 0;
	socklen_t len = sizeof(err);
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	if (getsockopt(c->up, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (!err && LIBC(getpeername)(c->up, (struct sockaddr *)&peer, &plen) == 0) {
		h->up_tcp = true;
		h->up_ok = !h->tls; /* with TLS: once its handshake is done */
		/* Only its connect was watched (EPOLLOUT): whether it has
		 * spoken yet (a greeting) epoll says once it watches its input
		 * (watch), level-triggered; a read now would mostly find
		 * nothing. */
		c->dir[1].quiet = true;
		return;
	}
	if (err) {
		h->up_failed = true;
		h->up_err = err;
	}
}

/* Reads what the buffer has room for; false on a fatal error (a reset). */
static bool fill(struct fn_conn *c, int d, int fd)
{
	struct fn_dir *dr = &c->dir[d];
	struct fn_tls *t = c->http->tls;
	if (fd < 0 || dr->eof || (dr->quiet && !(t && fn_tls_buffered(t, d))))
		return true; /* nothing to read (io_recv) */
	if (dr->hi == dr->cap && dr->lo > 0) {
		memmove(dr->buf, dr->buf + dr->lo, dr->hi - dr->lo);
		dr->hi -= dr->lo;
		dr->lo = 0;
	}
	for (int i = 0; i < 16 && dr->hi < dr->cap; i++) {
		ssize_t n = io_recv(c, d, fd, dr->buf + dr->hi, dr->cap - dr->hi);
		if (n == 0) {
			dr->eof = true;
			return true;
		}
		if (n < 0 && errno == ECONNRESET) {
			/* A reset: every byte its end sent before is in; the
			 * other end gets them, then the reset (server_gone;
			 * app_gone), as a direct peer reads them. An app that
			 * closes with unread bytes resets: a TLS client's
			 * last alert must still reach the server. */
			dr->eof = true;
			*(d == 1 ? &c->http->up_reset : &c->http->app_reset) = true;
			return true;
		}
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		dr->hi += (size_t)n;
		dr->in += (uint64_t)n;
	}
	return true;
}

/* A FIN on side's socket, after a close_notify when it speaks TLS; false
 * while that close_notify waits for room. */
static bool fin(struct fn_conn *c, int side, int fd)
{
	struct fn_tls *t = c->http->tls;
	bool waiting = false;
	if (t) {
		fn_tls_close_notify(t, side);
		if (fn_tls_flush(t, side, fd, &waiting) && waiting)
			return false;
	}
	shutdown(fd, SHUT_WR);
	return true;
}

/* FINs: to the app once its answers are out and the rules or the server
 * said so; to the server once the app has sent everything. */
static void half_closes(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	if (h->fin_wanted && !h->app_fin && !fn_queue_pending(&h->toapp))
		h->app_fin = fin(c, 0, c->app);
	if (c->dir[0].eof && h->up_ok && !h->up_shut && !fn_queue_pending(&h->toup) && !h->gates &&
	    c->dir[0].lo == c->dir[0].hi)
		h->up_shut = fin(c, 1, c->up);
}

/* Whether the app's handshake may go on: the server's, if it is being
 * reached, is over (see tls_handshakes). */
static bool up_settled(const struct fn_hconn *h)
{
	return !h->up_started || h->up_failed || h->up_hs || h->up_paused;
}

/* TLS ends hold bytes already read from a socket that epoll will not
 * report: the connection is stepped again at once for them. */
static void tls_wake(struct fn_conn *c, bool app_reads, bool up_reads, uint64_t now)
{
	struct fn_hconn *h = c->http;
	if ((app_reads && h->app_hs && fn_tls_buffered(h->tls, 0)) ||
	    (up_reads && h->up_hs && fn_tls_buffered(h->tls, 1)))
		fn_shape_wake(c, now);
}

static void watch(struct fn_conn *c, bool app_blocked, bool up_blocked, uint64_t now)
{
	struct fn_hconn *h = c->http;
	uint32_t app = 0, up = 0;
	struct fn_dir *in = &c->dir[0], *down = &c->dir[1];
	bool in_room = in->hi < in->cap || in->lo > 0;
	bool app_reads = !in->eof && in_room &&
			 fn_queue_pending(&h->toup) + fn_queue_pending(&h->held) < OUT_MAX &&
			 (!h->tls || h->app_hs || up_settled(h));
	bool up_reads = false;
	if (app_reads)
		app |= EPOLLIN | EPOLLRDHUP;
	if (app_blocked || records_wait(c, 0))
		app |= EPOLLOUT;
	if (c->up >= 0) {
		bool down_room = down->hi < down->cap || down->lo > 0;
		up_reads = h->up_ok && !down->eof && down_room;
		if (!h->up_tcp && !h->up_failed)
			up |= EPOLLOUT;
		else if (up_reads || (h->tls && !h->up_hs && !h->up_failed))
			up |= EPOLLIN | EPOLLRDHUP;
		if (up_blocked || records_wait(c, 1))
			up |= EPOLLOUT;
		fn_relay_watch(c, 1, up);
	}
	fn_relay_watch(c, 0, app);
	if (h->tls)
		tls_wake(c, app_reads, up_reads, now);
}

/* The app reset the connection and the server has every byte it sent
 * before (or cannot take them): the reset goes on to the server. */
static bool app_gone(const struct fn_conn *c)
{
	const struct fn_hconn *h = c->http;
	return h->app_reset && c->dir[0].lo == c->dir[0].hi &&
	       (!h->up_ok || c->up < 0 || !fn_queue_pending(&h->toup));
}

/* Done: the app has closed its side and has everything it is owed. */
static bool finished(const struct fn_conn *c)
{
	const struct fn_hconn *h = c->http;
	return c->dir[0].eof && !fn_queue_pending(&h->toapp) && !records_wait(c, 0) &&
	       (!h->up_fin || h->up_shut || c->up < 0) &&
	       (h->app_fin || (!h->head && (c->up < 0 || c->dir[1].eof || h->up_failed)));
}

/* A server past its FIN is read no more: its reset (met by the app's
 * bytes sent after the FIN) is noticed by epoll's EPOLLERR, and passed on
 * once the app has what came before, as the app's kernel would have met
 * it, not at the relay's next write to the server. */
static void server_reset(struct fn_conn *c)
{
	struct fn_dir *dr = &c->dir[1];
	int err = 0;
	socklen_t len = sizeof(err);
	if (!dr->err_seen || !dr->eof || c->up < 0)
		return;
	dr->err_seen = false;
	if (getsockopt(c->up, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
	    (err == ECONNRESET || err == EPIPE))
		c->reset_pending = true;
}

/* ---- TLS ------------------------------------------------------------------ */

/* The app's handshake ends as a server refusing it ends it: a fatal alert
 * (desc, a TLS AlertDescription) in a plaintext record, then the close. */
static void alert_and_end(struct fn_conn *c, int desc)
{
	const char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, (char)desc};
	LIBC(sendto)(c->app, alert, sizeof(alert), MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
	fn_conn_finish(c, false);
}

/* The server failed verification: the app meets a failed handshake
 * (handshake_failure), never an answer it would trust. */
static void refuse(struct fn_conn *c)
{
	fn_stats_tls(&c->http->ep, FN_TLS_SERVER_UNVERIFIED);
	alert_and_end(c, 40);
}

/* The server was reached and refused the relay's handshake (an alert: no
 * shared cipher or version, an SNI callback's refusal; or a close or a
 * reset): the app's handshake meets the same, as it would directly. */
static void server_refused(struct fn_conn *c)
{
	bool reset;
	int alert = fn_tls_server_alert(c->http->tls, &reset);
	if (alert >= 0)
		alert_and_end(c, alert);
	else
		fn_conn_finish(c, reset);
}

/* Drives the two handshakes: the server's first, when it is being reached,
 * so that a server that fails verification fails the app's handshake too;
 * then the app's (also when the server is out of reach: requests the rules
 * answer need none). False once c is finished. */
static bool tls_handshakes(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	char why[300];
	bool unverified = false;
	if (h->up_tcp && !h->up_hs && !h->up_failed) {
		enum fn_tls_hs r = fn_tls_handshake(h->tls, 1, c->up, &c->dir[1].quiet, &unverified,
						    why, sizeof(why));
		if (r == FN_TLS_HS_FAILED && unverified) {
			refuse(c);
			return false;
		}
		if (r == FN_TLS_HS_FAILED) {
			server_refused(c);
			return false;
		}
		h->up_paused = r == FN_TLS_HS_PAUSED;
		h->up_hs = h->up_ok = r == FN_TLS_HS_DONE;
	}
	if (h->app_hs || !up_settled(h))
		return true;
	enum fn_tls_hs r =
	    fn_tls_handshake(h->tls, 0, c->app, &c->dir[0].quiet, &unverified, why, sizeof(why));
	if (r == FN_TLS_HS_FAILED) {
		/* The app refused the leaf (or went away): its own choice, which
		 * the paused server handshake meets as a rejected certificate. */
		fn_stats_tls(&h->ep, FN_TLS_REFUSED_BY_APP);
		note_trust();
		if (h->up_paused) {
			fn_tls_verdict(h->tls, false);
			fn_tls_handshake(h->tls, 1, c->up, &c->dir[1].quiet, &unverified, why,
					 sizeof(why));
		}
		fn_conn_finish(c, false);
		return false;
	}
	h->app_hs = r == FN_TLS_HS_DONE;
	if (h->app_hs) {
		fn_stats_tls(&h->ep, FN_TLS_TERMINATED);
		note_trust();
	}
	if (h->app_hs && fn_tls_downgraded(h->tls))
		fn_stats_tls(&h->ep, FN_TLS_ALPN_DOWNGRADED);
	if (h->app_hs && h->up_paused) { /* the server's handshake goes on */
		fn_tls_verdict(h->tls, true);
		h->up_paused = false;
		return tls_handshakes(c);
	}
	return true;
}

/* The rules on a ClientHello naming sni: the fault of the tls rule that
 * applies (0 for none), counted as an attempt on it; *untouched when no
 * rule takes the connection (no HTTP rule's match.host matches sni). */
static int tls_rules(struct fn_conn *c, const char *sni, bool *untouched)
{
	static const char *const outcome[FN_TLSF_COUNT] = {
	    "passed",	       "tls-stall",	      "tls-reset",	"tls-alert",
	    "tls-expired",     "tls-not-yet-valid",   "tls-wrong-host", "tls-unknown-issuer",
	    "tls-self-signed", "tls-incomplete-chain"};
	struct fn_hconn *h = c->http;
	struct fn_policy_hold hold; /* r and seen point into it: to the end */
	const struct fn_policy *pol = fn_policy_fresh(&hold);
	const struct fn_rule *seen = NULL, *r = fn_tls_decide(pol, &h->ep, sni, &seen);
	*untouched = !r && !fn_http_sni_covered(pol, &h->ep, sni);
	int fault = r ? r->http->tls_fault : 0;
	h->tls_alert = r ? r->http->tls_alert : 0;
	if (seen)
		fn_stats_attempt(-1, r, seen, &h->ep, FN_PROTO_TCP, outcome[fault], 0);
	fn_policy_exit(&hold);
	return fault;
}

/* The app's first bytes: a ClientHello the relay terminates starts the
 * TLS ends, and the server is reached at once, to be verified before the
 * app's handshake is answered; one a tls rule faults meets its fault, one
 * no rule's host takes goes on untouched. False while more bytes are
 * needed. */
static bool sniff(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[0];
	if (dr->lo == dr->hi && !dr->eof) {
		/* A server that speaks first (SMTP, FTP, POP, IMAP) is no TLS
		 * server, whose client always speaks first: its greeting goes
		 * to the app now, never held until the app writes. */
		if (c->dir[1].hi == c->dir[1].lo && !c->dir[1].eof)
			return false;
		h->sniffed = true;
		return true;
	}
	struct fn_hello hello;
	enum fn_tls_first r = fn_tls_hello(dr->buf + dr->lo, dr->hi - dr->lo, &hello);
	if (r == FN_TLS_WAIT && !dr->eof && dr->hi < dr->cap)
		return false;
	h->sniffed = true;
	if (r != FN_TLS_TERMINATE && r != FN_TLS_OTHER_ALPN)
		return true;
	bool untouched;
	int fault = tls_rules(c, hello.sni, &untouched);
	if (fault == FN_TLSF_STALL || fault == FN_TLSF_RESET || fault == FN_TLSF_ALERT) {
		h->tls_fault = fault;
		dr->lo = dr->hi = 0;
		return true;
	}
	if (untouched) {
		h->passthrough = true; /* the server's own handshake, as directly */
		return true;
	}
	const char *why = NULL;
	if (r == FN_TLS_TERMINATE || fault)
		r = fn_tls_first(dr->buf + dr->lo, dr->hi - dr->lo, &hello,
				 (const struct sockaddr *)&c->dest, fault, &h->tls, &why);
	if (r == FN_TLS_TERMINATE) {
		dr->lo = dr->hi = 0;
		if (fault) { /* no server: forwarded requests meet a reset */
			h->up_failed = true;
			h->up_err = ECONNRESET;
		}
		ensure_upstream(c);
	} else if (r == FN_TLS_OTHER_ALPN || why) {
		/* Passed through: the engine counts it as not HTTP too. */
		fn_stats_tls(&h->ep, r == FN_TLS_OTHER_ALPN ? FN_TLS_PASSED_OTHER_ALPN
							    : FN_TLS_PASSED_UNAVAILABLE);
		say_opaque(h, r == FN_TLS_OTHER_ALPN
				  ? "TLS whose ALPN offers neither h2 nor http/1.1, passed through"
				  : "TLS passed through: termination unavailable");
	}
	return true;
}

/* A tls rule's stall, reset or alert, once the ClientHello is in: a reset;
 * a fatal alert, then the end, as a server refusing the handshake; or no
 * answer at all, what the app sends read and dropped until it gives up. */
static void handshake_fault(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	if (h->tls_fault == FN_TLSF_RESET) {
		fn_conn_finish(c, true);
		return;
	}
	if (h->tls_fault == FN_TLSF_ALERT) {
		alert_and_end(c, h->tls_alert);
		return;
	}
	char sink[4096];
	ssize_t n;
	while ((n = LIBC(recv)(c->app, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		fn_conn_finish(c, false);
		return;
	}
	fn_relay_watch(c, 0, EPOLLIN | EPOLLRDHUP);
	if (c->up >= 0)
		fn_relay_watch(c, 1, 0);
}

/* ---- HTTP/2 ------------------------------------------------------------------ */

/* HTTP/2 starts: the app's preface in clear text, or h2 chosen by ALPN.
 * Without the library, its bytes go on untouched, said as HTTP/1.1's
 * unreadable ones are. */
static void h2_start(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	const char *why = NULL;
	h->h2 = fn_h2_new(&h->ep, c->key, h->tls != NULL, c->up >= 0 && !h->up_failed, h->conn_id,
			  &why);
	if (!h->h2) {
		fn_stats_unparsed(&h->ep, FN_UNPARSED_NOT_HTTP);
		say_opaque(h, why ? why : "HTTP/2 engine unavailable");
		h->passthrough = true;
		return;
	}
	fn_stats_h2(NULL, &h->ep, FN_H2S_CONN, h->tls != NULL);
}

/* Whether the connection is HTTP/2: looked at once, at the app's first
 * bytes (or its finished TLS handshake). False while a prefix of the
 * preface leaves it open. */
static bool h2_check(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *dr = &c->dir[0];
	if (h->h2_checked || h->passthrough)
		return true;
	if (h->tls && !h->app_hs) /* ALPN is settled with the handshake */
		return true;
	if (h->tls) { /* h2 agreed on: the server speaks it from now on */
		h->h2_checked = true;
		if (fn_tls_h2(h->tls))
			h2_start(c);
		return true;
	}
	if (dr->lo == dr->hi) /* an HTTP/2 server's SETTINGS wait for the app's preface */
		return !fn_h2_server_first(c->dir[1].buf + c->dir[1].lo,
					   c->dir[1].hi - c->dir[1].lo);
	int r = fn_h2_preface(dr->buf + dr->lo, dr->hi - dr->lo);
	if (r < 0 && !dr->eof)
		return false;
	h->h2_checked = true;
	if (r == 1)
		h2_start(c);
	return true;
}

/* The 101 to an Upgrade: h2c request is out to the app: what follows on
 * both sides is HTTP/2, the request stream 1 of both sessions. */
static void h2c_switch(struct fn_conn *c, uint64_t now)
{
	struct fn_hconn *h = c->http;
	h->h2c_go = h->h2c_wait = false;
	h->h2_checked = true;
	h2_start(c);
	if (!h->h2) { /* no engine: on as bytes */
		h->down_raw = true;
		return;
	}
	if (!fn_h2_upgrade(h->h2, h->h2set, h->h2c_head)) {
		fn_conn_finish(c, true);
		return;
	}
	fn_shape_wake(c, now); /* bytes already read on both sides */
}

/* The bytes read go to the engine; false on the app's protocol error. */
static bool h2_input(struct fn_conn *c, uint64_t now, bool *fed)
{
	struct fn_hconn *h = c->http;
	struct fn_dir *in = &c->dir[0], *down = &c->dir[1];
	if (down->lo < down->hi) {
		ssize_t k = fn_h2_recv(h->h2, 1, down->buf + down->lo, down->hi - down->lo, now);
		*fed = *fed || k > 0;
		down->out += (uint64_t)k;
		down->lo += (size_t)k;
		if (down->lo == down->hi)
			down->lo = down->hi = 0;
	}
	if (h->up_failed || down->eof)
		fn_h2_server_gone(h->h2);
	if (in->lo < in->hi) {
		ssize_t k = fn_h2_recv(h->h2, 0, in->buf + in->lo, in->hi - in->lo, now);
		if (k < 0)
			return false;
		*fed = *fed || k > 0;
		in->lo += (size_t)k;
		if (in->lo == in->hi)
			in->lo = in->hi = 0;
	}
	uint64_t next = fn_h2_tick(h->h2, now);
	if (next)
		fn_shape_wake(c, next);
	return true;
}

/* The engine's output into the two buffers, OUT_MAX at most each; *full
 * when the app's stopped there, *made when there was any. False when
 * memory is short. */
static bool h2_output(struct fn_conn *c, bool *full, bool *made)
{
	struct fn_hconn *h = c->http;
	const char *p;
	size_t n = 0;
	while (fn_queue_pending(&h->toapp) < OUT_MAX && (n = fn_h2_out(h->h2, 0, &p))) {
		*made = true;
		if (!fn_queue_add(&h->toapp, p, n))
			return false;
	}
	*full = n != 0;
	while (fn_queue_pending(&h->toup) < OUT_MAX && (n = fn_h2_out(h->h2, 1, &p))) {
		*made = true;
		if (!fn_queue_add(&h->toup, p, n))
			return false;
	}
	enum fn_h2_state st = fn_h2_state(h->h2);
	if (st == FN_H2_RESET)
		c->reset_pending = true;
	else if (st != FN_H2_RUNNING)
		h->fin_wanted = true;
	return true;
}

/* In, then out while the app takes it. Whether anything went in or came
 * out. */
static bool h2_round(struct fn_conn *c, uint64_t now, bool *app_blocked, bool *moved)
{
	struct fn_hconn *h = c->http;
	if (!h2_input(c, now, moved))
		return false;
	for (int i = 0; i < 64; i++) {
		bool full;
		if (!h2_output(c, &full, moved) ||
		    !obuf_flush(c, 0, &h->toapp, c->app, app_blocked))
			return false;
		if (*app_blocked || !full)
			break;
	}
	return true;
}

/* One pass of an HTTP/2 connection. A side's bytes held at a gate (the
 * server's until the app's preface has gone out to it, the app's until
 * the server's SETTINGS are in) are fed again in the same pass once the
 * other side's round opened it: they are already read, so no event will
 * come for them (Java's h2c upgrade waited for its own timeout). */
static bool h2_pump(struct fn_conn *c, uint64_t now, bool *app_blocked)
{
	for (int round = 0; round < 8; round++) {
		bool moved = false;
		if (!h2_round(c, now, app_blocked, &moved))
			return false;
		bool held = c->dir[0].lo < c->dir[0].hi || c->dir[1].lo < c->dir[1].hi;
		if (!moved || !held)
			break;
	}
	return true;
}

void fn_http_pump(struct fn_conn *c, uint64_t now)
{
	struct fn_hconn *h = c->http;
	if (h->tls_fault) {
		handshake_fault(c);
		return;
	}
	/* The server is dialled at once, not at the first forwarded request:
	 * a server that speaks first (SMTP, FTP, POP, IMAP, a telnet banner)
	 * would otherwise wait for a request that waits for its greeting. Its
	 * greeting, asked for by no request, turns the connection into bytes
	 * (parse_answers). Unless the rules answer every request, it was
	 * dialled at the app's connect, which met its refusal (fn_conn_dial);
	 * otherwise it is dialled here, and a refusal is met at the first
	 * bytes forwarded. */
	ensure_upstream(c);
	upstream_progress(c);
	server_reset(c);
	if (h->tls && !tls_handshakes(c))
		return;
	int app = h->tls && !h->app_hs ? -1 : c->app;
	if (!fill(c, 0, app) || !fill(c, 1, h->up_ok ? c->up : -1)) {
		fn_conn_finish(c, true); /* a reset is passed on as a reset */
		return;
	}
	if (!h->sniffed) {
		if (!sniff(c)) {
			watch(c, false, false, now);
			return;
		}
		if (h->tls || h->tls_fault) { /* the handshakes start */
			fn_http_pump(c, now);
			return;
		}
	}
	if (!h2_check(c)) {
		watch(c, false, false, now);
		return;
	}
	bool app_blocked = false, up_blocked = false;
	if (h->h2 && !h2_pump(c, now, &app_blocked)) {
		fn_conn_finish(c, true);
		return;
	}
	if (!h->h2) {
		parse_requests(c, now);
		parse_answers(c);
	}
	/* Answers are released OUT_MAX at a time: while the app takes them
	 * all, release more, or the server's buffered bytes would wait for
	 * an event that never comes (nothing to read, the app not blocked). */
	for (; !h->app_reset && !h->h2;) { /* an app that reset is owed nothing */
		uint64_t out = c->dir[1].out;
		release(c, now);
		bool more = c->dir[1].out != out || fn_queue_pending(&h->toapp);
		if (!obuf_flush(c, 0, &h->toapp, c->app, &app_blocked)) {
			fn_conn_finish(c, true);
			return;
		}
		if (app_blocked || !more)
			break;
	}
	if (h->h2c_go && !h->head && !fn_queue_pending(&h->toapp)) {
		h2c_switch(c, now);
		if (c->done)
			return;
	}
	if (h->up_ok && !obuf_flush(c, 1, &h->toup, c->up, &up_blocked)) {
		fn_conn_finish(c, true);
		return;
	}
	if (app_gone(c)) {
		fn_conn_finish(c, true);
		return;
	}
	half_closes(c);
	if (c->reset_pending && !fn_queue_pending(&h->toapp) && !records_wait(c, 0)) {
		fn_conn_reset_when_sent(c, now);
		return;
	}
	if (finished(c)) {
		fn_conn_finish(c, false);
		return;
	}
	watch(c, app_blocked, up_blocked, now);
}

/* ---- set-up ----------------------------------------------------------------- */

static void settings_init(void)
{
	req_settings.on_message_begin = on_req_begin;
	req_settings.on_url = on_url;
	req_settings.on_header_field = on_field;
	req_settings.on_header_value = on_value;
	req_settings.on_headers_complete = on_req_headers;
	req_settings.on_message_complete = on_req_complete;
	res_settings.on_message_begin = on_res_begin;
	res_settings.on_header_field = on_res_field;
	res_settings.on_header_value = on_res_value;
	res_settings.on_headers_complete = on_res_headers;
	res_settings.on_message_complete = on_res_complete;
}

bool fn_http_conn_init(struct fn_conn *c)
{
	const char *why;
	const struct fn_hparse *lib = fn_hparse_get(&why);
	struct fn_hconn *h = lib ? calloc(1, sizeof(*h)) : NULL;
	char *bigger = h ? realloc(c->dir[0].buf, IN_BUF) : NULL;
	if (!h || !bigger) {
		free(h);
		return false;
	}
	c->dir[0].buf = bigger;
	c->dir[0].cap = IN_BUF;
	inline_urgent(c->app);
	if (!req_settings.on_message_begin)
		settings_init();
	h->lib = lib;
	fn_endpoint_from_sockaddr(&h->ep, (const struct sockaddr *)&c->dest, c->destlen);
	lib->init(&h->req, HTTP_REQUEST);
	lib->init(&h->res, HTTP_RESPONSE);
	h->req.data = h->res.data = c;
	static uint64_t conns; /* the relay thread's alone */
	h->conn_id = ++conns;
	h->logging = fn_reqlog_on();
	c->http = h;
	return true;
}

void fn_http_atfork_forget(struct fn_conn *c)
{
	if (!c->http)
		return;
	c->http->tls = NULL;
	/* The parent's requests are the parent's to log, not the child's. */
	for (struct hreq *e = c->http->head; e; e = e->next) {
		fn_reqlog_drop(e->log);
		e->log = NULL;
	}
}

void fn_http_conn_free(struct fn_conn *c)
{
	struct fn_hconn *h = c->http;
	if (!h)
		return;
	while (h->head)
		pop_as(h, "connection closed");
	fn_queue_free(&h->toup);
	fn_queue_free(&h->held);
	fn_queue_free(&h->toapp);
	fn_h2_free(h->h2);
	fn_tls_free(h->tls);
	free(h);
	c->http = NULL;
}
