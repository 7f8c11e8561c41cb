/* libc.c - resolves the real libc symbols once. dlsym may allocate, which is
 * fine: the shim does not interpose malloc. */
#include "preload/base/libc.h"

#include <dlfcn.h>

/* The receive paths every program takes start as stubs that resolve and
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

struct fn_libc fn_libc = {.recv = first_recv,
			  .recvfrom = first_recvfrom,
			  .recvmsg = first_recvmsg,
			  .read = first_read,
			  .readv = first_readv};

#define RESOLVE(field, sym) *(void **)&fn_libc.field = dlsym(RTLD_NEXT, sym)

void fn_libc_resolve(void)
{
	RESOLVE(socket, "socket");
	RESOLVE(connect, "connect");
	RESOLVE(accept, "accept");
	RESOLVE(accept4, "accept4");
	RESOLVE(close, "close");
	RESOLVE(close_range, "close_range");
	RESOLVE(dup, "dup");
	RESOLVE(dup2, "dup2");
	RESOLVE(dup3, "dup3");
	RESOLVE(fcntl, "fcntl");
	RESOLVE(fcntl64, "fcntl64");
	RESOLVE(getpeername, "getpeername");
	RESOLVE(sendto, "sendto");
	RESOLVE(sendmsg, "sendmsg");
	RESOLVE(sendmmsg, "sendmmsg");
	RESOLVE(recv, "recv");
	RESOLVE(recvfrom, "recvfrom");
	RESOLVE(recvmsg, "recvmsg");
	RESOLVE(recvmmsg, "recvmmsg");
	RESOLVE(read, "read");
	RESOLVE(readv, "readv");
	RESOLVE(read_chk, "__read_chk");
	RESOLVE(recv_chk, "__recv_chk");
	RESOLVE(recvfrom_chk, "__recvfrom_chk");
	RESOLVE(dlopen, "dlopen");
	RESOLVE(getaddrinfo, "getaddrinfo");
	RESOLVE(getaddrinfo_a, "getaddrinfo_a");
	RESOLVE(gai_suspend, "gai_suspend");
	RESOLVE(gai_cancel, "gai_cancel");
	RESOLVE(gethostbyname, "gethostbyname");
	RESOLVE(gethostbyname2, "gethostbyname2");
	RESOLVE(gethostbyname_r, "gethostbyname_r");
	RESOLVE(gethostbyname2_r, "gethostbyname2_r");
	/* Older glibc has no fcntl64: plain fcntl already takes 64-bit offsets
	 * on 64-bit targets. */
	if (!fn_libc.fcntl64)
		fn_libc.fcntl64 = fn_libc.fcntl;
}
