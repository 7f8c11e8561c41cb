/* responder_io.c - the responder's thread: one poll loop over every
 * server's UDP socket, TCP listener and connection to the real nameserver,
 * the TCP clients (up to 32) and the wake pipe. Each query is answered,
 * left unanswered or forwarded (queries waiting for the real nameserver,
 * given up after 30 s); answers late by a rule's delay wait in a list.
 * Both lists grow as needed, up to 4,096 each: beyond, a query or a late
 * answer is dropped (the client asks again), never answered early. Only
 * this thread touches that state. */
#include "preload/dns/responder_io.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/chance.h"
#include "core/clock.h"
#include "core/dns.h"
#include "core/dnswire.h"
#include "preload/base/alone.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/dns/peer.h"
#include "preload/fd/fdtab.h"
#include "preload/stats/stats.h"

#define CONNS 32
#define OUTSTANDING 4096 /* queries waiting for the nameserver, late answers */
#define MSG_MAX 65535
#define GIVE_UP_NS (30000 * MS)

/* Where an answer goes: a UDP client's address, or a TCP connection. */
struct dest {
	int server, conn; /* conn -1 for UDP */
	uint32_t gen;
	struct sockaddr_storage to;
	socklen_t tolen;
};

struct conn {
	bool used;
	struct fn_ownfd fd;
	uint32_t gen;
	size_t have;
	uint8_t *buf; /* 2 + MSG_MAX */
	int server;
};

struct pending {
	bool used;
	uint16_t id, app_id;
	uint64_t delay_ns, expires;
	struct dest d;
};

struct later {
	bool used;
	uint64_t due;
	struct dest d;
	uint8_t *msg;
	size_t len;
};

static struct conn conns[CONNS];
static struct pending *pend;
static struct later *laters;
static int npend, nlater; /* their lengths */
static uint32_t gens;
static uint16_t next_id;
static uint8_t buf[MSG_MAX];

static void deliver(const struct dest *d, const uint8_t *m, size_t n)
{
	if (d->conn < 0) {
		const struct fn_ownfd *u = &fn_dns_servers[d->server].udp;
		if (fn_ownfd_ok(u))
			LIBC(sendto)
		(u->fd, m, n, MSG_DONTWAIT, (const struct sockaddr *)&d->to, d->tolen);
		return;
	}
	const struct conn *c = &conns[d->conn];
	if (!c->used || c->gen != d->gen || !fn_ownfd_ok(&c->fd)) /* the client has gone */
		return;
	uint8_t head[2] = {(uint8_t)(n >> 8), (uint8_t)n};
	struct iovec iov[2] = {{head, 2}, {(void *)m, n}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	LIBC(sendmsg)(c->fd.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Frees the buffer p names, let go of first: a fork in between must leave
 * the child no pointer to memory already freed (it frees what it finds at
 * its thread's start, fn_dns_responder_io_release). */
#define LET_GO(p)                                                                     \
	do {                                                                          \
		void *b_ = (p);                                                       \
		(p) = NULL;                                                           \
		__atomic_signal_fence(__ATOMIC_SEQ_CST); /* stored before the free */ \
		free(b_);                                                             \
	} while (0)

/* A free entry of the list *arr of *len entries of size each, the list
 * doubled (zeroed) when all are used; -1 when it cannot grow. */
static int free_entry(void **arr, int *len, size_t size, bool (*used)(const void *))
{
	for (int i = 0; i < *len; i++)
		if (!used((char *)*arr + (size_t)i * size))
			return i;
	int n = *len ? *len * 2 : 64;
	/* Not realloc, which frees the old list before *arr names the new
	 * one: a fork in between would leave the child (which clears and frees
	 * what it finds) a freed list. The old one goes once the new is in
	 * place, with the entries it had and none longer than *len says. */
	void *p = n <= OUTSTANDING ? calloc((size_t)n, size) : NULL, *old = *arr;
	if (!p)
		return -1;
	if (old)
		memcpy(p, old, (size_t)*len * size);
	*arr = p;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* stored before the free */
	free(old);
	int at = *len;
	*len = n;
	return at;
}

static bool later_used(const void *e)
{
	return ((const struct later *)e)->used;
}

static void reply(const struct dest *d, const uint8_t *m, size_t n, uint64_t delay_ns)
{
	if (!delay_ns) {
		deliver(d, m, n);
		return;
	}
	int i = free_entry((void **)&laters, &nlater, sizeof(*laters), later_used);
	struct later *l = i >= 0 ? &laters[i] : NULL;
	if (!l || !(l->msg = malloc(n)))
		return; /* no room: dropped, as by a busy nameserver */
	memcpy(l->msg, m, n);
	l->len = n;
	l->d = *d;
	l->due = fn_now_ns() + delay_ns;
	l->used = true;
}

static bool upstream_open(struct fn_dns_server *s)
{
	if (fn_ownfd_ok(&s->up))
		return true;
	struct sockaddr_storage ss;
	socklen_t len;
	fn_endpoint_to_sockaddr(&s->real, !s->real.v4, &ss, &len);
	int fd = LIBC(socket)(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	int big = 1 << 21; /* the answers to a burst of queries (own_socket) */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	fd = fn_fd_move_high(fd, FN_RANGE_SINK);
	if (fd < 0 || LIBC(connect)(fd, (struct sockaddr *)&ss, len) < 0) {
		if (fd >= 0) {
			fn_fd_set(fd, 0);
			LIBC(close)(fd);
		}
		return false;
	}
	fn_ownfd_set(&s->up, fd);
	return true;
}

static uint64_t pend_now; /* for pend_used: an expired entry is free */

static bool pend_used(const void *e)
{
	const struct pending *p = e;
	return p->used && p->expires > pend_now;
}

/* To the real nameserver, under an id of the responder's own (two clients
 * may use the same one); its answer goes back late by delay_ns. */
static void forward(const struct dest *d, const uint8_t *m, size_t n, uint64_t delay_ns)
{
	struct fn_dns_server *s = &fn_dns_servers[d->server];
	pend_now = fn_now_ns();
	if (n < 2 || n > sizeof(buf) || !upstream_open(s))
		return;
	int i = free_entry((void **)&pend, &npend, sizeof(*pend), pend_used);
	if (i < 0)
		return;
	struct pending *p = &pend[i];
	*p = (struct pending){true, ++next_id, fn_dnswire_id(m), delay_ns, pend_now + GIVE_UP_NS,
			      *d};
	memcpy(buf, m, n);
	fn_dnswire_set_id(buf, p->id);
	if (send(s->up.fd, buf, n, MSG_DONTWAIT) < 0)
		p->used = false;
}

static void from_upstream(int server)
{
	const struct fn_ownfd *up = &fn_dns_servers[server].up;
	ssize_t n;
	while (fn_ownfd_ok(up) && (n = LIBC(recv)(up->fd, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
		if (n < 12)
			continue;
		uint16_t id = fn_dnswire_id(buf);
		for (int i = 0; i < npend; i++) {
			struct pending *p = &pend[i];
			if (!p->used || p->id != id || p->d.server != server)
				continue;
			p->used = false;
			fn_dnswire_set_id(buf, p->app_id);
			reply(&p->d, buf, (size_t)n, p->delay_ns);
			break;
		}
	}
}

static uint64_t rule_delay(const struct fn_rule *r)
{
	double ms = r->par.delay_ms;
	if (r->par.jitter_ms)
		ms += (fn_random(fn_rule_key(r) ^ 0xd5, fn_now_ns()) * 2 - 1) * r->par.jitter_ms;
	return ms <= 0 ? 0 : (uint64_t)(ms * 1e6);
}

static int lookup_kind(const struct fn_dns *d)
{
	return d->error ? (int)d->error : d->nanswer ? FN_LOOKUP_ANSWERED : FN_LOOKUP_DELAYED;
}

/* What rule r (a dns rule the caller holds a section on) says of a query:
 * forwarded, after a delay or not, answered, or left to time out. */
static void query_ruled(const struct dest *d, const uint8_t *m, size_t n, const struct fn_dnsq *q,
			const struct fn_rule *r)
{
	static const int rcode[] = {[FN_DNS_NXDOMAIN] = FN_RCODE_NXDOMAIN,
				    [FN_DNS_SERVFAIL] = FN_RCODE_SERVFAIL,
				    [FN_DNS_NODATA] = FN_RCODE_NOERROR,
				    [FN_DNS_REFUSED] = FN_RCODE_REFUSED};
	const struct fn_dns *dns = r->dns;
	uint64_t delay = rule_delay(r);
	if (dns->error == FN_DNS_TIMEOUT) /* silence: the client's own timeout */
		return;
	if (!dns->error && !dns->nanswer) {
		forward(d, m, n, delay);
		return;
	}
	uint8_t out[1024];
	size_t len = fn_dnswire_answer(m, q, rcode[dns->error], dns->answer,
				       dns->error ? 0 : dns->nanswer, 60, out, sizeof(out));
	if (len)
		reply(d, out, len, delay);
}

/* One query: what the dns rules say of its name, as a nameserver says it. */
static void query(const struct dest *d, const uint8_t *m, size_t n)
{
	struct fn_dnsq q;
	if (!fn_dnswire_query(m, n, &q)) { /* the nameserver's to judge */
		forward(d, m, n, 0);
		return;
	}
	struct fn_policy_hold h;
	const struct fn_policy *p = fn_policy_fresh(&h);
	const struct fn_rule *seen, *r = p && p->dns_rules ? fn_dns_decide(p, q.name, &seen) : NULL;
	fn_stats_lookup(q.name, r, r ? lookup_kind(r->dns) : FN_LOOKUP_REAL);
	if (r)
		query_ruled(d, m, n, &q, r);
	fn_policy_exit(&h);
	if (!r)
		forward(d, m, n, 0);
}

static void from_udp(int server)
{
	struct dest d = {.server = server, .conn = -1};
	const struct fn_ownfd *u = &fn_dns_servers[server].udp;
	ssize_t n;
	while (fn_ownfd_ok(u)) {
		d.tolen = sizeof(d.to);
		n = LIBC(recvfrom)(u->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&d.to,
				   &d.tolen);
		if (n < 0)
			return;
		if (!fn_dns_peer_udp(&d.to))
			continue;	      /* another process's: never answered nor counted */
		static uint8_t copy[MSG_MAX]; /* query() reuses buf to forward */
		memcpy(copy, buf, (size_t)n);
		query(&d, copy, (size_t)n);
	}
}

static void conn_close(struct conn *c)
{
	fn_ownfd_close(&c->fd);
	LET_GO(c->buf);
	c->used = false;
}

static void accept_one(int server)
{
	const struct fn_ownfd *t = &fn_dns_servers[server].tcp;
	struct sockaddr_storage from;
	socklen_t len = sizeof(from);
	int fd = fn_ownfd_ok(t) ? LIBC(accept4)(t->fd, (struct sockaddr *)&from, &len,
						SOCK_CLOEXEC | SOCK_NONBLOCK)
				: -1;
	if (fd < 0)
		return;
	if (!fn_dns_peer_tcp(&from, &fn_dns_servers[server].at)) {
		LIBC(close)(fd); /* another process's */
		return;
	}
	if ((fd = fn_fd_move_high(fd, FN_RANGE_SINK)) < 0)
		return;
	for (int i = 0; i < CONNS; i++)
		if (!conns[i].used && (conns[i].buf = malloc(2 + MSG_MAX))) {
			conns[i] = (struct conn){true, {-1, 0, 0}, ++gens, 0, conns[i].buf, server};
			fn_ownfd_set(&conns[i].fd, fd);
			return;
		}
	LIBC(close)(fd); /* full: the client sees its connection closed */
}

static void from_conn(int i)
{
	struct conn *c = &conns[i];
	ssize_t n = fn_ownfd_ok(&c->fd) ? LIBC(recv)(c->fd.fd, c->buf + c->have,
						     2 + MSG_MAX - c->have, MSG_DONTWAIT)
					: 0;
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->have += (size_t)n;
	struct dest d = {.server = c->server, .conn = i, .gen = c->gen};
	for (;;) {
		size_t len = c->have >= 2 ? (size_t)(c->buf[0] << 8 | c->buf[1]) : MSG_MAX + 1;
		if (len > MSG_MAX || c->have < 2 + len)
			return;
		query(&d, c->buf + 2, len);
		if (!c->used)
			return;
		memmove(c->buf, c->buf + 2 + len, c->have - 2 - len);
		c->have -= 2 + len;
	}
}

static int due_in_ms(void)
{
	uint64_t now = fn_now_ns(), next = UINT64_MAX;
	for (int i = 0; i < nlater; i++) {
		if (!laters[i].used)
			continue;
		if (laters[i].due <= now) {
			deliver(&laters[i].d, laters[i].msg, laters[i].len);
			LET_GO(laters[i].msg);
			laters[i].used = false;
		} else if (laters[i].due < next) {
			next = laters[i].due;
		}
	}
	return next == UINT64_MAX ? 1000 : (int)((next - now + MS - 1) / MS);
}

enum kind { K_WAKE, K_UDP, K_TCP, K_UP, K_CONN };

void fn_dns_serve(const struct fn_ownfd *wake)
{
	struct pollfd pf[1 + 3 * FN_DNS_SERVERS + CONNS];
	uint8_t kind[sizeof(pf) / sizeof(pf[0])];
	int which[sizeof(pf) / sizeof(pf[0])];
	for (;;) {
		int n = 0, servers = __atomic_load_n(&fn_dns_nservers, __ATOMIC_ACQUIRE);
		pf[n] = (struct pollfd){fn_ownfd_ok(wake) ? wake->fd : -1, POLLIN, 0};
		kind[n++] = K_WAKE;
		for (int s = 0; s < servers; s++) {
			const struct fn_dns_server *sv = &fn_dns_servers[s];
			const struct fn_ownfd *fds[3] = {&sv->udp, &sv->tcp, &sv->up};
			for (int k = 0; k < 3; k++)
				if (fn_ownfd_ok(fds[k])) {
					pf[n] = (struct pollfd){fds[k]->fd, POLLIN, 0};
					kind[n] = (uint8_t)(K_UDP + k);
					which[n++] = s;
				}
		}
		for (int i = 0; i < CONNS; i++)
			if (conns[i].used) {
				pf[n] = (struct pollfd){conns[i].fd.fd, POLLIN, 0};
				kind[n] = K_CONN;
				which[n++] = i;
			}
		fn_end_if_alone();
		if (poll(pf, (nfds_t)n, due_in_ms()) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (kind[i] == K_WAKE) {
				char drain[64];
				while (fn_ownfd_ok(wake) &&
				       LIBC(read)(wake->fd, drain, sizeof(drain)) > 0)
					;
			} else if (kind[i] == K_UDP) {
				from_udp(which[i]);
			} else if (kind[i] == K_TCP) {
				accept_one(which[i]);
			} else if (kind[i] == K_UP) {
				from_upstream(which[i]);
			} else {
				from_conn(which[i]);
			}
		}
	}
}

/* In a fork child's handler: frees nothing (a parent thread may have held
 * the allocator's lock at the fork); the buffers of the entries let go stay
 * for fn_dns_responder_io_release. */
void fn_dns_responder_io_forget(void)
{
	for (int i = 0; i < CONNS; i++)
		if (conns[i].used) {
			fn_ownfd_close(&conns[i].fd);
			conns[i].used = false;
		}
	for (int i = 0; i < nlater; i++)
		laters[i].used = false;
	if (pend)
		memset(pend, 0, (size_t)npend * sizeof(*pend));
}

void fn_dns_responder_io_release(void)
{
	for (int i = 0; i < CONNS; i++)
		if (!conns[i].used)
			LET_GO(conns[i].buf);
	for (int i = 0; i < nlater; i++)
		if (!laters[i].used)
			LET_GO(laters[i].msg);
}
