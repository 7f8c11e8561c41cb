/* fdtab.c - per-fd flags and the lazily allocated records of redirected
 * sockets. Records live in chunks that are never freed, so a racing reader
 * can never touch freed memory. */
#include "preload/fd/fdtab.h"
#include "core/rawsys.h"
#include "core/startdata.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "preload/base/libc.h"
#include "preload/base/signals.h"

#define CHUNK 256

uint8_t fn_fd_flags[FN_FD_MAX];

static struct fn_fdstate *chunks[FN_FD_MAX / CHUNK];
static int high_fd;

static void note_high(int fd)
{
	int h = __atomic_load_n(&high_fd, __ATOMIC_RELAXED);
	while (fd > h && !__atomic_compare_exchange_n(&high_fd, &h, fd, true, __ATOMIC_RELAXED,
						      __ATOMIC_RELAXED))
		;
}

void fn_fd_mark(int fd, unsigned flags)
{
	if (flags)
		note_high(fd);
	fn_fd_set(fd, flags);
}

int fn_fd_high(void)
{
	return __atomic_load_n(&high_fd, __ATOMIC_RELAXED);
}

/* A record is handed from the thread that closed an fd to the thread that
 * gets the same number from the kernel next. The kernel orders the two
 * calls; this counter says so in the language's memory model too (and to
 * ThreadSanitizer): a close releases it, a record's user acquires it. */
static uint64_t fd_epoch;

void fn_fd_released(void)
{
	__atomic_add_fetch(&fd_epoch, 1, __ATOMIC_RELEASE);
}

struct fn_fdstate *fn_fdstate(int fd, bool create)
{
	if ((unsigned)fd >= FN_FD_MAX)
		return NULL;
	(void)__atomic_load_n(&fd_epoch, __ATOMIC_ACQUIRE);
	struct fn_fdstate **slot = &chunks[fd / CHUNK];
	struct fn_fdstate *c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!c && create) {
		/* From the kernel, not malloc: a fork child's first faulted
		 * socket must not wait on an allocator lock that another of the
		 * parent's threads held at fork (seen with ASan's allocator,
		 * which has no fork handlers). */
		struct fn_fdstate *fresh =
		    mmap(NULL, CHUNK * sizeof(*fresh), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (fresh == MAP_FAILED)
			return NULL;
		if (__atomic_compare_exchange_n(slot, &c, fresh, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			c = fresh;
		else
			munmap(fresh, CHUNK * sizeof(*fresh));
	}
	if (c)
		note_high(fd);
	return c ? &c[fd % CHUNK] : NULL;
}

bool fn_fdstate_current(int fd, const struct fn_fdstate *st)
{
	return fn_fd_same_file(fd, st->dev, st->ino);
}

void fn_fd_copy(int oldfd, int newfd)
{
	unsigned f = fn_fd_get(oldfd) & ~(unsigned)FDF_INTERNAL;
	if (f & FDF_FAULT) {
		struct fn_fdstate *from = fn_fdstate(oldfd, false);
		struct fn_fdstate *to = fn_fdstate(newfd, true);
		if (from && to)
			memcpy(to, from, sizeof(*to));
		else
			f &= ~(unsigned)FDF_FAULT;
	}
	note_high(newfd);
	fn_fd_set(newfd, f);
}

/* Serializes the shim's own raises of the soft limit: a second mover that
 * read a raised limit would take it for the app's and keep it. */
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

/* fd moved to the lowest free number from base on, while the soft limit
 * is raised to up for the one fcntl; then the app's soft limit again. If
 * the app changed its limit meanwhile (another of its threads), that
 * value stays. -1 when the kernel refused. Lock held. */
static int dup_raised(int fd, int base, struct rlimit app, rlim_t up)
{
	struct rlimit raised = {up, app.rlim_max}, seen;
	if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
		return -1;
	int hi = LIBC(fcntl)(fd, F_DUPFD_CLOEXEC, base);
	if (prlimit(0, RLIMIT_NOFILE, &app, &seen) == 0 && seen.rlim_cur != up)
		setrlimit(RLIMIT_NOFILE, &seen);
	return hi;
}

/* Where the hard limit leaves room, above the app's soft limit; where it
 * does not, in the top quarter of a limit of 1,024 or more (the app meets
 * those numbers only with over 768 fds open); else nowhere: -1. */
static int place(int fd, int off)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	rlim_t up = rl.rlim_max < FN_FD_MAX ? rl.rlim_max : FN_FD_MAX;
	if (up > rl.rlim_cur + (rlim_t)off)
		return dup_raised(fd, (int)rl.rlim_cur + off, rl, up);
	if (rl.rlim_cur >= 1024)
		return LIBC(fcntl)(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur * 3 / 4) + off);
	return -1;
}

int fn_fd_move_high(int fd, enum fn_fd_range range)
{
	if (fd < 0)
		return -1;
	int e = errno;
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&limit_lock);
	int hi = place(fd, range == FN_RANGE_CONTROL ? 64 : 0);
	pthread_mutex_unlock(&limit_lock);
	fn_signals_restore(&old);
	if (hi < 0 && range == FN_RANGE_CONTROL) {
		hi = fd; /* the events file, opened before main: kept where it is */
	} else {
		LIBC(close)(fd);
		if (hi < 0) {
			errno = EMFILE;
			return -1;
		}
	}
	fn_fd_mark(hi, FDF_INTERNAL);
	errno = e;
	return hi;
}

static sigset_t fork_mask; /* the forking thread's, while it holds the lock */

void fn_fd_atfork_prepare(void)
{
	sigset_t old;
	fn_signals_block(&old);
	pthread_mutex_lock(&limit_lock);
	fork_mask = old;
}

void fn_fd_atfork_parent(void)
{
	sigset_t old = fork_mask;
	pthread_mutex_unlock(&limit_lock);
	fn_signals_restore(&old);
}

void fn_fd_atfork_child(void)
{
	pthread_mutex_init(&limit_lock, NULL);
	fn_signals_restore(&fork_mask);
}

bool fn_fd_same_file(int fd, dev_t dev, ino_t ino)
{
	struct stat sb;
	return fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == dev && sb.st_ino == ino;
}

bool fn_fd_identify(int fd, dev_t *dev, ino_t *ino)
{
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0)
		return false;
	*dev = sb.st_dev;
	*ino = sb.st_ino;
	return true;
}

void fn_ownfd_set(struct fn_ownfd *o, int fd)
{
	o->fd = fd;
	if (fd >= 0)
		fn_fd_identify(fd, &o->dev, &o->ino);
}

bool fn_ownfd_ok(const struct fn_ownfd *o)
{
	return o->fd >= 0 && fn_fd_same_file(o->fd, o->dev, o->ino);
}

void fn_ownfd_close(struct fn_ownfd *o)
{
	if (fn_ownfd_ok(o))
		LIBC(close)(o->fd);
	o->fd = -1;
}

FN_START_TEXT unsigned fn_fd_kind_in(int fd, int domain)
{
	int type, proto;
	socklen_t len = sizeof(int);
	if ((domain | 8) != AF_INET6) /* not IP (fn_fd_kind): nothing more to ask */
		return 0;
	if (fn_getsockopt_raw(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return 0;
	len = sizeof(int);
	if (fn_getsockopt_raw(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) < 0)
		return 0;
	return fn_fd_kind(domain, type, proto);
}

FN_START_TEXT unsigned fn_fd_kind_of(int fd)
{
	int domain;
	socklen_t len = sizeof(int);
	if (fn_getsockopt_raw(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
		return 0;
	return fn_fd_kind_in(fd, domain);
}
