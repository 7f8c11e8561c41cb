/* relay_pump.c - carries an established relayed connection's bytes in both
 * directions and applies the rule to the faulted ones: latency (release
 * points), bandwidth (a token bucket), drip (a few bytes per tick), and
 * stall, reset or close once after_bytes or after_ms is reached. */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "chance.h"
#include "libc.h"
#include "relay_conn.h"

/* A direction's buffer starts small and doubles up to BUF_MAX while bulk
 * transfers keep it full: fewer system calls for them, little memory for
 * the many connections that carry a request and a reply. */
#define BUF_MAX (1024 * 1024)
#define MARKS 4096
#define MS 1000000ull
#define NS 1000000000.0

static int src_fd(const struct fn_conn *c, int d)
{
	return d ? c->up : c->app;
}

static int dst_fd(const struct fn_conn *c, int d)
{
	return d ? c->app : c->up;
}

static void earliest(struct fn_conn *c, uint64_t t)
{
	if (t < c->wake_ns)
		c->wake_ns = t;
}

/* Latency: each read gets a release time, never earlier than the one
 * before, so that jitter cannot reorder bytes. */
static void add_mark(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	int64_t j = 0;
	if (c->par.jitter_ms) {
		double u = fn_random(c->key, c->draws++) * 2 - 1;
		j = (int64_t)(u * (double)c->par.jitter_ms * (double)MS);
	}
	int64_t due = (int64_t)now + (int64_t)c->par.latency_ms * (int64_t)MS + j;
	uint64_t udue = due < (int64_t)now ? now : (uint64_t)due;
	if (udue < dr->last_due)
		udue = dr->last_due;
	dr->last_due = udue;
	struct fn_mark *m = &dr->marks[(dr->mhead + dr->mcount++) % MARKS];
	m->end = dr->in;
	m->due = udue;
}

/* Latency and bandwidth combine (a slow link has both); each applies when
 * its number is set. */
static bool has_latency(const struct fn_conn *c, const struct fn_dir *dr)
{
	return dr->faulted && c->par.latency_ms;
}

static void grow(struct fn_dir *dr)
{
	if (dr->hi < dr->cap || dr->lo > 0 || dr->cap >= BUF_MAX)
		return;
	char *bigger = realloc(dr->buf, dr->cap * 2);
	if (bigger) {
		dr->buf = bigger;
		dr->cap *= 2;
	}
}

/* Reads what the buffer has room for. False on a fatal error. */
static bool fill(struct fn_conn *c, int d, uint64_t now)
{
	struct fn_dir *dr = &c->dir[d];
	if (dr->eof || dr->stopped)
		return true;
	if (dr->lo == dr->hi)
		dr->lo = dr->hi = 0;
	else if (dr->hi == dr->cap && dr->lo > 0) {
		memmove(dr->buf, dr->buf + dr->lo, dr->hi - dr->lo);
		dr->hi -= dr->lo;
		dr->lo = 0;
	}
	bool latency = has_latency(c, dr);
	grow(dr);
	while (dr->hi < dr->cap && !(latency && dr->mcount == MARKS)) {
		ssize_t n =
		    LIBC(recv)(src_fd(c, d), dr->buf + dr->hi, dr->cap - dr->hi, MSG_DONTWAIT);
		if (n == 0) {
			dr->eof = true;
			return true;
		}
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		dr->hi += (size_t)n;
		dr->in += (uint64_t)n;
		if (latency)
			add_mark(c, dr, now);
	}
	return true;
}

/* How many of the waiting bytes may go out now under latency. */
static uint64_t released(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	while (dr->mcount) {
		struct fn_mark *m = &dr->marks[dr->mhead];
		if (m->due > now) {
			earliest(c, m->due);
			break;
		}
		dr->released = m->end;
		dr->mhead = (dr->mhead + 1) % MARKS;
		dr->mcount--;
	}
	return dr->released > dr->out ? dr->released - dr->out : 0;
}

/* Bandwidth: tokens at rate bytes/s, at most 50 ms' worth saved up. */
static uint64_t tokens(struct fn_conn *c, struct fn_dir *dr, uint64_t now, uint64_t want)
{
	double rate = (double)c->par.rate, cap = rate / 20 < 1460 ? 1460 : rate / 20;
	dr->tokens += (double)(now - dr->tok_ns) * rate / NS;
	dr->tok_ns = now;
	if (dr->tokens > cap)
		dr->tokens = cap;
	if (dr->tokens >= 1)
		return (uint64_t)dr->tokens;
	uint64_t need = want < (uint64_t)cap ? want : (uint64_t)cap;
	earliest(c, now + (uint64_t)(((double)need - dr->tokens) * NS / rate) + 1);
	return 0;
}

/* Drip: bytes every every_ms, never saved up. */
static uint64_t drip(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	if (!dr->drip_left && now >= dr->drip_ns) {
		dr->drip_left = c->par.bytes;
		dr->drip_ns = now + c->par.every_ms * MS;
	}
	if (!dr->drip_left)
		earliest(c, dr->drip_ns);
	return dr->drip_left;
}

static bool after_rule(const struct fn_conn *c)
{
	return c->action == FN_ACT_STALL || c->action == FN_ACT_RESET ||
	       c->action == FN_ACT_CLOSE || c->action == FN_ACT_BLACKHOLE;
}

/* How many bytes the rule lets out now. */
static uint64_t allowance(struct fn_conn *c, struct fn_dir *dr, uint64_t now)
{
	uint64_t n = dr->hi - dr->lo;
	if (!dr->faulted || !n)
		return n;
	uint64_t lim = n;
	if (c->par.latency_ms)
		lim = released(c, dr, now);
	if (c->par.rate && lim) {
		uint64_t t = tokens(c, dr, now, lim);
		lim = t < lim ? t : lim;
	}
	if (c->action == FN_ACT_DRIP && lim) {
		uint64_t d = drip(c, dr, now);
		lim = d < lim ? d : lim;
	}
	if (after_rule(c) && c->par.after_bytes >= 0) {
		uint64_t left = (uint64_t)c->par.after_bytes - dr->out;
		lim = lim < left ? lim : left;
	}
	return lim < n ? lim : n;
}

static void spent(struct fn_conn *c, struct fn_dir *dr, uint64_t n)
{
	if (!dr->faulted)
		return;
	if (c->par.rate)
		dr->tokens -= (double)n;
	if (c->action == FN_ACT_DRIP)
		dr->drip_left -= n;
}

/* Writes what may go out. False on a fatal error. */
static bool flush(struct fn_conn *c, int d, uint64_t now)
{
	struct fn_dir *dr = &c->dir[d];
	dr->blocked = false;
	while (!dr->stopped && dr->lo < dr->hi) {
		uint64_t n = allowance(c, dr, now);
		if (!n)
			break;
		ssize_t w = LIBC(sendto)(dst_fd(c, d), dr->buf + dr->lo, n,
					 MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				dr->blocked = true;
				break;
			}
			return false;
		}
		dr->lo += (size_t)w;
		dr->out += (uint64_t)w;
		spent(c, dr, (uint64_t)w);
	}
	return true;
}

/* A blackhole on an open connection: nothing more either way, no FIN, no
 * reset. On a dead route what the app sends next goes unacknowledged, and
 * TCP_USER_TIMEOUT, if set, ends the connection with ETIMEDOUT. On loopback
 * the relay's end would keep acknowledging, so it stops reading, shrinks its
 * receive buffer, and fills the window it had advertised with bytes of its
 * own sent from the app's socket (they go nowhere but to the relay, which
 * drops them): the window closes, the app's next bytes wait behind it, and
 * the kernel's zero-window probes, which TCP_USER_TIMEOUT also bounds, end
 * the connection with ETIMEDOUT. */
static void go_dark(struct fn_conn *c)
{
	static const char filler[65536];
	int small = 1; /* the kernel rounds it up to its minimum */
	setsockopt(c->app, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	c->dir[0].stopped = c->dir[1].stopped = true;
	int queued = 0;
	for (int i = 0; i < 256 && fn_conn_app_unread(c, &queued); i++) {
		/* On loopback a send is delivered and acknowledged before it
		 * returns; bytes left queued mean the window has closed. */
		if (ioctl(c->appfd, SIOCOUTQ, &queued) < 0 || queued > 0)
			break;
		if (LIBC(sendto)(c->appfd, filler, sizeof(filler), MSG_DONTWAIT | MSG_NOSIGNAL,
				 NULL, 0) <= 0)
			break;
	}
}

/* stall, reset, close or blackhole, once after_bytes or after_ms is
 * reached. */
static void trigger(struct fn_conn *c, int d, uint64_t now)
{
	struct fn_dir *dr = &c->dir[d];
	if (!dr->faulted || !after_rule(c) || dr->stopped || c->reset_pending)
		return;
	bool due;
	if (c->par.after_bytes >= 0)
		due = dr->out >= (uint64_t)c->par.after_bytes;
	else {
		uint64_t at = c->est_ns + (uint64_t)c->par.after_ms * MS;
		due = now >= at;
		if (!due)
			earliest(c, at);
	}
	if (!due)
		return;
	if (c->action == FN_ACT_RESET) {
		c->reset_pending = true;
		return;
	}
	if (c->action == FN_ACT_BLACKHOLE)
		return go_dark(c);
	dr->stopped = true;
	if (c->action == FN_ACT_CLOSE && !dr->shut) {
		shutdown(dst_fd(c, d), SHUT_WR);
		dr->shut = true;
	}
}

/* A reset goes out once the app holds every byte sent before it, so that a
 * reset after N bytes really delivers N, and once it has read them (for at
 * most 200 ms): on a real link the reset comes after the data, and a client
 * that sees both in one wake-up may take the hang-up for a plain EOF. */
static void reset_when_sent(struct fn_conn *c, uint64_t now)
{
	int queued = 0, unread = 0;
	if (!c->reset_ns)
		c->reset_ns = now;
	bool sent = ioctl(c->app, SIOCOUTQ, &queued) < 0 || queued == 0;
	bool read = !fn_conn_app_unread(c, &unread) || unread == 0;
	if (!sent || (!read && now - c->reset_ns < 200 * MS)) {
		earliest(c, now + MS);
		return;
	}
	fn_conn_finish(c, true);
}

/* A stopped direction reads nothing, yet must notice when its source
 * closes, or a stalled connection the app gave up on would never end. */
static void notice_close(struct fn_conn *c, int d)
{
	struct fn_dir *dr = &c->dir[d];
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (!dr->stopped || dr->eof)
		return;
	if (getsockopt(src_fd(c, d), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    (ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE ||
	     ti.tcpi_state == TCP_LAST_ACK))
		dr->eof = true;
}

/* Done with: the source has ended, and the destination was told, or the
 * rule stopped this direction anyway. */
static bool finished(const struct fn_dir *dr)
{
	return dr->eof && (dr->shut || dr->stopped);
}

static void watch(struct fn_conn *c)
{
	uint32_t ev[2] = {0, 0};
	for (int d = 0; d < 2; d++) {
		const struct fn_dir *dr = &c->dir[d];
		int src = d, dst = !d; /* socket index: 0 app, 1 peer */
		/* fill() makes room by moving what waits to the front. */
		bool room = (dr->hi - dr->lo < dr->cap || dr->cap < BUF_MAX) &&
			    !(has_latency(c, dr) && dr->mcount == MARKS);
		if (!dr->eof && !dr->stopped && room)
			ev[src] |= EPOLLIN | EPOLLRDHUP;
		if (dr->stopped && !dr->eof)
			ev[src] |= EPOLLRDHUP;
		if (dr->blocked)
			ev[dst] |= EPOLLOUT;
	}
	fn_relay_watch(c, 0, ev[0]);
	fn_relay_watch(c, 1, ev[1]);
}

void fn_conn_pump(struct fn_conn *c, uint64_t now)
{
	for (int d = 0; d < 2; d++) {
		struct fn_dir *dr = &c->dir[d];
		notice_close(c, d);
		/* Read and write in turn while bytes move: a bulk transfer
		 * goes through without a trip through epoll for each buffer. */
		uint64_t moved;
		int rounds = 0;
		do {
			moved = dr->in + dr->out;
			if (!fill(c, d, now) || !flush(c, d, now)) {
				fn_conn_finish(c, true); /* pass a reset on as a reset */
				return;
			}
		} while (dr->in + dr->out != moved && !dr->blocked && ++rounds < 16);
		trigger(c, d, now);
		if (dr->eof && dr->lo == dr->hi && !dr->shut) {
			shutdown(dst_fd(c, d), SHUT_WR);
			dr->shut = true;
		}
	}
	if (c->reset_pending)
		return reset_when_sent(c, now);
	bool a = finished(&c->dir[0]), b = finished(&c->dir[1]);
	if ((a || b) && (a || c->dir[0].stopped) && (b || c->dir[1].stopped)) {
		fn_conn_finish(c, false);
		return;
	}
	watch(c);
}
