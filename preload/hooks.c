/* hooks.c - the only symbols the shim exports: each interposed function
 * (declared in preload/hooks.list, whose signature FN_HOOK(name) gives) is
 * one line that hands over to the shim's internal function. Fortified
 * (_chk) variants keep their bounds check and join the same path. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "preload/base/libc.h"
#include "preload/dns/resolve.h"
#include "preload/intercept/intercept.h"
#include "preload/tls/gtrust.h"
#include "preload/tls/trust.h"

FN_HOOK(socket)
{
	return fn_socket(domain, type, protocol);
}

FN_HOOK(connect)
{
	return fn_connect(fd, sa, len);
}

FN_HOOK(accept)
{
	return fn_accept4(fd, sa, len, 0, false);
}

FN_HOOK(accept4)
{
	return fn_accept4(fd, sa, len, flags, true);
}

/* A tail call all the way to libc's dlopen, which reads its caller's
 * address to find the RUNPATH to search: the caller must stay the app. */
FN_HOOK(dlopen)
{
	return fn_dlopen(file, flags);
}

/* The resolver: dns rules, and the names connect rules with match.host
 * look for (preload/dns). */
FN_HOOK(getaddrinfo)
{
	return fn_getaddrinfo(node, service, hints, res);
}

FN_HOOK(getaddrinfo_a)
{
	return fn_getaddrinfo_a(mode, list, n, sevp);
}

FN_HOOK(gai_suspend)
{
	return fn_gai_suspend(list, n, timeout);
}

FN_HOOK(gai_cancel)
{
	return fn_gai_cancel(req);
}

FN_HOOK(gethostbyname)
{
	return fn_gethostbyname2(name, AF_INET, false);
}

FN_HOOK(gethostbyname2)
{
	return fn_gethostbyname2(name, af, true);
}

FN_HOOK(gethostbyname_r)
{
	return fn_gethostbyname2_r(name, AF_INET, ret, buf, buflen, result, h_errnop, false);
}

FN_HOOK(gethostbyname2_r)
{
	return fn_gethostbyname2_r(name, af, ret, buf, buflen, result, h_errnop, true);
}

FN_HOOK(getpeername)
{
	return fn_getpeername(fd, sa, len);
}

FN_HOOK(close)
{
	return fn_close(fd);
}

FN_HOOK(close_range)
{
	return fn_close_range(lo, hi, flags);
}

FN_HOOK(dup)
{
	return fn_dup(fd);
}

FN_HOOK(dup2)
{
	return fn_dup3(oldfd, newfd, 0, 2);
}

FN_HOOK(dup3)
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

FN_HOOK(fcntl)
{
	FCNTL_BODY(false);
}

FN_HOOK(fcntl64)
{
	FCNTL_BODY(true);
}

FN_HOOK(sendto)
{
	return fn_sendto(fd, buf, n, flags, sa, len);
}

FN_HOOK(sendmsg)
{
	return fn_sendmsg(fd, msg, flags);
}

FN_HOOK(sendmmsg)
{
	return fn_sendmmsg(fd, vec, vlen, flags);
}

FN_HOOK(recv)
{
	return fn_recv(fd, buf, n, flags);
}

FN_HOOK(recvfrom)
{
	return fn_recvfrom(fd, buf, n, flags, sa, len);
}

FN_HOOK(recvmsg)
{
	return fn_recvmsg(fd, msg, flags);
}

FN_HOOK(recvmmsg)
{
	return fn_recvmmsg(fd, vec, vlen, flags, timeout);
}

FN_HOOK(read)
{
	return fn_read(fd, buf, n);
}

FN_HOOK(readv)
{
	return fn_readv(fd, iov, iovcnt);
}

FN_HOOK(__read_chk)
{
	if (n > buflen)
		return LIBC(read_chk)(fd, buf, n, buflen); /* reports the overflow */
	return fn_read(fd, buf, n);
}

FN_HOOK(__recv_chk)
{
	if (n > buflen)
		return LIBC(recv_chk)(fd, buf, n, buflen, flags);
	return fn_recv(fd, buf, n, flags);
}

FN_HOOK(__recvfrom_chk)
{
	if (n > buflen)
		return LIBC(recvfrom_chk)(fd, buf, n, buflen, flags, sa, len);
	return fn_recvfrom(fd, buf, n, flags, sa, len);
}

/* The run's CA trusted by one verification the app's OpenSSL starts, for
 * a relay's leaf whose server passes the app's store (preload/tls/trust.c). */
FN_HOOK(X509_verify_cert)
{
	return fn_trust_verify(ctx, __builtin_return_address(0), (const void *)X509_verify_cert);
}

/* A relay's leaf met by the app's GnuTLS: judged by the server behind it
 * against the app's own trust list (preload/tls/gtrust.c). */
FN_HOOK(gnutls_certificate_verify_peers)
{
	return fn_gtrust_verify(FN_GT_PEERS, session, data, elements, NULL, status);
}

FN_HOOK(gnutls_certificate_verify_peers2)
{
	return fn_gtrust_verify(FN_GT_PEERS2, session, NULL, 0, NULL, status);
}

FN_HOOK(gnutls_certificate_verify_peers3)
{
	return fn_gtrust_verify(FN_GT_PEERS3, session, NULL, 0, hostname, status);
}
