/* connect.c - TCP and UDP connect under the policy, and getpeername for
 * redirected sockets. The app's own socket is connected to a sink, so the
 * kernel produces every errno, readiness change and timeout itself. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "preload/base/policy.h"
#include "preload/dns/names.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/intercept/fault.h"
#include "preload/intercept/intercept.h"
#include "preload/relay/relay.h"
#include "preload/stats/stats.h"

static void forget(int fd)
{
	fn_fd_set(fd, fn_fd_get(fd) & ~(unsigned)FDF_FAULT);
}

/* A TCP socket whose earlier attempt failed (state CLOSE) may connect again
 * and then gets a fresh decision; one still connecting or connected keeps
 * its sink, and the kernel answers EALREADY or EISCONN as it should. */
static bool tcp_attempt_over(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int e = errno;
	bool over =
	    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE;
	errno = e;
	return over;
}

static int connect_again(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct fn_fdstate *st = fn_fdstate(fd, false);
	int e = errno;
	bool keep = st && fn_fdstate_current(fd, st) && st->proto == FN_PROTO_TCP && sa &&
		    sa->sa_family != AF_UNSPEC && !tcp_attempt_over(fd);
	errno = e;
	if (keep)
		return LIBC(connect)(fd, (const struct sockaddr *)&st->target, st->targetlen);
	forget(fd);
	return fn_connect(fd, sa, len);
}

/* A connect some rule covers but none faults: counted, then passed on.
 * Counted first: the section on the policy the verdict points into ends
 * before the connect, which may block. */
static int counted_connect(int fd, const struct sockaddr *sa, socklen_t len,
			   const struct fn_verdict *v)
{
	fn_stats_attempt(fd, NULL, v->seen, &v->ep, v->proto, "passed", 0);
	fn_fault_done(v);
	return LIBC(connect)(fd, sa, len);
}

int fn_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (__builtin_expect(fn_fd_get(fd) & FDF_FAULT, 0))
		return connect_again(fd, sa, len);
	struct fn_verdict v;
	if (fn_policy_summary_fresh() & (FN_PS_DNS | FN_PS_HOST))
		fn_names_connect(sa, len); /* "connects" per name, for stats */
	if (!fn_fault_match(fd, sa, len, &v))
		return LIBC(connect)(fd, sa, len);
	if (!v.rule)
		return counted_connect(fd, sa, len, &v);
	struct sockaddr_storage target;
	socklen_t tlen;
	bool ok = fn_fault_target(fd, sa, len, &v, 0, true, &target, &tlen);
	fn_fault_done(&v);
	if (!ok)
		return -1;
	/* A UDP delay rule delays each datagram, not the connect: the socket
	 * connects to the real peer (tlen is 0: no sink). */
	if (!tlen)
		return LIBC(connect)(fd, sa, len);
	int rc = LIBC(connect)(fd, (const struct sockaddr *)&target, tlen);
	fn_relay_connected(fd, rc, rc < 0 ? errno : 0);
	return rc;
}

static int faulted_peername(int fd, struct sockaddr *sa, socklen_t *len)
{
	struct fn_fdstate *st = fn_fdstate(fd, false);
	int e = errno;
	if (!st || !fn_fdstate_current(fd, st)) {
		forget(fd);
		errno = e;
		return LIBC(getpeername)(fd, sa, len);
	}
	/* The kernel still decides whether there is a peer yet (ENOTCONN while
	 * the handshake is pending); only the address is the app's. */
	struct sockaddr_storage real;
	socklen_t rlen = sizeof(real);
	if (LIBC(getpeername)(fd, (struct sockaddr *)&real, &rlen) < 0)
		return -1;
	if (!sa || !len) {
		errno = EFAULT;
		return -1;
	}
	memcpy(sa, &st->peer, *len < st->peerlen ? *len : st->peerlen);
	*len = st->peerlen;
	errno = e;
	return 0;
}

int fn_getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
	if (__builtin_expect(!(fn_fd_get(fd) & FDF_FAULT), 1))
		return LIBC(getpeername)(fd, sa, len);
	return faulted_peername(fd, sa, len);
}
