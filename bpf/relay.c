/* relay.c - the kernel-side backend's relay for latency and bandwidth. The
 * BPF connect hook sends a covered connect to one of its loopback listeners
 * and a sockops program files the address the app asked for under the port
 * the connect leaves from; the relay accepts, takes that entry out of the
 * map (a connection no entry names, from anyone else, is reset), connects to
 * the address from outside the app's cgroup, and carries the bytes both
 * ways: each read gets a release time (latency plus a jitter draw, never
 * earlier than the one before, so bytes keep their order), and a token
 * bucket holds them to the rule's rate. One thread owns every connection;
 * the run's main thread only opens, starts and closes it. The app's
 * connect completes at the relay: a peer that refuses or is gone shows as
 * a reset of the connection, as under the shim's relay. */
#include "bpf/relay.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "bpf/pace.h"
#include "bpf/shared.h"
#include "bpf/slots.h"
#include "core/chance.h"
#include "core/rules.h"

#define CAP (1u << 20) /* bytes a direction holds before it stops reading */
#define CHUNK (64 * 1024)
#define MS 1000000ull
#define NEVER UINT64_MAX
enum { TAG_LISTENER = 2, TAG_STOP = 3 }; /* epoll tags; 0 and 1: a conn's end */

struct chunk {
	struct chunk *next;
	uint64_t due;
	size_t len, off;
	char data[];
};

/* One direction: what was read from its source, waiting for its time. */
struct dir {
	struct chunk *head, *tail;
	size_t queued;
	uint64_t eof_due;
	struct fnb_pace pace;
	bool eof, shut, blocked;
	bool cut; /* a stall or close has reached its threshold: nothing more */
};

/* fd[0] is the app's connection, fd[1] the peer's; d[0] carries the app's
 * bytes to the peer (up), d[1] the peer's to the app (down). */
struct fnb_conn {
	struct fnb_conn *next;
	int fd[2];
	uint32_t watched[2];
	struct dir d[2];
	uint32_t slot;
	struct fn_params par; /* the rule's, when the relay accepted */
	enum fn_action action;
	uint64_t key, draws, t0;
	bool connected;
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

static uint64_t due_of(const struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now)
{
	const struct fn_params *pa = par_of(r, c, d);
	double draw = pa->jitter_ms ? fn_random(c->key, c->draws++) * 2 - 1 : 0;
	return fnb_pace_due(&c->d[d].pace, pa, draw, now);
}

/* Reads what d's source has, while there is room; -1 when it failed. */
static int fill(struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now)
{
	struct dir *x = &c->d[d];
	while (!x->eof && x->queued < CAP) {
		ssize_t n = read(c->fd[d], buf, sizeof(buf));
		if (n == 0) {
			x->eof = true;
			x->eof_due = due_of(r, c, d, now);
			return 0;
		}
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		struct chunk *k = malloc(sizeof(*k) + (size_t)n);
		if (!k)
			return -1;
		*k = (struct chunk){.due = due_of(r, c, d, now), .len = (size_t)n};
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
	struct dir *x = &c->d[d];
	int to = c->fd[1 - d];
	x->blocked = false;
	while (x->head) {
		struct chunk *k = x->head;
		if (k->due > now) {
			wake_by(wake, k->due);
			return 0;
		}
		const struct fn_params *pa = par_of(r, c, d);
		size_t n =
		    x->cut ? 0
			   : fnb_pace_allow(&x->pace, pa, c->action, now, k->len - k->off, wake);
		if (!n)
			return 0;
		ssize_t w = send(to, k->data + k->off, n, MSG_NOSIGNAL);
		if (w < 0) {
			x->blocked = errno == EAGAIN;
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		}
		fnb_pace_spent(&x->pace, pa, c->action, (size_t)w);
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

/* Closes both ends, with a reset when the connection failed. */
static void drop(struct fnb_conn *c, bool reset)
{
	struct linger zero = {.l_onoff = 1, .l_linger = 0};
	for (int s = 0; s < 2; s++) {
		if (reset)
			setsockopt(c->fd[s], SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
		close(c->fd[s]);
		for (struct chunk *k = c->d[s].head, *n; k; k = n) {
			n = k->next;
			free(k);
		}
	}
	free(c);
}

/* What each end waits for: bytes while its direction has room, room while
 * the other direction is blocked, the peer's connect to finish. */
static void watch(struct fnb_relay *r, struct fnb_conn *c)
{
	for (int s = 0; s < 2; s++) {
		bool live = s == 0 || c->connected;
		uint32_t ev = (live && !c->d[s].eof && c->d[s].queued < CAP ? EPOLLIN : 0) |
			      (!live || c->d[1 - s].blocked ? EPOLLOUT : 0);
		if (ev == c->watched[s])
			continue;
		struct epoll_event e = {.events = ev, .data.u64 = (uintptr_t)c | (uint64_t)s};
		epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd[s], &e);
		c->watched[s] = ev;
	}
}

/* Whether either end has failed (a reset, or the peer's connect). */
static bool failed(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err;
}

/* A stall, reset or close whose threshold direction d has reached: a
 * stall sends nothing more and no FIN; a close sends its FIN at once and
 * nothing after; a reset resets both ends (false: the caller drops it). */
static bool threshold(const struct fnb_relay *r, struct fnb_conn *c, int d, uint64_t now,
		      uint64_t *wake)
{
	struct dir *x = &c->d[d];
	if (x->cut || !fnb_pace_tripped(&x->pace, par_of(r, c, d), c->action, c->t0, now, wake))
		return true;
	if (c->action == FN_ACT_RESET)
		return false;
	x->cut = true;
	if (c->action == FN_ACT_CLOSE && !x->shut) {
		shutdown(c->fd[1 - d], SHUT_WR);
		x->shut = true;
	}
	return true;
}

/* One pass over a connection; false when it is over (and freed). */
static bool step(struct fnb_relay *r, struct fnb_conn *c, uint64_t now, uint64_t *wake)
{
	if (failed(c->fd[0]) || failed(c->fd[1])) {
		drop(c, true);
		return false;
	}
	if (!c->connected) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		c->connected = getpeername(c->fd[1], (struct sockaddr *)&ss, &sl) == 0;
	}
	for (int d = 0; d < 2; d++) {
		if (d == 1 && !c->connected)
			break;
		/* The threshold is looked at again after the flush that reached it. */
		if (!threshold(r, c, d, now, wake) || fill(r, c, d, now) < 0 ||
		    ((d == 1 || c->connected) && flush(r, c, d, now, wake) < 0) ||
		    !threshold(r, c, d, now, wake)) {
			drop(c, true);
			return false;
		}
	}
	if (c->d[0].shut && c->d[1].shut) {
		drop(c, false);
		return false;
	}
	watch(r, c);
	return true;
}

static void reset_close(int fd)
{
	struct linger zero = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
	close(fd);
}

/* The peer's side of a connection the app made: connect (non-blocking) to
 * the address it asked for. */
static bool open_conn(struct fnb_relay *r, int app, const struct fnb_pending *v)
{
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = v->port};
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = v->port};
	memcpy(&s6.sin6_addr, v->addr, 16);
	s4.sin_addr.s_addr = v->addr[0];
	int one = 1,
	    fd = socket(v->v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct fnb_conn *c = calloc(1, sizeof(*c));
	if (fd < 0 || !c || !fnb_slots_params(r->slots, v->slot, &c->par, &c->action) ||
	    (connect(fd, v->v6 ? (struct sockaddr *)&s6 : (struct sockaddr *)&s4,
		     v->v6 ? sizeof(s6) : sizeof(s4)) < 0 &&
	     errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		free(c);
		return false;
	}
	c->fd[0] = app;
	c->fd[1] = fd;
	c->slot = v->slot;
	c->t0 = fn_now_ns();
	c->key = 0x9e3779b97f4a7c15ull * (v->slot + 1); /* the rule's jitter draws */
	setsockopt(app, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int s = 0; s < 2; s++) {
		struct epoll_event e = {.events = 0, .data.u64 = (uintptr_t)c | (uint64_t)s};
		epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd[s], &e);
	}
	c->next = r->conns;
	r->conns = c;
	return true;
}

/* Accepts what listener f has; each connection must be one the BPF program
 * sent here. */
static void accept_all(struct fnb_relay *r, int f)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int a =
		    accept4(r->lfd[f], (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (a < 0)
			return;
		struct fnb_pending_key k = {.port =
						ntohs(f ? ((struct sockaddr_in6 *)&ss)->sin6_port
							: ((struct sockaddr_in *)&ss)->sin_port),
					    .v6 = (uint16_t)f};
		struct fnb_pending v;
		if (bpf_map_lookup_and_delete_elem(r->pending_fd, &k, &v) || !open_conn(r, a, &v))
			reset_close(a);
	}
}

static void *loop(void *arg)
{
	struct fnb_relay *r = arg;
	struct epoll_event ev[64];
	int timeout = -1;
	for (;;) {
		int n = epoll_wait(r->ep, ev, 64, timeout);
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64 & 3;
			if (tag == TAG_STOP)
				return NULL;
			if (tag == TAG_LISTENER)
				accept_all(r, (int)(ev[i].data.u64 >> 2));
		}
		uint64_t now = fn_now_ns(), wake = NEVER;
		for (struct fnb_conn **p = &r->conns; *p;) {
			struct fnb_conn *c = *p, *next = c->next;
			if (step(r, c, now, &wake))
				p = &c->next;
			else
				*p = next;
		}
		timeout = wake == NEVER ? -1 : (int)((wake - now + MS - 1) / MS);
	}
}

static int listener(int family, uint16_t *port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len =
	    family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

bool fnb_relay_open(struct fnb_relay *r)
{
	r->lfd[0] = listener(AF_INET, &r->port[0]);
	r->lfd[1] = listener(AF_INET6, &r->port[1]);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	r->wake = eventfd(0, EFD_CLOEXEC);
	r->conns = NULL;
	r->running = false;
	return r->lfd[0] >= 0 && r->lfd[1] >= 0 && r->ep >= 0 && r->wake >= 0;
}

bool fnb_relay_start(struct fnb_relay *r)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = TAG_STOP};
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake, &e) < 0)
		return false;
	for (int f = 0; f < 2; f++) {
		e.data.u64 = TAG_LISTENER | ((uint64_t)f << 2);
		if (epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd[f], &e) < 0)
			return false;
	}
	r->running = pthread_create(&r->thread, NULL, loop, r) == 0;
	return r->running;
}

void fnb_relay_close(struct fnb_relay *r)
{
	if (r->running) {
		uint64_t one = 1;
		(void)!write(r->wake, &one, sizeof(one));
		pthread_join(r->thread, NULL);
	}
	while (r->conns) {
		struct fnb_conn *c = r->conns;
		r->conns = c->next;
		drop(c, true);
	}
	int fds[] = {r->lfd[0], r->lfd[1], r->ep, r->wake};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
}
