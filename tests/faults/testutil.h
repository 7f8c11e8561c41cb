/* testutil.h - small helpers shared by the integration programs: clocks,
 * loopback listeners, addresses, readiness waits. Every address used by the
 * tests is on loopback (127.0.0.0/8 or ::1). */
#ifndef FAULTNET_TESTUTIL_H
#define FAULTNET_TESTUTIL_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

static inline long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* ip may be IPv4 or IPv6 (including ::ffff:a.b.c.d). */
static inline socklen_t mkaddr(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &in6->sin6_addr);
		return sizeof(*in6);
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	inet_pton(AF_INET, ip, &in->sin_addr);
	return sizeof(*in);
}

static inline int family_of(const char *ip)
{
	return strchr(ip, ':') ? AF_INET6 : AF_INET;
}

static inline int tcp_socket(const char *ip, bool nonblock)
{
	return socket(family_of(ip), SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0),
		      0);
}

static inline int bound_socket(int type, const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, ip, port);
	int fd = socket(ss.ss_family, type | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		fprintf(stderr, "bind %s:%u: %s\n", ip, port, strerror(errno));
		exit(2);
	}
	if (type == SOCK_STREAM)
		listen(fd, 128);
	return fd;
}

static inline uint16_t local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

static inline int connect_to(int fd, const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, ip, port);
	return connect(fd, (struct sockaddr *)&ss, len);
}

static inline void set_int(int fd, int level, int opt, int v)
{
	setsockopt(fd, level, opt, &v, sizeof(v));
}

static inline void set_timeo(int fd, int opt, long ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

static inline int so_error(int fd)
{
	int e = -1;
	socklen_t len = sizeof(e);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
	return e;
}

static inline int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	return ti.tcpi_state;
}

/* getpeername as "ip:port", or "E<errno>" when it fails. */
static inline const char *peer_of(int fd, char *buf, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(buf, n, "E%d", errno);
		return buf;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, n, "%s:%u/%u", ip, ntohs(in->sin_port), (unsigned)len);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, n, "[%s]:%u/%u", ip, ntohs(in6->sin6_port), (unsigned)len);
	}
	return buf;
}

enum waitkind { W_POLL, W_PPOLL, W_SELECT, W_PSELECT, W_EPOLL_LT, W_EPOLL_ET, W_KINDS };
static const char *const waitkind_name[W_KINDS] = {"poll",    "ppoll",	  "select",
						   "pselect", "epoll-lt", "epoll-et"};

/* Waits for writability; returns POLLOUT/POLLERR/POLLHUP bits, 0 on timeout.
 * ep is an epoll fd with fd already registered (for the epoll kinds). */
static inline int wait_out(enum waitkind k, int fd, int ep, int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	fd_set w, x;
	FD_ZERO(&w);
	FD_ZERO(&x);
	FD_SET(fd, &w);
	FD_SET(fd, &x);
	struct epoll_event ev;
	int n;
	switch (k) {
	case W_POLL:
		n = poll(&p, 1, ms);
		return n > 0 ? p.revents : 0;
	case W_PPOLL:
		n = ppoll(&p, 1, &ts, NULL);
		return n > 0 ? p.revents : 0;
	case W_SELECT:
	case W_PSELECT:
		n = k == W_SELECT ? select(fd + 1, NULL, &w, &x, &tv)
				  : pselect(fd + 1, NULL, &w, &x, &ts, NULL);
		if (n <= 0)
			return 0;
		/* A socket error shows in select as writable (and in the
		 * exception set on some kernels); SO_ERROR tells the rest. */
		return FD_ISSET(fd, &w) ? POLLOUT : 0;
	default:
		n = epoll_wait(ep, &ev, 1, ms);
		if (n <= 0)
			return 0;
		return (ev.events & EPOLLOUT ? POLLOUT : 0) | (ev.events & EPOLLERR ? POLLERR : 0) |
		       (ev.events & EPOLLHUP ? POLLHUP : 0);
	}
}

/* Runs fn(fd) on a detached thread; when no thread can be had (a thread
 * limit under load), closes fd instead, as a server would drop it. */
static inline void spawn_detached(void *(*fn)(void *), int fd)
{
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, fn, (void *)(intptr_t)fd) != 0)
		close(fd);
	pthread_attr_destroy(&at);
}

/* How many of the app's own fds are open: the shim's live at 1000 and up. */
static inline int app_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && atoi(e->d_name) < 1000;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* This process's resident memory in KiB. */
static inline long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* One past the highest fd this process holds: the shim's own fds sit
 * above the soft RLIMIT_NOFILE where the hard limit leaves room, so a loop
 * over fd numbers must reach them. */
static inline int fd_bound(void)
{
	int hi = 2;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d && (e = readdir(d));)
		if (atoi(e->d_name) > hi)
			hi = atoi(e->d_name);
	if (d)
		closedir(d);
	return hi + 1;
}

/* This program's own path, for re-executing itself: argv[0] made absolute
 * (under valgrind /proc/self/exe would name valgrind's tool instead). */
static char self_path[4096] = "/proc/self/exe";

static inline void remember_self(const char *argv0)
{
	char buf[4096];
	if (strchr(argv0, '/') && realpath(argv0, buf))
		snprintf(self_path, sizeof(self_path), "%s", buf);
}

#endif
