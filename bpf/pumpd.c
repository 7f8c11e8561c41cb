/* pumpd.c - faultnet-pump FD: the kernel-side backend's HTTP pump (see
 * httppump.h). faultctl starts it under the shim with the run's policy;
 * the relay hands it, over FD, each connection of the app an HTTP rule
 * covers, with the address the app asked for. It connects there and
 * copies the bytes both ways, one thread per direction; the shim sees that
 * connect as a covered connection and runs its HTTP engine on it, so the
 * app's requests are ruled and the engine's answers come back. It exits
 * when FD ends (faultctl is done), after its connections end or 2 s, and
 * the shim leaves its counters in FAULTNET_STATS_DIR. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bpf/httppump.h"

static int live; /* connections being carried */

struct conn {
	int app, up;
	bool failed;
};

static void reset_close(int fd)
{
	struct linger zero = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &zero, sizeof(zero));
	close(fd);
}

/* Everything in buf to fd; false when it failed. */
static bool write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf += w;
		n -= (size_t)w;
	}
	return true;
}

/* One direction until its EOF, passed on as a FIN; false when a side
 * failed (then both are shut, which wakes the other direction). */
static bool copy(struct conn *c, int from, int to)
{
	static __thread char buf[64 * 1024];
	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			shutdown(to, SHUT_WR);
			return true;
		}
		if (n < 0 || !write_all(to, buf, (size_t)n)) {
			__atomic_store_n(&c->failed, true, __ATOMIC_RELAXED);
			shutdown(c->app, SHUT_RDWR);
			shutdown(c->up, SHUT_RDWR);
			return false;
		}
	}
}

static void *down(void *arg)
{
	struct conn *c = arg;
	copy(c, c->up, c->app);
	return NULL;
}

/* The connect the shim rules: to the address the app asked for (an
 * IPv4-mapped one as IPv4, as it goes on the wire). */
static int dial(const struct fnb_pump_msg *m)
{
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = m->port};
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = m->port};
	bool mapped = m->v6 && !m->addr[0] && !m->addr[1] && m->addr[2] == htonl(0xffff);
	bool v6 = m->v6 && !mapped;
	memcpy(&s6.sin6_addr, m->addr, 16);
	s4.sin_addr.s_addr = mapped ? m->addr[3] : m->addr[0];
	int one = 1, fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int rc;
	while ((rc = connect(fd, v6 ? (struct sockaddr *)&s6 : (struct sockaddr *)&s4,
			     v6 ? sizeof(s6) : sizeof(s4))) < 0 &&
	       errno == EINTR)
		;
	if (rc < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

struct job {
	int app;
	struct fnb_pump_msg m;
};

/* One connection: dialled, carried both ways, closed (with a reset when a
 * side failed, as the peer's failure). A peer that refuses shows as a
 * reset, as through the relay. */
static void *carry(void *arg)
{
	struct job *j = arg;
	/* The relay accepted it non-blocking; the pump's threads block. */
	fcntl(j->app, F_SETFL, fcntl(j->app, F_GETFL) & ~O_NONBLOCK);
	struct conn c = {.app = j->app, .up = dial(&j->m)};
	pthread_t t;
	if (c.up < 0 || pthread_create(&t, NULL, down, &c) != 0) {
		reset_close(c.app);
		if (c.up >= 0)
			reset_close(c.up);
	} else {
		copy(&c, c.app, c.up);
		pthread_join(t, NULL);
		if (c.failed) {
			reset_close(c.app);
			reset_close(c.up);
		} else {
			close(c.app);
			close(c.up);
		}
	}
	free(j);
	__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* The next connection from faultctl: its fd, -1 for a message without
 * one, -2 when faultctl is done. */
static int receive(int fd, struct fnb_pump_msg *m)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec io = {.iov_base = m, .iov_len = sizeof(*m)};
	struct msghdr msg = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	ssize_t n;
	while ((n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return -2;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int app = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&app, CMSG_DATA(c), sizeof(int));
	if (app >= 0 && n != (ssize_t)sizeof(*m)) {
		reset_close(app);
		app = -1;
	}
	return app;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr,
			"usage: faultnet-pump FD (started by faultctl run --backend=bpf)\n");
		return 2;
	}
	int fd = atoi(argv[1]);
	/* A Ctrl-C reaches the app through faultctl; the pump ends with it. */
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct job *j = malloc(sizeof(*j));
		int app = j ? receive(fd, &j->m) : -2;
		if (app == -2) {
			free(j);
			break;
		}
		if (app < 0) {
			free(j);
			continue;
		}
		j->app = app;
		pthread_t t;
		__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
		if (pthread_create(&t, &at, carry, j) != 0) {
			reset_close(app);
			free(j);
			__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
		}
	}
	for (int i = 0; i < 40 && __atomic_load_n(&live, __ATOMIC_RELAXED); i++)
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
	return 0;
}
