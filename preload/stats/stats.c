/* stats.c - lock-free counters and the event ring, in the member's
 * published state (fn_seg). Writers are the app's threads (and the relay
 * thread); the reader is faultctl, in its own process. A slot of the
 * destination table is claimed once with a compare-and-swap and never
 * released, so a reader never sees it change owner. */
#include "preload/stats/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/startdata.h"
#include "core/hash.h"
#include "preload/fd/fdtab.h"
#include "preload/base/libc.h"
#include "preload/base/say.h"

int fn_sockets_seen;

/* Until control maps the member's file: never read by anyone, but always
 * there, so that a writer never checks. Untouched pages cost nothing. */
static struct fn_seg own;
struct fn_seg *fn_seg = &own;

static struct fn_jsonl events = {-1, false};

#define SEG_PAGES ((sizeof(struct fn_seg) + 4095) / 4096)
static char backing_path[4400];
static unsigned long backing_ino;
static char *backing_base;
static int backing; /* 1 while fn_seg is the file's mapping */
static int backing_fd = -1;
static uint64_t backed[(SEG_PAGES + 63) / 64];

bool fn_stats_private(void)
{
	return __atomic_load_n(&fn_seg, __ATOMIC_RELAXED) == &own;
}

void fn_stats_backing(const char *path, unsigned long ino, void *base, size_t given)
{
	__atomic_store_n(&backing, 0, __ATOMIC_SEQ_CST);
	if (!path)
		return;
	memset(backed, 0, sizeof(backed));
	for (size_t pg = 0; pg < given && pg < SEG_PAGES; pg++)
		backed[pg / 64] |= 1ull << (pg % 64);
	snprintf(backing_path, sizeof(backing_path), "%s", path);
	backing_ino = ino;
	backing_base = base;
	__atomic_store_n(&backing, 1, __ATOMIC_SEQ_CST);
}

/* Blocks for page pg of the file: 1 given, 0 none left, -1 not known
 * (the file not found under its name, or no fallocate there). */
void fn_stats_backing_fd(int fd)
{
	__atomic_store_n(&backing_fd, fd, __ATOMIC_SEQ_CST);
}

static int give_blocks(size_t pg)
{
	int made = __atomic_load_n(&backing_fd, __ATOMIC_SEQ_CST);
	int fd = made >= 0 ? made : open(backing_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat sb;
	int r = -1;
	/* The file being made is known by its fd (one system call a page
	 * instead of two); one opened by its name again must still be the
	 * file mapped. */
	if (fd == made || (fstat(fd, &sb) == 0 && sb.st_ino == backing_ino))
		r = fallocate(fd, 0, (off_t)(pg * 4096), 4096) == 0	   ? 1
		    : errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? 0
									   : -1;
	if (fd != made)
		LIBC(close)(fd);
	return r;
}

static void stop_publishing(void)
{
	if (!__atomic_exchange_n(&backing, 0, __ATOMIC_SEQ_CST))
		return;
	/* Every page of the file written so far has its blocks; from now on
	 * counts go to private memory, which needs none. */
	mmap(backing_base, sizeof(struct fn_seg), PROT_READ | PROT_WRITE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	fn_say("faultnet: the run directory's file system is full: %s is no longer updated",
	       backing_path);
}

void fn_seg_touch(const void *p, size_t len)
{
	if (!__atomic_load_n(&backing, __ATOMIC_ACQUIRE))
		return;
	if ((const char *)p < backing_base ||
	    (const char *)p >= backing_base + sizeof(struct fn_seg))
		return; /* private memory (the file not yet in use) */
	size_t off = (size_t)((const char *)p - backing_base);
	for (size_t pg = off / 4096; pg <= (off + len - 1) / 4096 && pg < SEG_PAGES; pg++) {
		uint64_t bit = 1ull << (pg % 64);
		if (__atomic_load_n(&backed[pg / 64], __ATOMIC_ACQUIRE) & bit)
			continue;
		int e = errno, r = give_blocks(pg);
		errno = e;
		if (r == 0) {
			stop_publishing();
			return;
		}
		if (r > 0)
			__atomic_or_fetch(&backed[pg / 64], bit, __ATOMIC_RELEASE);
	}
}

/* A page wholly inside the rule index and slots of the file being made: only the
 * listing writes there (under the change lock, before any rule's counters
 * move in), and the page is all holes until its first touch. */
static bool fresh_rule_page(size_t pg)
{
	size_t from = offsetof(struct fn_seg, rule_at), to = offsetof(struct fn_seg, dests);
	return pg * 4096 >= from && (pg + 1) * 4096 <= to &&
	       __atomic_load_n(&backing_fd, __ATOMIC_SEQ_CST) >= 0;
}

/* Such a page gets its blocks by a write of zeros, which on a disk file
 * system only reserves them (delayed allocation) and leaves the page in
 * the page cache, where fallocate allocated each block (scattered pages:
 * an extent each) and the first touch then read the page: 1 or 0 as
 * give_blocks. */
static int give_zeros(size_t pg)
{
	static const char zeros[4096] FN_FAR_RODATA;
	ssize_t w = pwrite(backing_fd, zeros, sizeof(zeros), (off_t)(pg * 4096));
	if (w == (ssize_t)sizeof(zeros))
		return 1;
	return w >= 0 || errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? 0 : -1;
}

void fn_seg_touch_listing(const void *p, size_t len)
{
	if (!__atomic_load_n(&backing, __ATOMIC_ACQUIRE))
		return;
	size_t off = (size_t)((const char *)p - backing_base);
	if ((const char *)p < backing_base || off >= sizeof(struct fn_seg))
		return;
	for (size_t pg = off / 4096; pg <= (off + len - 1) / 4096; pg++) {
		if (!fresh_rule_page(pg)) {
			fn_seg_touch(backing_base + pg * 4096, 1);
			continue;
		}
		uint64_t bit = 1ull << (pg % 64);
		if (__atomic_load_n(&backed[pg / 64], __ATOMIC_ACQUIRE) & bit)
			continue;
		int e = errno, r = give_zeros(pg);
		errno = e;
		if (r == 0) {
			stop_publishing();
			return;
		}
		if (r > 0) {
			__atomic_or_fetch(&backed[pg / 64], bit, __ATOMIC_RELEASE);
			/* Mapped for writing at once: the listing first reads the
			 * page, and a read maps a shared file's page read-only,
			 * which its write then faults on again. Adding 0 changes
			 * nothing, whoever writes there. */
			__atomic_fetch_add((uint64_t *)(backing_base + pg * 4096), 0,
					   __ATOMIC_RELAXED);
		}
	}
}

void fn_stats_socket_first(void)
{
	/* Sequentially consistent, as the store in fn_seg when control maps
	 * a new file (segfile.c) and its read of the flag: a socket seen
	 * meanwhile is in the one or the other. */
	__atomic_store_n(&fn_sockets_seen, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&__atomic_load_n(&fn_seg, __ATOMIC_SEQ_CST)->h.sockets_seen, 1,
			 __ATOMIC_RELAXED);
}

static uint64_t hash(const struct fn_endpoint *ep, uint8_t proto)
{
	return fn_hash_bytes(FN_HASH_START, ep, sizeof(*ep)) ^ proto;
}

static struct fn_seg_dest *dest_for(const struct fn_endpoint *ep, uint8_t proto)
{
	struct fn_endpoint key;
	memset(&key, 0, sizeof(key));
	key.v4 = ep->v4;
	memcpy(key.ip, ep->ip, sizeof(key.ip));
	key.port = ep->port;
	uint64_t h = hash(&key, proto);
	for (int i = 0; i < 64; i++) {
		struct fn_seg_dest *d = &fn_seg->dests[(h + (uint64_t)i) % FN_SEG_DESTS];
		fn_seg_touch(d, sizeof(*d));
		if (fn_slot_claim(&d->state)) {
			d->ep = key;
			d->proto = proto;
			fn_slot_ready(&d->state);
			return d;
		}
		if (d->proto == proto && memcmp(&d->ep, &key, sizeof(key)) == 0)
			return d;
	}
	fn_seg_touch(&fn_seg->dests[FN_SEG_DESTS], sizeof(fn_seg->dests[0]));
	return &fn_seg->dests[FN_SEG_DESTS];
}

const char *fn_errname(int e)
{
	if (e == 0)
		return "ok";
	const char *n = strerrorname_np(e);
	return n ? n : "error";
}

static int64_t usec(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A FIFO's reader that left raises SIGPIPE in the writing thread: blocked
 * around the write, and taken back unless one was already pending. A line
 * the reader has no room for is dropped (the fd is non-blocking); lines are
 * shorter than PIPE_BUF, so never torn. */
static bool write_fd(const struct fn_jsonl *j, int fd, const char *line, size_t n)
{
	if (!j->pipe)
		return write(fd, line, n) == (ssize_t)n;
	sigset_t pipe, old, pending;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	bool was = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	ssize_t w = write(fd, line, n);
	if (w < 0 && errno == EPIPE && !was) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return w == (ssize_t)n;
}

/* With cancellation off: write is a cancellation point, and the caller may
 * hold a section on the policy (preload/base/policy.h), which a cancelled
 * thread would never close. errno is kept. */
bool fn_jsonl_write(struct fn_jsonl *j, const char *line, size_t n)
{
	int fd = __atomic_load_n(&j->fd, __ATOMIC_RELAXED);
	if (fd < 0)
		return true;
	int cancel, e = errno;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	bool ok = write_fd(j, fd, line, n);
	pthread_setcancelstate(cancel, NULL);
	errno = e;
	return ok;
}

const char *fn_jsonl_open(struct fn_jsonl *j, const char *path, bool nofollow)
{
	/* Non-blocking: a FIFO nobody reads yet must not hold the process
	 * before main; it gets no lines. */
	int fd = open(path,
		      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK |
			  (nofollow ? O_NOFOLLOW : 0),
		      0600);
	if (fd < 0)
		return errno == ENXIO ? "nothing reads it (a FIFO without a reader, or a socket): "
					"nothing written"
		       : errno == ELOOP && nofollow
			   ? "a symbolic link: not followed, nothing written"
			   : strerror(errno);
	struct stat sb;
	j->pipe = fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode);
	__atomic_store_n(&j->fd, fn_fd_move_high(fd, FN_RANGE_CONTROL), __ATOMIC_RELAXED);
	return NULL;
}

void fn_jsonl_lost(struct fn_jsonl *j, int fd)
{
	int cur = fd;
	__atomic_compare_exchange_n(&j->fd, &cur, -1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void json_event(const struct fn_seg_event *e)
{
	char line[512];
	size_t n = fn_seg_event_json(e, (int)getpid(), line, sizeof(line));
	if (n && !fn_jsonl_write(&events, line, n))
		__atomic_add_fetch(&fn_seg->h.events_dropped, 1, __ATOMIC_RELAXED);
}

static void record_event(int fd, const struct fn_rule *r, const struct fn_rule *seen,
			 const struct fn_endpoint *ep, uint8_t proto, const char *outcome)
{
	struct fn_seg *g = fn_seg;
	uint64_t seq = __atomic_fetch_add(&g->h.ring_head, 1, __ATOMIC_RELAXED);
	struct fn_seg_event *e = &g->ring[seq % FN_SEG_EVENTS];
	fn_seg_touch(e, sizeof(*e));
	g = fn_seg; /* the same address, file or not */
	__atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
	e->wall_us = usec(CLOCK_REALTIME);
	e->mono_us = usec(CLOCK_MONOTONIC);
	e->fd = fd;
	e->proto = proto;
	e->action = r ? (int8_t)r->action : -1;
	e->ep = *ep;
	snprintf(e->rule, sizeof(e->rule), "%s", seen ? seen->name : "-");
	snprintf(e->outcome, sizeof(e->outcome), "%s", outcome);
	__atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&events.fd, __ATOMIC_RELAXED) >= 0)
		json_event(e);
}

void fn_stats_event(const struct fn_rule *r, const struct fn_rule *seen,
		    const struct fn_endpoint *ep, const char *outcome)
{
	int e = errno;
	record_event(-1, r, seen, ep, FN_PROTO_TCP, outcome);
	errno = e;
}

int fn_stats_attempt(int fd, const struct fn_rule *r, const struct fn_rule *seen,
		     const struct fn_endpoint *ep, uint8_t proto, const char *outcome,
		     uint64_t bytes)
{
	int e = errno;
	struct fn_seg_dest *d = dest_for(ep, proto);
	__atomic_add_fetch(&d->attempts, 1, __ATOMIC_RELAXED);
	if (seen && seen->stat)
		__atomic_add_fetch(&seen->stat->n->attempts, 1, __ATOMIC_RELAXED);
	if (r) {
		__atomic_add_fetch(&d->faults, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&d->by_action[r->action], 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&d->bytes, bytes, __ATOMIC_RELAXED);
		if (r->stat) {
			__atomic_add_fetch(&r->stat->n->faults, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&r->stat->n->bytes, bytes, __ATOMIC_RELAXED);
		}
	}
	record_event(fd, r, seen, ep, proto, outcome);
	errno = e;
	return (int)(d - fn_seg->dests);
}

void fn_stats_bytes(int handle, uint64_t bytes)
{
	if (handle >= 0 && handle <= FN_SEG_DESTS)
		fn_seg_touch(&fn_seg->dests[handle], sizeof(fn_seg->dests[0]));
	if (handle >= 0 && handle <= FN_SEG_DESTS)
		__atomic_add_fetch(&fn_seg->dests[handle].bytes, bytes, __ATOMIC_RELAXED);
}

void fn_stats_fd_lost(int fd)
{
	fn_jsonl_lost(&events, fd);
	fn_reqlog_fd_lost(fd);
}

void fn_stats_atfork_child(void)
{
	for (int i = 0; i < FN_SEG_DESTS; i++)
		if (fn_seg->dests[i].state == FN_SLOT_CLAIMING)
			fn_seg->dests[i].state = FN_SLOT_FREE;
}

const char *fn_events_open(void)
{
	const char *path = secure_getenv("FAULTNET_EVENTS");
	if (!path || !*path)
		return NULL;
	return fn_jsonl_open(&events, path, false);
}
