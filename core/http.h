/* http.h - what an HTTP rule (respond, slow, abort) matches in a request and
 * what it answers: the rule's HTTP part, the per-request decision over a
 * policy, and the answer's bytes. Pure: no sockets, so unit tests drive it. */
#ifndef FAULTNET_HTTP_H
#define FAULTNET_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rules.h"

enum { FN_ABORT_RESET = 1, FN_ABORT_CLOSE = 2 };

/* Limits on what a rule may carry, so that an answer fits in one buffer. */
#define FN_HTTP_BODY_MAX (1u << 20)
#define FN_HTTP_HEADERS_MAX 32

/* An HTTP rule's own part. Immutable once the rule is published; copies of
 * a rule share it (refs). */
struct fn_http {
	uint64_t refs;
	char *method, *path; /* match patterns, NULL for any (host: the rule's) */
	int status;	     /* respond */
	char *headers;	     /* respond: "Name: value\r\n" lines */
	int nheaders;
	char *body; /* respond; bodylen bytes (may hold NULs from a file) */
	size_t bodylen;
	char *body_file;     /* where body came from, for describing */
	int64_t retry_after; /* seconds; -1 for none */
	bool close;	     /* respond: Connection: close, then FIN */
	int mode;	     /* abort: FN_ABORT_RESET or FN_ABORT_CLOSE */
	int tls_fault;	     /* tls: enum fn_tls_fault */
	int tls_alert;	     /* tls, fault alert: the alert's code (RFC 8446 6) */
	/* HTTP/2 and gRPC (preload/h2/). respond with grpc_status answers a
	 * gRPC call: Trailers-Only, or after the server's own response
	 * headers when grpc_after_headers (the call is then committed). */
	int grpc_status;	  /* 0 to 16; -1 for none */
	char *grpc_message;	  /* its grpc-message, or NULL */
	int64_t grpc_pushback_ms; /* grpc-retry-pushback-ms; -1 for none */
	bool grpc_after_headers;
	/* abort on an HTTP/2 stream: an RST_STREAM with this code (RFC 9113
	 * 7), at the request (rst_after FN_RST_REQUEST), after the server's
	 * response headers, or after after_bytes of its DATA; or a GOAWAY
	 * with goaway's code whose last-stream-id leaves this stream and all
	 * later ones refused. -1 for none; on HTTP/1.1, either is mode. */
	int rst_stream;
	int rst_after; /* FN_RST_REQUEST or FN_RST_HEADERS */
	int goaway;
	/* abort ping = "unanswered": the stream goes on, and from it on the
	 * connection's PINGs from the app are never answered (a peer whose
	 * keepalive answers stopped); nothing on HTTP/1.1, which has none. */
	bool ping_unanswered;
};

enum { FN_RST_REQUEST, FN_RST_HEADERS };

/* An HTTP/2 error code's name (RFC 9113 7: "REFUSED_STREAM") and back; -1
 * for an unknown name, NULL for an unknown code. */
const char *fn_h2_error_name(int code);
int fn_h2_error_of(const char *name);
/* A gRPC status code's name ("UNAVAILABLE") and back; -1 for unknown. */
const char *fn_grpc_status_name(int code);
int fn_grpc_status_of(const char *name);

/* What a tls rule does to a handshake (its key fault). */
enum fn_tls_fault {
	FN_TLSF_NONE,
	FN_TLSF_STALL,	       /* the ClientHello is never answered */
	FN_TLSF_RESET,	       /* a reset after the ClientHello */
	FN_TLSF_ALERT,	       /* a fatal alert (tls_alert) answers it */
	FN_TLSF_EXPIRED,       /* certificate faults: the leaf shown has */
	FN_TLSF_NOT_YET_VALID, /* that defect */
	FN_TLSF_WRONG_HOST,
	FN_TLSF_UNKNOWN_ISSUER,
	FN_TLSF_SELF_SIGNED,
	FN_TLSF_INCOMPLETE_CHAIN, /* signed by an intermediate it lacks */
	FN_TLSF_COUNT
};

/* The fault's name in a policy ("not_yet_valid"); FN_TLSF_NONE for an
 * unknown name. */
const char *fn_tls_fault_name(int f);
int fn_tls_fault_of(const char *name);
/* The alerts a rule may send: their names and codes; 0 for an unknown name. */
const char *fn_tls_alert_name(int code);
int fn_tls_alert_of(const char *name);

/* A request as far as rules look at it. */
struct fn_http_req {
	const char *method; /* "GET" */
	const char *path;   /* the request target's path, without the query */
	const char *host;   /* the Host header, "" when absent */
};

struct fn_http *fn_http_new(void);
void fn_http_get(struct fn_http *h);
void fn_http_put(struct fn_http *h);

/* Whether r's method, path and host patterns accept req. Patterns are
 * shell globs (fnmatch): "/api/" then a star is a prefix, "GET" an exact method. */
bool fn_http_match(const struct fn_rule *r, const struct fn_http_req *req);

/* The first enabled HTTP rule covering the peer and req whose conditions
 * (counted per request) let it apply; NULL to forward the request as it is.
 * *seen gets the first HTTP rule whose match covered req, applied or not. */
const struct fn_rule *fn_http_decide(const struct fn_policy *p, const struct fn_endpoint *ep,
				     const struct fn_http_req *req, const struct fn_rule **seen);

/* Whether the enabled HTTP rules on a TCP peer answer every request
 * themselves, so that no server need listen there: the first of them that
 * takes requests on any path (a method or a condition may narrow it; no
 * host pattern, or one the name the app resolved the peer from matches) is
 * a respond rule or an abort rule without after_bytes, and so is every one
 * before it. The app's connect then succeeds
 * without one; otherwise it meets the server's own connect (preload/relay/relay_conn.c). */
bool fn_http_answers_all(const struct fn_policy *p, const struct fn_endpoint *ep);

/* The first enabled tls rule covering the peer whose match.host (if any)
 * matches sni (the ClientHello's name, "" for none) and whose conditions
 * (counted per handshake) let it apply; NULL for none. *seen: the first
 * one that covered it, applied or not. */
const struct fn_rule *fn_tls_decide(const struct fn_policy *p, const struct fn_endpoint *ep,
				    const char *sni, const struct fn_rule **seen);

/* Whether an HTTP rule (tls included), enabled or not, covering the peer
 * takes a TLS connection whose ClientHello names sni: one with no
 * match.host, or whose pattern matches sni (any, when sni is ""). The
 * relay terminates only those; the others are passed on untouched. */
bool fn_http_sni_covered(const struct fn_policy *p, const struct fn_endpoint *ep, const char *sni);

/* Whether any HTTP rule, enabled or not, covers a TCP peer: connections to
 * it are relayed so that the rule, when on, sees every request. */
const struct fn_rule *fn_http_covers(const struct fn_policy *p, const struct fn_endpoint *ep);

/* The answer of a respond rule, well formed: status line, the rule's
 * headers, Retry-After, Content-Length, Connection: close when the rule
 * closes; the body unless the request was HEAD. malloc'd; *len set. */
char *fn_http_answer(const struct fn_rule *r, bool head_request, size_t *len);

/* Appends the rule's HTTP keys as "key=value" words (see
 * fn_rule_describe); *at is where buf's text ends. */
void fn_http_describe(const struct fn_rule *r, char *buf, size_t len, size_t *at);

/* The standard reason phrase for a status, "Unknown" for others. */
const char *fn_http_reason(int status);

/* A counting key for a request: the path's first segment ("/bucket/" and a star for
 * "/bucket/key", "/" for "/"), written to buf. */
void fn_http_prefix(const char *path, char *buf, size_t len);

#endif
