/* h2.c - one HTTP/2 connection's two nghttp2 sessions and what passes
 * between them (see h2.h). Flow control is mirrored, not re-made: each
 * end's WINDOW_UPDATEs go to the other end, and the engine itself gives
 * back only what it kept from the other end (a stream answered or cut
 * here, padding), so the app meets the server's windows, never the
 * engine's. */
#include "preload/h2/h2int.h"

#include "core/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- header lists and byte queues ---------------------------------------- */

bool fn_hl_add(struct fn_hl *l, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen,
	       uint8_t flags)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		nghttp2_nv *nv = realloc(l->nv, cap * sizeof(*nv));
		if (!nv)
			return false;
		l->nv = nv;
		l->cap = cap;
	}
	uint8_t *n = malloc(nlen + 1), *v = malloc(vlen + 1);
	if (!n || !v) {
		free(n);
		free(v);
		return false;
	}
	memcpy(n, name, nlen);
	n[nlen] = '\0';
	memcpy(v, value, vlen);
	v[vlen] = '\0';
	l->nv[l->n++] = (nghttp2_nv){n, v, nlen, vlen, (uint8_t)(flags & NGHTTP2_NV_FLAG_NO_INDEX)};
	return true;
}

void fn_hl_clear(struct fn_hl *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->nv[i].name);
		free(l->nv[i].value);
	}
	l->n = 0;
}

static void hl_free(struct fn_hl *l)
{
	fn_hl_clear(l);
	free(l->nv);
	l->nv = NULL;
	l->cap = 0;
}

const char *fn_hl_get(const struct fn_hl *l, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < l->n; i++)
		if (l->nv[i].namelen == len && memcmp(l->nv[i].name, name, len) == 0)
			return (const char *)l->nv[i].value;
	return "";
}

/* ---- streams -------------------------------------------------------------- */

static struct fn_h2s *stream_of(struct fn_h2 *h, nghttp2_session *ses, int32_t id)
{
	return id > 0 ? h->ng->nghttp2_session_get_stream_user_data(ses, id) : NULL;
}

static struct fn_h2s *stream_new(struct fn_h2 *h, int32_t a)
{
	struct fn_h2s *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->a = a;
	s->after_bytes = -1;
	s->rst_code = -1;
	s->grpc_after = -1;
	s->next = h->streams;
	h->streams = s;
	return s;
}

static void stream_free(struct fn_h2 *h, struct fn_h2s *s)
{
	for (struct fn_h2s **p = &h->streams; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	hl_free(&s->reqh);
	hl_free(&s->req_tr);
	hl_free(&s->resph);
	hl_free(&s->resp_tr);
	hl_free(&s->ans_tr);
	fn_queue_free(&s->req);
	fn_queue_free(&s->resp);
	free(s->body);
	fn_h2_log_end(s, "connection closed");
	free(s);
}

/* Freed once neither session can name it any more. */
static void maybe_free(struct fn_h2 *h, struct fn_h2s *s)
{
	if (s->app_closed && (!s->u || s->up_closed))
		stream_free(h, s);
}

/* Window the engine kept from ses's peer (bytes it will never pass on),
 * given back on the connection and, while it is open, the stream. */
static void give_back(struct fn_h2 *h, nghttp2_session *ses, int32_t id, size_t n)
{
	if (!n || n > INT32_MAX)
		return;
	h->ng->nghttp2_submit_window_update(ses, NGHTTP2_FLAG_NONE, 0, (int32_t)n);
	if (id)
		h->ng->nghttp2_submit_window_update(ses, NGHTTP2_FLAG_NONE, id, (int32_t)n);
}

/* ---- data sources -------------------------------------------------------- */

/* The app's request body, towards the server. */
static ssize_t req_read(nghttp2_session *ses, int32_t id, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct fn_h2 *h = ud;
	struct fn_h2s *s = src->ptr;
	size_t n = fn_queue_take(&s->req, buf, length);
	if (!fn_queue_pending(&s->req) && s->req_end) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		if (s->req_tr.n) {
			*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			h->ng->nghttp2_submit_trailer(ses, id, s->req_tr.nv, s->req_tr.n);
		}
		return (ssize_t)n;
	}
	return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
}

/* The end of an answer: trailers if any, else END_STREAM on the data. */
static void answer_end(struct fn_h2 *h, nghttp2_session *ses, int32_t id, const struct fn_hl *tr,
		       uint32_t *flags)
{
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	if (tr->n) {
		*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
		h->ng->nghttp2_submit_trailer(ses, id, tr->nv, tr->n);
	}
}

/* The answer towards the app: a local one's body, or the server's, up to
 * an abort rule's after_bytes. */
static ssize_t resp_read(nghttp2_session *ses, int32_t id, uint8_t *buf, size_t length,
			 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct fn_h2 *h = ud;
	struct fn_h2s *s = src->ptr;
	if (s->kind == SK_LOCAL) {
		size_t n = s->blen - s->boff < length ? s->blen - s->boff : length;
		memcpy(buf, s->body + s->boff, n);
		s->boff += n;
		if (s->boff == s->blen)
			answer_end(h, ses, id, &s->ans_tr, flags);
		return (ssize_t)n;
	}
	size_t lim = length;
	if (s->after_bytes >= 0 && (uint64_t)s->after_bytes - s->sent < lim)
		lim = (size_t)((uint64_t)s->after_bytes - s->sent);
	size_t n = fn_queue_take(&s->resp, buf, lim);
	s->sent += n;
	if (s->after_bytes >= 0 && s->sent == (uint64_t)s->after_bytes) {
		s->cut_pending = true;
		return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
	}
	if (!fn_queue_pending(&s->resp) && s->resp_end) {
		answer_end(h, ses, id, &s->resp_tr, flags);
		return (ssize_t)n;
	}
	return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
}

/* ---- what the engine does to streams ------------------------------------- */

void fn_h2_app_preface(struct fn_h2 *h)
{
	if (h->up_settings)
		return;
	h->up_settings = true;
	h->ng->nghttp2_submit_settings(h->app, NGHTTP2_FLAG_NONE, NULL, 0);
}

bool fn_h2_respond(struct fn_h2 *h, struct fn_h2s *s, const nghttp2_nv *nv, size_t n,
		   bool with_body)
{
	fn_h2_app_preface(h);
	nghttp2_data_provider prd = {.source.ptr = s, .read_callback = resp_read};
	s->submitted = true;
	fn_h2_log_answer(s, nv, n);
	return h->ng->nghttp2_submit_response(h->app, s->a, nv, n, with_body ? &prd : NULL) == 0;
}

void fn_h2_drop_answer(struct fn_h2 *h, struct fn_h2s *s)
{
	if (s->u && !s->up_closed && !s->resp_end)
		h->ng->nghttp2_submit_rst_stream(h->up, NGHTTP2_FLAG_NONE, s->u, NGHTTP2_CANCEL);
	give_back(h, h->up, 0, fn_queue_pending(&s->resp));
	s->resp.lo = s->resp.len = 0;
}

void fn_h2_reset(struct fn_h2 *h, struct fn_h2s *s, int code)
{
	fn_h2_app_preface(h);
	if (!s->app_dead && !s->app_closed)
		h->ng->nghttp2_submit_rst_stream(h->app, NGHTTP2_FLAG_NONE, s->a, (uint32_t)code);
	s->app_dead = true;
	fn_h2_drop_answer(h, s);
	/* What the app sent that now goes nowhere. */
	give_back(h, h->app, 0, fn_queue_pending(&s->req));
	s->req.lo = s->req.len = 0;
}

bool fn_h2_forward(struct fn_h2 *h, struct fn_h2s *s)
{
	if (!h->server || h->server_gone) {
		/* Directly, the app's connect would have failed or the
		 * connection ended: it meets the end of this one. */
		h->state = FN_H2_RESET;
		return true;
	}
	nghttp2_data_provider prd = {.source.ptr = s, .read_callback = req_read};
	int32_t u = h->ng->nghttp2_submit_request(h->up, NULL, s->reqh.nv, s->reqh.n,
						  s->req_end && !s->req_tr.n ? NULL : &prd, s);
	if (u < 0) {
		/* The server's GOAWAY came first: the app's stream was never
		 * processed, which it may retry. */
		fn_h2_reset(h, s, NGHTTP2_REFUSED_STREAM);
		return true;
	}
	s->u = u;
	s->kind = SK_FORWARD;
	h->forwarded = true;
	return true;
}

/* The server's final response headers: to the app now, unless a rule
 * takes them or the answer is held. */
static void response_in(struct fn_h2 *h, struct fn_h2s *s)
{
	if (s->app_dead || fn_h2_on_response(h, s) || (s->due && s->due > h->now))
		return;
	s->due = 0;
	fn_h2_respond(h, s, s->resph.nv, s->resph.n, !s->resp_end || fn_queue_pending(&s->resp));
}

static void resume(struct fn_h2 *h, nghttp2_session *ses, int32_t id)
{
	if (id > 0)
		h->ng->nghttp2_session_resume_data(ses, id);
}

/* ---- callbacks -------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *ses, const nghttp2_frame *f, void *ud)
{
	struct fn_h2 *h = ud;
	if (ses != h->app || f->hd.type != NGHTTP2_HEADERS ||
	    f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct fn_h2s *s = stream_new(h, f->hd.stream_id);
	if (!s)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	h->ng->nghttp2_session_set_stream_user_data(ses, f->hd.stream_id, s);
	return 0;
}

static int on_header(nghttp2_session *ses, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
		     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
	struct fn_h2 *h = ud;
	struct fn_h2s *s = stream_of(h, ses, f->hd.stream_id);
	if (!s || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	struct fn_hl *l;
	if (ses == h->app)
		l = f->headers.cat == NGHTTP2_HCAT_REQUEST ? &s->reqh : &s->req_tr;
	else
		l = s->resp_final ? &s->resp_tr : &s->resph;
	return fn_hl_add(l, name, nlen, value, vlen, flags) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* SETTINGS passed on: push is the one setting not carried (the engine
 * relays no pushed stream), and a server may not send it. */
static void mirror_settings(struct fn_h2 *h, nghttp2_session *to, const nghttp2_settings *st)
{
	nghttp2_settings_entry iv[32];
	size_t n = 0;
	for (size_t i = 0; i < st->niv && n < 32; i++)
		if (st->iv[i].settings_id != NGHTTP2_SETTINGS_ENABLE_PUSH)
			iv[n++] = st->iv[i];
	if (to == h->up)
		iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
	h->ng->nghttp2_submit_settings(to, NGHTTP2_FLAG_NONE, iv, n);
}

static int app_frame(struct fn_h2 *h, const nghttp2_frame *f)
{
	const struct fn_ngh2 *ng = h->ng;
	struct fn_h2s *s = stream_of(h, h->app, f->hd.stream_id);
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
	bool live = h->server && !h->server_gone;
	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (!s)
			break;
		if (f->headers.cat == NGHTTP2_HCAT_REQUEST) {
			s->req_end = end;
			if (!fn_h2_decide(h, s))
				return NGHTTP2_ERR_CALLBACK_FAILURE;
			h->last_taken = s->a;
			break;
		}
		s->req_end = true; /* trailers */
		if (s->kind == SK_FORWARD)
			resume(h, h->up, s->u);
		break;
	case NGHTTP2_DATA:
		if (s && end) {
			s->req_end = true;
			if (s->kind == SK_FORWARD && s->u)
				resume(h, h->up, s->u);
		}
		give_back(h, h->app, s && s->app_closed ? 0 : f->hd.stream_id, f->data.padlen);
		break;
	case NGHTTP2_SETTINGS:
		if (f->hd.flags & NGHTTP2_FLAG_ACK)
			break;
		if (h->upgrading)
			break; /* HTTP2-Settings: the server's session has them */
		if (h->skip_app_settings)
			h->skip_app_settings = false; /* the preface's: already sent */
		else if (live)
			mirror_settings(h, h->up, &f->settings);
		break;
	case NGHTTP2_PING:
		if (f->hd.flags & NGHTTP2_FLAG_ACK)
			ng->nghttp2_submit_ping(h->up, NGHTTP2_FLAG_ACK, f->ping.opaque_data);
		else if (h->pings_dropped)
			break; /* a peer whose answers stopped: neither passed on nor answered */
		else
			ng->nghttp2_submit_ping(live ? h->up : h->app,
						live ? NGHTTP2_FLAG_NONE : NGHTTP2_FLAG_ACK,
						f->ping.opaque_data);
		break;
	case NGHTTP2_RST_STREAM:
		if (s && s->u && !s->up_closed)
			ng->nghttp2_submit_rst_stream(h->up, NGHTTP2_FLAG_NONE, s->u,
						      f->rst_stream.error_code);
		if (s)
			s->app_dead = true;
		break;
	case NGHTTP2_GOAWAY:
		if (live)
			ng->nghttp2_submit_goaway(h->up, NGHTTP2_FLAG_NONE, 0, f->goaway.error_code,
						  f->goaway.opaque_data, f->goaway.opaque_data_len);
		break;
	case NGHTTP2_WINDOW_UPDATE:
		if (!f->hd.stream_id && live)
			ng->nghttp2_submit_window_update(h->up, NGHTTP2_FLAG_NONE, 0,
							 f->window_update.window_size_increment);
		else if (s && s->u && !s->up_closed)
			ng->nghttp2_submit_window_update(h->up, NGHTTP2_FLAG_NONE, s->u,
							 f->window_update.window_size_increment);
		break;
	}
	return 0;
}

/* The newest app stream the server's last_stream_id covers: every stream
 * forwarded at or below it, and every stream answered here before them. */
static int32_t app_last(struct fn_h2 *h, int32_t last)
{
	int32_t a = 0;
	for (struct fn_h2s *s = h->streams; s; s = s->next)
		if (s->kind == SK_FORWARD && s->u <= last && s->a > a)
			a = s->a;
	return a;
}

static void up_headers(struct fn_h2 *h, struct fn_h2s *s, bool end)
{
	if (s->resp_final) { /* trailers */
		s->resp_end = true;
		resume(h, h->app, s->a);
		return;
	}
	const char *st = fn_hl_get(&s->resph, ":status");
	if (st[0] == '1' && !end && !s->app_dead) { /* informational: on at once */
		h->ng->nghttp2_submit_headers(h->app, NGHTTP2_FLAG_NONE, s->a, NULL, s->resph.nv,
					      s->resph.n, NULL);
		fn_hl_clear(&s->resph);
		return;
	}
	s->resp_final = true;
	s->resp_end = end;
	response_in(h, s);
}

/* The server reset a forwarded stream: the app meets the reset after
 * what the server sent before it (its headers and DATA, as a direct
 * client reads them), never before. */
static void server_reset(struct fn_h2 *h, struct fn_h2s *s, uint32_t code)
{
	if (!s->resp_final) { /* nothing of the answer: at once */
		h->ng->nghttp2_submit_rst_stream(h->app, NGHTTP2_FLAG_NONE, s->a, code);
		s->app_dead = true;
		return;
	}
	int64_t upto = (int64_t)(s->sent + fn_queue_pending(&s->resp));
	if (s->after_bytes < 0 || s->after_bytes > upto) { /* a rule's cut first */
		s->rst_code = (int)code;
		s->after_bytes = upto;
	}
	s->resp_end = false; /* its end is the reset, not END_STREAM */
	resume(h, h->app, s->a);
}

static int up_frame(struct fn_h2 *h, const nghttp2_frame *f)
{
	const struct fn_ngh2 *ng = h->ng;
	struct fn_h2s *s = stream_of(h, h->up, f->hd.stream_id);
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
	switch (f->hd.type) {
	case NGHTTP2_HEADERS:
		if (s)
			up_headers(h, s, end);
		break;
	case NGHTTP2_DATA:
		if (s && end) {
			s->resp_end = true;
			resume(h, h->app, s->a);
		}
		give_back(h, h->up, s && !s->up_closed ? f->hd.stream_id : 0, f->data.padlen);
		break;
	case NGHTTP2_SETTINGS:
		if (f->hd.flags & NGHTTP2_FLAG_ACK)
			break;
		h->up_settings = true; /* the server's first is the app's first */
		mirror_settings(h, h->app, &f->settings);
		break;
	case NGHTTP2_PING:
		ng->nghttp2_submit_ping(h->app, f->hd.flags & NGHTTP2_FLAG_ACK,
					f->ping.opaque_data);
		break;
	case NGHTTP2_RST_STREAM:
		if (s && !s->app_dead && !s->app_closed && s->kind == SK_FORWARD)
			server_reset(h, s, f->rst_stream.error_code);
		break;
	case NGHTTP2_GOAWAY:
		fn_h2_app_preface(h);
		ng->nghttp2_submit_goaway(
		    h->app, NGHTTP2_FLAG_NONE, app_last(h, f->goaway.last_stream_id),
		    f->goaway.error_code, f->goaway.opaque_data, f->goaway.opaque_data_len);
		h->goaway_sent = true;
		break;
	case NGHTTP2_WINDOW_UPDATE:
		if (!f->hd.stream_id)
			ng->nghttp2_submit_window_update(h->app, NGHTTP2_FLAG_NONE, 0,
							 f->window_update.window_size_increment);
		else if (s && !s->app_dead && !s->app_closed)
			ng->nghttp2_submit_window_update(h->app, NGHTTP2_FLAG_NONE, s->a,
							 f->window_update.window_size_increment);
		break;
	}
	return 0;
}

static int on_frame_recv(nghttp2_session *ses, const nghttp2_frame *f, void *ud)
{
	struct fn_h2 *h = ud;
	return ses == h->app ? app_frame(h, f) : up_frame(h, f);
}

static int on_data(nghttp2_session *ses, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		   void *ud)
{
	(void)flags;
	struct fn_h2 *h = ud;
	struct fn_h2s *s = stream_of(h, ses, id);
	if (ses == h->app && s && s->log)
		s->log->req_bytes += len;
	if (ses == h->app && s && s->kind == SK_FORWARD && !s->app_dead && !s->up_closed) {
		if (!fn_queue_add(&s->req, data, len))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		resume(h, h->up, s->u);
		return 0;
	}
	if (ses == h->up && s && !s->app_dead && !s->app_closed && s->kind == SK_FORWARD) {
		if (!fn_queue_add(&s->resp, data, len))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		resume(h, h->app, s->a);
		return 0;
	}
	give_back(h, ses, s ? id : 0, len);
	return 0;
}

static int on_close(nghttp2_session *ses, int32_t id, uint32_t code, void *ud)
{
	(void)code;
	struct fn_h2 *h = ud;
	struct fn_h2s *s = stream_of(h, ses, id);
	if (!s)
		return 0;
	if (ses == h->app) {
		s->app_closed = true;
		fn_h2_log_end(s, NULL);
		if (s->u && !s->up_closed && !s->resp_end)
			h->ng->nghttp2_submit_rst_stream(h->up, NGHTTP2_FLAG_NONE, s->u,
							 NGHTTP2_CANCEL);
	} else {
		s->up_closed = true;
	}
	maybe_free(h, s);
	return 0;
}

/* ---- set-up ----------------------------------------------------------------- */

static nghttp2_session_callbacks *callbacks(const struct fn_ngh2 *ng)
{
	nghttp2_session_callbacks *cb;
	if (ng->nghttp2_session_callbacks_new(&cb))
		return NULL;
	ng->nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	ng->nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	ng->nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	ng->nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	ng->nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
	return cb;
}

/* Both sessions leave windows, PING answers and header rules to the ends:
 * the engine passes them on instead of making its own. */
static nghttp2_option *options(const struct fn_ngh2 *ng)
{
	nghttp2_option *o;
	if (ng->nghttp2_option_new(&o))
		return NULL;
	ng->nghttp2_option_set_no_auto_window_update(o, 1);
	ng->nghttp2_option_set_no_auto_ping_ack(o, 1);
	ng->nghttp2_option_set_no_http_messaging(o, 1);
	return o;
}

int fn_h2_preface(const char *p, size_t n)
{
	size_t k = n < FN_H2_MAGIC_LEN ? n : FN_H2_MAGIC_LEN;
	if (memcmp(p, FN_H2_MAGIC, k) != 0)
		return 0;
	return n >= FN_H2_MAGIC_LEN ? 1 : -1;
}

bool fn_h2_server_first(const char *p, size_t n)
{
	static const unsigned char hd[9] = {0, 0, 0, NGHTTP2_SETTINGS, 0, 0, 0, 0, 0};
	const unsigned char *b = (const unsigned char *)p;
	if (!n)
		return false;
	for (size_t i = 0; i < n && i < 9; i++)
		if (i != 1 && i != 2 && b[i] != hd[i])
			return false;
	return n < 9 || ((size_t)b[1] << 8 | b[2]) % 6 == 0;
}

struct fn_h2 *fn_h2_new(const struct fn_endpoint *ep, uint64_t key, bool tls, bool server,
			uint64_t conn_id, const char **why)
{
	const struct fn_ngh2 *ng = fn_ngh2_get(why);
	struct fn_h2 *h = ng ? calloc(1, sizeof(*h)) : NULL;
	if (!h) {
		if (ng)
			*why = "out of memory";
		return NULL;
	}
	h->ng = ng;
	h->ep = *ep;
	h->key = key;
	h->tls = tls;
	h->server = server;
	h->conn_id = conn_id;
	h->logging = fn_reqlog_on();
	nghttp2_session_callbacks *cb = callbacks(ng);
	nghttp2_option *o = options(ng);
	bool ok = cb && o && !ng->nghttp2_session_server_new2(&h->app, cb, h, o) &&
		  !ng->nghttp2_session_client_new2(&h->up, cb, h, o);
	if (cb)
		ng->nghttp2_session_callbacks_del(cb);
	if (o)
		ng->nghttp2_option_del(o);
	if (!ok) {
		*why = "nghttp2 cannot set up a session";
		fn_h2_free(h);
		return NULL;
	}
	if (!server)
		fn_h2_app_preface(h);
	return h;
}

void fn_h2_free(struct fn_h2 *h)
{
	if (!h)
		return;
	if (h->app)
		h->ng->nghttp2_session_del(h->app);
	if (h->up)
		h->ng->nghttp2_session_del(h->up);
	while (h->streams)
		stream_free(h, h->streams);
	free(h);
}

/* ---- bytes in and out ----------------------------------------------------- */

/* The app's preface SETTINGS, read from its bytes before its session reads
 * them: they are the server's session's own first SETTINGS, and the server
 * may wait for them before it sends its own (which the app must meet
 * first). 0 while incomplete. */
static int app_preface(struct fn_h2 *h, const char *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p + FN_H2_MAGIC_LEN;
	if (!fn_h2_preface(p, n)) { /* after ALPN h2, no HTTP/2: the app's
				     * session refuses it as a server would */
		h->app_preface = true;
		if (h->server)
			h->ng->nghttp2_submit_settings(h->up, NGHTTP2_FLAG_NONE, NULL, 0);
		return 1;
	}
	if (n < FN_H2_MAGIC_LEN + 9)
		return 0;
	size_t len = (size_t)b[0] << 16 | (size_t)b[1] << 8 | b[2];
	if (b[3] != NGHTTP2_SETTINGS || len % 6 || len > 6 * 32) {
		/* Not a preface: the app's session says so to the app. */
		h->app_preface = true;
		if (h->server)
			h->ng->nghttp2_submit_settings(h->up, NGHTTP2_FLAG_NONE, NULL, 0);
		return 1;
	}
	if (n < FN_H2_MAGIC_LEN + 9 + len)
		return 0;
	if (h->upgraded) { /* h2c: HTTP2-Settings went to the server as these */
		h->app_preface = h->skip_app_settings = true;
		return 1;
	}
	nghttp2_settings st = {.niv = len / 6};
	nghttp2_settings_entry iv[32];
	for (size_t i = 0; i < st.niv; i++) {
		const uint8_t *e = b + 9 + 6 * i;
		iv[i].settings_id = e[0] << 8 | e[1];
		iv[i].value =
		    (uint32_t)e[2] << 24 | (uint32_t)e[3] << 16 | (uint32_t)e[4] << 8 | e[5];
	}
	st.iv = iv;
	if (h->server)
		mirror_settings(h, h->up, &st);
	h->app_preface = true;
	h->skip_app_settings = true;
	return 1;
}

/* Post-callback work: streams whose answer reached after_bytes. Whether
 * there was any. */
static bool settle(struct fn_h2 *h)
{
	bool any = false;
	for (struct fn_h2s *s = h->streams; s; s = s->next) {
		if (!s->cut_pending)
			continue;
		any = true;
		s->cut_pending = false;
		if (s->rst_code >= 0)
			fn_h2_reset(h, s, s->rst_code);
		else
			h->state = s->cut_mode == FN_ABORT_CLOSE ? FN_H2_CLOSE : FN_H2_RESET;
	}
	return any;
}

/* base64url, unpadded (RFC 7540 3.2.1's HTTP2-Settings): its length in
 * out, -1 when malformed. */
static ssize_t b64url(const char *in, uint8_t *out, size_t cap)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;
	for (const char *p = in; *p && *p != '='; p++) {
		const char *k = strchr(al, *p);
		if (!k || !*p)
			return -1;
		acc = acc << 6 | (uint32_t)(k - al);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

/* The HPACK table a server may use at once after an h2c upgrade: the
 * default. nghttp2's client (the relay's end) applies a larger
 * SETTINGS_HEADER_TABLE_SIZE only once the server acknowledges it, but
 * the server may use it from the 101 on (RFC 7540 3.2.1): its first
 * answer would fail to decode (COMPRESSION_ERROR). */
#define UPGRADE_TABLE 4096

/* HTTP2-Settings' payload with HEADER_TABLE_SIZE at most UPGRADE_TABLE. */
static void clamp_table(uint8_t *pl, size_t n)
{
	for (size_t i = 0; i + 6 <= n; i += 6) {
		uint32_t v = (uint32_t)pl[i + 2] << 24 | (uint32_t)pl[i + 3] << 16 |
			     (uint32_t)pl[i + 4] << 8 | pl[i + 5];
		if ((pl[i] << 8 | pl[i + 1]) == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE &&
		    v > UPGRADE_TABLE) {
			pl[i + 2] = pl[i + 3] = pl[i + 5] = 0;
			pl[i + 4] = UPGRADE_TABLE >> 8;
		}
	}
}

bool fn_h2_settings_for_server(char *b64, size_t len)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char in[400];
	uint8_t pl[6 * 32];
	if (len >= sizeof(in))
		return false;
	memcpy(in, b64, len);
	in[len] = '\0';
	ssize_t n = b64url(in, pl, sizeof(pl));
	if (n < 0 || n % 6)
		return false;
	clamp_table(pl, (size_t)n);
	/* Re-encoded in place: as many bytes, so as many characters. */
	size_t o = 0;
	for (ssize_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)pl[i] << 16 | (i + 1 < n ? (uint32_t)pl[i + 1] << 8 : 0) |
			     (i + 2 < n ? pl[i + 2] : 0);
		int chars = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
		for (int k = 0; k < chars && o < len; k++)
			b64[o++] = al[(v >> (18 - 6 * k)) & 63];
	}
	return true;
}

bool fn_h2_upgrade(struct fn_h2 *h, const char *settings, bool head)
{
	uint8_t pl[6 * 32], up[6 * 32];
	ssize_t n = b64url(settings, pl, sizeof(pl));
	if (n > 0) {
		memcpy(up, pl, (size_t)n);
		clamp_table(up, (size_t)n);
	}
	struct fn_h2s *s = n >= 0 && n % 6 == 0 ? stream_new(h, 1) : NULL;
	if (!s)
		return false;
	s->u = 1;
	s->kind = SK_FORWARD;
	s->req_end = true;
	h->forwarded = h->upgraded = h->upgrading = true;
	bool ok = !h->ng->nghttp2_session_upgrade2(h->app, pl, (size_t)n, head, NULL) &&
		  !h->ng->nghttp2_session_set_stream_user_data(h->app, 1, s) &&
		  (!h->server || !h->ng->nghttp2_session_upgrade2(h->up, up, (size_t)n, head, s));
	h->upgrading = false;
	return ok;
}

ssize_t fn_h2_recv(struct fn_h2 *h, int side, const char *p, size_t n, uint64_t now)
{
	h->now = now;
	if (side == 1) {
		/* Held until the app's preface SETTINGS are the server's
		 * session's first: its ACK of the server's must not precede them. */
		if (!h->app_preface || !h->up_sent)
			return 0;
		if (h->ng->nghttp2_session_mem_recv(h->up, (const uint8_t *)p, n) < 0)
			fn_h2_server_gone(h);
		settle(h);
		return (ssize_t)n;
	}
	if (!h->app_preface && !app_preface(h, p, n))
		return 0;
	if (!h->up_settings)
		return 0; /* held until the server's SETTINGS are out to the app */
	ssize_t r = h->ng->nghttp2_session_mem_recv(h->app, (const uint8_t *)p, n);
	settle(h);
	return r < 0 ? -1 : r;
}

size_t fn_h2_out(struct fn_h2 *h, int side, const char **p)
{
	settle(h);
	if ((side == 0 && !h->up_settings) || (side == 1 && !h->app_preface))
		return 0;
	const uint8_t *d;
	nghttp2_session *ses = side ? h->up : h->app;
	ssize_t n = h->ng->nghttp2_session_mem_send(ses, &d);
	/* A read callback in that call may have cut a stream: its reset is
	 * sent now, not at the next event, which may never come. */
	if (n == 0 && settle(h))
		n = h->ng->nghttp2_session_mem_send(ses, &d);
	if (n < 0) {
		h->state = FN_H2_RESET;
		return 0;
	}
	h->up_sent = h->up_sent || (side == 1 && n > 0);
	*p = (const char *)d;
	return (size_t)n;
}

uint64_t fn_h2_tick(struct fn_h2 *h, uint64_t now)
{
	uint64_t next = 0;
	h->now = now;
	for (struct fn_h2s *s = h->streams; s; s = s->next) {
		if (!s->due || s->submitted || s->app_dead)
			continue;
		if (s->due > now) {
			next = !next || s->due < next ? s->due : next;
			continue;
		}
		s->due = 0;
		if (s->kind == SK_LOCAL)
			fn_h2_respond(h, s, s->resph.nv, s->resph.n, s->blen || s->ans_tr.n);
		else if (s->resp_final)
			response_in(h, s);
	}
	settle(h);
	return next;
}

void fn_h2_server_gone(struct fn_h2 *h)
{
	if (h->server_gone)
		return;
	h->server_gone = true;
	fn_h2_app_preface(h);
	/* Forwarded streams can no longer be answered: the app meets the end
	 * of the connection, as when its server closes it. */
	if (h->forwarded && h->state == FN_H2_RUNNING)
		h->state = FN_H2_FINISHED;
}

enum fn_h2_state fn_h2_state(const struct fn_h2 *h)
{
	if (h->state != FN_H2_RUNNING)
		return h->state;
	if (h->app_preface && !h->ng->nghttp2_session_want_read(h->app) &&
	    !h->ng->nghttp2_session_want_write(h->app))
		return FN_H2_FINISHED;
	return FN_H2_RUNNING;
}

bool fn_h2_wants_server(const struct fn_h2 *h)
{
	return h->forwarded;
}
