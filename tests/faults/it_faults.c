/* it_faults.c - integration tests run as a real process under the shim
 * (LD_PRELOAD=libfaultnet.so FAULTNET_CONFIG=tests/faults/it.conf).
 * Each test asserts what the app sees: errno, readiness, peer names and
 * timing, with generous tolerances. `it_faults --child MODE` is the same
 * program re-executed to test exec and zones. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "../cunit_run.h"
#include "testutil.h"

#define BH_IP "127.66.0.1"
#define BH_PORT 8443
#define STALL_IP "127.67.0.1"
#define STALL_PORT 9000

int fcntl64(int fd, int cmd, ...);

static int listeners[8];

/* Real servers at the blackholed addresses: if the shim let a connect
 * through, it would succeed, and the tests would fail. */
static int setup(void)
{
	listeners[0] = bound_socket(SOCK_STREAM, BH_IP, BH_PORT);
	listeners[1] = bound_socket(SOCK_STREAM, BH_IP, 9001);
	listeners[2] = bound_socket(SOCK_STREAM, "::1", BH_PORT);
	listeners[3] = bound_socket(SOCK_STREAM, "127.10.2.5", 7000);
	listeners[4] = bound_socket(SOCK_STREAM, "127.10.1.5", 7000);
	listeners[5] = bound_socket(SOCK_STREAM, "127.69.0.1", 8081);
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void test_blocking_blocks_until_signal(void)
{
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {.it_value = {.tv_sec = 1, .tv_usec = 500000}};
	int fd = tcp_socket(BH_IP, false);
	setitimer(ITIMER_REAL, &it, NULL);
	long t0 = now_ms();
	int r = connect_to(fd, BH_IP, BH_PORT);
	int e = errno;
	long dt = now_ms() - t0;
	CU_ASSERT_EQUAL(r, -1);
	CU_ASSERT_EQUAL(e, EINTR);
	CU_ASSERT(dt >= 1300 && dt < 6000);
	/* The handshake goes on in the kernel, as on a dead route. */
	CU_ASSERT_EQUAL(tcp_state(fd), TCP_SYN_SENT);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "E107"); /* ENOTCONN */
	close(fd);
}

static void test_blocking_syncnt(void)
{
	int fd = tcp_socket(BH_IP, false);
	set_int(fd, IPPROTO_TCP, TCP_SYNCNT, 1);
	long t0 = now_ms();
	int r = connect_to(fd, BH_IP, BH_PORT);
	int e = errno;
	long dt = now_ms() - t0;
	CU_ASSERT_EQUAL(r, -1);
	CU_ASSERT_EQUAL(e, ETIMEDOUT);
	CU_ASSERT(dt >= 2000 && dt < 10000); /* 1 s + 2 s of SYN retries */
	close(fd);
}

static void test_blocking_sndtimeo(void)
{
	int fd = tcp_socket(BH_IP, false);
	set_timeo(fd, SO_SNDTIMEO, 1000);
	long t0 = now_ms();
	int r = connect_to(fd, BH_IP, 8080);
	int e = errno;
	long dt = now_ms() - t0;
	CU_ASSERT_EQUAL(r, -1);
	CU_ASSERT_EQUAL(e, EINPROGRESS); /* what Linux reports when SO_SNDTIMEO expires */
	CU_ASSERT(dt >= 800 && dt < 5000);
	close(fd);
}

static void nonblocking_blackhole(enum waitkind k, const char *ip, uint16_t port)
{
	int fd = tcp_socket(ip, true), ep = -1;
	set_int(fd, IPPROTO_TCP, TCP_SYNCNT, 1);
	if (k == W_EPOLL_LT || k == W_EPOLL_ET) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLOUT | (k == W_EPOLL_ET ? EPOLLET : 0),
					 .data.fd = fd};
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
	long t0 = now_ms();
	CU_ASSERT_EQUAL(connect_to(fd, ip, port), -1);
	CU_ASSERT_EQUAL(errno, EINPROGRESS);
	CU_ASSERT_EQUAL(connect_to(fd, ip, port), -1);
	CU_ASSERT_EQUAL(errno, EALREADY);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "E107");
	if (wait_out(k, fd, ep, 1000) != 0)
		fprintf(stderr, "%s: writable while the handshake is pending\n", waitkind_name[k]);
	CU_ASSERT_EQUAL(wait_out(k, fd, ep, 0), 0);
	int r = wait_out(k, fd, ep, 9000);
	long dt = now_ms() - t0;
	CU_ASSERT(r & POLLOUT);
	if (k != W_SELECT && k != W_PSELECT)
		CU_ASSERT(r & POLLERR);
	CU_ASSERT_EQUAL(so_error(fd), ETIMEDOUT);
	CU_ASSERT(dt >= 2000 && dt < 10000);
	if (ep >= 0)
		close(ep);
	close(fd);
}

#define READINESS_TEST(kind)                                 \
	static void test_nb_##kind(void)                     \
	{                                                    \
		nonblocking_blackhole(kind, BH_IP, BH_PORT); \
	}
READINESS_TEST(W_POLL)
READINESS_TEST(W_PPOLL)
READINESS_TEST(W_SELECT)
READINESS_TEST(W_PSELECT)
READINESS_TEST(W_EPOLL_LT)
READINESS_TEST(W_EPOLL_ET)

static void test_ipv6_and_mapped(void)
{
	nonblocking_blackhole(W_POLL, "::ffff:" BH_IP, BH_PORT);
	nonblocking_blackhole(W_EPOLL_LT, "::1", BH_PORT);
}

static void test_stall(void)
{
	int fd = tcp_socket(STALL_IP, false);
	long t0 = now_ms();
	CU_ASSERT_EQUAL(connect_to(fd, STALL_IP, STALL_PORT), 0);
	CU_ASSERT(now_ms() - t0 < 2000);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "127.67.0.1:9000/16");
	CU_ASSERT_EQUAL(send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
	set_timeo(fd, SO_RCVTIMEO, 500);
	CU_ASSERT_EQUAL(recv(fd, buf, sizeof(buf), 0), -1);
	CU_ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
	/* Writes succeed until the buffers fill, then block. */
	fcntl(fd, F_SETFL, O_NONBLOCK);
	static char chunk[65536];
	long total = 0;
	ssize_t n;
	while ((n = send(fd, chunk, sizeof(chunk), 0)) > 0 && total < (256L << 20))
		total += n;
	CU_ASSERT_EQUAL(n, -1);
	CU_ASSERT_EQUAL(errno, EAGAIN);
	CU_ASSERT(total > 65536);
	/* Neither data nor FIN ever arrives. */
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	CU_ASSERT_EQUAL(poll(&p, 1, 500), 0);
	close(fd);
}

static void test_stall_nonblocking_and_mapped(void)
{
	int fd = tcp_socket("::ffff:" STALL_IP, true);
	int r = connect_to(fd, "::ffff:" STALL_IP, STALL_PORT);
	CU_ASSERT(r == 0 || errno == EINPROGRESS);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	CU_ASSERT_EQUAL(poll(&p, 1, 2000), 1);
	CU_ASSERT_EQUAL(p.revents, POLLOUT);
	CU_ASSERT_EQUAL(so_error(fd), 0);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "[::ffff:127.67.0.1]:9000/28");
	/* Linux reports the completed connect once, then EISCONN. */
	CU_ASSERT_EQUAL(connect_to(fd, "::ffff:" STALL_IP, STALL_PORT), 0);
	CU_ASSERT_EQUAL(connect_to(fd, "::ffff:" STALL_IP, STALL_PORT), -1);
	CU_ASSERT_EQUAL(errno, EISCONN);
	close(fd);
}

static void test_unmatched_passes(void)
{
	int fd = tcp_socket(BH_IP, false);
	CU_ASSERT_EQUAL_FATAL(connect_to(fd, BH_IP, 9001), 0);
	int a = accept(listeners[1], NULL, NULL);
	CU_ASSERT_FATAL(a >= 0);
	CU_ASSERT_EQUAL(send(fd, "ping", 4, 0), 4);
	char buf[80] = {0};
	CU_ASSERT_EQUAL(recv(a, buf, sizeof(buf), 0), 4);
	CU_ASSERT_STRING_EQUAL(buf, "ping");
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "127.66.0.1:9001/16");
	close(a);
	close(fd);
	/* The disabled rule for 127.0.0.0/8 does nothing. */
	int l = bound_socket(SOCK_STREAM, "127.0.0.1", 0);
	fd = tcp_socket("127.0.0.1", false);
	CU_ASSERT_EQUAL(connect_to(fd, "127.0.0.1", local_port(l)), 0);
	close(fd);
	close(l);
}

struct job {
	const char *ip;
	uint16_t port;
	int err;
};

static void *connect_job(void *arg)
{
	struct job *j = arg;
	int fd = tcp_socket(j->ip, false);
	set_int(fd, IPPROTO_TCP, TCP_SYNCNT, 1);
	j->err = connect_to(fd, j->ip, j->port) == 0 ? 0 : errno;
	close(fd);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[16];
	struct job jobs[16];
	for (int i = 0; i < 16; i++) {
		jobs[i] = (struct job){i % 2 ? "127.10.1.5" : BH_IP, i % 2 ? 7000 : BH_PORT, -1};
		pthread_create(&t[i], NULL, connect_job, &jobs[i]);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT_EQUAL(jobs[i].err, i % 2 ? 0 : ETIMEDOUT);
	}
	/* Drain what the passing half queued. */
	fcntl(listeners[4], F_SETFL, O_NONBLOCK);
	int a;
	while ((a = accept(listeners[4], NULL, NULL)) >= 0)
		close(a);
}

static int run_child(char *const argv[], const char *zone)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (zone)
			setenv("FAULTNET_ZONE", zone, 1);
		execv(self_path, argv);
		_exit(99);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static int blackhole_then_stall(void)
{
	struct job j = {BH_IP, BH_PORT, -1};
	connect_job(&j);
	if (j.err != ETIMEDOUT)
		return 1;
	int fd = tcp_socket(STALL_IP, false);
	char buf[80];
	if (connect_to(fd, STALL_IP, STALL_PORT) != 0 ||
	    strcmp(peer_of(fd, buf, sizeof(buf)), "127.67.0.1:9000/16") != 0)
		return 2;
	close(fd);
	return 0;
}

static void test_fork(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(blackhole_then_stall());
	int st;
	waitpid(pid, &st, 0);
	CU_ASSERT(WIFEXITED(st));
	CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
}

static void test_exec(void)
{
	/* Create every sink first: none of their fds may reach the child. */
	int fd = tcp_socket(STALL_IP, false);
	connect_to(fd, STALL_IP, STALL_PORT);
	close(fd);
	CU_ASSERT_EQUAL(run_child((char *[]){"it_faults", "--child", "no-sockets", NULL}, NULL), 0);
	CU_ASSERT_EQUAL(
	    run_child((char *[]){"it_faults", "--child", "blackhole-then-stall", NULL}, NULL), 0);
}

static void test_zones(void)
{
	/* This process is in zone 1a (the file says so). */
	for (int i = 0; i < 2; i++) {
		const char *ip = i ? "127.10.2.5" : "127.69.0.1";
		int fd = tcp_socket(ip, true);
		CU_ASSERT_EQUAL(connect_to(fd, ip, i ? 7000 : 8081), -1);
		CU_ASSERT_EQUAL(errno, EINPROGRESS);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		CU_ASSERT_EQUAL(poll(&p, 1, 1000), 0);
		close(fd);
	}
	/* to_zone: the same port in zone 1a is not cut. */
	int fd = tcp_socket("127.10.1.5", false);
	CU_ASSERT_EQUAL(connect_to(fd, "127.10.1.5", 7000), 0);
	close(fd);
	/* A second process in zone 1c reaches what 1a cannot, and a 1a one does not. */
	CU_ASSERT_EQUAL(run_child((char *[]){"it_faults", "--child", "reach-az", NULL}, "1c"), 0);
	CU_ASSERT_EQUAL(run_child((char *[]){"it_faults", "--child", "reach-az", NULL}, "1a"), 1);
}

static void test_udp_send_drop(void)
{
	int srv = bound_socket(SOCK_DGRAM, "127.68.0.1", 0);
	uint16_t port = local_port(srv);
	int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage to;
	socklen_t tl = mkaddr(&to, "127.68.0.1", port);
	CU_ASSERT_EQUAL(sendto(c, "a", 1, 0, (struct sockaddr *)&to, tl), 1);
	struct iovec iov = {.iov_base = "bb", .iov_len = 2};
	struct msghdr m = {.msg_name = &to, .msg_namelen = tl, .msg_iov = &iov, .msg_iovlen = 1};
	CU_ASSERT_EQUAL(sendmsg(c, &m, 0), 2);
	struct mmsghdr mm[3];
	for (int i = 0; i < 3; i++)
		mm[i] = (struct mmsghdr){.msg_hdr = m};
	CU_ASSERT_EQUAL(sendmmsg(c, mm, 3, 0), 3);
	CU_ASSERT_EQUAL(mm[2].msg_len, 2);
	/* A connected UDP socket: send succeeds, getpeername is the peer. */
	int cc = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_EQUAL(connect(cc, (struct sockaddr *)&to, tl), 0);
	CU_ASSERT_EQUAL(send(cc, "ccc", 3, 0), 3);
	CU_ASSERT_EQUAL(write(cc, "dddd", 4), 4);
	char buf[80];
	snprintf(buf, sizeof(buf), "127.68.0.1:%u/16", port);
	char got[80];
	CU_ASSERT_STRING_EQUAL(peer_of(cc, got, sizeof(got)), buf);
	struct pollfd p = {.fd = srv, .events = POLLIN};
	CU_ASSERT_EQUAL(poll(&p, 1, 500), 0);
	/* Unmatched datagrams still flow. */
	int ok = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	tl = mkaddr(&to, "127.0.0.1", local_port(ok));
	CU_ASSERT_EQUAL(sendto(c, "e", 1, 0, (struct sockaddr *)&to, tl), 1);
	p.fd = ok;
	CU_ASSERT_EQUAL(poll(&p, 1, 2000), 1);
	close(ok);
	close(cc);
	close(c);
	close(srv);
}

/* Sends one datagram from a socket bound at from_ip to port on 127.0.0.1. */
static void send_from(const char *from_ip, uint16_t port, const char *text)
{
	int s = bound_socket(SOCK_DGRAM, from_ip, 0);
	struct sockaddr_storage to;
	socklen_t tl = mkaddr(&to, "127.0.0.1", port);
	sendto(s, text, strlen(text), 0, (struct sockaddr *)&to, tl);
	close(s);
}

static void test_udp_receive_drop(void)
{
	int app = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	uint16_t port = local_port(app);
	set_timeo(app, SO_RCVTIMEO, 700);
	char buf[64] = {0};
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	send_from("127.68.0.9", port, "bad1");
	send_from("127.0.0.2", port, "good1");
	ssize_t n = recvfrom(app, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
	CU_ASSERT_EQUAL(n, 5);
	CU_ASSERT_NSTRING_EQUAL(buf, "good1", 5);
	CU_ASSERT_EQUAL(fl, sizeof(struct sockaddr_in));
	/* read(), recv(MSG_PEEK), recvmsg and recvmmsg skip them too. */
	send_from("127.68.0.9", port, "bad2");
	send_from("127.0.0.2", port, "good2");
	CU_ASSERT_EQUAL(recv(app, buf, sizeof(buf), MSG_PEEK), 5);
	CU_ASSERT_EQUAL(read(app, buf, sizeof(buf)), 5);
	CU_ASSERT_NSTRING_EQUAL(buf, "good2", 5);
	send_from("127.68.0.9", port, "bad3");
	send_from("127.0.0.3", port, "good3");
	send_from("127.68.0.9", port, "bad4");
	send_from("127.0.0.4", port, "good4");
	char b[4][16];
	struct iovec iov[4];
	struct mmsghdr mm[4];
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < 4; i++) {
		iov[i] = (struct iovec){.iov_base = b[i], .iov_len = sizeof(b[i])};
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	int got = recvmmsg(app, mm, 4, MSG_WAITFORONE, NULL);
	CU_ASSERT_EQUAL(got, 2);
	CU_ASSERT_NSTRING_EQUAL(b[0], "good3", 5);
	CU_ASSERT_NSTRING_EQUAL(b[1], "good4", 5);
	send_from("127.68.0.9", port, "bad5");
	errno = 0;
	CU_ASSERT_EQUAL(recvmsg(app, &mm[0].msg_hdr, 0), -1);
	CU_ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
	close(app);
}

/* A vfork child shares the parent's memory: closing or dup2-ing over a
 * faulted socket in the child must not change what the parent knows. */
static void test_vfork_child_touches_nothing(void)
{
	int fd = tcp_socket(STALL_IP, false);
	CU_ASSERT_EQUAL_FATAL(connect_to(fd, STALL_IP, STALL_PORT), 0);
	int pp[2];
	CU_ASSERT_EQUAL_FATAL(pipe(pp), 0);
	pid_t pid = vfork();
	if (pid == 0) {
		close(fd);
		dup2(pp[0], fd);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "127.67.0.1:9000/16");
	close(fd);
	close(pp[0]);
	close(pp[1]);
}

/* A short address buffer gets what fits and the full length; a datagram
 * sent to a cut peer leaves a connected UDP socket's peer unchanged. */
static void test_udp_edges(void)
{
	int app = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	set_timeo(app, SO_RCVTIMEO, 700);
	send_from("127.0.0.2", local_port(app), "short");
	char buf[16], addr[4];
	socklen_t alen = sizeof(addr);
	CU_ASSERT_EQUAL(recvfrom(app, buf, sizeof(buf), 0, (struct sockaddr *)addr, &alen), 5);
	CU_ASSERT_EQUAL(alen, sizeof(struct sockaddr_in));
	int peer = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CU_ASSERT_EQUAL(connect_to(c, "127.0.0.1", local_port(peer)), 0);
	struct sockaddr_storage to;
	socklen_t tl = mkaddr(&to, "127.68.0.1", 5353);
	CU_ASSERT_EQUAL(sendto(c, "x", 1, 0, (struct sockaddr *)&to, tl), 1);
	char want[80], got[80];
	snprintf(want, sizeof(want), "127.0.0.1:%u/16", local_port(peer));
	CU_ASSERT_STRING_EQUAL(peer_of(c, got, sizeof(got)), want);
	close(c);
	close(peer);
	close(app);
}

static void test_dup_family(void)
{
	int fd = tcp_socket(STALL_IP, false);
	CU_ASSERT_EQUAL_FATAL(connect_to(fd, STALL_IP, STALL_PORT), 0);
	int d[5];
	d[0] = dup(fd);
	d[1] = dup2(fd, 250);
	d[2] = dup3(fd, 251, O_CLOEXEC);
	d[3] = fcntl(fd, F_DUPFD_CLOEXEC, 300);
	d[4] = fcntl64(fd, F_DUPFD, 310);
	close(fd);
	char buf[80];
	for (int i = 0; i < 5; i++) {
		CU_ASSERT(d[i] >= 0);
		CU_ASSERT_STRING_EQUAL(peer_of(d[i], buf, sizeof(buf)), "127.67.0.1:9000/16");
		close(d[i]);
	}
	/* A number reused for an unrelated socket reports its own peer. */
	int l = bound_socket(SOCK_STREAM, "127.0.0.1", 0);
	int s = tcp_socket("127.0.0.1", false);
	CU_ASSERT_EQUAL(dup2(s, 250), 250);
	CU_ASSERT_EQUAL(connect_to(250, "127.0.0.1", local_port(l)), 0);
	snprintf(buf, sizeof(buf), "127.0.0.1:%u/16", local_port(l));
	char got[80];
	CU_ASSERT_STRING_EQUAL(peer_of(250, got, sizeof(got)), buf);
	close(250);
	close(s);
	close(l);
}

/* In a child: start a blackholed connect, close every other fd as daemons
 * do, and check the pending connect still times out rather than being
 * refused, and that new faults still work. */
static int close_everything_child(bool use_close_range)
{
	int fd = tcp_socket(BH_IP, true);
	set_int(fd, IPPROTO_TCP, TCP_SYNCNT, 2);
	if (connect_to(fd, BH_IP, BH_PORT) != -1 || errno != EINPROGRESS)
		return 10;
	if (use_close_range) {
		if (close_range((unsigned)fd + 1, ~0U, 0) != 0)
			return 11;
	} else {
		int fds[4096], n = 0;
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;
		while (d && (e = readdir(d)) && n < 4096)
			if (e->d_name[0] != '.')
				fds[n++] = atoi(e->d_name);
		closedir(d);
		for (int i = 0; i < n; i++)
			if (fds[i] > 2 && fds[i] != fd)
				close(fds[i]);
	}
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 15000) != 1)
		return 12;
	int e = so_error(fd);
	if (e != ETIMEDOUT)
		return e == ECONNREFUSED ? 13 : 14;
	int fd2 = tcp_socket(BH_IP, true);
	connect_to(fd2, BH_IP, BH_PORT);
	p.fd = fd2;
	if (poll(&p, 1, 1000) != 0)
		return 15;
	int fd3 = tcp_socket(STALL_IP, false);
	if (connect_to(fd3, STALL_IP, STALL_PORT) != 0)
		return 16;
	return 0;
}

static void test_close_everything(void)
{
	for (int i = 0; i < 2; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(close_everything_child(i == 1));
		int st;
		waitpid(pid, &st, 0);
		CU_ASSERT(WIFEXITED(st));
		CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
		if (WEXITSTATUS(st))
			fprintf(stderr, "close-everything (%s): child exit %d\n",
				i ? "close_range" : "loop", WEXITSTATUS(st));
	}
}

static void test_fastopen(void)
{
	int fd = tcp_socket(BH_IP, true);
	struct sockaddr_storage to;
	socklen_t tl = mkaddr(&to, BH_IP, BH_PORT);
	ssize_t r = sendto(fd, "hi", 2, MSG_FASTOPEN, (struct sockaddr *)&to, tl);
	CU_ASSERT_EQUAL(r, -1);
	CU_ASSERT_EQUAL(errno, EINPROGRESS);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	CU_ASSERT_EQUAL(poll(&p, 1, 1000), 0);
	char buf[80];
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "E107");
	close(fd);
	fd = tcp_socket(STALL_IP, false);
	tl = mkaddr(&to, STALL_IP, STALL_PORT);
	CU_ASSERT_EQUAL(sendto(fd, "hi", 2, MSG_FASTOPEN, (struct sockaddr *)&to, tl), 2);
	CU_ASSERT_STRING_EQUAL(peer_of(fd, buf, sizeof(buf)), "127.67.0.1:9000/16");
	close(fd);
}

static void test_other_fds_untouched(void)
{
	int sv[2];
	CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	char buf[8] = {0};
	CU_ASSERT_EQUAL(write(sv[0], "unix", 4), 4);
	CU_ASSERT_EQUAL(read(sv[1], buf, sizeof(buf)), 4);
	int pp[2];
	CU_ASSERT_EQUAL_FATAL(pipe(pp), 0);
	CU_ASSERT_EQUAL(write(pp[1], "pipe", 4), 4);
	CU_ASSERT_EQUAL(read(pp[0], buf, sizeof(buf)), 4);
	CU_ASSERT_NSTRING_EQUAL(buf, "pipe", 4);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	CU_ASSERT_EQUAL(getpeername(pp[0], (struct sockaddr *)&ss, &len), -1);
	CU_ASSERT_EQUAL(errno, ENOTSOCK);
	close(sv[0]);
	close(sv[1]);
	close(pp[0]);
	close(pp[1]);
}

static void test_errno_kept(void)
{
	int fd = tcp_socket(STALL_IP, false);
	errno = 4242;
	CU_ASSERT_EQUAL(connect_to(fd, STALL_IP, STALL_PORT), 0);
	CU_ASSERT_EQUAL(errno, 4242);
	char buf[80];
	peer_of(fd, buf, sizeof(buf));
	CU_ASSERT_EQUAL(errno, 4242);
	close(fd);
	int app = bound_socket(SOCK_DGRAM, "127.0.0.1", 0);
	send_from("127.0.0.2", local_port(app), "x");
	errno = 4243;
	CU_ASSERT_EQUAL(recv(app, buf, sizeof(buf), 0), 1);
	CU_ASSERT_EQUAL(errno, 4243);
	close(app);
}

static void test_internal_fds_high_and_cloexec(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int high = 0;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		if (fd >= 100 && fd != dirfd(d)) {
			high++;
			CU_ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		}
	}
	closedir(d);
	CU_ASSERT(high >= 3); /* blackhole listener and park, stall listener */
}

/* --child MODE, after exec. */
static int child_main(const char *mode)
{
	if (strcmp(mode, "blackhole-then-stall") == 0)
		return blackhole_then_stall();
	if (strcmp(mode, "close-loop") == 0 || strcmp(mode, "close-range") == 0)
		return close_everything_child(mode[6] == 'r');
	if (strcmp(mode, "reach-az") == 0) {
		int fd = tcp_socket("127.69.0.1", true);
		connect_to(fd, "127.69.0.1", 8081);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		return poll(&p, 1, 1500) == 1 && so_error(fd) == 0 ? 0 : 1;
	}
	if (strcmp(mode, "no-sockets") == 0) {
		/* Whatever ran the tests may pass its own fds down; sockets,
		 * though, could only be the shim's or the test's. */
		int extra = 0;
		for (int fd = 3, end = fd_bound(); fd < end; fd++) {
			struct stat sb;
			struct sockaddr_storage ss;
			socklen_t len = sizeof(ss);
			/* The child's own control socket is AF_UNIX; the shim's
			 * sinks and the test's listeners are inet. */
			if (fstat(fd, &sb) == 0 && S_ISSOCK(sb.st_mode) &&
			    getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
			    ss.ss_family != AF_UNIX) {
				fprintf(stderr, "inherited socket fd %d\n", fd);
				extra++;
			}
		}
		return extra ? 1 : 0;
	}
	return 98;
}

int main(int argc, char **argv)
{
	remember_self(argv[0]);
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	if (!getenv("FAULTNET_CONFIG")) {
		fprintf(stderr, "it_faults: run me under the shim (see tests/run.sh)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("faults under the shim", setup, NULL);
	CU_add_test(s, "blackhole: blocking connect blocks until a signal (EINTR)",
		    test_blocking_blocks_until_signal);
	CU_add_test(s, "blackhole: TCP_SYNCNT=1 gives ETIMEDOUT after the SYN retries",
		    test_blocking_syncnt);
	CU_add_test(s, "blackhole: SO_SNDTIMEO bounds a blocking connect", test_blocking_sndtimeo);
	CU_add_test(s, "blackhole: non-blocking, poll", test_nb_W_POLL);
	CU_add_test(s, "blackhole: non-blocking, ppoll", test_nb_W_PPOLL);
	CU_add_test(s, "blackhole: non-blocking, select", test_nb_W_SELECT);
	CU_add_test(s, "blackhole: non-blocking, pselect", test_nb_W_PSELECT);
	CU_add_test(s, "blackhole: non-blocking, epoll level-triggered", test_nb_W_EPOLL_LT);
	CU_add_test(s, "blackhole: non-blocking, epoll edge-triggered", test_nb_W_EPOLL_ET);
	CU_add_test(s, "blackhole: IPv6 and IPv4-mapped destinations", test_ipv6_and_mapped);
	CU_add_test(s, "stall: connects, swallows writes, never answers", test_stall);
	CU_add_test(s, "stall: non-blocking, IPv4-mapped peer name",
		    test_stall_nonblocking_and_mapped);
	CU_add_test(s, "unmatched connections pass untouched", test_unmatched_passes);
	CU_add_test(s, "16 threads connecting at once", test_threads);
	CU_add_test(s, "a forked child keeps the rules", test_fork);
	CU_add_test(s, "an exec'd child reloads the rules, inherits no shim fd", test_exec);
	CU_add_test(s, "from_zone and to_zone, two processes", test_zones);
	CU_add_test(s, "UDP drop: sendto, sendmsg, sendmmsg, connected send", test_udp_send_drop);
	CU_add_test(s, "UDP drop: datagrams from a cut peer never arrive", test_udp_receive_drop);
	CU_add_test(s, "dup, dup2, dup3, F_DUPFD_CLOEXEC, fcntl64", test_dup_family);
	CU_add_test(s, "a vfork child changes nothing in the parent",
		    test_vfork_child_touches_nothing);
	CU_add_test(s, "UDP: short address buffers, sendto on a connected socket", test_udp_edges);
	CU_add_test(s, "programs that close every fd", test_close_everything);
	CU_add_test(s, "TCP Fast Open connects are faulted too", test_fastopen);
	CU_add_test(s, "AF_UNIX sockets and pipes untouched", test_other_fds_untouched);
	CU_add_test(s, "errno unchanged by the shim on success", test_errno_kept);
	CU_add_test(s, "shim fds are high and close-on-exec", test_internal_fds_high_and_cloexec);
	return cunit_run(argc > 1 ? argv[1] : NULL);
}
