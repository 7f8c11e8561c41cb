/* it_catalogue_connect.c - the connect-time actions (refuse, unreachable, reset at accept,
 * delay) against blocking, poll and epoll clients.
 * Runs under the shim with FAULTNET_CONFIG=tests/faults/catalogue.conf. */
#include "catalogue.h"

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

/* As with a real server that accepts and then resets: the connect
 * succeeds, and the reset meets the app's next write or read. */
static void test_reset(void)
{
	for (int m = 0; m < M_MODES; m++)
		for (int i = 0; i < 10; i++) {
			struct cl c;
			char b[16];
			int err = cl_connect(&c, "127.72.0.4", m, NULL);
			CU_ASSERT_EQUAL(err, 0);
			if (err == 0) {
				/* The reset shows on the write or, if it arrives
				 * after it, on the read; as on a real network. */
				bool wrote = cl_write(&c, "x", 1);
				int werr = errno;
				ssize_t n = wrote ? cl_read(&c, b, sizeof(b), 3000) : -1;
				CU_ASSERT(wrote ? n == -1 && errno == ECONNRESET
						: werr == ECONNRESET || werr == EPIPE);
			}
			cl_close(&c);
		}
}

/* A client that waits for the server to speak first (ssh, SMTP, MySQL)
 * meets the reset on its read. */
static void test_reset_reader(void)
{
	for (int m = 0; m < M_MODES; m++) {
		struct cl c;
		char b[16];
		CU_ASSERT_EQUAL(cl_connect(&c, "127.72.0.4", m, NULL), 0);
		long t0 = now_ms();
		ssize_t n = cl_read(&c, b, sizeof(b), 3000);
		CU_ASSERT(n == -1 && errno == ECONNRESET);
		CU_ASSERT(now_ms() - t0 < 1000);
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

/* ---- a relayed connect meets what the real one meets ------------------- */

/* A connect to ip:port in mode m with the app's TCP_SYNCNT (0: the
 * system's); the error it ends with (0 connected), after *ms. */
static int connect_port(const char *ip, uint16_t port, enum mode m, int syncnt, long *ms)
{
	struct cl c = {.m = m, .ep = -1};
	c.fd = tcp_socket(ip, m != M_BLOCK);
	if (syncnt)
		set_int(c.fd, IPPROTO_TCP, TCP_SYNCNT, syncnt);
	if (m == M_EPOLL) {
		c.ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event e = {.events = EPOLLOUT};
		epoll_ctl(c.ep, EPOLL_CTL_ADD, c.fd, &e);
	}
	long t0 = now_ms();
	int r = connect_to(c.fd, ip, port), err = r == 0 ? 0 : errno;
	if (r < 0 && err == EINPROGRESS) {
		/* What the kernel reports: POLLOUT (with POLLERR on failure),
		 * then SO_ERROR. */
		err = cl_wait(&c, POLLOUT, 15000) ? -1 : so_error(c.fd);
	}
	*ms = now_ms() - t0;
	cl_close(&c);
	return err;
}

/* The same connect directly (127.72.9.9, no rule) and through the latency
 * rule's relay (127.72.0.6): same error, about the same time. */
static void differential(uint16_t port, int syncnt, int want, long min_ms, long max_ms)
{
	for (int m = 0; m < M_MODES; m++) {
		long dms, rms;
		int direct = connect_port("127.72.9.9", port, m, syncnt, &dms);
		int relayed = connect_port("127.72.0.6", port, m, syncnt, &rms);
		if (direct != want || relayed != want || rms < min_ms || rms > max_ms)
			fprintf(stderr, "port %u %s: direct %s in %ld ms, relayed %s in %ld ms\n",
				port, mode_name[m], strerror(direct), dms, strerror(relayed), rms);
		CU_ASSERT_EQUAL(direct, want);
		CU_ASSERT_EQUAL(relayed, want);
		CU_ASSERT(dms >= min_ms && dms <= max_ms);
		CU_ASSERT(rms >= min_ms && rms <= max_ms);
	}
}

static void test_relayed_refused(void)
{
	/* Nothing listens on port 7199 of either address. */
	differential(7199, 0, ECONNREFUSED, 0, 500);
	/* curl tells "could not connect" (7) from "reset after it" (56).
	 * Normal build only: curl with the sanitizer build's libasan preloaded
	 * (which that build's shim needs) hangs in its own setlocale before it
	 * connects, shim or not; the normal build runs this same check. */
	const char *pre = getenv("LD_PRELOAD");
	if (pre && (strstr(pre, "libasan") || strstr(pre, "libtsan"))) {
		printf("\n  skip - curl's exit 7 under a sanitizer build: curl hangs in its own "
		       "setlocale with libasan preloaded (the normal build checks it)\n");
		const char *counts = getenv("FN_COUNTS");
		FILE *f = counts ? fopen(counts, "a") : NULL;
		if (f) {
			fputs("skip\n", f);
			fclose(f);
		}
		return;
	}
	CU_ASSERT_EQUAL_FATAL(system("command -v curl >/dev/null"), 0);
	int st = system("curl -s -o /dev/null -m 5 http://127.72.0.6:7199/");
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* A listener of backlog 0 with one connection queued drops every SYN. */
static int full_listener(const char *ip, uint16_t port, int *parked)
{
	int ls = bound_socket(SOCK_STREAM, ip, port);
	listen(ls, 0);
	*parked = tcp_socket(ip, false);
	CU_ASSERT_EQUAL(connect_to(*parked, ip, port), 0);
	return ls;
}

static void test_relayed_timeout(void)
{
	int p1, p2;
	int l1 = full_listener("127.72.9.9", 7198, &p1);
	int l2 = full_listener("127.72.0.6", 7198, &p2);
	/* TCP_SYNCNT 1: the SYN and one retry, given up about 3 s later. */
	differential(7198, 1, ETIMEDOUT, 2500, 6000);
	close(p1);
	close(p2);
	close(l1);
	close(l2);
}

int main(int argc, char **argv)
{
	static const struct it_test tests[] = {
	    {"refuse: ECONNREFUSED at once (blocking, poll, epoll)", test_refuse},
	    {"unreachable: EHOSTUNREACH, ENETUNREACH", test_unreachable},
	    {"reset: the connect succeeds, the next write or read is reset", test_reset},
	    {"reset: a client that reads first is reset on its read", test_reset_reader},
	    {"delay: writable and connected only after delay_ms", test_delay},
	    {"relayed connect to a dead port: ECONNREFUSED as direct", test_relayed_refused},
	    {"relayed connect to a blackholed peer: ETIMEDOUT as direct", test_relayed_timeout},
	    {NULL, NULL},
	};
	return catalogue_main(argc, argv, "connect-time faults", tests, NULL);
}
