/* libc.c - resolves the real libc symbols once: most at start, the ones
 * hooks.list marks "first call" at their first call. dlsym may allocate,
 * which is fine: the shim does not interpose malloc. */
#include "preload/base/libc.h"
#include "core/startdata.h"
#include "preload/base/elfsym.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

/* The receive paths every program takes (and socket, sendto and close)
 * start as stubs that resolve and
 * go on: their hooks then jump through the pointer with no test of it
 * (LIBC_HOT), and a hook that runs before the constructor still works. */
static ssize_t first_recv(int fd, void *buf, size_t n, int flags)
{
	fn_libc_resolve();
	return fn_libc.recv(fd, buf, n, flags);
}

static ssize_t first_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa,
			      socklen_t *len)
{
	fn_libc_resolve();
	return fn_libc.recvfrom(fd, buf, n, flags, sa, len);
}

static ssize_t first_recvmsg(int fd, struct msghdr *msg, int flags)
{
	fn_libc_resolve();
	return fn_libc.recvmsg(fd, msg, flags);
}

static ssize_t first_read(int fd, void *buf, size_t n)
{
	fn_libc_resolve();
	return fn_libc.read(fd, buf, n);
}

static ssize_t first_readv(int fd, const struct iovec *iov, int iovcnt)
{
	fn_libc_resolve();
	return fn_libc.readv(fd, iov, iovcnt);
}

/* The same for the calls every UDP socket makes: socket, sendto, close. */
static int first_socket(int domain, int type, int protocol)
{
	fn_libc_resolve();
	return fn_libc.socket(domain, type, protocol);
}

static ssize_t first_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
			    socklen_t len)
{
	fn_libc_resolve();
	return fn_libc.sendto(fd, buf, n, flags, sa, len);
}

static int first_close(int fd)
{
	fn_libc_resolve();
	return fn_libc.close(fd);
}

/* A version named by the list's fourth field is looked up as that version. */
FN_START_TEXT static void *libc_lookup(const char *sym, const char *version)
{
	return version ? dlvsym(RTLD_NEXT, sym, version) : dlsym(RTLD_NEXT, sym);
}

/* At start, the tables read directly when they can tell (elfsym.h). */
FN_START_TEXT static void *start_lookup(const struct fn_elfsym_scope *s, const char *sym,
					const char *version)
{
	void *p = version ? NULL : fn_elfsym_next(s, sym);
	return p ? p : libc_lookup(sym, version);
}

/* The real function behind a "first call" hook (hooks.list), looked up
 * when the hook first passes a call on and kept: a start pays no dlsym for
 * the resolver's, dlopen's or TLS libraries' functions it never calls. Two
 * threads that race store the same pointer (relaxed: a reader sees the stub
 * or the function, both right). None of these is async-signal-safe, so no
 * handler may reach this dlsym by the rules of the app's own call. */
static void *first_call(void **slot, const char *sym, const char *version)
{
	void *real = libc_lookup(sym, version);
	if (real)
		__atomic_store_n(slot, real, __ATOMIC_RELAXED);
	return real;
}

#define FIRST_CALL(field, sym, version, ret, params, args)                                        \
	static ret first_##field params                                                           \
	{                                                                                         \
		__typeof__(fn_libc.field) real =                                                  \
		    (__typeof__(fn_libc.field))first_call((void **)&fn_libc.field, sym, version); \
		return real args;                                                                 \
	}
FN_LIBC_FIRST_CALL(FIRST_CALL)

#define FIRST_CALL_INIT(field, sym, version, ret, params, args) .field = first_##field,

struct fn_libc fn_libc = {FN_LIBC_FIRST_CALL(FIRST_CALL_INIT).socket = first_socket,
			  .sendto = first_sendto,
			  .close = first_close,
			  .recv = first_recv,
			  .recvfrom = first_recvfrom,
			  .recvmsg = first_recvmsg,
			  .read = first_read,
			  .readv = first_readv};

#define RESOLVE(field, sym, version) *(void **)&fn_libc.field = start_lookup(&scope, sym, version);

FN_START_TEXT void fn_libc_resolve(void)
{
	/* The tables only at the first resolve (the start's): a later one
	 * (a field still NULL, a function this libc lacks) asks dlsym, which
	 * holds the loader's lock against a dlclose meanwhile. With the
	 * start's other variables: alone in .bss, its page was a fault of
	 * every start. */
	static bool resolved FN_START_DATA;
	struct fn_elfsym_scope scope = {.n = 0};
	if (!__atomic_exchange_n(&resolved, true, __ATOMIC_RELAXED))
		fn_elfsym_scope(&scope);
	FN_LIBC_SYMBOLS(RESOLVE)
	/* Older glibc has no fcntl64: plain fcntl already takes 64-bit offsets
	 * on 64-bit targets. */
	if (!fn_libc.fcntl64)
		fn_libc.fcntl64 = fn_libc.fcntl;
}
