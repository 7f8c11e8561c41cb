/* hammer.c - many threads using sockets under the shim while faultctl flips
 * the rules: for `seconds`, each of `threads` threads connects to one of
 * three loopback echo servers (one no rule covers, one behind a latency
 * rule that is flipped on and off, so its connections are relayed or
 * direct, one behind a blackhole that is flipped), sends a numbered
 * pattern, checks every byte of the echo, and closes. A signal handler
 * meanwhile writes to a pipe and sends datagrams. At the end it checks that
 * the app's fd count is what it was, and prints one line of counts; every
 * `sample` seconds it prints its resident memory.
 *
 *   hammer THREADS SECONDS SAMPLE_SECONDS
 * (under LD_PRELOAD=libfaultnet.so FAULTNET_CONFIG=tests/hardening/stress.conf)
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "../faults/testutil.h"

#define PORT 7500
static const char *const targets[3] = {"127.81.0.1", "127.81.0.2", "127.81.0.3"};
static atomic_long ops[3], bad_bytes, errors, timeouts, signals_seen;
static atomic_int stop;
static int sig_pipe[2], sig_udp;
static struct sockaddr_storage sig_to;
static socklen_t sig_tolen;

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[16384];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
			break;
	close(fd);
	return NULL;
}

static void *acceptor(void *arg)
{
	int l = (int)(intptr_t)arg;
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		spawn_detached(echo, c);
	}
	return NULL;
}

static void on_tick(int sig)
{
	(void)sig;
	int e = errno;
	char c = 's';
	/* Both go through the shim's hooks while the interrupted thread may be
	 * inside them too. */
	if (write(sig_pipe[1], &c, 1) == 1)
		atomic_fetch_add(&signals_seen, 1);
	sendto(sig_udp, &c, 1, MSG_DONTWAIT, (struct sockaddr *)&sig_to, sig_tolen);
	errno = e;
}

/* One connection: connect (non-blocking, 300 ms), a numbered pattern of
 * random size each way, close. */
static void one(int which, unsigned *seed)
{
	int fd = tcp_socket(targets[which], true);
	if (fd < 0) {
		atomic_fetch_add(&errors, 1);
		return;
	}
	int r = connect_to(fd, targets[which], PORT);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (r < 0 && errno == EINPROGRESS && (poll(&p, 1, 300) != 1 || so_error(fd) != 0)) {
		atomic_fetch_add(&timeouts, 1); /* the blackhole, when enabled */
		close(fd);
		return;
	}
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	set_timeo(fd, SO_RCVTIMEO, 5000);
	char out[8192], in[8192];
	size_t n = 1 + rand_r(seed) % sizeof(out);
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(i * 31 + (size_t)which + n);
	size_t got = 0;
	if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n) {
		atomic_fetch_add(&errors, 1);
	} else {
		while (got < n) {
			ssize_t k = recv(fd, in + got, n - got, 0);
			/* A receive timeout makes recv fail with EINTR when the
			 * signal lands, SA_RESTART or not (signal(7)). */
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break;
			got += (size_t)k;
		}
		if (got != n || memcmp(in, out, n) != 0) {
			int e = errno;
			size_t at = 0;
			while (at < got && in[at] == out[at])
				at++;
			if (atomic_fetch_add(&bad_bytes, 1) < 10)
				fprintf(stderr,
					"bad: %s sent %zu got %zu, first difference at %zu, %s\n",
					targets[which], n, got, at, got < n ? strerror(e) : "-");
		}
	}
	close(fd);
	atomic_fetch_add(&ops[which], 1);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	while (!stop)
		one((int)(rand_r(&seed) % 3), &seed);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 32;
	int seconds = argc > 2 ? atoi(argv[2]) : 10;
	int sample = argc > 3 ? atoi(argv[3]) : 0;
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		pthread_create(&t, NULL, acceptor,
			       (void *)(intptr_t)bound_socket(SOCK_STREAM, targets[i], PORT));
		pthread_detach(t);
	}
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return 2;
	int rx = bound_socket(SOCK_DGRAM, "127.81.0.4", PORT);
	sig_udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sig_tolen = mkaddr(&sig_to, "127.81.0.4", PORT);
	int fds_before = app_fds();
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	struct sigaction sa = {.sa_handler = on_tick, .sa_flags = SA_RESTART};
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {.it_interval = {0, 2000}, .it_value = {0, 2000}};
	setitimer(ITIMER_REAL, &it, NULL);
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	long t0 = now_ms();
	char drain[4096];
	while (now_ms() - t0 < seconds * 1000L) {
		usleep(100 * 1000);
		while (read(sig_pipe[0], drain, sizeof(drain)) > 0)
			;
		while (recv(rx, drain, sizeof(drain), MSG_DONTWAIT) > 0)
			;
		static long next;
		if (sample && now_ms() - t0 >= next * 1000) {
			printf("rss %ld %ld\n", next, rss_kib());
			fflush(stdout);
			next += sample;
		}
	}
	stop = 1;
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	struct itimerval off = {0};
	setitimer(ITIMER_REAL, &off, NULL);
	/* The echo server closes its end just after the client: give the
	 * last few a moment before counting. */
	int fds_after = app_fds();
	for (int i = 0; i < 300 && fds_after != fds_before; i++) {
		usleep(10000);
		fds_after = app_fds();
	}
	printf(
	    "ops %ld %ld %ld bad_bytes %ld errors %ld timeouts %ld signals %ld fds %d %d rss %ld\n",
	    (long)ops[0], (long)ops[1], (long)ops[2], (long)bad_bytes, (long)errors, (long)timeouts,
	    (long)signals_seen, fds_before, fds_after, rss_kib());
	fflush(stdout);
	free(t);
	bool ok = bad_bytes == 0 && errors == 0 && fds_before == fds_after && ops[0] > 0 &&
		  ops[1] > 0 && signals_seen > 0;
	return ok ? 0 : 1;
}
