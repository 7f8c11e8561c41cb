/* reinject.c - delayed delivery of received datagrams (see reinject.h): the
 * shim's loopback sockets that send them again, and the list of datagrams
 * sent that way whose real sender the receive hook must restore. */
#include "preload/relay/reinject.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/signals.h"
#include "preload/relay/relay.h"
#include "preload/relay/relay_conn.h"

/* A datagram sent again, waiting for the app to receive it. */
struct sent {
	struct sent *next;
	struct sockaddr_storage to, from;
	socklen_t fromlen;
	size_t len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sent *sent_list;
static int helper[2] = {-1, -1}; /* [0] IPv4, [1] IPv6 */
static uint16_t helper_port[2];	 /* network order; read without the lock */

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					: ((const struct sockaddr_in6 *)ss)->sin6_port;
}

/* The shim's sending socket for a family, bound to loopback. Lock held. */
static int helper_fd(int family)
{
	int f = family == AF_INET6;
	if (helper[f] >= 0)
		return helper[f];
	int fd = LIBC(socket)(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_storage ss;
	socklen_t len;
	fn_sockaddr_loopback(family, 0, &ss, &len);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		if (fd >= 0)
			LIBC(close)(fd);
		return -1;
	}
	helper[f] = fn_fd_move_high(fd, FN_RANGE_SINK);
	__atomic_store_n(&helper_port[f], port_of(&ss), __ATOMIC_RELEASE);
	return helper[f];
}

/* Where the datagram must go to reach fd: its own address, with loopback
 * for an unspecified one. False for a connected socket. */
static bool app_address(int fd, struct sockaddr_storage *to, socklen_t *len)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	*len = sizeof(*to);
	if (LIBC(getpeername)(fd, (struct sockaddr *)&peer, &plen) == 0 ||
	    getsockname(fd, (struct sockaddr *)to, len) < 0)
		return false;
	if (to->ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)to;
		if (in->sin_addr.s_addr == htonl(INADDR_ANY))
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else if (to->ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)to;
		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
			in6->sin6_addr = in6addr_loopback;
	} else {
		return false;
	}
	return true;
}

static bool reinject_later(int fd, const void *buf, size_t n, const struct sockaddr *from,
			   socklen_t fromlen, uint64_t delay_ns)
{
	int e = errno;
	struct fn_dgram *d = calloc(1, sizeof(*d) + n);
	if (!d || fromlen > sizeof(d->from) || !app_address(fd, &d->to, &d->tolen)) {
		free(d);
		errno = e;
		return false;
	}
	pthread_mutex_lock(&lock);
	d->fd = helper_fd(d->to.ss_family);
	pthread_mutex_unlock(&lock);
	if (d->fd < 0) {
		free(d);
		errno = e;
		return false;
	}
	d->inbound = true;
	memcpy(d->data, buf, n);
	d->len = n;
	memcpy(&d->from, from, fromlen);
	d->fromlen = fromlen;
	d->due_ns = fn_now_ns() + delay_ns;
	bool ok = fn_relay_queue(d, -1);
	errno = e;
	return ok;
}

/* The app's receive hooks call these: signals blocked (see signals.h). */
bool fn_reinject_later(int fd, const void *buf, size_t n, const struct sockaddr *from,
		       socklen_t fromlen, uint64_t delay_ns)
{
	sigset_t old;
	fn_signals_block(&old);
	bool ok = reinject_later(fd, buf, n, from, fromlen, delay_ns);
	fn_signals_restore(&old);
	return ok;
}

void fn_reinject_send(struct fn_dgram *d)
{
	struct sent *s = malloc(sizeof(*s));
	if (s) {
		s->to = d->to;
		s->from = d->from;
		s->fromlen = d->fromlen;
		s->len = d->len;
		/* Listed before it is sent, so the hook always finds it. */
		pthread_mutex_lock(&lock);
		struct sent **at = &sent_list;
		while (*at)
			at = &(*at)->next;
		s->next = NULL;
		*at = s;
		pthread_mutex_unlock(&lock);
		LIBC(sendto)
		(d->fd, d->data, d->len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&d->to,
		 d->tolen);
	}
	free(d);
}

static bool same_port(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return a->ss_family == b->ss_family && port_of(a) == port_of(b);
}

/* Lock-free: is src the shim's own sending socket? */
static bool from_helper(const struct sockaddr_storage *src, socklen_t len)
{
	if (len < sizeof(struct sockaddr_in) ||
	    (src->ss_family != AF_INET && src->ss_family != AF_INET6))
		return false;
	int f = src->ss_family == AF_INET6;
	uint16_t port = __atomic_load_n(&helper_port[f], __ATOMIC_ACQUIRE);
	return port && port_of(src) == port;
}

static bool reinject_source(int fd, struct sockaddr_storage *src, socklen_t *len, size_t n,
			    bool peek)
{
	struct sockaddr_storage me;
	socklen_t mlen = sizeof(me);
	if (getsockname(fd, (struct sockaddr *)&me, &mlen) < 0)
		return false;
	bool found = false;
	pthread_mutex_lock(&lock);
	for (struct sent **p = &sent_list; *p; p = &(*p)->next) {
		struct sent *s = *p;
		if (!same_port(&s->to, &me) || s->len != n)
			continue;
		memcpy(src, &s->from, s->fromlen);
		*len = s->fromlen;
		found = true;
		if (peek) /* the datagram stays queued: so does its sender */
			break;
		*p = s->next;
		free(s);
		break;
	}
	pthread_mutex_unlock(&lock);
	return found;
}

bool fn_reinject_source(int fd, struct sockaddr_storage *src, socklen_t *len, size_t n, bool peek)
{
	if (!from_helper(src, *len))
		return false;
	sigset_t old;
	fn_signals_block(&old);
	bool found = reinject_source(fd, src, len, n, peek);
	fn_signals_restore(&old);
	return found;
}

void fn_reinject_lost(int fd)
{
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&lock);
	for (int f = 0; f < 2; f++)
		if (helper[f] >= 0 && helper[f] == fd) {
			/* The app closed it: a new one is made when needed. */
			__atomic_store_n(&helper_port[f], 0, __ATOMIC_RELEASE);
			helper[f] = -1;
		}
	pthread_mutex_unlock(&lock);
	fn_signals_restore(&old);
}

void fn_reinject_atfork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	lock = fresh;
}
