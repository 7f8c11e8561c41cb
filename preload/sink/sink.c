/* sink.c - creates, watches and repairs the loopback sinks (see sink.h).
 * No mutex: a sink is claimed with a compare-and-swap on its state, the
 * claimer never blocks while holding it, and a fork child drops claims that
 * were in flight in the parent. */
#include "preload/sink/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rules.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/signals.h"

enum { SINK_NONE, SINK_BUSY, SINK_READY, SINK_BROKEN };

struct sink {
	int state;
	int fd;	  /* the listener, or the datagram socket */
	int park; /* blackhole: the connection that keeps the accept queue full */
	uint16_t port;
	int live;	     /* stall: connections handed out and not closed by the app */
	bool rotate;	     /* stall: too many dead ones queued; start a new listener */
	dev_t dev, park_dev; /* identities, to tell our fds from reused numbers */
	ino_t ino, park_ino;
};

static struct sink sinks[FN_SINK_KINDS][2]; /* [kind][0 = IPv4, 1 = IPv6] */
static __thread int building;		    /* re-entry from a signal handler */

#define STALL_BACKLOG 4096
#define STALL_DEAD_MAX 256 /* connections the app closed, left in a queue */
#define RETIRED_MAX 64
/* A stall listener never accepts, so a connection the app has closed stays
 * in its queue (CLOSE-WAIT, with its buffers) until the listener closes.
 * Each listener counts the connections it still serves; once too many
 * dead ones wait in the current one it is retired, and a retired one is
 * closed as soon as the app has closed every connection it served. */
static struct {
	int fd;
	dev_t dev;
	ino_t ino;
	int family, live;
	uint16_t port;
} retired[RETIRED_MAX]; /* stall listeners still serving connections */
static int nretired;
static pthread_mutex_t stall_lock = PTHREAD_MUTEX_INITIALIZER; /* live, retired */

static void close_quietly(int fd)
{
	if (fd >= 0) {
		fn_fd_set(fd, 0);
		LIBC(close)(fd);
	}
}

/* SO_REUSEADDR only on listeners, to rebind a port that TIME_WAIT holds:
 * no other account can bind a port where a socket listens. On a UDP socket
 * or a bound TCP socket that does not listen, it would let any account bind
 * the same port and take the refused connections or "dropped" datagrams. */
static int open_socket(int family, int type, bool reuse)
{
	int fd = LIBC(socket)(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	if (reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	return fd;
}

/* Fills the accept queue of a backlog-0 listener with one connection, after
 * which Linux drops every further SYN whatever the syncookie setting. */
static int park_connection(int family, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	fn_sockaddr_loopback(family, port, &ss, &len);
	int fd = open_socket(family, SOCK_STREAM, false);
	if (fd < 0)
		return -1;
	if (LIBC(connect)(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		close_quietly(fd);
		return -1;
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	poll(&p, 1, 1000);
	return fn_fd_move_high(fd, FN_RANGE_SINK);
}

static int bind_listen(struct sink *s, enum fn_sink_kind kind, int family, uint16_t port)
{
	int type = kind == FN_SINK_UDP ? SOCK_DGRAM : SOCK_STREAM;
	bool listens = kind != FN_SINK_UDP && kind != FN_SINK_REFUSE;
	int fd = open_socket(family, type, listens);
	if (fd < 0)
		return -1;
	struct sockaddr_storage ss;
	socklen_t len;
	fn_sockaddr_loopback(family, port, &ss, &len);
	int small = 1; /* the kernel rounds it up to its minimum */
	int one = 1;
	if (kind == FN_SINK_UDP)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	int cap = FN_STALL_RCVBUF; /* inherited by every queued connection */
	if (kind == FN_SINK_STALL)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cap, sizeof(cap));
	if (kind == FN_SINK_HOLD) /* the relay binds its openers here too */
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	int backlog = kind == FN_SINK_STALL ? STALL_BACKLOG : 0;
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (listens && listen(fd, backlog) < 0) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		int e = errno;
		close_quietly(fd);
		errno = e;
		return -1;
	}
	s->port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					  : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fn_fd_move_high(fd, FN_RANGE_SINK);
}

static bool build(struct sink *s, enum fn_sink_kind kind, int family, uint16_t port)
{
	s->fd = bind_listen(s, kind, family, port);
	s->park = -1;
	if (s->fd < 0)
		return false;
	bool parked = kind == FN_SINK_BLACKHOLE || kind == FN_SINK_HOLD;
	if (parked && (s->park = park_connection(family, s->port)) < 0) {
		int e = errno;
		close_quietly(s->fd);
		errno = e;
		return false;
	}
	fn_fd_identify(s->fd, &s->dev, &s->ino);
	fn_fd_mark(s->fd, FDF_INTERNAL);
	if (s->park >= 0 && fn_fd_identify(s->park, &s->park_dev, &s->park_ino))
		fn_fd_mark(s->park, FDF_INTERNAL);
	return true;
}

static bool alive(const struct sink *s)
{
	return fn_fd_same_file(s->fd, s->dev, s->ino);
}

/* A stall listener whose accept queue is nearly full would start dropping
 * SYNs, turning stalls into blackholes: start a new one, keep the old. */
static bool stall_full(const struct sink *s)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (getsockopt(s->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return false;
	return ti.tcpi_sacked > 0 && ti.tcpi_unacked + 8 >= ti.tcpi_sacked;
}

static void retire(const struct sink *old, int family)
{
	pthread_mutex_lock(&stall_lock);
	if (old->live <= 0) { /* nothing it serves is open: close it now */
		if (alive(old))
			close_quietly(old->fd);
		pthread_mutex_unlock(&stall_lock);
		return;
	}
	if (nretired == RETIRED_MAX) {
		/* Close the oldest only if the number is still ours. */
		if (fn_fd_same_file(retired[0].fd, retired[0].dev, retired[0].ino))
			close_quietly(retired[0].fd);
		memmove(retired, retired + 1, sizeof(retired[0]) * (RETIRED_MAX - 1));
		nretired--;
	}
	retired[nretired].fd = old->fd;
	retired[nretired].dev = old->dev;
	retired[nretired].ino = old->ino;
	retired[nretired].family = family;
	retired[nretired].port = old->port;
	retired[nretired++].live = old->live;
	pthread_mutex_unlock(&stall_lock);
}

/* Called with the sink claimed (SINK_BUSY). */
static bool rebuild(struct sink *s, enum fn_sink_kind kind, int family, bool same_port)
{
	struct sink old = *s;
	if (same_port) {
		/* The listener is gone or replaced: release what is left so
		 * the port can be bound again. */
		if (alive(&old))
			close_quietly(old.fd);
		if (fn_fd_same_file(old.park, old.park_dev, old.park_ino))
			close_quietly(old.park);
	} else {
		retire(&old, family);
		s->live = 0;
		s->rotate = false;
	}
	if (build(s, kind, family, same_port ? old.port : 0))
		return true;
	return same_port && build(s, kind, family, 0);
}

static bool claim(struct sink *s, int from)
{
	return __atomic_compare_exchange_n(&s->state, &from, SINK_BUSY, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static void release(struct sink *s, bool ok)
{
	__atomic_store_n(&s->state, ok ? SINK_READY : SINK_BROKEN, __ATOMIC_RELEASE);
}

/* Waits out another thread's work on the sink; it never blocks while it
 * holds the claim, so this is short. */
static int settle(struct sink *s)
{
	int st;
	while ((st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) == SINK_BUSY)
		sched_yield();
	return st;
}

static bool ensure(struct sink *s, enum fn_sink_kind kind, int family)
{
	if (building) {
		errno = EAGAIN;
		return false;
	}
	int st = settle(s);
	bool ok = true;
	building = 1;
	if ((st == SINK_NONE || st == SINK_BROKEN) && claim(s, st))
		release(s, ok = build(s, kind, family, 0));
	else if (st == SINK_READY && !alive(s) && claim(s, SINK_READY))
		release(s, ok = rebuild(s, kind, family, true));
	else if (st == SINK_READY && kind == FN_SINK_STALL &&
		 (__atomic_load_n(&s->rotate, __ATOMIC_RELAXED) || stall_full(s)) &&
		 claim(s, SINK_READY))
		release(s, ok = rebuild(s, kind, family, false));
	building = 0;
	if (!ok)
		return false;
	if (settle(s) != SINK_READY) {
		errno = ENOBUFS;
		return false;
	}
	return true;
}

/* A stall connection handed out: its listener serves one more. */
static void stall_serves(enum fn_sink_kind kind, int family)
{
	if (kind != FN_SINK_STALL)
		return;
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&stall_lock);
	sinks[FN_SINK_STALL][family == AF_INET6].live++;
	pthread_mutex_unlock(&stall_lock);
	fn_signals_restore(&old);
}

bool fn_sink_addr(enum fn_sink_kind kind, int family, struct sockaddr_storage *addr, socklen_t *len)
{
	int e = errno;
	if (family == AF_INET6 && ensure(&sinks[kind][1], kind, AF_INET6)) {
		fn_sockaddr_loopback(AF_INET6, sinks[kind][1].port, addr, len);
		stall_serves(kind, AF_INET6);
		errno = e;
		return true;
	}
	if (!ensure(&sinks[kind][0], kind, AF_INET))
		return false;
	fn_sockaddr_loopback(AF_INET, sinks[kind][0].port, addr, len);
	stall_serves(kind, AF_INET);
	if (family == AF_INET6) {
		/* No IPv6 loopback here: reach the IPv4 sink as ::ffff:127.0.0.1. */
		fn_sockaddr_map_v4(addr, len);
	}
	errno = e;
	return true;
}

void fn_sink_lost(int fd)
{
	for (int k = 0; k < FN_SINK_KINDS; k++)
		for (int f = 0; f < 2; f++) {
			struct sink *s = &sinks[k][f];
			if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SINK_READY)
				continue;
			if (s->park == fd) {
				/* The parked connection still sits in the
				 * queue, which stays full: nothing to do. */
				s->park = -1;
			} else if (s->fd == fd) {
				building = 1; /* before the claim: see ensure() */
				if (claim(s, SINK_READY))
					release(s, rebuild(s, (enum fn_sink_kind)k,
							   f ? AF_INET6 : AF_INET, true));
				building = 0;
			}
		}
}

/* How many connections wait in a listener's accept queue. */
static int queued(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ? 0 : (int)ti.tcpi_unacked;
}

static int family_of(const struct sockaddr_storage *ss, uint16_t *port)
{
	if (ss->ss_family == AF_INET) {
		*port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
		return AF_INET;
	}
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
	*port = ntohs(in6->sin6_port);
	return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) ? AF_INET : AF_INET6;
}

void fn_sink_stall_closed(const struct sockaddr_storage *target)
{
	uint16_t port;
	int family = family_of(target, &port);
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&stall_lock);
	struct sink *s = &sinks[FN_SINK_STALL][family == AF_INET6];
	if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == SINK_READY && s->port == port) {
		s->live--;
		if (queued(s->fd) - s->live > STALL_DEAD_MAX)
			__atomic_store_n(&s->rotate, true, __ATOMIC_RELAXED);
	}
	for (int i = 0; i < nretired; i++) {
		if (retired[i].family != family || retired[i].port != port || --retired[i].live > 0)
			continue;
		/* Every connection it served is closed: so is the listener. */
		if (fn_fd_same_file(retired[i].fd, retired[i].dev, retired[i].ino))
			close_quietly(retired[i].fd);
		retired[i--] = retired[--nretired];
	}
	pthread_mutex_unlock(&stall_lock);
	fn_signals_restore(&old);
}

void fn_sink_atfork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	stall_lock = fresh;
	for (int k = 0; k < FN_SINK_KINDS; k++)
		for (int f = 0; f < 2; f++)
			if (sinks[k][f].state == SINK_BUSY)
				sinks[k][f].state = SINK_NONE;
	building = 0;
}
