/* relay.c - the relay threads (see relay.h). Shard 0's thread, started by
 * the first relayed connect or delayed datagram, runs an epoll loop over its
 * relayed connections and every delayed datagram. Once shard 0 carries
 * FN_SHARD_AFTER connections and the process may use two CPUs, a second
 * shard's thread runs the same loop over the connections given to it (the
 * one with fewer, relay_shard.h); HTTP connections stay on shard 0. Each
 * shard's mutex is held while its thread works and released while it waits,
 * so a connect or close from the app waits at most one round of
 * non-blocking I/O; the unmatched path never takes one. */
#include "preload/relay/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "core/clock.h"
#include "preload/fd/fdtab.h"
#include "preload/base/alone.h"
#include "preload/base/libc.h"
#include "preload/base/signals.h"
#include "preload/relay/reinject.h"
#include "preload/relay/relay_conn.h"
#include "preload/relay/relay_http.h"
#include "preload/relay/relay_sched.h"
#include "preload/relay/relay_shard.h"
#include "preload/relay/splice.h"
#include "preload/sink/sink.h"
#include "preload/stats/stats.h"

#define SHARD_INIT(i)                                                        \
	{                                                                    \
		.lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakefd = -1, \
		.pipe = {.ends = {-1, -1}}, .index = i                       \
	}
static struct fn_shard shards[FN_SHARDS] = {SHARD_INIT(0), SHARD_INIT(1)};
_Static_assert(FN_SHARDS == 2, "SHARD_INIT each shard");
/* Delayed datagrams: shard 0's, under its lock. */
static struct fn_dgram *dgrams;

/* A fork child's copies of the parent's connections and datagrams: its
 * atfork handler lets go of their fds but frees nothing, since a parent
 * thread may have held the allocator's lock at the fork and an allocator
 * without fork handlers of its own (ASan's) would then never return. They
 * are freed once the child's relay starts, outside the handler. Shard 0's
 * lock. */
static struct fn_conn *inherited;
static struct fn_dgram *inherited_dgrams;
/* A thread waits at most LOST_CHECK_NS at a time, since a wait on an epoll
 * fd the app closed (rebuild_wanted) can be woken by nothing else. */
#define LOST_CHECK_NS 200000000ull

static void wake(struct fn_shard *s)
{
	uint64_t one = 1;
	/* -1 once the app has closed it: never write into a reused number. */
	int fd = __atomic_load_n(&s->wakefd, __ATOMIC_ACQUIRE);
	if (fd >= 0) {
		ssize_t w = write(fd, &one, sizeof(one));
		(void)w;
	}
}

static int own_fd(int fd)
{
	return fd < 0 ? -1 : fn_fd_move_high(fd, FN_RANGE_SINK);
}

void fn_relay_close(struct fn_conn *c, int fd, bool hard)
{
	if (fd < 0)
		return;
	if (hard) {
		struct linger l = {1, 0};
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	if (c->shard) /* else not handed over yet: in no epoll set */
		epoll_ctl(c->shard->epfd, EPOLL_CTL_DEL, fd, NULL);
	fn_fd_set(fd, 0);
	LIBC(close)(fd);
}

void fn_relay_watch(struct fn_conn *c, int which, uint32_t events)
{
	int fd = which ? c->up : c->app;
	uint32_t *have = &c->watching[which];
	if (fd < 0 || *have == events)
		return;
	struct epoll_event ev = {.events = events, .data.ptr = (char *)c + which};
	int op = *have == FN_WATCH_NONE ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
	if (epoll_ctl(c->shard->epfd, op, fd, &ev) == 0)
		*have = events;
}

static void *loop(void *arg);

/* Frees what a fork child inherited (see `inherited`). Shard 0's lock. */
static void free_inherited(void)
{
	while (inherited) {
		struct fn_conn *c = inherited;
		inherited = c->next;
		fn_http_atfork_forget(c);
		fn_conn_free(c);
	}
	while (inherited_dgrams) {
		struct fn_dgram *d = inherited_dgrams;
		inherited_dgrams = d->next;
		free(d);
	}
}

/* s's lock held. */
static bool start_thread(struct fn_shard *s)
{
	if (s->running)
		return true;
	if (s == &shards[0])
		free_inherited();
	if (s->epfd < 0 && (s->epfd = own_fd(epoll_create1(EPOLL_CLOEXEC))) < 0)
		return false;
	if (s->wakefd < 0) {
		int w = own_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		if (w < 0)
			return false;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, w, &ev);
		__atomic_store_n(&s->wakefd, w, __ATOMIC_RELEASE);
	}
	int e = fn_thread_start(loop, s);
	if (e) {
		errno = e;
		return false;
	}
	__atomic_store_n(&s->running, true, __ATOMIC_RELEASE);
	return true;
}

/* Whether the process may run on more than one CPU: asked only until the
 * second shard has started (a system call), so that a process pinned to one
 * CPU (or a fork child pinned since) keeps one relay thread. */
static bool many_cpus(void)
{
	cpu_set_t set;
	return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2;
}

/* The shard for a new connection: shard 0 as long as it carries fewer than
 * FN_SHARD_AFTER or the process has one CPU, and for HTTP connections
 * (their engine's state, the request log, TLS and HTTP/2 are shard 0's
 * alone); else the one with the fewest. The counts are read without the
 * locks: a choice one connection off is still a fair one. */
static struct fn_shard *choose(const struct fn_conn *c)
{
	struct fn_shard *best = &shards[0];
	unsigned fewest = __atomic_load_n(&best->live, __ATOMIC_RELAXED);
	if (c->http_mode || fewest < FN_SHARD_AFTER ||
	    (!__atomic_load_n(&shards[1].running, __ATOMIC_ACQUIRE) && !many_cpus()))
		return best;
	for (int i = 1; i < FN_SHARDS; i++) {
		unsigned n = __atomic_load_n(&shards[i].live, __ATOMIC_RELAXED);
		if (n < fewest) {
			best = &shards[i];
			fewest = n;
		}
	}
	return best;
}

/* The app's local address. An unbound socket is bound to its family's
 * any-address with IP_BIND_ADDRESS_NO_PORT, so that the kernel picks the
 * port at connect time, as for a plain connect, and may reuse one in
 * TIME_WAIT: bind(port 0) never does, and relayed connects would run out of
 * ports. The port is then 0 here; the relay reads it once the app's SYN is
 * out (relay_conn.c). */
static bool local_address(int fd, int family, struct sockaddr_storage *ss, socklen_t *len)
{
	*len = sizeof(*ss);
	if (getsockname(fd, (struct sockaddr *)ss, len) < 0)
		return false;
	uint16_t port = ss->ss_family == AF_INET ? ((struct sockaddr_in *)ss)->sin_port
						 : ((struct sockaddr_in6 *)ss)->sin6_port;
	bool unbound = ss->ss_family == AF_INET
			   ? ((struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY)
			   : IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)ss)->sin6_addr);
	if (port || !unbound)
		return true; /* bound by the app (an address without a port too) */
	/* IP_BIND_ADDRESS_NO_PORT for this bind only: the app reads back its
	 * own value (the option acts at bind, not at the connect after it). */
	int one = 1, nop = 0;
	socklen_t nlen = sizeof(nop);
	getsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &nop, &nlen);
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	struct sockaddr_storage any;
	memset(&any, 0, sizeof(any));
	any.ss_family = (sa_family_t)family;
	socklen_t alen =
	    family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int rc = bind(fd, (struct sockaddr *)&any, alen);
	if (!nop)
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &nop, sizeof(nop));
	if (rc < 0)
		return false;
	*len = sizeof(*ss);
	return getsockname(fd, (struct sockaddr *)ss, len) == 0;
}

/* Where the relay must aim its SYN: the app's port on the address its
 * socket will use to reach the hold sink (loopback when bound to any). */
static void handshake_target(struct sockaddr_storage *local, const struct sockaddr_storage *hold)
{
	if (local->ss_family == AF_INET) {
		struct sockaddr_in *l = (struct sockaddr_in *)local;
		if (l->sin_addr.s_addr == htonl(INADDR_ANY))
			l->sin_addr = ((const struct sockaddr_in *)hold)->sin_addr;
		return;
	}
	struct sockaddr_in6 *l6 = (struct sockaddr_in6 *)local;
	if (IN6_IS_ADDR_UNSPECIFIED(&l6->sin6_addr))
		l6->sin6_addr = ((const struct sockaddr_in6 *)hold)->sin6_addr;
}

/* The peer's connect failed at once (a refusal on loopback, no route): the
 * app's connect meets the same. A refusal comes from the kernel itself, the
 * app's connect sent to the refuse sink (a port where nothing listens), so
 * that blocking and non-blocking connects, poll and SO_ERROR read as
 * against the peer; any other error is the connect's own return. */
static bool meet_at_once(int err, int family, struct sockaddr_storage *to, socklen_t *len)
{
	if (err == ECONNREFUSED)
		return fn_sink_addr(FN_SINK_REFUSE, family, to, len);
	errno = err;
	return false;
}

/* Adds c to its shard's connections, or takes it out (the shard's lock
 * held). */
static void link_conn(struct fn_conn *c)
{
	struct fn_shard *s = c->shard;
	c->next = s->conns;
	c->pprev = &s->conns;
	if (s->conns)
		s->conns->pprev = &c->next;
	s->conns = c;
	__atomic_store_n(&s->live, s->live + 1, __ATOMIC_RELAXED);
}

static void unlink_conn(struct fn_conn *c)
{
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	__atomic_store_n(&c->shard->live, c->shard->live - 1, __ATOMIC_RELAXED);
}

/* This thread's last relayed connect: the app's fd, its connection and
 * that connection's shard, and whether the peer had already accepted (see
 * fn_relay_connected). */
static __thread int last_fd = -1;
static __thread struct fn_conn *last_conn;
static __thread struct fn_shard *last_shard;
static __thread bool peer_open;

static bool relay_start(int fd, const struct sockaddr *dest, socklen_t destlen,
			const struct fn_rule *r, struct sockaddr_storage *hold, socklen_t *holdlen)
{
	struct sockaddr_storage local;
	socklen_t llen;
	int family = dest->sa_family;
	if (!fn_sink_addr(FN_SINK_HOLD, family, hold, holdlen) ||
	    !local_address(fd, family, &local, &llen))
		return false;
	handshake_target(&local, hold);
	struct fn_conn *c = fn_conn_new(fd, r, dest, destlen, &local, llen, hold, *holdlen);
	if (!c) {
		errno = ENOBUFS;
		return false;
	}
	int met = fn_conn_dial(c);
	last_fd = -1;
	peer_open = !met && c->up_open && r->action != FN_ACT_DELAY;
	if (met && r->action != FN_ACT_DELAY) {
		fn_conn_finish(c, true);
		fn_conn_free(c);
		return meet_at_once(met, family, hold, holdlen);
	}
	struct fn_shard *s = choose(c);
	pthread_mutex_lock(&s->lock);
	bool ok = start_thread(s) && fn_sched_reserve(&s->sched);
	if (ok) {
		c->shard = s;
		link_conn(c);
		fn_sched_ready(c); /* new: the thread starts it */
		last_fd = fd;
		last_conn = c;
		last_shard = s;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		free(c);
		errno = EAGAIN;
		return false;
	}
	wake(s);
	return true;
}

/* The fd a delayed datagram is sent through later: a duplicate of the
 * app's socket, one for all the datagrams of that socket waiting in the
 * queue, not one each (2,000 queued datagrams would take 2,000 of the
 * app's fds). Lock held. */
static int sending_fd(struct fn_dgram *d, int app_fd)
{
	if (!fn_fd_identify(app_fd, &d->sock_dev, &d->sock_ino))
		return -1;
	for (const struct fn_dgram *x = dgrams; x; x = x->next)
		if (!x->inbound && x->fd >= 0 && x->sock_dev == d->sock_dev &&
		    x->sock_ino == d->sock_ino)
			return x->fd;
	return own_fd(LIBC(fcntl)(app_fd, F_DUPFD_CLOEXEC, 0));
}

static bool fd_queued(int fd)
{
	for (const struct fn_dgram *x = dgrams; x; x = x->next)
		if (!x->inbound && x->fd == fd)
			return true;
	return false;
}

bool fn_relay_queue(struct fn_dgram *d, int dup_of)
{
	struct fn_shard *s = &shards[0];
	pthread_mutex_lock(&s->lock);
	bool ok = start_thread(s);
	if (ok && dup_of >= 0)
		ok = (d->fd = sending_fd(d, dup_of)) >= 0;
	/* Once queued, d belongs to the relay thread, which may send and free
	 * it as soon as the lock is released: decide now. */
	if (ok) {
		/* Ordered by due time, first come first out among equals, so
		 * that a constant delay never reorders datagrams. */
		struct fn_dgram **at = &dgrams;
		while (*at && (*at)->due_ns <= d->due_ns)
			at = &(*at)->next;
		d->next = *at;
		*at = d;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		free(d);
		errno = ENOBUFS;
		return false;
	}
	wake(s);
	return true;
}

static bool relay_datagram(int fd, const void *buf, size_t n, const struct sockaddr *to,
			   socklen_t tolen, const void *ctl, size_t ctllen, uint64_t delay_ns)
{
	struct fn_dgram *d = malloc(sizeof(*d) + n + ctllen);
	if (!d) {
		errno = ENOBUFS;
		return false;
	}
	memset(d, 0, sizeof(*d));
	memcpy(d->data, buf, n);
	d->len = n;
	if (ctllen)
		memcpy(d->data + n, ctl, ctllen);
	d->ctllen = ctllen;
	if (to && tolen <= sizeof(d->to)) {
		memcpy(&d->to, to, tolen);
		d->tolen = tolen;
	}
	d->due_ns = fn_now_ns() + delay_ns;
	return fn_relay_queue(d, fd);
}

/* The entry points the app's threads call run with signals blocked: they
 * lock the relay's mutex and allocate (see signals.h). */
bool fn_relay_start(int fd, const struct sockaddr *dest, socklen_t destlen, const struct fn_rule *r,
		    struct sockaddr_storage *hold, socklen_t *holdlen)
{
	sigset_t old;
	fn_signals_block(&old);
	bool ok = relay_start(fd, dest, destlen, r, hold, holdlen);
	fn_signals_restore(&old);
	return ok;
}

/* A non-blocking connect to a peer on loopback has completed by the time
 * the peer's accept returns: a program that connects, accepts and then
 * polls both ends in one thread finds its own end writable at once. The
 * relay completes the app's handshake only after its own connect to the
 * peer, so when that peer had already accepted, the app's connect waits
 * (100 ms at most) for the relay to complete it before returning
 * EINPROGRESS, as the kernel's own connect has by then. */
static bool settle(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	uint64_t until = fn_now_ns() + 100 * MS;
	for (uint64_t now = fn_now_ns(); now < until; now = fn_now_ns()) {
		int n = poll(&p, 1, (int)((until - now) / MS) + 1);
		if (n != -1 || errno != EINTR)
			return n == 1 && (p.revents & POLLOUT);
	}
	return false;
}

/* The app's connect has completed: the last ACK of the relay's handshake
 * with the peer, held until now (relay_conn.c: upstream_socket), goes out
 * from the app's own thread, before its connect returns, so that the
 * peer's accept has the connection by then, as on loopback. The relay
 * thread would send it too, once it sees the app's handshake done, but
 * perhaps after the app's next call: a non-blocking accept at once
 * found nothing. Under the shard's lock: the relay thread closes the
 * peer's socket only under it. */
static void release_hold(struct fn_conn *c, struct fn_shard *s)
{
	(void)s;
	fn_conn_hold_release(c);
}

/* An app's connect to the hold port that started no handshake (the
 * socket's pending error, ECONNABORTED after a refusal, EADDRNOTAVAIL):
 * the connection set up for it would wait for ever, and keep the hold
 * port's 4-tuple with the app's address from the next attempt's. */
static void abandon(struct fn_conn *c, struct fn_shard *s)
{
	if (c->state == FN_CONN_RELAY)
		return;
	fn_conn_finish(c, true);
	fn_sched_ready(c); /* to be freed */
	wake(s);
}

/* Runs what on the connection this thread's connect just handed over
 * (mine, for the app's fd), if the relay thread has not finished it
 * meanwhile: under its shard's lock, which the relay thread holds while it
 * steps (and closes) it. The app's errno is kept. */
static void on_mine(int fd, struct fn_conn *mine, struct fn_shard *s,
		    void (*what)(struct fn_conn *, struct fn_shard *))
{
	int e = errno;
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&s->lock);
	for (struct fn_conn *c = s->conns; c; c = c->next)
		if (c == mine && c->appfd == fd && !c->done)
			what(c, s);
	pthread_mutex_unlock(&s->lock);
	fn_signals_restore(&old);
	errno = e;
}

void fn_relay_connected(int fd, int rc, int err)
{
	if (fd < 0 || fd != last_fd)
		return;
	last_fd = -1;
	if (rc == 0) {
		on_mine(fd, last_conn, last_shard, release_hold);
		return;
	}
	if (err == EINTR || err == EALREADY || err == EISCONN)
		return;
	if (err == EINPROGRESS) {
		if (peer_open && settle(fd))
			on_mine(fd, last_conn, last_shard, release_hold);
	} else {
		on_mine(fd, last_conn, last_shard, abandon);
	}
	errno = err;
}

bool fn_relay_datagram(int fd, const void *buf, size_t n, const struct sockaddr *to,
		       socklen_t tolen, const void *ctl, size_t ctllen, uint64_t delay_ns)
{
	sigset_t old;
	fn_signals_block(&old);
	bool ok = relay_datagram(fd, buf, n, to, tolen, ctl, ctllen, delay_ns);
	fn_signals_restore(&old);
	return ok;
}

/* Sends the datagrams that are due; returns the earliest still waiting.
 * Shard 0's lock held. */
static uint64_t send_due(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	for (struct fn_dgram **p = &dgrams; *p;) {
		struct fn_dgram *d = *p;
		if (d->due_ns > now) {
			next = d->due_ns < next ? d->due_ns : next;
			p = &d->next;
			continue;
		}
		*p = d->next;
		if (d->inbound) {
			fn_reinject_send(d); /* and frees it */
			continue;
		}
		/* As the app sent it: its control messages too (UDP_SEGMENT
		 * then splits it into the datagrams the app meant). */
		struct iovec iov = {.iov_base = d->data, .iov_len = d->len};
		struct msghdr m = {.msg_name = d->tolen ? &d->to : NULL,
				   .msg_namelen = d->tolen,
				   .msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = d->ctllen ? d->data + d->len : NULL,
				   .msg_controllen = d->ctllen};
		LIBC(sendmsg)(d->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (d->fd >= 0 && !fd_queued(d->fd)) { /* the last one through it */
			fn_fd_set(d->fd, 0);
			LIBC(close)(d->fd);
		}
		free(d);
	}
	return next;
}

/* Steps every connection of s that an event or its timer concerns (and
 * only those: relay_sched.h), and shard 0 the datagrams that are due;
 * frees the finished ones, and returns the earliest timer. */
static uint64_t step_all(struct fn_shard *s, uint64_t now)
{
	uint64_t next = s == &shards[0] ? send_due(now) : UINT64_MAX;
	for (struct fn_conn *c = fn_sched_take(&s->sched, now), *more; c; c = more) {
		more = c->ready_next; /* a step may list c again */
		if (c->done)
			c->ready = false;
		else
			fn_conn_step(c, now);
		/* Listed again by its own step (established) and then
		 * finished: freed by the round that takes it. */
		if (c->done && !c->ready) {
			unlink_conn(c);
			fn_sched_forget(c);
			fn_sched_release(&s->sched);
			fn_conn_free(c);
			continue;
		}
		fn_sched_timer(c);
	}
	uint64_t t = fn_sched_next(&s->sched);
	return t < next ? t : next;
}

/* epoll_wait until the deadline next (CLOCK_MONOTONIC ns; UINT64_MAX for
 * none). epoll_pwait2 takes nanoseconds: latency rules would otherwise be
 * late by up to a millisecond of rounding. */
static int wait_until(int epfd, struct epoll_event *ev, int max, uint64_t next)
{
	static bool no_pwait2; /* every shard's */
	uint64_t now = fn_now_ns();
	uint64_t left = next == UINT64_MAX ? 0 : next > now ? next - now : 0;
	if (!__atomic_load_n(&no_pwait2, __ATOMIC_RELAXED)) {
		struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
				      .tv_nsec = (long)(left % 1000000000u)};
		int n = (int)syscall(SYS_epoll_pwait2, epfd, ev, max,
				     next == UINT64_MAX ? NULL : &ts, NULL, (size_t)8);
		if (n >= 0 || errno != ENOSYS)
			return n;
		__atomic_store_n(&no_pwait2, true, __ATOMIC_RELAXED);
	}
	int ms = next == UINT64_MAX ? -1 : (int)((left + 999999) / 1000000);
	return epoll_wait(epfd, ev, max, ms);
}

/* New epoll fd and eventfd after the app closed s's; every connection of
 * s is watched again from scratch. s's lock held. */
static void rebuild_fds(struct fn_shard *s)
{
	s->rebuild_wanted = false;
	if (s->epfd >= 0) {
		fn_fd_set(s->epfd, 0);
		LIBC(close)(s->epfd);
	}
	if (s->wakefd >= 0) {
		fn_fd_set(s->wakefd, 0);
		LIBC(close)(s->wakefd);
	}
	int e = own_fd(epoll_create1(EPOLL_CLOEXEC));
	__atomic_store_n(&s->epfd, e, __ATOMIC_RELAXED);
	int w = own_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	if (e < 0 || w < 0) {
		/* out of fds: try again on the next round */
		__atomic_store_n(&s->wakefd, w, __ATOMIC_RELEASE);
		s->rebuild_wanted = true;
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, w, &ev);
	__atomic_store_n(&s->wakefd, w, __ATOMIC_RELEASE);
	for (struct fn_conn *c = s->conns; c; c = c->next) {
		c->watching[0] = c->watching[1] = FN_WATCH_NONE;
		fn_sched_ready(c);
		c->dir[0].quiet = c->dir[1].quiet = false;
	}
}

/* Set on a relay thread to its shard: an exit() there (fn_end_if_alone)
 * drains that shard from the thread itself. */
static __thread struct fn_shard *my_shard;

/* Marks the connections an epoll round reported on. s's lock held. */
static void take_events(struct fn_shard *s, struct epoll_event *ev, int n)
{
	for (int i = 0; i < n; i++) {
		if (!ev[i].data.ptr) {
			uint64_t v;
			ssize_t r = s->wakefd >= 0 ? LIBC(read)(s->wakefd, &v, sizeof(v)) : 0;
			(void)r; /* new connections were listed ready by relay_start */
			continue;
		}
		uintptr_t tag = (uintptr_t)ev[i].data.ptr;
		struct fn_conn *c = (struct fn_conn *)(tag & ~(uintptr_t)1);
		fn_sched_ready(c);
		/* The socket tag & 1 is the source of direction tag & 1. */
		if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			c->dir[tag & 1].quiet = false;
		if (ev[i].events & EPOLLPRI)
			c->dir[tag & 1].urgent = true;
		if (ev[i].events & EPOLLERR)
			c->dir[tag & 1].err_seen = true;
	}
}

/* One shard's thread: the same loop for every shard. */
static void *loop(void *arg)
{
	struct fn_shard *s = arg;
	my_shard = s;
	char name[16] = "faultnet-relay";
	if (s->index)
		name[14] = (char)('1' + s->index); /* faultnet-relay2 */
	prctl(PR_SET_NAME, name);
	/* Wake-ups on time: the default 50 us slack adds to every latency
	 * release and token refill. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	/* Many events a wake-up: 1,000 busy connections have that many. */
	struct epoll_event ev[256];
	uint64_t next = 0;
	for (;;) {
		uint64_t check = fn_now_ns() + LOST_CHECK_NS;
		/* Its number as of now: the app may close it meanwhile
		 * (lost_in), and the thread then builds a new one. */
		int epfd = __atomic_load_n(&s->epfd, __ATOMIC_RELAXED);
		int n = epfd >= 0 ? wait_until(epfd, ev, 256, next < check ? next : check) : 0;
		/* idle: every 200 ms at most, whatever the traffic was; shard
		 * 0's thread alone, which runs whenever another does */
		if (n <= 0 && s->index == 0)
			fn_end_if_alone();
		if (epfd < 0)
			nanosleep(&(struct timespec){0, (long)LOST_CHECK_NS}, NULL);
		pthread_mutex_lock(&s->lock);
		if (__atomic_load_n(&s->rebuild_wanted, __ATOMIC_RELAXED)) {
			rebuild_fds(s);
			n = 0;
		}
		take_events(s, ev, n);
		next = step_all(s, fn_now_ns());
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

/* fd closed by the app, in shard s (its lock held). */
static void lost_in(struct fn_shard *s, int fd)
{
	if (fd == s->epfd || fd == s->wakefd) {
		/* Ours no more: forget the numbers now, rebuild in the thread. */
		if (fd == s->wakefd)
			__atomic_store_n(&s->wakefd, -1, __ATOMIC_RELEASE);
		else
			__atomic_store_n(&s->epfd, -1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->rebuild_wanted, true, __ATOMIC_RELAXED);
	}
	fn_splice_lost(&s->pipe, fd);
	for (struct fn_conn *c = s->conns; c; c = c->next)
		if (c->app == fd || c->up == fd || c->opener == fd) {
			fn_conn_forget_fd(c, fd);
			fn_sched_ready(c); /* to be freed */
		}
	if (s == &shards[0])
		for (struct fn_dgram *d = dgrams; d; d = d->next)
			if (d->fd == fd)
				d->fd = -1;
}

/* Every shard in turn, one lock at a time. */
static void relay_lost(int fd)
{
	for (int i = 0; i < FN_SHARDS; i++) {
		struct fn_shard *s = &shards[i];
		if (!__atomic_load_n(&s->running, __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&s->lock);
		lost_in(s, fd);
		pthread_mutex_unlock(&s->lock);
	}
}

/* In a fork child: s's connections and fds are the parent's relay's. */
static void shard_atfork_child(struct fn_shard *s)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	s->lock = fresh;
	/* The parent's relay keeps serving the connections; the child must not
	 * hold their sockets open after the parent closes them. */
	while (s->conns) {
		struct fn_conn *c = s->conns;
		s->conns = c->next;
		int fds[3] = {c->app, c->up, c->opener};
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0) {
				fn_fd_set(fds[i], 0);
				LIBC(close)(fds[i]);
			}
		c->app = c->up = c->opener = -1;
		c->next = inherited;
		inherited = c;
	}
	s->live = 0;
	fn_sched_atfork_child(&s->sched);
	int fds[2] = {s->epfd, s->wakefd};
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0) {
			fn_fd_set(fds[i], 0);
			LIBC(close)(fds[i]);
		}
	s->epfd = s->wakefd = -1;
	s->rebuild_wanted = false;
	fn_splice_atfork_child(&s->pipe);
	s->running = false;
}

void fn_relay_atfork_child(void)
{
	fn_reqlog_atfork_child();
	for (int i = 0; i < FN_SHARDS; i++)
		shard_atfork_child(&shards[i]);
	while (dgrams) {
		struct fn_dgram *d = dgrams;
		dgrams = d->next;
		if (d->fd >= 0 && !d->inbound && !fd_queued(d->fd)) { /* shared: once */
			fn_fd_set(d->fd, 0);
			LIBC(close)(d->fd);
		}
		d->next = inherited_dgrams;
		inherited_dgrams = d;
	}
}

void fn_relay_lost(int fd)
{
	sigset_t old;
	fn_signals_block(&old);
	relay_lost(fd);
	fn_signals_restore(&old);
}

/* Bytes of c still on their way: in the relay's buffers (latency holds them
 * until due) or in its socket from the app, not read yet. Lock held. */
static bool undelivered(const struct fn_conn *c)
{
	int unread = 0;
	/* Only what the app sent matters at its exit; a direction a rule
	 * stopped (stall, blackhole) delivers nothing anyway. */
	if (c->done || c->state != FN_CONN_RELAY || c->dir[0].stopped)
		return false;
	return c->dir[0].lo < c->dir[0].hi ||
	       (c->app >= 0 && ioctl(c->app, SIOCINQ, &unread) == 0 && unread > 0);
}

#define DRAIN_NS 5000000000ull

/* One look at shard s at exit (its lock taken here): true while it still
 * has bytes to deliver and may; at the end (last), what it could not
 * deliver is reset. On s's own thread, nobody else steps its connections:
 * they are stepped here. */
static bool drain_shard(struct fn_shard *s, bool last)
{
	if (!__atomic_load_n(&s->running, __ATOMIC_ACQUIRE))
		return false;
	bool pending = false;
	pthread_mutex_lock(&s->lock);
	for (struct fn_conn *c = s->conns; c && !pending; c = c->next)
		pending = undelivered(c);
	if (pending && last) {
		for (struct fn_conn *c = s->conns; c; c = c->next)
			if (undelivered(c)) {
				fn_conn_finish(c, true);
				fn_sched_ready(c);
			}
		pending = false;
	}
	if (pending && my_shard == s) {
		for (struct fn_conn *c = s->conns; c; c = c->next) {
			fn_sched_ready(c); /* no epoll here: read anyway */
			c->dir[0].quiet = c->dir[1].quiet = false;
		}
		step_all(s, fn_now_ns());
	}
	pthread_mutex_unlock(&s->lock);
	if (pending)
		wake(s);
	return pending;
}

/* exit(): the relay threads die with the process, and the kernel would end
 * their connections with a FIN after whatever they had sent: the peer would
 * take a truncated stream for a whole one. The relay gets up to 5 s to
 * deliver what it holds (as the kernel still delivers a closed socket's
 * data); a connection it could not finish is reset, never ended cleanly.
 * The shards are looked at one after the other, one lock at a time. */
__attribute__((destructor)) static void drain_at_exit(void)
{
	if (!__atomic_load_n(&shards[0].running, __ATOMIC_ACQUIRE))
		return;
	uint64_t until = fn_now_ns() + DRAIN_NS;
	sigset_t old;
	fn_signals_block(&old);
	for (;;) {
		bool last = fn_now_ns() >= until, pending = false;
		for (int i = 0; i < FN_SHARDS; i++)
			pending |= drain_shard(&shards[i], last);
		if (!pending)
			break;
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	}
	/* FAULTNET_REQUESTS: a line for each request still waiting, so that a
	 * log never lacks one the app sent. HTTP connections are shard 0's. */
	pthread_mutex_lock(&shards[0].lock);
	fn_reqlog_exit();
	pthread_mutex_unlock(&shards[0].lock);
	fn_signals_restore(&old);
}
