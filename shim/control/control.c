/* control.c - the control thread. It runs with every signal blocked, takes
 * no lock the app's socket calls need, never blocks on a client (sockets
 * are non-blocking, replies are buffered), and keeps its fds in a table of
 * its own (unshare(CLONE_FILES)), so that the app never sees or closes
 * them. Clients whose uid is neither ours nor root are refused. */
#include "shim/control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shim/control/commands.h"
#include "shim/fd/fdtab.h"
#include "shim/base/groupseq.h"
#include "shim/base/libc.h"
#include "shim/base/say.h"
#include "core/rundir.h"
#include "shim/stats/stats.h"

#define CLIENTS 32
#define IDLE_SECONDS 30
#define OUT_MAX (8 << 20)

struct client {
	int fd;
	dev_t dev;
	ino_t ino;
	char *in; /* FN_LINE_MAX + 1 bytes while connected: kept out of the
		   * array, so that a fork child resets 32 small entries rather
		   * than writing to 2 MiB of copied pages */
	size_t inlen;
	struct fn_buf out;
	size_t sent;
	bool follow, closing;
	size_t discarding; /* bytes of an over-long line thrown away so far */
	uint64_t since;
	time_t last;
};

static char rundir[4096], group[FN_NAME_MAX],
    sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int listen_fd = -1;
static dev_t listen_dev;
static ino_t listen_ino;
static pid_t owner_pid;
static struct client clients[CLIENTS];
static bool started;

/* Set in the control thread once its fds live in a table of its own: then
 * its fd numbers mean nothing in the app's table, and are neither marked
 * there nor closed from an app thread. Without it (unshare refused, by a
 * seccomp filter say) they live high in the app's table, marked ours. */
static bool private_fds;

static int own_fd(int fd)
{
	return __atomic_load_n(&private_fds, __ATOMIC_RELAXED)
		   ? fd
		   : fn_fd_move_high(fd, FN_RANGE_CONTROL);
}

/* Gives the thread a table of its own, a copy of the app's, and closes
 * the copies at once: a copy would keep the app's sockets open after the
 * app closes them (its locks stay: POSIX locks belong to the app's table).
 * False when the copies cannot be closed: the thread must then end. */
static bool unshare_fds(bool *unshared)
{
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer keeps one record per fd number for the whole
	 * process: fds of a table of our own would alias the app's and be
	 * reported as races. Its build keeps the shared table (the path a
	 * refused unshare takes), which its tests then cover. */
	*unshared = false;
	return true;
#endif
	*unshared = unshare(CLONE_FILES) == 0;
	if (!*unshared)
		return true; /* shared, as threads are by default */
	if (!fn_libc.close_range)
		fn_libc_resolve();
	bool closed = fn_libc.close_range && fn_libc.close_range(0, ~0u, 0) == 0;
	DIR *d = closed ? NULL : opendir("/proc/thread-self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			LIBC(close)(atoi(e->d_name));
	if (d)
		closedir(d);
	if (!closed && !d)
		return false;
	/* 0, 1 and 2 to /dev/null: the thread prints nothing, and whatever
	 * might (glibc's last words) must not write into a client's socket. */
	for (int i = 0; i < 3; i++)
		open("/dev/null", O_RDWR | O_CLOEXEC);
	return true;
}

static bool open_listener(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!fn_sock_path(sock_path, sizeof(sock_path), rundir, group, getpid()))
		return false;
	strcpy(a.sun_path, sock_path);
	int fd = LIBC(socket)(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	unlink(sock_path); /* ours: left by this pid's image before an exec */
	/* 0600 by chmod, not umask: the umask is the whole process's, and a
	 * fork child binds while the app's threads may be creating files. The
	 * directory is 0700, so nobody else reaches the socket meanwhile. */
	int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && chmod(sock_path, 0600) == 0 &&
		 listen(fd, 64) == 0;
	if (!ok) {
		LIBC(close)(fd);
		return false;
	}
	listen_fd = own_fd(fd);
	fn_fd_identify(listen_fd, &listen_dev, &listen_ino);
	owner_pid = getpid();
	return true;
}

static void drop_client(struct client *c)
{
	if (fn_fd_same_file(c->fd, c->dev, c->ino)) {
		if (!private_fds)
			fn_fd_set(c->fd, 0);
		LIBC(close)(c->fd);
	}
	fn_buf_free(&c->out);
	free(c->in);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static bool peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	       (cr.uid == 0 || cr.uid == geteuid());
}

/* Set when accept failed for want of an fd (the app is at its limit): the
 * waiting client stays queued and the listener stays readable, so it is
 * left out of the poll set until then, instead of spinning on it. */
static time_t accept_paused_until;

static void accept_clients(void)
{
	int fd;
	/* The app may have closed our listener and reused its number since the
	 * poll: never accept on a socket that is not ours. */
	while (fn_fd_same_file(listen_fd, listen_dev, listen_ino) &&
	       (fd = LIBC(accept4)(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		struct client *c = NULL;
		for (int i = 0; i < CLIENTS && !c; i++)
			if (clients[i].fd < 0)
				c = &clients[i];
		char *in = c ? malloc(FN_LINE_MAX + 1) : NULL;
		const char *refuse = !peer_allowed(fd) ? "error permission denied\n"
				     : !c	       ? "error too many clients\n"
				     : !in	       ? "error out of memory\n"
						       : NULL;
		if (refuse) {
			ssize_t w = send(fd, refuse, strlen(refuse), MSG_NOSIGNAL | MSG_DONTWAIT);
			(void)w;
			LIBC(close)(fd);
			free(in);
			continue;
		}
		c->in = in;
		c->fd = own_fd(fd);
		fn_fd_identify(c->fd, &c->dev, &c->ino);
		c->last = time(NULL);
	}
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
		accept_paused_until = time(NULL) + 1;
}

/* Runs the complete lines in the input buffer while the client's unsent
 * output is under its cap: the rest wait until it has read (a client that
 * sends many requests and reads nothing must not grow the app). */
static void run_lines(struct client *c)
{
	char *nl;
	while (!c->closing && c->out.len - c->sent < OUT_MAX &&
	       (nl = memchr(c->in, '\n', c->inlen))) {
		*nl = '\0';
		if (nl > c->in && nl[-1] == '\r')
			nl[-1] = '\0';
		if (memchr(c->in, '\0', (size_t)(nl - c->in))) {
			fn_buf_add(&c->out, "error binary data in request\n", 29);
			c->closing = true;
		} else {
			/* A query answers for the group's last change too. */
			fn_groupseq_check();
			fn_change_lock();
			fn_cmd_run(c->in, &c->out, &c->follow, &c->since);
			fn_change_unlock();
		}
		size_t used = (size_t)(nl - c->in) + 1;
		memmove(c->in, nl + 1, c->inlen - used);
		c->inlen -= used;
	}
	if (c->inlen == FN_LINE_MAX && !memchr(c->in, '\n', c->inlen)) {
		/* Read the rest of the line before answering, so the client
		 * can read the answer instead of meeting a reset. */
		c->discarding = c->inlen;
		c->inlen = 0;
	}
}

static void discard(struct client *c)
{
	char *nl = memchr(c->in, '\n', c->inlen);
	c->discarding += c->inlen;
	if (nl || c->discarding > 64 * FN_LINE_MAX) {
		fn_buf_add(&c->out, "error request line too long\n", 28);
		c->closing = true;
	}
	c->inlen = 0;
}

static void read_client(struct client *c)
{
	if (!fn_fd_same_file(c->fd, c->dev, c->ino))
		return drop_client(c);
	ssize_t n = LIBC(recv)(c->fd, c->in + c->inlen, FN_LINE_MAX - c->inlen, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		drop_client(c);
		return;
	}
	if (n > 0) {
		c->inlen += (size_t)n;
		c->last = time(NULL);
		if (c->discarding)
			discard(c);
		else
			run_lines(c);
	}
}

static void write_client(struct client *c)
{
	if (!fn_fd_same_file(c->fd, c->dev, c->ino))
		return drop_client(c);
	while (c->sent < c->out.len) {
		ssize_t n = send(c->fd, c->out.s + c->sent, c->out.len - c->sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				drop_client(c);
			return;
		}
		c->sent += (size_t)n;
	}
	fn_buf_free(&c->out);
	c->sent = 0;
	if (c->closing)
		drop_client(c);
}

static void tend_client(struct client *c, short revents, time_t now)
{
	if (!fn_fd_same_file(c->fd, c->dev, c->ino) || (revents & (POLLERR | POLLNVAL)))
		return drop_client(c);
	if (c->follow)
		fn_events_dump(&c->out, &c->since);
	/* New input only once the lines already received have run. */
	bool pending = memchr(c->in, '\n', c->inlen) != NULL;
	if ((revents & POLLIN) && !pending)
		read_client(c);
	if (c->fd >= 0 && c->out.len)
		write_client(c);
	if (c->fd >= 0 && pending)
		run_lines(c);
	if (c->fd >= 0 &&
	    (c->out.len > OUT_MAX || c->out.oom || (!c->follow && now - c->last > IDLE_SECONDS)))
		drop_client(c);
}

/* faultctl run --stats: each process keeps its counters in the directory
 * it was given, rewritten by the control thread when they change and at
 * exit, so that a process killed by a signal still counts. */
static void write_stats(void)
{
	const char *dir = secure_getenv("FAULTNET_STATS_DIR");
	if (!dir || !*dir)
		return;
	char path[4200], tmp[4300];
	snprintf(path, sizeof(path), "%s/%d.stats", dir, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s/.%d.tmp", dir, (int)getpid());
	struct fn_buf b = {0};
	fn_cmd_stats(&b);
	FILE *f = fopen(tmp, "we");
	if (f) {
		if (b.s)
			fputs(b.s, f);
		if (fclose(f) == 0)
			rename(tmp, path);
	}
	fn_buf_free(&b);
}

static void refresh_stats(void)
{
	static uint64_t written;
	uint64_t now = fn_stats_generation();
	if (now != written) {
		written = now;
		write_stats();
	}
}

/* The shim must never be what keeps a process alive: when every thread
 * left is one of the shim's own (named faultnet-*), the app's last thread
 * has ended with pthread_exit, which would have ended the process with
 * status 0 without the shim (a fork child of a non-main thread whose thread
 * returns, say). The process ends that way now. */
/* The main thread's state, read through an fd kept open (and high) so that
 * the check every 200 ms takes no fd from an app near its limit. */
static int leader_fd = -1;
static dev_t leader_dev;
static ino_t leader_ino;

static bool leader_exited(void)
{
	if (!fn_fd_same_file(leader_fd, leader_dev, leader_ino)) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)getpid());
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		leader_fd = own_fd(fd);
		fn_fd_identify(leader_fd, &leader_dev, &leader_ino);
	}
	char line[256];
	ssize_t n = pread(leader_fd, line, sizeof(line) - 1, 0);
	line[n > 0 ? n : 0] = '\0';
	const char *close = strrchr(line, ')');
	return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

static void end_if_alone(void)
{
	/* The common case costs one pread: the main thread still runs. */
	if (!leader_exited())
		return;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	bool app_thread = d == NULL;
	while (d && !app_thread && (e = readdir(d))) {
		char path[64], line[256] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f) /* gone between readdir and now */
			continue;
		bool read = fgets(line, sizeof(line), f) != NULL;
		fclose(f);
		/* "tid (comm) state ...": a thread that has exited (the main
		 * thread stays listed as a zombie) counts for nothing. */
		const char *open = strchr(line, '('), *close = strrchr(line, ')');
		if (!read || !open || !close)
			app_thread = true;
		else if (close[1] == ' ' && close[2] != 'Z' && close[2] != 'X')
			app_thread = strncmp(open + 1, "faultnet-", 9) != 0;
	}
	if (d)
		closedir(d);
	if (!app_thread)
		exit(0);
}

/* A process that ends with _exit (most fork children do) leaves its
 * socket file behind. Each process that starts (not each fork child, which
 * must stay cheap) removes those of processes that no longer exist, before
 * main, so that they never pile up and the fd it takes for that is given
 * back before the app runs. */
static void sweep_dead_sockets(void)
{
	DIR *d = opendir(rundir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".sock") != 0)
			continue;
		char name[256], *dot;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), e->d_name);
		long pid = (dot = strrchr(name, '.')) ? strtol(dot + 1, NULL, 10) : 0;
		struct stat sb;
		bool dead = pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		if (dead && fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISSOCK(sb.st_mode))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
}

/* What the starting app thread waits for, a while: 1 once the listener is
 * bound, 0 if it cannot be, -1 before. */
static sem_t bound;
static int bound_state;

static void *serve(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "faultnet-ctl");
	bool unshared, ok = unshare_fds(&unshared);
	__atomic_store_n(&private_fds, unshared && ok, __ATOMIC_RELAXED);
	ok = ok && open_listener();
	__atomic_store_n(&bound_state, ok, __ATOMIC_RELEASE);
	sem_post(&bound);
	if (!ok)
		return NULL; /* a private table goes with the thread */
	struct pollfd p[CLIENTS + 1];
	for (;;) {
		if (!fn_fd_same_file(listen_fd, listen_dev, listen_ino) && !open_listener()) {
			sleep(1); /* the app closed it and the directory is gone: retry */
			continue;
		}
		bool paused = time(NULL) < accept_paused_until;
		p[0] = (struct pollfd){.fd = paused ? -1 : listen_fd, .events = POLLIN};
		for (int i = 0; i < CLIENTS; i++)
			p[i + 1] = (struct pollfd){
			    .fd = clients[i].fd,
			    .events =
				(clients[i].inlen && memchr(clients[i].in, '\n', clients[i].inlen)
				     ? 0
				     : POLLIN) |
				(clients[i].out.len ? POLLOUT : 0)};
		if (poll(p, CLIENTS + 1, 200) < 0 && errno != EINTR)
			continue;
		end_if_alone();
		if (p[0].revents & POLLIN)
			accept_clients();
		refresh_stats();
		time_t now = time(NULL);
		for (int i = 0; i < CLIENTS; i++)
			if (clients[i].fd >= 0)
				tend_client(&clients[i], p[i + 1].revents, now);
	}
	return NULL;
}

static bool start_thread(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	__atomic_store_n(&bound_state, -1, __ATOMIC_RELAXED);
	sem_init(&bound, 0, 0); /* never destroyed: a late thread still posts */
	int r = pthread_create(&t, &attr, serve, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (r != 0)
		return false;
	/* The socket file normally exists when the shim's start returns
	 * (faultctl finds the process from then on). The wait is bounded: in
	 * a fork child the new thread can block on a lock another thread held
	 * at fork (seen with ASan's allocator), and the caller has signals
	 * blocked; the thread then binds when it can. sem_clockwait is a
	 * cancellation point: the caller has cancellation off (constructor,
	 * or the change lock). */
	int e = errno;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += 1;
	while (sem_clockwait(&bound, CLOCK_MONOTONIC, &until) != 0 && errno == EINTR)
		;
	errno = e;
	return __atomic_load_n(&bound_state, __ATOMIC_ACQUIRE) != 0;
}

/* Binds, catches up with the group, serves. alone: no other thread runs
 * (at start, or in a fork child right after fork). */
static void begin(bool fresh, bool alone)
{
	for (int i = 0; i < CLIENTS; i++)
		clients[i].fd = -1;
	if (fresh)
		sweep_dead_sockets();
	fn_cmd_catch_up(alone);
	started = start_thread();
	if (!started)
		fn_say("faultnet: control disabled: cannot serve a socket in %s", rundir);
}

/* A fork child serves faultctl from its first covered call on, not from
 * fork: a child that only execs or _exits (a shell, a prefork pool's idle
 * worker) costs no socket, no thread and no file in the run directory. */
static bool child_pending;

/* Runs under the change lock, at a covered call that found the group's
 * counter moved (or the fork child's deferral: fn_groupseq_defer). */
static void catch_up_live(void)
{
	if (child_pending) {
		child_pending = false;
		begin(false, false);
		return;
	}
	fn_cmd_catch_up(false);
}

/* Maps the group's change counter: from now on every covered call of this
 * process follows the group's changes, thread or no thread. */
static void attach_seq(void)
{
	char path[4200];
	fn_group_file(path, sizeof(path), rundir, group, "seq");
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	const uint64_t *w = fd >= 0 ? fn_seq_map(fd, false) : NULL;
	if (fd >= 0)
		LIBC(close)(fd);
	if (w)
		fn_groupseq_attach(w, catch_up_live);
	else
		fn_say("faultnet: %s: %m: this process follows the group's changes only "
		       "when faultctl sends them",
		       path);
}

const char *fn_control_start(void)
{
	const char *g = secure_getenv("FAULTNET_GROUP");
	if (g && *g && !fn_group_valid(g))
		return "FAULTNET_GROUP: a group name is 1 to 63 letters, digits or _.:-";
	snprintf(group, sizeof(group), "%s", g && *g ? g : FN_GROUP_DEFAULT);
	const char *why = fn_rundir(rundir, sizeof(rundir));
	if (why) {
		fn_say("faultnet: control disabled: run directory %s %s", rundir, why);
		return NULL;
	}
	char journal[4200];
	fn_group_file(journal, sizeof(journal), rundir, group, "journal");
	fn_cmd_set_group(group, journal);
	attach_seq();
	/* FAULTNET_CONTROL=off: the group's state at start, but no thread.
	 * Any second thread switches glibc's syscall wrappers to their
	 * multi-threaded path (about 30 more instructions per cancellable call
	 * in the app), which an app that is single-threaded may not want. */
	const char *ctl = secure_getenv("FAULTNET_CONTROL");
	if (ctl && strcmp(ctl, "off") == 0) {
		fn_cmd_catch_up(true);
		return NULL;
	}
	if (ctl && *ctl && strcmp(ctl, "on") != 0)
		return "FAULTNET_CONTROL: must be on or off";
	begin(true, true);
	return NULL;
}

void fn_control_atfork_child(void)
{
	if (!started)
		return;
	started = false;
	if (private_fds) {
		/* The parent's control fds were in its control thread's table,
		 * which the child has not got: only the memory stays to reset. */
		private_fds = false;
		listen_fd = leader_fd = -1;
		for (int i = 0; i < CLIENTS; i++)
			clients[i].fd = -1;
	}
	/* The parent's listener and clients are the parent's business; our
	 * copies of their fds must go. */
	if (fn_fd_same_file(listen_fd, listen_dev, listen_ino)) {
		fn_fd_set(listen_fd, 0);
		LIBC(close)(listen_fd);
	}
	listen_fd = -1;
	if (fn_fd_same_file(leader_fd, leader_dev, leader_ino)) { /* the parent's main thread */
		fn_fd_set(leader_fd, 0);
		LIBC(close)(leader_fd);
	}
	leader_fd = -1;
	for (int i = 0; i < CLIENTS; i++) {
		if (clients[i].fd >= 0 &&
		    fn_fd_same_file(clients[i].fd, clients[i].dev, clients[i].ino)) {
			fn_fd_set(clients[i].fd, 0);
			LIBC(close)(clients[i].fd);
		}
		free(clients[i].in); /* the parent's, copied */
		fn_buf_free(&clients[i].out);
	}
	memset(clients, 0, sizeof(clients));
	if (fn_groupseq_word) {
		child_pending = true;
		fn_groupseq_defer();
		return;
	}
	begin(false, true);
}

__attribute__((destructor)) static void fn_control_stop(void)
{
	write_stats();
	if (owner_pid == getpid() && sock_path[0])
		unlink(sock_path);
}
