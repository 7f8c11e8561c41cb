/* relay_pump.c - carries an established relayed connection's bytes in both
 * directions and applies the rule to the faulted ones: latency (release
 * points), bandwidth (a token bucket), drip (a few bytes per tick), and
 * stall, reset or close once after_bytes or after_ms is reached. */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/startdata.h"
#include "core/clock.h"
#include "preload/base/libc.h"
#include "preload/relay/relay_conn.h"
#include "preload/relay/relay_shard.h"
#include "preload/relay/shape.h"
#include "preload/relay/splice.h"

/* A direction's buffer starts small and doubles up to BUF_MAX while bulk
 * transfers keep it full: fewer system calls for them, little memory for
 * the many connections that carry a request and a reply. */
#define BUF_MAX (1024 * 1024)
#define SMALL_READ (16 * 1024) /* see fill() */

static int src_fd(const struct fn_conn *c, int d)
{
	return d ? c->up : c->app;
}

static int dst_fd(const struct fn_conn *c, int d)
{
	return d ? c->app : c->up;
}

/* Bandwidth gives backpressure as a slow link does: the relay holds no
 * more than a tenth of a second's worth ahead of the rate (at least 4 KiB,
 * at most its first buffer below FN_KERNEL_RATE), and its socket's receive buffer is small (see
 * relay_conn.c), so the app's own send buffer fills and its writes block
 * or time out. Without a rate, a direction takes what its buffer holds. */
static size_t ahead_limit(const struct fn_conn *c, const struct fn_dir *dr)
{
	if (!dr->faulted || !c->par.rate)
		return SIZE_MAX;
	uint64_t tenth = c->par.rate / 10;
	return tenth < 4096 ? 4096 : tenth > dr->cap ? dr->cap : (size_t)tenth;
}

static void grow(const struct fn_conn *c, struct fn_dir *dr)
{
	/* A rate the kernel's buffers cannot shape (see small_window() in
	 * relay_conn.c) is carried like no rate: the buffer grows. */
	bool shaped = ahead_limit(c, dr) != SIZE_MAX && c->par.rate < FN_KERNEL_RATE;
	/* Reads that fill it, not a buffer still full now: where each write
	 * takes all that was read, it never is at the next read, and the
	 * buffer stayed at 128 KiB (six times the reads and writes of a
	 * copy relay with 1 MiB for a bulk transfer). */
	if (!dr->filled || dr->cap >= BUF_MAX || shaped)
		return;
	dr->filled = false;
	char *bigger = realloc(dr->buf, dr->cap * 2);
	if (bigger) {
		dr->buf = bigger;
		dr->cap *= 2;
	}
}

/* Takes go_dark's filler out of the n bytes just read at buf + hi. */
static size_t skip_filler(struct fn_dir *dr, size_t n)
{
	uint64_t a = dr->raw_in, b = a + n, s = dr->skip_from, e = s + dr->skip_len;
	dr->raw_in = b;
	if (!dr->skip_len || e <= a || s >= b)
		return n;
	uint64_t cs = s > a ? s : a, ce = e < b ? e : b;
	char *at = dr->buf + dr->hi;
	memmove(at + (cs - a), at + (ce - a), b - ce);
	return n - (size_t)(ce - cs);
}

/* Whether to read again right after a read that found bytes, before epoll
 * says more came. In a bulk transfer the sender is still writing and the
 * read gathers more for each write; in a request and its answer (64 KiB
 * ones included) it only fails with EAGAIN: one system call for nothing in
 * each direction of each round trip. Once such reads failed twice in a
 * row, the direction leaves it to the level-triggered epoll, which reports
 * whatever comes, and tries again one chance in 16 to notice a change. */
static bool read_on(struct fn_dir *dr)
{
	return dr->misses < 2 || (++dr->skips & 15) == 0;
}

/* Whether the next read may take the source's bytes into the relay's pipe
 * (splice.h) rather than into the buffer: nothing waits in the buffer
 * (the bytes would overtake it), no latency stamps them, no drip or rate
 * under FN_KERNEL_RATE holds them back (they would be copied out of the
 * pipe at once), and none of go_dark's filler is still to be thrown away.
 * A bulk transfer, whose buffer has grown to its largest, is copied: here
 * a copy with 1 MiB reads carried 1 GiB faster than splices did, while a
 * spliced 64 KiB request and answer went faster than copied ones. */
static bool pipe_ok(const struct fn_conn *c, const struct fn_dir *dr)
{
	bool held = dr->faulted && (c->action == FN_ACT_DRIP || fn_shape_has_latency(c, dr) ||
				    (c->par.rate && c->par.rate < FN_KERNEL_RATE));
	bool skipping = dr->skip_len && dr->raw_in < dr->skip_from + dr->skip_len;
	return dr->lo == dr->hi && dr->cap < BUF_MAX && !held && !skipping && !dr->urg_hole;
}

/* One read: into the pipe when pipe_ok() (then dr->piped, and the caller
 * reads no more before flush() has emptied it), else into the buffer. */
static ssize_t take(struct fn_conn *c, int d, size_t *room)
{
	struct fn_dir *dr = &c->dir[d];
	size_t pipe_room = pipe_ok(c, dr) ? fn_splice_room(&c->shard->pipe) : 0;
	if (pipe_room) {
		if (*room > pipe_room)
			*room = pipe_room;
		ssize_t n = fn_splice_in(&c->shard->pipe, src_fd(c, d), *room);
		if (n >= 0 || !fn_splice_refused(errno)) {
			dr->piped = n > 0;
			return n;
		}
	}
	ssize_t n = LIBC(recv)(src_fd(c, d), dr->buf + dr->hi, *room, MSG_DONTWAIT);
	if (n > 0)
		dr->urg_hole = false;
	return n;
}

/* The source's next byte is its urgent mark. */
static bool at_mark(int fd)
{
	int at = 0;
	return ioctl(fd, SIOCATMARK, &at) == 0 && at;
}

/* Urgent data (MSG_OOB) crosses as urgent data: once every byte before
 * its mark has gone out, the byte is taken from the source with MSG_OOB
 * and sent with MSG_OOB, which sets the destination's mark at it. Until
 * then fill() reads nothing past the mark (a read there would step over
 * the byte and lose it). False on a fatal error. */
static bool pass_urgent(struct fn_conn *c, int d)
{
	struct fn_dir *dr = &c->dir[d];
	if (!dr->urgent || dr->lo < dr->hi || dr->piped)
		return true;
	if (!dr->urg_held) {
		if (!at_mark(src_fd(c, d)))
			return true; /* bytes before the mark are still to be read */
		ssize_t n = LIBC(recv)(src_fd(c, d), &dr->urg_byte, 1, MSG_OOB | MSG_DONTWAIT);
		if (n != 1) {
			/* Gone (EINVAL: a newer mark replaced it) or not yet. */
			dr->urgent = errno == EAGAIN;
			return true;
		}
		dr->urg_held = true;
		dr->in++;
	}
	ssize_t w = LIBC(sendto)(dst_fd(c, d), &dr->urg_byte, 1,
				 MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
	if (w < 0) {
		dr->blocked = errno == EAGAIN || errno == EINTR;
		return dr->blocked;
	}
	dr->out++;
	dr->urgent = dr->urg_held = false;
	dr->urg_hole = true;
	dr->quiet = false; /* the bytes after the mark */
	return true;
}

/* Reads what the buffer has room for; *drained when the source had no
 * more (a read would block, came back small, or read_on() said not to
 * look). *on: a read in this round found bytes already. A short read of a
 * stream socket emptied its receive queue: when it was small (a request,
 * an answer), the next read would only fail. False on a fatal error. */
static bool fill(struct fn_conn *c, int d, bool *drained, bool *on)
{
	struct fn_dir *dr = &c->dir[d];
	*drained = true;
	if (dr->eof || dr->stopped || dr->quiet)
		return true;
	if (dr->lo == dr->hi)
		dr->lo = dr->hi = 0;
	else if (dr->hi == dr->cap && dr->lo > 0) {
		memmove(dr->buf, dr->buf + dr->lo, dr->hi - dr->lo);
		dr->hi -= dr->lo;
		dr->lo = 0;
	}
	bool latency = fn_shape_has_latency(c, dr);
	size_t limit = ahead_limit(c, dr);
	grow(c, dr);
	while (dr->hi < dr->cap && dr->hi - dr->lo < limit &&
	       !(latency && dr->mcount == FN_MARKS)) {
		if (*on && !read_on(dr))
			return (dr->quiet = true);
		if (dr->urgent && at_mark(src_fd(c, d)))
			return true; /* pass_urgent() first */
		size_t room = dr->cap - dr->hi;
		if (room > limit - (dr->hi - dr->lo))
			room = limit - (dr->hi - dr->lo);
		ssize_t n = take(c, d, &room);
		if (n == 0) {
			dr->eof = true;
			return true;
		}
		if (n < 0) {
			dr->quiet = errno == EAGAIN;
			if (*on && dr->quiet && dr->misses < 2)
				dr->misses++;
			return errno == EAGAIN || errno == EINTR;
		}
		if (*on)
			dr->misses = 0;
		*on = true;
		bool small = (size_t)n < room && n < SMALL_READ;
		/* A large read that came back short may have stopped at an
		 * urgent mark epoll has not reported yet: a read from the mark
		 * would step over the byte. */
		if ((size_t)n < room && !small && !dr->piped && at_mark(src_fd(c, d)))
			dr->urgent = true;
		n = (ssize_t)skip_filler(dr, (size_t)n);
		dr->hi += (size_t)n;
		dr->in += (uint64_t)n;
		if (latency)
			fn_shape_mark(c, dr, fn_now_ns()); /* when read, not when the round began */
		if (small)
			return (dr->quiet = true);
		if (dr->piped) {
			*drained = false;
			dr->filled = (size_t)n == room;
			return true;
		}
	}
	*drained = false; /* stopped by room, the rate's limit or the marks */
	dr->filled = dr->hi == dr->cap;
	return true;
}

/* Empties the shard's shared pipe before the pump leaves this direction: what the
 * destination did not take waits in the buffer, as a read's bytes do.
 * False if those bytes could not be kept. */
static bool unpipe(struct fn_conn *c, struct fn_dir *dr)
{
	if (!dr->piped)
		return true;
	dr->piped = false;
	return dr->lo == dr->hi ||
	       fn_splice_keep(&c->shard->pipe, dr->buf + dr->lo, dr->hi - dr->lo);
}

/* Writes what may go out. False on a fatal error. */
static bool flush(struct fn_conn *c, int d, uint64_t now)
{
	struct fn_dir *dr = &c->dir[d];
	dr->blocked = false;
	while (!dr->stopped && dr->lo < dr->hi) {
		uint64_t n = fn_shape_allowance(c, dr, now);
		if (!n)
			break;
		ssize_t w = dr->piped ? fn_splice_out(&c->shard->pipe, dst_fd(c, d), n)
				      : LIBC(sendto)(dst_fd(c, d), dr->buf + dr->lo, n,
						     MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
		if (w < 0) {
			if (dr->piped && fn_splice_refused(errno)) {
				if (!unpipe(c, dr))
					return false;
				continue; /* the rest goes from the buffer, now */
			}
			if (errno == EAGAIN || errno == EINTR) {
				dr->blocked = true;
				break;
			}
			return false;
		}
		dr->lo += (size_t)w;
		dr->out += (uint64_t)w;
		fn_shape_spent(c, dr, (uint64_t)w);
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
void fn_conn_go_dark(struct fn_conn *c)
{
	static const char filler[65536] FN_FAR_RODATA;
	int small = 1, unread = 0; /* the kernel rounds it up to its minimum */
	socklen_t len = sizeof(c->follow.rcvbuf);
	getsockopt(c->app, SOL_SOCKET, SO_RCVBUF, &c->follow.rcvbuf, &len);
	setsockopt(c->app, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	c->dir[0].stopped = c->dir[1].stopped = true;
	/* Where the filler starts in the stream the relay reads from the app,
	 * so that it can be thrown away if the route comes back. */
	ioctl(c->app, SIOCINQ, &unread);
	c->dir[0].skip_from = c->dir[0].raw_in + (uint64_t)(unread > 0 ? unread : 0);
	c->dir[0].skip_len = 0;
	int queued = 0;
	for (int i = 0; i < 256 && fn_conn_app_unread(c, &queued); i++) {
		/* On loopback a send is delivered and acknowledged before it
		 * returns; bytes left queued mean the window has closed. */
		if (ioctl(c->appfd, SIOCOUTQ, &queued) < 0 || queued > 0)
			break;
		ssize_t n = LIBC(sendto)(c->appfd, filler, sizeof(filler),
					 MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
		if (n <= 0)
			break;
		c->dir[0].skip_len += (uint64_t)n;
	}
}

/* stall, reset, close or blackhole, once after_bytes or after_ms is
 * reached. */
static void trigger(struct fn_conn *c, int d, uint64_t now)
{
	struct fn_dir *dr = &c->dir[d];
	if (!dr->faulted || dr->stopped || c->reset_pending ||
	    !fn_pace_tripped(&c->par, c->action, dr->out, c->est_ns, now, &c->wake_ns))
		return;
	if (c->action == FN_ACT_RESET) {
		c->reset_pending = true;
		return;
	}
	if (c->action == FN_ACT_BLACKHOLE)
		return fn_conn_go_dark(c);
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
void fn_conn_reset_when_sent(struct fn_conn *c, uint64_t now)
{
	int queued = 0, unread = 0;
	if (!c->reset_ns)
		c->reset_ns = now;
	bool sent = ioctl(c->app, SIOCOUTQ, &queued) < 0 || queued == 0;
	bool read = !fn_conn_app_unread(c, &unread) || unread == 0;
	if (!sent || (!read && now - c->reset_ns < 200 * MS)) {
		fn_shape_wake(c, now + MS);
		return;
	}
	fn_conn_finish(c, true);
}

/* A stopped direction reads nothing, yet must notice when its source
 * closes, or a stalled connection the app gave up on would never end. */
/* A source that sent its FIN is read no more, so a reset that follows
 * (an end that closed and then met the other's next bytes) would wait for
 * the relay's next write to it: the other end would meet it one write
 * late. The peer's reset is passed on to the app once the bytes before it
 * are out, as the app's kernel would have met it; the app's, at once (the
 * app has gone: nothing more can reach it). True when the connection is
 * to be reset now. */
static bool notice_reset(struct fn_conn *c, int d)
{
	struct fn_dir *dr = &c->dir[d];
	int err = 0;
	socklen_t len = sizeof(err);
	if (!dr->err_seen || !dr->eof)
		return false;
	dr->err_seen = false;
	/* A reset in CLOSE_WAIT is EPIPE (the kernel's tcp_reset). */
	if (getsockopt(src_fd(c, d), SOL_SOCKET, SO_ERROR, &err, &len) < 0 ||
	    (err != ECONNRESET && err != EPIPE))
		return false;
	if (d == 0)
		return true;
	c->reset_pending = true;
	return false;
}

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
			    dr->hi - dr->lo < ahead_limit(c, dr) &&
			    !(fn_shape_has_latency(c, dr) && dr->mcount == FN_MARKS);
		/* Urgent data known of: nothing is read until it has gone. */
		if (!dr->eof && !dr->stopped && room && !dr->urgent)
			ev[src] |= EPOLLIN | EPOLLRDHUP | EPOLLPRI;
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
	if (c->follows)
		fn_conn_follow(c, now);
	if (c->done)
		return;
	for (int d = 0; d < 2; d++) {
		struct fn_dir *dr = &c->dir[d];
		notice_close(c, d);
		if (notice_reset(c, d)) {
			fn_conn_finish(c, true);
			return;
		}
		/* Read and write in turn while bytes move: a bulk transfer
		 * goes through without a trip through epoll for each buffer. */
		uint64_t moved;
		int rounds = 0;
		bool drained, on = false;
		do {
			moved = dr->in + dr->out;
			bool ok = fill(c, d, &drained, &on) && flush(c, d, now);
			if (!unpipe(c, dr) || !ok || !pass_urgent(c, d)) {
				fn_conn_finish(c, true); /* pass a reset on as a reset */
				return;
			}
		} while (!drained && dr->in + dr->out != moved && !dr->blocked && ++rounds < 16);
		trigger(c, d, now);
		if (dr->eof && dr->lo == dr->hi && !dr->shut) {
			shutdown(dst_fd(c, d), SHUT_WR);
			dr->shut = true;
		}
	}
	if (c->reset_pending)
		return fn_conn_reset_when_sent(c, now);
	bool a = finished(&c->dir[0]), b = finished(&c->dir[1]);
	if ((a || b) && (a || c->dir[0].stopped) && (b || c->dir[1].stopped)) {
		fn_conn_finish(c, false);
		return;
	}
	watch(c);
}
