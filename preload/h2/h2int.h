/* h2int.h - what h2.c (the sessions) and h2fault.c (the rules on a stream)
 * share: a connection's state and its streams. Not for other rooms. */
#ifndef FAULTNET_H2INT_H
#define FAULTNET_H2INT_H

#include "preload/h2/h2.h"
#include "preload/h2/h2lib.h"

#include "core/rules.h"
#include "preload/base/queue.h"
#include "preload/stats/stats.h"

/* A header list as read, in order (names and values owned). */
struct fn_hl {
	nghttp2_nv *nv;
	size_t n, cap;
};

/* Bytes on their way from one session to the other. */
enum fn_skind {
	SK_FORWARD, /* carried to the server */
	SK_LOCAL,   /* answered here (respond, grpc_status) */
	SK_DROPPED, /* reset or refused here: what the app sends is dropped */
};

struct fn_h2s {
	struct fn_h2s *next;
	int32_t a, u; /* its id on the app's session, on the server's (0: none) */
	enum fn_skind kind;
	struct fn_hl reqh, req_tr, resph, resp_tr;
	struct fn_queue req, resp;
	bool req_end;	 /* the app's END_STREAM is in */
	bool resp_final; /* the server's final response headers are in */
	bool resp_end;	 /* its END_STREAM is in */
	bool submitted;	 /* the final response went to the app */
	bool app_closed, up_closed;
	bool app_dead;	     /* reset or refused towards the app */
	uint64_t due;	     /* the answer is held until then (slow, delay) */
	int64_t after_bytes; /* abort: cut the answer after so many bytes */
	uint64_t sent;	     /* bytes of the answer passed on */
	int rst_code;	     /* abort rst_stream: -1 for none */
	bool rst_at_headers; /* after the server's response headers */
	int grpc_after;	     /* gRPC status sent after the server's headers, -1 */
	int cut_mode;	     /* abort without rst_stream after after_bytes */
	bool cut_pending;    /* the answer reached after_bytes */
	/* A local answer: its body and the rule's trailers (gRPC). */
	char *body;
	size_t blen, boff;
	struct fn_hl ans_tr;
	struct fn_reqrec *log; /* FAULTNET_REQUESTS: its line, or NULL */
};

struct fn_h2 {
	const struct fn_ngh2 *ng;
	nghttp2_session *app, *up;
	struct fn_endpoint ep;
	uint64_t key, draws;
	bool tls;
	bool server;		/* the server is reached */
	bool server_gone;	/* and has gone */
	bool app_preface;	/* the app's first SETTINGS went to the server */
	bool up_settings;	/* our first SETTINGS went to the app */
	bool skip_app_settings; /* the app session's first SETTINGS: mirrored already */
	bool upgraded;		/* h2c: HTTP2-Settings were the app's first SETTINGS */
	bool upgrading;		/* inside the app session's upgrade2 */
	/* The server's session's preface went out: the server's bytes are
	 * read from then on (after an h2c upgrade its answer comes at once,
	 * encoded for the SETTINGS the preface carries). */
	bool up_sent;
	bool forwarded;
	int32_t last_taken; /* the newest app stream decided before the current */
	bool goaway_sent;
	bool pings_dropped; /* an abort ping = "unanswered" rule took a stream */
	enum fn_h2_state state;
	uint64_t now;
	struct fn_h2s *streams;
	bool logging; /* FAULTNET_REQUESTS is on */
	uint64_t conn_id, nreq;
};

/* h2.c */
bool fn_hl_add(struct fn_hl *l, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen,
	       uint8_t flags);
void fn_hl_clear(struct fn_hl *l);
/* The value of a header in l ("" when absent). */
const char *fn_hl_get(const struct fn_hl *l, const char *name);
/* Our SETTINGS to the app, unless sent: the server's are not coming. */
void fn_h2_app_preface(struct fn_h2 *h);
/* The answer to s's app stream: its headers (and data provider). */
bool fn_h2_respond(struct fn_h2 *h, struct fn_h2s *s, const nghttp2_nv *nv, size_t n,
		   bool with_body);
/* Forwards s to the server. */
bool fn_h2_forward(struct fn_h2 *h, struct fn_h2s *s);
/* The server's answer to s goes no further: its stream cancelled, what
 * it sent given back. */
void fn_h2_drop_answer(struct fn_h2 *h, struct fn_h2s *s);
/* Resets s's app stream with code; its server stream with CANCEL. */
void fn_h2_reset(struct fn_h2 *h, struct fn_h2s *s, int code);

/* h2fault.c */
/* The rules on a request whose headers are in: answered, forwarded,
 * held, reset or refused. False on a failure that ends the connection. */
bool fn_h2_decide(struct fn_h2 *h, struct fn_h2s *s);
/* The server's final response headers for s are in: whether the rule
 * changes them (grpc_after_headers, rst_after "headers"); true when it
 * took them. */
bool fn_h2_on_response(struct fn_h2 *h, struct fn_h2s *s);

/* h2log.c: a stream's FAULTNET_REQUESTS line: begun at the decision
 * (host and path as the rules saw them), its answer's head as it goes to
 * the app, written when the app's stream closes. */
void fn_h2_log_start(struct fn_h2 *h, struct fn_h2s *s, const struct fn_rule *r,
		     enum fn_req_fate fate, const char *host, const char *path);
void fn_h2_log_answer(struct fn_h2s *s, const nghttp2_nv *nv, size_t n);
void fn_h2_log_end(struct fn_h2s *s, const char *unanswered);

#endif
