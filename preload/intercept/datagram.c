/* datagram.c - addressed sends and filtered receives.
 * A send to a faulted peer goes to the UDP sink instead (the kernel still
 * reports success and its own errors); a TCP Fast Open send connects without
 * connect() and is redirected like one. Datagrams from a faulted peer are
 * taken off the socket and never handed to the app. A delayed datagram is
 * handed to the relay thread, which sends it from the same socket later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/chance.h"
#include "core/rules.h"
#include "preload/relay/reinject.h"
#include "preload/relay/relay.h"

#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/dns/responder.h"
#include "preload/intercept/fault.h"
#include "preload/intercept/intercept.h"
#include "preload/stats/stats.h"

static size_t iov_bytes(const struct msghdr *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

/* A delay rule's delay for one datagram, with its jitter. */
static uint64_t datagram_delay(const struct fn_rule *r)
{
	static uint64_t n;
	double j = 0;
	if (r->par.jitter_ms)
		j = (fn_random(fn_rule_key(r) ^ 0xd1, __atomic_add_fetch(&n, 1, __ATOMIC_RELAXED)) *
			 2 -
		     1) *
		    r->par.jitter_ms;
	double ms = r->par.delay_ms + j;
	return ms <= 0 ? 0 : (uint64_t)(ms * 1e6);
}

/* Where an addressed send to sa must really go: NULL to send as asked, else
 * target (filled; *tlen 0 means "queue it for *delay ns instead"). Sets
 * *fail when the fault cannot be set up. n is the length sent, or, when msg
 * is given, its iovecs' (added up only once a rule matched). */
static const struct sockaddr *redirect_matched(int fd, const struct sockaddr *sa, socklen_t len,
					       int flags, size_t n, const struct msghdr *msg,
					       const struct fn_verdict *v,
					       struct sockaddr_storage *target, socklen_t *tlen,
					       bool *fail, uint64_t *delay)
{
	/* A TCP socket ignores the address unless it is a Fast Open connect. */
	if (v->proto == FN_PROTO_TCP && !(flags & MSG_FASTOPEN))
		return NULL;
	if (!v->rule) {
		fn_stats_attempt(fd, NULL, v->seen, &v->ep, v->proto, "sent", 0);
		return NULL;
	}
	/* A datagram to a cut peer changes nothing about the socket; a Fast
	 * Open send connects it, like connect. */
	bool udp = v->proto == FN_PROTO_UDP;
	uint64_t bytes = udp ? (msg ? iov_bytes(msg) : n) : 0;
	if (fn_fault_target(fd, sa, len, v, bytes, !udp, target, tlen)) {
		if (!*tlen)
			*delay = datagram_delay(v->rule);
		return (const struct sockaddr *)target;
	}
	*fail = true;
	return NULL;
}

static const struct sockaddr *redirect(int fd, const struct sockaddr *sa, socklen_t len, int flags,
				       size_t n, const struct msghdr *msg,
				       struct sockaddr_storage *target, socklen_t *tlen, bool *fail,
				       uint64_t *delay)
{
	struct fn_verdict v;
	*fail = false;
	if (!sa || !fn_fault_match(fd, sa, len, &v))
		return NULL;
	const struct sockaddr *to =
	    redirect_matched(fd, sa, len, flags, n, msg, &v, target, tlen, fail, delay);
	fn_fault_done(&v); /* before the send: it may block */
	return to;
}

/* The slow paths below are kept out of line (noinline): inlined into the
 * hook, their locals would make every call that needs none of them save
 * registers and set up a frame, about 40 instructions a call. */
static __attribute__((noinline)) ssize_t sendto_covered(int fd, const void *buf, size_t n,
							int flags, const struct sockaddr *sa,
							socklen_t len)
{
	if (!sa) /* a connected socket's send: tested here, off the fast path */
		return LIBC_HOT(sendto)(fd, buf, n, flags, sa, len);
	struct sockaddr_storage t;
	socklen_t tlen;
	bool fail;
	uint64_t delay;
	const struct sockaddr *to = redirect(fd, sa, len, flags, n, NULL, &t, &tlen, &fail, &delay);
	if (fail)
		return -1;
	if (to && !tlen)
		return fn_relay_datagram(fd, buf, n, sa, len, NULL, 0, delay) ? (ssize_t)n : -1;
	if (to)
		return LIBC(sendto)(fd, buf, n, flags, to, tlen);
	return LIBC(sendto)(fd, buf, n, flags, sa, len);
}

ssize_t fn_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
		  socklen_t len)
{
	/* An unaddressed send (sa NULL) passes too, tested in sendto_covered:
	 * on a socket no rule can cover, the pass-through tests nothing else. */
	if (!fn_fault_possible(fd))
		return LIBC_HOT(sendto)(fd, buf, n, flags, sa, len);
	return sendto_covered(fd, buf, n, flags, sa, len);
}

/* Queues a delayed message with its control messages (a UDP_SEGMENT one
 * makes it several datagrams when it is sent); its length, or -1. */
static ssize_t delay_msg(int fd, const struct msghdr *m, uint64_t delay)
{
	size_t n = iov_bytes(m), at = 0;
	char *flat = malloc(n ? n : 1);
	if (!flat) {
		errno = ENOBUFS;
		return -1;
	}
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		memcpy(flat + at, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
		at += m->msg_iov[i].iov_len;
	}
	bool ok = fn_relay_datagram(fd, flat, n, m->msg_name, m->msg_namelen, m->msg_control,
				    m->msg_control ? m->msg_controllen : 0, delay);
	free(flat);
	return ok ? (ssize_t)n : -1;
}

ssize_t fn_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct sockaddr_storage t;
	socklen_t tlen;
	bool fail;
	uint64_t delay;
	const struct sockaddr *to = msg ? redirect(fd, msg->msg_name, msg->msg_namelen, flags, 0,
						   msg, &t, &tlen, &fail, &delay)
					: NULL;
	if (msg && fail)
		return -1;
	if (to && !tlen)
		return delay_msg(fd, msg, delay);
	if (!to)
		return LIBC(sendmsg)(fd, msg, flags);
	struct msghdr m = *msg;
	m.msg_name = (void *)to;
	m.msg_namelen = tlen;
	return LIBC(sendmsg)(fd, &m, flags);
}

#define BATCH 64

/* Sends up to BATCH messages with faulted names replaced; returns what the
 * kernel returned and copies msg_len back. */
static int send_batch(int fd, struct mmsghdr *vec, unsigned n, int flags)
{
	struct mmsghdr copy[BATCH];
	struct sockaddr_storage targets[BATCH];
	for (unsigned i = 0; i < n; i++) {
		struct msghdr *h = &vec[i].msg_hdr;
		socklen_t tlen;
		bool fail;
		uint64_t delay;
		copy[i] = vec[i];
		const struct sockaddr *to = redirect(fd, h->msg_name, h->msg_namelen, flags, 0, h,
						     &targets[i], &tlen, &fail, &delay);
		if (to && !tlen && i == 0) {
			/* A delayed datagram goes alone, after those before it. */
			ssize_t r = delay_msg(fd, h, delay);
			if (r >= 0)
				vec[0].msg_len = (unsigned)r;
			return r < 0 ? -1 : 1;
		}
		if (fail || (to && !tlen)) {
			if (i == 0)
				return -1;
			n = i; /* send what precedes it; the app retries the rest */
			break;
		}
		if (to) {
			copy[i].msg_hdr.msg_name = (void *)to;
			copy[i].msg_hdr.msg_namelen = tlen;
		}
	}
	int sent = LIBC(sendmmsg)(fd, copy, n, flags);
	for (int i = 0; i < sent; i++)
		vec[i].msg_len = copy[i].msg_len;
	return sent;
}

static bool any_named(const struct mmsghdr *vec, unsigned vlen)
{
	for (unsigned i = 0; i < vlen; i++)
		if (vec[i].msg_hdr.msg_name)
			return true;
	return false;
}

int fn_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	unsigned sum = fn_policy_summary_fresh();
	if (!(sum & (FN_PS_WATCH_TCP | FN_PS_WATCH_UDP | FN_PS_DNS)) || !vec ||
	    !any_named(vec, vlen))
		return LIBC(sendmmsg)(fd, vec, vlen, flags);
	int total = 0;
	while (vlen > 0) {
		unsigned n = vlen < BATCH ? vlen : BATCH;
		int sent = send_batch(fd, vec, n, flags);
		if (sent < 0)
			return total ? total : -1;
		total += sent;
		if ((unsigned)sent < n)
			break;
		vec += n;
		vlen -= n;
	}
	return total;
}

enum inbound { IN_PASS, IN_DROP, IN_DELAY };

/* What the policy does to a datagram received from sa: nothing, drop it, or
 * delay it by *delay ns. */
static enum inbound inbound_verdict(int fd, const struct sockaddr *sa, socklen_t len, ssize_t n,
				    uint64_t *delay)
{
	struct fn_verdict v;
	if (!fn_fault_match(fd, sa, len, &v))
		return IN_PASS;
	enum inbound what = IN_PASS;
	if (v.rule && v.proto == FN_PROTO_UDP && v.rule->action != FN_ACT_DNS) {
		bool later = v.rule->action == FN_ACT_DELAY;
		fn_stats_attempt(fd, v.rule, v.seen, &v.ep, v.proto,
				 later ? "delayed-in" : "dropped-in", (uint64_t)n);
		if (later)
			*delay = datagram_delay(v.rule);
		what = later ? IN_DELAY : IN_DROP;
	}
	fn_fault_done(&v);
	return what;
}

/* Takes a received datagram (n bytes in m's buffers) to be delivered again
 * later; false if it cannot be, and the app then gets it now. */
static bool delay_inbound(int fd, const struct msghdr *m, size_t n, const struct sockaddr *from,
			  socklen_t fromlen, uint64_t delay)
{
	size_t room = iov_bytes(m), take = n < room ? n : room, at = 0;
	char *flat = malloc(take ? take : 1);
	if (!flat)
		return false;
	for (size_t i = 0; i < m->msg_iovlen && at < take; i++) {
		size_t k = m->msg_iov[i].iov_len < take - at ? m->msg_iov[i].iov_len : take - at;
		memcpy(flat + at, m->msg_iov[i].iov_base, k);
		at += k;
	}
	bool ok = fn_reinject_later(fd, flat, take, from, fromlen, delay);
	free(flat);
	return ok;
}

/* Throws away the datagram at the head of the queue after a MSG_PEEK. */
static void discard_head(int fd, int flags)
{
	char byte;
	LIBC(recv)(fd, &byte, 0, (flags & ~MSG_PEEK) | MSG_DONTWAIT);
}

/* Hands the app what the kernel gave m, with the sender own: its share of
 * the address and the full length, as the kernel would. */
static ssize_t deliver(struct msghdr *msg, const struct msghdr *m,
		       const struct sockaddr_storage *own, ssize_t n)
{
	if (msg->msg_name)
		memcpy(msg->msg_name, own,
		       m->msg_namelen < msg->msg_namelen ? m->msg_namelen : msg->msg_namelen);
	msg->msg_namelen = msg->msg_name ? m->msg_namelen : 0;
	msg->msg_controllen = m->msg_controllen;
	msg->msg_flags = m->msg_flags;
	return n;
}

/* recvmsg that never returns a datagram from a faulted peer. A blocking
 * socket waits for the next one; a non-blocking one reports EAGAIN, as after
 * a datagram that failed its checksum. */
static __attribute__((noinline)) ssize_t recv_filtered(int fd, struct msghdr *msg, int flags)
{
	/* Receive the sender's address into our own buffer, whatever the
	 * app's holds (it may be short, or absent), decide on it, then hand
	 * the app its share with the full length, as the kernel would. */
	struct sockaddr_storage own;
	struct msghdr m = *msg;
	m.msg_name = &own;
	for (;;) {
		m.msg_namelen = sizeof(own);
		own.ss_family = AF_UNSPEC;
		m.msg_controllen = msg->msg_controllen;
		ssize_t n = LIBC(recvmsg)(fd, &m, flags);
		uint64_t delay = 0;
		enum inbound what = IN_PASS;
		/* A datagram the shim sent again after a delay: put its real
		 * sender back; otherwise ask the policy. */
		/* An answer of the shim's nameserver comes from the server
		 * the app asked. */
		if (n >= 0 && fn_dns_responder_source(&own, &m.msg_namelen))
			return deliver(msg, &m, &own, n);
		if (n >= 0 &&
		    !fn_reinject_source(fd, &own, &m.msg_namelen, (size_t)n, flags & MSG_PEEK))
			what =
			    inbound_verdict(fd, (struct sockaddr *)&own, m.msg_namelen, n, &delay);
		if (what == IN_DELAY && !delay_inbound(fd, &m, (size_t)n, (struct sockaddr *)&own,
						       m.msg_namelen, delay))
			what = IN_PASS;
		if (what != IN_PASS) {
			if (flags & MSG_PEEK)
				discard_head(fd, flags);
			continue;
		}
		return n >= 0 ? deliver(msg, &m, &own, n) : n;
	}
}

/* False for every socket but one the shim saw made as UDP: the receive
 * paths' first test, one test of the fd table (fn_fd_maybe: a yes is only
 * a maybe, which udp_filter_on() settles). */
static inline bool maybe_udp(int fd)
{
	return __builtin_expect(fn_fd_maybe(fd, FDF_UDP), 0);
}

/* Filtering is needed only on UDP sockets while a UDP rule is enabled. */
static inline bool udp_filter_on(int fd)
{
	/* maybe_udp() read fd's own byte unless fd lies outside the table:
	 * then it read another fd's, and fd itself has no flags. */
	if ((unsigned)fd >= FN_FD_MAX)
		return false;
	unsigned sum = fn_policy_summary_fresh();
	return sum && ((sum & FN_PS_UDP) || fn_dns_responder_active());
}

static bool needs_filter(int fd)
{
	if (!maybe_udp(fd))
		return false;
	return udp_filter_on(fd);
}

ssize_t fn_recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (!needs_filter(fd) || !msg)
		return LIBC_HOT(recvmsg)(fd, msg, flags);
	return recv_filtered(fd, msg, flags);
}

static __attribute__((noinline)) ssize_t recvfrom_filtered(int fd, void *buf, size_t n, int flags,
							   struct sockaddr *sa, socklen_t *len)
{
	struct iovec iov = {.iov_base = buf, .iov_len = n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (sa && len) {
		m.msg_name = sa;
		m.msg_namelen = *len;
	}
	ssize_t r = recv_filtered(fd, &m, flags);
	if (r >= 0 && sa && len)
		*len = m.msg_namelen;
	return r;
}

/* recvfrom, recv and read on a UDP socket: its own function, entered by a
 * tail call, so that neither the other sockets' path nor this one needs a
 * frame to keep the arguments across the policy check. */
static __attribute__((noinline)) ssize_t recvfrom_udp(int fd, void *buf, size_t n, int flags,
						      struct sockaddr *sa, socklen_t *len)
{
	if (!udp_filter_on(fd))
		return LIBC(recvfrom)(fd, buf, n, flags, sa, len);
	return recvfrom_filtered(fd, buf, n, flags, sa, len);
}

ssize_t fn_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa, socklen_t *len)
{
	if (!maybe_udp(fd))
		return LIBC_HOT(recvfrom)(fd, buf, n, flags, sa, len);
	return recvfrom_udp(fd, buf, n, flags, sa, len);
}

static __attribute__((noinline)) ssize_t recv_udp(int fd, void *buf, size_t n, int flags)
{
	if (!udp_filter_on(fd))
		return LIBC(recv)(fd, buf, n, flags);
	return recvfrom_filtered(fd, buf, n, flags, NULL, NULL);
}

ssize_t fn_recv(int fd, void *buf, size_t n, int flags)
{
	if (!maybe_udp(fd))
		return LIBC_HOT(recv)(fd, buf, n, flags);
	return recv_udp(fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t read_filtered(int fd, void *buf, size_t n)
{
	int e = errno;
	ssize_t r = recvfrom_filtered(fd, buf, n, 0, NULL, NULL);
	if (r < 0 && errno == ENOTSOCK) {
		/* The fd number was reused by something the shim did not see. */
		fn_fd_set(fd, 0);
		errno = e;
		return LIBC(read)(fd, buf, n);
	}
	return r;
}

static __attribute__((noinline)) ssize_t read_udp(int fd, void *buf, size_t n)
{
	if (!udp_filter_on(fd))
		return LIBC(read)(fd, buf, n);
	return read_filtered(fd, buf, n);
}

ssize_t fn_read(int fd, void *buf, size_t n)
{
	if (!maybe_udp(fd))
		return LIBC_HOT(read)(fd, buf, n);
	return read_udp(fd, buf, n);
}

static __attribute__((noinline)) ssize_t readv_filtered(int fd, const struct iovec *iov, int iovcnt)
{
	int e = errno;
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
	ssize_t r = iovcnt >= 0 ? recv_filtered(fd, &m, 0) : LIBC(readv)(fd, iov, iovcnt);
	if (r < 0 && errno == ENOTSOCK) {
		fn_fd_set(fd, 0);
		errno = e;
		return LIBC(readv)(fd, iov, iovcnt);
	}
	return r;
}

ssize_t fn_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (!needs_filter(fd))
		return LIBC_HOT(readv)(fd, iov, iovcnt);
	return readv_filtered(fd, iov, iovcnt);
}

int fn_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	if (!needs_filter(fd) || !vec)
		return LIBC(recvmmsg)(fd, vec, vlen, flags, timeout);
	/* One at a time, so that a dropped datagram never takes a slot; after
	 * the first, take only what is already queued (MSG_WAITFORONE). */
	unsigned got = 0;
	int fl = flags & ~MSG_WAITFORONE;
	while (got < vlen) {
		ssize_t n = recv_filtered(fd, &vec[got].msg_hdr, got ? fl | MSG_DONTWAIT : fl);
		if (n < 0)
			return got ? (int)got : -1;
		vec[got++].msg_len = (unsigned)n;
	}
	return (int)got;
}
