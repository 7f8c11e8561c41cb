/* relay.c - the kernel-side backend's relay for the stream faults. The BPF
 * connect hook sends a covered connect to one of its loopback listeners and
 * a sockops program files the address the app asked for under the port the
 * connect leaves from; the relay accepts, takes that entry out of the map
 * (a connection no entry names, from anyone else, is reset), connects to
 * the address from outside the app's cgroup, and carries the bytes both
 * ways (pump.c). One thread owns every connection; the run's main thread
 * only opens, starts and closes it. The app's connect completes at the
 * relay: a peer that refuses or is gone shows as a reset of the connection,
 * as under the shim's relay. */
#include "bpf/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bpf/lbpf.h"

#include "bpf/endpoints.h"
#include "bpf/httppump.h"
#include "bpf/pump.h"
#include "bpf/shared.h"
#include "bpf/slots.h"
#include "core/clock.h"
#include "core/rules.h"

#define NEVER UINT64_MAX
enum { TAG_LISTENER = 2, TAG_STOP = 3 }; /* epoll tags; 0 and 1: a conn's end */

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
	for (int d = 0; d < 2; d++)
		fn_pace_start(&c->d[d].pace, &c->par, c->t0);
	/* Each connection's jitter draws its own numbers, as under the shim. */
	c->key = 0x9e3779b97f4a7c15ull * (v->slot + 1) ^ 0xbf58476d1ce4e5b9ull * ++r->serial;
	setsockopt(app, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->next = r->conns; /* its first step puts its fds in the epoll set */
	r->conns = c;
	return true;
}

/* A connection an HTTP rule covers goes to the pump, whose shim rules its
 * requests; true when it was one (handed over, or reset when it could
 * not be). */
static bool to_pump(struct fnb_relay *r, int app, const struct fnb_pending *v)
{
	struct fn_params par;
	enum fn_action a;
	if (!fnb_slots_params(r->slots, v->slot, &par, &a) ||
	    (a != FN_ACT_RESPOND && a != FN_ACT_SLOW && a != FN_ACT_ABORT && a != FN_ACT_TLS))
		return false;
	struct fnb_pump_msg m = {.port = v->port, .v6 = v->v6};
	memcpy(m.addr, v->addr, sizeof(m.addr));
	if (r->http_fd < 0 || !fnb_httppump_give(r->http_fd, app, &m))
		fnb_reset_close(app);
	else
		close(app);
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
		if (a < 0 && (errno == EMFILE || errno == ENFILE) && r->spare >= 0) {
			/* Out of fds: the connection is reset rather than left
			 * waiting, which would wake this loop forever. */
			close(r->spare);
			a = accept4(r->lfd[f], NULL, NULL, SOCK_CLOEXEC);
			if (a >= 0)
				fnb_reset_close(a);
			r->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
			continue;
		}
		if (a < 0)
			return;
		struct fnb_pending_key k = {.port =
						ntohs(f ? ((struct sockaddr_in6 *)&ss)->sin6_port
							: ((struct sockaddr_in *)&ss)->sin_port),
					    .v6 = (uint16_t)f};
		struct fnb_pending v;
		if (bpf_map_lookup_and_delete_elem(r->pending_fd, &k, &v))
			fnb_reset_close(a);
		else if (!to_pump(r, a, &v) && !open_conn(r, a, &v))
			fnb_reset_close(a);
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
			if (fnb_pump_step(r, c, now, &wake))
				p = &c->next;
			else
				*p = next;
		}
		timeout = wake == NEVER ? -1 : (int)((wake - now + MS - 1) / MS);
	}
}

bool fnb_relay_open(struct fnb_relay *r)
{
	r->lfd[0] = fnb_loopback_socket(AF_INET, SOCK_NONBLOCK, 0, true, &r->port[0]);
	r->lfd[1] = fnb_loopback_socket(AF_INET6, SOCK_NONBLOCK, 0, true, &r->port[1]);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	r->wake = eventfd(0, EFD_CLOEXEC);
	r->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	r->conns = NULL;
	r->running = false;
	/* A machine without IPv6 has no ::1 (port 0): its connects go nowhere
	 * anyway, and the programs leave a connect alone when the port is 0. */
	return r->lfd[0] >= 0 && r->ep >= 0 && r->wake >= 0;
}

bool fnb_relay_start(struct fnb_relay *r)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = TAG_STOP};
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake, &e) < 0)
		return false;
	for (int f = 0; f < 2; f++) {
		e.data.u64 = TAG_LISTENER | ((uint64_t)f << 2);
		if (r->lfd[f] >= 0 && epoll_ctl(r->ep, EPOLL_CTL_ADD, r->lfd[f], &e) < 0)
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
		fnb_pump_drop(c, true);
	}
	int fds[] = {r->lfd[0], r->lfd[1], r->ep, r->wake, r->spare};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
}
