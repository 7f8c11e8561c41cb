/* fdtab.h - what the shim knows about each file descriptor.
 * One flag byte per fd in a static table, so that the question "does the shim
 * care about this fd?" is one bounds check (or mask), one load and one branch,
 * with no lock, allocation or syscall. Faulted sockets also get a state record. */
#ifndef FAULTNET_FDTAB_H
#define FAULTNET_FDTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/rules.h"

#define FN_FD_MAX (1 << 20) /* Linux's default fs.nr_open */

enum {
	FDF_TCP = 1,	  /* an AF_INET/AF_INET6 TCP socket */
	FDF_UDP = 2,	  /* an AF_INET/AF_INET6 UDP socket */
	FDF_FAULT = 4,	  /* a socket the shim redirected; see fn_fdstate */
	FDF_INTERNAL = 8, /* one of the shim's own fds */
};

extern uint8_t fn_fd_flags[FN_FD_MAX];

static inline unsigned fn_fd_get(int fd)
{
	if (__builtin_expect((unsigned)fd >= FN_FD_MAX, 0))
		return 0;
	return __atomic_load_n(&fn_fd_flags[fd], __ATOMIC_RELAXED);
}

/* Whether fd's flags may hold a bit of mask: the receive hooks' first test,
 * in as few instructions as the pass-through can have (a copy and a mask of
 * the fd, the table's address, one test of memory, one branch). An fd at or
 * past FN_FD_MAX (or negative) reads the byte of fd mod FN_FD_MAX, so a yes
 * is only a maybe that the slow path confirms by checking that fd is below
 * FN_FD_MAX; a no is exact, since such an fd has no flags. On x86-64 the
 * test is written out: the compilers load a relaxed atomic into a register
 * before testing it, one instruction more on every unmatched call (a byte
 * load is atomic on that machine, which is all the relaxed load asked
 * for). The asm needs mask as a constant: always inlined, and only
 * where the compiler optimises (at -O0 nothing propagates it). */
static inline __attribute__((always_inline)) bool fn_fd_maybe(int fd, unsigned mask)
{
	const uint8_t *f = &fn_fd_flags[(unsigned)fd & (FN_FD_MAX - 1)];
#if defined(__x86_64__) && defined(__OPTIMIZE__)
	bool any;
	__asm__("testb %2, %1" : "=@ccnz"(any) : "m"(*f), "i"(mask));
	return any;
#else
	return (__atomic_load_n(f, __ATOMIC_RELAXED) & mask) != 0;
#endif
}

static inline void fn_fd_set(int fd, unsigned flags)
{
	if ((unsigned)fd < FN_FD_MAX)
		__atomic_store_n(&fn_fd_flags[fd], (uint8_t)flags, __ATOMIC_RELAXED);
}

/* A redirected socket: the peer the app asked for and where it really went. */
struct fn_fdstate {
	struct sockaddr_storage peer; /* as the app passed it */
	socklen_t peerlen;
	struct sockaddr_storage target; /* the shim's loopback sink */
	socklen_t targetlen;
	dev_t dev; /* identity of the socket, to notice fd reuse */
	ino_t ino;
	uint8_t proto;
	enum fn_action action;
	int dest; /* stats handle, for the bytes counted at close */
	char rule[FN_NAME_MAX];
};

/* The record for fd, created on demand; NULL if fd is out of range or
 * memory is short. */
struct fn_fdstate *fn_fdstate(int fd, bool create);

/* A thread is done with the record of an fd it is closing. */
void fn_fd_released(void);

/* True if fd still refers to the socket the record was made for. */
bool fn_fdstate_current(int fd, const struct fn_fdstate *st);

/* dup and friends: newfd now shares oldfd's socket. */
void fn_fd_copy(int oldfd, int newfd);

/* fd's flags are now flags (a creating call returned it: whatever was
 * recorded for it is stale), with fn_fd_high() raised to it: needed
 * wherever flags may hold FDF_FAULT or FDF_INTERNAL, which close_range
 * clears; TCP and UDP marks alone may be set with fn_fd_set. */
void fn_fd_mark(int fd, unsigned flags);

/* Moves one of the shim's fds out of the app's range, close-on-exec, and
 * marks it internal: above the app's soft RLIMIT_NOFILE where the hard
 * limit leaves room (the soft limit raised for the one dup, under a lock,
 * then restored), else in the top quarter of a limit of 1,024 or more.
 * Where neither can be, the fd is closed and -1 returned with EMFILE: the
 * shim takes no number the app would get (but the events file, opened
 * before main, which stays where it is). Sinks and the control range start
 * 64 apart, so that when the app closes everything and the shim rebuilds,
 * one rarely inherits the other's old number. fd < 0 gives -1. */
enum fn_fd_range { FN_RANGE_SINK, FN_RANGE_CONTROL };
int fn_fd_move_high(int fd, enum fn_fd_range range);

/* Fork: the limit lock is held across it, so that no other thread's raise
 * is left in force in the child; free again on both sides. */
void fn_fd_atfork_prepare(void);
void fn_fd_atfork_parent(void);
void fn_fd_atfork_child(void);

/* True if fd is still the file whose identity was taken as dev and ino:
 * the app may have closed it and reused the number. */
bool fn_fd_same_file(int fd, dev_t dev, ino_t ino);

/* Takes fd's identity; false, leaving dev and ino alone, if fstat fails.
 * These two are the one way the shim asks "is this fd still the one I
 * took?"; fn_ownfd below keeps an fd with its identity. */
bool fn_fd_identify(int fd, dev_t *dev, ino_t *ino);

/* One of the shim's own fds with the identity it had when made: the app
 * may close the number and reuse it, and the shim must then never read,
 * write or close it. */
struct fn_ownfd {
	int fd; /* -1 for none */
	dev_t dev;
	ino_t ino;
};

void fn_ownfd_set(struct fn_ownfd *o, int fd);
bool fn_ownfd_ok(const struct fn_ownfd *o);
/* Closes the fd if it is still the shim's; o holds none after. */
void fn_ownfd_close(struct fn_ownfd *o);

/* FDF_TCP or FDF_UDP for an IPv4/IPv6 socket of that kind, else 0:
 * from the domain, type and protocol socket() was given, or asked of the
 * kernel for an fd the shim did not see created (three syscalls). */
static inline unsigned fn_fd_kind(int domain, int type, int protocol)
{
	/* SOCK_STREAM and SOCK_DGRAM are FDF_TCP and FDF_UDP (asserted
	 * below); AF_INET and AF_INET6 are the two domains d with d | 8 == 10.
	 * A type with flags besides these makes socket() fail: no fd to mark. */
	unsigned t = (unsigned)type & ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC);
	/* Expected: the compilers then keep t where the kind is kept and
	 * zero it only on the way out, one instruction less on an IP socket
	 * (the socket hook's) than zeroing it first. */
	if (__builtin_expect((domain | 8) != AF_INET6 || t - 1 > 1, 0))
		return 0;
	if (__builtin_expect(protocol != 0, 0) &&
	    protocol != (t == FDF_TCP ? IPPROTO_TCP : IPPROTO_UDP))
		return 0;
	return t;
}
_Static_assert((int)SOCK_STREAM == (int)FDF_TCP && (int)SOCK_DGRAM == (int)FDF_UDP &&
		   (AF_INET | 8) == AF_INET6,
	       "fn_fd_kind reads socket types as fd marks");
unsigned fn_fd_kind_of(int fd);
/* The same for a socket whose domain is known (asked already). */
unsigned fn_fd_kind_in(int fd, int domain);

/* Highest fd ever given flags by fn_fd_mark (every fd that had a fault
 * record or was the shim's), so that close_range need not sweep the
 * table. */
int fn_fd_high(void);

#endif
