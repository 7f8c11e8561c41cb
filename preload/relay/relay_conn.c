/* relay_conn.c - one relayed connection's life: connect to the real peer,
 * complete the app's handshake by a simultaneous open from the hold sink's
 * address once the peer answered and the delay passed, then carry bytes both
 * ways, shaped by the rule. Bytes are never reordered, duplicated or dropped
 * except where the rule says so (stall, close). */
#include "preload/relay/relay_conn.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "core/chance.h"
#include "core/clock.h"
#include "core/http.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/policy.h"
#include "preload/relay/relay_http.h"
#include "preload/relay/relay_port.h"
#include "preload/relay/relay_sched.h"

#define BUF_START (64 * 1024)

struct fn_conn *fn_conn_new(int appfd, const struct fn_rule *r, const struct sockaddr *dest,
			    socklen_t destlen, const struct sockaddr_storage *local,
			    socklen_t locallen, const struct sockaddr_storage *hold,
			    socklen_t holdlen)
{
	static uint64_t serial;
	struct fn_conn *c = calloc(1, sizeof(*c));
	if (!c || destlen > sizeof(c->dest)) {
		free(c);
		return NULL;
	}
	c->action = r->action;
	c->par = r->par;
	c->key = fn_rule_key(r) ^ __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED) << 32;
	c->app = c->up = c->opener = -1;
	c->appfd = appfd;
	fn_fd_identify(appfd, &c->app_dev, &c->app_ino);
	c->watching[0] = c->watching[1] = FN_WATCH_NONE;
	memcpy(&c->dest, dest, destlen);
	c->destlen = destlen;
	c->local = *local;
	c->locallen = locallen;
	c->hold = *hold;
	c->holdlen = holdlen;
	c->start_ns = fn_now_ns();
	c->http_mode = fn_rule_http(r);
	for (int d = 0; d < 2; d++)
		c->dir[d].faulted = r->par.direction & (d ? FN_DIR_DOWN : FN_DIR_UP);
	if ((c->follows = r->established)) {
		/* Off for now: carried as it is until the rule is enabled. */
		c->follow.on = r->enabled;
		if (r->enabled)
			strcpy(c->follow.rule, r->name);
		fn_endpoint_from_sockaddr(&c->follow.peer, dest, destlen);
		c->dir[0].faulted &= r->enabled;
		c->dir[1].faulted &= r->enabled;
	}
	return c;
}

void fn_conn_free(struct fn_conn *c)
{
	fn_http_conn_free(c);
	for (int d = 0; d < 2; d++) {
		free(c->dir[d].buf);
		free(c->dir[d].marks);
	}
	free(c);
}

/* A uniform draw in [-j, +j] milliseconds, as nanoseconds. */
static int64_t jitter(struct fn_conn *c, uint32_t j)
{
	if (!j)
		return 0;
	double u = fn_random(c->key, c->draws++) * 2 - 1;
	return (int64_t)(u * (double)j * (double)MS);
}

void fn_conn_finish(struct fn_conn *c, bool hard)
{
	fn_relay_close(c, c->opener, hard);
	fn_relay_close(c, c->app, hard);
	fn_relay_close(c, c->up, hard);
	c->opener = c->app = c->up = -1;
	c->done = true;
}

void fn_conn_forget_fd(struct fn_conn *c, int fd)
{
	int *fds[3] = {&c->app, &c->up, &c->opener};
	for (int i = 0; i < 3; i++)
		if (*fds[i] == fd) {
			/* Not ours to close any more: the app is closing it. */
			*fds[i] = -1;
		}
	fn_conn_finish(c, true);
}

/* The relay's sockets send what they are given at once: Nagle's algorithm
 * would hold a small write for up to 40 ms waiting for an ACK, a delay the
 * network never had (the app's own socket keeps whatever it chose). */
int fn_conn_socket(int family)
{
	int one = 1, fd = LIBC(socket)(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fn_fd_move_high(fd, FN_RANGE_SINK);
}

static int sock_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return errno;
	return err;
}

bool fn_conn_connect(int fd, const struct sockaddr_storage *to, socklen_t len)
{
	return LIBC(connect)(fd, (const struct sockaddr *)to, len) == 0 || errno == EINPROGRESS;
}

static bool reset_at_accept(const struct fn_conn *c)
{
	return c->action == FN_ACT_RESET && c->par.after_bytes < 0 && c->par.after_ms < 0;
}

/* A reset at accept goes out once the app's connect has completed and the
 * app has sent its first bytes (or FN_RESET_WAIT_MS later if it waits to
 * read): as with a real server that accepts and resets, the connect
 * succeeds and the reset meets the app's next read or write. Sent any
 * earlier, it would fail the connect itself. */
static bool app_done_connecting(struct fn_conn *c, uint64_t now)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int queued = 0;
	if (getsockopt(c->appfd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return true;
	if (ti.tcpi_state != TCP_ESTABLISHED)
		return ti.tcpi_state != TCP_SYN_SENT && ti.tcpi_state != TCP_SYN_RECV;
	if (!c->reset_ns)
		c->reset_ns = now;
	return (ioctl(c->app, SIOCINQ, &queued) == 0 && queued > 0) ||
	       now - c->reset_ns >= FN_RESET_WAIT_MS * MS;
}

/* A direction under a bandwidth rule reads through a small receive buffer,
 * set before the handshake so that the window it advertises is small from
 * the start: the sender's buffers then fill as behind a slow link (see
 * ahead_limit() in relay_pump.c). d is the direction the socket reads. */
/* Above FN_KERNEL_RATE a small window would only cap the link far below
 * the rate. */

static void small_window(const struct fn_conn *c, int fd, int d)
{
	int small = 4096;
	if (fd >= 0 && c->dir[d].faulted && c->par.rate && c->par.rate < FN_KERNEL_RATE)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
}

/* The app's own limits on how long its connect may take (TCP_SYNCNT,
 * TCP_USER_TIMEOUT) go to the relay's connect to the peer, so that an
 * unanswered peer times out when the app's connect would; so does its
 * keepalive (SO_KEEPALIVE and its timers), set before connect: the app's
 * own probes meet only the relay's end, which always answers, so on a dead
 * route only the relay's probes can end the connection (the app then meets
 * a reset, not ETIMEDOUT: docs/relay-limits.md). */
static void copy_connect_timeouts(const struct fn_conn *c)
{
	static const int opts[][2] = {{IPPROTO_TCP, TCP_SYNCNT},    {IPPROTO_TCP, TCP_USER_TIMEOUT},
				      {SOL_SOCKET, SO_KEEPALIVE},   {IPPROTO_TCP, TCP_KEEPIDLE},
				      {IPPROTO_TCP, TCP_KEEPINTVL}, {IPPROTO_TCP, TCP_KEEPCNT}};
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		int v = 0;
		socklen_t len = sizeof(v);
		if (getsockopt(c->appfd, opts[i][0], opts[i][1], &v, &len) == 0 && v > 0)
			setsockopt(c->up, opts[i][0], opts[i][1], &v, sizeof(v));
	}
}

/* Whether the connection needs no peer: a connect-time reset, or HTTP
 * rules that answer every request themselves (the engine then dials the
 * server only for bytes that are not HTTP, relay_http.c). */
static bool needs_no_peer(const struct fn_conn *c)
{
	if (reset_at_accept(c))
		return true;
	if (!c->http_mode)
		return false;
	struct fn_endpoint ep;
	fn_endpoint_from_sockaddr(&ep, (const struct sockaddr *)&c->dest, c->destlen);
	/* On the app's thread inside fn_fault_match's section, which has
	 * caught up with the group already: no catch-up (and its lock) here. */
	struct fn_policy_hold h;
	const struct fn_policy *p = fn_policy_enter(&h);
	bool all = p && fn_http_answers_all(p, &ep);
	fn_policy_exit(&h);
	return all;
}

/* The relay's socket to the peer, with the app's limits on its connect.
 * It holds back the last ACK of its handshake (TCP_QUICKACK off: Linux
 * then delays it, as for a socket with data about to go), so that the
 * peer's accept returns only once the app's own connect has completed
 * and fn_conn_hold_release lets it go: on a real network the client is
 * connected before the server's accept returns, and a server thread that
 * accepts and at once looks at the app's socket must not find it
 * unconnected (select reads an unconnected socket as ready). The kernel
 * holds it 200 ms at most: a delay rule longer than that lets the peer
 * accept first (docs/relay-limits.md). */
static bool upstream_socket(struct fn_conn *c)
{
	int off = 0;
	c->up = fn_conn_socket(c->dest.ss_family);
	if (c->up < 0)
		return false;
	small_window(c, c->up, 1);
	copy_connect_timeouts(c);
	setsockopt(c->up, IPPROTO_TCP, TCP_QUICKACK, &off, sizeof(off));
	return true;
}

void fn_conn_hold_release(const struct fn_conn *c)
{
	int on = 1;
	if (c->up >= 0)
		setsockopt(c->up, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof(on));
}

/* Everything but what needs_no_peer names connects to the peer here, on
 * the app's thread, before the app's own connect: a peer on loopback that
 * refuses has done so when connect returns, and the app's connect can then
 * meet the refusal itself (an HTTP connection too: the engine takes this
 * connection to the server). */
int fn_conn_dial(struct fn_conn *c)
{
	int e = errno;
	if (needs_no_peer(c))
		return 0;
	if (!upstream_socket(c)) {
		/* No fd of the shim's (EMFILE): met at once, so that the
		 * connection goes on unfaulted (fn_fault_target). */
		c->up_error = errno;
		errno = e;
		return c->up_error;
	}
	/* From the app's own port (relay_port.c): the one it bound, or the
	 * one the kernel picks now, which the app's socket then takes. */
	enum fn_port port = fn_port_bind_up(c->appfd, c->up);
	bool ok = fn_conn_connect(c->up, &c->dest, c->destlen);
	if (!ok && port == FN_PORT_UP_BOUND && errno == EADDRNOTAVAIL) {
		/* That port's 4-tuple to the peer is taken: another port. */
		fn_relay_close(c, c->up, true);
		if (!upstream_socket(c)) {
			c->up_error = errno;
			errno = e;
			return c->up_error;
		}
		ok = fn_conn_connect(c->up, &c->dest, c->destlen);
	}
	c->up_error = ok ? sock_error(c->up) : errno;
	if (!c->up_error && port == FN_PORT_APP_FREE)
		fn_port_give_app(c->appfd, c->up);
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	c->up_open = !c->up_error && LIBC(getpeername)(c->up, (struct sockaddr *)&peer, &plen) == 0;
	errno = e;
	return c->up_error;
}

/* On the relay thread: waits for the peer dialled by fn_conn_dial. */
static void start_upstream(struct fn_conn *c)
{
	c->open_ns = c->start_ns;
	if (c->action == FN_ACT_DELAY)
		c->open_ns += c->par.delay_ms * MS + (uint64_t)jitter(c, c->par.jitter_ms);
	if (c->up < 0 || c->up_error) {
		c->state = FN_CONN_WAIT;
		return;
	}
	c->state = FN_CONN_UPSTREAM;
	fn_relay_watch(c, 1, EPOLLOUT);
}

static uint16_t *port_of(struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? &((struct sockaddr_in *)ss)->sin_port
					: &((struct sockaddr_in6 *)ss)->sin6_port;
}

/* The port the app's connect sends its SYN from, read once it waits in
 * SYN_SENT: a socket bound without a port (IP_BIND_ADDRESS_NO_PORT) has
 * one only now, and one whose earlier connect failed (a refusal) gave its
 * port back then, so that this connect picked another. */
static bool learn_port(struct fn_conn *c)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	if (getsockname(c->appfd, (struct sockaddr *)&me, &len) < 0 || !*port_of(&me))
		return false;
	*port_of(&c->local) = *port_of(&me);
	return true;
}

/* The app's connect is called just after the connection is handed over, so
 * its SYN may not be out yet: an opener's SYN reaching a socket that is not
 * connecting would be answered with a reset. 1 once it waits in SYN_SENT,
 * 0 if not yet, -1 if the app's fd is gone (closed or reused). */
static int app_connecting(struct fn_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (!fn_fd_same_file(c->appfd, c->app_dev, c->app_ino) ||
	    getsockopt(c->appfd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	if (ti.tcpi_state == TCP_SYN_SENT)
		return learn_port(c) ? 1 : -1;
	return ti.tcpi_state == TCP_CLOSE ? 0 : -1;
}

bool fn_conn_app_unread(const struct fn_conn *c, int *unread)
{
	return fn_fd_same_file(c->appfd, c->app_dev, c->app_ino) &&
	       ioctl(c->appfd, SIOCINQ, unread) == 0;
}

/* The app's socket sits in SYN_SENT towards the hold sink, whose listener
 * drops its SYNs. A socket bound to the sink's own address that connects to
 * the app's address makes the two complete a simultaneous open: the app's
 * socket becomes connected, with the kernel's own readiness. */
static void start_open(struct fn_conn *c)
{
	int one = 1;
	int fd = fn_conn_socket(c->hold.ss_family);
	small_window(c, fd, 0);
	c->opener = fd;
	c->state = FN_CONN_OPENING;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&c->hold, c->holdlen) < 0 ||
	    !fn_conn_connect(fd, &c->local, c->locallen)) {
		fn_conn_finish(c, true);
		return;
	}
	c->app = fd;
	c->opener = -1;
	fn_relay_watch(c, 0, EPOLLOUT);
}

static void established(struct fn_conn *c, uint64_t now)
{
	c->est_ns = now;
	c->state = FN_CONN_RELAY;
	fn_conn_hold_release(c);
	if (reset_at_accept(c) || c->up_error) {
		/* The peer refused or the rule resets: the app's connection
		 * is reset right after its handshake. */
		fn_conn_finish(c, true);
		return;
	}
	for (int d = 0; d < 2; d++) {
		c->dir[d].buf = malloc(BUF_START);
		c->dir[d].cap = BUF_START;
		fn_pace_start(&c->dir[d].pace, &c->par, now);
		if (c->par.latency_ms)
			c->dir[d].marks = calloc(FN_MARKS, sizeof(struct fn_mark));
		if (!c->dir[d].buf || (c->par.latency_ms && !c->dir[d].marks)) {
			fn_conn_finish(c, true);
			return;
		}
	}
	if (c->http_mode && !fn_http_conn_init(c)) {
		fn_conn_finish(c, true);
		return;
	}
	fn_sched_ready(c);
}

static void setup_step(struct fn_conn *c, uint64_t now)
{
	if (c->state == FN_CONN_NEW)
		start_upstream(c);
	if (c->state == FN_CONN_UPSTREAM) {
		int err = sock_error(c->up);
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		bool connected = LIBC(getpeername)(c->up, (struct sockaddr *)&peer, &plen) == 0;
		if (!connected && !err)
			return; /* still connecting */
		c->up_error = connected ? 0 : err;
		c->state = FN_CONN_WAIT;
		fn_relay_watch(c, 1, 0);
	}
	if (c->state == FN_CONN_WAIT) {
		if (now < c->open_ns) {
			c->wake_ns = c->open_ns;
			return;
		}
		int ready = app_connecting(c);
		if (c->up_error == ETIMEDOUT) {
			/* The peer never answered, and neither does the hold
			 * sink: the app's own SYN retries end its connect with
			 * ETIMEDOUT, as against the peer. */
			if (ready > 0)
				c->wake_ns = now + MS * 250;
			else
				fn_conn_finish(c, true);
			return;
		}
		if (ready <= 0) {
			if (ready < 0 || now - c->start_ns > 60 * 1000 * MS)
				fn_conn_finish(c, true);
			else
				c->wake_ns = now + MS / 4;
			return;
		}
		start_open(c);
		if (c->done)
			return;
	}
	if (c->state == FN_CONN_OPENING) {
		int err = sock_error(c->app);
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		if (err) {
			fn_conn_finish(c, true); /* the app gave up before its handshake */
			return;
		}
		if (LIBC(getpeername)(c->app, (struct sockaddr *)&peer, &plen) < 0)
			return;
		if (reset_at_accept(c) && !app_done_connecting(c, now) &&
		    now - c->start_ns < 2000 * MS) {
			c->wake_ns = now + MS / 10;
			return;
		}
		established(c, now);
	}
}

void fn_conn_step(struct fn_conn *c, uint64_t now)
{
	c->ready = false;
	c->wake_ns = UINT64_MAX;
	if (c->state != FN_CONN_RELAY)
		setup_step(c, now);
	if (c->state == FN_CONN_RELAY && !c->done) {
		if (c->http)
			fn_http_pump(c, now);
		else
			fn_conn_pump(c, now);
	}
}
