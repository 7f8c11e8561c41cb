/* endpoints.c - the loopback endpoints a kernel-side run holds (see
 * endpoints.h), each a real socket whose kernel behaviour is the fault:
 *  - refuse: bound, never listening: the SYN is answered with a reset;
 *  - stall: listening, never accepting: the handshake completes, nothing
 *    answers, and the connection's buffer takes 256 KiB of what the app
 *    writes; the queue holds 4,096 connections;
 *  - reset: listening; a thread accepts each connection and, once the
 *    app's first bytes arrive (or FN_RESET_WAIT_MS later), closes it with a
 *    zero linger, so the app's connect succeeds and its read meets
 *    ECONNRESET, as from a server that resets at accept (and as under the
 *    shim).
 * All are bound without SO_REUSEADDR, so that no other account can take a
 * port while the run holds it, and close-on-exec. */
#include "bpf/endpoints.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bpf/compile.h"
#include "core/clock.h"
#include "core/addr.h"
#include "core/rules.h"

int fnb_loopback_socket(int family, int flags, int rcvbuf, bool listening, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	fn_sockaddr_loopback(family, 0, &ss, &len);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
	if (fd >= 0 && rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (listening && listen(fd, 4096) < 0) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		if (fd >= 0)
			close(fd);
		*port = 0;
		return -1;
	}
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int endpoint(int family, int kind, uint16_t *port)
{
	return fnb_loopback_socket(family, 0, kind == FNB_EP_STALL ? FN_STALL_RCVBUF : 0,
				   kind != FNB_EP_REFUSE, port);
}

void fnb_reset_close(int c)
{
	struct linger zero = {.l_onoff = 1, .l_linger = 0};
	setsockopt(c, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
	close(c);
}

/* The connections the reset endpoints accepted and hold until the app's
 * first bytes arrive (or FN_RESET_WAIT_MS), as the shim's relay does: reset
 * at once, the reset raced the app's writer and reader (Go's net/http runs
 * both at once), and the write could meet it where the shim's app meets it
 * on its read, or the connect itself failed. Slots 0 and 1 are the
 * listeners. At most cap are held: FNB_RESET_HELD (4 KiB of the thread's
 * stack), and no more than a quarter of faultctl's fd limit, so that the
 * relay (two fds a connection) and live control keep theirs (held
 * connections starved the relay, which out of fds resets the connections
 * it should carry). When cap are held, or faultctl is out of fds, the
 * listeners wait: their queue (4,096) holds the next connections,
 * established, until a held one is reset. */
#define FNB_RESET_HELD 256

struct held {
	struct pollfd p[2 + FNB_RESET_HELD];
	uint64_t due[FNB_RESET_HELD];
	int n, cap;
	bool no_fds; /* an accept met EMFILE or ENFILE since the last reset */
};

/* A quarter of faultctl's soft fd limit, at most FNB_RESET_HELD. */
static int hold_cap(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur / 4 >= FNB_RESET_HELD)
		return FNB_RESET_HELD;
	return rl.rlim_cur >= 4 ? (int)(rl.rlim_cur / 4) : 1;
}

/* Resets held connection i; the last takes its place. */
static void drop(struct held *h, int i)
{
	fnb_reset_close(h->p[2 + i].fd);
	h->n--;
	h->p[2 + i] = h->p[2 + h->n];
	h->due[i] = h->due[h->n];
	h->no_fds = false;
}

/* Resets what is due: bytes or a close from the app, or its time up. */
static void reset_due(struct held *h, uint64_t now)
{
	for (int i = 0; i < h->n;)
		if (h->p[2 + i].revents || now >= h->due[i])
			drop(h, i);
		else
			i++;
}

/* Whether the listeners wait (see struct held): a held connection's reset
 * frees the room (or the fd) for the next. */
static bool full(const struct held *h)
{
	return h->n == h->cap || (h->n && h->no_fds);
}

/* Accepts what the listeners hold while there is room. Out of fds with none
 * held, a pause, so that the listener's readiness does not spin the
 * thread. */
static void accept_all(struct held *h, uint64_t now)
{
	for (int f = 0; f < 2 && !full(h); f++) {
		if (!(h->p[f].revents & POLLIN))
			continue;
		int c = accept4(h->p[f].fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
			h->no_fds = true;
			if (!h->n)
				nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
			continue;
		}
		if (c < 0)
			continue;
		h->no_fds = false;
		h->p[2 + h->n] = (struct pollfd){.fd = c, .events = POLLIN};
		h->due[h->n++] = now + FN_RESET_WAIT_MS * MS;
	}
}

/* Until the first held connection is due, at most 50 ms (to see stop). */
static int wait_ms(const struct held *h, uint64_t now)
{
	uint64_t first = now + 50 * MS;
	for (int i = 0; i < h->n; i++)
		if (h->due[i] < first)
			first = h->due[i];
	return first <= now ? 0 : (int)((first - now + MS - 1) / MS);
}

/* Accepts on the reset endpoints and resets each connection. */
static void *resetter(void *arg)
{
	struct fnb_endpoints *e = arg;
	struct held held = {.n = 0, .cap = hold_cap()}, *h = &held;
	h->p[0] = (struct pollfd){.fd = e->fd[FNB_EP_RESET][0], .events = POLLIN};
	h->p[1] = (struct pollfd){.fd = e->fd[FNB_EP_RESET][1], .events = POLLIN};
	while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
		h->p[0].events = h->p[1].events = full(h) ? 0 : POLLIN;
		int ready = poll(h->p, 2 + h->n, wait_ms(h, fn_now_ns()));
		uint64_t now = fn_now_ns();
		for (int i = 0; ready < 0 && i < 2 + h->n; i++)
			h->p[i].revents = 0; /* EINTR: nothing seen */
		reset_due(h, now);
		accept_all(h, now);
	}
	for (int i = 0; i < h->n; i++)
		fnb_reset_close(h->p[2 + i].fd);
	return NULL;
}

void fnb_endpoints_open(struct fnb_endpoints *e)
{
	memset(e, 0, sizeof(*e));
	for (int k = 0; k < FNB_EP_KINDS; k++)
		for (int f = 0; f < 2; f++)
			e->fd[k][f] = endpoint(f ? AF_INET6 : AF_INET, k, &e->port[k][f]);
	e->running =
	    e->fd[FNB_EP_RESET][0] >= 0 && pthread_create(&e->thread, NULL, resetter, e) == 0;
}

bool fnb_endpoints_ready(const struct fnb_endpoints *e, const struct fnb_plan *pl)
{
	for (size_t i = 0; i < pl->policy->nrules; i++) {
		int a = pl->rules[i].action;
		int k = a == FNB_REFUSE	 ? FNB_EP_REFUSE
			: a == FNB_STALL ? FNB_EP_STALL
			: a == FNB_RESET ? FNB_EP_RESET
					 : -1;
		/* ::1 may be missing (no IPv6): its connects go nowhere anyway,
		 * and the programs leave a connect alone when the port is 0. */
		if (k >= 0 && e->fd[k][0] < 0)
			return false;
		if (k == FNB_EP_RESET && !e->running)
			return false;
	}
	return true;
}

void fnb_endpoints_close(struct fnb_endpoints *e)
{
	if (e->running) {
		__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
		pthread_join(e->thread, NULL);
	}
	for (int k = 0; k < FNB_EP_KINDS; k++)
		for (int f = 0; f < 2; f++)
			if (e->fd[k][f] >= 0)
				close(e->fd[k][f]);
}
