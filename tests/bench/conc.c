/* conc.c - many concurrent keep-alive connections (issue 42 item 5): an
 * HTTP/1.1 server and a client that keep C connections busy at once, each
 * sending its next GET as soon as its last answer is in, so that a relay
 * between them is measured with C connections live rather than one.
 *
 *   conc serve IP PORT            one-thread epoll server: every request
 *                                 gets a 64-byte 200 (prints "ready")
 *   conc load IP PORT C SECONDS   C connections for SECONDS; prints
 *                                 "requests seconds p50_us p99_us worst_gap_ms"
 *
 * worst_gap_ms is the longest any connection waited between two of its
 * answers (or from the start to its first): a starved connection shows
 * there. The client raises its own fd limit to the hard one, as a gateway
 * would, so that C connections (and, under the shim, the relay's other
 * ends, in the same process) fit. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char get[] = "GET /bench HTTP/1.1\r\nHost: bench\r\n\r\n";
static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n"
			     "0123456789012345678901234567890123456789012345678901234567890123";
#define ANSWER (sizeof(answer) - 1)

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

static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ---- server ---------------------------------------------------------------- */

/* Bytes of a request read so far per fd: a request ends at a blank line
 * (the client sends the next one only after the answer). */
static unsigned char *tail_of;

static void serve_ready(int fd)
{
	char b[4096];
	ssize_t n;
	while ((n = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0) {
		/* The 4 bytes "\r\n\r\n" may span reads: tail_of[fd] counts how
		 * many of them the last read ended with. */
		unsigned t = tail_of[fd];
		for (ssize_t i = 0; i < n; i++) {
			char want = "\r\n\r\n"[t];
			t = b[i] == want ? t + 1 : b[i] == '\r' ? 1 : 0;
			if (t == 4) {
				if (send(fd, answer, ANSWER, MSG_NOSIGNAL) != (ssize_t)ANSWER) {
					close(fd);
					return;
				}
				t = 0;
			}
		}
		tail_of[fd] = (unsigned char)t;
	}
	if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
		close(fd); /* closing removes it from the epoll set */
}

static int serve(const char *ip, const char *port)
{
	raise_fd_limit();
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	tail_of = calloc(rl.rlim_cur, 1);
	struct sockaddr_in a = addr(ip, port);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	int ep = epoll_create1(0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!tail_of || ep < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 4096) < 0) {
		perror("serve");
		return 1;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	printf("ready\n");
	fflush(stdout);
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd != l) {
				serve_ready(fd);
				continue;
			}
			int c;
			while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				if ((rlim_t)c >= rl.rlim_cur) {
					close(c);
					continue;
				}
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				tail_of[c] = 0;
				struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
			}
		}
	}
}

/* ---- client ---------------------------------------------------------------- */

struct conn {
	int fd;
	size_t got;	/* bytes of the current answer */
	double sent;	/* when the current request went */
	double last;	/* when its last answer came (or the start) */
	double max_gap; /* the longest wait between two answers */
};

static int by_value(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static int load(const char *ip, const char *port, int c, double seconds)
{
	raise_fd_limit();
	struct sockaddr_in a = addr(ip, port);
	struct conn *cs = calloc((size_t)c, sizeof(*cs));
	size_t cap = 1 << 22, nlat = 0;
	float *lat = malloc(cap * sizeof(*lat));
	int ep = epoll_create1(0), one = 1;
	if (!cs || !lat || ep < 0)
		return 1;
	for (int i = 0; i < c; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			fprintf(stderr, "conc: connection %d of %d: %s\n", i, c, strerror(errno));
			return 1;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		cs[i].fd = fd;
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
	double t0 = now();
	for (int i = 0; i < c; i++) {
		cs[i].sent = cs[i].last = t0;
		if (send(cs[i].fd, get, sizeof(get) - 1, MSG_NOSIGNAL) !=
		    (ssize_t)(sizeof(get) - 1))
			return 1;
	}
	struct epoll_event evs[256];
	char b[4096];
	double t = t0;
	while (t - t0 < seconds) {
		int n = epoll_wait(ep, evs, 256, 100);
		t = now();
		for (int k = 0; k < n; k++) {
			struct conn *x = &cs[evs[k].data.u32];
			ssize_t r = recv(x->fd, b, sizeof(b), MSG_DONTWAIT);
			if (r <= 0) {
				if (r < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				fprintf(stderr, "conc: a connection ended (%s)\n",
					r ? strerror(errno) : "closed");
				return 1;
			}
			x->got += (size_t)r;
			if (x->got < ANSWER)
				continue;
			x->got = 0;
			if (nlat < cap)
				lat[nlat++] = (float)((t - x->sent) * 1e6);
			if (t - x->last > x->max_gap)
				x->max_gap = t - x->last;
			x->last = x->sent = t;
			if (send(x->fd, get, sizeof(get) - 1, MSG_NOSIGNAL) !=
			    (ssize_t)(sizeof(get) - 1))
				return 1;
		}
	}
	double gap = 0;
	for (int i = 0; i < c; i++) {
		/* A connection still waiting at the end waited that long too. */
		double g = t - cs[i].last > cs[i].max_gap ? t - cs[i].last : cs[i].max_gap;
		gap = g > gap ? g : gap;
	}
	qsort(lat, nlat, sizeof(*lat), by_value);
	printf("%zu %.3f %.1f %.1f %.1f\n", nlat, t - t0, nlat ? lat[nlat / 2] : 0.0,
	       nlat ? lat[(size_t)((double)(nlat - 1) * 0.99)] : 0.0, gap * 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && strcmp(argv[1], "serve") == 0)
		return serve(argv[2], argv[3]);
	if (argc >= 6 && strcmp(argv[1], "load") == 0)
		return load(argv[2], argv[3], atoi(argv[4]), atof(argv[5]));
	fprintf(stderr, "usage: see the comment at the top of conc.c\n");
	return 2;
}
