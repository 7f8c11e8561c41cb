/* fault.c - decides whether a socket's peer is faulted and records the
 * decision on the fd, shared by connect, TCP Fast Open and datagram sends. */
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/chance.h"
#include "core/dns.h"
#include "core/http.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/owner.h"
#include "preload/base/policy.h"
#include "preload/dns/responder.h"
#include "preload/intercept/fault.h"
#include "preload/relay/relay.h"
#include "preload/sink/sink.h"
#include "preload/stats/stats.h"

/* The protocol of fd as the socket() hook saw it; for fds created elsewhere
 * (before the shim loaded, or by a path it does not see) ask the kernel,
 * which costs a syscall, so only once a rule could apply. */
static uint8_t socket_proto(int fd)
{
	unsigned f = fn_fd_get(fd);
	if (!(f & (FDF_TCP | FDF_UDP)))
		f = fn_fd_kind_of(fd);
	return f & FDF_TCP ? FN_PROTO_TCP : f & FDF_UDP ? FN_PROTO_UDP : 0;
}

/* First-match, where a rule whose conditions say no passes the connection
 * or datagram on to the rules after it. It stays counted against the first
 * rule that covered it if no later one takes it. */
static const struct fn_rule *decide(const struct fn_policy *p, const struct fn_endpoint *ep,
				    uint8_t proto, const struct fn_rule **seen)
{
	const struct fn_rule *r = fn_policy_match(p, ep, proto, seen), *declined = NULL;
	/* An HTTP rule's conditions count requests, not connections. */
	while (r && !fn_rule_http(r) && !fn_cond_pass(r)) {
		if (!declined)
			declined = r;
		r = fn_policy_match_from(p, ep, proto, (size_t)(r - p->rules) + 1, seen);
	}
	if (!r && declined)
		*seen = declined;
	/* A connection no connect-time rule takes is relayed when an HTTP
	 * rule covers its peer, even one switched off for now: enabled later,
	 * it then sees the requests of connections already open. */
	const struct fn_rule *http =
	    proto == FN_PROTO_TCP && (!r || fn_rule_http(r)) ? fn_http_covers(p, ep) : NULL;
	if (http && (!r || r == http || fn_rule_http(r))) {
		*seen = NULL; /* its requests are counted, not the connect */
		return http;
	}
	/* So is one an established rule covers while it is off: enabled
	 * later, it reaches the open connection (relay_follow.c). */
	const struct fn_rule *open =
	    !r && proto == FN_PROTO_TCP ? fn_established_covers(p, ep) : NULL;
	return open && !open->enabled ? open : r;
}

/* An IPv4-mapped destination on an IPV6_V6ONLY socket: the kernel itself
 * answers ENETUNREACH at once, so there is nothing to fault. */
static bool mapped_on_v6only(int fd, const struct sockaddr *sa)
{
	int only = 0, e = errno;
	socklen_t len = sizeof(only);
	bool res = sa->sa_family == AF_INET6 &&
		   IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr) &&
		   getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, &len) == 0 && only;
	errno = e;
	return res;
}

/* A query a process sends a nameserver itself, when a dns rule covers the
 * nameserver and no address rule took the socket first: it goes to the
 * responder (responder.h), which the rule's conditions count per query. */
static bool nameserver_match(int fd, const struct fn_policy *p, const struct sockaddr *sa,
			     socklen_t len, struct fn_verdict *v)
{
	const struct fn_rule *r;
	if (!fn_endpoint_from_sockaddr(&v->ep, sa, len) || !(r = fn_dns_nameserver(p, &v->ep)) ||
	    mapped_on_v6only(fd, sa))
		return false;
	int e = errno;
	v->proto = socket_proto(fd);
	errno = e;
	v->rule = r;
	v->seen = NULL;
	return v->proto != 0;
}

static bool address_match(int fd, const struct fn_policy *p, const struct sockaddr *sa,
			  socklen_t len, struct fn_verdict *v)
{
	if (!p->watch_protos)
		return false;
	/* A socket of a protocol no rule covers (a UDP send while every rule
	 * is TCP-only) never looks anything up. */
	unsigned f = fn_fd_get(fd);
	uint8_t known = f & FDF_TCP ? FN_PROTO_TCP : f & FDF_UDP ? FN_PROTO_UDP : 0;
	if ((known && !(p->watch_protos & known)) || !fn_endpoint_from_sockaddr(&v->ep, sa, len))
		return false;
	fn_policy_match(p, &v->ep, FN_PROTO_ANY, &v->seen);
	if (!v->seen || mapped_on_v6only(fd, sa))
		return false;
	int e = errno;
	v->proto = socket_proto(fd);
	errno = e;
	v->rule = v->proto ? decide(p, &v->ep, v->proto, &v->seen) : NULL;
	return v->proto && (v->seen || v->rule);
}

bool fn_fault_match(int fd, const struct sockaddr *sa, socklen_t len, struct fn_verdict *v)
{
	if (!fn_policy_summary_fresh())
		return false;
	struct fn_policy_hold h;
	const struct fn_policy *p = fn_policy_enter(&h);
	bool hit = p && address_match(fd, p, sa, len, v);
	if (p && __builtin_expect(p->dns_rules, 0) && (!hit || !v->rule)) {
		struct fn_verdict dns;
		if (nameserver_match(fd, p, sa, len, &dns)) {
			*v = dns;
			hit = true;
		}
	}
	if (!hit) {
		fn_policy_exit(&h);
		return false;
	}
	v->hold = h;
	return true;
}

static enum fn_sink_kind sink_for(const struct fn_rule *r, uint8_t proto)
{
	if (proto == FN_PROTO_UDP)
		return FN_SINK_UDP;
	if (r->action == FN_ACT_REFUSE)
		return FN_SINK_REFUSE;
	return r->action == FN_ACT_STALL ? FN_SINK_STALL : FN_SINK_BLACKHOLE;
}

static const char *fault_outcome(const struct fn_verdict *v)
{
	static const char *const names[FN_ACT_COUNT] = {
	    "blackholed", "stalled", "dropped",	 "refused", "reset",   "unreachable",
	    "delayed",	  "relayed", "relayed",	 "relayed", "relayed", "http",
	    "http",	  "http",    "resolver", "http"};
	if (v->rule->action == FN_ACT_DNS)
		return "resolver";
	if (v->proto == FN_PROTO_UDP)
		return v->rule->action == FN_ACT_DELAY ? "delayed" : "dropped";
	if (fn_rule_http(v->rule))
		return "http";
	if (fn_rule_relayed(v->rule) && v->rule->action != FN_ACT_DELAY)
		return "relayed";
	return names[v->rule->action];
}

/* An IPv4-mapped destination goes to the IPv4 sink, named as an IPv4-mapped
 * address: the socket's own address then reads ::ffff:127.0.0.1, as it
 * would for the real peer, not ::1. */
static bool mapped_sink(enum fn_sink_kind kind, struct sockaddr_storage *target, socklen_t *tlen)
{
	if (!fn_sink_addr(kind, AF_INET, target, tlen))
		return false;
	fn_sockaddr_map_v4(target, tlen);
	return true;
}

/* Sets up what the rule needs: a sink, the relay, or nothing (unreachable
 * fails at once, as with no route; a delayed datagram is queued by the
 * caller, told by *tlen == 0). False with errno when the app must get an
 * error. */
static bool prepare(int fd, const struct sockaddr *sa, socklen_t len, const struct fn_verdict *v,
		    struct sockaddr_storage *target, socklen_t *tlen)
{
	const struct fn_rule *r = v->rule;
	if (r->action == FN_ACT_DNS)
		return fn_dns_responder_addr(sa, len, target, tlen);
	if (v->proto == FN_PROTO_UDP && r->action == FN_ACT_DELAY) {
		*tlen = 0;
		return true;
	}
	if (v->proto == FN_PROTO_TCP && r->established && !r->enabled)
		return fn_relay_start(fd, sa, len, r, target, tlen);
	if (v->proto == FN_PROTO_TCP && r->action == FN_ACT_UNREACHABLE) {
		errno = r->par.net_unreachable ? ENETUNREACH : EHOSTUNREACH;
		return false;
	}
	if (v->proto == FN_PROTO_TCP &&
	    (fn_rule_relayed(r) || r->action == FN_ACT_RESET || r->action == FN_ACT_DELAY))
		return fn_relay_start(fd, sa, len, r, target, tlen);
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr))
		return mapped_sink(sink_for(r, v->proto), target, tlen);
	return fn_sink_addr(sink_for(r, v->proto), sa->sa_family, target, tlen);
}

/* Records on fd that it was sent to a sink instead of sa, so getpeername
 * can answer with the peer the app asked for. */
static bool record(int fd, const struct sockaddr *sa, socklen_t len, const struct fn_verdict *v,
		   const struct sockaddr_storage *target, socklen_t tlen, int dest)
{
	struct fn_fdstate *st = fn_fdstate(fd, true);
	dev_t dev;
	ino_t ino;
	if (!st || !fn_fd_identify(fd, &dev, &ino))
		return false;
	/* Keep what the kernel would report: the family's own size, no
	 * trailing bytes the app happened to pass. */
	memset(&st->peer, 0, sizeof(st->peer));
	st->peerlen =
	    sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	memcpy(&st->peer, sa, st->peerlen < len ? st->peerlen : len);
	if (sa->sa_family == AF_INET)
		memset(((struct sockaddr_in *)&st->peer)->sin_zero, 0, 8);
	memcpy(&st->target, target, tlen);
	st->targetlen = tlen;
	st->dev = dev;
	st->ino = ino;
	st->proto = v->proto;
	st->action = v->rule->action;
	st->dest = dest;
	strcpy(st->rule, v->rule->name);
	fn_fd_mark(fd, fn_fd_get(fd) | FDF_FAULT); /* close_range's sweep reaches it */
	return true;
}

bool fn_fault_target(int fd, const struct sockaddr *sa, socklen_t len, const struct fn_verdict *v,
		     uint64_t bytes, bool connecting, struct sockaddr_storage *target,
		     socklen_t *tlen)
{
	int e = errno;
	if (fn_in_vfork_child()) {
		/* Never let it through, never touch the parent's state. */
		errno = EAGAIN;
		return false;
	}
	/* Setting up a fault claims shared state (a sink being built, the
	 * relay's list) and passes cancellation points (poll, write): a thread
	 * cancelled there would leave the claim held forever. Cancellation
	 * waits for the app's own connect or send, which follows. */
	int cancel;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	bool ok = prepare(fd, sa, len, v, target, tlen);
	int err = errno;
	/* A relayed stream fault with no fd number of the shim's free (a
	 * tight RLIMIT_NOFILE, preload/fd/fdtab.h): the connection goes on
	 * unfaulted, never on one of the app's numbers, and the event says so.
	 * A connect-time fault still fails the call (fault-failed). */
	bool nofd = !ok && err == EMFILE && v->proto == FN_PROTO_TCP && fn_rule_relayed(v->rule) &&
		    len <= sizeof(*target);
	if (nofd) {
		memcpy(target, sa, len);
		*tlen = len;
		ok = true;
	}
	bool refused = !ok && v->rule->action == FN_ACT_UNREACHABLE;
	/* An HTTP rule counts the connection's requests, not the connect; a
	 * dns rule the queries (the responder counts them). */
	bool http = fn_rule_http(v->rule) || v->rule->action == FN_ACT_DNS;
	/* A connection relayed for an established rule that is off passes. */
	bool open = v->rule->established && !v->rule->enabled;
	int dest = fn_stats_attempt(fd, http || open || nofd ? NULL : v->rule,
				    http ? NULL : v->seen, &v->ep, v->proto,
				    nofd	    ? "unfaulted-no-fd"
				    : open && ok    ? "passed"
				    : ok || refused ? fault_outcome(v)
						    : "fault-failed",
				    bytes);
	if (ok && connecting && !nofd && !record(fd, sa, len, v, target, *tlen, dest)) {
		ok = false;
		err = ENOBUFS;
	}
	pthread_setcancelstate(cancel, NULL);
	errno = ok ? e : err;
	return ok;
}
