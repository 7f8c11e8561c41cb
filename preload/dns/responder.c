/* responder.c - the shim's nameserver (see responder.h). One UDP socket and
 * one TCP listener on the same loopback port per nameserver the process
 * queried, served by the thread "faultnet-dns" (started at the first
 * query, so a process that never sends one has no thread). Each query is
 * decided by the dns rules of the policy in force when it arrives: an
 * rcode (NXDOMAIN, SERVFAIL, REFUSED), NOERROR with no records (nodata) or
 * with the rule's addresses, no answer at all (timeout), or the real
 * nameserver's answer (forwarded over UDP), late by delay_ms. */
#include "preload/dns/responder.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/dns.h"
#include "core/dnswire.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/base/signals.h"
#include "preload/dns/responder_io.h"
#include "preload/fd/fdtab.h"
#include "preload/stats/stats.h"

struct fn_dns_server fn_dns_servers[FN_DNS_SERVERS];
int fn_dns_nservers; /* entries below it are complete; release-stored */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct fn_ownfd wake_r = {-1, 0, 0}, wake_w = {-1, 0, 0};
static bool running;

static int own_socket(bool v6, int type)
{
	int fd = LIBC(socket)(v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* A burst of queries (hundreds at once, as a nameserver may meet)
	 * must not overflow the default buffer of some 256 datagrams; the
	 * kernel caps the size at net.core.rmem_max. */
	int big = 1 << 21;
	if (fd >= 0 && type == SOCK_DGRAM)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return fd < 0 ? -1 : fn_fd_move_high(fd, FN_RANGE_SINK);
}

/* A UDP socket and a TCP listener on one loopback port, bound without
 * SO_REUSEADDR: no other user can bind the port while they live. */
static bool open_pair(struct fn_dns_server *s)
{
	bool v6 = !s->real.v4;
	for (int tries = 0; tries < 16; tries++) {
		struct sockaddr_storage ss;
		socklen_t len;
		fn_sockaddr_loopback(v6 ? AF_INET6 : AF_INET, 0, &ss, &len);
		int u = own_socket(v6, SOCK_DGRAM), t = own_socket(v6, SOCK_STREAM);
		if (u >= 0 && t >= 0 && bind(u, (struct sockaddr *)&ss, len) == 0 &&
		    getsockname(u, (struct sockaddr *)&ss, &len) == 0 &&
		    bind(t, (struct sockaddr *)&ss, len) == 0 && listen(t, 64) == 0) {
			fn_ownfd_set(&s->udp, u);
			fn_ownfd_set(&s->tcp, t);
			s->at = ss;
			s->atlen = len;
			return true;
		}
		int e = errno;
		if (u >= 0)
			LIBC(close)(u);
		if (t >= 0)
			LIBC(close)(t);
		errno = e;
		if (e != EADDRINUSE) /* the TCP port was taken: try another */
			return false;
		continue;
	}
	return false;
}

static void *serve(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "faultnet-dns");
	fn_dns_serve(&wake_r);
	return NULL;
}

/* Lock held. */
static bool start(void)
{
	if (running)
		return true;
	if (!fn_ownfd_ok(&wake_r) || !fn_ownfd_ok(&wake_w)) {
		int w[2];
		if (pipe2(w, O_CLOEXEC | O_NONBLOCK) < 0)
			return false;
		int r = fn_fd_move_high(w[0], FN_RANGE_SINK),
		    wr = fn_fd_move_high(w[1], FN_RANGE_SINK);
		if (r < 0 || wr < 0) { /* no number of the shim's free */
			int ends[2] = {r, wr};
			for (int i = 0; i < 2; i++)
				if (ends[i] >= 0) {
					fn_fd_set(ends[i], 0);
					LIBC(close)(ends[i]);
				}
			return false;
		}
		fn_ownfd_set(&wake_r, r);
		fn_ownfd_set(&wake_w, wr);
	}
	fn_dns_responder_io_release(); /* a fork child's, if any */
	int e = fn_thread_start(serve, NULL);
	if (e)
		errno = e;
	return (running = e == 0);
}

/* The server for ep, made if need be. Lock held. */
static struct fn_dns_server *server_for(const struct fn_endpoint *ep)
{
	int n = fn_dns_nservers;
	for (int i = 0; i < n; i++)
		if (!__atomic_load_n(&fn_dns_servers[i].dead, __ATOMIC_ACQUIRE) &&
		    fn_dns_servers[i].real.v4 == ep->v4 &&
		    fn_dns_servers[i].real.port == ep->port &&
		    memcmp(fn_dns_servers[i].real.ip, ep->ip, 16) == 0)
			return &fn_dns_servers[i];
	if (n == FN_DNS_SERVERS) {
		errno = ENOBUFS;
		return NULL;
	}
	struct fn_dns_server *s = &fn_dns_servers[n];
	memset(s, 0, sizeof(*s));
	s->real = *ep;
	s->up.fd = -1;
	if (!open_pair(s))
		return NULL;
	__atomic_store_n(&fn_dns_nservers, n + 1, __ATOMIC_RELEASE);
	char byte = 1;
	if (fn_ownfd_ok(&wake_w) && write(wake_w.fd, &byte, 1) < 0) /* full: it wakes anyway */
		errno = 0;
	return s;
}

bool fn_dns_responder_addr(const struct sockaddr *sa, socklen_t len,
			   struct sockaddr_storage *target, socklen_t *tlen)
{
	struct fn_endpoint ep;
	if (!fn_endpoint_from_sockaddr(&ep, sa, len)) {
		errno = EINVAL;
		return false;
	}
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&lock);
	struct fn_dns_server *s = start() ? server_for(&ep) : NULL;
	pthread_mutex_unlock(&lock);
	fn_signals_restore(&old);
	if (!s)
		return false;
	memcpy(target, &s->at, s->atlen);
	*tlen = s->atlen;
	if (sa->sa_family == AF_INET6 && ep.v4) /* ::ffff:127.0.0.1 */
		fn_sockaddr_map_v4(target, tlen);
	return true;
}

bool fn_dns_responder_active(void)
{
	return __atomic_load_n(&fn_dns_nservers, __ATOMIC_ACQUIRE) > 0;
}

bool fn_dns_responder_source(struct sockaddr_storage *ss, socklen_t *len)
{
	struct fn_endpoint from;
	int n = __atomic_load_n(&fn_dns_nservers, __ATOMIC_ACQUIRE);
	if (!n || !fn_endpoint_from_sockaddr(&from, (struct sockaddr *)ss, *len))
		return false;
	for (int i = 0; i < n; i++) {
		const struct fn_dns_server *s = &fn_dns_servers[i];
		struct fn_endpoint at;
		fn_endpoint_from_sockaddr(&at, (const struct sockaddr *)&s->at, s->atlen);
		if (at.port != from.port || at.v4 != from.v4 || memcmp(at.ip, from.ip, 16))
			continue;
		fn_endpoint_to_sockaddr(&s->real, ss->ss_family == AF_INET6, ss, len);
		return true;
	}
	return false;
}

void fn_dns_responder_lost(int fd)
{
	int n = __atomic_load_n(&fn_dns_nservers, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct fn_dns_server *s = &fn_dns_servers[i];
		if (s->udp.fd == fd || s->tcp.fd == fd)
			__atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
	}
}

void fn_dns_responder_atfork_child(void)
{
	/* The parent's thread serves the parent's sockets; the child lets go
	 * of them (they stay open in the parent). */
	for (int i = 0; i < fn_dns_nservers; i++) {
		fn_ownfd_close(&fn_dns_servers[i].udp);
		fn_ownfd_close(&fn_dns_servers[i].tcp);
		fn_ownfd_close(&fn_dns_servers[i].up);
	}
	fn_ownfd_close(&wake_r);
	fn_ownfd_close(&wake_w);
	fn_dns_responder_io_forget();
	fn_dns_nservers = 0;
	running = false;
	pthread_mutex_init(&lock, NULL);
}
