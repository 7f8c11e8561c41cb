/* it_catalogue_connect.c - the connect-time actions (refuse, unreachable, reset at accept,
 * delay) against blocking, poll and epoll clients.
 * Runs under the shim with FAULTNET_CONFIG=tests/integration/catalogue.conf. */
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

int main(int argc, char **argv)
{
	static const struct it_test tests[] = {
	    {"refuse: ECONNREFUSED at once (blocking, poll, epoll)", test_refuse},
	    {"unreachable: EHOSTUNREACH, ENETUNREACH", test_unreachable},
	    {"reset: the connect succeeds, the next write or read is reset", test_reset},
	    {"reset: a client that reads first is reset on its read", test_reset_reader},
	    {"delay: writable and connected only after delay_ms", test_delay},
	    {NULL, NULL},
	};
	return catalogue_main(argc, argv, "connect-time faults", tests, NULL);
}
