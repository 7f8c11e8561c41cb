/* catalogue.h - what the it_catalogue_* programs share: echo servers on
 * every faulted address of catalogue.conf (a rule that failed to apply would
 * show as a connection that works), clients in three styles (blocking, poll,
 * epoll), and one main. Each program covers one family of faults. */
#ifndef FAULTNET_CATALOGUE_H
#define FAULTNET_CATALOGUE_H

/* Each program uses a different part of what follows. */
#pragma GCC diagnostic ignored "-Wunused-function"

#include "../cunit_run.h"
#include <pthread.h>
#include <sys/wait.h>

#include "sha256.h"
#include "testutil.h"

#define PORT 7100
#define UDP_PORT 7101
/* 64 MiB each way; IT_QUICK=1 (the ThreadSanitizer run, which is many
 * times slower) sends 4 MiB. */
static size_t BIG = 64u << 20;

static const char *const server_ips[] = {
    "127.72.0.1",  "127.72.0.2",  "127.72.0.3",	 "127.72.0.4",	"127.72.0.5",
    "127.72.0.6",  "127.72.0.7",  "127.72.0.8",	 "127.72.0.9",	"127.72.0.10",
    "127.72.0.11", "127.72.0.12", "127.72.0.13", "127.72.0.14", "127.72.0.15",
    "127.72.0.16", "127.72.0.17", "127.72.0.18", "127.72.0.19", "127.72.0.20",
    "127.72.0.21", "127.72.2.1",  "127.72.2.2",	 "127.72.2.3",	"127.72.3.1"};
#define NSERVERS (sizeof(server_ips) / sizeof(server_ips[0]))

/* What the echo server saw of the last connection that ended. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t seen_digest[32];
static uint64_t seen_bytes;
static uint16_t seen_peer_port;
static int seen_count;

/* ---- the echo server ---------------------------------------------------- */

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[65536];
	struct sha256 h;
	sha256_init(&h);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	getpeername(fd, (struct sockaddr *)&ss, &len);
	uint64_t total = 0;
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		sha256_update(&h, buf, (size_t)n);
		total += (uint64_t)n;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
			if (w <= 0)
				goto out;
			off += w;
		}
	}
out:
	pthread_mutex_lock(&seen_lock);
	sha256_final(&h, seen_digest);
	seen_bytes = total;
	seen_peer_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	seen_count++;
	pthread_mutex_unlock(&seen_lock);
	close(fd);
	return NULL;
}

static void *acceptor(void *arg)
{
	int *ls = arg;
	struct pollfd p[NSERVERS];
	for (size_t i = 0; i < NSERVERS; i++)
		p[i] = (struct pollfd){.fd = ls[i], .events = POLLIN};
	for (;;) {
		if (poll(p, NSERVERS, -1) <= 0)
			continue;
		for (size_t i = 0; i < NSERVERS; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int c = accept4(ls[i], NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			spawn_detached(echo, c);
		}
	}
	return NULL;
}

static int setup(void)
{
	static int ls[NSERVERS];
	for (size_t i = 0; i < NSERVERS; i++)
		ls[i] = bound_socket(SOCK_STREAM, server_ips[i], PORT);
	pthread_t t;
	pthread_create(&t, NULL, acceptor, ls);
	pthread_detach(t);
	return 0;
}

/* ---- clients in three styles ------------------------------------------- */

enum mode { M_BLOCK, M_POLL, M_EPOLL, M_MODES };
static const char *const mode_name[M_MODES] = {"blocking", "poll", "epoll"};

struct cl {
	int fd, ep;
	enum mode m;
};

/* 0 when ready, else 1 (timeout); ev is POLLIN or POLLOUT. */
static int cl_wait(struct cl *c, short ev, int ms)
{
	if (c->m == M_POLL) {
		struct pollfd p = {.fd = c->fd, .events = ev};
		return poll(&p, 1, ms) > 0 ? 0 : 1;
	}
	struct epoll_event e = {.events = ev == POLLIN ? EPOLLIN : EPOLLOUT};
	epoll_ctl(c->ep, EPOLL_CTL_MOD, c->fd, &e);
	return epoll_wait(c->ep, &e, 1, ms) > 0 ? 0 : 1;
}

/* Connects to ip:PORT; 0 or the error the app would see. *ms gets the
 * time it took. A non-blocking client waits for writability first. */
static int cl_connect(struct cl *c, const char *ip, enum mode m, long *ms)
{
	c->m = m;
	c->fd = tcp_socket(ip, m != M_BLOCK);
	c->ep = -1;
	if (m == M_EPOLL) {
		c->ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event e = {.events = EPOLLOUT};
		epoll_ctl(c->ep, EPOLL_CTL_ADD, c->fd, &e);
	}
	long t0 = now_ms();
	int r = connect_to(c->fd, ip, PORT), err = r == 0 ? 0 : errno;
	if (r < 0 && err == EINPROGRESS)
		err = cl_wait(c, POLLOUT, 5000) ? ETIMEDOUT : so_error(c->fd);
	if (ms)
		*ms = now_ms() - t0;
	return err;
}

static void cl_close(struct cl *c)
{
	close(c->fd);
	if (c->ep >= 0)
		close(c->ep);
}

/* One read with a timeout: bytes, 0 at EOF, -1 with errno (EAGAIN when
 * nothing came in time). */
static ssize_t cl_read(struct cl *c, void *buf, size_t n, int ms)
{
	if (c->m == M_BLOCK) {
		set_timeo(c->fd, SO_RCVTIMEO, ms);
		ssize_t r = recv(c->fd, buf, n, 0);
		if (r < 0 && errno == EWOULDBLOCK)
			errno = EAGAIN;
		return r;
	}
	if (cl_wait(c, POLLIN, ms)) {
		errno = EAGAIN;
		return -1;
	}
	return recv(c->fd, buf, n, MSG_DONTWAIT);
}

static bool cl_write(struct cl *c, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		if (c->m != M_BLOCK && cl_wait(c, POLLOUT, 5000))
			return false;
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | (c->m == M_BLOCK ? 0 : MSG_DONTWAIT));
		if (w < 0 && errno == EAGAIN)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Reads until want bytes, EOF, an error or a read that times out; returns
 * the bytes read, *end gets 0 (EOF), an errno, or -1 (got want). *maxread
 * gets the largest single read. */
static size_t cl_read_all(struct cl *c, char *buf, size_t want, int ms, int *end, size_t *maxread)
{
	size_t got = 0;
	*end = -1;
	if (maxread)
		*maxread = 0;
	while (got < want) {
		ssize_t n = cl_read(c, buf + got, want - got, ms);
		if (n <= 0) {
			*end = n == 0 ? 0 : errno;
			break;
		}
		if (maxread && (size_t)n > *maxread)
			*maxread = (size_t)n;
		got += (size_t)n;
	}
	return got;
}

static void pattern(char *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)('a' + (i * 7 + seed) % 26);
}

/* Runs one family's tests under the shim; `--child MODE` re-executes the
 * program for tests that need a fresh process. */
struct it_test {
	const char *name;
	CU_TestFunc fn;
};

static int catalogue_main(int argc, char **argv, const char *suite, const struct it_test *t,
			  int (*child)(const char *mode))
{
	remember_self(argv[0]);
	if (getenv("IT_QUICK"))
		BIG = 4u << 20;
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child ? child(argv[2]) : 98;
	if (!getenv("FAULTNET_CONFIG")) {
		fprintf(stderr, "%s: run me under the shim (see tests/README.md)\n", argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite(suite, setup, NULL);
	for (; t->name; t++)
		CU_add_test(s, t->name, t->fn);
	return cunit_run(argc > 1 ? argv[1] : NULL);
}

#endif
