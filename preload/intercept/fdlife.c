/* fdlife.c - follows file descriptors through their lives: which are TCP or
 * UDP sockets, which the shim redirected, which are its own, across socket,
 * accept, dup, fcntl and close. Any fd a creating call returns is treated as
 * new, whatever was recorded for its number before. */
#include <dirent.h>
#include <unistd.h>
#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "preload/dns/responder.h"
#include "core/rawsys.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/owner.h"
#include "preload/fd/tcpbytes.h"
#include "preload/intercept/intercept.h"
#include "preload/relay/reinject.h"
#include "preload/base/groupseq.h"
#include "preload/relay/relay.h"
#include "preload/sink/sink.h"
#include "preload/stats/stats.h"

/* Until the process's first IPv4 or IPv6 socket, socket() goes through
 * here, which tells the stats that the app makes socket calls (faultctl
 * ps: "no socket calls seen" otherwise) and then hands socket() to libc's
 * directly: the hook's pass-through then keeps no test for it. That first
 * socket is a covered call: a process that has not joined its group joins
 * there (the network use it starts is what faultctl is asked about). */
static int socket_first_seen(int domain, int type, int protocol);
static int (*socket_call)(int, int, int) = socket_first_seen;
/* Read as a plain pointer, which the compilers fold into the call (one
 * instruction: a relaxed atomic load is a load into a register first,
 * one more on every socket); it moves once, from one function to
 * another, each whole. ThreadSanitizer would call the plain read a race:
 * there it stays atomic. */
#if defined(__SANITIZE_THREAD__)
#define SOCKET_CALL __atomic_load_n(&socket_call, __ATOMIC_RELAXED)
#else
#define SOCKET_CALL socket_call
#endif

static __attribute__((noinline, cold)) int socket_first_seen(int domain, int type, int protocol)
{
	int fd = LIBC_HOT(socket)(domain, type, protocol);
	if (fd >= 0 && fn_fd_kind(domain, type, protocol)) {
		fn_stats_socket_seen();
		__atomic_store_n(&socket_call, LIBC_HOT(socket), __ATOMIC_RELAXED);
		fn_groupseq_check();
	}
	return fd;
}

/* The kind is judged before the call, so that only it (not the three
 * arguments) is kept across it: fewer registers saved on every socket.
 * Its TCP or UDP mark needs no fn_fd_mark: close_range sweeps only up to
 * the highest fd with a fault record or of the shim's. */
int fn_socket(int domain, int type, int protocol)
{
	unsigned kind = fn_fd_kind(domain, type, protocol);
	int fd = SOCKET_CALL(domain, type, protocol);
	if (fd >= 0)
		fn_fd_set(fd, kind);
	return fd;
}

int fn_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags, bool four)
{
	int nfd = four ? LIBC(accept4)(fd, sa, len, flags) : LIBC(accept)(fd, sa, len);
	/* Accepted sockets are incoming: outgoing rules never apply. */
	if (nfd >= 0)
		fn_fd_set(nfd, 0);
	return nfd;
}

/* One of the shim's fds was closed or replaced by the app. */
static void internal_lost(int fd)
{
	int e = errno;
	fn_sink_lost(fd);
	fn_relay_lost(fd);
	fn_reinject_lost(fd);
	fn_dns_responder_lost(fd);
	fn_stats_fd_lost(fd);
	errno = e;
}

/* What the app managed to send into a faulted TCP connection (a stall
 * swallows it) is counted when it closes. */
static void count_bytes(int fd)
{
	struct fn_fdstate *st = fn_fdstate(fd, false);
	int e = errno;
	if (st && st->proto == FN_PROTO_TCP && fn_fdstate_current(fd, st)) {
		fn_stats_bytes(st->dest, fn_tcp_bytes_acked(fd));
		if (st->action == FN_ACT_STALL)
			fn_sink_stall_closed(&st->target);
	}
	errno = e;
}

#define SHIM_STATE (FDF_FAULT | FDF_INTERNAL)

/* A close of a faulted socket or of one of the shim's fds, out of line:
 * inlined, its locals made every close save six registers. */
static __attribute__((noinline)) int close_marked(int fd)
{
	unsigned f = fn_fd_get(fd); /* fn_fd_maybe's yes was only a maybe */
	if (!(f & SHIM_STATE) || fn_in_vfork_child())
		return LIBC(close)(fd);
	if (f & FDF_FAULT)
		count_bytes(fd);
	/* Clear first: once closed, the number may be handed to another
	 * thread's socket() before we get to clear it. */
	fn_fd_set(fd, f & ~(unsigned)SHIM_STATE);
	fn_fd_released();
	int r = LIBC(close)(fd);
	if (f & FDF_INTERNAL)
		internal_lost(fd);
	return r;
}

int fn_close(int fd)
{
	/* The TCP and UDP marks may stay: the next creating call resets them.
	 * Only fault records and the shim's own fds need work, and never in
	 * a vfork child, whose memory is its parent's. */
	if (__builtin_expect(!fn_fd_maybe(fd, SHIM_STATE), 1))
		return LIBC_HOT(close)(fd);
	return close_marked(fd);
}

int fn_close_range(unsigned int lo, unsigned int hi, int flags)
{
	if (!fn_libc.close_range && (fn_libc_resolve(), !fn_libc.close_range)) {
		errno = ENOSYS;
		return -1;
	}
	int r = LIBC(close_range)(lo, hi, flags);
	if (r < 0 || (flags & CLOSE_RANGE_CLOEXEC) || fn_in_vfork_child())
		return r;
	/* Rebuild only after the sweep, so that a sink rebuilt on a number the
	 * sweep has not reached yet is not swept too. */
	int lost[32], nlost = 0;
	unsigned top = (unsigned)fn_fd_high();
	for (unsigned fd = lo; fd <= hi && fd <= top; fd++) {
		unsigned f = fn_fd_get((int)fd);
		if (!(f & SHIM_STATE))
			continue;
		fn_fd_set((int)fd, f & ~(unsigned)SHIM_STATE);
		fn_fd_released();
		if ((f & FDF_INTERNAL) && nlost < 32)
			lost[nlost++] = (int)fd;
	}
	for (int i = 0; i < nlost; i++)
		internal_lost(lost[i]);
	return r;
}

/* newfd now shares oldfd's socket: copy what the shim knows, unless there
 * is nothing to change (always the case for a vfork child's dup2 of a pipe
 * onto 0, 1 or 2, which must not touch the parent's table). */
static void duplicated(int oldfd, int newfd)
{
	unsigned from = fn_fd_get(oldfd) & ~(unsigned)FDF_INTERNAL, to = fn_fd_get(newfd);
	if ((from == to && !(from & FDF_FAULT)) || fn_in_vfork_child())
		return;
	fn_fd_copy(oldfd, newfd);
	if (to & FDF_INTERNAL)
		internal_lost(newfd);
}

int fn_dup(int fd)
{
	int nfd = LIBC(dup)(fd);
	if (nfd >= 0)
		duplicated(fd, nfd);
	return nfd;
}

/* which: 2 for dup2, 3 for dup3. */
int fn_dup3(int oldfd, int newfd, int flags, int which)
{
	int r = which == 2 ? LIBC(dup2)(oldfd, newfd) : LIBC(dup3)(oldfd, newfd, flags);
	if (r >= 0 && oldfd != newfd)
		duplicated(oldfd, newfd);
	return r;
}

int fn_fcntl(int fd, int cmd, void *arg, bool is64)
{
	int r = is64 ? LIBC(fcntl64)(fd, cmd, arg) : LIBC(fcntl)(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		duplicated(fd, r);
	return r;
}

/* An entry of /proc/self/fd as its fd, -1 for "." and "..": by hand, as
 * strtol would touch the pages of the locale's tables at every start. */
static int fd_name(const char *s)
{
	long fd = 0;
	do {
		if (*s < '0' || *s > '9' || fd > (INT_MAX - 9) / 10)
			return -1;
		fd = fd * 10 + (*s - '0');
	} while (*++s);
	return (int)fd;
}

/* fd marked with kind (0: not a socket, left alone): the fd table is read
 * only for a socket, so its pages are touched at start only when there is
 * one. */
static void classify(int fd, unsigned kind)
{
	if (kind && !fn_fd_get(fd))
		fn_fd_mark(fd, kind);
}

/* The fds the process started with, listed from /proc/self/fd with
 * getdents64 into a buffer on the stack: opendir's malloc of 32 KiB and
 * its fstat were 11k instructions and a system call of every start. By
 * syscall(), whose page of libc's code the start has touched already
 * (core/clock.c, core/rundir.c): libc's getdents64 lay on a page of its
 * own, one more fault at every start. */
static void classify_listed(void)
{
	int dir = fn_open_raw("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[2048] __attribute__((aligned(8)));
	ssize_t n;
	while (dir >= 0 && (n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0)
		for (ssize_t at = 0; at < n;) {
			struct dirent64 *ent = (struct dirent64 *)(buf + at);
			at += ent->d_reclen;
			int fd = fd_name(ent->d_name);
			if (fd >= 0 && fd != dir)
				classify(fd, fn_fd_kind_of(fd));
		}
	if (dir >= 0)
		LIBC(close)(dir);
}

/* The most open fds that are found by asking each number in turn, and how
 * many numbers past their count are asked before the listing is used. */
#define COUNTED_MAX 32
#define COUNTED_GAP 8

/* The fds the process started with, found without the listing: Linux 6.2
 * and later give the number of a process's open fds as the size of
 * /proc/self/fd, one stat, where the listing made procfs an entry for
 * each fd (half of its 60 µs at a start, here). The numbers are then asked
 * from 0 up, one getsockopt each (EBADF: not open), which costs less while
 * the fds lie low, as a start's do (its three; a socket activation's from
 * 3 up). True when all were found; false with an older kernel (a size of
 * 0), many fds, or one past the gap: the listing then finds them. */
static bool classify_counted(void)
{
	struct stat sb;
	if (fn_stat_raw("/proc/self/fd", &sb) != 0 || sb.st_size <= 0 || sb.st_size > COUNTED_MAX)
		return false;
	long want = sb.st_size, found = 0;
	for (int fd = 0; found < want && fd < want + COUNTED_GAP; fd++) {
		int domain;
		socklen_t len = sizeof(domain);
		if (fn_getsockopt_raw(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0)
			classify(fd, fn_fd_kind_in(fd, domain));
		else if (errno == EBADF)
			continue;
		found++;
	}
	return found == want;
}

/* The count serves only a process with one thread: another (started by
 * the constructor of a library loaded before the shim) could open an fd
 * below an inherited socket between the count and the questions, and so
 * make up the count before the socket was reached. The listing misses no
 * socket that stays open. */
void fn_fd_classify_inherited(void)
{
	int e = errno;
	if (!__libc_single_threaded || !classify_counted())
		classify_listed();
	errno = e;
}
