/* pump.c - one relayed connection's pass (see pump.h). Each read gets a
 * release time (latency plus a jitter draw, never earlier than the one
 * before, so bytes keep their order); the rate, the drip and the thresholds
 * say how much of what is due may go (core/pace.c). When the rule is off, or a
 * direction is not one of its, bytes pass as they come. A stall sends
 * nothing more and no FIN; a close its FIN; a reset waits until what it let
 * through has left (at most 200 ms), then resets both ends. A stalled
 * connection lives until a keepalive finds its app gone. An fd with
 * nothing left to wait for leaves the epoll set, where a socket shut both
 * ways would otherwise report EPOLLHUP forever. */
#include "bpf/pump.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bpf/endpoints.h"
#include "bpf/relay.h"
#include "bpf/slots.h"
#include "core/chance.h"
#include "core/clock.h"

#define CAP (1u << 20) /* bytes a direction holds before it stops reading */
#define CHUNK (64 * 1024)

struct fnb_chunk {
	struct fnb_chunk *next;
	uint64_t due;
	size_t len, off;
	char data[];
};

static char buf[CHUNK]; /* the relay thread's */

/* Whether the rule shapes direction d now: it is on, and d is one of its
 * directions. */
static bool shaped(const struct fnb_relay *r, const struct fnb_conn *c, int d)
{
	uint8_t dirs = c->par.direction ? c->par.direction : FN_DIR_BOTH;
	return __atomic_load_n(&r->slots->on[c->slot], __ATOMIC_RELAXED) &&
	       (dirs & (d ? FN_DIR_DOWN : FN_DIR_UP));
}

static void wake_by(uint64_t *wake, uint64_t t)
{
	if (t < *wake)
		*wake = t;
}

static const struct fn_params unshaped = {.after_bytes = -1, .after_ms = -1};

/* The rule's numbers for direction d now: none when it is off or d is not
 * one of its directions. */
static const struct fn_params *par_of(const struct fnb_relay *r, const struct fnb_conn *c, int d)
{
	return shaped(r, c, d) ? &c->par : &unshaped;
}

/* The rule's action for direction d now: a neutral one when it does not
 * shape d (no drip, no threshold). */
static enum fn_action act_of(const struct fnb_relay *r, const struct fnb_conn *c, int d)
{
	return shaped(r, c, d) ? c->action : FN_ACT_LATENCY;
}

static uint64_t due_of(const struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now)
{
	const struct fn_params *pa = par_of(r, c, d);
	double draw = pa->jitter_ms ? fn_random(c->key, c->draws++) * 2 - 1 : 0;
	return fn_pace_due(&c->d[d].pace, pa, draw, now);
}

/* Reads what d's source has, while there is room; -1 when it failed. */
static int fill(struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now)
{
	struct fnb_dir *x = &c->d[d];
	while (!x->eof && x->queued < CAP) {
		ssize_t n = read(c->fd[d], buf, sizeof(buf));
		if (n == 0) {
			x->eof = true;
			x->eof_due = due_of(r, c, d, now);
			return 0;
		}
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		struct fnb_chunk *k = malloc(sizeof(*k) + (size_t)n);
		if (!k)
			return -1;
		*k = (struct fnb_chunk){.due = due_of(r, c, d, now), .len = (size_t)n};
		memcpy(k->data, buf, (size_t)n);
		if (x->tail)
			x->tail->next = k;
		else
			x->head = k;
		x->tail = k;
		x->queued += (size_t)n;
		if (d == 0)
			__atomic_fetch_add(&r->slots->bytes[c->slot], (uint64_t)n,
					   __ATOMIC_RELAXED);
	}
	return 0;
}

/* Sends what is due; at the end, the source's FIN. -1 when it failed. */
static int flush(struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now, uint64_t *wake)
{
	struct fnb_dir *x = &c->d[d];
	int to = c->fd[1 - d];
	x->blocked = false;
	while (x->head) {
		struct fnb_chunk *k = x->head;
		if (k->due > now) {
			wake_by(wake, k->due);
			return 0;
		}
		const struct fn_params *pa = par_of(r, c, d);
		enum fn_action a = act_of(r, c, d);
		size_t n = x->cut ? 0
				  : (size_t)fn_pace_allow(&x->pace, pa, a, now, x->out,
							  k->len - k->off, wake);
		if (!n)
			return 0;
		ssize_t w = send(to, k->data + k->off, n, MSG_NOSIGNAL);
		if (w < 0) {
			x->blocked = errno == EAGAIN;
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		}
		x->out += (uint64_t)w;
		fn_pace_spent(&x->pace, pa, a, (uint64_t)w);
		k->off += (size_t)w;
		x->queued -= (size_t)w;
		if (k->off == k->len) {
			x->head = k->next;
			if (!x->head)
				x->tail = NULL;
			free(k);
		}
	}
	if (x->eof && !x->shut && !x->cut) {
		if (x->eof_due > now) {
			wake_by(wake, x->eof_due);
			return 0;
		}
		shutdown(to, SHUT_WR);
		x->shut = true;
	}
	return 0;
}

void fnb_pump_drop(struct fnb_conn *c, bool reset)
{
	for (int s = 0; s < 2; s++) {
		if (reset)
			fnb_reset_close(c->fd[s]);
		else
			close(c->fd[s]);
		for (struct fnb_chunk *k = c->d[s].head, *n; k; k = n) {
			n = k->next;
			free(k);
		}
	}
	free(c);
}

/* What each end waits for: bytes while its direction reads and has room,
 * room while the other direction is blocked, the peer's connect to finish.
 * An end that can neither receive nor send anything more leaves the set. */
static void watch(struct fnb_relay *r, struct fnb_conn *c)
{
	for (int s = 0; s < 2; s++) {
		const struct fnb_dir *in = &c->d[s], *out = &c->d[1 - s];
		bool live = s == 0 || c->connected;
		bool reading = live && !in->eof && !in->cut && in->queued < CAP && !c->reset_at;
		bool writing = !live || out->blocked;
		uint32_t ev = (reading ? EPOLLIN : 0) | (writing ? EPOLLOUT : 0);
		struct epoll_event e = {.events = ev, .data.u64 = (uintptr_t)c | (uint64_t)s};
		if ((in->eof || in->cut) && out->shut && !writing) {
			if (c->registered[s])
				epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd[s], NULL);
			c->registered[s] = false;
		} else if (!c->registered[s] || ev != c->watched[s]) {
			epoll_ctl(r->ep, c->registered[s] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd[s],
				  &e);
			c->registered[s] = true;
			c->watched[s] = ev;
		}
	}
}

/* Whether either end has failed (a reset, or the peer's connect). */
static bool failed(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err;
}

/* Keepalives find an app that went away from a stalled connection (its
 * socket then resets), which nothing else would tell. */
static void keepalive(int fd)
{
	int on = 1, idle = 5, intvl = 2, cnt = 3;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* A stall, reset or close whose threshold direction d has reached: each
 * sends nothing more on d; a close sends d's FIN, a stall never does, a
 * reset resets both ends once what went before it has left. */
static void threshold(const struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now,
		      uint64_t *wake)
{
	struct fnb_dir *x = &c->d[d];
	if (x->cut || !fn_pace_tripped(par_of(r, c, d), act_of(r, c, d), x->out, c->t0, now, wake))
		return;
	x->cut = true;
	if (c->action == FN_ACT_RESET) {
		c->reset_at = now + 200 * MS;
		c->reset_fd = c->fd[1 - d];
		wake_by(wake, now);
	} else if (c->action == FN_ACT_CLOSE && !x->shut) {
		shutdown(c->fd[1 - d], SHUT_WR);
		x->shut = true;
	} else {
		keepalive(c->fd[0]);
		keepalive(c->fd[1]);
	}
}

/* A pending reset: due once the bytes before it left (or at reset_at). */
static bool reset_due(struct fnb_conn *c, uint64_t now, uint64_t *wake)
{
	int queued = 0;
	if (ioctl(c->reset_fd, SIOCOUTQ, &queued) < 0 || queued == 0 || now >= c->reset_at)
		return true;
	wake_by(wake, now + MS);
	return false;
}

/* Both directions are over: each has sent its FIN after its source's, or
 * was closed at its threshold. */
static bool finished(const struct fnb_conn *c)
{
	for (int d = 0; d < 2; d++)
		if (!c->d[d].shut || !(c->d[d].eof || c->d[d].cut))
			return false;
	return true;
}

bool fnb_pump_step(struct fnb_relay *r, struct fnb_conn *c, uint64_t now, uint64_t *wake)
{
	if (failed(c->fd[0]) || failed(c->fd[1]) || (c->reset_at && reset_due(c, now, wake))) {
		fnb_pump_drop(c, true);
		return false;
	}
	if (!c->connected) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		c->connected = getpeername(c->fd[1], (struct sockaddr *)&ss, &sl) == 0;
	}
	for (int d = 0; d < 2 && !c->reset_at; d++) {
		if (d == 1 && !c->connected)
			break;
		/* The threshold is looked at again after the flush that reached it. */
		threshold(r, c, d, now, wake);
		if ((!c->d[d].cut && fill(r, c, d, now) < 0) ||
		    ((d == 1 || c->connected) && flush(r, c, d, now, wake) < 0)) {
			fnb_pump_drop(c, true);
			return false;
		}
		threshold(r, c, d, now, wake);
	}
	if (finished(c)) {
		fnb_pump_drop(c, false);
		return false;
	}
	watch(r, c);
	return true;
}
