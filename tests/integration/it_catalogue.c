/* it_catalogue.c - the fault catalogue as a real process under the shim
 * (FAULTNET_CONFIG=tests/integration/catalogue.conf): each connect-time and
 * stream action against a blocking, a poll and an epoll client, the
 * conditions, seed reproducibility, UDP delay and drop probability, and
 * sha256 integrity of 64 MiB each way through latency, bandwidth and drip.
 * Echo servers listen on every faulted address, so a rule that failed to
 * apply would show as a connection that works. `--child MODE` re-executes
 * the program for tests that need a fresh process. */
#include <CUnit/Basic.h>
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

/* ---- connect-time actions ---------------------------------------------- */

static void test_refuse(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		long ms;
		int err = cl_connect(&c, "127.72.0.1", m, &ms);
		if (err != ECONNREFUSED)
			fprintf(stderr, "refuse/%s: %s\n", mode_name[m], strerror(err));
		CU_ASSERT_EQUAL(err, ECONNREFUSED);
		CU_ASSERT(ms < 1000);
		cl_close(&c);
	}
}

static void test_unreachable(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		long ms;
		char buf[64];
		CU_ASSERT_EQUAL(cl_connect(&c, "127.72.0.2", m, &ms), EHOSTUNREACH);
		CU_ASSERT(ms < 1000);
		/* As with no route: the socket is still unconnected. */
		CU_ASSERT_STRING_EQUAL(peer_of(c.fd, buf, sizeof(buf)), "E107");
		cl_close(&c);
		CU_ASSERT_EQUAL(cl_connect(&c, "127.72.0.3", m, &ms), ENETUNREACH);
		cl_close(&c);
	}
}

static void test_reset(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		char b[16];
		int err = cl_connect(&c, "127.72.0.4", m, NULL);
		CU_ASSERT(err == 0 || err == ECONNRESET);
		if (err == 0) {
			/* The reset shows on the write or, if it arrives after
			 * it, on the read; as on a real network. */
			bool wrote = cl_write(&c, "x", 1);
			int werr = errno;
			ssize_t n = wrote ? cl_read(&c, b, sizeof(b), 3000) : -1;
			CU_ASSERT(wrote ? n == -1 && errno == ECONNRESET
					: werr == ECONNRESET || werr == EPIPE);
		}
		cl_close(&c);
	}
}

static void test_delay(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		char buf[64];
		long t0 = now_ms();
		c.m = m;
		c.fd = tcp_socket("127.72.0.5", m != M_BLOCK);
		c.ep = -1;
		if (m == M_EPOLL) {
			c.ep = epoll_create1(EPOLL_CLOEXEC);
			struct epoll_event e = {.events = EPOLLOUT};
			epoll_ctl(c.ep, EPOLL_CTL_ADD, c.fd, &e);
		}
		int r = connect_to(c.fd, "127.72.0.5", PORT);
		if (m != M_BLOCK) {
			CU_ASSERT(r == -1 && errno == EINPROGRESS);
			/* Not writable, and no peer yet, before the delay. */
			CU_ASSERT_EQUAL(cl_wait(&c, POLLOUT, 100), 1);
			CU_ASSERT_STRING_EQUAL(peer_of(c.fd, buf, sizeof(buf)), "E107");
			CU_ASSERT_EQUAL(cl_wait(&c, POLLOUT, 5000), 0);
			CU_ASSERT_EQUAL(so_error(c.fd), 0);
		} else {
			CU_ASSERT_EQUAL(r, 0);
		}
		long ms = now_ms() - t0;
		CU_ASSERT(ms >= 280 && ms < 3000);
		CU_ASSERT_STRING_EQUAL(peer_of(c.fd, buf, sizeof(buf)), "127.72.0.5:7100/16");
		int end;
		CU_ASSERT(cl_write(&c, "hello", 5));
		CU_ASSERT_EQUAL(cl_read_all(&c, buf, 5, 3000, &end, NULL), 5);
		CU_ASSERT_NSTRING_EQUAL(buf, "hello", 5);
		cl_close(&c);
	}
}

/* ---- stream actions ----------------------------------------------------- */

static void test_latency(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		long ms;
		char out[100], in[100];
		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.6", m, &ms), 0);
		CU_ASSERT(ms < 1000);
		for (int i = 0; i < 3; i++) {
			pattern(out, sizeof(out), (unsigned)i);
			long t0 = now_ms();
			int end;
			CU_ASSERT(cl_write(&c, out, sizeof(out)));
			CU_ASSERT_EQUAL(cl_read_all(&c, in, sizeof(in), 3000, &end, NULL),
					sizeof(in));
			long rtt = now_ms() - t0;
			CU_ASSERT(rtt >= 95 && rtt < 1500); /* 50 ms each way */
			CU_ASSERT(memcmp(in, out, sizeof(in)) == 0);
		}
		cl_close(&c);
	}
}

static void test_bandwidth(void)
{
	static char out[131072], in[131072];
	pattern(out, sizeof(out), 3);
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		int end;
		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.7", m, NULL), 0);
		long t0 = now_ms();
		CU_ASSERT(cl_write(&c, out, sizeof(out)));
		CU_ASSERT_EQUAL(cl_read_all(&c, in, sizeof(in), 5000, &end, NULL), sizeof(in));
		long ms = now_ms() - t0; /* 128 KiB at 256 KiB/s: 500 ms */
		CU_ASSERT(ms >= 350 && ms < 5000);
		CU_ASSERT(memcmp(in, out, sizeof(in)) == 0);
		cl_close(&c);
	}
}

static void test_drip(void)
{
	char out[100], in[100];
	pattern(out, sizeof(out), 5);
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		int end;
		size_t maxread;
		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.8", m, NULL), 0);
		long t0 = now_ms();
		CU_ASSERT(cl_write(&c, out, sizeof(out)));
		CU_ASSERT_EQUAL(cl_read_all(&c, in, sizeof(in), 3000, &end, &maxread), sizeof(in));
		long ms = now_ms() - t0; /* 10 bytes every 50 ms: 450 ms at least */
		CU_ASSERT(ms >= 400 && ms < 5000);
		CU_ASSERT(maxread <= 10);
		CU_ASSERT(memcmp(in, out, sizeof(in)) == 0);
		cl_close(&c);
	}
}

/* Sends 5000 bytes to an echo through an after_bytes rule; returns what
 * came back before the rule acted and how the stream ended. */
static size_t after_bytes(const char *ip, enum mode m, int *end, char *in)
{
	char out[5000];
	struct cl c;
	pattern(out, sizeof(out), 9);
	CU_ASSERT_EQUAL(cl_connect(&c, ip, m, NULL), 0);
	CU_ASSERT(cl_write(&c, out, sizeof(out)));
	size_t got = cl_read_all(&c, in, sizeof(out), 600, end, NULL);
	CU_ASSERT(memcmp(in, out, got) == 0);
	cl_close(&c);
	return got;
}

static void test_after_bytes(void)
{
	char in[5000];
	for (int m = 0; m < M_MODES; m++) {
		int end;
		CU_ASSERT_EQUAL(after_bytes("127.72.0.9", m, &end, in), 1000);
		CU_ASSERT_EQUAL(end, EAGAIN); /* stall: no more bytes, no FIN */
		CU_ASSERT_EQUAL(after_bytes("127.72.0.10", m, &end, in), 1000);
		CU_ASSERT_EQUAL(end, ECONNRESET);
		CU_ASSERT_EQUAL(after_bytes("127.72.0.11", m, &end, in), 1000);
		CU_ASSERT_EQUAL(end, 0); /* close: a clean EOF */
		/* Up: the peer gets 1000 bytes, so 1000 come back. */
		CU_ASSERT_EQUAL(after_bytes("127.72.0.20", m, &end, in), 1000);
		CU_ASSERT_EQUAL(end, EAGAIN);
	}
}

static void test_after_ms(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		char b[10];
		int end;
		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.12", m, NULL), 0);
		CU_ASSERT(cl_write(&c, "0123456789", 10));
		CU_ASSERT_EQUAL(cl_read_all(&c, b, 10, 2000, &end, NULL), 10);
		usleep(400 * 1000);
		CU_ASSERT(cl_write(&c, "0123456789", 10));
		CU_ASSERT_EQUAL(cl_read_all(&c, b, 10, 500, &end, NULL), 0);
		CU_ASSERT_EQUAL(end, EAGAIN);
		cl_close(&c);

		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.13", m, NULL), 0);
		long t0 = now_ms();
		CU_ASSERT(cl_write(&c, "0123456789", 10));
		CU_ASSERT_EQUAL(cl_read_all(&c, b, 10, 2000, &end, NULL), 10);
		CU_ASSERT_EQUAL(cl_read(&c, b, sizeof(b), 3000), -1);
		CU_ASSERT_EQUAL(errno, ECONNRESET);
		long ms = now_ms() - t0;
		CU_ASSERT(ms >= 250 && ms < 3000);
		cl_close(&c);
	}
}

/* A blackhole 300 ms into an open connection: the echo stops both ways
 * with no FIN, and an app with TCP_USER_TIMEOUT set gets ETIMEDOUT once its
 * last bytes have gone unacknowledged that long, as on a route that died. */
static void test_blackhole_open(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		char b[10];
		int end;
		CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.21", m, NULL), 0);
		set_int(c.fd, IPPROTO_TCP, TCP_USER_TIMEOUT, 1000);
		CU_ASSERT(cl_write(&c, "0123456789", 10));
		CU_ASSERT_EQUAL(cl_read_all(&c, b, 10, 2000, &end, NULL), 10);
		usleep(400 * 1000);
		CU_ASSERT(cl_write(&c, "0123456789", 10));
		CU_ASSERT_EQUAL(cl_read_all(&c, b, 10, 500, &end, NULL), 0);
		CU_ASSERT_EQUAL(end, EAGAIN); /* nothing, and no FIN */
		/* Those 10 bytes were never acknowledged: TCP_USER_TIMEOUT
		 * (1 s) ends the connection, with no more sending. */
		long t0 = now_ms();
		int err = 0;
		while (!err && now_ms() - t0 < 10000) {
			struct pollfd p = {.fd = c.fd, .events = POLLIN};
			poll(&p, 1, 200);
			if (p.revents & (POLLERR | POLLHUP))
				err = so_error(c.fd);
		}
		long ms = now_ms() - t0;
		CU_ASSERT(ms >= 300 && ms < 8000);
		if (err != ETIMEDOUT)
			fprintf(stderr, "blackhole/%s: %s after %ld ms\n", mode_name[m],
				strerror(err), ms);
		CU_ASSERT_EQUAL(err, ETIMEDOUT);
		cl_close(&c);
	}
}

/* ---- conditions --------------------------------------------------------- */

/* n connects to ip: R refused, X reset, P passed. */
static void outcomes(const char *ip, int n, char *out)
{
	for (int i = 0; i < n; i++) {
		struct cl c;
		char b[4];
		int err = cl_connect(&c, ip, M_BLOCK, NULL);
		if (err == ECONNREFUSED)
			out[i] = 'R';
		else if (err == ECONNRESET)
			out[i] = 'X';
		else if (err)
			out[i] = '?';
		else if (!cl_write(&c, "x", 1)) {
			out[i] = errno == ECONNRESET || errno == EPIPE ? 'X' : '?';
		} else {
			ssize_t r = cl_read(&c, b, 1, 2000);
			out[i] = r == 1 ? 'P' : r < 0 && errno == ECONNRESET ? 'X' : '?';
		}
		cl_close(&c);
	}
	out[n] = '\0';
}

static void test_counting_conditions(void)
{
	char got[16];
	outcomes("127.72.0.14", 5, got);
	CU_ASSERT_STRING_EQUAL(got, "RRPPP"); /* first = 2 */
	outcomes("127.72.0.15", 6, got);
	CU_ASSERT_STRING_EQUAL(got, "PPRPPR"); /* every = 3 */
	outcomes("127.72.0.16", 5, got);
	CU_ASSERT_STRING_EQUAL(got, "PPRRR"); /* after = 2 */
	outcomes("127.72.0.19", 4, got);
	CU_ASSERT_STRING_EQUAL(got, "XRXR"); /* declined: the next rule applies */
}

/* Runs this program as `--child mode` with env added; its stdout in out. */
static int run_child(const char *mode, const char *env, char *out, size_t n)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		if (env)
			putenv((char *)env);
		execl(self_path, "it_catalogue", "--child", mode, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t r;
	while (got + 1 < n && (r = read(p[0], out + got, n - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = '\0';
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_seed(void)
{
	char a[64], b[64], c[64];
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=7", a, sizeof(a)), 0);
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=7", b, sizeof(b)), 0);
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=8", c, sizeof(c)), 0);
	CU_ASSERT_EQUAL(strlen(a), 40);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_STRING_NOT_EQUAL(a, c);
	CU_ASSERT(strchr(a, 'R') && strchr(a, 'P'));
	char bad[64];
	CU_ASSERT_EQUAL(run_child("coin", "FAULTNET_SEED=x", bad, sizeof(bad)), 78);
}

static void test_window(void)
{
	/* A fresh process: the window counts from when the rule was loaded. */
	char got[64];
	CU_ASSERT_EQUAL(run_child("window", NULL, got, sizeof(got)), 0);
	/* start_ms 400, for_ms 400, one connect every 100 ms for 1.2 s. */
	const char *r1 = strchr(got, 'R'), *r2 = strrchr(got, 'R');
	CU_ASSERT(got[0] == 'P' && r1 && r2 && got[strlen(got) - 1] == 'P');
	if (r1 && r2) {
		CU_ASSERT(strspn(r1, "R") == (size_t)(r2 - r1) + 1); /* one run */
		CU_ASSERT(r2 - r1 + 1 >= 2 && r2 - r1 + 1 <= 6);
	}
}

/* ---- UDP ---------------------------------------------------------------- */

static void test_udp_delay(void)
{
	int rx = bound_socket(SOCK_DGRAM, "127.72.1.1", UDP_PORT);
	int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage to;
	socklen_t tolen = mkaddr(&to, "127.72.1.1", UDP_PORT);
	long t0 = now_ms();
	CU_ASSERT_EQUAL(sendto(tx, "later", 5, 0, (struct sockaddr *)&to, tolen), 5);
	struct iovec iov = {.iov_base = "msg", .iov_len = 3};
	struct msghdr mh = {
	    .msg_name = &to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
	CU_ASSERT_EQUAL(sendmsg(tx, &mh, 0), 3);
	CU_ASSERT(now_ms() - t0 < 100); /* the send itself does not wait */
	struct pollfd p = {.fd = rx, .events = POLLIN};
	CU_ASSERT_EQUAL(poll(&p, 1, 150), 0); /* nothing yet */
	char buf[16];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	set_timeo(rx, SO_RCVTIMEO, 3000);
	CU_ASSERT_EQUAL(recvfrom(rx, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen), 5);
	long ms = now_ms() - t0;
	CU_ASSERT(ms >= 280 && ms < 3000);
	CU_ASSERT_NSTRING_EQUAL(buf, "later", 5);
	CU_ASSERT_EQUAL(ntohs(from.sin_port), local_port(tx)); /* from the app's socket */
	CU_ASSERT_EQUAL(recv(rx, buf, sizeof(buf), 0), 3);
	close(rx);
	close(tx);
}

/* Datagrams from a delayed peer reach the app late, blocking or
 * non-blocking, still from the peer's own address. */
static void test_udp_delay_in(void)
{
	int rx = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	int peer = bound_socket(SOCK_DGRAM, "127.72.1.1", UDP_PORT + 1);
	struct sockaddr_storage me;
	socklen_t melen = mkaddr(&me, "127.0.0.1", local_port(rx));
	for (int blocking = 1; blocking >= 0; blocking--) {
		long t0 = now_ms();
		CU_ASSERT_EQUAL(sendto(peer, "in", 2, 0, (struct sockaddr *)&me, melen), 2);
		char buf[16];
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n = -1;
		if (blocking) {
			set_timeo(rx, SO_RCVTIMEO, 3000);
			n = recvfrom(rx, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		} else {
			/* poll may wake when the datagram first lands; the shim
			 * takes it off, and it lands again after the delay. */
			while (n < 0 && now_ms() - t0 < 3000) {
				struct pollfd p = {.fd = rx, .events = POLLIN};
				poll(&p, 1, 3000);
				n = recvfrom(rx, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &flen);
			}
		}
		long ms = now_ms() - t0;
		CU_ASSERT_EQUAL(n, 2);
		CU_ASSERT(ms >= 280 && ms < 3000);
		char ip[32];
		inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
		CU_ASSERT_STRING_EQUAL(ip, "127.72.1.1");
		CU_ASSERT_EQUAL(ntohs(from.sin_port), UDP_PORT + 1);
	}
	close(rx);
	close(peer);
}

static void test_udp_probability(void)
{
	int rx = bound_socket(SOCK_DGRAM, "127.72.1.2", UDP_PORT);
	int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage to;
	socklen_t tolen = mkaddr(&to, "127.72.1.2", UDP_PORT);
	for (int i = 0; i < 200; i++)
		CU_ASSERT_EQUAL(sendto(tx, "d", 1, 0, (struct sockaddr *)&to, tolen), 1);
	int got = 0;
	char b[4];
	while (recv(rx, b, sizeof(b), MSG_DONTWAIT) == 1)
		got++;
	CU_ASSERT(got >= 60 && got <= 140); /* each one decided on its own */
	close(rx);
	close(tx);
}

/* ---- integrity and process life ---------------------------------------- */

struct sender {
	int fd;
	uint8_t digest[32];
};

static void *send_stream(void *arg)
{
	struct sender *s = arg;
	static __thread char buf[65536];
	struct sha256 h;
	sha256_init(&h);
	uint64_t x = 88172645463325252ull;
	for (size_t sent = 0; sent < BIG; sent += sizeof(buf)) {
		for (size_t i = 0; i < sizeof(buf); i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		sha256_update(&h, buf, sizeof(buf));
		for (size_t off = 0; off < sizeof(buf);) {
			ssize_t w = send(s->fd, buf + off, sizeof(buf) - off, MSG_NOSIGNAL);
			if (w <= 0)
				return NULL;
			off += (size_t)w;
		}
	}
	sha256_final(&h, s->digest);
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

/* The count of connections the echo server has seen end. */
static int server_ended(void)
{
	pthread_mutex_lock(&seen_lock);
	int n = seen_count;
	pthread_mutex_unlock(&seen_lock);
	return n;
}

/* Waits (2 s at most) for the server to finish a connection after the
 * before-th. */
static void server_done(int before)
{
	for (int i = 0; i < 200 && server_ended() <= before; i++)
		usleep(10000);
}

/* 64 MiB up to the echo server and the same 64 MiB back down. */
static void integrity(const char *ip)
{
	struct sender s = {.fd = tcp_socket(ip, false)};
	CU_ASSERT_EQUAL_FATAL(connect_to(s.fd, ip, PORT), 0);
	int before = server_ended();
	pthread_t t;
	pthread_create(&t, NULL, send_stream, &s);
	static char buf[65536];
	struct sha256 h;
	sha256_init(&h);
	uint64_t total = 0;
	ssize_t n;
	set_timeo(s.fd, SO_RCVTIMEO, 30000);
	while ((n = recv(s.fd, buf, sizeof(buf), 0)) > 0) {
		sha256_update(&h, buf, (size_t)n);
		total += (uint64_t)n;
	}
	pthread_join(t, NULL);
	uint8_t down[32];
	sha256_final(&h, down);
	server_done(before);
	pthread_mutex_lock(&seen_lock);
	CU_ASSERT_EQUAL(seen_bytes, BIG);
	CU_ASSERT(memcmp(seen_digest, s.digest, 32) == 0); /* up */
	pthread_mutex_unlock(&seen_lock);
	CU_ASSERT_EQUAL(total, BIG);
	CU_ASSERT(memcmp(down, s.digest, 32) == 0); /* down */
	close(s.fd);
}

static void test_integrity_latency(void)
{
	integrity("127.72.2.1");
}

static void test_integrity_bandwidth(void)
{
	integrity("127.72.2.2");
}

static void test_integrity_drip(void)
{
	integrity("127.72.2.3");
}

/* The server sees the relay's socket for a relayed connection, the app's
 * own for an unmatched one: proof that nothing else is relayed. */
static uint16_t server_saw(const char *ip, uint16_t *mine)
{
	struct cl c;
	int end;
	char b[1];
	int before = server_ended();
	CU_ASSERT_EQUAL(cl_connect(&c, ip, M_BLOCK, NULL), 0);
	*mine = local_port(c.fd);
	cl_write(&c, "x", 1);
	cl_read_all(&c, b, 1, 2000, &end, NULL);
	cl_close(&c);
	server_done(before);
	pthread_mutex_lock(&seen_lock);
	uint16_t port = seen_peer_port;
	pthread_mutex_unlock(&seen_lock);
	return port;
}

static void test_only_matched_relayed(void)
{
	uint16_t mine;
	CU_ASSERT_EQUAL(server_saw("127.72.3.1", &mine), mine);
	CU_ASSERT_NOT_EQUAL(server_saw("127.72.0.6", &mine), mine);
}

static void test_fork_keeps_relayed(void)
{
	struct cl c;
	int end;
	char b[8];
	CU_ASSERT_EQUAL_FATAL(cl_connect(&c, "127.72.0.6", M_BLOCK, NULL), 0);
	pid_t pid = fork();
	if (pid == 0) {
		bool ok = cl_write(&c, "child", 5) && cl_read_all(&c, b, 5, 3000, &end, NULL) == 5;
		_exit(ok && memcmp(b, "child", 5) == 0 ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The parent's relay still carries it after the child is gone. */
	CU_ASSERT(cl_write(&c, "parent", 6));
	CU_ASSERT_EQUAL(cl_read_all(&c, b, 6, 3000, &end, NULL), 6);
	CU_ASSERT_NSTRING_EQUAL(b, "parent", 6);
	cl_close(&c);
}

static void *thread_echo(void *arg)
{
	(void)arg;
	struct cl c;
	int end;
	char out[512], in[512];
	pattern(out, sizeof(out), (unsigned)(uintptr_t)&c);
	if (cl_connect(&c, "127.72.0.6", M_BLOCK, NULL))
		return (void *)1;
	bool ok = cl_write(&c, out, sizeof(out)) &&
		  cl_read_all(&c, in, sizeof(in), 3000, &end, NULL) == sizeof(in) &&
		  memcmp(in, out, sizeof(in)) == 0;
	cl_close(&c);
	return ok ? NULL : (void *)1;
}

static void test_threads(void)
{
	pthread_t t[16];
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, thread_echo, NULL);
	for (int i = 0; i < 16; i++) {
		void *r;
		pthread_join(t[i], &r);
		CU_ASSERT_PTR_NULL(r);
	}
}

static int child_main(const char *mode)
{
	char got[64];
	if (strcmp(mode, "coin") == 0) {
		outcomes("127.72.0.17", 40, got);
	} else if (strcmp(mode, "window") == 0) {
		long t0 = now_ms();
		int i = 0;
		for (; i < 13; i++) {
			while (now_ms() - t0 < i * 100)
				usleep(2000);
			outcomes("127.72.0.18", 1, got + i);
		}
		got[i] = '\0';
	} else {
		return 98;
	}
	printf("%s", got);
	return 0;
}

int main(int argc, char **argv)
{
	remember_self(argv[0]);
	if (getenv("IT_QUICK"))
		BIG = 4u << 20;
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	if (!getenv("FAULTNET_CONFIG")) {
		fprintf(stderr, "it_catalogue: run me under the shim (see tests/run.sh)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("fault catalogue under the shim", setup, NULL);
	CU_add_test(s, "refuse: ECONNREFUSED at once (blocking, poll, epoll)", test_refuse);
	CU_add_test(s, "unreachable: EHOSTUNREACH, ENETUNREACH", test_unreachable);
	CU_add_test(s, "reset: ECONNRESET right after the handshake", test_reset);
	CU_add_test(s, "delay: writable and connected only after delay_ms", test_delay);
	CU_add_test(s, "latency: 50 ms each way", test_latency);
	CU_add_test(s, "bandwidth: 256 KiB/s down", test_bandwidth);
	CU_add_test(s, "drip: 10 bytes every 50 ms", test_drip);
	CU_add_test(s, "stall, reset, close after 1000 bytes", test_after_bytes);
	CU_add_test(s, "stall and reset after 300 ms", test_after_ms);
	CU_add_test(s, "blackhole on an open connection; TCP_USER_TIMEOUT fires",
		    test_blackhole_open);
	CU_add_test(s, "first, every, after; a declined rule passes on", test_counting_conditions);
	CU_add_test(s, "probability: the same FAULTNET_SEED, the same decisions", test_seed);
	CU_add_test(s, "start_ms and for_ms", test_window);
	CU_add_test(s, "UDP delay: sendto and sendmsg", test_udp_delay);
	CU_add_test(s, "UDP delay: recvfrom, blocking and with poll", test_udp_delay_in);
	CU_add_test(s, "UDP drop with probability 0.5", test_udp_probability);
	CU_add_test(s, "sha256 of 64 MiB each way through latency", test_integrity_latency);
	CU_add_test(s, "sha256 of 64 MiB each way through bandwidth", test_integrity_bandwidth);
	CU_add_test(s, "sha256 of 64 MiB each way through drip", test_integrity_drip);
	CU_add_test(s, "connections no rule matches are never relayed", test_only_matched_relayed);
	CU_add_test(s, "a forked child uses a relayed connection", test_fork_keeps_relayed);
	CU_add_test(s, "16 threads on relayed connections", test_threads);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	/* IT_ONLY=name runs one test, for debugging. */
	const char *only = getenv("IT_ONLY");
	CU_pTest one = only ? CU_get_test(s, only) : NULL;
	if (one)
		CU_basic_run_test(s, one);
	else
		CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
