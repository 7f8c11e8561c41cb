/* stream.c - the benchmark's traffic: a loopback server and the clients that
 * measure throughput, round trips, rates and connect times. The server runs
 * without the shim; clients run with or without it, so that each figure is
 * a ratio of two runs of the same program.
 *
 *   stream serve IP PORT                 server (B: sink, E: echo, S: source)
 *   stream bulk IP PORT MIB              seconds to send MIB MiB, then the CPU
 *                                        seconds this process used (with the
 *                                        shim: its relay thread's too)
 *   stream rr IP PORT N SIZE             microseconds of each of N round trips
 *   stream down IP PORT SECONDS          bytes per second received
 *   stream connect IP PORT N SYNCNT      microseconds and errno of N connects
 *   stream http IP PORT N                microseconds of each of N keep-alive
 *                                        HTTP/1.1 GETs (server G: 64-byte 200s)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct sockaddr_in addr(const char *ip, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static int dial(const char *ip, const char *port)
{
	struct sockaddr_in a = addr(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static bool read_all(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* An HTTP/1.1 server as small as can be: every request gets 64 bytes. The
 * client sends one request at a time, so a request has ended when what
 * was read ends with a blank line. */
static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n"
			     "0123456789012345678901234567890123456789012345678901234567890123";

static void serve_http(int fd)
{
	char b[4096];
	size_t have = 0;
	ssize_t n;
	while ((n = recv(fd, b + have, sizeof(b) - have, 0)) > 0) {
		have += (size_t)n;
		if (have >= 3 && memcmp(b + have - 3, "\r\n\r\n" + 1, 3) == 0) {
			if (!write_all(fd, answer, sizeof(answer) - 1))
				return;
			have = 0;
		} else if (have == sizeof(b)) {
			return;
		}
	}
}

static void *serve_one(void *arg)
{
	int fd = (int)(intptr_t)arg, one = 1;
	static __thread char b[1 << 16];
	char kind;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (recv(fd, &kind, 1, MSG_WAITALL) == 1) {
		ssize_t n;
		uint64_t total = 0;
		if (kind == 'B') {
			while ((n = recv(fd, b, sizeof(b), 0)) > 0)
				total += (uint64_t)n;
			write_all(fd, (char *)&total, sizeof(total));
		} else if (kind == 'E') {
			while ((n = recv(fd, b, sizeof(b), 0)) > 0 && write_all(fd, b, (size_t)n))
				;
		} else if (kind == 'G') {
			serve_http(fd);
		} else if (kind == 'S') {
			while (write_all(fd, b, sizeof(b)))
				;
		}
	}
	close(fd);
	return NULL;
}

static int serve(const char *ip, const char *port)
{
	struct sockaddr_in a = addr(ip, port);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1024) < 0) {
		perror("serve");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, serve_one, (void *)(intptr_t)c) != 0)
			close(c);
		pthread_attr_destroy(&at);
	}
}

static int bulk(const char *ip, const char *port, long mib)
{
	int fd = dial(ip, port);
	uint64_t total = 0;
	double t0 = now();
	if (!write_all(fd, "B", 1))
		return 1;
	for (long i = 0; i < mib; i++)
		if (!write_all(fd, buf, sizeof(buf)))
			return 1;
	shutdown(fd, SHUT_WR);
	if (!read_all(fd, (char *)&total, sizeof(total)) || total != (uint64_t)mib << 20)
		return 1;
	double took = now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%.6f\n%.6f\n", took,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	return 0;
}

static int rr(const char *ip, const char *port, long n, long size)
{
	int fd = dial(ip, port);
	if (!write_all(fd, "E", 1))
		return 1;
	for (long i = 0; i < n; i++) {
		double t0 = now();
		if (!write_all(fd, buf, (size_t)size) || !read_all(fd, buf, (size_t)size))
			return 1;
		printf("%.1f\n", (now() - t0) * 1e6);
	}
	return 0;
}

static int http(const char *ip, const char *port, long n)
{
	static const char get[] = "GET /bench HTTP/1.1\r\nHost: bench\r\n\r\n";
	int fd = dial(ip, port);
	for (long i = 0; i < n; i++) {
		double t0 = now();
		if (!write_all(fd, get, sizeof(get) - 1) || !read_all(fd, buf, sizeof(answer) - 1))
			return 1;
		printf("%.1f\n", (now() - t0) * 1e6);
	}
	return 0;
}

static int down(const char *ip, const char *port, double seconds)
{
	int fd = dial(ip, port);
	if (!write_all(fd, "S", 1))
		return 1;
	/* The first bytes may come from a burst allowance: count from the
	 * first read on. */
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	double t0 = now();
	uint64_t total = 0;
	while (n > 0 && now() - t0 < seconds) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0)
			total += (uint64_t)n;
	}
	printf("%.1f\n", (double)total / (now() - t0));
	return 0;
}

static int connects(const char *ip, const char *port, long n, int syncnt)
{
	struct sockaddr_in a = addr(ip, port);
	for (long i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (syncnt > 0)
			setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt, sizeof(syncnt));
		double t0 = now();
		int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		printf("%.1f %d\n", (now() - t0) * 1e6, r < 0 ? errno : 0);
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && strcmp(argv[1], "serve") == 0)
		return serve(argv[2], argv[3]);
	if (argc >= 5 && strcmp(argv[1], "bulk") == 0)
		return bulk(argv[2], argv[3], atol(argv[4]));
	if (argc >= 5 && strcmp(argv[1], "http") == 0)
		return http(argv[2], argv[3], atol(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "rr") == 0)
		return rr(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
	if (argc >= 5 && strcmp(argv[1], "down") == 0)
		return down(argv[2], argv[3], atof(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "connect") == 0)
		return connects(argv[2], argv[3], atol(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: see the comment at the top of stream.c\n");
	return 2;
}
