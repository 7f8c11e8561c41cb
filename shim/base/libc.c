/* libc.c - resolves the real libc symbols once. dlsym may allocate, which is
 * fine: the shim does not interpose malloc. */
#include "shim/base/libc.h"

#include <dlfcn.h>

struct fn_libc fn_libc;

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
