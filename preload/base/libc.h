/* libc.h - the real libc functions behind every interposed symbol.
 * Each is looked up once with dlsym(RTLD_NEXT); the shim calls libc only
 * through these pointers so that it never re-enters its own hooks. */
#ifndef FAULTNET_LIBC_H
#define FAULTNET_LIBC_H

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fn_libc {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*close)(int);
	int (*close_range)(unsigned int, unsigned int, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*read_chk)(int, void *, size_t, size_t);
	ssize_t (*recv_chk)(int, void *, size_t, size_t, int);
	void *(*dlopen)(const char *, int);
	ssize_t (*recvfrom_chk)(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	int (*getaddrinfo_a)(int, struct gaicb **, int, struct sigevent *);
	int (*gai_suspend)(const struct gaicb *const *, int, const struct timespec *);
	int (*gai_cancel)(struct gaicb *);
	struct hostent *(*gethostbyname)(const char *);
	struct hostent *(*gethostbyname2)(const char *, int);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t, struct hostent **,
			       int *);
	int (*gethostbyname2_r)(const char *, int, struct hostent *, char *, size_t,
				struct hostent **, int *);
};

extern struct fn_libc fn_libc;

/* Resolves every pointer. Idempotent; called by the constructor and by the
 * first hook that runs before it (another library's constructor). */
void fn_libc_resolve(void);

/* The real function, resolving first if a hook runs before the constructor. */
#define LIBC(name)                                                \
	(__builtin_expect(fn_libc.name != NULL, 1) ? fn_libc.name \
						   : (fn_libc_resolve(), fn_libc.name))

/* recv, recvfrom, recvmsg, read and readv: never NULL (they start as stubs
 * that resolve, libc.c), so the hooks' pass-through is one jump. */
#define LIBC_HOT(name) (fn_libc.name)

#endif
