/* stats.h - what the app really did, for faultctl stats and events:
 * per-rule and per-destination counters and a ring of recent events, filled
 * from the app's threads without locks into the member's published state
 * (core/segment.h), which faultctl reads on its own; and FAULTNET_EVENTS, a
 * JSON-lines file. */
#ifndef FAULTNET_STATS_H
#define FAULTNET_STATS_H

#include <stdint.h>

#include "core/rules.h"
#include "core/segment.h"
#include "core/wire.h"

/* An attempt (connect, Fast Open or datagram) to a destination some rule
 * covers. r is the rule that faulted it (NULL if none), seen the rule it
 * counts against; outcome is "ok", an errno name, or "dropped". Returns a
 * handle for fn_stats_bytes. */
int fn_stats_attempt(int fd, const struct fn_rule *r, const struct fn_rule *seen,
		     const struct fn_endpoint *ep, uint8_t proto, const char *outcome,
		     uint64_t bytes);

/* An event with no socket call behind it (an HTTP request the relay
 * answered, a connection that was not HTTP): fd -1, protocol TCP. */
void fn_stats_event(const struct fn_rule *r, const struct fn_rule *seen,
		    const struct fn_endpoint *ep, const char *outcome);

/* Bytes the app sent into a faulted TCP connection, counted at close. */
void fn_stats_bytes(int handle, uint64_t bytes);

/* The name of errno e ("ETIMEDOUT"), or "ok" for 0. */
const char *fn_errname(int e);

/* Where the counts go: the member's file in the run directory, mapped
 * shared, once control has started (preload/control/segfile.c); before that,
 * and without a run directory, memory of the shim's own. */
extern struct fn_seg *fn_seg;
/* fn_seg is still that memory of the shim's own, which nobody reads. */
bool fn_stats_private(void);

/* The state file fn_seg is mapped from (path names it, ino is its inode,
 * base is where it is mapped, its first given pages have their blocks
 * already), or none (path NULL). Its pages are sparse: a page is first
 * given its blocks (fallocate) and only then read or written through the
 * mapping, which on a full file system would otherwise raise SIGBUS in the
 * app. */
void fn_stats_backing(const char *path, unsigned long ino, void *base, size_t given);

/* While the file is being made: fd is it (-1 once it has its name). */
void fn_stats_backing_fd(int fd);

/* Before reading or writing [p, p + len) of fn_seg: its pages given their
 * blocks; where the file system has none left, the file stops being
 * updated (fn_seg becomes private memory at the same address, said
 * once). A load and a branch once the page has been seen. */
void fn_seg_touch(const void *p, size_t len);

/* fn_seg_touch for the listing's rule slots (listing.c): while the file
 * is being made, a page wholly inside the slots is given its blocks by a
 * write of zeros instead (no other thread writes there yet). */
void fn_seg_touch_listing(const void *p, size_t len);

/* Lists p's rules in fn_seg: each rule's counters go to its name's slot,
 * and the slots say the policy's order, actions, states and parameters.
 * Runs under the change lock before p is published; fresh: fn_seg is new,
 * so every rule looks for its slot again. */
void fn_stats_list(const struct fn_policy *p, bool fresh);

/* The app closed fd: if it was the events file, stop writing to it. */
void fn_stats_fd_lost(int fd);

/* After fork, in the child: release slots a parent thread was claiming. */
void fn_stats_atfork_child(void);

/* Opens FAULTNET_EVENTS, if set. NULL or a message. */
const char *fn_events_open(void);

/* A JSON-lines file the shim appends to (FAULTNET_EVENTS,
 * FAULTNET_REQUESTS): mode 0600, O_APPEND, never waited for (a FIFO is
 * written non-blocking, a reader that left costs no SIGPIPE), one write
 * per line, so lines from every process sharing it never interleave. */
struct fn_jsonl {
	int fd; /* -1: none */
	bool pipe;
};
/* Opens path into j; nofollow refuses a symbolic link. NULL or why not. */
const char *fn_jsonl_open(struct fn_jsonl *j, const char *path, bool nofollow);
/* One line, in one write; false when it was not written whole. */
bool fn_jsonl_write(struct fn_jsonl *j, const char *line, size_t n);
/* The app closed fd: if it was j's, stop writing. */
void fn_jsonl_lost(struct fn_jsonl *j, int fd);

/* reqlog.c: FAULTNET_REQUESTS, one JSON line per HTTP request the relay
 * saw, written when its answer ends (or its connection, or its process,
 * does). The line is built as the request goes: its head (the strings,
 * escaped and redacted) at the decision, its numbers and the answer's kept
 * headers at the end, so a request costs no big buffer cleared or copied
 * twice. */
#define FN_REQLOG_HDRS 1536
/* What a request's line starts with, known at its decision. */
struct fn_reqhead {
	uint64_t conn, n, req_ns; /* connection id, number on it, fn_now_ns() */
	bool https;
	const char *method, *host, *path;
	const char *query; /* raw: credentials are redacted here */
	const char *rule;  /* NULL: none */
	const char *reqh;  /* kept request headers (fn_reqlog_header) */
	size_t reqhlen;
};
struct fn_reqrec {
	uint64_t req_ns, first_ns, end_ns; /* fn_now_ns(); 0: never */
	int64_t wall_us;		   /* wall time at the request */
	bool reached;			   /* it reached the server */
	const char *fate;		   /* one of fn_req_fate_names */
	int rule_status;		   /* answered: the rule's status */
	int64_t slowed_ms;
	int status; /* the status the app received; 0: none */
	uint64_t req_bytes, resp_bytes;
	char *resph; /* kept answer headers, allocated at the first; or NULL */
	size_t resphlen;
	struct fn_reqrec **prev, *next; /* the process's requests not yet written */
	size_t headlen;
	char head[]; /* the line's start, escaped */
};
/* Reads FAULTNET_REQUESTS and its companions; NULL or a message naming the
 * variable, *fatal for bad input (the caller's exit 78) rather than a file
 * that cannot be opened. */
const char *fn_reqlog_open(bool *fatal);
bool fn_reqlog_on(void);
/* Whether a header named name (len bytes) is captured. */
bool fn_reqlog_wants(const char *name, size_t len);
/* Appends the pair to buf (cap, *len): a credential's value becomes its
 * length. value holds the first vlen bytes of a value total bytes long. */
void fn_reqlog_header(char *buf, size_t cap, size_t *len, const char *name, size_t nlen,
		      const char *value, size_t vlen, size_t total);
/* A request's record, its head written; NULL when memory is short (the
 * request goes unlogged, nothing else). */
struct fn_reqrec *fn_reqlog_begin(const struct fn_reqhead *h);
/* A kept header of its answer (as fn_reqlog_header). */
void fn_reqlog_resp_header(struct fn_reqrec *r, const char *name, size_t nlen, const char *value,
			   size_t vlen, size_t total);
/* Writes r's line and frees r. unanswered: NULL when the request was done
 * with, or why it was not ("connection closed", "process exit"). */
void fn_reqlog_end(struct fn_reqrec *r, const char *unanswered);
/* Frees r, unwritten (a fork child's copy of its parent's request). */
void fn_reqlog_drop(struct fn_reqrec *r);
/* exit(): a line for every request not yet written ("process exit"). The
 * caller keeps the relay from touching them (its lock). */
void fn_reqlog_exit(void);
/* In a fork child: the requests begun are the parent's, never written. */
void fn_reqlog_atfork_child(void);
void fn_reqlog_fd_lost(int fd);

/* Set once the shim has seen the app create or accept an IPv4 or IPv6
 * socket: faultctl ps tells a process that loaded the shim but makes its
 * own system calls (a Go program built with cgo) by its absence. Kept
 * here for the hook's one load, and in fn_seg for faultctl. */
extern int fn_sockets_seen;
void fn_stats_socket_first(void);

static inline void fn_stats_socket_seen(void)
{
	if (!__atomic_load_n(&fn_sockets_seen, __ATOMIC_RELAXED))
		fn_stats_socket_first();
}

/* requests.c: one HTTP request on a relayed connection, and what became
 * of it. seen is the rule whose match covered it (NULL for none), r the rule
 * that faulted it (NULL when it went on untouched). Counted per rule and
 * per method, Host and path prefix; faulted ones are also events.
 * fn_stats_request_to says whether it was sent on to the server (HTTP/2
 * knows); fn_stats_request works it out as the HTTP/1.1 relay does. The
 * fates' names (fn_req_fate_names) are the words of the stats, of the
 * request log's "fate" and of the docs: "untouched", "answered", "slowed",
 * "aborted". */
enum fn_req_fate { FN_REQ_UNTOUCHED, FN_REQ_ANSWERED, FN_REQ_SLOWED, FN_REQ_ABORTED };
/* The "http" record's count of requests sent on to the server (fn_seg_key). */
#define FN_REQ_TO_SERVER 4
extern const char *const fn_req_fate_names[4];
void fn_stats_request(const struct fn_rule *seen, const struct fn_rule *r,
		      const struct fn_endpoint *ep, const char *method, const char *host,
		      const char *path, enum fn_req_fate fate);
void fn_stats_request_to(const struct fn_rule *seen, const struct fn_rule *r,
			 const struct fn_endpoint *ep, const char *method, const char *host,
			 const char *path, enum fn_req_fate fate, bool to_server);
/* A relayed connection the HTTP parser gave up on (relayed untouched from
 * there): counted, and an event ("not-http", "bad-request", "bad-response"). */
enum fn_unparsed { FN_UNPARSED_NOT_HTTP, FN_UNPARSED_REQUEST, FN_UNPARSED_RESPONSE };
void fn_stats_unparsed(const struct fn_endpoint *ep, enum fn_unparsed what);
/* A TLS connection the relay terminated, passed through, or ended
 * (enum fn_seg_tls): counted in the "tls" record; all but terminated are
 * also events ("tls-" and the count's name). */
void fn_stats_tls(const struct fn_endpoint *ep, enum fn_seg_tls what);
/* A "tls" field that is a state, not a count of events: set to v. */
void fn_stats_tls_set(enum fn_seg_tls what, uint64_t v);

/* h2sent.c. HTTP/2 (preload/h2/): what the engine did on a connection to ep,
 * under rule r (NULL for none): FN_H2S_CONN an HTTP/2 connection carried
 * (code 1 over TLS, 0 in clear text), FN_H2S_GRPC a gRPC status sent
 * (code), FN_H2S_RST an RST_STREAM sent (code: HTTP/2 error code),
 * FN_H2S_GOAWAY a GOAWAY sent (code). */
enum fn_h2_sent { FN_H2S_CONN, FN_H2S_GRPC, FN_H2S_RST, FN_H2S_GOAWAY };
void fn_stats_h2(const struct fn_rule *r, const struct fn_endpoint *ep, enum fn_h2_sent what,
		 int code);

/* lookups.c: one name lookup by the resolver hooks; r is the dns rule that
 * faulted it (NULL when resolved as usual); what is one of the below.
 * Faulted lookups are also events. */
enum {
	FN_LOOKUP_REAL = 0,
	FN_LOOKUP_NXDOMAIN,
	FN_LOOKUP_SERVFAIL,
	FN_LOOKUP_NODATA,
	FN_LOOKUP_TIMEOUT,
	FN_LOOKUP_REFUSED,
	FN_LOOKUP_DELAYED,
	FN_LOOKUP_ANSWERED
};
void fn_stats_lookup(const char *name, const struct fn_rule *r, int what);
/* The same for a name of len bytes (its strlen, which the caller has). */
void fn_stats_lookup_len(const char *name, size_t len, const struct fn_rule *r, int what);
/* A connect to an address name resolved to (fn_names_each's callback). */
void fn_stats_name_connect(const char *name, void *unused);

#endif
