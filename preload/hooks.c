/* hooks.c - the only symbols the shim exports: each interposed libc function
 * is one line that hands over to the shim's internal function. Fortified
 * (_chk) variants keep their bounds check and join the same path. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "preload/base/libc.h"
#include "preload/dns/resolve.h"
#include "preload/intercept/intercept.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int socket(int domain, int type, int protocol)
{
	return fn_socket(domain, type, protocol);
}

EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	return fn_connect(fd, sa, len);
}

EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	return fn_accept4(fd, sa, len, 0, false);
}

EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	return fn_accept4(fd, sa, len, flags, true);
}

/* A tail call all the way to libc's dlopen, which reads its caller's
 * address to find the RUNPATH to search: the caller must stay the app. */
EXPORT void *dlopen(const char *file, int flags)
{
	return fn_dlopen(file, flags);
}

/* The resolver: dns rules, and the names connect rules with match.host
 * look for (preload/dns). */
EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	return fn_getaddrinfo(node, service, hints, res);
}

EXPORT int getaddrinfo_a(int mode, struct gaicb *list[], int n, struct sigevent *sevp)
{
	return fn_getaddrinfo_a(mode, list, n, sevp);
}

EXPORT int gai_suspend(const struct gaicb *const list[], int n, const struct timespec *timeout)
{
	return fn_gai_suspend(list, n, timeout);
}

EXPORT int gai_cancel(struct gaicb *req)
{
	return fn_gai_cancel(req);
}

EXPORT struct hostent *gethostbyname(const char *name)
{
	return fn_gethostbyname2(name, AF_INET, false);
}

EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	return fn_gethostbyname2(name, af, true);
}

EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
			   struct hostent **result, int *h_errnop)
{
	return fn_gethostbyname2_r(name, AF_INET, ret, buf, buflen, result, h_errnop, false);
}

EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf, size_t buflen,
			    struct hostent **result, int *h_errnop)
{
	return fn_gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop, true);
}

EXPORT int getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
	return fn_getpeername(fd, sa, len);
}

EXPORT int close(int fd)
{
	return fn_close(fd);
}

EXPORT int close_range(unsigned int lo, unsigned int hi, int flags)
{
	return fn_close_range(lo, hi, flags);
}

EXPORT int dup(int fd)
{
	return fn_dup(fd);
}

EXPORT int dup2(int oldfd, int newfd)
{
	return fn_dup3(oldfd, newfd, 0, 2);
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	return fn_dup3(oldfd, newfd, flags, 3);
}

/* fcntl's third argument is an int or a pointer by command; passing it on
 * as a pointer-sized value preserves either. */
#define FCNTL_BODY(is64)                \
	va_list ap;                     \
	va_start(ap, cmd);              \
	void *arg = va_arg(ap, void *); \
	va_end(ap);                     \
	return fn_fcntl(fd, cmd, arg, is64)

EXPORT int fcntl(int fd, int cmd, ...)
{
	FCNTL_BODY(false);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	FCNTL_BODY(true);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa,
		      socklen_t len)
{
	return fn_sendto(fd, buf, n, flags, sa, len);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return fn_sendmsg(fd, msg, flags);
}

EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	return fn_sendmmsg(fd, vec, vlen, flags);
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	return fn_recv(fd, buf, n, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *sa, socklen_t *len)
{
	return fn_recvfrom(fd, buf, n, flags, sa, len);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	return fn_recvmsg(fd, msg, flags);
}

EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		    struct timespec *timeout)
{
	return fn_recvmmsg(fd, vec, vlen, flags, timeout);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	return fn_read(fd, buf, n);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	return fn_readv(fd, iov, iovcnt);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		return LIBC(read_chk)(fd, buf, n, buflen); /* reports the overflow */
	return fn_read(fd, buf, n);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		return LIBC(recv_chk)(fd, buf, n, buflen, flags);
	return fn_recv(fd, buf, n, flags);
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
			      struct sockaddr *sa, socklen_t *len)
{
	if (n > buflen)
		return LIBC(recvfrom_chk)(fd, buf, n, buflen, flags, sa, len);
	return fn_recvfrom(fd, buf, n, flags, sa, len);
}
