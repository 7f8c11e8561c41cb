/* it_hardening.c - the shim must never harm its host process: fd exhaustion
 * (it never takes the app's last fd, and a fault it cannot set up fails the
 * call instead of letting it through), 10,000 sockets at once and what the
 * shim keeps for them, forks while another thread is inside the shim,
 * posix_spawn and vfork storms, exec chains, and the async-signal-safe hooks
 * first called from a signal handler binding nothing lazily. Run under the shim with
 * FAULTNET_CONFIG=tests/hardening/hardening.conf; `--child MODE` is the
 * program re-executed. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <link.h>
#include <netdb.h>
#include <signal.h>
#include <sys/syscall.h>
#include <glob.h>
#include <pthread.h>
#include <pty.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "../cunit_run.h"
#include "../faults/testutil.h"

extern char **environ;

#define REFUSE_IP "127.82.0.1"
#define BH_IP "127.82.0.2"
#define PORT 7600

static int listeners[2];

/* Real servers behind the faulted addresses: a fault that let a connect
 * through would show as a success. */
static int setup(void)
{
	listeners[0] = bound_socket(SOCK_STREAM, REFUSE_IP, PORT);
	listeners[1] = bound_socket(SOCK_STREAM, BH_IP, PORT);
	return 0;
}

/* A blocking connect to the refuse rule: 0 if refused, as it must be. */
static int refused(void)
{
	int fd = tcp_socket(REFUSE_IP, false);
	int r = connect_to(fd, REFUSE_IP, PORT), e = errno;
	close(fd);
	return r < 0 && e == ECONNREFUSED ? 0 : 1;
}

/* ---- fd exhaustion ------------------------------------------------------ */

static int child_emfile(void)
{
	/* Fill every fd number below a limit of 64, free one, take it with a
	 * socket: the shim needs fds of its own for the blackhole's sink and
	 * has none left. */
	struct rlimit rl = {.rlim_cur = 64, .rlim_max = 4096};
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 90;
	int last = -1;
	for (int d; (d = dup(0)) >= 0;)
		last = d;
	if (errno != EMFILE || last < 0)
		return 89;
	close(last);
	int fd = tcp_socket(BH_IP, true);
	if (fd < 0)
		return 91;
	int r = connect_to(fd, BH_IP, PORT), e = errno;
	/* Never connected to the real server behind the rule... */
	if (r == 0 || e == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 500) == 1 && so_error(fd) == 0)
			return 92;
	}
	/* ... the app gets an error it can act on, and its fd is still its own. */
	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != EAGAIN) {
		fprintf(stderr, "emfile: connect gave %d (%s)\n", r, strerror(e));
		return 93;
	}
	if (fcntl(fd, F_GETFD) < 0)
		return 94;
	close(fd);
	/* With fds to spare again, the same fault works. */
	rl.rlim_cur = 256;
	setrlimit(RLIMIT_NOFILE, &rl);
	fd = tcp_socket(BH_IP, true);
	r = connect_to(fd, BH_IP, PORT);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (!(r < 0 && errno == EINPROGRESS && poll(&p, 1, 300) == 0))
		return 95;
	return 0;
}

/* ---- the child side of the process tests ------------------------------- */

static int child_chain(int depth)
{
	if (refused())
		return 80 + depth;
	if (depth == 0)
		return 0;
	char d[8];
	snprintf(d, sizeof(d), "%d", depth - 1);
	execl(self_path, "it_hardening", "--child", "chain", d, (char *)NULL);
	return 79;
}

/* The program again as --child MODE ARG: its exit status; 124 if it still
 * runs after 120 s (killed then: a deadlock in a fork handler holds every
 * signal blocked, so a child's own alarm cannot end it). */
static int run_self(const char *mode, const char *arg)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl(self_path, "it_hardening", "--child", mode, arg, (char *)NULL);
		_exit(127);
	}
	int st;
	for (int ms = 0; waitpid(pid, &st, WNOHANG) == 0; ms += 20) {
		if (ms >= 120 * 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 124;
		}
		usleep(20000);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_emfile(void)
{
	char path[] = "/tmp/fn-emfile-XXXXXX";
	int fd = mkstemp(path);
	setenv("FAULTNET_EVENTS", path, 1);
	CU_ASSERT_EQUAL(run_self("emfile", "0"), 0);
	unsetenv("FAULTNET_EVENTS");
	/* The fault it could not set up is reported, not hidden. */
	char buf[4096] = "";
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"outcome\":\"fault-failed\""));
	close(fd);
	unlink(path);
}

static void test_exec_chain(void)
{
	CU_ASSERT_EQUAL(run_self("chain", "5"), 0); /* 6 programs, one after another */
}

/* ---- many sockets ------------------------------------------------------- */

static void test_ten_thousand_sockets(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	struct rlimit big = {.rlim_cur = 11000, .rlim_max = rl.rlim_max};
	if (rl.rlim_max < 11000 || setrlimit(RLIMIT_NOFILE, &big) < 0) {
		CU_FAIL("cannot raise RLIMIT_NOFILE to 11000");
		return;
	}
	enum { N = 10000 };
	static int fds[N];
	int before = app_fds();
	long rss0 = rss_kib();
	for (int i = 0; i < N; i++)
		fds[i] = tcp_socket(BH_IP, true);
	long rss1 = rss_kib();
	int ok = 0;
	for (int i = 0; i < N; i++)
		ok += connect_to(fds[i], BH_IP, PORT) < 0 && errno == EINPROGRESS;
	long rss2 = rss_kib();
	CU_ASSERT_EQUAL(ok, N); /* every one blackholed, none refused */
	struct pollfd p = {.fd = fds[N - 1], .events = POLLOUT};
	CU_ASSERT_EQUAL(poll(&p, 1, 100), 0);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	CU_ASSERT_EQUAL(app_fds(), before);
	printf("\n    10,000 sockets: %ld KiB resident for the sockets, %ld KiB more once all "
	       "were faulted (%.0f bytes per faulted socket) ",
	       rss1 - rss0, rss2 - rss1, (double)(rss2 - rss1) * 1024 / N);
	/* The shim keeps one flag byte per fd and, for a faulted socket, a
	 * record of a few hundred bytes. */
	CU_ASSERT((rss2 - rss1) * 1024 / N < 2048);
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* ---- forks and spawns --------------------------------------------------- */

static volatile int spinning;

static void *connect_loop(void *arg)
{
	(void)arg;
	while (spinning)
		refused();
	return NULL;
}

/* fork() while another thread is inside the shim (connecting through a
 * rule): the child must not inherit a lock held by a thread it does not
 * have. Each child connects through the rule itself and exits. */
static void test_fork_while_busy(void)
{
	spinning = 1;
	pthread_t t;
	pthread_create(&t, NULL, connect_loop, NULL);
	int bad = 0;
	for (int i = 0; i < 200; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			alarm(5);
			_exit(refused());
		}
		int st;
		waitpid(pid, &st, 0);
		bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	spinning = 0;
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(bad, 0);
}

/* A child forked before the process's first covered call still joins
 * and meets the rules: each mode's own first covered call comes after the
 * fork (daemon and forkpty fork inside libc). Without the shim's fork
 * handlers the child takes itself for a vfork child and lets the connect
 * through. */
static int child_forked_first(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(refused());
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 60;
	return refused() ? 61 : 0;
}

/* daemon() forks inside libc, where no fork hook sees it: the child
 * reports on fd report. */
static int child_daemon_first(int report)
{
	if (daemon(1, 1) != 0)
		return 62;
	char r = (char)('0' + refused());
	ssize_t n = write(report, &r, 1);
	_exit(n == 1 ? 0 : 63);
}

static int child_forkpty_first(void)
{
	int master;
	pid_t pid = forkpty(&master, NULL, NULL, NULL);
	if (pid < 0)
		return 77; /* no pseudo-terminal here: the caller skips */
	if (pid == 0)
		_exit(refused());
	int st;
	waitpid(pid, &st, 0);
	close(master);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 64;
}

/* A blackholed connect: in progress, never connected. The fault's sink
 * is an fd of the shim's, placed under its fd limit lock. */
static int blackholed(void)
{
	int fd = tcp_socket(BH_IP, true);
	int r = connect_to(fd, BH_IP, PORT);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int ok = r < 0 && errno == EINPROGRESS && poll(&p, 1, 100) == 0;
	close(fd);
	return ok ? 0 : 1;
}

static volatile int in_prepare = -1, in_child = -1;

static void app_prepare(void)
{
	in_prepare = refused() | blackholed();
}

static void app_child(void)
{
	in_child = refused() | blackholed();
}

/* The app's own fork handlers make covered calls (the process's join
 * among them, in the prepare handler) while it forks: they must neither
 * wait for a lock the shim holds for the fork nor miss the rules. A
 * deadlock ends in run_self's kill. */
static int child_app_handlers(void)
{
	pthread_atfork(app_prepare, NULL, app_child);
	pid_t pid = fork();
	if (pid == 0)
		_exit(in_child == 0 ? refused() : 65);
	int st;
	waitpid(pid, &st, 0);
	if (in_prepare != 0)
		return 66;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 67;
}

static void test_fork_before_join(void)
{
	CU_ASSERT_EQUAL(run_self("forkfirst", "0"), 0);
	CU_ASSERT_EQUAL(run_self("apphandlers", "0"), 0);
	int pty = run_self("forkptyfirst", "0");
	if (pty == 77)
		printf("\n    skip - forkpty: no pseudo-terminal device here (/dev/ptmx) ");
	else
		CU_ASSERT_EQUAL(pty, 0);
	int p[2];
	if (pipe(p) != 0) {
		CU_FAIL("pipe");
		return;
	}
	char fd[16];
	snprintf(fd, sizeof(fd), "%d", p[1]);
	CU_ASSERT_EQUAL(run_self("daemonfirst", fd), 0);
	close(p[1]);
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	char r = 0;
	CU_ASSERT_EQUAL(poll(&pf, 1, 10000), 1);
	CU_ASSERT_EQUAL(read(p[0], &r, 1), 1);
	CU_ASSERT_EQUAL(r, '0'); /* the daemon's connect met the rule */
	close(p[0]);
}

static void test_spawn_storm(void)
{
	int bad = 0;
	for (int i = 0; i < 50; i++) {
		pid_t pid;
		char *argv[] = {"it_hardening", "--child", "chain", "0", NULL};
		if (posix_spawn(&pid, self_path, NULL, NULL, argv, environ) != 0) {
			bad++;
			continue;
		}
		int st;
		waitpid(pid, &st, 0);
		bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* vfork children share our memory: they exec at once, and the parent
	 * must still work after each. */
	for (int i = 0; i < 50; i++) {
		pid_t pid = vfork();
		if (pid == 0) {
			execl(self_path, "it_hardening", "--child", "chain", "0", (char *)NULL);
			_exit(127);
		}
		int st;
		waitpid(pid, &st, 0);
		bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(refused(), 0);
}

/* The receive hooks' first test reads the fd table at the fd modulo its
 * size (2^20), so fd u - 2^20 and fd INT_MIN + u read the byte of fd u.
 * With a UDP socket at u, a datagram waiting in it and a UDP rule on, every
 * receive call on those negative fds must still be libc's: -1 with EBADF,
 * and the datagram left where it is. */
static int receive_calls(int fd, int errs[5])
{
	char b[16];
	struct iovec iov = {.iov_base = b, .iov_len = sizeof(b)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t r[5] = {recv(fd, b, sizeof(b), MSG_DONTWAIT)};
	errs[0] = errno;
	r[1] = recvfrom(fd, b, sizeof(b), MSG_DONTWAIT, NULL, NULL), errs[1] = errno;
	r[2] = read(fd, b, sizeof(b)), errs[2] = errno;
	r[3] = readv(fd, &iov, 1), errs[3] = errno;
	r[4] = recvmsg(fd, &m, MSG_DONTWAIT), errs[4] = errno;
	int failed = 0;
	for (int i = 0; i < 5; i++)
		failed += r[i] == -1;
	return failed;
}

static void test_negative_fd(void)
{
	int u = bound_socket(SOCK_DGRAM, "127.0.0.1", PORT + 3), s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_storage to;
	socklen_t tl = mkaddr(&to, "127.0.0.1", PORT + 3);
	CU_ASSERT_EQUAL(sendto(s, "kept", 4, 0, (struct sockaddr *)&to, tl), 4);
	usleep(20000);
	int fds[2] = {u - (1 << 20), INT_MIN + u};
	for (int k = 0; k < 2; k++) {
		int errs[5];
		CU_ASSERT_EQUAL(receive_calls(fds[k], errs), 5);
		for (int i = 0; i < 5; i++)
			CU_ASSERT_EQUAL(errs[i], EBADF);
	}
	char b[16];
	CU_ASSERT_EQUAL(recv(u, b, sizeof(b), MSG_DONTWAIT), 4);
	close(u);
	close(s);
}

/* A member's state file is 2.5 MB of holes. Mapped with the kernel's
 * read-ahead, the first touch of it read (and zeroed) the whole file into
 * the page cache on a disk file system: 622 of 622 pages per process, and
 * a millisecond of every start. In a process just started, only the few
 * pages the shim writes may be in memory (3 with this policy). On tmpfs
 * there is no read-ahead, and the test passes either way; run.sh's run
 * directory is in /tmp. The file is made at the process's first covered
 * call (its join), so the child makes one first. The child exits 0, or 1
 * with the count. */
static int child_pages(void)
{
	if (refused())
		return 2;
	const char *dir = getenv("FAULTNET_RUNDIR"), *stats = getenv("FAULTNET_STATS_DIR"),
		   *group = getenv("FAULTNET_GROUP");
	char path[4200];
	/* "[GROUP.]PID.NS.START.mem": this pid's, in any namespace */
	if (stats && *stats)
		snprintf(path, sizeof(path), "%s/%d.*.*.mem", stats, (int)getpid());
	else
		snprintf(path, sizeof(path), "%s/%s.%d.*.*.mem", dir ? dir : "?",
			 group && *group ? group : "default", (int)getpid());
	glob_t g;
	if (glob(path, 0, NULL, &g) == 0) {
		snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
		globfree(&g);
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		printf("\n    %s: %s ", path, strerror(errno));
		return 1;
	}
	size_t pages = ((size_t)st.st_size + 4095) / 4096, resident = 0;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned char *v = malloc(pages);
	bool ok = m != MAP_FAILED && v && mincore(m, (size_t)st.st_size, v) == 0;
	for (size_t i = 0; ok && i < pages; i++)
		resident += v[i] & 1;
	if (!ok || resident * 4 >= pages)
		printf("\n    %zu of %zu pages of %s in memory ", resident, pages, path);
	/* Everything given back: LeakSanitizer's exit status would fail the
	 * test under the sanitizers' build. */
	free(v);
	if (m != MAP_FAILED)
		munmap(m, (size_t)st.st_size);
	close(fd);
	return !ok || resident * 4 >= pages;
}

static void test_state_file_pages(void)
{
	CU_ASSERT_EQUAL(run_self("pages", "0"), 0);
}

/* ---- lazy binding ------------------------------------------------------- */

/* The shim is linked without -z now (Makefile): a function it imports is
 * bound by ld.so's resolver at its first call. The pass-through paths of the
 * hooks an app may call from a signal handler or a vfork child must bind
 * nothing after the constructor. Its PLT's GOT slots, from its dynamic
 * section, are compared before and after such calls. */
struct plt {
	uintptr_t *slot[512];
	uintptr_t was[512];
	size_t n;
};

static int find_plt(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct plt *p = arg;
	if (!strstr(info->dlpi_name, "libfaultnet.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		uintptr_t rel = 0, bytes = 0;
		for (; d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_JMPREL)
				rel = d->d_un.d_ptr;
			else if (d->d_tag == DT_PLTRELSZ)
				bytes = d->d_un.d_val;
		/* ld.so relocates the dynamic section's addresses in place on
		 * most targets; an offset still below the base is not yet. */
		if (rel && rel < info->dlpi_addr)
			rel += info->dlpi_addr;
		const ElfW(Rela) *r = (const void *)rel;
		for (size_t k = 0; rel && k < bytes / sizeof(*r) && p->n < 512; k++)
			p->slot[p->n++] = (uintptr_t *)(info->dlpi_addr + r[k].r_offset);
	}
	return 1;
}

static struct sockaddr_in peer;
static int peer_fd, pipe_fd[2];
static volatile sig_atomic_t handler_ok;

/* The async-signal-safe hooks, each called for the first time in this
 * process, from a handler on an alternate stack: none takes a rule. */
static void as_safe_calls(int sig)
{
	(void)sig;
	char b[4];
	struct iovec iov = {b, 1};
	struct sockaddr_in who;
	socklen_t len = sizeof(who);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	bool ok = fd >= 0 && sendto(fd, "a", 1, 0, (struct sockaddr *)&peer, sizeof(peer)) == 1 &&
		  connect(fd, (struct sockaddr *)&peer, sizeof(peer)) == 0 &&
		  getpeername(fd, (struct sockaddr *)&who, &len) == 0 &&
		  recvfrom(peer_fd, b, sizeof(b), 0, NULL, NULL) == 1 && write(fd, "b", 1) == 1 &&
		  recv(peer_fd, b, sizeof(b), 0) == 1;
	int d = dup(fd);
	ok = ok && d >= 0 && dup2(d, 90) == 90 && dup3(d, 91, O_CLOEXEC) == 91 &&
	     fcntl(d, F_GETFL) >= 0 && write(pipe_fd[1], "cd", 2) == 2 &&
	     read(pipe_fd[0], b, 1) == 1 && readv(pipe_fd[0], &iov, 1) == 1;
	ok = ok && close(91) == 0 && close(90) == 0 && close(d) == 0 && close(fd) == 0;
	handler_ok = ok;
}

static int child_lazybind(void)
{
	struct plt p = {.n = 0};
	dl_iterate_phdr(find_plt, &p);
	if (p.n == 0)
		return 70;
	/* The peer and the pipe made with raw system calls: no hook runs
	 * before the handler's. */
	peer.sin_family = AF_INET;
	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(peer);
	peer_fd = (int)syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0);
	if (peer_fd < 0 || syscall(SYS_bind, peer_fd, &peer, sizeof(peer)) < 0 ||
	    syscall(SYS_getsockname, peer_fd, &peer, &len) < 0 ||
	    syscall(SYS_pipe2, pipe_fd, 0) < 0)
		return 71;
	/* The process joins its group at its first covered call, which
	 * builds its policy and makes its files: not a pass-through path, and
	 * made here by a name lookup, none of the handler's hooks. */
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *ai = NULL;
	if (getaddrinfo("127.0.0.1", NULL, &hints, &ai) != 0)
		return 75;
	freeaddrinfo(ai);
	static char altstack[64 * 1024];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
	struct sigaction sa = {.sa_handler = as_safe_calls, .sa_flags = SA_ONSTACK};
	if (sigaltstack(&ss, NULL) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0)
		return 72;
	for (size_t i = 0; i < p.n; i++)
		p.was[i] = *p.slot[i];
	raise(SIGUSR1);
	size_t bound = 0;
	for (size_t i = 0; i < p.n; i++)
		bound += *p.slot[i] != p.was[i];
	if (bound)
		fprintf(stderr,
			"it_hardening: %zu of the shim's %zu PLT slots bound in the handler\n",
			bound, p.n);
	return !handler_ok ? 73 : bound ? 74 : 0;
}

static void test_lazy_binding(void)
{
	CU_ASSERT_EQUAL(run_self("lazybind", "0"), 0);
}

int main(int argc, char **argv)
{
	remember_self(argv[0]);
	if (argc == 4 && strcmp(argv[1], "--child") == 0) {
		if (strcmp(argv[2], "emfile") == 0)
			return child_emfile();
		if (strcmp(argv[2], "chain") == 0)
			return child_chain(atoi(argv[3]));
		if (strcmp(argv[2], "pages") == 0)
			return child_pages();
		if (strcmp(argv[2], "lazybind") == 0)
			return child_lazybind();
		if (strcmp(argv[2], "forkfirst") == 0)
			return child_forked_first();
		if (strcmp(argv[2], "daemonfirst") == 0)
			return child_daemon_first(atoi(argv[3]));
		if (strcmp(argv[2], "forkptyfirst") == 0)
			return child_forkpty_first();
		if (strcmp(argv[2], "apphandlers") == 0)
			return child_app_handlers();
		return 98;
	}
	if (!getenv("FAULTNET_CONFIG")) {
		fprintf(stderr, "it_hardening: run me under the shim (see tests/run.sh)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("the shim never harms its host", setup, NULL);
	CU_add_test(s, "EMFILE: no fd taken, the fault fails closed, then works again",
		    test_emfile);
	CU_add_test(s, "an exec chain of 6 programs, each under the rules", test_exec_chain);
	CU_add_test(s, "10,000 sockets at once, all faulted", test_ten_thousand_sockets);
	CU_add_test(s, "200 forks while another thread is inside the shim", test_fork_while_busy);
	CU_add_test(s, "posix_spawn and vfork storms", test_spawn_storm);
	CU_add_test(s,
		    "fork, daemon and forkpty before any covered call: the child meets the rules; "
		    "the app's own fork handlers' covered calls neither wait nor miss them",
		    test_fork_before_join);
	CU_add_test(s, "a negative fd in every receive hook is libc's, whatever the fd table says",
		    test_negative_fd);
	CU_add_test(s, "a new process's state file: only the pages written are in memory",
		    test_state_file_pages);
	CU_add_test(s,
		    "async-signal-safe hooks first called in a signal handler bind nothing lazily",
		    test_lazy_binding);
	return cunit_run(argc > 1 ? argv[1] : NULL);
}
